/*
 * kr_inflight.h - the CorrelationId FIFO of one session: the requests
 * forwarded (or answered by krelay) whose responses the client still
 * expects, in the order it sent them.
 *
 * Kafka answers the requests of one connection in order, so a response is
 * matched to the oldest entry still waiting (kr_session.c); the ring here
 * only keeps the entries and their counts.  Entries leave from the head,
 * except optional ones (Produce with Acks=0) and entries whose response
 * krelay built, which may leave from behind others (kr_inflight_remove).
 * No libevent, no session: a pure data structure, one per session,
 * touched by its worker thread only.
 */
#ifndef KR_INFLIGHT_H
#define KR_INFLIGHT_H

#include <stdbool.h>
#include <stdint.h>

struct kr_rq;
struct kr_internal;

/* Kinds of in-flight entries. */
enum kr_inflight_kind {
    KR_INF_REQUEST = 0,                 /* a Kafka request */
    KR_INF_SASL_TOKEN,                  /* a raw SASL token (after
                                           SaslHandshake v0) */
    KR_INF_INTERNAL                     /* krelay's own request on the
                                           client's upstream connection
                                           (SASL origination, learning the
                                           broker's ApiVersions): its
                                           response goes to internal, never
                                           to the client */
};

/* kr_inflight.metered */
#define KR_INF_M_UPSTREAM 0x01u         /* upstream_latency observed */
#define KR_INF_M_ERROR 0x02u            /* response_errors counted */

/*
 * One request waiting for its response.  Entries leave the FIFO in order
 * (an optional entry may leave from behind answered ones); an entry with
 * rq set is a request rules touched (src/kr_session.c, "rules"):
 * rq->ready says its response frame is built (answered by krelay, or
 * held, processed and maybe delayed) and waits for its turn.  Upstream
 * responses match the oldest entry not ready.
 */
struct kr_inflight {
    int32_t correlation_id;             /* CorrelationId */
    int16_t api_key;                    /* ApiKey */
    int16_t api_version;                /* ApiVersion (the client's) */
    uint8_t kind;                       /* enum kr_inflight_kind */
    uint8_t optional;                   /* Produce with Acks=0: the client
                                           expects no response, yet some
                                           brokers (librdkafka's mock)
                                           send one: dropped when it
                                           comes, skipped when a later
                                           request's response comes */
    uint8_t sasl;                       /* a SASL step (SaslHandshake,
                                           SaslAuthenticate, raw token;
                                           issue 9): 1 until the broker's
                                           answer was read (the session
                                           counts these in sasl.inflight),
                                           2 after; 0 for others */
    uint8_t metered;                    /* KR_INF_M_* bits: what the
                                           metrics took of its response
                                           already (once each, however
                                           often its frame is looked at) */
    int64_t sent_ms;                    /* monotonic ms (kr_clock_timer_ms)
                                           it was read, and queued to the
                                           upstream when forwarded */
    int64_t wait_ms;                    /* its own wait (TimeoutMs,
                                           MaxWaitMs, RebalanceTimeoutMs),
                                           0 for the others */
    struct kr_rq *rq;                   /* rule state (owned by the
                                           session, malloc'd), NULL for
                                           pass-through */
    struct kr_internal *internal;       /* KR_INF_INTERNAL: who takes the
                                           response (the session's,
                                           malloc'd), else NULL */
};

/*
 * The first ring's entries.  Two, not more: a client that waits for each
 * response before its next request (most connections, and every idle
 * one after its ApiVersions and Metadata) never needs a third, and an
 * idle connection keeps its ring (2 x 48 bytes, not 8 x 48); a client
 * that pipelines grows it by doubling, once per size in the
 * connection's life, not per request.
 */
#define KR_INFLIGHT_CAP0 2

/*
 * The ring.  Zero-initialised it is an empty FIFO; entries are stored by
 * value (rq pointers are the session's to free).  head_since_ms: when the
 * head entry became the head (monotonic ms), for the request timeout.
 */
struct kr_inflight_fifo {
    struct kr_inflight *ring;           /* cap entries, malloc'd */
    uint32_t cap, head, len;
    uint32_t opt;                       /* optional entries among len (not
                                           counted for max_inflight nor the
                                           request timeout) */
    int64_t head_since_ms;
};

/*
 * Append a copy of e at the tail, growing the ring (KR_INFLIGHT_CAP0
 * entries, then doubling; it never shrinks).
 * The first entry of an empty FIFO starts head_since_ms at e->sent_ms.
 * Returns KR_OK or KR_ENOMEM (f unchanged).
 */
int kr_inflight_push(struct kr_inflight_fifo *f, const struct kr_inflight *e);

/* The head entry, or NULL when empty.  Valid until the next push. */
struct kr_inflight *kr_inflight_head(struct kr_inflight_fifo *f);

/* Entry i (0 = the head; i < f->len). */
struct kr_inflight *kr_inflight_at(struct kr_inflight_fifo *f, uint32_t i);

/*
 * Remove the head (f not empty); the next entry's clock starts at now_ms
 * (head_since_ms).
 */
void kr_inflight_pop(struct kr_inflight_fifo *f, int64_t now_ms);

/*
 * Remove entry i (0 = the head, then as kr_inflight_pop) and keep the
 * order of the others: the entries before it move one place towards the
 * tail.
 */
void kr_inflight_remove(struct kr_inflight_fifo *f, uint32_t i,
                        int64_t now_ms);

/*
 * The oldest entry that is not optional (*idx its index), or NULL (*idx
 * 0): the one a response is owed to, for timeouts and built responses.
 */
struct kr_inflight *kr_inflight_first(struct kr_inflight_fifo *f,
                                      uint32_t *idx);

/* Entries that expect a response (len - opt). */
uint32_t kr_inflight_expected(const struct kr_inflight_fifo *f);

/* Is an entry with CorrelationId corr in the FIFO? */
bool kr_inflight_has(const struct kr_inflight_fifo *f, int32_t corr);

/*
 * Since when the upstream owes entry e (index i) its response: since it
 * became the head, or since it was read when optional entries were ahead
 * of it (monotonic ms).
 */
int64_t kr_inflight_since(const struct kr_inflight_fifo *f,
                          const struct kr_inflight *e, uint32_t i);

/*
 * Free the ring (not the rq pointers: take them out first with
 * kr_inflight_at) and empty f.
 */
void kr_inflight_free(struct kr_inflight_fifo *f);

#endif /* KR_INFLIGHT_H */
