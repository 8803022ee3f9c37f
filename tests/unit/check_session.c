/*
 * check_session.c - the proxy end to end over loopback, in one process:
 * a kr_daemon (bootstrap listener + one broker listener) in front of a
 * tiny fake broker written here, with test clients (plain, or TLS
 * through OpenSSL memory BIOs: tcli), all on one event_base stepped by
 * the test (no sleeps, no timing assertions).
 * Every wait gives up only after WAIT_STALL_MS without progress.
 *
 * The fake broker answers each request frame with
 *   [size][CorrelationId]["RSP!"][the request payload][extra pattern]
 * so the client can check every response byte; it answers Metadata with
 * a real Metadata v1 response (to see it rewritten), follows SaslHandshake
 * v0 PLAIN with one raw token round trip, and does not answer Produce
 * with Acks=0, like Kafka (unless answer_acks0: like librdkafka's mock).
 * Connections whose first request has ClientId "krelay" (kr_upstream's
 * own metadata fetch) are never answered; krelay's own ApiVersions on a
 * client's connection (CorrelationId KR_SESSION_AV_CORR, issue 10) is
 * logged and answered as the client requests are (av_client).
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "kr_api_keys.h"
#include "kr_audit.h"
#include "kr_broker_versions.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_fault_xprt.h"
#include "kr_proxy_proto.h"
#include "kr_kerr.h"
#include "kr_frame.h"
#include "kr_log.h"
#include "kr_daemon.h"
#include "kr_rule.h"
#include "kr_sasl.h"
#include "kr_sasl_server.h"
#include "kr_sasl_users.h"
#include "kr_scram.h"
#include "kr_session.h"
#include "../../src/kr_session_int.h"
#include "kr_test_certs.h"
#include "kr_tls_ctx.h"
#include "kr_upstream.h"

#define MAX_FRAME (1 << 20)
/* A wait for the proxy gives up after this long without progress (wall
   clock, not event-loop rounds: a slow or busy machine needs more rounds
   for the same work, and its kernel may deliver loopback data late).  A
   wait that ends on success costs nothing. */
#define WAIT_STALL_MS 30000
#define MAX_BUF (64 * 1024)
#define ONE_READ (256 * 1024)

enum fb_mode { FB_ECHO, FB_SILENT, FB_BADCORR, FB_CLOSE_AFTER };

struct fake;

struct fconn {
    struct fake *fb;
    evutil_socket_t fd;
    struct event *rev, *wev;
    struct evbuffer *in, *out;
    bool decided, internal;
    int sasl_raw;               /* raw SASL tokens still to answer */
};

struct fake {
    struct evconnlistener *l;
    uint16_t port;
    struct fconn *c[32];
    int n;
    enum fb_mode mode;
    size_t extra;               /* pattern bytes added to each response */
    size_t chunk;               /* max bytes per write, 0 = no limit */
    bool hold;                  /* queue replies in pending */
    bool no_read;               /* do not read new connections */
    bool answer_acks0;          /* answer Produce with Acks=0 too */
    int16_t sasl_error;         /* SaslAuthenticate's ErrorCode */
    int32_t md_node;            /* NodeId in Metadata responses */
    int16_t md_topic_err;       /* not 0: Metadata responses carry one
                                   topic, "t", with this ErrorCode */
    struct evbuffer *pending;
    struct evbuffer *log;       /* request bytes seen (client conns) */
    int nreq;
    bool answer_av;             /* answer ApiVersions v0-v2 (krelay's own
                                   metadata connection's too) with
                                   fake_apis */
    bool hold_internal;         /* keep the metadata connection's answer
                                   in ipending (fake_release_internal) */
    struct evbuffer *ipending;
    struct fconn *iconn;
    enum {
        AVC_ECHO = 0,           /* ApiVersions on client connections: as
                                   any request (unless answer_av) */
        AVC_ANSWER,             /* answered with fake_apis */
        AVC_SILENT              /* never answered */
    } av_client;
    bool answer_produce;        /* answer Produce v3 (Acks 1) with a real
                                   v3 response (fake_produce_response) */
    int produce_step;           /* with answer_produce: the n-th Produce
                                   answered (from 0) gets BaseOffset
                                   40 + CorrelationId + n * produce_step */
    int nproduce;               /* Produce requests answered */
    int garbage_produce;        /* the first this many Produce answers are
                                   a CorrelationId alone (no body) */
    int produce_err_at;         /* with answer_produce: the answer to the
                                   n-th Produce (from 1; 0: none) has
                                   ErrorCode produce_err in every
                                   partition, BaseOffset -1 */
    int16_t produce_err;
};

/* The ranges the fake broker offers with answer_av: ApiKey, MinVersion,
   MaxVersion (Metadata above krelay's tables: capped). */
static const int16_t fake_apis[][3] = {
    { 0, 3, 11 }, { 1, 4, 17 }, { 3, 0, 99 }, { 12, 0, 4 },
    { 17, 0, 1 }, { 18, 0, 4 }, { 36, 0, 2 }, { 60, 0, 1 }
};

struct cli {
    evutil_socket_t fd;
    struct event *rev;
    struct evbuffer *in;
    bool closed;
};

static struct env {
    struct event_base *base;
    struct event *guard;
    struct kr_conf conf;
    struct kr_listener_conf lc;
    struct kr_upstream_conf uc;
    struct kr_hostport bs;
    struct kr_dial_override dial;
    struct kr_daemon *p;
    struct kr_worker *w;
    struct fake fb;
    struct cli cl[4];
    int ncl;
    char logpath[64];           /* kr_log file of the test, or "" */
    const struct kr_conn_ops *conn_ops; /* sessions' transport, NULL: TCP */
    char *certs;                /* kr_test_certs_dir (TLS tests), or NULL */
    SSL_CTX *tls_cctx;          /* the TLS clients' context, or NULL */
    SSL *tls_c[4];              /* the TLS clients (tcli), by cl index
                                   (as many as cl) */
} T;

/* The worker's counters (KR_STAT_GET). */
#define ST (&T.w->stats)

/* ---- bytes -------------------------------------------------------------- */

struct bb {
    uint8_t *b;
    size_t n, cap;
};

static void
bput(struct bb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->b = realloc(b->b, b->cap);
        ck_assert_ptr_nonnull(b->b);
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void
b16(struct bb *b, int16_t v)
{
    uint8_t x[2] = { (uint8_t)((uint16_t)v >> 8), (uint8_t)v };

    bput(b, x, 2);
}

static void
b32(struct bb *b, int32_t v)
{
    uint8_t x[4] = { (uint8_t)((uint32_t)v >> 24), (uint8_t)(v >> 16),
                     (uint8_t)(v >> 8), (uint8_t)v };

    bput(b, x, 4);
}

static void
bstr(struct bb *b, const char *s)
{
    if (s == NULL) {
        b16(b, -1);
        return;
    }
    b16(b, (int16_t)strlen(s));
    bput(b, s, strlen(s));
}

/* Patch the size prefix of the frame starting at at. */
static void
bend(struct bb *b, size_t at)
{
    int32_t size = (int32_t)(b->n - at - 4);

    b->b[at] = (uint8_t)(size >> 24);
    b->b[at + 1] = (uint8_t)(size >> 16);
    b->b[at + 2] = (uint8_t)(size >> 8);
    b->b[at + 3] = (uint8_t)size;
}

static size_t
req_begin(struct bb *b, int16_t key, int16_t ver, int32_t corr)
{
    size_t at = b->n;

    b32(b, 0);
    b16(b, key);
    b16(b, ver);
    b32(b, corr);
    bstr(b, "check");
    return at;
}

/* Metadata v1 for all topics (Topics null) */
static void
req_metadata_all(struct bb *b, int32_t corr)
{
    size_t at = req_begin(b, KR_API_METADATA, 1, corr);

    b32(b, -1);                 /* all topics */
    bend(b, at);
}

/* Heartbeat v0: GroupId, GenerationId, MemberId */
static void
req_heartbeat(struct bb *b, int32_t corr)
{
    size_t at = req_begin(b, KR_API_HEARTBEAT, 0, corr);

    bstr(b, "group");
    b32(b, 1);
    bstr(b, "member");
    bend(b, at);
}

/* Produce v3 with Acks and a fake records blob */
static void
req_produce(struct bb *b, int32_t corr, int16_t acks, size_t nrec)
{
    size_t at = req_begin(b, KR_API_PRODUCE, 3, corr), i;
    uint8_t x;

    bstr(b, NULL);              /* TransactionalId */
    b16(b, acks);
    b32(b, 1000);               /* TimeoutMs */
    b32(b, 1);                  /* one topic */
    bstr(b, "t");
    b32(b, 1);                  /* one partition */
    b32(b, 0);
    b32(b, (int32_t)nrec);      /* records */
    for (i = 0; i < nrec; i++) {
        x = (uint8_t)(i * 31 + 7);
        bput(b, &x, 1);
    }
    bend(b, at);
}

/* The fake broker's echo response to one request frame. */
static void
echo_response(struct bb *out, const uint8_t *req, size_t len, size_t extra,
              int32_t corr_delta)
{
    size_t at = out->n, i;
    uint8_t x;

    b32(out, 0);
    b32(out, kr_frame_i32(req + 8) + corr_delta);
    bput(out, "RSP!", 4);
    bput(out, req + 4, len - 4);
    for (i = 0; i < extra; i++) {
        x = (uint8_t)(i ^ (i >> 8));
        bput(out, &x, 1);
    }
    bend(out, at);
}

/* Metadata v1 response with one broker, and topic "t" with ErrorCode
   topic_err when that is not 0. */
static void
metadata_response_t(struct bb *out, int32_t corr, int32_t node,
                    const char *host, int32_t port, int16_t topic_err)
{
    size_t at = out->n;

    b32(out, 0);
    b32(out, corr);
    b32(out, 1);                /* Brokers */
    b32(out, node);             /* NodeId */
    bstr(out, host);
    b32(out, port);
    bstr(out, NULL);            /* Rack */
    b32(out, 0);                /* ControllerId */
    if (topic_err == 0) {
        b32(out, 0);            /* Topics */
    } else {
        b32(out, 1);
        b16(out, topic_err);    /* ErrorCode */
        bstr(out, "t");         /* Name */
        bput(out, "\0", 1);     /* IsInternal */
        b32(out, 0);            /* Partitions */
    }
    bend(out, at);
}

static void
metadata_response(struct bb *out, int32_t corr, int32_t node,
                  const char *host, int32_t port)
{
    metadata_response_t(out, corr, node, host, port, 0);
}

/* ---- the fake broker ---------------------------------------------------- */

static void
fconn_free(struct fconn *c)
{
    event_free(c->rev);
    event_free(c->wev);
    evbuffer_free(c->in);
    evbuffer_free(c->out);
    if (c->fd >= 0) {
        close(c->fd);
    }
    free(c);
}

static void
fconn_flush(struct fconn *c)
{
    size_t n = evbuffer_get_length(c->out);

    if (n == 0) {
        event_del(c->wev);
        return;
    }
    if (c->fb->chunk > 0 && n > c->fb->chunk) {
        n = c->fb->chunk;
    }
    if (evbuffer_write_atmost(c->out, c->fd, (ev_ssize_t)n) < 0 &&
        errno != EAGAIN) {
        evbuffer_drain(c->out, evbuffer_get_length(c->out));
    }
    if (evbuffer_get_length(c->out) > 0) {
        event_add(c->wev, NULL);
    } else {
        event_del(c->wev);
    }
}

static void
fconn_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fconn_flush(arg);
}

/* An ApiVersions v0-v2 response with fake_apis (hand-written: the
   broker's side of the test). */
static void
fake_av_response(struct bb *r, int32_t corr, int16_t ver)
{
    size_t at = r->n, i, n = sizeof(fake_apis) / sizeof(fake_apis[0]);

    b32(r, 0);
    b32(r, corr);
    b16(r, 0);                  /* ErrorCode */
    b32(r, (int32_t)n);
    for (i = 0; i < n; i++) {
        b16(r, fake_apis[i][0]);
        b16(r, fake_apis[i][1]);
        b16(r, fake_apis[i][2]);
    }
    if (ver >= 1) {
        b32(r, 0);              /* ThrottleTimeMs */
    }
    bend(r, at);
}

/* A Produce v3 response: topic "orders", partition 0 at BaseOffset
   40 + corr, no error (issue 10's translated Produce answered). */
static void
fake_produce_response(struct bb *r, int32_t corr)
{
    size_t at = r->n;

    b32(r, 0);
    b32(r, corr);
    b32(r, 1);                  /* Responses */
    bstr(r, "orders");
    b32(r, 1);                  /* PartitionResponses */
    b32(r, 0);                  /* Index */
    b16(r, 0);                  /* ErrorCode */
    b32(r, 0);                  /* BaseOffset (int64) */
    b32(r, 40 + corr);
    b32(r, -1);                 /* LogAppendTimeMs (int64) -1 */
    b32(r, -1);
    b32(r, 0);                  /* ThrottleTimeMs */
    bend(r, at);
}

/* A Produce v3 response (CorrelationId corr) naming every partition of
   the Produce v3 request f (len bytes, header v1), each with ErrorCode
   err and BaseOffset base (LogAppendTimeMs -1), in the request's order:
   a broker's answer. */
static void
fake_produce_answer(struct bb *r, const uint8_t *f, size_t len,
                    int32_t corr, int16_t err, int64_t base)
{
    size_t at = r->n, off = 14 + (size_t)kr_frame_i16(f + 12);
    int16_t tid = kr_frame_i16(f + off);
    int32_t nt, np, t, p;

    off += 2 + (tid > 0 ? (size_t)tid : 0) + 2 + 4;   /* TransactionalId,
                                                         Acks, TimeoutMs */
    b32(r, 0);
    b32(r, corr);
    nt = kr_frame_i32(f + off);
    off += 4;
    b32(r, nt);
    for (t = 0; t < nt; t++) {
        size_t nl = (size_t)kr_frame_i16(f + off);

        ck_assert_uint_le(off + 2 + nl + 4, len);
        b16(r, (int16_t)nl);
        bput(r, f + off + 2, nl);
        off += 2 + nl;
        np = kr_frame_i32(f + off);
        off += 4;
        b32(r, np);
        for (p = 0; p < np; p++) {
            ck_assert_uint_le(off + 8, len);
            b32(r, kr_frame_i32(f + off));      /* Index */
            b16(r, err);
            b32(r, (int32_t)(base >> 32));      /* BaseOffset */
            b32(r, (int32_t)base);
            b32(r, -1);                         /* LogAppendTimeMs -1 */
            b32(r, -1);
            off += 8 + (size_t)kr_frame_i32(f + off + 4);
        }
    }
    b32(r, 0);                  /* ThrottleTimeMs */
    bend(r, at);
}

static void
fake_answer(struct fconn *c, const uint8_t *f, size_t len)
{
    struct fake *fb = c->fb;
    struct bb r = { NULL, 0, 0 };
    int16_t key, ver;
    int32_t corr;
    size_t cid, off;

    if (fb->mode == FB_SILENT) {
        return;
    }
    if (c->sasl_raw > 0) {      /* a raw SASL token: empty answer */
        c->sasl_raw--;
        b32(&r, 0);
        goto send;
    }
    key = kr_frame_i16(f + 4);
    ver = kr_frame_i16(f + 6);
    corr = kr_frame_i32(f + 8);
    cid = (size_t)kr_frame_i16(f + 12);
    off = 14 + cid;             /* body of a header v1 request */
    if (key == KR_API_PRODUCE && ver == 3 &&
        kr_frame_i16(f + off + 2) == 0 && !fb->answer_acks0) {
        return;                 /* Acks=0: no response */
    }
    if (key == KR_API_SASL_HANDSHAKE && ver == 0) {
        size_t at = r.n;

        b32(&r, 0);
        b32(&r, corr);
        b16(&r, 0);             /* ErrorCode */
        b32(&r, 1);
        bstr(&r, "PLAIN");
        bend(&r, at);
        c->sasl_raw = 1;
        goto send;
    }
    if (key == KR_API_SASL_HANDSHAKE && ver == 1) {
        size_t at = r.n;

        b32(&r, 0);
        b32(&r, corr);
        b16(&r, 0);             /* ErrorCode */
        b32(&r, 1);
        bstr(&r, "PLAIN");
        bend(&r, at);
        goto send;
    }
    if (key == KR_API_SASL_AUTHENTICATE && ver == 1) {
        size_t at = r.n;

        b32(&r, 0);
        b32(&r, corr);
        b16(&r, fb->sasl_error);        /* ErrorCode */
        bstr(&r, fb->sasl_error != 0 ? "Authentication failed" : NULL);
        b32(&r, 0);                     /* AuthBytes: empty */
        b32(&r, 0);                     /* SessionLifetimeMs (int64) */
        b32(&r, 60000);
        bend(&r, at);
        goto send;
    }
    if (key == KR_API_METADATA && ver == 1) {
        metadata_response_t(&r, corr, fb->md_node, "fakehost", 1234,
                            fb->md_topic_err);
        goto send;
    }
    if (key == KR_API_API_VERSIONS && fb->av_client == AVC_SILENT) {
        return;
    }
    if (key == KR_API_API_VERSIONS && ver <= 2 &&
        (fb->answer_av || fb->av_client == AVC_ANSWER)) {
        fake_av_response(&r, corr, ver);
        goto send;
    }
    if (key == KR_API_PRODUCE && ver == 3 && fb->nproduce <
                                                 fb->garbage_produce) {
        fb->nproduce++;
        b32(&r, 4);
        b32(&r, corr);
        goto send;
    }
    if (key == KR_API_PRODUCE && ver == 3 && fb->answer_produce) {
        bool err = ++fb->nproduce == fb->produce_err_at;

        /* BaseOffset 40 + CorrelationId + n * produce_step */
        fake_produce_answer(&r, f, len, corr, err ? fb->produce_err : 0,
                            err ? -1 : 40 + corr + (fb->nproduce - 1) *
                                                        fb->produce_step);
        goto send;
    }
    echo_response(&r, f, len, fb->extra, fb->mode == FB_BADCORR ? 1 : 0);
send:
    evbuffer_add(fb->hold ? fb->pending : c->out, r.b, r.n);
    free(r.b);
    if (fb->mode == FB_CLOSE_AFTER) {
        fconn_flush(c);
        ck_assert_uint_eq(evbuffer_get_length(c->out), 0);
        shutdown(c->fd, SHUT_RDWR);
    }
}

static void
fconn_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fconn *c = arg;
    struct fake *fb = c->fb;
    uint8_t hdr[4];
    int n;

    (void)fd;
    (void)what;
    n = evbuffer_read(c->in, c->fd, 1 << 20);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        int i;

        for (i = 0; i < fb->n; i++) {
            if (fb->c[i] == c) {
                fb->c[i] = fb->c[--fb->n];
            }
        }
        fconn_free(c);
        return;
    }
    for (;;) {
        size_t len = evbuffer_get_length(c->in), flen;
        uint8_t *f;

        if (len < 4) {
            break;
        }
        evbuffer_copyout(c->in, hdr, 4);
        flen = 4 + (size_t)kr_frame_i32(hdr);
        if (len < flen) {
            break;
        }
        f = malloc(flen);
        ck_assert_ptr_nonnull(f);
        evbuffer_remove(c->in, f, flen);
        if (!c->decided) {
            c->decided = true;
            c->internal = flen >= 20 && kr_frame_i16(f + 12) == 6 &&
                memcmp(f + 14, "krelay", 6) == 0 &&
                kr_frame_i32(f + 8) != KR_SESSION_AV_CORR;
        }
        if (!c->internal) {
            evbuffer_add(fb->log, f, flen);
            fb->nreq++;
            fake_answer(c, f, flen);
        } else if (fb->answer_av && kr_frame_i16(f + 4) == KR_API_API_VERSIONS &&
                   kr_frame_i16(f + 6) <= 2) {
            struct bb r = { NULL, 0, 0 };

            fake_av_response(&r, kr_frame_i32(f + 8), kr_frame_i16(f + 6));
            if (fb->hold_internal) {
                if (fb->ipending == NULL) {
                    fb->ipending = evbuffer_new();
                }
                evbuffer_add(fb->ipending, r.b, r.n);
                fb->iconn = c;
            } else {
                evbuffer_add(c->out, r.b, r.n);
            }
            free(r.b);
        }
        free(f);
    }
    fconn_flush(c);
}

static void
fake_accept(struct evconnlistener *l, evutil_socket_t fd,
            struct sockaddr *sa, int salen, void *arg)
{
    struct fake *fb = arg;
    struct fconn *c = calloc(1, sizeof(*c));
    int one = 1;

    (void)l;
    (void)sa;
    (void)salen;
    ck_assert_ptr_nonnull(c);
    ck_assert_int_lt(fb->n, 32);
    c->fb = fb;
    c->fd = fd;
    c->in = evbuffer_new();
    c->out = evbuffer_new();
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->rev = event_new(T.base, fd, EV_READ | EV_PERSIST, fconn_read_cb, c);
    c->wev = event_new(T.base, fd, EV_WRITE | EV_PERSIST, fconn_write_cb, c);
    if (!fb->no_read) {
        event_add(c->rev, NULL);
    }
    fb->c[fb->n++] = c;
}

/* The fake broker closes its connections from krelay's sessions (not
   krelay's own metadata connection). */
static void
fake_close_clients(struct fake *fb)
{
    int i;

    for (i = 0; i < fb->n;) {
        if (!fb->c[i]->internal) {
            fconn_free(fb->c[i]);
            fb->c[i] = fb->c[--fb->n];
            continue;
        }
        i++;
    }
}

static void
fake_release(struct fake *fb)
{
    int i;

    fb->hold = false;
    for (i = 0; i < fb->n; i++) {
        if (!fb->c[i]->internal) {
            evbuffer_add_buffer(fb->c[i]->out, fb->pending);
            fconn_flush(fb->c[i]);
        }
    }
}

/* ---- clients ------------------------------------------------------------ */

static void
cli_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct cli *c = arg;
    int n;

    (void)fd;
    (void)what;
    n = evbuffer_read(c->in, c->fd, 1 << 20);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        c->closed = true;
        event_del(c->rev);
    }
}

static struct cli *
cli_open(uint16_t port, int rcvbuf)
{
    struct cli *c = &T.cl[T.ncl++];
    struct sockaddr_in sin;
    int rc;

    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(c->fd, 0);
    if (rcvbuf > 0) {
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(c->fd, (struct sockaddr *)&sin, sizeof(sin));
    ck_assert_int_eq(rc, 0);
    evutil_make_socket_nonblocking(c->fd);
    c->in = evbuffer_new();
    c->rev = event_new(T.base, c->fd, EV_READ | EV_PERSIST, cli_read_cb, c);
    event_add(c->rev, NULL);
    return c;
}

static void
pump_once(void)
{
    event_base_loop(T.base, EVLOOP_ONCE);
}

/* Something that moves while the proxy works: bytes and frames seen by
   the fake broker, the proxy and the clients, connections. */
static uint64_t
progress(void)
{
    uint64_t n = evbuffer_get_length(T.fb.log) + (uint64_t)T.fb.nreq;
    int i;

    for (i = 0; i < T.fb.n; i++) {
        n += evbuffer_get_length(T.fb.c[i]->out);
    }
    for (i = 0; i < T.ncl; i++) {
        n += evbuffer_get_length(T.cl[i].in) + T.cl[i].closed;
    }
    if (T.p != NULL) {
        n += KR_STAT_GET(ST, client_to_upstream_bytes) + KR_STAT_GET(ST, upstream_to_client_bytes) +
             KR_STAT_GET(ST, requests) + KR_STAT_GET(ST, responses) +
             KR_STAT_GET(ST, responses_dropped) +
             KR_STAT_GET(ST, conn_accepted) +
             KR_STAT_GET(ST, conn_active);
    }
    return n;
}

static int64_t
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A wait: while (!done && waiting(&w, progress_value)) pump_once(); */
struct wait {
    int64_t since;
    uint64_t last;
    bool started;
    int64_t stall_ms;           /* 0: WAIT_STALL_MS */
};

/* True until WAIT_STALL_MS (or w->stall_ms) pass with the same value of
   what. */
static bool
waiting(struct wait *w, uint64_t what)
{
    int64_t now = mono_ms();

    if (!w->started || what != w->last) {
        w->started = true;
        w->last = what;
        w->since = now;
        return true;
    }
    return now - w->since < (w->stall_ms > 0 ? w->stall_ms : WAIT_STALL_MS);
}

static void
cli_send(struct cli *c, const void *p, size_t n)
{
    const uint8_t *b = p;
    struct wait wt = { 0 };
    ssize_t w;

    while (n > 0) {
        w = write(c->fd, b, n);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        ck_assert(w < 0 && errno == EAGAIN);
        ck_assert_msg(waiting(&wt, progress()), "client cannot write: "
                      "%zu bytes left", n);
        pump_once();
    }
}

/* Pump until c has n bytes or is closed (bounded: struct wait). */
static bool
cli_has(struct cli *c, size_t n)
{
    struct wait w = { 0 };

    while (!c->closed && evbuffer_get_length(c->in) < n &&
           waiting(&w, progress())) {
        pump_once();
    }
    return evbuffer_get_length(c->in) >= n;
}

static bool
cli_wait_closed(struct cli *c)
{
    struct wait w = { 0 };

    while (!c->closed && waiting(&w, progress())) {
        pump_once();
    }
    return c->closed;
}

/* The bytes c received equal exp. */
static void
cli_expect(struct cli *c, const struct bb *exp)
{
    uint8_t *got;

    ck_assert_msg(cli_has(c, exp->n), "client got %zu of %zu bytes",
                  evbuffer_get_length(c->in), exp->n);
    ck_assert_uint_eq(evbuffer_get_length(c->in), exp->n);
    got = evbuffer_pullup(c->in, -1);
    if (memcmp(got, exp->b, exp->n) != 0) {
        size_t i;

        for (i = 0; i < exp->n && got[i] == exp->b[i]; i++) {
        }
        ck_abort_msg("response bytes differ at offset %zu of %zu: got "
                     "0x%02x, expected 0x%02x", i, exp->n, got[i],
                     exp->b[i]);
    }
    evbuffer_drain(c->in, exp->n);
}

/* The fake broker saw exactly sent (client connections only). */
static void
fake_expect(const struct bb *sent)
{
    struct wait w = { 0 };

    /* by progress, not by a round count: a slow machine moves 15 MiB in
       more rounds than a fast one */
    while (evbuffer_get_length(T.fb.log) < sent->n &&
           waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), sent->n);
    ck_assert(memcmp(evbuffer_pullup(T.fb.log, -1), sent->b, sent->n) == 0);
}

/* Responses the fake sends for the request frames in reqs. */
static void
expected_echo(const struct bb *reqs, size_t extra, struct bb *exp)
{
    size_t off = 0, flen;

    while (off < reqs->n) {
        flen = 4 + (size_t)kr_frame_i32(reqs->b + off);
        echo_response(exp, reqs->b + off, flen, extra, 0);
        off += flen;
    }
}

/* ---- fixture ------------------------------------------------------------ */

static void
guard_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void
setup(void)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    struct timeval tv = { 0, 10000 };

    memset(&T, 0, sizeof(T));
    kr_log_level_cur = KR_LOG_WARN;
    T.base = event_base_new();
    ck_assert_ptr_nonnull(T.base);
    T.guard = event_new(T.base, -1, EV_PERSIST, guard_cb, NULL);
    event_add(T.guard, &tv);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    T.fb.log = evbuffer_new();
    T.fb.pending = evbuffer_new();
    T.fb.l = evconnlistener_new_bind(T.base, fake_accept, &T.fb,
                                     LEV_OPT_CLOSE_ON_FREE |
                                     LEV_OPT_REUSEABLE, 16,
                                     (struct sockaddr *)&sin, sizeof(sin));
    ck_assert_ptr_nonnull(T.fb.l);
    getsockname(evconnlistener_get_fd(T.fb.l), (struct sockaddr *)&sin,
                &len);
    T.fb.port = ntohs(sin.sin_port);

    T.bs.host = (char *)"127.0.0.1";
    T.bs.port = T.fb.port;
    T.uc.name = (char *)"";
    T.uc.bootstrap = &T.bs;
    T.uc.nbootstrap = 1;
    T.uc.connect_timeout_ms = 5000;
    T.uc.request_timeout_margin_ms = 30000;
    T.uc.metadata_refresh_ms = 300000;
    T.lc.name = (char *)"";
    T.lc.listen.host = (char *)"127.0.0.1";
    T.lc.listen.port = 0;
    T.lc.advertised_host = (char *)"127.0.0.1";
    T.lc.broker_port_base = 0;  /* NodeId 0 -> port 0: kernel's choice */
    T.lc.node_id_min = 0;
    T.lc.node_id_max = 0;
    T.lc.up = &T.uc;
    T.lc.max_frame_bytes = MAX_FRAME;
    T.lc.max_inflight = 1000;
    T.lc.max_buffer_bytes = MAX_BUF;
    T.lc.max_connections = 100;
    T.lc.idle_timeout_ms = 0;
    T.lc.sasl_auth_timeout_ms = 10000;
    T.lc.tcp_nodelay = true;
    T.conf.path = (char *)"check_session";
    T.conf.listeners = &T.lc;
    T.conf.nlisteners = 1;
    T.conf.upstreams = &T.uc;
    T.conf.nupstreams = 1;
}

static void
start(void)
{
    char err[256] = "";

    T.p = kr_daemon_new(&T.conf, false, T.base);
    ck_assert_ptr_nonnull(T.p);
    ck_assert_msg(kr_daemon_start(T.p, err, sizeof(err)) == KR_OK, "%s",
                  err);
    T.w = kr_daemon_worker(T.p, 0);
    T.w->host.conn_ops = T.conn_ops;    /* before any connection */
    ck_assert_uint_ne(kr_daemon_port(T.p, 0, KR_NODE_BOOTSTRAP), 0);
    ck_assert_uint_ne(kr_daemon_port(T.p, 0, 0), 0);
}

static uint16_t
boot_port(void)
{
    return kr_daemon_port(T.p, 0, KR_NODE_BOOTSTRAP);
}

static void
teardown(void)
{
    int i;

    kr_daemon_free(T.p);
    kr_rule_free(T.conf.ruleset);
    T.conf.ruleset = NULL;
    kr_sasl_srv_cfg_free(T.lc.sasl_srv);
    T.lc.sasl_srv = NULL;
    for (i = 0; i < T.ncl; i++) {
        event_free(T.cl[i].rev);
        evbuffer_free(T.cl[i].in);
        close(T.cl[i].fd);
    }
    while (T.fb.n > 0) {
        fconn_free(T.fb.c[--T.fb.n]);
    }
    evconnlistener_free(T.fb.l);
    evbuffer_free(T.fb.log);
    evbuffer_free(T.fb.pending);
    if (T.fb.ipending != NULL) {
        evbuffer_free(T.fb.ipending);
    }
    event_free(T.guard);
    event_base_free(T.base);
    for (i = 0; i < (int)(sizeof(T.tls_c) / sizeof(T.tls_c[0])); i++) {
        SSL_free(T.tls_c[i]);
    }
    SSL_CTX_free(T.tls_cctx);
    kr_tls_ctx_put(T.lc.tls);
    T.lc.tls = NULL;
    if (T.certs != NULL) {
        kr_test_certs_rm(T.certs);
    }
    if (T.logpath[0] != '\0') {
        kr_log_close();
        unlink(T.logpath);
    }
}

/* Send krelay's log to a file of this test (read with log_text). */
static void
log_capture(void)
{
    int fd;

    snprintf(T.logpath, sizeof(T.logpath), "/tmp/check_session.XXXXXX");
    fd = mkstemp(T.logpath);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(kr_log_open(T.logpath, "check"), KR_OK);
}

/* What krelay logged so far (malloc'd, NUL-terminated). */
static char *
log_text(void)
{
    FILE *f = fopen(T.logpath, "r");
    char *buf = calloc(1, 65536);
    size_t n;

    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(buf);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- tests -------------------------------------------------------------- */

/* A free port for broker_port_base (NodeId 0 listens there). */
static uint16_t
free_port(void)
{
    static bool seeded;
    unsigned lo = 20000, hi = 32768, tries;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

    /* below the kernel's ephemeral range, as tests/integration/
       free_ports.py: a port the kernel handed out and took back may be
       any process's next outgoing connection before the daemon binds it */
    if (f != NULL) {
        unsigned eph;

        if (fscanf(f, "%u", &eph) == 1 && eph > lo + 4000) {
            hi = eph;
        }
        fclose(f);
    }
    if (!seeded) {
        srand((unsigned)getpid() ^ (unsigned)time(NULL));
        seeded = true;
    }
    for (tries = 0; tries < 200; tries++) {
        struct sockaddr_in sin;
        uint16_t port = (uint16_t)(lo + (unsigned)rand() % (hi - lo));
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        bool ok;

        ck_assert_int_ge(fd, 0);
        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sin.sin_port = htons(port);
        ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
        close(fd);
        if (ok) {
            return port;
        }
    }
    ck_abort_msg("no free port below %u", hi);
    return 0;
}


/* Heartbeat, Produce, Heartbeat (CorrelationIds 1-3) sent on a new
   client connection, forwarded byte for byte and answered by the fake's
   echo; req and exp filled (the caller frees them).  The client. */
static struct cli *
three_echoed(struct bb *req, struct bb *exp)
{
    struct cli *c;

    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(req, 1);
    req_produce(req, 2, 1, 3000);
    req_heartbeat(req, 3);
    cli_send(c, req->b, req->n);
    fake_expect(req);
    expected_echo(req, 0, exp);
    cli_expect(c, exp);
    return c;
}

START_TEST(forward_byte_exact)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    c = three_echoed(&req, &exp);
    ck_assert(!c->closed);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 3);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 3);
    /* idle, no write ever waited: no write event on either side (the
       one connect(2) waited with is gone) */
    ck_assert_ptr_null(T.w->sessions->client.wev);
    ck_assert_ptr_null(T.w->sessions->up.wev);
    ck_assert_ptr_nonnull(T.w->sessions->up.wcb);
    /* nothing streamed: no scanner state either way */
    ck_assert_ptr_null(T.w->sessions->rsp_st);
    ck_assert_ptr_null(T.w->sessions->req_st);
    free(req.b);
    free(exp.b);
}
END_TEST

/* A write event that could not be made (out of memory) closes the
   session at the end of the callback that wanted it. */
START_TEST(write_event_failure_closes)
{
    struct bb req = { 0 }, exp = { 0 }, more = { 0 };
    struct cli *c;

    c = three_echoed(&req, &exp);
    T.w->sessions->client.wev_failed = 1;
    req_heartbeat(&more, 4);
    cli_send(c, more.b, more.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_ptr_null(T.w->sessions);
    free(req.b);
    free(exp.b);
    free(more.b);
}
END_TEST

START_TEST(broker_listener)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    /* dial.0 = the fake: NodeId 0 resolves without Metadata */
    T.dial.node_id = 0;
    T.dial.addr = T.bs;
    T.uc.dial = &T.dial;
    T.uc.ndial = 1;
    start();
    c = cli_open(kr_daemon_port(T.p, 0, 0), 0);
    req_heartbeat(&req, 42);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_int_eq(T.w->sessions->l->node_id, 0);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(pipelined_in_order)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    int i;

    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 300; i++) {
        if (i % 3 == 1) {
            req_produce(&req, i * 7, -1, (size_t)i * 10);
        } else {
            req_heartbeat(&req, i * 7);
        }
    }
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 300);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(split_every_byte)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    size_t i;
    int k;

    T.fb.chunk = 1;             /* the fake writes one byte at a time */
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 5);
    req_produce(&req, 6, 1, 40);
    req_produce(&req, 7, 0, 10);    /* Acks=0 in the middle */
    req_heartbeat(&req, 8);
    for (i = 0; i < req.n; i++) {
        cli_send(c, req.b + i, 1);
        for (k = 0; k < 3; k++) {
            event_base_loop(T.base, EVLOOP_NONBLOCK);
        }
    }
    fake_expect(&req);
    /* the Acks=0 Produce gets no response */
    {
        struct bb part = { 0 };
        size_t off = 0, flen;
        int n = 0;

        while (off < req.n) {
            flen = 4 + (size_t)kr_frame_i32(req.b + off);
            if (n++ != 2) {
                bput(&part, req.b + off, flen);
            }
            off += flen;
        }
        expected_echo(&part, 0, &exp);
        free(part.b);
    }
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), 1);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(acks0_no_response)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    struct cli *c;

    start();
    c = cli_open(boot_port(), 0);
    req_produce(&req, 1, 0, 100);
    req_heartbeat(&hb, 2);
    bput(&req, hb.b, hb.n);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(T.fb.nreq, 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), 1);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

START_TEST(bad_correlation_id)
{
    struct bb req = { 0 };
    struct cli *c;

    T.fb.mode = FB_BADCORR;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 10);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 1);
    ck_assert_ptr_null(T.w->sessions);
    free(req.b);
}
END_TEST

/*
 * Bad input, and the kind of frames_refused it counts (one each).
 * sasl_required: on a listener with sasl = required.
 */
static const struct {
    const char *name;
    const uint8_t *bytes;
    size_t len;
    enum kr_refusal kind;
    bool sasl_required;
} bad_inputs[] = {
    { "http", (const uint8_t *)"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27,
      KR_REFUSAL_WRONG_PROTOCOL, false },
    { "tls", (const uint8_t *)"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
      11, KR_REFUSAL_WRONG_PROTOCOL, false },
    { "oversized", (const uint8_t *)"\x00\x20\x00\x00\x00\x12\x00\x00", 8,
      KR_REFUSAL_OVERSIZED, false },
    { "negative", (const uint8_t *)"\xff\xff\xff\xf0\x00\x12\x00\x00", 8,
      KR_REFUSAL_MALFORMED, false },
    { "too short", (const uint8_t *)"\x00\x00\x00\x03\x01\x02\x03", 7,
      KR_REFUSAL_MALFORMED, false },
    { "bad ClientId", (const uint8_t *)"\x00\x00\x00\x0c\x00\x12\x00\x00"
      "\x00\x00\x00\x01\xff\xf0\x00\x00", 16, KR_REFUSAL_MALFORMED, false },
    /* SaslHandshake v1, CorrelationId 1, ClientId null, a Mechanism of
       100 bytes that are not there */
    { "SaslHandshake body", (const uint8_t *)"\x00\x00\x00\x0c\x00\x11"
      "\x00\x01\x00\x00\x00\x01\xff\xff\x00\x64", 16,
      KR_REFUSAL_UNDECODABLE, false },
    /* Metadata v0 (no topics) before SaslHandshake, sasl = required */
    { "before SASL", (const uint8_t *)"\x00\x00\x00\x0e\x00\x03\x00\x00"
      "\x00\x00\x00\x01\xff\xff\x00\x00\x00\x00", 18,
      KR_REFUSAL_UNEXPECTED, true },
};

/* frames_refused of every kind, summed. */
static uint64_t
refused_all(void)
{
    uint64_t n = 0;
    int k;

    for (k = 0; k < KR_REFUSAL__N; k++) {
        n += KR_STAT_GET_L(ST, frames_refused, k);
    }
    return n;
}

START_TEST(bad_input_closes_only_that_connection)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *good = NULL, *bad;
    bool sasl = bad_inputs[_i].sasl_required;

    if (sasl) {
        T.lc.sasl = KR_SASL_MODE_REQUIRED;
    }
    start();
    if (!sasl) {
        good = cli_open(boot_port(), 0);
        req_heartbeat(&req, 1);
        cli_send(good, req.b, req.n);
        expected_echo(&req, 0, &exp);
        cli_expect(good, &exp);
    }

    bad = cli_open(_i % 2 ? kr_daemon_port(T.p, 0, 0) : boot_port(), 0);
    cli_send(bad, bad_inputs[_i].bytes, bad_inputs[_i].len);
    ck_assert_msg(cli_wait_closed(bad), "%s: not closed",
                  bad_inputs[_i].name);
    ck_assert_uint_eq(evbuffer_get_length(bad->in), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT), 1);
    ck_assert_msg(KR_STAT_GET_L(ST, frames_refused, bad_inputs[_i].kind) ==
                      1 && refused_all() == 1,
                  "%s: frames_refused kind %d: %" PRIu64 " of %" PRIu64,
                  bad_inputs[_i].name, (int)bad_inputs[_i].kind,
                  KR_STAT_GET_L(ST, frames_refused, bad_inputs[_i].kind),
                  refused_all());
    ck_assert_uint_eq(T.fb.nreq, sasl ? 0 : 1);

    if (!sasl) {
        /* the good connection still works */
        cli_send(good, req.b, req.n);
        cli_expect(good, &exp);
        ck_assert(!good->closed);
        ck_assert_uint_eq(KR_STAT_GET(ST, conn_active), 1);
    }
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(backpressure)
{
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s;
    struct wait w = { 0 };
    struct cli *c;
    size_t most = 0, len;
    int i;

    T.fb.extra = (1 << 20) - 64;    /* responses of about 1 MiB */
    start();
    c = cli_open(boot_port(), 65536);
    for (i = 0; i < 24; i++) {
        req_heartbeat(&req, i);
    }
    cli_send(c, req.b, req.n);
    event_del(c->rev);          /* the client stops reading */
    fake_expect(&req);
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    while (s->up.reading && waiting(&w, progress())) {
        pump_once();
        len = evbuffer_get_length(s->client.out);
        most = len > most ? len : most;
    }
    ck_assert_msg(!s->up.reading, "krelay kept reading the upstream");
    /* the writes wait: a write event, made now */
    ck_assert_ptr_nonnull(s->client.wev);
    ck_assert(s->client.wev_on);
    for (i = 0; i < 30; i++) {
        pump_once();
        len = evbuffer_get_length(s->client.out);
        most = len > most ? len : most;
        ck_assert_uint_lt(evbuffer_get_length(s->up.in), 8);
    }
    ck_assert_uint_le(most, MAX_BUF + ONE_READ);
    ck_assert_uint_ge(most, MAX_BUF);
    /* the client reads again (with a normal buffer): everything arrives
       intact */
    i = 4 << 20;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &i, sizeof(i));
    event_add(c->rev, NULL);
    expected_echo(&req, T.fb.extra, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    /* kept once made (a client that was slow once may be again): not
       made and freed per write */
    ck_assert_ptr_nonnull(s->client.wev);
    ck_assert(!s->client.wev_on);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(backpressure_upstream)
{
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s = NULL;
    struct wait wt = { 0 };
    struct cli *c;
    size_t sent = 0, most = 0, len;
    ssize_t w;
    int i, j;

    T.fb.no_read = true;        /* the broker stops reading */
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 256; i++) {
        req_produce(&req, i, 1, 60000);     /* about 15 MiB */
    }
    /* write until the client cannot and krelay stopped reading it */
    while (sent < req.n && waiting(&wt, progress() + sent)) {
        w = write(c->fd, req.b + sent, req.n - sent);
        if (w > 0) {
            sent += (size_t)w;
        }
        pump_once();
        s = T.w->sessions;
        if (s != NULL) {
            len = evbuffer_get_length(s->up.out);
            most = len > most ? len : most;
            if (w < 0 && !s->client.reading) {
                break;
            }
        }
    }
    ck_assert_ptr_nonnull(s);
    ck_assert_msg(!s->client.reading, "krelay kept reading the client");
    ck_assert_uint_lt(sent, req.n);
    for (i = 0; i < 30; i++) {
        pump_once();
        len = evbuffer_get_length(s->up.out);
        most = len > most ? len : most;
    }
    ck_assert_uint_le(most, MAX_BUF + ONE_READ);
    ck_assert_uint_ge(most, MAX_BUF);
    /* the broker reads again: every byte arrives, in order */
    for (j = 0; j < T.fb.n; j++) {
        event_add(T.fb.c[j]->rev, NULL);
    }
    cli_send(c, req.b + sent, req.n - sent);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(max_inflight_stops_reading)
{
    struct bb req = { 0 }, exp = { 0 };
    struct wait w = { 0 }, w2 = { 0 };
    struct cli *c;
    int i;

    T.lc.max_inflight = 4;
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 10; i++) {
        req_heartbeat(&req, 100 + i);
    }
    cli_send(c, req.b, req.n);
    while (T.fb.nreq < 4 && waiting(&w, progress())) {
        pump_once();
    }
    for (i = 0; i < 50; i++) {
        pump_once();
    }
    ck_assert_int_eq(T.fb.nreq, 4);
    ck_assert(T.w->sessions->req_blocked);
    ck_assert(!T.w->sessions->client.reading);
    /* answers free slots: the rest flows, in order */
    fake_release(&T.fb);
    while (T.fb.nreq < 10 && waiting(&w2, progress())) {
        pump_once();
        if (evbuffer_get_length(T.fb.pending) > 0) {
            fake_release(&T.fb);
        }
    }
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(idle_timeout)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    T.lc.idle_timeout_ms = 150;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT), 0);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(request_timeout)
{
    struct bb req = { 0 };
    struct cli *c;

    T.uc.request_timeout_margin_ms = 100;
    T.fb.mode = FB_SILENT;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 1);
    free(req.b);
}
END_TEST

/*
 * issue 13: a client pipelines its raw PLAIN token (and a request after
 * it) behind SaslHandshake v0.  Whether raw tokens follow is known only
 * from the handshake's answer: krelay parses nothing more until then, so
 * the token goes as a token, never as a request that rules would judge,
 * and the request after it is read as a request.
 */
START_TEST(sasl_handshake_v0_pipelined)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    struct cli *c;
    size_t at;

    start();
    c = cli_open(boot_port(), 0);
    at = req_begin(&req, KR_API_SASL_HANDSHAKE, 0, 1);
    bstr(&req, "PLAIN");
    bend(&req, at);
    at = req.n;
    b32(&req, 0);
    bput(&req, "\0user\0secret", 12);
    bend(&req, at);
    req_heartbeat(&hb, 3);
    bput(&req, hb.b, hb.n);
    cli_send(c, req.b, req.n);
    at = exp.n;
    b32(&exp, 0);
    b32(&exp, 1);
    b16(&exp, 0);
    b32(&exp, 1);
    bstr(&exp, "PLAIN");
    bend(&exp, at);
    b32(&exp, 0);               /* empty token back */
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    fake_expect(&req);
    ck_assert(!c->closed);
    ck_assert(!T.w->sessions->want_rsp_first);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_tokens), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 2);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * One rule for a test, compiled into T.conf, on ApiKey api:
 * fault_latency_ms = ms, or with enforce throttle_ms = ms and
 * throttle_mode = enforce.  Freed by teardown.
 */
static void
rule_one(int16_t api, int32_t ms, bool enforce)
{
    static struct kr_rule_conf r;
    static int16_t apis[1];
    char err[128] = "";

    memset(&r, 0, sizeof(r));
    apis[0] = api;
    r.name = (char *)"lat";
    r.api = apis;
    r.napi = 1;
    r.versions_min = 0;
    r.versions_max = INT16_MAX;
    r.direction = KR_RDIR_BOTH;
    r.clamp_min_version = r.clamp_max_version = -1;
    r.throttle_ms = -1;
    r.deny_error = -1;
    r.fault_error = -1;
    r.fault_error_probability = 1;
    if (enforce) {
        r.throttle_ms = ms;
        r.throttle_mode = KR_THROTTLE_ENFORCE;
    } else {
        r.fault_latency_ms = ms;
    }
    T.conf.rules = &r;
    T.conf.nrules = 1;
    T.conf.ruleset = kr_rule_compile(&T.conf, err, sizeof(err));
    ck_assert_msg(T.conf.ruleset != NULL, "%s", err);
}

/*
 * issue 13: throttle enforce on a response krelay cannot decode (the
 * fake's echo is no DescribeGroups response: "RSP!" reads as a count of
 * 1.4 G groups) holds it for throttle_ms and delivers it unchanged,
 * instead of closing the connection.  _i 1: the response is also above
 * max_frame_bytes, too large to hold: it goes on at once, and the
 * client's next request waits the throttle time instead.
 */
START_TEST(throttle_enforce_undecodable)
{
    struct bb req = { 0 }, exp = { 0 };
    struct wait w = { 0 };
    struct cli *c;
    int64_t t0;
    size_t at;

    rule_one(KR_API_DESCRIBE_GROUPS, 200, true);
    T.fb.extra = _i == 1 ? MAX_FRAME + 1000 : 0;
    start();
    c = cli_open(boot_port(), 0);
    at = req_begin(&req, KR_API_DESCRIBE_GROUPS, 0, 1);
    b32(&req, 1);               /* Groups */
    bstr(&req, "g");
    bend(&req, at);
    expected_echo(&req, T.fb.extra, &exp);
    t0 = kr_clock_timer_ms();
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    if (_i == 1) {
        /* the second request is not even read before the time is up */
        cli_expect(c, &exp);
        exp.n = 0;
        req.n = 0;
        at = req_begin(&req, KR_API_DESCRIBE_GROUPS, 0, 2);
        b32(&req, 1);
        bstr(&req, "g");
        bend(&req, at);
        expected_echo(&req, T.fb.extra, &exp);
        cli_send(c, req.b, req.n);
    }
    while (!cli_has(c, exp.n) && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_int_ge(kr_clock_timer_ms() - t0, 200);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, frames_undecodable), _i == 1 ? 2 : 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 0);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * max_inflight reached, and the one response in flight is held by a rule
 * (fault latency): once it goes out, the requests waiting in client.in go
 * on, though no upstream read comes to unblock them (the rule timer
 * does).  Found by an adversarial pass: they waited for idle_timeout_ms.
 */
START_TEST(max_inflight_held_response_resumes)
{
    struct bb req = { 0 }, exp = { 0 };
    struct wait w = { 0 };
    struct cli *c;
    size_t at;
    int i;

    rule_one(KR_API_DESCRIBE_GROUPS, 100, false);
    T.lc.max_inflight = 1;
    start();
    c = cli_open(boot_port(), 0);
    for (i = 1; i <= 3; i++) {
        at = req_begin(&req, KR_API_DESCRIBE_GROUPS, 0, i);
        b32(&req, 1);           /* Groups */
        bstr(&req, "g");
        bend(&req, at);
    }
    expected_echo(&req, 0, &exp);
    cli_send(c, req.b, req.n);  /* pipelined: two wait behind the first */
    w.stall_ms = 5000;          /* 3 x 100 ms of latency, not 30 s */
    while (!cli_has(c, exp.n) && waiting(&w, progress())) {
        pump_once();
    }
    cli_expect(c, &exp);
    fake_expect(&req);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 3);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The answer to SaslHandshake v0 is held by a rule (fault latency) while
 * the client's raw token is already there: the token waits until the
 * answer went out, so its own answer never queues behind a held one.
 */
START_TEST(sasl_handshake_v0_held_answer)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    size_t at;

    rule_one(KR_API_SASL_HANDSHAKE, 50, false);
    start();
    c = cli_open(boot_port(), 0);
    at = req_begin(&req, KR_API_SASL_HANDSHAKE, 0, 1);
    bstr(&req, "PLAIN");        /* one raw token */
    bend(&req, at);
    at = req.n;
    b32(&req, 0);
    bput(&req, "\0user\0secret", 12);
    bend(&req, at);
    cli_send(c, req.b, req.n);
    at = exp.n;
    b32(&exp, 0);
    b32(&exp, 1);
    b16(&exp, 0);
    b32(&exp, 1);
    bstr(&exp, "PLAIN");
    bend(&exp, at);
    b32(&exp, 0);               /* empty token back */
    cli_expect(c, &exp);
    fake_expect(&req);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_tokens), 2);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(sasl_handshake_v0_raw_tokens)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    struct cli *c;
    size_t at;

    start();
    c = cli_open(boot_port(), 0);
    /* SaslHandshake v0 (the fake accepts any Mechanism) */
    at = req_begin(&req, KR_API_SASL_HANDSHAKE, 0, 1);
    bstr(&req, "PLAIN");
    bend(&req, at);
    cli_send(c, req.b, req.n);
    at = exp.n;
    b32(&exp, 0);
    b32(&exp, 1);
    b16(&exp, 0);
    b32(&exp, 1);
    bstr(&exp, "PLAIN");
    bend(&exp, at);
    cli_expect(c, &exp);
    /* PLAIN: one raw round trip, then Kafka frames again */
    ck_assert_int_eq(T.w->sessions->sasl.tokens, 1);
    /* a raw token: would be a bad header if parsed as a request */
    exp.n = 0;
    at = req.n;
    b32(&req, 0);
    bput(&req, "\0user\0secret", 12);
    bend(&req, at);
    cli_send(c, req.b + at, req.n - at);
    b32(&exp, 0);               /* empty token back */
    cli_expect(c, &exp);
    req_heartbeat(&hb, 3);
    bput(&req, hb.b, hb.n);
    cli_send(c, hb.b, hb.n);
    exp.n = 0;
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    fake_expect(&req);
    ck_assert(!c->closed);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_tokens), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 2);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * issue 9: SaslHandshake v0 naming GSSAPI, with no rule at all (_i 0) or
 * with a rule on SaslHandshake (_i 1: the rules path decodes it): krelay
 * could not count its raw tokens, so it answers UNSUPPORTED_SASL_MECHANISM
 * itself, listing the mechanisms it can follow over v0, with one notice
 * line; the broker never sees it, and Kafka framing goes on (a Heartbeat
 * pipelined behind it is forwarded and answered).
 */
START_TEST(sasl_handshake_v0_refused)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    struct cli *c;
    char *log;
    size_t at;

    if (_i == 1) {
        rule_one(KR_API_SASL_HANDSHAKE, 1, false);
    }
    log_capture();
    kr_log_level_cur = KR_LOG_NOTICE;
    start();
    c = cli_open(boot_port(), 0);
    at = req_begin(&req, KR_API_SASL_HANDSHAKE, 0, 7);
    bstr(&req, "GSSAPI");
    bend(&req, at);
    req_heartbeat(&hb, 8);
    bput(&req, hb.b, hb.n);
    cli_send(c, req.b, req.n);
    at = exp.n;
    b32(&exp, 0);
    b32(&exp, 7);
    b16(&exp, 33);              /* UNSUPPORTED_SASL_MECHANISM */
    b32(&exp, 3);
    bstr(&exp, "PLAIN");
    bstr(&exp, "SCRAM-SHA-256");
    bstr(&exp, "SCRAM-SHA-512");
    bend(&exp, at);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    fake_expect(&hb);           /* only the Heartbeat reached it */
    ck_assert(!c->closed);
    ck_assert_int_eq(T.w->sessions->sasl.auth, KR_SASL_AUTH_NONE);
    ck_assert_int_eq(T.w->sessions->sasl.tokens, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_tokens), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 2);
    log = log_text();
    ck_assert_msg(strstr(log, "127.0.0.1") != NULL &&
                  strstr(log, "SaslHandshake v0 CorrelationId 7 names SASL "
                         "mechanism GSSAPI, which krelay cannot follow "
                         "after a v0 handshake") != NULL &&
                  strstr(log, "answered UNSUPPORTED_SASL_MECHANISM") != NULL,
                  "log: %s", log);
    free(log);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * issue 9: a Kafka 0.9 client using GSSAPI sends a raw Kerberos token
 * first, with no SaslHandshake (RFC 2743 3.1: tag 0x60, then a DER length
 * and the Kerberos OID, where the ApiKey would be).  _i 0: as the first
 * frame, closed at once (its size promises more than was sent: not waited
 * for) with one line saying why.  _i 1: a well-formed frame with the
 * same unknown ApiKey after a Heartbeat is an unknown request as before
 * (no rules: forwarded).
 */
START_TEST(gssapi_raw_first_frame)
{
    static const uint8_t gss[] = {
        0x60, 0x82, 0x02, 0x5e, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7,
        0x12, 0x01, 0x02, 0x02, 0x01, 0x00, 0x6e, 0x82, 0x02, 0x4d, 0x30,
        0x82, 0x02, 0x49, 0xa0, 0x03, 0x02, 0x01, 0x05, 0xa1, 0x03
    };
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    char *log;
    size_t at;

    log_capture();
    kr_log_level_cur = KR_LOG_NOTICE;
    start();
    c = cli_open(boot_port(), 0);
    if (_i == 0) {
        b32(&req, 4 + 0x25e);   /* the whole token: more than is sent */
        bput(&req, gss, sizeof(gss));
        cli_send(c, req.b, req.n);
        ck_assert(cli_wait_closed(c));
        ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
        ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT), 1);
        ck_assert_uint_eq(KR_STAT_GET_L(ST, frames_refused,
                                        KR_REFUSAL_WRONG_PROTOCOL), 1);
        ck_assert_uint_eq(refused_all(), 1);
        ck_assert_uint_eq(evbuffer_get_length(T.fb.log), 0);
        log = log_text();
        ck_assert_msg(strstr(log, "127.0.0.1") != NULL &&
                      strstr(log, "first frame (60 82 02 5e after its size, "
                             "ApiKey 24706 unknown) looks like a raw GSSAPI "
                             "(Kerberos) token from a Kafka client older "
                             "than 0.10") != NULL, "log: %s", log);
        ck_assert_msg(strstr(log, "malformed") == NULL, "log: %s", log);
        free(log);
    } else {
        req_heartbeat(&req, 1);
        at = req_begin(&req, (int16_t)0x6082, 0, 2);
        bput(&req, gss + 4, 8);
        bend(&req, at);
        cli_send(c, req.b, req.n);
        expected_echo(&req, 0, &exp);
        cli_expect(c, &exp);
        fake_expect(&req);
        ck_assert(!c->closed);
        ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT), 0);
    }
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(metadata_rewritten)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    /* the rewrite advertises broker_port_base + NodeId: a real port */
    T.lc.broker_port_base = free_port();
    start();
    ck_assert_uint_eq(kr_daemon_port(T.p, 0, 0), T.lc.broker_port_base);
    c = cli_open(boot_port(), 0);
    req_metadata_all(&req, 9);
    cli_send(c, req.b, req.n);
    metadata_response(&exp, 9, 0, "127.0.0.1", kr_daemon_port(T.p, 0, 0));
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 1);
    /* held in the worker's buffer, which is empty and free again */
    ck_assert_ptr_nonnull(T.w->host.hold);
    ck_assert(!T.w->host.hold_busy);
    ck_assert_uint_eq(evbuffer_get_length(T.w->host.hold), 0);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The buffer a response is held in while looked at: the worker's, one
 * for all its sessions; a second taken while the first is out (a caller
 * up the stack) is one of its own, freed when given back.
 */
START_TEST(held_buffer_shared)
{
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s;
    struct evbuffer *a, *b;
    struct cli *c;

    c = three_echoed(&req, &exp);
    ck_assert(!c->closed);
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    a = kr_s_hold_take(s);
    ck_assert_ptr_eq(a, T.w->host.hold);
    ck_assert(T.w->host.hold_busy);
    b = kr_s_hold_take(s);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(b, a);
    ck_assert_int_eq(evbuffer_add(a, "abc", 3), 0);
    ck_assert_int_eq(evbuffer_add(b, "de", 2), 0);
    kr_s_hold_put(s, b);                /* freed (ASan/valgrind: no leak) */
    ck_assert(T.w->host.hold_busy);
    kr_s_hold_put(s, a);
    ck_assert(!T.w->host.hold_busy);
    ck_assert_uint_eq(evbuffer_get_length(T.w->host.hold), 0);
    ck_assert_ptr_eq(kr_s_hold_take(s), T.w->host.hold);
    kr_s_hold_put(s, T.w->host.hold);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(max_connections)
{
    struct bb req = { 0 }, exp = { 0 };
    struct wait w = { 0 };
    struct cli *a, *b;

    T.lc.max_connections = 1;
    start();
    a = cli_open(boot_port(), 0);
    while (KR_STAT_GET(ST, conn_accepted) < 1 &&
           waiting(&w, progress())) {
        pump_once();
    }
    b = cli_open(boot_port(), 0);
    ck_assert(cli_wait_closed(b));
    ck_assert_uint_eq(KR_STAT_GET(ST, conn_refused), 1);
    req_heartbeat(&req, 1);
    cli_send(a, req.b, req.n);
    expected_echo(&req, 0, &exp);
    cli_expect(a, &exp);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The PROXY protocol (issue 12): a trusted sender's header, fed in
 * pieces (case 0: whole with the first request, 1: byte by byte, 2: v2),
 * names the client; the broker sees the request alone; the session
 * carries the header's address and the proxy's.
 */
START_TEST(proxy_header)
{
    static const char v1[] = "PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n";
    static const uint8_t v2[] = {
        0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54,
        0x0a, 0x21, 0x21, 0x00, 0x24,
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x07,
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        0x10, 0x92, 0x23, 0x84
    };
    struct kr_cidr from = { AF_INET, 8, { 127 } };
    struct bb req = { 0 }, exp = { 0 };
    struct wait w = { 0 };
    struct kr_session *s;
    struct cli *c;
    char *log;
    size_t i;

    T.lc.proxy_protocol = _i == 2 ? KR_PP_V2 : KR_PP_ANY;
    T.lc.proxy_protocol_from = &from;
    T.lc.nproxy_protocol_from = 1;
    T.lc.proxy_protocol_timeout_ms = 5000;
    log_capture();
    kr_log_level_cur = KR_LOG_DEBUG;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    if (_i == 0) {
        uint8_t both[256];

        memcpy(both, v1, strlen(v1));
        memcpy(both + strlen(v1), req.b, req.n);
        cli_send(c, both, strlen(v1) + req.n);
    } else {
        const uint8_t *h = _i == 1 ? (const uint8_t *)v1 : v2;
        size_t hn = _i == 1 ? strlen(v1) : sizeof(v2);

        for (i = 0; i < hn; i++) {
            cli_send(c, h + i, 1);
            pump_once();
            if (i == hn - 2) {
                /* no upstream before the header is done */
                while (T.w->sessions == NULL && waiting(&w, progress())) {
                    pump_once();
                }
                ck_assert_ptr_nonnull(T.w->sessions);
                ck_assert_int_eq(T.w->sessions->client.stage,
                                 KR_STAGE_PROXY);
                ck_assert_int_lt(T.w->sessions->up.fd, 0);
                ck_assert_ptr_null(T.w->sessions->resolve);
            }
        }
        w.started = false;
        cli_send(c, req.b, req.n);
    }
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    fake_expect(&req);
    while ((s = T.w->sessions) == NULL && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_ptr_nonnull(s);
    ck_assert(s->proxied);
    ck_assert_ptr_null(s->pp);
    ck_assert_int_eq(s->client.stage, KR_STAGE_FRAMES);
    ck_assert_str_eq(s->peer_host, _i == 2 ? "2001:db8::7" : "203.0.113.7");
    ck_assert_uint_eq(s->peer_port, 4242);
    ck_assert_int_eq(s->peer.sa.sa_family, _i == 2 ? AF_INET6 : AF_INET);
    ck_assert_str_eq(s->proxy_host, "127.0.0.1");
    ck_assert_uint_ne(s->proxy_port, 0);
    ck_assert_ptr_nonnull(strstr(s->name, _i == 2 ? " [2001:db8::7]:4242 "
                                                  "via 127.0.0.1:"
                                                  : " 203.0.113.7:4242 via "
                                                    "127.0.0.1:"));
    ck_assert_uint_eq(KR_STAT_GET(ST, conn_proxy_untrusted), 0);
    log = log_text();
    ck_assert_msg(strstr(log, _i == 2 ? "PROXY protocol v2 header (PROXY, "
                                        "52 bytes)"
                                      : "PROXY protocol v1 header (PROXY, "
                                        "44 bytes)") != NULL, "%s", log);
    free(log);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * Refused: a peer outside proxy_protocol_from at accept (case 0); a
 * malformed header (1), a v1 header on a v2 listener (2), none within
 * proxy_protocol_timeout_ms (3, no upstream meanwhile), the end inside
 * one (4): one line each.
 */
START_TEST(proxy_refused)
{
    static const char *const send[] = {
        "PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n",
        "", "PROXY TCP4 203.0",
    };
    static const char *const want[] = {
        "127.0.0.1:", "PROXY protocol header refused (proxy_protocol = any): "
        "not a PROXY protocol header: starts \"G",
        "PROXY protocol header refused (proxy_protocol = v2): a v1 header "
        "where only v2 is accepted",
        "no complete PROXY protocol header within proxy_protocol_timeout_ms "
        "150 (0 bytes of it read)",
        "the connection ended inside its PROXY protocol header (16 bytes of "
        "it, v1)",
    };
    struct kr_cidr from[2] = { { AF_INET, 8, { 10 } },
                               { AF_INET6, 128, { 0 } } };
    struct kr_cidr lo = { AF_INET, 32, { 127, 0, 0, 1 } };
    struct cli *c;
    char *log;

    T.lc.proxy_protocol = _i == 2 ? KR_PP_V2 : KR_PP_ANY;
    T.lc.proxy_protocol_from = _i == 0 ? from : &lo;
    T.lc.nproxy_protocol_from = _i == 0 ? 2 : 1;
    T.lc.proxy_protocol_timeout_ms = 150;
    log_capture();
    start();
    c = cli_open(boot_port(), 0);
    if (send[_i][0] != '\0') {
        cli_send(c, send[_i], strlen(send[_i]));
    }
    if (_i == 4) {
        shutdown(c->fd, SHUT_WR);
    }
    if (_i == 3) {
        /* waiting for the header: no upstream yet */
        pump_once();
        ck_assert_ptr_nonnull(T.w->sessions);
        ck_assert_int_lt(T.w->sessions->up.fd, 0);
        ck_assert_ptr_null(T.w->sessions->resolve);
    }
    ck_assert(cli_wait_closed(c));
    ck_assert_ptr_null(T.w->sessions);
    ck_assert_uint_eq(KR_STAT_GET(ST, conn_proxy_untrusted), _i == 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, conn_accepted), _i != 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT),
                      _i == 1 || _i == 2 || _i == 4);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, frames_refused, KR_REFUSAL_MALFORMED),
                      _i == 1 || _i == 2 || _i == 4);
    ck_assert_uint_eq(refused_all(), _i == 1 || _i == 2 || _i == 4);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), _i == 3);
    log = log_text();
    ck_assert_msg(strstr(log, want[_i]) != NULL, "want \"%s\" in %s",
                  want[_i], log);
    if (_i == 0) {
        ck_assert_ptr_nonnull(strstr(log, "is not in proxy_protocol_from: "
                                          "closed at accept"));
    }
    free(log);
}
END_TEST

START_TEST(upstream_refuses)
{
    struct bb req = { 0 };
    struct cli *c;

    T.bs.port = free_port();    /* nobody listens there */
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 1);
    ck_assert_ptr_null(T.w->sessions);
    free(req.b);
}
END_TEST

START_TEST(upstream_closes_after_response)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    T.fb.mode = FB_CLOSE_AFTER;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 77);
    cli_send(c, req.b, req.n);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);        /* the response is delivered ... */
    ck_assert(cli_wait_closed(c));  /* ... then the connection closes */
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 1);
    free(req.b);
    free(exp.b);
}
END_TEST

START_TEST(stop_closes_everything)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    kr_daemon_stop(T.p);
    ck_assert_ptr_null(T.w->sessions);
    ck_assert_uint_eq(KR_STAT_GET(ST, conn_active), 0);
    ck_assert_uint_eq(kr_daemon_port(T.p, 0, KR_NODE_BOOTSTRAP), 0);
    ck_assert(cli_wait_closed(c));
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * A broker that answers Produce with Acks=0 (librdkafka's mock does):
 * the responses the client does not expect are dropped, the others pass
 * in order.  _i: the fake writes everything at once, or one byte at a
 * time (a dropped response split across reads).
 */
START_TEST(acks0_answered_dropped)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 }, more = { 0 };
    struct wait w = { 0 };
    struct cli *c;
    int k;

    T.fb.answer_acks0 = true;
    T.fb.chunk = _i == 0 ? 0 : 1;
    start();
    c = cli_open(boot_port(), 0);
    req_produce(&req, 1, 0, 100);
    req_heartbeat(&hb, 2);
    bput(&req, hb.b, hb.n);
    req_produce(&req, 3, 0, 50);
    req_produce(&req, 4, 0, 7);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    /* the two Acks=0 responses after the Heartbeat's: dropped, then a
       request that expects one */
    while (KR_STAT_GET(ST, responses_dropped) < 3 &&
           waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_dropped), 3);
    req_heartbeat(&more, 5);
    cli_send(c, more.b, more.n);
    exp.n = 0;
    expected_echo(&more, 0, &exp);
    cli_expect(c, &exp);
    for (k = 0; k < 20; k++) {
        event_base_loop(T.base, EVLOOP_NONBLOCK);
    }
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), 3);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 2);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 0);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert(T.w->sessions->acks0_answered);
    ck_assert(!T.w->sessions->acks0_silent);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    ck_assert_uint_eq(T.w->sessions->fifo.opt, 0);
    free(req.b);
    free(exp.b);
    free(hb.b);
    free(more.b);
}
END_TEST

/*
 * issue 13: more Produce requests with Acks=0 in flight than max_inflight
 * before the upstream has answered any (librdkafka's mock answers them):
 * the oldest are forgotten, and their answers, when they come, are
 * recognised and dropped instead of closing the connection as out of
 * order.  Once the upstream answered one, none is forgotten any more:
 * they count for max_inflight like any request.
 */
START_TEST(acks0_forgotten_answers)
{
    struct bb req = { 0 }, more = { 0 }, exp = { 0 }, hb = { 0 };
    char *log;
    struct wait w = { 0 };
    struct kr_session *s;
    struct cli *c;
    int i;

    T.lc.max_inflight = 4;
    T.fb.answer_acks0 = true;
    log_capture();
    kr_log_level_cur = KR_LOG_DEBUG;
    start();
    c = cli_open(boot_port(), 0);
    if (_i == 1) {
        /* a request that expects an answer at the head: past the limit
           new Acks=0 entries are not remembered at all, and their
           answers come when nothing waits */
        req_heartbeat(&hb, 100);
        bput(&req, hb.b, hb.n);
        expected_echo(&hb, 0, &exp);
        hb.n = 0;
    }
    for (i = 1; i <= 10; i++) {
        req_produce(&req, i, 0, 20);
    }
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    while (KR_STAT_GET(ST, responses_dropped) < 10 &&
           waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_dropped), 10);
    ck_assert(!c->closed);
    ck_assert_uint_eq(s->acks0_forgot, 0);
    ck_assert(s->acks0_answered);
    ck_assert(!s->acks0_silent);
    ck_assert_uint_eq(s->fifo.len, 0);
    /* answered from now on: 10 more are all kept, 4 at a time */
    for (i = 11; i <= 20; i++) {
        req_produce(&more, i, 0, 20);
    }
    bput(&req, more.b, more.n);
    cli_send(c, more.b, more.n);
    fake_expect(&req);
    memset(&w, 0, sizeof(w));
    while (KR_STAT_GET(ST, responses_dropped) < 20 &&
           waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_dropped), 20);
    ck_assert_uint_eq(s->acks0_forgot, 0);
    req_heartbeat(&hb, 21);
    cli_send(c, hb.b, hb.n);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), 20);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), _i == 1 ? 2 : 1);
    /* said once, whichever way the first answer came */
    log = log_text();
    ck_assert_msg(strstr(log, "answers Produce requests with Acks=0") !=
                  NULL, "log: %s", log);
    ck_assert_msg(strstr(strstr(log, "answers Produce requests") + 1,
                         "answers Produce requests") == NULL, "log: %s", log);
    free(log);
    kr_log_level_cur = KR_LOG_WARN;
    free(req.b);
    free(more.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * A fire-and-forget producer writes Acks=0 Produce requests and closes at
 * once, before krelay has even connected upstream: every byte must still
 * reach the broker, which sees an orderly end (EOF), and then the session
 * goes away without a warning.
 */
START_TEST(client_close_delivers_requests)
{
    struct bb req = { 0 };
    struct cli *c;
    int i;
    struct wait w = { 0 };

    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 20; i++) {
        req_produce(&req, i + 1, 0, 3000);
    }
    cli_send(c, req.b, req.n);
    ck_assert_int_eq(shutdown(c->fd, SHUT_WR), 0);
    fake_expect(&req);
    ck_assert(cli_wait_closed(c));
    while (T.w->sessions != NULL && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_ptr_null(T.w->sessions);
    /* the broker saw the end and closed its side (krelay's own metadata
       connection aside) */
    for (i = 0; i < T.fb.n; i++) {
        ck_assert(T.fb.c[i]->internal);
    }
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), 20);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    free(req.b);
}
END_TEST

/*
 * Kafka's behaviour (no response to Acks=0): an Acks=0 Produce on its own
 * waits for nothing (no request timeout), the next response skips it,
 * and from then on Acks=0 requests are not remembered at all.
 */
START_TEST(acks0_silent_skipped)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    struct kr_session *s;
    struct cli *c;
    int i;

    T.uc.request_timeout_margin_ms = 50;
    start();
    c = cli_open(boot_port(), 0);
    req_produce(&req, 1, 0, 100);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->fifo.len, 1);
    ck_assert_uint_eq(s->fifo.opt, 1);
    /* well past request_timeout_margin_ms: nothing is owed, no timeout */
    for (i = 0; i < 40; i++) {
        pump_once();
    }
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    req_heartbeat(&hb, 2);
    bput(&req, hb.b, hb.n);
    cli_send(c, hb.b, hb.n);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(s->acks0_silent);
    ck_assert_uint_eq(s->fifo.len, 0);
    ck_assert_uint_eq(s->fifo.opt, 0);
    /* known silent: the next Acks=0 Produce leaves no entry */
    hb.n = 0;
    req_produce(&hb, 3, 0, 10);
    bput(&req, hb.b, hb.n);
    cli_send(c, hb.b, hb.n);
    fake_expect(&req);
    ck_assert_uint_eq(s->fifo.len, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_dropped), 0);
    ck_assert(!c->closed);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * The client stops reading while Fetch-like requests are pipelined:
 * krelay stops reading the upstream (backpressure) and the request
 * timeout blames the client, not the upstream.
 */
START_TEST(timeout_client_not_reading)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;
    int i;
    struct wait w = { 0 };

    log_capture();
    T.uc.request_timeout_margin_ms = 100;
    T.fb.extra = (1 << 20) - 64;    /* responses of about 1 MiB */
    start();
    c = cli_open(boot_port(), 65536);
    for (i = 0; i < 24; i++) {
        req_heartbeat(&req, 100 + i);
    }
    cli_send(c, req.b, req.n);
    event_del(c->rev);          /* the client stops reading */
    fake_expect(&req);
    while (T.w->sessions != NULL && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_ptr_null(T.w->sessions);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_CLIENT), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    log = log_text();
    ck_assert_msg(strstr(log, "client is not reading its responses") !=
                  NULL, "log: %s", log);
    ck_assert_msg(strstr(log, "sent no response") == NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/* ---- issue 9: SASL passthrough ------------------------------------------ */

/* SaslHandshake v1 PLAIN and SaslAuthenticate v1 for user (PLAIN token
   "\0user\0pw"), CorrelationIds corr and corr + 1. */
static void
req_sasl_plain(struct bb *b, int32_t corr, const char *user)
{
    size_t at = req_begin(b, KR_API_SASL_HANDSHAKE, 1, corr);

    bstr(b, "PLAIN");
    bend(b, at);
    at = req_begin(b, KR_API_SASL_AUTHENTICATE, 1, corr + 1);
    b32(b, (int32_t)(strlen(user) + 4));
    bput(b, "\0", 1);
    bput(b, user, strlen(user));
    bput(b, "\0pw", 3);
    bend(b, at);
}

/* Frames (size prefixes) in the n bytes at p. */
static int
frames_in(const uint8_t *p, size_t n)
{
    size_t off = 0;
    int k = 0;

    while (off + 4 <= n) {
        off += 4 + (size_t)kr_frame_i32(p + off);
        k++;
    }
    return k;
}

/* The CorrelationId of frame k of c's input (responses). */
static int32_t
cli_corr(struct cli *c, int k)
{
    const uint8_t *p = evbuffer_pullup(c->in, -1);
    size_t off = 0, n = evbuffer_get_length(c->in);

    while (k-- > 0 && off + 4 <= n) {
        off += 4 + (size_t)kr_frame_i32(p + off);
    }
    ck_assert_uint_le(off + 8, n);
    return kr_frame_i32(p + off + 4);
}

/* [rule no-bob]: deny Produce to principal User:bob.  Freed by teardown
   (static). */
static void
rule_deny_bob(void)
{
    static struct kr_rule_conf r;
    static int16_t apis[1] = { KR_API_PRODUCE };
    static char *who[1] = { (char *)"User:bob" };
    char err[128] = "";

    memset(&r, 0, sizeof(r));
    r.name = (char *)"no-bob";
    r.api = apis;
    r.napi = 1;
    r.principal.v = who;
    r.principal.n = 1;
    r.versions_min = 0;
    r.versions_max = INT16_MAX;
    r.direction = KR_RDIR_BOTH;
    r.clamp_min_version = r.clamp_max_version = -1;
    r.throttle_ms = -1;
    r.deny = true;
    r.deny_error = -1;
    r.fault_error = -1;
    r.fault_error_probability = 1;
    T.conf.rules = &r;
    T.conf.nrules = 1;
    T.conf.ruleset = kr_rule_compile(&T.conf, err, sizeof(err));
    ck_assert_msg(T.conf.ruleset != NULL, "%s", err);
}

/*
 * A Produce pipelined behind SaslAuthenticate is held (never forwarded
 * while the broker has not answered) and judged once the broker answered,
 * with the principal then verified: bob's is denied by a rule on
 * User:bob, alice's goes on.
 */
START_TEST(sasl_held_then_judged)
{
    const char *user = _i == 0 ? "bob" : "alice";
    struct bb req = { 0 }, auth = { 0 };
    struct cli *c;

    rule_deny_bob();
    start();
    c = cli_open(boot_port(), 0);
    req_sasl_plain(&auth, 1, user);
    bput(&req, auth.b, auth.n);
    req_produce(&req, 3, 1, 10);
    T.fb.hold = true;           /* no answer yet */
    cli_send(c, req.b, req.n);
    fake_expect(&auth);         /* the two SASL steps, not the Produce */
    ck_assert_int_eq(T.w->sessions->sasl.inflight, 2);
    ck_assert_int_eq(T.w->sessions->sasl.pstate, KR_SASL_PS_CLAIMED);
    ck_assert_ptr_null(T.w->sessions->principal);
    ck_assert_int_eq(T.fb.nreq, 2);
    fake_release(&T.fb);
    ck_assert(cli_has(c, 1));
    {
        struct wait w = { 0 };

        while (frames_in(evbuffer_pullup(c->in, -1),
                         evbuffer_get_length(c->in)) < 3 &&
               !c->closed && waiting(&w, progress())) {
            pump_once();
        }
    }
    ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                               evbuffer_get_length(c->in)), 3);
    ck_assert_int_eq(cli_corr(c, 0), 1);
    ck_assert_int_eq(cli_corr(c, 1), 2);
    ck_assert_int_eq(cli_corr(c, 2), 3);
    ck_assert(!c->closed);
    ck_assert_str_eq(T.w->sessions->principal,
                     _i == 0 ? "User:bob" : "User:alice");
    ck_assert_int_eq(T.w->sessions->sasl.pstate, KR_SASL_PS_VERIFIED);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_successes), 1);
    /* bob's Produce never reached the broker; alice's did */
    ck_assert_int_eq(T.fb.nreq, _i == 0 ? 2 : 3);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, errors_answered,
                                    kr_stats_kerr_cell(
                                        KR_KERR_TOPIC_AUTHORIZATION_FAILED)),
                      _i == 0 ? 1 : 0);
    free(req.b);
    free(auth.b);
}
END_TEST

/*
 * A second SaslHandshake pipelined behind the first exchange's unanswered
 * steps (H1 A1(bob) H2 A2(alice) Produce): the broker authenticates bob
 * with A1 and answers H2 and A2 with ILLEGAL_SASL_STATE (KafkaApis, no
 * re-authentication), so the connection is bob's.  krelay must not let
 * H2 reset the exchange before A1's answer (it would take alice's claim
 * as verified and judge bob's Produce as alice's): H2 waits for the
 * answers, then is a re-authentication, and A2's other principal closes.
 */
START_TEST(sasl_handshake_pipelined)
{
    struct bb req = { 0 }, first = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    rule_deny_bob();
    start();
    c = cli_open(boot_port(), 0);
    req_sasl_plain(&first, 1, "bob");
    bput(&req, first.b, first.n);
    req_sasl_plain(&req, 3, "alice");
    req_produce(&req, 5, 1, 10);
    T.fb.hold = true;
    cli_send(c, req.b, req.n);
    fake_expect(&first);        /* H2 waits for the answers */
    ck_assert_int_eq(T.fb.nreq, 2);
    fake_release(&T.fb);
    ck_assert(cli_wait_closed(c));
    /* the broker never got alice's token nor the Produce */
    ck_assert(evbuffer_search(T.fb.log, "alice", 5, NULL).pos == -1);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_successes), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "SASL re-authentication (KIP-368) claims "
                         "another principal than User:bob") != NULL,
                  "log: %s", log);
    free(log);
    free(req.b);
    free(first.b);
}
END_TEST

/* A failed authentication: the answer reaches the client, then the close;
   the request held behind it never reaches the broker. */
START_TEST(sasl_failure_drops_held)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    T.fb.sasl_error = 58;       /* SASL_AUTHENTICATION_FAILED */
    start();
    c = cli_open(boot_port(), 0);
    req_sasl_plain(&req, 1, "bob");
    req_heartbeat(&req, 3);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                               evbuffer_get_length(c->in)), 2);
    ck_assert_int_eq(cli_corr(c, 1), 2);
    ck_assert_int_eq(T.fb.nreq, 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_failures), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "SASL PLAIN authentication failed for "
                         "User:bob (claimed): ErrorCode "
                         "SASL_AUTHENTICATION_FAILED") != NULL &&
                  strstr(log, "bytes the client sent behind it dropped")
                      != NULL, "log: %s", log);
    ck_assert_msg(strstr(log, "pw") == NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/* ---- issue 9: SASL termination ------------------------------------------- */

/* sasl = terminate on T.lc: alice and bob with password "pw" (the one
   req_sasl_plain sends), lifetime ms.  Freed by teardown. */
static void
term_listener(int64_t lifetime)
{
    static const enum kr_sasl_srv_mech all[] = {
        KR_SASL_SRV_PLAIN, KR_SASL_SRV_SCRAM_SHA_256,
        KR_SASL_SRV_SCRAM_SHA_512
    };
    const char *names[] = { "alice", "bob" };
    char text[1024] = "", err[128];
    struct kr_sasl_users *u;
    size_t i;

    for (i = 0; i < 2; i++) {
        struct kr_scram_cred c;
        const char *why = NULL;
        char *f;

        ck_assert(kr_scram_cred_make(&c, KR_SCRAM_SHA512,
                                     (const uint8_t *)"pw", 2, 4096, &why));
        f = kr_scram_cred_format(&c);
        ck_assert_ptr_nonnull(f);
        snprintf(text + strlen(text), sizeof(text) - strlen(text),
                 "%s SCRAM-SHA-512 %s\n", names[i], f);
        free(f);
        kr_scram_cred_wipe(&c);
    }
    u = kr_sasl_users_load_text(text, strlen(text), "users", err,
                                sizeof(err));
    ck_assert_msg(u != NULL, "%s", err);
    T.lc.sasl = KR_SASL_MODE_TERMINATE;
    T.lc.sasl_srv = kr_sasl_srv_cfg_new(all, 3, u, lifetime, 0, 0);
    ck_assert_ptr_nonnull(T.lc.sasl_srv);
}

/* The response frames c has read (waits for n of them, or a close). */
static int
cli_frames(struct cli *c, int n)
{
    struct wait w = { 0 };

    while (frames_in(evbuffer_pullup(c->in, -1),
                     evbuffer_get_length(c->in)) < n &&
           !c->closed && waiting(&w, progress())) {
        pump_once();
    }
    return frames_in(evbuffer_pullup(c->in, -1), evbuffer_get_length(c->in));
}

/*
 * sasl = terminate: krelay answers SaslHandshake and SaslAuthenticate
 * itself (the broker sees neither), in order with the rest; the Produce
 * pipelined behind them is judged with the principal verified at once:
 * bob's denied by the rule on User:bob, alice's forwarded.
 */
START_TEST(sasl_term_pipelined)
{
    const char *user = _i == 0 ? "bob" : "alice";
    struct bb req = { 0 };
    struct cli *c;

    rule_deny_bob();
    term_listener(0);
    start();
    c = cli_open(boot_port(), 0);
    req_sasl_plain(&req, 1, user);
    req_produce(&req, 3, 1, 10);
    cli_send(c, req.b, req.n);
    ck_assert_int_eq(cli_frames(c, 3), 3);
    ck_assert_int_eq(cli_corr(c, 0), 1);
    ck_assert_int_eq(cli_corr(c, 1), 2);
    ck_assert_int_eq(cli_corr(c, 2), 3);
    ck_assert(!c->closed);
    ck_assert_str_eq(T.w->sessions->principal,
                     _i == 0 ? "User:bob" : "User:alice");
    ck_assert_int_eq(T.w->sessions->sasl.pstate, KR_SASL_PS_VERIFIED);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_successes), 1);
    /* no SASL step reached the broker; alice's Produce did */
    ck_assert_int_eq(T.fb.nreq, _i == 0 ? 0 : 1);
    free(req.b);
}
END_TEST

/*
 * sasl = terminate behind a proxy (issue 12): the login rate is keyed by
 * the client the PROXY header names, not by the proxy's address (which
 * every client behind it shares).
 */
START_TEST(proxy_term_rate_key)
{
    static const char v1[] = "PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n";
    struct kr_cidr from = { AF_INET, 8, { 127 } };
    static const uint8_t want[4] = { 203, 0, 113, 7 };
    struct wait w = { 0 };
    struct kr_session *s;
    struct cli *c;

    term_listener(0);
    T.lc.proxy_protocol = KR_PP_V1;
    T.lc.proxy_protocol_from = &from;
    T.lc.nproxy_protocol_from = 1;
    T.lc.proxy_protocol_timeout_ms = 5000;
    start();
    c = cli_open(boot_port(), 0);
    while ((s = T.w->sessions) == NULL && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(s->sasl_srv);
    ck_assert_uint_eq(s->sasl_srv->addr_len, 4);
    ck_assert(memcmp(s->sasl_srv->addr, "\x7f\0\0\x01", 4) == 0);
    cli_send(c, v1, strlen(v1));
    w.started = false;
    while (s->client.stage == KR_STAGE_PROXY && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_int_eq(s->client.stage, KR_STAGE_SNIFF);
    ck_assert_uint_eq(s->sasl_srv->addr_len, 4);
    ck_assert(memcmp(s->sasl_srv->addr, want, 4) == 0);
    ck_assert_ptr_eq(s->sasl_srv->cfg, T.lc.sasl_srv);
    ck_assert(!s->sasl_srv->authenticated);
}
END_TEST

/* A wrong password: the answer (58), then the close; nothing behind it
   reaches the broker; one log line, no password.  A request before
   authentication closes too. */
START_TEST(sasl_term_refused)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    term_listener(0);
    start();
    c = cli_open(boot_port(), 0);
    if (_i == 0) {
        req_sasl_plain(&req, 1, "mallory");     /* no such user */
        req_heartbeat(&req, 3);
    } else {
        req_heartbeat(&req, 7);
    }
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                               evbuffer_get_length(c->in)), _i == 0 ? 2 : 0);
    ck_assert_int_eq(T.fb.nreq, 0);
    log = log_text();
    if (_i == 0) {
        ck_assert_int_eq(cli_corr(c, 1), 2);
        ck_assert_uint_eq(KR_STAT_GET(ST, sasl_failures), 1);
        ck_assert_msg(strstr(log, "SASL PLAIN authentication failed for "
                             "User:mallory: unknown user; closing after the "
                             "answer (SASL_AUTHENTICATION_FAILED)") != NULL,
                      "log: %s", log);
    } else {
        ck_assert_msg(strstr(log, "Heartbeat request before SASL "
                             "authentication (sasl = terminate") != NULL,
                      "log: %s", log);
    }
    ck_assert_msg(strstr(log, "pw") == NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/* sasl = required: a request before SaslHandshake closes, one line. */
START_TEST(sasl_required_gate)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    T.lc.sasl = KR_SASL_MODE_REQUIRED;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 7);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_int_eq(T.fb.nreq, 0);
    log = log_text();
    ck_assert_msg(strstr(log, "Heartbeat v0 request (CorrelationId 7) "
                         "before SASL authentication, on a listener with "
                         "sasl = required") != NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/* A SaslAuthenticate above 512 KiB (sasl.server.max.receive.size). */
START_TEST(sasl_receive_cap)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;
    size_t at, n = 600 * 1024;
    uint8_t *big = calloc(1, n);

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    start();
    c = cli_open(boot_port(), 0);
    at = req_begin(&req, KR_API_SASL_HANDSHAKE, 1, 1);
    bstr(&req, "PLAIN");
    bend(&req, at);
    at = req_begin(&req, KR_API_SASL_AUTHENTICATE, 1, 2);
    b32(&req, (int32_t)n);
    bput(&req, big, n);
    bend(&req, at);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    /* the broker got the handshake at most, never the token */
    ck_assert_uint_lt(evbuffer_get_length(T.fb.log), 64);
    log = log_text();
    ck_assert_msg(strstr(log, "SaslAuthenticate v1 request of 614419 bytes "
                         "before SASL authentication is done: above 524288")
                  != NULL, "log: %s", log);
    free(log);
    free(big);
    free(req.b);
}
END_TEST

/* No answer within sasl_auth_timeout_ms: closed, one line. */
START_TEST(sasl_auth_timeout)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    T.lc.sasl_auth_timeout_ms = 100;
    start();
    c = cli_open(boot_port(), 0);
    req_sasl_plain(&req, 1, "alice");
    T.fb.hold = true;
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "SASL PLAIN authentication not done within "
                         "sasl_auth_timeout_ms 100 (2 steps in flight)")
                  != NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/* Connections krelay opened to the fake broker for clients (its own
   metadata connection's not counted). */
static int
fake_client_conns(void)
{
    int i, n = 0;

    for (i = 0; i < T.fb.n; i++) {
        n += !(T.fb.c[i]->decided && T.fb.c[i]->internal);
    }
    return n;
}

/* The metadata connection's held ApiVersions answer goes out. */
static void
fake_release_internal(void)
{
    int i;

    T.fb.hold_internal = false;
    for (i = 0; i < T.fb.n && T.fb.ipending != NULL; i++) {
        if (T.fb.c[i] == T.fb.iconn) {
            evbuffer_add_buffer(T.fb.c[i]->out, T.fb.ipending);
            fconn_flush(T.fb.c[i]);
        }
    }
}

/* ApiVersions v2 (empty body). */
static void
req_apiversions(struct bb *b, int32_t corr)
{
    size_t at = req_begin(b, KR_API_API_VERSIONS, 2, corr);

    bend(b, at);
}

/* Run the event loop for ms milliseconds of wall clock. */
static void
pump_for(int64_t ms)
{
    int64_t end = mono_ms() + ms;

    while (mono_ms() < end) {
        pump_once();
    }
}

/* Response frame k of c's input after its CorrelationId: *len bytes. */
static const uint8_t *
cli_body(struct cli *c, int k, size_t *len)
{
    const uint8_t *p = evbuffer_pullup(c->in, -1);
    size_t off = 0, n = evbuffer_get_length(c->in);

    while (k-- > 0 && off + 4 <= n) {
        off += 4 + (size_t)kr_frame_i32(p + off);
    }
    ck_assert_uint_le(off + 8, n);
    *len = (size_t)kr_frame_i32(p + off) - 4;
    ck_assert_uint_le(off + 8 + *len, n);
    return p + off + 8;
}

/* The range of ApiKey key in an ApiVersions v2 response body (b, len);
   false when absent. */
static bool
av_range(const uint8_t *b, size_t len, int16_t key, int *lo, int *hi)
{
    int32_t n, i;

    ck_assert_uint_ge(len, 10);
    ck_assert_int_eq(kr_frame_i16(b), 0);       /* ErrorCode */
    n = kr_frame_i32(b + 2);
    ck_assert_uint_eq(len, 6 + (size_t)n * 6 + 4);
    for (i = 0; i < n; i++) {
        if (kr_frame_i16(b + 6 + i * 6) == key) {
            *lo = kr_frame_i16(b + 6 + i * 6 + 2);
            *hi = kr_frame_i16(b + 6 + i * 6 + 4);
            return true;
        }
    }
    return false;
}

/*
 * sasl = terminate: no broker connection before the login.  A client
 * that sends nothing and one that sends ApiVersions cost none; the
 * ApiVersions waits while krelay's metadata connection has not learned
 * the cluster's ranges, then krelay answers it with them, as the
 * forwarded answer after the login says; then the upstream connects and
 * a Produce flows.
 */
START_TEST(sasl_term_no_upstream_before_login)
{
    struct bb req = { 0 };
    const uint8_t *pre, *post;
    size_t npre, npost;
    struct cli *c;
    int lo, hi;

    term_listener(0);
    T.fb.answer_av = true;
    T.fb.hold_internal = true;
    start();
    (void)cli_open(boot_port(), 0);             /* sends nothing */
    c = cli_open(boot_port(), 0);
    req_apiversions(&req, 1);
    cli_send(c, req.b, req.n);
    {
        struct wait w = { 0 };

        while ((T.fb.ipending == NULL ||
                evbuffer_get_length(T.fb.ipending) == 0) &&
               waiting(&w, progress())) {
            pump_once();
        }
    }
    pump_for(200);
    /* the cluster's ranges are not known yet: no answer, no guess */
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert(!c->closed);
    fake_release_internal();
    ck_assert_int_eq(cli_frames(c, 1), 1);
    ck_assert_int_eq(cli_corr(c, 0), 1);
    ck_assert_int_eq(fake_client_conns(), 0);
    ck_assert_int_eq(T.fb.nreq, 0);
    pre = cli_body(c, 0, &npre);
    ck_assert(av_range(pre, npre, KR_API_PRODUCE, &lo, &hi));
    ck_assert_int_eq(lo, 0);                    /* KAFKA-18659 */
    ck_assert_int_eq(hi, 11);
    ck_assert(av_range(pre, npre, KR_API_METADATA, &lo, &hi));
    ck_assert_int_eq(hi, kr_api_get(KR_API_METADATA)->valid.hi);
    ck_assert(av_range(pre, npre, KR_API_SASL_HANDSHAKE, &lo, &hi));
    ck_assert_int_eq(lo * 10 + hi, 1);
    ck_assert(av_range(pre, npre, KR_API_SASL_AUTHENTICATE, &lo, &hi));
    ck_assert_int_eq(lo * 10 + hi, 2);
    ck_assert(av_range(pre, npre, 60, &lo, &hi));
    ck_assert(!av_range(pre, npre, KR_API_FIND_COORDINATOR, &lo, &hi));
    /* the login, ApiVersions again (forwarded now), a Produce */
    req.n = 0;
    req_sasl_plain(&req, 2, "alice");
    req_apiversions(&req, 4);
    req_produce(&req, 5, 1, 10);
    cli_send(c, req.b, req.n);
    ck_assert_int_eq(cli_frames(c, 5), 5);
    ck_assert_int_eq(cli_corr(c, 3), 4);
    ck_assert_int_eq(cli_corr(c, 4), 5);
    ck_assert(!c->closed);
    ck_assert_int_eq(fake_client_conns(), 1);
    ck_assert_int_eq(T.fb.nreq, 2);             /* ApiVersions, Produce */
    pre = cli_body(c, 0, &npre);
    post = cli_body(c, 3, &npost);
    ck_assert_uint_eq(npre, npost);
    ck_assert(memcmp(pre, post, npre) == 0);
    free(req.b);
}
END_TEST

/*
 * sasl = terminate: an ApiVersions with a negative version before the
 * login is not queued for the broker (to go out after the login, its
 * client waiting till the deadline meanwhile): closed at once, one line.
 */
START_TEST(sasl_term_apiversions_negative)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    term_listener(0);
    T.fb.answer_av = true;
    start();
    c = cli_open(boot_port(), 0);
    bend(&req, req_begin(&req, KR_API_API_VERSIONS, -1, 5));
    req_sasl_plain(&req, 6, "alice");
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert_int_eq(fake_client_conns(), 0);
    ck_assert_int_eq(T.fb.nreq, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_successes), 0);
    log = log_text();
    ck_assert_msg(strstr(log, "ApiVersions v-1 request before SASL "
                         "authentication") != NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/*
 * sasl = terminate: a client that pipelines ApiVersions before its login
 * and reads none of the answers.  krelay stops reading it once its
 * answers fill client.out (max_buffer_bytes) instead of holding ~30
 * times the client's bytes until the login deadline; once the client
 * reads, every request is answered, in order.
 */
START_TEST(sasl_term_unread_answers)
{
    struct bb req = { 0 };
    struct wait w = { 0 };
    struct cli *c;
    size_t one, sent = 0, most = 0, owed = 0, n;
    int i, nreq = 300000, whole;

    term_listener(0);
    /* not the login deadline's test: under valgrind the writes below
       take longer than the default 10 s */
    T.lc.sasl_auth_timeout_ms = 600000;
    T.fb.answer_av = true;
    start();
    c = cli_open(boot_port(), 4096);
    event_del(c->rev);                          /* reads nothing */
    req_apiversions(&req, 0);
    one = req.n;
    for (i = 1; i < nreq; i++) {
        req_apiversions(&req, i);
    }
    w.stall_ms = 300;
    while (sent < req.n && waiting(&w, sent)) {
        ssize_t k = write(c->fd, req.b + sent, req.n - sent);

        if (k > 0) {
            sent += (size_t)k;
        }
        pump_once();
        if (T.w->sessions != NULL) {
            n = evbuffer_get_length(T.w->sessions->client.out);
            most = n > most ? n : most;
            n = T.w->sessions->fifo.len;
            owed = n > owed ? n : owed;
        }
    }
    pump_for(100);
    ck_assert(!c->closed);
    n = evbuffer_get_length(T.w->sessions->client.out);
    most = n > most ? n : most;
    /* below max_buffer_bytes, then one answer more at most */
    ck_assert_msg(most <= MAX_BUF + 4096, "krelay held %zu bytes of answers "
                  "for a client that reads none (max_buffer_bytes %d; %zu "
                  "request bytes sent)", most, MAX_BUF, sent);
    /* the client reads: every whole request sent is answered, in order */
    event_add(c->rev, NULL);
    whole = (int)(sent / one);
    memset(&w, 0, sizeof(w));
    for (i = 0; i < whole && waiting(&w, (uint64_t)i);) {
        size_t have = evbuffer_get_length(c->in);
        const uint8_t *p = evbuffer_pullup(c->in, have < 8 ? -1 : 8);

        if (have >= 8 && have >= 4 + (size_t)kr_frame_i32(p)) {
            ck_assert_int_eq(kr_frame_i32(p + 4), i);
            evbuffer_drain(c->in, 4 + (size_t)kr_frame_i32(p));
            i++;
            continue;
        }
        ck_assert(!c->closed);
        pump_once();
    }
    ck_assert_int_eq(i, whole);
    ck_assert(!c->closed);
    ck_assert_int_eq(fake_client_conns(), 0);
    free(req.b);
}
END_TEST

/*
 * The login's deadline counts from the accept on sasl = terminate and
 * required listeners: a client that sends nothing (0, 3), or only
 * ApiVersions (1: answered; 2: the cluster's ranges never known, not
 * answered), is closed at sasl_auth_timeout_ms, one line, no broker
 * connection (terminate).  Passthrough (4) keeps it.
 */
START_TEST(sasl_login_timeout)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    if (_i <= 2) {
        term_listener(0);
    } else if (_i == 3) {
        T.lc.sasl = KR_SASL_MODE_REQUIRED;
    }
    T.lc.sasl_auth_timeout_ms = 100;
    T.fb.answer_av = _i == 1;
    start();
    c = cli_open(boot_port(), 0);
    if (_i == 1 || _i == 2) {
        req_apiversions(&req, 1);
        cli_send(c, req.b, req.n);
    }
    if (_i == 4) {
        pump_for(300);
        ck_assert(!c->closed);
        ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
        free(req.b);
        return;
    }
    ck_assert(cli_wait_closed(c));
    ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                               evbuffer_get_length(c->in)), _i == 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 1);
    if (_i <= 2) {
        ck_assert_int_eq(fake_client_conns(), 0);
    }
    log = log_text();
    ck_assert_msg(strstr(log, _i <= 2
                         ? "no SASL authentication within "
                           "sasl_auth_timeout_ms 100 of connecting (sasl = "
                           "terminate"
                         : "no SASL authentication within "
                           "sasl_auth_timeout_ms 100 of connecting (sasl = "
                           "required") != NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/*
 * sasl = terminate before the login: a SaslAuthenticate (_i 0) or a raw
 * token after SaslHandshake v0 (_i 1) above 512 KiB (Kafka's
 * sasl.server.max.receive.size) closes, one line, nothing upstream.
 * After the login, sasl_session_lifetime_ms 500: once it ran out a
 * request that does not start re-authentication closes (_i 2); a
 * SaslHandshake re-authenticates (same user), and requests go on (_i 3).
 */
START_TEST(sasl_term_cap_expiry)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;
    size_t at, n = 600 * 1024;
    uint8_t *big = calloc(1, n);

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    term_listener(_i >= 2 ? 500 : 0);
    start();
    c = cli_open(boot_port(), 0);
    if (_i == 0) {
        at = req_begin(&req, KR_API_SASL_HANDSHAKE, 1, 1);
        bstr(&req, "PLAIN");
        bend(&req, at);
        at = req_begin(&req, KR_API_SASL_AUTHENTICATE, 1, 2);
        b32(&req, (int32_t)n);
        bput(&req, big, n);
        bend(&req, at);
        cli_send(c, req.b, req.n);
    } else if (_i == 1) {
        at = req_begin(&req, KR_API_SASL_HANDSHAKE, 0, 1);
        bstr(&req, "PLAIN");
        bend(&req, at);
        cli_send(c, req.b, req.n);
        ck_assert_int_eq(cli_frames(c, 1), 1);  /* raw tokens follow */
        req.n = 0;
        at = req.n;
        b32(&req, 0);
        bput(&req, big, n);
        bend(&req, at);
        cli_send(c, req.b, req.n);
    } else {
        /* the Heartbeat after the answers: the lifetime runs from
           before the password check, slow under sanitizers */
        req_sasl_plain(&req, 1, "alice");
        cli_send(c, req.b, req.n);
        ck_assert_int_eq(cli_frames(c, 2), 2);
        req.n = 0;
        req_heartbeat(&req, 3);
        cli_send(c, req.b, req.n);
        ck_assert_int_eq(cli_frames(c, 3), 3);
        ck_assert_int_eq(cli_corr(c, 2), 3);
        evbuffer_drain(c->in, evbuffer_get_length(c->in));
        pump_for(600);          /* the 500 ms session ran out */
        req.n = 0;
        if (_i == 3) {
            req_sasl_plain(&req, 5, "alice");
        }
        req_heartbeat(&req, 7);
        cli_send(c, req.b, req.n);
    }
    if (_i == 3) {
        ck_assert_int_eq(cli_frames(c, 3), 3);
        ck_assert_int_eq(cli_corr(c, 2), 7);
        ck_assert(!c->closed);
        ck_assert_uint_eq(KR_STAT_GET(ST, sasl_successes), 2);
        ck_assert_int_eq(T.fb.nreq, 2);         /* the two Heartbeats */
        free(big);
        free(req.b);
        return;
    }
    ck_assert(cli_wait_closed(c));
    log = log_text();
    if (_i <= 1) {
        /* krelay answered the handshake at most; no broker connection */
        ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                                   evbuffer_get_length(c->in)), _i);
        ck_assert_int_eq(fake_client_conns(), 0);
        ck_assert_msg(strstr(log, _i == 0
                             ? "SaslAuthenticate request of 614419 bytes "
                               "before SASL authentication is done: above "
                               "524288"
                             : "SASL token frame of 614400 bytes: above "
                               "524288") != NULL, "log: %s", log);
    } else {
        ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                                   evbuffer_get_length(c->in)), 0);
        ck_assert_int_eq(T.fb.nreq, 1);         /* Heartbeat 7 never */
        ck_assert_msg(strstr(log, "Heartbeat request after the SASL session "
                             "lifetime (sasl_session_lifetime_ms 500) ran "
                             "out without re-authentication") != NULL,
                      "log: %s", log);
    }
    free(log);
    free(big);
    free(req.b);
}
END_TEST

/*
 * KIP-368: re-authentication with a request in flight passes (the
 * request's answer comes, a request behind the new SaslAuthenticate is
 * held until its answer); another principal closes.
 */
START_TEST(sasl_reauth)
{
    struct bb req = { 0 }, seen = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    start();
    c = cli_open(boot_port(), 0);
    req_sasl_plain(&req, 1, "alice");
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    bput(&seen, req.b, req.n);
    ck_assert(cli_has(c, 1));
    while (frames_in(evbuffer_pullup(c->in, -1),
                     evbuffer_get_length(c->in)) < 2) {
        ck_assert(cli_has(c, evbuffer_get_length(c->in) + 1));
    }
    ck_assert_str_eq(T.w->sessions->principal, "User:alice");
    evbuffer_drain(c->in, evbuffer_get_length(c->in));
    /* in flight: Heartbeat 10; re-authentication 11-12; Heartbeat 13 */
    req.n = 0;
    T.fb.hold = true;
    req_heartbeat(&req, 10);
    req_sasl_plain(&req, 11, "alice");
    bput(&seen, req.b, req.n);
    req_heartbeat(&req, 13);
    cli_send(c, req.b, req.n);
    fake_expect(&seen);         /* 13 held */
    fake_release(&T.fb);
    {
        struct wait w = { 0 };

        while (frames_in(evbuffer_pullup(c->in, -1),
                         evbuffer_get_length(c->in)) < 4 &&
               !c->closed && waiting(&w, progress())) {
            pump_once();
        }
    }
    ck_assert_int_eq(frames_in(evbuffer_pullup(c->in, -1),
                               evbuffer_get_length(c->in)), 4);
    ck_assert_int_eq(cli_corr(c, 3), 13);
    ck_assert_int_eq(T.fb.nreq, 6);
    ck_assert_uint_eq(KR_STAT_GET(ST, sasl_successes), 2);
    evbuffer_drain(c->in, evbuffer_get_length(c->in));
    /* as mallory: closed */
    req.n = 0;
    req_sasl_plain(&req, 21, "mallory");
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    /* the broker never got mallory's token (at most the handshake) */
    ck_assert(evbuffer_search(T.fb.log, "mallory", 7, NULL).pos == -1);
    log = log_text();
    ck_assert_msg(strstr(log, "SASL re-authentication (KIP-368) claims "
                         "another principal than User:alice") != NULL,
                  "log: %s", log);
    free(log);
    free(req.b);
    free(seen.b);
}
END_TEST

/* A raw SASL token that gets no answer is named as one. */
START_TEST(timeout_sasl_token)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    char *log;
    size_t at;

    log_capture();
    T.uc.request_timeout_margin_ms = 100;
    start();
    c = cli_open(boot_port(), 0);
    at = req_begin(&req, KR_API_SASL_HANDSHAKE, 0, 1);
    bstr(&req, "PLAIN");
    bend(&req, at);
    cli_send(c, req.b, req.n);
    at = exp.n;
    b32(&exp, 0);
    b32(&exp, 1);
    b16(&exp, 0);
    b32(&exp, 1);
    bstr(&exp, "PLAIN");
    bend(&exp, at);
    cli_expect(c, &exp);
    T.fb.mode = FB_SILENT;      /* the token gets no answer */
    req.n = 0;
    b32(&req, 0);
    bput(&req, "\0user\0secret", 12);
    bend(&req, 0);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "sent no response to a SASL token") != NULL,
                  "log: %s", log);
    ck_assert_msg(strstr(log, "Produce") == NULL, "log: %s", log);
    free(log);
    free(req.b);
    free(exp.b);
}
END_TEST

/* A negative NodeId (not -1) is the broker's error, not the config's. */
/*
 * Issue 4: plaintext pass-through copies no forwarded byte in user space
 * (stats.copied_bytes, counted by move_bytes, is 0).  20 Produce
 * requests of 256 KiB of records each (echoed back: responses of the
 * same size, cut-through) and a Fetch v11 (not held for rewriting) whose
 * response carries 1 MiB, through a client with a 64 KiB receive buffer
 * that stops reading for a while before each response.  One frame is in
 * flight at a time, so every read krelay makes ends inside a frame or at
 * its end: there is no frame boundary for libevent to split either.
 */
START_TEST(pass_through_zero_copy)
{
    struct bb all = { 0 }, one = { 0 }, exp = { 0 };
    struct cli *c;
    size_t at;
    int i, k;

    ck_assert(!kr_rewrite_wants(KR_API_FETCH, 11));
    ck_assert(!kr_rewrite_wants(KR_API_PRODUCE, 3));
    start();
    c = cli_open(boot_port(), 65536);
    for (i = 0; i <= 20; i++) {
        one.n = 0;
        exp.n = 0;
        if (i < 20) {
            T.fb.extra = 0;
            req_produce(&one, 100 + i, 1, 256 * 1024);
        } else {
            /* Fetch v11: ReplicaId, MaxWaitMs, MinBytes, MaxBytes,
               IsolationLevel, SessionId, SessionEpoch, Topics [],
               ForgottenTopicsData [], RackId */
            T.fb.extra = (1 << 20) - 256;
            at = req_begin(&one, KR_API_FETCH, 11, 100 + i);
            b32(&one, -1);
            b32(&one, 500);
            b32(&one, 1);
            b32(&one, 1 << 20);
            bput(&one, "", 1);
            b32(&one, 0);
            b32(&one, -1);
            b32(&one, 0);
            b32(&one, 0);
            bstr(&one, "");
            bend(&one, at);
        }
        bput(&all, one.b, one.n);
        event_del(c->rev);      /* the client does not read for a while */
        cli_send(c, one.b, one.n);
        for (k = 0; k < 20; k++) {
            pump_once();
        }
        event_add(c->rev, NULL);
        expected_echo(&one, T.fb.extra, &exp);
        cli_expect(c, &exp);
    }
    fake_expect(&all);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 21);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 21);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    ck_assert_uint_ge(KR_STAT_GET(ST, upstream_to_client_bytes),
                      20 * 256 * 1024 + (1 << 20) - 256);
    ck_assert_uint_eq(KR_STAT_GET(ST, copied_bytes), 0);
    free(all.b);
    free(one.b);
    free(exp.b);
}
END_TEST

START_TEST(metadata_negative_node_id)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    T.fb.md_node = -5;
    start();
    c = cli_open(boot_port(), 0);
    req_metadata_all(&req, 9);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "NodeId -5") != NULL, "log: %s", log);
    ck_assert_msg(strstr(log, "cannot be negative") != NULL, "log: %s", log);
    ck_assert_msg(strstr(log, "widen") == NULL, "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/* tcp_nodelay: TCP_NODELAY on the accepted client socket, or not. */
START_TEST(client_tcp_nodelay)
{
    struct bb req = { 0 };
    struct cli *c;
    int on = -1;
    socklen_t len = sizeof(on);

    T.lc.tcp_nodelay = _i == 1;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_int_eq(getsockopt(T.w->sessions->client.fd, IPPROTO_TCP,
                                TCP_NODELAY, &on, &len), 0);
    ck_assert_int_eq(on != 0, _i == 1);
    free(req.b);
}
END_TEST

/* ---- streamed responses (Fetch v16, KIP-951 NodeEndpoints) --------------- */

/* Fetch v16 request frame (codec-built body, header v2). */
static void
req_fetch_ver(struct bb *b, int32_t corr, int16_t ver)
{
    const struct kr_api_desc *a = kr_api_get(KR_API_FETCH);
    struct kr_arena ar;
    struct kr_node *body;
    struct kr_wbuf w;
    size_t at = req_begin(b, KR_API_FETCH, ver, corr);
    uint8_t zero = 0;

    if (kr_api_flexible(a, ver)) {
        bput(b, &zero, 1);              /* header tagged fields */
    }
    kr_arena_init(&ar, 0);
    body = kr_node_new(&ar, kr_api_root(a, false, ver), ver);
    ck_assert_ptr_nonnull(body);
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(kr_encode_struct(body, ver, kr_api_flexible(a, ver), &w,
                                      NULL), KR_OK);
    ck_assert_uint_eq(w.nrecs, 0);
    bput(b, w.buf, w.len);
    kr_wbuf_free(&w);
    kr_arena_free(&ar);
    bend(b, at);
}

static void
req_fetch16(struct bb *b, int32_t corr)
{
    req_fetch_ver(b, corr, 16);
}

/*
 * A Fetch v16 response frame (with its size prefix) to CorrelationId
 * corr: nparts partitions with rlen record bytes each (a pattern),
 * NodeEndpoints NodeId 0 at host:port when host is not NULL.  bad: a
 * Partitions count varint that makes the array null, which it may not
 * be.
 */
static void
rsp_fetch_ver(struct bb *out, int16_t ver, int32_t corr, size_t rlen,
              uint32_t nparts, const char *host, int32_t port, bool bad)
{
    static const uint8_t uuid[16] = { 0x42, 1, 2, 3 };
    const struct kr_api_desc *a = kr_api_get(KR_API_FETCH);
    struct kr_arena ar;
    struct kr_msg m;
    struct kr_node *t, *pt, *ep;
    struct kr_array *parts;
    struct kr_val *v;
    struct kr_wbuf w;
    uint8_t *recs = malloc(rlen * nparts), *flat;
    size_t i, at = out->n;
    uint32_t k;

    for (i = 0; i < rlen * nparts; i++) {
        recs[i] = (uint8_t)(i * 7 + (i >> 9));
    }
    kr_arena_init(&ar, 0);
    memset(&m, 0, sizeof(m));
    m.dir = KR_DIR_RESPONSE;
    m.api_key = KR_API_FETCH;
    m.api_version = ver;
    m.hdr_version = kr_response_header_version(KR_API_FETCH, ver);
    m.header = kr_node_new(&ar, kr_response_header_struct, m.hdr_version);
    kr_node_get(m.header, "CorrelationId")->u.i = corr;
    m.body = kr_node_new(&ar, kr_api_root(a, true, ver), ver);
    kr_node_get(m.body, "SessionId")->u.i = 99;
    v = kr_node_get(m.body, "Responses");
    v->u.arr = kr_array_new(&ar, KR_T_STRUCT,
                            kr_node_field(m.body, (unsigned)
                                kr_struct_field_index(m.body->struct_id,
                                                      "Responses"))->struct_id,
                            1, 16);
    t = v->u.arr->items[0].u.node;
    if (ver >= 13) {
        kr_node_get(t, "TopicId")->u.s.p = uuid;
        kr_node_get(t, "TopicId")->u.s.len = 16;
    } else {
        kr_node_get(t, "Topic")->u.s.p = (const uint8_t *)"orders";
        kr_node_get(t, "Topic")->u.s.len = 6;
    }
    v = kr_node_get(t, "Partitions");
    v->u.arr = kr_array_new(&ar, KR_T_STRUCT,
                            kr_node_field(t, (unsigned)
                                kr_struct_field_index(t->struct_id,
                                                      "Partitions"))->struct_id,
                            nparts, 16);
    parts = v->u.arr;
    for (k = 0; k < nparts; k++) {
        pt = parts->items[k].u.node;
        kr_node_get(pt, "PartitionIndex")->u.i = (int64_t)k;
        kr_node_get(pt, "HighWatermark")->u.i = 777;
        v = kr_node_get(pt, "Records");
        v->is_null = 0;
        v->u.rec.off = rlen * k;
        v->u.rec.len = (int32_t)rlen;
    }
    if (host != NULL) {
        int idx = kr_struct_field_index(m.body->struct_id, "NodeEndpoints");

        v = &m.body->vals[idx];
        v->present = 1;
        v->u.arr = kr_array_new(&ar, KR_T_STRUCT,
                                kr_node_field(m.body, (unsigned)idx)
                                    ->struct_id, 1, 16);
        ep = v->u.arr->items[0].u.node;
        kr_node_get(ep, "NodeId")->u.i = 0;
        kr_node_get(ep, "Host")->u.s.p = (const uint8_t *)host;
        kr_node_get(ep, "Host")->u.s.len = (int32_t)strlen(host);
        kr_node_get(ep, "Port")->u.i = port;
    }
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(kr_encode_msg(&m, &w, NULL), KR_OK);
    flat = kr_wbuf_flatten(&w, recs, rlen * nparts);
    ck_assert_ptr_nonnull(flat);
    b32(out, 0);
    bput(out, flat, w.total);
    ck_assert(!bad || ver == 16);
    if (bad) {
        /* header 5, ThrottleTimeMs 4, ErrorCode 2, SessionId 4, Responses
           count 1, TopicId 16: then the Partitions count */
        out->b[at + 4 + 5 + 4 + 2 + 4 + 1 + 16] = 0x80;   /* + 0x00: null */
    }
    bend(out, at);
    free(flat);
    free(recs);
    kr_wbuf_free(&w);
    kr_arena_free(&ar);
}

static void
rsp_fetch16_parts(struct bb *out, int32_t corr, size_t rlen,
                  uint32_t nparts, const char *host, int32_t port, bool bad)
{
    rsp_fetch_ver(out, 16, corr, rlen, nparts, host, port, bad);
}

/* rsp_fetch16_parts with one partition. */
static void
rsp_fetch16(struct bb *out, int32_t corr, size_t rlen, const char *host,
            int32_t port, bool bad)
{
    rsp_fetch16_parts(out, corr, rlen, 1, host, port, bad);
}

/* The fake's held answer (fb.hold) becomes the frame in b. */
static void
fake_replace_pending(const struct bb *b)
{
    evbuffer_drain(T.fb.pending, evbuffer_get_length(T.fb.pending));
    evbuffer_add(T.fb.pending, b->b, b->n);
}

/* Send the first n bytes the fake holds (fb.hold) to krelay. */
static void
fake_release_part(size_t n)
{
    int i;

    for (i = 0; i < T.fb.n; i++) {
        if (!T.fb.c[i]->internal) {
            evbuffer_remove_buffer(T.fb.pending, T.fb.c[i]->out, n);
            fconn_flush(T.fb.c[i]);
        }
    }
}

/*
 * Start the proxy, send a Fetch v16 request (CorrelationId corr) from a
 * new client, and make the fake broker's held answer the response that
 * rsp_fetch16 builds with the other arguments (into rsp); nothing of it
 * is released yet.
 */
static struct cli *
fetch16_setup(int32_t corr, size_t rlen, const char *host, int32_t port,
              bool bad, struct bb *rsp)
{
    struct bb req = { 0 };
    struct cli *c;

    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_fetch16(&req, corr);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    free(req.b);
    rsp_fetch16(rsp, corr, rlen, host, port, bad);
    fake_replace_pending(rsp);
    return c;
}

/*
 * A Fetch v16 response with NodeEndpoints that arrives in two halves:
 * the client gets the first half before the broker sends the second
 * (streamed, not held), then every byte, with krelay's address in place
 * of the broker's (_i 0: same length, so the expected frame is encoded
 * independently), or the endpoints dropped and the frame padded to its
 * length (_i 1: krelay's host is longer).
 */
START_TEST(fetch16_streamed)
{
    struct bb rsp = { 0 }, exp = { 0 };
    const char *adv = _i == 0 ? "127.0.0.1" : "proxy.krelay.example";
    const char *broker = "10.1.2.3.";      /* 9 bytes, as 127.0.0.1 */
    size_t half;
    struct cli *c;

    T.lc.advertised_host = (char *)adv;
    c = fetch16_setup(5, 200000, broker, 9092, false, &rsp);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.pending), rsp.n);
    half = rsp.n / 2;
    fake_release_part(half);
    ck_assert_msg(cli_has(c, half), "the client got %zu of the first %zu "
                  "bytes: krelay held the response",
                  evbuffer_get_length(c->in), half);
    ck_assert_uint_eq(evbuffer_get_length(c->in), half);
    fake_release(&T.fb);
    if (_i == 0) {
        rsp_fetch16(&exp, 5, 200000, adv, 0, false);
        cli_expect(c, &exp);
    } else {
        struct kr_codec_err ce;
        struct kr_arena ar;
        struct kr_rbuf rb;
        struct iovec iov;
        struct kr_msg m;
        struct kr_val *v;
        const uint8_t *got;

        ck_assert(cli_has(c, rsp.n));
        ck_assert_uint_eq(evbuffer_get_length(c->in), rsp.n);
        got = evbuffer_pullup(c->in, -1);
        /* everything before the tail is the broker's, byte for byte */
        ck_assert(memcmp(got, rsp.b, rsp.n - 40) == 0);
        ck_assert(memmem(got, rsp.n, broker, strlen(broker)) == NULL);
        kr_arena_init(&ar, 0);
        kr_rbuf_init_flat(&rb, &iov, got + 4, rsp.n - 4);
        ck_assert_int_eq(kr_decode_response(&ar, &rb, KR_API_FETCH, 16,
                                            KR_DEC_STRICT, &m, &ce), KR_OK);
        ck_assert_int_eq(m.correlation_id, 5);
        v = kr_node_get(m.body, "NodeEndpoints");
        ck_assert_int_eq(v->present, 0);
        ck_assert_uint_ge(m.body->nunknown, 1);
        ck_assert_uint_eq(KR_STAT_GET(ST, endpoints_dropped), 1);
        kr_arena_free(&ar);
    }
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    free(rsp.b);
    free(exp.b);
}
END_TEST

/*
 * A Fetch v16 response without tagged fields arriving in two pieces:
 * streamed, byte for byte, and not one byte copied by krelay (the
 * one-byte tail is not split off the chain it arrived in).
 */
START_TEST(fetch16_streamed_no_tags)
{
    struct bb rsp = { 0 };
    struct cli *c;

    c = fetch16_setup(8, 150000, NULL, 0, false, &rsp);
    fake_release_part(rsp.n / 3);
    ck_assert(cli_has(c, rsp.n / 3));
    fake_release(&T.fb);
    cli_expect(c, &rsp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, copied_bytes), 0);
    free(rsp.b);
}
END_TEST

/*
 * An upstream that stops in the middle of a streamed response: the
 * client is closed after request_timeout_margin_ms without a byte, blamed
 * on the upstream (its request left the FIFO at the first byte, so only
 * this timer can catch it).
 */
START_TEST(fetch16_streamed_stall)
{
    struct bb rsp = { 0 };
    struct cli *c;
    struct wait w = { 0 };
    char *log;

    log_capture();
    T.uc.request_timeout_margin_ms = 200;
    c = fetch16_setup(9, 100000, "10.1.2.3.", 9092, false, &rsp);
    fake_release_part(rsp.n / 2);       /* and never the rest */
    ck_assert(cli_has(c, rsp.n / 2));
    while (!c->closed && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert(c->closed);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "stopped in the middle of a response") != NULL,
                  "%s", log);
    free(log);
    free(rsp.b);
}
END_TEST

/*
 * A response that keeps moving for longer than idle_timeout_ms and than
 * request_timeout_margin_ms is not cut: idle means no traffic either way,
 * and the stall timer restarts with every byte.
 */
START_TEST(fetch16_streamed_slow_not_idle)
{
    struct bb rsp = { 0 };
    struct cli *c;
    size_t part;
    int i;

    /* timers 600 ms, a part every 150 ms: 450 ms of slack for a loaded
       machine, 900 ms in all (longer than either timer) */
    T.lc.idle_timeout_ms = 600;
    T.uc.request_timeout_margin_ms = 600;
    c = fetch16_setup(10, 50000, NULL, 0, false, &rsp);
    part = rsp.n / 6 + 1;
    for (i = 0; i < 6; i++) {
        fake_release_part(part);
        pump_for(150);                  /* 900 ms in all */
        ck_assert_msg(!c->closed, "closed after part %d", i);
    }
    cli_expect(c, &rsp);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    free(rsp.b);
}
END_TEST

/*
 * A response krelay holds whole (Metadata: broker addresses) that
 * arrives slowly but steadily, for longer than its request's wait plus
 * request_timeout_margin_ms: delivered, rewritten, not cut as if the
 * broker had sent nothing.
 */
START_TEST(held_response_slow_not_cut)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    size_t part;
    int i;

    /* the timer 600 ms, a part every 150 ms: 450 ms of slack for a
       loaded machine, 900 ms in all */
    T.uc.request_timeout_margin_ms = 600;
    T.lc.broker_port_base = free_port();
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_metadata_all(&req, 12);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    part = evbuffer_get_length(T.fb.pending) / 6 + 1;
    for (i = 0; i < 6; i++) {
        fake_release_part(part);
        pump_for(150);                  /* 900 ms in all */
        ck_assert_msg(!c->closed, "closed after part %d", i);
    }
    metadata_response(&exp, 12, 0, "127.0.0.1", kr_daemon_port(T.p, 0, 0));
    cli_expect(c, &exp);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 1);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * A whole Fetch v16 with endpoints above max_frame_bytes: streamed (and
 * rewritten), as when it arrives in pieces, not refused.
 */
START_TEST(fetch16_whole_over_max)
{
    struct bb rsp = { 0 }, exp = { 0 };
    struct cli *c;

    T.lc.max_frame_bytes = 20000;
    c = fetch16_setup(11, 30000, "10.1.2.3.", 9092, false, &rsp);
    fake_release(&T.fb);
    rsp_fetch16(&exp, 11, 30000, "127.0.0.1", 0, false);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    free(rsp.b);
    free(exp.b);
}
END_TEST

/* A whole Fetch v16 response without tagged fields: cut-through, as is. */
START_TEST(fetch16_whole_no_tags)
{
    struct bb rsp = { 0 };
    struct cli *c;

    c = fetch16_setup(6, 3000, NULL, 0, false, &rsp);
    fake_release(&T.fb);
    cli_expect(c, &rsp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    free(rsp.b);
}
END_TEST

/* The audit file of held_audited_fetch16 (removed by the test). */
static char held_audit_path[64];

/* One rule auditing Fetch with bodies (so its responses are held whole and
   decoded), its lines to held_audit_path. */
static void
rule_audit_body_fetch(void)
{
    static struct kr_rule_conf r;
    static int16_t apis[1] = { KR_API_FETCH };
    char err[128] = "";
    int fd;

    snprintf(held_audit_path, sizeof(held_audit_path),
             "/tmp/check_session_held.XXXXXX");
    fd = mkstemp(held_audit_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    T.conf.audit.target = held_audit_path;
    memset(&r, 0, sizeof(r));
    r.name = (char *)"bodies";
    r.api = apis;
    r.napi = 1;
    r.versions_min = 0;
    r.versions_max = INT16_MAX;
    r.direction = KR_RDIR_BOTH;
    r.clamp_min_version = r.clamp_max_version = -1;
    r.throttle_ms = -1;
    r.deny_error = -1;
    r.fault_error = -1;
    r.fault_error_probability = 1;
    r.audit = true;
    r.audit_body = true;
    T.conf.rules = &r;
    T.conf.nrules = 1;
    T.conf.ruleset = kr_rule_compile(&T.conf, err, sizeof(err));
    ck_assert_msg(T.conf.ruleset != NULL, "%s", err);
}

/*
 * A Fetch v16 response an audit rule holds whole and decodes: its broker
 * endpoints are rewritten from that one decode when it has none (_i 0:
 * the frame goes on byte for byte), through kr_rewrite_response when it
 * has some (_i 1: rewritten), and a frame kr_rewrite_response refuses
 * (_i 2: an unknown tagged field twice, which the tolerant decode the
 * audit line uses accepts) still closes the connection, not delivered.
 */
START_TEST(held_audited_fetch16)
{
    static const uint8_t dup_tags[] = { 2, 5, 0, 5, 0 };
    struct bb rsp = { 0 }, exp = { 0 };
    struct cli *c;
    char *log;

    rule_audit_body_fetch();
    log_capture();
    c = fetch16_setup(31, 3000, _i == 1 ? "10.1.2.3." : NULL, 9092, false,
                      &rsp);
    if (_i == 2) {
        /* the body's tagged-field count 0 (the last byte) becomes two
           fields of tag 5, both empty */
        rsp.n--;
        bput(&rsp, dup_tags, sizeof(dup_tags));
        bend(&rsp, 0);
        fake_replace_pending(&rsp);
    }
    fake_release(&T.fb);
    if (_i == 2) {
        ck_assert(cli_wait_closed(c));
        ck_assert_uint_lt(evbuffer_get_length(c->in), rsp.n);
        log = log_text();
        ck_assert_msg(strstr(log, "cannot rewrite Fetch v16 response") !=
                      NULL && strstr(log, "duplicate tagged field 5") !=
                      NULL, "%s", log);
        free(log);
    } else {
        if (_i == 1) {
            rsp_fetch16(&exp, 31, 3000, "127.0.0.1", 0, false);
        } else {
            bput(&exp, rsp.b, rsp.n);
        }
        cli_expect(c, &exp);
        ck_assert(!c->closed);
    }
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 1);
    unlink(held_audit_path);
    free(rsp.b);
    free(exp.b);
}
END_TEST

/*
 * A streamed response that turns out malformed: the client connection is
 * closed (it got a partial frame it must not trust), with one log line
 * naming the API and what was wrong.
 */
START_TEST(fetch16_streamed_malformed)
{
    struct bb rsp = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    c = fetch16_setup(7, 100000, "10.1.2.3.", 9092, true, &rsp);
    fake_release_part(100);
    fake_release(&T.fb);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_lt(evbuffer_get_length(c->in), rsp.n);
    log = log_text();
    ck_assert_msg(strstr(log, "malformed Fetch v16 response") != NULL &&
                  strstr(log, "null array") != NULL, "%s", log);
    free(log);
    free(rsp.b);
}
END_TEST

/* ---- splice(2) lanes (issue 4) ------------------------------------------ */

/*
 * The fixture zeroes the listener config, so splice_min_bytes is 0 (no
 * lane) unless a test sets it: these tests use the config default.
 */
#define SPLICE_MIN 65536

/* The fake broker's connection from the session (not kr_upstream's). */
static struct fconn *
fake_conn(void)
{
    int i;

    for (i = 0; i < T.fb.n; i++) {
        if (T.fb.c[i]->decided && !T.fb.c[i]->internal) {
            return T.fb.c[i];
        }
    }
    ck_abort_msg("the fake broker has no connection from a session");
    return NULL;
}

/*
 * Send the fake's held answers (fb.hold) in n pieces; after each but the
 * last, the client has every byte sent so far: forwarded as it arrives,
 * neither held nor left in a pipe.
 */
static void
fake_release_pieces(struct cli *c, int n)
{
    size_t base = evbuffer_get_length(c->in), sent = 0;
    size_t piece = evbuffer_get_length(T.fb.pending) / (size_t)n;
    int k;

    for (k = 0; k < n - 1; k++) {
        fake_release_part(piece);
        sent += piece;
        ck_assert_msg(cli_has(c, base + sent), "piece %d: the client got "
                      "%zu of %zu bytes", k, evbuffer_get_length(c->in) -
                      base, sent);
    }
    fake_release(&T.fb);
}

/* Pump until the fake wrote all it has for the session into the kernel. */
static void
fake_wait_written(void)
{
    struct fconn *fc = fake_conn();
    struct wait w = { 0 };

    while (evbuffer_get_length(fc->out) > 0 &&
           waiting(&w, progress() + evbuffer_get_length(fc->out))) {
        pump_once();
    }
    ck_assert_uint_eq(evbuffer_get_length(fc->out), 0);
}

/* Pump until the proxy has no session left (bounded: struct wait). */
static void
wait_no_session(void)
{
    struct wait w = { 0 };

    while (T.w->sessions != NULL && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_ptr_null(T.w->sessions);
}

/*
 * krelay's socket to the client (or to the upstream) of its one session
 * gets a fixed send buffer (no autotuning up to tcp_wmem's 4 MiB that
 * would take whole frames): what the peer does not read stays in krelay.
 */
static void
proxy_sndbuf(bool client, int n)
{
    struct kr_session *s = T.w->sessions;

    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(setsockopt(client ? s->client.fd : s->up.fd,
                                SOL_SOCKET, SO_SNDBUF, &n, sizeof(n)), 0);
}

/*
 * Start the proxy with splice lanes (splice_min_bytes 65536), send a
 * Heartbeat (CorrelationId corr, into req) from a new client (receive
 * buffer rcvbuf, 0: the system's), and let the fake broker hold its
 * answer, an echo with extra pattern bytes: a cut-through response.
 */
static struct cli *
splice_heartbeat_setup(int32_t corr, size_t extra, int rcvbuf, struct bb *req)
{
    struct cli *c;

    T.lc.splice_min_bytes = SPLICE_MIN;
    T.fb.hold = true;
    T.fb.extra = extra;
    start();
    c = cli_open(boot_port(), rcvbuf);
    req_heartbeat(req, corr);
    cli_send(c, req->b, req->n);
    fake_expect(req);
    return c;
}

/*
 * The session ended once, counted as the client's, the upstream's or a
 * timeout's (each 0 or 1), and its pipes went back to the pool.
 */
static void
closed_by(uint64_t client, uint64_t upstream, uint64_t timeout)
{
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_CLIENT), client);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), upstream);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), timeout);
    ck_assert_int_eq(T.w->pipes.nused, 0);
}

/* Every pipe lent went back to the pool (after its lane or session). */
static void
pipes_returned(void)
{
    ck_assert_int_eq(T.w->pipes.nused, 0);
    if (KR_STAT_GET(ST, spliced_bytes) > 0) {
        ck_assert_int_ge(T.w->pipes.nfree, 1);   /* empty: kept for reuse */
    }
    if (T.w->sessions != NULL) {
        ck_assert_int_eq(T.w->sessions->dn.pipe[0], -1);
        ck_assert_int_eq(T.w->sessions->upl.pipe[0], -1);
        ck_assert_uint_eq(T.w->sessions->dn.queued, 0);
        ck_assert_uint_eq(T.w->sessions->upl.queued, 0);
    }
}

/*
 * A streamed Fetch v16 response with 600 KB of records, sent in four
 * pieces: the client gets every piece as it arrives and the whole frame
 * byte for byte, with the NodeEndpoints tail rewritten (_i & 2) or as
 * the broker sent it (no tagged fields).  _i & 1 == 0: splice_min_bytes
 * 65536, the record data after krelay's first read moves by splice(2)
 * (none of the rest: the frame's structure is read); _i & 1: lanes off,
 * the same bytes arrive through user space.  upstream_to_client_bytes counts the
 * frame once either way.  Nothing is copied in user space without tagged
 * fields; with them, at most the bytes around the tail, no record byte.
 */
START_TEST(splice_fetch16_streamed)
{
    struct bb rsp = { 0 }, exp = { 0 };
    const size_t rlen = 600000;
    bool on = (_i & 1) == 0, tags = (_i & 2) != 0;
    struct cli *c;

    T.lc.splice_min_bytes = on ? SPLICE_MIN : 0;
    c = fetch16_setup(21, rlen, tags ? "10.1.2.3." : NULL, 9092, false,
                      &rsp);
    fake_release_pieces(c, 4);
    if (tags) {
        rsp_fetch16(&exp, 21, rlen, "127.0.0.1", 0, false);
        ck_assert_uint_eq(exp.n, rsp.n);
        ck_assert(memcmp(exp.b, rsp.b, rsp.n) != 0);
    } else {
        bput(&exp, rsp.b, rsp.n);
    }
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, upstream_to_client_bytes), rsp.n);
    if (on) {
        ck_assert_uint_le(KR_STAT_GET(ST, spliced_bytes), rlen);
        ck_assert_uint_ge(KR_STAT_GET(ST, spliced_bytes), rlen - SPLICE_MIN);
    } else {
        ck_assert_uint_eq(KR_STAT_GET(ST, spliced_bytes), 0);
    }
    if (!tags) {
        ck_assert_uint_eq(KR_STAT_GET(ST, copied_bytes), 0);
    } else if (on) {
        /* the tail split off its chain may copy the few structure bytes
           before it, never record data (it was spliced) */
        ck_assert_uint_le(KR_STAT_GET(ST, copied_bytes), rsp.n - rlen);
    }
    pipes_returned();
    free(rsp.b);
    free(exp.b);
}
END_TEST

/* A rule that audits api; the [audit] sink is a file of the test
   (audit_path, removed by audit_done). */
static char audit_path[64];

static void
rule_audit(int16_t api)
{
    static struct kr_rule_conf r;
    static int16_t apis[1];
    char err[128] = "";
    int fd;

    snprintf(audit_path, sizeof(audit_path), "/tmp/check_session_audit."
             "XXXXXX");
    fd = mkstemp(audit_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    T.conf.audit.target = audit_path;
    T.conf.audit.queue_bytes = 1 << 20;
    memset(&r, 0, sizeof(r));
    apis[0] = api;
    r.name = (char *)"watch";
    r.api = apis;
    r.napi = 1;
    r.versions_min = 0;
    r.versions_max = INT16_MAX;
    r.direction = KR_RDIR_BOTH;
    r.clamp_min_version = r.clamp_max_version = -1;
    r.throttle_ms = -1;
    r.deny_error = -1;
    r.fault_error = -1;
    r.fault_error_probability = 1;
    r.audit = true;
    T.conf.rules = &r;
    T.conf.nrules = 1;
    T.conf.ruleset = kr_rule_compile(&T.conf, err, sizeof(err));
    ck_assert_msg(T.conf.ruleset != NULL, "%s", err);
}

/* The audit lines written so far (the sink flushed), parsed; the
   caller frees them (json_decref each) and the array. */
static json_t **
audit_lines(size_t *n)
{
    json_t **out = NULL;
    char line[1 << 16];
    FILE *f;

    kr_audit_flush(T.w->audit);
    f = fopen(audit_path, "r");
    ck_assert_ptr_nonnull(f);
    *n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        out = realloc(out, (*n + 1) * sizeof(*out));
        ck_assert_ptr_nonnull(out);
        out[*n] = json_loads(line, 0, NULL);
        ck_assert_msg(out[*n] != NULL, "not JSON: %s", line);
        (*n)++;
    }
    fclose(f);
    return out;
}

static void
audit_done(json_t **l, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        json_decref(l[i]);
    }
    free(l);
    unlink(audit_path);
    T.conf.audit.target = NULL;
}

static json_int_t
jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_integer(v), "%s: not an integer", key);
    return json_integer_value(v);
}

static const char *
jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));

    ck_assert_msg(v != NULL, "%s: not a string", key);
    return v;
}

/*
 * issue 14: a Fetch response whose one rule audits it is not held: it
 * streams to the client as it arrives (the client has the first piece
 * before the broker sent the rest), and its audit line has the record
 * bytes the scanner saw per topic; the connection's close line the bytes
 * each way, one request, its cause.  _i 0: Fetch v16 with NodeEndpoints
 * (the tail rewritten: "rewritten"); 1: v16 without tagged fields, record
 * data spliced; 2: v11 (no tail: the walk ends with the spliced run); 3:
 * v12 (a tail of tagged fields that passes as it is).
 */
START_TEST(audit_fetch_streamed)
{
    static const int16_t vers[] = { 16, 16, 11, 12 };
    static const uint8_t uuid[16] = { 0x42, 1, 2, 3 };
    struct bb req = { 0 }, rsp = { 0 }, exp = { 0 };
    const size_t rlen = 300000;
    int16_t ver = vers[_i];
    bool endpoints = _i == 0;
    json_t **l, *t, *acts;
    char conn_id[32], idname[24];
    size_t n, first;
    struct cli *c;

    T.lc.splice_min_bytes = _i == 0 ? 0 : SPLICE_MIN;
    rule_audit(KR_API_FETCH);
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_fetch_ver(&req, 31, ver);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    rsp_fetch_ver(&rsp, ver, 31, rlen, 2, endpoints ? "10.1.2.3." : NULL,
                  9092, false);
    fake_replace_pending(&rsp);
    ck_assert_ptr_nonnull(T.w->sessions);
    snprintf(conn_id, sizeof(conn_id), "%s", T.w->sessions->conn_id);
    ck_assert_msg(strncmp(conn_id, "c#0.", 4) == 0, "%s", conn_id);
    ck_assert_msg(strncmp(T.w->sessions->name, conn_id, strlen(conn_id)) == 0,
                  "log prefix %s", T.w->sessions->name);
    first = rsp.n / 3;
    fake_release_part(first);
    ck_assert_msg(cli_has(c, first), "the client got %zu of the first %zu "
                  "bytes: krelay held the response",
                  evbuffer_get_length(c->in), first);
    fake_release(&T.fb);
    if (endpoints) {
        rsp_fetch_ver(&exp, ver, 31, rlen, 2, "127.0.0.1", 0, false);
    } else {
        bput(&exp, rsp.b, rsp.n);
    }
    cli_expect(c, &exp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    if (_i > 0) {
        ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    }
    /* the client closes: its close line */
    ck_assert_int_eq(shutdown(c->fd, SHUT_RDWR), 0);
    wait_no_session();
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(jstr(l[0], "event"), "open");
    ck_assert_str_eq(jstr(l[0], "conn_id"), conn_id);
    ck_assert_str_eq(jstr(l[1], "type"), "request");
    ck_assert_str_eq(jstr(l[1], "conn_id"), conn_id);
    ck_assert_str_eq(jstr(l[1], "api"), "Fetch");
    ck_assert_int_eq(jint(l[1], "api_version"), ver);
    ck_assert_int_eq(jint(l[1], "correlation_id"), 31);
    ck_assert_str_eq(jstr(l[1], "route"), "bootstrap");
    ck_assert_ptr_nonnull(strchr(jstr(l[1], "upstream_addr"), ':'));
    ck_assert_int_eq(jint(l[1], "request_bytes"), (json_int_t)req.n);
    ck_assert_int_eq(jint(l[1], "response_bytes"), (json_int_t)rsp.n);
    t = json_array_get(json_object_get(l[1], "topics"), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(l[1], "topics")), 1);
    if (ver >= 13) {
        kr_uuid_format(uuid, idname);
        ck_assert_str_eq(jstr(t, "name"), idname);
    } else {
        ck_assert_str_eq(jstr(t, "name"), "orders");
    }
    ck_assert_int_eq(jint(t, "partitions"), 0);  /* not in the request */
    ck_assert_int_eq(jint(t, "record_bytes"), (json_int_t)(2 * rlen));
    ck_assert_uint_eq(json_object_size(json_object_get(l[1], "errors")), 0);
    acts = json_object_get(l[1], "actions");
    ck_assert_str_eq(json_string_value(json_array_get(acts, 0)),
                     "forwarded");
    ck_assert_uint_eq(json_array_size(acts), endpoints ? 2 : 1);
    if (endpoints) {
        ck_assert_str_eq(json_string_value(json_array_get(acts, 1)),
                         "rewritten");
    }
    ck_assert_str_eq(jstr(l[2], "event"), "close");
    ck_assert_str_eq(jstr(l[2], "conn_id"), conn_id);
    ck_assert_str_eq(jstr(l[2], "cause"), "client");
    ck_assert_int_eq(jint(l[2], "bytes_from_client"), (json_int_t)req.n);
    ck_assert_int_eq(jint(l[2], "bytes_to_client"), (json_int_t)exp.n);
    ck_assert_int_eq(jint(l[2], "requests"), 1);
    ck_assert_int_ge(jint(l[2], "duration_us"), 0);
    ck_assert_str_eq(jstr(l[2], "client_id"), "check");
    audit_done(l, n);
    free(req.b);
    free(rsp.b);
    free(exp.b);
}
END_TEST

/* nb RecordBatch v2 of count records and body data bytes each (a 61-byte
   header, then the data). */
static void
put_batches(struct bb *b, int nb, int32_t count, size_t body)
{
    uint8_t h[61];
    size_t i;
    int k;

    for (k = 0; k < nb; k++) {
        memset(h, 0, sizeof(h));
        h[8] = (uint8_t)((49 + body) >> 24);
        h[9] = (uint8_t)((49 + body) >> 16);
        h[10] = (uint8_t)((49 + body) >> 8);
        h[11] = (uint8_t)(49 + body);
        h[16] = 2;
        h[57] = (uint8_t)((uint32_t)count >> 24);
        h[58] = (uint8_t)((uint32_t)count >> 16);
        h[59] = (uint8_t)((uint32_t)count >> 8);
        h[60] = (uint8_t)count;
        bput(b, h, sizeof(h));
        for (i = 0; i < body; i++) {
            uint8_t x = (uint8_t)(i * 13 + (size_t)k);

            bput(b, &x, 1);
        }
    }
}

/* Produce v3 (TransactionalId null) of topic "t", one partition: nb
   RecordBatch v2 of count records and body data bytes each
   (put_batches); bad: the records' length claims one byte more than the
   frame holds (the scanner cannot walk it). */
static void
req_produce_batches(struct bb *b, int32_t corr, int16_t acks, int nb,
                    int32_t count, size_t body, bool bad)
{
    size_t at = req_begin(b, KR_API_PRODUCE, 3, corr);

    bstr(b, NULL);
    b16(b, acks);
    b32(b, 1000);
    b32(b, 1);
    bstr(b, "t");
    b32(b, 1);
    b32(b, 0);
    b32(b, (int32_t)((size_t)nb * (61 + body)) + (bad ? 1 : 0));
    put_batches(b, nb, count, body);
    bend(b, at);
}

/* An unsigned varint (flexible versions' lengths and counts). */
static void
buvar(struct bb *b, uint32_t v)
{
    uint8_t x;

    while (v >= 0x80) {
        x = (uint8_t)(v | 0x80);
        bput(b, &x, 1);
        v >>= 7;
    }
    x = (uint8_t)v;
    bput(b, &x, 1);
}

/* Produce v9 (flexible; TransactionalId null) of topic "t", one
   partition of nb batches (put_batches), the body's tagged fields the
   ntags bytes tags (as they are: a count, then tag, size, value...). */
static void
req_produce_v9(struct bb *b, int32_t corr, int16_t acks, int nb,
               int32_t count, size_t body, const uint8_t *tags,
               size_t ntags)
{
    size_t at = req_begin(b, KR_API_PRODUCE, 9, corr);

    buvar(b, 0);                        /* header: no tagged fields */
    buvar(b, 0);                        /* TransactionalId null */
    b16(b, acks);
    b32(b, 1000);
    buvar(b, 1 + 1);                    /* TopicData: one topic */
    buvar(b, 1 + 1);
    bput(b, "t", 1);
    buvar(b, 1 + 1);                    /* PartitionData: one */
    b32(b, 0);
    buvar(b, (uint32_t)((size_t)nb * (61 + body)) + 1);
    put_batches(b, nb, count, body);
    buvar(b, 0);                        /* the partition's tags */
    buvar(b, 0);                        /* the topic's */
    bput(b, tags, ntags);
    bend(b, at);
}

/* The fake broker's connection holding part of a request frame (before
   its first whole frame, when fake_conn cannot tell it yet), or NULL. */
static struct fconn *
fake_partial_conn(void)
{
    int i;

    for (i = 0; i < T.fb.n; i++) {
        if (!T.fb.c[i]->internal && evbuffer_get_length(T.fb.c[i]->in) > 0) {
            return T.fb.c[i];
        }
    }
    return NULL;
}

/* Bytes of the session's requests the fake broker read so far. */
static size_t
fake_read_bytes(void)
{
    struct fconn *fc = fake_partial_conn();

    return evbuffer_get_length(T.fb.log) +
           (fc != NULL ? evbuffer_get_length(fc->in) : 0);
}

/* TCP_CORK on the one session's upstream socket (0 or 1). */
static int
up_corked(void)
{
    int v = -1;
    socklen_t len = sizeof(v);

    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_int_eq(getsockopt(T.w->sessions->up.fd, IPPROTO_TCP, TCP_CORK,
                                &v, &len), 0);
    return v;
}

/* Pump until the fake broker read n bytes of the session's requests
   (whole frames or not). */
static bool
fake_has_read(size_t n)
{
    struct wait w = { 0 };

    while (fake_read_bytes() < n && waiting(&w, progress())) {
        pump_once();
    }
    return fake_read_bytes() >= n;
}

/* The worker's response_errors, every cell summed. */
static uint64_t
rsp_errors_total(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i < KR_STATS_KERR_CELLS; i++) {
        n += KR_STAT_GET_L(ST, response_errors, i);
    }
    return n;
}

/* The worker's response_latency observations (its buckets summed). */
static uint64_t
response_latency_count(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i <= KR_STATS_LATENCY_BOUNDS; i++) {
        n += KR_STAT_GET_L(ST, response_latency, i);
    }
    return n;
}

/* The worker's upstream_latency observations (its buckets summed). */
static uint64_t
upstream_latency_count(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i <= KR_STATS_LATENCY_BOUNDS; i++) {
        n += KR_STAT_GET_L(ST, upstream_latency, i);
    }
    return n;
}

/*
 * Issue 12's response metrics on the pass-through path: one
 * upstream_latency observation per request answered by the upstream;
 * the echoed Heartbeat v0 responses' top-level ErrorCode (the body's
 * first field: "RS" of the echo, 0x5253, a code Kafka does not name)
 * counted in response_errors' unknown cell, the Produce v3 response's
 * (Responses first: no fixed offset) not at all.
 */
START_TEST(response_metrics_pass_through)
{
    struct bb req = { 0 }, exp = { 0 };

    (void)three_echoed(&req, &exp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 3);
    ck_assert_uint_eq(upstream_latency_count(), 3);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, response_errors,
                                    KR_STATS_KERR_CELLS - 1), 2);
    ck_assert_uint_eq(rsp_errors_total(), 2);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * A Metadata response is decoded whole to rewrite its broker addresses:
 * its topic's ErrorCode (UNKNOWN_TOPIC_OR_PARTITION, not at a fixed
 * offset) is counted from that tree, once, whether no rule (_i 0), a
 * rule that does not decode responses (1: fault_latency_ms) or one that
 * does (2: audit) sees it.
 */
START_TEST(response_metrics_metadata)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    size_t n = 0;
    json_t **l;

    if (_i == 1) {
        rule_one(KR_API_METADATA, 1, false);
    } else if (_i == 2) {
        rule_audit(KR_API_METADATA);
    }
    T.lc.broker_port_base = free_port();
    T.fb.md_topic_err = KR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    start();
    c = cli_open(boot_port(), 0);
    req_metadata_all(&req, 9);
    cli_send(c, req.b, req.n);
    metadata_response_t(&exp, 9, 0, "127.0.0.1", kr_daemon_port(T.p, 0, 0),
                        KR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, response_errors,
                                    kr_stats_rsp_error_cell(
                                        KR_KERR_UNKNOWN_TOPIC_OR_PARTITION)),
                      1);
    ck_assert_uint_eq(rsp_errors_total(), 1);
    /* answered once, whether a rule held it (1, 2) or not (0) */
    ck_assert_uint_eq(response_latency_count(), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, api_responses,
                                    kr_stats_api_cell(KR_API_METADATA, 1)),
                      1);
    if (_i == 2) {
        l = audit_lines(&n);
        audit_done(l, n);
    }
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The same Heartbeat held and decoded for an audit rule: its ErrorCode
 * counted once, from the decoded tree (not a second time by the peek).
 */
START_TEST(response_metrics_decoded)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    size_t n = 0;
    json_t **l;

    rule_audit(KR_API_HEARTBEAT);
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, response_errors,
                                    KR_STATS_KERR_CELLS - 1), 1);
    ck_assert_uint_eq(rsp_errors_total(), 1);
    ck_assert_uint_eq(upstream_latency_count(), 1);
    /* the held response is counted when it goes to the client */
    ck_assert_uint_eq(response_latency_count(), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, api_responses,
                                    kr_stats_api_cell(KR_API_HEARTBEAT, 0)),
                      1);
    l = audit_lines(&n);
    audit_done(l, n);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * issue 14: a (large) Produce request whose one rule audits it is not
 * held: the broker has its first part before the client
 * sent the rest, its records are spliced, the broker gets its bytes
 * unchanged, and its audit line has what the scanner read: the topic, its
 * partition, records (3 batches of 1,000) and record bytes, Acks.
 * _i 0: Acks=1 (the line with the response); 1: Acks=0 (the line once the
 * request passed); 2: records the scanner cannot walk (forwarded as they
 * are, the line says the request does not decode); 3: the broker answers
 * before it has the whole request (closed, one log line, the line marked
 * incomplete with what was read); 4: splicing off (read through krelay,
 * the same line).
 */
START_TEST(audit_produce_streamed)
{
    struct bb req = { 0 }, exp = { 0 }, early = { 0 };
    const size_t body = 100000;
    int16_t acks = _i == 1 ? 0 : 1;
    json_t **l, *t, *acts;
    size_t n, first;
    struct cli *c;

    T.lc.splice_min_bytes = _i == 4 ? 0 : SPLICE_MIN;
    rule_audit(KR_API_PRODUCE);
    start();
    c = cli_open(boot_port(), 0);
    req_produce_batches(&req, 41, acks, 3, 1000, body, _i == 2);
    first = 40000;
    cli_send(c, req.b, first);
    ck_assert_msg(fake_has_read(first - 4), "the broker got %zu of the first "
                  "%zu bytes: krelay held the request", fake_read_bytes(),
                  first);
    /* while the rest is still to come, the upstream socket is corked:
       its pieces leave in full segments (kr_conn_cork) */
    ck_assert_int_eq(up_corked(), 1);
    if (_i == 3) {
        /* an answer to the request before it is whole */
        echo_response(&early, req.b, 64, 0, 0);
        ck_assert_ptr_nonnull(fake_partial_conn());
        evbuffer_add(fake_partial_conn()->out, early.b, early.n);
        fconn_flush(fake_partial_conn());
        ck_assert(cli_wait_closed(c));
        wait_no_session();
        l = audit_lines(&n);
        ck_assert_uint_eq(n, 3);            /* open, request, close */
        ck_assert(json_is_true(json_object_get(l[1], "incomplete")));
        t = json_array_get(json_object_get(l[1], "topics"), 0);
        ck_assert_str_eq(jstr(t, "name"), "t");
        ck_assert_int_eq(jint(t, "partitions"), 1);
        ck_assert_str_eq(jstr(l[2], "cause"), "upstream");
        audit_done(l, n);
        free(req.b);
        free(early.b);
        return;
    }
    cli_send(c, req.b + first, req.n - first);
    fake_expect(&req);
    if (acks != 0) {
        expected_echo(&req, 0, &exp);
        cli_expect(c, &exp);
    }
    ck_assert_int_eq(up_corked(), 0);       /* its last byte uncorked */
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_streamed), 1);
    /* the scanner's state, made for it, stays for the next */
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_ptr_nonnull(T.w->sessions->req_st);
    ck_assert(!T.w->sessions->rstream);
    if (_i == 4) {
        ck_assert_uint_eq(KR_STAT_GET(ST, spliced_bytes), 0);
    } else {
        /* all but what came with the first reads and the batch headers */
        ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), req.n / 2);
    }
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 2);                /* open, the request */
    ck_assert_str_eq(jstr(l[1], "api"), "Produce");
    ck_assert_int_eq(jint(l[1], "correlation_id"), 41);
    ck_assert_int_eq(jint(l[1], "request_bytes"), (json_int_t)req.n);
    ck_assert_str_eq(jstr(l[1], "client_id"), "check");
    acts = json_object_get(l[1], "actions");
    ck_assert_str_eq(json_string_value(json_array_get(acts, 0)),
                     "forwarded");
    t = json_array_get(json_object_get(l[1], "topics"), 0);
    if (_i == 2) {
        ck_assert_msg(strstr(jstr(l[1], "decode_error"), "records") != NULL,
                      "%s", jstr(l[1], "decode_error"));
        ck_assert_ptr_null(t);
        /* the request (and the fake's echo, no Produce response) */
        ck_assert_uint_ge(KR_STAT_GET(ST, frames_undecodable), 1);
    } else {
        ck_assert_int_eq(jint(l[1], "acks"), acks);
        ck_assert_str_eq(jstr(t, "name"), "t");
        ck_assert_int_eq(jint(t, "partitions"), 1);
        ck_assert_int_eq(jint(t, "records"), 3000);
        ck_assert_int_eq(jint(t, "record_bytes"),
                         (json_int_t)(3 * (61 + body)));
        /* the fake's echo is no Produce response: only that */
        ck_assert_msg(json_object_get(l[1], "decode_error") == NULL ||
                      strncmp(jstr(l[1], "decode_error"), "the response", 12) == 0,
                      "%s", jstr(l[1], "decode_error"));
    }
    if (acks == 0) {
        ck_assert_ptr_null(json_object_get(l[1], "response_bytes"));
    } else {
        ck_assert_int_eq(jint(l[1], "response_bytes"), (json_int_t)exp.n);
    }
    audit_done(l, n);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The client closes in the middle of a streamed Produce request (issue 14,
 * doc/audit.md): its line is written at the close, marked incomplete,
 * and its note says krelay did not read the whole request.  _i 0: Acks=1
 * (the request's entry waits in the FIFO; the close's generic note, "the
 * response did not reach the client", replaced that one); 1: Acks=0 (the
 * line is the session's own).  Its records are those of the batches whose
 * headers krelay read (the first of three), its record bytes the field's
 * length prefix.
 */
START_TEST(audit_produce_streamed_cut)
{
    struct bb req = { 0 };
    const size_t body = 100000;
    int16_t acks = _i == 1 ? 0 : 1;
    json_t **l, *t;
    size_t n, first = 40000;
    struct cli *c;

    T.lc.splice_min_bytes = SPLICE_MIN;
    rule_audit(KR_API_PRODUCE);
    start();
    c = cli_open(boot_port(), 0);
    req_produce_batches(&req, 41, acks, 3, 1000, body, false);
    cli_send(c, req.b, first);
    ck_assert_msg(fake_has_read(first - 4), "the broker got %zu of the first "
                  "%zu bytes", fake_read_bytes(), first);
    ck_assert_int_eq(shutdown(c->fd, SHUT_RDWR), 0);
    wait_no_session();
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 3);                /* open, the request, close */
    ck_assert_str_eq(jstr(l[1], "api"), "Produce");
    ck_assert_int_eq(jint(l[1], "correlation_id"), 41);
    ck_assert(json_is_true(json_object_get(l[1], "incomplete")));
    ck_assert_str_eq(jstr(l[1], "note"), "connection closed before krelay "
                     "read the whole request (topics and records: as far "
                     "as it read them)");
    t = json_array_get(json_object_get(l[1], "topics"), 0);
    ck_assert_str_eq(jstr(t, "name"), "t");
    ck_assert_int_eq(jint(t, "partitions"), 1);
    ck_assert_int_eq(jint(t, "record_bytes"), (json_int_t)(3 * (61 + body)));
    /* the first batch's header was read, the others' were not */
    ck_assert_int_eq(jint(t, "records"), 1000);
    ck_assert_str_eq(jstr(l[2], "event"), "close");
    audit_done(l, n);
    free(req.b);
}
END_TEST

/*
 * A streamed Produce v9 (Acks=0: its line is written once the request
 * passed) whose body's tagged fields do not decode gets the held path's
 * decode_error (doc/audit.md): the scanner walks them too, not only the
 * fields before them.  _i 0: a count of 1 and no tag (the frame ends);
 * 1: a tag whose size runs past the frame; 2: one unknown tag of 1 byte,
 * which decodes (the line has the topic and its records).
 */
START_TEST(audit_produce_streamed_tags)
{
    static const uint8_t tags[][4] = {
        { 0x01 }, { 0x01, 0x05, 0x10, 0x61 }, { 0x01, 0x05, 0x01, 0x61 }
    };
    static const size_t ntags[] = { 1, 4, 4 };
    struct bb req = { 0 };
    const size_t body = 100000;
    json_t **l, *t;
    size_t n;
    struct cli *c;

    T.lc.splice_min_bytes = SPLICE_MIN;
    rule_audit(KR_API_PRODUCE);
    start();
    c = cli_open(boot_port(), 0);
    req_produce_v9(&req, 43, 0, 2, 1000, body, tags[_i], ntags[_i]);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_streamed), 1);
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 2);                /* open, the request */
    ck_assert_int_eq(jint(l[1], "correlation_id"), 43);
    t = json_array_get(json_object_get(l[1], "topics"), 0);
    if (_i < 2) {
        ck_assert_msg(json_object_get(l[1], "decode_error") != NULL &&
                      strstr(jstr(l[1], "decode_error"), "tagged field")
                          != NULL,
                      "decode_error: %s",
                      json_object_get(l[1], "decode_error") != NULL
                          ? jstr(l[1], "decode_error") : "(none)");
        ck_assert_ptr_null(t);              /* as the held line: none */
    } else {
        ck_assert_ptr_null(json_object_get(l[1], "decode_error"));
        ck_assert_str_eq(jstr(t, "name"), "t");
        ck_assert_int_eq(jint(t, "records"), 2000);
        ck_assert_int_eq(jint(t, "record_bytes"),
                         (json_int_t)(2 * (61 + body)));
    }
    audit_done(l, n);
    free(req.b);
}
END_TEST

/* Produce v3 response: one topic "t", one partition with ErrorCode err;
   bad: its topic count says 0x7fffffff (the response does not scan). */
static void
rsp_produce3(struct bb *b, int32_t corr, int16_t err, bool bad)
{
    size_t at = b->n;

    b32(b, 0);
    b32(b, corr);
    b32(b, bad ? INT32_MAX : 1);        /* Responses */
    bstr(b, "t");
    b32(b, 1);                          /* PartitionResponses */
    b32(b, 0);                          /* Index */
    b16(b, err);
    b32(b, 0);                          /* BaseOffset (int64) */
    b32(b, 42);
    b32(b, -1);                         /* LogAppendTimeMs (int64) */
    b32(b, -1);
    b32(b, 0);                          /* ThrottleTimeMs */
    bend(b, at);
}

/*
 * issue 14: the response to a small Produce its rule only audits is
 * scanned as it streams by; one that does not scan (a topic count past
 * the frame) fails open as a held one that does not decode: the client
 * gets it byte for byte, sent in pieces, and the next response after it
 * (the connection stays in step), one log line says so, and its line has
 * decode_error "the response does not decode: ..." and errors null; the
 * next line has the errors the scanner counted.
 */
START_TEST(audit_produce_rsp_unscannable)
{
    struct bb req = { 0 }, rsp = { 0 };
    json_t **l;
    char *log;
    size_t n, i, k;
    struct cli *c;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    rule_audit(KR_API_PRODUCE);
    T.fb.mode = FB_SILENT;
    start();
    c = cli_open(boot_port(), 0);
    req_produce(&req, 51, 1, 0);
    req_produce(&req, 52, 1, 0);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_streamed), 2);
    rsp_produce3(&rsp, 51, 6, true);
    rsp_produce3(&rsp, 52, 6, false);
    for (i = 0; i < rsp.n; i += k) {
        k = rsp.n - i < 5 ? rsp.n - i : 5;
        evbuffer_add(fake_conn()->out, rsp.b + i, k);
        fconn_flush(fake_conn());
        /* streamed, not held: all but a frame's first 8 bytes (its size
           and CorrelationId, read before it is taken on) go on at once */
        ck_assert_msg(cli_has(c, i + k > 8 ? i + k - 8 : 0), "the client "
                      "got %zu of %zu bytes",
                      evbuffer_get_length(c->in), i + k);
    }
    cli_expect(c, &rsp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 2);
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 3);                /* open, the two requests */
    ck_assert_int_eq(jint(l[1], "correlation_id"), 51);
    ck_assert_msg(strncmp(jstr(l[1], "decode_error"), "the response does "
                          "not decode: ", 29) == 0, "%s",
                  jstr(l[1], "decode_error"));
    ck_assert(json_is_null(json_object_get(l[1], "errors")));
    ck_assert_int_eq(jint(l[1], "response_bytes"), (json_int_t)rsp.n / 2);
    ck_assert_int_eq(jint(l[2], "correlation_id"), 52);
    ck_assert_ptr_null(json_object_get(l[2], "decode_error"));
    ck_assert_int_eq(jint(json_object_get(l[2], "errors"),
                          "NOT_LEADER_OR_FOLLOWER"), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "Produce v3 response to CorrelationId 51: the "
                         "response does not decode") != NULL, "%s", log);
    ck_assert_ptr_null(strstr(strstr(log, "does not decode") + 1,
                              "does not decode"));
    free(log);
    audit_done(l, n);
    free(req.b);
    free(rsp.b);
}
END_TEST

/*
 * The same Fetch with audit_body: held and decoded, as before; the line
 * has the same record bytes (from the tree) and the body.
 */
START_TEST(audit_fetch_body_held)
{
    struct bb req = { 0 }, rsp = { 0 };
    const size_t rlen = 5000;
    json_t **l, *t;
    size_t n;
    struct cli *c;

    rule_audit(KR_API_FETCH);
    T.conf.rules[0].audit_body = true;
    kr_rule_free(T.conf.ruleset);
    T.conf.ruleset = kr_rule_compile(&T.conf, NULL, 0);
    ck_assert_ptr_nonnull(T.conf.ruleset);
    start();
    c = cli_open(boot_port(), 0);
    req_fetch_ver(&req, 32, 11);
    T.fb.hold = true;
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    rsp_fetch_ver(&rsp, 11, 32, rlen, 3, NULL, 0, false);
    fake_replace_pending(&rsp);
    fake_release(&T.fb);
    cli_expect(c, &rsp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 0);
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 2);                /* open, the request */
    t = json_array_get(json_object_get(l[1], "topics"), 0);
    ck_assert_str_eq(jstr(t, "name"), "orders");
    ck_assert_int_eq(jint(t, "record_bytes"), (json_int_t)(3 * rlen));
    ck_assert_ptr_nonnull(json_object_get(l[1], "response_body"));
    audit_done(l, n);
    free(req.b);
    free(rsp.b);
}
END_TEST

/*
 * issue 14: an audited Fetch response streamed for its audit line and cut
 * in the middle still gets its line, before the close line, marked
 * "incomplete": the bytes the client got (its close line's
 * bytes_to_client), the record bytes the scanner reached (the first of
 * the two partitions), the errors it read.  _i 0: the upstream closes
 * after a third of it (the client got all of that third); 1: the client
 * stops reading, then closes (records through a splice lane).
 */
START_TEST(audit_fetch_streamed_cut)
{
    struct bb req = { 0 }, rsp = { 0 };
    const size_t rlen = 300000;
    json_t **l, *t;
    char want[160];
    size_t n, first;
    struct cli *c;
    int small = 4096;

    T.lc.splice_min_bytes = _i == 1 ? SPLICE_MIN : 0;
    rule_audit(KR_API_FETCH);
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), _i == 1 ? small : 0);
    req_fetch_ver(&req, 33, 11);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    rsp_fetch_ver(&rsp, 11, 33, rlen, 2, NULL, 0, false);
    fake_replace_pending(&rsp);
    first = rsp.n / 3;
    if (_i == 0) {
        fake_release_part(first);
        ck_assert(cli_has(c, first));
        ck_assert_int_eq(shutdown(fake_conn()->fd, SHUT_RDWR), 0);
    } else {
        event_del(c->rev);              /* the client stops reading */
        proxy_sndbuf(true, small);
        fake_release_part(first);
        pump_for(200);
        ck_assert_int_eq(shutdown(c->fd, SHUT_RDWR), 0);
    }
    wait_no_session();
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(jstr(l[1], "type"), "request");
    ck_assert_str_eq(jstr(l[1], "api"), "Fetch");
    ck_assert_int_eq(jint(l[1], "correlation_id"), 33);
    ck_assert(json_is_true(json_object_get(l[1], "incomplete")));
    ck_assert_str_eq(jstr(l[2], "event"), "close");
    ck_assert_str_eq(jstr(l[2], "cause"), _i == 0 ? "upstream" : "client");
    if (_i == 0) {
        ck_assert_int_eq(jint(l[1], "response_bytes"), (json_int_t)first);
    } else {
        ck_assert_int_gt(jint(l[1], "response_bytes"), 0);
        ck_assert_int_lt(jint(l[1], "response_bytes"), (json_int_t)first);
    }
    ck_assert_int_eq(jint(l[1], "response_bytes"),
                     jint(l[2], "bytes_to_client"));
    snprintf(want, sizeof(want), "connection closed after %lld of "
             "the response's %zu bytes reached the client",
             (long long)jint(l[1], "response_bytes"), rsp.n);
    ck_assert_msg(strstr(jstr(l[1], "note"), want) != NULL, "note: %s",
                  jstr(l[1], "note"));
    t = json_array_get(json_object_get(l[1], "topics"), 0);
    ck_assert_int_eq(jint(t, "record_bytes"), (json_int_t)rlen);
    ck_assert_uint_eq(json_object_size(json_object_get(l[1], "errors")), 0);
    ck_assert(json_is_object(json_object_get(l[1], "errors")));
    audit_done(l, n);
    free(req.b);
    free(rsp.b);
}
END_TEST

/*
 * issue 14: audited requests still in flight when the connection closes
 * get their lines at close, in order, before the close line: no
 * response_bytes, "errors": null, "incomplete" and a note.  The upstream
 * holds both Heartbeat answers; the client closes.
 */
START_TEST(audit_inflight_at_close)
{
    struct bb req = { 0 };
    json_t **l;
    size_t n, i;
    struct cli *c;

    rule_audit(KR_API_HEARTBEAT);
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 41);
    req_heartbeat(&req, 42);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    ck_assert_int_eq(shutdown(c->fd, SHUT_RDWR), 0);
    wait_no_session();
    l = audit_lines(&n);
    ck_assert_uint_eq(n, 4);
    for (i = 1; i <= 2; i++) {
        ck_assert_str_eq(jstr(l[i], "api"), "Heartbeat");
        ck_assert_int_eq(jint(l[i], "correlation_id"), 40 + (json_int_t)i);
        ck_assert(json_is_true(json_object_get(l[i], "incomplete")));
        ck_assert(json_is_null(json_object_get(l[i], "errors")));
        ck_assert_ptr_null(json_object_get(l[i], "response_bytes"));
        ck_assert_str_eq(jstr(l[i], "note"), "connection closed before the "
                         "response reached the client");
    }
    ck_assert_str_eq(jstr(l[3], "event"), "close");
    ck_assert_int_eq(jint(l[3], "requests"), 2);
    audit_done(l, n);
    free(req.b);
}
END_TEST

/*
 * A streamed Fetch v16 response with four partitions of 200 KB records
 * each and NodeEndpoints, to a slow client (4 KiB socket buffers): one
 * lane per partition's records, and each partition's header, read
 * through user space, must wait until the pipe has given the client the
 * records before it.  Byte for byte, the tail rewritten.
 */
START_TEST(splice_fetch16_partitions)
{
    struct bb rsp = { 0 }, exp = { 0 };
    const size_t rlen = 200000;
    struct cli *c;
    int small = 4096;

    T.lc.splice_min_bytes = SPLICE_MIN;
    c = fetch16_setup(23, 10, "10.1.2.3.", 9092, false, &rsp);
    rsp.n = 0;
    rsp_fetch16_parts(&rsp, 23, rlen, 4, "10.1.2.3.", 9092, false);
    fake_replace_pending(&rsp);
    ck_assert_int_eq(setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small,
                                sizeof(small)), 0);
    proxy_sndbuf(true, small);
    fake_release_pieces(c, 3);
    rsp_fetch16_parts(&exp, 23, rlen, 4, "127.0.0.1", 0, false);
    ck_assert_uint_eq(exp.n, rsp.n);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, upstream_to_client_bytes), rsp.n);
    ck_assert_uint_le(KR_STAT_GET(ST, spliced_bytes), 4 * rlen);
    ck_assert_uint_ge(KR_STAT_GET(ST, spliced_bytes),
                      4 * rlen - 4 * SPLICE_MIN);
    pipes_returned();
    free(rsp.b);
    free(exp.b);
}
END_TEST

/*
 * A run shorter than splice_min_bytes stays in user space: a streamed
 * Fetch v16 whose records are just below the threshold.
 */
START_TEST(splice_below_min)
{
    struct bb rsp = { 0 };
    struct cli *c;

    T.lc.splice_min_bytes = SPLICE_MIN;
    c = fetch16_setup(22, SPLICE_MIN - 1, NULL, 0, false, &rsp);
    fake_release_pieces(c, 2);
    cli_expect(c, &rsp);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, spliced_bytes), 0);
    ck_assert_int_eq(T.w->pipes.nused, 0);
    free(rsp.b);
}
END_TEST

/*
 * A cut-through response (Heartbeat: nothing to rewrite) of 700 KiB
 * that arrives in pieces: the rest after krelay's first read moves by
 * splice(2), every byte in order, none copied in user space.
 */
START_TEST(splice_cut_through)
{
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;

    ck_assert(!kr_rewrite_wants(KR_API_HEARTBEAT, 0));
    c = splice_heartbeat_setup(31, 700 * 1024, 0, &req);
    fake_release_pieces(c, 5);
    expected_echo(&req, T.fb.extra, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, upstream_to_client_bytes), exp.n);
    ck_assert_uint_le(KR_STAT_GET(ST, spliced_bytes), exp.n);
    ck_assert_uint_ge(KR_STAT_GET(ST, spliced_bytes), exp.n - SPLICE_MIN);
    ck_assert_uint_eq(KR_STAT_GET(ST, copied_bytes), 0);
    pipes_returned();
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * A Produce request with 700 KiB of records (pass-through, no rule):
 * its rest after krelay's first read goes to the broker by splice(2),
 * byte for byte; its answer (as large, held by the fake until then)
 * comes back whole; then the lanes are over and a Heartbeat on the same
 * connection goes both ways through user space.
 */
START_TEST(splice_produce_request)
{
    struct bb req = { 0 }, hb = { 0 }, exp = { 0 };
    uint64_t up_spliced;
    struct cli *c;

    T.lc.splice_min_bytes = SPLICE_MIN;
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_produce(&req, 41, 1, 700 * 1024);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    /* only the request moved so far: its answer is held */
    up_spliced = KR_STAT_GET(ST, spliced_bytes);
    ck_assert_uint_le(up_spliced, req.n);
    ck_assert_uint_ge(up_spliced, req.n - SPLICE_MIN);
    ck_assert_uint_eq(KR_STAT_GET(ST, client_to_upstream_bytes), req.n);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_uint_eq(T.w->sessions->req_remain, 0);
    ck_assert_uint_eq(T.w->sessions->upl.left, 0);
    fake_release_pieces(c, 3);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), up_spliced);
    pipes_returned();
    /* T.fb.hold is off now: the next answer goes at once */
    req_heartbeat(&hb, 42);
    cli_send(c, hb.b, hb.n);
    bput(&req, hb.b, hb.n);
    fake_expect(&req);
    exp.n = 0;
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, copied_bytes), 0);
    pipes_returned();
    free(req.b);
    free(hb.b);
    free(exp.b);
}
END_TEST

/*
 * Pipelining through the lanes: big Produce requests and small
 * Heartbeats written at once, their echoes (as big) one after the other:
 * the broker gets the requests and the client the responses in order,
 * byte for byte, big ones then small ones.  _i 1: a slow client (4 KiB
 * socket buffers): a pipe still holds the end of a big response when
 * the next responses reach krelay, and they must wait behind it.
 */
START_TEST(splice_pipelined_in_order)
{
    static const size_t recs[] = { 300000, 200000, 0, 0, 150000, 0,
                                   70000, 100000, 0 };
    struct bb req = { 0 }, exp = { 0 };
    struct cli *c;
    size_t i;

    T.lc.splice_min_bytes = SPLICE_MIN;
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), _i == 0 ? 0 : 4096);
    for (i = 0; i < KR_ARRAY_LEN(recs); i++) {
        if (recs[i] > 0) {
            req_produce(&req, (int32_t)(60 + i), 1, recs[i]);
        } else {
            req_heartbeat(&req, (int32_t)(60 + i));
        }
    }
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    if (_i == 1) {
        proxy_sndbuf(true, 4096);
    }
    fake_release(&T.fb);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), KR_ARRAY_LEN(recs));
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), KR_ARRAY_LEN(recs));
    ck_assert_uint_eq(KR_STAT_GET(ST, client_to_upstream_bytes), req.n);
    ck_assert_uint_eq(KR_STAT_GET(ST, upstream_to_client_bytes), exp.n);
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    ck_assert_uint_lt(KR_STAT_GET(ST, spliced_bytes), req.n + exp.n);
    pipes_returned();
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The broker stops reading (its socket buffers and krelay's, 64 KiB,
 * full) while the client writes a 700 KiB Produce in 1000-byte pieces:
 * krelay splices each piece on its own, one pipe slot each, so the pipe
 * is "full" (splice(2): EAGAIN) at about 256 KB, far below its 1 MiB.
 * krelay must stop reading the client then (as with a full up.out:
 * backpressure_upstream), not spin on a readable socket it cannot take
 * from; once the broker reads again every byte arrives, in order, and
 * the echo comes back.  The wait ends when krelay stops reading; if it
 * never does, it gives up after 1 s without progress.
 */
START_TEST(splice_upstream_backpressure)
{
    struct bb all = { 0 }, req = { 0 }, exp = { 0 };
    struct wait w = { 0 };
    struct kr_session *s = NULL;
    size_t sent = 0, piece;
    uint64_t base;
    ssize_t n;
    struct cli *c;

    T.lc.splice_min_bytes = SPLICE_MIN;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&all, 90);    /* connected both ways */
    cli_send(c, all.b, all.n);
    expected_echo(&all, 0, &exp);
    cli_expect(c, &exp);
    proxy_sndbuf(false, 65536);
    event_del(fake_conn()->rev);    /* the broker stops reading */
    base = KR_STAT_GET(ST, client_to_upstream_bytes);
    req_produce(&req, 91, 1, 700 * 1024);
    w.stall_ms = 1000;
    /* the next piece once krelay took the last one (client_to_upstream_bytes counts what
       went into the pipe), until it stops reading the client */
    while (sent < req.n && waiting(&w, progress() + sent)) {
        s = T.w->sessions;
        if (s != NULL && s->upl.queued > 0 && !s->client.reading) {
            break;
        }
        if (KR_STAT_GET(ST, client_to_upstream_bytes) - base >= sent) {
            piece = req.n - sent < 1000 ? req.n - sent : 1000;
            n = write(c->fd, req.b + sent, piece);
            sent += n > 0 ? (size_t)n : 0;
        }
        pump_once();
    }
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_lt(sent, req.n);
    ck_assert_uint_gt(s->upl.left, 0);
    ck_assert_msg(!s->client.reading, "krelay kept reading the client "
                  "with %zu of %zu bytes in the pipe (splice: EAGAIN)",
                  s->upl.queued, T.w->pipes.pipe_bytes);
    /* the broker reads again: every byte arrives, in order */
    event_add(fake_conn()->rev, NULL);
    cli_send(c, req.b + sent, req.n - sent);
    bput(&all, req.b, req.n);
    fake_expect(&all);
    exp.n = 0;
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    pipes_returned();
    free(all.b);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The client stops reading while a spliced response of 6 MiB is on its
 * way (more than the sockets' buffers and the 1 MiB pipe): krelay stops
 * reading the upstream with bytes in the pipe, and after
 * request_timeout_margin_ms the client is blamed, not the upstream.
 * _i: the fake writes at once, or 1000 bytes at a time: krelay splices
 * each piece on its own, one pipe slot (a page) each, so the pipe's 256
 * slots run out long before its 1 MiB: splice(2) then says EAGAIN with
 * the pipe "full" at about 256 KB.
 */
START_TEST(splice_client_stalls)
{
    struct bb req = { 0 };
    struct kr_session *s;
    struct wait w = { 0 };
    size_t most = 0;
    struct cli *c;
    char *log;

    log_capture();
    T.uc.request_timeout_margin_ms = 200;
    T.fb.chunk = _i == 0 ? 0 : 1000;
    c = splice_heartbeat_setup(51, 6 << 20, 65536, &req);
    event_del(c->rev);          /* the client stops reading */
    fake_release(&T.fb);
    while ((s = T.w->sessions) != NULL && waiting(&w, progress())) {
        most = s->dn.queued > most ? s->dn.queued : most;
        pump_once();
    }
    ck_assert_ptr_null(T.w->sessions);
    ck_assert_uint_gt(most, 0);
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    ck_assert_uint_lt(KR_STAT_GET(ST, upstream_to_client_bytes), req.n + T.fb.extra);
    log = log_text();
    ck_assert_msg(strstr(log, "client is not reading its responses") !=
                  NULL && strstr(log, "stopped in the middle") == NULL,
                  "the upstream was blamed with at most %zu of %zu bytes "
                  "in the pipe; log: %s", most, T.w->pipes.pipe_bytes, log);
    free(log);
    closed_by(1, 0, 0);
    free(req.b);
}
END_TEST

/*
 * A client that reads, slowly, is not one that stopped: with MiBs in its
 * socket's send buffer the kernel tells krelay "writable" only after
 * much of it drained, so krelay writes nothing for longer than
 * request_timeout_margin_ms while the client keeps taking bytes.  krelay
 * sees them go (SIOCOUTQ) and waits; the client gets every byte.
 * _i: splice on (the bytes wait in the pipe too) or off.
 */
START_TEST(client_slow_reader)
{
    struct bb req = { 0 }, exp = { 0 };
    int64_t until;
    struct cli *c;
    uint8_t buf[16384];

    log_capture();
    T.uc.request_timeout_margin_ms = 300;
    c = splice_heartbeat_setup(61, 8 << 20, 16384, &req);
    T.lc.splice_min_bytes = _i == 0 ? SPLICE_MIN : 0;
    /* built now: building 8 MiB takes seconds under valgrind, and a
       client that pauses that long between the slow and the fast part
       is (rightly) closed as not reading */
    expected_echo(&req, T.fb.extra, &exp);
    event_del(c->rev);          /* the client reads by hand, slowly */
    fake_release(&T.fb);
    /* up to 16 KiB every 10 ms for 2.4 s (eight margins): well above
       KR_DRAIN_MIN_BYTES a margin, yet krelay is woken to write only
       after much of its MiB-sized socket buffer drained */
    until = kr_clock_timer_ms() + 2400;
    while (kr_clock_timer_ms() < until && T.w->sessions != NULL) {
        ssize_t n = read(c->fd, buf, sizeof(buf));

        if (n > 0) {
            evbuffer_add(c->in, buf, (size_t)n);
        }
        pump_once();
        usleep(10000);
    }
    ck_assert_msg(T.w->sessions != NULL, "a slow reader was closed "
                  "after %zu bytes: %s", evbuffer_get_length(c->in),
                  strstr(log_text(), "client is not"));
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_CLIENT), 0);
    event_add(c->rev, NULL);    /* now it reads at full speed */
    ck_assert_msg(cli_has(c, exp.n), "client got %zu of %zu bytes, %s: %s",
                  evbuffer_get_length(c->in), exp.n,
                  c->closed ? "closed" : "stalled", log_text());
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    if (_i == 0) {
        ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    }
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The upstream closes in the middle of a spliced run (400 KB of a 1 MB
 * cut-through response sent): the client connection is closed at once,
 * blamed on the upstream, with part of the frame delivered, and the pipe
 * goes back.
 */
START_TEST(splice_upstream_closes_mid_run)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    c = splice_heartbeat_setup(71, 1000000, 0, &req);
    fake_release_part(400000);
    ck_assert(cli_has(c, 400000));
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_uint_gt(T.w->sessions->dn.left, 0);
    ck_assert_int_eq(shutdown(fake_conn()->fd, SHUT_WR), 0);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 400000);
    wait_no_session();
    closed_by(0, 1, 0);
    log = log_text();
    ck_assert_msg(strstr(log, "in the middle of a response") != NULL,
                  "log: %s", log);
    free(log);
    free(req.b);
}
END_TEST

/*
 * The client goes away (close, unread bytes: a reset) in the middle of a
 * spliced 2 MB response: the session closes at once, blamed on the
 * client, and the pipe (full or not) is given back.
 */
START_TEST(splice_client_closes_mid_run)
{
    struct bb req = { 0 };
    struct cli *c;

    c = splice_heartbeat_setup(75, 2000000, 65536, &req);
    fake_release_part(300000);
    ck_assert(cli_has(c, 300000));
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_uint_gt(T.w->sessions->dn.left, 0);
    fake_release(&T.fb);
    event_del(c->rev);
    close(c->fd);
    c->fd = -1;
    wait_no_session();
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    closed_by(1, 0, 0);
    free(req.b);
}
END_TEST

/*
 * The upstream sends a whole 1.25 MiB cut-through response and closes
 * while the client does not read: when the broker is done, the pipe
 * still holds part of the response (the client's socket buffers, 64 KiB
 * each way, hold far less).  When the client reads again it gets every
 * byte, then the connection closes (the upstream's end, no timeout).
 */
START_TEST(splice_upstream_closes_after_run)
{
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s;
    struct cli *c;

    c = splice_heartbeat_setup(81, 5 << 18, 65536, &req);
    proxy_sndbuf(true, 65536);
    event_del(c->rev);          /* the client does not read for now */
    fake_release(&T.fb);
    fake_wait_written();
    ck_assert_int_eq(shutdown(fake_conn()->fd, SHUT_WR), 0);
    pump_for(50);               /* krelay may see the end: too early */
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_gt(s->dn.queued, 0);
    ck_assert(!c->closed);
    event_add(c->rev, NULL);    /* the client reads again */
    expected_echo(&req, T.fb.extra, &exp);
    cli_expect(c, &exp);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    wait_no_session();
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 1);
    ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    ck_assert_int_eq(T.w->pipes.nused, 0);
    free(req.b);
    free(exp.b);
}
END_TEST

/* Pump until the one session has read n bytes from its client. */
static bool
session_read(uint64_t n)
{
    struct wait w = { 0 };

    while (T.w->sessions != NULL && T.w->sessions->client.bytes_in < n &&
           waiting(&w, progress())) {
        pump_once();
    }
    return T.w->sessions != NULL && T.w->sessions->client.bytes_in >= n;
}

/*
 * SIGTERM's drain (issue 12) catches a request frame forwarded in part:
 * a Heartbeat and the first half of a 300 KiB Produce went upstream when
 * the worker drains.  The rest of the Produce, which the client sends
 * after, still goes to the broker (its start is there and its answer is
 * owed); the Heartbeat sent behind it does not; the client gets both
 * answers and the connection closes in order (cause "other"), not by a
 * timeout.  (krelay used to discard the rest and wait, until
 * drain_timeout_ms, for an answer the broker could not give: the
 * client's request was lost.)  The broker holds its answers until the
 * client sent everything (fb.hold), so the order of events is fixed.
 * _i 0: the rest read through krelay; 1: spliced (splice_min_bytes);
 * 2: an Acks=0 Produce: no answer owed for it, the connection waits for
 * its rest all the same (it was sent before the drain).
 */
START_TEST(drain_finishes_partial_request)
{
    struct bb hb = { 0 }, prod = { 0 }, tail = { 0 }, sent = { 0 };
    struct bb exp = { 0 };
    size_t half;
    struct cli *c;

    if (_i == 1) {
        T.lc.splice_min_bytes = SPLICE_MIN;
    }
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&hb, 1);
    req_produce(&prod, 2, _i == 2 ? 0 : 1, 300 * 1024);
    half = prod.n / 2;
    bput(&tail, prod.b + half, prod.n - half);
    req_heartbeat(&tail, 3);
    cli_send(c, hb.b, hb.n);
    cli_send(c, prod.b, half);
    ck_assert_msg(fake_has_read(hb.n + half), "the broker read %zu bytes",
                  fake_read_bytes());
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_uint_eq(T.w->sessions->req_remain, prod.n - half);

    kr_worker_drain(T.w);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert(T.w->sessions->closing);
    ck_assert_uint_eq(T.w->sessions->req_remain, prod.n - half);
    cli_send(c, tail.b, tail.n);
    bput(&sent, hb.b, hb.n);
    bput(&sent, prod.b, prod.n);
    fake_expect(&sent);
    ck_assert(session_read(hb.n + half + tail.n));
    ck_assert_uint_eq(T.w->sessions->req_remain, 0);
    ck_assert(!c->closed);

    fake_release(&T.fb);
    expected_echo(&hb, 0, &exp);
    if (_i != 2) {
        expected_echo(&prod, 0, &exp);
    }
    cli_expect(c, &exp);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    wait_no_session();
    /* the last Heartbeat never reached the broker */
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), sent.n);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), _i == 2 ? 1 : 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, client_to_upstream_bytes), sent.n);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_OTHER), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_UPSTREAM), 0);
    if (_i == 1) {
        ck_assert_uint_gt(KR_STAT_GET(ST, spliced_bytes), 0);
        pipes_returned();
    } else {
        ck_assert_uint_eq(KR_STAT_GET(ST, spliced_bytes), 0);
    }
    free(hb.b);
    free(prod.b);
    free(tail.b);
    free(sent.b);
    free(exp.b);
}
END_TEST

/*
 * SIGTERM's drain while the broker is slow to read: Produce requests
 * with Acks=0 (no answer owed, so nothing keeps the connection open
 * after the drain by the FIFO's count) that krelay had taken from the
 * client are still in its buffer for the upstream.  They were sent
 * before the drain: the connection closes only once the broker has
 * every byte of them (and the rest of the frame being read at the time,
 * none after it).  (krelay used to close at once and lose them.)
 */
START_TEST(drain_writes_acks0_taken)
{
    struct bb req = { 0 };
    struct kr_session *s = NULL;
    struct wait wt = { 0 }, w2 = { 0 };
    struct cli *c;
    size_t sent = 0, flen, off;
    uint64_t taken;
    ssize_t w;
    int i;

    T.fb.no_read = true;        /* the broker does not read, yet */
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 256; i++) {
        req_produce(&req, i, 0, 60000);     /* about 15 MiB */
    }
    flen = req.n / 256;
    /* write until the client cannot and krelay stopped reading it */
    while (sent < req.n && waiting(&wt, progress() + sent)) {
        w = write(c->fd, req.b + sent, req.n - sent);
        if (w > 0) {
            sent += (size_t)w;
        }
        pump_once();
        s = T.w->sessions;
        if (s != NULL && w < 0 && !s->client.reading) {
            break;
        }
    }
    ck_assert_ptr_nonnull(s);
    ck_assert(!s->client.reading);
    ck_assert_uint_lt(sent, req.n);
    ck_assert_uint_gt(evbuffer_get_length(s->up.out), 0);
    taken = KR_STAT_GET(ST, client_to_upstream_bytes);

    kr_worker_drain(T.w);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert(T.w->sessions->closing);
    for (i = 0; i < T.fb.n; i++) {
        event_add(T.fb.c[i]->rev, NULL);    /* the broker reads now */
    }
    ck_assert(cli_wait_closed(c));
    wait_no_session();
    /* the broker reads what krelay wrote before its FIN */
    while (evbuffer_get_length(T.fb.log) < KR_STAT_GET(ST, client_to_upstream_bytes) &&
           waiting(&w2, progress())) {
        pump_once();
    }
    /* whole frames, a prefix of what the client sent: every byte krelay
       had taken, then the rest of the frame it was in */
    off = evbuffer_get_length(T.fb.log);
    ck_assert_uint_eq(off % flen, 0);
    ck_assert_uint_ge(off, taken);
    ck_assert_uint_lt(off, taken + flen);
    ck_assert_uint_eq(off, KR_STAT_GET(ST, client_to_upstream_bytes));
    ck_assert(memcmp(evbuffer_pullup(T.fb.log, -1), req.b, off) == 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_OTHER), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 0);
    free(req.b);
}
END_TEST

/*
 * Requests in flight when a connection ends, the close line's words
 * (issue 14).  _i 0, 1: the client ends with 1 or 2 unanswered
 * requests (a consumer's long-poll Fetch that `kcat -C -e` gives up on),
 * the broker, seeing the end, closes too: the normal end of a
 * connection, the client's, worded as one ("client closed the
 * connection with 1 request in flight").  _i 2, 3: the broker closes
 * first with 1 or 2 unanswered: the upstream's fault, a warning.
 */
START_TEST(close_with_requests_in_flight)
{
    struct bb req = { 0 };
    struct cli *c;
    char *log, want[128], level[16];
    const char *at, *bol;
    int i, n = _i % 2 + 1;
    bool client_first = _i < 2;

    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    T.fb.mode = FB_SILENT;
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < n; i++) {
        req_heartbeat(&req, i + 1);
    }
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    ck_assert_int_eq(shutdown(client_first ? c->fd : fake_conn()->fd,
                              SHUT_WR), 0);
    ck_assert(cli_wait_closed(c));
    wait_no_session();
    if (client_first) {
        closed_by(1, 0, 0);
    } else {
        closed_by(0, 1, 0);
    }
    log = log_text();
    /* info lines end with the bytes moved, warnings do not */
    snprintf(want, sizeof(want), "%s with %d request%s in flight%s",
             client_first ? "] client closed the connection"
                          : ": closed the connection", n, n == 1 ? "" : "s",
             client_first ? " (" : "\n");
    at = strstr(log, want);
    ck_assert_msg(at != NULL, "want '%s' in the log: %s", want, log);
    for (bol = at; bol > log && bol[-1] != '\n'; bol--) {
    }
    snprintf(level, sizeof(level), "%s: [c#", client_first ? "info" : "warn");
    ck_assert_msg(strstr(bol, level) != NULL && strstr(bol, level) < at,
                  "want '%s' on the line: %s", level, log);
    ck_assert_msg(strstr(log, "unanswered") == NULL, "log: %s", log);
    kr_log_level_cur = KR_LOG_WARN;
    free(log);
    free(req.b);
}
END_TEST

/* ---- krelay's own requests (KR_INF_INTERNAL) ---------------------------- */

struct internal_got {
    int calls, closed;
    int16_t key, ver;
    struct bb payload;
};

static void
internal_cb(struct kr_session *s, void *arg, int16_t key, int16_t ver,
            struct evbuffer *payload)
{
    struct internal_got *g = arg;
    size_t n;

    (void)s;
    g->calls++;
    g->key = key;
    g->ver = ver;
    if (payload == NULL) {
        g->closed++;
        return;
    }
    n = evbuffer_get_length(payload);
    g->payload.n = 0;
    bput(&g->payload, evbuffer_pullup(payload, -1), n);
    evbuffer_drain(payload, n);
}

/*
 * A request krelay sends on a client's upstream connection: the broker
 * sees it between the client's frames, its answer goes to krelay, and
 * the client gets exactly its own answers, in order.
 */
/*
 * issue 10: a legacy client that sends no ApiVersions, on a listener
 * with translate_legacy, krelay fresh (its metadata connection learned
 * nothing: the fake never answers it).  _i 0: no broker_profile: before
 * the client's first Produce v2, krelay's own ApiVersions v0 (its
 * CorrelationId, ClientId "krelay") goes first on that connection; its
 * answer (Produce from v3) is krelay's alone; the Produce v2 goes up as
 * v3 with a RecordBatch v2 and comes back as v2; the pipelined requests
 * behind it keep their order.  _i 1: broker_profile = kafka-4.0.0: no
 * question asked, the profile wins.  _i 2: the broker answers it with
 * garbage; _i 3: not at all (request_timeout_margin_ms): the client is
 * closed with one line, its requests never forwarded.
 */
/* a magic 1 message set of two messages (check_analyse's LEGACY_GOOD) */
#define AV_MSGSET "AAAAAAAAAAAAAAAcqh9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbwAA" \
    "AAAAAAABAAAAGx+LXQkBAAAAAYvP5WgB/////wAAAAV3b3JsZA=="

/* Produce v2 (Acks 1) of the message set to "orders" partition 0. */
static void
req_produce_v2(struct bb *b, int32_t corr)
{
    uint8_t set[128];
    size_t at = req_begin(b, KR_API_PRODUCE, 2, corr);
    int n = EVP_DecodeBlock(set, (const uint8_t *)AV_MSGSET,
                            (int)strlen(AV_MSGSET));

    ck_assert_int_eq(n, 81);
    n -= 2;                     /* "==": two bytes of padding */
    b16(b, 1);                  /* Acks */
    b32(b, 1000);               /* TimeoutMs */
    b32(b, 1);
    bstr(b, "orders");
    b32(b, 1);
    b32(b, 0);                  /* Index */
    b32(b, n);                  /* Records */
    bput(b, set, (size_t)n);
    bend(b, at);
}

/* The frame at *off of the fake's log (advanced past it). */
static const uint8_t *
log_frame(size_t *off, size_t *flen)
{
    const uint8_t *p = evbuffer_pullup(T.fb.log, -1);
    size_t n = evbuffer_get_length(T.fb.log);

    ck_assert_uint_ge(n, *off + 4);
    *flen = 4 + (size_t)kr_frame_i32(p + *off);
    ck_assert_uint_ge(n, *off + *flen);
    p += *off;
    *off += *flen;
    return p;
}

/*
 * The frame is a Produce v3, CorrelationId corr, Acks acks, of one
 * partition (its records run to the frame's end): one RecordBatch v2.
 */
static void
expect_produce_v3_acks(const uint8_t *f, size_t flen, int32_t corr,
                       int16_t acks)
{
    size_t off = 14 + 5;        /* header: ClientId "check" */

    ck_assert_int_eq(kr_frame_i16(f + 4), KR_API_PRODUCE);
    ck_assert_int_eq(kr_frame_i16(f + 6), 3);
    ck_assert_int_eq(kr_frame_i32(f + 8), corr);
    ck_assert_int_eq(kr_frame_i16(f + off), -1);        /* TransactionalId */
    ck_assert_int_eq(kr_frame_i16(f + off + 2), acks);  /* Acks */
    off += 2 + 2 + 4 + 4 + 2 + 6 + 4 + 4;               /* to Records */
    ck_assert_uint_ge(flen, off + 4 + 61);
    ck_assert_int_eq(kr_frame_i32(f + off), (int32_t)(flen - off - 4));
    ck_assert_int_eq(f[off + 4 + 16], 2);               /* magic */
    ck_assert_int_eq(kr_frame_i32(f + off + 4 + 57), 2); /* RecordsCount */
}

/* The frame is a Produce v3 (CorrelationId corr, Acks acks) of one
   partition whose one RecordBatch v2 holds n records. */
static void
expect_produce_v3_count(const uint8_t *f, size_t flen, int32_t corr,
                        int16_t acks, int32_t n)
{
    size_t off = 14 + 5 + 2 + 2 + 4 + 4 + 2 + 6 + 4 + 4;

    ck_assert_int_eq(kr_frame_i16(f + 4), KR_API_PRODUCE);
    ck_assert_int_eq(kr_frame_i16(f + 6), 3);
    ck_assert_int_eq(kr_frame_i32(f + 8), corr);
    ck_assert_int_eq(kr_frame_i16(f + 14 + 5 + 2), acks);
    ck_assert_uint_ge(flen, off + 4 + 61);
    ck_assert_int_eq(kr_frame_i32(f + off), (int32_t)(flen - off - 4));
    ck_assert_int_eq(f[off + 4 + 16], 2);               /* magic */
    ck_assert_int_eq(kr_frame_i32(f + off + 4 + 57), n); /* RecordsCount */
}

/* expect_produce_v3_acks with Acks 1. */
static void
expect_produce_v3(const uint8_t *f, size_t flen, int32_t corr)
{
    expect_produce_v3_acks(f, flen, corr, 1);
}

START_TEST(legacy_asks_apiversions)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    const uint8_t *f;
    size_t off = 0, flen;
    struct cli *c;
    char *log, want[160];

    T.lc.translate_legacy = true;
    T.fb.answer_produce = true;
    T.fb.av_client = _i == 2 ? AVC_ECHO : _i == 3 ? AVC_SILENT : AVC_ANSWER;
    if (_i == 1) {
        T.uc.broker_profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    }
    if (_i == 3) {
        T.uc.request_timeout_margin_ms = 300;
    }
    log_capture();
    kr_log_level_cur = KR_LOG_DEBUG;
    start();
    c = cli_open(boot_port(), 0);
    /* pipelined: Produce v2, Heartbeat v0 (kept by Kafka 4), Produce v2 */
    req_heartbeat(&hb, 2);
    req_produce_v2(&req, 1);
    bput(&req, hb.b, hb.n);
    req_produce_v2(&req, 3);
    cli_send(c, req.b, req.n);
    if (_i >= 2) {
        ck_assert(cli_wait_closed(c));
        ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
        /* krelay's ApiVersions only: nothing of the client's went up */
        f = log_frame(&off, &flen);
        ck_assert_int_eq(kr_frame_i16(f + 4), KR_API_API_VERSIONS);
        ck_assert_uint_eq(evbuffer_get_length(T.fb.log), flen);
        if (_i == 2) {
            snprintf(want, sizeof(want), "answered krelay's own ApiVersions "
                     "v0 with ");
        } else {
            snprintf(want, sizeof(want), "sent no response to krelay's own "
                     "ApiVersions v0 CorrelationId %d", KR_SESSION_AV_CORR);
        }
        log = log_text();
        ck_assert_msg(strstr(log, want) != NULL, "%s", log);
        free(log);
        free(req.b);
        free(hb.b);
        return;
    }
    /* the client gets the answers to its three requests, nothing else:
       the Produce v2 answers as the broker's v3 ones (same layout) */
    fake_produce_response(&exp, 1);
    expected_echo(&hb, 0, &exp);
    fake_produce_response(&exp, 3);
    cli_expect(c, &exp);
    pump_for(50);
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert(!c->closed);
    /* what the broker got, in order */
    if (_i == 0) {
        f = log_frame(&off, &flen);
        ck_assert_uint_eq(flen, 4 + 16);
        ck_assert_int_eq(kr_frame_i16(f + 4), KR_API_API_VERSIONS);
        ck_assert_int_eq(kr_frame_i16(f + 6), 0);
        ck_assert_int_eq(kr_frame_i32(f + 8), KR_SESSION_AV_CORR);
        ck_assert_int_eq(kr_frame_i16(f + 12), 6);
        ck_assert(memcmp(f + 14, "krelay", 6) == 0);
        ck_assert_uint_eq(KR_STAT_GET(ST, requests_internal), 1);
        ck_assert_uint_eq(KR_STAT_GET(ST, responses_internal), 1);
        ck_assert_ptr_nonnull(T.w->sessions);
        ck_assert_ptr_nonnull(T.w->sessions->av);
        ck_assert_int_eq(T.w->sessions->av[KR_API_PRODUCE].min, 3);
    } else {
        ck_assert_uint_eq(KR_STAT_GET(ST, requests_internal), 0);
        ck_assert_ptr_null(T.w->sessions->av);
    }
    f = log_frame(&off, &flen);
    expect_produce_v3(f, flen, 1);
    f = log_frame(&off, &flen);
    ck_assert_uint_eq(flen, hb.n);              /* as the client sent it */
    ck_assert(memcmp(f, hb.b, hb.n) == 0);
    f = log_frame(&off, &flen);
    expect_produce_v3(f, flen, 3);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), off);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 3);
    log = log_text();
    ck_assert((strstr(log, "krelay asks upstream") != NULL) == (_i == 0));
    ck_assert((strstr(log, "Kafka 4, Produce from v3") != NULL) == (_i == 0));
    free(log);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * Produce v2 to "orders" with Acks acks: partition 0 the message set,
 * partition 1 (when bad) the same with a byte of its first message's
 * value changed (its CRC no longer matches).
 */
static void
req_produce_v2_bad(struct bb *b, int32_t corr, int16_t acks, bool bad)
{
    uint8_t set[128];
    size_t at = req_begin(b, KR_API_PRODUCE, 2, corr);
    int n = EVP_DecodeBlock(set, (const uint8_t *)AV_MSGSET,
                            (int)strlen(AV_MSGSET));

    ck_assert_int_eq(n, 81);
    n -= 2;                     /* "==": two bytes of padding */
    b16(b, acks);
    b32(b, 1000);               /* TimeoutMs */
    b32(b, 1);
    bstr(b, "orders");
    b32(b, bad ? 2 : 1);
    b32(b, 0);                  /* Index */
    b32(b, n);                  /* Records */
    bput(b, set, (size_t)n);
    if (bad) {
        b32(b, 1);
        b32(b, n);
        set[n / 2 - 1] ^= 1;    /* the first message's value */
        bput(b, set, (size_t)n);
    }
    bend(b, at);
}

/*
 * issue 10: a Produce v2 with Acks=0 whose partition 1 does not convert
 * (its CRC), a Heartbeat behind it.  No response can carry partition 1's
 * CORRUPT_MESSAGE: as a broker does, partition 0 goes up (Produce v3,
 * Acks 0) and the connection closes after it, one line; the Heartbeat is
 * never forwarded.  _i 0: the client's first request, which may come
 * before krelay's upstream connection is up (the close waits for it to
 * take the Produce: it was lost); _i 1: after a round trip.
 */
START_TEST(legacy_acks0_partly_bad)
{
    struct bb req = { 0 }, hb = { 0 }, exp = { 0 };
    const uint8_t *f;
    size_t off = 0, flen;
    struct cli *c;
    char *log;

    T.lc.translate_legacy = true;
    T.uc.broker_profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    log_capture();
    kr_log_level_cur = KR_LOG_NOTICE;
    start();
    c = cli_open(boot_port(), 0);
    if (_i == 1) {
        req_heartbeat(&hb, 1);
        cli_send(c, hb.b, hb.n);
        expected_echo(&hb, 0, &exp);
        cli_expect(c, &exp);
        f = log_frame(&off, &flen);
        ck_assert_uint_eq(flen, hb.n);
        hb.n = 0;
    }
    req_produce_v2_bad(&req, 2, 0, true);
    req_heartbeat(&req, 3);
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    /* the broker got partition 0 alone, Acks 0, and nothing after it */
    pump_for(50);
    f = log_frame(&off, &flen);
    expect_produce_v3_acks(f, flen, 2, 0);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), off);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_partitions_corrupt), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, legacy_translated,
                                    kr_stats_api_cell(KR_API_PRODUCE, 2)),
                      1);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refused), 0);
    ck_assert_uint_gt(KR_STAT_GET(ST, legacy_records_in_bytes), 0);
    ck_assert_uint_gt(KR_STAT_GET(ST, legacy_records_out_bytes), 0);
    log = log_text();
    ck_assert_msg(strstr(log, "Produce v2 CorrelationId 2 with Acks=0 has "
                         "records that do not convert in 1 partition (topic "
                         "orders partition 1: corrupt: ") != NULL, "%s", log);
    ck_assert_msg(strstr(log, ": others forwarded, closing the connection "
                         "(no response can carry CORRUPT_MESSAGE) (") !=
                  NULL, "%s", log);
    free(log);
    free(req.b);
    free(hb.b);
    free(exp.b);
}
END_TEST

/*
 * issue 10: legacy_batch_max_bytes 64 makes each of the Produce v2's two
 * messages a RecordBatch of its own: Produce v3+ takes one per
 * partition, so the first goes up as krelay's own Produce v3 (a round,
 * the client's CorrelationId), then the client's with the second.  _i
 * 0: the client gets one answer, BaseOffset the round's (41, not the
 * second answer's 141), counted; a Heartbeat behind it keeps its order.
 * _i 1: the broker answers the round with a body that does not decode:
 * the connection closes with one line blaming the upstream, nothing sent
 * to the client.  _i 2: the broker answers nothing, the client shuts
 * its side (unread: the Heartbeat behind the set is held, and the client
 * with it), then the broker closes: the close line counts the client's
 * requests and krelay's own apart (it said "2 requests" when the
 * Heartbeat went along), and what waited is freed.
 */
START_TEST(legacy_split_rounds)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    const uint8_t *f;
    size_t off = 0, flen;
    struct cli *c;
    char *log;

    T.lc.translate_legacy = true;
    T.lc.legacy_batch_max_bytes = 64;
    T.uc.broker_profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.fb.answer_produce = true;
    T.fb.produce_step = 100;
    T.fb.garbage_produce = _i == 1 ? 1 : 0;
    if (_i == 2) {
        T.fb.mode = FB_SILENT;
    }
    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    start();
    c = cli_open(boot_port(), 0);
    req_produce_v2(&req, 1);
    req_heartbeat(&hb, 2);
    bput(&req, hb.b, hb.n);
    cli_send(c, req.b, req.n);
    if (_i == 2) {
        pump_for(100);
        ck_assert_int_eq(shutdown(c->fd, SHUT_WR), 0);
        pump_for(100);
        /* the round alone went up; krelay keeps the upstream open while
           the rest of the set waits for its answer */
        ck_assert_int_eq(T.fb.nreq, 1);
        ck_assert(!c->closed);
        fake_close_clients(&T.fb);
        ck_assert(cli_wait_closed(c));
        wait_no_session();
        log = log_text();
        ck_assert_msg(strstr(log, ": closed the connection with 1 request "
                             "and 1 of krelay's own in flight") != NULL,
                      "%s", log);
        free(log);
        free(req.b);
        free(hb.b);
        return;
    }
    if (_i == 1) {
        ck_assert(cli_wait_closed(c));
        ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
        log = log_text();
        ck_assert_msg(strstr(log, "answered krelay's own Produce v3 (a batch "
                             "of a translated Produce v0-2 request) with a "
                             "response that does not decode") != NULL,
                      "%s", log);
        free(log);
        free(req.b);
        free(hb.b);
        return;
    }
    fake_produce_response(&exp, 1);         /* BaseOffset 41 */
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    pump_for(50);
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert(!c->closed);
    /* the broker got the round, the client's Produce, the Heartbeat: one
       message each */
    f = log_frame(&off, &flen);
    expect_produce_v3_count(f, flen, 1, 1, 1);
    f = log_frame(&off, &flen);
    expect_produce_v3_count(f, flen, 1, 1, 1);
    f = log_frame(&off, &flen);
    ck_assert_uint_eq(flen, hb.n);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), off);
    ck_assert_int_eq(T.fb.nproduce, 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_internal), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_internal), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 2);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * Three magic 1 messages ("k"/"hello", null/"world", "k3"/"third"), made
 * with python3 (struct.pack, zlib.crc32), and the first alone
 * (check_analyse.c's LEGACY_THREE, LEGACY_ONE): at
 * legacy_batch_max_bytes 80 each message is a RecordBatch of its own.
 */
#define SPLIT_THREE "AAAAAAAAAAAAAAAcqh9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbwAA" \
    "AAAAAAABAAAAG4KEvH8BAAAAAYvP5WgA/////wAAAAV3b3JsZAAAAAAAAAACAAAAHSaLUtg" \
    "BAAAAAYvP5WgBAAAAAmszAAAABXRoaXJk"
#define SPLIT_ONE "AAAAAAAAAAAAAAAcqh9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbw=="

/* The bytes of base64 text b64 into out (room for them); their count. */
static size_t
unb64(const char *b64, uint8_t *out)
{
    size_t l = strlen(b64);
    int n = EVP_DecodeBlock(out, (const uint8_t *)b64, (int)l);

    ck_assert_int_ge(n, 0);
    while (l > 0 && b64[l - 1] == '=') {
        l--, n--;
    }
    return (size_t)n;
}

/* Produce v2 (Acks 1) to "orders": partition 0 SPLIT_THREE, partition 1
   SPLIT_ONE.  At legacy_batch_max_bytes 80: two rounds (partition 0's
   first and second message), then the client's request with partition
   0's third and partition 1's. */
static void
req_produce_v2_split(struct bb *b, int32_t corr)
{
    uint8_t set[256];
    size_t at = req_begin(b, KR_API_PRODUCE, 2, corr), n;

    b16(b, 1);                  /* Acks */
    b32(b, 1000);               /* TimeoutMs */
    b32(b, 1);
    bstr(b, "orders");
    b32(b, 2);
    b32(b, 0);                  /* Index */
    n = unb64(SPLIT_THREE, set);
    b32(b, (int32_t)n);
    bput(b, set, n);
    b32(b, 1);                  /* Index */
    n = unb64(SPLIT_ONE, set);
    b32(b, (int32_t)n);
    bput(b, set, n);
    bend(b, at);
}

/* A Produce v2 response to "orders" (the v3 layout): partitions 0 and 1
   with err and BaseOffset base0, base1, LogAppendTimeMs -1. */
static void
rsp_produce_v2(struct bb *r, int32_t corr, int16_t err, int64_t base0,
               int64_t base1)
{
    size_t at = r->n;
    int p;

    b32(r, 0);
    b32(r, corr);
    b32(r, 1);
    bstr(r, "orders");
    b32(r, 2);
    for (p = 0; p < 2; p++) {
        int64_t base = p == 0 ? base0 : base1;

        b32(r, p);
        b16(r, err);
        b32(r, (int32_t)(base >> 32));
        b32(r, (int32_t)base);
        b32(r, -1);
        b32(r, -1);
    }
    b32(r, 0);                  /* ThrottleTimeMs */
    bend(r, at);
}

/* Pump until the fake broker has read n requests of the sessions (30 s
   at most), then 100 ms more: no other may come. */
static void
fake_wait_nreq(int n)
{
    int64_t end = mono_ms() + 30000;

    while (T.fb.nreq < n && mono_ms() < end) {
        pump_once();
    }
    pump_for(100);
    ck_assert_int_eq(T.fb.nreq, n);
}

/* The frame is a Produce v3 of "orders" (CorrelationId corr, Acks 1)
   with nparts partitions. */
static void
expect_produce_v3_parts(const uint8_t *f, int32_t corr, int32_t nparts)
{
    ck_assert_int_eq(kr_frame_i16(f + 4), KR_API_PRODUCE);
    ck_assert_int_eq(kr_frame_i16(f + 6), 3);
    ck_assert_int_eq(kr_frame_i32(f + 8), corr);
    ck_assert_int_eq(kr_frame_i32(f + 14 + 5 + 2 + 2 + 4), 1);
    ck_assert_int_eq(kr_frame_i32(f + 14 + 5 + 2 + 2 + 4 + 4 + 2 + 6),
                     nparts);
}

/* The translated Produce (two rounds) and a Heartbeat pipelined behind
   it, at legacy_batch_max_bytes 80; the client's connection. */
static struct cli *
rounds_start(struct bb *req, struct bb *hb)
{
    struct cli *c;

    T.lc.translate_legacy = true;
    T.lc.legacy_batch_max_bytes = 80;
    T.uc.broker_profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.fb.answer_produce = true;
    T.fb.produce_step = 100;
    log_capture();
    kr_log_level_cur = KR_LOG_INFO;
    start();
    c = cli_open(boot_port(), 0);
    req_produce_v2_split(req, 1);
    req_heartbeat(hb, 2);
    bput(req, hb->b, hb->n);
    cli_send(c, req->b, req->n);
    return c;
}

/*
 * issue 10: with a response to wait for, a translated Produce's rounds
 * go up one at a time: round 1 is not written before round 0's answer
 * came, the client's request not before round 1's, and the Heartbeat the
 * client pipelined behind it is held (not read on) until the set went
 * up; then everything is answered in order, BaseOffset the first
 * batch's.  Before: the rounds, the client's request and the Heartbeat
 * all went at once.
 */
START_TEST(legacy_rounds_one_at_a_time)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    const uint8_t *f;
    size_t off = 0, flen;
    struct cli *c;
    int k;

    T.fb.hold = true;
    c = rounds_start(&req, &hb);
    for (k = 0; k < 2; k++) {
        /* round k alone, partition 0's k-th message; nothing answered */
        fake_wait_nreq(k + 1);
        f = log_frame(&off, &flen);
        expect_produce_v3_count(f, flen, 1, 1, 1);
        ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
        ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds),
                          (uint64_t)k + 1);
        fake_release(&T.fb);
        T.fb.hold = true;
    }
    /* round 1 answered: the client's request (both partitions), then
       the Heartbeat, released */
    fake_wait_nreq(4);
    f = log_frame(&off, &flen);
    expect_produce_v3_parts(f, 1, 2);
    f = log_frame(&off, &flen);
    ck_assert_uint_eq(flen, hb.n);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), off);
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    fake_release(&T.fb);
    /* partition 0 at round 0's BaseOffset (40 + 1), partition 1 at the
       third Produce's (40 + 1 + 2 * 100) */
    rsp_produce_v2(&exp, 1, 0, 41, 241);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_int_eq(T.fb.nproduce, 3);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds_failed), 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_internal), 2);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * issue 10: the client closes its connection while its set goes up (it
 * gave up, and retries on a new connection): once round 0's answer comes,
 * nothing more of the set goes up (neither round 1 nor the client's
 * request) and neither does the Heartbeat it sent after, then the
 * session closes.  Before: krelay did not read the client while the
 * rounds went, saw its end only after them, and sent everything, so the
 * abandoned set landed among the retry's batches.
 */
START_TEST(legacy_rounds_client_gone)
{
    struct bb req = { 0 }, hb = { 0 };
    const uint8_t *f;
    size_t off = 0, flen;
    struct cli *c;
    char *log;

    log_capture();
    T.fb.hold = true;
    c = rounds_start(&req, &hb);
    fake_wait_nreq(1);
    f = log_frame(&off, &flen);
    expect_produce_v3_count(f, flen, 1, 1, 1);
    event_del(c->rev);
    close(c->fd);
    c->fd = -1;
    fake_release(&T.fb);
    wait_no_session();
    ck_assert_int_eq(T.fb.nreq, 1);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), off);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds_failed), 1);
    log = log_text();
    ck_assert_msg(strstr(log, "client closed the connection while its "
                         "Produce v2 CorrelationId") != NULL &&
                  strstr(log, ": 1 of 3 sent, the rest and what it sent "
                         "after not") != NULL, "%s", log);
    free(log);
    free(req.b);
    free(hb.b);
}
END_TEST

/*
 * issue 10: the broker closes while round 0 waits for its answer: the
 * close line counts the rounds not written yet apart (it said they were
 * in flight).
 */
START_TEST(legacy_rounds_upstream_closes)
{
    struct bb req = { 0 }, hb = { 0 };
    struct cli *c;
    char *log;

    log_capture();
    T.fb.hold = true;
    c = rounds_start(&req, &hb);
    fake_wait_nreq(1);
    fake_close_clients(&T.fb);
    ck_assert(cli_wait_closed(c));
    wait_no_session();
    log = log_text();
    ck_assert_msg(strstr(log, "closed the connection with 1 request and 2 "
                         "of krelay's own (1 of them, and the request they "
                         "go ahead of, not sent yet) in flight") != NULL,
                  "%s", log);
    free(log);
    free(req.b);
    free(hb.b);
}
END_TEST

/*
 * issue 10: a round answered with an error: nothing more of the set goes
 * up (neither the next round nor the client's request), and krelay
 * answers the client's request with that error for its every partition
 * (BaseOffset -1), mapped for its version; then the held Heartbeat goes
 * on and is answered in order.  _i 0: round 0 gets NOT_LEADER_OR_FOLLOWER
 * (6); _i 1: round 1 gets KAFKA_STORAGE_ERROR (56), which a Produce v2
 * client gets as 6 (ProduceResponse.toStruct, <= 3).  Before: the other
 * rounds and the client's request were stored, the client's retry
 * stored the set again after them (issue 10's reorder).
 */
START_TEST(legacy_rounds_error)
{
    struct bb req = { 0 }, exp = { 0 }, hb = { 0 };
    const uint8_t *f;
    size_t off = 0, flen;
    struct cli *c;
    char *log, want[300];
    int k;

    T.fb.produce_err_at = _i + 1;
    T.fb.produce_err = _i == 0 ? KR_KERR_NOT_LEADER_OR_FOLLOWER
                               : KR_KERR_KAFKA_STORAGE_ERROR;
    c = rounds_start(&req, &hb);
    rsp_produce_v2(&exp, 1, KR_KERR_NOT_LEADER_OR_FOLLOWER, -1, -1);
    expected_echo(&hb, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    /* the broker got the rounds up to the one that failed, then the
       Heartbeat: no other round, not the client's Produce */
    fake_wait_nreq(_i + 2);
    for (k = 0; k <= _i; k++) {
        f = log_frame(&off, &flen);
        expect_produce_v3_count(f, flen, 1, 1, 1);
    }
    f = log_frame(&off, &flen);
    ck_assert_uint_eq(flen, hb.n);
    ck_assert_int_eq(kr_frame_i16(f + 4), KR_API_HEARTBEAT);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), off);
    ck_assert_int_eq(T.fb.nproduce, _i + 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds),
                      (uint64_t)_i + 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_produce_rounds_failed), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, errors_answered,
                                    kr_stats_kerr_cell(T.fb.produce_err)),
                      1);
    log = log_text();
    snprintf(want, sizeof(want), "Produce v2 CorrelationId 1 not sent: "
             "krelay's own Produce v3 ahead of it (%d of 2, with the "
             "batches before its partitions' last) was answered with %s "
             "for topic orders partition 0", _i + 1,
             _i == 0 ? "NOT_LEADER_OR_FOLLOWER (6)"
                     : "KAFKA_STORAGE_ERROR (56)");
    ck_assert_msg(strstr(log, want) != NULL, "%s", log);
    free(log);
    free(req.b);
    free(exp.b);
    free(hb.b);
}
END_TEST

/*
 * issue 10: translate_legacy off, a client address refused again within
 * legacy_refuse_window_ms waits legacy_refuse_delay_ms for its answer
 * (a client reconnecting in a loop is slowed), counted; the first
 * refusal goes at once.  _i 1: krelay drains 100 ms into the second
 * one's hold: the answer goes then (a drain waits for no hold, as for
 * the Acks=0 close: legacy_acks0_refusal_delayed), the same bytes, and
 * the connection closes after it.
 */
START_TEST(legacy_refusal_delayed)
{
    struct bb req = { 0 };
    struct cli *c;
    int64_t t0, took[2];
    size_t len[2];
    unsigned char first[64];
    int k;

    T.lc.translate_legacy = false;
    T.lc.legacy_refuse_delay_ms = 400;
    T.lc.legacy_refuse_window_ms = 10000;
    T.uc.broker_profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    start();
    req_produce_v2(&req, 5);
    for (k = 0; k < 2; k++) {
        c = cli_open(boot_port(), 0);
        t0 = mono_ms();
        cli_send(c, req.b, req.n);
        if (k == 1 && _i == 1) {
            pump_for(100);
            ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
            ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refusals_delayed), 1);
            kr_worker_drain(T.w);
        }
        ck_assert(cli_has(c, 4 + 4));
        took[k] = mono_ms() - t0;
        /* the answer: CorrelationId 5, ErrorCode UNSUPPORTED_VERSION */
        len[k] = 4 + (size_t)kr_frame_i32(evbuffer_pullup(c->in, 4));
        ck_assert(cli_has(c, len[k]));
        ck_assert_int_eq(kr_frame_i32(evbuffer_pullup(c->in, 8) + 4), 5);
        if (k == 0) {
            ck_assert_uint_le(len[0], sizeof(first));
            memcpy(first, evbuffer_pullup(c->in, -1), len[0]);
        } else {
            ck_assert_uint_eq(len[1], len[0]);
            ck_assert_int_eq(memcmp(evbuffer_pullup(c->in, -1), first,
                                    len[0]), 0);
        }
    }
    ck_assert_msg(took[0] < 300, "first refusal took %lld ms",
                  (long long)took[0]);
    if (_i == 1) {
        ck_assert_msg(took[1] >= 100 && took[1] < 300, "drained, second "
                      "refusal took %lld ms", (long long)took[1]);
        ck_assert(cli_wait_closed(c));
        ck_assert_msg(mono_ms() - t0 < 380, "drained, closed after %lld ms",
                      (long long)(mono_ms() - t0));
        wait_no_session();
        ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    } else {
        ck_assert_msg(took[1] >= 380, "second refusal took %lld ms",
                      (long long)took[1]);
    }
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refused), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refusals_delayed), 1);
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), 0);
    free(req.b);
}
END_TEST

/* How long the log's one close line that was held says it was: "; held
   N ms (" (-1: no such line, -2: more than one). */
static int64_t
log_held_ms(const char *log)
{
    const char *p = strstr(log, "; held "), *q;
    long long ms;

    if (p == NULL) {
        return -1;
    }
    q = strstr(p + 1, "; held ");
    if (q != NULL) {
        return -2;
    }
    ck_assert_int_eq(sscanf(p, "; held %lld ms (", &ms), 1);
    return (int64_t)ms;
}

/*
 * issue 10: translate_legacy off, a Produce v2 with Acks=0 is refused by
 * closing (no response can carry UNSUPPORTED_VERSION).  A client address
 * refused again within legacy_refuse_window_ms has that close held
 * legacy_refuse_delay_ms, as an answer is (legacy_refusal_delayed): a
 * client reconnecting in a loop is slowed.  The first connection closes
 * at once; the second sends a Heartbeat and the Produce: the Heartbeat's
 * answer, owed, still reaches the client, nothing the client sends
 * during the hold is read, and the close line says it was held.
 * _i 0: the broker answers during the hold, the close comes at its end;
 * 1: it answers after the hold: the close comes after the answer;
 * 2: krelay drains during the hold: the close comes then;
 * 3: the client goes away during the hold (shutdown, unnoticed as it is
 * not read): closed at the hold's end all the same, nothing left.
 */
START_TEST(legacy_acks0_refusal_delayed)
{
    static const char held_line[] =
        "(no response can carry UNSUPPORTED_VERSION); held ";
    static const char held_why[] =
        " ms (legacy_refuse_delay_ms: this client address was refused "
        "within legacy_refuse_window_ms) (";
    struct bb req = { 0 }, hb = { 0 }, hb2 = { 0 }, exp = { 0 };
    struct wait w = { 0 };
    struct cli *c;
    int64_t t0, took, held;
    uint64_t read_before;
    char *log;

    T.lc.translate_legacy = false;
    T.lc.legacy_refuse_delay_ms = 400;
    T.lc.legacy_refuse_window_ms = 10000;
    T.uc.broker_profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    log_capture();
    kr_log_level_cur = KR_LOG_NOTICE;
    start();
    req_produce_v2_bad(&req, 5, 0, false);

    /* the first refusal: closed at once, not held */
    c = cli_open(boot_port(), 0);
    t0 = mono_ms();
    cli_send(c, req.b, req.n);
    ck_assert(cli_wait_closed(c));
    took = mono_ms() - t0;
    ck_assert_msg(took < 300, "first refusal took %lld ms", (long long)took);
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    wait_no_session();
    log = log_text();
    ck_assert_msg(strstr(log, "Produce v2 CorrelationId 5 with Acks=0 is "
                         "below the brokers' versions (v3+, KIP-896)") !=
                  NULL, "%s", log);
    ck_assert_int_eq(log_held_ms(log), -1);
    free(log);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refusals_delayed), 0);

    /* again from the same address: a Heartbeat, then the Produce */
    T.fb.hold = true;
    c = cli_open(boot_port(), 0);
    req_heartbeat(&hb, 1);
    bput(&hb2, hb.b, hb.n);
    bput(&hb2, req.b, req.n);
    t0 = mono_ms();
    cli_send(c, hb2.b, hb2.n);
    w.stall_ms = 2000;          /* the broker holds the Heartbeat's answer */
    while (KR_STAT_GET(ST, legacy_refusals_delayed) == 0 && !c->closed &&
           waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_msg(KR_STAT_GET(ST, legacy_refusals_delayed) == 1,
                  "refusal not held (legacy_refusals_delayed %llu)",
                  (unsigned long long)KR_STAT_GET(ST,
                                                  legacy_refusals_delayed));
    ck_assert_msg(!c->closed, "closed after %lld ms, not held",
                  (long long)(mono_ms() - t0));
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert(T.w->sessions->closing);
    fake_expect(&hb);
    /* nothing more is read from the client meanwhile */
    read_before = T.w->sessions->client.bytes_in;
    ck_assert_uint_eq(read_before, hb2.n);
    hb2.n = 0;
    req_heartbeat(&hb2, 2);
    cli_send(c, hb2.b, hb2.n);
    pump_for(50);
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_uint_eq(T.w->sessions->client.bytes_in, read_before);
    ck_assert(!c->closed);
    expected_echo(&hb, 0, &exp);
    if (_i == 0) {
        fake_release(&T.fb);
        cli_expect(c, &exp);
        ck_assert(!c->closed);
    } else if (_i == 1) {
        pump_for(t0 + 600 - mono_ms());
        ck_assert(!c->closed);
        ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
        fake_release(&T.fb);
        cli_expect(c, &exp);
    } else if (_i == 2) {
        fake_release(&T.fb);
        cli_expect(c, &exp);
        pump_for(t0 + 100 - mono_ms());
        kr_worker_drain(T.w);
    } else {
        fake_release(&T.fb);
        cli_expect(c, &exp);
        ck_assert_int_eq(shutdown(c->fd, SHUT_RDWR), 0);
    }
    if (_i == 3) {
        wait_no_session();
    } else {
        ck_assert(cli_wait_closed(c));
    }
    took = mono_ms() - t0;
    if (_i == 2) {
        ck_assert_msg(took < 300, "drained, closed after %lld ms",
                      (long long)took);
    } else {
        ck_assert_msg(took >= (_i == 1 ? 580 : 380) && took < 1000,
                      "held refusal closed after %lld ms", (long long)took);
    }
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    wait_no_session();
    /* the Heartbeat sent during the hold never went up */
    ck_assert_uint_eq(evbuffer_get_length(T.fb.log), hb.n);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refused), 2);
    ck_assert_uint_eq(KR_STAT_GET(ST, legacy_refusals_delayed), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, conn_active), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    log = log_text();
    ck_assert_msg(strstr(log, held_line) != NULL, "%s", log);
    ck_assert_msg(strstr(log, held_why) != NULL, "%s", log);
    held = log_held_ms(log);
    if (_i == 2) {
        ck_assert_msg(held >= 80 && held < 300, "held %lld ms: %s",
                      (long long)held, log);
    } else {
        ck_assert_msg(held >= 400 && held < 450, "held %lld ms: %s",
                      (long long)held, log);
    }
    free(log);
    free(req.b);
    free(hb.b);
    free(hb2.b);
    free(exp.b);
}
END_TEST

START_TEST(internal_request_not_forwarded)
{
    struct bb req = { 0 }, own = { 0 }, exp = { 0 }, seen = { 0 };
    struct internal_got got = { 0 };
    struct wait w = { 0 };
    struct cli *c;

    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert_ptr_nonnull(T.w->sessions);
    req_heartbeat(&own, 900);
    ck_assert_int_eq(kr_session_internal_request(T.w->sessions,
                                                 own.b + 4, own.n - 4,
                                                 KR_API_HEARTBEAT, 0, 900,
                                                 internal_cb, &got),
                     KR_OK);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 1);
    ck_assert_int_eq(kr_inflight_head(&T.w->sessions->fifo)->kind,
                     KR_INF_INTERNAL);
    /* the client's next request goes after it */
    bput(&seen, req.b, req.n);
    bput(&seen, own.b, own.n);
    req.n = 0;
    req_heartbeat(&req, 2);
    bput(&seen, req.b, req.n);
    cli_send(c, req.b, req.n);
    fake_expect(&seen);
    while (got.calls == 0 && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_int_eq(got.calls, 1);
    ck_assert_int_eq(got.closed, 0);
    ck_assert_int_eq(got.key, KR_API_HEARTBEAT);
    ck_assert_int_eq(got.ver, 0);
    /* the fake's echo of krelay's own frame, without its size prefix */
    exp.n = 0;
    echo_response(&exp, own.b, own.n, 0, 0);
    ck_assert_uint_eq(got.payload.n, exp.n - 4);
    ck_assert(memcmp(got.payload.b, exp.b + 4, exp.n - 4) == 0);
    ck_assert_int_eq(kr_frame_i32(got.payload.b), 900);
    /* the client: only the answer to its own CorrelationId 2 */
    exp.n = 0;
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    pump_for(50);
    ck_assert_uint_eq(evbuffer_get_length(c->in), 0);
    ck_assert_uint_eq(T.w->sessions->fifo.len, 0);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_internal), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_internal), 1);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 2);
    free(req.b);
    free(own.b);
    free(exp.b);
    free(seen.b);
    free(got.payload.b);
}
END_TEST

/* Not between two frames (one half forwarded): not now.  Closed before
   the answer: its owner is told (payload NULL). */
START_TEST(internal_request_refused_mid_frame_and_closed)
{
    struct bb req = { 0 }, own = { 0 }, exp = { 0 };
    struct internal_got got = { 0 };
    struct wait w = { 0 };
    struct kr_session *s;
    struct cli *c;

    start();
    c = cli_open(boot_port(), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    free(exp.b);
    T.fb.mode = FB_SILENT;
    req.n = 0;
    req_heartbeat(&req, 2);
    /* its header (19 bytes) and 3 more: forwarded, the rest owed */
    cli_send(c, req.b, 22);
    while (T.w->sessions->req_remain == 0 && waiting(&w, progress())) {
        pump_once();
    }
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_gt(s->req_remain, 0);
    req_heartbeat(&own, 901);
    ck_assert_int_eq(kr_session_internal_request(s, own.b + 4, own.n - 4,
                                                 KR_API_HEARTBEAT, 0, 901,
                                                 internal_cb, &got),
                     KR_AGAIN);
    cli_send(c, req.b + 22, req.n - 22);
    memset(&w, 0, sizeof(w));
    while (s->req_remain > 0 && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_uint_eq(s->req_remain, 0);
    ck_assert_int_eq(kr_session_internal_request(s, own.b + 4, own.n - 4,
                                                 KR_API_HEARTBEAT, 0, 901,
                                                 internal_cb, &got),
                     KR_OK);
    ck_assert_int_eq(got.calls, 0);
    kr_session_close(s, KR_LOG_INFO, "test: closing");
    ck_assert_int_eq(got.calls, 1);
    ck_assert_int_eq(got.closed, 1);
    ck_assert_int_eq(got.key, KR_API_HEARTBEAT);
    free(req.b);
    free(own.b);
    free(got.payload.b);
}
END_TEST

/* ---- the transport seam under faults (kr_fault_xprt.h) ----------------- */

/*
 * Sessions created from now on use the fault-injecting transport on both
 * sides, with seed _i: short reads and writes, EAGAIN with and without
 * the opposite event, bytes held inside the transport, a handshake of
 * three steps.  Splice lanes are asked for (splice_min_bytes 1) but never
 * start: the transport has a record layer.
 */
static void
fault_on(int seed)
{
    struct kr_fault_conf fc = {
        .seed = (uint64_t)seed * 7919 + 17,
        .read_again = 100,
        .read_want_write = 100,
        .read_one = 100,
        .read_short = 150,
        .read_hold = 150,
        .write_want_read = 500,
        .write_again = 100,
        .write_one = 100,
        .write_short = 150,
        .hs_steps = 3,
        .hs_want_read = 500,
    };

    kr_fault_setup(&fc);
    T.conn_ops = &kr_fault_ops;
    T.lc.splice_min_bytes = 1;
}

/* Every session's connections ran the fault transport, its handshake
   first, and kept the stages; nothing was spliced. */
static void
fault_kept_stages(void)
{
    const struct kr_fault_stats *st = &kr_fault_stats;
    struct kr_session *s;

    for (s = T.w->sessions; s != NULL; s = s->next) {
        ck_assert_ptr_eq(s->client.ops, &kr_fault_ops);
        ck_assert_ptr_eq(s->up.ops, &kr_fault_ops);
        ck_assert_int_eq(s->client.stage, KR_STAGE_FRAMES);
        ck_assert_int_eq(s->up.stage, KR_STAGE_FRAMES);
    }
    ck_assert_uint_eq(st->misuse, 0);
    ck_assert_uint_ge(st->conns, 2);
    ck_assert_uint_ge(st->hs_done, 2);
    ck_assert_uint_eq(st->hs_steps, st->hs_done + st->hs_want_read +
                      st->hs_want_write);
    ck_assert_uint_eq(KR_STAT_GET(ST, spliced_bytes), 0);
}

/* Each fault path of a read and a write was taken at least once. */
static void
fault_paths_taken(void)
{
    const struct kr_fault_stats *st = &kr_fault_stats;

    ck_assert_uint_gt(st->read_again, 0);
    ck_assert_uint_gt(st->read_want_write, 0);
    ck_assert_uint_gt(st->read_after_want_write, 0);
    ck_assert_uint_gt(st->read_one, 0);
    ck_assert_uint_gt(st->read_short, 0);
    ck_assert_uint_gt(st->read_hold, 0);
    ck_assert_uint_gt(st->read_pending, 0);
    ck_assert_uint_gt(st->write_again, 0);
    ck_assert_uint_gt(st->write_one, 0);
    ck_assert_uint_gt(st->write_short, 0);
    ck_assert_uint_gt(st->hs_want_write, 0);
}

/*
 * Produce and Heartbeat round trips, pipelined in batches of 1 to 8
 * frames, with Acks=0 Produce requests among them (no response): the
 * broker sees every request byte and the client every response byte, in
 * order, whatever the transport does.
 */
START_TEST(fault_round_trips)
{
    struct bb req = { 0 }, exp = { 0 }, one = { 0 };
    struct cli *c;
    size_t sent = 0, off = 0, flen;
    int i, k, n = 0, acks0 = 0;

    fault_on(_i);
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 400; i++) {
        one.n = 0;
        if (i % 7 == 3) {
            acks0++;
            req_produce(&one, i, 0, (size_t)(i % 50) * 20);
        } else if (i % 3 == 1) {
            req_produce(&one, i, -1, (size_t)i * 13);
            echo_response(&exp, one.b, one.n, 0, 0);
        } else {
            req_heartbeat(&one, i);
            echo_response(&exp, one.b, one.n, 0, 0);
        }
        bput(&req, one.b, one.n);
    }
    /* batches of 1..8 frames, the loop stepped between them */
    while (off < req.n) {
        for (k = 0; k < 1 + n % 8 && off < req.n; k++) {
            flen = 4 + (size_t)kr_frame_i32(req.b + off);
            off += flen;
        }
        cli_send(c, req.b + sent, off - sent);
        sent = off;
        for (k = 0; k < 1 + n % 3; k++) {
            event_base_loop(T.base, EVLOOP_NONBLOCK);
        }
        n++;
    }
    fake_expect(&req);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests), 400);
    ck_assert_uint_eq(KR_STAT_GET(ST, requests_acks0), (uint64_t)acks0);
    ck_assert_ptr_nonnull(T.w->sessions);
    /* the name dialled reached the connection (the bootstrap's) */
    ck_assert_str_eq(T.w->sessions->up.host, "127.0.0.1");
    fault_kept_stages();
    fault_paths_taken();
    ck_assert_uint_gt(kr_fault_stats.write_want_read, 0);
    free(req.b);
    free(exp.b);
    free(one.b);
}
END_TEST

/*
 * A streamed Fetch v16 response (300 KB of records, NodeEndpoints
 * rewritten at the same length) released in four pieces: each piece
 * reaches the client before the next is sent, so bytes the transport
 * holds are read without a socket event (kr_conn_kick).
 */
START_TEST(fault_fetch_streamed)
{
    struct bb rsp = { 0 }, exp = { 0 };
    struct cli *c;
    int k;

    fault_on(_i);
    T.lc.advertised_host = (char *)"127.0.0.1";
    c = fetch16_setup(5, 300000, "10.1.2.3.", 9092, false, &rsp);
    for (k = 0; k < 3; k++) {
        /* several rounds: the read that takes a piece may hold part of it
           (read_hold), what follows comes without a socket event */
        fake_release_pieces(c, 4);
        rsp_fetch16(&exp, 5, 300000, "127.0.0.1", 0, false);
        cli_expect(c, &exp);
        exp.n = 0;
        if (k < 2) {
            struct bb req = { 0 };
            struct wait w = { 0 };

            T.fb.hold = true;           /* fake_release ended it */
            req_fetch16(&req, 5);
            cli_send(c, req.b, req.n);
            while (evbuffer_get_length(T.fb.pending) == 0 && !c->closed &&
                   waiting(&w, progress())) {
                pump_once();
            }
            ck_assert_uint_gt(evbuffer_get_length(T.fb.pending), 0);
            fake_replace_pending(&rsp);
            free(req.b);
        }
    }
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_streamed), 3);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses_held), 0);
    fault_kept_stages();
    ck_assert_uint_gt(kr_fault_stats.read_pending, 0);
    ck_assert_uint_gt(kr_fault_stats.read_pending_quiet, 0);
    free(rsp.b);
    free(exp.b);
}
END_TEST

/*
 * A rule holds the Metadata response (fault latency 30 ms): the
 * Heartbeat and Produce responses behind it wait for it, and every
 * response reaches the client in request order, the Metadata one
 * rewritten.
 */
START_TEST(fault_rule_held)
{
    struct bb req = { 0 }, exp = { 0 }, one = { 0 };
    struct cli *c;
    size_t at;
    int i;

    fault_on(_i);
    rule_one(KR_API_METADATA, 30, false);
    T.lc.broker_port_base = free_port();
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 12; i++) {
        one.n = 0;
        if (i % 4 == 1) {
            at = req_begin(&one, KR_API_METADATA, 1, i);
            b32(&one, -1);              /* all topics */
            bend(&one, at);
            metadata_response(&exp, i, 0, "127.0.0.1",
                              kr_daemon_port(T.p, 0, 0));
        } else {
            if (i % 4 == 2) {
                req_produce(&one, i, 1, 2000);
            } else {
                req_heartbeat(&one, i);
            }
            echo_response(&exp, one.b, one.n, 0, 0);
        }
        bput(&req, one.b, one.n);
    }
    cli_send(c, req.b, req.n);
    fake_expect(&req);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_eq(KR_STAT_GET(ST, responses), 12);
    fault_kept_stages();
    free(req.b);
    free(exp.b);
    free(one.b);
}
END_TEST

/*
 * Backpressure: the client stops reading 16 responses of 512 KiB; krelay
 * stops reading the upstream, then the client reads again and every byte
 * arrives in order.
 */
START_TEST(fault_backpressure)
{
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s;
    struct wait w = { 0 };
    struct cli *c;
    int i;

    fault_on(_i);
    T.fb.extra = 512 * 1024;
    start();
    c = cli_open(boot_port(), 65536);
    for (i = 0; i < 16; i++) {
        req_heartbeat(&req, i);
    }
    cli_send(c, req.b, req.n);
    event_del(c->rev);          /* the client stops reading */
    fake_expect(&req);
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    while (s->up.reading && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_msg(!s->up.reading, "krelay kept reading the upstream");
    /* the writes wait: a write event, made now */
    ck_assert_ptr_nonnull(s->client.wev);
    ck_assert(s->client.wev_on);
    for (i = 0; i < 30; i++) {
        pump_once();
    }
    i = 4 << 20;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &i, sizeof(i));
    event_add(c->rev, NULL);
    expected_echo(&req, T.fb.extra, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    fault_kept_stages();
    fault_paths_taken();
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * Reads paused with bytes inside the transport: the client's ten
 * requests are taken off its socket at once by the transport (as OpenSSL
 * reads ahead), which returns 60 bytes at most per read.  At
 * max_inflight 4 krelay stops reading the client while the transport
 * still holds requests and the socket is empty; when answers free the
 * slots, reading resumes and only kr_conn_kick can make the held
 * requests readable: no socket event will come.  Every request and
 * response arrives, in order.
 */
START_TEST(fault_paused_reads_resume)
{
    struct kr_fault_conf fc = {
        .seed = (uint64_t)_i,
        .read_gulp = 1000,
        .gulp_max = 60,
    };
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s;
    struct wait w = { 0 }, w2 = { 0 };
    struct cli *c;
    int i, avail = -1;

    kr_fault_setup(&fc);
    T.conn_ops = &kr_fault_ops;
    T.lc.max_inflight = 4;
    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    for (i = 0; i < 10; i++) {
        req_heartbeat(&req, 100 + i);
    }
    cli_send(c, req.b, req.n);
    while (T.fb.nreq < 4 && waiting(&w, progress())) {
        pump_once();
    }
    for (i = 0; i < 50; i++) {
        pump_once();
    }
    ck_assert_int_eq(T.fb.nreq, 4);
    s = T.w->sessions;
    ck_assert_ptr_nonnull(s);
    ck_assert(s->req_blocked);
    ck_assert(!s->client.reading);
    /* the rest is inside the transport, none in the socket */
    ck_assert_uint_gt(kr_fault_ops.pending(&s->client), 0);
    ck_assert_int_eq(ioctl(s->client.fd, FIONREAD, &avail), 0);
    ck_assert_int_eq(avail, 0);
    fake_release(&T.fb);
    while (T.fb.nreq < 10 && waiting(&w2, progress())) {
        pump_once();
        if (evbuffer_get_length(T.fb.pending) > 0) {
            fake_release(&T.fb);
        }
    }
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(c, &exp);
    ck_assert(!c->closed);
    ck_assert_uint_gt(kr_fault_stats.read_gulp, 0);
    ck_assert_uint_gt(kr_fault_stats.read_pending_quiet, 0);
    fault_kept_stages();
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The first bytes decide before framing starts, over reads of any size:
 * a TLS ClientHello on this plaintext listener is refused with the one
 * log line; a Kafka client whose first request arrives in two parts is
 * served, its handshake waiting for readability while the second part
 * is in the socket.
 */
START_TEST(fault_sniff_then_handshake)
{
    static const uint8_t hello[] = {
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03
    };
    struct kr_fault_conf fc = {
        .seed = (uint64_t)_i,
        .read_one = 500,                /* the sniff waits for 4 bytes */
        .hs_steps = 4,
        .hs_want_read = 1000,           /* readable: always wait for it */
    };
    struct bb req = { 0 }, exp = { 0 };
    struct kr_session *s;
    struct wait w = { 0 };
    struct cli *bad, *good;
    char *log;

    kr_fault_setup(&fc);
    T.conn_ops = &kr_fault_ops;
    log_capture();
    start();
    bad = cli_open(boot_port(), 0);
    cli_send(bad, hello, sizeof(hello));
    ck_assert(cli_wait_closed(bad));
    ck_assert_uint_eq(evbuffer_get_length(bad->in), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, frames_refused,
                                    KR_REFUSAL_WRONG_PROTOCOL), 1);
    ck_assert_uint_eq(T.fb.nreq, 0);
    log = log_text();
    ck_assert_ptr_nonnull(strstr(log, "TLS handshake on a plaintext "
                                      "listener"));
    free(log);

    good = cli_open(boot_port(), 0);
    req_heartbeat(&req, 7);
    cli_send(good, req.b, 6);
    while ((s = T.w->sessions) == NULL ||
           (s->client.stage != KR_STAGE_HANDSHAKE && waiting(&w, progress() +
                                                     s->client.bytes_in))) {
        pump_once();
    }
    ck_assert_int_eq(s->client.stage, KR_STAGE_HANDSHAKE);
    ck_assert(!s->client.connected);
    cli_send(good, req.b + 6, req.n - 6);
    fake_expect(&req);
    expected_echo(&req, 0, &exp);
    cli_expect(good, &exp);
    ck_assert(!good->closed);
    ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_BAD_INPUT), 1);
    fault_kept_stages();
    ck_assert_uint_gt(kr_fault_stats.hs_want_read, 0);
    ck_assert_uint_gt(kr_fault_stats.read_one, 0);
    free(req.b);
    free(exp.b);
}
END_TEST

/*
 * The upstream connection carries the name it dialled, not only the
 * address: a dial.0 host from /etc/hosts ("localhost") for the broker
 * listener, logged at debug when connecting.
 */
START_TEST(upstream_host_name)
{
    struct bb req = { 0 };
    struct wait w = { 0 };
    struct cli *c;
    char *log;

    T.dial.node_id = 0;
    T.dial.addr.host = (char *)"localhost";
    T.dial.addr.port = T.fb.port;
    T.uc.dial = &T.dial;
    T.uc.ndial = 1;
    log_capture();
    kr_log_level_cur = KR_LOG_DEBUG;
    start();
    c = cli_open(kr_daemon_port(T.p, 0, 0), 0);
    req_heartbeat(&req, 1);
    cli_send(c, req.b, req.n);
    /* localhost may be ::1 first, where the fake does not listen: only
       the name matters here */
    while (T.fb.nreq == 0 && !c->closed && waiting(&w, progress())) {
        pump_once();
    }
    if (T.fb.nreq > 0) {
        ck_assert_ptr_nonnull(T.w->sessions);
        ck_assert_str_eq(T.w->sessions->up.host, "localhost");
    }
    log = log_text();
    ck_assert_msg(strstr(log, "(host name \"localhost\", tcp transport)") !=
                  NULL, "%s", log);
    free(log);
    free(req.b);
}
END_TEST

/* ---- TLS clients, SO_RCVLOWAT (issue 8) -------------------------------- */

/*
 * A TLS client on a struct cli: OpenSSL over memory BIOs (TLS 1.3,
 * TLS_AES_128_GCM_SHA256, no certificate check), so that a test decides
 * where the ciphertext is cut on the socket.  Records carry 16 KiB of
 * plaintext (OpenSSL's default fragment) in TLS_RECORD bytes.
 */
#define TLS_RECORD (5 + 16384 + 1 + 16)

struct tcli {
    struct cli *c;
    SSL *ssl;
    BIO *rb, *wb;               /* krelay's bytes in, ours out (the SSL's) */
};

/* The listener terminates TLS with the test certificates (before start). */
static void
tls_listener(void)
{
    struct kr_tls_opts o;
    enum kr_tls_opt bad;
    char err[512], cert[4096], key[4096];

    T.certs = kr_test_certs_dir();
    ck_assert_ptr_nonnull(T.certs);
    snprintf(cert, sizeof(cert), "%s/server.pem", T.certs);
    snprintf(key, sizeof(key), "%s/server.key", T.certs);
    memset(&o, 0, sizeof(o));
    o.server = true;
    o.certificate = cert;
    o.key = key;
    o.id = "check_session";
    T.lc.tls = kr_tls_ctx_new(&o, &bad, err, sizeof(err));
    ck_assert_msg(T.lc.tls != NULL, "server context: %s", err);
    T.lc.ssl = true;
    T.lc.ssl_handshake_timeout_ms = 10000;
}

/* What OpenSSL wrote for t, appended to ct (not sent). */
static void
tcli_take(struct tcli *t, struct bb *ct)
{
    char buf[16384];
    int n;

    while ((n = BIO_read(t->wb, buf, sizeof(buf))) > 0) {
        bput(ct, buf, (size_t)n);
    }
}

/* What OpenSSL wrote for t, onto the socket. */
static void
tcli_flush(struct tcli *t)
{
    struct bb ct = { 0 };

    tcli_take(t, &ct);
    if (ct.n > 0) {
        cli_send(t->c, ct.b, ct.n);
    }
    free(ct.b);
}

/* What krelay sent t, into OpenSSL. */
static void
tcli_feed(struct tcli *t)
{
    size_t n = evbuffer_get_length(t->c->in);

    if (n > 0) {
        ck_assert_int_eq(BIO_write(t->rb, evbuffer_pullup(t->c->in, -1),
                                   (int)n), (int)n);
        evbuffer_drain(t->c->in, n);
    }
}

/* A TLS client of the bootstrap listener, its handshake done. */
static struct tcli
tcli_open(void)
{
    struct wait w = { 0 };
    struct tcli t;
    int r;

    if (T.tls_cctx == NULL) {
        T.tls_cctx = SSL_CTX_new(TLS_client_method());
        ck_assert_ptr_nonnull(T.tls_cctx);
        ck_assert_int_eq(SSL_CTX_set_min_proto_version(T.tls_cctx,
                                                       TLS1_3_VERSION), 1);
        ck_assert_int_eq(SSL_CTX_set_ciphersuites(T.tls_cctx,
                                                  "TLS_AES_128_GCM_SHA256"),
                         1);
    }
    t.c = cli_open(boot_port(), 0);
    t.ssl = SSL_new(T.tls_cctx);
    ck_assert_ptr_nonnull(t.ssl);
    T.tls_c[t.c - T.cl] = t.ssl;
    t.rb = BIO_new(BIO_s_mem());
    t.wb = BIO_new(BIO_s_mem());
    ck_assert(t.rb != NULL && t.wb != NULL);
    SSL_set_bio(t.ssl, t.rb, t.wb);
    SSL_set_connect_state(t.ssl);
    while ((r = SSL_do_handshake(t.ssl)) != 1) {
        ck_assert_int_eq(SSL_get_error(t.ssl, r), SSL_ERROR_WANT_READ);
        tcli_flush(&t);
        ck_assert_msg(!t.c->closed && waiting(&w, progress()),
                      "no TLS handshake");
        pump_once();
        tcli_feed(&t);
    }
    tcli_flush(&t);
    return t;
}

/* p, n sealed into records, appended to ct (not sent). */
static void
tcli_seal(struct tcli *t, const void *p, size_t n, struct bb *ct)
{
    size_t w = 0;

    ck_assert_int_eq(SSL_write_ex(t->ssl, p, n, &w), 1);
    ck_assert_uint_eq(w, n);
    tcli_take(t, ct);
}

/* The plaintext krelay sent t equals exp (bounded: struct wait). */
static void
tcli_expect(struct tcli *t, const struct bb *exp)
{
    struct bb got = { 0 };
    struct wait w = { 0 };
    uint8_t buf[16384];
    size_t k;

    while (got.n < exp->n) {
        tcli_feed(t);
        if (SSL_read_ex(t->ssl, buf, sizeof(buf), &k) == 1) {
            bput(&got, buf, k);
            continue;
        }
        ck_assert_msg(!t->c->closed && waiting(&w, progress()),
                      "client got %zu of %zu bytes", got.n, exp->n);
        pump_once();
    }
    ck_assert_uint_eq(got.n, exp->n);
    ck_assert(memcmp(got.b, exp->b, exp->n) == 0);
    free(got.b);
}

/* SO_RCVLOWAT of krelay's socket to its one session's client. */
static int
client_lowat(void)
{
    int v = -1;
    socklen_t len = sizeof(v);

    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_int_eq(getsockopt(T.w->sessions->client.fd, SOL_SOCKET,
                                SO_RCVLOWAT, &v, &len), 0);
    return v;
}

/* Bytes waiting unread on krelay's socket to its one session's client. */
static int
client_unread(void)
{
    int v = -1;

    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_int_eq(ioctl(T.w->sessions->client.fd, FIONREAD, &v), 0);
    return v;
}

/* Pump until the one session (accepted by then) has read n bytes from
   its client (TLS: of plaintext, after the handshake), giving up after
   stall_ms without progress. */
static bool
session_took(uint64_t n, int64_t stall_ms)
{
    struct wait w = { .stall_ms = stall_ms };

    while ((T.w->sessions == NULL || T.w->sessions->client.bytes_in < n) &&
           waiting(&w, progress())) {
        pump_once();
    }
    return T.w->sessions != NULL && T.w->sessions->client.bytes_in >= n;
}

/*
 * A 700 KiB Produce over TLS, its first 128 KiB of ciphertext sent: once
 * krelay read them, the rest of the frame known, its socket wakes it
 * only from a low-water mark on (SO_RCVLOWAT, kr_conn_want_bytes),
 * between KR_LOWAT_MIN and one read, and no more than the bytes still to
 * come on the socket.  The rest sent, the broker has the request byte
 * for byte, the mark is back to 1, and the answer and a Heartbeat after
 * it go both ways.  _i 1: Acks=0 (no answer owed: idle_timeout_ms, which
 * counts reads, is the connection's deadline): the mark stays 1.  _i 2:
 * the worker drains in the middle of the frame (its deadline counts the
 * reads of the rest): the mark goes back to 1 at once, and the rest
 * still goes to the broker.
 */
START_TEST(tls_lowat_follows_request)
{
    struct bb req = { 0 }, hb = { 0 }, ct = { 0 }, exp = { 0 };
    const size_t first = 8 * TLS_RECORD;
    struct wait w = { .stall_ms = 5000 };
    uint64_t took, left;
    struct tcli t;
    int lw;

    tls_listener();
    T.fb.hold = true;
    start();
    t = tcli_open();
    req_produce(&req, 7, _i == 1 ? 0 : 1, 700 * 1024);
    tcli_seal(&t, req.b, req.n, &ct);
    cli_send(t.c, ct.b, first);
    took = 8 * 16384;
    ck_assert(session_took(took, 5000));
    while (client_unread() > 0 && waiting(&w, progress())) {
        pump_once();
    }
    ck_assert_int_eq(client_unread(), 0);
    ck_assert_uint_eq(T.w->sessions->client.bytes_in, took);
    left = ct.n - first;
    lw = client_lowat();
    if (_i == 1) {
        ck_assert_int_eq(lw, 1);
    } else {
        ck_assert_int_ge(lw, KR_LOWAT_MIN);
        ck_assert_int_le(lw, KR_READ_MAX - KR_CHAIN_HDR);
        ck_assert_uint_le((uint64_t)lw, left);
    }
    if (_i == 2) {
        kr_worker_drain(T.w);
        ck_assert(T.w->sessions->closing);
        ck_assert_int_eq(client_lowat(), 1);
    }
    cli_send(t.c, ct.b + first, left);
    fake_expect(&req);
    ck_assert_int_eq(client_lowat(), 1);
    if (_i == 2) {
        fake_release(&T.fb);
        expected_echo(&req, 0, &exp);
        tcli_expect(&t, &exp);
        wait_no_session();
        ck_assert_uint_eq(KR_STAT_GET_L(ST, closes, KR_CLOSE_TIMEOUT), 0);
    } else {
        req_heartbeat(&hb, 8);
        ct.n = 0;
        tcli_seal(&t, hb.b, hb.n, &ct);
        cli_send(t.c, ct.b, ct.n);
        bput(&req, hb.b, hb.n);
        fake_expect(&req);
        fake_release(&T.fb);
        if (_i == 0) {
            expected_echo(&req, 0, &exp);
        } else {
            expected_echo(&hb, 0, &exp);
        }
        tcli_expect(&t, &exp);
        ck_assert_int_eq(client_lowat(), 1);
        ck_assert(!t.c->closed);
        ck_assert_uint_eq(KR_STAT_GET(ST, requests), 2);
    }
    free(req.b);
    free(hb.b);
    free(ct.b);
    free(exp.b);
}
END_TEST

/*
 * The mark counts what OpenSSL holds (kr_conn_ops.held_max): a 200 KiB
 * Produce over TLS whose first ciphertext ends 8,000 bytes into a
 * record.  krelay reads what came: the whole records, and those 8,000
 * bytes, which stay in OpenSSL's read buffer; the ciphertext still to
 * come is the frame's plaintext still missing less those bytes (plus
 * 22 bytes a record).  A mark as high as the plaintext missing would
 * never be met: the rest, sent in one go, must reach the broker.
 * krelay's socket gets a 1 MiB receive buffer, so that the mark is not
 * capped below the bytes missing by a quarter of it.
 */
START_TEST(tls_lowat_counts_held_bytes)
{
    struct bb req = { 0 }, ct = { 0 }, exp = { 0 };
    const size_t whole = 6, first = whole * TLS_RECORD + 8000;
    int rcvbuf = 1 << 20;
    struct tcli t;

    tls_listener();
    T.fb.hold = true;
    start();
    t = tcli_open();
    ck_assert_ptr_nonnull(T.w->sessions);
    ck_assert_int_eq(setsockopt(T.w->sessions->client.fd, SOL_SOCKET,
                                SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
    req_produce(&req, 9, 1, 200 * 1024);
    tcli_seal(&t, req.b, req.n, &ct);
    cli_send(t.c, ct.b, first);
    ck_assert(session_took(whole * 16384, 5000));
    ck_assert_int_eq(client_unread(), 0);
    ck_assert_uint_eq(T.w->sessions->client.bytes_in, whole * 16384);
    /* the mark is up: its bytes are what the test is about */
    ck_assert_int_ge(client_lowat(), KR_LOWAT_MIN);
    ck_assert_uint_le((uint64_t)client_lowat(), ct.n - first);
    cli_send(t.c, ct.b + first, ct.n - first);
    ck_assert_msg(session_took(req.n, 5000), "krelay read %" PRIu64 " of "
                  "%zu bytes of the request, its mark %d, %d bytes unread",
                  T.w->sessions->client.bytes_in, req.n, client_lowat(),
                  client_unread());
    fake_expect(&req);
    ck_assert_int_eq(client_lowat(), 1);
    fake_release(&T.fb);
    expected_echo(&req, 0, &exp);
    tcli_expect(&t, &exp);
    free(req.b);
    free(ct.b);
    free(exp.b);
}
END_TEST

/*
 * Plain TCP keeps the default mark (kr_conn_tcp_ops.rcvlowat is false:
 * segments of up to 64 KiB, and splice): the same 700 KiB Produce, its
 * first 128 KiB read, the mark is 1.
 */
START_TEST(tcp_lowat_default)
{
    struct bb req = { 0 };
    struct cli *c;

    T.fb.hold = true;
    start();
    c = cli_open(boot_port(), 0);
    req_produce(&req, 7, 1, 700 * 1024);
    cli_send(c, req.b, 128 * 1024);
    ck_assert(session_took(128 * 1024, 5000));
    ck_assert_int_eq(client_lowat(), 1);
    cli_send(c, req.b + 128 * 1024, req.n - 128 * 1024);
    fake_expect(&req);
    free(req.b);
}
END_TEST

static Suite *
session_suite(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("proxy");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, forward_byte_exact);
    tcase_add_test(tc, write_event_failure_closes);
    tcase_add_test(tc, held_buffer_shared);
    tcase_add_test(tc, response_metrics_pass_through);
    tcase_add_test(tc, response_metrics_decoded);
    tcase_add_loop_test(tc, response_metrics_metadata, 0, 3);
    tcase_add_test(tc, broker_listener);
    tcase_add_test(tc, pipelined_in_order);
    tcase_add_test(tc, split_every_byte);
    tcase_add_test(tc, acks0_no_response);
    tcase_add_test(tc, bad_correlation_id);
    tcase_add_loop_test(tc, close_with_requests_in_flight, 0, 4);
    tcase_add_loop_test(tc, drain_finishes_partial_request, 0, 3);
    tcase_add_test(tc, drain_writes_acks0_taken);
    tcase_add_loop_test(tc, bad_input_closes_only_that_connection, 0,
                        (int)KR_ARRAY_LEN(bad_inputs));
    tcase_add_test(tc, backpressure);
    tcase_add_test(tc, backpressure_upstream);
    tcase_add_test(tc, max_inflight_stops_reading);
    tcase_add_test(tc, idle_timeout);
    tcase_add_test(tc, request_timeout);
    tcase_add_test(tc, sasl_handshake_v0_raw_tokens);
    tcase_add_loop_test(tc, sasl_handshake_v0_refused, 0, 2);
    tcase_add_loop_test(tc, gssapi_raw_first_frame, 0, 2);
    tcase_add_test(tc, metadata_rewritten);
    tcase_add_test(tc, max_connections);
    tcase_add_loop_test(tc, proxy_header, 0, 3);
    tcase_add_loop_test(tc, proxy_refused, 0, 5);
    tcase_add_test(tc, proxy_term_rate_key);
    tcase_add_test(tc, upstream_refuses);
    tcase_add_test(tc, upstream_closes_after_response);
    tcase_add_test(tc, stop_closes_everything);
    tcase_add_loop_test(tc, acks0_answered_dropped, 0, 2);
    tcase_add_test(tc, acks0_silent_skipped);
    tcase_add_loop_test(tc, acks0_forgotten_answers, 0, 2);
    tcase_add_test(tc, sasl_handshake_v0_pipelined);
    tcase_add_test(tc, sasl_handshake_v0_held_answer);
    tcase_add_loop_test(tc, throttle_enforce_undecodable, 0, 2);
    tcase_add_test(tc, client_close_delivers_requests);
    tcase_add_test(tc, timeout_client_not_reading);
    tcase_add_test(tc, timeout_sasl_token);
    tcase_add_loop_test(tc, sasl_held_then_judged, 0, 2);
    tcase_add_test(tc, sasl_failure_drops_held);
    tcase_add_test(tc, sasl_required_gate);
    tcase_add_loop_test(tc, sasl_term_pipelined, 0, 2);
    tcase_add_loop_test(tc, sasl_term_refused, 0, 2);
    tcase_add_test(tc, sasl_receive_cap);
    tcase_add_test(tc, sasl_auth_timeout);
    tcase_add_test(tc, sasl_term_no_upstream_before_login);
    tcase_add_test(tc, sasl_term_unread_answers);
    tcase_add_test(tc, sasl_term_apiversions_negative);
    tcase_add_loop_test(tc, sasl_login_timeout, 0, 5);
    tcase_add_loop_test(tc, sasl_term_cap_expiry, 0, 4);
    tcase_add_test(tc, sasl_reauth);
    tcase_add_test(tc, sasl_handshake_pipelined);
    tcase_add_test(tc, metadata_negative_node_id);
    tcase_add_test(tc, pass_through_zero_copy);
    tcase_add_loop_test(tc, fetch16_streamed, 0, 2);
    tcase_add_test(tc, fetch16_whole_no_tags);
    tcase_add_loop_test(tc, client_tcp_nodelay, 0, 2);
    tcase_add_test(tc, fetch16_streamed_no_tags);
    tcase_add_test(tc, fetch16_streamed_stall);
    tcase_add_test(tc, fetch16_streamed_slow_not_idle);
    tcase_add_test(tc, fetch16_whole_over_max);
    tcase_add_test(tc, held_response_slow_not_cut);
    tcase_add_test(tc, fetch16_streamed_malformed);
    tcase_add_loop_test(tc, held_audited_fetch16, 0, 3);
    tcase_add_test(tc, max_inflight_held_response_resumes);
    tcase_add_test(tc, internal_request_not_forwarded);
    tcase_add_test(tc, internal_request_refused_mid_frame_and_closed);
    suite_add_tcase(s, tc);

    /* issue 10: legacy translation (CK_RUN_CASE=legacy) */
    tc = tcase_create("legacy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, legacy_asks_apiversions, 0, 4);
    tcase_add_loop_test(tc, legacy_split_rounds, 0, 3);
    tcase_add_test(tc, legacy_rounds_one_at_a_time);
    tcase_add_test(tc, legacy_rounds_client_gone);
    tcase_add_test(tc, legacy_rounds_upstream_closes);
    tcase_add_loop_test(tc, legacy_rounds_error, 0, 2);
    tcase_add_loop_test(tc, legacy_acks0_partly_bad, 0, 2);
    tcase_add_loop_test(tc, legacy_refusal_delayed, 0, 2);
    tcase_add_loop_test(tc, legacy_acks0_refusal_delayed, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("splice");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, splice_fetch16_streamed, 0, 4);
    tcase_add_loop_test(tc, audit_fetch_streamed, 0, 4);
    tcase_add_test(tc, audit_fetch_body_held);
    tcase_add_loop_test(tc, audit_produce_streamed, 0, 5);
    tcase_add_loop_test(tc, audit_produce_streamed_cut, 0, 2);
    tcase_add_loop_test(tc, audit_produce_streamed_tags, 0, 3);
    tcase_add_test(tc, audit_produce_rsp_unscannable);
    tcase_add_loop_test(tc, audit_fetch_streamed_cut, 0, 2);
    tcase_add_test(tc, audit_inflight_at_close);
    tcase_add_test(tc, splice_fetch16_partitions);
    tcase_add_test(tc, splice_below_min);
    tcase_add_test(tc, splice_cut_through);
    tcase_add_test(tc, splice_produce_request);
    tcase_add_loop_test(tc, splice_pipelined_in_order, 0, 2);
    tcase_add_loop_test(tc, splice_client_stalls, 0, 2);
    tcase_add_loop_test(tc, client_slow_reader, 0, 2);
    tcase_add_test(tc, splice_upstream_backpressure);
    tcase_add_test(tc, splice_upstream_closes_mid_run);
    tcase_add_test(tc, splice_upstream_closes_after_run);
    tcase_add_test(tc, splice_client_closes_mid_run);
    suite_add_tcase(s, tc);

    /* the transport seam: several seeds each */
    tc = tcase_create("xprt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, upstream_host_name);
    tcase_add_loop_test(tc, fault_round_trips, 0, 6);
    tcase_add_loop_test(tc, fault_fetch_streamed, 0, 4);
    tcase_add_loop_test(tc, fault_rule_held, 0, 4);
    tcase_add_loop_test(tc, fault_backpressure, 0, 4);
    tcase_add_loop_test(tc, fault_paused_reads_resume, 0, 4);
    tcase_add_loop_test(tc, fault_sniff_then_handshake, 0, 4);
    suite_add_tcase(s, tc);

    /* TLS clients: the low-water mark on krelay's socket (issue 8) */
    tc = tcase_create("lowat");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, tls_lowat_follows_request, 0, 3);
    tcase_add_test(tc, tls_lowat_counts_held_bytes);
    tcase_add_test(tc, tcp_lowat_default);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(session_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
