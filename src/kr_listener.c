/*
 * kr_listener.c - bind and listen once (kr_lsock), accept on each worker's
 * event_base (evconnlistener on a socket we bound ourselves, so bind
 * errors name the address).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kr_clock.h"
#include "kr_listener.h"
#include "kr_log.h"

char *
kr_sockaddr_str(const struct sockaddr *sa, socklen_t salen, char *buf,
                size_t len)
{
    char host[INET6_ADDRSTRLEN];

    if (sa == NULL || len == 0) {
        if (len > 0) {
            buf[0] = '\0';
        }
        return buf;
    }
    if (sa->sa_family == AF_INET &&
        salen >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6 &&
               salen >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "(family %d)", sa->sa_family);
    }
    return buf;
}

static void
accept_cb(struct evconnlistener *evl, evutil_socket_t fd,
          struct sockaddr *sa, int salen, void *arg)
{
    struct kr_listener *l = arg;

    (void)evl;
    l->cb(l, fd, sa, (socklen_t)salen, l->arg);
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_listener *l = arg;

    (void)fd;
    (void)what;
    if (l->evl != NULL) {
        evconnlistener_enable(l->evl);
    }
}

/*
 * accept(2) failed with something other than EAGAIN/EINTR/ECONNABORTED
 * (which libevent retries itself): out of file descriptors (EMFILE,
 * ENFILE) or memory.  The pending connection stays in the backlog and
 * the socket stays readable, so accepting again at once would spin:
 * stop for KR_ACCEPT_PAUSE_MS.  Logged once per KR_ACCEPT_LOG_MS with
 * the count of pauses since, not twice a second.
 */
static void
accept_error_cb(struct evconnlistener *evl, void *arg)
{
    struct kr_listener *l = arg;
    int e = EVUTIL_SOCKET_ERROR();
    int64_t now;
    struct timeval tv = { KR_ACCEPT_PAUSE_MS / 1000,
                          (KR_ACCEPT_PAUSE_MS % 1000) * 1000 };

    now = kr_clock_mono_ms();
    l->npauses++;
    if (l->paused_log_ms == 0 || now - l->paused_log_ms >= KR_ACCEPT_LOG_MS) {
        kr_log_warn("accept on %s (%s): %s: not accepting for %d ms "
                    "(%u time%s since the last such line)%s", l->addrstr,
                    l->label, strerror(e), KR_ACCEPT_PAUSE_MS, l->npauses,
                    l->npauses == 1 ? "" : "s",
                    e == EMFILE || e == ENFILE
                        ? ": raise the open-file limit (ulimit -n, systemd "
                          "LimitNOFILE) or lower max_connections"
                        : "");
        l->paused_log_ms = now;
        l->npauses = 0;
    } else {
        kr_log_debug("accept on %s (%s): %s: not accepting for %d ms",
                     l->addrstr, l->label, strerror(e), KR_ACCEPT_PAUSE_MS);
    }
    if (l->pause_ev == NULL) {
        l->pause_ev = evtimer_new(evconnlistener_get_base(evl), resume_cb,
                                  l);
        if (l->pause_ev == NULL) {
            return;                     /* out of memory: retried */
        }
    }
    evconnlistener_disable(evl);
    evtimer_add(l->pause_ev, &tv);
}

int
kr_listener_resolve(const char *host, uint16_t port, const char *label,
                    struct sockaddr_storage *ss, socklen_t *sslen, char *err,
                    size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    char portstr[8];
    int rc;

    if (host == NULL || host[0] == '\0' || strcmp(host, "*") == 0) {
        host = "0.0.0.0";
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%u", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0 || res == NULL ||
        res->ai_addrlen > (socklen_t)sizeof(*ss)) {
        snprintf(err, errlen, "listen %s:%u (%s): %s", host, port, label,
                 rc != 0 ? gai_strerror(rc) : "no address");
        if (res != NULL) {
            freeaddrinfo(res);
        }
        return KR_ERROR;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return KR_OK;
}

int
kr_lsock_bind(struct kr_lsock *ls, const char *host, uint16_t port,
              int32_t node_id, const char *label, int backlog, char *err,
              size_t errlen)
{
    return kr_lsock_bind_share(ls, host, port, node_id, label, backlog,
                               KR_LSOCK_ALONE, err, errlen);
}

/*
 * KR_LSOCK_FIRST's probe: can a socket without SO_REUSEPORT bind ss
 * (nobody listens there, krelay or another process)?  KR_OK, or KR_ERROR
 * with kr_lsock_bind's message.
 */
static int
probe_alone(const struct sockaddr_storage *ss, socklen_t sslen,
            const char *label, char *err, size_t errlen)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1, rc = KR_OK;
    char a[64];

    if (fd < 0) {
        snprintf(err, errlen, "socket for %s (%s): %s",
                 kr_sockaddr_str((const struct sockaddr *)ss, sslen, a,
                                 sizeof(a)), label, strerror(errno));
        return KR_ERROR;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, (const struct sockaddr *)ss, sslen) != 0) {
        snprintf(err, errlen, "bind %s (%s): %s",
                 kr_sockaddr_str((const struct sockaddr *)ss, sslen, a,
                                 sizeof(a)), label, strerror(errno));
        rc = KR_ERROR;
    }
    close(fd);
    return rc;
}

int
kr_lsock_bind_share(struct kr_lsock *ls, const char *host, uint16_t port,
                    int32_t node_id, const char *label, int backlog,
                    enum kr_lsock_share share, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    evutil_socket_t fd = -1;
    int on = 1;

    memset(ls, 0, sizeof(*ls));
    ls->fd = -1;
    ls->node_id = node_id;
    snprintf(ls->label, sizeof(ls->label), "%s", label);
    if (kr_listener_resolve(host, port, label, &ss, &sslen, err, errlen)
        != KR_OK) {
        return KR_ERROR;
    }
    if (share == KR_LSOCK_FIRST && port != 0 &&
        probe_alone(&ss, sslen, label, err, errlen) != KR_OK) {
        return KR_ERROR;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        char a[64];

        snprintf(err, errlen, "socket for %s (%s): %s",
                 kr_sockaddr_str((struct sockaddr *)&ss, sslen, a,
                                 sizeof(a)),
                 label, strerror(errno));
        return KR_ERROR;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (share != KR_LSOCK_ALONE &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0) {
        char a[64];

        snprintf(err, errlen, "SO_REUSEPORT on %s (%s): %s",
                 kr_sockaddr_str((struct sockaddr *)&ss, sslen, a,
                                 sizeof(a)),
                 label, strerror(errno));
        close(fd);
        return KR_ERROR;
    }
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 ||
        listen(fd, backlog) != 0) {
        char a[64];

        snprintf(err, errlen, "bind %s (%s): %s",
                 kr_sockaddr_str((struct sockaddr *)&ss, sslen, a,
                                 sizeof(a)),
                 label, strerror(errno));
        close(fd);
        return KR_ERROR;
    }
    ls->addrlen = sizeof(ls->addr);
    if (getsockname(fd, (struct sockaddr *)&ls->addr, &ls->addrlen) != 0) {
        ls->addrlen = 0;
    }
    kr_sockaddr_str((struct sockaddr *)&ls->addr, ls->addrlen, ls->addrstr,
                    sizeof(ls->addrstr));
    ls->fd = fd;
    return KR_OK;
}

int
kr_listener_attach(struct kr_listener *l, struct event_base *base,
                   const struct kr_lsock *ls, int fd, bool own,
                   kr_accept_cb cb, void *arg, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    l->node_id = ls->node_id;
    l->cb = cb;
    l->arg = arg;
    snprintf(l->label, sizeof(l->label), "%s", ls->label);
    memcpy(&l->addr, &ls->addr, sizeof(l->addr));
    l->addrlen = ls->addrlen;
    memcpy(l->addrstr, ls->addrstr, sizeof(l->addrstr));
    l->evl = evconnlistener_new(base, accept_cb, l,
                                own ? LEV_OPT_CLOSE_ON_FREE : 0, 0, fd);
    if (l->evl == NULL) {
        snprintf(err, errlen, "listen %s (%s): out of memory", l->addrstr,
                 l->label);
        if (own) {
            close(fd);
        }
        return KR_ERROR;
    }
    evconnlistener_set_error_cb(l->evl, accept_error_cb);
    return KR_OK;
}

bool
kr_lsock_bound_to(const struct kr_lsock *ls, const struct sockaddr *sa,
                  socklen_t salen)
{
    if (ls->fd < 0 || sa == NULL || sa->sa_family != ls->addr.ss_family) {
        return false;
    }
    if (sa->sa_family == AF_INET &&
        salen >= (socklen_t)sizeof(struct sockaddr_in) &&
        ls->addrlen >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        const struct sockaddr_in *b = (const struct sockaddr_in *)&ls->addr;

        return a->sin_port != 0 && a->sin_port == b->sin_port &&
               a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (sa->sa_family == AF_INET6 &&
        salen >= (socklen_t)sizeof(struct sockaddr_in6) &&
        ls->addrlen >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        const struct sockaddr_in6 *b =
            (const struct sockaddr_in6 *)&ls->addr;

        return a->sin6_port != 0 && a->sin6_port == b->sin6_port &&
               a->sin6_scope_id == b->sin6_scope_id &&
               memcmp(&a->sin6_addr, &b->sin6_addr,
                      sizeof(a->sin6_addr)) == 0;
    }
    return false;
}

void
kr_lsock_take(struct kr_lsock *dst, struct kr_lsock *src, int32_t node_id,
              const char *label)
{
    memset(dst, 0, sizeof(*dst));
    dst->node_id = node_id;
    snprintf(dst->label, sizeof(dst->label), "%s", label);
    memcpy(&dst->addr, &src->addr, sizeof(dst->addr));
    dst->addrlen = src->addrlen;
    memcpy(dst->addrstr, src->addrstr, sizeof(dst->addrstr));
    dst->fd = src->fd;
    src->fd = -1;
}

void
kr_lsock_close(struct kr_lsock *ls)
{
    if (ls->fd >= 0) {
        close(ls->fd);
        ls->fd = -1;
    }
}

uint16_t
kr_lsock_port(const struct kr_lsock *ls)
{
    if (ls->fd < 0) {
        return 0;
    }
    if (ls->addr.ss_family == AF_INET) {
        return ntohs(((const struct sockaddr_in *)&ls->addr)->sin_port);
    }
    if (ls->addr.ss_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)&ls->addr)->sin6_port);
    }
    return 0;
}

void
kr_listener_close(struct kr_listener *l)
{
    if (l->pause_ev != NULL) {
        event_free(l->pause_ev);
        l->pause_ev = NULL;
    }
    if (l->evl != NULL) {
        evconnlistener_free(l->evl);
        l->evl = NULL;
    }
}

uint16_t
kr_listener_port(const struct kr_listener *l)
{
    if (l->evl == NULL) {
        return 0;
    }
    if (l->addr.ss_family == AF_INET) {
        return ntohs(((const struct sockaddr_in *)&l->addr)->sin_port);
    }
    if (l->addr.ss_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)&l->addr)->sin6_port);
    }
    return 0;
}
