/*
 * kr_arena.h - the bump allocator decoded trees live in (kr_codec.h): one
 * arena per frame (or per call), freed at once.
 *
 * Not thread-safe: an arena belongs to one thread at a time.
 */
#ifndef KR_ARENA_H
#define KR_ARENA_H

#include <stddef.h>

/*
 * A bump allocator: everything a decode or a tree build allocates comes
 * from one arena and is freed at once by kr_arena_reset/kr_arena_free.
 * The struct may live on the stack; kr_arena_init allocates nothing.
 */
struct kr_arena_chunk;
struct kr_arena_defer;
struct kr_arena {
    struct kr_arena_chunk *head;  /* newest chunk */
    struct kr_arena_defer *defer; /* kr_arena_defer's calls, newest first */
    size_t used;                  /* bytes handed out (statistics) */
    size_t limit;                 /* 0 = unlimited; else max bytes to hold */
};

/* Initialise an empty arena.  limit: bytes, 0 for no limit. */
void kr_arena_init(struct kr_arena *a, size_t limit);
/*
 * size bytes aligned to 8, zero-filled; NULL when out of memory or over
 * the limit.  Owned by the arena.
 */
void *kr_arena_alloc(struct kr_arena *a, size_t size);
/*
 * The same, its bytes not zeroed: for a caller that writes all of them at
 * once (bytes copied in: records converted by legacy translation).
 */
void *kr_arena_alloc_uninit(struct kr_arena *a, size_t size);
/*
 * fn(arg) called when the arena is next reset or freed (newest first,
 * before its memory goes): what the tree holds beyond the arena, given
 * back with it (records in shared blocks, kr_xbuf_unref_cb).  KR_OK, or
 * KR_ENOMEM (nothing registered: the caller lets go itself).
 */
int kr_arena_defer(struct kr_arena *a, void (*fn)(void *), void *arg);
/*
 * Free all but the first chunk; every pointer handed out becomes invalid.
 * Runs the deferred calls first.
 */
void kr_arena_reset(struct kr_arena *a);
/* Free everything (the deferred calls run first). */
void kr_arena_free(struct kr_arena *a);

#endif /* KR_ARENA_H */
