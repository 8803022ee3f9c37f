/*
 * kr_records.h - Kafka's record formats converted both ways, for old
 * clients on brokers that no longer speak their versions (legacy
 * translation, issue 10; KIP-896 removed Produce v0-2 and Fetch v0-3,
 * KIP-724 the brokers' own down-conversion).  Pure: bytes in, bytes out,
 * no I/O, no config; compression through kr_compress.h.
 *
 * The formats (big-endian; Kafka's LegacyRecord.java,
 * AbstractLegacyRecordBatch.java, DefaultRecordBatch.java,
 * DefaultRecord.java; KIP-31, KIP-32, KIP-98):
 *
 *   message set (magic 0/1): a sequence of entries
 *     Offset int64, MessageSize int32, then MessageSize bytes:
 *     Crc uint32       CRC-32 (IEEE, zlib's crc32) over Magic..the end
 *     Magic int8       0 or 1
 *     Attributes int8  bits 0-2 codec (enum kr_compression), bit 3
 *                      (magic 1) timestamp type: 1 = LogAppendTime
 *     Timestamp int64  magic 1 only (ms since the epoch; -1 none)
 *     Key bytes        int32 length (-1 null) and the bytes
 *     Value bytes      int32 length (-1 null) and the bytes
 *   A compressed entry (codec != 0) is a wrapper: its Value holds a
 *   compressed message set of uncompressed inner messages of the same
 *   magic.  Magic 0 inner offsets are absolute; magic 1 (KIP-31) inner
 *   offsets are relative (0, 1, ...) and the wrapper's Offset is the
 *   absolute offset of the last inner message.  A magic 1 wrapper with
 *   LogAppendTime gives its Timestamp to every inner message (KIP-32).
 *   Magic 0 messages have no timestamp: NO_TIMESTAMP (-1).
 *
 *   RecordBatch (magic 2), 61 bytes of header then the records:
 *     BaseOffset int64, BatchLength int32 (bytes after this field),
 *     PartitionLeaderEpoch int32, Magic int8 (2), Crc uint32 (CRC-32C,
 *     Castagnoli, over Attributes..the end), Attributes int16 (bits 0-2
 *     codec, 3 timestamp type, 4 transactional, 5 control),
 *     LastOffsetDelta int32, BaseTimestamp int64, MaxTimestamp int64,
 *     ProducerId int64, ProducerEpoch int16, BaseSequence int32,
 *     RecordCount int32, records (compressed as one stream when the
 *     codec is not none).  A record: Length varint (zigzag), Attributes
 *     int8, TimestampDelta varlong, OffsetDelta varint, Key (varint
 *     length, -1 null), Value (the same), Headers (varint count, each a
 *     varint-length key and value).
 *
 * CRCs: both are computed with ISA-L (crc32_gzip_refl gives zlib's
 * crc32 values; crc32_iscsi the CRC-32C register, inverted on the way
 * in and out for the standard value: crc32c("123456789") = 0xE3069283).
 * Every CRC of the input is checked; every CRC written is computed.
 *
 * Memory: inputs are read only; output is appended to a caller's
 * struct kr_bytes (kr_compress.h), which on any outcome but
 * KR_RECORDS_OK is left at its length on entry (nothing partial).
 * Scratch memory (the parsed records, decompressed and recompressed
 * payloads: a few growable buffers, never one allocation per record) is
 * kept per thread between calls, each buffer up to 2 MiB (larger ones
 * freed after the call), and freed at thread exit.  Thread-safe: nothing
 * is shared between threads.
 */
#ifndef KR_RECORDS_H
#define KR_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_compress.h"

/*
 * What a conversion did, added to by each call (the caller zeroes it
 * once and sums calls into it; counters only grow).
 */
struct kr_records_stats {
    uint64_t messages_in;          /* magic 0/1 messages read (inner ones
                                      of a wrapper, not the wrapper) */
    uint64_t records_out;          /* records (up) or messages (down,
                                      inner ones of a wrapper, not the
                                      wrapper) written whole */
    uint64_t batches_in;           /* RecordBatches read (down), wrappers
                                      and uncompressed runs read (up) */
    uint64_t batches_out;          /* RecordBatches (up) or wrapper
                                      messages (down) written */
    uint64_t bytes_in;             /* input bytes converted */
    uint64_t bytes_out;            /* bytes appended to out */
    uint64_t zstd_recompressed;    /* zstd batches served as gzip or
                                      uncompressed (legacy_zstd) */
    uint64_t dropped_control;      /* control batches skipped (down) */
    uint64_t dropped_below_offset; /* records below the fetch offset
                                      dropped (down, uncompressed) */
    uint64_t bytes_inflated;       /* up: bytes the wrappers decompressed
                                      to (a caller's budget over sets) */
};

/*
 * The outcome of a conversion.  Each failure but NOMEM is the client's
 * (up) or the broker's (down) bad input: that partition gets the Kafka
 * error named, the others go on (issue 10, "Bad input").
 */
enum kr_records_outcome {
    KR_RECORDS_OK,
    KR_RECORDS_CORRUPT,            /* CRC mismatch, bad sizes or magic,
                                      truncated, nested compression, a
                                      record count that does not match:
                                      CORRUPT_MESSAGE (2) */
    KR_RECORDS_BAD_COMPRESSION,    /* a wrapper/batch that does not
                                      decompress: CORRUPT_MESSAGE */
    KR_RECORDS_TOO_LARGE,          /* decompressed past max_uncompressed:
                                      CORRUPT_MESSAGE */
    KR_RECORDS_UNSUPPORTED_COMPRESSION, /* zstd for an old consumer with
                                      legacy_zstd = refuse, or a zstd
                                      wrapper from an old producer:
                                      UNSUPPORTED_COMPRESSION_TYPE (76) */
    KR_RECORDS_NOMEM
};

/* "ok", "corrupt", "bad compression", "too large", "unsupported
 * compression", "out of memory"; "unknown" otherwise. */
const char *kr_records_outcome_name(enum kr_records_outcome o);

/* What an old consumer gets for a zstd batch (config key legacy_zstd). */
enum kr_legacy_zstd {
    KR_LEGACY_ZSTD_GZIP = 0,       /* recompressed as one gzip wrapper */
    KR_LEGACY_ZSTD_NONE,           /* served as uncompressed messages */
    KR_LEGACY_ZSTD_REFUSE          /* KR_RECORDS_UNSUPPORTED_COMPRESSION,
                                      as brokers answered (KIP-110) */
};

/* Options of kr_records_up. */
struct kr_records_up_opts {
    size_t max_batch_bytes;        /* no RecordBatch written larger than
                                      this (bytes, header included, as
                                      compressed): brokers check
                                      max.message.bytes per batch; a
                                      single record larger goes alone.
                                      0: no limit */
    size_t max_uncompressed;       /* the set's wrappers together may
                                      decompress to at most this many
                                      bytes (max_frame_bytes); 0: no
                                      limit */
};

/*
 * Produce v0-2 -> v3+: the message set at set[0..n) (magic 0/1
 * messages, compressed wrappers included) becomes RecordBatch v2
 * batches appended to out.  o may be NULL (no limits); st may be NULL.
 *
 * Records keep their order, key, value and timestamp (magic 0: -1;
 * an inner message of a LogAppendTime wrapper: the wrapper's).
 * Consecutive records with the same codec and timestamp type (from
 * uncompressed messages, or from one or more wrappers) go into one
 * batch: BaseOffset 0 and OffsetDelta 0..n-1 (the broker assigns
 * offsets), PartitionLeaderEpoch -1, ProducerId -1, ProducerEpoch -1,
 * BaseSequence -1, not transactional, no headers, the codec of the
 * input recompressed with kr_compress (lz4 with the correct frame
 * checksum), timestamp type of the input, BaseTimestamp the first
 * record's, MaxTimestamp the largest (-1 when none has one).
 * A run larger than o->max_batch_bytes is split: uncompressed exactly;
 * compressed by an estimate from the ratio of a first attempt, then a
 * batch still too large split in halves until it fits or holds a single
 * record.  Produce v3+ takes exactly one batch per partition
 * (ProduceRequest.validateRecords): a set that yields several batches
 * (stats->batches_out grew by more than 1; kr_records_batch_next walks
 * them) needs one Produce request per batch.  An empty set writes
 * nothing.  A set holding magic 2 batches is copied as is (a client
 * that sent v2 batches at Produce v0-2, which old brokers took).
 *
 * Errors: KR_RECORDS_CORRUPT (a message's CRC, sizes that do not add
 * up, a truncated message, a magic that is not 0/1 (or 2 for a whole
 * set), an inner message compressed or of another magic, an empty or
 * null wrapper), KR_RECORDS_BAD_COMPRESSION, KR_RECORDS_TOO_LARGE
 * (o->max_uncompressed), KR_RECORDS_UNSUPPORTED_COMPRESSION (a zstd
 * wrapper: magic 0/1 cannot carry zstd, brokers refused it),
 * KR_RECORDS_NOMEM; why (whylen bytes, may be NULL/0) then says which
 * message (its byte position in the set and offset) and what, e.g. the
 * expected and actual CRC.  out is unchanged on failure; st is added to
 * only on success.
 */
enum kr_records_outcome kr_records_up(const uint8_t *set, size_t n,
                                      const struct kr_records_up_opts *o,
                                      struct kr_bytes *out,
                                      struct kr_records_stats *st,
                                      char *why, size_t whylen)
    KR_MUST_CHECK;

/* Options of kr_records_down. */
struct kr_records_down_opts {
    int8_t magic;                  /* 0: Fetch v0-1, 1: Fetch v2-3 */
    int64_t fetch_offset;          /* the partition's FetchOffset */
    size_t max_bytes;              /* the client's PartitionMaxBytes (the
                                      request's MaxBytes too when lower);
                                      0: no limit */
    enum kr_legacy_zstd zstd;      /* zstd batches (legacy_zstd) */
    size_t max_uncompressed;       /* a batch may decompress to at most
                                      this many bytes; 0: no limit */
};

/*
 * Fetch v0-3 <- v4+: the broker's records at in[0..n) (RecordBatch v2,
 * or older entries left in old segments) become a magic o->magic
 * message set appended to out, as Kafka's broker down-converted
 * (RecordsUtil.downConvert, LazyDownConversionRecords, KIP-283):
 *   - a partial batch at the end (brokers cut at the byte limit) is
 *     dropped; control batches are skipped (counted); records of
 *     aborted transactions are served (old clients cannot filter them);
 *     headers are dropped;
 *   - an uncompressed batch becomes one message per record at its
 *     absolute offset, records below o->fetch_offset dropped (counted);
 *   - a compressed batch becomes one wrapper message of the same codec
 *     holding all its records, those below the fetch offset included:
 *     downConvert keeps them ("uncompressed records in v0 and v1 are not
 *     batched"), and old consumers skip inner messages below the offset
 *     they asked for, as they did with old brokers' wrappers.  Magic 1:
 *     inner offsets relative to the first record, the wrapper's offset
 *     the last record's absolute offset; magic 0: absolute inner
 *     offsets, the wrapper at the last offset, LZ4 with the KAFKA-1493
 *     frame checksum;
 *   - magic 1 keeps timestamps; a LogAppendTime batch gives every
 *     message (and its wrapper) the batch's MaxTimestamp and attribute
 *     bit 3; a CreateTime wrapper carries its records' largest
 *     timestamp;
 *   - zstd batches per o->zstd (counted in zstd_recompressed): gzip,
 *     one gzip wrapper as above; none, uncompressed messages as above
 *     (records below the fetch offset dropped);
 *   - entries of magic <= o->magic are copied as they are; a magic 1
 *     entry for a magic 0 client is converted.
 * Byte limit (LazyDownConversionRecords/-Send): the output is cut at
 * L = max(o->max_bytes, the size of the first converted batch) bytes,
 * so the first batch's messages are always whole (a consumer makes
 * progress even when one batch is larger than its limit) and the last
 * message may be partial, as brokers sent it and as old consumers
 * expect (they drop a partial message at the end).  o->max_bytes 0: no
 * limit.  Nothing to serve (all control, all below the offset) writes
 * nothing.  o is required; st may be NULL.
 *
 * Errors: KR_RECORDS_CORRUPT (a batch's or message's CRC, a batch
 * length below the header, magic above 2, records that do not fill the
 * batch or do not match its count), KR_RECORDS_BAD_COMPRESSION,
 * KR_RECORDS_TOO_LARGE, KR_RECORDS_UNSUPPORTED_COMPRESSION (zstd with
 * KR_LEGACY_ZSTD_REFUSE in the first batch to serve: a zstd batch after
 * others ends the output there, as Kafka's overflow batch did, and the
 * consumer's next fetch from its offset gets the error),
 * KR_RECORDS_NOMEM; a codec id above 4 is KR_RECORDS_CORRUPT; why
 * names the batch (byte position, base offset) and the fault.  Only the
 * batches used are checked: those past the limit L are not read.  out
 * unchanged on failure; st added to only on success.
 */
enum kr_records_outcome kr_records_down(const uint8_t *in, size_t n,
                                        const struct kr_records_down_opts *o,
                                        struct kr_bytes *out,
                                        struct kr_records_stats *st,
                                        char *why, size_t whylen)
    KR_MUST_CHECK;

/*
 * kr_records_down over input in nseg segments (seg[0..nseg), in order:
 * the records of a frame where its evbuffer chains hold them, no copy
 * first).  The same output, outcomes and stats as kr_records_down over
 * the segments' bytes joined: batches that lie in one segment are read
 * where they are; an uncompressed one that straddles segments too, only
 * its records that straddle copied (scratch); any other that straddles
 * is copied whole first.  The byte positions in why count from the
 * first segment's first byte, but a magic 0/1 entry's (or compressed
 * batch's) inner ones: from the segment, or the copy, it is read in.
 */
struct iovec;
enum kr_records_outcome kr_records_down_segs(const struct iovec *seg,
                                             int nseg,
                                             const struct kr_records_down_opts *o,
                                             struct kr_bytes *out,
                                             struct kr_records_stats *st,
                                             char *why, size_t whylen)
    KR_MUST_CHECK;

/*
 * Walk the batches kr_records_up wrote (or any RecordBatch v2 bytes): the
 * batch starting at byte pos of buf[0..n).  true with its whole length
 * (BaseOffset through its last record) in *len, so the next starts at
 * pos + *len; false at the end or at bytes that are not a whole magic 2
 * batch.  Only the framing is checked, not the CRC.
 */
bool kr_records_batch_next(const uint8_t *buf, size_t n, size_t pos,
                           size_t *len);

/*
 * The standard CRC-32C (Castagnoli) of n bytes, as RecordBatch v2 uses
 * it (crc32c("123456789") = 0xE3069283).  Exposed for tests and tools.
 */
uint32_t kr_records_crc32c(const uint8_t *p, size_t n);

/* The CRC-32 (IEEE 802.3, zlib's crc32(0, p, n)) of magic 0/1 messages. */
uint32_t kr_records_crc32(const uint8_t *p, size_t n);

#endif /* KR_RECORDS_H */
