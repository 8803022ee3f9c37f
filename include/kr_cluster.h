/*
 * kr_cluster.h - what the process has learned about one upstream cluster,
 * shared by every worker (issue 12: what is shared is read-mostly, with a
 * named thread-safe API).
 *
 * One struct kr_cluster per [upstream] generation: the daemon makes one
 * per [upstream] section, hands the same one to every worker (struct
 * kr_wgen), and keeps it across a reload that changes none of the
 * section's keys that build a new upstream (kr_conf.h, KR_RELOAD_NEWCONN).
 * Each worker's kr_upstream publishes what it learns into it and reads
 * what the others learned from it, so a NodeId one worker learned is known
 * to all at once, and one fetch serves the process (kr_cluster_fetch_*).
 *
 * What it holds, as immutable snapshots (struct kr_cluster_snap):
 *   - brokers: NodeId -> HOST:PORT as the brokers advertise them (from
 *     krelay's own Metadata fetches and client traffic; dial.NODEID
 *     overrides are the config's, applied by each kr_upstream, not here);
 *   - the ApiVersions ranges of krelay's last own ApiVersions answer;
 *   - the TopicId -> name pairs learned (KIP-516), as an append-only log:
 *     a snapshot publishes a prefix of it (ntopics), and the entries of a
 *     published prefix never change, so a reader merges only the ones it
 *     has not seen (kr_cluster_topic_at).
 *
 * Threads: writers (kr_cluster_edit_*) serialise on a mutex and publish a
 * new snapshot with a new generation (an atomic counter, release);
 * readers keep a per-thread cache (struct kr_cluster_reader) and on the
 * hot path only load the generation (acquire) and compare it with their
 * cached one: no lock, no shared write.  Only when it changed does the
 * reader take the mutex, briefly, to take a reference to the new snapshot
 * (a counted snapshot cannot be taken from an atomic pointer alone: the
 * writer could drop it between the load and the increment).  A snapshot
 * is freed by its last reference, on whichever thread.
 */
#ifndef KR_CLUSTER_H
#define KR_CLUSTER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_codec.h"

/* ApiKeys remembered: 0..KR_CLUSTER_API_KEYS-1. */
#define KR_CLUSTER_API_KEYS 128
/* Brokers remembered (NodeIds), as kr_upstream's own map. */
#define KR_CLUSTER_MAX_BROKERS 4096

struct kr_cluster;

/* One broker as its cluster advertises it. */
struct kr_cluster_broker {
    int32_t node_id;
    uint16_t port;
    bool fetched;                       /* krelay's own fetch said so,
                                           else client traffic */
    char *host;                         /* NUL-terminated, no brackets;
                                           owned by the snapshot */
};

/* [MinVersion, MaxVersion] of one ApiKey; min -1: not offered. */
struct kr_cluster_range {
    int16_t min, max;
};

/*
 * One published state: read-only for everybody once published.  Taken
 * with kr_cluster_snap_get or through a struct kr_cluster_reader, given
 * back with kr_cluster_snap_put.
 */
struct kr_cluster_snap {
    uint64_t gen;                       /* 1, 2, ...: its generation */
    int nbrokers;
    struct kr_cluster_broker *brokers;  /* sorted by node_id */
    bool have_api;                      /* an ApiVersions answer seen */
    struct kr_cluster_range api[KR_CLUSTER_API_KEYS];
    size_t ntopics;                     /* TopicId log entries published */
    atomic_int refs;                    /* private */
};

/*
 * A new, empty cluster view (generation 1: no brokers, no ranges, no
 * topics) with one reference, the caller's.  name: the [upstream]'s, for
 * log lines (copied; NULL is "").  NULL on ENOMEM.
 */
struct kr_cluster *kr_cluster_new(const char *name);
/* One more reference to c (any thread); returns c.  NULL passes. */
struct kr_cluster *kr_cluster_ref(struct kr_cluster *c);
/*
 * Drop one reference (any thread); the last frees c, its TopicId log
 * and its current snapshot (readers' snapshots live on until they put
 * them).  NULL is a no-op.
 */
void kr_cluster_put(struct kr_cluster *c);

/* The generation now published (acquire).  Any thread, no lock. */
uint64_t kr_cluster_gen(const struct kr_cluster *c);

/*
 * The current snapshot, with a reference the caller owns (give it back
 * with kr_cluster_snap_put).  Takes c's mutex for the increment: for
 * per-request reads use a struct kr_cluster_reader.  Never NULL.
 */
const struct kr_cluster_snap *kr_cluster_snap_get(struct kr_cluster *c);
/* Give back a reference (any thread).  NULL is a no-op. */
void kr_cluster_snap_put(const struct kr_cluster_snap *s);

/*
 * TopicId log entry i (i < the ntopics of a snapshot of c the caller
 * holds): its id (16 bytes) and name (NUL-terminated), valid as long as
 * c.  Any thread, no lock: entries below a published ntopics never
 * change.
 */
void kr_cluster_topic_at(const struct kr_cluster *c, size_t i,
                         const uint8_t **id, const char **name);

/*
 * A thread's cached view of c: the snapshot it read last and its
 * generation.  Owned by one thread (a worker's kr_upstream).
 */
struct kr_cluster_reader {
    struct kr_cluster *c;               /* borrowed */
    const struct kr_cluster_snap *snap; /* a reference, or NULL */
    uint64_t gen;
};

/* Start reading c (borrowed: must outlive r).  Takes nothing yet. */
void kr_cluster_reader_init(struct kr_cluster_reader *r,
                            struct kr_cluster *c);
/*
 * The snapshot now current: r's cached one when the generation did not
 * move (one atomic load), else the new one (the old reference given
 * back).  *changed (may be NULL) says whether it moved since the last
 * call.  Valid until the next call on r or kr_cluster_reader_done.
 */
const struct kr_cluster_snap *kr_cluster_read(struct kr_cluster_reader *r,
                                              bool *changed);
/* Give back r's snapshot. */
void kr_cluster_reader_done(struct kr_cluster_reader *r);

/*
 * An edit: what one writer changes, published as one snapshot.  Between
 * kr_cluster_edit_begin and kr_cluster_edit_end the writer holds c's
 * mutex: keep it short (no I/O).  Fields private.
 */
struct kr_cluster_edit {
    struct kr_cluster *c;
    struct kr_cluster_snap *next;       /* the copy edited, NULL until
                                           the first change */
    size_t ntopics;                     /* log entries after the edit */
};

void kr_cluster_edit_begin(struct kr_cluster_edit *e, struct kr_cluster *c);
/*
 * Record NodeId node_id at host[0..hlen):port (fetched: from krelay's
 * own Metadata fetch).  Returns true when it changed the view (a new
 * NodeId or a new address); false when it was known so, or invalid
 * (node_id < 0, port 0, hlen 0 or > 255), or out of memory, or past
 * KR_CLUSTER_MAX_BROKERS.
 */
bool kr_cluster_edit_broker(struct kr_cluster_edit *e, int32_t node_id,
                            const char *host, size_t hlen, uint16_t port,
                            bool fetched);
/*
 * Replace the ApiVersions ranges (api: KR_CLUSTER_API_KEYS of them, min
 * -1 for a key not offered).  Returns true when they changed.
 */
bool kr_cluster_edit_api(struct kr_cluster_edit *e,
                         const struct kr_cluster_range *api);
/*
 * Record one TopicId -> name pair (name: len bytes, not terminated).  A
 * pair known with the same name changes nothing; a new id or a new name
 * for a known id (a topic recreated) is appended to the log.  Returns
 * true when appended; false when known, or the log is full
 * (KR_TOPIC_MAP_MAX entries), or out of memory.
 */
bool kr_cluster_edit_topic(struct kr_cluster_edit *e, const uint8_t id[16],
                           const char *name, size_t len);
/* Every pair of a decoded Metadata v10+ response; returns how many were
   appended.  Source: MetadataResponse.json (Topics[].TopicId, Name). */
size_t kr_cluster_edit_topics(struct kr_cluster_edit *e,
                              const struct kr_msg *metadata_rsp);
/*
 * Publish what changed as a new snapshot (nothing changed: none) and
 * release the mutex.  Returns the generation current after it.
 */
uint64_t kr_cluster_edit_end(struct kr_cluster_edit *e);

/*
 * One fetch for the process (krelay's own Metadata requests): before a
 * periodic fetch a kr_upstream asks whether a fetch of c succeeded
 * recently (kr_cluster_fetch_times) or is under way elsewhere.
 * kr_cluster_fetch_claim: take the fetch for hold_ms from now_ms (a
 * monotonic ms clock) unless another holder's claim runs past now_ms;
 * true when taken.  kr_cluster_fetch_release: the holder lets the next
 * claim in after retry_ms (0: at once).  kr_cluster_fetch_done: a fetch
 * ended (claimed or not) and succeeded (ok) or failed, at now_ms.
 * Atomics only; any thread.
 */
bool kr_cluster_fetch_claim(struct kr_cluster *c, int64_t now_ms,
                            int64_t hold_ms);
void kr_cluster_fetch_release(struct kr_cluster *c, int64_t now_ms,
                              int64_t retry_ms);
void kr_cluster_fetch_done(struct kr_cluster *c, bool ok, int64_t now_ms);
/* The last fetch of c by any worker that succeeded and that failed, 0:
   never (monotonic ms). */
void kr_cluster_fetch_times(const struct kr_cluster *c, int64_t *ok_ms,
                            int64_t *fail_ms);

#endif /* KR_CLUSTER_H */
