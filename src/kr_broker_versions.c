/*
 * kr_broker_versions.c - what the brokers of one upstream accept, and
 * what krelay translates up (include/kr_broker_versions.h).
 */
#include "kr_broker_versions.h"

#include <pthread.h>
#include <stddef.h>

#include "kr_api_keys.h"
#include "kr_common.h"
#include "kr_schema.h"

/*
 * The APIs whose removed versions krelay translates up (issue 10; the
 * KIP-896 removals of ../shared/kafka-message-schemas/README.md's "Gone in
 * 4.3.1" column that clients send, and JoinGroup v0-1 gone in 4.0.0).
 * The ranges come from the tables: 3.9.1's minimum to
 * kr_api_min_kafka4 - 1.  signal: removed in every 4.x release and
 * advertised so (kr_bv_is_kafka4); not Produce (advertised 0,
 * KAFKA-18659), not JoinGroup (0 again from 4.0.1).
 */
static const struct {
    int16_t api;
    bool signal;
} kr_bv_legacy_apis[] = {
    { KR_API_PRODUCE, false },
    { KR_API_FETCH, true },
    { KR_API_LIST_OFFSETS, true },
    { KR_API_OFFSET_COMMIT, true },
    { KR_API_OFFSET_FETCH, true },
    { KR_API_JOIN_GROUP, false },
    { KR_API_CREATE_TOPICS, true },
    { KR_API_DELETE_TOPICS, true },
    { KR_API_OFFSET_FOR_LEADER_EPOCH, true },
    { KR_API_DESCRIBE_ACLS, true },
    { KR_API_CREATE_ACLS, true },
    { KR_API_DELETE_ACLS, true },
    { KR_API_DESCRIBE_CONFIGS, true },
};

/* The lowest Produce version a Kafka 4 broker takes (KAFKA-18659). */
#define KR_BV_PRODUCE_MIN_4X 3

const char *
kr_broker_profile_name(int profile)
{
    switch (profile) {
    case KR_BROKER_PROFILE_LEARNED:
        return "learned";
    case KR_BROKER_PROFILE_KAFKA_4_0_0:
        return "kafka-4.0.0";
    case KR_BROKER_PROFILE_KAFKA_4_0_1:
        return "kafka-4.0.1+";
    default:
        return "?";
    }
}

int16_t
kr_bv_profile_min(int profile, int16_t api)
{
    const struct kr_api_desc *a = kr_api_get(api);

    if (a == NULL || a->valid_4x.lo > a->valid_4x.hi) {
        return -1;
    }
    switch (profile) {
    case KR_BROKER_PROFILE_KAFKA_4_0_0:
        return kr_api_min_kafka4(a, NULL);
    case KR_BROKER_PROFILE_KAFKA_4_0_1:
        return a->valid_4x.lo;
    default:
        return -1;
    }
}

/* learned[api] when offered. */
static bool
kr_bv_offered(const struct kr_clamp *learned, int16_t api, int16_t *min)
{
    if (learned == NULL || api < 0 || api > kr_api_max ||
        learned[api].min > learned[api].max || learned[api].min < 0) {
        return false;
    }
    *min = learned[api].min;
    return true;
}

bool
kr_bv_is_kafka4(const struct kr_clamp *learned)
{
    unsigned listed = 0, raised = 0;
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(kr_bv_legacy_apis); i++) {
        int16_t api = kr_bv_legacy_apis[i].api, min;
        int16_t k4 = kr_api_min_kafka4(kr_api_get(api), NULL);

        if (!kr_bv_legacy_apis[i].signal || k4 < 0 ||
            !kr_bv_offered(learned, api, &min)) {
            continue;
        }
        listed++;
        raised += min >= k4;
    }
    return listed > 0 && 2 * raised > listed;
}

int16_t
kr_bv_learned_min(const struct kr_clamp *learned, int16_t api)
{
    int16_t min;

    if (!kr_bv_offered(learned, api, &min)) {
        return -1;
    }
    if (api == KR_API_PRODUCE && min < KR_BV_PRODUCE_MIN_4X &&
        kr_bv_is_kafka4(learned)) {
        return KR_BV_PRODUCE_MIN_4X;
    }
    return min;
}

int16_t
kr_bv_min(int profile, const struct kr_clamp *learned, int16_t api)
{
    int16_t p = kr_bv_profile_min(profile, api);
    int16_t l = kr_bv_learned_min(learned, api);

    return p > l ? p : l;
}

bool
kr_bv_legacy_range(int16_t api, int16_t *lo, int16_t *hi)
{
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(kr_bv_legacy_apis); i++) {
        const struct kr_api_desc *a;
        int16_t k4;

        if (kr_bv_legacy_apis[i].api != api) {
            continue;
        }
        a = kr_api_get(api);
        k4 = kr_api_min_kafka4(a, NULL);
        if (a == NULL || k4 <= a->valid.lo) {
            return false;
        }
        *lo = a->valid.lo;
        *hi = (int16_t)(k4 - 1);
        return true;
    }
    return false;
}

/* Room for every ApiKey the tables may hold (int16 keys; a unit test
   checks kr_api_max < KR_BV_MAX_KEYS). */
#define KR_BV_MAX_KEYS 512

static struct kr_clamp kr_bv_table[KR_BV_MAX_KEYS];
static pthread_once_t kr_bv_table_once = PTHREAD_ONCE_INIT;

static void
kr_bv_table_build(void)
{
    int k;

    for (k = 0; k < KR_BV_MAX_KEYS; k++) {
        int16_t lo, hi;

        if (kr_bv_legacy_range((int16_t)k, &lo, &hi)) {
            kr_bv_table[k].min = lo;
            kr_bv_table[k].max = hi;
        } else {
            kr_bv_table[k].min = 1;
            kr_bv_table[k].max = 0;
        }
    }
}

const struct kr_clamp *
kr_bv_legacy_ranges(void)
{
    /* kr_api_max (92 today) < KR_BV_MAX_KEYS: check_broker_versions */
    (void)pthread_once(&kr_bv_table_once, kr_bv_table_build);
    return kr_bv_table;
}

const char *
kr_bv_outcome_name(enum kr_bv_outcome o)
{
    switch (o) {
    case KR_BV_PASS:
        return "pass";
    case KR_BV_TRANSLATE:
        return "translate";
    case KR_BV_REFUSE_OFF:
        return "refuse (translate_legacy off)";
    case KR_BV_REFUSE:
        return "refuse";
    }
    return "?";
}

enum kr_bv_outcome
kr_bv_decide(int profile, const struct kr_clamp *learned, int16_t api,
             int16_t v, bool translate, int16_t *to)
{
    int16_t min = kr_bv_min(profile, learned, api), lo, hi;

    if (min < 0 || v >= min) {
        return KR_BV_PASS;
    }
    if (!kr_bv_legacy_range(api, &lo, &hi) || v < lo || v > hi ||
        min != hi + 1) {
        return KR_BV_REFUSE;
    }
    if (!translate) {
        return KR_BV_REFUSE_OFF;
    }
    if (to != NULL) {
        *to = min;
    }
    return KR_BV_TRANSLATE;
}

unsigned
kr_bv_fill(struct kr_clamp *out,
           bool (*range)(void *arg, int16_t api, int16_t *min, int16_t *max),
           void *arg)
{
    unsigned known = 0;
    int k;

    for (k = 0; k <= kr_api_max; k++) {
        int16_t min, max;

        out[k].min = 1;
        out[k].max = 0;
        if (range != NULL && range(arg, (int16_t)k, &min, &max)) {
            out[k].min = min;
            out[k].max = max;
            known++;
        }
    }
    return known;
}
