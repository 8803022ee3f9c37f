/*
 * kr_conn.h - the transport of one socket: how bytes get from the socket
 * into an evbuffer and back (plain TCP here, TLS in kr_tls.h), its event
 * interest, and the splice(2) lanes and pipe pool of the plain-TCP
 * transport.
 *
 * A session (kr_session.h) has two kr_conn: the client's and the
 * upstream's.  This layer knows sockets, events and buffers; it knows
 * nothing of Kafka (no codec, no frames) and nothing of sessions: its
 * callers pass what it needs (a log prefix, the limits).  Everything runs
 * on one worker's event_base thread.
 */
#ifndef KR_CONN_H
#define KR_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "kr_common.h"

/* First read size; reads adapt between this and KR_READ_MAX. */
#define KR_READ_MIN (16 * 1024)
#define KR_READ_MAX (256 * 1024)
/*
 * SO_RCVLOWAT (kr_conn_want_bytes): the least a raised low-water mark
 * may be.  Below it every byte wakes the reader, as by default.
 */
#define KR_LOWAT_MIN (32 * 1024)
/*
 * libevent allocates a chain as the next power of two >= its header +
 * the size asked for: ask for a power of two minus this so a 256 KiB
 * read takes a 256 KiB chain, not 512 KiB.
 */
#define KR_CHAIN_HDR 128
/*
 * An output holding this many chains (each up to KR_READ_MAX, however
 * few bytes it carries) counts as full: forwarded bytes are moved as
 * whole chains, never copied, so a backlog of small reads is bounded by
 * its chain count as well as by max_buffer_bytes.
 */
#define KR_OUT_CHAINS 16

/*
 * splice(2) pipes (issue 4).  Each holds up to KR_PIPE_BYTES (1 MiB, the
 * default /proc/sys/fs/pipe-max-size: one Fetch partition's records at
 * Kafka's default max.partition.fetch.bytes); at most KR_PIPE_MAX are
 * lent at once per pool (2 fds each), KR_PIPE_KEEP empty ones kept.
 * Pipe pages are allocated only while bytes sit in them.
 */
#define KR_PIPE_BYTES (1024 * 1024)
#define KR_PIPE_MAX 256
#define KR_PIPE_KEEP 16

struct kr_conn;

/*
 * What a transport step that could not finish waits for (kr_conn.want):
 * the socket event after which the same step is to be called again.  A
 * read normally waits for readability and a write for writability; a
 * record layer (TLS) may need the opposite one: an SSL_read that must
 * first send (a key update, a renegotiation) waits for EV_WRITE, an
 * SSL_write that must first receive waits for EV_READ (HAProxy's
 * xprt_ops subscribe to the event instead).
 */
enum kr_conn_want {
    KR_CONN_WANT_NONE = 0,              /* the usual event of the step */
    KR_CONN_WANT_READ,                  /* the socket to be readable */
    KR_CONN_WANT_WRITE                  /* the socket to be writable */
};

/*
 * The stages of a connection before its Kafka frames (kr_conn.stage), in
 * this order; each may be skipped.  The owner (the session) moves a
 * client connection through them as bytes arrive, and framing starts
 * only at KR_STAGE_FRAMES.
 *   PROXY      a PROXY protocol header (v1 text or v2 binary) naming the
 *              real client, on a listener with proxy_protocol (issue 12):
 *              read off the socket as it is (kr_conn_read_raw), never
 *              past the header's end, so the next stages find their
 *              bytes on the socket; other listeners skip it.
 *   SNIFF      the first bytes name what speaks: a TLS ClientHello or
 *              HTTP on a plaintext listener is refused with one log line
 *              (kr_frame_sniff), and so are plaintext Kafka or HTTP on a
 *              TLS listener.  They are read (ops->read) into c->in and
 *              stay there for what follows (the TLS transport reads them
 *              raw and takes them into its handshake).
 *   HANDSHAKE  ops->handshake is called until it is done; events follow
 *              what it asks for (hs_want), not the owner's interest.
 *   FRAMES     ops->read / ops->write carry the Kafka bytes.
 * An upstream connection has no PROXY nor SNIFF stage: once connect(2)
 * completed it goes to HANDSHAKE (with ops->handshake) or FRAMES.
 */
enum kr_conn_stage {
    KR_STAGE_PROXY = 0,
    KR_STAGE_SNIFF,
    KR_STAGE_HANDSHAKE,
    KR_STAGE_FRAMES
};

/*
 * Transport of one socket: the seam where TLS goes.  Every function runs
 * on the conn's event loop; c->fd is nonblocking.  "Again" below means
 * -1 with errno EAGAIN: the step could not go on now, and c->want says
 * which event to wait for before calling the same function again
 * (KR_CONN_WANT_NONE: the usual one; the function leaves it NONE unless
 * it needs the opposite event).  Any other errno is a failure of the
 * connection (the owner closes it).
 *
 *   open       optional (NULL: no state).  Set up the transport's state
 *              (c->xprt) for c->fd, once, before any other function;
 *              for an upstream c->host is set already.  Returns 0, or
 *              -1 with errno (the owner closes c; close is still called).
 *   handshake  optional (NULL: none, plain TCP).  One step of the
 *              transport's handshake (stage KR_STAGE_HANDSHAKE): returns
 *              0 when it is done (frames may flow), -1 again (c->want
 *              READ or WRITE: the event it waits for; NONE counts as
 *              READ), or -1 with another errno (failed).
 *   read       append at most max bytes (> 0) of the peer's stream to in
 *              and return the count, 0 at the peer's EOF, again (nothing
 *              now; c->want WRITE: retry once the socket is writable), or
 *              -1 failed.  A read that returns again must leave nothing
 *              it could have returned in pending.
 *   write      send from out (draining what was sent; out is not empty)
 *              and return the count (> 0, maybe less than out holds),
 *              again (c->want READ: retry once the socket is readable,
 *              or after the owner's next read, which may have taken what
 *              it waited for), or -1 failed.  A transport whose record
 *              layer must be retried with the same bytes keeps them
 *              itself.
 *   pending    optional (NULL: never any).  Bytes the transport already
 *              took off the socket and read would return now without a
 *              socket event (decrypted inside the library: SSL_pending);
 *              the owner schedules a read for them (kr_conn_kick), as no
 *              readable event will come.  0 while a read waits for the
 *              write event.
 *   close      release the transport's own state (c->xprt, may be NULL
 *              when open failed), not the fd.  Called once.
 *   shutdown_write  optional (NULL: nothing before the socket's).  The
 *              writing side ends (kr_conn_shutdown_write): what the
 *              transport sends first, best effort (TLS: close_notify,
 *              RFC 8446 6.1); reading goes on.
 *   why        optional (NULL: strerror(errno) says all).  After a step
 *              failed (-1, not again): what went wrong in the
 *              transport's terms (TLS: OpenSSL's reason, the certificate
 *              check that failed), one line, or NULL when errno says it.
 *              Valid until the next step (kr_conn_strerror).
 */
struct kr_conn_ops {
    const char *name;                   /* "tcp", "tls" */
    int (*open)(struct kr_conn *c);
    int (*handshake)(struct kr_conn *c);
    ssize_t (*read)(struct kr_conn *c, struct evbuffer *in, size_t max);
    ssize_t (*write)(struct kr_conn *c, struct evbuffer *out);
    size_t (*pending)(const struct kr_conn *c);
    void (*close)(struct kr_conn *c);
    const char *(*why)(const struct kr_conn *c);
    void (*shutdown_write)(struct kr_conn *c);
    bool rcvlowat;                      /* the peer's bytes come in
                                           small units that each wake the
                                           reader (TLS records of at most
                                           16 KiB, a segment each on
                                           loopback): kr_conn_want_bytes
                                           may raise SO_RCVLOWAT.  Not
                                           plain TCP (segments of up to
                                           64 KiB on loopback): there a
                                           raised mark saved little CPU
                                           and cost MB/s (contrib/bench/
                                           README.md, "TLS produce on two
                                           CPUs") */
    size_t held_max;                    /* with rcvlowat: the most bytes
                                           of the peer's stream the
                                           transport may have taken off
                                           the socket and not returned yet
                                           (TLS: OpenSSL's read buffer) */
    bool splice;                        /* the fd carries the Kafka bytes
                                           themselves (no record layer):
                                           splice(2) may move them */
};

/* The plain TCP transport: readv into evbuffer_reserve_space, writev. */
extern const struct kr_conn_ops kr_conn_tcp_ops;

/*
 * A pool of pipes for splice(2), one per worker.  Zero-initialised, then
 * kr_pipe_pool_init.  pipe_bytes: what each pipe holds (F_SETPIPE_SZ
 * KR_PIPE_BYTES, or the least the kernel granted), 0 before the first.
 */
struct kr_pipe_pool {
    int free_fds[KR_PIPE_KEEP][2];      /* empty pipes kept for reuse */
    int nfree;
    int nused;                          /* lent now */
    size_t pipe_bytes;
};

/* An empty pool (no pipe opened yet). */
void kr_pipe_pool_init(struct kr_pipe_pool *pp);

/*
 * Lend a pipe: fds[0] the read end, fds[1] the write end, both
 * O_NONBLOCK|O_CLOEXEC.  Returns KR_OK; KR_ELIMIT when KR_PIPE_MAX pipes
 * are lent already or pipe2 failed (the fd limit): the caller reads
 * through user space instead.  Give it back with kr_pipe_pool_put.
 */
int kr_pipe_pool_get(struct kr_pipe_pool *pp, int fds[2]) KR_MUST_CHECK;

/*
 * Give back a lent pipe.  empty: it holds no byte (kept for reuse, up to
 * KR_PIPE_KEEP); otherwise it is closed, dropping what it held.  fds[]
 * are set to -1.  fds[0] < 0: nothing to give back.
 */
void kr_pipe_pool_put(struct kr_pipe_pool *pp, int fds[2], bool empty);

/* Close the kept pipes (none may be lent any more). */
void kr_pipe_pool_free(struct kr_pipe_pool *pp);

/*
 * A splice(2) lane (issue 4): bytes krelay need not look at (a Fetch
 * response's record data, the rest of a pass-through frame) move from one
 * socket into a pipe of the pool and from the pipe into the other socket,
 * never through user space.  The pipe's bytes follow everything already
 * in the sink's out buffer, which gains nothing until the pipe is empty.
 * Plain TCP only (kr_conn_ops.splice).
 */
struct kr_splice {
    int pipe[2];                        /* read end, write end; -1: none */
    uint64_t left;                      /* bytes still to move from the
                                           source socket into the pipe */
    size_t queued;                      /* bytes in the pipe, owed to the
                                           sink after its out buffer */
    unsigned off:1;                     /* splice failed here (EINVAL:
                                           the socket does not support
                                           it): this lane reads through
                                           user space from now on */
    unsigned full:1;                    /* the pipe took nothing (EAGAIN)
                                           though it holds less than
                                           pipe_bytes: its slots are used
                                           up; the source waits until the
                                           sink takes some */
};

/*
 * One side of a session: a socket with its buffers and events.  The
 * owner says what it wants (kr_conn_set_reading / _writing); which of
 * rev and wev are added follows from that, from the stage and from what
 * the transport's last read, write or handshake step asked for
 * (rd_want, wr_want, hs_want): a read that waits for writability adds
 * wev, and the owner's wev callback reads.  wev is made the first time
 * it is to be added (kr_conn_events) and kept from then on once c is
 * connected; one made before (for connect(2), a handshake step) is freed
 * when removed.  A connection that never waited to write once connected
 * (most clients; every idle one) keeps no write event.
 */
struct kr_conn {
    evutil_socket_t fd;                 /* -1 when closed */
    uint32_t lowat;                     /* the socket's SO_RCVLOWAT as
                                           kr_conn_want_bytes set it; 0 or
                                           1: the default (every byte
                                           wakes the reader) */
    uint32_t rcvbuf;                    /* SO_RCVBUF when the mark was
                                           last raised (its cap) */
    uint32_t read_size;                 /* next read's size (adaptive,
                                           16 KiB .. 256 KiB) */
    const struct kr_conn_ops *ops;
    void *xprt;                         /* transport state (TLS), NULL */
    struct event *rev;                  /* EV_READ|EV_PERSIST */
    struct event *wev;                  /* EV_WRITE|EV_PERSIST, NULL
                                           while none is needed */
    event_callback_fn wcb;              /* wev's callback (its base, fd
                                           and argument: rev's); NULL:
                                           no events (kr_conn_events) */
    struct evbuffer *in;                /* read, not yet forwarded */
    struct evbuffer *out;               /* to be written */
    uint64_t bytes_in, bytes_out;       /* bytes read / written */
    unsigned corked:1;                  /* TCP_CORK set (kr_conn_cork) */
    unsigned reading:1;                 /* the owner wants to read */
    unsigned writing:1;                 /* the owner has bytes to write */
    unsigned connected:1;               /* connected, and the handshake
                                           (if any) done: frames may be
                                           written */
    unsigned rev_on:1;                  /* rev is added */
    unsigned wev_on:1;                  /* wev is added */
    unsigned wev_keep:1;                /* wev was made once c was
                                           connected: kept when removed */
    unsigned wev_failed:1;              /* wev could not be made when it
                                           was to be added (out of
                                           memory): nothing waits for
                                           writability; the owner closes
                                           c (kr_conn_events) */
    unsigned lowat_off:1;               /* setting SO_RCVLOWAT failed:
                                           not tried again */
    uint8_t stage;                      /* enum kr_conn_stage */
    uint8_t want;                       /* enum kr_conn_want: set by the
                                           transport step that returned
                                           again */
    uint8_t rd_want;                    /* the event the next read waits
                                           for: READ, or WRITE when the
                                           transport asked */
    uint8_t wr_want;                    /* the next write's: WRITE, or
                                           READ */
    uint8_t hs_want;                    /* the next handshake step's */
    char *host;                         /* upstream: the host name dialled
                                           (a broker's advertised host, a
                                           bootstrap or dial.N host; no
                                           port, no brackets), for SNI and
                                           certificate checks; malloc'd,
                                           freed by kr_conn_free_buffers;
                                           NULL or "": none */
    void *xprt_ctx;                     /* what the owner gives the
                                           transport before kr_conn_open
                                           (TLS: its struct kr_tls_ctx,
                                           borrowed); NULL: none */
    uint64_t copied;                    /* bytes the transport copied to
                                           send them (TLS: small chains
                                           coalesced into one record); the
                                           owner takes and zeroes it */
};

/* Is errno value e "try again later" (EAGAIN, EWOULDBLOCK, EINTR)? */
bool kr_conn_again(int e);

/*
 * Why c's last step failed with errno e: the transport's own words
 * (ops->why) when it has them, else strerror(e).  Static or c's; valid
 * until c's next step.
 */
const char *kr_conn_strerror(const struct kr_conn *c, int e);

/*
 * A closed conn on the plain TCP transport with empty in/out buffers
 * (NULL when evbuffer_new failed: the caller checks), at stage
 * KR_STAGE_FRAMES (the owner sets an earlier one).
 */
void kr_conn_init(struct kr_conn *c);

/*
 * Give c its socket fd (nonblocking; c owns it from now on: kr_conn_close
 * closes it) on transport ops (NULL: plain TCP), and let the transport set
 * up its state (ops->open).  Returns KR_OK, or KR_ERROR with errno set
 * when ops->open failed (the owner closes c).
 */
int kr_conn_open(struct kr_conn *c, evutil_socket_t fd,
                 const struct kr_conn_ops *ops) KR_MUST_CHECK;

/*
 * c's events on base (after kr_conn_open), both with argument arg: rev
 * (EV_READ|EV_PERSIST, callback rcb) now, wev (EV_WRITE|EV_PERSIST, wcb)
 * when it is to be added (struct kr_conn: kept from the first time c is
 * connected).  Until this call kr_conn_set_reading and _writing do
 * nothing.  Should wev then fail to be made (out of memory),
 * c->wev_failed is set and stays: the owner checks it after its calls
 * and closes c (nothing would wake the writer).  Returns KR_OK, or
 * KR_ENOMEM (c has no events).
 */
int kr_conn_events(struct kr_conn *c, struct event_base *base,
                   event_callback_fn rcb, event_callback_fn wcb,
                   void *arg) KR_MUST_CHECK;

/*
 * Free the events, release the transport and close the fd; the buffers
 * stay (kr_conn_free_buffers).  Idempotent.
 */
void kr_conn_close(struct kr_conn *c);

/*
 * End c's writing side after what it wrote (the peer sees an orderly end
 * and may still answer): the transport's end first (TLS: close_notify),
 * then shutdown(2) SHUT_WR.  Reading goes on.  Returns 0, or -1 with
 * errno (shutdown's).
 */
int kr_conn_shutdown_write(struct kr_conn *c);

/* Free the in/out buffers (after kr_conn_close). */
void kr_conn_free_buffers(struct kr_conn *c);

/*
 * The owner wants to read (has bytes to write), or no longer: rev and wev
 * are added or removed as that, the stage and the transport's last
 * requests say (struct kr_conn).  Reading on also schedules a read for
 * bytes the transport holds (kr_conn_kick).
 */
void kr_conn_set_reading(struct kr_conn *c, bool on);
void kr_conn_set_writing(struct kr_conn *c, bool on);

/*
 * Bytes the transport holds are readable without a socket event
 * (ops->pending > 0; after reads were paused for backpressure, or a read
 * that returned less than the transport had): when the owner wants to
 * read and the read waits for nothing else, make rev active so its
 * callback reads them.  A no-op for plain TCP.
 */
void kr_conn_kick(struct kr_conn *c);

/*
 * The owner acts on nothing of c's stream before the next need bytes
 * have come (the rest of a request frame it forwards, its size prefix
 * read): on a transport with ops->rcvlowat, let the socket wake the
 * reader only once part of them are there (SO_RCVLOWAT), a few wake-ups
 * per frame rather than one per TLS record.  The mark is need less what
 * the transport may hold (ops->held_max: the bytes still to come on the
 * socket are at least that many, the ciphertext being longer than the
 * plaintext counted), at most one read (KR_READ_MAX) and a quarter of
 * SO_RCVBUF (the peer's window stays open: the kernel would otherwise
 * raise SO_RCVBUF and clamp the window to the mark), and at least
 * KR_LOWAT_MIN; below that, or with need 0, the default 1.  The owner
 * calls it again after every read that took bytes of the run (the mark
 * must follow the bytes still to come, or the last ones would never
 * wake the reader) and with 0 when the run ends or it must see every
 * byte.  The kernel still wakes the reader at the peer's EOF, on an
 * error, and when the receive window or memory runs short; bytes the
 * transport holds are kicked as before (kr_conn_kick).  One setsockopt
 * per change (and a getsockopt of SO_RCVBUF when raised from the
 * default); a failed one is ignored and not tried again on c.
 */
void kr_conn_want_bytes(struct kr_conn *c, uint64_t need);

/*
 * Read once into c->in (ops->read); the next read's size adapts to what
 * this one got.  Returns what ops->read returned; after "again",
 * c->rd_want (and the events) follow what the transport asked for.
 */
ssize_t kr_conn_read(struct kr_conn *c);

/*
 * Read at most max bytes of c's socket as they are into buf (stage
 * KR_STAGE_PROXY: before the transport's own stages, whose state it
 * leaves alone; nothing goes into c->in nor counts in bytes_in).
 * Returns the count, 0 at EOF, or -1 with errno (EAGAIN: nothing now).
 */
ssize_t kr_conn_read_raw(struct kr_conn *c, void *buf, size_t max);

/*
 * Write c->out once (ops->write; out not empty).  Returns what ops->write
 * returned (bytes_out is the owner's to count); after "again",
 * c->wr_want (and the events) follow what the transport asked for.
 */
ssize_t kr_conn_write(struct kr_conn *c);

/*
 * One step of c's handshake (stage KR_STAGE_HANDSHAKE, ops->handshake
 * set).  Returns 0 when it is done (stage KR_STAGE_FRAMES: the owner sets
 * connected), -1 with errno EAGAIN while it waits (events follow
 * c->hs_want), or -1 with another errno (failed).
 */
int kr_conn_handshake(struct kr_conn *c);

/*
 * True when out holds maxb bytes, or KR_OUT_CHAINS chains (memory up to
 * KR_OUT_CHAINS * KR_READ_MAX: chains moved keep their capacity).
 */
bool kr_conn_out_full(struct evbuffer *out, size_t maxb);

/* Bytes the kernel holds unsent (or unacknowledged) on fd, or -1. */
int64_t kr_conn_sock_outq(evutil_socket_t fd);

/*
 * True when fd's peer has ended its side (a FIN: poll's POLLRDHUP) or
 * the connection is reset, even with bytes unread before the end: for a
 * connection krelay does not read for now.  Does not block or read.
 */
bool kr_conn_peer_gone(evutil_socket_t fd);

/*
 * Cork c's socket (TCP_CORK) while more of the same frame is still to
 * come, so that its pieces (bytes written from user space, runs spliced
 * from a pipe) leave in full segments instead of one small segment each;
 * uncorking sends what is held.  Only on a transport that carries the
 * bytes themselves (ops->splice: plain TCP); a no-op when c is already so
 * (c->corked) or closed.  A failed setsockopt is ignored (the bytes still
 * go, in smaller segments).
 */
void kr_conn_cork(struct kr_conn *c, bool on);

/*
 * May the lane's source socket be read?  While a run is under way, when
 * its pipe has room (pipe_bytes: the pool's); after the run, only once
 * the pipe is empty (what the source sends next goes through user space
 * and must follow the pipe's bytes).
 */
bool kr_lane_readable(const struct kr_splice *l, size_t pipe_bytes);

/* The run is over and the pipe empty: give the pipe back to pp. */
void kr_lane_end(struct kr_splice *l, struct kr_pipe_pool *pp);

/*
 * The next n bytes src sends are opaque to krelay (nothing of them is
 * read nor rewritten): move them to dst's socket through a pipe of pp,
 * when n >= min_bytes (> 0), both transports allow splice, and nothing
 * read from src waits in user space.  True when the lane started.
 */
bool kr_lane_begin(struct kr_splice *l, struct kr_pipe_pool *pp,
                   struct kr_conn *src, const struct kr_conn *dst,
                   uint64_t n, int64_t min_bytes);

/*
 * Move what src has of the run into the pipe.  Returns the count, 0 at
 * EOF, -1 with errno (EAGAIN: nothing now).  An error before any byte of
 * the pipe's (EINVAL: this socket cannot splice) turns the lane off:
 * *off_errno gets the errno (else 0), the run goes on through user space
 * (l->left is 0 again, -1 with EAGAIN).
 */
ssize_t kr_lane_fill(struct kr_splice *l, struct kr_pipe_pool *pp,
                     struct kr_conn *src, int *off_errno);

/*
 * Write the pipe's bytes to c (its out buffer is empty: they follow it).
 * Returns 0, or -1 with errno on a write error other than EAGAIN.
 */
int kr_lane_drain(struct kr_splice *l, struct kr_pipe_pool *pp,
                  struct kr_conn *c);

#endif /* KR_CONN_H */
