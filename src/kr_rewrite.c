/*
 * kr_rewrite.c - response rewriting: broker endpoints and ApiVersions.
 *
 * Everything here is driven by the schema tables: which responses can
 * carry a broker endpoint is computed once from the KR_SF_ENDPOINT flags
 * the generator sets, and the rewrite walks the decoded tree generically.
 * The only API named in this file is ApiVersions, whose response is a
 * special case of the protocol itself (KIP-511).
 *
 * Data flow of one rewritten response:
 *
 *   payload evbuffer --evbuffer_peek--> kr_rbuf --decode--> tree
 *   tree --edit endpoints--> tree --kr_encode_msg--> kr_wbuf (own bytes
 *   + list of records slices)
 *   out = size prefix, own bytes, records chains moved from payload with
 *   evbuffer_remove_buffer, own bytes, ..., trailing bytes.
 *
 * Records are never touched by this code: they stay in the evbuffer
 * chains they were read into and are moved, not copied.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "kr_codec.h"
#include "kr_frame.h"
#include "kr_kerr.h"
#include "kr_log.h"
#include "kr_evcodec.h"
#include "kr_rewrite.h"
#include "kr_schema.h"
#include "kr_sni.h"
#include "kr_translate.h"
#include "kr_upstream.h"

#define KR_APIVERSIONS_KEY 18
#define KR_METADATA_KEY 3
#define KR_NO_NODE (-1)             /* Kafka's Node.noNode() id */

/* Keys and versions the wants table covers; larger ones are never known. */
#define KR_RW_MAX_KEYS 1024
#define KR_RW_MAX_VERSIONS 64
/* Depth bound for the table walk (Kafka's schemas nest about 5 deep). */
#define KR_RW_MAX_DEPTH 32

/* wants_mask[k] bit v: response of ApiKey k at version v has endpoints. */
static uint64_t wants_mask[KR_RW_MAX_KEYS];
/* tail_mask[k] bit v: ... and only in the body's top-level tagged fields */
static uint64_t tail_mask[KR_RW_MAX_KEYS];
/* reach[sid]: struct sid (or something below it) is an endpoint struct. */
static uint8_t *reach;
static bool inited;

/* ---- tables ----------------------------------------------------------- */

static bool
ep_fields_at(const struct kr_struct_desc *sd, int16_t v)
{
    if (!(sd->flags & KR_SF_ENDPOINT) || sd->ep_node < 0 ||
        sd->ep_host < 0 || sd->ep_port < 0 || sd->ep_node >= sd->nfields ||
        sd->ep_host >= sd->nfields || sd->ep_port >= sd->nfields) {
        return false;
    }
    return kr_vrange_has(kr_fields[sd->first_field + sd->ep_node].versions,
                         v) &&
           kr_vrange_has(kr_fields[sd->first_field + sd->ep_host].versions,
                         v) &&
           kr_vrange_has(kr_fields[sd->first_field + sd->ep_port].versions,
                         v);
}

/* Can struct sid at message version v hold an endpoint struct? */
static bool
reach_at(uint16_t sid, int16_t v, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;

    if (sid >= kr_nstructs || depth > KR_RW_MAX_DEPTH) {
        return false;
    }
    sd = &kr_structs[sid];
    if (ep_fields_at(sd, v)) {
        return true;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (!kr_vrange_has(f->versions, v)) {
            continue;
        }
        if ((f->type == KR_T_STRUCT ||
             (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) &&
            reach_at(f->struct_id, v, depth + 1)) {
            return true;
        }
    }
    return false;
}

/*
 * True when the body root at version v (flexible) reaches endpoint
 * structs only through its own tagged fields: everything before the
 * body's tagged-field section can stream (kr_rewrite_tail).
 */
static bool
tail_only_at(uint16_t root, int16_t v)
{
    const struct kr_struct_desc *sd;
    uint16_t i;

    if (root >= kr_nstructs) {
        return false;
    }
    sd = &kr_structs[root];
    if (ep_fields_at(sd, v)) {
        return false;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (!kr_vrange_has(f->versions, v) ||
            (f->tag >= 0 && kr_vrange_has(f->tagged, v))) {
            continue;
        }
        if ((f->type == KR_T_STRUCT ||
             (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) &&
            reach_at(f->struct_id, v, 1)) {
            return false;
        }
    }
    return true;
}

/* Version-independent: can struct sid hold an endpoint at any version? */
static bool
reach_any(uint16_t sid, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;

    if (sid >= kr_nstructs || depth > KR_RW_MAX_DEPTH) {
        return false;
    }
    sd = &kr_structs[sid];
    if (sd->flags & KR_SF_ENDPOINT) {
        return true;
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if ((f->type == KR_T_STRUCT ||
             (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) &&
            reach_any(f->struct_id, depth + 1)) {
            return true;
        }
    }
    return false;
}

void
kr_rewrite_init(void)
{
    int16_t k, v;
    uint32_t sid;

    if (inited) {
        return;
    }
    memset(wants_mask, 0, sizeof(wants_mask));
    memset(tail_mask, 0, sizeof(tail_mask));
    for (k = 0; k <= kr_api_max && k < KR_RW_MAX_KEYS; k++) {
        const struct kr_api_desc *a = kr_api_get(k);

        if (a == NULL) {
            continue;
        }
        for (v = a->valid.lo < 0 ? 0 : a->valid.lo;
             v <= a->valid.hi && v < KR_RW_MAX_VERSIONS; v++) {
            uint16_t root = kr_api_root(a, true, v);

            if (root != KR_NO_STRUCT && reach_at(root, v, 0)) {
                wants_mask[k] |= UINT64_C(1) << v;
                if (kr_api_flexible(a, v) && k != KR_APIVERSIONS_KEY &&
                    tail_only_at(root, v)) {
                    tail_mask[k] |= UINT64_C(1) << v;
                }
            }
        }
    }
    /*
     * reach[] prunes the per-response walk (a Metadata response with ten
     * thousand partitions is not walked into Topics).  Without it the walk
     * still works, only slower.
     */
    reach = calloc(kr_nstructs ? kr_nstructs : 1, 1);
    if (reach != NULL) {
        for (sid = 0; sid < kr_nstructs; sid++) {
            reach[sid] = reach_any((uint16_t)sid, 0);
        }
    }
    inited = true;
}

/* Highest version krelay's tables know for k, -1 when none. */
static int16_t
known_max(int16_t k)
{
    const struct kr_api_desc *a = kr_api_get(k);

    return a != NULL && a->valid.hi >= a->valid.lo ? a->valid.hi : -1;
}

bool
kr_rewrite_wants(int16_t api_key, int16_t api_version)
{
    int16_t hi;

    if (api_key == KR_APIVERSIONS_KEY) {
        return true;
    }
    if (api_key < 0 || api_key >= KR_RW_MAX_KEYS || api_version < 0 ||
        wants_mask[api_key] == 0) {
        return false;
    }
    /*
     * A version newer than the tables know, of an API whose newest known
     * version carries endpoints: hold it, so that it fails loudly rather
     * than leaking broker addresses (ApiVersions capping makes clients
     * never send it).
     */
    hi = known_max(api_key);
    if (api_version > hi) {
        return hi >= 0 && hi < KR_RW_MAX_VERSIONS &&
               (wants_mask[api_key] >> hi & 1u);
    }
    if (api_version >= KR_RW_MAX_VERSIONS) {
        return false;
    }
    return (wants_mask[api_key] >> api_version) & 1u;
}

bool
kr_rewrite_streamable(int16_t api_key, int16_t api_version)
{
    if (!inited) {
        kr_rewrite_init();
    }
    if (api_key < 0 || api_key >= KR_RW_MAX_KEYS || api_version < 0 ||
        api_version >= KR_RW_MAX_VERSIONS ||
        api_version > known_max(api_key)) {
        return false;
    }
    return (tail_mask[api_key] >> api_version) & 1u;
}

bool
kr_rewrite_tree_none(int16_t api_key, int16_t api_version,
                     const struct kr_node *body)
{
    const struct kr_struct_desc *sd;
    uint16_t i;

    if (body == NULL || body->struct_id >= kr_nstructs ||
        !kr_rewrite_streamable(api_key, api_version)) {
        return false;
    }
    sd = &kr_structs[body->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(body, i);
        const struct kr_val *v = &body->vals[i];

        /* streamable: the root's other fields reach no endpoint */
        if (!kr_vrange_has(f->versions, api_version) || f->tag < 0 ||
            !kr_vrange_has(f->tagged, api_version) || !v->present ||
            v->is_null) {
            continue;
        }
        if (f->type == KR_T_STRUCT && reach_at(f->struct_id, api_version, 1)) {
            return false;
        }
        if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
            v->u.arr != NULL && v->u.arr->n > 0 &&
            reach_at(f->struct_id, api_version, 1)) {
            return false;
        }
    }
    return true;
}

/* ---- helpers ---------------------------------------------------------- */

static void
set_err(struct kr_rewrite_result *res, int16_t k, int16_t v,
        const struct kr_codec_err *ce, const char *what)
{
    const struct kr_api_desc *a = kr_api_get(k);
    char nm[24];

    if (a != NULL && a->name != NULL) {
        snprintf(nm, sizeof(nm), "%.23s", a->name);
    } else {
        snprintf(nm, sizeof(nm), "ApiKey %d", k);
    }
    if (ce != NULL && ce->path[0] != '\0') {
        snprintf(res->err, sizeof(res->err),
                     "%s v%d: %.60s at %.40s (offset %u)", nm, v,
                     ce->msg, ce->path, (unsigned)(ce->offset + 4));
    } else if (ce != NULL) {
        snprintf(res->err, sizeof(res->err),
                     "%s v%d: %.100s (offset %u)", nm, v, ce->msg,
                     (unsigned)(ce->offset + 4));
    } else {
        snprintf(res->err, sizeof(res->err), "%s v%d: %.100s", nm, v, what);
    }
}

/* ---- endpoints -------------------------------------------------------- */

struct walk {
    const struct kr_rewrite_ctx *ctx;
    struct kr_rewrite_result *res;
    size_t host_len;
    struct kr_arena *arena;             /* the tree's: SNI names */
};

/*
 * With SNI routing: the name of NodeId node into wk's arena (it lives as
 * long as the tree), its length into *len.  NULL with res->err.
 */
static const char *
sni_host(struct walk *wk, int64_t node, size_t *len)
{
    char buf[KR_SNI_NAME_MAX + 16];
    char *p;

    *len = kr_sni_broker_name(wk->ctx->sni, (int32_t)node, buf, sizeof(buf));
    if (*len == 0) {
        snprintf(wk->res->err, sizeof(wk->res->err), "NodeId %lld has no "
                 "name under sni_broker_name", (long long)node);
        return NULL;
    }
    p = kr_arena_alloc(wk->arena, *len);
    if (p == NULL) {
        snprintf(wk->res->err, sizeof(wk->res->err), "out of memory");
        return NULL;
    }
    memcpy(p, buf, *len);
    return p;
}

static int
rewrite_endpoint(struct walk *wk, struct kr_node *n,
                 const struct kr_struct_desc *sd)
{
    const struct kr_rewrite_ctx *ctx = wk->ctx;
    struct kr_val *id, *host, *port;
    int64_t node, want_port;
    const char *want_host;
    size_t want_len;

    if (sd->ep_node < 0 || sd->ep_host < 0 || sd->ep_port < 0 ||
        sd->ep_node >= sd->nfields || sd->ep_host >= sd->nfields ||
        sd->ep_port >= sd->nfields) {
        return KR_OK;
    }
    id = &n->vals[sd->ep_node];
    host = &n->vals[sd->ep_host];
    port = &n->vals[sd->ep_port];
    /* FindCoordinator v4+ keeps the v0-3 fields in its root: absent. */
    if (!id->present || !host->present || !port->present) {
        return KR_OK;
    }
    node = id->u.i;
    if (node == KR_NO_NODE) {
        /*
         * "No node" (FindCoordinator errors: -1, "", -1): nothing to
         * reach, but never pass on a host a broker may have put there.
         */
        want_host = "";
        want_len = 0;
        want_port = -1;
    } else {
        if (node < ctx->node_id_min || node > ctx->node_id_max ||
            (ctx->sni == NULL &&
             (int64_t)ctx->broker_port_base + node > 65535)) {
            wk->res->bad_node_id = (int32_t)node;
            if (node < 0) {
                /* -1 is "no node" (above); no broker has another one */
                snprintf(wk->res->err, sizeof(wk->res->err),
                         "NodeId %lld is negative: a broker sent an "
                         "invalid NodeId", (long long)node);
            } else {
                snprintf(wk->res->err, sizeof(wk->res->err),
                         "NodeId %lld outside the listener's range %d-%d: "
                         "set node_id_min/node_id_max%s to cover it",
                         (long long)node, ctx->node_id_min,
                         ctx->node_id_max,
                         ctx->sni == NULL ? " (and broker_port_base)" : "");
            }
            return KR_ELIMIT;
        }
        if (ctx->sni != NULL) {
            want_host = sni_host(wk, node, &want_len);
            if (want_host == NULL) {
                return KR_ENOMEM;
            }
            want_port = ctx->sni_port;
        } else {
            want_host = ctx->advertised_host;
            want_len = wk->host_len;
            want_port = (int64_t)ctx->broker_port_base + node;
        }
    }
    wk->res->endpoints++;
    if (!host->is_null && host->u.s.len >= 0 &&
        (size_t)host->u.s.len == want_len &&
        (want_len == 0 || memcmp(host->u.s.p, want_host, want_len) == 0) &&
        port->u.i == want_port) {
        return KR_OK;
    }
    host->is_null = 0;
    host->u.s.p = (const uint8_t *)want_host;
    host->u.s.len = (int32_t)want_len;
    port->u.i = want_port;
    wk->res->changed = true;
    return KR_OK;
}

static int
walk_node(struct walk *wk, struct kr_node *n, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;
    int rc;

    if (n == NULL || n->struct_id >= kr_nstructs) {
        return KR_OK;
    }
    if (depth > KR_RW_MAX_DEPTH) {
        snprintf(wk->res->err, sizeof(wk->res->err),
                 "response nested deeper than %d", KR_RW_MAX_DEPTH);
        return KR_EPROTO;
    }
    sd = &kr_structs[n->struct_id];
    if (sd->flags & KR_SF_ENDPOINT) {
        rc = rewrite_endpoint(wk, n, sd);
        if (rc != KR_OK) {
            return rc;
        }
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        struct kr_val *val = &n->vals[i];
        uint32_t j;

        if (!val->present || val->is_null) {
            continue;
        }
        if (f->type != KR_T_STRUCT &&
            !(f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) {
            continue;
        }
        if (reach != NULL && f->struct_id < kr_nstructs &&
            !reach[f->struct_id]) {
            continue;
        }
        if (f->type == KR_T_STRUCT) {
            rc = walk_node(wk, val->u.node, depth + 1);
            if (rc != KR_OK) {
                return rc;
            }
            continue;
        }
        if (val->u.arr == NULL) {
            continue;
        }
        for (j = 0; j < val->u.arr->n; j++) {
            struct kr_val *it = &val->u.arr->items[j];

            if (it->is_null) {
                continue;
            }
            rc = walk_node(wk, it->u.node, depth + 1);
            if (rc != KR_OK) {
                return rc;
            }
        }
    }
    return KR_OK;
}

/*
 * Rewrite every endpoint struct below n (depth: n's nesting) for ctx;
 * SNI names are written in arena (n's).  KR_OK (res->changed says
 * whether anything changed), KR_ELIMIT, KR_EPROTO, KR_ENOMEM or
 * KR_ERROR (no advertised host), with res->err set.
 */
static int
rewrite_endpoints(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                  int16_t api_version, struct kr_node *n, int depth,
                  struct kr_arena *arena, struct kr_rewrite_result *res)
{
    struct walk wk;
    int rc;

    wk.ctx = ctx;
    wk.res = res;
    wk.arena = arena;
    wk.host_len = ctx->advertised_host != NULL ?
                  strlen(ctx->advertised_host) : 0;
    if (ctx->sni != NULL) {
        if (arena == NULL) {
            set_err(res, api_key, api_version, NULL,
                    "no arena for SNI names");
            return KR_ERROR;
        }
    } else if (ctx->advertised_host == NULL || wk.host_len > INT16_MAX) {
        set_err(res, api_key, api_version, NULL,
                "no advertised host to write");
        return KR_ERROR;
    }
    rc = walk_node(&wk, n, depth);
    if (rc != KR_OK) {
        res->changed = false;
    }
    return rc;
}

int
kr_rewrite_tree(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                int16_t api_version, struct kr_node *body,
                struct kr_arena *arena, struct kr_rewrite_result *res)
{
    memset(res, 0, sizeof(*res));
    res->bad_node_id = -1;
    if (!inited) {
        kr_rewrite_init();
    }
    if (body == NULL || api_key == KR_APIVERSIONS_KEY ||
        !kr_rewrite_wants(api_key, api_version)) {
        return KR_OK;
    }
    return rewrite_endpoints(ctx, api_key, api_version, body, 0, arena,
                             res);
}

/* ---- ApiVersions ------------------------------------------------------ */

/*
 * Shape the ApiKeys of a decoded ApiVersions response body for ctx with
 * kr_clamp_apiversions (kr_advertise_range has the precedence).  krelay
 * must decode, so caps at its tables' max: ApiVersions itself, APIs whose
 * responses carry endpoints (kr_rewrite_wants), every API a clamp applies
 * to (its requests may be translated) and every API an enforcing rule
 * could match (ctx->enforced).  Unknown ApiKeys pass without ctx clamps
 * (the walking skeleton's behaviour), with them only when
 * ctx->pass_unknown_apis, and never when ctx->enforced_unknown.  Returns
 * the number of entries changed or dropped, or -1 on ENOMEM.
 */
static int
clamp_api_versions(const struct kr_rewrite_ctx *ctx, struct kr_arena *arena,
                   struct kr_node *body)
{
    struct kr_advert ad;
    bool *decode;
    int16_t k;

    if (kr_api_max < 0) {
        return 0;
    }
    decode = kr_arena_alloc(arena, ((size_t)kr_api_max + 1) *
                                       sizeof(*decode));
    if (decode == NULL) {
        return -1;
    }
    for (k = 0; k <= kr_api_max; k++) {
        decode[k] = k == KR_APIVERSIONS_KEY ||
                    (k < KR_RW_MAX_KEYS && wants_mask[k] != 0) ||
                    (ctx->clamps != NULL &&
                     ctx->clamps[k].min <= ctx->clamps[k].max) ||
                    (ctx->enforced != NULL && ctx->enforced[k]);
    }
    memset(&ad, 0, sizeof(ad));
    ad.clamps = ctx->clamps;
    ad.decode = decode;
    ad.pass_unknown = !ctx->enforced_unknown &&
                      (ctx->clamps == NULL || ctx->pass_unknown_apis);
    ad.sasl_local = ctx->sasl_local;
    ad.legacy = ctx->legacy;
    ad.arena = arena;
    return (int)kr_clamp_apiversions(body, &ad);
}

/* ---- the entry point -------------------------------------------------- */

int
kr_rewrite_response(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                    int16_t api_version, struct evbuffer *payload,
                    struct evbuffer *out, struct kr_rewrite_result *res)
{
    return kr_rewrite_response_observed(ctx, api_key, api_version, payload,
                                        out, res, NULL, NULL);
}

int
kr_rewrite_response_observed(const struct kr_rewrite_ctx *ctx,
                             int16_t api_key, int16_t api_version,
                             struct evbuffer *payload, struct evbuffer *out,
                             struct kr_rewrite_result *res,
                             kr_rewrite_observe_fn observe, void *arg)
{
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_wbuf w;
    struct kr_rbuf rb;
    struct kr_msg m;
    int16_t dec_version = api_version;
    bool apiversions = api_key == KR_APIVERSIONS_KEY;
    bool pass = false;
    int rc;

    memset(res, 0, sizeof(*res));
    res->bad_node_id = -1;
    memset(&ce, 0, sizeof(ce));
    memset(&m, 0, sizeof(m));
    if (!inited) {
        kr_rewrite_init();
    }
    /*
     * Per call: no state survives a response (worker threads may come and
     * go).  The arena's first chunk is one malloc.
     */
    kr_arena_init(&arena, 0);
    memset(&w, 0, sizeof(w));

    if (apiversions) {
        uint8_t head[6];
        int16_t ec;

        /* Header v0 (CorrelationId), then ErrorCode at every version. */
        if (evbuffer_copyout(payload, head, sizeof(head)) !=
            (ev_ssize_t)sizeof(head)) {
            set_err(res, api_key, api_version, NULL,
                    "truncated: no ErrorCode");
            rc = KR_EPROTO;
            goto done;
        }
        ec = (int16_t)((head[4] << 8) | head[5]);
        if (ec == KR_KERR_UNSUPPORTED_VERSION) {
            /*
             * KIP-511: the broker did not parse the request and answered
             * with a v0 body, whatever version was asked.  Its ApiKeys
             * only serve the client's retry of ApiVersions itself, so
             * the frame passes byte for byte (even when, as librdkafka
             * 2.12's mock does, the body is not a valid v0 body).
             */
            pass = true;
            dec_version = 0;
        } else if (api_version > known_max(api_key)) {
            /* Newer than the tables: its layout starts like ours. */
            dec_version = known_max(api_key);
        }
    } else if (api_version > known_max(api_key) || api_version < 0) {
        set_err(res, api_key, api_version, NULL,
                "version unknown to krelay's schema tables");
        rc = KR_EPROTO;
        goto done;
    }

    rc = kr_evcodec_view(payload, stack, (int)KR_ARRAY_LEN(stack), &heap, &rb);
    if (rc != KR_OK) {
        set_err(res, api_key, api_version, NULL, "cannot read the frame");
        goto done;
    }
    rc = kr_decode_response(&arena, &rb, api_key, dec_version,
                            KR_DEC_TAGS_EXACT, &m,
                            &ce);
    if (rc == KR_OK && observe != NULL) {
        observe(arg, m.body);
    }
    if (pass) {
        /* Decoded only to check it; forwarded as received. */
        if (rc == KR_OK) {
            res->trailing = m.trailing;
        }
        rc = kr_evcodec_pass(payload, out);
        goto done;
    }
    if (rc != KR_OK) {
        if (rc == KR_EUNSUPPORTED) {
            rc = KR_EPROTO;
        }
        set_err(res, api_key, api_version, &ce, NULL);
        goto done;
    }
    res->trailing = m.trailing;

    if (apiversions) {
        int n = clamp_api_versions(ctx, &arena, m.body);

        if (n < 0) {
            rc = KR_ENOMEM;
            goto done;
        }
        res->capped = (unsigned)n;
        res->changed = res->capped > 0;
    } else {
        if (api_key == KR_METADATA_KEY && ctx->upstream != NULL) {
            kr_upstream_learn(ctx->upstream, m.body, api_key, api_version);
        }
        rc = rewrite_endpoints(ctx, api_key, api_version, m.body, 0,
                               &arena, res);
        if (rc != KR_OK) {
            goto done;
        }
    }

    if (!res->changed) {
        rc = kr_evcodec_pass(payload, out);
        goto done;
    }
    rc = kr_encode_msg(&m, &w, &ce);
    if (rc == KR_OK && w.failed) {
        rc = KR_ENOMEM;
    }
    if (rc != KR_OK) {
        set_err(res, api_key, api_version, &ce, NULL);
        res->changed = false;
        goto done;
    }
    rc = kr_evcodec_emit(payload, out, &w, &m, res->err, sizeof(res->err));

done:
    free(heap);
    /* Bytes borrowed by the tree are dropped only now. */
    evbuffer_drain(payload, evbuffer_get_length(payload));
    kr_arena_free(&arena);
    kr_wbuf_free(&w);
    if (rc != KR_OK && res->err[0] == '\0') {
        set_err(res, api_key, api_version, NULL, kr_status_str(rc));
    }
    return rc;
}

/* ---- streamed responses: the tail ------------------------------------- */

static unsigned
uvarint_len32(uint32_t x)
{
    unsigned n = 1;

    while (x >= 0x80) {
        x >>= 7;
        n++;
    }
    return n;
}

/* Data length d of a tagged field with total bytes fill after its tag. */
static bool
pad_data_len(size_t fill, size_t *d)
{
    size_t x;

    for (x = fill > 5 ? fill - 5 : 0; x < fill; x++) {
        if (uvarint_len32((uint32_t)x) + x == fill) {
            *d = x;
            return true;
        }
    }
    return false;
}

/*
 * The smallest tag >= from that n has no unknown field with (n's unknown
 * fields are in ascending tag order, each tag once: KR_DEC_TAGS_EXACT).
 * Known tags are far below KR_PAD_TAG.
 */
static uint32_t
free_tag(const struct kr_node *n, uint32_t from)
{
    uint32_t j, t = from;

    for (j = 0; j < n->nunknown; j++) {
        if (n->unknown[j].tag == t) {
            t++;
        } else if (n->unknown[j].tag > t) {
            break;
        }
    }
    return t;
}

/*
 * Add to n unknown tagged fields of zero bytes, with tags from KR_PAD_TAG
 * up that n does not use, that make its tagged-field section grow from
 * have to want bytes: one field, or two when no single field has that
 * size.  False when impossible (fewer than 3 bytes to fill, tags all
 * taken, or out of memory).
 */
static bool
add_padding(struct kr_arena *arena, struct kr_node *n, uint32_t ntags,
            size_t have, size_t want)
{
    struct kr_rawtag *u;
    uint32_t tag[2], nf, j, k, w;
    size_t fill, d[2], tl[2];

    tag[0] = free_tag(n, KR_PAD_TAG);
    if (tag[0] == UINT32_MAX) {
        return false;
    }
    tag[1] = free_tag(n, tag[0] + 1);
    tl[0] = uvarint_len32(tag[0]);
    tl[1] = uvarint_len32(tag[1]);
    for (nf = 1; nf <= 2; nf++) {
        size_t h = have + uvarint_len32(ntags + nf) - uvarint_len32(ntags);

        if (want < h + tl[0] + 1 + (nf == 2 ? tl[1] + 1 : 0)) {
            return false;
        }
        fill = want - h;
        if (nf == 1 && pad_data_len(fill - tl[0], &d[0])) {
            break;
        }
        if (nf == 2) {
            /* an empty field first, then the rest */
            d[0] = 0;
            if (!pad_data_len(fill - (tl[0] + 1) - tl[1], &d[1])) {
                return false;
            }
            break;
        }
    }
    if (nf > 2) {
        return false;
    }
    u = kr_arena_alloc(arena, (n->nunknown + nf) * sizeof(*u));
    if (u == NULL) {
        return false;
    }
    /* merge, keeping ascending tags */
    for (j = 0, k = 0, w = 0; w < n->nunknown + nf; w++) {
        if (k < nf && (j == n->nunknown || tag[k] < n->unknown[j].tag)) {
            uint8_t *data = kr_arena_alloc(arena, d[k] > 0 ? d[k] : 1);

            if (data == NULL) {
                return false;
            }
            u[w].tag = tag[k];
            u[w].data.p = data;         /* zero-filled */
            u[w].data.len = (int32_t)d[k];
            k++;
        } else {
            u[w] = n->unknown[j++];
        }
    }
    n->unknown = u;
    n->nunknown += nf;
    return true;
}

/* Number of tagged fields n writes at v (known present + unknown). */
static uint32_t
tag_count(const struct kr_node *n, int16_t v)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    uint32_t c = n->nunknown;
    uint16_t i;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        c += kr_vrange_has(f->versions, v) && f->tag >= 0 &&
             kr_vrange_has(f->tagged, v) && n->vals[i].present;
    }
    return c;
}

/* Drop the tagged fields of n that carry endpoints; returns how many. */
static unsigned
drop_endpoint_tags(struct kr_node *n, int16_t v)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    unsigned dropped = 0;
    uint16_t i;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (n->vals[i].present && f->tag >= 0 &&
            kr_vrange_has(f->tagged, v) &&
            (f->type == KR_T_STRUCT ||
             (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) &&
            reach_at(f->struct_id, v, 1)) {
            n->vals[i].present = 0;
            dropped++;
        }
    }
    return dropped;
}

static int
encode_tags_into(const struct kr_node *n, int16_t v, struct kr_wbuf *w,
                 struct kr_codec_err *ce)
{
    kr_wbuf_reset(w);
    if (kr_encode_tags(n, v, w, ce) != KR_OK || w->failed) {
        return KR_EPROTO;
    }
    return w->nrecs == 0 ? KR_OK : KR_EPROTO;
}

int
kr_rewrite_tail(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                int16_t api_version, struct evbuffer *tail,
                struct evbuffer *out, struct kr_rewrite_result *res)
{
    struct iovec stack[8], *heap = NULL;
    const struct kr_api_desc *a = kr_api_get(api_key);
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_node *node = NULL;
    struct kr_wbuf w;
    struct kr_rbuf rb;
    size_t len = evbuffer_get_length(tail), off = 0;
    uint16_t root;
    int rc;

    memset(res, 0, sizeof(res[0]));
    res->bad_node_id = -1;
    memset(&ce, 0, sizeof(ce));
    memset(&w, 0, sizeof(w));
    kr_arena_init(&arena, 0);
    if (!kr_rewrite_streamable(api_key, api_version) || a == NULL) {
        set_err(res, api_key, api_version, NULL,
                "not a response krelay streams");
        rc = KR_EPROTO;
        goto done;
    }
    root = kr_api_root(a, true, api_version);
    rc = kr_evcodec_view(tail, stack, (int)KR_ARRAY_LEN(stack), &heap, &rb);
    if (rc != KR_OK) {
        set_err(res, api_key, api_version, NULL, "cannot read the frame");
        goto done;
    }
    rc = kr_decode_tags(&arena, &rb, &off, root, api_version,
                        KR_DEC_TAGS_EXACT, &node,
                        &ce);
    if (rc != KR_OK) {
        if (rc == KR_EUNSUPPORTED) {
            rc = KR_EPROTO;
        }
        set_err(res, api_key, api_version, &ce, NULL);
        goto done;
    }
    res->trailing = len - off;
    rc = rewrite_endpoints(ctx, api_key, api_version, node, 1, &arena, res);
    if (rc != KR_OK || !res->changed) {
        if (rc == KR_OK) {
            rc = evbuffer_remove_buffer(tail, out, len) == (int)len
                 ? KR_OK : KR_ENOMEM;
        }
        res->changed = false;
        goto done;
    }
    /*
     * The frame's size went out with its first bytes: the section must
     * keep its length.  Shorter: pad with an unknown tagged field (every
     * Kafka client skips unknown tags).  Longer: drop the endpoint
     * fields (KIP-951 clients then refresh their metadata, as with a
     * broker that sends none) and pad.
     */
    rc = encode_tags_into(node, api_version, &w, &ce);
    if (rc == KR_OK && w.total != off &&
        (w.total > off ||
         !add_padding(&arena, node, tag_count(node, api_version), w.total,
                      off))) {
        res->dropped = drop_endpoint_tags(node, api_version);
        rc = encode_tags_into(node, api_version, &w, &ce);
        if (rc == KR_OK && w.total != off &&
            (w.total > off ||
             !add_padding(&arena, node, tag_count(node, api_version),
                          w.total, off))) {
            set_err(res, api_key, api_version, NULL,
                    "rewritten tagged fields do not fit the streamed frame");
            rc = KR_EPROTO;
            goto done;
        }
    }
    if (rc == KR_OK && w.total != off) {
        rc = encode_tags_into(node, api_version, &w, &ce);
    }
    if (rc != KR_OK || w.total != off) {
        set_err(res, api_key, api_version, rc != KR_OK ? &ce : NULL,
                "internal: rewritten tagged fields changed length");
        rc = KR_EPROTO;
        goto done;
    }
    if (evbuffer_add(out, w.buf, w.len) != 0) {
        rc = KR_ENOMEM;
        goto done;
    }
    evbuffer_drain(tail, off);
    /* bytes after the section (tolerated trailing bytes) stay as sent */
    if (evbuffer_remove_buffer(tail, out, len - off) != (int)(len - off)) {
        rc = KR_ENOMEM;
    }

done:
    free(heap);
    evbuffer_drain(tail, evbuffer_get_length(tail));
    kr_arena_free(&arena);
    kr_wbuf_free(&w);
    if (rc != KR_OK && res->err[0] == '\0') {
        set_err(res, api_key, api_version, NULL, kr_status_str(rc));
    }
    return rc;
}
