/*
 * check_json.c - unit tests for kr_json (the codec's JSON form).
 *
 * The frames below were built by tests/data/codec/mkframes.py, an
 * encoder independent of krelay's codec; they include the 4-byte size
 * prefix, which the tests strip.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kr_json.h"

/* ---- frames -------------------------------------------------------------- */

/* Metadata v12: CorrelationId 7, ClientId "krelay-test", topics
 * (uuid 00..0f, "orders") and (zero uuid, null), AllowAutoTopicCreation
 * true, IncludeTopicAuthorizedOperations false. */
static const char metadata_v12[] =
    "000000440003000c00000007000b6b72656c61792d7465737400030001020304050607"
    "08090a0b0c0d0e0f076f72646572730000000000000000000000000000000000000001"
    "0000";
/* ApiVersions v3 response, CorrelationId 2: ApiKeys (18,0,4) (3,0,13),
 * ThrottleTimeMs 100, SupportedFeatures [("metadata.version",1,27)],
 * FinalizedFeaturesEpoch 5, ZkMigrationReady true, unknown tag 7 01 02 03 */
static const char apiversions_v3_tags[] =
    "00000045000000020000030012000000040000030000000d00000000640400170211"
    "6d657461646174612e76657273696f6e0001001b000108000000000000000503010107"
    "03010203";
static const char apiversions_v3_plain[] =
    "0000001a000000010000030012000000040000030000000d000000000000";
/* ListOffsets v10: Timestamp INT64_MIN and INT64_MAX, CorrelationId
 * INT32_MAX, ClientId null, ReplicaId -1. */
static const char listoffsets_v10_ext[] =
    "0000003c0002000a7fffffffffff00ffffffff010202740300000000ffffffff800000"
    "00000000000000000001000000057fffffffffffffff00000000753000";
/* AlterClientQuotas v0: Values 1.5, NaN, Infinity, -Infinity, -0.0 */
static const char alterquotas_v0[] =
    "0000006d00310000000000090001710000000100000001000475736572ffff00000005"
    "001270726f64756365725f627974655f726174653ff8000000000000000001617ff800"
    "0000000000000001627ff000000000000000000163fff0000000000000010001648000"
    "0000000000000001";
/* ElectLeaders v2: unknown tag 5 "abc" in the header, tag 9 00 ff in body */
static const char electleaders_v2_tags[] =
    "0000001c002b00020000000b00017801050361626301000000ea6001090200ff";
/* Produce v9 with one 61-byte RecordBatch */
static const char produce_v9[] =
    "0000006100000009000000030001700000ffff0000753002076f726465727302000000"
    "003e0000000000000000000000310000000002000000000000ffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffff00000000000000";
/* Produce v3 (classic): TransactionalId "tx", records and null records */
static const char produce_v3[] =
    "000000720000000300000004000170000274780001000003e80000000100066f726465"
    "727300000002000000000000003d000000000000000000000031000000000200000000"
    "0000ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ff0000000000000001ffffffff";
/* FetchSnapshot v0 response: tagged CurrentLeader, 5 bytes of records */
static const char fetchsnapshot_v0[] =
    "0000004b0000002a0000000000000002076f7264657273020000000300000000000000"
    "024b6e00000011000000000000100000000000000000000006deadbeef000100090000"
    "000100000011000000";
static const char electleaders_v2_seed[] =
    "00000019002b0002000000000000000002010200000000000000000000";

/* ---- helpers ------------------------------------------------------------- */

struct frame {
    uint8_t *p;          /* whole frame, size prefix included */
    size_t len;
    struct iovec iov;
    struct kr_rbuf rb;   /* the payload (after the size prefix) */
};

static void
frame_load(struct frame *f, const char *hex)
{
    size_t i, n = strlen(hex);

    ck_assert_uint_eq(n % 2, 0);
    f->p = malloc(n / 2);
    ck_assert_ptr_nonnull(f->p);
    for (i = 0; i < n / 2; i++) {
        unsigned x;

        ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &x), 1);
        f->p[i] = (uint8_t)x;
    }
    f->len = n / 2;
    ck_assert_uint_ge(f->len, 4);
    ck_assert_uint_eq(((size_t)f->p[0] << 24 | (size_t)f->p[1] << 16 |
                       (size_t)f->p[2] << 8 | f->p[3]), f->len - 4);
    kr_rbuf_init_flat(&f->rb, &f->iov, f->p + 4, f->len - 4);
}

static struct kr_arena arena;

static void
setup(void)
{
    kr_arena_init(&arena, 0);
}

static void
teardown(void)
{
    kr_arena_free(&arena);
}

/* Decode a frame (request when key < 0) and return its JSON. */
static json_t *
decode_json(struct frame *f, const char *hex, int16_t key, int16_t ver,
            struct kr_msg *m)
{
    struct kr_codec_err err;
    json_t *j;
    int rc;

    frame_load(f, hex);
    memset(&err, 0, sizeof(err));
    if (key < 0) {
        rc = kr_decode_request(&arena, &f->rb, KR_DEC_STRICT, m, &err);
    } else {
        rc = kr_decode_response(&arena, &f->rb, key, ver, KR_DEC_STRICT, m,
                                &err);
    }
    ck_assert_msg(rc == KR_OK, "decode: %d %s at %s", rc, err.msg, err.path);
    j = kr_json_from_msg(m, &f->rb, 0, &err);
    ck_assert_msg(j != NULL, "to JSON: %s at %s", err.msg, err.path);
    return j;
}

/* Compact dump of j, compared to want exactly (field order included). */
static void
assert_dump(json_t *j, const char *want)
{
    char *s = json_dumps(j, JSON_COMPACT);

    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, want);
    free(s);
}

/* JSON -> msg -> bytes; returns the malloc'd payload and its length. */
static uint8_t *
encode_json(const json_t *j, size_t *len, struct kr_codec_err *err,
            int *rc_out)
{
    struct kr_json_recbuf recs;
    struct kr_wbuf w;
    struct kr_msg m;
    uint8_t *out = NULL;
    int rc;

    memset(&recs, 0, sizeof(recs));
    memset(&w, 0, sizeof(w));
    memset(err, 0, sizeof(*err));
    rc = kr_json_to_msg(&arena, j, &recs, &m, err);
    if (rc == KR_OK) {
        rc = kr_encode_msg(&m, &w, err);
    }
    if (rc == KR_OK) {
        out = kr_wbuf_flatten(&w, recs.p, recs.len);
        ck_assert_ptr_nonnull(out);
        *len = w.total;
    }
    kr_wbuf_free(&w);
    kr_json_recbuf_free(&recs);
    *rc_out = rc;
    return out;
}

/* decode -> JSON -> text -> JSON -> encode gives the same payload. */
static void
assert_roundtrip(const char *hex, int16_t key, int16_t ver)
{
    struct kr_codec_err err;
    struct frame f;
    struct kr_msg m;
    json_error_t jerr;
    json_t *j, *j2;
    uint8_t *out;
    size_t len = 0;
    char *text;
    int rc;

    j = decode_json(&f, hex, key, ver, &m);
    text = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    j2 = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(j2 != NULL, "reparse: %s", jerr.text);
    ck_assert(json_equal(j, j2));
    out = encode_json(j2, &len, &err, &rc);
    ck_assert_msg(rc == KR_OK, "encode %s: %d %s at %s", text, rc, err.msg,
                  err.path);
    ck_assert_uint_eq(len, f.len - 4);
    ck_assert_msg(memcmp(out, f.p + 4, len) == 0, "bytes differ for %s",
                  text);
    free(out);
    free(text);
    json_decref(j);
    json_decref(j2);
    free(f.p);
}

/* JSON text -> msg must fail with status and path. */
static void
assert_json_error(const char *text, int status, const char *path)
{
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    struct kr_msg m;
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    int rc;

    ck_assert_msg(j != NULL, "bad test JSON: %s", jerr.text);
    memset(&recs, 0, sizeof(recs));
    rc = kr_json_to_msg(&arena, j, &recs, &m, &err);
    ck_assert_msg(rc == status, "%s: got %d (%s at %s), want %d", text, rc,
                  err.msg, err.path, status);
    ck_assert_str_eq(err.path, path);
    ck_assert(err.msg[0] != '\0');
    kr_json_recbuf_free(&recs);
    json_decref(j);
    kr_arena_reset(&arena);
}

/* ---- base64 -------------------------------------------------------------- */

START_TEST(test_base64_vectors)
{
    /* RFC 4648 section 10 */
    static const char *const plain[] = {
        "", "f", "fo", "foo", "foob", "fooba", "foobar"
    };
    static const char *const b64[] = {
        "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"
    };
    char out[16];
    uint8_t dec[16];
    unsigned i;

    for (i = 0; i < KR_ARRAY_LEN(plain); i++) {
        size_t n = strlen(plain[i]);

        ck_assert_uint_eq(kr_base64_len(n), strlen(b64[i]) + 1);
        ck_assert_uint_eq(kr_base64_encode((const uint8_t *)plain[i], n, out),
                          strlen(b64[i]));
        ck_assert_str_eq(out, b64[i]);
        ck_assert_int_eq(kr_base64_decode(b64[i], strlen(b64[i]), dec),
                         (long)n);
        ck_assert(memcmp(dec, plain[i], n) == 0);
    }
    /* all 256 byte values, both alphabet ends */
    {
        uint8_t all[256], back[256];
        char text[400];
        size_t n;

        for (i = 0; i < 256; i++) {
            all[i] = (uint8_t)i;
        }
        n = kr_base64_encode(all, 256, text);
        ck_assert_uint_eq(n, 344);
        ck_assert_int_eq(strncmp(text, "AAECAwQF", 8), 0);
        ck_assert_str_eq(text + 336, "/P3+/w==");  /* python3 base64 */
        ck_assert_int_eq(kr_base64_decode(text, n, back), 256);
        ck_assert(memcmp(all, back, 256) == 0);
    }
}
END_TEST

START_TEST(test_base64_strict)
{
    static const char *const bad[] = {
        "Zg=", "Zg", "Zh==", "Zm9=", "Zm9v\n", "Z===", "=Zm9", "Zm=v",
        "Zg==Zg==", "Zm9v Zm9v", "Zm-v", "Zm_v", "===="
    };
    uint8_t dec[16];
    unsigned i;

    for (i = 0; i < KR_ARRAY_LEN(bad); i++) {
        ck_assert_msg(kr_base64_decode(bad[i], strlen(bad[i]), dec) == -1,
                      "accepted '%s'", bad[i]);
    }
}
END_TEST

/* ---- tree -> JSON ------------------------------------------------------- */

START_TEST(test_metadata_v12_request)
{
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, metadata_v12, -1, 0, &m);

    /* exact text: values, schema field order, uuid string form
     * (Kafka's Uuid.toString of 00..0f is base64url without padding:
     * python3 base64.urlsafe_b64encode(bytes(range(16))) -> AAEC...Dw==) */
    assert_dump(j,
        "{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":12,"
        "\"CorrelationId\":7,\"ClientId\":\"krelay-test\"},"
        "\"body\":{\"Topics\":[{\"TopicId\":\"AAECAwQFBgcICQoLDA0ODw\","
        "\"Name\":\"orders\"},{\"TopicId\":\"AAAAAAAAAAAAAAAAAAAAAA\","
        "\"Name\":null}],\"AllowAutoTopicCreation\":true,"
        "\"IncludeTopicAuthorizedOperations\":false}}");
    /* IncludeClusterAuthorizedOperations is versions 8-10: left out */
    ck_assert_ptr_null(json_object_get(json_object_get(j, "body"),
                                       "IncludeClusterAuthorizedOperations"));
    json_decref(j);
    free(f.p);
}
END_TEST

START_TEST(test_apiversions_v3_tagged)
{
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, apiversions_v3_tags, 18, 3, &m);

    assert_dump(j,
        "{\"apiKey\":18,\"apiVersion\":3,\"header\":{\"CorrelationId\":2},"
        "\"body\":{\"ErrorCode\":0,\"ApiKeys\":["
        "{\"ApiKey\":18,\"MinVersion\":0,\"MaxVersion\":4},"
        "{\"ApiKey\":3,\"MinVersion\":0,\"MaxVersion\":13}],"
        "\"ThrottleTimeMs\":100,"
        "\"SupportedFeatures\":[{\"Name\":\"metadata.version\","
        "\"MinVersion\":1,\"MaxVersion\":27}],"
        "\"FinalizedFeaturesEpoch\":5,\"ZkMigrationReady\":true,"
        "\"_unknownTaggedFields\":[{\"tag\":7,\"data\":\"AQID\"}]}}");
    json_decref(j);
    free(f.p);
}
END_TEST

START_TEST(test_apiversions_v3_no_tags)
{
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, apiversions_v3_plain, 18, 3, &m);

    /* tagged fields not on the wire are left out, defaults or not */
    assert_dump(j,
        "{\"apiKey\":18,\"apiVersion\":3,\"header\":{\"CorrelationId\":1},"
        "\"body\":{\"ErrorCode\":0,\"ApiKeys\":["
        "{\"ApiKey\":18,\"MinVersion\":0,\"MaxVersion\":4},"
        "{\"ApiKey\":3,\"MinVersion\":0,\"MaxVersion\":13}],"
        "\"ThrottleTimeMs\":0}}");
    json_decref(j);
    free(f.p);
}
END_TEST

START_TEST(test_int64_extremes)
{
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, listoffsets_v10_ext, -1, 0, &m);
    json_t *parts = json_object_get(json_array_get(json_object_get(
        json_object_get(j, "body"), "Topics"), 0), "Partitions");
    json_t *h = json_object_get(j, "header");

    ck_assert_int_eq(json_integer_value(json_object_get(
        json_array_get(parts, 0), "Timestamp")), INT64_MIN);
    ck_assert_int_eq(json_integer_value(json_object_get(
        json_array_get(parts, 1), "Timestamp")), INT64_MAX);
    ck_assert_int_eq(json_integer_value(json_object_get(
        json_array_get(parts, 0), "CurrentLeaderEpoch")), -1);
    ck_assert_int_eq(json_integer_value(json_object_get(h, "CorrelationId")),
                     INT32_MAX);
    ck_assert(json_is_null(json_object_get(h, "ClientId")));
    ck_assert_int_eq(json_integer_value(json_object_get(
        json_object_get(j, "body"), "ReplicaId")), -1);
    assert_dump(json_array_get(parts, 0),
        "{\"PartitionIndex\":0,\"CurrentLeaderEpoch\":-1,"
        "\"Timestamp\":-9223372036854775808}");
    assert_dump(json_array_get(parts, 1),
        "{\"PartitionIndex\":1,\"CurrentLeaderEpoch\":5,"
        "\"Timestamp\":9223372036854775807}");
    json_decref(j);
    free(f.p);
}
END_TEST

START_TEST(test_float64)
{
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, alterquotas_v0, -1, 0, &m);
    json_t *ops = json_object_get(json_array_get(json_object_get(
        json_object_get(j, "body"), "Entries"), 0), "Ops");
    json_t *v;

    ck_assert_uint_eq(json_array_size(ops), 5);
    v = json_object_get(json_array_get(ops, 0), "Value");
    ck_assert(json_is_real(v));
    ck_assert(json_real_value(v) == 1.5);
    ck_assert_str_eq(json_string_value(json_object_get(
        json_array_get(ops, 1), "Value")), "NaN");
    ck_assert_str_eq(json_string_value(json_object_get(
        json_array_get(ops, 2), "Value")), "Infinity");
    ck_assert_str_eq(json_string_value(json_object_get(
        json_array_get(ops, 3), "Value")), "-Infinity");
    v = json_object_get(json_array_get(ops, 4), "Value");
    ck_assert(json_is_real(v));
    ck_assert(json_real_value(v) == 0.0 && signbit(json_real_value(v)));
    ck_assert(json_is_true(json_object_get(json_array_get(ops, 3),
                                           "Remove")));
    assert_dump(json_object_get(json_array_get(json_object_get(
        json_object_get(j, "body"), "Entries"), 0), "Entity"),
        "[{\"EntityType\":\"user\",\"EntityName\":null}]");
    json_decref(j);
    free(f.p);
}
END_TEST

START_TEST(test_unknown_tags)
{
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, electleaders_v2_tags, -1, 0, &m);

    assert_dump(j,
        "{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":2,"
        "\"CorrelationId\":11,\"ClientId\":\"x\","
        "\"_unknownTaggedFields\":[{\"tag\":5,\"data\":\"YWJj\"}]},"
        "\"body\":{\"ElectionType\":1,\"TopicPartitions\":null,"
        "\"TimeoutMs\":60000,"
        "\"_unknownTaggedFields\":[{\"tag\":9,\"data\":\"AP8=\"}]}}");
    json_decref(j);
    free(f.p);
}
END_TEST

START_TEST(test_records)
{
    struct kr_codec_err err;
    struct frame f;
    struct kr_msg m;
    json_t *j = decode_json(&f, produce_v3, -1, 0, &m);
    json_t *pd = json_object_get(json_array_get(json_object_get(
        json_object_get(j, "body"), "TopicData"), 0), "PartitionData");
    const char *b64 = json_string_value(json_object_get(
        json_array_get(pd, 0), "Records"));
    uint8_t raw[64];

    ck_assert_ptr_nonnull(b64);
    ck_assert_uint_eq(strlen(b64), 84);   /* 61 bytes */
    ck_assert_int_eq(kr_base64_decode(b64, strlen(b64), raw), 61);
    /* the batch: payload offset 45, after its int32 length */
    ck_assert(memcmp(raw, f.p + 4 + 45, 61) == 0);
    ck_assert(json_is_null(json_object_get(json_array_get(pd, 1),
                                           "Records")));
    ck_assert_str_eq(json_string_value(json_object_get(
        json_object_get(j, "body"), "TransactionalId")), "tx");
    json_decref(j);

    /* records as their size, for logs */
    j = kr_json_from_msg(&m, &f.rb, KR_JSON_RECORDS_SIZE, &err);
    ck_assert_ptr_nonnull(j);
    pd = json_object_get(json_array_get(json_object_get(
        json_object_get(j, "body"), "TopicData"), 0), "PartitionData");
    ck_assert_int_eq(json_integer_value(json_object_get(
        json_array_get(pd, 0), "Records")), 61);
    json_decref(j);

    /* a records slice outside the payload is an error, not a read */
    {
        struct iovec iov;
        struct kr_rbuf shortrb;

        kr_rbuf_init_flat(&shortrb, &iov, f.p + 4, 60);
        j = kr_json_from_msg(&m, &shortrb, 0, &err);
        ck_assert_ptr_null(j);
        ck_assert_int_eq(err.status, KR_EPROTO);
        ck_assert_str_eq(err.path, "TopicData[0].PartitionData[0].Records");
        j = kr_json_from_msg(&m, NULL, 0, &err);
        ck_assert_ptr_null(j);
        ck_assert_int_eq(err.status, KR_EPROTO);
    }
    free(f.p);
}
END_TEST

START_TEST(test_records_segmented)
{
    /* the same frame split over three segments gives the same JSON */
    struct kr_codec_err err;
    struct frame f;
    struct kr_msg m, m2;
    struct iovec iov[3];
    struct kr_rbuf rb;
    json_t *j = decode_json(&f, produce_v9, -1, 0, &m);
    json_t *j2;
    size_t n = f.len - 4;

    iov[0].iov_base = f.p + 4;
    iov[0].iov_len = 40;
    iov[1].iov_base = f.p + 44;
    iov[1].iov_len = 20;
    iov[2].iov_base = f.p + 64;
    iov[2].iov_len = n - 60;
    rb.seg = iov;
    rb.nseg = 3;
    rb.len = n;
    ck_assert_int_eq(kr_decode_request(&arena, &rb, KR_DEC_STRICT, &m2, &err),
                     KR_OK);
    j2 = kr_json_from_msg(&m2, &rb, 0, &err);
    ck_assert_ptr_nonnull(j2);
    ck_assert(json_equal(j, j2));
    json_decref(j);
    json_decref(j2);
    free(f.p);
}
END_TEST

START_TEST(test_invalid_utf8_lossy)
{
    /* a hand-built header node with a ClientId that is not UTF-8 */
    static const uint8_t bad[] = {'a', 0xff, 'b', 0xc3, 0xa9};
    struct kr_codec_err err;
    struct kr_node *n = kr_node_new(&arena, kr_request_header_struct, 1);
    struct kr_val *cid;
    json_t *j;

    ck_assert_ptr_nonnull(n);
    cid = kr_node_get(n, "ClientId");
    ck_assert_ptr_nonnull(cid);
    cid->u.s.p = bad;
    cid->u.s.len = (int32_t)sizeof(bad);
    cid->is_null = 0;
    kr_node_get(n, "RequestApiKey")->u.i = 3;
    j = kr_json_from_node(n, NULL, 0, &err);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "ClientId")),
                     "a\xef\xbf\xbd" "b\xc3\xa9");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "RequestApiKey")),
                     3);
    json_decref(j);
}
END_TEST

/* ---- JSON -> tree -> bytes ---------------------------------------------- */

START_TEST(test_roundtrip)
{
    assert_roundtrip(metadata_v12, -1, 0);
    assert_roundtrip(listoffsets_v10_ext, -1, 0);
    assert_roundtrip(alterquotas_v0, -1, 0);
    assert_roundtrip(electleaders_v2_tags, -1, 0);
    assert_roundtrip(electleaders_v2_seed, -1, 0);
    assert_roundtrip(produce_v9, -1, 0);
    assert_roundtrip(produce_v3, -1, 0);
    assert_roundtrip(apiversions_v3_tags, 18, 3);
    assert_roundtrip(apiversions_v3_plain, 18, 3);
    assert_roundtrip(fetchsnapshot_v0, 59, 0);
    /*
     * An unknown tag above INT32_MAX (uvarint ff ff ff ff 0a = 2952790015):
     * the codec keeps it as Kafka's Java reader does, so the JSON form must
     * carry it back (found by the response fuzzer).
     */
    assert_roundtrip("00000012000000000000010000000001ffffffff0a00", 18, 3);
}
END_TEST

START_TEST(test_defaults)
{
    /* missing fields keep their defaults: Topics [] (compact 01),
     * AllowAutoTopicCreation true, IncludeTopicAuthorizedOperations false;
     * header ClientId "" */
    static const uint8_t want[] = {
        0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x01, 0x00, 0x00
    };
    struct kr_codec_err err;
    json_t *j = json_pack("{s:{s:i, s:i}}", "header", "RequestApiKey", 3,
                          "RequestApiVersion", 12);
    uint8_t *out;
    size_t len = 0;
    int rc;

    out = encode_json(j, &len, &err, &rc);
    ck_assert_msg(rc == KR_OK, "%s at %s", err.msg, err.path);
    ck_assert_uint_eq(len, sizeof(want));
    ck_assert(memcmp(out, want, len) == 0);
    free(out);
    json_decref(j);
}
END_TEST

START_TEST(test_tagged_given_is_written)
{
    /* FinalizedFeaturesEpoch given equal to its default (-1) is still
     * written: tag 1, size 8, ff..ff; header v0 has no tag section */
    static const uint8_t want[] = {
        0x00, 0x00, 0x00, 0x09,                   /* CorrelationId 9 */
        0x00, 0x00, 0x01,                         /* ErrorCode, ApiKeys [] */
        0x00, 0x00, 0x00, 0x00,                   /* ThrottleTimeMs */
        0x01, 0x01, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
    };
    struct kr_codec_err err;
    json_error_t jerr;
    json_t *j = json_loads(
        "{\"apiKey\":18,\"apiVersion\":3,\"header\":{\"CorrelationId\":9},"
        "\"body\":{\"FinalizedFeaturesEpoch\":-1}}", 0, &jerr);
    uint8_t *out;
    size_t len = 0;
    int rc;

    ck_assert_ptr_nonnull(j);
    out = encode_json(j, &len, &err, &rc);
    ck_assert_msg(rc == KR_OK, "%s at %s", err.msg, err.path);
    ck_assert_uint_eq(len, sizeof(want));
    ck_assert(memcmp(out, want, len) == 0);
    free(out);
    json_decref(j);
}
END_TEST

START_TEST(test_msg_fields)
{
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    struct kr_msg m;
    json_error_t jerr;
    json_t *j = json_loads(
        "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":9,"
        "\"CorrelationId\":42,\"ClientId\":null},"
        "\"body\":{\"TopicData\":[{\"Name\":\"a\",\"PartitionData\":["
        "{\"Index\":0,\"Records\":\"AQID\"},{\"Index\":1,\"Records\":\"BAU=\"}"
        "]}]}}", 0, &jerr);

    ck_assert_ptr_nonnull(j);
    memset(&recs, 0, sizeof(recs));
    ck_assert_int_eq(kr_json_to_msg(&arena, j, &recs, &m, &err), KR_OK);
    ck_assert_int_eq(m.dir, KR_DIR_REQUEST);
    ck_assert_int_eq(m.api_key, 0);
    ck_assert_int_eq(m.api_version, 9);
    ck_assert_int_eq(m.hdr_version, 2);
    ck_assert_int_eq(m.correlation_id, 42);
    ck_assert(kr_node_get(m.header, "ClientId")->is_null);
    /* records bytes sit back to back in the side buffer */
    ck_assert_uint_eq(recs.len, 5);
    ck_assert(memcmp(recs.p, "\x01\x02\x03\x04\x05", 5) == 0);
    {
        struct kr_val *td = kr_node_get(m.body, "TopicData");
        struct kr_node *t = td->u.arr->items[0].u.node;
        struct kr_array *pd = kr_node_get(t, "PartitionData")->u.arr;
        struct kr_val *r1 = kr_node_get(pd->items[1].u.node, "Records");

        ck_assert_uint_eq(pd->n, 2);
        ck_assert_uint_eq(r1->u.rec.off, 3);
        ck_assert_int_eq(r1->u.rec.len, 2);
    }
    kr_json_recbuf_free(&recs);
    json_decref(j);
}
END_TEST

START_TEST(test_json_errors)
{
    assert_json_error("[]", KR_EPROTO, "");
    assert_json_error("{\"header\":{\"RequestApiKey\":3}}", KR_EPROTO,
                      "header.RequestApiVersion");
    assert_json_error("{\"body\":{}}", KR_EPROTO, "header");
    assert_json_error("{\"hdr\":{}}", KR_EPROTO, "hdr");
    assert_json_error("{\"apiKey\":18}", KR_EPROTO, "apiVersion");
    assert_json_error("{\"apiKey\":18,\"apiVersion\":99}", KR_EUNSUPPORTED,
                      "apiKey");
    assert_json_error("{\"header\":{\"RequestApiKey\":1000,"
                      "\"RequestApiVersion\":0}}", KR_EUNSUPPORTED,
                      "header.RequestApiKey");
    assert_json_error("{\"header\":{\"RequestApiKey\":3,"
                      "\"RequestApiVersion\":\"12\"}}", KR_EPROTO,
                      "header.RequestApiVersion");
    /* unknown field, at depth */
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12},\"body\":{\"Topics\":[{\"Name\":\"a\"},"
                      "{\"Nmae\":\"b\"}]}}", KR_EPROTO, "Topics[1].Nmae");
    /* a field the version lacks (8-10) */
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12},\"body\":{\"IncludeClusterAuthorizedOperations\":"
                      "true}}", KR_EPROTO,
                      "IncludeClusterAuthorizedOperations");
    /* wrong types */
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12},\"body\":{\"AllowAutoTopicCreation\":1}}",
                      KR_EPROTO, "AllowAutoTopicCreation");
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12,\"CorrelationId\":1.5}}", KR_EPROTO,
                      "header.CorrelationId");
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12},\"body\":{\"Topics\":{}}}", KR_EPROTO, "Topics");
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12},\"body\":{\"Topics\":[7]}}", KR_EPROTO,
                      "Topics[0]");
    /* integer ranges */
    assert_json_error("{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":"
                      "2},\"body\":{\"ElectionType\":128}}", KR_EPROTO,
                      "ElectionType");
    assert_json_error("{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":"
                      "2,\"CorrelationId\":2147483648}}", KR_EPROTO,
                      "header.CorrelationId");
    /* null where the version allows none (Name nullable from v10) */
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "9},\"body\":{\"Topics\":[{\"Name\":null}]}}",
                      KR_EPROTO, "Topics[0].Name");
    assert_json_error("{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":"
                      "2},\"body\":{\"TimeoutMs\":null}}", KR_EPROTO,
                      "TimeoutMs");
    /* bad uuid, bad base64 */
    assert_json_error("{\"header\":{\"RequestApiKey\":3,\"RequestApiVersion\":"
                      "12},\"body\":{\"Topics\":[{\"TopicId\":\"AAEC\"}]}}",
                      KR_EPROTO, "Topics[0].TopicId");
    assert_json_error("{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":"
                      "9},\"body\":{\"TopicData\":[{\"PartitionData\":["
                      "{\"Records\":\"AQI\"}]}]}}", KR_EPROTO,
                      "TopicData[0].PartitionData[0].Records");
    /* unknown tagged fields: a known tag, a non-flexible version, dups */
    assert_json_error("{\"apiKey\":18,\"apiVersion\":3,\"body\":"
                      "{\"_unknownTaggedFields\":[{\"tag\":1,\"data\":\"\"}]}}",
                      KR_EPROTO, "_unknownTaggedFields[0]");
    assert_json_error("{\"apiKey\":18,\"apiVersion\":2,\"body\":"
                      "{\"_unknownTaggedFields\":[{\"tag\":9,\"data\":\"\"}]}}",
                      KR_EPROTO, "_unknownTaggedFields");
    assert_json_error("{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":"
                      "2,\"_unknownTaggedFields\":[{\"tag\":9,\"data\":\"\"},"
                      "{\"tag\":9,\"data\":\"AA==\"}]}}", KR_EPROTO,
                      "header._unknownTaggedFields");
    assert_json_error("{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":"
                      "2,\"_unknownTaggedFields\":[{\"tag\":9,\"data\":\"@\"}]"
                      "}}", KR_EPROTO, "header._unknownTaggedFields[0].data");
}
END_TEST

START_TEST(test_unknown_tags_sorted)
{
    /* unknown tags given out of order are written in ascending order */
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    struct kr_msg m;
    json_error_t jerr;
    json_t *j = json_loads(
        "{\"header\":{\"RequestApiKey\":43,\"RequestApiVersion\":2,"
        "\"_unknownTaggedFields\":[{\"tag\":9,\"data\":\"AA==\"},"
        "{\"tag\":4,\"data\":\"\"}]}}", 0, &jerr);

    ck_assert_ptr_nonnull(j);
    memset(&recs, 0, sizeof(recs));
    ck_assert_int_eq(kr_json_to_msg(&arena, j, &recs, &m, &err), KR_OK);
    ck_assert_uint_eq(m.header->nunknown, 2);
    ck_assert_uint_eq(m.header->unknown[0].tag, 4);
    ck_assert_int_eq(m.header->unknown[0].data.len, 0);
    ck_assert_uint_eq(m.header->unknown[1].tag, 9);
    ck_assert_int_eq(m.header->unknown[1].data.len, 1);
    ck_assert_uint_eq(m.header->unknown[1].data.p[0], 0);
    kr_json_recbuf_free(&recs);
    json_decref(j);
}
END_TEST

static Suite *
json_suite(void)
{
    Suite *s = suite_create("kr_json");
    TCase *tc = tcase_create("base64");

    tcase_add_test(tc, test_base64_vectors);
    tcase_add_test(tc, test_base64_strict);
    suite_add_tcase(s, tc);

    tc = tcase_create("to_json");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_metadata_v12_request);
    tcase_add_test(tc, test_apiversions_v3_tagged);
    tcase_add_test(tc, test_apiversions_v3_no_tags);
    tcase_add_test(tc, test_int64_extremes);
    tcase_add_test(tc, test_float64);
    tcase_add_test(tc, test_unknown_tags);
    tcase_add_test(tc, test_records);
    tcase_add_test(tc, test_records_segmented);
    tcase_add_test(tc, test_invalid_utf8_lossy);
    suite_add_tcase(s, tc);

    tc = tcase_create("from_json");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_tagged_given_is_written);
    tcase_add_test(tc, test_msg_fields);
    tcase_add_test(tc, test_json_errors);
    tcase_add_test(tc, test_unknown_tags_sorted);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(json_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
