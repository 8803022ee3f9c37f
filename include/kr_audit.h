/*
 * kr_audit.h - the audit log: one JSON line per request/response pair and
 * per connection open/close, written to a file or syslog without ever
 * blocking the event loop.
 *
 * Sink.  kr_audit_write copies a line into a bounded in-memory queue
 * (queue_bytes) and returns at once; a writer thread (pthreads) drains it
 * to the target.  When the queue is full the line is dropped and counted
 * (kr_audit_dropped).  A file target is opened for append (created 0640)
 * and reopened by kr_audit_reopen (log rotation on SIGHUP/SIGUSR1: the
 * writer thread reopens before its next write).  Target "syslog" writes
 * each line with syslog(3) at LOG_INFO, facility LOG_DAEMON (the process
 * calls openlog, or kr_log_open did; syslog daemons may cut long lines,
 * e.g. rsyslog at 8 KiB by default).  Every sink function is thread-safe:
 * several worker threads may write to one sink.
 *
 * Line formats: compact JSON, keys in the order shown, field names
 * snake_case; Kafka's names for Kafka things (API names, error names, the
 * schema field names inside "request_body"/"response_body").
 *
 * Request/response pair (kr_audit_format):
 *   {"time": "2026-11-30T12:00:00.123456Z", "type": "request",
 *    "listener": "plain", "client_addr": "10.0.0.7", "client_port": 51234,
 *    "client_id": "rdkafka", "principal": "User:alice",
 *    "api": "Produce", "api_key": 0, "api_version": 9,
 *    "correlation_id": 17, "request_bytes": 1200, "response_bytes": 80,
 *    "upstream_us": 1500, "total_us": 1720,
 *    "topics": [{"name": "orders", "partitions": 3}, ...],
 *    ["topics_truncated": true,]
 *    "errors": {"NOT_LEADER_OR_FOLLOWER": 3},
 *    "actions": ["forwarded", "rewritten"],
 *    ["decode_error": "version unknown to krelay's tables (v0-v6)",]
 *    ["note": "response of 41943040 bytes too large to hold: ...",]
 *    "request_body": {...}, "response_body": {...}}
 *   - time: RFC 3339, UTC, microseconds, of info->time_us;
 *   - listener, client_id, principal: omitted when NULL; client_id is
 *     null when the request's ClientId was null and info->client_id NULL;
 *   - api: Kafka's name ("UNKNOWN" when the tables do not know the key);
 *   - request_bytes, response_bytes: frame sizes with the size prefix as
 *     given in info; response_bytes is omitted when there was no response
 *     (rsp NULL and info->rsp_bytes 0), upstream_us too, and also when
 *     KR_AUDIT_FORWARDED is not set; total_us always;
 *   - topics: distinct topics in first-seen order, partitions summed over
 *     every mention (kr_topics.h; TopicIds resolved at capture time);
 *   - errors: every ErrorCode != 0 in the response (KR_FF_ERROR_CODE
 *     fields, any depth) by Kafka name (kr_kerr_format) with counts; {}
 *     when none or no response; null when a response came (rsp_bytes >
 *     0) but was not decoded (rsp NULL: see decode_error, note);
 *   - actions: the KR_AUDIT_* bits set, in the order below;
 *   - decode_error, note: only when info gives them (issue 13: a frame
 *     krelay could not decode, a response too large to hold; the line
 *     then has what the header gave: api, api_key, api_version,
 *     correlation_id, client_id, sizes);
 *   - topics_truncated: true, only when the request named more than 4096
 *     distinct topics (the first 4096 are listed);
 *   - request_body/response_body: with with_body only (capture and
 *     format), the decoded body (no header) in krelay-codec's JSON form
 *     (kr_json.h; records as their byte count), secrets always replaced by
 *     "[redacted]" (KR_JSON_REDACT, kr_json_secret in kr_json.h).  SASL
 *     v0 tokens (raw frames after SaslHandshake v0) are never decoded, so
 *     they never reach a line.
 * Strings from the wire that are not valid UTF-8 (possible only with
 * tolerant decoding) have their bytes >= 0x80 written as '?'.
 *
 * Connection (kr_audit_format_conn):
 *   {"time": ..., "type": "connection", "listener": ...,
 *    "client_addr": ..., "client_port": ..., "event": "open"|"close",
 *    "client_id": ..., "principal": ..., "reason": ...}
 *   (listener/client_id/principal/reason omitted when NULL.)
 */
#ifndef KR_AUDIT_H
#define KR_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_codec.h"
#include "kr_topics.h"

/* ---- sink --------------------------------------------------------------- */

struct kr_audit;            /* a sink: file (reopenable) or syslog */

/* Default and bounds of queue_bytes. */
#define KR_AUDIT_QUEUE_DEFAULT (4u << 20)
#define KR_AUDIT_QUEUE_MIN 4096u

/*
 * Open a sink: target is "syslog" or a file path.  queue_bytes: most bytes
 * of lines waiting for the writer (0 = KR_AUDIT_QUEUE_DEFAULT; raised to
 * KR_AUDIT_QUEUE_MIN).  Starts the writer thread.  Returns NULL with a
 * message in err (errlen bytes) when the file cannot be opened or on
 * ENOMEM / thread creation failure.  The caller owns the result and
 * frees it with kr_audit_close.
 */
struct kr_audit *kr_audit_open(const char *target, size_t queue_bytes,
                               char *err, size_t errlen);
/*
 * Ask the writer to reopen a file target before its next write
 * (async-signal-safe: sets a flag and wakes nothing; the writer checks
 * it at least every 100 ms and before each write).  No-op for syslog
 * or NULL.
 */
void kr_audit_reopen(struct kr_audit *au);
/*
 * Write every queued line, stop the writer, close the target, free au.
 * Not concurrent with writes on au.  NULL is a no-op.
 */
void kr_audit_close(struct kr_audit *au);      /* flushes */
/*
 * Queue one line (len bytes, no newline; the sink adds it; copied).
 * Never blocks on I/O: returns false and counts a drop when the queue is
 * full (or au is NULL, which counts nothing).  The writer thread writes
 * lines in batches: a line reaches the target within about 10 ms (sooner
 * when a quarter of the queue, at most 256 KiB, is waiting, and at once
 * on kr_audit_flush or kr_audit_close); it is not woken for every line.
 */
bool kr_audit_write(struct kr_audit *au, const char *line, size_t len);
/* Lines dropped so far (queue full, or a failed write to the target). */
uint64_t kr_audit_dropped(const struct kr_audit *au);
/* Lines written to the target so far (tests, stats). */
uint64_t kr_audit_written(const struct kr_audit *au);
/* Wait until the queue is empty and written (at stop, tests; blocks).
   NULL is a no-op. */
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

/* Name of one KR_AUDIT_* bit ("forwarded"...), NULL for others. */
const char *kr_audit_action_name(unsigned bit);

/* What the session keeps of a request until its response (malloc'd). */
struct kr_audit_req;
/*
 * Capture what the audit line needs from a decoded request: ClientId,
 * topics and partition counts (TopicIds resolved through map, may be
 * NULL), and with with_body its redacted JSON body (records as sizes).
 * req's tree may die afterwards.  NULL on ENOMEM (then log the line
 * without it: kr_audit_format accepts req NULL).
 */
struct kr_audit_req *kr_audit_capture(const struct kr_msg *req,
                                      const struct kr_topic_map *map,
                                      bool with_body);
/* Free a capture (kr_audit_capture); NULL is a no-op. */
void kr_audit_req_free(struct kr_audit_req *r);
/*
 * Facts the session knows about a request/response pair.  The strings are
 * borrowed for the kr_audit_format call; NULL ones are left out (see the
 * line format at the top of this file).
 */
struct kr_audit_info {
    int64_t time_us;                 /* wall clock (µs since the epoch),
                                      * request read */
    const char *listener, *client_addr, *principal, *client_id;
                                     /* client_id NULL: take the request's */
    size_t client_id_len;            /* client_id's bytes (it may hold
                                        NULs); 0: strlen(client_id) */
    uint16_t client_port;
    int16_t api_key, api_version;    /* as the client sent it */
    int32_t correlation_id;
    uint64_t req_bytes, rsp_bytes;   /* bytes with size prefix */
    int64_t upstream_us, total_us;   /* µs */
    unsigned actions;                /* KR_AUDIT_* bits */
    const char *decode_error;        /* why krelay could not decode the
                                        request or response (NULL: it
                                        could) */
    const char *note;                /* anything else the line must say
                                        (NULL: nothing) */
};
/*
 * One JSON line (malloc'd, no newline, caller frees) for a pair; req may
 * be NULL (capture failed), rsp is the decoded response the client got
 * (the broker's, after krelay's changes, or krelay's own error response)
 * or NULL (Acks=0, not decoded); secrets always redacted.  rsp's
 * topics are not added (the request's are the ones touched); rsp's
 * errors are counted.  NULL on ENOMEM.
 */
char *kr_audit_format(const struct kr_audit_info *info,
                      const struct kr_audit_req *req,
                      const struct kr_msg *rsp, bool with_body);
/*
 * Connection open/close lines (malloc'd, no newline, caller frees; NULL on
 * ENOMEM).  time_us: µs since the epoch.  Strings are borrowed.
 */
char *kr_audit_format_conn(const char *event /* "open"|"close" */,
                           int64_t time_us, const char *listener,
                           const char *client_addr, uint16_t client_port,
                           const char *client_id, const char *principal,
                           const char *reason);
/*
 * RFC 3339 UTC time with microseconds ("2026-11-30T12:00:00.123456Z")
 * of t_us (µs since the epoch) into out (len bytes, at least 32).
 */
void kr_audit_time(int64_t t_us, char *out, size_t len);

#endif /* KR_AUDIT_H */
