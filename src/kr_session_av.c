/*
 * kr_session_av.c - krelay's own ApiVersions on a client's upstream
 * connection (issue 10: "per upstream it knows what the brokers accept:
 * learned from their ApiVersions, krelay asks on the client's upstream
 * connection if the client did not").
 *
 * Legacy translation decides per request (kr_analyse_legacy_route) from
 * what the connection's broker accepts: its ApiVersions answer (s->av),
 * else [upstream] broker_profile, else what krelay's own metadata
 * connection learned for the whole cluster (kr_upstream_api_range).  An
 * old client that sends no ApiVersions (librdkafka with
 * api.version.request=false, kafka-python with an explicit api_version,
 * kafka-node) leaves s->av empty, and the cluster's ranges may be
 * missing (a client there before krelay's first metadata fetch ended, or
 * after it failed) or another broker's (a rolling upgrade).  So before
 * the first request of such a client whose version Kafka 4 removed
 * (kr_bv_legacy_range), krelay asks the broker itself:
 *
 *   next_request   --> kr_s_av_wanted: NREQ_ASK (nothing of the frame
 *                      consumed, nothing pushed)
 *   process_requests --> what was scanned before it goes up first, then
 *                      kr_s_av_ask: av_hold (the client's requests wait
 *                      in client.in, in order: the gate at the top of
 *                      process_requests sets req_blocked), ApiVersions
 *                      v0 as krelay's own request (KR_INF_INTERNAL,
 *                      ClientId "krelay", CorrelationId KR_SESSION_AV_CORR);
 *                      when up.out cannot take it yet (a spliced request
 *                      still in the pipe) a timer tries again
 *   av_cb          <-- its answer, never the client's: the ranges in
 *                      s->av (kr_s_av_learn), av_hold off; the upstream
 *                      read that brought it resumes the client's requests
 *                      (req_blocked), the first one now routed on what
 *                      the broker said.  An answer that does not decode,
 *                      an ErrorCode, no ApiKeys: the connection closes
 *                      with one line (the broker answers what krelay
 *                      cannot use); no answer: request_timeout_margin_ms,
 *                      the one timeout line for krelay's own requests.
 *
 * v0, not v3+: every broker since 0.10.0, Kafka 4 included (ApiVersions
 * 0-4 in 4.x, KIP-896 removed none), answers v0, and its answer lists
 * the same ranges; no KIP-511 fallback to follow.  Asked once per
 * connection, only when [upstream] broker_profile is "learned" (a
 * profile is what the operator asserts: it wins, no question asked), and
 * on listeners with translate_legacy on or off (off: the refusal names
 * what to enable only when krelay knows the broker refuses).  SASL
 * origination's own ApiVersions (kr_session_sasl.c) teaches s->av too,
 * so that connection asks nothing more.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "kr_api_keys.h"
#include "kr_arena.h"
#include "kr_broker_versions.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_common.h"
#include "kr_evcodec.h"
#include "kr_log.h"
#include "kr_schema.h"
#include "kr_session.h"
#include "kr_upstream.h"
#include "kr_session_int.h"

/* ClientId of krelay's own requests (kr_upstream's, kr_sasl_client's). */
#define KR_S_AV_CLIENT_ID "krelay"
/* How often an ApiVersions up.out cannot take yet is tried again. */
#define KR_S_AV_POLL_MS 5

const char *
kr_s_av_learned_str(enum kr_s_av_learned o)
{
    switch (o) {
    case KR_S_AV_OK:
        return "learned";
    case KR_S_AV_ERROR_CODE:
        return "an ErrorCode";
    case KR_S_AV_NO_KEYS:
        return "no ApiKeys";
    case KR_S_AV_UNDECODABLE:
        return "does not decode";
    case KR_S_AV_NOMEM:
        return "out of memory";
    }
    return "?";
}

enum kr_s_av_learned
kr_s_av_learn(struct kr_session *s, int16_t ver, struct evbuffer *pl,
              int16_t *err_code, char *why, size_t whylen)
{
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct kr_msg m;
    const struct kr_val *ec, *keys;
    enum kr_s_av_learned o = KR_S_AV_OK;
    uint32_t i, n = 0;
    int rc;

    *err_code = 0;
    if (whylen > 0) {
        why[0] = '\0';
    }
    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    rc = kr_evcodec_view(pl, stack, (int)KR_ARRAY_LEN(stack), &heap, &rb);
    if (rc == KR_OK) {
        rc = kr_decode_response(&arena, &rb, KR_API_API_VERSIONS, ver, 0, &m,
                                &ce);
    }
    if (rc != KR_OK) {
        o = rc == KR_ENOMEM ? KR_S_AV_NOMEM : KR_S_AV_UNDECODABLE;
        snprintf(why, whylen, "%s", ce.msg[0] != '\0' ? ce.msg
                                                      : kr_status_str(rc));
        goto out;
    }
    ec = kr_node_get_id(m.body, KR_FIELD_ERROR_CODE);
    keys = kr_node_get_id(m.body, KR_FIELD_API_KEYS);
    if (ec != NULL && ec->u.i != 0) {
        *err_code = (int16_t)ec->u.i;
        o = KR_S_AV_ERROR_CODE;
        goto out;
    }
    if (keys == NULL || keys->u.arr == NULL || keys->u.arr->n == 0) {
        o = KR_S_AV_NO_KEYS;
        goto out;
    }
    if (s->av == NULL) {
        s->av = malloc(((size_t)kr_api_max + 1) * sizeof(*s->av));
        if (s->av == NULL) {
            o = KR_S_AV_NOMEM;
            goto out;
        }
    }
    for (i = 0; i <= (uint32_t)kr_api_max; i++) {
        s->av[i].min = 1;
        s->av[i].max = 0;
    }
    for (i = 0; i < keys->u.arr->n; i++) {
        const struct kr_node *e = keys->u.arr->items[i].u.node;
        const struct kr_val *k, *lo, *hi;

        if (e == NULL || (k = kr_node_get_id(e, KR_FIELD_API_KEY)) == NULL ||
            (lo = kr_node_get_id(e, KR_FIELD_MIN_VERSION)) == NULL ||
            (hi = kr_node_get_id(e, KR_FIELD_MAX_VERSION)) == NULL) {
            continue;
        }
        if (k->u.i >= 0 && k->u.i <= kr_api_max && lo->u.i >= 0 &&
            lo->u.i <= hi->u.i && hi->u.i <= INT16_MAX) {
            s->av[k->u.i].min = (int16_t)lo->u.i;
            s->av[k->u.i].max = (int16_t)hi->u.i;
            n++;
        }
    }
    if (n == 0) {
        /* nothing usable: as if none had been seen */
        free(s->av);
        s->av = NULL;
        o = KR_S_AV_NO_KEYS;
    }
out:
    free(heap);
    kr_arena_free(&arena);
    return o;
}

bool
kr_s_av_wanted(struct kr_session *s, int16_t key, int16_t ver)
{
    int16_t lo, hi;

    /* the cheap tests first: every modern request leaves at the first */
    if (s->av != NULL || s->av_asked || !kr_bv_legacy_range(key, &lo, &hi) ||
        ver < lo || ver > hi) {
        return false;
    }
    /* a profile wins: nothing to ask */
    return s->lc->up != NULL &&
           s->lc->up->broker_profile == KR_BROKER_PROFILE_LEARNED;
}

static void av_cb(struct kr_session *s, void *arg, int16_t key, int16_t ver,
                  struct evbuffer *payload);

/* ApiVersions v0 with krelay's ClientId and CorrelationId, encoded by the
   codec into *w (its buffer the caller's to free).  KR_OK or an error. */
static int
av_request(struct kr_wbuf *w)
{
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_msg m;
    int rc;

    memset(w, 0, sizeof(*w));
    memset(&ce, 0, sizeof(ce));
    kr_arena_init(&arena, 0);
    rc = kr_msg_request_new(&arena, &m, KR_API_API_VERSIONS, 0,
                            KR_SESSION_AV_CORR, KR_S_AV_CLIENT_ID);
    if (rc == KR_OK) {
        rc = kr_encode_msg(&m, w, &ce);
        if (rc == KR_OK && w->failed) {
            rc = KR_ENOMEM;
        }
    }
    kr_arena_free(&arena);
    return rc;
}

/* Send the ApiVersions when up.out can take it (else the timer tries
   again).  0, or -1 when closed. */
static int
av_send(struct kr_session *s)
{
    struct kr_wbuf w;
    struct timeval tv = { 0, KR_S_AV_POLL_MS * 1000 };
    int rc;

    if (s->dead || s->closing || s->draining) {
        return s->dead ? -1 : 0;        /* ending anyway */
    }
    rc = av_request(&w);
    if (rc == KR_OK) {
        rc = kr_session_internal_request(s, w.buf, w.len, KR_API_API_VERSIONS,
                                         0, KR_SESSION_AV_CORR, av_cb, NULL);
    }
    kr_wbuf_free(&w);
    if (rc == KR_AGAIN) {
        /* a request's spliced bytes still go up before it: soon */
        if (s->av_timer == NULL) {
            s->av_timer = evtimer_new(s->host->base, kr_s_av_timer_cb, s);
        }
        if (s->av_timer == NULL || event_add(s->av_timer, &tv) != 0) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        return 0;
    }
    if (rc != KR_OK) {
        kr_session_close(s, KR_LOG_ERROR, "cannot send krelay's own "
                         "ApiVersions request to upstream %s: %s", s->upname,
                         rc == KR_ENOMEM ? "out of memory"
                                         : kr_status_str(rc));
        return -1;
    }
    s->av_sent = 1;
    s->av_asked_ms = kr_clock_timer_ms();
    return 0;
}

void
kr_s_av_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;

    (void)fd;
    (void)what;
    s->depth++;
    if (!s->dead && s->av_hold && !s->av_sent) {
        (void)av_send(s);       /* up_write_cb writes it */
    }
    kr_s_leave(s);
}

int
kr_s_av_ask(struct kr_session *s, const struct kr_req_hdr *h)
{
    s->av_asked = 1;
    s->av_hold = 1;
    s->av_sent = 0;
    kr_log_debug("[%s] krelay asks upstream %s for its ApiVersions v0 "
                 "before %s v%d CorrelationId %d (the client sent none; no "
                 "broker_profile)", s->name,
                 s->upname[0] != '\0' ? s->upname : "(connecting)",
                 kr_s_api_name(h->api_key), h->api_version,
                 h->correlation_id);
    return av_send(s);
}

/* What a Produce request would meet, for the log line: "Kafka 4
   (Produce from v3)" or "Produce from v0". */
static void
av_summary(const struct kr_session *s, char *buf, size_t len)
{
    int16_t pmin = kr_bv_learned_min(s->av, KR_API_PRODUCE);

    snprintf(buf, len, "%sProduce from v%d", kr_bv_is_kafka4(s->av)
                                                 ? "Kafka 4, " : "", pmin);
}

static void
av_cb(struct kr_session *s, void *arg, int16_t key, int16_t ver,
      struct evbuffer *payload)
{
    enum kr_s_av_learned o;
    char why[160], sum[64];
    int16_t code;

    (void)arg;
    (void)key;
    if (payload == NULL || s->dead) {
        return;                         /* closing: s is being freed */
    }
    o = kr_s_av_learn(s, ver, payload, &code, why, sizeof(why));
    if (o == KR_S_AV_NOMEM) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    if (o != KR_S_AV_OK) {
        char what[200];

        if (o == KR_S_AV_ERROR_CODE) {
            snprintf(what, sizeof(what), "ErrorCode %d", code);
        } else if (o == KR_S_AV_UNDECODABLE) {
            snprintf(what, sizeof(what), "a response that does not decode "
                     "(%.150s)", why);
        } else {
            snprintf(what, sizeof(what), "no ApiKeys");
        }
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s answered krelay's own "
                      "ApiVersions v%d with %s: krelay cannot tell which "
                      "versions it accepts, and the client's requests "
                      "below Kafka 4's wait for that (set [upstream] "
                      "broker_profile to do without)", s->upname, ver, what);
        return;
    }
    av_summary(s, sum, sizeof(sum));
    kr_log_debug("[%s] upstream %s answered krelay's own ApiVersions v%d: "
                 "%s (in %" PRId64 " ms)", s->name, s->upname, ver, sum,
                 kr_clock_timer_ms() - s->av_asked_ms);
    s->av_hold = 0;
    /* the upstream read that brought this resumes the client's requests
       (req_blocked), as after SASL origination */
    kr_s_arm_timer(s);
}

void
kr_s_av_free(struct kr_session *s)
{
    if (s->av_timer != NULL) {
        event_free(s->av_timer);
        s->av_timer = NULL;
    }
}
