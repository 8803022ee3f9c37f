/*
 * check_audit_ring.c - the audit sink's per-thread rings (kr_audit.c,
 * issue 12): several threads writing at once, each line arriving once
 * and whole, each thread's lines in its order; drops counted exactly when
 * a ring is full (the target blocked), each thread's ring of its own
 * queue_bytes; kr_audit_flush waiting for every line written before it,
 * on every thread; reopen with several threads; close with the rings of
 * threads that ended; a thread's cache of rings (sinks closed and opened
 * at the same address, more sinks than the cache holds).  Small and
 * threaded: CI runs it under ThreadSanitizer too (.ci/run).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kr_audit.h"
#include "kr_test.h"

static char tmpdir[64];

static void
setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_audit_ring.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/*
 * Line i of thread t: "t=TT i=IIIIII " then i * 7 % 211 bytes of one
 * letter (the thread's) and '$': lengths vary so that lines cross the
 * ring's end at every offset.  Returns its length.
 */
static int
ring_line(char *out, size_t cap, unsigned t, unsigned i)
{
    unsigned pad = i * 7 % 211, k;
    int n = snprintf(out, cap, "t=%02u i=%06u ", t, i);

    KR_TEST_CHECK((size_t)n + pad + 2 <= cap, "line buffer too small");
    for (k = 0; k < pad; k++) {
        out[n + (int)k] = (char)('a' + t % 26);
    }
    out[n + (int)pad] = '$';
    out[n + (int)pad + 1] = '\0';
    return n + (int)pad + 1;
}

/*
 * Check a line (no '\n') against ring_line: whole, not torn, nor mixed
 * with another; *t and *i are its thread and index.
 */
static void
check_line(const char *p, size_t len, unsigned *t, unsigned *i)
{
    char want[300], head[16];
    int n, got = 0;

    if (len >= 14) {                    /* (sscanf would strlen the rest) */
        memcpy(head, p, 14);
        head[14] = '\0';
        got = sscanf(head, "t=%2u i=%6u ", t, i);
    }

    KR_TEST_CHECK(got == 2, "bad line %.*s", (int)(len < 60 ? len : 60), p);
    n = ring_line(want, sizeof(want), *t, *i);
    KR_TEST_CHECK((size_t)n == len && memcmp(p, want, len) == 0,
                  "line t=%u i=%u torn or mixed: %.*s", *t, *i,
                  (int)(len < 300 ? len : 300), p);
}

/* ---- several threads ----------------------------------------------------- */

#define RT_THREADS 6
#define RT_LINES 20000

struct rt_arg {
    struct kr_audit *au;
    unsigned t;
    unsigned ok, refused;
    unsigned char acc[RT_LINES];     /* 1: kr_audit_write took line i */
};

static void *
rt_main(void *p)
{
    struct rt_arg *a = p;
    char line[300];
    unsigned i;

    for (i = 0; i < RT_LINES; i++) {
        int n = ring_line(line, sizeof(line), a->t, i);

        a->acc[i] = kr_audit_write(a->au, line, (size_t)n);
        a->ok += a->acc[i];
        a->refused += !a->acc[i];
    }
    return NULL;
}

/*
 * Six threads, 20,000 lines each of 15 to 225 bytes, rings of 16 KiB
 * (lines cross the end of a ring hundreds of times; a ring may fill and
 * drop): every line a thread's kr_audit_write took is in the file once,
 * whole, in the thread's order, and no other; the counters say the same.
 */
START_TEST(test_ring_threads)
{
    static struct rt_arg args[RT_THREADS];
    unsigned next[RT_THREADS] = {0}, seen[RT_THREADS] = {0};
    uint64_t ok = 0, refused = 0;
    pthread_t th[RT_THREADS];
    char path[128], err[256], *all, *p, *nl;
    struct kr_audit *au;
    size_t len;
    unsigned k;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    au = kr_audit_open(path, 16384, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    for (k = 0; k < RT_THREADS; k++) {
        memset(&args[k], 0, sizeof(args[k]));
        args[k].au = au;
        args[k].t = k;
        ck_assert_int_eq(pthread_create(&th[k], NULL, rt_main, &args[k]),
                         0);
    }
    for (k = 0; k < RT_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ok += args[k].ok;
        refused += args[k].refused;
    }
    ck_assert_uint_eq(kr_audit_rings(au), RT_THREADS);
    kr_audit_flush(au);
    ck_assert_uint_eq(kr_audit_written(au), ok);
    ck_assert_uint_eq(kr_audit_dropped(au), refused);
    ck_assert_uint_gt(ok, 0);
    kr_audit_close(au);
    all = kr_test_slurp(path, &len);
    ck_assert(len == 0 || all[len - 1] == '\n');
    for (p = all; *p != '\0'; p = nl + 1) {
        unsigned t, i;

        nl = strchr(p, '\n');
        KR_TEST_CHECK(nl != NULL, "last line without newline");
        check_line(p, (size_t)(nl - p), &t, &i);
        KR_TEST_CHECK(t < RT_THREADS, "thread %u", t);
        /* the next line this thread's kr_audit_write took */
        while (next[t] < RT_LINES && !args[t].acc[next[t]]) {
            next[t]++;
        }
        KR_TEST_CHECK(i == next[t], "thread %u: line %u where %u was due",
                      t, i, next[t]);
        next[t]++;
        seen[t]++;
    }
    for (k = 0; k < RT_THREADS; k++) {
        ck_assert_uint_eq(seen[k], args[k].ok);
    }
    free(all);
}
END_TEST

/* ---- drops --------------------------------------------------------------- */

#define DR_QUEUE 8192u
#define DR_LINE 99                    /* + '\n': 100 bytes a line */

struct dr_arg {
    struct kr_audit *au;
    unsigned t, tries;
    unsigned ok, first_refused;       /* index of the first refusal */
    bool later_ok;                    /* a line taken after a refusal */
};

/* A 99-byte line of thread t, index i ("t=TT i=IIIIII " and padding). */
static void
dr_line(char *out, unsigned t, unsigned i)
{
    int n = snprintf(out, DR_LINE + 1, "t=%02u i=%06u ", t, i);

    memset(out + n, 'a' + (int)t, (size_t)(DR_LINE - n));
    out[DR_LINE] = '\0';
}

static void *
dr_main(void *p)
{
    struct dr_arg *a = p;
    char line[DR_LINE + 1];
    unsigned i;

    a->first_refused = a->tries;
    for (i = 0; i < a->tries; i++) {
        dr_line(line, a->t, i);
        if (kr_audit_write(a->au, line, DR_LINE)) {
            a->ok++;
            a->later_ok |= a->first_refused < i;
        } else if (a->first_refused == a->tries) {
            a->first_refused = i;
        }
    }
    return NULL;
}

/*
 * The target blocks (a FIFO nobody reads, its pipe full to the last
 * byte): the writer sits in write(2) and gives no ring space back.  A new thread's ring
 * then takes exactly queue_bytes of lines (81 lines of 100 bytes in
 * 8192), and refuses every later one, each counted as dropped; a second
 * thread has a ring of its own, as large.  Once the reader reads, every
 * line taken arrives whole and in its thread's order.
 */
START_TEST(test_ring_drops_exact)
{
    struct dr_arg a1, a2;
    char path[128], err[256], line[DR_LINE + 1], *buf;
    unsigned main_ok = 0, i, next[3] = {0};
    uint64_t dropped0;
    struct kr_audit *au;
    size_t want, got = 0, k, filler = 0;
    int rfd, wfd, psz, avail = 0;
    pthread_t th;

    snprintf(path, sizeof(path), "%s/fifo", tmpdir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    rfd = open(path, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rfd, 0);
    psz = fcntl(rfd, F_SETPIPE_SZ, 4096);
    ck_assert_int_ge(psz, 4096);
    au = kr_audit_open(path, DR_QUEUE, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    /* this thread (t 0) writes a line, and the pipe is filled to the
       brim with '#' from another writer: a write the sink's writer
       starts now cannot end (the filler lands only between two of the
       writer's writes: a writer waiting inside write(2) has filled the
       pipe, or not written yet, as a pipe write of at most PIPE_BUF
       bytes is all or nothing) */
    wfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(wfd, 0);
    for (i = 0; i < 10000 && avail < psz; i++) {
        dr_line(line, 0, main_ok);
        main_ok += kr_audit_write(au, line, DR_LINE);
        while (write(wfd, "#", 1) == 1) {
            filler++;
        }
        ck_assert_int_eq(errno, EAGAIN);
        ck_assert_int_eq(ioctl(rfd, FIONREAD, &avail), 0);
        usleep(1000);
    }
    ck_assert_int_ge(avail, psz);
    ck_assert_uint_gt(main_ok, 0);
    dropped0 = kr_audit_dropped(au);
    /* two threads, one after the other, 86 lines each: 81 taken */
    memset(&a1, 0, sizeof(a1));
    a1.au = au;
    a1.t = 1;
    a1.tries = DR_QUEUE / (DR_LINE + 1) + 5;
    a2 = a1;
    a2.t = 2;
    ck_assert_int_eq(pthread_create(&th, NULL, dr_main, &a1), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_eq(a1.ok, DR_QUEUE / (DR_LINE + 1));
    ck_assert_uint_eq(a1.first_refused, DR_QUEUE / (DR_LINE + 1));
    ck_assert(!a1.later_ok);
    ck_assert_uint_eq(kr_audit_dropped(au), dropped0 + 5);
    ck_assert_int_eq(pthread_create(&th, NULL, dr_main, &a2), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_eq(a2.ok, DR_QUEUE / (DR_LINE + 1));
    ck_assert_uint_eq(a2.first_refused, DR_QUEUE / (DR_LINE + 1));
    ck_assert_uint_eq(kr_audit_dropped(au), dropped0 + 10);
    /* a line longer than a ring can never fit */
    buf = malloc(DR_QUEUE);
    ck_assert_ptr_nonnull(buf);
    memset(buf, 'y', DR_QUEUE);
    ck_assert(!kr_audit_write(au, buf, DR_QUEUE));
    ck_assert_uint_eq(kr_audit_dropped(au), dropped0 + 11);
    free(buf);
    /* read: every line taken arrives, whole, in its thread's order */
    want = (size_t)(main_ok + a1.ok + a2.ok) * (DR_LINE + 1) + filler;
    buf = malloc(want + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) & ~O_NONBLOCK),
                     0);
    while (got < want) {
        ssize_t n = read(rfd, buf + got, want - got);

        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    kr_audit_close(au);
    close(wfd);
    ck_assert_int_eq(read(rfd, line, sizeof(line)), 0);  /* EOF: all read */
    close(rfd);
    for (k = 0; k < want; k += DR_LINE + 1) {
        while (k < want && buf[k] == '#') {
            k++;
            filler--;
        }
        if (k == want) {
            break;
        }
        unsigned t = 99, n;
        char head[16];
        int f;

        memcpy(head, buf + k, 14);
        head[14] = '\0';
        f = sscanf(head, "t=%2u i=%6u ", &t, &n);

        KR_TEST_CHECK(f == 2 && t < 3 && buf[k + DR_LINE] == '\n', "at %zu",
                      k);
        dr_line(line, t, next[t]);
        KR_TEST_CHECK(memcmp(buf + k, line, DR_LINE) == 0,
                      "at %zu: %.99s, want %s", k, buf + k, line);
        next[t]++;
    }
    ck_assert_uint_eq(filler, 0);       /* all between lines */
    ck_assert_uint_eq(next[0], main_ok);
    ck_assert_uint_eq(next[1], a1.ok);
    ck_assert_uint_eq(next[2], a2.ok);
    free(buf);
}
END_TEST

/* ---- flush --------------------------------------------------------------- */

#define FL_THREADS 4
#define FL_ROUNDS 10
#define FL_LINES 300

struct fl_arg {
    struct kr_audit *au;
    const char *path;
    unsigned t;
};

/* Lines of thread t among the whole lines of path. */
static unsigned
fl_count(const char *path, unsigned t)
{
    char *all = kr_test_slurp(path, NULL), *p, *nl;
    unsigned n = 0;

    for (p = all; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
        unsigned lt, i;

        check_line(p, (size_t)(nl - p), &lt, &i);
        n += lt == t;
    }
    free(all);
    return n;
}

static void *
fl_main(void *p)
{
    struct fl_arg *a = p;
    char line[300];
    unsigned r, i, k = 0;

    for (r = 0; r < FL_ROUNDS; r++) {
        for (i = 0; i < FL_LINES; i++, k++) {
            int n = ring_line(line, sizeof(line), a->t, k);

            KR_TEST_CHECK(kr_audit_write(a->au, line, (size_t)n),
                          "thread %u line %u refused", a->t, k);
        }
        kr_audit_flush(a->au);
        /* every line this thread wrote is out, whatever the others do */
        KR_TEST_CHECK(fl_count(a->path, a->t) == k, "thread %u round %u",
                      a->t, r);
    }
    return NULL;
}

/* One line of "thread" 9, from a thread that then ends. */
static void *
fl_one(void *p)
{
    char line[300];
    int n = ring_line(line, sizeof(line), 9, 0);

    KR_TEST_CHECK(kr_audit_write(p, line, (size_t)n), "refused");
    return NULL;
}

/*
 * Four threads write rounds of lines and flush after each, while the
 * others keep writing: when kr_audit_flush returns, each of the thread's
 * lines is in the file.  A flush from another thread waits for lines
 * written before it on any thread; one with nothing queued returns.
 */
START_TEST(test_ring_flush)
{
    struct fl_arg args[FL_THREADS];
    pthread_t th[FL_THREADS];
    char path[128], err[256], line[300];
    struct kr_audit *au;
    unsigned k;
    int n;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    au = kr_audit_open(path, 1u << 20, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    kr_audit_flush(au);                 /* nothing queued: returns */
    for (k = 0; k < FL_THREADS; k++) {
        args[k].au = au;
        args[k].path = path;
        args[k].t = k;
        ck_assert_int_eq(pthread_create(&th[k], NULL, fl_main, &args[k]),
                         0);
    }
    for (k = 0; k < FL_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
    }
    ck_assert_uint_eq(kr_audit_written(au), FL_THREADS * FL_ROUNDS *
                                                FL_LINES);
    /* a line of a thread that ended, flushed from this one */
    n = ring_line(line, sizeof(line), 9, 0);
    ck_assert_int_eq(pthread_create(&th[0], NULL, fl_one, au), 0);
    ck_assert_int_eq(pthread_join(th[0], NULL), 0);
    kr_audit_flush(au);
    ck_assert_uint_eq(kr_audit_written(au), FL_THREADS * FL_ROUNDS *
                                                FL_LINES + 1);
    ck_assert_uint_eq(fl_count(path, 9), 1);
    ck_assert(kr_audit_write(au, line, (size_t)n));
    kr_audit_flush(au);
    ck_assert_uint_eq(fl_count(path, 9), 2);
    ck_assert_uint_eq(kr_audit_dropped(au), 0);
    kr_audit_close(au);
}
END_TEST

/* ---- reopen -------------------------------------------------------------- */

#define RO_THREADS 3
#define RO_LINES 200

struct ro_arg {
    struct kr_audit *au;
    pthread_barrier_t *bar;
    unsigned t;
};

static void *
ro_main(void *p)
{
    struct ro_arg *a = p;
    char line[300];
    unsigned i;

    for (i = 0; i < 2 * RO_LINES; i++) {
        int n;

        if (i == RO_LINES) {
            pthread_barrier_wait(a->bar);     /* lines written */
            pthread_barrier_wait(a->bar);     /* renamed, reopen asked */
        }
        n = ring_line(line, sizeof(line), a->t, i);
        KR_TEST_CHECK(kr_audit_write(a->au, line, (size_t)n), "refused");
    }
    return NULL;
}

/* Lines of thread t in text all, checked, with their indexes in
   [lo, hi) in order; returns how many. */
static unsigned
ro_check(const char *all, unsigned t, unsigned lo, unsigned hi)
{
    const char *p, *nl;
    unsigned n = 0;

    for (p = all; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
        unsigned lt, i;

        check_line(p, (size_t)(nl - p), &lt, &i);
        if (lt == t) {
            KR_TEST_CHECK(i == lo + n && i < hi, "thread %u line %u", t, i);
            n++;
        }
    }
    return n;
}

/*
 * Three threads write; the file is renamed after a flush and the sink
 * asked to reopen: every line written before is in the old file, every
 * line written after the request in the new one.
 */
START_TEST(test_ring_reopen)
{
    struct ro_arg args[RO_THREADS];
    pthread_t th[RO_THREADS];
    pthread_barrier_t bar;
    char path[128], old[140], err[256], *a, *b;
    struct kr_audit *au;
    unsigned k;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    snprintf(old, sizeof(old), "%s.1", path);
    au = kr_audit_open(path, 1u << 20, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    ck_assert_int_eq(pthread_barrier_init(&bar, NULL, RO_THREADS + 1), 0);
    for (k = 0; k < RO_THREADS; k++) {
        args[k].au = au;
        args[k].bar = &bar;
        args[k].t = k;
        ck_assert_int_eq(pthread_create(&th[k], NULL, ro_main, &args[k]),
                         0);
    }
    pthread_barrier_wait(&bar);
    kr_audit_flush(au);
    ck_assert_int_eq(rename(path, old), 0);
    ck_assert(kr_audit_reopen(au));
    pthread_barrier_wait(&bar);
    for (k = 0; k < RO_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
    }
    kr_audit_close(au);
    pthread_barrier_destroy(&bar);
    a = kr_test_slurp(old, NULL);
    b = kr_test_slurp(path, NULL);
    for (k = 0; k < RO_THREADS; k++) {
        ck_assert_uint_eq(ro_check(a, k, 0, RO_LINES), RO_LINES);
        ck_assert_uint_eq(ro_check(b, k, RO_LINES, 2 * RO_LINES), RO_LINES);
    }
    free(a);
    free(b);
}
END_TEST

/* ---- threads that end, the thread cache ---------------------------------- */

#define CE_LINES 50

struct ce_arg {
    struct kr_audit *au;
    unsigned t;
};

static void *
ce_main(void *p)
{
    struct ce_arg *a = p;
    char line[300];
    unsigned i;

    for (i = 0; i < CE_LINES; i++) {
        int n = ring_line(line, sizeof(line), a->t, i);

        KR_TEST_CHECK(kr_audit_write(a->au, line, (size_t)n), "refused");
    }
    return NULL;
}

/*
 * Threads write and end, two at a time, never flushed: their rings stay
 * (one each) and kr_audit_close writes what they hold and frees them
 * (the sanitizers' build checks the freeing).
 */
START_TEST(test_ring_close_ended)
{
    struct ce_arg args[8];
    pthread_t th[8];
    char path[128], err[256], *all;
    struct kr_audit *au;
    unsigned k;

    snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
    au = kr_audit_open(path, 0, err, sizeof(err));
    ck_assert_msg(au != NULL, "%s", err);
    for (k = 0; k < 8; k++) {
        args[k].au = au;
        args[k].t = k;
        ck_assert_int_eq(pthread_create(&th[k], NULL, ce_main, &args[k]),
                         0);
        if (k % 2 == 1) {
            ck_assert_int_eq(pthread_join(th[k - 1], NULL), 0);
            ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        }
    }
    ck_assert_uint_eq(kr_audit_rings(au), 8);
    kr_audit_close(au);                 /* no flush before */
    all = kr_test_slurp(path, NULL);
    for (k = 0; k < 8; k++) {
        ck_assert_uint_eq(ro_check(all, k, 0, CE_LINES), CE_LINES);
    }
    free(all);
}
END_TEST

/*
 * One thread and many sinks.  Sinks closed and opened again (often at
 * the same address): each line goes to the sink it was written to, never
 * through a ring of a closed one.  Six sinks at once, more than the
 * thread's cache remembers, written in turn: one ring per sink (the
 * thread finds its ring again), every line in order.
 */
START_TEST(test_ring_thread_cache)
{
    struct kr_audit *au[6];
    char path[128], err[256], line[300], *all;
    unsigned k, i;
    int n;

    for (k = 0; k < 5; k++) {
        snprintf(path, sizeof(path), "%s/again%u.log", tmpdir, k);
        au[0] = kr_audit_open(path, 0, err, sizeof(err));
        ck_assert_msg(au[0] != NULL, "%s", err);
        n = ring_line(line, sizeof(line), k, k);
        ck_assert(kr_audit_write(au[0], line, (size_t)n));
        kr_audit_close(au[0]);
        all = kr_test_slurp(path, NULL);
        ck_assert_uint_eq(ro_check(all, k, k, k + 1), 1);
        ck_assert_uint_eq(strlen(all), (size_t)n + 1);
        free(all);
    }
    for (k = 0; k < 6; k++) {
        snprintf(path, sizeof(path), "%s/many%u.log", tmpdir, k);
        au[k] = kr_audit_open(path, 0, err, sizeof(err));
        ck_assert_msg(au[k] != NULL, "%s", err);
    }
    for (i = 0; i < 300; i++) {
        for (k = 0; k < 6; k++) {
            n = ring_line(line, sizeof(line), k, i);
            ck_assert(kr_audit_write(au[k], line, (size_t)n));
        }
    }
    for (k = 0; k < 6; k++) {
        ck_assert_uint_eq(kr_audit_rings(au[k]), 1);
        kr_audit_close(au[k]);
        snprintf(path, sizeof(path), "%s/many%u.log", tmpdir, k);
        all = kr_test_slurp(path, NULL);
        ck_assert_uint_eq(ro_check(all, k, 0, 300), 300);
        free(all);
    }
    ck_assert_uint_eq(kr_audit_rings(NULL), 0);
}
END_TEST

/* One case per test: CK_RUN_CASE=flush runs one. */
static void
add_case(Suite *s, const char *name, const TTest *test)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

static Suite *
audit_ring_suite(void)
{
    Suite *s = suite_create("kr_audit_ring");

    add_case(s, "threads", test_ring_threads);
    add_case(s, "drops_exact", test_ring_drops_exact);
    add_case(s, "flush", test_ring_flush);
    add_case(s, "reopen", test_ring_reopen);
    add_case(s, "close_ended", test_ring_close_ended);
    add_case(s, "thread_cache", test_ring_thread_cache);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(audit_ring_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
