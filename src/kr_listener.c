/*
 * kr_listener.c - bind, listen, accept (evconnlistener on our own socket
 * so bind errors name the address).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kr_listener.h"

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

int
kr_listener_open(struct kr_listener *l, struct event_base *base,
                 const char *host, uint16_t port, int32_t node_id,
                 const char *label, int backlog, kr_accept_cb cb, void *arg,
                 char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    char portstr[8];
    evutil_socket_t fd = -1;
    int rc, on = 1;

    memset(l, 0, sizeof(*l));
    l->node_id = node_id;
    l->cb = cb;
    l->arg = arg;
    snprintf(l->label, sizeof(l->label), "%s", label);
    if (host == NULL || host[0] == '\0' || strcmp(host, "*") == 0) {
        host = "0.0.0.0";
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%u", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "listen %s:%u (%s): %s", host, port, label,
                 rc != 0 ? gai_strerror(rc) : "no address");
        return KR_ERROR;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        snprintf(err, errlen, "socket for %s:%u (%s): %s", host, port,
                 label, strerror(errno));
        freeaddrinfo(res);
        return KR_ERROR;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(fd, backlog) != 0) {
        char a[64];

        snprintf(err, errlen, "bind %s (%s): %s",
                 kr_sockaddr_str(res->ai_addr, res->ai_addrlen, a,
                                 sizeof(a)),
                 label, strerror(errno));
        close(fd);
        freeaddrinfo(res);
        return KR_ERROR;
    }
    freeaddrinfo(res);
    l->addrlen = sizeof(l->addr);
    if (getsockname(fd, (struct sockaddr *)&l->addr, &l->addrlen) != 0) {
        l->addrlen = 0;
    }
    kr_sockaddr_str((struct sockaddr *)&l->addr, l->addrlen, l->addrstr,
                    sizeof(l->addrstr));
    l->evl = evconnlistener_new(base, accept_cb, l,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                                0, fd);
    if (l->evl == NULL) {
        snprintf(err, errlen, "listen %s (%s): out of memory", l->addrstr,
                 label);
        close(fd);
        return KR_ERROR;
    }
    return KR_OK;
}

void
kr_listener_close(struct kr_listener *l)
{
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
