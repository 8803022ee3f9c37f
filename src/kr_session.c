/*
 * kr_session.c - one client connection, its upstream connection, and
 * the frames between them.
 *
 * The session module is three files (src/kr_session_int.h): this one, the
 * pair (creation, event callbacks, timers, backpressure and flushing, the
 * in-flight FIFO as the session keeps it, krelay's own requests, the one
 * close path); kr_session_kmux.c, framing (next_request/next_response,
 * process_*, streaming: steps (a)-(j) below); kr_session_rules.c, the rule
 * pipeline's outcomes applied ("rules" below).  Below them: the transport
 * (kr_conn), the FIFO (kr_inflight), SASL (kr_sasl), the pipeline
 * (kr_analyse), evbuffer <-> codec (kr_evcodec), address rewriting
 * (kr_rewrite); above: the worker (kr_worker), seen only as struct
 * kr_session_host.
 *
 *            client                  krelay                    upstream
 *                                                              (broker)
 *   accept --------> kr_session_new
 *                    kr_upstream_resolve(NodeId | bootstrap)
 *                         `--> resolved_cb --> up_connect ------> connect
 *                    (a TLS client: once its handshake is done; sasl =
 *                    terminate: once its login succeeded, kr_s_up_start)
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
 *                      |                          move it to a held
 *                      |                          buffer (kr_s_hold_take),
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
 *   hold), except a Fetch response its rules only audit (issue 14): at
 *   the FIFO head it streams as in (i), its rule state moved to the
 *   session (rsp_st->rq) and its audit line built from what kr_scan's
 *   observer saw (kr_s_stream_audit_start/end; cut by the close: written
 *   then, as are the lines of audited requests still in the FIFO,
 *   kr_s_audit_unfinished); flush_ready moves ready
 *   entries from the FIFO head to client.out in order as their time
 *   comes (rtimer).  Throttle enforce:
 *   no further request is read while a throttled one is in flight
 *   (enforce_wait), and after a KIP-219 response none for its throttle
 *   time (paused_until_ms), as a broker mutes the channel.  ApiVersions:
 *   the connection's clamps go into rw.clamps for kr_rewrite; one newer
 *   than krelay knows is answered locally (KIP-511).  A reload swaps the
 *   worker's config: conf_refresh picks it up before the next request.
 *
 *   SASL passthrough (issue 9, kr_sasl.h): in next_request, before the
 *   rules, the SASL gate (sasl_gate): while a SASL step (SaslHandshake,
 *   SaslAuthenticate, raw token: FIFO entries with sasl set, counted in
 *   sasl.inflight by kr_s_fifo_push / fifo_leave) awaits its answer, any
 *   other request but ApiVersions is held -- not read further, the client
 *   not read (req_blocked) -- until next_response read the answer
 *   (kr_sasl_on_answer -> kr_s_sasl_outcome: the principal verified, the
 *   rule mask again); then it is judged as any request.  The first token
 *   gives the claimed principal (sasl_token_seen, wiped copies).  A
 *   failure closes after the answer; sasl_auth_timeout_ms (T_SASL).
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
 *   nothing is in flight.  A close after the responses owed may be held
 *   (kr_s_close_hold: an Acks=0 refusal of a client retrying in a loop,
 *   issue 10): the client not read, the close not before the hold's end
 *   (T_CLOSE_HOLD), unless a drain ends it first; a drain releases an
 *   answer held by legacy_refuse_delay_ms as well (kr_s_release_held).
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
 * held (counted in stats.copied_bytes).  A backlog of mostly empty
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
 * TCP, or TLS: kr_tls.h, for a listener or an upstream with ssl; the
 * tests inject faults through kr_session_host.conn_ops).
 * A client connection passes its stages before framing: on a listener
 * with proxy_protocol its PROXY header (issue 12: client_proxy, read off
 * the socket as kr_proxy_proto allows, never past its end; the rules,
 * the audit lines and the upstream wait for it, proxy_done, within
 * proxy_protocol_timeout_ms, T_PROXY; its source is the client's address
 * from then on, the proxy's kept in proxy_host), then in client_preamble
 * (the first-bytes sniff, which closes on "TLS handshake on a plaintext listener", and on
 * a TLS listener on plaintext Kafka or HTTP, and the like; the
 * transport's handshake), an upstream one its handshake once connect(2)
 * completed (up_tcp_connected; it counts as connected after it, within
 * connect_timeout_ms).  A TLS client's upstream is dialled only once its
 * handshake is done (client_secured: a port scan or a stalled handshake
 * costs no broker connection), and the whole of the sniff and handshake
 * has ssl_handshake_timeout_ms (T_HANDSHAKE).  With a client certificate
 * the handshake gives the connection its principal there too
 * (client_principal: Kafka's form, the listener's mapping rules; a client
 * no rule maps is refused), and the rules that match it (kr_rule_conn_mask
 * again) before any request is read.  On a listener with SNI routing
 * (sni_broker_name) the route itself waits for it: sni_route maps the
 * ClientHello's name to a NodeId or the bootstrap (s->node_id, where
 * other sessions take their listener's), and the session's audit lines
 * start then.  A read may ask for the write event and a write for the
 * read event (kr_conn rd_want / wr_want): each event callback runs the
 * step waiting for the event that fired, and a write
 * waiting for readability is retried after every read.  Bytes the
 * transport holds are read without a socket event (kr_conn_kick: after
 * each read, and when update_io lets reading resume after backpressure).
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
#include "kr_principal.h"
#include "kr_proxy_proto.h"
#include "kr_rewrite.h"
#include "kr_sasl.h"
#include "kr_sasl_server.h"
#include "kr_scan.h"
#include "kr_session.h"
#include "kr_sni.h"
#include "kr_stats.h"
#include "kr_tls.h"
#include "kr_topics.h"
#include "kr_translate.h"
#include "kr_upstream.h"
#include "kr_broker_versions.h"
#include "kr_session_int.h"

#include <openssl/bio.h>
#include <openssl/x509.h>


static void session_free(struct kr_session *s);
static bool close_hold_end(struct kr_session *s, int64_t now);

/* Bytes of the reason a connection closes after the responses owed (the
   pipeline's texts are made to fit: kr_analyse.h). */
#define KR_CLOSE_MSG_LEN KR_AN_CLOSE_TEXT_MAX

/* Why s closes after the responses owed (kr_s_close_after_owed). */
static const char *
close_msg(const struct kr_session *s)
{
    return s->close_msg != NULL ? s->close_msg
                                : "closing after the responses owed";
}

/* ---- logging and the one close path ------------------------------------ */

static void vclose(struct kr_session *s, enum kr_close_cause cause,
                   int level, const char *fmt, va_list ap) KR_PRINTF(4, 0);

enum timer_kind {
    T_NONE, T_CONNECT, T_REQUEST, T_RESPONSE, T_IDLE, T_DRAIN, T_LINGER,
    T_CLOSING, T_HANDSHAKE, T_SASL, T_LOGIN, T_PROXY,
    T_CLOSE_HOLD                        /* a held close's end
                                           (kr_s_close_hold) */
};

static void
vclose(struct kr_session *s, enum kr_close_cause cause, int level,
       const char *fmt, va_list ap)
{
    static struct kr_ratelimit rl;
    char msg[768];

    if (s->dead) {
        return;
    }
    s->dead = 1;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (s->closing) {
        /* one line: why it was closing, how long its close was held,
           and what ended it otherwise */
        char why[300], held[160] = "";

        if (s->close_hold_why != NULL) {
            int64_t end = s->close_holding ? kr_clock_timer_ms()
                                           : s->close_hold_until_ms;

            snprintf(held, sizeof(held), "; held %" PRId64 " ms (%.120s)",
                     end - s->close_hold_since_ms, s->close_hold_why);
        }
        snprintf(why, sizeof(why), "%.299s", msg);
        if (strcmp(why, close_msg(s)) == 0) {
            snprintf(msg, sizeof(msg), "%s%s", close_msg(s), held);
        } else {
            snprintf(msg, sizeof(msg), "%s%s; then %s", close_msg(s), held,
                     why);
        }
        level = level < s->close_level ? level : s->close_level;
    }
    kr_s_audit_unfinished(s);       /* before the close line */
    if (s->audited) {
        kr_s_audit_conn(s, "close", cause, msg);
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
    kr_s_orig_free(s);
    kr_s_av_free(s);
    kr_s_rounds_free(s);
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

void
kr_s_close_bad(struct kr_session *s, enum kr_refusal kind, int level,
               const char *fmt, ...)
{
    va_list ap;

    if (!s->dead) {
        KR_STAT_INC_L(s->host->stats, frames_refused, kind);
    }
    va_start(ap, fmt);
    vclose(s, KR_CLOSE_BAD_INPUT, level, fmt, ap);
    va_end(ap);
}

#define CLOSE_WITH(name, cause)                                             \
    void                                                                    \
    name(struct kr_session *s, int level, const char *fmt, ...)             \
    {                                                                       \
        va_list ap;                                                         \
        va_start(ap, fmt);                                                  \
        vclose(s, cause, level, fmt, ap);                                   \
        va_end(ap);                                                         \
    }
CLOSE_WITH(kr_s_close_tls_refused, KR_CLOSE_BAD_INPUT)
CLOSE_WITH(kr_s_close_client, KR_CLOSE_CLIENT)
CLOSE_WITH(kr_s_close_up, KR_CLOSE_UPSTREAM)
CLOSE_WITH(kr_s_close_timeout, KR_CLOSE_TIMEOUT)

static void
session_free(struct kr_session *s)
{
    kr_conn_free_buffers(&s->client);
    kr_conn_free_buffers(&s->up);
    if (s->rq_payload != NULL) {
        evbuffer_free(s->rq_payload);
    }
    while (s->fifo.len > 0) {
        struct kr_inflight *e = kr_inflight_head(&s->fifo);

        kr_s_rq_free(e->rq);
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
    kr_s_orig_free(s);
    kr_s_av_free(s);
    free(s->pp);
    if (s->rsp_st != NULL) {
        kr_s_rq_free(s->rsp_st->rq);
        free(s->rsp_st);
    }
    kr_s_rstream_drop(s);
    free(s->req_st);
    kr_s_sw_put(s->sw);
    kr_audit_memo_free(s->audit_memo);
    free(s->close_msg);
    free(s->principal);
    free(s->proxy_host);
    kr_sasl_free(&s->sasl);
    if (s->sasl_srv != NULL) {
        kr_sasl_srv_free(s->sasl_srv);
        free(s->sasl_srv);
    }
    free(s->clamps);
    free(s->legacy_conf);
    free(s->enforced);
    free(s->av);
    kr_inflight_free(&s->fifo);
    if (s->cref != NULL) {
        kr_conf_ref_put(s->cref);
    }
    kr_upstream_unref(s->rw.upstream);  /* a replaced one's last: freed */
    free(s);
}

void
kr_s_leave(struct kr_session *s)
{
    if (s->depth == 1 && !s->dead &&
        (s->client.wev_failed || s->up.wev_failed)) {
        /* a write event could not be made (kr_conn_events): nothing
           would wake the writer */
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
    }
    if (--s->depth == 0 && s->dead) {
        session_free(s);
    }
}

struct evbuffer *
kr_s_hold_take(struct kr_session *s)
{
    struct kr_session_host *h = s->host;

    if (h->hold != NULL && !h->hold_busy) {
        h->hold_busy = true;
        return h->hold;
    }
    return evbuffer_new();
}

void
kr_s_hold_put(struct kr_session *s, struct evbuffer *b)
{
    struct kr_session_host *h = s->host;

    if (b == NULL) {
        return;
    }
    if (b != h->hold) {
        evbuffer_free(b);
        return;
    }
    evbuffer_drain(b, evbuffer_get_length(b));
    h->hold_busy = false;
}

/* ---- in-flight FIFO (kr_inflight.h) -------------------------------------- */

int
kr_s_fifo_push(struct kr_session *s, const struct kr_inflight *e)
{
    int rc = kr_inflight_push(&s->fifo, e);

    if (rc == KR_OK && e->sasl != 0) {
        s->sasl.inflight++;
    }
    return rc;
}

/*
 * A SASL step leaves the FIFO (issue 9): one fewer in flight; one the
 * broker never answered was answered by krelay (a rule, the SaslHandshake
 * v0 refusal): a handshake that never reached the broker starts nothing,
 * another step fails the exchange.
 */
static void
fifo_leave(struct kr_session *s, const struct kr_inflight *e)
{
    if (e->sasl == 0) {
        return;
    }
    s->sasl.inflight--;
    if (e->sasl == 1 && e->kind == KR_INF_REQUEST &&
        e->api_key == KR_API_SASL_HANDSHAKE) {
        kr_sasl_handshake_unsent(&s->sasl);
    } else if (e->sasl == 1) {
        kr_sasl_on_local_answer(&s->sasl);
    }
}

struct kr_inflight *
kr_s_fifo_head(struct kr_session *s)
{
    return kr_inflight_head(&s->fifo);
}

/* Remove the head: the next one's clock starts, the connection is active. */
void
kr_s_fifo_pop(struct kr_session *s)
{
    kr_s_fifo_pop_at(s, kr_clock_timer_ms());
}

void
kr_s_count_answered(struct kr_session *s, const struct kr_inflight *e,
                    int64_t ms)
{
    kr_stats_observe_latency(s->host->stats, ms);
    if (e->kind == KR_INF_REQUEST) {
        KR_STAT_INC_L(s->host->stats, api_responses,
                      kr_stats_api_cell(e->api_key, e->api_version));
    }
}

void
kr_s_fifo_pop_at(struct kr_session *s, int64_t now_ms)
{
    const struct kr_inflight *e = kr_inflight_head(&s->fifo);
    struct kr_inflight copy = *e;

    fifo_leave(s, e);
    kr_inflight_pop(&s->fifo, now_ms);
    s->last_active_ms = s->fifo.head_since_ms;
    if (!copy.optional) {
        kr_s_count_answered(s, &copy, s->fifo.head_since_ms - copy.sent_ms);
    }
}

/* Remove entry i, keeping the order of the others (kr_inflight_remove). */
void
kr_s_fifo_remove(struct kr_session *s, uint32_t i)
{
    int64_t now = kr_clock_timer_ms();

    fifo_leave(s, kr_inflight_at(&s->fifo, i));
    kr_inflight_remove(&s->fifo, i, now);
    s->last_active_ms = now;
}

struct kr_inflight *
kr_s_fifo_first(struct kr_session *s, uint32_t *idx)
{
    return kr_inflight_first(&s->fifo, idx);
}

/*
 * Entries that count for max_inflight: the expected ones, and the
 * optional ones too once the upstream showed it answers them (they are
 * then never forgotten, so they are bounded like the others).
 */
uint32_t
kr_s_fifo_inflight(const struct kr_session *s)
{
    return s->acks0_answered ? s->fifo.len : kr_inflight_expected(&s->fifo);
}

/* Between two response frames on the way to the client? */
bool
kr_s_rsp_mid(const struct kr_session *s)
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

const char *
kr_s_api_name(int16_t key)
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
                 kr_s_api_name(e->api_key), e->api_version, e->correlation_id);
    } else {
        snprintf(buf, len, "%s v%d CorrelationId %d", kr_s_api_name(e->api_key),
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

static int64_t deadline_io(struct kr_session *s, enum timer_kind *kind);

/*
 * A listener that wants SASL (sasl = terminate or required) and a client
 * that has not authenticated yet: its login must be done within
 * sasl_auth_timeout_ms of the accept (issue 9), whatever it sends
 * meanwhile (nothing, ApiVersions).  Passthrough leaves it to the broker.
 */
static bool
login_pending(const struct kr_session *s)
{
    if (s->sasl_srv != NULL) {
        return !s->sasl_srv->authenticated;
    }
    return s->lc->sasl == KR_SASL_MODE_REQUIRED && !s->sasl.authenticated;
}

/*
 * The nearest deadline: the connection's (deadline_io), or a SASL
 * exchange's end (sasl_auth_timeout_ms from its SaslHandshake, issue 9),
 * or a login's (from the accept, login_pending) when that comes first.
 */
static int64_t
deadline(struct kr_session *s, enum timer_kind *kind)
{
    int64_t at = deadline_io(s, kind), sasl_at;

    if (s->close_holding && (*kind == T_NONE || s->close_hold_until_ms < at)) {
        /* also while the upstream is dialled or answers come */
        *kind = T_CLOSE_HOLD;
        at = s->close_hold_until_ms;
    }
    if (s->closing) {
        return at;
    }
    if (s->sasl.auth == KR_SASL_AUTH_STARTED) {
        sasl_at = s->sasl.started_ms + s->lc->sasl_auth_timeout_ms;
        if (*kind == T_NONE || sasl_at < at) {
            *kind = T_SASL;
            at = sasl_at;
        }
    }
    if (login_pending(s)) {
        sasl_at = s->started_ms + s->lc->sasl_auth_timeout_ms;
        if (*kind == T_NONE || sasl_at < at) {
            *kind = s->sasl.auth == KR_SASL_AUTH_STARTED ? T_SASL : T_LOGIN;
            at = sasl_at;
        }
    }
    return at;
}

static int64_t
deadline_io(struct kr_session *s, enum timer_kind *kind)
{
    const struct kr_listener_conf *lc = s->lc;
    const struct kr_upstream_conf *uc = kr_s_upconf(s);
    const struct kr_inflight *e;
    int64_t connect_ms = uc ? uc->connect_timeout_ms : 10000;
    int64_t margin_ms = uc ? uc->request_timeout_margin_ms : 30000;
    uint32_t i;

    if (s->client.stage == KR_STAGE_PROXY) {
        /* the upstream waits for the header (proxy_done) */
        *kind = T_PROXY;
        return s->started_ms + lc->proxy_protocol_timeout_ms;
    }
    if (s->client_tls && s->client.stage != KR_STAGE_FRAMES) {
        /* the upstream waits for the handshake (client_secured) */
        *kind = T_HANDSHAKE;
        return s->started_ms + lc->ssl_handshake_timeout_ms;
    }
    if (s->draining) {
        *kind = T_DRAIN;
        return s->last_active_ms + KR_DRAIN_MS;
    }
    if (!s->up.connected && !s->up_after_auth) {
        *kind = T_CONNECT;
        return s->up_started_ms + connect_ms;
    }
    if (s->closing && kr_s_fifo_first(s, &i) == NULL) {
        if (s->close_holding) {
            /* the client's KR_DRAIN_MS to take what is owed start at
               the hold's end (close_hold_end) */
            *kind = T_CLOSE_HOLD;
            return s->close_hold_until_ms;
        }
        *kind = T_CLOSING;
        if (s->req_remain > 0 && s->last_active_ms > s->closing_ms) {
            /* the rest of a request still arriving (kr_s_finish_request) */
            return s->last_active_ms + KR_DRAIN_MS;
        }
        return s->closing_ms + KR_DRAIN_MS;
    }
    if (s->client_eof && !s->closing) {
        *kind = T_LINGER;
        return s->eof_ms + KR_DRAIN_MS;
    }
    if (kr_s_rsp_mid(s) || evbuffer_get_length(s->up.in) > 0 ||
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
    e = kr_s_fifo_first(s, &i);
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
void
kr_s_arm_timer(struct kr_session *s)
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

/* s's upstream connection could not be made: counted by its broker. */
static void
count_connect_failure(struct kr_session *s)
{
    KR_STAT_INC_L(s->host->stats, upstream_connect_failures,
                  kr_stats_broker_cell(s->node_id == KR_NODE_BOOTSTRAP,
                                       s->node_id));
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
        case T_HANDSHAKE:
            kr_s_close_timeout(s, KR_LOG_WARN, "no TLS handshake within "
                               "ssl_handshake_timeout_ms %" PRId64 " (%s%"
                               PRIu64 " bytes from the client)",
                               s->lc->ssl_handshake_timeout_ms,
                               s->client.stage == KR_STAGE_HANDSHAKE
                                   ? "stalled in the handshake after "
                                   : "no handshake started: ",
                               s->client.bytes_in);
            break;
        case T_PROXY:
            kr_s_close_timeout(s, KR_LOG_WARN, "no complete PROXY protocol "
                               "header within proxy_protocol_timeout_ms %"
                               PRId64 " (%" PRIu32 " bytes of it read%s%s)",
                               s->lc->proxy_protocol_timeout_ms,
                               s->pp != NULL ? s->pp->fed : 0,
                               s->pp != NULL && s->pp->version != 0
                                   ? ", " : "",
                               s->pp != NULL ? kr_pp_version_name(s->pp)
                                             : "");
            break;
        case T_CONNECT:
            count_connect_failure(s);
            if (s->upname[0] != '\0') {
                kr_s_close_timeout(s, KR_LOG_WARN, "no upstream connection to "
                                   "%s after connect_timeout_ms %" PRId64,
                                   s->upname,
                                   kr_s_upconf(s)
                                       ? kr_s_upconf(s)->connect_timeout_ms
                                       : 0);
            } else {
                kr_s_close_timeout(s, KR_LOG_WARN, "no upstream connection "
                                   "after connect_timeout_ms %" PRId64 ": the "
                                   "broker's address was still being resolved",
                                   kr_s_upconf(s)
                                       ? kr_s_upconf(s)->connect_timeout_ms
                                       : 0);
            }
            break;
        case T_REQUEST:
            e = kr_s_fifo_first(s, &i);
            entry_str(e, desc, sizeof(desc));
            kr_s_close_timeout(s, KR_LOG_WARN, "upstream %s sent no response "
                               "to %s in %" PRId64 " ms", s->upname, desc,
                               now - kr_inflight_since(&s->fifo, e, i));
            break;
        case T_RESPONSE:
            if (client_stalls(s) && client_draining(s)) {
                /* slow, not stalled: a new period from now */
                s->rsp_progress_ms = now;
                kr_s_arm_timer(s);
            } else if (client_stalls(s)) {
                /* reset, not FIN: the MiBs queued for it are freed now,
                   not kept in FIN-WAIT-1 until it reads or times out */
                struct linger lg = { 1, 0 };

                (void)setsockopt(s->client.fd, SOL_SOCKET, SO_LINGER, &lg,
                                 sizeof(lg));
                kr_s_close_client(s, KR_LOG_WARN, "client is not reading its "
                                  "responses: no byte taken for %" PRId64
                                  " ms, %zu bytes wait for it (buffer full: "
                                  "max_buffer_bytes %" PRId64 ")",
                                  now - s->rsp_progress_ms, client_owed(s),
                                  s->lc->max_buffer_bytes);
            } else {
                kr_s_close_timeout(s, KR_LOG_WARN, "upstream %s stopped in the "
                                   "middle of a response: no byte for %" PRId64
                                   " ms", s->upname, now - s->rsp_progress_ms);
            }
            break;
        case T_IDLE:
            kr_s_close_timeout(s, KR_LOG_INFO, "idle for idle_timeout_ms %"
                               PRId64, s->lc->idle_timeout_ms);
            break;
        case T_SASL:
            kr_s_close_timeout(s, KR_LOG_NOTICE, "SASL %s authentication not "
                               "done within sasl_auth_timeout_ms %" PRId64
                               " (%u steps in flight)", s->sasl.mech_name,
                               s->lc->sasl_auth_timeout_ms,
                               s->sasl.inflight);
            break;
        case T_LOGIN:
            kr_s_close_timeout(s, KR_LOG_NOTICE, "no SASL authentication "
                               "within sasl_auth_timeout_ms %" PRId64 " of "
                               "connecting (sasl = %s; %" PRIu64 " requests "
                               "read, %" PRIu64 " bytes)",
                               s->lc->sasl_auth_timeout_ms,
                               s->sasl_srv != NULL ? "terminate"
                                                   : "required",
                               s->nrequests, s->client.bytes_in);
            break;
        case T_LINGER:
            kr_s_close_client(s, KR_LOG_INFO, "client closed the connection "
                              "(upstream %s kept its side open %d ms after "
                              "krelay's; %u responses owed)", s->upname,
                              KR_DRAIN_MS, kr_inflight_expected(&s->fifo));
            break;
        case T_CLOSE_HOLD:
            if (!close_hold_end(s, now)) {
                kr_s_arm_timer(s);
            }
            break;
        case T_CLOSING:
            if (s->req_remain > 0) {
                kr_s_close_client(s, KR_LOG_INFO, "the client sent nothing "
                                  "more of its last request for %d ms (%"
                                  PRIu64 " bytes missing)", KR_DRAIN_MS,
                                  s->req_remain);
                break;
            }
            if (client_owed(s) == 0 && up_owed(s) > 0) {
                kr_s_close_up(s, KR_LOG_INFO, "upstream %s took no request "
                              "bytes for %d ms (%zu bytes not delivered)",
                              s->upname, KR_DRAIN_MS, up_owed(s));
                break;
            }
            kr_s_close_client(s, KR_LOG_INFO, "the client took no response "
                              "bytes for %d ms (%zu bytes not delivered)",
                              KR_DRAIN_MS, client_owed(s));
            break;
        default:
            kr_s_close_up(s, KR_LOG_INFO, "upstream closed the connection; "
                          "client did not take the last responses");
            break;
        }
    } else if (kind != T_NONE) {
        timer_add(s, at, now);
    }
    kr_s_leave(s);
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
        KR_STAT_ADD(s->host->stats, spliced_bytes, (uint64_t)n);
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
            kr_s_update_io(s);
            kr_s_arm_timer(s);
        }
        return n;
    }
    if (n < 0 && kr_conn_again(errno)) {
        return kr_conn_read(src);          /* splice refused: user space */
    }
    return n;
}

/*
 * The client's bytes krelay waits for: the rest of the request frame it
 * forwards (req_remain, less what waits in client.in).  A TLS socket
 * then wakes krelay once a read's worth of them (or most of the rest)
 * is there (kr_conn_want_bytes), not for every record: each wake-up
 * costs krelay an event and the sender (on loopback, the producer's
 * own softirq) a wake-up.  Only while a response is owed (the FIFO
 * holds a request: the current one, unless Acks=0): the connection's
 * deadline is then the request's, which counts from its header
 * whatever the client sends, not one that measures the client's
 * progress by its reads (idle_timeout_ms, the drain and closing
 * deadlines).  Closing, draining, at the client's EOF and between
 * frames every byte wakes it.
 */
static void
client_lowat(struct kr_session *s)
{
    size_t have;
    uint64_t need = 0;
    uint32_t i;

    if (!s->client.ops->rcvlowat) {
        return;     /* plain TCP: every kr_s_update_io, nothing to do */
    }
    have = evbuffer_get_length(s->client.in);
    if (s->req_remain > have && s->client.stage == KR_STAGE_FRAMES &&
        !s->closing && !s->draining && !s->client_eof &&
        kr_s_fifo_first(s, &i) != NULL) {
        need = s->req_remain - have;
    }
    kr_conn_want_bytes(&s->client, need);
}

void
kr_s_update_io(struct kr_session *s)
{
    size_t maxb = (size_t)s->lc->max_buffer_bytes;

    if (s->dead) {
        return;
    }
    client_lowat(s);
    kr_conn_set_reading(&s->client, !s->draining && !s->client_eof &&
                !s->req_blocked &&
                !s->enforce_wait && !s->close_holding &&
                !(s->sasl.tokens > 0 && s->nready > 0) &&
                !kr_conn_out_full(s->up.out, maxb) &&
                lane_readable(s, &s->upl) &&
                (s->paused_until_ms == 0 ||
                 kr_clock_timer_ms() >= s->paused_until_ms));
    kr_conn_set_reading(&s->up, s->up.connected && !s->draining &&
                !kr_conn_out_full(s->client.out, maxb) &&
                lane_readable(s, &s->dn));
}

/*
 * Closing after the responses owed (s->closing): once none is in flight,
 * the client took every byte and every request byte krelay took went
 * upstream (the rest of a frame forwarded in part, req_remain; what a
 * live upstream connection has not taken yet: an Acks=0 Produce waits
 * for no answer, yet was sent before the close; also while the upstream
 * is still being dialled, within its connect deadline: a client's first
 * request may come before the connection is up), close with the message
 * given.  True when closed.
 */
static bool
closing_done(struct kr_session *s)
{
    bool up_live = s->up.connected ? s->up.fd >= 0 : !s->up_after_auth;

    if (!s->closing || s->dead || s->close_holding ||
        kr_inflight_expected(&s->fifo) > 0 ||
        kr_s_rsp_mid(s) || client_owed(s) > 0 || s->req_remain > 0 ||
        (up_live && up_owed(s) > 0)) {
        return false;
    }
    kr_session_close(s, s->close_level, "%s", close_msg(s));
    return true;
}

int
kr_s_close_after_owed(struct kr_session *s, int level, const char *fmt, ...)
{
    va_list ap;

    char msg[KR_CLOSE_MSG_LEN];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    free(s->close_msg);
    s->close_msg = strdup(msg);         /* NULL: close_msg's words */
    s->closing = 1;
    s->close_level = level;
    s->closing_ms = kr_clock_timer_ms();
    client_lowat(s);                    /* every byte counts now */
    /* the request frame forwarded in part goes on to its end (its start
       is upstream, its answer owed); nothing after it does */
    if (kr_s_finish_request(s) > 0 && kr_s_conn_flush(s, &s->up) != 0) {
        return -1;
    }
    if (s->req_remain == 0) {
        kr_s_rstream_abort(s, "the connection closes before krelay read "
                           "the whole request (topics and records: as far "
                           "as it read them)");
    }
    if (closing_done(s)) {
        return -1;
    }
    if (s->req_remain > 0) {
        kr_log_debug("[%s] closing after %u responses owed, once the rest "
                     "of the request being forwarded came (%" PRIu64
                     " bytes)", s->name, kr_inflight_expected(&s->fifo),
                     s->req_remain);
    } else {
        kr_log_debug("[%s] closing after %u responses owed", s->name,
                     kr_inflight_expected(&s->fifo));
    }
    s->timer_at = 0;
    if (s->timer != NULL) {
        event_del(s->timer);
    }
    kr_s_arm_timer(s);
    return 0;
}

void
kr_s_close_hold(struct kr_session *s, int64_t until_ms, const char *why)
{
    s->close_holding = 1;
    s->close_hold_since_ms = kr_clock_timer_ms();
    s->close_hold_until_ms = until_ms;
    s->close_hold_why = why;
    kr_s_update_io(s);
}

/*
 * The hold on s's close (kr_s_close_hold) ends at now: its time came, or
 * krelay drains.  The client is read again (what it sends discarded),
 * its KR_DRAIN_MS to take what is owed start now; closed at once when
 * nothing is owed.  True when closed.
 */
static bool
close_hold_end(struct kr_session *s, int64_t now)
{
    s->close_holding = 0;
    s->close_hold_until_ms = now;
    if (s->closing_ms < now) {
        s->closing_ms = now;
    }
    if (closing_done(s)) {
        return true;
    }
    kr_s_update_io(s);
    return false;
}

int
kr_session_drain(struct kr_session *s)
{
    if (s->dead) {
        return -1;
    }
    /* an UNSUPPORTED_VERSION answer held by legacy_refuse_delay_ms goes
       now, as a held close ends: krelay's drain waits for no hold */
    if (kr_s_release_held(s) != 0) {
        return -1;
    }
    if (s->closing && s->close_holding) {
        /* closing already, held: krelay's drain waits for no hold */
        if (close_hold_end(s, kr_clock_timer_ms())) {
            return -1;
        }
        kr_s_arm_timer(s);
        return 0;
    }
    if (s->closing) {
        return 0;                       /* closing already, for its own
                                           reason */
    }
    return kr_s_close_after_owed(s, KR_LOG_INFO, "krelay drains: closed "
                                 "after the responses owed");
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
int
kr_s_conn_flush(struct kr_session *s, struct kr_conn *c)
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
    if (c == &s->up) {
        /* a request still arriving (cut-through, spliced, streamed for
           its audit line) leaves in full segments, not one small one per
           piece; its last byte uncorks */
        kr_conn_cork(c, s->req_remain > 0 && !s->closing);
    }
    if (evbuffer_get_length(c->out) > 0) {
        n = kr_conn_write(c);
        if (c->copied > 0) {
            /* TLS: small chains coalesced into a record */
            KR_STAT_ADD(s->host->stats, tls_coalesced_bytes, c->copied);
            c->copied = 0;
        }
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
    if (closing_done(s)) {
        return -1;
    }
    return 0;
fail:
    if (c == &s->client) {
        kr_s_close_client(s, KR_LOG_INFO, "write to client: %s",
                          kr_conn_strerror(c, errno));
    } else {
        kr_s_close_up(s, KR_LOG_WARN, "write to upstream %s: %s",
                      s->upname, kr_conn_strerror(c, errno));
    }
    return -1;
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
    if (s->up.connected && up_owed(s) == 0 && !s->up_shut &&
        !s->orig_hold && !s->av_hold && s->rounds == NULL) {
        /* (SASL origination, krelay's own ApiVersions, a translated
           Produce's rounds: not before the client's requests waiting for
           it went on) */
        s->up_shut = 1;
        if (kr_conn_shutdown_write(&s->up) != 0) {
            kr_s_close_client(s, KR_LOG_INFO, "client closed the connection");
            return;
        }
    }
    kr_s_update_io(s);
    s->timer_at = 0;
    if (s->timer != NULL) {
        event_del(s->timer);
    }
    kr_s_arm_timer(s);
}

/*
 * The client closed its side.  Requests it sent before must still reach
 * the broker: a fire-and-forget producer (Acks=0) writes and closes at
 * once.  Close right away only when nothing is left to do.
 */
static void
client_eof(struct kr_session *s)
{
    /* before its first frame (a port probe, a health check, a TLS client
       gone before its ClientHello): nothing to finish, and on a TLS
       listener no upstream to wait for (client_secured dials it) */
    if (s->client.stage < KR_STAGE_FRAMES ||
        ((s->up.connected || s->up_after_auth) && up_owed(s) == 0 &&
         s->fifo.len == 0 && !kr_s_rsp_mid(s) && client_owed(s) == 0)) {
        kr_s_close_client(s, KR_LOG_INFO, "client closed the connection");
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
    uint64_t run;

    if (s->dead || s->closing || s->req_remain == 0) {
        return;
    }
    /* a streamed request: the value its scanner skips next */
    run = !s->rstream ? s->req_remain
          : s->req_st->prefix == 0 ? kr_scan_skippable(&s->req_st->scan)
                                   : 0;
    if (run > 0) {
        (void)lane_begin(s, &s->upl, &s->client, &s->up, run);
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

    if (s->dead || s->draining) {
        return;
    }
    if (s->streaming) {
        run = s->rsp_st != NULL ? kr_scan_skippable(&s->rsp_st->scan) : 0;
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
    if (s->nready == 0 || kr_s_rsp_mid(s) || s->dn.queued > 0) {
        return 0;
    }
    kr_s_flush_ready(s);
    return evbuffer_get_length(s->client.out) > 0
               ? kr_s_conn_flush(s, &s->client)
               : 0;
}

/*
 * The transport of s's client connection: its worker's when it has one
 * (the tests'), TLS with the listener's context (its config generation's)
 * on a listener with ssl, else plain TCP.
 */
static const struct kr_conn_ops *
client_ops(struct kr_session *s)
{
    if (s->host->conn_ops != NULL) {
        return s->host->conn_ops;
    }
    if (s->lc->ssl && s->lc->tls != NULL) {
        s->client.xprt_ctx = s->lc->tls;
        return &kr_tls_ops;
    }
    return &kr_conn_tcp_ops;
}

/* The same for the upstream connection: TLS when the upstream has a
   context (kr_upstream_tls: the latest reload's files). */
static const struct kr_conn_ops *
up_ops(struct kr_session *s)
{
    struct kr_tls_ctx *t;

    if (s->host->conn_ops != NULL) {
        return s->host->conn_ops;
    }
    t = s->rw.upstream != NULL ? kr_upstream_tls(s->rw.upstream) : NULL;
    if (t != NULL) {
        s->up.xprt_ctx = t;
        return &kr_tls_ops;
    }
    return &kr_conn_tcp_ops;
}

/* Did the peer go away (rather than the handshake fail)? */
static bool
peer_gone(int e)
{
    return e == ECONNRESET || e == EPIPE || e == ECONNABORTED;
}

/*
 * One step of c's transport handshake (kr_conn_handshake).  Returns 1
 * when it is done (stage KR_STAGE_FRAMES), 0 while it waits for the event
 * it asked for, -1 when it failed (closed, with one line naming the peer
 * and the transport's reason: OpenSSL's, the certificate check's).
 */
static int
conn_handshake(struct kr_session *s, struct kr_conn *c)
{
    const char *side = c == &s->client ? "client" : "upstream";
    char desc[96];
    int e;

    if (kr_conn_handshake(c) == 0) {
        kr_log_debug("[%s] %s handshake with the %s done%s%s", s->name,
                     c->ops->name, side, c->ops == &kr_tls_ops ? ": " : "",
                     c->ops == &kr_tls_ops
                         ? kr_tls_describe(c, desc, sizeof(desc)) : "");
        return 1;
    }
    e = errno;
    if (kr_conn_again(e)) {
        return 0;
    }
    if (c == &s->client && peer_gone(e)) {
        kr_s_close_client(s, KR_LOG_INFO, "the client left during the %s "
                          "handshake: %s", c->ops->name,
                          kr_conn_strerror(c, e));
    } else if (c == &s->client) {
        if (c->ops == &kr_tls_ops) {
            KR_STAT_INC_L(s->host->stats, tls_handshake_failures,
                          KR_SIDE_CLIENT);
        }
        kr_s_close_tls_refused(s, KR_LOG_WARN, "%s handshake with the "
                               "client failed: %s", c->ops->name,
                               kr_conn_strerror(c, e));
    } else {
        if (c->ops == &kr_tls_ops) {
            KR_STAT_INC_L(s->host->stats, tls_handshake_failures,
                          KR_SIDE_UPSTREAM);
        }
        kr_s_close_up(s, KR_LOG_WARN, "%s handshake with upstream %s (name "
                      "\"%s\") failed: %s", c->ops->name, s->upname,
                      s->up.host != NULL ? s->up.host : "",
                      kr_conn_strerror(c, e));
    }
    return -1;
}

/*
 * OpenSSL's RFC 2253 printing of a subject into buf (len bytes), for a
 * log line about a subject Java's form cannot be given for; "" when it
 * cannot be printed.  Returns buf.
 */
static const char *
subject_openssl(const X509_NAME *sub, char *buf, size_t len)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *p = NULL;
    long n;

    buf[0] = '\0';
    if (b != NULL && X509_NAME_print_ex(b, sub, 0, XN_FLAG_RFC2253) >= 0 &&
        (n = BIO_get_mem_data(b, &p)) > 0) {
        snprintf(buf, len, "%.*s", (int)n, p);
    }
    BIO_free(b);
    return buf;
}

/*
 * The principal of a client whose certificate the handshake verified
 * (kr_tls_peer_subject: for a resumed session, its first handshake's), as
 * Kafka's default principal builder makes it: "User:" and the subject as
 * Java's X500Principal.getName() writes it, through the listener's
 * ssl_principal_mapping_rules (kr_principal.h; the generation of the
 * context the handshake used: s->lc changes only once frames are read).
 * 0 with s->principal set (or left NULL: no verified certificate, a
 * context without ssl_client_ca); -1 when the client is refused, as Kafka
 * refuses it (no rule maps the subject, a rule too costly, a subject the
 * JDK refuses), closed with one line naming the subject and why.
 */
static int
client_principal(struct kr_session *s)
{
    const X509_NAME *sub = kr_tls_peer_subject(&s->client);
    enum kr_principal_map_outcome o;
    char *name = NULL, *mapped = NULL, buf[256];
    const char *why = NULL;
    size_t len = 0, mlen = 0;
    int rc;

    if (sub == NULL) {
        return 0;
    }
    if (X509_NAME_entry_count(sub) == 0 &&
        !kr_tls_peer_san_critical(&s->client)) {
        kr_s_close_tls_refused(s, KR_LOG_WARN,
                               "client certificate refused: its subject "
                               "is empty and its subjectAltName is not "
                               "critical (the JDK, so Kafka, refuses such "
                               "a certificate)");
        return -1;
    }
    rc = kr_principal_x500_name(sub, &name, &len, &why);
    if (rc == KR_ENOMEM) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (rc != KR_OK) {
        kr_s_close_tls_refused(s, KR_LOG_WARN,
                               "client certificate refused: its "
                               "subject (\"%s\" as OpenSSL prints it) has no "
                               "principal: %s (%s)",
                               subject_openssl(sub, buf, sizeof(buf)),
                               why != NULL ? why : "malformed",
                               rc == KR_EPROTO ? "Kafka refuses it too"
                                               : "not supported by krelay");
        return -1;
    }
    o = kr_principal_map(s->lc->principal_rules, name, len, &mapped, &mlen);
    switch (o) {
    case KR_PRINCIPAL_MAPPED:
        s->principal = malloc(sizeof("User:") + mlen);
        if (s->principal != NULL) {
            memcpy(s->principal, "User:", sizeof("User:") - 1);
            memcpy(s->principal + sizeof("User:") - 1, mapped, mlen + 1);
        }
        break;
    case KR_PRINCIPAL_NO_RULE:
        kr_s_close_tls_refused(s, KR_LOG_WARN,
                               "client certificate refused: no "
                               "ssl_principal_mapping_rules rule maps its "
                               "subject \"%s\" (Kafka refuses such a client "
                               "too)", name);
        break;
    case KR_PRINCIPAL_TOO_COSTLY:
        kr_s_close_tls_refused(s, KR_LOG_WARN,
                               "client certificate refused: mapping "
                               "its subject \"%s\" through "
                               "ssl_principal_mapping_rules took more than "
                               "%u matcher steps (a pattern that backtracks "
                               "too much)",
                               name, KR_PRINCIPAL_MATCH_STEPS);
        break;
    case KR_PRINCIPAL_ENOMEM:
        break;
    }
    free(name);
    free(mapped);
    if (o == KR_PRINCIPAL_MAPPED && s->principal != NULL) {
        return 0;
    }
    if (!s->dead) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
    }
    return -1;
}

static void up_start(struct kr_session *s);
static void client_addressed(struct kr_session *s);
static void peer_split(const struct sockaddr *sa, char *host, size_t hlen,
                       uint16_t *port);

/*
 * SNI routing (the listener's sni_broker_name): the name the client's
 * ClientHello sent (this handshake's, also when it resumed a session)
 * picks the route, s->node_id, and the session's name says it.  No name,
 * or one that routes nowhere: one line naming the client and the name,
 * then the bootstrap route (sni_fallback = bootstrap) or the close.
 * Returns 0, or -1 when closed.
 */
static int
sni_route(struct kr_session *s)
{
    const struct kr_listener_conf *lc = s->lc;
    const char *raw = kr_tls_sni(&s->client);
    int32_t node;
    enum kr_sni_route r = kr_sni_route(lc->sni, raw,
                                       raw != NULL ? strlen(raw) : 0,
                                       &node);
    char what[1200], shown[4 * 255 + 1], *gt;
    const char *name = NULL;
    size_t i, k = 0;

    if (raw != NULL) {
        /* the client's bytes as the log shows them: printable ASCII,
           else \xHH (a log stays text, whatever a client sends) */
        for (i = 0; raw[i] != '\0' && k + 4 < sizeof(shown); i++) {
            uint8_t c = (uint8_t)raw[i];

            if (c >= 0x20 && c < 0x7f && c != '\\') {
                shown[k++] = (char)c;
            } else {
                k += (size_t)snprintf(shown + k, sizeof(shown) - k,
                                      "\\x%02x", c);
            }
        }
        shown[k] = '\0';
        name = shown;
    }

    switch (r) {
    case KR_SNI_BROKER:
        s->node_id = node;
        break;
    case KR_SNI_BOOTSTRAP:
        s->node_id = KR_NODE_BOOTSTRAP;
        break;
    case KR_SNI_NONE:
    case KR_SNI_UNKNOWN:
    case KR_SNI_OUT_OF_RANGE:
        if (r == KR_SNI_NONE) {
            snprintf(what, sizeof(what), "no SNI name (a client that dials "
                     "an IP address sends none)");
        } else if (r == KR_SNI_UNKNOWN) {
            snprintf(what, sizeof(what), "SNI name \"%.300s\", neither %s%s%s "
                     "nor a broker's name (sni_broker_name = %s)", name,
                     lc->sni_bootstrap_name != NULL ? "the bootstrap name "
                                                    : "a bootstrap name",
                     lc->sni_bootstrap_name != NULL ? lc->sni_bootstrap_name
                                                    : "",
                     lc->sni_bootstrap_name != NULL ? "" : " (none is set)",
                     lc->sni_broker_name);
        } else {
            snprintf(what, sizeof(what), "SNI name \"%.300s\" of NodeId %s%d, "
                     "outside node_id_min..node_id_max %d..%d", name,
                     node < 0 ? "above " : "", node < 0 ? INT32_MAX : node,
                     (int)lc->node_id_min, (int)lc->node_id_max);
        }
        if (lc->sni_fallback != KR_SNI_FALLBACK_BOOTSTRAP) {
            kr_s_close_tls_refused(s, KR_LOG_WARN,
                                   "TLS client sent %s: closed "
                                   "(sni_fallback = close)", what);
            return -1;
        }
        kr_log_rl(KR_LOG_NOTICE, "[%s] TLS client sent %s: the bootstrap "
                  "route (sni_fallback = bootstrap)", s->name, what);
        s->node_id = KR_NODE_BOOTSTRAP;
        break;
    }
    /* "c#0.7 10.0.0.7:51234 > NodeId 2 by SNI" */
    gt = strstr(s->name, " > ");
    if (gt != NULL) {
        size_t off = (size_t)(gt + 3 - s->name);

        if (s->node_id == KR_NODE_BOOTSTRAP) {
            snprintf(s->name + off, sizeof(s->name) - off, "%s%sbootstrap by "
                     "SNI", lc->name[0] != '\0' ? lc->name : "",
                     lc->name[0] != '\0' ? "/" : "");
        } else {
            snprintf(s->name + off, sizeof(s->name) - off, "%s%sNodeId %d by "
                     "SNI", lc->name[0] != '\0' ? lc->name : "",
                     lc->name[0] != '\0' ? "/" : "", (int)s->node_id);
        }
    }
    if (r == KR_SNI_BROKER || r == KR_SNI_BOOTSTRAP) {
        kr_log_info("[%s] routed by SNI name \"%s\"", s->name, name);
    }
    kr_s_audit_open(s);
    return 0;
}

/*
 * The client's handshake is done (stage FRAMES): its principal and the
 * rules that match it (before any request is read: requests come only
 * after the handshake), its route when the listener routes by SNI, the
 * connection's open audit line, and the upstream when it waited for this.
 * Returns 0, or -1 when closed.
 */
static int
client_secured(struct kr_session *s)
{
    s->client.connected = 1;
    if (s->client_tls) {
        if (client_principal(s) < 0) {
            return -1;
        }
        if (s->principal != NULL) {
            kr_log_debug("[%s] client certificate: %s", s->name,
                         s->principal);
            kr_s_conn_mask(s);
        }
        /* the open line once route and principal are known (sni_route
           writes it; idempotent) */
        if (s->lc->sni != NULL && sni_route(s) != 0) {
            return -1;
        }
        if (s->principal != NULL) {
            kr_s_audit_open(s);
        }
    }
    if (s->client_tls && s->resolve == NULL && s->up.fd < 0 &&
        !s->up_after_auth) {
        up_start(s);
    }
    return s->dead ? -1 : 0;
}

/*
 * Bytes of the client wait in client.in (stage KR_STAGE_FRAMES): forward
 * the requests, answer what krelay answers itself.
 */
static void
client_frames(struct kr_session *s)
{
    /* client.out: responses krelay answered itself */
    if (kr_s_process_requests(s) == 0) {
        up_lane_try(s);
        if (kr_s_conn_flush(s, &s->up) == 0 &&
            (client_owed(s) == 0 || kr_s_conn_flush(s, &s->client) == 0)) {
            kr_s_update_io(s);
            kr_s_arm_timer(s);
        }
    }
}

/* The client's handshake step; once done, what it read is framed. */
static void
client_handshake(struct kr_session *s)
{
    if (conn_handshake(s, &s->client) > 0 && client_secured(s) == 0) {
        client_frames(s);
    }
}

/*
 * The first bytes on a TLS listener (n of them in p): 1 when they start
 * a TLS handshake record, 0 while too few tell, -1 when they are
 * something else (closed with one line naming it: plaintext Kafka, HTTP).
 */
static int
tls_sniff(struct kr_session *s, const uint8_t *p, size_t n)
{
    const char *what;
    char desc[160];

    if (n >= 1 && p[0] == 0x16 && (n < 2 || p[1] == 0x03)) {
        return n >= 2 ? 1 : 0;
    }
    if (n < KR_FRAME_PREFIX) {
        return 0;
    }
    what = kr_frame_sniff(p, n);
    if (what == NULL && n >= 8 && p[0] == 0 && kr_frame_i32(p) >= 8) {
        /* a size prefix, an ApiKey and a version: a Kafka request */
        snprintf(desc, sizeof(desc), "plaintext Kafka (%s v%d request, "
                 "%d bytes)", kr_s_api_name(kr_frame_i16(p + 4)),
                 kr_frame_i16(p + 6), kr_frame_i32(p));
        what = desc;
    } else if (what == NULL) {
        snprintf(desc, sizeof(desc), "%zu bytes that start no TLS handshake "
                 "(%02x %02x %02x %02x)", n, p[0], p[1], p[2], p[3]);
        what = desc;
    }
    kr_s_close_bad(s, KR_REFUSAL_WRONG_PROTOCOL, KR_LOG_WARN,
                   "%s on a TLS listener", what);
    return -1;
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
    uint8_t first[8];
    const char *what;
    ev_ssize_t n;
    int rc;

    if (c->stage == KR_STAGE_SNIFF) {
        n = evbuffer_copyout(c->in, first, sizeof(first));
        if (s->client_tls) {
            rc = tls_sniff(s, first, n > 0 ? (size_t)n : 0);
            if (rc <= 0) {
                return rc;
            }
        } else if (n < KR_FRAME_PREFIX) {
            return 0;
        } else if ((what = kr_frame_sniff(first, KR_FRAME_PREFIX)) != NULL) {
            kr_s_close_bad(s, KR_REFUSAL_WRONG_PROTOCOL, KR_LOG_WARN,
                           "%s on a plaintext listener", what);
            return -1;
        }
        c->stage = KR_STAGE_FRAMES;
        if (c->ops->handshake != NULL) {
            c->stage = KR_STAGE_HANDSHAKE;
            c->connected = 0;           /* nothing is written before it */
            if (conn_handshake(s, c) <= 0) {
                return s->dead ? -1 : 0;
            }
            if (client_secured(s) != 0) {
                return -1;
            }
        }
    }
    if (c->stage == KR_STAGE_HANDSHAKE) {
        return 0;                       /* its own events drive it */
    }
    return 1;
}

/* The PROXY header is done (issue 12): its source is the client. */
static void
proxy_done(struct kr_session *s)
{
    const struct kr_pp *pp = s->pp;
    char was[64], now[64];

    if (pp->kind == KR_PP_PROXIED) {
        s->proxy_host = strdup(s->peer_host);
        if (s->proxy_host == NULL) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return;
        }
        s->proxy_port = s->peer_port;
        kr_sockaddr_str(&s->peer.sa, s->peer.sa.sa_family == AF_INET6
                                         ? sizeof(s->peer.in6)
                                         : sizeof(s->peer.in),
                        was, sizeof(was));
        if (pp->src.sa.sa_family == AF_INET6) {
            s->peer.in6 = pp->src.in6;
        } else {
            s->peer.in = pp->src.in;
        }
        peer_split(&s->peer.sa, s->peer_host, sizeof(s->peer_host),
                   &s->peer_port);
        kr_sockaddr_str(&pp->src.sa, pp->src.sa.sa_family == AF_INET6
                                         ? sizeof(pp->src.in6)
                                         : sizeof(pp->src.in),
                        now, sizeof(now));
        if (snprintf(s->name, sizeof(s->name), "%s %s via %s > %s",
                     s->conn_id, now, was, s->l->label) >=
            (int)sizeof(s->name)) {
            s->name[sizeof(s->name) - 1] = '\0';   /* cut: its start */
        }
        s->proxied = 1;
        if (s->sasl_srv != NULL) {
            /* sasl = terminate: the login rate is the client's, not the
               proxy's (nothing of the exchange has happened yet) */
            uint8_t key[16];
            size_t alen = kr_sasl_rate_key(&s->peer.sa, key);

            kr_sasl_srv_init(s->sasl_srv, s->sasl_srv->cfg,
                             alen > 0 ? key : NULL, alen);
        }
    }
    kr_log_debug("[%s] PROXY protocol %s header (%s, %" PRIu32 " bytes)%s",
                 s->name, kr_pp_version_name(pp), kr_pp_kind_name(pp->kind),
                 pp->size, pp->kind == KR_PP_PROXIED
                     ? "" : ": the connection's own addresses stand");
    free(s->pp);
    s->pp = NULL;
    s->client.stage = KR_STAGE_SNIFF;
    client_addressed(s);
    if (!s->dead && !s->client_tls && !s->up_after_auth &&
        s->resolve == NULL && s->up.fd < 0) {
        up_start(s);
    }
    if (!s->dead) {
        kr_s_update_io(s);
        kr_s_arm_timer(s);
    }
}

/*
 * Stage KR_STAGE_PROXY (issue 12): the header, read off the socket by
 * the parser's measure (kr_pp_want: never a byte past its end, so the
 * sniff, the TLS handshake and the frames after it find theirs on the
 * socket, whose next event goes on with them).  A malformed header, or
 * the end of the connection inside it, closes with one line.
 */
static void
client_proxy(struct kr_session *s)
{
    enum kr_pp_status st = KR_PP_MORE;
    uint8_t b[256];
    size_t want, used;
    ssize_t n;

    while (st == KR_PP_MORE) {
        want = kr_pp_want(s->pp);
        if (want > sizeof(b)) {
            want = sizeof(b);
        }
        n = kr_conn_read_raw(&s->client, b, want);
        if (n < 0 && kr_conn_again(errno)) {
            return;
        }
        if (n < 0) {
            kr_s_close_client(s, KR_LOG_INFO, "client read in its PROXY "
                              "header: %s", strerror(errno));
            return;
        }
        if (n == 0 && s->pp->fed == 0) {
            /* a load balancer's TCP health check, most often */
            kr_s_close_client(s, KR_LOG_INFO, "closed before its PROXY "
                              "protocol header");
            return;
        }
        if (n == 0) {
            kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                           "the connection ended inside its "
                           "PROXY protocol header (%" PRIu32 " bytes of "
                           "it%s%s)", s->pp->fed,
                           s->pp->version != 0 ? ", " : "",
                           kr_pp_version_name(s->pp));
            return;
        }
        s->last_active_ms = kr_clock_timer_ms();
        st = kr_pp_feed(s->pp, b, (size_t)n, &used);
        if (st == KR_PP_MORE && (size_t)n < want) {
            return;                     /* the rest is not there yet */
        }
    }
    if (st == KR_PP_MALFORMED) {
        kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                       "PROXY protocol header refused "
                       "(proxy_protocol = %s): %s",
                       s->lc->proxy_protocol == KR_PP_V1 ? "v1"
                       : s->lc->proxy_protocol == KR_PP_V2 ? "v2" : "any",
                       s->pp->why);
        return;
    }
    proxy_done(s);
}

/* The client's read (client_read) and what follows from it. */
static void
client_read_once(struct kr_session *s)
{
    bool spliced;
    ssize_t n;
    int rc;

    if (s->client.stage == KR_STAGE_PROXY) {
        client_proxy(s);
        return;
    }
    n = lane_read(s, &s->client, &s->upl, &spliced);
    if (spliced) {
        /* a request's opaque run: client socket -> pipe -> upstream */
        if (n > 0) {
            s->last_active_ms = kr_clock_timer_ms();
            s->req_remain -= (uint64_t)n;
            kr_s_rstream_skipped(s, (uint64_t)n);
            KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, (uint64_t)n);
            if (kr_s_conn_flush(s, &s->up) == 0) {
                kr_s_update_io(s);
                kr_s_arm_timer(s);
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
            kr_s_update_io(s);
            kr_s_arm_timer(s);
        }
    } else if (n == 0 && s->closing) {
        /* closing already: the responses owed still go out */
        s->client_eof = 1;
        kr_s_update_io(s);
    } else if (n == 0) {
        client_eof(s);
    } else if (!kr_conn_again(errno)) {
        kr_s_close_client(s, KR_LOG_INFO, "client read: %s",
                          kr_conn_strerror(&s->client, errno));
    }
}

/* Write to the client what waits (its write event, or the read event its
   transport's write asked for). */
static void
client_write(struct kr_session *s)
{
    if (kr_s_conn_flush(s, &s->client) == 0 && client_flush_ready(s) == 0) {
        if (s->draining && client_owed(s) == 0) {
            kr_s_close_up(s, KR_LOG_INFO, "upstream %s closed the connection "
                          "(last responses delivered)", s->upname);
        } else if (s->req_blocked && s->sasl_srv != NULL &&
                   !kr_conn_out_full(s->client.out,
                                     (size_t)s->lc->max_buffer_bytes)) {
            /* sasl = terminate: requests krelay answers itself waited
               for the client to take its answers (answer_room) */
            if (kr_s_resume_requests(s) == 0) {
                kr_s_update_io(s);
            }
        } else {
            kr_s_update_io(s);
        }
    }
}

static void side_read(struct kr_session *s, struct kr_conn *c);

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
        side_read(s, &s->client);
    } else if (c->wr_want == KR_CONN_WANT_READ) {
        client_write(s);
    }
    kr_s_leave(s);
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
            side_read(s, &s->client);
        }
        if (!s->dead && c->wr_want == KR_CONN_WANT_WRITE) {
            client_write(s);
        }
    }
    kr_s_leave(s);
}

/* Upstream gone: deliver what the client has not taken yet, then close. */
/* Entries of krelay's own requests still owed an answer (KR_INF_INTERNAL:
   its ApiVersions, SASL origination, legacy Produce rounds). */
static uint32_t
own_inflight(struct kr_session *s)
{
    uint32_t i, own = 0;

    for (i = 0; i < s->fifo.len; i++) {
        const struct kr_inflight *e = kr_inflight_at(&s->fifo, i);

        own += e->kind == KR_INF_INTERNAL && !e->optional;
    }
    return own;
}

static void
upstream_eof(struct kr_session *s, const char *why)
{
    char owns[128] = "";
    uint32_t n, own;

    if (s->client_eof && kr_inflight_expected(&s->fifo) == 0 &&
        !kr_s_rsp_mid(s) && client_owed(s) == 0) {
        /* the orderly end of client_eof(): both sides are done */
        kr_s_close_client(s, KR_LOG_INFO, "client closed the connection");
        return;
    }
    if (client_owed(s) > 0 && !kr_s_rsp_mid(s)) {
        kr_log_debug("[%s] upstream %s: %s; flushing responses", s->name,
                     s->upname, why);
        kr_conn_close(&s->up);
        s->draining = 1;
        s->last_active_ms = kr_clock_timer_ms();
        kr_s_update_io(s);
        s->timer_at = 0;
        kr_s_arm_timer(s);
        return;
    }
    n = kr_inflight_expected(&s->fifo);
    own = own_inflight(s);
    if (n == 0 && !kr_s_rsp_mid(s)) {
        kr_s_close_up(s, KR_LOG_INFO, "upstream %s: %s", s->upname, why);
        return;
    }
    /* the lines count the client's requests; krelay's own apart */
    n -= own;
    if (own > 0 && kr_s_rounds_unsent(s) > 0) {
        /* a split legacy Produce's rounds wait their turn in the FIFO */
        snprintf(owns, sizeof(owns), " and %u of krelay's own (%u of "
                 "them, and the request they go ahead of, not sent yet)",
                 own, kr_s_rounds_unsent(s));
    } else if (own > 0) {
        snprintf(owns, sizeof(owns), " and %u of krelay's own", own);
    }
    if (s->client_eof) {
        /*
         * The client left first; the broker, seeing the half-close, ends
         * too, as Kafka does on EOF, dropping what it still owed (a
         * consumer's long-poll Fetch that `kcat -C -e` gave up on): the
         * normal end of a connection, and worded as one (the client's
         * close, not a fault of the broker's).
         */
        kr_s_close_client(s, KR_LOG_INFO, "client closed the connection "
                          "with %u request%s%s in flight", n,
                          n == 1 ? "" : "s", owns);
    } else if (kr_s_rsp_mid(s)) {
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s: %s in the middle of a "
                      "response (%u more request%s%s in flight)", s->upname,
                      why, n, n == 1 ? "" : "s", owns);
    } else {
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s: %s with %u request%s%s in "
                      "flight", s->upname, why, n, n == 1 ? "" : "s", owns);
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
    KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, n);
    if (s->streaming) {
        int rc;

        s->stream_left -= n;
        rc = kr_scan_skip(&s->rsp_st->scan, n);
        if (rc == KR_EPROTO) {
            kr_s_close_up(s, KR_LOG_WARN, "malformed %s v%d response from %s: "
                          "%s", kr_s_api_name(s->stream_key), s->stream_ver,
                          s->upname, s->rsp_st->scan.msg);
            return -1;
        }
        if (rc == KR_OK && !s->stream_rewrite) {
            /* the walk ended with the run: no tail to wait for */
            kr_s_stream_plain_end(s);
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
                kr_s_conn_flush(s, &s->client) == 0 &&
                client_flush_ready(s) == 0) {
                kr_s_update_io(s);
                kr_s_arm_timer(s);
            }
        }
        return;
    }
    if (n > 0) {
        /* traffic either way: not idle; a response moving: not stalled */
        s->rsp_progress_ms = s->last_active_ms = kr_clock_timer_ms();
        if (kr_s_process_responses(s) != 0) {
            return;
        }
        if (s->orig != NULL && kr_s_orig_poll(s) != 0) {
            return;                     /* a re-authentication's turn */
        }
        dn_lane_try(s);
        if (s->req_blocked &&
            kr_s_fifo_inflight(s) < (uint64_t)s->lc->max_inflight) {
            s->req_blocked = 0;
            if (kr_s_process_requests(s) != 0 ||
                kr_s_conn_flush(s, &s->up) != 0) {
                return;
            }
        } else if (kr_s_resume_requests(s) != 0) {
            return;
        }
        if (kr_s_conn_flush(s, &s->client) == 0) {
            kr_s_update_io(s);
            kr_s_arm_timer(s);
        }
    } else if (n == 0) {
        upstream_eof(s, "closed the connection");
    } else if (!kr_conn_again(errno)) {
        upstream_eof(s, kr_conn_strerror(&s->up, errno));
    }
}

/* Write to the upstream what waits. */
static void
up_write(struct kr_session *s)
{
    if (kr_s_conn_flush(s, &s->up) == 0) {
        kr_s_update_io(s);
        client_eof_progress(s);
    }
}

/*
 * Read side c once (the client or the upstream): on its read event, on
 * the write event its transport's read asked for, or for bytes the
 * transport holds (kr_conn_kick).  A write that waits for readability is
 * retried after it: the read may have taken what it waited for.
 */
static void
side_read(struct kr_session *s, struct kr_conn *c)
{
    bool client = c == &s->client;

    if (client) {
        client_read_once(s);
    } else {
        up_read_once(s);
    }
    if (!s->dead && c->wr_want == KR_CONN_WANT_READ) {
        if (client) {
            client_write(s);
        } else {
            up_write(s);
        }
    }
    if (!s->dead) {
        /* what the transport holds beyond this read has no event */
        kr_conn_kick(c);
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
    kr_s_arm_timer(s);
    /* SASL origination: krelay's own requests before any client's */
    (void)kr_s_orig_connected(s);
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
        side_read(s, &s->up);
    } else if (c->connected && c->wr_want == KR_CONN_WANT_READ) {
        up_write(s);
    }
    kr_s_leave(s);
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
            count_connect_failure(s);
            kr_s_close_up(s, KR_LOG_WARN, "connect to upstream %s: %s",
                          s->upname, strerror(err));
            goto out;
        }
        if (up_tcp_connected(s) <= 0) {
            goto out;
        }
    } else if (c->reading && c->rd_want == KR_CONN_WANT_WRITE) {
        side_read(s, &s->up);
        if (s->dead || !c->writing || c->wr_want != KR_CONN_WANT_WRITE) {
            goto out;
        }
    }
    up_write(s);
out:
    kr_s_leave(s);
}

static void
up_connect(struct kr_session *s, const struct sockaddr *sa, socklen_t salen)
{
    struct event_base *base = s->host->base;
    int fd, on = 1, rc;

    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        kr_s_close_up(s, KR_LOG_ERROR, "socket for upstream %s: %s", s->upname,
                      strerror(errno));
        return;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    if (kr_conn_open(&s->up, fd, up_ops(s)) != KR_OK) {
        kr_s_close_up(s, KR_LOG_ERROR, "%s transport for upstream %s: %s",
                      s->up.ops->name, s->upname, strerror(errno));
        return;
    }
    kr_log_debug("[%s] connecting to upstream %s (host name \"%s\", %s "
                 "transport)", s->name, s->upname,
                 s->up.host != NULL ? s->up.host : "", s->up.ops->name);
    if (kr_conn_events(&s->up, base, up_read_cb, up_write_cb, s) !=
        KR_OK) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    do {
        rc = connect(fd, sa, salen);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        if (up_tcp_connected(s) > 0 && kr_s_conn_flush(s, &s->up) == 0) {
            kr_s_update_io(s);
        }
        return;
    }
    if (errno != EINPROGRESS) {
        int e = errno;

        count_connect_failure(s);
        kr_s_close_up(s, KR_LOG_WARN, "connect to upstream %s: %s", s->upname,
                      strerror(e));
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
        count_connect_failure(s);
        if (s->node_id == KR_NODE_BOOTSTRAP) {
            kr_s_close_up(s, KR_LOG_WARN, "no bootstrap server reachable (%s)",
                          s->upname);
        } else if (strncmp(s->upname, "node ", 5) == 0) {
            /* not in the cluster's metadata (kr_upstream logged why) */
            kr_s_close_up(s, KR_LOG_WARN, "upstream has no address for NodeId "
                          "%d", s->node_id);
        } else {
            kr_s_close_up(s, KR_LOG_WARN, "upstream has no address for NodeId "
                          "%d (%s)", s->node_id, s->upname);
        }
    } else {
        /* the name, not only the address: SNI and certificate checks */
        char *h = strdup(host != NULL ? host : "");

        if (h == NULL) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            kr_s_leave(s);
            return;
        }
        free(s->up.host);
        s->up.host = h;
        s->up_named = 1;
        up_connect(s, addr, addrlen);
    }
    kr_s_leave(s);
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
        s->want_rsp_first || s->up.fd < 0) {
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
    if (buf == NULL || kr_s_fifo_push(s, &e) != KR_OK) {
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
        free(kr_s_fifo_at(s, s->fifo.len - 1)->internal);
        kr_s_fifo_remove(s, s->fifo.len - 1);
        return KR_ENOMEM;
    }
    KR_STAT_INC(s->host->stats, requests_internal);
    if (s->up.connected) {
        kr_conn_set_writing(&s->up, true);  /* up_write_cb flushes it */
    }
    kr_s_arm_timer(s);
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

/*
 * The client's address is known (at accept; on a listener with
 * proxy_protocol from its header): the rules that may match it, and its
 * audit lines (on a TLS listener with SNI routing: once routed).
 */
static void
client_addressed(struct kr_session *s)
{
    kr_rule_conn_mask(s->cref->conf->ruleset, s->lc->name,
                      (const struct sockaddr *)&s->peer, NULL, &s->rmask);
    if (s->lc->sni == NULL || !s->client_tls) {
        kr_s_audit_open(s);             /* SNI routing: once routed */
    }
}

int
kr_session_new(struct kr_session_host *host, struct kr_group *g,
               const struct kr_listener *l, evutil_socket_t fd,
               const struct sockaddr *sa, socklen_t salen)
{
    struct kr_session *s;
    char peer[64];
    int on = 1, xrc, xerr, ev_rc;
    bool term_ok;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        close(fd);
        kr_log_rl(KR_LOG_ERROR, "out of memory accepting a connection");
        return KR_ENOMEM;
    }
    s->id = atomic_fetch_add_explicit(host->ids, 1,
                                      memory_order_relaxed) + 1;
    snprintf(s->conn_id, sizeof(s->conn_id), "c#%d.%" PRIu64, host->worker,
             ++*host->seq);
    s->started_us = kr_clock_mono_us();
    s->host = host;
    s->g = g;
    s->l = l;
    s->cref = kr_conf_ref_get(*host->cref);
    /* a fetch session is the broker's, not the connection's: one begun
       before a reload may go on here; until this connection's first full
       Fetch, an incremental one under an enforcing topic rule starts
       again (fetch_session_stale, kr_analyse.c) */
    s->fetch_stale = true;
    s->lc = g->lc;
    kr_conn_init(&s->client);
    kr_conn_init(&s->up);
    s->dn.pipe[0] = s->dn.pipe[1] = -1;
    s->upl.pipe[0] = s->upl.pipe[1] = -1;
    xrc = kr_conn_open(&s->client, fd, client_ops(s));
    xerr = errno;
    s->client_tls = s->client.ops == &kr_tls_ops;
    s->client.connected = 1;
    /* no framing before the first bytes were looked at; on a listener
       with proxy_protocol, not before the header (issue 12) */
    s->client.stage = KR_STAGE_SNIFF;
    if (s->lc->proxy_protocol != 0) {
        s->pp = malloc(sizeof(*s->pp));
        if (s->pp != NULL) {
            kr_pp_init(s->pp, (unsigned)s->lc->proxy_protocol);
            s->client.stage = KR_STAGE_PROXY;
        }
    }
    s->timer = evtimer_new(host->base, timer_cb, s);
    if (salen <= sizeof(s->peer)) {
        memcpy(&s->peer, sa, salen);
    }
    s->rng = (s->id * UINT64_C(0x9E3779B97F4A7C15)) ^
             (uint64_t)kr_clock_wall_us() ^ UINT64_C(0x2545F4914F6CDD1D);
    if (s->rng == 0) {
        s->rng = 1;
    }
    ev_rc = kr_conn_events(&s->client, host->base, client_read_cb,
                           client_write_cb, s);
    kr_sockaddr_str(sa, salen, peer, sizeof(peer));
    peer_split(sa, s->peer_host, sizeof(s->peer_host), &s->peer_port);
    snprintf(s->name, sizeof(s->name), "%s %s > %s", s->conn_id, peer,
             l->label);
    s->rw.advertised_host = s->lc->advertised_host;
    s->rw.broker_port_base = s->lc->broker_port_base;
    s->rw.node_id_min = s->lc->node_id_min;
    s->rw.node_id_max = s->lc->node_id_max;
    s->rw.sni = s->lc->sni;
    s->rw.legacy = s->lc->translate_legacy ? kr_bv_legacy_ranges() : NULL;
    s->rw.sni_port = kr_listener_port(l);
    s->node_id = l->node_id;
    /* issue 12: its own reference: a reload may give the listener
       another upstream, this session keeps this one until it ends */
    s->rw.upstream = kr_upstream_ref(g->up);
    s->rw.who = s->name;
    term_ok = kr_s_term_init(s);        /* issue 9: sasl = terminate */
    s->started_ms = s->last_active_ms = kr_clock_timer_ms();
    s->up_started_ms = s->started_ms;
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
        s->up.out == NULL || s->timer == NULL ||
        ev_rc != KR_OK || !term_ok ||
        (s->lc->proxy_protocol != 0 && s->pp == NULL)) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        kr_s_leave(s);
        return KR_ENOMEM;
    }
    if (xrc != KR_OK) {
        kr_s_close_client(s, KR_LOG_ERROR, "%s transport for the client: %s",
                          s->client.ops->name, strerror(xerr));
        kr_s_leave(s);
        return KR_OK;
    }
    if (kr_s_orig_init(s) != 0) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        kr_s_leave(s);
        return KR_ENOMEM;
    }
    if (s->lc->tcp_nodelay) {
        /* as Kafka brokers do; off, the kernel coalesces small responses
           (Nagle), which a CPU-bound client may prefer */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    }
    kr_log_debug("[%s] accepted", s->name);
    if (s->pp == NULL) {
        client_addressed(s);            /* with a PROXY header: then */
    }
    kr_s_update_io(s);
    kr_s_arm_timer(s);
    if (g->up == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "listener has no upstream");
    } else if (!s->client_tls && !s->up_after_auth && s->pp == NULL) {
        up_start(s);
    }
    kr_s_leave(s);
    return KR_OK;
}

/* Find the upstream (then connect: resolved_cb); connect_timeout_ms
   counts from now. */
static void
up_start(struct kr_session *s)
{
    s->up_started_ms = kr_clock_timer_ms();
    if (s->rw.upstream == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "listener has no upstream");
        return;
    }
    s->resolve = kr_upstream_resolve(s->rw.upstream, s->node_id, resolved_cb,
                                     s);
    kr_s_arm_timer(s);
}

void
kr_s_up_start(struct kr_session *s)
{
    if (!s->up_after_auth || s->dead) {
        return;
    }
    s->up_after_auth = 0;
    if (s->resolve == NULL && s->up.fd < 0) {
        kr_log_debug("[%s] authenticated: connecting upstream", s->name);
        s->timer_at = 0;                /* the deadline is connect's now */
        if (s->timer != NULL) {
            event_del(s->timer);
        }
        up_start(s);
    }
}
