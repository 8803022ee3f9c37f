/*
 * kr_session.c - one client connection, its upstream connection, and
 * the frames between them.
 *
 *            client                  krelay                    upstream
 *                                                              (broker)
 *   accept --------> kr_session_new
 *                    kr_upstream_resolve(NodeId | bootstrap)
 *                         `--> resolved_cb --> up_connect ------> connect
 *
 *   requests:
 *     bytes ---(a)--> client.in
 *                      |  process_requests: per frame
 *                      |   (b) size prefix: sniff TLS/HTTP, limits
 *                      |   (c) kr_frame_peek_request: ApiKey, ApiVersion,
 *                      |       CorrelationId, ClientId
 *                      |   (d) table-driven peek of leading fields: Acks,
 *                      |       TimeoutMs, MaxWaitMs, RebalanceTimeoutMs
 *                      |   (e) req_hold? (SaslHandshake: decode Mechanism)
 *                      |   (f) fifo_push {CorrelationId, ApiKey, ApiVersion,
 *                      |       time, wait}   (Produce Acks=0: "optional")
 *                      v
 *                    cut-through: evbuffer_add_buffer/remove_buffer
 *                      (whole frame or the part read so far: req_remain)
 *                      v
 *                    up.out ------------------(g) writev---------> broker
 *
 *   responses:
 *     client <--(m)-- client.out <--------------------------- up.in <-- bytes
 *                      ^                                       |
 *                      |                      process_responses: per frame
 *                      |                (h) size prefix, CorrelationId ==
 *                      |                    fifo head? else close
 *                      |                (i) rsp_hold? (kr_rewrite_wants)
 *                      |                     no: cut-through (rsp_remain)
 *                      |                     yes: wait for the whole frame,
 *                      |                          move it to s->hold,
 *                      +------ kr_rewrite_response(hold -> client.out)
 *                                       (j) fifo_pop; SaslHandshake v0 OK
 *                                           -> raw SASL token frames
 *
 *   rules (issue 3, kr_rule.h): in next_request one table lookup per
 *   frame (kr_rule_lookup, per (ApiKey, ApiVersion) and this connection's
 *   rule mask); NULL keeps the frame on the path above.  Otherwise the
 *   whole frame is taken out of client.in (rule_request), decoded,
 *   evaluated (kr_rule_eval -> struct kr_verdict in a struct kr_rq on the
 *   FIFO entry) and then
 *     deny / produce policy / impossible clamp: answered locally with
 *       kr_action_error_response; the frame built waits in rq->out
 *       ("ready") for its turn behind the responses still in flight;
 *     clamp: translated (kr_translate_msg), re-encoded, records chains
 *       moved (kr_evcodec_emit); its response is translated back;
 *     otherwise forwarded as is.
 *   Responses match the oldest entry not ready (fifo_waiting).  One of a
 *   rule entry, or one behind a ready entry, is held whole (rule_response:
 *   translate back, fault error / ThrottleTimeMs, kr_rewrite_response,
 *   audit line) into rq->out with a release time (fault latency, enforce
 *   hold); flush_ready moves ready entries from the FIFO head to
 *   client.out in order as their time comes (rtimer).  Throttle enforce:
 *   no further request is read while a throttled one is in flight
 *   (enforce_wait), and after a KIP-219 response none for its throttle
 *   time (paused_until_ms), as a broker mutes the channel.  ApiVersions:
 *   the connection's clamps go into rw.clamps for kr_rewrite; one newer
 *   than krelay knows is answered locally (KIP-511).  A reload swaps the
 *   worker's config: conf_refresh picks it up before the next request.
 *
 *   fail-safe (issue 13): a frame krelay cannot decode never slips past
 *   an enforcing rule.  In next_request a request whose (ApiKey,
 *   ApiVersion) the tables lack goes through kr_rule_gate (header only,
 *   its own ClientId): REFUSE -> refuse_request (nothing forwarded from
 *   it on, close after the responses owed); OBSERVE -> cut-through with
 *   an rq whose audit line is written with the response.  A known one
 *   that does not decode in rule_request goes to undecodable_request
 *   (INVALID_REQUEST, refusal, or forwarded unchanged).  A response that
 *   does not decode for observing rules (rsp_undecodable) or is above
 *   max_frame_bytes for them (rsp_let_go) goes on unchanged.
 *
 *   backpressure (update_io): read the client only while up.out <
 *   max_buffer_bytes (and < KR_OUT_CHAINS chains) and fewer than
 *   max_inflight requests wait; read the upstream only while client.out
 *   < max_buffer_bytes (and < KR_OUT_CHAINS chains).
 *   timer (arm_timer): connect_timeout_ms until connected; then the head
 *   request's own wait + request_timeout_margin_ms; idle_timeout_ms when
 *   nothing is in flight.
 *   Produce with Acks=0 (push_optional): Kafka never answers it, but
 *   some brokers (librdkafka's mock) do, so it stays in the FIFO as an
 *   optional entry: a response with its CorrelationId is dropped
 *   (rsp_drop), one for a later request skips it (and marks the upstream
 *   acks0_silent: none are kept from then on).  Optional entries count
 *   neither for max_inflight nor for the request timeout.
 *   timeout while reading the upstream is paused for backpressure: the
 *   client is not reading its responses (blamed on it, not the broker).
 *   every close: kr_session_close (one log line, both sides freed).
 *
 * I/O uses raw events: one readv of up to 256 KiB into
 * evbuffer_reserve_space per readable event, and one writev
 * (evbuffer_write) per flush; events are added/removed only when the
 * backpressure state changes (bufferevents read 4 KiB at a time with an
 * ioctl per read: half the throughput, measured).  Forwarded bytes are
 * moved, never copied by krelay (move_bytes): when every byte read can
 * be forwarded the whole chain list moves (evbuffer_add_buffer);
 * otherwise evbuffer_remove_buffer moves whole chains and libevent
 * copies the head of the one chain a frame boundary splits, only where
 * parsing stopped at a frame boundary with the next frame incomplete or
 * held (counted in stats.bytes_copied).  A backlog of mostly empty
 * chains is bounded by counting chains (out_full), not by copying.
 *
 * splice lanes (issue 4, struct kr_splice): when what a socket sends
 * next is a run of at least splice_min_bytes that krelay does not read
 * (the rest of a cut-through frame, req_remain / rsp_remain; in a
 * streamed response the value kr_scan skips next, kr_scan_skippable: a
 * partition's records), and nothing read from it waits in user space,
 * the run goes socket -> pipe (lane_fill) -> socket (lane_drain, after
 * the sink's out buffer) with splice(2), never through krelay's memory;
 * the scanner or the remain count is told how far (kr_scan_skip).  While
 * a lane's pipe holds bytes the sink's out buffer gains nothing (the
 * source is not read into user space, flush_ready waits), and the source
 * is read only while the pipe has room (its slots too: lane.full).
 * Plain TCP only (kr_conn_ops.splice); pipes are lent by the worker.
 *
 * transport (kr_conn.h): both connections go through kr_conn_ops (plain
 * TCP; TLS later; the tests inject faults through kr_session_host.conn_ops).
 * A client connection passes its stages before framing in
 * client_preamble (a PROXY header: none accepted yet; the first-bytes
 * sniff, which closes on "TLS handshake on a plaintext listener" and the
 * like; the transport's handshake), an upstream one its handshake once
 * connect(2) completed (up_tcp_connected; it counts as connected after
 * it, within connect_timeout_ms).  A read may ask for the write event and
 * a write for the read event (kr_conn rd_want / wr_want): each event
 * callback runs the step waiting for the event that fired, and a write
 * waiting for readability is retried after every read.  Bytes the
 * transport holds are read without a socket event (kr_conn_kick: after
 * each read, and when update_io lets reading resume after backpressure).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <time.h>

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
#include "kr_stats.h"
#include "kr_rewrite.h"
#include "kr_sasl.h"
#include "kr_scan.h"
#include "kr_session.h"
#include "kr_topics.h"
#include "kr_translate.h"
#include "kr_upstream.h"

/* A client whose socket buffer drains by less than this per
   request_timeout_margin_ms is not reading (client_draining). */
#define KR_DRAIN_MIN_BYTES (64 * 1024)
#define KR_PEEK_SMALL 260           /* first copy of a frame's start */
#define KR_DRAIN_MS 5000            /* flush responses after upstream EOF */

enum timer_kind {
    T_NONE, T_CONNECT, T_REQUEST, T_RESPONSE, T_IDLE, T_DRAIN, T_LINGER,
    T_CLOSING
};

static void session_free(struct kr_session *s);
static void arm_timer(struct kr_session *s);
static void update_io(struct kr_session *s);
static void rq_free(struct kr_rq *rq);
static void audit_conn(struct kr_session *s, const char *event,
                       const char *reason);

/*
 * What the session keeps of a request the rules touched (struct
 * kr_inflight.rq): the pipeline's rule state (kr_analyse.h) and the
 * response frame once built.
 */
struct kr_rq {
    struct kr_an_req *a;                /* rule state, never NULL */
    struct evbuffer *out;               /* response frame with prefix */
    int64_t release_ms;                 /* monotonic ms it may go out */
    bool ready;                         /* out is complete */
};

/* Who takes the response to krelay's own request (KR_INF_INTERNAL). */
struct kr_internal {
    kr_session_internal_cb cb;
    void *arg;
};

/* ---- logging and the one close path ------------------------------------ */

static void vclose(struct kr_session *s, enum kr_close_cause cause,
                   int level, const char *fmt, va_list ap) KR_PRINTF(4, 0);

static void
vclose(struct kr_session *s, enum kr_close_cause cause, int level,
       const char *fmt, va_list ap)
{
    static struct kr_ratelimit rl;
    char msg[600];

    if (s->dead) {
        return;
    }
    s->dead = 1;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (s->closing) {
        /* one line: why it was closing, and what ended it otherwise */
        char why[300];

        snprintf(why, sizeof(why), "%.299s", msg);
        if (strcmp(why, s->close_msg) == 0) {
            snprintf(msg, sizeof(msg), "%s", s->close_msg);
        } else {
            snprintf(msg, sizeof(msg), "%s; then %s", s->close_msg, why);
        }
        level = level < s->close_level ? level : s->close_level;
    }
    if (s->audited) {
        audit_conn(s, "close", msg);
    }
    if (level <= kr_log_level_cur) {
        if (level <= KR_LOG_WARN) {
            kr_log_write_rl(&rl, 10, level, "[%s] %s", s->name, msg);
        } else {
            kr_log_write(level, "[%s] %s (%" PRIu64 " bytes up, %" PRIu64
                         " down)", s->name, msg, s->client.bytes_in,
                         s->client.bytes_out);
        }
    }
    KR_STAT_INC_L(s->host->stats, closes, cause);
    if (s->resolve != NULL) {
        kr_upstream_resolve_cancel(s->resolve);
        s->resolve = NULL;
    }
    if (s->timer != NULL) {
        event_free(s->timer);
        s->timer = NULL;
    }
    if (s->rtimer != NULL) {
        event_free(s->rtimer);
        s->rtimer = NULL;
    }
    kr_conn_close(&s->client);
    kr_conn_close(&s->up);
    kr_pipe_pool_put(s->host->pipes, s->dn.pipe, s->dn.queued == 0);
    kr_pipe_pool_put(s->host->pipes, s->upl.pipe, s->upl.queued == 0);
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else if ((*s->host->sessions) == s) {
        (*s->host->sessions) = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    s->prev = s->next = NULL;
    s->g->nconn--;
    s->host->group_release(s->g);
    KR_STAT_DEC(s->host->stats, conn_active);
    if (s->depth == 0) {
        session_free(s);
    }
}

void
kr_session_close(struct kr_session *s, int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vclose(s, KR_CLOSE_OTHER, level, fmt, ap);
    va_end(ap);
}

#define CLOSE_WITH(name, cause)                                             \
    static void KR_PRINTF(3, 4)                                             \
    name(struct kr_session *s, int level, const char *fmt, ...)             \
    {                                                                       \
        va_list ap;                                                         \
        va_start(ap, fmt);                                                  \
        vclose(s, cause, level, fmt, ap);                                   \
        va_end(ap);                                                         \
    }
CLOSE_WITH(close_bad, KR_CLOSE_BAD_INPUT)
CLOSE_WITH(close_client, KR_CLOSE_CLIENT)
CLOSE_WITH(close_up, KR_CLOSE_UPSTREAM)
CLOSE_WITH(close_timeout, KR_CLOSE_TIMEOUT)

static void
session_free(struct kr_session *s)
{
    kr_conn_free_buffers(&s->client);
    kr_conn_free_buffers(&s->up);
    if (s->hold != NULL) {
        evbuffer_free(s->hold);
    }
    if (s->rq_payload != NULL) {
        evbuffer_free(s->rq_payload);
    }
    while (s->fifo.len > 0) {
        struct kr_inflight *e = kr_inflight_head(&s->fifo);

        rq_free(e->rq);
        if (e->internal != NULL) {
            /* closed before its answer: its owner lets go */
            e->internal->cb(s, e->internal->arg, e->api_key,
                            e->api_version, NULL);
            free(e->internal);
        }
        kr_inflight_pop(&s->fifo, 0);
    }
    if (s->rtimer != NULL) {
        event_free(s->rtimer);
    }
    free(s->clamps);
    free(s->enforced);
    free(s->av);
    free(s->scan);
    kr_inflight_free(&s->fifo);
    if (s->cref != NULL) {
        kr_conf_ref_put(s->cref);
    }
    free(s);
}

static void
leave(struct kr_session *s)
{
    if (--s->depth == 0 && s->dead) {
        session_free(s);
    }
}

/* ---- in-flight FIFO (kr_inflight.h) -------------------------------------- */

static int
fifo_push(struct kr_session *s, const struct kr_inflight *e)
{
    return kr_inflight_push(&s->fifo, e);
}

static struct kr_inflight *
fifo_head(struct kr_session *s)
{
    return kr_inflight_head(&s->fifo);
}

/* Remove the head: the next one's clock starts, the connection is active. */
static void
fifo_pop(struct kr_session *s)
{
    const struct kr_inflight *e = kr_inflight_head(&s->fifo);
    bool answered = !e->optional;
    int64_t sent = e->sent_ms;

    kr_inflight_pop(&s->fifo, kr_clock_timer_ms());
    s->last_active_ms = s->fifo.head_since_ms;
    if (answered) {
        kr_stats_observe_latency(s->host->stats,
                                 s->fifo.head_since_ms - sent);
    }
}

/* Remove entry i, keeping the order of the others (kr_inflight_remove). */
static void
fifo_remove(struct kr_session *s, uint32_t i)
{
    int64_t now = kr_clock_timer_ms();

    kr_inflight_remove(&s->fifo, i, now);
    s->last_active_ms = now;
}

static struct kr_inflight *
fifo_first(struct kr_session *s, uint32_t *idx)
{
    return kr_inflight_first(&s->fifo, idx);
}

/*
 * Entries that count for max_inflight: the expected ones, and the
 * optional ones too once the upstream showed it answers them (they are
 * then never forgotten, so they are bounded like the others).
 */
static uint32_t
fifo_inflight(const struct kr_session *s)
{
    return s->acks0_answered ? s->fifo.len : kr_inflight_expected(&s->fifo);
}

/* Between two response frames on the way to the client? */
static bool
rsp_mid(const struct kr_session *s)
{
    return s->rsp_remain > 0 || s->streaming;
}

/* Bytes owed to the client: its out buffer, then its splice pipe. */
static size_t
client_owed(const struct kr_session *s)
{
    return evbuffer_get_length(s->client.out) + s->dn.queued;
}

/* Bytes owed to the upstream: its out buffer, then its splice pipe. */
static size_t
up_owed(const struct kr_session *s)
{
    return evbuffer_get_length(s->up.out) + s->upl.queued;
}

static const char *
api_name(int16_t key)
{
    const struct kr_api_desc *a = kr_api_get(key);

    return a != NULL && a->name != NULL ? a->name : "ApiKey?";
}

/* ---- timers ----------------------------------------------------------- */

/* What entry e is, for log lines: "Fetch v5 CorrelationId 12". */
static void
entry_str(const struct kr_inflight *e, char *buf, size_t len)
{
    if (e->kind == KR_INF_SASL_TOKEN) {
        snprintf(buf, len, "a SASL token (raw, after SaslHandshake v0)");
    } else if (e->kind == KR_INF_INTERNAL) {
        snprintf(buf, len, "krelay's own %s v%d CorrelationId %d",
                 api_name(e->api_key), e->api_version, e->correlation_id);
    } else {
        snprintf(buf, len, "%s v%d CorrelationId %d", api_name(e->api_key),
                 e->api_version, e->correlation_id);
    }
}

/*
 * krelay stopped reading the upstream because the client does not take
 * what waits for it (its out buffer is full, or its splice pipe holds
 * bytes): a stall is the client's, not the upstream's.
 */
static bool
client_stalls(const struct kr_session *s)
{
    return s->up.connected && !s->up.reading &&
           (kr_conn_out_full(s->client.out, (size_t)s->lc->max_buffer_bytes) ||
            s->dn.queued > 0);
}

/*
 * A client with a full socket send buffer may still be reading, slowly:
 * the kernel signals writable only once much of its (autotuned, MiBs)
 * buffer has drained, so krelay's own writes can pause for longer than
 * the timeout.  True when the unsent bytes shrank by KR_DRAIN_MIN_BYTES
 * since krelay last left bytes waiting or last looked (client_outq): the
 * client is taking them.  (A smaller drop is the last segments in flight
 * being acknowledged into a client that reads nothing.)
 */
static bool
client_draining(struct kr_session *s)
{
    int64_t q = kr_conn_sock_outq(s->client.fd);

    if (q >= 0 && s->client_outq != UINT64_MAX &&
        (uint64_t)q + KR_DRAIN_MIN_BYTES <= s->client_outq) {
        s->client_outq = (uint64_t)q;
        return true;
    }
    return false;
}

static int64_t
deadline(struct kr_session *s, enum timer_kind *kind)
{
    const struct kr_listener_conf *lc = s->lc;
    const struct kr_inflight *e;
    int64_t connect_ms = lc->up ? lc->up->connect_timeout_ms : 10000;
    int64_t margin_ms = lc->up ? lc->up->request_timeout_margin_ms : 30000;
    uint32_t i;

    if (s->draining) {
        *kind = T_DRAIN;
        return s->last_active_ms + KR_DRAIN_MS;
    }
    if (!s->up.connected) {
        *kind = T_CONNECT;
        return s->started_ms + connect_ms;
    }
    if (s->closing && fifo_first(s, &i) == NULL) {
        *kind = T_CLOSING;
        return s->closing_ms + KR_DRAIN_MS;
    }
    if (s->client_eof && !s->closing) {
        *kind = T_LINGER;
        return s->eof_ms + KR_DRAIN_MS;
    }
    if (rsp_mid(s) || evbuffer_get_length(s->up.in) > 0 ||
        s->dn.queued > 0 || client_stalls(s)) {
        /*
         * In the middle of a response: cut-through or streamed (its
         * request left the FIFO at its first byte), or held and not
         * complete yet (its first bytes wait in up.in).  It must keep
         * moving, from the upstream or to the client, however long it
         * takes; the next request's clock starts when it is complete.
         * So must responses the client has not taken yet, when krelay
         * stopped reading the upstream for them (the next response may
         * be there, unread: not the upstream's delay).
         */
        *kind = T_RESPONSE;
        return s->rsp_progress_ms + margin_ms;
    }
    e = fifo_first(s, &i);
    if (e != NULL) {
        *kind = T_REQUEST;
        return kr_inflight_since(&s->fifo, e, i) + e->wait_ms + margin_ms;
    }
    if (lc->idle_timeout_ms > 0) {
        *kind = T_IDLE;
        return s->last_active_ms + lc->idle_timeout_ms;
    }
    *kind = T_NONE;
    return INT64_MAX;
}

static void
timer_add(struct kr_session *s, int64_t at, int64_t now)
{
    struct timeval tv;
    int64_t d = at > now ? at - now : 0;

    tv.tv_sec = (time_t)(d / 1000);
    tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
    event_add(s->timer, &tv);
    s->timer_at = at;
}

/*
 * Arm the timer when the deadline moved earlier; a later deadline is
 * found when the timer fires early and re-arms (no event_add per frame).
 */
static void
arm_timer(struct kr_session *s)
{
    enum timer_kind kind;
    int64_t at;

    if (s->dead) {
        return;
    }
    at = deadline(s, &kind);
    if (kind == T_NONE) {
        return;
    }
    if (s->timer_at == 0 || at < s->timer_at) {
        timer_add(s, at, kr_clock_timer_ms());
    }
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    const struct kr_inflight *e;
    enum timer_kind kind;
    int64_t now = kr_clock_timer_ms(), at;
    char desc[96];
    uint32_t i;

    (void)fd;
    (void)what;
    s->depth++;
    s->timer_at = 0;
    at = deadline(s, &kind);
    if (kind != T_NONE && now >= at) {
        switch (kind) {
        case T_CONNECT:
            if (s->upname[0] != '\0') {
                close_timeout(s, KR_LOG_WARN, "no upstream connection to %s "
                              "after connect_timeout_ms %" PRId64,
                              s->upname,
                              s->lc->up ? s->lc->up->connect_timeout_ms : 0);
            } else {
                close_timeout(s, KR_LOG_WARN, "no upstream connection after "
                              "connect_timeout_ms %" PRId64 ": the broker's "
                              "address was still being resolved",
                              s->lc->up ? s->lc->up->connect_timeout_ms : 0);
            }
            break;
        case T_REQUEST:
            e = fifo_first(s, &i);
            entry_str(e, desc, sizeof(desc));
            close_timeout(s, KR_LOG_WARN, "upstream %s sent no response "
                          "to %s in %" PRId64 " ms", s->upname, desc,
                          now - kr_inflight_since(&s->fifo, e, i));
            break;
        case T_RESPONSE:
            if (client_stalls(s) && client_draining(s)) {
                /* slow, not stalled: a new period from now */
                s->rsp_progress_ms = now;
                arm_timer(s);
            } else if (client_stalls(s)) {
                /* reset, not FIN: the MiBs queued for it are freed now,
                   not kept in FIN-WAIT-1 until it reads or times out */
                struct linger lg = { 1, 0 };

                (void)setsockopt(s->client.fd, SOL_SOCKET, SO_LINGER, &lg,
                                 sizeof(lg));
                close_client(s, KR_LOG_WARN, "client is not reading its "
                             "responses: no byte taken for %" PRId64 " ms, "
                             "%zu bytes wait for it (buffer full: "
                             "max_buffer_bytes %" PRId64 ")",
                             now - s->rsp_progress_ms, client_owed(s),
                             s->lc->max_buffer_bytes);
            } else {
                close_timeout(s, KR_LOG_WARN, "upstream %s stopped in the "
                              "middle of a response: no byte for %" PRId64
                              " ms", s->upname, now - s->rsp_progress_ms);
            }
            break;
        case T_IDLE:
            close_timeout(s, KR_LOG_INFO, "idle for idle_timeout_ms %" PRId64,
                          s->lc->idle_timeout_ms);
            break;
        case T_LINGER:
            close_client(s, KR_LOG_INFO, "client closed the connection "
                         "(upstream %s kept its side open %d ms after "
                         "krelay's; %u responses owed)", s->upname,
                         KR_DRAIN_MS, kr_inflight_expected(&s->fifo));
            break;
        case T_CLOSING:
            close_client(s, KR_LOG_INFO, "the client took no response "
                         "bytes for %d ms (%zu bytes not delivered)",
                         KR_DRAIN_MS, client_owed(s));
            break;
        default:
            close_up(s, KR_LOG_INFO, "upstream closed the connection; "
                     "client did not take the last responses");
            break;
        }
    } else if (kind != T_NONE) {
        timer_add(s, at, now);
    }
    leave(s);
}

/* ---- backpressure and flushing ----------------------------------------- */

/* ---- splice(2) lanes (issue 4, kr_conn.h) ------------------------------ */

/* May the lane's source be read (kr_lane_readable, this pool's pipes)? */
static bool
lane_readable(const struct kr_session *s, const struct kr_splice *l)
{
    return kr_lane_readable(l, s->host->pipes->pipe_bytes);
}

/* Start a lane for the next n opaque bytes of src (kr_lane_begin). */
static bool
lane_begin(struct kr_session *s, struct kr_splice *l, struct kr_conn *src,
           const struct kr_conn *dst, uint64_t n)
{
    int64_t min = s->lc->splice_min_bytes;

#if !defined(HAVE_SPLICE) || !defined(HAVE_PIPE2)
    min = 0;                            /* no splice(2) here */
#endif
    return kr_lane_begin(l, s->host->pipes, src, dst, n, min);
}

/* Fill the lane's pipe from src (kr_lane_fill), counting and saying so. */
static ssize_t
lane_fill(struct kr_session *s, struct kr_splice *l, struct kr_conn *src)
{
    int off = 0;
    ssize_t n = kr_lane_fill(l, s->host->pipes, src, &off);

    if (n > 0) {
        KR_STAT_ADD(s->host->stats, bytes_spliced, (uint64_t)n);
    } else if (off != 0) {
        kr_log_info("[%s] splice(2) from the %s socket: %s; reading "
                    "through user space", s->name,
                    src == &s->client ? "client" : "upstream",
                    strerror(off));
    }
    return n;
}

/*
 * Read src: into its lane's pipe while a run is under way (*spliced set:
 * the caller accounts for n > 0; on EAGAIN the source's read interest is
 * updated, as the pipe may be full), else into src->in as usual (also
 * when splice was refused just now).  Returns what the read returned.
 */
static ssize_t
lane_read(struct kr_session *s, struct kr_conn *src, struct kr_splice *l,
          bool *spliced)
{
    ssize_t n;

    *spliced = false;
    if (l->left == 0) {
        return kr_conn_read(src);
    }
    n = lane_fill(s, l, src);
    if (n > 0 || (n < 0 && kr_conn_again(errno) && l->left > 0)) {
        *spliced = true;
        if (n < 0) {
            update_io(s);
            arm_timer(s);
        }
        return n;
    }
    if (n < 0 && kr_conn_again(errno)) {
        return kr_conn_read(src);          /* splice refused: user space */
    }
    return n;
}

static void
update_io(struct kr_session *s)
{
    size_t maxb = (size_t)s->lc->max_buffer_bytes;

    if (s->dead) {
        return;
    }
    kr_conn_set_reading(&s->client, !s->draining && !s->client_eof &&
                !s->req_blocked &&
                !s->enforce_wait &&
                !(s->sasl.tokens > 0 && s->nready > 0) &&
                !kr_conn_out_full(s->up.out, maxb) &&
                lane_readable(s, &s->upl) &&
                (s->paused_until_ms == 0 ||
                 kr_clock_timer_ms() >= s->paused_until_ms));
    kr_conn_set_reading(&s->up, s->up.connected && !s->draining &&
                !kr_conn_out_full(s->client.out, maxb) &&
                !(s->opaque && s->nready > 0) &&
                lane_readable(s, &s->dn));
}

/*
 * Closing after the responses owed (s->closing): once none is in flight
 * and the client took every byte, close with the message given.  True
 * when closed.
 */
static bool
closing_done(struct kr_session *s)
{
    if (!s->closing || s->dead || kr_inflight_expected(&s->fifo) > 0 ||
        rsp_mid(s) || client_owed(s) > 0) {
        return false;
    }
    kr_session_close(s, s->close_level, "%s", s->close_msg);
    return true;
}

/*
 * Close the connection once the responses to the requests already
 * forwarded reached the client, as a broker that handles requests in
 * order would: from now on nothing read from the client is forwarded.
 * Bounded by the request timeout while responses are owed and by
 * KR_DRAIN_MS without progress delivering them.  Returns 0, or -1 when
 * already closed.
 */
static int close_after_owed(struct kr_session *s, int level,
                            const char *fmt, ...) KR_PRINTF(3, 4);

static int
close_after_owed(struct kr_session *s, int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->close_msg, sizeof(s->close_msg), fmt, ap);
    va_end(ap);
    s->closing = 1;
    s->close_level = level;
    s->closing_ms = kr_clock_timer_ms();
    evbuffer_drain(s->client.in, evbuffer_get_length(s->client.in));
    s->req_remain = 0;
    if (closing_done(s)) {
        return -1;
    }
    kr_log_debug("[%s] closing after %u responses owed", s->name,
                 kr_inflight_expected(&s->fifo));
    s->timer_at = 0;
    if (s->timer != NULL) {
        event_del(s->timer);
    }
    arm_timer(s);
    return 0;
}

/* n bytes went out on c: the response is moving when c is the client. */
static void
wrote(struct kr_session *s, struct kr_conn *c, size_t n)
{
    c->bytes_out += (uint64_t)n;
    if (c == &s->client && n > 0) {
        s->rsp_progress_ms = kr_clock_timer_ms();
        if (s->closing) {
            s->closing_ms = s->rsp_progress_ms;
        }
    }
}

/*
 * Write what we can now: the out buffer, then the splice pipe behind it.
 * Watch for writability while bytes remain (or for what the transport's
 * write asked for: kr_conn_set_writing).
 */
static int
conn_flush(struct kr_session *s, struct kr_conn *c)
{
    struct kr_splice *l = c == &s->client ? &s->dn : &s->upl;
    size_t before = l->queued;
    ssize_t n;

    if (s->dead) {
        return -1;
    }
    if (c->fd < 0 || !c->connected) {
        return 0;
    }
    if (evbuffer_get_length(c->out) > 0) {
        n = kr_conn_write(c);
        if (n < 0 && !kr_conn_again(errno)) {
            goto fail;
        }
        if (n > 0) {
            wrote(s, c, (size_t)n);
        }
    }
    if (evbuffer_get_length(c->out) == 0 && l->queued > 0) {
        int e;

        n = kr_lane_drain(l, s->host->pipes, c);
        e = errno;
        wrote(s, c, before - l->queued);
        errno = e;
        if (n != 0) {
            goto fail;
        }
    }
    kr_conn_set_writing(c, evbuffer_get_length(c->out) > 0 || l->queued > 0);
    if (c == &s->client && (evbuffer_get_length(c->out) > 0 ||
                            l->queued > 0)) {
        /* the socket's buffer is full: how much it holds now tells
           later whether the client takes any (client_draining) */
        int64_t q = kr_conn_sock_outq(c->fd);

        s->client_outq = q >= 0 ? (uint64_t)q : UINT64_MAX;
    }
    if (c == &s->client && closing_done(s)) {
        return -1;
    }
    return 0;
fail:
    if (c == &s->client) {
        close_client(s, KR_LOG_INFO, "write to client: %s",
                     strerror(errno));
    } else {
        close_up(s, KR_LOG_WARN, "write to upstream %s: %s",
                 s->upname, strerror(errno));
    }
    return -1;
}

/*
 * How many of the first n bytes of in (0 < n < its length) lie in the
 * chain that byte n is in: evbuffer_remove_buffer(in, out, n) moves the
 * whole chains before that chain and copies these bytes (libevent 2.1:
 * evbuffer_add of the head of the chain it splits).  0 when n falls on a
 * chain boundary.  Walks the chains, 8 at a time (a few per 256 KiB).
 */
static size_t
split_copy_len(struct evbuffer *in, size_t n)
{
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr pos;
    size_t done = 0;
    int i, k;

    while (done < n) {
        if (evbuffer_ptr_set(in, &pos, done, EVBUFFER_PTR_SET) != 0) {
            return 0;
        }
        k = evbuffer_peek(in, (ev_ssize_t)(n - done), &pos, v, 8);
        if (k <= 0) {
            return 0;
        }
        for (i = 0; i < k && i < 8; i++) {
            if (done + v[i].iov_len > n) {
                return n - done;
            }
            done += v[i].iov_len;
        }
    }
    return 0;
}

/*
 * Move the first n bytes of in to out, never copying them: the whole
 * chain list when n is all of in (the common case: a read that ends
 * inside a frame or at its end), else evbuffer_remove_buffer, which
 * moves whole chains and copies only the head of a chain split by the
 * frame boundary where parsing stopped (a next frame whose header is not
 * complete yet, or one that is held): counted in stats.bytes_copied.
 * A chain moved into an output keeps its whole capacity; memory held by
 * a backlog of mostly empty chains is bounded in update_io (out_full),
 * not by copying.
 */
static void
move_bytes(struct kr_session *s, struct evbuffer *in, struct evbuffer *out,
           size_t n)
{
    if (n == 0) {
        return;
    }
    if (n >= evbuffer_get_length(in)) {
        evbuffer_add_buffer(out, in);
    } else {
        KR_STAT_ADD(s->host->stats, bytes_copied, split_copy_len(in, n));
        evbuffer_remove_buffer(in, out, n);
    }
}

/*
 * Copy up to len bytes of in from offset off into small (len <= smallsz)
 * or the worker's scratch buffer.  Returns the count copied.
 */
static size_t
peek(struct kr_session *s, struct evbuffer *in, size_t off, size_t len,
     uint8_t *small, size_t smallsz, const uint8_t **pk)
{
    struct evbuffer_ptr pos;
    uint8_t *dst;
    ev_ssize_t n;

    if (len > KR_FRAME_PEEK_MAX + KR_FRAME_PREFIX) {
        len = KR_FRAME_PEEK_MAX + KR_FRAME_PREFIX;
    }
    dst = len <= smallsz ? small : s->host->scratch;
    *pk = dst;
    if (evbuffer_ptr_set(in, &pos, off, EVBUFFER_PTR_SET) != 0) {
        return 0;
    }
    n = evbuffer_copyout_from(in, &pos, dst, len);
    return n < 0 ? 0 : (size_t)n;
}

static size_t
min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* ---- rules: shared helpers --------------------------------------------- */

/*
 * A session's record of a request the rules touched, around rule state a
 * (taken; NULL: a new one).  NULL on ENOMEM (a is freed).
 */
static struct kr_rq *
rq_wrap(struct kr_an_req *a)
{
    struct kr_rq *rq = calloc(1, sizeof(*rq));

    if (rq == NULL || (rq->a = a != NULL ? a : kr_an_req_new()) == NULL ||
        (rq->out = evbuffer_new()) == NULL) {
        kr_an_req_free(rq != NULL ? rq->a : a);
        free(rq);
        return NULL;
    }
    return rq;
}

static void
rq_free(struct kr_rq *rq)
{
    if (rq == NULL) {
        return;
    }
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

        kr_log_write_rl(&rl, 1, KR_LOG_WARN, "audit: a line was dropped "
                        "(queue full or target not writable): %" PRIu64
                        " dropped so far", kr_audit_dropped(au));
    }
    free(line);
}

/*
 * The listener's name in audit lines: its [listener NAME], or "default"
 * for the unnamed one (whose log prefix has no name: "> bootstrap").
 */
static const char *
listener_name(const struct kr_session *s)
{
    return s->lc != NULL && s->lc->name != NULL && s->lc->name[0] != '\0'
               ? s->lc->name
               : "default";
}

static void
audit_conn(struct kr_session *s, const char *event, const char *reason)
{
    audit_put(s, kr_audit_format_conn(event, kr_clock_wall_us(),
                                      listener_name(s),
                                      s->peer_host, s->peer_port,
                                      s->client_id[0] ? s->client_id : NULL,
                                      NULL, reason));
}

/* Is this connection audited (open/close lines)? */
static void
audit_open(struct kr_session *s)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;

    if (!s->audited && audit_sink(s) != NULL && rs != NULL &&
        kr_rule_mask_any(&rs->audit_mask, &s->rmask)) {
        s->audited = 1;
        audit_conn(s, "open", NULL);
    }
}

/*
 * Follow a reload: requests read from now on use the worker's current
 * config (rules, limits, advertised host).  The old one is released when
 * its last user lets go.
 */
static void
conf_refresh(struct kr_session *s)
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
    kr_rule_conn_mask(cur->conf->ruleset, s->lc->name,
                      (const struct sockaddr *)&s->peer, NULL, &s->rmask);
    s->rw.clamps = NULL;
    s->rw.pass_unknown_apis = false;
    s->rw.enforced = NULL;
    s->rw.enforced_unknown = false;
    s->fetch_stale = 1;
    audit_open(s);
}

/* ---- rules: the pipeline (kr_analyse.h) ---------------------------------- */

static bool
broker_range(void *arg, int16_t key, int16_t *min, int16_t *max)
{
    return kr_upstream_api_range(arg, key, min, max);
}

static int
rewrite_tree(void *arg, int16_t key, int16_t ver, struct kr_node *body,
             bool *changed)
{
    struct kr_rewrite_result rr;
    int rc = kr_rewrite_tree(arg, key, ver, body, &rr);

    *changed = rc == KR_OK && rr.changed;
    return rc;
}

/* What the rule pipeline knows of this connection, as of now. */
static void
an_conn(struct kr_session *s, struct kr_an_conn *c)
{
    memset(c, 0, sizeof(*c));
    c->rs = s->cref->conf->ruleset;
    c->rmask = &s->rmask;
    c->tmap = s->g->up != NULL ? kr_upstream_topics(s->g->up) : NULL;
    c->broker_av = s->av;
    c->broker_range = s->g->up != NULL ? broker_range : NULL;
    c->broker_arg = s->g->up;
    c->rewrite_tree = rewrite_tree;
    c->rewrite_arg = &s->rw;
    c->sasl = &s->sasl;
    c->fetch_stale = &s->fetch_stale;
    c->rng = &s->rng;
    c->audit_sink = audit_sink(s) != NULL;
    c->name = s->name;
    c->listener = listener_name(s);
    c->peer_host = s->peer_host;
    c->peer_port = s->peer_port;
}

/* The audit line of entry e (see kr_an_audit_line). */
static char *
audit_line(struct kr_session *s, const struct kr_inflight *e,
           const struct kr_rq *rq, const struct kr_msg *rsp,
           uint64_t rsp_bytes, int64_t upstream_us, int64_t extra_us)
{
    struct kr_an_conn c;

    an_conn(s, &c);
    return kr_an_audit_line(&c, e, rq->a, rsp, rsp_bytes, upstream_us,
                            extra_us);
}

/* ---- rules: ordered output of built responses --------------------------- */

static struct kr_inflight *
fifo_at(struct kr_session *s, uint32_t i)
{
    return kr_inflight_at(&s->fifo, i);
}

/* The oldest entry still waiting for its upstream response. */
static struct kr_inflight *
fifo_waiting(struct kr_session *s, uint32_t *idx)
{
    uint32_t i;

    *idx = 0;
    if (s->nready == 0) {
        return fifo_head(s);
    }
    for (i = 0; i < s->fifo.len; i++) {
        struct kr_inflight *e = fifo_at(s, i);

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
    struct kr_inflight *e = fifo_first(s, &i);
    int64_t at = 0, now;
    struct timeval tv;

    if (s->dead || s->rtimer == NULL) {
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
static void
flush_ready(struct kr_session *s)
{
    struct kr_inflight *e;
    int64_t now = kr_clock_timer_ms();
    uint32_t i;

    while (!s->dead && !rsp_mid(s) && s->dn.queued == 0 &&
           (e = fifo_first(s, &i)) != NULL && e->rq != NULL &&
           e->rq->ready) {
        struct kr_rq *rq = e->rq;
        size_t n = evbuffer_get_length(rq->out);

        if (rq->release_ms > now) {
            break;
        }
        evbuffer_add_buffer(s->client.out, rq->out);
        KR_STAT_ADD(s->host->stats, bytes_down, n);
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
        rq_free(rq);
        e->rq = NULL;
        fifo_remove(s, i);
    }
    if (s->paused_until_ms != 0 && now >= s->paused_until_ms) {
        s->paused_until_ms = 0;
    }
    rtimer_arm(s);
}

static int process_requests(struct kr_session *s);
static int process_responses(struct kr_session *s);

/* Requests held back by a throttle go on once it is over. */
static int
resume_requests(struct kr_session *s)
{
    if (s->dead) {
        return -1;
    }
    if (s->enforce_wait || s->req_blocked ||
        (s->paused_until_ms != 0 && kr_clock_timer_ms() < s->paused_until_ms) ||
        evbuffer_get_length(s->client.in) == 0) {
        return 0;
    }
    if (process_requests(s) != 0 || conn_flush(s, &s->up) != 0 ||
        conn_flush(s, &s->client) != 0) {
        return -1;
    }
    return 0;
}

static void
rtimer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;

    (void)fd;
    (void)what;
    s->depth++;
    s->rtimer_at = 0;
    flush_ready(s);
    if (s->opaque && s->nready == 0 && evbuffer_get_length(s->up.in) > 0 &&
        process_responses(s) != 0) {
        leave(s);
        return;
    }
    if (conn_flush(s, &s->client) == 0 && resume_requests(s) == 0) {
        update_io(s);
        arm_timer(s);
    }
    leave(s);
}

/* ---- rules: requests ----------------------------------------------------- */

/* What next_request found about a frame the rules may touch. */
struct kr_nreq {
    struct kr_req_hdr h;
    struct kr_inflight e;
    size_t flen;
    bool expect;                        /* a response will come */
    bool av_new;                        /* ApiVersions newer than known */
    bool sasl_refuse;                   /* SaslHandshake v0 with a mechanism
                                           krelay cannot follow, and an
                                           enforcing rule could match */
    const struct kr_rule_slot *slot;
    struct kr_gate_result gate;         /* NREQ_REFUSE: why */
    char *cid;                          /* NREQ_REFUSE: the request's own
                                           ClientId (malloc'd, NULL: null) */
    size_t cidlen;                      /* its bytes */
};

/* What next_request decided about the frame at the scan point. */
enum nreq_outcome {
    NREQ_CLOSED = -1,                   /* the session was closed */
    NREQ_WAIT = 0,                      /* more bytes, or a free in-flight
                                           slot, are needed */
    NREQ_FORWARD = 1,                   /* accepted: s->req_remain bytes go
                                           cut-through */
    NREQ_RULES = 2,                     /* whole, the rules must see it
                                           (*nr filled) */
    NREQ_REFUSE = 3                     /* krelay cannot decode it and an
                                           enforcing rule could match it
                                           (*nr filled): never forwarded */
};

/* The pipeline's view of request nr (cid: its own ClientId, or NULL). */
static void
an_request(const struct kr_nreq *nr, const char *cid, size_t cidlen,
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
static bool
request_client_id(struct evbuffer *buf, size_t off,
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

/* Does an enforcing rule apply to this connection at all? */
static bool
conn_enforces(struct kr_session *s)
{
    struct kr_an_conn c;

    an_conn(s, &c);
    return kr_analyse_conn_enforces(&c);
}

/*
 * A frame only observing rules wanted decoded did not decode (text: what
 * and why): counted, and one diagnostic line per connection
 * (rate-limited across them).
 */
static void
undecodable_note(struct kr_session *s, const char *text)
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

static int apply_request(struct kr_session *s, struct kr_nreq *nr,
                         struct kr_an_decision *d);

/*
 * Refuse a request krelay cannot decode that an enforcing rule could
 * match (issue 13, nr->gate, kr_analyse_refuse): it is never forwarded,
 * nor anything sent after it; the responses owed for earlier requests
 * reach the client first, then the connection closes with one log line,
 * as a broker closes on a request it cannot parse.  Returns 0, or -1
 * when closed.
 */
static int
refuse_request(struct kr_session *s, struct kr_nreq *nr, const char *cid,
               size_t cidlen, const char *why)
{
    struct kr_an_conn c;
    struct kr_an_request r;
    struct kr_an_decision d;

    an_conn(s, &c);
    an_request(nr, cid, cidlen, &r);
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
static int
push_optional(struct kr_session *s, struct kr_inflight *e)
{
    struct kr_inflight *h;

    if (s->acks0_silent) {
        return 0;
    }
    if (!s->acks0_answered &&
        s->fifo.opt >= (uint64_t)s->lc->max_inflight) {
        s->acks0_forgot++;
        h = fifo_head(s);
        if (h == NULL || !h->optional) {
            return 0;
        }
        fifo_pop(s);
    }
    e->optional = 1;
    e->wait_ms = 0;
    if (fifo_push(s, e) != KR_OK) {
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
    if (fifo_push(s, e) != KR_OK) {
        rq_free(rq);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (rq != NULL && rq->ready) {
        s->nready++;
        flush_ready(s);
    }
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

static void apiversions_clamps(struct kr_session *s, const char *cid,
                               size_t cidlen);

/*
 * Carry out the pipeline's decision d on request nr, whose payload is in
 * s->rq_payload (and d->msg borrows from it).  Takes what d owns.
 * Returns 0, or -1 when closed.
 */
static int
apply_request(struct kr_session *s, struct kr_nreq *nr,
              struct kr_an_decision *d)
{
    struct evbuffer *pl = s->rq_payload;
    struct kr_rq *rq = NULL;
    char eerr[160];
    int ret, rc;

    if (d->evaluated) {
        kr_stats_rule_hits(s->host->stats, &d->verdict);
    }
    if (d->audit_now != NULL) {
        audit_put(s, d->audit_now);
        d->audit_now = NULL;
    }
    switch (d->outcome) {
    case KR_AN_CLOSE:
        kr_session_close(s, d->level, "%s", d->text);
        kr_an_decision_free(d);
        return -1;
    case KR_AN_REFUSE:
        KR_STAT_INC(s->host->stats, requests_refused);
        /* fall through */
    case KR_AN_CLOSE_AFTER_OWED:
        evbuffer_drain(pl, evbuffer_get_length(pl));
        ret = close_after_owed(s, d->level, "%s", d->text);
        kr_an_decision_free(d);
        return ret;
    case KR_AN_ANSWER:
        evbuffer_drain(pl, evbuffer_get_length(pl));
        rq = rq_wrap(d->req);
        d->req = NULL;
        if (rq == NULL) {
            kr_an_decision_free(d);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        add_prefix(rq->out, d->w.len);
        KR_STAT_INC_L(s->host->stats, errors_answered,
                      kr_stats_kerr_cell(d->error));
        evbuffer_add(rq->out, d->w.buf, d->w.len);
        rq->ready = true;
        kr_log_info("[%s] %s", s->name, d->text);
        kr_an_decision_free(d);
        return push_entry(s, &nr->e, rq);
    case KR_AN_FORWARD_UNDECODED:
        undecodable_note(s, d->text);
        add_prefix(s->up.out, evbuffer_get_length(pl));
        evbuffer_add_buffer(s->up.out, pl);
        break;
    case KR_AN_FORWARD_TRANSLATED:
        /* records chains move from pl to up.out, never copied */
        eerr[0] = '\0';
        rc = kr_evcodec_emit(pl, s->up.out, &d->w, &d->msg, eerr,
                             sizeof(eerr));
        if (rc != KR_OK) {
            kr_session_close(s, KR_LOG_ERROR, "cannot write translated %s "
                             "request: %s", api_name(nr->h.api_key),
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
        kr_an_decision_free(d);
        nr->e.rq = NULL;
        return push_optional(s, &nr->e);
    }
    if (d->enforce_wait) {
        s->enforce_wait = 1;
    }
    if (d->req != NULL) {
        rq = rq_wrap(d->req);
        d->req = NULL;
        if (rq == NULL) {
            kr_an_decision_free(d);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
    }
    kr_an_decision_free(d);
    return push_entry(s, &nr->e, rq);
}

/*
 * A whole request frame the rules may touch is at the start of client.in.
 * Take it out, decode it, let the pipeline decide (kr_analyse_request),
 * apply.  Returns 0, or -1 when closed.
 */
static int
rule_request(struct kr_session *s, struct kr_nreq *nr)
{
    struct evbuffer *pl = s->rq_payload;
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

    evbuffer_drain(s->client.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->client.in, pl, nr->flen);
    KR_STAT_INC(s->host->stats, requests);
    KR_STAT_INC_L(s->host->stats, api_requests,
                  kr_stats_api_cell(nr->h.api_key, nr->h.api_version));
    KR_STAT_ADD(s->host->stats, bytes_up, KR_FRAME_PREFIX + nr->flen);
    if (!nr->h.client_id_null) {
        snprintf(s->client_id, sizeof(s->client_id), "%s",
                 nr->h.client_id);
    }
    if (nr->av_new) {
        /* KIP-511: answer as a broker does, v0 with our range */
        uint8_t f[KR_APIVERSIONS_UNSUPPORTED_LEN];
        size_t flen;
        struct kr_rq *rq = rq_wrap(NULL);

        if (rq == NULL ||
            kr_apiversions_unsupported(nr->h.correlation_id, f, sizeof(f),
                                       &flen) != KR_OK ||
            evbuffer_add(rq->out, f, flen) != 0) {
            rq_free(rq);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        (void)request_client_id(pl, 0, &nr->h, &cid, &cidlen);
        apiversions_clamps(s, cid, cidlen);
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
        if (!request_client_id(pl, 0, &nr->h, &cid, &cidlen)) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            ret = -1;
            goto out;
        }
        an_request(nr, cid, cidlen, &r);
        r.decode_error = why;
    } else {
        an_request(nr, NULL, 0, &r);
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
static void
apiversions_clamps(struct kr_session *s, const char *cid, size_t cidlen)
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

/* ---- requests ------------------------------------------------------------ */

/*
 * The request-side hook: requests that must be held whole before they
 * are forwarded (and may be decoded).  Rules per (ApiKey, ApiVersion)
 * will extend this.
 */
static bool
req_hold(int16_t api_key, int16_t api_version)
{
    (void)api_version;
    return api_key == KR_API_SASL_HANDSHAKE;
}

/*
 * The response-side hook: responses held whole and processed
 * (kr_rewrite_response) instead of cut-through.
 */
static bool
rsp_hold(int16_t api_key, int16_t api_version)
{
    return kr_rewrite_wants(api_key, api_version);
}

/* Remember the Mechanism of a decoded SaslHandshake request m. */
static void
sasl_note_mech(struct kr_session *s, const struct kr_msg *m)
{
    const uint8_t *name;
    int32_t len;

    (void)kr_sasl_note_handshake(&s->sasl, m, &name, &len);
    if (len >= 0) {
        kr_log_debug("[%s] SaslHandshake v%d Mechanism %.*s", s->name,
                     m->api_version, (int)(len > 40 ? 40 : len),
                     name != NULL ? (const char *)name : "");
    }
}

/*
 * Decode a whole SaslHandshake request at offset off of in (frame_len
 * payload bytes after the prefix) with the codec; remember Mechanism.
 */
static int
decode_sasl_handshake(struct kr_session *s, struct evbuffer *in, size_t off,
                      size_t frame_len)
{
    struct evbuffer_iovec ev[KR_RBUF_MAX_SEG];
    struct iovec iov[KR_RBUF_MAX_SEG];
    struct evbuffer_ptr pos;
    struct kr_arena arena;
    struct kr_codec_err err;
    struct kr_rbuf rb;
    struct kr_msg m;
    int i, n, rc;

    if (evbuffer_ptr_set(in, &pos, off + KR_FRAME_PREFIX,
                         EVBUFFER_PTR_SET) != 0) {
        close_bad(s, KR_LOG_WARN, "SaslHandshake request: bad offset");
        return -1;
    }
    n = evbuffer_peek(in, (ev_ssize_t)frame_len, &pos, ev, KR_RBUF_MAX_SEG);
    if (n < 0 || n > KR_RBUF_MAX_SEG) {
        close_bad(s, KR_LOG_WARN, "SaslHandshake request of %zu bytes in "
                  "too many pieces", frame_len);
        return -1;
    }
    for (i = 0; i < n; i++) {
        iov[i].iov_base = ev[i].iov_base;
        iov[i].iov_len = ev[i].iov_len;
    }
    if (n > 0) {                /* the last segment may run past the frame */
        size_t sum = 0;

        for (i = 0; i < n - 1; i++) {
            sum += iov[i].iov_len;
        }
        iov[n - 1].iov_len = frame_len - sum;
    }
    rb.seg = iov;
    rb.nseg = n;
    rb.len = frame_len;
    kr_arena_init(&arena, 1 << 20);
    memset(&err, 0, sizeof(err));
    rc = kr_decode_request(&arena, &rb, 0, &m, &err);
    if (rc != KR_OK) {
        close_bad(s, KR_LOG_WARN, "cannot decode SaslHandshake request: %s "
                  "at %s", err.msg, err.path);
        kr_arena_free(&arena);
        return -1;
    }
    sasl_note_mech(s, &m);
    kr_arena_free(&arena);
    return 0;
}

/* Leading body fields to peek per ApiKey: the request's own wait. */
static int
request_fields(int16_t key, struct kr_frame_field *f)
{
    switch (key) {
    case KR_API_PRODUCE:
        f[0].id = KR_FIELD_ACKS;
        f[1].id = KR_FIELD_TIMEOUT_MS;
        return 2;
    case KR_API_FETCH:
        f[0].id = KR_FIELD_MAX_WAIT_MS;
        return 1;
    case KR_API_JOIN_GROUP:
        f[0].id = KR_FIELD_REBALANCE_TIMEOUT_MS;
        f[1].id = KR_FIELD_SESSION_TIMEOUT_MS;
        return 2;
    default:
        return 0;
    }
}

/* What the rules path needs of a whole request frame, into *nr. */
static void
nreq_fill(struct kr_nreq *nr, const struct kr_req_hdr *h,
          struct kr_inflight *e, size_t flen, bool expect)
{
    nr->h = *h;
    e->correlation_id = h->correlation_id;
    e->api_key = h->api_key;
    e->api_version = h->api_version;
    e->kind = KR_INF_REQUEST;
    nr->e = *e;
    nr->flen = flen;
    nr->expect = expect;
}

/*
 * Look at the frame starting at offset scan of client.in (avail bytes
 * there, >= 4) and say what happens to it (enum nreq_outcome).
 */
static enum nreq_outcome
next_request(struct kr_session *s, struct evbuffer *in, size_t scan,
             size_t avail, struct kr_nreq *nr)
{
    const struct kr_listener_conf *lc = s->lc;
    struct kr_frame_field f[2];
    uint8_t small[KR_PEEK_SMALL];
    const uint8_t *pk;
    struct kr_req_hdr h;
    struct kr_inflight e;
    size_t c, flen, have, need = 0;
    int32_t size;
    int nf, rc;
    bool expect = true;

    c = peek(s, in, scan, min_sz(avail, sizeof(small)), small, sizeof(small),
             &pk);
    if (c < KR_FRAME_PREFIX) {
        return NREQ_WAIT;
    }
    memset(&e, 0, sizeof(e));
    e.sent_ms = kr_clock_timer_ms();
    if (s->sasl.tokens > 0) {
        rc = kr_frame_size(pk, c, 0, lc->max_frame_bytes, &size);
        if (rc != KR_OK) {
            close_bad(s, KR_LOG_WARN, "SASL token frame of %d bytes "
                      "(max_frame_bytes %" PRId64 ")", size,
                      lc->max_frame_bytes);
            return NREQ_CLOSED;
        }
        e.kind = KR_INF_SASL_TOKEN;
        e.correlation_id = -1;
        if (fifo_push(s, &e) != KR_OK) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return NREQ_CLOSED;
        }
        s->sasl.tokens--;
        KR_STAT_INC(s->host->stats, sasl_tokens);
        s->req_remain = KR_FRAME_PREFIX + (uint64_t)size;
        return NREQ_FORWARD;
    }
    rc = kr_frame_size(pk, c, KR_FRAME_REQ_MIN, lc->max_frame_bytes, &size);
    if (rc != KR_OK) {
        const char *what = kr_frame_sniff(pk, c);

        if (what != NULL) {
            close_bad(s, KR_LOG_WARN, "%s on a plaintext listener", what);
        } else if (size < 0) {
            close_bad(s, KR_LOG_WARN, "negative frame size %d "
                      "(%02x %02x %02x %02x): not a Kafka client?", size,
                      pk[0], pk[1], pk[2], pk[3]);
        } else if (rc == KR_EPROTO) {
            close_bad(s, KR_LOG_WARN, "request frame of %d bytes is "
                      "shorter than a request header", size);
        } else {
            close_bad(s, KR_LOG_WARN, "request frame of %d bytes exceeds "
                      "max_frame_bytes %" PRId64, size, lc->max_frame_bytes);
        }
        return NREQ_CLOSED;
    }
    flen = (size_t)size;
    have = min_sz(avail - KR_FRAME_PREFIX, flen);
    for (;;) {
        rc = kr_frame_peek_request(pk + KR_FRAME_PREFIX,
                                   min_sz(c - KR_FRAME_PREFIX, flen), flen,
                                   &h, &need);
        if (rc != KR_AGAIN) {
            break;
        }
        if (need > have) {
            return NREQ_WAIT;
        }
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
    }
    if (rc != KR_OK) {
        close_bad(s, KR_LOG_WARN, "malformed request header (ApiKey %d, "
                  "ApiVersion %d, %zu bytes): %s", h.api_key, h.api_version,
                  flen, kr_status_str(rc));
        return NREQ_CLOSED;
    }
    if (fifo_inflight(s) >= (uint64_t)lc->max_inflight) {
        s->req_blocked = 1;
        return NREQ_WAIT;
    }
    nf = h.known ? request_fields(h.api_key, f) : 0;
    for (;;) {
        if (nf == 0) {
            break;
        }
        rc = kr_frame_peek_fields(pk + KR_FRAME_PREFIX,
                                  min_sz(c - KR_FRAME_PREFIX, flen), flen,
                                  false, h.api_key, h.api_version,
                                  h.hdr_len, f, nf, &need);
        if (rc != KR_AGAIN) {
            break;
        }
        if (need > have) {
            return NREQ_WAIT;
        }
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
    }
    if (nf > 0 && rc != KR_OK && rc != KR_EUNSUPPORTED) {
        close_bad(s, KR_LOG_WARN, "malformed %s v%d request (CorrelationId "
                  "%d): %s", api_name(h.api_key), h.api_version,
                  h.correlation_id, kr_status_str(rc));
        return NREQ_CLOSED;
    }
    if (nf > 0 && rc == KR_OK) {
        if (h.api_key == KR_API_PRODUCE) {
            if (f[0].found && f[0].val == 0) {
                expect = false;
            }
            if (f[1].found && f[1].val > 0) {
                e.wait_ms = f[1].val;
            }
        } else if (f[0].found && f[0].val > 0) {
            e.wait_ms = f[0].val;
        } else if (nf > 1 && f[1].found && f[1].val > 0) {
            e.wait_ms = f[1].val;
        }
    }
    /* the rules: one table lookup for every frame */
    nr->slot = NULL;
    nr->av_new = false;
    nr->sasl_refuse = false;
    nr->cid = NULL;
    nr->cidlen = 0;
    if (h.api_key == KR_API_API_VERSIONS) {
        const struct kr_api_desc *ad = kr_api_get(KR_API_API_VERSIONS);

        nr->av_new = ad != NULL && h.api_version > ad->valid.hi;
        if (!nr->av_new) {
            char *cid = NULL;
            size_t cidlen = 0;

            (void)request_client_id(in, scan + KR_FRAME_PREFIX, &h, &cid,
                                    &cidlen);
            apiversions_clamps(s, cid, cidlen);
            free(cid);
        }
    } else if (!h.known && s->sasl.tokens == 0) {
        /* issue 13: krelay cannot decode it; may it pass? */
        if (!request_client_id(in, scan + KR_FRAME_PREFIX, &h, &nr->cid,
                               &nr->cidlen)) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return NREQ_CLOSED;
        }
        kr_rule_gate(s->cref->conf->ruleset, &s->rmask, h.api_key,
                     h.api_version, nr->cid, nr->cidlen, &nr->gate);
        if (nr->gate.gate == KR_GATE_REFUSE) {
            nreq_fill(nr, &h, &e, flen, expect);
            return NREQ_REFUSE;     /* process_requests frees nr->cid */
        }
        if (nr->gate.gate == KR_GATE_OBSERVE) {
            char why[160], abuf[24], text[300];

            kr_analyse_unknown_why(&h, why, sizeof(why));
            snprintf(text, sizeof(text), "%s v%d CorrelationId %d: %s",
                     kr_analyse_api_label(h.api_key, abuf, sizeof(abuf)),
                     h.api_version, h.correlation_id, why);
            undecodable_note(s, text);
            if (nr->gate.audit) {
                /* its audit line is written with the response */
                struct kr_an_request r;
                struct kr_an_req *a;

                nr->h = h;
                nr->flen = flen;
                an_request(nr, nr->cid, nr->cidlen, &r);
                a = kr_an_req_from_header(&r, nr->cid, nr->cidlen, why,
                                          KR_AUDIT_FORWARDED);
                if (a != NULL) {
                    a->v.flags = KR_VF_AUDIT;
                    e.rq = rq_wrap(a);
                }
            }
        }
        free(nr->cid);
        nr->cid = NULL;
    }
    if (h.known && s->sasl.tokens == 0) {
        nr->slot = kr_rule_lookup(s->cref->conf->ruleset, h.api_key,
                                  h.api_version, &s->rmask);
    }
    if (nr->slot != NULL || nr->av_new) {
        if (avail - KR_FRAME_PREFIX < flen) {
            return NREQ_WAIT;           /* wait for the whole frame */
        }
        nreq_fill(nr, &h, &e, flen, expect);
        return NREQ_RULES;
    }
    if (h.known && req_hold(h.api_key, h.api_version)) {
        if (avail - KR_FRAME_PREFIX < flen) {
            return NREQ_WAIT;           /* wait for the whole frame */
        }
        if (h.api_key == KR_API_SASL_HANDSHAKE &&
            decode_sasl_handshake(s, in, scan, flen) != 0) {
            return NREQ_CLOSED;
        }
        if (h.api_key == KR_API_SASL_HANDSHAKE && h.api_version == 0 &&
            s->sasl.mech == KR_SASL_OTHER && conn_enforces(s)) {
            /* issue 13: after it the connection would pass opaquely,
               past every rule */
            nreq_fill(nr, &h, &e, flen, expect);
            nr->sasl_refuse = true;
            return NREQ_RULES;
        }
    }
    e.correlation_id = h.correlation_id;
    e.api_key = h.api_key;
    e.api_version = h.api_version;
    e.kind = KR_INF_REQUEST;
    if (expect) {
        if (fifo_push(s, &e) != KR_OK) {
            rq_free(e.rq);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return NREQ_CLOSED;
        }
    } else {
        KR_STAT_INC(s->host->stats, requests_acks0);
        if (push_optional(s, &e) != 0) {
            return NREQ_CLOSED;
        }
    }
    if (h.known && h.api_key == KR_API_SASL_HANDSHAKE && h.api_version == 0) {
        s->want_rsp_first = 1;      /* raw SASL tokens may follow it */
    }
    KR_STAT_INC(s->host->stats, requests);
    KR_STAT_INC_L(s->host->stats, api_requests,
                  kr_stats_api_cell(h.api_key, h.api_version));
    kr_log_trace("[%s] request %s v%d CorrelationId %d ClientId %s, "
                 "%zu bytes%s", s->name, api_name(h.api_key),
                 h.api_version, h.correlation_id,
                 h.client_id_null ? "(null)" : h.client_id, flen,
                 expect ? "" : ", Acks=0: no response");
    s->req_remain = KR_FRAME_PREFIX + (uint64_t)flen;
    return NREQ_FORWARD;
}

/* Forward whole or partial request frames from client.in to up.out. */
static int
process_requests(struct kr_session *s)
{
    struct evbuffer *in = s->client.in;
    size_t total = evbuffer_get_length(in), scan = 0, avail, take;
    struct kr_nreq nr;
    int rc;

    if (s->closing) {
        /* nothing after the request that closes it is forwarded */
        evbuffer_drain(in, total);
        return 0;
    }
    if (s->client.stage != KR_STAGE_FRAMES) {
        return 0;       /* client_preamble comes first (a timer or an
                           upstream read may get here before it) */
    }
    conf_refresh(s);
    if (s->opaque && conn_enforces(s)) {
        /* issue 13: a reload brought an enforcing rule to a connection
           whose bytes krelay no longer reads (SASL after a v0 handshake);
           checked at every read, not only at the reload: the handshake's
           answer may make it opaque after the reload was taken */
        kr_session_close(s, KR_LOG_NOTICE, "closing: enforcing rules now "
                         "apply to this connection, and krelay cannot "
                         "follow its SASL exchange (SaslHandshake v0 "
                         "mechanism)");
        return -1;
    }
    for (;;) {
        avail = total - scan;
        if (s->req_remain > 0) {
            take = min_sz(avail, s->req_remain);
            scan += take;
            s->req_remain -= take;
            if (s->req_remain > 0) {
                break;
            }
            continue;
        }
        if (s->opaque) {
            scan = total;
            break;
        }
        if (s->want_rsp_first) {
            /* a SaslHandshake v0 is in flight: whether raw SASL tokens
               follow is known only from its answer (the up read resumes
               the requests, as after max_inflight) */
            s->req_blocked = 1;
            break;
        }
        if (s->sasl.tokens > 0 && s->nready > 0) {
            /* the handshake's answer is held (fault latency): a token's
               answer cannot wait behind it, so the token waits
               (rtimer_cb resumes the requests) */
            break;
        }
        if (avail < KR_FRAME_PREFIX || s->enforce_wait ||
            (s->paused_until_ms != 0 &&
             kr_clock_timer_ms() < s->paused_until_ms)) {
            break;
        }
        rc = next_request(s, in, scan, avail, &nr);
        if (rc == NREQ_CLOSED) {
            return -1;
        }
        if (rc == NREQ_WAIT) {
            break;
        }
        if (rc == NREQ_REFUSE) {
            char why[160];

            /* what came before goes on; nothing from here does */
            KR_STAT_ADD(s->host->stats, bytes_up, scan);
            move_bytes(s, in, s->up.out, scan);
            kr_analyse_unknown_why(&nr.h, why, sizeof(why));
            rc = refuse_request(s, &nr, nr.cid, nr.cidlen, why);
            free(nr.cid);
            return rc;
        }
        if (rc == NREQ_RULES) {
            /* keep the order: what was scanned goes first */
            KR_STAT_ADD(s->host->stats, bytes_up, scan);
            move_bytes(s, in, s->up.out, scan);
            scan = 0;
            if (rule_request(s, &nr) != 0) {
                return -1;
            }
            if (s->closing) {
                return 0;       /* client.in was discarded */
            }
            total = evbuffer_get_length(in);
        }
    }
    KR_STAT_ADD(s->host->stats, bytes_up, scan);
    move_bytes(s, in, s->up.out, scan);
    return 0;
}

/* ---- responses --------------------------------------------------------- */

/* After a SaslHandshake v0 response: switch to raw token frames. */
static void
sasl_start(struct kr_session *s)
{
    if (!kr_sasl_start_raw(&s->sasl)) {
        s->opaque = 1;
        kr_log_notice("[%s] SASL mechanism without a known token count "
                      "after SaslHandshake v0: the rest of this connection "
                      "passes through unparsed", s->name);
    }
}

/* Process a held response (whole frame at the start of up.in). */
/*
 * Remember the ranges of an ApiVersions response (ErrorCode 0) this
 * connection's broker sent, for clamp_target: only when a clamp rule
 * exists.  payload: the frame without its size prefix, left unchanged.
 */
static void
learn_apiversions(struct kr_session *s, int16_t ver, struct evbuffer *pl)
{
    const struct kr_ruleset *rs = s->cref->conf->ruleset;
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct kr_msg m;
    const struct kr_val *ec, *keys;
    uint32_t i;
    int rc;

    if (rs == NULL || !rs->any_clamp) {
        return;
    }
    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    rc = kr_evcodec_view(pl, stack, (int)KR_ARRAY_LEN(stack), &heap, &rb);
    if (rc == KR_OK) {
        rc = kr_decode_response(&arena, &rb, KR_API_API_VERSIONS, ver, 0, &m,
                                &ce);
    }
    if (rc != KR_OK) {
        goto out;               /* kr_rewrite_response reports it */
    }
    ec = kr_node_get_id(m.body, KR_FIELD_ERROR_CODE);
    keys = kr_node_get_id(m.body, KR_FIELD_API_KEYS);
    if ((ec != NULL && ec->u.i != 0) || keys == NULL ||
        keys->u.arr == NULL) {
        goto out;
    }
    if (s->av == NULL) {
        s->av = malloc(((size_t)kr_api_max + 1) * sizeof(*s->av));
        if (s->av == NULL) {
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
        }
    }
out:
    free(heap);
    kr_arena_free(&arena);
}

static int
held_response(struct kr_session *s, int16_t key, int16_t ver, size_t flen)
{
    struct kr_rewrite_result res;
    int rc;

    evbuffer_drain(s->up.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->up.in, s->hold, flen);
    fifo_pop(s);
    if (key == KR_API_API_VERSIONS) {
        learn_apiversions(s, ver, s->hold);
    }
    memset(&res, 0, sizeof(res));
    rc = kr_rewrite_response(&s->rw, key, ver, s->hold, s->client.out,
                             &res);
    evbuffer_drain(s->hold, evbuffer_get_length(s->hold));
    if (rc == KR_ELIMIT && res.bad_node_id >= 0) {
        close_up(s, KR_LOG_WARN, "%s v%d response names NodeId %d, outside "
                 "this listener's node_id_min..node_id_max %d..%d: widen "
                 "the range (and broker_port_base) in the config",
                 api_name(key), ver, res.bad_node_id, s->lc->node_id_min,
                 s->lc->node_id_max);
        return -1;
    }
    if (rc == KR_ELIMIT && res.bad_node_id < -1) {
        /* -1 is "no node"; other negative ids are no broker's */
        close_up(s, KR_LOG_WARN, "%s v%d response from %s names NodeId %d: "
                 "a broker's NodeId cannot be negative (the upstream sent "
                 "an invalid response)", api_name(key), ver, s->upname,
                 res.bad_node_id);
        return -1;
    }
    if (rc != KR_OK) {
        close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from %s: "
                 "%s", api_name(key), ver, s->upname,
                 res.err[0] ? res.err : kr_status_str(rc));
        return -1;
    }
    KR_STAT_INC(s->host->stats, responses);
    KR_STAT_INC(s->host->stats, responses_held);
    KR_STAT_ADD(s->host->stats, bytes_down, flen + KR_FRAME_PREFIX);
    kr_log_trace("[%s] response %s v%d held: %u endpoints rewritten, %u "
                 "versions capped", s->name, api_name(key), ver,
                 res.endpoints, res.capped);
    return 0;
}

/* May e's response go on unheld (kr_analyse_rsp_may_stream)? */
static bool
rsp_may_stream(const struct kr_inflight *e)
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
static void
rsp_let_go(struct kr_session *s, struct kr_inflight *e, size_t flen)
{
    struct kr_rq *rq = e->rq;
    char note[200];

    if (rq == NULL) {
        return;
    }
    KR_STAT_INC(s->host->stats, frames_undecodable);
    kr_log_rl(KR_LOG_INFO, "[%s] %s v%d response (CorrelationId %d) of %zu "
              "bytes is above max_frame_bytes %" PRId64 ": not held for the "
              "rules, forwarded unchanged", s->name, api_name(e->api_key),
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
    rq_free(rq);
    e->rq = NULL;
}

/*
 * The whole response frame of FIFO entry idx is at the start of up.in:
 * decode it when its rules want it, let the pipeline decide
 * (kr_analyse_response: translate back, fault error, ThrottleTimeMs,
 * audit line), rewrite broker addresses, and leave the frame in rq->out
 * until its turn.  Returns 0, or -1 when closed.
 */
static int
rule_response(struct kr_session *s, uint32_t idx, size_t flen)
{
    struct kr_inflight *e = fifo_at(s, idx);
    struct kr_rq *rq = e->rq;
    struct evbuffer *pl = s->hold, *tmp = NULL;
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
    bool decode;
    int rc = KR_OK, ret = -1;

    if (rq == NULL) {
        rq = e->rq = rq_wrap(NULL);
        if (rq == NULL) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        rq->a->up_version = e->api_version;
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
        if (rc == KR_OK) {
            rc = kr_decode_response(&arena, &rb, e->api_key,
                                    rq->a->up_version, 0, &m, &ce);
        }
        if (rc != KR_OK && rq->a->up_version != e->api_version) {
            close_up(s, KR_LOG_WARN, "cannot decode %s v%d response from %s "
                     "to translate it back to v%d: %s at %s",
                     api_name(e->api_key), rq->a->up_version, s->upname,
                     e->api_version, ce.msg[0] ? ce.msg : kr_status_str(rc),
                     ce.path);
            goto out;
        }
    }
    an_conn(s, &c);
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
            undecodable_note(s, text);
        }
        kr_analyse_response(&c, e, rq->a, NULL, why, rsp_bytes, up_us,
                            &arena, &d);
    } else {
        kr_analyse_response(&c, e, rq->a, decode ? &m : NULL, NULL,
                            rsp_bytes, up_us, &arena, &d);
    }
    switch (d.outcome) {
    case KR_AN_RSP_CLOSE:
        kr_session_close(s, d.level, "%s", d.text);
        goto out;
    case KR_AN_CLOSE_UP:
        close_up(s, d.level, "%s", d.text);
        goto out;
    case KR_AN_DELIVER_CHANGED:
        rsp_bytes = d.rsp_bytes;
        tmp = evbuffer_new();
        err[0] = '\0';
        rc = tmp == NULL ? KR_ENOMEM
                         : kr_evcodec_emit(pl, tmp, &d.w, &m, err,
                                           sizeof(err));
        if (rc != KR_OK) {
            close_up(s, KR_LOG_ERROR, "cannot write %s v%d response: %s",
                     api_name(e->api_key), e->api_version,
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
    if (kr_rewrite_wants(e->api_key, e->api_version)) {
        struct kr_rewrite_result res;

        memset(&res, 0, sizeof(res));
        if (e->api_key == KR_API_API_VERSIONS) {
            learn_apiversions(s, e->api_version, pl);
        }
        rc = kr_rewrite_response(&s->rw, e->api_key, e->api_version, pl,
                                 rq->out, &res);
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
            }
            close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from "
                     "%s: %s", api_name(e->api_key), e->api_version,
                     s->upname, res.err[0] ? res.err : kr_status_str(rc));
            goto out;
        }
        if (res.changed) {
            rq->a->actions |= KR_AUDIT_REWRITTEN;
        }
    } else {
        add_prefix(rq->out, evbuffer_get_length(pl));
        evbuffer_add_buffer(rq->out, pl);
    }
    if (d.fault_close) {
        rq->a->actions |= KR_AUDIT_FAULTED;
        if (rq->a->audit_line != NULL) {
            audit_put(s, rq->a->audit_line);
            rq->a->audit_line = NULL;
        }
        kr_session_close(s, KR_LOG_NOTICE, "closing the connection instead "
                         "of delivering the %s v%d response (CorrelationId "
                         "%d): fault_close_probability of [rule %s]",
                         api_name(e->api_key), e->api_version,
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
    evbuffer_drain(s->hold, evbuffer_get_length(s->hold));
    if (tmp != NULL) {
        evbuffer_free(tmp);
    }
    return ret;
}

/*
 * Feed s->scan at most n bytes of in from offset off, without copying
 * them; *used gets how many it consumed.  Returns the scanner's status
 * (KR_AGAIN when it wants more than those n bytes).
 */
static int
scan_in(struct kr_session *s, struct evbuffer *in, size_t off, size_t n,
        size_t *used)
{
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr ptr;
    size_t u;
    int i, k, rc = s->scan->status;

    *used = 0;
    while (rc == KR_AGAIN && n > 0) {
        if (evbuffer_ptr_set(in, &ptr, off, EVBUFFER_PTR_SET) != 0) {
            break;
        }
        k = evbuffer_peek(in, (ev_ssize_t)n, &ptr, v, (int)KR_ARRAY_LEN(v));
        if (k <= 0) {
            break;
        }
        for (i = 0; i < k && i < (int)KR_ARRAY_LEN(v) && rc == KR_AGAIN &&
             n > 0; i++) {
            rc = kr_scan_feed(s->scan, v[i].iov_base,
                              min_sz(v[i].iov_len, n), &u);
            off += u;
            n -= u;
            *used += u;
        }
    }
    return rc;
}

/* s->scan, allocated at the first use; NULL when closed (out of memory). */
static struct kr_scan *
scanner(struct kr_session *s)
{
    if (s->scan == NULL) {
        s->scan = malloc(sizeof(*s->scan));
        if (s->scan == NULL) {
            close_up(s, KR_LOG_ERROR, "out of memory (response scanner)");
        }
    }
    return s->scan;
}

/*
 * Start streaming the response at the head of the FIFO (flen payload
 * bytes): its endpoints sit only in the body's tagged fields
 * (kr_rewrite_streamable), so everything before them goes to the client
 * as it arrives, walked by kr_scan, and only the tail is held and
 * rewritten (stream_more).  Memory per connection stays at the socket
 * reads in flight, not the frame (a Fetch response may be tens of MiB).
 */
static int
stream_start(struct kr_session *s, const struct kr_inflight *e, size_t flen)
{
    if (scanner(s) == NULL) {
        return -1;
    }
    if (kr_scan_init(s->scan, e->api_key, e->api_version, true, flen) !=
        KR_OK) {
        close_up(s, KR_LOG_ERROR, "internal: cannot scan %s v%d responses",
                 api_name(e->api_key), e->api_version);
        return -1;
    }
    s->stream_key = e->api_key;
    s->stream_ver = e->api_version;
    s->stream_left = flen;
    s->streaming = 1;
    fifo_pop(s);
    KR_STAT_INC(s->host->stats, responses);
    KR_STAT_INC(s->host->stats, responses_streamed);
    return 0;
}

/*
 * A whole streamable response at offset scan of in (flen payload bytes):
 * 1 when its body has no tagged fields (the tail kr_scan leaves is the
 * single byte 0: nothing to rewrite, no decode needed), 0 when it has
 * some (hold and rewrite it), -1 when malformed (closed).  The common
 * Produce and Fetch response costs a walk of its structure, no tree and
 * no allocation.
 */
static int
no_tags(struct kr_session *s, const struct kr_inflight *e,
        struct evbuffer *in, size_t scan, size_t flen)
{
    struct evbuffer_ptr ptr;
    size_t off = scan + KR_FRAME_PREFIX, used = 0;
    uint8_t last;
    int rc;

    if (scanner(s) == NULL) {
        return -1;
    }
    rc = kr_scan_init(s->scan, e->api_key, e->api_version, true, flen);
    if (rc == KR_OK) {
        rc = scan_in(s, in, off, flen, &used);
    }
    if (rc == KR_AGAIN) {
        return 0;                       /* let the held path judge it */
    }
    if (rc != KR_OK) {
        close_up(s, KR_LOG_WARN, "malformed %s v%d response from %s: %s",
                 api_name(e->api_key), e->api_version, s->upname,
                 s->scan->msg);
        return -1;
    }
    off += used;
    if (flen - used != 1 ||
        evbuffer_ptr_set(in, &ptr, off, EVBUFFER_PTR_SET) != 0 ||
        evbuffer_copyout_from(in, &ptr, &last, 1) != 1) {
        return 0;
    }
    return last == 0;
}

/*
 * Go on with the streamed response: scan what arrived after *scan (those
 * bytes join the pass-through run), then, once the whole tail is here,
 * forward the run and write the tail through kr_rewrite_tail.  Returns 1
 * when the frame is done, 0 when more bytes are needed, -1 when closed.
 */
static int
stream_more(struct kr_session *s, struct evbuffer *in, size_t *scan,
            size_t total)
{
    struct kr_rewrite_result res;
    struct evbuffer_ptr ptr;
    size_t used, tail;
    uint8_t last;
    int rc;

    rc = scan_in(s, in, *scan, min_sz(total - *scan, (size_t)s->stream_left),
                 &used);
    *scan += used;
    s->stream_left -= used;
    if (rc == KR_AGAIN) {
        return 0;
    }
    if (rc != KR_OK) {
        close_up(s, KR_LOG_WARN, "malformed %s v%d response from %s: %s",
                 api_name(s->stream_key), s->stream_ver, s->upname,
                 s->scan->msg);
        return -1;
    }
    tail = (size_t)s->stream_left;
    if ((int64_t)tail > s->lc->max_frame_bytes) {
        close_up(s, KR_LOG_WARN, "%s v%d response from %s has %zu bytes of "
                 "tagged fields, above max_frame_bytes %" PRId64,
                 api_name(s->stream_key), s->stream_ver, s->upname, tail,
                 s->lc->max_frame_bytes);
        return -1;
    }
    if (total - *scan < tail) {
        return 0;
    }
    if (tail == 1 && evbuffer_ptr_set(in, &ptr, *scan, EVBUFFER_PTR_SET) ==
        0 && evbuffer_copyout_from(in, &ptr, &last, 1) == 1 && last == 0) {
        /* no tagged fields, nothing to rewrite: the byte joins the run
           (no split of the chain it is in, so nothing is copied) */
        *scan += 1;
        s->streaming = 0;
        s->stream_left = 0;
        s->fifo.head_since_ms = kr_clock_timer_ms();
        return 1;
    }
    KR_STAT_ADD(s->host->stats, bytes_down, *scan);
    move_bytes(s, in, s->client.out, *scan);
    *scan = 0;
    evbuffer_remove_buffer(in, s->hold, tail);
    rc = kr_rewrite_tail(&s->rw, s->stream_key, s->stream_ver, s->hold,
                         s->client.out, &res);
    evbuffer_drain(s->hold, evbuffer_get_length(s->hold));
    if (rc == KR_ELIMIT && res.bad_node_id < -1) {
        close_up(s, KR_LOG_WARN, "%s v%d response from %s names NodeId %d: "
                 "a broker's NodeId cannot be negative (the upstream sent "
                 "an invalid response)", api_name(s->stream_key),
                 s->stream_ver, s->upname, res.bad_node_id);
        return -1;
    }
    if (rc == KR_ELIMIT) {
        close_up(s, KR_LOG_WARN, "%s v%d response names NodeId %d, outside "
                 "this listener's node_id_min..node_id_max %d..%d: widen "
                 "the range (and broker_port_base) in the config",
                 api_name(s->stream_key), s->stream_ver, res.bad_node_id,
                 s->lc->node_id_min, s->lc->node_id_max);
        return -1;
    }
    if (rc != KR_OK) {
        /* res.err's offsets count from the tail's first byte */
        close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from %s: "
                 "%s (in its tagged fields, which start at frame offset "
                 "%" PRIu64 ")", api_name(s->stream_key), s->stream_ver,
                 s->upname, res.err[0] ? res.err : kr_status_str(rc),
                 s->scan->off + KR_FRAME_PREFIX);
        return -1;
    }
    KR_STAT_ADD(s->host->stats, bytes_down, tail);
    if (res.dropped > 0) {
        KR_STAT_INC(s->host->stats, endpoints_dropped);
        kr_log_debug("[%s] %s v%d response: the advertised endpoints are "
                     "longer than the broker's and do not fit the streamed "
                     "frame: dropped (clients refresh metadata instead)",
                     s->name, api_name(s->stream_key), s->stream_ver);
    }
    kr_log_trace("[%s] response %s v%d streamed: %u endpoints rewritten",
                 s->name, api_name(s->stream_key), s->stream_ver,
                 res.endpoints);
    s->streaming = 0;
    s->stream_left = 0;
    s->fifo.head_since_ms = kr_clock_timer_ms();
    return 1;
}

/*
 * A response to a Produce with Acks=0 is dropped (the client expects
 * none): counted; the first one says, once per connection, that this
 * upstream answers them (from then on they are all remembered).
 */
static void
acks0_dropped(struct kr_session *s)
{
    if (!s->acks0_answered) {
        s->acks0_answered = 1;
        kr_log_debug("[%s] upstream %s answers Produce requests with "
                     "Acks=0 (Kafka brokers do not): krelay drops those "
                     "responses", s->name, s->upname);
    }
    KR_STAT_INC(s->host->stats, responses_dropped);
}

/* What next_response decided about the response frame at the scan point. */
enum nrsp_outcome {
    NRSP_CLOSED = -1,                   /* the session was closed */
    NRSP_WAIT,                          /* more bytes are needed */
    NRSP_CUT_THROUGH,                   /* accepted: s->rsp_remain bytes go
                                           on as they are */
    NRSP_HOLD,                          /* whole, held to rewrite broker
                                           addresses (*flen_out) */
    NRSP_RULES,                         /* whole, for rule_response
                                           (*idx_out its entry) */
    NRSP_DROP,                          /* answers an Acks=0 Produce: drop
                                           it (*flen_out) */
    NRSP_STREAM,                        /* streamed: only part is here and
                                           only its tail needs rewriting
                                           (s->streaming set; the size
                                           prefix passes as it is) */
    NRSP_INTERNAL                       /* whole, the answer to krelay's own
                                           request (*idx_out its entry,
                                           *flen_out): never forwarded */
};

/*
 * Look at the response frame at offset scan of up.in and say what
 * happens to it (enum nrsp_outcome).
 */
static enum nrsp_outcome
next_response(struct kr_session *s, struct evbuffer *in, size_t scan,
              size_t avail, size_t *flen_out, uint32_t *idx_out)
{
    uint32_t idx;
    struct kr_inflight *e;
    uint8_t small[KR_PEEK_SMALL];
    struct kr_frame_field f[1];
    const uint8_t *pk;
    size_t c, flen, hl = 0, need = 0;
    int32_t size, corr;
    int rc;

    c = peek(s, in, scan, min_sz(avail, sizeof(small)), small, sizeof(small),
             &pk);
    for (;;) {
        e = fifo_waiting(s, &idx);
        if (e == NULL && s->acks0_forgot > 0 &&
            kr_frame_size(pk, c, KR_FRAME_RSP_MIN, INT32_MAX, &size) ==
                KR_OK) {
            if (c < KR_FRAME_PREFIX + KR_FRAME_RSP_MIN) {
                return NRSP_WAIT;
            }
            /* the answer to a Produce with Acks=0 that krelay stopped
               remembering (push_optional): the client expects none */
            s->acks0_forgot--;
            acks0_dropped(s);
            *flen_out = (size_t)size;
            return NRSP_DROP;
        }
        if (e == NULL) {
            close_up(s, KR_LOG_WARN, "upstream %s sent %zu bytes with no "
                     "request in flight", s->upname, avail);
            return NRSP_CLOSED;
        }
        if (e->kind == KR_INF_SASL_TOKEN) {
            if (idx > 0) {
                close_up(s, KR_LOG_ERROR, "internal: SASL token behind %u "
                         "answered requests", idx);
                return NRSP_CLOSED;
            }
            if (kr_frame_size(pk, c, 0, INT32_MAX, &size) != KR_OK) {
                close_up(s, KR_LOG_WARN, "upstream %s sent a SASL token "
                         "frame of %d bytes", s->upname, size);
                return NRSP_CLOSED;
            }
            fifo_pop(s);
            KR_STAT_INC(s->host->stats, sasl_tokens);
            s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)size;
            return NRSP_CUT_THROUGH;
        }
        if (kr_frame_size(pk, c, KR_FRAME_RSP_MIN, INT32_MAX, &size) !=
            KR_OK) {
            close_up(s, KR_LOG_WARN, "upstream %s sent a response frame of "
                     "%d bytes", s->upname, size);
            return NRSP_CLOSED;
        }
        if (c < KR_FRAME_PREFIX + KR_FRAME_RSP_MIN) {
            return NRSP_WAIT;
        }
        flen = (size_t)size;
        corr = kr_frame_i32(pk + KR_FRAME_PREFIX);
        if (corr != e->correlation_id && s->acks0_forgot > 0 &&
            !kr_inflight_has(&s->fifo, corr)) {
            /* the answer to a Produce with Acks=0 that krelay stopped
               remembering (push_optional): the client expects none */
            s->acks0_forgot--;
            acks0_dropped(s);
            *flen_out = flen;
            return NRSP_DROP;
        }
        if (!e->optional) {
            break;
        }
        if (corr == e->correlation_id) {
            /* a response to a Produce with Acks=0: the client does not
               expect it */
            fifo_remove(s, idx);
            acks0_dropped(s);
            *flen_out = flen;
            return NRSP_DROP;
        }
        /* the answer to a later request: this Acks=0 Produce got none,
           as from Kafka; stop remembering them */
        s->acks0_silent = 1;
        fifo_remove(s, idx);
    }
    if (corr != e->correlation_id) {
        close_up(s, KR_LOG_WARN, "upstream %s answered CorrelationId %d but "
                 "the oldest request in flight is %s v%d CorrelationId %d",
                 s->upname, corr, api_name(e->api_key), e->api_version,
                 e->correlation_id);
        return NRSP_CLOSED;
    }
    if (e->kind == KR_INF_INTERNAL) {
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes to "
                     "krelay's own request exceeds max_frame_bytes %" PRId64,
                     api_name(e->api_key), e->api_version, flen,
                     s->lc->max_frame_bytes);
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        *flen_out = flen;
        *idx_out = idx;
        return NRSP_INTERNAL;
    }
    if (e->api_key == KR_API_SASL_HANDSHAKE && e->api_version == 0) {
        f[0].id = KR_FIELD_ERROR_CODE;
        for (;;) {
            rc = kr_frame_response_hdr_len(pk + KR_FRAME_PREFIX,
                                           min_sz(c - KR_FRAME_PREFIX, flen),
                                           flen,
                                           e->api_key, e->api_version, &hl,
                                           &need);
            if (rc == KR_OK) {
                rc = kr_frame_peek_fields(pk + KR_FRAME_PREFIX,
                                          min_sz(c - KR_FRAME_PREFIX, flen),
                                          flen, true,
                                          e->api_key, e->api_version, hl, f,
                                          1, &need);
            }
            if (rc != KR_AGAIN) {
                break;
            }
            if (need > min_sz(avail - KR_FRAME_PREFIX, flen)) {
                return NRSP_WAIT;
            }
            c = peek(s, in, scan, KR_FRAME_PREFIX + need, small,
                     sizeof(small), &pk);
        }
        if (rc == KR_OK && f[0].found && f[0].val == 0) {
            sasl_start(s);
        }
        s->want_rsp_first = 0;
    }
    if (idx == 0 && e->rq != NULL &&
        (int64_t)flen > s->lc->max_frame_bytes && rsp_may_stream(e)) {
        /* issue 13: too large to hold for rules that only observe it:
           it goes on as if no rule had wanted it */
        rsp_let_go(s, e, flen);
    }
    if (idx > 0 || e->rq != NULL) {
        /* the rules' response, or one that waits behind a held one */
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes exceeds "
                     "max_frame_bytes %" PRId64 " (krelay must hold it %s)",
                     api_name(e->api_key), e->api_version, flen,
                     s->lc->max_frame_bytes,
                     idx > 0 ? "behind responses held for the rules"
                             : "to translate it back to the client's "
                               "version");
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        *flen_out = flen;
        *idx_out = idx;
        return NRSP_RULES;
    }
    if (rsp_hold(e->api_key, e->api_version)) {
        if (kr_rewrite_streamable(e->api_key, e->api_version)) {
            if (avail - KR_FRAME_PREFIX < flen) {
                /* not all here yet: forward it as it arrives */
                return stream_start(s, e, flen) == 0 ? NRSP_STREAM
                                                        : NRSP_CLOSED;
            }
            rc = no_tags(s, e, in, scan, flen);
            if (rc < 0) {
                return NRSP_CLOSED;
            }
            if (rc == 1) {
                /* no tagged fields, so no endpoints: cut-through */
                fifo_pop(s);
                KR_STAT_INC(s->host->stats, responses);
                KR_STAT_INC(s->host->stats, responses_streamed);
                s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)flen;
                return NRSP_CUT_THROUGH;
            }
            if ((int64_t)flen > s->lc->max_frame_bytes) {
                /* too big to hold: streamed, as when it arrives in
                   pieces (max_frame_bytes does not apply to these) */
                return stream_start(s, e, flen) == 0 ? NRSP_STREAM
                                                        : NRSP_CLOSED;
            }
        }
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes exceeds "
                     "max_frame_bytes %" PRId64 " (krelay must hold it to "
                     "rewrite broker addresses)", api_name(e->api_key),
                     e->api_version, flen, s->lc->max_frame_bytes);
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        *flen_out = flen;
        return NRSP_HOLD;
    }
    fifo_pop(s);
    KR_STAT_INC(s->host->stats, responses);
    s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)flen;
    return NRSP_CUT_THROUGH;
}

/*
 * The whole response to krelay's own request (entry idx, flen payload
 * bytes) is at the start of up.in: hand it to its owner, never to the
 * client.  Returns 0, or -1 when closed (by the owner too).
 */
static int
internal_response(struct kr_session *s, uint32_t idx, size_t flen)
{
    struct kr_inflight *e = fifo_at(s, idx);
    struct kr_internal *in = e->internal;
    int16_t key = e->api_key, ver = e->api_version;

    evbuffer_drain(s->up.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->up.in, s->hold, flen);
    e->internal = NULL;
    fifo_remove(s, idx);
    KR_STAT_INC(s->host->stats, responses_internal);
    kr_log_debug("[%s] response to krelay's own %s v%d request: %zu bytes",
                 s->name, api_name(key), ver, flen);
    in->cb(s, in->arg, key, ver, s->hold);
    free(in);
    evbuffer_drain(s->hold, evbuffer_get_length(s->hold));
    return s->dead ? -1 : 0;
}

/* Forward responses from up.in to client.out, in order. */
static int
process_responses(struct kr_session *s)
{
    struct evbuffer *in = s->up.in;
    size_t total = evbuffer_get_length(in), scan = 0, avail, take, flen;
    struct kr_inflight *e;
    uint32_t idx = 0;
    int rc;

    for (;;) {
        avail = total - scan;
        if (s->streaming) {
            rc = stream_more(s, in, &scan, total);
            if (rc < 0) {
                return -1;
            }
            if (rc == 0) {
                break;
            }
            total = evbuffer_get_length(in);
            continue;
        }
        if (s->rsp_remain > 0) {
            take = min_sz(avail, s->rsp_remain);
            scan += take;
            s->rsp_remain -= take;
            if (s->rsp_remain > 0) {
                break;
            }
            /* the next one's clock */
            s->fifo.head_since_ms = kr_clock_timer_ms();
            continue;
        }
        if (s->rsp_drop > 0) {
            /* scan is 0: the bytes before were moved on (NRSP_DROP) */
            take = min_sz(avail, s->rsp_drop);
            evbuffer_drain(in, take);
            s->rsp_drop -= take;
            total = evbuffer_get_length(in);
            if (s->rsp_drop > 0) {
                break;
            }
            continue;
        }
        if (s->opaque) {
            /* raw SASL bytes go after the answers held before them
               (fault latency on the handshake): rtimer_cb comes back */
            if (s->nready == 0) {
                scan = total;
            }
            break;
        }
        if (avail < KR_FRAME_PREFIX) {
            break;
        }
        if (s->nready > 0 && (e = fifo_first(s, &idx)) != NULL &&
            e->rq != NULL && e->rq->ready) {
            /* built responses at the head go out before what follows */
            KR_STAT_ADD(s->host->stats, bytes_down, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            flush_ready(s);
            total = evbuffer_get_length(in);
            avail = total;
        }
        rc = next_response(s, in, scan, avail, &flen, &idx);
        if (rc == NRSP_CLOSED) {
            return -1;
        }
        if (rc == NRSP_WAIT) {
            break;
        }
        if (rc == NRSP_STREAM) {
            scan += KR_FRAME_PREFIX;    /* the size prefix goes as it is */
            continue;
        }
        if (rc == NRSP_DROP) {
            KR_STAT_ADD(s->host->stats, bytes_down, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            s->rsp_drop = KR_FRAME_PREFIX + (uint64_t)flen;
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NRSP_RULES) {
            KR_STAT_ADD(s->host->stats, bytes_down, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            if (rule_response(s, idx, flen) != 0) {
                return -1;
            }
            flush_ready(s);
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NRSP_INTERNAL) {
            KR_STAT_ADD(s->host->stats, bytes_down, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            if (internal_response(s, idx, flen) != 0) {
                return -1;
            }
            flush_ready(s);
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NRSP_HOLD) {
            /* keep the order: what was scanned goes first */
            KR_STAT_ADD(s->host->stats, bytes_down, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            e = fifo_head(s);
            if (held_response(s, e->api_key, e->api_version, flen) != 0) {
                return -1;
            }
            total = evbuffer_get_length(in);
        }
    }
    KR_STAT_ADD(s->host->stats, bytes_down, scan);
    move_bytes(s, in, s->client.out, scan);
    if (s->nready > 0) {
        flush_ready(s);
    }
    return 0;
}

/* ---- callbacks --------------------------------------------------------- */

/*
 * After the client's EOF: once every request it sent has been written
 * upstream, half-close the upstream (the broker sees an orderly end, not
 * a reset that could discard requests it has not read yet), then wait for
 * the broker to close its side while responses still owed go to the
 * client (a half-closed client may read them).  Bounded by KR_DRAIN_MS.
 */
static void
client_eof_progress(struct kr_session *s)
{
    if (!s->client_eof || s->dead) {
        return;
    }
    if (s->up.connected && up_owed(s) == 0 && !s->up_shut) {
        s->up_shut = 1;
        if (shutdown(s->up.fd, SHUT_WR) != 0) {
            close_client(s, KR_LOG_INFO, "client closed the connection");
            return;
        }
    }
    update_io(s);
    s->timer_at = 0;
    if (s->timer != NULL) {
        event_del(s->timer);
    }
    arm_timer(s);
}

/*
 * The client closed its side.  Requests it sent before must still reach
 * the broker: a fire-and-forget producer (Acks=0) writes and closes at
 * once.  Close right away only when nothing is left to do.
 */
static void
client_eof(struct kr_session *s)
{
    if (s->up.connected && up_owed(s) == 0 &&
        s->fifo.len == 0 && !rsp_mid(s) && client_owed(s) == 0) {
        close_client(s, KR_LOG_INFO, "client closed the connection");
        return;
    }
    s->client_eof = 1;
    s->eof_ms = kr_clock_timer_ms();
    kr_log_debug("[%s] client closed its side; finishing %zu request "
                 "bytes and %u responses owed", s->name,
                 up_owed(s), kr_inflight_expected(&s->fifo));
    client_eof_progress(s);
}

/*
 * The rest of the request frame being forwarded is opaque (a Produce
 * request's records): splice it to the upstream, when worth it.
 */
static void
up_lane_try(struct kr_session *s)
{
    if (!s->dead && !s->opaque && !s->closing && s->req_remain > 0) {
        (void)lane_begin(s, &s->upl, &s->client, &s->up, s->req_remain);
    }
}

/*
 * The response being forwarded goes on with bytes krelay does not read:
 * the rest of a cut-through frame, or the value the scanner skips next
 * in a streamed one (a Fetch partition's records).  Splice them to the
 * client, when worth it.
 */
static void
dn_lane_try(struct kr_session *s)
{
    uint64_t run;

    if (s->dead || s->opaque || s->draining) {
        return;
    }
    if (s->streaming) {
        run = s->scan != NULL ? kr_scan_skippable(s->scan) : 0;
    } else {
        run = s->rsp_remain;
    }
    if (run > 0) {
        (void)lane_begin(s, &s->dn, &s->up, &s->client, run);
    }
}

/*
 * Responses built by krelay that waited behind a spliced one go out once
 * its pipe is empty.  Returns 0, or -1 when closed.
 */
static int
client_flush_ready(struct kr_session *s)
{
    if (s->nready == 0 || rsp_mid(s) || s->dn.queued > 0) {
        return 0;
    }
    flush_ready(s);
    return evbuffer_get_length(s->client.out) > 0 ? conn_flush(s, &s->client)
                                                   : 0;
}

/* The transport of s's connections: plain TCP, or its worker's own. */
static const struct kr_conn_ops *
session_ops(const struct kr_session *s)
{
    return s->host->conn_ops != NULL ? s->host->conn_ops : &kr_conn_tcp_ops;
}

/*
 * One step of c's transport handshake (kr_conn_handshake).  Returns 1
 * when it is done (stage KR_STAGE_FRAMES), 0 while it waits for the event
 * it asked for, -1 when it failed (closed).
 */
static int
conn_handshake(struct kr_session *s, struct kr_conn *c)
{
    const char *side = c == &s->client ? "client" : "upstream";

    if (kr_conn_handshake(c) == 0) {
        kr_log_debug("[%s] %s handshake with the %s done", s->name,
                     c->ops->name, side);
        return 1;
    }
    if (kr_conn_again(errno)) {
        return 0;
    }
    if (c == &s->client) {
        close_client(s, KR_LOG_INFO, "%s handshake with the client: %s",
                     c->ops->name, strerror(errno));
    } else {
        close_up(s, KR_LOG_WARN, "%s handshake with upstream %s: %s",
                 c->ops->name, s->upname, strerror(errno));
    }
    return -1;
}

/*
 * Bytes of the client wait in client.in (stage KR_STAGE_FRAMES): forward
 * the requests, answer what krelay answers itself.
 */
static void
client_frames(struct kr_session *s)
{
    /* client.out: responses krelay answered itself */
    if (process_requests(s) == 0) {
        up_lane_try(s);
        if (conn_flush(s, &s->up) == 0 &&
            (client_owed(s) == 0 || conn_flush(s, &s->client) == 0)) {
            update_io(s);
            arm_timer(s);
        }
    }
}

/* The client's handshake step; once done, what it read is framed. */
static void
client_handshake(struct kr_session *s)
{
    if (conn_handshake(s, &s->client) > 0) {
        s->client.connected = 1;
        client_frames(s);
    }
}

/*
 * The client's stages before its frames (kr_conn_stage), after a read.
 * Returns 1 when framing may start, 0 while more is needed (bytes, the
 * handshake), -1 when closed.  The sniff decides on the first 4 bytes, as
 * kr_frame_sniff needs no more.
 */
static int
client_preamble(struct kr_session *s)
{
    struct kr_conn *c = &s->client;
    uint8_t first[KR_FRAME_PREFIX];
    const char *what;

    if (c->stage == KR_STAGE_PROXY) {
        c->stage = KR_STAGE_SNIFF;      /* no listener accepts one yet */
    }
    if (c->stage == KR_STAGE_SNIFF) {
        if (evbuffer_copyout(c->in, first, sizeof(first)) <
            (ev_ssize_t)sizeof(first)) {
            return 0;
        }
        what = kr_frame_sniff(first, sizeof(first));
        if (what != NULL) {
            close_bad(s, KR_LOG_WARN, "%s on a plaintext listener", what);
            return -1;
        }
        c->stage = KR_STAGE_FRAMES;
        if (c->ops->handshake != NULL) {
            c->stage = KR_STAGE_HANDSHAKE;
            c->connected = 0;           /* nothing is written before it */
            if (conn_handshake(s, c) <= 0) {
                return s->dead ? -1 : 0;
            }
            c->connected = 1;
        }
    }
    if (c->stage == KR_STAGE_HANDSHAKE) {
        return 0;                       /* its own events drive it */
    }
    return 1;
}

/* The client's read (client_read) and what follows from it. */
static void
client_read_once(struct kr_session *s)
{
    bool spliced;
    ssize_t n;
    int rc;

    n = lane_read(s, &s->client, &s->upl, &spliced);
    if (spliced) {
        /* a request's opaque run: client socket -> pipe -> upstream */
        if (n > 0) {
            s->last_active_ms = kr_clock_timer_ms();
            s->req_remain -= (uint64_t)n;
            KR_STAT_ADD(s->host->stats, bytes_up, (uint64_t)n);
            if (conn_flush(s, &s->up) == 0) {
                update_io(s);
                arm_timer(s);
            }
        }
        return;
    }
    if (n > 0) {
        s->last_active_ms = kr_clock_timer_ms();
        rc = s->client.stage == KR_STAGE_FRAMES ? 1 : client_preamble(s);
        if (rc > 0) {
            client_frames(s);
        } else if (rc == 0) {
            update_io(s);
            arm_timer(s);
        }
    } else if (n == 0 && s->closing) {
        /* closing already: the responses owed still go out */
        s->client_eof = 1;
        update_io(s);
    } else if (n == 0) {
        client_eof(s);
    } else if (!kr_conn_again(errno)) {
        close_client(s, KR_LOG_INFO, "client read: %s", strerror(errno));
    }
}

/* Write to the client what waits (its write event, or the read event its
   transport's write asked for). */
static void
client_write(struct kr_session *s)
{
    if (conn_flush(s, &s->client) == 0 && client_flush_ready(s) == 0) {
        if (s->draining && client_owed(s) == 0) {
            close_up(s, KR_LOG_INFO, "upstream %s closed the connection "
                     "(last responses delivered)", s->upname);
        } else {
            update_io(s);
        }
    }
}

/*
 * Read the client once: on its read event, on the write event its
 * transport's read asked for, or for bytes the transport holds
 * (kr_conn_kick).  A write that waits for readability is retried after
 * it: the read may have taken what it waited for.
 */
static void
client_read(struct kr_session *s)
{
    client_read_once(s);
    if (!s->dead && s->client.wr_want == KR_CONN_WANT_READ) {
        client_write(s);
    }
    if (!s->dead) {
        /* what the transport holds beyond this read has no event */
        kr_conn_kick(&s->client);
    }
}

/*
 * The client's socket is readable (or its transport holds bytes): the
 * handshake step, or the read (then a write that waited for this), or
 * only that write while krelay does not read.  For plain TCP the read.
 */
static void
client_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    struct kr_conn *c = &s->client;

    (void)fd;
    (void)what;
    s->depth++;
    if (c->stage == KR_STAGE_HANDSHAKE) {
        client_handshake(s);
    } else if (c->reading && c->rd_want == KR_CONN_WANT_READ) {
        client_read(s);
    } else if (c->wr_want == KR_CONN_WANT_READ) {
        client_write(s);
    }
    leave(s);
}

/*
 * The client's socket is writable: the handshake step, a read that
 * waited for this, and the write.  For plain TCP only the write.
 */
static void
client_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    struct kr_conn *c = &s->client;

    (void)fd;
    (void)what;
    s->depth++;
    if (c->stage == KR_STAGE_HANDSHAKE) {
        client_handshake(s);
    } else {
        if (c->reading && c->rd_want == KR_CONN_WANT_WRITE) {
            client_read(s);
        }
        if (!s->dead && c->wr_want == KR_CONN_WANT_WRITE) {
            client_write(s);
        }
    }
    leave(s);
}

/* Upstream gone: deliver what the client has not taken yet, then close. */
static void
upstream_eof(struct kr_session *s, const char *why)
{
    if (s->client_eof && kr_inflight_expected(&s->fifo) == 0 && !rsp_mid(s) &&
        client_owed(s) == 0) {
        /* the orderly end of client_eof(): both sides are done */
        close_client(s, KR_LOG_INFO, "client closed the connection");
        return;
    }
    if (client_owed(s) > 0 && !rsp_mid(s)) {
        kr_log_debug("[%s] upstream %s: %s; flushing responses", s->name,
                     s->upname, why);
        kr_conn_close(&s->up);
        s->draining = 1;
        s->last_active_ms = kr_clock_timer_ms();
        update_io(s);
        s->timer_at = 0;
        arm_timer(s);
        return;
    }
    if (kr_inflight_expected(&s->fifo) == 0 && !rsp_mid(s)) {
        close_up(s, KR_LOG_INFO, "upstream %s: %s", s->upname, why);
    } else if (s->client_eof) {
        /*
         * The client left first; the broker, seeing the half-close, ends
         * too, as Kafka does on EOF, dropping what it still owed (a
         * consumer's long-poll Fetch): the normal end of a connection.
         */
        close_client(s, KR_LOG_INFO, "client closed the connection (the "
                     "upstream then closed with %u requests unanswered)",
                     kr_inflight_expected(&s->fifo));
    } else if (rsp_mid(s)) {
        close_up(s, KR_LOG_WARN, "upstream %s: %s in the middle of a "
                 "response (%u more requests in flight)", s->upname, why,
                 kr_inflight_expected(&s->fifo));
    } else {
        close_up(s, KR_LOG_WARN, "upstream %s: %s with %u requests in flight",
                 s->upname, why, kr_inflight_expected(&s->fifo));
    }
}

/*
 * n bytes of the response's opaque run went into the pipe: account for
 * them as the scanner or the cut-through count would have.  Returns 0, or
 * -1 when closed.
 */
static int
dn_spliced(struct kr_session *s, size_t n)
{
    KR_STAT_ADD(s->host->stats, bytes_down, n);
    if (s->streaming) {
        s->stream_left -= n;
        if (kr_scan_skip(s->scan, n) == KR_EPROTO) {
            close_up(s, KR_LOG_WARN, "malformed %s v%d response from %s: %s",
                     api_name(s->stream_key), s->stream_ver, s->upname,
                     s->scan->msg);
            return -1;
        }
        return 0;
    }
    s->rsp_remain -= n;
    if (s->rsp_remain == 0) {
        /* the next one's clock */
        s->fifo.head_since_ms = kr_clock_timer_ms();
    }
    return 0;
}

/* The upstream's read (up_read) and what follows from it. */
static void
up_read_once(struct kr_session *s)
{
    bool spliced;
    ssize_t n;

    n = lane_read(s, &s->up, &s->dn, &spliced);
    if (spliced) {
        /* a response's opaque run: upstream socket -> pipe -> client */
        if (n > 0) {
            s->rsp_progress_ms = s->last_active_ms = kr_clock_timer_ms();
            if (dn_spliced(s, (size_t)n) == 0 &&
                conn_flush(s, &s->client) == 0 &&
                client_flush_ready(s) == 0) {
                update_io(s);
                arm_timer(s);
            }
        }
        return;
    }
    if (n > 0) {
        /* traffic either way: not idle; a response moving: not stalled */
        s->rsp_progress_ms = s->last_active_ms = kr_clock_timer_ms();
        if (process_responses(s) != 0) {
            return;
        }
        dn_lane_try(s);
        if (s->req_blocked &&
            fifo_inflight(s) < (uint64_t)s->lc->max_inflight) {
            s->req_blocked = 0;
            if (process_requests(s) != 0 || conn_flush(s, &s->up) != 0) {
                return;
            }
        } else if (resume_requests(s) != 0) {
            return;
        }
        if (conn_flush(s, &s->client) == 0) {
            update_io(s);
            arm_timer(s);
        }
    } else if (n == 0) {
        upstream_eof(s, "closed the connection");
    } else if (!kr_conn_again(errno)) {
        upstream_eof(s, strerror(errno));
    }
}

/* Write to the upstream what waits. */
static void
up_write(struct kr_session *s)
{
    if (conn_flush(s, &s->up) == 0) {
        update_io(s);
        client_eof_progress(s);
    }
}

/*
 * Read the upstream once: on its read event, on the write event its
 * transport's read asked for, or for bytes the transport holds
 * (kr_conn_kick).  A write that waits for readability is retried after
 * it: the read may have taken what it waited for.
 */
static void
up_read(struct kr_session *s)
{
    up_read_once(s);
    if (!s->dead && s->up.wr_want == KR_CONN_WANT_READ) {
        up_write(s);
    }
    if (!s->dead) {
        /* what the transport holds beyond this read has no event */
        kr_conn_kick(&s->up);
    }
}

static void
up_connected(struct kr_session *s)
{
    s->up.connected = 1;
    kr_log_debug("[%s] connected to upstream %s", s->name, s->upname);
    /* the deadline changes from connect to request/idle */
    if (s->timer != NULL) {
        event_del(s->timer);
    }
    s->timer_at = 0;
    arm_timer(s);
}

/*
 * The upstream's handshake step; once done it counts as connected (the
 * connect deadline covers the handshake).  Returns 1 when done, 0 while
 * it waits, -1 when closed.
 */
static int
up_handshake(struct kr_session *s)
{
    int rc = conn_handshake(s, &s->up);

    if (rc > 0) {
        up_connected(s);
    }
    return rc;
}

/* connect(2) completed: the handshake starts, if the transport has one.
   Returns as up_handshake. */
static int
up_tcp_connected(struct kr_session *s)
{
    if (s->up.ops->handshake == NULL) {
        up_connected(s);
        return 1;
    }
    s->up.stage = KR_STAGE_HANDSHAKE;
    return up_handshake(s);
}

/*
 * The upstream's socket is readable (or its transport holds bytes): the
 * handshake step, or the read (then a write that waited for this), or
 * only that write while krelay does not read.  For plain TCP the read.
 */
static void
up_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    struct kr_conn *c = &s->up;

    (void)fd;
    (void)what;
    s->depth++;
    if (c->stage == KR_STAGE_HANDSHAKE) {
        if (up_handshake(s) > 0) {
            up_write(s);
        }
    } else if (c->reading && c->rd_want == KR_CONN_WANT_READ) {
        up_read(s);
    } else if (c->connected && c->wr_want == KR_CONN_WANT_READ) {
        up_write(s);
    }
    leave(s);
}

/*
 * The upstream's socket is writable: connect(2) completed, the handshake
 * step, a read that waited for this, and the write.  For plain TCP the
 * connect and the write.
 */
static void
up_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    struct kr_conn *c = &s->up;
    socklen_t len = sizeof(int);
    int err = 0;

    (void)what;
    s->depth++;
    if (c->stage == KR_STAGE_HANDSHAKE) {
        if (up_handshake(s) <= 0) {
            goto out;
        }
    } else if (!c->connected) {
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
        if (err != 0) {
            close_up(s, KR_LOG_WARN, "connect to upstream %s: %s",
                     s->upname, strerror(err));
            goto out;
        }
        if (up_tcp_connected(s) <= 0) {
            goto out;
        }
    } else if (c->reading && c->rd_want == KR_CONN_WANT_WRITE) {
        up_read(s);
        if (s->dead || !c->writing || c->wr_want != KR_CONN_WANT_WRITE) {
            goto out;
        }
    }
    up_write(s);
out:
    leave(s);
}

static void
up_connect(struct kr_session *s, const struct sockaddr *sa, socklen_t salen)
{
    struct event_base *base = s->host->base;
    int fd, on = 1, rc;

    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        close_up(s, KR_LOG_ERROR, "socket for upstream %s: %s", s->upname,
                 strerror(errno));
        return;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    if (kr_conn_open(&s->up, fd, session_ops(s)) != KR_OK) {
        close_up(s, KR_LOG_ERROR, "%s transport for upstream %s: %s",
                 s->up.ops->name, s->upname, strerror(errno));
        return;
    }
    kr_log_debug("[%s] connecting to upstream %s (host name \"%s\", %s "
                 "transport)", s->name, s->upname, s->up.host,
                 s->up.ops->name);
    s->up.rev = event_new(base, fd, EV_READ | EV_PERSIST, up_read_cb, s);
    s->up.wev = event_new(base, fd, EV_WRITE | EV_PERSIST, up_write_cb, s);
    if (s->up.rev == NULL || s->up.wev == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    do {
        rc = connect(fd, sa, salen);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        if (up_tcp_connected(s) > 0 && conn_flush(s, &s->up) == 0) {
            update_io(s);
        }
        return;
    }
    if (errno != EINPROGRESS) {
        close_up(s, KR_LOG_WARN, "connect to upstream %s: %s", s->upname,
                 strerror(errno));
        return;
    }
    kr_conn_set_writing(&s->up, true);
}

static void
resolved_cb(void *arg, int status, const struct sockaddr *addr,
            socklen_t addrlen, const char *host, const char *what)
{
    struct kr_session *s = arg;

    s->resolve = NULL;
    s->depth++;
    snprintf(s->upname, sizeof(s->upname), "%s", what ? what : "?");
    if (status != KR_OK || addr == NULL) {
        if (s->l->node_id == KR_NODE_BOOTSTRAP) {
            close_up(s, KR_LOG_WARN, "no bootstrap server reachable (%s)",
                     s->upname);
        } else if (strncmp(s->upname, "node ", 5) == 0) {
            /* not in the cluster's metadata (kr_upstream logged why) */
            close_up(s, KR_LOG_WARN, "upstream has no address for NodeId "
                     "%d", s->l->node_id);
        } else {
            close_up(s, KR_LOG_WARN, "upstream has no address for NodeId "
                     "%d (%s)", s->l->node_id, s->upname);
        }
    } else {
        /* the name, not only the address: SNI and certificate checks */
        snprintf(s->up.host, sizeof(s->up.host), "%s",
                 host != NULL ? host : "");
        up_connect(s, addr, addrlen);
    }
    leave(s);
}

/* ---- krelay's own requests (KR_INF_INTERNAL) --------------------------- */

int
kr_session_internal_request(struct kr_session *s, const uint8_t *frame,
                            size_t len, int16_t api_key, int16_t api_version,
                            int32_t correlation_id, kr_session_internal_cb cb,
                            void *arg)
{
    struct kr_inflight e;
    uint8_t *buf;
    int rc;

    if (s->dead || s->closing || s->draining || s->req_remain > 0 ||
        s->upl.left > 0 || s->upl.queued > 0 || s->sasl.tokens > 0 ||
        s->opaque || s->want_rsp_first || s->up.fd < 0) {
        return KR_AGAIN;
    }
    memset(&e, 0, sizeof(e));
    e.correlation_id = correlation_id;
    e.api_key = api_key;
    e.api_version = api_version;
    e.kind = KR_INF_INTERNAL;
    e.sent_ms = kr_clock_timer_ms();
    e.internal = malloc(sizeof(*e.internal));
    if (e.internal == NULL) {
        return KR_ENOMEM;
    }
    e.internal->cb = cb;
    e.internal->arg = arg;
    buf = malloc(KR_FRAME_PREFIX + len);
    if (buf == NULL || fifo_push(s, &e) != KR_OK) {
        free(buf);
        free(e.internal);
        return KR_ENOMEM;
    }
    kr_frame_put_size(buf, len);
    memcpy(buf + KR_FRAME_PREFIX, frame, len);
    /* one add: up.out gets the whole frame or nothing */
    rc = evbuffer_add(s->up.out, buf, KR_FRAME_PREFIX + len);
    free(buf);
    if (rc != 0) {
        free(fifo_at(s, s->fifo.len - 1)->internal);
        fifo_remove(s, s->fifo.len - 1);
        return KR_ENOMEM;
    }
    KR_STAT_INC(s->host->stats, requests_internal);
    if (s->up.connected) {
        kr_conn_set_writing(&s->up, true);  /* up_write_cb flushes it */
    }
    arm_timer(s);
    return KR_OK;
}

/* ---- creation ------------------------------------------------------------ */

/* Address and port of sa as separate values (audit lines). */
static void
peer_split(const struct sockaddr *sa, char *host, size_t hlen,
           uint16_t *port)
{
    host[0] = '\0';
    *port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)sa;

        inet_ntop(AF_INET, &a->sin_addr, host, (socklen_t)hlen);
        *port = ntohs(a->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)sa;

        inet_ntop(AF_INET6, &a->sin6_addr, host, (socklen_t)hlen);
        *port = ntohs(a->sin6_port);
    }
}

int
kr_session_new(struct kr_session_host *host, struct kr_group *g,
               const struct kr_listener *l, evutil_socket_t fd,
               const struct sockaddr *sa, socklen_t salen)
{
    struct kr_session *s;
    char peer[64];
    int on = 1, xrc, xerr;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        close(fd);
        kr_log_rl(KR_LOG_ERROR, "out of memory accepting a connection");
        return KR_ENOMEM;
    }
    s->id = atomic_fetch_add_explicit(host->ids, 1,
                                      memory_order_relaxed) + 1;
    s->host = host;
    s->g = g;
    s->l = l;
    s->cref = kr_conf_ref_get(*host->cref);
    s->lc = g->lc;
    kr_conn_init(&s->client);
    kr_conn_init(&s->up);
    s->dn.pipe[0] = s->dn.pipe[1] = -1;
    s->upl.pipe[0] = s->upl.pipe[1] = -1;
    xrc = kr_conn_open(&s->client, fd, session_ops(s));
    xerr = errno;
    s->client.connected = 1;
    /* no framing before the first bytes were looked at */
    s->client.stage = KR_STAGE_SNIFF;
    s->hold = evbuffer_new();
    s->rq_payload = evbuffer_new();
    s->timer = evtimer_new(host->base, timer_cb, s);
    s->rtimer = evtimer_new(host->base, rtimer_cb, s);
    if (salen <= sizeof(s->peer)) {
        memcpy(&s->peer, sa, salen);
    }
    s->rng = (s->id * UINT64_C(0x9E3779B97F4A7C15)) ^
             (uint64_t)kr_clock_wall_us() ^ UINT64_C(0x2545F4914F6CDD1D);
    if (s->rng == 0) {
        s->rng = 1;
    }
    s->client.rev = event_new(host->base, fd, EV_READ | EV_PERSIST,
                              client_read_cb, s);
    s->client.wev = event_new(host->base, fd, EV_WRITE | EV_PERSIST,
                              client_write_cb, s);
    kr_sockaddr_str(sa, salen, peer, sizeof(peer));
    peer_split(sa, s->peer_host, sizeof(s->peer_host), &s->peer_port);
    snprintf(s->name, sizeof(s->name), "c#%" PRIu64 " %s > %s", s->id, peer,
             l->label);
    s->rw.advertised_host = s->lc->advertised_host;
    s->rw.broker_port_base = s->lc->broker_port_base;
    s->rw.node_id_min = s->lc->node_id_min;
    s->rw.node_id_max = s->lc->node_id_max;
    s->rw.upstream = g->up;
    s->rw.who = s->name;
    s->started_ms = s->last_active_ms = kr_clock_timer_ms();
    s->next = *host->sessions;
    if (s->next != NULL) {
        s->next->prev = s;
    }
    *host->sessions = s;
    g->nconn++;
    KR_STAT_INC(host->stats, conn_active);
    KR_STAT_INC(host->stats, conn_accepted);
    s->depth++;
    if (s->client.in == NULL || s->client.out == NULL || s->up.in == NULL ||
        s->up.out == NULL || s->hold == NULL || s->timer == NULL ||
        s->rq_payload == NULL || s->rtimer == NULL ||
        s->client.rev == NULL || s->client.wev == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        leave(s);
        return KR_ENOMEM;
    }
    if (xrc != KR_OK) {
        close_client(s, KR_LOG_ERROR, "%s transport for the client: %s",
                     s->client.ops->name, strerror(xerr));
        leave(s);
        return KR_OK;
    }
    if (s->lc->tcp_nodelay) {
        /* as Kafka brokers do; off, the kernel coalesces small responses
           (Nagle), which a CPU-bound client may prefer */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    }
    kr_log_debug("[%s] accepted", s->name);
    kr_rule_conn_mask(s->cref->conf->ruleset, s->lc->name,
                      (const struct sockaddr *)&s->peer, NULL, &s->rmask);
    audit_open(s);
    update_io(s);
    arm_timer(s);
    if (g->up == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "listener has no upstream");
    } else {
        s->resolve = kr_upstream_resolve(g->up, l->node_id, resolved_cb, s);
    }
    leave(s);
    return KR_OK;
}
