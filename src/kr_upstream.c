/*
 * kr_upstream.c - where the brokers of one upstream cluster are.
 *
 * State per upstream:
 *   - a broker map NodeId -> HOST:PORT with a resolved-address cache,
 *     filled from dial.NODEID overrides (never replaced), from krelay's
 *     own metadata fetches and from Metadata responses seen in client
 *     traffic (kr_upstream_learn);
 *   - the fetch: one connection at a time to a bootstrap server (rotating
 *     on failure) that sends ApiVersions v0 then Metadata at the highest
 *     version both sides know.  Requests are built and responses parsed
 *     with the generic codec.  It runs at start, every
 *     metadata_refresh_ms, and on demand for an unknown NodeId
 *     (coalesced: every resolution waiting for a node is answered when
 *     the fetch in progress, or the next one, ends);
 *   - resolutions in flight: waiting for a fetch, or for evdns.
 *
 * The fetch uses a bufferevent: it is a few small frames every few
 * minutes, not the hot path.  With [upstream] ssl it is an OpenSSL
 * bufferevent with an SSL of the upstream's TLS context
 * (kr_tls_ssl_new: SNI and the certificate checked against the bootstrap
 * host).  That context is the upstream's, replaced by a reload
 * (kr_upstream_set_tls); connections keep the one they started with.
 *
 * TLS names: a broker is checked against the host it advertises.  With a
 * dial.NODEID override krelay connects elsewhere, but the name is still
 * the advertised one (learned from the metadata; the dial host until it
 * is known): the override changes where, not whom.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "kr_api_keys.h"
#include "kr_clock.h"
#include "kr_cluster.h"
#include "kr_codec.h"
#include "kr_frame.h"
#include "kr_log.h"
#include "kr_sasl_client.h"
#include "kr_schema.h"
#include "kr_tls_ctx.h"
#include "kr_topics.h"
#include "kr_upstream.h"

#define KR_UP_APIVERSIONS 18
#define KR_UP_API_KEYS KR_CLUSTER_API_KEYS /* ApiKeys remembered */
#define KR_UP_METADATA 3
#define KR_UP_MAX_BROKERS 4096          /* map size bound */
#define KR_UP_MAX_FRAME (64u << 20)     /* bytes, own fetch responses */
#define KR_UP_DNS_TTL_MS 60000          /* resolved-address cache life */
#define KR_UP_MIN_GAP_MS 250            /* between on-demand fetches */
/*
 * A NodeId still unknown after the fetch it triggered is remembered as
 * unknown this long: a client hammering the port of a NodeId the cluster
 * does not have must not make krelay hammer the cluster with Metadata
 * requests.  KR_UP_NEG_MAX such NodeIds are remembered (oldest replaced).
 */
#define KR_UP_NEG_TTL_MS 5000
#define KR_UP_NEG_MAX 16
#define KR_UP_BACKOFF_MIN_MS 1000       /* after a failed fetch, doubling */
#define KR_UP_BACKOFF_MAX_MS 30000
#define KR_UP_CLIENT_ID "krelay"
/*
 * A periodic fetch another worker's kr_upstream is doing for the same
 * cluster (kr_cluster_fetch_claim): look again this long after, and take
 * the fetch over when that one has not succeeded by then.  A claim is
 * held at most KR_UP_CLAIM_HOLD_MS (a fetch that never ends: a worker
 * stopped mid-fetch).
 */
#define KR_UP_CLAIM_RETRY_MS 1000
#define KR_UP_CLAIM_HOLD_MS 120000

enum kr_up_src { SRC_DIAL = 0, SRC_FETCH, SRC_LEARN };

/* A host:port and its cached address. */
struct kr_uaddr {
    char *host;                         /* malloc'd, no brackets */
    uint16_t port;
    struct sockaddr_storage sa;
    socklen_t salen;                    /* 0: not resolved */
    int64_t resolved_ms;                /* monotonic */
};

struct kr_ubroker {
    int32_t node_id;
    uint8_t src;                        /* enum kr_up_src */
    struct kr_uaddr a;
    char *adv;                          /* a dial override's: the host the
                                           broker advertises (its TLS
                                           name), NULL until seen */
};

enum kr_fetch_state {
    F_IDLE = 0,     /* maybe a periodic refresh_ev pending */
    F_QUEUED,       /* refresh_ev pending for an on-demand fetch */
    F_RESOLVING,
    F_CONNECTING,
    F_APIVERSIONS,
    F_SASL,         /* issue 9: krelay's own SASL exchange */
    F_METADATA
};

struct kr_resolve {
    struct kr_upstream *u;
    int32_t node_id;                    /* or KR_NODE_BOOTSTRAP */
    int bs_index;                       /* bootstrap entry, or -1 */
    kr_resolve_cb cb;
    void *arg;
    uint64_t seq;                       /* fetch it waits for */
    struct evdns_getaddrinfo_request *dnsreq;
    bool waiting;                       /* in u->waiting */
    bool in_dns;                        /* in u->dns_list */
    bool cancelled;
    char *host;                         /* while resolving */
    char *name;                         /* the TLS name when not host (a
                                           dial override's advertised
                                           host), NULL */
    uint16_t port;
    struct kr_resolve *prev, *next;
    char what[288];
};

struct kr_upstream {
    struct event_base *base;
    struct evdns_base *dns;
    const struct kr_upstream_conf *uc;
    char label[80];                     /* "upstream NAME" for logs */

    struct kr_ubroker *brokers;
    int nbrokers, cap;
    struct kr_uaddr *bs;                /* cache per bootstrap server */
    unsigned bs_next;                   /* rotation for resolve() */

    struct kr_resolve *waiting;         /* waiting for a fetch */
    struct kr_resolve *dns_list;        /* waiting for evdns */

    /* the fetch */
    enum kr_fetch_state state;
    uint64_t seq;                       /* fetches started or queued */
    unsigned fetch_bs;                  /* next bootstrap server to try */
    int tries;
    struct kr_resolve *fetch_res;       /* its address lookup */
    struct bufferevent *bev;
    struct event *refresh_ev;           /* start the next fetch */
    struct event *timeout_ev;           /* the current step's deadline */
    int32_t corr;
    int16_t md_version;
    int64_t last_done_ms;
    int64_t last_ok_ms, last_fail_ms;   /* fetches that ended so
                                           (kr_upstream_health) */
    int64_t backoff_ms;
    struct {
        int32_t node_id;
        int64_t until_ms;               /* 0: free slot */
    } neg[KR_UP_NEG_MAX];               /* NodeIds known not to exist */
    unsigned neg_next;
    char fetch_what[288];

    struct kr_topic_map *topics;        /* TopicId -> name (KIP-516) */

    /* the cluster's ApiVersions v0 answer: [MinVersion, MaxVersion] per
       ApiKey (min -1: not offered); have_api once one was seen */
    struct kr_cluster_range api[KR_UP_API_KEYS];
    bool have_api;                      /* (published: kr_cluster_edit_api;
                                           kr_upstream_api_range reads the
                                           cluster view) */
    struct kr_tls_ctx *tls;             /* [upstream] ssl: the context of
                                           new connections (a reference),
                                           NULL: plain TCP */
    /* issue 9: SASL on the metadata connection */
    const struct kr_upstream_conf *sasl_uc; /* whose credentials: the
                                           latest config's section
                                           (kr_upstream_set_sasl) */
    struct kr_sasl_client *sasl;        /* the exchange under way */
    /* issue 12: the process-wide view (kr_cluster.h) */
    struct kr_cluster *cluster;         /* a reference */
    struct kr_cluster_reader reader;    /* this thread's cached snapshot */
    size_t topics_seen;                 /* its TopicId log entries merged
                                           into topics */
    bool claimed;                       /* the fetch under way holds the
                                           cluster's claim */
    bool quiet;                         /* merging the snapshot: no log
                                           line per broker */
    int refs;                           /* kr_upstream_ref; u's thread */
    struct kr_conf_ref *cref;           /* keeps uc's config, or NULL */
};

/* ---- small helpers ---------------------------------------------------- */

static struct timeval
tv_ms(int64_t ms)
{
    struct timeval tv;

    if (ms < 0) {
        ms = 0;
    }
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

static void
fmt_hostport(char *buf, size_t len, const char *host, uint16_t port)
{
    if (strchr(host, ':') != NULL) {
        snprintf(buf, len, "[%s]:%u", host, port);
    } else {
        snprintf(buf, len, "%s:%u", host, port);
    }
}

static void
list_add(struct kr_resolve **head, struct kr_resolve *r)
{
    r->prev = NULL;
    r->next = *head;
    if (*head != NULL) {
        (*head)->prev = r;
    }
    *head = r;
}

static void
list_del(struct kr_resolve **head, struct kr_resolve *r)
{
    if (r->prev != NULL) {
        r->prev->next = r->next;
    } else {
        *head = r->next;
    }
    if (r->next != NULL) {
        r->next->prev = r->prev;
    }
    r->prev = r->next = NULL;
}

static void
resolve_free(struct kr_resolve *r)
{
    free(r->host);
    free(r->name);
    free(r);
}

/* The name the callback gets (TLS: SNI and the certificate check). */
static const char *
tls_name(const struct kr_resolve *r)
{
    return r->name != NULL ? r->name : r->host;
}

/* ---- broker map ------------------------------------------------------- */

static struct kr_ubroker *
broker_find(const struct kr_upstream *u, int32_t node_id)
{
    int i;

    for (i = 0; i < u->nbrokers; i++) {
        if (u->brokers[i].node_id == node_id) {
            return &u->brokers[i];
        }
    }
    return NULL;
}

/*
 * Record NodeId node_id at host[0..hlen):port from source src.  A dial
 * override is never replaced by what a broker says.  Returns true when
 * the map changed.
 */
static bool
broker_set(struct kr_upstream *u, int32_t node_id, const char *host,
           size_t hlen, int64_t port, enum kr_up_src src)
{
    static const char *srcname[] = { "dial override", "metadata",
                                     "client metadata" };
    struct kr_ubroker *b;
    char *h, hp[300];
    size_t i;

    if (node_id < 0 || port <= 0 || port > 65535 || hlen == 0 ||
        hlen > 255) {
        kr_log_rl(KR_LOG_WARN, "%s: ignoring broker NodeId %d with bad "
                  "address (%zu-byte host, port %lld) from %s", u->label,
                  node_id, hlen, (long long)port, srcname[src]);
        return false;
    }
    for (i = 0; i < hlen; i++) {
        if (host[i] == '/' || (unsigned char)host[i] <= ' ') {
            kr_log_rl(KR_LOG_WARN, "%s: ignoring broker NodeId %d: bad "
                      "character in host name from %s", u->label, node_id,
                      srcname[src]);
            return false;
        }
    }
    b = broker_find(u, node_id);
    if (b != NULL) {
        if (b->src == SRC_DIAL && src != SRC_DIAL) {
            /* where it is stays the override's; whom: its TLS name */
            if (b->adv == NULL || strlen(b->adv) != hlen ||
                memcmp(b->adv, host, hlen) != 0) {
                char *adv = strndup(host, hlen);

                if (adv != NULL) {
                    free(b->adv);
                    b->adv = adv;
                }
            }
            return false;
        }
        if (b->a.port == (uint16_t)port && strlen(b->a.host) == hlen &&
            memcmp(b->a.host, host, hlen) == 0) {
            b->src = (uint8_t)src;
            return false;
        }
    } else {
        if (u->nbrokers >= KR_UP_MAX_BROKERS) {
            kr_log_rl(KR_LOG_WARN, "%s: more than %d brokers, ignoring "
                      "NodeId %d", u->label, KR_UP_MAX_BROKERS, node_id);
            return false;
        }
        if (u->nbrokers == u->cap) {
            int ncap = u->cap ? u->cap * 2 : 16;
            struct kr_ubroker *nb = realloc(u->brokers,
                                            (size_t)ncap * sizeof(*nb));

            if (nb == NULL) {
                return false;
            }
            u->brokers = nb;
            u->cap = ncap;
        }
        b = &u->brokers[u->nbrokers];
        memset(b, 0, sizeof(*b));
        b->node_id = node_id;
    }
    h = malloc(hlen + 1);
    if (h == NULL) {
        return false;
    }
    memcpy(h, host, hlen);
    h[hlen] = '\0';
    fmt_hostport(hp, sizeof(hp), h, (uint16_t)port);
    if (u->quiet) {
        /* merged from the cluster view: its publisher said it */
    } else if (b->a.host != NULL) {
        kr_log_info("%s: NodeId %d moved from %s:%u to %s (%s)", u->label,
                    node_id, b->a.host, b->a.port, hp, srcname[src]);
    } else {
        kr_log_info("%s: NodeId %d at %s (%s)", u->label, node_id, hp,
                    srcname[src]);
    }
    if (b == &u->brokers[u->nbrokers]) {
        u->nbrokers++;
    }
    free(b->a.host);
    b->a.host = h;
    b->a.port = (uint16_t)port;
    b->a.salen = 0;
    b->src = (uint8_t)src;
    return true;
}

/*
 * What learn_node does with each endpoint: record it in u's own map
 * (LEARN_LOCAL), publish it into the cluster view's edit (LEARN_PUBLISH),
 * or only see whether the view u read last lacks it (LEARN_CHECK: sets
 * *differs).
 */
enum kr_up_learn { LEARN_LOCAL, LEARN_PUBLISH, LEARN_CHECK };

struct kr_up_walk {
    struct kr_upstream *u;
    enum kr_up_src src;
    enum kr_up_learn mode;
    struct kr_cluster_edit *edit;       /* LEARN_PUBLISH */
    const struct kr_cluster_snap *snap; /* LEARN_CHECK */
    bool differs;
};

/* Is NodeId id at host[0..hlen):port in snapshot s? */
static bool
snap_has(const struct kr_cluster_snap *s, int32_t id, const char *host,
         size_t hlen, int64_t port)
{
    int lo = 0, hi = s->nbrokers;

    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const struct kr_cluster_broker *b = &s->brokers[mid];

        if (b->node_id == id) {
            return b->port == port && strlen(b->host) == hlen &&
                   memcmp(b->host, host, hlen) == 0;
        }
        if (b->node_id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return false;
}

static void
learn_endpoint(struct kr_up_walk *w, int32_t id, const char *host,
               size_t hlen, int64_t port)
{
    switch (w->mode) {
    case LEARN_LOCAL:
        broker_set(w->u, id, host, hlen, port, w->src);
        break;
    case LEARN_PUBLISH:
        if (port > 0 && port <= 65535) {
            (void)kr_cluster_edit_broker(w->edit, id, host, hlen,
                                         (uint16_t)port,
                                         w->src == SRC_FETCH);
        }
        break;
    case LEARN_CHECK:
        if (!snap_has(w->snap, id, host, hlen, port)) {
            w->differs = true;
        }
        break;
    }
}

/*
 * Every endpoint struct in a decoded body: at the root or in a
 * struct/array field whose element is an endpoint struct (Metadata
 * Brokers, FindCoordinator, Coordinators, DescribeCluster Brokers,
 * NodeEndpoints).  Big non-endpoint arrays (Topics) are not walked.
 */
static void
learn_node(struct kr_up_walk *w, const struct kr_node *n, int depth)
{
    const struct kr_struct_desc *sd;
    uint16_t i;

    if (n == NULL || n->struct_id >= kr_nstructs || depth > 2) {
        return;
    }
    sd = &kr_structs[n->struct_id];
    if ((sd->flags & KR_SF_ENDPOINT) && sd->ep_node >= 0 &&
        sd->ep_host >= 0 && sd->ep_port >= 0 && sd->ep_node < sd->nfields &&
        sd->ep_host < sd->nfields && sd->ep_port < sd->nfields) {
        const struct kr_val *id = &n->vals[sd->ep_node];
        const struct kr_val *h = &n->vals[sd->ep_host];
        const struct kr_val *p = &n->vals[sd->ep_port];

        if (id->present && h->present && p->present && !h->is_null &&
            h->u.s.len > 0 && id->u.i >= 0) {
            learn_endpoint(w, (int32_t)id->u.i, (const char *)h->u.s.p,
                           (size_t)h->u.s.len, p->u.i);
        }
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];
        uint32_t j;

        if (!v->present || v->is_null || f->struct_id >= kr_nstructs ||
            !(kr_structs[f->struct_id].flags & KR_SF_ENDPOINT)) {
            continue;
        }
        if (f->type == KR_T_STRUCT) {
            learn_node(w, v->u.node, depth + 1);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
                   v->u.arr != NULL) {
            for (j = 0; j < v->u.arr->n; j++) {
                if (!v->u.arr->items[j].is_null) {
                    learn_node(w, v->u.arr->items[j].u.node, depth + 1);
                }
            }
        }
    }
}

/*
 * Merge what the cluster view has that u has not seen (another worker's
 * learning, or u's own published): brokers (dial overrides stay), the
 * TopicId log entries past topics_seen.  One atomic load when nothing
 * moved.  Call before reading u's maps (kr_upstream_resolve, _topics).
 */
static const struct kr_cluster_snap *
sync_view(struct kr_upstream *u)
{
    bool changed;
    const struct kr_cluster_snap *s = kr_cluster_read(&u->reader, &changed);
    int i;

    if (!changed) {
        return s;
    }
    u->quiet = true;
    for (i = 0; i < s->nbrokers; i++) {
        const struct kr_cluster_broker *b = &s->brokers[i];

        broker_set(u, b->node_id, b->host, strlen(b->host), b->port,
                   b->fetched ? SRC_FETCH : SRC_LEARN);
    }
    u->quiet = false;
    for (; u->topics != NULL && u->topics_seen < s->ntopics;
         u->topics_seen++) {
        const uint8_t *id;
        const char *name;

        kr_cluster_topic_at(u->cluster, u->topics_seen, &id, &name);
        (void)kr_topic_map_put(u->topics, id, name, strlen(name));
    }
    return s;
}

/* kr_topics_metadata_each: a pair u's map lacks is put there, and
   marked for publishing. */
static void
topic_local_cb(void *arg, const uint8_t id[16], const char *name, size_t len)
{
    struct kr_up_walk *w = arg;
    const char *known = kr_topic_map_name(w->u->topics, id);

    if (known != NULL && strlen(known) == len &&
        memcmp(known, name, len) == 0) {
        return;
    }
    (void)kr_topic_map_put(w->u->topics, id, name, len);
    w->differs = true;
}

/*
 * Learn body (a Metadata response, or any response with endpoints) into
 * u's own maps, and publish into the cluster view what it did not have:
 * the mutex is taken only when something is new to it (a client's
 * Metadata response repeats what is known, nearly always).
 */
static void
learn_body(struct kr_upstream *u, const struct kr_node *body,
           int16_t api_key, int16_t api_version, enum kr_up_src src)
{
    struct kr_up_walk w;
    struct kr_cluster_edit e;
    struct kr_msg m;
    bool new_brokers, new_topics = false;

    memset(&w, 0, sizeof(w));
    w.u = u;
    w.src = src;
    w.snap = sync_view(u);
    w.mode = LEARN_LOCAL;
    learn_node(&w, body, 0);
    w.mode = LEARN_CHECK;
    learn_node(&w, body, 0);
    new_brokers = w.differs;
    memset(&m, 0, sizeof(m));
    m.dir = KR_DIR_RESPONSE;
    m.api_key = api_key;
    m.api_version = api_version;
    m.body = (struct kr_node *)body;
    if (u->topics != NULL) {
        w.differs = false;
        kr_topics_metadata_each(&m, topic_local_cb, &w);
        new_topics = w.differs;
    }
    if (!new_brokers && !new_topics) {
        return;
    }
    kr_cluster_edit_begin(&e, u->cluster);
    if (new_brokers) {
        w.mode = LEARN_PUBLISH;
        w.edit = &e;
        learn_node(&w, body, 0);
    }
    if (new_topics) {
        (void)kr_cluster_edit_topics(&e, &m);
    }
    (void)kr_cluster_edit_end(&e);
}

void
kr_upstream_learn(struct kr_upstream *u, const struct kr_node *body,
                  int16_t api_key, int16_t api_version)
{
    if (u == NULL || body == NULL) {
        return;
    }
    learn_body(u, body, api_key, api_version, SRC_LEARN);
}

const struct kr_topic_map *
kr_upstream_topics(const struct kr_upstream *u)
{
    if (u == NULL) {
        return NULL;
    }
    /* the map is u's own; what others learned is merged into it */
    (void)sync_view((struct kr_upstream *)u);
    return u->topics;
}

bool
kr_upstream_api_range(const struct kr_upstream *u, int16_t api_key,
                      int16_t *min, int16_t *max)
{
    const struct kr_cluster_snap *s;

    if (u == NULL || api_key < 0 || api_key >= KR_CLUSTER_API_KEYS) {
        return false;
    }
    s = sync_view((struct kr_upstream *)u);
    if (!s->have_api || s->api[api_key].min < 0) {
        return false;
    }
    *min = s->api[api_key].min;
    *max = s->api[api_key].max;
    return true;
}

int
kr_upstream_nbrokers(const struct kr_upstream *u)
{
    if (u == NULL) {
        return 0;
    }
    (void)sync_view((struct kr_upstream *)u);
    return u->nbrokers;
}

/* ---- address resolution ----------------------------------------------- */

/* The cache entry r's answer belongs to, if it still names r's address. */
static struct kr_uaddr *
cache_for(struct kr_upstream *u, const struct kr_resolve *r)
{
    struct kr_uaddr *a = NULL;

    if (u == NULL || r->host == NULL) {
        return NULL;
    }
    if (r->bs_index >= 0 && r->bs_index < u->uc->nbootstrap) {
        a = &u->bs[r->bs_index];
    } else if (r->node_id >= 0) {
        struct kr_ubroker *b = broker_find(u, r->node_id);

        a = b != NULL ? &b->a : NULL;
    }
    if (a == NULL || a->host == NULL || a->port != r->port ||
        strcmp(a->host, r->host) != 0) {
        return NULL;
    }
    return a;
}

static void
cache_store(struct kr_upstream *u, const struct kr_resolve *r,
            const struct sockaddr *sa, socklen_t len)
{
    struct kr_uaddr *a = cache_for(u, r);

    if (a == NULL || len > (socklen_t)sizeof(a->sa)) {
        return;
    }
    memcpy(&a->sa, sa, len);
    a->salen = len;
    a->resolved_ms = kr_clock_mono_ms();
}

/* Numeric IPv4/IPv6 host: fill ss without DNS. */
static bool
parse_numeric(const char *host, uint16_t port, struct sockaddr_storage *ss,
              socklen_t *len)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (evutil_inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        *len = sizeof(*s4);
        return true;
    }
    if (evutil_inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        *len = sizeof(*s6);
        return true;
    }
    return false;
}

static void
dns_cb(int result, struct evutil_addrinfo *ai, void *arg)
{
    struct kr_resolve *r = arg;
    struct kr_upstream *u = r->u;

    r->dnsreq = NULL;
    if (r->cancelled || result == EVUTIL_EAI_CANCEL) {
        /* cancel already unlinked it */
        if (ai != NULL) {
            evutil_freeaddrinfo(ai);
        }
        if (!r->cancelled && u != NULL && r->in_dns) {
            list_del(&u->dns_list, r);
        }
        resolve_free(r);
        return;
    }
    if (r->in_dns) {
        list_del(&u->dns_list, r);
        r->in_dns = false;
    }
    if (result != 0 || ai == NULL) {
        kr_log_rl(KR_LOG_WARN, "%s: cannot resolve %s: %s", u->label,
                  r->what, evutil_gai_strerror(result));
        r->cb(r->arg, KR_ERROR, NULL, 0, tls_name(r), r->what);
    } else {
        cache_store(u, r, ai->ai_addr, (socklen_t)ai->ai_addrlen);
        r->cb(r->arg, KR_OK, ai->ai_addr, (socklen_t)ai->ai_addrlen,
              tls_name(r), r->what);
    }
    if (ai != NULL) {
        evutil_freeaddrinfo(ai);
    }
    resolve_free(r);
}

/*
 * Look up host:port for r (owned by this call from now on).  Returns r
 * while evdns works on it, or NULL when r's callback already ran and r
 * is freed.
 */
static struct kr_resolve *
lookup(struct kr_upstream *u, struct kr_resolve *r, const char *host,
       uint16_t port)
{
    struct evutil_addrinfo hints;
    struct evdns_getaddrinfo_request *q;
    struct sockaddr_storage ss;
    struct kr_uaddr *a;
    socklen_t len;
    char portstr[8];

    r->host = strdup(host);
    r->port = port;
    if (r->host == NULL) {
        r->cb(r->arg, KR_ERROR, NULL, 0, tls_name(r), r->what);
        resolve_free(r);
        return NULL;
    }
    fmt_hostport(r->what, sizeof(r->what), host, port);
    a = cache_for(u, r);
    if (a != NULL && a->salen > 0 &&
        kr_clock_mono_ms() - a->resolved_ms < KR_UP_DNS_TTL_MS) {
        memcpy(&ss, &a->sa, a->salen);
        r->cb(r->arg, KR_OK, (struct sockaddr *)&ss, a->salen, tls_name(r),
              r->what);
        resolve_free(r);
        return NULL;
    }
    if (parse_numeric(host, port, &ss, &len)) {
        cache_store(u, r, (struct sockaddr *)&ss, len);
        r->cb(r->arg, KR_OK, (struct sockaddr *)&ss, len, tls_name(r),
              r->what);
        resolve_free(r);
        return NULL;
    }
    if (u->dns == NULL) {
        kr_log_rl(KR_LOG_WARN, "%s: cannot resolve %s: no DNS resolver",
                  u->label, r->what);
        r->cb(r->arg, KR_ERROR, NULL, 0, tls_name(r), r->what);
        resolve_free(r);
        return NULL;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
    snprintf(portstr, sizeof(portstr), "%u", port);
    list_add(&u->dns_list, r);
    r->in_dns = true;
    q = evdns_getaddrinfo(u->dns, host, portstr, &hints, dns_cb, r);
    if (q == NULL) {
        return NULL;            /* dns_cb ran and freed r */
    }
    r->dnsreq = q;
    return r;
}

static struct kr_resolve *
resolve_new(struct kr_upstream *u, int32_t node_id, kr_resolve_cb cb,
            void *arg)
{
    struct kr_resolve *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    r->u = u;
    r->node_id = node_id;
    r->bs_index = -1;
    r->cb = cb;
    r->arg = arg;
    snprintf(r->what, sizeof(r->what), "node %d", node_id);
    return r;
}

static struct kr_resolve *
lookup_bootstrap(struct kr_upstream *u, struct kr_resolve *r, int idx)
{
    r->bs_index = idx;
    return lookup(u, r, u->uc->bootstrap[idx].host,
                  u->uc->bootstrap[idx].port);
}

static void fetch_queue(struct kr_upstream *u);

/* True when node_id was found missing by a fetch less than a TTL ago. */
static bool
neg_find(struct kr_upstream *u, int32_t node_id)
{
    int64_t now = kr_clock_mono_ms();
    int i;

    for (i = 0; i < KR_UP_NEG_MAX; i++) {
        if (u->neg[i].until_ms > now && u->neg[i].node_id == node_id) {
            return true;
        }
    }
    return false;
}

static void
neg_add(struct kr_upstream *u, int32_t node_id)
{
    int64_t until = kr_clock_mono_ms() + KR_UP_NEG_TTL_MS;
    int i;

    for (i = 0; i < KR_UP_NEG_MAX; i++) {
        if (u->neg[i].until_ms != 0 && u->neg[i].node_id == node_id) {
            u->neg[i].until_ms = until;
            return;
        }
    }
    i = (int)(u->neg_next++ % KR_UP_NEG_MAX);
    u->neg[i].node_id = node_id;
    u->neg[i].until_ms = until;
}

struct kr_resolve *
kr_upstream_resolve(struct kr_upstream *u, int32_t node_id,
                    kr_resolve_cb cb, void *arg)
{
    struct kr_ubroker *b;
    struct kr_resolve *r = resolve_new(u, node_id, cb, arg);

    if (r == NULL) {
        cb(arg, KR_ERROR, NULL, 0, NULL, "out of memory");
        return NULL;
    }
    if (node_id == KR_NODE_BOOTSTRAP) {
        int idx = (int)(u->bs_next++ % (unsigned)u->uc->nbootstrap);

        return lookup_bootstrap(u, r, idx);
    }
    (void)sync_view(u);                 /* what another worker learned */
    b = broker_find(u, node_id);
    if (b != NULL) {
        if (b->src == SRC_DIAL && b->adv != NULL &&
            (r->name = strdup(b->adv)) == NULL) {
            cb(arg, KR_ERROR, NULL, 0, NULL, "out of memory");
            resolve_free(r);
            return NULL;
        }
        return lookup(u, r, b->a.host, b->a.port);
    }
    if (neg_find(u, node_id)) {
        /* A fetch it triggered moments ago did not find it. */
        kr_log_rl(KR_LOG_WARN, "%s: NodeId %d is not in the cluster's "
                  "metadata (checked less than %d ms ago)", u->label,
                  node_id, KR_UP_NEG_TTL_MS);
        r->cb(r->arg, KR_ERROR, NULL, 0, tls_name(r), r->what);
        resolve_free(r);
        return NULL;
    }
    /* Unknown: wait for a fetch (the one running, or a new one). */
    if (u->state == F_IDLE) {
        fetch_queue(u);
    }
    r->seq = u->seq;
    r->waiting = true;
    list_add(&u->waiting, r);
    return r;
}

void
kr_upstream_resolve_cancel(struct kr_resolve *r)
{
    struct kr_upstream *u;

    if (r == NULL) {
        return;
    }
    u = r->u;
    if (r->waiting) {
        list_del(&u->waiting, r);
        resolve_free(r);
        return;
    }
    if (r->dnsreq != NULL) {
        /* dns_cb frees r, now or later, without calling back. */
        if (r->in_dns && u != NULL) {
            list_del(&u->dns_list, r);
        }
        r->in_dns = false;
        r->cancelled = true;
        evdns_getaddrinfo_cancel(r->dnsreq);
    }
}

/* ---- the fetch -------------------------------------------------------- */

static void fetch_next(struct kr_upstream *u);
static void fetch_done(struct kr_upstream *u, bool ok);

/* Ask for a fetch soon (not sooner than KR_UP_MIN_GAP_MS after the last). */
static void
fetch_queue(struct kr_upstream *u)
{
    int64_t wait = 0;

    if (u->state != F_IDLE) {
        return;
    }
    if (u->last_done_ms != 0) {
        wait = u->last_done_ms + KR_UP_MIN_GAP_MS - kr_clock_mono_ms();
    }
    u->seq++;
    u->state = F_QUEUED;
    {
        struct timeval tv = tv_ms(wait);

        event_add(u->refresh_ev, &tv);
    }
}

static void
fetch_close(struct kr_upstream *u)
{
    if (u->fetch_res != NULL) {
        kr_upstream_resolve_cancel(u->fetch_res);
        u->fetch_res = NULL;
    }
    if (u->bev != NULL) {
        bufferevent_free(u->bev);
        u->bev = NULL;
    }
    kr_sasl_client_free(u->sasl);
    u->sasl = NULL;
    event_del(u->timeout_ev);
}

static void
fetch_fail(struct kr_upstream *u, const char *why)
{
    kr_log_rl(KR_LOG_WARN, "%s: metadata fetch from %s failed: %s",
              u->label, u->fetch_what, why);
    fetch_close(u);
    fetch_next(u);
}

static void
arm_timeout(struct kr_upstream *u, int64_t ms)
{
    struct timeval tv = tv_ms(ms > 0 ? ms : 1000);

    event_add(u->timeout_ev, &tv);
}

/* Encode and send one request with an empty-default body. */
static int
send_request(struct kr_upstream *u, int16_t key, int16_t ver)
{
    const struct kr_api_desc *a = kr_api_get(key);
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_wbuf w;
    struct kr_msg m;
    struct kr_val *v;
    uint8_t pre[4];
    int rc;

    memset(&w, 0, sizeof(w));
    kr_arena_init(&arena, 0);
    rc = kr_msg_request_new(&arena, &m, key, ver, ++u->corr, KR_UP_CLIENT_ID);
    if (rc != KR_OK) {
        rc = KR_ERROR;
        goto out;
    }
    if (key == KR_UP_METADATA) {
        /* All topics: null array from v1, empty array in v0. */
        v = kr_node_get_id(m.body, KR_FIELD_TOPICS);
        if (v != NULL && ver >= 1) {
            v->is_null = 1;
            v->u.arr = NULL;
        }
        v = kr_node_get_id(m.body, KR_FIELD_ALLOW_AUTO_TOPIC_CREATION);
        if (v != NULL) {
            v->u.i = 0;
        }
    }
    rc = kr_encode_msg(&m, &w, &ce);
    if (rc != KR_OK || w.failed || w.nrecs != 0) {
        kr_log_rl(KR_LOG_WARN, "%s: cannot encode %s v%d request: %s",
                  u->label, a->name, ver, rc != KR_OK ? ce.msg : "ENOMEM");
        rc = KR_ERROR;
        goto out;
    }
    kr_frame_put_size(pre, w.len);
    if (bufferevent_write(u->bev, pre, 4) != 0 ||
        bufferevent_write(u->bev, w.buf, w.len) != 0) {
        rc = KR_ENOMEM;
    }
out:
    kr_wbuf_free(&w);
    kr_arena_free(&arena);
    return rc;
}

/* ---- issue 9: SASL on the metadata connection ------------------------- */

static void send_metadata(struct kr_upstream *u);

/* The credentials of krelay's own connections: origination's, else
   metadata_sasl_*'s; NULL: none. */
static const struct kr_sasl_cred *
sasl_creds(const struct kr_upstream *u)
{
    const struct kr_upstream_conf *uc = u->sasl_uc != NULL ? u->sasl_uc
                                                           : u->uc;

    if (uc->sasl.mechanism != 0) {
        return &uc->sasl;
    }
    if (uc->metadata_sasl.mechanism != 0) {
        return &uc->metadata_sasl;
    }
    return NULL;
}

/* Write the exchange's current request (size prefix, frame). */
static int
sasl_send(struct kr_upstream *u)
{
    const struct kr_sasl_client_req *r = kr_sasl_client_request(u->sasl);
    uint8_t pre[4];

    kr_frame_put_size(pre, r->len);
    if (bufferevent_write(u->bev, pre, 4) != 0 ||
        bufferevent_write(u->bev, r->frame, r->len) != 0) {
        return KR_ENOMEM;
    }
    arm_timeout(u, u->uc->request_timeout_margin_ms);
    return KR_OK;
}

/* A failed exchange: one line (mechanism, user, the broker's words). */
static void
sasl_fail(struct kr_upstream *u, enum kr_sasl_client_outcome o)
{
    const struct kr_sasl_cred *c = sasl_creds(u);
    char why[600];

    snprintf(why, sizeof(why), "SASL %s%s%s%s: %s: %s",
             kr_sasl_mechanism_name(c->mechanism),
             c->username != NULL ? " as \"" : "",
             c->username != NULL ? c->username : "",
             c->username != NULL ? "\"" : "",
             kr_sasl_client_outcome_str(o),
             u->sasl != NULL ? kr_sasl_client_message(u->sasl)
                             : "out of memory");
    fetch_fail(u, why);
}

/* Authenticate the fetch connection before its Metadata request. */
static void
sasl_start(struct kr_upstream *u)
{
    const struct kr_sasl_cred *c = sasl_creds(u);
    struct kr_sasl_client_creds cr;
    enum kr_sasl_client_outcome o;
    int16_t amax = u->api[KR_API_SASL_AUTHENTICATE].min >= 0
                       ? u->api[KR_API_SASL_AUTHENTICATE].max : -1;

    memset(&cr, 0, sizeof(cr));
    cr.mechanism = (enum kr_sasl_mechanism)c->mechanism;
    cr.username = c->username;
    cr.password = c->secret;
    cr.password_len = c->secret_len;
    cr.token_file = c->token_file;
    cr.token = c->token;
    kr_sasl_client_free(u->sasl);
    /* amax -1 (no SaslAuthenticate in its ApiVersions): the exchange
       asks again and names what is missing */
    u->sasl = kr_sasl_client_new(&cr, amax, u->corr + 1);
    if (u->sasl == NULL) {
        sasl_fail(u, KR_SASL_CLIENT_ENOMEM);
        return;
    }
    o = kr_sasl_client_start(u->sasl);
    if (o != KR_SASL_CLIENT_SEND) {
        sasl_fail(u, o);
        return;
    }
    if (sasl_send(u) != KR_OK) {
        fetch_fail(u, "cannot send a SASL request");
        return;
    }
    u->state = F_SASL;
}

/* A response of the exchange (len bytes at p, without size prefix). */
static void
on_sasl(struct kr_upstream *u, const uint8_t *p, size_t len)
{
    enum kr_sasl_client_outcome o = kr_sasl_client_feed(u->sasl, p, len);

    if (o == KR_SASL_CLIENT_SEND) {
        if (sasl_send(u) != KR_OK) {
            fetch_fail(u, "cannot send a SASL request");
        }
        return;
    }
    if (o != KR_SASL_CLIENT_DONE) {
        sasl_fail(u, o);
        return;
    }
    kr_log_debug("%s: metadata connection to %s SASL authenticated (%s)",
                 u->label, u->fetch_what,
                 kr_sasl_mechanism_name(sasl_creds(u)->mechanism));
    u->corr += 8;                       /* past the exchange's (at most 4) */
    kr_sasl_client_free(u->sasl);
    u->sasl = NULL;
    send_metadata(u);
}

void
kr_upstream_set_sasl(struct kr_upstream *u, const struct kr_upstream_conf *uc)
{
    if (u != NULL) {
        u->sasl_uc = uc;
    }
}

/* The ApiVersions v0 answer: pick the Metadata version. */
static void
on_api_versions(struct kr_upstream *u, const struct kr_msg *m)
{
    const struct kr_api_desc *md = kr_api_get(KR_UP_METADATA);
    struct kr_val *ec = kr_node_get_id(m->body, KR_FIELD_ERROR_CODE);
    struct kr_val *keys = kr_node_get_id(m->body, KR_FIELD_API_KEYS);
    char why[128];
    uint32_t i;

    if (ec != NULL && ec->u.i != 0) {
        snprintf(why, sizeof(why), "ApiVersions ErrorCode %d",
                 (int)ec->u.i);
        fetch_fail(u, why);
        return;
    }
    u->md_version = -1;
    for (i = 0; i < KR_UP_API_KEYS; i++) {
        u->api[i].min = u->api[i].max = -1;
    }
    u->have_api = keys != NULL && keys->u.arr != NULL;
    for (i = 0; keys != NULL && keys->u.arr != NULL && i < keys->u.arr->n;
         i++) {
        struct kr_node *e = keys->u.arr->items[i].u.node;
        struct kr_val *k, *lo, *hi;

        if (e == NULL) {
            continue;
        }
        k = kr_node_get_id(e, KR_FIELD_API_KEY);
        lo = kr_node_get_id(e, KR_FIELD_MIN_VERSION);
        hi = kr_node_get_id(e, KR_FIELD_MAX_VERSION);
        if (k == NULL || lo == NULL || hi == NULL) {
            continue;
        }
        if (k->u.i >= 0 && k->u.i < KR_UP_API_KEYS && lo->u.i >= 0 &&
            lo->u.i <= hi->u.i && hi->u.i <= INT16_MAX) {
            u->api[k->u.i].min = (int16_t)lo->u.i;
            u->api[k->u.i].max = (int16_t)hi->u.i;
        }
        if (k->u.i != KR_UP_METADATA) {
            continue;
        }
        {
            int64_t v = hi->u.i < md->valid.hi ? hi->u.i : md->valid.hi;

            if (v >= lo->u.i && v >= md->valid.lo) {
                u->md_version = (int16_t)v;
            }
        }
    }
    if (u->have_api) {
        struct kr_cluster_edit e;

        kr_cluster_edit_begin(&e, u->cluster);
        (void)kr_cluster_edit_api(&e, u->api);
        (void)kr_cluster_edit_end(&e);
    }
    if (u->md_version < 0) {
        fetch_fail(u, "no Metadata version in common");
        return;
    }
    if (sasl_creds(u) != NULL) {
        sasl_start(u);
        return;
    }
    send_metadata(u);
}

/* The Metadata request, once the connection may send it. */
static void
send_metadata(struct kr_upstream *u)
{
    if (send_request(u, KR_UP_METADATA, u->md_version) != KR_OK) {
        fetch_fail(u, "cannot send Metadata request");
        return;
    }
    u->state = F_METADATA;
    arm_timeout(u, u->uc->request_timeout_margin_ms);
}

static void
on_metadata(struct kr_upstream *u, const struct kr_msg *m)
{
    struct kr_val *brokers = kr_node_get_id(m->body, KR_FIELD_BROKERS);
    int before;
    unsigned n = 0;

    if (brokers != NULL && brokers->u.arr != NULL) {
        n = brokers->u.arr->n;
    }
    (void)sync_view(u);
    before = u->nbrokers;
    learn_body(u, m->body, m->api_key, m->api_version, SRC_FETCH);
    kr_log_info("%s: Metadata v%d from %s: %u brokers (%d known, %d new)",
                u->label, m->api_version, u->fetch_what, n, u->nbrokers,
                u->nbrokers - before);
    fetch_done(u, true);
}

static void
fetch_read_cb(struct bufferevent *bev, void *arg)
{
    struct kr_upstream *u = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    while (u->bev == bev) {
        size_t avail = evbuffer_get_length(in);
        uint8_t pre[4], *p;
        uint32_t size;
        struct kr_codec_err ce;
        struct kr_arena arena;
        struct kr_rbuf rb;
        struct iovec iov;
        struct kr_msg m;
        int16_t key, ver;
        int rc;
        char why[400];

        if (avail < 4) {
            return;
        }
        evbuffer_copyout(in, pre, 4);
        size = (uint32_t)pre[0] << 24 | (uint32_t)pre[1] << 16 |
               (uint32_t)pre[2] << 8 | pre[3];
        if (size < 4 || size > KR_UP_MAX_FRAME) {
            snprintf(why, sizeof(why), "bad response size %u", size);
            fetch_fail(u, why);
            return;
        }
        if (avail - 4 < size) {
            return;
        }
        p = evbuffer_pullup(in, (ev_ssize_t)size + 4);
        if (p == NULL) {
            fetch_fail(u, "out of memory");
            return;
        }
        if (u->state == F_SASL) {
            /* the exchange decodes its own responses */
            on_sasl(u, p + 4, size);
            if (u->bev == bev) {
                evbuffer_drain(in, (size_t)size + 4);
            }
            continue;
        }
        key = u->state == F_APIVERSIONS ? KR_UP_APIVERSIONS : KR_UP_METADATA;
        ver = u->state == F_APIVERSIONS ? 0 : u->md_version;
        if (u->state != F_APIVERSIONS && u->state != F_METADATA) {
            fetch_fail(u, "unexpected response");
            return;
        }
        kr_arena_init(&arena, 0);
        memset(&ce, 0, sizeof(ce));
        kr_rbuf_init_flat(&rb, &iov, p + 4, size);
        /* Tolerant: librdkafka 2.12's mock adds a byte to Metadata v9+. */
        rc = kr_decode_response(&arena, &rb, key, ver, 0, &m, &ce);
        if (rc != KR_OK) {
            snprintf(why, sizeof(why), "%s v%d response: %.120s at %.200s",
                     key == KR_UP_METADATA ? "Metadata" : "ApiVersions",
                     ver, ce.msg, ce.path[0] ? ce.path : "?");
        } else if (m.correlation_id != u->corr) {
            snprintf(why, sizeof(why), "CorrelationId %d, expected %d",
                     m.correlation_id, u->corr);
            rc = KR_EPROTO;
        }
        if (rc != KR_OK) {
            kr_arena_free(&arena);
            fetch_fail(u, why);
            return;
        }
        if (u->state == F_APIVERSIONS) {
            on_api_versions(u, &m);
        } else {
            on_metadata(u, &m);
        }
        kr_arena_free(&arena);
        if (u->bev == bev) {
            evbuffer_drain(in, (size_t)size + 4);
        }
    }
}

/* Why a TLS fetch connection failed: the certificate check, or OpenSSL's
   first error, or the socket's. */
static void
fetch_tls_why(struct bufferevent *bev, char *why, size_t len)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = bufferevent_get_openssl_error(bev);

    while (bufferevent_get_openssl_error(bev) != 0) {
    }
    if (vr != X509_V_OK) {
        snprintf(why, len, "TLS: certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
    } else if (e != 0 && ERR_reason_error_string(e) != NULL) {
        snprintf(why, len, "TLS: %s", ERR_reason_error_string(e));
    } else {
        snprintf(why, len, "%s",
                 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    }
}

/*
 * True when a TLS fetch connection that ended before it was up failed at
 * the TCP level: libevent starts the handshake when the socket turns
 * writable without asking whether connect(2) succeeded, so a refused
 * connect surfaces as the handshake's failed write, reported as the end
 * of the connection (BEV_EVENT_EOF: a dirty shutdown).  A socket with no
 * peer then (ENOTCONN: connect refused, unreachable, or the connection
 * reset) failed, and err, errno of the call that failed, says why (as
 * the plaintext path's BEV_EVENT_ERROR does); a broker that closed the
 * connection during the handshake leaves the peer in place.
 */
static bool
fetch_tcp_failed(struct bufferevent *bev, int err)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd = bufferevent_getfd(bev);

    if (err == 0 || err == EAGAIN || err == EWOULDBLOCK ||
        err == EINPROGRESS || fd < 0) {
        return false;
    }
    return getpeername(fd, (struct sockaddr *)&ss, &len) != 0 &&
           errno == ENOTCONN;
}

static void
fetch_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct kr_upstream *u = arg;
    int err = EVUTIL_SOCKET_ERROR();    /* first: the failed call's */
    char why[300];

    if (bev != u->bev) {
        return;
    }
    if (what & BEV_EVENT_CONNECTED) {
        if (send_request(u, KR_UP_APIVERSIONS, 0) != KR_OK) {
            fetch_fail(u, "cannot send ApiVersions request");
            return;
        }
        u->state = F_APIVERSIONS;
        arm_timeout(u, u->uc->request_timeout_margin_ms);
        return;
    }
    if ((what & BEV_EVENT_EOF) && u->tls != NULL &&
        u->state == F_CONNECTING && fetch_tcp_failed(bev, err)) {
        snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(err));
    } else if (what & BEV_EVENT_EOF) {
        snprintf(why, sizeof(why), "connection closed by the broker");
    } else if (u->tls != NULL) {
        fetch_tls_why(bev, why, sizeof(why));
    } else {
        snprintf(why, sizeof(why), "%s",
                 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    }
    fetch_fail(u, why);
}

static void
fetch_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_upstream *u = arg;

    (void)fd;
    (void)what;
    fetch_fail(u, u->state == F_CONNECTING || u->state == F_RESOLVING ?
               "connect timed out" : "no response in time");
}

static void
fetch_resolved(void *arg, int status, const struct sockaddr *addr,
               socklen_t addrlen, const char *host, const char *what)
{
    struct kr_upstream *u = arg;

    u->fetch_res = NULL;
    if (status != KR_OK) {
        fetch_fail(u, "cannot resolve the address");
        return;
    }
    if (u->tls != NULL) {
        char err[200];
        SSL *ssl = kr_tls_ssl_new(u->tls, host, err, sizeof(err));

        if (ssl == NULL) {
            fetch_fail(u, err);
            return;
        }
        /* the SSL is the bufferevent's (BEV_OPT_CLOSE_ON_FREE) */
        u->bev = bufferevent_openssl_socket_new(u->base, -1, ssl,
                                                BUFFEREVENT_SSL_CONNECTING,
                                                BEV_OPT_CLOSE_ON_FREE);
        if (u->bev == NULL) {
            SSL_free(ssl);
        } else {
            bufferevent_openssl_set_allow_dirty_shutdown(u->bev, 1);
        }
    } else {
        u->bev = bufferevent_socket_new(u->base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    if (u->bev == NULL) {
        fetch_fail(u, "out of memory");
        return;
    }
    bufferevent_setcb(u->bev, fetch_read_cb, NULL, fetch_event_cb, u);
    bufferevent_enable(u->bev, EV_READ | EV_WRITE);
    u->state = F_CONNECTING;
    arm_timeout(u, u->uc->connect_timeout_ms);
    if (bufferevent_socket_connect(u->bev, (struct sockaddr *)addr,
                                   (int)addrlen) != 0) {
        char why[160];

        snprintf(why, sizeof(why), "connect: %s",
                 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
        fetch_fail(u, why);
    }
    (void)what;
}

/* Try the next bootstrap server, or give up after trying each once. */
static void
fetch_next(struct kr_upstream *u)
{
    struct kr_resolve *r;
    int idx;

    if (u->tries >= u->uc->nbootstrap) {
        fetch_done(u, false);
        return;
    }
    u->tries++;
    idx = (int)(u->fetch_bs++ % (unsigned)u->uc->nbootstrap);
    fmt_hostport(u->fetch_what, sizeof(u->fetch_what),
                 u->uc->bootstrap[idx].host, u->uc->bootstrap[idx].port);
    u->state = F_RESOLVING;
    r = resolve_new(u, KR_NODE_BOOTSTRAP, fetch_resolved, u);
    if (r == NULL) {
        fetch_done(u, false);
        return;
    }
    arm_timeout(u, u->uc->connect_timeout_ms);
    /* fetch_res stays NULL when the callback already ran. */
    r = lookup_bootstrap(u, r, idx);
    if (r != NULL) {
        u->fetch_res = r;
    }
}

static void
refresh_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_upstream *u = arg;

    (void)fd;
    (void)what;
    if (u->state == F_IDLE) {
        /* a periodic fetch (or the first): one for the process */
        int64_t now = kr_clock_mono_ms(), ok_ms, fail_ms;
        int64_t every = u->uc->metadata_refresh_ms;
        struct timeval tv;

        kr_cluster_fetch_times(u->cluster, &ok_ms, &fail_ms);
        if (ok_ms != 0 && every > 0 &&
            now - ok_ms + KR_UP_MIN_GAP_MS < every) {
            /* another worker fetched lately: its view serves this one */
            (void)sync_view(u);
            tv = tv_ms(ok_ms + every - now);
            event_add(u->refresh_ev, &tv);
            return;
        }
        if (!kr_cluster_fetch_claim(u->cluster, now, KR_UP_CLAIM_HOLD_MS)) {
            /* another worker's fetch is under way: look again soon */
            tv = tv_ms(KR_UP_CLAIM_RETRY_MS);
            event_add(u->refresh_ev, &tv);
            return;
        }
        u->claimed = true;
        u->seq++;
    } else if (u->state != F_QUEUED) {
        return;
    }
    u->tries = 0;
    fetch_next(u);
}

/*
 * End of a fetch: schedule the next one, then answer every resolution
 * that waited for this fetch (or an earlier one).
 */
static void
fetch_done(struct kr_upstream *u, bool ok)
{
    uint64_t done = u->seq;
    struct timeval tv;
    int64_t next;

    fetch_close(u);
    u->state = F_IDLE;
    u->last_done_ms = kr_clock_mono_ms();
    if (ok) {
        u->last_ok_ms = u->last_done_ms;
    } else {
        u->last_fail_ms = u->last_done_ms;
    }
    if (ok) {
        u->backoff_ms = 0;
        next = u->uc->metadata_refresh_ms;
    } else {
        u->backoff_ms = u->backoff_ms ? u->backoff_ms * 2 :
                        KR_UP_BACKOFF_MIN_MS;
        if (u->backoff_ms > KR_UP_BACKOFF_MAX_MS) {
            u->backoff_ms = KR_UP_BACKOFF_MAX_MS;
        }
        next = u->backoff_ms;
        if (u->uc->metadata_refresh_ms > 0 &&
            next > u->uc->metadata_refresh_ms) {
            next = u->uc->metadata_refresh_ms;
        }
        kr_log_rl(KR_LOG_WARN, "%s: no bootstrap server answered; "
                  "retrying in %lld ms", u->label, (long long)next);
    }
    kr_cluster_fetch_done(u->cluster, ok, u->last_done_ms);
    if (u->claimed) {
        /* after a failure the other workers wait as this one does */
        kr_cluster_fetch_release(u->cluster, u->last_done_ms,
                                 ok ? 0 : next);
        u->claimed = false;
    }
    if (next > 0) {
        tv = tv_ms(next);
        event_add(u->refresh_ev, &tv);
    }

    /* Callbacks may add or cancel resolutions: rescan after each. */
    for (;;) {
        struct kr_resolve *r;
        struct kr_ubroker *b;

        for (r = u->waiting; r != NULL; r = r->next) {
            if (r->seq <= done) {
                break;
            }
        }
        if (r == NULL) {
            break;
        }
        list_del(&u->waiting, r);
        r->waiting = false;
        b = broker_find(u, r->node_id);
        if (b != NULL) {
            (void)lookup(u, r, b->a.host, b->a.port);
        } else {
            kr_log_rl(KR_LOG_WARN, "%s: NodeId %d unknown after a metadata "
                      "refresh", u->label, r->node_id);
            if (ok) {
                neg_add(u, r->node_id);
            }
            r->cb(r->arg, KR_ERROR, NULL, 0, tls_name(r), r->what);
            resolve_free(r);
        }
    }
}

void
kr_upstream_health(const struct kr_upstream *u, struct kr_upstream_health *h)
{
    int64_t ok_ms, fail_ms;

    memset(h, 0, sizeof(*h));
    /* the process's fetches: any worker's serves all (kr_cluster.h) */
    kr_cluster_fetch_times(u->cluster, &ok_ms, &fail_ms);
    h->last_ok_ms = u->last_ok_ms > ok_ms ? u->last_ok_ms : ok_ms;
    h->last_fail_ms = u->last_fail_ms > fail_ms ? u->last_fail_ms : fail_ms;
    h->nbrokers = kr_upstream_nbrokers(u);
    h->name = u->uc->name;
}

/* ---- life cycle ------------------------------------------------------- */

struct kr_upstream *
kr_upstream_new(struct event_base *base, struct evdns_base *dns,
                const struct kr_upstream_conf *uc)
{
    return kr_upstream_new_shared(base, dns, uc, NULL, NULL);
}

struct kr_upstream *
kr_upstream_new_shared(struct event_base *base, struct evdns_base *dns,
                       const struct kr_upstream_conf *uc,
                       struct kr_cluster *cluster, struct kr_conf_ref *cref)
{
    struct kr_upstream *u;
    int i;

    if (uc == NULL || uc->nbootstrap < 1) {
        return NULL;
    }
    u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return NULL;
    }
    u->refs = 1;
    u->cluster = cluster != NULL ? kr_cluster_ref(cluster)
                                 : kr_cluster_new(uc->name);
    if (u->cluster == NULL) {
        free(u);
        return NULL;
    }
    kr_cluster_reader_init(&u->reader, u->cluster);
    u->cref = cref != NULL ? kr_conf_ref_get(cref) : NULL;
    u->base = base;
    u->dns = dns;
    u->uc = uc;
    u->tls = uc->ssl && uc->tls != NULL ? kr_tls_ctx_ref(uc->tls) : NULL;
    if (uc->name != NULL && uc->name[0] != '\0') {
        snprintf(u->label, sizeof(u->label), "upstream %s", uc->name);
    } else {
        snprintf(u->label, sizeof(u->label), "upstream");
    }
    u->bs = calloc((size_t)uc->nbootstrap, sizeof(*u->bs));
    u->topics = kr_topic_map_new();     /* NULL: ids stay unresolved */
    u->refresh_ev = evtimer_new(base, refresh_cb, u);
    u->timeout_ev = evtimer_new(base, fetch_timeout_cb, u);
    if (u->bs == NULL || u->refresh_ev == NULL || u->timeout_ev == NULL) {
        goto fail;
    }
    for (i = 0; i < uc->nbootstrap; i++) {
        u->bs[i].host = strdup(uc->bootstrap[i].host);
        u->bs[i].port = uc->bootstrap[i].port;
        if (u->bs[i].host == NULL) {
            goto fail;
        }
    }
    for (i = 0; i < uc->ndial; i++) {
        broker_set(u, uc->dial[i].node_id, uc->dial[i].addr.host,
                   strlen(uc->dial[i].addr.host), uc->dial[i].addr.port,
                   SRC_DIAL);
    }
    /* the first fetch, as a periodic one: one for the process when the
       cluster view is shared (refresh_cb) */
    {
        struct timeval tv = { 0, 0 };

        event_add(u->refresh_ev, &tv);
    }
    (void)sync_view(u);                 /* what other workers know */
    return u;
fail:
    kr_upstream_free(u);
    return NULL;
}

void
kr_upstream_free(struct kr_upstream *u)
{
    int i;

    if (u == NULL) {
        return;
    }
    if (u->timeout_ev != NULL) {
        fetch_close(u);
    }
    if (u->claimed) {
        /* a fetch stopped half-way: another worker may take it */
        kr_cluster_fetch_release(u->cluster, kr_clock_mono_ms(), 0);
        u->claimed = false;
    }
    while (u->waiting != NULL) {
        struct kr_resolve *r = u->waiting;

        list_del(&u->waiting, r);
        resolve_free(r);
    }
    while (u->dns_list != NULL) {
        struct kr_resolve *r = u->dns_list;

        list_del(&u->dns_list, r);
        r->in_dns = false;
        r->cancelled = true;
        r->u = NULL;
        if (r->dnsreq != NULL) {
            evdns_getaddrinfo_cancel(r->dnsreq);
        }
    }
    if (u->refresh_ev != NULL) {
        event_free(u->refresh_ev);
    }
    if (u->timeout_ev != NULL) {
        event_free(u->timeout_ev);
    }
    for (i = 0; i < u->nbrokers; i++) {
        free(u->brokers[i].a.host);
        free(u->brokers[i].adv);
    }
    free(u->brokers);
    kr_tls_ctx_put(u->tls);
    if (u->bs != NULL) {
        for (i = 0; i < u->uc->nbootstrap; i++) {
            free(u->bs[i].host);
        }
    }
    free(u->bs);
    kr_topic_map_free(u->topics);
    kr_cluster_reader_done(&u->reader);
    kr_cluster_put(u->cluster);
    kr_conf_ref_put(u->cref);
    free(u);
}

struct kr_upstream *
kr_upstream_ref(struct kr_upstream *u)
{
    if (u != NULL) {
        u->refs++;
    }
    return u;
}

void
kr_upstream_unref(struct kr_upstream *u)
{
    if (u != NULL && --u->refs == 0) {
        kr_upstream_free(u);
    }
}

struct kr_cluster *
kr_upstream_cluster(const struct kr_upstream *u)
{
    return u != NULL ? u->cluster : NULL;
}

const struct kr_upstream_conf *
kr_upstream_conf(const struct kr_upstream *u)
{
    if (u == NULL) {
        return NULL;
    }
    return u->sasl_uc != NULL ? u->sasl_uc : u->uc;
}

struct kr_tls_ctx *
kr_upstream_tls(const struct kr_upstream *u)
{
    return u != NULL ? u->tls : NULL;
}

void
kr_upstream_set_tls(struct kr_upstream *u, struct kr_tls_ctx *t)
{
    if (u == NULL || u->tls == NULL || t == NULL || t == u->tls) {
        return;
    }
    kr_tls_ctx_put(u->tls);
    u->tls = kr_tls_ctx_ref(t);
}
