/*
 * kr_common.h - status codes and small helpers shared by every module.
 */
#ifndef KR_COMMON_H
#define KR_COMMON_H

#include <stddef.h>
#include <stdint.h>

/*
 * Status codes.  0 is success; every failure is negative.  Kafka's own
 * error codes (ErrorCode fields) are a different space: see kr_kerr.h.
 */
enum kr_status {
    KR_OK = 0,
    KR_AGAIN = -1,        /* need more bytes (framing) */
    KR_ERROR = -2,        /* generic failure, already logged */
    KR_ENOMEM = -3,       /* allocation failed */
    KR_EPROTO = -4,       /* malformed peer data */
    KR_EUNSUPPORTED = -5, /* unknown ApiKey or version */
    KR_ELIMIT = -6        /* a configured limit was exceeded */
};

/*
 * Human-readable name of a kr_status ("ok", "out of memory"...): a static
 * string, never NULL (unknown values get a generic name).
 */
const char *kr_status_str(int status);

/* Number of elements of array a (a true array, not a pointer). */
#define KR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* The result (a kr_status) must be checked by the caller. */
#define KR_MUST_CHECK __attribute__((warn_unused_result))
/* printf-style checking: argument f is the format, a the first vararg. */
#define KR_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* Silences unused warnings for a parameter or variable. */
#define KR_UNUSED __attribute__((unused))

#endif /* KR_COMMON_H */
