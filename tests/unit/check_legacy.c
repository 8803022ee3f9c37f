/*
 * check_legacy.c - unit tests for kr_legacy: requests of KIP-896's
 * removed versions translated up, their responses down.
 *
 * Requests are built at the client's version with the codec (JSON ->
 * tree -> bytes -> strict decode: kr_test_build), translated, encoded,
 * and compared with the expected frame written by hand from the schemas
 * (../shared/kafka-message-schemas): golden bytes for ListOffsets v0,
 * OffsetCommit v0/v1 and JoinGroup v0/v1 both ways, field checks (on the
 * re-decoded wire form) for the others.
 */
#include "config.h"

#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_kerr.h"
#include "kr_legacy.h"
#include "kr_schema.h"
#include "kr_test.h"
#include "tree_fill.h"

static struct kr_arena arena;

#define MAX_KEEP 1024
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

static void
keep_ptr(uint8_t *p)
{
    ck_assert_uint_lt(nkeep, MAX_KEEP);
    keep[nkeep++] = p;
}

/* A decoded message from krelay-codec's JSON form (kept until teardown). */
/* The payload the last built or re-read message was decoded from: its
   records values are slices of it. */
static const uint8_t *cur_src;
static size_t cur_len;
static const uint8_t no_payload[1];     /* trees built in memory */

static struct kr_msg
build(const char *text)
{
    struct kr_msg m;
    uint8_t *p = kr_test_build_len(&arena, text, &m, &cur_len);

    keep_ptr(p);
    cur_src = p;
    return m;
}

/* m encoded (records spliced from cur_src) into a kept buffer of *len
   bytes. */
static uint8_t *
encode(const struct kr_msg *m, size_t *len)
{
    struct kr_codec_err ce;
    struct kr_wbuf w;
    uint8_t *p;

    memset(&w, 0, sizeof(w));
    ck_assert_msg(kr_encode_msg(m, &w, &ce) == KR_OK, "encode: %s at %s",
                  ce.msg, ce.path);
    p = kr_wbuf_flatten(&w, cur_src, cur_len);
    ck_assert_ptr_nonnull(p);
    *len = w.total;
    kr_wbuf_free(&w);
    keep_ptr(p);
    return p;
}

/* Hex text (spaces and '|' ignored) -> bytes; returns the length. */
static size_t
unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;

    for (; *hex != '\0'; hex++) {
        int d;

        if (isspace((unsigned char)*hex) || *hex == '|') {
            continue;
        }
        ck_assert_msg(isxdigit((unsigned char)*hex), "bad hex %c", *hex);
        d = isdigit((unsigned char)*hex) ? *hex - '0'
                                         : tolower((unsigned char)*hex) -
                                               'a' + 10;
        if (hi < 0) {
            hi = d;
        } else {
            ck_assert_uint_lt(n, cap);
            out[n++] = (uint8_t)(hi << 4 | d);
            hi = -1;
        }
    }
    ck_assert_int_eq(hi, -1);
    return n;
}

static void
assert_bytes(const uint8_t *got, size_t glen, const char *want_hex)
{
    uint8_t want[1024];
    size_t wlen = unhex(want_hex, want, sizeof(want)), i;

    for (i = 0; i < glen && i < wlen; i++) {
        ck_assert_msg(got[i] == want[i], "byte %zu: got %02x want %02x", i,
                      got[i], want[i]);
    }
    ck_assert_uint_eq(glen, wlen);
}

/* Request up to `to`, asserting success. */
static struct kr_msg
up(const char *json, int16_t to, struct kr_legacy_memo *memo)
{
    struct kr_msg m = build(json);
    struct kr_codec_err ce;
    int rc;

    memset(&ce, 0, sizeof(ce));
    rc = kr_legacy_request_up(&arena, &m, to, memo, &ce);
    ck_assert_msg(rc == KR_OK, "up: %d %s at %s", rc, ce.msg, ce.path);
    ck_assert_int_eq(m.api_version, to);
    ck_assert_int_eq(memo->upstream_version, to);
    return m;
}

/* Response (JSON at the upstream version) down to memo's client version. */
static struct kr_msg
down(const char *json, const struct kr_legacy_memo *memo)
{
    struct kr_msg m = build(json);
    struct kr_codec_err ce;
    int rc;

    memset(&ce, 0, sizeof(ce));
    rc = kr_legacy_response_down(&arena, &m, memo->client_version, memo,
                                 &ce);
    ck_assert_msg(rc == KR_OK, "down: %d %s at %s", rc, ce.msg, ce.path);
    ck_assert_int_eq(m.api_version, memo->client_version);
    return m;
}

/* m encoded and strictly decoded again (what the peer would read). */
static struct kr_msg
reread(const struct kr_msg *m)
{
    struct kr_codec_err ce;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_msg out;
    size_t len;
    uint8_t *p = encode(m, &len);
    int rc;

    kr_rbuf_init_flat(&rb, &iov, p, len);
    if (m->dir == KR_DIR_REQUEST) {
        rc = kr_decode_request(&arena, &rb, KR_DEC_STRICT, &out, &ce);
    } else {
        rc = kr_decode_response(&arena, &rb, m->api_key, m->api_version,
                                KR_DEC_STRICT, &out, &ce);
    }
    ck_assert_msg(rc == KR_OK, "reread: %s at %s", ce.msg, ce.path);
    cur_src = p;
    cur_len = len;
    return out;
}

static int64_t
ival(const struct kr_msg *m, const char *path)
{
    struct kr_val *v = kr_test_val_at(m->body, path);

    ck_assert_msg(v != NULL, "no %s", path);
    return v->u.i;
}

static bool
has(const struct kr_msg *m, const char *path)
{
    const struct kr_val *v = kr_test_val_at(m->body, path);

    return v != NULL && v->present;
}

/* ---- ListOffsets v0 ----------------------------------------------------- */

START_TEST(test_list_offsets_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;
    size_t len;
    uint8_t *p;

    m = up("{\"header\": {\"RequestApiKey\": 2, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"ReplicaId\": -1, \"Topics\": [{\"Name\": \"t\","
           "  \"Partitions\": ["
           "   {\"PartitionIndex\": 0, \"Timestamp\": -1,"
           "    \"MaxNumOffsets\": 5},"
           "   {\"PartitionIndex\": 1, \"Timestamp\": -2,"
           "    \"MaxNumOffsets\": 5}]}]}}", 1, &memo);
    ck_assert_int_eq(memo.api_key, KR_API_LIST_OFFSETS);
    ck_assert_int_eq(memo.client_version, 0);
    ck_assert_int_eq(memo.max_num_offsets, 5);
    p = encode(&m, &len);
    /* ListOffsetsRequest v1: header v1, ReplicaId, Topics [Name,
       Partitions [PartitionIndex, Timestamp]] (MaxNumOffsets is v0). */
    assert_bytes(p, len,
                 "0002 0001 00000007 0001 63"
                 "| ffffffff | 00000001 0001 74 | 00000002"
                 "| 00000000 ffffffffffffffff"
                 "| 00000001 fffffffffffffffe");

    /* v1 response: Timestamp/Offset -> v0 OldStyleOffsets [Offset] / []. */
    r = down("{\"apiKey\": 2, \"apiVersion\": 1,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"Topics\": [{\"Name\": \"t\", \"Partitions\": ["
             "  {\"PartitionIndex\": 0, \"ErrorCode\": 0, \"Timestamp\": -1,"
             "   \"Offset\": 42},"
             "  {\"PartitionIndex\": 1, \"ErrorCode\": 0, \"Timestamp\": -1,"
             "   \"Offset\": -1}]}]}}", &memo);
    p = encode(&r, &len);
    assert_bytes(p, len,
                 "00000007 | 00000001 0001 74 | 00000002"
                 "| 00000000 0000 00000001 000000000000002a"
                 "| 00000001 0000 00000000");
}
END_TEST

START_TEST(test_list_offsets_v0_edges)
{
    struct kr_legacy_memo memo;
    struct kr_codec_err ce;
    struct kr_msg m, r;
    int rc;

    /* Partitions asking different MaxNumOffsets: refused, path named. */
    m = build("{\"header\": {\"RequestApiKey\": 2, \"RequestApiVersion\": 0,"
              " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
              " \"body\": {\"ReplicaId\": -1, \"Topics\": [{\"Name\": \"t\","
              "  \"Partitions\": ["
              "   {\"PartitionIndex\": 0, \"Timestamp\": -1,"
              "    \"MaxNumOffsets\": 1},"
              "   {\"PartitionIndex\": 1, \"Timestamp\": -1,"
              "    \"MaxNumOffsets\": 3}]}]}}");
    rc = kr_legacy_request_up(&arena, &m, 1, &memo, &ce);
    ck_assert_int_eq(rc, KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "Topics[0].Partitions[1].MaxNumOffsets");
    ck_assert_int_eq(m.api_version, 0);

    /* MaxNumOffsets 0: [] whatever the offset; upstream v5's
       OFFSET_NOT_AVAILABLE -> LEADER_NOT_AVAILABLE for v0. */
    m = up("{\"header\": {\"RequestApiKey\": 2, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"ReplicaId\": -1, \"Topics\": [{\"Name\": \"t\","
           "  \"Partitions\": [{\"PartitionIndex\": 0, \"Timestamp\": -1,"
           "   \"MaxNumOffsets\": 0}]}]}}", 5, &memo);
    ck_assert_int_eq(memo.max_num_offsets, 0);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "IsolationLevel"), 0);
    ck_assert_int_eq(ival(&m, "Topics[0].Partitions[0].CurrentLeaderEpoch"),
                     -1);
    r = down("{\"apiKey\": 2, \"apiVersion\": 5,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 9, \"Topics\": [{\"Name\": \"t\","
             "  \"Partitions\": [{\"PartitionIndex\": 0, \"ErrorCode\": 0,"
             "   \"Timestamp\": -1, \"Offset\": 42, \"LeaderEpoch\": 3},"
             "  {\"PartitionIndex\": 1, \"ErrorCode\": 78,"
             "   \"Timestamp\": -1, \"Offset\": -1, \"LeaderEpoch\": -1}]}]}}",
             &memo);
    r = reread(&r);
    ck_assert_int_eq(kr_test_val_at(r.body,
                     "Topics[0].Partitions[0].OldStyleOffsets")->u.arr->n, 0);
    ck_assert_int_eq(ival(&r, "Topics[0].Partitions[1].ErrorCode"),
                     KR_KERR_LEADER_NOT_AVAILABLE);
    ck_assert(!has(&r, "ThrottleTimeMs"));
}
END_TEST

/* ---- OffsetCommit v0/v1 ------------------------------------------------- */

START_TEST(test_offset_commit_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;
    size_t len;
    uint8_t *p;

    m = up("{\"header\": {\"RequestApiKey\": 8, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"GroupId\": \"g\", \"Topics\": [{\"Name\": \"t\","
           "  \"Partitions\": [{\"PartitionIndex\": 0,"
           "   \"CommittedOffset\": 100, \"CommittedMetadata\": \"m\"}]}]}}",
           2, &memo);
    p = encode(&m, &len);
    /* OffsetCommitRequest v2: GroupId, GenerationIdOrMemberEpoch -1,
       MemberId "", RetentionTimeMs -1, Topics [Name, Partitions
       [PartitionIndex, CommittedOffset, CommittedMetadata]]. */
    assert_bytes(p, len,
                 "0008 0002 00000007 0001 63"
                 "| 0001 67 | ffffffff | 0000 | ffffffffffffffff"
                 "| 00000001 0001 74 | 00000001"
                 "| 00000000 0000000000000064 0001 6d");
    ck_assert_ptr_nonnull(kr_legacy_caveat(KR_API_OFFSET_COMMIT, 0));
    ck_assert_ptr_nonnull(strstr(kr_legacy_caveat(KR_API_OFFSET_COMMIT, 0),
                                 "ZooKeeper"));

    /* v2 response -> v0: same body (ThrottleTimeMs is v3+). */
    r = down("{\"apiKey\": 8, \"apiVersion\": 2,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"Topics\": [{\"Name\": \"t\", \"Partitions\": ["
             "  {\"PartitionIndex\": 0, \"ErrorCode\": 16}]}]}}", &memo);
    p = encode(&r, &len);
    assert_bytes(p, len, "00000007 | 00000001 0001 74 | 00000001"
                         "| 00000000 0010");
}
END_TEST

START_TEST(test_offset_commit_v1)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;
    size_t len;
    uint8_t *p;

    m = up("{\"header\": {\"RequestApiKey\": 8, \"RequestApiVersion\": 1,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"GroupId\": \"g\", \"GenerationIdOrMemberEpoch\": 3,"
           "  \"MemberId\": \"m1\", \"Topics\": [{\"Name\": \"t\","
           "  \"Partitions\": [{\"PartitionIndex\": 0,"
           "   \"CommittedOffset\": 100, \"CommitTimestamp\": 1700000000000,"
           "   \"CommittedMetadata\": null}]}]}}", 2, &memo);
    p = encode(&m, &len);
    /* The generation and member carried, CommitTimestamp dropped,
       RetentionTimeMs -1 (broker default), null metadata kept. */
    assert_bytes(p, len,
                 "0008 0002 00000007 0001 63"
                 "| 0001 67 | 00000003 | 0002 6d31 | ffffffffffffffff"
                 "| 00000001 0001 74 | 00000001"
                 "| 00000000 0000000000000064 ffff");

    /* v3 response (ThrottleTimeMs) -> v1: throttle dropped, error kept. */
    memo.upstream_version = 3;
    r = down("{\"apiKey\": 8, \"apiVersion\": 3,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 250, \"Topics\": ["
             "  {\"Name\": \"t\", \"Partitions\": ["
             "  {\"PartitionIndex\": 0, \"ErrorCode\": 22}]}]}}", &memo);
    p = encode(&r, &len);
    assert_bytes(p, len, "00000007 | 00000001 0001 74 | 00000001"
                         "| 00000000 0016");
}
END_TEST

/* ---- JoinGroup v0/v1 ---------------------------------------------------- */

static const char join_rsp_v2[] =
    "{\"apiKey\": 11, \"apiVersion\": 2, \"header\": {\"CorrelationId\": 7},"
    " \"body\": {\"ThrottleTimeMs\": 100, \"ErrorCode\": 0,"
    "  \"GenerationId\": 1, \"ProtocolName\": \"range\", \"Leader\": \"m-1\","
    "  \"MemberId\": \"m-1\", \"Members\": [{\"MemberId\": \"m-1\","
    "  \"Metadata\": \"AQ==\"}]}}";

/* JoinGroupResponse v0/v1 of join_rsp_v2: no ThrottleTimeMs. */
static const char join_rsp_v0_hex[] =
    "00000007 | 0000 | 00000001 | 0005 72616e6765 | 0003 6d2d31"
    "| 0003 6d2d31 | 00000001 0003 6d2d31 00000001 01";

START_TEST(test_join_group_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;
    size_t len;
    uint8_t *p;

    m = up("{\"header\": {\"RequestApiKey\": 11, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"GroupId\": \"g\", \"SessionTimeoutMs\": 30000,"
           "  \"MemberId\": \"\", \"ProtocolType\": \"consumer\","
           "  \"Protocols\": [{\"Name\": \"range\", \"Metadata\": \"AQI=\"}]}}",
           2, &memo);
    p = encode(&m, &len);
    /* JoinGroupRequest v2: RebalanceTimeoutMs = SessionTimeoutMs. */
    assert_bytes(p, len,
                 "000b 0002 00000007 0001 63"
                 "| 0001 67 | 00007530 | 00007530 | 0000"
                 "| 0008 636f6e73756d6572 | 00000001"
                 "| 0005 72616e6765 | 00000002 0102");
    r = down(join_rsp_v2, &memo);
    p = encode(&r, &len);
    assert_bytes(p, len, join_rsp_v0_hex);
}
END_TEST

START_TEST(test_join_group_v1)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;
    size_t len;
    uint8_t *p;

    m = up("{\"header\": {\"RequestApiKey\": 11, \"RequestApiVersion\": 1,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"GroupId\": \"g\", \"SessionTimeoutMs\": 30000,"
           "  \"RebalanceTimeoutMs\": 60000, \"MemberId\": \"m-1\","
           "  \"ProtocolType\": \"consumer\","
           "  \"Protocols\": [{\"Name\": \"range\", \"Metadata\": \"AQI=\"}]}}",
           2, &memo);
    p = encode(&m, &len);
    assert_bytes(p, len,
                 "000b 0002 00000007 0001 63"
                 "| 0001 67 | 00007530 | 0000ea60 | 0003 6d2d31"
                 "| 0008 636f6e73756d6572 | 00000001"
                 "| 0005 72616e6765 | 00000002 0102");
    r = down(join_rsp_v2, &memo);
    p = encode(&r, &len);
    assert_bytes(p, len, join_rsp_v0_hex);

    /* JoinGroup v4+ would answer MEMBER_ID_REQUIRED: not a target. */
    ck_assert(kr_legacy_translates(KR_API_JOIN_GROUP, 1, 3));
    ck_assert(!kr_legacy_translates(KR_API_JOIN_GROUP, 1, 4));
}
END_TEST

/* ---- Produce and Fetch (records carried, not converted) ----------------- */

START_TEST(test_produce_v2)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;
    struct kr_val *rec;

    m = up("{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 2,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"Acks\": -1, \"TimeoutMs\": 1500, \"TopicData\": ["
           "  {\"Name\": \"t\", \"PartitionData\": [{\"Index\": 3,"
           "   \"Records\": \"3q2+7w==\"}]}]}}", 3, &memo);
    m = reread(&m);
    ck_assert(kr_test_val_at(m.body, "TransactionalId")->is_null);
    ck_assert_int_eq(ival(&m, "Acks"), -1);
    ck_assert_int_eq(ival(&m, "TimeoutMs"), 1500);
    rec = kr_test_val_at(m.body, "TopicData[0].PartitionData[0].Records");
    ck_assert_int_eq(rec->u.rec.len, 4);   /* the same bytes, unconverted */

    r = down("{\"apiKey\": 0, \"apiVersion\": 3,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"Responses\": [{\"Name\": \"t\","
             "  \"PartitionResponses\": ["
             "   {\"Index\": 3, \"ErrorCode\": 56, \"BaseOffset\": -1,"
             "    \"LogAppendTimeMs\": -1},"
             "   {\"Index\": 4, \"ErrorCode\": 87, \"BaseOffset\": -1,"
             "    \"LogAppendTimeMs\": -1}]}], \"ThrottleTimeMs\": 5}}",
             &memo);
    r = reread(&r);
    ck_assert_int_eq(ival(&r, "Responses[0].PartitionResponses[0].ErrorCode"),
                     KR_KERR_NOT_LEADER_OR_FOLLOWER);
    ck_assert_int_eq(ival(&r, "Responses[0].PartitionResponses[1].ErrorCode"),
                     KR_KERR_CORRUPT_MESSAGE);
    ck_assert_int_eq(ival(&r, "ThrottleTimeMs"), 5);      /* v1+ has it */
}
END_TEST

START_TEST(test_fetch_v0)
{
    struct kr_legacy_memo memo;
    struct kr_codec_err ce;
    struct kr_msg m, r;
    struct kr_val *rec;
    int rc;

    m = up("{\"header\": {\"RequestApiKey\": 1, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"ReplicaId\": -1, \"MaxWaitMs\": 100,"
           "  \"MinBytes\": 1, \"Topics\": [{\"Topic\": \"t\","
           "  \"Partitions\": [{\"Partition\": 0, \"FetchOffset\": 5,"
           "   \"PartitionMaxBytes\": 1048576}]}]}}", 4, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "ReplicaId"), -1);
    ck_assert_int_eq(ival(&m, "MaxBytes"), INT32_MAX);
    ck_assert_int_eq(ival(&m, "IsolationLevel"), 0);
    ck_assert_int_eq(ival(&m, "Topics[0].Partitions[0].FetchOffset"), 5);
    ck_assert_int_eq(ival(&m, "Topics[0].Partitions[0].PartitionMaxBytes"),
                     1048576);

    /* v4 response -> v0: LastStableOffset, AbortedTransactions and
       ThrottleTimeMs dropped, records carried as they are. */
    r = down("{\"apiKey\": 1, \"apiVersion\": 4,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 3, \"Responses\": ["
             "  {\"Topic\": \"t\", \"Partitions\": [{\"PartitionIndex\": 0,"
             "   \"ErrorCode\": 56, \"HighWatermark\": 9,"
             "   \"LastStableOffset\": 8, \"AbortedTransactions\": ["
             "    {\"ProducerId\": 4, \"FirstOffset\": 6}],"
             "   \"Records\": \"AQIDBAU=\"}]}]}}", &memo);
    r = reread(&r);
    ck_assert(!has(&r, "ThrottleTimeMs"));
    ck_assert(!has(&r, "Responses[0].Partitions[0].LastStableOffset"));
    ck_assert_int_eq(ival(&r, "Responses[0].Partitions[0].ErrorCode"),
                     KR_KERR_NOT_LEADER_OR_FOLLOWER);
    ck_assert_int_eq(ival(&r, "Responses[0].Partitions[0].HighWatermark"), 9);
    rec = kr_test_val_at(r.body, "Responses[0].Partitions[0].Records");
    ck_assert_int_eq(rec->u.rec.len, 5);

    /* Records krelay built (rec_ext) are carried as they are too; a
       preferred read replica (KIP-392) cannot be said to v0-3. */
    r = build("{\"apiKey\": 1, \"apiVersion\": 11,"
              " \"header\": {\"CorrelationId\": 7},"
              " \"body\": {\"ThrottleTimeMs\": 0, \"ErrorCode\": 0,"
              "  \"SessionId\": 0, \"Responses\": [{\"Topic\": \"t\","
              "  \"Partitions\": [{\"PartitionIndex\": 0, \"ErrorCode\": 0,"
              "   \"HighWatermark\": 9, \"PreferredReadReplica\": -1,"
              "   \"Records\": null}]}]}}");
    rec = kr_test_val_at(r.body, "Responses[0].Partitions[0].Records");
    kr_val_set_records_ext(rec, (const uint8_t *)"\x01\x02\x03", 3);
    memo.client_version = 2;
    memo.upstream_version = 11;
    rc = kr_legacy_response_down(&arena, &r, 2, &memo, &ce);
    ck_assert_int_eq(rc, KR_OK);
    rec = kr_test_val_at(r.body, "Responses[0].Partitions[0].Records");
    ck_assert_int_eq(rec->rec_ext, 1);
    ck_assert_int_eq(rec->u.s.len, 3);
    ck_assert(memcmp(rec->u.s.p, "\x01\x02\x03", 3) == 0);
    r = build("{\"apiKey\": 1, \"apiVersion\": 11,"
              " \"header\": {\"CorrelationId\": 7},"
              " \"body\": {\"ThrottleTimeMs\": 0, \"ErrorCode\": 0,"
              "  \"SessionId\": 0, \"Responses\": [{\"Topic\": \"t\","
              "  \"Partitions\": [{\"PartitionIndex\": 0, \"ErrorCode\": 0,"
              "   \"HighWatermark\": 9, \"PreferredReadReplica\": 2,"
              "   \"Records\": null}]}]}}");
    rc = kr_legacy_response_down(&arena, &r, 2, &memo, &ce);
    ck_assert_int_eq(rc, KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path,
                     "Responses[0].Partitions[0].PreferredReadReplica");

    /* Fetch v7 upstream: a top-level error goes into the partitions; with
       none to carry it, the client cannot be told. */
    m = up("{\"header\": {\"RequestApiKey\": 1, \"RequestApiVersion\": 3,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"ReplicaId\": -1, \"MaxWaitMs\": 100,"
           "  \"MinBytes\": 1, \"MaxBytes\": 65536, \"Topics\": []}}", 7,
           &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "MaxBytes"), 65536);      /* the client's */
    ck_assert_int_eq(ival(&m, "SessionId"), 0);
    ck_assert_int_eq(ival(&m, "SessionEpoch"), -1);
    r = down("{\"apiKey\": 1, \"apiVersion\": 7,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 0, \"ErrorCode\": 58,"
             "  \"SessionId\": 0, \"Responses\": [{\"Topic\": \"t\","
             "  \"Partitions\": [{\"PartitionIndex\": 0, \"ErrorCode\": 0,"
             "   \"HighWatermark\": 9, \"Records\": null}]}]}}", &memo);
    ck_assert_int_eq(ival(&r, "Responses[0].Partitions[0].ErrorCode"), 58);
    r = build("{\"apiKey\": 1, \"apiVersion\": 7,"
              " \"header\": {\"CorrelationId\": 7},"
              " \"body\": {\"ThrottleTimeMs\": 0, \"ErrorCode\": 58,"
              "  \"SessionId\": 0, \"Responses\": []}}");
    rc = kr_legacy_response_down(&arena, &r, 3, &memo, &ce);
    ck_assert_int_eq(rc, KR_EUNSUPPORTED);
    ck_assert_str_eq(ce.path, "ErrorCode");
}
END_TEST

/* ---- the other APIs: field checks ---------------------------------------- */

START_TEST(test_offset_fetch_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;

    m = up("{\"header\": {\"RequestApiKey\": 9, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"GroupId\": \"g\", \"Topics\": [{\"Name\": \"t\","
           "  \"PartitionIndexes\": [0, 1]}]}}", 1, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "Topics[0].PartitionIndexes[1]"), 1);
    ck_assert_ptr_nonnull(kr_legacy_caveat(KR_API_OFFSET_FETCH, 0));

    /* Upstream v3 (if picked): the top-level error into the partitions. */
    memo.upstream_version = 3;
    r = down("{\"apiKey\": 9, \"apiVersion\": 3,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 0, \"Topics\": [{\"Name\": \"t\","
             "  \"Partitions\": [{\"PartitionIndex\": 0,"
             "   \"CommittedOffset\": -1, \"Metadata\": \"\", \"ErrorCode\": 0}"
             "  ]}], \"ErrorCode\": 14}}", &memo);
    r = reread(&r);
    ck_assert_int_eq(ival(&r, "Topics[0].Partitions[0].ErrorCode"),
                     KR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    ck_assert(!has(&r, "ErrorCode"));
}
END_TEST

START_TEST(test_topics_admin_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;

    m = up("{\"header\": {\"RequestApiKey\": 19, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"Topics\": [{\"Name\": \"t\", \"NumPartitions\": 3,"
           "  \"ReplicationFactor\": 1, \"Assignments\": [], \"Configs\": []}],"
           "  \"timeoutMs\": 5000}}", 2, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "validateOnly"), 0);
    ck_assert_int_eq(ival(&m, "Topics[0].NumPartitions"), 3);
    r = down("{\"apiKey\": 19, \"apiVersion\": 2,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 1, \"Topics\": [{\"Name\": \"t\","
             "  \"ErrorCode\": 36, \"ErrorMessage\": \"exists\"}]}}", &memo);
    r = reread(&r);
    ck_assert_int_eq(ival(&r, "Topics[0].ErrorCode"), 36);
    ck_assert(!has(&r, "Topics[0].ErrorMessage"));

    m = up("{\"header\": {\"RequestApiKey\": 20, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"TopicNames\": [\"a\", \"b\"], \"TimeoutMs\": 5000}}",
           1, &memo);
    m = reread(&m);
    ck_assert_int_eq(kr_test_val_at(m.body, "TopicNames")->u.arr->n, 2);
    ck_assert(!kr_legacy_translates(KR_API_DELETE_TOPICS, 0, 6));

    m = up("{\"header\": {\"RequestApiKey\": 23, \"RequestApiVersion\": 1,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"Topics\": [{\"Topic\": \"t\", \"Partitions\": ["
           "  {\"Partition\": 0, \"LeaderEpoch\": 4}]}]}}", 2, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "Topics[0].Partitions[0].CurrentLeaderEpoch"),
                     -1);
    ck_assert_int_eq(ival(&m, "Topics[0].Partitions[0].LeaderEpoch"), 4);
    r = down("{\"apiKey\": 23, \"apiVersion\": 2,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 0, \"Topics\": ["
             "  {\"Topic\": \"t\","
             "  \"Partitions\": [{\"ErrorCode\": 74, \"Partition\": 0,"
             "   \"LeaderEpoch\": 4, \"EndOffset\": 77}]}]}}", &memo);
    r = reread(&r);
    ck_assert_int_eq(ival(&r, "Topics[0].Partitions[0].ErrorCode"),
                     KR_KERR_NOT_LEADER_OR_FOLLOWER);
    ck_assert_int_eq(ival(&r, "Topics[0].Partitions[0].EndOffset"), 77);
    ck_assert(has(&r, "Topics[0].Partitions[0].LeaderEpoch"));
}
END_TEST

START_TEST(test_describe_configs_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;

    m = up("{\"header\": {\"RequestApiKey\": 32, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"Resources\": [{\"ResourceType\": 2,"
           "  \"ResourceName\": \"t\", \"ConfigurationKeys\": null}]}}", 1,
           &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "IncludeSynonyms"), 0);
    ck_assert(kr_test_val_at(m.body,
                             "Resources[0].ConfigurationKeys")->is_null);
    /* ConfigSource 5 (DEFAULT_CONFIG) -> IsDefault true, 1 -> false. */
    r = down("{\"apiKey\": 32, \"apiVersion\": 1,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 0, \"Results\": [{"
             "  \"ErrorCode\": 0, \"ErrorMessage\": null, \"ResourceType\": 2,"
             "  \"ResourceName\": \"t\", \"Configs\": ["
             "   {\"Name\": \"a\", \"Value\": \"1\", \"ReadOnly\": false,"
             "    \"ConfigSource\": 5, \"IsSensitive\": false,"
             "    \"Synonyms\": []},"
             "   {\"Name\": \"b\", \"Value\": \"2\", \"ReadOnly\": false,"
             "    \"ConfigSource\": 1, \"IsSensitive\": false,"
             "    \"Synonyms\": []}]}]}}", &memo);
    r = reread(&r);
    ck_assert_int_eq(ival(&r, "Results[0].Configs[0].IsDefault"), 1);
    ck_assert_int_eq(ival(&r, "Results[0].Configs[1].IsDefault"), 0);
    ck_assert(!has(&r, "Results[0].Configs[0].ConfigSource"));
}
END_TEST

START_TEST(test_acls_v0)
{
    struct kr_legacy_memo memo;
    struct kr_msg m, r;

    m = up("{\"header\": {\"RequestApiKey\": 29, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"ResourceTypeFilter\": 2,"
           "  \"ResourceNameFilter\": null,"
           "  \"PrincipalFilter\": null, \"HostFilter\": null,"
           "  \"Operation\": 1, \"PermissionType\": 1}}", 1, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "PatternTypeFilter"), 3);
    r = down("{\"apiKey\": 29, \"apiVersion\": 1,"
             " \"header\": {\"CorrelationId\": 7},"
             " \"body\": {\"ThrottleTimeMs\": 0, \"ErrorCode\": 0,"
             "  \"ErrorMessage\": null, \"Resources\": [{\"ResourceType\": 2,"
             "  \"ResourceName\": \"t\", \"PatternType\": 3, \"Acls\": []}]}}",
             &memo);
    r = reread(&r);
    ck_assert_int_eq(r.api_version, 0);
    ck_assert(!has(&r, "Resources[0].PatternType"));

    m = up("{\"header\": {\"RequestApiKey\": 30, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"Creations\": [{\"ResourceType\": 2,"
           "  \"ResourceName\": \"t\", \"Principal\": \"User:a\","
           "  \"Host\": \"*\", \"Operation\": 3, \"PermissionType\": 3}]}}",
           1, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "Creations[0].ResourcePatternType"), 3);

    m = up("{\"header\": {\"RequestApiKey\": 31, \"RequestApiVersion\": 0,"
           " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
           " \"body\": {\"Filters\": [{\"ResourceTypeFilter\": 2,"
           "  \"ResourceNameFilter\": \"t\", \"PrincipalFilter\": null,"
           "  \"HostFilter\": null, \"Operation\": 1,"
           "  \"PermissionType\": 1}]}}", 1, &memo);
    m = reread(&m);
    ck_assert_int_eq(ival(&m, "Filters[0].PatternTypeFilter"), 3);
}
END_TEST

/* ---- the queries -------------------------------------------------------- */

START_TEST(test_translates_pick)
{
    struct kr_legacy_memo memo;
    struct kr_codec_err ce;
    struct kr_msg m;

    ck_assert(kr_legacy_translates(KR_API_PRODUCE, 0, 3));
    ck_assert(!kr_legacy_translates(KR_API_PRODUCE, 3, 4));
    ck_assert(!kr_legacy_translates(KR_API_FETCH, 3, 13));
    ck_assert(!kr_legacy_translates(KR_API_METADATA, 0, 4));
    ck_assert(!kr_legacy_translates(KR_API_OFFSET_COMMIT, 1, 9));
    /* The lowest the broker takes; none when the client's own is taken. */
    ck_assert_int_eq(kr_legacy_pick(KR_API_FETCH, 2, 4, 17), 4);
    ck_assert_int_eq(kr_legacy_pick(KR_API_JOIN_GROUP, 0, 2, 9), 2);
    ck_assert_int_eq(kr_legacy_pick(KR_API_JOIN_GROUP, 0, 0, 9), -1);
    ck_assert_int_eq(kr_legacy_pick(KR_API_JOIN_GROUP, 0, 4, 9), -1);
    ck_assert_int_eq(kr_legacy_pick(KR_API_LIST_OFFSETS, 0, 1, 11), 1);
    ck_assert_ptr_null(kr_legacy_caveat(KR_API_FETCH, 0));
    ck_assert_ptr_nonnull(kr_legacy_caveat(KR_API_OFFSET_COMMIT, 1));
    ck_assert_ptr_null(kr_legacy_caveat(KR_API_OFFSET_COMMIT, 2));
    ck_assert_ptr_nonnull(kr_legacy_caveat(KR_API_LIST_OFFSETS, 0));
    ck_assert_ptr_null(kr_legacy_caveat(KR_API_LIST_OFFSETS, 1));

    /* A pair not translated: refused, the tree untouched. */
    m = build("{\"header\": {\"RequestApiKey\": 11, \"RequestApiVersion\": 0,"
              " \"CorrelationId\": 7, \"ClientId\": \"c\"},"
              " \"body\": {\"GroupId\": \"g\", \"SessionTimeoutMs\": 30000,"
              "  \"MemberId\": \"\", \"ProtocolType\": \"consumer\","
              "  \"Protocols\": []}}");
    ck_assert_int_eq(kr_legacy_request_up(&arena, &m, 5, &memo, &ce),
                     KR_EUNSUPPORTED);
    ck_assert_int_eq(m.api_version, 0);

    /* The error table. */
    ck_assert_int_eq(kr_legacy_error(KR_API_FETCH, 3,
                                     KR_KERR_KAFKA_STORAGE_ERROR),
                     KR_KERR_NOT_LEADER_OR_FOLLOWER);
    ck_assert_int_eq(kr_legacy_error(KR_API_FETCH, 6,
                                     KR_KERR_KAFKA_STORAGE_ERROR),
                     KR_KERR_KAFKA_STORAGE_ERROR);
    ck_assert_int_eq(kr_legacy_error(KR_API_OFFSET_FETCH, 0,
                                     KR_KERR_UNKNOWN_TOPIC_ID),
                     KR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(kr_legacy_error(KR_API_PRODUCE, 0,
                                     KR_KERR_UNSUPPORTED_VERSION),
                     KR_KERR_UNSUPPORTED_VERSION);
    /* KIP-110's code is Produce v3+'s; v0-2 clients got CORRUPT_MESSAGE */
    ck_assert_int_eq(kr_legacy_error(KR_API_PRODUCE, 2,
                                     KR_KERR_UNSUPPORTED_COMPRESSION_TYPE),
                     KR_KERR_CORRUPT_MESSAGE);
    ck_assert_int_eq(kr_legacy_error(KR_API_PRODUCE, 3,
                                     KR_KERR_UNSUPPORTED_COMPRESSION_TYPE),
                     KR_KERR_UNSUPPORTED_COMPRESSION_TYPE);
    ck_assert_int_eq(kr_legacy_error(KR_API_FETCH, 3,
                                     KR_KERR_UNSUPPORTED_COMPRESSION_TYPE),
                     KR_KERR_UNSUPPORTED_COMPRESSION_TYPE);
}
END_TEST

/* ---- every pair, fully populated trees ---------------------------------- */

/* Values a populated upstream response would not hold for a translated
   request (tree_fill puts 1 and 2 everywhere): made what brokers send. */
static void
realistic(struct kr_node *n, int depth)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    uint16_t i;
    uint32_t k;

    for (i = 0; i < sd->nfields && depth < 16; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        struct kr_val *v = &n->vals[i];

        if (strcmp(f->name, "PatternType") == 0) {
            v->u.i = 3;         /* the filter asked LITERAL */
        } else if (strcmp(f->name, "PreferredReadReplica") == 0) {
            v->u.i = -1;        /* RackId "" sent: none chosen */
        } else if (strcmp(f->name, "DivergingEpoch") == 0 ||
                   strcmp(f->name, "SnapshotId") == 0) {
            v->present = 0;     /* followers and KRaft only */
        } else if (f->type == KR_T_STRUCT && v->u.node != NULL) {
            realistic(v->u.node, depth + 1);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
                   v->u.arr != NULL) {
            for (k = 0; k < v->u.arr->n; k++) {
                realistic(v->u.arr->items[k].u.node, depth + 1);
            }
        }
    }
}

START_TEST(test_every_pair)
{
    static const int16_t apis[] = {
        KR_API_PRODUCE, KR_API_FETCH, KR_API_LIST_OFFSETS,
        KR_API_OFFSET_COMMIT, KR_API_OFFSET_FETCH, KR_API_JOIN_GROUP,
        KR_API_CREATE_TOPICS, KR_API_DELETE_TOPICS,
        KR_API_OFFSET_FOR_LEADER_EPOCH, KR_API_DESCRIBE_CONFIGS,
        KR_API_DESCRIBE_ACLS, KR_API_CREATE_ACLS, KR_API_DELETE_ACLS
    };
    unsigned i, pairs = 0;
    int16_t from, to;

    for (i = 0; i < sizeof(apis) / sizeof(apis[0]); i++) {
        const struct kr_api_desc *ad = kr_api_get(apis[i]);

        for (from = 0; from <= 3; from++) {
            for (to = 1; to <= 13; to++) {
                struct kr_legacy_memo memo;
                struct kr_codec_err ce;
                struct kr_msg m;
                int rc, hv;

                if (!kr_legacy_translates(apis[i], from, to)) {
                    continue;
                }
                pairs++;
                /* The request, every field populated, up. */
                rc = kr_msg_request_new(&arena, &m, apis[i], from, 7, "c");
                ck_assert_int_eq(rc, KR_OK);
                ck_assert(tree_fill(&arena, m.body, "x", 0));
                rc = kr_legacy_request_up(&arena, &m, to, &memo, &ce);
                ck_assert_msg(rc == KR_OK, "%s v%d->v%d: %s at %s",
                              ad->name, from, to, ce.msg, ce.path);
                cur_src = no_payload;
                cur_len = 0;
                m = reread(&m);
                ck_assert_int_eq(m.api_version, to);

                /* Its response at `to`, populated, down. */
                hv = kr_response_header_version(apis[i], to);
                memset(&m, 0, sizeof(m));
                m.dir = KR_DIR_RESPONSE;
                m.api_key = apis[i];
                m.api_version = to;
                m.hdr_version = (int16_t)hv;
                m.header = kr_node_new(&arena, kr_response_header_struct,
                                       (int16_t)hv);
                m.body = kr_node_new(&arena, kr_api_root(ad, true, to), to);
                ck_assert(tree_fill(&arena, m.body, "x", 0));
                realistic(m.body, 0);
                rc = kr_legacy_response_down(&arena, &m, from, &memo, &ce);
                ck_assert_msg(rc == KR_OK, "%s response v%d->v%d: %s at %s",
                              ad->name, to, from, ce.msg, ce.path);
                cur_src = no_payload;
                cur_len = 0;
                m = reread(&m);
                ck_assert_int_eq(m.api_version, from);
            }
        }
    }
    ck_assert_uint_eq(pairs, 3 * 10 + 4 * 9 + 9 + 2 * 7 + 7 + 2 * 2 +
                             2 * 6 + 5 + 2 * 3 + 4 + 3 * 3);
}
END_TEST

static Suite *
legacy_suite(void)
{
    Suite *s = suite_create("legacy");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_list_offsets_v0);
    tcase_add_test(tc, test_list_offsets_v0_edges);
    tcase_add_test(tc, test_offset_commit_v0);
    tcase_add_test(tc, test_offset_commit_v1);
    tcase_add_test(tc, test_join_group_v0);
    tcase_add_test(tc, test_join_group_v1);
    tcase_add_test(tc, test_produce_v2);
    tcase_add_test(tc, test_fetch_v0);
    tcase_add_test(tc, test_offset_fetch_v0);
    tcase_add_test(tc, test_topics_admin_v0);
    tcase_add_test(tc, test_describe_configs_v0);
    tcase_add_test(tc, test_acls_v0);
    tcase_add_test(tc, test_translates_pick);
    tcase_add_test(tc, test_every_pair);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(legacy_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
