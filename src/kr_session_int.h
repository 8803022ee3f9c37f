/*
 * kr_session_int.h - what the files of the session module share (private:
 * librdkafka's *_int.h idiom).  The module's files, one concern each:
 * kr_session.c (the pair of connections: creation, callbacks, timers,
 * backpressure and flushing, the in-flight FIFO, the one close path),
 * kr_session_kmux.c (framing: requests and responses frame by frame,
 * streaming, the splice hand-off; its decisions are named outcomes),
 * kr_session_rules.c (the rule pipeline's outcomes applied: held
 * requests and responses, built responses in order, delays, audit
 * lines), kr_session_av.c (krelay's own ApiVersions upstream),
 * kr_session_rounds.c (a split legacy Produce's rounds, one at a time),
 * kr_session_sasl.c (SASL origination) and kr_session_saslterm.c (SASL
 * termination).  Their shared functions carry the module's private
 * prefix kr_s_; nothing outside src/kr_session*.c includes this (but
 * tests/unit/check_session.c, for kr_s_hold_take's sharing).
 */
#ifndef KR_SESSION_INT_H
#define KR_SESSION_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "kr_analyse.h"
#include "kr_frame.h"
#include "kr_inflight.h"
#include "kr_rule.h"
#include "kr_scan.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_upstream.h"


/* A client whose socket buffer drains by less than this per
   request_timeout_margin_ms is not reading (client_draining). */
#define KR_DRAIN_MIN_BYTES (64 * 1024)
#define KR_PEEK_SMALL 260           /* first copy of a frame's start */
#define KR_DRAIN_MS 5000            /* flush responses after upstream EOF */

/*
 * What the session keeps of a request the rules touched (struct
 * kr_inflight.rq): the pipeline's rule state (kr_analyse.h) and the
 * response frame once built.
 */
struct kr_rq {
    struct kr_an_req *a;                /* rule state, never NULL */
    struct evbuffer *out;               /* response frame with prefix
                                           (NULL until one is built) */
    int64_t release_ms;                 /* monotonic ms it may go out */
    bool ready;                         /* out is complete */
    bool logged;                        /* its audit line was written
                                           while it stays in the FIFO
                                           (the session then closes) */
    bool drain_releases;                /* release_ms is a legacy
                                           refusal's hold, which a drain
                                           ends (kr_s_release_held) */
    struct kr_s_sw *sw;                 /* the client's software when the
                                           request was read (a reference;
                                           NULL: none known) */
};

/*
 * The client's software (KIP-511) as its last ApiVersions v3+ named it:
 * the session's current one (s->sw) and each request read since then
 * (kr_rq.sw) share it, so a request's audit line names the software of
 * the request's time, not of a later ApiVersions pipelined behind it.
 * Reference-counted, one thread (the session's worker).
 */
struct kr_s_sw {
    unsigned refs;
    char name[128];                     /* ClientSoftwareName, cut at 127
                                           bytes; "": none */
    char version[128];                  /* ClientSoftwareVersion */
};

/* Another reference to sw (NULL: none); and letting one go. */
struct kr_s_sw *kr_s_sw_ref(struct kr_s_sw *sw);
void kr_s_sw_put(struct kr_s_sw *sw);

/* Who takes the response to krelay's own request (KR_INF_INTERNAL). */
struct kr_internal {
    kr_session_internal_cb cb;
    void *arg;
};

/* What next_request found about a frame the rules may touch. */
struct kr_nreq {
    struct kr_req_hdr h;
    struct kr_inflight e;
    size_t flen;
    bool expect;                        /* a response will come */
    bool av_new;                        /* ApiVersions newer than known */
    bool sasl_refuse;                   /* SaslHandshake v0 with a mechanism
                                           krelay cannot follow (not PLAIN,
                                           SCRAM-SHA-256/512): answered
                                           UNSUPPORTED_SASL_MECHANISM */
    const struct kr_rule_slot *slot;
    struct kr_gate_result gate;         /* NREQ_REFUSE: why */
    char *cid;                          /* NREQ_REFUSE: the request's own
                                           ClientId (malloc'd, NULL: null) */
    size_t cidlen;                      /* its bytes */
    bool term_raw;                      /* NREQ_SASL_TERM: a raw token
                                           (no header) after SaslHandshake
                                           v0, flen bytes */
    bool term_av;                       /* NREQ_SASL_TERM: an ApiVersions
                                           before authentication, with no
                                           upstream yet: krelay answers */
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
    NREQ_REFUSE = 3,                    /* krelay cannot decode it and an
                                           enforcing rule could match it
                                           (*nr filled): never forwarded */
    NREQ_SASL_TERM = 4,                 /* whole, a SASL step krelay
                                           answers itself (sasl =
                                           terminate; *nr filled) */
    NREQ_ASK = 5                        /* issue 10: krelay must ask the
                                           broker's ApiVersions before
                                           this request (kr_s_av_wanted;
                                           *nr's h filled, nothing of the
                                           frame consumed) */
};

/* What kr_s_rstream_begin decided for a request frame. */
enum rstream_outcome {
    RSTREAM_CLOSED = -1,                /* the session was closed */
    RSTREAM_HOLD = 0,                   /* its rules need it whole: hold
                                           and decode it (NREQ_RULES) */
    RSTREAM_PASS,                       /* no rule matches it: forward it
                                           as if none were there */
    RSTREAM_STREAM                      /* forward it cut-through while
                                           the scanner walks it; its entry
                                           (*e) carries its rule state */
};

/* ---- kr_session.c: the pair, its FIFO, timers, flushing, closing ------ */

/*
 * The close path with its cause counted (kr_session_close counts "other"):
 * the client closed, it sent bad input, the upstream failed or closed, a
 * timeout.  One log line with the session's prefix; idempotent.
 *
 * kr_s_close_bad: the client sent a frame krelay refuses (cause
 * bad_input), of the kind given: the one place frames_refused{kind} is
 * counted (kr_stats.h; besides a request the rules refuse undecoded,
 * closed after the responses owed: kr_session_rules.c's apply_request).
 * Not counted when the session is closed already.
 * kr_s_close_tls_refused: the client's TLS handshake, certificate or SNI
 * name was refused (cause bad_input; no frame: tls_handshake_failures
 * counts failed handshakes).
 */
void kr_s_close_bad(struct kr_session *s, enum kr_refusal kind, int level,
                    const char *fmt, ...) KR_PRINTF(4, 5);
void kr_s_close_tls_refused(struct kr_session *s, int level,
                            const char *fmt, ...) KR_PRINTF(3, 4);
void kr_s_close_client(struct kr_session *s, int level, const char *fmt,
                       ...) KR_PRINTF(3, 4);
void kr_s_close_up(struct kr_session *s, int level, const char *fmt, ...)
    KR_PRINTF(3, 4);
void kr_s_close_timeout(struct kr_session *s, int level, const char *fmt,
                        ...) KR_PRINTF(3, 4);

/*
 * Close once the responses to the requests already forwarded reached the
 * client (as a broker that handles requests in order would); nothing read
 * from the client is forwarded from now on.  Returns 0, or -1 when closed.
 */
int kr_s_close_after_owed(struct kr_session *s, int level, const char *fmt,
                          ...) KR_PRINTF(3, 4);

/*
 * Hold the close that kr_s_close_after_owed, called next, starts: not
 * before until_ms (kr_clock_timer_ms), and nothing read from the client
 * meanwhile (what it sent after is discarded, as when closing); the
 * responses owed still go out, the session's timer ends the hold
 * (T_CLOSE_HOLD), a drain (kr_session_drain) ends it early, any other
 * close does not wait for it.  The close line ends with how long it was
 * held and why (a static string, not copied).
 */
void kr_s_close_hold(struct kr_session *s, int64_t until_ms,
                     const char *why);

/* A callback returned: free s when it was closed and no other is on the
   stack. */
void kr_s_leave(struct kr_session *s);

/*
 * A streamed response (s->streaming): its scanner and, when its audit line
 * is built from what the scanner sees (kr_s_stream_audit_start), what the
 * held path would have kept.  Made at the connection's first streamed
 * response and kept for the next (an idle connection, or one that never
 * streams, carries none of it).
 */
struct kr_s_rsp_stream {
    struct kr_scan scan;
    struct kr_rq *rq;                   /* the response's rule state when
                                           its audit line is built from
                                           the scanner
                                           (kr_analyse_rsp_scan_only);
                                           NULL: none */
    struct kr_inflight e;               /* its request's entry */
    struct kr_audit_scan as;            /* the scanner's observer state */
    uint64_t bytes;                     /* its size with prefix */
    uint64_t first;                     /* client.bytes_out when its first
                                           byte goes out: the bytes the
                                           client got of it are those
                                           beyond */
    int64_t up_us;                      /* the upstream's time, to its
                                           first byte */
};

/*
 * A Produce request streamed for its audit line (s->rstream,
 * kr_s_rstream_*): its scanner and state.  Made at the first such request
 * and kept for the next.
 */
struct kr_s_req_stream {
    struct kr_scan scan;
    uint32_t prefix;                    /* size-prefix bytes still to pass
                                           before the scanner's payload */
    struct kr_an_req *req;              /* its rule state: its FIFO
                                           entry's (borrowed), or its own
                                           (s->rstream_own) */
    struct kr_rq *rq;                   /* the entry's record (NULL:
                                           Acks=0) */
    struct kr_inflight e;               /* the entry, for Acks=0's line */
    struct kr_audit_scan as;            /* the observer; owns the capture
                                           until the walk ends */
};

/*
 * An empty evbuffer for a response frame held while it is looked at
 * (moved out of up.in, learned from, rewritten or decoded, and gone from
 * it before the caller returns): the worker's (host->hold: an idle
 * session keeps none of its own), or when a caller up the stack has that
 * one, a new one.  NULL: out of memory.  Give it back with
 * kr_s_hold_put (NULL is a no-op), whatever it still holds.
 */
struct evbuffer *kr_s_hold_take(struct kr_session *s);
void kr_s_hold_put(struct kr_session *s, struct evbuffer *b);

/* "Fetch", or "ApiKey?" for log lines. */
const char *kr_s_api_name(int16_t key);

/* The smaller of a and b. */
static inline size_t
min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The in-flight FIFO (kr_inflight.h) as the session keeps it: popping and
   removing mark the connection active and start the next one's clock. */
int kr_s_fifo_push(struct kr_session *s, const struct kr_inflight *e);
struct kr_inflight *kr_s_fifo_head(struct kr_session *s);
void kr_s_fifo_pop(struct kr_session *s);
/* The same with the time now_ms (kr_clock_timer_ms) the caller read. */
void kr_s_fifo_pop_at(struct kr_session *s, int64_t now_ms);
/* e's request answered (not an Acks=0 Produce's), ms after it was read:
   response_latency, and api_responses for a client's request.  Called
   once per answer: when its response is matched (kr_s_fifo_pop_at), or
   when a response a rule held or krelay built goes to the client. */
void kr_s_count_answered(struct kr_session *s, const struct kr_inflight *e,
                         int64_t ms);
void kr_s_fifo_remove(struct kr_session *s, uint32_t i);
struct kr_inflight *kr_s_fifo_first(struct kr_session *s, uint32_t *idx);
/* Entries that count for max_inflight. */
uint32_t kr_s_fifo_inflight(const struct kr_session *s);

/* Between two response frames on the way to the client? */
bool kr_s_rsp_mid(const struct kr_session *s);

/* sasl = terminate: the client authenticated, the upstream waited for
   it (up_after_auth): resolve and connect it now.  No-op otherwise. */
void kr_s_up_start(struct kr_session *s);

/* Re-arm the session timer for the nearest deadline. */
void kr_s_arm_timer(struct kr_session *s);

/* Read and write interest from the buffers' state (backpressure). */
void kr_s_update_io(struct kr_session *s);

/* Write what c can take now (out buffer, then splice pipe).  Returns 0, or
   -1 when the session was closed. */
int kr_s_conn_flush(struct kr_session *s, struct kr_conn *c);

/* ---- kr_session_rules.c: the rule pipeline's outcomes applied --------- */

/* s's kr_rq around rule state a (taken; NULL: a new one), NULL on
   ENOMEM; and its free. */
struct kr_rq *kr_s_rq_wrap(struct kr_an_req *a);
void kr_s_rq_free(struct kr_rq *rq);

/*
 * The Produce request frame at offset off of in (flen payload bytes,
 * header h; expect: not Acks=0) has rule slot slot: may it stream
 * (kr_rule_eval_header)?  With RSTREAM_STREAM, s->req_st's scanner is
 * set up for its payload, entry *e gets its rule state (expect), s->rstream is on;
 * the caller forwards the frame cut-through (req_remain), passing every
 * byte of it through kr_s_rstream_feed or kr_s_rstream_skip.
 */
enum rstream_outcome kr_s_rstream_begin(struct kr_session *s,
                                        struct evbuffer *in, size_t off,
                                        const struct kr_req_hdr *h,
                                        size_t flen, bool expect,
                                        const struct kr_rule_slot *slot,
                                        struct kr_inflight *e);
/*
 * The scanner of the streamed request ended (rc KR_OK: walked whole;
 * KR_EPROTO: the request does not decode, its msg says why): its
 * capture goes to its rule state, an Acks=0 one's line is written.
 * s->rstream is off after it.
 */
void kr_s_rstream_end(struct kr_session *s, int rc);
/*
 * n bytes of the streamed request were spliced (they were skippable):
 * tell the scanner (kr_scan_skip) and end the walk when it ends.
 */
void kr_s_rstream_skipped(struct kr_session *s, uint64_t n);
/*
 * The streamed request will not be read to its end (the connection
 * closes): its capture so far goes to its rule state with note (an
 * Acks=0 one's line is written, marked incomplete).  No-op when none.
 */
void kr_s_rstream_abort(struct kr_session *s, const char *note);
/* Forget the streamed request whose entry was never pushed (its rule
   state is freed by the caller); its capture is freed. */
void kr_s_rstream_drop(struct kr_session *s);

/* Audit lines of the connection: "open" once a rule audits it, and
   "open"/"close" events (close: its cause and reason; open: cause
   ignored, reason NULL). */
void kr_s_audit_open(struct kr_session *s);
void kr_s_audit_conn(struct kr_session *s, const char *event,
                     enum kr_close_cause cause, const char *reason);

/* ApiVersions v3+ requests larger than this are not read for the
   client's software (KIP-511 names: a few dozen bytes). */
#define KR_SW_FRAME_MAX 1024

/* Remember the ClientSoftwareName/Version of the whole ApiVersions v3+
   request at offset off of in (flen payload bytes): that request's and
   the connection's later audit lines carry them.  A request above
   KR_SW_FRAME_MAX is not read: the names become unknown (no older ones
   stay).  A request that does not decode changes nothing (forwarded as
   before). */
void kr_s_note_client_software(struct kr_session *s, struct evbuffer *in,
                               size_t off, size_t flen);

/* May e's response stream by with its audit line built from the
   scanner (kr_analyse_rsp_scan_only)?  Then, with s->rsp_st's scanner
   initialised for it: its rule state moves from entry e (flen payload
   bytes) to the session (s->rsp_st: rq, e) and the scanner watches for
   the line;
   ahead: the bytes still owed to the client before the response's first
   (client.out, the splice lane, earlier frames in up.in).  Once it went
   through, kr_s_stream_audit_end writes the line (rewritten: its tail's
   endpoints were); a session closed before that writes it at close
   (kr_s_audit_unfinished). */
bool kr_s_rsp_scan_only(const struct kr_inflight *e);

/* issue 12, response_errors: is the response to (key, ver) decoded whole
   by the broker-address rewrite anyway (held, not streamed), so that its
   every ErrorCode is counted there (kr_s_count_errors_cb, passed to
   kr_rewrite_response_observed) rather than its top-level one at a fixed
   offset?  ApiVersions is not: a broker's UNSUPPORTED_VERSION answer may
   not decode (KIP-511), and its one ErrorCode is at a fixed offset. */
bool kr_s_errors_by_rewrite(int16_t key, int16_t ver);

/* kr_rewrite_observe_fn counting every ErrorCode of body in the
   session's (arg's) response_errors. */
void kr_s_count_errors_cb(void *arg, const struct kr_node *body);
void kr_s_stream_audit_start(struct kr_session *s, struct kr_inflight *e,
                             size_t flen, uint64_t ahead);
void kr_s_stream_audit_end(struct kr_session *s, bool rewritten);

/* The connection closes (before its close line): every audited request
   without a line gets one, marked "incomplete" (doc/audit.md): the
   streamed response cut in the middle (what the scanner read, the bytes
   the client got), then each request still waiting for its response or
   for its turn to go out. */
void kr_s_audit_unfinished(struct kr_session *s);

/* The end of a streamed response whose tail passes as it is (the rest
   goes cut-through); its audit line (kmux). */
void kr_s_stream_plain_end(struct kr_session *s);

/* ---- SASL termination (kr_session_saslterm.c, issue 9) ---------------- */

/*
 * For a connection whose listener terminates SASL (s->sasl_srv): what
 * happens to the frame at offset scan of in (avail bytes there, >= 4).
 * NREQ_SASL_TERM (*nr filled: a SASL step or raw token, or with
 * nr->term_av an ApiVersions before authentication, whole), NREQ_WAIT
 * (also while the cluster's ApiVersions is not known yet: the requests
 * pause, s->paused_until_ms, and are looked at again),
 * NREQ_CLOSED (a request before authentication, in the middle of an
 * exchange, after the session lifetime ran out; one log line), or
 * NREQ_FORWARD meaning "not SASL's: go on as usual" (nothing consumed).
 */
enum nreq_outcome kr_s_term_next(struct kr_session *s, struct evbuffer *in,
                                 size_t scan, size_t avail,
                                 struct kr_nreq *nr);

/*
 * The SASL step nr (NREQ_SASL_TERM) at the start of client.in: taken out
 * (its bytes wiped), answered by kr_sasl_server in its turn (a built
 * response in the FIFO), the outcome carried out: the principal verified
 * (kr_s_sasl_outcome), or the connection closed after the answer with
 * one log line and an audit line.  Returns 0, or -1 when closed.
 */
int kr_s_term_step(struct kr_session *s, struct kr_nreq *nr);

/* Set up s->sasl_srv for a listener with sasl = terminate (at accept);
   false on ENOMEM. */
bool kr_s_term_init(struct kr_session *s);

/* The authentication audit line of s->sasl's last exchange, when a rule
   could audit the connection (passthrough's, used by termination). */
void kr_s_sasl_audit(struct kr_session *s);

/* Follow a reload: requests read from now on use the current config. */
void kr_s_conf_refresh(struct kr_session *s);

/*
 * The rules whose static matchers hold for s (s->rmask) with its current
 * principal: known, none, or unknown (SASL: rules naming principals fail
 * closed).  After a reload, a TLS handshake, a SASL success.
 */
void kr_s_conn_mask(struct kr_session *s);

/*
 * What the broker's answer to a SASL step meant (issue 9): on success the
 * principal is verified and becomes the connection's (s->principal, the
 * rule mask again, its log and audit lines); on failure one log line and
 * audit line, and the connection closes once the answer reached the
 * client (what the client sent behind it is dropped: the broker closes
 * anyway).  Returns 0, or -1 when closed.
 */
int kr_s_sasl_outcome(struct kr_session *s, enum kr_sasl_answer a);

/* ApiVersions: this connection's clamps and enforced APIs for the
   request's own ClientId (cid, cidlen bytes; NULL when null). */
/*
 * issue 10: what legacy translation makes of a request of (key, ver) on
 * s (kr_analyse_legacy_route with the session's knowledge of its
 * brokers); anything but PASS is held and decoded whatever the rules say.
 */
enum kr_an_legacy_route kr_s_legacy_route(struct kr_session *s, int16_t key,
                                          int16_t ver);

void kr_s_apiversions_clamps(struct kr_session *s, const char *cid,
                             size_t cidlen);

/* The request's own ClientId, whole, from buf at off: malloc'd in *out
   (NULL for a null one).  false on ENOMEM or a short buffer. */
bool kr_s_request_client_id(struct evbuffer *buf, size_t off,
                            const struct kr_req_hdr *h, char **out,
                            size_t *len);

/* The pipeline's view of request nr (kr_analyse.h). */
void kr_s_an_request(const struct kr_nreq *nr, const char *cid,
                     size_t cidlen, struct kr_an_request *r);

/* A frame only observing rules wanted decoded did not decode: counted,
   one diagnostic line per connection. */
void kr_s_undecodable_note(struct kr_session *s, const char *text);
/*
 * The response streamed for its audit line (kr_s_stream_audit_start) does
 * not scan (why: the scanner's message).  A Produce response fails open
 * as a held one that does not decode: true, its line says why
 * (decode_error, errors null) and the note is logged; the caller passes
 * the rest of the frame.  Other APIs (Fetch): false, the caller closes.
 */
bool kr_s_stream_audit_undecodable(struct kr_session *s, const char *why);

/* Refuse request nr krelay cannot decode that an enforcing rule could
   match.  Returns 0, or -1 when closed. */
int kr_s_refuse_request(struct kr_session *s, struct kr_nreq *nr,
                        const char *cid, size_t cidlen, const char *why);

/* Remember a forwarded Produce with Acks=0 as an optional entry.
   Returns 0, or -1 when closed. */
int kr_s_push_optional(struct kr_session *s, struct kr_inflight *e);

/*
 * kr_session_rounds.c (issue 10): d's rounds (the Produce requests of
 * krelay's own that carry the batches before each split partition's
 * last) go up before nr's translated request, each an in-flight entry
 * pushed now, whose answer goes to d->splits.  Acks != 0: one at a time,
 * each after the one before it was answered without an error; round 0
 * is written now, the others wait in s->rounds (d's rounds and splits
 * taken), and so does the client's request: the buffer returned is where
 * the caller writes it (its entry pushed next, after the rounds'), and
 * the client's later requests are held until the last round's answer
 * (process_requests).  Acks=0: optional entries, the frames moved to
 * up.out now, which is returned (d->rounds' pointers left NULL).  NULL
 * when closed.
 */
struct evbuffer *kr_s_rounds_send(struct kr_session *s,
                                  const struct kr_nreq *nr,
                                  struct kr_an_decision *d);
/* The session closes: its rounds' state freed (idempotent). */
void kr_s_rounds_free(struct kr_session *s);
/* Rounds of the set going up that are not written yet (their entries
   are in the FIFO all the same): 0 when none goes up. */
uint32_t kr_s_rounds_unsent(const struct kr_session *s);

/*
 * kr_session_rules.c: the client's translated Produce at FIFO entry e did
 * not go up (a round ahead of it was answered with error, why says
 * which): its response built by the pipeline (kr_analyse_rounds_failed)
 * becomes e's, ready in its turn.  Returns 0, or -1 when closed.
 */
int kr_s_rounds_failed_answer(struct kr_session *s, struct kr_inflight *e,
                              int16_t error, const char *why);

/* The whole request frame nr at the start of client.in: decided by the
   pipeline and carried out.  Returns 0, or -1 when closed. */
int kr_s_rule_request(struct kr_session *s, struct kr_nreq *nr);

/* The whole response of FIFO entry idx (flen payload bytes) at the start
   of up.in, for its rules.  Returns 0, or -1 when closed. */
int kr_s_rule_response(struct kr_session *s, uint32_t idx, size_t flen);

/* May e's response, above max_frame_bytes, go on unheld?  And giving up
   on it: its audit line now, e->rq freed. */
bool kr_s_rsp_may_stream(const struct kr_inflight *e);
void kr_s_rsp_let_go(struct kr_session *s, struct kr_inflight *e,
                     size_t flen);

/* Remember the ranges of an ApiVersions response for clamp targets. */
void kr_s_learn_apiversions(struct kr_session *s, int16_t ver,
                            struct evbuffer *pl);

/* ---- kr_session_av.c: krelay's own ApiVersions (issue 10) -------------- */

/* What an ApiVersions response taught (kr_s_av_learn). */
enum kr_s_av_learned {
    KR_S_AV_OK = 0,                     /* its ranges are in s->av */
    KR_S_AV_ERROR_CODE,                 /* ErrorCode not 0 (*err_code) */
    KR_S_AV_NO_KEYS,                    /* ErrorCode 0, no usable ApiKeys */
    KR_S_AV_UNDECODABLE,                /* not an ApiVersions response of
                                           that version (why) */
    KR_S_AV_NOMEM
};
const char *kr_s_av_learned_str(enum kr_s_av_learned o);

/*
 * The ApiVersions response pl (version ver, the frame without its size
 * prefix, left unchanged) of s's broker: on KR_S_AV_OK s->av holds its
 * ranges (malloc'd, the session's; replaced); otherwise s->av is left as
 * it was, *err_code the ErrorCode (KR_S_AV_ERROR_CODE) and why (whylen
 * bytes, NUL-terminated) the codec's message (KR_S_AV_UNDECODABLE).
 */
enum kr_s_av_learned kr_s_av_learn(struct kr_session *s, int16_t ver,
                                   struct evbuffer *pl, int16_t *err_code,
                                   char *why, size_t whylen);

/*
 * Must krelay ask s's broker for its ApiVersions before the request (key,
 * ver) goes on?  True for a version Kafka 4 removed (kr_bv_legacy_range)
 * when s has not learned its broker's ranges (s->av), has not asked yet,
 * and [upstream] broker_profile is "learned" (a profile wins).
 */
bool kr_s_av_wanted(struct kr_session *s, int16_t key, int16_t ver);

/*
 * Ask (h: the client's request that waits for the answer, for the log
 * line): av_hold on (process_requests holds the client's requests from
 * here), krelay's ApiVersions v0 queued on up.out, or av_timer set to
 * try again when up.out cannot take it yet.  Its answer fills s->av and
 * lets the requests go; an answer krelay cannot use closes s (one line).
 * Returns 0, or -1 when closed.
 */
int kr_s_av_ask(struct kr_session *s, const struct kr_req_hdr *h);
void kr_s_av_timer_cb(evutil_socket_t fd, short what, void *arg);
/* At the session's end: its timer freed. */
void kr_s_av_free(struct kr_session *s);

/* Entry i of the FIFO; the oldest one still waiting for its upstream
   response (*idx its index), or NULL. */
struct kr_inflight *kr_s_fifo_at(struct kr_session *s, uint32_t i);
struct kr_inflight *kr_s_fifo_waiting(struct kr_session *s, uint32_t *idx);

/* Built responses at the FIFO's head go to client.out as their release
   time comes; the rtimer's callback, and requests held back by a throttle
   going on (0, or -1 when closed). */
void kr_s_flush_ready(struct kr_session *s);
void kr_s_rtimer_cb(evutil_socket_t fd, short what, void *arg);
int kr_s_resume_requests(struct kr_session *s);
/* A drain: the answers held by legacy_refuse_delay_ms (kr_rq.
   drain_releases) may go now, and those at the FIFO's head go (0, or -1
   when closed). */
int kr_s_release_held(struct kr_session *s);

/* ---- kr_session_sasl.c: SASL origination (issue 9) -------------------- */

/*
 * s's upstream originates SASL (its [upstream] sasl_mechanism): s->orig
 * made and client requests held (orig_hold) until the upstream
 * connection is authenticated.  Returns 0, or -1 on ENOMEM (the caller
 * closes).
 */
int kr_s_orig_init(struct kr_session *s);
/* The upstream connection is up (after its TLS handshake): the exchange
   starts with krelay's own requests.  Returns 0, or -1 when closed. */
int kr_s_orig_connected(struct kr_session *s);
/* A re-authentication is due: start it once the client's requests in
   flight are answered.  Returns 0, or -1 when closed. */
int kr_s_orig_poll(struct kr_session *s);
/* The client sent SaslHandshake (h) while krelay originates: its
   credentials would never reach the broker.  Closes s (one line, once
   per connection); returns -1. */
int kr_s_orig_client_sasl(struct kr_session *s, const struct kr_req_hdr *h);
/* s closes: its exchange and timer go (idempotent). */
void kr_s_orig_free(struct kr_session *s);

/* ---- kr_session_kmux.c: framing ---------------------------------------- */

/* Forward (or hand to the rules) what client.in holds, frame by frame.
   Returns 0, or -1 when closed. */
int kr_s_process_requests(struct kr_session *s);

/*
 * The connection closes after the responses owed (s->closing): the rest
 * of the request frame forwarded in part (req_remain: cut-through,
 * spliced, streamed for its audit line) still goes upstream, as far as
 * client.in holds it (the broker answers that request only once it has
 * all of it, and its answer is owed); what client.in holds after it is
 * discarded.  Returns the bytes moved to up.out.
 */
size_t kr_s_finish_request(struct kr_session *s);

/* Forward (or hold, stream, hand to the rules) what up.in holds, frame by
   frame, in order.  Returns 0, or -1 when closed. */
int kr_s_process_responses(struct kr_session *s);

/*
 * issue 12: the [upstream] section of the session's own upstream (the one
 * it took at accept, s->rw.upstream, held until it ends): its latest
 * reload's (kr_upstream_conf), so a reload that sends the listener's new
 * connections elsewhere leaves this one's timeouts and SASL credentials
 * alone; the listener's when it has none (NULL: no upstream).
 */
static inline const struct kr_upstream_conf *
kr_s_upconf(const struct kr_session *s)
{
    return s->rw.upstream != NULL ? kr_upstream_conf(s->rw.upstream)
                                  : s->lc->up;
}

#endif /* KR_SESSION_INT_H */
