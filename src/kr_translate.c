/*
 * kr_translate.c - version translation of decoded trees, ApiVersions
 * clamping, and the KIP-511 "ApiVersions too new" answer.
 *
 * Translation walks the source tree and builds a tree for the target
 * version, matching fields by name (their field ids) through the schema
 * tables (see kr_translate.h for the rules).  Two shortcuts keep it
 * cheap:
 *   - a struct whose layout is the same at both versions (same struct,
 *     every field existing, tagged and nullable alike at both, and the
 *     same for every struct below it) is shared with the source, not
 *     copied: a Produce request v8 -> v7 copies the root node only;
 *   - the name map between two different structs (3.9.1 vs 4.3.1
 *     layouts) is computed once per translation and struct pair.
 * Both caches live in the caller's arena for one call.
 *
 * Records values are (offset, length) slices of the payload the source
 * was decoded from: they are copied as slices, and the encoder writes them
 * spliced from the same payload.  Their content (record batches, magic
 * 0/1/2) is never converted here.
 */
#include "config.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_field_ids.h"
#include "kr_frame.h"
#include "kr_kerr.h"
#include "kr_schema.h"
#include "kr_translate.h"

#define KR_APIVERSIONS_KEY 18
#define KR_PRODUCE_KEY 0
#define KR_TR_MAX_DEPTH 32            /* schemas nest about 6 deep */

static const uint8_t tr_zero16[16];

/* ---- errors ------------------------------------------------------------- */

static int tr_err(struct kr_codec_err *err, int status, const char *fmt, ...)
    KR_PRINTF(3, 4);

static int
tr_err(struct kr_codec_err *err, int status, const char *fmt, ...)
{
    va_list ap;

    err->status = status;
    err->offset = 0;
    err->path[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return status;
}

/* ---- one translation ---------------------------------------------------- */

/* Cache states of struct layouts (per struct id). */
#define TR_UNKNOWN 0
#define TR_SAME 1
#define TR_DIFF 2
#define TR_BUSY 3

/* Name map from one source struct to one target struct. */
struct tr_map {
    uint16_t src_sid;
    int16_t *idx;               /* per target field: source index or -1 */
    struct tr_map *next;
};

struct tr {
    struct kr_arena *a;
    struct kr_codec_err *err;
    int16_t from, to;
    bool flex_from, flex_to;
    bool lenient;               /* headers: drop what the target lacks */
    uint8_t *same;              /* kr_nstructs entries, TR_* */
    struct tr_map **maps;       /* kr_nstructs heads, by target sid */
};

static inline bool
tagged_at(const struct kr_field_desc *f, int16_t v)
{
    return f->tag >= 0 && kr_vrange_has(f->tagged, v);
}

static inline bool
is_struct_field(const struct kr_field_desc *f)
{
    return f->type == KR_T_STRUCT ||
           (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT);
}

/*
 * Does struct sid look the same at t->from and t->to (recursively)?  Then
 * a source node of it can be used as the target node unchanged.
 */
static bool
layout_same(struct tr *t, uint16_t sid, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;
    bool same = true;

    if (sid >= kr_nstructs || depth > KR_TR_MAX_DEPTH) {
        return false;
    }
    if (t->same[sid] == TR_SAME || t->same[sid] == TR_BUSY) {
        return true;            /* BUSY: a cycle; decided by the caller */
    }
    if (t->same[sid] == TR_DIFF) {
        return false;
    }
    /* Unknown tagged fields must go when the target is not flexible. */
    if (t->flex_from && !t->flex_to) {
        t->same[sid] = TR_DIFF;
        return false;
    }
    t->same[sid] = TR_BUSY;
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields && same; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];
        bool at_from = kr_vrange_has(f->versions, t->from);
        bool at_to = kr_vrange_has(f->versions, t->to);

        if (at_from != at_to) {
            same = false;
        } else if (!at_to) {
            continue;
        } else if (tagged_at(f, t->from) != tagged_at(f, t->to) ||
                   kr_vrange_has(f->nullable, t->from) !=
                       kr_vrange_has(f->nullable, t->to)) {
            same = false;
        } else if ((f->flags & KR_FF_FLEX_OVERRIDE) &&
                   kr_vrange_has(f->flexible, t->from) !=
                       kr_vrange_has(f->flexible, t->to)) {
            same = false;
        } else if (is_struct_field(f) &&
                   !layout_same(t, f->struct_id, depth + 1)) {
            same = false;
        }
    }
    t->same[sid] = same ? TR_SAME : TR_DIFF;
    return same;
}

/*
 * Index map of target struct dst's fields into source struct src: by
 * field id, one per name (as Kafka's generator sees names).
 */
static const int16_t *
name_map(struct tr *t, uint16_t src, uint16_t dst)
{
    const struct kr_struct_desc *ss = &kr_structs[src];
    const struct kr_struct_desc *ds = &kr_structs[dst];
    struct tr_map *m;
    uint16_t i, j;

    for (m = t->maps[dst]; m != NULL; m = m->next) {
        if (m->src_sid == src) {
            return m->idx;
        }
    }
    m = kr_arena_alloc(t->a, sizeof(*m) +
                             (size_t)(ds->nfields ? ds->nfields : 1) *
                                 sizeof(int16_t));
    if (m == NULL) {
        return NULL;
    }
    m->src_sid = src;
    m->idx = (int16_t *)(m + 1);
    for (i = 0; i < ds->nfields; i++) {
        uint16_t id = kr_fields[ds->first_field + i].id;

        m->idx[i] = -1;
        if (src == dst) {
            m->idx[i] = (int16_t)i;
            continue;
        }
        for (j = 0; j < ss->nfields; j++) {
            if (kr_fields[ss->first_field + j].id == id) {
                m->idx[i] = (int16_t)j;
                break;
            }
        }
    }
    m->next = t->maps[dst];
    t->maps[dst] = m;
    return m->idx;
}

static bool node_is_default(const struct kr_node *n, int16_t v, int depth);

/*
 * Does val (of field f, decoded at version v) hold f's default?  Kafka's
 * generated writers compare with the default the same way: numbers equal,
 * strings equal (null only when the default is null), bytes / arrays /
 * records empty (or null for a null default), uuid zero, structs equal to
 * a fresh struct.
 */
static bool
val_is_default(const struct kr_field_desc *f, int16_t v,
               const struct kr_val *val, int depth)
{
    bool dnull = (f->flags & KR_FF_DEFAULT_NULL) != 0;

    switch (f->type) {
    case KR_T_BOOL:
        return (val->u.i != 0) == (f->def_int != 0);
    case KR_T_INT8:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
    case KR_T_INT64:
        return val->u.i == f->def_int;
    case KR_T_FLOAT64:
        return val->u.f == f->def_float;
    case KR_T_UUID:
        return !val->is_null && val->u.s.len == 16 && val->u.s.p != NULL &&
               memcmp(val->u.s.p, tr_zero16, 16) == 0;
    case KR_T_STRING: {
        const char *d = f->def_str != NULL ? f->def_str : "";
        size_t dl = strlen(d);

        if (val->is_null || val->u.s.len < 0) {
            return dnull;
        }
        if (dnull) {
            return false;
        }
        return (size_t)val->u.s.len == dl &&
               (dl == 0 || memcmp(val->u.s.p, d, dl) == 0);
    }
    case KR_T_BYTES:
        if (val->is_null || val->u.s.len < 0) {
            return dnull;
        }
        return !dnull && val->u.s.len == 0;
    case KR_T_RECORDS:
        if (val->is_null || val->u.rec.len < 0) {
            return dnull;
        }
        return !dnull && val->u.rec.len == 0;
    case KR_T_ARRAY:
        if (val->is_null || val->u.arr == NULL) {
            return dnull;
        }
        return !dnull && val->u.arr->n == 0;
    case KR_T_STRUCT:
        if (val->is_null || val->u.node == NULL) {
            return dnull;
        }
        return !dnull && node_is_default(val->u.node, v, depth + 1);
    default:
        return true;
    }
}

static bool
node_is_default(const struct kr_node *n, int16_t v, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;

    if (n->struct_id >= kr_nstructs || depth > KR_TR_MAX_DEPTH) {
        return false;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (!kr_vrange_has(f->versions, v) ||
            (tagged_at(f, v) && !n->vals[i].present)) {
            continue;
        }
        if (!val_is_default(f, v, &n->vals[i], depth)) {
            return false;
        }
    }
    return true;
}

static bool
is_int_type(uint8_t ty)
{
    return ty == KR_T_INT8 || ty == KR_T_INT16 || ty == KR_T_UINT16 ||
           ty == KR_T_INT32 || ty == KR_T_UINT32 || ty == KR_T_INT64;
}

static bool
int_fits(uint8_t ty, int64_t x)
{
    switch (ty) {
    case KR_T_INT8:
        return x >= INT8_MIN && x <= INT8_MAX;
    case KR_T_INT16:
        return x >= INT16_MIN && x <= INT16_MAX;
    case KR_T_UINT16:
        return x >= 0 && x <= UINT16_MAX;
    case KR_T_INT32:
        return x >= INT32_MIN && x <= INT32_MAX;
    case KR_T_UINT32:
        return x >= 0 && x <= (int64_t)UINT32_MAX;
    default:
        return true;
    }
}

static int tr_node(struct tr *t, const struct kr_node *src, uint16_t dsid,
                   struct kr_node **out, int depth);

/* A field that names a topic: a topicName string, or a TopicId uuid. */
static bool
topic_ident(const struct kr_field_desc *f)
{
    return (f->type == KR_T_STRING && f->entity == KR_E_TOPIC_NAME) ||
           (f->type == KR_T_UUID && f->id == KR_FIELD_TOPIC_ID);
}

/* Does target node dst (at t->to) name its topic some other way? */
static bool
names_topic(const struct tr *t, const struct kr_node *dst, int depth)
{
    const struct kr_struct_desc *ds = &kr_structs[dst->struct_id];
    uint16_t i;

    for (i = 0; i < ds->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[ds->first_field + i];

        if (topic_ident(f) && kr_vrange_has(f->versions, t->to) &&
            !val_is_default(f, t->to, &dst->vals[i], depth)) {
            return true;
        }
    }
    return false;
}

/* Translate one struct-typed value (a struct field or array element). */
static int
tr_struct_val(struct tr *t, const struct kr_val *s, uint16_t dsid,
              struct kr_val *d, int depth)
{
    *d = *s;
    if (s->is_null || s->u.node == NULL) {
        d->u.node = NULL;
        d->is_null = 1;
        return KR_OK;
    }
    return tr_node(t, s->u.node, dsid, &d->u.node, depth + 1);
}

/*
 * Translate the value of a field that exists at both ends: sf at from
 * (holding s) to df at to (into d).
 */
static int
tr_val(struct tr *t, const struct kr_field_desc *sf,
       const struct kr_field_desc *df, const struct kr_val *s,
       struct kr_val *d, int depth)
{
    struct kr_array *sa, *da;
    uint32_t i;
    int rc;

    if (sf->type != df->type &&
        !(is_int_type(sf->type) && is_int_type(df->type))) {
        return tr_err(t->err, KR_EUNSUPPORTED, "type %s at v%d is %s at v%d",
                      kr_type_name((enum kr_type)sf->type), t->from,
                      kr_type_name((enum kr_type)df->type), t->to);
    }
    if (s->is_null && !kr_vrange_has(df->nullable, t->to) &&
        df->type != KR_T_BOOL && !is_int_type(df->type) &&
        df->type != KR_T_FLOAT64 && df->type != KR_T_UUID) {
        return tr_err(t->err, KR_EUNSUPPORTED,
                      "null, and v%d does not allow null", t->to);
    }
    *d = *s;
    d->present = 1;
    if (is_int_type(df->type)) {
        if (!int_fits(df->type, s->u.i)) {
            return tr_err(t->err, KR_EUNSUPPORTED,
                          "value %lld does not fit %s at v%d",
                          (long long)s->u.i,
                          kr_type_name((enum kr_type)df->type), t->to);
        }
        return KR_OK;
    }
    if (df->type == KR_T_STRUCT) {
        return tr_struct_val(t, s, df->struct_id, d, depth);
    }
    if (df->type != KR_T_ARRAY) {
        return KR_OK;           /* views and slices carry over */
    }
    sa = s->u.arr;
    if (s->is_null || sa == NULL) {
        d->u.arr = NULL;
        d->is_null = 1;
        return KR_OK;
    }
    if (sf->elem_type != df->elem_type || sa->elem_type != sf->elem_type) {
        return tr_err(t->err, KR_EUNSUPPORTED,
                      "array of %s at v%d is of %s at v%d",
                      kr_type_name((enum kr_type)sf->elem_type), t->from,
                      kr_type_name((enum kr_type)df->elem_type), t->to);
    }
    if (df->elem_type != KR_T_STRUCT ||
        (sa->struct_id == df->struct_id &&
         layout_same(t, df->struct_id, depth + 1))) {
        return KR_OK;           /* shared: nothing in it changes */
    }
    da = kr_array_new(t->a, KR_T_STRUCT, df->struct_id, 0, t->to);
    if (da == NULL) {
        return tr_err(t->err, KR_ENOMEM, "arena exhausted");
    }
    if (sa->n > 0) {
        da->items = kr_arena_alloc(t->a, (size_t)sa->n * sizeof(*da->items));
        if (da->items == NULL) {
            return tr_err(t->err, KR_ENOMEM, "arena exhausted");
        }
    }
    da->n = sa->n;
    for (i = 0; i < sa->n; i++) {
        rc = tr_struct_val(t, &sa->items[i], df->struct_id, &da->items[i],
                           depth);
        if (rc != KR_OK) {
            kr_codec_err_prepend_index(t->err, i);
            return rc;
        }
    }
    d->u.arr = da;
    return KR_OK;
}

/*
 * Translate node src (at t->from) into a node of struct dsid at t->to.
 */
static int
tr_node(struct tr *t, const struct kr_node *src, uint16_t dsid,
        struct kr_node **out, int depth)
{
    const struct kr_struct_desc *ss, *ds;
    const int16_t *map;
    struct kr_node *dst;
    uint8_t *used;
    uint16_t i;
    uint32_t u;
    int rc;

    if (depth > KR_TR_MAX_DEPTH) {
        return tr_err(t->err, KR_EPROTO, "structs nested deeper than %d",
                      KR_TR_MAX_DEPTH);
    }
    if (src->struct_id >= kr_nstructs || dsid >= kr_nstructs ||
        src->vals == NULL) {
        return tr_err(t->err, KR_EPROTO, "bad struct id %u",
                      (unsigned)src->struct_id);
    }
    /* Nothing changes below this node: share it. */
    if (depth > 0 && src->struct_id == dsid && layout_same(t, dsid, depth)) {
        *out = (struct kr_node *)(uintptr_t)src;
        return KR_OK;
    }
    ss = &kr_structs[src->struct_id];
    ds = &kr_structs[dsid];
    map = name_map(t, src->struct_id, dsid);
    dst = kr_arena_alloc(t->a, sizeof(*dst) +
                               (size_t)ds->nfields * sizeof(struct kr_val));
    used = kr_arena_alloc(t->a, ss->nfields ? ss->nfields : 1);
    if (map == NULL || dst == NULL || used == NULL) {
        return tr_err(t->err, KR_ENOMEM, "arena exhausted");
    }
    dst->struct_id = dsid;
    dst->version = t->to;
    dst->vals = (struct kr_val *)(dst + 1);

    for (i = 0; i < ds->nfields; i++) {
        const struct kr_field_desc *df = &kr_fields[ds->first_field + i];
        const struct kr_field_desc *sf = NULL;
        const struct kr_val *sv = NULL;
        struct kr_val *dv = &dst->vals[i];
        bool at_to = kr_vrange_has(df->versions, t->to);

        if (map[i] >= 0) {
            sf = &kr_fields[ss->first_field + (uint16_t)map[i]];
            sv = &src->vals[map[i]];
            if (!kr_vrange_has(sf->versions, t->from)) {
                sf = NULL;      /* absent at from: holds a default */
                sv = NULL;
            }
        }
        if (!at_to || sf == NULL) {
            rc = kr_val_default(t->a, df, t->to, dv);
            if (rc != KR_OK) {
                return tr_err(t->err, rc, "arena exhausted");
            }
            dv->present = at_to && !tagged_at(df, t->to);
            continue;
        }
        used[map[i]] = 1;
        if (tagged_at(sf, t->from) && !sv->present) {
            /* A tagged field not on the wire: its default at `to`. */
            rc = kr_val_default(t->a, df, t->to, dv);
            if (rc != KR_OK) {
                return tr_err(t->err, rc, "arena exhausted");
            }
            dv->present = !tagged_at(df, t->to);
            continue;
        }
        rc = tr_val(t, sf, df, sv, dv, depth);
        if (rc != KR_OK) {
            kr_codec_err_prepend(t->err, df->name);
            return rc;
        }
        if (tagged_at(df, t->to) && !tagged_at(sf, t->from)) {
            /* Became tagged: sent only when it is not the default. */
            dv->present = !val_is_default(df, t->to, dv, depth);
        }
    }

    /* Source fields that the target does not carry: Kafka's rule. */
    for (i = 0; i < ss->nfields; i++) {
        const struct kr_field_desc *sf = &kr_fields[ss->first_field + i];
        const struct kr_val *sv = &src->vals[i];

        if (used[i] || !kr_vrange_has(sf->versions, t->from)) {
            continue;
        }
        if (tagged_at(sf, t->from) && !sv->present) {
            continue;
        }
        if (t->lenient || val_is_default(sf, t->from, sv, depth)) {
            continue;
        }
        if (topic_ident(sf) && !names_topic(t, dst, depth)) {
            /*
             * Topic names and TopicIds are ignorable because Kafka's
             * clients pick the version that fits the ids they have;
             * dropping one with nothing else naming the topic would send
             * an empty name or a zero TopicId.
             */
            rc = tr_err(t->err, KR_EUNSUPPORTED,
                        "the topic would lose its identity at v%d (name "
                        "<-> TopicId)", t->to);
            kr_codec_err_prepend(t->err, sf->name);
            return rc;
        }
        if (sf->flags & KR_FF_IGNORABLE) {
            continue;
        }
        rc = tr_err(t->err, KR_EUNSUPPORTED,
                    "non-ignorable field with a non-default value does "
                    "not exist at v%d", t->to);
        kr_codec_err_prepend(t->err, sf->name);
        return rc;
    }

    /* Unknown tagged fields: only a flexible target can carry them. */
    dst->unknown = NULL;
    dst->nunknown = 0;
    if (t->flex_to && src->nunknown > 0 && src->unknown != NULL) {
        struct kr_rawtag *unk;

        unk = kr_arena_alloc(t->a, (size_t)src->nunknown * sizeof(*unk));
        if (unk == NULL) {
            return tr_err(t->err, KR_ENOMEM, "arena exhausted");
        }
        for (u = 0; u < src->nunknown; u++) {
            const struct kr_rawtag *r = &src->unknown[u];
            bool clash = false;

            /*
             * A tag unknown at `from` may be a field at `to`: keep the
             * raw bytes (they are that field's encoding) unless the
             * field itself is set.
             */
            for (i = 0; i < ds->nfields; i++) {
                const struct kr_field_desc *df =
                    &kr_fields[ds->first_field + i];

                if (tagged_at(df, t->to) &&
                    kr_vrange_has(df->versions, t->to) &&
                    (uint32_t)df->tag == r->tag) {
                    clash = dst->vals[i].present != 0;
                    break;
                }
            }
            if (!clash) {
                unk[dst->nunknown++] = *r;
            }
        }
        dst->unknown = dst->nunknown > 0 ? unk : NULL;
    }
    *out = dst;
    return KR_OK;
}

static int
tr_init(struct tr *t, struct kr_arena *a, struct kr_codec_err *err,
        int16_t from, int16_t to, bool flex_from, bool flex_to)
{
    memset(t, 0, sizeof(*t));
    t->a = a;
    t->err = err;
    t->from = from;
    t->to = to;
    t->flex_from = flex_from;
    t->flex_to = flex_to;
    t->same = kr_arena_alloc(a, kr_nstructs ? kr_nstructs : 1);
    t->maps = kr_arena_alloc(a, (size_t)(kr_nstructs ? kr_nstructs : 1) *
                                    sizeof(*t->maps));
    if (t->same == NULL || t->maps == NULL) {
        return tr_err(err, KR_ENOMEM, "arena exhausted");
    }
    return KR_OK;
}

/* ---- public: translation ------------------------------------------------ */

static void
err_clear(struct kr_codec_err *err)
{
    err->status = KR_OK;
    err->offset = 0;
    err->msg[0] = '\0';
    err->path[0] = '\0';
}

int
kr_translate_body(struct kr_arena *a, int16_t api, bool response,
                  const struct kr_node *in, int16_t from, int16_t to,
                  struct kr_node **out, struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    const struct kr_api_desc *ad = kr_api_get(api);
    uint16_t sroot, droot;
    struct tr t;
    int rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    sroot = ad != NULL && from >= 0 ? kr_api_root(ad, response, from)
                                    : KR_NO_STRUCT;
    droot = ad != NULL && to >= 0 ? kr_api_root(ad, response, to)
                                  : KR_NO_STRUCT;
    if (sroot == KR_NO_STRUCT || droot == KR_NO_STRUCT) {
        return tr_err(err, KR_EUNSUPPORTED,
                      "ApiKey %d has no %s version %d", api,
                      response ? "response" : "request",
                      sroot == KR_NO_STRUCT ? from : to);
    }
    if (in == NULL || in->struct_id != sroot) {
        return tr_err(err, KR_EPROTO, "not a %s v%d body",
                      kr_structs[sroot].name, from);
    }
    rc = tr_init(&t, a, err, from, to, kr_api_flexible(ad, from),
                 kr_api_flexible(ad, to));
    if (rc != KR_OK) {
        return rc;
    }
    return tr_node(&t, in, droot, out, 0);
}

/* int16 field id of header h, or -1. */
static int64_t
hdr_int(const struct kr_node *h, enum kr_field_id id)
{
    const struct kr_val *v = kr_node_get_id(h, id);

    return v != NULL ? v->u.i : -1;
}

int
kr_translate_msg(struct kr_arena *a, struct kr_msg *m, int16_t to,
                 struct kr_codec_err *err)
{
    struct kr_codec_err scratch;
    bool rsp = m->dir == KR_DIR_RESPONSE;
    struct kr_node *body, *hdr;
    struct kr_val *v;
    struct tr t;
    int hv, rc;

    if (err == NULL) {
        err = &scratch;
    }
    err_clear(err);
    if (m->header == NULL || m->body == NULL) {
        return tr_err(err, KR_EPROTO, "no %s",
                      m->header == NULL ? "header" : "body");
    }
    hv = rsp ? kr_response_header_version(m->api_key, to)
             : kr_request_header_version(m->api_key, to);
    if (hv < 0) {
        return tr_err(err, KR_EUNSUPPORTED, "ApiKey %d has no version %d",
                      m->api_key, to);
    }
    rc = kr_translate_body(a, m->api_key, rsp, m->body, m->api_version, to,
                           &body, err);
    if (rc != KR_OK) {
        return rc;
    }
    /* The header: same struct, its own versions, lenient (ClientId). */
    rc = tr_init(&t, a, err, m->hdr_version, (int16_t)hv,
                 rsp ? m->hdr_version >= 1 : m->hdr_version >= 2,
                 rsp ? hv >= 1 : hv >= 2);
    if (rc != KR_OK) {
        return rc;
    }
    t.lenient = true;
    rc = tr_node(&t, m->header,
                 rsp ? kr_response_header_struct : kr_request_header_struct,
                 &hdr, 0);
    if (rc != KR_OK) {
        kr_codec_err_prepend(err, "header");
        return rc;
    }
    if (!rsp) {
        if (hdr_int(hdr, KR_FIELD_REQUEST_API_KEY) != m->api_key) {
            return tr_err(err, KR_EPROTO, "header RequestApiKey %lld is "
                          "not the message's %d",
                          (long long)hdr_int(hdr, KR_FIELD_REQUEST_API_KEY),
                          m->api_key);
        }
        v = kr_node_get_id(hdr, KR_FIELD_REQUEST_API_VERSION);
        if (v == NULL) {
            return tr_err(err, KR_EPROTO, "header without RequestApiVersion");
        }
        v->u.i = to;
    }
    m->header = hdr;
    m->body = body;
    m->api_version = to;
    m->hdr_version = (int16_t)hv;
    return KR_OK;
}

/* ---- public: ApiVersions ------------------------------------------------ */

bool
kr_advertise_range(int16_t api_key, int64_t bmin, int64_t bmax,
                   const struct kr_advert *ad, int64_t *lo, int64_t *hi)
{
    const struct kr_api_desc *a = kr_api_get(api_key);
    bool known = a != NULL && a->valid.lo <= a->valid.hi;
    int64_t nlo = bmin, nhi = bmax;

    /* 1. krelay's own SASL ranges where it answers SASL itself */
    if (ad != NULL && ad->sasl_local && api_key == KR_API_SASL_HANDSHAKE) {
        nlo = 0;
        nhi = 1;
    } else if (ad != NULL && ad->sasl_local &&
               api_key == KR_API_SASL_AUTHENTICATE) {
        nlo = 0;
        nhi = 2;
    }
    /* 4. legacy widening (issue 10), on the broker's minimum: the clamp
       and the cap below bound the translated versions too */
    if (ad != NULL && ad->legacy != NULL && known &&
        ad->legacy[api_key].min <= ad->legacy[api_key].max &&
        nlo == (int64_t)ad->legacy[api_key].max + 1) {
        nlo = ad->legacy[api_key].min;
    }
    /* 2. the connection's clamp */
    if (ad != NULL && ad->clamps != NULL && known &&
        ad->clamps[api_key].min <= ad->clamps[api_key].max) {
        const struct kr_clamp *c = &ad->clamps[api_key];

        if (nlo < c->min && api_key != KR_PRODUCE_KEY) {
            nlo = c->min;
        }
        if (nhi > c->max) {
            nhi = c->max;
        }
    }
    /* 3. what krelay's tables know, where krelay must decode */
    if (ad != NULL && known &&
        (ad->decode_all || (ad->decode != NULL && ad->decode[api_key])) &&
        nhi > a->valid.hi) {
        nhi = a->valid.hi;
    }
    if (nlo > nhi) {
        return false;
    }
    /* 5. Produce's MinVersion for librdkafka (KAFKA-18659) */
    if (api_key == KR_PRODUCE_KEY && nlo <= 3) {
        nlo = 0;
    }
    *lo = nlo;
    *hi = nhi;
    return true;
}

/*
 * With ad->sasl_local: SaslHandshake and SaslAuthenticate entries for
 * the ApiKeys arr lacks (a broker without SASL need not list them), with
 * kr_advertise_range's ranges, the array copied into ad->arena one
 * larger.  Returns the number added.
 */
static unsigned
add_sasl_entries(struct kr_array *arr, int16_t v, const struct kr_advert *ad)
{
    static const int16_t keys[] = { KR_API_SASL_HANDSHAKE,
                                    KR_API_SASL_AUTHENTICATE };
    unsigned added = 0;
    size_t j;
    uint32_t i;

    for (j = 0; j < sizeof(keys) / sizeof(keys[0]); j++) {
        struct kr_val *items, *k;
        struct kr_node *e;
        int64_t lo, hi;
        bool have = false;

        for (i = 0; i < arr->n && !have; i++) {
            k = arr->items[i].u.node != NULL
                ? kr_node_get_id(arr->items[i].u.node, KR_FIELD_API_KEY)
                : NULL;
            have = k != NULL && k->u.i == keys[j];
        }
        if (have || !kr_advertise_range(keys[j], 0, 0, ad, &lo, &hi)) {
            continue;
        }
        items = kr_arena_alloc(ad->arena, ((size_t)arr->n + 1) *
                                              sizeof(*items));
        e = kr_node_new(ad->arena, arr->struct_id, v);
        if (items == NULL || e == NULL) {
            break;
        }
        if (arr->n > 0) {
            memcpy(items, arr->items, arr->n * sizeof(*items));
        }
        kr_node_get_id(e, KR_FIELD_API_KEY)->u.i = keys[j];
        kr_node_get_id(e, KR_FIELD_MIN_VERSION)->u.i = lo;
        kr_node_get_id(e, KR_FIELD_MAX_VERSION)->u.i = hi;
        memset(&items[arr->n], 0, sizeof(items[arr->n]));
        items[arr->n].u.node = e;
        items[arr->n].present = 1;
        arr->items = items;
        arr->n++;
        added++;
    }
    return added;
}

unsigned
kr_clamp_apiversions(struct kr_node *body, const struct kr_advert *ad)
{
    struct kr_val *keys = kr_node_get_id(body, KR_FIELD_API_KEYS);
    struct kr_array *arr;
    unsigned changed = 0;
    uint32_t i, n = 0;

    if (keys == NULL || keys->is_null || keys->u.arr == NULL ||
        keys->u.arr->elem_type != KR_T_STRUCT) {
        return 0;
    }
    arr = keys->u.arr;
    for (i = 0; i < arr->n; i++) {
        struct kr_node *e = arr->items[i].u.node;
        struct kr_val *k, *lo, *hi;
        int64_t nlo, nhi;
        bool known;

        if (e == NULL || arr->items[i].is_null) {
            changed++;          /* not an entry a client could read */
            continue;
        }
        k = kr_node_get_id(e, KR_FIELD_API_KEY);
        lo = kr_node_get_id(e, KR_FIELD_MIN_VERSION);
        hi = kr_node_get_id(e, KR_FIELD_MAX_VERSION);
        if (k == NULL || lo == NULL || hi == NULL) {
            arr->items[n++] = arr->items[i];
            continue;
        }
        known = k->u.i >= INT16_MIN && k->u.i <= INT16_MAX &&
                kr_api_get((int16_t)k->u.i) != NULL;
        if (!known && ad != NULL && !ad->pass_unknown) {
            changed++;
            continue;
        }
        if (!known) {
            arr->items[n++] = arr->items[i];
            continue;
        }
        if (!kr_advertise_range((int16_t)k->u.i, lo->u.i, hi->u.i, ad, &nlo,
                                &nhi)) {
            changed++;          /* nothing left to offer */
            continue;
        }
        if (nlo != lo->u.i || nhi != hi->u.i) {
            lo->u.i = nlo;
            hi->u.i = nhi;
            changed++;
        }
        arr->items[n++] = arr->items[i];
    }
    arr->n = n;
    if (ad != NULL && ad->sasl_local && ad->arena != NULL) {
        changed += add_sasl_entries(arr, body->version, ad);
    }
    return changed;
}

int
kr_apiversions_unsupported(int32_t correlation_id, uint8_t *frame,
                           size_t cap, size_t *len)
{
    const struct kr_api_desc *ad = kr_api_get(KR_APIVERSIONS_KEY);
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_array *keys;
    struct kr_node *e;
    struct kr_wbuf w;
    struct kr_msg m;
    struct kr_val *v;
    uint16_t root;
    int idx, rc = KR_ENOMEM;

    *len = 0;

    root = ad != NULL ? kr_api_root(ad, true, 0) : KR_NO_STRUCT;
    idx = root != KR_NO_STRUCT ? kr_struct_field_index_id(root,
                                                          KR_FIELD_API_KEYS)
                               : -1;
    if (idx < 0) {
        return KR_ERROR;
    }
    kr_arena_init(&arena, 0);
    memset(&w, 0, sizeof(w));
    memset(&m, 0, sizeof(m));
    m.dir = KR_DIR_RESPONSE;
    m.api_key = KR_APIVERSIONS_KEY;
    m.api_version = 0;
    m.hdr_version = 0;          /* ApiVersions: always v0 (KIP-511) */
    m.correlation_id = correlation_id;
    m.header = kr_node_new(&arena, kr_response_header_struct, 0);
    m.body = kr_node_new(&arena, root, 0);
    keys = kr_array_new(&arena, KR_T_STRUCT,
                        kr_fields[kr_structs[root].first_field +
                                  (unsigned)idx].struct_id, 1, 0);
    if (m.header == NULL || m.body == NULL || keys == NULL) {
        goto done;
    }
    e = keys->items[0].u.node;
    if ((v = kr_node_get_id(m.header, KR_FIELD_CORRELATION_ID)) != NULL) {
        v->u.i = correlation_id;
    }
    if ((v = kr_node_get_id(m.body, KR_FIELD_ERROR_CODE)) != NULL) {
        v->u.i = KR_KERR_UNSUPPORTED_VERSION;
    }
    v = &m.body->vals[idx];
    v->u.arr = keys;
    v->is_null = 0;
    if ((v = kr_node_get_id(e, KR_FIELD_API_KEY)) != NULL) {
        v->u.i = KR_APIVERSIONS_KEY;
    }
    if ((v = kr_node_get_id(e, KR_FIELD_MIN_VERSION)) != NULL) {
        v->u.i = ad->valid.lo;
    }
    if ((v = kr_node_get_id(e, KR_FIELD_MAX_VERSION)) != NULL) {
        v->u.i = ad->valid.hi;
    }
    rc = kr_encode_msg(&m, &w, &ce);
    if (rc == KR_OK && (w.failed || w.nrecs > 0)) {
        rc = KR_ERROR;          /* not reached: the body is 20 bytes */
    }
    if (rc == KR_OK && w.len + 4 > cap) {
        rc = KR_ELIMIT;
    }
    if (rc != KR_OK) {
        goto done;
    }
    kr_frame_put_size(frame, w.len);
    memcpy(frame + 4, w.buf, w.len);
    *len = 4 + w.len;
done:
    kr_wbuf_free(&w);
    kr_arena_free(&arena);
    return rc;
}
