/*
 * kr_worker.c - one event loop: its listener groups, sessions, upstreams,
 * pipes; generations (start, reload, stop) applied in order.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kr_audit.h"
#include "kr_cluster.h"
#include "kr_frame.h"
#include "kr_log.h"
#include "kr_rule.h"
#include "kr_session.h"
#include "kr_upstream.h"
#include "kr_worker.h"

/* ---- references --------------------------------------------------------- */

struct kr_audit_ref *
kr_audit_ref_new(struct kr_audit *au)
{
    struct kr_audit_ref *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    r->au = au;
    atomic_init(&r->refs, 1);
    return r;
}

struct kr_audit_ref *
kr_audit_ref_get(struct kr_audit_ref *r)
{
    if (r != NULL) {
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    }
    return r;
}

void
kr_audit_ref_put(struct kr_audit_ref *r)
{
    if (r == NULL ||
        atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) > 1) {
        return;
    }
    kr_audit_close(r->au);
    free(r);
}

/* ---- generations -------------------------------------------------------- */

struct kr_wgen *
kr_wgen_new(struct kr_conf_ref *cref, struct kr_audit_ref *audit,
            int ngroups)
{
    struct kr_wgen *gen = calloc(1, sizeof(*gen));
    int i;

    if (gen == NULL) {
        return NULL;
    }
    gen->g = calloc((size_t)(ngroups > 0 ? ngroups : 1), sizeof(*gen->g));
    if (gen->g == NULL) {
        free(gen);
        return NULL;
    }
    for (i = 0; i < ngroups; i++) {
        gen->g[i].keep = -1;
    }
    gen->ngroups = ngroups;
    gen->cref = cref;
    gen->audit = audit;
    return gen;
}

int
kr_wgen_set_clusters(struct kr_wgen *gen, struct kr_cluster **cl, int n)
{
    struct kr_cluster **mine;
    int i;

    if (cl == NULL || n <= 0) {
        return KR_OK;
    }
    mine = calloc((size_t)n, sizeof(*mine));
    if (mine == NULL) {
        return KR_ERROR;
    }
    for (i = 0; i < n; i++) {
        mine[i] = kr_cluster_ref(cl[i]);
    }
    gen->clusters = mine;
    gen->nclusters = n;
    return KR_OK;
}

struct kr_wdone *
kr_wdone_new(kr_wdone_fn fn, void *arg)
{
    struct kr_wdone *d = calloc(1, sizeof(*d));

    if (d == NULL) {
        return NULL;
    }
    atomic_init(&d->left, 1);
    atomic_init(&d->applied, 0);
    d->fn = fn;
    d->arg = arg;
    return d;
}

struct kr_wdone *
kr_wdone_add(struct kr_wdone *d)
{
    atomic_fetch_add_explicit(&d->left, 1, memory_order_relaxed);
    return d;
}

void
kr_wdone_end(struct kr_wdone *d, enum kr_wdone_end end)
{
    if (end == KR_WDONE_APPLIED) {
        atomic_fetch_add_explicit(&d->applied, 1, memory_order_relaxed);
    }
    /* acq_rel: the last sees every applied count (and what the workers
       did before theirs) */
    if (atomic_fetch_sub_explicit(&d->left, 1, memory_order_acq_rel) > 1) {
        return;
    }
    d->fn(atomic_load_explicit(&d->applied, memory_order_relaxed), d->arg);
    free(d);
}

void
kr_wgen_free(struct kr_wgen *gen)
{
    int i, j;

    if (gen == NULL) {
        return;
    }
    if (gen->done != NULL) {
        kr_wdone_end(gen->done, gen->applied ? KR_WDONE_APPLIED
                                             : KR_WDONE_DROPPED);
    }
    for (i = 0; i < gen->ngroups; i++) {
        for (j = 0; gen->g[i].own && j < gen->g[i].nsocks; j++) {
            kr_lsock_close(&gen->g[i].socks[j]);
        }
        free(gen->g[i].socks);
    }
    free(gen->g);
    for (i = 0; gen->clusters != NULL && i < gen->nclusters; i++) {
        kr_cluster_put(gen->clusters[i]);
    }
    free(gen->clusters);
    kr_conf_ref_put(gen->cref);
    kr_audit_ref_put(gen->audit);
    free(gen);
}

/* ---- the worker --------------------------------------------------------- */

static void mailbox_cb(evutil_socket_t fd, short what, void *arg);
static void call_cb(evutil_socket_t fd, short what, void *arg);

struct kr_wcall {
    struct kr_wcall *next;
    kr_worker_call_fn fn;
    void *arg;
};

struct kr_worker *
kr_worker_new(struct event_base *base, int index, _Atomic uint64_t *ids,
              bool mailbox)
{
    struct kr_worker *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        return NULL;
    }
    w->base = base;
    w->index = index;
    w->mb_fd = -1;
    w->call_fd = -1;
    w->scratch = malloc(KR_FRAME_PEEK_MAX + KR_FRAME_PREFIX);
    w->host.hold = evbuffer_new();
    if (w->scratch == NULL || w->host.hold == NULL) {
        free(w->scratch);
        if (w->host.hold != NULL) {
            evbuffer_free(w->host.hold);
        }
        free(w);
        return NULL;
    }
    atomic_init(&w->own_ids, 0);
    atomic_init(&w->drain_seen, false);
    w->ids = ids != NULL ? ids : &w->own_ids;
    w->host.base = base;
    w->host.cref = &w->cref;
    w->host.audit = &w->audit;
    w->host.scratch = w->scratch;
    w->host.sessions = &w->sessions;
    w->host.pipes = &w->pipes;
    w->host.stats = &w->stats;
    w->host.ids = w->ids;
    w->host.worker = index;
    w->host.seq = &w->seq;
    w->host.group_release = kr_worker_group_release;
    w->call_tail = &w->call_head;
    if (pthread_mutex_init(&w->call_lock, NULL) != 0) {
        free(w->scratch);
        evbuffer_free(w->host.hold);
        free(w);
        return NULL;
    }
    w->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    w->call_ev = w->call_fd < 0 ? NULL
                                : event_new(base, w->call_fd,
                                            EV_READ | EV_PERSIST, call_cb, w);
    if (w->call_ev == NULL || event_add(w->call_ev, NULL) != 0) {
        kr_worker_free(w);
        return NULL;
    }
    if (mailbox) {
        w->mb_tail = &w->mb_head;
        w->mb_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->mb_fd < 0 || pthread_mutex_init(&w->mb_lock, NULL) != 0) {
            if (w->mb_fd >= 0) {
                close(w->mb_fd);
                w->mb_fd = -1;
            }
            kr_worker_free(w);
            return NULL;
        }
        w->has_mailbox = true;
        w->mb_ev = event_new(base, w->mb_fd, EV_READ | EV_PERSIST,
                             mailbox_cb, w);
        if (w->mb_ev == NULL || event_add(w->mb_ev, NULL) != 0) {
            kr_worker_free(w);
            return NULL;
        }
    }
    return w;
}

/* May sa send lc's listener a PROXY protocol header (issue 12)? */
static bool
proxy_trusted(const struct kr_listener_conf *lc, const struct sockaddr *sa)
{
    int i;

    for (i = 0; i < lc->nproxy_protocol_from; i++) {
        if (kr_cidr_match(&lc->proxy_protocol_from[i], sa)) {
            return true;
        }
    }
    return false;
}

/* ---- closed at accept while draining ------------------------------------ */

/* How long a connection closed at accept while draining is read after its
   FIN, at most, ms (a client that neither closes nor stops sending). */
#define KR_LINGER_MS 2000
/* At most this many at once per worker; past it a close is plain. */
#define KR_LINGER_MAX 1024

/* One connection closed at accept while draining (kr_worker.h). */
struct kr_linger {
    struct kr_linger *next, **pprev;
    struct kr_worker *w;
    struct event *ev;
    evutil_socket_t fd;
};

static void
linger_end(struct kr_linger *lg)
{
    *lg->pprev = lg->next;
    if (lg->next != NULL) {
        lg->next->pprev = lg->pprev;
    }
    lg->w->nlingers--;
    event_free(lg->ev);
    close(lg->fd);
    free(lg);
}

/* Read and drop what the client sends until its EOF, an error, or the
   timeout: then close (nothing unread left: no RST). */
static void
linger_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_linger *lg = arg;
    uint8_t buf[4096];
    ssize_t n;

    if (what & EV_TIMEOUT) {
        linger_end(lg);
        return;
    }
    do {
        n = read(fd, buf, sizeof(buf));
    } while (n > 0);
    if (n == 0 || !kr_conn_again(errno)) {
        linger_end(lg);
    }
}

/* Close fd, accepted while draining, with FIN and never RST (kr_worker.h):
   shut its write side now, read until the client's FIN, then close. */
static void
drain_close(struct kr_worker *w, evutil_socket_t fd)
{
    struct timeval tv = { KR_LINGER_MS / 1000, (KR_LINGER_MS % 1000) * 1000 };
    struct kr_linger *lg;

    KR_STAT_INC(&w->stats, conn_drain_closed);
    if (w->nlingers >= KR_LINGER_MAX || shutdown(fd, SHUT_WR) != 0 ||
        evutil_make_socket_nonblocking(fd) != 0 ||
        (lg = calloc(1, sizeof(*lg))) == NULL) {
        close(fd);
        return;
    }
    lg->w = w;
    lg->fd = fd;
    lg->ev = event_new(w->base, fd, EV_READ | EV_PERSIST, linger_cb, lg);
    if (lg->ev == NULL || event_add(lg->ev, &tv) != 0) {
        if (lg->ev != NULL) {
            event_free(lg->ev);
        }
        free(lg);
        close(fd);
        return;
    }
    lg->next = w->lingers;
    if (lg->next != NULL) {
        lg->next->pprev = &lg->next;
    }
    lg->pprev = &w->lingers;
    w->lingers = lg;
    w->nlingers++;
}

static void
accept_cb(struct kr_listener *l, evutil_socket_t fd,
          const struct sockaddr *sa, socklen_t salen, void *arg)
{
    struct kr_group *g = arg;
    struct kr_worker *w = g->w;

    if (w->stopping) {
        close(fd);
        return;
    }
    if (w->draining) {
        drain_close(w, fd);
        return;
    }
    if (g->nconn >= g->lc->max_connections) {
        char peer[64];

        KR_STAT_INC(&w->stats, conn_refused);
        close(fd);
        kr_log_rl(KR_LOG_WARN, "listener %s (%s): max_connections %lld "
                  "reached, refused %s", l->label, l->addrstr,
                  (long long)g->lc->max_connections,
                  kr_sockaddr_str(sa, salen, peer, sizeof(peer)));
        return;
    }
    if (g->lc->proxy_protocol != 0 && !proxy_trusted(g->lc, sa)) {
        char peer[64];

        KR_STAT_INC(&w->stats, conn_proxy_untrusted);
        close(fd);
        kr_log_rl(KR_LOG_WARN, "listener %s (%s): %s is not in "
                  "proxy_protocol_from: closed at accept (the listener takes "
                  "connections only through the proxies trusted to send a "
                  "PROXY protocol header)", l->label, l->addrstr,
                  kr_sockaddr_str(sa, salen, peer, sizeof(peer)));
        return;
    }
    (void)kr_session_new(&w->host, g, l, fd, sa, salen);
}

static void
close_group(struct kr_group *g)
{
    int j;

    for (j = 0; g != NULL && g->listeners != NULL && j < g->nlisteners;
         j++) {
        kr_listener_close(&g->listeners[j]);
    }
}

static void
free_group(struct kr_group *g)
{
    if (g == NULL) {
        return;
    }
    close_group(g);
    free(g->listeners);
    if (g->cref != NULL) {
        kr_conf_ref_put(g->cref);
    }
    free(g);
}

static bool
same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/*
 * The upstream of [listener] lc of conf (w->ups is parallel to conf's
 * upstreams); NULL when none.
 */
static struct kr_upstream *
group_upstream(const struct kr_worker *w, const struct kr_conf *conf,
               const struct kr_listener_conf *lc)
{
    ptrdiff_t ui;

    if (lc->up == NULL) {
        return w->nups > 0 ? w->ups[0] : NULL;
    }
    ui = lc->up - conf->upstreams;
    return ui >= 0 && ui < w->nups ? w->ups[ui] : NULL;
}

/*
 * The kr_upstream of [upstream] section i of gen's config (issue 12):
 * one of w's running ones when it serves it as is (the same cluster view
 * from the daemon; without views, the same name and no NEWCONN key
 * changed), else a new one.  taken marks the running ones used.  NULL
 * on ENOMEM.
 */
static struct kr_upstream *
gen_upstream(struct kr_worker *w, const struct kr_wgen *gen, int i,
             bool *taken)
{
    const struct kr_upstream_conf *nu = &gen->cref->conf->upstreams[i];
    struct kr_cluster *cl = gen->clusters != NULL && i < gen->nclusters
                                ? gen->clusters[i]
                                : NULL;
    int j;

    for (j = 0; taken != NULL && j < w->nups; j++) {
        const struct kr_upstream_conf *ou = kr_upstream_conf(w->ups[j]);

        if (taken[j] || w->ups[j] == NULL) {
            continue;
        }
        if (cl != NULL ? kr_upstream_cluster(w->ups[j]) == cl
                       : same_str(ou->name, nu->name) &&
                             !(kr_conf_upstream_diff(ou, nu, NULL, NULL) &
                               KR_RELOAD_NEWCONN)) {
            taken[j] = true;
            return w->ups[j];
        }
    }
    return kr_upstream_new_shared(w->base, w->dns, nu, cl, gen->cref);
}

/*
 * A new group for section gg of lc: accept on its sockets (taken from gg:
 * the owned fds are the group's now).  NULL with a message in err.
 */
static struct kr_group *
new_group(struct kr_worker *w, const struct kr_conf *conf,
          const struct kr_listener_conf *lc, struct kr_wgen_group *gg,
          char *err, size_t errlen)
{
    struct kr_group *g = calloc(1, sizeof(*g));
    int i;

    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->w = w;
    g->lc = lc;
    g->up = group_upstream(w, conf, lc);
    g->nlisteners = gg->nsocks;
    g->listeners = calloc((size_t)(gg->nsocks ? gg->nsocks : 1),
                          sizeof(*g->listeners));
    if (g->listeners == NULL) {
        snprintf(err, errlen, "out of memory");
        free(g);
        return NULL;
    }
    for (i = 0; i < gg->nsocks; i++) {
        struct kr_lsock *ls = &gg->socks[i];
        int fd = ls->fd;

        ls->fd = -1;                    /* the listener's now, or closed */
        if (kr_listener_attach(&g->listeners[i], w->base, ls, fd, gg->own,
                               accept_cb, g, err, errlen) != KR_OK) {
            free_group(g);
            return NULL;
        }
    }
    return g;
}

int
kr_worker_start(struct kr_worker *w, struct kr_wgen *gen, char *err,
                size_t errlen)
{
    const struct kr_conf *conf = gen->cref->conf;
    int i;

    w->dns = evdns_base_new(w->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                            EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (w->dns == NULL) {
        /* no usable resolv.conf: numeric addresses still work */
        w->dns = evdns_base_new(w->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    }
    if (w->dns == NULL) {
        snprintf(err, errlen, "cannot create the DNS resolver");
        kr_wgen_free(gen);
        return KR_ERROR;
    }
    w->audit_ref = gen->audit;
    gen->audit = NULL;
    w->audit = w->audit_ref != NULL ? w->audit_ref->au : NULL;
    w->ups = calloc((size_t)(conf->nupstreams ? conf->nupstreams : 1),
                    sizeof(*w->ups));
    w->groups = calloc((size_t)(gen->ngroups ? gen->ngroups : 1),
                       sizeof(*w->groups));
    if (w->ups == NULL || w->groups == NULL) {
        snprintf(err, errlen, "out of memory");
        kr_wgen_free(gen);
        return KR_ERROR;
    }
    for (i = 0; i < conf->nupstreams; i++) {
        w->ups[i] = gen_upstream(w, gen, i, NULL);
        if (w->ups[i] == NULL) {
            snprintf(err, errlen, "out of memory");
            kr_wgen_free(gen);
            return KR_ERROR;
        }
        w->nups = i + 1;
    }
    w->cref = gen->cref;
    gen->cref = NULL;
    for (i = 0; i < gen->ngroups; i++) {
        w->groups[i] = new_group(w, conf, &conf->listeners[i], &gen->g[i],
                                 err, errlen);
        if (w->groups[i] == NULL) {
            kr_wgen_free(gen);
            return KR_ERROR;
        }
        w->ngroups = i + 1;
    }
    kr_wgen_free(gen);
    w->started = true;
    return KR_OK;
}

/* "s" when n is not 1: "1 rule", "2 rules". */
static const char *
plural(long long n)
{
    return n == 1 ? "" : "s";
}

/*
 * /metrics names a rule_hits cell by the rule at its index in the running
 * configuration: the cells of an index whose rule is another one in nc
 * (removed, renamed, or another rule moved there) start again from 0,
 * so that no count is shown under another rule's name.
 */
static void
rule_hits_follow(struct kr_worker *w, const struct kr_conf *oc,
                 const struct kr_conf *nc)
{
    int i, n = oc->nrules > nc->nrules ? oc->nrules : nc->nrules;

    for (i = 0; i < n; i++) {
        const char *a = i < oc->nrules ? oc->rules[i].name : NULL;
        const char *b = i < nc->nrules ? nc->rules[i].name : NULL;

        if (a == NULL || b == NULL || strcmp(a, b) != 0) {
            kr_stats_rule_reset(&w->stats, i);
        }
    }
}

void
kr_worker_apply(struct kr_worker *w, struct kr_wgen *gen)
{
    const struct kr_conf *nc;
    struct kr_group **ng;
    struct kr_upstream **nups;
    bool *kept, *taken;
    char err[256];
    int i, j;

    if (gen->stop) {
        kr_wgen_free(gen);
        kr_worker_stop(w);
        return;
    }
    if (gen->drain) {
        kr_wgen_free(gen);
        kr_worker_drain(w);
        return;
    }
    if (w->stopping) {
        kr_wgen_free(gen);
        return;
    }
    nc = gen->cref->conf;
    ng = calloc((size_t)(gen->ngroups ? gen->ngroups : 1), sizeof(*ng));
    kept = calloc((size_t)(w->ngroups ? w->ngroups : 1), sizeof(*kept));
    nups = calloc((size_t)(nc->nupstreams ? nc->nupstreams : 1),
                  sizeof(*nups));
    taken = calloc((size_t)(w->nups ? w->nups : 1), sizeof(*taken));
    if (ng == NULL || kept == NULL || nups == NULL || taken == NULL) {
        /* the running generation stays */
        kr_log_error("reload: worker %d: out of memory: it keeps the "
                     "configuration it had", w->index);
        free(ng);
        free(kept);
        free(nups);
        free(taken);
        kr_wgen_free(gen);
        return;
    }
    /* issue 12: the upstreams of the new config: the running ones that
       serve a section as is, new ones for the others (NEWCONN) */
    for (i = 0; i < nc->nupstreams; i++) {
        const struct kr_upstream_conf *nu = &nc->upstreams[i];

        nups[i] = gen_upstream(w, gen, i, taken);
        if (nups[i] == NULL) {
            kr_log_error("reload: worker %d: [upstream%s%s]: out of memory: "
                         "its listeners' new connections are closed",
                         w->index, nu->name[0] ? " " : "", nu->name);
        } else if (kr_upstream_conf(nups[i]) != nu) {
            /* a running one: new connections use the TLS files (issue
               8) and SASL credentials (issue 9) of the new section */
            kr_upstream_set_tls(nups[i], nu->tls);
            kr_upstream_set_sasl(nups[i], nu);
        }
    }
    /* the running ones no section kept: their sessions keep them until
       they end (a reference each); the section they were made from is
       theirs (kept alive by the upstream) */
    for (j = 0; j < w->nups; j++) {
        if (!taken[j] && w->ups[j] != NULL) {
            kr_upstream_set_sasl(w->ups[j], NULL);
            kr_upstream_unref(w->ups[j]);
        }
    }
    free(taken);
    free(w->ups);
    w->ups = nups;
    w->nups = nc->nupstreams;
    for (i = 0; i < gen->ngroups; i++) {
        int k = gen->g[i].keep;

        if (k >= 0 && k < w->ngroups && w->groups[k] != NULL && !kept[k]) {
            kept[k] = true;
            ng[i] = w->groups[k];
            ng[i]->lc = &nc->listeners[i];
            /* its new connections: the section's upstream now */
            ng[i]->up = group_upstream(w, nc, ng[i]->lc);
        }
    }
    /* the sections no longer configured: their listeners close now,
       before a new section may accept on one of their sockets */
    for (j = 0; j < w->ngroups; j++) {
        if (!kept[j]) {
            close_group(w->groups[j]);
        }
    }
    for (i = 0; i < gen->ngroups; i++) {
        if (ng[i] != NULL) {
            continue;
        }
        ng[i] = new_group(w, nc, &nc->listeners[i], &gen->g[i], err,
                          sizeof(err));
        if (ng[i] == NULL) {
            kr_log_error("reload: worker %d: [listener%s%s]: %s", w->index,
                         nc->listeners[i].name[0] ? " " : "",
                         nc->listeners[i].name, err);
        }
    }
    for (j = 0; j < w->ngroups; j++) {
        struct kr_group *g = w->groups[j], **og;
        bool rebound = false;

        if (kept[j] || g == NULL) {
            continue;
        }
        /* a section of the same name: rebound (a key that rebinds
           changed, the daemon said which), not removed */
        for (i = 0; i < nc->nlisteners && !rebound; i++) {
            rebound = strcmp(nc->listeners[i].name, g->lc->name) == 0;
        }
        kr_log_notice("reload: [listener%s%s] %s its %lld connection%s "
                      "stay%s%s", g->lc->name[0] ? " " : "", g->lc->name,
                      rebound ? "rebound:"
                              : "removed: its listeners are closed,",
                      (long long)g->nconn, plural(g->nconn),
                      g->nconn == 1 ? "s" : "",
                      rebound ? ", with the values they had" : "");
        g->up = NULL;                   /* its sessions hold their own */
        if (g->nconn == 0) {
            free_group(g);
            continue;
        }
        g->removed = true;
        g->cref = kr_conf_ref_get(w->cref);
        og = realloc(w->old_groups,
                     sizeof(*og) * (size_t)(w->nold_groups + 1));
        if (og == NULL) {
            /* cannot track it: it lives until the worker is freed */
            g->removed = false;
            continue;
        }
        w->old_groups = og;
        w->old_groups[w->nold_groups++] = g;
    }
    /* a section whose group could not be made stays NULL: the indexes
       are the daemon's (kr_wgen_group.keep) */
    free(w->groups);
    free(kept);
    w->groups = ng;
    w->ngroups = gen->ngroups;
    rule_hits_follow(w, w->cref->conf, nc);
    kr_conf_ref_put(w->cref);
    w->cref = gen->cref;
    gen->cref = NULL;
    kr_audit_ref_put(w->audit_ref);
    w->audit_ref = gen->audit;
    gen->audit = NULL;
    w->audit = w->audit_ref != NULL ? w->audit_ref->au : NULL;
    gen->applied = true;
    kr_wgen_free(gen);
}

static void
mailbox_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_worker *w = arg;
    struct kr_wgen *gen, *next;
    uint64_t n;

    (void)what;
    while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&w->mb_lock);
    gen = w->mb_head;
    w->mb_head = NULL;
    w->mb_tail = &w->mb_head;
    pthread_mutex_unlock(&w->mb_lock);
    for (; gen != NULL; gen = next) {
        next = gen->next;
        gen->next = NULL;
        kr_worker_apply(w, gen);
    }
}

void
kr_worker_post(struct kr_worker *w, struct kr_wgen *gen)
{
    uint64_t one = 1;

    gen->next = NULL;
    pthread_mutex_lock(&w->mb_lock);
    *w->mb_tail = gen;
    w->mb_tail = &gen->next;
    pthread_mutex_unlock(&w->mb_lock);
    while (write(w->mb_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

/* Take every queued call (and, with close, refuse new ones). */
static struct kr_wcall *
calls_take(struct kr_worker *w, bool close)
{
    struct kr_wcall *c;

    pthread_mutex_lock(&w->call_lock);
    c = w->call_head;
    w->call_head = NULL;
    w->call_tail = &w->call_head;
    if (close) {
        w->calls_closed = true;
    }
    pthread_mutex_unlock(&w->call_lock);
    return c;
}

/* Run (w) or cancel (NULL) a list of calls, freeing them. */
static void
calls_run(struct kr_worker *w, struct kr_wcall *c)
{
    struct kr_wcall *next;

    for (; c != NULL; c = next) {
        next = c->next;
        c->fn(w, c->arg);
        free(c);
    }
}

static void
call_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_worker *w = arg;
    uint64_t n;

    (void)what;
    while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR) {
    }
    calls_run(w, calls_take(w, false));
}

int
kr_worker_call(struct kr_worker *w, kr_worker_call_fn fn, void *arg)
{
    struct kr_wcall *c = malloc(sizeof(*c));
    uint64_t one = 1;

    if (c == NULL) {
        return KR_ERROR;
    }
    c->next = NULL;
    c->fn = fn;
    c->arg = arg;
    pthread_mutex_lock(&w->call_lock);
    if (w->calls_closed) {
        pthread_mutex_unlock(&w->call_lock);
        free(c);
        return KR_ERROR;
    }
    *w->call_tail = c;
    w->call_tail = &c->next;
    pthread_mutex_unlock(&w->call_lock);
    while (write(w->call_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    return KR_OK;
}

void
kr_worker_drain(struct kr_worker *w)
{
    struct kr_session *s, *next;

    if (w->draining || w->stopping) {
        return;
    }
    w->draining = true;
    atomic_store_explicit(&w->drain_seen, true, memory_order_release);
    for (s = w->sessions; s != NULL; s = next) {
        next = s->next;                 /* s may be freed */
        (void)kr_session_drain(s);
    }
}

void
kr_worker_stop(struct kr_worker *w)
{
    int i;

    if (w->stopping) {
        return;
    }
    w->stopping = true;
    /* the calls queued are cancelled: their callers stop waiting */
    calls_run(NULL, calls_take(w, true));
    for (i = 0; i < w->ngroups; i++) {
        close_group(w->groups[i]);
    }
    while (w->sessions != NULL) {
        kr_session_close(w->sessions, KR_LOG_INFO, "krelay is stopping");
    }
    while (w->lingers != NULL) {
        linger_end(w->lingers);
    }
    for (i = 0; i < w->nups; i++) {
        if (w->ups[i] != NULL) {
            /* the sessions are closed: the last reference */
            kr_upstream_unref(w->ups[i]);
            w->ups[i] = NULL;
        }
    }
    event_base_loopbreak(w->base);
}

void
kr_worker_free(struct kr_worker *w)
{
    struct kr_wgen *gen, *next;
    int i;

    if (w == NULL) {
        return;
    }
    kr_worker_stop(w);
    kr_pipe_pool_free(&w->pipes);
    for (i = 0; w->groups != NULL && i < w->ngroups; i++) {
        free_group(w->groups[i]);
    }
    free(w->groups);
    for (i = 0; i < w->nold_groups; i++) {
        free_group(w->old_groups[i]);
    }
    free(w->old_groups);
    free(w->ups);
    if (w->dns != NULL) {
        evdns_base_free(w->dns, 0);
    }
    if (w->has_mailbox) {
        for (gen = w->mb_head; gen != NULL; gen = next) {
            next = gen->next;
            kr_wgen_free(gen);
        }
        pthread_mutex_destroy(&w->mb_lock);
    }
    if (w->mb_ev != NULL) {
        event_free(w->mb_ev);
    }
    calls_run(NULL, calls_take(w, true));
    if (w->call_ev != NULL) {
        event_free(w->call_ev);
    }
    if (w->call_fd >= 0) {
        close(w->call_fd);
    }
    pthread_mutex_destroy(&w->call_lock);
    if (w->mb_fd >= 0) {
        close(w->mb_fd);
    }
    kr_conf_ref_put(w->cref);
    kr_audit_ref_put(w->audit_ref);
    free(w->scratch);
    evbuffer_free(w->host.hold);
    free(w);
}

void
kr_worker_group_release(struct kr_group *g)
{
    struct kr_worker *w = g->w;
    int i;

    if (!g->removed || g->nconn > 0) {
        return;
    }
    for (i = 0; i < w->nold_groups; i++) {
        if (w->old_groups[i] == g) {
            w->old_groups[i] = w->old_groups[--w->nold_groups];
            break;
        }
    }
    free_group(g);
}

uint16_t
kr_worker_port(const struct kr_worker *w, int gi, int32_t node_id)
{
    const struct kr_group *g;
    int i;

    if (gi < 0 || gi >= w->ngroups) {
        return 0;
    }
    g = w->groups[gi];
    for (i = 0; g != NULL && i < g->nlisteners; i++) {
        if (g->listeners[i].node_id == node_id) {
            return kr_listener_port(&g->listeners[i]);
        }
    }
    return 0;
}

