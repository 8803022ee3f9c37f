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
 * Everything runs on the event_base of the session's worker (one per
 * worker thread); a session is never touched from another thread.
 */
#ifndef KR_SESSION_H
#define KR_SESSION_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "kr_audit.h"
#include "kr_common.h"
#include "kr_conn.h"
#include "kr_frame.h"
#include "kr_inflight.h"
#include "kr_rewrite.h"
#include "kr_rule.h"
#include "kr_sasl.h"

struct kr_stats;
struct kr_audit;
struct kr_group;
struct kr_listener;
struct kr_conf_ref;
struct kr_resolve;
struct kr_rq;
struct kr_s_rsp_stream;
struct kr_s_req_stream;
struct kr_s_sw;
struct kr_scan;
struct kr_pp;

/*
 * What a session uses of the worker that runs it: the worker's event loop
 * and services, by pointer (kr_worker.h fills one per worker and keeps it
 * as long as any of its sessions lives).  A session sees no more of its
 * worker than this, so the session layer does not depend on the one
 * above it.  All on the worker's thread.
 */
struct kr_session_host {
    struct event_base *base;
    struct kr_conf_ref *const *cref;    /* the current config (a reload
                                           swaps it) */
    struct kr_audit *const *audit;      /* the current audit sink, or
                                           NULL */
    uint8_t *scratch;                   /* KR_FRAME_PEEK_MAX + 4 bytes for
                                           header peeks */
    struct evbuffer *hold;              /* empty between callbacks: a
                                           response frame held while it is
                                           looked at (kr_s_hold_take), one
                                           for the worker's sessions, not
                                           one each */
    bool hold_busy;                     /* hold is taken */
    struct kr_session **sessions;       /* the list of open sessions */
    struct kr_pipe_pool *pipes;         /* splice(2) pipes */
    struct kr_stats *stats;             /* the worker's counters */
    _Atomic uint64_t *ids;              /* session ids (unique in the
                                           process) */
    int worker;                         /* the worker's index: W of
                                           "c#W.N" */
    uint64_t *seq;                      /* its accepted connections so
                                           far: N of "c#W.N" (the worker's
                                           thread only) */
    void (*group_release)(struct kr_group *g); /* a session of g ended
                                           (g->nconn already decremented) */
    struct kr_legacy_refusal {          /* issue 10: client addresses
                                           lately refused a version the
                                           brokers no longer accept
                                           (translate_legacy off), by a hash
                                           of the address: direct-mapped,
                                           a collision forgets one */
        uint64_t addr_hash;
        int64_t at_ms;                  /* monotonic ms; 0: empty */
    } legacy_refused[64];
    const struct kr_conn_ops *conn_ops; /* the transport of new
                                           connections, NULL: plain TCP
                                           (the tests set one that injects
                                           faults, tests/unit/
                                           kr_fault_xprt.h) */
};

/*
 * One session.  malloc'd by kr_session_new, linked into its worker's list
 * and freed only through kr_session_close.  Times ending in _ms / _at are
 * monotonic ms (kr_clock_timer_ms); sizes are bytes.
 */
struct kr_session {
    uint64_t id;                        /* unique in the process (the
                                           fault rng's seed) */
    char conn_id[32];                   /* "c#W.N": log lines and audit
                                           lines (doc/audit.md) */
    struct kr_session_host *host;       /* its worker's services */
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
    uint64_t stream_left;               /* streamed response: payload
                                           bytes not yet scanned (then:
                                           its tail, held) */
    struct kr_s_rsp_stream *rsp_st;     /* its scanner and, for its
                                           audit line, its request's state
                                           (kr_session_int.h; malloc'd at
                                           the first one, then kept) */
    int16_t stream_key, stream_ver;     /* its ApiKey and ApiVersion */

    struct kr_inflight_fifo fifo;       /* requests owed a response */
    int64_t started_ms;
    int64_t last_active_ms;             /* last client or upstream read */
    int64_t rsp_progress_ms;            /* last upstream read or client
                                           write: a response in the middle
                                           must keep moving */
    int64_t eof_ms;                     /* when the client closed its side */

    struct kr_sasl sasl;                /* the client's SASL exchange */

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
    struct evbuffer *rq_payload;        /* request frame being decided
                                           (made at the first; NULL) */
    uint32_t nready;                    /* FIFO entries with rq->ready */
    struct event *rtimer;               /* delayed responses, pauses
                                           (made when first armed) */
    int64_t rtimer_at;                  /* armed for, 0 = none */
    int64_t paused_until_ms;            /* throttle enforce: no client
                                           reads before (monotonic ms) */
    uint64_t rng;                       /* fault probabilities */
    union {                             /* client address (TCP: IPv4 or
                                           IPv6) */
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
    char peer_host[48];
    uint16_t peer_port;
    char client_id[KR_FRAME_CLIENT_ID_MAX + 1]; /* the last non-null
                                           ClientId the client sent (its
                                           printable prefix, kr_req_hdr),
                                           kept while there is an audit
                                           sink: close lines */
    unsigned client_id_cut:1;           /* client_id is a prefix of a
                                           longer ClientId */
    unsigned audited:1;                 /* open line written */
    unsigned enforce_wait:1;            /* a throttled (enforce) request
                                           is in flight: read no further
                                           request until it is answered,
                                           as a broker mutes the channel */
    int depth;                          /* callbacks on the stack */
    unsigned dead:1;                    /* closed, freed at depth 0 */
    unsigned req_blocked:1;             /* max_inflight reached */
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
    char *close_msg;                    /* why it closes (malloc'd by
                                           kr_s_close_after_owed, at most
                                           KR_CLOSE_MSG_LEN bytes); NULL:
                                           not closing, or out of memory */
    char name[160];                     /* "c#0.7 127.0.0.1:50312 > NodeId
                                           2" */
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
    struct kr_an_legacy_conf *legacy_conf; /* issue 10: the listener's
                                           legacy translation as the
                                           pipeline takes it (malloc'd on
                                           first use, kr_session_rules.c) */
    bool fetch_stale;                   /* no full Fetch on this
                                           connection since it opened or
                                           the config changed: an
                                           incremental one may continue a
                                           session begun before new topic
                                           rules (fetch_session_stale) */
    unsigned undecodable_logged:1;      /* the one diagnostic line for a
                                           frame only observing rules
                                           wanted decoded was written */
    /* issue 14: the audit log (appended) */
    unsigned up_named:1;                /* upname is the upstream's
                                           host:port (resolved) */
    uint32_t legacy_turn;               /* issue 10 (here: the bitfields'
                                           hole): translated Fetches on
                                           this connection (the rotation
                                           of their partitions,
                                           kr_legacy_fetch_rotate) */
    uint64_t nrequests;                 /* request frames read (SASL
                                           tokens not counted) */
    int64_t started_us;                 /* monotonic µs, accepted */
    struct kr_s_sw *sw;                 /* KIP-511 software names of its
                                           last ApiVersions v3+ (a
                                           reference; NULL: none) */
    struct kr_audit_memo *audit_memo;   /* its audit lines' peer keys as
                                           rendered (kr_audit_memo_new at
                                           its first line; NULL: none) */
    unsigned stream_rewrite:1;          /* its tail is rewritten
                                           (kr_rewrite_streamable); else
                                           the tail passes as it is */
    /* a Produce request streamed for its audit line (kr_s_rstream_*):
       it goes cut-through (req_remain) while req_st's scanner walks it */
    unsigned rstream:1;                 /* under way */
    unsigned rstream_own:1;             /* req_st->req is the session's
                                           (Acks=0: no entry holds it) */
    struct kr_s_req_stream *req_st;     /* its scanner and state
                                           (kr_session_int.h; malloc'd at
                                           the first use, then kept; NULL
                                           before) */
    /* issue 8: TLS (appended) */
    unsigned client_tls:1;              /* the client speaks TLS (a
                                           listener with ssl): the upstream
                                           is dialled once its handshake
                                           is done, within
                                           ssl_handshake_timeout_ms */
    int64_t up_started_ms;              /* the upstream's resolution began
                                           (connect_timeout_ms from it) */
    char *principal;                    /* what rules and audit lines see:
                                           SASL's verified principal
                                           (issue 9; it replaces an mTLS
                                           one, as on a SASL_SSL broker),
                                           else mTLS: "User:" and the verified
                                           client certificate's subject
                                           as Kafka writes it, through
                                           the listener's mapping rules
                                           (malloc'd, set once after the
                                           handshake, kept across
                                           reloads); NULL: none */
    int32_t node_id;                    /* its route: the listener's
                                           (KR_NODE_BOOTSTRAP or a NodeId),
                                           or with SNI routing the one the
                                           client's SNI name chose once
                                           its handshake is done */
    /* issue 9: SASL passthrough (appended) */
    unsigned principal_unknown:1;       /* SASL authenticated the client
                                           as a principal krelay cannot
                                           know (GSSAPI...): principal is
                                           NULL, and rules naming
                                           principals fail closed
                                           (kr_rule_conn_mask_unknown) */
    /* issue 9: SASL origination (kr_session_sasl.c; appended) */
    struct kr_s_orig *orig;             /* the upstream's sasl_mechanism
                                           is set: krelay authenticates
                                           this upstream connection
                                           itself; NULL: it does not */
    unsigned orig_hold:1;               /* no client request goes on:
                                           krelay authenticates (or
                                           re-authenticates) the upstream
                                           connection first */
    /* issue 9: SASL termination (kr_session_saslterm.c; appended) */
    struct kr_sasl_srv *sasl_srv;       /* the listener had sasl =
                                           terminate when the client
                                           connected: krelay authenticates
                                           it (malloc'd; its cfg follows
                                           reloads, NULL once the listener
                                           no longer terminates), else
                                           NULL */
    unsigned up_after_auth:1;           /* sasl = terminate: no upstream
                                           connection until the client's
                                           first SASL authentication
                                           succeeded (kr_s_up_start); its
                                           ApiVersions is answered by
                                           krelay until then */
    /* issue 12: the PROXY protocol (appended) */
    struct kr_pp *pp;                   /* stage KR_STAGE_PROXY: the
                                           header's parser (malloc'd at
                                           accept on a listener with
                                           proxy_protocol, freed once the
                                           header is done); else NULL */
    char *proxy_host;                   /* proxied: the socket's peer's
                                           address (the proxy's; peer
                                           being the client the header
                                           named), malloc'd; else NULL */
    uint16_t proxy_port;                /* ... and its port */
    unsigned proxied:1;                 /* a PROXY header named the client
                                           (not UNKNOWN nor LOCAL) */
    /* issue 10: krelay's own ApiVersions (kr_session_av.c; appended) */
    unsigned av_asked:1;                /* asked once on this connection */
    unsigned av_hold:1;                 /* no client request goes on until
                                           its answer is in av */
    unsigned av_sent:1;                 /* in up.out (else av_timer tries
                                           again) */
    struct event *av_timer;             /* NULL until needed */
    int64_t av_asked_ms;                /* sent (kr_clock_timer_ms) */
    /* issue 10: a close after the responses owed held (kr_s_close_hold:
       an Acks=0 refusal for a client retrying in a loop; appended) */
    unsigned close_holding:1;           /* held now: the close waits for
                                           close_hold_until_ms, nothing
                                           is read from the client */
    int64_t close_hold_since_ms;        /* held from */
    int64_t close_hold_until_ms;        /* until (the timer ends it:
                                           T_CLOSE_HOLD), once ended when
                                           it ended (a drain ends it
                                           early) */
    const char *close_hold_why;         /* why, for the close line (a
                                           static string); NULL: never
                                           held */
    /* issue 10: a translated Produce's rounds going up one at a time
       (kr_session_rounds.c; appended) */
    struct kr_s_rounds *rounds;         /* set while they do: no client
                                           request goes on (as av_hold),
                                           the client's own request waits
                                           in it; NULL: none */
};

/*
 * Start a session for an accepted client socket fd (nonblocking; the
 * session owns it from now on, also on failure).  Opens the upstream
 * connection (on a listener with sasl = terminate: once the client has
 * authenticated).  Returns KR_OK or KR_ENOMEM (fd closed, logged).  The
 * session may already be closed when this returns (upstream unknown, its
 * transport could not be set up).
 */
int kr_session_new(struct kr_session_host *host, struct kr_group *g,
                   const struct kr_listener *l, evutil_socket_t fd,
                   const struct sockaddr *sa, socklen_t salen);

/*
 * Called with the response to an internal request (kr_session_internal_
 * request): payload holds the whole frame without its size prefix
 * (borrowed for the call; drain what you keep).  payload is NULL when the
 * session closes before the response came (s is being freed then: read
 * nothing from it).  The callback may close the session.
 */
/* The CorrelationId of krelay's own ApiVersions on a client's upstream
   connection (issue 10, kr_session_av.c): "KRAV", far from a client's
   and from SASL origination's (0x4b520000 up). */
#define KR_SESSION_AV_CORR 0x4b524156

typedef void (*kr_session_internal_cb)(struct kr_session *s, void *arg,
                                       int16_t api_key, int16_t api_version,
                                       struct evbuffer *payload);

/*
 * Send krelay's own request on s's upstream connection (SASL
 * origination, learning the broker's ApiVersions when the client sent
 * none): frame is the request payload without its size prefix (len bytes,
 * copied), with ApiKey api_key, ApiVersion api_version and CorrelationId
 * correlation_id in its header.  It goes after what the client sent so
 * far, as an in-flight entry of kind KR_INF_INTERNAL: its response is
 * handed to cb(s, arg, ...) and never reaches the client; the client's
 * responses keep their order around it.  Returns KR_OK (queued; written
 * when the socket allows); KR_AGAIN when s is not between two request
 * frames now (a frame is half forwarded, raw SASL tokens are flowing, a
 * SaslHandshake v0 awaits its answer, or s is closing): try again after
 * the next request; KR_ENOMEM.  cb is not called when this fails.
 */
int kr_session_internal_request(struct kr_session *s, const uint8_t *frame,
                                size_t len, int16_t api_key,
                                int16_t api_version, int32_t correlation_id,
                                kr_session_internal_cb cb, void *arg)
    KR_MUST_CHECK;

/*
 * The one close path: log fmt at level with the session's prefix, close
 * both sockets, cancel everything pending, unlink from the worker and free
 * (at once, or when the callbacks on the stack return).  Idempotent.
 */
void kr_session_close(struct kr_session *s, int level, const char *fmt,
                      ...) KR_PRINTF(3, 4);

/*
 * krelay drains (SIGTERM; the operations issue): s forwards no further
 * request (what the client sends from now on, and a request krelay has
 * not begun to forward, is read and discarded: the client sees the
 * connection close after its answered requests and sends them again
 * elsewhere), delivers the responses owed, then closes (logged at info).
 * A session with nothing owed closes now.  One closing already keeps its
 * reason, but a hold on its close (an Acks=0 refusal of a client
 * retrying in a loop, issue 10) ends now.  Not from s's own callbacks.
 * Returns -1 when s was closed (freed), else 0.
 */
int kr_session_drain(struct kr_session *s);

/*
 * The name s's listener goes by where krelay reports connections (audit
 * lines' "listener", GET /connections): its [listener NAME], or "default"
 * for the unnamed one (doc/audit.md).  Static storage or s's config
 * generation's: valid while s lives.  Never NULL.
 */
const char *kr_session_listener_name(const struct kr_session *s);

#endif /* KR_SESSION_H */
