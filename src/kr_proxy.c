/*
 * kr_proxy.c - the daemon: event_base, evdns, upstreams, listener groups,
 * sessions, signals; start and stop in that order and back.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kr_frame.h"
#include "kr_log.h"
#include "kr_proxy.h"
#include "kr_rewrite.h"
#include "kr_session.h"
#include "kr_upstream.h"

#define KR_LISTEN_BACKLOG 1024

int64_t
kr_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static int
open_group(struct kr_proxy *p, struct kr_group *g, char *err, size_t errlen)
{
    const struct kr_listener_conf *lc = g->lc;
    char label[48];
    const char *pre = lc->name != NULL && lc->name[0] ? lc->name : NULL;
    int32_t n;
    int i;
    long port;

    g->nlisteners = 1 + (lc->node_id_max - lc->node_id_min + 1);
    g->listeners = calloc((size_t)g->nlisteners, sizeof(*g->listeners));
    if (g->listeners == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ERROR;
    }
    for (i = 0; i < g->nlisteners; i++) {
        struct kr_listener *l = &g->listeners[i];

        if (i == 0) {
            n = KR_NODE_BOOTSTRAP;
            port = lc->listen.port;
            snprintf(label, sizeof(label), "%s%sbootstrap", pre ? pre : "",
                     pre ? "/" : "");
        } else {
            n = lc->node_id_min + (i - 1);
            port = (long)lc->broker_port_base + n;
            snprintf(label, sizeof(label), "%s%sNodeId %d", pre ? pre : "",
                     pre ? "/" : "", (int)n);
        }
        if (port < 0 || port > 65535) {
            snprintf(err, errlen, "%s:%d: listener %s: port %ld out of range "
                     "(broker_port_base + NodeId)", p->cref->conf->path
                     ? p->cref->conf->path : "config", lc->line, label,
                     port);
            return KR_ERROR;
        }
        if (kr_listener_open(l, p->base, lc->listen.host, (uint16_t)port, n,
                             label, KR_LISTEN_BACKLOG, accept_cb, g, err,
                             errlen) != KR_OK) {
            return KR_ERROR;
        }
        kr_log_info("listening on %s (%s)", l->addrstr, l->label);
    }
    return KR_OK;
}

static void
close_listeners(struct kr_proxy *p)
{
    int i, j;

    for (i = 0; i < p->ngroups; i++) {
        for (j = 0; p->groups[i].listeners && j < p->groups[i].nlisteners;
             j++) {
            kr_listener_close(&p->groups[i].listeners[j]);
        }
    }
}

int
kr_proxy_start(struct kr_proxy *p, char *err, size_t errlen)
{
    const struct kr_conf *conf = p->cref->conf;
    int i;

    /* a peer that goes away mid-write must not kill the process */
    signal(SIGPIPE, SIG_IGN);
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
    p->ups = calloc((size_t)(conf->nupstreams ? conf->nupstreams : 1),
                    sizeof(*p->ups));
    p->groups = calloc((size_t)(conf->nlisteners ? conf->nlisteners : 1),
                       sizeof(*p->groups));
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
        struct kr_group *g = &p->groups[i];
        const struct kr_listener_conf *lc = &conf->listeners[i];
        ptrdiff_t ui = lc->up != NULL ? lc->up - conf->upstreams : 0;

        g->p = p;
        g->lc = lc;
        g->up = ui >= 0 && ui < p->nups ? p->ups[ui] : NULL;
        if (open_group(p, g, err, errlen) != KR_OK) {
            close_listeners(p);
            return KR_ERROR;
        }
    }
    p->started = true;
    return KR_OK;
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
    struct kr_proxy *p = arg;

    (void)what;
    switch (sig) {
    case SIGHUP:
    case SIGUSR1:
        kr_log_notice("signal %d: reopening the log", (int)sig);
        kr_log_reopen();
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
    for (i = 0; i < p->ngroups; i++) {
        free(p->groups[i].listeners);
    }
    free(p->groups);
    free(p->ups);
    if (p->dns != NULL) {
        evdns_base_free(p->dns, 0);
    }
    if (p->own_base) {
        event_base_free(p->base);
    }
    kr_conf_ref_put(p->cref);
    free(p->scratch);
    free(p);
}

uint16_t
kr_proxy_port(const struct kr_proxy *p, int gi, int32_t node_id)
{
    const struct kr_group *g;
    int i;

    if (gi < 0 || gi >= p->ngroups) {
        return 0;
    }
    g = &p->groups[gi];
    for (i = 0; i < g->nlisteners; i++) {
        if (g->listeners[i].node_id == node_id) {
            return kr_listener_port(&g->listeners[i]);
        }
    }
    return 0;
}
