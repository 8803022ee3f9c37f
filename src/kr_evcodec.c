/*
 * kr_evcodec.c - evbuffer chains <-> the codec's views (kr_evcodec.h):
 * decode frames where libevent holds them, write re-encoded ones with
 * their records moved, never copied.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/uio.h>

#include "kr_evcodec.h"
#include "kr_frame.h"
#include "kr_xbuf.h"

int
kr_evcodec_view(struct evbuffer *payload, struct iovec *stack, int nstack,
                struct iovec **heap, struct kr_rbuf *rb)
{
    int n = evbuffer_peek(payload, -1, NULL, NULL, 0);
    struct iovec *iov = stack;

    *heap = NULL;
    if (n < 0) {
        return KR_ERROR;
    }
    if (n > nstack) {
        /*
         * More chains than the stack array holds: a bigger view, still
         * no copy of the bytes.  (evbuffer_pullup would copy records.)
         */
        iov = calloc((size_t)n, sizeof(*iov));
        if (iov == NULL) {
            return KR_ENOMEM;
        }
        *heap = iov;
    }
    if (n > 0 && evbuffer_peek(payload, -1, NULL, iov, n) != n) {
        free(*heap);
        *heap = NULL;
        return KR_ERROR;
    }
    rb->seg = iov;
    rb->nseg = n;
    rb->len = evbuffer_get_length(payload);
    return KR_OK;
}

/* evbuffer_add_reference's cleanup: a shared block's reference. */
static void
shared_unref(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    kr_xbuf_unref(data);
}

static int
add_size_prefix(struct evbuffer *out, uint64_t len)
{
    uint8_t p[4];

    kr_frame_put_size(p, len);
    return evbuffer_add(out, p, 4) == 0 ? KR_OK : KR_ENOMEM;
}

int
kr_evcodec_pass(struct evbuffer *payload, struct evbuffer *out)
{
    if (add_size_prefix(out, evbuffer_get_length(payload)) != KR_OK ||
        evbuffer_add_buffer(out, payload) != 0) {
        return KR_ENOMEM;
    }
    return KR_OK;
}

int
kr_evcodec_emit(struct evbuffer *payload, struct evbuffer *out,
                const struct kr_wbuf *w, const struct kr_msg *m, char *err,
                size_t errlen)
{
    size_t plen = evbuffer_get_length(payload);
    uint64_t consumed = 0, total;
    size_t pos = 0, i;

    /* Check every slice first: out stays untouched on a bad wbuf. */
    for (i = 0; i < w->nrecs; i++) {
        const struct kr_wbuf_rec *r = &w->recs[i];

        if (r->ext != NULL) {
            if (r->len <= 0 || r->at < pos || r->at > w->len) {
                snprintf(err, errlen,
                         "internal: records slice %zu out of order", i);
                return KR_ERROR;
            }
            pos = r->at;
            continue;
        }
        if (r->len < 0 || r->at < pos || r->at > w->len ||
            r->src_off < consumed || r->src_off > plen ||
            (uint64_t)r->len > plen - r->src_off) {
            snprintf(err, errlen,
                     "internal: records slice %zu out of order", i);
            return KR_ERROR;
        }
        pos = r->at;
        consumed = r->src_off + (uint64_t)r->len;
    }
    if (m->trailing > 0 &&
        (m->trailing_off < consumed || m->trailing_off > plen ||
         m->trailing > plen - m->trailing_off)) {
        snprintf(err, errlen,
                 "internal: trailing bytes overlap the body");
        return KR_ERROR;
    }
    total = (uint64_t)w->total + m->trailing;
    if (total > INT32_MAX) {
        snprintf(err, errlen,
                 "rewritten response of %llu bytes too large",
                 (unsigned long long)total);
        return KR_ELIMIT;
    }

    if (add_size_prefix(out, total) != KR_OK) {
        return KR_ENOMEM;
    }
    pos = 0;
    consumed = 0;
    for (i = 0; i < w->nrecs; i++) {
        const struct kr_wbuf_rec *r = &w->recs[i];

        if (r->at > pos && evbuffer_add(out, w->buf + pos, r->at - pos) != 0) {
            return KR_ENOMEM;
        }
        pos = r->at;
        if (r->ext != NULL) {
            /* a shared block: libevent's reference, let go once written */
            kr_xbuf_ref(r->ext);
            if (evbuffer_add_reference(out, r->ext, (size_t)r->len,
                                       shared_unref, NULL) != 0) {
                kr_xbuf_unref(r->ext);
                return KR_ENOMEM;
            }
            continue;
        }
        if (r->src_off > consumed &&
            evbuffer_drain(payload, (size_t)(r->src_off - consumed)) != 0) {
            return KR_ERROR;
        }
        consumed = r->src_off;
        if (r->len > 0 &&
            evbuffer_remove_buffer(payload, out, (size_t)r->len) != r->len) {
            return KR_ERROR;
        }
        consumed += (uint64_t)r->len;
    }
    if (w->len > pos && evbuffer_add(out, w->buf + pos, w->len - pos) != 0) {
        return KR_ENOMEM;
    }
    if (m->trailing > 0) {
        if (m->trailing_off > consumed &&
            evbuffer_drain(payload,
                           (size_t)(m->trailing_off - consumed)) != 0) {
            return KR_ERROR;
        }
        if (evbuffer_remove_buffer(payload, out, m->trailing) !=
            (int)m->trailing) {
            return KR_ERROR;
        }
    }
    evbuffer_drain(payload, evbuffer_get_length(payload));
    return KR_OK;
}

/* evbuffer_add_reference's cleanup: a buffer given by a kr_wbuf. */
static void
give_free(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)(uintptr_t)data);
}

int
kr_evcodec_emit_own(struct evbuffer *payload, struct evbuffer *out,
                    struct kr_wbuf *w, const struct kr_msg *m, char *err,
                    size_t errlen)
{
    if (w->nrecs > 0 || m->trailing > 0 || w->failed || w->buf == NULL ||
        w->len < KR_EVCODEC_GIVE_MIN || w->len > INT32_MAX) {
        return kr_evcodec_emit(payload, out, w, m, err, errlen);
    }
    if (add_size_prefix(out, w->len) != KR_OK ||
        evbuffer_add_reference(out, w->buf, w->len, give_free, NULL) != 0) {
        return KR_ENOMEM;
    }
    /* out owns the bytes now */
    w->buf = NULL;
    w->len = 0;
    w->cap = 0;
    w->total = 0;
    evbuffer_drain(payload, evbuffer_get_length(payload));
    return KR_OK;
}
