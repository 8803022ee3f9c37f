/*
 * kr_session.h - one client connection and the upstream connection krelay
 * opened for it.
 *
 * A session is created for each accepted client socket.  It opens one
 * upstream connection at once: to a bootstrap server (bootstrap listener)
 * or to the broker of the listener's NodeId, resolved through
 * kr_upstream.  Requests and responses are forwarded cut-through (moved
 * between evbuffers, never re-encoded); each request header is peeked and
 * remembered in a FIFO so responses are matched to their request in
 * order.  Responses that must be rewritten (kr_rewrite_wants) are held
 * whole and passed to kr_rewrite_response.  Frames the [rule]s touch
 * (kr_rule.h: one table lookup per frame) are held whole, decoded and
 * acted on; everything else stays cut-through.  See the diagram at the
 * top of src/kr_session.c.
 *
 * Everything runs on the event_base of the session's kr_worker (one per
 * worker thread); a session is never touched from another thread.
 */
#ifndef KR_SESSION_H
#define KR_SESSION_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "kr_common.h"
#include "kr_rewrite.h"
#include "kr_rule.h"

struct kr_worker;
struct kr_group;
struct kr_listener;
struct kr_conf_ref;
struct kr_resolve;
struct kr_conn;
struct kr_rq;
struct kr_scan;

/*
 * Transport of one socket: the seam where TLS goes.  read appends at most
 * max bytes to in and returns the count, 0 at EOF, or -1 with errno
 * (EAGAIN: nothing to read now).  write sends from out (draining what was
 * sent) and returns the count or -1 with errno (EAGAIN: would block).
 * close releases the transport's own state (not the fd).
 */
struct kr_conn_ops {
    const char *name;                   /* "tcp", later "tls" */
    ssize_t (*read)(struct kr_conn *c, struct evbuffer *in, size_t max);
    ssize_t (*write)(struct kr_conn *c, struct evbuffer *out);
    void (*close)(struct kr_conn *c);
    bool splice;                        /* the fd carries the Kafka bytes
                                           themselves (no record layer):
                                           splice(2) may move them */
};

/* The plain TCP transport: readv into evbuffer_reserve_space, writev. */
extern const struct kr_conn_ops kr_conn_tcp_ops;

/*
 * A splice(2) lane (issue 4): bytes krelay need not look at (a Fetch
 * response's record data, the rest of a pass-through frame) move from one
 * socket into a pipe lent by the worker (kr_worker_pipe_get) and from the
 * pipe into the other socket, never through user space.  The pipe's bytes
 * follow everything already in the sink's out buffer, which gains nothing
 * until the pipe is empty.  Plain TCP only (kr_conn_ops.splice).
 */
struct kr_splice {
    int pipe[2];                        /* read end, write end; -1: none */
    uint64_t left;                      /* bytes still to move from the
                                           source socket into the pipe */
    size_t queued;                      /* bytes in the pipe, owed to the
                                           sink after its out buffer */
    unsigned off:1;                     /* splice failed here (EINVAL:
                                           the socket does not support
                                           it): this lane reads through
                                           user space from now on */
    unsigned full:1;                    /* the pipe took nothing (EAGAIN)
                                           though it holds less than
                                           pipe_bytes: its slots are used
                                           up; the source waits until the
                                           sink takes some */
};

/* One side of a session: a socket with its buffers and events. */
struct kr_conn {
    evutil_socket_t fd;                 /* -1 when closed */
    const struct kr_conn_ops *ops;
    void *xprt;                         /* transport state (TLS), NULL */
    struct event *rev;                  /* EV_READ|EV_PERSIST */
    struct event *wev;                  /* EV_WRITE|EV_PERSIST */
    struct evbuffer *in;                /* read, not yet forwarded */
    struct evbuffer *out;               /* to be written */
    size_t read_size;                   /* next read's size (adaptive,
                                           16 KiB .. 256 KiB) */
    uint64_t bytes_in, bytes_out;       /* bytes read / written */
    unsigned reading:1;                 /* rev is added */
    unsigned writing:1;                 /* wev is added */
    unsigned connected:1;
};

/* Kinds of in-flight entries. */
enum kr_inflight_kind {
    KR_INF_REQUEST = 0,                 /* a Kafka request */
    KR_INF_SASL_TOKEN                   /* a raw SASL token (after
                                           SaslHandshake v0) */
};

/*
 * One request waiting for its response.  Entries leave the FIFO in order
 * (an optional entry may leave from behind answered ones);
 * an entry with rq set is a request rules touched (src/kr_session.c,
 * "rules"): rq->ready says its response frame is built (answered by
 * krelay, or held, processed and maybe delayed) and waits in rq->out for
 * its turn.  Upstream responses match the oldest entry not ready.
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
    int64_t sent_ms;                    /* monotonic ms it was read */
    int64_t wait_ms;                    /* its own wait (TimeoutMs,
                                           MaxWaitMs, RebalanceTimeoutMs),
                                           0 for the others */
    struct kr_rq *rq;                   /* rule state (malloc'd), NULL for
                                           pass-through */
};

/* SASL state after a SaslHandshake. */
enum kr_sasl_mech {
    KR_SASL_NONE = 0,
    KR_SASL_PLAIN,                      /* one raw round trip */
    KR_SASL_SCRAM,                      /* two raw round trips */
    KR_SASL_OTHER                       /* opaque until the end */
};

/*
 * One session.  malloc'd by kr_session_new, linked into its worker's list
 * and freed only through kr_session_close.  Times ending in _ms / _at are
 * monotonic ms (kr_clock_timer_ms); sizes are bytes.
 */
struct kr_session {
    uint64_t id;                        /* c#ID in log lines */
    struct kr_worker *w;
    struct kr_group *g;                 /* its listener group */
    const struct kr_listener *l;        /* the listener it came in on */
    struct kr_conf_ref *cref;           /* its config: the worker's current
                                           one as of its last request */
    const struct kr_listener_conf *lc;  /* its [listener], in cref */
    struct kr_session *prev, *next;     /* the worker's list */

    struct kr_conn client;
    struct kr_conn up;
    struct kr_resolve *resolve;         /* pending upstream resolution */
    struct event *timer;                /* connect / request / idle */
    int64_t timer_at;                   /* deadline armed, 0 = none */

    /* client -> upstream */
    uint64_t req_remain;                /* bytes of the current request
                                           frame not yet forwarded */
    /* upstream -> client */
    uint64_t rsp_remain;
    uint64_t rsp_drop;                  /* bytes of a dropped response
                                           (to an Acks=0 Produce) still
                                           to discard */
    struct evbuffer *hold;              /* a held response payload */
    uint64_t stream_left;               /* streamed response: payload
                                           bytes not yet scanned (then:
                                           its tail, held) */
    struct kr_scan *scan;               /* its scanner (kr_scan.h),
                                           malloc'd at the first one */
    int16_t stream_key, stream_ver;     /* its ApiKey and ApiVersion */

    struct kr_inflight *fifo;           /* ring of fifo_cap entries */
    uint32_t fifo_cap, fifo_head, fifo_len;
    uint32_t fifo_opt;                  /* optional entries among fifo_len
                                           (not counted for max_inflight
                                           nor the request timeout) */
    int64_t head_since_ms;              /* when fifo[head] became head */
    int64_t started_ms;
    int64_t last_active_ms;             /* last client or upstream read */
    int64_t rsp_progress_ms;            /* last upstream read or client
                                           write: a response in the middle
                                           must keep moving */
    int64_t eof_ms;                     /* when the client closed its side */

    enum kr_sasl_mech sasl_mech;        /* from the SaslHandshake request */
    uint32_t sasl_tokens;               /* raw client tokens still to come */

    struct kr_rewrite_ctx rw;           /* rw.who = name */

    /* rules (issue 3) */
    struct kr_rule_mask rmask;          /* rules whose static matchers
                                           hold for this connection, for
                                           cref's ruleset */
    struct kr_clamp *clamps;            /* ApiVersions clamps (kr_api_max
                                           + 1), NULL until needed */
    struct kr_clamp *av;                /* the ranges of the last ApiVersions
                                           response of this connection's
                                           broker (kr_api_max + 1, min >
                                           max: not offered), NULL until
                                           one is seen with a clamp rule */
    struct evbuffer *rq_payload;        /* request frame being decided */
    uint32_t nready;                    /* FIFO entries with rq->ready */
    struct event *rtimer;               /* delayed responses, pauses */
    int64_t rtimer_at;                  /* armed for, 0 = none */
    int64_t paused_until_ms;            /* throttle enforce: no client
                                           reads before (monotonic ms) */
    uint64_t rng;                       /* fault probabilities */
    struct sockaddr_storage peer;       /* client address */
    char peer_host[48];
    uint16_t peer_port;
    char client_id[64];                 /* last ClientId seen (audit) */
    unsigned audited:1;                 /* open line written */
    unsigned enforce_wait:1;            /* a throttled (enforce) request
                                           is in flight: read no further
                                           request until it is answered,
                                           as a broker mutes the channel */
    int depth;                          /* callbacks on the stack */
    unsigned dead:1;                    /* closed, freed at depth 0 */
    unsigned seen_first:1;              /* first client frame checked */
    unsigned req_blocked:1;             /* max_inflight reached */
    unsigned opaque:1;                  /* unknown SASL: raw bytes */
    unsigned draining:1;                /* upstream gone, flushing client */
    unsigned client_eof:1;              /* client closed its side: finish
                                           forwarding, then close */
    unsigned up_shut:1;                 /* shutdown(SHUT_WR) sent upstream */
    unsigned want_rsp_first:1;          /* a SaslHandshake v0 was forwarded:
                                           no further request is parsed
                                           until its response says whether
                                           raw SASL tokens follow */
    unsigned acks0_answered:1;          /* upstream answered an Acks=0
                                           Produce (logged once) */
    unsigned acks0_silent:1;            /* upstream skipped one, as Kafka
                                           does: no optional entries */
    unsigned streaming:1;               /* a response is being streamed
                                           (kr_rewrite_streamable) */
    unsigned closing:1;                 /* close after the responses owed:
                                           no request is forwarded any
                                           more (what the client sends is
                                           discarded); once every response
                                           owed reached the client, close
                                           logging close_msg */
    int close_level;                    /* its log level */
    int64_t closing_ms;                 /* closing set, or the last byte
                                           written to the client since */
    char close_msg[256];
    char name[160];                     /* "c#7 127.0.0.1:50312 > NodeId 2" */
    char upname[80];                    /* upstream "HOST:PORT" */
    /* issue 4 (appended) */
    struct kr_splice dn;                /* upstream -> client */
    struct kr_splice upl;               /* client -> upstream */
    uint64_t client_outq;               /* bytes unsent in the client's
                                           socket (SIOCOUTQ) when krelay
                                           last left bytes waiting for it
                                           (its buffer full) */
    /* issue 13 (appended) */
    bool *enforced;                     /* ApiVersions: APIs an enforcing
                                           rule could match (kr_api_max +
                                           1), NULL until needed */
    uint64_t acks0_forgot;              /* optional entries forgotten past
                                           max_inflight before the upstream
                                           showed whether it answers them */
    unsigned fetch_stale:1;             /* the config changed since this
                                           connection's last full Fetch:
                                           an incremental one may hide
                                           partitions from new topic rules
                                           (fetch_session_stale) */
    unsigned undecodable_logged:1;      /* the one diagnostic line for a
                                           frame only observing rules
                                           wanted decoded was written */
};

/*
 * Start a session for an accepted client socket fd (nonblocking; the
 * session owns it from now on, also on failure).  Opens the upstream
 * connection.  Returns KR_OK or KR_ENOMEM (fd closed, logged).  The
 * session may already be closed when this returns (upstream unknown).
 */
int kr_session_new(struct kr_worker *w, struct kr_group *g,
                   const struct kr_listener *l, evutil_socket_t fd,
                   const struct sockaddr *sa, socklen_t salen);

/*
 * The one close path: log fmt at level with the session's prefix, close
 * both sockets, cancel everything pending, unlink from the worker and free
 * (at once, or when the callbacks on the stack return).  Idempotent.
 */
void kr_session_close(struct kr_session *s, int level, const char *fmt,
                      ...) KR_PRINTF(3, 4);

#endif /* KR_SESSION_H */
