/*
 * kr_analyse.c - the rule pipeline (kr_analyse.h): decoded request in,
 * named outcome out; decoded response in, changes and holds out.
 *
 * Moved out of kr_session.c (issue 11) with its behaviour unchanged: the
 * order of the checks below is the precedence the README states (a
 * fetch session begun before a reload, an unlearned TopicId, deny,
 * produce policy, clamp), and the random draws happen in the same order
 * (fault error, throttle jitter, fault close) so a seeded connection
 * behaves as before.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_action.h"
#include "kr_analyse.h"
#include "kr_api_keys.h"
#include "kr_clock.h"
#include "kr_field_ids.h"
#include "kr_kerr.h"
#include "kr_log.h"
#include "kr_broker_versions.h"
#include "kr_schema.h"
#include "kr_translate.h"

/* ---- small helpers ------------------------------------------------------ */

double
kr_analyse_rand01(uint64_t *rng)
{
    uint64_t x = *rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    return (double)((x * UINT64_C(2685821657736338717)) >> 11) /
           9007199254740992.0;
}

static bool
chance(const struct kr_an_conn *c, double p)
{
    return p >= 1.0 || (p > 0.0 && kr_analyse_rand01(c->rng) < p);
}

const char *
kr_analyse_rule_name(const struct kr_ruleset *rs, int i)
{
    const struct kr_conf *c = rs != NULL ? rs->conf : NULL;

    return c != NULL && i >= 0 && i < c->nrules ? c->rules[i].name : "?";
}

static const char *
api_name(int16_t key)
{
    const struct kr_api_desc *a = kr_api_get(key);

    return a != NULL && a->name != NULL ? a->name : "ApiKey?";
}

const char *
kr_analyse_api_label(int16_t key, char *buf, size_t len)
{
    const struct kr_api_desc *a = kr_api_get(key);

    if (a != NULL && a->name != NULL) {
        return a->name;
    }
    snprintf(buf, len, "ApiKey %d", key);
    return buf;
}

void
kr_analyse_unknown_why(const struct kr_req_hdr *h, char *buf, size_t len)
{
    const struct kr_api_desc *a = kr_api_get(h->api_key);

    if (a == NULL || a->valid.lo > a->valid.hi) {
        snprintf(buf, len, "ApiKey %d is unknown to krelay's schema tables",
                 h->api_key);
    } else {
        snprintf(buf, len, "%s v%d is unknown to krelay's schema tables "
                 "(v%d-v%d)", a->name, h->api_version, a->valid.lo,
                 a->valid.hi);
    }
}

/* ---- rule state ---------------------------------------------------------- */

struct kr_an_req *
kr_an_req_new(void)
{
    struct kr_an_req *req = calloc(1, sizeof(*req));

    if (req == NULL) {
        return NULL;
    }
    req->v.deny_rule = req->v.clamp_rule = req->v.policy_rule = -1;
    req->v.throttle_rule = req->v.fault_rule = -1;
    return req;
}

void
kr_an_req_free(struct kr_an_req *req)
{
    if (req == NULL) {
        return;
    }
    if (req->audit != NULL) {
        kr_audit_req_free(req->audit);
    }
    free(req->audit_line);
    free(req->decode_error);
    free(req->note);
    free(req->client_id);
    if (req->legacy != NULL) {
        kr_legacy_parts_free(&req->legacy->parts);
        kr_legacy_parts_free(&req->legacy->sent);
        kr_legacy_splits_unref(req->legacy->splits);
        free(req->legacy);
    }
    free(req);
}

struct kr_an_req *
kr_an_req_from_header(const struct kr_an_request *r, const char *cid,
                      size_t cidlen, const char *why, unsigned actions)
{
    struct kr_an_req *req = kr_an_req_new();

    if (req == NULL) {
        return NULL;
    }
    req->t_wall_us = kr_clock_wall_us();
    req->t_read_us = kr_clock_mono_us();
    req->req_bytes = KR_FRAME_PREFIX + r->flen;
    req->up_version = r->h->api_version;
    req->actions = actions;
    if (why != NULL) {
        req->decode_error = strdup(why);
    }
    if (cid != NULL) {
        req->client_id_len = cidlen;
        req->client_id = malloc(req->client_id_len + 1);
        if (req->client_id != NULL) {
            memcpy(req->client_id, cid, req->client_id_len);
            req->client_id[req->client_id_len] = '\0';
        }
    }
    if ((why != NULL && req->decode_error == NULL) ||
        (cid != NULL && req->client_id == NULL)) {
        kr_an_req_free(req);
        return NULL;
    }
    return req;
}

void
kr_an_decision_free(struct kr_an_decision *d)
{
    uint32_t i;

    kr_an_req_free(d->req);
    kr_wbuf_free(&d->w);
    for (i = 0; i < d->nrounds; i++) {
        free(d->rounds[i].p);
    }
    free(d->rounds);
    kr_legacy_splits_unref(d->splits);
    free(d->audit_now);
    memset(d, 0, sizeof(*d));
}

char *
kr_an_audit_line(const struct kr_an_conn *c, const struct kr_inflight *e,
                 const struct kr_an_req *req, const struct kr_msg *rsp,
                 uint64_t rsp_bytes, int64_t upstream_us, int64_t extra_us)
{
    struct kr_audit_info info;

    memset(&info, 0, sizeof(info));
    info.time_us = req->t_wall_us;
    info.peer = c->peer;
    info.api_key = e->api_key;
    info.api_version = e->api_version;
    info.translated = req->up_version != e->api_version &&
                      (req->actions & KR_AUDIT_FORWARDED);
    info.upstream_version = req->up_version;
    info.correlation_id = e->correlation_id;
    info.req_bytes = req->req_bytes;
    info.rsp_bytes = rsp_bytes;
    info.upstream_us = upstream_us;
    info.total_us = kr_clock_mono_us() - req->t_read_us + extra_us;
    info.actions = req->actions;
    info.decode_error = req->decode_error;
    info.note = req->note;
    info.incomplete = req->incomplete;
    if (req->audit == NULL) {
        info.client_id = req->client_id;
        info.client_id_len = req->client_id_len;
    }
    return kr_audit_format(&info, req->audit, rsp, req->v.audit_body);
}

/* ---- requests ------------------------------------------------------------ */

static void
close_now(struct kr_an_decision *d, int level, const char *fmt, ...)
    KR_PRINTF(3, 4);

static void
close_now(struct kr_an_decision *d, int level, const char *fmt, ...)
{
    va_list ap;

    d->outcome = KR_AN_CLOSE;
    d->level = level;
    va_start(ap, fmt);
    vsnprintf(d->text, sizeof(d->text), fmt, ap);
    va_end(ap);
}

/*
 * d->text for a close after the responses owed: head, why, tail, why cut
 * ("...") to what KR_AN_CLOSE_TEXT_MAX leaves (the session keeps no more
 * of a close line), so that head and tail (what krelay does) always stay
 * whole.
 */
static void
close_text(struct kr_an_decision *d, const char *head, const char *why,
           const char *tail)
{
    int room = KR_AN_CLOSE_TEXT_MAX - 1 - (int)strlen(head) -
               (int)strlen(tail);

    if (room < 3) {
        room = 3;
    }
    if (strlen(why) > (size_t)room) {
        snprintf(d->text, sizeof(d->text), "%s%.*s...%s", head, room - 3,
                 why, tail);
    } else {
        snprintf(d->text, sizeof(d->text), "%s%s%s", head, why, tail);
    }
}

/*
 * d->text for a Produce with Acks=0 (h) whose error no response can
 * carry: the request, why, then what krelay does (outcome) and the error
 * (close_text).
 */
static void
acks0_text(struct kr_an_decision *d, const struct kr_req_hdr *h,
           const char *why, const char *outcome, int16_t error)
{
    char head[80], tail[160], ebuf[KR_KERR_BUFLEN];

    snprintf(head, sizeof(head), "%s v%d CorrelationId %d with Acks=0 ",
             api_name(h->api_key), h->api_version, h->correlation_id);
    snprintf(tail, sizeof(tail), ": %s (no response can carry %s)",
             outcome, kr_kerr_format(error, ebuf, sizeof(ebuf)));
    close_text(d, head, why, tail);
}

/*
 * The end of answer_error_fill, and of krelay's other answers: rsp (built
 * with status rc) encoded into d->w, the audit line, outcome ANSWER with
 * error and why in the line; a close when rc is not KR_OK or rsp does not
 * encode (req freed).
 */
static void
answer_built(const struct kr_an_conn *c, const struct kr_an_request *r,
             struct kr_an_req *req, int16_t error, const char *why, int rc,
             const struct kr_msg *rsp, struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    struct kr_codec_err ce;
    char ebuf[KR_KERR_BUFLEN];

    if (rc != KR_OK) {
        kr_an_req_free(req);
        close_now(d, KR_LOG_WARN, "%s v%d CorrelationId %d %s, but krelay "
                  "cannot build an error response for %s (%s): closing the "
                  "connection", api_name(h->api_key), h->api_version,
                  h->correlation_id, why, api_name(h->api_key),
                  kr_status_str(rc));
        return;
    }
    memset(&ce, 0, sizeof(ce));
    rc = kr_encode_msg(rsp, &d->w, &ce);
    if (rc != KR_OK || d->w.failed || d->w.nrecs > 0) {
        kr_wbuf_free(&d->w);
        kr_an_req_free(req);
        close_now(d, KR_LOG_ERROR, "cannot encode the %s v%d error "
                  "response: %s at %s", api_name(h->api_key),
                  h->api_version, ce.msg, ce.path);
        return;
    }
    if (req->v.flags & KR_VF_AUDIT) {
        req->audit_line = kr_an_audit_line(c, &r->e, req, rsp,
                                           KR_FRAME_PREFIX + d->w.len, 0, 0);
    }
    d->outcome = KR_AN_ANSWER;
    d->req = req;
    d->level = KR_LOG_INFO;
    snprintf(d->text, sizeof(d->text), "%s v%d CorrelationId %d %s: "
             "answered %s", api_name(h->api_key), h->api_version,
             h->correlation_id, why,
             kr_kerr_format(error, ebuf, sizeof(ebuf)));
}

/* What answer_error_fill may add to the error response (false: ENOMEM). */
typedef bool (*answer_fill_fn)(struct kr_arena *a, struct kr_msg *rsp);

/*
 * Answer request m (rule state req, now d's) locally with its API's error
 * response carrying error; why says what for; fill (may be NULL) adds to
 * the response before it is encoded.  Produce with Acks=0 has no
 * response: the connection closes after the responses owed.
 */
static void
answer_error_fill(const struct kr_an_conn *c, const struct kr_an_request *r,
                  struct kr_arena *a, const struct kr_msg *m,
                  struct kr_an_req *req, int16_t error, const char *why,
                  answer_fill_fn fill, struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    struct kr_msg rsp;
    int rc;

    req->actions |= KR_AUDIT_DENIED;
    d->error = error;
    if (!r->expect) {
        if (req->v.flags & KR_VF_AUDIT) {
            d->audit_now = kr_an_audit_line(c, &r->e, req, NULL, 0, 0, 0);
        }
        kr_an_req_free(req);
        /* a broker answers what came before, in order, then closes */
        d->outcome = KR_AN_CLOSE_AFTER_OWED;
        d->level = KR_LOG_NOTICE;
        acks0_text(d, h, why, "closing the connection", error);
        return;
    }
    memset(&rsp, 0, sizeof(rsp));
    rc = kr_action_error_response(a, m, error, &rsp);
    if (rc == KR_OK && fill != NULL && !fill(a, &rsp)) {
        rc = KR_ENOMEM;
    }
    answer_built(c, r, req, error, why, rc, &rsp, d);
}

static void
answer_error(const struct kr_an_conn *c, const struct kr_an_request *r,
             struct kr_arena *a, const struct kr_msg *m,
             struct kr_an_req *req, int16_t error, const char *why,
             struct kr_an_decision *d)
{
    answer_error_fill(c, r, a, m, req, error, why, NULL, d);
}

void
kr_analyse_refuse(const struct kr_an_conn *c, const struct kr_an_request *r,
                  int rule, const char *why, struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    char abuf[24];

    memset(d, 0, sizeof(*d));
    d->outcome = KR_AN_REFUSE;
    d->refused = true;
    d->level = KR_LOG_NOTICE;
    if (c->audit_sink) {
        struct kr_an_req *req = kr_an_req_from_header(r, r->cid, r->cidlen,
                                                      why, KR_AUDIT_REFUSED);

        if (req != NULL) {
            d->audit_now = kr_an_audit_line(c, &r->e, req, NULL, 0, 0, 0);
            kr_an_req_free(req);
        }
    }
    snprintf(d->text, sizeof(d->text), "%s v%d CorrelationId %d ClientId %s "
             "refused by [rule %.48s]: %.100s; closing after the responses "
             "owed", kr_analyse_api_label(h->api_key, abuf, sizeof(abuf)),
             h->api_version, h->correlation_id,
             h->client_id_null ? "(null)" : h->client_id,
             kr_analyse_rule_name(c->rs, rule), why);
}

/* Acks of a decoded Produce request, 1 when absent. */
static int64_t
produce_acks(const struct kr_msg *m)
{
    const struct kr_val *v = kr_node_get_id(m->body, KR_FIELD_ACKS);

    return v != NULL && v->present ? v->u.i : 1;
}

/*
 * The version a clamped request is translated to: the client's version
 * moved into the clamp, intersected with what krelay's tables know and
 * with what the broker offers for the ApiKey (the ApiVersions response
 * this connection saw, else the one krelay's own metadata fetch got).
 * *lo and *hi get that intersection; false when it is empty (brange then
 * names the broker's range).
 */
static bool
clamp_target(const struct kr_an_conn *c, int16_t key, int16_t ver,
             const struct kr_verdict *v, int16_t *to, int16_t *lo,
             int16_t *hi, char *brange, size_t blen)
{
    const struct kr_api_desc *ad = kr_api_get(key);
    int16_t bmin, bmax;
    bool known = false;

    *lo = v->clamp_min;
    *hi = v->clamp_max;
    if (ad != NULL) {
        *lo = *lo > ad->valid.lo ? *lo : ad->valid.lo;
        *hi = *hi < ad->valid.hi ? *hi : ad->valid.hi;
    }
    if (c->broker_av != NULL && key >= 0 && key <= kr_api_max) {
        if (c->broker_av[key].min <= c->broker_av[key].max) {
            bmin = c->broker_av[key].min;
            bmax = c->broker_av[key].max;
            known = true;
        } else {
            snprintf(brange, blen, "the broker's (no %s)", api_name(key));
            return false;
        }
    } else if (c->broker_range != NULL &&
               c->broker_range(c->broker_arg, key, &bmin, &bmax)) {
        known = true;
    }
    if (known) {
        *lo = *lo > bmin ? *lo : bmin;
        *hi = *hi < bmax ? *hi : bmax;
        snprintf(brange, blen, "the broker's v%d-v%d", bmin, bmax);
    } else {
        snprintf(brange, blen, "krelay's v%d-v%d",
                 ad != NULL ? ad->valid.lo : 0, ad != NULL ? ad->valid.hi : 0);
    }
    if (*lo > *hi) {
        return false;
    }
    *to = ver > *hi ? *hi : ver < *lo ? *lo : ver;
    return true;
}

/*
 * A Fetch on a connection whose config changed since its fetch session
 * may have begun (fetch_stale, issue 13).  An incremental Fetch
 * (SessionEpoch > 0, KIP-227) names only the partitions that changed, so
 * a topic rule the reload added cannot see the others.  True when an
 * enforcing topic rule could apply to Fetch here: the session must start
 * again.  A full Fetch (SessionEpoch 0 or -1, or a version without
 * sessions) ends the staleness.
 */
static bool
fetch_session_stale(const struct kr_an_conn *c, const struct kr_msg *m)
{
    const struct kr_val *ep = kr_node_get_id(m->body, KR_FIELD_SESSION_EPOCH);

    if (ep == NULL || !ep->present || ep->u.i <= 0) {
        *c->fetch_stale = false;
        return false;
    }
    return kr_rule_conn_topic_enforced(c->rs, c->rmask, KR_API_FETCH);
}

/*
 * A request the rules wanted decoded did not decode (issue 13).  When an
 * enforcing rule could match it (kr_rule_gate, on the request's own
 * ClientId) it fails closed: answered with the API's error response
 * carrying INVALID_REQUEST where that response has a top-level ErrorCode,
 * else refused.  Otherwise it fails open: forwarded unchanged, with an
 * audit line carrying decode_error when an audit rule could match.
 */
static void
undecodable(const struct kr_an_conn *c, const struct kr_an_request *r,
            struct kr_arena *a, struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    const struct kr_api_desc *ad = kr_api_get(h->api_key);
    const char *why = r->decode_error != NULL ? r->decode_error : "?";
    struct kr_gate_result g;
    struct kr_an_req *req = NULL;

    kr_rule_gate(c->rs, c->rmask, h->api_key, h->api_version, r->cid,
                 r->cidlen, &g);
    if (g.gate == KR_GATE_REFUSE) {
        struct kr_msg stub, rsp;

        /* a request with the header's facts and an empty body */
        memset(&stub, 0, sizeof(stub));
        memset(&rsp, 0, sizeof(rsp));
        stub.dir = KR_DIR_REQUEST;
        stub.api_key = h->api_key;
        stub.api_version = h->api_version;
        stub.correlation_id = h->correlation_id;
        stub.body = ad != NULL ? kr_node_new(a, kr_api_root(ad, false,
                                                            h->api_version),
                                             h->api_version)
                               : NULL;
        if (r->expect && stub.body != NULL &&
            kr_action_error_response(a, &stub, KR_KERR_INVALID_REQUEST,
                                     &rsp) == KR_OK &&
            kr_node_get_id(rsp.body, KR_FIELD_ERROR_CODE) != NULL &&
            (req = kr_an_req_from_header(r, r->cid, r->cidlen, why, 0)) !=
                NULL) {
            char rwhy[320];

            if (c->audit_sink) {
                req->v.flags |= KR_VF_AUDIT;
            }
            snprintf(rwhy, sizeof(rwhy), "%.200s, and [rule %.48s] could "
                     "match it", why, kr_analyse_rule_name(c->rs, g.rule));
            answer_error(c, r, a, &stub, req, KR_KERR_INVALID_REQUEST, rwhy,
                         d);
        } else {
            kr_analyse_refuse(c, r, g.rule, why, d);
        }
        return;
    }
    d->outcome = KR_AN_FORWARD_UNDECODED;
    d->undecodable = true;
    d->level = KR_LOG_NOTICE;
    snprintf(d->text, sizeof(d->text), "%s v%d CorrelationId %d: %s",
             api_name(h->api_key), h->api_version, h->correlation_id, why);
    if (g.audit) {
        req = kr_an_req_from_header(r, r->cid, r->cidlen, why,
                                    KR_AUDIT_FORWARDED);
        if (req != NULL) {
            req->v.flags = KR_VF_AUDIT;
        }
    }
    if (!r->expect && req != NULL) {
        d->audit_now = kr_an_audit_line(c, &r->e, req, NULL, 0, 0, 0);
        kr_an_req_free(req);
        req = NULL;
    }
    d->req = req;
}

/*
 * The mechanisms krelay can follow over SaslHandshake v0 (kr_sasl_mech_of:
 * it counts their raw tokens), listed in its refusal where a broker lists
 * its enabled ones: in passthrough krelay does not know the broker's, and
 * these are the only ones that could pass it over v0.
 */
static const char *const sasl_v0_mechanisms[] = {
    "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"
};

/* The refusal's Mechanisms: sasl_v0_mechanisms (false: ENOMEM). */
static bool
sasl_v0_mechanisms_fill(struct kr_arena *a, struct kr_msg *rsp)
{
    struct kr_val *v = kr_node_get_id(rsp->body, KR_FIELD_MECHANISMS);
    struct kr_array *arr;
    size_t i, n = sizeof(sasl_v0_mechanisms) / sizeof(sasl_v0_mechanisms[0]);

    if (v == NULL) {
        return true;                    /* no such field at the version */
    }
    arr = kr_array_new(a, KR_T_STRING, 0, (uint32_t)n, rsp->api_version);
    if (arr == NULL) {
        return false;
    }
    for (i = 0; i < n; i++) {
        arr->items[i].u.s.p = (const uint8_t *)sasl_v0_mechanisms[i];
        arr->items[i].u.s.len = (int32_t)strlen(sasl_v0_mechanisms[i]);
        arr->items[i].present = 1;
        arr->items[i].is_null = 0;
    }
    v->u.arr = arr;
    v->is_null = 0;
    return true;
}

/*
 * The SaslHandshake v0 refusal (issue 9): a mechanism other than PLAIN
 * and SCRAM-SHA-256/512, whose raw tokens (no Kafka header) krelay cannot
 * count, so that it could not find the Kafka frames after them: passing
 * the rest of the connection unparsed would bypass the rules and leave
 * Metadata responses without address rewriting.  Answered
 * UNSUPPORTED_SASL_MECHANISM with the mechanisms krelay can follow, one
 * notice line (client, mechanism, why).  Never reaches the broker.
 */
static void
sasl_refuse(const struct kr_an_conn *c, const struct kr_an_request *r,
            struct kr_arena *a, struct kr_an_decision *d)
{
    const struct kr_val *mv = kr_node_get_id(r->m->body, KR_FIELD_MECHANISM);
    struct kr_an_req *req;
    char mech[48], why[400];
    int32_t i, n = 0;

    if (mv != NULL && mv->present && !mv->is_null && mv->u.s.len > 0) {
        n = mv->u.s.len > 40 ? 40 : mv->u.s.len;
        /* the client's bytes as the log shows them: printable or '?' */
        for (i = 0; i < n; i++) {
            mech[i] = mv->u.s.p[i] >= 0x20 && mv->u.s.p[i] < 0x7f
                          ? (char)mv->u.s.p[i] : '?';
        }
        mech[n] = '\0';
    } else {
        snprintf(mech, sizeof(mech), "%s",
                 mv != NULL && mv->present && !mv->is_null ? "\"\""
                                                           : "(null)");
    }
    req = kr_an_req_from_header(r, NULL, 0, NULL, 0);
    if (req == NULL) {
        close_now(d, KR_LOG_ERROR, "out of memory");
        return;
    }
    c->sasl->mech = KR_SASL_NONE;
    snprintf(why, sizeof(why), "names SASL mechanism %s%s, which krelay "
             "cannot follow after a v0 handshake (only PLAIN and "
             "SCRAM-SHA-256/512: the end of another mechanism's raw token "
             "exchange is not observable, and the rest of the connection "
             "would pass unparsed, past the rules, its Metadata responses "
             "without address rewriting; SaslHandshake v1 works)", mech,
             n == 40 && mv->u.s.len > 40 ? "..." : "");
    answer_error_fill(c, r, a, r->m, req, KR_KERR_UNSUPPORTED_SASL_MECHANISM,
                      why, sasl_v0_mechanisms_fill, d);
    if (d->outcome == KR_AN_ANSWER) {
        d->level = KR_LOG_NOTICE;
    }
}

/*
 * Encode the translated request d->msg (version to) into d->w.  False
 * when it cannot be: d closes (req freed).
 */
static bool
encode_translated(const struct kr_an_request *r, struct kr_an_req *req,
                  int16_t to, struct kr_an_decision *d)
{
    struct kr_codec_err ce;
    int rc;

    memset(&ce, 0, sizeof(ce));
    rc = kr_encode_msg(&d->msg, &d->w, &ce);
    if (rc != KR_OK || d->w.failed) {
        kr_wbuf_free(&d->w);
        kr_an_req_free(req);
        close_now(d, KR_LOG_ERROR, "cannot encode %s v%d request translated "
                  "from v%d: %s at %s", api_name(r->h->api_key), to,
                  r->h->api_version, ce.msg, ce.path);
        return false;
    }
    return true;
}

/* issue 10: legacy translation (below) */
static int16_t legacy_broker_min(const struct kr_an_conn *c, int16_t key);
static bool legacy_crosses_records(int16_t key, int16_t from, int16_t to);
static void legacy_up(const struct kr_an_conn *c,
                      const struct kr_an_request *r, struct kr_arena *a,
                      struct kr_an_req *req, int16_t to,
                      struct kr_an_decision *d);

/* Clamp: translate the request into the clamp (req is d's). */
static void
clamp(const struct kr_an_conn *c, const struct kr_an_request *r,
      struct kr_arena *a, struct kr_an_req *req, struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    struct kr_msg orig = *r->m;
    struct kr_codec_err ce;
    char why[256], brange[48];
    int16_t to, lo, hi;
    int rc;

    if (!clamp_target(c, h->api_key, h->api_version, &req->v, &to, &lo, &hi,
                      brange, sizeof(brange))) {
        char crange[24];

        if (req->v.clamp_max == INT16_MAX) {
            snprintf(crange, sizeof(crange), "v%d+", req->v.clamp_min);
        } else {
            snprintf(crange, sizeof(crange), "v%d-v%d", req->v.clamp_min,
                     req->v.clamp_max);
        }
        snprintf(why, sizeof(why), "cannot be translated for [rule %.40s]: "
                 "its clamp %s and %s do not overlap",
                 kr_analyse_rule_name(c->rs, req->v.clamp_rule), crange,
                 brange);
        req->actions |= KR_AUDIT_CLAMPED;
        answer_error(c, r, a, &orig, req, KR_KERR_UNSUPPORTED_VERSION, why,
                     d);
        return;
    }
    if (to > h->api_version && c->legacy != NULL && c->legacy->on &&
        legacy_broker_min(c, h->api_key) > h->api_version &&
        kr_legacy_translates(h->api_key, h->api_version, to)) {
        /* issue 10: up past what the brokers refuse: legacy translation
           (records converted, per-API mappings) */
        req->actions |= KR_AUDIT_CLAMPED;
        legacy_up(c, r, a, req, to, d);
        return;
    }
    if (legacy_crosses_records(h->api_key, h->api_version, to) ||
        legacy_crosses_records(h->api_key, to, h->api_version)) {
        snprintf(why, sizeof(why), "cannot be translated to v%d for [rule "
                 "%.40s]: its records would cross Kafka's message formats "
                 "(magic 0/1 and RecordBatch v2)%s", to,
                 kr_analyse_rule_name(c->rs, req->v.clamp_rule),
                 to > h->api_version ? "; translate_legacy = true on the "
                                       "listener converts them" : "");
        req->actions |= KR_AUDIT_CLAMPED;
        answer_error(c, r, a, r->m, req, KR_KERR_UNSUPPORTED_VERSION, why,
                     d);
        return;
    }
    d->msg = *r->m;
    memset(&ce, 0, sizeof(ce));
    rc = to == h->api_version ? KR_OK
                              : kr_translate_msg(a, &d->msg, to, &ce);
    if (rc != KR_OK) {
        snprintf(why, sizeof(why), "cannot be translated to v%d for [rule "
                 "%.40s] (%.100s%s%.50s)", to,
                 kr_analyse_rule_name(c->rs, req->v.clamp_rule), ce.msg,
                 ce.path[0] ? ", at " : "", ce.path);
        req->actions |= KR_AUDIT_CLAMPED;
        answer_error(c, r, a, &orig, req, KR_KERR_UNSUPPORTED_VERSION, why,
                     d);
        return;
    }
    if (!encode_translated(r, req, to, d)) {
        return;
    }
    req->up_version = to;
    req->actions |= KR_AUDIT_CLAMPED | KR_AUDIT_FORWARDED;
    kr_log_debug("[%s] %s v%d CorrelationId %d sent as v%d ([rule %s])",
                 c->name, api_name(h->api_key), h->api_version,
                 h->correlation_id, to,
                 kr_analyse_rule_name(c->rs, req->v.clamp_rule));
    d->outcome = KR_AN_FORWARD_TRANSLATED;
    d->req = req;
}

/* ---- legacy translation (issue 10) -------------------------------------- */

/*
 * The ranges the brokers of c advertised: its own broker's ApiVersions
 * answer, else the one krelay's metadata connection got (copied into
 * *heap, malloc'd: the caller frees it), else NULL.
 */
static const struct kr_clamp *
learned_ranges(const struct kr_an_conn *c, struct kr_clamp **heap)
{
    *heap = NULL;
    if (c->broker_av != NULL) {
        return c->broker_av;
    }
    if (c->broker_range == NULL) {
        return NULL;
    }
    *heap = calloc((size_t)kr_api_max + 1, sizeof(**heap));
    if (*heap == NULL ||
        kr_bv_fill(*heap, c->broker_range, c->broker_arg) == 0) {
        return NULL;
    }
    return *heap;
}

int16_t
kr_an_broker_min(const struct kr_an_conn *c, int16_t key)
{
    struct kr_clamp *heap;
    const struct kr_clamp *learned = learned_ranges(c, &heap);
    int16_t min = kr_bv_min(c->legacy != NULL ? c->legacy->profile : 0,
                            learned, key);

    free(heap);
    return min;
}

/* The lowest version of key the brokers of c accept (-1: unknown). */
static int16_t
legacy_broker_min(const struct kr_an_conn *c, int16_t key)
{
    return kr_an_broker_min(c, key);
}

enum kr_an_legacy_route
kr_analyse_legacy_route(const struct kr_an_conn *c, int16_t key, int16_t ver,
                        int16_t *to)
{
    const struct kr_clamp *learned;
    struct kr_clamp *heap;
    enum kr_bv_outcome o;
    int16_t lo, hi, t = -1;

    /* the cheap test first: only versions KIP-896 removed */
    if (c->legacy == NULL || !kr_bv_legacy_range(key, &lo, &hi) ||
        ver < lo || ver > hi) {
        return KR_AN_LEGACY_PASS;
    }
    learned = learned_ranges(c, &heap);
    o = kr_bv_decide(c->legacy->profile, learned, key, ver, true, &t);
    free(heap);
    if (o != KR_BV_TRANSLATE || !kr_legacy_translates(key, ver, t)) {
        /* not below the brokers' minimum, or no translation reaches it:
           the broker answers it, as ever */
        return KR_AN_LEGACY_PASS;
    }
    *to = t;
    return c->legacy->on ? KR_AN_LEGACY_TRANSLATE : KR_AN_LEGACY_REFUSE;
}

/* Does going from version from to to of key cross Kafka's message
   formats (magic 0/1 below, RecordBatch v2 above)? */
static bool
legacy_crosses_records(int16_t key, int16_t from, int16_t to)
{
    int16_t last_old = key == KR_API_PRODUCE ? 2
                       : key == KR_API_FETCH ? 3 : -1;

    return last_old >= 0 && from <= last_old && to > last_old;
}

/*
 * issue 10: a request of a version the brokers no longer accept that does
 * not decode.  Neither translated nor answered (nothing to build an
 * answer from), and not forwarded unchanged either, as observing rules
 * let other undecodable requests go (issue 13): the broker would close on
 * its version and krelay's line would blame the upstream.  Closed after
 * the responses owed, as a broker closes on a request it cannot parse,
 * with one line naming the client and the fault.
 */
static void
legacy_undecodable(const struct kr_an_conn *c, const struct kr_an_request *r,
                   struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    const char *why = r->decode_error != NULL ? r->decode_error : "?";
    char head[160];

    d->outcome = KR_AN_CLOSE_AFTER_OWED;
    d->legacy = true;
    d->level = KR_LOG_NOTICE;
    if (c->audit_sink) {
        struct kr_an_req *req = kr_an_req_from_header(r, r->cid, r->cidlen,
                                                      why, KR_AUDIT_REFUSED);

        if (req != NULL) {
            d->audit_now = kr_an_audit_line(c, &r->e, req, NULL, 0, 0, 0);
            kr_an_req_free(req);
        }
    }
    /* the session's close line holds KR_AN_CLOSE_TEXT_MAX bytes: the
       fault cut to fit, the outcome whole */
    snprintf(head, sizeof(head), "%s v%d CorrelationId %d ClientId %.40s "
             "(below the brokers' versions): ", api_name(h->api_key),
             h->api_version, h->correlation_id,
             h->client_id_null ? "(null)" : h->client_id);
    close_text(d, head, why, "; not forwarded, closing after the responses "
               "owed");
}

/*
 * A translated Fetch's MaxBytes (v0-2 had none: INT32_MAX) kept to
 * legacy_fetch_max_bytes (max; 0: none) and to half of max_frame_bytes
 * (frame; 0: none).  krelay holds the response whole to convert it: one
 * larger than max_frame_bytes closes the connection, so a consumer whose
 * partitions' limits add up past it (kafka-python's 1 MiB each, a
 * hundred partitions) would be closed on every fetch once caught up; the
 * half leaves room for the partitions' own fields.  And a response of
 * tens of MB is read into fresh memory (page faults) and converted out
 * of cache: at 2 MiB the translation costs about a third less per byte
 * (make bench, legacy_fetch).  The broker still sends a first batch
 * larger than MaxBytes whole (KIP-74).  The config loader keeps
 * legacy_fetch_max_bytes to the same half (kr_conf.c:
 * kr_cf_check_listener), the value krelay -T prints.
 */
static void
legacy_fetch_cap(struct kr_node *body, size_t frame, int64_t max)
{
    struct kr_val *mb = kr_node_get_id(body, KR_FIELD_MAX_BYTES);
    int64_t cap = INT32_MAX;

    if (frame > 0) {
        cap = (int64_t)(frame / 2 > 0 ? frame / 2 : 1);
    }
    if (max > 0 && max < cap) {
        cap = max;
    }
    if (mb != NULL && mb->u.i > cap) {
        mb->u.i = cap;
    }
}

/*
 * The rounds of a translated Produce whose partitions' records became
 * several batches (struct kr_legacy_split): each encoded at version to
 * with the client's header, into d->rounds, sent before d->w.  False
 * with d a close (req freed) when one cannot be built.
 */
static bool
legacy_rounds(const struct kr_an_request *r, struct kr_arena *a,
              struct kr_legacy_splits *sp, int16_t to, struct kr_an_req *req,
              struct kr_an_decision *d)
{
    struct kr_codec_err ce;
    struct kr_wbuf w;
    struct kr_msg m;
    uint32_t i;
    int rc = KR_OK;

    d->rounds = calloc(sp->rounds, sizeof(*d->rounds));
    if (d->rounds == NULL) {
        rc = KR_ENOMEM;
    }
    memset(&ce, 0, sizeof(ce));
    for (i = 0; rc == KR_OK && i < sp->rounds; i++) {
        memset(&w, 0, sizeof(w));
        m = d->msg;
        rc = kr_legacy_produce_round(a, d->msg.body, to, sp, i, &m.body);
        if (rc == KR_OK) {
            rc = kr_encode_msg(&m, &w, &ce);
        }
        if (rc == KR_OK && (w.failed || w.nrecs > 0)) {
            /* converted records are copied in: nothing to flatten */
            rc = w.failed ? KR_ENOMEM : KR_ERROR;
        }
        if (rc == KR_OK) {
            d->rounds[i].p = w.buf;
            d->rounds[i].len = w.len;
            d->nrounds++;
            w.buf = NULL;
        }
        kr_wbuf_free(&w);
    }
    if (rc != KR_OK) {
        kr_wbuf_free(&d->w);
        kr_an_req_free(req);
        close_now(d, KR_LOG_ERROR, "cannot build the Produce v%d requests "
                  "for the batches a Produce v%d request's records split "
                  "into: %s%s%s", to, r->h->api_version,
                  ce.msg[0] ? ce.msg : kr_status_str(rc),
                  ce.path[0] ? " at " : "", ce.path);
        return false;
    }
    for (i = 0; i < sp->n; i++) {
        /* their bytes were the request arena's, copied into rounds */
        sp->v[i].early = NULL;
        sp->v[i].early_len = 0;
    }
    kr_legacy_splits_ref(sp);
    d->splits = sp;
    d->rounds_version = to;
    return true;
}

/*
 * The errors of the partitions krelay kept out of a translated Produce
 * (lg->parts: records that did not convert, empty sets) as a client of
 * version ver knows them (kr_legacy_error: UNSUPPORTED_COMPRESSION_TYPE,
 * from KIP-110's Produce v7, is CORRUPT_MESSAGE below v3), before they go
 * into its answer.
 */
static void
legacy_parts_map(struct kr_legacy_parts *parts, int16_t ver)
{
    size_t i;

    for (i = 0; i < parts->n; i++) {
        parts->v[i].error = kr_legacy_error(KR_API_PRODUCE, ver,
                                            parts->v[i].error);
    }
}

/*
 * issue 10: a Produce response at the client's version ver (CorrelationId
 * corr) that krelay answers itself: every partition of lg->sent with
 * sent_error (mapped for ver: kr_legacy_error), then those of lg->parts
 * (kept out of the request) with theirs; BaseOffset and LogAppendTimeMs
 * -1.  In arena a.  KR_OK, KR_ENOMEM, KR_EUNSUPPORTED (no such version),
 * KR_EPROTO.
 */
static int
legacy_produce_rsp(struct kr_arena *a, int16_t ver, int32_t corr,
                   struct kr_an_legacy *lg, int16_t sent_error,
                   struct kr_msg *rsp)
{
    const struct kr_api_desc *api = kr_api_get(KR_API_PRODUCE);
    int hv = kr_response_header_version(KR_API_PRODUCE, ver);
    int16_t err = kr_legacy_error(KR_API_PRODUCE, ver, sent_error);
    struct kr_val *cv;
    size_t i;
    int rc;

    memset(rsp, 0, sizeof(*rsp));
    if (api == NULL || hv < 0 ||
        kr_api_root(api, true, ver) == KR_NO_STRUCT) {
        return KR_EUNSUPPORTED;
    }
    rsp->header = kr_node_new(a, kr_response_header_struct, (int16_t)hv);
    rsp->body = kr_node_new(a, kr_api_root(api, true, ver), ver);
    if (rsp->header == NULL || rsp->body == NULL) {
        return KR_ENOMEM;
    }
    cv = kr_node_get_id(rsp->header, KR_FIELD_CORRELATION_ID);
    if (cv != NULL) {
        cv->u.i = corr;
    }
    rsp->dir = KR_DIR_RESPONSE;
    rsp->api_key = KR_API_PRODUCE;
    rsp->api_version = ver;
    rsp->hdr_version = (int16_t)hv;
    rsp->correlation_id = corr;
    for (i = 0; i < lg->sent.n; i++) {
        lg->sent.v[i].error = err;
    }
    rc = kr_legacy_produce_merge(a, rsp->body, &lg->sent);
    if (rc == KR_OK) {
        legacy_parts_map(&lg->parts, ver);
        rc = kr_legacy_produce_merge(a, rsp->body, &lg->parts);
    }
    return rc;
}

/*
 * issue 10: a translated Produce none of whose partitions is left to
 * forward (lg->parts has them all: records that did not convert, empty
 * sets), answered by krelay (req is d's, its legacy state lg): each
 * partition with its own error (error: the first one not 0, for the
 * line; why says what).  Acks=0: no response can carry an error, so with
 * one the connection closes after the responses owed, as a broker's
 * does; with none (only empty sets) nothing is done (KR_AN_DONE).
 */
static void
legacy_answer_kept(const struct kr_an_conn *c, const struct kr_an_request *r,
                   struct kr_arena *a, struct kr_an_req *req,
                   struct kr_an_legacy *lg, int16_t error, const char *why,
                   struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    struct kr_msg rsp;
    int rc;

    req->legacy = lg;
    if (error != KR_KERR_NONE) {
        req->actions |= KR_AUDIT_DENIED;
        d->error = error;
    }
    if (!r->expect) {
        if (req->v.flags & KR_VF_AUDIT) {
            d->audit_now = kr_an_audit_line(c, &r->e, req, NULL, 0, 0, 0);
        }
        kr_an_req_free(req);
        if (error != KR_KERR_NONE) {
            /* a broker answers what came before, in order, then closes */
            d->outcome = KR_AN_CLOSE_AFTER_OWED;
            d->level = KR_LOG_NOTICE;
            acks0_text(d, h, why, "closing the connection", error);
            return;
        }
        d->outcome = KR_AN_DONE;
        d->level = KR_LOG_DEBUG;
        snprintf(d->text, sizeof(d->text), "%s v%d CorrelationId %d with "
                 "Acks=0 %s: nothing sent (translate_legacy)",
                 api_name(h->api_key), h->api_version, h->correlation_id,
                 why);
        return;
    }
    rc = legacy_produce_rsp(a, h->api_version, h->correlation_id, lg,
                            KR_KERR_NONE, &rsp);
    answer_built(c, r, req, error, why, rc, &rsp, d);
    if (d->outcome == KR_AN_ANSWER && error == KR_KERR_NONE) {
        d->level = KR_LOG_DEBUG;
        snprintf(d->text, sizeof(d->text), "%s v%d CorrelationId %d %s: "
                 "answered by krelay, ErrorCode 0 and BaseOffset -1 "
                 "(translate_legacy)", api_name(h->api_key), h->api_version,
                 h->correlation_id, why);
    }
}

/*
 * Translate request r up to version to (legacy translation; req is d's):
 * records converted (Produce), partitions remembered (Fetch), the rest by
 * kr_legacy_request_up, encoded into d->w.  A Produce none of whose
 * partitions' records convert is answered with their error; a request
 * that cannot be expressed at `to` with UNSUPPORTED_VERSION.
 */
static void
legacy_up(const struct kr_an_conn *c, const struct kr_an_request *r,
          struct kr_arena *a, struct kr_an_req *req, int16_t to,
          struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    struct kr_msg orig = *r->m;
    struct kr_an_legacy *lg;
    const struct kr_legacy_part *bad = NULL;
    struct kr_codec_err ce;
    char why[300];
    size_t nbad, i;
    int rc = KR_OK;

    d->legacy = true;
    req->actions |= KR_AUDIT_TRANSLATED;
    lg = calloc(1, sizeof(*lg));
    if (lg == NULL) {
        kr_an_req_free(req);
        close_now(d, KR_LOG_ERROR, "out of memory");
        return;
    }
    lg->rec = c->legacy->rec;
    d->msg = *r->m;
    if (h->api_key == KR_API_PRODUCE &&
        legacy_crosses_records(h->api_key, h->api_version, to)) {
        lg->splits = kr_legacy_splits_new();
        rc = lg->splits == NULL ? KR_ENOMEM
                                : kr_legacy_produce_up(a, d->msg.body, r->rb,
                                                       &lg->rec, &lg->parts,
                                                       lg->splits,
                                                       &d->legacy_st);
        if (lg->splits != NULL && lg->splits->n == 0) {
            kr_legacy_splits_unref(lg->splits);
            lg->splits = NULL;
        }
        nbad = rc == KR_OK ? kr_legacy_parts_failed(&lg->parts) : 0;
        d->legacy_bad = (unsigned)nbad;
        for (i = 0; rc == KR_OK && i < lg->parts.n && bad == NULL; i++) {
            if (lg->parts.v[i].error != KR_KERR_NONE) {
                bad = &lg->parts.v[i];
            }
        }
        if (bad != NULL) {
            /* the first bad partition's fault (short enough for an
               Acks=0 close line, acks0_text) */
            snprintf(why, sizeof(why), "has records that do not convert "
                     "in %zu partition%s (topic %.32s partition %d: %.112s)",
                     nbad, nbad == 1 ? "" : "s", bad->topic, bad->partition,
                     bad->why);
        } else if (rc == KR_OK && lg->parts.n > 0) {
            snprintf(why, sizeof(why), "has only empty message sets "
                     "(MessageSetSize 0: nothing to append) in %zu "
                     "partition%s", lg->parts.n,
                     lg->parts.n == 1 ? "" : "s");
        }
        if (rc == KR_OK && lg->parts.n > 0 &&
            !kr_legacy_produce_any_left(d->msg.body, &lg->parts)) {
            /* nothing left to forward: krelay answers */
            legacy_answer_kept(c, r, a, req, lg,
                               bad != NULL ? bad->error : KR_KERR_NONE, why,
                               d);
            return;
        }
        if (rc == KR_OK && lg->parts.n > 0) {
            /* empty sets too: a broker refuses empty records at v3+ */
            kr_legacy_produce_drop(d->msg.body, &lg->parts);
            if (!r->expect && bad != NULL) {
                /* Acks=0: no response carries the bad partitions' errors.
                   A broker stores the others and closes the connection
                   (KafkaApis.handleProduceRequest, "Closing connection
                   due to error during produce request ... with ack=0"):
                   the others go up, then the connection closes */
                d->close_after = true;
                d->level = KR_LOG_NOTICE;
                acks0_text(d, h, why, "others forwarded, closing the "
                           "connection", bad->error);
            }
        }
        if (rc == KR_OK && lg->splits != NULL && r->expect) {
            /* named in krelay's answer should a round fail */
            rc = kr_legacy_produce_parts(d->msg.body, &lg->sent);
        }
    } else if (h->api_key == KR_API_FETCH &&
               legacy_crosses_records(h->api_key, h->api_version, to)) {
        rc = kr_legacy_fetch_parts(d->msg.body, &lg->parts);
    }
    if (rc != KR_OK) {
        kr_legacy_parts_free(&lg->parts);
        kr_legacy_parts_free(&lg->sent);
        kr_legacy_splits_unref(lg->splits);
        free(lg);
        kr_an_req_free(req);
        close_now(d, KR_LOG_ERROR, "%s v%d: cannot convert its records: %s",
                  api_name(h->api_key), h->api_version, kr_status_str(rc));
        return;
    }
    memset(&ce, 0, sizeof(ce));
    rc = kr_legacy_request_up(a, &d->msg, to, &lg->memo, &ce);
    req->legacy = lg;
    if (rc != KR_OK) {
        snprintf(why, sizeof(why), "cannot be translated up to v%d, the "
                 "lowest version the brokers accept (%.100s%s%.50s)", to,
                 ce.msg, ce.path[0] ? ", at " : "", ce.path);
        d->msg = orig;
        answer_error(c, r, a, &orig, req, KR_KERR_UNSUPPORTED_VERSION, why,
                     d);
        return;
    }
    if (h->api_key == KR_API_FETCH &&
        legacy_crosses_records(h->api_key, h->api_version, to)) {
        legacy_fetch_cap(d->msg.body, lg->rec.max_uncompressed,
                         c->legacy->fetch_max_bytes);
        /* every partition first in turn (kr_legacy.h: KIP-74) */
        if (c->legacy_turn != NULL) {
            kr_legacy_fetch_rotate(d->msg.body, (*c->legacy_turn)++);
        }
    }
    if (!encode_translated(r, req, to, d)) {
        return;
    }
    if (lg->splits != NULL && !legacy_rounds(r, a, lg->splits, to, req, d)) {
        return;
    }
    req->up_version = to;
    req->actions |= KR_AUDIT_FORWARDED;
    if (d->nrounds > 0) {
        kr_log_debug("[%s] %s v%d CorrelationId %d sent as v%d after %u "
                     "Produce requests of krelay's own with the batches "
                     "before each partition's last (translate_legacy)",
                     c->name, api_name(h->api_key), h->api_version,
                     h->correlation_id, to, d->nrounds);
    } else {
        kr_log_debug("[%s] %s v%d CorrelationId %d sent as v%d "
                     "(translate_legacy)", c->name, api_name(h->api_key),
                     h->api_version, h->correlation_id, to);
    }
    d->outcome = KR_AN_FORWARD_TRANSLATED;
    d->req = req;
}

/*
 * A request of a version the brokers no longer accept, on a listener
 * without translate_legacy (req is d's): answered UNSUPPORTED_VERSION
 * (or closed, for an Acks=0 Produce), one line saying what to enable.
 * Clients of Kafka 0.8/0.9 do not know error 35: for them the line is
 * the signal.  d->legacy_refusal: the session may hold the answer or the
 * close for a client retrying in a loop (legacy_refuse_delay_ms).
 */
static void
legacy_refuse(const struct kr_an_conn *c, const struct kr_an_request *r,
              struct kr_arena *a, struct kr_an_req *req, int16_t to,
              struct kr_an_decision *d)
{
    const char *ln = c->legacy->listener;
    char why[300];

    d->legacy = true;
    d->legacy_refusal = true;
    /* short enough for an Acks=0 close line whole (acks0_text) */
    snprintf(why, sizeof(why), "is below the brokers' versions (v%d+, "
             "KIP-896): translate_legacy = true on [listener%s%.32s] would "
             "translate it", to,
             ln != NULL && ln[0] != '\0' ? " " : "",
             ln != NULL ? ln : "");
    answer_error(c, r, a, r->m, req, KR_KERR_UNSUPPORTED_VERSION, why, d);
    if (d->outcome == KR_AN_ANSWER) {
        d->level = KR_LOG_NOTICE;
    }
}

/* What goes with any request that goes upstream. */
static void
forwarded(const struct kr_an_conn *c, const struct kr_an_request *r,
          struct kr_an_decision *d)
{
    struct kr_an_req *req = d->req;

    if (r->h->api_key == KR_API_SASL_HANDSHAKE && r->h->api_version == 0) {
        d->want_rsp_first = true;       /* raw SASL tokens may follow it */
    }
    if (!r->expect) {
        if (req != NULL && (req->v.flags & KR_VF_AUDIT)) {
            d->audit_now = kr_an_audit_line(c, &r->e, req, NULL, 0, 0, 0);
        }
        kr_an_req_free(req);
        d->req = NULL;
        return;
    }
    if (req != NULL && (req->v.flags & KR_VF_THROTTLE) &&
        req->v.throttle_enforce) {
        d->enforce_wait = true;
    }
}

void
kr_analyse_request(const struct kr_an_conn *c, const struct kr_an_request *r,
                   struct kr_arena *a, struct kr_an_decision *d)
{
    const struct kr_req_hdr *h = r->h;
    const struct kr_msg *m = r->m;
    struct kr_an_req *req;
    char why[256];
    enum kr_an_legacy_route route;
    bool refuse;
    int16_t to;
    int rc;

    memset(d, 0, sizeof(*d));
    if (m == NULL) {
        if (kr_analyse_legacy_route(c, h->api_key, h->api_version, &to) !=
            KR_AN_LEGACY_PASS) {
            legacy_undecodable(c, r, d);
        } else {
            undecodable(c, r, a, d);
        }
        return;
    }
    refuse = r->sasl_refuse;
    if (h->api_key == KR_API_SASL_HANDSHAKE) {
        const uint8_t *name;
        int32_t len;

        (void)kr_sasl_note_handshake(c->sasl, m, &name, &len);
        if (len >= 0) {
            kr_log_debug("[%s] SaslHandshake v%d Mechanism %.*s", c->name,
                         m->api_version, (int)(len > 40 ? 40 : len),
                         name != NULL ? (const char *)name : "");
        }
        refuse = h->api_version == 0 && c->sasl->mech == KR_SASL_OTHER;
    }
    if (refuse) {
        sasl_refuse(c, r, a, d);
        return;
    }
    req = kr_an_req_new();
    if (req == NULL) {
        close_now(d, KR_LOG_ERROR, "out of memory");
        return;
    }
    req->t_wall_us = kr_clock_wall_us();
    req->t_read_us = kr_clock_mono_us();
    req->req_bytes = KR_FRAME_PREFIX + r->flen;
    req->up_version = h->api_version;
    if (!kr_rule_eval(c->rs, r->slot, c->rmask, m, c->tmap, &req->v) ||
        req->v.flags == 0) {
        kr_an_req_free(req);
        req = NULL;
    } else {
        d->evaluated = true;
        d->verdict = req->v;
    }
    if (req != NULL && (req->v.flags & KR_VF_AUDIT)) {
        req->audit = kr_audit_capture(m, r->rb, c->tmap,
                                      req->v.audit_body);
    }
    if (h->api_key == KR_API_FETCH && *c->fetch_stale &&
        fetch_session_stale(c, m)) {
        if (req == NULL && (req = kr_an_req_from_header(r, NULL, 0, NULL, 0)) ==
                               NULL) {
            close_now(d, KR_LOG_ERROR, "out of memory");
            return;
        }
        /* FETCH_SESSION_ID_NOT_FOUND: the client starts a new session
           with a full Fetch naming every partition */
        answer_error(c, r, a, m, req, KR_KERR_FETCH_SESSION_ID_NOT_FOUND,
                     "continues a fetch session begun before a reload that "
                     "brought topic rules, which its partitions must meet",
                     d);
        return;
    }
    if (req != NULL && (req->v.flags & KR_VF_UNKNOWN_TOPIC_ID)) {
        /* the client refreshes its metadata, which krelay learns from */
        snprintf(why, sizeof(why), "names a TopicId krelay has not learned, "
                 "so [rule %.64s] cannot be checked",
                 kr_analyse_rule_name(c->rs, req->v.deny_rule));
        answer_error(c, r, a, m, req, KR_KERR_UNKNOWN_TOPIC_ID, why, d);
        return;
    }
    if (req != NULL && (req->v.flags & KR_VF_DENY)) {
        int16_t err = req->v.deny_error >= 0
                          ? req->v.deny_error
                          : kr_action_deny_error_for(m);

        snprintf(why, sizeof(why), "denied by [rule %.64s]",
                 kr_analyse_rule_name(c->rs, req->v.deny_rule));
        answer_error(c, r, a, m, req, err, why, d);
        return;
    }
    if (req != NULL && (req->v.flags & KR_VF_POLICY)) {
        char pwhy[120];

        pwhy[0] = '\0';
        rc = kr_action_produce_policy(m, r->rb, req->v.acks_mask,
                                      req->v.codec_mask, pwhy, sizeof(pwhy));
        if (rc != KR_OK) {
            int64_t acks = produce_acks(m);
            bool acks_bad = req->v.acks_mask != 0 &&
                            (acks < -1 || acks > 1 ||
                             !(req->v.acks_mask & (1u << (acks + 1))));
            /* what brokers answer: INVALID_REQUIRED_ACKS for a bad Acks,
               UNSUPPORTED_COMPRESSION_TYPE for a codec, as a client of
               h's version knows it (Produce v0-2: CORRUPT_MESSAGE, the
               legacy error table) */
            int16_t err = kr_legacy_error(
                h->api_key, h->api_version,
                acks_bad ? KR_KERR_INVALID_REQUIRED_ACKS
                         : KR_KERR_UNSUPPORTED_COMPRESSION_TYPE);

            snprintf(why, sizeof(why), "refused by the produce policy of "
                     "[rule %.40s] (%.90s)",
                     kr_analyse_rule_name(c->rs, req->v.policy_rule),
                     pwhy[0] ? pwhy : kr_status_str(rc));
            answer_error(c, r, a, m, req, err, why, d);
            return;
        }
    }
    if (req != NULL && (req->v.flags & KR_VF_CLAMP)) {
        clamp(c, r, a, req, d);
        if (d->outcome != KR_AN_FORWARD_TRANSLATED) {
            return;
        }
    } else if ((route = kr_analyse_legacy_route(c, h->api_key,
                                                h->api_version, &to)) !=
               KR_AN_LEGACY_PASS) {
        if (req == NULL &&
            (req = kr_an_req_from_header(r, NULL, 0, NULL, 0)) == NULL) {
            close_now(d, KR_LOG_ERROR, "out of memory");
            return;
        }
        if (route == KR_AN_LEGACY_REFUSE) {
            legacy_refuse(c, r, a, req, to, d);
            return;
        }
        legacy_up(c, r, a, req, to, d);
        if (d->outcome != KR_AN_FORWARD_TRANSLATED) {
            return;
        }
    } else {
        if (req != NULL) {
            req->actions |= KR_AUDIT_FORWARDED;
        }
        d->outcome = KR_AN_FORWARD;
        d->req = req;
    }
    forwarded(c, r, d);
}

/* ---- responses ----------------------------------------------------------- */

/* Throttle, fault and audit actions on a decoded response. */
static bool
rsp_actions(const struct kr_an_conn *c, const struct kr_inflight *e,
            struct kr_an_req *req, struct kr_msg *m, int64_t *delay_ms)
{
    const struct kr_verdict *v = &req->v;
    bool changed = false;

    if ((v->flags & KR_VF_ERROR) && chance(c, v->fault_error_p) &&
        kr_action_replace_errors(m, v->fault_error) > 0) {
        changed = true;
        req->actions |= KR_AUDIT_FAULTED;
    }
    if (v->flags & KR_VF_THROTTLE) {
        int32_t ms = v->throttle_ms, now = 0;

        if (v->throttle_jitter_ms > 0) {
            ms += (int32_t)(kr_analyse_rand01(c->rng) *
                            (v->throttle_jitter_ms + 1));
        }
        if (kr_action_throttle(m, ms, v->throttle_add, &now)) {
            changed = true;
            req->actions |= KR_AUDIT_THROTTLED;
        } else {
            now = ms;
        }
        if (v->throttle_enforce && now > 0) {
            /* KIP-219: newer clients back off themselves after the
               response; for older ones the broker holds the response */
            if (e->api_version >= kr_action_kip219_version(e->api_key)) {
                req->pause_ms = now;
            } else {
                *delay_ms += now;
            }
            req->actions |= KR_AUDIT_THROTTLED;
        }
    }
    return changed;
}

/*
 * The response the rules wanted decoded did not decode, and nothing
 * needs it translated (issue 13): it goes on unchanged.  Observing rules
 * fail open: its audit line carries decode_error (the request's, when
 * that one did not decode either) and the raw sizes; fault latency still
 * applies.  Throttle enforce holds it for the throttle time (with the add
 * operation the broker's own ThrottleTimeMs is unknown and counts as 0),
 * without rewriting it.  false on ENOMEM.
 */
static bool
rsp_undecodable(const struct kr_an_conn *c, const struct kr_inflight *e,
                struct kr_an_req *req, const char *why, uint64_t rsp_bytes,
                int64_t up_us, int64_t *delay_ms)
{
    const struct kr_verdict *v = &req->v;

    if (req->decode_error == NULL) {
        req->decode_error = strdup(why);
        if (req->decode_error == NULL) {
            return false;
        }
    }
    if ((v->flags & KR_VF_THROTTLE) && v->throttle_enforce) {
        int32_t ms = v->throttle_ms;

        if (v->throttle_jitter_ms > 0) {
            ms += (int32_t)(kr_analyse_rand01(c->rng) *
                            (v->throttle_jitter_ms + 1));
        }
        *delay_ms += ms;
        req->actions |= KR_AUDIT_THROTTLED;
    }
    if (v->flags & KR_VF_LATENCY) {
        *delay_ms += v->latency_ms;
    }
    if (*delay_ms > 0) {
        req->actions |= KR_AUDIT_DELAYED;
    }
    if (v->flags & KR_VF_AUDIT) {
        free(req->audit_line);
        req->audit_line = kr_an_audit_line(c, e, req, NULL, rsp_bytes, up_us,
                                           *delay_ms * 1000);
    }
    return true;
}

/*
 * issue 10: the response m (at req->up_version) to a request legacy
 * translation carried up, back to the client's version: Fetch records
 * converted down, the per-API mapping (kr_legacy_response_down), Produce
 * partitions krelay did not forward merged in with their error.  False
 * with d filled when it cannot be (closed, blaming the upstream).
 */
static bool
legacy_down(const struct kr_an_conn *c, const struct kr_inflight *e,
            struct kr_an_req *req, struct kr_msg *m, struct kr_arena *a,
            struct kr_an_rsp_decision *d)
{
    struct kr_an_legacy *lg = req->legacy;
    struct kr_codec_err ce;
    int rc = KR_OK;

    d->legacy = true;
    if (e->api_key == KR_API_FETCH &&
        legacy_crosses_records(e->api_key, e->api_version, req->up_version)) {
        if (c->rsp_rb == NULL) {
            rc = KR_ERROR;
        } else {
            rc = kr_legacy_fetch_down(a, m->body, c->rsp_rb, e->api_version,
                                      &lg->parts, &lg->rec, &d->legacy_st,
                                      &d->legacy_bad);
        }
        if (rc != KR_OK) {
            d->outcome = rc == KR_ENOMEM ? KR_AN_RSP_CLOSE : KR_AN_CLOSE_UP;
            d->level = KR_LOG_WARN;
            snprintf(d->text, sizeof(d->text), "cannot convert the records "
                     "of the Fetch v%d response to v%d: %s",
                     req->up_version, e->api_version, kr_status_str(rc));
            return false;
        }
    }
    if (e->api_key == KR_API_PRODUCE && lg->splits != NULL) {
        unsigned nerr = 0;

        /* what the rounds ahead of it answered, before the errors are
           mapped to the client's version (each was checked before the
           next went: the session sends the client's request only after
           rounds without an error, so none is expected here) */
        rc = kr_legacy_split_merge(m->body, lg->splits, &nerr);
        if (rc == KR_OK && nerr > 0) {
            kr_log_info("[%s] Produce v%d CorrelationId %d: %u "
                        "partition%s whose records went up in several "
                        "Produce requests failed in an earlier one: the "
                        "client gets that error", c->name,
                        e->api_version, e->correlation_id, nerr,
                        nerr == 1 ? "" : "s");
        }
    }
    memset(&ce, 0, sizeof(ce));
    if (rc == KR_OK) {
        rc = kr_legacy_response_down(a, m, e->api_version, &lg->memo, &ce);
    }
    if (rc == KR_OK && e->api_key == KR_API_PRODUCE && lg->parts.n > 0) {
        legacy_parts_map(&lg->parts, e->api_version);
        rc = kr_legacy_produce_merge(a, m->body, &lg->parts);
    }
    if (rc != KR_OK) {
        d->outcome = rc == KR_ENOMEM ? KR_AN_RSP_CLOSE : KR_AN_CLOSE_UP;
        d->level = KR_LOG_WARN;
        snprintf(d->text, sizeof(d->text), "cannot translate %s v%d "
                 "response back to v%d (translate_legacy): %s at %s",
                 api_name(e->api_key), req->up_version, e->api_version,
                 ce.msg[0] ? ce.msg : kr_status_str(rc), ce.path);
        return false;
    }
    return true;
}

void
kr_analyse_rounds_failed(const struct kr_an_conn *c,
                         const struct kr_inflight *e, struct kr_an_req *req,
                         int16_t error, const char *why, struct kr_arena *a,
                         struct kr_an_rsp_decision *d)
{
    struct kr_codec_err ce;
    struct kr_msg rsp;
    int rc = KR_EPROTO;

    memset(d, 0, sizeof(*d));
    memset(&ce, 0, sizeof(ce));
    d->legacy = true;
    if (req->legacy != NULL && e->api_key == KR_API_PRODUCE) {
        rc = legacy_produce_rsp(a, e->api_version, e->correlation_id,
                                req->legacy, error, &rsp);
    }
    if (rc == KR_OK) {
        rc = kr_encode_msg(&rsp, &d->w, &ce);
    }
    if (rc != KR_OK || d->w.failed || d->w.nrecs > 0) {
        kr_wbuf_free(&d->w);
        d->outcome = KR_AN_RSP_CLOSE;
        d->level = KR_LOG_ERROR;
        snprintf(d->text, sizeof(d->text), "cannot build the %s v%d "
                 "response to CorrelationId %d that krelay answers itself "
                 "(a Produce of its own ahead of it failed): %s%s%s",
                 api_name(e->api_key), e->api_version, e->correlation_id,
                 ce.msg[0] ? ce.msg : kr_status_str(rc),
                 ce.path[0] ? " at " : "", ce.path);
        return;
    }
    d->outcome = KR_AN_DELIVER_CHANGED;
    d->rsp_bytes = KR_FRAME_PREFIX + d->w.len;
    req->actions |= KR_AUDIT_DENIED;
    if (why != NULL) {
        free(req->note);
        req->note = strdup(why);        /* NULL: no note, nothing worse */
    }
    if (req->v.flags & KR_VF_AUDIT) {
        free(req->audit_line);
        req->audit_line = kr_an_audit_line(c, e, req, &rsp, d->rsp_bytes, 0,
                                           0);
    }
}

bool
kr_analyse_rsp_scan_only(const struct kr_inflight *e,
                         const struct kr_an_req *req)
{
    return req != NULL &&
           (e->api_key == KR_API_FETCH || e->api_key == KR_API_PRODUCE) &&
           (req->v.flags & KR_VF_AUDIT) && !req->v.audit_body &&
           !(req->v.flags & (KR_VF_THROTTLE | KR_VF_ERROR | KR_VF_LATENCY |
                             KR_VF_CLOSE)) &&
           req->up_version == e->api_version;
}

bool
kr_analyse_rsp_may_stream(const struct kr_inflight *e,
                          const struct kr_an_req *req)
{
    return req == NULL || req->up_version == e->api_version;
}

void
kr_analyse_response(const struct kr_an_conn *c, const struct kr_inflight *e,
                    struct kr_an_req *req, struct kr_msg *m,
                    const char *decode_error, uint64_t rsp_bytes,
                    int64_t up_us, struct kr_arena *a,
                    struct kr_an_rsp_decision *d)
{
    struct kr_codec_err ce;
    bool changed = false;
    int rc;

    memset(d, 0, sizeof(*d));
    d->rsp_bytes = rsp_bytes;
    if (m == NULL && decode_error != NULL) {
        /* issue 13: observing rules fail open */
        if (!rsp_undecodable(c, e, req, decode_error, rsp_bytes, up_us,
                             &d->delay_ms)) {
            d->outcome = KR_AN_RSP_CLOSE;
            d->level = KR_LOG_ERROR;
            snprintf(d->text, sizeof(d->text), "out of memory");
            return;
        }
    } else if (m != NULL) {
        memset(&ce, 0, sizeof(ce));
        if (req->legacy != NULL && req->up_version != e->api_version) {
            if (!legacy_down(c, e, req, m, a, d)) {
                return;
            }
            changed = true;
        } else if (req->up_version != e->api_version) {
            rc = kr_translate_msg(a, m, e->api_version, &ce);
            if (rc != KR_OK) {
                d->outcome = KR_AN_CLOSE_UP;
                d->level = KR_LOG_WARN;
                snprintf(d->text, sizeof(d->text), "cannot translate %s v%d "
                         "response back to v%d: %s at %s",
                         api_name(e->api_key), req->up_version,
                         e->api_version, ce.msg, ce.path);
                return;
            }
            changed = true;
        }
        if (rsp_actions(c, e, req, m, &d->delay_ms)) {
            changed = true;
        }
        if (changed) {
            rc = kr_encode_msg(m, &d->w, &ce);
            if (rc != KR_OK || d->w.failed) {
                kr_wbuf_free(&d->w);
                d->outcome = KR_AN_CLOSE_UP;
                d->level = KR_LOG_ERROR;
                snprintf(d->text, sizeof(d->text), "cannot encode %s v%d "
                         "response: %s at %s", api_name(e->api_key),
                         e->api_version, ce.msg, ce.path);
                return;
            }
            d->rsp_bytes = KR_FRAME_PREFIX + d->w.total + m->trailing;
            d->outcome = KR_AN_DELIVER_CHANGED;
        }
        if (req->v.flags & KR_VF_LATENCY) {
            d->delay_ms += req->v.latency_ms;
        }
        if (d->delay_ms > 0) {
            req->actions |= KR_AUDIT_DELAYED;
        }
        if (req->v.flags & KR_VF_AUDIT) {
            bool rewritten = false;

            /* what the client gets: its broker addresses are krelay's
               (the frame itself is rewritten by the caller) */
            if (c->rewrite_tree != NULL &&
                c->rewrite_tree(c->rewrite_arg, e->api_key, e->api_version,
                                m->body, a, &rewritten) == KR_OK &&
                rewritten) {
                req->actions |= KR_AUDIT_REWRITTEN;
            }
            kr_audit_note_response(req->audit, m, c->tmap);
            /* the tree borrows from the payload: formatted now */
            free(req->audit_line);
            req->audit_line = kr_an_audit_line(c, e, req, m, d->rsp_bytes,
                                               up_us, d->delay_ms * 1000);
        }
    } else if (req->v.flags & KR_VF_LATENCY) {
        d->delay_ms += req->v.latency_ms;
    }
    d->fault_close = (req->v.flags & KR_VF_CLOSE) &&
                     chance(c, req->v.fault_close_p);
    if (d->delay_ms > 0) {
        req->actions |= KR_AUDIT_DELAYED;
    }
}
