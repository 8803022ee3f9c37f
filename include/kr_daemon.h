/*
 * kr_daemon.h - the process part: what exists once per process.
 *
 * Signals (SIGTERM, SIGINT stop; SIGHUP reloads; SIGUSR1 reopens the
 * logs), SIGPIPE ignored, libevent's log callback, the log level and
 * target, the audit sink, the config (loaded, rules compiled), reload
 * and its fan-out to the workers, the listening sockets (bound here once,
 * struct kr_lsock), the start-up tables every worker reads (kr_rewrite's
 * masks, the kr_topics walk table), the one-second flush of rate-limited
 * log lines, the stop report.  The event loops themselves are workers
 * (kr_worker.h, which also says what is shared with them and how).
 *
 * Threads: a daemon is driven from the thread that runs its event_base
 * (kr_daemon_run: signals, reload, stop).  Its workers run on that base
 * (krelay: worker 0) or on bases of their own on other threads
 * (kr_daemon_add_worker; krelay's workers 1..N-1: kr_daemon_spawn_workers;
 * reloads, the drain and the stop reach those through their mailbox,
 * kr_worker_post).
 *
 * Config: the daemon holds a reference (struct kr_conf_ref) to the
 * current config; each worker and session holds its own, so a reload
 * swaps the daemon's and the workers' while old sessions keep theirs
 * until their next request.
 */
#ifndef KR_DAEMON_H
#define KR_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "kr_common.h"
#include "kr_conf.h"
#include "kr_listener.h"
#include "kr_worker.h"

/* The bound sockets of one [listener] section. */
struct kr_lgroup {
    struct kr_lsock *socks;             /* [0] bootstrap, [1 + n -
                                           node_id_min] NodeId n */
    int nsocks;
};

/*
 * A set of bound sockets, one group per [listener] of the current config
 * (same order).  Set 0 is shared by every worker added without sockets
 * of its own; a worker added with sockets of its own has a set of its
 * own.  With [process] workers = N > 1 kr_daemon_start binds N sets as
 * SO_REUSEPORT groups (set k's sockets at set 0's ports; kr_worker.h,
 * "Listening sockets"), worker k accepts on set k.
 */
struct kr_lset {
    struct kr_lgroup **g;               /* each malloc'd */
    int ng;
};

/*
 * The process part.  Created by kr_daemon_new, freed by kr_daemon_free,
 * which releases everything below (base only when own_base).
 */
struct kr_cluster;

struct kr_daemon {
    struct event_base *base;            /* signals, timers, reload; the
                                           main worker runs on it too */
    bool own_base;                      /* kr_daemon_free frees base */
    bool main_worker;                   /* kr_daemon_start adds worker 0
                                           on base (default true; tests
                                           running workers on threads
                                           clear it) */
    struct kr_conf_ref *cref;           /* current config */
    struct kr_cluster **clusters;       /* issue 12: the view of each
                                           [upstream] of cref's config
                                           (kr_cluster.h), one for every
                                           worker; kept by a reload that
                                           changes none of its NEWCONN
                                           keys; NULL until the first
                                           worker */
    int nclusters;
    struct kr_audit_ref *audit;         /* [audit] sink, NULL when none */
    struct kr_conf_ref *audit_cref;     /* the config the sink was opened
                                           with: a reload logs the changes
                                           of its [audit] keys that need a
                                           restart (queue_bytes) against
                                           it; NULL with no sink */
    struct kr_lset **sets;              /* [0] shared, then own ones */
    int nsets;
    struct kr_worker **workers;
    int *wset;                          /* set index of each worker */
    int nworkers;
    _Atomic uint64_t ids;               /* session ids (kr_worker_next_id) */
    struct event *sigev[4];             /* TERM, INT, HUP, USR1 */
    struct event *rl_timer;             /* 1 s: kr_log_rl_flush */
    _Atomic uint64_t reloads, reloads_refused; /* kr_daemon_reload counts
                                           (any thread may read them: the
                                           admin endpoint) */
    int log_verbose;                    /* -v count, added to a reloaded
                                           [log] level */
    /* krelay --demo -c FILE: each config a reload reads passes here
       before it is compared and applied (the demo points its upstreams
       at its cluster again); false refuses the reload, with a message
       in err.  NULL (the default): none. */
    bool (*reload_adjust)(struct kr_conf *nc, void *arg, char *err,
                          size_t errlen);
    void *reload_adjust_arg;
    const struct kr_conf_load_opts *load_opts;
                                        /* how a reload reads the file
                                           (kr_rule_load_with; --demo -c:
                                           the demo cluster stands in for
                                           a missing [upstream]); NULL:
                                           plainly.  Borrowed */
    bool no_conf_file;                  /* the config came from no file
                                           (krelay --demo without -c):
                                           SIGHUP only reopens the log
                                           and audit files, and says so */
    bool started, stopping;
    /* the operations issue: what other threads (the admin endpoint) read
       of the daemon (appended) */
    pthread_mutex_t pub_lock;           /* guards the swaps of cref and
                                           audit and the growth of workers
                                           against kr_daemon_conf_get,
                                           kr_daemon_audit_counts and
                                           kr_daemon_workers */
    _Atomic int64_t conf_loaded_us;     /* wall clock µs the current config
                                           was loaded (start, or the last
                                           reload that took) */
    _Atomic int64_t conf_load_us;       /* how long its load took, µs
                                           (read, checked, rules compiled;
                                           0: not measured: krelay.c sets
                                           the first) */
    /* SIGTERM drains (the operations issue): kr_daemon_drain */
    bool draining;
    struct event *drain_timer;          /* every 50 ms while draining */
    int64_t drain_started_ms;           /* kr_clock_timer_ms at its start */
    int64_t drain_deadline_ms;          /* then + drain_timeout_ms */
    /* [process] workers (the operations issue) */
    bool reuseport;                     /* the sets are SO_REUSEPORT
                                           groups (workers > 1) */
    int sets_given;                     /* sets handed to workers so far
                                           (set 0 first) */
    struct event_base **tbases;         /* kr_daemon_spawn_workers: the
                                           bases of its threads' workers,
                                           freed after the workers */
    int ntbases;
    pthread_t *threads;                 /* their threads, joined by
                                           kr_daemon_join */
    int nthreads;
    bool reported;                      /* the stop report was logged */
};

/*
 * A daemon for conf on base (NULL: create and own one).  With own_conf
 * the daemon frees conf (kr_conf_free) when the last reference goes.
 * Returns NULL on ENOMEM.  Nothing is bound yet.
 */
struct kr_daemon *kr_daemon_new(struct kr_conf *conf, bool own_conf,
                                struct event_base *base);

/*
 * Once per process: ignore SIGPIPE, route libevent's warnings to the log,
 * build the tables the workers read (kr_rewrite_init, kr_topics_init);
 * then open the audit sink, bind every listener (each logged; with
 * [process] workers = N > 1, N sockets per address: an SO_REUSEPORT
 * group, whose first socket fails when another process listens there:
 * kr_lsock_bind_share's KR_LSOCK_FIRST), start the rate-limit flush
 * timer, and with main_worker add worker 0 on d->base.  No thread of a
 * worker starts here (kr_daemon_spawn_workers).  Returns KR_OK, or
 * KR_ERROR with a message in err (everything bound so far is closed
 * again).
 */
int kr_daemon_start(struct kr_daemon *d, char *err, size_t errlen)
    KR_MUST_CHECK;

/*
 * Add a started worker on base (after kr_daemon_start).  base == d->base:
 * it accepts on the daemon's sockets themselves; another base: the
 * caller runs it on a thread of its own (started after this returns), it
 * accepts on duplicates and gets reloads and the stop through its
 * mailbox.  own_sockets: a set of sockets for it alone: with SO_REUSEPORT
 * sets (workers > 1) the next one kr_daemon_start bound (or a new one
 * joining set 0's ports); without, a new set on the same addresses (a
 * config with port 0 gives it ports of its own, which tests use to know
 * which worker serves a connection; a fixed port clashes).  Returns the
 * worker (the daemon's: freed by kr_daemon_free), or NULL with a message
 * in err.
 */
struct kr_worker *kr_daemon_add_worker(struct kr_daemon *d,
                                       struct event_base *base,
                                       bool own_sockets, char *err,
                                       size_t errlen);

/*
 * [process] workers = N: workers 1..N-1, each on an event_base and a
 * thread of its own ("krelay-wK", every signal blocked: they go to the
 * daemon's thread), accepting on sets 1..N-1.  krelay calls it after the
 * privilege drop (-d forked before any thread).  Nothing to do for one
 * worker.  Returns KR_OK, or KR_ERROR with a message in err (the threads
 * started run until kr_daemon_stop; kr_daemon_join ends them).
 */
int kr_daemon_spawn_workers(struct kr_daemon *d, char *err, size_t errlen)
    KR_MUST_CHECK;

/*
 * kr_daemon_stop (if needed), then wait for the threads of
 * kr_daemon_spawn_workers to end, then the stop report (when there are
 * such threads, it waits for them: their last counts are in it).
 * d->base's thread; idempotent; kr_daemon_free calls it.
 */
void kr_daemon_join(struct kr_daemon *d);

/* Worker i (0..nworkers - 1), NULL when there is none. */
struct kr_worker *kr_daemon_worker(const struct kr_daemon *d, int i);

/*
 * Run the daemon's loop with SIGTERM (drain; a second one stops at
 * once), SIGINT (stop at once), SIGHUP (reload and reopen) and SIGUSR1
 * (reopen the log) handled, until kr_daemon_stop.
 * Returns KR_OK.
 */
int kr_daemon_run(struct kr_daemon *d);

/*
 * Stop every worker (those on d->base now, the others through their
 * mailbox), close the listening sockets, flush the audit sink, log the
 * stop report (totals over the workers' counters), and break the loop.
 * Safe from any callback on d->base; idempotent.  Workers on other
 * threads may still be closing their sessions when this returns: join
 * their threads before kr_daemon_free (kr_daemon_join for those of
 * kr_daemon_spawn_workers, whose stop report waits for that).
 */
void kr_daemon_stop(struct kr_daemon *d);

/*
 * Drain (SIGTERM): every worker keeps its listeners open but closes new
 * connections at accept (FIN, counted), and each session forwards no
 * further request, delivers the responses it owes and closes
 * (kr_worker_drain).  When every worker has applied the drain and no
 * connection is left on any (their conn_active, relaxed atomics), or
 * after [process] drain_timeout_ms, kr_daemon_stop (which closes what is
 * left).  One log
 * line at the start, one at the end.  A reload is refused while
 * draining.  d->base's thread; idempotent.
 */
void kr_daemon_drain(struct kr_daemon *d);

/*
 * Reread the config from path (SIGHUP).  A valid one replaces, for new
 * requests on existing connections too, the rules, the log target and
 * level, the audit sink and the per-listener limits; listeners are
 * opened and closed as configured (a listener section is kept when its
 * name, listen address and broker ports are unchanged); existing
 * connections stay open.  New listeners are bound before any running one
 * is touched, and a socket on an unchanged address is handed over, not
 * bound again; if a bind fails only the new sockets are closed and the
 * reload is refused.  [upstream] changes (NEWCONN in the key table,
 * kr_conf.h) apply to new connections: a changed or new section gets a
 * new cluster view (kr_cluster.h) and each worker a new kr_upstream;
 * open connections keep theirs until they end (logged).
 * With reload_adjust set, the new config passes through it first (and
 * the reload is refused when it says false).
 * An invalid config is refused: every error is logged as FILE:LINE and
 * the old config stays.  Workers on d->base follow before this returns,
 * the others when their loop reads their mailbox; the notice line
 * "reloaded PATH: ..." is logged once every worker applied it (by the
 * thread of the last one: kr_wdone, kr_worker.h); it ends with what
 * changed of the log and audit targets ("audit target FILE opened (was
 * OLD)", "audit off (was OLD)", "log target FILE (was OLD)") and, for
 * SIGHUP, what it reopened of the files kept.  Returns KR_OK or
 * KR_ERROR.
 */
int kr_daemon_reload(struct kr_daemon *d, const char *path);

/*
 * kr_daemon_reload with a config loaded already (rules compiled): nc
 * becomes the daemon's on success; with own it is freed when its last
 * reference goes (also on failure), else it stays the caller's and must
 * outlive every reference (tests build configs in memory).  Returns
 * KR_OK or KR_ERROR.
 */
int kr_daemon_reload_conf(struct kr_daemon *d, struct kr_conf *nc, bool own);

/*
 * Reopen the log file (now: kr_log_reopen) and ask the audit writer to
 * reopen the audit file (before its next write: kr_audit_reopen), for
 * SIGUSR1 and SIGHUP.  A failure is logged when it happens (the lines
 * keep going to the file opened before).  Returns what is being
 * reopened: "the log and audit files", "the log file", "the audit
 * file" (static strings), or NULL when neither target is a file.
 */
const char *kr_daemon_reopen(struct kr_daemon *d);

/*
 * Stop (if needed) and free everything: the workers (those on other
 * threads must have ended: join them first), the sockets, the config
 * references, the audit sink (when no worker holds it any more), the
 * base too when owned.  NULL is a no-op.
 */
void kr_daemon_free(struct kr_daemon *d);

/*
 * A new reference to the current config (kr_conf_ref_put it), from any
 * thread.
 */
struct kr_conf_ref *kr_daemon_conf_get(struct kr_daemon *d);

/*
 * The current audit sink's lines written and dropped (kr_audit.h) since
 * it was opened (0 and 0 without one; a reload that opens another target
 * starts again from 0), from any thread.
 */
void kr_daemon_audit_counts(struct kr_daemon *d, uint64_t *written,
                            uint64_t *dropped);

/*
 * Copy up to max worker pointers into out, from any thread; returns how
 * many there are (may be more than max).  The workers live until
 * kr_daemon_free: a thread that uses them must end before that.
 */
int kr_daemon_workers(struct kr_daemon *d, struct kr_worker **out, int max);

/*
 * The bound port of group gi's listener for node_id (KR_NODE_BOOTSTRAP
 * for the bootstrap listener) in the shared set, 0 when there is none or
 * it is closed.
 */
uint16_t kr_daemon_port(const struct kr_daemon *d, int gi, int32_t node_id);

#endif /* KR_DAEMON_H */
