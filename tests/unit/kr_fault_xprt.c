/*
 * kr_fault_xprt.c - the fault-injecting test transport (kr_fault_xprt.h):
 * plain TCP underneath (kr_conn_tcp_ops), faults drawn from a seeded
 * xorshift64* per connection.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "kr_fault_xprt.h"

/* The most a gulp takes off the socket. */
#define GULP_MOST (8u << 20)

struct kr_fault_stats kr_fault_stats;

static struct kr_fault_conf conf;

/* One connection's state (kr_conn.xprt). */
struct fx {
    uint64_t rng;
    struct evbuffer *held;              /* read from the socket, not yet
                                           returned */
    unsigned hs_left;                   /* handshake steps to go */
    unsigned want_write:1;              /* the last read asked for the
                                           write event: held is not
                                           pending until the next read */
    unsigned hs_started:1;
    unsigned hs_done:1;
};

void
kr_fault_setup(const struct kr_fault_conf *c)
{
    conf = *c;
    memset(&kr_fault_stats, 0, sizeof(kr_fault_stats));
}

static uint64_t
rnd(struct fx *x)
{
    x->rng ^= x->rng >> 12;
    x->rng ^= x->rng << 25;
    x->rng ^= x->rng >> 27;
    return x->rng * UINT64_C(2685821657736338717);
}

/* 0 .. 999 */
static unsigned
roll(struct fx *x)
{
    return (unsigned)(rnd(x) >> 33) % 1000;
}

/* 1 .. n (n > 0) */
static size_t
upto(struct fx *x, size_t n)
{
    return 1 + (size_t)(rnd(x) >> 20) % n;
}

/* Does fd have bytes (or EOF) to read now? */
static bool
sock_readable(evutil_socket_t fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

static int
fx_open(struct kr_conn *c)
{
    struct fx *x = calloc(1, sizeof(*x));

    if (x == NULL) {
        return -1;
    }
    x->held = evbuffer_new();
    if (x->held == NULL) {
        free(x);
        errno = ENOMEM;
        return -1;
    }
    kr_fault_stats.conns++;
    x->rng = (conf.seed + 1) * UINT64_C(0x9E3779B97F4A7C15) ^
             (kr_fault_stats.conns * UINT64_C(0xD1B54A32D192ED03));
    if (x->rng == 0) {
        x->rng = 1;
    }
    x->hs_left = conf.hs_steps;
    c->xprt = x;
    return 0;
}

static int
fx_handshake(struct kr_conn *c)
{
    struct fx *x = c->xprt;

    x->hs_started = 1;
    kr_fault_stats.hs_steps++;
    if (x->hs_left == 0) {
        x->hs_done = 1;
        kr_fault_stats.hs_done++;
        return 0;
    }
    x->hs_left--;
    /* readability only when it will come: the peer may send nothing
       before it has an answer */
    if (sock_readable(c->fd) && roll(x) < conf.hs_want_read) {
        kr_fault_stats.hs_want_read++;
        c->want = KR_CONN_WANT_READ;
    } else {
        kr_fault_stats.hs_want_write++;
        c->want = KR_CONN_WANT_WRITE;
    }
    errno = EAGAIN;
    return -1;
}

/* No Kafka byte moves during the handshake (a client's first bytes are
   read before it starts: the sniff), none is written before it is done. */
static bool
misused(const struct fx *x, bool write)
{
    return write ? !x->hs_done : x->hs_started && !x->hs_done;
}

/* Return up to max held bytes (all, or a random part of them). */
static ssize_t
give_held(struct kr_conn *c, struct fx *x, struct evbuffer *in, size_t max)
{
    size_t k = evbuffer_get_length(x->held);

    if (k > max) {
        k = max;
    }
    if (conf.gulp_max > 0 && k > conf.gulp_max) {
        k = conf.gulp_max;              /* one record at a time */
    }
    if (roll(x) < 300) {
        k = upto(x, k);
    }
    kr_fault_stats.read_pending++;
    if (!sock_readable(c->fd)) {
        kr_fault_stats.read_pending_quiet++;
    }
    return evbuffer_remove_buffer(x->held, in, k);
}

static ssize_t
fx_read(struct kr_conn *c, struct evbuffer *in, size_t max)
{
    struct fx *x = c->xprt;
    ssize_t n;
    size_t k;
    unsigned r, at;

    kr_fault_stats.reads++;
    if (misused(x, false)) {
        kr_fault_stats.misuse++;
    }
    if (x->want_write) {
        x->want_write = 0;
        kr_fault_stats.read_after_want_write++;
    }
    if (evbuffer_get_length(x->held) > 0) {
        return give_held(c, x, in, max);
    }
    r = roll(x);
    at = conf.read_again;
    if (r < at) {
        kr_fault_stats.read_again++;
        errno = EAGAIN;
        return -1;
    }
    at += conf.read_want_write;
    if (r < at) {
        n = kr_conn_tcp_ops.read(c, x->held, max);
        if (n <= 0) {
            return n;
        }
        /* as an SSL_read that must send first: what it took comes with
           the retry after a write event, not before */
        kr_fault_stats.read_want_write++;
        x->want_write = 1;
        c->want = KR_CONN_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    }
    at += conf.read_one;
    if (r < at) {
        kr_fault_stats.read_one++;
        return kr_conn_tcp_ops.read(c, in, 1);
    }
    at += conf.read_short;
    if (r < at) {
        kr_fault_stats.read_short++;
        return kr_conn_tcp_ops.read(c, in, upto(x, max));
    }
    at += conf.read_hold;
    if (r < at) {
        n = kr_conn_tcp_ops.read(c, x->held, max);
        if (n <= 0) {
            return n;
        }
        k = n > 1 ? upto(x, (size_t)n - 1) : 1;
        if ((size_t)n > k) {
            kr_fault_stats.read_hold++;
        }
        return evbuffer_remove_buffer(x->held, in, k);
    }
    at += conf.read_gulp;
    if (r < at) {
        /* as OpenSSL reading ahead: the socket is emptied, one record
           is returned */
        n = -1;
        errno = EAGAIN;
        while (evbuffer_get_length(x->held) < GULP_MOST &&
               (n = kr_conn_tcp_ops.read(c, x->held, max)) > 0) {
        }
        if (evbuffer_get_length(x->held) == 0) {
            return n;
        }
        kr_fault_stats.read_gulp++;
        k = conf.gulp_max > 0 ? conf.gulp_max : 16384;
        return evbuffer_remove_buffer(x->held, in, upto(x, k < max ? k
                                                                   : max));
    }
    return kr_conn_tcp_ops.read(c, in, max);
}

static ssize_t
fx_write(struct kr_conn *c, struct evbuffer *out)
{
    struct fx *x = c->xprt;
    size_t len = evbuffer_get_length(out);
    unsigned r, at;

    kr_fault_stats.writes++;
    if (misused(x, true)) {
        kr_fault_stats.misuse++;
    }
    /* readability only when it will come (the peer sent something):
       drawn on its own, as it applies to few writes */
    if (conf.write_want_read > 0 && sock_readable(c->fd) &&
        roll(x) < conf.write_want_read) {
        kr_fault_stats.write_want_read++;
        c->want = KR_CONN_WANT_READ;
        errno = EAGAIN;
        return -1;
    }
    r = roll(x);
    at = conf.write_again;
    if (r < at) {
        kr_fault_stats.write_again++;
        errno = EAGAIN;
        return -1;
    }
    at += conf.write_one;
    if (r < at) {
        kr_fault_stats.write_one++;
        return evbuffer_write_atmost(out, c->fd, 1);
    }
    at += conf.write_short;
    if (r < at) {
        kr_fault_stats.write_short++;
        return evbuffer_write_atmost(out, c->fd, (ev_ssize_t)upto(x, len));
    }
    return kr_conn_tcp_ops.write(c, out);
}

static size_t
fx_pending(const struct kr_conn *c)
{
    const struct fx *x = c->xprt;

    return x == NULL || x->want_write ? 0 : evbuffer_get_length(x->held);
}

static void
fx_close(struct kr_conn *c)
{
    struct fx *x = c->xprt;

    if (x != NULL) {
        evbuffer_free(x->held);
        free(x);
        c->xprt = NULL;
    }
}

const struct kr_conn_ops kr_fault_ops = {
    .name = "fault",
    .open = fx_open,
    .handshake = fx_handshake,
    .read = fx_read,
    .write = fx_write,
    .pending = fx_pending,
    .close = fx_close,
    .splice = false
};
