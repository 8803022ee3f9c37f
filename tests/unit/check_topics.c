/*
 * check_topics.c - unit tests for kr_topics (topics named by messages,
 * TopicId map).
 *
 * Messages are written in krelay-codec's JSON form, built into a tree
 * (kr_json_to_msg), encoded to Kafka bytes (kr_encode_msg) and decoded
 * again (kr_decode_request/response, strict), so the walk runs on trees
 * exactly as the proxy decodes them.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kr_json.h"
#include "kr_topics.h"
#include "kr_test.h"
#include "tree_fill.h"

/* ---- helpers ------------------------------------------------------------- */

static struct kr_arena arena;
static uint8_t *frames[16];
static unsigned nframes;

static void
setup(void)
{
    kr_arena_init(&arena, 0);
    nframes = 0;
}

static void
teardown(void)
{
    while (nframes > 0) {
        free(frames[--nframes]);
    }
    kr_arena_free(&arena);
}

/* JSON text -> decoded tree in m (kr_test.h); the frame is kept until
   teardown. */
static void
build(const char *text, struct kr_msg *m)
{
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    frames[nframes++] = kr_test_build(&arena, text, m);
}

/* Collected callback results: "name:partitions" joined by spaces. */
struct seen {
    char text[1024];
    unsigned calls;
    unsigned stop_after;       /* 0: never stop */
};

static bool
collect(void *arg, const char *topic, size_t len, unsigned partitions)
{
    struct seen *s = arg;
    size_t used = strlen(s->text);

    snprintf(s->text + used, sizeof(s->text) - used, "%s%.*s:%u",
             used > 0 ? " " : "", (int)len, topic, partitions);
    s->calls++;
    return s->stop_after == 0 || s->calls < s->stop_after;
}

static const char *
topics_of(const struct kr_msg *m, const struct kr_topic_map *map,
          struct seen *s)
{
    memset(s, 0, sizeof(*s));
    kr_topics_each(m, map, collect, s);
    return s->text;
}

/* Uuid "AAECAwQFBgcICQoLDA0ODw" = bytes 00..0f; "EBESExQVFhcYGRobHB0eHw"
 * = 10..1f (Kafka's base64url form). */
static const uint8_t id_a[16] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
};
static const uint8_t id_b[16] = {
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
};

/* ---- tests --------------------------------------------------------------- */

START_TEST(test_produce_v9)
{
    struct kr_msg m;
    struct seen s;

    build("{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 9,"
          " \"CorrelationId\": 5, \"ClientId\": \"p\"},"
          " \"body\": {\"Acks\": -1, \"TimeoutMs\": 30000, \"TopicData\": ["
          "  {\"Name\": \"orders\", \"PartitionData\": ["
          "    {\"Index\": 0, \"Records\": \"AAECAw==\"},"
          "    {\"Index\": 1, \"Records\": null},"
          "    {\"Index\": 7, \"Records\": \"AA==\"}]},"
          "  {\"Name\": \"payments\", \"PartitionData\": ["
          "    {\"Index\": 2, \"Records\": \"AAAA\"}]}]}}", &m);
    ck_assert_str_eq(topics_of(&m, NULL, &s), "orders:3 payments:1");
    ck_assert_uint_eq(s.calls, 2);
}
END_TEST

START_TEST(test_stop)
{
    struct kr_msg m;
    struct seen s;

    build("{\"header\": {\"RequestApiKey\": 0, \"RequestApiVersion\": 9},"
          " \"body\": {\"TopicData\": ["
          "  {\"Name\": \"a\", \"PartitionData\": []},"
          "  {\"Name\": \"b\", \"PartitionData\": []},"
          "  {\"Name\": \"c\", \"PartitionData\": []}]}}", &m);
    memset(&s, 0, sizeof(s));
    s.stop_after = 2;
    kr_topics_each(&m, NULL, collect, &s);
    ck_assert_uint_eq(s.calls, 2);
    ck_assert_str_eq(s.text, "a:0 b:0");
}
END_TEST

START_TEST(test_fetch_v13_ids)
{
    struct kr_topic_map *map = kr_topic_map_new();
    struct kr_msg md, m;
    struct seen s;

    ck_assert_ptr_nonnull(map);
    /* Metadata v12 response: learn a and b (and skip the zero id). */
    build("{\"apiKey\": 3, \"apiVersion\": 12, \"header\": "
          "{\"CorrelationId\": 1}, \"body\": {\"Brokers\": [], \"Topics\": ["
          "  {\"ErrorCode\": 0, \"Name\": \"orders\","
          "   \"TopicId\": \"AAECAwQFBgcICQoLDA0ODw\", \"Partitions\": []},"
          "  {\"ErrorCode\": 0, \"Name\": \"payments\","
          "   \"TopicId\": \"EBESExQVFhcYGRobHB0eHw\", \"Partitions\": []},"
          "  {\"ErrorCode\": 0, \"Name\": \"zero\","
          "   \"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAA\", \"Partitions\": []}"
          "]}}", &md);
    kr_topic_map_learn(map, &md);
    ck_assert_uint_eq(kr_topic_map_size(map), 2);
    ck_assert_str_eq(kr_topic_map_name(map, id_a), "orders");
    ck_assert_str_eq(kr_topic_map_name(map, id_b), "payments");

    /* Fetch v13: Topics by id (2 and 1 partitions), ForgottenTopicsData
     * by id with 3 partition indexes; an id the map does not know is
     * reported as its uuid string. */
    build("{\"header\": {\"RequestApiKey\": 1, \"RequestApiVersion\": 13,"
          " \"CorrelationId\": 9, \"ClientId\": \"c\"},"
          " \"body\": {\"MaxWaitMs\": 500, \"MinBytes\": 1, \"Topics\": ["
          "  {\"TopicId\": \"AAECAwQFBgcICQoLDA0ODw\", \"Partitions\": ["
          "    {\"Partition\": 0, \"FetchOffset\": 10},"
          "    {\"Partition\": 1, \"FetchOffset\": 20}]},"
          "  {\"TopicId\": \"ICEiIyQlJicoKSorLC0uLw\", \"Partitions\": ["
          "    {\"Partition\": 4, \"FetchOffset\": 0}]}],"
          " \"ForgottenTopicsData\": ["
          "  {\"TopicId\": \"EBESExQVFhcYGRobHB0eHw\","
          "   \"Partitions\": [0, 1, 2]}], \"RackId\": \"\"}}", &m);
    ck_assert_str_eq(topics_of(&m, map, &s),
                     "orders:2 ICEiIyQlJicoKSorLC0uLw:1 payments:3");
    /* Without a map every id stays a uuid string. */
    ck_assert_str_eq(topics_of(&m, NULL, &s),
                     "AAECAwQFBgcICQoLDA0ODw:2 ICEiIyQlJicoKSorLC0uLw:1 "
                     "EBESExQVFhcYGRobHB0eHw:3");
    kr_topic_map_free(map);
}
END_TEST

START_TEST(test_map_rename_old_version)
{
    struct kr_topic_map *map = kr_topic_map_new();
    struct kr_msg md;
    char name[32];
    uint8_t id[16];
    unsigned i;

    ck_assert_ptr_nonnull(map);
    /* Metadata v9 has no TopicId: nothing learned. */
    build("{\"apiKey\": 3, \"apiVersion\": 9, \"header\": "
          "{\"CorrelationId\": 1}, \"body\": {\"Brokers\": [], \"Topics\": ["
          "  {\"ErrorCode\": 0, \"Name\": \"orders\", \"Partitions\": []}"
          "]}}", &md);
    kr_topic_map_learn(map, &md);
    ck_assert_uint_eq(kr_topic_map_size(map), 0);
    ck_assert_ptr_null(kr_topic_map_name(map, id_a));
    /* Put, replace, and grow past the initial table. */
    ck_assert(kr_topic_map_put(map, id_a, "old", 3));
    ck_assert(kr_topic_map_put(map, id_a, "new-name", 8));
    ck_assert_str_eq(kr_topic_map_name(map, id_a), "new-name");
    for (i = 0; i < 500; i++) {
        memset(id, 0, sizeof(id));
        id[0] = 0xee;
        id[5] = (uint8_t)i;
        id[9] = (uint8_t)(i >> 8);
        snprintf(name, sizeof(name), "t%u", i);
        ck_assert(kr_topic_map_put(map, id, name, strlen(name)));
    }
    ck_assert_uint_eq(kr_topic_map_size(map), 501);
    id[5] = 77;
    id[9] = 0;
    ck_assert_str_eq(kr_topic_map_name(map, id), "t77");
    id[5] = (uint8_t)499;
    id[9] = (uint8_t)(499 >> 8);
    ck_assert_str_eq(kr_topic_map_name(map, id), "t499");
    ck_assert_str_eq(kr_topic_map_name(map, id_a), "new-name");
    ck_assert_ptr_null(kr_topic_map_name(NULL, id_a));
    kr_topic_map_free(map);
}
END_TEST

START_TEST(test_delete_topics)
{
    struct kr_topic_map *map = kr_topic_map_new();
    struct kr_msg m;
    struct seen s;

    ck_assert(kr_topic_map_put(map, id_b, "payments", 8));
    /* v6: one by name (its zero id ignored), one by id (Name null). */
    build("{\"header\": {\"RequestApiKey\": 20, \"RequestApiVersion\": 6},"
          " \"body\": {\"TimeoutMs\": 1000, \"Topics\": ["
          "  {\"Name\": \"orders\", \"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAA\"},"
          "  {\"Name\": null, \"TopicId\": \"EBESExQVFhcYGRobHB0eHw\"}]}}",
          &m);
    ck_assert_str_eq(topics_of(&m, map, &s), "orders:0 payments:0");
    /* v5: TopicNames, an array of topicName strings. */
    build("{\"header\": {\"RequestApiKey\": 20, \"RequestApiVersion\": 5},"
          " \"body\": {\"TimeoutMs\": 1000,"
          "  \"TopicNames\": [\"x\", \"y.z\"]}}", &m);
    ck_assert_str_eq(topics_of(&m, map, &s), "x:0 y.z:0");
    kr_topic_map_free(map);
}
END_TEST

START_TEST(test_create_acls)
{
    struct kr_msg m;
    struct seen s;

    /* ResourceType 2 (TOPIC) counts, 3 (GROUP) does not. */
    build("{\"header\": {\"RequestApiKey\": 30, \"RequestApiVersion\": 3},"
          " \"body\": {\"Creations\": ["
          "  {\"ResourceType\": 2, \"ResourceName\": \"orders\","
          "   \"ResourcePatternType\": 3, \"Principal\": \"User:a\","
          "   \"Host\": \"*\", \"Operation\": 2, \"PermissionType\": 3},"
          "  {\"ResourceType\": 3, \"ResourceName\": \"group-1\","
          "   \"ResourcePatternType\": 3, \"Principal\": \"User:a\","
          "   \"Host\": \"*\", \"Operation\": 2, \"PermissionType\": 3},"
          "  {\"ResourceType\": 2, \"ResourceName\": \"audit\","
          "   \"ResourcePatternType\": 4, \"Principal\": \"User:b\","
          "   \"Host\": \"*\", \"Operation\": 3, \"PermissionType\": 3}"
          "]}}", &m);
    ck_assert_str_eq(topics_of(&m, NULL, &s), "orders:0 audit:0");
}
END_TEST

START_TEST(test_metadata)
{
    struct kr_topic_map *map = kr_topic_map_new();
    struct kr_msg m;
    struct seen s;

    ck_assert(kr_topic_map_put(map, id_a, "orders", 6));
    /* Request v12: by name, and by id only (Name null). */
    build("{\"header\": {\"RequestApiKey\": 3, \"RequestApiVersion\": 12},"
          " \"body\": {\"Topics\": ["
          "  {\"TopicId\": \"AAAAAAAAAAAAAAAAAAAAAA\", \"Name\": \"logs\"},"
          "  {\"TopicId\": \"AAECAwQFBgcICQoLDA0ODw\", \"Name\": null}],"
          " \"AllowAutoTopicCreation\": false}}", &m);
    ck_assert_str_eq(topics_of(&m, map, &s), "logs:0 orders:0");
    /* Response v12: Name and TopicId both set: reported once, by name,
     * with its partition count. */
    build("{\"apiKey\": 3, \"apiVersion\": 12, \"header\": "
          "{\"CorrelationId\": 1}, \"body\": {\"Brokers\": [], \"Topics\": ["
          "  {\"ErrorCode\": 0, \"Name\": \"orders\","
          "   \"TopicId\": \"AAECAwQFBgcICQoLDA0ODw\", \"Partitions\": ["
          "   {\"ErrorCode\": 0, \"PartitionIndex\": 0, \"LeaderId\": 1,"
          "    \"ReplicaNodes\": [1], \"IsrNodes\": [1]},"
          "   {\"ErrorCode\": 0, \"PartitionIndex\": 1, \"LeaderId\": 1,"
          "    \"ReplicaNodes\": [1], \"IsrNodes\": [1]}]}]}}", &m);
    ck_assert_str_eq(topics_of(&m, map, &s), "orders:2");
    /* Request v0 with no topics ("all topics"): nothing. */
    build("{\"header\": {\"RequestApiKey\": 3, \"RequestApiVersion\": 1},"
          " \"body\": {\"Topics\": null}}", &m);
    ck_assert_str_eq(topics_of(&m, map, &s), "");
    ck_assert_uint_eq(s.calls, 0);
    kr_topic_map_free(map);
}
END_TEST

START_TEST(test_configs_and_possible)
{
    const struct kr_api_desc *api;
    struct kr_msg m;
    struct seen s;

    /* IncrementalAlterConfigs: topic resource (2) counts, broker (4) not. */
    build("{\"header\": {\"RequestApiKey\": 44, \"RequestApiVersion\": 1},"
          " \"body\": {\"Resources\": ["
          "  {\"ResourceType\": 4, \"ResourceName\": \"1\", \"Configs\": []},"
          "  {\"ResourceType\": 2, \"ResourceName\": \"orders\","
          "   \"Configs\": [{\"Name\": \"retention.ms\","
          "                  \"ConfigOperation\": 0, \"Value\": \"1\"}]}],"
          " \"ValidateOnly\": false}}", &m);
    ck_assert_str_eq(topics_of(&m, NULL, &s), "orders:0");
    /* The precomputed table: ApiVersions can name no topic, Produce can. */
    api = kr_api_get(18);
    ck_assert(!kr_topics_possible(kr_api_root(api, false, 3)));
    ck_assert(!kr_topics_possible(kr_api_root(api, true, 3)));
    api = kr_api_get(0);
    ck_assert(kr_topics_possible(kr_api_root(api, false, 9)));
    ck_assert(kr_topics_possible(kr_api_root(api, true, 9)));
    ck_assert(!kr_topics_possible(KR_NO_STRUCT));
}
END_TEST

/* ---- every API and version -------------------------------------------- */

/* Count what kr_topics_each must report, with no precomputed table. */
static unsigned
naive_count(const struct kr_node *n)
{
    static const uint8_t zero[16];
    unsigned i, count = 0, nf = kr_structs[n->struct_id].nfields;
    const struct kr_val *rname = NULL, *rtype = NULL;
    bool named = false;

    for (i = 0; i < nf; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];

        if (!kr_vrange_has(f->versions, n->version) || v->is_null) {
            continue;
        }
        if (f->entity == KR_E_TOPIC_NAME && f->type == KR_T_STRING) {
            count++;
            named = true;
        } else if (f->entity == KR_E_TOPIC_NAME && f->type == KR_T_ARRAY &&
                   f->elem_type == KR_T_STRING) {
            count += v->u.arr->n;
            named = named || v->u.arr->n > 0;
        } else if (strcmp(f->name, "ResourceName") == 0 ||
                   strcmp(f->name, "ResourceNameFilter") == 0) {
            rname = v;
        } else if (strcmp(f->name, "ResourceType") == 0 ||
                   strcmp(f->name, "ResourceTypeFilter") == 0) {
            rtype = f->type == KR_T_INT8 ? v : NULL;
        }
    }
    for (i = 0; i < nf && !named; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];

        if (kr_vrange_has(f->versions, n->version) &&
            f->type == KR_T_UUID && strcmp(f->name, "TopicId") == 0 &&
            memcmp(v->u.s.p, zero, 16) != 0) {
            count++;
        }
    }
    if (rname != NULL && rtype != NULL && rtype->u.i == 2) {
        count++;
    }
    for (i = 0; i < nf; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];

        if (!kr_vrange_has(f->versions, n->version) || v->is_null) {
            continue;
        }
        if (f->type == KR_T_STRUCT) {
            count += naive_count(v->u.node);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT) {
            uint32_t k;

            for (k = 0; k < v->u.arr->n; k++) {
                count += naive_count(v->u.arr->items[k].u.node);
            }
        }
    }
    return count;
}

struct check_names {
    unsigned calls, bad;
};

static bool
check_name(void *arg, const char *topic, size_t len, unsigned partitions)
{
    struct check_names *c = arg;

    c->calls++;
    if (!((len == 8 && memcmp(topic, "topic-xy", 8) == 0) ||
          (len == 6 && memcmp(topic, "mapped", 6) == 0)) ||
        partitions > 2) {
        c->bad++;
    }
    return true;
}

/* Every body of every API and version, fully populated: the walk with its
 * precomputed skip table finds exactly what a naive walk finds, TopicIds
 * resolve through the map, and nothing reads out of bounds (ASan). */
START_TEST(test_all_apis)
{
    struct kr_topic_map *map = kr_topic_map_new();
    unsigned total = 0, bodies = 0;
    int16_t k, v;
    int dir;

    ck_assert(kr_topic_map_put(map, tree_fill_id, "mapped", 6));
    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *api = kr_api_get(k);

        if (api == NULL) {
            continue;
        }
        for (v = api->valid.lo; v <= api->valid.hi; v++) {
            for (dir = 0; dir < 2; dir++) {
                uint16_t root = kr_api_root(api, dir == 1, v);
                struct check_names c = { 0, 0 };
                struct kr_node *n;
                unsigned want;

                if (root == KR_NO_STRUCT) {
                    continue;
                }
                n = kr_node_new(&arena, root, v);
                ck_assert_ptr_nonnull(n);
                ck_assert(tree_fill(&arena, n, "topic-xy", 0));
                want = naive_count(n);
                kr_topics_each_node(n, map, check_name, &c);
                ck_assert_msg(c.calls == want, "%s v%d %s: %u topics, "
                              "naive %u", api->name, v,
                              dir ? "response" : "request", c.calls, want);
                ck_assert_msg(c.bad == 0, "%s v%d: unexpected name",
                              api->name, v);
                if (!kr_topics_possible(root)) {
                    ck_assert_uint_eq(c.calls, 0);
                }
                total += c.calls;
                bodies++;
                kr_arena_reset(&arena);
            }
        }
    }
    /* sanity: the loop really covered the tables */
    ck_assert_uint_gt(bodies, 500);
    ck_assert_uint_gt(total, 1000);
    kr_topic_map_free(map);
}
END_TEST

static Suite *
topics_suite(void)
{
    Suite *s = suite_create("kr_topics");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_produce_v9);
    tcase_add_test(tc, test_stop);
    tcase_add_test(tc, test_fetch_v13_ids);
    tcase_add_test(tc, test_map_rename_old_version);
    tcase_add_test(tc, test_delete_topics);
    tcase_add_test(tc, test_create_acls);
    tcase_add_test(tc, test_metadata);
    tcase_add_test(tc, test_configs_and_possible);
    tcase_add_test(tc, test_all_apis);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(topics_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
