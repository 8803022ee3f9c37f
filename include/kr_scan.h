/*
 * kr_scan.h - a resumable scanner that walks a frame's structure as its
 * bytes arrive, without building a tree and without holding the bytes.
 *
 * The proxy streams large responses (a Fetch response may be tens of
 * MiB) whose only broker addresses sit in the body's top-level tagged
 * fields (KIP-951 NodeEndpoints in Fetch v16+, Produce v10+, ShareFetch
 * and ShareAcknowledge): it forwards every byte the scanner has passed,
 * and holds back only what follows the point where the body's own tagged
 * fields start (usually a single byte, "no tagged fields").
 *
 * Driven by the same generated tables as kr_codec (kr_schema.h), for any
 * API, version and direction: one generic state machine, no per-API
 * code.  Fixed-width values, string, bytes and records contents and the
 * tagged fields of nested structs are skipped by length and never read;
 * only length and count prefixes, nullable-struct markers and tag
 * headers are read (a few bytes each, possibly split across feeds).
 * Tagged fields the tables know are walked like other values and must
 * fill their declared size exactly and appear once (a client reads the
 * value, not the size: bytes hidden after it would be read as other
 * fields); unknown ones are skipped by size, as clients do.
 *
 * The scanner checks what it reads as kr_decode_* does: lengths and
 * counts that cannot fit in the frame, varints longer than 32 bits,
 * negative lengths other than null, null where the version does not
 * allow it, structs nested too deep.  It does not check what it skips
 * (UTF-8, bool values): the bytes it passes are forwarded unchanged, so
 * nothing it skips can be misread downstream by krelay.
 *
 * An observer (kr_scan_watch) may be told a few values of the body as
 * they pass: topic names, TopicIds, ErrorCodes, the length of each
 * records field, Acks and the top-level TransactionalId (the audit log's
 * Fetch and Produce figures, without holding the frame).  Only those
 * values are read; records stay skipped (and skippable: splice(2) still
 * moves them).  Asked to count records (kr_scan_count_records), the
 * scanner also reads each record batch's header inside a watched
 * records field (61 bytes of a RecordBatch, 18 of a MessageSet entry)
 * and skips the rest of the batch, so a Produce request's records are
 * counted while they stream, most of their bytes still skippable.
 *
 * Memory: struct kr_scan is about 3.2 KiB, has no pointers to free and
 * may live anywhere; kr_scan_init resets it (and forgets the observer).
 */
#ifndef KR_SCAN_H
#define KR_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_common.h"

/* Frames on the scanner's stack: a struct or an array each (header too). */
#define KR_SCAN_MAX_FRAMES 64

/*
 * Bytes of a watched string (a topic name, a TransactionalId) kept for
 * the observer: the audit line's longest string (kr_audit.c).
 */
#define KR_SCAN_CAP_MAX 1024

/* Bytes of a RecordBatch header up to its recordsCount (baseOffset ..
   recordsCount, as kr_records_count reads them). */
#define KR_SCAN_BATCH_HDR 61

/* What an observer is told (kr_scan_watch_fn's what). */
enum kr_scan_what {
    KR_SCAN_TOPIC = 1,          /* a topic name (a string field whose
                                   schema entityType is topicName): p, n
                                   its first bytes (at most
                                   KR_SCAN_CAP_MAX), val its length; p
                                   NULL and val -1 when null */
    KR_SCAN_TOPIC_ID,           /* a uuid field TopicId: p its 16 bytes
                                   (n and val 16) */
    KR_SCAN_RECORDS,            /* a records field: val its length in
                                   bytes, -1 when null (the records
                                   themselves are not read) */
    KR_SCAN_ERROR_CODE,         /* an int16 ErrorCode field (any struct):
                                   val */
    KR_SCAN_ACKS,               /* an int16 Acks field (Produce): val */
    KR_SCAN_TRANSACTIONAL_ID,   /* the body's top-level TransactionalId
                                   string: p, n its first bytes (at most
                                   KR_SCAN_CAP_MAX), val its length; p
                                   NULL and val -1 when null */
    KR_SCAN_RECORD_COUNT        /* the end of a records field of length
                                   > 0, with kr_scan_count_records: val
                                   the records its batches hold (the sum
                                   of RecordBatch recordsCount, one per
                                   uncompressed MessageSet entry), -1
                                   when they cannot be counted (what
                                   kr_records_count refuses: malformed
                                   batches, compressed magic 0/1) */
};

/*
 * Called for each watched value as the scanner passes it, in wire order;
 * p is valid for the call only.  Only untagged fields of the body's
 * structs are watched (not the header, not tagged fields, not the
 * elements of arrays of strings, nothing inside a tagged value).  A
 * records field is told twice with kr_scan_count_records: its length as
 * it starts (KR_SCAN_RECORDS), its count as it ends.
 */
typedef void (*kr_scan_watch_fn)(void *arg, enum kr_scan_what what,
                                 const uint8_t *p, size_t n, int64_t val);

/* One level of the walk (internal; see kr_scan.c). */
struct kr_scan_frame {
    uint64_t end;               /* known tagged value: where it must end */
    uint32_t remain;            /* array: elements left; tags: tags left;
                                   tagged value: its tag */
    uint32_t seen;              /* tags: known tags < 32 seen so far */
    uint16_t sid;               /* struct id (struct frames, struct elems) */
    uint16_t i;                 /* struct: next field index */
    uint8_t kind;               /* struct fields / struct tags / array */
    uint8_t flex;               /* flexible encoding for this level */
    uint8_t et;                 /* array: element type (enum kr_type) */
    uint8_t root;               /* the message body's root struct */
    uint8_t hdr;                /* the request or response header */
    uint8_t quiet;              /* inside a tagged value: not watched */
    int16_t v;                  /* version this level is read at */
};

/*
 * Scanner state.  Read .off (bytes of the payload consumed so far) and
 * .msg after kr_scan_feed returns; everything else is internal.
 */
struct kr_scan {
    uint64_t off;               /* payload bytes consumed */
    uint64_t limit;             /* payload length (the frame's size) */
    uint64_t skip;              /* bytes still to skip */
    int status;                 /* KR_AGAIN while running; then sticky */
    /* a value being read */
    uint8_t rkind;              /* what is read (0: nothing) */
    uint8_t rwhy;               /* what it is for */
    uint8_t rgot;               /* bytes of it seen */
    uint8_t rdone;              /* the value is complete */
    uint8_t r_et, r_flex, r_nullable; /* context of the pending value */
    uint16_t r_sid;
    uint32_t rval;
    uint32_t rtag;              /* the tag whose size is being read */
    uint64_t rstart;            /* payload offset where the value began */
    int nframes;
    /* the observer (kr_scan_watch); NULL: none */
    kr_scan_watch_fn watch;
    void *watch_arg;
    uint8_t wnext;              /* the value being started is watched:
                                   its enum kr_scan_what, 0: not */
    uint8_t r_watch;            /* same, for the pending length read */
    uint8_t cap_on;             /* the skip in progress is captured:
                                   its enum kr_scan_what */
    uint16_t cap_len;           /* bytes kept in cap */
    int64_t cap_full;           /* the captured value's length */
    /* counting records (kr_scan_count_records): the batch walk */
    uint8_t count_records;      /* asked for */
    uint8_t bw_on;              /* inside a watched records value */
    uint8_t bw_bad;             /* cannot be counted: skipped to its end */
    uint8_t bw_got;             /* header bytes of this batch in bw_h */
    uint8_t bw_need;            /* header bytes wanted (18, then 61) */
    uint64_t bw_end;            /* payload offset where the value ends */
    uint64_t bw_start;          /* payload offset of this batch */
    uint64_t bw_n;              /* records counted so far */
    uint8_t body_tags;          /* walk the body's tagged fields too
                                   (kr_scan_body_tags) */
    /* The arrays last: kr_scan_init clears the members above only (every
       frame is cleared as it is pushed, the others are written before
       they are read: cap up to cap_len, bw_h up to bw_got, msg). */
    char msg[128];              /* why it failed (KR_EPROTO); "" else */
    struct kr_scan_frame st[KR_SCAN_MAX_FRAMES];
    uint8_t cap[KR_SCAN_CAP_MAX];
    uint8_t bw_h[KR_SCAN_BATCH_HDR];
};

/*
 * Start scanning one payload (the frame's bytes after its int32 size
 * prefix) of payload_len bytes: the request or response header of
 * api_key/api_version, then the body.  Returns KR_OK, or
 * KR_EUNSUPPORTED when the tables do not know the API/version (then the
 * frame cannot be scanned: hold it or pass it as it is).
 */
int kr_scan_init(struct kr_scan *sc, int16_t api_key, int16_t api_version,
                 bool response, uint64_t payload_len) KR_MUST_CHECK;

/*
 * Feed the next n bytes of the payload (p may be NULL when n is 0).
 * *used gets how many of them the scanner consumed.  Returns:
 *   KR_AGAIN  every byte was consumed; feed more;
 *   KR_OK     the scanner reached the start of the body's top-level
 *             tagged fields (flexible versions, unless kr_scan_body_tags),
 *             or the end of the body (classic versions): .off is that
 *             payload offset and *used stops there; the rest of the frame
 *             is the tail;
 *   KR_EPROTO the bytes are not a valid message (.msg says why and at
 *             which offset); nothing after .off was consumed.
 * After KR_OK or KR_EPROTO further calls return the same and consume
 * nothing.  Never reads past p[n - 1].
 */
int kr_scan_feed(struct kr_scan *sc, const uint8_t *p, size_t n,
                 size_t *used) KR_MUST_CHECK;

/*
 * Tell fn(arg, ...) the watched values of the body from now on (call
 * after kr_scan_init, before the first feed).  fn NULL stops it.
 */
void kr_scan_watch(struct kr_scan *sc, kr_scan_watch_fn fn, void *arg);

/*
 * With on, also count the records of each watched records field
 * (KR_SCAN_RECORD_COUNT; call after kr_scan_watch, before the first
 * feed).  Each batch's header is then fed (never skippable); the rest of
 * the batch is skipped by its length and stays skippable.  Records the
 * scanner cannot count never fail the frame: they are skipped to the end
 * of the field, counted as -1.
 */
void kr_scan_count_records(struct kr_scan *sc, bool on);

/*
 * The records counted so far in the records field the walk is in
 * (kr_scan_count_records), for a walk that will not go on (its
 * connection closed): the RecordsCount of the batches whose headers it
 * read (one per MessageSet entry), -1 when they cannot be counted; -2
 * when it is in no counted records field (KR_SCAN_RECORD_COUNT said each
 * one it left).
 */
int64_t kr_scan_records_so_far(const struct kr_scan *sc);

/*
 * With on, also walk the body's top-level tagged fields (flexible
 * versions; call before the first feed) and check them as the decoder
 * does (their count and sizes within the frame, a known tag's value
 * exactly its size, no known tag twice): kr_scan_feed's KR_OK then comes
 * at the end of the body for every version, and a frame whose body tags
 * do not decode is KR_EPROTO, as the held path's decode says.  Bytes
 * after the body (the decoder does not look at them either) stay the
 * caller's.  A streamed request's scanner (its audit line must be the
 * held one's); a response's tail is the caller's (kr_rewrite).
 */
void kr_scan_body_tags(struct kr_scan *sc, bool on);

/*
 * Bytes the scanner will pass next without looking at them: the rest of
 * a value it skips by length (record data, strings, fixed-width fields,
 * unknown tagged fields).  0 when it must read the next byte (a length,
 * count, marker or tag header, a watched value), or when it stopped
 * (KR_OK, KR_EPROTO).
 * A caller may move that many bytes past krelay's memory (splice(2):
 * the Fetch response's record data) and account for them with
 * kr_scan_skip.
 */
uint64_t kr_scan_skippable(const struct kr_scan *sc);

/*
 * Account for n payload bytes the caller forwarded without feeding them:
 * n <= kr_scan_skippable(sc).  Returns what kr_scan_feed would (KR_AGAIN,
 * or KR_OK / KR_EPROTO when the step after the skip ends the walk
 * without needing a byte), or KR_ELIMIT when n is more than may be
 * skipped (nothing changes).
 */
int kr_scan_skip(struct kr_scan *sc, uint64_t n) KR_MUST_CHECK;

#endif /* KR_SCAN_H */
