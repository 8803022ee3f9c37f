/*
 * kr_action.c - rule actions as pure functions over decoded trees: error
 * responses built from requests, deny defaults, ThrottleTimeMs, the
 * KIP-219 table, error replacement and counting, produce policy.
 *
 * See include/kr_action.h for the contracts.  Everything generic comes
 * from the schema tables (KR_FF_ERROR_CODE, KR_FF_THROTTLE, entity
 * types); the only per-API knowledge is in two small tables below:
 * kr_mirrors (how an error response mirrors its request) and
 * kr_kip219 (first client-throttling version of the pre-KIP-219 APIs).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "kr_action.h"
#include "kr_api_keys.h"
#include "kr_kerr.h"

/* Kafka error codes used here (Errors.java). */

/* Deepest struct nesting walked (the codec's limit is 16). */
#define KR_ACTION_MAX_DEPTH 32

/* ---- small helpers ------------------------------------------------------- */

/* True when field f is on the wire as a regular (non-tagged) field at v. */
static bool
field_regular_at(const struct kr_field_desc *f, int16_t v)
{
    return kr_vrange_has(f->versions, v) &&
           !(f->tag >= 0 && kr_vrange_has(f->tagged, v));
}

/* Index of field id in n's struct when it exists at n->version, or -1. */
static int
node_field_at(const struct kr_node *n, enum kr_field_id id)
{
    int i;

    if (n == NULL) {
        return -1;
    }
    i = kr_struct_field_index_id(n->struct_id, id);
    if (i < 0 || !kr_vrange_has(kr_node_field(n, (unsigned)i)->versions,
                                n->version)) {
        return -1;
    }
    return i;
}

/* ---- error responses: the mirror table --------------------------------- */

/*
 * How one level of a response mirrors one level of its request.
 *
 * req_arr names an array field of the request struct at this level;
 * rsp_arr the array of the response struct that gets one element per
 * request element.  When the request array holds scalars (DeleteGroups
 * GroupsNames, ElectLeaders Partitions) scalar_to names the response
 * element field that receives each value; otherwise keys lists
 * (request field, response field) pairs copied from each request element
 * (only when both exist at the version and have the same type).  sets
 * lists int fields of each response element given a value other than the
 * schema default, as Kafka's getErrorResponse does (BaseOffset -1...).
 * Fields are named by id; KR_FIELD_NONE is none (and ends keys, sets).
 *
 * Every response element built gets ErrorCode (and ErrorMessage) where
 * its struct has one at that version: that part is generic.
 */
struct kr_mirror_key {
    enum kr_field_id req;
    enum kr_field_id rsp;
};
struct kr_mirror_set {
    enum kr_field_id field;
    int64_t value;
};
struct kr_mirror_level {
    enum kr_field_id req_arr;
    enum kr_field_id rsp_arr;
    enum kr_field_id scalar_to;
    struct kr_mirror_key keys[3];
    struct kr_mirror_set sets[4];
};

/* kr_mirror.flags */
#define KR_MF_FETCH 0x01u   /* Fetch: KIP-227 rules (see fetch_adjust) */

/*
 * One row per API (or per request layout of an API: the first row whose
 * levels[0].req_arr exists in the request at its version applies; a row
 * with no level (TOP_ONLY) answers with the top-level ErrorCode only, and
 * applies where the response has one; its lv[0].sets are top-level).  Sources:
 * the getErrorResponse methods of Kafka's *Request.java classes (4.x).
 */
struct kr_mirror {
    int16_t api_key;
    unsigned flags;
    unsigned nlevels;
    struct kr_mirror_level lv[2];
};

/* Shorthands for the table: no keys, no sets, no level (all KR_FIELD_NONE). */
#define NO_KEYS { { KR_FIELD_NONE, KR_FIELD_NONE } }
#define NO_SETS { { KR_FIELD_NONE, 0 } }
#define NO_LEVEL { KR_FIELD_NONE, KR_FIELD_NONE, KR_FIELD_NONE, NO_KEYS, \
                   NO_SETS }

/* A row answering with the top-level ErrorCode and the listed fields set
 * (one or two struct kr_mirror_set initialisers). */
#define TOP_ONLY(key, ...) \
    { key, 0, 0, { { KR_FIELD_NONE, KR_FIELD_NONE, KR_FIELD_NONE, NO_KEYS, \
                     { __VA_ARGS__ } } } }

static const struct kr_mirror kr_mirrors[] = {
    /* ProduceRequest.getErrorResponse: every partition gets the error,
     * BaseOffset -1 (INVALID_OFFSET), LogAppendTimeMs -1,
     * LogStartOffset -1 (schema defaults). */
    { KR_API_PRODUCE, 0, 2, {
        { KR_FIELD_TOPIC_DATA, KR_FIELD_RESPONSES, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME },
            { KR_FIELD_TOPIC_ID, KR_FIELD_TOPIC_ID } }, NO_SETS },
        { KR_FIELD_PARTITION_DATA, KR_FIELD_PARTITION_RESPONSES,
          KR_FIELD_NONE, { { KR_FIELD_INDEX, KR_FIELD_INDEX } },
          { { KR_FIELD_BASE_OFFSET, -1 } } } } },
    /* FetchRequest.getErrorResponse; see fetch_adjust for KIP-227. */
    { KR_API_FETCH, KR_MF_FETCH, 2, {
        { KR_FIELD_TOPICS, KR_FIELD_RESPONSES, KR_FIELD_NONE,
          { { KR_FIELD_TOPIC, KR_FIELD_TOPIC },
            { KR_FIELD_TOPIC_ID, KR_FIELD_TOPIC_ID } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITIONS, KR_FIELD_NONE,
          { { KR_FIELD_PARTITION, KR_FIELD_PARTITION_INDEX } },
          { { KR_FIELD_HIGH_WATERMARK, -1 },
            { KR_FIELD_LAST_STABLE_OFFSET, -1 },
            { KR_FIELD_LOG_START_OFFSET, -1 },
            { KR_FIELD_PREFERRED_READ_REPLICA, -1 } } } } },
    /* CreateTopics: Name, ErrorCode, ErrorMessage per topic;
     * NumPartitions/ReplicationFactor keep their -1 defaults. */
    { KR_API_CREATE_TOPICS, 0, 1, {
        { KR_FIELD_TOPICS, KR_FIELD_TOPICS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME } }, NO_SETS },
        NO_LEVEL } },
    /* DeleteTopics v6+: Topics[] {Name, TopicId}; v0-5: TopicNames[]. */
    { KR_API_DELETE_TOPICS, 0, 1, {
        { KR_FIELD_TOPICS, KR_FIELD_RESPONSES, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME },
            { KR_FIELD_TOPIC_ID, KR_FIELD_TOPIC_ID } }, NO_SETS },
        NO_LEVEL } },
    { KR_API_DELETE_TOPICS, 0, 1, {
        { KR_FIELD_TOPIC_NAMES, KR_FIELD_RESPONSES, KR_FIELD_NAME, NO_KEYS,
          NO_SETS },
        NO_LEVEL } },
    /* DeleteRecords: LowWatermark -1 (INVALID_LOW_WATERMARK). */
    { KR_API_DELETE_RECORDS, 0, 2, {
        { KR_FIELD_TOPICS, KR_FIELD_TOPICS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITIONS, KR_FIELD_NONE,
          { { KR_FIELD_PARTITION_INDEX, KR_FIELD_PARTITION_INDEX } },
          { { KR_FIELD_LOW_WATERMARK, -1 } } } } },
    { KR_API_CREATE_PARTITIONS, 0, 1, {
        { KR_FIELD_TOPICS, KR_FIELD_RESULTS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME } }, NO_SETS },
        NO_LEVEL } },
    { KR_API_ALTER_CONFIGS, 0, 1, {
        { KR_FIELD_RESOURCES, KR_FIELD_RESPONSES, KR_FIELD_NONE,
          { { KR_FIELD_RESOURCE_TYPE, KR_FIELD_RESOURCE_TYPE },
            { KR_FIELD_RESOURCE_NAME, KR_FIELD_RESOURCE_NAME } }, NO_SETS },
        NO_LEVEL } },
    { KR_API_INCREMENTAL_ALTER_CONFIGS, 0, 1, {
        { KR_FIELD_RESOURCES, KR_FIELD_RESPONSES, KR_FIELD_NONE,
          { { KR_FIELD_RESOURCE_TYPE, KR_FIELD_RESOURCE_TYPE },
            { KR_FIELD_RESOURCE_NAME, KR_FIELD_RESOURCE_NAME } }, NO_SETS },
        NO_LEVEL } },
    { KR_API_DELETE_GROUPS, 0, 1, {
        { KR_FIELD_GROUPS_NAMES, KR_FIELD_RESULTS, KR_FIELD_GROUP_ID,
          NO_KEYS, NO_SETS },
        NO_LEVEL } },
    /* DescribeAcls: top-level ErrorCode/ErrorMessage, no Resources. */
    TOP_ONLY(KR_API_DESCRIBE_ACLS, { KR_FIELD_NONE, 0 }),
    /* CreateAcls / DeleteAcls: one result per creation / filter. */
    { KR_API_CREATE_ACLS, 0, 1, {
        { KR_FIELD_CREATIONS, KR_FIELD_RESULTS, KR_FIELD_NONE, NO_KEYS,
          NO_SETS },
        NO_LEVEL } },
    { KR_API_DELETE_ACLS, 0, 1, {
        { KR_FIELD_FILTERS, KR_FIELD_FILTER_RESULTS, KR_FIELD_NONE, NO_KEYS,
          NO_SETS },
        NO_LEVEL } },
    /* ElectLeaders: top-level ErrorCode (v1+) and every partition; a null
     * TopicPartitions (all partitions) gives an empty result list. */
    { KR_API_ELECT_LEADERS, 0, 2, {
        { KR_FIELD_TOPIC_PARTITIONS, KR_FIELD_REPLICA_ELECTION_RESULTS,
          KR_FIELD_NONE, { { KR_FIELD_TOPIC, KR_FIELD_TOPIC } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITION_RESULT,
          KR_FIELD_PARTITION_ID, NO_KEYS, NO_SETS } } },
    /* AlterPartitionReassignments: top-level and every partition. */
    { KR_API_ALTER_PARTITION_REASSIGNMENTS, 0, 2, {
        { KR_FIELD_TOPICS, KR_FIELD_RESPONSES, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITIONS, KR_FIELD_NONE,
          { { KR_FIELD_PARTITION_INDEX, KR_FIELD_PARTITION_INDEX } },
          NO_SETS } } },
    /* Beyond the required list: common client APIs. */
    { KR_API_METADATA, 0, 1, {
        { KR_FIELD_TOPICS, KR_FIELD_TOPICS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME },
            { KR_FIELD_TOPIC_ID, KR_FIELD_TOPIC_ID } }, NO_SETS },
        NO_LEVEL } },
    { KR_API_LIST_OFFSETS, 0, 2, {
        { KR_FIELD_TOPICS, KR_FIELD_TOPICS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITIONS, KR_FIELD_NONE,
          { { KR_FIELD_PARTITION_INDEX, KR_FIELD_PARTITION_INDEX } },
          { { KR_FIELD_TIMESTAMP, -1 }, { KR_FIELD_OFFSET, -1 },
            { KR_FIELD_LEADER_EPOCH, -1 } } } } },
    { KR_API_OFFSET_COMMIT, 0, 2, {
        { KR_FIELD_TOPICS, KR_FIELD_TOPICS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME },
            { KR_FIELD_TOPIC_ID, KR_FIELD_TOPIC_ID } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITIONS, KR_FIELD_NONE,
          { { KR_FIELD_PARTITION_INDEX, KR_FIELD_PARTITION_INDEX } },
          NO_SETS } } },
    { KR_API_TXN_OFFSET_COMMIT, 0, 2, {
        { KR_FIELD_TOPICS, KR_FIELD_TOPICS, KR_FIELD_NONE,
          { { KR_FIELD_NAME, KR_FIELD_NAME } }, NO_SETS },
        { KR_FIELD_PARTITIONS, KR_FIELD_PARTITIONS, KR_FIELD_NONE,
          { { KR_FIELD_PARTITION_INDEX, KR_FIELD_PARTITION_INDEX } },
          NO_SETS } } },
    { KR_API_DESCRIBE_CONFIGS, 0, 1, {
        { KR_FIELD_RESOURCES, KR_FIELD_RESULTS, KR_FIELD_NONE,
          { { KR_FIELD_RESOURCE_TYPE, KR_FIELD_RESOURCE_TYPE },
            { KR_FIELD_RESOURCE_NAME, KR_FIELD_RESOURCE_NAME } }, NO_SETS },
        NO_LEVEL } },
    { KR_API_DESCRIBE_GROUPS, 0, 1, {
        { KR_FIELD_GROUPS, KR_FIELD_GROUPS, KR_FIELD_GROUP_ID, NO_KEYS,
          NO_SETS },
        NO_LEVEL } },
    /* FindCoordinator v4+: one Coordinator per key, NodeId/Port -1
     * (Node.noNode()); v0-3: the top-level fields. */
    { KR_API_FIND_COORDINATOR, 0, 1, {
        { KR_FIELD_COORDINATOR_KEYS, KR_FIELD_COORDINATORS, KR_FIELD_KEY,
          NO_KEYS, { { KR_FIELD_NODE_ID, -1 }, { KR_FIELD_PORT, -1 } } },
        NO_LEVEL } },
    TOP_ONLY(KR_API_FIND_COORDINATOR, { KR_FIELD_NODE_ID, -1 },
             { KR_FIELD_PORT, -1 }),
    /* Top-level ErrorCode, arrays empty, other fields at their defaults
     * (or as listed), as these APIs' getErrorResponse do.  A row applies
     * only to versions whose response has a top-level ErrorCode. */
    TOP_ONLY(KR_API_JOIN_GROUP, { KR_FIELD_GENERATION_ID, -1 }),
    TOP_ONLY(KR_API_SYNC_GROUP, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_LEAVE_GROUP, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_LIST_GROUPS, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_INIT_PRODUCER_ID, { KR_FIELD_PRODUCER_ID, -1 },
             { KR_FIELD_PRODUCER_EPOCH, -1 }),
    TOP_ONLY(KR_API_END_TXN, { KR_FIELD_PRODUCER_ID, -1 },
             { KR_FIELD_PRODUCER_EPOCH, -1 }),
    TOP_ONLY(KR_API_SASL_HANDSHAKE, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_API_VERSIONS, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_DESCRIBE_LOG_DIRS, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_LIST_PARTITION_REASSIGNMENTS, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_OFFSET_DELETE, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_DESCRIBE_CLUSTER, { KR_FIELD_CONTROLLER_ID, -1 }),
    TOP_ONLY(KR_API_LIST_TRANSACTIONS, { KR_FIELD_NONE, 0 }),
    TOP_ONLY(KR_API_CONSUMER_GROUP_HEARTBEAT, { KR_FIELD_NONE, 0 }),
};

#undef TOP_ONLY
#undef NO_LEVEL
#undef NO_SETS
#undef NO_KEYS

/*
 * Responses whose fields at v (tagged ones aside) are only ErrorCode,
 * ThrottleTimeMs and ErrorMessage: the error response is the top-level
 * ErrorCode.  Computed from the tables (Heartbeat, AddOffsetsToTxn,
 * EndTxn v0-4, LeaveGroup v0-2, ...).
 */
static bool
top_error_only(const struct kr_api_desc *a, int16_t v)
{
    uint16_t sid = kr_api_root(a, true, v);
    const struct kr_struct_desc *sd;
    bool has_error = false;
    unsigned i;

    if (sid == KR_NO_STRUCT) {
        return false;
    }
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (!field_regular_at(f, v)) {
            continue;
        }
        if (f->flags & KR_FF_ERROR_CODE) {
            has_error = true;
        } else if (!(f->flags & KR_FF_THROTTLE) &&
                   !(f->id == KR_FIELD_ERROR_MESSAGE &&
                     f->type == KR_T_STRING)) {
            return false;
        }
    }
    return has_error;
}

/* True when struct sid has a regular ErrorCode field at v. */
static bool
struct_has_error_at(uint16_t sid, int16_t v)
{
    const struct kr_struct_desc *sd = &kr_structs[sid];
    unsigned i;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if ((f->flags & KR_FF_ERROR_CODE) && field_regular_at(f, v)) {
            return true;
        }
    }
    return false;
}

/* True when struct sid has field id existing at v. */
static bool
struct_has_at(uint16_t sid, enum kr_field_id id, int16_t v)
{
    int i = kr_struct_field_index_id(sid, id);

    return i >= 0 &&
           kr_vrange_has(kr_fields[kr_structs[sid].first_field +
                                   (unsigned)i].versions, v);
}

/*
 * The mirror row for API key at v, or NULL.  A row with levels applies
 * when its first request array exists at v; a top-only row always does.
 */
static const struct kr_mirror *
mirror_find(int16_t key, int16_t v)
{
    const struct kr_api_desc *a = kr_api_get(key);
    uint16_t rq, rs;
    size_t i;

    if (a == NULL) {
        return NULL;
    }
    rq = kr_api_root(a, false, v);
    rs = kr_api_root(a, true, v);
    if (rq == KR_NO_STRUCT || rs == KR_NO_STRUCT) {
        return NULL;
    }
    for (i = 0; i < KR_ARRAY_LEN(kr_mirrors); i++) {
        const struct kr_mirror *m = &kr_mirrors[i];

        if (m->api_key != key) {
            continue;
        }
        if (m->nlevels == 0 ? struct_has_error_at(rs, v)
                            : struct_has_at(rq, m->lv[0].req_arr, v)) {
            return m;
        }
    }
    return NULL;
}

bool
kr_action_error_response_supported(int16_t api_key, int16_t v)
{
    const struct kr_api_desc *a = kr_api_get(api_key);

    if (a == NULL || kr_api_root(a, true, v) == KR_NO_STRUCT ||
        kr_api_root(a, false, v) == KR_NO_STRUCT) {
        return false;
    }
    return mirror_find(api_key, v) != NULL || top_error_only(a, v);
}

/*
 * Set ErrorCode (every KR_FF_ERROR_CODE field at n's version) and, with
 * msg, ErrorMessage in node n (not below it).  Returns the number of
 * ErrorCode fields set.
 */
static unsigned
node_set_error(struct kr_node *n, int16_t error, const char *msg)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    unsigned i, set = 0;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);

        if (!kr_vrange_has(f->versions, n->version)) {
            continue;
        }
        if (f->flags & KR_FF_ERROR_CODE) {
            n->vals[i].u.i = error;
            set++;
        } else if (msg != NULL && f->type == KR_T_STRING &&
                   f->id == KR_FIELD_ERROR_MESSAGE &&
                   !(f->tag >= 0 && kr_vrange_has(f->tagged, n->version))) {
            n->vals[i].u.s.p = (const uint8_t *)msg;
            n->vals[i].u.s.len = (int32_t)strlen(msg);
            n->vals[i].is_null = 0;
        }
    }
    return set;
}

/* Set int field id of n to value when it exists at n's version. */
static void
node_set_int(struct kr_node *n, enum kr_field_id id, int64_t value)
{
    int i = node_field_at(n, id);

    if (i >= 0) {
        const struct kr_field_desc *f = kr_node_field(n, (unsigned)i);

        if (f->type >= KR_T_BOOL && f->type <= KR_T_INT64) {
            n->vals[i].u.i = value;
        }
    }
}

/*
 * Copy value src (of request field type st) into field di of node dst,
 * when the types agree.  A null where the response field cannot be null
 * at its version becomes empty.
 */
static void
copy_val(struct kr_node *dst, int di, uint8_t st, const struct kr_val *src)
{
    const struct kr_field_desc *f = kr_node_field(dst, (unsigned)di);
    struct kr_val *d = &dst->vals[di];

    if (f->type != st) {
        return;
    }
    switch (st) {
    case KR_T_STRING:
    case KR_T_BYTES:
    case KR_T_UUID:
        if (src->is_null || src->u.s.len < 0) {
            if (kr_vrange_has(f->nullable, dst->version)) {
                d->u.s.p = NULL;
                d->u.s.len = -1;
                d->is_null = 1;
            } else {
                d->u.s.p = NULL;
                d->u.s.len = 0;
                d->is_null = 0;
            }
        } else {
            d->u.s = src->u.s;
            d->is_null = 0;
        }
        break;
    case KR_T_BOOL:
    case KR_T_INT8:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
    case KR_T_INT64:
        d->u.i = src->u.i;
        break;
    default:
        break;
    }
}

static int mirror_level(struct kr_arena *a, const struct kr_mirror *m,
                        unsigned lvl, const struct kr_node *rq,
                        struct kr_node *rs, int16_t error, const char *msg);

/* Fill response element e from request element src at level lv. */
static int
mirror_elem(struct kr_arena *a, const struct kr_mirror *m, unsigned lvl,
            const struct kr_val *src, uint8_t src_type, struct kr_node *e,
            int16_t error, const char *msg)
{
    const struct kr_mirror_level *lv = &m->lv[lvl];
    unsigned k;

    if (lv->scalar_to != KR_FIELD_NONE) {
        int di = node_field_at(e, lv->scalar_to);

        if (di >= 0) {
            copy_val(e, di, src_type, src);
        }
    } else if (src->u.node != NULL) {
        for (k = 0; k < KR_ARRAY_LEN(lv->keys) &&
                    lv->keys[k].req != KR_FIELD_NONE; k++) {
            int si = node_field_at(src->u.node, lv->keys[k].req);
            int di = node_field_at(e, lv->keys[k].rsp);

            if (si >= 0 && di >= 0) {
                copy_val(e, di, kr_node_field(src->u.node,
                                              (unsigned)si)->type,
                         &src->u.node->vals[si]);
            }
        }
    }
    for (k = 0; k < KR_ARRAY_LEN(lv->sets) &&
                lv->sets[k].field != KR_FIELD_NONE; k++) {
        node_set_int(e, lv->sets[k].field, lv->sets[k].value);
    }
    node_set_error(e, error, msg);
    if (lvl + 1 < m->nlevels && lv->scalar_to == KR_FIELD_NONE &&
        src->u.node != NULL) {
        return mirror_level(a, m, lvl + 1, src->u.node, e, error, msg);
    }
    return KR_OK;
}

/*
 * Mirror level lvl: request node rq's array lv.req_arr into response node
 * rs's array lv.rsp_arr.  A request array the version lacks, or null,
 * leaves the response array as it is (empty).
 */
static int
mirror_level(struct kr_arena *a, const struct kr_mirror *m, unsigned lvl,
             const struct kr_node *rq, struct kr_node *rs, int16_t error,
             const char *msg)
{
    const struct kr_mirror_level *lv = &m->lv[lvl];
    const struct kr_field_desc *rqf, *rsf;
    const struct kr_array *in;
    struct kr_array *out;
    int ri, si;
    uint32_t i;

    ri = node_field_at(rq, lv->req_arr);
    si = node_field_at(rs, lv->rsp_arr);
    if (ri < 0 || si < 0) {
        return KR_OK;
    }
    rqf = kr_node_field(rq, (unsigned)ri);
    rsf = kr_node_field(rs, (unsigned)si);
    if (rqf->type != KR_T_ARRAY || rsf->type != KR_T_ARRAY ||
        rsf->elem_type != KR_T_STRUCT ||
        (lv->scalar_to == KR_FIELD_NONE) !=
            (rqf->elem_type == KR_T_STRUCT)) {
        return KR_OK;           /* table does not fit this layout */
    }
    in = rq->vals[ri].u.arr;
    if (rq->vals[ri].is_null || in == NULL || in->n == 0) {
        return KR_OK;
    }
    out = kr_array_new(a, KR_T_STRUCT, rsf->struct_id, in->n, rs->version);
    if (out == NULL) {
        return KR_ENOMEM;
    }
    for (i = 0; i < in->n; i++) {
        int rc;

        if (out->items[i].u.node == NULL) {
            return KR_ENOMEM;
        }
        rc = mirror_elem(a, m, lvl, &in->items[i], in->elem_type,
                         out->items[i].u.node, error, msg);
        if (rc != KR_OK) {
            return rc;
        }
    }
    rs->vals[si].u.arr = out;
    rs->vals[si].is_null = 0;
    return KR_OK;
}

/*
 * Fetch and incremental fetch sessions (KIP-227).
 *
 * Kafka's FetchRequest.getErrorResponse sets the top-level ErrorCode
 * (v7+), and for v < 13 also gives every requested partition the error
 * (HighWatermark -1, Records empty); from v13 on it lists no partition
 * at all.  We do the same, with one deliberate difference: SessionId is
 * 0 (INVALID_SESSION_ID), where a broker echoes the request's.
 *
 * Why: the broker never saw the refused request, so its session is
 * still at the request's epoch and holds partitions this (incremental)
 * request may not even list.  KIP-227 says that with a top-level error
 * the client must assume every partition of the fetch got it, and Java's
 * FetchSessionHandler.handleResponse then drops to a full fetch
 * (nextCloseExisting: same session id, epoch 0; or INITIAL for
 * FETCH_SESSION_ID_NOT_FOUND) without looking at the SessionId.  Clients
 * that do read SessionId (franz-go kills its session when it is <= 0)
 * also fall back to a full fetch instead of bumping their epoch past the
 * broker's.  A full fetch names every partition again, so a topic deny
 * rule sees all of them, and the broker replaces its old session when
 * that full fetch reaches it.  Per-partition errors with the session id
 * kept would leave the client one epoch ahead of the broker
 * (INVALID_FETCH_SESSION_EPOCH on the next forwarded fetch).
 */
static void
fetch_adjust(struct kr_node *body)
{
    node_set_int(body, KR_FIELD_SESSION_ID, 0);
}

int
kr_action_error_response(struct kr_arena *a, const struct kr_msg *req,
                         int16_t error, struct kr_msg *rsp)
{
    const struct kr_api_desc *api;
    const struct kr_mirror *m;
    struct kr_node *hdr, *body;
    const char *msg;
    int16_t v;
    int hv, ci;
    size_t i;

    if (req == NULL || rsp == NULL || req->dir != KR_DIR_REQUEST ||
        req->body == NULL) {
        return KR_EPROTO;
    }
    v = req->api_version;
    api = kr_api_get(req->api_key);
    if (api == NULL || kr_api_root(api, true, v) == KR_NO_STRUCT) {
        return KR_EUNSUPPORTED;
    }
    if (req->body->struct_id != kr_api_root(api, false, v)) {
        return KR_EPROTO;       /* not this API's request body */
    }
    m = mirror_find(req->api_key, v);
    if (m == NULL && !top_error_only(api, v)) {
        return KR_EUNSUPPORTED;
    }
    hv = kr_response_header_version(req->api_key, v);
    if (hv < 0) {
        return KR_EUNSUPPORTED;
    }
    hdr = kr_node_new(a, kr_response_header_struct, (int16_t)hv);
    body = kr_node_new(a, kr_api_root(api, true, v), v);
    if (hdr == NULL || body == NULL) {
        return KR_ENOMEM;
    }
    ci = node_field_at(hdr, KR_FIELD_CORRELATION_ID);
    if (ci >= 0) {
        hdr->vals[ci].u.i = req->correlation_id;
    }
    /* ErrorMessage: Kafka's name of the error (a static string). */
    msg = error != 0 ? kr_kerr_name(error) : NULL;
    node_set_error(body, error, msg);
    if (m != NULL && m->nlevels == 0) {
        for (i = 0; i < KR_ARRAY_LEN(m->lv[0].sets) &&
                    m->lv[0].sets[i].field != KR_FIELD_NONE; i++) {
            node_set_int(body, m->lv[0].sets[i].field,
                         m->lv[0].sets[i].value);
        }
    }
    if (m != NULL && m->nlevels > 0 &&
        !((m->flags & KR_MF_FETCH) && v >= 13)) {
        int rc = mirror_level(a, m, 0, req->body, body, error, msg);

        if (rc != KR_OK) {
            return rc;
        }
    }
    if (m != NULL && (m->flags & KR_MF_FETCH)) {
        fetch_adjust(body);
    }
    memset(rsp, 0, sizeof(*rsp));
    rsp->dir = KR_DIR_RESPONSE;
    rsp->api_key = req->api_key;
    rsp->api_version = v;
    rsp->hdr_version = (int16_t)hv;
    rsp->correlation_id = req->correlation_id;
    rsp->header = hdr;
    rsp->body = body;
    return KR_OK;
}

/* ---- deny defaults ------------------------------------------------------ */

/* Entities named in struct sid at any version, or below it (bit per
 * enum kr_entity). */
static unsigned
struct_entities(uint16_t sid, int depth)
{
    const struct kr_struct_desc *sd;
    unsigned i, mask = 0;

    if (sid >= kr_nstructs || depth > KR_ACTION_MAX_DEPTH) {
        return 0;
    }
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (f->versions.lo > f->versions.hi) {
            continue;
        }
        mask |= 1u << f->entity;
        if (f->type == KR_T_STRUCT ||
            (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) {
            mask |= struct_entities(f->struct_id, depth + 1);
        }
    }
    return mask;
}

/*
 * APIs whose brokers check another resource before (or instead of) the
 * one the entity rule below would pick.  Sources: the handle*Request
 * methods of Kafka's KafkaApis.scala (4.x), in the order they authorize:
 * OffsetCommit, OffsetFetch, OffsetDelete and the consumer / share /
 * streams group APIs check READ (or DESCRIBE) on the GROUP first and
 * refuse the whole request with GROUP_AUTHORIZATION_FAILED before any
 * topic is looked at; AddOffsetsToTxn, TxnOffsetCommit and
 * AddPartitionsToTxn (v0-3) check WRITE on the TRANSACTIONAL_ID first;
 * FindCoordinator's default is its default KeyType (0, group); the
 * others are authorized on the CLUSTER resource although their requests
 * name topics (ElectLeaders, partition reassignments, log dirs, and the
 * inter-broker and KRaft APIs, CLUSTER_ACTION).
 */
static const struct {
    int16_t key;
    int16_t error;
} kr_deny_defaults[] = {
    { KR_API_OFFSET_COMMIT, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_OFFSET_FETCH, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_FIND_COORDINATOR, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_OFFSET_DELETE, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_CONSUMER_GROUP_HEARTBEAT, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_SHARE_GROUP_HEARTBEAT, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_STREAMS_GROUP_HEARTBEAT, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_DESCRIBE_SHARE_GROUP_OFFSETS, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_ALTER_SHARE_GROUP_OFFSETS, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_DELETE_SHARE_GROUP_OFFSETS, KR_KERR_GROUP_AUTHORIZATION_FAILED },
    { KR_API_ADD_PARTITIONS_TO_TXN,
      KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED },
    { KR_API_ADD_OFFSETS_TO_TXN,
      KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED },
    { KR_API_TXN_OFFSET_COMMIT, KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED },
    { KR_API_LEADER_AND_ISR, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_STOP_REPLICA, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_UPDATE_METADATA, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_WRITE_TXN_MARKERS, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_ALTER_REPLICA_LOG_DIRS, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_DESCRIBE_LOG_DIRS, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_ELECT_LEADERS, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_ALTER_PARTITION_REASSIGNMENTS,
      KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_LIST_PARTITION_REASSIGNMENTS,
      KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_VOTE, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_BEGIN_QUORUM_EPOCH, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_END_QUORUM_EPOCH, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_DESCRIBE_QUORUM, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_ALTER_PARTITION, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
    { KR_API_FETCH_SNAPSHOT, KR_KERR_CLUSTER_AUTHORIZATION_FAILED },
};

int16_t
kr_action_deny_error(int16_t api_key)
{
    const struct kr_api_desc *a = kr_api_get(api_key);
    unsigned mask = 0;
    size_t i;
    int16_t v;

    if (a == NULL) {
        return KR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    }
    for (i = 0; i < KR_ARRAY_LEN(kr_deny_defaults); i++) {
        if (kr_deny_defaults[i].key == api_key) {
            return kr_deny_defaults[i].error;
        }
    }
    for (v = a->valid.lo; v <= a->valid.hi && v >= 0; v++) {
        uint16_t sid = kr_api_root(a, false, v);

        if (sid != KR_NO_STRUCT) {
            mask |= struct_entities(sid, 0);
        }
        if (v == INT16_MAX) {
            break;
        }
    }
    if (mask & (1u << KR_E_TOPIC_NAME)) {
        return KR_KERR_TOPIC_AUTHORIZATION_FAILED;
    }
    if (mask & (1u << KR_E_GROUP_ID)) {
        return KR_KERR_GROUP_AUTHORIZATION_FAILED;
    }
    if (mask & (1u << KR_E_TRANSACTIONAL_ID)) {
        return KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    }
    return KR_KERR_CLUSTER_AUTHORIZATION_FAILED;
}

/* Integer field id of body (at its version), or dflt when absent. */
static int64_t
body_int(const struct kr_node *body, enum kr_field_id id, int64_t dflt)
{
    int i = node_field_at(body, id);

    if (i < 0 || !body->vals[i].present) {
        return dflt;
    }
    return body->vals[i].u.i;
}

/* True when string field id of body exists and is not null. */
static bool
body_str_set(const struct kr_node *body, enum kr_field_id id)
{
    int i = node_field_at(body, id);

    return i >= 0 && body->vals[i].present && !body->vals[i].is_null &&
           body->vals[i].u.s.len >= 0;
}

int16_t
kr_action_deny_error_for(const struct kr_msg *req)
{
    const struct kr_node *b;

    if (req == NULL) {
        return KR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    }
    b = req->body;
    if (req->dir != KR_DIR_REQUEST || b == NULL ||
        b->struct_id >= kr_nstructs) {
        return kr_action_deny_error(req->api_key);
    }
    switch (req->api_key) {
    case KR_API_FIND_COORDINATOR:
        /* KafkaApis.getCoordinator: DESCRIBE on the GROUP (KeyType 0,
         * also v0, which has no KeyType), on the TRANSACTIONAL_ID
         * (KeyType 1), CLUSTER_ACTION for share coordinators (2). */
        switch (body_int(b, KR_FIELD_KEY_TYPE, 0)) {
        case 0:
            return KR_KERR_GROUP_AUTHORIZATION_FAILED;
        case 1:
            return KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        default:
            return KR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        }
    case KR_API_PRODUCE:
        /* handleProduceRequest: WRITE on the TRANSACTIONAL_ID first. */
        return body_str_set(b, KR_FIELD_TRANSACTIONAL_ID)
                   ? KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                   : KR_KERR_TOPIC_AUTHORIZATION_FAILED;
    case KR_API_INIT_PRODUCER_ID:
        /* handleInitProducerIdRequest: without a TransactionalId,
         * IDEMPOTENT_WRITE on the CLUSTER (or WRITE on some topic). */
        return body_str_set(b, KR_FIELD_TRANSACTIONAL_ID)
                   ? KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                   : KR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    case KR_API_ADD_PARTITIONS_TO_TXN:
        /* v4+ come from brokers: CLUSTER_ACTION first. */
        return req->api_version >= 4
                   ? KR_KERR_CLUSTER_AUTHORIZATION_FAILED
                   : KR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    default:
        return kr_action_deny_error(req->api_key);
    }
}

/* ---- ThrottleTimeMs ----------------------------------------------------- */

bool
kr_action_throttle(struct kr_msg *rsp, int32_t ms, bool add, int32_t *now)
{
    const struct kr_struct_desc *sd;
    struct kr_node *n;
    unsigned i;

    if (rsp == NULL || rsp->body == NULL ||
        rsp->body->struct_id >= kr_nstructs) {
        return false;
    }
    n = rsp->body;
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        int64_t x;

        if (!(f->flags & KR_FF_THROTTLE) || !n->vals[i].present ||
            !kr_vrange_has(f->versions, n->version)) {
            continue;
        }
        x = add ? n->vals[i].u.i + (int64_t)ms : (int64_t)ms;
        if (x > INT32_MAX) {
            x = INT32_MAX;
        } else if (x < 0) {
            x = 0;
        }
        n->vals[i].u.i = x;
        if (now != NULL) {
            *now = (int32_t)x;
        }
        return true;
    }
    return false;
}

/* ---- KIP-219 ------------------------------------------------------------ */

/*
 * First version of each API that existed before KIP-219 from which the
 * broker sends a throttled response at once and the client throttles
 * itself.  Source: Apache Kafka's per-response shouldClientThrottle()
 * overrides, gathered in Kip219ClientThrottleVersion.BOUNDARIES
 * (clients/src/main/java/org/apache/kafka/common/requests/, KAFKA-20828,
 * apache/kafka PR #22989) and RequestResponseTest.
 * testClientThrottlesResponsesWithThrottleTime; the ACL, log-dir and
 * delegation-token rows (v1) come from the 3.x response classes (those
 * entries left Kafka's map when 4.0 dropped v0).
 *
 * Every other API: from the first version whose response has
 * ThrottleTimeMs (what Kafka 4.4's AbstractResponse derives from the
 * schema for the APIs newer than KIP-219); never when it has none
 * (SaslHandshake, SaslAuthenticate, inter-broker APIs).
 */
static const struct {
    int16_t key;
    int16_t first;
} kr_kip219[] = {
    { KR_API_PRODUCE, 6 },
    { KR_API_FETCH, 8 },
    { KR_API_LIST_OFFSETS, 3 },
    { KR_API_METADATA, 6 },
    { KR_API_OFFSET_COMMIT, 4 },
    { KR_API_OFFSET_FETCH, 4 },
    { KR_API_FIND_COORDINATOR, 2 },
    { KR_API_JOIN_GROUP, 3 },
    { KR_API_HEARTBEAT, 2 },
    { KR_API_LEAVE_GROUP, 2 },
    { KR_API_SYNC_GROUP, 2 },
    { KR_API_DESCRIBE_GROUPS, 2 },
    { KR_API_LIST_GROUPS, 2 },
    { KR_API_API_VERSIONS, 2 },
    { KR_API_CREATE_TOPICS, 3 },
    { KR_API_DELETE_TOPICS, 2 },
    { KR_API_DELETE_RECORDS, 1 },
    { KR_API_INIT_PRODUCER_ID, 1 },
    { KR_API_ADD_PARTITIONS_TO_TXN, 1 },
    { KR_API_ADD_OFFSETS_TO_TXN, 1 },
    { KR_API_END_TXN, 1 },
    { KR_API_TXN_OFFSET_COMMIT, 1 },
    { KR_API_DESCRIBE_CONFIGS, 2 },
    { KR_API_ALTER_CONFIGS, 1 },
    { KR_API_CREATE_PARTITIONS, 1 },
    { KR_API_DELETE_GROUPS, 1 },
    { KR_API_DESCRIBE_ACLS, 1 },
    { KR_API_CREATE_ACLS, 1 },
    { KR_API_DELETE_ACLS, 1 },
    { KR_API_ALTER_REPLICA_LOG_DIRS, 1 },
    { KR_API_DESCRIBE_LOG_DIRS, 1 },
    { KR_API_CREATE_DELEGATION_TOKEN, 1 },
    { KR_API_RENEW_DELEGATION_TOKEN, 1 },
    { KR_API_EXPIRE_DELEGATION_TOKEN, 1 },
    { KR_API_DESCRIBE_DELEGATION_TOKEN, 1 },
};

int16_t
kr_action_kip219_version(int16_t api_key)
{
    const struct kr_api_desc *a = kr_api_get(api_key);
    size_t i;
    int16_t v;

    if (a == NULL) {
        return INT16_MAX;
    }
    for (i = 0; i < KR_ARRAY_LEN(kr_kip219); i++) {
        if (kr_kip219[i].key == api_key) {
            return kr_kip219[i].first;
        }
    }
    for (v = a->valid.lo; v >= 0 && v <= a->valid.hi; v++) {
        uint16_t sid = kr_api_root(a, true, v);

        if (sid != KR_NO_STRUCT) {
            const struct kr_struct_desc *sd = &kr_structs[sid];
            unsigned j;

            for (j = 0; j < sd->nfields; j++) {
                const struct kr_field_desc *f = &kr_fields[sd->first_field + j];

                if ((f->flags & KR_FF_THROTTLE) && field_regular_at(f, v)) {
                    return v;
                }
            }
        }
        if (v == INT16_MAX) {
            break;
        }
    }
    return INT16_MAX;
}

/* ---- error replacement and counting ------------------------------------ */

/*
 * Visit every ErrorCode field (KR_FF_ERROR_CODE, existing at the node's
 * version) at or below n.  depth 0 is the body.  fn returns nothing;
 * the walk stops at KR_ACTION_MAX_DEPTH.
 */
typedef void kr_ec_fn(void *arg, struct kr_val *val, int depth);

static void
walk_errors(struct kr_node *n, int depth, kr_ec_fn *fn, void *arg)
{
    const struct kr_struct_desc *sd;
    unsigned i;

    if (n == NULL || n->struct_id >= kr_nstructs ||
        depth > KR_ACTION_MAX_DEPTH) {
        return;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        struct kr_val *val = &n->vals[i];

        if (!kr_vrange_has(f->versions, n->version)) {
            continue;
        }
        if (f->flags & KR_FF_ERROR_CODE) {
            fn(arg, val, depth);
        } else if (f->type == KR_T_STRUCT && !val->is_null) {
            walk_errors(val->u.node, depth + 1, fn, arg);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
                   !val->is_null && val->u.arr != NULL) {
            uint32_t j;

            for (j = 0; j < val->u.arr->n; j++) {
                walk_errors(val->u.arr->items[j].u.node, depth + 1, fn, arg);
            }
        }
    }
}

struct replace_ctx {
    int16_t error;
    bool nested;                /* pass 2: only depth > 0 */
    unsigned n;
};

static void
count_nested(void *arg, struct kr_val *val, int depth)
{
    struct replace_ctx *c = arg;

    (void)val;
    if (depth > 0) {
        c->n++;
    }
}

static void
replace_one(void *arg, struct kr_val *val, int depth)
{
    struct replace_ctx *c = arg;

    if (c->nested && depth == 0) {
        return;
    }
    val->u.i = c->error;
    c->n++;
}

/*
 * Semantics ("inject this error"): every ErrorCode of the entries the
 * response carries (topics, partitions, resources, groups...: any
 * ErrorCode below the top level), zero ones included, becomes error;
 * the top-level ErrorCode is left alone when at least one such entry
 * exists, and is the one replaced when none does (Heartbeat, a Fetch
 * v13+ response listing no partition, DescribeAcls...).
 *
 * Why not the top level too: for most APIs that have both, a top-level
 * error means "the whole request failed" and clients then ignore the
 * entries (Fetch v7+: KIP-227 says every partition got it and the client
 * resets its fetch session; ElectLeaders, AlterPartitionReassignments).
 * Partition-level errors are what brokers send in normal operation
 * (NOT_LEADER_OR_FOLLOWER...), and the path clients' retry logic is
 * built for.  Returns the number of ErrorCode fields written.
 */
unsigned
kr_action_replace_errors(struct kr_msg *rsp, int16_t error)
{
    struct replace_ctx c = { error, false, 0 };

    if (rsp == NULL || rsp->body == NULL) {
        return 0;
    }
    walk_errors(rsp->body, 0, count_nested, &c);
    c.nested = c.n > 0;
    c.n = 0;
    walk_errors(rsp->body, 0, replace_one, &c);
    return c.n;
}

#define KR_COUNT_SLOTS 256

struct count_ctx {
    struct {
        int16_t code;
        unsigned n;
    } slot[KR_COUNT_SLOTS];
    unsigned nslots;
    void (*cb)(void *arg, int16_t error, unsigned n);
    void *arg;
};

static void
count_one(void *arg, struct kr_val *val, int depth)
{
    struct count_ctx *c = arg;
    int16_t code = (int16_t)val->u.i;
    unsigned i;

    (void)depth;
    if (code == 0) {
        return;
    }
    for (i = 0; i < c->nslots; i++) {
        if (c->slot[i].code == code) {
            c->slot[i].n++;
            return;
        }
    }
    if (c->nslots < KR_COUNT_SLOTS) {
        c->slot[c->nslots].code = code;
        c->slot[c->nslots].n = 1;
        c->nslots++;
    } else {
        c->cb(c->arg, code, 1);   /* more distinct codes than slots */
    }
}

void
kr_action_count_errors(const struct kr_msg *rsp,
                       void (*cb)(void *arg, int16_t error, unsigned n),
                       void *arg)
{
    struct count_ctx c;
    unsigned i;

    if (rsp == NULL || rsp->body == NULL || cb == NULL) {
        return;
    }
    c.nslots = 0;
    c.cb = cb;
    c.arg = arg;
    /* The walk writes nothing here (count_one only reads). */
    walk_errors(rsp->body, 0, count_one, &c);
    for (i = 0; i < c.nslots; i++) {
        cb(arg, c.slot[i].code, c.slot[i].n);
    }
}

/* ---- produce policy ----------------------------------------------------- */

static const char *const kr_codec_names[] = {
    "none", "gzip", "snappy", "lz4", "zstd"
};

/* RecordBatch v2 header size (Kafka's RECORD_BATCH_OVERHEAD). */
#define KR_BATCH_OVERHEAD 61
/* Smallest magic 0 / 1 message after the offset and size (LegacyRecord). */
#define KR_MSG_V0_MIN 14
#define KR_MSG_V1_MIN 22

/*
 * Check the codec of every batch in one records slice [off, off + len).
 *
 * Batches are back to back: baseOffset int64, batchLength int32 (bytes
 * after itself), then for magic 2 partitionLeaderEpoch int32, magic int8
 * (offset 16), crc int32, attributes int16 (offset 21, compression in
 * bits 0-2).  Magic 0/1 message sets share the first 12 bytes (offset,
 * message size) and have crc int32, magic int8 (offset 16), attributes
 * int8 (offset 17, compression in bits 0-2: 0-3 as in v2).  A compressed
 * magic 0/1 set is one wrapper message whose attributes give the codec
 * of everything inside it: only that outer message is read.  Nothing is
 * decompressed.  A Produce request never ends with a partial batch
 * (unlike a Fetch response), so one is malformed (KR_EPROTO).
 */
static int
policy_records(const struct kr_rbuf *payload, uint64_t off, int32_t len,
               unsigned codec_mask, char *why, size_t whylen)
{
    uint64_t end, pos;

    if (len <= 0) {
        return KR_OK;
    }
    end = off + (uint64_t)len;
    if (end > payload->len) {
        snprintf(why, whylen, "records at %llu (%d bytes) outside the frame",
                 (unsigned long long)off, (int)len);
        return KR_EPROTO;
    }
    for (pos = off; pos < end;) {
        uint8_t h[23];
        uint64_t size;
        int32_t blen;
        int magic;
        unsigned codec;

        if (end - pos < 17 || !kr_rbuf_read(payload, pos, h, 17)) {
            snprintf(why, whylen, "truncated RecordBatch header at %llu "
                     "(%llu bytes left)", (unsigned long long)pos,
                     (unsigned long long)(end - pos));
            return KR_EPROTO;
        }
        blen = (int32_t)((uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 |
                         (uint32_t)h[10] << 8 | (uint32_t)h[11]);
        magic = (int8_t)h[16];
        if (magic == 2) {
            if (blen < KR_BATCH_OVERHEAD - 12) {
                snprintf(why, whylen, "RecordBatch at %llu: batchLength %d "
                         "below the header size", (unsigned long long)pos,
                         (int)blen);
                return KR_EPROTO;
            }
            if (end - pos < 23 || !kr_rbuf_read(payload, pos, h, 23)) {
                snprintf(why, whylen, "truncated RecordBatch header at %llu",
                         (unsigned long long)pos);
                return KR_EPROTO;
            }
            codec = h[22] & 0x07u;   /* low byte of attributes int16 */
        } else if (magic == 0 || magic == 1) {
            if (blen < (magic == 0 ? KR_MSG_V0_MIN : KR_MSG_V1_MIN)) {
                snprintf(why, whylen, "message at %llu: size %d too small "
                         "for magic %d", (unsigned long long)pos, (int)blen,
                         magic);
                return KR_EPROTO;
            }
            if (end - pos < 18 || !kr_rbuf_read(payload, pos, h, 18)) {
                snprintf(why, whylen, "truncated message header at %llu",
                         (unsigned long long)pos);
                return KR_EPROTO;
            }
            codec = h[17] & 0x07u;
        } else {
            snprintf(why, whylen, "RecordBatch at %llu: unknown magic %d",
                     (unsigned long long)pos, magic);
            return KR_EPROTO;
        }
        size = 12 + (uint64_t)blen;
        if (size > end - pos) {
            snprintf(why, whylen, "RecordBatch at %llu: batchLength %d past "
                     "the end of its records (%llu bytes left)",
                     (unsigned long long)pos, (int)blen,
                     (unsigned long long)(end - pos - 12));
            return KR_EPROTO;
        }
        if (codec > 4 || (magic < 2 && codec > 3)) {
            snprintf(why, whylen, "RecordBatch at %llu: unknown compression "
                     "type %u (magic %d)", (unsigned long long)pos, codec,
                     magic);
            return KR_EPROTO;
        }
        if (codec_mask != 0 && !(codec_mask & (1u << codec))) {
            snprintf(why, whylen, "compression %s not allowed",
                     kr_codec_names[codec]);
            return KR_ELIMIT;
        }
        pos += size;
    }
    return KR_OK;
}

int
kr_action_produce_policy(const struct kr_msg *req,
                         const struct kr_rbuf *payload,
                         unsigned acks_mask, unsigned codec_mask,
                         char *why, size_t whylen)
{
    char scratch[8];
    const struct kr_val *acks, *topics;
    uint32_t t, p;

    if (why == NULL || whylen == 0) {
        why = scratch;
        whylen = sizeof(scratch);
    }
    why[0] = '\0';
    if (req == NULL || req->body == NULL || req->dir != KR_DIR_REQUEST ||
        req->api_key != KR_API_PRODUCE) {
        snprintf(why, whylen, "not a decoded Produce request");
        return KR_EPROTO;
    }
    acks = kr_node_get_id(req->body, KR_FIELD_ACKS);
    if (acks == NULL) {
        snprintf(why, whylen, "Produce request without Acks");
        return KR_EPROTO;
    }
    if (acks_mask != 0 &&
        (acks->u.i < -1 || acks->u.i > 1 ||
         !(acks_mask & (1u << (acks->u.i + 1))))) {
        snprintf(why, whylen, "Acks %lld not allowed", (long long)acks->u.i);
        return KR_ELIMIT;
    }
    if (codec_mask == 0 || (codec_mask & 0x1fu) == 0x1fu) {
        return KR_OK;           /* every codec allowed: nothing to read */
    }
    if (payload == NULL) {
        snprintf(why, whylen, "no payload to read RecordBatch headers from");
        return KR_EPROTO;
    }
    topics = kr_node_get_id(req->body, KR_FIELD_TOPIC_DATA);
    if (topics == NULL || topics->is_null || topics->u.arr == NULL) {
        return KR_OK;
    }
    for (t = 0; t < topics->u.arr->n; t++) {
        const struct kr_node *tn = topics->u.arr->items[t].u.node;
        const struct kr_val *parts = kr_node_get_id(tn,
                                                    KR_FIELD_PARTITION_DATA);

        if (parts == NULL || parts->is_null || parts->u.arr == NULL) {
            continue;
        }
        for (p = 0; p < parts->u.arr->n; p++) {
            const struct kr_node *pn = parts->u.arr->items[p].u.node;
            const struct kr_val *rec = kr_node_get_id(pn, KR_FIELD_RECORDS);
            int rc;

            if (rec == NULL || rec->is_null) {
                continue;
            }
            rc = policy_records(payload, rec->u.rec.off, rec->u.rec.len,
                                codec_mask, why, whylen);
            if (rc != KR_OK) {
                return rc;
            }
        }
    }
    return KR_OK;
}
