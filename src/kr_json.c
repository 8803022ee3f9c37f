/*
 * kr_json.c - the codec's JSON form (see kr_json.h).
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kr_json.h"

#define KR_JSON_UNKNOWN_TAGS "_unknownTaggedFields"
#define KR_JSON_STRING_MAX 32767 /* Kafka's limit for any string (int16) */

/* Walk state shared by both directions. */
struct kr_jctx {
    struct kr_arena *arena;           /* JSON -> tree */
    struct kr_json_recbuf *recs;      /* JSON -> tree */
    const struct kr_rbuf *payload;    /* tree -> JSON */
    unsigned flags;                   /* tree -> JSON */
    kr_json_redact_fn redact;         /* tree -> JSON: hook or NULL */
    void *redact_arg;
    const struct kr_node *parent;     /* tree -> JSON: node above */
    struct kr_codec_err *err;
    int16_t v;                        /* version of the node being walked */
    bool flex;
    size_t plen;                      /* used part of path */
    char path[256];
};

/* ---- helpers ------------------------------------------------------------- */

static void KR_PRINTF(3, 4)
jctx_fail(struct kr_jctx *c, int status, const char *fmt, ...)
{
    va_list ap;

    if (c->err == NULL) {
        return;
    }
    c->err->status = status;
    c->err->offset = 0;
    va_start(ap, fmt);
    vsnprintf(c->err->msg, sizeof(c->err->msg), fmt, ap);
    va_end(ap);
    snprintf(c->err->path, sizeof(c->err->path), "%s", c->path);
}

/* Append ".name" ("name" at the root) to the path; returns the old length. */
static size_t
path_push_name(struct kr_jctx *c, const char *name)
{
    size_t old = c->plen;
    int r;

    r = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "%s%s",
                 c->plen > 0 ? "." : "", name);
    if (r > 0) {
        c->plen += (size_t)r;
        if (c->plen >= sizeof(c->path)) {
            c->plen = sizeof(c->path) - 1;
        }
    }
    return old;
}

static size_t
path_push_index(struct kr_jctx *c, size_t i)
{
    size_t old = c->plen;
    int r;

    r = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "[%zu]", i);
    if (r > 0) {
        c->plen += (size_t)r;
        if (c->plen >= sizeof(c->path)) {
            c->plen = sizeof(c->path) - 1;
        }
    }
    return old;
}

static void
path_pop(struct kr_jctx *c, size_t old)
{
    c->plen = old;
    c->path[old] = '\0';
}

static void
jctx_init(struct kr_jctx *c, struct kr_codec_err *err, const char *prefix)
{
    memset(c, 0, sizeof(*c));
    c->err = err;
    if (err != NULL) {
        memset(err, 0, sizeof(*err));
    }
    if (prefix != NULL && prefix[0] != '\0') {
        path_push_name(c, prefix);
    }
}

/* ---- base64 -------------------------------------------------------------- */

static const char kr_b64_alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t
kr_base64_len(size_t len)
{
    return (len + 2) / 3 * 4 + 1;
}

size_t
kr_base64_encode(const uint8_t *p, size_t len, char *out)
{
    size_t i, o = 0;

    for (i = 0; i + 3 <= len; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

        out[o++] = kr_b64_alpha[x >> 18];
        out[o++] = kr_b64_alpha[(x >> 12) & 63];
        out[o++] = kr_b64_alpha[(x >> 6) & 63];
        out[o++] = kr_b64_alpha[x & 63];
    }
    if (len - i == 1) {
        uint32_t x = (uint32_t)p[i] << 16;

        out[o++] = kr_b64_alpha[x >> 18];
        out[o++] = kr_b64_alpha[(x >> 12) & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (len - i == 2) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

        out[o++] = kr_b64_alpha[x >> 18];
        out[o++] = kr_b64_alpha[(x >> 12) & 63];
        out[o++] = kr_b64_alpha[(x >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

static int
b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') {
        return ch - 'A';
    }
    if (ch >= 'a' && ch <= 'z') {
        return ch - 'a' + 26;
    }
    if (ch >= '0' && ch <= '9') {
        return ch - '0' + 52;
    }
    if (ch == '+') {
        return 62;
    }
    if (ch == '/') {
        return 63;
    }
    return -1;
}

long
kr_base64_decode(const char *s, size_t slen, uint8_t *out)
{
    size_t i, o = 0;

    if (slen % 4 != 0) {
        return -1;
    }
    for (i = 0; i < slen; i += 4) {
        int a = b64_val((unsigned char)s[i]);
        int b = b64_val((unsigned char)s[i + 1]);
        int c, d;
        bool last = i + 4 == slen;

        if (a < 0 || b < 0) {
            return -1;
        }
        if (last && s[i + 2] == '=' && s[i + 3] == '=') {
            if ((b & 15) != 0) {
                return -1;
            }
            out[o++] = (uint8_t)(a << 2 | b >> 4);
            break;
        }
        c = b64_val((unsigned char)s[i + 2]);
        if (c < 0) {
            return -1;
        }
        if (last && s[i + 3] == '=') {
            if ((c & 3) != 0) {
                return -1;
            }
            out[o++] = (uint8_t)(a << 2 | b >> 4);
            out[o++] = (uint8_t)((b & 15) << 4 | c >> 2);
            break;
        }
        d = b64_val((unsigned char)s[i + 3]);
        if (d < 0) {
            return -1;
        }
        out[o++] = (uint8_t)(a << 2 | b >> 4);
        out[o++] = (uint8_t)((b & 15) << 4 | c >> 2);
        out[o++] = (uint8_t)((c & 3) << 6 | d);
    }
    return (long)o;
}

/* ---- recbuf -------------------------------------------------------------- */

void
kr_json_recbuf_reset(struct kr_json_recbuf *rb)
{
    rb->len = 0;
}

void
kr_json_recbuf_free(struct kr_json_recbuf *rb)
{
    free(rb->p);
    memset(rb, 0, sizeof(*rb));
}

/* Make room for n more bytes; false on ENOMEM/overflow. */
static bool
recbuf_reserve(struct kr_json_recbuf *rb, size_t n)
{
    size_t want, cap;
    uint8_t *p;

    if (n > SIZE_MAX - rb->len) {
        return false;
    }
    want = rb->len + n;
    if (want <= rb->cap) {
        return true;
    }
    cap = rb->cap > 0 ? rb->cap : 256;
    while (cap < want) {
        if (cap > SIZE_MAX / 2) {
            cap = want;
            break;
        }
        cap *= 2;
    }
    p = realloc(rb->p, cap);
    if (p == NULL) {
        return false;
    }
    rb->p = p;
    rb->cap = cap;
    return true;
}

/* ---- tree -> JSON ------------------------------------------------------- */

/* Copy len bytes at off of rb into dst; false when outside rb. */
static bool
rbuf_copy(const struct kr_rbuf *rb, uint64_t off, size_t len, uint8_t *dst)
{
    int i;

    if (rb == NULL || off > rb->len || len > rb->len - off) {
        return false;
    }
    for (i = 0; i < rb->nseg && len > 0; i++) {
        size_t sl = rb->seg[i].iov_len;
        size_t n;

        if (off >= sl) {
            off -= sl;
            continue;
        }
        n = sl - (size_t)off;
        if (n > len) {
            n = len;
        }
        memcpy(dst, (const uint8_t *)rb->seg[i].iov_base + off, n);
        dst += n;
        len -= n;
        off = 0;
    }
    return len == 0;
}

static json_t *
b64_json(const uint8_t *p, size_t len)
{
    char stackbuf[256];
    char *buf = stackbuf;
    size_t need = kr_base64_len(len);
    size_t n;
    json_t *j;

    if (need > sizeof(stackbuf)) {
        buf = malloc(need);
        if (buf == NULL) {
            return NULL;
        }
    }
    n = kr_base64_encode(p, len, buf);
    j = json_stringn_nocheck(buf, n);  /* base64 is ASCII */
    if (buf != stackbuf) {
        free(buf);
    }
    return j;
}

/*
 * Length of the valid UTF-8 sequence at p[0..len), or 0 when invalid
 * (overlong, surrogate, above U+10FFFF, truncated, stray continuation).
 */
static size_t
utf8_seq(const uint8_t *p, size_t len)
{
    uint8_t b = p[0];

    if (b < 0x80) {
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf) {
        return len >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (b >= 0xe0 && b <= 0xef) {
        if (len < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) {
            return 0;
        }
        if ((b == 0xe0 && p[1] < 0xa0) || (b == 0xed && p[1] >= 0xa0)) {
            return 0;
        }
        return 3;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        if (len < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
            (p[3] & 0xc0) != 0x80) {
            return 0;
        }
        if ((b == 0xf0 && p[1] < 0x90) || (b == 0xf4 && p[1] >= 0x90)) {
            return 0;
        }
        return 4;
    }
    return 0;
}

/* A JSON string of p[0..len); invalid UTF-8 bytes become U+FFFD. */
static json_t *
str_json(const uint8_t *p, size_t len)
{
    uint8_t *buf;
    size_t i = 0, o = 0;
    json_t *j;

    j = json_stringn((const char *)p, len);
    if (j != NULL || len == 0) {
        return j;
    }
    if (len > SIZE_MAX / 3) {
        return NULL;
    }
    buf = malloc(len * 3);
    if (buf == NULL) {
        return NULL;
    }
    while (i < len) {
        size_t n = utf8_seq(p + i, len - i);

        if (n == 0) {
            buf[o++] = 0xef;
            buf[o++] = 0xbf;
            buf[o++] = 0xbd;
            i++;
        } else {
            memcpy(buf + o, p + i, n);
            o += n;
            i += n;
        }
    }
    j = json_stringn((const char *)buf, o);
    free(buf);
    return j;
}

static json_t *node_to_json(struct kr_jctx *c, const struct kr_node *n);

/* JSON of one value of type t (element struct via .u.node). */
static json_t *
val_to_json(struct kr_jctx *c, enum kr_type t, enum kr_type et,
            const struct kr_val *val)
{
    json_t *j = NULL;

    switch (t) {
    case KR_T_BOOL:
        return json_boolean(val->u.i != 0);
    case KR_T_INT8:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
    case KR_T_INT64:
        return json_integer((json_int_t)val->u.i);
    case KR_T_FLOAT64:
        if (isnan(val->u.f)) {
            return json_string("NaN");
        }
        if (isinf(val->u.f)) {
            return json_string(val->u.f > 0 ? "Infinity" : "-Infinity");
        }
        return json_real(val->u.f);
    case KR_T_STRING:
        if (val->is_null || val->u.s.len < 0) {
            return json_null();
        }
        return str_json(val->u.s.p, (size_t)val->u.s.len);
    case KR_T_BYTES:
        if (val->is_null || val->u.s.len < 0) {
            return json_null();
        }
        return b64_json(val->u.s.p, (size_t)val->u.s.len);
    case KR_T_UUID: {
        char buf[23];

        if (val->u.s.p == NULL || val->u.s.len != 16) {
            uint8_t zero[16] = {0};

            kr_uuid_format(zero, buf);
        } else {
            kr_uuid_format(val->u.s.p, buf);
        }
        return json_string(buf);
    }
    case KR_T_RECORDS: {
        uint8_t *tmp;
        size_t len;

        if (val->is_null || val->u.rec.len < 0) {
            return json_null();
        }
        len = (size_t)val->u.rec.len;
        if (c->flags & KR_JSON_RECORDS_SIZE) {
            return json_integer((json_int_t)len);
        }
        tmp = malloc(len > 0 ? len : 1);
        if (tmp == NULL) {
            break;
        }
        if (!rbuf_copy(c->payload, val->u.rec.off, len, tmp)) {
            free(tmp);
            jctx_fail(c, KR_EPROTO, "records slice (%llu, %zu) outside "
                      "the payload", (unsigned long long)val->u.rec.off,
                      len);
            return NULL;
        }
        j = b64_json(tmp, len);
        free(tmp);
        break;
    }
    case KR_T_STRUCT:
        if (val->is_null || val->u.node == NULL) {
            return json_null();
        }
        return node_to_json(c, val->u.node);
    case KR_T_ARRAY: {
        const struct kr_array *a = val->u.arr;
        uint32_t i;

        if (val->is_null || a == NULL) {
            return json_null();
        }
        j = json_array();
        if (j == NULL) {
            break;
        }
        if (et == KR_T_NONE) {
            et = (enum kr_type)a->elem_type;
        }
        for (i = 0; i < a->n; i++) {
            size_t old = path_push_index(c, i);
            json_t *e = val_to_json(c, et, KR_T_NONE, &a->items[i]);

            if (e == NULL || json_array_append_new(j, e) != 0) {
                json_decref(j);
                if (e != NULL || c->err == NULL || c->err->status == 0) {
                    jctx_fail(c, KR_ENOMEM, "out of memory");
                }
                return NULL;
            }
            path_pop(c, old);
        }
        return j;
    }
    default:
        jctx_fail(c, KR_EPROTO, "unknown field type %d", (int)t);
        return NULL;
    }
    if (j == NULL && (c->err == NULL || c->err->status == 0)) {
        jctx_fail(c, KR_ENOMEM, "out of memory");
    }
    return j;
}

static json_t *
unknown_tags_json(struct kr_jctx *c, const struct kr_node *n)
{
    json_t *arr = json_array();
    uint32_t i;

    if (arr == NULL) {
        return NULL;
    }
    for (i = 0; i < n->nunknown; i++) {
        const struct kr_rawtag *t = &n->unknown[i];
        json_t *o = json_object();
        json_t *d;

        if (o == NULL) {
            json_decref(arr);
            return NULL;
        }
        if (c->flags & KR_JSON_REDACT) {
            d = json_string(KR_JSON_REDACTED);
        } else {
            d = t->data.len > 0 ? b64_json(t->data.p, (size_t)t->data.len)
                                : json_string("");
        }
        if (json_object_set_new(o, "tag", json_integer(t->tag)) != 0 ||
            d == NULL || json_object_set_new(o, "data", d) != 0 ||
            json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* True when field i of n must be written as KR_JSON_REDACTED. */
static bool
redacted(struct kr_jctx *c, const struct kr_node *up, const struct kr_node *n,
         unsigned i)
{
    const struct kr_val *val = &n->vals[i];

    if (val->is_null) {
        return false;
    }
    if ((c->flags & KR_JSON_REDACT) && kr_json_secret(NULL, up, n, i)) {
        return true;
    }
    return c->redact != NULL && c->redact(c->redact_arg, up, n, i);
}

static json_t *
node_to_json(struct kr_jctx *c, const struct kr_node *n)
{
    const struct kr_struct_desc *sd;
    const struct kr_node *up = c->parent;
    json_t *o;
    unsigned i;

    if (n->struct_id >= kr_nstructs) {
        jctx_fail(c, KR_EPROTO, "bad struct id %u", (unsigned)n->struct_id);
        return NULL;
    }
    sd = &kr_structs[n->struct_id];
    o = json_object();
    if (o == NULL) {
        jctx_fail(c, KR_ENOMEM, "out of memory");
        return NULL;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *val = &n->vals[i];
        bool tagged = f->tag >= 0 && kr_vrange_has(f->tagged, n->version);
        size_t old;
        json_t *j;

        if (!kr_vrange_has(f->versions, n->version)) {
            continue;
        }
        if (tagged && !val->present) {
            continue;
        }
        old = path_push_name(c, f->name);
        if ((c->redact != NULL || (c->flags & KR_JSON_REDACT)) &&
            redacted(c, up, n, i)) {
            j = json_string(KR_JSON_REDACTED);
            if (j == NULL) {
                jctx_fail(c, KR_ENOMEM, "out of memory");
            }
        } else {
            c->parent = n;
            j = val_to_json(c, (enum kr_type)f->type,
                            (enum kr_type)f->elem_type, val);
            c->parent = up;
        }
        if (j == NULL) {
            json_decref(o);
            return NULL;
        }
        if (json_object_set_new(o, f->name, j) != 0) {
            json_decref(o);
            jctx_fail(c, KR_ENOMEM, "out of memory");
            return NULL;
        }
        path_pop(c, old);
    }
    if (n->nunknown > 0) {
        json_t *u = unknown_tags_json(c, n);

        if (u == NULL || json_object_set_new(o, KR_JSON_UNKNOWN_TAGS, u)) {
            json_decref(o);
            jctx_fail(c, KR_ENOMEM, "out of memory");
            return NULL;
        }
    }
    return o;
}

json_t *
kr_json_from_node(const struct kr_node *n, const struct kr_rbuf *payload,
                  unsigned flags, struct kr_codec_err *err)
{
    return kr_json_from_node_redact(n, payload, flags, NULL, NULL, err);
}

json_t *
kr_json_from_node_redact(const struct kr_node *n,
                         const struct kr_rbuf *payload, unsigned flags,
                         kr_json_redact_fn fn, void *arg,
                         struct kr_codec_err *err)
{
    struct kr_jctx c;

    jctx_init(&c, err, NULL);
    c.payload = payload;
    c.flags = flags;
    c.redact = fn;
    c.redact_arg = arg;
    if (n == NULL) {
        return json_null();
    }
    return node_to_json(&c, n);
}

json_t *
kr_json_from_msg(const struct kr_msg *m, const struct kr_rbuf *payload,
                 unsigned flags, struct kr_codec_err *err)
{
    return kr_json_from_msg_redact(m, payload, flags, NULL, NULL, err);
}

json_t *
kr_json_from_msg_redact(const struct kr_msg *m,
                        const struct kr_rbuf *payload, unsigned flags,
                        kr_json_redact_fn fn, void *arg,
                        struct kr_codec_err *err)
{
    struct kr_jctx c;
    json_t *o, *h, *b;

    jctx_init(&c, err, NULL);
    c.payload = payload;
    c.flags = flags;
    c.redact = fn;
    c.redact_arg = arg;
    o = json_object();
    if (o == NULL) {
        jctx_fail(&c, KR_ENOMEM, "out of memory");
        return NULL;
    }
    if (m->dir == KR_DIR_RESPONSE) {
        if (json_object_set_new(o, "apiKey", json_integer(m->api_key)) ||
            json_object_set_new(o, "apiVersion",
                                json_integer(m->api_version))) {
            json_decref(o);
            jctx_fail(&c, KR_ENOMEM, "out of memory");
            return NULL;
        }
    }
    path_push_name(&c, "header");
    h = m->header != NULL ? node_to_json(&c, m->header) : json_null();
    if (h == NULL) {
        json_decref(o);
        return NULL;
    }
    if (json_object_set_new(o, "header", h) != 0) {
        json_decref(o);
        jctx_fail(&c, KR_ENOMEM, "out of memory");
        return NULL;
    }
    path_pop(&c, 0);
    b = m->body != NULL ? node_to_json(&c, m->body) : json_null();
    if (b == NULL) {
        json_decref(o);
        return NULL;
    }
    if (json_object_set_new(o, "body", b) != 0) {
        json_decref(o);
        jctx_fail(&c, KR_ENOMEM, "out of memory");
        return NULL;
    }
    return o;
}

/* ---- redaction policy --------------------------------------------------- */

static bool
ends_with_ci(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);

    return len >= n && strncasecmp(s + len - n, suffix, n) == 0;
}

static bool
contains_ci(const char *s, size_t len, const char *needle)
{
    size_t n = strlen(needle), i;

    for (i = 0; i + n <= len; i++) {
        if (strncasecmp(s + i, needle, n) == 0) {
            return true;
        }
    }
    return false;
}

bool
kr_json_config_sensitive(const char *name, size_t len)
{
    static const char *const inner[] = {
        "password", "secret", "passphrase", "credentials"
    };
    static const char *const tail[] = {
        "sasl.jaas.config", ".key", "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates"
    };
    size_t i;

    if (name == NULL) {
        return false;
    }
    for (i = 0; i < KR_ARRAY_LEN(inner); i++) {
        if (contains_ci(name, len, inner[i])) {
            return true;
        }
    }
    for (i = 0; i < KR_ARRAY_LEN(tail); i++) {
        if (ends_with_ci(name, len, tail[i])) {
            return true;
        }
    }
    return false;
}

/* The value of field id of type t in n when it exists at n's version. */
static const struct kr_val *
field_at(const struct kr_node *n, enum kr_field_id id, enum kr_type t)
{
    int i;
    const struct kr_field_desc *f;

    if (n == NULL || n->struct_id >= kr_nstructs) {
        return NULL;
    }
    i = kr_struct_field_index_id(n->struct_id, id);
    if (i < 0) {
        return NULL;
    }
    f = kr_node_field(n, (unsigned)i);
    if (f->type != t || !kr_vrange_has(f->versions, n->version)) {
        return NULL;
    }
    return &n->vals[i];
}

static bool
is_sensitive(const struct kr_node *n)
{
    const struct kr_val *v = field_at(n, KR_FIELD_IS_SENSITIVE, KR_T_BOOL);

    return v != NULL && v->u.i != 0;
}

bool
kr_json_secret(void *arg, const struct kr_node *parent,
               const struct kr_node *n, unsigned field)
{
    static const enum kr_field_id secrets[] = {
        KR_FIELD_AUTH_BYTES, KR_FIELD_HMAC, KR_FIELD_SALT,
        KR_FIELD_SALTED_PASSWORD, KR_FIELD_REQUEST_DATA,
        KR_FIELD_RESPONSE_DATA
    };
    const struct kr_field_desc *f;
    const struct kr_val *name;
    size_t i;

    (void)arg;
    if (n == NULL || n->struct_id >= kr_nstructs ||
        field >= kr_structs[n->struct_id].nfields) {
        return false;
    }
    f = kr_node_field(n, field);
    for (i = 0; i < KR_ARRAY_LEN(secrets); i++) {
        if (f->id == secrets[i]) {
            return true;
        }
    }
    if (f->type != KR_T_STRING || f->id != KR_FIELD_VALUE) {
        return false;
    }
    if (is_sensitive(n) || is_sensitive(parent)) {
        return true;
    }
    name = field_at(n, KR_FIELD_NAME, KR_T_STRING);
    return name != NULL && !name->is_null && name->u.s.len > 0 &&
           name->u.s.p != NULL &&
           kr_json_config_sensitive((const char *)name->u.s.p,
                                    (size_t)name->u.s.len);
}

/* ---- JSON -> tree ------------------------------------------------------- */

static const char *
json_type_str(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    default: return "?";
    }
}

static int
wrong_type(struct kr_jctx *c, const char *want, const json_t *j)
{
    jctx_fail(c, KR_EPROTO, "expected %s, got %s", want, json_type_str(j));
    return KR_EPROTO;
}

static int
nomem(struct kr_jctx *c)
{
    jctx_fail(c, KR_ENOMEM, "out of memory");
    return KR_ENOMEM;
}

/* Decode base64 JSON string j into arena memory. */
static int
b64_from_json(struct kr_jctx *c, const json_t *j, struct kr_str *out)
{
    const char *s;
    size_t slen;
    uint8_t *p;
    long n;

    if (!json_is_string(j)) {
        return wrong_type(c, "a base64 string", j);
    }
    s = json_string_value(j);
    slen = json_string_length(j);
    if (slen / 4 * 3 > INT32_MAX) {
        jctx_fail(c, KR_EPROTO, "bytes value too long");
        return KR_EPROTO;
    }
    p = kr_arena_alloc(c->arena, slen / 4 * 3 + 1);
    if (p == NULL) {
        return nomem(c);
    }
    n = kr_base64_decode(s, slen, p);
    if (n < 0) {
        jctx_fail(c, KR_EPROTO, "invalid base64");
        return KR_EPROTO;
    }
    out->p = p;
    out->len = (int32_t)n;
    return KR_OK;
}

static int
int_from_json(struct kr_jctx *c, enum kr_type t, const json_t *j,
              int64_t *out)
{
    int64_t lo, hi, x;

    if (!json_is_integer(j)) {
        return wrong_type(c, "an integer", j);
    }
    switch (t) {
    case KR_T_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case KR_T_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case KR_T_UINT16: lo = 0; hi = UINT16_MAX; break;
    case KR_T_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    case KR_T_UINT32: lo = 0; hi = UINT32_MAX; break;
    default: lo = INT64_MIN; hi = INT64_MAX; break;
    }
    x = (int64_t)json_integer_value(j);
    if (x < lo || x > hi) {
        jctx_fail(c, KR_EPROTO, "%lld out of range for %s", (long long)x,
                  kr_type_name(t));
        return KR_EPROTO;
    }
    *out = x;
    return KR_OK;
}

static int fill_node(struct kr_jctx *c, const json_t *j, struct kr_node *n);

static int
node_from_json(struct kr_jctx *c, const json_t *j, uint16_t sid,
               struct kr_node **out)
{
    struct kr_node *n = kr_node_new(c->arena, sid, c->v);

    if (n == NULL) {
        return nomem(c);
    }
    *out = n;
    return fill_node(c, j, n);
}

/*
 * Set *val from j for a value of type t (arrays: element type et and
 * struct sid).  nullable: null allowed here.
 */
static int
val_from_json(struct kr_jctx *c, const json_t *j, enum kr_type t,
              enum kr_type et, uint16_t sid, bool nullable,
              struct kr_val *val)
{
    int rc;

    if (json_is_null(j)) {
        switch (t) {
        case KR_T_STRING:
        case KR_T_BYTES:
            if (!nullable) {
                break;
            }
            val->is_null = 1;
            val->u.s.p = NULL;
            val->u.s.len = -1;
            return KR_OK;
        case KR_T_RECORDS:
            if (!nullable) {
                break;
            }
            val->is_null = 1;
            val->u.rec.off = 0;
            val->u.rec.len = -1;
            return KR_OK;
        case KR_T_STRUCT:
            if (!nullable) {
                break;
            }
            val->is_null = 1;
            val->u.node = NULL;
            return KR_OK;
        case KR_T_ARRAY:
            if (!nullable) {
                break;
            }
            val->is_null = 1;
            val->u.arr = NULL;
            return KR_OK;
        default:
            break;
        }
        jctx_fail(c, KR_EPROTO, "null not allowed for %s at version %d",
                  kr_type_name(t), (int)c->v);
        return KR_EPROTO;
    }
    val->is_null = 0;
    switch (t) {
    case KR_T_BOOL:
        if (!json_is_boolean(j)) {
            return wrong_type(c, "a boolean", j);
        }
        val->u.i = json_is_true(j) ? 1 : 0;
        return KR_OK;
    case KR_T_INT8:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
    case KR_T_INT64:
        return int_from_json(c, t, j, &val->u.i);
    case KR_T_FLOAT64:
        if (json_is_number(j)) {
            val->u.f = json_number_value(j);
            return KR_OK;
        }
        if (json_is_string(j)) {
            const char *s = json_string_value(j);

            if (strcmp(s, "NaN") == 0) {
                val->u.f = NAN;
                return KR_OK;
            }
            if (strcmp(s, "Infinity") == 0) {
                val->u.f = INFINITY;
                return KR_OK;
            }
            if (strcmp(s, "-Infinity") == 0) {
                val->u.f = -INFINITY;
                return KR_OK;
            }
        }
        return wrong_type(c, "a number, \"NaN\", \"Infinity\" or "
                          "\"-Infinity\"", j);
    case KR_T_STRING: {
        size_t len;
        uint8_t *p;

        if (!json_is_string(j)) {
            return wrong_type(c, "a string", j);
        }
        len = json_string_length(j);
        if (len > KR_JSON_STRING_MAX) {
            jctx_fail(c, KR_EPROTO, "string of %zu bytes is longer than "
                      "%d", len, KR_JSON_STRING_MAX);
            return KR_EPROTO;
        }
        p = kr_arena_alloc(c->arena, len + 1);
        if (p == NULL) {
            return nomem(c);
        }
        memcpy(p, json_string_value(j), len);
        val->u.s.p = p;
        val->u.s.len = (int32_t)len;
        return KR_OK;
    }
    case KR_T_BYTES:
        return b64_from_json(c, j, &val->u.s);
    case KR_T_UUID: {
        uint8_t *p;

        if (!json_is_string(j)) {
            return wrong_type(c, "a uuid string", j);
        }
        p = kr_arena_alloc(c->arena, 16);
        if (p == NULL) {
            return nomem(c);
        }
        if (json_string_length(j) != 22 ||
            !kr_uuid_parse(json_string_value(j), p)) {
            jctx_fail(c, KR_EPROTO, "invalid uuid (want 22 base64url "
                      "characters)");
            return KR_EPROTO;
        }
        val->u.s.p = p;
        val->u.s.len = 16;
        return KR_OK;
    }
    case KR_T_RECORDS: {
        const char *s;
        size_t slen, room;
        long n;

        if (!json_is_string(j)) {
            return wrong_type(c, "a base64 string", j);
        }
        if (c->recs == NULL) {
            jctx_fail(c, KR_EPROTO, "records given but no records buffer");
            return KR_EPROTO;
        }
        s = json_string_value(j);
        slen = json_string_length(j);
        room = slen / 4 * 3;
        if (room > INT32_MAX) {
            jctx_fail(c, KR_EPROTO, "records value too long");
            return KR_EPROTO;
        }
        if (!recbuf_reserve(c->recs, room)) {
            return nomem(c);
        }
        /*
         * A string shorter than one base64 quantum reserves nothing, and
         * the buffer may still be NULL: never form NULL + offset.
         */
        if (slen == 0) {
            n = 0;
        } else if (room == 0) {
            n = -1;
        } else {
            n = kr_base64_decode(s, slen, c->recs->p + c->recs->len);
        }
        if (n < 0) {
            jctx_fail(c, KR_EPROTO, "invalid base64");
            return KR_EPROTO;
        }
        val->u.rec.off = c->recs->len;
        val->u.rec.len = (int32_t)n;
        c->recs->len += (size_t)n;
        return KR_OK;
    }
    case KR_T_STRUCT:
        if (!json_is_object(j)) {
            return wrong_type(c, "an object", j);
        }
        return node_from_json(c, j, sid, &val->u.node);
    case KR_T_ARRAY: {
        struct kr_array *a;
        size_t i, n;

        if (!json_is_array(j)) {
            return wrong_type(c, "an array", j);
        }
        n = json_array_size(j);
        if (n > INT32_MAX) {
            jctx_fail(c, KR_EPROTO, "array too long");
            return KR_EPROTO;
        }
        a = kr_array_new(c->arena, et, sid, (uint32_t)n, c->v);
        if (a == NULL) {
            return nomem(c);
        }
        for (i = 0; i < n; i++) {
            size_t old = path_push_index(c, i);
            struct kr_val *e = &a->items[i];

            if (et == KR_T_STRUCT) {
                if (!json_is_object(json_array_get(j, i))) {
                    return wrong_type(c, "an object", json_array_get(j, i));
                }
                if (e->u.node == NULL) {
                    rc = node_from_json(c, json_array_get(j, i), sid,
                                        &e->u.node);
                } else {
                    rc = fill_node(c, json_array_get(j, i), e->u.node);
                }
            } else {
                rc = val_from_json(c, json_array_get(j, i), et, KR_T_NONE,
                                   KR_NO_STRUCT, false, e);
            }
            if (rc != KR_OK) {
                return rc;
            }
            e->present = 1;
            e->is_null = 0;
            path_pop(c, old);
        }
        val->u.arr = a;
        return KR_OK;
    }
    default:
        jctx_fail(c, KR_EPROTO, "unknown field type %d", (int)t);
        return KR_EPROTO;
    }
}

static int
cmp_rawtag(const void *a, const void *b)
{
    const struct kr_rawtag *x = a, *y = b;

    return x->tag < y->tag ? -1 : x->tag > y->tag;
}

/* "_unknownTaggedFields" of node n. */
static int
unknown_from_json(struct kr_jctx *c, const json_t *j, struct kr_node *n)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    struct kr_rawtag *tags;
    size_t i, cnt;

    if (!c->flex) {
        jctx_fail(c, KR_EPROTO, "tagged fields in a non-flexible version");
        return KR_EPROTO;
    }
    if (!json_is_array(j)) {
        return wrong_type(c, "an array", j);
    }
    cnt = json_array_size(j);
    if (cnt == 0) {
        n->unknown = NULL;
        n->nunknown = 0;
        return KR_OK;
    }
    if (cnt > UINT32_MAX / sizeof(*tags)) {
        jctx_fail(c, KR_EPROTO, "too many tagged fields");
        return KR_EPROTO;
    }
    tags = kr_arena_alloc(c->arena, cnt * sizeof(*tags));
    if (tags == NULL) {
        return nomem(c);
    }
    for (i = 0; i < cnt; i++) {
        const json_t *e = json_array_get(j, i);
        const json_t *jt, *jd;
        size_t old = path_push_index(c, i);
        unsigned k;
        int rc;

        if (!json_is_object(e)) {
            return wrong_type(c, "an object", e);
        }
        jt = json_object_get(e, "tag");
        jd = json_object_get(e, "data");
        if (jt == NULL || jd == NULL || json_object_size(e) != 2) {
            jctx_fail(c, KR_EPROTO, "want exactly {\"tag\": N, "
                      "\"data\": \"<base64>\"}");
            return KR_EPROTO;
        }
        /*
         * Tags are unsigned varints on the wire: Kafka's Java reader and
         * writer carry them as a 32-bit int and accept the whole uint32
         * range, so the codec does too, and so must the JSON form.
         */
        if (!json_is_integer(jt) || json_integer_value(jt) < 0 ||
            json_integer_value(jt) > (json_int_t)UINT32_MAX) {
            jctx_fail(c, KR_EPROTO, "tag must be an integer in 0..%u",
                      (unsigned)UINT32_MAX);
            return KR_EPROTO;
        }
        tags[i].tag = (uint32_t)json_integer_value(jt);
        for (k = 0; k < sd->nfields; k++) {
            const struct kr_field_desc *f = kr_node_field(n, k);

            if (f->tag >= 0 && (uint32_t)f->tag == tags[i].tag &&
                kr_vrange_has(f->tagged, c->v)) {
                jctx_fail(c, KR_EPROTO, "tag %u is the known field %s",
                          (unsigned)tags[i].tag, f->name);
                return KR_EPROTO;
            }
        }
        path_push_name(c, "data");
        rc = b64_from_json(c, jd, &tags[i].data);
        if (rc != KR_OK) {
            return rc;
        }
        path_pop(c, old);
    }
    qsort(tags, cnt, sizeof(*tags), cmp_rawtag);
    for (i = 1; i < cnt; i++) {
        if (tags[i].tag == tags[i - 1].tag) {
            jctx_fail(c, KR_EPROTO, "tag %u given twice",
                      (unsigned)tags[i].tag);
            return KR_EPROTO;
        }
    }
    n->unknown = tags;
    n->nunknown = (uint32_t)cnt;
    return KR_OK;
}

static int
fill_node(struct kr_jctx *c, const json_t *j, struct kr_node *n)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    const char *key;
    json_t *jv;

    if (!json_is_object(j)) {
        return wrong_type(c, "an object", j);
    }
    json_object_foreach((json_t *)j, key, jv) {
        size_t old = path_push_name(c, key);
        const struct kr_field_desc *f = NULL;
        bool named = false;
        unsigned i, idx = 0;
        int rc;

        if (strcmp(key, KR_JSON_UNKNOWN_TAGS) == 0) {
            rc = unknown_from_json(c, jv, n);
            if (rc != KR_OK) {
                return rc;
            }
            path_pop(c, old);
            continue;
        }
        for (i = 0; i < sd->nfields; i++) {
            const struct kr_field_desc *fi = kr_node_field(n, i);

            if (strcmp(fi->name, key) != 0) {
                continue;
            }
            named = true;
            if (kr_vrange_has(fi->versions, c->v)) {
                f = fi;
                idx = i;
                break;
            }
        }
        if (f == NULL) {
            if (named) {
                jctx_fail(c, KR_EPROTO, "field not in version %d of %s",
                          (int)c->v, sd->name);
            } else {
                jctx_fail(c, KR_EPROTO, "unknown field of %s", sd->name);
            }
            return KR_EPROTO;
        }
        rc = val_from_json(c, jv, (enum kr_type)f->type,
                           (enum kr_type)f->elem_type, f->struct_id,
                           kr_vrange_has(f->nullable, c->v), &n->vals[idx]);
        if (rc != KR_OK) {
            return rc;
        }
        n->vals[idx].present = 1;
        path_pop(c, old);
    }
    return KR_OK;
}

int
kr_json_to_node(struct kr_arena *arena, const json_t *j, uint16_t sid,
                int16_t v, bool flexible, const char *path_prefix,
                struct kr_json_recbuf *recs, struct kr_node **out,
                struct kr_codec_err *err)
{
    struct kr_jctx c;

    jctx_init(&c, err, path_prefix);
    c.arena = arena;
    c.recs = recs;
    c.v = v;
    c.flex = flexible;
    *out = NULL;
    if (sid >= kr_nstructs) {
        jctx_fail(&c, KR_EPROTO, "bad struct id %u", (unsigned)sid);
        return KR_EPROTO;
    }
    if (!json_is_object(j)) {
        return wrong_type(&c, "an object", j);
    }
    return node_from_json(&c, j, sid, out);
}

/* Integer member key of o in [lo, hi] into *out; error path = path. */
static int
get_int_member(struct kr_jctx *c, const json_t *o, const char *key,
               const char *path, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *j = json_object_get(o, key);
    size_t old = path_push_name(c, path);

    if (j == NULL) {
        jctx_fail(c, KR_EPROTO, "required field missing");
        return KR_EPROTO;
    }
    if (!json_is_integer(j)) {
        return wrong_type(c, "an integer", j);
    }
    if (json_integer_value(j) < lo || json_integer_value(j) > hi) {
        jctx_fail(c, KR_EPROTO, "%lld out of range",
                  (long long)json_integer_value(j));
        return KR_EPROTO;
    }
    *out = (int64_t)json_integer_value(j);
    path_pop(c, old);
    return KR_OK;
}

int
kr_json_to_msg(struct kr_arena *arena, const json_t *j,
               struct kr_json_recbuf *recs, struct kr_msg *m,
               struct kr_codec_err *err)
{
    struct kr_jctx c;
    const struct kr_api_desc *api;
    const json_t *jh, *jb, *jv;
    const char *key;
    struct kr_val *cid;
    int64_t k, v;
    uint16_t hsid, bsid;
    bool hflex;
    int hv, rc;

    jctx_init(&c, err, NULL);
    memset(m, 0, sizeof(*m));
    if (!json_is_object(j)) {
        return wrong_type(&c, "an object", j);
    }
    json_object_foreach((json_t *)j, key, jv) {
        if (strcmp(key, "header") != 0 && strcmp(key, "body") != 0 &&
            strcmp(key, "apiKey") != 0 && strcmp(key, "apiVersion") != 0) {
            path_push_name(&c, key);
            jctx_fail(&c, KR_EPROTO, "unknown key (want header, body, and "
                      "for a response apiKey, apiVersion)");
            return KR_EPROTO;
        }
    }
    jh = json_object_get(j, "header");
    jb = json_object_get(j, "body");
    if (jh != NULL && !json_is_object(jh)) {
        path_push_name(&c, "header");
        return wrong_type(&c, "an object", jh);
    }
    if (jb != NULL && !json_is_object(jb)) {
        path_push_name(&c, "body");
        return wrong_type(&c, "an object", jb);
    }
    if (json_object_get(j, "apiKey") != NULL ||
        json_object_get(j, "apiVersion") != NULL) {
        m->dir = KR_DIR_RESPONSE;
        rc = get_int_member(&c, j, "apiKey", "apiKey", INT16_MIN, INT16_MAX,
                            &k);
        if (rc == KR_OK) {
            rc = get_int_member(&c, j, "apiVersion", "apiVersion",
                                INT16_MIN, INT16_MAX, &v);
        }
    } else {
        m->dir = KR_DIR_REQUEST;
        if (jh == NULL) {
            path_push_name(&c, "header");
            jctx_fail(&c, KR_EPROTO, "missing (a request needs "
                      "RequestApiKey and RequestApiVersion)");
            return KR_EPROTO;
        }
        rc = get_int_member(&c, jh, "RequestApiKey", "header.RequestApiKey",
                            INT16_MIN, INT16_MAX, &k);
        if (rc == KR_OK) {
            rc = get_int_member(&c, jh, "RequestApiVersion",
                                "header.RequestApiVersion", INT16_MIN,
                                INT16_MAX, &v);
        }
    }
    if (rc != KR_OK) {
        return rc;
    }
    m->api_key = (int16_t)k;
    m->api_version = (int16_t)v;
    api = kr_api_get(m->api_key);
    bsid = api != NULL ? kr_api_root(api, m->dir == KR_DIR_RESPONSE,
                                     m->api_version) : KR_NO_STRUCT;
    if (bsid == KR_NO_STRUCT) {
        path_push_name(&c, m->dir == KR_DIR_RESPONSE ? "apiKey"
                                                     : "header.RequestApiKey");
        jctx_fail(&c, KR_EUNSUPPORTED, "unsupported ApiKey %d version %d",
                  (int)m->api_key, (int)m->api_version);
        return KR_EUNSUPPORTED;
    }
    if (m->dir == KR_DIR_RESPONSE) {
        hv = kr_response_header_version(m->api_key, m->api_version);
        hsid = kr_response_header_struct;
        hflex = hv >= 1;
    } else {
        hv = kr_request_header_version(m->api_key, m->api_version);
        hsid = kr_request_header_struct;
        hflex = hv >= 2;
    }
    if (hv < 0) {
        jctx_fail(&c, KR_EUNSUPPORTED, "no header version for ApiKey %d "
                  "version %d", (int)m->api_key, (int)m->api_version);
        return KR_EUNSUPPORTED;
    }
    m->hdr_version = (int16_t)hv;

    /* header */
    c.arena = arena;
    c.recs = recs;
    c.v = (int16_t)hv;
    c.flex = hflex;
    path_push_name(&c, "header");
    if (jh != NULL) {
        rc = node_from_json(&c, jh, hsid, &m->header);
    } else {
        m->header = kr_node_new(arena, hsid, (int16_t)hv);
        rc = m->header != NULL ? KR_OK : nomem(&c);
    }
    if (rc != KR_OK) {
        return rc;
    }
    path_pop(&c, 0);
    cid = kr_node_get_id(m->header, KR_FIELD_CORRELATION_ID);
    m->correlation_id = cid != NULL ? (int32_t)cid->u.i : 0;

    /* body */
    c.v = m->api_version;
    c.flex = kr_api_flexible(api, m->api_version);
    if (jb != NULL) {
        rc = node_from_json(&c, jb, bsid, &m->body);
    } else {
        m->body = kr_node_new(arena, bsid, m->api_version);
        rc = m->body != NULL ? KR_OK : nomem(&c);
    }
    return rc;
}
