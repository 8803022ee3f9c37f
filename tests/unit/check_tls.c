/*
 * check_tls.c - the TLS transport (kr_tls) and its contexts (kr_tls_ctx)
 * over socketpairs: handshakes (server and client side, mTLS, CRL,
 * host name and IP checks, SNI), round trips of large and small data
 * with partial writes, coalesced small chains, pending bytes, a refused
 * renegotiation, plaintext on a TLS connection, session resumption
 * (within a context only, the peer's subject kept, none with resumption
 * off), refused early data, and files that do not load.  The
 * certificates are made at run time (kr_test_certs.h).  No event loop:
 * the steps are called in turn until both sides are done.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "kr_conn.h"
#include "kr_test_certs.h"
#include "kr_tls.h"
#include "kr_tls_ctx.h"

static char *D;                         /* the certificates' directory */

static void
certs_setup(void)
{
    D = kr_test_certs_dir();
    ck_assert_ptr_nonnull(D);
}

static void
certs_teardown(void)
{
    kr_test_certs_rm(D);
    D = NULL;
}

/* D/name, in one of 16 buffers used in turn. */
static const char *
F(const char *name)
{
    static char buf[16][4096];
    static int i;

    i = (i + 1) % 16;
    snprintf(buf[i], sizeof(buf[i]), "%s/%s", D, name);
    return buf[i];
}

/* A listener's context: ca (mTLS) and crl may be NULL. */
static struct kr_tls_ctx *
server_ctx_r(const char *ca, const char *crl, bool resumption)
{
    struct kr_tls_opts o;
    struct kr_tls_ctx *t;
    enum kr_tls_opt bad;
    char err[512];

    memset(&o, 0, sizeof(o));
    o.server = true;
    o.certificate = F("server.pem");
    o.key = F("server.key");
    o.ca = ca != NULL ? F(ca) : NULL;
    o.crl = crl != NULL ? F(crl) : NULL;
    o.id = "test";
    o.resumption = resumption;
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_msg(t != NULL, "server context: %s", err);
    return t;
}

/* A listener's context as configured by default (resumption on). */
static struct kr_tls_ctx *
server_ctx(const char *ca, const char *crl)
{
    return server_ctx_r(ca, crl, true);
}

/* An upstream's context trusting ca, with client certificate cert. */
static struct kr_tls_ctx *
client_ctx(const char *ca, const char *cert, bool verify_hostname)
{
    struct kr_tls_opts o;
    struct kr_tls_ctx *t;
    enum kr_tls_opt bad;
    char err[512], key[64];

    memset(&o, 0, sizeof(o));
    o.ca = F(ca);
    if (cert != NULL) {
        snprintf(key, sizeof(key), "%.*s.key", (int)strcspn(cert, "."),
                 cert);
        o.certificate = F(cert);
        o.key = F(key);
    }
    o.verify_hostname = verify_hostname;
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_msg(t != NULL, "client context: %s", err);
    return t;
}

/* Nonblocking socketpair with small buffers (writes come short). */
static void
pair(int sv[2])
{
    int sz = 4096, i;

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv),
                     0);
    for (i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    }
}

/* c on fd with t (host for a client), at stage. */
static void
conn_new(struct kr_conn *c, int fd, struct kr_tls_ctx *t, const char *host,
         enum kr_conn_stage stage)
{
    memset(c, 0, sizeof(*c));
    kr_conn_init(c);
    ck_assert_ptr_nonnull(c->in);
    c->host = host != NULL ? strdup(host) : NULL;   /* kr_conn_free_buffers
                                                       frees it */
    c->xprt_ctx = t;
    ck_assert_int_eq(kr_conn_open(c, fd, &kr_tls_ops), KR_OK);
    c->stage = (uint8_t)stage;
}

static void
conn_free(struct kr_conn *c)
{
    kr_conn_close(c);
    kr_conn_free_buffers(c);
}

/* The result of both handshakes. */
struct hs {
    int rc[2];                          /* 0 done, -1 failed, 1 still
                                           waiting (the other failed) */
    int err[2];                         /* its errno */
    char why[2][300];
};

/*
 * Step both handshakes until each is done or failed; once one failed,
 * the other gets 50 more steps (to read the alert).
 */
static struct hs
handshake(struct kr_conn *a, struct kr_conn *b)
{
    struct kr_conn *c[2] = { a, b };
    struct hs h;
    bool done[2] = { false, false };
    int i, k, after = 0;

    memset(&h, 0, sizeof(h));
    for (i = 0; i < 4000 && !(done[0] && done[1]); i++) {
        for (k = 0; k < 2; k++) {
            if (done[k]) {
                continue;
            }
            if (kr_conn_handshake(c[k]) == 0) {
                done[k] = true;
            } else if (!kr_conn_again(errno)) {
                h.rc[k] = -1;
                h.err[k] = errno;
                snprintf(h.why[k], sizeof(h.why[k]), "%s",
                         kr_conn_strerror(c[k], errno));
                done[k] = true;
            }
        }
        if ((h.rc[0] < 0 || h.rc[1] < 0) && ++after > 50) {
            break;
        }
    }
    for (k = 0; k < 2; k++) {
        if (!done[k]) {
            ck_assert_msg(h.rc[1 - k] < 0, "handshake did not end");
            h.rc[k] = 1;
        }
    }
    return h;
}

/* Both sides connected (client, server) on a new pair. */
static void
connected(struct kr_conn *cl, struct kr_conn *sv, struct kr_tls_ctx *ct,
          struct kr_tls_ctx *st, const char *host)
{
    int fds[2];
    struct hs h;

    pair(fds);
    conn_new(cl, fds[0], ct, host, KR_STAGE_HANDSHAKE);
    conn_new(sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    h = handshake(cl, sv);
    ck_assert_msg(h.rc[0] == 0 && h.rc[1] == 0, "handshake: client %s, "
                  "server %s", h.why[0], h.why[1]);
    ck_assert_int_eq(cl->stage, KR_STAGE_FRAMES);
    ck_assert_int_eq(sv->stage, KR_STAGE_FRAMES);
}

/*
 * Move src->out to dst->in until src->out is empty and want bytes
 * arrived (or no progress for many rounds).  Returns the number of
 * writes that left bytes behind (short writes and "again").
 */
static int
pump(struct kr_conn *src, struct kr_conn *dst, size_t want)
{
    int shorts = 0, idle = 0;

    while (idle < 1000 && (evbuffer_get_length(src->out) > 0 ||
                           evbuffer_get_length(dst->in) < want)) {
        bool moved = false;

        if (evbuffer_get_length(src->out) > 0) {
            ssize_t n = kr_conn_write(src);

            ck_assert_msg(n > 0 || kr_conn_again(errno), "write: %s",
                          kr_conn_strerror(src, errno));
            moved = n > 0;
            if (evbuffer_get_length(src->out) > 0) {
                shorts++;
            }
        }
        for (;;) {
            ssize_t n = kr_conn_read(dst);

            if (n <= 0) {
                ck_assert_msg(n < 0 && kr_conn_again(errno), "read %zd: %s",
                              n, kr_conn_strerror(dst, errno));
                break;
            }
            moved = true;
        }
        idle = moved ? 0 : idle + 1;
    }
    ck_assert_uint_eq(evbuffer_get_length(src->out), 0);
    ck_assert_uint_ge(evbuffer_get_length(dst->in), want);
    return shorts;
}

/* n bytes of a pattern from seed. */
static void
fill(uint8_t *p, size_t n, unsigned seed)
{
    size_t i;

    for (i = 0; i < n; i++) {
        p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
    }
}

/* ---- handshakes ---------------------------------------------------------- */

START_TEST(handshake_and_roundtrip)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    size_t big = 3 * 1024 * 1024 + 777, i;
    uint8_t *src = malloc(big), *dst = malloc(big);
    char desc[128];
    int shorts;

    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(dst);
    connected(&cl, &sv, ct, st, "localhost");
    kr_tls_describe(&cl, desc, sizeof(desc));
    ck_assert_msg(strncmp(desc, "TLSv1.3 ", 8) == 0, "%s", desc);
    /* no client certificate asked for: no subject */
    ck_assert_ptr_null(kr_tls_peer_subject(&sv));
    ck_assert_ptr_nonnull(kr_tls_peer_subject(&cl));

    /* large: 3 MiB in 64 KiB chains, through 4 KiB socket buffers */
    fill(src, big, 1);
    for (i = 0; i < big; i += 65536) {
        ck_assert_int_eq(evbuffer_add(cl.out, src + i, big - i < 65536
                                                            ? big - i
                                                            : 65536), 0);
    }
    shorts = pump(&cl, &sv, big);
    ck_assert_int_gt(shorts, 0);        /* partial writes happened */
    ck_assert_uint_eq(cl.copied, 0);    /* big chains: written in place */
    ck_assert_uint_eq(evbuffer_get_length(sv.in), big);
    ck_assert_int_eq(evbuffer_remove(sv.in, dst, big), (int)big);
    ck_assert(memcmp(src, dst, big) == 0);

    /* the other way, small writes one after the other */
    for (i = 0; i < 200; i++) {
        fill(src, 37, (unsigned)i);
        ck_assert_int_eq(evbuffer_add(sv.out, src, 37), 0);
        pump(&sv, &cl, 37 * (i + 1));
    }
    ck_assert_uint_eq(evbuffer_get_length(cl.in), 200 * 37);
    for (i = 0; i < 200; i++) {
        fill(src, 37, (unsigned)i);
        ck_assert_int_eq(evbuffer_remove(cl.in, dst, 37), 37);
        ck_assert(memcmp(src, dst, 37) == 0);
    }
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
    free(src);
    free(dst);
}
END_TEST

/* Free callback of evbuffer_add_reference (the data is static). */
static void
no_free(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    (void)arg;
}

/*
 * Many small chains become few records: their bytes are copied (and
 * counted), once each unless a write had to be retried; the stream
 * arrives intact, also with big chains among them.
 */
START_TEST(small_chains_coalesced)
{
    static uint8_t pieces[300][100];
    static uint8_t big[40000];
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    uint8_t *all = malloc(300 * 100 + sizeof(big)), *got;
    size_t n = 0, len;
    int i;

    ck_assert_ptr_nonnull(all);
    connected(&cl, &sv, ct, st, "localhost");
    for (i = 0; i < 300; i++) {
        fill(pieces[i], sizeof(pieces[i]), (unsigned)i + 5);
        /* each its own chain, as moved chains of small frames are */
        ck_assert_int_eq(evbuffer_add_reference(cl.out, pieces[i],
                                                sizeof(pieces[i]), no_free,
                                                NULL), 0);
        memcpy(all + n, pieces[i], sizeof(pieces[i]));
        n += sizeof(pieces[i]);
        if (i == 150) {
            fill(big, sizeof(big), 99);
            ck_assert_int_eq(evbuffer_add_reference(cl.out, big, sizeof(big),
                                                    no_free, NULL), 0);
            memcpy(all + n, big, sizeof(big));
            n += sizeof(big);
        }
    }
    ck_assert_int_ge(evbuffer_peek(cl.out, -1, NULL, NULL, 0), 300);
    pump(&cl, &sv, n);
    /* the small chains were copied, the big one was not */
    ck_assert_uint_ge(cl.copied, 300 * 100 - 100);
    ck_assert_uint_lt(cl.copied, 3 * 300 * 100);
    len = evbuffer_get_length(sv.in);
    ck_assert_uint_eq(len, n);
    got = evbuffer_pullup(sv.in, -1);
    ck_assert(memcmp(got, all, n) == 0);
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
    free(all);
}
END_TEST

/*
 * Decrypted bytes a read did not take are pending (no socket event will
 * come for them); a read that takes them all leaves none.
 */
START_TEST(pending_bytes)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    uint8_t buf[10000];
    ssize_t n;
    size_t total = 0;
    int i;

    connected(&cl, &sv, ct, st, "localhost");
    ck_assert_uint_eq(kr_tls_ops.pending(&sv), 0);
    fill(buf, sizeof(buf), 3);
    ck_assert_int_eq(evbuffer_add(cl.out, buf, sizeof(buf)), 0);
    while (evbuffer_get_length(cl.out) > 0) {
        n = kr_conn_write(&cl);
        ck_assert(n > 0 || kr_conn_again(errno));
        /* room in the socket: the reader takes 100 bytes at a time */
        n = kr_tls_ops.read(&sv, sv.in, 100);
        if (n > 0) {
            total += (size_t)n;
        }
    }
    for (i = 0; i < 1000 && total < sizeof(buf); i++) {
        n = kr_tls_ops.read(&sv, sv.in, 100);
        if (n > 0) {
            ck_assert_int_le(n, 100);
            total += (size_t)n;
            if (total < sizeof(buf)) {
                /* the rest of the record is inside OpenSSL, or another
                   record may be: pending says so */
                ck_assert_uint_gt(kr_tls_ops.pending(&sv), 0);
            }
        }
    }
    ck_assert_uint_eq(total, sizeof(buf));
    /* one more read finds nothing: no more pending */
    n = kr_tls_ops.read(&sv, sv.in, 100);
    ck_assert(n < 0 && kr_conn_again(errno));
    ck_assert_uint_eq(kr_tls_ops.pending(&sv), 0);
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
}
END_TEST

/* A connected TCP pair on loopback (client, server), nonblocking. */
static void
tcp_pair(int sv[2])
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(l, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(l, 1), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sin, &len), 0);
    sv[0] = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(sv[0], 0);
    ck_assert_int_eq(connect(sv[0], (struct sockaddr *)&sin, sizeof(sin)),
                     0);
    sv[1] = accept4(l, NULL, NULL, SOCK_NONBLOCK);
    ck_assert_int_ge(sv[1], 0);
    ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    close(l);
}

/*
 * TLS 1.3 over TCP: the client's Finished ends the handshake, and the
 * server has nothing to send until the first response (its session
 * ticket waits for that).  Its ACK of the Finished goes at once, not
 * after the delayed-ACK timer (40 ms): a client that leaves Nagle on
 * (librdkafka's default) holds its first request until the Finished is
 * acknowledged.  Seen from the client: nothing unacknowledged once the
 * server's handshake is done.
 */
START_TEST(finished_acked_at_once)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int fds[2];
    struct hs h;

    tcp_pair(fds);
    conn_new(&cl, fds[0], ct, "localhost", KR_STAGE_HANDSHAKE);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    h = handshake(&cl, &sv);
    ck_assert_msg(h.rc[0] == 0 && h.rc[1] == 0, "handshake: client %s, "
                  "server %s", h.why[0], h.why[1]);
    ck_assert_int_eq(getsockopt(fds[0], IPPROTO_TCP, TCP_INFO, &ti, &len),
                     0);
    ck_assert_msg(ti.tcpi_unacked == 0, "the client's Finished is not "
                  "acknowledged yet (%u segments unacknowledged)",
                  ti.tcpi_unacked);
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
}
END_TEST

/*
 * A client that writes at once after its Finished (TLS 1.3: its
 * handshake ends before the server's): read ahead takes the request off
 * the socket with the Finished, so no socket event will come for it;
 * the transport says it is pending, and the next read has it.
 */
START_TEST(first_bytes_with_finished)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    bool cdone = false, sdone = false;
    int fds[2], k;
    char got[8];

    pair(fds);
    conn_new(&cl, fds[0], ct, "localhost", KR_STAGE_HANDSHAKE);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    for (k = 0; k < 1000 && !sdone; k++) {
        if (!cdone && kr_conn_handshake(&cl) == 0) {
            cdone = true;
            /* the request right behind the Finished */
            ck_assert_int_eq(evbuffer_add(cl.out, "request", 7), 0);
            ck_assert_int_eq(kr_conn_write(&cl), 7);
        } else if (!cdone) {
            ck_assert(kr_conn_again(errno));
        }
        if (kr_conn_handshake(&sv) == 0) {
            sdone = true;
        } else {
            ck_assert(kr_conn_again(errno));
        }
    }
    ck_assert(cdone && sdone);
    ck_assert_uint_gt(kr_tls_ops.pending(&sv), 0);
    ck_assert_int_eq(kr_conn_read(&sv), 7);
    ck_assert_int_eq(evbuffer_remove(sv.in, got, sizeof(got)), 7);
    ck_assert(memcmp(got, "request", 7) == 0);
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
}
END_TEST

/* A failed handshake between a client context and a server context. */
static struct hs
try_handshake(struct kr_tls_ctx *ct, struct kr_tls_ctx *st, const char *host,
              struct kr_conn *cl, struct kr_conn *sv)
{
    int fds[2];

    pair(fds);
    conn_new(cl, fds[0], ct, host, KR_STAGE_HANDSHAKE);
    conn_new(sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    return handshake(cl, sv);
}

/*
 * The broker's certificate is checked against the host dialled: a DNS
 * name against its DNS SANs, an IP literal against its IP SANs; a
 * certificate of another name, or of another CA, fails with one reason.
 * Without verify_hostname only the chain counts.
 */
START_TEST(host_names)
{
    static const struct {
        const char *host;
        const char *ca;
        bool verify;
        const char *fails;              /* NULL: succeeds */
    } t[] = {
        { "localhost", "ca.pem", true, NULL },
        { "127.0.0.1", "ca.pem", true, NULL },
        { "LOCALHOST", "ca.pem", true, NULL },
        { "other.example", "ca.pem", true, "hostname mismatch" },
        { "127.0.0.2", "ca.pem", true, "IP address mismatch" },
        { "::1", "ca.pem", true, "IP address mismatch" },
        { "other.example", "ca.pem", false, NULL },
        { "localhost", "rogue-ca.pem", true, "unable to" },
    };
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    size_t i;

    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct kr_tls_ctx *ct = client_ctx(t[i].ca, NULL, t[i].verify);
        struct kr_conn cl, sv;
        struct hs h = try_handshake(ct, st, t[i].host, &cl, &sv);

        if (t[i].fails == NULL) {
            ck_assert_msg(h.rc[0] == 0 && h.rc[1] == 0, "%s: %s / %s",
                          t[i].host, h.why[0], h.why[1]);
        } else {
            ck_assert_msg(h.rc[0] < 0, "%s: client succeeded", t[i].host);
            ck_assert_int_eq(h.err[0], EPROTO);
            ck_assert_msg(strstr(h.why[0], "certificate verify failed") &&
                          strstr(h.why[0], t[i].fails), "%s: '%s'",
                          t[i].host, h.why[0]);
            /* the server is told (an alert), never left waiting */
            ck_assert_int_lt(h.rc[1], 0);
        }
        conn_free(&cl);
        conn_free(&sv);
        kr_tls_ctx_put(ct);
    }
    kr_tls_ctx_put(st);
}
END_TEST

/* SNI: the broker's host name, never an IP literal (RFC 6066). */
START_TEST(sni)
{
    static const char *const hosts[] = { "localhost", "127.0.0.1", "::1" };
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, false);
    size_t i;

    for (i = 0; i < 3; i++) {
        struct kr_conn cl;
        SSL *raw = SSL_new(st->ssl);
        int fds[2], k, rc = -1;
        const char *name;

        ck_assert_ptr_nonnull(raw);
        pair(fds);
        conn_new(&cl, fds[0], ct, hosts[i], KR_STAGE_HANDSHAKE);
        SSL_set_fd(raw, fds[1]);
        SSL_set_accept_state(raw);
        for (k = 0; k < 2000 && (cl.stage != KR_STAGE_FRAMES || rc != 1);
             k++) {
            if (cl.stage != KR_STAGE_FRAMES) {
                ck_assert(kr_conn_handshake(&cl) == 0 ||
                          kr_conn_again(errno));
            }
            if (rc != 1) {
                rc = SSL_do_handshake(raw);
            }
        }
        ck_assert_int_eq(rc, 1);
        ck_assert_ptr_null(kr_tls_sni(&cl));
        name = SSL_get_servername(raw, TLSEXT_NAMETYPE_host_name);
        if (i == 0) {
            ck_assert_ptr_nonnull(name);
            ck_assert_str_eq(name, "localhost");
        } else {
            ck_assert_msg(name == NULL, "SNI %s for %s", name, hosts[i]);
        }
        SSL_free(raw);
        close(fds[1]);
        conn_free(&cl);
    }
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
}
END_TEST

/*
 * A raw OpenSSL client (version ver at most, SNI name, resuming sess when
 * not NULL) against a listener's kr_conn sv on a new pair: both
 * handshakes done, the client's tickets read.  Returns the client's SSL
 * (the caller frees it and closes its fd, *cfd).
 */
static SSL *
raw_client(SSL_CTX *cctx, const char *name, SSL_SESSION *sess,
           struct kr_conn *sv, struct kr_tls_ctx *st, int *cfd)
{
    SSL *c = SSL_new(cctx);
    int fds[2], k, rc = -1;
    char b[1];

    ck_assert_ptr_nonnull(c);
    pair(fds);
    conn_new(sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    SSL_set_fd(c, fds[0]);
    SSL_set_connect_state(c);
    if (name != NULL) {
        ck_assert_int_eq(SSL_set_tlsext_host_name(c, name), 1);
    }
    if (sess != NULL) {
        ck_assert_int_eq(SSL_set_session(c, sess), 1);
    }
    for (k = 0; k < 2000 && (sv->stage != KR_STAGE_FRAMES || rc != 1); k++) {
        if (sv->stage != KR_STAGE_FRAMES) {
            ck_assert_msg(kr_conn_handshake(sv) == 0 || kr_conn_again(errno),
                          "server: %s", kr_conn_strerror(sv, errno));
        }
        if (rc != 1) {
            rc = SSL_do_handshake(c);
        }
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(sv->stage, KR_STAGE_FRAMES);
    /* TLS 1.3: the server's ticket goes with its first bytes (kr_tls:
       a response), so it writes one, which the client reads */
    ck_assert_int_eq(evbuffer_add(sv->out, "!", 1), 0);
    rc = 0;
    for (k = 0; k < 1000 && rc != 1; k++) {
        if (evbuffer_get_length(sv->out) > 0) {
            ck_assert(kr_conn_write(sv) > 0 || kr_conn_again(errno));
        }
        rc = SSL_read(c, b, 1);
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(b[0], '!');
    ERR_clear_error();
    *cfd = fds[0];
    return c;
}

/*
 * The name of each ClientHello (SNI routing's input): a client that
 * resumes its session under another name is seen with the new name, in
 * TLS 1.2 (where SSL_get_servername, on OpenSSL 3.0, gives NULL then) and
 * 1.3; none sent: NULL.  Upstream connections have none.
 */
START_TEST(sni_of_each_hello)
{
    static const int vers[] = { TLS1_2_VERSION, TLS1_3_VERSION };
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    int v;

    for (v = 0; v < 2; v++) {
        SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
        struct kr_conn sv;
        SSL_SESSION *sess;
        SSL *c;
        int cfd;

        ck_assert_ptr_nonnull(cctx);
        SSL_CTX_set_max_proto_version(cctx, vers[v]);
        c = raw_client(cctx, "broker-1.kafka.test", NULL, &sv, st, &cfd);
        ck_assert_ptr_nonnull(kr_tls_sni(&sv));
        ck_assert_str_eq(kr_tls_sni(&sv), "broker-1.kafka.test");
        ck_assert(!SSL_session_reused(c));
        sess = SSL_get1_session(c);
        ck_assert_ptr_nonnull(sess);
        (void)SSL_shutdown(c);          /* else the session is dropped */
        SSL_free(c);
        ck_assert(SSL_SESSION_is_resumable(sess));
        close(cfd);
        conn_free(&sv);

        c = raw_client(cctx, "Broker-2.Kafka.test", sess, &sv, st, &cfd);
        ck_assert_msg(SSL_session_reused(c), "TLS 0x%x: not resumed",
                      vers[v]);
        ck_assert_str_eq(kr_tls_sni(&sv), "Broker-2.Kafka.test");
        (void)SSL_shutdown(c);
        SSL_free(c);
        close(cfd);
        conn_free(&sv);

        c = raw_client(cctx, NULL, sess, &sv, st, &cfd);
        ck_assert_ptr_null(kr_tls_sni(&sv));
        SSL_free(c);
        close(cfd);
        conn_free(&sv);
        SSL_SESSION_free(sess);
        SSL_CTX_free(cctx);
    }
    kr_tls_ctx_put(st);
}
END_TEST

/*
 * A ClientHello whose server_name extension is malformed (its name type
 * is not host_name): the handshake fails and the reason krelay logs says
 * so, not OpenSSL's "callback failed".
 */
START_TEST(sni_malformed)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    static const char name[] = "broker-1.kafka.test";
    unsigned char hello[4096];
    struct kr_conn sv;
    BIO *rb, *wb;
    SSL *c;
    int fds[2], k, n, rc = 0, at;
    const char *why;

    ck_assert_ptr_nonnull(cctx);
    c = SSL_new(cctx);
    rb = BIO_new(BIO_s_mem());
    wb = BIO_new(BIO_s_mem());
    ck_assert(c != NULL && rb != NULL && wb != NULL);
    SSL_set_bio(c, rb, wb);
    SSL_set_connect_state(c);
    ck_assert_int_eq(SSL_set_tlsext_host_name(c, name), 1);
    ck_assert_int_le(SSL_do_handshake(c), 0);   /* the hello, then waits */
    n = BIO_read(wb, hello, sizeof(hello));
    ck_assert_int_gt(n, 100);
    for (at = 0; at + (int)strlen(name) <= n &&
                 memcmp(hello + at, name, strlen(name)) != 0; at++) {
    }
    ck_assert_int_lt(at + (int)strlen(name), n + 1);
    ck_assert_int_ge(at, 3);
    ck_assert_int_eq(hello[at - 3], 0);         /* host_name */
    hello[at - 3] = 7;
    pair(fds);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    ck_assert_int_eq(write(fds[0], hello, (size_t)n), n);
    for (k = 0; k < 100; k++) {
        rc = kr_conn_handshake(&sv);
        if (rc == 0 || !kr_conn_again(errno)) {
            break;
        }
    }
    ck_assert_int_eq(rc, -1);
    ck_assert(!kr_conn_again(errno));
    why = kr_conn_strerror(&sv, errno);
    ck_assert_msg(strstr(why, "malformed server_name extension") != NULL,
                  "%s", why);
    SSL_free(c);
    SSL_CTX_free(cctx);
    close(fds[0]);
    conn_free(&sv);
    kr_tls_ctx_put(st);
}
END_TEST

/*
 * A client that sends its first request with its last handshake flight
 * (TLS 1.3: Finished, then application data, in one read): OpenSSL reads
 * both (read ahead), so no socket event comes for the request; the
 * transport says it holds bytes once the handshake is done.
 */
START_TEST(data_with_the_handshake)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    struct kr_conn sv;
    SSL *c;
    int fds[2], k, rc = -1;
    size_t w;
    char buf[16];

    ck_assert_ptr_nonnull(cctx);
    c = SSL_new(cctx);
    pair(fds);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    SSL_set_fd(c, fds[0]);
    SSL_set_connect_state(c);
    /* the client finishes first (TLS 1.3), the server has not read its
       Finished yet */
    for (k = 0; k < 2000 && rc != 1; k++) {
        rc = SSL_do_handshake(c);
        if (rc != 1) {
            ck_assert(kr_conn_handshake(&sv) == 0 || kr_conn_again(errno));
            ck_assert_int_ne(sv.stage, KR_STAGE_FRAMES);
        }
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(SSL_write_ex(c, "request", 7, &w), 1);
    for (k = 0; k < 2000 && sv.stage != KR_STAGE_FRAMES; k++) {
        ck_assert(kr_conn_handshake(&sv) == 0 || kr_conn_again(errno));
    }
    ck_assert_int_eq(sv.stage, KR_STAGE_FRAMES);
    ck_assert_uint_gt(kr_tls_ops.pending(&sv), 0);
    ck_assert_int_eq(kr_conn_read(&sv), 7);
    ck_assert_int_eq(evbuffer_remove(sv.in, buf, sizeof(buf)), 7);
    ck_assert(memcmp(buf, "request", 7) == 0);
    /* nothing more held: no read without a socket event */
    ck_assert(kr_conn_read(&sv) < 0 && kr_conn_again(errno));
    ck_assert_uint_eq(kr_tls_ops.pending(&sv), 0);
    SSL_free(c);
    close(fds[0]);
    conn_free(&sv);
    SSL_CTX_free(cctx);
    kr_tls_ctx_put(st);
}
END_TEST

/*
 * mTLS: a client certificate of the CA gives the subject; none, one of
 * another CA or a revoked one fails the handshake on the server with the
 * reason.
 */
START_TEST(client_certificates)
{
    static const struct {
        const char *cert;
        const char *fails;              /* NULL: succeeds */
    } t[] = {
        { "client.pem", NULL },
        { NULL, "did not return a certificate" },
        { "rogue.pem", "certificate verify failed" },
        { "revoked.pem", "certificate revoked" },
    };
    struct kr_tls_ctx *st = server_ctx("ca.pem", "crl.pem");
    size_t i;

    ck_assert(st->verify_peer);
    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct kr_tls_ctx *ct = client_ctx("ca.pem", t[i].cert, true);
        struct kr_conn cl, sv;
        struct hs h = try_handshake(ct, st, "localhost", &cl, &sv);

        if (t[i].fails == NULL) {
            const X509_NAME *sub;
            char cn[128];

            ck_assert_msg(h.rc[0] == 0 && h.rc[1] == 0, "%s: %s / %s",
                          t[i].cert, h.why[0], h.why[1]);
            sub = kr_tls_peer_subject(&sv);
            ck_assert_ptr_nonnull(sub);
            ck_assert_int_gt(X509_NAME_get_text_by_NID(
                                 (X509_NAME *)sub, NID_commonName, cn,
                                 sizeof(cn)), 0);
            ck_assert_str_eq(cn, "krelay-test-client");
        } else {
            ck_assert_msg(h.rc[1] < 0, "%s: the server accepted it",
                          t[i].cert);
            ck_assert_msg(strstr(h.why[1], t[i].fails) != NULL, "%s: '%s'",
                          t[i].cert ? t[i].cert : "none", h.why[1]);
            ck_assert_ptr_null(kr_tls_peer_subject(&sv));
        }
        conn_free(&cl);
        conn_free(&sv);
        kr_tls_ctx_put(ct);
    }
    kr_tls_ctx_put(st);
}
END_TEST

/*
 * A client asking to renegotiate (TLS 1.2) is refused: its handshake
 * fails with "no renegotiation", the connection's certificate stays.
 * (OpenSSL 3 servers refuse client-initiated renegotiation unless
 * SSL_OP_ALLOW_CLIENT_RENEGOTIATION; SSL_OP_NO_RENEGOTIATION also covers
 * a broker asking krelay to renegotiate.)
 */
START_TEST(renegotiation_refused)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    SSL_CTX *cx = SSL_CTX_new(TLS_client_method());
    struct kr_conn sv;
    SSL *cl;
    int fds[2], k, rc = -1, e;
    unsigned long err;

    ck_assert_ptr_nonnull(cx);
    SSL_CTX_set_max_proto_version(cx, TLS1_2_VERSION);
    cl = SSL_new(cx);
    pair(fds);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    SSL_set_fd(cl, fds[0]);
    SSL_set_connect_state(cl);
    for (k = 0; k < 2000 && (sv.stage != KR_STAGE_FRAMES || rc != 1); k++) {
        if (sv.stage != KR_STAGE_FRAMES) {
            ck_assert(kr_conn_handshake(&sv) == 0 || kr_conn_again(errno));
        }
        if (rc != 1) {
            rc = SSL_do_handshake(cl);
        }
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(SSL_get_version(cl), "TLSv1.2");
    ck_assert_int_eq(SSL_renegotiate(cl), 1);
    rc = SSL_do_handshake(cl);
    ck_assert_int_le(rc, 0);
    for (k = 0; k < 200; k++) {
        ssize_t n = kr_conn_read(&sv);

        ck_assert(n < 0);               /* no data; refused or failed */
        rc = SSL_do_handshake(cl);
        e = SSL_get_error(cl, rc);
        if (rc == 1 || e != SSL_ERROR_WANT_READ) {
            break;
        }
    }
    ck_assert_msg(rc != 1, "renegotiation accepted");
    err = ERR_peek_error();
    ck_assert_msg(ERR_GET_REASON(err) == SSL_R_NO_RENEGOTIATION,
                  "client: %s", ERR_reason_error_string(err));
    ERR_clear_error();
    SSL_free(cl);
    SSL_CTX_free(cx);
    close(fds[0]);
    conn_free(&sv);
    kr_tls_ctx_put(st);
}
END_TEST

/*
 * Bytes that are not TLS: the sniff reads at most KR_TLS_SNIFF_MAX of
 * them raw, the handshake takes them in and fails with OpenSSL's reason;
 * a peer that closes in the handshake is an ECONNRESET.
 */
START_TEST(plaintext_refused)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *why;
    } t[] = {
        { "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, "http request" },
        /* ApiVersions v3 request, as a Kafka client starts */
        { "\0\0\0\x12\0\x12\0\x03\0\0\0\x01\0\x06kcat-1\0\0", 22,
          "wrong version number" },
    };
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    size_t i;

    for (i = 0; i < 2; i++) {
        struct kr_conn sv;
        int fds[2], rc;
        ssize_t n;

        pair(fds);
        conn_new(&sv, fds[1], st, NULL, KR_STAGE_SNIFF);
        ck_assert_int_eq(write(fds[0], t[i].bytes, t[i].len),
                         (ssize_t)t[i].len);
        n = kr_conn_read(&sv);
        ck_assert_int_eq(n, KR_TLS_SNIFF_MAX);
        ck_assert_uint_eq(evbuffer_get_length(sv.in), KR_TLS_SNIFF_MAX);
        ck_assert_uint_eq(kr_tls_ops.pending(&sv), 0);
        sv.stage = KR_STAGE_HANDSHAKE;
        rc = kr_conn_handshake(&sv);
        ck_assert_int_eq(rc, -1);
        ck_assert_int_eq(errno, EPROTO);
        ck_assert_msg(strstr(kr_conn_strerror(&sv, errno), t[i].why) != NULL,
                      "%s", kr_conn_strerror(&sv, errno));
        /* the sniffed bytes went into the handshake */
        ck_assert_uint_eq(evbuffer_get_length(sv.in), 0);
        close(fds[0]);
        conn_free(&sv);
    }
    /* the client goes away in the middle */
    {
        struct kr_conn sv;
        int fds[2], rc;

        pair(fds);
        conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
        ck_assert_int_eq(write(fds[0], "\x16\x03\x01\x02", 4), 4);
        rc = kr_conn_handshake(&sv);
        ck_assert(rc < 0 && kr_conn_again(errno));
        close(fds[0]);
        rc = kr_conn_handshake(&sv);
        ck_assert_int_eq(rc, -1);
        ck_assert_int_eq(errno, ECONNRESET);
        ck_assert_msg(strstr(kr_conn_strerror(&sv, errno), "closed") != NULL,
                      "%s", kr_conn_strerror(&sv, errno));
        conn_free(&sv);
    }
    kr_tls_ctx_put(st);
}
END_TEST

/*
 * The bytes a listener sniffs before the handshake are the handshake's:
 * bytes_in counts the connection's Kafka bytes only (decrypted, as
 * bytes_out counts them), which close lines and the audit log report.
 */
START_TEST(sniffed_bytes_not_counted)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    struct hs h;
    ssize_t n = -1;
    int fds[2], i;

    pair(fds);
    conn_new(&cl, fds[0], ct, "localhost", KR_STAGE_HANDSHAKE);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_SNIFF);
    ck_assert(kr_conn_handshake(&cl) < 0 && kr_conn_again(errno));
    for (i = 0; i < 100 && n <= 0; i++) {
        n = kr_conn_read(&sv);                  /* the sniff */
    }
    ck_assert_int_eq(n, KR_TLS_SNIFF_MAX);
    ck_assert_uint_eq(sv.bytes_in, KR_TLS_SNIFF_MAX);
    sv.stage = KR_STAGE_HANDSHAKE;
    h = handshake(&cl, &sv);
    ck_assert_msg(h.rc[0] == 0 && h.rc[1] == 0, "handshake: %s / %s",
                  h.why[0], h.why[1]);
    ck_assert_uint_eq(sv.bytes_in, 0);
    ck_assert_int_eq(evbuffer_add(cl.out, "hello", 5), 0);
    pump(&cl, &sv, 5);
    ck_assert_uint_eq(evbuffer_get_length(sv.in), 5);
    ck_assert_uint_eq(sv.bytes_in, 5);
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
}
END_TEST

/* After close_notify a read is the end (0), as after a TCP FIN. */
START_TEST(orderly_end)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    struct kr_conn cl, sv;
    ssize_t n;
    int i;

    connected(&cl, &sv, ct, st, "localhost");
    ck_assert_int_eq(evbuffer_add(cl.out, "last words", 10), 0);
    pump(&cl, &sv, 10);
    kr_conn_close(&cl);                 /* sends close_notify */
    for (i = 0; i < 100; i++) {
        n = kr_conn_read(&sv);
        if (n == 0) {
            break;
        }
        ck_assert(n < 0 && kr_conn_again(errno));
    }
    ck_assert_int_eq(n, 0);
    ck_assert_uint_eq(evbuffer_get_length(sv.in), 10);
    conn_free(&cl);
    conn_free(&sv);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(ct);
}
END_TEST

/*
 * A half-close (kr_conn_shutdown_write, as after a client's EOF): the
 * peer reads the bytes, then close_notify (an orderly end: 0, not a
 * truncation), and may still answer, which the half-closed side reads.
 */
START_TEST(half_close)
{
    struct kr_tls_ctx *ct = client_ctx("ca.pem", NULL, true);
    SSL_CTX *sx = SSL_CTX_new(TLS_server_method());
    struct kr_conn cl;
    char buf[16];
    int fds[2], i, r = 0, e = 0;
    SSL *srv;

    ck_assert_ptr_nonnull(sx);
    ck_assert_int_eq(SSL_CTX_use_certificate_chain_file(sx, F("server.pem")),
                     1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(sx, F("server.key"),
                                                 SSL_FILETYPE_PEM), 1);
    srv = SSL_new(sx);
    ck_assert_ptr_nonnull(srv);
    pair(fds);
    conn_new(&cl, fds[0], ct, "localhost", KR_STAGE_HANDSHAKE);
    SSL_set_fd(srv, fds[1]);
    SSL_set_accept_state(srv);
    for (i = 0; i < 2000 && (cl.stage != KR_STAGE_FRAMES || r != 1); i++) {
        if (cl.stage != KR_STAGE_FRAMES) {
            ck_assert_msg(kr_conn_handshake(&cl) == 0 || kr_conn_again(errno),
                          "client: %s", kr_conn_strerror(&cl, errno));
        }
        if (r != 1) {
            r = SSL_do_handshake(srv);
        }
    }
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(evbuffer_add(cl.out, "request", 7), 0);
    for (i = 0; i < 100 && evbuffer_get_length(cl.out) > 0; i++) {
        ck_assert(kr_conn_write(&cl) > 0 || kr_conn_again(errno));
    }
    ck_assert_int_eq(kr_conn_shutdown_write(&cl), 0);
    r = 0;
    for (i = 0; i < 1000 && r < 7; i++) {
        int k = SSL_read(srv, buf + r, (int)sizeof(buf) - r);

        r += k > 0 ? k : 0;
    }
    ck_assert_int_eq(r, 7);
    ck_assert_int_eq(memcmp(buf, "request", 7), 0);
    for (i = 0; i < 1000; i++) {
        r = SSL_read(srv, buf, (int)sizeof(buf));
        e = SSL_get_error(srv, r);
        if (e != SSL_ERROR_WANT_READ) {
            break;
        }
    }
    /* close_notify: an orderly end (a bare FIN: SSL_ERROR_SSL, "unexpected
       eof while reading", on OpenSSL 3) */
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(e, SSL_ERROR_ZERO_RETURN);
    ERR_clear_error();
    /* the answer still reaches the half-closed side */
    ck_assert_int_eq(SSL_write(srv, "response", 8), 8);
    for (i = 0; i < 100 && evbuffer_get_length(cl.in) < 8; i++) {
        ssize_t n = kr_conn_read(&cl);

        ck_assert_msg(n > 0 || (n < 0 && kr_conn_again(errno)),
                      "client: %zd %s", n, kr_conn_strerror(&cl, errno));
    }
    ck_assert_uint_eq(evbuffer_get_length(cl.in), 8);
    SSL_free(srv);
    SSL_CTX_free(sx);
    close(fds[1]);
    conn_free(&cl);
    kr_tls_ctx_put(ct);
}
END_TEST

/* ---- session resumption, early data ------------------------------------- */

/*
 * An OpenSSL client of the test's own (kr_tls keeps no client sessions):
 * trusting ca.pem, with client certificate cert (NULL: none), at most
 * TLS version max (0: any), without session tickets if no_ticket.
 */
static SSL_CTX *
ossl_client(const char *cert, int max, bool no_ticket)
{
    SSL_CTX *cx = SSL_CTX_new(TLS_client_method());
    char key[64];

    ck_assert_ptr_nonnull(cx);
    ck_assert_int_eq(SSL_CTX_load_verify_file(cx, F("ca.pem")), 1);
    SSL_CTX_set_verify(cx, SSL_VERIFY_PEER, NULL);
    if (cert != NULL) {
        snprintf(key, sizeof(key), "%.*s.key", (int)strcspn(cert, "."),
                 cert);
        ck_assert_int_eq(SSL_CTX_use_certificate_chain_file(cx, F(cert)), 1);
        ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(cx, F(key),
                                                     SSL_FILETYPE_PEM), 1);
    }
    if (max != 0) {
        SSL_CTX_set_max_proto_version(cx, max);
    }
    if (no_ticket) {
        SSL_CTX_set_options(cx, SSL_OP_NO_TICKET);
    }
    return cx;
}

/* What one connection of the test's client to a kr_tls server saw. */
struct visit {
    bool ok;                            /* both handshakes done */
    bool reused;                        /* the client resumed its session */
    bool srv_resumed;                   /* kr_tls_describe says "resumed" */
    char why[300];                      /* the server's failure, "" none */
    char cn[128];                       /* the CN kr_tls_peer_subject
                                           gives, "" none */
    int early;                          /* the client's
                                           SSL_get_early_data_status */
    bool resumable_before;              /* the client's session could be
                                           resumed before the server
                                           wrote (a ticket or an id came
                                           with the handshake) */
    char got[64];                       /* what the server read after the
                                           handshake */
    SSL_SESSION *sess;                  /* the client's session after it
                                           (the caller frees it) */
};

/*
 * One connection on a new pair: a client of cx offering sess (NULL: a
 * new session), with early (NULL: none) as TLS 1.3 early data, to a
 * server of st.  After the handshakes the server sends "hi" (the client
 * takes the TLS 1.3 tickets with it) and the client "late"; the client
 * then closes with close_notify (its session stays resumable).
 */
static struct visit
visit(SSL_CTX *cx, SSL_SESSION *sess, struct kr_tls_ctx *st,
      const char *early)
{
    struct visit v;
    struct kr_conn sv;
    const X509_NAME *sub;
    SSL *cl = SSL_new(cx);
    int fds[2], k, rc = 0, srv = 1, e;
    bool early_sent = early == NULL;
    char buf[16];
    size_t n;

    memset(&v, 0, sizeof(v));
    ck_assert_ptr_nonnull(cl);
    pair(fds);
    conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
    ck_assert_int_eq(SSL_set_fd(cl, fds[0]), 1);
    SSL_set_connect_state(cl);
    if (sess != NULL) {
        ck_assert_int_eq(SSL_set_session(cl, sess), 1);
    }
    /* srv: 1 going on, 0 done, -1 failed; rc: the client's */
    for (k = 0; k < 4000 && (srv == 1 || rc == 0); k++) {
        if (srv == 1) {
            if (kr_conn_handshake(&sv) == 0) {
                srv = 0;
            } else if (!kr_conn_again(errno)) {
                snprintf(v.why, sizeof(v.why), "%s",
                         kr_conn_strerror(&sv, errno));
                srv = -1;
            }
        }
        if (!early_sent) {
            e = SSL_write_early_data(cl, early, strlen(early), &n);
            ck_assert_msg(e == 1 || SSL_get_error(cl, e) ==
                                        SSL_ERROR_WANT_READ ||
                                    SSL_get_error(cl, e) ==
                                        SSL_ERROR_WANT_WRITE,
                          "SSL_write_early_data: %s",
                          ERR_reason_error_string(ERR_peek_error()));
            early_sent = e == 1;
        } else if (rc == 0) {
            e = SSL_do_handshake(cl);
            if (e == 1) {
                rc = 1;
            } else if (SSL_get_error(cl, e) != SSL_ERROR_WANT_READ &&
                       SSL_get_error(cl, e) != SSL_ERROR_WANT_WRITE) {
                rc = -1;
            }
        }
        if (srv < 0 && rc == 0 && k > 3000) {
            break;                      /* the client still waits */
        }
    }
    ERR_clear_error();
    v.ok = srv == 0 && rc == 1;
    if (v.ok) {
        char desc[128];

        v.reused = SSL_session_reused(cl) == 1;
        kr_tls_describe(&sv, desc, sizeof(desc));
        v.srv_resumed = strstr(desc, " resumed") != NULL;
        v.early = SSL_get_early_data_status(cl);
        sub = kr_tls_peer_subject(&sv);
        if (sub != NULL) {
            ck_assert_int_gt(X509_NAME_get_text_by_NID(
                                 (X509_NAME *)sub, NID_commonName, v.cn,
                                 sizeof(v.cn)), 0);
        }
        /* whatever the server sent with its handshake is read now */
        ck_assert_int_eq(SSL_read_ex(cl, buf, sizeof(buf), &n), 0);
        ck_assert_int_eq(SSL_get_error(cl, 0), SSL_ERROR_WANT_READ);
        v.resumable_before =
            SSL_SESSION_is_resumable(SSL_get0_session(cl)) == 1;
        /* "hi" to the client, after the tickets */
        ck_assert_int_eq(evbuffer_add(sv.out, "hi", 2), 0);
        for (k = 0; k < 1000; k++) {
            if (evbuffer_get_length(sv.out) > 0) {
                ck_assert(kr_conn_write(&sv) > 0 || kr_conn_again(errno));
            }
            e = SSL_read_ex(cl, buf, sizeof(buf), &n);
            if (e == 1) {
                break;
            }
            ck_assert_int_eq(SSL_get_error(cl, 0), SSL_ERROR_WANT_READ);
        }
        ck_assert_int_eq(e, 1);
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(SSL_write_ex(cl, "late", 4, &n), 1);
        for (k = 0; k < 1000 && evbuffer_get_length(sv.in) < 4; k++) {
            ck_assert(kr_conn_read(&sv) > 0 || kr_conn_again(errno));
        }
        n = evbuffer_copyout(sv.in, v.got, sizeof(v.got) - 1) > 0
                ? evbuffer_get_length(sv.in)
                : 0;
        v.got[n < sizeof(v.got) ? n : sizeof(v.got) - 1] = '\0';
        v.sess = SSL_get1_session(cl);
        (void)SSL_shutdown(cl);         /* or the session is not resumable */
    }
    ERR_clear_error();
    SSL_free(cl);
    close(fds[0]);
    conn_free(&sv);
    return v;
}

/* The TLS versions and session kinds the resumption tests go through. */
static const struct {
    const char *name;
    int max;                            /* the client's highest version */
    bool no_ticket;                     /* TLS 1.2: the server's session
                                           cache (session ids) */
} kinds[] = {
    { "TLS 1.3 tickets", 0, false },
    { "TLS 1.2 tickets", TLS1_2_VERSION, false },
    { "TLS 1.2 session ids", TLS1_2_VERSION, true },
};

/*
 * Resumption on (the default): the second connection resumes, and the
 * server reports the subject of the client certificate the first one
 * verified; a context built anew (a reload, even of the same files)
 * resumes nothing: a full handshake.  Resumption off: nothing resumed.
 */
START_TEST(resumption)
{
    int kind = _i / 2;
    bool on = _i % 2 == 0;
    struct kr_tls_ctx *st = server_ctx_r("ca.pem", NULL, on);
    struct kr_tls_ctx *st2 = server_ctx_r("ca.pem", NULL, on);
    SSL_CTX *cx = ossl_client("client.pem", kinds[kind].max,
                              kinds[kind].no_ticket);
    struct visit a, b, c;

    a = visit(cx, NULL, st, NULL);
    ck_assert_msg(a.ok, "%s: %s", kinds[kind].name, a.why);
    ck_assert(!a.reused && !a.srv_resumed);
    /* TLS 1.3: the ticket comes with the first bytes the server writes,
       never alone after the handshake; TLS 1.2: in the handshake */
    ck_assert_msg(a.resumable_before == (on && kinds[kind].max != 0),
                  "%s: resumable before the first response: %d",
                  kinds[kind].name, a.resumable_before);
    ck_assert(SSL_SESSION_is_resumable(a.sess) == on);
    ck_assert_str_eq(a.cn, "krelay-test-client");
    ck_assert_ptr_nonnull(a.sess);
    b = visit(cx, a.sess, st, NULL);
    ck_assert_msg(b.ok, "%s: %s", kinds[kind].name, b.why);
    ck_assert_msg(b.reused == on && b.srv_resumed == on, "%s, resumption "
                  "%s: resumed %d (server: %d)", kinds[kind].name,
                  on ? "on" : "off", b.reused, b.srv_resumed);
    ck_assert_str_eq(b.cn, "krelay-test-client");
    ck_assert_str_eq(b.got, "late");
    /* the same files, another context: a full handshake */
    c = visit(cx, a.sess, st2, NULL);
    ck_assert_msg(c.ok, "%s: %s", kinds[kind].name, c.why);
    ck_assert_msg(!c.reused && !c.srv_resumed, "%s: resumed in another "
                  "context", kinds[kind].name);
    ck_assert_str_eq(c.cn, "krelay-test-client");
    SSL_SESSION_free(a.sess);
    SSL_SESSION_free(b.sess);
    SSL_SESSION_free(c.sess);
    SSL_CTX_free(cx);
    kr_tls_ctx_put(st);
    kr_tls_ctx_put(st2);
}
END_TEST

/* dst = a then b (PEM files of D). */
static void
cat2(const char *dst, const char *a, const char *b)
{
    const char *in[2] = { a, b };
    FILE *o = fopen(F(dst), "w");
    char buf[4096];
    size_t n;
    int i;

    ck_assert_ptr_nonnull(o);
    for (i = 0; i < 2; i++) {
        FILE *f = fopen(F(in[i]), "r");

        ck_assert_ptr_nonnull(f);
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
            ck_assert_uint_eq(fwrite(buf, 1, n, o), n);
        }
        fclose(f);
    }
    ck_assert_int_eq(fclose(o), 0);
}

/*
 * mTLS and a reload that changes the trust: a session made under the old
 * client CA or CRL is not resumed.  The client gets a full handshake
 * checked against the new files: refused when its certificate is of a CA
 * no longer trusted, or revoked; accepted, not resumed, with its verified
 * subject, when the new CA file still has its CA.
 */
START_TEST(resumption_after_reload)
{
    int kind = _i;
    struct kr_tls_ctx *old = server_ctx("ca.pem", NULL);
    struct kr_tls_ctx *rogue = server_ctx("rogue-ca.pem", NULL);
    struct kr_tls_ctx *both, *crl;
    SSL_CTX *cx = ossl_client("client.pem", kinds[kind].max,
                              kinds[kind].no_ticket);
    SSL_CTX *rx = ossl_client("revoked.pem", kinds[kind].max,
                              kinds[kind].no_ticket);
    struct visit a, b, r, rb;

    cat2("both-ca.pem", "rogue-ca.pem", "ca.pem");
    both = server_ctx("both-ca.pem", NULL);
    crl = server_ctx("ca.pem", "crl.pem");
    a = visit(cx, NULL, old, NULL);
    ck_assert_msg(a.ok, "%s", a.why);
    b = visit(cx, a.sess, old, NULL);
    ck_assert_msg(b.ok && b.reused, "%s: not resumed (%s)",
                  kinds[kind].name, b.why);
    ck_assert_str_eq(b.cn, "krelay-test-client");
    SSL_SESSION_free(b.sess);

    /* another client CA: the full handshake fails */
    b = visit(cx, a.sess, rogue, NULL);
    ck_assert_msg(!b.ok, "%s: the old CA's session got in",
                  kinds[kind].name);
    ck_assert_msg(strstr(b.why, "certificate verify failed") != NULL, "%s",
                  b.why);
    /* a CA file that still has the client's CA: full, verified */
    b = visit(cx, a.sess, both, NULL);
    ck_assert_msg(b.ok && !b.reused && !b.srv_resumed, "%s: %s (resumed "
                  "%d)", kinds[kind].name, b.why, b.reused);
    ck_assert_str_eq(b.cn, "krelay-test-client");
    SSL_SESSION_free(b.sess);

    /* a CRL revoking the client's certificate, added by a reload */
    r = visit(rx, NULL, old, NULL);
    ck_assert_msg(r.ok, "%s", r.why);
    rb = visit(rx, r.sess, old, NULL);
    ck_assert_msg(rb.ok && rb.reused, "revoked, before: %s", rb.why);
    ck_assert_str_eq(rb.cn, "krelay-revoked-client");
    SSL_SESSION_free(rb.sess);
    rb = visit(rx, r.sess, crl, NULL);
    ck_assert_msg(!rb.ok, "%s: a revoked client resumed after the CRL "
                  "came", kinds[kind].name);
    ck_assert_msg(strstr(rb.why, "certificate revoked") != NULL, "%s",
                  rb.why);

    SSL_SESSION_free(a.sess);
    SSL_SESSION_free(r.sess);
    SSL_CTX_free(cx);
    SSL_CTX_free(rx);
    kr_tls_ctx_put(old);
    kr_tls_ctx_put(rogue);
    kr_tls_ctx_put(both);
    kr_tls_ctx_put(crl);
}
END_TEST

/*
 * TLS 1.3 early data: a client offering it (its session made to allow
 * it, which krelay's tickets never do) is not accepted: rejected, its
 * bytes never read; the session still resumes and the bytes the client
 * sends after the handshake arrive.
 */
START_TEST(early_data_refused)
{
    struct kr_tls_ctx *st = server_ctx(NULL, NULL);
    SSL_CTX *cx = ossl_client(NULL, 0, false);
    struct visit a, b;

    a = visit(cx, NULL, st, NULL);
    ck_assert_msg(a.ok, "%s", a.why);
    ck_assert_ptr_nonnull(a.sess);
    ck_assert_uint_eq(SSL_SESSION_get_max_early_data(a.sess), 0);
    ck_assert_int_eq(SSL_SESSION_set_max_early_data(a.sess, 16384), 1);
    b = visit(cx, a.sess, st, "PRODUCE-REPLAYED");
    ck_assert_msg(b.ok, "%s", b.why);
    ck_assert_int_eq(b.early, SSL_EARLY_DATA_REJECTED);
    ck_assert_str_eq(b.got, "late");
    ck_assert(b.reused && b.srv_resumed);
    SSL_SESSION_free(a.sess);
    SSL_SESSION_free(b.sess);
    SSL_CTX_free(cx);
    kr_tls_ctx_put(st);
}
END_TEST

/* ---- contexts ------------------------------------------------------------ */

/* Files that do not load: the option named, the reason given. */
START_TEST(context_errors)
{
    struct kr_tls_opts o;
    struct kr_tls_ctx *t;
    enum kr_tls_opt bad;
    char err[512], path[4096];
    FILE *f;

    memset(&o, 0, sizeof(o));
    o.server = true;
    o.certificate = F("nope.pem");
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_CERTIFICATE);
    ck_assert_msg(strstr(err, "No such file") != NULL, "%s", err);

    /* the key in the certificate's file, or not */
    o.certificate = F("server-full.pem");
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    kr_tls_ctx_put(t);
    o.certificate = F("server.pem");
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_CERTIFICATE);
    ck_assert_msg(strstr(err, "ssl_key") != NULL, "%s", err);

    o.key = F("other.key");
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_KEY);
    ck_assert_msg(strstr(err, "does not match") != NULL, "%s", err);

    o.key = F("ca.pem");                /* a certificate, no key */
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_KEY);

    snprintf(path, sizeof(path), "%s/garbage.pem", D);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a certificate\n", f);
    fclose(f);
    o.key = F("server.key");
    o.ca = path;
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_CA);
    ck_assert_msg(strstr(err, "garbage.pem") != NULL, "%s", err);

    o.ca = F("ca.pem");
    o.crl = path;
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_CRL);

    o.crl = NULL;
    o.ciphers = "NO-SUCH-CIPHER";
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_CIPHERS);
    o.ciphers = NULL;
    o.ciphersuites = "TLS_NOPE";
    t = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(bad, KR_TLS_OPT_CIPHERSUITES);
    ck_assert_int_eq(ERR_peek_error(), 0);
}
END_TEST

/* TLS 1.3 minimum on one side and 1.2 maximum on the other: no handshake;
   the reference counts let a context outlive the config (the conn's). */
START_TEST(min_protocol)
{
    struct kr_tls_opts o;
    struct kr_tls_ctx *st, *ct;
    enum kr_tls_opt bad;
    struct kr_conn cl, sv;
    struct hs h;
    char err[256];

    memset(&o, 0, sizeof(o));
    o.server = true;
    o.certificate = F("server.pem");
    o.key = F("server.key");
    o.min_version = KR_TLS_V1_3;
    st = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_ptr_nonnull(st);
    ct = client_ctx("ca.pem", NULL, true);
    SSL_CTX_set_max_proto_version(ct->ssl, TLS1_2_VERSION);
    h = try_handshake(ct, st, "localhost", &cl, &sv);
    ck_assert_int_lt(h.rc[1], 0);
    ck_assert_msg(strstr(h.why[1], "protocol") != NULL, "%s", h.why[1]);
    conn_free(&cl);
    conn_free(&sv);
    /* dropped by their owner while a connection holds them */
    SSL_CTX_set_max_proto_version(ct->ssl, 0);
    {
        int fds[2];

        pair(fds);
        conn_new(&cl, fds[0], ct, "localhost", KR_STAGE_HANDSHAKE);
        conn_new(&sv, fds[1], st, NULL, KR_STAGE_HANDSHAKE);
        kr_tls_ctx_put(st);
        kr_tls_ctx_put(ct);
        h = handshake(&cl, &sv);
        ck_assert_msg(h.rc[0] == 0 && h.rc[1] == 0, "%s / %s", h.why[0],
                      h.why[1]);
        conn_free(&cl);
        conn_free(&sv);
    }
}
END_TEST

static Suite *
tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("core");

    tcase_add_unchecked_fixture(tc, certs_setup, certs_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, handshake_and_roundtrip);
    tcase_add_test(tc, small_chains_coalesced);
    tcase_add_test(tc, pending_bytes);
    tcase_add_test(tc, first_bytes_with_finished);
    tcase_add_test(tc, finished_acked_at_once);
    tcase_add_test(tc, host_names);
    tcase_add_test(tc, sni);
    tcase_add_test(tc, sni_of_each_hello);
    tcase_add_test(tc, sni_malformed);
    tcase_add_test(tc, data_with_the_handshake);
    tcase_add_test(tc, client_certificates);
    tcase_add_test(tc, renegotiation_refused);
    tcase_add_test(tc, plaintext_refused);
    tcase_add_test(tc, orderly_end);
    tcase_add_test(tc, sniffed_bytes_not_counted);
    tcase_add_test(tc, half_close);
    tcase_add_test(tc, context_errors);
    tcase_add_test(tc, min_protocol);
    tcase_add_loop_test(tc, resumption, 0, 2 * (int)(sizeof(kinds) /
                                                    sizeof(kinds[0])));
    tcase_add_loop_test(tc, resumption_after_reload, 0,
                        (int)(sizeof(kinds) / sizeof(kinds[0])));
    tcase_add_test(tc, early_data_refused);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(tls_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
