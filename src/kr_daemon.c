/*
 * kr_daemon.c - the process part: start-up, signals, the listening
 * sockets, reload and its fan-out to the workers, stop and its report.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kr_audit.h"
#include "kr_clock.h"
#include "kr_cluster.h"
#include "kr_daemon.h"
#include "kr_log.h"
#include "kr_proc.h"
#include "kr_rewrite.h"
#include "kr_rule.h"
#include "kr_stats.h"
#include "kr_topics.h"
#include "kr_upstream.h"

#define KR_LISTEN_BACKLOG 1024

struct kr_daemon *
kr_daemon_new(struct kr_conf *conf, bool own_conf, struct event_base *base)
{
    struct kr_daemon *d = calloc(1, sizeof(*d));

    if (d == NULL) {
        return NULL;
    }
    d->cref = kr_conf_ref_new(conf, own_conf);
    if (d->cref == NULL) {
        free(d);
        return NULL;
    }
    if (base == NULL) {
        base = event_base_new();
        if (base == NULL) {
            free(d->cref);
            free(d);
            return NULL;
        }
        d->own_base = true;
    }
    d->base = base;
    d->main_worker = true;
    atomic_init(&d->ids, 0);
    pthread_mutex_init(&d->pub_lock, NULL);
    atomic_store(&d->conf_loaded_us, kr_clock_wall_us());
    return d;
}

struct kr_conf_ref *
kr_daemon_conf_get(struct kr_daemon *d)
{
    struct kr_conf_ref *r;

    pthread_mutex_lock(&d->pub_lock);
    r = kr_conf_ref_get(d->cref);
    pthread_mutex_unlock(&d->pub_lock);
    return r;
}

void
kr_daemon_audit_counts(struct kr_daemon *d, uint64_t *written,
                       uint64_t *dropped)
{
    pthread_mutex_lock(&d->pub_lock);
    *written = kr_audit_written(d->audit != NULL ? d->audit->au : NULL);
    *dropped = kr_audit_dropped(d->audit != NULL ? d->audit->au : NULL);
    pthread_mutex_unlock(&d->pub_lock);
}

int
kr_daemon_workers(struct kr_daemon *d, struct kr_worker **out, int max)
{
    int i, n;

    pthread_mutex_lock(&d->pub_lock);
    n = d->nworkers;
    for (i = 0; i < n && i < max; i++) {
        out[i] = d->workers[i];
    }
    pthread_mutex_unlock(&d->pub_lock);
    return n;
}

struct kr_worker *
kr_daemon_worker(const struct kr_daemon *d, int i)
{
    return i >= 0 && i < d->nworkers ? d->workers[i] : NULL;
}

/* Room for kr_conf_where's "FILE:LINE". */
#define KR_PATH_WHERE 4160

/* Put the config's FILE:LINE of [audit] target before err (errlen). */
static void
audit_err_where(const struct kr_conf *c, char *err, size_t errlen)
{
    char where[KR_PATH_WHERE], *copy = strdup(err);

    if (copy != NULL) {
        snprintf(err, errlen, "%s: %s",
                 kr_conf_where(c, c->audit.target_line, where,
                               sizeof(where)), copy);
        free(copy);
    }
}

/* ---- the listening sockets --------------------------------------------- */

/*
 * Listener i of [listener] lc: its NodeId (KR_NODE_BOOTSTRAP for i 0)
 * and label into n and label; returns its port (maybe out of range).
 */
static long
listener_slot(const struct kr_listener_conf *lc, int i, int32_t *n,
              char *label, size_t len)
{
    const char *pre = lc->name != NULL && lc->name[0] ? lc->name : NULL;

    if (i == 0) {
        *n = KR_NODE_BOOTSTRAP;
        snprintf(label, len, "%s%s%s", pre ? pre : "", pre ? "/" : "",
                 lc->sni != NULL ? "SNI routing" : "bootstrap");
        return lc->listen.port;
    }
    *n = lc->node_id_min + (i - 1);
    snprintf(label, len, "%s%sNodeId %d", pre ? pre : "", pre ? "/" : "",
             (int)*n);
    return (long)lc->broker_port_base + *n;
}

static void
close_lgroup(struct kr_lgroup *lg)
{
    int i;

    for (i = 0; lg != NULL && lg->socks != NULL && i < lg->nsocks; i++) {
        kr_lsock_close(&lg->socks[i]);
    }
}

static void
free_lgroup(struct kr_lgroup *lg)
{
    if (lg != NULL) {
        close_lgroup(lg);
        free(lg->socks);
        free(lg);
    }
}

static void
free_lset(struct kr_lset *set)
{
    int i;

    if (set == NULL) {
        return;
    }
    for (i = 0; i < set->ng; i++) {
        free_lgroup(set->g[i]);
    }
    free(set->g);
    free(set);
}

/*
 * A reload's running sockets that new listeners may take over: those of
 * the groups it drops (in one set).  Each is promised to one new
 * listener at most.
 */
struct kr_reuse {
    struct kr_lgroup **drop;            /* groups the reload drops */
    int ndrop;
    struct kr_lsock **claimed;          /* promised so far */
    int nclaimed;
};

/* The unpromised running socket bound to sa, or NULL; promises it. */
static struct kr_lsock *
reuse_claim(struct kr_reuse *ru, const struct sockaddr *sa, socklen_t salen)
{
    int j, k, c;

    for (j = 0; j < ru->ndrop; j++) {
        struct kr_lgroup *lg = ru->drop[j];

        for (k = 0; lg->socks != NULL && k < lg->nsocks; k++) {
            struct kr_lsock *ls = &lg->socks[k];
            bool taken = false;

            if (!kr_lsock_bound_to(ls, sa, salen)) {
                continue;
            }
            for (c = 0; c < ru->nclaimed && !taken; c++) {
                taken = ru->claimed[c] == ls;
            }
            if (!taken) {
                ru->claimed[ru->nclaimed++] = ls;
                return ls;
            }
        }
    }
    return NULL;
}

/*
 * The SO_REUSEPORT group a set of sockets joins ([process] workers > 1):
 * set 0's group of the same [listener], whose socket i gives the port
 * (take[i], a running socket a reload hands over, else the one bound).
 */
struct kr_lref {
    const struct kr_lgroup *g;
    struct kr_lsock *const *take;       /* NULL: none taken over */
};

/* The port socket i of ref's group listens on, 0 when closed. */
static uint16_t
lref_port(const struct kr_lref *ref, int i)
{
    if (ref->take != NULL && ref->take[i] != NULL) {
        return kr_lsock_port(ref->take[i]);
    }
    return i < ref->g->nsocks ? kr_lsock_port(&ref->g->socks[i]) : 0;
}

/*
 * Bind the sockets of [listener] lc into a new group (*out), sharing
 * each address as share says; with KR_LSOCK_JOIN, ref gives the ports
 * (set 0's), and nothing is logged (set 0's lines said it).  At start ru
 * and take are NULL: every socket is bound and logged.  In a reload, a
 * listener whose address a socket of ru already listens on is not bound:
 * that socket goes in take[i] (nsocks slots, caller frees) for
 * kr_lsock_take at commit; the others are bound but not logged yet
 * (commit does).  On KR_ERROR (message in err) *out holds what was bound
 * so far, for the caller to free.
 */
static int
bind_lgroup(const struct kr_conf *conf, const struct kr_listener_conf *lc,
            struct kr_lgroup **out, struct kr_reuse *ru,
            struct kr_lsock ***take, enum kr_lsock_share share,
            const struct kr_lref *ref, char *err, size_t errlen)
{
    struct kr_lgroup *lg = calloc(1, sizeof(*lg));
    char label[48];
    int32_t n;
    int i;
    long port;

    *out = lg;
    if (lg == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    /* SNI routing: the bootstrap port serves every broker */
    lg->nsocks = lc->sni != NULL ? 1
                                 : 1 + (lc->node_id_max - lc->node_id_min +
                                        1);
    lg->socks = calloc((size_t)lg->nsocks, sizeof(*lg->socks));
    if (take != NULL) {
        *take = calloc((size_t)lg->nsocks, sizeof(**take));
    }
    if (lg->socks == NULL || (take != NULL && *take == NULL)) {
        lg->nsocks = 0;
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    for (i = 0; i < lg->nsocks; i++) {
        lg->socks[i].fd = -1;
    }
    for (i = 0; i < lg->nsocks; i++) {
        struct kr_lsock *ls = &lg->socks[i];

        port = listener_slot(lc, i, &n, label, sizeof(label));
        if (port < 0 || port > 65535) {
            snprintf(err, errlen, "%s:%d: listener %s: port %ld out of range "
                     "(broker_port_base + NodeId)", conf->path
                     ? conf->path : "config", lc->line, label, port);
            return KR_ERROR;
        }
        if (share == KR_LSOCK_JOIN) {
            port = lref_port(ref, i);
            if (port == 0) {
                snprintf(err, errlen, "listener %s: the first socket of its "
                         "address is closed", label);
                return KR_ERROR;
            }
        }
        if (ru != NULL && take != NULL) {
            struct sockaddr_storage ss;
            socklen_t sslen;

            if (kr_listener_resolve(lc->listen.host, (uint16_t)port, label,
                                    &ss, &sslen, err, errlen) != KR_OK) {
                return KR_ERROR;
            }
            (*take)[i] = reuse_claim(ru, (struct sockaddr *)&ss, sslen);
            if ((*take)[i] != NULL) {
                continue;
            }
        }
        if (kr_lsock_bind_share(ls, lc->listen.host, (uint16_t)port, n,
                                label, KR_LISTEN_BACKLOG, share, err,
                                errlen) != KR_OK) {
            return KR_ERROR;
        }
        if (ru == NULL && share != KR_LSOCK_JOIN) {
            kr_log_info("listening on %s (%s)", ls->addrstr, ls->label);
        }
    }
    return KR_OK;
}

/*
 * Reload commit for a new group lg of lc: move in the sockets promised in
 * take (NULL: none) and, with log, log every listener.  Cannot fail.
 */
static void
commit_lgroup(struct kr_lgroup *lg, const struct kr_listener_conf *lc,
              struct kr_lsock **take, bool log)
{
    char label[48];
    int32_t n;
    int i;

    for (i = 0; i < lg->nsocks; i++) {
        struct kr_lsock *ls = &lg->socks[i];

        if (take != NULL && take[i] != NULL) {
            char was[48];

            snprintf(was, sizeof(was), "%s", take[i]->label);
            (void)listener_slot(lc, i, &n, label, sizeof(label));
            kr_lsock_take(ls, take[i], n, label);
            if (!log) {
                continue;
            }
            kr_log_info("listening on %s (%s): the socket of %s, kept open",
                        ls->addrstr, ls->label, was);
        } else if (log) {
            kr_log_info("listening on %s (%s)", ls->addrstr, ls->label);
        }
    }
}

/*
 * Bind a whole set for conf (start, own sockets), sharing each address as
 * share says (KR_LSOCK_JOIN: at the ports of set ref, set 0); NULL with
 * err.
 */
static struct kr_lset *
bind_lset(const struct kr_conf *conf, enum kr_lsock_share share,
          const struct kr_lset *ref, char *err, size_t errlen)
{
    struct kr_lset *set = calloc(1, sizeof(*set));
    int i;

    if (set == NULL ||
        (set->g = calloc((size_t)(conf->nlisteners ? conf->nlisteners : 1),
                         sizeof(*set->g))) == NULL) {
        free(set);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (i = 0; i < conf->nlisteners; i++) {
        struct kr_lref r = { ref != NULL ? ref->g[i] : NULL, NULL };
        int rc = bind_lgroup(conf, &conf->listeners[i], &set->g[i], NULL,
                             NULL, share, &r, err, errlen);

        set->ng = i + 1;
        if (rc != KR_OK) {
            free_lset(set);
            return NULL;
        }
    }
    return set;
}

/* Put n cluster views and free the array.  NULL is a no-op. */
static void
clusters_free(struct kr_cluster **cl, int n)
{
    int i;

    for (i = 0; cl != NULL && i < n; i++) {
        kr_cluster_put(cl[i]);
    }
    free(cl);
}

/*
 * The cluster views of nc's [upstream] sections (issue 12), one
 * reference each: the running one (ocl, of oc's sections) for a section
 * whose NEWCONN keys did not change (kr_conf.h: it keeps its running
 * kr_upstreams), a new one otherwise.  oc NULL: all new.  NULL on ENOMEM
 * (nothing held).
 */
static struct kr_cluster **
clusters_for(const struct kr_conf *oc, struct kr_cluster **ocl,
             const struct kr_conf *nc)
{
    struct kr_cluster **cl = calloc((size_t)(nc->nupstreams > 0
                                                 ? nc->nupstreams
                                                 : 1),
                                    sizeof(*cl));
    int i, j;

    if (cl == NULL) {
        return NULL;
    }
    for (i = 0; i < nc->nupstreams; i++) {
        const struct kr_upstream_conf *nu = &nc->upstreams[i];

        for (j = 0; oc != NULL && ocl != NULL && j < oc->nupstreams; j++) {
            const struct kr_upstream_conf *ou = &oc->upstreams[j];

            if (strcmp(ou->name != NULL ? ou->name : "",
                       nu->name != NULL ? nu->name : "") == 0 &&
                !(kr_conf_upstream_diff(ou, nu, NULL, NULL) &
                  KR_RELOAD_NEWCONN)) {
                cl[i] = kr_cluster_ref(ocl[j]);
                break;
            }
        }
        if (cl[i] == NULL) {
            cl[i] = kr_cluster_new(nu->name);
        }
        if (cl[i] == NULL) {
            clusters_free(cl, i);
            return NULL;
        }
    }
    return cl;
}

/*
 * The first generation of a worker on base accepting on set: the
 * daemon's own descriptors for a worker on d->base, duplicates (the
 * worker's) for one on another thread.  NULL with err.
 */
static struct kr_wgen *
worker_gen(struct kr_daemon *d, struct event_base *base,
           const struct kr_lset *set, const int *keep, char *err,
           size_t errlen)
{
    struct kr_wgen *gen;
    bool dup = base != d->base;
    int i, k;

    if (d->clusters == NULL && d->cref->conf->nupstreams > 0) {
        /* the first worker: the views every worker shares */
        d->clusters = clusters_for(NULL, NULL, d->cref->conf);
        if (d->clusters == NULL) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        d->nclusters = d->cref->conf->nupstreams;
    }
    gen = kr_wgen_new(kr_conf_ref_get(d->cref), kr_audit_ref_get(d->audit),
                      set->ng);
    if (gen == NULL) {
        kr_conf_ref_put(d->cref);
        kr_audit_ref_put(d->audit);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (kr_wgen_set_clusters(gen, d->clusters, d->nclusters) != KR_OK) {
        snprintf(err, errlen, "out of memory");
        kr_wgen_free(gen);
        return NULL;
    }
    for (i = 0; i < set->ng; i++) {
        struct kr_wgen_group *gg = &gen->g[i];
        const struct kr_lgroup *lg = set->g[i];

        gg->keep = keep != NULL ? keep[i] : -1;
        if (gg->keep >= 0) {
            continue;
        }
        gg->own = dup;
        gg->socks = calloc((size_t)(lg->nsocks ? lg->nsocks : 1),
                           sizeof(*gg->socks));
        if (gg->socks == NULL) {
            snprintf(err, errlen, "out of memory");
            kr_wgen_free(gen);
            return NULL;
        }
        for (k = 0; k < lg->nsocks; k++) {
            gg->socks[k] = lg->socks[k];
            if (dup && lg->socks[k].fd >= 0) {
                gg->socks[k].fd = fcntl(lg->socks[k].fd, F_DUPFD_CLOEXEC,
                                        0);
                if (gg->socks[k].fd < 0) {
                    snprintf(err, errlen, "listen %s (%s): %s",
                             lg->socks[k].addrstr, lg->socks[k].label,
                             strerror(errno));
                    gg->nsocks = k;
                    kr_wgen_free(gen);
                    return NULL;
                }
            }
            gg->nsocks = k + 1;
        }
    }
    return gen;
}

struct kr_worker *
kr_daemon_add_worker(struct kr_daemon *d, struct event_base *base,
                     bool own_sockets, char *err, size_t errlen)
{
    struct kr_worker *w, **ws;
    struct kr_lset *set, **sets;
    struct kr_wgen *gen;
    int *wset, si = 0;

    if (!d->started || d->stopping) {
        snprintf(err, errlen, "the daemon is not running");
        return NULL;
    }
    pthread_mutex_lock(&d->pub_lock);
    ws = realloc(d->workers, sizeof(*ws) * (size_t)(d->nworkers + 1));
    if (ws != NULL) {
        d->workers = ws;
    }
    pthread_mutex_unlock(&d->pub_lock);
    wset = realloc(d->wset, sizeof(*wset) * (size_t)(d->nworkers + 1));
    if (wset != NULL) {
        d->wset = wset;
    }
    if (ws == NULL || wset == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (own_sockets && d->reuseport && d->sets_given < d->nsets) {
        si = d->sets_given++;           /* bound at start */
    } else if (own_sockets) {
        sets = realloc(d->sets, sizeof(*sets) * (size_t)(d->nsets + 1));
        if (sets == NULL) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        d->sets = sets;
        set = bind_lset(d->cref->conf,
                        d->reuseport ? KR_LSOCK_JOIN : KR_LSOCK_ALONE,
                        d->sets[0], err, errlen);
        if (set == NULL) {
            return NULL;
        }
        si = d->nsets++;
        d->sets[si] = set;
        d->sets_given = d->nsets;
    }
    w = kr_worker_new(base, d->nworkers, &d->ids, base != d->base);
    if (w == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    gen = worker_gen(d, base, d->sets[si], NULL, err, errlen);
    if (gen == NULL || kr_worker_start(w, gen, err, errlen) != KR_OK) {
        kr_worker_free(w);
        return NULL;
    }
    pthread_mutex_lock(&d->pub_lock);
    d->workers[d->nworkers] = w;
    d->wset[d->nworkers] = si;
    d->nworkers++;
    pthread_mutex_unlock(&d->pub_lock);
    return w;
}

/* ---- start -------------------------------------------------------------- */

/* Rate-limited log lines: their "suppressed N" summaries, every second. */
static void
rl_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    (void)kr_log_rl_flush();
}

/* The audit lines sink r dropped so far, when any (reload, stop). */
static void
audit_report(const struct kr_audit_ref *r, const char *when)
{
    uint64_t n = kr_audit_dropped(r != NULL ? r->au : NULL);

    if (n > 0) {
        kr_log_warn("audit: %" PRIu64 " line%s dropped since the audit "
                    "target was opened (queue full, target not writable, "
                    "or no syslog socket), at %s", n, n == 1 ? "" : "s",
                    when);
    }
}

/* libevent's own warnings go to krelay's log, rate-limited. */
static void
libevent_log_cb(int severity, const char *msg)
{
    static struct kr_ratelimit rl;
    int level = severity >= EVENT_LOG_ERR    ? KR_LOG_ERROR
                : severity == EVENT_LOG_WARN ? KR_LOG_WARN
                : severity == EVENT_LOG_MSG  ? KR_LOG_INFO
                                             : KR_LOG_DEBUG;

    if (level <= kr_log_level_cur) {
        kr_log_write_rl(&rl, 10, level, "libevent: %s", msg);
    }
}

int
kr_daemon_start(struct kr_daemon *d, char *err, size_t errlen)
{
    const struct kr_conf *conf = d->cref->conf;
    struct kr_audit *au;
    int i, nw;

    /* a peer that goes away mid-write must not kill the process */
    signal(SIGPIPE, SIG_IGN);
    event_set_log_callback(libevent_log_cb);
    /* built now, before any worker exists; only read from then on */
    kr_rewrite_init();
    kr_topics_init();
    if (conf->audit.target != NULL && d->audit == NULL) {
        au = kr_audit_open(conf->audit.target,
                           (size_t)conf->audit.queue_bytes, err, errlen);
        if (au == NULL) {
            audit_err_where(conf, err, errlen);
            return KR_ERROR;
        }
        d->audit = kr_audit_ref_new(au);
        if (d->audit == NULL) {
            kr_audit_close(au);
            snprintf(err, errlen, "out of memory");
            return KR_ERROR;
        }
    }
    if (d->audit != NULL && d->audit_cref == NULL) {
        d->audit_cref = kr_conf_ref_get(d->cref);
    }
    /* [process] workers: a set of sockets per worker, SO_REUSEPORT groups
       (kr_worker.h, "Listening sockets"); one worker: one plain set */
    nw = conf->process.workers > 1 ? (int)conf->process.workers : 1;
    d->reuseport = nw > 1;
    d->sets = calloc((size_t)nw, sizeof(*d->sets));
    if (d->sets == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    for (i = 0; i < nw; i++) {
        d->sets[i] = bind_lset(conf, !d->reuseport ? KR_LSOCK_ALONE
                                     : i == 0      ? KR_LSOCK_FIRST
                                                   : KR_LSOCK_JOIN,
                               d->sets[0], err, errlen);
        if (d->sets[i] == NULL) {
            return KR_ERROR;
        }
        d->nsets = i + 1;
    }
    d->sets_given = 1;                  /* set 0: the shared one */
    if (d->reuseport) {
        kr_log_info("%d workers: each accepts on its own SO_REUSEPORT "
                    "socket of every listener address above", nw);
    }
    d->rl_timer = event_new(d->base, -1, EV_PERSIST, rl_timer_cb, d);
    if (d->rl_timer != NULL) {
        struct timeval tv = { 1, 0 };

        event_add(d->rl_timer, &tv);
    }
    d->started = true;
    if (d->main_worker &&
        kr_daemon_add_worker(d, d->base, false, err, errlen) == NULL) {
        return KR_ERROR;
    }
    return KR_OK;
}

static int reload(struct kr_daemon *d, const char *path, const char *by,
                  int reopened, bool ready);

/* What reopen_files reopens: bits. */
#define REOPEN_LOG 0x1
#define REOPEN_AUDIT 0x2

/* Reopen the log file and ask the audit writer to reopen the audit file
   (kr_daemon_reopen); which of them are files it reopens (REOPEN_*). */
static int
reopen_files(struct kr_daemon *d)
{
    bool log = kr_log_reopen();
    bool audit = d->audit != NULL && kr_audit_reopen(d->audit->au);

    return (log ? REOPEN_LOG : 0) | (audit ? REOPEN_AUDIT : 0);
}

/* REOPEN_* bits in words: "the log and audit files", ... (static), or
   NULL for none. */
static const char *
reopen_what(int bits)
{
    bool log = (bits & REOPEN_LOG) != 0, audit = (bits & REOPEN_AUDIT) != 0;

    return log && audit ? "the log and audit files"
           : log        ? "the log file"
           : audit      ? "the audit file"
                        : NULL;
}

/*
 * What a signal's notice line says of the files it reopened in buf (len
 * bytes): "reopening the log file" (an error line follows if it cannot
 * be: the lines keep going to the file opened before), or that there is
 * none.
 */
static const char *
reopen_words(int bits, char *buf, size_t len)
{
    const char *what = reopen_what(bits);

    snprintf(buf, len, "%s%s", what != NULL ? "reopening " : "",
             what != NULL ? what : "no log or audit file to reopen");
    return buf;
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
    struct kr_daemon *d = arg;
    char words[64];
    int bits;

    (void)what;
    switch (sig) {
    case SIGHUP:
        /* one notice line, from reload: what was done (the files
           reopened first: the reload's own lines go to the new one) */
        bits = reopen_files(d);
        if (d->no_conf_file) {
            kr_log_notice("SIGHUP: no configuration file to reread (krelay "
                          "--demo without -c; --demo -c FILE reloads FILE); "
                          "%s", reopen_words(bits, words, sizeof(words)));
            break;
        }
        kr_proc_notify("RELOADING=1");
        /* READY=1 once every worker applied it (reload_done), or now */
        if (reload(d, d->cref->conf->path, "SIGHUP", bits, true) != KR_OK) {
            kr_proc_notify("READY=1");
        }
        break;
    case SIGUSR1:
        kr_log_notice("SIGUSR1: %s",
                      reopen_words(reopen_files(d), words, sizeof(words)));
        break;
    case SIGTERM:
        if (!d->draining) {
            kr_daemon_drain(d);
            break;
        }
        kr_log_notice("SIGTERM again while draining: stopping at once");
        kr_daemon_stop(d);
        break;
    default:
        if (sig == SIGINT) {
            kr_log_notice("SIGINT: stopping at once");
        } else {
            kr_log_notice("signal %d: stopping at once", (int)sig);
        }
        kr_daemon_stop(d);
        break;
    }
}

/* ---- drain -------------------------------------------------------------- */

static void stop_report(struct kr_daemon *d);

static uint64_t total(const struct kr_daemon *d, enum kr_stat_id id);
static const char *plural(long long n);

/*
 * Has every worker applied the drain (those on other threads read it from
 * their mailbox)?  Until then one may still accept a connection it will
 * serve: its conn_active, counted before drain_seen is set, is seen by a
 * load after this one.
 */
static bool
drain_seen_all(const struct kr_daemon *d)
{
    int i;

    for (i = 0; i < d->nworkers; i++) {
        if (!atomic_load_explicit(&d->workers[i]->drain_seen,
                                  memory_order_acquire)) {
            return false;
        }
    }
    return true;
}

/* While draining: stop once no connection is left, or at the deadline. */
static void
drain_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_daemon *d = arg;
    bool seen = drain_seen_all(d);
    uint64_t left = total(d, KR_STAT_ID_conn_active);
    int64_t now = kr_clock_timer_ms();

    uint64_t nd;

    (void)fd;
    (void)what;
    if (left == 0 && seen) {
        nd = total(d, KR_STAT_ID_conn_drain_closed);
        kr_log_notice("drain: done in %lld ms: every connection closed "
                      "after the responses it was owed; %" PRIu64 " new "
                      "connection%s closed at accept",
                      (long long)(now - d->drain_started_ms), nd,
                      plural((long long)nd));
    } else if (now >= d->drain_deadline_ms) {
        nd = total(d, KR_STAT_ID_conn_drain_closed);
        kr_log_notice("drain: drain_timeout_ms (%lld) reached: closing the "
                      "%" PRIu64 " connection%s left; %" PRIu64 " new "
                      "connection%s closed at accept",
                      (long long)(d->drain_deadline_ms - d->drain_started_ms),
                      left, plural((long long)left), nd,
                      plural((long long)nd));
    } else {
        return;
    }
    kr_daemon_stop(d);
}

void
kr_daemon_drain(struct kr_daemon *d)
{
    int64_t timeout_ms = d->cref->conf->process.drain_timeout_ms;
    struct timeval tv = { 0, 50000 };
    int i;

    if (d->draining || d->stopping) {
        return;
    }
    d->draining = true;
    kr_proc_notify("STOPPING=1");
    d->drain_started_ms = kr_clock_timer_ms();
    d->drain_deadline_ms = d->drain_started_ms + timeout_ms;
    kr_log_notice("SIGTERM: draining: new connections close at accept; "
                  "%" PRIu64 " open connection%s: each forwards no further "
                  "request and closes once its responses are delivered, "
                  "within "
                  "drain_timeout_ms %lld (a second SIGTERM or SIGINT stops "
                  "at once)", total(d, KR_STAT_ID_conn_active),
                  plural((long long)total(d, KR_STAT_ID_conn_active)),
                  (long long)timeout_ms);
    for (i = 0; i < d->nworkers; i++) {
        struct kr_worker *w = d->workers[i];
        struct kr_wgen *gen;

        if (w->base == d->base) {
            kr_worker_drain(w);
            continue;
        }
        gen = kr_wgen_new(NULL, NULL, 0);
        if (gen != NULL) {
            gen->drain = true;
            kr_worker_post(w, gen);
        }
    }
    d->drain_timer = event_new(d->base, -1, EV_PERSIST, drain_timer_cb, d);
    if (d->drain_timer == NULL || event_add(d->drain_timer, &tv) != 0) {
        kr_log_error("drain: no timer (out of memory): stopping at once");
        kr_daemon_stop(d);
        return;
    }
    drain_timer_cb(-1, 0, d);           /* nothing open, or timeout 0 */
}

int
kr_daemon_run(struct kr_daemon *d)
{
    static const int sigs[4] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
    int i;

    for (i = 0; i < 4; i++) {
        d->sigev[i] = evsignal_new(d->base, sigs[i], signal_cb, d);
        if (d->sigev[i] != NULL) {
            evsignal_add(d->sigev[i], NULL);
        }
    }
    if (!d->stopping) {
        event_base_dispatch(d->base);
    }
    for (i = 0; i < 4; i++) {
        if (d->sigev[i] != NULL) {
            event_free(d->sigev[i]);
            d->sigev[i] = NULL;
        }
    }
    return KR_OK;
}

/* ---- stop --------------------------------------------------------------- */

/* Sum of counter id (cell 0) over the workers. */
static const char *plural(long long n);

static uint64_t
total(const struct kr_daemon *d, enum kr_stat_id id)
{
    uint64_t sum = 0;
    int i;

    for (i = 0; i < d->nworkers; i++) {
        sum += kr_stats_cell(&d->workers[i]->stats, id, 0);
    }
    return sum;
}

/* Sum of counter id, every one of its ncells cells, over the workers. */
static uint64_t
total_cells(const struct kr_daemon *d, enum kr_stat_id id, size_t ncells)
{
    uint64_t sum = 0;
    size_t c;
    int i;

    for (i = 0; i < d->nworkers; i++) {
        for (c = 0; c < ncells; c++) {
            sum += kr_stats_cell(&d->workers[i]->stats, id, c);
        }
    }
    return sum;
}

/*
 * issue 10: what legacy translation did, at stop, when it did anything
 * (the benchmark checks its translated runs with this line).
 */
static void
legacy_report(const struct kr_daemon *d)
{
    uint64_t nt = total_cells(d, KR_STAT_ID_legacy_translated,
                              KR_STATS_API_CELLS);
    uint64_t nr = total(d, KR_STAT_ID_legacy_refused);

    if (nt == 0 && nr == 0) {
        return;
    }
    kr_log_notice("legacy translation: %" PRIu64 " request%s translated, %"
                  PRIu64 " refused, %" PRIu64 " bytes of records in, %"
                  PRIu64 " out, %" PRIu64 " zstd batch%s recompressed, %"
                  PRIu64 " partition%s corrupt",
                  nt, plural((long long)nt), nr,
                  total(d, KR_STAT_ID_legacy_records_in_bytes),
                  total(d, KR_STAT_ID_legacy_records_out_bytes),
                  total(d, KR_STAT_ID_legacy_zstd_recompressed),
                  total(d, KR_STAT_ID_legacy_zstd_recompressed) == 1
                      ? ""
                      : "es",
                  total(d, KR_STAT_ID_legacy_partitions_corrupt),
                  plural((long long)total(
                      d, KR_STAT_ID_legacy_partitions_corrupt)));
}

void
kr_daemon_stop(struct kr_daemon *d)
{
    int i, j;

    if (d->stopping) {
        return;
    }
    d->stopping = true;
    if (!d->draining && d->started) {
        kr_proc_notify("STOPPING=1");   /* the drain said it already */
    }
    for (i = 0; i < d->nworkers; i++) {
        struct kr_worker *w = d->workers[i];
        struct kr_wgen *gen;

        if (w->base == d->base) {
            kr_worker_stop(w);
            continue;
        }
        gen = kr_wgen_new(NULL, NULL, 0);
        if (gen != NULL) {
            gen->stop = true;
            kr_worker_post(w, gen);
        }
    }
    /* the workers on this thread no longer accept on them */
    for (i = 0; i < d->nsets; i++) {
        for (j = 0; j < d->sets[i]->ng; j++) {
            close_lgroup(d->sets[i]->g[j]);
        }
    }
    if (d->rl_timer != NULL) {
        event_free(d->rl_timer);
        d->rl_timer = NULL;
    }
    if (d->drain_timer != NULL) {
        event_free(d->drain_timer);
        d->drain_timer = NULL;
    }
    /* workers on threads of ours (kr_daemon_spawn_workers) may still be
       closing sessions: the report waits for kr_daemon_join */
    if (d->nthreads == 0) {
        stop_report(d);
    }
    (void)kr_log_rl_flush();
    event_base_loopbreak(d->base);
}

/*
 * The stop report: the audit sink flushed and its drops, the totals over
 * every worker's counters.  Once.
 */
static void
stop_report(struct kr_daemon *d)
{
    if (d->reported) {
        return;
    }
    d->reported = true;
    /* the lines queued so far are written (or counted as dropped)
       before the drops are reported */
    kr_audit_flush(d->audit != NULL ? d->audit->au : NULL);
    audit_report(d->audit, "stop");
    if (d->started) {
        /* totals of a daemon that served (one that failed to start has
           none to tell) */
        uint64_t nc = total(d, KR_STAT_ID_conn_accepted);
        uint64_t nq = total(d, KR_STAT_ID_requests);
        uint64_t np = total(d, KR_STAT_ID_responses);
        uint64_t bu = total(d, KR_STAT_ID_client_to_upstream_bytes);
        uint64_t bd = total(d, KR_STAT_ID_upstream_to_client_bytes);

        kr_log_notice("totals: %" PRIu64 " connection%s, %" PRIu64
                      " request%s (%" PRIu64 " audited while streamed), %"
                      PRIu64 " response%s (%" PRIu64
                      " held whole, %" PRIu64 " streamed), %" PRIu64
                      " byte%s up, %" PRIu64 " byte%s down (%" PRIu64
                      " of the two spliced)",
                      nc, plural((long long)nc), nq, plural((long long)nq),
                      total(d, KR_STAT_ID_requests_streamed),
                      np, plural((long long)np),
                      total(d, KR_STAT_ID_responses_held),
                      total(d, KR_STAT_ID_responses_streamed),
                      bu, plural((long long)bu), bd, plural((long long)bd),
                      total(d, KR_STAT_ID_spliced_bytes));
        legacy_report(d);
    }
    (void)kr_log_rl_flush();
}

/* A worker's thread (kr_daemon_spawn_workers): its loop, until stopped. */
static void *
worker_thread(void *arg)
{
    struct event_base *base = arg;

    (void)event_base_dispatch(base);
    return NULL;
}

int
kr_daemon_spawn_workers(struct kr_daemon *d, char *err, size_t errlen)
{
    int n = d->reuseport ? d->nsets - d->sets_given : 0;
    sigset_t all, old;
    int k, rc = KR_OK;

    if (n <= 0) {
        return KR_OK;
    }
    d->tbases = calloc((size_t)n, sizeof(*d->tbases));
    d->threads = calloc((size_t)n, sizeof(*d->threads));
    if (d->tbases == NULL || d->threads == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    /* signals go to the daemon's thread (libevent's signal events on
       d->base): the workers' threads block them, but for the faults a
       thread raises itself (a sanitizer's handler reports those) */
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGTRAP);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (k = 0; k < n; k++) {
        struct event_base *base = event_base_new();
        struct kr_worker *w;
        char name[16];
        int e;

        if (base == NULL) {
            snprintf(err, errlen, "out of memory");
            rc = KR_ERROR;
            break;
        }
        d->tbases[d->ntbases++] = base;
        w = kr_daemon_add_worker(d, base, true, err, errlen);
        if (w == NULL) {
            rc = KR_ERROR;
            break;
        }
        e = pthread_create(&d->threads[d->nthreads], NULL, worker_thread,
                           base);
        if (e != 0) {
            snprintf(err, errlen, "worker %d: cannot start its thread: %s",
                     w->index, strerror(e));
            rc = KR_ERROR;
            break;
        }
        snprintf(name, sizeof(name), "krelay-w%d", w->index);
        (void)pthread_setname_np(d->threads[d->nthreads], name);
        d->nthreads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == KR_OK) {
        kr_log_info("%d workers running: worker 0 on the main thread, "
                    "%d on threads of their own (krelay-w1...)",
                    d->nworkers, d->nthreads);
    }
    return rc;
}

void
kr_daemon_join(struct kr_daemon *d)
{
    int i;

    kr_daemon_stop(d);
    for (i = 0; i < d->nthreads; i++) {
        (void)pthread_join(d->threads[i], NULL);
    }
    d->nthreads = 0;
    stop_report(d);
}

void
kr_daemon_free(struct kr_daemon *d)
{
    int i;

    if (d == NULL) {
        return;
    }
    kr_daemon_join(d);
    for (i = 0; i < d->nworkers; i++) {
        kr_worker_free(d->workers[i]);
    }
    /* after their workers: the workers' events live on them */
    for (i = 0; i < d->ntbases; i++) {
        event_base_free(d->tbases[i]);
    }
    free(d->tbases);
    free(d->threads);
    free(d->workers);
    free(d->wset);
    for (i = 0; i < d->nsets; i++) {
        free_lset(d->sets[i]);
    }
    free(d->sets);
    clusters_free(d->clusters, d->nclusters);
    kr_conf_ref_put(d->audit_cref);
    kr_conf_ref_put(d->cref);
    kr_audit_ref_put(d->audit);
    if (d->own_base) {
        event_base_free(d->base);
    }
    pthread_mutex_destroy(&d->pub_lock);
    free(d);
}

const char *
kr_daemon_reopen(struct kr_daemon *d)
{
    return reopen_what(reopen_files(d));
}

uint16_t
kr_daemon_port(const struct kr_daemon *d, int gi, int32_t node_id)
{
    const struct kr_lgroup *lg;
    int i;

    if (d->nsets < 1 || gi < 0 || gi >= d->sets[0]->ng) {
        return 0;
    }
    lg = d->sets[0]->g[gi];
    for (i = 0; lg != NULL && i < lg->nsocks; i++) {
        if (lg->socks[i].node_id == node_id) {
            return kr_lsock_port(&lg->socks[i]);
        }
    }
    return 0;
}

/* ---- reload ------------------------------------------------------------- */

static bool
same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/*
 * Can the running group of [listener] a serve [listener] b as is?  The
 * same section, and no key changed that rebinds (kr_conf.h, the keys'
 * reload attribute).
 */
static bool
same_listeners(const struct kr_listener_conf *a,
               const struct kr_listener_conf *b)
{
    return same_str(a->name, b->name) &&
           !(kr_conf_listener_diff(a, b, NULL, NULL) & KR_RELOAD_REBIND);
}

static void
log_lines(int level, const char *prefix, const char *text)
{
    const char *l = text, *nl;

    while (l != NULL && *l != '\0') {
        nl = strchr(l, '\n');
        kr_log(level, "%s%.*s", prefix,
               (int)(nl != NULL ? nl - l : (ptrdiff_t)strlen(l)), l);
        l = nl != NULL ? nl + 1 : NULL;
    }
}

int
kr_daemon_reload(struct kr_daemon *d, const char *path)
{
    return reload(d, path, NULL, -1, false);
}

static int reload_conf(struct kr_daemon *d, struct kr_conf *nc, bool own,
                       const char *path, const char *by, int reopened,
                       bool ready);

int
kr_daemon_reload_conf(struct kr_daemon *d, struct kr_conf *nc, bool own)
{
    if (d->stopping) {
        if (own) {
            kr_conf_free(nc);
        }
        return KR_ERROR;
    }
    return reload_conf(d, nc, own, nc->path != NULL ? nc->path : "(config)",
                       NULL, -1, false);
}

/* "s" when n is not 1: "1 rule", "2 rules". */
static const char *
plural(long long n)
{
    return n == 1 ? "" : "s";
}

/*
 * What a reload builds for one socket set before it commits: the new
 * groups (kept ones are the running ones) and, per new group, the
 * running sockets it takes over.
 */
struct reload_set {
    struct kr_lgroup **ng;              /* nc->nlisteners */
    struct kr_lsock ***take;            /* nc->nlisteners, NULL or
                                           nsocks entries */
    struct kr_reuse ru;
};

static void
reload_set_free(struct reload_set *rs, int n, const int *keep, bool undo)
{
    int i;

    for (i = 0; i < n; i++) {
        if (rs->take != NULL) {
            free(rs->take[i]);
        }
        /* only the sockets bound for the new config close */
        if (undo && rs->ng != NULL && keep[i] < 0) {
            free_lgroup(rs->ng[i]);
        }
    }
    free(rs->take);
    free(rs->ng);
    free(rs->ru.drop);
    free(rs->ru.claimed);
}

/*
 * Bind set's new groups for nc (keep[i]: the running group i keeps, -1:
 * new; kept[j]: running group j is kept), sharing addresses as share
 * says (KR_LSOCK_JOIN: at the ports of set 0's new groups, rs0).
 * KR_ERROR with err: the caller undoes.
 */
static int
reload_bind(const struct kr_conf *nc, const struct kr_lset *set,
            const int *keep, const bool *kept, struct reload_set *rs,
            enum kr_lsock_share share, const struct reload_set *rs0,
            char *err, size_t errlen)
{
    int i, j, nclaim = 0;

    rs->ng = calloc((size_t)(nc->nlisteners ? nc->nlisteners : 1),
                    sizeof(*rs->ng));
    rs->take = calloc((size_t)(nc->nlisteners ? nc->nlisteners : 1),
                      sizeof(*rs->take));
    rs->ru.drop = calloc((size_t)(set->ng ? set->ng : 1),
                         sizeof(*rs->ru.drop));
    for (j = 0; rs->ru.drop != NULL && j < set->ng; j++) {
        if (!kept[j]) {
            rs->ru.drop[rs->ru.ndrop++] = set->g[j];
            nclaim += set->g[j]->nsocks;
        }
    }
    rs->ru.claimed = calloc((size_t)(nclaim ? nclaim : 1),
                            sizeof(*rs->ru.claimed));
    if (rs->ng == NULL || rs->take == NULL || rs->ru.drop == NULL ||
        rs->ru.claimed == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    for (i = 0; i < nc->nlisteners; i++) {
        if (keep[i] >= 0) {
            rs->ng[i] = set->g[keep[i]];
            continue;
        }
        struct kr_lref r = { rs0 != NULL ? rs0->ng[i] : NULL,
                             rs0 != NULL ? rs0->take[i] : NULL };

        if (bind_lgroup(nc, &nc->listeners[i], &rs->ng[i], &rs->ru,
                        &rs->take[i], share, &r, err, errlen) != KR_OK) {
            return KR_ERROR;
        }
    }
    return KR_OK;
}

/*
 * kr_daemon_reload; by names the signal that asked for it, reopened
 * what it reopened before (REOPEN_* bits; -1: it reopens nothing), which
 * the notice line says (reload_files); ready: sd_notify READY=1 once the
 * reload is done (reload_done), when it returns KR_OK (the caller says
 * it otherwise).
 */
static int
reload(struct kr_daemon *d, const char *path, const char *by,
       int reopened, bool ready)
{
    struct kr_conf *nc = NULL;
    char *errs = NULL;
    size_t elen = 0;
    FILE *ef;
    int64_t t0;
    int rc;

    if (d->stopping) {
        return KR_ERROR;
    }
    if (d->draining) {
        kr_log_warn("%s%sreload of %s refused: krelay is draining",
                    by != NULL ? by : "", by != NULL ? ": " : "", path);
        return KR_ERROR;
    }
    ef = open_memstream(&errs, &elen);
    t0 = kr_clock_mono_us();
    rc = kr_rule_load_with(path, d->load_opts, ef, &nc);
    if (rc == KR_OK) {
        atomic_store(&d->conf_load_us, kr_clock_mono_us() - t0);
    }
    if (ef != NULL) {
        fclose(ef);
    }
    if (rc != KR_OK) {
        log_lines(KR_LOG_ERROR, "reload refused: ", errs);
        if (geteuid() != 0 && errs != NULL &&
            strstr(errs, strerror(EACCES)) != NULL) {
            /* [process] user: started as root, the files were read */
            kr_log_error("reload: krelay runs as uid %u (no longer root: "
                         "[process] user): every file a reload reads "
                         "(the configuration, certificates, keys, "
                         "credentials) must be readable by it",
                         (unsigned)geteuid());
        }
        kr_log_error("%s%sreload of %s refused: the running configuration "
                     "stays", by != NULL ? by : "", by != NULL ? ": " : "",
                     path);
        free(errs);
        d->reloads_refused++;
        return KR_ERROR;
    }
    free(errs);
    if (d->reload_adjust != NULL) {
        char err[512];

        if (!d->reload_adjust(nc, d->reload_adjust_arg, err, sizeof(err))) {
            kr_log_error("%s%sreload of %s refused: %s: the running "
                         "configuration stays", by != NULL ? by : "",
                         by != NULL ? ": " : "", path, err);
            kr_conf_free(nc);
            d->reloads_refused++;
            return KR_ERROR;
        }
    }
    /* what `krelay -t` warns about, in the log (issue 14) */
    errs = NULL;
    elen = 0;
    ef = open_memstream(&errs, &elen);
    if (ef != NULL) {
        (void)kr_rule_warnings(nc->ruleset, ef);
        fclose(ef);
        log_lines(KR_LOG_WARN, "reload: warning: ", errs);
        free(errs);
    }
    return reload_conf(d, nc, true, path, by, reopened, ready);
}

/* kr_conf_listener_diff's callback: the keys that rebind, "a, b". */
struct rebind_keys {
    char s[256];
    size_t n;
};

static void
rebind_keys_cb(const struct kr_conf_change *ch, void *arg)
{
    struct rebind_keys *k = arg;
    int r;

    if (ch->key == NULL || ch->reload != KR_RELOAD_REBIND ||
        k->n >= sizeof(k->s)) {
        return;
    }
    r = snprintf(k->s + k->n, sizeof(k->s) - k->n, "%s%s",
                 k->n > 0 ? ", " : "", ch->key);
    k->n = r < 0 ? sizeof(k->s) : k->n + (size_t)r;
}

/*
 * A new [listener] nl that no running group serves as is: when the
 * running config oc has one of the same name, a key that rebinds changed
 * (listen, broker_port_base, node_id_*): say which, and what the reload
 * does (the workers then say how many connections stay).
 */
static void
rebind_said(const struct kr_conf *oc, const struct kr_listener_conf *nl,
            const char *path)
{
    struct rebind_keys k;
    int j;

    for (j = 0; j < oc->nlisteners; j++) {
        if (same_str(oc->listeners[j].name, nl->name)) {
            break;
        }
    }
    if (j == oc->nlisteners) {
        return;                         /* a new section */
    }
    memset(&k, 0, sizeof(k));
    (void)kr_conf_listener_diff(&oc->listeners[j], nl, rebind_keys_cb, &k);
    kr_log_notice("reload: %s:%d: [listener%s%s] %s changed: its listeners "
                  "are rebound (new addresses bound, a socket whose address "
                  "stays taken over with its accept queue, the others "
                  "closed); its open connections stay, with the values they "
                  "had",
                  path, nl->line, nl->name[0] ? " " : "", nl->name,
                  k.n > 0 ? k.s : "a key that rebinds");
}

/*
 * kr_conf_reload_diff's callback for a kept audit sink: an [audit] key
 * whose reload attribute is RESTART (queue_bytes) changed.  arg: the
 * config's path.
 */
static void
audit_restart_cb(const struct kr_conf_change *ch, void *arg)
{
    if (ch->key != NULL && ch->reload == KR_RELOAD_RESTART &&
        strcmp(ch->section, "audit") == 0) {
        kr_log_warn("reload: %s: [audit] %s changed: it needs a restart (or "
                    "a new target): the running audit sink keeps the value "
                    "it was opened with", (const char *)arg, ch->key);
    }
}

/*
 * kr_conf_reload_diff's callback: an [admin] key whose reload attribute
 * is RESTART (listen) changed, or the section came or went.  arg: the
 * config's path.
 */
static void
admin_restart_cb(const struct kr_conf_change *ch, void *arg)
{
    if (ch->reload == KR_RELOAD_RESTART &&
        strcmp(ch->section, "admin") == 0) {
        kr_log_warn("reload: %s: [admin]%s%s %s: the admin endpoint "
                    "changes only at a restart (it runs as krelay started "
                    "it)", (const char *)arg, ch->key != NULL ? " " : "",
                    ch->key != NULL ? ch->key : "",
                    ch->key != NULL           ? "changed"
                    : ch->new_index < 0 ? "removed"
                                              : "added");
    }
}

/*
 * kr_conf_reload_diff's callback: what a reload changes for new
 * connections only (NEWCONN, kr_conf.h): an [upstream] built anew, one
 * added or removed, a listener's upstream.  arg: the config's path.
 */
static void
newconn_cb(const struct kr_conf_change *ch, void *arg)
{
    if (ch->reload != KR_RELOAD_NEWCONN) {
        return;
    }
    if (strcmp(ch->section, "listener") == 0) {
        kr_log_notice("reload: %s:%d: [listener%s%s] upstream changed: its "
                      "new connections go to the new one, its open "
                      "connections stay with theirs", (const char *)arg,
                      ch->line, ch->name[0] ? " " : "", ch->name);
    } else if (ch->key != NULL) {
        kr_log_notice("reload: %s:%d: [upstream%s%s] %s changed: new "
                      "connections go to the upstream as configured now "
                      "(its metadata fetched anew); open connections stay "
                      "with the running one until they end",
                      (const char *)arg, ch->line, ch->name[0] ? " " : "",
                      ch->name, ch->key);
    } else if (ch->new_index < 0) {
        /* ch->line is the old file's: no line of the file as it is now */
        kr_log_notice("reload: %s: [upstream%s%s] removed (it was at line %d "
                      "before the reload): its open connections stay with "
                      "it until they end", (const char *)arg,
                      ch->name[0] ? " " : "", ch->name, ch->line);
    } else {
        kr_log_notice("reload: %s:%d: [upstream%s%s] added",
                      (const char *)arg, ch->line, ch->name[0] ? " " : "",
                      ch->name);
    }
}

/*
 * kr_conf_reload_diff's callback: a [process] key whose reload attribute
 * is RESTART (workers, user, group) changed.  arg: the config's path.
 */
static void
process_restart_cb(const struct kr_conf_change *ch, void *arg)
{
    if (ch->key != NULL && ch->reload == KR_RELOAD_RESTART &&
        strcmp(ch->section, "process") == 0) {
        kr_log_warn("reload: %s: [process] %s changed: it needs a restart "
                    "(krelay keeps running as it started)",
                    (const char *)arg, ch->key);
    }
}

/*
 * The end of a committed reload: its notice line, written once every
 * worker applied the new configuration (the last one's kr_wdone count,
 * on that worker's thread, or the daemon's own after it posted them all):
 * the line says the reload is done.  A worker that did not apply it
 * logged why (out of memory, stopping); the line counts them.  ready:
 * sd_notify READY=1 after the line (systemctl reload returns then).
 */
struct reload_done {
    char *line;                         /* the notice line, malloc'd */
    int nworkers;
    bool ready;
};

static void
reload_done(int applied, void *arg)
{
    struct reload_done *r = arg;

    if (applied < r->nworkers) {
        kr_log_notice("%s; %d of the %d workers did not apply it (said "
                      "above): they keep the configuration they had",
                      r->line, r->nworkers - applied, r->nworkers);
    } else {
        kr_log_notice("%s", r->line);
    }
    if (r->ready) {
        kr_proc_notify("READY=1");
    }
    free(r->line);
    free(r);
}

/*
 * What a reload from oc to nc does with the log and audit files, for the
 * end of its notice line (malloc'd; NULL: nothing to say, or out of
 * memory): a new audit sink (new_audit) for a target added or changed,
 * "audit target FILE opened (was OLD)"; audit turned off; a log target
 * changed; then what the signal reopened before (reopened: REOPEN_*
 * bits, -1 when no signal did) of the files the reload keeps, or, when
 * nothing else is said, that there was none to reopen.  Without the
 * first, a SIGHUP that added [audit] target = FILE said "no log or audit
 * file to reopen" as it opened FILE.
 */
static char *
reload_files(const struct kr_conf *oc, const struct kr_conf *nc,
             bool new_audit, int reopened)
{
    const char *what;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    bool log_same = same_str(nc->log.target, oc->log.target);

    if (f == NULL) {
        return NULL;
    }
    if (new_audit) {
        fprintf(f, "audit target %s opened", nc->audit.target);
        if (oc->audit.target != NULL) {
            fprintf(f, " (was %s)", oc->audit.target);
        }
    } else if (nc->audit.target == NULL && oc->audit.target != NULL) {
        fprintf(f, "audit off (was %s)", oc->audit.target);
    }
    if (!log_same) {
        fprintf(f, "%slog target %s (was %s)", ftell(f) > 0 ? "; " : "",
                nc->log.target != NULL ? nc->log.target : "stderr",
                oc->log.target != NULL ? oc->log.target : "stderr");
    }
    if (reopened >= 0) {
        /* the files replaced were reopened too, but are closed now */
        what = reopen_what((log_same ? reopened & REOPEN_LOG : 0) |
                           (!new_audit && nc->audit.target != NULL
                                ? reopened & REOPEN_AUDIT
                                : 0));
        if (what != NULL) {
            fprintf(f, "%sreopening %s", ftell(f) > 0 ? "; " : "", what);
        } else if (ftell(f) == 0) {
            fputs("no log or audit file to reopen", f);
        }
    }
    if (fclose(f) != 0 || len == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/*
 * reload, from the loaded config nc (freed at the end when own); ready as
 * reload's.
 */
static int
reload_conf(struct kr_daemon *d, struct kr_conf *nc, bool own,
            const char *path, const char *by, int reopened, bool ready)
{
    char *tail;
    struct kr_conf_ref *nref = NULL, *old = d->cref;
    const struct kr_conf *oc = old->conf;
    struct kr_audit *nau = NULL;
    struct kr_audit_ref *naref = NULL, *oaref;
    struct reload_set *rs = NULL;
    struct kr_wgen **gens = NULL;
    struct kr_cluster **ncl = NULL;
    struct reload_done *rd = NULL;
    struct kr_wdone *done = NULL;
    int *keep = NULL;
    bool *kept = NULL;
    char err[512];
    int i, j, s, opened = 0, nsets = d->nsets;

    /* issue 12: [upstream] changes apply to new connections (NEWCONN):
       the views of the sections kept, new ones for the others */
    ncl = clusters_for(oc, d->clusters, nc);
    if (ncl == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto refuse;
    }
    /* the audit sink: a new target opens first, so failure changes
       nothing */
    if (nc->audit.target != NULL &&
        (d->audit == NULL || !same_str(nc->audit.target,
                                       oc->audit.target))) {
        nau = kr_audit_open(nc->audit.target,
                            (size_t)nc->audit.queue_bytes, err,
                            sizeof(err));
        if (nau == NULL) {
            audit_err_where(nc, err, sizeof(err));
            goto refuse;
        }
        naref = kr_audit_ref_new(nau);
        if (naref == NULL) {
            kr_audit_close(nau);
            snprintf(err, sizeof(err), "out of memory");
            goto refuse;
        }
    }
    /* listeners: keep unchanged groups, open new ones */
    keep = calloc((size_t)(nc->nlisteners ? nc->nlisteners : 1),
                  sizeof(*keep));
    kept = calloc((size_t)(oc->nlisteners ? oc->nlisteners : 1),
                  sizeof(*kept));
    rs = calloc((size_t)nsets, sizeof(*rs));
    gens = calloc((size_t)(d->nworkers ? d->nworkers : 1), sizeof(*gens));
    if (keep == NULL || kept == NULL || rs == NULL || gens == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto refuse;
    }
    for (i = 0; i < nc->nlisteners; i++) {
        keep[i] = -1;
        for (j = 0; j < oc->nlisteners; j++) {
            if (!kept[j] &&
                same_listeners(&oc->listeners[j], &nc->listeners[i])) {
                kept[j] = true;
                keep[i] = j;
                break;
            }
        }
        if (keep[i] < 0) {
            opened++;
            rebind_said(oc, &nc->listeners[i], path);
        }
    }
    /*
     * Bind every new listener before touching a running one, so that a
     * refused reload leaves them all as they were.  A new listener on
     * the address of a dropped group's listener takes that socket over
     * at commit (no close and rebind: its accept queue stays).
     */
    for (s = 0; s < nsets; s++) {
        if (reload_bind(nc, d->sets[s], keep, kept, &rs[s],
                        !d->reuseport ? KR_LSOCK_ALONE
                        : s == 0      ? KR_LSOCK_FIRST
                                      : KR_LSOCK_JOIN,
                        s > 0 ? &rs[0] : NULL, err, sizeof(err)) != KR_OK) {
            goto undo;
        }
    }
    rd = calloc(1, sizeof(*rd));
    tail = reload_files(oc, nc, naref != NULL, reopened);
    if (rd != NULL &&
        asprintf(&rd->line, "%s%sreloaded %s: %d listener group%s (%d new), "
                 "%d rule%s%s%s", by != NULL ? by : "",
                 by != NULL ? ": " : "", path, nc->nlisteners,
                 plural(nc->nlisteners), opened, nc->nrules,
                 plural(nc->nrules), tail != NULL ? "; " : "",
                 tail != NULL ? tail : "") < 0) {
        rd->line = NULL;
    }
    free(tail);
    done = rd != NULL && rd->line != NULL ? kr_wdone_new(reload_done, rd)
                                          : NULL;
    nref = done != NULL ? kr_conf_ref_new(nc, own) : NULL;
    if (nref == NULL) {
        if (rd != NULL) {
            free(rd->line);
        }
        free(rd);
        free(done);                     /* no count ended: nothing ran */
        snprintf(err, sizeof(err), "out of memory");
        goto undo;
    }
    rd->nworkers = d->nworkers;
    rd->ready = ready;

    /* commit: the sockets */
    for (s = 0; s < nsets; s++) {
        for (i = 0; i < nc->nlisteners; i++) {
            if (keep[i] < 0) {
                /* the sets of other workers: set 0's lines say it */
                commit_lgroup(rs[s].ng[i], &nc->listeners[i],
                              rs[s].take[i], s == 0 || !d->reuseport);
            }
        }
    }
    /* the config and the sink the workers get */
    pthread_mutex_lock(&d->pub_lock);
    d->cref = nref;
    oaref = d->audit;
    d->audit = naref != NULL             ? naref
               : nc->audit.target != NULL ? kr_audit_ref_get(oaref)
                                          : NULL;
    pthread_mutex_unlock(&d->pub_lock);
    atomic_store(&d->conf_loaded_us, kr_clock_wall_us());
    (void)kr_conf_reload_diff(oc, nc, newconn_cb, (void *)path);
    clusters_free(d->clusters, d->nclusters);
    d->clusters = ncl;
    d->nclusters = nc->nupstreams;
    ncl = NULL;
    for (i = 0; i < d->nworkers; i++) {
        struct kr_lset tmp = { rs[d->wset[i]].ng, nc->nlisteners };

        gens[i] = worker_gen(d, d->workers[i]->base, &tmp, keep, err,
                             sizeof(err));
        if (gens[i] == NULL) {
            kr_log_error("reload: worker %d: %s: it keeps the "
                         "configuration it had", i, err);
        } else {
            gens[i]->done = kr_wdone_add(done);
        }
    }
    /* fan-out: the workers on this thread now, the others when their
       loop reads the mailbox */
    for (i = 0; i < d->nworkers; i++) {
        if (gens[i] == NULL) {
            continue;
        }
        if (d->workers[i]->base == d->base) {
            kr_worker_apply(d->workers[i], gens[i]);
        } else {
            kr_worker_post(d->workers[i], gens[i]);
        }
    }
    /* what no new listener took over closes now (the workers on this
       thread no longer accept on it; the others on duplicates, until
       they apply the reload) */
    for (s = 0; s < nsets; s++) {
        struct kr_lset *set = d->sets[s];

        for (j = 0; j < set->ng; j++) {
            if (!kept[j]) {
                free_lgroup(set->g[j]);
            }
        }
        free(set->g);
        set->g = rs[s].ng;
        set->ng = nc->nlisteners;
        rs[s].ng = NULL;
    }
    /* the config the sink runs with: a new one's, or the one it kept
       (whose changes that need a restart are said) */
    if (naref != NULL || d->audit == NULL) {
        kr_conf_ref_put(d->audit_cref);
        d->audit_cref = naref != NULL ? kr_conf_ref_get(nref) : NULL;
    } else if (d->audit_cref != NULL) {
        (void)kr_conf_reload_diff(d->audit_cref->conf, nc, audit_restart_cb,
                                  (void *)path);
    }
    (void)kr_conf_reload_diff(oc, nc, admin_restart_cb, (void *)path);
    (void)kr_conf_reload_diff(oc, nc, process_restart_cb, (void *)path);
    /* the drops of the sink that was running */
    audit_report(oaref, "reload");
    kr_audit_ref_put(oaref);
    kr_log_level_cur = nc->log.level + d->log_verbose > KR_LOG_TRACE
                           ? KR_LOG_TRACE
                           : nc->log.level + d->log_verbose;
    if (!same_str(nc->log.target, oc->log.target)) {
        kr_log_close();
        if (nc->log.target != NULL &&
            strcmp(nc->log.target, "stderr") != 0 &&
            kr_log_open(nc->log.target, "krelay") != KR_OK) {
            char where[KR_PATH_WHERE];

            kr_log_error("reload: %s: cannot open log %s: %s; logging to "
                         "stderr", kr_conf_where(nc, nc->log.target_line,
                                                 where, sizeof(where)),
                         nc->log.target, strerror(errno));
        }
    }
    for (s = 0; s < nsets; s++) {
        reload_set_free(&rs[s], nc->nlisteners, keep, false);
    }
    free(rs);
    free(gens);
    free(keep);
    free(kept);
    d->reloads++;
    /* the notice line: now, or when the last worker applied it */
    kr_wdone_end(done, KR_WDONE_POSTED);
    /*
     * Only now: the old config (oc, and path, which may be its own
     * path string) is used up to here (the line was written from them
     * when the reload committed).  Sessions and workers may still hold
     * it; else it goes here.
     */
    kr_conf_ref_put(old);
    return KR_OK;

undo:
    for (s = 0; s < nsets; s++) {
        reload_set_free(&rs[s], nc->nlisteners, keep, true);
    }
refuse:
    kr_log_error("%s%sreload of %s refused: %s; the running configuration "
                 "stays", by != NULL ? by : "", by != NULL ? ": " : "", path,
                 err);
    free(rs);
    free(gens);
    free(keep);
    free(kept);
    clusters_free(ncl, nc->nupstreams);
    kr_audit_ref_put(naref);
    if (own) {
        kr_conf_free(nc);
    }
    d->reloads_refused++;
    return KR_ERROR;
}
