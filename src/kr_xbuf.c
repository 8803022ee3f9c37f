/*
 * kr_xbuf.c - shared byte blocks, reference counted, kept per thread
 * for reuse (kr_xbuf.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kr_xbuf.h"

/* A sealed block's header: the first KR_XBUF_HDR bytes. */
struct xhdr {
    atomic_uint refs;
    size_t cap;                 /* the region's bytes, header included */
};

/* A free block: the same bytes, linked into its thread's list. */
struct xfree {
    struct xfree *next;
    size_t cap;
};

_Static_assert(sizeof(struct xhdr) <= KR_XBUF_HDR, "header too large");
_Static_assert(sizeof(struct xfree) <= KR_XBUF_HDR, "header too large");

struct xpool {
    struct xfree *head;         /* the last given back first */
    size_t bytes;
};

static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static bool pool_ok;

static void
pool_free(void *arg)
{
    struct xpool *pl = arg;
    struct xfree *f, *next;

    if (pl == NULL) {
        return;
    }
    for (f = pl->head; f != NULL; f = next) {
        next = f->next;
        free(f);
    }
    free(pl);
}

static void
pool_init(void)
{
    pool_ok = pthread_key_create(&pool_key, pool_free) == 0;
}

/* The thread's pool; made when make (else NULL when it has none). */
static struct xpool *
pool_get(bool make)
{
    struct xpool *pl;

    if (pthread_once(&pool_once, pool_init) != 0 || !pool_ok) {
        return NULL;
    }
    pl = pthread_getspecific(pool_key);
    if (pl == NULL && make) {
        pl = calloc(1, sizeof(*pl));
        if (pl != NULL && pthread_setspecific(pool_key, pl) != 0) {
            free(pl);
            pl = NULL;
        }
    }
    return pl;
}

/* The region p of cap bytes kept by this thread, or freed. */
static void
give(void *p, size_t cap)
{
    struct xpool *pl = pool_get(false);
    struct xfree *f = p;

    if (pl == NULL || cap > KR_XBUF_KEEP_ONE ||
        pl->bytes + cap > KR_XBUF_KEEP_BYTES) {
        free(p);
        return;
    }
    f->next = pl->head;
    f->cap = cap;
    pl->head = f;
    pl->bytes += cap;
}

/* Fresh blocks: rounded up to this, so that they serve other sizes. */
#define XBUF_ROUND (256u << 10)

bool
kr_xbuf_open(struct kr_bytes *b, size_t hint)
{
    struct xpool *pl = pool_get(true);
    size_t need, cap;

    memset(b, 0, sizeof(*b));
    if (hint > SIZE_MAX - KR_XBUF_HDR - XBUF_ROUND) {
        return false;
    }
    need = KR_XBUF_HDR + hint;
    if (pl != NULL) {
        struct xfree **fp, *f;

        /* the last given back that is large enough (a few blocks) */
        for (fp = &pl->head; (f = *fp) != NULL; fp = &f->next) {
            if (f->cap >= need) {
                *fp = f->next;
                pl->bytes -= f->cap;
                b->p = (uint8_t *)f;
                b->cap = f->cap;
                b->len = KR_XBUF_HDR;
                return true;
            }
        }
    }
    /* a new one: no realloc of a kept one (it would copy its bytes) */
    cap = (need + XBUF_ROUND - 1) / XBUF_ROUND * XBUF_ROUND;
    b->p = malloc(cap);
    if (b->p == NULL) {
        return false;
    }
    b->cap = cap;
    b->len = KR_XBUF_HDR;
    return true;
}

const uint8_t *
kr_xbuf_seal(struct kr_bytes *b)
{
    struct xhdr *h = (struct xhdr *)(void *)b->p;
    size_t cap = b->cap;

    atomic_init(&h->refs, 1);
    h->cap = cap;
    memset(b, 0, sizeof(*b));
    return (const uint8_t *)h + KR_XBUF_HDR;
}

void
kr_xbuf_close(struct kr_bytes *b)
{
    if (b->p != NULL) {
        give(b->p, b->cap);
    }
    memset(b, 0, sizeof(*b));
}

static struct xhdr *
hdr_of(const uint8_t *p)
{
    return (struct xhdr *)(void *)(uintptr_t)(p - KR_XBUF_HDR);
}

void
kr_xbuf_ref(const uint8_t *p)
{
    atomic_fetch_add_explicit(&hdr_of(p)->refs, 1, memory_order_relaxed);
}

void
kr_xbuf_unref(const uint8_t *p)
{
    struct xhdr *h = hdr_of(p);

    if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
        give(h, h->cap);
    }
}

void
kr_xbuf_unref_cb(void *p)
{
    kr_xbuf_unref(p);
}
