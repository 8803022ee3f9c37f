/*
 * kr_kerr.h - names of Kafka's protocol error codes (ErrorCode fields).
 *
 * Source: org.apache.kafka.common.protocol.Errors (Errors.java), codes -1
 * (UNKNOWN_SERVER_ERROR) and 0 (NONE) through KR_KERR_MAX, as of Apache
 * Kafka 4.1.  The names are Kafka's own, so they match broker logs and
 * https://kafka.apache.org/protocol#protocol_error_codes.  These codes are
 * not enum kr_status values (kr_common.h): they are data on the wire.
 *
 * No allocation; every function is thread-safe.
 */
#ifndef KR_KERR_H
#define KR_KERR_H

#include <stddef.h>
#include <stdint.h>

/* Highest code in the table (SHARE_SESSION_LIMIT_REACHED, Kafka 4.1). */
#define KR_KERR_MAX 133

/* Returned by kr_kerr_by_name for an unknown name: outside int16. */
#define KR_KERR_NOT_FOUND (-32769)

/* Room for any kr_kerr_format result, "UNKNOWN_ERROR_-32768" included. */
#define KR_KERR_BUFLEN 48

/*
 * Kafka's name for code ("NONE", "NOT_LEADER_OR_FOLLOWER"...): a static
 * string.  Policy: NULL for a code Errors.java does not define (newer
 * broker, or garbage); callers that print use kr_kerr_format instead.
 */
const char *kr_kerr_name(int16_t code);

/*
 * Printable name: kr_kerr_name(code), or "UNKNOWN_ERROR_<code>" written
 * into buf (KR_KERR_BUFLEN bytes) for an unknown code.  Returns either the
 * static name or buf; never NULL.
 */
const char *kr_kerr_format(int16_t code, char *buf, size_t len);

/*
 * Code for a name, case-insensitive ("unknown_topic_or_partition" -> 3).
 * Also accepts "UNKNOWN_ERROR_<n>" with n in int16 range (the inverse of
 * kr_kerr_format).  Returns KR_KERR_NOT_FOUND for anything else or NULL.
 */
int kr_kerr_by_name(const char *name);

#endif /* KR_KERR_H */
