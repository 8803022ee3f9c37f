/*
 * kr_xbuf.h - shared byte blocks: bytes built once (records converted by
 * legacy translation, kr_legacy_records.h) and handed to several owners
 * without a copy: the decoded tree's arena (kr_arena_defer) and the
 * evbuffer chains that write them (kr_evcodec_emit,
 * evbuffer_add_reference), the last owner to let go giving the block
 * back.  Reference counted; blocks kept per thread for reuse.
 *
 * Why: a converted Fetch response is megabytes.  Copied into the arena,
 * then into the encoder's buffer, then written, each copy into fresh
 * memory (glibc's mmap threshold: mmap, a page fault per page, munmap),
 * the copies and the faults cost most of the translation.  A block is
 * written once by the converter and read once by writev(2); a thread's
 * free blocks are reused (already faulted in, often still in cache).
 *
 * Memory: a block is one malloc'd region, a 16-byte header (the count)
 * then the data; a reference is the data pointer.  A thread keeps up to
 * KR_XBUF_KEEP_BYTES of free blocks (each at most KR_XBUF_KEEP_ONE
 * bytes; larger ones freed) and frees them when it ends.  Blocks may be
 * let go on any thread (the count is atomic); they then join that
 * thread's free blocks.
 */
#ifndef KR_XBUF_H
#define KR_XBUF_H

#include <stddef.h>
#include <stdint.h>

#include "kr_compress.h"

#define KR_XBUF_HDR 16u
#define KR_XBUF_KEEP_BYTES (64u << 20)
#define KR_XBUF_KEEP_ONE (8u << 20)

/*
 * b (its contents ignored) becomes an open block with room for at least
 * hint bytes of data: the thread's free block given back last that is
 * large enough, else a new one (malloc'd, rounded up to 256 KiB);
 * b->len KR_XBUF_HDR (the header's room: data goes after it).  Append
 * with kr_bytes_reserve/kr_bytes_add as to any kr_bytes (it may move).
 * Then kr_xbuf_seal or kr_xbuf_close.  False when out of memory (b
 * zeroed).
 */
bool kr_xbuf_open(struct kr_bytes *b, size_t hint) KR_MUST_CHECK;

/*
 * The open block b sealed: its data (b->p + KR_XBUF_HDR, b->len -
 * KR_XBUF_HDR bytes) is returned with one reference, the caller's; b is
 * left zeroed.
 */
const uint8_t *kr_xbuf_seal(struct kr_bytes *b);

/* An open block given back without sealing it (b zeroed). */
void kr_xbuf_close(struct kr_bytes *b);

/* One more reference to the block whose data is p. */
void kr_xbuf_ref(const uint8_t *p);

/* One reference less; the last gives the block back (kept or freed). */
void kr_xbuf_unref(const uint8_t *p);

/* kr_xbuf_unref for a callback's void pointer (kr_arena_defer). */
void kr_xbuf_unref_cb(void *p);

#endif /* KR_XBUF_H */
