/*
 * kr_tls.c - the TLS transport (kr_tls.h): struct kr_conn_ops over
 * OpenSSL 3.
 *
 * OpenSSL reads and writes the socket through a small BIO of ours
 * (read(2) and send(2) on the fd) so that the bytes the sniff read before
 * the handshake go in first, and so that a failure keeps its errno.  One
 * SSL per connection, created by the first handshake step.
 *
 * Reads: SSL_read_ex record after record into the space reserved in the
 * evbuffer, until the size asked for or OpenSSL wants the socket; read
 * ahead is on (a record in one read(2), not two), so when the space ran
 * out first, records may wait inside OpenSSL with no socket event to
 * come: pending() says so until a read finds nothing more.  The same
 * after the handshake's last read, which may have taken the peer's
 * first records with its Finished.
 *
 * Writes: SSL_write_ex straight from the first chain of the out buffer
 * (SSL_MODE_ENABLE_PARTIAL_WRITE: one record per call, the count
 * returned; SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER: a retry after "again"
 * may come from another address, as evbuffer chains move), drained only
 * once written.  A small first chain followed by others would make a
 * small record each: such chains (each below KR_TLS_COALESCE) are copied
 * into one per-thread buffer and written as one record, counted in
 * c->copied.  OpenSSL's retry rule: after "again", the same stream bytes
 * from the same start and at least as many as the last call had
 * (wpend); the bytes themselves are not read again, so the copy may be
 * made anew.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>             /* TCP_QUICKACK */

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "kr_common.h"
#include "kr_tls.h"

/*
 * The most bytes OpenSSL may hold taken off the socket (kr_conn_ops
 * held_max): with read ahead, one read buffer, raw records and the
 * plaintext of the one being returned together.  OpenSSL 3's default is
 * 16 KiB of plaintext + 320 of overhead + a header and alignment (1 KiB
 * more where compression is allowed; krelay does not call
 * SSL_CTX_set_default_read_buffer_len): twice that, to be safe.
 */
#define KR_TLS_HELD_MAX (32 * 1024)

/* Chains looked at per write (coalescing stops there). */
#define KR_TLS_PEEK 16

/* One connection's state (kr_conn.xprt). */
struct tls_conn {
    SSL *ssl;                           /* NULL until the handshake */
    struct kr_tls_ctx *ctx;             /* a reference */
    int fd;
    uint8_t pre[KR_TLS_SNIFF_MAX];      /* read by the sniff, fed to the
                                           handshake first */
    uint8_t npre, opre;                 /* bytes in pre, taken so far */
    size_t wpend;                       /* the length of the last write
                                           that returned again (OpenSSL's
                                           retry needs at least as many),
                                           0: none */
    int sys_errno;                      /* the BIO's last failure */
    int fail_errno;                     /* a read failed after returning
                                           bytes: its errno (0: EOF) for
                                           the next read */
    unsigned fail_pending:1;            /* ... there is one */
    unsigned eof:1;                     /* read(2) saw the end */
    unsigned more:1;                    /* the last read filled the space
                                           given, or the handshake ended
                                           with bytes read ahead: records
                                           may wait inside OpenSSL */
    unsigned rd_wants_write:1;          /* the last read asked for the
                                           write event */
    unsigned failed:1;                  /* a fatal TLS error: no
                                           close_notify */
    unsigned done:1;                    /* the handshake is done */
    unsigned ticket_owed:1;             /* a TLS 1.3 session ticket goes
                                           with the first write */
    char *why;                          /* the last failure (malloc'd at
                                           the first one, KR_TLS_WHY_LEN
                                           bytes: an idle connection holds
                                           none); NULL or "": none */
};

/* Bytes of a failure's text. */
#define KR_TLS_WHY_LEN 256

/* x's failure text, written by printf's rules (out of memory: the text
   is lost, the failure is not: the caller's errno says it). */
static void tls_fail(struct tls_conn *x, const char *fmt, ...)
    KR_PRINTF(2, 3);

static void
tls_fail(struct tls_conn *x, const char *fmt, ...)
{
    va_list ap;

    if (x->why == NULL && (x->why = malloc(KR_TLS_WHY_LEN)) == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(x->why, KR_TLS_WHY_LEN, fmt, ap);
    va_end(ap);
}

/* No failure to tell (before a step that may fail). */
static void
tls_why_clear(struct tls_conn *x)
{
    if (x->why != NULL) {
        x->why[0] = '\0';
    }
}

/* ---- the BIO: the socket, after the sniffed bytes ----------------------- */

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int
bio_write(BIO *b, const char *buf, size_t len, size_t *written)
{
    struct tls_conn *x = BIO_get_data(b);
    ssize_t n;

    BIO_clear_retry_flags(b);
    do {
        n = send(x->fd, buf, len, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
        *written = (size_t)n;
        return 1;
    }
    x->sys_errno = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        BIO_set_retry_write(b);
    }
    return 0;
}

static int
bio_read(BIO *b, char *buf, size_t len, size_t *got)
{
    struct tls_conn *x = BIO_get_data(b);
    ssize_t n;

    BIO_clear_retry_flags(b);
    if (x->opre < x->npre) {
        size_t k = (size_t)(x->npre - x->opre);

        if (k > len) {
            k = len;
        }
        memcpy(buf, x->pre + x->opre, k);
        x->opre = (uint8_t)(x->opre + k);
        *got = k;
        return 1;
    }
    do {
        n = read(x->fd, buf, len);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        *got = (size_t)n;
        return 1;
    }
    *got = 0;
    if (n == 0) {
        x->eof = 1;
        return 0;
    }
    x->sys_errno = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        BIO_set_retry_read(b);
    }
    return 0;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct tls_conn *x = BIO_get_data(b);

    (void)num;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;                       /* nothing is buffered here */
    case BIO_CTRL_EOF:
        return x != NULL && x->eof && x->opre >= x->npre;
    case BIO_C_GET_FD:                  /* SSL_get_fd: the socket */
        if (x == NULL) {
            return -1;
        }
        if (ptr != NULL) {
            *(int *)ptr = x->fd;
        }
        return x->fd;
    default:
        return 0;
    }
}

static int
bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static int
bio_destroy(BIO *b)
{
    BIO_set_data(b, NULL);              /* the tls_conn is not the BIO's */
    return 1;
}

static void
bio_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                                 "krelay socket");

    if (m == NULL || BIO_meth_set_write_ex(m, bio_write) != 1 ||
        BIO_meth_set_read_ex(m, bio_read) != 1 ||
        BIO_meth_set_ctrl(m, bio_ctrl) != 1 ||
        BIO_meth_set_create(m, bio_create) != 1 ||
        BIO_meth_set_destroy(m, bio_destroy) != 1) {
        BIO_meth_free(m);
        return;
    }
    bio_method = m;
}

/* ---- errors ------------------------------------------------------------- */

/*
 * What SSL call r of x's SSL left: -1 with errno EAGAIN and c->want for
 * the event to wait for; 0 at the peer's end (close_notify, or EOF
 * without one: Kafka's frames carry their length); -1 with errno and
 * x->why on a failure.
 */
static int
ssl_outcome(struct kr_conn *c, struct tls_conn *x, int r)
{
    int e = SSL_get_error(x->ssl, r);

    switch (e) {
    case SSL_ERROR_WANT_READ:
        ERR_clear_error();
        c->want = KR_CONN_WANT_READ;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        ERR_clear_error();
        c->want = KR_CONN_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return 0;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (x->sys_errno == 0 || x->eof) {
                return 0;               /* EOF */
            }
            errno = x->sys_errno;
            return -1;
        }
        /* FALLTHROUGH */
    default: {
        char why[KR_TLS_WHY_LEN];

        kr_tls_err_str(x->ssl, why, sizeof(why));
        tls_fail(x, "%s", why);
        x->failed = 1;
        errno = EPROTO;
        return -1;
    }
    }
}

/* ---- the transport ------------------------------------------------------ */

static int
tls_open(struct kr_conn *c)
{
    struct tls_conn *x;

    pthread_once(&bio_once, bio_method_make);
    if (c->xprt_ctx == NULL || bio_method == NULL) {
        errno = EINVAL;
        return -1;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        errno = ENOMEM;
        return -1;
    }
    x->ctx = kr_tls_ctx_ref(c->xprt_ctx);
    x->fd = c->fd;
    c->xprt = x;
    return 0;
}

/* The first handshake step: the SSL, its BIO, the sniffed bytes. */
static int
tls_start(struct kr_conn *c, struct tls_conn *x)
{
    size_t n = evbuffer_get_length(c->in);
    char why[KR_TLS_WHY_LEN];
    BIO *b;

    if (n > sizeof(x->pre)) {
        tls_fail(x, "%zu bytes before the TLS handshake", n);
        errno = EPROTO;
        return -1;
    }
    x->ssl = kr_tls_ssl_new(x->ctx, c->host != NULL ? c->host : "", why,
                            sizeof(why));
    if (x->ssl == NULL) {
        tls_fail(x, "%s", why);
        errno = EINVAL;
        return -1;
    }
    b = BIO_new(bio_method);
    if (b == NULL) {
        ERR_clear_error();
        tls_fail(x, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    BIO_set_data(b, x);
    SSL_set_bio(x->ssl, b, b);
    if (n > 0 && evbuffer_remove(c->in, x->pre, n) != (int)n) {
        errno = ENOMEM;
        return -1;
    }
    x->npre = (uint8_t)n;
    return 0;
}

static int
tls_handshake(struct kr_conn *c)
{
    struct tls_conn *x = c->xprt;
    int r;

    tls_why_clear(x);
    x->sys_errno = 0;
    if (x->ssl == NULL && tls_start(c, x) != 0) {
        return -1;
    }
    ERR_clear_error();
    r = SSL_do_handshake(x->ssl);
    if (r == 1) {
        /* the peer's first records may have come with its last handshake
           message, and read ahead took them off the socket: no event
           will tell (a client that writes at once after its Finished) */
        x->more = SSL_has_pending(x->ssl) == 1;
        x->done = 1;
        /* the sniffed bytes were the handshake's, not the connection's
           Kafka bytes, which bytes_in counts from now on (decrypted, as
           bytes_out); until now they told a stalled handshake's line how
           far the client got */
        c->bytes_in -= c->bytes_in >= x->npre ? x->npre : c->bytes_in;
        x->ticket_owed = x->ctx->server && x->ctx->resumption &&
                         SSL_version(x->ssl) >= TLS1_3_VERSION;
        if (x->ctx->server) {
            /* TLS 1.3 (and a resumed TLS 1.2): the client's Finished
               ended it, and nothing goes back until the first response
               (the ticket waits for it): ACK the Finished now, not at
               the delayed-ACK timer (40 ms), which a client with Nagle
               on (librdkafka's default) waits for before it sends its
               first request.  Not TCP (a socketpair): refused, nothing
               to do */
            int one = 1;

            (void)setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one,
                             sizeof(one));
        }
        return 0;
    }
    r = ssl_outcome(c, x, r);
    if (r == 0) {
        tls_fail(x, "the peer closed the connection during the TLS "
                 "handshake");
        errno = ECONNRESET;
        return -1;
    }
    return r;
}

/* Before the handshake: the socket's bytes as they are (the sniff). */
static ssize_t
raw_read(struct kr_conn *c, struct evbuffer *in, size_t max)
{
    struct tls_conn *x = c->xprt;
    uint8_t b[KR_TLS_SNIFF_MAX];
    size_t have = evbuffer_get_length(in);
    size_t want = have < sizeof(b) ? sizeof(b) - have : 0;
    ssize_t n;

    if (want > max) {
        want = max;
    }
    if (want == 0) {
        tls_fail(x, "%zu bytes before the TLS handshake", have);
        errno = EPROTO;
        return -1;
    }
    do {
        n = read(c->fd, b, want);
    } while (n < 0 && errno == EINTR);
    if (n > 0 && evbuffer_add(in, b, (size_t)n) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return n;
}

static ssize_t
tls_read(struct kr_conn *c, struct evbuffer *in, size_t max)
{
    struct tls_conn *x = c->xprt;
    struct evbuffer_iovec v[2];
    size_t got = 0, left = max, k;
    int i, n, used = 0, r = 1;

    tls_why_clear(x);
    x->rd_wants_write = 0;
    if (c->stage < KR_STAGE_HANDSHAKE) {
        return raw_read(c, in, max);
    }
    if (x->ssl == NULL) {
        errno = ENOTCONN;
        return -1;
    }
    if (x->fail_pending) {
        x->fail_pending = 0;
        x->more = 0;
        errno = x->fail_errno;
        return x->fail_errno == 0 ? 0 : -1;
    }
    n = evbuffer_reserve_space(in, (ev_ssize_t)max, v, 2);
    if (n <= 0) {
        errno = ENOMEM;
        return -1;
    }
    x->sys_errno = 0;
    /* once per event, not per record (1.6% of a TLS produce run's CPU):
       a successful SSL_read_ex leaves the error queue as it found it */
    ERR_clear_error();
    for (i = 0; i < n && r == 1 && left > 0; i++) {
        uint8_t *p = v[i].iov_base;
        size_t cap = v[i].iov_len < left ? v[i].iov_len : left, off = 0;

        while (off < cap) {
            r = SSL_read_ex(x->ssl, p + off, cap - off, &k);
            if (r != 1) {
                break;
            }
            off += k;
        }
        v[i].iov_len = off;
        got += off;
        left -= off;
        if (off > 0) {
            used = i + 1;
        }
    }
    /* the space ran out before OpenSSL wanted the socket */
    x->more = r == 1;
    if (used > 0 && evbuffer_commit_space(in, v, used) != 0) {
        errno = ENOMEM;
        return -1;
    }
    if (r == 1) {
        return (ssize_t)got;
    }
    r = ssl_outcome(c, x, r);
    if (r < 0 && kr_conn_again(errno)) {
        x->rd_wants_write = c->want == KR_CONN_WANT_WRITE;
        if (got > 0) {
            c->want = KR_CONN_WANT_NONE;
        }
        return got > 0 ? (ssize_t)got : -1;
    }
    if (got > 0) {
        /* the end, or a failure, after bytes: they go first */
        x->fail_pending = 1;
        x->fail_errno = r == 0 ? 0 : errno;
        return (ssize_t)got;
    }
    return r;
}

/*
 * Copy the leading small chains of v[0..n) (each below KR_TLS_COALESCE)
 * into buf while they fit, and at least need bytes: the length.
 */
static size_t
coalesce(uint8_t *buf, const struct evbuffer_iovec *v, int n, size_t need)
{
    size_t len = 0;
    int i;

    for (i = 0; i < n; i++) {
        size_t k = v[i].iov_len;

        if (len + k > KR_TLS_COALESCE ||
            (k >= KR_TLS_COALESCE && len > 0)) {
            if (len < need) {
                k = need - len;         /* a retry: as much as before */
                memcpy(buf + len, v[i].iov_base, k);
                len += k;
            }
            break;
        }
        memcpy(buf + len, v[i].iov_base, k);
        len += k;
    }
    return len;
}

static ssize_t
tls_write(struct kr_conn *c, struct evbuffer *out)
{
    static _Thread_local uint8_t buf[KR_TLS_COALESCE];
    struct tls_conn *x = c->xprt;
    struct evbuffer_iovec v[KR_TLS_PEEK];
    size_t total = 0, len, w;
    const void *p;
    int n, r;

    tls_why_clear(x);
    if (x->ssl == NULL) {
        errno = ENOTCONN;
        return -1;
    }
    if (x->ticket_owed && evbuffer_get_length(out) > 0) {
        /* the client's session ticket, just before the first response:
           a Kafka client reads only when it waits for one (kafka-python
           2.0.2 takes bytes it did not ask for as a dead connection) */
        x->ticket_owed = 0;
        if (SSL_new_session_ticket(x->ssl) != 1) {
            ERR_clear_error();          /* no ticket: no resumption */
        }
    }
    ERR_clear_error();                  /* once per call, as in tls_read */
    while (evbuffer_get_length(out) > 0) {
        n = evbuffer_peek(out, -1, NULL, v, KR_TLS_PEEK);
        if (n > KR_TLS_PEEK) {
            n = KR_TLS_PEEK;
        }
        if (n <= 0) {
            break;
        }
        if (v[0].iov_len >= KR_TLS_COALESCE ||
            (n == 1 && v[0].iov_len >= x->wpend)) {
            p = v[0].iov_base;
            len = v[0].iov_len;
        } else {
            len = coalesce(buf, v, n, x->wpend);
            p = buf;
            if (len > v[0].iov_len) {
                c->copied += len;
            } else {
                p = v[0].iov_base;      /* one chain: no copy */
            }
        }
        x->sys_errno = 0;
        r = SSL_write_ex(x->ssl, p, len, &w);
        if (r == 1) {
            x->wpend = 0;
            evbuffer_drain(out, w);
            total += w;
            continue;
        }
        r = ssl_outcome(c, x, r);
        if (r < 0 && kr_conn_again(errno)) {
            x->wpend = len;
            if (total > 0) {
                c->want = KR_CONN_WANT_NONE;
                return (ssize_t)total;
            }
            return -1;
        }
        if (r == 0) {
            errno = EPIPE;              /* the peer's close_notify */
        }
        if (total > 0) {
            return (ssize_t)total;      /* the failure comes again */
        }
        return -1;
    }
    return (ssize_t)total;
}

static size_t
tls_pending(const struct kr_conn *c)
{
    const struct tls_conn *x = c->xprt;
    int p;

    if (x == NULL || x->ssl == NULL || c->stage != KR_STAGE_FRAMES ||
        x->rd_wants_write) {
        return 0;
    }
    if (x->fail_pending) {
        return 1;
    }
    p = SSL_pending(x->ssl);
    if (p > 0) {
        return (size_t)p;
    }
    return x->more ? 1 : 0;
}

static void
tls_close(struct kr_conn *c)
{
    struct tls_conn *x = c->xprt;

    if (x == NULL) {
        return;
    }
    if (x->ssl != NULL) {
        if (!x->failed && x->done) {
            /* close_notify, if the socket takes it now: a peer on
               OpenSSL 3 reports an EOF without one as an error */
            (void)SSL_shutdown(x->ssl);
        }
        SSL_free(x->ssl);
    }
    ERR_clear_error();
    kr_tls_ctx_put(x->ctx);
    free(x->why);
    free(x);
    c->xprt = NULL;
}

/* close_notify once the handshake is done and nothing failed (SSL_shutdown
   sends it and returns; records may still be read after it). */
static void
tls_shutdown_write(struct kr_conn *c)
{
    struct tls_conn *x = c->xprt;

    if (x->ssl != NULL && x->done && !x->failed &&
        !(SSL_get_shutdown(x->ssl) & SSL_SENT_SHUTDOWN)) {
        (void)SSL_shutdown(x->ssl);
    }
    ERR_clear_error();
}

static const char *
tls_why(const struct kr_conn *c)
{
    const struct tls_conn *x = c->xprt;

    return x != NULL && x->why != NULL && x->why[0] != '\0' ? x->why : NULL;
}

const struct kr_conn_ops kr_tls_ops = {
    .name = "tls",
    .open = tls_open,
    .handshake = tls_handshake,
    .read = tls_read,
    .write = tls_write,
    .pending = tls_pending,
    .close = tls_close,
    .why = tls_why,
    .shutdown_write = tls_shutdown_write,
    .rcvlowat = true,
    .held_max = KR_TLS_HELD_MAX,
    .splice = false
};

const X509_NAME *
kr_tls_peer_subject(const struct kr_conn *c)
{
    const struct tls_conn *x = c->ops == &kr_tls_ops ? c->xprt : NULL;
    X509 *cert;

    if (x == NULL || x->ssl == NULL || !x->done ||
        (x->ctx->server && !x->ctx->verify_peer) ||
        SSL_get_verify_result(x->ssl) != X509_V_OK) {
        return NULL;
    }
    cert = SSL_get0_peer_certificate(x->ssl);
    return cert != NULL ? X509_get_subject_name(cert) : NULL;
}

bool
kr_tls_peer_san_critical(const struct kr_conn *c)
{
    const struct tls_conn *x = c->ops == &kr_tls_ops ? c->xprt : NULL;
    X509 *cert;
    int i;

    if (kr_tls_peer_subject(c) == NULL) {
        return false;
    }
    cert = SSL_get0_peer_certificate(x->ssl);
    i = X509_get_ext_by_NID(cert, NID_subject_alt_name, -1);
    return i >= 0 && X509_EXTENSION_get_critical(X509_get_ext(cert, i)) == 1;
}

const char *
kr_tls_sni(const struct kr_conn *c)
{
    const struct tls_conn *x = c->ops == &kr_tls_ops ? c->xprt : NULL;

    if (x == NULL || x->ssl == NULL || !x->ctx->server) {
        return NULL;
    }
    return kr_tls_ssl_sni(x->ssl);
}

const char *
kr_tls_describe(const struct kr_conn *c, char *buf, size_t len)
{
    const struct tls_conn *x = c->ops == &kr_tls_ops ? c->xprt : NULL;

    if (len == 0) {
        return buf;
    }
    if (x == NULL || x->ssl == NULL || !x->done) {
        buf[0] = '\0';
        return buf;
    }
    snprintf(buf, len, "%s %s%s", SSL_get_version(x->ssl),
             SSL_get_cipher_name(x->ssl),
             SSL_session_reused(x->ssl) ? " resumed" : "");
    return buf;
}
