/*
 * kr_worker.h - one event loop: accepting, the sessions, their counters,
 * the splice pipes and the scratch buffer, the listener groups, the
 * upstreams.
 *
 * A kr_worker lives on one event_base and is touched only by the thread
 * that runs that base (the sessions too: kr_session.h).  The process part
 * (kr_daemon.h) creates workers, hands each the config and the sockets to
 * accept on, and fans reloads out to them.  krelay runs [process] workers
 * = N of them (default: the CPUs it may run on): worker 0 on the daemon's
 * own event_base and thread, workers 1..N-1 each on a base and a thread
 * of its own ("krelay-w1"..., kr_daemon_spawn_workers), started after -d
 * forked and after the privilege drop; reloads, the drain and the stop
 * reach those through their mailbox (kr_worker_post).  The unit tests
 * also run workers on threads of their own (tests/unit/check_worker.c).
 *
 * What a worker uses that is not its own, and how it is safe to share:
 *   log       process-wide (kr_log.h): one write(2) per line under a
 *             read lock; the level kr_log_level_cur is an atomic int
 *             written by the daemon at reload; rate-limit sites are
 *             static structs updated with atomics.  Shared.
 *   audit     one sink for the process (kr_audit.h: a lock-free ring
 *             per writing thread, drained by the sink's writer thread; a
 *             worker's first line takes the sink's mutex once to find its
 *             ring).  Shared; each worker holds
 *             a reference (struct kr_audit_ref, atomic count) to the sink
 *             of its current generation, so a reload that replaces the
 *             sink closes the old one only when the last worker let go.
 *   config    struct kr_conf_ref, counted atomically: the daemon, each
 *             worker (its current one) and each session (the one of its
 *             last request) hold references; the last put frees it, on
 *             whichever thread.  The config itself (rules compiled into
 *             it) is read-only once loaded.
 *   NodeId resolution, learned Metadata, the TopicId map
 *             shared, read-mostly (issue 12): one struct kr_cluster per
 *             [upstream] for the process (kr_cluster.h), made by the
 *             daemon and handed to every worker in its generation
 *             (kr_wgen.clusters).  Each worker keeps its own evdns base
 *             and its own kr_upstream per [upstream] (single-thread:
 *             dial overrides, resolved addresses, pending resolutions,
 *             the fetch connection), which publishes the brokers,
 *             TopicIds and ApiVersions ranges it learns into the cluster
 *             (writers serialise on its mutex, a new immutable snapshot
 *             and generation per change) and merges what other workers
 *             published before it answers: a per-worker cached snapshot
 *             and one atomic load of the generation per read, no lock
 *             on the read side.  So a NodeId one worker learned is
 *             resolved by all at once, and a periodic fetch is done by
 *             one worker for the process (a claim in the cluster; the
 *             others skip while it is recent or under way).  A reload
 *             that changes an [upstream]'s NEWCONN keys (kr_conf.h)
 *             gives it a new cluster and each worker a new kr_upstream
 *             for new connections; sessions hold a reference to theirs
 *             (kr_upstream_ref) until they end.
 *   tables    kr_rewrite's masks and the kr_topics walk table are built by
 *             kr_daemon_start before any worker exists, then only read.
 *   counters  per worker (struct kr_stats, kr_stats.h): written by the
 *             worker's thread only, readable from any thread.
 *   calls     kr_worker_call: any thread queues a function for the
 *             worker's loop (a mutex and an eventfd, on every worker);
 *             the admin endpoint (kr_admin.h) asks about sessions and
 *             upstreams this way, never reading them itself.
 *   session ids
 *             "c#W.N" in log and audit lines: W the worker's index (the
 *             daemon numbers its workers from 0), N the worker's own count
 *             of connections: unique in the process, nothing shared.  (One
 *             atomic counter in the daemon also numbers sessions for the
 *             fault rng's seed.)
 *
 *   throttle  per worker: throttle_mode = enforce delays a client by
 *             its own connection's state (as a broker's quota does per
 *             connection's channel), so nothing is shared.  What is
 *             counted per worker (a listener's max_connections, the
 *             legacy refusal delay's window) holds per worker: N workers
 *             let through up to N times what one would (as N krelay
 *             instances would); krelay.ini(5) and the README say so.
 *
 * Listening sockets: one per worker and address, SO_REUSEPORT.  The
 * daemon binds, once at start (before the privilege drop: ports below
 * 1024), a set of sockets per worker (struct kr_lset): set 0 first, each
 * address of it probed with a plain bind (no SO_REUSEPORT) and then bound
 * with SO_REUSEPORT; sets 1..N-1 join each group at set 0's actual port
 * (so port 0 gives every worker the same port).  Why the probe: a second
 * krelay of the same user on the same address would otherwise join the
 * group silently and take a share of the connections; the probe fails
 * with the usual "Address already in use" instead (a race of two krelays
 * starting in the same instant remains).  Worker k accepts on set k (the
 * worker on the daemon's thread on the descriptors themselves, the others
 * on duplicates), so each connection wakes one worker, and the kernel
 * spreads new connections over the sockets by a hash of their addresses
 * (an idle worker does not win them all, a busy one gets its share: its
 * queue waits for it).  Only the process closes a socket: at stop, or
 * when a reload removes its listener; a reload keeps every running
 * socket whose address stays (each set's socket handed to its worker's
 * new listener, accept queue and all), and a worker never closes the
 * socket itself, only its duplicate.  So no socket with connections
 * queued is closed while krelay runs, and net.ipv4.tcp_migrate_req (which
 * moves the queue of a closed SO_REUSEPORT socket to another) is not
 * needed; what waits in a queue at stop is reset, as with any listener
 * that closes.  During a drain every worker keeps accepting and closes
 * each new connection at once (conn_drain_closed): its write side is shut
 * (FIN) and what the client sends anyway (its ApiVersions, written before
 * it saw the FIN) is read and dropped until the client closes too, or for
 * KR_LINGER_MS, so the client sees an orderly end, never RST (a socket
 * closed with unread bytes, or receiving bytes after close, resets).  With one
 * worker there is one set, bound without SO_REUSEPORT.  A worker added
 * without sockets of its own (tests) attaches to set 0 as the others do.
 */
#ifndef KR_WORKER_H
#define KR_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "kr_common.h"
#include "kr_conf.h"
#include "kr_conn.h"
#include "kr_listener.h"
#include "kr_session.h"
#include "kr_rewrite.h"
#include "kr_stats.h"

struct kr_upstream;
struct kr_cluster;
struct kr_session;
struct kr_audit;
struct kr_verdict;

/* A reference-counted audit sink (the sink itself is thread-safe). */
struct kr_audit_ref {
    struct kr_audit *au;
    atomic_int refs;
};

/* A reference to au (refs 1), which it now owns; NULL on ENOMEM. */
struct kr_audit_ref *kr_audit_ref_new(struct kr_audit *au);
/* One more reference to r; returns r.  NULL is passed through. */
struct kr_audit_ref *kr_audit_ref_get(struct kr_audit_ref *r);
/*
 * Drop one reference; the last one closes the sink (kr_audit_close:
 * writes what is queued, joins its writer thread) and frees r.  Any
 * thread.  NULL is a no-op.
 */
void kr_audit_ref_put(struct kr_audit_ref *r);

/*
 * What one reload waits for: each worker's generation applied (or
 * dropped: kr_wgen_free of one never applied).  One count per generation
 * that carries it (kr_wdone_add, at kr_wgen.done) and one of the poster's
 * own, counted off once it has posted them all; the last count off runs
 * fn(applied, arg) on the thread that made it (a worker's, or the
 * poster's), applied being how many of the generations their worker
 * applied.  fn must not rely on anything but arg.
 */
typedef void (*kr_wdone_fn)(int applied, void *arg);

/* How a count of a kr_wdone ends. */
enum kr_wdone_end {
    KR_WDONE_POSTED,                    /* the poster's own: all posted */
    KR_WDONE_APPLIED,                   /* a generation its worker applied */
    KR_WDONE_DROPPED                    /* one never applied: freed */
};

struct kr_wdone {
    atomic_int left;                    /* counts not yet ended */
    atomic_int applied;                 /* KR_WDONE_APPLIED so far */
    kr_wdone_fn fn;
    void *arg;
};

/* A kr_wdone holding the poster's count.  NULL on ENOMEM. */
struct kr_wdone *kr_wdone_new(kr_wdone_fn fn, void *arg);
/* One more count, for a generation: gen->done = kr_wdone_add(d). */
struct kr_wdone *kr_wdone_add(struct kr_wdone *d);
/* End one count as end says; the last runs fn and frees d.  Any thread. */
void kr_wdone_end(struct kr_wdone *d, enum kr_wdone_end end);

/*
 * A generation: what the daemon hands a worker at start and at each
 * reload, or a stop.  The worker owns it once handed over (kr_worker_start,
 * kr_worker_apply, kr_worker_post) and frees it (kr_wgen_free).
 */
struct kr_wgen {
    struct kr_wgen *next;               /* the mailbox queue */
    bool stop;                          /* kr_worker_stop; nothing else
                                           is set */
    bool drain;                         /* kr_worker_drain; nothing else
                                           is set */
    struct kr_conf_ref *cref;           /* one reference, the worker's */
    struct kr_audit_ref *audit;         /* one reference, or NULL */
    struct kr_cluster **clusters;       /* issue 12: one reference per
                                           [upstream] of cref's config
                                           (kr_wgen_set_clusters), or
                                           NULL: the worker makes views
                                           of its own */
    int nclusters;
    int ngroups;                        /* cref->conf->nlisteners */
    struct kr_wgen_group {
        int keep;                       /* index of the running group
                                           that serves this section
                                           unchanged, or -1: a new one */
        struct kr_lsock *socks;         /* new: one per listener of the
                                           section, malloc'd; their fds
                                           are what to accept on */
        int nsocks;
        bool own;                       /* the fds are duplicates the
                                           worker owns (else the
                                           daemon's, borrowed) */
    } *g;                               /* ngroups, malloc'd */
    struct kr_wdone *done;              /* a reload's: one count, ended
                                           by kr_wgen_free (NULL: none) */
    bool applied;                       /* kr_worker_apply applied it
                                           (how kr_wgen_free ends done's
                                           count) */
};

/*
 * A generation with ngroups sections (every keep -1, no sockets), taking
 * over cref's and audit's references.  NULL on ENOMEM (the references
 * are then still the caller's).
 */
struct kr_wgen *kr_wgen_new(struct kr_conf_ref *cref,
                            struct kr_audit_ref *audit, int ngroups);
/*
 * Give gen a reference to each of the n cluster views cl (the daemon's,
 * one per [upstream] of gen's config, in its order).  KR_OK, or KR_ERROR
 * on ENOMEM (gen unchanged).
 */
int kr_wgen_set_clusters(struct kr_wgen *gen, struct kr_cluster **cl, int n)
    KR_MUST_CHECK;
/* Free gen: its references, its sockets' owned fds, its count of done
   (applied or dropped).  NULL is a no-op. */
void kr_wgen_free(struct kr_wgen *gen);

/*
 * One worker (see the top of this file).  Created by kr_worker_new,
 * freed by kr_worker_free.  The sessions update stats, sessions and the
 * pipes; all on the worker's thread.
 */
struct kr_worker {
    struct event_base *base;            /* borrowed, not freed */
    int index;                          /* 0..: its place in the daemon */
    struct evdns_base *dns;
    struct kr_conf_ref *cref;           /* current config */
    struct kr_audit *audit;             /* current sink (audit_ref's),
                                           NULL when none */
    struct kr_audit_ref *audit_ref;
    struct kr_upstream **ups;           /* one per [upstream] of cref's
                                           config, a reference each (an
                                           upstream a reload replaced
                                           lives on in its sessions') */
    int nups;
    struct kr_group **groups;           /* one per [listener], each
                                           malloc'd (sessions point at
                                           them across reloads) */
    int ngroups;
    struct kr_group **old_groups;       /* groups removed by reloads,
                                           freed when their last session
                                           ends (or at free) */
    int nold_groups;
    struct kr_session *sessions;        /* list of open sessions */
    uint8_t *scratch;                   /* KR_FRAME_PEEK_MAX + 4 bytes
                                           for header peeks */
    _Atomic uint64_t *ids;              /* session id counter (the
                                           daemon's, or own_ids) */
    _Atomic uint64_t own_ids;
    uint64_t seq;                       /* connections accepted: N of
                                           "c#W.N" (W is index) */
    bool started, stopping;
    bool draining;                      /* kr_worker_drain: new
                                           connections close at accept */
    atomic_bool drain_seen;             /* draining, for the daemon's
                                           thread: set (release) once w
                                           applied the drain */
    struct kr_linger *lingers;          /* connections closed at accept
                                           while draining, their FIN sent,
                                           read until the client's own
                                           (kr_worker.c) */
    int nlingers;
    /* mailbox (kr_worker_post): workers on a thread of their own */
    bool has_mailbox;
    pthread_mutex_t mb_lock;
    struct kr_wgen *mb_head, **mb_tail; /* queued, oldest first */
    int mb_fd;                          /* eventfd: something queued */
    struct event *mb_ev;
    /* calls from other threads (kr_worker_call): every worker */
    pthread_mutex_t call_lock;
    struct kr_wcall *call_head, **call_tail; /* queued, oldest first */
    bool calls_closed;                  /* stopped: kr_worker_call refuses */
    int call_fd;                        /* eventfd: a call queued */
    struct event *call_ev;
    struct kr_pipe_pool pipes;          /* splice(2) pipes (kr_conn.h) */
    struct kr_session_host host;        /* what its sessions see of it
                                           (pointers into this struct) */
    struct kr_stats stats;              /* kr_stats.h; large: last */
};

/*
 * A function to run on a worker's thread (kr_worker_call): w is the
 * worker, or NULL when the call is cancelled (the worker stopped or is
 * freed before it ran: then fn runs on the thread that stops or frees
 * it, only to release arg).
 */
typedef void (*kr_worker_call_fn)(struct kr_worker *w, void *arg);

/* A queued call (kr_worker.c). */
struct kr_wcall;

/*
 * A worker on base (borrowed: the caller runs and frees it).  index names
 * it; ids: the session id counter to share (NULL: its own).  mailbox:
 * the worker runs on another thread than the one that will reload and
 * stop it, so those come through kr_worker_post (an eventfd on base).
 * Returns NULL on ENOMEM.  Nothing is started yet.
 */
struct kr_worker *kr_worker_new(struct event_base *base, int index,
                                _Atomic uint64_t *ids, bool mailbox);

/*
 * Start w with its first generation gen (owned by w from now on, also on
 * failure): create its evdns base and the upstreams of gen's config, and
 * accept on gen's sockets.  Call on the thread that will run w's base,
 * or before that thread starts.  Returns KR_OK, or KR_ERROR with a
 * message in err (what was attached is closed again).
 */
int kr_worker_start(struct kr_worker *w, struct kr_wgen *gen, char *err,
                    size_t errlen) KR_MUST_CHECK;

/*
 * Apply a generation (owned by w from now on) on w's thread: sections
 * kept stay as they are with the new config, new ones accept on gen's
 * sockets, the others close their listeners (their sessions stay, each
 * logged once per worker).  The config and audit sink become gen's for
 * new sessions and for the next request of every running one.  A stop
 * generation stops w.  Never fails (a listener that cannot be attached,
 * out of memory, is logged); gen->applied says whether w took it (not
 * when stopping or out of memory: it keeps what it had).
 */
void kr_worker_apply(struct kr_worker *w, struct kr_wgen *gen);

/*
 * Queue gen (owned by w from now on) for w's thread, which applies it
 * (kr_worker_apply) from its loop.  Any thread; only for a worker made
 * with a mailbox.  Generations are applied in the order posted.
 */
void kr_worker_post(struct kr_worker *w, struct kr_wgen *gen);

/*
 * Run fn(w, arg) on w's thread, from its loop, soon (an eventfd wakes
 * it).  Any thread, for any worker (also one on the daemon's base), at
 * any time between kr_worker_new and kr_worker_free.  How the caller
 * waits for a result is its own business (the admin endpoint: a
 * condition variable with a deadline).  Returns KR_OK when queued (fn
 * runs exactly once: with w, or with NULL when w stops first), KR_ERROR
 * when w is stopping already or out of memory (fn is not called).  Calls
 * run in the order queued.
 */
int kr_worker_call(struct kr_worker *w, kr_worker_call_fn fn, void *arg)
    KR_MUST_CHECK;

/*
 * Close the listeners and every session, free the upstreams, cancel the
 * calls queued (kr_worker_call) and refuse new ones, and break w's loop.
 * On w's thread; idempotent.
 */
void kr_worker_stop(struct kr_worker *w);

/*
 * Drain w (SIGTERM): its listeners stay open (a connection waiting in an
 * accept queue is not reset) but each connection accepted from now on is
 * closed at once with FIN, never RST (counted: conn_drain_closed; see
 * "Listening sockets" above); every session forwards no
 * further request and closes once the responses it owes are delivered
 * (kr_session_drain).  conn_active reaches 0 when the drain is done; the
 * daemon watches it and stops w then (or at its drain timeout).  On w's
 * thread; idempotent.
 */
void kr_worker_drain(struct kr_worker *w);

/*
 * Stop (if needed) and free w with everything it holds (not its base).
 * On w's thread, or after that thread ended.  NULL is a no-op.
 */
void kr_worker_free(struct kr_worker *w);

/* A new session id (unique in the process).  w's thread. */
static inline uint64_t
kr_worker_next_id(struct kr_worker *w)
{
    return atomic_fetch_add_explicit(w->ids, 1, memory_order_relaxed) + 1;
}

/*
 * A session of group g ended (g->nconn already decremented): frees a
 * group a reload removed once its last session is gone.
 */
void kr_worker_group_release(struct kr_group *g);

/*
 * The port w accepts on for group gi's listener of node_id
 * (KR_NODE_BOOTSTRAP for the bootstrap listener), 0 when there is none.
 * w's thread (or while it does not run).
 */
uint16_t kr_worker_port(const struct kr_worker *w, int gi, int32_t node_id);

#endif /* KR_WORKER_H */
