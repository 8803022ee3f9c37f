/*
 * kr_conn.c - the transport of one socket, its event interest, and the
 * splice(2) lanes and pipe pool of the plain-TCP transport (kr_conn.h).
 *
 * I/O uses raw events: one readv of up to 256 KiB into
 * evbuffer_reserve_space per readable event, and one writev
 * (evbuffer_write) per flush; events are added/removed only when the
 * interest changes (bufferevents read 4 KiB at a time with an ioctl per
 * read: half the throughput, measured).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/uio.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/sockios.h>                /* SIOCOUTQ */
#endif

#include "kr_conn.h"

static ssize_t
tcp_read(struct kr_conn *c, struct evbuffer *in, size_t max)
{
    struct evbuffer_iovec v[2];
    struct iovec iov[2];
    ssize_t r;
    size_t left;
    int i, n;

    n = evbuffer_reserve_space(in, (ev_ssize_t)max, v, 2);
    if (n <= 0) {
        errno = ENOMEM;
        return -1;
    }
    left = max;
    for (i = 0; i < n; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
        left -= iov[i].iov_len;
    }
    do {
        r = readv(c->fd, iov, n);
    } while (r < 0 && errno == EINTR);
    if (r <= 0) {
        return r;
    }
    left = (size_t)r;
    for (i = 0; i < n && left > 0; i++) {
        v[i].iov_len = iov[i].iov_len < left ? iov[i].iov_len : left;
        left -= v[i].iov_len;
    }
    if (evbuffer_commit_space(in, v, i) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return r;
}

static ssize_t
tcp_write(struct kr_conn *c, struct evbuffer *out)
{
    return evbuffer_write(out, c->fd);
}

static void
tcp_close(struct kr_conn *c)
{
    (void)c;
}

const struct kr_conn_ops kr_conn_tcp_ops = {
    .name = "tcp",
    .read = tcp_read,
    .write = tcp_write,
    .close = tcp_close,
    .splice = true
};

bool
kr_conn_again(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

const char *
kr_conn_strerror(const struct kr_conn *c, int e)
{
    const char *w = c->ops != NULL && c->ops->why != NULL ? c->ops->why(c)
                                                          : NULL;

    return w != NULL ? w : strerror(e);
}

/*
 * Add or remove rev and wev as the owner's interest, the stage and the
 * transport's last requests say.  In the handshake only the event its
 * step waits for; otherwise the read's event while the owner reads, the
 * write's while it writes (for plain TCP: rev for reading, wev for
 * writing).  errno is kept.
 */
static void
conn_sync(struct kr_conn *c)
{
    bool r, w;
    int e = errno;

    if (c->stage == KR_STAGE_HANDSHAKE) {
        w = c->hs_want == KR_CONN_WANT_WRITE;
        r = !w;
    } else {
        r = (c->reading && c->rd_want != KR_CONN_WANT_WRITE) ||
            (c->writing && c->wr_want == KR_CONN_WANT_READ);
        w = (c->writing && c->wr_want != KR_CONN_WANT_READ) ||
            (c->reading && c->rd_want == KR_CONN_WANT_WRITE);
    }
    if (c->rev != NULL && (bool)c->rev_on != r) {
        if (r) {
            event_add(c->rev, NULL);
        } else {
            event_del(c->rev);
        }
        c->rev_on = r;
    }
    if (c->wcb != NULL && (bool)c->wev_on != w) {
        if (w && c->wev == NULL) {
            /* the first wait for writability since c connected: an
               event for it from now on (once per connection, never per
               write); one made for connect(2) or a handshake step goes
               when it is removed */
            c->wev = event_new(event_get_base(c->rev), c->fd,
                               EV_WRITE | EV_PERSIST, c->wcb,
                               event_get_callback_arg(c->rev));
            if (c->wev == NULL) {
                c->wev_failed = 1;
                errno = e;
                return;
            }
            c->wev_keep = c->connected;
        }
        if (w) {
            event_add(c->wev, NULL);
        } else if (c->wev_keep) {
            event_del(c->wev);
        } else {
            event_free(c->wev);         /* also from its own callback */
            c->wev = NULL;
        }
        c->wev_on = w;
    }
    errno = e;
}

void
kr_conn_set_reading(struct kr_conn *c, bool on)
{
    if (c->rev == NULL) {
        return;
    }
    if ((bool)c->reading != on) {
        c->reading = on;
        conn_sync(c);
    }
    if (on) {
        kr_conn_kick(c);
    }
}

void
kr_conn_set_writing(struct kr_conn *c, bool on)
{
    if (c->wcb == NULL || (bool)c->writing == on) {
        return;
    }
    c->writing = on;
    conn_sync(c);
}

void
kr_conn_kick(struct kr_conn *c)
{
    if (c->ops->pending == NULL || !c->reading || c->rev == NULL ||
        c->stage == KR_STAGE_HANDSHAKE ||
        c->rd_want == KR_CONN_WANT_WRITE || c->ops->pending(c) == 0) {
        return;
    }
    event_active(c->rev, EV_READ, 0);
}

ssize_t
kr_conn_read(struct kr_conn *c)
{
    size_t want = c->read_size - KR_CHAIN_HDR;
    ssize_t n;
    uint8_t was = c->rd_want;

    c->want = KR_CONN_WANT_NONE;
    n = c->ops->read(c, c->in, want);
    if (n > 0) {
        c->bytes_in += (uint64_t)n;
        if ((size_t)n == want && c->read_size < KR_READ_MAX) {
            c->read_size *= 2;
        } else if ((size_t)n < c->read_size / 4 &&
                   c->read_size > KR_READ_MIN) {
            c->read_size /= 2;
        }
    }
    c->rd_want = n < 0 && kr_conn_again(errno) &&
                 c->want == KR_CONN_WANT_WRITE ? KR_CONN_WANT_WRITE
                                               : KR_CONN_WANT_READ;
    if (c->rd_want != was) {
        conn_sync(c);
    }
    return n;
}

ssize_t
kr_conn_read_raw(struct kr_conn *c, void *buf, size_t max)
{
    ssize_t n;

    do {
        n = read(c->fd, buf, max);
    } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t
kr_conn_write(struct kr_conn *c)
{
    ssize_t n;
    uint8_t was = c->wr_want;

    c->want = KR_CONN_WANT_NONE;
    n = c->ops->write(c, c->out);
    c->wr_want = n < 0 && kr_conn_again(errno) &&
                 c->want == KR_CONN_WANT_READ ? KR_CONN_WANT_READ
                                              : KR_CONN_WANT_WRITE;
    if (c->wr_want != was) {
        conn_sync(c);
    }
    return n;
}

int
kr_conn_handshake(struct kr_conn *c)
{
    int rc;

    c->want = KR_CONN_WANT_NONE;
    rc = c->ops->handshake(c);
    if (rc == 0) {
        c->stage = KR_STAGE_FRAMES;
    } else if (kr_conn_again(errno)) {
        c->hs_want = c->want == KR_CONN_WANT_WRITE ? KR_CONN_WANT_WRITE
                                                   : KR_CONN_WANT_READ;
    }
    conn_sync(c);
    return rc;
}

void
kr_conn_init(struct kr_conn *c)
{
    c->fd = -1;
    c->ops = &kr_conn_tcp_ops;
    c->read_size = KR_READ_MIN;
    c->stage = KR_STAGE_FRAMES;
    c->rd_want = KR_CONN_WANT_READ;
    c->wr_want = KR_CONN_WANT_WRITE;
    c->hs_want = KR_CONN_WANT_READ;
    c->in = evbuffer_new();
    c->out = evbuffer_new();
}

int
kr_conn_open(struct kr_conn *c, evutil_socket_t fd,
             const struct kr_conn_ops *ops)
{
    c->fd = fd;
    c->ops = ops != NULL ? ops : &kr_conn_tcp_ops;
    c->lowat = c->rcvbuf = 0;           /* a new socket's defaults */
    c->lowat_off = 0;
    c->wev_failed = 0;
    if (c->ops->open != NULL && c->ops->open(c) != 0) {
        return KR_ERROR;
    }
    return KR_OK;
}

int
kr_conn_shutdown_write(struct kr_conn *c)
{
    if (c->ops != NULL && c->ops->shutdown_write != NULL &&
        c->xprt != NULL) {
        c->ops->shutdown_write(c);
    }
    return shutdown(c->fd, SHUT_WR);
}

int
kr_conn_events(struct kr_conn *c, struct event_base *base,
               event_callback_fn rcb, event_callback_fn wcb, void *arg)
{
    c->rev = event_new(base, c->fd, EV_READ | EV_PERSIST, rcb, arg);
    if (c->rev == NULL) {
        return KR_ENOMEM;
    }
    c->wcb = wcb;
    return KR_OK;
}

void
kr_conn_close(struct kr_conn *c)
{
    if (c->rev != NULL) {
        event_free(c->rev);
        c->rev = NULL;
    }
    if (c->wev != NULL) {
        event_free(c->wev);
        c->wev = NULL;
    }
    c->wcb = NULL;
    c->wev_keep = 0;
    c->reading = c->writing = 0;
    c->rev_on = c->wev_on = 0;
    if (c->fd >= 0) {
        c->ops->close(c);
        close(c->fd);
        c->fd = -1;
    }
    c->connected = 0;
}

void
kr_conn_want_bytes(struct kr_conn *c, uint64_t need)
{
    uint32_t was = c->lowat > 1 ? c->lowat : 1, v = 1;
    int iv;

    if (c->fd < 0 || !c->ops->rcvlowat || c->lowat_off) {
        return;
    }
    if (need >= (uint64_t)c->ops->held_max + KR_LOWAT_MIN) {
        uint64_t w = need - c->ops->held_max;

        if (was == 1) {
            int b = 0;
            socklen_t bl = sizeof(b);

            /* autotuning grows it as the connection goes: read at each
               rise from the default, not at each change */
            c->rcvbuf = getsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &b, &bl) == 0
                            && b > 0 ? (uint32_t)b : 0;
        }
        if (w > c->rcvbuf / 4) {
            w = c->rcvbuf / 4;
        }
        if (w > KR_READ_MAX - KR_CHAIN_HDR) {
            w = KR_READ_MAX - KR_CHAIN_HDR;
        }
        if (w >= KR_LOWAT_MIN) {
            v = (uint32_t)w;
        }
    }
    if (v == was) {
        return;
    }
    iv = (int)v;
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &iv, sizeof(iv)) != 0) {
        c->lowat_off = 1;
        return;
    }
    c->lowat = v;
}

void
kr_conn_cork(struct kr_conn *c, bool on)
{
    int v = on ? 1 : 0;

    if (c->fd < 0 || !c->ops->splice || c->corked == (unsigned)on) {
        return;
    }
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v)) == 0) {
        c->corked = on;
    }
}

bool
kr_conn_peer_gone(evutil_socket_t fd)
{
    struct pollfd p = { .fd = fd, .events = POLLRDHUP };

    return fd >= 0 && poll(&p, 1, 0) == 1 &&
           (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

int64_t
kr_conn_sock_outq(evutil_socket_t fd)
{
#ifdef SIOCOUTQ
    int q = 0;

    return ioctl(fd, SIOCOUTQ, &q) == 0 ? q : -1;
#else
    (void)fd;
    return -1;
#endif
}

bool
kr_conn_out_full(struct evbuffer *out, size_t maxb)
{
    size_t len = evbuffer_get_length(out);
    struct evbuffer_iovec vec[KR_OUT_CHAINS];

    /* With vectors to fill and no length, evbuffer_peek stops after
     * KR_OUT_CHAINS chains: counting them all (n_vec 0) walks the whole
     * chain list on every call, which a busy connection calls per event. */
    return len >= maxb ||
           (len > 0 &&
            evbuffer_peek(out, -1, NULL, vec, KR_OUT_CHAINS) >= KR_OUT_CHAINS);
}

/* ---- splice(2) lanes and their pipes -------------------------------- */

void
kr_pipe_pool_init(struct kr_pipe_pool *pp)
{
    memset(pp, 0, sizeof(*pp));
}

int
kr_pipe_pool_get(struct kr_pipe_pool *pp, int fds[2])
{
    int sz;

    if (pp->nused >= KR_PIPE_MAX) {
        return KR_ELIMIT;
    }
    if (pp->nfree > 0) {
        pp->nfree--;
        fds[0] = pp->free_fds[pp->nfree][0];
        fds[1] = pp->free_fds[pp->nfree][1];
        pp->nused++;
        return KR_OK;
    }
#ifdef HAVE_PIPE2
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        fds[0] = fds[1] = -1;
        return KR_ELIMIT;
    }
#else
    fds[0] = fds[1] = -1;
    return KR_ELIMIT;
#endif
#ifdef F_SETPIPE_SZ
    sz = fcntl(fds[1], F_SETPIPE_SZ, KR_PIPE_BYTES);
    if (sz <= 0) {
        sz = fcntl(fds[1], F_GETPIPE_SZ);
    }
#else
    sz = 0;
#endif
    if (sz <= 0) {
        sz = 65536;                     /* Linux's default */
    }
    /* the smallest pipe the kernel granted (every lane uses the same
       bound; a later pipe may get less when pipe-user-pages-soft is
       reached) */
    if (pp->pipe_bytes == 0 || (size_t)sz < pp->pipe_bytes) {
        pp->pipe_bytes = (size_t)sz;
    }
    pp->nused++;
    return KR_OK;
}

void
kr_pipe_pool_put(struct kr_pipe_pool *pp, int fds[2], bool empty)
{
    if (fds[0] < 0) {
        return;
    }
    pp->nused--;
    if (empty && pp->nfree < KR_PIPE_KEEP) {
        pp->free_fds[pp->nfree][0] = fds[0];
        pp->free_fds[pp->nfree][1] = fds[1];
        pp->nfree++;
    } else {
        close(fds[0]);
        close(fds[1]);
    }
    fds[0] = fds[1] = -1;
}

void
kr_pipe_pool_free(struct kr_pipe_pool *pp)
{
    int i;

    for (i = 0; i < pp->nfree; i++) {
        close(pp->free_fds[i][0]);
        close(pp->free_fds[i][1]);
    }
    pp->nfree = 0;
}

bool
kr_lane_readable(const struct kr_splice *l, size_t pipe_bytes)
{
    if (l->left > 0) {
        return l->queued < pipe_bytes && !l->full;
    }
    return l->queued == 0;
}

void
kr_lane_end(struct kr_splice *l, struct kr_pipe_pool *pp)
{
    if (l->left == 0 && l->queued == 0 && l->pipe[0] >= 0) {
        kr_pipe_pool_put(pp, l->pipe, true);
    }
}

bool
kr_lane_begin(struct kr_splice *l, struct kr_pipe_pool *pp,
              struct kr_conn *src, const struct kr_conn *dst, uint64_t n,
              int64_t min)
{
    if (min <= 0 || n < (uint64_t)min || l->off || l->left > 0 ||
        l->queued > 0 || !src->ops->splice || !dst->ops->splice ||
        src->fd < 0 || evbuffer_get_length(src->in) > 0) {
        return false;
    }
    if (l->pipe[0] < 0 && kr_pipe_pool_get(pp, l->pipe) != KR_OK) {
        return false;
    }
    l->left = n;
    /* after the run: small reads up to the next one (a Fetch partition's
       header is tens of bytes before its records) */
    src->read_size = KR_READ_MIN;
    return true;
}

ssize_t
kr_lane_fill(struct kr_splice *l, struct kr_pipe_pool *pp,
             struct kr_conn *src, int *off_errno)
{
    size_t room = l->queued < pp->pipe_bytes ? pp->pipe_bytes - l->queued
                                             : 0;
    size_t want = l->left < room ? (size_t)l->left : room;
    ssize_t n;

    if (want == 0) {
        errno = EAGAIN;
        return -1;
    }
#ifdef HAVE_SPLICE
    do {
        n = splice(src->fd, NULL, l->pipe[1], NULL, want,
                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    } while (n < 0 && errno == EINTR);
#else
    n = -1;
    errno = ENOSYS;
#endif
    if (n > 0) {
        l->left -= (uint64_t)n;
        l->queued += (size_t)n;
        src->bytes_in += (uint64_t)n;
    } else if (n < 0 && (errno == EINVAL || errno == ENOSYS ||
                         errno == EOPNOTSUPP) && l->queued == 0) {
        *off_errno = errno;
        l->off = 1;
        l->left = 0;
        kr_lane_end(l, pp);
        errno = EAGAIN;
    } else if (n < 0 && kr_conn_again(errno) && l->queued > 0) {
        l->full = 1;
    }
    return n;
}

int
kr_lane_drain(struct kr_splice *l, struct kr_pipe_pool *pp, struct kr_conn *c)
{
    ssize_t n;

    while (l->queued > 0) {
#ifdef HAVE_SPLICE
        n = splice(l->pipe[0], NULL, c->fd, NULL, l->queued,
                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
#else
        n = -1;
        errno = ENOSYS;
#endif
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0) {
                errno = EPIPE;          /* cannot happen: queued > 0 */
            }
            return kr_conn_again(errno) ? 0 : -1;
        }
        l->queued -= (size_t)n;
        l->full = 0;
    }
    kr_lane_end(l, pp);
    return 0;
}

void
kr_conn_free_buffers(struct kr_conn *c)
{
    free(c->host);
    c->host = NULL;
    if (c->in != NULL) {
        evbuffer_free(c->in);
        c->in = NULL;
    }
    if (c->out != NULL) {
        evbuffer_free(c->out);
        c->out = NULL;
    }
}
