/*
 * kr_session_sasl.c - SASL origination on a client's upstream connection
 * (issue 9): krelay authenticates to the broker itself, with its own
 * requests (kr_session_internal_request, KR_INF_INTERNAL), before any
 * client request goes on, and re-authenticates before the session
 * lifetime the broker gave runs out (KIP-368).  The exchange itself is
 * kr_sasl_client's; this file drives it with the session.
 *
 *   kr_session_new --> kr_s_orig_init: orig_hold (client requests wait in
 *                      client.in: process_requests stops at the gate and
 *                      sets req_blocked, so the client is not read on)
 *   up_connected   --> kr_s_orig_connected: the first request
 *   orig_cb        <-- each response (never the client's): the next
 *                      request, or DONE: orig_hold off (the upstream
 *                      read that brought it resumes the client's
 *                      requests: req_blocked), the re-authentication
 *                      timer armed at 85-95 % of SessionLifetimeMs; or a
 *                      failure: the client is closed, one line naming the
 *                      upstream, the mechanism and the broker's message
 *   reauth timer   --> orig_hold again: no new client request goes on;
 *                      kr_s_orig_poll starts the exchange once every
 *                      client request in flight was answered (after each
 *                      upstream read, and every KR_ORIG_POLL_MS)
 *
 * Credentials are the session's config generation's ([upstream] sasl_*,
 * kr_s_upconf: its upstream's latest section, taken at each exchange: a
 * reload's password file applies to the next re-authentication).  No
 * secret reaches a log line.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "kr_api_keys.h"
#include "kr_clock.h"
#include "kr_inflight.h"
#include "kr_log.h"
#include "kr_sasl_client.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_upstream.h"
#include "kr_session_int.h"

/* How often a due re-authentication looks again for a quiet moment. */
#define KR_ORIG_POLL_MS 20
/* CorrelationIds of krelay's own SASL requests: far from a client's. */
#define KR_ORIG_CORR_BASE 0x4b520000

struct kr_s_orig {
    struct kr_sasl_client *sc;          /* the exchange under way, NULL */
    struct event *timer;                /* re-authentication, then polls */
    int16_t auth_max;                   /* SaslAuthenticate MaxVersion
                                           seen, -1: unknown */
    bool due;                           /* a re-authentication waits for
                                           the client's requests */
    bool reauth;                        /* the exchange re-authenticates */
    int32_t corr;                       /* next CorrelationId */
    uint64_t n;                         /* exchanges completed */
    int64_t started_ms;                 /* the exchange's start */
};

static void orig_cb(struct kr_session *s, void *arg, int16_t key,
                    int16_t ver, struct evbuffer *payload);

static const struct kr_sasl_cred *
creds(const struct kr_session *s)
{
    return &kr_s_upconf(s)->sasl;
}

static const char *
user_of(const struct kr_sasl_cred *c)
{
    return c->mechanism == KR_SASL_MECH_OAUTHBEARER || c->username == NULL
               ? "" : c->username;
}

int
kr_s_orig_init(struct kr_session *s)
{
    if (kr_s_upconf(s) == NULL || kr_s_upconf(s)->sasl.mechanism == 0) {
        return 0;
    }
    s->orig = calloc(1, sizeof(*s->orig));
    if (s->orig == NULL) {
        return -1;
    }
    s->orig->auth_max = -1;
    s->orig->corr = KR_ORIG_CORR_BASE;
    s->orig_hold = 1;
    return 0;
}

/* Send the exchange's current request.  0, or -1 when closed. */
static int
send_req(struct kr_session *s)
{
    const struct kr_sasl_client_req *r = kr_sasl_client_request(s->orig->sc);
    int rc;

    rc = kr_session_internal_request(s, r->frame, r->len, r->api_key,
                                     r->api_version, r->correlation_id,
                                     orig_cb, NULL);
    if (rc != KR_OK) {
        kr_session_close(s, KR_LOG_ERROR, "cannot send krelay's own %s "
                         "request to upstream %s: %s", kr_s_api_name(r->api_key),
                         s->upname, rc == KR_ENOMEM ? "out of memory"
                                                    : "the connection is busy");
        return -1;
    }
    s->orig->corr = r->correlation_id + 1;
    return 0;
}

/* The exchange failed (outcome o): the client goes, one line. */
static int
orig_failed(struct kr_session *s, enum kr_sasl_client_outcome o)
{
    const struct kr_sasl_cred *c = creds(s);
    const char *user = user_of(c);

    KR_STAT_INC(s->host->stats, sasl_authentication_failures);
    kr_s_close_up(s, KR_LOG_WARN, "SASL %sauthentication to upstream %s "
                  "failed (%s%s%s%s): %s: %s",
                  s->orig->reauth ? "re-" : "", s->upname,
                  kr_sasl_mechanism_name(c->mechanism),
                  user[0] != '\0' ? ", user \"" : "", user,
                  user[0] != '\0' ? "\"" : "",
                  kr_sasl_client_outcome_str(o),
                  s->orig->sc != NULL ? kr_sasl_client_message(s->orig->sc)
                                      : "out of memory");
    return -1;
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;

    (void)fd;
    (void)what;
    s->depth++;
    /* never during an exchange: its end arms the next re-authentication */
    if (!s->dead && s->orig != NULL && s->orig->sc == NULL) {
        if (!s->orig->due) {
            /* from now on no new client request goes on */
            s->orig->due = true;
            s->orig_hold = 1;
            kr_log_debug("[%s] SASL re-authentication due: holding new "
                         "requests until the %u in flight are answered",
                         s->name, kr_inflight_expected(&s->fifo));
        }
        (void)kr_s_orig_poll(s);
    }
    kr_s_leave(s);
}

static void
timer_in(struct kr_session *s, int64_t ms)
{
    struct timeval tv;

    if (s->orig->timer == NULL) {
        s->orig->timer = evtimer_new(s->host->base, timer_cb, s);
        if (s->orig->timer == NULL) {
            kr_log_rl(KR_LOG_ERROR, "[%s] out of memory: no SASL "
                      "re-authentication timer (the broker will close the "
                      "connection at the end of its session)", s->name);
            return;
        }
    }
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    event_add(s->orig->timer, &tv);
}

/* Start an exchange.  0, or -1 when closed. */
static int
orig_start(struct kr_session *s, bool reauth)
{
    const struct kr_sasl_cred *c = creds(s);
    struct kr_sasl_client_creds cr;
    enum kr_sasl_client_outcome o;
    int16_t lo, hi;

    memset(&cr, 0, sizeof(cr));
    cr.mechanism = (enum kr_sasl_mechanism)c->mechanism;
    cr.username = c->username;
    cr.password = c->secret;
    cr.password_len = c->secret_len;
    cr.token_file = c->token_file;
    cr.token = c->token;
    if (s->orig->auth_max < 0 && s->rw.upstream != NULL &&
        kr_upstream_api_range(s->rw.upstream, KR_API_SASL_AUTHENTICATE, &lo, &hi)) {
        /* the cluster's, as its metadata connection saw it */
        s->orig->auth_max = hi;
    }
    /* a poll still pending (the exchange started from an upstream read)
       would otherwise fire during the exchange and mark a re-authentication
       due again at once: a second SaslHandshake right after this one's
       success, which a broker answers ILLEGAL_SASL_STATE (within 1 s of
       the last, Kafka's KafkaChannel) and krelay closes the client for */
    if (s->orig->timer != NULL) {
        event_del(s->orig->timer);
    }
    kr_sasl_client_free(s->orig->sc);
    s->orig->reauth = reauth;
    s->orig->started_ms = kr_clock_timer_ms();
    s->orig->sc = kr_sasl_client_new(&cr, s->orig->auth_max, s->orig->corr);
    if (s->orig->sc == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    o = kr_sasl_client_start(s->orig->sc);
    if (o != KR_SASL_CLIENT_SEND) {
        return orig_failed(s, o);
    }
    return send_req(s);
}

int
kr_s_orig_connected(struct kr_session *s)
{
    if (s->orig == NULL || s->dead) {
        return 0;
    }
    return orig_start(s, false);
}

int
kr_s_orig_poll(struct kr_session *s)
{
    struct kr_s_orig *o = s->orig;

    if (o == NULL || !o->due || o->sc != NULL || s->dead) {
        return s->dead ? -1 : 0;
    }
    if (s->closing || s->draining) {
        return 0;                       /* ending anyway */
    }
    if (kr_inflight_expected(&s->fifo) > 0 || kr_s_rsp_mid(s) ||
        s->req_remain > 0 || s->upl.left > 0 || s->upl.queued > 0 ||
        !s->up.connected) {
        timer_in(s, KR_ORIG_POLL_MS);
        return 0;
    }
    o->due = false;
    return orig_start(s, true);
}

static void
orig_cb(struct kr_session *s, void *arg, int16_t key, int16_t ver,
        struct evbuffer *payload)
{
    struct kr_s_orig *o;
    enum kr_sasl_client_outcome out;
    const uint8_t *p;
    size_t len;
    int64_t life, at;

    (void)arg;
    if (payload == NULL || s->dead || s->orig == NULL ||
        s->orig->sc == NULL) {
        return;                         /* closing: s is being freed */
    }
    o = s->orig;
    len = evbuffer_get_length(payload);
    p = evbuffer_pullup(payload, -1);
    if (p == NULL && len > 0) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    if (key == KR_API_API_VERSIONS && s->av == NULL) {
        int16_t code;
        char why[8];

        /* issue 10: what this broker accepts (legacy translation), so
           that kr_session_av.c has nothing to ask */
        (void)kr_s_av_learn(s, ver, payload, &code, why, sizeof(why));
    }
    out = kr_sasl_client_feed(o->sc, p, len);
    if (out == KR_SASL_CLIENT_SEND) {
        (void)send_req(s);
        return;
    }
    if (out != KR_SASL_CLIENT_DONE) {
        (void)orig_failed(s, out);
        return;
    }
    /* authenticated */
    if (o->auth_max < 0) {
        o->auth_max = kr_sasl_client_auth_version(o->sc);
    }
    life = kr_sasl_client_lifetime_ms(o->sc);
    o->n++;
    KR_STAT_INC(s->host->stats, sasl_authentications);
    if (o->reauth) {
        KR_STAT_INC(s->host->stats, sasl_reauthentications);
    }
    kr_log_debug("[%s] SASL %sauthenticated to upstream %s (%s) in %" PRId64
                 " ms; session lifetime %" PRId64 " ms", s->name,
                 o->reauth ? "re-" : "", s->upname,
                 kr_sasl_mechanism_name(creds(s)->mechanism),
                 kr_clock_timer_ms() - o->started_ms, life);
    kr_sasl_client_free(o->sc);
    o->sc = NULL;
    o->reauth = false;
    s->orig_hold = 0;
    if (life > 0) {
        s->rng ^= s->rng << 13;
        s->rng ^= s->rng >> 7;
        s->rng ^= s->rng << 17;
        at = kr_sasl_client_reauth_after_ms(life, s->rng);
        /* counted from the exchange's start, as the broker counts */
        at -= kr_clock_timer_ms() - o->started_ms;
        timer_in(s, at > 0 ? at : 0);
    }
    /* the upstream read that brought this resumes the client's requests
       (req_blocked); the deadline changes from this request's */
    kr_s_arm_timer(s);
}

int
kr_s_orig_client_sasl(struct kr_session *s, const struct kr_req_hdr *h)
{
    kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_WARN,
                   "client sent %s v%d, but "
                   "krelay authenticates to upstream %s itself (its "
                   "[upstream] sets sasl_mechanism): the client's "
                   "credentials would never reach the broker; configure "
                   "the client without SASL",
                   h->api_key == KR_API_SASL_HANDSHAKE ? "SaslHandshake"
                                                       : "SaslAuthenticate",
                   h->api_version,
                   s->upname[0] != '\0' ? s->upname : "(connecting)");
    return -1;
}

void
kr_s_orig_free(struct kr_session *s)
{
    if (s->orig == NULL) {
        return;
    }
    if (s->orig->timer != NULL) {
        event_free(s->orig->timer);
    }
    kr_sasl_client_free(s->orig->sc);
    free(s->orig);
    s->orig = NULL;
}
