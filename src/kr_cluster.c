/*
 * kr_cluster.c - the process-wide view of one upstream cluster
 * (kr_cluster.h): snapshots published under a mutex with a generation
 * counter, read through per-thread caches; the TopicId log in chunks that
 * never move.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kr_cluster.h"
#include "kr_topics.h"

#define KR_CL_CHUNK 1024u               /* TopicId log entries per chunk */
#define KR_CL_CHUNKS 1024u              /* chunks: the log holds at most
                                           KR_CL_CHUNK * KR_CL_CHUNKS */

struct kr_cl_topic {
    uint8_t id[16];
    char *name;
};

struct kr_cluster {
    atomic_int refs;
    _Atomic uint64_t gen;               /* cur->gen, stored last */
    pthread_mutex_t lock;               /* writers; readers taking a
                                           reference to cur */
    struct kr_cluster_snap *cur;        /* under lock; one reference */
    char *name;
    /* the TopicId log: entries [0, nlog) written, under lock; chunk
       pointers and entries below a published ntopics never change */
    struct kr_cl_topic *chunks[KR_CL_CHUNKS];
    size_t nlog;
    struct kr_topic_map *known;         /* under lock: what the log says
                                           of each id, to skip repeats */
    /* fetch coordination (monotonic ms) */
    _Atomic int64_t claim_until;
    _Atomic int64_t ok_ms, fail_ms;
};

/* ---- snapshots ---------------------------------------------------------- */

static void
snap_free(struct kr_cluster_snap *s)
{
    int i;

    if (s == NULL) {
        return;
    }
    for (i = 0; i < s->nbrokers; i++) {
        free(s->brokers[i].host);
    }
    free(s->brokers);
    free(s);
}

void
kr_cluster_snap_put(const struct kr_cluster_snap *cs)
{
    struct kr_cluster_snap *s = (struct kr_cluster_snap *)cs;

    if (s != NULL &&
        atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        snap_free(s);
    }
}

/* A deep copy of s (refs 1, gen s->gen + 1); NULL on ENOMEM. */
static struct kr_cluster_snap *
snap_copy(const struct kr_cluster_snap *s)
{
    struct kr_cluster_snap *n = malloc(sizeof(*n));
    int i;

    if (n == NULL) {
        return NULL;
    }
    memcpy(n->api, s->api, sizeof(n->api));
    n->have_api = s->have_api;
    n->ntopics = s->ntopics;
    n->gen = s->gen + 1;
    n->nbrokers = 0;
    n->brokers = NULL;
    atomic_init(&n->refs, 1);
    if (s->nbrokers > 0) {
        n->brokers = calloc((size_t)s->nbrokers, sizeof(*n->brokers));
        if (n->brokers == NULL) {
            free(n);
            return NULL;
        }
        for (i = 0; i < s->nbrokers; i++) {
            n->brokers[i] = s->brokers[i];
            n->brokers[i].host = strdup(s->brokers[i].host);
            if (n->brokers[i].host == NULL) {
                snap_free(n);
                return NULL;
            }
            n->nbrokers = i + 1;
        }
    }
    return n;
}

/* ---- the cluster -------------------------------------------------------- */

struct kr_cluster *
kr_cluster_new(const char *name)
{
    struct kr_cluster *c = calloc(1, sizeof(*c));
    int i;

    if (c == NULL) {
        return NULL;
    }
    c->name = strdup(name != NULL ? name : "");
    c->cur = calloc(1, sizeof(*c->cur));
    c->known = kr_topic_map_new();
    if (c->name == NULL || c->cur == NULL || c->known == NULL ||
        pthread_mutex_init(&c->lock, NULL) != 0) {
        kr_topic_map_free(c->known);
        free(c->cur);
        free(c->name);
        free(c);
        return NULL;
    }
    c->cur->gen = 1;
    for (i = 0; i < KR_CLUSTER_API_KEYS; i++) {
        c->cur->api[i].min = c->cur->api[i].max = -1;
    }
    atomic_init(&c->cur->refs, 1);
    atomic_init(&c->refs, 1);
    atomic_init(&c->gen, 1);
    atomic_init(&c->claim_until, 0);
    atomic_init(&c->ok_ms, 0);
    atomic_init(&c->fail_ms, 0);
    return c;
}

struct kr_cluster *
kr_cluster_ref(struct kr_cluster *c)
{
    if (c != NULL) {
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    }
    return c;
}

void
kr_cluster_put(struct kr_cluster *c)
{
    size_t i;

    if (c == NULL ||
        atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) > 1) {
        return;
    }
    for (i = 0; i < c->nlog; i++) {
        free(c->chunks[i / KR_CL_CHUNK][i % KR_CL_CHUNK].name);
    }
    for (i = 0; i < KR_CL_CHUNKS; i++) {
        free(c->chunks[i]);
    }
    kr_topic_map_free(c->known);
    kr_cluster_snap_put(c->cur);
    pthread_mutex_destroy(&c->lock);
    free(c->name);
    free(c);
}

uint64_t
kr_cluster_gen(const struct kr_cluster *c)
{
    return atomic_load_explicit(&c->gen, memory_order_acquire);
}

const struct kr_cluster_snap *
kr_cluster_snap_get(struct kr_cluster *c)
{
    struct kr_cluster_snap *s;

    pthread_mutex_lock(&c->lock);
    s = c->cur;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->lock);
    return s;
}

void
kr_cluster_topic_at(const struct kr_cluster *c, size_t i, const uint8_t **id,
                    const char **name)
{
    const struct kr_cl_topic *t = &c->chunks[i / KR_CL_CHUNK][i % KR_CL_CHUNK];

    *id = t->id;
    *name = t->name;
}

/* ---- readers ------------------------------------------------------------ */

void
kr_cluster_reader_init(struct kr_cluster_reader *r, struct kr_cluster *c)
{
    r->c = c;
    r->snap = NULL;
    r->gen = 0;
}

const struct kr_cluster_snap *
kr_cluster_read(struct kr_cluster_reader *r, bool *changed)
{
    const struct kr_cluster_snap *s;

    if (r->snap != NULL && kr_cluster_gen(r->c) == r->gen) {
        if (changed != NULL) {
            *changed = false;
        }
        return r->snap;
    }
    s = kr_cluster_snap_get(r->c);
    kr_cluster_snap_put(r->snap);
    r->snap = s;
    r->gen = s->gen;
    if (changed != NULL) {
        *changed = true;
    }
    return s;
}

void
kr_cluster_reader_done(struct kr_cluster_reader *r)
{
    kr_cluster_snap_put(r->snap);
    r->snap = NULL;
    r->gen = 0;
}

/* ---- writers ------------------------------------------------------------ */

void
kr_cluster_edit_begin(struct kr_cluster_edit *e, struct kr_cluster *c)
{
    pthread_mutex_lock(&c->lock);
    e->c = c;
    e->next = NULL;
    e->ntopics = c->cur->ntopics;
}

/* The snapshot being edited (copied at the first change); NULL on
   ENOMEM. */
static struct kr_cluster_snap *
edit_snap(struct kr_cluster_edit *e)
{
    if (e->next == NULL) {
        e->next = snap_copy(e->c->cur);
    }
    return e->next;
}

/* The view as edited so far (read-only). */
static const struct kr_cluster_snap *
edit_view(const struct kr_cluster_edit *e)
{
    return e->next != NULL ? e->next : e->c->cur;
}

/* Index of node_id in s's sorted brokers, or where it would go (~idx). */
static int
broker_pos(const struct kr_cluster_snap *s, int32_t node_id)
{
    int lo = 0, hi = s->nbrokers;

    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;

        if (s->brokers[mid].node_id == node_id) {
            return mid;
        }
        if (s->brokers[mid].node_id < node_id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return ~lo;
}

bool
kr_cluster_edit_broker(struct kr_cluster_edit *e, int32_t node_id,
                       const char *host, size_t hlen, uint16_t port,
                       bool fetched)
{
    const struct kr_cluster_snap *v = edit_view(e);
    struct kr_cluster_snap *s;
    struct kr_cluster_broker *nb;
    char *h;
    int at = broker_pos(v, node_id);

    if (node_id < 0 || port == 0 || host == NULL || hlen == 0 ||
        hlen > 255) {
        return false;
    }
    if (at >= 0) {
        const struct kr_cluster_broker *b = &v->brokers[at];

        if (b->port == port && strlen(b->host) == hlen &&
            memcmp(b->host, host, hlen) == 0) {
            return false;
        }
    } else if (v->nbrokers >= KR_CLUSTER_MAX_BROKERS) {
        return false;
    }
    h = malloc(hlen + 1);
    if (h == NULL || (s = edit_snap(e)) == NULL) {
        free(h);
        return false;
    }
    memcpy(h, host, hlen);
    h[hlen] = '\0';
    if (at >= 0) {
        free(s->brokers[at].host);
        s->brokers[at].host = h;
        s->brokers[at].port = port;
        s->brokers[at].fetched = fetched;
        return true;
    }
    at = ~at;
    nb = realloc(s->brokers, sizeof(*nb) * (size_t)(s->nbrokers + 1));
    if (nb == NULL) {
        free(h);
        return false;
    }
    s->brokers = nb;
    memmove(&nb[at + 1], &nb[at], sizeof(*nb) * (size_t)(s->nbrokers - at));
    nb[at].node_id = node_id;
    nb[at].port = port;
    nb[at].fetched = fetched;
    nb[at].host = h;
    s->nbrokers++;
    return true;
}

bool
kr_cluster_edit_api(struct kr_cluster_edit *e,
                    const struct kr_cluster_range *api)
{
    const struct kr_cluster_snap *v = edit_view(e);
    struct kr_cluster_snap *s;

    if (v->have_api && memcmp(v->api, api, sizeof(v->api)) == 0) {
        return false;
    }
    s = edit_snap(e);
    if (s == NULL) {
        return false;
    }
    memcpy(s->api, api, sizeof(s->api));
    s->have_api = true;
    return true;
}

bool
kr_cluster_edit_topic(struct kr_cluster_edit *e, const uint8_t id[16],
                      const char *name, size_t len)
{
    struct kr_cluster *c = e->c;
    const char *known = kr_topic_map_name(c->known, id);
    struct kr_cl_topic *t;
    size_t ci = c->nlog / KR_CL_CHUNK;
    char *copy;

    if (known != NULL && strlen(known) == len &&
        memcmp(known, name, len) == 0) {
        return false;
    }
    if (ci >= KR_CL_CHUNKS || edit_snap(e) == NULL) {
        return false;
    }
    if (c->chunks[ci] == NULL) {
        c->chunks[ci] = calloc(KR_CL_CHUNK, sizeof(*c->chunks[ci]));
        if (c->chunks[ci] == NULL) {
            return false;
        }
    }
    copy = malloc(len + 1);
    if (copy == NULL || !kr_topic_map_put(c->known, id, name, len)) {
        free(copy);
        return false;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    t = &c->chunks[ci][c->nlog % KR_CL_CHUNK];
    memcpy(t->id, id, 16);
    t->name = copy;
    c->nlog++;
    e->next->ntopics = c->nlog;
    e->ntopics = c->nlog;
    return true;
}

struct edit_topics_arg {
    struct kr_cluster_edit *e;
    size_t n;
};

static void
edit_topics_cb(void *arg, const uint8_t id[16], const char *name, size_t len)
{
    struct edit_topics_arg *a = arg;

    a->n += kr_cluster_edit_topic(a->e, id, name, len);
}

size_t
kr_cluster_edit_topics(struct kr_cluster_edit *e,
                       const struct kr_msg *metadata_rsp)
{
    struct edit_topics_arg a = { e, 0 };

    kr_topics_metadata_each(metadata_rsp, edit_topics_cb, &a);
    return a.n;
}

uint64_t
kr_cluster_edit_end(struct kr_cluster_edit *e)
{
    struct kr_cluster *c = e->c;
    struct kr_cluster_snap *old = NULL;
    uint64_t gen;

    if (e->next != NULL) {
        old = c->cur;
        c->cur = e->next;
        e->next = NULL;
        /* the snapshot's contents, then its generation (release): a
           reader that sees the new generation takes the new snapshot */
        atomic_store_explicit(&c->gen, c->cur->gen, memory_order_release);
    }
    gen = c->cur->gen;
    pthread_mutex_unlock(&c->lock);
    kr_cluster_snap_put(old);
    e->c = NULL;
    return gen;
}

/* ---- one fetch for the process ------------------------------------------ */

bool
kr_cluster_fetch_claim(struct kr_cluster *c, int64_t now_ms, int64_t hold_ms)
{
    int64_t until = atomic_load_explicit(&c->claim_until,
                                         memory_order_relaxed);

    do {
        if (until > now_ms) {
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(
        &c->claim_until, &until, now_ms + hold_ms, memory_order_acq_rel,
        memory_order_relaxed));
    return true;
}

void
kr_cluster_fetch_release(struct kr_cluster *c, int64_t now_ms,
                         int64_t retry_ms)
{
    atomic_store_explicit(&c->claim_until,
                          retry_ms > 0 ? now_ms + retry_ms : 0,
                          memory_order_release);
}

void
kr_cluster_fetch_done(struct kr_cluster *c, bool ok, int64_t now_ms)
{
    atomic_store_explicit(ok ? &c->ok_ms : &c->fail_ms, now_ms,
                          memory_order_relaxed);
}

void
kr_cluster_fetch_times(const struct kr_cluster *c, int64_t *ok_ms,
                       int64_t *fail_ms)
{
    *ok_ms = atomic_load_explicit(&c->ok_ms, memory_order_relaxed);
    *fail_ms = atomic_load_explicit(&c->fail_ms, memory_order_relaxed);
}
