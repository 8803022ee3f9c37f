/*
 * check_action.c - unit tests for src/kr_action.c: error responses built
 * from requests, deny defaults, ThrottleTimeMs, the KIP-219 table, error
 * replacement and counting, produce policy.
 *
 * Requests are written in the codec's JSON form (kr_json.h), encoded,
 * and decoded again, so every action sees a tree exactly like the proxy
 * gives it (strings are views into the frame).  Responses built by the
 * actions are encoded and decoded strictly before their values are
 * checked.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kr_action.h"
#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_json.h"
#include "kr_kerr.h"
#include "kr_test.h"

/* ---- helpers ------------------------------------------------------------- */

static struct kr_arena arena;
/* Frames the decoded trees borrow from; freed in teardown. */
static uint8_t *frames[64];
static unsigned nframes;

static void
setup(void)
{
    kr_arena_init(&arena, 0);
    nframes = 0;
}

static void release_frames(void);

static void
teardown(void)
{
    release_frames();
    kr_arena_free(&arena);
}

/* Free every kept frame (the trees decoded from them die too). */
static void
release_frames(void)
{
    unsigned i;

    for (i = 0; i < nframes; i++) {
        free(frames[i]);
    }
    nframes = 0;
}

static uint8_t *
keep(uint8_t *p)
{
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    frames[nframes++] = p;
    return p;
}

/* The value at path below n (kr_test.h). */
#define val_at(n, path) kr_test_val_at((n), (path))

/* True when the field at path exists at the node's version. */
static bool
present_at(const struct kr_node *n, const char *path)
{
    struct kr_val *v = val_at(n, path);

    return v != NULL && v->present;
}

static int64_t
int_at(const struct kr_node *n, const char *path)
{
    struct kr_val *v = val_at(n, path);

    ck_assert_msg(v != NULL, "no value at %s", path);
    return v->u.i;
}

static void
assert_str_at(const struct kr_node *n, const char *path, const char *want)
{
    struct kr_val *v = val_at(n, path);

    ck_assert_msg(v != NULL, "no value at %s", path);
    if (want == NULL) {
        ck_assert_msg(v->is_null, "%s: not null", path);
        return;
    }
    ck_assert_msg(!v->is_null, "%s: null, want %s", path, want);
    ck_assert_msg(v->u.s.len == (int32_t)strlen(want) &&
                  memcmp(v->u.s.p, want, strlen(want)) == 0,
                  "%s: '%.*s', want '%s'", path, (int)v->u.s.len,
                  (const char *)v->u.s.p, want);
}

static uint32_t
n_at(const struct kr_node *n, const char *path)
{
    struct kr_val *v = val_at(n, path);

    ck_assert_msg(v != NULL, "no value at %s", path);
    ck_assert_msg(!v->is_null && v->u.arr != NULL, "%s: null array", path);
    return v->u.arr->n;
}

/* Encode m (records from recs, may be NULL) into a malloc'd flat frame. */
static uint8_t *
encode_flat(const struct kr_msg *m, const struct kr_json_recbuf *recs,
            size_t *len)
{
    struct kr_wbuf w = { 0 };
    struct kr_codec_err err;
    uint8_t *out;
    int rc;

    rc = kr_encode_msg(m, &w, &err);
    ck_assert_msg(rc == KR_OK, "encode: %s at %s", err.msg, err.path);
    out = kr_wbuf_flatten(&w, recs != NULL ? recs->p : NULL,
                          recs != NULL ? recs->len : 0);
    ck_assert_ptr_nonnull(out);
    *len = w.total;
    kr_wbuf_free(&w);
    return keep(out);
}

/*
 * A decoded request from its JSON form.  frame and flen (may be NULL) give
 * the encoded payload the tree was decoded from.
 */
static void
req_from_json(const char *text, struct kr_msg *m, const uint8_t **frame,
              size_t *flen)
{
    struct kr_json_recbuf recs = { 0 };
    struct kr_codec_err err;
    struct kr_msg built;
    struct kr_rbuf rb;
    struct iovec iov;
    json_error_t jerr;
    json_t *j;
    uint8_t *p;
    size_t len;
    int rc;

    j = json_loads(text, 0, &jerr);
    ck_assert_msg(j != NULL, "json: %s", jerr.text);
    rc = kr_json_to_msg(&arena, j, &recs, &built, &err);
    ck_assert_msg(rc == KR_OK, "json_to_msg: %s at %s", err.msg, err.path);
    json_decref(j);
    p = encode_flat(&built, &recs, &len);
    kr_json_recbuf_free(&recs);
    kr_rbuf_init_flat(&rb, &iov, p, len);
    rc = kr_decode_request(&arena, &rb, KR_DEC_STRICT, m, &err);
    ck_assert_msg(rc == KR_OK, "decode request: %s at %s", err.msg,
                  err.path);
    if (frame != NULL) {
        *frame = p;
        *flen = len;
    }
}

/* Encode rsp and decode it back strictly as a response. */
static void
rsp_roundtrip(const struct kr_msg *rsp, struct kr_msg *out, uint8_t **bytes,
              size_t *blen)
{
    struct kr_codec_err err;
    struct kr_rbuf rb;
    struct iovec iov;
    uint8_t *p;
    size_t len;
    int rc;

    p = encode_flat(rsp, NULL, &len);
    kr_rbuf_init_flat(&rb, &iov, p, len);
    rc = kr_decode_response(&arena, &rb, rsp->api_key, rsp->api_version,
                            KR_DEC_STRICT, out, &err);
    ck_assert_msg(rc == KR_OK, "decode response %d v%d: %s at %s",
                  rsp->api_key, rsp->api_version, err.msg, err.path);
    if (bytes != NULL) {
        *bytes = p;
        *blen = len;
    }
}

/* Request JSON -> error response -> bytes -> decoded response. */
static void
deny(const char *req_json, int16_t error, struct kr_msg *out)
{
    struct kr_msg req, rsp;
    int rc;

    req_from_json(req_json, &req, NULL, NULL);
    rc = kr_action_error_response(&arena, &req, error, &rsp);
    ck_assert_msg(rc == KR_OK, "error response %d v%d: %d", req.api_key,
                  req.api_version, rc);
    ck_assert_int_eq(rsp.dir, KR_DIR_RESPONSE);
    ck_assert_int_eq(rsp.api_key, req.api_key);
    ck_assert_int_eq(rsp.api_version, req.api_version);
    ck_assert_int_eq(rsp.correlation_id, req.correlation_id);
    rsp_roundtrip(&rsp, out, NULL, NULL);
    ck_assert_int_eq(out->correlation_id, req.correlation_id);
}

#define HDR(key, ver) \
    "\"header\": {\"RequestApiKey\": " #key ", \"RequestApiVersion\": " \
    #ver ", \"CorrelationId\": 4242, \"ClientId\": \"t\"}"

static int64_t
rsp_int(const struct kr_msg *m, const char *path)
{
    return int_at(m->body, path);
}

/* ---- error responses: Produce and Fetch ------------------------------- */

START_TEST(test_produce_v9)
{
    struct kr_msg r;

    deny("{" HDR(0, 9) ", \"body\": {\"Acks\": -1, \"TimeoutMs\": 1000,"
         " \"TopicData\": ["
         "  {\"Name\": \"orders\", \"PartitionData\": ["
         "     {\"Index\": 0, \"Records\": null},"
         "     {\"Index\": 7, \"Records\": null}]},"
         "  {\"Name\": \"audit\", \"PartitionData\": ["
         "     {\"Index\": 3, \"Records\": null}]}]}}", 29, &r);
    ck_assert_int_eq(r.correlation_id, 4242);
    ck_assert_uint_eq(n_at(r.body, "Responses"), 2);
    assert_str_at(r.body, "Responses[0].Name", "orders");
    assert_str_at(r.body, "Responses[1].Name", "audit");
    ck_assert_uint_eq(n_at(r.body, "Responses[0].PartitionResponses"), 2);
    ck_assert_uint_eq(n_at(r.body, "Responses[1].PartitionResponses"), 1);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].PartitionResponses[0].Index"),
                     0);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].PartitionResponses[1].Index"),
                     7);
    ck_assert_int_eq(rsp_int(&r, "Responses[1].PartitionResponses[0].Index"),
                     3);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].PartitionResponses[1].ErrorCode"), 29);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[1].PartitionResponses[0].ErrorCode"), 29);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].PartitionResponses[0].BaseOffset"), -1);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].PartitionResponses[0].LogAppendTimeMs"),
        -1);
    assert_str_at(r.body, "Responses[0].PartitionResponses[0].ErrorMessage",
                  "TOPIC_AUTHORIZATION_FAILED");
    ck_assert_int_eq(rsp_int(&r, "ThrottleTimeMs"), 0);
}
END_TEST

START_TEST(test_produce_v3_v13)
{
    struct kr_msg r;

    deny("{" HDR(0, 3) ", \"body\": {\"Acks\": 1, \"TimeoutMs\": 1000,"
         " \"TopicData\": [{\"Name\": \"t1\", \"PartitionData\": ["
         "   {\"Index\": 2, \"Records\": null}]}]}}", 31, &r);
    assert_str_at(r.body, "Responses[0].Name", "t1");
    ck_assert_int_eq(rsp_int(&r, "Responses[0].PartitionResponses[0].Index"),
                     2);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].PartitionResponses[0].ErrorCode"), 31);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].PartitionResponses[0].BaseOffset"), -1);
    /* v3 has no ErrorMessage */
    ck_assert(!present_at(r.body,
                          "Responses[0].PartitionResponses[0].ErrorMessage"));

    /* v13 names topics by TopicId only */
    deny("{" HDR(0, 13) ", \"body\": {\"Acks\": -1, \"TimeoutMs\": 1000,"
         " \"TopicData\": [{\"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAQ\","
         "   \"PartitionData\": [{\"Index\": 5, \"Records\": null}]}]}}",
         29, &r);
    {
        struct kr_val *id = val_at(r.body, "Responses[0].TopicId");

        ck_assert_ptr_nonnull(id);
        ck_assert_int_eq(id->u.s.len, 16);
        ck_assert_int_eq(id->u.s.p[15], 1);
        ck_assert_int_eq(id->u.s.p[0], 0);
    }
    ck_assert_int_eq(rsp_int(&r, "Responses[0].PartitionResponses[0].Index"),
                     5);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].PartitionResponses[0].ErrorCode"), 29);
}
END_TEST

START_TEST(test_fetch_session)
{
    struct kr_msg r;

    /* v11 incremental fetch in session 123 epoch 5 */
    deny("{" HDR(1, 11) ", \"body\": {\"ReplicaId\": -1, \"MaxWaitMs\": 500,"
         " \"MinBytes\": 1, \"SessionId\": 123, \"SessionEpoch\": 5,"
         " \"Topics\": [{\"Topic\": \"logs\", \"Partitions\": ["
         "   {\"Partition\": 4, \"FetchOffset\": 100,"
         "    \"PartitionMaxBytes\": 1048576},"
         "   {\"Partition\": 9, \"FetchOffset\": 7,"
         "    \"PartitionMaxBytes\": 1048576}]}],"
         " \"ForgottenTopicsData\": [], \"RackId\": \"\"}}", 29, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 29);
    ck_assert_int_eq(rsp_int(&r, "SessionId"), 0);
    ck_assert_int_eq(rsp_int(&r, "ThrottleTimeMs"), 0);
    assert_str_at(r.body, "Responses[0].Topic", "logs");
    ck_assert_uint_eq(n_at(r.body, "Responses[0].Partitions"), 2);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[0].PartitionIndex"),
                     4);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[1].PartitionIndex"),
                     9);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[1].ErrorCode"), 29);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[0].HighWatermark"),
                     -1);
    ck_assert_int_eq(
        rsp_int(&r, "Responses[0].Partitions[0].PreferredReadReplica"), -1);
    ck_assert_int_eq(val_at(r.body, "Responses[0].Partitions[0].Records")
                         ->u.rec.len, 0);

    /* v4: no sessions, no top-level ErrorCode: partitions carry it */
    deny("{" HDR(1, 4) ", \"body\": {\"ReplicaId\": -1, \"MaxWaitMs\": 500,"
         " \"MinBytes\": 1, \"Topics\": [{\"Topic\": \"logs\","
         " \"Partitions\": [{\"Partition\": 1, \"FetchOffset\": 0,"
         " \"PartitionMaxBytes\": 100}]}]}}", 31, &r);
    ck_assert(!present_at(r.body, "SessionId"));
    ck_assert(!present_at(r.body, "ErrorCode"));
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[0].ErrorCode"), 31);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[0].PartitionIndex"),
                     1);

    /* v15 (topic ids): top-level error only, as Kafka from v13 on */
    deny("{" HDR(1, 15) ", \"body\": {\"MaxWaitMs\": 500, \"MinBytes\": 1,"
         " \"SessionId\": 77, \"SessionEpoch\": 12,"
         " \"Topics\": [{\"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAQ\","
         " \"Partitions\": [{\"Partition\": 0, \"FetchOffset\": 0,"
         " \"PartitionMaxBytes\": 100}]}]}}", 29, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 29);
    ck_assert_int_eq(rsp_int(&r, "SessionId"), 0);
    ck_assert_uint_eq(n_at(r.body, "Responses"), 0);
}
END_TEST

/* ---- error responses: admin APIs ---------------------------------------- */

START_TEST(test_create_delete_topics)
{
    struct kr_msg r;

    deny("{" HDR(19, 2) ", \"body\": {\"Topics\": ["
         " {\"Name\": \"a\", \"NumPartitions\": 3, \"ReplicationFactor\": 1,"
         "  \"Assignments\": [], \"Configs\": []},"
         " {\"Name\": \"bb\", \"NumPartitions\": 1, \"ReplicationFactor\": 1,"
         "  \"Assignments\": [], \"Configs\": []}],"
         " \"timeoutMs\": 1000}}", 31, &r);
    ck_assert_uint_eq(n_at(r.body, "Topics"), 2);
    assert_str_at(r.body, "Topics[1].Name", "bb");
    ck_assert_int_eq(rsp_int(&r, "Topics[0].ErrorCode"), 31);
    ck_assert_int_eq(rsp_int(&r, "Topics[1].ErrorCode"), 31);
    assert_str_at(r.body, "Topics[0].ErrorMessage",
                  "CLUSTER_AUTHORIZATION_FAILED");

    deny("{" HDR(19, 7) ", \"body\": {\"Topics\": ["
         " {\"Name\": \"a\", \"NumPartitions\": 3, \"ReplicationFactor\": 1,"
         "  \"Assignments\": [], \"Configs\": []}],"
         " \"timeoutMs\": 1000}}", 29, &r);
    assert_str_at(r.body, "Topics[0].Name", "a");
    ck_assert_int_eq(rsp_int(&r, "Topics[0].ErrorCode"), 29);
    ck_assert_int_eq(rsp_int(&r, "Topics[0].NumPartitions"), -1);
    ck_assert_int_eq(rsp_int(&r, "Topics[0].ReplicationFactor"), -1);

    /* DeleteTopics v1: TopicNames (strings) */
    deny("{" HDR(20, 1) ", \"body\": {\"TopicNames\": [\"x\", \"yy\"],"
         " \"TimeoutMs\": 100}}", 29, &r);
    ck_assert_uint_eq(n_at(r.body, "Responses"), 2);
    assert_str_at(r.body, "Responses[0].Name", "x");
    assert_str_at(r.body, "Responses[1].Name", "yy");
    ck_assert_int_eq(rsp_int(&r, "Responses[1].ErrorCode"), 29);

    /* DeleteTopics v6: Topics [{Name (nullable), TopicId}] */
    deny("{" HDR(20, 6) ", \"body\": {\"Topics\": ["
         " {\"Name\": \"x\", \"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAA\"},"
         " {\"Name\": null, \"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAg\"}],"
         " \"TimeoutMs\": 100}}", 29, &r);
    assert_str_at(r.body, "Responses[0].Name", "x");
    assert_str_at(r.body, "Responses[1].Name", NULL);
    ck_assert_int_eq(val_at(r.body, "Responses[1].TopicId")->u.s.p[15], 2);
    ck_assert_int_eq(rsp_int(&r, "Responses[1].ErrorCode"), 29);
    assert_str_at(r.body, "Responses[1].ErrorMessage",
                  "TOPIC_AUTHORIZATION_FAILED");
}
END_TEST

START_TEST(test_records_partitions)
{
    struct kr_msg r;
    int v;

    for (v = 0; v <= 2; v += 2) {
        char buf[512];

        snprintf(buf, sizeof(buf),
                 "{\"header\": {\"RequestApiKey\": 21, \"RequestApiVersion\":"
                 " %d, \"CorrelationId\": 9}, \"body\": {\"Topics\": ["
                 " {\"Name\": \"t\", \"Partitions\": ["
                 "  {\"PartitionIndex\": 0, \"Offset\": 5},"
                 "  {\"PartitionIndex\": 2, \"Offset\": 5}]}],"
                 " \"TimeoutMs\": 10}}", v);
        deny(buf, 29, &r);
        assert_str_at(r.body, "Topics[0].Name", "t");
        ck_assert_int_eq(rsp_int(&r, "Topics[0].Partitions[1].PartitionIndex"),
                         2);
        ck_assert_int_eq(rsp_int(&r, "Topics[0].Partitions[1].ErrorCode"), 29);
        ck_assert_int_eq(rsp_int(&r, "Topics[0].Partitions[0].LowWatermark"),
                         -1);
    }
    for (v = 0; v <= 3; v += 3) {
        char buf[512];

        snprintf(buf, sizeof(buf),
                 "{\"header\": {\"RequestApiKey\": 37, \"RequestApiVersion\":"
                 " %d, \"CorrelationId\": 9}, \"body\": {\"Topics\": ["
                 " {\"Name\": \"p1\", \"Count\": 4, \"Assignments\": null},"
                 " {\"Name\": \"p2\", \"Count\": 4, \"Assignments\": null}],"
                 " \"TimeoutMs\": 10, \"ValidateOnly\": false}}", v);
        deny(buf, 29, &r);
        ck_assert_uint_eq(n_at(r.body, "Results"), 2);
        assert_str_at(r.body, "Results[1].Name", "p2");
        ck_assert_int_eq(rsp_int(&r, "Results[1].ErrorCode"), 29);
        assert_str_at(r.body, "Results[1].ErrorMessage",
                      "TOPIC_AUTHORIZATION_FAILED");
    }
}
END_TEST

START_TEST(test_configs)
{
    struct kr_msg r;
    int key, v;

    for (key = 33; key <= 44; key += 11) {
        for (v = 0; v <= (key == 33 ? 2 : 1); v += (key == 33 ? 2 : 1)) {
            char buf[512];

            snprintf(buf, sizeof(buf),
                     "{\"header\": {\"RequestApiKey\": %d, "
                     "\"RequestApiVersion\": %d, \"CorrelationId\": 9},"
                     " \"body\": {\"Resources\": ["
                     " {\"ResourceType\": 2, \"ResourceName\": \"topic-a\","
                     "  \"Configs\": []},"
                     " {\"ResourceType\": 4, \"ResourceName\": \"1\","
                     "  \"Configs\": []}], \"ValidateOnly\": false}}",
                     key, v);
            deny(buf, 31, &r);
            ck_assert_uint_eq(n_at(r.body, "Responses"), 2);
            ck_assert_int_eq(rsp_int(&r, "Responses[0].ResourceType"), 2);
            assert_str_at(r.body, "Responses[0].ResourceName", "topic-a");
            ck_assert_int_eq(rsp_int(&r, "Responses[1].ResourceType"), 4);
            assert_str_at(r.body, "Responses[1].ResourceName", "1");
            ck_assert_int_eq(rsp_int(&r, "Responses[1].ErrorCode"), 31);
            assert_str_at(r.body, "Responses[1].ErrorMessage",
                          "CLUSTER_AUTHORIZATION_FAILED");
        }
    }
}
END_TEST

START_TEST(test_groups_acls)
{
    struct kr_msg r;
    int v;

    for (v = 0; v <= 2; v += 2) {
        char buf[512];

        snprintf(buf, sizeof(buf),
                 "{\"header\": {\"RequestApiKey\": 42, \"RequestApiVersion\":"
                 " %d, \"CorrelationId\": 9}, \"body\": {\"GroupsNames\":"
                 " [\"g1\", \"g2\", \"g3\"]}}", v);
        deny(buf, 30, &r);
        ck_assert_uint_eq(n_at(r.body, "Results"), 3);
        assert_str_at(r.body, "Results[2].GroupId", "g3");
        ck_assert_int_eq(rsp_int(&r, "Results[0].ErrorCode"), 30);
        ck_assert_int_eq(rsp_int(&r, "Results[2].ErrorCode"), 30);
    }
    for (v = 1; v <= 3; v += 2) {
        char buf[1024];

        snprintf(buf, sizeof(buf),
                 "{\"header\": {\"RequestApiKey\": 29, \"RequestApiVersion\":"
                 " %d, \"CorrelationId\": 9}, \"body\": {"
                 " \"ResourceTypeFilter\": 1, \"ResourceNameFilter\": null,"
                 " \"PrincipalFilter\": null, \"HostFilter\": null,"
                 " \"Operation\": 1, \"PermissionType\": 1}}", v);
        deny(buf, 31, &r);
        ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 31);
        assert_str_at(r.body, "ErrorMessage", "CLUSTER_AUTHORIZATION_FAILED");
        ck_assert_uint_eq(n_at(r.body, "Resources"), 0);

        snprintf(buf, sizeof(buf),
                 "{\"header\": {\"RequestApiKey\": 30, \"RequestApiVersion\":"
                 " %d, \"CorrelationId\": 9}, \"body\": {\"Creations\": ["
                 " {\"ResourceType\": 2, \"ResourceName\": \"t\","
                 "  \"Principal\": \"User:a\", \"Host\": \"*\","
                 "  \"Operation\": 3, \"PermissionType\": 3},"
                 " {\"ResourceType\": 2, \"ResourceName\": \"u\","
                 "  \"Principal\": \"User:b\", \"Host\": \"*\","
                 "  \"Operation\": 3, \"PermissionType\": 3}]}}", v);
        deny(buf, 31, &r);
        ck_assert_uint_eq(n_at(r.body, "Results"), 2);
        ck_assert_int_eq(rsp_int(&r, "Results[1].ErrorCode"), 31);
        assert_str_at(r.body, "Results[1].ErrorMessage",
                      "CLUSTER_AUTHORIZATION_FAILED");

        snprintf(buf, sizeof(buf),
                 "{\"header\": {\"RequestApiKey\": 31, \"RequestApiVersion\":"
                 " %d, \"CorrelationId\": 9}, \"body\": {\"Filters\": ["
                 " {\"ResourceTypeFilter\": 1, \"ResourceNameFilter\": null,"
                 "  \"PrincipalFilter\": null, \"HostFilter\": null,"
                 "  \"Operation\": 1, \"PermissionType\": 1}]}}", v);
        deny(buf, 31, &r);
        ck_assert_uint_eq(n_at(r.body, "FilterResults"), 1);
        ck_assert_int_eq(rsp_int(&r, "FilterResults[0].ErrorCode"), 31);
        ck_assert_uint_eq(n_at(r.body, "FilterResults[0].MatchingAcls"), 0);
    }
}
END_TEST

START_TEST(test_elect_reassign)
{
    struct kr_msg r;

    deny("{" HDR(43, 0) ", \"body\": {\"TopicPartitions\": ["
         " {\"Topic\": \"e\", \"Partitions\": [0, 5]}], \"TimeoutMs\": 10}}",
         31, &r);
    assert_str_at(r.body, "ReplicaElectionResults[0].Topic", "e");
    ck_assert_uint_eq(n_at(r.body, "ReplicaElectionResults[0].PartitionResult"),
                      2);
    ck_assert_int_eq(
        rsp_int(&r, "ReplicaElectionResults[0].PartitionResult[1].PartitionId"),
        5);
    ck_assert_int_eq(
        rsp_int(&r, "ReplicaElectionResults[0].PartitionResult[1].ErrorCode"),
        31);

    deny("{" HDR(43, 2) ", \"body\": {\"ElectionType\": 0,"
         " \"TopicPartitions\": [{\"Topic\": \"e\", \"Partitions\": [3]}],"
         " \"TimeoutMs\": 10}}", 29, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 29);
    ck_assert_int_eq(
        rsp_int(&r, "ReplicaElectionResults[0].PartitionResult[0].PartitionId"),
        3);
    ck_assert_int_eq(
        rsp_int(&r, "ReplicaElectionResults[0].PartitionResult[0].ErrorCode"),
        29);
    assert_str_at(r.body,
                  "ReplicaElectionResults[0].PartitionResult[0].ErrorMessage",
                  "TOPIC_AUTHORIZATION_FAILED");

    /* null TopicPartitions (every partition): top-level error only */
    deny("{" HDR(43, 2) ", \"body\": {\"ElectionType\": 0,"
         " \"TopicPartitions\": null, \"TimeoutMs\": 10}}", 31, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 31);
    ck_assert_uint_eq(n_at(r.body, "ReplicaElectionResults"), 0);

    deny("{" HDR(45, 0) ", \"body\": {\"TimeoutMs\": 10, \"Topics\": ["
         " {\"Name\": \"r\", \"Partitions\": ["
         "  {\"PartitionIndex\": 1, \"Replicas\": [1, 2]},"
         "  {\"PartitionIndex\": 6, \"Replicas\": null}]}]}}", 31, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 31);
    assert_str_at(r.body, "ErrorMessage", "CLUSTER_AUTHORIZATION_FAILED");
    assert_str_at(r.body, "Responses[0].Name", "r");
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[1].PartitionIndex"),
                     6);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[1].ErrorCode"), 31);

    deny("{" HDR(45, 1) ", \"body\": {\"TimeoutMs\": 10,"
         " \"AllowReplicationFactorChange\": false, \"Topics\": ["
         " {\"Name\": \"r\", \"Partitions\": ["
         "  {\"PartitionIndex\": 2, \"Replicas\": [1]}]}]}}", 29, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 29);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[0].PartitionIndex"),
                     2);
    ck_assert_int_eq(rsp_int(&r, "Responses[0].Partitions[0].ErrorCode"), 29);
}
END_TEST

START_TEST(test_top_level_only)
{
    struct kr_msg r, req;
    struct kr_msg rsp;

    /* Heartbeat: ThrottleTimeMs + ErrorCode (computed from the tables) */
    deny("{" HDR(12, 4) ", \"body\": {\"GroupId\": \"g\","
         " \"GenerationId\": 1, \"MemberId\": \"m\","
         " \"GroupInstanceId\": null}}", 30, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 30);
    ck_assert_int_eq(rsp_int(&r, "ThrottleTimeMs"), 0);
    deny("{" HDR(12, 0) ", \"body\": {\"GroupId\": \"g\","
         " \"GenerationId\": 1, \"MemberId\": \"m\"}}", 30, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 30);
    ck_assert(kr_action_error_response_supported(KR_API_ADD_OFFSETS_TO_TXN,
                                                 0));
    ck_assert(kr_action_error_response_supported(KR_API_END_TXN, 3));

    /* FindCoordinator v0: NodeId/Port -1; v4: one Coordinator per key */
    deny("{" HDR(10, 0) ", \"body\": {\"Key\": \"g\"}}", 30, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 30);
    ck_assert_int_eq(rsp_int(&r, "NodeId"), -1);
    ck_assert_int_eq(rsp_int(&r, "Port"), -1);
    deny("{" HDR(10, 4) ", \"body\": {\"KeyType\": 0,"
         " \"CoordinatorKeys\": [\"g1\", \"g2\"]}}", 30, &r);
    ck_assert_uint_eq(n_at(r.body, "Coordinators"), 2);
    assert_str_at(r.body, "Coordinators[1].Key", "g2");
    ck_assert_int_eq(rsp_int(&r, "Coordinators[1].ErrorCode"), 30);
    ck_assert_int_eq(rsp_int(&r, "Coordinators[1].NodeId"), -1);

    /* InitProducerId: ProducerId and ProducerEpoch -1 */
    deny("{" HDR(22, 4) ", \"body\": {\"TransactionalId\": \"tx\","
         " \"TransactionTimeoutMs\": 1000, \"ProducerId\": -1,"
         " \"ProducerEpoch\": -1}}", 53, &r);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 53);
    ck_assert_int_eq(rsp_int(&r, "ProducerId"), -1);
    ck_assert_int_eq(rsp_int(&r, "ProducerEpoch"), -1);
    /* DescribeLogDirs: only from v3, where the response has ErrorCode */
    ck_assert(!kr_action_error_response_supported(KR_API_DESCRIBE_LOG_DIRS,
                                                  2));
    ck_assert(kr_action_error_response_supported(KR_API_DESCRIBE_LOG_DIRS,
                                                 3));

    /* An API without a mirror and with more than a top-level error */
    req_from_json("{" HDR(61, 0) ", \"body\": {\"Topics\": ["
                  " {\"Name\": \"t\", \"PartitionIndexes\": [0]}]}}",
                  &req, NULL, NULL);
    ck_assert_int_eq(kr_action_error_response(&arena, &req, 29, &rsp),
                     KR_EUNSUPPORTED);
    ck_assert(!kr_action_error_response_supported(KR_API_DESCRIBE_PRODUCERS,
                                                  0));
    ck_assert(!kr_action_error_response_supported(-1, 0));
    ck_assert(!kr_action_error_response_supported(KR_API_PRODUCE, 99));
    /* a response is not a request */
    req.dir = KR_DIR_RESPONSE;
    ck_assert_int_eq(kr_action_error_response(&arena, &req, 29, &rsp),
                     KR_EPROTO);
}
END_TEST

/*
 * Every (ApiKey, version) the module claims to answer: an error response
 * to a default request encodes, decodes strictly, and carries the error
 * in its top-level ErrorCode when it has one.
 */
START_TEST(test_sweep_supported)
{
    int16_t k;
    unsigned supported = 0, top = 0;

    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *a = kr_api_get(k);
        int16_t v;

        if (a == NULL) {
            continue;
        }
        for (v = a->valid.lo; v <= a->valid.hi; v++) {
            struct kr_msg req, rsp, back;
            struct kr_val *ec;
            uint16_t rq = kr_api_root(a, false, v);
            int rc;

            if (rq == KR_NO_STRUCT) {
                continue;
            }
            memset(&req, 0, sizeof(req));
            req.dir = KR_DIR_REQUEST;
            req.api_key = k;
            req.api_version = v;
            req.correlation_id = 1000 + k;
            req.body = kr_node_new(&arena, rq, v);
            ck_assert_ptr_nonnull(req.body);
            rc = kr_action_error_response(&arena, &req, 31, &rsp);
            if (!kr_action_error_response_supported(k, v)) {
                ck_assert_msg(rc == KR_EUNSUPPORTED, "%s v%d: %d", a->name,
                              v, rc);
                continue;
            }
            ck_assert_msg(rc == KR_OK, "%s v%d: %d", a->name, v, rc);
            supported++;
            rsp_roundtrip(&rsp, &back, NULL, NULL);
            ck_assert_int_eq(back.correlation_id, 1000 + k);
            ec = kr_node_get(back.body, "ErrorCode");
            if (ec != NULL && ec->present) {
                ck_assert_msg(ec->u.i == 31, "%s v%d: ErrorCode %d",
                              a->name, v, (int)ec->u.i);
                top++;
            }
            release_frames();
        }
        kr_arena_reset(&arena);
    }
    /* The required list alone has more than 60 versions. */
    ck_assert_uint_gt(supported, 100);
    ck_assert_uint_gt(top, 40);
}
END_TEST

/* ---- deny defaults and KIP-219 ----------------------------------------- */

START_TEST(test_deny_error)
{
    ck_assert_int_eq(kr_action_deny_error(KR_API_PRODUCE), 29);
    ck_assert_int_eq(kr_action_deny_error(KR_API_FETCH), 29);
    ck_assert_int_eq(kr_action_deny_error(KR_API_METADATA), 29);
    ck_assert_int_eq(kr_action_deny_error(KR_API_CREATE_TOPICS), 29);
    ck_assert_int_eq(kr_action_deny_error(KR_API_DELETE_RECORDS), 29);
    /* authorized on the cluster although it names topics */
    ck_assert_int_eq(kr_action_deny_error(KR_API_ELECT_LEADERS), 31);
    ck_assert_int_eq(
        kr_action_deny_error(KR_API_ALTER_PARTITION_REASSIGNMENTS), 31);
    ck_assert_int_eq(kr_action_deny_error(KR_API_WRITE_TXN_MARKERS), 31);
    /* brokers check the group before the topics */
    ck_assert_int_eq(kr_action_deny_error(KR_API_OFFSET_COMMIT), 30);
    ck_assert_int_eq(kr_action_deny_error(KR_API_OFFSET_FETCH), 30);
    ck_assert_int_eq(kr_action_deny_error(KR_API_OFFSET_DELETE), 30);
    ck_assert_int_eq(
        kr_action_deny_error(KR_API_CONSUMER_GROUP_HEARTBEAT), 30);
    /* ... and the transactional id before the group or the topics */
    ck_assert_int_eq(kr_action_deny_error(KR_API_ADD_OFFSETS_TO_TXN), 53);
    ck_assert_int_eq(kr_action_deny_error(KR_API_TXN_OFFSET_COMMIT), 53);
    ck_assert_int_eq(kr_action_deny_error(KR_API_ADD_PARTITIONS_TO_TXN), 53);
    /* FindCoordinator without its request: KeyType 0 (group) */
    ck_assert_int_eq(kr_action_deny_error(KR_API_FIND_COORDINATOR), 30);
    ck_assert_int_eq(kr_action_deny_error(KR_API_JOIN_GROUP), 30);
    ck_assert_int_eq(kr_action_deny_error(KR_API_HEARTBEAT), 30);
    ck_assert_int_eq(kr_action_deny_error(KR_API_DELETE_GROUPS), 30);
    ck_assert_int_eq(kr_action_deny_error(KR_API_INIT_PRODUCER_ID), 53);
    ck_assert_int_eq(kr_action_deny_error(KR_API_END_TXN), 53);
    ck_assert_int_eq(kr_action_deny_error(KR_API_DESCRIBE_ACLS), 31);
    ck_assert_int_eq(kr_action_deny_error(KR_API_CREATE_ACLS), 31);
    ck_assert_int_eq(kr_action_deny_error(KR_API_ALTER_CONFIGS), 31);
    ck_assert_int_eq(kr_action_deny_error(KR_API_API_VERSIONS), 31);
    ck_assert_int_eq(kr_action_deny_error(-3), 31);
    ck_assert_int_eq(kr_action_deny_error(30000), 31);
}
END_TEST

/* The default deny error of one request, then its error response. */
static int16_t
deny_for(const char *req_json, struct kr_msg *out)
{
    struct kr_msg req;
    int16_t e;

    req_from_json(req_json, &req, NULL, NULL);
    e = kr_action_deny_error_for(&req);
    if (out != NULL) {
        struct kr_msg rsp;

        ck_assert_int_eq(kr_action_error_response(&arena, &req, e, &rsp),
                         KR_OK);
        rsp_roundtrip(&rsp, out, NULL, NULL);
    }
    return e;
}

START_TEST(test_deny_error_for)
{
    struct kr_msg r;
    char buf[512];
    int kt;

    /* FindCoordinator: as KafkaApis.getCoordinator, per KeyType */
    for (kt = 0; kt <= 2; kt++) {
        static const int16_t want[] = { 30, 53, 31 };

        snprintf(buf, sizeof(buf), "{" HDR(10, 2) ", \"body\": {"
                 "\"Key\": \"g1\", \"KeyType\": %d}}", kt);
        ck_assert_int_eq(deny_for(buf, &r), want[kt]);
        ck_assert_int_eq(rsp_int(&r, "ErrorCode"), want[kt]);
        ck_assert_int_eq(rsp_int(&r, "NodeId"), -1);
        snprintf(buf, sizeof(buf), "{" HDR(10, 4) ", \"body\": {"
                 "\"KeyType\": %d, \"CoordinatorKeys\": [\"a\", "
                 "\"b\"]}}", kt);
        ck_assert_int_eq(deny_for(buf, &r), want[kt]);
        ck_assert_uint_eq(n_at(r.body, "Coordinators"), 2);
        ck_assert_int_eq(rsp_int(&r, "Coordinators[1].ErrorCode"),
                         want[kt]);
    }
    /* v0 has no KeyType: a group */
    ck_assert_int_eq(deny_for("{" HDR(10, 0) ", \"body\": {"
                              "\"Key\": \"g1\"}}", NULL), 30);
    /* Produce: the TransactionalId is checked first */
    ck_assert_int_eq(deny_for("{" HDR(0, 9) ", \"body\": {"
                              "\"TransactionalId\": \"tx\", \"Acks\": -1,"
                              " \"TimeoutMs\": 1000, \"TopicData\": []}}",
                              NULL), 53);
    ck_assert_int_eq(deny_for("{" HDR(0, 9) ", \"body\": {"
                              "\"TransactionalId\": null, \"Acks\": -1,"
                              " \"TimeoutMs\": 1000, \"TopicData\": []}}",
                              NULL), 29);
    /* InitProducerId: idempotent (no TransactionalId) is a cluster ACL */
    ck_assert_int_eq(deny_for("{" HDR(22, 4) ", \"body\": {"
                              "\"TransactionalId\": null, "
                              "\"TransactionTimeoutMs\": 1000}}", &r), 31);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 31);
    ck_assert_int_eq(deny_for("{" HDR(22, 4) ", \"body\": {"
                              "\"TransactionalId\": \"tx\", "
                              "\"TransactionTimeoutMs\": 1000}}", NULL), 53);
    /* AddOffsetsToTxn: transactional id before the group */
    ck_assert_int_eq(deny_for("{" HDR(25, 3) ", \"body\": {"
                              "\"TransactionalId\": \"tx\", "
                              "\"ProducerId\": 1, \"ProducerEpoch\": 0, "
                              "\"GroupId\": \"g\"}}", &r), 53);
    ck_assert_int_eq(rsp_int(&r, "ErrorCode"), 53);
    /* others: the API's default */
    ck_assert_int_eq(deny_for("{" HDR(12, 4) ", \"body\": {"
                              "\"GroupId\": \"g\", \"GenerationId\": 1,"
                              " \"MemberId\": \"m\", "
                              "\"GroupInstanceId\": null}}", NULL), 30);
    ck_assert_int_eq(kr_action_deny_error_for(NULL), 31);
}
END_TEST

START_TEST(test_kip219)
{
    ck_assert_int_eq(kr_action_kip219_version(KR_API_PRODUCE), 6);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_FETCH), 8);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_METADATA), 6);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_LIST_OFFSETS), 3);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_DELETE_TOPICS), 2);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_CREATE_TOPICS), 3);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_CREATE_ACLS), 1);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_DELETE_GROUPS), 1);
    /* newer APIs: from the first version with ThrottleTimeMs */
    ck_assert_int_eq(kr_action_kip219_version(
                         KR_API_INCREMENTAL_ALTER_CONFIGS), 0);
    ck_assert_int_eq(kr_action_kip219_version(
                         KR_API_OFFSET_FOR_LEADER_EPOCH), 2);
    ck_assert_int_eq(kr_action_kip219_version(
                         KR_API_CONSUMER_GROUP_HEARTBEAT), 0);
    /* never: no ThrottleTimeMs at all */
    ck_assert_int_eq(kr_action_kip219_version(KR_API_SASL_HANDSHAKE),
                     INT16_MAX);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_SASL_AUTHENTICATE),
                     INT16_MAX);
    ck_assert_int_eq(kr_action_kip219_version(KR_API_LEADER_AND_ISR),
                     INT16_MAX);
    ck_assert_int_eq(kr_action_kip219_version(-1), INT16_MAX);
    ck_assert_int_eq(kr_action_kip219_version(9999), INT16_MAX);
}
END_TEST

/* ---- ThrottleTimeMs ----------------------------------------------------- */

static int32_t
be32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                     (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

/* A decoded response built from JSON (then encoded and decoded). */
static void
rsp_from_json(const char *text, struct kr_msg *m)
{
    struct kr_json_recbuf recs = { 0 };
    struct kr_codec_err err;
    struct kr_msg built;
    json_error_t jerr;
    json_t *j;
    int rc;

    j = json_loads(text, 0, &jerr);
    ck_assert_msg(j != NULL, "json: %s", jerr.text);
    rc = kr_json_to_msg(&arena, j, &recs, &built, &err);
    ck_assert_msg(rc == KR_OK, "json_to_msg: %s at %s", err.msg, err.path);
    json_decref(j);
    kr_json_recbuf_free(&recs);
    rsp_roundtrip(&built, m, NULL, NULL);
}

START_TEST(test_throttle_produce_last)
{
    struct kr_msg m, back;
    uint8_t *b;
    size_t len;
    int32_t now = -7;

    /* v9 (flexible): ThrottleTimeMs is the last field before the tags */
    rsp_from_json("{\"apiKey\": 0, \"apiVersion\": 9, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"Responses\": ["
                  " {\"Name\": \"t\", \"PartitionResponses\": ["
                  "  {\"Index\": 0, \"ErrorCode\": 0, \"BaseOffset\": 10}]}],"
                  " \"ThrottleTimeMs\": 20}}", &m);
    ck_assert(kr_action_throttle(&m, 1000, false, &now));
    ck_assert_int_eq(now, 1000);
    rsp_roundtrip(&m, &back, &b, &len);
    ck_assert_uint_gt(len, 5);
    ck_assert_int_eq(be32(b + len - 5), 1000);
    ck_assert_int_eq(b[len - 1], 0);         /* empty tag buffer */
    ck_assert(kr_action_throttle(&m, 250, true, &now));
    ck_assert_int_eq(now, 1250);
    rsp_roundtrip(&m, &back, &b, &len);
    ck_assert_int_eq(be32(b + len - 5), 1250);
    ck_assert_int_eq(rsp_int(&back, "ThrottleTimeMs"), 1250);
    /* saturation */
    ck_assert(kr_action_throttle(&m, INT32_MAX - 5, false, &now));
    ck_assert(kr_action_throttle(&m, 100, true, &now));
    ck_assert_int_eq(now, INT32_MAX);
    rsp_roundtrip(&m, &back, &b, &len);
    ck_assert_int_eq(be32(b + len - 5), INT32_MAX);
    ck_assert(kr_action_throttle(&m, -5, false, &now));
    ck_assert_int_eq(now, 0);

    /* v3 (classic): the last four bytes */
    rsp_from_json("{\"apiKey\": 0, \"apiVersion\": 3, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"Responses\": ["
                  " {\"Name\": \"t\", \"PartitionResponses\": ["
                  "  {\"Index\": 0, \"ErrorCode\": 0, \"BaseOffset\": 10}]}],"
                  " \"ThrottleTimeMs\": 20}}", &m);
    ck_assert(kr_action_throttle(&m, 30, true, &now));
    ck_assert_int_eq(now, 50);
    rsp_roundtrip(&m, &back, &b, &len);
    ck_assert_int_eq(be32(b + len - 4), 50);

    /* v0 has no ThrottleTimeMs */
    rsp_from_json("{\"apiKey\": 0, \"apiVersion\": 0, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"Responses\": []}}",
                  &m);
    now = 77;
    ck_assert(!kr_action_throttle(&m, 30, false, &now));
    ck_assert_int_eq(now, 77);
}
END_TEST

START_TEST(test_throttle_metadata_first)
{
    struct kr_msg m, back;
    uint8_t *b;
    size_t len;
    int32_t now;

    /* v5 (classic): header is CorrelationId, then ThrottleTimeMs */
    rsp_from_json("{\"apiKey\": 3, \"apiVersion\": 5, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"ThrottleTimeMs\": 3,"
                  " \"Brokers\": [], \"ClusterId\": \"c\","
                  " \"ControllerId\": 1, \"Topics\": []}}", &m);
    ck_assert(kr_action_throttle(&m, 400, true, &now));
    ck_assert_int_eq(now, 403);
    rsp_roundtrip(&m, &back, &b, &len);
    ck_assert_int_eq(be32(b), 5);
    ck_assert_int_eq(be32(b + 4), 403);

    /* v12 (flexible): header has a tag byte after CorrelationId */
    rsp_from_json("{\"apiKey\": 3, \"apiVersion\": 12, \"header\":"
                  " {\"CorrelationId\": 6}, \"body\": {\"ThrottleTimeMs\": 0,"
                  " \"Brokers\": [], \"ClusterId\": null,"
                  " \"ControllerId\": 1, \"Topics\": []}}", &m);
    ck_assert(kr_action_throttle(&m, 90, false, &now));
    rsp_roundtrip(&m, &back, &b, &len);
    ck_assert_int_eq(be32(b), 6);
    ck_assert_int_eq(b[4], 0);
    ck_assert_int_eq(be32(b + 5), 90);

    /* Metadata v0 has none */
    rsp_from_json("{\"apiKey\": 3, \"apiVersion\": 0, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"Brokers\": [],"
                  " \"Topics\": []}}", &m);
    ck_assert(!kr_action_throttle(&m, 90, false, NULL));
}
END_TEST

/* ---- replace and count -------------------------------------------------- */

struct counted {
    int16_t code[8];
    unsigned n[8];
    unsigned calls;
};

static void
count_cb(void *arg, int16_t error, unsigned n)
{
    struct counted *c = arg;

    ck_assert_uint_lt(c->calls, 8);
    c->code[c->calls] = error;
    c->n[c->calls] = n;
    c->calls++;
}

static unsigned
counted_for(const struct counted *c, int16_t code)
{
    unsigned i;

    for (i = 0; i < c->calls; i++) {
        if (c->code[i] == code) {
            return c->n[i];
        }
    }
    return 0;
}

START_TEST(test_replace_count)
{
    struct kr_msg m, back;
    struct counted c;

    rsp_from_json("{\"apiKey\": 0, \"apiVersion\": 9, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"Responses\": ["
                  " {\"Name\": \"t\", \"PartitionResponses\": ["
                  "  {\"Index\": 0, \"ErrorCode\": 0, \"BaseOffset\": 10},"
                  "  {\"Index\": 1, \"ErrorCode\": 6, \"BaseOffset\": -1},"
                  "  {\"Index\": 2, \"ErrorCode\": 6, \"BaseOffset\": -1}]},"
                  " {\"Name\": \"u\", \"PartitionResponses\": ["
                  "  {\"Index\": 0, \"ErrorCode\": 3, \"BaseOffset\": -1}]}],"
                  " \"ThrottleTimeMs\": 0}}", &m);
    memset(&c, 0, sizeof(c));
    kr_action_count_errors(&m, count_cb, &c);
    ck_assert_uint_eq(c.calls, 2);
    ck_assert_uint_eq(counted_for(&c, 6), 2);
    ck_assert_uint_eq(counted_for(&c, 3), 1);
    ck_assert_uint_eq(counted_for(&c, 0), 0);

    ck_assert_uint_eq(kr_action_replace_errors(&m, 7), 4);
    rsp_roundtrip(&m, &back, NULL, NULL);
    ck_assert_int_eq(rsp_int(&back, "Responses[0].PartitionResponses[0]."
                                    "ErrorCode"), 7);
    ck_assert_int_eq(rsp_int(&back, "Responses[1].PartitionResponses[0]."
                                    "ErrorCode"), 7);
    memset(&c, 0, sizeof(c));
    kr_action_count_errors(&back, count_cb, &c);
    ck_assert_uint_eq(c.calls, 1);
    ck_assert_uint_eq(counted_for(&c, 7), 4);

    /* Fetch v12: partitions replaced, top-level left alone */
    rsp_from_json("{\"apiKey\": 1, \"apiVersion\": 12, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"ThrottleTimeMs\": 0,"
                  " \"ErrorCode\": 0, \"SessionId\": 9, \"Responses\": ["
                  " {\"Topic\": \"t\", \"Partitions\": ["
                  "  {\"PartitionIndex\": 0, \"ErrorCode\": 0,"
                  "   \"HighWatermark\": 5, \"AbortedTransactions\": null,"
                  "   \"Records\": null},"
                  "  {\"PartitionIndex\": 1, \"ErrorCode\": 0,"
                  "   \"HighWatermark\": 5, \"AbortedTransactions\": null,"
                  "   \"Records\": \"\"}]}]}}", &m);
    ck_assert_uint_eq(kr_action_replace_errors(&m, 6), 2);
    ck_assert_int_eq(rsp_int(&m, "ErrorCode"), 0);
    ck_assert_int_eq(rsp_int(&m, "Responses[0].Partitions[1].ErrorCode"), 6);
    memset(&c, 0, sizeof(c));
    kr_action_count_errors(&m, count_cb, &c);
    ck_assert_uint_eq(c.calls, 1);
    ck_assert_uint_eq(counted_for(&c, 6), 2);

    /* No entries: the top-level ErrorCode is replaced */
    rsp_from_json("{\"apiKey\": 1, \"apiVersion\": 12, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"ThrottleTimeMs\": 0,"
                  " \"ErrorCode\": 0, \"SessionId\": 9, \"Responses\": []}}",
                  &m);
    ck_assert_uint_eq(kr_action_replace_errors(&m, 6), 1);
    ck_assert_int_eq(rsp_int(&m, "ErrorCode"), 6);
    rsp_from_json("{\"apiKey\": 12, \"apiVersion\": 3, \"header\":"
                  " {\"CorrelationId\": 5}, \"body\": {\"ThrottleTimeMs\": 0,"
                  " \"ErrorCode\": 0}}", &m);
    ck_assert_uint_eq(kr_action_replace_errors(&m, 27), 1);
    rsp_roundtrip(&m, &back, NULL, NULL);
    ck_assert_int_eq(rsp_int(&back, "ErrorCode"), 27);
    memset(&c, 0, sizeof(c));
    kr_action_count_errors(&back, count_cb, &c);
    ck_assert_uint_eq(c.calls, 1);
    ck_assert_uint_eq(counted_for(&c, 27), 1);
    /* replacing with 0 clears */
    ck_assert_uint_eq(kr_action_replace_errors(&back, 0), 1);
    memset(&c, 0, sizeof(c));
    kr_action_count_errors(&back, count_cb, &c);
    ck_assert_uint_eq(c.calls, 0);
}
END_TEST

/* ---- produce policy ----------------------------------------------------- */

static void
put_be(uint8_t *p, uint64_t x, int width)
{
    int i;

    for (i = 0; i < width; i++) {
        p[i] = (uint8_t)(x >> (8 * (width - 1 - i)));
    }
}

/*
 * A magic 2 RecordBatch of size bytes (>= 61) with compression codec:
 * header fields per Kafka's DefaultRecordBatch, body bytes zero (never
 * read).
 */
static size_t
mk_batch(uint8_t *p, unsigned codec, size_t size)
{
    memset(p, 0, size);
    put_be(p, 100, 8);                          /* baseOffset */
    put_be(p + 8, size - 12, 4);                /* batchLength */
    put_be(p + 12, 0, 4);                       /* partitionLeaderEpoch */
    p[16] = 2;                                  /* magic */
    put_be(p + 21, 0x10 | codec, 2);            /* attributes */
    put_be(p + 57, 0, 4);                       /* recordCount */
    return size;
}

/* A magic 0/1 message (offset, size, crc, magic, attributes, ...). */
static size_t
mk_legacy(uint8_t *p, int magic, unsigned codec, size_t size)
{
    memset(p, 0, size);
    put_be(p, 0, 8);
    put_be(p + 8, size - 12, 4);
    p[16] = (uint8_t)magic;
    p[17] = (uint8_t)codec;
    return size;
}

/* Produce request (Acks acks, version v) with the given partitions'
 * records; decoded over small segments. */
static void
produce_req(int v, int acks, const uint8_t *const *recs, const size_t *lens,
            unsigned nparts, struct kr_msg *m, struct kr_rbuf *rb,
            struct iovec *iov, size_t maxseg)
{
    char *json, *p;
    size_t cap = 4096, used = 0;
    struct kr_codec_err err;
    const uint8_t *frame;
    size_t flen, off;
    unsigned i;
    int nseg = 0, rc;
    struct kr_msg tmp;

    for (i = 0; i < nparts; i++) {
        cap += kr_base64_len(lens[i]) + 64;
    }
    json = malloc(cap);
    ck_assert_ptr_nonnull(json);
    used += (size_t)snprintf(json, cap,
                             "{\"header\": {\"RequestApiKey\": 0,"
                             " \"RequestApiVersion\": %d, \"CorrelationId\":"
                             " 3}, \"body\": {\"Acks\": %d, \"TimeoutMs\":"
                             " 100, \"TopicData\": [{\"Name\": \"t\","
                             " \"PartitionData\": [", v, acks);
    for (i = 0; i < nparts; i++) {
        used += (size_t)snprintf(json + used, cap - used,
                                 "%s{\"Index\": %u, \"Records\": \"",
                                 i > 0 ? ", " : "", i);
        p = json + used;
        used += kr_base64_encode(recs[i], lens[i], p);
        used += (size_t)snprintf(json + used, cap - used, "\"}");
    }
    snprintf(json + used, cap - used, "]}]}}");
    req_from_json(json, &tmp, &frame, &flen);
    free(json);
    /* decode again over segments of at most maxseg bytes */
    for (off = 0; off < flen; off += maxseg) {
        ck_assert_int_lt(nseg, KR_RBUF_MAX_SEG);
        iov[nseg].iov_base = (void *)(frame + off);
        iov[nseg].iov_len = flen - off < maxseg ? flen - off : maxseg;
        nseg++;
    }
    rb->seg = iov;
    rb->nseg = nseg;
    rb->len = flen;
    rc = kr_decode_request(&arena, rb, KR_DEC_STRICT, m, &err);
    ck_assert_msg(rc == KR_OK, "decode: %s at %s", err.msg, err.path);
}

#define ACKS_ALL   (1u << 0)  /* -1 */
#define ACKS_NONE  (1u << 1)  /*  0 */
#define ACKS_ONE   (1u << 2)  /*  1 */
#define C_NONE  (1u << 0)
#define C_GZIP  (1u << 1)
#define C_SNAPPY (1u << 2)
#define C_LZ4   (1u << 3)
#define C_ZSTD  (1u << 4)

START_TEST(test_policy_codecs)
{
    uint8_t a[256], b[256];
    const uint8_t *recs[2] = { a, b };
    size_t lens[2];
    struct iovec iov[KR_RBUF_MAX_SEG];
    struct kr_msg m;
    struct kr_rbuf rb;
    char why[128];
    int rc;

    /* partition 0: none + zstd; partition 1: gzip */
    lens[0] = mk_batch(a, 0, 61);
    lens[0] += mk_batch(a + lens[0], 4, 70);
    lens[1] = mk_batch(b, 1, 64);
    produce_req(9, -1, recs, lens, 2, &m, &rb, iov, 7);
    ck_assert_int_gt(rb.nseg, 10);
    rc = kr_action_produce_policy(&m, &rb, 0, C_NONE | C_ZSTD, why,
                                  sizeof(why));
    ck_assert_int_eq(rc, KR_ELIMIT);
    ck_assert_msg(strstr(why, "gzip") != NULL, "why: %s", why);
    rc = kr_action_produce_policy(&m, &rb, 0, C_NONE | C_ZSTD | C_GZIP, why,
                                  sizeof(why));
    ck_assert_msg(rc == KR_OK, "why: %s", why);
    rc = kr_action_produce_policy(&m, &rb, 0, C_GZIP | C_ZSTD, why,
                                  sizeof(why));
    ck_assert_int_eq(rc, KR_ELIMIT);
    ck_assert_msg(strstr(why, "none") != NULL, "why: %s", why);

    /* one zstd batch only: allowed by {zstd}, refused by {none, gzip} */
    lens[0] = mk_batch(a, 4, 100);
    produce_req(3, 1, recs, lens, 1, &m, &rb, iov, 3);
    rc = kr_action_produce_policy(&m, &rb, 0, C_ZSTD, why, sizeof(why));
    ck_assert_msg(rc == KR_OK, "why: %s", why);
    rc = kr_action_produce_policy(&m, &rb, 0, C_NONE | C_GZIP, why,
                                  sizeof(why));
    ck_assert_int_eq(rc, KR_ELIMIT);
    ck_assert_msg(strstr(why, "zstd") != NULL, "why: %s", why);

    /* magic 1 message set, snappy wrapper; magic 0 lz4 */
    lens[0] = mk_legacy(a, 1, 2, 40);
    lens[0] += mk_legacy(a + lens[0], 0, 3, 30);
    produce_req(3, 1, recs, lens, 1, &m, &rb, iov, 5);
    rc = kr_action_produce_policy(&m, &rb, 0, C_SNAPPY | C_LZ4, why,
                                  sizeof(why));
    ck_assert_msg(rc == KR_OK, "why: %s", why);
    rc = kr_action_produce_policy(&m, &rb, 0, C_SNAPPY, why, sizeof(why));
    ck_assert_int_eq(rc, KR_ELIMIT);
    ck_assert_msg(strstr(why, "lz4") != NULL, "why: %s", why);
}
END_TEST

START_TEST(test_policy_acks)
{
    uint8_t a[128];
    const uint8_t *recs[1] = { a };
    size_t lens[1];
    struct iovec iov[KR_RBUF_MAX_SEG];
    struct kr_msg m;
    struct kr_rbuf rb;
    char why[128];
    int acks;

    lens[0] = mk_batch(a, 0, 61);
    for (acks = -1; acks <= 1; acks++) {
        unsigned bit = 1u << (acks + 1);

        produce_req(9, acks, recs, lens, 1, &m, &rb, iov, 64);
        ck_assert_int_eq(kr_action_produce_policy(&m, &rb, bit, 0, why,
                                                  sizeof(why)), KR_OK);
        ck_assert_int_eq(kr_action_produce_policy(&m, &rb, ACKS_ALL |
                                                  ACKS_NONE | ACKS_ONE, 0,
                                                  why, sizeof(why)), KR_OK);
        ck_assert_int_eq(kr_action_produce_policy(&m, &rb, ~bit & 7u, 0, why,
                                                  sizeof(why)), KR_ELIMIT);
        ck_assert_msg(strstr(why, "Acks") != NULL, "why: %s", why);
    }
    /* Acks 2 is outside every mask */
    produce_req(9, 2, recs, lens, 1, &m, &rb, iov, 64);
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 7u, 0, why,
                                              sizeof(why)), KR_ELIMIT);
    /* a mask of 0 allows any Acks */
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, 0, why,
                                              sizeof(why)), KR_OK);
}
END_TEST

START_TEST(test_policy_malformed)
{
    uint8_t a[256];
    const uint8_t *recs[1] = { a };
    size_t lens[1];
    struct iovec iov[KR_RBUF_MAX_SEG];
    struct kr_msg m;
    struct kr_rbuf rb;
    char why[128];
    size_t cut;

    /* truncated headers: every length below a full v2 header's 23 bytes
     * read (and below the batch) is refused, never read past */
    for (cut = 1; cut < 61; cut += 4) {
        mk_batch(a, 1, 61);
        lens[0] = cut;
        produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 5);
        ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                                  sizeof(why)), KR_EPROTO);
    }
    /* a good batch followed by 10 stray bytes */
    lens[0] = mk_batch(a, 0, 61);
    memset(a + 61, 0, 10);
    lens[0] += 10;
    produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 5);
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    ck_assert_msg(strstr(why, "truncated") != NULL, "why: %s", why);
    /* batchLength past the end */
    lens[0] = mk_batch(a, 0, 80);
    put_be(a + 8, 1000, 4);
    produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 5);
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    /* negative batchLength */
    put_be(a + 8, 0xffffff00u, 4);
    produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 5);
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    /* unknown magic, unknown codec */
    lens[0] = mk_batch(a, 0, 61);
    a[16] = 3;
    produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 5);
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    lens[0] = mk_batch(a, 5, 61);
    produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 5);
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    /* a records slice outside the payload given */
    lens[0] = mk_batch(a, 0, 61);
    produce_req(9, -1, recs, lens, 1, &m, &rb, iov, 4096);
    /* cut the payload inside the records (after them in v9 come only
     * three empty tag buffers: partition, topic, body) */
    ck_assert_int_eq(rb.nseg, 1);
    rb.len -= 4;
    iov[0].iov_len -= 4;
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    /* null records and no payload needed when every codec is allowed */
    ck_assert_int_eq(kr_action_produce_policy(&m, NULL, 0, 0x1f, why,
                                              sizeof(why)), KR_OK);
    ck_assert_int_eq(kr_action_produce_policy(&m, NULL, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
    /* not a Produce request */
    m.api_key = KR_API_FETCH;
    ck_assert_int_eq(kr_action_produce_policy(&m, &rb, 0, C_NONE, why,
                                              sizeof(why)), KR_EPROTO);
}
END_TEST

/* ---- suite -------------------------------------------------------------- */

static Suite *
action_suite(void)
{
    Suite *s = suite_create("action");
    TCase *tc = tcase_create("error_response");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_produce_v9);
    tcase_add_test(tc, test_produce_v3_v13);
    tcase_add_test(tc, test_fetch_session);
    tcase_add_test(tc, test_create_delete_topics);
    tcase_add_test(tc, test_records_partitions);
    tcase_add_test(tc, test_configs);
    tcase_add_test(tc, test_groups_acls);
    tcase_add_test(tc, test_elect_reassign);
    tcase_add_test(tc, test_top_level_only);
    tcase_add_test(tc, test_sweep_supported);
    suite_add_tcase(s, tc);

    /* test_deny_error_for decodes requests into the arena and keeps
     * frames: without the fixture, CK_FORK=no leaks both. */
    tc = tcase_create("tables");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_deny_error);
    tcase_add_test(tc, test_deny_error_for);
    tcase_add_test(tc, test_kip219);
    suite_add_tcase(s, tc);

    tc = tcase_create("throttle_errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_throttle_produce_last);
    tcase_add_test(tc, test_throttle_metadata_first);
    tcase_add_test(tc, test_replace_count);
    suite_add_tcase(s, tc);

    tc = tcase_create("produce_policy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_policy_codecs);
    tcase_add_test(tc, test_policy_acks);
    tcase_add_test(tc, test_policy_malformed);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(action_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
