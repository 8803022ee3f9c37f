/*
 * check_analyse.c - the rule pipeline (kr_analyse.h) driven with decoded
 * frames, no sockets and no libevent: deny, the Acks=0 deny, clamp
 * (translated, and answered when the broker has no overlap), throttle on
 * the response, the audit line, and requests that do not decode (refused
 * under an enforcing rule, forwarded under an observing one).
 *
 * This binary links without libevent (Makefile.am): that it builds at
 * all is the check that the pipeline needs no event loop.
 */
#include "config.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "kr_analyse.h"
#include "kr_api_keys.h"
#include "kr_broker_versions.h"
#include "kr_conf.h"
#include "kr_json.h"
#include "kr_kerr.h"
#include "kr_log.h"
#include "kr_rule.h"

#define BASE "[upstream]\nbootstrap_servers = 127.0.0.1:9092\n" \
             "[listener]\nlisten = 127.0.0.1:29092\n" \
             "broker_port_base = 29100\n"

#define PRODUCE(ver, acks)                                                  \
    "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":" #ver ","      \
    "\"CorrelationId\":7,\"ClientId\":\"app\"},\"body\":{\"Acks\":" #acks   \
    ",\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"orders\","              \
    "\"PartitionData\":[{\"Index\":0,\"Records\":null}]}]}}"

#define PRODUCE_RSP(ver)                                                    \
    "{\"apiKey\":0,\"apiVersion\":" #ver ",\"header\":{\"CorrelationId\":7}," \
    "\"body\":{\"Responses\":[{\"Name\":\"orders\",\"PartitionResponses\":" \
    "[{\"Index\":0,\"ErrorCode\":0,\"BaseOffset\":5}]}],"                   \
    "\"ThrottleTimeMs\":0}}"

static struct {
    struct kr_conf *conf;
    struct kr_rule_mask mask;
    struct kr_sasl sasl;
    bool fetch_stale;
    uint64_t rng;
    struct kr_arena arena;
    struct kr_an_conn c;
    struct kr_msg m;
    struct kr_req_hdr h;
    struct kr_an_request r;
    struct kr_an_decision d;
} T;

/* The config BASE + rules, its rules compiled; the connection matches
   every rule (listener "", no address). */
static void
setup_rules(const char *rules)
{
    char text[2048];
    size_t len = 0;
    char *errs = NULL;
    FILE *f = open_memstream(&errs, &len);
    int rc;

    /* as the daemon loads: the ruleset is the config's (kr_conf_free) */
    snprintf(text, sizeof(text), "%s%s", BASE, rules);
    rc = kr_rule_load_string(text, "t.ini", f, &T.conf);
    fclose(f);
    ck_assert_msg(rc == KR_OK, "config refused: %s", errs);
    free(errs);
    ck_assert_ptr_nonnull(T.conf->ruleset);
    kr_rule_conn_mask(T.conf->ruleset, "", NULL, NULL, &T.mask);
    memset(&T.c, 0, sizeof(T.c));
    T.c.rs = T.conf->ruleset;
    T.c.rmask = &T.mask;
    T.c.sasl = &T.sasl;
    T.c.fetch_stale = &T.fetch_stale;
    T.c.rng = &T.rng;
    T.c.audit_sink = true;
    T.c.name = "c#0.1 test";
    T.c.peer.instance = "test-host";
    T.c.peer.conn_id = "c#0.1";
    T.c.peer.listener = "default";
    T.c.peer.client_addr = "192.0.2.7";
    T.c.peer.client_port = 50312;
    T.c.peer.route = "bootstrap";
}

static void
setup(void)
{
    memset(&T, 0, sizeof(T));
    T.rng = 88172645463325252ULL;
    kr_arena_init(&T.arena, 0);
}

static void
teardown(void)
{
    kr_an_decision_free(&T.d);
    kr_arena_free(&T.arena);
    kr_conf_free(T.conf);
}

/* A decoded message from krelay-codec's JSON form, arena-owned. */
static void
build(const char *json, struct kr_msg *m)
{
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    int rc;

    ck_assert_msg(j != NULL, "bad test JSON: %s", je.text);
    memset(&recs, 0, sizeof(recs));
    memset(&err, 0, sizeof(err));
    rc = kr_json_to_msg(&T.arena, j, &recs, m, &err);
    ck_assert_msg(rc == KR_OK, "kr_json_to_msg: %s at %s", err.msg,
                  err.path);
    json_decref(j);
    kr_json_recbuf_free(&recs);
}

/* A message from JSON whose records stay in recs, with rb over them (the
   payload its records slices point into). */
static void
build_recs(const char *json, struct kr_msg *m, struct kr_json_recbuf *recs,
           struct iovec *iov, struct kr_rbuf *rb)
{
    struct kr_codec_err err;
    json_t *j = json_loads(json, 0, NULL);
    int rc;

    ck_assert_ptr_nonnull(j);
    memset(recs, 0, sizeof(*recs));
    rc = kr_json_to_msg(&T.arena, j, recs, m, &err);
    json_decref(j);
    ck_assert_int_eq(rc, KR_OK);
    kr_rbuf_init_flat(rb, iov, recs->p, recs->len);
}

/* The request of json as the session would hand it over (decoded). */
static void request_decoded(bool expect);

static void
request(const char *json, bool expect)
{
    build(json, &T.m);
    request_decoded(expect);
}

/* The request T.m (built by the caller) as the session would hand it
   over. */
static void
request_decoded(bool expect)
{
    memset(&T.h, 0, sizeof(T.h));
    T.h.api_key = T.m.api_key;
    T.h.api_version = T.m.api_version;
    T.h.correlation_id = T.m.correlation_id;
    T.h.known = true;
    snprintf(T.h.client_id, sizeof(T.h.client_id), "app");
    T.h.client_id_len = 3;
    memset(&T.r, 0, sizeof(T.r));
    T.r.h = &T.h;
    T.r.e.api_key = T.h.api_key;
    T.r.e.api_version = T.h.api_version;
    T.r.e.correlation_id = T.h.correlation_id;
    T.r.flen = 100;
    T.r.expect = expect;
    T.r.slot = kr_rule_lookup(T.c.rs, T.h.api_key, T.h.api_version,
                              &T.mask);
    T.r.m = &T.m;
}

/* Decode w (a payload without its size prefix) strictly. */
static void
decode_w(const struct kr_wbuf *w, bool response, int16_t key, int16_t ver,
         struct kr_msg *out)
{
    struct iovec iov;
    struct kr_rbuf rb;
    struct kr_codec_err ce;
    int rc;

    iov.iov_base = w->buf;
    iov.iov_len = w->len;
    rb.seg = &iov;
    rb.nseg = 1;
    rb.len = w->len;
    memset(&ce, 0, sizeof(ce));
    rc = response ? kr_decode_response(&T.arena, &rb, key, ver, 0, out, &ce)
                  : kr_decode_request(&T.arena, &rb, 0, out, &ce);
    ck_assert_msg(rc == KR_OK, "decode: %s at %s", ce.msg, ce.path);
}

static int64_t
int_at(const struct kr_node *n, const char *name)
{
    const struct kr_val *v = kr_node_get(n, name);

    ck_assert_msg(v != NULL, "no %s", name);
    return v->u.i;
}

/* The first partition of a Produce response body. */
static const struct kr_node *
produce_partition(const struct kr_msg *m)
{
    const struct kr_val *r = kr_node_get(m->body, "Responses");
    const struct kr_node *t, *p;

    ck_assert(r != NULL && r->u.arr != NULL && r->u.arr->n == 1);
    t = r->u.arr->items[0].u.node;
    r = kr_node_get(t, "PartitionResponses");
    ck_assert(r != NULL && r->u.arr != NULL && r->u.arr->n == 1);
    p = r->u.arr->items[0].u.node;
    return p;
}

/* deny: never forwarded; the API's own response carries the error. */
START_TEST(test_deny_answers)
{
    struct kr_msg rsp;

    setup_rules("[rule no-orders]\napi = Produce\ntopic = orders\n"
                "deny = true\ndeny_error = TOPIC_AUTHORIZATION_FAILED\n");
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_ANSWER);
    ck_assert_int_eq(T.d.error, KR_KERR_TOPIC_AUTHORIZATION_FAILED);
    ck_assert_ptr_nonnull(T.d.req);
    ck_assert(T.d.req->actions & KR_AUDIT_DENIED);
    ck_assert_ptr_nonnull(strstr(T.d.text, "denied by [rule no-orders]"));
    decode_w(&T.d.w, true, KR_API_PRODUCE, 9, &rsp);
    ck_assert_int_eq(rsp.correlation_id, 7);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "ErrorCode"),
                     KR_KERR_TOPIC_AUTHORIZATION_FAILED);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "Index"), 0);
}
END_TEST

/* deny with Acks=0: no response can carry it: close after the owed. */
START_TEST(test_deny_acks0_closes)
{
    setup_rules("[rule no-orders]\napi = Produce\ntopic = orders\n"
                "deny = true\n");
    request(PRODUCE(9, 0), false);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_CLOSE_AFTER_OWED);
    ck_assert_ptr_null(T.d.req);
    ck_assert_ptr_nonnull(strstr(T.d.text, "with Acks=0 denied by [rule "
                                           "no-orders]"));
    ck_assert_ptr_null(T.d.audit_now);      /* no audit rule */
}
END_TEST

/* A request no rule acts on passes with no rule state. */
START_TEST(test_other_topic_forwards)
{
    setup_rules("[rule no-payments]\napi = Produce\ntopic = payments\n"
                "deny = true\n");
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD);
    ck_assert_ptr_null(T.d.req);
    ck_assert(!T.d.enforce_wait);
}
END_TEST

/* clamp: the request is translated and re-encoded at the clamp. */
START_TEST(test_clamp_translates)
{
    struct kr_msg up;

    setup_rules("[rule old]\napi = Produce\nclamp_max_version = 7\n");
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_TRANSLATED);
    ck_assert_ptr_nonnull(T.d.req);
    ck_assert_int_eq(T.d.req->up_version, 7);
    ck_assert(T.d.req->actions & KR_AUDIT_CLAMPED);
    ck_assert(T.d.req->actions & KR_AUDIT_FORWARDED);
    decode_w(&T.d.w, false, 0, 0, &up);
    ck_assert_int_eq(up.api_key, KR_API_PRODUCE);
    ck_assert_int_eq(up.api_version, 7);
    ck_assert_int_eq(up.correlation_id, 7);
    ck_assert_int_eq(int_at(up.body, "Acks"), -1);
}
END_TEST

/* clamp with a broker that offers nothing inside it: answered 35. */
START_TEST(test_clamp_no_overlap_answers)
{
    struct kr_clamp *av = calloc((size_t)kr_api_max + 1, sizeof(*av));
    struct kr_msg rsp;
    int i;

    ck_assert_ptr_nonnull(av);
    for (i = 0; i <= kr_api_max; i++) {
        av[i].min = 0;
        av[i].max = 12;
    }
    av[KR_API_PRODUCE].min = 8;             /* the broker: v8-v12 */
    setup_rules("[rule old]\napi = Produce\nclamp_max_version = 7\n");
    T.c.broker_av = av;
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_ANSWER);
    ck_assert_int_eq(T.d.error, KR_KERR_UNSUPPORTED_VERSION);
    ck_assert_ptr_nonnull(strstr(T.d.text, "the broker's v8-v12"));
    decode_w(&T.d.w, true, KR_API_PRODUCE, 9, &rsp);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "ErrorCode"),
                     KR_KERR_UNSUPPORTED_VERSION);
    free(av);
}
END_TEST

/*
 * issue 10: legacy translation.  A Produce v2 (magic 1 message sets,
 * made with python3's zlib.crc32 when the test was written) to a Kafka
 * 4.0.0 profile goes up as v3 with RecordBatch v2; the partition whose
 * CRC is wrong is not forwarded, and its CORRUPT_MESSAGE comes back
 * merged into the broker's answer for the other one, at v2.
 */
#define LEGACY_GOOD "AAAAAAAAAAAAAAAcqh9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbwAA" \
    "AAAAAAABAAAAGx+LXQkBAAAAAYvP5WgB/////wAAAAV3b3JsZA=="
#define LEGACY_BAD "AAAAAAAAAAAAAAAcVR9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbw=="
/* one magic 1 message, CRC right, its attributes saying zstd (codec 4),
   which magic 0/1 cannot carry */
#define LEGACY_ZSTD1 "AAAAAAAAAAAAAAAb0kKYugEEAAABi8/laAD/////AAAABWhlbGxv"

START_TEST(test_legacy_produce_up_and_back)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":7,\"ClientId\":\"app\"},\"body\":{\"Acks\":1,"
        "\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_GOOD "\"},"
        "{\"Index\":1,\"Records\":\"" LEGACY_BAD "\"}]}]}}";
    static const char *const rsp_json =
        "{\"apiKey\":0,\"apiVersion\":3,\"header\":{\"CorrelationId\":7},"
        "\"body\":{\"Responses\":[{\"Name\":\"orders\",\"PartitionResponses\":"
        "[{\"Index\":0,\"ErrorCode\":0,\"BaseOffset\":40,"
        "\"LogAppendTimeMs\":-1}]}],\"ThrottleTimeMs\":0}}";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    struct kr_msg up, rsp, out;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_val *v, *parts, *rec;
    const uint8_t *b;
    int16_t to = -1;

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "old";
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    /* the request, its records in recs (the payload they point into) */
    memset(&recs, 0, sizeof(recs));
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    ck_assert_uint_eq(recs.len, 79 + 40);
    request_decoded(true);
    T.r.rb = &rb;
    ck_assert_int_eq(kr_analyse_legacy_route(&T.c, KR_API_PRODUCE, 2, &to),
                     KR_AN_LEGACY_TRANSLATE);
    ck_assert_int_eq(to, 3);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert(T.d.legacy);
    ck_assert_int_eq(T.d.req->up_version, 3);
    ck_assert(T.d.req->actions & KR_AUDIT_TRANSLATED);
    ck_assert_uint_eq(T.d.req->legacy->parts.n, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].partition, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].error,
                     KR_KERR_CORRUPT_MESSAGE);
    /* what goes up: v3, partition 0 only, one RecordBatch v2 of 2 */
    ck_assert_uint_eq(T.d.w.nrecs, 0);          /* records built: own */
    decode_w(&T.d.w, false, 0, 0, &up);
    ck_assert_int_eq(up.api_version, 3);
    parts = kr_node_get(kr_node_get(up.body, "TopicData")->u.arr->items[0]
                            .u.node, "PartitionData");
    ck_assert_uint_eq(parts->u.arr->n, 1);
    ck_assert_int_eq(int_at(parts->u.arr->items[0].u.node, "Index"), 0);
    rec = kr_node_get(parts->u.arr->items[0].u.node, "Records");
    ck_assert_int_ge(rec->u.rec.len, 61);
    b = T.d.w.buf + rec->u.rec.off;
    ck_assert_int_eq(b[16], 2);                 /* magic */
    ck_assert_int_eq((b[57] << 24) | (b[58] << 16) | (b[59] << 8) | b[60],
                     2);                        /* RecordsCount */
    /* the broker's answer for partition 0, back to v2 with partition 1 */
    build(rsp_json, &rsp);
    T.r.e.api_version = 2;
    memset(&rd, 0, sizeof(rd));
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 50, 100,
                        &T.arena, &rd);
    ck_assert_msg(rd.outcome == KR_AN_DELIVER_CHANGED, "%d %s", rd.outcome,
                  rd.text);
    ck_assert(rd.legacy);
    decode_w(&rd.w, true, KR_API_PRODUCE, 2, &out);
    v = kr_node_get(kr_node_get(out.body, "Responses")->u.arr->items[0]
                        .u.node, "PartitionResponses");
    ck_assert_uint_eq(v->u.arr->n, 2);
    ck_assert_int_eq(int_at(v->u.arr->items[0].u.node, "Index"), 0);
    ck_assert_int_eq(int_at(v->u.arr->items[0].u.node, "BaseOffset"), 40);
    ck_assert_int_eq(int_at(v->u.arr->items[0].u.node, "ErrorCode"), 0);
    ck_assert_int_eq(int_at(v->u.arr->items[1].u.node, "Index"), 1);
    ck_assert_int_eq(int_at(v->u.arr->items[1].u.node, "ErrorCode"),
                     KR_KERR_CORRUPT_MESSAGE);
    ck_assert_int_eq(int_at(v->u.arr->items[1].u.node, "BaseOffset"), -1);
    kr_wbuf_free(&rd.w);
    kr_json_recbuf_free(&recs);
}
END_TEST

/*
 * Three magic 1 messages ("k"/"hello", null/"world", "k3"/"third"), made
 * with python3 (struct.pack, zlib.crc32): each becomes a RecordBatch
 * of 70-75 bytes alone, so legacy_batch_max_bytes 80 splits them into
 * three batches.
 */
#define LEGACY_THREE "AAAAAAAAAAAAAAAcqh9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbwAA" \
    "AAAAAAABAAAAG4KEvH8BAAAAAYvP5WgA/////wAAAAV3b3JsZAAAAAAAAAACAAAAHSaLUtg" \
    "BAAAAAYvP5WgBAAAAAmszAAAABXRoaXJk"
/* The first of them alone. */
#define LEGACY_ONE "AAAAAAAAAAAAAAAcqh9neQEAAAABi8/laAAAAAABawAAAAVoZWxsbw=="

/* No rules; translate_legacy on lc (listener "old", a Kafka 4.0.0
   profile), batches of at most max_batch bytes. */
static void
legacy_split_on(struct kr_an_legacy_conf *lc, size_t max_batch)
{
    setup_rules("");
    memset(lc, 0, sizeof(*lc));
    lc->on = true;
    lc->listener = "old";
    lc->rec.max_uncompressed = 1 << 20;
    lc->rec.max_batch_bytes = max_batch;
    lc->profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = lc;
}

/* The records of partition p (Index index) of topic t of the Produce
   request m (encoded in w): exactly one RecordBatch; its RecordsCount. */
static int32_t
one_batch_count(const struct kr_msg *m, const struct kr_wbuf *w,
                uint32_t t, uint32_t p, int32_t index)
{
    const struct kr_val *td = kr_node_get(m->body, "TopicData");
    const struct kr_val *pd, *rec;
    const uint8_t *b;
    size_t blen = 0;

    ck_assert_uint_gt(td->u.arr->n, t);
    pd = kr_node_get(td->u.arr->items[t].u.node, "PartitionData");
    ck_assert_uint_gt(pd->u.arr->n, p);
    ck_assert_int_eq(int_at(pd->u.arr->items[p].u.node, "Index"), index);
    rec = kr_node_get(pd->u.arr->items[p].u.node, "Records");
    b = w->buf + rec->u.rec.off;
    /* exactly one whole batch */
    ck_assert(kr_records_batch_next(b, (size_t)rec->u.rec.len, 0, &blen));
    ck_assert_uint_eq(blen, (size_t)rec->u.rec.len);
    ck_assert_int_eq(b[16], 2);
    return (b[57] << 24) | (b[58] << 16) | (b[59] << 8) | b[60];
}

/* A Produce v3 response body for topic "orders": (index, error, base
   offset) of n partitions, taken by the splits or merged. */
static void
produce_rsp3(int n, const int *idx, const int *err, const int *base,
             struct kr_msg *m)
{
    char js[1024];
    int o, i;

    o = snprintf(js, sizeof(js), "{\"apiKey\":0,\"apiVersion\":3,\"header\":"
                 "{\"CorrelationId\":9},\"body\":{\"Responses\":[{\"Name\":"
                 "\"orders\",\"PartitionResponses\":[");
    for (i = 0; i < n; i++) {
        o += snprintf(js + o, sizeof(js) - (size_t)o, "%s{\"Index\":%d,"
                      "\"ErrorCode\":%d,\"BaseOffset\":%d,"
                      "\"LogAppendTimeMs\":%d}", i > 0 ? "," : "", idx[i],
                      err[i], base[i], 1000 + base[i]);
    }
    snprintf(js + o, sizeof(js) - (size_t)o, "]}],\"ThrottleTimeMs\":0}}");
    build(js, m);
}

/*
 * A produce policy's codec refusal (allowed_compression) answers
 * UNSUPPORTED_COMPRESSION_TYPE (76), as brokers do, to a client of
 * Produce v3+; a translated Produce v2 client, which never met 76
 * (KIP-110, Produce v3+), gets CORRUPT_MESSAGE (2), what brokers of its
 * time answered for a codec they refused (the legacy error table).
 */
START_TEST(test_legacy_produce_policy_codec)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":7,\"ClientId\":\"app\"},\"body\":{\"Acks\":1,"
        "\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_GOOD "\"}"
        "]}]}}";
    static const char *const req3_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":3,"
        "\"CorrelationId\":7,\"ClientId\":\"app\"},\"body\":{"
        "\"TransactionalId\":null,\"Acks\":1,"
        "\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_GOOD "\"}"
        "]}]}}";
    struct kr_an_legacy_conf lc;
    struct kr_json_recbuf recs;
    struct kr_msg rsp;
    struct iovec iov;
    struct kr_rbuf rb;

    /* uncompressed messages, only gzip allowed */
    setup_rules("[rule gz]\napi = Produce\nallowed_compression = gzip\n");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "old";
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_ANSWER, "%d %s", T.d.outcome,
                  T.d.text);
    ck_assert_int_eq(T.d.error, KR_KERR_CORRUPT_MESSAGE);
    ck_assert_ptr_nonnull(strstr(T.d.text, "refused by the produce policy "
                                           "of [rule gz]"));
    decode_w(&T.d.w, true, KR_API_PRODUCE, 2, &rsp);
    ck_assert_int_eq(rsp.correlation_id, 7);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "ErrorCode"),
                     KR_KERR_CORRUPT_MESSAGE);
    kr_json_recbuf_free(&recs);
    kr_an_decision_free(&T.d);
    memset(&T.d, 0, sizeof(T.d));

    /* the same set in a Produce v3 (brokers want a v2 batch there; the
       policy reads the codec all the same): UNSUPPORTED_COMPRESSION_TYPE,
       which v3+ clients know */
    build_recs(req3_json, &T.m, &recs, &iov, &rb);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_ANSWER, "%d %s", T.d.outcome,
                  T.d.text);
    ck_assert_int_eq(T.d.error, KR_KERR_UNSUPPORTED_COMPRESSION_TYPE);
    decode_w(&T.d.w, true, KR_API_PRODUCE, 3, &rsp);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "ErrorCode"),
                     KR_KERR_UNSUPPORTED_COMPRESSION_TYPE);
    kr_json_recbuf_free(&recs);
}
END_TEST

/*
 * issue 10: "batches are split to at most a configurable size".  A
 * Produce v2 whose partition 0 converts into three batches (each record
 * alone at legacy_batch_max_bytes 80) and partition 1 into one: Produce
 * v3+ takes one batch per partition (KAFKA-4816), so two rounds go up
 * first (partition 0's first and second batch, the client's
 * CorrelationId and header), then the client's request with every
 * partition (partition 0's third batch).  The answers merge: BaseOffset
 * the first batch's; an error of an earlier batch wins.  Before: the
 * partition got MESSAGE_TOO_LARGE and was not forwarded.
 */
START_TEST(test_legacy_produce_split_rounds)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":9,\"ClientId\":\"app\"},\"body\":{\"Acks\":-1,"
        "\"TimeoutMs\":1500,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_THREE "\"},"
        "{\"Index\":1,\"Records\":\"" LEGACY_ONE "\"}]}]}}";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    struct kr_msg up, r0, r1, rsp, out;
    struct kr_wbuf w0, w1;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_node *pn;
    int idx0[] = { 0 }, ok[] = { 0, 0 }, idx01[] = { 0, 1 };
    int base_r0[] = { 500 }, base_r1[] = { 501 }, base_main[] = { 502, 77 };
    int bad_r1[] = { 6 };                       /* NOT_LEADER_OR_FOLLOWER */
    int pass;

    legacy_split_on(&lc, 80);
    for (pass = 0; pass < 2; pass++) {
        kr_an_decision_free(&T.d);
        build_recs(req_json, &T.m, &recs, &iov, &rb);
        request_decoded(true);
        T.r.rb = &rb;
        kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
        ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                      T.d.outcome, T.d.text);
        ck_assert_uint_eq(T.d.legacy_bad, 0);
        ck_assert_uint_eq(T.d.req->legacy->parts.n, 0);
        ck_assert_uint_eq(T.d.nrounds, 2);
        ck_assert_ptr_nonnull(T.d.splits);
        ck_assert_ptr_eq(T.d.splits, T.d.req->legacy->splits);
        ck_assert_uint_eq(T.d.splits->n, 1);
        ck_assert_uint_eq(T.d.splits->v[0].nbatch, 2);
        ck_assert_uint_eq(T.d.legacy_st.batches_out, 4);
        ck_assert_uint_eq(T.d.legacy_st.records_out, 4);
        /* the rounds: v3, the client's header, partition 0 only */
        memset(&w0, 0, sizeof(w0));
        memset(&w1, 0, sizeof(w1));
        w0.buf = T.d.rounds[0].p;
        w0.len = T.d.rounds[0].len;
        w1.buf = T.d.rounds[1].p;
        w1.len = T.d.rounds[1].len;
        decode_w(&w0, false, 0, 0, &r0);
        decode_w(&w1, false, 0, 0, &r1);
        ck_assert_int_eq(r0.api_version, 3);
        ck_assert_int_eq(r0.correlation_id, 9);
        ck_assert_int_eq(r1.correlation_id, 9);
        ck_assert_int_eq(int_at(r0.body, "Acks"), -1);
        ck_assert_int_eq(int_at(r1.body, "TimeoutMs"), 1500);
        ck_assert_uint_eq(kr_node_get(r0.body, "TopicData")->u.arr->n, 1);
        ck_assert_uint_eq(kr_node_get(kr_node_get(r0.body, "TopicData")
                                          ->u.arr->items[0].u.node,
                                      "PartitionData")->u.arr->n, 1);
        ck_assert_int_eq(one_batch_count(&r0, &w0, 0, 0, 0), 1);
        ck_assert_int_eq(one_batch_count(&r1, &w1, 0, 0, 0), 1);
        /* the client's request: both partitions, one batch each */
        decode_w(&T.d.w, false, 0, 0, &up);
        ck_assert_int_eq(up.api_version, 3);
        ck_assert_int_eq(one_batch_count(&up, &T.d.w, 0, 0, 0), 1);
        ck_assert_int_eq(one_batch_count(&up, &T.d.w, 0, 1, 1), 1);
        /* the rounds' answers (what the session's callback does) */
        produce_rsp3(1, idx0, ok, base_r0, &rsp);
        ck_assert_int_eq(kr_legacy_split_take(T.d.splits, rsp.body), KR_OK);
        produce_rsp3(1, idx0, pass == 0 ? ok : bad_r1, base_r1, &rsp);
        ck_assert_int_eq(kr_legacy_split_take(T.d.splits, rsp.body), KR_OK);
        /* the client's: partition 0's first BaseOffset, or round 1's
           error; partition 1 as the broker said */
        produce_rsp3(2, idx01, ok, base_main, &rsp);
        T.r.e.api_version = 2;
        memset(&rd, 0, sizeof(rd));
        kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 50, 100,
                            &T.arena, &rd);
        ck_assert_msg(rd.outcome == KR_AN_DELIVER_CHANGED, "%d %s",
                      rd.outcome, rd.text);
        decode_w(&rd.w, true, KR_API_PRODUCE, 2, &out);
        pn = kr_node_get(kr_node_get(out.body, "Responses")->u.arr->items[0]
                             .u.node, "PartitionResponses")->u.arr->items[0]
                 .u.node;
        ck_assert_int_eq(int_at(pn, "Index"), 0);
        ck_assert_int_eq(int_at(pn, "ErrorCode"), pass == 0 ? 0 : 6);
        ck_assert_int_eq(int_at(pn, "BaseOffset"), pass == 0 ? 500 : -1);
        ck_assert_int_eq(int_at(pn, "LogAppendTimeMs"),
                         pass == 0 ? 1500 : -1);
        pn = kr_node_get(kr_node_get(out.body, "Responses")->u.arr->items[0]
                             .u.node, "PartitionResponses")->u.arr->items[1]
                 .u.node;
        ck_assert_int_eq(int_at(pn, "Index"), 1);
        ck_assert_int_eq(int_at(pn, "ErrorCode"), 0);
        ck_assert_int_eq(int_at(pn, "BaseOffset"), 77);
        kr_wbuf_free(&rd.w);
        kr_json_recbuf_free(&recs);
    }
}
END_TEST

/* Standard base64 of p[0..n) into out (4 * ((n + 2) / 3) + 1 bytes). */
static void
b64(const uint8_t *p, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                            "0123456789+/";
    size_t i, o = 0;

    for (i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;

        v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
        v |= i + 2 < n ? p[i + 2] : 0;
        out[o++] = a[v >> 18];
        out[o++] = a[(v >> 12) & 63];
        out[o++] = i + 1 < n ? a[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    out[o] = '\0';
}

/* T.d for a Produce v2 whose one partition has n magic 0 messages (each
   a batch of its own at legacy_batch_max_bytes 70: legacy_split_on
   first); its outcome. */
static enum kr_an_outcome
split_many(unsigned n)
{
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;
    uint8_t *set = malloc(n * 27);
    char *js = malloc(n * 40 + 512);
    char *enc = malloc(n * 40 + 8);
    enum kr_an_outcome o;
    unsigned i;

    ck_assert(set != NULL && js != NULL && enc != NULL);
    for (i = 0; i < n; i++) {
        /* offset, size 14, crc, magic 0, attributes 0, key null, value
           "v" */
        uint8_t *m = set + i * 27;
        static const uint8_t body[] = { 0, 0, 0xff, 0xff, 0xff, 0xff,
                                        0, 0, 0, 1, 'v' };
        uint32_t crc = (uint32_t)crc32(0L, body, sizeof(body));

        memset(m, 0, 8);
        m[7] = (uint8_t)i;
        m[8] = 0, m[9] = 0, m[10] = 0, m[11] = 15;
        m[12] = (uint8_t)(crc >> 24), m[13] = (uint8_t)(crc >> 16);
        m[14] = (uint8_t)(crc >> 8), m[15] = (uint8_t)crc;
        memcpy(m + 16, body, sizeof(body));
    }
    b64(set, n * 27, enc);
    snprintf(js, n * 40 + 512, "{\"header\":{\"RequestApiKey\":0,"
             "\"RequestApiVersion\":2,\"CorrelationId\":3,\"ClientId\":"
             "\"app\"},\"body\":{\"Acks\":1,\"TimeoutMs\":100,"
             "\"TopicData\":[{\"Name\":\"t\",\"PartitionData\":[{"
             "\"Index\":0,\"Records\":\"%s\"}]}]}}", enc);
    kr_an_decision_free(&T.d);
    build_recs(js, &T.m, &recs, &iov, &rb);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    o = T.d.outcome;
    kr_json_recbuf_free(&recs);
    free(set);
    free(js);
    free(enc);
    return o;
}

/*
 * The same split with Acks=0: no rule state is kept for a request that
 * gets no response (d.req NULL), yet the rounds still go, and d holds
 * its own reference to their splits (the session crashed on d->req
 * before).
 */
START_TEST(test_legacy_produce_split_acks0)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":1,"
        "\"CorrelationId\":4,\"ClientId\":\"app\"},\"body\":{\"Acks\":0,"
        "\"TimeoutMs\":1500,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":2,\"Records\":\"" LEGACY_THREE
        "\"}]}]}}";
    struct kr_an_legacy_conf lc;
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;

    legacy_split_on(&lc, 80);
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    request_decoded(false);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_ptr_null(T.d.req);
    ck_assert_uint_eq(T.d.nrounds, 2);
    ck_assert_int_eq(T.d.rounds_version, 3);
    ck_assert_ptr_nonnull(T.d.splits);
    ck_assert_uint_eq(T.d.splits->refs, 1);
    ck_assert_uint_eq(T.d.splits->v[0].partition, 2);
    kr_json_recbuf_free(&recs);
}
END_TEST

/*
 * A round whose answer never named its partition (a broker answering
 * what it was not asked): UNKNOWN_SERVER_ERROR, not a BaseOffset made
 * up.  And a set that would need more than KR_LEGACY_MAX_ROUNDS rounds
 * is refused (MESSAGE_TOO_LARGE) as before splitting.
 */
START_TEST(test_legacy_produce_split_limits)
{
    struct kr_legacy_splits *sp = kr_legacy_splits_new();
    struct kr_an_legacy_conf lc;
    struct kr_msg rsp;
    int idx0[] = { 0 }, ok[] = { 0 }, base[] = { 40 };
    unsigned nerr = 9;

    ck_assert_ptr_nonnull(sp);
    sp->v = calloc(1, sizeof(*sp->v));
    ck_assert_ptr_nonnull(sp->v);
    sp->n = sp->cap = 1;
    sp->v[0].topic = strdup("orders");
    sp->v[0].topic_len = 6;
    sp->v[0].partition = 0;
    sp->v[0].nbatch = 2;
    sp->rounds = 2;
    produce_rsp3(1, idx0, ok, base, &rsp);
    ck_assert_int_eq(kr_legacy_split_take(sp, rsp.body), KR_OK);
    ck_assert_uint_eq(sp->v[0].answered, 1);
    ck_assert_int_eq(sp->v[0].base_offset, 40);
    ck_assert_int_eq(kr_legacy_split_merge(rsp.body, sp, &nerr), KR_OK);
    ck_assert_uint_eq(nerr, 1);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "ErrorCode"),
                     KR_KERR_UNKNOWN_SERVER_ERROR);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "BaseOffset"), -1);
    kr_legacy_splits_ref(sp);
    kr_legacy_splits_unref(sp);
    ck_assert_uint_eq(sp->refs, 1);
    kr_legacy_splits_unref(sp);
    /* 1 + KR_LEGACY_MAX_ROUNDS batches go; one more is refused */
    legacy_split_on(&lc, 70);
    ck_assert_int_eq(split_many(KR_LEGACY_MAX_ROUNDS + 1),
                     KR_AN_FORWARD_TRANSLATED);
    ck_assert_uint_eq(T.d.nrounds, KR_LEGACY_MAX_ROUNDS);
    ck_assert_int_eq(split_many(KR_LEGACY_MAX_ROUNDS + 2), KR_AN_ANSWER);
    ck_assert_int_eq(T.d.error, KR_KERR_MESSAGE_TOO_LARGE);
    ck_assert_uint_eq(T.d.nrounds, 0);
}
END_TEST

/* Partition k of topic t of a Produce response body. */
static const struct kr_node *
rsp_part(const struct kr_msg *m, uint32_t t, uint32_t k)
{
    const struct kr_val *r = kr_node_get(m->body, "Responses");

    ck_assert(r != NULL && r->u.arr != NULL && r->u.arr->n > t);
    r = kr_node_get(r->u.arr->items[t].u.node, "PartitionResponses");
    ck_assert(r != NULL && r->u.arr != NULL && r->u.arr->n > k);
    return r->u.arr->items[k].u.node;
}

/*
 * issue 10: the rounds of a translated Produce go up one at a time
 * (Acks != 0), and at the first one answered with an error the client's
 * request is answered by krelay.  Partition 0 needs two rounds,
 * partition 1 none, partition 2 does not convert (CRC).  Round 0's
 * answer: no error, round 1 may go; round 1's: KAFKA_STORAGE_ERROR for
 * partition 0.  The answer krelay builds (kr_analyse_rounds_failed), at
 * the client's v2: partitions 0 and 1 (what the client's request
 * carried, kept in the legacy state) with NOT_LEADER_OR_FOLLOWER (56
 * mapped for v2 as the broker's own answer would be), partition 2 with
 * its CORRUPT_MESSAGE, BaseOffset -1 each; "denied", the note.  Then a
 * round whose answer does not name its partition: UNKNOWN_SERVER_ERROR.
 */
START_TEST(test_legacy_rounds_failed)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":9,\"ClientId\":\"app\"},\"body\":{\"Acks\":-1,"
        "\"TimeoutMs\":1500,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_THREE "\"},"
        "{\"Index\":1,\"Records\":\"" LEGACY_ONE "\"},"
        "{\"Index\":2,\"Records\":\"" LEGACY_BAD "\"}]}]}}";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    const struct kr_legacy_split *which;
    struct kr_msg rsp, out;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_node *pn;
    int idx0[] = { 0 }, idx5[] = { 5 }, ok[] = { 0 }, base[] = { 500 };
    int storage[] = { KR_KERR_KAFKA_STORAGE_ERROR };
    uint32_t k;

    legacy_split_on(&lc, 80);
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_uint_eq(T.d.nrounds, 2);
    ck_assert_uint_eq(T.d.legacy_bad, 1);
    /* what the client's request carries up: partitions 0 and 1 */
    ck_assert_uint_eq(T.d.req->legacy->sent.n, 2);
    ck_assert_str_eq(T.d.req->legacy->sent.v[0].topic, "orders");
    ck_assert_int_eq(T.d.req->legacy->sent.v[0].partition, 0);
    ck_assert_int_eq(T.d.req->legacy->sent.v[1].partition, 1);
    ck_assert_uint_eq(T.d.req->legacy->parts.n, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].partition, 2);
    /* round 0 answered without an error: round 1 may go */
    produce_rsp3(1, idx0, ok, base, &rsp);
    ck_assert_int_eq(kr_legacy_split_take(T.d.splits, rsp.body), KR_OK);
    ck_assert_int_eq(kr_legacy_split_round_error(T.d.splits, 0, &which),
                     KR_KERR_NONE);
    ck_assert_ptr_null(which);
    /* round 1: KAFKA_STORAGE_ERROR for partition 0 */
    produce_rsp3(1, idx0, storage, base, &rsp);
    ck_assert_int_eq(kr_legacy_split_take(T.d.splits, rsp.body), KR_OK);
    ck_assert_int_eq(kr_legacy_split_round_error(T.d.splits, 1, &which),
                     KR_KERR_KAFKA_STORAGE_ERROR);
    ck_assert_ptr_nonnull(which);
    ck_assert_int_eq(which->partition, 0);
    /* the client's request does not go: krelay answers it */
    T.r.e.api_version = 2;
    kr_analyse_rounds_failed(&T.c, &T.r.e, T.d.req,
                             KR_KERR_KAFKA_STORAGE_ERROR, "round 2 failed",
                             &T.arena, &rd);
    ck_assert_msg(rd.outcome == KR_AN_DELIVER_CHANGED, "%d %s", rd.outcome,
                  rd.text);
    ck_assert(rd.legacy);
    ck_assert_uint_eq(rd.rsp_bytes, 4 + rd.w.len);
    decode_w(&rd.w, true, KR_API_PRODUCE, 2, &out);
    ck_assert_int_eq(out.correlation_id, 9);
    ck_assert_uint_eq(kr_node_get(out.body, "Responses")->u.arr->n, 1);
    ck_assert_uint_eq(kr_node_get(kr_node_get(out.body, "Responses")
                                      ->u.arr->items[0].u.node,
                                  "PartitionResponses")->u.arr->n, 3);
    for (k = 0; k < 3; k++) {
        pn = rsp_part(&out, 0, k);
        ck_assert_int_eq(int_at(pn, "Index"), (int64_t)k);
        ck_assert_int_eq(int_at(pn, "ErrorCode"),
                         k < 2 ? KR_KERR_NOT_LEADER_OR_FOLLOWER
                               : KR_KERR_CORRUPT_MESSAGE);
        ck_assert_int_eq(int_at(pn, "BaseOffset"), -1);
        ck_assert_int_eq(int_at(pn, "LogAppendTimeMs"), -1);
    }
    ck_assert(T.d.req->actions & KR_AUDIT_DENIED);
    ck_assert(T.d.req->actions & KR_AUDIT_TRANSLATED);
    ck_assert_str_eq(T.d.req->note, "round 2 failed");
    kr_wbuf_free(&rd.w);
    kr_json_recbuf_free(&recs);
    /* again; round 0's answer names another partition only */
    kr_an_decision_free(&T.d);
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_TRANSLATED);
    produce_rsp3(1, idx5, ok, base, &rsp);
    ck_assert_int_eq(kr_legacy_split_take(T.d.splits, rsp.body), KR_OK);
    ck_assert_int_eq(kr_legacy_split_round_error(T.d.splits, 0, &which),
                     KR_KERR_UNKNOWN_SERVER_ERROR);
    ck_assert_int_eq(which->partition, 0);
    kr_json_recbuf_free(&recs);
}
END_TEST

/* Acks=0 splits keep no partitions for an answer: none can come. */
START_TEST(test_legacy_rounds_acks0_no_sent)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":4,\"ClientId\":\"app\"},\"body\":{\"Acks\":0,"
        "\"TimeoutMs\":1500,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_THREE
        "\"}]}]}}";
    struct kr_an_legacy_conf lc;
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;

    legacy_split_on(&lc, 80);
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    request_decoded(false);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_TRANSLATED);
    ck_assert_uint_eq(T.d.nrounds, 2);
    ck_assert_ptr_null(T.d.req);
    kr_json_recbuf_free(&recs);
}
END_TEST

/* A Produce v2 to "orders" (Acks acks): partition 0's records p0 and
   partition 1's p1 (base64; "" for an empty set), decided into T.d. */
static void
legacy_two_parts(int acks, const char *p0, const char *p1)
{
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;
    char js[2048];
    int n = snprintf(js, sizeof(js),
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":12,\"ClientId\":\"app\"},\"body\":{"
        "\"Acks\":%d,\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":"
        "\"orders\",\"PartitionData\":[{\"Index\":0,\"Records\":\"%s\"},"
        "{\"Index\":1,\"Records\":\"%s\"}]}]}}", acks, p0, p1);

    ck_assert_int_lt(n, (int)sizeof(js));
    kr_an_decision_free(&T.d);
    build_recs(js, &T.m, &recs, &iov, &rb);
    request_decoded(acks != 0);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    kr_json_recbuf_free(&recs);
}

/*
 * issue 10: a partition whose message set is empty (MessageSetSize 0).
 * Produce v3+ refuses empty records (Kafka 4: INVALID_RECORD; librdkafka's
 * mock aborts), a 0.10 broker appended nothing and answered BaseOffset
 * -1: the partition stays out of the translated request and gets
 * ErrorCode 0, BaseOffset -1 from krelay (not counted as corrupt).  With
 * every partition empty krelay answers the request itself (Acks=0:
 * nothing at all: KR_AN_DONE); with one corrupt too, each partition
 * gets its own error.  Before: forwarded as v3 with empty records.
 */
START_TEST(test_legacy_produce_empty_sets)
{
    static const char *const rsp_json =
        "{\"apiKey\":0,\"apiVersion\":3,\"header\":{\"CorrelationId\":12},"
        "\"body\":{\"Responses\":[{\"Name\":\"orders\",\"PartitionResponses\":"
        "[{\"Index\":0,\"ErrorCode\":0,\"BaseOffset\":40,"
        "\"LogAppendTimeMs\":-1}]}],\"ThrottleTimeMs\":0}}";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_msg up, rsp, out;
    const struct kr_val *parts;
    const struct kr_node *pn;
    int acks;

    legacy_split_on(&lc, 0);
    /* one empty, one not: the other goes up alone */
    legacy_two_parts(1, LEGACY_GOOD, "");
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_uint_eq(T.d.legacy_bad, 0);
    ck_assert_uint_eq(T.d.req->legacy->parts.n, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].partition, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].error, KR_KERR_NONE);
    decode_w(&T.d.w, false, 0, 0, &up);
    parts = kr_node_get(kr_node_get(up.body, "TopicData")->u.arr->items[0]
                            .u.node, "PartitionData");
    ck_assert_uint_eq(parts->u.arr->n, 1);
    ck_assert_int_eq(int_at(parts->u.arr->items[0].u.node, "Index"), 0);
    build(rsp_json, &rsp);
    T.r.e.api_version = 2;
    memset(&rd, 0, sizeof(rd));
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 50, 100,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.outcome, KR_AN_DELIVER_CHANGED);
    ck_assert_uint_eq(rd.legacy_bad, 0);
    decode_w(&rd.w, true, KR_API_PRODUCE, 2, &out);
    pn = rsp_part(&out, 0, 0);
    ck_assert_int_eq(int_at(pn, "Index"), 0);
    ck_assert_int_eq(int_at(pn, "BaseOffset"), 40);
    pn = rsp_part(&out, 0, 1);
    ck_assert_int_eq(int_at(pn, "Index"), 1);
    ck_assert_int_eq(int_at(pn, "ErrorCode"), 0);
    ck_assert_int_eq(int_at(pn, "BaseOffset"), -1);
    kr_wbuf_free(&rd.w);
    /* every set empty: answered, nothing goes up */
    legacy_two_parts(-1, "", "");
    ck_assert_msg(T.d.outcome == KR_AN_ANSWER, "%d %s", T.d.outcome,
                  T.d.text);
    ck_assert_int_eq(T.d.error, KR_KERR_NONE);
    ck_assert_uint_eq(T.d.legacy_bad, 0);
    ck_assert(!(T.d.req->actions & KR_AUDIT_DENIED));
    ck_assert_msg(strstr(T.d.text, "Produce v2 CorrelationId 12 has only "
                         "empty message sets (MessageSetSize 0: nothing to "
                         "append) in 2 partitions: answered by krelay, "
                         "ErrorCode 0 and BaseOffset -1") != NULL, "%s",
                  T.d.text);
    decode_w(&T.d.w, true, KR_API_PRODUCE, 2, &out);
    ck_assert_int_eq(out.correlation_id, 12);
    for (acks = 0; acks < 2; acks++) {
        pn = rsp_part(&out, 0, (uint32_t)acks);
        ck_assert_int_eq(int_at(pn, "Index"), acks);
        ck_assert_int_eq(int_at(pn, "ErrorCode"), 0);
        ck_assert_int_eq(int_at(pn, "BaseOffset"), -1);
        ck_assert_int_eq(int_at(pn, "LogAppendTimeMs"), -1);
    }
    /* Acks=0: nothing to send, nothing to answer, no close */
    legacy_two_parts(0, "", "");
    ck_assert_msg(T.d.outcome == KR_AN_DONE, "%d %s", T.d.outcome,
                  T.d.text);
    ck_assert_ptr_null(T.d.req);
    ck_assert_uint_eq(T.d.w.len, 0);
    /* one empty, one corrupt: each its own; Acks=0 closes */
    legacy_two_parts(1, "", LEGACY_BAD);
    ck_assert_msg(T.d.outcome == KR_AN_ANSWER, "%d %s", T.d.outcome,
                  T.d.text);
    ck_assert_int_eq(T.d.error, KR_KERR_CORRUPT_MESSAGE);
    ck_assert_uint_eq(T.d.legacy_bad, 1);
    decode_w(&T.d.w, true, KR_API_PRODUCE, 2, &out);
    ck_assert_int_eq(int_at(rsp_part(&out, 0, 0), "ErrorCode"), 0);
    ck_assert_int_eq(int_at(rsp_part(&out, 0, 1), "ErrorCode"),
                     KR_KERR_CORRUPT_MESSAGE);
    legacy_two_parts(0, "", LEGACY_BAD);
    ck_assert_int_eq(T.d.outcome, KR_AN_CLOSE_AFTER_OWED);
    /* zstd in a magic 1 message: UNSUPPORTED_COMPRESSION_TYPE (76) is
       KIP-110's (Produce v7), a v2 client gets CORRUPT_MESSAGE, in
       krelay's own answer and merged into the broker's alike */
    legacy_two_parts(1, "", LEGACY_ZSTD1);
    ck_assert_msg(T.d.outcome == KR_AN_ANSWER, "%d %s", T.d.outcome,
                  T.d.text);
    ck_assert_uint_eq(T.d.legacy_bad, 1);
    decode_w(&T.d.w, true, KR_API_PRODUCE, 2, &out);
    ck_assert_int_eq(int_at(rsp_part(&out, 0, 1), "ErrorCode"),
                     KR_KERR_CORRUPT_MESSAGE);
    legacy_two_parts(1, LEGACY_GOOD, LEGACY_ZSTD1);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    build(rsp_json, &rsp);
    memset(&rd, 0, sizeof(rd));
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 50, 100,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.outcome, KR_AN_DELIVER_CHANGED);
    decode_w(&rd.w, true, KR_API_PRODUCE, 2, &out);
    ck_assert_int_eq(int_at(rsp_part(&out, 0, 0), "BaseOffset"), 40);
    ck_assert_int_eq(int_at(rsp_part(&out, 0, 1), "ErrorCode"),
                     KR_KERR_CORRUPT_MESSAGE);
    kr_wbuf_free(&rd.w);
}
END_TEST

/* A Produce v2 to topic (Acks acks) of partition 0 LEGACY_GOOD and
   partition 1 part1 (base64), its records in recs, handed over as the
   session would (expecting a response unless Acks=0). */
static void
legacy_produce_req(const char *topic, int acks, const char *part1,
                   struct kr_json_recbuf *recs, struct iovec *iov,
                   struct kr_rbuf *rb)
{
    char js[2048];
    int n = snprintf(js, sizeof(js),
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":-2147483648,\"ClientId\":\"app\"},\"body\":{"
        "\"Acks\":%d,\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"%s\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_GOOD "\"},"
        "{\"Index\":1,\"Records\":\"%s\"}]}]}}", acks, topic, part1);

    ck_assert_int_lt(n, (int)sizeof(js));
    build_recs(js, &T.m, recs, iov, rb);
    request_decoded(acks != 0);
    T.r.rb = rb;
}

/* s ends with the string end. */
static bool
ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);

    return n >= m && strcmp(s + n - m, end) == 0;
}

/* A legacy Produce (Acks acks, partition 1's records part1) forwarded
   translated with bad of its partitions refused, the connection kept. */
static void
legacy_produce_stays_open(int acks, const char *part1, unsigned bad)
{
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;

    kr_an_decision_free(&T.d);
    legacy_produce_req("orders", acks, part1, &recs, &iov, &rb);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_TRANSLATED);
    ck_assert(!T.d.close_after);
    ck_assert_uint_eq(T.d.legacy_bad, bad);
    kr_json_recbuf_free(&recs);
}

/*
 * issue 10: a Produce v2 with Acks=0 whose partition 1 does not convert
 * (its CRC): no response can carry its CORRUPT_MESSAGE, so, as a broker
 * does (KafkaApis, "Closing connection due to error during produce
 * request ... with ack=0"), the good partition goes up and the
 * connection closes after it, one line naming the fault (before: the good
 * partition went up and the error was dropped, the client never told).
 */
START_TEST(test_legacy_produce_acks0_partly_bad)
{
    struct kr_an_legacy_conf lc;
    struct kr_json_recbuf recs;
    struct kr_msg up;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_val *parts;

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "old";
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    legacy_produce_req("orders", 0, LEGACY_BAD, &recs, &iov, &rb);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert(T.d.legacy);
    ck_assert(T.d.close_after);
    ck_assert_uint_eq(T.d.legacy_bad, 1);
    ck_assert_int_eq(T.d.level, KR_LOG_NOTICE);
    ck_assert_ptr_null(T.d.req);                /* no response: freed */
    /* what goes up: v3, Acks 0, partition 0 alone */
    decode_w(&T.d.w, false, 0, 0, &up);
    ck_assert_int_eq(up.api_version, 3);
    ck_assert_int_eq(int_at(up.body, "Acks"), 0);
    parts = kr_node_get(kr_node_get(up.body, "TopicData")->u.arr->items[0]
                            .u.node, "PartitionData");
    ck_assert_uint_eq(parts->u.arr->n, 1);
    ck_assert_int_eq(int_at(parts->u.arr->items[0].u.node, "Index"), 0);
    /* the line: the request, the fault, what krelay does */
    ck_assert_msg(strstr(T.d.text, "Produce v2 CorrelationId -2147483648 "
                         "with Acks=0 has records that do not convert in 1 "
                         "partition (topic orders partition 1: corrupt: "
                         "message at byte 0 (offset 0): CRC 0x") != NULL,
                  "%s", T.d.text);
    ck_assert_msg(ends_with(T.d.text, ": others forwarded, closing the "
                            "connection (no response can carry "
                            "CORRUPT_MESSAGE)"), "%s", T.d.text);
    ck_assert_uint_lt(strlen(T.d.text), KR_AN_CLOSE_TEXT_MAX);
    kr_json_recbuf_free(&recs);

    /* Acks=1: answered with the error merged in, nothing closed */
    legacy_produce_stays_open(1, LEGACY_BAD, 1);
    /* Acks=0 and every partition good: forwarded, nothing closed */
    legacy_produce_stays_open(0, LEGACY_GOOD, 0);
}
END_TEST

/*
 * issue 10: the lines of an Acks=0 legacy Produce that closes, with the
 * longest names (a topic of 249 characters, CorrelationId INT32_MIN, a
 * long listener name): the session keeps KR_AN_CLOSE_TEXT_MAX bytes of a
 * close line, so each fits, ending with what krelay does and the error
 * (they were cut off: "... (no response can carry CORRUP").
 */
START_TEST(test_legacy_close_lines_fit)
{
    struct kr_an_legacy_conf lc;
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;
    char topic[250];

    memset(topic, 't', sizeof(topic) - 1);
    topic[sizeof(topic) - 1] = '\0';
    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "legacy-clients-of-the-warehouse-appliances-behind-nat";
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;

    /* some partitions bad: forwarded, then closed */
    legacy_produce_req(topic, 0, LEGACY_BAD, &recs, &iov, &rb);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert(T.d.close_after);
    ck_assert_msg(strlen(T.d.text) < KR_AN_CLOSE_TEXT_MAX, "%zu: %s",
                  strlen(T.d.text), T.d.text);
    ck_assert_msg(ends_with(T.d.text, ": others forwarded, closing the "
                            "connection (no response can carry "
                            "CORRUPT_MESSAGE)"), "%s", T.d.text);
    ck_assert_ptr_nonnull(strstr(T.d.text, " partition 1: corrupt: "));
    kr_json_recbuf_free(&recs);

    /* every partition bad: not forwarded, closed */
    kr_an_decision_free(&T.d);
    legacy_produce_req(topic, 0, LEGACY_BAD, &recs, &iov, &rb);
    {
        /* partition 0 bad too: its records' first byte changed */
        struct kr_node *tn = kr_node_get(T.m.body, "TopicData")
                                 ->u.arr->items[0].u.node;
        struct kr_node *p0 = kr_node_get(tn, "PartitionData")
                                 ->u.arr->items[0].u.node;

        recs.p[kr_node_get(p0, "Records")->u.rec.off + 30] ^= 1;
    }
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_CLOSE_AFTER_OWED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_uint_eq(T.d.legacy_bad, 2);
    ck_assert(!T.d.legacy_refusal);     /* translated, its records bad */
    ck_assert_msg(strlen(T.d.text) < KR_AN_CLOSE_TEXT_MAX, "%zu: %s",
                  strlen(T.d.text), T.d.text);
    ck_assert_msg(ends_with(T.d.text, ": closing the connection (no "
                            "response can carry CORRUPT_MESSAGE)"),
                  "%s", T.d.text);
    ck_assert_msg(strstr(T.d.text, "with Acks=0 has records that do not "
                         "convert in 2 partitions (topic tttttttttttttttttttt"
                         "tttttttttttt partition 0: corrupt: ") != NULL, "%s",
                  T.d.text);
    kr_json_recbuf_free(&recs);

    /* translate_legacy off: refused, the line says what to enable whole */
    lc.on = false;
    kr_an_decision_free(&T.d);
    legacy_produce_req(topic, 0, LEGACY_GOOD, &recs, &iov, &rb);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_CLOSE_AFTER_OWED);
    ck_assert(T.d.legacy_refusal);      /* the session may hold the close */
    ck_assert_msg(strlen(T.d.text) < KR_AN_CLOSE_TEXT_MAX, "%zu: %s",
                  strlen(T.d.text), T.d.text);
    ck_assert_msg(ends_with(T.d.text, "translate_legacy = true on [listener "
                            "legacy-clients-of-the-warehouse-] would "
                            "translate it: closing the connection (no "
                            "response can carry UNSUPPORTED_VERSION)"),
                  "%s", T.d.text);
    kr_json_recbuf_free(&recs);
}
END_TEST

/*
 * issue 10, a hostile client: a Produce v2 naming thousands of partitions
 * whose records do not convert (here 2000 over two topics, a message
 * whose Size is below the minimum: 17 bytes each, 34 KiB of request) and
 * one good one.  Each bad partition gets its CORRUPT_MESSAGE merged into
 * the broker's answer; the merge grows each array once, so its arena
 * memory is linear in the partitions (one grow per partition made it
 * quadratic: about 400 MB here, and seconds of a worker's time).
 */
#define LEGACY_SHORT "AAAAAAAAAAAAAAAFeHh4eHg="

START_TEST(test_legacy_produce_many_bad)
{
    enum { NBAD = 2000 };
    static const char *const rsp_json =
        "{\"apiKey\":0,\"apiVersion\":3,\"header\":{\"CorrelationId\":7},"
        "\"body\":{\"Responses\":[{\"Name\":\"orders\",\"PartitionResponses\":"
        "[{\"Index\":0,\"ErrorCode\":0,\"BaseOffset\":40,"
        "\"LogAppendTimeMs\":-1}]}],\"ThrottleTimeMs\":0}}";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    struct kr_msg up, rsp, out;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_val *v;
    size_t cap = 256 + (size_t)NBAD * 64, len, used;
    char *js = malloc(cap);
    unsigned nerr[2] = { 0, 0 };
    json_t *j;
    int rc;

    ck_assert_ptr_nonnull(js);
    len = (size_t)snprintf(js, cap,
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":7,\"ClientId\":\"app\"},\"body\":{\"Acks\":1,"
        "\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_GOOD "\"}");
    for (int i = 1; i <= NBAD; i++) {
        if (i == NBAD / 2 + 1) {
            len += (size_t)snprintf(js + len, cap - len, "]},{\"Name\":"
                                    "\"other\",\"PartitionData\":[");
        }
        len += (size_t)snprintf(js + len, cap - len,
                                "%s{\"Index\":%d,\"Records\":\""
                                LEGACY_SHORT "\"}",
                                i == NBAD / 2 + 1 ? "" : ",", i);
    }
    len += (size_t)snprintf(js + len, cap - len, "]}]}}");
    ck_assert_uint_lt(len, cap);
    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "old";
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    memset(&recs, 0, sizeof(recs));
    j = json_loads(js, 0, NULL);
    free(js);
    ck_assert_ptr_nonnull(j);
    rc = kr_json_to_msg(&T.arena, j, &recs, &T.m, &err);
    json_decref(j);
    ck_assert_int_eq(rc, KR_OK);
    kr_rbuf_init_flat(&rb, &iov, recs.p, recs.len);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_uint_eq(T.d.req->legacy->parts.n, NBAD);
    /* what goes up: the good partition alone */
    decode_w(&T.d.w, false, 0, 0, &up);
    v = kr_node_get(up.body, "TopicData");
    ck_assert_uint_eq(v->u.arr->n, 1);
    v = kr_node_get(v->u.arr->items[0].u.node, "PartitionData");
    ck_assert_uint_eq(v->u.arr->n, 1);
    ck_assert_int_eq(int_at(v->u.arr->items[0].u.node, "Index"), 0);
    /* the broker's answer for partition 0; the bad ones merged in */
    build(rsp_json, &rsp);
    T.r.e.api_version = 2;
    used = T.arena.used;
    memset(&rd, 0, sizeof(rd));
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 50, 100,
                        &T.arena, &rd);
    ck_assert_msg(rd.outcome == KR_AN_DELIVER_CHANGED, "%d %s", rd.outcome,
                  rd.text);
    ck_assert_msg(T.arena.used - used < (size_t)NBAD * 1024,
                  "the merge took %zu bytes of arena for %d partitions",
                  T.arena.used - used, NBAD);
    decode_w(&rd.w, true, KR_API_PRODUCE, 2, &out);
    v = kr_node_get(out.body, "Responses");
    ck_assert_uint_eq(v->u.arr->n, 2);
    for (unsigned t = 0; t < 2; t++) {
        const struct kr_node *tn = v->u.arr->items[t].u.node;
        const struct kr_val *pv = kr_node_get(tn, "PartitionResponses");

        ck_assert_uint_eq(pv->u.arr->n, t == 0 ? NBAD / 2 + 1 : NBAD / 2);
        for (unsigned p = 0; p < pv->u.arr->n; p++) {
            const struct kr_node *pn = pv->u.arr->items[p].u.node;
            /* orders: 0 (the broker's), then 1..; other: NBAD/2+1.. */
            int64_t want = t == 0 ? (int64_t)p : NBAD / 2 + 1 + (int64_t)p;

            ck_assert_int_eq(int_at(pn, "Index"), want);
            if (int_at(pn, "ErrorCode") == KR_KERR_CORRUPT_MESSAGE) {
                ck_assert_int_eq(int_at(pn, "BaseOffset"), -1);
                nerr[t]++;
            }
        }
    }
    ck_assert_uint_eq(nerr[0], NBAD / 2);
    ck_assert_uint_eq(nerr[1], NBAD / 2);
    kr_wbuf_free(&rd.w);
    kr_json_recbuf_free(&recs);
}
END_TEST

/*
 * issue 10, a hostile client: gzip bombs spread over partitions.  Each
 * partition's wrapper (python3's zlib when the test was written: 1000
 * bytes of 'z' in a magic 1 message of 1034 bytes, gzip) fits the
 * listener's max_frame_bytes alone, but the request's wrappers share it:
 * the second partition past it gets CORRUPT_MESSAGE, the first goes up.
 */
#define LEGACY_GZIP_1034 "AAAAAAAAAAAAAABKICu0/AEBAAABi8/laAD/////AAAANB+LCAAA" \
    "AAAAAgNjYIAB5n+Sh7UnMwJZjN3nn2Yw/AcCoOiLqlEwCkbBsAcA3jQlmgoEAAA="

START_TEST(test_legacy_produce_inflate_budget)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":2,"
        "\"CorrelationId\":7,\"ClientId\":\"app\"},\"body\":{\"Acks\":1,"
        "\"TimeoutMs\":1000,\"TopicData\":[{\"Name\":\"orders\","
        "\"PartitionData\":[{\"Index\":0,\"Records\":\"" LEGACY_GZIP_1034
        "\"},{\"Index\":1,\"Records\":\"" LEGACY_GZIP_1034 "\"}]}]}}";
    struct kr_an_legacy_conf lc;
    struct kr_json_recbuf recs;
    struct iovec iov;
    struct kr_rbuf rb;

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "old";
    lc.rec.max_uncompressed = 1500;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    memset(&recs, 0, sizeof(recs));
    build_recs(req_json, &T.m, &recs, &iov, &rb);
    request_decoded(true);
    T.r.rb = &rb;
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_uint_eq(T.d.req->legacy->parts.n, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].partition, 1);
    ck_assert_int_eq(T.d.req->legacy->parts.v[0].error,
                     KR_KERR_CORRUPT_MESSAGE);
    ck_assert_ptr_nonnull(strstr(T.d.req->legacy->parts.v[0].why,
                                 "past the limit"));
    kr_json_recbuf_free(&recs);
}
END_TEST

/*
 * issue 10: a Fetch v2 from the middle of an uncompressed batch goes up
 * as v4; the broker's RecordBatch v2 (made with kafka-python's
 * DefaultRecordBatchBuilder when the test was written: offsets 40-41)
 * comes back as the one magic 1 message at or after FetchOffset 41
 * (expected bytes from python3's zlib.crc32 over the message).
 */
START_TEST(test_legacy_fetch_down)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":1,\"RequestApiVersion\":2,"
        "\"CorrelationId\":9,\"ClientId\":\"app\"},\"body\":{\"ReplicaId\":-1,"
        "\"MaxWaitMs\":100,\"MinBytes\":1,\"Topics\":[{\"Topic\":\"orders\","
        "\"Partitions\":[{\"Partition\":0,\"FetchOffset\":41,"
        "\"PartitionMaxBytes\":1048576}]}]}}";
    static const char *const rsp_json =
        "{\"apiKey\":1,\"apiVersion\":4,\"header\":{\"CorrelationId\":9},"
        "\"body\":{\"ThrottleTimeMs\":0,\"Responses\":[{\"Topic\":\"orders\","
        "\"Partitions\":[{\"PartitionIndex\":0,\"ErrorCode\":0,"
        "\"HighWatermark\":42,\"LastStableOffset\":42,"
        "\"AbortedTransactions\":[],\"Records\":\"AAAAAAAAACgAAABKAAAAAAIS"
        "k9mZAAAAAAABAAABi8/laAAAAAGLz+VoAf//////////////////AAAAAhgAAAAC"
        "awpoZWxsbwAWAAICAQp3b3JsZAA=\"}]}]}}";
    static const char *const want_hex =
        "00000000000000290000001b1f8b5d0901000000018bcfe56801ffffffff"
        "00000005776f726c64";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    struct kr_msg up, rsp, out;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_val *v, *rec;
    char hex[128];
    size_t i;

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_1;
    T.c.legacy = &lc;
    request(req_json, true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%s", T.d.text);
    ck_assert_int_eq(T.d.req->up_version, 4);
    decode_w(&T.d.w, false, 0, 0, &up);
    ck_assert_int_eq(up.api_version, 4);
    ck_assert_int_eq(int_at(up.body, "IsolationLevel"), 0);
    /* v2 had no MaxBytes: half of max_frame_bytes (1 MiB here), so the
       response krelay holds to convert fits it (INT32_MAX let a consumer
       of many partitions be closed on every fetch) */
    ck_assert_int_eq(int_at(up.body, "MaxBytes"), (1 << 20) / 2);
    /* the broker's v4 answer, its records in recs */
    memset(&recs, 0, sizeof(recs));
    build_recs(rsp_json, &rsp, &recs, &iov, &rb);
    T.c.rsp_rb = &rb;
    memset(&rd, 0, sizeof(rd));
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 150, 100,
                        &T.arena, &rd);
    ck_assert_msg(rd.outcome == KR_AN_DELIVER_CHANGED, "%s", rd.text);
    ck_assert(rd.legacy);
    ck_assert_uint_eq(rd.legacy_bad, 0);
    decode_w(&rd.w, true, KR_API_FETCH, 2, &out);
    v = kr_node_get(kr_node_get(out.body, "Responses")->u.arr->items[0]
                        .u.node, "Partitions");
    ck_assert_int_eq(int_at(v->u.arr->items[0].u.node, "HighWatermark"), 42);
    rec = kr_node_get(v->u.arr->items[0].u.node, "Records");
    ck_assert_int_eq(rec->u.rec.len, 39);
    for (i = 0; i < 39; i++) {
        snprintf(hex + 2 * i, 3, "%02x", rd.w.buf[rec->u.rec.off + i]);
    }
    ck_assert_str_eq(hex, want_hex);
    kr_wbuf_free(&rd.w);
    kr_json_recbuf_free(&recs);
}
END_TEST

/* The (topic, partition) order of a decoded Fetch request, "a0 a1 b0". */
static void
fetch_order(const struct kr_node *body, char *out, size_t len)
{
    const struct kr_val *tv = kr_node_get(body, "Topics");
    size_t at = 0;

    out[0] = '\0';
    for (uint32_t t = 0; t < tv->u.arr->n; t++) {
        const struct kr_node *tn = tv->u.arr->items[t].u.node;
        const struct kr_val *name = kr_node_get(tn, "Topic");
        const struct kr_val *pv = kr_node_get(tn, "Partitions");

        for (uint32_t p = 0; p < pv->u.arr->n; p++) {
            at += (size_t)snprintf(out + at, len - at, "%s%.*s%d",
                                   at > 0 ? " " : "",
                                   (int)name->u.s.len, name->u.s.p,
                                   (int)int_at(pv->u.arr->items[p].u.node,
                                               "Partition"));
        }
    }
}

/*
 * issue 10: a translated Fetch v2 (no MaxBytes) goes up with MaxBytes
 * legacy_fetch_max_bytes (below half of max_frame_bytes), and each
 * translated Fetch of the connection has its topics and their partitions
 * sorted and rotated one further, whatever the client's own order
 * (KIP-74: a broker fills the response in the request's order, so
 * without rotation the first partitions would starve the others).
 */
START_TEST(test_legacy_fetch_cap_rotate)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":1,\"RequestApiVersion\":2,"
        "\"CorrelationId\":9,\"ClientId\":\"app\"},\"body\":{\"ReplicaId\":-1,"
        "\"MaxWaitMs\":100,\"MinBytes\":1,\"Topics\":["
        "{\"Topic\":\"a\",\"Partitions\":["
        "{\"Partition\":0,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576},"
        "{\"Partition\":1,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576},"
        "{\"Partition\":2,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576}]},"
        "{\"Topic\":\"b\",\"Partitions\":["
        "{\"Partition\":0,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576},"
        "{\"Partition\":1,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576}"
        "]}]}}";
    /* the same partitions in an order of the client's own (librdkafka
       rotates its partitions from one Fetch to the next): krelay's order
       does not depend on it */
    static const char *const req_json_rotated =
        "{\"header\":{\"RequestApiKey\":1,\"RequestApiVersion\":2,"
        "\"CorrelationId\":9,\"ClientId\":\"app\"},\"body\":{\"ReplicaId\":-1,"
        "\"MaxWaitMs\":100,\"MinBytes\":1,\"Topics\":["
        "{\"Topic\":\"b\",\"Partitions\":["
        "{\"Partition\":1,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576},"
        "{\"Partition\":0,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576}]},"
        "{\"Topic\":\"a\",\"Partitions\":["
        "{\"Partition\":2,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576},"
        "{\"Partition\":0,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576},"
        "{\"Partition\":1,\"FetchOffset\":0,\"PartitionMaxBytes\":1048576}"
        "]}]}}";
    /* turn n: topics (sorted) rotated by n % 2, a's partitions by n % 3,
       b's by n % 2 */
    static const char *const want[] = {
        "a0 a1 a2 b0 b1", "b1 b0 a1 a2 a0", "a2 a0 a1 b0 b1",
        "b1 b0 a0 a1 a2"
    };
    struct kr_an_legacy_conf lc;
    struct kr_msg up;
    uint32_t turn = 0;
    char order[64];

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.rec.max_uncompressed = 64u << 20;
    lc.fetch_max_bytes = 2u << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_1;
    T.c.legacy = &lc;
    T.c.legacy_turn = &turn;
    for (unsigned n = 0; n < KR_ARRAY_LEN(want); n++) {
        kr_an_decision_free(&T.d);
        request(n % 2 == 0 ? req_json : req_json_rotated, true);
        kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
        ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%s",
                      T.d.text);
        ck_assert_uint_eq(turn, n + 1);
        decode_w(&T.d.w, false, 0, 0, &up);
        ck_assert_int_eq(up.api_version, 4);
        ck_assert_int_eq(int_at(up.body, "MaxBytes"), 2 << 20);
        fetch_order(up.body, order, sizeof(order));
        ck_assert_str_eq(order, want[n]);
        /* every partition kept, each with its own FetchOffset answer */
        ck_assert_uint_eq(T.d.req->legacy->parts.n, 5);
    }
    /* max_frame_bytes below twice the key: its half wins */
    lc.rec.max_uncompressed = 1u << 20;
    kr_an_decision_free(&T.d);
    request(req_json, true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    decode_w(&T.d.w, false, 0, 0, &up);
    ck_assert_int_eq(int_at(up.body, "MaxBytes"), 512 << 10);
}
END_TEST

/*
 * issue 10: a zstd batch (check_records' down_zstd_in: offsets 200-203,
 * kafka-python's zstd) for a Fetch v2 consumer, whose magic 1 cannot
 * carry zstd: legacy_zstd = refuse answers the partition
 * UNSUPPORTED_COMPRESSION_TYPE without records, as brokers did (counted
 * as a partition that did not convert); gzip (the default) serves it as
 * one gzip wrapper of its four records, counted as recompressed.
 */
START_TEST(test_legacy_fetch_zstd)
{
    static const char *const req_json =
        "{\"header\":{\"RequestApiKey\":1,\"RequestApiVersion\":2,"
        "\"CorrelationId\":9,\"ClientId\":\"app\"},\"body\":{\"ReplicaId\":-1,"
        "\"MaxWaitMs\":100,\"MinBytes\":1,\"Topics\":[{\"Topic\":\"orders\","
        "\"Partitions\":[{\"Partition\":0,\"FetchOffset\":200,"
        "\"PartitionMaxBytes\":1048576}]}]}}";
    static const char *const rsp_json =
        "{\"apiKey\":1,\"apiVersion\":4,\"header\":{\"CorrelationId\":9},"
        "\"body\":{\"ThrottleTimeMs\":0,\"Responses\":[{\"Topic\":\"orders\","
        "\"Partitions\":[{\"PartitionIndex\":0,\"ErrorCode\":0,"
        "\"HighWatermark\":204,\"LastStableOffset\":204,"
        "\"AbortedTransactions\":[],\"Records\":\"AAAAAAAAAMgAAACs/////wJ57y"
        "BdAAQAAAADAAABi8/laAAAAAGLz+VoHv//////////////////AAAABCi1L/1gGAKN"
        "AwCEBIgDAAAACmtleS0w8AJ0aGUgcXVpY2sgYnJvd24gZm94IGp1bXBzIG92ZXIgbG"
        "F6eSBkb2cgMCAAiAMAFAIxMSgEMjI8BjMzABAACyYQmDcwDEiDwBZMITBvYBiQBoEt"
        "mEJg3mBY0gjwEBVNCkvpAQ==\"}]}]}}";
    static const enum kr_legacy_zstd how[] = { KR_LEGACY_ZSTD_REFUSE,
                                                KR_LEGACY_ZSTD_GZIP };
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    struct kr_msg rsp, out;
    struct iovec iov;
    struct kr_rbuf rb;
    const struct kr_node *pn;
    const struct kr_val *rec;
    size_t k;

    setup_rules("");
    for (k = 0; k < KR_ARRAY_LEN(how); k++) {
        memset(&lc, 0, sizeof(lc));
        lc.on = true;
        lc.rec.max_uncompressed = 1 << 20;
        lc.rec.zstd = how[k];
        lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_1;
        T.c.legacy = &lc;
        kr_an_decision_free(&T.d);
        request(req_json, true);
        kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
        ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%s",
                      T.d.text);
        build_recs(rsp_json, &rsp, &recs, &iov, &rb);
        ck_assert_uint_eq(recs.len, 184);
        T.c.rsp_rb = &rb;
        memset(&rd, 0, sizeof(rd));
        kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 150, 100,
                            &T.arena, &rd);
        ck_assert_msg(rd.outcome == KR_AN_DELIVER_CHANGED, "%s", rd.text);
        decode_w(&rd.w, true, KR_API_FETCH, 2, &out);
        pn = kr_node_get(kr_node_get(out.body, "Responses")->u.arr->items[0]
                             .u.node, "Partitions")->u.arr->items[0].u.node;
        rec = kr_node_get(pn, "Records");
        if (how[k] == KR_LEGACY_ZSTD_REFUSE) {
            ck_assert_int_eq(int_at(pn, "ErrorCode"),
                             KR_KERR_UNSUPPORTED_COMPRESSION_TYPE);
            ck_assert(rec->is_null || rec->u.rec.len == 0);
            ck_assert_uint_eq(rd.legacy_bad, 1);
            ck_assert_uint_eq(rd.legacy_st.zstd_recompressed, 0);
        } else {
            const uint8_t *b = rd.w.buf + rec->u.rec.off;

            ck_assert_int_eq(int_at(pn, "ErrorCode"), 0);
            ck_assert_uint_eq(rd.legacy_bad, 0);
            ck_assert_uint_eq(rd.legacy_st.zstd_recompressed, 1);
            ck_assert_uint_eq(rd.legacy_st.records_out, 4);
            /* one magic 1 gzip wrapper at the last offset, 203 */
            ck_assert_int_ge(rec->u.rec.len, 34);
            ck_assert_int_eq(b[7], 203);
            ck_assert_int_eq(b[16], 1);                 /* magic */
            ck_assert_int_eq(b[17] & 7, KR_COMPRESSION_GZIP);
        }
        kr_wbuf_free(&rd.w);
        kr_json_recbuf_free(&recs);
        T.c.rsp_rb = NULL;
    }
}
END_TEST

/* translate_legacy off: the same request answered 35, one line saying
   what to enable; a modern version passes. */
START_TEST(test_legacy_refused_when_off)
{
    struct kr_an_legacy_conf lc;
    struct kr_msg rsp;
    int16_t to = -1;

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.listener = "old";
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    ck_assert_int_eq(kr_analyse_legacy_route(&T.c, KR_API_PRODUCE, 2, &to),
                     KR_AN_LEGACY_REFUSE);
    ck_assert_int_eq(to, 3);
    ck_assert_int_eq(kr_analyse_legacy_route(&T.c, KR_API_PRODUCE, 3, &to),
                     KR_AN_LEGACY_PASS);
    ck_assert_int_eq(kr_analyse_legacy_route(&T.c, KR_API_METADATA, 0, &to),
                     KR_AN_LEGACY_PASS);
    request(PRODUCE(2, 1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_ANSWER);
    ck_assert(T.d.legacy);
    ck_assert(T.d.legacy_refusal);
    ck_assert_int_eq(T.d.error, KR_KERR_UNSUPPORTED_VERSION);
    ck_assert_ptr_nonnull(strstr(T.d.text, "translate_legacy = true on "
                                           "[listener old]"));
    decode_w(&T.d.w, true, KR_API_PRODUCE, 2, &rsp);
    ck_assert_int_eq(int_at(produce_partition(&rsp), "ErrorCode"),
                     KR_KERR_UNSUPPORTED_VERSION);
}
END_TEST

/* throttle inject: the response's ThrottleTimeMs is set, not held. */
START_TEST(test_throttle_response)
{
    struct kr_an_rsp_decision rd;
    struct kr_msg rsp, out;

    setup_rules("[rule slow]\napi = Produce\nthrottle_ms = 250\n");
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD);
    ck_assert_ptr_nonnull(T.d.req);
    ck_assert(!T.d.enforce_wait);           /* inject, not enforce */
    build(PRODUCE_RSP(9), &rsp);
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 60, 1000,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.outcome, KR_AN_DELIVER_CHANGED);
    ck_assert_int_eq(rd.delay_ms, 0);
    ck_assert(!rd.fault_close);
    ck_assert(T.d.req->actions & KR_AUDIT_THROTTLED);
    decode_w(&rd.w, true, KR_API_PRODUCE, 9, &out);
    ck_assert_int_eq(int_at(out.body, "ThrottleTimeMs"), 250);
    ck_assert_int_eq(int_at(produce_partition(&out), "BaseOffset"), 5);
    ck_assert_uint_eq(rd.rsp_bytes, KR_FRAME_PREFIX + rd.w.total);
    kr_wbuf_free(&rd.w);
}
END_TEST

/* throttle enforce for a client before KIP-219: the response is held. */
START_TEST(test_throttle_enforce_holds)
{
    struct kr_an_rsp_decision rd;
    struct kr_msg rsp;

    setup_rules("[rule slow]\napi = Produce\nthrottle_ms = 300\n"
                "throttle_mode = enforce\n");
    request(PRODUCE(3, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD);
    ck_assert(T.d.enforce_wait);
    build(PRODUCE_RSP(3), &rsp);
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 60, 1000,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.delay_ms, 300);     /* Produce v3 < KIP-219's v6 */
    ck_assert_int_eq(T.d.req->pause_ms, 0);
    ck_assert(T.d.req->actions & KR_AUDIT_DELAYED);
    kr_wbuf_free(&rd.w);
}
END_TEST

/* audit: one JSON line with the pair, formatted with the response. */
START_TEST(test_audit_line)
{
    struct kr_an_rsp_decision rd;
    struct kr_msg rsp;
    json_error_t je;
    json_t *j, *acts;

    setup_rules("[audit]\ntarget = syslog\n"
                "[rule watch]\napi = Produce\naudit = true\n");
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD);
    ck_assert_ptr_nonnull(T.d.req);
    ck_assert_ptr_nonnull(T.d.req->audit);
    ck_assert_ptr_null(T.d.req->audit_line);        /* not yet */
    build(PRODUCE_RSP(9), &rsp);
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 60, 1000,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.outcome, KR_AN_DELIVER);
    ck_assert_ptr_nonnull(T.d.req->audit_line);
    j = json_loads(T.d.req->audit_line, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", je.text, T.d.req->audit_line);
    ck_assert_str_eq(json_string_value(json_object_get(j, "client_addr")),
                     "192.0.2.7");
    ck_assert_int_eq(json_integer_value(json_object_get(j,
                                                        "correlation_id")),
                     7);
    ck_assert_int_eq(json_integer_value(json_object_get(j,
                                                        "response_bytes")),
                     60);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "request_bytes")),
                     KR_FRAME_PREFIX + 100);
    acts = json_object_get(j, "actions");
    ck_assert(json_is_array(acts));
    ck_assert_str_eq(json_string_value(json_array_get(acts, 0)),
                     "forwarded");
    /* who and where, as the connection gave them (issue 14) */
    ck_assert_str_eq(json_string_value(json_object_get(j, "instance")),
                     "test-host");
    ck_assert_str_eq(json_string_value(json_object_get(j, "conn_id")),
                     "c#0.1");
    ck_assert_str_eq(json_string_value(json_object_get(j, "route")),
                     "bootstrap");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "acks")), -1);
    ck_assert_ptr_null(json_object_get(j, "upstream_version"));
    json_decref(j);
}
END_TEST

/* audit with a clamp: the line says which version went upstream. */
START_TEST(test_audit_clamped_version)
{
    struct kr_an_rsp_decision rd;
    struct kr_msg rsp;
    json_t *j;

    setup_rules("[audit]\ntarget = syslog\n"
                "[rule old]\napi = Produce\nclamp_max_version = 7\n"
                "audit = true\n");
    request(PRODUCE(9, -1), true);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_TRANSLATED);
    build(PRODUCE_RSP(7), &rsp);
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 60, 1000,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.outcome, KR_AN_DELIVER_CHANGED);
    j = json_loads(T.d.req->audit_line, 0, NULL);
    ck_assert_msg(j != NULL, "%s", T.d.req->audit_line);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "api_version")),
                     9);
    ck_assert_int_eq(json_integer_value(json_object_get(j,
                                                        "upstream_version")),
                     7);
    json_decref(j);
    kr_wbuf_free(&rd.w);
}
END_TEST

/*
 * issue 10: a legacy-translated request's audit line: "translated" among
 * its actions, the client's api_version and the upstream_version it went
 * up as (doc/audit.md).
 */
START_TEST(test_audit_legacy_translated)
{
    static const char *const rsp_json =
        "{\"apiKey\":0,\"apiVersion\":3,\"header\":{\"CorrelationId\":"
        "-2147483648},\"body\":{\"Responses\":[{\"Name\":\"orders\","
        "\"PartitionResponses\":[{\"Index\":0,\"ErrorCode\":0,"
        "\"BaseOffset\":40,\"LogAppendTimeMs\":-1},{\"Index\":1,"
        "\"ErrorCode\":0,\"BaseOffset\":42,\"LogAppendTimeMs\":-1}]}],"
        "\"ThrottleTimeMs\":0}}";
    struct kr_an_legacy_conf lc;
    struct kr_an_rsp_decision rd;
    struct kr_json_recbuf recs;
    struct kr_msg rsp;
    struct iovec iov;
    struct kr_rbuf rb;
    json_t *j, *acts;
    bool translated = false, forwarded = false;
    size_t i;

    setup_rules("[audit]\ntarget = syslog\n[rule all]\napi = Produce\n"
                "audit = true\n");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.rec.max_uncompressed = 1 << 20;
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    legacy_produce_req("orders", 1, LEGACY_GOOD, &recs, &iov, &rb);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_FORWARD_TRANSLATED, "%s", T.d.text);
    build(rsp_json, &rsp);
    T.r.e.api_version = 2;
    memset(&rd, 0, sizeof(rd));
    kr_analyse_response(&T.c, &T.r.e, T.d.req, &rsp, NULL, 60, 1000,
                        &T.arena, &rd);
    ck_assert_int_eq(rd.outcome, KR_AN_DELIVER_CHANGED);
    ck_assert_ptr_nonnull(T.d.req->audit_line);
    j = json_loads(T.d.req->audit_line, 0, NULL);
    ck_assert_msg(j != NULL, "%s", T.d.req->audit_line);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "api_version")),
                     2);
    ck_assert_int_eq(json_integer_value(json_object_get(j,
                                                        "upstream_version")),
                     3);
    acts = json_object_get(j, "actions");
    ck_assert(json_is_array(acts));
    for (i = 0; i < json_array_size(acts); i++) {
        const char *a = json_string_value(json_array_get(acts, i));

        translated = translated || strcmp(a, "translated") == 0;
        forwarded = forwarded || strcmp(a, "forwarded") == 0;
    }
    ck_assert_msg(translated && forwarded, "%s", T.d.req->audit_line);
    json_decref(j);
    kr_wbuf_free(&rd.w);
    kr_json_recbuf_free(&recs);
}
END_TEST

/* Which responses may stream by for their audit line (issue 14): a
   Fetch or Produce its rules only audit; not with bodies, a throttle, a
   clamp that translates, nor another API. */
START_TEST(test_rsp_scan_only)
{
    struct kr_an_req *req = kr_an_req_new();
    struct kr_inflight e;

    ck_assert_ptr_nonnull(req);
    memset(&e, 0, sizeof(e));
    e.api_key = KR_API_FETCH;
    e.api_version = 11;
    req->up_version = 11;
    req->v.flags = KR_VF_AUDIT;
    ck_assert(kr_analyse_rsp_scan_only(&e, req));
    req->v.flags |= KR_VF_CLAMP;        /* clamped to its own version */
    ck_assert(kr_analyse_rsp_scan_only(&e, req));
    req->v.audit_body = true;
    ck_assert(!kr_analyse_rsp_scan_only(&e, req));
    req->v.audit_body = false;
    req->up_version = 10;
    ck_assert(!kr_analyse_rsp_scan_only(&e, req));
    req->up_version = 11;
    req->v.flags |= KR_VF_THROTTLE;
    ck_assert(!kr_analyse_rsp_scan_only(&e, req));
    req->v.flags = KR_VF_AUDIT | KR_VF_LATENCY;
    ck_assert(!kr_analyse_rsp_scan_only(&e, req));
    req->v.flags = KR_VF_DENY;
    ck_assert(!kr_analyse_rsp_scan_only(&e, req));
    req->v.flags = KR_VF_AUDIT;
    e.api_key = KR_API_PRODUCE;         /* its errors only */
    ck_assert(kr_analyse_rsp_scan_only(&e, req));
    e.api_key = KR_API_METADATA;
    ck_assert(!kr_analyse_rsp_scan_only(&e, req));
    ck_assert(!kr_analyse_rsp_scan_only(&e, NULL));
    kr_an_req_free(req);
}
END_TEST

/* A known request that does not decode, under an enforcing rule: a
   Produce response has no top-level ErrorCode, so it is refused. */
START_TEST(test_undecodable_refused)
{
    setup_rules("[rule no-orders]\napi = Produce\ntopic = orders\n"
                "deny = true\n");
    request(PRODUCE(9, -1), true);
    T.r.m = NULL;
    T.r.decode_error = "request does not decode: truncated";
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_REFUSE);
    ck_assert(T.d.refused);
    ck_assert_ptr_nonnull(strstr(T.d.text, "refused by [rule no-orders]"));
    ck_assert_ptr_nonnull(T.d.audit_now);   /* a sink exists */
    ck_assert_ptr_nonnull(strstr(T.d.audit_now, "\"refused\""));
}
END_TEST

/* The same under an observing rule only: forwarded unchanged. */
START_TEST(test_undecodable_observed)
{
    setup_rules("[audit]\ntarget = syslog\n"
                "[rule watch]\napi = Produce\naudit = true\n");
    request(PRODUCE(9, -1), true);
    T.r.m = NULL;
    T.r.decode_error = "request does not decode: truncated";
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_UNDECODED);
    ck_assert(T.d.undecodable);
    ck_assert_ptr_nonnull(T.d.req);
    ck_assert_str_eq(T.d.req->decode_error,
                     "request does not decode: truncated");
}
END_TEST

/*
 * issue 10: a Produce v2 (a version the brokers refuse) that does not
 * decode, translate_legacy on: not forwarded unchanged (the broker would
 * close on a version it does not accept, and krelay's line would blame
 * the upstream): closed after the responses owed, one line naming the
 * client and the fault.
 */
START_TEST(test_legacy_undecodable_closes)
{
    struct kr_an_legacy_conf lc;

    setup_rules("");
    memset(&lc, 0, sizeof(lc));
    lc.on = true;
    lc.listener = "old";
    lc.profile = KR_BROKER_PROFILE_KAFKA_4_0_0;
    T.c.legacy = &lc;
    request(PRODUCE(2, 1), true);
    T.r.m = NULL;
    T.r.decode_error = "request does not decode: records length 1000 past "
                       "end";
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_msg(T.d.outcome == KR_AN_CLOSE_AFTER_OWED, "%d %s",
                  T.d.outcome, T.d.text);
    ck_assert_ptr_nonnull(strstr(T.d.text, "Produce v2 CorrelationId 7 "
                                 "ClientId app"));
    ck_assert_ptr_nonnull(strstr(T.d.text, "records length 1000 past end"));
    /* without translation too: nothing decoded to answer */
    lc.on = false;
    kr_an_decision_free(&T.d);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_CLOSE_AFTER_OWED);
    /* the longest: the outcome whole in the session's close line */
    kr_an_decision_free(&T.d);
    T.h.api_key = KR_API_OFFSET_FOR_LEADER_EPOCH;
    T.h.api_version = 1;
    T.h.correlation_id = INT32_MIN;
    memset(T.h.client_id, 'c', KR_FRAME_CLIENT_ID_MAX);
    T.h.client_id[KR_FRAME_CLIENT_ID_MAX] = '\0';
    T.h.client_id_len = KR_FRAME_CLIENT_ID_MAX;
    T.r.decode_error = "request does not decode: records length 1000 past "
                       "end (5 bytes left) at TopicData[0].PartitionData[0]."
                       "Records, and then some more words to be long";
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_CLOSE_AFTER_OWED);
    ck_assert_msg(strlen(T.d.text) < KR_AN_CLOSE_TEXT_MAX, "%zu: %s",
                  strlen(T.d.text), T.d.text);
    ck_assert_msg(ends_with(T.d.text, "...; not forwarded, closing after "
                            "the responses owed"), "%s", T.d.text);
    ck_assert_ptr_nonnull(strstr(T.d.text, "OffsetForLeaderEpoch v1 "
                                 "CorrelationId -2147483648 ClientId cccc"));
    /* a version the brokers accept still fails open */
    request(PRODUCE(9, 1), true);
    T.r.m = NULL;
    T.r.decode_error = "request does not decode: truncated";
    kr_an_decision_free(&T.d);
    kr_analyse_request(&T.c, &T.r, &T.arena, &T.d);
    ck_assert_int_eq(T.d.outcome, KR_AN_FORWARD_UNDECODED);
}
END_TEST

static Suite *
analyse_suite(void)
{
    Suite *s = suite_create("analyse");
    TCase *tc = tcase_create("analyse");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_deny_answers);
    tcase_add_test(tc, test_deny_acks0_closes);
    tcase_add_test(tc, test_other_topic_forwards);
    tcase_add_test(tc, test_clamp_translates);
    tcase_add_test(tc, test_clamp_no_overlap_answers);
    tcase_add_test(tc, test_throttle_response);
    tcase_add_test(tc, test_throttle_enforce_holds);
    tcase_add_test(tc, test_audit_line);
    tcase_add_test(tc, test_audit_clamped_version);
    tcase_add_test(tc, test_audit_legacy_translated);
    tcase_add_test(tc, test_rsp_scan_only);
    tcase_add_test(tc, test_undecodable_refused);
    tcase_add_test(tc, test_undecodable_observed);
    tcase_add_test(tc, test_legacy_produce_up_and_back);
    tcase_add_test(tc, test_legacy_refused_when_off);
    tcase_add_test(tc, test_legacy_fetch_down);
    tcase_add_test(tc, test_legacy_fetch_zstd);
    tcase_add_test(tc, test_legacy_fetch_cap_rotate);
    tcase_add_test(tc, test_legacy_produce_many_bad);
    tcase_add_test(tc, test_legacy_produce_inflate_budget);
    tcase_add_test(tc, test_legacy_undecodable_closes);
    tcase_add_test(tc, test_legacy_produce_policy_codec);
    tcase_add_test(tc, test_legacy_produce_split_rounds);
    tcase_add_test(tc, test_legacy_produce_split_acks0);
    tcase_add_test(tc, test_legacy_produce_split_limits);
    tcase_add_test(tc, test_legacy_rounds_failed);
    tcase_add_test(tc, test_legacy_rounds_acks0_no_sent);
    tcase_add_test(tc, test_legacy_produce_empty_sets);
    tcase_add_test(tc, test_legacy_produce_acks0_partly_bad);
    tcase_add_test(tc, test_legacy_close_lines_fit);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(analyse_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
