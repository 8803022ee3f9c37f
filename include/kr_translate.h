/*
 * kr_translate.h - version translation of decoded messages, ApiVersions
 * clamping, and the answer to an ApiVersions request newer than krelay
 * knows.
 *
 * Everything here is a pure function over decoded trees (kr_codec.h) and
 * the schema tables (kr_schema.h): no socket, session or config.
 *
 * Translation follows Kafka's rule for writing a message at a version
 * (clients/src/main/resources/common/message/README.md, "Ignorable
 * Fields"): fields are matched BY NAME between the two versions' structs
 * (which may be different structs: Kafka 4.3.1 and 3.9.1 layouts, e.g.
 * Produce v3 vs v2, Fetch v4 vs v3), recursively into structs and arrays.
 *   - a field the target version lacks is dropped silently when it is
 *     ignorable or holds its default value; otherwise the translation
 *     fails with KR_EUNSUPPORTED and err->path names it;
 *   - a field new at the target version takes its default;
 *   - tagged fields keep their presence where the field exists at the
 *     target (a field that becomes tagged is sent only when it differs
 *     from its default); unknown tagged fields are kept only when the
 *     target version is flexible;
 *   - one exception, for safety: a topic name (entity topicName) or a
 *     TopicId holding a value is ignorable in Kafka's schemas, but it is
 *     dropped only when the target struct still names the topic the
 *     other way (Metadata v12 -> v9 keeps Name, drops TopicId).  Fetch
 *     v13 -> v12 with only TopicIds, or a ProduceResponse v12 -> v13 with
 *     only names, fail with KR_EUNSUPPORTED (resolving ids needs the
 *     TopicId map, kr_topics.h; translation is pure);
 *   - records are carried over as the same (offset, length) slices of the
 *     source payload: record batches are NOT converted between message
 *     formats (magic 0/1 vs 2; Produce v0-2 / Fetch v0-3 vs later).  A
 *     caller translating across that boundary must convert the records
 *     itself or refuse.
 * When both versions use the same root struct, the translation is a
 * relabel of the versions plus default fill of fields that exist only at
 * one end (no tree copy beyond what changes).
 */
#ifndef KR_TRANSLATE_H
#define KR_TRANSLATE_H

#include <stdbool.h>
#include <stdint.h>

#include "kr_codec.h"
#include "kr_common.h"
#include "kr_schema.h"


/*
 * Per-ApiKey version clamp, inclusive.  Empty (min > max) means "no
 * clamp" for that key.  Arrays of clamps are indexed by ApiKey and have
 * kr_api_max + 1 entries.
 */
struct kr_clamp {
    int16_t min, max;
};

/*
 * Convert the decoded body `in` of API api (request, or response when
 * response is true) from version `from` to version `to` (either
 * direction) by field name, following Kafka's ignorable rule (see the
 * top of this file).
 *
 * Returns KR_OK with *out a body node at version `to` (it may share
 * unchanged subtrees, strings and bytes with `in`: `in` must outlive
 * it); KR_EUNSUPPORTED when api, from or to is not a version the tables
 * know, or a non-ignorable field holding a non-default value would be
 * lost (err->path names it, e.g. "Topics[0].Partitions[1].LeaderEpoch",
 * err->msg says why); KR_EPROTO when `in` is not a body of api at
 * `from`; KR_ENOMEM when the arena is exhausted.  Everything new is
 * owned by arena a.  `in` is not modified.
 */
int kr_translate_body(struct kr_arena *a, int16_t api, bool response,
                      const struct kr_node *in, int16_t from, int16_t to,
                      struct kr_node **out,
                      struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Translate a whole decoded request or response message m to version
 * `to`: the body via kr_translate_body, and the header: requests get
 * RequestApiVersion = to and the header version
 * kr_request_header_version(api, to) (ClientId kept when the new header
 * has it, header tagged fields dropped when it is not flexible);
 * responses get kr_response_header_version(api, to).  m->api_version and
 * m->hdr_version are updated.  Records slices keep pointing into the
 * original payload, so kr_encode_msg's output is spliced with the same
 * source bytes.  On failure m is unchanged.  Same results as
 * kr_translate_body.
 */
int kr_translate_msg(struct kr_arena *a, struct kr_msg *m, int16_t to,
                     struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * What shapes the ranges one connection is advertised (kr_advertise_range,
 * kr_clamp_apiversions).  Arrays have kr_api_max + 1 entries, indexed by
 * ApiKey, or are NULL for "none"; all borrowed.
 */
struct kr_advert {
    const struct kr_clamp *clamps;      /* the connection's clamp rules
                                           (an empty clamp: none) */
    const bool *decode;                 /* krelay must decode this API's
                                           requests or responses: cap at
                                           the tables' max */
    bool decode_all;                    /* every known API is capped */
    bool pass_unknown;                  /* keep ApiKeys the tables do not
                                           know (else dropped) */
    /* issue 9: SASL termination (appended) */
    bool sasl_local;                    /* krelay answers SaslHandshake and
                                           SaslAuthenticate itself
                                           (sasl = terminate): their ranges
                                           are krelay's, 0-1 and 0-2,
                                           whatever the broker offers, and
                                           kr_clamp_apiversions adds them
                                           when the broker has none */
    struct kr_arena *arena;             /* with sasl_local: where entries
                                           added are allocated */
    /* issue 10: legacy translation (appended) */
    const struct kr_clamp *legacy;      /* with translate_legacy: the
                                           versions krelay translates up,
                                           per ApiKey (min > max: none;
                                           kr_bv_legacy_ranges(),
                                           kr_broker_versions.h); NULL:
                                           translation off */
};

/*
 * The one place an advertised (ApiVersions) range is computed, for ApiKey
 * api_key whose broker offers [bmin, bmax] (issue 13).  Precedence, each
 * step applied to the result of the one before:
 *   1. the broker's range (with ad->sasl_local, SaslHandshake's and
 *      SaslAuthenticate's are krelay's own instead: 0-1 and 0-2, the
 *      versions kr_sasl_server answers);
 *   2. intersected with the connection's clamp for the key (a clamp rule:
 *      rules decide what a client may use), except Produce's MinVersion
 *      (a Produce clamp's min acts on requests only, see 5);
 *   3. MaxVersion capped at the highest version krelay's tables know when
 *      krelay must decode the API (ad->decode[k] or decode_all: ApiVersions
 *      itself, responses carrying broker addresses, clamped APIs, and APIs
 *      an enforcing rule could match: never advertise a version krelay
 *      would have to refuse);
 *   4. legacy translation (issue 10, ad->legacy): the versions krelay
 *      translates up are offered below the broker's: MinVersion widened
 *      down to ad->legacy[api_key].min when the broker's minimum (step 1)
 *      is exactly ad->legacy[api_key].max + 1, so the range stays
 *      contiguous (a broker that starts lower needs none, one that starts
 *      higher would leave a gap no release had: not widened).  The
 *      widening applies to the broker's minimum, before the clamp of
 *      step 2 and the cap of step 3, which bound it like any broker
 *      version: a clamp decides what a client may use, translation only
 *      what reaches the broker (so a clamp_max_version below a Kafka 4
 *      broker's minimum leaves the translated versions, not nothing);
 *   5. Produce: MinVersion 0 whenever the result's minimum is 3 or lower.
 *      librdkafka decides from Produce's MinVersion whether the broker
 *      takes its older message formats and turns compression off when it
 *      is above 0 (KAFKA-18659, librdkafka #4956; Kafka 4 brokers
 *      advertise 0 for that reason although they refuse v0-v2).
 * ad may be NULL (only steps 1 and 5).  Returns false, *lo and *hi
 * unspecified, when the result is empty: the API is not offered.
 */
bool kr_advertise_range(int16_t api_key, int64_t bmin, int64_t bmax,
                        const struct kr_advert *ad, int64_t *lo, int64_t *hi);

/*
 * Apply kr_advertise_range to every entry of a decoded ApiVersions
 * response body (any version), in place: entries whose range is empty are
 * dropped, and so are ApiKeys the tables do not know unless
 * ad->pass_unknown (ad NULL: keep them, change nothing but step 5).  The
 * ApiKeys array is compacted in place.  With ad->sasl_local, SaslHandshake
 * and SaslAuthenticate entries the broker did not send are added (from
 * ad->arena; none added when it is NULL or exhausted).  Returns the
 * number of entries changed, dropped or added (0: body unchanged, no
 * re-encode needed).
 */
unsigned kr_clamp_apiversions(struct kr_node *body,
                              const struct kr_advert *ad);

/*
 * The answer Kafka brokers give to an ApiVersions request newer than they
 * know (KIP-511): response header v0 with correlation_id, then a v0 body
 * with ErrorCode 35 (UNSUPPORTED_VERSION) and ApiKeys = [{ApiKey 18,
 * MinVersion 0, MaxVersion = the highest ApiVersions version krelay's
 * tables know}].  Written to frame[0..*len) WITH its int32 size prefix
 * (KR_APIVERSIONS_UNSUPPORTED_LEN bytes), encoded by the codec.  Returns
 * KR_OK; KR_ELIMIT when cap is smaller; KR_ENOMEM (*len 0).
 */
#define KR_APIVERSIONS_UNSUPPORTED_LEN 20
int kr_apiversions_unsupported(int32_t correlation_id, uint8_t *frame,
                               size_t cap, size_t *len) KR_MUST_CHECK;

#endif /* KR_TRANSLATE_H */
