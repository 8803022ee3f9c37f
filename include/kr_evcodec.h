/*
 * kr_evcodec.h - libevent's evbuffer chains <-> the codec's views: decode
 * a frame where libevent holds it (no pullup, no copy), and write a
 * re-encoded frame with its records slices moved from the original
 * chains, never copied.
 *
 * The seam between the byte-moving layers (kr_conn, kr_session) and the
 * ones that know only flat views (kr_codec, kr_analyse): those never see
 * an evbuffer.  Functions here hold no state.
 */
#ifndef KR_EVCODEC_H
#define KR_EVCODEC_H

#include <stddef.h>

#include <event2/buffer.h>

#include "kr_codec.h"
#include "kr_common.h"

struct iovec;

/*
 * A codec view (struct kr_rbuf) of all of payload's evbuffer chains, for
 * decoding in place: no pullup, no copy of the bytes.  iov entries go in
 * stack (nstack entries) when the chains fit, else in a malloc'd array
 * returned in *heap, which the caller frees (NULL otherwise).  The view is
 * valid while payload is not modified.  Returns KR_OK, KR_ENOMEM or
 * KR_ERROR (nothing to free then).
 */
int kr_evcodec_view(struct evbuffer *payload, struct iovec *stack,
                    int nstack, struct iovec **heap,
                    struct kr_rbuf *rb) KR_MUST_CHECK;

/*
 * Move payload (a frame without its size prefix) to out with its int32
 * size prefix.  Returns KR_OK or KR_ENOMEM.
 */
int kr_evcodec_pass(struct evbuffer *payload, struct evbuffer *out)
    KR_MUST_CHECK;

/*
 * Write a re-encoded frame: out gets the int32 size prefix, then w's own
 * bytes with every records slice moved (evbuffer chains, never copied)
 * from payload, the frame m was decoded from (without its size prefix),
 * then m's trailing bytes.  A slice of a shared block (.ext, kr_xbuf.h)
 * is added by reference (evbuffer_add_reference), with a reference of
 * out's own let go once libevent is done with it.  payload is drained.  Returns KR_OK; KR_ELIMIT
 * when the frame would exceed INT32_MAX and KR_ERROR when w's slices do
 * not fit payload (nothing written; err, errlen bytes, says why); KR_ENOMEM
 * (err untouched: the caller names it, kr_status_str).
 */
int kr_evcodec_emit(struct evbuffer *payload, struct evbuffer *out,
                    const struct kr_wbuf *w, const struct kr_msg *m,
                    char *err, size_t errlen) KR_MUST_CHECK;

/*
 * kr_evcodec_emit, but a large frame without records slices (every
 * record re-encoded into w, as legacy translation's are: w->nrecs 0, no
 * trailing bytes, at least KR_EVCODEC_GIVE_MIN bytes) gives w's buffer
 * to out (evbuffer_add_reference; libevent frees it once written)
 * instead of copying it: w is left empty (buf NULL), kr_wbuf_free still
 * safe.  Otherwise exactly kr_evcodec_emit.  Same results.
 */
#define KR_EVCODEC_GIVE_MIN 16384
int kr_evcodec_emit_own(struct evbuffer *payload, struct evbuffer *out,
                        struct kr_wbuf *w, const struct kr_msg *m,
                        char *err, size_t errlen) KR_MUST_CHECK;

#endif /* KR_EVCODEC_H */
