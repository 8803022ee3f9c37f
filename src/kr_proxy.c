/*
 * kr_proxy.c - the daemon: event_base, evdns, upstreams, listener groups,
 * sessions, signals; start and stop in that order and back.
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
#include <time.h>
#include <unistd.h>

#include "kr_audit.h"
#include "kr_frame.h"
#include "kr_log.h"
#include "kr_proxy.h"
#include "kr_rewrite.h"
#include "kr_rule.h"
#include "kr_session.h"
#include "kr_upstream.h"

#define KR_LISTEN_BACKLOG 1024

struct kr_conf_ref *
kr_conf_ref_get(struct kr_conf_ref *r)
{
    r->refs++;
    return r;
}

void
kr_conf_ref_put(struct kr_conf_ref *r)
{
    if (r == NULL || --r->refs > 0) {
        return;
    }
    if (r->owned) {
        kr_conf_free(r->conf);
    }
    free(r);
}

struct kr_proxy *
kr_proxy_new(struct kr_conf *conf, bool own_conf, struct event_base *base)
{
    struct kr_proxy *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        return NULL;
    }
    p->cref = calloc(1, sizeof(*p->cref));
    p->scratch = malloc(KR_FRAME_PEEK_MAX + KR_FRAME_PREFIX);
    if (p->cref == NULL || p->scratch == NULL) {
        free(p->cref);
        free(p->scratch);
        free(p);
        return NULL;
    }
    p->cref->conf = conf;
    p->cref->owned = own_conf;
    p->cref->refs = 1;
    if (base == NULL) {
        base = event_base_new();
        if (base == NULL) {
            free(p->scratch);
            free(p->cref);
            free(p);
            return NULL;
        }
        p->own_base = true;
    }
    p->base = base;
    return p;
}

static void
accept_cb(struct kr_listener *l, evutil_socket_t fd,
          const struct sockaddr *sa, socklen_t salen, void *arg)
{
    struct kr_group *g = arg;
    struct kr_proxy *p = g->p;

    if (p->stopping) {
        close(fd);
        return;
    }
    if (g->nconn >= g->lc->max_connections) {
        char peer[64];

        p->stats.conn_refused++;
        close(fd);
        kr_log_rl(KR_LOG_WARN, "listener %s (%s): max_connections %lld "
                  "reached, refused %s", l->label, l->addrstr,
                  (long long)g->lc->max_connections,
                  kr_sockaddr_str(sa, salen, peer, sizeof(peer)));
        return;
    }
    (void)kr_session_new(p, g, l, fd, sa, salen);
}

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
        snprintf(label, len, "%s%sbootstrap", pre ? pre : "",
                 pre ? "/" : "");
        return lc->listen.port;
    }
    *n = lc->node_id_min + (i - 1);
    snprintf(label, len, "%s%sNodeId %d", pre ? pre : "", pre ? "/" : "",
             (int)*n);
    return (long)lc->broker_port_base + *n;
}

/*
 * A reload's running sockets that new listeners may take over: the open
 * listeners of the groups it drops.  Each is promised to one new
 * listener at most.
 */
struct kr_reuse {
    struct kr_group **drop;             /* groups the reload drops */
    int ndrop;
    struct kr_listener **claimed;       /* promised so far */
    int nclaimed;
};

/* The unpromised running listener bound to sa, or NULL; promises it. */
static struct kr_listener *
reuse_claim(struct kr_reuse *ru, const struct sockaddr *sa, socklen_t salen)
{
    int j, k, c;

    for (j = 0; j < ru->ndrop; j++) {
        struct kr_group *g = ru->drop[j];

        for (k = 0; g->listeners != NULL && k < g->nlisteners; k++) {
            struct kr_listener *l = &g->listeners[k];
            bool taken = false;

            if (!kr_listener_bound_to(l, sa, salen)) {
                continue;
            }
            for (c = 0; c < ru->nclaimed && !taken; c++) {
                taken = ru->claimed[c] == l;
            }
            if (!taken) {
                ru->claimed[ru->nclaimed++] = l;
                return l;
            }
        }
    }
    return NULL;
}

/*
 * Open the listeners of g (g->lc).  At start ru and take are NULL: every
 * listener is bound and logged.  In a reload, a listener whose address
 * a socket of ru already listens on is not bound: that listener goes in
 * take[i] (nlisteners slots, caller frees) for kr_listener_take at
 * commit; the others are bound but not logged yet (commit does).  On
 * KR_ERROR (message in err) the caller closes what g has open.
 */
static int
open_group(struct kr_proxy *p, struct kr_group *g, struct kr_reuse *ru,
           struct kr_listener ***take, char *err, size_t errlen)
{
    const struct kr_listener_conf *lc = g->lc;
    char label[48];
    int32_t n;
    int i;
    long port;

    g->nlisteners = 1 + (lc->node_id_max - lc->node_id_min + 1);
    g->listeners = calloc((size_t)g->nlisteners, sizeof(*g->listeners));
    if (take != NULL) {
        *take = calloc((size_t)g->nlisteners, sizeof(**take));
    }
    if (g->listeners == NULL || (take != NULL && *take == NULL)) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    for (i = 0; i < g->nlisteners; i++) {
        struct kr_listener *l = &g->listeners[i];

        port = listener_slot(lc, i, &n, label, sizeof(label));
        if (port < 0 || port > 65535) {
            snprintf(err, errlen, "%s:%d: listener %s: port %ld out of range "
                     "(broker_port_base + NodeId)", p->cref->conf->path
                     ? p->cref->conf->path : "config", lc->line, label,
                     port);
            return KR_ERROR;
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
        if (kr_listener_open(l, p->base, lc->listen.host, (uint16_t)port, n,
                             label, KR_LISTEN_BACKLOG, accept_cb, g, err,
                             errlen) != KR_OK) {
            return KR_ERROR;
        }
        if (ru == NULL) {
            kr_log_info("listening on %s (%s)", l->addrstr, l->label);
        }
    }
    return KR_OK;
}

/*
 * Reload commit for a new group g: move in the sockets promised in take
 * (NULL: none) and log every listener.  Cannot fail.
 */
static void
commit_group(struct kr_group *g, struct kr_listener **take)
{
    char label[48];
    int32_t n;
    int i;

    for (i = 0; i < g->nlisteners; i++) {
        struct kr_listener *l = &g->listeners[i];

        if (take != NULL && take[i] != NULL) {
            char was[48];

            snprintf(was, sizeof(was), "%s", take[i]->label);
            (void)listener_slot(g->lc, i, &n, label, sizeof(label));
            kr_listener_take(l, take[i], n, label, accept_cb, g);
            kr_log_info("listening on %s (%s): the socket of %s, kept open",
                        l->addrstr, l->label, was);
        } else {
            kr_log_info("listening on %s (%s)", l->addrstr, l->label);
        }
    }
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

static void
close_listeners(struct kr_proxy *p)
{
    int i;

    for (i = 0; i < p->ngroups; i++) {
        close_group(p->groups[i]);
    }
}

/* Rate-limited log lines: their "suppressed N" summaries, every second. */
static void
rl_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    (void)kr_log_rl_flush();
}

/* The audit lines dropped so far, when any (reload, stop). */
static void
audit_report(const struct kr_proxy *p, const char *when)
{
    uint64_t n = kr_audit_dropped(p->audit);

    if (n > 0) {
        kr_log_warn("audit: %" PRIu64 " line%s dropped since the audit "
                    "target was opened (queue full or target not "
                    "writable), at %s", n, n == 1 ? "" : "s", when);
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
kr_proxy_start(struct kr_proxy *p, char *err, size_t errlen)
{
    const struct kr_conf *conf = p->cref->conf;
    int i;

    /* a peer that goes away mid-write must not kill the process */
    signal(SIGPIPE, SIG_IGN);
    event_set_log_callback(libevent_log_cb);
    kr_rewrite_init();
    p->dns = evdns_base_new(p->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                            EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (p->dns == NULL) {
        /* no usable resolv.conf: numeric addresses still work */
        p->dns = evdns_base_new(p->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    }
    if (p->dns == NULL) {
        snprintf(err, errlen, "cannot create the DNS resolver");
        return KR_ERROR;
    }
    if (conf->audit.target != NULL && p->audit == NULL) {
        p->audit = kr_audit_open(conf->audit.target,
                                 (size_t)conf->audit.queue_bytes, err,
                                 errlen);
        if (p->audit == NULL) {
            return KR_ERROR;
        }
    }
    p->ups = calloc((size_t)(conf->nupstreams ? conf->nupstreams : 1),
                    sizeof(*p->ups));
    p->groups = calloc((size_t)(conf->nlisteners ? conf->nlisteners : 1),
                       sizeof(*p->groups));
    if (p->cref0 == NULL) {
        p->cref0 = kr_conf_ref_get(p->cref);
    }
    if (p->ups == NULL || p->groups == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    p->nups = conf->nupstreams;
    p->ngroups = conf->nlisteners;
    for (i = 0; i < p->nups; i++) {
        p->ups[i] = kr_upstream_new(p->base, p->dns, &conf->upstreams[i]);
        if (p->ups[i] == NULL) {
            snprintf(err, errlen, "out of memory");
            return KR_ERROR;
        }
    }
    for (i = 0; i < p->ngroups; i++) {
        struct kr_group *g = calloc(1, sizeof(*g));
        const struct kr_listener_conf *lc = &conf->listeners[i];
        ptrdiff_t ui = lc->up != NULL ? lc->up - conf->upstreams : 0;

        if (g == NULL) {
            snprintf(err, errlen, "out of memory");
            close_listeners(p);
            return KR_ERROR;
        }
        p->groups[i] = g;
        g->p = p;
        g->lc = lc;
        g->up = ui >= 0 && ui < p->nups ? p->ups[ui] : NULL;
        if (open_group(p, g, NULL, NULL, err, errlen) != KR_OK) {
            close_listeners(p);
            return KR_ERROR;
        }
    }
    p->rl_timer = event_new(p->base, -1, EV_PERSIST, rl_timer_cb, p);
    if (p->rl_timer != NULL) {
        struct timeval tv = { 1, 0 };

        event_add(p->rl_timer, &tv);
    }
    p->started = true;
    return KR_OK;
}

static int reload(struct kr_proxy *p, const char *path, const char *by);

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
    struct kr_proxy *p = arg;

    (void)what;
    switch (sig) {
    case SIGHUP:
        /* one notice line, from reload: what was done */
        kr_proxy_reopen(p);
        (void)reload(p, p->cref->conf->path, "SIGHUP");
        break;
    case SIGUSR1:
        kr_proxy_reopen(p);
        kr_log_notice("SIGUSR1: reopened the log%s", p->audit != NULL
                      ? " and audit files" : " file");
        break;
    default:
        kr_log_notice("signal %d: stopping", (int)sig);
        kr_proxy_stop(p);
        break;
    }
}

int
kr_proxy_run(struct kr_proxy *p)
{
    static const int sigs[4] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
    int i;

    for (i = 0; i < 4; i++) {
        p->sigev[i] = evsignal_new(p->base, sigs[i], signal_cb, p);
        if (p->sigev[i] != NULL) {
            evsignal_add(p->sigev[i], NULL);
        }
    }
    if (!p->stopping) {
        event_base_dispatch(p->base);
    }
    for (i = 0; i < 4; i++) {
        if (p->sigev[i] != NULL) {
            event_free(p->sigev[i]);
            p->sigev[i] = NULL;
        }
    }
    return KR_OK;
}

void
kr_proxy_stop(struct kr_proxy *p)
{
    int i;

    if (p->stopping) {
        return;
    }
    p->stopping = true;
    close_listeners(p);
    while (p->sessions != NULL) {
        kr_session_close(p->sessions, KR_LOG_INFO, "krelay is stopping");
    }
    if (p->rl_timer != NULL) {
        event_free(p->rl_timer);
        p->rl_timer = NULL;
    }
    /* the lines queued so far are written (or counted as dropped)
       before the drops are reported */
    kr_audit_flush(p->audit);
    audit_report(p, "stop");
    kr_log_notice("totals: %" PRIu64 " connections, %" PRIu64 " requests, "
                  "%" PRIu64 " responses (%" PRIu64 " held whole, %" PRIu64
                  " streamed), %" PRIu64 " bytes up, %" PRIu64 " bytes down "
                  "(%" PRIu64 " of the two spliced)",
                  p->stats.conn_accepted, p->stats.requests,
                  p->stats.responses, p->stats.responses_held,
                  p->stats.responses_streamed, p->stats.bytes_up,
                  p->stats.bytes_down, p->stats.bytes_spliced);
    (void)kr_log_rl_flush();
    for (i = 0; i < p->nups; i++) {
        if (p->ups[i] != NULL) {
            kr_upstream_free(p->ups[i]);
            p->ups[i] = NULL;
        }
    }
    event_base_loopbreak(p->base);
}

void
kr_proxy_free(struct kr_proxy *p)
{
    int i;

    if (p == NULL) {
        return;
    }
    kr_proxy_stop(p);
    kr_pipe_pool_free(&p->pipes);
    for (i = 0; p->groups != NULL && i < p->ngroups; i++) {
        free_group(p->groups[i]);
    }
    free(p->groups);
    for (i = 0; i < p->nold_groups; i++) {
        free_group(p->old_groups[i]);
    }
    free(p->old_groups);
    if (p->cref0 != NULL) {
        kr_conf_ref_put(p->cref0);
    }
    free(p->ups);
    if (p->dns != NULL) {
        evdns_base_free(p->dns, 0);
    }
    if (p->own_base) {
        event_base_free(p->base);
    }
    kr_conf_ref_put(p->cref);
    if (p->audit != NULL) {
        kr_audit_close(p->audit);
    }
    free(p->scratch);
    free(p);
}

void
kr_proxy_reopen(struct kr_proxy *p)
{
    kr_log_reopen();
    if (p->audit != NULL) {
        kr_audit_reopen(p->audit);
    }
}

void
kr_proxy_group_release(struct kr_group *g)
{
    struct kr_proxy *p = g->p;
    int i;

    if (!g->removed || g->nconn > 0) {
        return;
    }
    for (i = 0; i < p->nold_groups; i++) {
        if (p->old_groups[i] == g) {
            p->old_groups[i] = p->old_groups[--p->nold_groups];
            break;
        }
    }
    free_group(g);
}

static bool
same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/*
 * Can the running group g serve [listener] lc of a new config as is?  The
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

/* Is the running upstream a what b would start (no RESTART key changed)? */
static bool
same_upstream(const struct kr_upstream_conf *a,
              const struct kr_upstream_conf *b)
{
    return same_str(a->name, b->name) &&
           !(kr_conf_upstream_diff(a, b, NULL, NULL) & KR_RELOAD_RESTART);
}

/* The running upstream named like uc, or -1. */
static int
find_upstream(const struct kr_proxy *p, const struct kr_upstream_conf *uc)
{
    const struct kr_conf *c0 = p->cref0->conf;
    int i;

    for (i = 0; i < c0->nupstreams && i < p->nups; i++) {
        if (same_str(c0->upstreams[i].name, uc->name)) {
            return i;
        }
    }
    return -1;
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

/* Is g one of the running groups (kept by a reload)? */
static bool
is_running(const struct kr_proxy *p, const struct kr_group *g)
{
    int j;

    for (j = 0; j < p->ngroups; j++) {
        if (p->groups[j] == g) {
            return true;
        }
    }
    return false;
}

/* Free a reload's per-group take arrays (n slots; NULL is a no-op). */
static void
free_take(struct kr_listener ***take, int n)
{
    int i;

    for (i = 0; take != NULL && i < n; i++) {
        free(take[i]);
    }
    free(take);
}

int
kr_proxy_reload(struct kr_proxy *p, const char *path)
{
    return reload(p, path, NULL);
}

/* "s" when n is not 1: "1 rule", "2 rules". */
static const char *
plural(long long n)
{
    return n == 1 ? "" : "s";
}

/*
 * kr_proxy_reload; by names the signal that asked for it (its notice
 * line then says the log and audit files were reopened too).
 */
static int
reload(struct kr_proxy *p, const char *path, const char *by)
{
    struct kr_conf *nc = NULL;
    struct kr_conf_ref *nref = NULL, *old = p->cref;
    const struct kr_conf *oc = old->conf;
    struct kr_group **ng = NULL;
    bool *kept = NULL;
    struct kr_audit *nau = NULL;
    char *errs = NULL, err[512];
    size_t elen = 0;
    FILE *ef;
    struct kr_listener ***take = NULL;
    struct kr_reuse ru = { NULL, 0, NULL, 0 };
    int i, j, rc, opened = 0, nclaim = 0;

    if (p->stopping) {
        return KR_ERROR;
    }
    ef = open_memstream(&errs, &elen);
    rc = kr_rule_load(path, ef, &nc);
    if (ef != NULL) {
        fclose(ef);
    }
    if (rc != KR_OK) {
        log_lines(KR_LOG_ERROR, "reload refused: ", errs);
        kr_log_error("%s%sreload of %s refused: the running configuration "
                     "stays", by != NULL ? by : "", by != NULL ? ": " : "",
                     path);
        free(errs);
        p->reloads_refused++;
        return KR_ERROR;
    }
    free(errs);
    /* upstreams cannot change under running sessions */
    for (i = 0; i < nc->nupstreams; i++) {
        int ui = find_upstream(p, &nc->upstreams[i]);

        if (ui < 0) {
            snprintf(err, sizeof(err), "%s:%d: [upstream%s%s] is new: "
                     "adding an upstream needs a restart", path,
                     nc->upstreams[i].line,
                     nc->upstreams[i].name[0] ? " " : "",
                     nc->upstreams[i].name);
            goto refuse;
        }
        if (!same_upstream(&p->cref0->conf->upstreams[ui],
                           &nc->upstreams[i])) {
            kr_log_warn("reload: %s:%d: [upstream%s%s] changed: upstream "
                        "changes need a restart (the running one stays)",
                        path, nc->upstreams[i].line,
                        nc->upstreams[i].name[0] ? " " : "",
                        nc->upstreams[i].name);
        }
    }
    /* the audit sink: a new target opens first, so failure changes
       nothing */
    if (nc->audit.target != NULL &&
        (p->audit == NULL || !same_str(nc->audit.target,
                                       oc->audit.target))) {
        nau = kr_audit_open(nc->audit.target,
                            (size_t)nc->audit.queue_bytes, err,
                            sizeof(err));
        if (nau == NULL) {
            goto refuse;
        }
    }
    /* listeners: keep unchanged groups, open new ones */
    ng = calloc((size_t)(nc->nlisteners ? nc->nlisteners : 1), sizeof(*ng));
    kept = calloc((size_t)(p->ngroups ? p->ngroups : 1), sizeof(*kept));
    if (ng == NULL || kept == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto refuse;
    }
    for (i = 0; i < nc->nlisteners; i++) {
        const struct kr_listener_conf *lc = &nc->listeners[i];

        for (j = 0; j < p->ngroups; j++) {
            if (!kept[j] && same_listeners(p->groups[j]->lc, lc)) {
                kept[j] = true;
                ng[i] = p->groups[j];
                break;
            }
        }
    }
    /*
     * Bind every new listener before touching a running one, so that a
     * refused reload leaves them all as they were.  A new listener on
     * the address of a dropped group's listener takes that socket over
     * at commit (no close and rebind: its accept queue stays).
     */
    take = calloc((size_t)(nc->nlisteners ? nc->nlisteners : 1),
                  sizeof(*take));
    ru.drop = calloc((size_t)(p->ngroups ? p->ngroups : 1),
                     sizeof(*ru.drop));
    for (j = 0; ru.drop != NULL && j < p->ngroups; j++) {
        if (!kept[j]) {
            ru.drop[ru.ndrop++] = p->groups[j];
            nclaim += p->groups[j]->nlisteners;
        }
    }
    ru.claimed = calloc((size_t)(nclaim ? nclaim : 1), sizeof(*ru.claimed));
    if (take == NULL || ru.drop == NULL || ru.claimed == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto undo;
    }
    for (i = 0; i < nc->nlisteners; i++) {
        const struct kr_listener_conf *lc = &nc->listeners[i];
        struct kr_group *g;
        int ui;

        if (ng[i] != NULL) {
            continue;
        }
        g = calloc(1, sizeof(*g));
        if (g == NULL) {
            snprintf(err, sizeof(err), "out of memory");
            goto undo;
        }
        ng[i] = g;
        g->p = p;
        g->lc = lc;
        ui = lc->up != NULL ? find_upstream(p, lc->up) : 0;
        g->up = ui >= 0 && ui < p->nups ? p->ups[ui] : NULL;
        opened++;
        if (open_group(p, g, &ru, &take[i], err, sizeof(err)) != KR_OK) {
            goto undo;
        }
    }

    /* commit */
    nref = calloc(1, sizeof(*nref));
    if (nref == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto undo;
    }
    nref->conf = nc;
    nref->owned = true;
    nref->refs = 1;
    for (i = 0; i < nc->nlisteners; i++) {
        ng[i]->lc = &nc->listeners[i];
        if (!is_running(p, ng[i])) {
            commit_group(ng[i], take[i]);
        }
    }
    /* what no new listener took over closes now */
    for (j = 0; j < p->ngroups; j++) {
        if (!kept[j]) {
            close_group(p->groups[j]);
        }
    }
    for (j = 0; j < p->ngroups; j++) {
        struct kr_group *g = p->groups[j], **og;

        if (kept[j]) {
            continue;
        }
        kr_log_notice("reload: [listener%s%s] removed: its listeners are "
                      "closed, its %lld connection%s stay%s",
                      g->lc->name[0] ? " " : "", g->lc->name,
                      (long long)g->nconn, plural(g->nconn),
                      g->nconn == 1 ? "s" : "");
        if (g->nconn == 0) {
            free_group(g);
            continue;
        }
        g->removed = true;
        g->cref = kr_conf_ref_get(old);
        og = realloc(p->old_groups,
                     sizeof(*og) * (size_t)(p->nold_groups + 1));
        if (og == NULL) {
            /* cannot track it: it lives until the proxy is freed */
            g->removed = false;
            continue;
        }
        p->old_groups = og;
        p->old_groups[p->nold_groups++] = g;
    }
    free(p->groups);
    p->groups = ng;
    p->ngroups = nc->nlisteners;
    p->cref = nref;
    audit_report(p, "reload");
    if (nau != NULL) {
        if (p->audit != NULL) {
            kr_audit_close(p->audit);
        }
        p->audit = nau;
    } else if (nc->audit.target == NULL && p->audit != NULL) {
        kr_audit_close(p->audit);
        p->audit = NULL;
    }
    kr_log_level_cur = nc->log.level + p->log_verbose > KR_LOG_TRACE
                           ? KR_LOG_TRACE
                           : nc->log.level + p->log_verbose;
    if (!same_str(nc->log.target, oc->log.target)) {
        kr_log_close();
        if (nc->log.target != NULL &&
            strcmp(nc->log.target, "stderr") != 0 &&
            kr_log_open(nc->log.target, "krelay") != KR_OK) {
            kr_log_error("reload: cannot open log %s: logging to stderr",
                         nc->log.target);
        }
    }
    free(kept);
    free_take(take, nc->nlisteners);
    free(ru.drop);
    free(ru.claimed);
    p->reloads++;
    kr_log_notice("%s%sreloaded %s: %d listener group%s (%d new), %d "
                  "rule%s%s", by != NULL ? by : "", by != NULL ? ": " : "",
                  path, p->ngroups, plural(p->ngroups), opened, nc->nrules,
                  plural(nc->nrules), by == NULL ? ""
                  : p->audit != NULL ? "; log and audit files reopened"
                  : "; log file reopened");
    /*
     * Only now: the old config (oc, and path, which may be its own
     * path string) is used up to the line above.  Sessions may still
     * hold it; else it goes here.
     */
    kr_conf_ref_put(old);
    return KR_OK;

undo:
    /* only the sockets bound for the new config close: nothing moved */
    for (i = 0; ng != NULL && i < nc->nlisteners; i++) {
        if (ng[i] != NULL && !is_running(p, ng[i])) {
            free_group(ng[i]);
        }
    }
refuse:
    kr_log_error("%s%sreload of %s refused: %s; the running configuration "
                 "stays", by != NULL ? by : "", by != NULL ? ": " : "", path,
                 err);
    free(ng);
    free(kept);
    free_take(take, nc->nlisteners);
    free(ru.drop);
    free(ru.claimed);
    if (nau != NULL) {
        kr_audit_close(nau);
    }
    kr_conf_free(nc);
    p->reloads_refused++;
    return KR_ERROR;
}

uint16_t
kr_proxy_port(const struct kr_proxy *p, int gi, int32_t node_id)
{
    const struct kr_group *g;
    int i;

    if (gi < 0 || gi >= p->ngroups) {
        return 0;
    }
    g = p->groups[gi];
    for (i = 0; i < g->nlisteners; i++) {
        if (g->listeners[i].node_id == node_id) {
            return kr_listener_port(&g->listeners[i]);
        }
    }
    return 0;
}
