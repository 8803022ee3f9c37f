/*
 * kr_codec.h - one generic decoder and one generic encoder for every Kafka
 * API and version, driven by the tables in kr_schema.h.
 *
 * Input is a frame's payload (the bytes after the int32 size prefix: the
 * request or response header, then the body), given as a list of byte
 * segments (struct kr_rbuf), so a frame held in an evbuffer chain is
 * decoded in place without being pulled up.  Decoding builds a tree of
 * struct kr_node / struct kr_val in a per-frame arena:
 *   - integers, bool and float64 are values;
 *   - strings, bytes and uuids are views (struct kr_str) into the input
 *     when they lie in one segment, or copies in the arena when they
 *     straddle two; views die with the frame;
 *   - records are slices (offset, length) of the payload: never read,
 *     never copied;
 *   - tagged fields remember whether they were on the wire; unknown
 *     tagged fields are kept as raw bytes and written back.
 * Encoding walks a tree and writes canonical Kafka bytes into a
 * struct kr_wbuf.  Records are not written: the wbuf lists where each
 * records slice goes, and the caller splices the original bytes in (see
 * kr_wbuf_flatten for contiguous input; the proxy moves evbuffer chains).
 *
 * Decode of a frame as Kafka writes it, then encode, gives the same
 * bytes.  Input that Kafka accepts but would not write (non-minimal
 * varints, tags out of order) re-encodes canonically.
 */
#ifndef KR_CODEC_H
#define KR_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kr_arena.h"
#include "kr_common.h"
#include "kr_schema.h"

/* ---- input -------------------------------------------------------------- */

/*
 * Read-only view of a payload as up to KR_RBUF_MAX_SEG segments, e.g.
 * from evbuffer_peek.  The bytes are borrowed: they must stay unchanged
 * while the decoded tree is used.
 */
#define KR_RBUF_MAX_SEG 64
struct kr_rbuf {
    const struct iovec *seg;
    int nseg;
    size_t len;                   /* total bytes over all segments */
};

/* Fill rb with a single contiguous segment (iov must outlive rb). */
void kr_rbuf_init_flat(struct kr_rbuf *rb, struct iovec *iov,
                       const void *p, size_t len);

/* Copy n bytes at offset off of rb into out; false when out of range. */
bool kr_rbuf_read(const struct kr_rbuf *rb, uint64_t off, void *out,
                  size_t n);

/*
 * How many records the record batches of one records slice (offset off,
 * len bytes of rb: a kr_val's .u.rec) hold, from their headers alone,
 * nothing decompressed: RecordsCount (int32 at batch offset 57) of each
 * magic 2 RecordBatch, 1 per message of an uncompressed magic 0/1
 * message set.  Batches are back to back (baseOffset int64, then
 * batchLength int32 counting the bytes after itself); a slice of len <=
 * 0 holds 0.  Returns KR_OK with *records; KR_EUNSUPPORTED when a
 * compressed magic 0/1 wrapper hides its count; KR_EPROTO when a header
 * is cut short, inconsistent or of an unknown magic (a Produce request's
 * records end with a whole batch; a Fetch response's may not).
 */
int kr_records_count(const struct kr_rbuf *rb, uint64_t off, int32_t len,
                     uint64_t *records) KR_MUST_CHECK;

/* ---- tree --------------------------------------------------------------- */

/* A string/bytes/uuid view.  len == -1 means null. */
struct kr_str {
    const uint8_t *p;
    int32_t len;
};

struct kr_node;
struct kr_array;

/*
 * The value of one field.  .present is 0 when the field does not exist at
 * the decoded version, or is a tagged field that was not on the wire (then
 * the value holds the field's default).  .is_null marks a null string,
 * bytes, records, array or struct.
 */
struct kr_val {
    union {
        int64_t i;              /* bool, int8..int64, uint16, uint32 */
        double f;               /* float64 */
        struct kr_str s;        /* string, bytes, uuid (16 bytes) */
        struct {
            uint64_t off;       /* offset of the records bytes in the payload */
            int32_t len;        /* their length */
        } rec;                  /* records (a slice of the input) */
        struct kr_node *node;   /* struct; NULL when null */
        struct kr_array *arr;   /* array; NULL when null */
    } u;
    uint8_t present;
    uint8_t is_null;
    uint8_t rec_ext;            /* records whose bytes are u.s, not a
                                   slice of the input: converted records
                                   (kr_val_set_records_ext: 1; 2 in a
                                   shared block, kr_val_set_records_shared) */
};

/*
 * Make v (a records field) hold len bytes at p instead of a slice of the
 * decoded input: records krelay built itself (legacy translation,
 * kr_records.h).  The bytes are borrowed: they must outlive every encode
 * of the tree.  The encoder copies them into the wbuf's own bytes (they
 * are not a kr_wbuf_rec), so kr_evcodec_emit and kr_wbuf_flatten need
 * nothing else.  len -1 with p NULL: null records.
 */
void kr_val_set_records_ext(struct kr_val *v, const uint8_t *p, int32_t len);

/*
 * The same with p the data of a shared block (kr_xbuf.h: the whole
 * block, len bytes, len > 0), which the encoder does not copy: it lists
 * the bytes as a wbuf slice of their own (struct kr_wbuf_rec.ext), which
 * kr_evcodec_emit hands to libevent with a reference of its own.  The
 * tree's owner holds a reference for as long as the tree may be encoded
 * (kr_arena_defer with kr_xbuf_unref_cb on the tree's arena).
 */
void kr_val_set_records_shared(struct kr_val *v, const uint8_t *p,
                               int32_t len);

/* Array of n values of one element type (structs: .u.node each). */
struct kr_array {
    uint32_t n;
    uint8_t elem_type;          /* enum kr_type */
    uint16_t struct_id;         /* element struct for KR_T_STRUCT */
    struct kr_val *items;       /* n entries, arena-owned */
};

/* An unknown tagged field, kept as raw bytes (its payload, no tag/size). */
struct kr_rawtag {
    uint32_t tag;
    struct kr_str data;
};

/* One decoded struct: a value per field of its kr_struct_desc. */
struct kr_node {
    uint16_t struct_id;         /* index into kr_structs[] */
    int16_t version;            /* the message version it was decoded at */
    struct kr_val *vals;        /* kr_structs[struct_id].nfields entries */
    struct kr_rawtag *unknown;  /* unknown tagged fields, ascending tags */
    uint32_t nunknown;
};

/* Which way a message goes (kr_msg.dir): client request or response. */
enum kr_dir { KR_DIR_REQUEST = 0, KR_DIR_RESPONSE = 1 };

/*
 * A decoded frame.  header is a RequestHeader (hdr_version 0..2) or
 * ResponseHeader (0..1) node; body the API's body at api_version.
 * trailing counts bytes after the end of the body that only tolerant
 * decoding accepts (they start at trailing_off in the payload).
 */
struct kr_msg {
    enum kr_dir dir;
    int16_t api_key;
    int16_t api_version;
    int16_t hdr_version;
    int32_t correlation_id;
    struct kr_node *header;
    struct kr_node *body;
    size_t body_off;            /* payload offset where the body starts */
    size_t trailing_off;
    size_t trailing;            /* bytes */
};

/* ---- errors ------------------------------------------------------------- */

/*
 * Why a decode or encode failed.  path names the field as
 * "Topics[0].Partitions[2].Partition" (header fields as "header.ClientId");
 * offset is the payload byte offset where the bad value starts (add 4 for
 * the offset in a frame with its size prefix).
 */
struct kr_codec_err {
    int status;                 /* enum kr_status */
    size_t offset;
    char msg[128];              /* e.g. "string length 300 past end of frame" */
    char path[256];
};

/*
 * Put pre ("Topics", "[3]") in front of err->path as the error travels up
 * from the field that failed: joined with '.' unless the path is empty or
 * starts with an index; the tail is cut when the path is full.  For code
 * that walks trees (codec, translation) to report where it failed.
 */
void kr_codec_err_prepend(struct kr_codec_err *err, const char *pre);
/* The same for an array index i ("[i]"). */
void kr_codec_err_prepend_index(struct kr_codec_err *err, uint32_t i);

/* ---- decode ------------------------------------------------------------- */

/* kr_decode_* flags */
#define KR_DEC_STRICT   0x01u /* refuse trailing bytes and invalid UTF-8 */
#define KR_DEC_NO_UTF8  0x02u /* (with STRICT) skip the UTF-8 check */
/*
 * Refuse a tagged field that appears twice and bytes left over inside a
 * known tagged field, even without STRICT: what a proxy that rewrites
 * fields needs (with a duplicate, only the last copy would be decoded
 * and rewritten while a client might read the first).
 */
#define KR_DEC_TAGS_EXACT 0x04u

/*
 * Decode a request payload: the header (its version chosen from the
 * ApiKey/ApiVersion found in its first 4 bytes) and the body.
 *
 * Returns KR_OK and fills *m; KR_EUNSUPPORTED for an ApiKey/ApiVersion
 * the tables do not know (m->api_key/api_version/correlation_id are still
 * set when the first 8 bytes were present); KR_EPROTO for malformed input
 * (err says where); KR_ENOMEM when the arena is exhausted.  Everything in
 * *m is owned by arena and borrows from rb's bytes.  Never reads outside
 * rb.  Without KR_DEC_STRICT, bytes after the body are accepted and
 * reported in m->trailing.
 */
int kr_decode_request(struct kr_arena *arena, const struct kr_rbuf *rb,
                      unsigned flags, struct kr_msg *m,
                      struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Decode a response payload to a request of api_key at api_version (the
 * response header has only a CorrelationId: the caller knows the rest).
 * ApiVersions responses use header v0 at every version.  Same results
 * and ownership as kr_decode_request.
 */
int kr_decode_response(struct kr_arena *arena, const struct kr_rbuf *rb,
                       int16_t api_key, int16_t api_version, unsigned flags,
                       struct kr_msg *m,
                       struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Decode one struct sid at version v from rb starting at *off, advancing
 * *off.  flexible: the message's flexible flag at v.  Used for headers and
 * for nested schemas (e.g. ConsumerProtocolSubscription inside bytes).
 */
int kr_decode_struct(struct kr_arena *arena, const struct kr_rbuf *rb,
                     size_t *off, uint16_t sid, int16_t v, bool flexible,
                     unsigned flags, struct kr_node **out,
                     struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Decode only the tagged-field section of struct sid at version v (a
 * flexible version) from rb at *off, advancing *off past it: the bytes
 * that follow a body's last untagged field, which kr_scan (kr_scan.h)
 * leaves as a streamed frame's tail.  *out is a new node whose untagged
 * fields hold their defaults with .present = 0 and whose tagged fields
 * are as kr_decode_struct leaves them (unknown tags kept).  Same results
 * and ownership as kr_decode_struct.
 */
int kr_decode_tags(struct kr_arena *arena, const struct kr_rbuf *rb,
                   size_t *off, uint16_t sid, int16_t v, unsigned flags,
                   struct kr_node **out,
                   struct kr_codec_err *err) KR_MUST_CHECK;

/* ---- encode ------------------------------------------------------------- */

/*
 * Output of an encode: own bytes in buf, plus the records slices that go
 * between them.  recs[i] says: at buf offset .at, insert .len bytes taken
 * from the source payload at .src_off, or, when .ext is not NULL, the
 * .len bytes at .ext: a shared block's data (kr_val_set_records_shared;
 * borrowed from the tree, .src_off 0 and ignored).  recs are in
 * ascending .at order, payload slices in ascending .src_off order.
 * A zeroed struct is a valid empty wbuf; free with kr_wbuf_free.
 */
struct kr_wbuf_rec {
    size_t at;                  /* position in buf before which it goes */
    uint64_t src_off;           /* offset in the decoded payload */
    int32_t len;                /* bytes */
    const uint8_t *ext;         /* NULL, or a shared block's data */
};
struct kr_wbuf {
    uint8_t *buf;
    size_t len, cap;
    struct kr_wbuf_rec *recs;
    size_t nrecs, recs_cap;
    size_t total;               /* len + every rec's len: the encoded size */
    int failed;                 /* sticky: an allocation failed */
};

void kr_wbuf_reset(struct kr_wbuf *w);     /* empty, keep memory */
void kr_wbuf_free(struct kr_wbuf *w);      /* free memory, leave zeroed */

/*
 * Encode m's header and body at m->api_version (a payload, without the
 * size prefix) into w (appended).  Records values are referenced by
 * their (off, len) slices.  m->trailing bytes are not written: a proxy
 * that keeps them appends them itself.  Returns KR_OK, KR_EPROTO when
 * the tree cannot be written at that version (e.g. a null value where the
 * version does not allow null; err says which field), or KR_ENOMEM.
 */
int kr_encode_msg(const struct kr_msg *m, struct kr_wbuf *w,
                  struct kr_codec_err *err) KR_MUST_CHECK;

/* Encode one struct node at version v (see kr_decode_struct). */
int kr_encode_struct(const struct kr_node *n, int16_t v, bool flexible,
                     struct kr_wbuf *w,
                     struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Encode only n's tagged-field section at version v (the reverse of
 * kr_decode_tags: the count, then every present tagged field and every
 * unknown one, ascending by tag) into w (appended).  Untagged fields are
 * not written.  Same results as kr_encode_struct.
 */
int kr_encode_tags(const struct kr_node *n, int16_t v, struct kr_wbuf *w,
                   struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Contiguous result: w's bytes with every records slice copied in from
 * src (the payload w was decoded from, src_len bytes) or from its .ext.  Returns a malloc'd
 * buffer of w->total bytes that the caller frees, or NULL (ENOMEM, or a
 * slice outside src).  For the tool and tests; the proxy never copies
 * records.
 */
uint8_t *kr_wbuf_flatten(const struct kr_wbuf *w, const uint8_t *src,
                         size_t src_len);

/* ---- building and editing trees ---------------------------------------- */

/*
 * A new node of struct sid at version v with every field set to its
 * default: fields present at v are .present = 1 except tagged fields
 * (present = 0); arrays empty (or null when the default is null).
 * Arena-owned; NULL on ENOMEM.
 */
struct kr_node *kr_node_new(struct kr_arena *arena, uint16_t sid, int16_t v);

/*
 * *m as a new request krelay sends itself: ApiKey key at version ver, a
 * header of the version Kafka's schema gives it (kr_request_header_version)
 * with RequestApiKey, RequestApiVersion, CorrelationId corr and ClientId
 * client_id (borrowed, must outlive m; NULL: null), and a body of every
 * field's default (kr_node_new).  Arena-owned.  KR_OK, KR_EUNSUPPORTED
 * when the tables lack (key, ver), KR_ENOMEM.
 */
int kr_msg_request_new(struct kr_arena *arena, struct kr_msg *m,
                       int16_t key, int16_t ver, int32_t corr,
                       const char *client_id) KR_MUST_CHECK;

/* A new array of n elements (struct elements are kr_node_new'd at v). */
struct kr_array *kr_array_new(struct kr_arena *arena, enum kr_type elem_type,
                              uint16_t struct_id, uint32_t n, int16_t v);

/*
 * Set *val to field f's default at version v, as the decoder leaves a
 * field that is absent (present = 0): numbers and bool from the schema's
 * default, strings from it (or null), bytes/records/arrays empty or null,
 * uuid zero, structs a fresh kr_node_new at v.  A null default where f is
 * not nullable at v becomes empty.  Allocations come from arena.  Returns
 * KR_OK or KR_ENOMEM.
 */
int kr_val_default(struct kr_arena *arena, const struct kr_field_desc *f,
                   int16_t v, struct kr_val *val) KR_MUST_CHECK;

/*
 * The value of field name in n, or NULL when the struct has no such field
 * (or n is NULL).  Exact spelling (strcmp over the struct's fields): for
 * names that come from users (krelay-codec, JSON paths).
 */
struct kr_val *kr_node_get(const struct kr_node *n, const char *name);

/*
 * The value of the field with id id (kr_field_ids.h, e.g. KR_FIELD_ACKS)
 * in n, or NULL when n's struct has no such field (or n is NULL, or id
 * is KR_FIELD_NONE).  The same value kr_node_get finds for the field's
 * name, found by comparing integers; what code that knows the field
 * uses.  Like kr_node_get it ignores the version: check .present.
 */
struct kr_val *kr_node_get_id(const struct kr_node *n, enum kr_field_id id);

/* Field descriptor of n's field i. */
static inline const struct kr_field_desc *
kr_node_field(const struct kr_node *n, unsigned i)
{
    return &kr_fields[kr_structs[n->struct_id].first_field + i];
}

/* ---- misc --------------------------------------------------------------- */

/*
 * Kafka's uuid string form: base64url without padding, 22 characters
 * plus NUL into out[23].  kr_uuid_parse: the reverse; false when s is not
 * 22 base64url characters.
 */
void kr_uuid_format(const uint8_t u[16], char out[23]);
bool kr_uuid_parse(const char *s, uint8_t u[16]);

/* True when p[0..len) is valid UTF-8 (no overlongs, no surrogates). */
bool kr_utf8_valid(const uint8_t *p, size_t len);

#endif /* KR_CODEC_H */
