/*
 * kr_inflight.c - the CorrelationId FIFO of one session (kr_inflight.h).
 */
#include "config.h"

#include <stdlib.h>

#include "kr_common.h"
#include "kr_inflight.h"

int
kr_inflight_push(struct kr_inflight_fifo *f, const struct kr_inflight *e)
{
    if (f->len == f->cap) {
        uint32_t cap = f->cap ? f->cap * 2 : KR_INFLIGHT_CAP0, i;
        struct kr_inflight *r = malloc(cap * sizeof(*r));

        if (r == NULL) {
            return KR_ENOMEM;
        }
        for (i = 0; i < f->len; i++) {
            r[i] = f->ring[(f->head + i) % f->cap];
        }
        free(f->ring);
        f->ring = r;
        f->cap = cap;
        f->head = 0;
    }
    f->ring[(f->head + f->len) % f->cap] = *e;
    if (e->optional) {
        f->opt++;
    }
    if (f->len++ == 0) {
        f->head_since_ms = e->sent_ms;
    }
    return KR_OK;
}

struct kr_inflight *
kr_inflight_head(struct kr_inflight_fifo *f)
{
    return f->len ? &f->ring[f->head] : NULL;
}

struct kr_inflight *
kr_inflight_at(struct kr_inflight_fifo *f, uint32_t i)
{
    return &f->ring[(f->head + i) % f->cap];
}

void
kr_inflight_pop(struct kr_inflight_fifo *f, int64_t now_ms)
{
    if (f->ring[f->head].optional) {
        f->opt--;
    }
    f->head = (f->head + 1) % f->cap;
    f->len--;
    f->head_since_ms = now_ms;
}

void
kr_inflight_remove(struct kr_inflight_fifo *f, uint32_t i, int64_t now_ms)
{
    uint32_t cap = f->cap, h = f->head;

    if (i == 0) {
        kr_inflight_pop(f, now_ms);
        return;
    }
    if (f->ring[(h + i) % cap].optional) {
        f->opt--;
    }
    for (; i > 0; i--) {
        f->ring[(h + i) % cap] = f->ring[(h + i - 1) % cap];
    }
    f->head = (h + 1) % cap;
    f->len--;
}

struct kr_inflight *
kr_inflight_first(struct kr_inflight_fifo *f, uint32_t *idx)
{
    uint32_t i;

    for (i = 0; i < f->len; i++) {
        struct kr_inflight *e = &f->ring[(f->head + i) % f->cap];

        if (!e->optional) {
            *idx = i;
            return e;
        }
    }
    *idx = 0;
    return NULL;
}

uint32_t
kr_inflight_expected(const struct kr_inflight_fifo *f)
{
    return f->len - f->opt;
}

bool
kr_inflight_has(const struct kr_inflight_fifo *f, int32_t corr)
{
    uint32_t i;

    for (i = 0; i < f->len; i++) {
        if (f->ring[(f->head + i) % f->cap].correlation_id == corr) {
            return true;
        }
    }
    return false;
}

int64_t
kr_inflight_since(const struct kr_inflight_fifo *f,
                  const struct kr_inflight *e, uint32_t i)
{
    return i > 0 && e->sent_ms > f->head_since_ms ? e->sent_ms
                                                  : f->head_since_ms;
}

void
kr_inflight_free(struct kr_inflight_fifo *f)
{
    free(f->ring);
    f->ring = NULL;
    f->cap = f->head = f->len = f->opt = 0;
}
