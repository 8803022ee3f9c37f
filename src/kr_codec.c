/*
 * kr_codec.c - the one generic decoder and encoder over the schema tables
 * (see kr_codec.h for the contract, kr_schema.h for the tables).
 *
 * Wire rules (Kafka's generator, clients/src/main/java/org/apache/kafka/
 * common/protocol and the schemas' README):
 *   - classic versions: int16-length strings, int32-length bytes/records,
 *     int32 array counts, -1 for null;
 *   - flexible versions: uvarint length+1 / count+1 (0 for null) and a
 *     tagged-field section (uvarint count, then uvarint tag, uvarint size,
 *     payload) at the end of every struct, tags in ascending order;
 *   - a field-level flexibleVersions (RequestHeader.ClientId: "none")
 *     overrides the message's flexible flag for that field;
 *   - a nullable single struct is preceded by an int8 marker, -1 null,
 *     1 present.
 *
 * Decoding reads a segmented payload with a cursor; a value that lies in
 * one segment is read in place (fast path), one that straddles segments
 * is assembled byte by byte (scalars) or copied into the arena (strings,
 * bytes, uuids).  Records are never read: only their slice is kept.
 * Error paths ("Topics[0].Partitions[1].Partition") are built while
 * unwinding, so the success path pays nothing for them.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_codec.h"

/* Kafka nests at most 6 levels; anything deeper is hostile. */
#define KR_MAX_DEPTH 16
/* Kafka: strings longer than this are refused on read and write. */
#define KR_STR_MAX 0x7fff

#define KR_LIKELY(x) __builtin_expect(!!(x), 1)
#define KR_UNLIKELY(x) __builtin_expect(!!(x), 0)

static const uint8_t kr_zero16[16];
static const uint8_t kr_empty[1];

/* ---- errors -------------------------------------------------------------- */

static int err_set(struct kr_codec_err *err, int status, size_t off,
                   const char *fmt, ...) KR_PRINTF(4, 5);

static int
err_set(struct kr_codec_err *err, int status, size_t off, const char *fmt,
        ...)
{
    va_list ap;

    err->status = status;
    err->offset = off;
    err->path[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return status;
}

/*
 * Put pre in front of err->path, joined with '.' unless the path is empty
 * or starts with an index.  Truncates the tail when the path is full.
 */
void
kr_codec_err_prepend(struct kr_codec_err *err, const char *pre)
{
    size_t cap = sizeof(err->path) - 1;
    size_t pl = strlen(pre);
    size_t ol = strnlen(err->path, cap);
    size_t sep = (ol > 0 && err->path[0] != '[') ? 1 : 0;
    size_t keep = ol;

    if (pl + sep > cap) {
        pl = cap - sep;
    }
    if (pl + sep + keep > cap) {
        keep = cap - pl - sep;
    }
    memmove(err->path + pl + sep, err->path, keep);
    memcpy(err->path, pre, pl);
    if (sep) {
        err->path[pl] = '.';
    }
    err->path[pl + sep + keep] = '\0';
}

void
kr_codec_err_prepend_index(struct kr_codec_err *err, uint32_t i)
{
    char buf[16];

    snprintf(buf, sizeof(buf), "[%u]", (unsigned)i);
    kr_codec_err_prepend(err, buf);
}

static void
err_clear(struct kr_codec_err *err)
{
    err->status = KR_OK;
    err->offset = 0;
    err->msg[0] = '\0';
    err->path[0] = '\0';
}

/* ---- byte order ---------------------------------------------------------- */

static inline uint16_t
ld16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t
ld32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t
ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) << 32 | ld32(p + 4);
}

/* ---- misc ---------------------------------------------------------------- */

bool
kr_utf8_valid(const uint8_t *p, size_t len)
{
    size_t i = 0;

    while (i < len) {
        uint8_t c = p[i];

        if (c < 0x80) {
            if (len - i >= 8) {
                uint64_t x;

                memcpy(&x, p + i, 8);
                if ((x & 0x8080808080808080ull) == 0) {
                    i += 8;
                    continue;
                }
            }
            i++;
            continue;
        }
        if (c < 0xc2) {
            return false;       /* stray continuation or overlong */
        }
        if (c < 0xe0) {
            if (len - i < 2 || (p[i + 1] & 0xc0) != 0x80) {
                return false;
            }
            i += 2;
        } else if (c < 0xf0) {
            uint8_t lo = 0x80, hi = 0xbf;

            if (c == 0xe0) {
                lo = 0xa0;      /* overlong */
            } else if (c == 0xed) {
                hi = 0x9f;      /* surrogates */
            }
            if (len - i < 3 || p[i + 1] < lo || p[i + 1] > hi ||
                (p[i + 2] & 0xc0) != 0x80) {
                return false;
            }
            i += 3;
        } else if (c < 0xf5) {
            uint8_t lo = 0x80, hi = 0xbf;

            if (c == 0xf0) {
                lo = 0x90;      /* overlong */
            } else if (c == 0xf4) {
                hi = 0x8f;      /* above U+10FFFF */
            }
            if (len - i < 4 || p[i + 1] < lo || p[i + 1] > hi ||
                (p[i + 2] & 0xc0) != 0x80 || (p[i + 3] & 0xc0) != 0x80) {
                return false;
            }
            i += 4;
        } else {
            return false;
        }
    }
    return true;
}

static const char kr_b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void
kr_uuid_format(const uint8_t u[16], char out[23])
{
    unsigned i, o = 0;

    for (i = 0; i + 3 <= 15; i += 3) {
        uint32_t x = (uint32_t)u[i] << 16 | (uint32_t)u[i + 1] << 8 | u[i + 2];

        out[o++] = kr_b64url[(x >> 18) & 63];
        out[o++] = kr_b64url[(x >> 12) & 63];
        out[o++] = kr_b64url[(x >> 6) & 63];
        out[o++] = kr_b64url[x & 63];
    }
    /* 15 bytes -> 20 chars; the 16th byte -> 2 chars, no padding */
    out[o++] = kr_b64url[u[15] >> 2];
    out[o++] = kr_b64url[(u[15] & 3) << 4];
    out[o] = '\0';
}

static int
b64url_val(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '-') {
        return 62;
    }
    if (c == '_') {
        return 63;
    }
    return -1;
}

bool
kr_uuid_parse(const char *s, uint8_t u[16])
{
    int v[22];
    unsigned i, o = 0;

    for (i = 0; i < 22; i++) {
        if (s[i] == '\0' || (v[i] = b64url_val(s[i])) < 0) {
            return false;
        }
    }
    if (s[22] != '\0') {
        return false;
    }
    for (i = 0; i < 20; i += 4) {
        uint32_t x = (uint32_t)v[i] << 18 | (uint32_t)v[i + 1] << 12 |
                     (uint32_t)v[i + 2] << 6 | (uint32_t)v[i + 3];

        u[o++] = (uint8_t)(x >> 16);
        u[o++] = (uint8_t)(x >> 8);
        u[o++] = (uint8_t)x;
    }
    /* like Java's decoder, the last character's 4 spare bits are ignored */
    u[15] = (uint8_t)(v[20] << 2 | v[21] >> 4);
    return true;
}

void
kr_rbuf_init_flat(struct kr_rbuf *rb, struct iovec *iov, const void *p,
                  size_t len)
{
    iov->iov_base = (void *)(uintptr_t)p;
    iov->iov_len = len;
    rb->seg = iov;
    rb->nseg = 1;
    rb->len = len;
}

bool
kr_rbuf_read(const struct kr_rbuf *rb, uint64_t off, void *out, size_t n)
{
    uint8_t *o = out;
    uint64_t base = 0;
    int i;

    if (off > rb->len || n > rb->len - off) {
        return false;
    }
    for (i = 0; i < rb->nseg && n > 0; i++) {
        size_t sl = rb->seg[i].iov_len;

        if (off < base + sl) {
            size_t in = (size_t)(off - base);
            size_t take = sl - in < n ? sl - in : n;

            memcpy(o, (const uint8_t *)rb->seg[i].iov_base + in, take);
            o += take;
            off += take;
            n -= take;
        }
        base += sl;
    }
    return n == 0;
}

/* RecordBatch v2: RecordsCount's offset, and the smallest batchLength. */
#define KR_BATCH_COUNT_AT 57
#define KR_BATCH_LEN_MIN (61 - 12)

int
kr_records_count(const struct kr_rbuf *rb, uint64_t off, int32_t len,
                 uint64_t *records)
{
    uint64_t end, pos, n = 0;
    bool hidden = false;

    *records = 0;
    if (len <= 0) {
        return KR_OK;
    }
    end = off + (uint64_t)len;
    if (end > rb->len) {
        return KR_EPROTO;
    }
    for (pos = off; pos < end;) {
        uint8_t h[KR_BATCH_COUNT_AT + 4];
        int32_t blen;
        int magic;

        if (end - pos < 18 || !kr_rbuf_read(rb, pos, h, 18)) {
            return KR_EPROTO;
        }
        blen = (int32_t)((uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 |
                         (uint32_t)h[10] << 8 | (uint32_t)h[11]);
        magic = (int8_t)h[16];
        if (blen < 0 || (uint64_t)blen > end - pos - 12) {
            return KR_EPROTO;
        }
        if (magic == 2) {
            int32_t c;

            if (blen < KR_BATCH_LEN_MIN ||
                !kr_rbuf_read(rb, pos, h, sizeof(h))) {
                return KR_EPROTO;
            }
            c = (int32_t)((uint32_t)h[57] << 24 | (uint32_t)h[58] << 16 |
                          (uint32_t)h[59] << 8 | (uint32_t)h[60]);
            if (c < 0) {
                return KR_EPROTO;
            }
            n += (uint64_t)c;
        } else if (magic == 0 || magic == 1) {
            if (blen < 6) {
                return KR_EPROTO;       /* no room for crc, magic and
                                           attributes: h[16..17] are not
                                           this entry's */
            }
            /* attributes int8 at 17: compression in bits 0-2 */
            if (h[17] & 0x07u) {
                hidden = true;
            } else {
                n++;
            }
        } else {
            return KR_EPROTO;
        }
        pos += 12 + (uint64_t)blen;
    }
    *records = n;
    return hidden ? KR_EUNSUPPORTED : KR_OK;
}

/* ---- defaults and tree building ------------------------------------------ */

static struct kr_node *node_new(struct kr_arena *a, uint16_t sid, int16_t v,
                                int depth);

static struct kr_array *
array_alloc(struct kr_arena *a, uint8_t elem_type, uint16_t sid, size_t n)
{
    struct kr_array *arr;

    if (n > (SIZE_MAX - sizeof(*arr)) / sizeof(struct kr_val) ||
        n > UINT32_MAX) {
        return NULL;
    }
    arr = kr_arena_alloc(a, sizeof(*arr) + n * sizeof(struct kr_val));
    if (arr == NULL) {
        return NULL;
    }
    arr->n = (uint32_t)n;
    arr->elem_type = elem_type;
    arr->struct_id = sid;
    arr->items = (struct kr_val *)(arr + 1);
    return arr;
}

/* A value of type t holding zero / empty (array elements). */
static int
val_zero(struct kr_arena *a, uint8_t t, uint16_t sid, int16_t v,
         struct kr_val *val, int depth)
{
    memset(val, 0, sizeof(*val));
    val->present = 1;
    switch (t) {
    case KR_T_UUID:
        val->u.s.p = kr_zero16;
        val->u.s.len = 16;
        break;
    case KR_T_STRING:
    case KR_T_BYTES:
        val->u.s.p = kr_empty;
        break;
    case KR_T_STRUCT:
        val->u.node = node_new(a, sid, v, depth + 1);
        if (val->u.node == NULL) {
            return KR_ENOMEM;
        }
        break;
    default:
        break;
    }
    return KR_OK;
}

/*
 * Set val to field f's default (kr_schema.h).  present is left 0.  A null
 * default in a version where f is not nullable becomes empty.
 */
static int
val_default(struct kr_arena *a, const struct kr_field_desc *f, int16_t v,
            struct kr_val *val, int depth)
{
    bool null = (f->flags & KR_FF_DEFAULT_NULL) &&
                (kr_vrange_has(f->nullable, v) ||
                 !kr_vrange_has(f->versions, v));

    memset(val, 0, sizeof(*val));
    switch (f->type) {
    case KR_T_BOOL:
    case KR_T_INT8:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
    case KR_T_INT64:
        val->u.i = f->def_int;
        break;
    case KR_T_FLOAT64:
        val->u.f = f->def_float;
        break;
    case KR_T_UUID:
        val->u.s.p = kr_zero16;
        val->u.s.len = 16;
        break;
    case KR_T_STRING:
        if (null || f->def_str == NULL) {
            if (null) {
                val->u.s.len = -1;
                val->is_null = 1;
            } else {
                val->u.s.p = kr_empty;
            }
        } else {
            size_t n = strlen(f->def_str);

            val->u.s.p = (const uint8_t *)f->def_str;
            val->u.s.len = n > KR_STR_MAX ? KR_STR_MAX : (int32_t)n;
        }
        break;
    case KR_T_BYTES:
        if (null) {
            val->u.s.len = -1;
            val->is_null = 1;
        } else {
            val->u.s.p = kr_empty;
        }
        break;
    case KR_T_RECORDS:
        if (null) {
            val->u.rec.len = -1;
            val->is_null = 1;
        }
        break;
    case KR_T_ARRAY:
        if (null) {
            val->is_null = 1;
        } else {
            val->u.arr = array_alloc(a, f->elem_type, f->struct_id, 0);
            if (val->u.arr == NULL) {
                return KR_ENOMEM;
            }
        }
        break;
    case KR_T_STRUCT:
        if (null) {
            val->is_null = 1;
        } else {
            val->u.node = node_new(a, f->struct_id, v, depth + 1);
            if (val->u.node == NULL) {
                return KR_ENOMEM;
            }
        }
        break;
    default:
        break;
    }
    return KR_OK;
}

int
kr_val_default(struct kr_arena *a, const struct kr_field_desc *f, int16_t v,
               struct kr_val *val)
{
    return val_default(a, f, v, val, 0);
}

static inline bool
field_tagged_at(const struct kr_field_desc *f, int16_t v)
{
    return f->tag >= 0 && kr_vrange_has(f->tagged, v);
}

static struct kr_node *
node_alloc(struct kr_arena *a, uint16_t sid, int16_t v)
{
    const struct kr_struct_desc *sd = &kr_structs[sid];
    struct kr_node *n;

    n = kr_arena_alloc(a, sizeof(*n) + sd->nfields * sizeof(struct kr_val));
    if (n == NULL) {
        return NULL;
    }
    n->struct_id = sid;
    n->version = v;
    n->vals = (struct kr_val *)(n + 1);
    return n;
}

static struct kr_node *
node_new(struct kr_arena *a, uint16_t sid, int16_t v, int depth)
{
    const struct kr_struct_desc *sd;
    struct kr_node *n;
    unsigned i;

    if (sid >= kr_nstructs || depth > KR_MAX_DEPTH) {
        return NULL;
    }
    sd = &kr_structs[sid];
    n = node_alloc(a, sid, v);
    if (n == NULL) {
        return NULL;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (val_default(a, f, v, &n->vals[i], depth) != KR_OK) {
            return NULL;
        }
        n->vals[i].present = kr_vrange_has(f->versions, v) &&
                             !field_tagged_at(f, v);
    }
    return n;
}

struct kr_node *
kr_node_new(struct kr_arena *arena, uint16_t sid, int16_t v)
{
    return node_new(arena, sid, v, 0);
}

int
kr_msg_request_new(struct kr_arena *arena, struct kr_msg *m, int16_t key,
                   int16_t ver, int32_t corr, const char *client_id)
{
    const struct kr_api_desc *a = kr_api_get(key);
    uint16_t root = a != NULL ? kr_api_root(a, false, ver) : KR_NO_STRUCT;
    int hv = a != NULL ? kr_request_header_version(key, ver) : -1;
    struct kr_val *v;

    memset(m, 0, sizeof(*m));
    if (root == KR_NO_STRUCT || hv < 0) {
        return KR_EUNSUPPORTED;
    }
    m->dir = KR_DIR_REQUEST;
    m->api_key = key;
    m->api_version = ver;
    m->hdr_version = (int16_t)hv;
    m->correlation_id = corr;
    m->header = kr_node_new(arena, kr_request_header_struct, (int16_t)hv);
    m->body = kr_node_new(arena, root, ver);
    if (m->header == NULL || m->body == NULL) {
        return KR_ENOMEM;
    }
    if ((v = kr_node_get_id(m->header, KR_FIELD_REQUEST_API_KEY)) != NULL) {
        v->u.i = key;
    }
    if ((v = kr_node_get_id(m->header, KR_FIELD_REQUEST_API_VERSION)) !=
        NULL) {
        v->u.i = ver;
    }
    if ((v = kr_node_get_id(m->header, KR_FIELD_CORRELATION_ID)) != NULL) {
        v->u.i = corr;
    }
    v = kr_node_get_id(m->header, KR_FIELD_CLIENT_ID);
    if (v != NULL && v->present) {
        v->is_null = client_id == NULL;
        v->u.s.p = (const uint8_t *)client_id;
        v->u.s.len = client_id != NULL ? (int32_t)strlen(client_id) : -1;
    }
    return KR_OK;
}

struct kr_array *
kr_array_new(struct kr_arena *arena, enum kr_type elem_type,
             uint16_t struct_id, uint32_t n, int16_t v)
{
    struct kr_array *arr;
    uint32_t i;

    arr = array_alloc(arena, (uint8_t)elem_type, struct_id, n);
    if (arr == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (val_zero(arena, (uint8_t)elem_type, struct_id, v, &arr->items[i],
                     0) != KR_OK) {
            return NULL;
        }
    }
    return arr;
}

struct kr_val *
kr_node_get(const struct kr_node *n, const char *name)
{
    const struct kr_struct_desc *sd;
    unsigned i;

    if (n == NULL || n->struct_id >= kr_nstructs) {
        return NULL;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        if (strcmp(kr_fields[sd->first_field + i].name, name) == 0) {
            return &n->vals[i];
        }
    }
    return NULL;
}

struct kr_val *
kr_node_get_id(const struct kr_node *n, enum kr_field_id id)
{
    const struct kr_struct_desc *sd;
    unsigned i;

    if (n == NULL || n->struct_id >= kr_nstructs || id == KR_FIELD_NONE) {
        return NULL;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        if (kr_fields[sd->first_field + i].id == id) {
            return &n->vals[i];
        }
    }
    return NULL;
}

/* ---- decoder: cursor over segments --------------------------------------- */

struct dec {
    const uint8_t *p;           /* cursor in the current segment */
    const uint8_t *se;          /* readable end: segment end clipped to limit */
    const uint8_t *sstart;      /* start of the current segment */
    const uint8_t *sraw;        /* real end of the current segment */
    size_t sbase;               /* payload offset of sstart */
    size_t limit;               /* reads stop here (payload offset) */
    size_t total;               /* payload bytes */
    const struct iovec *seg;
    int nseg;
    int si;
    int depth;
    unsigned flags;
    struct kr_arena *a;
    struct kr_codec_err *err;
};

static inline size_t
d_off(const struct dec *d)
{
    return d->sbase + (size_t)(d->p - d->sstart);
}

static inline size_t
d_left(const struct dec *d)
{
    return d->limit - d_off(d);
}

static void
d_clip(struct dec *d)
{
    size_t seglen = (size_t)(d->sraw - d->sstart);

    if (d->limit - d->sbase < seglen) {
        d->se = d->sstart + (d->limit - d->sbase);
    } else {
        d->se = d->sraw;
    }
}

/* Length of segment i starting at payload offset base, clipped to total. */
static size_t
d_seglen(const struct dec *d, int i, size_t base)
{
    size_t len = d->seg[i].iov_len;

    if (base >= d->total) {
        return 0;
    }
    if (len > d->total - base) {
        len = d->total - base;
    }
    if (d->seg[i].iov_base == NULL) {
        return 0;
    }
    return len;
}

static void
d_load(struct dec *d, int i, size_t base)
{
    size_t len = i < d->nseg ? d_seglen(d, i, base) : 0;

    d->si = i;
    d->sbase = base;
    d->sstart = len > 0 ? (const uint8_t *)d->seg[i].iov_base : kr_empty;
    d->sraw = d->sstart + len;
    d->p = d->sstart;
    d_clip(d);
}

/* Move to the next non-empty segment; the cursor must be at sraw. */
static bool
d_next(struct dec *d)
{
    size_t base;
    int i;

    if (d->p != d->sraw) {
        return false;
    }
    base = d->sbase + (size_t)(d->sraw - d->sstart);
    for (i = d->si + 1; i < d->nseg; i++) {
        if (d_seglen(d, i, base) > 0) {
            d_load(d, i, base);
            return true;
        }
    }
    return false;
}

static void
d_seek(struct dec *d, size_t off)
{
    size_t base = 0;
    int i;

    for (i = 0; i < d->nseg; i++) {
        size_t len = d_seglen(d, i, base);

        if (len > 0 && off < base + len) {
            d_load(d, i, base);
            d->p = d->sstart + (off - base);
            return;
        }
        base += len;
    }
    /* at (or clamped to) the end */
    d_load(d, d->nseg, d->total);
}

static void
d_init(struct dec *d, struct kr_arena *a, const struct kr_rbuf *rb,
       size_t off, unsigned flags, struct kr_codec_err *err)
{
    size_t sum = 0;
    int i;

    memset(d, 0, sizeof(*d));
    d->seg = rb->seg;
    d->nseg = (rb->seg != NULL && rb->nseg > 0) ? rb->nseg : 0;
    for (i = 0; i < d->nseg; i++) {
        if (rb->seg[i].iov_base != NULL) {
            size_t len = rb->seg[i].iov_len;

            sum = len > SIZE_MAX - sum ? SIZE_MAX : sum + len;
        }
    }
    d->total = rb->len < sum ? rb->len : sum;
    d->limit = d->total;
    d->flags = flags;
    d->a = a;
    d->err = err;
    d_seek(d, off > d->total ? d->total : off);
}

/*
 * Copy n bytes at the cursor into dst across segments.  False when fewer
 * than n bytes are left before the limit (cursor unchanged then).
 */
static bool
d_read_slow(struct dec *d, uint8_t *dst, size_t n)
{
    if (d_left(d) < n) {
        return false;
    }
    while (n > 0) {
        size_t avail = (size_t)(d->se - d->p);
        size_t k;

        if (avail == 0) {
            if (!d_next(d)) {
                return false;   /* not reached: d_left said enough */
            }
            continue;
        }
        k = avail < n ? avail : n;
        memcpy(dst, d->p, k);
        dst += k;
        d->p += k;
        n -= k;
    }
    return true;
}

static bool
d_skip(struct dec *d, size_t n)
{
    if (d_left(d) < n) {
        return false;
    }
    while (n > 0) {
        size_t avail = (size_t)(d->se - d->p);
        size_t k;

        if (avail == 0) {
            if (!d_next(d)) {
                return false;
            }
            continue;
        }
        k = avail < n ? avail : n;
        d->p += k;
        n -= k;
    }
    return true;
}

/* n (<= 16) bytes at the cursor: in place, or assembled in tmp. */
static inline const uint8_t *
d_take(struct dec *d, uint8_t *tmp, size_t n)
{
    const uint8_t *p = d->p;

    if (KR_LIKELY((size_t)(d->se - p) >= n)) {
        d->p = p + n;
        return p;
    }
    /* at a segment's end: the value may lie whole in the next one */
    if (p == d->sraw && d_next(d) && (size_t)(d->se - d->p) >= n) {
        p = d->p;
        d->p = p + n;
        return p;
    }
    return d_read_slow(d, tmp, n) ? tmp : NULL;
}

static int
d_trunc(struct dec *d, size_t at, const char *what, size_t need)
{
    size_t left = d->limit > at ? d->limit - at : 0;

    return err_set(d->err, KR_EPROTO, at,
                   "truncated %s: %zu bytes needed, %zu left", what, need,
                   left);
}

/*
 * Unsigned varint of at most 32 bits (Kafka's readUnsignedVarint).
 * Non-minimal encodings are accepted; a 5th byte above 0x0f (more than
 * 32 bits or a 6th byte) is refused.
 */
static int
d_uvarint(struct dec *d, uint32_t *out, const char *what)
{
    size_t start = d_off(d);
    uint32_t v = 0;
    unsigned i;

    *out = 0;
    if (KR_LIKELY(d->se - d->p >= 5)) {
        const uint8_t *p = d->p;

        for (i = 0; i < 5; i++) {
            uint8_t b = p[i];

            if (i == 4 && b > 0x0f) {
                goto overflow;
            }
            v |= (uint32_t)(b & 0x7f) << (7 * i);
            if (!(b & 0x80)) {
                d->p = p + i + 1;
                *out = v;
                return KR_OK;
            }
        }
        goto overflow;
    }
    for (i = 0; i < 5; i++) {
        uint8_t b;

        if (!d_read_slow(d, &b, 1)) {
            return d_trunc(d, start, what, i + 1);
        }
        if (i == 4 && b > 0x0f) {
            goto overflow;
        }
        v |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return KR_OK;
        }
    }
overflow:
    return err_set(d->err, KR_EPROTO, start,
                   "%s: varint longer than 32 bits", what);
}

/* A view of n bytes at the cursor: in place, or copied into the arena. */
static int
d_view(struct dec *d, size_t n, struct kr_str *s)
{
    uint8_t *copy;

    if (d->p == d->sraw && n > 0) {
        (void)d_next(d);        /* at a segment's end: look in the next */
    }
    if (KR_LIKELY((size_t)(d->se - d->p) >= n)) {
        s->p = n > 0 ? d->p : kr_empty;
        s->len = (int32_t)n;
        d->p += n;
        return KR_OK;
    }
    copy = kr_arena_alloc(d->a, n);
    if (copy == NULL) {
        return err_set(d->err, KR_ENOMEM, d_off(d),
                       "arena exhausted (%zu bytes)", n);
    }
    if (!d_read_slow(d, copy, n)) {
        return d_trunc(d, d_off(d), "value", n);
    }
    s->p = copy;
    s->len = (int32_t)n;
    return KR_OK;
}

/* ---- decoder: values ----------------------------------------------------- */

static int dec_struct(struct dec *d, uint16_t sid, int16_t v, bool flex,
                      struct kr_node **out);

/*
 * A length or count prefix: int16 (strings) / int32, or compact uvarint
 * n+1.  *out is -1 for null, -2..INT32_MIN for a bad negative length.
 */
static int
d_len(struct dec *d, bool flex, bool is16, int64_t *out, const char *what)
{
    uint8_t tmp[4];
    const uint8_t *p;

    *out = 0;
    if (flex) {
        uint32_t u;
        int rc = d_uvarint(d, &u, what);

        if (rc != KR_OK) {
            return rc;
        }
        *out = (int64_t)u - 1;
        return KR_OK;
    }
    if (is16) {
        p = d_take(d, tmp, 2);
        if (p == NULL) {
            return d_trunc(d, d_off(d), what, 2);
        }
        *out = (int16_t)ld16(p);
    } else {
        p = d_take(d, tmp, 4);
        if (p == NULL) {
            return d_trunc(d, d_off(d), what, 4);
        }
        *out = (int32_t)ld32(p);
    }
    return KR_OK;
}

static int
d_null_or_bad(struct dec *d, size_t start, int64_t len, bool nullable,
              const char *what, struct kr_val *val)
{
    if (len == -1 && nullable) {
        val->is_null = 1;
        return KR_OK;
    }
    if (len == -1) {
        return err_set(d->err, KR_EPROTO, start,
                       "null %s where the field is not nullable", what);
    }
    return err_set(d->err, KR_EPROTO, start, "negative %s length %lld",
                   what, (long long)len);
}

static int
dec_val(struct dec *d, uint8_t t, uint8_t et, uint16_t sid, int16_t v,
        bool flex, bool nullable, struct kr_val *val)
{
    uint8_t tmp[16];
    const uint8_t *p;
    size_t start = d_off(d);
    int64_t len;
    int rc;

    val->is_null = 0;
    switch (t) {
    case KR_T_BOOL:
        p = d_take(d, tmp, 1);
        if (p == NULL) {
            return d_trunc(d, start, "bool", 1);
        }
        if (KR_UNLIKELY(p[0] > 1) && (d->flags & KR_DEC_STRICT)) {
            return err_set(d->err, KR_EPROTO, start,
                           "bool value %u is not 0 or 1", p[0]);
        }
        val->u.i = p[0] != 0;
        return KR_OK;
    case KR_T_INT8:
        p = d_take(d, tmp, 1);
        if (p == NULL) {
            return d_trunc(d, start, "int8", 1);
        }
        val->u.i = (int8_t)p[0];
        return KR_OK;
    case KR_T_INT16:
    case KR_T_UINT16:
        p = d_take(d, tmp, 2);
        if (p == NULL) {
            return d_trunc(d, start, kr_type_name(t), 2);
        }
        val->u.i = t == KR_T_INT16 ? (int64_t)(int16_t)ld16(p)
                                   : (int64_t)ld16(p);
        return KR_OK;
    case KR_T_INT32:
    case KR_T_UINT32:
        p = d_take(d, tmp, 4);
        if (p == NULL) {
            return d_trunc(d, start, kr_type_name(t), 4);
        }
        val->u.i = t == KR_T_INT32 ? (int64_t)(int32_t)ld32(p)
                                   : (int64_t)ld32(p);
        return KR_OK;
    case KR_T_INT64:
        p = d_take(d, tmp, 8);
        if (p == NULL) {
            return d_trunc(d, start, "int64", 8);
        }
        val->u.i = (int64_t)ld64(p);
        return KR_OK;
    case KR_T_FLOAT64: {
        uint64_t bits;

        p = d_take(d, tmp, 8);
        if (p == NULL) {
            return d_trunc(d, start, "float64", 8);
        }
        bits = ld64(p);
        memcpy(&val->u.f, &bits, 8);
        return KR_OK;
    }
    case KR_T_UUID:
        if (d_left(d) < 16) {
            return d_trunc(d, start, "uuid", 16);
        }
        return d_view(d, 16, &val->u.s);
    case KR_T_STRING:
        rc = d_len(d, flex, true, &len, "string length");
        if (rc != KR_OK) {
            return rc;
        }
        if (len < 0) {
            val->u.s.p = NULL;
            val->u.s.len = -1;
            return d_null_or_bad(d, start, len, nullable, "string", val);
        }
        if (len > KR_STR_MAX) {
            return err_set(d->err, KR_EPROTO, start,
                           "string length %lld above %d", (long long)len,
                           KR_STR_MAX);
        }
        if ((uint64_t)len > d_left(d)) {
            return err_set(d->err, KR_EPROTO, start,
                           "string length %lld past end (%zu bytes left)",
                           (long long)len, d_left(d));
        }
        rc = d_view(d, (size_t)len, &val->u.s);
        if (rc != KR_OK) {
            return rc;
        }
        if ((d->flags & (KR_DEC_STRICT | KR_DEC_NO_UTF8)) == KR_DEC_STRICT &&
            !kr_utf8_valid(val->u.s.p, (size_t)len)) {
            return err_set(d->err, KR_EPROTO, start,
                           "string of %lld bytes is not valid UTF-8",
                           (long long)len);
        }
        return KR_OK;
    case KR_T_BYTES:
    case KR_T_RECORDS:
        rc = d_len(d, flex, false, &len, t == KR_T_BYTES ? "bytes length"
                                                         : "records length");
        if (rc != KR_OK) {
            return rc;
        }
        if (len < 0) {
            if (t == KR_T_BYTES) {
                val->u.s.p = NULL;
                val->u.s.len = -1;
            } else {
                val->u.rec.off = 0;
                val->u.rec.len = -1;
            }
            return d_null_or_bad(d, start, len, nullable,
                                 kr_type_name(t), val);
        }
        if (len > INT32_MAX || (uint64_t)len > d_left(d)) {
            return err_set(d->err, KR_EPROTO, start,
                           "%s length %lld past end (%zu bytes left)",
                           kr_type_name(t), (long long)len, d_left(d));
        }
        if (t == KR_T_BYTES) {
            return d_view(d, (size_t)len, &val->u.s);
        }
        val->u.rec.off = d_off(d);
        val->u.rec.len = (int32_t)len;
        (void)d_skip(d, (size_t)len);   /* checked above */
        return KR_OK;
    case KR_T_ARRAY: {
        struct kr_array *arr;
        uint32_t i;

        rc = d_len(d, flex, false, &len, "array count");
        if (rc != KR_OK) {
            return rc;
        }
        if (len < 0) {
            val->u.arr = NULL;
            return d_null_or_bad(d, start, len, nullable, "array", val);
        }
        if ((uint64_t)len >
            d_left(d) / kr_type_min_size((enum kr_type)et, flex)) {
            return err_set(d->err, KR_EPROTO, start,
                           "array count %lld past end (%zu bytes left)",
                           (long long)len, d_left(d));
        }
        arr = array_alloc(d->a, et, sid, (size_t)len);
        if (arr == NULL) {
            return err_set(d->err, KR_ENOMEM, start,
                           "arena exhausted (array of %lld)", (long long)len);
        }
        val->u.arr = arr;
        for (i = 0; i < arr->n; i++) {
            arr->items[i].present = 1;
            rc = dec_val(d, et, KR_T_NONE, sid, v, flex, false,
                         &arr->items[i]);
            if (rc != KR_OK) {
                kr_codec_err_prepend_index(d->err, i);
                return rc;
            }
        }
        return KR_OK;
    }
    case KR_T_STRUCT:
        if (nullable) {
            int8_t mark;

            p = d_take(d, tmp, 1);
            if (p == NULL) {
                return d_trunc(d, start, "struct marker", 1);
            }
            mark = (int8_t)p[0];
            if ((d->flags & KR_DEC_STRICT) && mark != -1 && mark != 1) {
                return err_set(d->err, KR_EPROTO, start,
                               "struct marker %d is not -1 or 1", mark);
            }
            if (mark < 0) {
                val->u.node = NULL;
                val->is_null = 1;
                return KR_OK;
            }
        }
        return dec_struct(d, sid, v, flex, &val->u.node);
    default:
        return err_set(d->err, KR_EPROTO, start, "unknown field type %u",
                       (unsigned)t);
    }
}

static inline int
dec_field(struct dec *d, const struct kr_field_desc *f, int16_t v, bool flex,
          struct kr_val *val)
{
    if (KR_UNLIKELY(f->flags & KR_FF_FLEX_OVERRIDE)) {
        flex = kr_vrange_has(f->flexible, v);
    }
    return dec_val(d, f->type, f->elem_type, f->struct_id, v, flex,
                   kr_vrange_has(f->nullable, v), val);
}

/* Index of the field of sd tagged tag at v, or -1. */
static int
find_tag(const struct kr_struct_desc *sd, uint32_t tag, int16_t v)
{
    unsigned i;

    if (!(sd->flags & KR_SF_HAS_TAGS)) {
        return -1;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (f->tag >= 0 && (uint32_t)f->tag == tag &&
            kr_vrange_has(f->versions, v) && field_tagged_at(f, v)) {
            return (int)i;
        }
    }
    return -1;
}

static int
dec_tags(struct dec *d, const struct kr_struct_desc *sd, int16_t v,
         struct kr_node *node)
{
    size_t start = d_off(d);
    struct kr_rawtag *unk = NULL;
    uint32_t n, k, nunk = 0;
    int rc;

    rc = d_uvarint(d, &n, "tagged field count");
    if (rc != KR_OK) {
        goto fail;
    }
    if (n > d_left(d) / 2) {
        rc = err_set(d->err, KR_EPROTO, start,
                     "tagged field count %u past end (%zu bytes left)", n,
                     d_left(d));
        goto fail;
    }
    for (k = 0; k < n; k++) {
        size_t tstart = d_off(d);
        uint32_t tag, size;
        int idx;

        rc = d_uvarint(d, &tag, "tag");
        if (rc == KR_OK) {
            rc = d_uvarint(d, &size, "tagged field size");
        }
        if (rc != KR_OK) {
            goto fail;
        }
        if (size > d_left(d)) {
            rc = err_set(d->err, KR_EPROTO, tstart,
                         "tagged field %u size %u past end (%zu bytes left)",
                         tag, size, d_left(d));
            goto fail;
        }
        idx = find_tag(sd, tag, v);
        if (idx >= 0) {
            const struct kr_field_desc *f =
                &kr_fields[sd->first_field + (unsigned)idx];
            struct kr_val *val = &node->vals[idx];
            size_t saved = d->limit, end = d_off(d) + size;

            if ((d->flags & (KR_DEC_STRICT | KR_DEC_TAGS_EXACT)) &&
                val->present) {
                rc = err_set(d->err, KR_EPROTO, tstart,
                             "duplicate tagged field %u", tag);
                kr_codec_err_prepend(d->err, f->name);
                return rc;
            }
            d->limit = end;
            d_clip(d);
            rc = dec_val(d, f->type, f->elem_type, f->struct_id, v, true,
                         kr_vrange_has(f->nullable, v), val);
            if (rc == KR_OK && d_off(d) != end) {
                if (d->flags & (KR_DEC_STRICT | KR_DEC_TAGS_EXACT)) {
                    rc = err_set(d->err, KR_EPROTO, d_off(d),
                                 "tagged field %u: %zu bytes left over",
                                 tag, end - d_off(d));
                } else {
                    (void)d_skip(d, end - d_off(d));
                }
            }
            d->limit = saved;
            d_clip(d);
            if (rc != KR_OK) {
                kr_codec_err_prepend(d->err, f->name);
                return rc;
            }
            val->present = 1;
        } else {
            uint32_t j;

            if (unk == NULL) {
                unk = kr_arena_alloc(d->a, n * sizeof(*unk));
                if (unk == NULL) {
                    rc = err_set(d->err, KR_ENOMEM, tstart,
                                 "arena exhausted (%u tags)", n);
                    goto fail;
                }
            }
            if (d->flags & (KR_DEC_STRICT | KR_DEC_TAGS_EXACT)) {
                for (j = 0; j < nunk; j++) {
                    if (unk[j].tag == tag) {
                        rc = err_set(d->err, KR_EPROTO, tstart,
                                     "duplicate tagged field %u", tag);
                        goto fail;
                    }
                }
            }
            rc = d_view(d, size, &unk[nunk].data);
            if (rc != KR_OK) {
                goto fail;
            }
            unk[nunk].tag = tag;
            /* keep ascending order (insertion; stable for equal tags) */
            for (j = nunk; j > 0 && unk[j - 1].tag > tag; j--) {
                struct kr_rawtag t = unk[j];

                unk[j] = unk[j - 1];
                unk[j - 1] = t;
            }
            nunk++;
        }
    }
    node->unknown = unk;
    node->nunknown = nunk;
    return KR_OK;
fail:
    kr_codec_err_prepend(d->err, "_tagged_fields");
    return rc;
}

static int
dec_struct(struct dec *d, uint16_t sid, int16_t v, bool flex,
           struct kr_node **out)
{
    const struct kr_struct_desc *sd;
    struct kr_node *node;
    unsigned i;
    int rc = KR_OK;

    if (KR_UNLIKELY(sid >= kr_nstructs)) {
        return err_set(d->err, KR_EPROTO, d_off(d), "no struct %u",
                       (unsigned)sid);
    }
    if (KR_UNLIKELY(d->depth >= KR_MAX_DEPTH)) {
        return err_set(d->err, KR_EPROTO, d_off(d),
                       "structs nested deeper than %d", KR_MAX_DEPTH);
    }
    sd = &kr_structs[sid];
    node = node_alloc(d->a, sid, v);
    if (node == NULL) {
        return err_set(d->err, KR_ENOMEM, d_off(d), "arena exhausted");
    }
    d->depth++;
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];
        struct kr_val *val = &node->vals[i];

        if (!kr_vrange_has(f->versions, v) || field_tagged_at(f, v)) {
            if (val_default(d->a, f, v, val, d->depth) != KR_OK) {
                rc = err_set(d->err, KR_ENOMEM, d_off(d), "arena exhausted");
                kr_codec_err_prepend(d->err, f->name);
                goto out;
            }
            continue;
        }
        rc = dec_field(d, f, v, flex, val);
        if (rc != KR_OK) {
            kr_codec_err_prepend(d->err, f->name);
            goto out;
        }
        val->present = 1;
    }
    if (flex) {
        rc = dec_tags(d, sd, v, node);
    }
out:
    d->depth--;
    if (rc == KR_OK) {
        *out = node;
    }
    return rc;
}

/* ---- decoder: entry points ----------------------------------------------- */

/* Only the tagged-field section of struct sid (kr_decode_tags). */
static int
dec_tags_only(struct dec *d, uint16_t sid, int16_t v, struct kr_node **out)
{
    const struct kr_struct_desc *sd;
    struct kr_node *node;
    unsigned i;
    int rc;

    if (sid >= kr_nstructs) {
        return err_set(d->err, KR_EPROTO, d_off(d), "no struct %u",
                       (unsigned)sid);
    }
    sd = &kr_structs[sid];
    node = node_alloc(d->a, sid, v);
    if (node == NULL) {
        return err_set(d->err, KR_ENOMEM, d_off(d), "arena exhausted");
    }
    for (i = 0; i < sd->nfields; i++) {
        if (val_default(d->a, &kr_fields[sd->first_field + i], v,
                        &node->vals[i], 1) != KR_OK) {
            return err_set(d->err, KR_ENOMEM, d_off(d), "arena exhausted");
        }
    }
    d->depth = 1;
    rc = dec_tags(d, sd, v, node);
    if (rc == KR_OK) {
        *out = node;
    }
    return rc;
}

/* kr_decode_struct and kr_decode_tags. */
static int
decode_at(struct kr_arena *arena, const struct kr_rbuf *rb, size_t *off,
          uint16_t sid, int16_t v, bool flexible, bool tags_only,
          unsigned flags, struct kr_node **out, struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    struct dec d;
    int rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    d_init(&d, arena, rb, *off, flags, err);
    if (*off > d.total) {
        return err_set(err, KR_EPROTO, *off, "offset past end (%zu bytes)",
                       d.total);
    }
    rc = tags_only ? dec_tags_only(&d, sid, v, out)
                   : dec_struct(&d, sid, v, flexible, out);
    if (rc == KR_OK) {
        *off = d_off(&d);
    }
    return rc;
}

int
kr_decode_struct(struct kr_arena *arena, const struct kr_rbuf *rb,
                 size_t *off, uint16_t sid, int16_t v, bool flexible,
                 unsigned flags, struct kr_node **out,
                 struct kr_codec_err *err)
{
    return decode_at(arena, rb, off, sid, v, flexible, false, flags, out,
                     err);
}

int
kr_decode_tags(struct kr_arena *arena, const struct kr_rbuf *rb,
               size_t *off, uint16_t sid, int16_t v, unsigned flags,
               struct kr_node **out, struct kr_codec_err *err)
{
    return decode_at(arena, rb, off, sid, v, true, true, flags, out, err);
}

/* Copy up to n bytes at payload offset 0 into dst; returns bytes copied. */
static size_t
d_peek(struct dec *d, uint8_t *dst, size_t n)
{
    size_t got = d_left(d) < n ? d_left(d) : n;

    if (!d_read_slow(d, dst, got)) {
        got = 0;
    }
    d_seek(d, 0);
    return got;
}

static int
dec_finish(struct dec *d, struct kr_msg *m, uint16_t root, bool flex)
{
    int rc;

    m->body_off = d_off(d);
    rc = dec_struct(d, root, m->api_version, flex, &m->body);
    if (rc != KR_OK) {
        return rc;
    }
    m->trailing_off = d_off(d);
    m->trailing = d->total - m->trailing_off;
    if (m->trailing > 0 && (d->flags & KR_DEC_STRICT)) {
        rc = err_set(d->err, KR_EPROTO, m->trailing_off,
                     "%zu trailing bytes after the body", m->trailing);
        kr_codec_err_prepend(d->err, "_trailing");
        return rc;
    }
    return KR_OK;
}

static int
unsupported(struct kr_codec_err *err, const struct kr_msg *m)
{
    int rc = err_set(err, KR_EUNSUPPORTED, 0,
                     "unknown ApiKey %d or ApiVersion %d", m->api_key,
                     m->api_version);

    kr_codec_err_prepend(err, "header");
    return rc;
}

static uint16_t
api_root(const struct kr_api_desc *a, bool response, int16_t v)
{
    if (a == NULL || v < 0 || v > a->valid.hi) {
        return KR_NO_STRUCT;
    }
    return kr_api_root(a, response, v);
}

int
kr_decode_request(struct kr_arena *arena, const struct kr_rbuf *rb,
                  unsigned flags, struct kr_msg *m, struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    const struct kr_api_desc *a;
    struct dec d;
    uint8_t hb[8];
    size_t got;
    uint16_t root;
    int hv, rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    memset(m, 0, sizeof(*m));
    m->dir = KR_DIR_REQUEST;
    d_init(&d, arena, rb, 0, flags, err);
    got = d_peek(&d, hb, sizeof(hb));
    if (got < 4) {
        rc = d_trunc(&d, got < 2 ? 0 : 2, "request header", 4 - got);
        kr_codec_err_prepend(err, got < 2 ? "RequestApiKey" : "RequestApiVersion");
        kr_codec_err_prepend(err, "header");
        return rc;
    }
    m->api_key = (int16_t)ld16(hb);
    m->api_version = (int16_t)ld16(hb + 2);
    if (got == 8) {
        m->correlation_id = (int32_t)ld32(hb + 4);
    }
    a = kr_api_get(m->api_key);
    root = api_root(a, false, m->api_version);
    hv = a != NULL ? kr_request_header_version(m->api_key, m->api_version)
                   : -1;
    if (root == KR_NO_STRUCT || hv < 0) {
        return unsupported(err, m);
    }
    m->hdr_version = (int16_t)hv;
    rc = dec_struct(&d, kr_request_header_struct, (int16_t)hv, hv >= 2,
                    &m->header);
    if (rc != KR_OK) {
        kr_codec_err_prepend(err, "header");
        return rc;
    }
    return dec_finish(&d, m, root, kr_api_flexible(a, m->api_version));
}

int
kr_decode_response(struct kr_arena *arena, const struct kr_rbuf *rb,
                   int16_t api_key, int16_t api_version, unsigned flags,
                   struct kr_msg *m, struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    const struct kr_api_desc *a;
    struct dec d;
    uint8_t hb[4];
    uint16_t root;
    int hv, rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    memset(m, 0, sizeof(*m));
    m->dir = KR_DIR_RESPONSE;
    m->api_key = api_key;
    m->api_version = api_version;
    d_init(&d, arena, rb, 0, flags, err);
    if (d_peek(&d, hb, sizeof(hb)) == 4) {
        m->correlation_id = (int32_t)ld32(hb);
    }
    a = kr_api_get(api_key);
    root = api_root(a, true, api_version);
    hv = a != NULL ? kr_response_header_version(api_key, api_version) : -1;
    if (root == KR_NO_STRUCT || hv < 0) {
        return unsupported(err, m);
    }
    m->hdr_version = (int16_t)hv;
    rc = dec_struct(&d, kr_response_header_struct, (int16_t)hv, hv >= 1,
                    &m->header);
    if (rc != KR_OK) {
        kr_codec_err_prepend(err, "header");
        return rc;
    }
    return dec_finish(&d, m, root, kr_api_flexible(a, api_version));
}

/* ---- encoder ------------------------------------------------------------- */

struct enc {
    struct kr_wbuf *w;
    struct kr_codec_err *err;
    size_t base;                /* w->len when this encode started */
    int depth;
};

void
kr_wbuf_reset(struct kr_wbuf *w)
{
    w->len = 0;
    w->nrecs = 0;
    w->total = 0;
    w->failed = 0;
}

void
kr_wbuf_free(struct kr_wbuf *w)
{
    free(w->buf);
    free(w->recs);
    memset(w, 0, sizeof(*w));
}

static bool
w_grow(struct kr_wbuf *w, size_t n)
{
    size_t cap = w->cap != 0 ? w->cap : 256;
    uint8_t *nb;

    if (w->failed) {
        return false;
    }
    if (n > SIZE_MAX / 2 - w->len) {
        w->failed = 1;
        return false;
    }
    while (cap - w->len < n) {
        cap *= 2;
    }
    nb = realloc(w->buf, cap);
    if (nb == NULL) {
        w->failed = 1;
        return false;
    }
    w->buf = nb;
    w->cap = cap;
    return true;
}

/* Room for n more bytes; false (and w->failed) when out of memory. */
static inline bool
w_room(struct kr_wbuf *w, size_t n)
{
    if (KR_LIKELY(!w->failed && w->cap - w->len >= n)) {
        return true;
    }
    return w_grow(w, n);
}

static inline void
w_mem(struct kr_wbuf *w, const void *p, size_t n)
{
    if (n > 0 && w_room(w, n)) {
        memcpy(w->buf + w->len, p, n);
        w->len += n;
    }
}

static inline void
w_u8(struct kr_wbuf *w, uint8_t b)
{
    if (w_room(w, 1)) {
        w->buf[w->len++] = b;
    }
}

static inline void
w_be(struct kr_wbuf *w, uint64_t x, unsigned n)
{
    if (w_room(w, n)) {
        uint8_t *p = w->buf + w->len;
        unsigned i;

        for (i = 0; i < n; i++) {
            p[i] = (uint8_t)(x >> (8 * (n - 1 - i)));
        }
        w->len += n;
    }
}

static inline unsigned
uvarint_len(uint32_t x)
{
    unsigned n = 1;

    while (x >= 0x80) {
        x >>= 7;
        n++;
    }
    return n;
}

static inline void
uvarint_put(uint8_t *p, uint32_t x)
{
    while (x >= 0x80) {
        *p++ = (uint8_t)(x | 0x80);
        x >>= 7;
    }
    *p = (uint8_t)x;
}

static inline void
w_uvarint(struct kr_wbuf *w, uint32_t x)
{
    if (KR_LIKELY(x < 0x80)) {
        w_u8(w, (uint8_t)x);
    } else if (w_room(w, 5)) {
        uvarint_put(w->buf + w->len, x);
        w->len += uvarint_len(x);
    }
}

static int e_fail(struct enc *e, const char *fmt, ...) KR_PRINTF(2, 3);

static int
e_fail(struct enc *e, const char *fmt, ...)
{
    va_list ap;

    e->err->status = KR_EPROTO;
    e->err->offset = e->w->len - e->base;
    e->err->path[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(e->err->msg, sizeof(e->err->msg), fmt, ap);
    va_end(ap);
    return KR_EPROTO;
}

static void
w_rec(struct kr_wbuf *w, uint64_t off, int32_t len)
{
    if (w->failed) {
        return;
    }
    if (w->nrecs == w->recs_cap) {
        size_t cap = w->recs_cap != 0 ? w->recs_cap * 2 : 4;
        struct kr_wbuf_rec *nr;

        if (cap > SIZE_MAX / sizeof(*nr)) {
            w->failed = 1;
            return;
        }
        nr = realloc(w->recs, cap * sizeof(*nr));
        if (nr == NULL) {
            w->failed = 1;
            return;
        }
        w->recs = nr;
        w->recs_cap = cap;
    }
    w->recs[w->nrecs].at = w->len;
    w->recs[w->nrecs].src_off = off;
    w->recs[w->nrecs].len = len;
    w->recs[w->nrecs].ext = NULL;
    w->nrecs++;
}

/* A slice of a shared block's bytes (kr_val_set_records_shared). */
static void
w_rec_ext(struct kr_wbuf *w, const uint8_t *p, int32_t len)
{
    w_rec(w, 0, len);
    if (!w->failed) {
        w->recs[w->nrecs - 1].ext = p;
    }
}

void
kr_val_set_records_ext(struct kr_val *v, const uint8_t *p, int32_t len)
{
    v->rec_ext = 1;
    v->u.s.p = p;
    v->u.s.len = len < 0 ? -1 : len;
    v->is_null = len < 0;
    v->present = 1;
}

void
kr_val_set_records_shared(struct kr_val *v, const uint8_t *p, int32_t len)
{
    kr_val_set_records_ext(v, p, len);
    if (p != NULL && len > 0) {
        v->rec_ext = 2;
    }
}

static void
w_len(struct kr_wbuf *w, bool flex, bool is16, int64_t len)
{
    if (flex) {
        w_uvarint(w, (uint32_t)(len + 1));
    } else if (is16) {
        w_be(w, (uint64_t)len, 2);
    } else {
        w_be(w, (uint64_t)len, 4);
    }
}

static int enc_struct(struct enc *e, const struct kr_node *n, uint16_t sid,
                      int16_t v, bool flex);

static int
e_null(struct enc *e, bool nullable, bool flex, bool is16, const char *what)
{
    if (!nullable) {
        return e_fail(e, "null %s where the version does not allow null",
                      what);
    }
    w_len(e->w, flex, is16, -1);
    return KR_OK;
}

/* A fixed-width integer of type t, checked against its range. */
static int
enc_int(struct enc *e, enum kr_type t, int64_t x)
{
    int64_t lo, hi;
    unsigned width = kr_type_fixed_size(t);

    switch (t) {
    case KR_T_INT8:
        lo = INT8_MIN, hi = INT8_MAX;
        break;
    case KR_T_INT16:
        lo = INT16_MIN, hi = INT16_MAX;
        break;
    case KR_T_UINT16:
        lo = 0, hi = UINT16_MAX;
        break;
    case KR_T_INT32:
        lo = INT32_MIN, hi = INT32_MAX;
        break;
    default:                            /* KR_T_UINT32 */
        lo = 0, hi = UINT32_MAX;
        break;
    }
    if (x < lo || x > hi) {
        return e_fail(e, "value %lld out of range for %s", (long long)x,
                      kr_type_name(t));
    }
    w_be(e->w, (uint64_t)x, width);
    return KR_OK;
}

static int
enc_val(struct enc *e, uint8_t t, uint8_t et, uint16_t sid, int16_t v,
        bool flex, bool nullable, const struct kr_val *val)
{
    struct kr_wbuf *w = e->w;
    int rc;

    switch (t) {
    case KR_T_BOOL:
        w_u8(w, val->u.i != 0);
        return KR_OK;
    case KR_T_INT8:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
        return enc_int(e, (enum kr_type)t, val->u.i);
    case KR_T_INT64:
        w_be(w, (uint64_t)val->u.i, 8);
        return KR_OK;
    case KR_T_FLOAT64: {
        uint64_t bits;

        memcpy(&bits, &val->u.f, 8);
        w_be(w, bits, 8);
        return KR_OK;
    }
    case KR_T_UUID:
        if (val->is_null || val->u.s.len != 16 || val->u.s.p == NULL) {
            return e_fail(e, "uuid of %d bytes, not 16", (int)val->u.s.len);
        }
        w_mem(w, val->u.s.p, 16);
        return KR_OK;
    case KR_T_STRING:
    case KR_T_BYTES:
        if (val->is_null || val->u.s.len < 0) {
            return e_null(e, nullable, flex, t == KR_T_STRING,
                          kr_type_name(t));
        }
        if (t == KR_T_STRING && val->u.s.len > KR_STR_MAX) {
            return e_fail(e, "string of %d bytes is longer than %d",
                          (int)val->u.s.len, KR_STR_MAX);
        }
        if (val->u.s.len > 0 && val->u.s.p == NULL) {
            return e_fail(e, "%s of %d bytes has no data", kr_type_name(t),
                          (int)val->u.s.len);
        }
        w_len(w, flex, t == KR_T_STRING, val->u.s.len);
        w_mem(w, val->u.s.p, (size_t)val->u.s.len);
        return KR_OK;
    case KR_T_RECORDS:
        if (val->is_null || val->u.rec.len < 0) {
            return e_null(e, nullable, flex, false, "records");
        }
        if (val->rec_ext) {
            if (val->u.s.len > 0 && val->u.s.p == NULL) {
                return e_fail(e, "records of %d bytes have no data",
                              (int)val->u.s.len);
            }
            w_len(w, flex, false, val->u.s.len);
            if (val->rec_ext == 2) {
                w_rec_ext(w, val->u.s.p, val->u.s.len);
            } else {
                w_mem(w, val->u.s.p, (size_t)val->u.s.len);
            }
            return KR_OK;
        }
        w_len(w, flex, false, val->u.rec.len);
        if (val->u.rec.len > 0) {
            w_rec(w, val->u.rec.off, val->u.rec.len);
        }
        return KR_OK;
    case KR_T_ARRAY: {
        const struct kr_array *arr = val->u.arr;
        uint32_t i;

        if (val->is_null || arr == NULL) {
            return e_null(e, nullable, flex, false, "array");
        }
        if (arr->elem_type != et) {
            return e_fail(e, "array of %s where %s is expected",
                          kr_type_name(arr->elem_type), kr_type_name(et));
        }
        if (arr->n > INT32_MAX || (arr->n > 0 && arr->items == NULL)) {
            return e_fail(e, "array of %u elements", arr->n);
        }
        w_len(w, flex, false, arr->n);
        for (i = 0; i < arr->n; i++) {
            rc = enc_val(e, et, KR_T_NONE, sid, v, flex, false,
                         &arr->items[i]);
            if (rc != KR_OK) {
                kr_codec_err_prepend_index(e->err, i);
                return rc;
            }
        }
        return KR_OK;
    }
    case KR_T_STRUCT:
        if (nullable) {
            if (val->is_null || val->u.node == NULL) {
                w_u8(w, 0xff);
                return KR_OK;
            }
            w_u8(w, 1);
        } else if (val->is_null || val->u.node == NULL) {
            return e_fail(e, "null struct where the version does not allow "
                          "null");
        }
        return enc_struct(e, val->u.node, sid, v, flex);
    default:
        return e_fail(e, "unknown field type %u", (unsigned)t);
    }
}

/* Tag, size and payload of known tagged field f. */
static int
enc_tagged(struct enc *e, const struct kr_field_desc *f, int16_t v,
           const struct kr_val *val)
{
    struct kr_wbuf *w = e->w;
    size_t at, start, nrec0, i;
    uint64_t size;
    unsigned vl;
    int rc;

    w_uvarint(w, (uint32_t)f->tag);
    at = w->len;
    w_u8(w, 0);                     /* size placeholder, usually 1 byte */
    start = w->len;
    nrec0 = w->nrecs;
    rc = enc_val(e, f->type, f->elem_type, f->struct_id, v, true,
                 kr_vrange_has(f->nullable, v), val);
    if (rc != KR_OK || w->failed) {
        return rc;
    }
    size = w->len - start;
    for (i = nrec0; i < w->nrecs; i++) {
        size += (uint64_t)w->recs[i].len;
    }
    if (size > UINT32_MAX) {
        return e_fail(e, "tagged field of %llu bytes",
                      (unsigned long long)size);
    }
    vl = uvarint_len((uint32_t)size);
    if (vl > 1) {
        if (!w_room(w, vl - 1)) {
            return KR_OK;           /* w->failed reports it */
        }
        memmove(w->buf + start + vl - 1, w->buf + start, w->len - start);
        w->len += vl - 1;
        for (i = nrec0; i < w->nrecs; i++) {
            w->recs[i].at += vl - 1;
        }
    }
    uvarint_put(w->buf + at, (uint32_t)size);
    return KR_OK;
}

static int
enc_tags(struct enc *e, const struct kr_node *n,
         const struct kr_struct_desc *sd, int16_t v, uint32_t nknown)
{
    struct kr_wbuf *w = e->w;
    int64_t last = -1;
    uint32_t u = 0, k;
    int rc;

    w_uvarint(w, nknown + n->nunknown);
    if (n->nunknown > 0 && n->unknown == NULL) {
        return e_fail(e, "%u unknown tagged fields without data",
                      n->nunknown);
    }
    /* merge the known tags (picked in ascending order) with the unknown */
    for (k = 0; k < nknown; k++) {
        const struct kr_field_desc *bf;
        int best = -1;
        int64_t best_tag = INT64_MAX;
        unsigned i;

        for (i = 0; i < sd->nfields; i++) {
            const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

            if (field_tagged_at(f, v) && kr_vrange_has(f->versions, v) &&
                n->vals[i].present && f->tag > last && f->tag < best_tag) {
                best = (int)i;
                best_tag = f->tag;
            }
        }
        if (best < 0) {
            break;                  /* not reached: nknown counted them */
        }
        while (u < n->nunknown && (int64_t)n->unknown[u].tag < best_tag) {
            const struct kr_rawtag *r = &n->unknown[u++];

            w_uvarint(w, r->tag);
            w_uvarint(w, r->data.len > 0 ? (uint32_t)r->data.len : 0);
            if (r->data.len > 0) {
                w_mem(w, r->data.p, (size_t)r->data.len);
            }
        }
        bf = &kr_fields[sd->first_field + (unsigned)best];
        rc = enc_tagged(e, bf, v, &n->vals[best]);
        if (rc != KR_OK) {
            kr_codec_err_prepend(e->err, bf->name);
            return rc;
        }
        last = best_tag;
    }
    while (u < n->nunknown) {
        const struct kr_rawtag *r = &n->unknown[u++];

        w_uvarint(w, r->tag);
        w_uvarint(w, r->data.len > 0 ? (uint32_t)r->data.len : 0);
        if (r->data.len > 0) {
            w_mem(w, r->data.p, (size_t)r->data.len);
        }
    }
    return KR_OK;
}

static int
enc_struct(struct enc *e, const struct kr_node *n, uint16_t sid, int16_t v,
           bool flex)
{
    const struct kr_struct_desc *sd;
    uint32_t ntag = 0;
    unsigned i;
    int rc = KR_OK;

    if (n->struct_id != sid || sid >= kr_nstructs) {
        return e_fail(e, "struct %s where %s is expected",
                      n->struct_id < kr_nstructs
                          ? kr_structs[n->struct_id].name : "?",
                      sid < kr_nstructs ? kr_structs[sid].name : "?");
    }
    if (n->vals == NULL) {
        return e_fail(e, "struct %s without values", kr_structs[sid].name);
    }
    if (e->depth >= KR_MAX_DEPTH) {
        return e_fail(e, "structs nested deeper than %d", KR_MAX_DEPTH);
    }
    e->depth++;
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];
        bool ffx = flex;

        if (!kr_vrange_has(f->versions, v)) {
            continue;
        }
        if (field_tagged_at(f, v)) {
            ntag += n->vals[i].present != 0;
            continue;
        }
        if (KR_UNLIKELY(f->flags & KR_FF_FLEX_OVERRIDE)) {
            ffx = kr_vrange_has(f->flexible, v);
        }
        rc = enc_val(e, f->type, f->elem_type, f->struct_id, v, ffx,
                     kr_vrange_has(f->nullable, v), &n->vals[i]);
        if (rc != KR_OK) {
            kr_codec_err_prepend(e->err, f->name);
            goto out;
        }
    }
    /* unknown tagged fields cannot be written in a classic version */
    if (flex) {
        rc = enc_tags(e, n, sd, v, ntag);
    }
out:
    e->depth--;
    return rc;
}

static void
w_total(struct kr_wbuf *w)
{
    size_t i, t = w->len;

    for (i = 0; i < w->nrecs; i++) {
        t += (size_t)w->recs[i].len;
    }
    w->total = t;
}

/* Only n's tagged-field section (kr_encode_tags). */
static int
enc_tags_only(struct enc *e, const struct kr_node *n, int16_t v)
{
    const struct kr_struct_desc *sd;
    uint32_t ntag = 0;
    unsigned i;

    if (n->struct_id >= kr_nstructs || n->vals == NULL) {
        return e_fail(e, "no struct to encode");
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (kr_vrange_has(f->versions, v) && field_tagged_at(f, v)) {
            ntag += n->vals[i].present != 0;
        }
    }
    e->depth = 1;
    return enc_tags(e, n, sd, v, ntag);
}

/* kr_encode_struct and kr_encode_tags. */
static int
encode_at(const struct kr_node *n, int16_t v, bool flexible, bool tags_only,
          struct kr_wbuf *w, struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    struct enc e;
    int rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    e.w = w;
    e.err = err;
    e.base = w->len;
    e.depth = 0;
    if (n == NULL) {
        return e_fail(&e, "no struct to encode");
    }
    rc = tags_only ? enc_tags_only(&e, n, v)
                   : enc_struct(&e, n, n->struct_id, v, flexible);
    w_total(w);
    if (rc == KR_OK && w->failed) {
        rc = err_set(err, KR_ENOMEM, w->len - e.base, "out of memory");
    }
    return rc;
}

int
kr_encode_struct(const struct kr_node *n, int16_t v, bool flexible,
                 struct kr_wbuf *w, struct kr_codec_err *err)
{
    return encode_at(n, v, flexible, false, w, err);
}

int
kr_encode_tags(const struct kr_node *n, int16_t v, struct kr_wbuf *w,
               struct kr_codec_err *err)
{
    return encode_at(n, v, true, true, w, err);
}


/* The int16 header field id of node h, or INT64_MIN when missing. */
static int64_t
hdr_int(const struct kr_node *h, enum kr_field_id id)
{
    const struct kr_val *val = kr_node_get_id(h, id);

    return val != NULL ? val->u.i : INT64_MIN;
}

int
kr_encode_msg(const struct kr_msg *m, struct kr_wbuf *w,
              struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    const struct kr_api_desc *a;
    bool rsp = m->dir == KR_DIR_RESPONSE;
    struct enc e;
    uint16_t root, hsid;
    int64_t hkey, hver;
    int hv, rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    e.w = w;
    e.err = err;
    e.base = w->len;
    e.depth = 0;
    a = kr_api_get(m->api_key);
    root = api_root(a, rsp, m->api_version);
    hv = a == NULL ? -1
         : rsp ? kr_response_header_version(m->api_key, m->api_version)
               : kr_request_header_version(m->api_key, m->api_version);
    if (root == KR_NO_STRUCT || hv < 0) {
        return unsupported(err, m);
    }
    if (m->header == NULL || m->body == NULL) {
        rc = e_fail(&e, "no %s", m->header == NULL ? "header" : "body");
        kr_codec_err_prepend(err, m->header == NULL ? "header" : "body");
        return rc;
    }
    hsid = rsp ? kr_response_header_struct : kr_request_header_struct;
    hkey = hdr_int(m->header, KR_FIELD_REQUEST_API_KEY);
    hver = hdr_int(m->header, KR_FIELD_REQUEST_API_VERSION);
    if (!rsp && (hkey != m->api_key || hver != m->api_version)) {
        rc = e_fail(&e, "header ApiKey/ApiVersion %lld/%lld differ from "
                    "the message's %d/%d", (long long)hkey, (long long)hver,
                    m->api_key, m->api_version);
        kr_codec_err_prepend(err, "header");
        return rc;
    }
    rc = enc_struct(&e, m->header, hsid, (int16_t)hv, rsp ? hv >= 1 : hv >= 2);
    if (rc != KR_OK) {
        kr_codec_err_prepend(err, "header");
        w_total(w);
        return rc;
    }
    rc = enc_struct(&e, m->body, root, m->api_version,
                    kr_api_flexible(a, m->api_version));
    w_total(w);
    if (rc == KR_OK && w->failed) {
        rc = err_set(err, KR_ENOMEM, w->len - e.base, "out of memory");
    }
    return rc;
}

uint8_t *
kr_wbuf_flatten(const struct kr_wbuf *w, const uint8_t *src, size_t src_len)
{
    size_t i, pos = 0, o = 0, total = w->len;
    uint8_t *out;

    if (w->failed) {
        return NULL;
    }
    for (i = 0; i < w->nrecs; i++) {
        const struct kr_wbuf_rec *r = &w->recs[i];

        if (r->len < 0 || r->at < pos || r->at > w->len ||
            (r->ext == NULL &&
             (r->src_off > src_len ||
              (uint64_t)r->len > src_len - r->src_off ||
              (r->len > 0 && src == NULL)))) {
            return NULL;
        }
        pos = r->at;
        total += (size_t)r->len;
    }
    out = malloc(total > 0 ? total : 1);
    if (out == NULL) {
        return NULL;
    }
    pos = 0;
    for (i = 0; i < w->nrecs; i++) {
        const struct kr_wbuf_rec *r = &w->recs[i];

        memcpy(out + o, w->buf + pos, r->at - pos);
        o += r->at - pos;
        pos = r->at;
        if (r->len > 0) {
            memcpy(out + o, r->ext != NULL ? r->ext : src + r->src_off,
                   (size_t)r->len);
            o += (size_t)r->len;
        }
    }
    if (w->len > pos) {
        memcpy(out + o, w->buf + pos, w->len - pos);
    }
    return out;
}
