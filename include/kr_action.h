/*
 * kr_action.h - the rule actions as pure functions over decoded trees.
 *
 * Everything here works on struct kr_msg / struct kr_node trees built by
 * the codec (kr_codec.h) and knows nothing of sockets, sessions or
 * timers: the session pipeline (kr_session.c) decides when to call what.
 * Generic code is driven by the schema tables (KR_FF_ERROR_CODE,
 * KR_FF_THROTTLE, entity types); small per-API tables exist only where
 * Kafka's semantics need them (how an error response mirrors its request,
 * KIP-219 versions).
 *
 * No function here allocates outside the arena it is given; every
 * function is thread-safe (the tables are static and read-only).
 */
#ifndef KR_ACTION_H
#define KR_ACTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_codec.h"
#include "kr_common.h"

/*
 * The error response a broker would send refusing request req: every
 * topic / partition / resource entry mirrored from the request carries
 * `error` (and names/indexes copied), a top-level ErrorCode set where the
 * API has one, ThrottleTimeMs 0, at req->api_version with req's
 * CorrelationId.  Covers at least Produce, Fetch, CreateTopics,
 * DeleteTopics, DeleteRecords, CreatePartitions, AlterConfigs,
 * IncrementalAlterConfigs, DeleteGroups, the ACL APIs (DescribeAcls,
 * CreateAcls, DeleteAcls), ElectLeaders, AlterPartitionReassignments,
 * plus every API whose response is only a top-level ErrorCode (+ throttle).
 * KR_EUNSUPPORTED for other APIs (the caller then closes the connection).
 * Fetch: keep incremental fetch sessions (KIP-227) consistent (see the KIP).
 *
 * Details.  Entries are mirrored per a small per-API table in
 * kr_action.c (request array -> response array, key fields copied, a few
 * fields Kafka sets to -1 such as Produce BaseOffset and Fetch
 * HighWatermark); every mirrored entry and the body get `error` in each
 * ErrorCode field they have at that version, and ErrorMessage (where the
 * struct has one) is Kafka's name of the error ("TOPIC_AUTHORIZATION_
 * FAILED"; left at its default for error 0 or an unknown code).  Besides
 * the required list, Metadata, ListOffsets, OffsetCommit,
 * TxnOffsetCommit, DescribeConfigs, DescribeGroups, FindCoordinator,
 * JoinGroup, SyncGroup, LeaveGroup, ListGroups, InitProducerId, EndTxn,
 * SaslHandshake, ApiVersions and a few admin APIs are answered; the
 * "only a top-level ErrorCode (+ ThrottleTimeMs, ErrorMessage)" set is
 * computed from the tables (Heartbeat, AddOffsetsToTxn...).
 * Fetch (as FetchRequest.getErrorResponse): top-level ErrorCode from v7,
 * every requested partition carries the error below v13, none from v13;
 * SessionId is 0 so the client drops to a full fetch (a broker would
 * echo it; see fetch_adjust in kr_action.c for why krelay does not).
 *
 * rsp is filled as a decoded response would be (dir KR_DIR_RESPONSE,
 * header a ResponseHeader node at the right header version, body the
 * response root at req->api_version); it is arena-owned and may borrow
 * strings from req (so from req's frame): encode it before the request
 * frame is released.  Encode with kr_encode_msg (no records slices are
 * referenced: records fields are null or empty).  Returns KR_OK,
 * KR_EUNSUPPORTED, KR_EPROTO when req is not a decoded request, or
 * KR_ENOMEM.
 */
int kr_action_error_response(struct kr_arena *a, const struct kr_msg *req,
                             int16_t error, struct kr_msg *rsp);

/*
 * True when kr_action_error_response can answer api_key at version v
 * (cheap: table lookup, no allocation).  For config checks ("deny on an
 * API krelay cannot answer closes the connection").
 */
bool kr_action_error_response_supported(int16_t api_key, int16_t v);

/* Default deny error of an API, without its request: the error a broker
 * answers when the resource it authorizes FIRST is refused.
 * TOPIC_AUTHORIZATION_FAILED (29) for APIs naming topics,
 * GROUP_AUTHORIZATION_FAILED (30) for group APIs,
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) for transactional ones,
 * CLUSTER_AUTHORIZATION_FAILED (31) otherwise.
 * Decided from the schema entity types of the API's request (any
 * version, any depth), in that order of precedence, except for a small
 * table (kr_deny_defaults in kr_action.c, after KafkaApis' order of
 * checks) of APIs brokers authorize differently: the group is checked
 * before the topics (OffsetCommit, OffsetFetch, OffsetDelete,
 * ConsumerGroupHeartbeat, share and streams group APIs: 30), the
 * transactional id before the group or topics (AddOffsetsToTxn,
 * TxnOffsetCommit, AddPartitionsToTxn: 53), FindCoordinator (30: its
 * default KeyType, group), cluster-authorized APIs naming topics
 * (ElectLeaders, partition reassignments, log dirs, inter-broker and
 * KRaft APIs: 31).  Produce gives 29, InitProducerId 53, an unknown key
 * 31.  Use kr_action_deny_error_for when the request is at hand. */
int16_t kr_action_deny_error(int16_t api_key);

/* Default deny error for one decoded request: kr_action_deny_error of
 * its ApiKey, refined by what the request says where brokers decide per
 * request: FindCoordinator by KeyType (0 group: 30, 1 transaction: 53,
 * else 31), Produce with a TransactionalId 53 (else 29), InitProducerId
 * without one 31 (IDEMPOTENT_WRITE on the cluster; else 53),
 * AddPartitionsToTxn v4+ (broker to broker) 31.  req NULL gives 31. */
int16_t kr_action_deny_error_for(const struct kr_msg *req);

/* ThrottleTimeMs of a decoded response: set (add=false) or add ms;
 * returns false when that version has no ThrottleTimeMs. *now = result.
 * The field is found by KR_FF_THROTTLE in the body's root struct (its
 * position differs per API: first in Metadata, last in Produce).  The
 * result is clamped to [0, INT32_MAX] (saturates; a negative set gives
 * 0).  now may be NULL; it is untouched when false is returned. */
bool kr_action_throttle(struct kr_msg *rsp, int32_t ms, bool add, int32_t *now);

/* First version of api_key from which clients throttle themselves
 * (KIP-219); INT16_MAX when never.  Below it a broker delays the
 * response instead.  Kafka's per-response shouldClientThrottle() values
 * for the APIs older than KIP-219 (Produce 6, Fetch 8, Metadata 6, ...;
 * sources in kr_action.c), else the first version whose response has
 * ThrottleTimeMs. */
int16_t kr_action_kip219_version(int16_t api_key);

/* Replace ErrorCode values in a decoded response (in place).
 * Chosen semantics ("inject this error"): every ErrorCode below the top
 * level (topic, partition, resource, group entries), zero ones included,
 * becomes error; the top-level ErrorCode is replaced only when the
 * response has no such entry (Heartbeat, an empty Fetch v13+...), since
 * a top-level error makes clients discard the entries (KIP-227 for
 * Fetch).  error 0 clears.  Returns the number of fields written. */
unsigned kr_action_replace_errors(struct kr_msg *rsp, int16_t error);

/* Call cb once per distinct ErrorCode != 0 in a response with its count.
 * Every level counts (KR_FF_ERROR_CODE fields only: "ErrorCode", not
 * e.g. PartitionErrorCode).  Order of calls unspecified.  No allocation
 * (over 256 distinct codes, the extra ones are reported once per
 * occurrence with n = 1). */
void kr_action_count_errors(const struct kr_msg *rsp,
                            void (*cb)(void *arg, int16_t error, unsigned n),
                            void *arg);

/* Produce policy: acks_mask bit (acks+1) for acks -1/0/1; codec_mask bit
 * per RecordBatch compression (0 none,1 gzip,2 snappy,3 lz4,4 zstd) read
 * from the batch attributes (payload = the frame the msg was decoded
 * from; no decompression).  KR_OK or KR_EPROTO/KR_ELIMIT with why set.
 * A mask of 0 allows anything on that dimension; Acks outside -1..1 is
 * refused by any other mask.  With every codec allowed (0 or 0x1f) the
 * records are not read and payload may be NULL.  Every batch of every
 * partition's Records is checked: magic 2 attributes (int16 at batch
 * offset 21), magic 0/1 message attributes (int8 at offset 17, the outer
 * wrapper message only).  KR_ELIMIT: refused by the policy (why: "Acks 0
 * not allowed", "compression gzip not allowed").  KR_EPROTO: not a
 * decoded Produce request, a truncated or inconsistent batch header
 * (why says where), unknown magic or compression type, records outside
 * payload.  Never reads outside payload; why is always NUL-terminated. */
int kr_action_produce_policy(const struct kr_msg *req,
                             const struct kr_rbuf *payload,
                             unsigned acks_mask, unsigned codec_mask,
                             char *why, size_t whylen);

#endif /* KR_ACTION_H */
