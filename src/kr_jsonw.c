/*
 * kr_jsonw.c - the direct JSON writer (see kr_jsonw.h).
 *
 * Strings are copied in runs: a table marks the bytes that end a run
 * (those to escape, and bytes >= 0x80, which make the whole string be
 * checked once with kr_utf8_valid); the buffer is reserved for the worst
 * case of a chunk (6 bytes per input byte: \u00XX) before the chunk is
 * written, so the inner loop checks no capacity.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "kr_codec.h"
#include "kr_jsonw.h"

/* Input bytes per reservation of a long string. */
#define KR_JSONW_CHUNK 4096
/* Strings up to this long are first checked whole for bytes to escape. */
#define KR_JSONW_SHORT 256

/*
 * What a string byte needs: 0 copy, 1 escape (below 0x20, '"', '\\'),
 * 2 >= 0x80 (the string's validity decides).
 */
static const uint8_t jw_class[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

static const char jw_hex[] = "0123456789ABCDEF";

void
kr_jsonw_init(struct kr_jsonw *w)
{
    memset(w, 0, sizeof(*w));
}

void
kr_jsonw_reset(struct kr_jsonw *w)
{
    char *buf = w->buf;
    size_t cap = w->cap;

    memset(w, 0, sizeof(*w));
    w->buf = buf;
    w->cap = cap;
    if (buf != NULL) {
        buf[0] = '\0';
    }
}

void
kr_jsonw_free(struct kr_jsonw *w)
{
    free(w->buf);
    kr_jsonw_init(w);
}

char *
kr_jsonw_take(struct kr_jsonw *w, size_t *len)
{
    char *s = w->failed || w->len == 0 ? NULL : w->buf;

    if (len != NULL) {
        *len = s != NULL ? w->len : 0;
    }
    if (s == NULL) {
        kr_jsonw_reset(w);
        return NULL;
    }
    kr_jsonw_init(w);
    return s;
}

/* Room for n more bytes and the NUL: the common case, inlined. */
static inline bool
jw_room(struct kr_jsonw *w, size_t n)
{
    return !w->failed && n < w->cap - w->len;
}

bool
kr_jsonw_reserve(struct kr_jsonw *w, size_t n)
{
    size_t need, cap;
    char *nb;

    if (w->failed) {
        return false;
    }
    if (n < w->cap - w->len) {          /* room for n bytes and the NUL */
        return true;
    }
    if (n > SIZE_MAX / 2 - w->len - 1) {
        w->failed = true;
        return false;
    }
    need = w->len + n + 1;
    cap = w->cap != 0 ? w->cap : 256;
    while (cap < need) {
        cap *= 2;
    }
    nb = realloc(w->buf, cap);
    if (nb == NULL) {
        w->failed = true;
        return false;
    }
    w->buf = nb;
    w->cap = cap;
    return true;
}

/* Append n bytes (reserved or not). */
static inline void
jw_put(struct kr_jsonw *w, const char *p, size_t n)
{
    if (jw_room(w, n) || kr_jsonw_reserve(w, n)) {
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        w->buf[w->len] = '\0';
    }
}

static inline bool
jw_bit(const uint64_t *set, unsigned d)
{
    return (set[d / 64] >> (d % 64)) & 1u;
}

static inline void
jw_setbit(uint64_t *set, unsigned d, bool on)
{
    if (on) {
        set[d / 64] |= (uint64_t)1 << (d % 64);
    } else {
        set[d / 64] &= ~((uint64_t)1 << (d % 64));
    }
}

/*
 * Before a value or a key: the comma when the container has a member
 * already (none after a key).  false when w failed.
 */
static inline bool
jw_sep(struct kr_jsonw *w)
{
    if (w->failed) {
        return false;
    }
    if (w->after_key) {
        w->after_key = false;
        return true;
    }
    if (w->depth > 0) {
        if (jw_bit(w->more, w->depth - 1)) {
            jw_put(w, ",", 1);
        } else {
            jw_setbit(w->more, w->depth - 1, true);
        }
    }
    return !w->failed;
}

static void
jw_open(struct kr_jsonw *w, bool obj)
{
    if (!jw_sep(w)) {
        return;
    }
    if (w->depth >= KR_JSONW_DEPTH) {
        w->failed = true;
        return;
    }
    jw_setbit(w->more, w->depth, false);
    jw_setbit(w->obj, w->depth, obj);
    w->depth++;
    jw_put(w, obj ? "{" : "[", 1);
}

static void
jw_close(struct kr_jsonw *w, bool obj)
{
    if (w->failed) {
        return;
    }
    if (w->depth == 0 || w->after_key ||
        jw_bit(w->obj, w->depth - 1) != obj) {
        w->failed = true;
        return;
    }
    w->depth--;
    jw_put(w, obj ? "}" : "]", 1);
}

void
kr_jsonw_obj_open(struct kr_jsonw *w)
{
    jw_open(w, true);
}

void
kr_jsonw_obj_close(struct kr_jsonw *w)
{
    jw_close(w, true);
}

void
kr_jsonw_arr_open(struct kr_jsonw *w)
{
    jw_open(w, false);
}

void
kr_jsonw_arr_close(struct kr_jsonw *w)
{
    jw_close(w, false);
}

/*
 * Bytes at the start of p[0..len) that need no escaping (class 0): eight
 * at a time while none of the eight is special (below 0x20, '"', '\\',
 * >= 0x80: the zero-byte tests of "Bit Twiddling Hacks", each exact for
 * whether some byte matches), then one at a time.
 */
static inline bool
jw_plain8(const uint8_t *p)
{
    const uint64_t ones = 0x0101010101010101u, hi = 0x8080808080808080u;
    uint64_t x, q, b;

    memcpy(&x, p, 8);
    q = x ^ (ones * '"');
    b = x ^ (ones * '\\');
    return ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) |
             ((b - ones) & ~b) | x) & hi) == 0;
}

static inline size_t
jw_plain_prefix(const uint8_t *p, size_t len)
{
    size_t i = 0;

    while (len - i >= 8 && jw_plain8(p + i)) {
        i += 8;
    }
    if (i > 0 && i < len && len - i < 8 && jw_plain8(p + len - 8)) {
        return len;                     /* the last eight, overlapping */
    }
    while (i < len && jw_class[p[i]] == 0) {
        i++;
    }
    return i;
}

/*
 * The quoted, escaped form of p[0..len), bytes >= 0x80 as '?' when the
 * string is not valid UTF-8 (see the header).  bad: 0 valid, 1 not,
 * -1 not known yet (checked at the first byte >= 0x80, once).
 */
static void
jw_string(struct kr_jsonw *w, const uint8_t *p, size_t len, int bad)
{
    size_t i = 0;

    /* Short strings that need no escaping (names, addresses, ids): one
       check of room, one copy. */
    if (len <= KR_JSONW_SHORT && jw_room(w, len + 2)) {
        i = jw_plain_prefix(p, len);
        if (i == len) {
            char *o = w->buf + w->len;

            o[0] = '"';
            if (len > 0) {
                memcpy(o + 1, p, len);  /* p may be NULL when len is 0 */
            }
            o[len + 1] = '"';
            o[len + 2] = '\0';
            w->len += len + 2;
            return;
        }
        i = 0;
    }
    if (!kr_jsonw_reserve(w, 2)) {
        return;
    }
    w->buf[w->len++] = '"';
    while (i < len) {
        size_t end = len - i > KR_JSONW_CHUNK ? i + KR_JSONW_CHUNK : len;
        char *o;

        /* worst case of the chunk, the closing quote and the NUL */
        if (!kr_jsonw_reserve(w, (end - i) * 6 + 1)) {
            return;
        }
        o = w->buf + w->len;
        while (i < end) {
            size_t run = i;
            uint8_t c;

            while (run < end && jw_class[p[run]] == 0) {
                run++;
            }
            memcpy(o, p + i, run - i);
            o += run - i;
            i = run;
            if (i == end) {
                break;
            }
            c = p[i++];
            if (c >= 0x80) {
                if (bad < 0) {
                    bad = !kr_utf8_valid(p, len);
                }
                *o++ = bad ? '?' : (char)c;
                continue;
            }
            *o++ = '\\';
            switch (c) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '\b': *o++ = 'b'; break;
            case '\f': *o++ = 'f'; break;
            case '\n': *o++ = 'n'; break;
            case '\r': *o++ = 'r'; break;
            case '\t': *o++ = 't'; break;
            default:
                *o++ = 'u';
                *o++ = '0';
                *o++ = '0';
                *o++ = jw_hex[c >> 4];
                *o++ = jw_hex[c & 0xf];
                break;
            }
        }
        w->len = (size_t)(o - w->buf);
    }
    w->buf[w->len++] = '"';
    w->buf[w->len] = '\0';
}

/* A string from outside: invalid UTF-8 gets the '?' rule. */
static void
jw_ustring(struct kr_jsonw *w, const char *s, size_t len)
{
    if (len > 0 && s == NULL) {
        w->failed = true;
        return;
    }
    jw_string(w, (const uint8_t *)s, len, -1);
}

void
kr_jsonw_keyn(struct kr_jsonw *w, const char *key, size_t len)
{
    /* The common case, a short key that needs no escaping (the callers'
       literals) in an object with room: written at once. */
    if (!w->after_key && w->depth > 0 && jw_bit(w->obj, w->depth - 1) &&
        len <= KR_JSONW_SHORT && key != NULL && jw_room(w, len + 4) &&
        jw_plain_prefix((const uint8_t *)key, len) == len) {
        char *o = w->buf + w->len;
        unsigned d = w->depth - 1;

        if (jw_bit(w->more, d)) {
            *o++ = ',';
        } else {
            jw_setbit(w->more, d, true);
        }
        *o++ = '"';
        memcpy(o, key, len);
        o += len;
        *o++ = '"';
        *o++ = ':';
        *o = '\0';
        w->len = (size_t)(o - w->buf);
        w->after_key = true;
        return;
    }
    if (w->failed) {
        return;
    }
    if (w->depth == 0 || w->after_key || !jw_bit(w->obj, w->depth - 1)) {
        w->failed = true;
        return;
    }
    if (!jw_sep(w)) {
        return;
    }
    jw_ustring(w, key, len);
    if (jw_room(w, 1)) {
        w->buf[w->len++] = ':';
        w->buf[w->len] = '\0';
    } else {
        jw_put(w, ":", 1);
    }
    w->after_key = !w->failed;
}

void
kr_jsonw_members_raw(struct kr_jsonw *w, const char *text, size_t len)
{
    if (w->failed) {
        return;
    }
    if (w->depth == 0 || w->after_key || !jw_bit(w->obj, w->depth - 1) ||
        !jw_bit(w->more, w->depth - 1) || (len > 0 && text[0] != ',')) {
        w->failed = true;
        return;
    }
    jw_put(w, text, len);
}

void
kr_jsonw_key(struct kr_jsonw *w, const char *key)
{
    kr_jsonw_keyn(w, key, key != NULL ? strlen(key) : 0);
}

void
kr_jsonw_str(struct kr_jsonw *w, const char *p, size_t len)
{
    if (jw_sep(w)) {
        jw_ustring(w, p, len);
    }
}

void
kr_jsonw_cstr(struct kr_jsonw *w, const char *s)
{
    if (s == NULL) {
        kr_jsonw_null(w);
        return;
    }
    kr_jsonw_str(w, s, strlen(s));
}

/* Decimal digits of v at the end of out[24]; returns the first. */
static char *
jw_u64(uint64_t v, char *end)
{
    char *p = end;

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return p;
}

void
kr_jsonw_int(struct kr_jsonw *w, int64_t v)
{
    char tmp[24], *p;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

    if (w->after_key && jw_room(w, sizeof(tmp))) {
        /* a member's value: no separator, room for any value */
        size_t n;

        p = jw_u64(u, tmp + sizeof(tmp));
        if (v < 0) {
            *--p = '-';
        }
        n = (size_t)(tmp + sizeof(tmp) - p);
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        w->buf[w->len] = '\0';
        w->after_key = false;
        return;
    }
    if (!jw_sep(w)) {
        return;
    }
    p = jw_u64(u, tmp + sizeof(tmp));
    if (v < 0) {
        *--p = '-';
    }
    jw_put(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

void
kr_jsonw_uint(struct kr_jsonw *w, uint64_t v)
{
    char tmp[24], *p;

    if (!jw_sep(w)) {
        return;
    }
    p = jw_u64(v, tmp + sizeof(tmp));
    jw_put(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

void
kr_jsonw_bool(struct kr_jsonw *w, bool v)
{
    if (jw_sep(w)) {
        jw_put(w, v ? "true" : "false", v ? 4 : 5);
    }
}

void
kr_jsonw_null(struct kr_jsonw *w)
{
    if (jw_sep(w)) {
        jw_put(w, "null", 4);
    }
}

void
kr_jsonw_raw(struct kr_jsonw *w, const char *json, size_t len)
{
    if (jw_sep(w)) {
        jw_put(w, json, len);
    }
}

void
kr_jsonw_json(struct kr_jsonw *w, const json_t *v)
{
    const char *key;
    json_t *m;
    size_t i, klen;

    if (w->failed) {
        return;
    }
    switch (v != NULL ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT:
        kr_jsonw_obj_open(w);
        /* insertion order, as json_dumps without JSON_SORT_KEYS */
#ifdef json_object_keylen_foreach
        json_object_keylen_foreach((json_t *)v, key, klen, m) {
#else
        json_object_foreach((json_t *)v, key, m) {
            klen = strlen(key);
#endif
            kr_jsonw_keyn(w, key, klen);
            kr_jsonw_json(w, m);
        }
        kr_jsonw_obj_close(w);
        break;
    case JSON_ARRAY:
        kr_jsonw_arr_open(w);
        for (i = 0; i < json_array_size(v); i++) {
            kr_jsonw_json(w, json_array_get(v, i));
        }
        kr_jsonw_arr_close(w);
        break;
    case JSON_STRING:
        if (jw_sep(w)) {
            /* jansson's strings are valid UTF-8 */
            jw_string(w, (const uint8_t *)json_string_value(v),
                      json_string_length(v), 0);
        }
        break;
    case JSON_INTEGER:
        kr_jsonw_int(w, (int64_t)json_integer_value(v));
        break;
    case JSON_REAL: {
        /* rare (float64 fields): jansson's own form, exactly */
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

        if (s == NULL) {
            w->failed = true;
            return;
        }
        kr_jsonw_raw(w, s, strlen(s));
        free(s);
        break;
    }
    case JSON_TRUE:
        kr_jsonw_bool(w, true);
        break;
    case JSON_FALSE:
        kr_jsonw_bool(w, false);
        break;
    case JSON_NULL:
        kr_jsonw_null(w);
        break;
    }
}

/*
 * A member in one step, the common case: an object open with no key
 * waiting, a short key that needs no escaping, room for it and vmax
 * bytes of value.  Writes the comma (when due) and the key and returns
 * where the value goes (the caller writes it, its NUL and w->len), or
 * NULL with nothing written (the caller takes the general path).
 */
static inline char *
jw_member(struct kr_jsonw *w, const char *key, size_t klen, size_t vmax)
{
    char *o;
    unsigned d;

    if (w->after_key || w->depth == 0 || key == NULL ||
        !jw_bit(w->obj, w->depth - 1) || klen > KR_JSONW_SHORT ||
        vmax > KR_JSONW_SHORT * 6 || !jw_room(w, klen + 4 + vmax) ||
        jw_plain_prefix((const uint8_t *)key, klen) != klen) {
        return NULL;
    }
    o = w->buf + w->len;
    d = w->depth - 1;
    if (jw_bit(w->more, d)) {
        *o++ = ',';
    } else {
        jw_setbit(w->more, d, true);
    }
    *o++ = '"';
    memcpy(o, key, klen);
    o += klen;
    *o++ = '"';
    *o++ = ':';
    return o;
}

void
kr_jsonw_kstr(struct kr_jsonw *w, const char *key, const char *p, size_t len)
{
    char *o;

    if (len <= KR_JSONW_SHORT && (p != NULL || len == 0) && key != NULL &&
        jw_plain_prefix((const uint8_t *)p, len) == len &&
        (o = jw_member(w, key, strlen(key), len + 2)) != NULL) {
        *o++ = '"';
        if (len > 0) {
            memcpy(o, p, len);
        }
        o += len;
        *o++ = '"';
        *o = '\0';
        w->len = (size_t)(o - w->buf);
        return;
    }
    kr_jsonw_key(w, key);
    kr_jsonw_str(w, p, len);
}

void
kr_jsonw_kcstr(struct kr_jsonw *w, const char *key, const char *s)
{
    if (s != NULL) {
        kr_jsonw_kstr(w, key, s, strlen(s));
        return;
    }
    kr_jsonw_key(w, key);
    kr_jsonw_cstr(w, s);
}

void
kr_jsonw_kint(struct kr_jsonw *w, const char *key, int64_t v)
{
    char tmp[24], *p, *o;
    uint64_t u;
    size_t n;

    if (key == NULL || (o = jw_member(w, key, strlen(key), sizeof(tmp))) ==
                           NULL) {
        kr_jsonw_key(w, key);
        kr_jsonw_int(w, v);
        return;
    }
    u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    p = jw_u64(u, tmp + sizeof(tmp));
    if (v < 0) {
        *--p = '-';
    }
    n = (size_t)(tmp + sizeof(tmp) - p);
    memcpy(o, p, n);
    o += n;
    *o = '\0';
    w->len = (size_t)(o - w->buf);
}

void
kr_jsonw_kbool(struct kr_jsonw *w, const char *key, bool v)
{
    kr_jsonw_key(w, key);
    kr_jsonw_bool(w, v);
}
