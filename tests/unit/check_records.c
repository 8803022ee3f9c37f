/*
 * check_records - kr_records: magic 0/1 message sets <-> RecordBatch v2
 * against golden vectors written by kafka-python's encoders
 * (records_vectors.h, made by records_vectors.py: how, there).
 *
 * Uncompressed outputs are compared byte for byte (CRCs included: those
 * of the vectors are kafka-python's).  A compressed output cannot be
 * (compressors differ): its frame fields are compared, its CRC recomputed
 * with zlib's crc32 / checked as CRC-32C, its payload decompressed and
 * compared with the vector's uncompressed payload.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <zlib.h>

#include "kr_compress.h"
#include "kr_records.h"
#include "kr_test.h"

#include "records_vectors.h"

#define TS0 1700000000000LL

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

static uint64_t
be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* ---- comparisons ------------------------------------------------------ */

/*
 * got against exp, both RecordBatch v2 sequences (up cases): the same
 * number of batches; uncompressed ones byte for byte; compressed ones
 * header fields, CRC-32C, and decompressed records.
 */
static void
v2_cmp(const uint8_t *got, size_t gl, const uint8_t *exp, size_t el)
{
    size_t gp = 0, ep = 0, glen, elen;
    int nb = 0;

    while (ep < el) {
        ck_assert_msg(kr_records_batch_next(exp, el, ep, &elen),
                      "vector batch %d", nb);
        ck_assert_msg(kr_records_batch_next(got, gl, gp, &glen),
                      "batch %d missing (got %zu bytes)", nb, gl);
        const uint8_t *g = got + gp, *e = exp + ep;
        int codec = e[22] & 7;

        ck_assert_uint_eq(be32(g + 17), kr_records_crc32c(g + 21, glen - 21));
        if (codec == 0) {
            ck_assert_uint_eq(glen, elen);
            ck_assert_msg(memcmp(g, e, elen) == 0, "batch %d differs", nb);
        } else {
            struct kr_bytes d = { 0 };

            ck_assert_msg(memcmp(g, e, 8) == 0, "BaseOffset");
            ck_assert_msg(memcmp(g + 12, e + 12, 5) == 0, "epoch, magic");
            ck_assert_msg(memcmp(g + 21, e + 21, 40) == 0,
                          "batch %d header fields differ", nb);
            ck_assert_int_eq(kr_decompress(codec, 0, g + 61, glen - 61,
                                           1 << 20, &d), KR_Z_OK);
            ck_assert_uint_eq(d.len, elen - 61);
            ck_assert_msg(memcmp(d.p, e + 61, d.len) == 0,
                          "batch %d records differ", nb);
            kr_bytes_free(&d);
        }
        gp += glen;
        ep += elen;
        nb++;
    }
    ck_assert_uint_eq(gp, gl);
}

/* The magic 0/1 message at p: its CRC checked with zlib's crc32. */
static void
legacy_crc_ok(const uint8_t *p)
{
    uint32_t size = be32(p + 8);
    uint32_t crc = (uint32_t)crc32(0L, p + 16, size - 4);

    ck_assert_uint_eq(be32(p + 12), crc);
}

/*
 * got is one wrapper of codec; exp the same wrapper with codec 0 in its
 * attributes and its inner set uncompressed as value.
 */
static void
wrapper_cmp(const uint8_t *got, size_t gl, const uint8_t *exp, size_t el,
            int codec)
{
    int magic = exp[16];
    size_t hl = magic ? 30 : 22;   /* offset size crc magic attr [ts] key */

    ck_assert_uint_ge(gl, hl + 4);
    ck_assert_uint_eq(be32(got + 8) + 12, gl);
    legacy_crc_ok(got);
    ck_assert_msg(memcmp(got, exp, 8) == 0, "wrapper offset %lld, want %lld",
                  (long long)be64(got), (long long)be64(exp));
    ck_assert_int_eq(got[16], magic);
    ck_assert_int_eq(got[17], exp[17] | codec);
    if (magic) {
        ck_assert_msg(memcmp(got + 18, exp + 18, 8) == 0, "wrapper ts");
    }
    ck_assert_uint_eq(be32(got + hl - 4), 0xFFFFFFFFu);   /* null key */
    uint32_t vl = be32(got + hl);

    ck_assert_uint_eq(hl + 4 + vl, gl);
    if (codec == KR_COMPRESSION_LZ4) {
        /* frame descriptor FLG 0x60 BD 0x40, checksum: KAFKA-1493's for
         * magic 0 (xxh32 over the magic number too), else the right one */
        static const uint8_t v0[] = { 0x04, 0x22, 0x4d, 0x18, 0x60, 0x40,
                                      0x1a };
        static const uint8_t v1[] = { 0x04, 0x22, 0x4d, 0x18, 0x60, 0x40,
                                      0x82 };

        ck_assert_msg(memcmp(got + hl + 4, magic ? v1 : v0, 7) == 0,
                      "lz4 frame header");
    }
    struct kr_bytes d = { 0 };

    ck_assert_int_eq(kr_decompress(codec,
                                   magic == 0 ? KR_Z_LZ4_KAFKA1493 : 0,
                                   got + hl + 4, vl, 1 << 20, &d), KR_Z_OK);
    ck_assert_uint_eq(d.len, el - hl - 4);
    ck_assert_msg(memcmp(d.p, exp + hl + 4, d.len) == 0, "inner set");
    for (size_t p = 0; p < d.len; p += 12 + be32(d.p + p + 8)) {
        legacy_crc_ok(d.p + p);
    }
    kr_bytes_free(&d);
}

/* ---- up ----------------------------------------------------------------- */

static struct kr_records_stats
up_ok(const uint8_t *in, size_t n, size_t max_batch, const uint8_t *exp,
      size_t el)
{
    struct kr_records_up_opts o = { .max_batch_bytes = max_batch };
    struct kr_records_stats st = { 0 };
    struct kr_bytes out = { 0 };
    char why[256];

    ck_assert_msg(kr_records_up(in, n, &o, &out, &st, why, sizeof(why)) ==
                  KR_RECORDS_OK, "up: %s", why);
    v2_cmp(out.p, out.len, exp, el);
    ck_assert_uint_eq(st.bytes_in, n);
    ck_assert_uint_eq(st.bytes_out, out.len);
    kr_bytes_free(&out);
    return st;
}

START_TEST(test_crc)
{
    const uint8_t *s = (const uint8_t *)"123456789";

    ck_assert_uint_eq(kr_records_crc32c(s, 9), 0xE3069283u);
    ck_assert_uint_eq(kr_records_crc32(s, 9), 0xCBF43926u);
    ck_assert_uint_eq(kr_records_crc32(up_split_in, UP_SPLIT_IN_LEN),
                      (uint32_t)crc32(0L, up_split_in, UP_SPLIT_IN_LEN));
    ck_assert_uint_eq(kr_records_crc32c(s, 0), 0);
}
END_TEST

START_TEST(test_up_plain)
{
    struct kr_records_stats st;

    st = up_ok(up_plain_v1_in, UP_PLAIN_V1_IN_LEN, 0, up_plain_v1_exp,
               UP_PLAIN_V1_EXP_LEN);
    ck_assert_uint_eq(st.messages_in, 3);
    ck_assert_uint_eq(st.records_out, 3);
    ck_assert_uint_eq(st.batches_out, 1);
    st = up_ok(up_plain_v0_in, UP_PLAIN_V0_IN_LEN, 0, up_plain_v0_exp,
               UP_PLAIN_V0_EXP_LEN);
    ck_assert_uint_eq(st.records_out, 3);
    /* a v2 set is copied */
    up_ok(up_v2_in, UP_V2_IN_LEN, 0, up_v2_in, UP_V2_IN_LEN);
    /* nothing in, nothing out */
    up_ok(up_v2_in, 0, 0, up_v2_in, 0);
}
END_TEST

START_TEST(test_up_wrappers)
{
    struct kr_records_stats st;

    st = up_ok(up_gzip_v1_in, UP_GZIP_V1_IN_LEN, 0, up_gzip_v1_exp,
               UP_GZIP_V1_EXP_LEN);
    ck_assert_uint_eq(st.messages_in, 4);
    ck_assert_uint_eq(st.batches_in, 1);
    up_ok(up_snappy_xerial_v0_in, UP_SNAPPY_XERIAL_V0_IN_LEN, 0,
          up_snappy_v0_exp, UP_SNAPPY_V0_EXP_LEN);
    up_ok(up_snappy_raw_v1_in, UP_SNAPPY_RAW_V1_IN_LEN, 0, up_snappy_v1_exp,
          UP_SNAPPY_V1_EXP_LEN);
    up_ok(up_lz4_v0_in, UP_LZ4_V0_IN_LEN, 0, up_lz4_v0_exp,
          UP_LZ4_V0_EXP_LEN);
    up_ok(up_lz4_v1_in, UP_LZ4_V1_IN_LEN, 0, up_lz4_v1_exp,
          UP_LZ4_V1_EXP_LEN);
    up_ok(up_lat_v1_in, UP_LAT_V1_IN_LEN, 0, up_lat_v1_exp,
          UP_LAT_V1_EXP_LEN);
    st = up_ok(up_two_wrappers_in, UP_TWO_WRAPPERS_IN_LEN, 0,
               up_two_wrappers_exp, UP_TWO_WRAPPERS_EXP_LEN);
    ck_assert_uint_eq(st.batches_in, 2);
    ck_assert_uint_eq(st.batches_out, 1);
    st = up_ok(up_mixed_in, UP_MIXED_IN_LEN, 0, up_mixed_exp,
               UP_MIXED_EXP_LEN);
    ck_assert_uint_eq(st.batches_out, 3);
    ck_assert_uint_eq(st.records_out, 5);
}
END_TEST

/* Batches in buf and each one's RecordCount summed into *records. */
static int
count_batches(const uint8_t *buf, size_t n, size_t max_len, int *records)
{
    size_t pos = 0, len;
    int nb = 0;

    *records = 0;
    while (kr_records_batch_next(buf, n, pos, &len)) {
        ck_assert_uint_le(len, max_len);
        ck_assert_uint_eq(be32(buf + pos + 17),
                          kr_records_crc32c(buf + pos + 21, len - 21));
        *records += (int)be32(buf + pos + 57);
        pos += len;
        nb++;
    }
    ck_assert_uint_eq(pos, n);
    return nb;
}

START_TEST(test_up_split)
{
    struct kr_records_up_opts o = { .max_batch_bytes = 100 };
    struct kr_records_stats st;
    struct kr_bytes out = { 0 };
    int recs;

    st = up_ok(up_split_in, UP_SPLIT_IN_LEN, 400, up_split_exp,
               UP_SPLIT_EXP_LEN);
    ck_assert_uint_eq(st.batches_out, 3);
    ck_assert_uint_eq(st.records_out, 7);
    /* a limit below one record: each alone, larger than the limit */
    ck_assert_int_eq(kr_records_up(up_split_in, UP_SPLIT_IN_LEN, &o, &out,
                                   NULL, NULL, 0), KR_RECORDS_OK);
    ck_assert_int_eq(count_batches(out.p, out.len, 200, &recs), 7);
    ck_assert_int_eq(recs, 7);
    kr_bytes_free(&out);
}
END_TEST

/*
 * A magic 1 entry written here (CRC with zlib), for inputs the vectors do
 * not hold; returns its size.
 */
static size_t
mk_msg(uint8_t *p, int64_t off, uint8_t attr, int64_t ts, const void *key,
       int32_t kl, const void *val, int32_t vl)
{
    uint8_t *q = p + 12;
    size_t size;

    q[4] = 1;
    q[5] = attr;
    for (int i = 0; i < 8; i++) {
        q[6 + i] = (uint8_t)((uint64_t)ts >> (56 - 8 * i));
    }
    q += 14;
    put32(q, (uint32_t)kl);
    q += 4;
    if (kl > 0) {
        memcpy(q, key, (size_t)kl);
        q += kl;
    }
    put32(q, (uint32_t)vl);
    q += 4;
    if (vl > 0) {
        memcpy(q, val, (size_t)vl);
        q += vl;
    }
    size = (size_t)(q - p);
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)((uint64_t)off >> (56 - 8 * i));
    }
    put32(p + 8, (uint32_t)(size - 12));
    put32(p + 12, (uint32_t)crc32(0L, p + 16, (uInt)(size - 16)));
    return size;
}

/* A gzip wrapper of 60 records of 200 bytes of pseudo-random hex. */
static size_t
mk_big_gzip(uint8_t *buf, size_t cap)
{
    static uint8_t inner[60 * 240];
    size_t il = 0;
    uint32_t x = 12345;
    struct kr_bytes z = { 0 };

    for (int i = 0; i < 60; i++) {
        char v[200];

        for (int j = 0; j < 200; j++) {
            x = x * 1103515245u + 12345u;
            v[j] = "0123456789abcdef"[(x >> 16) & 15];
        }
        il += mk_msg(inner + il, i, 0, TS0 + i, "k", 1, v, 200);
    }
    ck_assert_int_eq(kr_compress(KR_COMPRESSION_GZIP, 0, inner, il, &z),
                     KR_Z_OK);
    ck_assert_uint_le(z.len + 64, cap);
    size_t n = mk_msg(buf, 59, KR_COMPRESSION_GZIP, TS0 + 59, NULL, -1, z.p,
                      (int32_t)z.len);

    kr_bytes_free(&z);
    return n;
}

START_TEST(test_up_split_compressed)
{
    static uint8_t in[16384];
    size_t n = mk_big_gzip(in, sizeof(in));
    struct kr_records_up_opts o = { .max_batch_bytes = 2000 };
    struct kr_records_stats st = { 0 };
    struct kr_bytes out = { 0 }, d = { 0 };
    int recs, nb;
    size_t pos = 0, len;

    ck_assert_int_eq(kr_records_up(in, n, &o, &out, &st, NULL, 0),
                     KR_RECORDS_OK);
    nb = count_batches(out.p, out.len, 2000, &recs);
    ck_assert_int_gt(nb, 1);
    ck_assert_int_eq(recs, 60);
    ck_assert_uint_eq(st.batches_out, (uint64_t)nb);
    /* every batch gzip; the records in order: keys "k", values intact */
    int want = 0;

    while (kr_records_batch_next(out.p, out.len, pos, &len)) {
        ck_assert_int_eq(out.p[pos + 22] & 7, KR_COMPRESSION_GZIP);
        d.len = 0;
        ck_assert_int_eq(kr_decompress(KR_COMPRESSION_GZIP, 0,
                                       out.p + pos + 61, len - 61, 1 << 20,
                                       &d), KR_Z_OK);
        int cnt = (int)be32(out.p + pos + 57);

        /* each record: length (2 bytes), 00, TimestampDelta, OffsetDelta,
         * 02 'k', 90 03, the value, 00: the offset delta and the key */
        size_t q = 0;

        for (int r = 0; r < cnt; r++) {
            size_t rl = d.p[q] & 0x7f;      /* zigzag varint */

            if (d.p[q] & 0x80) {
                rl |= (size_t)d.p[q + 1] << 7;
                q++;
            }
            rl >>= 1;
            q++;
            ck_assert_int_eq(d.p[q + 2], r * 2);          /* offset delta */
            ck_assert_int_eq(d.p[q + 4], 'k');
            q += rl;
            want++;
        }
        ck_assert_uint_eq(q, d.len);
        pos += len;
    }
    ck_assert_int_eq(want, 60);
    kr_bytes_free(&d);
    kr_bytes_free(&out);
}
END_TEST

/* bad input: outcome, why mentions needle, out left as it was */
static void
up_bad(const uint8_t *in, size_t n, size_t max_unc,
       enum kr_records_outcome want, const char *needle)
{
    struct kr_records_up_opts o = { .max_uncompressed = max_unc };
    struct kr_records_stats st = { 0 };
    struct kr_bytes out = { 0 };
    char why[256];

    ck_assert(kr_bytes_add(&out, "XYZ", 3));
    ck_assert_int_eq(kr_records_up(in, n, &o, &out, &st, why, sizeof(why)),
                     want);
    ck_assert_msg(strstr(why, needle) != NULL, "why: %s", why);
    ck_assert_uint_eq(out.len, 3);
    ck_assert(memcmp(out.p, "XYZ", 3) == 0);
    ck_assert_uint_eq(st.records_out, 0);
    kr_bytes_free(&out);
}

START_TEST(test_up_bad)
{
    uint8_t b[1024];
    char exp[128];

    /* a value byte flipped: the CRC */
    memcpy(b, up_plain_v1_in, UP_PLAIN_V1_IN_LEN);
    b[UP_PLAIN_V1_IN_LEN - 1] ^= 1;
    /* the third message: at byte 46 + 43, 24 bytes after its size */
    snprintf(exp, sizeof(exp), "CRC 0x%08x, computed 0x%08x", be32(b + 101),
             (uint32_t)crc32(0L, b + 105, 20));
    up_bad(b, UP_PLAIN_V1_IN_LEN, 0, KR_RECORDS_CORRUPT, "byte 89 ");
    up_bad(b, UP_PLAIN_V1_IN_LEN, 0, KR_RECORDS_CORRUPT, exp);
    /* truncated: the last message's size past the end */
    up_bad(up_plain_v1_in, UP_PLAIN_V1_IN_LEN - 3, 0, KR_RECORDS_CORRUPT,
           "past the end");
    up_bad(up_plain_v1_in, 7, 0, KR_RECORDS_CORRUPT, "truncated");
    /* a key length past the message (CRC right) */
    size_t n = mk_msg(b, 0, 0, TS0, "abc", 3, "v", 1);

    put32(b + 26, 50);
    put32(b + 12, (uint32_t)crc32(0L, b + 16, (uInt)(n - 16)));
    up_bad(b, n, 0, KR_RECORDS_CORRUPT, "key length 50");
    /* magic 3 */
    n = mk_msg(b, 0, 0, TS0, "abc", 3, "v", 1);
    b[16] = 3;
    up_bad(b, n, 0, KR_RECORDS_CORRUPT, "magic 3");
    /* a gzip wrapper whose value is not gzip */
    n = mk_msg(b, 0, KR_COMPRESSION_GZIP, TS0, NULL, -1, "not gzip at all",
               15);
    up_bad(b, n, 0, KR_RECORDS_BAD_COMPRESSION, "does not decompress");
    /* decompressing past max_uncompressed */
    up_bad(up_gzip_v1_in, UP_GZIP_V1_IN_LEN, 100, KR_RECORDS_TOO_LARGE,
           "past the limit");
    /* zstd in a magic 1 message */
    n = mk_msg(b, 0, KR_COMPRESSION_ZSTD, TS0, NULL, -1, "x", 1);
    up_bad(b, n, 0, KR_RECORDS_UNSUPPORTED_COMPRESSION, "zstd");
    /* a wrapper inside a wrapper */
    {
        uint8_t inner[256];
        struct kr_bytes z = { 0 };
        size_t il = mk_msg(inner, 0, KR_COMPRESSION_GZIP, TS0, NULL, -1,
                           "x", 1);

        ck_assert_int_eq(kr_compress(KR_COMPRESSION_GZIP, 0, inner, il, &z),
                         KR_Z_OK);
        n = mk_msg(b, 0, KR_COMPRESSION_GZIP, TS0, NULL, -1, z.p,
                   (int32_t)z.len);
        kr_bytes_free(&z);
        up_bad(b, n, 0, KR_RECORDS_CORRUPT, "compressed inner message");
    }
    /* a null wrapper value */
    n = mk_msg(b, 0, KR_COMPRESSION_GZIP, TS0, NULL, -1, NULL, -1);
    up_bad(b, n, 0, KR_RECORDS_CORRUPT, "null value");
}
END_TEST

/*
 * A set of wrappers each below max_uncompressed but together above it
 * (a hostile client's gzip bombs side by side: 12 wrappers of 58 KiB
 * inflating to 60 MB each once made 720 MB of scratch and minutes of a
 * worker's time): TOO_LARGE at the wrapper that passes the limit, which
 * holds for the whole set.
 */
START_TEST(test_up_bad_sum)
{
    static uint8_t in[3 * 16384];
    size_t one = mk_big_gzip(in, 16384), n = one, inflated;
    struct kr_records_up_opts o = { 0 };
    struct kr_records_stats st = { 0 };
    struct kr_bytes out = { 0 };
    char exp[64];

    memcpy(in + n, in, one);
    n += one;
    memcpy(in + n, in, one);
    n += one;
    /* one wrapper inflates to 60 messages of 235 bytes */
    inflated = 60 * (12 + 22 + 1 + 200);
    o.max_uncompressed = inflated;
    ck_assert_int_eq(kr_records_up(in, one, &o, &out, &st, NULL, 0),
                     KR_RECORDS_OK);
    o.max_uncompressed = 3 * inflated;
    ck_assert_int_eq(kr_records_up(in, n, &o, &out, &st, NULL, 0),
                     KR_RECORDS_OK);
    kr_bytes_free(&out);
    snprintf(exp, sizeof(exp), "wrapper at byte %zu ", 2 * one);
    up_bad(in, n, 3 * inflated - 1, KR_RECORDS_TOO_LARGE, exp);
    up_bad(in, n, 2 * inflated, KR_RECORDS_TOO_LARGE, "past the limit");
}
END_TEST

/* ---- down --------------------------------------------------------------- */

static struct kr_records_stats
down_run(const uint8_t *in, size_t n, int magic, int64_t fetch,
         size_t max_bytes, enum kr_legacy_zstd zstd, struct kr_bytes *out)
{
    struct kr_records_down_opts o = { .magic = (int8_t)magic,
                                      .fetch_offset = fetch,
                                      .max_bytes = max_bytes, .zstd = zstd };
    struct kr_records_stats st = { 0 };
    char why[256];

    out->len = 0;
    ck_assert_msg(kr_records_down(in, n, &o, out, &st, why, sizeof(why)) ==
                  KR_RECORDS_OK, "down: %s", why);
    ck_assert_uint_eq(st.bytes_out, out->len);
    return st;
}

static void
down_exact(const uint8_t *in, size_t n, int magic, int64_t fetch,
           size_t max_bytes, const uint8_t *exp, size_t el)
{
    struct kr_bytes out = { 0 };

    down_run(in, n, magic, fetch, max_bytes, KR_LEGACY_ZSTD_GZIP, &out);
    ck_assert_uint_eq(out.len, el);
    ck_assert_msg(memcmp(out.p, exp, el) == 0, "output differs");
    kr_bytes_free(&out);
}

START_TEST(test_down_plain)
{
    struct kr_bytes out = { 0 };
    struct kr_records_stats st;

    down_exact(down_plain_in, DOWN_PLAIN_IN_LEN, 1, 100, 0,
               down_plain_v1_exp, DOWN_PLAIN_V1_EXP_LEN);
    down_exact(down_plain_in, DOWN_PLAIN_IN_LEN, 0, 0, 0,
               down_plain_v0_exp, DOWN_PLAIN_V0_EXP_LEN);
    /* fetch offset in the middle of the batch */
    st = down_run(down_plain_in, DOWN_PLAIN_IN_LEN, 1, 101, 0,
                  KR_LEGACY_ZSTD_GZIP, &out);
    ck_assert_uint_eq(out.len, DOWN_PLAIN_V1_FROM101_EXP_LEN);
    ck_assert(memcmp(out.p, down_plain_v1_from101_exp, out.len) == 0);
    ck_assert_uint_eq(st.dropped_below_offset, 1);
    ck_assert_uint_eq(st.records_out, 2);
    /* all below: nothing */
    down_run(down_plain_in, DOWN_PLAIN_IN_LEN, 1, 103, 0,
             KR_LEGACY_ZSTD_GZIP, &out);
    ck_assert_uint_eq(out.len, 0);
    /* LogAppendTime */
    down_exact(down_lat_plain_in, DOWN_LAT_PLAIN_IN_LEN, 1, 0, 0,
               down_lat_plain_v1_exp, DOWN_LAT_PLAIN_V1_EXP_LEN);
    kr_bytes_free(&out);
}
END_TEST

START_TEST(test_down_compressed)
{
    static const struct {
        const uint8_t *in;
        size_t n;
        int codec;
    } c[] = {
        { down_gzip_in, DOWN_GZIP_IN_LEN, KR_COMPRESSION_GZIP },
        { down_snappy_in, DOWN_SNAPPY_IN_LEN, KR_COMPRESSION_SNAPPY },
        { down_lz4_in, DOWN_LZ4_IN_LEN, KR_COMPRESSION_LZ4 },
    };
    struct kr_bytes out = { 0 };
    struct kr_records_stats st;

    for (size_t i = 0; i < KR_ARRAY_LEN(c); i++) {
        /* fetch offset 201, in the middle: all four served (downConvert
         * keeps a compressed batch whole) */
        st = down_run(c[i].in, c[i].n, 1, 201, 0, KR_LEGACY_ZSTD_GZIP, &out);
        wrapper_cmp(out.p, out.len, down_z_v1_exp, DOWN_Z_V1_EXP_LEN,
                    c[i].codec);
        ck_assert_uint_eq(st.records_out, 4);
        ck_assert_uint_eq(st.dropped_below_offset, 0);
        down_run(c[i].in, c[i].n, 0, 201, 0, KR_LEGACY_ZSTD_GZIP, &out);
        wrapper_cmp(out.p, out.len, down_z_v0_exp, DOWN_Z_V0_EXP_LEN,
                    c[i].codec);
    }
    down_run(down_lat_gzip_in, DOWN_LAT_GZIP_IN_LEN, 1, 0, 0,
             KR_LEGACY_ZSTD_GZIP, &out);
    wrapper_cmp(out.p, out.len, down_lat_gzip_v1_exp,
                DOWN_LAT_GZIP_V1_EXP_LEN, KR_COMPRESSION_GZIP);
    kr_bytes_free(&out);
}
END_TEST

START_TEST(test_down_zstd)
{
    struct kr_bytes out = { 0 };
    struct kr_records_stats st;
    struct kr_records_down_opts o = { .magic = 1,
                                      .zstd = KR_LEGACY_ZSTD_REFUSE };
    char why[256];
    uint8_t both[1024];

    st = down_run(down_zstd_in, DOWN_ZSTD_IN_LEN, 1, 0, 0,
                  KR_LEGACY_ZSTD_GZIP, &out);
    wrapper_cmp(out.p, out.len, down_z_v1_exp, DOWN_Z_V1_EXP_LEN,
                KR_COMPRESSION_GZIP);
    ck_assert_uint_eq(st.zstd_recompressed, 1);
    st = down_run(down_zstd_in, DOWN_ZSTD_IN_LEN, 1, 0, 0,
                  KR_LEGACY_ZSTD_NONE, &out);
    ck_assert_uint_eq(out.len, DOWN_ZSTD_NONE_V1_EXP_LEN);
    ck_assert(memcmp(out.p, down_zstd_none_v1_exp, out.len) == 0);
    ck_assert_uint_eq(st.zstd_recompressed, 1);
    ck_assert(kr_bytes_add(&out, "XY", 2));
    out.len = 2;
    ck_assert_int_eq(kr_records_down(down_zstd_in, DOWN_ZSTD_IN_LEN, &o,
                                     &out, NULL, why, sizeof(why)),
                     KR_RECORDS_UNSUPPORTED_COMPRESSION);
    ck_assert_uint_eq(out.len, 2);
    ck_assert_msg(strstr(why, "offset 200") != NULL, "why: %s", why);
    /* after a batch served, a zstd batch ends the output (OK) */
    memcpy(both, down_plain_in, DOWN_PLAIN_IN_LEN);
    memcpy(both + DOWN_PLAIN_IN_LEN, down_zstd_in, DOWN_ZSTD_IN_LEN);
    out.len = 0;
    ck_assert_int_eq(kr_records_down(both, DOWN_PLAIN_IN_LEN +
                                     DOWN_ZSTD_IN_LEN, &o, &out, NULL, why,
                                     sizeof(why)), KR_RECORDS_OK);
    ck_assert_uint_eq(out.len, DOWN_PLAIN_V1_EXP_LEN);
    ck_assert(memcmp(out.p, down_plain_v1_exp, out.len) == 0);
    kr_bytes_free(&out);
}
END_TEST

START_TEST(test_down_control_partial)
{
    struct kr_bytes out = { 0 };
    struct kr_records_stats st;

    st = down_run(down_ctl_in, DOWN_CTL_IN_LEN, 1, 0, 0, KR_LEGACY_ZSTD_GZIP,
                  &out);
    ck_assert_uint_eq(out.len, DOWN_CTL_V1_EXP_LEN);
    ck_assert(memcmp(out.p, down_ctl_v1_exp, out.len) == 0);
    ck_assert_uint_eq(st.dropped_control, 1);
    ck_assert_uint_eq(st.batches_in, 3);
    /* a partial batch at the end is dropped, wherever it is cut */
    for (size_t cut = 1; cut < 179; cut++) {
        down_run(down_lim_in, 179 + cut, 1, 0, 0, KR_LEGACY_ZSTD_GZIP, &out);
        KR_TEST_CHECK(out.len == 172, "cut %zu: %zu bytes", cut, out.len);
    }
    kr_bytes_free(&out);
}
END_TEST

START_TEST(test_down_limit)
{
    struct kr_bytes out = { 0 };
    struct kr_records_stats st;

    /* 6 messages of 86 bytes (516): a limit of 300 cuts the fourth */
    st = down_run(down_lim_in, DOWN_LIM_IN_LEN, 1, 0, 300,
                  KR_LEGACY_ZSTD_GZIP, &out);
    ck_assert_uint_eq(out.len, 300);
    ck_assert(memcmp(out.p, down_lim_v1_exp, 300) == 0);
    ck_assert_uint_eq(st.records_out, 3);
    /* a limit below the first batch: the first batch whole, no more */
    st = down_run(down_lim_in, DOWN_LIM_IN_LEN, 1, 0, 10,
                  KR_LEGACY_ZSTD_GZIP, &out);
    ck_assert_uint_eq(out.len, 172);
    ck_assert(memcmp(out.p, down_lim_v1_exp, 172) == 0);
    ck_assert_uint_eq(st.records_out, 2);
    /* exactly two batches */
    st = down_run(down_lim_in, DOWN_LIM_IN_LEN, 1, 0, 344,
                  KR_LEGACY_ZSTD_GZIP, &out);
    ck_assert_uint_eq(out.len, 344);
    ck_assert_uint_eq(st.records_out, 4);
    kr_bytes_free(&out);
}
END_TEST

static void
down_bad(const uint8_t *in, size_t n, size_t max_unc,
         enum kr_records_outcome want, const char *needle)
{
    struct kr_records_down_opts o = { .magic = 1,
                                      .max_uncompressed = max_unc };
    struct kr_bytes out = { 0 };
    char why[256];

    ck_assert(kr_bytes_add(&out, "XYZ", 3));
    ck_assert_int_eq(kr_records_down(in, n, &o, &out, NULL, why,
                                     sizeof(why)), want);
    ck_assert_msg(strstr(why, needle) != NULL, "why: %s", why);
    ck_assert_uint_eq(out.len, 3);
    kr_bytes_free(&out);
}

/* Recompute the CRC-32C of the batch at b (len bytes). */
static void
fix_crc(uint8_t *b, size_t len)
{
    put32(b + 17, kr_records_crc32c(b + 21, len - 21));
}

START_TEST(test_down_bad)
{
    uint8_t b[1024];
    char exp[128];

    memcpy(b, down_plain_in, DOWN_PLAIN_IN_LEN);
    b[DOWN_PLAIN_IN_LEN - 2] ^= 1;
    snprintf(exp, sizeof(exp), "CRC-32C 0x%08x, computed 0x%08x",
             be32(b + 17), kr_records_crc32c(b + 21, DOWN_PLAIN_IN_LEN - 21));
    down_bad(b, DOWN_PLAIN_IN_LEN, 0, KR_RECORDS_CORRUPT, exp);
    /* a record count that does not match */
    memcpy(b, down_plain_in, DOWN_PLAIN_IN_LEN);
    put32(b + 57, 4);
    fix_crc(b, DOWN_PLAIN_IN_LEN);
    down_bad(b, DOWN_PLAIN_IN_LEN, 0, KR_RECORDS_CORRUPT, "record 3 of 4");
    put32(b + 57, 2);
    fix_crc(b, DOWN_PLAIN_IN_LEN);
    down_bad(b, DOWN_PLAIN_IN_LEN, 0, KR_RECORDS_CORRUPT, "after its 2");
    /* a record's length past the batch */
    memcpy(b, down_plain_in, DOWN_PLAIN_IN_LEN);
    b[61] = 0x7e;
    fix_crc(b, DOWN_PLAIN_IN_LEN);
    down_bad(b, DOWN_PLAIN_IN_LEN, 0, KR_RECORDS_CORRUPT, "record 0 of 3");
    /* a batch length below the header */
    memcpy(b, down_plain_in, DOWN_PLAIN_IN_LEN);
    put32(b + 8, 20);
    down_bad(b, DOWN_PLAIN_IN_LEN, 0, KR_RECORDS_CORRUPT, "below");
    /* magic 5 */
    memcpy(b, down_plain_in, DOWN_PLAIN_IN_LEN);
    b[16] = 5;
    down_bad(b, DOWN_PLAIN_IN_LEN, 0, KR_RECORDS_CORRUPT, "magic 5");
    /* a gzip batch whose payload is damaged (CRC right) */
    memcpy(b, down_gzip_in, DOWN_GZIP_IN_LEN);
    b[61 + 20] ^= 0x55;
    b[61 + 21] ^= 0x55;
    fix_crc(b, DOWN_GZIP_IN_LEN);
    down_bad(b, DOWN_GZIP_IN_LEN, 0, KR_RECORDS_BAD_COMPRESSION,
             "offset 200): gzip payload does not decompress");
    down_bad(down_gzip_in, DOWN_GZIP_IN_LEN, 100, KR_RECORDS_TOO_LARGE,
             "past the limit");
}
END_TEST

/* A magic 1 set read by a magic 1 client: as it is; by magic 0: converted */
START_TEST(test_down_legacy_entries)
{
    struct kr_bytes out = { 0 };

    down_exact(down_plain_v1_exp, DOWN_PLAIN_V1_EXP_LEN, 1, 0, 0,
               down_plain_v1_exp, DOWN_PLAIN_V1_EXP_LEN);
    down_exact(down_plain_v1_exp, DOWN_PLAIN_V1_EXP_LEN, 0, 0, 0,
               down_plain_v0_exp, DOWN_PLAIN_V0_EXP_LEN);
    /* a magic 1 gzip wrapper (relative offsets, at 3) for magic 0 */
    down_run(up_gzip_v1_in, UP_GZIP_V1_IN_LEN, 0, 0, 0, KR_LEGACY_ZSTD_GZIP,
             &out);
    ck_assert_uint_eq(be64(out.p), 3);
    ck_assert_int_eq(out.p[16], 0);
    ck_assert_int_eq(out.p[17], KR_COMPRESSION_GZIP);
    kr_bytes_free(&out);
}
END_TEST

/* up then down: the records come back (uncompressed, magic 1) */
START_TEST(test_round_trip)
{
    struct kr_bytes v2 = { 0 }, back = { 0 };
    struct kr_records_down_opts o = { .magic = 1 };

    ck_assert_int_eq(kr_records_up(up_plain_v1_in, UP_PLAIN_V1_IN_LEN, NULL,
                                   &v2, NULL, NULL, 0), KR_RECORDS_OK);
    ck_assert_int_eq(kr_records_down(v2.p, v2.len, &o, &back, NULL, NULL, 0),
                     KR_RECORDS_OK);
    ck_assert_uint_eq(back.len, UP_PLAIN_V1_IN_LEN);
    ck_assert(memcmp(back.p, up_plain_v1_in, back.len) == 0);
    kr_bytes_free(&v2);
    kr_bytes_free(&back);
}
END_TEST


/* Fix the CRCs of the top-level entries of buf (v2 batches or magic 0/1
 * messages) as far as their sizes make sense. */
static void
fix_all_crcs(uint8_t *buf, size_t n)
{
    size_t pos = 0;

    while (n - pos >= 17) {
        uint32_t sz = be32(buf + pos + 8);

        if (sz < 14 || sz > n - pos - 12) {
            return;
        }
        if (buf[pos + 16] == 2 && sz >= 49) {
            put32(buf + pos + 17,
                  kr_records_crc32c(buf + pos + 21, sz + 12 - 21));
        } else if (buf[pos + 16] < 2) {
            put32(buf + pos + 12, (uint32_t)crc32(0L, buf + pos + 16,
                                                  (uInt)(sz - 4)));
        }
        pos += 12 + sz;
    }
}

/*
 * Every byte of each input changed (CRCs fixed after, so parsing goes
 * past them) and every truncation: never a crash or a read out of bounds
 * (ASan), and on failure out as it was.
 */
START_TEST(test_mutations)
{
    static const struct {
        const uint8_t *p;
        size_t n;
    } in[] = {
        { up_plain_v1_in, UP_PLAIN_V1_IN_LEN },
        { up_gzip_v1_in, UP_GZIP_V1_IN_LEN },
        { up_lz4_v0_in, UP_LZ4_V0_IN_LEN },
        { up_snappy_raw_v1_in, UP_SNAPPY_RAW_V1_IN_LEN },
        { up_mixed_in, UP_MIXED_IN_LEN },
        { down_plain_in, DOWN_PLAIN_IN_LEN },
        { down_gzip_in, DOWN_GZIP_IN_LEN },
        { down_lz4_in, DOWN_LZ4_IN_LEN },
        { down_zstd_in, DOWN_ZSTD_IN_LEN },
        { down_ctl_in, DOWN_CTL_IN_LEN },
    };
    static const uint8_t masks[] = { 0x01, 0x80, 0xff };
    uint8_t b[1024];
    struct kr_bytes out = { 0 };
    struct kr_records_up_opts uo = { .max_batch_bytes = 200,
                                     .max_uncompressed = 4096 };
    struct kr_records_down_opts dd = { .magic = 1, .max_bytes = 300,
                                       .max_uncompressed = 4096 };
    int ok = 0, bad = 0;

    for (size_t i = 0; i < KR_ARRAY_LEN(in); i++) {
        for (size_t pos = 0; pos <= in[i].n; pos++) {
            for (size_t m = 0; m <= KR_ARRAY_LEN(masks); m++) {
                size_t n = in[i].n;
                enum kr_records_outcome o1, o2;

                memcpy(b, in[i].p, n);
                if (m == KR_ARRAY_LEN(masks)) {
                    n = pos;                        /* truncated */
                } else if (pos < n) {
                    b[pos] ^= masks[m];
                    fix_all_crcs(b, n);
                } else {
                    continue;
                }
                out.len = 0;
                KR_TEST_CHECK(kr_bytes_add(&out, "Z", 1));
                o1 = kr_records_up(b, n, &uo, &out, NULL, NULL, 0);
                KR_TEST_CHECK(o1 == KR_RECORDS_OK || out.len == 1,
                              "input %zu byte %zu: out changed", i, pos);
                out.len = 1;
                dd.magic = (int8_t)(pos & 1);
                o2 = kr_records_down(b, n, &dd, &out, NULL, NULL, 0);
                KR_TEST_CHECK(o2 == KR_RECORDS_OK || out.len == 1,
                              "input %zu byte %zu: out changed", i, pos);
                ok += (o1 == KR_RECORDS_OK) + (o2 == KR_RECORDS_OK);
                bad += (o1 != KR_RECORDS_OK) + (o2 != KR_RECORDS_OK);
            }
        }
    }
    /* both kinds seen */
    ck_assert_int_gt(ok, 100);
    ck_assert_int_gt(bad, 100);
    kr_bytes_free(&out);
}
END_TEST

/*
 * kr_records_down_segs gives what kr_records_down gives over the bytes
 * joined: outcome, output, stats, for inputs cut into segments every
 * way (each segment its own allocation, so that ASan sees a read past
 * one): in two at every byte, in small pieces with empty ones between.
 */
static int
segs_cmp(const uint8_t *in, size_t n, const size_t *cuts, size_t ncut,
         const struct kr_records_down_opts *o)
{
    struct iovec v[600];
    uint8_t *own[600];
    struct kr_bytes a = { 0 }, b = { 0 };
    struct kr_records_stats sa = { 0 }, sb = { 0 };
    enum kr_records_outcome oa, ob;
    size_t from = 0;
    int nv = 0, bad = 0;

    for (size_t i = 0; i <= ncut && nv < 600; i++) {
        size_t to = i < ncut ? cuts[i] : n;

        own[nv] = malloc(to - from > 0 ? to - from : 1);
        ck_assert_ptr_nonnull(own[nv]);
        memcpy(own[nv], in + from, to - from);
        v[nv].iov_base = own[nv];
        v[nv].iov_len = to - from;
        nv++;
        from = to;
    }
    KR_TEST_CHECK(kr_bytes_add(&a, "Z", 1) && kr_bytes_add(&b, "Z", 1));
    oa = kr_records_down(in, n, o, &a, &sa, NULL, 0);
    ob = kr_records_down_segs(v, nv, o, &b, &sb, NULL, 0);
    if (oa != ob || a.len != b.len || memcmp(a.p, b.p, a.len) != 0 ||
        memcmp(&sa, &sb, sizeof(sa)) != 0) {
        bad = 1;
    }
    for (int i = 0; i < nv; i++) {
        free(own[i]);
    }
    kr_bytes_free(&a);
    kr_bytes_free(&b);
    return bad;
}

START_TEST(test_down_segs)
{
    static const struct {
        const uint8_t *p;
        size_t n;
    } in[] = {
        { down_plain_in, DOWN_PLAIN_IN_LEN },
        { down_gzip_in, DOWN_GZIP_IN_LEN },
        { down_snappy_in, DOWN_SNAPPY_IN_LEN },
        { down_lz4_in, DOWN_LZ4_IN_LEN },
        { down_zstd_in, DOWN_ZSTD_IN_LEN },
        { down_lat_plain_in, DOWN_LAT_PLAIN_IN_LEN },
        { down_ctl_in, DOWN_CTL_IN_LEN },
        { down_lim_in, DOWN_LIM_IN_LEN },
        { up_plain_v1_in, UP_PLAIN_V1_IN_LEN },
        { up_gzip_v1_in, UP_GZIP_V1_IN_LEN },
    };
    static const size_t pieces[] = { 1, 2, 0, 3, 5, 7, 0, 11 };
    uint8_t b[1024];
    size_t cuts[600];
    int bad = 0, runs = 0;

    for (size_t i = 0; i < KR_ARRAY_LEN(in); i++) {
        for (int v = 0; v < 8; v++) {
            struct kr_records_down_opts o = {
                .magic = (int8_t)(v & 1),
                .max_bytes = (v & 2) ? 300 : 0,
                .fetch_offset = (v & 4) ? 101 : 0,
                .max_uncompressed = 4096 };
            size_t n = in[i].n, nc = 0, at = 0;

            for (size_t k = 0; k <= n; k++) {
                cuts[0] = k;
                bad += segs_cmp(in[i].p, n, cuts, 1, &o);
                runs++;
            }
            for (size_t k = 0; at < n && nc < 599; k++) {
                at += pieces[k % KR_ARRAY_LEN(pieces)];
                cuts[nc++] = at < n ? at : n;
            }
            bad += segs_cmp(in[i].p, n, cuts, nc, &o);
            runs++;
        }
    }
    /* every byte changed (CRCs fixed), cut in pieces of 3 */
    for (size_t i = 0; i < KR_ARRAY_LEN(in); i++) {
        struct kr_records_down_opts o = { .magic = 1, .max_bytes = 300,
                                          .max_uncompressed = 4096 };

        for (size_t pos = 0; pos < in[i].n; pos++) {
            size_t n = in[i].n, nc = 0;

            memcpy(b, in[i].p, n);
            b[pos] ^= (uint8_t)(pos & 1 ? 0x80 : 0x01);
            fix_all_crcs(b, n);
            for (size_t at = 3; at < n && nc < 599; at += 3) {
                cuts[nc++] = at;
            }
            o.magic = (int8_t)(pos & 1);
            bad += segs_cmp(b, n, cuts, nc, &o);
            runs++;
        }
    }
    ck_assert_int_gt(runs, 1000);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* Two threads converting at once (each keeps its own scratch) get what
 * one thread got. */
struct thr {
    const struct kr_bytes *want_up, *want_down;
    int bad;
};

static void *
thr_run(void *arg)
{
    struct thr *t = arg;
    struct kr_records_down_opts o = { .magic = 0 };

    for (int i = 0; i < 200; i++) {
        struct kr_bytes u = { 0 }, d = { 0 };

        if (kr_records_up(up_lz4_v0_in, UP_LZ4_V0_IN_LEN, NULL, &u, NULL,
                          NULL, 0) != KR_RECORDS_OK ||
            kr_records_down(down_gzip_in, DOWN_GZIP_IN_LEN, &o, &d, NULL,
                            NULL, 0) != KR_RECORDS_OK ||
            u.len != t->want_up->len || d.len != t->want_down->len ||
            memcmp(u.p, t->want_up->p, u.len) != 0 ||
            memcmp(d.p, t->want_down->p, d.len) != 0) {
            t->bad++;
        }
        kr_bytes_free(&u);
        kr_bytes_free(&d);
    }
    return NULL;
}

START_TEST(test_threads)
{
    struct kr_bytes u = { 0 }, d = { 0 };
    struct kr_records_down_opts o = { .magic = 0 };
    struct thr t[2] = { { &u, &d, 0 }, { &u, &d, 0 } };
    pthread_t th[2];

    ck_assert_int_eq(kr_records_up(up_lz4_v0_in, UP_LZ4_V0_IN_LEN, NULL, &u,
                                   NULL, NULL, 0), KR_RECORDS_OK);
    ck_assert_int_eq(kr_records_down(down_gzip_in, DOWN_GZIP_IN_LEN, &o, &d,
                                     NULL, NULL, 0), KR_RECORDS_OK);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, thr_run, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_int_eq(t[i].bad, 0);
    }
    kr_bytes_free(&u);
    kr_bytes_free(&d);
}
END_TEST

static Suite *
records_suite(void)
{
    Suite *s = suite_create("kr_records");
    TCase *tc = tcase_create("records");

    tcase_add_test(tc, test_crc);
    tcase_add_test(tc, test_up_plain);
    tcase_add_test(tc, test_up_wrappers);
    tcase_add_test(tc, test_up_split);
    tcase_add_test(tc, test_up_split_compressed);
    tcase_add_test(tc, test_up_bad);
    tcase_add_test(tc, test_up_bad_sum);
    tcase_add_test(tc, test_down_plain);
    tcase_add_test(tc, test_down_compressed);
    tcase_add_test(tc, test_down_zstd);
    tcase_add_test(tc, test_down_control_partial);
    tcase_add_test(tc, test_down_limit);
    tcase_add_test(tc, test_down_bad);
    tcase_add_test(tc, test_down_legacy_entries);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_mutations);
    tcase_add_test(tc, test_down_segs);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(records_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
