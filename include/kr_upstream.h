/*
 * kr_upstream.h - what krelay knows about one upstream Kafka cluster:
 * where each broker (NodeId) is, and how to reach it.
 *
 * Addresses come, in order of precedence, from dial.NODEID overrides in
 * the config, from metadata krelay fetches itself (its own ApiVersions +
 * Metadata requests on a bootstrap server, with ClientId "krelay", at
 * start, every metadata_refresh_ms, and when an unknown NodeId is asked
 * for), and from Metadata responses seen in client traffic
 * (kr_upstream_learn).  Host names are resolved asynchronously with
 * evdns.  Everything runs on the event_base given at creation; not
 * thread-safe (one kr_upstream per worker thread).
 *
 * What the workers' kr_upstreams of one [upstream] learn is shared
 * through a struct kr_cluster (kr_cluster.h, issue 12): each publishes
 * the brokers, TopicIds and ApiVersions ranges it learns into it and
 * merges what the others published before it answers (an atomic load
 * when nothing is new), and its periodic fetch is skipped while another
 * worker's fetch of the same cluster is recent or under way.  What stays
 * per kr_upstream: dial.NODEID overrides, resolved addresses, pending
 * resolutions, the fetch connection.
 */
#ifndef KR_UPSTREAM_H
#define KR_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/dns.h>

#include "kr_common.h"
#include "kr_conf.h"

struct kr_upstream;
struct kr_node;
struct kr_cluster;

/* NodeId value that asks for "any bootstrap server". */
#define KR_NODE_BOOTSTRAP (-1)

/*
 * Called once per kr_upstream_resolve: status KR_OK with a resolved
 * address (valid only during the call), or KR_ERROR (unknown NodeId
 * after a metadata refresh, DNS failure, timeout) with addr NULL.
 * host: the broker's name, as configured or advertised (a broker's
 * advertised Host, also for a broker with a dial.N override once krelay
 * has seen what it advertises, else the dial.N host; a bootstrap host;
 * no port, no brackets, maybe a numeric address): what a TLS upstream
 * sends as SNI and checks the certificate against.  Valid during the
 * call; NULL when no name was looked up (unknown NodeId, out of memory).
 * what: "HOST:PORT" (or "node N") for log lines; valid during the call.
 */
typedef void (*kr_resolve_cb)(void *arg, int status,
                              const struct sockaddr *addr, socklen_t addrlen,
                              const char *host, const char *what);

/* A pending resolution; cancel it with kr_upstream_resolve_cancel. */
struct kr_resolve;

/*
 * Create the state for upstream conf uc (borrowed: must outlive the
 * result) on base, using dns for host names.  Starts the first metadata
 * fetch at once.  NULL on ENOMEM.
 */
struct kr_upstream *kr_upstream_new(struct event_base *base,
                                    struct evdns_base *dns,
                                    const struct kr_upstream_conf *uc);
/*
 * The same, sharing cluster (kr_cluster.h: the daemon's view of this
 * [upstream] for every worker; u takes a reference; NULL: a view of u's
 * own).  cref: the config uc lives in (u takes a reference, kept until
 * u is freed; NULL: the caller keeps uc alive).  refs start at 1
 * (kr_upstream_ref).
 */
struct kr_upstream *kr_upstream_new_shared(struct event_base *base,
                                           struct evdns_base *dns,
                                           const struct kr_upstream_conf *uc,
                                           struct kr_cluster *cluster,
                                           struct kr_conf_ref *cref);
/*
 * References, counted on u's thread (not atomics): the worker holds one
 * while u is its [upstream]'s, each session one for its life, so an
 * upstream a reload replaced serves its sessions until the last ends.
 * kr_upstream_unref frees u at the last (kr_upstream_free).  NULL is a
 * no-op; kr_upstream_ref returns u.
 */
struct kr_upstream *kr_upstream_ref(struct kr_upstream *u);
void kr_upstream_unref(struct kr_upstream *u);
/* u's cluster view (borrowed, valid while u is). */
struct kr_cluster *kr_upstream_cluster(const struct kr_upstream *u);
/*
 * The [upstream] section u's connections go by: the latest reload's of
 * the same upstream (kr_upstream_set_sasl), else the one u was made from.
 * Borrowed; valid until the next kr_upstream_set_sasl or free.  NULL
 * when u is.
 */
const struct kr_upstream_conf *kr_upstream_conf(const struct kr_upstream *u);

/*
 * Stop fetching, cancel every pending resolution (their callbacks are not
 * called; their handles become invalid) and free u with its TopicId map.
 * NULL is a no-op.
 */
void kr_upstream_free(struct kr_upstream *u);

/*
 * Find the address of node_id (or of a bootstrap server, rotating, for
 * KR_NODE_BOOTSTRAP).  The callback may run before this returns (cached
 * numeric address) or later.  Returns a handle for cancelling, or NULL
 * when cb already ran.  An unknown NodeId triggers one metadata refresh;
 * if it is still unknown after it, cb gets KR_ERROR.
 */
struct kr_resolve *kr_upstream_resolve(struct kr_upstream *u, int32_t node_id,
                                       kr_resolve_cb cb, void *arg);
/*
 * Cancel a pending resolution: its callback is never called and r is
 * freed (now, or when evdns lets go of it).  NULL is a no-op.
 */
void kr_upstream_resolve_cancel(struct kr_resolve *r);

/*
 * Record broker addresses from a decoded Metadata response body (as the
 * broker sent it, before rewriting) seen in client traffic, and the
 * TopicIds of a Metadata v10+ body (kr_upstream_topics).  body is
 * borrowed for the call (host names and topic names are copied).  No
 * error is returned: allocation failures only lose what was to be
 * learned.  u or body NULL is a no-op.  Source: MetadataResponse.json.
 */
void kr_upstream_learn(struct kr_upstream *u, const struct kr_node *body,
                       int16_t api_key, int16_t api_version);

/*
 * The TopicId -> name map (kr_topics.h) learned from every Metadata v10+
 * response u sees: krelay's own fetches and client traffic
 * (kr_upstream_learn), and those other workers' kr_upstreams published
 * into the cluster view (merged at this call).  Owned by u, valid until
 * kr_upstream_free; read it on u's event loop only.  NULL when it could not be allocated (then
 * TopicIds stay unresolved).
 */
struct kr_topic_map;
const struct kr_topic_map *kr_upstream_topics(const struct kr_upstream *u);

/*
 * The [MinVersion, MaxVersion] the cluster offers for ApiKey api_key, as
 * the last ApiVersions v0 answer to krelay's own metadata fetch gave it
 * (one broker's view: a session's own connection may know better), by
 * any worker (the cluster view; one atomic load when it did not move).
 * Returns false, leaving *min and *max alone, when no answer was seen yet
 * or the cluster does not offer that ApiKey.
 */
bool kr_upstream_api_range(const struct kr_upstream *u, int16_t api_key,
                           int16_t *min, int16_t *max);

/*
 * How krelay's own metadata fetches to u's cluster went (the admin
 * endpoint's /readyz): u's or another worker's (kr_cluster_fetch_times),
 * times on the monotonic clock (kr_clock_mono_ms), 0 for never.  The upstream is reachable when its last fetch succeeded
 * (last_ok_ms > last_fail_ms).  name is the [upstream]'s (borrowed from
 * the config, "" for an unnamed one).  u's thread.
 */
struct kr_upstream_health {
    int64_t last_ok_ms;                 /* last fetch that succeeded */
    int64_t last_fail_ms;               /* last that failed: no bootstrap
                                           server answered */
    int nbrokers;                       /* brokers known */
    const char *name;
};
void kr_upstream_health(const struct kr_upstream *u,
                        struct kr_upstream_health *h);

/* Number of brokers currently known (tests, logs). */
int kr_upstream_nbrokers(const struct kr_upstream *u);

/*
 * The TLS context of u's new connections (kr_tls_ctx.h): its
 * [upstream]'s when that has ssl = true (as it was at start), else NULL
 * (plain TCP).  Owned by u, valid on u's thread until the next
 * kr_upstream_set_tls or kr_upstream_free; a connection takes its own
 * reference (kr_tls.h does).
 */
struct kr_tls_ctx;
struct kr_tls_ctx *kr_upstream_tls(const struct kr_upstream *u);

/*
 * A reload's context for u's new connections (t: the new config's
 * [upstream] of the same name, borrowed; u takes a reference): only when
 * u speaks TLS already (whether it does is fixed at start).  Connections
 * open keep theirs.  t NULL is a no-op.
 */
void kr_upstream_set_tls(struct kr_upstream *u, struct kr_tls_ctx *t);

/*
 * issue 9: the SASL credentials of u's own metadata connections from now
 * on: uc's [upstream] sasl_* when it originates, else its metadata_sasl_*
 * (none: no authentication).  uc is borrowed: it must live until the
 * next call or kr_upstream_free (the worker passes each reload's
 * section).  NULL: the section u was created with (also before any
 * call).
 */
void kr_upstream_set_sasl(struct kr_upstream *u,
                          const struct kr_upstream_conf *uc);

#endif /* KR_UPSTREAM_H */
