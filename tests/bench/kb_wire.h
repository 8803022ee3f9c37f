/*
 * kb_wire.h - the few Kafka encodings the benchmark programs write by hand
 * (tests/bench/krbench.c, tests/bench/bench_codec.c): a growable byte
 * buffer, big-endian integers, varints, strings, RecordBatch v2 and
 * Produce request frames.
 *
 * Written independently of src/kr_codec.c on purpose: the instrument
 * must not share the code it measures.  Layouts follow Kafka's
 * ProduceRequest.json (v3-v12; flexible from v9) and the RecordBatch v2
 * format (KIP-98).  Out of memory exits the program.
 */
#ifndef KB_WIRE_H
#define KB_WIRE_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable byte buffer; a zeroed struct is empty.  free(b.p) frees. */
struct kb_buf {
    uint8_t *p;
    size_t len, cap;
};

static inline void
kb_put(struct kb_buf *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;

        while (cap < b->len + n) {
            cap *= 2;
        }
        b->p = realloc(b->p, cap);
        if (b->p == NULL) {
            fputs("out of memory\n", stderr);
            exit(1);
        }
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static inline void
kb_i8(struct kb_buf *b, int8_t v)
{
    kb_put(b, &v, 1);
}

static inline void
kb_i16(struct kb_buf *b, int16_t v)
{
    uint16_t n = htons((uint16_t)v);

    kb_put(b, &n, 2);
}

static inline void
kb_i32(struct kb_buf *b, int32_t v)
{
    uint32_t n = htonl((uint32_t)v);

    kb_put(b, &n, 4);
}

static inline void
kb_i64(struct kb_buf *b, int64_t v)
{
    kb_i32(b, (int32_t)(uint32_t)((uint64_t)v >> 32));
    kb_i32(b, (int32_t)(uint32_t)v);
}

static inline void
kb_uvarint(struct kb_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        kb_i8(b, (int8_t)(uint8_t)(v | 0x80));
        v >>= 7;
    }
    kb_i8(b, (int8_t)(uint8_t)v);
}

/* zigzag varint (Record fields) */
static inline void
kb_varint(struct kb_buf *b, int64_t v)
{
    kb_uvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* string: int16 length (classic) or uvarint length+1 (compact). */
static inline void
kb_str(struct kb_buf *b, const char *s, bool compact)
{
    size_t n = strlen(s);

    if (compact) {
        kb_uvarint(b, n + 1);
    } else {
        kb_i16(b, (int16_t)n);
    }
    kb_put(b, s, n);
}

/* Overwrite 4 bytes at offset at with big-endian v. */
static inline void
kb_set_i32(struct kb_buf *b, size_t at, int32_t v)
{
    uint32_t n = htonl((uint32_t)v);

    memcpy(b->p + at, &n, 4);
}

/* CRC-32C (Castagnoli), as RecordBatch v2 uses; bytewise table. */
static inline uint32_t
kb_crc32c(const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    uint32_t crc = 0xffffffffu;

    if (table[1] == 0) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;

            for (int k = 0; k < 8; k++) {
                c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            }
            table[i] = c;
        }
    }
    while (n-- > 0) {
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return crc ^ 0xffffffffu;
}

/*
 * Append a RecordBatch v2 (magic 2, no compression, no producer id) of
 * nrec records, each with a null key and a vlen-byte value, no headers.
 */
static inline void
kb_record_batch(struct kb_buf *b, int nrec, size_t vlen)
{
    struct kb_buf val = { 0 };
    size_t start = b->len, crc_at, attr_at;
    int64_t ts = 1700000000000;

    for (size_t i = 0; i < vlen; i++) {
        kb_i8(&val, (int8_t)('a' + i % 26));
    }
    kb_i64(b, 0);                   /* baseOffset */
    kb_i32(b, 0);                   /* batchLength, patched below */
    kb_i32(b, -1);                  /* partitionLeaderEpoch */
    kb_i8(b, 2);                    /* magic */
    crc_at = b->len;
    kb_i32(b, 0);                   /* crc, patched below */
    attr_at = b->len;
    kb_i16(b, 0);                   /* attributes */
    kb_i32(b, nrec - 1);            /* lastOffsetDelta */
    kb_i64(b, ts);                  /* baseTimestamp */
    kb_i64(b, ts);                  /* maxTimestamp */
    kb_i64(b, -1);                  /* producerId */
    kb_i16(b, -1);                  /* producerEpoch */
    kb_i32(b, -1);                  /* baseSequence */
    kb_i32(b, nrec);                /* records count */
    for (int r = 0; r < nrec; r++) {
        struct kb_buf rec = { 0 };

        kb_i8(&rec, 0);             /* attributes */
        kb_varint(&rec, 0);         /* timestampDelta */
        kb_varint(&rec, r);         /* offsetDelta */
        kb_varint(&rec, -1);        /* key: null */
        kb_varint(&rec, (int64_t)vlen);
        if (vlen > 0) {
            kb_put(&rec, val.p, vlen);
        }
        kb_varint(&rec, 0);         /* headers */
        kb_varint(b, (int64_t)rec.len);
        kb_put(b, rec.p, rec.len);
        free(rec.p);
    }
    free(val.p);
    kb_set_i32(b, start + 8, (int32_t)(b->len - start - 12));
    kb_set_i32(b, crc_at, (int32_t)kb_crc32c(b->p + attr_at,
                                             b->len - attr_at));
}

/*
 * Append a whole Produce request frame (int32 size prefix included) at
 * version v (3..12), Acks=1: one topic, partitions 0..nparts-1, each with
 * one batch of nrec records of vlen bytes.  The CorrelationId is at
 * byte offset 8 of the frame (kb_set_i32 it per request).
 */
static inline void
kb_produce_frame(struct kb_buf *b, int v, const char *topic, int32_t part0,
                 int nparts, int nrec, size_t vlen)
{
    bool flex = v >= 9;
    struct kb_buf batch = { 0 };
    size_t start = b->len;

    kb_record_batch(&batch, nrec, vlen);
    kb_i32(b, 0);                   /* size, patched below */
    kb_i16(b, 0);                   /* ApiKey Produce */
    kb_i16(b, (int16_t)v);
    kb_i32(b, 0);                   /* CorrelationId */
    kb_str(b, "krbench", false);    /* ClientId: always int16 length */
    if (flex) {
        kb_uvarint(b, 0);           /* header tagged fields */
        kb_uvarint(b, 0);           /* TransactionalId: null */
    } else {
        kb_i16(b, -1);
    }
    kb_i16(b, 1);                   /* Acks */
    kb_i32(b, 30000);               /* TimeoutMs */
    if (flex) {
        kb_uvarint(b, 2);           /* TopicData: 1 */
        kb_str(b, topic, true);
        kb_uvarint(b, (uint64_t)nparts + 1);
    } else {
        kb_i32(b, 1);
        kb_str(b, topic, false);
        kb_i32(b, nparts);
    }
    for (int p = 0; p < nparts; p++) {
        kb_i32(b, part0 + p);       /* Index */
        if (flex) {
            kb_uvarint(b, batch.len + 1);
        } else {
            kb_i32(b, (int32_t)batch.len);
        }
        kb_put(b, batch.p, batch.len);
        if (flex) {
            kb_uvarint(b, 0);       /* partition tagged fields */
        }
    }
    if (flex) {
        kb_uvarint(b, 0);           /* topic tagged fields */
        kb_uvarint(b, 0);           /* body tagged fields */
    }
    free(batch.p);
    kb_set_i32(b, start, (int32_t)(b->len - start - 4));
}

#endif /* KB_WIRE_H */
