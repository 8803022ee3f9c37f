/*
 * kr_session_saslterm.c - SASL termination on a client connection (issue
 * 9, [listener] sasl = terminate): krelay is the client's SASL server.
 * Its SaslHandshake, SaslAuthenticate and raw v0 tokens never reach the
 * broker: kr_sasl_server answers them, and the answer waits its turn in
 * the FIFO behind the responses still owed, as every response krelay
 * builds (kr_session_rules.c).  Before authentication only ApiVersions
 * and the SASL steps pass; the principal is verified at once and goes
 * through passthrough's paths (s->sasl, kr_s_sasl_outcome: rule masks,
 * log, counters, the authentication audit line).  The upstream is
 * whatever [upstream] says: plaintext, TLS, or krelay's own SASL.
 *
 * No broker is touched before the client authenticated (as pgbouncer and
 * HAProxy keep their backends from unauthenticated clients): the session
 * dials its upstream only then (s->up_after_auth, kr_s_up_start), so a
 * client that never logs in costs no broker connection and no upstream
 * SASL login.  Its ApiVersions before that is answered here (av_answer):
 * the ranges the cluster offers as krelay's own metadata connection
 * learned them (kr_upstream_api_range), shaped by kr_rewrite exactly as
 * a forwarded answer is (the connection's clamps, the tables' caps,
 * krelay's SaslHandshake 0-1 and SaslAuthenticate 0-2).  Until that
 * metadata connection got its first answer (krelay just started) the
 * request waits, looked at again every KR_TERM_AV_POLL_MS, within the
 * login's sasl_auth_timeout_ms from the accept: krelay never answers
 * with ranges it does not know the brokers have.  An ApiVersions after
 * authentication is forwarded as before.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "kr_api_keys.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_conn.h"
#include "kr_frame.h"
#include "kr_kerr.h"
#include "kr_log.h"
#include "kr_rewrite.h"
#include "kr_sasl.h"
#include "kr_sasl_server.h"
#include "kr_session_int.h"
#include "kr_schema.h"
#include "kr_stats.h"
#include "kr_upstream.h"

/* Kafka's sasl.server.max.receive.size: frames before authentication
   and SASL steps. */
#define KR_TERM_MAX_RECEIVE (512 * 1024)
/* An ApiVersions before authentication, while the cluster's ranges are
   not known yet: how often it is looked at again. */
#define KR_TERM_AV_POLL_MS 50
/* ApiKeys asked of kr_upstream_api_range for the local answer (it
   knows fewer; Kafka's highest is below 100). */
#define KR_TERM_AV_KEYS 256

static bool copy_at(struct evbuffer *in, size_t off, void *out, size_t n);

/*
 * May krelay build one more answer of its own now?  Not while the client
 * leaves its answers unread (client.out full: kr_conn_out_full with
 * max_buffer_bytes) or max_inflight wait: a client that pipelines 14-byte
 * ApiVersions before logging in and reads nothing would otherwise have
 * krelay hold ~30 times its bytes in answers until the login deadline.
 * The answers queued are written first.  NREQ_SASL_TERM: room;
 * NREQ_WAIT: the requests are blocked (s->req_blocked, so its reading
 * stops, kr_s_update_io) until a write to the client or a freed slot
 * resumes them (kr_s_resume_requests); NREQ_CLOSED.
 */
static enum nreq_outcome
answer_room(struct kr_session *s)
{
    size_t maxb = (size_t)s->lc->max_buffer_bytes;

    if (kr_conn_out_full(s->client.out, maxb) &&
        kr_s_conn_flush(s, &s->client) != 0) {
        return NREQ_CLOSED;
    }
    if (!kr_conn_out_full(s->client.out, maxb) &&
        kr_s_fifo_inflight(s) < (uint64_t)s->lc->max_inflight) {
        return NREQ_SASL_TERM;
    }
    s->req_blocked = 1;
    return NREQ_WAIT;
}

bool
kr_s_term_init(struct kr_session *s)
{
    uint8_t key[16];
    size_t alen;

    if (s->lc->sasl != KR_SASL_MODE_TERMINATE || s->lc->sasl_srv == NULL) {
        return true;
    }
    s->sasl_srv = calloc(1, sizeof(*s->sasl_srv));
    if (s->sasl_srv == NULL) {
        return false;
    }
    alen = kr_sasl_rate_key(&s->peer.sa, key);
    kr_sasl_srv_init(s->sasl_srv, s->lc->sasl_srv, alen > 0 ? key : NULL,
                     alen);
    s->rw.sasl_local = true;
    s->up_after_auth = 1;               /* no broker before the login */
    return true;
}

/*
 * An ApiVersions request (whole frame: size bytes after scan) before
 * authentication, with no upstream yet: krelay answers it (NREQ_SASL_TERM,
 * nr->term_av) once the cluster's ranges are known; until then
 * NREQ_WAIT, the requests paused for KR_TERM_AV_POLL_MS.  One newer than
 * krelay's tables goes on as usual (NREQ_FORWARD: the KIP-511 answer is
 * krelay's own too); one with a negative version closes (NREQ_CLOSED).
 */
static enum nreq_outcome
av_next(struct kr_session *s, struct evbuffer *in, size_t scan,
        size_t avail, int32_t size, int64_t now, struct kr_nreq *nr)
{
    const struct kr_api_desc *ad = kr_api_get(KR_API_API_VERSIONS);
    uint8_t b[KR_FRAME_PREFIX + 4];
    enum nreq_outcome room;
    int16_t lo, hi;

    if (size < 4 || avail < sizeof(b) || !copy_at(in, scan, b, sizeof(b))) {
        return size < 4 ? NREQ_FORWARD : NREQ_WAIT;
    }
    if (kr_frame_i16(b + KR_FRAME_PREFIX + 2) < 0) {
        /* no client sends it; forwarded, it would wait in up.out for the
           broker the login dials, its client for the deadline */
        kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_NOTICE,
                       "ApiVersions v%d request before "
                       "SASL authentication (sasl = terminate): a negative "
                       "version", kr_frame_i16(b + KR_FRAME_PREFIX + 2));
        return NREQ_CLOSED;
    }
    if (ad == NULL || kr_frame_i16(b + KR_FRAME_PREFIX + 2) > ad->valid.hi) {
        return NREQ_FORWARD;
    }
    if (!kr_upstream_api_range(s->rw.upstream, KR_API_API_VERSIONS, &lo,
                               &hi)) {
        /* krelay just started: its metadata connection has not learned
           the cluster's ranges yet; the login's deadline bounds this */
        if (s->paused_until_ms == 0) {
            kr_log_debug("[%s] ApiVersions before SASL authentication waits "
                         "for the cluster's ApiVersions (krelay's metadata "
                         "connection)", s->name);
        }
        s->paused_until_ms = now + KR_TERM_AV_POLL_MS;
        kr_s_flush_ready(s);            /* arms the timer that resumes */
        return NREQ_WAIT;
    }
    if (avail - KR_FRAME_PREFIX < (size_t)size) {
        return NREQ_WAIT;               /* whole */
    }
    if ((room = answer_room(s)) != NREQ_SASL_TERM) {
        return room;
    }
    if (kr_frame_i16(b + KR_FRAME_PREFIX + 2) >= 3 &&
        *s->host->audit != NULL) {
        /* KIP-511: the client's software, for its audit lines */
        kr_s_note_client_software(s, in, scan + KR_FRAME_PREFIX,
                                  (size_t)size);
    }
    memset(nr, 0, sizeof(*nr));
    nr->flen = (size_t)size;
    nr->expect = true;
    nr->term_av = true;
    nr->e.sent_ms = now;
    nr->e.correlation_id = -1;
    nr->e.kind = KR_INF_REQUEST;
    return NREQ_SASL_TERM;
}

/* Bytes n at offset off of in into out (false: fewer there). */
static bool
copy_at(struct evbuffer *in, size_t off, void *out, size_t n)
{
    struct evbuffer_ptr p;

    return evbuffer_ptr_set(in, &p, off, EVBUFFER_PTR_SET) == 0 &&
           evbuffer_copyout_from(in, &p, out, n) == (ev_ssize_t)n;
}

enum nreq_outcome
kr_s_term_next(struct kr_session *s, struct evbuffer *in, size_t scan,
               size_t avail, struct kr_nreq *nr)
{
    struct kr_sasl_srv *t = s->sasl_srv;
    int64_t now = kr_clock_timer_ms();
    uint8_t b[KR_FRAME_PREFIX + 2];
    enum kr_sasl_srv_gate g;
    enum nreq_outcome room;
    int32_t size;
    int16_t key;
    bool raw;

    raw = kr_sasl_srv_gate(t, 0, now) == KR_SASL_SRV_RAW;
    if (avail < (raw ? KR_FRAME_PREFIX : sizeof(b))) {
        return NREQ_WAIT;
    }
    if (!copy_at(in, scan, b, raw ? KR_FRAME_PREFIX : sizeof(b))) {
        return NREQ_WAIT;
    }
    size = kr_frame_i32(b);
    if (raw) {
        if (size < 0 || size > KR_TERM_MAX_RECEIVE ||
            size > s->lc->max_frame_bytes) {
            kr_s_close_bad(s, size < 0 ? KR_REFUSAL_MALFORMED
                                       : KR_REFUSAL_OVERSIZED,
                           KR_LOG_WARN, "SASL token frame of %" PRId32
                           " bytes: above 524288 (Kafka's "
                           "sasl.server.max.receive.size) or negative",
                           size);
            return NREQ_CLOSED;
        }
        g = KR_SASL_SRV_RAW;
    } else {
        if (size < 2) {
            return NREQ_FORWARD;    /* next_request refuses its size */
        }
        key = kr_frame_i16(b + KR_FRAME_PREFIX);
        g = kr_sasl_srv_gate(t, key, now);
        if ((g == KR_SASL_SRV_MINE ||
             (g == KR_SASL_SRV_PASS && !t->authenticated)) &&
            size > KR_TERM_MAX_RECEIVE) {
            kr_s_close_bad(s, KR_REFUSAL_OVERSIZED, KR_LOG_WARN,
                           "%s request of %" PRId32 " bytes "
                           "before SASL authentication is done: above "
                           "524288 (Kafka's sasl.server.max.receive.size)",
                           kr_s_api_name(key), size);
            return NREQ_CLOSED;
        }
        switch (g) {
        case KR_SASL_SRV_PASS:
            if (key == KR_API_API_VERSIONS && s->up_after_auth &&
                !t->authenticated) {
                return av_next(s, in, scan, avail, size, now, nr);
            }
            return NREQ_FORWARD;
        case KR_SASL_SRV_MINE:
            break;
        case KR_SASL_SRV_UNAUTHENTICATED:
            kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                           "%s request before SASL "
                           "authentication (sasl = terminate: only "
                           "ApiVersions and SaslHandshake come first)",
                           kr_s_api_name(key));
            return NREQ_CLOSED;
        case KR_SASL_SRV_IN_EXCHANGE:
            kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                           "%s request in the middle of "
                           "SASL %s authentication", kr_s_api_name(key),
                           kr_sasl_srv_mech_name(t->mech));
            return NREQ_CLOSED;
        case KR_SASL_SRV_EXPIRED:
            kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                           "%s request after the SASL "
                           "session lifetime (sasl_session_lifetime_ms %"
                           PRId64 ") ran out without re-authentication "
                           "(KIP-368)", kr_s_api_name(key),
                           t->cfg != NULL ? t->cfg->session_lifetime_ms
                                          : (int64_t)0);
            return NREQ_CLOSED;
        case KR_SASL_SRV_RAW:
            break;
        }
    }
    if (avail - KR_FRAME_PREFIX < (size_t)size) {
        return NREQ_WAIT;               /* whole */
    }
    if ((room = answer_room(s)) != NREQ_SASL_TERM) {
        return room;
    }
    memset(nr, 0, sizeof(*nr));
    nr->flen = (size_t)size;
    nr->expect = true;
    nr->term_raw = raw;
    nr->e.sent_ms = now;
    nr->e.correlation_id = -1;
    nr->e.kind = raw ? KR_INF_SASL_TOKEN : KR_INF_REQUEST;
    return NREQ_SASL_TERM;
}

/* A mechanism name as sent, for log and audit lines: printable ASCII,
   other bytes '?', cut to fit. */
static void
mech_copy(char out[KR_SASL_MECH_NAME_MAX + 1], const struct kr_msg *m)
{
    const struct kr_val *v = kr_node_get_id(m->body, KR_FIELD_MECHANISM);
    size_t i, n = 0;

    if (v != NULL && v->present && !v->is_null && v->u.s.len > 0) {
        for (i = 0; i < (size_t)v->u.s.len && n < KR_SASL_MECH_NAME_MAX;
             i++) {
            uint8_t c = v->u.s.p[i];

            out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
        }
    }
    out[n] = '\0';
}

/* "User:" + name into *p (replacing it); false on ENOMEM. */
static bool
set_principal(char **p, const char *name)
{
    char *u = NULL;

    if (name != NULL) {
        size_t n = strlen(name) + 6;

        u = malloc(n);
        if (u == NULL) {
            return false;
        }
        snprintf(u, n, "User:%s", name);
    }
    free(*p);
    *p = u;
    return true;
}

/* The answer frame out (with its size prefix; taken, also on failure)
   into the FIFO as a built response, its turn behind what is owed.  0,
   or -1 closed. */
static int
push_frame(struct kr_session *s, struct kr_inflight *e, struct evbuffer *out)
{
    struct kr_rq *rq = kr_s_rq_wrap(NULL);

    if (rq == NULL) {
        evbuffer_free(out);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    rq->out = out;
    rq->ready = true;
    e->rq = rq;
    if (kr_s_fifo_push(s, e) != KR_OK) {
        kr_s_rq_free(rq);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    s->nready++;
    kr_s_flush_ready(s);
    return s->dead ? -1 : 0;
}

/* The answer (len bytes at p, with its size prefix added) into the FIFO
   as a built response (push_frame).  0, or -1 closed. */
static int
push_answer(struct kr_session *s, struct kr_inflight *e, const uint8_t *p,
            size_t len)
{
    struct evbuffer *out = evbuffer_new();
    uint8_t pre[KR_FRAME_PREFIX];

    kr_frame_put_size(pre, len);
    if (out == NULL || evbuffer_add(out, pre, sizeof(pre)) != 0 ||
        (len > 0 && evbuffer_add(out, p, len) != 0)) {
        if (out != NULL) {
            evbuffer_free(out);
        }
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    return push_frame(s, e, out);
}

/*
 * The ApiVersions answer before authentication (see the top): request m
 * (decoded), entry e.  The cluster's ranges as a broker's response
 * through the codec, then kr_rewrite_response with the connection's
 * context, as a forwarded one.  0, or -1 closed.
 */
static int
av_answer(struct kr_session *s, struct kr_inflight *e, const struct kr_msg *m)
{
    const struct kr_api_desc *api = kr_api_get(KR_API_API_VERSIONS);
    const struct kr_val *cv = kr_node_get_id(m->header, KR_FIELD_CLIENT_ID);
    int16_t v = m->api_version, lo, hi;
    struct kr_rewrite_result rr;
    struct evbuffer *pl = NULL, *out = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_array *keys;
    struct kr_msg rsp;
    struct kr_wbuf w;
    struct kr_val *x;
    char *cid = NULL;
    uint32_t n = 0, j = 0;
    uint16_t root;
    int idx, hv, k, rc = KR_ENOMEM;

    /* this connection's clamps for the request's own ClientId */
    if (cv != NULL && cv->present && !cv->is_null && cv->u.s.len >= 0) {
        cid = malloc((size_t)cv->u.s.len + 1);
        if (cid == NULL) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        memcpy(cid, cv->u.s.p, (size_t)cv->u.s.len);
        cid[cv->u.s.len] = '\0';
    }
    kr_s_apiversions_clamps(s, cid, cid != NULL ? (size_t)cv->u.s.len : 0);
    free(cid);

    root = api != NULL ? kr_api_root(api, true, v) : KR_NO_STRUCT;
    hv = kr_response_header_version(KR_API_API_VERSIONS, v);
    idx = root != KR_NO_STRUCT
          ? kr_struct_field_index_id(root, KR_FIELD_API_KEYS) : -1;
    if (idx < 0 || hv < 0) {
        kr_session_close(s, KR_LOG_ERROR, "internal: no ApiVersions v%d "
                         "response in krelay's tables", v);
        return -1;
    }
    for (k = 0; k < KR_TERM_AV_KEYS; k++) {
        n += kr_upstream_api_range(s->rw.upstream, (int16_t)k, &lo, &hi);
    }
    kr_arena_init(&arena, 0);
    memset(&w, 0, sizeof(w));
    memset(&ce, 0, sizeof(ce));
    memset(&rsp, 0, sizeof(rsp));
    rsp.dir = KR_DIR_RESPONSE;
    rsp.api_key = KR_API_API_VERSIONS;
    rsp.api_version = v;
    rsp.hdr_version = (int16_t)hv;
    rsp.correlation_id = m->correlation_id;
    rsp.header = kr_node_new(&arena, kr_response_header_struct, (int16_t)hv);
    rsp.body = kr_node_new(&arena, root, v);
    keys = kr_array_new(&arena, KR_T_STRUCT,
                        kr_fields[kr_structs[root].first_field +
                                  (unsigned)idx].struct_id, n, v);
    if (rsp.header == NULL || rsp.body == NULL || keys == NULL) {
        goto done;
    }
    if ((x = kr_node_get_id(rsp.header, KR_FIELD_CORRELATION_ID)) != NULL) {
        x->u.i = m->correlation_id;
    }
    for (k = 0; k < KR_TERM_AV_KEYS && j < n; k++) {
        struct kr_node *en = keys->items[j].u.node;

        if (!kr_upstream_api_range(s->rw.upstream, (int16_t)k, &lo, &hi)) {
            continue;
        }
        kr_node_get_id(en, KR_FIELD_API_KEY)->u.i = k;
        kr_node_get_id(en, KR_FIELD_MIN_VERSION)->u.i = lo;
        kr_node_get_id(en, KR_FIELD_MAX_VERSION)->u.i = hi;
        j++;
    }
    keys->n = j;
    x = &rsp.body->vals[idx];
    x->u.arr = keys;
    x->is_null = 0;
    x->present = 1;
    rc = kr_encode_msg(&rsp, &w, &ce);
    if (rc == KR_OK && w.failed) {
        rc = KR_ENOMEM;
    }
    if (rc != KR_OK) {
        goto done;
    }
    rc = KR_ENOMEM;
    pl = evbuffer_new();
    out = evbuffer_new();
    if (pl == NULL || out == NULL || evbuffer_add(pl, w.buf, w.len) != 0) {
        goto done;
    }
    /* shaped as the broker's answer would be (kr_rewrite.h) */
    rc = kr_rewrite_response(&s->rw, KR_API_API_VERSIONS, v, pl, out, &rr);
done:
    kr_wbuf_free(&w);
    kr_arena_free(&arena);
    if (pl != NULL) {
        evbuffer_free(pl);
    }
    if (rc != KR_OK) {
        if (out != NULL) {
            evbuffer_free(out);
        }
        kr_session_close(s, KR_LOG_ERROR, "cannot build the ApiVersions "
                         "answer before SASL authentication: %s",
                         rc == KR_ENOMEM ? "out of memory"
                         : rr.err[0] ? rr.err
                         : ce.msg[0] ? ce.msg : kr_status_str(rc));
        return -1;
    }
    kr_log_debug("[%s] ApiVersions v%d before SASL authentication: answered "
                 "by krelay (%u ApiKeys the cluster offers, %u changed)",
                 s->name, v, n, rr.capped);
    return push_frame(s, e, out);
}

/* What the step came to, in s->sasl (passthrough's record of the
   exchange: the audit line, the sasl_auth_timeout_ms timer) and on the
   connection.  Returns 0, or -1 when closed. */
static int
apply(struct kr_session *s, const struct kr_sasl_srv_result *res,
      int16_t api_key, int16_t ver, bool was_auth, const char *asked,
      int64_t now)
{
    struct kr_sasl *sa = &s->sasl;
    const char *mech = kr_sasl_srv_mech_name(res->mech);
    int level = KR_LOG_NOTICE;

    switch (res->outcome) {
    case KR_SASL_SRV_CONTINUE:
        if (api_key == KR_API_SASL_HANDSHAKE) {
            /* an exchange starts (a re-authentication after one) */
            snprintf(sa->mech_name, sizeof(sa->mech_name), "%s", mech);
            sa->mech = res->mech == KR_SASL_SRV_PLAIN ? KR_SASL_PLAIN
                                                      : KR_SASL_SCRAM;
            sa->auth = KR_SASL_AUTH_STARTED;
            sa->reauth = was_auth;
            sa->started_ms = now;
            sa->handshake_version = ver;
            sa->authenticate_version = -1;
            sa->error_code = -1;
            sa->reason = NULL;
            sa->session_lifetime_ms = -1;
            kr_s_arm_timer(s);
        } else if (api_key == KR_API_SASL_AUTHENTICATE) {
            sa->authenticate_version = ver;
        }
        return 0;
    case KR_SASL_SRV_AUTHENTICATED:
        if (api_key == KR_API_SASL_AUTHENTICATE) {
            sa->authenticate_version = ver;
        }
        if (!set_principal(&sa->principal, s->sasl_srv->user)) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        sa->auth = KR_SASL_AUTH_SUCCEEDED;
        sa->pstate = KR_SASL_PS_VERIFIED;
        sa->authenticated = true;
        sa->token_seen = true;
        sa->error_code = -1;
        sa->session_lifetime_ms = sa->authenticate_version >= 1
                                  ? res->session_lifetime_ms : -1;
        if (kr_s_sasl_outcome(s, KR_SASL_ANS_SUCCESS) != 0) {
            return -1;
        }
        kr_s_up_start(s);               /* the broker, only now */
        return s->dead ? -1 : 0;
    case KR_SASL_SRV_ILLEGAL_STATE:
        if (!res->close) {
            kr_log_info("[%s] %s: answered ILLEGAL_SASL_STATE", s->name,
                        res->why);
            return 0;
        }
        return kr_s_close_after_owed(s, KR_LOG_NOTICE, "SASL: %s%s; "
                                     "closing", res->why,
                                     api_key == KR_API_SASL_HANDSHAKE
                                         ? " (answered ILLEGAL_SASL_STATE)"
                                         : "");
    case KR_SASL_SRV_NO_MEMORY:
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    case KR_SASL_SRV_UNSUPPORTED_MECHANISM:
        snprintf(sa->mech_name, sizeof(sa->mech_name), "%s", asked);
        sa->auth = KR_SASL_AUTH_FAILED;
        sa->reauth = was_auth;
        sa->handshake_version = ver;
        sa->authenticate_version = -1;
        sa->error_code = KR_KERR_UNSUPPORTED_SASL_MECHANISM;
        sa->reason = kr_sasl_srv_reason_name(res->reason);
        kr_s_sasl_audit(s);
        KR_STAT_INC(s->host->stats, sasl_failures);
        return kr_s_close_after_owed(s, KR_LOG_NOTICE, "SASL mechanism "
                                     "\"%s\" is not enabled on this listener "
                                     "(sasl_mechanisms): answered "
                                     "UNSUPPORTED_SASL_MECHANISM; closing "
                                     "after the answer", asked);
    case KR_SASL_SRV_FAILED:
    case KR_SASL_SRV_MALFORMED:
    case KR_SASL_SRV_RATE_LIMITED:
        break;
    }
    /* refused: the claimed principal for the audit line, one log line
       (no secret: the reason is kr_sasl_server's static text) */
    if (res->outcome == KR_SASL_SRV_MALFORMED) {
        level = KR_LOG_WARN;
    }
    if (!set_principal(&sa->principal, res->user)) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (api_key == KR_API_SASL_AUTHENTICATE) {
        sa->authenticate_version = ver;
    }
    sa->pstate = res->user != NULL ? KR_SASL_PS_CLAIMED : KR_SASL_PS_NONE;
    sa->auth = KR_SASL_AUTH_FAILED;
    sa->error_code = api_key == KR_API_SASL_AUTHENTICATE
                     ? KR_KERR_SASL_AUTHENTICATION_FAILED : -1;
    sa->reason = kr_sasl_srv_reason_name(res->reason);
    kr_s_sasl_audit(s);
    KR_STAT_INC(s->host->stats, sasl_failures);
    /* no user read (a login refused by the rate before its token was
       read, a token that does not parse): none named */
    return kr_s_close_after_owed(s, level, "SASL %s %sauthentication "
                                 "failed%s%s: %s; closing after the "
                                 "answer%s", mech, was_auth ? "re-" : "",
                                 sa->principal != NULL ? " for " : "",
                                 sa->principal != NULL ? sa->principal : "",
                                 res->why,
                                 api_key == KR_API_SASL_AUTHENTICATE
                                     ? " (SASL_AUTHENTICATION_FAILED)"
                                     : " (raw token: none)");
}

int
kr_s_term_step(struct kr_session *s, struct kr_nreq *nr)
{
    struct kr_sasl_srv *t = s->sasl_srv;
    struct kr_sasl_srv_result res;
    struct kr_inflight e = nr->e;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_msg m, rsp;
    struct kr_wbuf w;
    char asked[KR_SASL_MECH_NAME_MAX + 1] = "";
    /* the step's start (the login rate's time); a login's lifetime
       starts at its end, read by kr_sasl_server after the check */
    int64_t now = kr_clock_timer_ms();
    bool was_auth = t->authenticated;
    int16_t key = -1, ver = -1;
    uint8_t *buf;
    int rc, ret;

    buf = malloc(nr->flen > 0 ? nr->flen : 1);
    if (buf == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    evbuffer_drain(s->client.in, KR_FRAME_PREFIX);
    if (evbuffer_remove(s->client.in, buf, nr->flen) != (int)nr->flen) {
        free(buf);
        kr_session_close(s, KR_LOG_ERROR, "internal: SASL frame cut short");
        return -1;
    }
    KR_STAT_INC(s->host->stats, requests);
    s->nrequests++;
    KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, KR_FRAME_PREFIX + nr->flen);
    if (t->cfg == NULL && !nr->term_av) {
        OPENSSL_cleanse(buf, nr->flen);
        free(buf);
        kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                       "SASL step after a reload took "
                       "sasl = terminate off this listener: closed");
        return -1;
    }
    memset(&w, 0, sizeof(w));
    if (nr->term_raw) {
        KR_STAT_INC(s->host->stats, sasl_tokens);
        kr_sasl_srv_raw(t, buf, nr->flen, now, &res);
        OPENSSL_cleanse(buf, nr->flen);
        free(buf);
        ret = 0;
        if (res.raw != NULL) {
            ret = push_answer(s, &e, res.raw, res.raw_len);
            OPENSSL_cleanse(res.raw, res.raw_len);
            free(res.raw);
        }
        return ret != 0 ? -1 : apply(s, &res, -1, -1, was_auth, "", now);
    }
    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    kr_rbuf_init_flat(&rb, &iov, buf, nr->flen);
    rc = kr_decode_request(&arena, &rb, 0, &m, &ce);
    if (nr->term_av && rc == KR_OK && m.api_key == KR_API_API_VERSIONS) {
        KR_STAT_INC_L(s->host->stats, api_requests,
                      kr_stats_api_cell(m.api_key, m.api_version));
        e.correlation_id = m.correlation_id;
        e.api_key = m.api_key;
        e.api_version = m.api_version;
        ret = av_answer(s, &e, &m);
        free(buf);
        kr_arena_free(&arena);
        return ret;
    }
    if (rc != KR_OK || nr->term_av ||
        (m.api_key != KR_API_SASL_HANDSHAKE &&
         m.api_key != KR_API_SASL_AUTHENTICATE)) {
        OPENSSL_cleanse(buf, nr->flen);
        free(buf);
        kr_arena_free(&arena);
        kr_s_close_bad(s, rc != KR_OK ? KR_REFUSAL_UNDECODABLE
                                      : KR_REFUSAL_UNEXPECTED,
                       KR_LOG_WARN, "malformed %s request (%zu bytes) "
                       "before SASL authentication: %s%s%.60s",
                       nr->term_av ? "ApiVersions" : "SASL", nr->flen,
                       rc != KR_OK ? (ce.msg[0] ? ce.msg : kr_status_str(rc))
                                   : "not SaslHandshake or SaslAuthenticate",
                       ce.path[0] ? " at " : "", ce.path);
        return -1;
    }
    KR_STAT_INC_L(s->host->stats, api_requests,
                  kr_stats_api_cell(m.api_key, m.api_version));
    key = m.api_key;
    ver = m.api_version;
    e.correlation_id = m.correlation_id;
    e.api_key = m.api_key;
    e.api_version = m.api_version;
    e.kind = KR_INF_REQUEST;
    if (key == KR_API_SASL_HANDSHAKE) {
        mech_copy(asked, &m);
    }
    kr_sasl_srv_request(t, &arena, &m, now, &rsp, &res);
    rc = KR_OK;
    if (res.has_rsp) {
        rc = kr_encode_msg(&rsp, &w, &ce);
        if (rc == KR_OK && w.failed) {
            rc = KR_ENOMEM;
        }
    }
    OPENSSL_cleanse(buf, nr->flen);
    free(buf);
    kr_arena_free(&arena);
    if (rc != KR_OK) {
        kr_wbuf_free(&w);
        kr_session_close(s, KR_LOG_ERROR, "cannot encode the SASL answer: "
                         "%s", ce.msg[0] ? ce.msg : kr_status_str(rc));
        return -1;
    }
    ret = res.has_rsp ? push_answer(s, &e, w.buf, w.len) : 0;
    if (w.buf != NULL) {
        OPENSSL_cleanse(w.buf, w.len);  /* SCRAM's server messages */
    }
    kr_wbuf_free(&w);
    if (ret != 0) {
        return -1;
    }
    return apply(s, &res, key, ver, was_auth, asked, now);
}
