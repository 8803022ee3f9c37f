/*
 * kr_json.h - the codec's JSON form: decoded trees (kr_codec.h) to jansson
 * values and back.  Used by krelay-codec and by the audit log.
 *
 * Shape of a message:
 *   request:  {"header": {...}, "body": {...}}
 *   response: {"apiKey": K, "apiVersion": V, "header": {...}, "body": {...}}
 * The header is a RequestHeader (RequestApiKey, RequestApiVersion,
 * CorrelationId, ClientId) or ResponseHeader (CorrelationId) object, the
 * body the API's body; both use the field names of Kafka's JSON schemas
 * (e.g. "ThrottleTimeMs", "Topics").  A response needs apiKey/apiVersion
 * because its header does not carry them.
 *
 * Values, by schema type:
 *   bool                      true / false
 *   int8..int64, uint16/32    JSON integers (exact over the whole int64
 *                             range: jansson's json_int_t is long long)
 *   float64                   a number, or the strings "NaN", "Infinity",
 *                             "-Infinity"
 *   string                    a JSON string (see below for invalid UTF-8)
 *   bytes, records            standard base64 (RFC 4648 section 4) with
 *                             padding, no line breaks
 *   uuid                      Kafka's Uuid.toString(): base64url without
 *                             padding, 22 characters (kr_uuid_format)
 *   struct                    an object
 *   array                     an array
 *   null (nullable types)     null
 * A field that does not exist at the node's version is left out.  A
 * tagged field appears only when it was on the wire (.present).  Unknown
 * tagged fields of a struct (the header too) appear as
 *   "_unknownTaggedFields": [{"tag": N, "data": "<base64>"}, ...]
 * in ascending tag order.  Objects keep the schema's field order.
 *
 * Tree -> JSON borrows nothing: the json_t owns copies of every value.
 * A string that is not valid UTF-8 (possible only when decoding without
 * KR_DEC_STRICT, or with KR_DEC_NO_UTF8) is written with each bad byte
 * replaced by U+FFFD; that JSON does not give back the same bytes.
 *
 * JSON -> tree starts from kr_node_new (every field at its default) and
 * sets the fields the object gives: a field missing from the JSON keeps
 * its default, a tagged field given in the JSON is present (written).
 * Unknown keys, fields the version lacks, wrong JSON types, out-of-range
 * integers, null where the version does not allow null, bad base64 and
 * bad uuids are errors (KR_EPROTO) whose kr_codec_err.path names the field
 * like the codec does ("Topics[0].Partitions[2].Partition",
 * "header.ClientId"; top-level keys by their own name, e.g. "apiKey") and
 * whose offset is 0.
 *
 * Records from JSON.  An encoded tree refers to records as (off, len)
 * slices of a source payload (kr_wbuf_rec.src_off), not as pointers.  A
 * tree built from JSON has no payload, so kr_json_to_msg decodes every
 * records value into a side buffer, struct kr_json_recbuf, appending them
 * back to back; each records value's rec.off/rec.len is its slice of that
 * buffer.  The recbuf then plays the role of the payload:
 *     kr_encode_msg(&m, &w, &err);
 *     out = kr_wbuf_flatten(&w, rb.p, rb.len);
 * Several messages may share one recbuf (offsets only grow); reset it with
 * kr_json_recbuf_reset between messages to keep it small.
 */
#ifndef KR_JSON_H
#define KR_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kr_codec.h"

/* ---- side buffer of records bytes ------------------------------------- */

/*
 * Growable malloc'd buffer.  A zeroed struct is a valid empty buffer.
 * p may move when it grows (slices are offsets, so they stay valid).
 */
struct kr_json_recbuf {
    uint8_t *p;
    size_t len, cap;            /* bytes */
};

void kr_json_recbuf_reset(struct kr_json_recbuf *rb);  /* empty, keep memory */
void kr_json_recbuf_free(struct kr_json_recbuf *rb);   /* free, leave zeroed */

/* ---- tree -> JSON ------------------------------------------------------- */

/* kr_json_from_* flags */
#define KR_JSON_RECORDS_SIZE 0x01u /* records as their byte count (an
                                    * integer) instead of base64: for logs;
                                    * such JSON cannot be encoded back */
#define KR_JSON_REDACT       0x02u /* secrets (kr_json_secret) written as
                                    * KR_JSON_REDACTED, and the data of
                                    * unknown tagged fields too (krelay
                                    * cannot know what they hold): for
                                    * logs; cannot be encoded back */

/* What a redacted value is written as (a JSON string, whatever the type). */
#define KR_JSON_REDACTED "[redacted]"

/*
 * JSON object for node n (a struct of kr_structs[n->struct_id] at
 * n->version) and everything below it.  payload: the bytes the tree was
 * decoded from, used only to copy records values (their (off, len) slices
 * are read from it); may be NULL when n holds no records or with
 * KR_JSON_RECORDS_SIZE.  Returns a new reference the caller json_decref's,
 * or NULL with err set: KR_ENOMEM, or KR_EPROTO for a records slice
 * outside payload (or no payload given).
 */
json_t *kr_json_from_node(const struct kr_node *n,
                          const struct kr_rbuf *payload, unsigned flags,
                          struct kr_codec_err *err);

/*
 * JSON object for a whole decoded message (shape above: responses carry
 * apiKey/apiVersion from m).  m->trailing bytes are not represented.
 * Same payload, result and errors as kr_json_from_node.
 */
json_t *kr_json_from_msg(const struct kr_msg *m,
                         const struct kr_rbuf *payload, unsigned flags,
                         struct kr_codec_err *err);

/* ---- redaction ----------------------------------------------------------- */

/*
 * Redaction hook: called for each field of each struct node about to be
 * written whose value is not null; returning true writes the string
 * KR_JSON_REDACTED instead of the value (and nothing below it), so the
 * raw value never reaches any JSON string.  n is the node, field the
 * index of the field in it (kr_node_field(n, field) describes it), parent
 * the struct node whose field holds n (directly or as an array element),
 * NULL at a message's header or body root.  Must not fail or allocate.
 */
typedef bool (*kr_json_redact_fn)(void *arg, const struct kr_node *parent,
                                  const struct kr_node *n, unsigned field);

/*
 * krelay's secrets policy (the hook behind KR_JSON_REDACT; arg unused).
 * True for:
 *   - AuthBytes (SaslAuthenticate request and response);
 *   - Hmac (CreateDelegationToken and DescribeDelegationToken responses,
 *     RenewDelegationToken and ExpireDelegationToken requests);
 *   - Salt and SaltedPassword (AlterUserScramCredentials request);
 *   - RequestData and ResponseData (Envelope: a whole forwarded request
 *     or response, which may itself carry any of these);
 *   - a string "Value" in a struct whose bool "IsSensitive" is true
 *     (DescribeConfigs, CreateTopics v5+ responses), or whose parent's
 *     "IsSensitive" is true (DescribeConfigs synonyms), or whose sibling
 *     string "Name" is a password config (kr_json_config_sensitive):
 *     AlterConfigs, IncrementalAlterConfigs and CreateTopics requests,
 *     DescribeConfigs responses.
 * Field names are matched whatever the API, so a schema that adds them
 * elsewhere is covered too.  Source: Kafka's message schemas.
 */
bool kr_json_secret(void *arg, const struct kr_node *parent,
                    const struct kr_node *n, unsigned field);

/*
 * True when config name (len bytes, case-insensitive) holds a secret:
 * Kafka's ConfigDef PASSWORD-type configs and their listener-prefixed
 * forms ("listener.name.<l>.<mechanism>.sasl.jaas.config").  Matches
 * names that contain "password", "secret", "passphrase" or
 * "credentials", or end with "sasl.jaas.config", ".key"
 * (ssl.keystore.key, delegation.token.master.key,
 * delegation.token.secret.key), "ssl.keystore.certificate.chain" or
 * "ssl.truststore.certificates" (PASSWORD types in Kafka's SslConfigs).
 * Deliberately broad: a false positive only hides a value in a log.
 */
bool kr_json_config_sensitive(const char *name, size_t len);

/*
 * kr_json_from_msg / kr_json_from_node with a redaction hook fn (NULL for
 * none) called with arg; KR_JSON_REDACT in flags applies kr_json_secret
 * as well.
 */
json_t *kr_json_from_msg_redact(const struct kr_msg *m,
                                const struct kr_rbuf *payload,
                                unsigned flags, kr_json_redact_fn fn,
                                void *arg, struct kr_codec_err *err);
json_t *kr_json_from_node_redact(const struct kr_node *n,
                                 const struct kr_rbuf *payload,
                                 unsigned flags, kr_json_redact_fn fn,
                                 void *arg, struct kr_codec_err *err);

/* ---- JSON -> tree ------------------------------------------------------- */

/*
 * Build a message from its JSON form: a response when the object has
 * "apiKey" (then "apiVersion" is required too), else a request, whose
 * "header" must give RequestApiKey and RequestApiVersion.  "header" and
 * "body" may be left out or partial: missing fields keep their defaults
 * (a missing CorrelationId is 0).  Fills *m (dir, api_key, api_version,
 * hdr_version from kr_request/response_header_version, correlation_id,
 * header, body; body_off/trailing 0), ready for kr_encode_msg.
 *
 * Nodes, strings, bytes and uuids are copied into arena; records bytes
 * are appended to recs (see "Records from JSON").  j is not kept.
 * Returns KR_OK; KR_EUNSUPPORTED for an ApiKey/version the tables do not
 * know; KR_EPROTO for a JSON that does not fit the schema (err names the
 * field); KR_ENOMEM.  On failure *m, the arena and recs may hold partial
 * data (reset them).
 */
int kr_json_to_msg(struct kr_arena *arena, const json_t *j,
                   struct kr_json_recbuf *recs, struct kr_msg *m,
                   struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Build one struct node of struct sid at version v from object j (as for
 * kr_decode_struct: flexible is the message's flexible flag at v, which
 * decides whether "_unknownTaggedFields" is allowed).  path_prefix is put
 * before field names in error paths ("" for none, "header" gives
 * "header.ClientId").  Arena, recs, results and errors as kr_json_to_msg.
 */
int kr_json_to_node(struct kr_arena *arena, const json_t *j, uint16_t sid,
                    int16_t v, bool flexible, const char *path_prefix,
                    struct kr_json_recbuf *recs, struct kr_node **out,
                    struct kr_codec_err *err) KR_MUST_CHECK;

/* ---- base64 ------------------------------------------------------------- */

/*
 * Standard base64 with padding of p[0..len) into out, which must hold
 * kr_base64_len(len) bytes (the text plus a NUL).  Returns the text length.
 */
size_t kr_base64_len(size_t len);
size_t kr_base64_encode(const uint8_t *p, size_t len, char *out);

/*
 * Decode standard base64 s[0..slen) into out (room for slen / 4 * 3
 * bytes).  Strict: length a multiple of 4, '=' only as final padding,
 * no whitespace, unused bits zero (so each byte string has exactly one
 * accepted text).  Returns the decoded length, or -1 when s is not such
 * base64.
 */
long kr_base64_decode(const char *s, size_t slen, uint8_t *out);

#endif /* KR_JSON_H */
