/*
 * kr_compress.h - Kafka's record compression codecs over whole buffers:
 * gzip (zlib), snappy (libsnappy), lz4 (liblz4's frame format), zstd
 * (libzstd), as Kafka's clients and brokers write and read them.  Used by
 * the records module (kr_records.h) to convert between the message
 * formats (legacy translation, issue 10).  Pure: no I/O, no config.
 *
 * The framings are Kafka's, not the libraries' defaults:
 *   gzip    an RFC 1952 gzip stream (Java's GZIPOutputStream); input may
 *           hold several members back to back.
 *   snappy  output: Java's xerial snappy-java framing (SnappyOutputStream:
 *           the 16-byte header 82 'SNAPPY' 00, version 1, compatible 1,
 *           then blocks of int32 length + raw snappy, big-endian, each
 *           block at most 32 KiB uncompressed, snappy-java's default), as
 *           Kafka writes it; an empty input is the header alone.  Input:
 *           that framing (several streams back to back too, as
 *           SnappyInputStream reads them; version 0 refused as it does)
 *           or one raw snappy block (librdkafka and other non-Java
 *           clients write a raw block).
 *   lz4     the LZ4 frame format (KafkaLZ4BlockOutputStream: 64 KiB
 *           blocks, independent, no content checksum or size).  Magic 0
 *           messages were written with a wrong frame-descriptor checksum
 *           (KAFKA-1493: xxhash over the magic number too):
 *           KR_Z_LZ4_KAFKA1493 accepts that checksum on input (fixed before
 *           liblz4 sees it; the right one is accepted too, as librdkafka
 *           does) and writes it on output; without the flag it is
 *           KR_Z_CORRUPT.  Input: one frame (linked blocks, block and
 *           content checksums and a content size accepted; a dictionary
 *           id refused, as Kafka does).
 *   zstd    zstd frames (content size not required on input; several
 *           frames back to back read in turn); output one frame with its
 *           content size, level 3.
 * Input truncated, or followed by bytes that are not another member /
 * stream / frame, is KR_Z_CORRUPT.
 *
 * Threads: the functions are thread-safe.  Each thread keeps its own
 * zlib, liblz4 and libzstd contexts (created on first use, reset per
 * call, freed when the thread exits), so a call allocates only its
 * output.
 */
#ifndef KR_COMPRESS_H
#define KR_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_common.h"

/*
 * The codec ids of a RecordBatch's (and a magic 0/1 message's) attributes,
 * bits 0-2 (DefaultRecordBatch.java, CompressionType.java).
 */
enum kr_compression {
    KR_COMPRESSION_NONE = 0,
    KR_COMPRESSION_GZIP = 1,
    KR_COMPRESSION_SNAPPY = 2,
    KR_COMPRESSION_LZ4 = 3,
    KR_COMPRESSION_ZSTD = 4
};

/* "none", "gzip", "snappy", "lz4", "zstd"; "unknown" otherwise. */
const char *kr_compression_name(int codec);

/*
 * A growable byte buffer: p[0..len) holds data, cap bytes allocated.  A
 * zeroed struct is an empty buffer; free with kr_bytes_free.  Functions
 * that append to one leave it at its length on entry when they fail.
 */
struct kr_bytes {
    uint8_t *p;
    size_t len, cap;
};

/* Make room for n more bytes (p + len writable for n; the capacity at
   least doubles); false on ENOMEM or an impossible size (b unchanged). */
bool kr_bytes_reserve(struct kr_bytes *b, size_t n) KR_MUST_CHECK;
/* Append n bytes; false on ENOMEM (b unchanged). */
bool kr_bytes_add(struct kr_bytes *b, const void *p, size_t n) KR_MUST_CHECK;
/* Free the memory, leave b zeroed. */
void kr_bytes_free(struct kr_bytes *b);

/* Flags for kr_compress/kr_decompress. */
#define KR_Z_LZ4_KAFKA1493 0x1u    /* magic 0 LZ4 (see the top) */

/* What a (de)compression came to. */
enum kr_z_outcome {
    KR_Z_OK,
    KR_Z_CORRUPT,                  /* the input does not decompress (bad
                                      header, checksum, truncated, trailing
                                      garbage) */
    KR_Z_TOO_LARGE,                /* the output would pass max_out */
    KR_Z_UNSUPPORTED,              /* codec is not one of the four */
    KR_Z_NOMEM
};

/* "ok", "corrupt", "too large", "unsupported codec", "out of memory". */
const char *kr_z_outcome_name(enum kr_z_outcome o);

/*
 * Decompress n bytes at in, compressed with codec (enum kr_compression,
 * not NONE) in Kafka's framing (flags: KR_Z_LZ4_KAFKA1493), appending
 * the result to out.  At most max_out bytes are produced: more is
 * KR_Z_TOO_LARGE (a decompression bomb stops there: out never grows past
 * its length on entry + max_out, whatever size the input declares).  On
 * any outcome but KR_Z_OK out is left at its length on entry (its
 * capacity may have grown).  KR_Z_UNSUPPORTED for a codec not one of the
 * four (NONE included).
 */
enum kr_z_outcome kr_decompress(int codec, unsigned flags, const uint8_t *in,
                                size_t n, size_t max_out,
                                struct kr_bytes *out) KR_MUST_CHECK;

/*
 * Compress n bytes at in with codec (not NONE) in Kafka's framing (see
 * the top; flags: KR_Z_LZ4_KAFKA1493 writes magic 0's checksum), at the
 * levels librdkafka uses by default (gzip Z_DEFAULT_COMPRESSION, lz4
 * liblz4's fast mode, zstd 3), appending to out.  KR_Z_OK,
 * KR_Z_UNSUPPORTED or KR_Z_NOMEM (out left at its length on entry).
 */
enum kr_z_outcome kr_compress(int codec, unsigned flags, const uint8_t *in,
                              size_t n, struct kr_bytes *out) KR_MUST_CHECK;

#endif /* KR_COMPRESS_H */
