/*
 * kr_proxy.h - the daemon: one event_base with its evdns base, the
 * upstreams, the listener groups and their sessions, signals, start and
 * stop.
 *
 * A kr_proxy is one worker: everything it owns lives on its event_base
 * and nothing in it is process-global, so several worker threads will be
 * several kr_proxy instances (listeners then bound with SO_REUSEPORT).
 * Signals (kr_proxy_run) belong to the main worker only.
 *
 * Config: the proxy and every session hold a reference (struct
 * kr_conf_ref) to the config they started with, so a future reload swaps
 * the proxy's reference while old sessions keep theirs.
 */
#ifndef KR_PROXY_H
#define KR_PROXY_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "kr_common.h"
#include "kr_conf.h"
#include "kr_conn.h"
#include "kr_listener.h"
#include "kr_rewrite.h"

struct kr_upstream;
struct kr_session;
struct kr_audit;

/* A reference-counted config. */
struct kr_conf_ref {
    struct kr_conf *conf;
    int refs;
    bool owned;                         /* kr_conf_free at the last unref */
};

/* Take one more reference to r (not NULL); returns r.  No locking. */
struct kr_conf_ref *kr_conf_ref_get(struct kr_conf_ref *r);
/*
 * Drop one reference; at the last one, free r (and its conf when owned).
 * NULL is a no-op.
 */
void kr_conf_ref_put(struct kr_conf_ref *r);

/*
 * Counters of one proxy (admin/metrics endpoint later).  Plain integers:
 * a proxy runs on one thread.
 */
struct kr_stats {
    uint64_t conn_accepted;             /* client connections accepted */
    uint64_t conn_refused;              /* over max_connections */
    uint64_t conn_active;               /* sessions open now */
    uint64_t close_client;              /* client closed */
    uint64_t close_bad_input;           /* client sent bad input */
    uint64_t close_upstream;            /* upstream failed or closed */
    uint64_t close_timeout;             /* connect/request/idle timeout */
    uint64_t close_other;
    uint64_t requests;                  /* request frames forwarded */
    uint64_t responses;                 /* response frames forwarded */
    uint64_t requests_acks0;            /* Produce with Acks=0 */
    uint64_t responses_held;            /* responses held and rewritten */
    uint64_t responses_streamed;        /* responses forwarded as they
                                           arrived, only their tail held
                                           (kr_rewrite_streamable) */
    uint64_t endpoints_dropped;         /* streamed responses whose
                                           endpoint fields did not fit
                                           the frame and were dropped */
    uint64_t sasl_tokens;               /* raw SASL frames passed */
    uint64_t requests_refused;          /* issue 13: never forwarded, krelay
                                           cannot decode them and an
                                           enforcing rule could match; the
                                           connection was closed */
    uint64_t frames_undecodable;        /* issue 13: frames only observing
                                           rules wanted decoded that did
                                           not decode (forwarded as they
                                           were) */
    uint64_t bytes_up;                  /* client -> upstream bytes */
    uint64_t bytes_down;                /* upstream -> client bytes */
    uint64_t requests_internal;         /* krelay's own requests on a
                                           client's upstream connection
                                           (KR_INF_INTERNAL) */
    uint64_t responses_internal;        /* their responses, taken by
                                           krelay (never forwarded) */
    uint64_t responses_dropped;         /* responses to Produce with
                                           Acks=0 (a broker that answers
                                           them), not passed on */
    uint64_t bytes_spliced;             /* forwarded bytes moved socket
                                           to socket by splice(2), never
                                           in user space (included in
                                           bytes_up / bytes_down) */
    uint64_t bytes_copied;              /* debug (issue 4): forwarded
                                           bytes copied in user space on
                                           the cut-through path, by
                                           krelay or by libevent for it
                                           (evbuffer_remove_buffer
                                           copying the part of a chain
                                           before a frame boundary it
                                           splits); header peeks into a
                                           scratch buffer are reads, not
                                           forwarded bytes, and are not
                                           counted.  Held (rewritten)
                                           frames are re-encoded and not
                                           counted either */
};

/* One [listener] section: a bootstrap listener + one per NodeId. */
struct kr_group {
    struct kr_proxy *p;
    const struct kr_listener_conf *lc;  /* in p->cref's config */
    struct kr_upstream *up;             /* shared with other groups */
    struct kr_listener *listeners;      /* [0] bootstrap, [1 + n -
                                           node_id_min] NodeId n */
    int nlisteners;
    int64_t nconn;                      /* open sessions */
    bool removed;                       /* a reload dropped its section:
                                           listeners closed, freed with
                                           its last session */
    struct kr_conf_ref *cref;           /* removed: keeps lc valid */
};

/*
 * One worker (see the top of this file).  Created by kr_proxy_new, freed
 * by kr_proxy_free, which releases everything below (base only when
 * own_base).  Sessions update stats and the sessions list; all on
 * the proxy's event_base thread.
 */
struct kr_proxy {
    struct event_base *base;
    bool own_base;                      /* kr_proxy_free frees base */
    struct evdns_base *dns;
    struct kr_conf_ref *cref;
    struct kr_upstream **ups;           /* one per [upstream] */
    int nups;
    struct kr_group **groups;           /* one per [listener], each
                                           malloc'd (sessions point at
                                           them across reloads) */
    int ngroups;
    struct kr_session *sessions;        /* list of open sessions */
    struct event *sigev[4];             /* TERM, INT, HUP, USR1 */
    uint8_t *scratch;                   /* KR_FRAME_PEEK_MAX + 4 bytes
                                           for header peeks */
    struct kr_stats stats;
    uint64_t next_id;
    bool started, stopping;
    /* issue 3 (appended) */
    struct kr_audit *audit;             /* [audit] sink, NULL when none */
    struct kr_conf_ref *cref0;          /* the config the upstreams were
                                           built from (they keep pointers
                                           into it): held until free */
    struct kr_group **old_groups;       /* groups removed by reloads,
                                           freed when their last session
                                           ends (or at free) */
    int nold_groups;
    uint64_t reloads, reloads_refused;  /* kr_proxy_reload counts */
    int log_verbose;                    /* -v count, added to a reloaded
                                           [log] level */
    struct event *rl_timer;             /* 1 s: kr_log_rl_flush */
    /* issue 4 (appended) */
    struct kr_pipe_pool pipes;          /* splice(2) pipes (kr_conn.h) */
};

/*
 * A proxy for conf on base (NULL: create and own one).  With own_conf
 * the proxy frees conf (kr_conf_free) when the last reference goes.
 * Returns NULL on ENOMEM.  Nothing is bound yet.
 */
struct kr_proxy *kr_proxy_new(struct kr_conf *conf, bool own_conf,
                              struct event_base *base);

/*
 * Create the evdns base and the upstreams, call kr_rewrite_init, bind
 * every listener.  Returns KR_OK, or KR_ERROR with a message in err
 * (everything bound so far is closed again).
 */
int kr_proxy_start(struct kr_proxy *p, char *err, size_t errlen)
    KR_MUST_CHECK;

/*
 * Run the event loop with SIGTERM/SIGINT (stop), SIGHUP and SIGUSR1
 * (reopen the log) handled, until kr_proxy_stop.  Returns KR_OK.
 */
int kr_proxy_run(struct kr_proxy *p);

/*
 * Close the listeners and every session, free the upstreams, and break
 * the loop.  Safe from any callback on the proxy's base; idempotent.
 */
void kr_proxy_stop(struct kr_proxy *p);

/*
 * Reread the config from path (SIGHUP).  A valid one replaces, for new
 * requests on existing connections too, the rules, the log target and
 * level, the audit sink and the per-listener limits; listeners are
 * opened and closed as configured (a listener section is kept when its
 * name, listen address and broker ports are unchanged); existing
 * connections stay open.  New listeners are bound before any running one
 * is touched, and a socket on an unchanged address is handed over, not
 * bound again; if a bind fails only the new sockets are closed and the
 * reload is refused.  [upstream] changes need a restart (logged).
 * An invalid config is refused: every error is logged as FILE:LINE and
 * the old config stays.  Returns KR_OK or KR_ERROR.
 */
int kr_proxy_reload(struct kr_proxy *p, const char *path);

/*
 * A session of group g ended (g->nconn already decremented): frees a
 * group a reload removed once its last session is gone.
 */
void kr_proxy_group_release(struct kr_group *g);

/* Reopen the log and the audit file (SIGUSR1, and SIGHUP). */
void kr_proxy_reopen(struct kr_proxy *p);

/*
 * Stop (if needed) and free everything: groups, upstreams, evdns base,
 * config references, the base too when owned.  NULL is a no-op.
 */
void kr_proxy_free(struct kr_proxy *p);

/*
 * The bound port of group gi's listener for node_id (KR_NODE_BOOTSTRAP
 * for the bootstrap listener), 0 when there is none.
 */
uint16_t kr_proxy_port(const struct kr_proxy *p, int gi, int32_t node_id);

#endif /* KR_PROXY_H */
