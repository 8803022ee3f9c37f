/*
 * check_inflight.c - the CorrelationId FIFO (kr_inflight.h) and the SASL
 * state as krelay follows it (kr_sasl.h): two small data modules below
 * the session, tested on their own.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_arena.h"
#include "kr_codec.h"
#include "kr_common.h"
#include "kr_inflight.h"
#include "kr_sasl.h"
#include "kr_schema.h"

static struct kr_inflight
entry(int32_t corr, bool optional, int64_t sent_ms)
{
    struct kr_inflight e;

    memset(&e, 0, sizeof(e));
    e.correlation_id = corr;
    e.api_key = 0;
    e.api_version = 9;
    e.optional = optional;
    e.sent_ms = sent_ms;
    return e;
}

/* The CorrelationIds of f, head first, into out (at most n). */
static int
corrs(struct kr_inflight_fifo *f, int32_t *out, int n)
{
    uint32_t i;

    for (i = 0; i < f->len && (int)i < n; i++) {
        out[i] = kr_inflight_at(f, i)->correlation_id;
    }
    return (int)i;
}

/*
 * A client that waits for each response keeps a ring of KR_INFLIGHT_CAP0
 * (2) entries however many requests it sends; a third one outstanding
 * grows it, in order, from a wrapped ring.
 */
START_TEST(test_fifo_small_first_ring)
{
    struct kr_inflight_fifo f;
    struct kr_inflight e;
    int32_t got[4];
    int i;

    memset(&f, 0, sizeof(f));
    for (i = 0; i < 100; i++) {
        e = entry(i, false, i);
        ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
        kr_inflight_pop(&f, i);
    }
    ck_assert_uint_eq(f.cap, 2);
    ck_assert_uint_eq(f.len, 0);
    ck_assert_uint_eq(f.head, 0);               /* 100 pops of 2 slots */
    e = entry(100, false, 100);
    ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    kr_inflight_pop(&f, 100);                   /* head at slot 1 */
    for (i = 101; i < 103; i++) {
        e = entry(i, false, i);
        ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    }
    ck_assert_uint_eq(f.cap, 2);                /* full, wrapped */
    ck_assert_uint_eq(f.head, 1);
    e = entry(103, false, 103);
    ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    ck_assert_uint_eq(f.cap, 4);
    ck_assert_int_eq(corrs(&f, got, 4), 3);
    ck_assert_int_eq(got[0], 101);
    ck_assert_int_eq(got[1], 102);
    ck_assert_int_eq(got[2], 103);
    kr_inflight_free(&f);
}
END_TEST

/* In order, growing past its first 8 slots while wrapped around. */
START_TEST(test_fifo_order_and_growth)
{
    struct kr_inflight_fifo f;
    struct kr_inflight e;
    int32_t got[64];
    int i, n;

    memset(&f, 0, sizeof(f));
    ck_assert_ptr_null(kr_inflight_head(&f));
    for (i = 0; i < 6; i++) {
        e = entry(i, false, 100 + i);
        ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    }
    ck_assert_int_eq(f.head_since_ms, 100);     /* the first one's */
    for (i = 0; i < 5; i++) {
        kr_inflight_pop(&f, 200 + i);
    }
    ck_assert_int_eq(f.head_since_ms, 204);
    ck_assert_uint_eq(f.head, 5);               /* wrapped next */
    for (i = 6; i < 40; i++) {
        e = entry(i, false, 300);
        ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    }
    ck_assert_uint_eq(f.len, 35);
    ck_assert_uint_ge(f.cap, 35);
    n = corrs(&f, got, 64);
    ck_assert_int_eq(n, 35);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(got[i], 5 + i);
    }
    ck_assert(kr_inflight_has(&f, 39));
    ck_assert(!kr_inflight_has(&f, 4));
    kr_inflight_free(&f);
    ck_assert_uint_eq(f.len, 0);
    ck_assert_ptr_null(f.ring);
}
END_TEST

/* Optional entries (Acks=0) are counted apart and skipped by first. */
START_TEST(test_fifo_optional)
{
    struct kr_inflight_fifo f;
    struct kr_inflight e, *first;
    uint32_t idx = 99;

    memset(&f, 0, sizeof(f));
    e = entry(1, true, 10);
    ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    e = entry(2, true, 11);
    ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    ck_assert_ptr_null(kr_inflight_first(&f, &idx));
    ck_assert_uint_eq(idx, 0);
    e = entry(3, false, 50);
    ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    ck_assert_uint_eq(f.opt, 2);
    ck_assert_uint_eq(kr_inflight_expected(&f), 1);
    first = kr_inflight_first(&f, &idx);
    ck_assert_ptr_nonnull(first);
    ck_assert_int_eq(first->correlation_id, 3);
    ck_assert_uint_eq(idx, 2);
    /* owed since it was read: optional entries were ahead of it */
    ck_assert_int_eq(kr_inflight_since(&f, first, idx), 50);
    kr_inflight_pop(&f, 60);                    /* an optional one */
    ck_assert_uint_eq(f.opt, 1);
    kr_inflight_free(&f);
}
END_TEST

/* remove keeps the order of the others; only a head removal restarts
   the head's clock. */
START_TEST(test_fifo_remove)
{
    struct kr_inflight_fifo f;
    struct kr_inflight e;
    int32_t got[8];
    int i;

    memset(&f, 0, sizeof(f));
    for (i = 0; i < 5; i++) {
        e = entry(10 + i, i == 3, 100);
        ck_assert_int_eq(kr_inflight_push(&f, &e), KR_OK);
    }
    kr_inflight_remove(&f, 3, 500);             /* the optional one */
    ck_assert_uint_eq(f.opt, 0);
    ck_assert_int_eq(f.head_since_ms, 100);
    ck_assert_int_eq(corrs(&f, got, 8), 4);
    ck_assert_int_eq(got[0], 10);
    ck_assert_int_eq(got[1], 11);
    ck_assert_int_eq(got[2], 12);
    ck_assert_int_eq(got[3], 14);
    kr_inflight_remove(&f, 0, 600);
    ck_assert_int_eq(f.head_since_ms, 600);
    ck_assert_int_eq(kr_inflight_head(&f)->correlation_id, 11);
    kr_inflight_free(&f);
}
END_TEST

/* Only exact names count (Kafka's are case-sensitive). */
START_TEST(test_sasl_mechanisms)
{
    struct kr_sasl sa;

    ck_assert_int_eq(kr_sasl_mech_of((const uint8_t *)"PLAIN", 5),
                     KR_SASL_PLAIN);
    ck_assert_int_eq(kr_sasl_mech_of((const uint8_t *)"SCRAM-SHA-256", 13),
                     KR_SASL_SCRAM);
    ck_assert_int_eq(kr_sasl_mech_of((const uint8_t *)"SCRAM-SHA-512", 13),
                     KR_SASL_SCRAM);
    ck_assert_int_eq(kr_sasl_mech_of((const uint8_t *)"plain", 5),
                     KR_SASL_OTHER);
    ck_assert_int_eq(kr_sasl_mech_of((const uint8_t *)"PLAINX", 6),
                     KR_SASL_OTHER);
    ck_assert_int_eq(kr_sasl_mech_of((const uint8_t *)"GSSAPI", 6),
                     KR_SASL_OTHER);
    memset(&sa, 0, sizeof(sa));
    sa.mech = KR_SASL_PLAIN;
    ck_assert(kr_sasl_start_raw(&sa));
    ck_assert_uint_eq(sa.tokens, 1);
    sa.mech = KR_SASL_SCRAM;
    ck_assert(kr_sasl_start_raw(&sa));
    ck_assert_uint_eq(sa.tokens, 2);
    sa.mech = KR_SASL_OTHER;
    sa.tokens = 0;
    ck_assert(!kr_sasl_start_raw(&sa));
    ck_assert_uint_eq(sa.tokens, 0);
}
END_TEST

/* The Mechanism of a decoded SaslHandshake request, null included. */
START_TEST(test_sasl_handshake)
{
    const struct kr_api_desc *ad = kr_api_get(KR_API_SASL_HANDSHAKE);
    struct kr_arena arena;
    struct kr_msg m;
    struct kr_val *v;
    struct kr_sasl sa;
    const uint8_t *name;
    int32_t len;

    ck_assert_ptr_nonnull(ad);
    kr_arena_init(&arena, 0);
    memset(&m, 0, sizeof(m));
    m.api_key = KR_API_SASL_HANDSHAKE;
    m.api_version = 1;
    m.body = kr_node_new(&arena, kr_api_root(ad, false, 1), 1);
    ck_assert_ptr_nonnull(m.body);
    v = kr_node_get_id(m.body, KR_FIELD_MECHANISM);
    ck_assert_ptr_nonnull(v);
    v->u.s.p = (const uint8_t *)"SCRAM-SHA-512";
    v->u.s.len = 13;
    v->is_null = 0;
    v->present = 1;
    memset(&sa, 0, sizeof(sa));
    ck_assert_int_eq(kr_sasl_note_handshake(&sa, &m, &name, &len),
                     KR_SASL_SCRAM);
    ck_assert_int_eq(sa.mech, KR_SASL_SCRAM);
    ck_assert_int_eq(len, 13);
    ck_assert(memcmp(name, "SCRAM-SHA-512", 13) == 0);
    v->is_null = 1;
    ck_assert_int_eq(kr_sasl_note_handshake(&sa, &m, &name, &len),
                     KR_SASL_OTHER);
    ck_assert_ptr_null(name);
    ck_assert_int_eq(len, -1);
    kr_arena_free(&arena);
}
END_TEST

static Suite *
inflight_suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("fifo");

    tcase_add_test(tc, test_fifo_small_first_ring);
    tcase_add_test(tc, test_fifo_order_and_growth);
    tcase_add_test(tc, test_fifo_optional);
    tcase_add_test(tc, test_fifo_remove);
    suite_add_tcase(s, tc);
    tc = tcase_create("sasl");
    tcase_add_test(tc, test_sasl_mechanisms);
    tcase_add_test(tc, test_sasl_handshake);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(inflight_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
