/*
 * bench_records - the record converter's micro-benchmark for `make bench`
 * (issue 10, "Speed": >= 1 GB/s per core, uncompressed, both directions,
 * CRC checks included).
 *
 *   bench_records [-t SECONDS]
 *
 * For values of 100 bytes and of 1 KiB (8-byte keys, CreateTime
 * timestamps):
 *   up_V     kr_records_up on a 1 MiB magic 1 message set (Produce v0-2
 *            -> RecordBatch v2, one batch, every message's CRC-32 checked,
 *            the batch's CRC-32C computed);
 *   down_V   kr_records_down (magic 1) on the same records as RecordBatch
 *            v2 batches of about 64 KiB, as a broker's Fetch response
 *            holds them (every batch's CRC-32C checked, every message's
 *            CRC-32 computed).
 * mb_per_s counts the bytes of the message set (the same for both
 * directions: the old client's bytes), MB = 10^6 bytes, on one thread;
 * records_per_s the records; memcpy_mb_per_s copies the set once per
 * operation, for scale.  Each measurement runs about SECONDS
 * (default 0.5) of the thread's CPU time (CLOCK_THREAD_CPUTIME_ID: MB/s
 * per core, other processes' load aside; caches are still shared).  Before timing, down(up(set)) is checked to give back
 * the set byte for byte (offsets made absolute): a converter that does
 * not round-trip fails the benchmark (exit 1).  Prints one JSON object.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "kr_records.h"

#define SET_BYTES (1u << 20)

/* This thread's CPU time: "per core" even on a busy machine. */
static double
br_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
br_die(const char *what)
{
    fprintf(stderr, "bench_records: %s\n", what);
    exit(1);
}

static void
br_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void
br_put64(uint8_t *p, uint64_t v)
{
    br_put32(p, (uint32_t)(v >> 32));
    br_put32(p + 4, (uint32_t)v);
}

/* A magic 1 message set of about SET_BYTES; *count its messages. */
static uint8_t *
br_set(size_t vlen, size_t *len, size_t *count)
{
    size_t msg = 12 + 22 + 8 + vlen, n = SET_BYTES / msg;
    uint8_t *s = malloc(n * msg), *p = s;
    uint32_t x = 7;

    if (s == NULL) {
        br_die("out of memory");
    }
    for (size_t i = 0; i < n; i++, p += msg) {
        br_put64(p, i);
        br_put32(p + 8, (uint32_t)(msg - 12));
        p[16] = 1;
        p[17] = 0;
        br_put64(p + 18, 1700000000000ull + i);
        br_put32(p + 26, 8);
        snprintf((char *)p + 30, 9, "k%07zu", i % 10000000);
        br_put32(p + 38, (uint32_t)vlen);
        for (size_t j = 0; j < vlen; j++) {
            x = x * 1103515245u + 12345u;
            p[42 + j] = (uint8_t)(x >> 16);
        }
        br_put32(p + 12, (uint32_t)crc32(0L, p + 16, (uInt)(msg - 16)));
    }
    *len = n * msg;
    *count = n;
    return s;
}

typedef void (*br_fn)(void *arg);

/* Operations per second of fn over about secs seconds. */
static double
br_rate(br_fn fn, void *arg, double secs)
{
    uint64_t iters = 0, batch = 1;
    double t0, t;

    fn(arg);
    t0 = br_now();
    for (;;) {
        for (uint64_t i = 0; i < batch; i++) {
            fn(arg);
        }
        iters += batch;
        t = br_now() - t0;
        if (t >= secs) {
            break;
        }
        if (t < secs / 20 && batch < (1u << 20)) {
            batch *= 2;
        }
    }
    return (double)iters / t;
}

struct br_op {
    const uint8_t *in;
    size_t n;
    struct kr_bytes out;
    bool down;
};

struct br_copy {
    const uint8_t *src;
    uint8_t *dst;
    size_t len;
};

static void
br_memcpy(void *arg)
{
    struct br_copy *c = arg;

    memcpy(c->dst, c->src, c->len);
    __asm__ volatile("" : : "r"(c->dst) : "memory");
}

static void
br_op(void *arg)
{
    struct br_op *b = arg;
    struct kr_records_up_opts uo = { 0 };
    struct kr_records_down_opts dd = { .magic = 1 };
    enum kr_records_outcome o;

    b->out.len = 0;
    if (b->down) {
        o = kr_records_down(b->in, b->n, &dd, &b->out, NULL, NULL, 0);
    } else {
        o = kr_records_up(b->in, b->n, &uo, &b->out, NULL, NULL, 0);
    }
    if (o != KR_RECORDS_OK) {
        br_die(kr_records_outcome_name(o));
    }
}

int
main(int argc, char **argv)
{
    double secs = 0.5;
    int opt;
    static const size_t vlens[] = { 100, 1024 };
    bool first = true;

    while ((opt = getopt(argc, argv, "t:")) != -1) {
        if (opt == 't') {
            secs = atof(optarg);
        } else {
            fprintf(stderr, "usage: bench_records [-t SECONDS]\n");
            return 2;
        }
    }
    printf("{\"benches\":[");
    for (size_t v = 0; v < 2; v++) {
        size_t len, count, pos = 0, blen;
        uint8_t *set = br_set(vlens[v], &len, &count);
        struct kr_bytes v2 = { 0 }, back = { 0 };
        struct kr_records_up_opts uo = { .max_batch_bytes = 64 * 1024 };
        struct kr_records_down_opts dd = { .magic = 1 };
        uint64_t base = 0;

        /* the Fetch side: ~64 KiB batches at absolute offsets */
        if (kr_records_up(set, len, &uo, &v2, NULL, NULL, 0) !=
            KR_RECORDS_OK) {
            br_die("up");
        }
        while (kr_records_batch_next(v2.p, v2.len, pos, &blen)) {
            uint8_t *b = v2.p + pos;
            uint32_t nrec = (uint32_t)b[57] << 24 | (uint32_t)b[58] << 16 |
                            (uint32_t)b[59] << 8 | b[60];

            br_put64(b, base);
            br_put32(b + 17, kr_records_crc32c(b + 21, blen - 21));
            base += nrec;
            pos += blen;
        }
        if (pos != v2.len || base != count ||
            kr_records_down(v2.p, v2.len, &dd, &back, NULL, NULL, 0) !=
                KR_RECORDS_OK ||
            back.len != len || memcmp(back.p, set, len) != 0) {
            br_die("down(up(set)) is not the set");
        }
        struct br_op up = { .in = set, .n = len };
        struct br_op down = { .in = v2.p, .n = v2.len, .down = true };
        struct br_copy cp = { .src = set, .dst = malloc(len), .len = len };

        if (cp.dst == NULL) {
            br_die("out of memory");
        }
        double ru = br_rate(br_op, &up, secs);
        double rd = br_rate(br_op, &down, secs);
        double rc = br_rate(br_memcpy, &cp, secs);

        free(cp.dst);

        printf("%s{\"name\":\"up_%zu\",\"value_bytes\":%zu,\"set_bytes\":%zu,"
               "\"records\":%zu,\"mb_per_s\":%.1f,\"records_per_s\":%.0f,"
               "\"memcpy_mb_per_s\":%.1f}",
               first ? "" : ",", vlens[v], vlens[v], len, count,
               ru * (double)len / 1e6, ru * (double)count,
               rc * (double)len / 1e6);
        printf(",{\"name\":\"down_%zu\",\"value_bytes\":%zu,\"set_bytes\":%zu,"
               "\"records\":%zu,\"mb_per_s\":%.1f,\"records_per_s\":%.0f,"
               "\"memcpy_mb_per_s\":%.1f}",
               vlens[v], vlens[v], len, count, rd * (double)len / 1e6,
               rd * (double)count, rc * (double)len / 1e6);
        first = false;
        kr_bytes_free(&up.out);
        kr_bytes_free(&down.out);
        kr_bytes_free(&v2);
        kr_bytes_free(&back);
        free(set);
    }
    printf("],\"secs\":%.2f}\n", secs);
    return 0;
}
