/*
 * kr_arena.c - bump allocator for decoded trees (see kr_arena.h).
 *
 * Chunks are malloc'd on demand and grow geometrically (8 KiB doubling up
 * to 1 MiB); an allocation larger than that gets a chunk of its own.
 * kr_arena_reset keeps the newest chunk of ordinary size (the largest
 * one), so a connection decoding frames of a steady size stops calling
 * malloc after the first few frames; a thread keeps one spare 8 KiB
 * chunk for arenas made and freed per frame (spare_take, chunk_free).
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kr_arena.h"
#include "kr_common.h"

#define KR_ARENA_MIN_CHUNK (8u * 1024u)
#define KR_ARENA_MAX_CHUNK (1024u * 1024u)
#define KR_ARENA_ALIGN 8u

struct kr_arena_chunk {
    struct kr_arena_chunk *next;    /* older chunk */
    size_t size;                    /* usable bytes in data[] */
    size_t used;
    size_t held;                    /* bytes counted against the limit */
    /* data follows, 8-aligned (the header is 32 bytes) */
};

/*
 * One spare first-size chunk per thread: the arenas of one request or
 * response (made and freed per frame) reuse it instead of a malloc and a
 * free of 8 KiB each, which glibc serves from its bins, not from its
 * per-thread cache.  The thread-specific key frees a thread's spare
 * when the thread ends.
 */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_ok;

static void
spare_init(void)
{
    spare_ok = pthread_key_create(&spare_key, free) == 0;
}

/* The thread's spare chunk (taken: the thread has none after), or NULL. */
static struct kr_arena_chunk *
spare_take(void)
{
    struct kr_arena_chunk *c;

    (void)pthread_once(&spare_once, spare_init);
    if (!spare_ok || (c = pthread_getspecific(spare_key)) == NULL) {
        return NULL;
    }
    (void)pthread_setspecific(spare_key, NULL);
    return c;
}

/* Free c, or keep it as the thread's spare (a first-size chunk, when the
   thread has none). */
static void
chunk_free(struct kr_arena_chunk *c)
{
    if (c->size == KR_ARENA_MIN_CHUNK && spare_ok &&
        pthread_getspecific(spare_key) == NULL &&
        pthread_setspecific(spare_key, c) == 0) {
        return;
    }
    free(c);
}

/* A call kr_arena_defer registered (arena memory). */
struct kr_arena_defer {
    struct kr_arena_defer *next;
    void (*fn)(void *);
    void *arg;
};

int
kr_arena_defer(struct kr_arena *a, void (*fn)(void *), void *arg)
{
    struct kr_arena_defer *d = kr_arena_alloc_uninit(a, sizeof(*d));

    if (d == NULL) {
        return KR_ENOMEM;
    }
    d->fn = fn;
    d->arg = arg;
    d->next = a->defer;
    a->defer = d;
    return KR_OK;
}

static void
run_defer(struct kr_arena *a)
{
    struct kr_arena_defer *d = a->defer;

    a->defer = NULL;
    for (; d != NULL; d = d->next) {
        d->fn(d->arg);
    }
}

static size_t
arena_held(const struct kr_arena *a)
{
    size_t held = 0;
    const struct kr_arena_chunk *c;

    for (c = a->head; c != NULL; c = c->next) {
        held += c->held;
    }
    return held;
}

void
kr_arena_init(struct kr_arena *a, size_t limit)
{
    a->head = NULL;
    a->defer = NULL;
    a->used = 0;
    a->limit = limit;
}

static struct kr_arena_chunk *
arena_grow(struct kr_arena *a, size_t need)
{
    struct kr_arena_chunk *c;
    size_t size, held;

    size = a->head != NULL ? a->head->size * 2 : KR_ARENA_MIN_CHUNK;
    if (size > KR_ARENA_MAX_CHUNK) {
        size = KR_ARENA_MAX_CHUNK;
    }
    if (size < need) {
        size = need;
    }
    if (size > SIZE_MAX - sizeof(*c)) {
        return NULL;
    }
    held = size + sizeof(*c);
    if (size == KR_ARENA_MIN_CHUNK && (a->limit == 0 ||
        (arena_held(a) <= a->limit && held <= a->limit - arena_held(a))) &&
        (c = spare_take()) != NULL) {
        goto got;
    }
    if (a->limit != 0) {
        size_t cur = arena_held(a);

        if (cur > a->limit || held > a->limit - cur) {
            /* retry with just what is needed */
            if (need > SIZE_MAX - sizeof(*c)) {
                return NULL;
            }
            size = need;
            held = size + sizeof(*c);
            if (cur > a->limit || held > a->limit - cur) {
                return NULL;
            }
        }
    }
    c = malloc(held);
    if (c == NULL) {
        return NULL;
    }
got:
    c->next = a->head;
    c->size = size;
    c->used = 0;
    c->held = held;
    a->head = c;
    return c;
}

void *
kr_arena_alloc_uninit(struct kr_arena *a, size_t size)
{
    struct kr_arena_chunk *c = a->head;
    size_t n;
    uint8_t *p;

    if (size > SIZE_MAX - KR_ARENA_ALIGN) {
        return NULL;
    }
    n = (size + KR_ARENA_ALIGN - 1) & ~(size_t)(KR_ARENA_ALIGN - 1);
    if (n == 0) {
        n = KR_ARENA_ALIGN;
    }
    if (c == NULL || c->size - c->used < n) {
        c = arena_grow(a, n);
        if (c == NULL) {
            return NULL;
        }
    }
    p = (uint8_t *)(c + 1) + c->used;
    c->used += n;
    a->used += n;
    return p;
}

void *
kr_arena_alloc(struct kr_arena *a, size_t size)
{
    void *p = kr_arena_alloc_uninit(a, size);

    if (p != NULL) {
        memset(p, 0, size);
    }
    return p;
}

void
kr_arena_reset(struct kr_arena *a)
{
    struct kr_arena_chunk *c, *next, *keep = NULL;

    run_defer(a);
    /* keep the newest ordinary chunk; oversized ones go back to malloc */
    for (c = a->head; c != NULL; c = c->next) {
        if (c->size <= KR_ARENA_MAX_CHUNK) {
            keep = c;
            break;
        }
    }
    for (c = a->head; c != NULL; c = next) {
        next = c->next;
        if (c != keep) {
            chunk_free(c);
        }
    }
    a->head = keep;
    if (keep != NULL) {
        keep->next = NULL;
        keep->used = 0;
    }
    a->used = 0;
}

void
kr_arena_free(struct kr_arena *a)
{
    struct kr_arena_chunk *c, *next;

    run_defer(a);
    for (c = a->head; c != NULL; c = next) {
        next = c->next;
        chunk_free(c);
    }
    a->head = NULL;
    a->used = 0;
}
