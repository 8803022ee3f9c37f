/*
 * check_upstream.c - unit tests for kr_upstream: the metadata fetch over a
 * real loopback socket against a tiny fake broker (ApiVersions v0 +
 * Metadata, built with the codec), the broker map and its precedence,
 * on-demand refresh for unknown NodeIds, bootstrap rotation and failover,
 * numeric IPv4/IPv6, /etc/hosts names, cancellation.
 *
 * Everything runs on one event_base stepped by the test; no sleeps.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_schema.h"
#include "kr_topics.h"
#include "kr_cluster.h"
#include "kr_upstream.h"

/* ---- the fake broker ---------------------------------------------------- */

#define FAKE_MAX_BROKERS 8
#define FAKE_MAX_CONNS 16

struct fake {
    struct event_base *base;
    struct evconnlistener *lis;
    struct bufferevent *conns[FAKE_MAX_CONNS];
    uint16_t port;
    int16_t md_max;                     /* Metadata MaxVersion advertised */
    bool trailing;                      /* extra byte after v9+ (2.12 mock) */
    int nbrokers;
    int32_t ids[FAKE_MAX_BROKERS];
    const char *hosts[FAKE_MAX_BROKERS];
    int32_t ports[FAKE_MAX_BROKERS];
    /* what it saw */
    int n_conns;
    int n_apiversions, n_metadata;
    int16_t av_version, md_version;
    char client_id[32];
    int topics_null, topics_n;
    int64_t auto_create;
};

static void
fake_reply(struct fake *f, struct bufferevent *bev, const struct kr_msg *req)
{
    struct kr_arena arena;
    struct kr_codec_err ce;
    struct kr_wbuf w;
    struct kr_msg m;
    struct kr_val *v;
    uint8_t pre[4];
    size_t total;
    int hv, i;

    kr_arena_init(&arena, 0);
    memset(&w, 0, sizeof(w));
    memset(&m, 0, sizeof(m));
    hv = kr_response_header_version(req->api_key, req->api_version);
    ck_assert_int_ge(hv, 0);
    m.dir = KR_DIR_RESPONSE;
    m.api_key = req->api_key;
    m.api_version = req->api_version;
    m.hdr_version = (int16_t)hv;
    m.correlation_id = req->correlation_id;
    m.header = kr_node_new(&arena, kr_response_header_struct, (int16_t)hv);
    kr_node_get(m.header, "CorrelationId")->u.i = req->correlation_id;
    m.body = kr_node_new(&arena,
                         kr_api_root(kr_api_get(req->api_key), true,
                                     req->api_version), req->api_version);
    ck_assert_ptr_nonnull(m.body);
    if (req->api_key == 18) {
        struct kr_array *a = kr_array_new(&arena, KR_T_STRUCT,
                                          kr_node_field(m.body,
                                              (unsigned)kr_struct_field_index(
                                                  m.body->struct_id,
                                                  "ApiKeys"))->struct_id,
                                          2, req->api_version);

        f->n_apiversions++;
        f->av_version = req->api_version;
        kr_node_get(a->items[0].u.node, "ApiKey")->u.i = 18;
        kr_node_get(a->items[0].u.node, "MaxVersion")->u.i = 2;
        kr_node_get(a->items[1].u.node, "ApiKey")->u.i = 3;
        kr_node_get(a->items[1].u.node, "MaxVersion")->u.i = f->md_max;
        v = kr_node_get(m.body, "ApiKeys");
        v->u.arr = a;
        v->is_null = 0;
    } else {
        struct kr_array *a;

        ck_assert_int_eq(req->api_key, 3);
        f->n_metadata++;
        f->md_version = req->api_version;
        v = kr_node_get(req->body, "Topics");
        f->topics_null = v->is_null;
        f->topics_n = v->is_null ? -1 : (int)v->u.arr->n;
        v = kr_node_get(req->body, "AllowAutoTopicCreation");
        f->auto_create = v != NULL && v->present ? v->u.i : -1;
        a = kr_array_new(&arena, KR_T_STRUCT,
                         kr_node_field(m.body,
                             (unsigned)kr_struct_field_index(
                                 m.body->struct_id, "Brokers"))->struct_id,
                         (uint32_t)f->nbrokers, req->api_version);
        for (i = 0; i < f->nbrokers; i++) {
            struct kr_node *b = a->items[i].u.node;

            kr_node_get(b, "NodeId")->u.i = f->ids[i];
            kr_node_get(b, "Host")->u.s.p = (const uint8_t *)f->hosts[i];
            kr_node_get(b, "Host")->u.s.len = (int32_t)strlen(f->hosts[i]);
            kr_node_get(b, "Port")->u.i = f->ports[i];
        }
        v = kr_node_get(m.body, "Brokers");
        v->u.arr = a;
        v->is_null = 0;
    }
    ck_assert_int_eq(kr_encode_msg(&m, &w, &ce), KR_OK);
    total = w.len + (f->trailing && req->api_key == 3 &&
                     req->api_version >= 9 ? 1 : 0);
    pre[0] = (uint8_t)(total >> 24);
    pre[1] = (uint8_t)(total >> 16);
    pre[2] = (uint8_t)(total >> 8);
    pre[3] = (uint8_t)total;
    bufferevent_write(bev, pre, 4);
    bufferevent_write(bev, w.buf, w.len);
    if (total > w.len) {
        bufferevent_write(bev, "\0", 1);
    }
    kr_wbuf_free(&w);
    kr_arena_free(&arena);
}

static void
fake_read_cb(struct bufferevent *bev, void *arg)
{
    struct fake *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    for (;;) {
        uint8_t pre[4], *p;
        uint32_t size;
        struct kr_arena arena;
        struct kr_codec_err ce;
        struct kr_rbuf rb;
        struct iovec iov;
        struct kr_msg m;
        struct kr_val *cid;

        if (evbuffer_copyout(in, pre, 4) != 4) {
            return;
        }
        size = (uint32_t)pre[0] << 24 | (uint32_t)pre[1] << 16 |
               (uint32_t)pre[2] << 8 | pre[3];
        if (evbuffer_get_length(in) < 4 + (size_t)size) {
            return;
        }
        p = evbuffer_pullup(in, 4 + (ev_ssize_t)size);
        kr_arena_init(&arena, 0);
        kr_rbuf_init_flat(&rb, &iov, p + 4, size);
        ck_assert_msg(kr_decode_request(&arena, &rb, KR_DEC_STRICT, &m,
                                        &ce) == KR_OK,
                      "fake broker: bad request: %s at %s", ce.msg, ce.path);
        cid = kr_node_get(m.header, "ClientId");
        if (cid != NULL && !cid->is_null && cid->u.s.len < 31) {
            memcpy(f->client_id, cid->u.s.p, (size_t)cid->u.s.len);
            f->client_id[cid->u.s.len] = '\0';
        }
        fake_reply(f, bev, &m);
        kr_arena_free(&arena);
        evbuffer_drain(in, 4 + (size_t)size);
    }
}

static void
fake_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct fake *f = arg;
    int i;

    (void)what;
    for (i = 0; i < FAKE_MAX_CONNS; i++) {
        if (f->conns[i] == bev) {
            f->conns[i] = NULL;
        }
    }
    bufferevent_free(bev);
}

static void
fake_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
               struct sockaddr *sa, int len, void *arg)
{
    struct fake *f = arg;
    struct bufferevent *bev;
    int i;

    (void)l;
    (void)sa;
    (void)len;
    bev = bufferevent_socket_new(f->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(bev, fake_read_cb, NULL, fake_event_cb, f);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    f->n_conns++;
    for (i = 0; i < FAKE_MAX_CONNS; i++) {
        if (f->conns[i] == NULL) {
            f->conns[i] = bev;
            return;
        }
    }
    ck_abort_msg("fake broker: too many connections");
}

static void
fake_start(struct fake *f, struct event_base *base)
{
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);

    memset(f, 0, sizeof(*f));
    f->base = base;
    f->md_max = 12;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->lis = evconnlistener_new_bind(base, fake_accept_cb, f,
                                     LEV_OPT_CLOSE_ON_FREE |
                                     LEV_OPT_REUSEABLE, -1,
                                     (struct sockaddr *)&sin, sizeof(sin));
    ck_assert_ptr_nonnull(f->lis);
    ck_assert_int_eq(getsockname(evconnlistener_get_fd(f->lis),
                                 (struct sockaddr *)&sin, &slen), 0);
    f->port = ntohs(sin.sin_port);
}

static void
fake_stop(struct fake *f)
{
    int i;

    for (i = 0; i < FAKE_MAX_CONNS; i++) {
        if (f->conns[i] != NULL) {
            bufferevent_free(f->conns[i]);
        }
    }
    evconnlistener_free(f->lis);
}

static void
fake_broker(struct fake *f, int32_t id, const char *host, int32_t port)
{
    ck_assert_int_lt(f->nbrokers, FAKE_MAX_BROKERS);
    f->ids[f->nbrokers] = id;
    f->hosts[f->nbrokers] = host;
    f->ports[f->nbrokers] = port;
    f->nbrokers++;
}

/* ---- fixture and helpers ------------------------------------------------ */

static struct event_base *base;
static struct evdns_base *dns;
static struct fake fk;
static struct kr_hostport bs[2];
static struct kr_dial_override dial[2];
static struct kr_upstream_conf uc;

static void
setup(void)
{
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    dns = evdns_base_new(base, 0);          /* no nameservers */
    ck_assert_ptr_nonnull(dns);
    fake_start(&fk, base);
    memset(&uc, 0, sizeof(uc));
    uc.name = (char *)"test";
    bs[0].host = (char *)"127.0.0.1";
    bs[0].port = fk.port;
    uc.bootstrap = bs;
    uc.nbootstrap = 1;
    uc.connect_timeout_ms = 5000;
    uc.request_timeout_margin_ms = 5000;
    uc.metadata_refresh_ms = 300000;
}

static void
teardown(void)
{
    fake_stop(&fk);
    evdns_base_free(dns, 0);
    event_base_free(base);
}

/* Step the loop until *flag becomes nonzero (bounded). */
static void
step_until(const int *flag)
{
    int i;

    for (i = 0; i < 10000 && *flag == 0; i++) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    ck_assert_msg(*flag != 0, "condition not reached");
}

static int
nbrokers_at_least(struct kr_upstream *u, int n)
{
    int i;

    for (i = 0; i < 10000 && kr_upstream_nbrokers(u) < n; i++) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    return kr_upstream_nbrokers(u);
}

struct answer {
    int calls;
    int status;
    struct sockaddr_storage sa;
    socklen_t len;
    char what[300];
    char host[300];             /* "(null)" for NULL */
};

static void
answer_cb(void *arg, int status, const struct sockaddr *addr,
          socklen_t addrlen, const char *host, const char *what)
{
    struct answer *a = arg;

    snprintf(a->host, sizeof(a->host), "%s", host != NULL ? host : "(null)");

    a->calls++;
    a->status = status;
    a->len = addrlen;
    if (addr != NULL) {
        memcpy(&a->sa, addr, addrlen);
    } else {
        ck_assert_int_eq(status, KR_ERROR);
    }
    snprintf(a->what, sizeof(a->what), "%s", what);
}

static void
assert_v4(const struct answer *a, const char *ip, uint16_t port)
{
    const struct sockaddr_in *s = (const struct sockaddr_in *)&a->sa;
    char buf[INET_ADDRSTRLEN];

    ck_assert_int_eq(a->status, KR_OK);
    ck_assert_int_eq(s->sin_family, AF_INET);
    ck_assert_uint_eq(a->len, sizeof(*s));
    ck_assert_str_eq(inet_ntop(AF_INET, &s->sin_addr, buf, sizeof(buf)), ip);
    ck_assert_uint_eq(ntohs(s->sin_port), port);
}

/* ---- tests -------------------------------------------------------------- */

/* The whole fetch over a socket, Metadata v12 with the 2.12 mock's byte. */
START_TEST(test_fetch_real_socket)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    struct kr_resolve *r;

    fake_broker(&fk, 1, "127.0.0.1", 40001);
    fake_broker(&fk, 2, "127.0.0.2", 40002);
    fake_broker(&fk, 3, "127.0.0.3", 40003);
    fk.trailing = true;
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(nbrokers_at_least(u, 3), 3);
    ck_assert_int_eq(fk.n_apiversions, 1);
    ck_assert_int_eq(fk.av_version, 0);
    ck_assert_int_eq(fk.n_metadata, 1);
    ck_assert_int_eq(fk.md_version, 12);
    ck_assert_str_eq(fk.client_id, "krelay");
    ck_assert_int_eq(fk.topics_null, 1);
    ck_assert_int_eq(fk.auto_create, 0);

    r = kr_upstream_resolve(u, 2, answer_cb, &a);
    ck_assert_ptr_null(r);                  /* numeric: answered at once */
    ck_assert_int_eq(a.calls, 1);
    assert_v4(&a, "127.0.0.2", 40002);
    ck_assert_str_eq(a.what, "127.0.0.2:40002");
    kr_upstream_free(u);
}
END_TEST

/* librdkafka 2.0.2's mock: Metadata 0-2 only; v0 asks with []. */
START_TEST(test_fetch_old_versions)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    int16_t lo = -5, hi = -5;

    fk.md_max = _i == 0 ? 2 : 0;
    fake_broker(&fk, 1, "127.0.0.1", fk.port);
    u = kr_upstream_new(base, dns, &uc);
    ck_assert(!kr_upstream_api_range(u, 3, &lo, &hi));  /* not yet */
    ck_assert_int_eq(lo, -5);
    ck_assert_int_eq(nbrokers_at_least(u, 1), 1);
    ck_assert_int_eq(fk.md_version, fk.md_max);
    /* the ranges of the ApiVersions answer are kept per ApiKey */
    ck_assert(kr_upstream_api_range(u, 3, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, fk.md_max);
    ck_assert(kr_upstream_api_range(u, 18, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 2);
    ck_assert(!kr_upstream_api_range(u, 0, &lo, &hi));  /* not offered */
    ck_assert(!kr_upstream_api_range(u, -1, &lo, &hi));
    ck_assert(!kr_upstream_api_range(u, 30000, &lo, &hi));
    if (fk.md_max == 0) {
        ck_assert_int_eq(fk.topics_null, 0);
        ck_assert_int_eq(fk.topics_n, 0);
    } else {
        ck_assert_int_eq(fk.topics_null, 1);
    }
    ck_assert_ptr_null(kr_upstream_resolve(u, 1, answer_cb, &a));
    assert_v4(&a, "127.0.0.1", fk.port);
    kr_upstream_free(u);
}
END_TEST

START_TEST(test_dial_override_wins)
{
    struct kr_upstream *u;
    struct answer a = { 0 };

    dial[0].node_id = 2;
    dial[0].addr.host = (char *)"10.9.8.7";
    dial[0].addr.port = 1234;
    uc.dial = dial;
    uc.ndial = 1;
    fake_broker(&fk, 1, "127.0.0.1", 40001);
    fake_broker(&fk, 2, "127.0.0.2", 40002);
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_int_eq(kr_upstream_nbrokers(u), 1);   /* the override */
    ck_assert_int_eq(nbrokers_at_least(u, 2), 2);
    ck_assert_int_eq(fk.n_metadata, 1);
    ck_assert_ptr_null(kr_upstream_resolve(u, 2, answer_cb, &a));
    assert_v4(&a, "10.9.8.7", 1234);
    /* issue 8: reached at the override, named as it advertises itself
       (TLS: SNI and the certificate check) */
    ck_assert_str_eq(a.host, "127.0.0.2");
    ck_assert_str_eq(a.what, "10.9.8.7:1234");
    a.calls = 0;
    ck_assert_ptr_null(kr_upstream_resolve(u, 1, answer_cb, &a));
    assert_v4(&a, "127.0.0.1", 40001);
    kr_upstream_free(u);
}
END_TEST

/* Unknown NodeId: exactly one refresh, then KR_ERROR. */
START_TEST(test_unknown_node_one_refresh)
{
    struct kr_upstream *u;
    struct answer a = { 0 }, b = { 0 };
    struct kr_resolve *r1, *r2;

    fake_broker(&fk, 1, "127.0.0.1", 40001);
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_int_eq(nbrokers_at_least(u, 1), 1);
    ck_assert_int_eq(fk.n_metadata, 1);
    r1 = kr_upstream_resolve(u, 9, answer_cb, &a);
    r2 = kr_upstream_resolve(u, 9, answer_cb, &b);    /* coalesced */
    ck_assert_ptr_nonnull(r1);
    ck_assert_ptr_nonnull(r2);
    ck_assert_int_eq(a.calls, 0);
    step_until(&b.calls);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(a.status, KR_ERROR);
    ck_assert_int_eq(b.status, KR_ERROR);
    ck_assert_int_eq(fk.n_metadata, 2);
    ck_assert_int_eq(fk.n_apiversions, 2);
    /*
     * Asked again at once: the refresh just said NodeId 9 does not exist,
     * so the answer is immediate and the cluster sees no new Metadata
     * request (a client hammering a missing NodeId's port must not make
     * krelay hammer the cluster).
     */
    memset(&a, 0, sizeof(a));
    ck_assert_ptr_null(kr_upstream_resolve(u, 9, answer_cb, &a));
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.status, KR_ERROR);
    /* Another unknown NodeId still gets its refresh. */
    memset(&b, 0, sizeof(b));
    ck_assert_ptr_nonnull(kr_upstream_resolve(u, 10, answer_cb, &b));
    step_until(&b.calls);
    ck_assert_int_eq(b.status, KR_ERROR);
    ck_assert_int_eq(fk.n_metadata, 3);
    kr_upstream_free(u);
}
END_TEST

/* Unknown NodeId that the refresh finds. */
START_TEST(test_unknown_node_found_by_refresh)
{
    struct kr_upstream *u;
    struct answer a = { 0 };

    fake_broker(&fk, 1, "127.0.0.1", 40001);
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_int_eq(nbrokers_at_least(u, 1), 1);
    fake_broker(&fk, 3, "127.0.0.3", 40003);  /* the cluster grew */
    ck_assert_ptr_nonnull(kr_upstream_resolve(u, 3, answer_cb, &a));
    step_until(&a.calls);
    ck_assert_int_eq(a.calls, 1);
    assert_v4(&a, "127.0.0.3", 40003);
    ck_assert_int_eq(fk.n_metadata, 2);
    ck_assert_int_eq(kr_upstream_nbrokers(u), 2);
    kr_upstream_free(u);
}
END_TEST

START_TEST(test_cancel_waiting)
{
    struct kr_upstream *u;
    struct answer a = { 0 }, b = { 0 };
    struct kr_resolve *r;

    fake_broker(&fk, 1, "127.0.0.1", 40001);
    u = kr_upstream_new(base, dns, &uc);
    r = kr_upstream_resolve(u, 7, answer_cb, &a);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(kr_upstream_resolve(u, 8, answer_cb, &b));
    kr_upstream_resolve_cancel(r);
    step_until(&b.calls);
    ck_assert_int_eq(b.status, KR_ERROR);
    ck_assert_int_eq(a.calls, 0);           /* cancelled: never called */
    kr_upstream_free(u);
}
END_TEST

START_TEST(test_ipv6_numeric)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    struct kr_hostport hp;
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a.sa;
    struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;

    /* the config syntax: brackets around the address */
    ck_assert(kr_hostport_parse("[::1]:9092", &hp));
    ck_assert_str_eq(hp.host, "::1");
    ck_assert_uint_eq(hp.port, 9092);
    dial[0].node_id = 5;
    dial[0].addr = hp;
    uc.dial = dial;
    uc.ndial = 1;
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_ptr_null(kr_upstream_resolve(u, 5, answer_cb, &a));
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.status, KR_OK);
    ck_assert_int_eq(s6->sin6_family, AF_INET6);
    ck_assert_uint_eq(a.len, sizeof(*s6));
    ck_assert(memcmp(&s6->sin6_addr, &lo, sizeof(lo)) == 0);
    ck_assert_uint_eq(ntohs(s6->sin6_port), 9092);
    ck_assert_str_eq(a.what, "[::1]:9092");
    kr_upstream_free(u);
    free(hp.host);
}
END_TEST

START_TEST(test_bootstrap_rotation)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    int i;

    bs[1].host = (char *)"127.0.0.9";
    bs[1].port = 9999;
    uc.nbootstrap = 2;
    u = kr_upstream_new(base, dns, &uc);
    for (i = 0; i < 4; i++) {
        a.calls = 0;
        ck_assert_ptr_null(kr_upstream_resolve(u, KR_NODE_BOOTSTRAP,
                                               answer_cb, &a));
        ck_assert_int_eq(a.calls, 1);
        if (i % 2 == 0) {
            assert_v4(&a, "127.0.0.1", fk.port);
        } else {
            assert_v4(&a, "127.0.0.9", 9999);
        }
    }
    kr_upstream_free(u);
}
END_TEST

/* The first bootstrap server refuses connections: the fetch moves on. */
START_TEST(test_bootstrap_failover)
{
    struct kr_upstream *u;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    /* a port nobody listens on: bound, then closed */
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &slen), 0);
    close(fd);
    bs[1] = bs[0];
    bs[0].host = (char *)"127.0.0.1";
    bs[0].port = ntohs(sin.sin_port);
    uc.nbootstrap = 2;
    fake_broker(&fk, 4, "127.0.0.4", 40004);
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_int_eq(nbrokers_at_least(u, 1), 1);
    ck_assert_int_eq(fk.n_metadata, 1);
    kr_upstream_free(u);
}
END_TEST

/* A host name from /etc/hosts, through evdns_getaddrinfo. */
START_TEST(test_hosts_file_name)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    struct kr_resolve *r;

    ck_assert_int_eq(evdns_base_load_hosts(dns, NULL), 0);
    dial[0].node_id = 3;
    dial[0].addr.host = (char *)"localhost";
    dial[0].addr.port = 9093;
    uc.dial = dial;
    uc.ndial = 1;
    u = kr_upstream_new(base, dns, &uc);
    r = kr_upstream_resolve(u, 3, answer_cb, &a);
    if (r != NULL) {
        step_until(&a.calls);
    }
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.status, KR_OK);
    if (a.sa.ss_family == AF_INET) {
        assert_v4(&a, "127.0.0.1", 9093);
    } else {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a.sa;

        ck_assert_int_eq(a.sa.ss_family, AF_INET6);
        ck_assert(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr));
        ck_assert_uint_eq(ntohs(s6->sin6_port), 9093);
    }
    ck_assert_str_eq(a.what, "localhost:9093");
    kr_upstream_free(u);
}
END_TEST

/*
 * The callback gets the name that was looked up, not only its address:
 * a broker's advertised host, a dial.N host (from /etc/hosts here: the
 * name differs from the address; the cluster does not advertise these
 * NodeIds, so the dial host stands in), an IPv6 one without brackets, a
 * bootstrap server's; none for a NodeId the cluster does not have.
 */
START_TEST(test_resolve_host_name)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    struct kr_resolve *r;

    ck_assert_int_eq(evdns_base_load_hosts(dns, NULL), 0);
    dial[0].node_id = 3;
    dial[0].addr.host = (char *)"localhost";
    dial[0].addr.port = 9093;
    dial[1].node_id = 5;
    dial[1].addr.host = (char *)"::1";
    dial[1].addr.port = 9095;
    uc.dial = dial;
    uc.ndial = 2;
    fake_broker(&fk, 2, "127.0.0.2", 40002);
    u = kr_upstream_new(base, dns, &uc);
    ck_assert_int_eq(nbrokers_at_least(u, 3), 3);

    ck_assert_ptr_null(kr_upstream_resolve(u, 2, answer_cb, &a));
    ck_assert_int_eq(a.status, KR_OK);
    ck_assert_str_eq(a.host, "127.0.0.2");

    memset(&a, 0, sizeof(a));
    r = kr_upstream_resolve(u, 3, answer_cb, &a);
    if (r != NULL) {
        step_until(&a.calls);
    }
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.status, KR_OK);
    ck_assert_str_eq(a.host, "localhost");
    ck_assert_str_eq(a.what, "localhost:9093");

    memset(&a, 0, sizeof(a));
    ck_assert_ptr_null(kr_upstream_resolve(u, 5, answer_cb, &a));
    ck_assert_int_eq(a.status, KR_OK);
    ck_assert_str_eq(a.host, "::1");
    ck_assert_str_eq(a.what, "[::1]:9095");

    memset(&a, 0, sizeof(a));
    ck_assert_ptr_null(kr_upstream_resolve(u, KR_NODE_BOOTSTRAP, answer_cb,
                                           &a));
    ck_assert_int_eq(a.status, KR_OK);
    ck_assert_str_eq(a.host, "127.0.0.1");

    memset(&a, 0, sizeof(a));
    ck_assert_ptr_nonnull(kr_upstream_resolve(u, 9, answer_cb, &a));
    step_until(&a.calls);
    ck_assert_int_eq(a.status, KR_ERROR);
    ck_assert_str_eq(a.host, "(null)");
    kr_upstream_free(u);
}
END_TEST

/* A DNS query that never gets an answer can be cancelled. */
START_TEST(test_cancel_dns)
{
    struct kr_upstream *u;
    struct answer a = { 0 };
    struct kr_resolve *r;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    char ns[64];
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int i;

    /* a "nameserver" that reads nothing and answers nothing */
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &slen), 0);
    snprintf(ns, sizeof(ns), "127.0.0.1:%u", ntohs(sin.sin_port));
    ck_assert_int_eq(evdns_base_nameserver_ip_add(dns, ns), 0);
    dial[0].node_id = 6;
    dial[0].addr.host = (char *)"kafka-6.example.invalid";
    dial[0].addr.port = 9092;
    uc.dial = dial;
    uc.ndial = 1;
    u = kr_upstream_new(base, dns, &uc);
    r = kr_upstream_resolve(u, 6, answer_cb, &a);
    ck_assert_ptr_nonnull(r);
    for (i = 0; i < 3; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
    ck_assert_int_eq(a.calls, 0);
    kr_upstream_resolve_cancel(r);
    for (i = 0; i < 3; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
    ck_assert_int_eq(a.calls, 0);
    kr_upstream_free(u);
    close(fd);
}
END_TEST

/* kr_upstream_learn adds brokers but never replaces a dial override. */
START_TEST(test_learn)
{
    struct kr_upstream *u;
    struct kr_arena arena;
    struct kr_node *body;
    struct kr_array *arr;
    struct kr_val *v;
    struct answer a = { 0 };
    static const char *hosts[] = { "10.1.1.1", "10.1.1.2" };
    int i;

    kr_arena_init(&arena, 0);
    dial[0].node_id = 2;
    dial[0].addr.host = (char *)"10.9.9.9";
    dial[0].addr.port = 9999;
    uc.dial = dial;
    uc.ndial = 1;
    u = kr_upstream_new(base, NULL, &uc);
    body = kr_node_new(&arena, kr_api_root(kr_api_get(3), true, 1), 1);
    v = kr_node_get(body, "Brokers");
    arr = kr_array_new(&arena, KR_T_STRUCT,
                       kr_node_field(body, (unsigned)kr_struct_field_index(
                           body->struct_id, "Brokers"))->struct_id, 2, 1);
    v->u.arr = arr;
    for (i = 0; i < 2; i++) {
        struct kr_node *b = arr->items[i].u.node;

        kr_node_get(b, "NodeId")->u.i = i + 1;
        kr_node_get(b, "Host")->u.s.p = (const uint8_t *)hosts[i];
        kr_node_get(b, "Host")->u.s.len = (int32_t)strlen(hosts[i]);
        kr_node_get(b, "Port")->u.i = 9092;
    }
    kr_upstream_learn(u, body, 3, 1);
    ck_assert_int_eq(kr_upstream_nbrokers(u), 2);
    ck_assert_ptr_null(kr_upstream_resolve(u, 1, answer_cb, &a));
    assert_v4(&a, "10.1.1.1", 9092);
    ck_assert_ptr_null(kr_upstream_resolve(u, 2, answer_cb, &a));
    assert_v4(&a, "10.9.9.9", 9999);
    kr_upstream_free(u);
    kr_arena_free(&arena);
}
END_TEST

/* kr_upstream_learn also learns TopicIds from Metadata v10+ bodies. */
START_TEST(test_learn_topics)
{
    static const uint8_t id[16] = { 0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    struct kr_upstream *u;
    struct kr_arena arena;
    struct kr_node *body, *t;
    struct kr_array *arr;
    struct kr_val *v;
    int16_t ver;

    kr_arena_init(&arena, 0);
    u = kr_upstream_new(base, NULL, &uc);
    ck_assert_ptr_nonnull(kr_upstream_topics(u));
    for (ver = 9; ver <= 12; ver += 3) {
        body = kr_node_new(&arena, kr_api_root(kr_api_get(3), true, ver),
                           ver);
        v = kr_node_get(body, "Topics");
        arr = kr_array_new(&arena, KR_T_STRUCT,
                           kr_node_field(body, (unsigned)kr_struct_field_index(
                               body->struct_id, "Topics"))->struct_id, 1,
                           ver);
        v->u.arr = arr;
        t = arr->items[0].u.node;
        kr_node_get(t, "Name")->u.s.p = (const uint8_t *)"orders";
        kr_node_get(t, "Name")->u.s.len = 6;
        if (ver >= 10) {
            kr_node_get(t, "TopicId")->u.s.p = id;
            kr_node_get(t, "TopicId")->u.s.len = 16;
        }
        kr_upstream_learn(u, body, 3, ver);
        if (ver < 10) {
            /* v9 has no TopicId: nothing learned */
            ck_assert_uint_eq(kr_topic_map_size(kr_upstream_topics(u)), 0);
        }
    }
    ck_assert_uint_eq(kr_topic_map_size(kr_upstream_topics(u)), 1);
    ck_assert_str_eq(kr_topic_map_name(kr_upstream_topics(u), id), "orders");
    kr_upstream_free(u);
    kr_arena_free(&arena);
    ck_assert_ptr_null(kr_upstream_topics(NULL));
}
END_TEST

/*
 * issue 12: two kr_upstreams sharing a cluster view (two workers): one
 * fetch serves both (the second's first fetch sees the first's, recent,
 * and skips), and what one learns from client traffic the other resolves
 * without a fetch of its own; ApiVersions ranges and TopicIds too.
 */
START_TEST(test_shared_cluster)
{
    static const uint8_t id[16] = { 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    struct kr_cluster *c = kr_cluster_new("test");
    struct kr_upstream *u1, *u2;
    struct kr_upstream_health h;
    struct kr_arena arena;
    struct kr_node *body, *b, *t;
    struct kr_array *arr;
    struct answer a = { 0 };
    int16_t lo = -5, hi = -5;
    int i;

    ck_assert_ptr_nonnull(c);
    kr_arena_init(&arena, 0);
    fake_broker(&fk, 1, "127.0.0.1", 40001);
    fake_broker(&fk, 2, "127.0.0.2", 40002);
    u1 = kr_upstream_new_shared(base, dns, &uc, c, NULL);
    ck_assert_ptr_nonnull(u1);
    ck_assert_int_eq(nbrokers_at_least(u1, 2), 2);
    ck_assert_int_eq(fk.n_metadata, 1);
    /* the second worker's upstream: the view is there at creation */
    u2 = kr_upstream_new_shared(base, dns, &uc, c, NULL);
    ck_assert_ptr_nonnull(u2);
    ck_assert_ptr_eq(kr_upstream_cluster(u2), c);
    ck_assert_int_eq(kr_upstream_nbrokers(u2), 2);
    ck_assert(kr_upstream_api_range(u2, 3, &lo, &hi));
    ck_assert_int_eq(hi, 12);
    for (i = 0; i < 20; i++) {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    ck_assert_int_eq(fk.n_metadata, 1);     /* u2 did not fetch */
    kr_upstream_health(u2, &h);
    ck_assert(h.last_ok_ms > 0 && h.last_ok_ms > h.last_fail_ms);
    ck_assert_int_eq(h.nbrokers, 2);
    /* u1 learns NodeId 7 and a TopicId from a client's Metadata v12 */
    body = kr_node_new(&arena, kr_api_root(kr_api_get(3), true, 12), 12);
    arr = kr_array_new(&arena, KR_T_STRUCT,
                       kr_node_field(body, (unsigned)kr_struct_field_index(
                           body->struct_id, "Brokers"))->struct_id, 1, 12);
    kr_node_get(body, "Brokers")->u.arr = arr;
    b = arr->items[0].u.node;
    kr_node_get(b, "NodeId")->u.i = 7;
    kr_node_get(b, "Host")->u.s.p = (const uint8_t *)"10.7.7.7";
    kr_node_get(b, "Host")->u.s.len = 8;
    kr_node_get(b, "Port")->u.i = 9097;
    arr = kr_array_new(&arena, KR_T_STRUCT,
                       kr_node_field(body, (unsigned)kr_struct_field_index(
                           body->struct_id, "Topics"))->struct_id, 1, 12);
    kr_node_get(body, "Topics")->u.arr = arr;
    t = arr->items[0].u.node;
    kr_node_get(t, "Name")->u.s.p = (const uint8_t *)"payments";
    kr_node_get(t, "Name")->u.s.len = 8;
    kr_node_get(t, "TopicId")->u.s.p = id;
    kr_node_get(t, "TopicId")->u.s.len = 16;
    kr_upstream_learn(u1, body, 3, 12);
    ck_assert_ptr_null(kr_upstream_resolve(u2, 7, answer_cb, &a));
    ck_assert_int_eq(a.calls, 1);
    assert_v4(&a, "10.7.7.7", 9097);
    ck_assert_int_eq(fk.n_metadata, 1);     /* no fetch for NodeId 7 */
    ck_assert_str_eq(kr_topic_map_name(kr_upstream_topics(u2), id),
                     "payments");
    /* a private view shares nothing */
    {
        struct kr_upstream *u3 = kr_upstream_new(base, NULL, &uc);

        ck_assert_ptr_ne(kr_upstream_cluster(u3), c);
        ck_assert_int_eq(kr_upstream_nbrokers(u3), 0);
        ck_assert_ptr_null(kr_topic_map_name(kr_upstream_topics(u3), id));
        kr_upstream_free(u3);
    }
    /* references: the last unref frees (ASan/valgrind see a leak or a
       double free otherwise) */
    ck_assert_ptr_eq(kr_upstream_ref(u2), u2);
    kr_upstream_unref(u2);
    kr_upstream_unref(u2);
    kr_upstream_free(u1);
    kr_cluster_put(c);
    kr_arena_free(&arena);
}
END_TEST

static Suite *
upstream_suite(void)
{
    Suite *s = suite_create("upstream");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_fetch_real_socket);
    tcase_add_loop_test(tc, test_fetch_old_versions, 0, 2);
    tcase_add_test(tc, test_dial_override_wins);
    tcase_add_test(tc, test_unknown_node_one_refresh);
    tcase_add_test(tc, test_unknown_node_found_by_refresh);
    tcase_add_test(tc, test_cancel_waiting);
    tcase_add_test(tc, test_ipv6_numeric);
    tcase_add_test(tc, test_bootstrap_rotation);
    tcase_add_test(tc, test_bootstrap_failover);
    tcase_add_test(tc, test_hosts_file_name);
    tcase_add_test(tc, test_resolve_host_name);
    tcase_add_test(tc, test_cancel_dns);
    tcase_add_test(tc, test_learn);
    tcase_add_test(tc, test_learn_topics);
    tcase_add_test(tc, test_shared_cluster);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(upstream_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
