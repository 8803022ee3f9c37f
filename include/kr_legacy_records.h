/*
 * kr_legacy_records.h - the records of a Produce request or Fetch
 * response that legacy translation carries across the message-format
 * boundary (issue 10): Produce v0-2's magic 0/1 message sets become
 * RecordBatch v2 (the request goes up to v3+), Fetch v4+'s batches become
 * magic 0/1 message sets for a v0-3 client.
 *
 * Works on decoded trees (kr_codec.h) and the payload their records
 * slices point into (struct kr_rbuf); each partition's records are
 * converted by kr_records (kr_records.h) and put back into the tree as
 * records krelay built: in a shared block of their own (kr_xbuf.h,
 * kr_val_set_records_shared: at least 16 KiB, the tree's arena holding
 * its reference, kr_arena_defer; the encoder lists it as a slice and
 * libevent writes it by reference), or copied into the tree's arena
 * (kr_val_set_records_ext) when smaller.  A Fetch partition's records
 * are read where the payload's segments hold them
 * (kr_records_down_segs).  A partition whose records do not convert is
 * taken out of a
 * Produce request (remembered, answered with its error in the response:
 * kr_legacy_produce_merge) or gets its error in a Fetch response.  Pure:
 * no session, no config, no I/O.
 */
#ifndef KR_LEGACY_RECORDS_H
#define KR_LEGACY_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_codec.h"
#include "kr_records.h"

/* How records are converted (the listener's keys). */
struct kr_legacy_rec_opts {
    size_t max_batch_bytes;             /* legacy_batch_max_bytes: no
                                           RecordBatch above it (0: none) */
    size_t max_uncompressed;            /* max_frame_bytes: decompressed
                                           bytes of a Produce request's
                                           wrappers together, of a Fetch
                                           response's batch */
    enum kr_legacy_zstd zstd;           /* legacy_zstd */
};

/*
 * One partition a translated request named, kept with the request until
 * its response: Fetch's FetchOffset and PartitionMaxBytes (the response's
 * records are cut to them), or a Produce partition that was not forwarded
 * (error: the Kafka error its response carries): its records did not
 * convert, or its message set was empty (error 0, NONE: answered as a
 * success with BaseOffset -1).
 */
struct kr_legacy_part {
    char *topic;                        /* malloc'd, NUL-terminated */
    int32_t partition;
    int64_t fetch_offset;
    int32_t max_bytes;
    int16_t error;                      /* KR_KERR_*; 0: none (Produce:
                                           an empty set, nothing
                                           appended) */
    char why[160];                      /* error: what was wrong */
    uint32_t topic_at, part_at;         /* Produce: its place in the
                                           request (TopicData and
                                           PartitionData indexes) */
};

/* The partitions of one request (malloc'd array of n; zeroed: empty). */
struct kr_legacy_parts {
    struct kr_legacy_part *v;
    size_t n;
    size_t cap;                         /* v's room, grown by doubling */
};

/* Free the array and its topic names; leave p zeroed. */
void kr_legacy_parts_free(struct kr_legacy_parts *p);

/* The partitions of p whose error is not 0 (NONE). */
size_t kr_legacy_parts_failed(const struct kr_legacy_parts *p);

/*
 * A Produce partition whose message set converted into several
 * RecordBatches (a set larger than legacy_batch_max_bytes, or one
 * mixing codecs).  Produce v3+ takes exactly one batch per partition
 * (ProduceRequest.validateRecords, KAFKA-4816), so the batches before
 * its last go up in Produce requests of krelay's own ("rounds", sent
 * ahead of the client's on the same connection: a broker appends a
 * connection's requests in order), and the client's request carries the
 * last batch: every partition the client named stays in its request.
 * Round r (0-based) of a request with R rounds carries, of a partition
 * with nbatch early batches, batch r - (R - nbatch) when that is >= 0:
 * the batches are aligned to the client's request.
 *
 * The answers: each round's response is taken (kr_legacy_split_take).
 * With Acks != 0 the rounds go up one at a time, each once the one
 * before it was answered without an error (kr_legacy_split_round_error),
 * then the client's request: at the first error nothing more goes up,
 * and krelay answers the client's request with that error for its every
 * partition, so that a retry of the set stores it again after a prefix
 * of it, never before a part stored later (duplicates, as any retry
 * without idempotence, but the partition's order kept).  Once all went
 * up, the rounds' answers are merged into the client's
 * (kr_legacy_split_merge): the first error wins, else BaseOffset and
 * LogAppendTimeMs are the first batch's.  Acks=0: the rounds are
 * pipelined (no answer to wait for).  Not atomic, unlike the one append
 * of a broker: other connections' records may land between the batches
 * (the offsets a client computes from the first BaseOffset are then
 * others').  README.md says so.
 */
struct kr_legacy_split {
    char *topic;                        /* malloc'd, topic_len bytes and a
                                           NUL (a name may hold NULs) */
    size_t topic_len;
    int32_t partition;
    uint32_t nbatch;                    /* batches before its last, >= 1 */
    const uint8_t *early;               /* those batches back to back,
                                           early_len bytes in the arena of
                                           the request's tree: valid while
                                           the rounds are built only
                                           (kr_legacy_produce_round) */
    size_t early_len;
    /* from the rounds' answers (kr_legacy_split_take) */
    uint32_t answered;                  /* rounds whose answer named it */
    int16_t error;                      /* the first ErrorCode not 0 */
    int64_t base_offset;                /* the first round's BaseOffset */
    int64_t log_append_time;            /* the first round's
                                           LogAppendTimeMs (-1: none) */
};

/*
 * The split partitions of one request, sorted by topic then partition
 * (kr_legacy_produce_up sorts them), and the rounds they need.  malloc'd
 * with kr_legacy_splits_new, reference counted: the request's legacy
 * state holds one, each round's in-flight entry one (its answer may
 * come, or be given up, after the rest of the request was freed:
 * kr_legacy_splits_unref), the session one while rounds wait for their
 * turn.  Touched by one thread, the session's.
 */
struct kr_legacy_splits {
    struct kr_legacy_split *v;
    size_t n, cap;
    uint32_t rounds;                    /* requests ahead of the client's:
                                           the largest nbatch */
    unsigned refs;
};

/*
 * At most this many rounds ahead of one client request: a partition
 * whose set would need more batches is refused with MESSAGE_TOO_LARGE,
 * as before splitting (each round is an in-flight request; 64 MiB
 * requests at the default 1 MiB batches need 63).
 */
#define KR_LEGACY_MAX_ROUNDS 256u

/* A new empty set of splits with one reference, or NULL (ENOMEM). */
struct kr_legacy_splits *kr_legacy_splits_new(void);

/* One more reference to sp (not NULL). */
void kr_legacy_splits_ref(struct kr_legacy_splits *sp);

/* One reference less (sp may be NULL); the last frees sp and its
   topic names. */
void kr_legacy_splits_unref(struct kr_legacy_splits *sp);

/*
 * The body of round r (0 <= r < sp->rounds) of a split Produce request:
 * body is the client's request as it goes up (at version v, every
 * partition with its last batch), as a template: the round is a copy of
 * body (Acks, TimeoutMs, TransactionalId) naming only the partitions
 * with a batch in round r, each with that batch (copied when encoded).
 * Arena a; *out borrows from body and from sp's early bytes.  KR_OK,
 * KR_ENOMEM, or KR_EPROTO when body is not a Produce body naming the
 * split partitions.
 */
int kr_legacy_produce_round(struct kr_arena *a, const struct kr_node *body,
                            int16_t v, const struct kr_legacy_splits *sp,
                            uint32_t r, struct kr_node **out) KR_MUST_CHECK;

/*
 * A round's answer (a Produce response body rsp at any version): for
 * each partition it names that sp has, its ErrorCode and, from the
 * first round, BaseOffset and LogAppendTimeMs.  Partitions sp does not
 * have are ignored.  KR_OK or KR_EPROTO (rsp is not a Produce response).
 */
int kr_legacy_split_take(struct kr_legacy_splits *sp,
                         const struct kr_node *rsp) KR_MUST_CHECK;

/*
 * After the answers to rounds 0..r were taken (kr_legacy_split_take): the
 * first error (sp's order) of a partition with a batch in those rounds,
 * its split in *which; UNKNOWN_SERVER_ERROR for one whose batch an
 * answer did not name (the broker answered what it was not asked: its
 * batch may or may not be stored).  KR_KERR_NONE (and *which NULL) when
 * there is none: round r + 1 (or the client's request) may go up.
 */
int16_t kr_legacy_split_round_error(const struct kr_legacy_splits *sp,
                                    uint32_t r,
                                    const struct kr_legacy_split **which);

/*
 * The client's response rsp (a Produce response body, at the upstream's
 * version, before it goes down to the client's) with what the rounds
 * answered: for a split partition, the first error of its rounds (then
 * BaseOffset and LogAppendTimeMs -1) or, when its rounds and its own
 * answer have none, the first round's BaseOffset and LogAppendTimeMs.
 * A split partition that a round's answer did not name gets
 * UNKNOWN_SERVER_ERROR (the broker answered what it was not asked).
 * *nerr counts the partitions given a round's error.  KR_OK or
 * KR_EPROTO.
 */
int kr_legacy_split_merge(struct kr_node *rsp,
                          const struct kr_legacy_splits *sp,
                          unsigned *nerr) KR_MUST_CHECK;

/*
 * A Produce request body decoded at v0-2 (req, whose records slices point
 * into rb): every partition's magic 0/1 message set converted to
 * RecordBatch v2 in place (arena a).  A set that converts into several
 * batches (past o->max_batch_bytes, or mixing codecs) keeps its last in
 * req and is added to *split with the others (sorted when done; see
 * struct kr_legacy_split).  A partition whose records do not convert
 * (CRC, compression, size: CORRUPT_MESSAGE), whose wrappers decompress
 * past what the partitions before it left of o->max_uncompressed (a
 * budget for the whole request: gzip bombs spread over many partitions
 * do not each get the limit; CORRUPT_MESSAGE), or that would need more
 * than KR_LEGACY_MAX_ROUNDS rounds (MESSAGE_TOO_LARGE) is left as it
 * came and added to *bad; so is one whose set is empty (MessageSetSize
 * 0), with error 0 (NONE): Produce v3+ refuses empty records (Kafka 4:
 * INVALID_RECORD), and a 0.10 broker appended nothing and answered
 * BaseOffset -1.  The caller answers the request itself when
 * kr_legacy_produce_any_left says nothing else is left, else drops them
 * (kr_legacy_produce_drop) before forwarding.  st accumulates.  Returns
 * KR_OK, KR_ENOMEM, or KR_EPROTO when the tree is not a Produce body.
 */
int kr_legacy_produce_up(struct kr_arena *a, struct kr_node *req,
                         const struct kr_rbuf *rb,
                         const struct kr_legacy_rec_opts *o,
                         struct kr_legacy_parts *bad,
                         struct kr_legacy_splits *split,
                         struct kr_records_stats *st) KR_MUST_CHECK;

/*
 * The partitions a Produce request body (any version) names, in its
 * order, appended to *out (error 0, topic_at and part_at set).  KR_OK,
 * KR_ENOMEM, or KR_EPROTO when req is not a Produce body.
 */
int kr_legacy_produce_parts(const struct kr_node *req,
                            struct kr_legacy_parts *out) KR_MUST_CHECK;

/* Does req name a partition that is not one of bad's?  (bad: as
   kr_legacy_produce_up filled it for req, in request order.) */
bool kr_legacy_produce_any_left(const struct kr_node *req,
                                const struct kr_legacy_parts *bad);

/* Remove bad's partitions (kr_legacy_produce_up's, by their place in
   req) from req, and topics left with none.  Linear in req's size. */
void kr_legacy_produce_drop(struct kr_node *req,
                            const struct kr_legacy_parts *bad);

/*
 * Add the partitions of bad to a Produce response body rsp (any version,
 * after it was translated back to the client's): each with its ErrorCode,
 * BaseOffset -1, under its topic (added when the broker's response has
 * no entry for it).  Each topic's partition array and the topic array
 * grow once, whatever the number of bad partitions (a request may name
 * tens of thousands).  Returns KR_OK, KR_ENOMEM, or KR_EPROTO when rsp
 * is not a Produce response body.
 */
int kr_legacy_produce_merge(struct kr_arena *a, struct kr_node *rsp,
                            const struct kr_legacy_parts *bad) KR_MUST_CHECK;

/*
 * The partitions a Fetch request body (any version with topic names,
 * v0-12) names, with their FetchOffset and PartitionMaxBytes, into *out.
 * KR_OK or KR_ENOMEM.
 */
int kr_legacy_fetch_parts(const struct kr_node *req,
                          struct kr_legacy_parts *out) KR_MUST_CHECK;

/*
 * A Fetch response body rsp (decoded at the upstream's version, v4-12,
 * records slices into rb) for a client at client_version (0-3): every
 * partition's records converted down to magic 0 (v0-1) or 1 (v2-3),
 * from its FetchOffset and within its PartitionMaxBytes (parts, from the
 * request; a partition not found there gets the whole batch set).  A
 * partition whose records do not convert gets that ErrorCode (set in
 * rsp) and no records.  st accumulates; *nbad counts those partitions.
 * Returns KR_OK, KR_ENOMEM, or KR_EPROTO when rsp is not a Fetch body.
 */
int kr_legacy_fetch_down(struct kr_arena *a, struct kr_node *rsp,
                         const struct kr_rbuf *rb, int16_t client_version,
                         const struct kr_legacy_parts *parts,
                         const struct kr_legacy_rec_opts *o,
                         struct kr_records_stats *st,
                         unsigned *nbad) KR_MUST_CHECK;

#endif /* KR_LEGACY_RECORDS_H */
