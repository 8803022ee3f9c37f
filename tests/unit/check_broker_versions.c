/*
 * check_broker_versions.c - unit tests for kr_broker_versions: Kafka 4
 * recognised from ApiVersions responses (Produce's advertised 0,
 * KAFKA-18659), broker_profile and learned ranges combined, the versions
 * krelay translates up, and the outcome per request version.
 *
 * The brokers' ApiVersions v3 responses are built with the codec from
 * their JSON form, encoded, decoded strictly, and read back into clamp
 * arrays as kr_an_conn's broker_av holds them.  Their ranges are those of
 * the releases (../shared/kafka-message-schemas/README.md: 3.9.1 valid,
 * 4.x valid, Produce advertised from 0 by 4.x).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_broker_versions.h"
#include "kr_codec.h"
#include "kr_schema.h"
#include "kr_test.h"

static struct kr_arena arena;
static uint8_t *frames[8];
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

/* An ApiVersions v3 response body listing "entries" (JSON objects). */
#define AV_RSP(entries)                                                      \
    "{\"apiKey\": 18, \"apiVersion\": 3, \"header\": {\"CorrelationId\": 7}," \
    " \"body\": {\"ErrorCode\": 0, \"ThrottleTimeMs\": 0, \"ApiKeys\": ["     \
    entries "]}}"
#define E(k, lo, hi)                                                         \
    "{\"ApiKey\": " #k ", \"MinVersion\": " #lo ", \"MaxVersion\": " #hi "}"

/* Kafka 3.9.1's broker (3.9.1 validVersions). */
static const char av_39[] = AV_RSP(
    E(0, 0, 11) "," E(1, 0, 17) "," E(2, 0, 9) "," E(3, 0, 12) ","
    E(8, 0, 9) "," E(9, 0, 9) "," E(10, 0, 6) "," E(11, 0, 9) ","
    E(12, 0, 4) "," E(13, 0, 5) "," E(14, 0, 5) "," E(18, 0, 4) ","
    E(19, 0, 7) "," E(20, 0, 6) "," E(23, 0, 4) "," E(29, 0, 3) ","
    E(30, 0, 3) "," E(31, 0, 3) "," E(32, 0, 4));

/* Kafka 4.0.0's broker: the KIP-896 minima, JoinGroup 2, and Produce
   advertised from 0 although v0-2 are refused (KAFKA-18659). */
static const char av_400[] = AV_RSP(
    E(0, 0, 12) "," E(1, 4, 17) "," E(2, 1, 10) "," E(3, 0, 13) ","
    E(8, 2, 9) "," E(9, 1, 9) "," E(10, 0, 6) "," E(11, 2, 9) ","
    E(12, 0, 4) "," E(13, 0, 5) "," E(14, 0, 5) "," E(18, 0, 4) ","
    E(19, 2, 7) "," E(20, 1, 6) "," E(23, 2, 4) "," E(29, 1, 3) ","
    E(30, 1, 3) "," E(31, 1, 3) "," E(32, 1, 4));

/* Kafka 4.0.1 and later: JoinGroup from 0 again (KAFKA-19444). */
static const char av_401[] = AV_RSP(
    E(0, 0, 13) "," E(1, 4, 18) "," E(2, 1, 11) "," E(3, 0, 13) ","
    E(8, 2, 10) "," E(9, 1, 10) "," E(11, 0, 9) "," E(19, 2, 7) ","
    E(20, 1, 6) "," E(23, 2, 4) "," E(32, 1, 4));

/* A 3.x broker behind something that raised Fetch's minimum alone. */
static const char av_39_fetch4[] = AV_RSP(
    E(0, 0, 11) "," E(1, 4, 17) "," E(2, 0, 9) "," E(8, 0, 9) ","
    E(9, 0, 9) "," E(19, 0, 7) "," E(20, 0, 6));

/* A listing with a single signal API, raised (a minimal 4.x peer). */
static const char av_lone[] = AV_RSP(E(0, 0, 12) "," E(2, 1, 10));

/*
 * The response built, encoded, decoded strictly; its ApiKeys read into a
 * clamp array (kr_api_max + 1 entries, unlisted keys empty) as
 * kr_an_conn's broker_av holds them.
 */
static struct kr_clamp *
learned_from(const char *json)
{
    struct kr_clamp *c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) *
                                                    sizeof(*c));
    struct kr_msg m;
    struct kr_array *a;
    uint32_t i;
    int k;

    ck_assert_ptr_nonnull(c);
    ck_assert_uint_lt(nframes, KR_ARRAY_LEN(frames));
    frames[nframes++] = kr_test_build(&arena, json, &m);
    ck_assert_int_eq(m.api_key, KR_API_API_VERSIONS);
    ck_assert_int_eq(m.api_version, 3);
    for (k = 0; k <= kr_api_max; k++) {
        c[k] = (struct kr_clamp){ 1, 0 };
    }
    a = kr_test_fld(m.body, "ApiKeys")->u.arr;
    ck_assert_uint_gt(a->n, 0);
    for (i = 0; i < a->n; i++) {
        const struct kr_node *e = kr_test_elem(a, i);
        int64_t key = kr_test_fld(e, "ApiKey")->u.i;

        ck_assert(key >= 0 && key <= kr_api_max);
        c[key].min = (int16_t)kr_test_fld(e, "MinVersion")->u.i;
        c[key].max = (int16_t)kr_test_fld(e, "MaxVersion")->u.i;
    }
    return c;
}

/* The outcome, and *to for TRANSLATE (-1 otherwise: untouched). */
static enum kr_bv_outcome
decide(int profile, const struct kr_clamp *l, int16_t api, int16_t v,
       bool translate, int16_t *to)
{
    *to = -1;
    return kr_bv_decide(profile, l, api, v, translate, to);
}

/* A 3.9 broker: not Kafka 4, everything it lists from 0 passes. */
START_TEST(test_kafka39)
{
    const struct kr_clamp *l = learned_from(av_39);
    int16_t to;

    ck_assert(!kr_bv_is_kafka4(l));
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_PRODUCE), 0);
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_FETCH), 0);
    ck_assert_int_eq(kr_bv_min(KR_BROKER_PROFILE_LEARNED, l, KR_API_PRODUCE),
                     0);
    ck_assert_int_eq(decide(0, l, KR_API_PRODUCE, 0, true, &to), KR_BV_PASS);
    ck_assert_int_eq(decide(0, l, KR_API_FETCH, 0, false, &to), KR_BV_PASS);
    ck_assert_int_eq(decide(0, l, KR_API_JOIN_GROUP, 0, true, &to),
                     KR_BV_PASS);
    ck_assert_int_eq(to, -1);
    /* an ApiKey it does not list: unknown, forwarded */
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_DESCRIBE_LOG_DIRS), -1);
    ck_assert_int_eq(decide(0, l, KR_API_DESCRIBE_LOG_DIRS, 0, false, &to),
                     KR_BV_PASS);
}
END_TEST

/*
 * A 4.0.0 broker: recognised by its minima, so its advertised Produce 0
 * is taken as 3; the removed versions translate to the broker's minimum
 * or, without translation, are refused with the hint.
 */
START_TEST(test_kafka400)
{
    const struct kr_clamp *l = learned_from(av_400);
    int16_t to;

    ck_assert_int_eq(l[KR_API_PRODUCE].min, 0);         /* as advertised */
    ck_assert(kr_bv_is_kafka4(l));
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_PRODUCE), 3);
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_FETCH), 4);
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_JOIN_GROUP), 2);
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_METADATA), 0);

    /* Produce v0-2: translated to v3 */
    ck_assert_int_eq(decide(0, l, KR_API_PRODUCE, 2, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 3);
    ck_assert_int_eq(decide(0, l, KR_API_PRODUCE, 0, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 3);
    ck_assert_int_eq(decide(0, l, KR_API_PRODUCE, 0, false, &to),
                     KR_BV_REFUSE_OFF);
    ck_assert_int_eq(to, -1);
    ck_assert_int_eq(decide(0, l, KR_API_PRODUCE, 3, false, &to),
                     KR_BV_PASS);
    /* the others: to each broker minimum */
    ck_assert_int_eq(decide(0, l, KR_API_FETCH, 3, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 4);
    ck_assert_int_eq(decide(0, l, KR_API_FETCH, 0, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 4);
    ck_assert_int_eq(decide(0, l, KR_API_LIST_OFFSETS, 0, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 1);
    ck_assert_int_eq(decide(0, l, KR_API_OFFSET_COMMIT, 1, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 2);
    ck_assert_int_eq(decide(0, l, KR_API_JOIN_GROUP, 1, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 2);
    ck_assert_int_eq(decide(0, l, KR_API_DESCRIBE_ACLS, 0, false, &to),
                     KR_BV_REFUSE_OFF);
    /* what Kafka 4 kept */
    ck_assert_int_eq(decide(0, l, KR_API_METADATA, 0, false, &to),
                     KR_BV_PASS);
    ck_assert_int_eq(decide(0, l, KR_API_HEARTBEAT, 0, false, &to),
                     KR_BV_PASS);
}
END_TEST

/* 4.0.1+: JoinGroup v0-1 accepted again, the rest as 4.0.0. */
START_TEST(test_kafka401)
{
    const struct kr_clamp *l = learned_from(av_401);
    int16_t to;

    ck_assert(kr_bv_is_kafka4(l));
    ck_assert_int_eq(kr_bv_learned_min(l, KR_API_PRODUCE), 3);
    ck_assert_int_eq(decide(0, l, KR_API_JOIN_GROUP, 0, false, &to),
                     KR_BV_PASS);
    ck_assert_int_eq(decide(0, l, KR_API_PRODUCE, 1, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 3);
    /* but the operator says 4.0.0: the profile holds (harmless: 4.0.1
       takes v2 as well) */
    ck_assert_int_eq(decide(KR_BROKER_PROFILE_KAFKA_4_0_0, l,
                            KR_API_JOIN_GROUP, 0, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 2);
}
END_TEST

/*
 * Detection needs a majority of the signal APIs listed: one raised
 * minimum among 3.x ones is not Kafka 4 (Produce stays as advertised),
 * a listing whose only signal API is raised is.
 */
START_TEST(test_detection_rule)
{
    const struct kr_clamp *odd = learned_from(av_39_fetch4);
    const struct kr_clamp *lone = learned_from(av_lone);
    struct kr_clamp *c;
    int16_t to;
    int k;

    ck_assert(!kr_bv_is_kafka4(odd));
    ck_assert_int_eq(kr_bv_learned_min(odd, KR_API_PRODUCE), 0);
    ck_assert_int_eq(decide(0, odd, KR_API_PRODUCE, 0, false, &to),
                     KR_BV_PASS);
    /* its raised Fetch is still its own minimum */
    ck_assert_int_eq(decide(0, odd, KR_API_FETCH, 3, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 4);

    ck_assert(kr_bv_is_kafka4(lone));
    ck_assert_int_eq(kr_bv_learned_min(lone, KR_API_PRODUCE), 3);

    /* nothing listed, or nothing at all */
    ck_assert(!kr_bv_is_kafka4(NULL));
    c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    for (k = 0; k <= kr_api_max; k++) {
        c[k] = (struct kr_clamp){ 1, 0 };
    }
    ck_assert(!kr_bv_is_kafka4(c));
    c[KR_API_PRODUCE] = (struct kr_clamp){ 0, 12 };
    ck_assert(!kr_bv_is_kafka4(c));
    ck_assert_int_eq(kr_bv_learned_min(c, KR_API_PRODUCE), 0);
    /* half is not a majority */
    c[KR_API_FETCH] = (struct kr_clamp){ 4, 17 };
    c[KR_API_LIST_OFFSETS] = (struct kr_clamp){ 0, 9 };
    ck_assert(!kr_bv_is_kafka4(c));
    c[KR_API_OFFSET_COMMIT] = (struct kr_clamp){ 2, 9 };
    ck_assert(kr_bv_is_kafka4(c));
    /* a Produce minimum above 3 stays as advertised */
    c[KR_API_PRODUCE] = (struct kr_clamp){ 5, 12 };
    ck_assert_int_eq(kr_bv_learned_min(c, KR_API_PRODUCE), 5);
    ck_assert_int_eq(kr_bv_learned_min(c, -1), -1);
    ck_assert_int_eq(kr_bv_learned_min(c, (int16_t)(kr_api_max + 1)), -1);
}
END_TEST

/*
 * broker_profile: its minima alone, and with learned ranges (the higher
 * minimum wins: the profile holds, learned ranges refine it).
 */
START_TEST(test_profiles)
{
    const struct kr_clamp *l39 = learned_from(av_39);
    const struct kr_clamp *l400 = learned_from(av_400);
    const int p0 = KR_BROKER_PROFILE_KAFKA_4_0_0;
    const int p1 = KR_BROKER_PROFILE_KAFKA_4_0_1;
    int16_t to;

    ck_assert_str_eq(kr_broker_profile_name(KR_BROKER_PROFILE_LEARNED),
                     "learned");
    ck_assert_str_eq(kr_broker_profile_name(p0), "kafka-4.0.0");
    ck_assert_str_eq(kr_broker_profile_name(p1), "kafka-4.0.1+");
    ck_assert_str_eq(kr_broker_profile_name(7), "?");

    ck_assert_int_eq(kr_bv_profile_min(p0, KR_API_PRODUCE), 3);
    ck_assert_int_eq(kr_bv_profile_min(p1, KR_API_PRODUCE), 3);
    ck_assert_int_eq(kr_bv_profile_min(p0, KR_API_FETCH), 4);
    ck_assert_int_eq(kr_bv_profile_min(p0, KR_API_JOIN_GROUP), 2);
    ck_assert_int_eq(kr_bv_profile_min(p1, KR_API_JOIN_GROUP), 0);
    ck_assert_int_eq(kr_bv_profile_min(p1, KR_API_METADATA), 0);
    ck_assert_int_eq(kr_bv_profile_min(p1, KR_API_LIST_OFFSETS), 1);
    ck_assert_int_eq(kr_bv_profile_min(p1, KR_API_DESCRIBE_CONFIGS), 1);
    ck_assert_int_eq(kr_bv_profile_min(KR_BROKER_PROFILE_LEARNED,
                                       KR_API_FETCH), -1);
    ck_assert_int_eq(kr_bv_profile_min(p1, KR_API_LEADER_AND_ISR), -1);
    ck_assert_int_eq(kr_bv_profile_min(p1, -3), -1);

    /* no ApiVersions answer seen: the profile decides */
    ck_assert_int_eq(decide(p0, NULL, KR_API_PRODUCE, 2, true, &to),
                     KR_BV_TRANSLATE);
    ck_assert_int_eq(to, 3);
    ck_assert_int_eq(decide(p1, NULL, KR_API_JOIN_GROUP, 1, false, &to),
                     KR_BV_PASS);
    ck_assert_int_eq(decide(p0, NULL, KR_API_JOIN_GROUP, 1, false, &to),
                     KR_BV_REFUSE_OFF);
    /* neither: unknown, forwarded */
    ck_assert_int_eq(kr_bv_min(0, NULL, KR_API_FETCH), -1);
    ck_assert_int_eq(decide(0, NULL, KR_API_FETCH, 0, false, &to),
                     KR_BV_PASS);
    /* the profile holds over a 3.9 answer ... */
    ck_assert_int_eq(kr_bv_min(p1, l39, KR_API_FETCH), 4);
    ck_assert_int_eq(kr_bv_min(p1, l39, KR_API_PRODUCE), 3);
    /* ... and learned ranges refine it where narrower */
    ck_assert_int_eq(kr_bv_min(p1, l400, KR_API_JOIN_GROUP), 2);
    ck_assert_int_eq(kr_bv_min(p0, l400, KR_API_JOIN_GROUP), 2);
}
END_TEST

/* The versions krelay translates up, and the advertised table. */
START_TEST(test_legacy_ranges)
{
    static const struct {
        int16_t api, lo, hi;
    } want[] = {
        { KR_API_PRODUCE, 0, 2 },
        { KR_API_FETCH, 0, 3 },
        { KR_API_LIST_OFFSETS, 0, 0 },
        { KR_API_OFFSET_COMMIT, 0, 1 },
        { KR_API_OFFSET_FETCH, 0, 0 },
        { KR_API_JOIN_GROUP, 0, 1 },
        { KR_API_CREATE_TOPICS, 0, 1 },
        { KR_API_DELETE_TOPICS, 0, 0 },
        { KR_API_OFFSET_FOR_LEADER_EPOCH, 0, 1 },
        { KR_API_DESCRIBE_ACLS, 0, 0 },
        { KR_API_CREATE_ACLS, 0, 0 },
        { KR_API_DELETE_ACLS, 0, 0 },
        { KR_API_DESCRIBE_CONFIGS, 0, 0 },
    };
    const struct kr_clamp *t = kr_bv_legacy_ranges();
    unsigned n = 0;
    size_t i;
    int k;

    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(kr_bv_legacy_ranges(), t);
    ck_assert_int_lt(kr_api_max, 512);
    for (i = 0; i < KR_ARRAY_LEN(want); i++) {
        int16_t lo = -1, hi = -1;

        ck_assert_msg(kr_bv_legacy_range(want[i].api, &lo, &hi), "api %d",
                      want[i].api);
        ck_assert_int_eq(lo, want[i].lo);
        ck_assert_int_eq(hi, want[i].hi);
        ck_assert_int_eq(t[want[i].api].min, want[i].lo);
        ck_assert_int_eq(t[want[i].api].max, want[i].hi);
    }
    for (k = 0; k <= kr_api_max; k++) {
        int16_t lo = 42, hi = 42;

        if (kr_bv_legacy_range((int16_t)k, &lo, &hi)) {
            n++;
            ck_assert_int_le(t[k].min, t[k].max);
        } else {
            ck_assert_int_eq(lo, 42);
            ck_assert_int_gt(t[k].min, t[k].max);
        }
    }
    ck_assert_uint_eq(n, KR_ARRAY_LEN(want));
    /* Kafka 4 kept these, or removed versions krelay does not translate */
    ck_assert(!kr_bv_legacy_range(KR_API_METADATA, &(int16_t){ 0 },
                                  &(int16_t){ 0 }));
    ck_assert(!kr_bv_legacy_range(KR_API_DESCRIBE_LOG_DIRS, &(int16_t){ 0 },
                                  &(int16_t){ 0 }));
    ck_assert(!kr_bv_legacy_range(-1, &(int16_t){ 0 }, &(int16_t){ 0 }));
}
END_TEST

/*
 * REFUSE: below a minimum translation does not reach (a gap between the
 * translated versions and the broker's minimum), or a removed version
 * krelay does not translate.
 */
START_TEST(test_refuse)
{
    struct kr_clamp *c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) *
                                                    sizeof(*c));
    int16_t to;
    int k;

    ck_assert_ptr_nonnull(c);
    for (k = 0; k <= kr_api_max; k++) {
        c[k] = (struct kr_clamp){ 1, 0 };
    }
    c[KR_API_FETCH] = (struct kr_clamp){ 5, 17 };
    c[KR_API_DESCRIBE_LOG_DIRS] = (struct kr_clamp){ 1, 4 };
    ck_assert_int_eq(decide(0, c, KR_API_FETCH, 3, true, &to), KR_BV_REFUSE);
    ck_assert_int_eq(decide(0, c, KR_API_FETCH, 4, true, &to), KR_BV_REFUSE);
    ck_assert_int_eq(to, -1);
    ck_assert_int_eq(decide(0, c, KR_API_FETCH, 5, false, &to), KR_BV_PASS);
    ck_assert_int_eq(decide(0, c, KR_API_DESCRIBE_LOG_DIRS, 0, true, &to),
                     KR_BV_REFUSE);
    /* a NULL to is fine */
    c[KR_API_FETCH] = (struct kr_clamp){ 4, 17 };
    ck_assert_int_eq(kr_bv_decide(0, c, KR_API_FETCH, 1, true, NULL),
                     KR_BV_TRANSLATE);

    ck_assert_str_eq(kr_bv_outcome_name(KR_BV_PASS), "pass");
    ck_assert_str_eq(kr_bv_outcome_name(KR_BV_TRANSLATE), "translate");
    ck_assert_str_eq(kr_bv_outcome_name(KR_BV_REFUSE_OFF),
                     "refuse (translate_legacy off)");
    ck_assert_str_eq(kr_bv_outcome_name(KR_BV_REFUSE), "refuse");
}
END_TEST

/* A range source such as kr_upstream_api_range: Fetch and Produce. */
static bool
two_ranges(void *arg, int16_t api, int16_t *min, int16_t *max)
{
    int *calls = arg;

    (*calls)++;
    if (api == KR_API_FETCH) {
        *min = 4;
        *max = 17;
        return true;
    }
    if (api == KR_API_PRODUCE) {
        *min = 0;
        *max = 12;
        return true;
    }
    return false;
}

START_TEST(test_fill)
{
    struct kr_clamp *c = kr_arena_alloc(&arena, ((size_t)kr_api_max + 1) *
                                                    sizeof(*c));
    int calls = 0, k;

    ck_assert_ptr_nonnull(c);
    memset(c, 0, ((size_t)kr_api_max + 1) * sizeof(*c));
    ck_assert_uint_eq(kr_bv_fill(c, two_ranges, &calls), 2);
    ck_assert_int_eq(calls, kr_api_max + 1);
    for (k = 0; k <= kr_api_max; k++) {
        if (k == KR_API_FETCH) {
            ck_assert(c[k].min == 4 && c[k].max == 17);
        } else if (k == KR_API_PRODUCE) {
            ck_assert(c[k].min == 0 && c[k].max == 12);
        } else {
            ck_assert_int_gt(c[k].min, c[k].max);
        }
    }
    /* one signal API, raised: Kafka 4, Produce 3 */
    ck_assert_int_eq(kr_bv_learned_min(c, KR_API_PRODUCE), 3);
    ck_assert_uint_eq(kr_bv_fill(c, NULL, NULL), 0);
    ck_assert_int_eq(kr_bv_learned_min(c, KR_API_FETCH), -1);
}
END_TEST

static Suite *
broker_versions_suite(void)
{
    Suite *s = suite_create("broker_versions");
    TCase *tc = tcase_create("broker_versions");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_kafka39);
    tcase_add_test(tc, test_kafka400);
    tcase_add_test(tc, test_kafka401);
    tcase_add_test(tc, test_detection_rule);
    tcase_add_test(tc, test_profiles);
    tcase_add_test(tc, test_legacy_ranges);
    tcase_add_test(tc, test_refuse);
    tcase_add_test(tc, test_fill);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(broker_versions_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
