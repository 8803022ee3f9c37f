/*
 * fuzz.h - shared pieces of krelay's fuzz targets (tests/fuzz/).
 *
 * Every target defines LLVMFuzzerTestOneInput, libFuzzer's entry point.
 * Built with clang -fsanitize=fuzzer (./configure --enable-fuzzing) a
 * target is a fuzzer; linked with replay.c it is a plain program that
 * runs the committed corpus in `make check`.
 *
 * A target calls abort() (through KR_FUZZ_ASSERT) when an invariant that
 * the module's header promises does not hold, e.g. a decoded frame that
 * does not re-encode to the same bytes twice: libFuzzer saves the input.
 */
#ifndef KR_FUZZ_H
#define KR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "kr_codec.h"

/* libFuzzer's entry point: 0 always (non-zero is reserved). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Print "file:line: invariant broken: what" to stderr and abort(). */
#define KR_FUZZ_ASSERT(cond, ...)                                       \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "%s:%d: invariant broken: ", __FILE__,      \
                    __LINE__);                                          \
            fprintf(stderr, __VA_ARGS__);                               \
            fputc('\n', stderr);                                        \
            abort();                                                    \
        }                                                               \
    } while (0)

/*
 * A payload copied into up to KR_RBUF_MAX_SEG separately malloc'd
 * segments of exactly their size, so that AddressSanitizer catches a read
 * past any segment's end (a read that would land in the next segment
 * when they share one buffer).
 */
struct kr_fuzz_segs {
    struct iovec iov[KR_RBUF_MAX_SEG];
    int n;
    struct kr_rbuf rb;
};

/*
 * Split p[0..len) at points drawn from seed: seed 0 gives one segment,
 * otherwise 1 + seed % KR_RBUF_MAX_SEG segments at random points (some
 * empty).  Aborts on ENOMEM.  Free with kr_fuzz_segs_free.
 */
void kr_fuzz_segs_split(struct kr_fuzz_segs *s, const uint8_t *p,
                        size_t len, uint32_t seed);
void kr_fuzz_segs_free(struct kr_fuzz_segs *s);

/*
 * The codec round trip on one payload (shared by the request, response
 * and JSON targets): decode p (split by seed) with flags; on success the
 * tree must encode, the encoding must decode (flat, same flags) and
 * re-encode to identical bytes.  For strict UTF-8-checked decodes the
 * JSON form must also round-trip to the same bytes (NaN payload bits
 * excepted).  With KR_FUZZ_CANONICAL in flags p is known to be canonical
 * (an encoder's output): it must decode, and encode back to itself.
 * key/ver are used only for responses.  Returns the decode status.
 * With KR_FUZZ_TRACE in the environment, prints each decode's result.
 */
#define KR_FUZZ_CANONICAL 0x100u
int kr_fuzz_codec(enum kr_dir dir, int16_t key, int16_t ver,
                   unsigned flags, uint32_t seed, const uint8_t *p,
                   size_t len);

/*
 * Encode m and flatten it with records taken from src[0..src_len).
 * Returns the malloc'd bytes (*len set) or NULL with the encode status
 * in *rc and err filled.
 */
uint8_t *kr_fuzz_encode(const struct kr_msg *m, const uint8_t *src,
                        size_t src_len, size_t *len, int *rc,
                        struct kr_codec_err *err);

/* Print len bytes of p as hex to stderr (for invariant reports). */
void kr_fuzz_hexdump(const char *what, const uint8_t *p, size_t len);

#endif /* KR_FUZZ_H */
