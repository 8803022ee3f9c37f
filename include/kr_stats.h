/*
 * kr_stats.h - krelay's counters, declared in one table (KR_STATS) and
 * kept per worker, shaped for Prometheus.
 *
 * The table.  KR_STATS is the one place a counter is declared
 * (twemproxy's nc_stats.h): one row X(name, type, labels, cells, help)
 * per metric.  struct kr_stats (the storage), the enum of ids, the
 * description table kr_stats_desc[] and the Prometheus text
 * (kr_stats_prom) are all generated from it, so a new counter is one row
 * plus the line that counts it.
 *   name   C name; exposed as "krelay_<name>", "_total" appended for
 *          counters ("krelay_requests_total"); a histogram's unit suffix
 *          ("_seconds") comes from its labels kind; a count of bytes
 *          ends in "_bytes" (Prometheus' unit before "_total":
 *          "krelay_spliced_bytes_total");
 *   type   COUNTER (only grows), GAUGE (goes up and down), HISTOGRAM;
 *   labels NONE (one value) or the label set of a family (enum
 *          kr_stat_labels): the cell index of a value is computed by the
 *          kr_stats_*_cell function named there, and its label values
 *          come back from the cell index at exposition;
 *   cells  number of values: 1 for NONE;
 *   help   the HELP text.
 *
 * Families: closes by cause, requests by ApiKey x version, rule hits by
 * rule, errors krelay answered and errors in broker responses by Kafka
 * error name, frames refused by kind.  Histograms: response_latency
 * (from a request read to its response matched) and upstream_latency,
 * in ms of the coarse timer clock (kr_clock_timer_ms: 1-4 ms resolution),
 * exposed in seconds with the bucket bounds of KR_STATS_LATENCY_MS.
 *
 * Threads.  A struct kr_stats belongs to one worker (kr_worker.h) and
 * only that worker's thread writes it.  With a single writer an update is
 * a relaxed atomic load and a relaxed atomic store (KR_STAT_ADD): no
 * locked instruction (x86 compiles both to plain moves), no lost update.
 * Any other thread (the admin endpoint, kr_admin.h; the daemon's stop report)
 * may read any cell at any time with a relaxed load (KR_STAT_GET,
 * kr_stats_sum) without a data race: each value is whole, but values of
 * different cells are not one snapshot (requests may be read before the
 * responses of the same instant).
 */
#ifndef KR_STATS_H
#define KR_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kr_kerr.h"

/* Why a session ended: the cause label of "closes". */
#define KR_CLOSE_CAUSES(X)                                                    \
    X(CLIENT, "client")         /* the client closed */                      \
    X(BAD_INPUT, "bad_input")   /* the client sent bad input */              \
    X(UPSTREAM, "upstream")     /* the upstream failed or closed */          \
    X(TIMEOUT, "timeout")       /* connect, request or idle timeout */       \
    X(OTHER, "other")           /* stop, out of memory, rules... */

enum kr_close_cause {
#define KR_CLOSE_ENUM_(id, label) KR_CLOSE_##id,
    KR_CLOSE_CAUSES(KR_CLOSE_ENUM_)
#undef KR_CLOSE_ENUM_
    KR_CLOSE__N
};

/*
 * Why krelay refused a client's frame and closed its connection: the kind
 * label of frames_refused.  Each bad-input close of a session names one
 * (kr_s_close_bad, kr_session_int.h), and only there is it counted.
 */
#define KR_STATS_REFUSALS(X)                                                  \
    X(OVERSIZED, "oversized")   /* size above max_frame_bytes, or above    \
                                   Kafka's 524288 before SASL is done */   \
    X(MALFORMED, "malformed")   /* a size prefix, request header or PROXY  \
                                   protocol header that does not parse */  \
    X(WRONG_PROTOCOL, "wrong_protocol") /* TLS, HTTP, a PROXY header,      \
                                   plaintext Kafka or a raw GSSAPI token   \
                                   where the listener expects another */   \
    X(UNDECODABLE, "undecodable") /* a request body krelay needed decoded  \
                                   (rules that enforce, SASL) that did not \
                                   decode */                               \
    X(UNEXPECTED, "unexpected") /* a well-formed request the connection's  \
                                   state does not take: out of SASL order, \
                                   before authentication, a client SASL    \
                                   exchange where krelay authenticates */

enum kr_refusal {
#define KR_REFUSAL_ENUM_(id, label) KR_REFUSAL_##id,
    KR_STATS_REFUSALS(KR_REFUSAL_ENUM_)
#undef KR_REFUSAL_ENUM_
    KR_REFUSAL__N
};

/* Which end of a connection: the side label. */
enum kr_stat_side {
    KR_SIDE_CLIENT,                     /* "client" */
    KR_SIDE_UPSTREAM,                   /* "upstream" */
    KR_SIDE__N
};

/*
 * Cells of requests by (ApiKey, version): keys 0..KR_STATS_API_KEYS - 1
 * times versions 0..KR_STATS_API_VERSIONS - 1, then one cell for
 * anything outside (api="other", version="other").
 */
#define KR_STATS_API_KEYS 128
#define KR_STATS_API_VERSIONS 32
#define KR_STATS_API_CELLS (KR_STATS_API_KEYS * KR_STATS_API_VERSIONS + 1)
/*
 * Cells of upstream connect failures by broker: the bootstrap servers,
 * NodeIds 0..KR_STATS_BROKERS - 1, then one cell for any other NodeId
 * (broker="other"): bounded whatever NodeIds a cluster uses.
 */
#define KR_STATS_BROKERS 256
#define KR_STATS_BROKER_CELLS (KR_STATS_BROKERS + 2)

/*
 * The action label of rule hits: which of a rule's actions applied (its
 * audit is not counted: every audited request would be a hit).
 */
#define KR_STATS_RULE_ACTIONS(X)                                              \
    X(DENY, "deny")             /* deny */                                   \
    X(CLAMP, "clamp")           /* clamp_min_version, clamp_max_version */   \
    X(POLICY, "policy")         /* allowed_acks, allowed_compression */      \
    X(THROTTLE, "throttle")     /* throttle_ms */                            \
    X(FAULT, "fault")           /* fault_* (latency, error, close) */

enum kr_stat_rule_action {
#define KR_RA_ENUM_(id, label) KR_RA_##id,
    KR_STATS_RULE_ACTIONS(KR_RA_ENUM_)
#undef KR_RA_ENUM_
    KR_RA__N
};

/* Rules the rule_hits cells have room for (KR_CONF_MAX_RULES). */
#define KR_STATS_RULES 256
/* Cells of rule hits: one per rule index and action. */
#define KR_STATS_RULE_CELLS (KR_STATS_RULES * KR_RA__N)
/*
 * Cells of errors answered and response errors: codes -1..KR_KERR_MAX,
 * then one for any other code ("other" in errors_answered, "unknown" in
 * response_errors).
 */
#define KR_STATS_KERR_CELLS (KR_KERR_MAX + 3)

/*
 * Histogram bucket upper bounds of response_latency and upstream_latency,
 * in ms (+Inf is
 * added).  Cells: one per bound, +Inf, then the sum of the observed
 * values (ms); the count is the sum of the buckets.
 */
#define KR_STATS_LATENCY_MS(X)                                                \
    X(1) X(2) X(5) X(10) X(25) X(50) X(100) X(250) X(500) X(1000) X(2500)    \
    X(5000) X(10000) X(30000)
#define KR_STATS_LATENCY_N_(ms) +1
#define KR_STATS_LATENCY_BOUNDS (0 KR_STATS_LATENCY_MS(KR_STATS_LATENCY_N_))
#define KR_STATS_LATENCY_CELLS (KR_STATS_LATENCY_BOUNDS + 2)

enum kr_stat_type {
    KR_STAT_COUNTER,
    KR_STAT_GAUGE,
    KR_STAT_HISTOGRAM
};

/* How the cells of a metric are labelled (and indexed). */
enum kr_stat_labels {
    KR_SL_NONE,             /* one value, no label */
    KR_SL_CAUSE,            /* cause: enum kr_close_cause */
    KR_SL_API_VERSION,      /* api, version: kr_stats_api_cell */
    KR_SL_RULE,             /* rule (its name), action:
                               kr_stats_rule_cell */
    KR_SL_KERR,             /* error (Kafka's name): kr_stats_kerr_cell */
    KR_SL_RSP_ERROR,        /* error (Kafka's name, "unknown" for a code
                               Kafka does not name):
                               kr_stats_rsp_error_cell */
    KR_SL_LATENCY_MS,       /* le: kr_stats_observe_latency */
    KR_SL_SIDE,             /* side: enum kr_stat_side */
    KR_SL_BROKER,           /* broker: kr_stats_broker_cell */
    KR_SL_REFUSAL           /* kind: enum kr_refusal */
};

/*
 * The table: X(name, type, labels, cells, help).  Every counter krelay
 * keeps is one row here.
 */
#define KR_STATS(X)                                                           \
    X(conn_accepted, COUNTER, NONE, 1,                                       \
      "Client connections accepted.")                                        \
    X(conn_refused, COUNTER, NONE, 1,                                        \
      "Client connections refused: the listener's max_connections was "     \
      "reached.")                                                            \
    X(conn_proxy_untrusted, COUNTER, NONE, 1,                                \
      "Client connections closed at accept on a listener with "              \
      "proxy_protocol: their address is outside proxy_protocol_from.")      \
    X(conn_drain_closed, COUNTER, NONE, 1,                                   \
      "Client connections closed at accept because krelay was draining "    \
      "(SIGTERM).")                                                          \
    X(conn_active, GAUGE, NONE, 1,                                           \
      "Sessions open now.")                                                  \
    X(closes, COUNTER, CAUSE, KR_CLOSE__N,                                   \
      "Sessions closed, by cause.")                                          \
    X(requests, COUNTER, NONE, 1,                                            \
      "Request frames forwarded or answered by krelay.")                     \
    X(api_requests, COUNTER, API_VERSION, KR_STATS_API_CELLS,                \
      "Request frames, by ApiKey and version (as the client sent them).")    \
    X(responses, COUNTER, NONE, 1,                                           \
      "Response frames forwarded.")                                          \
    X(requests_acks0, COUNTER, NONE, 1,                                      \
      "Produce requests with Acks=0 (no response expected).")                \
    X(responses_held, COUNTER, NONE, 1,                                      \
      "Responses held whole and rewritten.")                                 \
    X(responses_streamed, COUNTER, NONE, 1,                                  \
      "Responses forwarded as they arrived, only their tail held.")          \
    X(requests_streamed, COUNTER, NONE, 1,                                   \
      "Audited Produce requests forwarded as they arrived, their audit "     \
      "line taken by a scanner (not held whole).")                           \
    X(endpoints_dropped, COUNTER, NONE, 1,                                   \
      "Streamed responses whose endpoint fields did not fit the frame and "  \
      "were dropped.")                                                       \
    X(sasl_tokens, COUNTER, NONE, 1,                                         \
      "Raw SASL token frames passed.")                                       \
    X(sasl_successes, COUNTER, NONE, 1,                                      \
      "SASL authentications the broker answered with success (issue 9).")   \
    X(sasl_failures, COUNTER, NONE, 1,                                       \
      "SASL authentications the broker (or a rule) refused.")               \
    X(requests_refused, COUNTER, NONE, 1,                                    \
      "Requests never forwarded: krelay cannot decode them and an "          \
      "enforcing rule could match (the connection was closed).")             \
    X(frames_undecodable, COUNTER, NONE, 1,                                  \
      "Frames that only observing rules wanted decoded and that did not "    \
      "decode (forwarded as they were).")                                    \
    X(rule_hits, COUNTER, RULE, KR_STATS_RULE_CELLS,                         \
      "Requests a rule's action applied to, by rule and action (a request "  \
      "one rule clamps and throttles counts once for each).")                \
    X(errors_answered, COUNTER, KERR, KR_STATS_KERR_CELLS,                   \
      "Error responses krelay built itself, by Kafka error name.")           \
    X(response_latency, HISTOGRAM, LATENCY_MS, KR_STATS_LATENCY_CELLS,       \
      "Time from reading a request to matching its response (coarse "        \
      "clock, 1-4 ms resolution).")                                          \
    X(upstream_latency, HISTOGRAM, LATENCY_MS, KR_STATS_LATENCY_CELLS,       \
      "Time the upstream took to answer a client request that expects a "    \
      "response: from krelay queuing it to the upstream connection (in the " \
      "pass that read it: a pass-through request's header, a held one "      \
      "whole; so a request larger than one read, or sent while the "          \
      "connection is being made, adds that time) to the first bytes of its " \
      "response read from the upstream; no rule delay nor hold included "    \
      "(coarse clock, 1-4 ms resolution).")                                  \
    X(response_errors, COUNTER, RSP_ERROR, KR_STATS_KERR_CELLS,              \
      "Non-zero ErrorCode fields in broker responses to client requests, "   \
      "by Kafka error name: every ErrorCode field (any depth) of a "         \
      "response krelay decodes anyway, for its rules or to rewrite broker "  \
      "addresses (Metadata, FindCoordinator, DescribeCluster); of any "      \
      "other response "                                                      \
      "only the top-level ErrorCode, where it is the first field of the "    \
      "body or follows ThrottleTimeMs (ApiVersions, FindCoordinator v0-3, "  \
      "JoinGroup, Heartbeat, Fetch v7+...). Responses are never decoded "    \
      "for this count.")                                                     \
    X(requests_internal, COUNTER, NONE, 1,                                   \
      "krelay's own requests on a client's upstream connection.")            \
    X(responses_internal, COUNTER, NONE, 1,                                  \
      "Responses to krelay's own requests, taken by krelay (never "          \
      "forwarded).")                                                         \
    X(sasl_authentications, COUNTER, NONE, 1,                                \
      "SASL authentications krelay made itself to the brokers on client "    \
      "connections (origination), re-authentications included.")            \
    X(sasl_reauthentications, COUNTER, NONE, 1,                              \
      "Of those, re-authentications before the session lifetime the "        \
      "broker gave ran out (KIP-368).")                                      \
    X(sasl_authentication_failures, COUNTER, NONE, 1,                        \
      "Client connections closed because krelay's own SASL authentication "  \
      "to the broker failed.")                                               \
    X(responses_dropped, COUNTER, NONE, 1,                                   \
      "Responses to Produce with Acks=0 (a broker that answers them), not "  \
      "passed on.")                                                          \
    X(client_to_upstream_bytes, COUNTER, NONE, 1,                            \
      "Bytes forwarded client to upstream.")                                 \
    X(upstream_to_client_bytes, COUNTER, NONE, 1,                            \
      "Bytes forwarded upstream to client.")                                 \
    X(spliced_bytes, COUNTER, NONE, 1,                                       \
      "Forwarded bytes moved socket to socket by splice(2), never in user "  \
      "space (included in client_to_upstream_bytes and "                     \
      "upstream_to_client_bytes).")                                          \
    X(copied_bytes, COUNTER, NONE, 1,                                        \
      "Debug: forwarded bytes copied in user space on the cut-through "      \
      "path (header peeks and re-encoded frames are not counted).")         \
    X(tls_coalesced_bytes, COUNTER, NONE, 1,                                 \
      "Bytes copied to send small evbuffer chains as one TLS record (TLS "   \
      "connections only; not in copied_bytes).")                             \
    X(legacy_translated, COUNTER, API_VERSION, KR_STATS_API_CELLS,           \
      "Requests legacy translation sent up to a version the brokers "        \
      "accept (translate_legacy), by the client's ApiKey and ApiVersion.")   \
    X(legacy_refused, COUNTER, NONE, 1,                                      \
      "Requests of a version the brokers no longer accept answered or "      \
      "closed by krelay: translate_legacy off, or it could not translate "   \
      "them.")                                                               \
    X(legacy_refusals_delayed, COUNTER, NONE, 1,                             \
      "Refusals of a legacy version (the answer, or an Acks=0 Produce's "    \
      "close) held legacy_refuse_delay_ms: the same client address was "     \
      "refused within legacy_refuse_window_ms.")                             \
    X(legacy_records_in_bytes, COUNTER, NONE, 1,                             \
      "Bytes of records legacy translation converted between message "       \
      "formats (magic 0/1 and RecordBatch v2), as they came.")               \
    X(legacy_records_out_bytes, COUNTER, NONE, 1,                            \
      "Bytes of records legacy translation converted, as they went on.")     \
    X(legacy_zstd_recompressed, COUNTER, NONE, 1,                            \
      "zstd batches recompressed (legacy_zstd) for consumers of magic 0/1, " \
      "which cannot carry zstd.")                                            \
    X(legacy_partitions_corrupt, COUNTER, NONE, 1,                           \
      "Partitions whose records did not convert (CRC, compression, size), "  \
      "of old producers' requests and of responses to old consumers: "       \
      "given their error (CORRUPT_MESSAGE, UNSUPPORTED_COMPRESSION_TYPE, "   \
      "MESSAGE_TOO_LARGE).")                                                 \
    X(legacy_produce_rounds, COUNTER, NONE, 1,                               \
      "Produce requests krelay sent ahead of an old producer's translated "  \
      "Produce, carrying the batches before each partition's last when its " \
      "records became several (legacy_batch_max_bytes, or codecs mixed): "   \
      "Produce v3+ takes one batch per partition.")                          \
    X(legacy_produce_rounds_failed, COUNTER, NONE, 1,                        \
      "Old producers' translated Produce requests that krelay answered "     \
      "itself because one of its own Produce requests ahead of them (a "     \
      "round) was answered with an error: the rest of the set was not "     \
      "sent, the client got that error for its every partition.")            \
    X(api_responses, COUNTER, API_VERSION, KR_STATS_API_CELLS,               \
      "Client requests answered (a response forwarded or built by krelay "  \
      "reached its turn), by ApiKey and version (as the client sent them).") \
    X(tls_handshake_failures, COUNTER, SIDE, KR_SIDE__N,                     \
      "TLS handshakes of client connections that failed (an error of the "   \
      "TLS library or of the certificate check; not a peer that left, nor "  \
      "a timeout), by side: with the client, or krelay's with the "          \
      "upstream.")                                                           \
    X(upstream_connect_failures, COUNTER, BROKER, KR_STATS_BROKER_CELLS,     \
      "Client connections closed because krelay could not connect to their " \
      "broker (connect(2) failed, no connection within connect_timeout_ms, " \
      "no address known for the NodeId), by broker: bootstrap or the "       \
      "NodeId.")                                                            \
    X(frames_refused, COUNTER, REFUSAL, KR_REFUSAL__N,                       \
      "Client frames refused, their connection closed, by kind: oversized "  \
      "(above max_frame_bytes, or Kafka's 524288 before SASL "               \
      "authentication), malformed (size prefix, request header or PROXY "    \
      "protocol header), wrong_protocol (TLS, HTTP, PROXY, plaintext Kafka " \
      "or a raw GSSAPI token where the listener expects another), "          \
      "undecodable (a request body krelay needed decoded), unexpected (a "   \
      "request out of SASL order or before authentication).")

/* Ids: KR_STAT_ID_<name>, in table order. */
enum kr_stat_id {
#define KR_STAT_ID_(name, type, labels, cells, help) KR_STAT_ID_##name,
    KR_STATS(KR_STAT_ID_)
#undef KR_STAT_ID_
    KR_STAT__N
};

/*
 * The counters of one worker: one array of cells per row.  Zero them
 * (calloc, memset) to start; read and write them only through the
 * macros and functions below.
 */
struct kr_stats {
#define KR_STAT_FIELD_(name, type, labels, cells, help)                       \
    _Atomic uint64_t name[cells];
    KR_STATS(KR_STAT_FIELD_)
#undef KR_STAT_FIELD_
};

/* One row of the table, for exposition and tests. */
struct kr_stat_desc {
    const char *name;                   /* C name, "conn_accepted" */
    enum kr_stat_type type;
    enum kr_stat_labels labels;
    size_t cells;
    size_t offset;                      /* of its cells in kr_stats */
    const char *help;
};

/* The table, indexed by enum kr_stat_id (KR_STAT__N rows). */
extern const struct kr_stat_desc kr_stats_desc[KR_STAT__N];

/* Single-writer update (see the top of this file); c may not be NULL. */
static inline void
kr_stat_add_(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) +
                          n, memory_order_relaxed);
}

/* Read one cell from any thread. */
static inline uint64_t
kr_stat_get_(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

/*
 * st: a struct kr_stats * (a worker's); name: a row of KR_STATS; cell: an
 * index from the row's kr_stats_*_cell function.  Only the owner's thread
 * may use the writing ones.  KR_STAT_DEC is for gauges (wraps like any
 * uint64_t).
 */
#define KR_STAT_ADD(st, name, n)                                              \
    kr_stat_add_(&(st)->name[0], (uint64_t)(n))
#define KR_STAT_INC(st, name) KR_STAT_ADD(st, name, 1)
#define KR_STAT_DEC(st, name) KR_STAT_ADD(st, name, UINT64_MAX)
#define KR_STAT_INC_L(st, name, cell)                                         \
    kr_stat_add_(&(st)->name[(cell)], 1)
#define KR_STAT_GET(st, name) kr_stat_get_(&(st)->name[0])
#define KR_STAT_GET_L(st, name, cell) kr_stat_get_(&(st)->name[(cell)])

/* Cell of (api_key, api_version) in api_requests; never out of range. */
static inline size_t
kr_stats_api_cell(int16_t api_key, int16_t api_version)
{
    if (api_key < 0 || api_key >= KR_STATS_API_KEYS || api_version < 0 ||
        api_version >= KR_STATS_API_VERSIONS) {
        return KR_STATS_API_CELLS - 1;
    }
    return (size_t)api_key * KR_STATS_API_VERSIONS + (size_t)api_version;
}

/* Cell of Kafka error code in errors_answered; never out of range. */
static inline size_t
kr_stats_kerr_cell(int16_t code)
{
    if (code < -1 || code > KR_KERR_MAX) {
        return KR_STATS_KERR_CELLS - 1;
    }
    return (size_t)(code + 1);
}

/*
 * Cell of Kafka error code in response_errors: a code Kafka names
 * (kr_kerr_name), else the "unknown" cell; never out of range.
 */
size_t kr_stats_rsp_error_cell(int16_t code);

/*
 * Cell of a broker in upstream_connect_failures: the bootstrap servers
 * (bootstrap true, node_id ignored) or NodeId node_id; never out of
 * range.
 */
static inline size_t
kr_stats_broker_cell(bool bootstrap, int32_t node_id)
{
    if (bootstrap) {
        return 0;
    }
    if (node_id < 0 || node_id >= KR_STATS_BROKERS) {
        return KR_STATS_BROKER_CELLS - 1;
    }
    return (size_t)node_id + 1;
}

/*
 * st's rule_hits of rule index i (every action) set back to 0: the rule
 * at that index is another one now (a reload removed, renamed or moved
 * it), and /metrics labels a cell with the name of the rule at its index
 * in the running configuration.  Writer thread only; i out of range: a
 * no-op.
 */
void kr_stats_rule_reset(struct kr_stats *st, int i);

/*
 * Cell of rule index i's action a in rule_hits, or -1 when either is out
 * of range.
 */
static inline int
kr_stats_rule_cell(int i, enum kr_stat_rule_action a)
{
    return i >= 0 && i < KR_STATS_RULES && (int)a >= 0 && a < KR_RA__N
               ? i * KR_RA__N + (int)a
               : -1;
}

/*
 * Observe one latency of ms milliseconds (negative counts as 0) in st's
 * response_latency: its bucket and the sum.  Writer thread only.
 */
void kr_stats_observe_latency(struct kr_stats *st, int64_t ms);

/* The same in st's upstream_latency.  Writer thread only. */
void kr_stats_observe_upstream(struct kr_stats *st, int64_t ms);

struct kr_node;

/*
 * Count every ErrorCode field with a non-zero value in the decoded
 * response body (any depth: structs and arrays of structs are walked,
 * records are not) in st's response_errors.  No allocation; the walk
 * visits each decoded value once.  body NULL: nothing.  Writer thread
 * only.
 */
void kr_stats_response_errors(struct kr_stats *st,
                              const struct kr_node *body);

/*
 * The id of the row named name (its C name, "requests"), or -1 when no
 * row has that name.  Tests, admin.
 */
int kr_stats_find(const char *name);

/* Cell value of row id, cell i of st (any thread; 0 when out of range). */
uint64_t kr_stats_cell(const struct kr_stats *st, enum kr_stat_id id,
                       size_t i);

/*
 * Sum of row id, cell i, over n stats blocks (the workers); any thread.
 * NULL entries are skipped.
 */
uint64_t kr_stats_sum(const struct kr_stats *const *st, int n,
                      enum kr_stat_id id, size_t i);

/*
 * Name of rule index i for the rule label (NULL: "rule<i>"); arg is the
 * caller's (a config).
 */
typedef const char *(*kr_stats_rule_name_fn)(int i, void *arg);

/*
 * Write the Prometheus text exposition (format 0.0.4) of the sum of n
 * stats blocks (the workers) to out: HELP and TYPE for every row, every
 * unlabelled value, the labelled cells that are not 0, every bucket of a
 * histogram (cumulative, le in seconds) with its _sum and _count.
 * rule_name names rule cells (may be NULL).  Returns 0, or -1 when a
 * write failed.
 */
int kr_stats_prom(FILE *out, const struct kr_stats *const *st, int n,
                  kr_stats_rule_name_fn rule_name, void *arg);

struct kr_verdict;

/*
 * Count the rules a verdict names (the rule whose deny, clamp, produce
 * policy, throttle or fault won: kr_rule.h) in st's rule_hits, under the
 * action each won.
 */
void kr_stats_rule_hits(struct kr_stats *st, const struct kr_verdict *v);

#endif /* KR_STATS_H */
