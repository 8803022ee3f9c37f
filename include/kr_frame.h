/*
 * kr_frame.h - Kafka framing: the int32 size prefix, the request header,
 * and the few leading body fields the proxy needs (Acks, TimeoutMs,
 * MaxWaitMs, RebalanceTimeoutMs, ErrorCode), read through the schema
 * tables.  Knows lengths and headers, never a whole body.
 *
 * Everything here works on a flat byte view of a frame's first bytes
 * (the caller copies them out of its evbuffer with evbuffer_copyout into
 * a stack buffer): no allocation, no reads outside [p, p + n), every
 * length checked against the bytes left with overflow-safe arithmetic.
 *
 * Wire facts (Kafka's RequestHeader.json / ResponseHeader.json and its
 * generator): a frame is an int32 size (bytes after itself) then the
 * payload.  Request header v0 = ApiKey int16, ApiVersion int16,
 * CorrelationId int32; v1 adds ClientId (nullable int16-length string,
 * never compact); v2 adds a tagged-fields section.  Response header v0 =
 * CorrelationId; v1 adds a tagged-fields section.
 */
#ifndef KR_FRAME_H
#define KR_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_common.h"
#include "kr_field_ids.h"

/* Bytes of the size prefix. */
#define KR_FRAME_PREFIX 4
/* Smallest request payload: ApiKey + ApiVersion + CorrelationId. */
#define KR_FRAME_REQ_MIN 8
/* Smallest response payload: CorrelationId. */
#define KR_FRAME_RSP_MIN 4
/*
 * Most bytes of a frame's start the peek functions will ask for (*need):
 * a header with a 32767-byte ClientId and a 32767-byte leading string
 * still fits.  Beyond that the peek gives up with KR_ELIMIT.
 */
#define KR_FRAME_PEEK_MAX 70000
/* Printable ClientId bytes kept for log lines. */
#define KR_FRAME_CLIENT_ID_MAX 48

/*
 * Name a well-known non-Kafka protocol from a stream's first bytes:
 * "TLS handshake", "HTTP request", "HTTP/2 preface", "PROXY protocol
 * header", or NULL when p[0..n) could start a Kafka frame (or n is too
 * short to tell).  Used on a connection's first bytes and to explain a
 * bad size prefix.
 */
const char *kr_frame_sniff(const uint8_t *p, size_t n);

/*
 * Read the size prefix from p[0..n).  Returns KR_AGAIN when n < 4;
 * KR_EPROTO when the size is negative or below min; KR_ELIMIT when it is
 * above max (bytes, payload only); KR_OK otherwise.  *size is set in
 * every case but KR_AGAIN.
 */
int kr_frame_size(const uint8_t *p, size_t n, int64_t min, int64_t max,
                  int32_t *size);

/* What kr_frame_peek_request found. */
struct kr_req_hdr {
    int16_t api_key;            /* RequestApiKey */
    int16_t api_version;        /* RequestApiVersion */
    int32_t correlation_id;     /* CorrelationId */
    int8_t hdr_version;         /* 0..2; -1 when the tables do not know
                                   (ApiKey, ApiVersion): parsed as v1 */
    bool known;                 /* (ApiKey, ApiVersion) is in the tables */
    bool client_id_null;        /* ClientId was null (or header v0) */
    uint16_t client_id_len;     /* ClientId bytes on the wire */
    size_t hdr_len;             /* payload bytes of the header (the body
                                   starts there) */
    char client_id[KR_FRAME_CLIENT_ID_MAX + 1]; /* printable copy,
                                   truncated, NUL-terminated */
};

/*
 * Peek the request header at the start of a payload.  p[0..n) are the
 * first n bytes of a payload of frame_len bytes (n <= frame_len).
 * Returns KR_OK and fills *h; KR_AGAIN with *need = the payload bytes
 * wanted when n is too short but the frame is longer; KR_EPROTO when the
 * frame is too short for its header or the header is malformed; KR_ELIMIT
 * when the header is longer than KR_FRAME_PEEK_MAX.
 */
int kr_frame_peek_request(const uint8_t *p, size_t n, size_t frame_len,
                          struct kr_req_hdr *h, size_t *need) KR_MUST_CHECK;

/*
 * Payload bytes of the response header for (api_key, api_version) at the
 * start of p[0..n) (4, or 4 + the tagged-fields section for flexible
 * versions; ApiVersions always 4).  Same returns as
 * kr_frame_peek_request; an unknown (ApiKey, ApiVersion) is taken as v0.
 */
int kr_frame_response_hdr_len(const uint8_t *p, size_t n, size_t frame_len,
                              int16_t api_key, int16_t api_version,
                              size_t *hdr_len, size_t *need) KR_MUST_CHECK;

/*
 * Byte offset, from the start of the body, of the top-level ErrorCode of
 * a (api_key, api_version) response when it sits at a fixed offset: 0
 * when ErrorCode is the body's first field (ApiVersions, SyncGroup v0,
 * Heartbeat v0...), 4 when it follows ThrottleTimeMs (FindCoordinator
 * v1-3, Heartbeat v1+, Fetch v7+, InitProducerId...).  Derived from the
 * generated schema tables (kr_schema.h, from the message JSON of
 * ../shared/kafka-message-schemas/4.3.1 and 3.9.1), not a hand-kept
 * list: fields absent or tagged at api_version are skipped as the codec
 * skips them.  -1 for any other layout (Produce, Metadata, FindCoordinator
 * v4+...) and for an unknown (ApiKey, ApiVersion).  A few loads, no
 * allocation; thread-safe.
 */
int kr_frame_rsp_error_off(int16_t api_key, int16_t api_version);

/*
 * Read the top-level ErrorCode of a response whose payload starts at
 * p[0..n) (n <= frame_len, the payload's length), where
 * kr_frame_rsp_error_off says it sits.  Returns KR_OK with *code;
 * KR_EUNSUPPORTED when the response has no ErrorCode at a fixed offset;
 * KR_AGAIN with *need (payload bytes wanted); KR_EPROTO when the frame is
 * too short or its header malformed; KR_ELIMIT (kr_frame_peek_request).
 */
int kr_frame_peek_rsp_error(const uint8_t *p, size_t n, size_t frame_len,
                            int16_t api_key, int16_t api_version,
                            int16_t *code, size_t *need) KR_MUST_CHECK;

/* One int field wanted by kr_frame_peek_fields. */
struct kr_frame_field {
    enum kr_field_id id;        /* e.g. KR_FIELD_ACKS */
    int64_t val;                /* out: the value, when found */
    bool found;                 /* out */
};

/*
 * Read integer fields that lead a request or response body, driven by
 * the schema tables (no per-API code): walk the root struct of
 * (api_key, api_version) field by field from body_off, skipping
 * integers, bools, uuids, strings and bytes, until every wanted field is
 * found or a field that cannot be skipped cheaply (array, struct,
 * records) is reached.  Tagged fields are never looked at.
 *
 * Returns KR_OK (check each .found), KR_EUNSUPPORTED for an unknown
 * (ApiKey, ApiVersion), KR_AGAIN with *need, KR_EPROTO for a truncated
 * or malformed prefix, KR_ELIMIT when *need would pass
 * KR_FRAME_PEEK_MAX.
 */
int kr_frame_peek_fields(const uint8_t *p, size_t n, size_t frame_len,
                         bool response, int16_t api_key,
                         int16_t api_version, size_t body_off,
                         struct kr_frame_field *f, int nf,
                         size_t *need) KR_MUST_CHECK;

/* Big-endian readers for p with at least 2 / 4 bytes. */
static inline int16_t
kr_frame_i16(const uint8_t *p)
{
    return (int16_t)(uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline int32_t
kr_frame_i32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                     (uint32_t)p[2] << 8 | p[3]);
}

/*
 * Write a frame's 4-byte size prefix (big-endian int32: the bytes after
 * it) into p.  The one writer of it; len is at most INT32_MAX (callers
 * check max_frame_bytes or the encoder's own limit first).
 */
static inline void
kr_frame_put_size(uint8_t p[4], uint64_t len)
{
    p[0] = (uint8_t)(len >> 24);
    p[1] = (uint8_t)(len >> 16);
    p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
}

#endif /* KR_FRAME_H */
