/*
 * check_audit.c - unit tests for kr_audit (line formatting, redaction of
 * secrets, the queued sink) and the kr_json redaction hook.
 *
 * Messages are written in krelay-codec's JSON form, encoded to Kafka bytes
 * with the codec and decoded again, so the audit code sees trees exactly
 * as the proxy decodes them.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kr_api_keys.h"
#include "kr_audit.h"
#include "kr_json.h"
#include "kr_log.h"
#include "kr_scan.h"
#include "kr_topics.h"
#include "kr_test.h"
#include "tree_fill.h"

/* ---- helpers ------------------------------------------------------------- */

static struct kr_arena arena;
static uint8_t *frames[16];
static unsigned nframes;
static char tmpdir[64];

static void
setup(void)
{
    kr_arena_init(&arena, 0);
    nframes = 0;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_audit.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
teardown(void)
{
    char cmd[128];

    while (nframes > 0) {
        free(frames[--nframes]);
    }
    kr_arena_free(&arena);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* JSON text -> decoded tree in m (kr_test.h); the frame is kept until
   teardown. */
static void
build(const char *text, struct kr_msg *m)
{
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    frames[nframes++] = kr_test_build(&arena, text, m);
}

static void
base_info(struct kr_audit_info *info, const struct kr_msg *req)
{
    memset(info, 0, sizeof(*info));
    info->time_us = INT64_C(1764460800123456);
    info->peer.listener = "plain";
    info->peer.client_addr = "10.0.0.7";
    info->peer.client_port = 51234;
    info->api_key = req->api_key;
    info->api_version = req->api_version;
    info->correlation_id = req->correlation_id;
    info->req_bytes = 100;
    info->rsp_bytes = 50;
    info->upstream_us = 10;
    info->total_us = 12;
    info->actions = KR_AUDIT_FORWARDED;
}

/*
 * An audit line parsed, after checking that it is canonical: JSON whose
 * keys each appear once (JSON_REJECT_DUPLICATES: kr_audit writes keys
 * directly, a key written twice would be a bug a tree used to hide) and
 * that jansson writes back byte for byte (json_dumps keeps the key
 * order).  The caller json_decref's the result.
 */
static json_t *
jload(const char *line)
{
    json_error_t jerr;
    json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
    char *back;

    ck_assert_msg(j != NULL, "line is not JSON (or has a key twice): %s: "
                  "%s", jerr.text, line);
    back = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(back);
    ck_assert_msg(strcmp(back, line) == 0, "not jansson's bytes:\n%s\n%s",
                  line, back);
    free(back);
    return j;
}

/* The audit line (with bodies) of a request and its response (may be
 * NULL); the caller frees it.  The line must parse as JSON. */
static char *
line_of(const char *req_json, const char *rsp_json)
{
    struct kr_audit_info info;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    char *line;

    build(req_json, &req);
    if (rsp_json != NULL) {
        build(rsp_json, &rsp);
    }
    r = kr_audit_capture(&req, NULL, NULL, true);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    line = kr_audit_format(&info, r, rsp_json != NULL ? &rsp : NULL, true);
    kr_audit_req_free(r);
    ck_assert_ptr_nonnull(line);
    json_decref(jload(line));
    return line;
}

/* secret must appear nowhere in line, raw or base64; the marker must. */
static void
assert_redacted(const char *line, const char *secret)
{
    char b64[256];

    ck_assert_uint_lt(kr_base64_len(strlen(secret)), sizeof(b64));
    kr_base64_encode((const uint8_t *)secret, strlen(secret), b64);
    ck_assert_msg(strstr(line, secret) == NULL, "secret %s in %s", secret,
                  line);
    ck_assert_msg(strstr(line, b64) == NULL, "base64 secret %s in %s", b64,
                  line);
    ck_assert_msg(strstr(line, "\"" KR_JSON_REDACTED "\"") != NULL,
                  "no marker in %s", line);
}

/* ---- formatting ---------------------------------------------------------- */

static const char produce_req[] =
    "{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 9,"
    " \"CorrelationId\": 17, \"ClientId\": \"rdk\"},"
    " \"body\": {\"Acks\": -1, \"TimeoutMs\": 30000, \"TopicData\": ["
    "  {\"Name\": \"orders\", \"PartitionData\": ["
    "    {\"Index\": 0, \"Records\": \"AAECAw==\"},"
    "    {\"Index\": 1, \"Records\": \"AA==\"},"
    "    {\"Index\": 2, \"Records\": \"AA==\"}]},"
    "  {\"Name\": \"payments\", \"PartitionData\": ["
    "    {\"Index\": 0, \"Records\": \"AAAA\"}]},"
    "  {\"Name\": \"orders\", \"PartitionData\": ["
    "    {\"Index\": 5, \"Records\": \"AA==\"}]}]}}";
static const char produce_rsp[] =
    "{\"apiKey\": 0, \"apiVersion\": 9, \"header\": {\"CorrelationId\": 17},"
    " \"body\": {\"ThrottleTimeMs\": 0, \"Responses\": ["
    "  {\"Name\": \"orders\", \"PartitionResponses\": ["
    "    {\"Index\": 0, \"ErrorCode\": 6, \"BaseOffset\": -1},"
    "    {\"Index\": 1, \"ErrorCode\": 6, \"BaseOffset\": -1},"
    "    {\"Index\": 2, \"ErrorCode\": 0, \"BaseOffset\": 42}]},"
    "  {\"Name\": \"payments\", \"PartitionResponses\": ["
    "    {\"Index\": 0, \"ErrorCode\": 3, \"BaseOffset\": -1}]},"
    "  {\"Name\": \"orders\", \"PartitionResponses\": ["
    "    {\"Index\": 5, \"ErrorCode\": 6, \"BaseOffset\": -1}]}]}}";

START_TEST(test_format_pair)
{
    struct kr_audit_info info;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    json_t *j, *b;
    char *line;

    build(produce_req, &req);
    build(produce_rsp, &rsp);
    r = kr_audit_capture(&req, NULL, NULL, false);
    ck_assert_ptr_nonnull(r);
    memset(&info, 0, sizeof(info));
    info.time_us = INT64_C(1764460800123456);
    info.peer.instance = "proxy-1";
    info.peer.conn_id = "c#1.42";
    info.peer.listener = "plain";
    info.peer.client_addr = "10.0.0.7";
    info.peer.client_port = 51234;
    info.peer.route = "node";
    info.peer.node_id = 3;
    info.peer.upstream_addr = "kafka-3:9092";
    info.peer.client_sw_name = "librdkafka";
    info.peer.client_sw_version = "2.0.2";
    info.peer.principal = "User:alice";
    info.api_key = 0;
    info.api_version = 9;
    info.translated = true;
    info.upstream_version = 7;
    info.correlation_id = 17;
    info.req_bytes = 1200;
    info.rsp_bytes = 80;
    info.upstream_us = 1500;
    info.total_us = 1720;
    info.actions = KR_AUDIT_FORWARDED | KR_AUDIT_REWRITTEN |
                   KR_AUDIT_THROTTLED;
    line = kr_audit_format(&info, r, &rsp, false);
    ck_assert_ptr_nonnull(line);
    ck_assert_str_eq(line,
        "{\"time\":\"2025-11-30T00:00:00.123456Z\",\"type\":\"request\","
        "\"instance\":\"proxy-1\",\"conn_id\":\"c#1.42\","
        "\"listener\":\"plain\",\"client_addr\":\"10.0.0.7\","
        "\"client_port\":51234,\"route\":\"node\",\"node_id\":3,"
        "\"upstream_addr\":\"kafka-3:9092\",\"client_id\":\"rdk\","
        "\"client_software_name\":\"librdkafka\","
        "\"client_software_version\":\"2.0.2\","
        "\"principal\":\"User:alice\",\"api\":\"Produce\",\"api_key\":0,"
        "\"api_version\":9,\"upstream_version\":7,\"correlation_id\":17,"
        "\"request_bytes\":1200,"
        "\"response_bytes\":80,\"upstream_us\":1500,\"total_us\":1720,"
        "\"acks\":-1,"
        "\"topics\":[{\"name\":\"orders\",\"partitions\":4,"
        "\"record_bytes\":7},"
        "{\"name\":\"payments\",\"partitions\":1,\"record_bytes\":3}],"
        "\"errors\":{\"UNKNOWN_TOPIC_OR_PARTITION\":1,"
        "\"NOT_LEADER_OR_FOLLOWER\":3},"
        "\"actions\":[\"forwarded\",\"rewritten\",\"throttled\"]}");
    free(line);

    /* No response (Acks=0), ClientId given by the session, no principal,
     * every action. */
    info.rsp_bytes = 0;
    info.peer.principal = NULL;
    info.peer.route = "bootstrap";
    info.translated = false;
    info.client_id = "from-session";
    info.actions = 0x7f;
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    j = jload(line);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "client_id")),
                     "from-session");
    ck_assert_ptr_null(json_object_get(j, "principal"));
    ck_assert_str_eq(json_string_value(json_object_get(j, "route")),
                     "bootstrap");
    ck_assert_ptr_null(json_object_get(j, "node_id"));
    ck_assert_ptr_null(json_object_get(j, "upstream_version"));
    ck_assert_ptr_null(json_object_get(j, "response_bytes"));
    ck_assert_ptr_null(json_object_get(j, "upstream_us"));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "total_us")),
                     1720);
    ck_assert_uint_eq(json_object_size(json_object_get(j, "errors")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "actions")), 7);
    ck_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(j, "actions"), 6)), "faulted");
    ck_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(j, "actions"), 3)), "denied");
    json_decref(j);
    free(line);
    kr_audit_req_free(r);

    /* With bodies: records shown as their size. */
    r = kr_audit_capture(&req, NULL, NULL, true);
    ck_assert_ptr_nonnull(r);
    info.rsp_bytes = 80;
    line = kr_audit_format(&info, r, &rsp, true);
    ck_assert_ptr_nonnull(line);
    j = jload(line);
    ck_assert_ptr_nonnull(j);
    b = json_object_get(j, "request_body");
    ck_assert_int_eq(json_integer_value(json_object_get(b, "Acks")), -1);
    b = json_array_get(json_object_get(b, "TopicData"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(b, "Name")),
                     "orders");
    b = json_array_get(json_object_get(b, "PartitionData"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "Records")), 4);
    b = json_object_get(j, "response_body");
    b = json_array_get(json_object_get(b, "Responses"), 2);
    b = json_array_get(json_object_get(b, "PartitionResponses"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "Index")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "ErrorCode")), 6);
    json_decref(j);
    free(line);
    kr_audit_req_free(r);
}
END_TEST

START_TEST(test_format_ids_unknown_api_conn)
{
    struct kr_topic_map *map = kr_topic_map_new();
    static const uint8_t id[16] = {
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    };
    struct kr_audit_info info;
    struct kr_audit_conn cl;
    struct kr_audit_req *r;
    struct kr_msg req;
    char *line;

    /* Fetch v13 by TopicId, resolved at capture time; null ClientId. */
    ck_assert(kr_topic_map_put(map, id, "orders", 6));
    build("{\"header\": {\"RequestApiKey\": 1, \"RequestApiVersion\": 13,"
          " \"CorrelationId\": 3, \"ClientId\": null},"
          " \"body\": {\"Topics\": ["
          "  {\"TopicId\": \"AAECAwQFBgcICQoLDA0ODw\", \"Partitions\": ["
          "    {\"Partition\": 0}, {\"Partition\": 1}]}]}}", &req);
    r = kr_audit_capture(&req, NULL, map, false);
    kr_topic_map_free(map);          /* the capture keeps its own copy */
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.time_us = -1;               /* before the epoch: still RFC 3339 */
    info.api_key = 999;              /* unknown to the tables */
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strstr(line, "\"time\":\"1969-12-31T23:59:59.999999Z\"")
                  != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"client_id\":null,") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"api\":\"UNKNOWN\",\"api_key\":999,")
                  != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"topics\":[{\"name\":\"orders\","
                         "\"partitions\":2}]") != NULL, "%s", line);
    free(line);
    kr_audit_req_free(r);

    /* issue 13: a request krelay could not decode, refused: what the
       header gave, the action, the decode error and a note */
    info.actions = KR_AUDIT_REFUSED;
    info.rsp_bytes = 0;               /* refused: no response */
    info.client_id = "evil";
    info.decode_error = "DeleteTopics v7 is unknown to krelay's schema "
                        "tables (v0-v6)";
    info.note = "n\"1";
    info.api_key = 20;
    info.api_version = 7;
    line = kr_audit_format(&info, NULL, NULL, false);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strstr(line, "\"client_id\":\"evil\",\"api\":"
                         "\"DeleteTopics\",\"api_key\":20,"
                         "\"api_version\":7,") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"topics\":[],\"errors\":{},"
                         "\"actions\":[\"refused\"],\"decode_error\":"
                         "\"DeleteTopics v7 is unknown to krelay's schema "
                         "tables (v0-v6)\",\"note\":\"n\\\"1\"}")
                  != NULL, "%s", line);
    ck_assert_msg(strstr(line, "response_bytes") == NULL, "%s", line);
    free(line);
    /* a response came but was not decoded: its errors are unknown */
    info.actions = KR_AUDIT_FORWARDED;
    info.rsp_bytes = 50;
    line = kr_audit_format(&info, NULL, NULL, false);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strstr(line, "\"response_bytes\":50,") != NULL &&
                  strstr(line, "\"errors\":null,\"actions\":"
                         "[\"forwarded\"],\"decode_error\":") != NULL,
                  "%s", line);
    free(line);
    info.decode_error = NULL;
    info.note = NULL;

    /* Connection lines. */
    memset(&cl, 0, sizeof(cl));
    cl.event = "open";
    cl.time_us = INT64_C(1764460800000001);
    cl.peer.instance = "proxy-1";
    cl.peer.conn_id = "c#0.9";
    cl.peer.listener = "tls";
    cl.peer.client_addr = "::1";
    cl.peer.client_port = 9;
    cl.peer.route = "bootstrap";
    cl.peer.client_sw_name = "";        /* empty: omitted */
    line = kr_audit_format_conn(&cl);
    ck_assert_ptr_nonnull(line);
    ck_assert_str_eq(line,
        "{\"time\":\"2025-11-30T00:00:00.000001Z\",\"type\":\"connection\","
        "\"instance\":\"proxy-1\",\"conn_id\":\"c#0.9\","
        "\"listener\":\"tls\",\"client_addr\":\"::1\",\"client_port\":9,"
        "\"route\":\"bootstrap\",\"event\":\"open\"}");
    free(line);
    cl.event = "close";
    cl.time_us = INT64_C(1764460801000000);
    cl.peer.route = "node";
    cl.peer.node_id = 0;
    cl.peer.upstream_addr = "[::1]:9093";
    cl.peer.client_sw_name = "kcat";
    cl.peer.client_sw_version = "1.7.1";
    cl.peer.principal = "User:bob";
    cl.client_id = "rdk\n";
    cl.cause = "client";
    cl.reason = "client closed the connection";
    cl.bytes_from_client = 4096;
    cl.bytes_to_client = UINT64_C(5000000000);
    cl.requests = 31;
    cl.duration_us = 1000000;
    line = kr_audit_format_conn(&cl);
    ck_assert_ptr_nonnull(line);
    ck_assert_str_eq(line,
        "{\"time\":\"2025-11-30T00:00:01.000000Z\",\"type\":\"connection\","
        "\"instance\":\"proxy-1\",\"conn_id\":\"c#0.9\","
        "\"listener\":\"tls\",\"client_addr\":\"::1\",\"client_port\":9,"
        "\"route\":\"node\",\"node_id\":0,"
        "\"upstream_addr\":\"[::1]:9093\",\"client_id\":\"rdk\\n\","
        "\"client_software_name\":\"kcat\","
        "\"client_software_version\":\"1.7.1\","
        "\"principal\":\"User:bob\",\"event\":\"close\","
        "\"cause\":\"client\",\"reason\":\"client closed the connection\","
        "\"bytes_from_client\":4096,\"bytes_to_client\":5000000000,"
        "\"requests\":31,\"duration_us\":1000000}");
    free(line);
    /* the session keeps the first 48 bytes of a longer ClientId */
    cl.client_id_cut = true;
    line = kr_audit_format_conn(&cl);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strstr(line, "\"client_id\":\"rdk\\n\","
                         "\"client_id_truncated\":true,\"client_software_name\"")
                  != NULL, "%s", line);
    free(line);
    cl.event = NULL;
    ck_assert_ptr_null(kr_audit_format_conn(&cl));
    /* the instance: as configured, else the host name */
    ck_assert_str_eq(kr_audit_instance("mine"), "mine");
    {
        char hn[256];

        ck_assert_int_eq(gethostname(hn, sizeof(hn)), 0);
        ck_assert_str_eq(kr_audit_instance(NULL), hn);
    }
    ck_assert_str_eq(kr_audit_action_name(KR_AUDIT_CLAMPED), "clamped");
    ck_assert_str_eq(kr_audit_action_name(KR_AUDIT_REFUSED), "refused");
    ck_assert_str_eq(kr_audit_action_name(KR_AUDIT_TRANSLATED),
                     "translated");
    ck_assert_ptr_null(kr_audit_action_name(0x200));
}
END_TEST

/* ---- per-API facts ------------------------------------------------------- */

/* Base64 of a RecordBatch v2 header of count records and extra data
   bytes (magic 1 message, compressed or not, with magic1). */
static char *
batch_b64(int32_t count, size_t extra, int magic1, bool compressed)
{
    uint8_t b[61 + 64];
    size_t len;
    char *out;

    memset(b, 0, sizeof(b));
    if (magic1) {
        len = 12 + 14 + extra;
        b[11] = (uint8_t)(14 + extra);
        b[16] = 1;
        b[17] = compressed ? 1 : 0;
    } else {
        len = 61 + extra;
        b[11] = (uint8_t)(49 + extra);
        b[16] = 2;
        b[57] = (uint8_t)((uint32_t)count >> 24);
        b[58] = (uint8_t)((uint32_t)count >> 16);
        b[59] = (uint8_t)((uint32_t)count >> 8);
        b[60] = (uint8_t)count;
    }
    ck_assert_uint_le(len, sizeof(b));
    out = malloc(kr_base64_len(len));
    ck_assert_ptr_nonnull(out);
    kr_base64_encode(b, len, out);
    return out;
}

/* The line's key (a string) or NULL, from a parsed line. */
static const char *
jget_str(json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

/* topics[i] of a parsed line. */
static json_t *
jtopic(json_t *j, size_t i)
{
    return json_array_get(json_object_get(j, "topics"), i);
}

static json_int_t
jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
    return json_integer_value(v);
}

/*
 * A Produce request's capture as the session builds it while the request
 * streams (kr_audit_produce_scan_event over kr_scan with records
 * counted and the body's tags walked), from its payload f (len bytes):
 * fed in pieces of pseudo-random sizes from seed, and with every odd seed
 * each run the scanner may skip passed by kr_scan_skip, as splice(2)
 * passes it (*skipped: those bytes).
 */
static struct kr_audit_req *
stream_capture(const struct kr_msg *req, const uint8_t *f, size_t len,
               const struct kr_topic_map *map, uint64_t seed,
               uint64_t *skipped)
{
    const struct kr_val *cid = kr_node_get_id(req->header,
                                              KR_FIELD_CLIENT_ID);
    bool has = cid != NULL && cid->present, null = !has || cid->is_null;
    struct kr_audit_scan as;
    struct kr_audit_req *r;
    struct kr_scan sc;
    size_t at = 0, n, used;
    int rc = KR_AGAIN;

    r = kr_audit_stream_req_new(null ? NULL : (const char *)cid->u.s.p,
                                null ? 0 : (size_t)cid->u.s.len, has);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(kr_scan_init(&sc, req->api_key, req->api_version, false,
                                  len), KR_OK);
    kr_audit_produce_scan_start(&as, r, map);
    kr_scan_watch(&sc, kr_audit_produce_scan_event, &as);
    kr_scan_count_records(&sc, true);
    kr_scan_body_tags(&sc, true);
    *skipped = 0;
    while (rc == KR_AGAIN && at < len) {
        uint64_t sk = kr_scan_skippable(&sc);

        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if (sk > 0 && (seed & 1)) {
            n = sk < len - at ? (size_t)sk : len - at;
            rc = kr_scan_skip(&sc, n);
            at += n;
            *skipped += n;
            continue;
        }
        n = 1 + (size_t)(seed % 97);
        n = n < len - at ? n : len - at;
        rc = kr_scan_feed(&sc, f + at, n, &used);
        at += used;
    }
    ck_assert_msg(rc == KR_OK, "scan: %s %s", kr_status_str(rc), sc.msg);
    return kr_audit_produce_scan_end(&as);
}

/*
 * The line of a Produce request (payload f, len bytes) built from the
 * streamed capture must be the held path's line, byte for byte, whatever
 * pieces the bytes come in.
 */
static void
assert_stream_line(const struct kr_msg *req, const uint8_t *f, size_t len,
                   const struct kr_topic_map *map,
                   const struct kr_audit_info *info, const char *held)
{
    uint64_t seed, skipped;

    for (seed = 1; seed <= 4; seed++) {
        struct kr_audit_req *r = stream_capture(req, f, len, map,
                                                seed * 0x9e3779b97f4a7c15u,
                                                &skipped);
        char *line = kr_audit_format(info, r, NULL, false);

        size_t d = 0;

        ck_assert_ptr_nonnull(line);
        while (line[d] != '\0' && line[d] == held[d]) {
            d++;
        }
        d = d > 60 ? d - 60 : 0;
        ck_assert_msg(strcmp(line, held) == 0, "streamed (seed %" PRIu64
                      ") from byte %zu:\n%.300s\nheld:\n%.300s", seed, d,
                      line + d, held + d);
        free(line);
        kr_audit_req_free(r);
    }
}

/* The line of request text (captured with its payload, no response). */
static json_t *
req_line(const char *text)
{
    struct kr_audit_info info;
    struct kr_audit_req *r;
    struct kr_msg req;
    struct iovec iov;
    struct kr_rbuf rb;
    size_t len;
    uint8_t *f;
    char *line;
    json_t *j;

    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    f = frames[nframes++] = kr_test_build_len(&arena, text, &req, &len);
    kr_rbuf_init_flat(&rb, &iov, f, len);
    r = kr_audit_capture(&req, &rb, NULL, false);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.rsp_bytes = 0;
    line = kr_audit_format(&info, r, NULL, false);
    kr_audit_req_free(r);
    ck_assert_ptr_nonnull(line);
    if (req.api_key == KR_API_PRODUCE) {
        assert_stream_line(&req, f, len, NULL, &info, line);
    }
    j = jload(line);
    ck_assert_msg(j != NULL, "%s", line);
    free(line);
    return j;
}

/*
 * Produce: Acks, TransactionalId, per topic the records from the batch
 * headers (v2 RecordsCount; magic 1 messages one each; a compressed
 * magic 1 wrapper hides it) and the record bytes.
 */
START_TEST(test_produce_records)
{
    char *b3 = batch_b64(3, 10, 0, false), *b5 = batch_b64(5, 0, 0, false);
    char *b7 = batch_b64(7, 2, 0, false), *m1 = batch_b64(0, 4, 1, false);
    char *mz = batch_b64(0, 4, 1, true), text[2048];
    json_t *j, *t;

    snprintf(text, sizeof(text),
             "{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 9,"
             " \"CorrelationId\": 4, \"ClientId\": \"p\"},"
             " \"body\": {\"TransactionalId\": \"txn-1\", \"Acks\": 1,"
             " \"TimeoutMs\": 1000, \"TopicData\": ["
             "  {\"Name\": \"orders\", \"PartitionData\": ["
             "    {\"Index\": 0, \"Records\": \"%s\"},"
             "    {\"Index\": 1, \"Records\": \"%s\"}]},"
             "  {\"Name\": \"empty\", \"PartitionData\": ["
             "    {\"Index\": 0, \"Records\": null}]},"
             "  {\"Name\": \"orders\", \"PartitionData\": ["
             "    {\"Index\": 2, \"Records\": \"%s\"}]}]}}", b3, b5, b7);
    j = req_line(text);
    ck_assert_int_eq(jint(j, "acks"), 1);
    ck_assert_str_eq(jget_str(j, "transactional_id"), "txn-1");
    t = jtopic(j, 0);
    ck_assert_str_eq(jget_str(t, "name"), "orders");
    ck_assert_int_eq(jint(t, "partitions"), 3);
    ck_assert_int_eq(jint(t, "records"), 15);
    ck_assert_int_eq(jint(t, "record_bytes"), (61 + 10) + 61 + (61 + 2));
    t = jtopic(j, 1);
    ck_assert_str_eq(jget_str(t, "name"), "empty");
    ck_assert_int_eq(jint(t, "records"), 0);
    ck_assert_int_eq(jint(t, "record_bytes"), 0);
    ck_assert_ptr_null(json_object_get(j, "group_id"));
    json_decref(j);

    /* v2 (magic 1 messages): counted one each, unless compressed; no
       TransactionalId before v3, acks 0 */
    snprintf(text, sizeof(text),
             "{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 2,"
             " \"CorrelationId\": 5, \"ClientId\": \"old\"},"
             " \"body\": {\"Acks\": 0, \"TimeoutMs\": 1000, \"TopicData\": ["
             "  {\"Name\": \"a\", \"PartitionData\": ["
             "    {\"Index\": 0, \"Records\": \"%s\"}]},"
             "  {\"Name\": \"z\", \"PartitionData\": ["
             "    {\"Index\": 0, \"Records\": \"%s\"}]}]}}", m1, mz);
    j = req_line(text);
    ck_assert_int_eq(jint(j, "acks"), 0);
    ck_assert_ptr_null(json_object_get(j, "transactional_id"));
    ck_assert_int_eq(jint(jtopic(j, 0), "records"), 1);
    ck_assert_int_eq(jint(jtopic(j, 0), "record_bytes"), 12 + 14 + 4);
    ck_assert_ptr_null(json_object_get(jtopic(j, 1), "records"));
    ck_assert_int_eq(jint(jtopic(j, 1), "record_bytes"), 12 + 14 + 4);
    json_decref(j);
    free(b3);
    free(b5);
    free(b7);
    free(m1);
    free(mz);
}
END_TEST

/* Base64 of n RecordBatch v2 of count records and extra data bytes each,
   back to back. */
static char *
batches_b64(unsigned n, int32_t count, size_t extra)
{
    size_t one = 61 + extra, len = one * n, i;
    uint8_t *b = calloc(1, len);
    char *out = malloc(kr_base64_len(len));

    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(out);
    for (i = 0; i < n; i++) {
        uint8_t *h = b + i * one;
        uint32_t blen = (uint32_t)(49 + extra);

        h[8] = (uint8_t)(blen >> 24);
        h[9] = (uint8_t)(blen >> 16);
        h[10] = (uint8_t)(blen >> 8);
        h[11] = (uint8_t)blen;
        h[16] = 2;
        h[57] = (uint8_t)((uint32_t)count >> 24);
        h[58] = (uint8_t)((uint32_t)count >> 16);
        h[59] = (uint8_t)((uint32_t)count >> 8);
        h[60] = (uint8_t)count;
        memset(h + 61, 0xab, extra);
    }
    kr_base64_encode(b, len, out);
    free(b);
    return out;
}

/*
 * A Produce request streamed past krelay (kr_session_kmux.c: its rules
 * only audit it) gets the line the held path gives: v13 by TopicId
 * (resolved, unknown, all zero), a null ClientId, a TransactionalId cut
 * at 1024 bytes, records in several batches, records that cannot be
 * counted (a batch cut short, a compressed magic 1 wrapper); v3 with a
 * null TransactionalId and one large batch, whose records the scanner
 * lets the caller skip (splice) but for each batch's 61-byte header.
 */
START_TEST(test_produce_streamed)
{
    struct kr_topic_map *map = kr_topic_map_new();
    static const uint8_t id[16] = {
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    };
    char *b2 = batches_b64(3, 4, 10), *cut = batch_b64(7, 0, 0, false);
    char *mz = batch_b64(0, 4, 1, true), *big = batches_b64(1, 2000, 60000);
    char *text = malloc(256 * 1024), *line;
    struct kr_audit_info info;
    struct kr_audit_req *r;
    struct kr_msg req;
    struct iovec iov;
    struct kr_rbuf rb;
    uint64_t skipped;
    size_t len, o;
    uint8_t *f;
    json_t *j, *t;

    ck_assert_ptr_nonnull(map);
    ck_assert_ptr_nonnull(text);
    ck_assert(kr_topic_map_put(map, id, "orders", 6));
    /* a batch header cut short: 30 of its 61 bytes (base64 of 32) */
    cut[40] = '\0';
    o = (size_t)sprintf(text, "{\"header\": {\"RequestApiKey\": 0, "
                        "\"RequestApiVersion\": 13, \"CorrelationId\": 8, "
                        "\"ClientId\": null}, \"body\": "
                        "{\"TransactionalId\": \"");
    memset(text + o, 'x', 2000);
    o += 2000;
    sprintf(text + o, "\", \"Acks\": -1, \"TimeoutMs\": 30000, "
            "\"TopicData\": ["
            " {\"TopicId\": \"AAECAwQFBgcICQoLDA0ODw\", \"PartitionData\": ["
            "   {\"Index\": 0, \"Records\": \"%s\"},"
            "   {\"Index\": 1, \"Records\": null}]},"
            " {\"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAA\", \"PartitionData\": ["
            "   {\"Index\": 0, \"Records\": \"%s\"}]},"
            " {\"TopicId\": \"8AECAwQFBgcICQoLDA0ODw\", \"PartitionData\": ["
            "   {\"Index\": 3, \"Records\": \"%s\"},"
            "   {\"Index\": 4, \"Records\": \"%s\"}]}]}}", b2, b2, cut, mz);
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    f = frames[nframes++] = kr_test_build_len(&arena, text, &req, &len);
    kr_rbuf_init_flat(&rb, &iov, f, len);
    r = kr_audit_capture(&req, &rb, map, false);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.rsp_bytes = 0;
    line = kr_audit_format(&info, r, NULL, false);
    kr_audit_req_free(r);
    ck_assert_ptr_nonnull(line);
    assert_stream_line(&req, f, len, map, &info, line);
    /* and the values are the request's */
    j = jload(line);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(jint(j, "acks"), -1);
    ck_assert_uint_eq(strlen(jget_str(j, "transactional_id")), 1024);
    ck_assert(json_is_true(json_object_get(j, "transactional_id_truncated")));
    ck_assert(json_is_null(json_object_get(j, "client_id")));
    ck_assert_uint_eq(json_array_size(json_object_get(j, "topics")), 2);
    t = jtopic(j, 0);
    ck_assert_str_eq(jget_str(t, "name"), "orders");
    ck_assert_int_eq(jint(t, "partitions"), 2);
    ck_assert_int_eq(jint(t, "records"), 12);
    ck_assert_int_eq(jint(t, "record_bytes"), 3 * (61 + 10));
    t = jtopic(j, 1);
    ck_assert_str_eq(jget_str(t, "name"), "8AECAwQFBgcICQoLDA0ODw");
    ck_assert_int_eq(jint(t, "partitions"), 2);
    ck_assert_ptr_null(json_object_get(t, "records"));
    json_decref(j);
    free(line);

    /* v3: one batch of 60,061 bytes, all but its header skippable */
    snprintf(text, 256 * 1024,
             "{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 3,"
             " \"CorrelationId\": 9, \"ClientId\": \"big\"},"
             " \"body\": {\"TransactionalId\": null, \"Acks\": 1,"
             " \"TimeoutMs\": 1000, \"TopicData\": ["
             "  {\"Name\": \"bulk\", \"PartitionData\": ["
             "    {\"Index\": 0, \"Records\": \"%s\"}]}]}}", big);
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    f = frames[nframes++] = kr_test_build_len(&arena, text, &req, &len);
    kr_rbuf_init_flat(&rb, &iov, f, len);
    r = kr_audit_capture(&req, &rb, NULL, false);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.rsp_bytes = 0;
    line = kr_audit_format(&info, r, NULL, false);
    kr_audit_req_free(r);
    ck_assert_ptr_nonnull(line);
    assert_stream_line(&req, f, len, NULL, &info, line);
    ck_assert_msg(strstr(line, "\"topics\":[{\"name\":\"bulk\",\"partitions\":1,"
                         "\"records\":2000,\"record_bytes\":60061}]")
                  != NULL, "%s", line);
    free(line);
    /* seed 1 (odd) skips every run it may: all but the header's bytes
       and what came in the pieces before a run began */
    r = stream_capture(&req, f, len, NULL, 1, &skipped);
    kr_audit_req_free(r);
    ck_assert_uint_ge(skipped, 60000 - 200);
    kr_topic_map_free(map);
    free(text);
    free(b2);
    free(cut);
    free(mz);
    free(big);
}
END_TEST

/* GroupId and MemberId: top level, else the first entry's. */
START_TEST(test_group_ids)
{
    json_t *j;

    j = req_line("{\"header\": {\"RequestApiKey\": 11, "
                 "\"RequestApiVersion\": 5,"
                 " \"CorrelationId\": 1, \"ClientId\": \"c\"},"
                 " \"body\": {\"GroupId\": \"billing\", \"SessionTimeoutMs\": "
                 "10000, \"RebalanceTimeoutMs\": 300000, \"MemberId\": \"\","
                 " \"GroupInstanceId\": null, \"ProtocolType\": \"consumer\","
                 " \"Protocols\": []}}");
    ck_assert_str_eq(jget_str(j, "group_id"), "billing");
    ck_assert_str_eq(jget_str(j, "member_id"), "");
    ck_assert_ptr_null(json_object_get(j, "acks"));
    json_decref(j);
    j = req_line("{\"header\": {\"RequestApiKey\": 12, \"RequestApiVersion\": 4,"
                 " \"CorrelationId\": 2, \"ClientId\": \"c\"},"
                 " \"body\": {\"GroupId\": \"billing\", \"GenerationId\": 3,"
                 " \"MemberId\": \"c-1-uuid\", \"GroupInstanceId\": null}}");
    ck_assert_str_eq(jget_str(j, "group_id"), "billing");
    ck_assert_str_eq(jget_str(j, "member_id"), "c-1-uuid");
    json_decref(j);
    /* OffsetFetch v9: groups batched, the first one's ids */
    j = req_line("{\"header\": {\"RequestApiKey\": 9, \"RequestApiVersion\": 9,"
                 " \"CorrelationId\": 3, \"ClientId\": \"c\"},"
                 " \"body\": {\"Groups\": ["
                 "  {\"GroupId\": \"g1\", \"MemberId\": \"m1\", \"MemberEpoch\":"
                 " 4, \"Topics\": null},"
                 "  {\"GroupId\": \"g2\", \"MemberId\": \"m2\", \"MemberEpoch\":"
                 " 5, \"Topics\": null}], \"RequireStable\": true}}");
    ck_assert_str_eq(jget_str(j, "group_id"), "g1");
    ck_assert_str_eq(jget_str(j, "member_id"), "m1");
    json_decref(j);
    /* LeaveGroup v3: GroupId on top, the first member's MemberId */
    j = req_line("{\"header\": {\"RequestApiKey\": 13, \"RequestApiVersion\": 3,"
                 " \"CorrelationId\": 4, \"ClientId\": \"c\"},"
                 " \"body\": {\"GroupId\": \"billing\", \"Members\": ["
                 "  {\"MemberId\": \"leaving-1\", \"GroupInstanceId\": null}]}}");
    ck_assert_str_eq(jget_str(j, "group_id"), "billing");
    ck_assert_str_eq(jget_str(j, "member_id"), "leaving-1");
    json_decref(j);
}
END_TEST

/*
 * TransactionalId beyond Produce: the transactional APIs' requests carry
 * it at the top level (AddPartitionsToTxn v0-3 as
 * V3AndBelowTransactionalId); a null one (an idempotent producer's
 * InitProducerId) and AddPartitionsToTxn v4+ (brokers', batched) give
 * none.
 */
START_TEST(test_txn_ids)
{
    static const struct {
        const char *text, *txn, *group;
    } cases[] = {
        { "{\"header\": {\"RequestApiKey\": 22, \"RequestApiVersion\": 4,"
          " \"CorrelationId\": 1, \"ClientId\": \"p\"},"
          " \"body\": {\"TransactionalId\": \"txn-init\","
          " \"TransactionTimeoutMs\": 60000, \"ProducerId\": -1,"
          " \"ProducerEpoch\": -1}}", "txn-init", NULL },
        { "{\"header\": {\"RequestApiKey\": 22, \"RequestApiVersion\": 4,"
          " \"CorrelationId\": 2, \"ClientId\": \"p\"},"
          " \"body\": {\"TransactionalId\": null,"
          " \"TransactionTimeoutMs\": 60000, \"ProducerId\": -1,"
          " \"ProducerEpoch\": -1}}", NULL, NULL },
        { "{\"header\": {\"RequestApiKey\": 24, \"RequestApiVersion\": 3,"
          " \"CorrelationId\": 3, \"ClientId\": \"p\"},"
          " \"body\": {\"V3AndBelowTransactionalId\": \"txn-add\","
          " \"V3AndBelowProducerId\": 7, \"V3AndBelowProducerEpoch\": 0,"
          " \"V3AndBelowTopics\": [{\"Name\": \"orders\","
          " \"Partitions\": [0, 1]}]}}", "txn-add", NULL },
        { "{\"header\": {\"RequestApiKey\": 24, \"RequestApiVersion\": 4,"
          " \"CorrelationId\": 4, \"ClientId\": \"broker\"},"
          " \"body\": {\"Transactions\": [{\"TransactionalId\": \"t1\","
          " \"ProducerId\": 7, \"ProducerEpoch\": 0, \"VerifyOnly\": true,"
          " \"Topics\": []}]}}", NULL, NULL },
        { "{\"header\": {\"RequestApiKey\": 25, \"RequestApiVersion\": 3,"
          " \"CorrelationId\": 5, \"ClientId\": \"p\"},"
          " \"body\": {\"TransactionalId\": \"txn-offsets\","
          " \"ProducerId\": 7, \"ProducerEpoch\": 0,"
          " \"GroupId\": \"billing\"}}", "txn-offsets", "billing" },
        { "{\"header\": {\"RequestApiKey\": 26, \"RequestApiVersion\": 3,"
          " \"CorrelationId\": 6, \"ClientId\": \"p\"},"
          " \"body\": {\"TransactionalId\": \"txn-end\","
          " \"ProducerId\": 7, \"ProducerEpoch\": 0,"
          " \"Committed\": true}}", "txn-end", NULL },
        { "{\"header\": {\"RequestApiKey\": 28, \"RequestApiVersion\": 3,"
          " \"CorrelationId\": 7, \"ClientId\": \"p\"},"
          " \"body\": {\"TransactionalId\": \"txn-commit\","
          " \"GroupId\": \"billing\", \"ProducerId\": 7,"
          " \"ProducerEpoch\": 0, \"GenerationId\": 3,"
          " \"MemberId\": \"m-1\", \"GroupInstanceId\": null,"
          " \"Topics\": [{\"Name\": \"orders\", \"Partitions\":"
          " [{\"PartitionIndex\": 0, \"CommittedOffset\": 42,"
          " \"CommittedLeaderEpoch\": -1,"
          " \"CommittedMetadata\": null}]}]}}", "txn-commit", "billing" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = req_line(cases[i].text);
        json_t *t = json_object_get(j, "transactional_id");
        json_t *g = json_object_get(j, "group_id");

        if (cases[i].txn != NULL) {
            ck_assert_msg(t != NULL, "case %zu: no transactional_id", i);
            ck_assert_str_eq(json_string_value(t), cases[i].txn);
        } else {
            ck_assert_msg(t == NULL, "case %zu: transactional_id %s", i,
                          json_string_value(t));
        }
        if (cases[i].group != NULL) {
            ck_assert_str_eq(jget_str(j, "group_id"), cases[i].group);
        } else {
            ck_assert_ptr_null(g);
        }
        ck_assert_ptr_null(json_object_get(j, "acks"));
        json_decref(j);
    }
}
END_TEST

/* A Fetch v11 request for orders (2 partitions) and payments. */
static const char fetch_req[] =
    "{\"header\": {\"RequestApiKey\": 1, \"RequestApiVersion\": 11,"
    " \"CorrelationId\": 8, \"ClientId\": \"consumer\"},"
    " \"body\": {\"ReplicaId\": -1, \"MaxWaitMs\": 500, \"MinBytes\": 1,"
    " \"MaxBytes\": 52428800, \"IsolationLevel\": 0, \"SessionId\": 0,"
    " \"SessionEpoch\": -1, \"Topics\": ["
    "  {\"Topic\": \"orders\", \"Partitions\": ["
    "    {\"Partition\": 0, \"CurrentLeaderEpoch\": -1, \"FetchOffset\": 0,"
    "     \"LogStartOffset\": -1, \"PartitionMaxBytes\": 1048576},"
    "    {\"Partition\": 1, \"CurrentLeaderEpoch\": -1, \"FetchOffset\": 0,"
    "     \"LogStartOffset\": -1, \"PartitionMaxBytes\": 1048576}]},"
    "  {\"Topic\": \"payments\", \"Partitions\": ["
    "    {\"Partition\": 0, \"CurrentLeaderEpoch\": -1, \"FetchOffset\": 0,"
    "     \"LogStartOffset\": -1, \"PartitionMaxBytes\": 1048576}]}],"
    " \"ForgottenTopicsData\": [], \"RackId\": \"\"}}";

/* Its response: orders 100 + 50 bytes (a partial batch counts too),
   payments none (OFFSET_OUT_OF_RANGE), extra 10 bytes (the fetch
   session's: not in the request). */
static void
fetch_rsp_text(char *out, size_t len)
{
    uint8_t raw[100];
    char b100[160], b50[80], b10[20];

    memset(raw, 0x5a, sizeof(raw));
    kr_base64_encode(raw, 100, b100);
    kr_base64_encode(raw, 50, b50);
    kr_base64_encode(raw, 10, b10);
    snprintf(out, len,
             "{\"apiKey\": 1, \"apiVersion\": 11, \"header\": "
             "{\"CorrelationId\": 8},"
             " \"body\": {\"ThrottleTimeMs\": 0, \"ErrorCode\": 0,"
             " \"SessionId\": 7, \"Responses\": ["
             "  {\"Topic\": \"orders\", \"Partitions\": ["
             "    {\"PartitionIndex\": 0, \"ErrorCode\": 0, \"HighWatermark\": 9,"
             "     \"LastStableOffset\": 9, \"LogStartOffset\": 0,"
             "     \"AbortedTransactions\": null, \"PreferredReadReplica\": -1,"
             "     \"Records\": \"%s\"},"
             "    {\"PartitionIndex\": 1, \"ErrorCode\": 0, \"HighWatermark\": 9,"
             "     \"LastStableOffset\": 9, \"LogStartOffset\": 0,"
             "     \"AbortedTransactions\": [], \"PreferredReadReplica\": -1,"
             "     \"Records\": \"%s\"}]},"
             "  {\"Topic\": \"payments\", \"Partitions\": ["
             "    {\"PartitionIndex\": 0, \"ErrorCode\": 1, \"HighWatermark\": -1,"
             "     \"LastStableOffset\": -1, \"LogStartOffset\": -1,"
             "     \"AbortedTransactions\": null, \"PreferredReadReplica\": -1,"
             "     \"Records\": null}]},"
             "  {\"Topic\": \"extra\", \"Partitions\": ["
             "    {\"PartitionIndex\": 3, \"ErrorCode\": 0, \"HighWatermark\": 9,"
             "     \"LastStableOffset\": 9, \"LogStartOffset\": 0,"
             "     \"AbortedTransactions\": null, \"PreferredReadReplica\": -1,"
             "     \"Records\": \"%s\"}]}]}}", b100, b50, b10);
}

/* The Fetch figures of a line: orders 150 of 2 partitions, payments 0,
   extra 10 with 0 partitions; errors OFFSET_OUT_OF_RANGE once. */
static void
assert_fetch_line(const char *line)
{
    json_t *j = jload(line), *t;

    ck_assert_msg(j != NULL, "%s", line);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "topics")), 3);
    t = jtopic(j, 0);
    ck_assert_str_eq(jget_str(t, "name"), "orders");
    ck_assert_int_eq(jint(t, "partitions"), 2);
    ck_assert_int_eq(jint(t, "record_bytes"), 150);
    ck_assert_ptr_null(json_object_get(t, "records"));
    t = jtopic(j, 1);
    ck_assert_str_eq(jget_str(t, "name"), "payments");
    ck_assert_int_eq(jint(t, "partitions"), 1);
    ck_assert_int_eq(jint(t, "record_bytes"), 0);
    t = jtopic(j, 2);
    ck_assert_str_eq(jget_str(t, "name"), "extra");
    ck_assert_int_eq(jint(t, "partitions"), 0);
    ck_assert_int_eq(jint(t, "record_bytes"), 10);
    ck_assert_int_eq(jint(json_object_get(j, "errors"), "OFFSET_OUT_OF_RANGE"),
                     1);
    ck_assert_uint_eq(json_object_size(json_object_get(j, "errors")), 1);
    json_decref(j);
}

/*
 * Capture req, then scan response p (plen bytes, api_key at version v)
 * into it in pieces of piece bytes, as the session does while the
 * response streams by; the capture (the caller frees it).
 */
static struct kr_audit_req *
scan_response(const struct kr_msg *req, int16_t api_key, int16_t v,
              const uint8_t *p, size_t plen, size_t piece)
{
    struct kr_audit_req *r = kr_audit_capture(req, NULL, NULL, false);
    struct kr_audit_scan as;
    struct kr_scan sc;
    size_t at = 0, used;
    int rc = KR_AGAIN;

    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(kr_scan_init(&sc, api_key, v, true, plen), KR_OK);
    kr_audit_scan_start(&as, r, NULL, api_key);
    kr_scan_watch(&sc, kr_audit_scan_event, &as);
    while (rc == KR_AGAIN && at < plen) {
        size_t n = plen - at < piece ? plen - at : piece;

        rc = kr_scan_feed(&sc, p + at, n, &used);
        at += used;
    }
    ck_assert_int_eq(rc, KR_OK);
    return r;
}

/*
 * Fetch: the record bytes returned per topic, from the decoded response
 * (kr_audit_note_response) and from the scanner as it streams by
 * (kr_audit_scan_*), fed in pieces of every size: the same figures.
 */
START_TEST(test_fetch_bytes)
{
    struct kr_audit_info info;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    char text[4096], *line, *first = NULL;
    uint8_t *p;
    size_t plen, piece;

    build(fetch_req, &req);
    fetch_rsp_text(text, sizeof(text));
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    p = frames[nframes++] = kr_test_build_len(&arena, text, &rsp, &plen);

    /* the request alone: no record_bytes */
    r = kr_audit_capture(&req, NULL, NULL, false);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.rsp_bytes = 4 + plen;
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_msg(strstr(line, "record_bytes") == NULL &&
                  strstr(line, "\"errors\":null") != NULL, "%s", line);
    free(line);
    /* held and decoded */
    kr_audit_note_response(r, &rsp, NULL);
    line = kr_audit_format(&info, r, &rsp, false);
    assert_fetch_line(line);
    free(line);
    kr_audit_req_free(r);

    /* streamed: whole, byte by byte, in pieces of 7 */
    for (piece = plen; piece > 0; piece = piece == plen ? 1
                                          : piece == 1 ? 7 : 0) {
        char *l;

        r = scan_response(&req, KR_API_FETCH, 11, p, plen, piece);
        l = kr_audit_format(&info, r, NULL, false);
        assert_fetch_line(l);
        if (first == NULL) {
            first = l;
        } else {
            ck_assert_str_eq(l, first);
            free(l);
        }
        kr_audit_req_free(r);
    }
    free(first);
}
END_TEST

/*
 * Produce (issue 14): the response of a Produce its rules only audit is
 * scanned as it streams by instead of decoded.  At a classic and a
 * flexible version, fed whole, byte by byte and in pieces of 7, the
 * scanned line is the held line byte for byte (errors counted the same,
 * the request's topics untouched).  A scan abandoned part-way (the
 * response does not scan) gives the line of a held response that does
 * not decode: errors null.
 */
/* text with the version after key (its first "9") replaced by v. */
static void
with_version(char *out, size_t len, const char *text, const char *key,
             int16_t v)
{
    const char *at = strstr(text, key);

    ck_assert_ptr_nonnull(at);
    at += strlen(key);
    ck_assert_int_eq(*at, '9');
    snprintf(out, len, "%.*s%d%s", (int)(at - text), text, v, at + 1);
}

START_TEST(test_produce_rsp_scanned)
{
    static const int16_t versions[] = { 3, 9, 10, 11 };
    struct kr_audit_info info;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    char rtext[1024], ptext[1024], *held, *l;
    uint8_t *p;
    size_t plen, piece, vi;

    for (vi = 0; vi < KR_ARRAY_LEN(versions); vi++) {
        int16_t v = versions[vi];

        with_version(rtext, sizeof(rtext), produce_req,
                     "\"RequestApiVersion\": ", v);
        build(rtext, &req);
        with_version(ptext, sizeof(ptext), produce_rsp, "\"apiVersion\": ", v);
        ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
        p = frames[nframes++] = kr_test_build_len(&arena, ptext, &rsp, &plen);
        base_info(&info, &req);
        info.rsp_bytes = 4 + plen;

        r = kr_audit_capture(&req, NULL, NULL, false);
        ck_assert_ptr_nonnull(r);
        kr_audit_note_response(r, &rsp, NULL);
        held = kr_audit_format(&info, r, &rsp, false);
        ck_assert_ptr_nonnull(held);
        ck_assert_msg(strstr(held, "\"errors\":{\"UNKNOWN_TOPIC_OR_PARTITION\""
                             ":1,\"NOT_LEADER_OR_FOLLOWER\":3}") != NULL,
                      "v%d: %s", v, held);
        kr_audit_req_free(r);

        for (piece = plen; piece > 0; piece = piece == plen ? 1
                                              : piece == 1 ? 7 : 0) {
            r = scan_response(&req, KR_API_PRODUCE, v, p, plen, piece);
            l = kr_audit_format(&info, r, NULL, false);
            ck_assert_msg(l != NULL && strcmp(l, held) == 0,
                          "v%d piece %zu:\nscanned %s\nheld    %s", v, piece,
                          l, held);
            free(l);
            kr_audit_req_free(r);
        }
        free(held);

        /* abandoned after the first partition's ErrorCode was counted */
        {
            struct kr_audit_scan as;
            struct kr_scan sc;
            size_t used;
            char *und;

            r = kr_audit_capture(&req, NULL, NULL, false);
            ck_assert_ptr_nonnull(r);
            und = kr_audit_format(&info, r, NULL, false);
            ck_assert_msg(strstr(und, "\"errors\":null") != NULL, "%s", und);
            ck_assert_int_eq(kr_scan_init(&sc, KR_API_PRODUCE, v, true,
                                          plen), KR_OK);
            kr_audit_scan_start(&as, r, NULL, KR_API_PRODUCE);
            kr_scan_watch(&sc, kr_audit_scan_event, &as);
            ck_assert_int_eq(kr_scan_feed(&sc, p, plen / 2, &used), KR_AGAIN);
            kr_audit_scan_abandon(&as);
            ck_assert_int_eq(kr_scan_feed(&sc, p + used, plen - used, &used),
                             KR_OK);     /* the rest counts no more */
            l = kr_audit_format(&info, r, NULL, false);
            ck_assert_str_eq(l, und);
            free(l);
            free(und);
            kr_audit_req_free(r);
        }
    }
}
END_TEST

/*
 * A connection's memo of its peer keys (issue 14): lines formatted with
 * the memo are the lines formatted without one, byte for byte, through a
 * run of changes to every value the memo covers (each changed alone,
 * then back, for request and connection lines), and the memo is used
 * (a repeated line is the same) or dropped (a changed one is fresh).
 */
START_TEST(test_peer_memo)
{
    /* one for request lines, one for connection lines, one both share
       (a change of type renders the keys again) */
    struct kr_audit_memo *memo_r = kr_audit_memo_new();
    struct kr_audit_memo *memo_c = kr_audit_memo_new();
    struct kr_audit_memo *memo = kr_audit_memo_new();
    struct kr_audit_info info;
    struct kr_audit_conn conn;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    char long_addr[2048];
    unsigned step, rep;

    ck_assert(memo != NULL && memo_r != NULL && memo_c != NULL);
    memset(long_addr, 'h', sizeof(long_addr) - 1);
    long_addr[sizeof(long_addr) - 1] = '\0';     /* above the memo's key */
    build(produce_req, &req);
    build(produce_rsp, &rsp);
    r = kr_audit_capture(&req, NULL, NULL, false);
    ck_assert_ptr_nonnull(r);
    for (step = 0; step < 32; step++) {
        base_info(&info, &req);
        info.peer.instance = "proxy-1";
        info.peer.conn_id = "c#0.9";
        info.peer.route = "node";
        info.peer.node_id = 2;
        info.peer.upstream_addr = "kafka-2:9092";
        info.peer.client_sw_name = "librdkafka";
        info.peer.client_sw_version = "2.0.2";
        /* odd steps: back to the values above */
        switch (step % 2 == 0 ? step / 2 : 99) {
        case 0: info.peer.instance = "proxy-2"; break;
        case 1: info.peer.conn_id = "c#0.10"; break;
        case 2: info.peer.listener = "tls"; break;
        case 3: info.peer.client_addr = "10.0.0.8"; break;
        case 4: info.peer.client_port = 51235; break;
        case 5: info.peer.route = "bootstrap"; break;
        case 6: info.peer.node_id = 3; break;
        case 7: info.peer.upstream_addr = NULL; break;
        case 8: info.peer.upstream_addr = long_addr; break;
        case 9: info.peer.client_sw_name = NULL; break;
        case 10: info.peer.client_sw_version = "2.0.3"; break;
        case 11: info.peer.principal = "User:alice"; break;
        case 12: info.peer.principal = "User:alice\"\\x"; break;
        case 13: info.peer.listener = "pl\"ain"; break;
        case 14: info.peer.instance = ""; break;
        case 15: info.peer.proxy_addr = "10.0.0.2";
                 info.peer.proxy_port = 4000; break;
        default: break;
        }
        for (rep = 0; rep < 4; rep++) {
            struct kr_audit_memo *m = rep < 2 ? (rep == 0 ? memo_r : memo_c)
                                              : memo;
            char *plain, *memoed;

            if (rep != 1) {
                info.peer.memo = NULL;
                plain = kr_audit_format(&info, r, &rsp, false);
                info.peer.memo = m;
                memoed = kr_audit_format(&info, r, &rsp, false);
                ck_assert_ptr_nonnull(plain);
                ck_assert_ptr_nonnull(memoed);
                ck_assert_msg(strcmp(plain, memoed) == 0,
                              "step %u rep %u:\nmemo  %s\nplain %s", step,
                              rep, memoed, plain);
                json_decref(jload(memoed));
                free(plain);
                free(memoed);
            }
            if (rep == 0) {
                continue;
            }
            memset(&conn, 0, sizeof(conn));
            conn.event = "open";
            conn.time_us = info.time_us;
            conn.peer = info.peer;
            conn.peer.memo = NULL;
            plain = kr_audit_format_conn(&conn);
            conn.peer.memo = m;
            memoed = kr_audit_format_conn(&conn);
            ck_assert_ptr_nonnull(plain);
            ck_assert_msg(memoed != NULL && strcmp(plain, memoed) == 0,
                          "conn step %u rep %u:\nmemo  %s\nplain %s", step,
                          rep, memoed, plain);
            free(plain);
            free(memoed);
        }
    }
    kr_audit_req_free(r);
    kr_audit_memo_free(memo);
    kr_audit_memo_free(memo_r);
    kr_audit_memo_free(memo_c);
    kr_audit_memo_free(NULL);
}
END_TEST

/* ---- many topics --------------------------------------------------------- */

/* Entries of the many-topics requests, and the distinct names among them
   (each name t<k> comes back every MT_DISTINCT entries, scrambled). */
#define MT_ENTRIES 100000
#define MT_DISTINCT 10000

static unsigned
mt_name(unsigned i)
{
    return (unsigned)(((uint64_t)i * 7919u) % MT_DISTINCT);
}

/* A line's topics: the first 4096 distinct names in first-seen order,
   each with partitions (when >= 0) as given; topics_truncated. */
static void
assert_mt_line(const char *line, int partitions)
{
    json_t *j = jload(line), *topics = json_object_get(j, "topics");
    size_t k;

    ck_assert_uint_eq(json_array_size(topics), 4096);
    ck_assert(json_is_true(json_object_get(j, "topics_truncated")));
    for (k = 0; k < 4096; k++) {
        json_t *t = json_array_get(topics, k);
        char want[16];

        snprintf(want, sizeof(want), "t%u", mt_name((unsigned)k));
        ck_assert_str_eq(jget_str(t, "name"), want);
        if (partitions >= 0) {
            ck_assert_int_eq(jint(t, "partitions"), partitions);
        }
    }
    json_decref(j);
}

/*
 * A request naming 100,000 topic entries (10,000 distinct names, each ten
 * times) and a streamed response naming as many: every entry is found in
 * a few comparisons (kr_audit_req_probes; a linear search over the 4096
 * kept topics made about 4096 per entry, and one 8 MB Produce stalled
 * the worker for seconds), and the line lists the first 4096 in order.
 */
START_TEST(test_many_topics)
{
    struct kr_audit_info info;
    struct kr_audit_scan as;
    struct kr_audit_req *r;
    struct kr_msg req;
    struct iovec iov;
    struct kr_rbuf rb;
    size_t len, off, cap = (size_t)MT_ENTRIES * 96 + 512;
    char *text = malloc(cap), *line;
    uint8_t *f;
    unsigned i;

    ck_assert_ptr_nonnull(text);
    /* a Produce: its topics (kr_topics_each) and their records
       (capture_produce) each look every entry up */
    off = (size_t)snprintf(text, cap,
                           "{\"header\": {\"RequestApiKey\": 0, "
                           "\"RequestApiVersion\": 9, \"CorrelationId\": 1, "
                           "\"ClientId\": \"p\"}, \"body\": {\"Acks\": 1, "
                           "\"TimeoutMs\": 1000, \"TopicData\": [");
    for (i = 0; i < MT_ENTRIES; i++) {
        off += (size_t)snprintf(text + off, cap - off,
                                "%s{\"Name\": \"t%u\", \"PartitionData\": "
                                "[{\"Index\": 0, \"Records\": null}]}",
                                i ? "," : "", mt_name(i));
    }
    snprintf(text + off, cap - off, "]}}");
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    f = frames[nframes++] = kr_test_build_len(&arena, text, &req, &len);
    free(text);
    kr_rbuf_init_flat(&rb, &iov, f, len);
    r = kr_audit_capture(&req, &rb, NULL, false);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(kr_audit_req_probes(r) <= 4u * 2 * MT_ENTRIES,
                  "%" PRIu64 " comparisons for %u lookups",
                  kr_audit_req_probes(r), 2 * MT_ENTRIES);
    base_info(&info, &req);
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    assert_mt_line(line, 10);
    assert_stream_line(&req, f, len, NULL, &info, line);
    free(line);
    kr_audit_req_free(r);

    /* a Fetch response streaming by, naming them all (a request of none) */
    build("{\"header\": {\"RequestApiKey\": 1, \"RequestApiVersion\": 11,"
          " \"CorrelationId\": 2, \"ClientId\": \"c\"},"
          " \"body\": {\"ReplicaId\": -1, \"MaxWaitMs\": 1, \"MinBytes\": 1,"
          " \"MaxBytes\": 1, \"IsolationLevel\": 0, \"SessionId\": 0,"
          " \"SessionEpoch\": -1, \"Topics\": [], \"ForgottenTopicsData\": [],"
          " \"RackId\": \"\"}}", &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    ck_assert_ptr_nonnull(r);
    kr_audit_scan_start(&as, r, NULL, KR_API_FETCH);
    for (i = 0; i < MT_ENTRIES; i++) {
        char name[16];
        int n = snprintf(name, sizeof(name), "t%u", mt_name(i));

        kr_audit_scan_event(&as, KR_SCAN_TOPIC, (const uint8_t *)name,
                            (size_t)n, n);
        kr_audit_scan_event(&as, KR_SCAN_RECORDS, NULL, 0, 3);
    }
    ck_assert_msg(kr_audit_req_probes(r) <= 4u * MT_ENTRIES,
                  "%" PRIu64 " comparisons for %u lookups",
                  kr_audit_req_probes(r), MT_ENTRIES);
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    assert_mt_line(line, 0);
    ck_assert_msg(strstr(line, "\"name\":\"t0\",\"partitions\":0,"
                         "\"record_bytes\":30}") != NULL, "%.300s", line);
    free(line);
    kr_audit_req_free(r);
}
END_TEST

/* ---- long strings -------------------------------------------------------- */

/* n copies of the JSON text unit (e.g. "\\u0001", "é") at out; returns
   the text's end. */
static char *
ls_rep(char *out, const char *unit, size_t n)
{
    size_t k = strlen(unit);

    while (n-- > 0) {
        memcpy(out, unit, k);
        out += k;
    }
    *out = '\0';
    return out;
}

/* How many times needle occurs in hay. */
static size_t
ls_count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (; (hay = strstr(hay, needle)) != NULL; hay += strlen(needle)) {
        n++;
    }
    return n;
}

/*
 * Strings from the wire are cut (doc/audit.md, Format): ClientId,
 * TransactionalId after 1024 bytes on a UTF-8 boundary, topic names after
 * 255, each with its "_truncated" key; names cut alike are one entry,
 * also when one comes cut from the scanner; topic entries stop at 1 MiB
 * of line (topics_truncated).  A request of 22 topics whose 32767-byte
 * names are control bytes (6 bytes each in JSON) made a 4.3 MB line,
 * which the sink's default queue dropped whole.
 */
START_TEST(test_long_strings)
{
    size_t cap = 8u << 20, len, i;
    char *text = malloc(cap), *o, *line, name255[256];
    struct kr_audit_info info;
    struct kr_audit_scan as;
    struct kr_audit_req *r;
    struct kr_msg req;
    json_t *j, *t;
    const char *cid;
    struct iovec iov;
    struct kr_rbuf rb;
    uint8_t *f;

    ck_assert_ptr_nonnull(text);
    /* ClientId "a" + 1000 "é" (2 bytes each): cut at 1023, not inside
       a character; TransactionalId of 1024 bytes: as is; two topic names
       of 300 control bytes alike in their first 255 (one entry), one of
       255 (not cut: an entry of its own), one of 32767 */
    o = text + sprintf(text, "{\"header\": {\"RequestApiKey\": 0, "
                       "\"RequestApiVersion\": 9, \"CorrelationId\": 4, "
                       "\"ClientId\": \"a");
    o = ls_rep(o, "\u00e9", 1000);
    o += sprintf(o, "\"}, \"body\": {\"TransactionalId\": \"");
    o = ls_rep(o, "t", 1024);
    o += sprintf(o, "\", \"Acks\": 1, \"TimeoutMs\": 1, \"TopicData\": [");
    for (i = 0; i < 4; i++) {
        o += sprintf(o, "%s{\"Name\": \"", i ? ", " : "");
        o = ls_rep(o, "\\u0001", i == 3 ? 32766 : 255);
        if (i < 2) {
            o += sprintf(o, "%s", i == 0 ? "x-first-after-255" : "y-other");
        } else if (i == 3) {
            o += sprintf(o, "z");
        }
        o += sprintf(o, "\", \"PartitionData\": [{\"Index\": 0, "
                     "\"Records\": null}]}");
    }
    sprintf(o, "]}}");
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    f = frames[nframes++] = kr_test_build_len(&arena, text, &req, &len);
    kr_rbuf_init_flat(&rb, &iov, f, len);
    r = kr_audit_capture(&req, &rb, NULL, false);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.rsp_bytes = 0;
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    ck_assert_uint_lt(strlen(line), 8192);
    /* the scanner keeps what the line keeps of each string */
    assert_stream_line(&req, f, len, NULL, &info, line);
    j = jload(line);
    cid = jget_str(j, "client_id");
    ck_assert_uint_eq(strlen(cid), 1023);
    ck_assert(strncmp(cid, "a\xc3\xa9", 3) == 0 &&
              strcmp(cid + 1021, "\xc3\xa9") == 0);
    ck_assert(json_is_true(json_object_get(j, "client_id_truncated")));
    ck_assert_uint_eq(strlen(jget_str(j, "transactional_id")), 1024);
    ck_assert_ptr_null(json_object_get(j, "transactional_id_truncated"));
    ck_assert_uint_eq(json_array_size(json_object_get(j, "topics")), 2);
    /* the three long names are one entry; the 255-byte one is another */
    t = jtopic(j, 0);
    ck_assert_uint_eq(strlen(jget_str(t, "name")), 255);
    ck_assert(json_is_true(json_object_get(t, "name_truncated")));
    ck_assert_int_eq(jint(t, "partitions"), 3);
    t = jtopic(j, 1);
    ck_assert_uint_eq(strlen(jget_str(t, "name")), 255);
    ck_assert_ptr_null(json_object_get(t, "name_truncated"));
    ck_assert_int_eq(jint(t, "partitions"), 1);
    json_decref(j);
    ck_assert_uint_eq(ls_count(line, "\\u0001"), 2 * 255);
    /* where doc/audit.md puts it: right after its key */
    ck_assert(strstr(line, "\xc3\xa9\",\"client_id_truncated\":true,"
                     "\"api\":") != NULL);
    free(line);
    /* the scanner gives a name's first 255 bytes and its length: the
       same entry as the request's cut name */
    memset(name255, 1, 255);
    kr_audit_scan_start(&as, r, NULL, KR_API_FETCH);
    kr_audit_scan_event(&as, KR_SCAN_TOPIC, (const uint8_t *)name255, 255,
                        300);
    kr_audit_scan_event(&as, KR_SCAN_RECORDS, NULL, 0, 7);
    kr_audit_scan_event(&as, KR_SCAN_TOPIC, (const uint8_t *)name255, 255,
                        255);
    kr_audit_scan_event(&as, KR_SCAN_RECORDS, NULL, 0, 5);
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    j = jload(line);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "topics")), 2);
    ck_assert_int_eq(jint(jtopic(j, 0), "record_bytes"), 7);
    ck_assert_int_eq(jint(jtopic(j, 1), "record_bytes"), 5);
    json_decref(j);
    free(line);
    kr_audit_req_free(r);

    /* 4096 topics of 255 control bytes: 6 MB of entries; the line stops
       them at 1 MiB */
    o = text + sprintf(text, "{\"header\": {\"RequestApiKey\": 3, "
                       "\"RequestApiVersion\": 4, \"CorrelationId\": 2, "
                       "\"ClientId\": \"m\"}, \"body\": {\"Topics\": [");
    for (i = 0; i < 4096; i++) {
        o += sprintf(o, "%s{\"Name\": \"%04zu", i ? ", " : "", i);
        o = ls_rep(o, "\\u0001", 251);
        o += sprintf(o, "\"}");
        ck_assert_uint_lt((size_t)(o - text), cap - 64);
    }
    sprintf(o, "], \"AllowAutoTopicCreation\": false}}");
    build(text, &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    ck_assert_ptr_nonnull(r);
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_ptr_nonnull(line);
    len = strlen(line);
    ck_assert_msg(len > (1u << 20) && len < (1u << 20) + 4096, "%zu", len);
    j = jload(line);
    ck_assert(json_is_true(json_object_get(j, "topics_truncated")));
    i = json_array_size(json_object_get(j, "topics"));
    ck_assert_msg(i > 600 && i < 4096, "%zu topics", i);
    snprintf(name255, sizeof(name255), "%04zu", i - 1);
    ck_assert(strncmp(jget_str(jtopic(j, i - 1), "name"), name255, 4) == 0);
    json_decref(j);
    free(line);
    kr_audit_req_free(r);
    free(text);
}
END_TEST

/* What a line is about, for the log when it cannot be queued: the API,
   the CorrelationId, the event; never a string the client chose. */
START_TEST(test_line_about)
{
    struct kr_audit_info info;
    struct kr_audit_conn cl;
    struct kr_msg req;
    char out[128], tiny[8], num[24], *line;

    build("{\"header\": {\"RequestApiKey\": 3, \"RequestApiVersion\": 4,"
          " \"CorrelationId\": -5, \"ClientId\": \"x,\\\"api\\\":\\\"Evil\"},"
          " \"body\": {\"Topics\": [{\"Name\": \",\\\"event\\\":\\\"x\"}],"
          " \"AllowAutoTopicCreation\": false}}", &req);
    base_info(&info, &req);
    info.client_id = "x,\"api\":\"Evil";
    line = kr_audit_format(&info, NULL, NULL, false);
    ck_assert_ptr_nonnull(line);
    kr_audit_line_about(line, out, sizeof(out));
    snprintf(num, sizeof(num), "%zu", strlen(line));
    ck_assert_msg(strncmp(out, "the Metadata request line (correlation_id "
                          "-5, ", 44) == 0 && strstr(out, num) != NULL,
                  "%s", out);
    kr_audit_line_about(line, tiny, sizeof(tiny));
    ck_assert_str_eq(tiny, "the Met");
    free(line);
    memset(&cl, 0, sizeof(cl));
    cl.event = "close";
    cl.client_id = ",\"event\":\"open";
    line = kr_audit_format_conn(&cl);
    ck_assert_ptr_nonnull(line);
    kr_audit_line_about(line, out, sizeof(out));
    snprintf(num, sizeof(num), "%zu", strlen(line));
    ck_assert_msg(strncmp(out, "the connection close line (", 27) == 0 &&
                  strstr(out, num) != NULL, "%s", out);
    free(line);
    kr_audit_line_about("{\"x\":1}", out, sizeof(out));
    ck_assert_str_eq(out, "an audit line (7 bytes)");
    kr_audit_line_about(NULL, out, sizeof(out));
    ck_assert_str_eq(out, "an audit line");
}
END_TEST

/* A Produce response (v9) of n partitions of "orders", partition i with
   ErrorCode i + 1, into text (cap bytes). */
static void
errs_rsp_text(char *text, size_t cap, unsigned n)
{
    size_t off;
    unsigned i;

    off = (size_t)snprintf(text, cap, "{\"apiKey\": 0, \"apiVersion\": 9, "
                           "\"header\": {\"CorrelationId\": 17}, \"body\": "
                           "{\"ThrottleTimeMs\": 0, \"Responses\": [{\"Name\":"
                           " \"orders\", \"PartitionResponses\": [");
    for (i = 0; i < n; i++) {
        off += (size_t)snprintf(text + off, cap - off,
                                "%s{\"Index\": %u, \"ErrorCode\": %u, "
                                "\"BaseOffset\": -1}", i ? ", " : "", i,
                                i + 1);
        ck_assert_uint_lt(off, cap - 16);
    }
    snprintf(text + off, cap - off, "]}]}}");
}

/*
 * A response with more distinct ErrorCodes than a line counts (64): the
 * first 64 are counted and errors_truncated says so, from a decoded
 * response and from a streamed one; with 64 exactly, no flag.
 */
START_TEST(test_errors_truncated)
{
    struct kr_audit_info info;
    struct kr_audit_scan as;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    char text[16384], *line;
    unsigned n, i;
    json_t *j;

    build(produce_req, &req);
    base_info(&info, &req);
    for (n = 64; n <= 65; n++) {
        errs_rsp_text(text, sizeof(text), n);
        build(text, &rsp);
        r = kr_audit_capture(&req, NULL, NULL, false);
        ck_assert_ptr_nonnull(r);
        line = kr_audit_format(&info, r, &rsp, false);
        ck_assert_ptr_nonnull(line);
        j = jload(line);
        ck_assert_uint_eq(json_object_size(json_object_get(j, "errors")), 64);
        ck_assert_int_eq(jint(json_object_get(j, "errors"),
                              "OFFSET_OUT_OF_RANGE"), 1);
        ck_assert(json_is_true(json_object_get(j, "errors_truncated")) ==
                  (n == 65));
        json_decref(j);
        free(line);
        /* the same codes seen by the scanner */
        kr_audit_scan_start(&as, r, NULL, KR_API_FETCH);
        for (i = 0; i < n; i++) {
            kr_audit_scan_event(&as, KR_SCAN_ERROR_CODE, NULL, 0, i + 1);
        }
        line = kr_audit_format(&info, r, NULL, false);
        ck_assert_ptr_nonnull(line);
        j = jload(line);
        ck_assert_uint_eq(json_object_size(json_object_get(j, "errors")), 64);
        ck_assert(json_is_true(json_object_get(j, "errors_truncated")) ==
                  (n == 65));
        ck_assert_msg(strstr(line, "},\"errors_truncated\":true,"
                             "\"actions\":") != NULL || n == 64, "%s", line);
        json_decref(j);
        free(line);
        kr_audit_req_free(r);
    }
}
END_TEST

/* ---- the schema: doc/audit.md -------------------------------------------- */

/* The keys doc/audit.md lists ("| `key` |" rows), '\n'-separated, each
   followed by '\n'; malloc'd. */
static char *
doc_keys(void)
{
    const char *top = getenv("top_srcdir");
    char path[512], row[2048], *keys;
    size_t len = 0, cap = 8192;
    FILE *f;

    snprintf(path, sizeof(path), "%s/doc/audit.md", top != NULL ? top : "..");
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    keys = calloc(1, cap);
    ck_assert_ptr_nonnull(keys);
    while (fgets(row, sizeof(row), f) != NULL) {
        char *end;

        if (strncmp(row, "| `", 3) != 0 ||
            (end = strchr(row + 3, '`')) == NULL) {
            continue;
        }
        *end = '\0';
        ck_assert_uint_lt(len + strlen(row + 3) + 2, cap);
        len += (size_t)sprintf(keys + len, "%s\n", row + 3);
    }
    fclose(f);
    return keys;
}

/* Is key (a line's key, "topics[].x" for a topic entry's) in keys? */
static bool
key_in(const char *keys, const char *key)
{
    size_t n = strlen(key);
    const char *p;

    for (p = keys; (p = strstr(p, key)) != NULL; p += n) {
        if ((p == keys || p[-1] == '\n') && p[n] == '\n') {
            return true;
        }
    }
    return false;
}

/* Add line's keys to seen (the same form), each not yet there; every one
   must be documented. */
static void
collect_keys(const char *line, const char *doc, char *seen, size_t cap)
{
    json_t *j = jload(line), *v, *t;
    const char *k, *tk;
    char key[128];
    size_t i;

    ck_assert_msg(j != NULL, "%s", line);
    json_object_foreach(j, k, v) {
        snprintf(key, sizeof(key), "%s", k);
        ck_assert_msg(key_in(doc, key), "key %s is not in doc/audit.md "
                      "(line %s)", key, line);
        if (!key_in(seen, key)) {
            ck_assert_uint_lt(strlen(seen) + strlen(key) + 2, cap);
            strcat(strcat(seen, key), "\n");
        }
        if (strcmp(k, "topics") != 0) {
            continue;
        }
        json_array_foreach(v, i, t) {
            json_t *tv;

            json_object_foreach(t, tk, tv) {
                snprintf(key, sizeof(key), "topics[].%s", tk);
                ck_assert_msg(key_in(doc, key), "key %s is not in "
                              "doc/audit.md (line %s)", key, line);
                if (!key_in(seen, key)) {
                    ck_assert_uint_lt(strlen(seen) + strlen(key) + 2, cap);
                    strcat(strcat(seen, key), "\n");
                }
            }
        }
    }
    json_decref(j);
}

/*
 * Every key of lines with every field set (a Produce with bodies and
 * every fact, a Fetch with record bytes, a request of 4097 topics, a
 * refused one with decode_error and note, open and close lines) is in
 * doc/audit.md, and every key doc/audit.md lists is in one of them.
 * (tests/audit_doc.sh checks the keys src/kr_audit.c can write.)
 */
START_TEST(test_doc_keys)
{
    char *doc = doc_keys(), *seen = calloc(1, 8192), *line, *text, *b3, *o;
    char ftext[4096];
    struct kr_audit_info info;
    struct kr_audit_conn cl;
    struct kr_audit_req *r;
    struct kr_msg req, rsp;
    struct iovec iov;
    struct kr_rbuf rb;
    size_t len, i, off;
    uint8_t *f;
    const char *p;

    ck_assert_ptr_nonnull(seen);
    ck_assert_msg(key_in(doc, "conn_id") && key_in(doc, "topics[].name"),
                  "doc/audit.md lists no keys?");
    /* a Produce with every fact, bodies, a translated version */
    b3 = batch_b64(3, 0, 0, false);
    text = malloc(200000);
    ck_assert_ptr_nonnull(text);
    snprintf(text, 200000,
             "{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 9,"
             " \"CorrelationId\": 4, \"ClientId\": \"p\"},"
             " \"body\": {\"TransactionalId\": \"t\", \"Acks\": -1,"
             " \"TimeoutMs\": 1000, \"TopicData\": ["
             "  {\"Name\": \"orders\", \"PartitionData\": ["
             "    {\"Index\": 0, \"Records\": \"%s\"}]}]}}", b3);
    free(b3);
    f = frames[nframes++] = kr_test_build_len(&arena, text, &req, &len);
    build(produce_rsp, &rsp);
    kr_rbuf_init_flat(&rb, &iov, f, len);
    r = kr_audit_capture(&req, &rb, NULL, true);
    ck_assert_ptr_nonnull(r);
    base_info(&info, &req);
    info.peer.instance = "i";
    info.peer.conn_id = "c#0.1";
    info.peer.route = "node";
    info.peer.upstream_addr = "h:1";
    info.peer.client_sw_name = "n";
    info.peer.client_sw_version = "v";
    info.peer.principal = "User:p";
    info.translated = true;
    line = kr_audit_format(&info, r, &rsp, true);
    ck_assert_ptr_nonnull(line);
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    /* a JoinGroup's group ids */
    build("{\"header\": {\"RequestApiKey\": 11, \"RequestApiVersion\": 5,"
          " \"CorrelationId\": 1, \"ClientId\": \"c\"},"
          " \"body\": {\"GroupId\": \"g\", \"SessionTimeoutMs\": 1,"
          " \"RebalanceTimeoutMs\": 1, \"MemberId\": \"m\","
          " \"GroupInstanceId\": null, \"ProtocolType\": \"consumer\","
          " \"Protocols\": []}}", &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    line = kr_audit_format(&info, r, NULL, false);
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    /* strings cut: every "_truncated" key */
    o = text + sprintf(text, "{\"header\": {\"RequestApiKey\": 0, "
                       "\"RequestApiVersion\": 9, \"CorrelationId\": 4, "
                       "\"ClientId\": \"");
    o = ls_rep(o, "c", 1025);
    o += sprintf(o, "\"}, \"body\": {\"TransactionalId\": \"");
    o = ls_rep(o, "t", 1025);
    o += sprintf(o, "\", \"Acks\": 1, \"TimeoutMs\": 1, \"TopicData\": "
                 "[{\"Name\": \"");
    o = ls_rep(o, "n", 256);
    sprintf(o, "\", \"PartitionData\": []}]}}");
    build(text, &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    line = kr_audit_format(&info, r, NULL, false);
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    o = text + sprintf(text, "{\"header\": {\"RequestApiKey\": 12, "
                       "\"RequestApiVersion\": 4, \"CorrelationId\": 1, "
                       "\"ClientId\": \"c\"}, \"body\": {\"GroupId\": \"");
    o = ls_rep(o, "g", 1025);
    o += sprintf(o, "\", \"GenerationId\": 1, \"MemberId\": \"");
    o = ls_rep(o, "m", 1025);
    sprintf(o, "\", \"GroupInstanceId\": null}}");
    build(text, &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    line = kr_audit_format(&info, r, NULL, false);
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    /* more than 64 distinct ErrorCodes: errors_truncated */
    build(produce_req, &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    errs_rsp_text(text, 200000, 65);
    build(text, &rsp);
    line = kr_audit_format(&info, r, &rsp, false);
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    /* more than 4096 topics: topics_truncated */
    off = (size_t)sprintf(text, "{\"header\": {\"RequestApiKey\": 3, "
                          "\"RequestApiVersion\": 4, \"CorrelationId\": 2, "
                          "\"ClientId\": \"m\"}, \"body\": {\"Topics\": [");
    for (i = 0; i < 4097; i++) {
        off += (size_t)sprintf(text + off, "%s{\"Name\": \"t%zu\"}",
                               i ? ", " : "", i);
    }
    sprintf(text + off, "], \"AllowAutoTopicCreation\": false}}");
    build(text, &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    ck_assert_ptr_nonnull(r);
    line = kr_audit_format(&info, r, NULL, false);
    ck_assert_msg(strstr(line, "\"topics_truncated\":true") != NULL, "no "
                  "topics_truncated");
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    free(text);
    /* a Fetch's record bytes */
    build(fetch_req, &req);
    r = kr_audit_capture(&req, NULL, NULL, false);
    fetch_rsp_text(ftext, sizeof(ftext));
    build(ftext, &rsp);
    kr_audit_note_response(r, &rsp, NULL);
    line = kr_audit_format(&info, r, &rsp, false);
    collect_keys(line, doc, seen, 8192);
    free(line);
    kr_audit_req_free(r);
    /* refused: decode_error and note */
    info.decode_error = "why";
    info.note = "note";
    line = kr_audit_format(&info, NULL, NULL, false);
    collect_keys(line, doc, seen, 8192);
    free(line);
    /* closed before its response: incomplete, errors unknown */
    info.decode_error = NULL;
    info.incomplete = true;
    line = kr_audit_format(&info, NULL, NULL, false);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strstr(line, "\"errors\":null,\"actions\":[") != NULL &&
                  strstr(line, "],\"incomplete\":true,\"note\":") != NULL,
                  "%s", line);
    collect_keys(line, doc, seen, 8192);
    free(line);
    /* open and close */
    memset(&cl, 0, sizeof(cl));
    cl.event = "close";
    cl.peer = info.peer;
    cl.client_id = "c";
    cl.cause = "client";
    cl.reason = "r";
    /* through a proxy that sent a PROXY protocol header (issue 12) */
    cl.peer.proxy_addr = "10.0.0.1";
    cl.peer.proxy_port = 33000;
    line = kr_audit_format_conn(&cl);
    ck_assert_msg(strstr(line, "\"client_port\":51234,\"proxy_addr\":"
                         "\"10.0.0.1\",\"proxy_port\":33000,\"route\"")
                  != NULL, "%s", line);
    collect_keys(line, doc, seen, 8192);
    free(line);
    cl.peer.proxy_addr = NULL;
    /* a SASL authentication (issue 9): every key of its table */
    {
        struct kr_audit_auth au;

        memset(&au, 0, sizeof(au));
        au.peer = info.peer;
        au.peer.principal = "User:alice";
        au.peer.principal_state = "verified";
        au.client_id = "c";
        au.mechanism = "SCRAM-SHA-512";
        au.outcome = "failure";
        au.error_code = 58;
        au.reason = "bad_password";
        au.reauth = true;
        au.handshake_version = 1;
        au.authenticate_version = 2;
        au.session_lifetime_ms = 3600000;
        line = kr_audit_format_auth(&au);
        ck_assert_ptr_nonnull(line);
        ck_assert_msg(strstr(line, "\"type\":\"authentication\"") != NULL &&
                      strstr(line, "\"principal\":\"User:alice\","
                             "\"principal_state\":\"verified\","
                             "\"mechanism\":\"SCRAM-SHA-512\","
                             "\"outcome\":\"failure\",\"error_code\":58,"
                             "\"reason\":\"bad_password\","
                             "\"reauth\":true,\"handshake_version\":1,"
                             "\"authenticate_version\":2,"
                             "\"session_lifetime_ms\":3600000}") != NULL,
                      "%s", line);
        collect_keys(line, doc, seen, 8192);
        free(line);
        /* a passthrough failure: the broker refused, no reason */
        au.reason = NULL;
        line = kr_audit_format_auth(&au);
        ck_assert_ptr_nonnull(line);
        ck_assert_msg(strstr(line, "\"error_code\":58,\"reauth\"") != NULL,
                      "%s", line);
        free(line);
    }
    /* every documented key was written */
    for (p = doc; *p != '\0'; p = strchr(p, '\n') + 1) {
        char key[128];
        size_t n = (size_t)(strchr(p, '\n') - p);

        ck_assert_uint_lt(n, sizeof(key));
        memcpy(key, p, n);
        key[n] = '\0';
        ck_assert_msg(key_in(seen, key), "doc/audit.md lists %s, but no "
                      "line of this test has it", key);
    }
    free(seen);
    free(doc);
}
END_TEST

/* ---- redaction ----------------------------------------------------------- */

START_TEST(test_redact_sasl)
{
    char *line;

    /* "hunter2-sasl-token" = aHVudGVyMi1zYXNsLXRva2Vu */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 36, \"RequestApiVersion\": 2,"
        " \"ClientId\": \"c\"},"
        " \"body\": {\"AuthBytes\": \"aHVudGVyMi1zYXNsLXRva2Vu\"}}",
        /* "server-final-proof" */
        "{\"apiKey\": 36, \"apiVersion\": 2, \"header\": {},"
        " \"body\": {\"ErrorCode\": 0, \"ErrorMessage\": null,"
        "  \"AuthBytes\": \"c2VydmVyLWZpbmFsLXByb29m\","
        "  \"SessionLifetimeMs\": 3600000}}");
    assert_redacted(line, "hunter2-sasl-token");
    assert_redacted(line, "server-final-proof");
    ck_assert_msg(strstr(line, "\"request_body\":{\"AuthBytes\":"
                         "\"[redacted]\"}") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"SessionLifetimeMs\":3600000") != NULL,
                  "%s", line);
    free(line);
}
END_TEST

START_TEST(test_redact_tokens)
{
    char *line;

    /* CreateDelegationToken response Hmac "token-hmac-create" */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 38, \"RequestApiVersion\": 3},"
        " \"body\": {\"Renewers\": [], \"MaxLifetimeMs\": -1}}",
        "{\"apiKey\": 38, \"apiVersion\": 3, \"header\": {},"
        " \"body\": {\"ErrorCode\": 0, \"PrincipalType\": \"User\","
        "  \"PrincipalName\": \"alice\", \"TokenId\": \"tok-1\","
        "  \"Hmac\": \"dG9rZW4taG1hYy1jcmVhdGU=\"}}");
    assert_redacted(line, "token-hmac-create");
    ck_assert_msg(strstr(line, "\"TokenId\":\"tok-1\"") != NULL, "%s", line);
    free(line);
    /* DescribeDelegationToken response Tokens[].Hmac "token-hmac-desc" */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 41, \"RequestApiVersion\": 3},"
        " \"body\": {\"Owners\": null}}",
        "{\"apiKey\": 41, \"apiVersion\": 3, \"header\": {},"
        " \"body\": {\"ErrorCode\": 0, \"Tokens\": ["
        "  {\"PrincipalType\": \"User\", \"PrincipalName\": \"a\","
        "   \"TokenRequesterPrincipalType\": \"User\","
        "   \"TokenRequesterPrincipalName\": \"a\", \"TokenId\": \"t\","
        "   \"Hmac\": \"dG9rZW4taG1hYy1kZXNj\", \"Renewers\": []}]}}");
    assert_redacted(line, "token-hmac-desc");
    free(line);
    /* RenewDelegationToken request Hmac "token-hmac-renew" */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 39, \"RequestApiVersion\": 2},"
        " \"body\": {\"Hmac\": \"dG9rZW4taG1hYy1yZW5ldw==\","
        "  \"RenewPeriodMs\": 1000}}", NULL);
    assert_redacted(line, "token-hmac-renew");
    free(line);
    /* ExpireDelegationToken request Hmac "token-hmac-expire" */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 40, \"RequestApiVersion\": 2},"
        " \"body\": {\"Hmac\": \"dG9rZW4taG1hYy1leHBpcmU=\","
        "  \"ExpiryTimePeriodMs\": 1}}", NULL);
    assert_redacted(line, "token-hmac-expire");
    free(line);
}
END_TEST

START_TEST(test_redact_scram)
{
    char *line;

    /* Salt "salty-salt-bytes", SaltedPassword "salted-password!" */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 51, \"RequestApiVersion\": 0},"
        " \"body\": {\"Deletions\": [], \"Upsertions\": ["
        "  {\"Name\": \"alice\", \"Mechanism\": 2, \"Iterations\": 8192,"
        "   \"Salt\": \"c2FsdHktc2FsdC1ieXRlcw==\","
        "   \"SaltedPassword\": \"c2FsdGVkLXBhc3N3b3JkIQ==\"}]}}", NULL);
    assert_redacted(line, "salty-salt-bytes");
    assert_redacted(line, "salted-password!");
    ck_assert_msg(strstr(line, "\"Name\":\"alice\"") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"Iterations\":8192") != NULL, "%s", line);
    free(line);
}
END_TEST

START_TEST(test_redact_describe_configs)
{
    char *line;

    line = line_of(
        "{\"header\": {\"RequestApiKey\": 32, \"RequestApiVersion\": 4},"
        " \"body\": {\"Resources\": [{\"ResourceType\": 4,"
        "  \"ResourceName\": \"1\", \"ConfigurationKeys\": null}],"
        "  \"IncludeSynonyms\": true}}",
        "{\"apiKey\": 32, \"apiVersion\": 4, \"header\": {},"
        " \"body\": {\"ThrottleTimeMs\": 0, \"Results\": ["
        "  {\"ErrorCode\": 0, \"ErrorMessage\": null, \"ResourceType\": 4,"
        "   \"ResourceName\": \"1\", \"Configs\": ["
        "   {\"Name\": \"custom.plugin.opaque\", \"Value\": \"sens-val-1\","
        "    \"ReadOnly\": false, \"ConfigSource\": 1, \"IsSensitive\": true,"
        "    \"Synonyms\": [{\"Name\": \"custom.plugin.opaque\","
        "      \"Value\": \"sens-syn-1\", \"Source\": 1}],"
        "    \"ConfigType\": 2, \"Documentation\": null},"
        "   {\"Name\": \"listener.name.sasl_ssl.plain.sasl.jaas.config\","
        "    \"Value\": \"org.x required password=jaas-pw-1;\","
        "    \"ReadOnly\": false, \"ConfigSource\": 1, \"IsSensitive\": false,"
        "    \"Synonyms\": [], \"ConfigType\": 9, \"Documentation\": null},"
        "   {\"Name\": \"log.retention.ms\", \"Value\": \"604800000\","
        "    \"ReadOnly\": false, \"ConfigSource\": 5, \"IsSensitive\": false,"
        "    \"Synonyms\": [], \"ConfigType\": 5, \"Documentation\": null}"
        "  ]}]}}");
    assert_redacted(line, "sens-val-1");
    assert_redacted(line, "sens-syn-1");
    assert_redacted(line, "jaas-pw-1");
    ck_assert_msg(strstr(line, "\"Value\":\"604800000\"") != NULL, "%s",
                  line);
    free(line);
}
END_TEST

START_TEST(test_redact_alter_configs)
{
    char *line;

    /* AlterConfigs v2 (flexible) */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 33, \"RequestApiVersion\": 2},"
        " \"body\": {\"Resources\": [{\"ResourceType\": 4,"
        "  \"ResourceName\": \"1\", \"Configs\": ["
        "   {\"Name\": \"ssl.keystore.password\", \"Value\": \"ks-pw-1\"},"
        "   {\"Name\": \"ssl.key.password\", \"Value\": \"key-pw-1\"},"
        "   {\"Name\": \"ssl.truststore.password\", \"Value\": \"ts-pw-1\"},"
        "   {\"Name\": \"ssl.keystore.key\", \"Value\": \"pem-key-1\"},"
        "   {\"Name\": \"delegation.token.secret.key\","
        "    \"Value\": \"dt-secret-1\"},"
        "   {\"Name\": \"password.encoder.secret\", \"Value\": \"enc-1\"},"
        "   {\"Name\": \"num.io.threads\", \"Value\": \"16\"}]}],"
        "  \"ValidateOnly\": false}}", NULL);
    assert_redacted(line, "ks-pw-1");
    assert_redacted(line, "key-pw-1");
    assert_redacted(line, "ts-pw-1");
    assert_redacted(line, "pem-key-1");
    assert_redacted(line, "dt-secret-1");
    assert_redacted(line, "enc-1");
    ck_assert_msg(strstr(line, "\"Value\":\"16\"") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"Name\":\"ssl.keystore.password\"") != NULL,
                  "%s", line);
    free(line);

    /* IncrementalAlterConfigs v1 */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 44, \"RequestApiVersion\": 1},"
        " \"body\": {\"Resources\": [{\"ResourceType\": 4,"
        "  \"ResourceName\": \"\", \"Configs\": ["
        "   {\"Name\": \"sasl.jaas.config\", \"ConfigOperation\": 0,"
        "    \"Value\": \"a required password=\\\"inc-pw-1\\\";\"},"
        "   {\"Name\": \"SSL.TRUSTSTORE.PASSWORD\", \"ConfigOperation\": 0,"
        "    \"Value\": \"inc-pw-2\"},"
        "   {\"Name\": \"ssl.keystore.password\", \"ConfigOperation\": 1,"
        "    \"Value\": null}]}], \"ValidateOnly\": true}}", NULL);
    assert_redacted(line, "inc-pw-1");
    assert_redacted(line, "inc-pw-2");
    /* a null value is not a secret: stays null */
    ck_assert_msg(strstr(line, "\"ConfigOperation\":1,\"Value\":null")
                  != NULL, "%s", line);
    free(line);

    /* CreateTopics v7 topic configs; the topic itself is in "topics". */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 19, \"RequestApiVersion\": 7},"
        " \"body\": {\"Topics\": [{\"Name\": \"secure\","
        "  \"NumPartitions\": 3, \"ReplicationFactor\": 1,"
        "  \"Assignments\": [], \"Configs\": ["
        "   {\"Name\": \"confluent.tier.s3.aws.secret.access.key\","
        "    \"Value\": \"ct-secret-1\"},"
        "   {\"Name\": \"cleanup.policy\", \"Value\": \"compact\"}]}],"
        "  \"timeoutMs\": 1000, \"validateOnly\": false}}", NULL);
    assert_redacted(line, "ct-secret-1");
    ck_assert_msg(strstr(line, "\"Value\":\"compact\"") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "\"topics\":[{\"name\":\"secure\","
                         "\"partitions\":0}]") != NULL, "%s", line);
    free(line);
}
END_TEST

START_TEST(test_redact_envelope_unknown_tags)
{
    char *line;

    /* Envelope RequestData "inner-request-bytes"; an unknown tagged
     * field's data "tagged-secret" in a SaslAuthenticate v2 body. */
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 58, \"RequestApiVersion\": 0},"
        " \"body\": {\"RequestData\": \"aW5uZXItcmVxdWVzdC1ieXRlcw==\","
        "  \"RequestPrincipal\": null, \"ClientHostAddress\": \"fwAAAQ==\"}}",
        NULL);
    assert_redacted(line, "inner-request-bytes");
    ck_assert_msg(strstr(line, "\"ClientHostAddress\":\"fwAAAQ==\"") != NULL,
                  "%s", line);
    free(line);
    line = line_of(
        "{\"header\": {\"RequestApiKey\": 36, \"RequestApiVersion\": 2},"
        " \"body\": {\"AuthBytes\": \"\", \"_unknownTaggedFields\": "
        "  [{\"tag\": 9, \"data\": \"dGFnZ2VkLXNlY3JldA==\"}]}}", NULL);
    assert_redacted(line, "tagged-secret");
    ck_assert_msg(strstr(line, "{\"tag\":9,\"data\":\"[redacted]\"}")
                  != NULL, "%s", line);
    free(line);
}
END_TEST

/* Every API, version and direction, every field populated: each line
 * parses as JSON, names its API, and no secret-named field leaks. */
START_TEST(test_redact_all_apis)
{
    struct kr_audit_info info;
    unsigned lines = 0, secrets = 0;
    char b64[64];
    int16_t k, v;

    kr_base64_encode((const uint8_t *)TREE_FILL_SECRET,
                     strlen(TREE_FILL_SECRET), b64);
    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *api = kr_api_get(k);

        if (api == NULL) {
            continue;
        }
        for (v = api->valid.lo; v <= api->valid.hi; v++) {
            uint16_t rq = kr_api_root(api, false, v);
            uint16_t rs = kr_api_root(api, true, v);
            struct kr_audit_req *r;
            struct kr_msg req, rsp;
            json_t *j;
            char *line;

            if (rq == KR_NO_STRUCT || rs == KR_NO_STRUCT) {
                continue;
            }
            memset(&req, 0, sizeof(req));
            memset(&rsp, 0, sizeof(rsp));
            req.dir = KR_DIR_REQUEST;
            rsp.dir = KR_DIR_RESPONSE;
            req.api_key = rsp.api_key = k;
            req.api_version = rsp.api_version = v;
            req.body = kr_node_new(&arena, rq, v);
            rsp.body = kr_node_new(&arena, rs, v);
            ck_assert_ptr_nonnull(req.body);
            ck_assert_ptr_nonnull(rsp.body);
            ck_assert(tree_fill(&arena, req.body, "topic-xy", 0));
            ck_assert(tree_fill(&arena, rsp.body, "topic-xy", 0));
            r = kr_audit_capture(&req, NULL, NULL, true);
            ck_assert_ptr_nonnull(r);
            base_info(&info, &req);
            line = kr_audit_format(&info, r, &rsp, true);
            ck_assert_ptr_nonnull(line);
            j = jload(line);
            ck_assert_msg(j != NULL, "not JSON: %s", line);
            ck_assert_str_eq(json_string_value(json_object_get(j, "api")),
                             api->name);
            ck_assert_ptr_nonnull(json_object_get(j, "request_body"));
            ck_assert_ptr_nonnull(json_object_get(j, "response_body"));
            json_decref(j);
            ck_assert_msg(strstr(line, TREE_FILL_SECRET) == NULL &&
                          strstr(line, b64) == NULL, "secret in %s", line);
            secrets += strstr(line, KR_JSON_REDACTED) != NULL;
            lines++;
            free(line);
            kr_audit_req_free(r);
            kr_arena_reset(&arena);
        }
    }
    ck_assert_uint_gt(lines, 300);
    /* SaslAuthenticate 0-2, 4 delegation-token APIs, SCRAM, Envelope */
    ck_assert_uint_ge(secrets, 3 + 4 + 1 + 1);
}
END_TEST

/* A caller's own hook, and the policy functions directly. */
static bool
redact_clientid(void *arg, const struct kr_node *parent,
                const struct kr_node *n, unsigned field)
{
    unsigned *calls = arg;

    (*calls)++;
    (void)parent;
    return strcmp(kr_node_field(n, field)->name, "ClientId") == 0;
}

START_TEST(test_redact_hook)
{
    struct kr_codec_err err;
    struct kr_msg m;
    unsigned calls = 0;
    json_t *j;
    char *s;

    build("{\"header\": {\"RequestApiKey\": 36, \"RequestApiVersion\": 2,"
          " \"CorrelationId\": 4, \"ClientId\": \"who-am-i\"},"
          " \"body\": {\"AuthBytes\": \"aHVudGVyMi1zYXNsLXRva2Vu\"}}", &m);
    memset(&err, 0, sizeof(err));
    /* hook only: ClientId hidden, AuthBytes kept (no KR_JSON_REDACT) */
    j = kr_json_from_msg_redact(&m, NULL, 0, redact_clientid, &calls, &err);
    ck_assert_ptr_nonnull(j);
    s = json_dumps(j, JSON_COMPACT);
    ck_assert_str_eq(s, "{\"header\":{\"RequestApiKey\":36,"
                     "\"RequestApiVersion\":2,\"CorrelationId\":4,"
                     "\"ClientId\":\"[redacted]\"},"
                     "\"body\":{\"AuthBytes\":\"aHVudGVyMi1zYXNsLXRva2Vu\"}}");
    ck_assert_uint_eq(calls, 5);
    free(s);
    json_decref(j);
    /* both */
    j = kr_json_from_msg_redact(&m, NULL, KR_JSON_REDACT, redact_clientid,
                                &calls, &err);
    ck_assert_ptr_nonnull(j);
    s = json_dumps(json_object_get(j, "body"), JSON_COMPACT);
    ck_assert_str_eq(s, "{\"AuthBytes\":\"[redacted]\"}");
    free(s);
    json_decref(j);
    /* the flag on the plain entry point */
    j = kr_json_from_msg(&m, NULL, KR_JSON_REDACT, &err);
    ck_assert_ptr_nonnull(j);
    s = json_dumps(json_object_get(j, "body"), JSON_COMPACT);
    ck_assert_str_eq(s, "{\"AuthBytes\":\"[redacted]\"}");
    free(s);
    json_decref(j);

    ck_assert(kr_json_config_sensitive("ssl.key.password", 16));
    ck_assert(kr_json_config_sensitive(
        "listener.name.internal.scram-sha-256.sasl.jaas.config", 53));
    ck_assert(kr_json_config_sensitive("ssl.truststore.certificates", 27));
    ck_assert(kr_json_config_sensitive("delegation.token.master.key", 27));
    ck_assert(!kr_json_config_sensitive("retention.ms", 12));
    ck_assert(!kr_json_config_sensitive("ssl.keystore.type", 17));
    /* length is honoured: "retention.ms.password" cut to 12 bytes */
    ck_assert(!kr_json_config_sensitive("retention.ms.password", 12));
    ck_assert(!kr_json_config_sensitive(NULL, 0));
}
END_TEST

/* ---- sink ---------------------------------------------------------------- */

START_TEST(test_sink_close_flushes)
{
    char path[128], err[256], line[64], *all, *p;
    struct kr_audit *au;
    unsigned i;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    au = kr_audit_open(path, 1 << 20, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    for (i = 0; i < 1000; i++) {
        snprintf(line, sizeof(line), "{\"n\":%u}", i);
        ck_assert(kr_audit_write(au, line, strlen(line)));
    }
    ck_assert_uint_eq(kr_audit_dropped(au), 0);
    kr_audit_close(au);                 /* no flush before: close does it */
    all = kr_test_slurp(path, NULL);
    p = all;
    for (i = 0; i < 1000; i++) {
        int n = snprintf(line, sizeof(line), "{\"n\":%u}\n", i);

        ck_assert_msg(strncmp(p, line, (size_t)n) == 0, "line %u", i);
        p += n;
    }
    ck_assert_str_eq(p, "");
    free(all);
    /* bad target */
    snprintf(path, sizeof(path), "%s/no/such/dir/audit.log", tmpdir);
    ck_assert_ptr_null(kr_audit_open(path, 0, err, sizeof(err)));
    ck_assert_msg(strstr(err, "no/such/dir") != NULL, "%s", err);
    /* syslog target: accepted and counted (content goes to syslog);
       with no syslog socket (kr_log_syslog_path: nothing there, then a
       socket) the lines are counted as dropped, as syslog(3) would lose
       them without a word */
    {
        const char *saved = kr_log_syslog_path;
        struct sockaddr_un sa;
        int fd;

        snprintf(path, sizeof(path), "%s/log", tmpdir);
        kr_log_syslog_path = path;
        au = kr_audit_open("syslog", 0, err, sizeof(err));
        ck_assert_msg(au != NULL, "%s", err);
        ck_assert(kr_audit_write(au, "{\"check_audit\":1}", 17));
        ck_assert(kr_audit_write(au, "{\"check_audit\":2}", 17));
        kr_audit_flush(au);
        ck_assert_uint_eq(kr_audit_written(au), 0);
        ck_assert_uint_eq(kr_audit_dropped(au), 2);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert(kr_audit_write(au, "{\"check_audit\":3}", 17));
        kr_audit_flush(au);
        ck_assert_uint_eq(kr_audit_written(au), 1);
        ck_assert_uint_eq(kr_audit_dropped(au), 2);
        kr_audit_close(au);
        close(fd);
        unlink(path);
        kr_log_syslog_path = saved;
    }
    ck_assert(!kr_audit_write(NULL, "x", 1));
    ck_assert_uint_eq(kr_audit_dropped(NULL), 0);
}
END_TEST

START_TEST(test_sink_reopen)
{
    char path[128], old[140], err[256], *a, *b;
    struct kr_audit *au;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    snprintf(old, sizeof(old), "%s.1", path);
    au = kr_audit_open(path, 0, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    ck_assert(kr_audit_write(au, "before", 6));
    kr_audit_flush(au);
    ck_assert_uint_eq(kr_audit_written(au), 1);
    ck_assert_int_eq(rename(path, old), 0);
    ck_assert(kr_audit_write(au, "still-old", 9));
    kr_audit_flush(au);                 /* no reopen asked: old file */
    kr_audit_reopen(au);
    ck_assert(kr_audit_write(au, "after", 5));
    kr_audit_close(au);
    a = kr_test_slurp(old, NULL);
    b = kr_test_slurp(path, NULL);
    ck_assert_str_eq(a, "before\nstill-old\n");
    ck_assert_str_eq(b, "after\n");
    free(a);
    free(b);
}
END_TEST

/*
 * Target "stdout": the lines go to fd 1 as the process has it (here a
 * file put there with dup2), reopen is a no-op, and closing the sink
 * leaves fd 1 open.
 */
START_TEST(test_sink_stdout)
{
    char path[128], err[256], *all;
    struct kr_audit *au;
    int fd, saved;

    snprintf(path, sizeof(path), "%s/stdout.jsonl", tmpdir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
    close(fd);
    au = kr_audit_open("stdout", 0, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    ck_assert(kr_audit_write(au, "{\"n\":1}", 7));
    kr_audit_reopen(au);
    ck_assert(kr_audit_write(au, "{\"n\":2}", 7));
    kr_audit_flush(au);
    ck_assert_uint_eq(kr_audit_written(au), 2);
    kr_audit_close(au);
    /* fd 1 is still the file */
    ck_assert_int_eq(write(STDOUT_FILENO, "after\n", 6), 6);
    ck_assert_int_eq(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
    close(saved);
    all = kr_test_slurp(path, NULL);
    ck_assert_str_eq(all, "{\"n\":1}\n{\"n\":2}\nafter\n");
    free(all);
}
END_TEST

/* The reading end of a pipe, read slowly by a thread into a buffer. */
struct slow_reader {
    int fd;
    char *buf;
    size_t len, cap;
};

static void *
slow_read(void *arg)
{
    struct slow_reader *sr = arg;
    ssize_t n;

    for (;;) {
        struct timespec pause = { 0, 2 * 1000 * 1000 };

        if (sr->len == sr->cap) {
            break;
        }
        n = read(sr->fd, sr->buf + sr->len,
                 sr->cap - sr->len < 4096 ? sr->cap - sr->len : 4096);
        if (n <= 0) {
            break;
        }
        sr->len += (size_t)n;
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* Lines of path containing what (path a text file). */
static int
count_lines(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, what) != NULL;
    }
    fclose(f);
    return n;
}

/*
 * A target that keeps failing (/dev/full) is logged once when it starts
 * failing, then not per batch (a reader gone for good must not fill the
 * log): the rest is reported in one line at close, with the total.
 */
START_TEST(test_sink_failing_reported_once)
{
    char dir[] = "/tmp/check_audit.XXXXXX", logp[64], err[256] = "";
    struct kr_audit *au;
    int i;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(logp, sizeof(logp), "%s/log", dir);
    ck_assert_int_eq(kr_log_open(logp, "check"), KR_OK);
    au = kr_audit_open("/dev/full", 0, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    for (i = 0; i < 5; i++) {           /* five batches */
        ck_assert(kr_audit_write(au, "{\"n\":1}", 7));
        kr_audit_flush(au);
    }
    ck_assert_uint_eq(kr_audit_dropped(au), 5);
    ck_assert_int_eq(count_lines(logp, "audit: write to /dev/full failed: "
                                       "No space left on device: 1 line "
                                       "lost"), 1);
    kr_audit_close(au);
    ck_assert_int_eq(count_lines(logp, "audit: write to /dev/full failed: "
                                       "No space left on device: 4 lines "
                                       "lost"), 1);
    ck_assert_int_eq(count_lines(logp, "audit: write to /dev/full"), 2);
    kr_log_close();
    ck_assert_int_eq(unlink(logp), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/*
 * Target "stdout" when fd 1 is a non-blocking pipe (a parent made it so)
 * that fills up: the writer waits for the reader instead of losing the
 * rest of a batch (and cutting a line in two); once closing, it waits a
 * bounded time, then counts what it could not write as lost.
 */
START_TEST(test_sink_stdout_nonblock)
{
    enum { NLINES = 3000 };
    struct slow_reader sr;
    struct kr_audit *au;
    char err[256], line[128];
    int p[2], saved;
    pthread_t th;
    size_t i, off;

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK),
                     0);
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(p[1], STDOUT_FILENO), STDOUT_FILENO);
    close(p[1]);
    au = kr_audit_open("stdout", 1u << 20, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    /* 3000 lines of 100 bytes: 300 KB, more than a pipe holds (64 KiB) */
    memset(&sr, 0, sizeof(sr));
    sr.fd = p[0];
    sr.cap = (size_t)NLINES * 101;
    sr.buf = malloc(sr.cap);
    ck_assert_ptr_nonnull(sr.buf);
    ck_assert_int_eq(pthread_create(&th, NULL, slow_read, &sr), 0);
    for (i = 0; i < NLINES; i++) {
        snprintf(line, sizeof(line), "{\"n\":%06zu,\"pad\":\"%-79s\"}", i,
                 "x");
        ck_assert_uint_eq(strlen(line), 100);
        ck_assert(kr_audit_write(au, line, 100));
    }
    kr_audit_flush(au);
    ck_assert_uint_eq(kr_audit_dropped(au), 0);
    ck_assert_uint_eq(kr_audit_written(au), NLINES);
    pthread_join(th, NULL);
    ck_assert_uint_eq(sr.len, (size_t)NLINES * 101);
    for (i = 0, off = 0; i < NLINES; i++, off += 101) {
        char want[16];

        snprintf(want, sizeof(want), "{\"n\":%06zu,", i);
        ck_assert_msg(memcmp(sr.buf + off, want, strlen(want)) == 0 &&
                      sr.buf[off + 100] == '\n', "line %zu: %.101s", i,
                      sr.buf + off);
    }
    /* nobody reads any more: closing gives up after a while, and counts
       the lines it could not write */
    for (i = 0; i < NLINES; i++) {
        snprintf(line, sizeof(line), "{\"n\":%06zu,\"pad\":\"%-79s\"}", i,
                 "y");
        ck_assert(kr_audit_write(au, line, 100));
    }
    kr_audit_close(au);
    ck_assert_int_eq(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
    close(saved);
    close(p[0]);
    free(sr.buf);
}
END_TEST

START_TEST(test_sink_drops)
{
    char path[128], err[256], line[200], buf[4096];
    struct kr_audit *au;
    unsigned accepted = 0, refused = 0, got = 0, i;
    char big[KR_AUDIT_QUEUE_MIN + 10];
    int rfd, flags;
    ssize_t n;

    /* A FIFO nobody reads from yet: the writer blocks once the pipe is
     * full, so the queue fills and further lines are dropped. */
    snprintf(path, sizeof(path), "%s/fifo", tmpdir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    rfd = open(path, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rfd, 0);
    au = kr_audit_open(path, KR_AUDIT_QUEUE_MIN, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    memset(line, 'x', sizeof(line));
    for (i = 0; i < 5000 && refused < 20; i++) {
        if (kr_audit_write(au, line, 99)) {
            accepted++;
        } else {
            refused++;
        }
    }
    ck_assert_uint_eq(refused, 20);
    ck_assert_uint_eq(kr_audit_dropped(au), 20);
    /* A line larger than the queue can never fit. */
    memset(big, 'y', sizeof(big));
    ck_assert(!kr_audit_write(au, big, sizeof(big)));
    ck_assert_uint_eq(kr_audit_dropped(au), 21);
    /* Drain: every accepted line arrives, whole, then close. */
    flags = fcntl(rfd, F_GETFL);
    ck_assert_int_eq(fcntl(rfd, F_SETFL, flags & ~O_NONBLOCK), 0);
    while (got < accepted * 100) {
        n = read(rfd, buf, sizeof(buf));
        ck_assert_int_gt(n, 0);
        for (i = 0; i < (unsigned)n; i++) {
            ck_assert(buf[i] == ((got + i) % 100 == 99 ? '\n' : 'x'));
        }
        got += (unsigned)n;
    }
    kr_audit_close(au);
    ck_assert_int_eq(read(rfd, buf, sizeof(buf)), 0);   /* EOF: all read */
    close(rfd);
    ck_assert_uint_eq(got, accepted * 100);
}
END_TEST

#define NTHREADS 4
#define PER_THREAD 2000

struct writer_arg {
    struct kr_audit *au;
    unsigned id;
    unsigned ok;
};

static void *
writer_main(void *p)
{
    struct writer_arg *w = p;
    char line[64];
    unsigned i;

    for (i = 0; i < PER_THREAD; i++) {
        int n = snprintf(line, sizeof(line), "{\"t\":%u,\"i\":%u,\"pad\":"
                         "\"abcdefghij\"}", w->id, i);

        w->ok += kr_audit_write(w->au, line, (size_t)n);
    }
    return NULL;
}

START_TEST(test_sink_threads)
{
    struct writer_arg args[NTHREADS];
    pthread_t th[NTHREADS];
    unsigned next[NTHREADS] = {0}, i, lines = 0;
    char path[128], err[256], *all, *p, *nl;
    struct kr_audit *au;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    /* room for everything: no drop possible */
    au = kr_audit_open(path, 4u << 20, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    for (i = 0; i < NTHREADS; i++) {
        args[i].au = au;
        args[i].id = i;
        args[i].ok = 0;
        ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main,
                                        &args[i]), 0);
    }
    for (i = 0; i < NTHREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_uint_eq(args[i].ok, PER_THREAD);
    }
    kr_audit_flush(au);
    ck_assert_uint_eq(kr_audit_written(au), NTHREADS * PER_THREAD);
    ck_assert_uint_eq(kr_audit_dropped(au), 0);
    kr_audit_close(au);
    /* every line whole, each thread's lines in its own order */
    all = kr_test_slurp(path, NULL);
    for (p = all; *p != '\0'; p = nl + 1) {
        unsigned t, k;
        json_t *j;

        nl = strchr(p, '\n');
        ck_assert_ptr_nonnull(nl);
        *nl = '\0';
        j = json_loads(p, 0, NULL);
        ck_assert_msg(j != NULL, "bad line %s", p);
        t = (unsigned)json_integer_value(json_object_get(j, "t"));
        k = (unsigned)json_integer_value(json_object_get(j, "i"));
        ck_assert_uint_lt(t, NTHREADS);
        ck_assert_uint_eq(k, next[t]);
        next[t]++;
        json_decref(j);
        lines++;
    }
    ck_assert_uint_eq(lines, NTHREADS * PER_THREAD);
    free(all);
}
END_TEST

/*
 * The writer batches lines (kr_audit.c: it lingers about 10 ms after the
 * first line of a batch) but never keeps them: a line arrives without
 * kr_audit_flush, and so does one written while a batch is being
 * written.
 */
START_TEST(test_sink_unflushed)
{
    char path[128], err[256], *all;
    struct kr_audit *au;
    unsigned i;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    au = kr_audit_open(path, 0, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    ck_assert(kr_audit_write(au, "one", 3));
    for (i = 0; i < 500 && kr_audit_written(au) < 1; i++) {
        usleep(10 * 1000);
    }
    ck_assert_uint_eq(kr_audit_written(au), 1);
    ck_assert(kr_audit_write(au, "two", 3));
    ck_assert(kr_audit_write(au, "three", 5));
    for (i = 0; i < 500 && kr_audit_written(au) < 3; i++) {
        usleep(10 * 1000);
    }
    ck_assert_uint_eq(kr_audit_written(au), 3);
    all = kr_test_slurp(path, NULL);                  /* written, not only counted */
    ck_assert_str_eq(all, "one\ntwo\nthree\n");
    free(all);
    kr_audit_close(au);
}
END_TEST

/* kr_audit_time as it was written before its per-second cache. */
static void
time_ref(int64_t t_us, char *out, size_t len)
{
    int64_t sec = t_us / 1000000, us = t_us % 1000000;
    time_t t;
    struct tm tm;
    char date[24];

    if (us < 0) {
        us += 1000000;
        sec--;
    }
    t = (time_t)sec;
    if (gmtime_r(&t, &tm) == NULL ||
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(out, len, "1970-01-01T00:00:00.000000Z");
        return;
    }
    snprintf(out, len, "%s.%06dZ", date, (int)us);
}

START_TEST(test_time)
{
    static const int64_t fixed[] = {
        0, 1, 999999, 1000000, -1, -999999, -1000000, -1000001,
        (int64_t)1764590400 * 1000000 + 123456,   /* 2025-12-01 */
        (int64_t)951782400 * 1000000,             /* 2000-02-29 */
        (int64_t)253402300799 * 1000000 + 999999, /* 9999-12-31 */
        (int64_t)253402300800 * 1000000,          /* year 10000 */
        INT64_MAX, INT64_MIN,
    };
    char got[40], want[40], small[12], small_want[12];
    uint64_t x = 14;
    unsigned i;

    ck_assert(sizeof(got) >= 32);
    for (i = 0; i < KR_ARRAY_LEN(fixed); i++) {
        kr_audit_time(fixed[i], got, sizeof(got));
        time_ref(fixed[i], want, sizeof(want));
        ck_assert_msg(strcmp(got, want) == 0, "%" PRId64 ": %s, want %s",
                      fixed[i], got, want);
    }
    kr_audit_time((int64_t)1764590400 * 1000000 + 7, got, sizeof(got));
    ck_assert_str_eq(got, "2025-12-01T12:00:00.000007Z");
    /* the same second again and again (the cache), the next, back */
    for (i = 0; i < 100000; i++) {
        int64_t t;

        x = x * 6364136223846793005ull + 1442695040888963407ull;
        t = (int64_t)1764590400 * 1000000 + (int64_t)(x >> 40) % 3000000 -
            1000000;
        if (i % 1000 == 0) {
            t = (int64_t)(x >> 1) % ((int64_t)1 << 55);  /* any time */
        }
        kr_audit_time(t, got, sizeof(got));
        time_ref(t, want, sizeof(want));
        KR_TEST_CHECK(strcmp(got, want) == 0, "%" PRId64 ": %s, want %s",
                      t, got, want);
    }
    /* a short buffer is cut as snprintf cuts */
    kr_audit_time(1234567, small, sizeof(small));
    time_ref(1234567, small_want, sizeof(small_want));
    ck_assert_str_eq(small, small_want);
}
END_TEST

static Suite *
audit_suite(void)
{
    Suite *s = suite_create("kr_audit");
    TCase *tc = tcase_create("format");
    TCase *tr = tcase_create("redact");
    TCase *ts = tcase_create("sink");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_format_pair);
    tcase_add_test(tc, test_format_ids_unknown_api_conn);
    tcase_add_test(tc, test_produce_records);
    tcase_add_test(tc, test_produce_streamed);
    tcase_add_test(tc, test_group_ids);
    tcase_add_test(tc, test_txn_ids);
    tcase_add_test(tc, test_fetch_bytes);
    tcase_add_test(tc, test_produce_rsp_scanned);
    tcase_add_test(tc, test_peer_memo);
    tcase_add_test(tc, test_many_topics);
    tcase_add_test(tc, test_long_strings);
    tcase_add_test(tc, test_line_about);
    tcase_add_test(tc, test_errors_truncated);
    tcase_add_test(tc, test_doc_keys);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(tr, setup, teardown);
    tcase_add_test(tr, test_redact_sasl);
    tcase_add_test(tr, test_redact_tokens);
    tcase_add_test(tr, test_redact_scram);
    tcase_add_test(tr, test_redact_describe_configs);
    tcase_add_test(tr, test_redact_alter_configs);
    tcase_add_test(tr, test_redact_envelope_unknown_tags);
    tcase_add_test(tr, test_redact_hook);
    tcase_add_test(tr, test_redact_all_apis);
    suite_add_tcase(s, tr);
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_set_timeout(ts, 60);
    tcase_add_test(ts, test_sink_close_flushes);
    tcase_add_test(ts, test_sink_reopen);
    tcase_add_test(ts, test_sink_stdout);
    tcase_add_test(ts, test_sink_stdout_nonblock);
    tcase_add_test(ts, test_sink_failing_reported_once);
    tcase_add_test(ts, test_sink_drops);
    tcase_add_test(ts, test_sink_threads);
    tcase_add_test(ts, test_sink_unflushed);
    tcase_add_test(ts, test_time);
    suite_add_tcase(s, ts);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(audit_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
