/*
 * kr_legacy_records.c - Produce and Fetch records carried across the
 * message-format boundary by legacy translation (kr_legacy_records.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "kr_field_ids.h"
#include "kr_kerr.h"
#include "kr_legacy_records.h"
#include "kr_schema.h"
#include "kr_xbuf.h"

void
kr_legacy_parts_free(struct kr_legacy_parts *p)
{
    size_t i;

    for (i = 0; i < p->n; i++) {
        free(p->v[i].topic);
    }
    free(p->v);
    p->v = NULL;
    p->n = 0;
    p->cap = 0;
}

static struct kr_legacy_part *
parts_add(struct kr_legacy_parts *p, const struct kr_str *topic,
          int32_t partition)
{
    struct kr_legacy_part *v, *e;
    size_t tl = topic->len > 0 ? (size_t)topic->len : 0;

    if (p->n == p->cap) {
        size_t ncap = p->cap > 0 ? p->cap * 2 : 8;

        v = realloc(p->v, ncap * sizeof(*v));
        if (v == NULL) {
            return NULL;
        }
        p->v = v;
        p->cap = ncap;
    }
    v = p->v;
    e = &v[p->n];
    memset(e, 0, sizeof(*e));
    e->topic = malloc(tl + 1);
    if (e->topic == NULL) {
        return NULL;
    }
    if (tl > 0) {
        memcpy(e->topic, topic->p, tl);
    }
    e->topic[tl] = '\0';
    e->partition = partition;
    p->n++;
    return e;
}

/*
 * A Produce partition kept out of the request (TopicData index t,
 * PartitionData index p) with error and the reason (printf format):
 * KR_OK, KR_ENOMEM.
 */
static int parts_keep(struct kr_legacy_parts *bad, const struct kr_str *topic,
                      int32_t partition, uint32_t t, uint32_t p,
                      int16_t error, const char *fmt, ...) KR_PRINTF(7, 8);

static int
parts_keep(struct kr_legacy_parts *bad, const struct kr_str *topic,
           int32_t partition, uint32_t t, uint32_t p, int16_t error,
           const char *fmt, ...)
{
    struct kr_legacy_part *e = parts_add(bad, topic, partition);
    va_list ap;

    if (e == NULL) {
        return KR_ENOMEM;
    }
    e->topic_at = t;
    e->part_at = p;
    e->error = error;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof(e->why), fmt, ap);
    va_end(ap);
    return KR_OK;
}

/*
 * The buffer a thread keeps between calls for a partition's records
 * copied whole (when they straddle the frame's chains): as kr_records.c's
 * scratch, a buffer of a megabyte malloc'd and freed per call is mmap'd,
 * page-faulted in and unmapped every time.  Kept up to KEEP_BYTES, freed
 * at thread exit (a pthread key).  The converted records go into shared
 * blocks (kr_xbuf.h), kept per thread by that module.
 */
#define KEEP_BYTES (4u << 20)

static pthread_key_t lr_key;
static pthread_once_t lr_once = PTHREAD_ONCE_INIT;
static bool lr_key_ok;

static void
lr_tls_free(void *arg)
{
    struct kr_bytes *t = arg;

    if (t != NULL) {
        kr_bytes_free(t);
        free(t);
    }
}

static void
lr_key_init(void)
{
    lr_key_ok = pthread_key_create(&lr_key, lr_tls_free) == 0;
}

/* *tmp: the thread's kept buffer (an empty one when none). */
static void
lr_take(struct kr_bytes *tmp)
{
    struct kr_bytes *t = NULL;

    *tmp = (struct kr_bytes){ 0 };
    if (pthread_once(&lr_once, lr_key_init) != 0 || !lr_key_ok) {
        return;
    }
    t = pthread_getspecific(lr_key);
    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t != NULL && pthread_setspecific(lr_key, t) != 0) {
            free(t);
            t = NULL;
        }
    }
    if (t != NULL) {
        *tmp = *t;
        *t = (struct kr_bytes){ 0 };
    }
    tmp->len = 0;
}

/* tmp back to the thread (or freed: past KEEP_BYTES, no key). */
static void
lr_give(struct kr_bytes *tmp)
{
    struct kr_bytes *t = lr_key_ok ? pthread_getspecific(lr_key) : NULL;

    if (tmp->cap > KEEP_BYTES || t == NULL) {
        kr_bytes_free(tmp);
    }
    if (t != NULL) {
        kr_bytes_free(t);           /* empty unless a nested call kept */
        *t = *tmp;
    }
    *tmp = (struct kr_bytes){ 0 };
}

/* The Kafka error a records outcome is answered with. */
static int16_t
outcome_error(enum kr_records_outcome o)
{
    return o == KR_RECORDS_UNSUPPORTED_COMPRESSION
               ? KR_KERR_UNSUPPORTED_COMPRESSION_TYPE
               : KR_KERR_CORRUPT_MESSAGE;
}

/*
 * The records of val (a slice of rb, or bytes krelay built) as one
 * contiguous run: a pointer into rb's segment when the slice lies in one,
 * else copied into *tmp.  NULL on ENOMEM or a slice outside rb.
 */
static const uint8_t *
records_bytes(const struct kr_val *val, const struct kr_rbuf *rb,
              struct kr_bytes *tmp, size_t *len)
{
    uint64_t off, base = 0;
    int i;

    if (val->is_null || val->u.rec.len <= 0) {
        *len = 0;
        return (const uint8_t *)"";
    }
    if (val->rec_ext) {
        *len = (size_t)val->u.s.len;
        return val->u.s.p;
    }
    off = val->u.rec.off;
    *len = (size_t)val->u.rec.len;
    for (i = 0; i < rb->nseg; i++) {
        size_t sl = rb->seg[i].iov_len;

        if (off >= base && off + *len <= base + sl) {
            return (const uint8_t *)rb->seg[i].iov_base + (off - base);
        }
        base += sl;
    }
    tmp->len = 0;
    if (!kr_bytes_reserve(tmp, *len) ||
        !kr_rbuf_read(rb, off, tmp->p, *len)) {
        return NULL;
    }
    tmp->len = *len;
    return tmp->p;
}

/*
 * The records of val as segments where they lie (rb's, or the bytes
 * krelay built): *seg is sv (nsv entries) or a malloc'd array the caller
 * frees (*heap).  KR_OK, KR_ENOMEM, KR_EPROTO (a slice outside rb).
 */
static int
records_segs(const struct kr_val *val, const struct kr_rbuf *rb,
             struct iovec *sv, int nsv, struct iovec **seg, int *nseg,
             struct iovec **heap)
{
    uint64_t off, end, base = 0;
    int i, first = -1, last = -1;

    *heap = NULL;
    *seg = sv;
    *nseg = 0;
    if (val->is_null || val->u.rec.len <= 0) {
        return KR_OK;
    }
    if (val->rec_ext) {
        sv[0].iov_base = (void *)(uintptr_t)val->u.s.p;
        sv[0].iov_len = (size_t)val->u.s.len;
        *nseg = 1;
        return KR_OK;
    }
    off = val->u.rec.off;
    end = off + (uint64_t)val->u.rec.len;
    for (i = 0; i < rb->nseg; i++) {
        uint64_t sl = rb->seg[i].iov_len;

        if (first < 0 && off < base + sl) {
            first = i;
        }
        if (first >= 0 && end <= base + sl) {
            last = i;
            break;
        }
        base += sl;
    }
    if (first < 0 || last < 0) {
        return KR_EPROTO;
    }
    if (last - first + 1 > nsv) {
        *heap = calloc((size_t)(last - first + 1), sizeof(**heap));
        if (*heap == NULL) {
            return KR_ENOMEM;
        }
        *seg = *heap;
    }
    base = 0;
    for (i = 0; i < first; i++) {
        base += rb->seg[i].iov_len;
    }
    for (i = first; i <= last; i++) {
        uint64_t sl = rb->seg[i].iov_len;
        uint64_t a = off > base ? off - base : 0;
        uint64_t b = end < base + sl ? end - base : sl;
        struct iovec *v = &(*seg)[i - first];

        v->iov_base = (uint8_t *)rb->seg[i].iov_base + a;
        v->iov_len = (size_t)(b - a);
        base += sl;
    }
    *nseg = last - first + 1;
    return KR_OK;
}

/*
 * out (an open shared block, kr_xbuf.h) made ready for a partition's
 * records: opened when it is not (room for about hint bytes), emptied.
 */
static int
out_ready(struct kr_bytes *out, size_t hint)
{
    if (out->p == NULL &&
        !kr_xbuf_open(out, hint < SIZE_MAX / 2 ? hint + hint / 4 : hint)) {
        return KR_ENOMEM;
    }
    out->len = KR_XBUF_HDR;
    return KR_OK;
}

/*
 * out's records (after its header) as the records of val.  At least
 * SHARE_MIN bytes: the block itself, sealed, its reference given to the
 * arena (the tree's owner), never copied again (the encoder lists it as
 * a slice of its own, kr_evcodec_emit hands it to libevent); out is left
 * closed.  Fewer: copied into the arena, out kept for the next one.
 */
#define SHARE_MIN 16384u

static int
set_records(struct kr_arena *a, struct kr_val *val, struct kr_bytes *out)
{
    size_t len = out->len - KR_XBUF_HDR;
    uint8_t *p = NULL;

    if (len > INT32_MAX) {
        return KR_ELIMIT;
    }
    if (len >= SHARE_MIN) {
        const uint8_t *d = kr_xbuf_seal(out);

        if (kr_arena_defer(a, kr_xbuf_unref_cb, (void *)(uintptr_t)d) !=
            KR_OK) {
            kr_xbuf_unref(d);
            return KR_ENOMEM;
        }
        kr_val_set_records_shared(val, d, (int32_t)len);
        return KR_OK;
    }
    if (len > 0) {
        p = kr_arena_alloc_uninit(a, len);
        if (p == NULL) {
            return KR_ENOMEM;
        }
        memcpy(p, out->p + KR_XBUF_HDR, len);
    }
    kr_val_set_records_ext(val, p != NULL ? p : (const uint8_t *)"",
                           (int32_t)len);
    return KR_OK;
}

static struct kr_array *
array_of(struct kr_node *n, enum kr_field_id id)
{
    struct kr_val *v = kr_node_get_id(n, id);

    return v != NULL && v->present && !v->is_null ? v->u.arr : NULL;
}

static bool
str_is(const struct kr_val *v, const char *s)
{
    size_t l = strlen(s);

    return v != NULL && !v->is_null && v->u.s.len >= 0 &&
           (size_t)v->u.s.len == l && memcmp(v->u.s.p, s, l) == 0;
}

/* ---- split sets (struct kr_legacy_split) -------------------------------- */

struct kr_legacy_splits *
kr_legacy_splits_new(void)
{
    struct kr_legacy_splits *sp = calloc(1, sizeof(*sp));

    if (sp != NULL) {
        sp->refs = 1;
    }
    return sp;
}

void
kr_legacy_splits_ref(struct kr_legacy_splits *sp)
{
    sp->refs++;
}

void
kr_legacy_splits_unref(struct kr_legacy_splits *sp)
{
    size_t i;

    if (sp == NULL || --sp->refs > 0) {
        return;
    }
    for (i = 0; i < sp->n; i++) {
        free(sp->v[i].topic);
    }
    free(sp->v);
    free(sp);
}

/* Order of a split: topic (bytes, then length), then partition. */
static int
split_key_cmp(const uint8_t *t1, size_t l1, int32_t p1, const uint8_t *t2,
              size_t l2, int32_t p2)
{
    size_t l = l1 < l2 ? l1 : l2;
    int c = l > 0 ? memcmp(t1, t2, l) : 0;

    if (c != 0) {
        return c;
    }
    if (l1 != l2) {
        return l1 < l2 ? -1 : 1;
    }
    return p1 < p2 ? -1 : p1 > p2;
}

static int
split_cmp(const void *x, const void *y)
{
    const struct kr_legacy_split *a = x, *b = y;

    return split_key_cmp((const uint8_t *)a->topic, a->topic_len,
                         a->partition, (const uint8_t *)b->topic,
                         b->topic_len, b->partition);
}

/* The split of (topic, partition) in sp (sorted), or NULL. */
static struct kr_legacy_split *
split_find(const struct kr_legacy_splits *sp, const struct kr_val *topic,
           int32_t partition)
{
    const uint8_t *t = (const uint8_t *)"";
    size_t tl = 0, lo = 0, hi = sp->n;

    if (topic != NULL && !topic->is_null && topic->u.s.len > 0) {
        t = topic->u.s.p;
        tl = (size_t)topic->u.s.len;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct kr_legacy_split *m = &sp->v[mid];
        int c = split_key_cmp(t, tl, partition, (const uint8_t *)m->topic,
                              m->topic_len, m->partition);

        if (c == 0) {
            return &sp->v[mid];
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

/*
 * out holds nbatch + 1 batches of partition (topic, partition): the
 * first nbatch copied into the arena and remembered in sp, the last
 * moved to the front of out (its records, set by the caller).
 */
static int
split_keep(struct kr_arena *a, struct kr_legacy_splits *sp,
           const struct kr_str *topic, int32_t partition, uint32_t nbatch,
           struct kr_bytes *out)
{
    uint8_t *data = out->p + KR_XBUF_HDR;
    size_t n = out->len - KR_XBUF_HDR, pos = 0, len = 0;
    size_t tl = topic->len > 0 ? (size_t)topic->len : 0;
    struct kr_legacy_split *e;
    uint32_t i;
    uint8_t *early;

    for (i = 0; i < nbatch; i++) {
        if (!kr_records_batch_next(data, n, pos, &len)) {
            return KR_EPROTO;           /* kr_records_up wrote them */
        }
        pos += len;
    }
    if (sp->n == sp->cap) {
        size_t ncap = sp->cap > 0 ? sp->cap * 2 : 4;
        struct kr_legacy_split *v = realloc(sp->v, ncap * sizeof(*v));

        if (v == NULL) {
            return KR_ENOMEM;
        }
        sp->v = v;
        sp->cap = ncap;
    }
    early = kr_arena_alloc_uninit(a, pos);
    e = &sp->v[sp->n];
    memset(e, 0, sizeof(*e));
    e->topic = malloc(tl + 1);
    if (early == NULL || e->topic == NULL) {
        free(e->topic);
        return KR_ENOMEM;
    }
    memcpy(early, data, pos);
    if (tl > 0) {
        memcpy(e->topic, topic->p, tl);
    }
    e->topic[tl] = '\0';
    e->topic_len = tl;
    e->partition = partition;
    e->nbatch = nbatch;
    e->early = early;
    e->early_len = pos;
    e->log_append_time = -1;
    e->base_offset = -1;
    sp->n++;
    if (nbatch > sp->rounds) {
        sp->rounds = nbatch;
    }
    memmove(data, data + pos, n - pos);
    out->len = KR_XBUF_HDR + (n - pos);
    return KR_OK;
}

/* A shallow copy of node n (its values copied, what they point to
   shared), or NULL. */
static struct kr_node *
node_copy(struct kr_arena *a, const struct kr_node *n)
{
    size_t nf = kr_structs[n->struct_id].nfields;
    struct kr_node *c = kr_arena_alloc(a, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    *c = *n;
    if (nf > 0) {
        c->vals = kr_arena_alloc_uninit(a, nf * sizeof(*c->vals));
        if (c->vals == NULL) {
            return NULL;
        }
        memcpy(c->vals, n->vals, nf * sizeof(*c->vals));
    }
    return c;
}

/* Batch k (0-based) of sp's early bytes of e: *p, *len. */
static bool
split_batch(const struct kr_legacy_split *e, uint32_t k, const uint8_t **p,
            size_t *len)
{
    size_t pos = 0, l = 0;
    uint32_t i;

    for (i = 0; i <= k; i++) {
        if (!kr_records_batch_next(e->early, e->early_len, pos, &l)) {
            return false;
        }
        if (i < k) {
            pos += l;
        }
    }
    *p = e->early + pos;
    *len = l;
    return true;
}

int
kr_legacy_produce_round(struct kr_arena *a, const struct kr_node *body,
                        int16_t v, const struct kr_legacy_splits *sp,
                        uint32_t r, struct kr_node **out)
{
    struct kr_array *topics = array_of((struct kr_node *)body,
                                       KR_FIELD_TOPIC_DATA);
    struct kr_array *nt, *pa = NULL, *np;
    struct kr_node *nb;
    struct kr_val *tv;
    uint16_t psid = 0;
    uint32_t ntopics = 0, t, ti = 0;
    size_t i, j;

    if (topics == NULL || r >= sp->rounds) {
        return KR_EPROTO;
    }
    for (t = 0; t < topics->n && pa == NULL; t++) {
        pa = array_of(topics->items[t].u.node, KR_FIELD_PARTITION_DATA);
    }
    if (pa == NULL) {
        return KR_EPROTO;
    }
    psid = pa->struct_id;
    /* the topics with a batch in round r (sp is sorted: a topic's
       partitions are together) */
    for (i = 0; i < sp->n; i = j) {
        bool any = false;

        for (j = i; j < sp->n && sp->v[j].topic_len == sp->v[i].topic_len &&
                    memcmp(sp->v[j].topic, sp->v[i].topic,
                           sp->v[i].topic_len) == 0;
             j++) {
            any = any || r + sp->v[j].nbatch >= sp->rounds;
        }
        ntopics += any;
    }
    nt = kr_array_new(a, topics->elem_type, topics->struct_id, ntopics, v);
    nb = node_copy(a, body);
    if (nt == NULL || nb == NULL) {
        return KR_ENOMEM;
    }
    for (i = 0; i < sp->n; i = j) {
        uint32_t npart = 0, k = 0;
        struct kr_node *tn;
        struct kr_val *nv, *pv;

        for (j = i; j < sp->n && sp->v[j].topic_len == sp->v[i].topic_len &&
                    memcmp(sp->v[j].topic, sp->v[i].topic,
                           sp->v[i].topic_len) == 0;
             j++) {
            npart += r + sp->v[j].nbatch >= sp->rounds;
        }
        if (npart == 0) {
            continue;
        }
        tn = nt->items[ti++].u.node;
        nv = kr_node_get_id(tn, KR_FIELD_NAME);
        pv = kr_node_get_id(tn, KR_FIELD_PARTITION_DATA);
        np = kr_array_new(a, pa->elem_type, psid, npart, v);
        if (nv == NULL || pv == NULL) {
            return KR_EPROTO;
        }
        if (np == NULL) {
            return KR_ENOMEM;
        }
        nv->u.s.p = (const uint8_t *)sp->v[i].topic;
        nv->u.s.len = (int32_t)sp->v[i].topic_len;
        nv->is_null = 0;
        pv->u.arr = np;
        pv->is_null = 0;
        for (; i < j; i++) {
            const struct kr_legacy_split *e = &sp->v[i];
            struct kr_node *pn;
            struct kr_val *iv, *rv;
            const uint8_t *bp;
            size_t bl;

            if (r + e->nbatch < sp->rounds) {
                continue;
            }
            pn = np->items[k++].u.node;
            iv = kr_node_get_id(pn, KR_FIELD_INDEX);
            rv = kr_node_get_id(pn, KR_FIELD_RECORDS);
            if (iv == NULL || rv == NULL ||
                !split_batch(e, r + e->nbatch - sp->rounds, &bp, &bl)) {
                return KR_EPROTO;
            }
            iv->u.i = e->partition;
            kr_val_set_records_ext(rv, bp, (int32_t)bl);
        }
    }
    tv = kr_node_get_id(nb, KR_FIELD_TOPIC_DATA);
    tv->u.arr = nt;
    tv->is_null = 0;
    *out = nb;
    return KR_OK;
}

/* A Produce response partition's fields the splits read or set. */
struct split_rsp_part {
    struct kr_val *error;               /* ErrorCode */
    struct kr_val *base;                /* BaseOffset */
    struct kr_val *append;              /* LogAppendTimeMs (NULL: v0-1) */
};

typedef void (*split_part_fn)(struct kr_legacy_split *e,
                              const struct split_rsp_part *f, void *ctx);

/* fn on every partition of Produce response rsp that sp has.  KR_OK or
   KR_EPROTO (not a Produce response). */
static int
split_each(const struct kr_node *rsp, const struct kr_legacy_splits *sp,
           split_part_fn fn, void *ctx)
{
    struct kr_array *topics = array_of((struct kr_node *)rsp,
                                       KR_FIELD_RESPONSES);
    uint32_t t, p;

    if (topics == NULL) {
        return KR_EPROTO;
    }
    for (t = 0; t < topics->n; t++) {
        struct kr_node *tn = topics->items[t].u.node;
        struct kr_val *name = kr_node_get_id(tn, KR_FIELD_NAME);
        struct kr_array *parts = array_of(tn, KR_FIELD_PARTITION_RESPONSES);

        for (p = 0; parts != NULL && p < parts->n; p++) {
            struct kr_node *pn = parts->items[p].u.node;
            struct kr_val *iv = kr_node_get_id(pn, KR_FIELD_INDEX);
            struct kr_legacy_split *e;
            struct split_rsp_part f;

            f.error = kr_node_get_id(pn, KR_FIELD_ERROR_CODE);
            f.base = kr_node_get_id(pn, KR_FIELD_BASE_OFFSET);
            f.append = kr_node_get_id(pn, KR_FIELD_LOG_APPEND_TIME_MS);
            if (iv == NULL || f.error == NULL || f.base == NULL) {
                return KR_EPROTO;
            }
            if (f.append != NULL && !f.append->present) {
                f.append = NULL;
            }
            e = split_find(sp, name, (int32_t)iv->u.i);
            if (e != NULL) {
                fn(e, &f, ctx);
            }
        }
    }
    return KR_OK;
}

/* split_each of kr_legacy_split_take: a round's answer. */
static void
split_take_part(struct kr_legacy_split *e, const struct split_rsp_part *f,
                void *ctx)
{
    (void)ctx;
    if (e->answered == 0) {
        e->base_offset = f->base->u.i;
        e->log_append_time = f->append != NULL ? f->append->u.i : -1;
    }
    if (e->error == 0 && f->error->u.i != 0) {
        e->error = (int16_t)f->error->u.i;
    }
    e->answered++;
}

int
kr_legacy_split_take(struct kr_legacy_splits *sp, const struct kr_node *rsp)
{
    return split_each(rsp, sp, split_take_part, NULL);
}

int16_t
kr_legacy_split_round_error(const struct kr_legacy_splits *sp, uint32_t r,
                            const struct kr_legacy_split **which)
{
    size_t i;

    *which = NULL;
    for (i = 0; i < sp->n; i++) {
        const struct kr_legacy_split *e = &sp->v[i];
        uint32_t first = sp->rounds - e->nbatch;   /* its first round */
        uint32_t want = r >= first ? r - first + 1 : 0;

        if (e->error != KR_KERR_NONE || e->answered < want) {
            *which = e;
            return e->error != KR_KERR_NONE ? e->error
                                            : KR_KERR_UNKNOWN_SERVER_ERROR;
        }
    }
    return KR_KERR_NONE;
}

/* split_each of kr_legacy_split_merge: the client's answer (ctx: the
   count of partitions given a round's error). */
static void
split_merge_part(struct kr_legacy_split *e, const struct split_rsp_part *f,
                 void *ctx)
{
    unsigned *nerr = ctx;
    int16_t err = e->error;

    if (err == 0 && e->answered < e->nbatch) {
        /* a round's answer did not name it */
        err = KR_KERR_UNKNOWN_SERVER_ERROR;
    }
    if (err != 0) {
        f->error->u.i = err;
        f->base->u.i = -1;
        if (f->append != NULL) {
            f->append->u.i = -1;
        }
        (*nerr)++;
    } else if (f->error->u.i == 0) {
        f->base->u.i = e->base_offset;
        if (f->append != NULL) {
            f->append->u.i = e->log_append_time;
        }
    }
}

int
kr_legacy_split_merge(struct kr_node *rsp, const struct kr_legacy_splits *sp,
                      unsigned *nerr)
{
    *nerr = 0;
    return split_each(rsp, sp, split_merge_part, nerr);
}

int
kr_legacy_produce_up(struct kr_arena *a, struct kr_node *req,
                     const struct kr_rbuf *rb,
                     const struct kr_legacy_rec_opts *o,
                     struct kr_legacy_parts *bad,
                     struct kr_legacy_splits *split,
                     struct kr_records_stats *st)
{
    struct kr_array *topics = array_of(req, KR_FIELD_TOPIC_DATA);
    struct kr_bytes tmp, out = { 0 };
    struct kr_records_up_opts uo;
    size_t left = o->max_uncompressed, used;
    uint64_t inf;
    uint32_t t, p;
    int rc = KR_OK;

    if (topics == NULL) {
        return KR_EPROTO;
    }
    memset(&uo, 0, sizeof(uo));
    lr_take(&tmp);
    uo.max_batch_bytes = o->max_batch_bytes;
    uo.max_uncompressed = o->max_uncompressed;
    for (t = 0; t < topics->n && rc == KR_OK; t++) {
        struct kr_node *tn = topics->items[t].u.node;
        struct kr_val *name = kr_node_get_id(tn, KR_FIELD_NAME);
        struct kr_array *parts = array_of(tn, KR_FIELD_PARTITION_DATA);

        if (name == NULL || parts == NULL) {
            rc = KR_EPROTO;
            break;
        }
        for (p = 0; p < parts->n; p++) {
            struct kr_node *pn = parts->items[p].u.node;
            struct kr_val *idx = kr_node_get_id(pn, KR_FIELD_INDEX);
            struct kr_val *rec = kr_node_get_id(pn, KR_FIELD_RECORDS);
            enum kr_records_outcome ro;
            const uint8_t *set;
            uint64_t nb;
            char why[96];
            size_t n;

            if (idx == NULL || rec == NULL) {
                rc = KR_EPROTO;
                break;
            }
            set = records_bytes(rec, rb, &tmp, &n);
            if (set == NULL) {
                rc = KR_ENOMEM;
                break;
            }
            if (n == 0) {
                /* an empty set (MessageSetSize 0): Produce v3+ refuses
                   empty records (Kafka 4: INVALID_RECORD), a 0.10 broker
                   appended nothing and answered BaseOffset -1 (Log.append
                   returned analyzeAndValidateMessageSet's LogAppendInfo,
                   firstOffset -1, when shallowCount == 0): kept out,
                   answered so by krelay (error NONE) */
                rc = parts_keep(bad, &name->u.s, (int32_t)idx->u.i, t, p,
                                KR_KERR_NONE, "empty message set "
                                "(MessageSetSize 0): nothing to append");
                if (rc != KR_OK) {
                    break;
                }
                continue;
            }
            rc = out_ready(&out, n);
            if (rc != KR_OK) {
                break;
            }
            why[0] = '\0';
            nb = st->batches_out;
            inf = st->bytes_inflated;
            if (o->max_uncompressed > 0) {
                /* the request's budget: what its sets have left */
                uo.max_uncompressed = left > 0 ? left : 1;
            }
            ro = kr_records_up(set, n, &uo, &out, st, why, sizeof(why));
            used = (size_t)(st->bytes_inflated - inf);
            left -= used < left ? used : left;
            if (ro == KR_RECORDS_NOMEM) {
                rc = KR_ENOMEM;
                break;
            }
            if (ro == KR_RECORDS_OK && st->batches_out - nb > 1 &&
                st->batches_out - nb <= KR_LEGACY_MAX_ROUNDS + 1) {
                /* Produce v3+ takes one batch per partition
                   (ProduceRequest.validateRecords): the others go in
                   rounds of their own */
                rc = split_keep(a, split, &name->u.s, (int32_t)idx->u.i,
                                (uint32_t)(st->batches_out - nb - 1), &out);
                if (rc != KR_OK) {
                    break;
                }
            } else if (ro != KR_RECORDS_OK) {
                rc = parts_keep(bad, &name->u.s, (int32_t)idx->u.i, t, p,
                                outcome_error(ro), "%s: %s",
                                kr_records_outcome_name(ro), why);
                if (rc != KR_OK) {
                    break;
                }
                continue;               /* left as it came: dropped */
            } else if (st->batches_out - nb > 1) {
                rc = parts_keep(bad, &name->u.s, (int32_t)idx->u.i, t, p,
                                KR_KERR_MESSAGE_TOO_LARGE, "%llu batches of "
                                "at most legacy_batch_max_bytes, %zu bytes: "
                                "more than %u Produce requests",
                                (unsigned long long)(st->batches_out - nb),
                                out.len - KR_XBUF_HDR,
                                KR_LEGACY_MAX_ROUNDS + 1);
                if (rc != KR_OK) {
                    break;
                }
                continue;               /* left as it came: dropped */
            }
            rc = set_records(a, rec, &out);
            if (rc != KR_OK) {
                break;
            }
        }
    }
    kr_xbuf_close(&out);
    lr_give(&tmp);
    if (rc == KR_OK && split->n > 1) {
        qsort(split->v, split->n, sizeof(*split->v), split_cmp);
    }
    return rc;
}

int
kr_legacy_produce_parts(const struct kr_node *req,
                        struct kr_legacy_parts *out)
{
    struct kr_array *topics = array_of((struct kr_node *)req,
                                       KR_FIELD_TOPIC_DATA);
    uint32_t t, p;

    if (topics == NULL) {
        return KR_EPROTO;
    }
    for (t = 0; t < topics->n; t++) {
        struct kr_node *tn = topics->items[t].u.node;
        struct kr_val *name = kr_node_get_id(tn, KR_FIELD_NAME);
        struct kr_array *parts = array_of(tn, KR_FIELD_PARTITION_DATA);

        if (name == NULL || parts == NULL) {
            return KR_EPROTO;
        }
        for (p = 0; p < parts->n; p++) {
            struct kr_val *idx = kr_node_get_id(parts->items[p].u.node,
                                                KR_FIELD_INDEX);
            struct kr_legacy_part *e;

            if (idx == NULL) {
                return KR_EPROTO;
            }
            e = parts_add(out, &name->u.s, (int32_t)idx->u.i);
            if (e == NULL) {
                return KR_ENOMEM;
            }
            e->topic_at = t;
            e->part_at = p;
        }
    }
    return KR_OK;
}

size_t
kr_legacy_parts_failed(const struct kr_legacy_parts *p)
{
    size_t i, n = 0;

    for (i = 0; i < p->n; i++) {
        n += p->v[i].error != KR_KERR_NONE;
    }
    return n;
}

bool
kr_legacy_produce_any_left(const struct kr_node *req,
                           const struct kr_legacy_parts *bad)
{
    struct kr_array *topics = array_of((struct kr_node *)req,
                                       KR_FIELD_TOPIC_DATA);
    size_t total = 0;
    uint32_t t;

    /* bad's partitions are distinct places of req's */
    for (t = 0; topics != NULL && t < topics->n; t++) {
        struct kr_array *parts = array_of(topics->items[t].u.node,
                                          KR_FIELD_PARTITION_DATA);

        total += parts != NULL ? parts->n : 0;
    }
    return total > bad->n;
}

void
kr_legacy_produce_drop(struct kr_node *req, const struct kr_legacy_parts *bad)
{
    struct kr_array *topics = array_of(req, KR_FIELD_TOPIC_DATA);
    uint32_t t, p, tkeep = 0;
    size_t k = 0;               /* bad's next, in request order */

    if (topics == NULL || bad->n == 0) {
        return;
    }
    for (t = 0; t < topics->n; t++) {
        struct kr_node *tn = topics->items[t].u.node;
        struct kr_array *parts = array_of(tn, KR_FIELD_PARTITION_DATA);
        uint32_t pkeep = 0;

        for (p = 0; parts != NULL && p < parts->n; p++) {
            if (k < bad->n && bad->v[k].topic_at == t &&
                bad->v[k].part_at == p) {
                k++;
                continue;
            }
            parts->items[pkeep++] = parts->items[p];
        }
        if (parts != NULL) {
            parts->n = pkeep;
        }
        if (pkeep > 0) {
            topics->items[tkeep++] = topics->items[t];
        }
    }
    topics->n = tkeep;
}

/* A copy of array arr with k more elements (new nodes at version v). */
static struct kr_array *
array_grow(struct kr_arena *a, struct kr_array *arr, uint32_t k, int16_t v)
{
    struct kr_array *g = kr_array_new(a, arr->elem_type, arr->struct_id,
                                      arr->n + k, v);

    if (g == NULL) {
        return NULL;
    }
    memcpy(g->items, arr->items, arr->n * sizeof(*arr->items));
    return g;
}

/* A topic of the response by name, for the sorted index of merge. */
struct merge_name {
    const uint8_t *p;
    size_t len;
    uint32_t at;                /* its index in the topics array */
};

static int
merge_name_cmp(const void *x, const void *y)
{
    const struct merge_name *a = x, *b = y;
    size_t l = a->len < b->len ? a->len : b->len;
    int c = l > 0 ? memcmp(a->p, b->p, l) : 0;

    if (c != 0) {
        return c;
    }
    return a->len < b->len ? -1 : a->len > b->len;
}

/*
 * The merge in three steps, each linear (but the sort): every bad
 * partition's target topic (one of the response's, found through a sorted
 * index, or a new one per run of bad partitions of a topic it lacks), the
 * topics array grown once for the new ones, then each target's
 * partitions array grown once and filled in bad's order.
 */
int
kr_legacy_produce_merge(struct kr_arena *a, struct kr_node *rsp,
                        const struct kr_legacy_parts *bad)
{
    struct kr_val *rv = kr_node_get_id(rsp, KR_FIELD_RESPONSES);
    struct kr_array *topics;
    struct merge_name *ix = NULL;
    uint32_t *target = NULL, *count = NULL, n0, nnew = 0, t;
    size_t i;
    int rc = KR_ENOMEM;

    if (rv == NULL || rv->is_null || rv->u.arr == NULL) {
        return KR_EPROTO;
    }
    if (bad->n == 0) {
        return KR_OK;
    }
    if (bad->n > UINT32_MAX / 2) {
        return KR_ELIMIT;
    }
    topics = rv->u.arr;
    n0 = topics->n;
    ix = malloc((n0 > 0 ? n0 : 1) * sizeof(*ix));
    target = malloc(bad->n * sizeof(*target));
    count = calloc(n0 + bad->n, sizeof(*count));
    if (ix == NULL || target == NULL || count == NULL) {
        goto out;
    }
    for (t = 0; t < n0; t++) {
        struct kr_val *nv = kr_node_get_id(topics->items[t].u.node,
                                           KR_FIELD_NAME);

        ix[t].p = nv != NULL && !nv->is_null && nv->u.s.len > 0
                      ? nv->u.s.p : (const uint8_t *)"";
        ix[t].len = nv != NULL && !nv->is_null && nv->u.s.len > 0
                        ? (size_t)nv->u.s.len : 0;
        ix[t].at = t;
    }
    qsort(ix, n0, sizeof(*ix), merge_name_cmp);
    for (i = 0; i < bad->n; i++) {
        const char *name = bad->v[i].topic;

        if (i > 0 && strcmp(name, bad->v[i - 1].topic) == 0) {
            target[i] = target[i - 1];      /* the same run */
        } else {
            struct merge_name key = { (const uint8_t *)name, strlen(name),
                                      0 };
            struct merge_name *f = bsearch(&key, ix, n0, sizeof(*ix),
                                           merge_name_cmp);

            target[i] = f != NULL ? f->at : n0 + nnew++;
        }
        count[target[i]]++;
    }
    if (nnew > 0) {
        struct kr_array *g = array_grow(a, topics, nnew, rsp->version);

        if (g == NULL) {
            goto out;
        }
        for (i = 0; i < bad->n; i++) {
            struct kr_val *nv;
            size_t tl;
            uint8_t *name;

            if (target[i] < n0 || (i > 0 && target[i] == target[i - 1])) {
                continue;
            }
            nv = kr_node_get_id(g->items[target[i]].u.node, KR_FIELD_NAME);
            tl = strlen(bad->v[i].topic);
            name = kr_arena_alloc(a, tl + 1);
            if (nv == NULL || name == NULL) {
                rc = nv == NULL ? KR_EPROTO : KR_ENOMEM;
                goto out;
            }
            memcpy(name, bad->v[i].topic, tl);
            nv->u.s.p = name;
            nv->u.s.len = (int32_t)tl;
            nv->is_null = 0;
        }
        rv->u.arr = topics = g;
    }
    /* count[] becomes each target's next free item */
    for (t = 0; t < n0 + nnew; t++) {
        struct kr_val *pv;
        struct kr_array *g;

        if (count[t] == 0) {
            continue;
        }
        pv = kr_node_get_id(topics->items[t].u.node,
                            KR_FIELD_PARTITION_RESPONSES);
        if (pv == NULL || pv->u.arr == NULL) {
            rc = KR_EPROTO;
            goto out;
        }
        g = array_grow(a, pv->u.arr, count[t], rsp->version);
        if (g == NULL) {
            goto out;
        }
        count[t] = pv->u.arr->n;
        pv->u.arr = g;
        pv->is_null = 0;
    }
    for (i = 0; i < bad->n; i++) {
        const struct kr_legacy_part *b = &bad->v[i];
        struct kr_val *pv = kr_node_get_id(topics->items[target[i]].u.node,
                                           KR_FIELD_PARTITION_RESPONSES);
        struct kr_node *pn = pv->u.arr->items[count[target[i]]++].u.node;
        struct kr_val *f;

        if ((f = kr_node_get_id(pn, KR_FIELD_INDEX)) != NULL) {
            f->u.i = b->partition;
        }
        if ((f = kr_node_get_id(pn, KR_FIELD_ERROR_CODE)) != NULL) {
            f->u.i = b->error;
        }
        if ((f = kr_node_get_id(pn, KR_FIELD_BASE_OFFSET)) != NULL) {
            f->u.i = -1;
        }
    }
    rc = KR_OK;
out:
    free(ix);
    free(target);
    free(count);
    return rc;
}

int
kr_legacy_fetch_parts(const struct kr_node *req, struct kr_legacy_parts *out)
{
    struct kr_array *topics = array_of((struct kr_node *)req,
                                       KR_FIELD_TOPICS);
    uint32_t t, p;

    if (topics == NULL) {
        return KR_OK;
    }
    for (t = 0; t < topics->n; t++) {
        struct kr_node *tn = topics->items[t].u.node;
        struct kr_val *name = kr_node_get_id(tn, KR_FIELD_TOPIC);
        struct kr_array *parts = array_of(tn, KR_FIELD_PARTITIONS);

        if (name == NULL || !name->present || parts == NULL) {
            continue;
        }
        for (p = 0; p < parts->n; p++) {
            struct kr_node *pn = parts->items[p].u.node;
            struct kr_val *pi = kr_node_get_id(pn, KR_FIELD_PARTITION);
            struct kr_val *fo = kr_node_get_id(pn, KR_FIELD_FETCH_OFFSET);
            struct kr_val *mb = kr_node_get_id(pn,
                                               KR_FIELD_PARTITION_MAX_BYTES);
            struct kr_legacy_part *e;

            if (pi == NULL) {
                continue;
            }
            e = parts_add(out, &name->u.s, (int32_t)pi->u.i);
            if (e == NULL) {
                return KR_ENOMEM;
            }
            e->fetch_offset = fo != NULL ? fo->u.i : 0;
            e->max_bytes = mb != NULL ? (int32_t)mb->u.i : INT32_MAX;
        }
    }
    return KR_OK;
}

static const struct kr_legacy_part *
parts_find(const struct kr_legacy_parts *parts, const struct kr_val *topic,
           int32_t partition, size_t *hint)
{
    size_t i, k;

    for (k = 0; k < parts->n; k++) {
        i = (*hint + k) % parts->n;
        if (parts->v[i].partition == partition &&
            str_is(topic, parts->v[i].topic)) {
            *hint = i + 1;
            return &parts->v[i];
        }
    }
    return NULL;
}

int
kr_legacy_fetch_down(struct kr_arena *a, struct kr_node *rsp,
                     const struct kr_rbuf *rb, int16_t client_version,
                     const struct kr_legacy_parts *parts,
                     const struct kr_legacy_rec_opts *o,
                     struct kr_records_stats *st, unsigned *nbad)
{
    struct kr_array *topics = array_of(rsp, KR_FIELD_RESPONSES);
    struct kr_bytes out = { 0 };
    struct kr_records_down_opts d;
    size_t hint = 0;
    uint32_t t, p;
    int rc = KR_OK;

    *nbad = 0;
    if (topics == NULL) {
        return KR_OK;           /* a top-level error: nothing to convert */
    }
    memset(&d, 0, sizeof(d));
    d.magic = client_version >= 2 ? 1 : 0;
    d.zstd = o->zstd;
    d.max_uncompressed = o->max_uncompressed;
    for (t = 0; t < topics->n && rc == KR_OK; t++) {
        struct kr_node *tn = topics->items[t].u.node;
        struct kr_val *name = kr_node_get_id(tn, KR_FIELD_TOPIC);
        struct kr_array *pa = array_of(tn, KR_FIELD_PARTITIONS);

        if (pa == NULL) {
            continue;
        }
        for (p = 0; p < pa->n; p++) {
            struct kr_node *pn = pa->items[p].u.node;
            struct kr_val *pi = kr_node_get_id(pn, KR_FIELD_PARTITION_INDEX);
            struct kr_val *ec = kr_node_get_id(pn, KR_FIELD_ERROR_CODE);
            struct kr_val *rec = kr_node_get_id(pn, KR_FIELD_RECORDS);
            const struct kr_legacy_part *lp;
            enum kr_records_outcome ro;
            struct iovec sv[16], *seg, *heap = NULL;
            int nseg;
            char why[96];
            size_t n;

            if (pi == NULL || rec == NULL || ec == NULL) {
                rc = KR_EPROTO;
                break;
            }
            rc = records_segs(rec, rb, sv, KR_ARRAY_LEN(sv), &seg, &nseg,
                              &heap);
            if (rc != KR_OK) {
                break;
            }
            n = 0;
            for (int k = 0; k < nseg; k++) {
                n += seg[k].iov_len;
            }
            if (n == 0) {
                continue;
            }
            lp = parts_find(parts, name, (int32_t)pi->u.i, &hint);
            d.fetch_offset = lp != NULL ? lp->fetch_offset : 0;
            d.max_bytes = lp != NULL && lp->max_bytes > 0
                              ? (size_t)lp->max_bytes : (size_t)INT32_MAX;
            rc = out_ready(&out, n);
            if (rc != KR_OK) {
                break;
            }
            why[0] = '\0';
            ro = kr_records_down_segs(seg, nseg, &d, &out, st, why,
                                      sizeof(why));
            free(heap);
            heap = NULL;
            if (ro == KR_RECORDS_NOMEM) {
                rc = KR_ENOMEM;
                break;
            }
            if (ro != KR_RECORDS_OK) {
                ec->u.i = outcome_error(ro);
                out.len = KR_XBUF_HDR;
                (*nbad)++;
            }
            rc = set_records(a, rec, &out);
            if (rc != KR_OK) {
                break;
            }
        }
    }
    kr_xbuf_close(&out);
    return rc;
}
