/*
 * kr_session_rules.c - the rule pipeline's outcomes applied to one
 * session (the session module, src/kr_session_int.h).
 *
 * A frame the rules touch is taken whole, decoded where libevent holds it
 * (kr_evcodec), and handed to the pipeline (kr_analyse: pure, no event
 * loop); its named outcome is carried out here: forwarded (re-encoded
 * with records moved), answered locally, refused, closed after the
 * responses owed.  Responses of such requests are held whole, decided on
 * (kr_analyse_response), rewritten (kr_rewrite) and kept in their
 * request's kr_rq until their turn and release time (flush_ready, the
 * rtimer).  Audit lines, the connection's view of its config after a
 * reload (conf_refresh) and the ApiVersions clamps live here too.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "kr_action.h"
#include "kr_analyse.h"
#include "kr_api_keys.h"
#include "kr_audit.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_conn.h"
#include "kr_evcodec.h"
#include "kr_frame.h"
#include "kr_inflight.h"
#include "kr_kerr.h"
#include "kr_listener.h"
#include "kr_log.h"
#include "kr_rewrite.h"
#include "kr_sasl.h"
#include "kr_sasl_server.h"
#include "kr_scan.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_topics.h"
#include "kr_translate.h"
#include "kr_upstream.h"
#include "kr_broker_versions.h"
#include "kr_session_int.h"


static int apply_request(struct kr_session *s, struct kr_nreq *nr,
                         struct kr_an_decision *d);

/* ---- rules: shared helpers --------------------------------------------- */

/*
 * A session's record of a request the rules touched, around rule state a
 * (taken; NULL: a new one).  NULL on ENOMEM (a is freed).
 */
struct kr_rq *
kr_s_rq_wrap(struct kr_an_req *a)
{
    struct kr_rq *rq = calloc(1, sizeof(*rq));

    if (rq == NULL || (rq->a = a != NULL ? a : kr_an_req_new()) == NULL) {
        kr_an_req_free(rq != NULL ? rq->a : a);
        free(rq);
        return NULL;
    }
    return rq;
}

/* s's buffer for the request frame the rules decide, made at the first
   (an idle connection, or one whose requests all pass cut-through, holds
   none); NULL on ENOMEM. */
static struct evbuffer *
rq_payload(struct kr_session *s)
{
    if (s->rq_payload == NULL) {
        s->rq_payload = evbuffer_new();
    }
    return s->rq_payload;
}

/* rq's response buffer, made when first needed (most entries carry none:
   a response that streams by, one that never comes); NULL on ENOMEM. */
static struct evbuffer *
rq_out(struct kr_rq *rq)
{
    if (rq->out == NULL) {
        rq->out = evbuffer_new();
    }
    return rq->out;
}

void
kr_s_rq_free(struct kr_rq *rq)
{
    if (rq == NULL) {
        return;
    }
    kr_s_sw_put(rq->sw);
    kr_an_req_free(rq->a);
    if (rq->out != NULL) {
        evbuffer_free(rq->out);
    }
    free(rq);
}

static const char *
rule_name(const struct kr_session *s, int i)
{
    return kr_analyse_rule_name(s->cref->conf->ruleset, i);
}

static void
add_prefix(struct evbuffer *out, size_t len)
{
    uint8_t p[4];

    kr_frame_put_size(p, len);
    evbuffer_add(out, p, 4);
}

/* The session's audit sink, when this connection is audited at all. */
static struct kr_audit *
audit_sink(const struct kr_session *s)
{
    return *s->host->audit;
}

static void
audit_put(struct kr_session *s, char *line)
{
    struct kr_audit *au = audit_sink(s);

    if (line == NULL) {
        return;
    }
    if (au != NULL && !kr_audit_write(au, line, strlen(line)) &&
        KR_LOG_WARN <= kr_log_level_cur) {
        static struct kr_ratelimit rl;
        char about[128];

        kr_audit_line_about(line, about, sizeof(about));
        kr_log_write_rl(&rl, 1, KR_LOG_WARN, "[%s] audit: %s was dropped "
                        "(queue full or target not writable): %" PRIu64
                        " dropped so far", s->name, about,
                        kr_audit_dropped(au));
    }
    free(line);
}

/*
 * The listener's name in audit lines and /connections: its [listener
 * NAME], or "default" for the unnamed one (whose log prefix has no name:
 * "> bootstrap").
 */
const char *
kr_session_listener_name(const struct kr_session *s)
{
    return s->lc != NULL && s->lc->name != NULL && s->lc->name[0] != '\0'
               ? s->lc->name
               : "default";
}

struct kr_s_sw *
kr_s_sw_ref(struct kr_s_sw *sw)
{
    if (sw != NULL) {
        sw->refs++;
    }
    return sw;
}

void
kr_s_sw_put(struct kr_s_sw *sw)
{
    if (sw != NULL && --sw->refs == 0) {
        free(sw);
    }
}

/* The client's software names sw (NULL: none) in p. */
static void
peer_sw(struct kr_audit_peer *p, const struct kr_s_sw *sw)
{
    p->client_sw_name = sw != NULL ? sw->name : NULL;
    p->client_sw_version = sw != NULL ? sw->version : NULL;
}

/* Who and where, for this connection's audit lines (doc/audit.md); the
   client's software as of now (a request's line: as of its reading,
   peer_sw). */
static void
audit_peer(struct kr_session *s, struct kr_audit_peer *p)
{
    memset(p, 0, sizeof(*p));
    if (s->audit_memo == NULL && audit_sink(s) != NULL) {
        s->audit_memo = kr_audit_memo_new();     /* NULL: none, same lines */
    }
    p->memo = s->audit_memo;
    p->instance = kr_audit_instance(s->cref->conf->audit.instance);
    p->conn_id = s->conn_id;
    p->listener = kr_session_listener_name(s);
    p->client_addr = s->peer_host;
    p->client_port = s->peer_port;
    if (s->proxied) {
        p->proxy_addr = s->proxy_host;
        p->proxy_port = s->proxy_port;
    }
    p->route = s->node_id == KR_NODE_BOOTSTRAP ? "bootstrap" : "node";
    p->node_id = s->node_id;
    p->upstream_addr = s->up_named ? s->upname : NULL;
    peer_sw(p, s->sw);
    p->principal = s->principal;
    /* SASL's (issue 9): rules and request lines never see a claimed one */
    if (s->principal_unknown) {
        p->principal_state = kr_sasl_pstate_name(KR_SASL_PS_UNKNOWN);
    } else if (s->sasl.authenticated && s->principal != NULL) {
        p->principal_state = kr_sasl_pstate_name(KR_SASL_PS_VERIFIED);
    }
}

/* The cause label of "closes" (kr_stats.h), as close lines name it. */
static const char *const close_causes[KR_CLOSE__N] = {
#define KR_CLOSE_NAME_(id, label) label,
    KR_CLOSE_CAUSES(KR_CLOSE_NAME_)
#undef KR_CLOSE_NAME_
};

void
kr_s_audit_conn(struct kr_session *s, const char *event,
                enum kr_close_cause cause, const char *reason)
{
    struct kr_audit_conn c;

    memset(&c, 0, sizeof(c));
    c.event = event;
    c.time_us = kr_clock_wall_us();
    audit_peer(s, &c.peer);
    c.client_id = s->client_id[0] ? s->client_id : NULL;
    c.client_id_cut = s->client_id_cut;
    if (reason != NULL) {
        c.cause = (unsigned)cause < KR_CLOSE__N ? close_causes[cause]
                                                : "other";
        c.reason = reason;
        c.bytes_from_client = s->client.bytes_in;
        c.bytes_to_client = s->client.bytes_out;
        c.requests = s->nrequests;
        c.duration_us = kr_clock_mono_us() - s->started_us;
    }
    audit_put(s, kr_audit_format_conn(&c));
}

/* Copy v (a decoded string, maybe null) into out (len bytes, cut). */
static void
sw_copy(const struct kr_val *v, char *out, size_t len)
{
    size_t n;

    out[0] = '\0';
    if (v == NULL || !v->present || v->is_null || v->u.s.len <= 0 ||
        v->u.s.p == NULL) {
        return;
    }
    n = (size_t)v->u.s.len < len - 1 ? (size_t)v->u.s.len : len - 1;
    memcpy(out, v->u.s.p, n);
    out[n] = '\0';
    if (memchr(out, '\0', n) != NULL) {
        out[0] = '\0';                 /* not a name: keep none */
    }
}

void
kr_s_note_client_software(struct kr_session *s, struct evbuffer *in,
                          size_t off, size_t flen)
{
    uint8_t buf[KR_SW_FRAME_MAX];
    struct evbuffer_ptr pos;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_s_sw *sw;
    struct iovec iov;
    struct kr_rbuf rb;
    struct kr_msg m;

    if (flen > sizeof(buf)) {
        /* not read (no client's names are that long): unknown from now
           on, rather than an older request's */
        kr_s_sw_put(s->sw);
        s->sw = NULL;
        return;
    }
    if (evbuffer_ptr_set(in, &pos, off, EVBUFFER_PTR_SET) != 0 ||
        evbuffer_copyout_from(in, &pos, buf, flen) != (ev_ssize_t)flen) {
        return;
    }
    kr_rbuf_init_flat(&rb, &iov, buf, flen);
    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    if (kr_decode_request(&arena, &rb, 0, &m, &ce) == KR_OK &&
        m.api_key == KR_API_API_VERSIONS) {
        /* a new record: requests read before keep theirs */
        sw = calloc(1, sizeof(*sw));
        if (sw != NULL) {
            sw->refs = 1;
            sw_copy(kr_node_get_id(m.body, KR_FIELD_CLIENT_SOFTWARE_NAME),
                    sw->name, sizeof(sw->name));
            sw_copy(kr_node_get_id(m.body, KR_FIELD_CLIENT_SOFTWARE_VERSION),
                    sw->version, sizeof(sw->version));
        }
        kr_s_sw_put(s->sw);
        s->sw = sw;                     /* out of memory: none known */
    }
    kr_arena_free(&arena);
}

/* Is this connection audited (open/close lines)? */
void
kr_s_audit_open(struct kr_session *s)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;

    if (!s->audited && audit_sink(s) != NULL && rs != NULL &&
        kr_rule_mask_any(&rs->audit_mask, &s->rmask)) {
        s->audited = 1;
        kr_s_audit_conn(s, "open", KR_CLOSE_OTHER, NULL);
    }
}

/*
 * Follow a reload: requests read from now on use the worker's current
 * config (rules, limits, advertised host).  The old one is released when
 * its last user lets go.
 */
void
kr_s_conf_refresh(struct kr_session *s)
{
    struct kr_conf_ref *cur = *s->host->cref;

    if (s->cref == cur) {
        return;
    }
    kr_conf_ref_put(s->cref);
    s->cref = kr_conf_ref_get(cur);
    s->lc = s->g->lc;
    s->rw.advertised_host = s->lc->advertised_host;
    s->rw.broker_port_base = s->lc->broker_port_base;
    s->rw.node_id_min = s->lc->node_id_min;
    s->rw.node_id_max = s->lc->node_id_max;
    s->rw.sni = s->lc->sni;
    s->rw.legacy = s->lc->translate_legacy ? kr_bv_legacy_ranges() : NULL;
    if (s->sasl_srv != NULL) {
        /* issue 9: the new generation's settings (none: no longer
           terminated; a SASL step then closes) */
        s->sasl_srv->cfg = s->lc->sasl_srv;
    }
    kr_s_conn_mask(s);
    s->rw.clamps = NULL;
    s->rw.pass_unknown_apis = false;
    s->rw.enforced = NULL;
    s->rw.enforced_unknown = false;
    s->fetch_stale = 1;
    kr_s_audit_open(s);
}

void
kr_s_conn_mask(struct kr_session *s)
{
    if (s->principal_unknown) {
        kr_rule_conn_mask_unknown(s->cref->conf->ruleset, s->lc->name,
                                  (const struct sockaddr *)&s->peer,
                                  &s->rmask);
    } else {
        kr_rule_conn_mask(s->cref->conf->ruleset, s->lc->name,
                          (const struct sockaddr *)&s->peer, s->principal,
                          &s->rmask);
    }
}

/* ---- SASL passthrough (issue 9) ----------------------------------------- */

/*
 * The authentication line of the exchange that just ended, when a rule
 * could audit the connection: with the principal it ends with (the
 * rules' mask for it, or the claimed one's: a rule auditing bob audits
 * bob's failed logins too).
 */
static void
sasl_audit(struct kr_session *s)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;
    const struct kr_sasl *sa = &s->sasl;
    struct kr_rule_mask m;
    struct kr_audit_auth a;

    if (audit_sink(s) == NULL || rs == NULL) {
        return;
    }
    if (sa->pstate == KR_SASL_PS_UNKNOWN) {
        kr_rule_conn_mask_unknown(rs, s->lc->name,
                                  (const struct sockaddr *)&s->peer, &m);
    } else {
        kr_rule_conn_mask(rs, s->lc->name, (const struct sockaddr *)&s->peer,
                          sa->principal, &m);
    }
    if (!kr_rule_mask_any(&rs->audit_mask, &m) &&
        !kr_rule_mask_any(&rs->audit_mask, &s->rmask)) {
        return;
    }
    memset(&a, 0, sizeof(a));
    a.time_us = kr_clock_wall_us();
    audit_peer(s, &a.peer);
    a.peer.principal = sa->principal;
    a.peer.principal_state = sa->pstate != KR_SASL_PS_NONE
                                 ? kr_sasl_pstate_name(sa->pstate)
                                 : NULL;
    a.client_id = s->client_id[0] ? s->client_id : NULL;
    a.client_id_cut = s->client_id_cut;
    a.mechanism = sa->mech_name;
    a.outcome = kr_sasl_auth_name(sa->auth);
    a.error_code = sa->auth == KR_SASL_AUTH_FAILED ? sa->error_code : -1;
    a.reason = sa->auth == KR_SASL_AUTH_FAILED ? sa->reason : NULL;
    a.reauth = sa->reauth;
    a.handshake_version = sa->handshake_version;
    a.authenticate_version = sa->authenticate_version;
    a.session_lifetime_ms = sa->auth == KR_SASL_AUTH_SUCCEEDED
                                ? sa->session_lifetime_ms
                                : -1;
    audit_put(s, kr_audit_format_auth(&a));
}

void
kr_s_sasl_audit(struct kr_session *s)
{
    sasl_audit(s);
}

int
kr_s_sasl_outcome(struct kr_session *s, enum kr_sasl_answer ans)
{
    struct kr_sasl *sa = &s->sasl;
    char life[48] = "", code[96] = "", behind[64] = "";

    if (ans == KR_SASL_ANS_CONTINUE) {
        return 0;
    }
    if (ans == KR_SASL_ANS_FAILURE) {
        size_t held = evbuffer_get_length(s->client.in);

        if (s->closing) {
            return 0;                   /* said once */
        }
        if (sa->error_code >= 0) {
            char n[64];

            snprintf(code, sizeof(code), ": ErrorCode %s",
                     kr_kerr_format(sa->error_code, n, sizeof(n)));
        }
        sasl_audit(s);
        KR_STAT_INC(s->host->stats, sasl_failures);
        if (held > 0) {
            snprintf(behind, sizeof(behind), ": %zu bytes the client sent "
                     "behind it dropped", held);
        }
        return kr_s_close_after_owed(s, KR_LOG_NOTICE, "SASL %s "
                                     "%sauthentication failed for %s "
                                     "(%s)%s; closing after the answer%s",
                                     sa->mech_name,
                                     sa->reauth ? "re-" : "",
                                     sa->principal != NULL ? sa->principal
                                                           : "a principal "
                                                             "krelay cannot "
                                                             "know",
                                     kr_sasl_pstate_name(sa->pstate), code,
                                     behind) < 0
                   ? -1
                   : 0;
    }
    /* success: the principal is the broker's now */
    if (!sa->reauth) {
        char *p = NULL;

        if (sa->pstate == KR_SASL_PS_VERIFIED &&
            (p = strdup(sa->principal)) == NULL) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        free(s->principal);             /* SASL's wins over mTLS's */
        s->principal = p;
        s->principal_unknown = sa->pstate != KR_SASL_PS_VERIFIED;
        kr_s_conn_mask(s);
    }
    if (sa->session_lifetime_ms > 0) {
        snprintf(life, sizeof(life), ", session lifetime %" PRId64 " ms",
                 sa->session_lifetime_ms);
    }
    kr_log_info("[%s] SASL %s %sauthentication succeeded: %s (%s)%s", s->name,
                sa->mech_name, sa->reauth ? "re-" : "",
                s->principal != NULL ? s->principal : "principal unknown",
                kr_sasl_pstate_name(sa->pstate), life);
    KR_STAT_INC(s->host->stats, sasl_successes);
    kr_s_audit_open(s);
    sasl_audit(s);
    return 0;
}

/* ---- rules: the pipeline (kr_analyse.h) ---------------------------------- */

static bool
broker_range(void *arg, int16_t key, int16_t *min, int16_t *max)
{
    return kr_upstream_api_range(arg, key, min, max);
}

static int
rewrite_tree(void *arg, int16_t key, int16_t ver, struct kr_node *body,
             struct kr_arena *arena, bool *changed)
{
    struct kr_rewrite_result rr;
    int rc = kr_rewrite_tree(arg, key, ver, body, arena, &rr);

    *changed = rc == KR_OK && rr.changed;
    return rc;
}

/* What the rule pipeline knows of this connection, as of now. */
static const struct kr_an_legacy_conf *legacy_conf(struct kr_session *s);

static void
an_conn(struct kr_session *s, struct kr_an_conn *c)
{
    memset(c, 0, sizeof(*c));
    c->rs = s->cref->conf->ruleset;
    c->rmask = &s->rmask;
    c->tmap = s->rw.upstream != NULL ? kr_upstream_topics(s->rw.upstream)
                                     : NULL;
    c->broker_av = s->av;
    c->broker_range = s->rw.upstream != NULL ? broker_range : NULL;
    c->broker_arg = s->rw.upstream;
    c->rewrite_tree = rewrite_tree;
    c->rewrite_arg = &s->rw;
    c->sasl = &s->sasl;
    c->fetch_stale = &s->fetch_stale;
    c->rng = &s->rng;
    c->legacy_turn = &s->legacy_turn;
    c->audit_sink = audit_sink(s) != NULL;
    c->name = s->name;
    audit_peer(s, &c->peer);
    c->legacy = legacy_conf(s);
}

/*
 * issue 10: legacy translation's counters for a request (h; went up:
 * translated, else answered or closed) or a response (h NULL), its
 * records converted (st) and partitions given an error (bad).
 */
static void
legacy_count(struct kr_session *s, const struct kr_req_hdr *h, bool up,
             const struct kr_records_stats *st, unsigned bad)
{
    struct kr_stats *t = s->host->stats;

    if (h != NULL && up) {
        KR_STAT_INC_L(t, legacy_translated,
                      kr_stats_api_cell(h->api_key, h->api_version));
    } else if (h != NULL) {
        KR_STAT_INC(t, legacy_refused);
    }
    KR_STAT_ADD(t, legacy_records_in_bytes, st->bytes_in);
    KR_STAT_ADD(t, legacy_records_out_bytes, st->bytes_out);
    KR_STAT_ADD(t, legacy_zstd_recompressed, st->zstd_recompressed);
    KR_STAT_ADD(t, legacy_partitions_corrupt, bad);
}

/*
 * issue 10: the listener's legacy translation, as the pipeline takes it
 * (kr_an_conn.legacy), in s->legacy_conf; NULL only when out of memory
 * (then nothing is translated or refused).
 */
static const struct kr_an_legacy_conf *
legacy_conf(struct kr_session *s)
{
    struct kr_an_legacy_conf *lc;

    if (s->legacy_conf == NULL &&
        (s->legacy_conf = calloc(1, sizeof(*s->legacy_conf))) == NULL) {
        return NULL;            /* out of memory: nothing translated */
    }
    lc = s->legacy_conf;
    lc->on = s->lc->translate_legacy;
    lc->listener = s->lc->name;
    lc->rec.max_batch_bytes = (size_t)s->lc->legacy_batch_max_bytes;
    lc->rec.max_uncompressed = (size_t)s->lc->max_frame_bytes;
    lc->rec.zstd = (enum kr_legacy_zstd)s->lc->legacy_zstd;
    lc->fetch_max_bytes = s->lc->legacy_fetch_max_bytes;
    lc->profile = kr_s_upconf(s) != NULL
                      ? (int)kr_s_upconf(s)->broker_profile
                      : 0;
    return lc;
}

enum kr_an_legacy_route
kr_s_legacy_route(struct kr_session *s, int16_t key, int16_t ver)
{
    struct kr_an_conn c;
    int16_t to;

    if (kr_api_min_kafka4(kr_api_get(key), NULL) <= ver) {
        return KR_AN_LEGACY_PASS;       /* every modern request */
    }
    memset(&c, 0, sizeof(c));
    c.broker_av = s->av;
    c.broker_range = s->rw.upstream != NULL ? broker_range : NULL;
    c.broker_arg = s->rw.upstream;
    c.legacy = legacy_conf(s);
    return kr_analyse_legacy_route(&c, key, ver, &to);
}

/* The audit line of entry e (see kr_an_audit_line). */
static char *
audit_line(struct kr_session *s, const struct kr_inflight *e,
           const struct kr_rq *rq, const struct kr_msg *rsp,
           uint64_t rsp_bytes, int64_t upstream_us, int64_t extra_us)
{
    struct kr_an_conn c;

    an_conn(s, &c);
    peer_sw(&c.peer, rq->sw);
    return kr_an_audit_line(&c, e, rq->a, rsp, rsp_bytes, upstream_us,
                            extra_us);
}

/* ---- rules: ordered output of built responses --------------------------- */

struct kr_inflight *
kr_s_fifo_at(struct kr_session *s, uint32_t i)
{
    return kr_inflight_at(&s->fifo, i);
}

/* The oldest entry still waiting for its upstream response. */
struct kr_inflight *
kr_s_fifo_waiting(struct kr_session *s, uint32_t *idx)
{
    uint32_t i;

    *idx = 0;
    if (s->nready == 0) {
        return kr_s_fifo_head(s);
    }
    for (i = 0; i < s->fifo.len; i++) {
        struct kr_inflight *e = kr_s_fifo_at(s, i);

        if (e->rq == NULL || !e->rq->ready) {
            *idx = i;
            return e;
        }
    }
    return NULL;
}

static void
rtimer_arm(struct kr_session *s)
{
    uint32_t i;
    struct kr_inflight *e = kr_s_fifo_first(s, &i);
    int64_t at = 0, now;
    struct timeval tv;

    if (s->dead) {
        return;
    }
    if (e != NULL && e->rq != NULL && e->rq->ready) {
        at = e->rq->release_ms;
    }
    if (s->paused_until_ms > 0 && (at == 0 || s->paused_until_ms < at)) {
        at = s->paused_until_ms;
    }
    if (at == 0 || (s->rtimer_at != 0 && s->rtimer_at <= at)) {
        return;
    }
    if (s->rtimer == NULL &&
        (s->rtimer = evtimer_new(s->host->base, kr_s_rtimer_cb, s)) ==
            NULL) {
        /* made at the first delayed response (most connections have
           none) */
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    now = kr_clock_timer_ms();
    at = at > now ? at : now;
    tv.tv_sec = (time_t)((at - now) / 1000);
    tv.tv_usec = (suseconds_t)((at - now) % 1000) * 1000;
    event_add(s->rtimer, &tv);
    s->rtimer_at = at;
}

/*
 * Move built responses at the head of the FIFO to client.out, in order,
 * as their release time comes.  Only between whole frames (rsp_remain 0).
 * Optional entries (Acks=0) ahead of one stay: the client expects
 * nothing for them.
 */
void
kr_s_flush_ready(struct kr_session *s)
{
    struct kr_inflight *e;
    int64_t now = kr_clock_timer_ms();
    uint32_t i;

    while (!s->dead && !kr_s_rsp_mid(s) && s->dn.queued == 0 &&
           (e = kr_s_fifo_first(s, &i)) != NULL && e->rq != NULL &&
           e->rq->ready) {
        struct kr_rq *rq = e->rq;
        size_t n = rq->out != NULL ? evbuffer_get_length(rq->out) : 0;

        if (rq->release_ms > now) {
            break;
        }
        if (rq->out != NULL) {
            evbuffer_add_buffer(s->client.out, rq->out);
        }
        KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, n);
        if (rq->a->audit_line != NULL) {
            audit_put(s, rq->a->audit_line);
            rq->a->audit_line = NULL;
        }
        if (rq->a->pause_ms > 0) {
            int64_t until = now + rq->a->pause_ms;

            if (until > s->paused_until_ms) {
                s->paused_until_ms = until;
            }
        }
        if ((rq->a->v.flags & KR_VF_THROTTLE) && rq->a->v.throttle_enforce) {
            s->enforce_wait = 0;
        }
        s->nready--;
        kr_s_rq_free(rq);
        e->rq = NULL;
        /* answered, by the upstream or by krelay: counted as a response
           that goes straight through is when matched (kr_s_fifo_pop_at;
           here with the time a rule held it) */
        kr_s_count_answered(s, e, now - e->sent_ms);
        kr_s_fifo_remove(s, i);
    }
    if (s->paused_until_ms != 0 && now >= s->paused_until_ms) {
        s->paused_until_ms = 0;
    }
    rtimer_arm(s);
}

int
kr_s_release_held(struct kr_session *s)
{
    int64_t now = kr_clock_timer_ms();
    unsigned n = 0;
    uint32_t i;

    if (s->dead) {
        return -1;
    }
    for (i = 0; i < s->fifo.len; i++) {
        struct kr_rq *rq = kr_s_fifo_at(s, i)->rq;

        if (rq != NULL && rq->ready && rq->drain_releases &&
            rq->release_ms > now) {
            rq->release_ms = now;
            n++;
        }
    }
    if (n == 0) {
        return 0;
    }
    kr_s_flush_ready(s);
    return kr_s_conn_flush(s, &s->client);
}

/* Requests held back by a throttle go on once it is over. */
int
kr_s_resume_requests(struct kr_session *s)
{
    if (s->dead) {
        return -1;
    }
    if (s->req_blocked &&
        kr_s_fifo_inflight(s) < (uint64_t)s->lc->max_inflight) {
        /* a slot freed by a built response going out, not by an upstream
           read (which would have unblocked them): a held answer's timer
           brings us here (process_requests blocks again when it must) */
        s->req_blocked = 0;
    }
    if (s->enforce_wait || s->req_blocked ||
        (s->paused_until_ms != 0 && kr_clock_timer_ms() < s->paused_until_ms) ||
        evbuffer_get_length(s->client.in) == 0) {
        return 0;
    }
    if (kr_s_process_requests(s) != 0 || kr_s_conn_flush(s, &s->up) != 0 ||
        kr_s_conn_flush(s, &s->client) != 0) {
        return -1;
    }
    return 0;
}

void
kr_s_rtimer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;

    (void)fd;
    (void)what;
    s->depth++;
    s->rtimer_at = 0;
    kr_s_flush_ready(s);
    if (kr_s_conn_flush(s, &s->client) == 0 && kr_s_resume_requests(s) == 0) {
        kr_s_update_io(s);
        kr_s_arm_timer(s);
    }
    kr_s_leave(s);
}

/* The pipeline's view of request nr (cid: its own ClientId, or NULL). */
void
kr_s_an_request(const struct kr_nreq *nr, const char *cid, size_t cidlen,
                struct kr_an_request *r)
{
    memset(r, 0, sizeof(*r));
    r->h = &nr->h;
    r->e = nr->e;
    r->flen = nr->flen;
    r->expect = nr->expect;
    r->slot = nr->slot;
    r->sasl_refuse = nr->sasl_refuse;
    r->cid = cid;
    r->cidlen = cidlen;
}

/* ---- rules: requests krelay cannot decode (issue 13) ------------------- */

/*
 * The request's own ClientId, whole (kr_req_hdr keeps a printable
 * prefix only): the rules match what each request carries.  buf holds the
 * request payload (no size prefix) from offset off.  *out gets a malloc'd
 * NUL-terminated copy of *len bytes, or NULL for a null ClientId (or a
 * header without one).  false on ENOMEM or a short buffer.
 */
bool
kr_s_request_client_id(struct evbuffer *buf, size_t off,
                       const struct kr_req_hdr *h, char **out, size_t *len)
{
    struct evbuffer_ptr pos;
    size_t n = h->client_id_len;
    char *c;

    *out = NULL;
    *len = 0;
    if (h->client_id_null) {
        return true;
    }
    c = malloc(n + 1);
    if (c == NULL) {
        return false;
    }
    /* ApiKey, ApiVersion, CorrelationId, then the int16 length */
    if (evbuffer_ptr_set(buf, &pos, off + 10, EVBUFFER_PTR_SET) != 0 ||
        evbuffer_copyout_from(buf, &pos, c, n) != (ev_ssize_t)n) {
        free(c);
        return false;
    }
    c[n] = '\0';
    *out = c;
    *len = n;
    return true;
}

/*
 * A frame only observing rules wanted decoded did not decode (text: what
 * and why): counted, and one diagnostic line per connection
 * (rate-limited across them).
 */
void
kr_s_undecodable_note(struct kr_session *s, const char *text)
{
    KR_STAT_INC(s->host->stats, frames_undecodable);
    if (!s->undecodable_logged && KR_LOG_NOTICE <= kr_log_level_cur) {
        static struct kr_ratelimit rl;

        s->undecodable_logged = 1;
        kr_log_write_rl(&rl, 10, KR_LOG_NOTICE, "[%s] %s; only observing "
                        "rules wanted it decoded: forwarded unchanged (said "
                        "once per connection)", s->name, text);
    }
}

/*
 * Refuse a request krelay cannot decode that an enforcing rule could
 * match (issue 13, nr->gate, kr_analyse_refuse): it is never forwarded,
 * nor anything sent after it; the responses owed for earlier requests
 * reach the client first, then the connection closes with one log line,
 * as a broker closes on a request it cannot parse.  Returns 0, or -1
 * when closed.
 */
int
kr_s_refuse_request(struct kr_session *s, struct kr_nreq *nr, const char *cid,
                    size_t cidlen, const char *why)
{
    struct kr_an_conn c;
    struct kr_an_request r;
    struct kr_an_decision d;

    s->nrequests++;
    an_conn(s, &c);
    kr_s_an_request(nr, cid, cidlen, &r);
    kr_analyse_refuse(&c, &r, nr->gate.rule, why, &d);
    return apply_request(s, nr, &d);
}

/*
 * A Produce with Acks=0 was forwarded: Kafka sends no response, but some
 * brokers (librdkafka's mock) do.  Remember it as an optional entry
 * (struct kr_inflight) unless this upstream already showed it does not
 * answer them.  Once it showed it does (acks0_answered), every one is
 * kept and counts for max_inflight (fifo_inflight).  Before either is
 * known at most max_inflight optional entries are kept: past that the
 * oldest goes when it is the head, else the new one is not remembered,
 * and an answer to a forgotten one is recognised and dropped
 * (acks0_forgot, next_response).  Returns 0, or -1 when closed.
 */
int
kr_s_push_optional(struct kr_session *s, struct kr_inflight *e)
{
    struct kr_inflight *h;

    if (s->acks0_silent) {
        return 0;
    }
    if (!s->acks0_answered &&
        s->fifo.opt >= (uint64_t)s->lc->max_inflight) {
        s->acks0_forgot++;
        h = kr_s_fifo_head(s);
        if (h == NULL || !h->optional) {
            return 0;
        }
        kr_s_fifo_pop(s);
    }
    e->optional = 1;
    e->wait_ms = 0;
    if (kr_s_fifo_push(s, e) != KR_OK) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    return 0;
}

/* Push e (rq ready or waiting); answered entries may go out at once. */
static int
push_entry(struct kr_session *s, struct kr_inflight *e, struct kr_rq *rq)
{
    e->rq = rq;
    if (kr_s_fifo_push(s, e) != KR_OK) {
        kr_s_rq_free(rq);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (rq != NULL && rq->ready) {
        s->nready++;
        kr_s_flush_ready(s);
    }
    return 0;
}

int
kr_s_rounds_failed_answer(struct kr_session *s, struct kr_inflight *e,
                          int16_t error, const char *why)
{
    struct kr_rq *rq = e->rq;
    struct kr_an_rsp_decision d;
    struct kr_an_conn c;
    struct kr_arena arena;

    kr_arena_init(&arena, 0);
    an_conn(s, &c);
    peer_sw(&c.peer, rq->sw);           /* as of the request */
    kr_analyse_rounds_failed(&c, e, rq->a, error, why, &arena, &d);
    if (d.outcome != KR_AN_DELIVER_CHANGED || rq_out(rq) == NULL) {
        kr_session_close(s, d.outcome == KR_AN_DELIVER_CHANGED
                                ? KR_LOG_ERROR : d.level,
                         "%s", d.outcome == KR_AN_DELIVER_CHANGED
                                   ? "out of memory" : d.text);
        kr_wbuf_free(&d.w);
        kr_arena_free(&arena);
        return -1;
    }
    add_prefix(rq->out, d.w.len);
    evbuffer_add(rq->out, d.w.buf, d.w.len);
    kr_wbuf_free(&d.w);
    kr_arena_free(&arena);
    KR_STAT_INC_L(s->host->stats, errors_answered,
                  kr_stats_kerr_cell(error));
    rq->release_ms = kr_clock_timer_ms();
    rq->ready = true;
    s->nready++;
    return 0;
}

/*
 * The KIP-511 answer (kr_apiversions_unsupported: a v0 response whose
 * one ApiKeys entry is ApiVersions) within the connection's clamps
 * (kr_advertise_range), as every other ApiVersions response it gets.
 * Left alone when the frame has another shape or the clamp leaves
 * nothing.
 */
static void
av_unsupported_clamp(struct evbuffer *out, const struct kr_clamp *clamps)
{
    /* size, CorrelationId, ErrorCode, count, ApiKey, MinVersion,
       MaxVersion */
    uint8_t f[4 + 4 + 2 + 4 + 6];
    const struct kr_clamp *c = &clamps[KR_API_API_VERSIONS];
    struct kr_advert ad;
    int64_t lo, hi;

    if (c->min > c->max || evbuffer_get_length(out) != sizeof(f) ||
        evbuffer_copyout(out, f, sizeof(f)) != (ev_ssize_t)sizeof(f) ||
        kr_frame_i32(f) != (int32_t)sizeof(f) - 4 ||
        kr_frame_i32(f + 10) != 1 ||
        kr_frame_i16(f + 14) != KR_API_API_VERSIONS) {
        return;
    }
    memset(&ad, 0, sizeof(ad));
    ad.clamps = clamps;
    ad.decode_all = true;
    if (!kr_advertise_range(KR_API_API_VERSIONS, kr_frame_i16(f + 16),
                            kr_frame_i16(f + 18), &ad, &lo, &hi)) {
        return;
    }
    f[16] = (uint8_t)((uint16_t)lo >> 8);
    f[17] = (uint8_t)lo;
    f[18] = (uint8_t)((uint16_t)hi >> 8);
    f[19] = (uint8_t)hi;
    evbuffer_drain(out, sizeof(f));
    evbuffer_add(out, f, sizeof(f));
}

/*
 * The session's kr_rq around d's rule state (taken from d).  On ENOMEM
 * d is freed, s closed, and NULL returned.
 */
static struct kr_rq *
take_rq(struct kr_session *s, struct kr_an_decision *d)
{
    struct kr_rq *rq = kr_s_rq_wrap(d->req);

    d->req = NULL;
    if (rq == NULL) {
        kr_an_decision_free(d);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return NULL;
    }
    rq->sw = kr_s_sw_ref(s->sw);        /* its audit line's, later */
    return rq;
}

/*
 * issue 10: when the refusal of a version the brokers no longer accept
 * (its answer, or for an Acks=0 Produce the close) may come, the time
 * being now (kr_clock_timer_ms): now, unless this client's address was
 * refused within legacy_refuse_window_ms (a client reconnecting in a
 * loop): then legacy_refuse_delay_ms later (counted).
 */
static int64_t
legacy_refusal_release(struct kr_session *s, int64_t now)
{
    struct kr_legacy_refusal *r;
    int64_t at = now;
    uint64_t h = 1469598103934665603ull;
    const uint8_t *p;
    size_t n, i;

    if (s->peer.sa.sa_family == AF_INET6) {
        p = (const uint8_t *)&s->peer.in6.sin6_addr;
        n = sizeof(s->peer.in6.sin6_addr);
    } else {
        p = (const uint8_t *)&s->peer.in.sin_addr;
        n = sizeof(s->peer.in.sin_addr);
    }
    for (i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;     /* FNV-1a */
    }
    r = &s->host->legacy_refused[h % KR_ARRAY_LEN(s->host->legacy_refused)];
    if (r->at_ms != 0 && r->addr_hash == h &&
        now - r->at_ms <= s->lc->legacy_refuse_window_ms &&
        s->lc->legacy_refuse_delay_ms > 0) {
        at = now + s->lc->legacy_refuse_delay_ms;
        KR_STAT_INC(s->host->stats, legacy_refusals_delayed);
    }
    r->addr_hash = h;
    r->at_ms = now;
    return at;
}

/* Why a held refusal's close was held (kr_s_close_hold), for its line. */
static const char legacy_refusal_hold_why[] =
    "legacy_refuse_delay_ms: this client address was refused within "
    "legacy_refuse_window_ms";

/*
 * Carry out the pipeline's decision d on request nr, whose payload is in
 * s->rq_payload (and d->msg borrows from it).  Takes what d owns.
 * Returns 0, or -1 when closed.
 */
static int
apply_request(struct kr_session *s, struct kr_nreq *nr,
              struct kr_an_decision *d)
{
    struct evbuffer *pl = rq_payload(s), *out;
    struct kr_rq *rq = NULL;
    char eerr[160];
    int ret, rc;

    if (pl == NULL) {
        kr_an_decision_free(d);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (d->evaluated) {
        kr_stats_rule_hits(s->host->stats, &d->verdict);
    }
    if (d->audit_now != NULL) {
        audit_put(s, d->audit_now);
        d->audit_now = NULL;
    }
    if (d->legacy) {
        /* (an old producer's empty sets answered or dropped by krelay
           were neither translated up nor refused) */
        bool local = d->outcome == KR_AN_DONE ||
                     (d->outcome == KR_AN_ANSWER && d->error == 0);

        legacy_count(s, local ? NULL : &nr->h,
                     d->outcome == KR_AN_FORWARD_TRANSLATED, &d->legacy_st,
                     d->legacy_bad);
    }
    switch (d->outcome) {
    case KR_AN_CLOSE:
        kr_session_close(s, d->level, "%s", d->text);
        kr_an_decision_free(d);
        return -1;
    case KR_AN_REFUSE:
        /* frames_refused's one count outside kr_s_close_bad: this close
           waits for the responses owed */
        KR_STAT_INC(s->host->stats, requests_refused);
        KR_STAT_INC_L(s->host->stats, frames_refused,
                      KR_REFUSAL_UNDECODABLE);
        /* fall through */
    case KR_AN_CLOSE_AFTER_OWED:
        evbuffer_drain(pl, evbuffer_get_length(pl));
        if (d->legacy_refusal) {
            /* an Acks=0 refusal: its close is the answer, held as one
               (a client retrying in a loop is slowed) */
            int64_t now = kr_clock_timer_ms();
            int64_t at = legacy_refusal_release(s, now);

            if (at > now) {
                kr_s_close_hold(s, at, legacy_refusal_hold_why);
            }
        }
        ret = kr_s_close_after_owed(s, d->level, "%s", d->text);
        kr_an_decision_free(d);
        return ret;
    case KR_AN_ANSWER:
        evbuffer_drain(pl, evbuffer_get_length(pl));
        if ((rq = take_rq(s, d)) == NULL) {
            return -1;
        }
        if (rq_out(rq) == NULL) {
            kr_s_rq_free(rq);
            kr_an_decision_free(d);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        add_prefix(rq->out, d->w.len);
        if (d->error != 0) {
            KR_STAT_INC_L(s->host->stats, errors_answered,
                          kr_stats_kerr_cell(d->error));
        }
        evbuffer_add(rq->out, d->w.buf, d->w.len);
        rq->ready = true;
        if (d->legacy_refusal) {
            rq->release_ms = legacy_refusal_release(s, kr_clock_timer_ms());
            rq->drain_releases = true;
        }
        kr_log(d->level, "[%s] %s", s->name, d->text);
        kr_an_decision_free(d);
        return push_entry(s, &nr->e, rq);
    case KR_AN_FORWARD_UNDECODED:
        kr_s_undecodable_note(s, d->text);
        add_prefix(s->up.out, evbuffer_get_length(pl));
        evbuffer_add_buffer(s->up.out, pl);
        break;
    case KR_AN_DONE:
        /* issue 10: nothing to send, nothing to answer */
        evbuffer_drain(pl, evbuffer_get_length(pl));
        kr_log(d->level, "[%s] %s", s->name, d->text);
        KR_STAT_INC(s->host->stats, requests_acks0);
        kr_an_decision_free(d);
        return 0;
    case KR_AN_FORWARD_TRANSLATED:
        out = s->up.out;
        if (d->nrounds > 0 && (out = kr_s_rounds_send(s, nr, d)) == NULL) {
            /* (with a response to wait for, the rounds go one at a
               time: the request waits for theirs in out) */
            kr_an_decision_free(d);
            return -1;
        }
        /* records chains move from pl to up.out, never copied */
        eerr[0] = '\0';
        rc = kr_evcodec_emit_own(pl, out, &d->w, &d->msg, eerr,
                                 sizeof(eerr));
        if (rc != KR_OK) {
            kr_session_close(s, KR_LOG_ERROR, "cannot write translated %s "
                             "request: %s", kr_s_api_name(nr->h.api_key),
                             eerr[0] ? eerr : kr_status_str(rc));
            kr_an_decision_free(d);
            return -1;
        }
        break;
    case KR_AN_FORWARD:
        add_prefix(s->up.out, evbuffer_get_length(pl));
        evbuffer_add_buffer(s->up.out, pl);
        break;
    }
    if (d->want_rsp_first) {
        s->want_rsp_first = 1;      /* raw SASL tokens may follow it */
    }
    if (!nr->expect) {
        KR_STAT_INC(s->host->stats, requests_acks0);
        nr->e.rq = NULL;
        ret = kr_s_push_optional(s, &nr->e);
        if (ret == 0 && d->outcome == KR_AN_FORWARD_TRANSLATED &&
            d->close_after) {
            /* issue 10: part of it could not go, and no response can
               say so: closed once it went up, as a broker closes */
            ret = kr_s_close_after_owed(s, d->level, "%s", d->text);
        }
        kr_an_decision_free(d);
        return ret;
    }
    if (d->enforce_wait) {
        s->enforce_wait = 1;
    }
    if (d->req != NULL && (rq = take_rq(s, d)) == NULL) {
        return -1;
    }
    kr_an_decision_free(d);
    return push_entry(s, &nr->e, rq);
}

/*
 * A whole request frame the rules may touch is at the start of client.in.
 * Take it out, decode it, let the pipeline decide (kr_analyse_request),
 * apply.  Returns 0, or -1 when closed.
 */
int
kr_s_rule_request(struct kr_session *s, struct kr_nreq *nr)
{
    struct evbuffer *pl;
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct kr_msg m;
    struct kr_an_conn c;
    struct kr_an_request r;
    struct kr_an_decision d;
    char why[256], *cid = NULL;
    size_t cidlen = 0;
    int rc, ret;

    if ((pl = rq_payload(s)) == NULL) {
        free(nr->cid);
        nr->cid = NULL;
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    evbuffer_drain(s->client.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->client.in, pl, nr->flen);
    KR_STAT_INC(s->host->stats, requests);
    s->nrequests++;
    KR_STAT_INC_L(s->host->stats, api_requests,
                  kr_stats_api_cell(nr->h.api_key, nr->h.api_version));
    KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, KR_FRAME_PREFIX + nr->flen);
    if (nr->av_new) {
        /* KIP-511: answer as a broker does, v0 with our range */
        uint8_t f[KR_APIVERSIONS_UNSUPPORTED_LEN];
        size_t flen;
        struct kr_rq *rq = kr_s_rq_wrap(NULL);

        if (rq == NULL || rq_out(rq) == NULL ||
            kr_apiversions_unsupported(nr->h.correlation_id, f, sizeof(f),
                                       &flen) != KR_OK ||
            evbuffer_add(rq->out, f, flen) != 0) {
            kr_s_rq_free(rq);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        (void)kr_s_request_client_id(pl, 0, &nr->h, &cid, &cidlen);
        kr_s_apiversions_clamps(s, cid, cidlen);
        free(cid);
        evbuffer_drain(pl, evbuffer_get_length(pl));
        if (s->rw.clamps != NULL) {
            av_unsupported_clamp(rq->out, s->rw.clamps);
        }
        rq->ready = true;
        kr_log_debug("[%s] ApiVersions v%d is newer than krelay knows: "
                     "answered UNSUPPORTED_VERSION with krelay's range",
                     s->name, nr->h.api_version);
        return push_entry(s, &nr->e, rq);
    }

    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    memset(&m, 0, sizeof(m));
    rc = kr_evcodec_view(pl, stack, (int)KR_ARRAY_LEN(stack), &heap, &rb);
    if (rc == KR_OK) {
        rc = kr_decode_request(&arena, &rb, 0, &m, &ce);
    }
    an_conn(s, &c);
    if (rc != KR_OK) {
        snprintf(why, sizeof(why), "request does not decode: %.100s%s%.60s",
                 ce.msg[0] ? ce.msg : kr_status_str(rc),
                 ce.path[0] ? " at " : "", ce.path);
        if (!kr_s_request_client_id(pl, 0, &nr->h, &cid, &cidlen)) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            ret = -1;
            goto out;
        }
        kr_s_an_request(nr, cid, cidlen, &r);
        r.decode_error = why;
    } else {
        kr_s_an_request(nr, NULL, 0, &r);
        r.m = &m;
    }
    r.rb = &rb;
    kr_analyse_request(&c, &r, &arena, &d);
    ret = apply_request(s, nr, &d);
out:
    free(cid);
    free(heap);
    kr_arena_free(&arena);
    return ret;
}

/*
 * ApiVersions: what this connection's rules change in the response, for
 * the request's own ClientId (cid, cidlen bytes; NULL when null): the
 * clamps, and (issue 13) the APIs an enforcing rule could match, whose
 * MaxVersion is capped at what krelay can decode.
 */
void
kr_s_apiversions_clamps(struct kr_session *s, const char *cid, size_t cidlen)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;
    bool pass = false;
    int n;

    s->rw.clamps = NULL;
    s->rw.pass_unknown_apis = false;
    s->rw.enforced = NULL;
    s->rw.enforced_unknown = false;
    if (rs == NULL || rs->nrules == 0) {
        return;
    }
    if (s->enforced == NULL) {
        s->enforced = calloc((size_t)kr_api_max + 1, sizeof(*s->enforced));
    }
    if (s->enforced != NULL) {
        /* without it nothing is capped, but the gate still refuses */
        s->rw.enforced_unknown = kr_rule_conn_enforced(rs, &s->rmask, cid,
                                                       cidlen, s->enforced);
        s->rw.enforced = s->enforced;
    }
    if (!rs->any_clamp) {
        return;
    }
    if (s->clamps == NULL) {
        s->clamps = calloc((size_t)kr_api_max + 1, sizeof(*s->clamps));
        if (s->clamps == NULL) {
            return;
        }
    }
    n = kr_rule_conn_clamps(rs, &s->rmask, cid, cidlen, s->clamps, &pass);
    if (n > 0 || pass) {
        s->rw.clamps = s->clamps;
        s->rw.pass_unknown_apis = pass;
    }
}

/* Process a held response (whole frame at the start of up.in). */
/*
 * Remember the ranges of an ApiVersions response (ErrorCode 0) this
 * connection's broker sent, for clamp_target and legacy translation
 * (kr_an_broker_min): only when a clamp rule exists or the listener has
 * translate_legacy.  payload: the frame without its size prefix, left unchanged.
 */
void
kr_s_learn_apiversions(struct kr_session *s, int16_t ver, struct evbuffer *pl)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;
    char why[8];
    int16_t code;

    if ((rs == NULL || !rs->any_clamp) && !s->lc->translate_legacy) {
        return;
    }
    /* a response that does not decode: kr_rewrite_response reports it */
    (void)kr_s_av_learn(s, ver, pl, &code, why, sizeof(why));
}

/* ---- a Produce request streamed for its audit line ---------------------- */

enum rstream_outcome
kr_s_rstream_begin(struct kr_session *s, struct evbuffer *in, size_t off,
                   const struct kr_req_hdr *h, size_t flen, bool expect,
                   const struct kr_rule_slot *slot, struct kr_inflight *e)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;
    struct kr_an_request r;
    struct kr_audit_req *cap;
    struct kr_an_req *req;
    struct kr_verdict v;
    struct kr_rq *rq = NULL;
    char *cid = NULL;
    size_t cidlen = 0;
    enum kr_rule_need need;

    if (audit_sink(s) == NULL ||
        !kr_s_request_client_id(in, off + KR_FRAME_PREFIX, h, &cid,
                                &cidlen)) {
        free(cid);
        return RSTREAM_HOLD;            /* the held path says what fails */
    }
    need = kr_rule_eval_header(rs, slot, &s->rmask, h->api_key,
                               h->api_version, cid, cidlen, &v);
    if (need != KR_RULE_HEADER_ENOUGH) {
        free(cid);
        return RSTREAM_HOLD;
    }
    kr_stats_rule_hits(s->host->stats, &v);
    if (v.flags == 0) {
        free(cid);
        return RSTREAM_PASS;
    }
    if (s->req_st == NULL &&
        (s->req_st = calloc(1, sizeof(*s->req_st))) == NULL) {
        free(cid);
        kr_session_close(s, KR_LOG_ERROR, "out of memory (request scanner)");
        return RSTREAM_CLOSED;
    }
    if (kr_scan_init(&s->req_st->scan, h->api_key, h->api_version, false,
                     flen) != KR_OK) {
        free(cid);
        return RSTREAM_HOLD;
    }
    memset(&r, 0, sizeof(r));
    r.h = h;
    r.flen = flen;
    req = kr_an_req_from_header(&r, cid, cidlen, NULL, KR_AUDIT_FORWARDED);
    cap = kr_audit_stream_req_new(cid, cidlen, true);
    free(cid);
    if (req == NULL || cap == NULL ||
        (expect && (rq = kr_s_rq_wrap(req)) == NULL)) {
        if (rq == NULL) {
            kr_an_req_free(req);        /* kr_s_rq_wrap frees it itself */
        }
        kr_audit_req_free(cap);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return RSTREAM_CLOSED;
    }
    if (rq != NULL) {
        rq->sw = kr_s_sw_ref(s->sw);    /* its audit line's, later */
    }
    req->v = v;
    s->rstream = 1;
    s->req_st->prefix = KR_FRAME_PREFIX;
    s->req_st->req = req;
    s->req_st->rq = rq;
    s->rstream_own = !expect;
    s->req_st->e = *e;
    s->req_st->e.correlation_id = h->correlation_id;
    s->req_st->e.api_key = h->api_key;
    s->req_st->e.api_version = h->api_version;
    kr_audit_produce_scan_start(&s->req_st->as, cap,
                                s->rw.upstream != NULL
                                    ? kr_upstream_topics(s->rw.upstream)
                                    : NULL);
    kr_scan_watch(&s->req_st->scan, kr_audit_produce_scan_event,
                  &s->req_st->as);
    kr_scan_count_records(&s->req_st->scan, true);
    /* the held decode checks them */
    kr_scan_body_tags(&s->req_st->scan, true);
    e->rq = rq;
    KR_STAT_INC(s->host->stats, requests_streamed);
    return RSTREAM_STREAM;
}

void
kr_s_rstream_end(struct kr_session *s, int rc)
{
    struct kr_audit_req *cap;
    struct kr_an_req *req;
    char why[200], text[300], abuf[24];

    if (s->req_st == NULL) {
        return;                         /* never streamed */
    }
    cap = kr_audit_produce_scan_end(&s->req_st->as);
    req = s->req_st->req;
    if (!s->rstream) {
        kr_audit_req_free(cap);
        return;
    }
    s->rstream = 0;
    s->req_st->req = NULL;
    s->req_st->rq = NULL;
    /* the frame is read whole now, as a held one would be */
    req->t_wall_us = kr_clock_wall_us();
    req->t_read_us = kr_clock_mono_us();
    if (rc == KR_OK) {
        req->audit = cap;
    } else {
        /* as the held path words it (kr_s_rule_request) */
        kr_audit_req_free(cap);
        snprintf(why, sizeof(why), "request does not decode: %.150s",
                 s->req_st->scan.msg);
        free(req->decode_error);
        req->decode_error = strdup(why);
        snprintf(text, sizeof(text), "%s v%d CorrelationId %d: %s",
                 kr_analyse_api_label(s->req_st->e.api_key, abuf,
                                      sizeof(abuf)),
                 s->req_st->e.api_version, s->req_st->e.correlation_id, why);
        kr_s_undecodable_note(s, text);
    }
    if (s->rstream_own) {
        /* Acks=0: no response comes; the line is written now */
        struct kr_an_conn c;

        s->rstream_own = 0;
        an_conn(s, &c);
        audit_put(s, kr_an_audit_line(&c, &s->req_st->e, req, NULL, 0, 0,
                                      0));
        kr_an_req_free(req);
    }
}

void
kr_s_rstream_skipped(struct kr_session *s, uint64_t n)
{
    int rc;

    if (!s->rstream) {
        return;
    }
    if (s->req_st->prefix > 0) {
        /* a lane starts only at a skippable run: never here */
        kr_s_rstream_abort(s, "internal: spliced a size prefix");
        return;
    }
    rc = kr_scan_skip(&s->req_st->scan, n);
    if (rc == KR_ELIMIT) {
        kr_s_rstream_abort(s, "internal: spliced more than the scanner "
                           "skips");
    } else if (rc != KR_AGAIN) {
        kr_s_rstream_end(s, rc);
    }
}

void
kr_s_rstream_abort(struct kr_session *s, const char *note)
{
    struct kr_an_req *req;
    int64_t sofar;

    if (!s->rstream) {
        return;
    }
    req = s->req_st->req;
    s->rstream = 0;
    s->req_st->req = NULL;
    s->req_st->rq = NULL;
    /* topics and records as far as krelay read them: in the records field
       it was in, the batches whose headers it read (their bytes are its
       length prefix's, as every field's) */
    sofar = kr_scan_records_so_far(&s->req_st->scan);
    if (sofar >= -1) {
        kr_audit_produce_scan_event(&s->req_st->as, KR_SCAN_RECORD_COUNT,
                                    NULL, 0, sofar);
    }
    req->audit = kr_audit_produce_scan_end(&s->req_st->as);
    free(req->note);
    req->note = strdup(note);
    if (s->rstream_own) {
        struct kr_an_conn c;

        s->rstream_own = 0;
        req->incomplete = true;
        an_conn(s, &c);
        audit_put(s, kr_an_audit_line(&c, &s->req_st->e, req, NULL, 0, 0,
                                      0));
        kr_an_req_free(req);
    }
}

void
kr_s_rstream_drop(struct kr_session *s)
{
    if (s->req_st != NULL) {
        kr_audit_req_free(kr_audit_produce_scan_end(&s->req_st->as));
        if (s->rstream_own) {
            kr_an_req_free(s->req_st->req);
        }
        s->req_st->req = NULL;
        s->req_st->rq = NULL;
    }
    s->rstream = 0;
    s->rstream_own = 0;
}

bool
kr_s_rsp_scan_only(const struct kr_inflight *e)
{
    return e->rq != NULL && e->rq->a->decode_error == NULL &&
           kr_analyse_rsp_scan_only(e, e->rq->a);
}

void
kr_s_stream_audit_start(struct kr_session *s, struct kr_inflight *e,
                        size_t flen, uint64_t ahead)
{
    struct kr_rq *rq = e->rq;

    kr_s_rq_free(s->rsp_st->rq);
    s->rsp_st->rq = rq;
    e->rq = NULL;
    s->rsp_st->e = *e;
    s->rsp_st->bytes = KR_FRAME_PREFIX + flen;
    s->rsp_st->first = s->client.bytes_out + ahead;
    s->rsp_st->up_us = rq->a->t_read_us != 0
                          ? kr_clock_mono_us() - rq->a->t_read_us
                          : 0;
    kr_audit_scan_start(&s->rsp_st->as, rq->a->audit,
                        s->rw.upstream != NULL
                            ? kr_upstream_topics(s->rw.upstream)
                            : NULL,
                        e->api_key);
    kr_scan_watch(&s->rsp_st->scan, kr_audit_scan_event, &s->rsp_st->as);
}

bool
kr_s_stream_audit_undecodable(struct kr_session *s, const char *why)
{
    struct kr_rq *rq = s->rsp_st != NULL ? s->rsp_st->rq : NULL;
    char text[320], abuf[24];

    if (rq == NULL || s->rsp_st->e.api_key != KR_API_PRODUCE) {
        return false;
    }
    if (rq->a->decode_error == NULL) {
        char d[200];

        /* the held path's words (kr_s_rule_response) */
        snprintf(d, sizeof(d), "the response does not decode: %.100s", why);
        rq->a->decode_error = strdup(d);
        if (rq->a->decode_error == NULL) {
            return false;
        }
    }
    kr_audit_scan_abandon(&s->rsp_st->as);
    snprintf(text, sizeof(text), "%s v%d response to CorrelationId %d: %s",
             kr_analyse_api_label(s->rsp_st->e.api_key, abuf, sizeof(abuf)),
             s->rsp_st->e.api_version, s->rsp_st->e.correlation_id,
             rq->a->decode_error);
    kr_s_undecodable_note(s, text);
    return true;
}

void
kr_s_stream_audit_end(struct kr_session *s, bool rewritten)
{
    struct kr_rq *rq = s->rsp_st != NULL ? s->rsp_st->rq : NULL;

    if (rq == NULL) {
        return;
    }
    s->rsp_st->rq = NULL;
    if (rewritten) {
        rq->a->actions |= KR_AUDIT_REWRITTEN;
    }
    audit_put(s, audit_line(s, &s->rsp_st->e, rq, NULL, s->rsp_st->bytes,
                            s->rsp_st->up_us, 0));
    kr_s_rq_free(rq);
}

void
kr_s_audit_unfinished(struct kr_session *s)
{
    struct kr_rq *rq = s->rsp_st != NULL ? s->rsp_st->rq : NULL;
    struct kr_inflight *e;
    uint64_t got;
    uint32_t i;
    char note[200];

    if (audit_sink(s) == NULL) {
        return;
    }
    kr_s_rstream_abort(s, "connection closed before krelay read the whole "
                       "request (topics and records: as far as it read "
                       "them)");
    if (rq != NULL) {
        s->rsp_st->rq = NULL;
        got = s->client.bytes_out > s->rsp_st->first
                  ? s->client.bytes_out - s->rsp_st->first
                  : 0;
        got = got < s->rsp_st->bytes ? got : s->rsp_st->bytes;
        snprintf(note, sizeof(note), "connection closed after %" PRIu64
                 " of the response's %" PRIu64 " bytes reached the client "
                 "(topics and errors: as far as krelay read it)", got,
                 s->rsp_st->bytes);
        free(rq->a->note);
        rq->a->note = strdup(note);
        rq->a->incomplete = true;
        audit_put(s, audit_line(s, &s->rsp_st->e, rq, NULL, got,
                                s->rsp_st->up_us, 0));
        kr_s_rq_free(rq);
    }
    for (i = 0; i < s->fifo.len; i++) {
        e = kr_s_fifo_at(s, i);
        rq = e->rq;
        if (rq == NULL || rq->logged || !(rq->a->v.flags & KR_VF_AUDIT)) {
            continue;
        }
        rq->logged = true;
        /* a response built but not yet sent (its release time, or behind
           one that was not) did not reach the client either; a request
           cut while it streamed (kr_s_rstream_abort) keeps its note,
           which says so: the only note an unlogged entry can have */
        free(rq->a->audit_line);
        rq->a->audit_line = NULL;
        if (rq->a->note == NULL) {
            rq->a->note = strdup("connection closed before the response "
                                 "reached the client");
        }
        rq->a->incomplete = true;
        audit_put(s, audit_line(s, e, rq, NULL, 0, 0, 0));
    }
}

/* May e's response go on unheld (kr_analyse_rsp_may_stream)? */
bool
kr_s_rsp_may_stream(const struct kr_inflight *e)
{
    return kr_analyse_rsp_may_stream(e, e->rq != NULL ? e->rq->a : NULL);
}

/*
 * Entry e (the head) has a response too large to hold for its observing
 * rules: they give up on it.  Its audit line is written now, with the
 * sizes and a note; throttle enforce mutes the client for the throttle
 * time after it instead of holding it (as a broker mutes the channel).
 * e->rq is freed; the response then goes as if no rule had wanted it.
 */
void
kr_s_rsp_let_go(struct kr_session *s, struct kr_inflight *e, size_t flen)
{
    struct kr_rq *rq = e->rq;
    char note[200];

    if (rq == NULL) {
        return;
    }
    KR_STAT_INC(s->host->stats, frames_undecodable);
    kr_log_rl(KR_LOG_INFO, "[%s] %s v%d response (CorrelationId %d) of %zu "
              "bytes is above max_frame_bytes %" PRId64 ": not held for the "
              "rules, forwarded unchanged", s->name, kr_s_api_name(e->api_key),
              e->api_version, e->correlation_id, flen,
              s->lc->max_frame_bytes);
    if ((rq->a->v.flags & KR_VF_THROTTLE) && rq->a->v.throttle_enforce) {
        int64_t until = kr_clock_timer_ms() + rq->a->v.throttle_ms;

        if (until > s->paused_until_ms) {
            s->paused_until_ms = until;
        }
        s->enforce_wait = 0;
        rq->a->actions |= KR_AUDIT_THROTTLED;
        rtimer_arm(s);          /* the requests go on when it is over */
    }
    if (rq->a->v.flags & KR_VF_AUDIT) {
        snprintf(note, sizeof(note), "response of %zu bytes (payload %zu) "
                 "above max_frame_bytes %" PRId64 ": not held, not decoded, "
                 "forwarded unchanged", KR_FRAME_PREFIX + flen, flen,
                 s->lc->max_frame_bytes);
        free(rq->a->note);
        rq->a->note = strdup(note);
        audit_put(s, audit_line(s, e, rq, NULL, KR_FRAME_PREFIX + flen,
                                rq->a->t_read_us != 0
                                    ? kr_clock_mono_us() -
                                          rq->a->t_read_us
                                    : 0,
                                0));
    }
    kr_s_rq_free(rq);
    e->rq = NULL;
}

bool
kr_s_errors_by_rewrite(int16_t key, int16_t ver)
{
    return key != KR_API_API_VERSIONS && kr_rewrite_wants(key, ver) &&
           !kr_rewrite_streamable(key, ver);
}

void
kr_s_count_errors_cb(void *arg, const struct kr_node *body)
{
    struct kr_session *s = arg;

    kr_stats_response_errors(s->host->stats, body);
}

/*
 * response_errors for a held response krelay did not decode (pl, its
 * flen payload bytes, of ApiKey key at version ver): its top-level
 * ErrorCode where it sits at a fixed offset, counted when not 0.
 */
static void
rsp_top_error_held(struct kr_session *s, struct evbuffer *pl, size_t flen,
                   int16_t key, int16_t ver)
{
    uint8_t buf[64];
    ev_ssize_t n;
    size_t need = 0;
    int16_t code = 0;

    if (kr_frame_rsp_error_off(key, ver) < 0) {
        return;
    }
    n = evbuffer_copyout(pl, buf, flen < sizeof(buf) ? flen : sizeof(buf));
    if (n > 0 &&
        kr_frame_peek_rsp_error(buf, (size_t)n, flen, key, ver, &code,
                                &need) == KR_OK &&
        code != 0) {
        KR_STAT_INC_L(s->host->stats, response_errors,
                      kr_stats_rsp_error_cell(code));
    }
}

/*
 * The whole response frame of FIFO entry idx is at the start of up.in:
 * decode it when its rules want it, let the pipeline decide
 * (kr_analyse_response: translate back, fault error, ThrottleTimeMs,
 * audit line), rewrite broker addresses, and leave the frame in rq->out
 * until its turn.  Returns 0, or -1 when closed.
 */
int
kr_s_rule_response(struct kr_session *s, uint32_t idx, size_t flen)
{
    struct kr_inflight *e = kr_s_fifo_at(s, idx);
    struct kr_rq *rq = e->rq;
    struct evbuffer *hold = NULL, *pl, *tmp = NULL;
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct kr_msg m;
    struct kr_an_conn c;
    struct kr_an_rsp_decision d;
    int64_t now_us = kr_clock_mono_us(), up_us = 0;
    uint64_t rsp_bytes = KR_FRAME_PREFIX + flen;
    char err[160], why[200];
    bool decode, exact = false, count_rw;
    int rc = KR_OK, ret = -1;

    if (rq == NULL) {
        rq = e->rq = kr_s_rq_wrap(NULL);
        if (rq == NULL) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        rq->a->up_version = e->api_version;
    }
    pl = hold = kr_s_hold_take(s);
    if (hold == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    evbuffer_drain(s->up.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->up.in, pl, flen);
    KR_STAT_INC(s->host->stats, responses);
    KR_STAT_INC(s->host->stats, responses_held);
    if (rq->a->t_read_us != 0) {
        up_us = now_us - rq->a->t_read_us;
    }
    kr_arena_init(&arena, 0);
    memset(&d, 0, sizeof(d));
    memset(&ce, 0, sizeof(ce));
    decode = (rq->a->v.flags &
              (KR_VF_AUDIT | KR_VF_THROTTLE | KR_VF_ERROR)) ||
             rq->a->up_version != e->api_version;
    if (decode) {
        rc = kr_evcodec_view(pl, stack, (int)KR_ARRAY_LEN(stack), &heap, &rb);
        /* Decoded as kr_rewrite_response would decode it, the tree also
           says whether the frame has broker endpoints to rewrite (below:
           not decoded a second time when it has none).  When that strict
           decode fails, the rules get the tolerant one, as ever. */
        if (rc == KR_OK && kr_rewrite_streamable(e->api_key, e->api_version) &&
            rq->a->up_version == e->api_version) {
            rc = kr_decode_response(&arena, &rb, e->api_key,
                                    rq->a->up_version, KR_DEC_TAGS_EXACT,
                                    &m, &ce);
            exact = rc == KR_OK;
            if (!exact) {
                kr_arena_reset(&arena);
                memset(&ce, 0, sizeof(ce));
                rc = KR_OK;
            }
        }
        if (rc == KR_OK && !exact) {
            rc = kr_decode_response(&arena, &rb, e->api_key,
                                    rq->a->up_version, 0, &m, &ce);
        }
        if (rc != KR_OK && rq->a->up_version != e->api_version) {
            kr_s_close_up(s, KR_LOG_WARN, "cannot decode %s v%d response from "
                          "%s to translate it back to v%d: %s at %s",
                          kr_s_api_name(e->api_key), rq->a->up_version,
                          s->upname, e->api_version,
                          ce.msg[0] ? ce.msg : kr_status_str(rc), ce.path);
            goto out;
        }
    }
    count_rw = false;
    if (!(e->metered & KR_INF_M_ERROR) && e->kind == KR_INF_REQUEST) {
        /* decoded for its rules: every ErrorCode; decoded by the address
           rewrite below: every ErrorCode there; else the top-level one at
           a fixed offset (never decoded for the metric) */
        e->metered |= KR_INF_M_ERROR;
        if (decode && rc == KR_OK) {
            kr_stats_response_errors(s->host->stats, m.body);
        } else if (!decode && rq->a->up_version == e->api_version &&
                   kr_s_errors_by_rewrite(e->api_key, e->api_version)) {
            count_rw = true;
        } else {
            rsp_top_error_held(s, pl, flen, e->api_key, rq->a->up_version);
        }
    }
    an_conn(s, &c);
    peer_sw(&c.peer, rq->sw);           /* as of the request */
    if (decode && rc != KR_OK) {
        /* issue 13: observing rules fail open */
        snprintf(why, sizeof(why), "the response does not decode: %.100s"
                 "%s%.60s", ce.msg[0] ? ce.msg : kr_status_str(rc),
                 ce.path[0] ? " at " : "", ce.path);
        if (!kr_rewrite_wants(e->api_key, e->api_version)) {
            /* else its broker addresses decide: rewritten, or closed */
            char abuf[24], text[320];

            snprintf(text, sizeof(text), "%s v%d response to CorrelationId "
                     "%d: %s", kr_analyse_api_label(e->api_key, abuf,
                                                    sizeof(abuf)),
                     rq->a->up_version, e->correlation_id, why);
            kr_s_undecodable_note(s, text);
        }
        kr_analyse_response(&c, e, rq->a, NULL, why, rsp_bytes, up_us,
                            &arena, &d);
    } else {
        c.rsp_rb = decode ? &rb : NULL;
        kr_analyse_response(&c, e, rq->a, decode ? &m : NULL, NULL,
                            rsp_bytes, up_us, &arena, &d);
    }
    if (d.legacy) {
        legacy_count(s, NULL, false, &d.legacy_st, d.legacy_bad);
    }
    switch (d.outcome) {
    case KR_AN_RSP_CLOSE:
        kr_session_close(s, d.level, "%s", d.text);
        goto out;
    case KR_AN_CLOSE_UP:
        kr_s_close_up(s, d.level, "%s", d.text);
        goto out;
    case KR_AN_DELIVER_CHANGED:
        rsp_bytes = d.rsp_bytes;
        tmp = evbuffer_new();
        err[0] = '\0';
        rc = tmp == NULL ? KR_ENOMEM
                         : kr_evcodec_emit_own(pl, tmp, &d.w, &m, err,
                                               sizeof(err));
        if (rc != KR_OK) {
            kr_s_close_up(s, KR_LOG_ERROR, "cannot write %s v%d response: %s",
                          kr_s_api_name(e->api_key), e->api_version,
                          tmp == NULL ? "out of memory"
                                      : err[0] ? err : kr_status_str(rc));
            goto out;
        }
        evbuffer_drain(tmp, KR_FRAME_PREFIX);
        pl = tmp;
        break;
    case KR_AN_DELIVER:
        break;
    }
    if (kr_rewrite_wants(e->api_key, e->api_version) &&
        !(exact && d.outcome == KR_AN_DELIVER &&
          kr_rewrite_tree_none(e->api_key, e->api_version, m.body))) {
        struct kr_rewrite_result res;

        memset(&res, 0, sizeof(res));
        if (e->api_key == KR_API_API_VERSIONS) {
            kr_s_learn_apiversions(s, e->api_version, pl);
        }
        rc = rq_out(rq) == NULL
                 ? KR_ENOMEM
                 : kr_rewrite_response_observed(
                       &s->rw, e->api_key, e->api_version, pl, rq->out, &res,
                       count_rw ? kr_s_count_errors_cb : NULL, s);
        if (rc != KR_OK) {
            if (rq->a->v.flags & KR_VF_AUDIT) {
                /* audited all the same: the response was not delivered */
                char note[256];

                snprintf(note, sizeof(note), "response not delivered, "
                         "connection closed: cannot rewrite its broker "
                         "addresses (%.120s)",
                         res.err[0] ? res.err : kr_status_str(rc));
                free(rq->a->note);
                rq->a->note = strdup(note);
                free(rq->a->audit_line);
                rq->a->audit_line = NULL;
                audit_put(s, audit_line(s, e, rq, NULL, rsp_bytes, up_us,
                                        0));
                rq->logged = true;
            }
            kr_s_close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from "
                          "%s: %s", kr_s_api_name(e->api_key), e->api_version,
                          s->upname, res.err[0] ? res.err : kr_status_str(rc));
            goto out;
        }
        if (res.changed) {
            rq->a->actions |= KR_AUDIT_REWRITTEN;
        }
    } else if (rq_out(rq) == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        goto out;
    } else {
        add_prefix(rq->out, evbuffer_get_length(pl));
        evbuffer_add_buffer(rq->out, pl);
    }
    if (d.fault_close) {
        rq->a->actions |= KR_AUDIT_FAULTED;
        if (rq->a->audit_line != NULL) {
            audit_put(s, rq->a->audit_line);
            rq->a->audit_line = NULL;
            rq->logged = true;
        }
        kr_session_close(s, KR_LOG_NOTICE, "closing the connection instead "
                         "of delivering the %s v%d response (CorrelationId "
                         "%d): fault_close_probability of [rule %s]",
                         kr_s_api_name(e->api_key), e->api_version,
                         e->correlation_id,
                         rule_name(s, rq->a->v.fault_rule));
        goto out;
    }
    rq->release_ms = kr_clock_timer_ms() + d.delay_ms;
    rq->ready = true;
    s->nready++;
    ret = 0;
out:
    free(heap);
    kr_wbuf_free(&d.w);
    kr_arena_free(&arena);
    kr_s_hold_put(s, hold);
    if (tmp != NULL) {
        evbuffer_free(tmp);
    }
    return ret;
}
