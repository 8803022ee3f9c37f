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
 * Memory: struct kr_scan is about 2 KiB, has no pointers to free and
 * may live anywhere; kr_scan_init resets it.
 */
#ifndef KR_SCAN_H
#define KR_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_common.h"

/* Frames on the scanner's stack: a struct or an array each (header too). */
#define KR_SCAN_MAX_FRAMES 64

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
    struct kr_scan_frame st[KR_SCAN_MAX_FRAMES];
    char msg[128];              /* why it failed (KR_EPROTO) */
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
 *             tagged fields (flexible versions), or the end of the body
 *             (classic versions): .off is that payload offset and *used
 *             stops there; the rest of the frame is the tail;
 *   KR_EPROTO the bytes are not a valid message (.msg says why and at
 *             which offset); nothing after .off was consumed.
 * After KR_OK or KR_EPROTO further calls return the same and consume
 * nothing.  Never reads past p[n - 1].
 */
int kr_scan_feed(struct kr_scan *sc, const uint8_t *p, size_t n,
                 size_t *used) KR_MUST_CHECK;

/*
 * Bytes the scanner will pass next without looking at them: the rest of
 * a value it skips by length (record data, strings, fixed-width fields,
 * unknown tagged fields).  0 when it must read the next byte (a length,
 * count, marker or tag header), or when it stopped (KR_OK, KR_EPROTO).
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
