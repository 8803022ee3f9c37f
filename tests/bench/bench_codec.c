/*
 * bench_codec - micro-benchmarks of krelay's codec for `make bench`
 * (issue 4), each also as a ratio to memcpy of the same bytes.
 *
 *   bench_codec [-t SECONDS] [-V PRODUCE_VERSION]
 *
 * Benchmarks (frames built by kb_wire.h, independently of the codec):
 *   produce_1mib      Produce with one topic, one partition holding one
 *                     1 MiB RecordBatch (1024 records of 1014 bytes);
 *   produce_100x4k    Produce with 100 partitions of a 4 KiB batch each;
 *   produce_small     Produce with one 100-byte record (small requests);
 *   metadata_rewrite  kr_rewrite_response on a Metadata v12 response with
 *                     3 brokers and one topic of 1,000 partitions.
 * For the Produce frames one operation is kr_decode_request +
 * kr_encode_msg of the payload (records stay slices: nothing copies
 * them, exactly as the proxy would); decode-only is reported as well.
 * For metadata_rewrite one operation is: reference the payload in an
 * evbuffer (no copy), kr_rewrite_response, drain the output.
 * memcpy_mb_per_s copies the same number of bytes (the payload) from one
 * buffer to another, over and over; ratio_to_memcpy = mb_per_s /
 * memcpy_mb_per_s (>= 1 means faster than copying the bytes once).
 *
 * Each measurement runs for about SECONDS (default 0.5) on one thread;
 * MB = 10^6 bytes.  Before timing, every frame is decoded, re-encoded and
 * compared byte for byte with the original: a codec that does not round-
 * trip fails the benchmark (exit 1) rather than measure the wrong thing.
 * Prints one JSON object on stdout (contrib/bench/results/README.md).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "kr_codec.h"
#include "kr_common.h"
#include "kr_rewrite.h"

#include "kb_wire.h"

static double
bc_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
bc_die(const char *what, const struct kr_codec_err *err)
{
    fprintf(stderr, "bench_codec: %s", what);
    if (err != NULL) {
        fprintf(stderr, ": %s at %s (offset %zu, %s)", err->msg, err->path,
                err->offset, kr_status_str(err->status));
    }
    fputc('\n', stderr);
    exit(1);
}

/* ---- timing ------------------------------------------------------------ */

typedef void (*bc_fn)(void *arg);

/* Operations per second of fn over about secs seconds. */
static double
bc_rate(bc_fn fn, void *arg, double secs)
{
    uint64_t iters = 0, batch = 1;
    double t0 = bc_now(), t;

    fn(arg);                        /* warm caches and arenas */
    t0 = bc_now();
    for (;;) {
        for (uint64_t i = 0; i < batch; i++) {
            fn(arg);
        }
        iters += batch;
        t = bc_now() - t0;
        if (t >= secs) {
            break;
        }
        if (t < secs / 20 && batch < (1u << 24)) {
            batch *= 2;
        }
    }
    return (double)iters / t;
}

struct bc_copy {
    const uint8_t *src;
    uint8_t *dst;
    size_t len;
};

static void
bc_memcpy(void *arg)
{
    struct bc_copy *c = arg;

    memcpy(c->dst, c->src, c->len);
    /* Keep the copy observable so it is not optimised away. */
    __asm__ volatile("" : : "r"(c->dst) : "memory");
}

/* ---- decode + encode ---------------------------------------------------- */

struct bc_codec {
    struct kr_arena arena;
    struct kr_wbuf w;
    struct kr_rbuf rb;
    struct iovec iov;
    const uint8_t *payload;
    size_t len;
    bool encode;
};

static void
bc_codec_op(void *arg)
{
    struct bc_codec *b = arg;
    struct kr_msg m;
    struct kr_codec_err err;

    kr_arena_reset(&b->arena);
    if (kr_decode_request(&b->arena, &b->rb, 0, &m, &err) != KR_OK) {
        bc_die("decode", &err);
    }
    if (b->encode) {
        kr_wbuf_reset(&b->w);
        if (kr_encode_msg(&m, &b->w, &err) != KR_OK) {
            bc_die("encode", &err);
        }
    }
}

/* Decode, encode, flatten and compare once; die unless identical. */
static void
bc_codec_check(struct bc_codec *b, const char *name)
{
    struct kr_msg m;
    struct kr_codec_err err;
    uint8_t *flat;

    kr_arena_reset(&b->arena);
    if (kr_decode_request(&b->arena, &b->rb, KR_DEC_STRICT, &m, &err) !=
        KR_OK) {
        bc_die(name, &err);
    }
    kr_wbuf_reset(&b->w);
    if (kr_encode_msg(&m, &b->w, &err) != KR_OK) {
        bc_die(name, &err);
    }
    flat = kr_wbuf_flatten(&b->w, b->payload, b->len);
    if (flat == NULL || b->w.total != b->len ||
        memcmp(flat, b->payload, b->len) != 0) {
        bc_die("re-encoded Produce differs from the original", NULL);
    }
    free(flat);
}

struct bc_result {
    const char *name;
    size_t bytes;
    double ops, decode_ops, memcpy_ops;
};

static struct bc_result
bc_run_produce(const char *name, int version, int nparts, int nrec,
               size_t vlen, double secs)
{
    struct kb_buf frame = { 0 };
    struct bc_codec b;
    struct bc_copy c;
    struct bc_result r = { .name = name };

    kb_produce_frame(&frame, version, "bench", 0, nparts, nrec, vlen);
    memset(&b, 0, sizeof(b));
    kr_arena_init(&b.arena, 0);
    b.payload = frame.p + 4;
    b.len = frame.len - 4;
    kr_rbuf_init_flat(&b.rb, &b.iov, b.payload, b.len);
    bc_codec_check(&b, name);
    r.bytes = b.len;
    b.encode = true;
    r.ops = bc_rate(bc_codec_op, &b, secs);
    b.encode = false;
    r.decode_ops = bc_rate(bc_codec_op, &b, secs);
    c.src = b.payload;
    c.len = b.len;
    c.dst = malloc(b.len);
    if (c.dst == NULL) {
        bc_die("out of memory", NULL);
    }
    r.memcpy_ops = bc_rate(bc_memcpy, &c, secs);
    free(c.dst);
    kr_wbuf_free(&b.w);
    kr_arena_free(&b.arena);
    free(frame.p);
    return r;
}

/* ---- Metadata response rewrite ------------------------------------------ */

/*
 * Metadata v12 response payload (ResponseHeader v1 + body, no size
 * prefix): brokers 1..3 at 127.0.0.1:9001..9003, one topic "bench" with
 * nparts partitions, each led by (p % 3) + 1 with replicas and ISR
 * {1, 2, 3}.  Layout from MetadataResponse.json.
 */
static void
bc_metadata_v12(struct kb_buf *b, int nparts)
{
    static const uint8_t topic_id[16] = { 1, 2, 3, 4, 5, 6, 7, 8,
                                          9, 10, 11, 12, 13, 14, 15, 16 };

    kb_i32(b, 7);                   /* CorrelationId */
    kb_uvarint(b, 0);               /* header tagged fields */
    kb_i32(b, 0);                   /* ThrottleTimeMs */
    kb_uvarint(b, 4);               /* Brokers: 3 */
    for (int n = 1; n <= 3; n++) {
        kb_i32(b, n);
        kb_str(b, "127.0.0.1", true);
        kb_i32(b, 9000 + n);
        kb_uvarint(b, 0);           /* Rack: null */
        kb_uvarint(b, 0);
    }
    kb_str(b, "krbench-cluster", true);
    kb_i32(b, 1);                   /* ControllerId */
    kb_uvarint(b, 2);               /* Topics: 1 */
    kb_i16(b, 0);
    kb_str(b, "bench", true);
    kb_put(b, topic_id, sizeof(topic_id));
    kb_i8(b, 0);                    /* IsInternal */
    kb_uvarint(b, (uint64_t)nparts + 1);
    for (int p = 0; p < nparts; p++) {
        kb_i16(b, 0);
        kb_i32(b, p);
        kb_i32(b, (p % 3) + 1);     /* LeaderId */
        kb_i32(b, 0);               /* LeaderEpoch */
        kb_uvarint(b, 4);           /* ReplicaNodes */
        kb_i32(b, 1);
        kb_i32(b, 2);
        kb_i32(b, 3);
        kb_uvarint(b, 4);           /* IsrNodes */
        kb_i32(b, 1);
        kb_i32(b, 2);
        kb_i32(b, 3);
        kb_uvarint(b, 1);           /* OfflineReplicas: empty */
        kb_uvarint(b, 0);
    }
    kb_i32(b, INT32_MIN);           /* TopicAuthorizedOperations */
    kb_uvarint(b, 0);
    kb_uvarint(b, 0);               /* body tagged fields */
}

struct bc_rewrite {
    struct kr_rewrite_ctx ctx;
    struct evbuffer *in, *out;
    const uint8_t *payload;
    size_t len;
    struct kr_rewrite_result res;
};

static void
bc_rewrite_op(void *arg)
{
    struct bc_rewrite *w = arg;

    if (evbuffer_add_reference(w->in, w->payload, w->len, NULL, NULL) != 0) {
        bc_die("evbuffer_add_reference", NULL);
    }
    if (kr_rewrite_response(&w->ctx, 3, 12, w->in, w->out, &w->res) !=
        KR_OK) {
        fprintf(stderr, "bench_codec: rewrite: %s\n", w->res.err);
        exit(1);
    }
    evbuffer_drain(w->out, evbuffer_get_length(w->out));
}

static struct bc_result
bc_run_rewrite(int nparts, double secs)
{
    struct kb_buf frame = { 0 };
    struct bc_rewrite w;
    struct bc_copy c;
    struct bc_result r = { .name = "metadata_rewrite" };
    size_t outlen;

    bc_metadata_v12(&frame, nparts);
    memset(&w, 0, sizeof(w));
    kr_rewrite_init();
    w.ctx.advertised_host = "proxy.example";
    w.ctx.broker_port_base = 19100;
    w.ctx.node_id_min = 0;
    w.ctx.node_id_max = 15;
    w.ctx.who = "bench";
    w.in = evbuffer_new();
    w.out = evbuffer_new();
    if (w.in == NULL || w.out == NULL) {
        bc_die("out of memory", NULL);
    }
    w.payload = frame.p;
    w.len = frame.len;
    /* Check once: three endpoints rewritten, the size grew by the longer
     * host name (3 x 4 bytes), the new port is in the output. */
    if (evbuffer_add_reference(w.in, w.payload, w.len, NULL, NULL) != 0 ||
        kr_rewrite_response(&w.ctx, 3, 12, w.in, w.out, &w.res) != KR_OK) {
        fprintf(stderr, "bench_codec: rewrite check: %s\n", w.res.err);
        exit(1);
    }
    outlen = evbuffer_get_length(w.out);
    if (w.res.endpoints != 3 || !w.res.changed ||
        outlen != 4 + frame.len + 3 * (strlen("proxy.example") -
                                       strlen("127.0.0.1"))) {
        fprintf(stderr, "bench_codec: rewrite check: %u endpoints, %zu "
                "bytes out of %zu in\n", w.res.endpoints, outlen, frame.len);
        exit(1);
    }
    evbuffer_drain(w.out, outlen);
    r.bytes = frame.len;
    r.ops = bc_rate(bc_rewrite_op, &w, secs);
    r.decode_ops = 0;
    c.src = frame.p;
    c.len = frame.len;
    c.dst = malloc(frame.len);
    if (c.dst == NULL) {
        bc_die("out of memory", NULL);
    }
    r.memcpy_ops = bc_rate(bc_memcpy, &c, secs);
    free(c.dst);
    evbuffer_free(w.in);
    evbuffer_free(w.out);
    free(frame.p);
    return r;
}

static void
bc_print(const struct bc_result *r, bool last)
{
    double mb = r->ops * (double)r->bytes / 1e6;
    double mc = r->memcpy_ops * (double)r->bytes / 1e6;

    printf("{\"name\":\"%s\",\"payload_bytes\":%zu,\"ops_per_s\":%.1f,"
           "\"mb_per_s\":%.2f,\"decode_ops_per_s\":%.1f,"
           "\"memcpy_mb_per_s\":%.2f,\"ratio_to_memcpy\":%.4f}%s\n",
           r->name, r->bytes, r->ops, mb, r->decode_ops, mc,
           mc > 0 ? mb / mc : 0.0, last ? "" : ",");
}

int
main(int argc, char **argv)
{
    double secs = 0.5;
    int opt, version = 10;
    struct bc_result r[4];

    while ((opt = getopt(argc, argv, "t:V:")) != -1) {
        switch (opt) {
        case 't':
            secs = atof(optarg);
            if (!(secs > 0 && secs <= 60)) {
                fprintf(stderr, "bench_codec: -t wants 0..60 seconds\n");
                return 2;
            }
            break;
        case 'V':
            version = atoi(optarg);
            if (version < 3 || version > 12) {
                fprintf(stderr, "bench_codec: -V wants 3..12\n");
                return 2;
            }
            break;
        default:
            fprintf(stderr, "usage: bench_codec [-t SECONDS] [-V 3..12]\n");
            return 2;
        }
    }
    /* 1024 records of 1014 bytes (+ 10 bytes of record framing each)
     * make a batch of 1 MiB + its 61-byte header; 4 records of 1000
     * bytes a batch of about 4 KiB (4,101 bytes). */
    r[0] = bc_run_produce("produce_1mib", version, 1, 1024, 1014, secs);
    r[1] = bc_run_produce("produce_100x4k", version, 100, 4, 1000, secs);
    r[2] = bc_run_produce("produce_small", version, 1, 1, 100, secs);
    r[3] = bc_run_rewrite(1000, secs);
    printf("{\"mode\":\"codec\",\"produce_version\":%d,\"seconds_each\":%.2f,"
           "\"benches\":[\n", version, secs);
    for (int i = 0; i < 4; i++) {
        bc_print(&r[i], i == 3);
    }
    printf("]}\n");
    return 0;
}
