/*
 * kr_topics.h - the topics a decoded Kafka message names, generically from
 * the schema tables, and the TopicId -> name map krelay learns from
 * Metadata responses.
 *
 * A message names a topic through
 *   - a string field whose schema entityType is topicName (KR_E_TOPIC_NAME:
 *     Produce Topics[].Name, Fetch v0-12 Topics[].Topic, DeleteTopics
 *     TopicNames[] ...), arrays of such strings included;
 *   - a uuid field named "TopicId" (Fetch v13+, DeleteTopics v6+,
 *     Produce v13+, Metadata v10+ ...) when the same struct gives no
 *     (non-null) topic name: resolved through a struct kr_topic_map; an id
 *     the map does not know (or no map) is reported as its uuid string
 *     (Kafka's base64url form, kr_uuid_format), so it still shows in logs
 *     and a rule can name it; the zero uuid names nothing;
 *   - a string field "ResourceName" whose sibling int8 "ResourceType" (or
 *     "ResourceTypeFilter") is 2 (TOPIC in Kafka's ResourceType): the ACL,
 *     config and describe APIs (CreateAcls, AlterConfigs, ...); a null
 *     ResourceNameFilter (DescribeAcls/DeleteAcls "any") names nothing.
 * The partition count of a topic is the number of entries of the first
 * array under the topic's struct whose elements are partitions (an int32
 * "PartitionIndex"/"Partition"/"Index" field, or an array of int32 named
 * like "Partitions"/"PartitionIndexes"), whichever exists at the
 * message's version; 0 when the struct has none (DeleteTopics,
 * CreateTopics without Assignments, ResourceName, []string names).
 * Source: Kafka's message JSON schemas (entityType), KIP-516 (topic ids).
 *
 * Each struct's list of fields to visit is precomputed once
 * (kr_topics_init at start-up; lazily and thread-safe on first use
 * otherwise), so a walk skips every subtree that cannot name a
 * topic (KR_SF_HAS_TOPIC, TopicId and ResourceName included): walking a
 * large Produce touches only its Topics array and partition counts, never
 * records.
 */
#ifndef KR_TOPICS_H
#define KR_TOPICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_codec.h"

/*
 * Build the per-struct walk table now (the daemon calls it before any
 * worker exists, so walks only read it).  Idempotent, thread-safe; out
 * of memory leaves it to the first walk.
 */
void kr_topics_init(void);

/*
 * TopicId (uuid, 16 raw bytes) -> name map learned from Metadata
 * responses (v10+).  A hash table holding malloc'd copies of the names.
 * Not thread-safe: one map per worker thread, or external locking (readers
 * only while nobody learns).
 */
struct kr_topic_map;

/* A new empty map; NULL on ENOMEM.  Free with kr_topic_map_free. */
struct kr_topic_map *kr_topic_map_new(void);
/* Free m and every name; NULL is a no-op. */
void kr_topic_map_free(struct kr_topic_map *m);
/*
 * Learn every (Topics[].TopicId, Topics[].Name) pair of a decoded
 * Metadata response (v10+; older versions and other APIs are ignored).
 * Zero ids and null names are skipped; an id seen again with a new name
 * takes the new name (topic deleted and recreated: ids are unique, so
 * this is only a rename of a stale entry).  The map is capped at
 * KR_TOPIC_MAP_MAX entries (further new ids are ignored).  Allocation
 * failures leave the map as it was.
 */
void kr_topic_map_learn(struct kr_topic_map *m,
                        const struct kr_msg *metadata_rsp);
#define KR_TOPIC_MAP_MAX 1000000u
/*
 * Each (TopicId, name) pair kr_topic_map_learn learns from a decoded
 * Metadata response (v10+; anything else: none), in order: cb(arg, id,
 * name, len) with id 16 bytes and name len bytes (not terminated), both
 * borrowed from the tree for the call.  Never allocates.
 */
void kr_topics_metadata_each(const struct kr_msg *metadata_rsp,
                             void (*cb)(void *arg, const uint8_t id[16],
                                        const char *name, size_t len),
                             void *arg);
/*
 * Name of TopicId id (NUL-terminated, owned by the map, valid until the
 * next learn or free), or NULL when unknown, or m is NULL.
 */
const char *kr_topic_map_name(const struct kr_topic_map *m,
                              const uint8_t id[16]);
/* Number of ids in m (tests, logs). */
size_t kr_topic_map_size(const struct kr_topic_map *m);
/*
 * Record one id -> name pair by hand (tests, and callers that know a
 * pair from elsewhere).  Returns false on ENOMEM or when full.
 */
bool kr_topic_map_put(struct kr_topic_map *m, const uint8_t id[16],
                      const char *name, size_t len);

/*
 * Every topic a decoded message (request or response, header ignored)
 * names, with the number of partitions named under it, in message order.
 * A topic named twice (two entries, or a name and its id) is reported
 * twice: callers that need distinct topics merge by name.  topic is
 * len bytes, NOT NUL-terminated, borrowed from the tree or the map for
 * the call only.  cb returns false to stop the walk.  map may be NULL.
 * Never allocates, never fails.
 */
void kr_topics_each(const struct kr_msg *m, const struct kr_topic_map *map,
                    bool (*cb)(void *arg, const char *topic, size_t len,
                               unsigned partitions),
                    void *arg);

/*
 * How many non-zero TopicIds m names that map (may be NULL: all of them)
 * does not know; kr_topics_each reports those as their base64 form, which
 * no topic glob should be trusted to match (issue 13: a topic rule cannot
 * be checked on them).  Never allocates.
 */
size_t kr_topics_unresolved(const struct kr_msg *m,
                            const struct kr_topic_map *map);

/* Same, over one body node (struct of kr_structs[n->struct_id]). */
void kr_topics_each_node(const struct kr_node *n,
                         const struct kr_topic_map *map,
                         bool (*cb)(void *arg, const char *topic, size_t len,
                                    unsigned partitions),
                         void *arg);

/*
 * True when messages of root struct sid can name a topic at all (the
 * precomputed table): lets a caller skip a walk for e.g. ApiVersions.
 */
bool kr_topics_possible(uint16_t sid);

#endif /* KR_TOPICS_H */
