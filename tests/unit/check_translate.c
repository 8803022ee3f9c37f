/*
 * check_translate.c - unit tests for kr_translate: version translation of
 * requests and responses (flexible <-> classic, the 3.9.1 / 4.3.1 layout
 * boundary, tagged fields, records slices, Kafka's ignorable rule),
 * ApiVersions clamping and the KIP-511 answer.
 *
 * Frames are built with the codec (kr_node_new + fields + kr_encode_msg),
 * decoded strictly, translated, encoded and decoded again: every result
 * is checked on the wire, not only in the tree.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "kr_broker_versions.h"
#include "kr_codec.h"
#include "kr_schema.h"
#include "kr_translate.h"
#include "kr_test.h"

#define PRODUCE 0
#define FETCH 1
#define METADATA 3
#define HEARTBEAT 12
#define APIVERSIONS 18

static struct kr_arena arena;

/*
 * Encoded payloads live until the test ends: decoded trees borrow their
 * bytes, and translated trees borrow the decoded ones.
 */
#define MAX_KEEP 32
static uint8_t *keep[MAX_KEEP];
static unsigned nkeep;

static void
setup(void)
{
    kr_arena_init(&arena, 0);
    nkeep = 0;
}

static void
teardown(void)
{
    while (nkeep > 0) {
        free(keep[--nkeep]);
    }
    kr_arena_free(&arena);
}

/* ---- tree building ------------------------------------------------------ */

/* Shared tree helpers (kr_test.h) under this file's short names. */
#define fld(n, name) kr_test_fld((n), (name))
#define set_i(n, name, x) kr_test_set_i((n), (name), (x))
#define set_s(n, name, s) kr_test_set_s((n), (name), (s))
#define set_arr(n, name, cnt) kr_test_set_arr(&arena, (n), (name), (cnt))
#define elem(a, i) kr_test_elem((a), (i))

static void
set_null(struct kr_node *n, const char *name)
{
    struct kr_val *v = fld(n, name);

    memset(&v->u, 0, sizeof(v->u));
    v->u.s.len = -1;
    v->is_null = 1;
    v->present = 1;
}

static void
set_uuid(struct kr_node *n, const char *name, const uint8_t *u)
{
    struct kr_val *v = fld(n, name);

    v->u.s.p = u;
    v->u.s.len = 16;
    v->is_null = 0;
    v->present = 1;
}

static void
set_rec(struct kr_node *n, const char *name, uint64_t off, int32_t len)
{
    struct kr_val *v = fld(n, name);

    v->u.rec.off = off;
    v->u.rec.len = len;
    v->is_null = 0;
    v->present = 1;
}

/* A struct field (single, possibly tagged) set to a fresh node. */
static struct kr_node *
set_struct(struct kr_node *n, const char *name)
{
    int idx = kr_struct_field_index(n->struct_id, name);
    const struct kr_field_desc *f;
    struct kr_node *c;

    ck_assert_int_ge(idx, 0);
    f = kr_node_field(n, (unsigned)idx);
    c = kr_node_new(&arena, f->struct_id, n->version);
    ck_assert_ptr_nonnull(c);
    n->vals[idx].u.node = c;
    n->vals[idx].is_null = 0;
    n->vals[idx].present = 1;
    return c;
}

static struct kr_array *
arr(const struct kr_node *n, const char *name)
{
    struct kr_val *v = fld(n, name);

    ck_assert(!v->is_null);
    ck_assert_ptr_nonnull(v->u.arr);
    return v->u.arr;
}

static struct kr_msg
msg_new(bool rsp, int16_t key, int16_t ver)
{
    const struct kr_api_desc *a = kr_api_get(key);
    struct kr_msg m;
    int hv = rsp ? kr_response_header_version(key, ver)
                 : kr_request_header_version(key, ver);

    ck_assert_ptr_nonnull(a);
    ck_assert_int_ge(hv, 0);
    memset(&m, 0, sizeof(m));
    m.dir = rsp ? KR_DIR_RESPONSE : KR_DIR_REQUEST;
    m.api_key = key;
    m.api_version = ver;
    m.hdr_version = (int16_t)hv;
    m.correlation_id = 4242;
    m.header = kr_node_new(&arena, rsp ? kr_response_header_struct
                                       : kr_request_header_struct,
                           (int16_t)hv);
    m.body = kr_node_new(&arena, kr_api_root(a, rsp, ver), ver);
    ck_assert_ptr_nonnull(m.header);
    ck_assert_ptr_nonnull(m.body);
    set_i(m.header, "CorrelationId", 4242);
    if (!rsp) {
        set_i(m.header, "RequestApiKey", key);
        set_i(m.header, "RequestApiVersion", ver);
        if (hv >= 1) {
            set_s(m.header, "ClientId", "rdkafka");
        }
    }
    return m;
}

/* Encode m (records from src) to a malloc'd payload. */
static uint8_t *
encode(const struct kr_msg *m, const uint8_t *src, size_t src_len,
       size_t *len)
{
    struct kr_codec_err ce;
    struct kr_wbuf w;
    uint8_t *p;

    memset(&w, 0, sizeof(w));
    ck_assert_msg(kr_encode_msg(m, &w, &ce) == KR_OK, "encode: %s at %s",
                  ce.msg, ce.path);
    p = kr_wbuf_flatten(&w, src, src_len);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_lt(nkeep, MAX_KEEP);
    keep[nkeep++] = p;
    *len = w.total;
    kr_wbuf_free(&w);
    return p;
}

/* Strict decode of a request (rsp false) or response payload. */
static struct kr_msg
decode(const uint8_t *p, size_t len, bool rsp, int16_t key, int16_t ver)
{
    struct kr_codec_err ce;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_msg m;
    int rc;

    kr_rbuf_init_flat(&rb, &iov, p, len);
    rc = rsp ? kr_decode_response(&arena, &rb, key, ver, KR_DEC_STRICT, &m,
                                  &ce)
             : kr_decode_request(&arena, &rb, KR_DEC_STRICT, &m, &ce);
    ck_assert_msg(rc == KR_OK, "decode %d v%d: %s at %s", key, ver, ce.msg,
                  ce.path);
    ck_assert_int_eq(m.api_key, key);
    ck_assert_int_eq(m.api_version, ver);
    ck_assert_int_eq(m.correlation_id, 4242);
    return m;
}

/* Translate m to `to`, asserting success. */
static void
translate(struct kr_msg *m, int16_t to)
{
    struct kr_codec_err ce;
    int rc;

    memset(&ce, 0, sizeof(ce));
    rc = kr_translate_msg(&arena, m, to, &ce);
    ck_assert_msg(rc == KR_OK, "translate %d v%d -> v%d: %d %s at %s",
                  m->api_key, m->api_version, to, rc, ce.msg, ce.path);
    ck_assert_int_eq(m->api_version, to);
}

static void
assert_str(const struct kr_val *v, const char *s)
{
    ck_assert_int_eq(v->is_null, 0);
    ck_assert_int_eq(v->u.s.len, (int32_t)strlen(s));
    ck_assert(memcmp(v->u.s.p, s, strlen(s)) == 0);
}

/* Bytes of records value v, from payload p of len bytes. */
static void
assert_records(const struct kr_val *v, const uint8_t *p, size_t len,
               const uint8_t *want, size_t wlen)
{
    ck_assert_int_eq(v->is_null, 0);
    ck_assert_int_eq(v->u.rec.len, (int32_t)wlen);
    ck_assert_uint_le(v->u.rec.off + wlen, len);
    ck_assert(memcmp(p + v->u.rec.off, want, wlen) == 0);
}

/* Pretend record batch bytes (the codec never looks inside). */
static const uint8_t batch[] = {
    0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0x31, 0xff, 0xff, 0xff, 0xff, 2,
    0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x13, 0x37,
    'k', 'r', 'e', 'l', 'a', 'y'
};

/* ---- Produce ------------------------------------------------------------ */

/*
 * A Produce request at ver: acks -1, topic "orders" with partitions 0
 * and 3, each carrying `batch`.  Encoded, then decoded: the returned
 * message's records slices point into *payload (caller frees).
 */
static struct kr_msg
produce_req(int16_t ver, const char *txn, uint8_t **payload, size_t *len)
{
    struct kr_msg m = msg_new(false, PRODUCE, ver);
    struct kr_array *t, *pd;
    uint32_t i;

    if (txn != NULL) {
        set_s(m.body, "TransactionalId", txn);
    } else if (ver >= 3) {
        set_null(m.body, "TransactionalId");
    }
    set_i(m.body, "Acks", -1);
    set_i(m.body, "TimeoutMs", 30000);
    t = set_arr(m.body, "TopicData", 1);
    set_s(elem(t, 0), "Name", "orders");
    pd = set_arr(elem(t, 0), "PartitionData", 2);
    for (i = 0; i < 2; i++) {
        set_i(elem(pd, i), "Index", (int32_t)(i * 3));
        set_rec(elem(pd, i), "Records", 0, (int32_t)sizeof(batch));
    }
    *payload = encode(&m, batch, sizeof(batch), len);
    return decode(*payload, *len, false, PRODUCE, ver);
}

static void
check_produce(const struct kr_msg *m, const uint8_t *p, size_t len)
{
    struct kr_array *t = arr(m->body, "TopicData");
    struct kr_array *pd;

    ck_assert_int_eq(fld(m->body, "Acks")->u.i, -1);
    ck_assert_int_eq(fld(m->body, "TimeoutMs")->u.i, 30000);
    ck_assert_uint_eq(t->n, 1);
    assert_str(fld(elem(t, 0), "Name"), "orders");
    pd = arr(elem(t, 0), "PartitionData");
    ck_assert_uint_eq(pd->n, 2);
    ck_assert_int_eq(fld(elem(pd, 1), "Index")->u.i, 3);
    assert_records(fld(elem(pd, 0), "Records"), p, len, batch,
                   sizeof(batch));
    assert_records(fld(elem(pd, 1), "Records"), p, len, batch,
                   sizeof(batch));
    assert_str(fld(m->header, "ClientId"), "rdkafka");
    ck_assert_int_eq(fld(m->header, "RequestApiVersion")->u.i,
                     m->api_version);
}

/* Produce v9 (flexible) -> v8 (classic) and back, byte-exact. */
START_TEST(test_produce_v9_v8_roundtrip)
{
    uint8_t *p9, *p8, *p9b;
    size_t l9, l8, l9b;
    struct kr_msg m = produce_req(9, NULL, &p9, &l9);
    struct kr_msg m8;

    ck_assert_int_eq(m.hdr_version, 2);
    translate(&m, 8);
    ck_assert_int_eq(m.hdr_version, 1);
    ck_assert_int_eq(m.body->version, 8);
    /* records slices still point into the v9 payload */
    check_produce(&m, p9, l9);
    p8 = encode(&m, p9, l9, &l8);
    ck_assert_uint_lt(l8, l9 + 64);
    m8 = decode(p8, l8, false, PRODUCE, 8);
    ck_assert_int_eq(m8.hdr_version, 1);
    check_produce(&m8, p8, l8);

    translate(&m8, 9);
    ck_assert_int_eq(m8.hdr_version, 2);
    p9b = encode(&m8, p8, l8, &l9b);
    ck_assert_uint_eq(l9b, l9);
    ck_assert(memcmp(p9, p9b, l9) == 0);
}
END_TEST

/*
 * Unknown tagged fields of a flexible source: kept when the target is
 * flexible, dropped when it is not.
 */
START_TEST(test_unknown_tags)
{
    static const uint8_t raw[] = { 0xca, 0xfe };
    struct kr_rawtag *tag;
    uint8_t *p9, *q;
    size_t l9, ql;
    struct kr_msg m = produce_req(9, NULL, &p9, &l9);
    struct kr_msg m11 = m, m8 = m, d;

    tag = kr_arena_alloc(&arena, sizeof(*tag));
    ck_assert_ptr_nonnull(tag);
    tag->tag = 77;
    tag->data.p = raw;
    tag->data.len = 2;
    m.body->unknown = tag;
    m.body->nunknown = 1;
    m11 = m;
    m8 = m;

    translate(&m11, 11);
    ck_assert_uint_eq(m11.body->nunknown, 1);
    q = encode(&m11, p9, l9, &ql);
    d = decode(q, ql, false, PRODUCE, 11);
    ck_assert_uint_eq(d.body->nunknown, 1);
    ck_assert_uint_eq(d.body->unknown[0].tag, 77);
    ck_assert_int_eq(d.body->unknown[0].data.len, 2);
    ck_assert(memcmp(d.body->unknown[0].data.p, raw, 2) == 0);
    check_produce(&d, q, ql);

    translate(&m8, 8);
    ck_assert_uint_eq(m8.body->nunknown, 0);
    q = encode(&m8, p9, l9, &ql);
    d = decode(q, ql, false, PRODUCE, 8);
    check_produce(&d, q, ql);
    /* the source tree is untouched */
    ck_assert_uint_eq(m.body->nunknown, 1);
    ck_assert_int_eq(m.api_version, 9);
}
END_TEST

/* Produce v3 (4.3.1 layout) -> v2 (3.9.1 layout): other structs. */
START_TEST(test_produce_v3_v2_layouts)
{
    const struct kr_api_desc *a = kr_api_get(PRODUCE);
    uint8_t *p3, *p2, *p3b;
    size_t l3, l2, l3b;
    struct kr_msg m = produce_req(3, NULL, &p3, &l3);
    struct kr_msg m2;

    ck_assert_uint_ne(kr_api_root(a, false, 3), kr_api_root(a, false, 2));
    translate(&m, 2);
    ck_assert_uint_eq(m.body->struct_id, kr_api_root(a, false, 2));
    check_produce(&m, p3, l3);
    p2 = encode(&m, p3, l3, &l2);
    m2 = decode(p2, l2, false, PRODUCE, 2);
    check_produce(&m2, p2, l2);
    ck_assert(!fld(m2.body, "TransactionalId")->present);
    /* v3 added TransactionalId (int16 -1 = null): 2 bytes longer */
    ck_assert_uint_eq(l2 + 2, l3);

    translate(&m2, 3);
    ck_assert_uint_eq(m2.body->struct_id, kr_api_root(a, false, 3));
    ck_assert(fld(m2.body, "TransactionalId")->is_null);
    p3b = encode(&m2, p2, l2, &l3b);
    ck_assert_uint_eq(l3b, l3);
    ck_assert(memcmp(p3, p3b, l3) == 0);
}
END_TEST

/*
 * Refused downgrades: non-ignorable fields holding a non-default value
 * that the target version lacks.
 *   _i 0: ProduceRequest v3 -> v2, TransactionalId "txn-1" (v3+, not
 *         ignorable, default null);
 *   _i 1: FetchRequest v12 -> v11, Topics[0].Partitions[1].
 *         LastFetchedEpoch 5 (v12+, not ignorable, default -1);
 *   _i 2: ProduceRequest v3 -> v2, TransactionalId "": empty is not the
 *         null default (Kafka's writer compares with null).
 */
START_TEST(test_downgrade_refused)
{
    struct kr_codec_err ce;
    struct kr_msg m;
    uint8_t *p = NULL;
    size_t len;

    if (_i != 1) {
        m = produce_req(3, _i == 0 ? "txn-1" : "", &p, &len);
    } else {
        struct kr_array *t, *pa;

        m = msg_new(false, FETCH, 12);
        t = set_arr(m.body, "Topics", 1);
        set_s(elem(t, 0), "Topic", "orders");
        pa = set_arr(elem(t, 0), "Partitions", 2);
        set_i(elem(pa, 0), "LastFetchedEpoch", -1);
        set_i(elem(pa, 1), "LastFetchedEpoch", 5);
    }
    memset(&ce, 0, sizeof(ce));
    ck_assert_int_eq(kr_translate_msg(&arena, &m, _i != 1 ? 2 : 11, &ce),
                     KR_EUNSUPPORTED);
    ck_assert_int_eq(ce.status, KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, _i != 1 ? "TransactionalId"
                                      : "Topics[0].Partitions[1]."
                                        "LastFetchedEpoch");
    ck_assert_ptr_nonnull(strstr(ce.msg, _i != 1 ? "v2" : "v11"));
    /* m unchanged on failure */
    ck_assert_int_eq(m.api_version, _i != 1 ? 3 : 12);
    ck_assert_int_eq(fld(m.header, "RequestApiVersion")->u.i,
                     _i != 1 ? 3 : 12);
}
END_TEST

/*
 * Topic names and TopicIds are ignorable, but dropping the only one that
 * names a topic is refused: FetchRequest v13 (TopicId) -> v12 (Topic),
 * ProduceResponse v12 (Name) -> v13 (TopicId).
 */
START_TEST(test_topic_identity)
{
    static const uint8_t tid[16] = { 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
                                     9, 9, 9, 1 };
    static const uint8_t zero[16];
    struct kr_msg f = msg_new(false, FETCH, 13);
    struct kr_msg pr = msg_new(true, PRODUCE, 12);
    struct kr_codec_err ce;
    struct kr_array *t;

    t = set_arr(f.body, "Topics", 1);
    set_uuid(elem(t, 0), "TopicId", tid);
    set_arr(elem(t, 0), "Partitions", 1);
    memset(&ce, 0, sizeof(ce));
    ck_assert_int_eq(kr_translate_msg(&arena, &f, 12, &ce), KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "Topics[0].TopicId");
    /* a zero TopicId names nothing: nothing lost */
    set_uuid(elem(t, 0), "TopicId", zero);
    translate(&f, 12);

    t = set_arr(pr.body, "Responses", 1);
    set_s(elem(t, 0), "Name", "orders");
    memset(&ce, 0, sizeof(ce));
    ck_assert_int_eq(kr_translate_msg(&arena, &pr, 13, &ce),
                     KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "Responses[0].Name");
    translate(&pr, 11);
}
END_TEST

/* ---- Fetch -------------------------------------------------------------- */

/*
 * Fetch request v12 -> v11: the tagged, ignorable ClusterId is dropped;
 * LastFetchedEpoch at its default (-1) goes; v11 -> v12 back: ClusterId
 * is not on the wire (tagged, default), LastFetchedEpoch -1.
 */
START_TEST(test_fetch_request_v12_v11)
{
    struct kr_msg m = msg_new(false, FETCH, 12), d;
    struct kr_array *t, *pa;
    uint8_t *p, *q;
    size_t l, ql;

    set_s(m.body, "ClusterId", "cluster-a");
    set_i(m.body, "ReplicaId", -1);
    set_i(m.body, "MaxWaitMs", 500);
    set_i(m.body, "MinBytes", 1);
    set_i(m.body, "SessionEpoch", -1);
    set_s(m.body, "RackId", "rack-1");
    t = set_arr(m.body, "Topics", 1);
    set_s(elem(t, 0), "Topic", "orders");
    pa = set_arr(elem(t, 0), "Partitions", 1);
    set_i(elem(pa, 0), "Partition", 4);
    set_i(elem(pa, 0), "FetchOffset", 1234);
    set_i(elem(pa, 0), "LastFetchedEpoch", -1);
    set_i(elem(pa, 0), "PartitionMaxBytes", 1048576);
    p = encode(&m, NULL, 0, &l);
    m = decode(p, l, false, FETCH, 12);
    ck_assert(fld(m.body, "ClusterId")->present);

    translate(&m, 11);
    ck_assert_int_eq(m.hdr_version, 1);
    q = encode(&m, NULL, 0, &ql);
    d = decode(q, ql, false, FETCH, 11);
    ck_assert_int_eq(fld(d.body, "MaxWaitMs")->u.i, 500);
    assert_str(fld(d.body, "RackId"), "rack-1");
    pa = arr(elem(arr(d.body, "Topics"), 0), "Partitions");
    ck_assert_int_eq(fld(elem(pa, 0), "Partition")->u.i, 4);
    ck_assert_int_eq(fld(elem(pa, 0), "FetchOffset")->u.i, 1234);

    translate(&d, 12);
    ck_assert(!fld(d.body, "ClusterId")->present);
    ck_assert(fld(d.body, "ClusterId")->is_null);
    q = encode(&d, NULL, 0, &ql);
    d = decode(q, ql, false, FETCH, 12);
    ck_assert(!fld(d.body, "ClusterId")->present);
    pa = arr(elem(arr(d.body, "Topics"), 0), "Partitions");
    ck_assert_int_eq(fld(elem(pa, 0), "LastFetchedEpoch")->u.i, -1);
    ck_assert_int_eq(fld(elem(pa, 0), "FetchOffset")->u.i, 1234);
    /* the same bytes as the original but ClusterId's tag */
    ck_assert_uint_lt(ql, l);
}
END_TEST

/*
 * Fetch response v11 -> v12 (client asked v12, broker clamped to v11):
 * records carried, tagged fields new at v12 absent; and v12 -> v11 with
 * the tagged CurrentLeader set (not ignorable) is refused, while an
 * unset one passes.
 */
START_TEST(test_fetch_response_tagged)
{
    struct kr_msg m = msg_new(true, FETCH, 11), d, m12;
    struct kr_array *t, *pa;
    struct kr_codec_err ce;
    struct kr_node *cl;
    uint8_t *p, *q, *r;
    size_t l, ql, rl;

    set_i(m.body, "ThrottleTimeMs", 0);
    set_i(m.body, "SessionId", 99);
    t = set_arr(m.body, "Responses", 1);
    set_s(elem(t, 0), "Topic", "orders");
    pa = set_arr(elem(t, 0), "Partitions", 1);
    set_i(elem(pa, 0), "PartitionIndex", 2);
    set_i(elem(pa, 0), "HighWatermark", 88);
    set_i(elem(pa, 0), "PreferredReadReplica", -1);
    set_rec(elem(pa, 0), "Records", 0, (int32_t)sizeof(batch));
    p = encode(&m, batch, sizeof(batch), &l);
    m = decode(p, l, true, FETCH, 11);

    translate(&m, 12);
    ck_assert_int_eq(m.hdr_version, 1);
    pa = arr(elem(arr(m.body, "Responses"), 0), "Partitions");
    ck_assert(!fld(elem(pa, 0), "CurrentLeader")->present);
    ck_assert(!fld(elem(pa, 0), "DivergingEpoch")->present);
    q = encode(&m, p, l, &ql);
    d = decode(q, ql, true, FETCH, 12);
    pa = arr(elem(arr(d.body, "Responses"), 0), "Partitions");
    ck_assert(!fld(elem(pa, 0), "CurrentLeader")->present);
    ck_assert_int_eq(fld(elem(pa, 0), "HighWatermark")->u.i, 88);
    ck_assert_int_eq(fld(d.body, "SessionId")->u.i, 99);
    assert_records(fld(elem(pa, 0), "Records"), q, ql, batch,
                   sizeof(batch));

    /* back to v11: nothing tagged was set, so it goes */
    m12 = d;
    translate(&m12, 11);
    r = encode(&m12, q, ql, &rl);
    ck_assert_uint_eq(rl, l);
    ck_assert(memcmp(r, p, l) == 0);

    /* a set CurrentLeader (tagged, not ignorable) cannot go to v11 */
    cl = set_struct(elem(pa, 0), "CurrentLeader");
    set_i(cl, "LeaderId", 3);
    set_i(cl, "LeaderEpoch", 7);
    memset(&ce, 0, sizeof(ce));
    ck_assert_int_eq(kr_translate_msg(&arena, &d, 11, &ce), KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "Responses[0].Partitions[0].CurrentLeader");
    /* set but holding the default: dropped like Kafka does */
    set_i(cl, "LeaderId", -1);
    set_i(cl, "LeaderEpoch", -1);
    translate(&d, 11);
}
END_TEST

/* Fetch v4 (4.3.1 layout) -> v3 (3.9.1 layout) and back. */
START_TEST(test_fetch_v4_v3_layouts)
{
    const struct kr_api_desc *a = kr_api_get(FETCH);
    struct kr_msg m = msg_new(false, FETCH, 4), d;
    struct kr_array *t, *pa;
    uint8_t *p, *q, *r;
    size_t l, ql, rl;

    ck_assert_uint_ne(kr_api_root(a, false, 4), kr_api_root(a, false, 3));
    set_i(m.body, "ReplicaId", -1);
    set_i(m.body, "MaxWaitMs", 100);
    set_i(m.body, "MaxBytes", 52428800);
    t = set_arr(m.body, "Topics", 1);
    set_s(elem(t, 0), "Topic", "orders");
    pa = set_arr(elem(t, 0), "Partitions", 1);
    set_i(elem(pa, 0), "FetchOffset", 5);
    set_i(elem(pa, 0), "PartitionMaxBytes", 1000);
    p = encode(&m, NULL, 0, &l);
    m = decode(p, l, false, FETCH, 4);
    /* IsolationLevel (v4+, ignorable) goes at v3 */
    translate(&m, 3);
    ck_assert_uint_eq(m.body->struct_id, kr_api_root(a, false, 3));
    q = encode(&m, NULL, 0, &ql);
    ck_assert_uint_eq(ql + 1, l);
    d = decode(q, ql, false, FETCH, 3);
    ck_assert_int_eq(fld(d.body, "MaxBytes")->u.i, 52428800);
    translate(&d, 4);
    r = encode(&d, NULL, 0, &rl);
    ck_assert_uint_eq(rl, l);
    ck_assert(memcmp(r, p, l) == 0);
}
END_TEST

/* ---- responses ---------------------------------------------------------- */

/*
 * ProduceResponse v7 -> v9: RecordErrors (v8+) empty, ErrorMessage (v8+)
 * null, flexible encoding; v9 -> v10: the tagged CurrentLeader and
 * NodeEndpoints (v10+) are not sent.
 */
START_TEST(test_produce_response_upgrade)
{
    struct kr_msg m = msg_new(true, PRODUCE, 7), d;
    struct kr_array *t, *pr;
    uint8_t *p, *q;
    size_t l, ql;

    set_i(m.body, "ThrottleTimeMs", 25);
    t = set_arr(m.body, "Responses", 1);
    set_s(elem(t, 0), "Name", "orders");
    pr = set_arr(elem(t, 0), "PartitionResponses", 1);
    set_i(elem(pr, 0), "Index", 1);
    set_i(elem(pr, 0), "BaseOffset", 4096);
    set_i(elem(pr, 0), "LogAppendTimeMs", -1);
    set_i(elem(pr, 0), "LogStartOffset", 17);
    p = encode(&m, NULL, 0, &l);
    m = decode(p, l, true, PRODUCE, 7);
    ck_assert_int_eq(m.hdr_version, 0);

    translate(&m, 9);
    ck_assert_int_eq(m.hdr_version, 1);
    pr = arr(elem(arr(m.body, "Responses"), 0), "PartitionResponses");
    ck_assert(fld(elem(pr, 0), "ErrorMessage")->present);
    ck_assert(fld(elem(pr, 0), "ErrorMessage")->is_null);
    ck_assert_uint_eq(arr(elem(pr, 0), "RecordErrors")->n, 0);
    q = encode(&m, NULL, 0, &ql);
    d = decode(q, ql, true, PRODUCE, 9);
    ck_assert_int_eq(fld(d.body, "ThrottleTimeMs")->u.i, 25);
    pr = arr(elem(arr(d.body, "Responses"), 0), "PartitionResponses");
    ck_assert_int_eq(fld(elem(pr, 0), "BaseOffset")->u.i, 4096);
    ck_assert_int_eq(fld(elem(pr, 0), "LogStartOffset")->u.i, 17);
    ck_assert(fld(elem(pr, 0), "ErrorMessage")->is_null);

    translate(&d, 10);
    pr = arr(elem(arr(d.body, "Responses"), 0), "PartitionResponses");
    ck_assert(!fld(elem(pr, 0), "CurrentLeader")->present);
    ck_assert(!fld(d.body, "NodeEndpoints")->present);
    q = encode(&d, NULL, 0, &ql);
    d = decode(q, ql, true, PRODUCE, 10);
    ck_assert(!fld(d.body, "NodeEndpoints")->present);
    /* and all the way down again: everything added was default */
    translate(&d, 7);
    q = encode(&d, NULL, 0, &ql);
    ck_assert_uint_eq(ql, l);
    ck_assert(memcmp(q, p, l) == 0);
}
END_TEST

/*
 * Metadata response v12 -> v9: TopicId (ignorable) dropped, the v8-10
 * ClusterAuthorizedOperations filled with its default; a null topic Name
 * (allowed from v12) cannot be written at v9.
 */
START_TEST(test_metadata_response_v12_v9)
{
    static const uint8_t tid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                     13, 14, 15, 16 };
    struct kr_msg m = msg_new(true, METADATA, 12), d, back;
    struct kr_codec_err ce;
    struct kr_array *b, *t, *pa;
    uint8_t *p, *q;
    size_t l, ql;

    b = set_arr(m.body, "Brokers", 1);
    set_i(elem(b, 0), "NodeId", 1);
    set_s(elem(b, 0), "Host", "broker1");
    set_i(elem(b, 0), "Port", 9092);
    set_s(m.body, "ClusterId", "cid");
    set_i(m.body, "ControllerId", 1);
    t = set_arr(m.body, "Topics", 1);
    set_s(elem(t, 0), "Name", "orders");
    set_uuid(elem(t, 0), "TopicId", tid);
    pa = set_arr(elem(t, 0), "Partitions", 1);
    set_i(elem(pa, 0), "LeaderId", 1);
    set_i(elem(pa, 0), "LeaderEpoch", 3);
    p = encode(&m, NULL, 0, &l);
    m = decode(p, l, true, METADATA, 12);
    back = m;

    translate(&m, 9);
    ck_assert_int_eq(fld(m.body, "ClusterAuthorizedOperations")->u.i,
                     INT32_MIN);
    ck_assert(fld(m.body, "ClusterAuthorizedOperations")->present);
    q = encode(&m, NULL, 0, &ql);
    d = decode(q, ql, true, METADATA, 9);
    assert_str(fld(d.body, "ClusterId"), "cid");
    ck_assert_int_eq(fld(d.body, "ClusterAuthorizedOperations")->u.i,
                     INT32_MIN);
    t = arr(d.body, "Topics");
    assert_str(fld(elem(t, 0), "Name"), "orders");
    pa = arr(elem(t, 0), "Partitions");
    ck_assert_int_eq(fld(elem(pa, 0), "LeaderEpoch")->u.i, 3);
    assert_str(fld(elem(arr(d.body, "Brokers"), 0), "Host"), "broker1");

    /* round trip v9 -> v12: TopicId comes back as zero (its default) */
    translate(&d, 12);
    t = arr(d.body, "Topics");
    ck_assert_int_eq(fld(elem(t, 0), "TopicId")->u.s.len, 16);
    ck_assert_int_eq(fld(elem(t, 0), "TopicId")->u.s.p[0], 0);

    set_null(elem(arr(back.body, "Topics"), 0), "Name");
    memset(&ce, 0, sizeof(ce));
    ck_assert_int_eq(kr_translate_msg(&arena, &back, 9, &ce),
                     KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "Topics[0].Name");
}
END_TEST

/* Metadata request v12 -> v9 and v4 -> v0 (no AllowAutoTopicCreation). */
START_TEST(test_metadata_request)
{
    struct kr_msg m = msg_new(false, METADATA, 12), d;
    struct kr_codec_err ce;
    struct kr_array *t;
    uint8_t *p, *q;
    size_t l, ql;

    t = set_arr(m.body, "Topics", 2);
    set_s(elem(t, 0), "Name", "orders");
    set_s(elem(t, 1), "Name", "payments");
    set_i(m.body, "AllowAutoTopicCreation", 1);
    p = encode(&m, NULL, 0, &l);
    m = decode(p, l, false, METADATA, 12);
    translate(&m, 9);
    q = encode(&m, NULL, 0, &ql);
    d = decode(q, ql, false, METADATA, 9);
    t = arr(d.body, "Topics");
    ck_assert_uint_eq(t->n, 2);
    assert_str(fld(elem(t, 1), "Name"), "payments");
    ck_assert_int_eq(fld(d.body, "AllowAutoTopicCreation")->u.i, 1);

    /* v4 -> v3: AllowAutoTopicCreation true is its default: dropped */
    translate(&d, 4);
    translate(&d, 3);
    q = encode(&d, NULL, 0, &ql);
    d = decode(q, ql, false, METADATA, 3);
    ck_assert_uint_eq(arr(d.body, "Topics")->n, 2);
    /* ... but false is not (non-ignorable): refused */
    translate(&d, 4);
    set_i(d.body, "AllowAutoTopicCreation", 0);
    memset(&ce, 0, sizeof(ce));
    ck_assert_int_eq(kr_translate_msg(&arena, &d, 3, &ce), KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "AllowAutoTopicCreation");
}
END_TEST

/* Same version: a copy that encodes to the same bytes. */
START_TEST(test_same_version)
{
    uint8_t *p, *q;
    size_t l, ql;
    struct kr_msg m = produce_req(9, NULL, &p, &l);
    const struct kr_node *orig = m.body;

    translate(&m, 9);
    ck_assert_ptr_ne(m.body, orig);
    q = encode(&m, p, l, &ql);
    ck_assert_uint_eq(ql, l);
    ck_assert(memcmp(p, q, l) == 0);
}
END_TEST

/*
 * Same root struct, same layout below: the fast path shares the source's
 * subtrees (Produce request v8 -> v7 copies the root only); flexible ->
 * classic must copy (unknown tagged fields go).
 */
START_TEST(test_fast_path_shares)
{
    uint8_t *p;
    size_t l;
    struct kr_msg m8 = produce_req(8, NULL, &p, &l);
    struct kr_msg m9 = produce_req(9, NULL, &p, &l);
    struct kr_codec_err ce;
    struct kr_node *out;

    ck_assert_int_eq(kr_translate_body(&arena, PRODUCE, false, m8.body, 8, 7,
                                       &out, &ce), KR_OK);
    ck_assert_ptr_ne(out, m8.body);
    ck_assert_int_eq(out->version, 7);
    ck_assert_ptr_eq(arr(out, "TopicData"), arr(m8.body, "TopicData"));
    ck_assert_int_eq(kr_translate_body(&arena, PRODUCE, false, m9.body, 9, 8,
                                       &out, &ce), KR_OK);
    ck_assert_ptr_ne(arr(out, "TopicData"), arr(m9.body, "TopicData"));
    ck_assert_int_eq(elem(arr(out, "TopicData"), 0)->version, 8);
}
END_TEST

/* Bad arguments. */
START_TEST(test_bad_args)
{
    struct kr_msg m = msg_new(false, HEARTBEAT, 0);
    struct kr_codec_err ce;
    struct kr_node *out = NULL;

    ck_assert_int_eq(kr_translate_body(&arena, HEARTBEAT, false, m.body, 0,
                                       kr_apis[HEARTBEAT].valid.hi + 1, &out,
                                       &ce), KR_EUNSUPPORTED);
    ck_assert_int_eq(kr_translate_body(&arena, 999, false, m.body, 0, 0,
                                       &out, &ce), KR_EUNSUPPORTED);
    ck_assert_int_eq(kr_translate_body(&arena, HEARTBEAT, false, m.body, 0,
                                       -1, &out, &ce), KR_EUNSUPPORTED);
    /* a Heartbeat body is not a Produce body */
    ck_assert_int_eq(kr_translate_body(&arena, PRODUCE, false, m.body, 3, 3,
                                       &out, &ce), KR_EPROTO);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(kr_translate_msg(&arena, &m, 99, &ce),
                     KR_EUNSUPPORTED);
    ck_assert_int_eq(m.api_version, 0);
}
END_TEST

/*
 * Every API, every pair of versions, both directions: a body holding
 * only defaults always translates (nothing to lose), and the result
 * encodes at the target version and decodes strictly back.
 */
START_TEST(test_all_defaults_translate)
{
    int16_t k, from, to;
    unsigned pairs = 0;

    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *a = kr_api_get(k);
        int rsp;

        if (a == NULL) {
            continue;
        }
        for (rsp = 0; rsp <= 1; rsp++) {
            for (from = a->valid.lo; from <= a->valid.hi; from++) {
                uint16_t sroot = kr_api_root(a, rsp, from);
                struct kr_node *in, *out;

                if (sroot == KR_NO_STRUCT) {
                    continue;
                }
                in = kr_node_new(&arena, sroot, from);
                ck_assert_ptr_nonnull(in);
                for (to = a->valid.lo; to <= a->valid.hi; to++) {
                    struct kr_codec_err ce;
                    struct kr_wbuf w;
                    int rc;

                    if (kr_api_root(a, rsp, to) == KR_NO_STRUCT) {
                        continue;
                    }
                    rc = kr_translate_body(&arena, k, rsp, in, from, to,
                                           &out, &ce);
                    ck_assert_msg(rc == KR_OK, "%s %s v%d -> v%d: %s at %s",
                                  a->name, rsp ? "response" : "request",
                                  from, to, ce.msg, ce.path);
                    ck_assert_uint_eq(out->struct_id,
                                      kr_api_root(a, rsp, to));
                    memset(&w, 0, sizeof(w));
                    rc = kr_encode_struct(out, to, kr_api_flexible(a, to),
                                          &w, &ce);
                    ck_assert_msg(rc == KR_OK,
                                  "encode %s v%d (from v%d): %s at %s",
                                  a->name, to, from, ce.msg, ce.path);
                    {
                        struct kr_rbuf rb;
                        struct iovec iov;
                        struct kr_node *back;
                        size_t off = 0;

                        kr_rbuf_init_flat(&rb, &iov, w.buf, w.len);
                        rc = kr_decode_struct(&arena, &rb, &off,
                                              kr_api_root(a, rsp, to), to,
                                              kr_api_flexible(a, to),
                                              KR_DEC_STRICT, &back, &ce);
                        ck_assert_msg(rc == KR_OK && off == w.len,
                                      "decode %s v%d: %s", a->name, to,
                                      ce.msg);
                    }
                    kr_wbuf_free(&w);
                    pairs++;
                }
                kr_arena_reset(&arena);
            }
        }
    }
    ck_assert_uint_gt(pairs, 1000);
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

/* [MinVersion, MaxVersion] of key in body, false when absent. */
static bool
api_range(const struct kr_node *body, int16_t key, int64_t *lo, int64_t *hi)
{
    struct kr_array *a = arr(body, "ApiKeys");
    uint32_t i;

    for (i = 0; i < a->n; i++) {
        if (fld(elem(a, i), "ApiKey")->u.i == key) {
            *lo = fld(elem(a, i), "MinVersion")->u.i;
            *hi = fld(elem(a, i), "MaxVersion")->u.i;
            return true;
        }
    }
    return false;
}

static struct kr_msg
apiversions_rsp(int16_t ver)
{
    struct kr_msg m = msg_new(true, APIVERSIONS, ver);
    struct kr_array *a = set_arr(m.body, "ApiKeys", 7);

    api_entry(elem(a, 0), PRODUCE, 0, 11);
    api_entry(elem(a, 1), FETCH, 4, 17);
    api_entry(elem(a, 2), METADATA, 0, 99);
    api_entry(elem(a, 3), HEARTBEAT, 0, 4);
    api_entry(elem(a, 4), 999, 0, 5);          /* unknown to krelay */
    api_entry(elem(a, 5), APIVERSIONS, 0, 4);
    api_entry(elem(a, 6), 11, 0, 9);           /* JoinGroup */
    return m;
}

/*
 * Clamp table.  _i 0: known_only, unknown dropped; 1: pass_unknown; 2: no
 * clamps, known_only only; 3: clamps, no known_only.
 */
START_TEST(test_clamp_table)
{
    struct kr_clamp *c;
    struct kr_advert ad;
    struct kr_msg m = apiversions_rsp(3), d;
    int64_t lo, hi;
    unsigned n, want;
    bool known = _i != 3, pass = _i == 1, use_clamps = _i != 2;
    uint8_t *p;
    size_t l;
    int16_t k;

    c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    for (k = 0; k <= kr_api_max; k++) {
        c[k].min = 1;
        c[k].max = 0;                          /* none */
    }
    c[PRODUCE] = (struct kr_clamp){ 3, 7 };
    c[FETCH] = (struct kr_clamp){ 0, 11 };
    c[HEARTBEAT] = (struct kr_clamp){ 5, 9 };  /* nothing left: dropped */
    c[11] = (struct kr_clamp){ 2, 20 };        /* JoinGroup: min raised */

    ad.clamps = use_clamps ? c : NULL;
    ad.decode = NULL;
    ad.decode_all = known;
    ad.pass_unknown = pass;
    ad.sasl_local = false;
    ad.arena = NULL;
    ad.legacy = NULL;
    n = kr_clamp_apiversions(m.body, &ad);
    /* what changed: Produce, Fetch, Heartbeat, JoinGroup (clamps),
     * Metadata (known_only), unknown 999 (dropped unless pass) */
    want = (use_clamps ? 4 : 0) + (known ? 1 : 0) + (pass ? 0 : 1);
    ck_assert_uint_eq(n, want);

    /* the result survives the wire */
    p = encode(&m, NULL, 0, &l);
    d = decode(p, l, true, APIVERSIONS, 3);

    ck_assert(api_range(d.body, PRODUCE, &lo, &hi));
    ck_assert_int_eq(lo, 0);                   /* as the broker sent it */
    ck_assert_int_eq(hi, use_clamps ? 7 : 11);
    ck_assert(api_range(d.body, FETCH, &lo, &hi));
    ck_assert_int_eq(lo, 4);
    ck_assert_int_eq(hi, use_clamps ? 11 : 17);
    ck_assert(api_range(d.body, METADATA, &lo, &hi));
    ck_assert_int_eq(hi, known ? kr_apis[METADATA].valid.hi : 99);
    ck_assert_int_eq(api_range(d.body, HEARTBEAT, &lo, &hi), !use_clamps);
    ck_assert(api_range(d.body, 11, &lo, &hi));
    ck_assert_int_eq(lo, use_clamps ? 2 : 0);
    ck_assert_int_eq(hi, 9);
    ck_assert_int_eq(api_range(d.body, 999, &lo, &hi), pass);
    ck_assert(api_range(d.body, APIVERSIONS, &lo, &hi));
    ck_assert_int_eq(hi, 4);
    ck_assert_uint_eq(arr(d.body, "ApiKeys")->n,
                      7 - (use_clamps ? 1 : 0) - (pass ? 0 : 1));
}
END_TEST

/* Produce clamped below the broker's minimum: nothing left, dropped. */
START_TEST(test_clamp_produce_empty)
{
    struct kr_msg m = msg_new(true, APIVERSIONS, 0);
    struct kr_array *a = set_arr(m.body, "ApiKeys", 1);
    struct kr_advert ad;
    struct kr_clamp *c;
    int16_t k;

    c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    for (k = 0; k <= kr_api_max; k++) {
        c[k].min = 1;
        c[k].max = 0;
    }
    c[PRODUCE] = (struct kr_clamp){ 0, 2 };
    api_entry(elem(a, 0), PRODUCE, 3, 13);
    ad = (struct kr_advert){ c, NULL, true, false, false, NULL, NULL };
    ck_assert_uint_eq(kr_clamp_apiversions(m.body, &ad), 1);
    ck_assert_uint_eq(arr(m.body, "ApiKeys")->n, 0);
    /* nothing to do on a body without ApiKeys entries */
    ck_assert_uint_eq(kr_clamp_apiversions(m.body, &ad), 0);
}
END_TEST

/*
 * sasl = terminate (issue 9): krelay answers SaslHandshake 0-1 and
 * SaslAuthenticate 0-2 itself, so those are advertised whatever the
 * broker offers, and added when the broker lists neither.
 */
START_TEST(test_sasl_local)
{
    struct kr_msg m = msg_new(true, APIVERSIONS, 3), d;
    struct kr_array *a = set_arr(m.body, "ApiKeys", 2);
    struct kr_advert ad;
    int64_t lo, hi;
    uint8_t *p;
    size_t l;

    memset(&ad, 0, sizeof(ad));
    ad.sasl_local = true;
    ad.pass_unknown = true;
    ck_assert(kr_advertise_range(17, 0, 0, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 1);
    ck_assert(kr_advertise_range(36, 1, 1, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 2);
    /* without it: the broker's */
    ck_assert(kr_advertise_range(36, 1, 1, NULL, &lo, &hi));
    ck_assert_int_eq(lo, 1);
    ck_assert_int_eq(hi, 1);

    /* a broker without SASL: Produce and SaslHandshake 0-0 only */
    api_entry(elem(a, 0), PRODUCE, 3, 11);
    api_entry(elem(a, 1), 17, 0, 0);
    ad.arena = &arena;
    ck_assert_uint_eq(kr_clamp_apiversions(m.body, &ad), 3);
    p = encode(&m, NULL, 0, &l);
    d = decode(p, l, true, APIVERSIONS, 3);
    ck_assert_uint_eq(arr(d.body, "ApiKeys")->n, 3);
    ck_assert(api_range(d.body, 17, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 1);
    ck_assert(api_range(d.body, 36, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 2);
    ck_assert(api_range(d.body, PRODUCE, &lo, &hi));
    ck_assert_int_eq(hi, 11);
    /* again: nothing to add or change */
    ck_assert_uint_eq(kr_clamp_apiversions(d.body, &ad), 0);
}
END_TEST

/*
 * kr_advertise_range's precedence (issue 13): broker, clamp, the tables'
 * cap where krelay decodes, Produce's MinVersion 0 when it would be <= 3.
 */
START_TEST(test_advertise_range)
{
    bool *dec = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) *
                                          sizeof(*dec));
    struct kr_clamp *c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) *
                                                    sizeof(*c));
    struct kr_advert ad;
    int64_t lo, hi;
    int16_t k, dt_hi = kr_apis[20].valid.hi;    /* DeleteTopics */

    ck_assert_ptr_nonnull(dec);
    ck_assert_ptr_nonnull(c);
    for (k = 0; k <= kr_api_max; k++) {
        dec[k] = false;
        c[k] = (struct kr_clamp){ 1, 0 };
    }
    /* Produce: a broker restricted to 3-7 (a Kafka 4 stand-in) is
       advertised from 0 so librdkafka keeps compression; 1..3 too; 4
       stays 4 */
    ck_assert(kr_advertise_range(PRODUCE, 3, 7, NULL, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 7);
    ck_assert(kr_advertise_range(PRODUCE, 1, 7, NULL, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert(kr_advertise_range(PRODUCE, 4, 7, NULL, &lo, &hi));
    ck_assert_int_eq(lo, 4);
    /* ... but an empty intersection stays empty */
    c[PRODUCE] = (struct kr_clamp){ 0, 2 };
    ad = (struct kr_advert){ c, dec, false, false, false, NULL, NULL };
    ck_assert(!kr_advertise_range(PRODUCE, 3, 13, &ad, &lo, &hi));
    /* a Produce clamp's min does not raise the advertised min */
    c[PRODUCE] = (struct kr_clamp){ 5, 9 };
    ck_assert(kr_advertise_range(PRODUCE, 0, 13, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 9);
    /* an API krelay need not decode keeps the broker's newer max ... */
    ck_assert(kr_advertise_range(20, 0, dt_hi + 1, &ad, &lo, &hi));
    ck_assert_int_eq(hi, dt_hi + 1);
    /* ... until an enforcing rule could match it: capped at the tables */
    dec[20] = true;
    ck_assert(kr_advertise_range(20, 0, dt_hi + 1, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, dt_hi);
    /* a clamp applies before the cap; a broker above the cap and a clamp
       below the broker's min leave nothing */
    c[20] = (struct kr_clamp){ 2, 4 };
    ck_assert(kr_advertise_range(20, 0, dt_hi + 1, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 2);
    ck_assert_int_eq(hi, 4);
    c[20] = (struct kr_clamp){ 0, 1 };
    ck_assert(!kr_advertise_range(20, 3, dt_hi + 1, &ad, &lo, &hi));
}
END_TEST

/*
 * Step 4 (issue 10): with translation on, the versions krelay translates
 * up are advertised below a broker's range that starts right after them,
 * bounded by the clamp like the broker's own.
 */
START_TEST(test_advertise_legacy)
{
    struct kr_clamp *c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) *
                                                    sizeof(*c));
    struct kr_msg m = msg_new(true, APIVERSIONS, 3), d;
    struct kr_array *a = set_arr(m.body, "ApiKeys", 6);
    struct kr_advert ad, off;
    int64_t lo, hi;
    uint8_t *p;
    size_t l;
    int16_t k;

    ck_assert_ptr_nonnull(c);
    for (k = 0; k <= kr_api_max; k++) {
        c[k] = (struct kr_clamp){ 1, 0 };
    }
    memset(&ad, 0, sizeof(ad));
    ad.legacy = kr_bv_legacy_ranges();
    off = ad;
    off.legacy = NULL;

    /* a Kafka 4 Fetch (4-17): 0-17 with translation, as is without */
    ck_assert(kr_advertise_range(FETCH, 4, 17, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 17);
    ck_assert(kr_advertise_range(FETCH, 4, 17, &off, &lo, &hi));
    ck_assert_int_eq(lo, 4);
    ck_assert(kr_advertise_range(FETCH, 4, 17, NULL, &lo, &hi));
    ck_assert_int_eq(lo, 4);
    /* a 3.9 Fetch needs none; one starting at 5 would leave a gap */
    ck_assert(kr_advertise_range(FETCH, 0, 17, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert(kr_advertise_range(FETCH, 5, 17, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 5);
    /* ListOffsets 1-10, JoinGroup 2-9 (4.0.0) and 0-9 (4.0.1) */
    ck_assert(kr_advertise_range(2, 1, 10, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert(kr_advertise_range(11, 2, 9, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 9);
    ck_assert(kr_advertise_range(11, 0, 9, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    /* what Kafka 4 kept: untouched */
    ck_assert(kr_advertise_range(HEARTBEAT, 1, 4, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 1);
    /* Produce: 0 as step 5 makes it anyway, from 3 and from 0 */
    ck_assert(kr_advertise_range(PRODUCE, 3, 12, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert(kr_advertise_range(PRODUCE, 0, 12, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);

    /* the clamp bounds the translated versions: a clamp below the
       broker's minimum leaves them (nothing without translation) ... */
    ad.clamps = c;
    off.clamps = c;
    c[FETCH] = (struct kr_clamp){ 0, 2 };
    ck_assert(kr_advertise_range(FETCH, 4, 17, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 2);
    ck_assert(!kr_advertise_range(FETCH, 4, 17, &off, &lo, &hi));
    /* ... and a clamp's min raises them */
    c[FETCH] = (struct kr_clamp){ 2, 11 };
    ck_assert(kr_advertise_range(FETCH, 4, 17, &ad, &lo, &hi));
    ck_assert_int_eq(lo, 2);
    ck_assert_int_eq(hi, 11);
    c[FETCH] = (struct kr_clamp){ 1, 0 };

    /* a Kafka 4.0.0 ApiVersions body, on the wire */
    api_entry(elem(a, 0), PRODUCE, 0, 12);
    api_entry(elem(a, 1), FETCH, 4, 17);
    api_entry(elem(a, 2), 8, 2, 9);            /* OffsetCommit */
    api_entry(elem(a, 3), 11, 2, 9);           /* JoinGroup */
    api_entry(elem(a, 4), METADATA, 0, 12);
    api_entry(elem(a, 5), 32, 1, 4);           /* DescribeConfigs */
    ck_assert_uint_eq(kr_clamp_apiversions(m.body, &ad), 4);
    p = encode(&m, NULL, 0, &l);
    d = decode(p, l, true, APIVERSIONS, 3);
    ck_assert(api_range(d.body, FETCH, &lo, &hi));
    ck_assert(lo == 0 && hi == 17);
    ck_assert(api_range(d.body, 8, &lo, &hi));
    ck_assert(lo == 0 && hi == 9);
    ck_assert(api_range(d.body, 11, &lo, &hi));
    ck_assert(lo == 0 && hi == 9);
    ck_assert(api_range(d.body, 32, &lo, &hi));
    ck_assert(lo == 0 && hi == 4);
    ck_assert(api_range(d.body, PRODUCE, &lo, &hi));
    ck_assert(lo == 0 && hi == 12);
    ck_assert(api_range(d.body, METADATA, &lo, &hi));
    ck_assert(lo == 0 && hi == 12);
    /* again: nothing left to widen */
    ck_assert_uint_eq(kr_clamp_apiversions(d.body, &ad), 0);
}
END_TEST

/* KIP-511 answer: an ApiVersions v0 response with error 35. */
START_TEST(test_apiversions_unsupported)
{
    struct kr_msg m;
    uint8_t buf[256];
    size_t n = 1;
    uint32_t size;
    int64_t lo, hi;
    struct kr_array *a;

    buf[0] = 'x';                              /* written after this */
    ck_assert_int_eq(kr_apiversions_unsupported(4242, buf + 1, 19, &n),
                     KR_ELIMIT);                /* too small: nothing */
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(kr_apiversions_unsupported(4242, buf + 1,
                                                sizeof(buf) - 1, &n),
                     KR_OK);
    n += 1;
    ck_assert_uint_eq(n, 1 + KR_APIVERSIONS_UNSUPPORTED_LEN);
    ck_assert_int_eq(buf[0], 'x');
    size = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 |
           (uint32_t)buf[3] << 8 | buf[4];
    ck_assert_uint_eq(size, n - 5);
    /* CorrelationId 4, ErrorCode 2, count 4, one entry 6 */
    ck_assert_uint_eq(size, 16);
    m = decode(buf + 5, size, true, APIVERSIONS, 0);
    ck_assert_int_eq(m.hdr_version, 0);
    ck_assert_int_eq(fld(m.body, "ErrorCode")->u.i, 35);
    a = arr(m.body, "ApiKeys");
    ck_assert_uint_eq(a->n, 1);
    ck_assert(api_range(m.body, APIVERSIONS, &lo, &hi));
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, kr_apis[APIVERSIONS].valid.hi);
}
END_TEST

static Suite *
translate_suite(void)
{
    Suite *s = suite_create("translate");
    TCase *tc = tcase_create("translate");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_produce_v9_v8_roundtrip);
    tcase_add_test(tc, test_unknown_tags);
    tcase_add_test(tc, test_produce_v3_v2_layouts);
    tcase_add_loop_test(tc, test_downgrade_refused, 0, 3);
    tcase_add_test(tc, test_topic_identity);
    tcase_add_test(tc, test_fetch_request_v12_v11);
    tcase_add_test(tc, test_fetch_response_tagged);
    tcase_add_test(tc, test_fetch_v4_v3_layouts);
    tcase_add_test(tc, test_produce_response_upgrade);
    tcase_add_test(tc, test_metadata_response_v12_v9);
    tcase_add_test(tc, test_metadata_request);
    tcase_add_test(tc, test_same_version);
    tcase_add_test(tc, test_fast_path_shares);
    tcase_add_test(tc, test_bad_args);
    tcase_add_test(tc, test_all_defaults_translate);
    tcase_add_loop_test(tc, test_clamp_table, 0, 4);
    tcase_add_test(tc, test_clamp_produce_empty);
    tcase_add_test(tc, test_advertise_range);
    tcase_add_test(tc, test_advertise_legacy);
    tcase_add_test(tc, test_sasl_local);
    tcase_add_test(tc, test_apiversions_unsupported);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(translate_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
