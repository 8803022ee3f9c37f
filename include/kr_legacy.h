/*
 * kr_legacy.h - legacy translation (issue 10): requests of the versions
 * Kafka 4 removed (KIP-896) taken UP to a version the broker accepts, and
 * their responses taken back DOWN to the client's version.
 *
 * Pure functions over decoded trees (kr_codec.h): no records bytes, no
 * session, no config.  The generic field-by-name rule is kr_translate's
 * (kr_translate.h); this module adds, per API, what that rule gets wrong
 * or cannot do (new fields that must take the value that keeps the old
 * meaning, fields with no successor, ListOffsets v0's offset list) and
 * the error codes an old version cannot know, each from a table citing
 * its source (src/kr_legacy.c).
 *
 * Records (Produce v0-2, Fetch v0-3) are NOT converted here: a records
 * value is carried as it is in the tree (a slice of the frame or rec_ext
 * bytes, kr_val_set_records_ext); the caller converts them (kr_records.h)
 * before or after, on the translated tree.
 *
 * What is translated (from -> the range of `to` this module takes; the
 * lowest is what Kafka 4 accepts, kr_api_min_kafka4):
 *   Produce 0-2 -> 3-12           Fetch 0-3 -> 4-12
 *   ListOffsets 0 -> 1-9          OffsetCommit 0-1 -> 2-8
 *   OffsetFetch 0 -> 1-7          JoinGroup 0-1 -> 2-3
 *   CreateTopics 0-1 -> 2-7       DeleteTopics 0 -> 1-5
 *   OffsetForLeaderEpoch 0-1 -> 2-4
 *   DescribeConfigs 0 -> 1-4      DescribeAcls, CreateAcls, DeleteAcls 0 -> 1-3
 * The upper ends stop before a version whose meaning an old client
 * cannot carry: Fetch 13+, OffsetCommit 9+ / 10+, DeleteTopics 6+ name
 * topics by TopicId or change the group protocol; JoinGroup 4+ answers a
 * first join with MEMBER_ID_REQUIRED (79), which no v0-1 client knows.
 *
 * Where the translated request means something else than the old one (the
 * broker stores offsets elsewhere, a field is dropped),
 * kr_legacy_caveat says so in one line, for the log.
 */
#ifndef KR_LEGACY_H
#define KR_LEGACY_H

#include <stdbool.h>
#include <stdint.h>

#include "kr_arena.h"
#include "kr_codec.h"
#include "kr_common.h"

/*
 * What translating a response back needs from its request, kept by the
 * caller with the in-flight entry (a fixed struct: no pointer into the
 * request's frame, which is gone when the response comes).  Filled by
 * kr_legacy_request_up; zeroed memory is not a valid memo.
 */
struct kr_legacy_memo {
    int16_t api_key;            /* ApiKey of the request */
    int16_t client_version;     /* the version the client sent */
    int16_t upstream_version;   /* the version sent to the broker */
    int32_t max_num_offsets;    /* ListOffsets v0: the MaxNumOffsets every
                                   partition asked (one value: requests
                                   whose partitions differ are refused);
                                   1 otherwise */
};

/*
 * Whether this module takes ApiKey api from version `from` (a client's)
 * up to version `to` (the broker's), and the response back: true only for
 * the pairs listed at the top of this file.  What the lead and the
 * profile's advertised-range widening ask before translating.
 */
bool kr_legacy_translates(int16_t api, int16_t from, int16_t to);

/*
 * The version a request of api at `from` goes upstream at, for a broker
 * that accepts [bmin, bmax]: the lowest v in that range with
 * kr_legacy_translates(api, from, v), or -1 when there is none (from
 * itself is accepted, or no version fits).
 */
int16_t kr_legacy_pick(int16_t api, int16_t from, int16_t bmin,
                       int16_t bmax);

/*
 * One line saying what a translation of api from version `from` changes
 * in meaning (a static string), or NULL when it changes nothing the
 * client could see.  E.g. OffsetCommit v0: "v0 offsets were kept in
 * ZooKeeper; the translated commit stores them in Kafka (the group's
 * ZooKeeper offsets are not migrated)".
 */
const char *kr_legacy_caveat(int16_t api, int16_t from);

/*
 * Translate the client's decoded request m (m->dir KR_DIR_REQUEST) to
 * version `to`: kr_translate_msg (the header too) plus the per-API
 * mappings of src/kr_legacy.c, and fill *memo for the response.
 *
 * m's tree may be modified in place where a mapping drops a value (e.g.
 * ListOffsets v0's MaxNumOffsets, OffsetCommit v1's CommitTimestamp are
 * reset before the generic rule runs); on success m->body, m->header,
 * m->api_version and m->hdr_version describe the request at `to`, sharing
 * strings, bytes and records with the original tree (which must outlive
 * it).  Allocations come from arena.
 *
 * Returns KR_OK; KR_EUNSUPPORTED when !kr_legacy_translates(api,
 * m->api_version, to) or the request cannot be said at `to` without
 * changing its meaning (err->path names the field, err->msg why: e.g.
 * ListOffsets v0 partitions asking different MaxNumOffsets) - the caller
 * answers the client with its version's error; KR_EPROTO for a tree that
 * is not such a request; KR_ENOMEM.  On failure m's header and body
 * pointers are unchanged (values may have been reset as above).
 */
int kr_legacy_request_up(struct kr_arena *arena, struct kr_msg *m,
                         int16_t to, struct kr_legacy_memo *memo,
                         struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * Translate the broker's decoded response rsp (decoded at
 * memo->upstream_version) back to the client's version `to`
 * (memo->client_version): kr_translate_msg plus the per-API mappings
 * (ListOffsets v0's OldStyleOffsets, DescribeConfigs v0's IsDefault,
 * top-level errors of Fetch v7+ and OffsetFetch v2+ moved to the
 * partitions) and the error-code table for the client's version.  Fields
 * the old version lacks are dropped (ThrottleTimeMs, Fetch's
 * LastStableOffset and AbortedTransactions, KIP-951's CurrentLeader and
 * NodeEndpoints hints, a Fetch SessionId of a sessionless fetch...).
 * Records values are carried unconverted.
 *
 * rsp's tree may be modified in place (error codes, values the mapping
 * moved); on success rsp describes the response at `to`.  Same results
 * as kr_legacy_request_up; KR_EPROTO also when rsp does not match memo
 * (ApiKey or version); KR_EUNSUPPORTED when the response says something
 * the client's version cannot (a Fetch top-level error with no partition
 * to carry it, a Fetch PreferredReadReplica (KIP-392), an ACL whose
 * PatternType is not LITERAL; err->path names it): the caller closes or
 * answers with an error.
 */
int kr_legacy_response_down(struct kr_arena *arena, struct kr_msg *rsp,
                            int16_t to, const struct kr_legacy_memo *memo,
                            struct kr_codec_err *err) KR_MUST_CHECK;

/*
 * The decoded Fetch request body (any version: Topics[].Partitions[])
 * put in krelay's order for turn: its topics sorted by name and each
 * topic's partitions by index, then the topics, and each topic's
 * partitions, rotated left by turn (modulo their counts): turn 0 is the
 * sorted order, turn 1 puts the second topic first and in every topic
 * the second partition first.  The client's own order does not matter
 * (a client that rotates its partitions itself, as librdkafka does,
 * would otherwise have its rotation and krelay's add up and skip
 * partitions).  In place; nothing is allocated.
 *
 * Why: a broker fills a Fetch response in the request's order until
 * MaxBytes (KIP-74), so a translated old consumer's Fetch, given a
 * MaxBytes it never had (legacy_fetch_max_bytes), would serve its first
 * partitions and starve the rest; KIP-74 has the client rotate the
 * order, which a v0-2 client does not know to do.  The caller passes a
 * per-connection count of translated Fetches.  The response's order
 * follows the broker's; old clients take partitions by name.
 */
void kr_legacy_fetch_rotate(struct kr_node *body, uint32_t turn);

/*
 * The error code a client of api at version `client_version` gets for
 * `code` from the broker (the table in src/kr_legacy.c; `code` itself
 * when no row applies).  kr_legacy_response_down applies it to every
 * ErrorCode of the response.
 */
int16_t kr_legacy_error(int16_t api, int16_t client_version, int16_t code);

#endif /* KR_LEGACY_H */
