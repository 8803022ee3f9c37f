/*
 * check_codec.c - unit tests for the generic codec (src/kr_codec.c) and
 * the arena (src/kr_arena.c).
 *
 * Golden frames come from the seed pages in ../shared/seeds (each byte is
 * rebuilt from the page's object tree, offsets and widths given there).
 * The other tests build trees from the schema tables for every ApiKey x
 * version x direction and round-trip them.  Randomness is deterministic
 * (xorshift with fixed seeds).
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_codec.h"
#include "kr_api_keys.h"
#include "kr_scan.h"
#include "kr_test.h"

/* ---- helpers ------------------------------------------------------------- */

/* Parse hex digits (spaces ignored) into out; returns the byte count. */
static size_t
hex2bin(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;

    for (; *hex != '\0'; hex++) {
        int v;

        if (*hex >= '0' && *hex <= '9') {
            v = *hex - '0';
        } else if (*hex >= 'a' && *hex <= 'f') {
            v = *hex - 'a' + 10;
        } else if (*hex >= 'A' && *hex <= 'F') {
            v = *hex - 'A' + 10;
        } else {
            continue;
        }
        if (hi < 0) {
            hi = v;
        } else {
            ck_assert_uint_lt(n, cap);
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    ck_assert_int_eq(hi, -1);
    return n;
}

static void
put_be(uint8_t *p, uint64_t x, int width)
{
    int i;

    for (i = 0; i < width; i++) {
        p[i] = (uint8_t)(x >> (8 * (width - 1 - i)));
    }
}

/* The value at path below n (kr_test.h). */
#define val_at(n, path) kr_test_val_at((n), (path))

/* Same, with "header." selecting the message header. */
static struct kr_val *
msg_val(const struct kr_msg *m, const char *path)
{
    if (strncmp(path, "header.", 7) == 0) {
        return val_at(m->header, path + 7);
    }
    return val_at(m->body, path);
}

static const char *
dir_name(enum kr_dir dir)
{
    return dir == KR_DIR_REQUEST ? "request" : "response";
}

static int
decode_flat(struct kr_arena *a, const uint8_t *p, size_t len, int16_t key,
            int16_t ver, enum kr_dir dir, unsigned flags, struct kr_msg *m,
            struct kr_codec_err *err)
{
    struct iovec iov;
    struct kr_rbuf rb;

    kr_rbuf_init_flat(&rb, &iov, p, len);
    if (dir == KR_DIR_REQUEST) {
        return kr_decode_request(a, &rb, flags, m, err);
    }
    return kr_decode_response(a, &rb, key, ver, flags, m, err);
}

static int
decode_rb(struct kr_arena *a, const struct kr_rbuf *rb, int16_t key,
          int16_t ver, enum kr_dir dir, unsigned flags, struct kr_msg *m,
          struct kr_codec_err *err)
{
    if (dir == KR_DIR_REQUEST) {
        return kr_decode_request(a, rb, flags, m, err);
    }
    return kr_decode_response(a, rb, key, ver, flags, m, err);
}

/*
 * Encode m and flatten it with records from src; returns a malloc'd
 * payload of *len bytes (asserts success).
 */
static uint8_t *
encode_flat(const struct kr_msg *m, const uint8_t *src, size_t src_len,
            size_t *len, const char *what)
{
    struct kr_wbuf w;
    struct kr_codec_err err;
    uint8_t *out;
    int rc;

    memset(&w, 0, sizeof(w));
    rc = kr_encode_msg(m, &w, &err);
    ck_assert_msg(rc == KR_OK, "%s: encode failed: %s at %s (%s)", what,
                  kr_status_str(rc), err.path, err.msg);
    out = kr_wbuf_flatten(&w, src, src_len);
    ck_assert_msg(out != NULL, "%s: flatten failed", what);
    *len = w.total;
    kr_wbuf_free(&w);
    return out;
}

/* ---- tree comparison ----------------------------------------------------- */

struct cmp {
    const uint8_t *asrc, *bsrc;     /* payloads the records slices point in */
    char path[256];
    char why[128];
};

static void
cmp_prepend(struct cmp *c, const char *pre)
{
    char tmp[520];

    if (c->path[0] == '\0' || c->path[0] == '[') {
        snprintf(tmp, sizeof(tmp), "%s%s", pre, c->path);
    } else {
        snprintf(tmp, sizeof(tmp), "%s.%s", pre, c->path);
    }
    memcpy(c->path, tmp, sizeof(c->path) - 1);
    c->path[sizeof(c->path) - 1] = '\0';
}

static bool node_eq(struct cmp *c, const struct kr_node *a,
                    const struct kr_node *b, int16_t v);

static bool
str_eq(const struct kr_str *a, const struct kr_str *b)
{
    if (a->len != b->len) {
        return false;
    }
    return a->len <= 0 || memcmp(a->p, b->p, (size_t)a->len) == 0;
}

static bool
val_eq(struct cmp *c, uint8_t t, const struct kr_val *a,
       const struct kr_val *b, int16_t v)
{
    uint32_t i;

    if (a->is_null != b->is_null) {
        snprintf(c->why, sizeof(c->why), "is_null %d vs %d", a->is_null,
                 b->is_null);
        return false;
    }
    if (a->is_null) {
        return true;
    }
    switch (t) {
    case KR_T_FLOAT64:
        if (memcmp(&a->u.f, &b->u.f, 8) != 0) {
            snprintf(c->why, sizeof(c->why), "%g vs %g", a->u.f, b->u.f);
            return false;
        }
        return true;
    case KR_T_UUID:
    case KR_T_STRING:
    case KR_T_BYTES:
        if (!str_eq(&a->u.s, &b->u.s)) {
            snprintf(c->why, sizeof(c->why), "%s of %d vs %d bytes differ",
                     kr_type_name(t), (int)a->u.s.len, (int)b->u.s.len);
            return false;
        }
        return true;
    case KR_T_RECORDS:
        if (a->u.rec.len != b->u.rec.len ||
            memcmp(c->asrc + a->u.rec.off, c->bsrc + b->u.rec.off,
                   (size_t)a->u.rec.len) != 0) {
            snprintf(c->why, sizeof(c->why), "records differ");
            return false;
        }
        return true;
    case KR_T_ARRAY:
        if (a->u.arr->n != b->u.arr->n) {
            snprintf(c->why, sizeof(c->why), "array of %u vs %u",
                     a->u.arr->n, b->u.arr->n);
            return false;
        }
        for (i = 0; i < a->u.arr->n; i++) {
            if (!val_eq(c, a->u.arr->elem_type, &a->u.arr->items[i],
                        &b->u.arr->items[i], v)) {
                char idx[16];

                snprintf(idx, sizeof(idx), "[%u]", i);
                cmp_prepend(c, idx);
                return false;
            }
        }
        return true;
    case KR_T_STRUCT:
        return node_eq(c, a->u.node, b->u.node, v);
    default:
        if (a->u.i != b->u.i) {
            snprintf(c->why, sizeof(c->why), "%lld vs %lld",
                     (long long)a->u.i, (long long)b->u.i);
            return false;
        }
        return true;
    }
}

/* Compare the fields that exist at v, and the unknown tagged fields. */
static bool
node_eq(struct cmp *c, const struct kr_node *a, const struct kr_node *b,
        int16_t v)
{
    const struct kr_struct_desc *sd = &kr_structs[a->struct_id];
    unsigned i;

    if (a->struct_id != b->struct_id) {
        snprintf(c->why, sizeof(c->why), "struct %u vs %u", a->struct_id,
                 b->struct_id);
        return false;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(a, i);

        if (!kr_vrange_has(f->versions, v)) {
            continue;
        }
        if (a->vals[i].present != b->vals[i].present) {
            snprintf(c->why, sizeof(c->why), "present %d vs %d",
                     a->vals[i].present, b->vals[i].present);
            cmp_prepend(c, f->name);
            return false;
        }
        if (a->vals[i].present &&
            !val_eq(c, f->type, &a->vals[i], &b->vals[i], v)) {
            cmp_prepend(c, f->name);
            return false;
        }
    }
    if (a->nunknown != b->nunknown) {
        snprintf(c->why, sizeof(c->why), "%u vs %u unknown tags", a->nunknown,
                 b->nunknown);
        return false;
    }
    for (i = 0; i < a->nunknown; i++) {
        if (a->unknown[i].tag != b->unknown[i].tag ||
            !str_eq(&a->unknown[i].data, &b->unknown[i].data)) {
            snprintf(c->why, sizeof(c->why), "unknown tag %u differs",
                     a->unknown[i].tag);
            return false;
        }
    }
    return true;
}

static void
assert_msg_eq(const struct kr_msg *a, const uint8_t *asrc,
              const struct kr_msg *b, const uint8_t *bsrc, const char *what)
{
    struct cmp c;

    memset(&c, 0, sizeof(c));
    c.asrc = asrc;
    c.bsrc = bsrc;
    ck_assert_msg(node_eq(&c, a->header, b->header, a->hdr_version),
                  "%s: header.%s: %s", what, c.path, c.why);
    ck_assert_msg(node_eq(&c, a->body, b->body, a->api_version),
                  "%s: %s: %s", what, c.path, c.why);
}

/* ---- deterministic randomness -------------------------------------------- */

static uint64_t
rnd(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static uint32_t
rndn(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rnd(s) % n);
}

/* ---- building instances -------------------------------------------------- */

/* One empty RecordBatch v2 (61 bytes): opaque to the codec. */
static uint8_t batch61[61];

static void
init_batch61(void)
{
    memset(batch61, 0, sizeof(batch61));
    put_be(batch61 + 8, 49, 4);         /* batchLength */
    batch61[16] = 2;                    /* magic */
    put_be(batch61 + 43, (uint64_t)-1, 8);  /* producerId */
    put_be(batch61 + 51, 0xffff, 2);    /* producerEpoch */
    put_be(batch61 + 53, 0xffffffffu, 4);   /* baseSequence */
}

/*
 * Smallest legal instance (seeds/README.md): numbers zero, strings and
 * bytes empty, one element per array, records one empty batch (a slice
 * at offset 0 of batch61), nullable structs present, tagged fields absent.
 */
static void fill_min_val(struct kr_arena *a, uint8_t t, uint8_t et,
                         uint16_t sid, int16_t v, struct kr_val *val);

static void
fill_min(struct kr_arena *a, struct kr_node *n, int16_t v)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    unsigned i;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);

        if (!kr_vrange_has(f->versions, v) ||
            (f->tag >= 0 && kr_vrange_has(f->tagged, v))) {
            continue;
        }
        ck_assert_int_eq(n->vals[i].present, 1);
        fill_min_val(a, f->type, f->elem_type, f->struct_id, v, &n->vals[i]);
    }
}

static void
fill_min_val(struct kr_arena *a, uint8_t t, uint8_t et, uint16_t sid,
             int16_t v, struct kr_val *val)
{
    uint32_t j;

    val->is_null = 0;
    switch (t) {
    case KR_T_FLOAT64:
        val->u.f = 0.0;
        break;
    case KR_T_UUID:
        val->u.s.p = (const uint8_t *)"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        val->u.s.len = 16;
        break;
    case KR_T_STRING:
    case KR_T_BYTES:
        val->u.s.p = (const uint8_t *)"";
        val->u.s.len = 0;
        break;
    case KR_T_RECORDS:
        val->u.rec.off = 0;
        val->u.rec.len = (int32_t)sizeof(batch61);
        break;
    case KR_T_ARRAY:
        val->u.arr = kr_array_new(a, et, sid, 1, v);
        ck_assert_ptr_nonnull(val->u.arr);
        for (j = 0; j < val->u.arr->n; j++) {
            fill_min_val(a, et, KR_T_NONE, sid, v, &val->u.arr->items[j]);
        }
        break;
    case KR_T_STRUCT:
        if (val->u.node == NULL) {
            val->u.node = kr_node_new(a, sid, v);
            ck_assert_ptr_nonnull(val->u.node);
        }
        fill_min(a, val->u.node, v);
        break;
    default:
        val->u.i = 0;
        break;
    }
}

/* Random source for records slices and bytes. */
static uint8_t rsrc[512];

struct rctx {
    struct kr_arena *a;
    uint64_t seed;
    int depth;
};

static void fill_rand(struct rctx *r, struct kr_node *n, int16_t v,
                      bool flex);

static const char rchars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

static void
rand_str(struct rctx *r, struct kr_str *s, bool text)
{
    uint32_t len = rndn(&r->seed, 8) == 0 ? 120 + rndn(&r->seed, 200)
                                          : rndn(&r->seed, 12);
    uint8_t *p = kr_arena_alloc(r->a, len + 1);
    uint32_t i;

    ck_assert_ptr_nonnull(p);
    for (i = 0; i < len; i++) {
        if (!text) {
            p[i] = (uint8_t)rnd(&r->seed);
        } else if (i + 1 < len && rndn(&r->seed, 10) == 0) {
            p[i++] = 0xc3;              /* "é": valid 2-byte UTF-8 */
            p[i] = 0xa9;
        } else {
            p[i] = (uint8_t)rchars[rndn(&r->seed, sizeof(rchars) - 1)];
        }
    }
    s->p = p;
    s->len = (int32_t)len;
}

static void
fill_rand_val(struct rctx *r, uint8_t t, uint8_t et, uint16_t sid, int16_t v,
              bool flex, bool nullable, struct kr_val *val)
{
    uint64_t x = rnd(&r->seed);
    uint32_t j;

    val->is_null = 0;
    if (nullable && rndn(&r->seed, 4) == 0 && t != KR_T_UUID) {
        val->is_null = 1;
        switch (t) {
        case KR_T_STRING:
        case KR_T_BYTES:
            val->u.s.p = NULL;
            val->u.s.len = -1;
            break;
        case KR_T_RECORDS:
            val->u.rec.len = -1;
            break;
        case KR_T_ARRAY:
            val->u.arr = NULL;
            break;
        case KR_T_STRUCT:
            val->u.node = NULL;
            break;
        default:
            val->is_null = 0;
            break;
        }
        if (val->is_null) {
            return;
        }
    }
    switch (t) {
    case KR_T_BOOL:
        val->u.i = (int64_t)(x & 1);
        break;
    case KR_T_INT8:
        val->u.i = (int8_t)x;
        break;
    case KR_T_INT16:
        val->u.i = (int16_t)x;
        break;
    case KR_T_UINT16:
        val->u.i = (uint16_t)x;
        break;
    case KR_T_INT32:
        val->u.i = (int32_t)x;
        break;
    case KR_T_UINT32:
        val->u.i = (uint32_t)x;
        break;
    case KR_T_INT64:
        val->u.i = (int64_t)x;
        break;
    case KR_T_FLOAT64:
        val->u.f = (double)(int32_t)x / 7.0;
        break;
    case KR_T_UUID: {
        uint8_t *p = kr_arena_alloc(r->a, 16);

        ck_assert_ptr_nonnull(p);
        for (j = 0; j < 16; j++) {
            p[j] = (uint8_t)rnd(&r->seed);
        }
        val->u.s.p = p;
        val->u.s.len = 16;
        break;
    }
    case KR_T_STRING:
        rand_str(r, &val->u.s, true);
        break;
    case KR_T_BYTES:
        rand_str(r, &val->u.s, false);
        break;
    case KR_T_RECORDS:
        val->u.rec.off = rndn(&r->seed, sizeof(rsrc) / 2);
        val->u.rec.len = (int32_t)rndn(&r->seed, sizeof(rsrc) / 2);
        break;
    case KR_T_ARRAY:
        val->u.arr = kr_array_new(r->a, et, sid,
                                  r->depth > 3 ? rndn(&r->seed, 2)
                                               : rndn(&r->seed, 4), v);
        ck_assert_ptr_nonnull(val->u.arr);
        for (j = 0; j < val->u.arr->n; j++) {
            fill_rand_val(r, et, KR_T_NONE, sid, v, flex, false,
                          &val->u.arr->items[j]);
        }
        break;
    case KR_T_STRUCT:
        if (val->u.node == NULL) {
            val->u.node = kr_node_new(r->a, sid, v);
            ck_assert_ptr_nonnull(val->u.node);
        }
        r->depth++;
        fill_rand(r, val->u.node, v, flex);
        r->depth--;
        break;
    default:
        break;
    }
}

/* True when struct sd has a field with tag t (any version). */
static bool
has_tag(const struct kr_struct_desc *sd, uint32_t t)
{
    unsigned i;

    for (i = 0; i < sd->nfields; i++) {
        if (kr_fields[sd->first_field + i].tag == (int32_t)t) {
            return true;
        }
    }
    return false;
}

static void
fill_rand(struct rctx *r, struct kr_node *n, int16_t v, bool flex)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    static const uint32_t cand[] = { 5, 9, 40, 77, 127, 128, 300, 70000 };
    unsigned i;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        bool fx = flex;

        if (!kr_vrange_has(f->versions, v)) {
            continue;
        }
        if (f->tag >= 0 && kr_vrange_has(f->tagged, v)) {
            if (rndn(&r->seed, 2) == 0) {
                continue;               /* stays absent */
            }
            n->vals[i].present = 1;
            fx = true;
        }
        if (f->flags & KR_FF_FLEX_OVERRIDE) {
            fx = kr_vrange_has(f->flexible, v);
        }
        fill_rand_val(r, f->type, f->elem_type, f->struct_id, v, fx,
                      kr_vrange_has(f->nullable, v), &n->vals[i]);
    }
    if (flex && rndn(&r->seed, 3) == 0) {
        uint32_t k, cnt = 1 + rndn(&r->seed, 2);
        struct kr_rawtag *u = kr_arena_alloc(r->a, cnt * sizeof(*u));
        uint32_t start = rndn(&r->seed, KR_ARRAY_LEN(cand));

        ck_assert_ptr_nonnull(u);
        n->nunknown = 0;
        for (k = 0; k < cnt && start + k < KR_ARRAY_LEN(cand); k++) {
            if (has_tag(sd, cand[start + k])) {
                continue;
            }
            u[n->nunknown].tag = cand[start + k];
            rand_str(r, &u[n->nunknown].data, false);
            n->nunknown++;
        }
        n->unknown = u;
    }
}

/* A message for (key, v, dir) whose body comes from fill. */
static void
build_msg(struct kr_arena *a, int16_t key, int16_t v, enum kr_dir dir,
          struct kr_msg *m)
{
    const struct kr_api_desc *api = kr_api_get(key);
    bool rsp = dir == KR_DIR_RESPONSE;
    int hv = rsp ? kr_response_header_version(key, v)
                 : kr_request_header_version(key, v);
    uint16_t hsid = rsp ? kr_response_header_struct
                        : kr_request_header_struct;

    ck_assert_ptr_nonnull(api);
    ck_assert_int_ge(hv, 0);
    memset(m, 0, sizeof(*m));
    m->dir = dir;
    m->api_key = key;
    m->api_version = v;
    m->hdr_version = (int16_t)hv;
    m->header = kr_node_new(a, hsid, (int16_t)hv);
    ck_assert_ptr_nonnull(m->header);
    if (!rsp) {
        struct kr_val *cid = kr_node_get(m->header, "ClientId");

        kr_node_get(m->header, "RequestApiKey")->u.i = key;
        kr_node_get(m->header, "RequestApiVersion")->u.i = v;
        ck_assert_ptr_nonnull(cid);
        if (hv >= 1) {
            ck_assert_int_eq(cid->present, 1);
        }
        cid->is_null = 0;
        cid->u.s.p = (const uint8_t *)"";
        cid->u.s.len = 0;
    }
    m->body = kr_node_new(a, kr_api_root(api, rsp, v), v);
    ck_assert_ptr_nonnull(m->body);
}

/*
 * A message for (api, v, dir) with a random header (ClientId,
 * CorrelationId, header tagged fields) and a default body.
 */
static void
build_rand_msg(struct rctx *r, const struct kr_api_desc *api, int16_t v,
               enum kr_dir d, struct kr_msg *m)
{
    build_msg(r->a, api->key, v, d, m);
    if (d == KR_DIR_REQUEST && m->hdr_version >= 1) {
        fill_rand_val(r, KR_T_STRING, 0, 0, m->hdr_version, false, true,
                      kr_node_get(m->header, "ClientId"));
    }
    kr_node_get(m->header, "CorrelationId")->u.i = (int32_t)rnd(&r->seed);
    if (m->hdr_version >= (d == KR_DIR_REQUEST ? 2 : 1)) {
        fill_rand(r, m->header, m->hdr_version, true);
        kr_node_get(m->header, "CorrelationId")->present = 1;
    }
    if (d == KR_DIR_REQUEST) {
        kr_node_get(m->header, "RequestApiKey")->u.i = api->key;
        kr_node_get(m->header, "RequestApiVersion")->u.i = v;
    }
}

/* ---- golden frames from the seed pages ----------------------------------- */

struct gfield {
    const char *path;
    size_t off;         /* frame offset (with the size prefix), from the page */
    int width;
};

struct golden {
    const char *name;
    int16_t key, ver;
    enum kr_dir dir;
    size_t size;        /* frame bytes, from the page */
    const char *hex;    /* the whole frame */
    const char *empty_str[2];   /* string fields that must be "" */
    const char *one_arr[3];     /* arrays that must have one element */
    struct gfield f[8];
};

static const struct golden goldens[] = {
    /* seeds/OffsetForLeaderEpoch-v4.txt, Request object tree */
    { "OffsetForLeaderEpoch v4 request", 23, 4, KR_DIR_REQUEST, 37,
      "00000021 0017 0004 00000000 0000 00"      /* size, header v2 */
      "00000000"                                  /* ReplicaId */
      "02 01 02"                         /* Topics, Topic "", Partitions */
      "00000000 00000000 00000000 00"             /* Partition[0] */
      "00 00",
      { "Topics[0].Topic", "header.ClientId" },
      { "Topics", "Topics[0].Partitions" },
      { { "header.CorrelationId", 0x08, 4 },
        { "ReplicaId", 0x0f, 4 },
        { "Topics[0].Partitions[0].Partition", 0x16, 4 },
        { "Topics[0].Partitions[0].CurrentLeaderEpoch", 0x1a, 4 },
        { "Topics[0].Partitions[0].LeaderEpoch", 0x1e, 4 } } },
    /* seeds/OffsetForLeaderEpoch-v4.txt, Response object tree */
    { "OffsetForLeaderEpoch v4 response", 23, 4, KR_DIR_RESPONSE, 37,
      "00000021 00000000 00"                      /* size, header v1 */
      "00000000"                                  /* ThrottleTimeMs */
      "02 01 02"
      "0000 00000000 00000000 0000000000000000 00"    /* EpochEndOffset */
      "00 00",
      { "Topics[0].Topic" },
      { "Topics", "Topics[0].Partitions" },
      { { "header.CorrelationId", 0x04, 4 },
        { "ThrottleTimeMs", 0x09, 4 },
        { "Topics[0].Partitions[0].ErrorCode", 0x10, 2 },
        { "Topics[0].Partitions[0].Partition", 0x12, 4 },
        { "Topics[0].Partitions[0].LeaderEpoch", 0x16, 4 },
        { "Topics[0].Partitions[0].EndOffset", 0x1a, 8 } } },
    /* seeds/ListOffsets-v10.txt, Request object tree */
    { "ListOffsets v10 request", 2, 10, KR_DIR_REQUEST, 46,
      "0000002a 0002 000a 00000000 0000 00"
      "00000000 00"                       /* ReplicaId, IsolationLevel */
      "02 01 02"
      "00000000 00000000 0000000000000000 00"
      "00"
      "00000000 00",                      /* TimeoutMs, tags */
      { "Topics[0].Name", "header.ClientId" },
      { "Topics", "Topics[0].Partitions" },
      { { "header.CorrelationId", 0x08, 4 },
        { "ReplicaId", 0x0f, 4 },
        { "IsolationLevel", 0x13, 1 },
        { "Topics[0].Partitions[0].PartitionIndex", 0x17, 4 },
        { "Topics[0].Partitions[0].CurrentLeaderEpoch", 0x1b, 4 },
        { "Topics[0].Partitions[0].Timestamp", 0x1f, 8 },
        { "TimeoutMs", 0x29, 4 } } },
    /* seeds/ListOffsets-v10.txt, Response object tree */
    { "ListOffsets v10 response", 2, 10, KR_DIR_RESPONSE, 45,
      "00000029 00000000 00"
      "00000000"
      "02 01 02"
      "00000000 0000 0000000000000000 0000000000000000 00000000 00"
      "00 00",
      { "Topics[0].Name" },
      { "Topics", "Topics[0].Partitions" },
      { { "header.CorrelationId", 0x04, 4 },
        { "ThrottleTimeMs", 0x09, 4 },
        { "Topics[0].Partitions[0].PartitionIndex", 0x10, 4 },
        { "Topics[0].Partitions[0].ErrorCode", 0x14, 2 },
        { "Topics[0].Partitions[0].Timestamp", 0x16, 8 },
        { "Topics[0].Partitions[0].Offset", 0x1e, 8 },
        { "Topics[0].Partitions[0].LeaderEpoch", 0x26, 4 } } },
    /* seeds/ElectLeaders-v2.txt, Request object tree */
    { "ElectLeaders v2 request", 43, 2, KR_DIR_REQUEST, 29,
      "00000019 002b 0002 00000000 0000 00"
      "00"                                /* ElectionType */
      "02 01 02 00000000 00"      /* TopicPartitions[0]: Topic, [0] */
      "00000000 00",                      /* TimeoutMs, tags */
      { "TopicPartitions[0].Topic", "header.ClientId" },
      { "TopicPartitions", "TopicPartitions[0].Partitions" },
      { { "header.CorrelationId", 0x08, 4 },
        { "ElectionType", 0x0f, 1 },
        { "TopicPartitions[0].Partitions[0]", 0x13, 4 },
        { "TimeoutMs", 0x18, 4 } } },
    /* seeds/ElectLeaders-v2.txt, Response object tree */
    { "ElectLeaders v2 response", 43, 2, KR_DIR_RESPONSE, 28,
      "00000018 00000000 00"
      "00000000 0000"                     /* ThrottleTimeMs, ErrorCode */
      "02 01 02 00000000 0000 01 00"      /* ..PartitionResult[0] */
      "00 00",
      { "ReplicaElectionResults[0].Topic",
        "ReplicaElectionResults[0].PartitionResult[0].ErrorMessage" },
      { "ReplicaElectionResults",
        "ReplicaElectionResults[0].PartitionResult" },
      { { "header.CorrelationId", 0x04, 4 },
        { "ThrottleTimeMs", 0x09, 4 },
        { "ErrorCode", 0x0d, 2 },
        { "ReplicaElectionResults[0].PartitionResult[0].PartitionId", 0x12,
          4 },
        { "ReplicaElectionResults[0].PartitionResult[0].ErrorCode", 0x16,
          2 } } },
};

/* The frame of golden g in buf; returns its size (asserted = page size). */
static size_t
golden_frame(const struct golden *g, uint8_t *buf, size_t cap)
{
    size_t n = hex2bin(g->hex, buf, cap);

    ck_assert_msg(n == g->size, "%s: %zu bytes, page says %zu", g->name, n,
                  g->size);
    ck_assert_uint_eq((size_t)(buf[0] << 24 | buf[1] << 16 | buf[2] << 8 |
                               buf[3]), n - 4);
    return n;
}

/* Decode g's payload; check every field the page gives; encode back. */
static void
check_golden_bytes(const struct golden *g, const uint8_t *frame, size_t n,
                   const int64_t *expect)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    uint8_t *out;
    size_t olen;
    unsigned i;
    int rc;

    kr_arena_init(&a, 0);
    rc = decode_flat(&a, frame + 4, n - 4, g->key, g->ver, g->dir,
                     KR_DEC_STRICT, &m, &err);
    ck_assert_msg(rc == KR_OK, "%s: %s at %s: %s", g->name,
                  kr_status_str(rc), err.path, err.msg);
    ck_assert_int_eq(m.api_key, g->key);
    ck_assert_int_eq(m.api_version, g->ver);
    ck_assert_int_eq(m.hdr_version, g->dir == KR_DIR_REQUEST ? 2 : 1);
    ck_assert_uint_eq(m.trailing, 0);
    ck_assert_uint_eq(m.body_off, g->dir == KR_DIR_REQUEST ? 11 : 5);
    ck_assert_int_eq(m.correlation_id, (int32_t)expect[0]);
    for (i = 0; i < KR_ARRAY_LEN(g->f) && g->f[i].path != NULL; i++) {
        struct kr_val *val = msg_val(&m, g->f[i].path);

        ck_assert_msg(val != NULL, "%s: no %s", g->name, g->f[i].path);
        ck_assert_msg(val->present == 1, "%s: %s absent", g->name,
                      g->f[i].path);
        ck_assert_msg(val->u.i == expect[i], "%s: %s = %lld, expected %lld",
                      g->name, g->f[i].path, (long long)val->u.i,
                      (long long)expect[i]);
    }
    for (i = 0; i < KR_ARRAY_LEN(g->empty_str) && g->empty_str[i]; i++) {
        struct kr_val *val = msg_val(&m, g->empty_str[i]);

        ck_assert_msg(val != NULL && !val->is_null && val->u.s.len == 0,
                      "%s: %s not \"\"", g->name, g->empty_str[i]);
    }
    for (i = 0; i < KR_ARRAY_LEN(g->one_arr) && g->one_arr[i]; i++) {
        struct kr_val *val = msg_val(&m, g->one_arr[i]);

        ck_assert_msg(val != NULL && val->u.arr != NULL &&
                      val->u.arr->n == 1, "%s: %s not one element",
                      g->name, g->one_arr[i]);
    }
    if (g->dir == KR_DIR_REQUEST) {
        ck_assert_int_eq(msg_val(&m, "header.RequestApiKey")->u.i, g->key);
        ck_assert_int_eq(msg_val(&m, "header.RequestApiVersion")->u.i,
                         g->ver);
    }
    out = encode_flat(&m, frame + 4, n - 4, &olen, g->name);
    ck_assert_uint_eq(olen, n - 4);
    ck_assert_msg(memcmp(out, frame + 4, olen) == 0, "%s: re-encode differs",
                  g->name);
    free(out);
    kr_arena_free(&a);
}

START_TEST(test_golden_seeds)
{
    const struct golden *g = &goldens[_i];
    uint8_t frame[128];
    int64_t expect[8] = { 0 };
    size_t n = golden_frame(g, frame, sizeof(frame));
    unsigned i;

    /* as on the page: every value zero */
    check_golden_bytes(g, frame, n, expect);

    /* each field patched at the page's offset/width to a distinct value */
    for (i = 0; i < KR_ARRAY_LEN(g->f) && g->f[i].path != NULL; i++) {
        static const uint64_t pat[] = { 0, 0x5a, 0x1234, 0, 0x10203040, 0, 0,
                                        0, 0x0102030405060708ull };
        int w = g->f[i].width;
        uint64_t x = pat[w] + i;

        put_be(frame + g->f[i].off, x, w);
        expect[i] = w == 1 ? (int8_t)x : w == 2 ? (int16_t)x
                  : w == 4 ? (int32_t)x : (int64_t)x;
    }
    check_golden_bytes(g, frame, n, expect);
}
END_TEST

/* The smallest instance of the seeded APIs is exactly the page's frame. */
START_TEST(test_golden_smallest)
{
    const struct golden *g = &goldens[_i];
    uint8_t frame[128];
    struct kr_arena a;
    struct kr_msg m;
    uint8_t *out;
    size_t olen;

    (void)golden_frame(g, frame, sizeof(frame));
    kr_arena_init(&a, 0);
    build_msg(&a, g->key, g->ver, g->dir, &m);
    fill_min(&a, m.body, g->ver);
    out = encode_flat(&m, batch61, sizeof(batch61), &olen, g->name);
    ck_assert_uint_eq(olen + 4, g->size);
    ck_assert_msg(memcmp(out, frame + 4, olen) == 0, "%s: differs",
                  g->name);
    free(out);
    kr_arena_free(&a);
}
END_TEST

/*
 * seeds/FetchSnapshot-v0-response.txt: layout and example values.  The
 * page draws CurrentLeader inline; the schemas make it tagged field 0 of
 * the partition, so it goes after UnalignedRecords in the tag section.
 */
START_TEST(test_fetchsnapshot_layout)
{
    static const char *const pre =
        "00000000 00"                       /* ResponseHeader v1 */
        "00000000 0000"                     /* ThrottleTimeMs, ErrorCode */
        "02 07 6f7264657273"                /* Topics, Name "orders" */
        "02 00000003 0000"                  /* Partitions, Index, ErrorCode */
        "0000000000024b6e 00000011 00"      /* SnapshotId {150382, 17} */
        "0000000000100000"                  /* Size 1048576 */
        "0000000000000000"                  /* Position */
        "3e";                               /* UnalignedRecords: 61 bytes */
    static const char *const post =
        "01 00 09 00000001 00000011 00"     /* tag 0 CurrentLeader {1, 17} */
        "00 00";
    uint8_t expect[256];
    size_t elen, olen;
    struct kr_arena a;
    struct kr_msg m, m2;
    struct kr_codec_err err;
    struct kr_node *topic, *part;
    struct kr_val *val;
    uint8_t *out, *out2;
    int rc;

    kr_arena_init(&a, 0);
    elen = hex2bin(pre, expect, sizeof(expect));
    ck_assert_uint_eq(elen, 56);        /* records length at 55 */
    memcpy(expect + elen, batch61, sizeof(batch61));
    elen += sizeof(batch61);
    elen += hex2bin(post, expect + elen, sizeof(expect) - elen);

    build_msg(&a, 59, 0, KR_DIR_RESPONSE, &m);
    ck_assert_int_eq(m.hdr_version, 1);
    val = kr_node_get(m.body, "Topics");
    val->u.arr = kr_array_new(&a, KR_T_STRUCT, val->u.arr->struct_id, 1, 0);
    topic = val->u.arr->items[0].u.node;
    kr_node_get(topic, "Name")->u.s.p = (const uint8_t *)"orders";
    kr_node_get(topic, "Name")->u.s.len = 6;
    val = kr_node_get(topic, "Partitions");
    val->u.arr = kr_array_new(&a, KR_T_STRUCT, val->u.arr->struct_id, 1, 0);
    part = val->u.arr->items[0].u.node;
    kr_node_get(part, "Index")->u.i = 3;
    val_at(part, "SnapshotId.EndOffset")->u.i = 150382;
    val_at(part, "SnapshotId.Epoch")->u.i = 17;
    val = kr_node_get(part, "CurrentLeader");
    ck_assert_int_eq(val->present, 0);      /* tagged: absent by default */
    ck_assert_int_eq(val_at(part, "CurrentLeader.LeaderId")->u.i, 0);
    val->present = 1;
    val_at(part, "CurrentLeader.LeaderId")->u.i = 1;
    val_at(part, "CurrentLeader.LeaderEpoch")->u.i = 17;
    kr_node_get(part, "Size")->u.i = 1048576;
    kr_node_get(part, "UnalignedRecords")->u.rec.len = 61;

    out = encode_flat(&m, batch61, sizeof(batch61), &olen, "FetchSnapshot");
    ck_assert_uint_eq(olen, elen);
    ck_assert_msg(memcmp(out, expect, elen) == 0, "FetchSnapshot layout");

    rc = decode_flat(&a, out, olen, 59, 0, KR_DIR_RESPONSE, KR_DEC_STRICT,
                     &m2, &err);
    ck_assert_msg(rc == KR_OK, "%s at %s", err.msg, err.path);
    part = val_at(m2.body, "Topics[0].Partitions[0]")->u.node;
    ck_assert_int_eq(kr_node_get(part, "Index")->u.i, 3);
    ck_assert_int_eq(val_at(part, "SnapshotId.EndOffset")->u.i, 150382);
    ck_assert_int_eq(kr_node_get(part, "CurrentLeader")->present, 1);
    ck_assert_int_eq(val_at(part, "CurrentLeader.LeaderId")->u.i, 1);
    ck_assert_int_eq(val_at(part, "CurrentLeader.LeaderEpoch")->u.i, 17);
    ck_assert_int_eq(kr_node_get(part, "Size")->u.i, 1048576);
    val = kr_node_get(part, "UnalignedRecords");
    ck_assert_uint_eq(val->u.rec.off, 56);  /* a slice of the payload */
    ck_assert_int_eq(val->u.rec.len, 61);
    ck_assert_int_eq(memcmp(val_at(m2.body, "Topics[0].Name")->u.s.p,
                            "orders", 6), 0);
    out2 = encode_flat(&m2, out, olen, &olen, "FetchSnapshot again");
    ck_assert_int_eq(memcmp(out2, expect, elen), 0);
    free(out2);

    /* records krelay built itself (kr_val_set_records_ext): written in
       place of the slice, the length prefix theirs, no kr_wbuf_rec */
    {
        static const uint8_t own[5] = { 1, 2, 3, 4, 5 };
        struct kr_wbuf w = { 0 };

        kr_val_set_records_ext(val, own, (int32_t)sizeof(own));
        ck_assert_int_eq(kr_encode_msg(&m2, &w, &err), KR_OK);
        ck_assert_uint_eq(w.nrecs, 0);
        ck_assert_uint_eq(w.total, elen - 61 + 5);
        ck_assert_int_eq(memcmp(w.buf, expect, 55), 0);
        ck_assert_uint_eq(w.buf[55], 5 + 1);            /* compact length */
        ck_assert_int_eq(memcmp(w.buf + 56, own, 5), 0);
        ck_assert_int_eq(memcmp(w.buf + 61, expect + 56 + 61,
                                elen - 56 - 61), 0);
        kr_val_set_records_ext(val, NULL, -1);          /* not nullable */
        kr_wbuf_reset(&w);
        ck_assert_int_eq(kr_encode_msg(&m2, &w, &err), KR_EPROTO);
        kr_wbuf_free(&w);
    }
    free(out);
    kr_arena_free(&a);
}
END_TEST

/* ---- every API x version x direction ------------------------------------- */

/* encode -> decode (strict) -> compare trees -> encode -> same bytes */
static void
roundtrip(struct kr_arena *a, const struct kr_msg *m, const uint8_t *src,
          size_t src_len, const char *what, uint8_t **payload, size_t *plen,
          struct kr_msg *decoded)
{
    struct kr_codec_err err;
    uint8_t *p1, *p2;
    size_t l1, l2;
    int rc;

    p1 = encode_flat(m, src, src_len, &l1, what);
    rc = decode_flat(a, p1, l1, m->api_key, m->api_version, m->dir,
                     KR_DEC_STRICT, decoded, &err);
    ck_assert_msg(rc == KR_OK, "%s: decode: %s at %s @%zu: %s", what,
                  kr_status_str(rc), err.path, err.offset, err.msg);
    ck_assert_uint_eq(decoded->trailing, 0);
    ck_assert_int_eq(decoded->hdr_version, m->hdr_version);
    assert_msg_eq(m, src, decoded, p1, what);
    p2 = encode_flat(decoded, p1, l1, &l2, what);
    ck_assert_msg(l1 == l2 && memcmp(p1, p2, l1) == 0,
                  "%s: re-encode differs (%zu vs %zu bytes)", what, l1, l2);
    free(p2);
    *payload = p1;
    *plen = l1;
}

/* Every element struct of an array is at least one byte (elem_min). */
static void
check_elem_sizes(struct kr_arena *a, uint16_t sid, int16_t v, bool flex,
                 int depth)
{
    const struct kr_struct_desc *sd = &kr_structs[sid];
    unsigned i;

    ck_assert_int_lt(depth, 16);
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (!kr_vrange_has(f->versions, v)) {
            continue;
        }
        if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT) {
            struct kr_wbuf w;
            struct kr_codec_err err;
            struct kr_node *n = kr_node_new(a, f->struct_id, v);

            memset(&w, 0, sizeof(w));
            ck_assert_ptr_nonnull(n);
            ck_assert_int_eq(kr_encode_struct(n, v, flex, &w, &err), KR_OK);
            ck_assert_msg(w.total >= 1, "%s: empty element at v%d",
                          f->name, v);
            kr_wbuf_free(&w);
        }
        if (f->type == KR_T_STRUCT ||
            (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) {
            check_elem_sizes(a, f->struct_id, v, flex, depth + 1);
        }
    }
}

START_TEST(test_all_smallest)
{
    const struct kr_api_desc *api = kr_api_get((int16_t)_i);
    struct kr_arena a;
    int16_t v;
    int d;

    if (api == NULL) {
        return;
    }
    kr_arena_init(&a, 0);
    for (v = api->valid.lo; v <= api->valid.hi; v++) {
        for (d = 0; d < 2; d++) {
            struct kr_msg m, m2;
            uint8_t *p;
            size_t plen;
            char what[96];

            if (kr_api_root(api, d == 1, v) == KR_NO_STRUCT) {
                continue;
            }
            snprintf(what, sizeof(what), "%s v%d %s (smallest)", api->name,
                     v, dir_name((enum kr_dir)d));
            build_msg(&a, api->key, v, (enum kr_dir)d, &m);
            fill_min(&a, m.body, v);
            roundtrip(&a, &m, batch61, sizeof(batch61), what, &p, &plen,
                      &m2);
            /* header layout: classic ClientId in v1 and v2, header v0 */
            if (d == 0) {
                size_t hlen = m.hdr_version == 0 ? 8
                            : m.hdr_version == 1 ? 10 : 11;

                ck_assert_msg(m2.body_off == hlen, "%s: body at %zu", what,
                              m2.body_off);
                if (m.hdr_version >= 1) {
                    ck_assert_msg(p[8] == 0 && p[9] == 0,
                                  "%s: ClientId not int16 \"\"", what);
                }
            } else {
                ck_assert_uint_eq(m2.body_off, m.hdr_version == 1 ? 5 : 4);
            }
            check_elem_sizes(&a, kr_api_root(api, d == 1, v), v,
                             kr_api_flexible(api, v), 0);
            free(p);
            kr_arena_reset(&a);
        }
    }
    kr_arena_free(&a);
}
END_TEST

/* Split payload p into nseg segments at random points (or every byte). */
static int
split_segments(uint64_t *seed, const uint8_t *p, size_t len,
               struct iovec *iov, int max)
{
    int n = 0;
    size_t off = 0;

    while (off < len && n < max - 1) {
        size_t k = 1 + rndn(seed, (uint32_t)(len / 4 + 2));

        if (k > len - off) {
            k = len - off;
        }
        /* occasionally an empty segment in between */
        if (rndn(seed, 8) == 0 && n < max - 2) {
            iov[n].iov_base = (void *)(uintptr_t)p;
            iov[n].iov_len = 0;
            n++;
        }
        iov[n].iov_base = (void *)(uintptr_t)(p + off);
        iov[n].iov_len = k;
        n++;
        off += k;
    }
    if (off < len) {
        iov[n].iov_base = (void *)(uintptr_t)(p + off);
        iov[n].iov_len = len - off;
        n++;
    }
    return n;
}

/*
 * Every field of n and of the structs below it: kr_node_get_id with the
 * field's id and kr_node_get with its name both find that field's value.
 * Returns the number of fields checked.
 */
static unsigned
assert_ids_agree(const struct kr_node *n, const char *what, unsigned depth)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    unsigned i, checked = 0;
    uint32_t k;

    ck_assert_uint_lt(depth, 32);
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];

        ck_assert_msg(kr_node_get_id(n, (enum kr_field_id)f->id) == v,
                      "%s: %s.%s: kr_node_get_id(%u) finds another field",
                      what, sd->name, f->name, f->id);
        ck_assert_msg(kr_node_get(n, f->name) == v,
                      "%s: %s.%s: kr_node_get finds another field", what,
                      sd->name, f->name);
        checked++;
        if (!v->present || v->is_null) {
            continue;
        }
        if (f->type == KR_T_STRUCT && v->u.node != NULL) {
            checked += assert_ids_agree(v->u.node, what, depth + 1);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
                   v->u.arr != NULL) {
            for (k = 0; k < v->u.arr->n; k++) {
                if (v->u.arr->items[k].u.node != NULL) {
                    checked += assert_ids_agree(v->u.arr->items[k].u.node,
                                                what, depth + 1);
                }
            }
        }
    }
    return checked;
}

/*
 * kr_node_get_id on the golden frames: the same values as kr_node_get for
 * named fields, NULL where the struct has no such field.
 */
START_TEST(test_node_get_id)
{
    static const struct {
        const char *golden;     /* goldens[].name */
        enum kr_field_id id;
        const char *name;
        int64_t value;          /* after the patch below */
    } want[] = {
        { "ListOffsets v10 request", KR_FIELD_TIMEOUT_MS, "TimeoutMs",
          0x10203040 + 6 },
        { "ListOffsets v10 request", KR_FIELD_ISOLATION_LEVEL,
          "IsolationLevel", 0x5a + 2 },
        { "ListOffsets v10 request", KR_FIELD_REPLICA_ID, "ReplicaId",
          0x10203040 + 1 },
        { "ListOffsets v10 response", KR_FIELD_THROTTLE_TIME_MS,
          "ThrottleTimeMs", 0x10203040 + 1 },
        { "ElectLeaders v2 request", KR_FIELD_ELECTION_TYPE, "ElectionType",
          0x5a + 1 },
        { "ElectLeaders v2 response", KR_FIELD_ERROR_CODE, "ErrorCode",
          0x1234 + 2 },
    };
    unsigned i, k;

    for (i = 0; i < KR_ARRAY_LEN(want); i++) {
        const struct golden *g = NULL;
        uint8_t frame[128];
        struct kr_arena a;
        struct kr_msg m;
        struct kr_codec_err err;
        const struct kr_val *by_id, *by_name;
        size_t n;
        int rc;

        for (k = 0; k < KR_ARRAY_LEN(goldens); k++) {
            if (strcmp(goldens[k].name, want[i].golden) == 0) {
                g = &goldens[k];
            }
        }
        ck_assert_msg(g != NULL, "no golden %s", want[i].golden);
        n = golden_frame(g, frame, sizeof(frame));

        /* each page field a distinct value, as test_golden_seeds does */
        for (k = 0; k < KR_ARRAY_LEN(g->f) && g->f[k].path != NULL; k++) {
            static const uint64_t pat[] = { 0, 0x5a, 0x1234, 0, 0x10203040,
                                            0, 0, 0, 0x0102030405060708ull };

            put_be(frame + g->f[k].off, pat[g->f[k].width] + k,
                   g->f[k].width);
        }
        kr_arena_init(&a, 0);
        rc = decode_flat(&a, frame + 4, n - 4, g->key, g->ver, g->dir,
                         KR_DEC_STRICT, &m, &err);
        ck_assert_msg(rc == KR_OK, "%s: %s", g->name, err.msg);
        by_id = kr_node_get_id(m.body, want[i].id);
        by_name = kr_node_get(m.body, want[i].name);
        ck_assert_msg(by_id != NULL && by_id == by_name, "%s: %s", g->name,
                      want[i].name);
        ck_assert_int_eq(by_id->present, 1);
        ck_assert_int_eq(by_id->u.i, want[i].value);
        ck_assert_int_eq(kr_node_get_id(m.header, KR_FIELD_CORRELATION_ID)
                             ->u.i, m.correlation_id);
        ck_assert_ptr_eq(kr_node_get_id(m.header, KR_FIELD_CORRELATION_ID),
                         kr_node_get(m.header, "CorrelationId"));
        /* fields this struct does not have */
        ck_assert_ptr_null(kr_node_get_id(m.body, KR_FIELD_ACKS));
        ck_assert_ptr_null(kr_node_get(m.body, "Acks"));
        ck_assert_ptr_null(kr_node_get_id(m.body, KR_FIELD_NONE));
        ck_assert_ptr_null(kr_node_get_id(NULL, want[i].id));
        ck_assert_uint_gt(assert_ids_agree(m.header, g->name, 0), 0);
        ck_assert_uint_gt(assert_ids_agree(m.body, g->name, 0), 2);
        kr_arena_free(&a);
    }
}
END_TEST

START_TEST(test_all_random)
{
    const struct kr_api_desc *api = kr_api_get((int16_t)_i);
    struct kr_arena a;
    int16_t v;
    int d, it;

    if (api == NULL) {
        return;
    }
    kr_arena_init(&a, 0);
    for (v = api->valid.lo; v <= api->valid.hi; v++) {
        for (d = 0; d < 2; d++) {
            if (kr_api_root(api, d == 1, v) == KR_NO_STRUCT) {
                continue;
            }
            for (it = 0; it < 6; it++) {
                struct rctx r;
                struct kr_arena ta;
                struct kr_msg m, m2, m3;
                struct kr_codec_err err;
                struct iovec iov[KR_RBUF_MAX_SEG];
                struct kr_rbuf rb;
                uint8_t *p, *p3;
                size_t plen, l3, k;
                char what[96];
                int rc;

                snprintf(what, sizeof(what), "%s v%d %s (random %d)",
                         api->name, v, dir_name((enum kr_dir)d), it);
                r.a = &a;
                r.depth = 0;
                r.seed = 0x9e3779b97f4a7c15ull ^
                         ((uint64_t)api->key << 32 | (uint64_t)v << 8 |
                          (uint64_t)d << 4 | (uint64_t)it);
                build_rand_msg(&r, api, v, (enum kr_dir)d, &m);
                fill_rand(&r, m.body, v, kr_api_flexible(api, v));
                roundtrip(&a, &m, rsrc, sizeof(rsrc), what, &p, &plen, &m2);
                ck_assert_int_eq(m2.correlation_id,
                    (int32_t)kr_node_get(m.header, "CorrelationId")->u.i);
                assert_ids_agree(m2.header, what, 0);
                assert_ids_agree(m2.body, what, 0);

                /* the same payload in random segments */
                rb.seg = iov;
                rb.nseg = split_segments(&r.seed, p, plen, iov,
                                         KR_RBUF_MAX_SEG);
                rb.len = plen;
                rc = decode_rb(&a, &rb, api->key, v, (enum kr_dir)d,
                               KR_DEC_STRICT, &m3, &err);
                ck_assert_msg(rc == KR_OK, "%s segmented: %s at %s: %s",
                              what, kr_status_str(rc), err.path, err.msg);
                assert_msg_eq(&m2, p, &m3, p, what);
                p3 = encode_flat(&m3, p, plen, &l3, what);
                ck_assert_msg(l3 == plen && memcmp(p3, p, plen) == 0,
                              "%s: segmented re-encode differs", what);
                free(p3);

                /* truncated anywhere: refused, never read past the end */
                kr_arena_init(&ta, 0);
                if (it == 0) {
                    for (k = 0; k < plen; k++) {
                        uint8_t *cut = malloc(k > 0 ? k : 1);

                        memcpy(cut, p, k);
                        rc = decode_flat(&ta, cut, k, api->key, v,
                                         (enum kr_dir)d, 0, &m3, &err);
                        kr_arena_reset(&ta);
                        KR_TEST_CHECK(rc == KR_EPROTO,
                                      "%s cut at %zu: %s", what, k,
                                      kr_status_str(rc));
                        KR_TEST_CHECK(err.offset <= k, "%s cut at %zu: "
                                      "offset %zu", what, k, err.offset);
                        free(cut);
                    }
                }
                /* random corruption: any status, never a crash */
                if (it == 1) {
                    for (k = 0; k < 24; k++) {
                        uint8_t *bad = malloc(plen);
                        size_t at = rndn(&r.seed, (uint32_t)plen);
                        struct kr_wbuf w;

                        memcpy(bad, p, plen);
                        bad[at] = (uint8_t)rnd(&r.seed);
                        rc = decode_flat(&ta, bad, plen, api->key, v,
                                         (enum kr_dir)d, 0, &m3, &err);
                        if (rc == KR_OK) {
                            memset(&w, 0, sizeof(w));
                            rc = kr_encode_msg(&m3, &w, &err);
                            ck_assert_msg(rc == KR_OK, "%s: corrupted at "
                                          "%zu decodes but won't encode: "
                                          "%s at %s", what, at, err.msg,
                                          err.path);
                            kr_wbuf_free(&w);
                        } else {
                            ck_assert_msg(rc == KR_EPROTO ||
                                          rc == KR_EUNSUPPORTED, "%s: %s",
                                          what, kr_status_str(rc));
                            ck_assert_uint_le(err.offset, plen);
                        }
                        free(bad);
                        kr_arena_reset(&ta);
                    }
                }
                kr_arena_free(&ta);
                free(p);
                kr_arena_reset(&a);
            }
        }
    }
    kr_arena_free(&a);
}
END_TEST

/* ---- the resumable scanner (kr_scan) ------------------------------------- */

/* The values a scanner's observer was told (kr_scan_watch), in order. */
struct wev {
    uint8_t what;
    int64_t val;
    size_t n;
    uint8_t buf[KR_SCAN_CAP_MAX];
};
struct wlog {
    struct wev ev[512];
    size_t n;
    bool overflow;
};

static void
wlog_cb(void *arg, enum kr_scan_what what, const uint8_t *p, size_t n,
        int64_t val)
{
    struct wlog *wl = arg;
    struct wev *e;

    if (wl->n == KR_ARRAY_LEN(wl->ev)) {
        wl->overflow = true;
        return;
    }
    e = &wl->ev[wl->n++];
    memset(e, 0, sizeof(*e));
    e->what = (uint8_t)what;
    e->val = val;
    e->n = n;
    KR_TEST_CHECK(n <= sizeof(e->buf), "n %zu", n);
    if (p != NULL && n <= sizeof(e->buf)) {
        memcpy(e->buf, p, n);
    }
}

/*
 * What the observer should be told for a decoded body node: its
 * untagged fields in wire order (outside tagged values, not in arrays of
 * strings), watched as kr_scan.c's watch_kind says.
 */
static void
tree_events_at(const struct kr_node *n, struct wlog *wl, bool root)
{
    const struct kr_struct_desc *sd;
    unsigned i;
    uint32_t k;

    if (n == NULL) {
        return;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];
        struct wev e;

        if (!kr_vrange_has(f->versions, n->version) ||
            (f->tag >= 0 && kr_vrange_has(f->tagged, n->version))) {
            continue;
        }
        memset(&e, 0, sizeof(e));
        if ((f->flags & KR_FF_ERROR_CODE) && f->type == KR_T_INT16) {
            e.what = KR_SCAN_ERROR_CODE;
            e.val = v->u.i;
        } else if (f->id == KR_FIELD_ACKS && f->type == KR_T_INT16) {
            e.what = KR_SCAN_ACKS;
            e.val = v->u.i;
        } else if (root && f->id == KR_FIELD_TRANSACTIONAL_ID &&
                   f->type == KR_T_STRING) {
            e.what = KR_SCAN_TRANSACTIONAL_ID;
            e.val = v->is_null ? -1 : v->u.s.len;
            e.n = v->is_null ? 0 : (size_t)v->u.s.len < sizeof(e.buf)
                                       ? (size_t)v->u.s.len : sizeof(e.buf);
            if (e.n > 0) {
                memcpy(e.buf, v->u.s.p, e.n);
            }
        } else if (f->type == KR_T_RECORDS) {
            e.what = KR_SCAN_RECORDS;
            e.val = v->is_null ? -1 : v->u.rec.len;
        } else if (f->entity == KR_E_TOPIC_NAME && f->type == KR_T_STRING) {
            e.what = KR_SCAN_TOPIC;
            e.val = v->is_null ? -1 : v->u.s.len;
            e.n = v->is_null ? 0 : (size_t)v->u.s.len < sizeof(e.buf)
                                       ? (size_t)v->u.s.len : sizeof(e.buf);
            if (e.n > 0) {
                memcpy(e.buf, v->u.s.p, e.n);
            }
        } else if (f->id == KR_FIELD_TOPIC_ID && f->type == KR_T_UUID) {
            e.what = KR_SCAN_TOPIC_ID;
            e.n = 16;
            e.val = 16;
            memcpy(e.buf, v->u.s.p, 16);
        } else if (f->type == KR_T_STRUCT) {
            if (!v->is_null) {
                tree_events_at(v->u.node, wl, false);
            }
            continue;
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT) {
            for (k = 0; !v->is_null && v->u.arr != NULL && k < v->u.arr->n;
                 k++) {
                tree_events_at(v->u.arr->items[k].u.node, wl, false);
            }
            continue;
        } else {
            continue;
        }
        if (wl->n == KR_ARRAY_LEN(wl->ev)) {
            wl->overflow = true;
            return;
        }
        wl->ev[wl->n++] = e;
    }
}

/* The events of a message body (its root struct). */
static void
tree_events(const struct kr_node *n, struct wlog *wl)
{
    tree_events_at(n, wl, true);
}

/*
 * Scan p[0..plen) fed in pieces of the sizes step() picks; returns the
 * status and the offset reached.  A piece after the scanner stopped is
 * never consumed.  Mode 0: whole, 1: byte by byte, 2: random pieces, 3:
 * random pieces, and every run the scanner says it skips passed with
 * kr_scan_skip (as the session splices record data).  wl: watch the
 * values into it (NULL: no observer).
 */
static int
scan_pieces(int16_t key, int16_t v, enum kr_dir d, const uint8_t *p,
            size_t plen, uint64_t limit, uint64_t *seed, int mode,
            uint64_t *off, struct wlog *wl)
{
    struct kr_scan sc;
    size_t at = 0, used, n;
    int rc;

    rc = kr_scan_init(&sc, key, v, d == KR_DIR_RESPONSE, limit);
    KR_TEST_CHECK(rc == KR_OK, "%s", kr_status_str(rc));
    if (wl != NULL) {
        wl->n = 0;
        wl->overflow = false;
        kr_scan_watch(&sc, wlog_cb, wl);
    }
    for (;;) {
        uint64_t sk = kr_scan_skippable(&sc);

        if (mode == 3 && sk > 0 && at < plen) {
            n = sk < plen - at ? (size_t)sk : plen - at;
            rc = kr_scan_skip(&sc, n);
            at += n;
            KR_TEST_CHECK(sc.off == at, "skip: off %llu, at %zu",
                          (unsigned long long)sc.off, at);
            if (rc != KR_AGAIN || at == plen) {
                break;
            }
            continue;
        }
        n = mode == 0 ? plen - at : mode == 1 ? 1
                      : 1 + rndn(seed, (uint32_t)(plen / 3 + 1));
        if (n > plen - at) {
            n = plen - at;
        }
        rc = kr_scan_feed(&sc, n > 0 ? p + at : NULL, n, &used);
        KR_TEST_CHECK(used <= n, "used %zu of %zu", used, n);
        at += used;
        KR_TEST_CHECK(sc.off == at, "off %llu, at %zu",
                      (unsigned long long)sc.off, at);
        if (rc != KR_AGAIN) {
            break;
        }
        /* AGAIN consumed everything */
        KR_TEST_CHECK(used == n, "used %zu of %zu", used, n);
        if (at == plen) {
            break;
        }
    }
    *off = sc.off;
    if (rc == KR_EPROTO && getenv("KR_SCAN_DEBUG") != NULL) {
        fprintf(stderr, "scan: %s\n", sc.msg);
    }
    return rc;
}

/* Where the body's own tagged fields start in m's payload (plen bytes). */
static size_t
body_tags_at(const struct kr_msg *m, size_t plen)
{
    struct kr_codec_err err;
    struct kr_wbuf w;
    size_t t;

    if (!kr_api_flexible(kr_api_get(m->api_key), m->api_version)) {
        return plen;
    }
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(kr_encode_tags(m->body, m->api_version, &w, &err),
                     KR_OK);
    t = w.total;
    kr_wbuf_free(&w);
    ck_assert_uint_le(t, plen);
    return plen - t;
}

/*
 * For every API x version x direction, random instances: the scanner,
 * fed whole, byte by byte and in random pieces, stops exactly where the
 * body's tagged fields start (or at the end of a classic body); the tail
 * decodes with kr_decode_tags and re-encodes to the same bytes; a frame
 * cut short is refused, never passed; corrupted frames: where the
 * decoder accepts (with KR_DEC_TAGS_EXACT, the scanner's rule for tagged
 * fields), the scanner agrees on the layout.
 */
START_TEST(test_scan_all)
{
    const struct kr_api_desc *api = kr_api_get((int16_t)_i);
    struct kr_arena a;
    struct wlog *exp, *got;
    size_t nwatched = 0;
    int16_t v;
    int d, it, mode;

    if (api == NULL) {
        return;
    }
    exp = calloc(1, sizeof(*exp));
    got = calloc(1, sizeof(*got));
    ck_assert(exp != NULL && got != NULL);
    kr_arena_init(&a, 0);
    for (v = api->valid.lo; v <= api->valid.hi; v++) {
        for (d = 0; d < 2; d++) {
            if (kr_api_root(api, d == 1, v) == KR_NO_STRUCT) {
                continue;
            }
            for (it = 0; it < 4; it++) {
                struct rctx r;
                struct kr_msg m, m2, m3;
                struct kr_codec_err err;
                uint8_t *p;
                size_t plen, want, k;
                uint64_t off;
                char what[96];
                int rc;

                snprintf(what, sizeof(what), "%s v%d %s (scan %d)",
                         api->name, v, dir_name((enum kr_dir)d), it);
                r.a = &a;
                r.depth = 0;
                r.seed = 0x5ca9ull ^ ((uint64_t)api->key << 32 |
                                      (uint64_t)v << 8 | (uint64_t)d << 4 |
                                      (uint64_t)it);
                build_rand_msg(&r, api, v, (enum kr_dir)d, &m);
                if (it > 0) {
                    fill_rand(&r, m.body, v, kr_api_flexible(api, v));
                } else {
                    fill_min(&a, m.body, v);
                }
                roundtrip(&a, &m, it > 0 ? rsrc : batch61,
                          it > 0 ? sizeof(rsrc) : sizeof(batch61), what, &p,
                          &plen, &m2);
                want = body_tags_at(&m2, plen);

                for (mode = 0; mode < 3; mode++) {
                    rc = scan_pieces(api->key, v, (enum kr_dir)d, p, plen,
                                     plen, &r.seed, mode, &off, NULL);
                    ck_assert_msg(rc == KR_OK && off == want, "%s, pieces "
                                  "%d: %s at %llu, expected %zu of %zu",
                                  what, mode, kr_status_str(rc),
                                  (unsigned long long)off, want, plen);
                }
                /* watched: the same walk, and the observer is told the
                   tree's topic names, TopicIds, ErrorCodes and records
                   lengths in order, also when records are skipped */
                tree_events(m2.body, exp);
                for (mode = 0; mode < 4 && !exp->overflow; mode++) {
                    size_t e;

                    rc = scan_pieces(api->key, v, (enum kr_dir)d, p, plen,
                                     plen, &r.seed, mode, &off, got);
                    ck_assert_msg(rc == KR_OK && off == want, "%s, watched "
                                  "%d: %s at %llu, expected %zu", what, mode,
                                  kr_status_str(rc), (unsigned long long)off,
                                  want);
                    ck_assert_msg(got->n == exp->n, "%s, watched %d: %zu "
                                  "values told, %zu expected", what, mode,
                                  got->n, exp->n);
                    for (e = 0; e < exp->n; e++) {
                        const struct wev *g = &got->ev[e], *x = &exp->ev[e];

                        KR_TEST_CHECK(g->what == x->what && g->val == x->val &&
                                      g->n == x->n &&
                                      memcmp(g->buf, x->buf, x->n) == 0,
                                      "%s, watched %d, value %zu: %u %lld "
                                      "(%zu bytes), expected %u %lld (%zu)",
                                      what, mode, e, g->what,
                                      (long long)g->val, g->n, x->what,
                                      (long long)x->val, x->n);
                    }
                    nwatched += exp->n;
                }
                exp->n = 0;
                exp->overflow = false;
                if (want < plen) {
                    /* the tail alone: decode and re-encode it */
                    struct iovec iov;
                    struct kr_rbuf rb;
                    struct kr_node *tn;
                    struct kr_wbuf w;
                    size_t toff = want;

                    kr_rbuf_init_flat(&rb, &iov, p, plen);
                    rc = kr_decode_tags(&a, &rb, &toff, m2.body->struct_id, v,
                                        KR_DEC_STRICT, &tn, &err);
                    ck_assert_msg(rc == KR_OK && toff == plen, "%s: tail: "
                                  "%s %s", what, kr_status_str(rc), err.msg);
                    memset(&w, 0, sizeof(w));
                    ck_assert_int_eq(kr_encode_tags(tn, v, &w, &err), KR_OK);
                    ck_assert_uint_eq(w.total, plen - want);
                    ck_assert(memcmp(w.buf, p + want, plen - want) == 0);
                    kr_wbuf_free(&w);
                }
                /* a frame that claims fewer bytes than the message needs */
                for (k = 0; k < want; k += it == 0 ? 1 : 1 + want / 16) {
                    rc = scan_pieces(api->key, v, (enum kr_dir)d, p, k, k,
                                     &r.seed, 2, &off, NULL);
                    KR_TEST_CHECK(rc == KR_EPROTO, "%s cut at %zu: %s", what,
                                  k, kr_status_str(rc));
                    KR_TEST_CHECK(off <= k, "%s cut at %zu: at %llu", what,
                                  k, (unsigned long long)off);
                }
                /* the whole frame, but only part of it arrived yet */
                for (k = 0; k < want; k += 1 + want / 8) {
                    rc = scan_pieces(api->key, v, (enum kr_dir)d, p, k, plen,
                                     &r.seed, 2, &off, k % 2 ? got : NULL);
                    ck_assert_msg(rc == KR_AGAIN && off == k, "%s: %zu of "
                                  "%zu arrived: %s", what, k, plen,
                                  kr_status_str(rc));
                }
                /* corruption: the scanner never disagrees with the decoder */
                for (k = 0; it == 1 && k < 32; k++) {
                    uint8_t *bad = malloc(plen);
                    size_t at = rndn(&r.seed, (uint32_t)plen);
                    int drc;

                    memcpy(bad, p, plen);
                    bad[at] = (uint8_t)rnd(&r.seed);
                    rc = scan_pieces(api->key, v, (enum kr_dir)d, bad, plen,
                                     plen, &r.seed, 2, &off,
                                     k % 2 ? got : NULL);
                    drc = decode_flat(&a, bad, plen, api->key, v,
                                      (enum kr_dir)d, KR_DEC_TAGS_EXACT, &m3,
                                      &err);
                    ck_assert(rc == KR_OK || rc == KR_EPROTO);
                    if (drc == KR_OK && (m3.api_key != api->key ||
                                         m3.api_version != v)) {
                        /* a request header now names another API or
                           version: the scanner was told the old one */
                        drc = KR_EUNSUPPORTED;
                    }
                    if (drc == KR_OK) {
                        ck_assert_msg(rc == KR_OK, "%s: corrupted at %zu: "
                                      "decoder accepts, scanner refuses",
                                      what, at);
                        if (!kr_api_flexible(api, v)) {
                            ck_assert_uint_eq(off, m3.trailing_off);
                        } else {
                            /* the tail decodes to the decoder's end */
                            struct iovec iov;
                            struct kr_rbuf rb;
                            struct kr_node *tn;
                            size_t toff = (size_t)off;

                            kr_rbuf_init_flat(&rb, &iov, bad, plen);
                            ck_assert_int_eq(kr_decode_tags(&a, &rb, &toff,
                                             m3.body->struct_id, v, 0, &tn,
                                             &err), KR_OK);
                            ck_assert_msg(toff == m3.trailing_off, "%s: "
                                          "corrupted at %zu: tail ends at "
                                          "%zu, body at %zu", what, at, toff,
                                          m3.trailing_off);
                        }
                    }
                    free(bad);
                }
                free(p);
                kr_arena_reset(&a);
            }
        }
    }
    kr_arena_free(&a);
    free(exp);
    free(got);
    if (api->key == KR_API_FETCH || api->key == KR_API_PRODUCE) {
        /* the test must have watched something where it matters */
        ck_assert_uint_gt(nwatched, 0);
    }
}
END_TEST

/*
 * kr_records_count: RecordsCount of v2 batches, 1 per uncompressed magic
 * 0/1 message, a compressed magic 0/1 wrapper unknown, bad headers
 * refused; over segments split anywhere.
 */
START_TEST(test_records_count)
{
    uint8_t buf[61 + 70 + 26 + 26 + 8];
    struct iovec iov[3];
    struct kr_rbuf rb;
    uint64_t n;
    size_t len = 0, cut;

    /* v2 batch of 3 records (header only: the count is what is read) */
    memcpy(buf, batch61, 61);
    put_be(buf + 57, 3, 4);
    len = 61;
    /* v2 batch of 5 records with 9 bytes of record data */
    memcpy(buf + len, batch61, 61);
    put_be(buf + len + 8, 49 + 9, 4);
    put_be(buf + len + 57, 5, 4);
    memset(buf + len + 61, 0xab, 9);
    len += 70;
    kr_rbuf_init_flat(&rb, iov, buf, len);
    ck_assert_int_eq(kr_records_count(&rb, 0, (int32_t)len, &n), KR_OK);
    ck_assert_uint_eq(n, 8);
    ck_assert_int_eq(kr_records_count(&rb, 61, 70, &n), KR_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(kr_records_count(&rb, 0, 0, &n), KR_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(kr_records_count(&rb, 0, -1, &n), KR_OK);
    /* segmented anywhere: the same */
    for (cut = 1; cut < len; cut++) {
        iov[0].iov_base = buf;
        iov[0].iov_len = cut;
        iov[1].iov_base = buf + cut;
        iov[1].iov_len = len - cut;
        rb.seg = iov;
        rb.nseg = 2;
        rb.len = len;
        KR_TEST_CHECK(kr_records_count(&rb, 0, (int32_t)len, &n) == KR_OK &&
                      n == 8, "cut at %zu: %llu", cut,
                      (unsigned long long)n);
    }
    /* a partial batch at the end (as a Fetch response may have) */
    kr_rbuf_init_flat(&rb, iov, buf, len);
    ck_assert_int_eq(kr_records_count(&rb, 0, (int32_t)len - 1, &n),
                     KR_EPROTO);
    ck_assert_int_eq(kr_records_count(&rb, 0, 30, &n), KR_EPROTO);
    /* past the buffer */
    ck_assert_int_eq(kr_records_count(&rb, 10, (int32_t)len, &n), KR_EPROTO);
    /* magic 1 messages: uncompressed counts 1, compressed is unknown */
    memset(buf + len, 0, 26 + 26);
    put_be(buf + len + 8, 14, 4);
    buf[len + 16] = 1;
    put_be(buf + len + 26 + 8, 14, 4);
    buf[len + 26 + 16] = 1;
    kr_rbuf_init_flat(&rb, iov, buf, len + 52);
    ck_assert_int_eq(kr_records_count(&rb, 0, (int32_t)len + 52, &n), KR_OK);
    ck_assert_uint_eq(n, 10);
    buf[len + 26 + 17] = 1;             /* gzip */
    ck_assert_int_eq(kr_records_count(&rb, 0, (int32_t)len + 52, &n),
                     KR_EUNSUPPORTED);
    /* unknown magic, negative count, batchLength below the header */
    buf[len + 26 + 16] = 7;
    ck_assert_int_eq(kr_records_count(&rb, 0, (int32_t)len + 52, &n),
                     KR_EPROTO);
    put_be(buf + 57, 0xffffffffu, 4);
    ck_assert_int_eq(kr_records_count(&rb, 0, 61, &n), KR_EPROTO);
    put_be(buf + 57, 3, 4);
    put_be(buf + 8, 40, 4);
    ck_assert_int_eq(kr_records_count(&rb, 0, 52, &n), KR_EPROTO);
}
END_TEST

/* Malformed prefixes the scanner reads: each refused with a reason. */
/* ---- counting records while they stream (kr_scan_count_records) -------- */

/* Append a big-endian integer of w bytes. */
static size_t
cr_put(uint8_t *p, size_t at, uint64_t v, int w)
{
    int i;

    for (i = w - 1; i >= 0; i--) {
        p[at++] = (uint8_t)(v >> (8 * i));
    }
    return at;
}

/*
 * Random records content into b (at most cap bytes): sometimes a magic
 * 0/1 entry too short to be one, RecordBatch v2 of random counts and
 * sizes, magic 0/1 entries (some compressed), then,
 * sometimes, faults: a length byte, a magic or a count changed, the tail
 * cut off, random bytes.  Returns its length.
 */
static size_t
rand_records(uint8_t *b, size_t cap, uint64_t *seed)
{
    size_t at = 0, i, k;
    unsigned n = 1 + rndn(seed, 4);

    if (rndn(seed, 10) == 0) {
        /* a magic 0/1 entry too short for its crc, magic and attributes,
           whose bytes 16-17 (the next entry's) read as magic 0 */
        memset(b, 0, 40);
        at = cr_put(b, 8, rndn(seed, 6), 4);
        at = 12 + (size_t)b[11];
    }
    for (i = 0; i < n; i++) {
        size_t body = rndn(seed, 3) == 0 ? 3000 + rndn(seed, 40000)
                                         : rndn(seed, 200);
        unsigned kind = rndn(seed, 5);
        size_t start = at;

        if (at + 61 + body > cap) {
            break;
        }
        memset(b + at, (int)rnd(seed), 61 + body);
        at = cr_put(b, at, rnd(seed), 8);              /* baseOffset */
        if (kind < 3) {
            at = cr_put(b, at, 49 + body, 4);
            at = cr_put(b, at, 0, 4);                  /* leader epoch */
            b[at++] = 2;
            at = start + 57;
            at = cr_put(b, at, rndn(seed, 1000), 4);   /* recordsCount */
            at = start + 61 + body;
        } else {
            at = cr_put(b, at, 6 + body, 4);
            at += 4;                                   /* crc */
            b[at++] = (uint8_t)(kind - 3);             /* magic 0/1 */
            b[at++] = rndn(seed, 4) == 0 ? 2 : 0;      /* compressed? */
            at = start + 18 + body;
        }
    }
    switch (rndn(seed, 8)) {
    case 0:                                             /* a byte changed */
        if (at > 0) {
            k = rndn(seed, (uint32_t)(at < 80 ? at : 80));
            b[k] = (uint8_t)rnd(seed);
        }
        break;
    case 1:                                             /* cut short */
        if (at > 0) {
            at = rndn(seed, (uint32_t)at);
        }
        break;
    case 2:                                             /* noise */
        at = rndn(seed, 100);
        for (k = 0; k < at; k++) {
            b[k] = (uint8_t)rnd(seed);
        }
        break;
    default:
        break;
    }
    return at;
}

struct count_log {
    int64_t counts[8];
    unsigned n;
};

static void
count_cb(void *arg, enum kr_scan_what what, const uint8_t *p, size_t n,
         int64_t val)
{
    struct count_log *cl = arg;

    (void)p;
    (void)n;
    if (what == KR_SCAN_RECORD_COUNT && cl->n < KR_ARRAY_LEN(cl->counts)) {
        cl->counts[cl->n++] = val;
    }
}

/*
 * The scanner's records count (its batch walk, fed in random pieces, the
 * runs it may skip skipped as splice passes them) is kr_records_count's
 * for any records content, valid or not, and a fault in the records
 * never fails the frame: Produce v3 requests with two partitions of
 * random records.  The runs skipped cover all but the batch headers.
 */
START_TEST(test_scan_count_records)
{
    enum { CAP = 160 * 1024 };
    uint8_t *p = malloc(CAP + 256), *recs[2];
    uint64_t seed = 0x51ab5eed + (uint64_t)_i, skipped = 0, want_skip = 0;
    size_t rlen[2], at, used, n, plen;
    int iter, k, rc;

    ck_assert_ptr_nonnull(p);
    for (iter = 0; iter < 300; iter++) {
        struct count_log cl = { { 0 }, 0 };
        struct kr_scan sc;

        /* header v1: ApiKey 0, ApiVersion 3, CorrelationId, ClientId "c" */
        at = cr_put(p, 0, 0, 2);
        at = cr_put(p, at, 3, 2);
        at = cr_put(p, at, (uint64_t)iter, 4);
        at = cr_put(p, at, 1, 2);
        p[at++] = 'c';
        at = cr_put(p, at, 0xffff, 2);                 /* TransactionalId */
        at = cr_put(p, at, 1, 2);                      /* Acks */
        at = cr_put(p, at, 1000, 4);                   /* TimeoutMs */
        at = cr_put(p, at, 1, 4);                      /* one topic */
        at = cr_put(p, at, 1, 2);
        p[at++] = 't';
        at = cr_put(p, at, 2, 4);                      /* two partitions */
        for (k = 0; k < 2; k++) {
            at = cr_put(p, at, (uint64_t)k, 4);
            rlen[k] = rand_records(p + at + 4, CAP / 2 - 64, &seed);
            at = cr_put(p, at, rlen[k], 4);
            recs[k] = p + at;
            at += rlen[k];
        }
        plen = at;
        ck_assert_int_eq(kr_scan_init(&sc, 0, 3, false, plen), KR_OK);
        kr_scan_watch(&sc, count_cb, &cl);
        kr_scan_count_records(&sc, true);
        at = 0;
        rc = KR_AGAIN;
        while (rc == KR_AGAIN && at < plen) {
            uint64_t sk = kr_scan_skippable(&sc);

            if (sk > 0 && rndn(&seed, 4) != 0) {
                n = sk < plen - at ? (size_t)sk : plen - at;
                rc = kr_scan_skip(&sc, n);
                at += n;
                skipped += n;
                continue;
            }
            n = 1 + rndn(&seed, 700);
            n = n < plen - at ? n : plen - at;
            rc = kr_scan_feed(&sc, p + at, n, &used);
            at += used;
        }
        ck_assert_msg(rc == KR_OK, "iteration %d: %s", iter, sc.msg);
        ck_assert_uint_eq(at, plen);
        for (k = 0, n = 0; k < 2; k++) {
            struct iovec iov;
            struct kr_rbuf rb;
            uint64_t cnt;
            int64_t want;

            if (rlen[k] == 0) {
                continue;                   /* no count for no records */
            }
            kr_rbuf_init_flat(&rb, &iov, recs[k], rlen[k]);
            want = kr_records_count(&rb, 0, (int32_t)rlen[k], &cnt) == KR_OK
                       ? (int64_t)cnt : -1;
            ck_assert_uint_lt(n, cl.n);
            ck_assert_msg(cl.counts[n] == want, "iteration %d partition %d: "
                          "counted %lld, kr_records_count %lld", iter, k,
                          (long long)cl.counts[n], (long long)want);
            n++;
            if (want > 0 && rlen[k] > 10000) {
                want_skip += rlen[k];
            }
        }
        ck_assert_uint_eq(cl.n, n);
    }
    /* most record bytes were skippable (and three runs in four skipped) */
    ck_assert_uint_gt(skipped, want_skip / 2);
    free(p);
}
END_TEST

START_TEST(test_scan_malformed)
{
    /* Fetch v16 response: header v1, ThrottleTimeMs, ErrorCode, SessionId,
       then Responses (compact array) */
    static const uint8_t head[] = {
        0, 0, 0, 7, 0,              /* CorrelationId 7, no header tags */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,   /* ThrottleTimeMs ErrorCode Sess */
    };
    struct kr_scan sc;
    uint8_t buf[64];
    size_t used;
    int rc;

    /* array count varint longer than 32 bits */
    memcpy(buf, head, sizeof(head));
    memset(buf + sizeof(head), 0xff, 5);
    ck_assert_int_eq(kr_scan_init(&sc, 1, 16, true, 40), KR_OK);
    rc = kr_scan_feed(&sc, buf, sizeof(head) + 5, &used);
    ck_assert_int_eq(rc, KR_EPROTO);
    ck_assert_msg(strstr(sc.msg, "varint") != NULL, "%s", sc.msg);
    /* sticky */
    ck_assert_int_eq(kr_scan_feed(&sc, buf, 1, &used), KR_EPROTO);
    ck_assert_uint_eq(used, 0);

    /* array count that cannot fit in the frame: 1000 topics in 20 bytes */
    memcpy(buf, head, sizeof(head));
    buf[sizeof(head)] = 0xe9;       /* 1001 = 0x3e9 -> 0xe9 0x07 */
    buf[sizeof(head) + 1] = 0x07;
    ck_assert_int_eq(kr_scan_init(&sc, 1, 16, true, 20), KR_OK);
    ck_assert_int_eq(kr_scan_feed(&sc, buf, 17, &used), KR_EPROTO);
    ck_assert_msg(strstr(sc.msg, "array count 1000") != NULL, "%s", sc.msg);

    /* null array where Responses is not nullable */
    buf[sizeof(head)] = 0;
    ck_assert_int_eq(kr_scan_init(&sc, 1, 16, true, 20), KR_OK);
    ck_assert_int_eq(kr_scan_feed(&sc, buf, 16, &used), KR_EPROTO);
    ck_assert_msg(strstr(sc.msg, "null array") != NULL, "%s", sc.msg);

    /* unknown API or version */
    ck_assert_int_eq(kr_scan_init(&sc, 1, 999, true, 20), KR_EUNSUPPORTED);
    ck_assert_int_eq(kr_scan_init(&sc, 9999, 0, true, 20), KR_EUNSUPPORTED);
    ck_assert_int_eq(kr_scan_feed(&sc, buf, 4, &used), KR_EUNSUPPORTED);
    ck_assert_uint_eq(used, 0);
}
END_TEST

/* ---- segmented input ----------------------------------------------------- */

START_TEST(test_golden_segmented)
{
    const struct golden *g = &goldens[_i];
    uint8_t frame[128];
    size_t n = golden_frame(g, frame, sizeof(frame)), len = n - 4, k;
    const uint8_t *p = frame + 4;
    struct kr_arena a;
    struct kr_msg flat, seg;
    struct kr_codec_err err;
    struct iovec iov[KR_RBUF_MAX_SEG];
    struct kr_rbuf rb;
    uint8_t *out;
    size_t olen;
    int rc;

    kr_arena_init(&a, 0);
    /* a distinct byte everywhere so a misplaced read shows */
    for (k = 0; k < KR_ARRAY_LEN(g->f) && g->f[k].path != NULL; k++) {
        put_be(frame + g->f[k].off, 0x11 * (k + 1), g->f[k].width);
    }
    rc = decode_flat(&a, p, len, g->key, g->ver, g->dir, KR_DEC_STRICT,
                     &flat, &err);
    ck_assert_int_eq(rc, KR_OK);
    /* two segments, split at every point */
    for (k = 0; k <= len; k++) {
        iov[0].iov_base = (void *)(uintptr_t)p;
        iov[0].iov_len = k;
        iov[1].iov_base = (void *)(uintptr_t)(p + k);
        iov[1].iov_len = len - k;
        rb.seg = iov;
        rb.nseg = 2;
        rb.len = len;
        rc = decode_rb(&a, &rb, g->key, g->ver, g->dir, KR_DEC_STRICT, &seg,
                       &err);
        ck_assert_msg(rc == KR_OK, "%s split at %zu: %s at %s", g->name, k,
                      err.msg, err.path);
        assert_msg_eq(&flat, p, &seg, p, g->name);
        out = encode_flat(&seg, p, len, &olen, g->name);
        ck_assert_msg(olen == len && memcmp(out, p, len) == 0,
                      "%s split at %zu: bytes differ", g->name, k);
        free(out);
    }
    /* one byte per segment */
    ck_assert_uint_le(len, KR_RBUF_MAX_SEG);
    for (k = 0; k < len; k++) {
        iov[k].iov_base = (void *)(uintptr_t)(p + k);
        iov[k].iov_len = 1;
    }
    rb.seg = iov;
    rb.nseg = (int)len;
    rb.len = len;
    rc = decode_rb(&a, &rb, g->key, g->ver, g->dir, KR_DEC_STRICT, &seg,
                   &err);
    ck_assert_int_eq(rc, KR_OK);
    assert_msg_eq(&flat, p, &seg, p, g->name);
    out = encode_flat(&seg, p, len, &olen, g->name);
    ck_assert_int_eq(memcmp(out, p, len), 0);
    free(out);
    kr_arena_free(&a);
}
END_TEST

/* Strings, uuids and unknown tags straddling segments are copied whole. */
START_TEST(test_segmented_straddle)
{
    /* ElectLeaders v2 request: ClientId "krelay-client", Topic "orders" */
    static const char *const hex =
        "002b 0002 00000007 000d 6b72656c61792d636c69656e74 00"
        "01 02 07 6f7264657273 03 00000001 00000002 00"
        "00007530"
        "01 2a 03 616263";              /* unknown tag 42 = "abc" */
    uint8_t p[64];
    size_t len = hex2bin(hex, p, sizeof(p)), k;
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    struct iovec iov[3];
    struct kr_rbuf rb;
    struct kr_val *val;
    uint8_t *out;
    size_t olen;

    kr_arena_init(&a, 0);
    for (k = 1; k < len; k++) {
        iov[0].iov_base = p;
        iov[0].iov_len = k;
        iov[1].iov_base = NULL;         /* empty segment */
        iov[1].iov_len = 0;
        iov[2].iov_base = p + k;
        iov[2].iov_len = len - k;
        rb.seg = iov;
        rb.nseg = 3;
        rb.len = len;
        ck_assert_int_eq(kr_decode_request(&a, &rb, KR_DEC_STRICT, &m, &err),
                         KR_OK);
        ck_assert_int_eq(m.correlation_id, 7);
        val = msg_val(&m, "header.ClientId");
        ck_assert_int_eq(val->u.s.len, 13);
        ck_assert_int_eq(memcmp(val->u.s.p, "krelay-client", 13), 0);
        val = msg_val(&m, "TopicPartitions[0].Topic");
        ck_assert_int_eq(val->u.s.len, 6);
        ck_assert_int_eq(memcmp(val->u.s.p, "orders", 6), 0);
        /* a straddling view is a copy, an in-segment one points in place */
        if (k > 27 && k < 33) {
            ck_assert_msg(val->u.s.p < p || val->u.s.p >= p + len,
                          "split %zu: not a copy", k);
        } else {
            ck_assert_msg(val->u.s.p >= p && val->u.s.p < p + len,
                          "split %zu: not in place", k);
        }
        ck_assert_int_eq(msg_val(&m, "TopicPartitions[0].Partitions[1]")->u.i,
                         2);
        ck_assert_int_eq(msg_val(&m, "TimeoutMs")->u.i, 30000);
        ck_assert_uint_eq(m.body->nunknown, 1);
        ck_assert_uint_eq(m.body->unknown[0].tag, 42);
        ck_assert_int_eq(memcmp(m.body->unknown[0].data.p, "abc", 3), 0);
        out = encode_flat(&m, p, len, &olen, "straddle");
        ck_assert_uint_eq(olen, len);
        ck_assert_int_eq(memcmp(out, p, len), 0);
        free(out);
        kr_arena_reset(&a);
    }
    kr_arena_free(&a);
}
END_TEST

/* ---- malformed input ----------------------------------------------------- */

/* Payload (no size prefix) of golden i into buf. */
static size_t
golden_payload(int i, uint8_t *buf, size_t cap)
{
    uint8_t frame[128];
    size_t n = golden_frame(&goldens[i], frame, sizeof(frame));

    ck_assert_uint_le(n - 4, cap);
    memcpy(buf, frame + 4, n - 4);
    return n - 4;
}

#define G_OFLE_REQ 0
#define G_ELECT_REQ 4
#define G_ELECT_RSP 5

START_TEST(test_truncated_goldens)
{
    const struct golden *g = &goldens[_i];
    uint8_t p[128];
    size_t len = golden_payload(_i, p, sizeof(p)), k;
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    int rc;

    kr_arena_init(&a, 0);
    for (k = 0; k < len; k++) {
        uint8_t *cut = malloc(k > 0 ? k : 1);   /* ASan sees any overrun */

        memcpy(cut, p, k);
        rc = decode_flat(&a, cut, k, g->key, g->ver, g->dir, 0, &m, &err);
        ck_assert_msg(rc == KR_EPROTO, "%s cut at %zu: %s", g->name, k,
                      kr_status_str(rc));
        ck_assert_int_eq(err.status, KR_EPROTO);
        ck_assert_msg(err.offset <= k, "%s cut at %zu: offset %zu", g->name,
                      k, err.offset);
        ck_assert_msg(strstr(err.msg, "truncated") != NULL ||
                      strstr(err.msg, "past end") != NULL,
                      "%s cut at %zu: %s", g->name, k, err.msg);
        ck_assert_msg(err.path[0] != '\0', "%s cut at %zu: no path", g->name,
                      k);
        free(cut);
    }
    /* the last cut is in the body's final tag count */
    ck_assert_str_eq(err.path, "_tagged_fields");
    ck_assert_uint_eq(err.offset, len - 1);
    /* the first is in the header */
    rc = decode_flat(&a, p, 1, g->key, g->ver, g->dir, 0, &m, &err);
    ck_assert_int_eq(rc, KR_EPROTO);
    ck_assert_str_eq(err.path, g->dir == KR_DIR_REQUEST
                     ? "header.RequestApiKey" : "header.CorrelationId");
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_length_past_end)
{
    uint8_t p[128];
    size_t len = golden_payload(G_ELECT_RSP, p, sizeof(p));
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;

    kr_arena_init(&a, 0);
    /* ErrorMessage at frame 0x18 (page): compact length 15 */
    ck_assert_uint_eq(p[0x14], 0x01);
    p[0x14] = 0x10;
    ck_assert_int_eq(decode_flat(&a, p, len, 43, 2, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path,
        "ReplicaElectionResults[0].PartitionResult[0].ErrorMessage");
    ck_assert_uint_eq(err.offset, 0x14);
    ck_assert_ptr_nonnull(strstr(err.msg, "past end"));
    /* the Topic string claims 200 bytes (2-byte varint) */
    len = golden_payload(G_ELECT_RSP, p, sizeof(p));
    memmove(p + 0x0d, p + 0x0c, len - 0x0c);
    p[0x0c] = 0xc9;
    p[0x0d] = 0x01;
    ck_assert_int_eq(decode_flat(&a, p, len + 1, 43, 2, KR_DIR_RESPONSE, 0,
                                 &m, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "ReplicaElectionResults[0].Topic");
    ck_assert_uint_eq(err.offset, 0x0c);
    kr_arena_free(&a);
}
END_TEST

/* Kafka refuses strings above 32767 bytes both ways. */
START_TEST(test_string_max)
{
    struct kr_arena a;
    struct kr_msg m, m2;
    struct kr_codec_err err;
    struct kr_wbuf w;
    struct kr_val *topic;
    uint8_t *big = malloc(0x8000), *p;
    size_t len;

    kr_arena_init(&a, 0);
    memset(big, 'a', 0x8000);
    build_msg(&a, 43, 2, KR_DIR_REQUEST, &m);
    fill_min(&a, m.body, 2);
    topic = val_at(m.body, "TopicPartitions[0].Topic");
    topic->u.s.p = big;
    topic->u.s.len = 0x7fff;
    p = encode_flat(&m, NULL, 0, &len, "32767");
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m2, &err), KR_OK);
    ck_assert_int_eq(val_at(m2.body, "TopicPartitions[0].Topic")->u.s.len,
                     0x7fff);
    free(p);
    topic->u.s.len = 0x8000;
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(kr_encode_msg(&m, &w, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "TopicPartitions[0].Topic");
    kr_wbuf_free(&w);
    /* on the wire: 32768 bytes are there, the length is still refused */
    topic->u.s.len = 0x7fff;
    p = encode_flat(&m, NULL, 0, &len, "32767");
    p = realloc(p, len + 1);
    ck_assert_int_eq(p[13], 0x80);              /* uvarint 0x8000 */
    ck_assert_int_eq(p[14], 0x80);
    ck_assert_int_eq(p[15], 0x02);
    p[13] = 0x81;                               /* 0x8001: 32768 bytes */
    memmove(p + 17 + 0x7fff, p + 16 + 0x7fff, len - 16 - 0x7fff);
    p[16 + 0x7fff] = 'a';
    ck_assert_int_eq(decode_flat(&a, p, len + 1, 0, 0, KR_DIR_REQUEST, 0,
                                 &m2, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "TopicPartitions[0].Topic");
    ck_assert_ptr_nonnull(strstr(err.msg, "above 32767"));
    free(p);
    free(big);
    kr_arena_free(&a);
}
END_TEST

/* ListOffsets v1 request (classic): smallest instance payload. */
static uint8_t *
listoffsets_v1(struct kr_arena *a, size_t *len)
{
    struct kr_msg m;

    build_msg(a, 2, 1, KR_DIR_REQUEST, &m);
    fill_min(a, m.body, 1);
    return encode_flat(&m, NULL, 0, len, "ListOffsets v1");
}

START_TEST(test_negative_length)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    size_t len;
    uint8_t *p;

    kr_arena_init(&a, 0);
    p = listoffsets_v1(&a, &len);
    /* header v1 (10) + ReplicaId (4) + Topics count (4), then Name */
    ck_assert_uint_eq(len, 10 + 4 + 4 + 2 + 4 + 4 + 8);
    ck_assert_int_eq(p[18], 0);
    ck_assert_int_eq(p[19], 0);
    p[18] = 0xff;
    p[19] = 0xfe;
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "Topics[0].Name");
    ck_assert_uint_eq(err.offset, 18);
    ck_assert_ptr_nonnull(strstr(err.msg, "negative"));
    p[19] = 0xff;                           /* null, not nullable */
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "Topics[0].Name");
    ck_assert_ptr_nonnull(strstr(err.msg, "not nullable"));
    p[18] = p[19] = 0;
    /* array count -2 */
    put_be(p + 14, 0xfffffffeu, 4);
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "Topics");
    ck_assert_uint_eq(err.offset, 14);
    free(p);
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_huge_array_count)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    size_t len;
    uint8_t *p, q[128];

    kr_arena_init(&a, 1 << 20);
    p = listoffsets_v1(&a, &len);
    kr_arena_reset(&a);
    put_be(p + 14, 0x7fffffffu, 4);
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "Topics");
    ck_assert_ptr_nonnull(strstr(err.msg, "past end"));
    ck_assert_uint_lt(a.used, 4096);        /* nothing sized by the count */
    free(p);
    /* compact: count 2^32-2 */
    len = golden_payload(G_ELECT_REQ, q, sizeof(q));
    memmove(q + 0x0c + 5, q + 0x0c + 1, len - 0x0c - 1);
    memcpy(q + 0x0c, "\xff\xff\xff\xff\x0f", 5);
    ck_assert_int_eq(decode_flat(&a, q, len + 4, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "TopicPartitions");
    ck_assert_uint_eq(err.offset, 0x0c);
    /* tagged field count beyond the bytes left */
    len = golden_payload(G_ELECT_REQ, q, sizeof(q));
    q[len - 1] = 0x7f;
    ck_assert_int_eq(decode_flat(&a, q, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "_tagged_fields");
    ck_assert_ptr_nonnull(strstr(err.msg, "tagged field count 127"));
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_bool_and_marker)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    size_t len;
    uint8_t *p, *out;
    size_t olen;

    kr_arena_init(&a, 0);
    /* Metadata v4 request: Topics [Name], AllowAutoTopicCreation (last) */
    build_msg(&a, 3, 4, KR_DIR_REQUEST, &m);
    fill_min(&a, m.body, 4);
    kr_node_get(m.body, "AllowAutoTopicCreation")->u.i = 1;
    p = encode_flat(&m, NULL, 0, &len, "Metadata v4");
    ck_assert_uint_eq(len, 10 + 4 + 2 + 1);
    ck_assert_int_eq(p[len - 1], 1);
    p[len - 1] = 2;
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "AllowAutoTopicCreation");
    ck_assert_uint_eq(err.offset, len - 1);
    ck_assert_ptr_nonnull(strstr(err.msg, "bool"));
    /* tolerant: read as true (like Kafka), written back canonically */
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_OK);
    ck_assert_int_eq(kr_node_get(m.body, "AllowAutoTopicCreation")->u.i, 1);
    out = encode_flat(&m, p, len, &olen, "Metadata v4");
    ck_assert_int_eq(out[olen - 1], 1);
    free(out);
    free(p);

    /*
     * FetchSnapshot v1 response (4.3.1): no nullable struct there; use
     * ConsumerGroupHeartbeat v0 response, Assignment (nullable struct).
     */
    build_msg(&a, 68, 0, KR_DIR_RESPONSE, &m);
    {
        struct kr_val *as = kr_node_get(m.body, "Assignment");

        ck_assert_ptr_nonnull(as);
        ck_assert(kr_vrange_has(kr_node_field(m.body, (unsigned)
            (as - m.body->vals))->nullable, 0));
        /* default null: marker -1 */
        ck_assert_int_eq(as->is_null, 1);
        p = encode_flat(&m, NULL, 0, &len, "CGH v0");
        /* header 5, ThrottleTimeMs 4, ErrorCode 2, ErrorMessage 1,
         * MemberId 1, MemberEpoch 4, HeartbeatIntervalMs 4, marker */
        ck_assert_uint_eq(len, 5 + 4 + 2 + 1 + 1 + 4 + 4 + 1 + 1);
        ck_assert_int_eq(p[len - 2], 0xff);
        ck_assert_int_eq(decode_flat(&a, p, len, 68, 0, KR_DIR_RESPONSE,
                                     KR_DEC_STRICT, &m, &err), KR_OK);
        ck_assert_int_eq(kr_node_get(m.body, "Assignment")->is_null, 1);
        p[len - 2] = 0x02;      /* not -1/1: refused in strict mode */
        ck_assert_int_eq(decode_flat(&a, p, len, 68, 0, KR_DIR_RESPONSE,
                                     KR_DEC_STRICT, &m, &err), KR_EPROTO);
        ck_assert_str_eq(err.path, "Assignment");
        free(p);
    }
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_invalid_utf8)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    struct kr_val *cid;
    size_t len;
    uint8_t *p;

    kr_arena_init(&a, 0);
    build_msg(&a, 43, 2, KR_DIR_REQUEST, &m);
    fill_min(&a, m.body, 2);
    cid = kr_node_get(m.header, "ClientId");
    cid->u.s.p = (const uint8_t *)"ok\xc3\x28";
    cid->u.s.len = 4;
    p = encode_flat(&m, NULL, 0, &len, "utf8");
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "header.ClientId");
    ck_assert_uint_eq(err.offset, 8);
    ck_assert_ptr_nonnull(strstr(err.msg, "UTF-8"));
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT | KR_DEC_NO_UTF8, &m, &err),
                     KR_OK);
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_OK);
    ck_assert_int_eq(msg_val(&m, "header.ClientId")->u.s.len, 4);
    free(p);
    /* in the body: a surrogate in Topic */
    build_msg(&a, 43, 2, KR_DIR_REQUEST, &m);
    fill_min(&a, m.body, 2);
    val_at(m.body, "TopicPartitions[0].Topic")->u.s.p =
        (const uint8_t *)"\xed\xa0\x80";
    val_at(m.body, "TopicPartitions[0].Topic")->u.s.len = 3;
    p = encode_flat(&m, NULL, 0, &len, "utf8");
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "TopicPartitions[0].Topic");
    ck_assert_uint_eq(err.offset, 13);
    free(p);
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_varints)
{
    uint8_t p[128], q[128];
    size_t len = golden_payload(G_ELECT_REQ, p, sizeof(p));
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    uint8_t *out;
    size_t olen;
    static const struct {
        const char *bytes;
        size_t n;
        int rc;
    } cases[] = {
        { "\x82\x80\x80\x80\x00", 5, KR_OK },           /* 2, non-minimal */
        { "\x82\x00", 2, KR_OK },
        { "\xff\xff\xff\xff\x7f", 5, KR_EPROTO },       /* above 32 bits */
        { "\x82\x80\x80\x80\x80\x00", 6, KR_EPROTO },   /* 6 bytes */
        { "\x82\x80\x80\x80\x10", 5, KR_EPROTO },       /* 2^32 + 2 */
    };
    unsigned i;

    kr_arena_init(&a, 0);
    /* TopicPartitions count at payload 0x0c */
    ck_assert_int_eq(p[0x0c], 0x02);
    for (i = 0; i < KR_ARRAY_LEN(cases); i++) {
        memcpy(q, p, 0x0c);
        memcpy(q + 0x0c, cases[i].bytes, cases[i].n);
        memcpy(q + 0x0c + cases[i].n, p + 0x0d, len - 0x0d);
        ck_assert_int_eq(decode_flat(&a, q, len - 1 + cases[i].n, 0, 0,
                                     KR_DIR_REQUEST, KR_DEC_STRICT, &m, &err),
                         cases[i].rc);
        if (cases[i].rc == KR_OK) {
            out = encode_flat(&m, q, len, &olen, "varint");
            ck_assert_uint_eq(olen, len);
            ck_assert_int_eq(memcmp(out, p, len), 0);   /* canonical */
            free(out);
        } else {
            ck_assert_str_eq(err.path, "TopicPartitions");
            ck_assert_uint_eq(err.offset, 0x0c);
            ck_assert_ptr_nonnull(strstr(err.msg, "varint"));
        }
    }
    /* non-minimal header tag count (0x80 0x00 for 0) */
    memcpy(q, p, 10);
    q[10] = 0x80;
    q[11] = 0x00;
    memcpy(q + 12, p + 11, len - 11);
    ck_assert_int_eq(decode_flat(&a, q, len + 1, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_OK);
    out = encode_flat(&m, q, len + 1, &olen, "varint");
    ck_assert_uint_eq(olen, len);
    ck_assert_int_eq(memcmp(out, p, len), 0);
    free(out);
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_trailing)
{
    uint8_t p[128];
    size_t len = golden_payload(G_OFLE_REQ, p, sizeof(p));
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    uint8_t *out;
    size_t olen;

    kr_arena_init(&a, 0);
    memcpy(p + len, "xyz", 3);
    ck_assert_int_eq(decode_flat(&a, p, len + 3, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_EPROTO);
    ck_assert_uint_eq(err.offset, len);
    ck_assert_ptr_nonnull(strstr(err.msg, "3 trailing"));
    ck_assert_str_eq(err.path, "_trailing");
    ck_assert_int_eq(decode_flat(&a, p, len + 3, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_OK);
    ck_assert_uint_eq(m.trailing, 3);
    ck_assert_uint_eq(m.trailing_off, len);
    out = encode_flat(&m, p, len + 3, &olen, "trailing");
    ck_assert_uint_eq(olen, len);               /* trailing not written */
    ck_assert_int_eq(memcmp(out, p, len), 0);
    free(out);
    kr_arena_free(&a);
}
END_TEST

/*
 * ApiVersions v3 response (header v0, KIP-511): tags out of order, a
 * known tag holding its default, an unknown tag between known ones.
 */
START_TEST(test_tags_order_and_presence)
{
    static const char *const in =
        "00000007"                          /* ResponseHeader v0 */
        "0000 01 00000000"          /* ErrorCode, ApiKeys [], ThrottleTimeMs */
        "04"
        "03 01 00"                          /* ZkMigrationReady = false */
        "07 02 abcd"                        /* unknown tag 7 */
        "01 08 ffffffffffffffff"            /* FinalizedFeaturesEpoch = -1 */
        "02 01 01";                         /* FinalizedFeatures [] */
    static const char *const canon =
        "00000007 0000 01 00000000 04"
        "01 08 ffffffffffffffff 02 01 01 03 01 00 07 02 abcd";
    uint8_t p[64], c[64];
    size_t len = hex2bin(in, p, sizeof(p)), clen = hex2bin(canon, c,
                                                           sizeof(c));
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    struct kr_val *val;
    uint8_t *out;
    size_t olen;

    kr_arena_init(&a, 0);
    ck_assert_int_eq(decode_flat(&a, p, len, 18, 3, KR_DIR_RESPONSE,
                                 KR_DEC_STRICT, &m, &err), KR_OK);
    ck_assert_int_eq(m.hdr_version, 0);
    ck_assert_int_eq(m.correlation_id, 7);
    val = kr_node_get(m.body, "FinalizedFeaturesEpoch");
    ck_assert_int_eq(val->present, 1);
    ck_assert_int_eq(val->u.i, -1);
    val = kr_node_get(m.body, "ZkMigrationReady");
    ck_assert_int_eq(val->present, 1);
    ck_assert_int_eq(val->u.i, 0);
    val = kr_node_get(m.body, "SupportedFeatures");
    ck_assert_int_eq(val->present, 0);
    ck_assert_uint_eq(m.body->nunknown, 1);
    ck_assert_uint_eq(m.body->unknown[0].tag, 7);
    out = encode_flat(&m, p, len, &olen, "ApiVersions");
    ck_assert_uint_eq(olen, clen);
    ck_assert_int_eq(memcmp(out, c, clen), 0);
    free(out);
    /* canonical input stays as is */
    ck_assert_int_eq(decode_flat(&a, c, clen, 18, 3, KR_DIR_RESPONSE,
                                 KR_DEC_STRICT, &m, &err), KR_OK);
    out = encode_flat(&m, c, clen, &olen, "ApiVersions");
    ck_assert_int_eq(memcmp(out, c, clen), 0);
    free(out);
    /* removing presence drops the field */
    kr_node_get(m.body, "ZkMigrationReady")->present = 0;
    out = encode_flat(&m, c, clen, &olen, "ApiVersions");
    ck_assert_uint_eq(olen, clen - 3);
    ck_assert_int_eq(out[11], 3);
    free(out);
    /* raw tags merge with known ones in ascending order */
    {
        static struct kr_rawtag raw[2] = {
            { 2, { (const uint8_t *)"\x01", 1 } },
            { 9, { (const uint8_t *)"", 0 } },
        };

        m.body->unknown = raw;
        m.body->nunknown = 2;
        kr_node_get(m.body, "FinalizedFeatures")->present = 0;
        kr_node_get(m.body, "ZkMigrationReady")->present = 1;
        out = encode_flat(&m, c, clen, &olen, "ApiVersions");
        len = hex2bin("00000007 0000 01 00000000 04 01 08 ffffffffffffffff"
                      "02 01 01 03 01 00 09 00", p, sizeof(p));
        ck_assert_uint_eq(olen, len);
        ck_assert_int_eq(memcmp(out, p, len), 0);
        free(out);
    }
    /* a duplicate tag: strict refuses, tolerant keeps the last */
    len = hex2bin("00000007 0000 01 00000000 02 03 01 00 03 01 01", p,
                  sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 18, 3, KR_DIR_RESPONSE,
                                 KR_DEC_STRICT, &m, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "ZkMigrationReady");
    ck_assert_int_eq(decode_flat(&a, p, len, 18, 3, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_OK);
    ck_assert_int_eq(kr_node_get(m.body, "ZkMigrationReady")->u.i, 1);
    /* a known tag whose payload is longer than its value */
    len = hex2bin("00000007 0000 01 00000000 01 03 02 01 00", p, sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 18, 3, KR_DIR_RESPONSE,
                                 KR_DEC_STRICT, &m, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "ZkMigrationReady");
    ck_assert_int_eq(decode_flat(&a, p, len, 18, 3, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_OK);
    /* ... and shorter: the value may not read past its size */
    len = hex2bin("00000007 0000 01 00000000 01 01 04 0000000000000001", p,
                  sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 18, 3, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "FinalizedFeaturesEpoch");
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_header_versions)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    uint8_t p[64];
    size_t len;

    kr_arena_init(&a, 0);
    /* ControlledShutdown v0: request header v0, no ClientId */
    len = hex2bin("0007 0000 0000002a 00000005", p, sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_OK);
    ck_assert_int_eq(m.hdr_version, 0);
    ck_assert_int_eq(m.correlation_id, 42);
    ck_assert_int_eq(msg_val(&m, "header.ClientId")->present, 0);
    ck_assert_int_eq(msg_val(&m, "BrokerId")->u.i, 5);
    /* ControlledShutdown v1: header v1 */
    len = hex2bin("0007 0001 0000002a ffff 00000005", p, sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_OK);
    ck_assert_int_eq(m.hdr_version, 1);
    ck_assert_int_eq(msg_val(&m, "header.ClientId")->is_null, 1);
    /* ApiVersions v3 request: header v2, ClientId int16 even there */
    len = hex2bin("0012 0003 00000001 0003 6b6366 00"
                  "07 6b72656c6179 04 302e31 00", p, sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST,
                                 KR_DEC_STRICT, &m, &err), KR_OK);
    ck_assert_int_eq(m.hdr_version, 2);
    ck_assert_int_eq(msg_val(&m, "header.ClientId")->u.s.len, 3);
    ck_assert_int_eq(msg_val(&m, "ClientSoftwareName")->u.s.len, 6);
    /* unknown ApiKey / version */
    len = hex2bin("03e7 0000 00000009 0000", p, sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EUNSUPPORTED);
    ck_assert_int_eq(m.api_key, 999);
    ck_assert_int_eq(m.correlation_id, 9);
    len = hex2bin("0012 0063 00000009 0000", p, sizeof(p));
    ck_assert_int_eq(decode_flat(&a, p, len, 0, 0, KR_DIR_REQUEST, 0, &m,
                                 &err), KR_EUNSUPPORTED);
    ck_assert_int_eq(m.api_version, 99);
    ck_assert_int_eq(decode_flat(&a, p, len, 18, -1, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_EUNSUPPORTED);
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_encode_errors)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    struct kr_wbuf w;
    struct kr_val *val;

    kr_arena_init(&a, 0);
    memset(&w, 0, sizeof(w));
    build_msg(&a, 2, 1, KR_DIR_REQUEST, &m);
    fill_min(&a, m.body, 1);
    val = val_at(m.body, "Topics[0].Name");
    val->is_null = 1;
    val->u.s.len = -1;
    ck_assert_int_eq(kr_encode_msg(&m, &w, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "Topics[0].Name");
    ck_assert_ptr_nonnull(strstr(err.msg, "null"));
    val->is_null = 0;
    val->u.s.len = 0;
    val = val_at(m.body, "Topics[0].Partitions[0].PartitionIndex");
    val->u.i = INT64_C(1) << 40;
    kr_wbuf_reset(&w);
    ck_assert_int_eq(kr_encode_msg(&m, &w, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "Topics[0].Partitions[0].PartitionIndex");
    val->u.i = 0;
    /* header disagreeing with the message */
    m.api_version = 2;
    kr_wbuf_reset(&w);
    ck_assert_int_eq(kr_encode_msg(&m, &w, &err), KR_EPROTO);
    ck_assert_str_eq(err.path, "header");
    m.api_version = 1;
    kr_wbuf_reset(&w);
    ck_assert_int_eq(kr_encode_msg(&m, &w, &err), KR_OK);
    ck_assert_uint_eq(w.total, w.len);
    ck_assert_uint_eq(w.total, 36);
    kr_wbuf_free(&w);
    ck_assert_ptr_null(w.buf);
    kr_arena_free(&a);
}
END_TEST

/* Fields absent at the encoded version are skipped; records are sliced. */
START_TEST(test_records_slices)
{
    struct kr_arena a;
    struct kr_msg m, m2;
    struct kr_codec_err err;
    struct kr_wbuf w;
    uint8_t *flat, *bad;
    int rc;

    kr_arena_init(&a, 0);
    memset(&w, 0, sizeof(w));
    build_msg(&a, 0, 9, KR_DIR_REQUEST, &m);    /* Produce v9 */
    fill_min(&a, m.body, 9);
    ck_assert_int_eq(kr_encode_msg(&m, &w, &err), KR_OK);
    ck_assert_uint_eq(w.nrecs, 1);
    ck_assert_uint_eq(w.recs[0].len, 61);
    ck_assert_uint_eq(w.recs[0].src_off, 0);
    ck_assert_uint_eq(w.total, w.len + 61);
    ck_assert_uint_eq(w.recs[0].at, w.len - 3);     /* then 3 tag counts */
    flat = kr_wbuf_flatten(&w, batch61, sizeof(batch61));
    ck_assert_ptr_nonnull(flat);
    ck_assert_int_eq(memcmp(flat + w.recs[0].at, batch61, 61), 0);
    bad = kr_wbuf_flatten(&w, batch61, 60);         /* slice past src */
    ck_assert_ptr_null(bad);
    rc = decode_flat(&a, flat, w.total, 0, 9, KR_DIR_REQUEST, KR_DEC_STRICT,
                     &m2, &err);
    ck_assert_int_eq(rc, KR_OK);
    ck_assert_uint_eq(val_at(m2.body,
        "TopicData[0].PartitionData[0].Records")->u.rec.off, w.recs[0].at);
    free(flat);
    kr_wbuf_free(&w);
    kr_arena_free(&a);
}
END_TEST

/* kr_decode_struct at an offset: the body alone. */
START_TEST(test_decode_struct)
{
    uint8_t p[128];
    size_t len = golden_payload(G_ELECT_RSP, p, sizeof(p)), off = 5;
    struct kr_arena a;
    struct kr_node *n;
    struct kr_codec_err err;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_api_desc *api = kr_api_get(43);
    struct kr_wbuf w;

    kr_arena_init(&a, 0);
    kr_rbuf_init_flat(&rb, &iov, p, len);
    ck_assert_int_eq(kr_decode_struct(&a, &rb, &off, kr_api_root(api, true, 2),
                                      2, true, KR_DEC_STRICT, &n, &err),
                     KR_OK);
    ck_assert_uint_eq(off, len);
    ck_assert_int_eq(n->version, 2);
    ck_assert_uint_eq(val_at(n, "ReplicaElectionResults")->u.arr->n, 1);
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(kr_encode_struct(n, 2, true, &w, &err), KR_OK);
    ck_assert_uint_eq(w.len, len - 5);
    ck_assert_int_eq(memcmp(w.buf, p + 5, len - 5), 0);
    kr_wbuf_free(&w);
    off = len + 1;
    ck_assert_int_eq(kr_decode_struct(&a, &rb, &off, 0, 0, false, 0, &n,
                                      &err), KR_EPROTO);
    kr_arena_free(&a);
}
END_TEST

/* ---- tree building ------------------------------------------------------- */

START_TEST(test_node_new_defaults)
{
    struct kr_arena a;
    const struct kr_api_desc *api = kr_api_get(23);
    struct kr_node *n, *t;
    struct kr_array *arr;
    struct kr_val *val;

    kr_arena_init(&a, 0);
    /* OffsetForLeaderEpoch request v2: ReplicaId (3+, default -2) absent */
    n = kr_node_new(&a, kr_api_root(api, false, 2), 2);
    ck_assert_ptr_nonnull(n);
    val = kr_node_get(n, "ReplicaId");
    ck_assert_int_eq(val->present, 0);
    ck_assert_int_eq(val->u.i, -2);
    val = kr_node_get(n, "Topics");
    ck_assert_int_eq(val->present, 1);
    ck_assert_int_eq(val->is_null, 0);
    ck_assert_uint_eq(val->u.arr->n, 0);
    ck_assert_ptr_null(kr_node_get(n, "NoSuchField"));
    arr = kr_array_new(&a, KR_T_STRUCT, val->u.arr->struct_id, 2, 2);
    ck_assert_uint_eq(arr->n, 2);
    t = arr->items[1].u.node;
    ck_assert_int_eq(kr_node_get(t, "Topic")->u.s.len, 0);
    ck_assert_int_eq(kr_node_get(t, "Topic")->is_null, 0);
    /* ElectLeaders: TopicPartitions default null? no: TimeoutMs 60000 */
    n = kr_node_new(&a, kr_api_root(kr_api_get(43), false, 2), 2);
    ck_assert_int_eq(kr_node_get(n, "TimeoutMs")->u.i, 60000);
    /* Produce v3: TransactionalId defaults to null */
    n = kr_node_new(&a, kr_api_root(kr_api_get(0), false, 3), 3);
    ck_assert_int_eq(kr_node_get(n, "TransactionalId")->is_null, 1);
    ck_assert_int_eq(kr_node_get(n, "TransactionalId")->present, 1);
    /* Fetch v12 response partition: tagged fields absent */
    arr = kr_array_new(&a, KR_T_UUID, 0, 1, 0);
    ck_assert_int_eq(arr->items[0].u.s.len, 16);
    kr_arena_free(&a);
}
END_TEST

/* ---- misc ---------------------------------------------------------------- */

START_TEST(test_uuid)
{
    static const struct {
        uint8_t u[16];
        const char *s;
    } v[] = {
        { { 0 }, "AAAAAAAAAAAAAAAAAAAAAA" },
        { { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
          "AAECAwQFBgcICQoLDA0ODw" },
        { { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff }, "_____________________w" },
        { { 0xfb, 0xef, 0xbe }, "----AAAAAAAAAAAAAAAAAA" },
    };
    char out[23];
    uint8_t u[16];
    unsigned i;

    for (i = 0; i < KR_ARRAY_LEN(v); i++) {
        kr_uuid_format(v[i].u, out);
        ck_assert_str_eq(out, v[i].s);
        ck_assert(kr_uuid_parse(v[i].s, u));
        ck_assert_int_eq(memcmp(u, v[i].u, 16), 0);
    }
    ck_assert(!kr_uuid_parse("AAAAAAAAAAAAAAAAAAAAA", u));      /* 21 */
    ck_assert(!kr_uuid_parse("AAAAAAAAAAAAAAAAAAAAAAA", u));    /* 23 */
    ck_assert(!kr_uuid_parse("AAAAAAAAAAAAAAAAAAAAA=", u));
    ck_assert(!kr_uuid_parse("AAAAAAAAAA+AAAAAAAAAAA", u));
}
END_TEST

START_TEST(test_utf8)
{
    ck_assert(kr_utf8_valid((const uint8_t *)"", 0));
    ck_assert(kr_utf8_valid((const uint8_t *)"plain ascii, long enough", 24));
    ck_assert(kr_utf8_valid((const uint8_t *)"\xc3\xa9\xe2\x82\xac"
                            "\xf0\x9f\x98\x80", 9));
    ck_assert(kr_utf8_valid((const uint8_t *)"\xef\xbf\xbf\xf4\x8f\xbf\xbf",
                            7));
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xc0\x80", 2));  /* overlong */
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xe0\x80\x80", 3));
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xf0\x80\x80\x80", 4));
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3)); /* D800 */
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4));
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xf5\x80\x80\x80", 4));
    ck_assert(!kr_utf8_valid((const uint8_t *)"\x80", 1));
    ck_assert(!kr_utf8_valid((const uint8_t *)"abcdefgh\xc3", 9)); /* cut */
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xe2\x82", 2));
    ck_assert(!kr_utf8_valid((const uint8_t *)"\xc3\x28", 2));
}
END_TEST

START_TEST(test_arena)
{
    struct kr_arena a;
    uint8_t *p, *q;
    size_t i;

    kr_arena_init(&a, 0);
    ck_assert_ptr_null(a.head);
    p = kr_arena_alloc(&a, 3);
    q = kr_arena_alloc(&a, 5);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 8, 0);
    ck_assert_uint_eq((uintptr_t)q % 8, 0);
    ck_assert_ptr_eq(q, p + 8);
    ck_assert_uint_eq(a.used, 16);
    /* big allocations and many chunks */
    p = kr_arena_alloc(&a, 3 << 20);
    ck_assert_ptr_nonnull(p);
    for (i = 0; i < (3u << 20); i += 4096) {
        ck_assert_int_eq(p[i], 0);
    }
    memset(p, 0xaa, 3 << 20);
    for (i = 0; i < 1000; i++) {
        ck_assert_ptr_nonnull(kr_arena_alloc(&a, 100));
    }
    kr_arena_reset(&a);
    ck_assert_uint_eq(a.used, 0);
    ck_assert_ptr_nonnull(a.head);
    p = kr_arena_alloc(&a, 64);
    for (i = 0; i < 64; i++) {
        ck_assert_int_eq(p[i], 0);              /* zero-filled after reuse */
    }
    kr_arena_free(&a);
    ck_assert_ptr_null(a.head);

    /* limit */
    kr_arena_init(&a, 4096);
    ck_assert_ptr_nonnull(kr_arena_alloc(&a, 1000));
    ck_assert_ptr_nonnull(kr_arena_alloc(&a, 1000));
    ck_assert_ptr_null(kr_arena_alloc(&a, 8192));
    ck_assert_ptr_null(kr_arena_alloc(&a, SIZE_MAX - 3));
    kr_arena_free(&a);
}
END_TEST

/* The thread's spare chunk: an arena freed leaves its first chunk for the
   next arena of the thread, which gets it zero-filled where it allocates
   (and under a limit that has room for it only). */
START_TEST(test_arena_spare)
{
    struct kr_arena a, b;
    uint8_t *p, *q;
    size_t i;

    kr_arena_init(&a, 0);
    p = kr_arena_alloc(&a, 4000);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xee, 4000);
    kr_arena_free(&a);
    kr_arena_init(&b, 0);
    q = kr_arena_alloc(&b, 4000);
    ck_assert_ptr_eq(q, p);                     /* the same chunk */
    for (i = 0; i < 4000; i++) {
        ck_assert_int_eq(q[i], 0);
    }
    /* two arenas at once: one spare, the second mallocs its own */
    kr_arena_init(&a, 0);
    p = kr_arena_alloc(&a, 10);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_ne(p, q);
    kr_arena_free(&b);
    kr_arena_free(&a);                          /* b's is the spare: freed */
    /* a limit below the chunk does not take it */
    kr_arena_init(&a, 4096);
    ck_assert_ptr_nonnull(kr_arena_alloc(&a, 1000));
    ck_assert_ptr_null(kr_arena_alloc(&a, 8192));
    kr_arena_free(&a);
}
END_TEST

START_TEST(test_arena_limit_decode)
{
    struct kr_arena a;
    struct kr_msg m;
    struct kr_codec_err err;
    uint8_t p[128];
    size_t len = golden_payload(G_ELECT_RSP, p, sizeof(p));

    kr_arena_init(&a, 256);
    ck_assert_int_eq(decode_flat(&a, p, len, 43, 2, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_ENOMEM);
    ck_assert_int_eq(err.status, KR_ENOMEM);
    kr_arena_free(&a);
    kr_arena_init(&a, 64 * 1024);
    ck_assert_int_eq(decode_flat(&a, p, len, 43, 2, KR_DIR_RESPONSE, 0, &m,
                                 &err), KR_OK);
    kr_arena_free(&a);
}
END_TEST

static Suite *
codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc;
    int ng = (int)KR_ARRAY_LEN(goldens);

    tc = tcase_create("golden");
    tcase_add_loop_test(tc, test_golden_seeds, 0, ng);
    tcase_add_loop_test(tc, test_golden_smallest, 0, ng);
    tcase_add_loop_test(tc, test_golden_segmented, 0, ng);
    tcase_add_loop_test(tc, test_truncated_goldens, 0, ng);
    tcase_add_test(tc, test_fetchsnapshot_layout);
    tcase_add_test(tc, test_node_get_id);
    suite_add_tcase(s, tc);

    tc = tcase_create("all_apis");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_all_smallest, 0, kr_api_max + 1);
    tcase_add_loop_test(tc, test_all_random, 0, kr_api_max + 1);
    tcase_add_loop_test(tc, test_scan_all, 0, kr_api_max + 1);
    suite_add_tcase(s, tc);

    tc = tcase_create("scan");
    tcase_add_test(tc, test_scan_malformed);
    tcase_add_loop_test(tc, test_scan_count_records, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("malformed");
    tcase_add_test(tc, test_length_past_end);
    tcase_add_test(tc, test_negative_length);
    tcase_add_test(tc, test_string_max);
    tcase_add_test(tc, test_huge_array_count);
    tcase_add_test(tc, test_bool_and_marker);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_test(tc, test_varints);
    tcase_add_test(tc, test_trailing);
    tcase_add_test(tc, test_tags_order_and_presence);
    tcase_add_test(tc, test_header_versions);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_add_test(tc, test_segmented_straddle);
    tcase_add_test(tc, test_encode_errors);
    tcase_add_test(tc, test_records_slices);
    tcase_add_test(tc, test_records_count);
    tcase_add_test(tc, test_decode_struct);
    tcase_add_test(tc, test_node_new_defaults);
    tcase_add_test(tc, test_uuid);
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_arena);
    tcase_add_test(tc, test_arena_spare);
    tcase_add_test(tc, test_arena_limit_decode);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr;
    int failed;
    size_t i;

    init_batch61();
    for (i = 0; i < sizeof(rsrc); i++) {
        rsrc[i] = (uint8_t)(i * 131 + 7);
    }
    sr = srunner_create(codec_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
