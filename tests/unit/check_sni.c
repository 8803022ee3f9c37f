/*
 * check_sni.c - SNI routing names (kr_sni): patterns parsed and refused,
 * names routed (brokers, bootstrap, near misses, case, NodeIds outside
 * the range), the name of each NodeId written and routed back.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_sni.h"

#define PAT "broker-$(node_id).kafka.example.com"

static struct kr_sni *
mk(const char *pat, const char *boot, int32_t min, int32_t max)
{
    char err[256] = "";
    struct kr_sni *m = kr_sni_new(pat, boot, min, max, err, sizeof(err));

    ck_assert_msg(m != NULL, "%s: %s", pat, err);
    return m;
}

/* kr_sni_route on a C string; the NodeId into *id. */
static enum kr_sni_route
route(const struct kr_sni *m, const char *name, int32_t *id)
{
    return kr_sni_route(m, name, name != NULL ? strlen(name) : 0, id);
}

START_TEST(pattern_parsed)
{
    struct kr_sni *m = mk("Broker-$(node_id).Kafka.Example.COM",
                          "Kafka.Example.com", 1, 3);

    ck_assert_str_eq(m->prefix, "broker-");
    ck_assert_str_eq(m->suffix, ".kafka.example.com");
    ck_assert_uint_eq(m->prefix_len, 7);
    ck_assert_uint_eq(m->suffix_len, 18);
    ck_assert_str_eq(m->bootstrap, "kafka.example.com");
    ck_assert_int_eq(m->node_id_min, 1);
    ck_assert_int_eq(m->node_id_max, 3);
    kr_sni_free(m);
    /* the placeholder anywhere: a label of its own, first, last */
    m = mk("$(node_id).brokers.example.com", NULL, 0, 15);
    ck_assert_str_eq(m->prefix, "");
    ck_assert_ptr_null(m->bootstrap);
    kr_sni_free(m);
    m = mk("kafka-b$(node_id)", NULL, 0, 15);
    ck_assert_str_eq(m->suffix, "");
    kr_sni_free(m);
    kr_sni_free(NULL);
}
END_TEST

/* Each refused pattern, and a word of why. */
static const struct {
    const char *pat;
    const char *boot;
    int32_t min, max;
    const char *why;
} bad[] = {
    { "broker.kafka.example.com", NULL, 0, 3, "no $(node_id)" },
    { "b-$(node_id)-$(node_id).example.com", NULL, 0, 3, "twice" },
    { "b-$(nodeid).example.com", NULL, 0, 3, "no $(node_id)" },
    { "broker1$(node_id).example.com", NULL, 0, 3, "a digit next to" },
    { "broker-$(node_id)0.example.com", NULL, 0, 3, "a digit next to" },
    { "broker_$(node_id).example.com", NULL, 0, 3, "'_' at offset 6" },
    { "*.$(node_id).example.com", NULL, 0, 3, "'*' at offset 0" },
    { "broker-$(node_id)..example.com", NULL, 0, 3, "empty label" },
    { ".broker-$(node_id).example.com", NULL, 0, 3, "empty label" },
    { "broker-$(node_id).example.com.", NULL, 0, 3, "a final '.'" },
    { "-$(node_id).example.com", NULL, 0, 3, "starts with '-'" },
    { "broker-$(node_id)-.example.com", NULL, 0, 3, "ends with '-'" },
    { "b$(node_id) .example.com", NULL, 0, 3, "' ' at offset" },
    { "broker-$(node_id).example.com", "kafka..example.com", 0, 3,
      "bootstrap name" },
    { "broker-$(node_id).example.com", "BROKER-7.example.com", 0, 3,
      "form of a broker's name (NodeId 7)" },
    { "broker-$(node_id).example.com", "broker-99999999999.example.com",
      0, 3, "NodeId above 2147483647" },
    { "broker-$(node_id).example.com", NULL, 4, 3, "no range" },
};

START_TEST(pattern_refused)
{
    char err[256];
    struct kr_sni *m;

    err[0] = '\0';
    m = kr_sni_new(bad[_i].pat, bad[_i].boot, bad[_i].min, bad[_i].max, err,
                   sizeof(err));
    ck_assert_msg(m == NULL, "%s was taken", bad[_i].pat);
    ck_assert_msg(strstr(err, bad[_i].why) != NULL, "%s: \"%s\" lacks \"%s\"",
                  bad[_i].pat, err, bad[_i].why);
}
END_TEST

/* Label and name lengths count the widest NodeId's digits. */
START_TEST(pattern_lengths)
{
    char pat[400], err[256];
    struct kr_sni *m;

    /* a label of 63 with one digit, 64 with two */
    memset(pat, 'b', 62);
    snprintf(pat + 62, sizeof(pat) - 62, "$(node_id).example.com");
    m = mk(pat, NULL, 0, 9);
    kr_sni_free(m);
    ck_assert_ptr_null(kr_sni_new(pat, NULL, 0, 10, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "NodeId 10"));
    ck_assert_ptr_nonnull(strstr(err, "64 characters: at most 63"));
    /* 253 characters in all with one digit: "b$(node_id)" is 11 of the
       pattern, 2 of the name; labels of 50 between the dots */
    memset(pat, 'a', sizeof(pat));
    memcpy(pat, "b$(node_id)", 11);
    for (size_t i = 11 + 50; i < 262; i += 51) {
        pat[i] = '.';
    }
    pat[262] = '\0';
    m = mk(pat, NULL, 0, 9);
    ck_assert_uint_eq(m->prefix_len + 1 + m->suffix_len, 253);
    kr_sni_free(m);
    pat[262] = 'a';
    pat[263] = '\0';
    ck_assert_ptr_null(kr_sni_new(pat, NULL, 0, 9, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "at most 253"));
}
END_TEST

START_TEST(route_brokers_and_bootstrap)
{
    struct kr_sni *m = mk(PAT, "kafka.example.com", 1, 3);
    int32_t id = 99;

    ck_assert_int_eq(route(m, "broker-1.kafka.example.com", &id),
                     KR_SNI_BROKER);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(route(m, "broker-3.kafka.example.com", &id),
                     KR_SNI_BROKER);
    ck_assert_int_eq(id, 3);
    ck_assert_int_eq(route(m, "kafka.example.com", &id), KR_SNI_BOOTSTRAP);
    ck_assert_int_eq(id, -1);
    /* DNS names: ASCII case does not matter, a final '.' neither */
    ck_assert_int_eq(route(m, "BROKER-2.Kafka.Example.COM", &id),
                     KR_SNI_BROKER);
    ck_assert_int_eq(id, 2);
    ck_assert_int_eq(route(m, "broker-2.kafka.example.com.", &id),
                     KR_SNI_BROKER);
    ck_assert_int_eq(id, 2);
    ck_assert_int_eq(route(m, "KAFKA.example.com.", &id), KR_SNI_BOOTSTRAP);
    /* none */
    ck_assert_int_eq(route(m, NULL, &id), KR_SNI_NONE);
    ck_assert_int_eq(id, -1);
    ck_assert_int_eq(kr_sni_route(m, "x", 0, &id), KR_SNI_NONE);
    kr_sni_free(m);
}
END_TEST

/* Names that look like a broker's or the bootstrap's but are not. */
static const char *const near[] = {
    "broker-1x.kafka.example.com",
    "broker-x1.kafka.example.com",
    "broker-.kafka.example.com",
    "broker-01.kafka.example.com",      /* not NodeId 1's one form */
    "broker-00.kafka.example.com",
    "broker--1.kafka.example.com",
    "broker-+1.kafka.example.com",
    "broker- 1.kafka.example.com",
    "broker-1 .kafka.example.com",
    "broker-1.kafka.example.co",
    "broker-1.kafka.example.com.evil",
    "broker-1.kafka.example.com..",
    "xbroker-1.kafka.example.com",
    "broker1.kafka.example.com",
    "broker-1kafka.example.com",
    "broker-1.kafka-example.com",
    "broker-1",
    "kafka.example.co",
    "akafka.example.com",
    "kafka.example.com.x",
    ".",
    "",
};

START_TEST(route_near_misses)
{
    struct kr_sni *m = mk(PAT, "kafka.example.com", 0, 15);
    int32_t id = 5;
    size_t n = strlen(near[_i]);

    if (n == 0) {
        ck_assert_int_eq(route(m, near[_i], &id), KR_SNI_NONE);
    } else {
        ck_assert_msg(route(m, near[_i], &id) == KR_SNI_UNKNOWN, "%s routed",
                      near[_i]);
    }
    ck_assert_int_eq(id, -1);
    kr_sni_free(m);
}
END_TEST

/* Bytes a client may send: a NUL inside, high bytes. */
START_TEST(route_raw_bytes)
{
    struct kr_sni *m = mk(PAT, "kafka.example.com", 0, 15);
    static const char nul1[] = "broker-1\0.kafka.example.com";
    static const char nul2[] = "kafka.example.com\0";
    static const char hi[] = "broker-\xb9.kafka.example.com";
    int32_t id;

    ck_assert_int_eq(kr_sni_route(m, nul1, sizeof(nul1) - 1, &id),
                     KR_SNI_UNKNOWN);
    ck_assert_int_eq(kr_sni_route(m, nul2, sizeof(nul2) - 1, &id),
                     KR_SNI_UNKNOWN);
    ck_assert_int_eq(kr_sni_route(m, hi, sizeof(hi) - 1, &id),
                     KR_SNI_UNKNOWN);
    /* only the bytes given count: "broker-12" cut after "broker-1" */
    ck_assert_int_eq(kr_sni_route(m, "broker-12.kafka.example.com", 8, &id),
                     KR_SNI_UNKNOWN);
    kr_sni_free(m);
}
END_TEST

START_TEST(route_out_of_range)
{
    struct kr_sni *m = mk(PAT, NULL, 1, 3);
    int32_t id;

    ck_assert_int_eq(route(m, "broker-0.kafka.example.com", &id),
                     KR_SNI_OUT_OF_RANGE);
    ck_assert_int_eq(id, 0);
    ck_assert_int_eq(route(m, "broker-4.kafka.example.com", &id),
                     KR_SNI_OUT_OF_RANGE);
    ck_assert_int_eq(id, 4);
    ck_assert_int_eq(route(m, "broker-2147483647.kafka.example.com", &id),
                     KR_SNI_OUT_OF_RANGE);
    ck_assert_int_eq(id, 2147483647);
    ck_assert_int_eq(route(m, "broker-2147483648.kafka.example.com", &id),
                     KR_SNI_OUT_OF_RANGE);
    ck_assert_int_eq(id, -1);
    ck_assert_int_eq(route(m, "broker-99999999999999999999.kafka.example.com",
                           &id), KR_SNI_OUT_OF_RANGE);
    ck_assert_int_eq(id, -1);
    /* no bootstrap name: what would be it is unknown */
    ck_assert_int_eq(route(m, "kafka.example.com", &id), KR_SNI_UNKNOWN);
    kr_sni_free(m);
}
END_TEST

/* Every NodeId's name routes back to it; the pattern's own case is not
   written. */
START_TEST(names_round_trip)
{
    struct kr_sni *m = mk("B-$(node_id).K.Example.com", "k.example.com", 0,
                          65534);
    char buf[KR_SNI_NAME_MAX + 1];
    int32_t n, id;
    size_t len;

    for (n = 0; n <= 65534; n += (n < 200 ? 1 : 997)) {
        len = kr_sni_broker_name(m, n, buf, sizeof(buf));
        ck_assert_uint_gt(len, 0);
        ck_assert_uint_eq(len, strlen(buf));
        if (kr_sni_route(m, buf, len, &id) != KR_SNI_BROKER || id != n) {
            ck_abort_msg("%s did not route to NodeId %d", buf, (int)n);
        }
    }
    ck_assert_uint_eq(kr_sni_broker_name(m, 42, buf, sizeof(buf)), 18);
    ck_assert_str_eq(buf, "b-42.k.example.com");
    /* too small a buffer: 0 and "" */
    ck_assert_uint_eq(kr_sni_broker_name(m, 42, buf, 18), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_uint_eq(kr_sni_broker_name(m, 42, buf, 0), 0);
    kr_sni_free(m);
}
END_TEST

START_TEST(host_names)
{
    char err[160];

    ck_assert(kr_sni_host_ok("kafka.example.com", err, sizeof(err)));
    ck_assert(kr_sni_host_ok("a", err, sizeof(err)));
    ck_assert(kr_sni_host_ok("1.2.3.4", err, sizeof(err)));
    ck_assert(kr_sni_host_ok("xn--bcher-kva.example", err, sizeof(err)));
    ck_assert(!kr_sni_host_ok("", err, sizeof(err)));
    ck_assert_str_eq(err, "an empty name");
    ck_assert(!kr_sni_host_ok("a\x01.b", err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "byte 0x01 at offset 1"));
    ck_assert(!kr_sni_host_ok("a.-b", err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "offset 2 starts with '-'"));
    ck_assert_str_eq(kr_sni_route_name(KR_SNI_BROKER), "broker");
    ck_assert_str_eq(kr_sni_route_name(KR_SNI_OUT_OF_RANGE), "out of range");
}
END_TEST

static Suite *
sni_suite(void)
{
    Suite *s = suite_create("sni");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, pattern_parsed);
    tcase_add_loop_test(tc, pattern_refused, 0, (int)(sizeof(bad) /
                                                      sizeof(bad[0])));
    tcase_add_test(tc, pattern_lengths);
    tcase_add_test(tc, route_brokers_and_bootstrap);
    tcase_add_loop_test(tc, route_near_misses, 0, (int)(sizeof(near) /
                                                        sizeof(near[0])));
    tcase_add_test(tc, route_raw_bytes);
    tcase_add_test(tc, route_out_of_range);
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, host_names);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(sni_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
