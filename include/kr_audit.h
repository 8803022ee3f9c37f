/*
 * kr_audit.h - the audit log: one JSON line per request/response pair and
 * per connection open/close, written to a file, syslog or stdout without
 * ever blocking the event loop.
 *
 * Sink.  kr_audit_write copies a line into the calling thread's ring
 * (each thread that writes to a sink has one, of queue_bytes; no lock, no
 * syscall while the writer is awake) and returns at once; a writer thread
 * (pthreads) drains every ring to the target.  When the thread's ring is
 * full the line is dropped and counted (kr_audit_dropped); other threads'
 * rings are not touched.  Each thread's lines reach the target in the
 * order it wrote them, whole; lines of different threads interleave as
 * the writer drains the rings (a batch of one ring, then of another), so
 * across threads the file is not in time order.  A file target is opened for append (created 0640)
 * and reopened by kr_audit_reopen (log rotation on SIGHUP/SIGUSR1: the
 * writer thread reopens before its next write).  Target "syslog" writes
 * each line with syslog(3) at LOG_INFO, facility LOG_DAEMON (the process
 * calls openlog, or kr_log_open did; syslog daemons may cut long lines,
 * e.g. rsyslog at 8 KiB by default); where there is no syslog socket
 * (kr_log_syslog_present: containers) the writer counts the lines as
 * dropped, as syslog(3) would lose them without a word.  Target "stdout"
 * writes the lines to fd 1 (under systemd: the journal), never closed
 * nor reopened; whatever else the process prints to stdout could
 * interleave with them (krelay itself prints nothing there: --demo's
 * banner goes to stderr).
 * A target that is full and non-blocking (fd 1 a pipe another process
 * made O_NONBLOCK: EAGAIN) is waited for with poll(2), never counted as
 * failed, so no line is lost or cut in two; when the sink closes, the
 * wait lasts at most about a second more, then the rest is counted as
 * dropped.
 * Every sink function is thread-safe: several worker threads may write to
 * one sink.  A thread's ring stays until the sink closes, also when the
 * thread ends (the writer drains it; kr_audit_close frees it): a sink's
 * memory is queue_bytes per thread that ever wrote to it.
 *
 * Line formats: doc/audit.md is the schema (every key, its type, unit and
 * when it appears, with an example line of each kind): change it with the
 * code (tests/audit_doc.sh and check_audit's doc_keys hold them
 * together).  In short: compact JSON, keys in the documented order,
 * snake_case; Kafka's names for Kafka things.  Request lines
 * (kr_audit_format): who and where (struct kr_audit_peer), the API,
 * sizes and times, Produce acks and per-topic records, the
 * TransactionalId (Produce and the transactional APIs), group ids,
 * topics, errors by name, actions, and optional decode_error, note,
 * bodies (secrets always "[redacted]").  Connection lines
 * (kr_audit_format_conn): who and where, the event, and on close the
 * cause, reason, bytes each way, requests and duration.
 * Strings from the wire that are not valid UTF-8 (possible only with
 * tolerant decoding) have their bytes >= 0x80 written as '?'.  They are
 * cut (topic names after 255 bytes, other strings after 1024, on a UTF-8
 * boundary, with a "<key>_truncated" key) and topic entries stop after
 * 1 MiB, so that a line without bodies stays near 1 MiB whatever the
 * request (doc/audit.md, Format).
 */
#ifndef KR_AUDIT_H
#define KR_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_codec.h"
#include "kr_scan.h"
#include "kr_topics.h"

/* ---- sink --------------------------------------------------------------- */

struct kr_audit;            /* a sink: file (reopenable), syslog or stdout */

/* Default and bounds of queue_bytes. */
#define KR_AUDIT_QUEUE_DEFAULT (4u << 20)
#define KR_AUDIT_QUEUE_MIN 4096u
#define KR_AUDIT_QUEUE_MAX 2147483647u  /* INT32_MAX, [audit]'s bound */

/*
 * Open a sink: target is "syslog", "stdout" or a file path.  queue_bytes:
 * each writing thread's ring, the most bytes of its lines waiting for the
 * writer or being written (0 = KR_AUDIT_QUEUE_DEFAULT; raised to
 * KR_AUDIT_QUEUE_MIN, cut to KR_AUDIT_QUEUE_MAX; allocated on a thread's
 * first write).  Starts the writer thread.  Returns NULL
 * with a message in err (errlen bytes) when the file cannot be opened or
 * on ENOMEM / thread creation failure.  The caller owns the result and
 * frees it with kr_audit_close.  "stdout" needs nothing opened: fd 1 is
 * written as the process has it.
 */
struct kr_audit *kr_audit_open(const char *target, size_t queue_bytes,
                               char *err, size_t errlen);
/*
 * Ask the writer to reopen a file target before its next write
 * (async-signal-safe: sets a flag and wakes nothing; the writer checks
 * it at least every 100 ms and before each write; a failure is logged,
 * and the lines keep going to the file opened before).  Returns true
 * for a file target; false (nothing to do) for syslog, stdout or NULL.
 */
bool kr_audit_reopen(struct kr_audit *au);
/*
 * Write every queued line (the rings of threads that ended too), stop the
 * writer, close the target, free au and its rings.  Not concurrent with
 * writes on au.  NULL is a no-op.
 */
void kr_audit_close(struct kr_audit *au);      /* flushes */
/*
 * Queue one line (len bytes, no newline; the sink adds it; copied) in
 * the calling thread's ring.  Never blocks on I/O: returns false and
 * counts a drop when the ring has not len + 1 bytes free (or au is NULL,
 * which counts nothing; or, once, out of memory for the thread's first
 * ring).  The first write of a thread to a sink takes the sink's mutex
 * once to find or make its ring; later ones take no lock (a thread-local
 * cache keyed by the sink).  The writer thread writes lines in batches:
 * a line reaches the target within about 10 ms (sooner when a ring holds
 * a quarter of queue_bytes, at most 256 KiB, and at once on
 * kr_audit_flush or kr_audit_close); it is not woken for every line.
 */
bool kr_audit_write(struct kr_audit *au, const char *line, size_t len);
/* Lines dropped so far: a ring full, a failed write to the target, or
   target syslog without a syslog socket (kr_log_syslog_present). */
uint64_t kr_audit_dropped(const struct kr_audit *au);
/* Lines written to the target so far (tests, stats). */
uint64_t kr_audit_written(const struct kr_audit *au);
/* Rings the sink holds: one per thread that has written to it, whether
   or not the thread still runs (tests).  0 for NULL. */
size_t kr_audit_rings(const struct kr_audit *au);
/*
 * Wait until every line queued before the call (by any thread, when that
 * thread's kr_audit_write returned before this call began) is written or
 * counted as lost (at stop, tests; blocks: also on a target that blocks).
 * NULL is a no-op.
 */
void kr_audit_flush(struct kr_audit *au);

/* ---- formatting --------------------------------------------------------- */

/* What krelay did with a request (kr_audit_info.actions bits). */
#define KR_AUDIT_FORWARDED 0x01u /* sent upstream */
#define KR_AUDIT_REWRITTEN 0x02u /* response broker addresses rewritten */
#define KR_AUDIT_CLAMPED   0x04u /* version clamped / translated */
#define KR_AUDIT_DENIED    0x08u /* answered with an error by krelay */
#define KR_AUDIT_DELAYED   0x10u /* response held (fault latency, enforce) */
#define KR_AUDIT_THROTTLED 0x20u /* ThrottleTimeMs injected */
#define KR_AUDIT_FAULTED   0x40u /* error replaced / connection closed */
#define KR_AUDIT_REFUSED   0x80u /* not forwarded: krelay cannot decode it
                                    and an enforcing rule could match it;
                                    the connection was closed (issue 13) */
#define KR_AUDIT_TRANSLATED 0x100u /* legacy translation: a version the
                                      broker no longer accepts sent up as
                                      one it does, the response back
                                      (issue 10) */

/* Name of one KR_AUDIT_* bit ("forwarded"...), NULL for others. */
const char *kr_audit_action_name(unsigned bit);

/*
 * The keys every line starts with: which krelay, which connection, where
 * its requests go (doc/audit.md, "Keys of every line").  Strings are
 * borrowed for the format call; NULL ones (and empty software names) are
 * left out.
 */
struct kr_audit_peer {
    const char *instance;            /* kr_audit_instance() */
    const char *conn_id;             /* "c#W.N" */
    const char *listener;
    const char *client_addr;         /* IP address, no port */
    uint16_t client_port;
    const char *proxy_addr;          /* issue 12: the proxy a PROXY
                                        protocol header came from (the
                                        socket's peer), NULL: none */
    uint16_t proxy_port;
    const char *route;               /* "bootstrap" or "node" */
    int32_t node_id;                 /* with route "node" */
    const char *upstream_addr;       /* host:port dialled, NULL: not yet */
    const char *client_sw_name;      /* KIP-511 ClientSoftwareName */
    const char *client_sw_version;   /* and ClientSoftwareVersion */
    const char *principal;
    const char *principal_state;     /* SASL (issue 9): "claimed",
                                        "verified" or "unknown"; NULL:
                                        omitted (no SASL) */
    struct kr_audit_memo *memo;      /* NULL, or the connection's memo of
                                        these keys as rendered (below) */
};

/*
 * A connection's memo of its lines' peer keys (instance .. upstream_addr,
 * and the client's software and principal): kr_audit_format and
 * kr_audit_format_conn render them once and copy the text while the
 * values they came from are byte for byte the same (compared on every
 * line; any change renders them again), so a line is the same with or
 * without a memo.  Owned by the connection, used by one thread at a
 * time.  kr_audit_memo_new: NULL on ENOMEM (format without one);
 * kr_audit_memo_free(NULL) is a no-op.
 */
struct kr_audit_memo;
struct kr_audit_memo *kr_audit_memo_new(void);
void kr_audit_memo_free(struct kr_audit_memo *m);

/*
 * The instance name lines carry: configured (the [audit] instance key)
 * when not NULL, else this host's name (gethostname, read once; "unknown"
 * when it cannot be read).  The result is configured or static.
 */
const char *kr_audit_instance(const char *configured);

/* What the session keeps of a request until its response (malloc'd). */
struct kr_audit_req;
/*
 * Capture what the audit line needs from a decoded request: ClientId,
 * topics and partition counts (TopicIds resolved through map, may be
 * NULL); Produce: Acks and per topic the records (kr_records_count over
 * payload, the frame req was decoded from; NULL: records unknown) and
 * record bytes; the TransactionalId (Produce, InitProducerId,
 * AddPartitionsToTxn v0-3, AddOffsetsToTxn, EndTxn, TxnOffsetCommit);
 * GroupId and MemberId; with
 * with_body its redacted JSON body (records as sizes).  req's tree and
 * payload may die afterwards.  NULL on ENOMEM (then log the line without
 * it: kr_audit_format accepts req NULL).
 */
struct kr_audit_req *kr_audit_capture(const struct kr_msg *req,
                                      const struct kr_rbuf *payload,
                                      const struct kr_topic_map *map,
                                      bool with_body);
/* Free a capture (kr_audit_capture); NULL is a no-op. */
void kr_audit_req_free(struct kr_audit_req *r);
/*
 * Topic names compared and index slots visited so far in finding the
 * entries of r's topics (capture, kr_audit_note_response, the scanner's
 * events): at most a small constant per topic the request or response
 * names, whatever the names (tests hold it to that; 0 for NULL).
 */
uint64_t kr_audit_req_probes(const struct kr_audit_req *r);
/*
 * The record bytes a decoded Fetch response returned per topic, into the
 * capture r of its request (record_bytes of doc/audit.md; topics only
 * the response names are added with 0 partitions).  Other APIs, r NULL
 * or rsp NULL: nothing.  Out of memory loses topics, never the line.
 */
void kr_audit_note_response(struct kr_audit_req *r, const struct kr_msg *rsp,
                            const struct kr_topic_map *map);

/*
 * The same figures from a response that streams by without being held:
 * kr_audit_scan_start ties a scanner observer to capture r (map for
 * TopicIds: borrowed until the scan ends), kr_audit_scan_event is the
 * observer (kr_scan_watch(sc, kr_audit_scan_event, as)).  The line then
 * takes its errors from what the scanner saw (kr_audit_format with rsp
 * NULL).  Fetch responses (errors and record bytes) and Produce
 * responses (api_key KR_API_PRODUCE: errors only, the topics stay the
 * request's, as kr_audit_note_response leaves them); as is the caller's
 * (the session's).
 */
struct kr_audit_scan {
    struct kr_audit_req *req;
    const struct kr_topic_map *map;
    size_t cur;                      /* topic entry being walked,
                                        SIZE_MAX: none */
    bool errors_only;                /* not a Fetch response: its topics
                                        and records are not noted */
};
void kr_audit_scan_start(struct kr_audit_scan *as, struct kr_audit_req *r,
                         const struct kr_topic_map *map, int16_t api_key);
void kr_audit_scan_event(void *arg, enum kr_scan_what what, const uint8_t *p,
                         size_t n, int64_t val);
/*
 * The response of an errors-only scan (Produce) did not scan: its errors
 * are unknown ("errors": null, as for a held response that does not
 * decode); the scan's events stop counting.
 */
void kr_audit_scan_abandon(struct kr_audit_scan *as);

/*
 * A Produce request's capture built as the request streams to the broker
 * (never held whole: kr_session_kmux.c, when every rule that matches it
 * only audits it), the same as kr_audit_capture would build from the
 * decoded request: kr_audit_stream_req_new starts it from the header's
 * ClientId (client_id, len bytes, copied; NULL: null; has_client_id: the
 * header has the field), kr_audit_produce_scan_start ties the observer
 * state as to it (map: TopicIds, borrowed until the end),
 * kr_audit_produce_scan_event is the observer (with
 * kr_scan_count_records on: topics, partitions, record bytes and
 * records, Acks, TransactionalId), kr_audit_produce_scan_end ends it and
 * gives the capture back (NULL when memory ran out: log the line
 * without it; freed then).  kr_audit_stream_req_new returns NULL on
 * ENOMEM.
 */
struct kr_audit_req *kr_audit_stream_req_new(const char *client_id,
                                             size_t len, bool has_client_id);
void kr_audit_produce_scan_start(struct kr_audit_scan *as,
                                 struct kr_audit_req *r,
                                 const struct kr_topic_map *map);
void kr_audit_produce_scan_event(void *arg, enum kr_scan_what what,
                                 const uint8_t *p, size_t n, int64_t val);
struct kr_audit_req *kr_audit_produce_scan_end(struct kr_audit_scan *as);

/*
 * Facts the session knows about a request/response pair.  The strings are
 * borrowed for the kr_audit_format call; NULL ones are left out (see
 * doc/audit.md).
 */
struct kr_audit_info {
    int64_t time_us;                 /* wall clock (µs since the epoch),
                                      * request read */
    struct kr_audit_peer peer;
    const char *client_id;           /* NULL: take the request's */
    size_t client_id_len;            /* client_id's bytes (it may hold
                                        NULs); 0: strlen(client_id) */
    int16_t api_key, api_version;    /* as the client sent it */
    bool translated;                 /* sent upstream at upstream_version
                                        (a rule changed it) */
    int16_t upstream_version;
    int32_t correlation_id;
    uint64_t req_bytes, rsp_bytes;   /* bytes with size prefix */
    int64_t upstream_us, total_us;   /* µs */
    unsigned actions;                /* KR_AUDIT_* bits */
    const char *decode_error;        /* why krelay could not decode the
                                        request or response (NULL: it
                                        could) */
    const char *note;                /* anything else the line must say
                                        (NULL: nothing) */
    bool incomplete;                 /* the connection closed before the
                                        response reached the client
                                        whole: rsp_bytes is what it got;
                                        errors null unless scanned */
};
/*
 * One JSON line (malloc'd, no newline, caller frees) for a pair; req may
 * be NULL (capture failed), rsp is the decoded response the client got
 * (the broker's, after krelay's changes, or krelay's own error response)
 * or NULL (Acks=0, not decoded, or scanned: kr_audit_scan_*); secrets
 * always redacted.  rsp's topics are not added (the request's are the
 * ones touched; a Fetch's record bytes come through
 * kr_audit_note_response); rsp's errors are counted.  NULL on ENOMEM.
 */
char *kr_audit_format(const struct kr_audit_info *info,
                      const struct kr_audit_req *req,
                      const struct kr_msg *rsp, bool with_body);

/* A connection event (kr_audit_format_conn). */
struct kr_audit_conn {
    const char *event;               /* "open" or "close" */
    int64_t time_us;                 /* wall clock, µs since the epoch */
    struct kr_audit_peer peer;
    const char *client_id;           /* the last one seen, NULL: none */
    bool client_id_cut;              /* client_id is the first bytes of a
                                        longer one (client_id_truncated) */
    /* close: cause not NULL */
    const char *cause;               /* named (krelay_closes_total's
                                        cause label) */
    const char *reason;              /* in words */
    uint64_t bytes_from_client, bytes_to_client;
    uint64_t requests;               /* request frames read */
    int64_t duration_us;             /* accepted -> closed */
};
/*
 * A connection line (malloc'd, no newline, caller frees; NULL on ENOMEM
 * or without an event).  Strings are borrowed.
 */
char *kr_audit_format_conn(const struct kr_audit_conn *c);
/*
 * A SASL authentication event (issue 9, doc/audit.md "Authentication
 * lines"): the exchange's end as the broker answered it (or krelay,
 * terminating).  peer.principal
 * and peer.principal_state are the exchange's (a failure's is the claimed
 * one).  Never a token, password or proof.
 */
struct kr_audit_auth {
    int64_t time_us;                 /* wall clock, µs since the epoch */
    struct kr_audit_peer peer;
    const char *client_id;           /* the last one seen, NULL: none */
    bool client_id_cut;
    const char *mechanism;           /* as the SaslHandshake named it */
    const char *outcome;             /* "success" or "failure" */
    int16_t error_code;              /* failure: the broker's ErrorCode,
                                        -1: none given (omitted) */
    const char *reason;              /* failure krelay decided (SASL
                                        termination): doc/audit.md's
                                        word ("bad_password"...), NULL:
                                        omitted (the broker's answer) */
    bool reauth;                     /* a KIP-368 re-authentication */
    int16_t handshake_version;       /* SaslHandshake's ApiVersion */
    int16_t authenticate_version;    /* SaslAuthenticate's, -1: raw tokens
                                        (omitted) */
    int64_t session_lifetime_ms;     /* SessionLifetimeMs, -1: not given
                                        (omitted) */
};
/* Its line (malloc'd, no newline, caller frees; NULL on ENOMEM). */
char *kr_audit_format_auth(const struct kr_audit_auth *a);

/*
 * What line (one kr_audit_format or kr_audit_format_conn wrote) is about,
 * in a few words for a log message (a line that cannot be queued): "the
 * Produce request line (correlation_id 7, 4400123 bytes)", "the
 * connection close line (310 bytes)", "an audit line (N bytes)" when it
 * says neither.  Never a string from the wire: the API and event names
 * are krelay's (letters only), the CorrelationId digits.  Into out (len
 * bytes, NUL-terminated; cut to fit).
 */
void kr_audit_line_about(const char *line, char *out, size_t len);
/*
 * RFC 3339 UTC time with microseconds ("2026-11-30T12:00:00.123456Z")
 * of t_us (µs since the epoch) into out (len bytes, at least 32).
 */
void kr_audit_time(int64_t t_us, char *out, size_t len);

#endif /* KR_AUDIT_H */
