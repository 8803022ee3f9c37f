/*
 * check_rewrite.c - unit tests for kr_rewrite: endpoint rewriting over
 * every response shape that carries brokers, ApiVersions capping, records
 * moved in place, pass-through of unchanged frames, malformed input.
 *
 * Frames are built with the codec (kr_node_new + fields + kr_encode_msg),
 * never by hand.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_evcodec.h"
#include "kr_xbuf.h"
#include "kr_rewrite.h"
#include "kr_scan.h"
#include "kr_schema.h"
#include "kr_sni.h"
#include "kr_translate.h"
#include "kr_upstream.h"
#include "kr_test.h"

#define ADV_HOST "proxy.local"
#define PORT_BASE 19000

static struct kr_arena arena;

static const struct kr_rewrite_ctx ctx = {
    .advertised_host = ADV_HOST,
    .broker_port_base = PORT_BASE,
    .node_id_min = 0,
    .node_id_max = 15,
    .upstream = NULL,
    .who = "test",
};

static void
setup(void)
{
    kr_rewrite_init();
    kr_arena_init(&arena, 0);
}

static void
teardown(void)
{
    kr_arena_free(&arena);
}

/* ---- tree building ------------------------------------------------------ */

/* Shared tree helpers (kr_test.h) under this file's short names. */
#define fld(n, name) kr_test_fld((n), (name))
#define set_i(n, name, x) kr_test_set_i((n), (name), (x))
#define set_s(n, name, s) kr_test_set_s((n), (name), (s))
#define set_arr(n, name, cnt) kr_test_set_arr(&arena, (n), (name), (cnt))
#define elem(a, i) kr_test_elem((a), (i))

/* A struct array of cnt elements in field name (tagged fields too). */
static struct kr_msg
rsp_new(int16_t key, int16_t ver)
{
    const struct kr_api_desc *a = kr_api_get(key);
    struct kr_msg m;
    int hv = kr_response_header_version(key, ver);

    ck_assert_ptr_nonnull(a);
    ck_assert_int_ge(hv, 0);
    memset(&m, 0, sizeof(m));
    m.dir = KR_DIR_RESPONSE;
    m.api_key = key;
    m.api_version = ver;
    m.hdr_version = (int16_t)hv;
    m.correlation_id = 4242;
    m.header = kr_node_new(&arena, kr_response_header_struct, (int16_t)hv);
    m.body = kr_node_new(&arena, kr_api_root(a, true, ver), ver);
    ck_assert_ptr_nonnull(m.header);
    ck_assert_ptr_nonnull(m.body);
    set_i(m.header, "CorrelationId", 4242);
    return m;
}

/* Encode m; records slices come from src.  Returns a malloc'd payload. */
static uint8_t *
encode(const struct kr_msg *m, const uint8_t *src, size_t src_len,
       size_t *len)
{
    struct kr_wbuf w;
    struct kr_codec_err ce;
    uint8_t *p;

    memset(&w, 0, sizeof(w));
    ck_assert_msg(kr_encode_msg(m, &w, &ce) == KR_OK, "encode: %s at %s",
                  ce.msg, ce.path);
    p = kr_wbuf_flatten(&w, src, src_len);
    ck_assert_ptr_nonnull(p);
    *len = w.total;
    kr_wbuf_free(&w);
    return p;
}

/* out as a flat copy; checks the size prefix and returns the payload. */
static uint8_t *
out_payload(struct evbuffer *out, size_t *len)
{
    size_t n = evbuffer_get_length(out);
    uint8_t *p = malloc(n ? n : 1);
    uint32_t size;

    ck_assert_int_ge(n, 4);
    ck_assert_int_eq(evbuffer_copyout(out, p, n), (ev_ssize_t)n);
    size = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
    ck_assert_uint_eq(size, n - 4);
    memmove(p, p + 4, n - 4);
    *len = n - 4;
    return p;
}

static struct kr_msg
decode(const uint8_t *p, size_t len, int16_t key, int16_t ver)
{
    struct kr_codec_err ce;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_msg m;

    kr_rbuf_init_flat(&rb, &iov, p, len);
    ck_assert_msg(kr_decode_response(&arena, &rb, key, ver, 0, &m, &ce) ==
                  KR_OK, "decode: %s at %s", ce.msg, ce.path);
    ck_assert_int_eq(m.correlation_id, 4242);
    return m;
}

static void
assert_str(const struct kr_val *v, const char *s)
{
    ck_assert_int_eq(v->is_null, 0);
    ck_assert_int_eq(v->u.s.len, (int32_t)strlen(s));
    ck_assert(memcmp(v->u.s.p, s, strlen(s)) == 0);
}

/* Rewrite payload p (len bytes) given as one evbuffer chain. */
static int
run(int16_t key, int16_t ver, const uint8_t *p, size_t len,
    struct evbuffer *out, struct kr_rewrite_result *res)
{
    struct evbuffer *in = evbuffer_new();
    int rc;

    evbuffer_add(in, p, len);
    rc = kr_rewrite_response(&ctx, key, ver, in, out, res);
    ck_assert_uint_eq(evbuffer_get_length(in), 0);
    evbuffer_free(in);
    return rc;
}

/* ---- Metadata ----------------------------------------------------------- */

static struct kr_msg
metadata(int16_t ver, const int32_t *ids, uint32_t n, const char *host,
         int32_t port0)
{
    struct kr_msg m = rsp_new(3, ver);
    struct kr_array *b = set_arr(m.body, "Brokers", n);
    struct kr_array *t, *pa;
    uint32_t i;

    for (i = 0; i < n; i++) {
        set_i(elem(b, i), "NodeId", ids[i]);
        set_s(elem(b, i), "Host", host);
        set_i(elem(b, i), "Port", port0 + (int32_t)i);
    }
    if (ver >= 2) {
        set_s(m.body, "ClusterId", "cluster-xyz");
    }
    if (ver >= 1) {
        set_i(m.body, "ControllerId", ids[0]);
    }
    t = set_arr(m.body, "Topics", 1);
    set_s(elem(t, 0), "Name", "orders");
    pa = set_arr(elem(t, 0), "Partitions", 2);
    set_i(elem(pa, 1), "PartitionIndex", 1);
    set_i(elem(pa, 1), "LeaderId", ids[0]);
    return m;
}

static const int16_t md_versions[] = { 0, 1, 9, 12 };

START_TEST(test_metadata_rewrite)
{
    int16_t ver = md_versions[_i];
    static const int32_t ids[] = { 1, 2, 3 };
    struct kr_msg m = metadata(ver, ids, 3, "kafka-broker.internal", 9092);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *b, *t;
    uint8_t *p, *q;
    size_t len, qlen;
    uint32_t i;

    ck_assert(kr_rewrite_wants(3, ver));
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(3, ver, p, len, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.endpoints, 3);
    ck_assert_uint_eq(res.trailing, 0);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 3, ver);
    ck_assert_uint_eq(m.trailing, 0);
    b = fld(m.body, "Brokers")->u.arr;
    ck_assert_uint_eq(b->n, 3);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(fld(elem(b, i), "NodeId")->u.i, ids[i]);
        assert_str(fld(elem(b, i), "Host"), ADV_HOST);
        ck_assert_int_eq(fld(elem(b, i), "Port")->u.i, PORT_BASE + ids[i]);
    }
    /* everything else as the broker sent it */
    t = fld(m.body, "Topics")->u.arr;
    ck_assert_uint_eq(t->n, 1);
    assert_str(fld(elem(t, 0), "Name"), "orders");
    ck_assert_uint_eq(fld(elem(t, 0), "Partitions")->u.arr->n, 2);
    ck_assert_int_eq(
        fld(elem(fld(elem(t, 0), "Partitions")->u.arr, 1),
            "PartitionIndex")->u.i, 1);
    if (ver >= 2) {
        assert_str(fld(m.body, "ClusterId"), "cluster-xyz");
    }
    if (ver >= 1) {
        ck_assert_int_eq(fld(m.body, "ControllerId")->u.i, 1);
    }
    /* size: every host grew by the same amount */
    ck_assert_uint_eq(qlen, len + 3 * (strlen(ADV_HOST) -
                                       strlen("kafka-broker.internal")));
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/* Already rewritten: out is the input, byte for byte and chain for chain. */
START_TEST(test_unchanged_passthrough)
{
    static const int32_t ids[] = { 0, 5 };
    struct kr_msg m;
    struct kr_rewrite_result res;
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct evbuffer_iovec v[4];
    uint8_t *p, *q;
    size_t len, qlen;
    int n;

    m = metadata(12, ids, 2, ADV_HOST, PORT_BASE);
    /* ports must be base + NodeId: 19000 and 19005 */
    set_i(elem(fld(m.body, "Brokers")->u.arr, 1), "Port", PORT_BASE + 5);
    p = encode(&m, NULL, 0, &len);
    evbuffer_add_reference(in, p, len, NULL, NULL);
    ck_assert_int_eq(kr_rewrite_response(&ctx, 3, 12, in, out, &res), KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.endpoints, 2);
    ck_assert_uint_eq(evbuffer_get_length(in), 0);
    /* not re-encoded: the original chain was moved behind the prefix */
    n = evbuffer_peek(out, -1, NULL, v, 4);
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_eq(v[1].iov_base, p);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(qlen, len);
    ck_assert(memcmp(p, q, len) == 0);
    free(q);
    evbuffer_free(in);
    evbuffer_free(out);
    free(p);
}
END_TEST

/* librdkafka 2.12's mock: one extra byte after Metadata v9+ bodies. */
START_TEST(test_trailing_byte_kept)
{
    static const int32_t ids[] = { 1, 2, 3 };
    struct kr_msg m = metadata(12, ids, 3, "127.0.0.1", 40001);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    uint8_t *p, *q, *p2;
    size_t len, qlen;

    p = encode(&m, NULL, 0, &len);
    p2 = malloc(len + 1);
    memcpy(p2, p, len);
    p2[len] = 0x00;
    ck_assert_int_eq(run(3, 12, p2, len + 1, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.trailing, 1);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(q[qlen - 1], 0x00);
    m = decode(q, qlen, 3, 12);
    ck_assert_uint_eq(m.trailing, 1);
    ck_assert_int_eq(fld(elem(fld(m.body, "Brokers")->u.arr, 2),
                         "Port")->u.i, PORT_BASE + 3);
    free(p);
    free(p2);
    free(q);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_node_id_out_of_range)
{
    static const int32_t ids[] = { 1, 16, 3 };
    struct kr_msg m = metadata(9, ids, 3, "b", 9092);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    uint8_t *p;
    size_t len;

    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(3, 9, p, len, out, &res), KR_ELIMIT);
    ck_assert_int_eq(res.bad_node_id, 16);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    ck_assert_ptr_nonnull(strstr(res.err, "NodeId 16"));
    ck_assert_ptr_nonnull(strstr(res.err, "0-15"));
    free(p);
    evbuffer_free(out);
}
END_TEST

/* Every strict prefix of a response is refused, never read past. */
START_TEST(test_truncated)
{
    static const int32_t ids[] = { 1, 2, 3 };
    int16_t ver = md_versions[_i];
    struct kr_msg m = metadata(ver, ids, 3, "kafka-1", 9092);
    struct kr_rewrite_result res;
    uint8_t *p;
    size_t len, cut;

    p = encode(&m, NULL, 0, &len);
    for (cut = 0; cut < len; cut++) {
        struct evbuffer *out = evbuffer_new();
        /* exact-size heap copy so ASan sees any over-read */
        uint8_t *c = malloc(cut ? cut : 1);

        memcpy(c, p, cut);
        ck_assert_int_eq(run(3, ver, c, cut, out, &res), KR_EPROTO);
        ck_assert_uint_eq(evbuffer_get_length(out), 0);
        ck_assert(res.err[0] != '\0');
        free(c);
        evbuffer_free(out);
    }
    free(p);
}
END_TEST

/* The payload as one chain per byte (more than KR_RBUF_MAX_SEG chains). */
START_TEST(test_many_chains)
{
    static const int32_t ids[] = { 1, 2, 3 };
    struct kr_msg m = metadata(12, ids, 3, "kafka-host-name", 9092);
    struct kr_rewrite_result res, res1;
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct evbuffer *out1 = evbuffer_new();
    uint8_t *p, *q, *q1;
    size_t len, qlen, q1len, i;

    p = encode(&m, NULL, 0, &len);
    ck_assert_uint_gt(len, 2 * KR_RBUF_MAX_SEG);
    for (i = 0; i < len; i++) {
        evbuffer_add_reference(in, p + i, 1, NULL, NULL);
    }
    ck_assert_int_eq(kr_rewrite_response(&ctx, 3, 12, in, out, &res),
                     KR_OK);
    ck_assert_int_eq(run(3, 12, p, len, out1, &res1), KR_OK);
    ck_assert_uint_eq(res.endpoints, 3);
    q = out_payload(out, &qlen);
    q1 = out_payload(out1, &q1len);
    ck_assert_uint_eq(qlen, q1len);
    ck_assert(memcmp(q, q1, qlen) == 0);
    free(p);
    free(q);
    free(q1);
    evbuffer_free(in);
    evbuffer_free(out);
    evbuffer_free(out1);
}
END_TEST

/* A Metadata version newer than the tables is held and refused. */
START_TEST(test_unknown_version_refused)
{
    static const int32_t ids[] = { 1 };
    int16_t hi = kr_apis[3].valid.hi;
    struct kr_msg m = metadata(hi, ids, 1, "kafka-1", 9092);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    uint8_t *p;
    size_t len;

    ck_assert(kr_rewrite_wants(3, (int16_t)(hi + 1)));
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(3, (int16_t)(hi + 1), p, len, out, &res),
                     KR_EPROTO);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    ck_assert_ptr_nonnull(strstr(res.err, "Metadata"));
    free(p);
    evbuffer_free(out);
}
END_TEST

/* ---- FindCoordinator ---------------------------------------------------- */

START_TEST(test_find_coordinator_root)
{
    int16_t ver = (int16_t)_i;          /* 0..3 */
    struct kr_msg m = rsp_new(10, ver);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    uint8_t *p, *q;
    size_t len, qlen;

    ck_assert(kr_rewrite_wants(10, ver));
    set_i(m.body, "NodeId", 7);
    set_s(m.body, "Host", "kafka-7.cluster");
    set_i(m.body, "Port", 9093);
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(10, ver, p, len, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.endpoints, 1);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 10, ver);
    ck_assert_int_eq(fld(m.body, "NodeId")->u.i, 7);
    assert_str(fld(m.body, "Host"), ADV_HOST);
    ck_assert_int_eq(fld(m.body, "Port")->u.i, PORT_BASE + 7);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_find_coordinator_list)
{
    int16_t ver = (int16_t)_i;          /* 4..6 */
    struct kr_msg m = rsp_new(10, ver);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *c;
    uint8_t *p, *q;
    size_t len, qlen;

    ck_assert(kr_rewrite_wants(10, ver));
    c = set_arr(m.body, "Coordinators", 3);
    set_s(elem(c, 0), "Key", "group-a");
    set_i(elem(c, 0), "NodeId", 2);
    set_s(elem(c, 0), "Host", "kafka-2");
    set_i(elem(c, 0), "Port", 9092);
    set_s(elem(c, 1), "Key", "group-b");
    set_i(elem(c, 1), "NodeId", 4);
    set_s(elem(c, 1), "Host", "kafka-4");
    set_i(elem(c, 1), "Port", 9092);
    /* COORDINATOR_NOT_AVAILABLE: Kafka's "no node" -1, "", -1 */
    set_s(elem(c, 2), "Key", "group-c");
    set_i(elem(c, 2), "NodeId", -1);
    set_s(elem(c, 2), "Host", "");
    set_i(elem(c, 2), "Port", -1);
    set_i(elem(c, 2), "ErrorCode", 15);
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(10, ver, p, len, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.endpoints, 3);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 10, ver);
    c = fld(m.body, "Coordinators")->u.arr;
    ck_assert_uint_eq(c->n, 3);
    assert_str(fld(elem(c, 0), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(c, 0), "Port")->u.i, PORT_BASE + 2);
    assert_str(fld(elem(c, 1), "Key"), "group-b");
    assert_str(fld(elem(c, 1), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(c, 1), "Port")->u.i, PORT_BASE + 4);
    ck_assert_int_eq(fld(elem(c, 2), "NodeId")->u.i, -1);
    assert_str(fld(elem(c, 2), "Host"), "");
    ck_assert_int_eq(fld(elem(c, 2), "Port")->u.i, -1);
    ck_assert_int_eq(fld(elem(c, 2), "ErrorCode")->u.i, 15);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/* ---- DescribeCluster ---------------------------------------------------- */

START_TEST(test_describe_cluster)
{
    int16_t ver = (int16_t)_i;          /* 0..2 */
    struct kr_msg m = rsp_new(60, ver);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *b;
    uint8_t *p, *q;
    size_t len, qlen;

    ck_assert(kr_rewrite_wants(60, ver));
    set_s(m.body, "ClusterId", "c1");
    b = set_arr(m.body, "Brokers", 2);
    set_i(elem(b, 0), "BrokerId", 0);
    set_s(elem(b, 0), "Host", "10.0.0.10");
    set_i(elem(b, 0), "Port", 9092);
    set_i(elem(b, 1), "BrokerId", 15);
    set_s(elem(b, 1), "Host", "10.0.0.25");
    set_i(elem(b, 1), "Port", 9092);
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(60, ver, p, len, out, &res), KR_OK);
    ck_assert_uint_eq(res.endpoints, 2);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 60, ver);
    b = fld(m.body, "Brokers")->u.arr;
    assert_str(fld(elem(b, 0), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(b, 0), "Port")->u.i, PORT_BASE + 0);
    assert_str(fld(elem(b, 1), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(b, 1), "Port")->u.i, PORT_BASE + 15);
    assert_str(fld(m.body, "ClusterId"), "c1");
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/* ---- Produce / Fetch NodeEndpoints (KIP-951) ---------------------------- */

START_TEST(test_produce_node_endpoints)
{
    struct kr_msg m = rsp_new(0, 10);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *r, *e;
    uint8_t *p, *q;
    size_t len, qlen;

    ck_assert(!kr_rewrite_wants(0, 9));
    ck_assert(kr_rewrite_wants(0, 10));
    r = set_arr(m.body, "Responses", 1);
    set_s(elem(r, 0), "Name", "t");
    set_arr(elem(r, 0), "PartitionResponses", 1);
    set_i(elem(fld(elem(r, 0), "PartitionResponses")->u.arr, 0),
          "ErrorCode", 6);                /* NOT_LEADER_OR_FOLLOWER */
    e = set_arr(m.body, "NodeEndpoints", 2);
    set_i(elem(e, 0), "NodeId", 1);
    set_s(elem(e, 0), "Host", "127.0.0.1");
    set_i(elem(e, 0), "Port", 39001);
    set_i(elem(e, 1), "NodeId", 2);
    set_s(elem(e, 1), "Host", "127.0.0.1");
    set_i(elem(e, 1), "Port", 39002);
    set_s(elem(e, 1), "Rack", "rack-b");
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(0, 10, p, len, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.endpoints, 2);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 0, 10);
    ck_assert(fld(m.body, "NodeEndpoints")->present);
    e = fld(m.body, "NodeEndpoints")->u.arr;
    ck_assert_uint_eq(e->n, 2);
    assert_str(fld(elem(e, 0), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(e, 0), "Port")->u.i, PORT_BASE + 1);
    assert_str(fld(elem(e, 1), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(e, 1), "Port")->u.i, PORT_BASE + 2);
    assert_str(fld(elem(e, 1), "Rack"), "rack-b");
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/* A Produce v10 response without the tagged field: untouched. */
START_TEST(test_produce_without_endpoints)
{
    struct kr_msg m = rsp_new(0, 11);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *r;
    uint8_t *p, *q;
    size_t len, qlen;

    r = set_arr(m.body, "Responses", 1);
    set_s(elem(r, 0), "Name", "t");
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(0, 11, p, len, out, &res), KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.endpoints, 0);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(qlen, len);
    ck_assert(memcmp(p, q, len) == 0);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_fetch_records_in_place)
{
    static const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8,
                                      9, 10, 11, 12, 13, 14, 15, 16 };
    struct kr_msg m = rsp_new(1, 16);
    struct kr_rewrite_result res;
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct evbuffer_iovec v[16];
    struct kr_array *r, *pa, *e;
    struct kr_val *rec;
    uint8_t *recs, *p, *q, *at;
    size_t rlen = 3000, len, qlen, roff;
    int n, i, found = -1;

    ck_assert(!kr_rewrite_wants(1, 15));
    ck_assert(kr_rewrite_wants(1, 16));
    /* records bytes: a recognisable pattern */
    recs = malloc(rlen);
    for (roff = 0; roff < rlen; roff++) {
        recs[roff] = (uint8_t)(roff * 7 + 3);
    }
    r = set_arr(m.body, "Responses", 1);
    fld(elem(r, 0), "TopicId")->u.s.p = uuid;
    fld(elem(r, 0), "TopicId")->u.s.len = 16;
    pa = set_arr(elem(r, 0), "Partitions", 1);
    set_i(elem(pa, 0), "PartitionIndex", 3);
    set_i(elem(pa, 0), "HighWatermark", 1000);
    rec = fld(elem(pa, 0), "Records");
    rec->is_null = 0;
    rec->u.rec.off = 0;
    rec->u.rec.len = (int32_t)rlen;
    e = set_arr(m.body, "NodeEndpoints", 1);
    set_i(elem(e, 0), "NodeId", 3);
    set_s(elem(e, 0), "Host", "fetch-leader.example.com");
    set_i(elem(e, 0), "Port", 9092);
    p = encode(&m, recs, rlen, &len);
    at = memmem(p, len, recs, rlen);
    ck_assert_ptr_nonnull(at);
    roff = (size_t)(at - p);

    /* three chains: before, the records (by reference), after */
    evbuffer_add(in, p, roff);
    evbuffer_add_reference(in, recs, rlen, NULL, NULL);
    {
        struct evbuffer *tail = evbuffer_new();

        evbuffer_add(tail, p + roff + rlen, len - roff - rlen);
        evbuffer_add_buffer(in, tail);
        evbuffer_free(tail);
    }
    ck_assert_int_eq(kr_rewrite_response(&ctx, 1, 16, in, out, &res),
                     KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.endpoints, 1);
    ck_assert_uint_eq(evbuffer_get_length(in), 0);
    /* the records chain itself was moved into out: not copied */
    n = evbuffer_peek(out, -1, NULL, v, 16);
    ck_assert_int_gt(n, 0);
    for (i = 0; i < n && i < 16; i++) {
        if (v[i].iov_base == (void *)recs && v[i].iov_len == rlen) {
            found = i;
        }
    }
    ck_assert_int_ge(found, 0);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 1, 16);
    pa = fld(elem(fld(m.body, "Responses")->u.arr, 0), "Partitions")->u.arr;
    rec = fld(elem(pa, 0), "Records");
    ck_assert_int_eq(rec->u.rec.len, (int32_t)rlen);
    ck_assert(memcmp(q + rec->u.rec.off, recs, rlen) == 0);
    ck_assert_int_eq(fld(elem(pa, 0), "HighWatermark")->u.i, 1000);
    e = fld(m.body, "NodeEndpoints")->u.arr;
    assert_str(fld(elem(e, 0), "Host"), ADV_HOST);
    ck_assert_int_eq(fld(elem(e, 0), "Port")->u.i, PORT_BASE + 3);
    free(p);
    free(q);
    evbuffer_free(in);
    evbuffer_free(out);     /* drops the reference to recs first */
    free(recs);
}
END_TEST

/*
 * Every single-byte corruption of a Fetch v16 response with records and
 * NodeEndpoints: a clean result or a clean refusal, never a crash or an
 * over-read (run under ASan), and an OK result is a well-formed frame.
 */
START_TEST(test_corrupted_bytes)
{
    static const uint8_t flips[] = { 0x01, 0x80, 0xff };
    static const uint8_t uuid[16] = { 9 };
    uint8_t recs[40];
    struct kr_msg m = rsp_new(1, 16);
    struct kr_array *r, *pa, *e;
    struct kr_val *rec;
    uint8_t *p;
    size_t len, i, j;

    memset(recs, 0xab, sizeof(recs));
    r = set_arr(m.body, "Responses", 1);
    fld(elem(r, 0), "TopicId")->u.s.p = uuid;
    fld(elem(r, 0), "TopicId")->u.s.len = 16;
    pa = set_arr(elem(r, 0), "Partitions", 2);
    rec = fld(elem(pa, 1), "Records");
    rec->is_null = 0;
    rec->u.rec.off = 0;
    rec->u.rec.len = (int32_t)sizeof(recs);
    e = set_arr(m.body, "NodeEndpoints", 2);
    set_i(elem(e, 0), "NodeId", 1);
    set_s(elem(e, 0), "Host", "h1");
    set_i(elem(e, 0), "Port", 1);
    set_i(elem(e, 1), "NodeId", 2);
    set_s(elem(e, 1), "Host", "h2");
    set_i(elem(e, 1), "Port", 2);
    p = encode(&m, recs, sizeof(recs), &len);
    for (i = 0; i < len; i++) {
        for (j = 0; j < KR_ARRAY_LEN(flips); j++) {
            struct kr_rewrite_result res;
            struct evbuffer *out = evbuffer_new();
            uint8_t *c = malloc(len);
            int rc;

            memcpy(c, p, len);
            c[i] ^= flips[j];
            rc = run(1, 16, c, len, out, &res);
            ck_assert_msg(rc == KR_OK || rc == KR_EPROTO || rc == KR_ELIMIT,
                          "byte %zu: rc %d", i, rc);
            if (rc == KR_OK) {
                size_t qlen;
                uint8_t *q = out_payload(out, &qlen);

                free(q);
            } else {
                ck_assert_uint_eq(evbuffer_get_length(out), 0);
                ck_assert(res.err[0] != '\0');
            }
            free(c);
            evbuffer_free(out);
        }
    }
    free(p);
}
END_TEST

/* ---- ApiVersions -------------------------------------------------------- */

static void
api_entry(struct kr_node *e, int16_t key, int16_t lo, int16_t hi)
{
    set_i(e, "ApiKey", key);
    set_i(e, "MinVersion", lo);
    set_i(e, "MaxVersion", hi);
}

static int64_t
api_max(struct kr_array *a, int16_t key)
{
    uint32_t i;

    for (i = 0; i < a->n; i++) {
        if (fld(elem(a, i), "ApiKey")->u.i == key) {
            return fld(elem(a, i), "MaxVersion")->u.i;
        }
    }
    ck_abort_msg("ApiKey %d missing", key);
    return -1;
}

/* _i: 0 = v0, 1 = v3, 2 = v3 body for a version newer than the tables */
START_TEST(test_api_versions_cap)
{
    int16_t ver = _i == 0 ? 0 : 3;
    int16_t asked = _i == 2 ? (int16_t)(kr_apis[18].valid.hi + 3) : ver;
    struct kr_msg m = rsp_new(18, ver);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *a;
    uint8_t *p, *q;
    size_t len, qlen;

    ck_assert(kr_rewrite_wants(18, asked));
    a = set_arr(m.body, "ApiKeys", 5);
    api_entry(elem(a, 0), 3, 0, 99);        /* Metadata: capped */
    api_entry(elem(a, 1), 0, 0, 50);        /* Produce: capped */
    api_entry(elem(a, 2), 12, 0, 99);       /* Heartbeat: no endpoints */
    api_entry(elem(a, 3), 999, 0, 5);       /* unknown ApiKey */
    api_entry(elem(a, 4), 10, 0, 2);        /* FindCoordinator: below */
    if (ver >= 1) {
        set_i(m.body, "ThrottleTimeMs", 0);
    }
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(18, asked, p, len, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.capped, 2);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(qlen, len);   /* same layout, same size */
    m = decode(q, qlen, 18, ver);
    a = fld(m.body, "ApiKeys")->u.arr;
    ck_assert_uint_eq(a->n, 5);
    ck_assert_int_eq(api_max(a, 3), kr_apis[3].valid.hi);
    ck_assert_int_eq(api_max(a, 0), kr_apis[0].valid.hi);
    ck_assert_int_eq(api_max(a, 12), 99);
    ck_assert_int_eq(api_max(a, 999), 5);
    ck_assert_int_eq(api_max(a, 10), 2);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/*
 * With clamps in the ctx (a clamp rule): entries intersected with their
 * clamp, Produce's MinVersion kept, unknown ApiKeys dropped unless
 * pass_unknown_apis.  _i: 0 = drop unknown, 1 = pass them.
 */
START_TEST(test_api_versions_clamps)
{
    struct kr_rewrite_ctx c2 = ctx;
    struct kr_msg m = rsp_new(18, 3);
    struct kr_rewrite_result res;
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct kr_clamp *cl;
    struct kr_array *a;
    uint8_t *p, *q;
    size_t len, qlen;
    uint32_t i;
    int16_t k;
    bool seen999 = false;

    cl = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) * sizeof(*cl));
    ck_assert_ptr_nonnull(cl);
    for (k = 0; k <= kr_api_max; k++) {
        cl[k].min = 1;
        cl[k].max = 0;
    }
    cl[0] = (struct kr_clamp){ 3, 7 };          /* Produce */
    cl[1] = (struct kr_clamp){ 0, 11 };         /* Fetch */
    c2.clamps = cl;
    c2.pass_unknown_apis = _i == 1;
    a = set_arr(m.body, "ApiKeys", 5);
    api_entry(elem(a, 0), 0, 0, 11);
    api_entry(elem(a, 1), 1, 4, 17);
    api_entry(elem(a, 2), 3, 0, 99);
    api_entry(elem(a, 3), 12, 0, 4);
    api_entry(elem(a, 4), 999, 0, 5);
    p = encode(&m, NULL, 0, &len);
    evbuffer_add(in, p, len);
    ck_assert_int_eq(kr_rewrite_response(&c2, 18, 3, in, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.capped, _i == 1 ? 3 : 4);
    q = out_payload(out, &qlen);
    m = decode(q, qlen, 18, 3);
    a = fld(m.body, "ApiKeys")->u.arr;
    ck_assert_uint_eq(a->n, _i == 1 ? 5 : 4);
    ck_assert_int_eq(api_max(a, 0), 7);
    ck_assert_int_eq(api_max(a, 1), 11);
    ck_assert_int_eq(api_max(a, 3), kr_apis[3].valid.hi);
    ck_assert_int_eq(api_max(a, 12), 4);
    for (i = 0; i < a->n; i++) {
        struct kr_node *e = elem(a, i);

        if (fld(e, "ApiKey")->u.i == 0 || fld(e, "ApiKey")->u.i == 12) {
            ck_assert_int_eq(fld(e, "MinVersion")->u.i, 0);
        } else if (fld(e, "ApiKey")->u.i == 1) {
            ck_assert_int_eq(fld(e, "MinVersion")->u.i, 4);
        }
        seen999 |= fld(e, "ApiKey")->u.i == 999;
    }
    ck_assert_int_eq(seen999, _i == 1);
    free(p);
    free(q);
    evbuffer_free(in);
    evbuffer_free(out);
}
END_TEST

/* Nothing to cap: the frame passes through unchanged. */
START_TEST(test_api_versions_nothing_to_cap)
{
    struct kr_msg m = rsp_new(18, 3);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *a;
    uint8_t *p, *q;
    size_t len, qlen;

    a = set_arr(m.body, "ApiKeys", 2);
    api_entry(elem(a, 0), 3, 0, 12);
    api_entry(elem(a, 1), 18, 0, 3);
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(18, 3, p, len, out, &res), KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.capped, 0);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(qlen, len);
    ck_assert(memcmp(p, q, len) == 0);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/*
 * KIP-511: asked v3 (or a version the broker does not know), the broker
 * answers UNSUPPORTED_VERSION with a v0 body: passed byte for byte, even
 * with a MaxVersion krelay would otherwise cap.
 */
START_TEST(test_api_versions_unsupported_fallback)
{
    int16_t asked = _i == 0 ? 3 : 4;
    struct kr_msg m = rsp_new(18, 0);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    struct kr_array *a;
    uint8_t *p, *q;
    size_t len, qlen;

    set_i(m.body, "ErrorCode", 35);
    a = set_arr(m.body, "ApiKeys", 2);
    api_entry(elem(a, 0), 18, 0, 2);
    api_entry(elem(a, 1), 3, 0, 99);
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(18, asked, p, len, out, &res), KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.capped, 0);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(qlen, len);
    ck_assert(memcmp(p, q, len) == 0);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

/* The same with a body that is not even a valid v0 body (2.12's mock). */
START_TEST(test_api_versions_nonstandard_error_body)
{
    struct kr_msg m = rsp_new(18, 3);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    uint8_t *p, *q;
    size_t len, qlen;

    set_i(m.body, "ErrorCode", 35);
    set_arr(m.body, "ApiKeys", 0);
    p = encode(&m, NULL, 0, &len);
    ck_assert_int_eq(run(18, 3, p, len, out, &res), KR_OK);
    q = out_payload(out, &qlen);
    ck_assert_uint_eq(qlen, len);
    ck_assert(memcmp(p, q, len) == 0);
    free(p);
    free(q);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_api_versions_truncated)
{
    static const uint8_t shortp[] = { 0, 0, 0x10, 0x92, 0 };
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();

    ck_assert_int_eq(run(18, 0, shortp, sizeof(shortp), out, &res),
                     KR_EPROTO);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    evbuffer_free(out);
}
END_TEST

/* ---- the wants table ---------------------------------------------------- */

START_TEST(test_wants_table)
{
    int16_t v;

    for (v = 0; v <= kr_apis[3].valid.hi; v++) {
        ck_assert(kr_rewrite_wants(3, v));
    }
    for (v = 0; v <= 6; v++) {
        ck_assert(kr_rewrite_wants(10, v));
    }
    for (v = 0; v <= 4; v++) {
        ck_assert(kr_rewrite_wants(18, v));
    }
    ck_assert(kr_rewrite_wants(18, 9));         /* newer ApiVersions */
    ck_assert(kr_rewrite_wants(60, 0));
    for (v = 0; v <= 9; v++) {
        ck_assert_msg(!kr_rewrite_wants(0, v), "Produce v%d", v);
    }
    ck_assert(kr_rewrite_wants(0, 10));
    ck_assert(kr_rewrite_wants(0, kr_apis[0].valid.hi));
    for (v = 0; v <= 15; v++) {
        ck_assert_msg(!kr_rewrite_wants(1, v), "Fetch v%d", v);
    }
    ck_assert(kr_rewrite_wants(1, 16));
    for (v = 0; v <= 4; v++) {
        ck_assert(!kr_rewrite_wants(12, v));    /* Heartbeat */
    }
    ck_assert(!kr_rewrite_wants(11, 5));        /* JoinGroup */
    ck_assert(!kr_rewrite_wants(999, 0));
    ck_assert(!kr_rewrite_wants(-1, 0));
    ck_assert(!kr_rewrite_wants(3, -1));
}
END_TEST

/* ---- learning ----------------------------------------------------------- */

START_TEST(test_learn_from_metadata)
{
    static const int32_t ids[] = { 4, 5, 6 };
    struct event_base *base = event_base_new();
    struct kr_hostport bs = { .host = (char *)"127.0.0.1", .port = 1 };
    struct kr_upstream_conf uc;
    struct kr_rewrite_ctx c2 = ctx;
    struct kr_msg m = metadata(1, ids, 3, "kafka-x", 9092);
    struct kr_rewrite_result res;
    struct evbuffer *out = evbuffer_new();
    uint8_t *p;
    size_t len;

    memset(&uc, 0, sizeof(uc));
    uc.name = (char *)"";
    uc.bootstrap = &bs;
    uc.nbootstrap = 1;
    uc.connect_timeout_ms = 1000;
    uc.request_timeout_margin_ms = 1000;
    uc.metadata_refresh_ms = 300000;
    c2.upstream = kr_upstream_new(base, NULL, &uc);
    ck_assert_ptr_nonnull(c2.upstream);
    ck_assert_int_eq(kr_upstream_nbrokers(c2.upstream), 0);
    p = encode(&m, NULL, 0, &len);
    {
        struct evbuffer *in = evbuffer_new();

        evbuffer_add(in, p, len);
        ck_assert_int_eq(kr_rewrite_response(&c2, 3, 1, in, out, &res),
                         KR_OK);
        evbuffer_free(in);
    }
    ck_assert(res.changed);
    ck_assert_int_eq(kr_upstream_nbrokers(c2.upstream), 3);
    kr_upstream_free(c2.upstream);
    event_base_free(base);
    free(p);
    evbuffer_free(out);
}
END_TEST

/* ---- streamed responses (kr_rewrite_streamable, kr_rewrite_tail) ------- */

START_TEST(test_streamable_table)
{
    int16_t v;

    /* Fetch: NodeEndpoints (tagged, top level) from v16 */
    for (v = 0; v <= 15; v++) {
        ck_assert_msg(!kr_rewrite_streamable(1, v), "Fetch v%d", v);
    }
    ck_assert(kr_rewrite_streamable(1, 16));
    ck_assert(kr_rewrite_streamable(1, 17));
    /* Produce: from v10 */
    ck_assert(!kr_rewrite_streamable(0, 9));
    ck_assert(kr_rewrite_streamable(0, 10));
    ck_assert(kr_rewrite_streamable(0, 11));
    /* endpoints outside the tagged fields: held whole */
    ck_assert(!kr_rewrite_streamable(3, 12));      /* Metadata Brokers */
    ck_assert(!kr_rewrite_streamable(10, 3));      /* FindCoordinator root */
    ck_assert(!kr_rewrite_streamable(10, 6));      /* FindCoordinator list */
    ck_assert(!kr_rewrite_streamable(60, 1));      /* DescribeCluster */
    ck_assert(!kr_rewrite_streamable(18, 3));      /* ApiVersions */
    ck_assert(!kr_rewrite_streamable(1, 9999));
    ck_assert(!kr_rewrite_streamable(-1, 0));
    /* every streamable version is one the session must rewrite */
    for (v = 0; v < 64; v++) {
        int16_t k;

        for (k = 0; k <= kr_api_max; k++) {
            if (kr_rewrite_streamable(k, v)) {
                ck_assert(kr_rewrite_wants(k, v));
                ck_assert(kr_api_flexible(kr_api_get(k), v));
            }
        }
    }
}
END_TEST

/* A Fetch v16 response whose NodeEndpoints name host (n endpoints). */
static uint8_t *
fetch16(const char *host, uint32_t n, int32_t node0, const uint8_t *recs,
        size_t rlen, size_t *len)
{
    static const uint8_t uuid[16] = { 7, 7, 7 };
    struct kr_msg m = rsp_new(1, 16);
    struct kr_array *r, *pa, *e;
    struct kr_val *rec;
    uint32_t i;

    set_i(m.body, "SessionId", 77);
    r = set_arr(m.body, "Responses", 1);
    fld(elem(r, 0), "TopicId")->u.s.p = uuid;
    fld(elem(r, 0), "TopicId")->u.s.len = 16;
    pa = set_arr(elem(r, 0), "Partitions", 1);
    set_i(elem(pa, 0), "PartitionIndex", 5);
    set_i(elem(pa, 0), "HighWatermark", 123456);
    rec = fld(elem(pa, 0), "Records");
    rec->is_null = 0;
    rec->u.rec.off = 0;
    rec->u.rec.len = (int32_t)rlen;
    if (host != NULL) {
        e = set_arr(m.body, "NodeEndpoints", n);
        for (i = 0; i < n; i++) {
            set_i(elem(e, i), "NodeId", node0 + (int32_t)i);
            set_s(elem(e, i), "Host", host);
            set_i(elem(e, i), "Port", 9092);
        }
    }
    return encode(&m, recs, rlen, len);
}

/*
 * kr_rewrite_tree_none: a streamable response's decoded body without
 * endpoints (or with an empty NodeEndpoints) needs no rewrite; one with
 * endpoints does; other APIs and versions are never "none".
 */
START_TEST(test_tree_none)
{
    uint8_t recs[10] = { 0 }, *p;
    struct kr_msg m;
    size_t len;

    p = fetch16(NULL, 0, 0, recs, sizeof(recs), &len);
    m = decode(p, len, 1, 16);
    ck_assert(kr_rewrite_tree_none(1, 16, m.body));
    ck_assert(!kr_rewrite_tree_none(1, 16, NULL));
    ck_assert(!kr_rewrite_tree_none(1, 15, m.body));  /* not streamable */
    ck_assert(!kr_rewrite_tree_none(3, 12, m.body));  /* Metadata */
    free(p);
    p = fetch16("broker-1", 1, 1, recs, sizeof(recs), &len);
    m = decode(p, len, 1, 16);
    ck_assert(fld(m.body, "NodeEndpoints")->present);
    ck_assert(!kr_rewrite_tree_none(1, 16, m.body));
    free(p);
    p = fetch16("broker-1", 0, 1, recs, sizeof(recs), &len);
    m = decode(p, len, 1, 16);
    ck_assert(fld(m.body, "NodeEndpoints")->present);
    ck_assert_uint_eq(fld(m.body, "NodeEndpoints")->u.arr->n, 0);
    ck_assert(kr_rewrite_tree_none(1, 16, m.body));
    free(p);
}
END_TEST

/* Where kr_scan stops in payload p: the start of the tail. */
static size_t
scan_stop(const uint8_t *p, size_t len, int16_t key, int16_t ver)
{
    struct kr_scan sc;
    size_t used;

    ck_assert_int_eq(kr_scan_init(&sc, key, ver, true, len), KR_OK);
    ck_assert_int_eq(kr_scan_feed(&sc, p, len, &used), KR_OK);
    ck_assert_uint_eq(used, sc.off);
    return used;
}

/*
 * Stream p: the head as it is, the tail through kr_rewrite_tail.  The
 * result has p's length (the size prefix was sent first) and is
 * returned, malloc'd.
 */
static uint8_t *
stream(const uint8_t *p, size_t len, struct kr_rewrite_result *res, int *rc)
{
    struct evbuffer *tail = evbuffer_new(), *out = evbuffer_new();
    size_t at = scan_stop(p, len, 1, 16);
    uint8_t *q = malloc(len);

    memcpy(q, p, at);
    evbuffer_add(tail, p + at, len - at);
    *rc = kr_rewrite_tail(&ctx, 1, 16, tail, out, res);
    ck_assert_uint_eq(evbuffer_get_length(tail), 0);
    if (*rc == KR_OK) {
        ck_assert_uint_eq(evbuffer_get_length(out), len - at);
        evbuffer_copyout(out, q + at, len - at);
    }
    evbuffer_free(tail);
    evbuffer_free(out);
    return q;
}

/* No endpoints, or endpoints already krelay's: the tail is untouched. */
START_TEST(test_tail_unchanged)
{
    uint8_t recs[100], *p, *q;
    struct kr_rewrite_result res;
    size_t len;
    int rc;

    memset(recs, 0x5a, sizeof(recs));
    p = fetch16(NULL, 0, 0, recs, sizeof(recs), &len);
    ck_assert_uint_eq(scan_stop(p, len, 1, 16), len - 1);  /* "0 tags" */
    q = stream(p, len, &res, &rc);
    ck_assert_int_eq(rc, KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.endpoints, 0);
    ck_assert(memcmp(p, q, len) == 0);
    free(p);
    free(q);
    /* NodeId 3 already at ADV_HOST:PORT_BASE+3 */
    {
        struct kr_msg m = rsp_new(1, 16);
        struct kr_array *e = set_arr(m.body, "NodeEndpoints", 1);

        set_arr(m.body, "Responses", 0);
        set_i(elem(e, 0), "NodeId", 3);
        set_s(elem(e, 0), "Host", ADV_HOST);
        set_i(elem(e, 0), "Port", PORT_BASE + 3);
        p = encode(&m, recs, 0, &len);
    }
    q = stream(p, len, &res, &rc);
    ck_assert_int_eq(rc, KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.endpoints, 1);
    ck_assert(memcmp(p, q, len) == 0);
    free(p);
    free(q);
}
END_TEST

/*
 * Broker host names of every length from 1 to 300 against ADV_HOST:
 * the streamed frame keeps its length, decodes strictly, its records and
 * partitions are untouched, and its endpoints are krelay's (same length
 * or shorter: padded) or gone (longer: dropped), never the broker's.
 * Where the lengths match, it equals kr_rewrite_response's frame.
 */
START_TEST(test_tail_every_length)
{
    uint8_t recs[300];
    char host[301];
    size_t hl, i;

    for (i = 0; i < sizeof(recs); i++) {
        recs[i] = (uint8_t)(i * 13 + 1);
    }
    for (hl = 1; hl <= 300; hl++) {
        struct kr_rewrite_result res;
        struct kr_codec_err ce;
        struct kr_rbuf rb;
        struct iovec iov;
        struct kr_msg m;
        struct kr_array *pa;
        struct kr_val *e;
        uint8_t *p, *q;
        size_t len;
        uint32_t n = 1 + (uint32_t)(hl % 3), j;
        int rc;

        memset(host, 'a' + (int)(hl % 26), hl);
        host[hl] = '\0';
        p = fetch16(host, n, 1, recs, sizeof(recs), &len);
        q = stream(p, len, &res, &rc);
        ck_assert_msg(rc == KR_OK, "host of %zu: %s", hl, res.err);
        ck_assert(res.changed);
        ck_assert_uint_eq(res.endpoints, n);
        kr_rbuf_init_flat(&rb, &iov, q, len);
        ck_assert_msg(kr_decode_response(&arena, &rb, 1, 16, KR_DEC_STRICT,
                                         &m, &ce) == KR_OK,
                      "host of %zu: %s at %s", hl, ce.msg, ce.path);
        ck_assert_int_eq(m.correlation_id, 4242);
        ck_assert_int_eq(fld(m.body, "SessionId")->u.i, 77);
        pa = fld(elem(fld(m.body, "Responses")->u.arr, 0),
                 "Partitions")->u.arr;
        ck_assert_int_eq(fld(elem(pa, 0), "HighWatermark")->u.i, 123456);
        e = fld(elem(pa, 0), "Records");
        ck_assert_int_eq(e->u.rec.len, (int32_t)sizeof(recs));
        ck_assert(memcmp(q + e->u.rec.off, recs, sizeof(recs)) == 0);
        ck_assert(memmem(q, len, host, hl) == NULL || hl <= 2);
        e = fld(m.body, "NodeEndpoints");
        if (hl < strlen(ADV_HOST) ||
            (hl > strlen(ADV_HOST) && n * (hl - strlen(ADV_HOST)) < 3)) {
            /* krelay's host is longer (or 1-2 bytes shorter: too little
               room for a padding field): dropped, and padded */
            ck_assert_uint_eq(res.dropped, 1);
            ck_assert_int_eq(e->present, 0);
            ck_assert_uint_ge(m.body->nunknown, 1);
            ck_assert_uint_ge(m.body->unknown[0].tag, KR_PAD_TAG);
        } else {
            ck_assert_msg(res.dropped == 0, "host of %zu x %u: dropped",
                          hl, n);
            ck_assert_int_eq(e->present, 1);
            ck_assert_uint_eq(e->u.arr->n, n);
            for (j = 0; j < n; j++) {
                assert_str(fld(elem(e->u.arr, j), "Host"), ADV_HOST);
                ck_assert_int_eq(fld(elem(e->u.arr, j), "NodeId")->u.i,
                                 1 + (int32_t)j);
                ck_assert_int_eq(fld(elem(e->u.arr, j), "Port")->u.i,
                                 PORT_BASE + 1 + (int32_t)j);
            }
            if (hl == strlen(ADV_HOST)) {
                /* same length: the bytes kr_rewrite_response writes */
                struct evbuffer *out = evbuffer_new();
                struct kr_rewrite_result r2;
                uint8_t *h;
                size_t hlen;

                ck_assert_uint_eq(m.body->nunknown, 0);
                ck_assert_int_eq(run(1, 16, p, len, out, &r2), KR_OK);
                h = out_payload(out, &hlen);
                ck_assert_uint_eq(hlen, len);
                ck_assert(memcmp(h, q, len) == 0);
                free(h);
                evbuffer_free(out);
            } else {
                ck_assert_uint_ge(m.body->nunknown, 1);
            }
        }
        free(p);
        free(q);
        kr_arena_reset(&arena);
    }
}
END_TEST

/* ---- SNI routing: each broker its name, the listener's own port ------- */

#define SNI_PORT 9093

/* A context advertising broker-N.kafka.test:SNI_PORT (NodeIds 0..15). */
static struct kr_rewrite_ctx
sni_ctx(struct kr_sni **m)
{
    struct kr_rewrite_ctx c = ctx;
    char err[160];

    *m = kr_sni_new("broker-$(node_id).kafka.test", "kafka.test", 0, 15, err,
                    sizeof(err));
    ck_assert_msg(*m != NULL, "%s", err);
    c.advertised_host = NULL;           /* not used */
    c.broker_port_base = 0;
    c.sni = *m;
    c.sni_port = SNI_PORT;
    return c;
}

/*
 * Metadata (every version tried above), Produce's KIP-951 endpoints and
 * the tree for audit lines: each NodeId's name on the listener's port;
 * names already there pass unchanged; a NodeId outside the range fails.
 */
START_TEST(test_sni_names)
{
    static const int32_t ids[] = { 1, 2, 13 };
    struct kr_sni *sni;
    struct kr_rewrite_ctx c = sni_ctx(&sni);
    int16_t ver = md_versions[_i];
    struct kr_msg m = metadata(ver, ids, 3, "10.0.0.1", 9092);
    struct kr_rewrite_result res;
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct kr_array *b;
    uint8_t *p, *q;
    size_t len, qlen;
    char name[64];
    uint32_t i;

    p = encode(&m, NULL, 0, &len);
    evbuffer_add(in, p, len);
    ck_assert_int_eq(kr_rewrite_response(&c, 3, ver, in, out, &res), KR_OK);
    ck_assert(res.changed);
    ck_assert_uint_eq(res.endpoints, 3);
    q = out_payload(out, &qlen);
    evbuffer_drain(out, evbuffer_get_length(out));
    m = decode(q, qlen, 3, ver);
    b = fld(m.body, "Brokers")->u.arr;
    for (i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "broker-%d.kafka.test", (int)ids[i]);
        ck_assert_int_eq(fld(elem(b, i), "NodeId")->u.i, ids[i]);
        assert_str(fld(elem(b, i), "Host"), name);
        ck_assert_int_eq(fld(elem(b, i), "Port")->u.i, SNI_PORT);
    }
    /* krelay's own answer again: moved as it is */
    evbuffer_add(in, q, qlen);
    ck_assert_int_eq(kr_rewrite_response(&c, 3, ver, in, out, &res), KR_OK);
    ck_assert(!res.changed);
    ck_assert_uint_eq(res.endpoints, 3);
    free(q);
    q = out_payload(out, &qlen);
    evbuffer_drain(out, evbuffer_get_length(out));
    free(q);
    free(p);

    /* the tree, as audit lines show it: hosts in the arena */
    m = metadata(ver, ids, 3, "10.0.0.1", 9092);
    ck_assert_int_eq(kr_rewrite_tree(&c, 3, ver, m.body, &arena, &res),
                     KR_OK);
    ck_assert(res.changed);
    assert_str(fld(elem(fld(m.body, "Brokers")->u.arr, 2), "Host"),
               "broker-13.kafka.test");
    ck_assert_int_eq(kr_rewrite_tree(&c, 3, ver, m.body, NULL, &res),
                     KR_ERROR);

    /* NodeId 16: outside 0..15, never leaked; no broker_port_base to
       widen */
    m = metadata(ver, (const int32_t[]){ 1, 16 }, 2, "10.0.0.1", 9092);
    p = encode(&m, NULL, 0, &len);
    evbuffer_add(in, p, len);
    ck_assert_int_eq(kr_rewrite_response(&c, 3, ver, in, out, &res),
                     KR_ELIMIT);
    ck_assert_int_eq(res.bad_node_id, 16);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    ck_assert_ptr_null(strstr(res.err, "broker_port_base"));
    ck_assert_ptr_nonnull(strstr(res.err, "0-15"));
    free(p);
    evbuffer_free(in);
    evbuffer_free(out);
    kr_sni_free(sni);
}
END_TEST

/*
 * A streamed Fetch v16's tail: names longer than the broker's host drop
 * the endpoints (the client refreshes its metadata), shorter ones are
 * written and padded.
 */
START_TEST(test_sni_tail)
{
    struct kr_sni *sni;
    struct kr_rewrite_ctx c = sni_ctx(&sni);
    static const char *const hosts[] = {
        "10.0.0.1", "kafka-broker-1.internal.example.com"
    };
    uint8_t recs[40];
    int k;

    memset(recs, 0x33, sizeof(recs));
    for (k = 0; k < 2; k++) {
        struct evbuffer *tail = evbuffer_new(), *out = evbuffer_new();
        struct kr_rewrite_result res;
        struct kr_codec_err ce;
        struct kr_rbuf rb;
        struct iovec iov;
        struct kr_msg m;
        struct kr_val *e;
        uint8_t *p, *q;
        size_t len, at;

        p = fetch16(hosts[k], 2, 1, recs, sizeof(recs), &len);
        at = scan_stop(p, len, 1, 16);
        q = malloc(len);
        memcpy(q, p, at);
        evbuffer_add(tail, p + at, len - at);
        ck_assert_int_eq(kr_rewrite_tail(&c, 1, 16, tail, out, &res), KR_OK);
        ck_assert(res.changed);
        ck_assert_uint_eq(evbuffer_get_length(out), len - at);
        evbuffer_copyout(out, q + at, len - at);
        kr_rbuf_init_flat(&rb, &iov, q, len);
        ck_assert_msg(kr_decode_response(&arena, &rb, 1, 16, KR_DEC_STRICT,
                                         &m, &ce) == KR_OK, "%s at %s",
                      ce.msg, ce.path);
        e = fld(m.body, "NodeEndpoints");
        ck_assert(memmem(q, len, hosts[k], strlen(hosts[k])) == NULL);
        if (k == 0) {
            ck_assert_uint_eq(res.dropped, 1);
            ck_assert_int_eq(e->present, 0);
        } else {
            ck_assert_uint_eq(res.dropped, 0);
            ck_assert_uint_eq(e->u.arr->n, 2);
            assert_str(fld(elem(e->u.arr, 0), "Host"), "broker-1.kafka.test");
            assert_str(fld(elem(e->u.arr, 1), "Host"), "broker-2.kafka.test");
            ck_assert_int_eq(fld(elem(e->u.arr, 1), "Port")->u.i, SNI_PORT);
        }
        free(p);
        free(q);
        evbuffer_free(tail);
        evbuffer_free(out);
    }
    kr_sni_free(sni);
}
END_TEST

/*
 * NodeEndpoints twice in the tagged fields, the first with a broker's
 * address (NodeId 9, outside the range), the second already krelay's: a
 * client may read the first, so neither path may pass the frame (the
 * tolerant decoder would keep only the last copy).
 */
START_TEST(test_duplicate_endpoint_tag)
{
    uint8_t recs[20] = { 1 }, *a, *b, *dup;
    struct kr_rewrite_result res;
    struct evbuffer *tail = evbuffer_new(), *out = evbuffer_new();
    size_t alen, blen, at, bt, dlen;
    struct kr_msg m = rsp_new(1, 16);
    struct kr_array *e;

    a = fetch16("10.9.9.9", 1, 9, recs, sizeof(recs), &alen);
    set_arr(m.body, "Responses", 0);
    e = set_arr(m.body, "NodeEndpoints", 1);
    set_i(elem(e, 0), "NodeId", 1);
    set_s(elem(e, 0), "Host", ADV_HOST);
    set_i(elem(e, 0), "Port", PORT_BASE + 1);
    b = encode(&m, recs, 0, &blen);
    at = scan_stop(a, alen, 1, 16);
    bt = scan_stop(b, blen, 1, 16);
    ck_assert_int_eq(a[at], 1);             /* one tagged field each */
    ck_assert_int_eq(b[bt], 1);
    /* a's head, then count 2, a's NodeEndpoints, b's NodeEndpoints */
    dup = malloc(alen + blen);
    memcpy(dup, a, alen);
    dup[at] = 2;
    memcpy(dup + alen, b + bt + 1, blen - bt - 1);
    dlen = alen + blen - bt - 1;
    /* the tail alone (streamed) */
    evbuffer_add(tail, dup + at, dlen - at);
    ck_assert_int_eq(kr_rewrite_tail(&ctx, 1, 16, tail, out, &res),
                     KR_EPROTO);
    ck_assert_msg(strstr(res.err, "duplicate tagged field 0") != NULL, "%s",
                  res.err);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    /* the whole frame (held) */
    ck_assert_int_eq(run(1, 16, dup, dlen, out, &res), KR_EPROTO);
    ck_assert_msg(strstr(res.err, "duplicate tagged field 0") != NULL, "%s",
                  res.err);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    free(a);
    free(b);
    free(dup);
    evbuffer_free(tail);
    evbuffer_free(out);
}
END_TEST

/*
 * The body already has unknown tagged fields, some where krelay's
 * padding would go (10000, 10001) and some high (16382, 2^32 - 2): the
 * padding takes free tags, keeps ascending order, and the frame decodes
 * strictly with every original unknown field intact.
 */
START_TEST(test_tail_padding_free_tags)
{
    static const uint32_t tags[] = { 10000, 10001, 16382, 4294967294u };
    static const char *broker[] = { "a-much-longer-broker.example", "b" };
    size_t i, t, len, at;

    for (i = 0; i < 2; i++) {
        struct kr_msg m = rsp_new(1, 16);
        struct kr_rewrite_result res;
        struct kr_codec_err ce;
        struct kr_rbuf rb;
        struct iovec iov;
        struct kr_msg d;
        struct kr_array *e;
        struct kr_rawtag *u;
        uint8_t *p, *q;
        int rc;

        set_arr(m.body, "Responses", 0);
        e = set_arr(m.body, "NodeEndpoints", 1);
        set_i(elem(e, 0), "NodeId", 2);
        set_s(elem(e, 0), "Host", broker[i]);
        set_i(elem(e, 0), "Port", 9092);
        u = kr_arena_alloc(&arena, sizeof(tags) / sizeof(tags[0]) *
                                   sizeof(*u));
        for (t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
            u[t].tag = tags[t];
            u[t].data.p = (const uint8_t *)"xyz";
            u[t].data.len = 3;
        }
        m.body->unknown = u;
        m.body->nunknown = (uint32_t)t;
        p = encode(&m, NULL, 0, &len);
        at = scan_stop(p, len, 1, 16);
        ck_assert_uint_lt(at, len);
        q = stream(p, len, &res, &rc);
        ck_assert_msg(rc == KR_OK, "%s: %s", broker[i], res.err);
        ck_assert(res.changed);
        kr_rbuf_init_flat(&rb, &iov, q, len);
        ck_assert_msg(kr_decode_response(&arena, &rb, 1, 16, KR_DEC_STRICT,
                                         &d, &ce) == KR_OK, "%s: %s at %s",
                      broker[i], ce.msg, ce.path);
        /* the four original fields, plus one or two of krelay's */
        ck_assert_uint_ge(d.body->nunknown, 5);
        for (t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
            uint32_t j;
            bool found = false;

            for (j = 0; j < d.body->nunknown; j++) {
                found |= d.body->unknown[j].tag == tags[t] &&
                         d.body->unknown[j].data.len == 3 &&
                         memcmp(d.body->unknown[j].data.p, "xyz", 3) == 0;
            }
            ck_assert_msg(found, "unknown tag %u lost", tags[t]);
        }
        if (i == 0) {
            /* shorter: rewritten and padded (10002 is the first free) */
            ck_assert_uint_eq(res.dropped, 0);
            assert_str(fld(elem(fld(d.body, "NodeEndpoints")->u.arr, 0),
                           "Host"), ADV_HOST);
        } else {
            ck_assert_uint_eq(res.dropped, 1);
            ck_assert_int_eq(fld(d.body, "NodeEndpoints")->present, 0);
        }
        free(p);
        free(q);
    }
}
END_TEST

/*
 * A known tagged field deep in the body (a partition's CurrentLeader,
 * Fetch v16 tag 1) whose declared size is larger than its value, or that
 * appears twice: a client reads the value, not the size, so the extra
 * bytes would be read as other fields (a hidden NodeEndpoints with a
 * broker's address).  kr_scan refuses both, so neither the streamed nor
 * the cut-through path forwards them.
 */
START_TEST(test_scan_nested_tag_exact)
{
    static const uint8_t uuid[16] = { 3 };
    static const uint8_t cl[] = { 1, 9, 0, 0, 0, 7, 0, 0, 0, 5, 0 };
    struct kr_msg m = rsp_new(1, 16);
    struct kr_array *r, *pa;
    struct kr_val *v;
    struct kr_scan sc;
    uint8_t *p, *q, *at;
    size_t len, qlen, i, used;
    int round;

    r = set_arr(m.body, "Responses", 1);
    fld(elem(r, 0), "TopicId")->u.s.p = uuid;
    fld(elem(r, 0), "TopicId")->u.s.len = 16;
    pa = set_arr(elem(r, 0), "Partitions", 1);
    v = fld(elem(pa, 0), "CurrentLeader");
    v->present = 1;
    set_i(v->u.node, "LeaderId", 7);
    set_i(v->u.node, "LeaderEpoch", 5);
    p = encode(&m, NULL, 0, &len);
    /* [tag 1][size 9][LeaderId][LeaderEpoch][no tags], once */
    at = memmem(p, len, cl, sizeof(cl));
    ck_assert_ptr_nonnull(at);
    i = (size_t)(at - p);
    ck_assert_int_eq(p[i - 1], 1);          /* the partition's tag count */
    ck_assert_int_eq(kr_scan_init(&sc, 1, 16, true, len), KR_OK);
    ck_assert_int_eq(kr_scan_feed(&sc, p, len, &used), KR_OK);
    for (round = 0; round < 2; round++) {
        q = malloc(len + sizeof(cl));
        memcpy(q, p, i);
        if (round == 0) {
            /* size 10 with one byte hidden after the value */
            memcpy(q + i, cl, sizeof(cl));
            q[i + 1] = 10;
            q[i + sizeof(cl)] = 0x42;
        } else {
            /* CurrentLeader twice */
            q[i - 1] = 2;
            memcpy(q + i, cl, sizeof(cl));
            memcpy(q + i + sizeof(cl), cl, sizeof(cl));
            memcpy(q + i + 2 * sizeof(cl), p + i + sizeof(cl),
                   len - i - sizeof(cl));
        }
        if (round == 0) {
            memcpy(q + i + sizeof(cl) + 1, p + i + sizeof(cl),
                   len - i - sizeof(cl) - 1);
        }
        qlen = len + (round == 0 ? 1 : sizeof(cl));
        ck_assert_int_eq(kr_scan_init(&sc, 1, 16, true, qlen), KR_OK);
        ck_assert_int_eq(kr_scan_feed(&sc, q, qlen, &used), KR_EPROTO);
        ck_assert_msg(strstr(sc.msg, round == 0 ? "before the end of its "
                             "size" : "duplicate tagged field 1") != NULL,
                      "%s", sc.msg);
        free(q);
    }
    free(p);
}
END_TEST

START_TEST(test_tail_errors)
{
    uint8_t recs[10] = { 0 }, *p, *q;
    struct kr_rewrite_result res;
    struct evbuffer *tail = evbuffer_new(), *out = evbuffer_new();
    size_t len;
    int rc;

    /* NodeId outside the listener's range */
    p = fetch16("broker-1", 1, 16, recs, sizeof(recs), &len);
    q = stream(p, len, &res, &rc);
    ck_assert_int_eq(rc, KR_ELIMIT);
    ck_assert_int_eq(res.bad_node_id, 16);
    free(p);
    free(q);
    /* a tail that is not a tagged-field section: count 5, nothing else */
    evbuffer_add(tail, "\x05\x00", 2);
    ck_assert_int_eq(kr_rewrite_tail(&ctx, 1, 16, tail, out, &res),
                     KR_EPROTO);
    ck_assert_msg(strstr(res.err, "Fetch v16") != NULL, "%s", res.err);
    ck_assert_uint_eq(evbuffer_get_length(tail), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    /* not a streamed API */
    evbuffer_add(tail, "\x00", 1);
    ck_assert_int_eq(kr_rewrite_tail(&ctx, 3, 12, tail, out, &res),
                     KR_EPROTO);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    evbuffer_free(tail);
    evbuffer_free(out);
}
END_TEST

/*
 * kr_evcodec_emit_own (legacy translation's frames: every record
 * re-encoded, no slices): a large frame's buffer goes to the evbuffer
 * (w left empty), a small one is copied (w untouched); both write the
 * size prefix and the bytes exactly as kr_evcodec_emit, and drain the
 * payload.
 */
START_TEST(test_emit_own_gives_buffer)
{
    static const size_t sizes[2] = { KR_EVCODEC_GIVE_MIN + 3, 100 };
    char err[128];

    for (int k = 0; k < 2; k++) {
        struct kr_wbuf w;
        struct kr_msg m;
        struct evbuffer *pl = evbuffer_new(), *out = evbuffer_new();
        uint8_t *buf = malloc(sizes[k]), *got;
        uint8_t *given;

        ck_assert_ptr_nonnull(pl);
        ck_assert_ptr_nonnull(out);
        ck_assert_ptr_nonnull(buf);
        for (size_t i = 0; i < sizes[k]; i++) {
            buf[i] = (uint8_t)(i * 7 + 1);
        }
        memset(&w, 0, sizeof(w));
        memset(&m, 0, sizeof(m));
        w.buf = buf;
        w.len = w.cap = w.total = sizes[k];
        given = w.buf;
        ck_assert_int_eq(evbuffer_add(pl, "old frame", 9), 0);
        ck_assert_int_eq(kr_evcodec_emit_own(pl, out, &w, &m, err,
                                             sizeof(err)), KR_OK);
        ck_assert_uint_eq(evbuffer_get_length(pl), 0);
        ck_assert_uint_eq(evbuffer_get_length(out), 4 + sizes[k]);
        got = evbuffer_pullup(out, -1);
        ck_assert_uint_eq(((uint32_t)got[0] << 24 | (uint32_t)got[1] << 16 |
                           (uint32_t)got[2] << 8 | got[3]), sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++) {
            ck_assert_uint_eq(got[4 + i], (uint8_t)(i * 7 + 1));
        }
        if (k == 0) {
            ck_assert_ptr_null(w.buf);   /* given: freed by libevent */
            ck_assert_uint_eq(w.len, 0);
            ck_assert_uint_eq(w.total, 0);
        } else {
            ck_assert_ptr_eq(w.buf, given);   /* copied: still w's */
            ck_assert_uint_eq(w.len, sizes[k]);
        }
        kr_wbuf_free(&w);
        evbuffer_free(pl);
        evbuffer_free(out);
    }
}
END_TEST

/*
 * A shared block's slice (legacy translation's converted records,
 * kr_xbuf.h): kr_evcodec_emit writes it by reference between w's own
 * bytes and a payload slice, kr_wbuf_flatten the same bytes; the block
 * outlives the tree's arena while out holds it, and is given back once
 * both let go (the thread's next block is that one).
 */
START_TEST(test_emit_shared_block)
{
    const size_t n = 100000;
    struct kr_bytes b = { 0 }, b2 = { 0 };
    struct kr_arena a;
    struct kr_wbuf w;
    struct kr_msg m;
    struct evbuffer *pl = evbuffer_new(), *out = evbuffer_new();
    const uint8_t *d;
    uint8_t *got, *flat, *exp;
    char err[128];

    ck_assert_ptr_nonnull(pl);
    ck_assert_ptr_nonnull(out);
    ck_assert(kr_xbuf_open(&b, n));
    ck_assert_uint_eq(b.len, KR_XBUF_HDR);
    for (size_t i = 0; i < n; i++) {
        b.p[b.len + i] = (uint8_t)(i * 13 + 5);
    }
    b.len += n;
    d = kr_xbuf_seal(&b);
    ck_assert_ptr_null(b.p);
    kr_arena_init(&a, 0);
    ck_assert_int_eq(kr_arena_defer(&a, kr_xbuf_unref_cb,
                                    (void *)(uintptr_t)d), KR_OK);

    memset(&w, 0, sizeof(w));
    memset(&m, 0, sizeof(m));
    w.buf = malloc(11);
    ck_assert_ptr_nonnull(w.buf);
    memcpy(w.buf, "HEADMIDTAIL", 11);
    w.len = w.cap = 11;
    w.recs = calloc(2, sizeof(*w.recs));
    ck_assert_ptr_nonnull(w.recs);
    w.nrecs = w.recs_cap = 2;
    w.recs[0] = (struct kr_wbuf_rec){ .at = 4, .len = (int32_t)n, .ext = d };
    w.recs[1] = (struct kr_wbuf_rec){ .at = 7, .src_off = 2, .len = 4 };
    w.total = 11 + n + 4;
    ck_assert_int_eq(evbuffer_add(pl, "xxABCDyy", 8), 0);

    exp = malloc(w.total);
    ck_assert_ptr_nonnull(exp);
    memcpy(exp, "HEAD", 4);
    memcpy(exp + 4, d, n);
    memcpy(exp + 4 + n, "MIDABCDTAIL", 11);
    flat = kr_wbuf_flatten(&w, (const uint8_t *)"xxABCDyy", 8);
    ck_assert_ptr_nonnull(flat);
    ck_assert(memcmp(flat, exp, w.total) == 0);
    free(flat);

    ck_assert_int_eq(kr_evcodec_emit_own(pl, out, &w, &m, err, sizeof(err)),
                     KR_OK);
    ck_assert_uint_eq(evbuffer_get_length(pl), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 4 + w.total);
    kr_wbuf_free(&w);
    kr_arena_free(&a);              /* the tree goes; out still holds d */
    got = evbuffer_pullup(out, -1);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(((uint32_t)got[0] << 24 | (uint32_t)got[1] << 16 |
                       (uint32_t)got[2] << 8 | got[3]), 11 + n + 4);
    ck_assert(memcmp(got + 4, exp, 11 + n + 4) == 0);
    evbuffer_free(out);             /* the last reference: d given back */
    ck_assert(kr_xbuf_open(&b2, 100));
    ck_assert_ptr_eq(b2.p + KR_XBUF_HDR, d);
    kr_xbuf_close(&b2);
    free(exp);
    evbuffer_free(pl);
}
END_TEST

static Suite *
rewrite_suite(void)
{
    Suite *s = suite_create("rewrite");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_metadata_rewrite, 0,
                        (int)KR_ARRAY_LEN(md_versions));
    tcase_add_test(tc, test_unchanged_passthrough);
    tcase_add_test(tc, test_trailing_byte_kept);
    tcase_add_test(tc, test_node_id_out_of_range);
    tcase_add_loop_test(tc, test_truncated, 0,
                        (int)KR_ARRAY_LEN(md_versions));
    tcase_add_test(tc, test_many_chains);
    tcase_add_test(tc, test_unknown_version_refused);
    tcase_add_loop_test(tc, test_find_coordinator_root, 0, 4);
    tcase_add_loop_test(tc, test_find_coordinator_list, 4, 7);
    tcase_add_loop_test(tc, test_describe_cluster, 0, 3);
    tcase_add_test(tc, test_produce_node_endpoints);
    tcase_add_test(tc, test_produce_without_endpoints);
    tcase_add_test(tc, test_fetch_records_in_place);
    tcase_add_test(tc, test_emit_shared_block);
    tcase_add_test(tc, test_corrupted_bytes);
    tcase_add_loop_test(tc, test_api_versions_cap, 0, 3);
    tcase_add_loop_test(tc, test_api_versions_clamps, 0, 2);
    tcase_add_test(tc, test_api_versions_nothing_to_cap);
    tcase_add_loop_test(tc, test_api_versions_unsupported_fallback, 0, 2);
    tcase_add_test(tc, test_api_versions_nonstandard_error_body);
    tcase_add_test(tc, test_api_versions_truncated);
    tcase_add_test(tc, test_wants_table);
    tcase_add_test(tc, test_learn_from_metadata);
    tcase_add_test(tc, test_streamable_table);
    tcase_add_test(tc, test_tree_none);
    tcase_add_test(tc, test_tail_unchanged);
    tcase_add_test(tc, test_tail_every_length);
    tcase_add_test(tc, test_tail_errors);
    tcase_add_test(tc, test_duplicate_endpoint_tag);
    tcase_add_loop_test(tc, test_sni_names, 0,
                        (int)(sizeof(md_versions) / sizeof(md_versions[0])));
    tcase_add_test(tc, test_sni_tail);
    tcase_add_test(tc, test_tail_padding_free_tags);
    tcase_add_test(tc, test_scan_nested_tag_exact);
    tcase_add_test(tc, test_emit_own_gives_buffer);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(rewrite_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
