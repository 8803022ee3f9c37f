/*
 * bench_audit - what one audit line costs, piece by piece, for
 * `make bench` (issue 14), on one thread.
 *
 *   bench_audit [-t SECONDS]
 *
 * The line is a representative request line: a Produce v9 request from
 * one client naming one topic and partition, answered without error
 * (frames built by kb_wire.h and decoded by the codec, as the proxy
 * does).  Benchmarks, each in nanoseconds per operation:
 *   audit_capture    kr_audit_capture + kr_audit_req_free (what the
 *                    session keeps of a request until its response);
 *   audit_format     kr_audit_format + free (the line as krelay writes
 *                    it: kr_jsonw, no tree);
 *   audit_time       kr_audit_time alone (part of both line benches);
 *   jansson_line     the same keys and values as a jansson tree, dumped
 *                    (json_dumps) and freed: how kr_audit_format wrote
 *                    lines until issue 14, without the lookups;
 *   jsonw_line       the same text written by kr_jsonw into a writer
 *                    reused from line to line (no allocation);
 *   jsonw_line_take  the same, handed over as a malloc'd string and freed
 *                    (kr_jsonw_take), as a caller that keeps lines would;
 *   json_dumps_tree  json_dumps of a built tree alone (no building);
 *   jsonw_dump_tree  kr_jsonw_json of the same tree (its replacement);
 *   sink_write       kr_audit_write of the line to a sink on /dev/null
 *                    from this thread at 100,000 lines a second (bursts
 *                    of 1,000 lines, a sleep after each: about the rate of
 *                    the produce_1rec workload; flat out, the queue would
 *                    fill and drop): "ns_per_op" is this thread's CPU
 *                    time per line, "process_ns_per_op" the whole
 *                    process's (the sink's writer thread too), both less
 *                    those of the same paced loop without a sink (its
 *                    sleeps); "dropped" lines the full queue refused (0
 *                    expected).
 * Before timing, jansson_line and jsonw_line must give the same bytes and
 * kr_jsonw_json the same as json_dumps (else exit 1: the benchmark would
 * compare different things).  Prints one JSON object on stdout:
 *   {"mode":"audit","seconds_each":S,"line_bytes":N,
 *    "benches":[{"name":..,"ns_per_op":..,"ops":..,"bytes":..}, ...]}
 * (contrib/bench/results/README.md).
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kr_arena.h"
#include "kr_audit.h"
#include "kr_codec.h"
#include "kr_common.h"
#include "kr_json.h"
#include "kr_jsonw.h"

#include "kb_wire.h"

static double
ba_clock(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
ba_die(const char *what)
{
    fprintf(stderr, "bench_audit: %s\n", what);
    exit(1);
}

typedef void (*ba_fn)(void *arg);

struct ba_result {
    const char *name;
    double ns;                      /* per operation */
    uint64_t ops;
    size_t bytes;                   /* output of one operation */
    double process_ns;              /* sink_write: the whole process */
    uint64_t dropped;
};

/* Nanoseconds per call of fn over about secs seconds (monotonic clock,
   one thread). */
static double
ba_time(ba_fn fn, void *arg, double secs, uint64_t *ops)
{
    uint64_t iters = 0, batch = 1;
    double t0, t;

    fn(arg);                        /* warm caches and the allocator */
    t0 = ba_clock(CLOCK_MONOTONIC);
    for (;;) {
        for (uint64_t i = 0; i < batch; i++) {
            fn(arg);
        }
        iters += batch;
        t = ba_clock(CLOCK_MONOTONIC) - t0;
        if (t >= secs) {
            break;
        }
        if (t < secs / 20 && batch < (1u << 20)) {
            batch *= 2;
        }
    }
    *ops = iters;
    return t * 1e9 / (double)iters;
}

/* ---- the line's inputs ---------------------------------------------------- */

/* The representative line's values (what the session would give). */
static const struct {
    int64_t time_us;
    const char *listener, *client_addr, *client_id;
    uint16_t client_port;
    int16_t api_version;
    int32_t correlation_id;
    uint64_t rsp_bytes;
    int64_t upstream_us, total_us;
} L = {
    (int64_t)1764590400 * 1000000 + 123456, "default", "127.0.0.1",
    "krbench", 33284, 9, 3, 55, 31, 33
};

struct ba_ctx {
    struct kr_arena arena;
    struct kr_rbuf rb;              /* the request's payload */
    struct iovec iov;
    uint64_t req_bytes;
    struct kr_msg req, rsp;
    struct kr_audit_info info;
    struct kr_audit_req *cap;
    json_t *tree;                   /* built once: the dump benches */
    struct kr_jsonw w;
    struct kr_audit *sink;
    size_t line_len;
    const char *line;               /* for sink_write */
};

/*
 * The only two places that know kr_audit_info's fields and
 * kr_audit_capture's arguments (both change with the audit line's
 * content).
 */
static void
ba_info(struct ba_ctx *c)
{
    memset(&c->info, 0, sizeof(c->info));
    c->info.time_us = L.time_us;
    c->info.peer.listener = L.listener;
    c->info.peer.client_addr = L.client_addr;
    c->info.peer.client_port = L.client_port;
    c->info.api_key = 0;
    c->info.api_version = L.api_version;
    c->info.correlation_id = L.correlation_id;
    c->info.req_bytes = c->req_bytes;
    c->info.rsp_bytes = L.rsp_bytes;
    c->info.upstream_us = L.upstream_us;
    c->info.total_us = L.total_us;
    c->info.actions = KR_AUDIT_FORWARDED;
}

static struct kr_audit_req *
ba_cap(struct ba_ctx *c)
{
    return kr_audit_capture(&c->req, &c->rb, NULL, false);
}

static void
ba_inputs(struct ba_ctx *c)
{
    static const char rsp_json[] =
        "{\"apiKey\":0,\"apiVersion\":9,\"header\":{\"CorrelationId\":3},"
        "\"body\":{\"Responses\":[{\"Name\":\"orders\",\"PartitionResponses\":"
        "[{\"Index\":0,\"ErrorCode\":0,\"BaseOffset\":42}]}],"
        "\"ThrottleTimeMs\":0}}";
    static struct kb_buf frame;
    struct kr_codec_err err;
    json_t *j;

    kr_arena_init(&c->arena, 0);
    kb_produce_frame(&frame, L.api_version, "orders", 0, 1, 1, 100);
    kb_set_i32(&frame, 8, L.correlation_id);
    kr_rbuf_init_flat(&c->rb, &c->iov, frame.p + 4, frame.len - 4);
    c->req_bytes = frame.len;
    memset(&err, 0, sizeof(err));
    if (kr_decode_request(&c->arena, &c->rb, 0, &c->req, &err) != KR_OK) {
        ba_die("the Produce request does not decode");
    }
    j = json_loads(rsp_json, 0, NULL);
    if (j == NULL ||
        kr_json_to_msg(&c->arena, j, NULL, &c->rsp, &err) != KR_OK) {
        ba_die("the Produce response does not build");
    }
    json_decref(j);
    ba_info(c);
    c->cap = ba_cap(c);
    if (c->cap == NULL) {
        ba_die("kr_audit_capture failed");
    }
    kr_jsonw_init(&c->w);
}

/* ---- benchmarks ----------------------------------------------------------- */

static void
ba_capture(void *arg)
{
    struct ba_ctx *c = arg;

    kr_audit_req_free(ba_cap(c));
}

static void
ba_format(void *arg)
{
    struct ba_ctx *c = arg;
    char *s = kr_audit_format(&c->info, c->cap, &c->rsp, false);

    if (s == NULL) {
        ba_die("kr_audit_format failed");
    }
    free(s);
}

static void
ba_time_only(void *arg)
{
    char ts[40];

    (void)arg;

    kr_audit_time(L.time_us, ts, sizeof(ts));
    __asm__ volatile("" : : "r"(ts) : "memory");
}

/* The jansson tree of the representative line (as kr_audit_format builds
   it: every key set in turn). */
static json_t *
ba_tree(const struct ba_ctx *c)
{
    json_t *o = json_object(), *topics = json_array(), *t = json_object();
    json_t *actions = json_array();
    char ts[40];

    kr_audit_time(L.time_us, ts, sizeof(ts));
    json_object_set_new(o, "time", json_string(ts));
    json_object_set_new(o, "type", json_string("request"));
    json_object_set_new(o, "listener", json_stringn(L.listener,
                                                    strlen(L.listener)));
    json_object_set_new(o, "client_addr",
                        json_stringn(L.client_addr, strlen(L.client_addr)));
    json_object_set_new(o, "client_port", json_integer(L.client_port));
    json_object_set_new(o, "client_id",
                        json_stringn(L.client_id, strlen(L.client_id)));
    json_object_set_new(o, "api", json_string("Produce"));
    json_object_set_new(o, "api_key", json_integer(0));
    json_object_set_new(o, "api_version", json_integer(L.api_version));
    json_object_set_new(o, "correlation_id",
                        json_integer(L.correlation_id));
    json_object_set_new(o, "request_bytes",
                        json_integer((json_int_t)c->req_bytes));
    json_object_set_new(o, "response_bytes",
                        json_integer((json_int_t)L.rsp_bytes));
    json_object_set_new(o, "upstream_us", json_integer(L.upstream_us));
    json_object_set_new(o, "total_us", json_integer(L.total_us));
    json_object_set_new(t, "name", json_stringn("orders", 6));
    json_object_set_new(t, "partitions", json_integer(1));
    json_array_append_new(topics, t);
    json_object_set_new(o, "topics", topics);
    json_object_set_new(o, "errors", json_object());
    json_array_append_new(actions, json_string("forwarded"));
    json_object_set_new(o, "actions", actions);
    return o;
}

static void
ba_jansson_line(void *arg)
{
    struct ba_ctx *c = arg;
    json_t *o = ba_tree(c);
    char *s = json_dumps(o, JSON_COMPACT);

    json_decref(o);
    if (s == NULL) {
        ba_die("json_dumps failed");
    }
    free(s);
}

/* The same line with the direct writer, into c->w. */
static void
ba_jsonw_write(struct ba_ctx *c)
{
    struct kr_jsonw *w = &c->w;
    char ts[40];

    kr_jsonw_reset(w);
    kr_audit_time(L.time_us, ts, sizeof(ts));
    kr_jsonw_obj_open(w);
    kr_jsonw_kcstr(w, "time", ts);
    kr_jsonw_kcstr(w, "type", "request");
    kr_jsonw_kcstr(w, "listener", L.listener);
    kr_jsonw_kcstr(w, "client_addr", L.client_addr);
    kr_jsonw_kint(w, "client_port", L.client_port);
    kr_jsonw_kcstr(w, "client_id", L.client_id);
    kr_jsonw_kcstr(w, "api", "Produce");
    kr_jsonw_kint(w, "api_key", 0);
    kr_jsonw_kint(w, "api_version", L.api_version);
    kr_jsonw_kint(w, "correlation_id", L.correlation_id);
    kr_jsonw_kint(w, "request_bytes", (int64_t)c->req_bytes);
    kr_jsonw_kint(w, "response_bytes", (int64_t)L.rsp_bytes);
    kr_jsonw_kint(w, "upstream_us", L.upstream_us);
    kr_jsonw_kint(w, "total_us", L.total_us);
    kr_jsonw_key(w, "topics");
    kr_jsonw_arr_open(w);
    kr_jsonw_obj_open(w);
    kr_jsonw_kstr(w, "name", "orders", 6);
    kr_jsonw_kint(w, "partitions", 1);
    kr_jsonw_obj_close(w);
    kr_jsonw_arr_close(w);
    kr_jsonw_key(w, "errors");
    kr_jsonw_obj_open(w);
    kr_jsonw_obj_close(w);
    kr_jsonw_key(w, "actions");
    kr_jsonw_arr_open(w);
    kr_jsonw_cstr(w, "forwarded");
    kr_jsonw_arr_close(w);
    kr_jsonw_obj_close(w);
    if (!kr_jsonw_ok(w)) {
        ba_die("kr_jsonw failed");
    }
}

static void
ba_jsonw_line(void *arg)
{
    ba_jsonw_write(arg);
}

static void
ba_jsonw_line_take(void *arg)
{
    struct ba_ctx *c = arg;

    ba_jsonw_write(c);
    free(kr_jsonw_take(&c->w, NULL));
}

static void
ba_dumps_tree(void *arg)
{
    struct ba_ctx *c = arg;

    free(json_dumps(c->tree, JSON_COMPACT));
}

static void
ba_jsonw_tree(void *arg)
{
    struct ba_ctx *c = arg;

    kr_jsonw_reset(&c->w);
    kr_jsonw_json(&c->w, c->tree);
}

/* Lines per burst, and bursts a second, of sink_write. */
#define BA_SINK_BURST 1000
#define BA_SINK_BURSTS_PER_S 100

/* Paced writes for about secs seconds; returns the lines written. */
static uint64_t
ba_sink_run(struct ba_ctx *c, double secs)
{
    struct timespec next;
    uint64_t lines = 0, bursts = (uint64_t)(secs * BA_SINK_BURSTS_PER_S);

    clock_gettime(CLOCK_MONOTONIC, &next);
    for (uint64_t k = 0; k < bursts; k++) {
        for (unsigned i = 0; i < BA_SINK_BURST; i++) {
            (void)kr_audit_write(c->sink, c->line, c->line_len);
        }
        lines += BA_SINK_BURST;
        next.tv_nsec += 1000000000L / BA_SINK_BURSTS_PER_S;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    return lines;
}

int
main(int argc, char **argv)
{
    static struct ba_ctx c;
    struct ba_result r[16];
    double secs = 0.3, p0, p1, th0, th1;
    char *a, *b, err[256];
    unsigned n = 0, i;
    int opt;

    while ((opt = getopt(argc, argv, "t:")) != -1) {
        if (opt == 't') {
            secs = atof(optarg);
            if (secs <= 0 || secs > 60) {
                ba_die("-t wants 0..60 seconds");
            }
        } else {
            fprintf(stderr, "usage: bench_audit [-t SECONDS]\n");
            return 2;
        }
    }
    ba_inputs(&c);

    /* The benchmarks must compare the same text. */
    c.tree = ba_tree(&c);
    a = json_dumps(c.tree, JSON_COMPACT);
    ba_jsonw_write(&c);
    if (a == NULL || strcmp(a, c.w.buf) != 0) {
        fprintf(stderr, "jansson: %s\njsonw:   %s\n", a ? a : "(null)",
                c.w.buf);
        ba_die("kr_jsonw and jansson wrote different lines");
    }
    kr_jsonw_reset(&c.w);
    kr_jsonw_json(&c.w, c.tree);
    if (strcmp(a, c.w.buf) != 0) {
        ba_die("kr_jsonw_json and json_dumps differ");
    }
    b = kr_audit_format(&c.info, c.cap, &c.rsp, false);
    if (b == NULL) {
        ba_die("kr_audit_format failed");
    }

#define BA_RUN(nm, fn, out)                                                 \
    do {                                                                    \
        memset(&r[n], 0, sizeof(r[n]));                                     \
        r[n].name = (nm);                                                   \
        r[n].ns = ba_time((fn), &c, secs, &r[n].ops);                       \
        r[n].bytes = (out);                                                 \
        n++;                                                                \
    } while (0)

    BA_RUN("audit_capture", ba_capture, 0);
    BA_RUN("audit_format", ba_format, strlen(b));
    BA_RUN("audit_time", ba_time_only, 27);
    BA_RUN("jansson_line", ba_jansson_line, strlen(a));
    BA_RUN("jsonw_line", ba_jsonw_line, strlen(a));
    BA_RUN("jsonw_line_take", ba_jsonw_line_take, strlen(a));
    BA_RUN("json_dumps_tree", ba_dumps_tree, strlen(a));
    BA_RUN("jsonw_dump_tree", ba_jsonw_tree, strlen(a));

    /* The sink: this thread's CPU and the process's per line. */
    c.sink = kr_audit_open("/dev/null", 0, err, sizeof(err));
    if (c.sink == NULL) {
        ba_die(err);
    }
    c.line = b;
    c.line_len = strlen(b);
    memset(&r[n], 0, sizeof(r[n]));
    r[n].name = "sink_write";
    {
        struct kr_audit *sink = c.sink;
        double bt, bp;

        /* the pacing alone (kr_audit_write(NULL) returns at once) */
        c.sink = NULL;
        p0 = ba_clock(CLOCK_PROCESS_CPUTIME_ID);
        th0 = ba_clock(CLOCK_THREAD_CPUTIME_ID);
        (void)ba_sink_run(&c, secs < 1 ? 1 : secs);
        bt = ba_clock(CLOCK_THREAD_CPUTIME_ID) - th0;
        bp = ba_clock(CLOCK_PROCESS_CPUTIME_ID) - p0;
        c.sink = sink;
        p0 = ba_clock(CLOCK_PROCESS_CPUTIME_ID);
        th0 = ba_clock(CLOCK_THREAD_CPUTIME_ID);
        r[n].ops = ba_sink_run(&c, secs < 1 ? 1 : secs);
        kr_audit_flush(c.sink);
        th1 = ba_clock(CLOCK_THREAD_CPUTIME_ID);
        p1 = ba_clock(CLOCK_PROCESS_CPUTIME_ID);
        r[n].ns = (th1 - th0 - bt) * 1e9 / (double)r[n].ops;
        r[n].process_ns = (p1 - p0 - bp) * 1e9 / (double)r[n].ops;
    }
    r[n].dropped = kr_audit_dropped(c.sink);
    r[n].bytes = c.line_len + 1;
    n++;
    kr_audit_close(c.sink);

    printf("{\"mode\":\"audit\",\"seconds_each\":%.2f,\"line_bytes\":%zu,"
           "\"benches\":[\n", secs, strlen(b));
    for (i = 0; i < n; i++) {
        printf("{\"name\":\"%s\",\"ns_per_op\":%.1f,\"ops\":%llu,"
               "\"bytes\":%zu", r[i].name, r[i].ns,
               (unsigned long long)r[i].ops, r[i].bytes);
        if (strcmp(r[i].name, "sink_write") == 0) {
            printf(",\"process_ns_per_op\":%.1f,\"dropped\":%llu",
                   r[i].process_ns, (unsigned long long)r[i].dropped);
        }
        printf("}%s\n", i + 1 < n ? "," : "");
    }
    printf("]}\n");
    free(a);
    free(b);
    json_decref(c.tree);
    kr_jsonw_free(&c.w);
    kr_audit_req_free(c.cap);
    kr_arena_free(&c.arena);
    return 0;
}
