/*
 * check_cluster.c - unit tests for kr_cluster (issue 12): the process-wide
 * view of one upstream cluster.  Edits and snapshots on one thread, then
 * publishers and readers on threads of their own checking that every
 * snapshot a reader sees is consistent (each writer's brokers a prefix of
 * what it published, its ApiVersions range and its TopicId log entries
 * from the same edits), and the fetch claim taken by one thread at a
 * time.  Run under ThreadSanitizer in CI (.ci/run's TSan stage).
 *
 * Threads never call ck_assert (Check's messages belong to the test's
 * process): they record the first fault, the test thread asserts.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_cluster.h"
#include "kr_common.h"

/* ---- one thread --------------------------------------------------------- */

START_TEST(test_edit_snapshot)
{
    struct kr_cluster *c = kr_cluster_new("u1");
    struct kr_cluster_range api[KR_CLUSTER_API_KEYS];
    struct kr_cluster_reader r;
    const struct kr_cluster_snap *s0, *s;
    struct kr_cluster_edit e;
    static const uint8_t id1[16] = { 1, 1 }, id2[16] = { 2, 2 };
    const uint8_t *id;
    const char *name;
    bool changed;
    int i;

    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(kr_cluster_gen(c), 1);
    kr_cluster_reader_init(&r, c);
    s0 = kr_cluster_read(&r, &changed);
    ck_assert(changed);
    ck_assert_uint_eq(s0->gen, 1);
    ck_assert_int_eq(s0->nbrokers, 0);
    ck_assert(!s0->have_api);
    ck_assert_uint_eq(s0->ntopics, 0);
    ck_assert_ptr_eq(kr_cluster_read(&r, &changed), s0);
    ck_assert(!changed);

    /* one edit: two brokers out of order, a topic, the ranges */
    for (i = 0; i < KR_CLUSTER_API_KEYS; i++) {
        api[i].min = api[i].max = -1;
    }
    api[3].min = 0;
    api[3].max = 12;
    kr_cluster_edit_begin(&e, c);
    ck_assert(kr_cluster_edit_broker(&e, 5, "b5.example", 10, 9095, true));
    ck_assert(kr_cluster_edit_broker(&e, 2, "b2.example", 10, 9092, false));
    ck_assert(!kr_cluster_edit_broker(&e, 2, "b2.example", 10, 9092, true));
    ck_assert(!kr_cluster_edit_broker(&e, -1, "x", 1, 1, true));
    ck_assert(!kr_cluster_edit_broker(&e, 3, "x", 0, 1, true));
    ck_assert(kr_cluster_edit_topic(&e, id1, "orders", 6));
    ck_assert(!kr_cluster_edit_topic(&e, id1, "orders", 6));
    ck_assert(kr_cluster_edit_api(&e, api));
    ck_assert(!kr_cluster_edit_api(&e, api));
    ck_assert_uint_eq(kr_cluster_edit_end(&e), 2);
    ck_assert_uint_eq(kr_cluster_gen(c), 2);
    /* the old snapshot is the reader's until it reads again */
    ck_assert_int_eq(s0->nbrokers, 0);
    s = kr_cluster_read(&r, &changed);
    ck_assert(changed);
    ck_assert_uint_eq(s->gen, 2);
    ck_assert_int_eq(s->nbrokers, 2);
    ck_assert_int_eq(s->brokers[0].node_id, 2);
    ck_assert_str_eq(s->brokers[0].host, "b2.example");
    ck_assert(!s->brokers[0].fetched);
    ck_assert_int_eq(s->brokers[1].node_id, 5);
    ck_assert_uint_eq(s->brokers[1].port, 9095);
    ck_assert(s->have_api);
    ck_assert_int_eq(s->api[3].max, 12);
    ck_assert_int_eq(s->api[0].min, -1);
    ck_assert_uint_eq(s->ntopics, 1);
    kr_cluster_topic_at(c, 0, &id, &name);
    ck_assert_mem_eq(id, id1, 16);
    ck_assert_str_eq(name, "orders");

    /* an edit that changes nothing publishes nothing */
    kr_cluster_edit_begin(&e, c);
    ck_assert(!kr_cluster_edit_broker(&e, 5, "b5.example", 10, 9095, true));
    ck_assert_uint_eq(kr_cluster_edit_end(&e), 2);
    ck_assert_ptr_eq(kr_cluster_read(&r, &changed), s);
    ck_assert(!changed);

    /* a move, a renamed id (appended), a new id */
    kr_cluster_edit_begin(&e, c);
    ck_assert(kr_cluster_edit_broker(&e, 5, "b5.example", 10, 19095, true));
    ck_assert(kr_cluster_edit_topic(&e, id1, "orders2", 7));
    ck_assert(kr_cluster_edit_topic(&e, id2, "audit", 5));
    ck_assert_uint_eq(kr_cluster_edit_end(&e), 3);
    /* a snapshot taken directly outlives the reader's replacement */
    s0 = kr_cluster_snap_get(c);
    s = kr_cluster_read(&r, NULL);
    ck_assert_ptr_eq(s, s0);
    ck_assert_uint_eq(s->brokers[1].port, 19095);
    ck_assert_uint_eq(s->ntopics, 3);
    kr_cluster_topic_at(c, 1, &id, &name);
    ck_assert_str_eq(name, "orders2");
    kr_cluster_topic_at(c, 2, &id, &name);
    ck_assert_mem_eq(id, id2, 16);
    kr_cluster_reader_done(&r);
    ck_assert_uint_eq(s0->gen, 3);
    kr_cluster_put(c);                  /* s0 is still ours */
    ck_assert_int_eq(s0->nbrokers, 2);
    kr_cluster_snap_put(s0);
}
END_TEST

/* The fetch claim: one holder at a time, released or expired. */
START_TEST(test_fetch_claim)
{
    struct kr_cluster *c = kr_cluster_new(NULL);
    int64_t ok, fail;

    ck_assert(kr_cluster_fetch_claim(c, 1000, 500));
    ck_assert(!kr_cluster_fetch_claim(c, 1200, 500));
    ck_assert(kr_cluster_fetch_claim(c, 1501, 500));    /* expired */
    kr_cluster_fetch_done(c, false, 1600);
    kr_cluster_fetch_release(c, 1600, 2000);            /* backoff */
    ck_assert(!kr_cluster_fetch_claim(c, 3000, 500));
    ck_assert(kr_cluster_fetch_claim(c, 3600, 500));
    kr_cluster_fetch_done(c, true, 3700);
    kr_cluster_fetch_release(c, 3700, 0);
    ck_assert(kr_cluster_fetch_claim(c, 3700, 500));
    kr_cluster_fetch_times(c, &ok, &fail);
    ck_assert_int_eq(ok, 3700);
    ck_assert_int_eq(fail, 1600);
    kr_cluster_put(c);
}
END_TEST

/* ---- threads ------------------------------------------------------------ */

#define NWRITERS 4
#define NREADERS 4
#define NEDITS 300                      /* per writer */

struct run {
    struct kr_cluster *c;
    pthread_mutex_t lock;               /* fault, the counts */
    char fault[256];
    uint64_t reads, snaps_checked;
};

struct worker_arg {
    struct run *run;
    int index;
};

static void
fault(struct run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fault(struct run *run, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&run->lock);
    if (run->fault[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(run->fault, sizeof(run->fault), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&run->lock);
}

/*
 * Writer w's k-th edit, one snapshot: NodeId w * 10000 + k at
 * "w<w>-<k>":(k % 50000)+1, TopicId {w, k hi, k lo, 0xee...} named
 * "t<w>-<k>", and every ApiKey's range [v, v + 1] with v = w * NEDITS +
 * k (a table torn between two edits would show two values).
 */
static void
topic_id(int w, int k, uint8_t id[16])
{
    memset(id, 0xee, 16);
    id[0] = (uint8_t)w;
    id[1] = (uint8_t)(k >> 8);
    id[2] = (uint8_t)k;
}

static void *
writer_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct kr_cluster_range api[KR_CLUSTER_API_KEYS];
    int w = wa->index, k, i;

    for (k = 0; k < NEDITS; k++) {
        struct kr_cluster_edit e;
        char host[32], name[32];
        uint8_t id[16];
        int16_t v = (int16_t)(w * NEDITS + k);

        snprintf(host, sizeof(host), "w%d-%d", w, k);
        snprintf(name, sizeof(name), "t%d-%d", w, k);
        topic_id(w, k, id);
        for (i = 0; i < KR_CLUSTER_API_KEYS; i++) {
            api[i].min = v;
            api[i].max = (int16_t)(v + 1);
        }
        kr_cluster_edit_begin(&e, wa->run->c);
        if (!kr_cluster_edit_broker(&e, w * 10000 + k, host, strlen(host),
                                    (uint16_t)(k % 50000 + 1), true) ||
            !kr_cluster_edit_topic(&e, id, name, strlen(name)) ||
            !kr_cluster_edit_api(&e, api)) {
            fault(wa->run, "writer %d edit %d: not new", w, k);
        }
        (void)kr_cluster_edit_end(&e);
    }
    return NULL;
}

/* Is snapshot s of c consistent?  Returns false with a fault. */
static bool
check_snap(struct run *run, const struct kr_cluster_snap *s)
{
    int count[NWRITERS] = { 0 };
    int i, w, k;
    size_t t;

    for (i = 0; i < s->nbrokers; i++) {
        const struct kr_cluster_broker *b = &s->brokers[i];
        char host[32];

        if (i > 0 && s->brokers[i - 1].node_id >= b->node_id) {
            fault(run, "gen %" PRIu64 ": brokers not sorted at %d", s->gen,
                  i);
            return false;
        }
        w = b->node_id / 10000;
        k = b->node_id % 10000;
        snprintf(host, sizeof(host), "w%d-%d", w, k);
        if (w < 0 || w >= NWRITERS || strcmp(b->host, host) != 0 ||
            b->port != (uint16_t)(k % 50000 + 1) || !b->fetched) {
            fault(run, "gen %" PRIu64 ": NodeId %d at %s:%u", s->gen,
                  b->node_id, b->host, b->port);
            return false;
        }
        /* sorted, so a writer's NodeIds come in order: a prefix */
        if (k != count[w]) {
            fault(run, "gen %" PRIu64 ": writer %d's NodeIds not a prefix "
                  "(%d after %d)", s->gen, w, k, count[w]);
            return false;
        }
        count[w]++;
    }
    if (s->ntopics != (size_t)s->nbrokers) {
        fault(run, "gen %" PRIu64 ": %zu topics, %d brokers", s->gen,
              s->ntopics, s->nbrokers);
        return false;
    }
    for (t = 0; t < s->ntopics; t++) {
        const uint8_t *id;
        const char *name;
        uint8_t want[16];
        char wname[32];

        kr_cluster_topic_at(run->c, t, &id, &name);
        w = id[0];
        k = id[1] << 8 | id[2];
        topic_id(w, k, want);
        snprintf(wname, sizeof(wname), "t%d-%d", w, k);
        if (w >= NWRITERS || k >= count[w] || memcmp(id, want, 16) != 0 ||
            strcmp(name, wname) != 0) {
            fault(run, "gen %" PRIu64 ": topic %zu is %s (writer %d has %d "
                  "edits in)", s->gen, t, name, w, w < NWRITERS ? count[w]
                                                                : -1);
            return false;
        }
    }
    if (s->nbrokers == 0) {
        if (s->have_api) {
            fault(run, "gen %" PRIu64 ": ranges before any edit", s->gen);
            return false;
        }
        return true;
    }
    for (i = 0; i < KR_CLUSTER_API_KEYS; i++) {
        if (!s->have_api || s->api[i].min != s->api[0].min ||
            s->api[i].max != s->api[0].min + 1) {
            fault(run, "gen %" PRIu64 ": range of ApiKey %d [%d, %d] torn "
                  "(ApiKey 0: [%d, %d])", s->gen, i, s->api[i].min,
                  s->api[i].max, s->api[0].min, s->api[0].max);
            return false;
        }
    }
    /* the ranges are the last edit's: its writer's newest */
    w = s->api[0].min / NEDITS;
    k = s->api[0].min % NEDITS;
    if (w >= NWRITERS || count[w] != k + 1) {
        fault(run, "gen %" PRIu64 ": ranges of writer %d's edit %d, but it "
              "has %d in", s->gen, w, k, w < NWRITERS ? count[w] : -1);
        return false;
    }
    return true;
}

static void *
reader_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct run *run = wa->run;
    struct kr_cluster_reader r;
    uint64_t last = 0, reads = 0, checked = 0;
    bool done = false;

    kr_cluster_reader_init(&r, run->c);
    while (!done) {
        bool changed;
        const struct kr_cluster_snap *s = kr_cluster_read(&r, &changed);

        reads++;
        if (s->gen < last) {
            fault(run, "reader %d: generation %" PRIu64 " after %" PRIu64,
                  wa->index, s->gen, last);
            break;
        }
        last = s->gen;
        if (changed) {
            checked++;
            if (!check_snap(run, s)) {
                break;
            }
        }
        done = s->nbrokers == NWRITERS * NEDITS;
    }
    kr_cluster_reader_done(&r);
    pthread_mutex_lock(&run->lock);
    run->reads += reads;
    run->snaps_checked += checked;
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

/*
 * NWRITERS publishers and NREADERS readers at once: every snapshot a
 * reader takes is consistent, generations never go back, and the last
 * holds everything.
 */
START_TEST(test_threads)
{
    struct run run;
    struct worker_arg wa[NWRITERS + NREADERS];
    pthread_t th[NWRITERS + NREADERS];
    const struct kr_cluster_snap *s;
    int i;

    memset(&run, 0, sizeof(run));
    pthread_mutex_init(&run.lock, NULL);
    run.c = kr_cluster_new("threads");
    ck_assert_ptr_nonnull(run.c);
    for (i = 0; i < NWRITERS + NREADERS; i++) {
        wa[i].run = &run;
        wa[i].index = i < NREADERS ? i : i - NREADERS;
        ck_assert_int_eq(pthread_create(&th[i], NULL,
                                        i < NREADERS ? reader_main
                                                     : writer_main,
                                        &wa[i]), 0);
    }
    for (i = 0; i < NWRITERS + NREADERS; i++) {
        pthread_join(th[i], NULL);
    }
    ck_assert_msg(run.fault[0] == '\0', "%s", run.fault);
    s = kr_cluster_snap_get(run.c);
    ck_assert_int_eq(s->nbrokers, NWRITERS * NEDITS);
    ck_assert_uint_eq(s->ntopics, NWRITERS * NEDITS);
    /* one generation per edit, after the first */
    ck_assert_uint_eq(s->gen, 1 + NWRITERS * NEDITS);
    ck_assert(check_snap(&run, s));
    kr_cluster_snap_put(s);
    /* every reader read more than once, and saw several snapshots */
    ck_assert_uint_gt(run.reads, NREADERS);
    ck_assert_uint_ge(run.snaps_checked, NREADERS);
    kr_cluster_put(run.c);
    pthread_mutex_destroy(&run.lock);
}
END_TEST

/* NWRITERS threads racing for one claim, round after round: one wins. */
struct claim_arg {
    struct kr_cluster *c;
    pthread_barrier_t *bar;
    _Atomic int *wins;
};

static void *
claim_main(void *arg)
{
    struct claim_arg *ca = arg;
    int round;

    for (round = 0; round < 200; round++) {
        pthread_barrier_wait(ca->bar);
        if (kr_cluster_fetch_claim(ca->c, 1000 + round * 10, 5)) {
            atomic_fetch_add(&ca->wins[round], 1);
        }
    }
    return NULL;
}

START_TEST(test_claim_threads)
{
    static _Atomic int wins[200];
    struct kr_cluster *c = kr_cluster_new("claims");
    pthread_barrier_t bar;
    struct claim_arg ca;
    pthread_t th[NWRITERS];
    int i;

    pthread_barrier_init(&bar, NULL, NWRITERS);
    ca.c = c;
    ca.bar = &bar;
    ca.wins = wins;
    for (i = 0; i < NWRITERS; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, claim_main, &ca), 0);
    }
    for (i = 0; i < NWRITERS; i++) {
        pthread_join(th[i], NULL);
    }
    for (i = 0; i < 200; i++) {
        ck_assert_msg(atomic_load(&wins[i]) == 1, "round %d: %d claims", i,
                      atomic_load(&wins[i]));
    }
    pthread_barrier_destroy(&bar);
    kr_cluster_put(c);
}
END_TEST

static Suite *
cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);         /* ThreadSanitizer: 5-15x */
    tcase_add_test(tc, test_edit_snapshot);
    tcase_add_test(tc, test_fetch_claim);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_claim_threads);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cluster_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
