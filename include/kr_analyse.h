/*
 * kr_analyse.h - the rule pipeline: what the [rule]s make of one decoded
 * request, and of its response, as named outcomes the session applies.
 *
 *   session (kr_session.c)                 kr_analyse
 *   ----------------------                 ----------
 *   frame taken whole, decoded  --------->  kr_analyse_request
 *     (or not: decode_error)                  SaslHandshake mechanism,
 *                                             kr_rule_eval, fetch session,
 *                                             TopicId, deny, produce policy,
 *                                             clamp (translate + encode),
 *                                             the gate when it did not decode
 *   applies the outcome  <---------------  struct kr_an_decision
 *     FORWARD / FORWARD_TRANSLATED /         (the request's rule state, a
 *     FORWARD_UNDECODED / ANSWER /            frame to send, a log line,
 *     CLOSE_AFTER_OWED / REFUSE / CLOSE       an audit line)
 *   response held whole, decoded -------->  kr_analyse_response
 *                                             translate back, fault error,
 *                                             ThrottleTimeMs, latency,
 *                                             audit line, fault close
 *   rewrites addresses, delays,  <-------  struct kr_an_rsp_decision
 *     closes, delivers
 *
 * Nothing here touches a socket, an evbuffer or a timer: the module links
 * without libevent and without the session (a unit test drives it with
 * decoded frames: tests/unit/check_analyse.c).  What it needs of the
 * connection comes in struct kr_an_conn; the frames it builds are
 * kr_wbuf (kr_codec.h) the caller sends.  One pipeline call per frame, on
 * the session's worker thread; nothing global is written.
 */
#ifndef KR_ANALYSE_H
#define KR_ANALYSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_audit.h"
#include "kr_codec.h"
#include "kr_frame.h"
#include "kr_inflight.h"
#include "kr_legacy.h"
#include "kr_legacy_records.h"
#include "kr_rule.h"
#include "kr_sasl.h"
#include "kr_topics.h"

/*
 * issue 10: what a request legacy translation carried up needs when its
 * response comes back (kr_an_req.legacy; malloc'd, freed with the rule
 * state): the per-API memo (kr_legacy.h), the partitions (Fetch: their
 * offsets and limits; Produce: those not forwarded, answered with their
 * error), and the record options as they were when the request was read.
 */
struct kr_an_legacy {
    struct kr_legacy_memo memo;
    struct kr_legacy_parts parts;
    struct kr_legacy_rec_opts rec;
    struct kr_legacy_splits *splits;    /* Produce: partitions whose
                                           batches before the last went
                                           up in rounds of their own
                                           (one reference), NULL: none */
    struct kr_legacy_parts sent;        /* Produce with splits and a
                                           response (Acks != 0): the
                                           partitions the client's
                                           request carries up, named in
                                           krelay's answer when a round
                                           fails (kr_analyse_rounds_failed);
                                           else empty */
};

/*
 * issue 10: one Produce request krelay sends ahead of a client's
 * translated Produce (a round, struct kr_legacy_split): the frame
 * without its size prefix (malloc'd, len bytes), with the client's
 * header (its CorrelationId too) at the upstream version.
 */
struct kr_an_round {
    uint8_t *p;
    size_t len;
};

/*
 * Rule state of one request: what the rules decided, what its audit line
 * needs.  malloc'd (kr_an_req_new), owned by whoever holds the decision
 * (the session keeps it with the in-flight entry until the response went
 * out), freed with kr_an_req_free.  Times: _us monotonic (t_read_us) or
 * wall (t_wall_us) microseconds.
 */
struct kr_an_req {
    struct kr_verdict v;                /* kr_rule_eval's verdict */
    struct kr_audit_req *audit;         /* capture when v audits */
    char *audit_line;                   /* formatted with the response
                                           (malloc'd), written when it
                                           goes out */
    int64_t t_wall_us;                  /* wall clock, request read */
    int64_t t_read_us;                  /* monotonic, request read; 0:
                                           unknown */
    uint64_t req_bytes;                 /* with prefix */
    unsigned actions;                   /* KR_AUDIT_* */
    int32_t pause_ms;                   /* throttle enforce (KIP-219): no
                                           client reads for this long
                                           after the response */
    int16_t up_version;                 /* ApiVersion sent upstream */
    /* issue 13: a frame krelay could not decode (audit line only) */
    char *decode_error;                 /* why (malloc'd), NULL: none */
    char *note;                         /* malloc'd, NULL: none */
    bool incomplete;                    /* the connection closed before
                                           the response reached the
                                           client whole (audit line) */
    char *client_id;                    /* the request's ClientId when no
                                           capture has it (malloc'd, NULL:
                                           null or unknown) */
    size_t client_id_len;               /* its bytes (it may hold NULs) */
    struct kr_an_legacy *legacy;        /* issue 10: legacy translation,
                                           NULL: none */
};

/* A zeroed rule state with no rule ids (-1).  NULL on ENOMEM. */
struct kr_an_req *kr_an_req_new(void);

/* Free req and what it owns.  NULL is a no-op. */
void kr_an_req_free(struct kr_an_req *req);

/*
 * issue 10: legacy translation on a listener (translate_legacy = true):
 * how records are converted, and what the brokers accept beyond what
 * they advertise (broker_profile; kr_broker_versions.h).
 */
struct kr_an_legacy_conf {
    bool on;                            /* translate_legacy: translate;
                                           else refuse what it would */
    const char *listener;               /* its [listener]'s name (log) */
    struct kr_legacy_rec_opts rec;
    int profile;                        /* enum kr_broker_profile */
    int64_t fetch_max_bytes;            /* legacy_fetch_max_bytes: a
                                           translated Fetch's MaxBytes at
                                           most this (0: no cap but half
                                           of max_frame_bytes) */
};

/*
 * What the pipeline knows of one connection.  Pointers are borrowed for
 * the call; rng, fetch_stale and legacy_turn are read and written.
 */
struct kr_an_conn {
    const struct kr_ruleset *rs;        /* the connection's config's */
    const struct kr_rule_mask *rmask;   /* its static matchers */
    const struct kr_topic_map *tmap;    /* learned TopicIds, may be NULL */
    const struct kr_clamp *broker_av;   /* the ranges of the ApiVersions
                                           response this connection's
                                           broker sent (kr_api_max + 1,
                                           min > max: not offered), NULL:
                                           none seen */
    /* else the broker's range of an ApiKey from krelay's own metadata
       connection: true with min and max when known; may be NULL */
    bool (*broker_range)(void *arg, int16_t key, int16_t *min,
                         int16_t *max);
    void *broker_arg;
    /* the broker addresses of a decoded response as the client gets
       them (kr_rewrite_tree; new hosts may be written in arena, the
       tree's): KR_OK and *changed; may be NULL */
    int (*rewrite_tree)(void *arg, int16_t key, int16_t ver,
                        struct kr_node *body, struct kr_arena *arena,
                        bool *changed);
    void *rewrite_arg;
    struct kr_sasl *sasl;               /* the connection's SASL state */
    bool *fetch_stale;                  /* the config changed since the
                                           last full Fetch (in/out) */
    uint64_t *rng;                      /* xorshift64* state, not 0 */
    uint32_t *legacy_turn;              /* issue 10: translated Fetches
                                           so far (their partitions'
                                           rotation; in/out); may be NULL */
    bool audit_sink;                    /* an audit sink exists */
    const char *name;                   /* log prefix: "c#0.7 ... > NodeId
                                           2" */
    struct kr_audit_peer peer;          /* audit: who and where (strings
                                           borrowed for the call) */
    const struct kr_an_legacy_conf *legacy; /* issue 10; NULL: nothing
                                           known of the brokers (no
                                           upstream) */
    const struct kr_rbuf *rsp_rb;       /* kr_analyse_response: the payload
                                           the response's records slices
                                           point into (legacy translation
                                           converts them), else NULL */
};

/* One request frame, as the session found it. */
struct kr_an_request {
    const struct kr_req_hdr *h;         /* its header (kr_frame) */
    struct kr_inflight e;               /* its in-flight entry to be */
    size_t flen;                        /* payload bytes (no prefix) */
    bool expect;                        /* a response will come (not a
                                           Produce with Acks=0) */
    const struct kr_rule_slot *slot;    /* kr_rule_lookup's, NULL: none */
    bool sasl_refuse;                   /* a SaslHandshake v0 no rule held,
                                           with a mechanism krelay cannot
                                           follow (the session decoded it):
                                           refused */
    const char *cid;                    /* its own ClientId, whole (may
                                           hold NULs; NULL: null) */
    size_t cidlen;
    struct kr_msg *m;                   /* decoded, NULL when it did not
                                           decode */
    const struct kr_rbuf *rb;           /* its payload (m borrows from it) */
    const char *decode_error;           /* m NULL: why */
};

/* What the session does with a request (kr_analyse_request). */
enum kr_an_outcome {
    KR_AN_FORWARD = 0,                  /* forward the frame as it came */
    KR_AN_FORWARD_TRANSLATED,           /* forward w: the request encoded
                                           at req->up_version (records
                                           borrowed from the input: emit
                                           with kr_evcodec_emit and msg) */
    KR_AN_FORWARD_UNDECODED,            /* it did not decode and only
                                           observing rules could match:
                                           forward unchanged (issue 13) */
    KR_AN_ANSWER,                       /* never forwarded: w is the
                                           response (no size prefix);
                                           text the line, at level */
    KR_AN_CLOSE_AFTER_OWED,             /* never forwarded (Acks=0 with no
                                           response to carry the error):
                                           close after the responses owed
                                           with text (at most
                                           KR_AN_CLOSE_TEXT_MAX bytes) */
    KR_AN_REFUSE,                       /* cannot be decoded and an
                                           enforcing rule could match: never
                                           forwarded, close after the
                                           responses owed with text */
    KR_AN_CLOSE,                        /* close now (level, text): an
                                           answer could not be built */
    KR_AN_DONE                          /* never forwarded, nothing to
                                           answer (issue 10: a Produce
                                           with Acks=0 whose every
                                           partition's set is empty: a
                                           broker appends nothing and
                                           sends nothing); text at level */
};

/*
 * The bytes of text (the NUL included) that the session keeps of a line
 * it logs when the connection closes after the responses owed
 * (KR_AN_CLOSE_AFTER_OWED, KR_AN_REFUSE, close_after; kr_session.c's
 * close line): such texts are made to fit, their variable parts bounded,
 * so that what happens (the close) and why are not cut off.
 */
#define KR_AN_CLOSE_TEXT_MAX 256

/*
 * The decision on one request.  kr_analyse_* fill it (zeroed first); the
 * caller owns req, w and audit_now afterwards (kr_an_decision_free).
 */
struct kr_an_decision {
    enum kr_an_outcome outcome;
    struct kr_an_req *req;              /* rule state; NULL: no rule acts
                                           on it (pass-through) */
    struct kr_wbuf w;                   /* FORWARD_TRANSLATED, ANSWER */
    struct kr_msg msg;                  /* FORWARD_TRANSLATED: the tree w
                                           was encoded from */
    int16_t error;                      /* ANSWER, CLOSE_AFTER_OWED: the
                                           Kafka error (KR_KERR_*) */
    int level;                          /* of text (KR_LOG_*) */
    char text[600];                     /* the log line, without the
                                           connection's prefix */
    char *audit_now;                    /* an audit line to write now
                                           (malloc'd), NULL: none */
    bool evaluated;                     /* rules matched (verdict, for
                                           counting rule hits) */
    struct kr_verdict verdict;
    bool undecodable;                   /* FORWARD_UNDECODED: counted in
                                           frames_undecodable */
    bool refused;                       /* REFUSE: counted */
    bool want_rsp_first;                /* a SaslHandshake v0 goes
                                           upstream: parse nothing more
                                           until its answer */
    bool enforce_wait;                  /* a throttle-enforced request goes
                                           upstream: read no further one
                                           until it is answered */
    bool legacy;                        /* issue 10: translated up (legacy
                                           translation), or answered because
                                           it could not be */
    bool legacy_refusal;                /* issue 10: refused for its
                                           version, translate_legacy off
                                           (ANSWER, or CLOSE_AFTER_OWED
                                           for Acks=0): the session may
                                           hold the answer or the close
                                           (legacy_refuse_delay_ms) */
    struct kr_records_stats legacy_st;  /* its records converted */
    unsigned legacy_bad;                /* Produce partitions whose records
                                           did not convert (not forwarded,
                                           given an error) */
    struct kr_an_round *rounds;         /* FORWARD_TRANSLATED of a Produce
                                           whose partitions' records split
                                           into several batches: nrounds
                                           requests to send up before w,
                                           in order (malloc'd), their
                                           answers for splits */
    uint32_t nrounds;
    int16_t rounds_version;             /* the version they are at */
    struct kr_legacy_splits *splits;    /* their answers go there (one
                                           reference, d's: req's legacy
                                           state holds another, and Acks=0
                                           requests keep no req) */
    bool close_after;                   /* FORWARD_TRANSLATED of a Produce
                                           with Acks=0 that had partitions
                                           not forwarded (legacy_bad): no
                                           response can carry their error,
                                           so, as a broker does, close after
                                           the responses owed once it went
                                           up, with text at level */
};

/*
 * Decide about request r (whole; r->m decoded, or NULL with
 * r->decode_error).  Trees for an answer are built in a (the caller's
 * arena, freed after it sent w).  Fills *d.  Never fails: ENOMEM and
 * encoding failures come back as KR_AN_CLOSE.
 */
void kr_analyse_request(const struct kr_an_conn *c,
                        const struct kr_an_request *r, struct kr_arena *a,
                        struct kr_an_decision *d);

/*
 * A request krelay cannot decode at all (unknown ApiKey or version) that
 * an enforcing rule could match (kr_rule_gate: rule is the gate's rule
 * index): KR_AN_REFUSE with why, audited whenever an audit sink exists.
 */
void kr_analyse_refuse(const struct kr_an_conn *c,
                       const struct kr_an_request *r, int rule,
                       const char *why, struct kr_an_decision *d);

/*
 * The rule state of request r from its header alone (a request krelay
 * could not decode, or one it answers without a verdict): ClientId cid
 * (cidlen bytes, may hold NULs; NULL: none kept), decode error why (may
 * be NULL), actions (KR_AUDIT_*).  NULL on ENOMEM.
 */
struct kr_an_req *kr_an_req_from_header(const struct kr_an_request *r,
                                        const char *cid, size_t cidlen,
                                        const char *why, unsigned actions);

/* Free what d owns (req, w, rounds, audit_now) and zero it. */
void kr_an_decision_free(struct kr_an_decision *d);

/* What the session does with a response held for the rules. */
enum kr_an_rsp_outcome {
    KR_AN_DELIVER = 0,                  /* the frame as it came */
    KR_AN_DELIVER_CHANGED,              /* w (records borrowed from the
                                           input: emit with msg) */
    KR_AN_CLOSE_UP,                     /* cannot translate it back: close
                                           blaming the upstream (level,
                                           text) */
    KR_AN_RSP_CLOSE                     /* close now (out of memory) */
};

/* The decision on one response (kr_analyse_response). */
struct kr_an_rsp_decision {
    enum kr_an_rsp_outcome outcome;
    struct kr_wbuf w;                   /* DELIVER_CHANGED */
    uint64_t rsp_bytes;                 /* what the client gets, with
                                           prefix (before address
                                           rewriting) */
    int64_t delay_ms;                   /* hold it this long (fault
                                           latency, throttle enforce for
                                           old clients) */
    bool fault_close;                   /* close instead of delivering it
                                           (fault_close_probability):
                                           after the addresses were
                                           rewritten, as the caller does */
    int level;
    char text[600];                     /* CLOSE_UP, RSP_CLOSE: the log
                                           line */
    bool legacy;                        /* issue 10: translated back */
    unsigned legacy_bad;                /* partitions whose records did not
                                           convert (given an error) */
    struct kr_records_stats legacy_st;  /* its records converted */
};

/*
 * Decide about the response to entry e (whose rule state is req, not
 * NULL): m the response decoded at req->up_version, or NULL with
 * decode_error (NULL too when nothing asked for it decoded: then only
 * fault latency applies).  rsp_bytes: its size with prefix; up_us: the
 * upstream's time.  The audit line (req->audit_line) is formatted here.
 * Trees are built in a.  Fills *d; ENOMEM comes back as KR_AN_RSP_CLOSE.
 */
void kr_analyse_response(const struct kr_an_conn *c,
                         const struct kr_inflight *e, struct kr_an_req *req,
                         struct kr_msg *m, const char *decode_error,
                         uint64_t rsp_bytes, int64_t up_us,
                         struct kr_arena *a, struct kr_an_rsp_decision *d);

/*
 * issue 10: the client's translated Produce (entry e, rule state req with
 * its legacy state) whose rounds went up one at a time never goes up
 * itself: a round was answered with error (KR_KERR_*, not 0) for one of
 * its partitions, or did not name one.  Its response as krelay answers
 * it, at the client's version: every partition the request carried
 * (req->legacy->sent) with error, mapped for that version as the
 * broker's errors are (kr_legacy_error), the partitions kept out of it
 * (req->legacy->parts) with theirs; BaseOffset -1.  why (may be NULL)
 * becomes the audit line's note; the line is formatted here ("denied"
 * among its actions).  d: KR_AN_DELIVER_CHANGED with w (no records, no
 * size prefix), or KR_AN_RSP_CLOSE (level, text) when it cannot be
 * built.  Trees in a.
 */
void kr_analyse_rounds_failed(const struct kr_an_conn *c,
                              const struct kr_inflight *e,
                              struct kr_an_req *req, int16_t error,
                              const char *why, struct kr_arena *a,
                              struct kr_an_rsp_decision *d);

/*
 * May e's response go to the client as it streams by, its audit line
 * built from what kr_scan sees (kr_audit_scan_*), instead of being held
 * and decoded?  Fetch (the response that may be tens of MiB) and Produce
 * (issue 14: decoding each small response costs more than scanning it),
 * when its rules only audit it: no body in the line, nothing to translate
 * back, no response-side action (throttle, fault error, latency, close).
 */
bool kr_analyse_rsp_scan_only(const struct kr_inflight *e,
                              const struct kr_an_req *req);

/*
 * May e's response, above max_frame_bytes, go on unchanged without being
 * held (issue 13)?  Only when its rules merely observe: nothing to
 * translate back and no deny (a local answer is never waiting here).
 */
bool kr_analyse_rsp_may_stream(const struct kr_inflight *e,
                               const struct kr_an_req *req);

/*
 * The audit line of request e (rule state req) and, maybe NULL, its
 * response rsp of rsp_bytes; upstream_us the upstream's time, extra_us
 * added to the total (a hold).  malloc'd, NULL on ENOMEM.
 */
char *kr_an_audit_line(const struct kr_an_conn *c,
                       const struct kr_inflight *e,
                       const struct kr_an_req *req, const struct kr_msg *rsp,
                       uint64_t rsp_bytes, int64_t upstream_us,
                       int64_t extra_us);

/*
 * issue 10: the lowest version of ApiKey key the brokers of connection c
 * accept: the ranges its broker advertised (c->broker_av), else krelay's
 * own metadata connection's (c->broker_range), corrected for Kafka 4
 * (KAFKA-18659) and the listener's broker_profile (c->legacy).  -1 when
 * nothing is known.
 */
int16_t kr_an_broker_min(const struct kr_an_conn *c, int16_t key);

/*
 * issue 10: what legacy translation makes of a request of (key, ver) on
 * connection c.  PASS: the brokers accept it (or nothing is known of
 * them); TRANSLATE: ver is below kr_an_broker_min, a version kr_legacy
 * carries up, and translate_legacy is on (*to: the version it goes up
 * as); REFUSE: the same with translate_legacy off: krelay answers it
 * UNSUPPORTED_VERSION with a line saying what to enable.  The session
 * holds and decodes every request that is not PASS, whatever the rules
 * say.
 */
enum kr_an_legacy_route {
    KR_AN_LEGACY_PASS = 0,
    KR_AN_LEGACY_TRANSLATE,
    KR_AN_LEGACY_REFUSE
};
enum kr_an_legacy_route kr_analyse_legacy_route(const struct kr_an_conn *c,
                                                int16_t key, int16_t ver,
                                                int16_t *to);

/* Uniform in [0, 1) from *rng (xorshift64*). */
double kr_analyse_rand01(uint64_t *rng);

/* The name of rule i of rs ("?" when out of range). */
const char *kr_analyse_rule_name(const struct kr_ruleset *rs, int i);

/* "DeleteTopics" or "ApiKey 1000" (into buf) for log lines. */
const char *kr_analyse_api_label(int16_t key, char *buf, size_t len);

/* Why krelay cannot decode a request of (ApiKey, ApiVersion) at all. */
void kr_analyse_unknown_why(const struct kr_req_hdr *h, char *buf,
                            size_t len);

#endif /* KR_ANALYSE_H */
