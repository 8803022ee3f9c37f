/*
 * check_schema.c - the generated schema tables against facts taken from
 * Apache Kafka's message schemas (4.3.1 and 3.9.1), and the lookups of
 * kr_schema.c.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_schema.h"

/* The field named name of struct sid; fails the test when missing. */
static const struct kr_field_desc *
field(uint16_t sid, const char *name)
{
    int i = kr_struct_field_index(sid, name);

    ck_assert_msg(i >= 0, "no field %s in struct %u", name, sid);
    return &kr_fields[kr_structs[sid].first_field + (uint32_t)i];
}

static const struct kr_api_desc *
api(int16_t k)
{
    const struct kr_api_desc *a = kr_api_get(k);

    ck_assert_ptr_nonnull(a);
    return a;
}

static bool
vrange_empty(struct kr_vrange r)
{
    return r.lo > r.hi;
}

/* True when the struct sid or any struct below it is an endpoint. */
static bool
reaches_endpoint(uint16_t sid, unsigned depth)
{
    const struct kr_struct_desc *s = &kr_structs[sid];
    uint16_t i;

    ck_assert_uint_lt(depth, 32);
    if (s->flags & KR_SF_ENDPOINT) {
        return true;
    }
    for (i = 0; i < s->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[s->first_field + i];

        if (f->struct_id != KR_NO_STRUCT &&
            reaches_endpoint(f->struct_id, depth + 1)) {
            return true;
        }
    }
    return false;
}

START_TEST(test_produce_fetch_ranges)
{
    const struct kr_api_desc *a = api(KR_API_PRODUCE);

    ck_assert_str_eq(a->name, "Produce");
    ck_assert_int_eq(a->key, 0);
    ck_assert_int_eq(a->valid.lo, 0);
    ck_assert_int_eq(a->valid.hi, 13);
    ck_assert_int_eq(a->valid_4x.lo, 3);
    ck_assert_int_eq(a->valid_4x.hi, 13);
    ck_assert_int_eq(a->flexible.lo, 9);
    ck_assert_int_eq(a->flexible.hi, KR_V_MAX);
    ck_assert(!kr_api_flexible(a, 8));
    ck_assert(kr_api_flexible(a, 9));
    ck_assert(a->flags & KR_AF_BROKER);
    ck_assert(a->flags & KR_AF_ZK_BROKER);
    ck_assert(!(a->flags & KR_AF_CONTROLLER));

    a = api(KR_API_FETCH);
    ck_assert_str_eq(a->name, "Fetch");
    ck_assert_int_eq(a->valid.lo, 0);
    ck_assert_int_eq(a->valid.hi, 18);
    ck_assert_int_eq(a->valid_4x.lo, 4);
    ck_assert_int_eq(a->valid_4x.hi, 18);
    ck_assert_int_eq(a->flexible.lo, 12);
}
END_TEST

START_TEST(test_removed_and_renamed_apis)
{
    const struct kr_api_desc *a;

    /* APIs 4-7: 4.3.1 has stubs only, so everything comes from 3.9.1. */
    a = api(KR_API_CONTROLLED_SHUTDOWN);
    ck_assert_str_eq(a->name, "ControlledShutdown");
    ck_assert_int_eq(a->valid.lo, 0);
    ck_assert_int_eq(a->valid.hi, 3);
    ck_assert(vrange_empty(a->valid_4x));
    ck_assert_int_eq(a->flexible.lo, 3);
    ck_assert(a->flags & KR_AF_ZK_BROKER);
    ck_assert_uint_ne(kr_api_root(a, false, 0), KR_NO_STRUCT);

    a = api(KR_API_LEADER_AND_ISR);
    ck_assert_int_eq(a->valid.hi, 7);
    ck_assert(vrange_empty(a->valid_4x));

    /* Key 74 takes its 4.3.1 name. */
    a = api(74);
    ck_assert_str_eq(a->name, "ListConfigResources");
    ck_assert_int_eq(KR_API_LIST_CONFIG_RESOURCES, 74);
    ck_assert_ptr_eq(kr_api_by_name("ListConfigResources"), a);
    ck_assert_ptr_null(kr_api_by_name("ListClientMetricsResources"));
    ck_assert_int_eq(a->valid.hi, 1);
    field(kr_api_root(a, true, 0), "ConfigResources");

    /* Share groups: v0 (3.9.1 early access) + v1 (4.3.1). */
    a = api(KR_API_SHARE_FETCH);
    ck_assert_int_eq(a->valid.lo, 0);
    ck_assert_int_eq(a->valid.hi, 2);
    ck_assert_int_eq(a->valid_4x.lo, 1);
    ck_assert_int_eq(a->valid_4x.hi, 2);

    /* Added after 3.9: 4.3.1 only. */
    a = api(KR_API_DELETE_SHARE_GROUP_OFFSETS);
    ck_assert_int_eq(a->key, 92);
    ck_assert_int_eq(kr_api_max, 92);

    /* 4.3.1 marks InitProducerId's latest version (6) unstable. */
    a = api(KR_API_INIT_PRODUCER_ID);
    ck_assert(a->flags & KR_AF_UNSTABLE);
    ck_assert_int_eq(a->valid.hi, 6);
    ck_assert(!(api(KR_API_PRODUCE)->flags & KR_AF_UNSTABLE));
}
END_TEST

/*
 * issue 14: the lowest version every Kafka 4 release accepts (schemas
 * README: KIP-896 removals; JoinGroup v0-1 gone in 4.0.0 only).
 */
START_TEST(test_min_kafka4)
{
    static const struct {
        int16_t key, min;
        const char *release;
    } facts[] = {
        { KR_API_PRODUCE, 3, "4.3.1" },
        { KR_API_FETCH, 4, "4.3.1" },
        { KR_API_LIST_OFFSETS, 1, "4.3.1" },
        { KR_API_METADATA, 0, "4.3.1" },
        { KR_API_OFFSET_COMMIT, 2, "4.3.1" },
        { KR_API_JOIN_GROUP, 2, "4.0.0" },
        { KR_API_CREATE_TOPICS, 2, "4.3.1" },
        { KR_API_SHARE_FETCH, 1, "4.3.1" },
        { KR_API_LEADER_AND_ISR, -1, "4.3.1" },
        { KR_API_CONTROLLED_SHUTDOWN, -1, "4.3.1" },
    };
    const char *rel;
    size_t i;
    int16_t k;

    for (i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
        rel = NULL;
        ck_assert_int_eq(kr_api_min_kafka4(api(facts[i].key), &rel),
                         facts[i].min);
        ck_assert_str_eq(rel, facts[i].release);
    }
    /* every other API: the 4.3.1 table's lowest version */
    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *a = kr_api_get(k);

        if (a == NULL || k == KR_API_JOIN_GROUP) {
            continue;
        }
        ck_assert_int_eq(kr_api_min_kafka4(a, NULL),
                         vrange_empty(a->valid_4x) ? -1 : a->valid_4x.lo);
    }
    ck_assert_int_eq(kr_api_min_kafka4(NULL, &rel), -1);
}
END_TEST

START_TEST(test_lookups)
{
    ck_assert_ptr_null(kr_api_get(-1));
    ck_assert_ptr_null(kr_api_get(kr_api_max + 1));
    ck_assert_ptr_null(kr_api_get(INT16_MAX));
    ck_assert_ptr_eq(kr_api_by_name("Metadata"), kr_api_get(3));
    ck_assert_ptr_null(kr_api_by_name("metadata"));
    ck_assert_ptr_null(kr_api_by_name(NULL));
    ck_assert_uint_eq(kr_api_root(api(0), false, 14), KR_NO_STRUCT);
    ck_assert_uint_eq(kr_api_root(api(0), true, -1), KR_NO_STRUCT);
    ck_assert_uint_eq(kr_api_root(NULL, true, 0), KR_NO_STRUCT);
    ck_assert_int_eq(kr_struct_field_index(kr_response_header_struct,
                                           "CorrelationId"), 0);
    ck_assert_int_eq(kr_struct_field_index(kr_response_header_struct,
                                           "ClientId"), -1);
    ck_assert_int_eq(kr_struct_field_index(KR_NO_STRUCT, "Name"), -1);
    ck_assert_str_eq(kr_type_name(KR_T_INT32), "int32");
    ck_assert_str_eq(kr_type_name(KR_T_ARRAY), "[]");
    ck_assert_str_eq(kr_type_name(KR_T_RECORDS), "records");
    ck_assert_ptr_nonnull(kr_type_name((enum kr_type)99));
    ck_assert_ptr_nonnull(strstr(kr_schema_source, "4.3.1"));
    ck_assert_ptr_nonnull(strstr(kr_schema_source, "3.9.1"));
    ck_assert_ptr_nonnull(strstr(kr_schema_source, "26b251a"));
    ck_assert_ptr_nonnull(strstr(kr_schema_source, "1f18da3"));
    ck_assert_int_eq(KR_API_API_VERSIONS, 18);
    ck_assert_str_eq(api(KR_API_API_VERSIONS)->name, "ApiVersions");
}
END_TEST

START_TEST(test_header_versions)
{
    /* ApiVersions: response header v0 always (KIP-511). */
    ck_assert_int_eq(kr_response_header_version(18, 3), 0);
    ck_assert_int_eq(kr_response_header_version(18, 0), 0);
    ck_assert_int_eq(kr_request_header_version(18, 3), 2);
    ck_assert_int_eq(kr_request_header_version(18, 2), 1);
    /* ControlledShutdown v0 uses request header v0. */
    ck_assert_int_eq(kr_request_header_version(7, 0), 0);
    ck_assert_int_eq(kr_request_header_version(7, 1), 1);
    ck_assert_int_eq(kr_request_header_version(7, 3), 2);
    ck_assert_int_eq(kr_response_header_version(7, 0), 0);
    ck_assert_int_eq(kr_response_header_version(7, 3), 1);
    /* Metadata: flexible from v9. */
    ck_assert_int_eq(kr_request_header_version(3, 8), 1);
    ck_assert_int_eq(kr_request_header_version(3, 9), 2);
    ck_assert_int_eq(kr_response_header_version(3, 8), 0);
    ck_assert_int_eq(kr_response_header_version(3, 12), 1);
    /* Unknown. */
    ck_assert_int_eq(kr_request_header_version(3, 99), -1);
    ck_assert_int_eq(kr_request_header_version(-1, 0), -1);
    ck_assert_int_eq(kr_response_header_version(200, 0), -1);
}
END_TEST

START_TEST(test_headers)
{
    uint16_t rq = kr_request_header_struct;
    const struct kr_field_desc *f;

    ck_assert_uint_lt(rq, kr_nstructs);
    ck_assert_str_eq(kr_structs[rq].name, "RequestHeader");
    ck_assert_uint_eq(kr_structs[rq].nfields, 4);
    f = field(rq, "RequestApiKey");
    ck_assert_int_eq(f->type, KR_T_INT16);
    ck_assert_int_eq(f->versions.lo, 0);
    f = field(rq, "ClientId");
    ck_assert_int_eq(f->type, KR_T_STRING);
    ck_assert(f->flags & KR_FF_FLEX_OVERRIDE);
    ck_assert(vrange_empty(f->flexible));
    ck_assert_int_eq(f->versions.lo, 1);
    ck_assert_int_eq(f->nullable.lo, 1);
    ck_assert_int_eq(f->nullable.hi, KR_V_MAX);
    ck_assert(!(field(rq, "CorrelationId")->flags & KR_FF_FLEX_OVERRIDE));

    ck_assert_str_eq(kr_structs[kr_response_header_struct].name,
                     "ResponseHeader");
    ck_assert_uint_eq(kr_structs[kr_response_header_struct].nfields, 1);
}
END_TEST

START_TEST(test_produce_response)
{
    const struct kr_api_desc *a = api(0);
    uint16_t root = kr_api_root(a, true, 13);
    const struct kr_field_desc *f;
    const struct kr_struct_desc *ep;

    ck_assert_uint_ne(root, KR_NO_STRUCT);
    ck_assert_str_eq(kr_structs[root].name, "ProduceResponse");
    f = field(root, "ThrottleTimeMs");
    ck_assert_int_eq(f->type, KR_T_INT32);
    ck_assert(f->flags & KR_FF_THROTTLE);
    ck_assert(f->flags & KR_FF_IGNORABLE);
    ck_assert_int_eq(f->versions.lo, 1);
    /* ThrottleTimeMs follows Responses in ProduceResponse. */
    ck_assert_int_gt(kr_struct_field_index(root, "ThrottleTimeMs"),
                     kr_struct_field_index(root, "Responses"));

    f = field(root, "NodeEndpoints");
    ck_assert_int_eq(f->type, KR_T_ARRAY);
    ck_assert_int_eq(f->elem_type, KR_T_STRUCT);
    ck_assert_int_eq(f->tag, 0);
    ck_assert_int_eq(f->tagged.lo, 10);
    ck_assert_int_eq(f->tagged.hi, KR_V_MAX);
    ck_assert_int_eq(f->versions.lo, 10);
    ck_assert(kr_structs[root].flags & KR_SF_HAS_TAGS);
    ep = &kr_structs[f->struct_id];
    ck_assert(ep->flags & KR_SF_ENDPOINT);
    ck_assert_int_eq(ep->ep_node, kr_struct_field_index(f->struct_id,
                                                        "NodeId"));
    ck_assert_int_eq(ep->ep_host, kr_struct_field_index(f->struct_id,
                                                        "Host"));
    ck_assert_int_eq(ep->ep_port, kr_struct_field_index(f->struct_id,
                                                        "Port"));
    ck_assert(a->flags & KR_AF_ENDPOINTS);

    /* v13 uses topic ids: Name is 0-12, TopicId 13+. */
    f = field(field(root, "Responses")->struct_id, "Name");
    ck_assert_int_eq(f->versions.hi, 12);
    ck_assert_int_eq(f->entity, KR_E_TOPIC_NAME);
    ck_assert(f->flags & KR_FF_MAP_KEY);
    ck_assert_int_eq(field(field(root, "Responses")->struct_id,
                           "TopicId")->type, KR_T_UUID);

    /* The partition ErrorCode is flagged. */
    f = field(field(root, "Responses")->struct_id, "PartitionResponses");
    f = field(f->struct_id, "ErrorCode");
    ck_assert_int_eq(f->type, KR_T_INT16);
    ck_assert(f->flags & KR_FF_ERROR_CODE);
}
END_TEST

START_TEST(test_produce_legacy_tree)
{
    const struct kr_api_desc *a = api(0);
    uint16_t v0 = kr_api_root(a, false, 0);
    uint16_t v2 = kr_api_root(a, false, 2);
    uint16_t v3 = kr_api_root(a, false, 3);
    uint16_t v13 = kr_api_root(a, false, 13);

    /* v0-2 come from 3.9.1, v3+ from 4.3.1: different trees. */
    ck_assert_uint_ne(v0, KR_NO_STRUCT);
    ck_assert_uint_eq(v0, v2);
    ck_assert_uint_ne(v0, v3);
    ck_assert_uint_eq(v3, v13);
    ck_assert_str_eq(kr_structs[v0].name, "ProduceRequest");
    /* 3.9.1's topic Name is 0+; 4.3.1's is 0-12. */
    ck_assert_int_eq(field(field(v0, "TopicData")->struct_id,
                           "Name")->versions.hi, KR_V_MAX);
    ck_assert_int_eq(field(field(v3, "TopicData")->struct_id,
                           "Name")->versions.hi, 12);
    ck_assert(kr_structs[v0].flags & KR_SF_HAS_RECORDS);
    ck_assert(kr_structs[v0].flags & KR_SF_HAS_TOPIC);
    ck_assert(kr_structs[v3].flags & KR_SF_HAS_RECORDS);
    ck_assert(!(kr_structs[kr_api_root(a, true, 3)].flags &
                KR_SF_HAS_RECORDS));

    /* Vote v0-1: both sets define them; 4.3.1's names win. */
    a = api(KR_API_VOTE);
    v0 = kr_api_root(a, false, 0);
    ck_assert_uint_eq(v0, kr_api_root(a, false, 2));
    v2 = field(field(v0, "Topics")->struct_id, "Partitions")->struct_id;
    ck_assert_int_ge(kr_struct_field_index(v2, "ReplicaEpoch"), 0);
    ck_assert_int_eq(kr_struct_field_index(v2, "CandidateEpoch"), -1);

    /* ReadShareGroupStateSummary response v0 differs on the wire
     * between the sets; 4.3.1's (with LeaderEpoch) is used. */
    a = api(KR_API_READ_SHARE_GROUP_STATE_SUMMARY);
    v0 = kr_api_root(a, true, 0);
    v2 = field(field(v0, "Results")->struct_id, "Partitions")->struct_id;
    ck_assert_int_eq(field(v2, "LeaderEpoch")->versions.lo, 0);
}
END_TEST

START_TEST(test_metadata_brokers)
{
    const struct kr_api_desc *a = api(3);
    uint16_t root = kr_api_root(a, true, 12);
    const struct kr_field_desc *f = field(root, "Brokers");
    const struct kr_struct_desc *b;
    uint16_t bid;

    ck_assert_int_eq(f->type, KR_T_ARRAY);
    ck_assert_int_eq(f->elem_type, KR_T_STRUCT);
    bid = f->struct_id;
    b = &kr_structs[bid];
    ck_assert_str_eq(b->name, "MetadataResponseBroker");
    ck_assert(b->flags & KR_SF_ENDPOINT);
    ck_assert_int_eq(b->ep_node, 0);
    ck_assert_int_eq(b->ep_host, 1);
    ck_assert_int_eq(b->ep_port, 2);
    ck_assert_str_eq(kr_fields[b->first_field + 0].name, "NodeId");
    ck_assert_int_eq(kr_fields[b->first_field + 0].entity, KR_E_BROKER_ID);
    ck_assert_str_eq(kr_fields[b->first_field + 1].name, "Host");
    ck_assert_str_eq(kr_fields[b->first_field + 2].name, "Port");
    f = field(bid, "Rack");
    ck_assert_int_eq(f->nullable.lo, 1);
    ck_assert(f->flags & KR_FF_DEFAULT_NULL);
    ck_assert(f->flags & KR_FF_HAS_DEFAULT);
    ck_assert_ptr_null(f->def_str);
    ck_assert(a->flags & KR_AF_ENDPOINTS);

    /* "-2147483648" default (ClusterAuthorizedOperations). */
    f = field(root, "ClusterAuthorizedOperations");
    ck_assert_int_eq(f->def_int, INT32_MIN);
    ck_assert_int_eq(f->versions.lo, 8);
    ck_assert_int_eq(f->versions.hi, 10);

    /* Metadata v0 is in 4.3.1 again (KAFKA-18648). */
    ck_assert_uint_eq(kr_api_root(a, true, 0), root);
}
END_TEST

START_TEST(test_endpoint_structs)
{
    uint16_t root;
    const struct kr_struct_desc *s;
    const struct kr_field_desc *f;
    static const int16_t nodeep[] = { KR_API_FETCH, KR_API_SHARE_FETCH,
                                      KR_API_SHARE_ACKNOWLEDGE };
    size_t i;

    /* FindCoordinator v0-3: the root; v4+: Coordinators[]. */
    root = kr_api_root(api(KR_API_FIND_COORDINATOR), true, 3);
    s = &kr_structs[root];
    ck_assert(s->flags & KR_SF_ENDPOINT);
    ck_assert_int_eq(s->ep_node, kr_struct_field_index(root, "NodeId"));
    ck_assert_int_eq(s->ep_host, kr_struct_field_index(root, "Host"));
    ck_assert_int_eq(s->ep_port, kr_struct_field_index(root, "Port"));
    ck_assert_int_eq(field(root, "Host")->versions.hi, 3);
    f = field(root, "Coordinators");
    ck_assert_int_eq(f->versions.lo, 4);
    s = &kr_structs[f->struct_id];
    ck_assert(s->flags & KR_SF_ENDPOINT);
    ck_assert_int_eq(s->ep_node, kr_struct_field_index(f->struct_id,
                                                       "NodeId"));
    ck_assert(api(KR_API_FIND_COORDINATOR)->flags & KR_AF_ENDPOINTS);

    /* DescribeCluster Brokers: BrokerId/Host/Port. */
    root = kr_api_root(api(KR_API_DESCRIBE_CLUSTER), true, 1);
    f = field(root, "Brokers");
    s = &kr_structs[f->struct_id];
    ck_assert(s->flags & KR_SF_ENDPOINT);
    ck_assert_int_eq(s->ep_node, kr_struct_field_index(f->struct_id,
                                                       "BrokerId"));

    /* Fetch / ShareFetch / ShareAcknowledge NodeEndpoints (KIP-951). */
    for (i = 0; i < sizeof(nodeep) / sizeof(nodeep[0]); i++) {
        const struct kr_api_desc *a = api(nodeep[i]);

        root = kr_api_root(a, true, a->valid.hi);
        f = field(root, "NodeEndpoints");
        ck_assert_int_eq(f->elem_type, KR_T_STRUCT);
        ck_assert_msg(kr_structs[f->struct_id].flags & KR_SF_ENDPOINT,
                      "%s NodeEndpoints", a->name);
        ck_assert(a->flags & KR_AF_ENDPOINTS);
    }
    /* UpdateRaftVoter (controller) CurrentLeader: LeaderId/Host/Port. */
    root = kr_api_root(api(KR_API_UPDATE_RAFT_VOTER), true, 0);
    f = field(root, "CurrentLeader");
    ck_assert_int_eq(f->type, KR_T_STRUCT);
    ck_assert(kr_structs[f->struct_id].flags & KR_SF_ENDPOINT);
    ck_assert_int_eq(kr_structs[f->struct_id].ep_node, 0);

    f = field(kr_api_root(api(KR_API_FETCH), true, 18), "NodeEndpoints");
    ck_assert_int_eq(f->tag, 0);
    ck_assert_int_eq(f->tagged.lo, 16);
}
END_TEST

START_TEST(test_acl_structs_not_endpoints)
{
    static const int16_t keys[] = { KR_API_DESCRIBE_ACLS, KR_API_CREATE_ACLS,
                                    KR_API_DELETE_ACLS };
    size_t i;
    int16_t v;
    uint16_t res, acl;

    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const struct kr_api_desc *a = api(keys[i]);

        ck_assert(!(a->flags & KR_AF_ENDPOINTS));
        for (v = a->valid.lo; v <= a->valid.hi; v++) {
            ck_assert(!reaches_endpoint(kr_api_root(a, true, v), 0));
            ck_assert(!reaches_endpoint(kr_api_root(a, false, v), 0));
        }
    }
    /* The ACL structs do carry a Host (but no Port). */
    res = field(kr_api_root(api(KR_API_DESCRIBE_ACLS), true, 3),
                "Resources")->struct_id;
    acl = field(res, "Acls")->struct_id;
    ck_assert_int_eq(field(acl, "Host")->type, KR_T_STRING);
    ck_assert_int_eq(kr_struct_field_index(acl, "Port"), -1);
    ck_assert(!(kr_structs[acl].flags & KR_SF_ENDPOINT));
    ck_assert(!(api(KR_API_API_VERSIONS)->flags & KR_AF_ENDPOINTS));
}
END_TEST

START_TEST(test_defaults)
{
    uint16_t root = kr_api_root(api(KR_API_FETCH), false, 18);
    const struct kr_field_desc *f = field(root, "MaxBytes");

    /* "default": "0x7fffffff" */
    ck_assert(f->flags & KR_FF_HAS_DEFAULT);
    ck_assert_int_eq(f->def_int, 2147483647);
    ck_assert_int_eq(f->versions.lo, 3);
    f = field(root, "ReplicaId");
    ck_assert_int_eq(f->def_int, -1);
    ck_assert_int_eq(f->entity, KR_E_BROKER_ID);
    f = field(root, "ClusterId");
    ck_assert_int_eq(f->tag, 0);
    ck_assert(f->flags & KR_FF_DEFAULT_NULL);
    ck_assert_ptr_null(f->def_str);
    f = field(root, "MinBytes");
    ck_assert(!(f->flags & KR_FF_HAS_DEFAULT));
    ck_assert_int_eq(f->def_int, 0);

    /* Bool default "false" / "true" as strings. */
    root = kr_api_root(api(KR_API_METADATA), false, 12);
    f = field(root, "AllowAutoTopicCreation");
    ck_assert_int_eq(f->type, KR_T_BOOL);
    ck_assert_int_eq(f->def_int, 1);
    ck_assert(f->flags & KR_FF_HAS_DEFAULT);

    /* int64 default "-1" (ProduceResponse LogAppendTimeMs). */
    root = kr_api_root(api(KR_API_PRODUCE), true, 13);
    f = field(field(field(root, "Responses")->struct_id,
                    "PartitionResponses")->struct_id, "LogAppendTimeMs");
    ck_assert_int_eq(f->type, KR_T_INT64);
    ck_assert_int_eq(f->def_int, -1);
}
END_TEST

/* Every valid version of every API has both roots; none outside. */
START_TEST(test_roots_complete)
{
    int16_t k, v;
    int napis = 0;

    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *a = &kr_apis[k];

        ck_assert_int_eq(a->key, k);
        if (a->name == NULL) {
            ck_assert_ptr_null(kr_api_get(k));
            continue;
        }
        napis++;
        ck_assert_int_ge(a->valid.lo, 0);
        ck_assert_int_le(a->valid.lo, a->valid.hi);
        if (!vrange_empty(a->valid_4x)) {
            ck_assert_int_ge(a->valid_4x.lo, a->valid.lo);
            ck_assert_int_le(a->valid_4x.hi, a->valid.hi);
        }
        for (v = 0; v <= a->valid.hi; v++) {
            bool valid = kr_vrange_has(a->valid, v);
            uint16_t q = kr_api_root(a, false, v);
            uint16_t p = kr_api_root(a, true, v);

            if (!valid) {
                ck_assert_uint_eq(a->req_root[v], KR_NO_STRUCT);
                ck_assert_uint_eq(a->rsp_root[v], KR_NO_STRUCT);
                continue;
            }
            ck_assert_msg(q < kr_nstructs && p < kr_nstructs,
                          "%s v%d has no root", a->name, v);
            ck_assert_int_ge(kr_request_header_version(k, v), 0);
            ck_assert_int_ge(kr_response_header_version(k, v), 0);
        }
        ck_assert_uint_eq(kr_api_root(a, false, a->valid.hi + 1),
                          KR_NO_STRUCT);
    }
    /* 0-92 in 4.3.1 (keys 0-87 in 3.9.1) with no gaps. */
    ck_assert_int_eq(napis, 93);
}
END_TEST

/* Structural sanity of every struct and field. */
/* Wire sizes from the protocol guide (kafka.apache.org/protocol). */
START_TEST(test_type_sizes)
{
    static const struct {
        enum kr_type t;
        unsigned fixed, min_classic, min_flex;
    } want[] = {
        { KR_T_BOOL, 1, 1, 1 },     { KR_T_INT8, 1, 1, 1 },
        { KR_T_INT16, 2, 2, 2 },    { KR_T_UINT16, 2, 2, 2 },
        { KR_T_INT32, 4, 4, 4 },    { KR_T_UINT32, 4, 4, 4 },
        { KR_T_INT64, 8, 8, 8 },    { KR_T_FLOAT64, 8, 8, 8 },
        { KR_T_UUID, 16, 16, 16 },  { KR_T_STRING, 0, 2, 1 },
        { KR_T_BYTES, 0, 4, 1 },    { KR_T_RECORDS, 0, 4, 1 },
        { KR_T_ARRAY, 0, 4, 1 },    { KR_T_STRUCT, 0, 1, 1 },
    };
    size_t i;

    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_uint_eq(kr_type_fixed_size(want[i].t), want[i].fixed);
        ck_assert_uint_eq(kr_type_min_size(want[i].t, false),
                          want[i].min_classic);
        ck_assert_uint_eq(kr_type_min_size(want[i].t, true),
                          want[i].min_flex);
    }
}
END_TEST

START_TEST(test_tables_sane)
{
    uint32_t sid, total = 0;

    for (sid = 0; sid < kr_nstructs; sid++) {
        const struct kr_struct_desc *s = &kr_structs[sid];
        bool tags = false;
        uint16_t i, j;

        ck_assert_ptr_nonnull(s->name);
        ck_assert_uint_eq(s->first_field, total);
        total += s->nfields;
        ck_assert_uint_le(total, kr_nfields);
        if (s->flags & KR_SF_ENDPOINT) {
            ck_assert(s->ep_node >= 0 && s->ep_node < s->nfields);
            ck_assert(s->ep_host >= 0 && s->ep_host < s->nfields);
            ck_assert(s->ep_port >= 0 && s->ep_port < s->nfields);
            ck_assert_str_eq(kr_fields[s->first_field + s->ep_host].name,
                             "Host");
            ck_assert_int_eq(kr_fields[s->first_field + s->ep_host].type,
                             KR_T_STRING);
            ck_assert_int_eq(kr_fields[s->first_field + s->ep_port].type,
                             KR_T_INT32);
            ck_assert_int_eq(kr_fields[s->first_field + s->ep_node].type,
                             KR_T_INT32);
        } else {
            ck_assert_int_eq(s->ep_node, -1);
            ck_assert_int_eq(s->ep_host, -1);
            ck_assert_int_eq(s->ep_port, -1);
        }
        for (i = 0; i < s->nfields; i++) {
            const struct kr_field_desc *f = &kr_fields[s->first_field + i];
            bool is_struct = f->type == KR_T_STRUCT ||
                (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT);

            ck_assert_ptr_nonnull(f->name);
            ck_assert(f->type > KR_T_NONE && f->type <= KR_T_ARRAY);
            ck_assert_int_le(f->versions.lo, f->versions.hi);
            if (!vrange_empty(f->nullable)) {
                /* Some schemas say "nullableVersions": "0+" for a
                 * field that exists from v2 on; they must overlap. */
                ck_assert_int_ge(f->nullable.hi, f->versions.lo);
                ck_assert(f->type == KR_T_STRING ||
                          f->type == KR_T_BYTES ||
                          f->type == KR_T_RECORDS ||
                          f->type == KR_T_ARRAY ||
                          f->type == KR_T_STRUCT);
            }
            if (f->tag >= 0) {
                tags = true;
                ck_assert_int_eq(f->tagged.lo, f->versions.lo);
                ck_assert_int_eq(f->tagged.hi, f->versions.hi);
            } else {
                ck_assert_int_eq(f->tag, -1);
                ck_assert(vrange_empty(f->tagged));
            }
            if (!(f->flags & KR_FF_FLEX_OVERRIDE)) {
                ck_assert(vrange_empty(f->flexible));
            }
            if (f->type == KR_T_ARRAY) {
                ck_assert(f->elem_type > KR_T_NONE &&
                          f->elem_type < KR_T_ARRAY);
            } else {
                ck_assert_int_eq(f->elem_type, KR_T_NONE);
            }
            if (is_struct) {
                ck_assert_uint_lt(f->struct_id, kr_nstructs);
            } else {
                ck_assert_uint_eq(f->struct_id, KR_NO_STRUCT);
            }
            if (f->flags & KR_FF_DEFAULT_NULL) {
                ck_assert(f->flags & KR_FF_HAS_DEFAULT);
                ck_assert(!vrange_empty(f->nullable));
                ck_assert_ptr_null(f->def_str);
            } else {
                ck_assert_ptr_nonnull(f->def_str);
            }
            if (f->flags & KR_FF_THROTTLE) {
                ck_assert_int_eq(f->type, KR_T_INT32);
                ck_assert_str_eq(f->name, "ThrottleTimeMs");
            }
            if (f->flags & KR_FF_ERROR_CODE) {
                ck_assert_int_eq(f->type, KR_T_INT16);
                ck_assert_str_eq(f->name, "ErrorCode");
            }
            /* Names unique; tags unique among overlapping versions. */
            for (j = 0; j < i; j++) {
                const struct kr_field_desc *g =
                    &kr_fields[s->first_field + j];

                ck_assert_str_ne(f->name, g->name);
                if (f->tag >= 0 && g->tag == f->tag) {
                    ck_assert(f->tagged.hi < g->tagged.lo ||
                              g->tagged.hi < f->tagged.lo);
                }
            }
        }
        ck_assert(tags == !!(s->flags & KR_SF_HAS_TAGS));
    }
    ck_assert_uint_eq(total, kr_nfields);
}
END_TEST

/*
 * Field ids: id -> name -> id for every id, names sorted and unique,
 * every field's id the one of its name, every id used by some field, and
 * the by-id index the same as the by-name index.
 */
START_TEST(test_field_ids)
{
    static bool used[KR_NFIELD_IDS];
    uint32_t i, sid;

    ck_assert_ptr_null(kr_field_id_name(KR_FIELD_NONE));
    ck_assert_ptr_null(kr_field_id_name((enum kr_field_id)KR_NFIELD_IDS));
    ck_assert_ptr_null(kr_field_id_name((enum kr_field_id)-1));
    ck_assert_ptr_null(kr_field_names[KR_FIELD_NONE]);
    for (i = 1; i < KR_NFIELD_IDS; i++) {
        const char *name = kr_field_id_name((enum kr_field_id)i);

        ck_assert_ptr_nonnull(name);
        ck_assert_ptr_eq(name, kr_field_names[i]);
        ck_assert_msg(name[0] >= 'A' && name[0] <= 'Z', "id %u: %s", i,
                      name);
        ck_assert_msg(kr_field_id_lookup(name) == (enum kr_field_id)i,
                      "id %u: %s looks up as %d", i, name,
                      (int)kr_field_id_lookup(name));
        if (i > 1) {
            ck_assert_msg(strcmp(kr_field_names[i - 1], name) < 0,
                          "%s before %s", kr_field_names[i - 1], name);
        }
    }
    memset(used, 0, sizeof(used));
    for (i = 0; i < kr_nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[i];
        const char *canon;

        ck_assert_uint_gt(f->id, KR_FIELD_NONE);
        ck_assert_uint_lt(f->id, KR_NFIELD_IDS);
        ck_assert_msg(kr_field_id_lookup(f->name) == f->id, "%s: id %u",
                      f->name, f->id);
        /* the same name, the first letter capitalised */
        canon = kr_field_id_name((enum kr_field_id)f->id);
        ck_assert_str_eq(canon + 1, f->name + 1);
        ck_assert(canon[0] == f->name[0] ||
                  canon[0] == f->name[0] - 'a' + 'A');
        used[f->id] = true;
    }
    for (i = 1; i < KR_NFIELD_IDS; i++) {
        ck_assert_msg(used[i], "id %u (%s) names no field", i,
                      kr_field_names[i]);
    }
    for (sid = 0; sid < kr_nstructs; sid++) {
        const struct kr_struct_desc *s = &kr_structs[sid];
        uint16_t j;

        for (j = 0; j < s->nfields; j++) {
            const struct kr_field_desc *f = &kr_fields[s->first_field + j];

            ck_assert_int_eq(kr_struct_field_index_id((uint16_t)sid,
                                                      (enum kr_field_id)
                                                      f->id), j);
            ck_assert_int_eq(kr_struct_field_index((uint16_t)sid, f->name),
                             j);
        }
    }

    /* known names, and the constants are the names */
    ck_assert_str_eq(kr_field_id_name(KR_FIELD_ACKS), "Acks");
    ck_assert_str_eq(kr_field_id_name(KR_FIELD_SESSION_EPOCH),
                     "SessionEpoch");
    ck_assert_str_eq(kr_field_id_name(KR_FIELD_THROTTLE_TIME_MS),
                     "ThrottleTimeMs");
    ck_assert_int_eq(kr_field_id_lookup("ErrorCode"), KR_FIELD_ERROR_CODE);
    /* CreateTopics writes "timeoutMs": one id with "TimeoutMs" */
    ck_assert_int_eq(kr_field_id_lookup("timeoutMs"), KR_FIELD_TIMEOUT_MS);
    ck_assert_int_eq(kr_field_id_lookup("TimeoutMs"), KR_FIELD_TIMEOUT_MS);
    ck_assert_int_eq(kr_struct_field_index_id(
                         kr_api_root(api(KR_API_CREATE_TOPICS), false, 7),
                         KR_FIELD_TIMEOUT_MS),
                     kr_struct_field_index(
                         kr_api_root(api(KR_API_CREATE_TOPICS), false, 7),
                         "timeoutMs"));
    /* only the first letter's case is free */
    ck_assert_int_eq(kr_field_id_lookup("TimeOutMs"), KR_FIELD_NONE);
    ck_assert_int_eq(kr_field_id_lookup("acks"), KR_FIELD_ACKS);
    ck_assert_int_eq(kr_field_id_lookup("ACKS"), KR_FIELD_NONE);
    ck_assert_int_eq(kr_field_id_lookup("Ack"), KR_FIELD_NONE);
    ck_assert_int_eq(kr_field_id_lookup("Acksx"), KR_FIELD_NONE);
    ck_assert_int_eq(kr_field_id_lookup(""), KR_FIELD_NONE);
    ck_assert_int_eq(kr_field_id_lookup(NULL), KR_FIELD_NONE);
    ck_assert_int_eq(kr_field_id_lookup("\xff"), KR_FIELD_NONE);
    ck_assert_int_eq(kr_struct_field_index_id(0, KR_FIELD_NONE), -1);
    ck_assert_int_eq(kr_struct_field_index_id((uint16_t)kr_nstructs,
                                              KR_FIELD_ACKS), -1);
    ck_assert_int_eq(kr_struct_field_index_id(kr_request_header_struct,
                                              KR_FIELD_ACKS), -1);
}
END_TEST

static Suite *
schema_suite(void)
{
    Suite *s = suite_create("schema");
    TCase *tc = tcase_create("tables");

    tcase_add_test(tc, test_produce_fetch_ranges);
    tcase_add_test(tc, test_removed_and_renamed_apis);
    tcase_add_test(tc, test_lookups);
    tcase_add_test(tc, test_min_kafka4);
    tcase_add_test(tc, test_header_versions);
    tcase_add_test(tc, test_headers);
    tcase_add_test(tc, test_produce_response);
    tcase_add_test(tc, test_produce_legacy_tree);
    tcase_add_test(tc, test_metadata_brokers);
    tcase_add_test(tc, test_endpoint_structs);
    tcase_add_test(tc, test_acl_structs_not_endpoints);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_roots_complete);
    tcase_add_test(tc, test_tables_sane);
    tcase_add_test(tc, test_type_sizes);
    tcase_add_test(tc, test_field_ids);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(schema_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
