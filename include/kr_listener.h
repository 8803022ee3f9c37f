/*
 * kr_listener.h - listening TCP sockets (IPv4 or IPv6): bound once per
 * process (struct kr_lsock, the daemon's), accepted on by every worker's
 * event_base (struct kr_listener), handing accepted sockets to a callback.
 *
 * A [listener] section of the config becomes a group of these (see
 * kr_daemon.h and kr_worker.h): the bootstrap listener plus one per
 * NodeId.  Binding happens at start, so a port clash fails the start with
 * a message.  With several workers each has its own socket per address,
 * an SO_REUSEPORT group (kr_lsock_bind_share); a worker attaches its own
 * kr_listener to its socket, the one on the daemon's thread with the
 * socket's own descriptor, the others with a duplicate each.  Workers
 * may also share one socket (tests): the kernel hands every connection
 * to one accept(2); the others get EAGAIN, which libevent ignores.
 */
#ifndef KR_LISTENER_H
#define KR_LISTENER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "kr_common.h"

struct kr_listener;

/*
 * Called for each accepted socket: fd is nonblocking and now owned by
 * the callback; sa/salen (the peer) are valid during the call.
 */
typedef void (*kr_accept_cb)(struct kr_listener *l, evutil_socket_t fd,
                             const struct sockaddr *sa, socklen_t salen,
                             void *arg);

/*
 * One bound and listening socket, owned by the process part (kr_daemon).
 * Storage is the caller's; kr_lsock_bind fills it, kr_lsock_close closes
 * the descriptor (fd -1 after).
 */
struct kr_lsock {
    int fd;                             /* listening, O_NONBLOCK and
                                           O_CLOEXEC; -1 when closed */
    int32_t node_id;                    /* KR_NODE_BOOTSTRAP or a NodeId */
    struct sockaddr_storage addr;       /* bound address (real port) */
    socklen_t addrlen;                  /* bytes of addr in use */
    char label[48];                     /* as kr_listener.label */
    char addrstr[64];                   /* as kr_listener.addrstr */
};

/*
 * One worker accepting on a listening socket.  Storage is the caller's
 * (kr_worker keeps them in kr_group.listeners); kr_listener_attach fills
 * it, kr_listener_close releases the evconnlistener (and the descriptor
 * when the listener owns it) but not the struct.
 */
struct kr_listener {
    struct evconnlistener *evl;         /* NULL when closed */
    int32_t node_id;                    /* KR_NODE_BOOTSTRAP or a NodeId */
    struct sockaddr_storage addr;       /* bound address (real port) */
    socklen_t addrlen;                  /* bytes of addr in use */
    kr_accept_cb cb;                    /* called per accepted socket */
    void *arg;                          /* passed to cb, borrowed */
    char label[48];                     /* "bootstrap" or "NodeId 3",
                                           prefixed "NAME/" when named */
    char addrstr[64];                   /* "127.0.0.1:9092", "[::1]:9092" */
    struct event *pause_ev;             /* accept failed (EMFILE...):
                                           accepting resumes when this
                                           timer fires; NULL until the
                                           first failure */
    uint32_t npauses;                   /* pauses not logged yet */
    int64_t paused_log_ms;              /* monotonic ms of the last pause
                                           logged (one line per
                                           KR_ACCEPT_LOG_MS at most) */
};

/* How long a listener stops accepting after accept(2) failed, in ms. */
#define KR_ACCEPT_PAUSE_MS 500
/* At most one "not accepting" line per listener this often, in ms. */
#define KR_ACCEPT_LOG_MS 10000

/*
 * Bind host:port (numeric or a name, resolved with getaddrinfo: this
 * blocks, start-up only; "" or "*" = every IPv4 address) with
 * SO_REUSEADDR and listen with backlog, into ls.  label names it in logs.
 * Returns KR_OK, or KR_ERROR with a message ("bind 127.0.0.1:9092
 * (NodeId 3): Address already in use") in err and ls->fd -1.
 */
int kr_lsock_bind(struct kr_lsock *ls, const char *host, uint16_t port,
                  int32_t node_id, const char *label, int backlog, char *err,
                  size_t errlen) KR_MUST_CHECK;

/*
 * How kr_lsock_bind_share shares an address ([process] workers > 1:
 * each worker accepts on a socket of its own, kr_worker.h):
 *   KR_LSOCK_ALONE   as kr_lsock_bind: no SO_REUSEPORT, nobody joins.
 *   KR_LSOCK_FIRST   the first socket of an SO_REUSEPORT group: a probe
 *                    socket without SO_REUSEPORT is bound to the address
 *                    first and closed, so an address another process
 *                    listens on (even a second krelay of the same user,
 *                    which SO_REUSEPORT would let join) fails with the
 *                    usual "Address already in use"; then the socket is
 *                    bound with SO_REUSEPORT.  Port 0 needs no probe:
 *                    Linux never gives an ephemeral port that another
 *                    SO_REUSEPORT socket holds (since 4.6).
 *   KR_LSOCK_JOIN    another socket of the group a KR_LSOCK_FIRST socket
 *                    of this process started: SO_REUSEPORT, bound to that
 *                    socket's actual port (never 0).
 */
enum kr_lsock_share {
    KR_LSOCK_ALONE,
    KR_LSOCK_FIRST,
    KR_LSOCK_JOIN
};

/* kr_lsock_bind, sharing the address as share says. */
int kr_lsock_bind_share(struct kr_lsock *ls, const char *host,
                        uint16_t port, int32_t node_id, const char *label,
                        int backlog, enum kr_lsock_share share, char *err,
                        size_t errlen) KR_MUST_CHECK;

/*
 * Is ls open and bound to exactly sa (family, address and port; a
 * requested port 0 never matches)?  Lets a reload hand a running socket
 * to a new listener instead of closing and binding it again.
 */
bool kr_lsock_bound_to(const struct kr_lsock *ls, const struct sockaddr *sa,
                       socklen_t salen);

/*
 * Move src's open socket into dst (contents overwritten): dst gets
 * node_id and label, src's descriptor (its accept queue untouched) and
 * address; src is left closed (fd -1).  Never fails.
 */
void kr_lsock_take(struct kr_lsock *dst, struct kr_lsock *src,
                   int32_t node_id, const char *label);

/* Close the socket (fd -1 after).  Idempotent. */
void kr_lsock_close(struct kr_lsock *ls);

/* The bound port of ls, 0 when closed. */
uint16_t kr_lsock_port(const struct kr_lsock *ls);

/*
 * Accept on descriptor fd, a listening socket bound as ls says (ls gives
 * node_id, label and address; its own fd is not used), on base; cb(arg)
 * gets each accepted socket.  own: l closes fd at kr_listener_close (a
 * duplicate made for this worker); otherwise fd stays its owner's, who
 * closes it only after kr_listener_close.  Returns KR_OK, or KR_ERROR
 * with a message in err (an owned fd is closed then too).
 */
int kr_listener_attach(struct kr_listener *l, struct event_base *base,
                       const struct kr_lsock *ls, int fd, bool own,
                       kr_accept_cb cb, void *arg, char *err,
                       size_t errlen) KR_MUST_CHECK;

/*
 * Resolve host:port the way kr_lsock_bind binds it (same host rules,
 * first getaddrinfo answer; blocks) into ss/sslen.  label names the
 * listener in the message.  Returns KR_OK, or KR_ERROR with a message
 * ("listen host:9092 (NodeId 3): Name or service not known") in err.
 */
int kr_listener_resolve(const char *host, uint16_t port, const char *label,
                        struct sockaddr_storage *ss, socklen_t *sslen,
                        char *err, size_t errlen) KR_MUST_CHECK;

/* Stop accepting (and close the descriptor when owned).  Idempotent. */
void kr_listener_close(struct kr_listener *l);

/* The bound port (useful with port 0), 0 when closed. */
uint16_t kr_listener_port(const struct kr_listener *l);

/*
 * Format sa as "1.2.3.4:5" or "[::1]:5" into buf (len bytes, always
 * NUL-terminated when len > 0, truncated to fit; 64 bytes hold any
 * address).  Another family gives "(family N)"; sa NULL gives "".
 * Returns buf.  No allocation.
 */
char *kr_sockaddr_str(const struct sockaddr *sa, socklen_t salen, char *buf,
                      size_t len);

struct kr_worker;
struct kr_upstream;
struct kr_conf_ref;

/*
 * One [listener] section on one worker: a bootstrap listener + one per
 * NodeId, and the sessions they accepted (kr_worker.c owns groups;
 * sessions read lc and up and count themselves in nconn).
 */
struct kr_group {
    struct kr_worker *w;
    const struct kr_listener_conf *lc;  /* in w->cref's config */
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

#endif /* KR_LISTENER_H */
