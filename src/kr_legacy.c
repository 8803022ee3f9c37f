/*
 * kr_legacy.c - legacy translation (issue 10): requests of KIP-896's
 * removed versions up to a version the broker accepts, responses back.
 *
 * Each translation is kr_translate_msg (Kafka's field-by-name rule) with,
 * around it, the per-API mappings below where that rule keeps a value
 * that means something else at the new version, fails on a field with
 * no successor, or cannot build the old shape (ListOffsets v0).  Sources
 * are the schemas (../shared/kafka-message-schemas, 3.9.1 and 4.3.1:
 * their version comments) and Kafka's broker code of the releases that
 * still served the old versions, cited where used.
 *
 * Pure: decoded trees in, decoded trees out; records values are carried
 * as they are (the caller converts them, kr_records.h).
 */
#include "config.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_field_ids.h"
#include "kr_kerr.h"
#include "kr_legacy.h"
#include "kr_schema.h"
#include "kr_translate.h"

#define LG_MAX_DEPTH 32

/*
 * ConfigSource DEFAULT_CONFIG (DescribeConfigsResponse.ConfigSource,
 * Kafka 1.1+): the id a v1+ response gives a config at its default.
 */
#define LG_CONFIG_SOURCE_DEFAULT 5
/* PatternType LITERAL (org.apache.kafka.common.resource.PatternType). */
#define LG_PATTERN_LITERAL 3

/* ---- what is translated ------------------------------------------------- */

/*
 * (api, client versions) -> the upstream versions this module takes.
 * The lower ends are Kafka 4's minima (KIP-896; 4.0.0's JoinGroup 2);
 * the upper ends are explained in kr_legacy.h.
 */
struct lg_range {
    int16_t api;
    int16_t from_lo, from_hi;
    int16_t to_lo, to_hi;
};

static const struct lg_range lg_ranges[] = {
    { KR_API_PRODUCE, 0, 2, 3, 12 },
    { KR_API_FETCH, 0, 3, 4, 12 },
    { KR_API_LIST_OFFSETS, 0, 0, 1, 9 },
    { KR_API_OFFSET_COMMIT, 0, 1, 2, 8 },
    { KR_API_OFFSET_FETCH, 0, 0, 1, 7 },
    { KR_API_JOIN_GROUP, 0, 1, 2, 3 },
    { KR_API_CREATE_TOPICS, 0, 1, 2, 7 },
    { KR_API_DELETE_TOPICS, 0, 0, 1, 5 },
    { KR_API_OFFSET_FOR_LEADER_EPOCH, 0, 1, 2, 4 },
    { KR_API_DESCRIBE_CONFIGS, 0, 0, 1, 4 },
    { KR_API_DESCRIBE_ACLS, 0, 0, 1, 3 },
    { KR_API_CREATE_ACLS, 0, 0, 1, 3 },
    { KR_API_DELETE_ACLS, 0, 0, 1, 3 },
};

/* The row of api, or NULL. */
static const struct lg_range *
lg_range_of(int16_t api)
{
    size_t i;

    for (i = 0; i < sizeof(lg_ranges) / sizeof(lg_ranges[0]); i++) {
        if (lg_ranges[i].api == api) {
            return &lg_ranges[i];
        }
    }
    return NULL;
}

bool
kr_legacy_translates(int16_t api, int16_t from, int16_t to)
{
    const struct lg_range *r = lg_range_of(api);

    return r != NULL && from >= r->from_lo && from <= r->from_hi &&
           to >= r->to_lo && to <= r->to_hi;
}

int16_t
kr_legacy_pick(int16_t api, int16_t from, int16_t bmin, int16_t bmax)
{
    int16_t v;

    if (from >= bmin && from <= bmax) {
        return -1;
    }
    for (v = bmin < 0 ? 0 : bmin; v <= bmax && v < KR_V_MAX; v++) {
        if (kr_legacy_translates(api, from, v)) {
            return v;
        }
    }
    return -1;
}

const char *
kr_legacy_caveat(int16_t api, int16_t from)
{
    if (lg_range_of(api) == NULL || from < lg_range_of(api)->from_lo ||
        from > lg_range_of(api)->from_hi) {
        return NULL;            /* not a version this module translates */
    }
    switch (api) {
    case KR_API_OFFSET_COMMIT:
        if (from == 0) {
            return "OffsetCommit v0 offsets were kept in ZooKeeper; the "
                   "translated commit stores them in Kafka (the group's "
                   "ZooKeeper offsets are not migrated), as a standalone "
                   "commit (generation -1): a group with members refuses "
                   "it";
        }
        return "OffsetCommit v1's per-partition CommitTimestamp has no "
               "successor: dropped, the broker's default retention applies";
    case KR_API_OFFSET_FETCH:
        return "OffsetFetch v0 read offsets from ZooKeeper; the translated "
               "fetch reads the offsets Kafka stores";
    case KR_API_LIST_OFFSETS:
        return "ListOffsets v0 answers at most one offset per partition "
               "(the v1 Offset), not a list of segment offsets; a "
               "timestamp finds the first offset at or after it, not the "
               "start of the segment before it";
    default:
        return NULL;
    }
}

/* ---- the error-code table ----------------------------------------------- */

/*
 * A broker error code that a client of api at version <= client_max does
 * not know (or did not get from brokers of its time), and the code it gets
 * instead.  api -1: every API this module translates.
 *
 * UNSUPPORTED_VERSION (35) is kept: 0.8/0.9 clients do not know it and
 * read it as an unknown (non-retriable) error, which is the truth (the
 * version is not supported); krelay's log line is the signal (issue 10).
 */
struct lg_err_row {
    int16_t api;
    int16_t client_max;
    int16_t code;
    int16_t to;
    const char *source;
};

static const struct lg_err_row lg_errors[] = {
    /* Produce request v4 "the requester must be prepared to handle a
       KAFKA_STORAGE_ERROR" (ProduceRequest.json); Kafka 1.0-2.x's
       ProduceResponse.toStruct: "converting the KafkaStorageException to
       NotLeaderForPartitionException in the response if ProduceRequest
       version <= 3". */
    { KR_API_PRODUCE, 3, KR_KERR_KAFKA_STORAGE_ERROR,
      KR_KERR_NOT_LEADER_OR_FOLLOWER, "ProduceResponse.toStruct (<= 3)" },
    /* Kafka's KafkaApis.handleFetchRequest, maybeDownConvertStorageError:
       "if FetchRequest version <= 5" (FetchResponse.json: "Starting in
       version 6, we may return KAFKA_STORAGE_ERROR"). */
    { KR_API_FETCH, 5, KR_KERR_KAFKA_STORAGE_ERROR,
      KR_KERR_NOT_LEADER_OR_FOLLOWER,
      "KafkaApis maybeDownConvertStorageError (<= 5)" },
    /* KafkaApis/ReplicaManager fetchOffsets: "Only V5 and newer
       ListOffset calls should get OFFSET_NOT_AVAILABLE", older ones
       LEADER_NOT_AVAILABLE (ListOffsetsResponse.json: "Version 5 adds a
       new error code, OFFSET_NOT_AVAILABLE"). */
    { KR_API_LIST_OFFSETS, 4, KR_KERR_OFFSET_NOT_AVAILABLE,
      KR_KERR_LEADER_NOT_AVAILABLE, "ReplicaManager fetchOffsets (< 5)" },
    /* KIP-467 (Kafka 2.4, Produce v8) added INVALID_RECORD; before it the
       broker's InvalidRecordException was a CorruptRecordException and
       went out as CORRUPT_MESSAGE (Errors.forException). */
    { KR_API_PRODUCE, 7, KR_KERR_INVALID_RECORD, KR_KERR_CORRUPT_MESSAGE,
      "KIP-467: InvalidRecordException was CORRUPT_MESSAGE" },
    /* UNSUPPORTED_COMPRESSION_TYPE came with KIP-110 (Kafka 2.1, zstd,
       Produce v7): ProduceRequest.validateRecords answers it to a Produce
       v3-6 with zstd, so clients from Kafka 0.11 on met it.  A Produce
       v0-2 client (message format magic 0/1) never did: Kafka 0.10's
       ByteBufferMessageSet.validateMessagesAndAssignOffsets refused a
       message set whose compression it would not take ("Compressed outer
       message should not have an inner message with a compression
       attribute set") with kafka.message.InvalidMessageException, a
       CorruptRecordException (InvalidMessageException.scala), which went
       out as CORRUPT_MESSAGE.  krelay's own answer to a codec refused
       (allowed_compression) gets the same. */
    { KR_API_PRODUCE, 2, KR_KERR_UNSUPPORTED_COMPRESSION_TYPE,
      KR_KERR_CORRUPT_MESSAGE,
      "KIP-110: UNSUPPORTED_COMPRESSION_TYPE is Produce v3+'s; v0-2 "
      "brokers refused a codec as CORRUPT_MESSAGE" },
    /* KIP-516 (TopicIds): a client naming topics knows no
       UNKNOWN_TOPIC_ID; brokers answer names with
       UNKNOWN_TOPIC_OR_PARTITION. */
    { -1, KR_V_MAX, KR_KERR_UNKNOWN_TOPIC_ID,
      KR_KERR_UNKNOWN_TOPIC_OR_PARTITION, "KIP-516" },
    /* KIP-320: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH answer a
       CurrentLeaderEpoch, which translated requests send as -1 (no
       check); should one come anyway, the old client's equivalent is
       "refresh metadata and retry". */
    { -1, KR_V_MAX, KR_KERR_FENCED_LEADER_EPOCH,
      KR_KERR_NOT_LEADER_OR_FOLLOWER, "KIP-320" },
    { -1, KR_V_MAX, KR_KERR_UNKNOWN_LEADER_EPOCH,
      KR_KERR_NOT_LEADER_OR_FOLLOWER, "KIP-320" },
};

int16_t
kr_legacy_error(int16_t api, int16_t client_version, int16_t code)
{
    size_t i;

    if (code == KR_KERR_NONE) {
        return code;
    }
    for (i = 0; i < sizeof(lg_errors) / sizeof(lg_errors[0]); i++) {
        const struct lg_err_row *r = &lg_errors[i];

        if (r->code == code && (r->api == api || r->api == -1) &&
            client_version <= r->client_max) {
            return r->to;
        }
    }
    return code;
}

/* ---- helpers ------------------------------------------------------------ */

static int lg_err(struct kr_codec_err *err, int status, const char *path,
                  const char *fmt, ...) KR_PRINTF(4, 5);

static int
lg_err(struct kr_codec_err *err, int status, const char *path,
       const char *fmt, ...)
{
    va_list ap;

    err->status = status;
    err->offset = 0;
    snprintf(err->path, sizeof(err->path), "%s", path != NULL ? path : "");
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return status;
}

/* The array field id of n, or NULL (absent, null, not an array). */
static struct kr_array *
lg_arr(const struct kr_node *n, enum kr_field_id id)
{
    struct kr_val *v = kr_node_get_id(n, id);

    if (v == NULL || v->is_null || v->u.arr == NULL) {
        return NULL;
    }
    return v->u.arr;
}

/* Element i of a struct array (NULL for a null element). */
static struct kr_node *
lg_elem(const struct kr_array *a, uint32_t i)
{
    if (a->elem_type != KR_T_STRUCT || a->items[i].is_null) {
        return NULL;
    }
    return a->items[i].u.node;
}

/* a's items rotated left by k (k < a->n): three reversals, in place. */
static void
lg_rotate(struct kr_array *a, uint32_t k)
{
    uint32_t lo, hi, part;
    struct kr_val t;

    if (k == 0) {
        return;
    }
    for (part = 0; part < 3; part++) {
        lo = part == 1 ? k : 0;
        hi = part == 0 ? k : a->n;
        for (; hi > lo + 1; lo++, hi--) {
            t = a->items[lo];
            a->items[lo] = a->items[hi - 1];
            a->items[hi - 1] = t;
        }
    }
}

/* qsort: topics by name (bytes, then length), absent names first. */
static int
lg_topic_cmp(const void *a, const void *b)
{
    const struct kr_val *x = a, *y = b;
    const struct kr_val *nx = x->is_null || x->u.node == NULL
                                  ? NULL
                                  : kr_node_get_id(x->u.node, KR_FIELD_TOPIC);
    const struct kr_val *ny = y->is_null || y->u.node == NULL
                                  ? NULL
                                  : kr_node_get_id(y->u.node, KR_FIELD_TOPIC);
    size_t lx, ly;
    int c;

    if (nx == NULL || ny == NULL) {
        return (nx != NULL) - (ny != NULL);
    }
    lx = (size_t)(nx->u.s.len > 0 ? nx->u.s.len : 0);
    ly = (size_t)(ny->u.s.len > 0 ? ny->u.s.len : 0);
    c = lx > 0 && ly > 0 ? memcmp(nx->u.s.p, ny->u.s.p, lx < ly ? lx : ly)
                         : 0;
    return c != 0 ? c : (lx > ly) - (lx < ly);
}

/* qsort: partitions by index, absent ones first. */
static int
lg_part_cmp(const void *a, const void *b)
{
    const struct kr_val *x = a, *y = b;
    const struct kr_val *px = x->is_null || x->u.node == NULL
                                  ? NULL
                                  : kr_node_get_id(x->u.node,
                                                   KR_FIELD_PARTITION);
    const struct kr_val *py = y->is_null || y->u.node == NULL
                                  ? NULL
                                  : kr_node_get_id(y->u.node,
                                                   KR_FIELD_PARTITION);

    if (px == NULL || py == NULL) {
        return (px != NULL) - (py != NULL);
    }
    return (px->u.i > py->u.i) - (px->u.i < py->u.i);
}

void
kr_legacy_fetch_rotate(struct kr_node *body, uint32_t turn)
{
    struct kr_array *topics = lg_arr(body, KR_FIELD_TOPICS);
    uint32_t t;

    if (topics == NULL || topics->n == 0 ||
        topics->elem_type != KR_T_STRUCT) {
        return;
    }
    /* the client's own order (librdkafka rotates its partitions too)
       replaced by one of krelay's: a rotation of both would skip
       partitions */
    qsort(topics->items, topics->n, sizeof(topics->items[0]), lg_topic_cmp);
    lg_rotate(topics, turn % topics->n);
    for (t = 0; t < topics->n; t++) {
        struct kr_node *tn = lg_elem(topics, t);
        struct kr_array *parts = tn != NULL
                                     ? lg_arr(tn, KR_FIELD_PARTITIONS)
                                     : NULL;

        if (parts != NULL && parts->n > 0 &&
            parts->elem_type == KR_T_STRUCT) {
            qsort(parts->items, parts->n, sizeof(parts->items[0]),
                  lg_part_cmp);
            lg_rotate(parts, turn % parts->n);
        }
    }
}

/* Does field id of n exist at n's version? */
static struct kr_val *
lg_field_at(const struct kr_node *n, enum kr_field_id id)
{
    int idx;

    if (n == NULL) {
        return NULL;
    }
    idx = kr_struct_field_index_id(n->struct_id, id);
    if (idx < 0 ||
        !kr_vrange_has(kr_node_field(n, (unsigned)idx)->versions,
                       n->version)) {
        return NULL;
    }
    return &n->vals[idx];
}

/* Set integer field id of n to x where it exists at n's version. */
static void
lg_set_int(struct kr_node *n, enum kr_field_id id, int64_t x)
{
    struct kr_val *v = lg_field_at(n, id);

    if (v != NULL) {
        v->u.i = x;
        v->is_null = 0;
        v->present = 1;
    }
}

/* Integer field id of n, or dflt when it does not exist at n's version. */
static int64_t
lg_get_int(const struct kr_node *n, enum kr_field_id id, int64_t dflt)
{
    const struct kr_val *v = lg_field_at(n, id);

    return v != NULL ? v->u.i : dflt;
}

/* A pair of array ids: topics then partitions (which per API). */
struct lg_tp {
    enum kr_field_id topics, parts;
};

/* Calls fn on every partition node of body (topics[].parts[]). */
typedef int (*lg_part_fn)(struct kr_node *part, uint32_t t, uint32_t p,
                          void *ctx);

static int
lg_each_part(struct kr_node *body, struct lg_tp ids, lg_part_fn fn,
             void *ctx)
{
    struct kr_array *topics = lg_arr(body, ids.topics);
    uint32_t t, p;
    int rc;

    if (topics == NULL) {
        return KR_OK;
    }
    for (t = 0; t < topics->n; t++) {
        struct kr_node *tn = lg_elem(topics, t);
        struct kr_array *parts = tn != NULL ? lg_arr(tn, ids.parts) : NULL;

        if (parts == NULL) {
            continue;
        }
        for (p = 0; p < parts->n; p++) {
            struct kr_node *pn = lg_elem(parts, p);

            if (pn != NULL && (rc = fn(pn, t, p, ctx)) != KR_OK) {
                return rc;
            }
        }
    }
    return KR_OK;
}

/* Every ErrorCode of the tree below n through the table. */
static void
lg_map_errors(struct kr_node *n, int16_t api, int16_t v, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;
    uint32_t k;

    if (n == NULL || depth > LG_MAX_DEPTH || n->struct_id >= kr_nstructs) {
        return;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];
        struct kr_val *val = &n->vals[i];

        if (!kr_vrange_has(f->versions, v) || val->is_null) {
            continue;
        }
        if ((f->flags & KR_FF_ERROR_CODE) && f->type == KR_T_INT16) {
            val->u.i = kr_legacy_error(api, v, (int16_t)val->u.i);
        } else if (f->type == KR_T_STRUCT) {
            lg_map_errors(val->u.node, api, v, depth + 1);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
                   val->u.arr != NULL) {
            for (k = 0; k < val->u.arr->n; k++) {
                if (!val->u.arr->items[k].is_null) {
                    lg_map_errors(val->u.arr->items[k].u.node, api, v,
                                  depth + 1);
                }
            }
        }
    }
}

static void
lg_err_clear(struct kr_codec_err *err)
{
    err->status = KR_OK;
    err->offset = 0;
    err->msg[0] = '\0';
    err->path[0] = '\0';
}

/* ---- requests up -------------------------------------------------------- */

/* ListOffsets v0: MaxNumOffsets, one value for the whole request. */
struct lg_lo_req {
    struct kr_legacy_memo *memo;
    bool seen;
    struct kr_codec_err *err;
};

static int
lo_req_part(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    struct lg_lo_req *c = ctx;
    struct kr_val *v = lg_field_at(part, KR_FIELD_MAX_NUM_OFFSETS);
    int64_t x;
    char path[96];

    if (v == NULL) {
        return KR_OK;
    }
    /* Old brokers took offsets.take(maxNumOffsets): none below 1. */
    x = v->u.i < 0 ? 0 : v->u.i;
    if (!c->seen) {
        c->memo->max_num_offsets = (int32_t)x;
        c->seen = true;
    } else if (c->memo->max_num_offsets != x) {
        snprintf(path, sizeof(path), "Topics[%u].Partitions[%u]."
                 "MaxNumOffsets", t, p);
        return lg_err(c->err, KR_EUNSUPPORTED, path,
                      "partitions ask different MaxNumOffsets (%d, %lld)",
                      c->memo->max_num_offsets, (long long)x);
    }
    /* The schema's default: the generic rule drops it silently. */
    v->u.i = 1;
    return KR_OK;
}

/* OffsetCommit v1: CommitTimestamp has no successor (see caveat). */
static int
oc_req_part(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    (void)t;
    (void)p;
    (void)ctx;
    lg_set_int(part, KR_FIELD_COMMIT_TIMESTAMP, -1);
    return KR_OK;
}

/* Values that keep the old meaning, set on the request at `to`. */
static int
req_post(struct kr_msg *m, int16_t from, int64_t session_timeout)
{
    struct kr_node *b = m->body;
    struct kr_array *a;
    uint32_t i;

    switch (m->api_key) {
    case KR_API_PRODUCE:
        /* v3: "The transactional ID, or null if the producer is not
           transactional" (ProduceRequest.json): v0-2 had none.  The
           default already is null; nothing else changes. */
        break;
    case KR_API_FETCH:
        /* Fetch v0-2 had no MaxBytes (v3, KIP-74): the response was
           bounded by the partitions' limits only, so the largest.  v4's
           IsolationLevel 0 is READ_UNCOMMITTED, what v0-3 read (KIP-98).
           v7's SessionId 0 with SessionEpoch -1 is a full fetch outside
           any session (KIP-227, FetchMetadata.LEGACY).  The client's
           ReplicaId (-1 for a consumer) is kept. */
        if (from < 3) {
            lg_set_int(b, KR_FIELD_MAX_BYTES, INT32_MAX);
        }
        lg_set_int(b, KR_FIELD_ISOLATION_LEVEL, 0);
        lg_set_int(b, KR_FIELD_SESSION_ID, 0);
        lg_set_int(b, KR_FIELD_SESSION_EPOCH, -1);
        break;
    case KR_API_LIST_OFFSETS:
        /* v2's IsolationLevel 0 READ_UNCOMMITTED (KIP-98): v0's answer for
           the latest offset was the high watermark for consumers. */
        lg_set_int(b, KR_FIELD_ISOLATION_LEVEL, 0);
        break;
    case KR_API_OFFSET_COMMIT:
        /* v0 had no generation: Kafka 0.8.2-2.x's KafkaApis committed a
           v0 request with generation -1 and no member, the "simple"
           (standalone) commit; v2-4's RetentionTimeMs -1 is the broker's
           default retention (offsets.retention.minutes). */
        if (from == 0) {
            struct kr_val *mid = lg_field_at(b, KR_FIELD_MEMBER_ID);

            lg_set_int(b, KR_FIELD_GENERATION_ID_OR_MEMBER_EPOCH, -1);
            if (mid != NULL) {
                mid->u.s.p = (const uint8_t *)"";
                mid->u.s.len = 0;
                mid->is_null = 0;
            }
        }
        lg_set_int(b, KR_FIELD_RETENTION_TIME_MS, -1);
        break;
    case KR_API_JOIN_GROUP:
        /* JoinGroupRequest (Kafka 0.10.1-2.x): "v0 had no rebalance
           timeout but used session timeout implicitly". */
        if (from == 0) {
            lg_set_int(b, KR_FIELD_REBALANCE_TIMEOUT_MS, session_timeout);
        }
        break;
    case KR_API_DESCRIBE_CONFIGS:
        /* v1's IncludeSynonyms false: v0 had no synonyms (KIP-226). */
        lg_set_int(b, KR_FIELD_INCLUDE_SYNONYMS, 0);
        break;
    case KR_API_DESCRIBE_ACLS:
        /* v0 predates KIP-290's pattern types: every ACL was LITERAL. */
        lg_set_int(b, KR_FIELD_PATTERN_TYPE_FILTER, LG_PATTERN_LITERAL);
        break;
    case KR_API_DELETE_ACLS:
        a = lg_arr(b, KR_FIELD_FILTERS);
        for (i = 0; a != NULL && i < a->n; i++) {
            lg_set_int(lg_elem(a, i), KR_FIELD_PATTERN_TYPE_FILTER,
                       LG_PATTERN_LITERAL);
        }
        break;
    case KR_API_CREATE_ACLS:
        a = lg_arr(b, KR_FIELD_CREATIONS);
        for (i = 0; a != NULL && i < a->n; i++) {
            lg_set_int(lg_elem(a, i), KR_FIELD_RESOURCE_PATTERN_TYPE,
                       LG_PATTERN_LITERAL);
        }
        break;
    case KR_API_OFFSET_FOR_LEADER_EPOCH:
        /* v2's CurrentLeaderEpoch -1: no fencing check, as v0-1.  v3's
           ReplicaId keeps its default (-2), which is what Kafka reads
           for a v0-2 request that has no such field. */
        {
            static const struct lg_tp ids = { KR_FIELD_TOPICS,
                                              KR_FIELD_PARTITIONS };
            struct kr_array *topics = lg_arr(b, ids.topics);
            uint32_t t, p;

            for (t = 0; topics != NULL && t < topics->n; t++) {
                struct kr_array *parts = lg_elem(topics, t) != NULL
                    ? lg_arr(lg_elem(topics, t), ids.parts) : NULL;

                for (p = 0; parts != NULL && p < parts->n; p++) {
                    lg_set_int(lg_elem(parts, p),
                               KR_FIELD_CURRENT_LEADER_EPOCH, -1);
                }
            }
        }
        break;
    default:
        /* CreateTopics v2 (validateOnly false for v0), DeleteTopics v1,
           OffsetFetch v1: Kafka's field-by-name rule is the mapping. */
        break;
    }
    return KR_OK;
}

int
kr_legacy_request_up(struct kr_arena *arena, struct kr_msg *m, int16_t to,
                     struct kr_legacy_memo *memo, struct kr_codec_err *err)
{
    static const struct lg_tp lo_ids = { KR_FIELD_TOPICS,
                                         KR_FIELD_PARTITIONS };
    struct kr_codec_err scratch;
    int16_t from;
    int64_t session_timeout = -1;
    int rc;

    if (err == NULL) {
        err = &scratch;
    }
    lg_err_clear(err);
    if (m == NULL || memo == NULL || m->body == NULL || m->header == NULL ||
        m->dir != KR_DIR_REQUEST) {
        return lg_err(err, KR_EPROTO, NULL, "not a decoded request");
    }
    from = m->api_version;
    if (!kr_legacy_translates(m->api_key, from, to)) {
        return lg_err(err, KR_EUNSUPPORTED, NULL,
                      "ApiKey %d v%d is not translated to v%d", m->api_key,
                      from, to);
    }
    memset(memo, 0, sizeof(*memo));
    memo->api_key = m->api_key;
    memo->client_version = from;
    memo->upstream_version = to;
    memo->max_num_offsets = 1;

    switch (m->api_key) {
    case KR_API_LIST_OFFSETS: {
        struct lg_lo_req c = { memo, false, err };

        rc = lg_each_part(m->body, lo_ids, lo_req_part, &c);
        if (rc != KR_OK) {
            return rc;
        }
        break;
    }
    case KR_API_OFFSET_COMMIT:
        rc = lg_each_part(m->body, lo_ids, oc_req_part, NULL);
        if (rc != KR_OK) {
            return rc;
        }
        break;
    case KR_API_JOIN_GROUP:
        session_timeout = lg_get_int(m->body, KR_FIELD_SESSION_TIMEOUT_MS,
                                     -1);
        break;
    default:
        break;
    }
    rc = kr_translate_msg(arena, m, to, err);
    if (rc != KR_OK) {
        return rc;
    }
    return req_post(m, from, session_timeout);
}

/* ---- responses down ----------------------------------------------------- */

/* ListOffsets v1+ -> v0: each partition's Offset, in tree order. */
struct lg_lo_rsp {
    int64_t *offs;
    uint32_t n, cap;
    struct kr_arena *a;
    int32_t max;
};

static int
lo_count(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    (void)part;
    (void)t;
    (void)p;
    ((struct lg_lo_rsp *)ctx)->cap++;
    return KR_OK;
}

static int
lo_take(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    struct lg_lo_rsp *c = ctx;
    int64_t off = lg_get_int(part, KR_FIELD_OFFSET, -1);

    (void)t;
    (void)p;
    if (lg_get_int(part, KR_FIELD_ERROR_CODE, 0) != 0) {
        off = -1;
    }
    c->offs[c->n++] = off;
    /* Defaults: the generic rule drops them (not in v0). */
    lg_set_int(part, KR_FIELD_OFFSET, -1);
    lg_set_int(part, KR_FIELD_TIMESTAMP, -1);
    lg_set_int(part, KR_FIELD_LEADER_EPOCH, -1);
    return KR_OK;
}

/*
 * v0's OldStyleOffsets: [Offset], or [] when there is none (-1, an error)
 * or the request asked for none.  Old brokers (fetchOffsetsBefore) listed
 * up to MaxNumOffsets segment offsets, newest first, the log end offset
 * first for the latest time (-1), the log start offset for the earliest
 * (-2); v1's single Offset is that list's first entry for -1 and -2.
 */
static int
lo_put(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    struct lg_lo_rsp *c = ctx;
    struct kr_val *v = lg_field_at(part, KR_FIELD_OLD_STYLE_OFFSETS);
    struct kr_array *arr;
    int64_t off;

    (void)t;
    (void)p;
    if (v == NULL || c->n >= c->cap) {
        return KR_EPROTO;
    }
    off = c->offs[c->n++];
    arr = kr_array_new(c->a, KR_T_INT64, KR_NO_STRUCT,
                       off >= 0 && c->max > 0 ? 1 : 0, part->version);
    if (arr == NULL) {
        return KR_ENOMEM;
    }
    if (arr->n == 1) {
        arr->items[0].u.i = off;
        arr->items[0].present = 1;
        arr->items[0].is_null = 0;
    }
    v->u.arr = arr;
    v->is_null = 0;
    v->present = 1;
    return KR_OK;
}

/* A top-level error (Fetch v7+, OffsetFetch v2+) into every partition. */
struct lg_top {
    int16_t code;
    uint32_t parts;
};

static int
top_put(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    struct lg_top *c = ctx;
    struct kr_val *e = lg_field_at(part, KR_FIELD_ERROR_CODE);

    (void)t;
    (void)p;
    c->parts++;
    if (e != NULL && e->u.i == 0) {
        e->u.i = c->code;
    }
    return KR_OK;
}

/*
 * The response's top-level ErrorCode, which the client's version lacks,
 * moved into its partitions (Kafka's OffsetFetchResponse for v0-1 and
 * Fetch before v7 carried such errors per partition).  With no partition
 * to carry it the client cannot be told: KR_EUNSUPPORTED.
 */
static int
top_error_down(struct kr_msg *rsp, int16_t to, struct lg_tp ids,
               struct kr_codec_err *err)
{
    struct kr_val *e = lg_field_at(rsp->body, KR_FIELD_ERROR_CODE);
    const struct kr_api_desc *ad = kr_api_get(rsp->api_key);
    uint16_t root = kr_api_root(ad, true, to);
    int idx = kr_struct_field_index_id(root, KR_FIELD_ERROR_CODE);
    struct lg_top c;

    if (e == NULL || e->u.i == 0) {
        return KR_OK;
    }
    if (idx >= 0 &&
        kr_vrange_has(kr_fields[kr_structs[root].first_field +
                                (unsigned)idx].versions, to)) {
        return KR_OK;           /* the client's version has it */
    }
    c.code = (int16_t)e->u.i;
    c.parts = 0;
    (void)lg_each_part(rsp->body, ids, top_put, &c);
    if (c.parts == 0) {
        char buf[KR_KERR_BUFLEN];

        return lg_err(err, KR_EUNSUPPORTED, "ErrorCode",
                      "top-level %s with no partition to carry it at v%d",
                      kr_kerr_format(c.code, buf, sizeof(buf)), to);
    }
    e->u.i = 0;
    return KR_OK;
}

/*
 * KIP-951's leader hints (Produce v10+, Fetch v12+: a partition's tagged
 * CurrentLeader, the response's tagged NodeEndpoints) tell a new client
 * where a partition moved; an old client learns it from Metadata after
 * NOT_LEADER_OR_FOLLOWER, as it always did.  Not on the wire for it:
 * marked absent so the generic rule skips them.
 */
static void
lg_untag(struct kr_node *n, enum kr_field_id id)
{
    struct kr_val *v = lg_field_at(n, id);
    int idx = n != NULL ? kr_struct_field_index_id(n->struct_id, id) : -1;

    if (v != NULL && idx >= 0 && kr_node_field(n, (unsigned)idx)->tag >= 0) {
        v->present = 0;
    }
}

static int
hint_drop(struct kr_node *part, uint32_t t, uint32_t p, void *ctx)
{
    (void)t;
    (void)p;
    (void)ctx;
    lg_untag(part, KR_FIELD_CURRENT_LEADER);
    return KR_OK;
}

/*
 * DescribeConfigs v1+ -> v0: IsDefault = (ConfigSource == DEFAULT_CONFIG),
 * as Kafka 1.1-2.x's DescribeConfigsResponse.toStruct wrote v0 ("IS_DEFAULT
 * ... configEntry.source == ConfigSource.DEFAULT_CONFIG").  src and dst
 * are the same response before and after translation (same order).
 */
static void
dc_is_default(const struct kr_node *src, struct kr_node *dst)
{
    struct kr_array *sr = lg_arr(src, KR_FIELD_RESULTS);
    struct kr_array *dr = lg_arr(dst, KR_FIELD_RESULTS);
    uint32_t i, j;

    for (i = 0; sr != NULL && dr != NULL && i < sr->n && i < dr->n; i++) {
        struct kr_array *sc = lg_elem(sr, i) != NULL
            ? lg_arr(lg_elem(sr, i), KR_FIELD_CONFIGS) : NULL;
        struct kr_array *dcf = lg_elem(dr, i) != NULL
            ? lg_arr(lg_elem(dr, i), KR_FIELD_CONFIGS) : NULL;

        for (j = 0; sc != NULL && dcf != NULL && j < sc->n && j < dcf->n;
             j++) {
            int64_t src_id = lg_get_int(lg_elem(sc, j),
                                        KR_FIELD_CONFIG_SOURCE, -1);

            lg_set_int(lg_elem(dcf, j), KR_FIELD_IS_DEFAULT,
                       src_id == LG_CONFIG_SOURCE_DEFAULT);
        }
    }
}

int
kr_legacy_response_down(struct kr_arena *arena, struct kr_msg *rsp,
                        int16_t to, const struct kr_legacy_memo *memo,
                        struct kr_codec_err *err)
{
    static const struct lg_tp tp = { KR_FIELD_TOPICS, KR_FIELD_PARTITIONS };
    static const struct lg_tp fetch_tp = { KR_FIELD_RESPONSES,
                                           KR_FIELD_PARTITIONS };
    static const struct lg_tp produce_tp = { KR_FIELD_RESPONSES,
                                             KR_FIELD_PARTITION_RESPONSES };
    struct kr_codec_err scratch;
    struct lg_lo_rsp lo;
    const struct kr_node *src;
    int rc;

    if (err == NULL) {
        err = &scratch;
    }
    lg_err_clear(err);
    if (rsp == NULL || memo == NULL || rsp->body == NULL ||
        rsp->header == NULL || rsp->dir != KR_DIR_RESPONSE) {
        return lg_err(err, KR_EPROTO, NULL, "not a decoded response");
    }
    if (rsp->api_key != memo->api_key ||
        rsp->api_version != memo->upstream_version ||
        to != memo->client_version) {
        return lg_err(err, KR_EPROTO, NULL,
                      "response ApiKey %d v%d -> v%d does not match the "
                      "request's memo (ApiKey %d v%d -> v%d)",
                      rsp->api_key, rsp->api_version, to, memo->api_key,
                      memo->upstream_version, memo->client_version);
    }
    if (!kr_legacy_translates(rsp->api_key, to, rsp->api_version)) {
        return lg_err(err, KR_EUNSUPPORTED, NULL,
                      "ApiKey %d v%d is not translated back to v%d",
                      rsp->api_key, rsp->api_version, to);
    }
    memset(&lo, 0, sizeof(lo));
    src = rsp->body;

    switch (rsp->api_key) {
    case KR_API_LIST_OFFSETS:
        lo.a = arena;
        lo.max = memo->max_num_offsets;
        (void)lg_each_part(rsp->body, tp, lo_count, &lo);
        if (lo.cap > 0) {
            lo.offs = kr_arena_alloc(arena, (size_t)lo.cap * sizeof(int64_t));
            if (lo.offs == NULL) {
                return lg_err(err, KR_ENOMEM, NULL, "arena exhausted");
            }
        }
        (void)lg_each_part(rsp->body, tp, lo_take, &lo);
        lo.n = 0;
        break;
    case KR_API_PRODUCE:
        (void)lg_each_part(rsp->body, produce_tp, hint_drop, NULL);
        lg_untag(rsp->body, KR_FIELD_NODE_ENDPOINTS);
        break;
    case KR_API_FETCH:
        rc = top_error_down(rsp, to, fetch_tp, err);
        if (rc != KR_OK) {
            return rc;
        }
        (void)lg_each_part(rsp->body, fetch_tp, hint_drop, NULL);
        lg_untag(rsp->body, KR_FIELD_NODE_ENDPOINTS);
        /* Requests went out sessionless (SessionId 0, SessionEpoch -1,
           KIP-227): a SessionId the broker still sends names no session
           krelay will use; v0-6 have no such field. */
        lg_set_int(rsp->body, KR_FIELD_SESSION_ID, 0);
        break;
    case KR_API_OFFSET_FETCH:
        rc = top_error_down(rsp, to, tp, err);
        if (rc != KR_OK) {
            return rc;
        }
        break;
    default:
        break;
    }

    rc = kr_translate_msg(arena, rsp, to, err);
    if (rc != KR_OK) {
        return rc;
    }

    switch (rsp->api_key) {
    case KR_API_LIST_OFFSETS:
        rc = lg_each_part(rsp->body, tp, lo_put, &lo);
        if (rc != KR_OK) {
            return lg_err(err, rc, "Topics", "OldStyleOffsets: %s",
                          rc == KR_ENOMEM ? "arena exhausted"
                                          : "partitions changed");
        }
        break;
    case KR_API_DESCRIBE_CONFIGS:
        if (to == 0) {
            dc_is_default(src, rsp->body);
        }
        break;
    default:
        break;
    }
    lg_map_errors(rsp->body, rsp->api_key, to, 0);
    return KR_OK;
}
