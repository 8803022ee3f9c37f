/*
 * check_admin.c - unit tests for the admin endpoint's pure parts and the
 * exposition it serves: kr_stats_prom followed by kr_admin_prom_process
 * under a strict checker of the Prometheus text format 0.0.4 (every
 * line HELP, TYPE or a sample; names and label names valid; label values
 * escaped; HELP then TYPE once per family before its samples; counters
 * end in _total; histogram buckets ascending, cumulative, +Inf equal to
 * _count), exact values, the bearer token check, and kr_worker_call on
 * a worker running on a thread of its own.
 */
#include "config.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kr_admin.h"
#include "kr_api_keys.h"
#include "kr_stats.h"
#include "kr_worker.h"

/* ---- the checker ---------------------------------------------------------- */

struct fam {
    char name[96];
    char type[16];
    bool help, typed;
    /* histogram state (one label set besides le: krelay's) */
    double last_le, last_bucket, count;
    bool inf, has_sum, has_count;
    int nsamples;
};

static bool
name_ok(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' ||
                    s[0] == ':')) {
        return false;
    }
    for (i = 1; i < n; i++) {
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':')) {
            return false;
        }
    }
    return true;
}

static bool
ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);

    return a >= b && strcmp(s + a - b, suf) == 0;
}

/*
 * Labels "{a="x",b="y"}" from *p: checked; le's value into le (or "").
 * Returns false with why.
 */
static bool
labels_ok(const char **p, char *le, size_t lelen, char *why, size_t wlen)
{
    const char *s = *p + 1;
    bool first = true;

    le[0] = '\0';
    for (;;) {
        const char *n0 = s;
        char val[256];
        size_t vl = 0;

        if (*s == '}' && !first) {
            *p = s + 1;
            return true;
        }
        if (!first) {
            if (*s != ',') {
                snprintf(why, wlen, "expected , or } at '%s'", s);
                return false;
            }
            n0 = ++s;
        }
        first = false;
        while (isalnum((unsigned char)*s) || *s == '_') {
            s++;
        }
        if (s == n0 || isdigit((unsigned char)*n0) ||
            strncmp(n0, "__", 2) == 0 || s[0] != '=' || s[1] != '"') {
            snprintf(why, wlen, "bad label at '%s'", n0);
            return false;
        }
        for (s += 2; *s != '"'; s++) {
            if (*s == '\0' || *s == '\n') {
                snprintf(why, wlen, "unterminated label value");
                return false;
            }
            if (*s == '\\') {
                s++;
                if (*s != '\\' && *s != '"' && *s != 'n') {
                    snprintf(why, wlen, "bad escape \\%c", *s);
                    return false;
                }
            }
            if (vl + 1 < sizeof(val)) {
                val[vl++] = *s;
            }
        }
        val[vl] = '\0';
        if ((size_t)(s - n0) > 3 && strncmp(n0, "le=", 3) == 0) {
            snprintf(le, lelen, "%.60s", val);
        }
        s++;
    }
}

/* A value: an integer or a decimal, nothing else. */
static bool
value_ok(const char *v, double *out)
{
    const char *s = v;

    if (*s == '-') {
        s++;
    }
    if (!isdigit((unsigned char)*s)) {
        return false;
    }
    while (isdigit((unsigned char)*s)) {
        s++;
    }
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s)) {
            return false;
        }
        while (isdigit((unsigned char)*s)) {
            s++;
        }
    }
    if (*s != '\0') {
        return false;
    }
    *out = strtod(v, NULL);
    return true;
}

/*
 * Check text strictly; returns the number of families, or -1 with why
 * (naming the line).
 */
static int
prom_check(const char *text, char *why, size_t wlen)
{
    struct fam *fams = calloc(256, sizeof(*fams));
    struct fam *cur = NULL;
    int nf = 0, ln = 0, i;
    const char *l = text;
    char line[1024], w[256];

    ck_assert_ptr_nonnull(fams);
#define FAIL_(...)                                                            \
    do {                                                                      \
        snprintf(w, sizeof(w), __VA_ARGS__);                                  \
        snprintf(why, wlen, "line %d: %.200s: '%.300s'", ln, w, line);               \
        free(fams);                                                           \
        return -1;                                                            \
    } while (0)
    if (text[0] == '\0' || text[strlen(text) - 1] != '\n') {
        snprintf(why, wlen, "no final newline");
        free(fams);
        return -1;
    }
    while (*l != '\0') {
        size_t n = strcspn(l, "\n");

        ln++;
        snprintf(line, sizeof(line), "%.*s", (int)n, l);
        l += n + 1;
        if (line[0] == '#') {
            char kw[8], name[128];
            const char *rest;
            int off = 0;

            if (sscanf(line, "# %7s %127s %n", kw, name, &off) < 2 ||
                off == 0) {
                FAIL_("bad comment");
            }
            rest = line + off;
            if (!name_ok(name, strlen(name)) ||
                strncmp(name, "krelay_", 7) != 0) {
                FAIL_("bad name");
            }
            if (strcmp(kw, "HELP") == 0) {
                for (i = 0; i < nf; i++) {
                    if (strcmp(fams[i].name, name) == 0) {
                        FAIL_("family twice");
                    }
                }
                if (cur != NULL && !cur->typed) {
                    FAIL_("previous family has no TYPE");
                }
                if (*rest == '\0') {
                    FAIL_("empty HELP");
                }
                for (; *rest; rest++) {
                    if (*rest == '\\' && rest[1] != '\\' && rest[1] != 'n') {
                        FAIL_("bad escape in HELP");
                    }
                    rest += *rest == '\\';
                }
                ck_assert_int_lt(nf, 256);
                cur = &fams[nf++];
                snprintf(cur->name, sizeof(cur->name), "%.90s", name);
                cur->help = true;
                cur->last_le = -1;
            } else if (strcmp(kw, "TYPE") == 0) {
                if (cur == NULL || strcmp(cur->name, name) != 0 ||
                    cur->typed || cur->nsamples > 0) {
                    FAIL_("TYPE not right after its HELP");
                }
                if (strcmp(rest, "counter") != 0 &&
                    strcmp(rest, "gauge") != 0 &&
                    strcmp(rest, "histogram") != 0) {
                    FAIL_("bad type");
                }
                snprintf(cur->type, sizeof(cur->type), "%s", rest);
                cur->typed = true;
                if ((strcmp(rest, "counter") == 0) !=
                    ends_with(name, "_total")) {
                    FAIL_("_total is for counters, and every counter");
                }
                if (strcmp(rest, "histogram") == 0 &&
                    !ends_with(name, "_seconds") &&
                    !ends_with(name, "_bytes")) {
                    FAIL_("histogram without a unit");
                }
            } else {
                FAIL_("comment neither HELP nor TYPE");
            }
            continue;
        }
        {
            const char *p = line, *sp;
            char sname[128], le[64] = "", lw[200];
            double v;
            size_t nl;

            while (isalnum((unsigned char)*p) || *p == '_' || *p == ':') {
                p++;
            }
            nl = (size_t)(p - line);
            if (!name_ok(line, nl) || nl >= sizeof(sname)) {
                FAIL_("bad sample name");
            }
            memcpy(sname, line, nl);
            sname[nl] = '\0';
            if (*p == '{' &&
                !labels_ok(&p, le, sizeof(le), lw, sizeof(lw))) {
                FAIL_("labels: %.150s", lw);
            }
            if (*p != ' ') {
                FAIL_("expected one space before the value");
            }
            sp = p + 1;
            if (!value_ok(sp, &v)) {
                FAIL_("bad value");
            }
            if (cur == NULL || !cur->typed) {
                FAIL_("sample outside a family");
            }
            cur->nsamples++;
            if (strcmp(cur->type, "histogram") != 0) {
                if (strcmp(sname, cur->name) != 0 || le[0] != '\0') {
                    FAIL_("not a sample of %s", cur->name);
                }
                if (strcmp(cur->type, "counter") == 0 && v < 0) {
                    FAIL_("negative counter");
                }
                continue;
            }
            if (strncmp(sname, cur->name, strlen(cur->name)) != 0) {
                FAIL_("not a sample of %s", cur->name);
            }
            p = sname + strlen(cur->name);
            if (strcmp(p, "_bucket") == 0) {
                double b = strcmp(le, "+Inf") == 0 ? INFINITY
                                                   : strtod(le, NULL);

                if (le[0] == '\0' || cur->inf || b <= cur->last_le ||
                    v < cur->last_bucket) {
                    FAIL_("bucket out of order or not cumulative");
                }
                cur->last_le = b;
                cur->last_bucket = v;
                cur->inf = isinf(b);
            } else if (strcmp(p, "_sum") == 0) {
                if (!cur->inf || cur->has_sum) {
                    FAIL_("_sum before +Inf or twice");
                }
                cur->has_sum = true;
            } else if (strcmp(p, "_count") == 0) {
                if (!cur->inf || cur->has_count || v != cur->last_bucket) {
                    FAIL_("_count missing +Inf or not equal to it");
                }
                cur->has_count = true;
            } else {
                FAIL_("not a histogram sample");
            }
        }
    }
    for (i = 0; i < nf; i++) {
        if (!fams[i].typed || (strcmp(fams[i].type, "histogram") == 0 &&
                               (!fams[i].has_sum || !fams[i].has_count))) {
            snprintf(why, wlen, "family %s incomplete", fams[i].name);
            free(fams);
            return -1;
        }
    }
    free(fams);
    return nf;
#undef FAIL_
}

/* ---- tests ---------------------------------------------------------------- */

/* The checker itself refuses what it must (a checker that passes all
   would prove nothing). */
START_TEST(checker_refuses)
{
    static const char *const bad[] = {
        "# HELP krelay_a_total x\nkrelay_a_total 1\n",        /* no TYPE */
        "# HELP krelay_a x\n# TYPE krelay_a counter\nkrelay_a 1\n",
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n"
        "krelay_a_total{l=\"x} 1\n",
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n"
        "krelay_a_total{l=\"a\\q\"} 1\n",
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n"
        "krelay_a_total 1e3\n",
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n"
        "krelay_b_total 1\n",
        "# HELP krelay_h_seconds x\n# TYPE krelay_h_seconds histogram\n"
        "krelay_h_seconds_bucket{le=\"1\"} 2\n"
        "krelay_h_seconds_bucket{le=\"+Inf\"} 1\n"
        "krelay_h_seconds_sum 1\nkrelay_h_seconds_count 1\n",
        "# HELP krelay_h_seconds x\n# TYPE krelay_h_seconds histogram\n"
        "krelay_h_seconds_bucket{le=\"+Inf\"} 2\n"
        "krelay_h_seconds_sum 1\nkrelay_h_seconds_count 3\n",
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n"
        "krelay_a_total 1",                                   /* no \n */
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n\n",
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n"
        "# HELP krelay_a_total x\n# TYPE krelay_a_total counter\n",
    };
    char why[512];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(prom_check(bad[i], why, sizeof(why)) < 0,
                      "case %zu passed", i);
    }
    ck_assert_int_eq(prom_check("# HELP krelay_a_total x\n"
                                "# TYPE krelay_a_total counter\n"
                                "krelay_a_total{l=\"a\\\"\\\\\\n\"} 1\n",
                                why, sizeof(why)), 1);
}
END_TEST

static const char *
rule_name(int i, void *arg)
{
    (void)arg;
    return i == 3 ? "odd \"rule\" \\ with\nnewline" : NULL;
}

/* The whole exposition of two workers plus the process part. */
START_TEST(exposition_strict)
{
    struct kr_stats *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    const struct kr_stats *st[2];
    struct kr_admin_proc p;
    char *text = NULL, why[1200];
    size_t len = 0;
    FILE *f;
    int nf;

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    KR_STAT_ADD(a, requests, 5);
    KR_STAT_ADD(b, requests, 6);
    KR_STAT_INC_L(a, api_requests, kr_stats_api_cell(KR_API_PRODUCE, 9));
    KR_STAT_INC_L(b, api_responses, kr_stats_api_cell(KR_API_FETCH, 12));
    KR_STAT_INC_L(b, api_requests, kr_stats_api_cell(-3, 0));   /* other */
    KR_STAT_INC_L(a, rule_hits, kr_stats_rule_cell(3, KR_RA_CLAMP));
    KR_STAT_INC_L(a, rule_hits, kr_stats_rule_cell(4, KR_RA_THROTTLE));
    KR_STAT_INC_L(b, errors_answered, kr_stats_kerr_cell(-1));
    KR_STAT_INC_L(b, closes, KR_CLOSE_BAD_INPUT);
    kr_stats_observe_latency(a, 1234567);       /* +Inf */
    kr_stats_observe_latency(b, 7);
    kr_stats_observe_latency(b, 0);
    st[0] = a;
    st[1] = b;
    memset(&p, 0, sizeof(p));
    p.version = "1.2.3-\"x\"";
    p.workers = 2;
    p.reloads_ok = 3;
    p.reloads_failed = 1;
    p.conf_loaded_us = 1700000000123456;
    p.conf_load_us = 1500;
    p.started_us = 1700000000000001;
    p.audit = true;
    p.audit_written = 10;
    p.audit_dropped = 2;
    f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(kr_stats_prom(f, st, 2, rule_name, NULL), 0);
    ck_assert_int_eq(kr_admin_prom_process(f, &p), 0);
    fclose(f);
    nf = prom_check(text, why, sizeof(why));
    ck_assert_msg(nf > 0, "%s", why);
    /* every row of the table, and the process families */
    ck_assert_int_eq(nf, KR_STAT__N + 9);
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_requests_total 11\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_api_requests_total{api="
                                       "\"other\",version=\"other\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_api_responses_total{api="
                                       "\"Fetch\",version=\"12\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_rule_hits_total{rule="
                                       "\"odd \\\"rule\\\" \\\\ with\\n"
                                       "newline\",action=\"clamp\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_rule_hits_total{rule="
                                       "\"rule4\",action=\"throttle\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_errors_answered_total{"
                                       "error=\"UNKNOWN_SERVER_ERROR\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_closes_total{cause="
                                       "\"bad_input\"} 1\n"));
    /* the sum exactly: 1234.567 + 0.007 s, not %g's 6 digits */
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_response_latency_seconds_"
                                       "sum 1234.574\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_response_latency_seconds_"
                                       "bucket{le=\"0.001\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_response_latency_seconds_"
                                       "bucket{le=\"30\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_response_latency_seconds_"
                                       "count 3\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_build_info{version="
                                       "\"1.2.3-\\\"x\\\"\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_reloads_total{result="
                                       "\"ok\"} 3\nkrelay_reloads_total{"
                                       "result=\"failed\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_config_load_timestamp_"
                                       "seconds 1700000000.123456\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_config_load_duration_"
                                       "seconds 0.001500\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_audit_lines_dropped_total "
                                       "2\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_workers 2\n"));
    free(text);
    free(a);
    free(b);
}
END_TEST

START_TEST(bearer_token)
{
    ck_assert(kr_admin_auth_ok(NULL, NULL));
    ck_assert(kr_admin_auth_ok(NULL, "anything"));
    ck_assert(!kr_admin_auth_ok("s3cret", NULL));
    ck_assert(kr_admin_auth_ok("s3cret", "Bearer s3cret"));
    ck_assert(kr_admin_auth_ok("s3cret", "bearer s3cret"));
    ck_assert(!kr_admin_auth_ok("s3cret", "Bearer s3cre"));
    ck_assert(!kr_admin_auth_ok("s3cret", "Bearer s3cret2"));
    ck_assert(!kr_admin_auth_ok("s3cret", "Basic s3cret"));
    ck_assert(!kr_admin_auth_ok("s3cret", "s3cret"));
    ck_assert(!kr_admin_auth_ok("s3cret", "Bearer "));
}
END_TEST

/* ---- kr_worker_call ------------------------------------------------------- */

struct call_arg {
    pthread_t caller;
    atomic_int ran, cancelled;
    atomic_bool other_thread;
};

static void
call_fn(struct kr_worker *w, void *arg)
{
    struct call_arg *c = arg;

    if (w == NULL) {
        atomic_fetch_add(&c->cancelled, 1);
        return;
    }
    atomic_store(&c->other_thread,
                 !pthread_equal(pthread_self(), c->caller));
    atomic_fetch_add(&c->ran, 1);
}

static void
noop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void *
loop_main(void *arg)
{
    event_base_dispatch(arg);
    return NULL;
}

/* A call runs on the worker's own thread; after the stop it is refused,
   and one queued before a free is cancelled (fn with NULL), once. */
START_TEST(worker_call)
{
    struct event_base *base = event_base_new();
    struct kr_worker *w;
    struct call_arg c;
    pthread_t t;
    struct timeval keep = { 60, 0 };
    struct event *ev;
    int i;

    ck_assert_ptr_nonnull(base);
    memset(&c, 0, sizeof(c));
    c.caller = pthread_self();
    w = kr_worker_new(base, 0, NULL, true);
    ck_assert_ptr_nonnull(w);
    /* keep the loop alive while nothing else is pending */
    ev = event_new(base, -1, 0, noop_cb, NULL);
    ck_assert_ptr_nonnull(ev);
    event_add(ev, &keep);
    ck_assert_int_eq(pthread_create(&t, NULL, loop_main, base), 0);
    ck_assert_int_eq(kr_worker_call(w, call_fn, &c), KR_OK);
    for (i = 0; i < 500 && atomic_load(&c.ran) == 0; i++) {
        usleep(10000);
    }
    ck_assert_int_eq(atomic_load(&c.ran), 1);
    ck_assert(atomic_load(&c.other_thread));
    /* stop through the mailbox: the loop breaks */
    {
        struct kr_wgen *gen = kr_wgen_new(NULL, NULL, 0);

        ck_assert_ptr_nonnull(gen);
        gen->stop = true;
        kr_worker_post(w, gen);
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(kr_worker_call(w, call_fn, &c), KR_ERROR);
    ck_assert_int_eq(atomic_load(&c.ran), 1);
    ck_assert_int_eq(atomic_load(&c.cancelled), 0);
    kr_worker_free(w);
    /* queued, never run: cancelled at free */
    w = kr_worker_new(base, 1, NULL, false);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(kr_worker_call(w, call_fn, &c), KR_OK);
    kr_worker_free(w);
    ck_assert_int_eq(atomic_load(&c.cancelled), 1);
    ck_assert_int_eq(atomic_load(&c.ran), 1);
    event_free(ev);
    event_base_free(base);
}
END_TEST

static Suite *
admin_suite(void)
{
    Suite *s = suite_create("admin");
    TCase *tc = tcase_create("admin");

    tcase_add_test(tc, checker_refuses);
    tcase_add_test(tc, exposition_strict);
    tcase_add_test(tc, bearer_token);
    tcase_add_test(tc, worker_call);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(admin_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
