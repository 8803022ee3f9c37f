/*
 * kr_session_rounds.c - a translated Produce v0-2 whose records became
 * several RecordBatches per partition goes up as several Produce
 * requests (issue 10: "batches are split to at most a configurable
 * size"; struct kr_legacy_split says why and how they are aligned).
 *
 *   apply_request (kr_session_rules.c), KR_AN_FORWARD_TRANSLATED with
 *   d->nrounds > 0:
 *     kr_s_rounds_send  --> each round as a request of krelay's own
 *                           (KR_INF_INTERNAL, the client's CorrelationId,
 *                           a reference to the splits each), then the
 *                           client's request, which carries every
 *                           partition's last batch.  Acks=0: the rounds
 *                           are optional entries, as the client's
 *                           request (the broker answers none).
 *     round_answer      <-- a round's response, never the client's:
 *                           decoded at the upstream version, its
 *                           partitions taken (kr_legacy_split_take).  The
 *                           client's response comes after every round's
 *                           (one connection, in order) and gets them
 *                           merged (kr_analyse.c legacy_down).
 *
 * A round's answer that does not decode closes the connection blaming
 * the upstream (the client's answer could not be told).  A connection
 * that closes with rounds in flight lets their references go
 * (session_free calls each with no payload).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <event2/buffer.h>

#include "kr_api_keys.h"
#include "kr_arena.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_common.h"
#include "kr_evcodec.h"
#include "kr_frame.h"
#include "kr_legacy_records.h"
#include "kr_log.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_session_int.h"

/* evbuffer_add_reference's cleanup: a round's frame (malloc'd). */
static void
round_free(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)(uintptr_t)data);
}

/* A round's answer (payload NULL: the connection closes first). */
static void
round_answer(struct kr_session *s, void *arg, int16_t key, int16_t ver,
             struct evbuffer *payload)
{
    struct kr_legacy_splits *sp = arg;
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct kr_msg m;
    int rc;

    if (payload == NULL || s->dead) {
        kr_legacy_splits_unref(sp);
        return;
    }
    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    rc = kr_evcodec_view(payload, stack, (int)KR_ARRAY_LEN(stack), &heap,
                         &rb);
    if (rc == KR_OK) {
        rc = kr_decode_response(&arena, &rb, key, ver, 0, &m, &ce);
    }
    if (rc == KR_OK) {
        rc = kr_legacy_split_take(sp, m.body);
    }
    free(heap);
    kr_arena_free(&arena);
    kr_legacy_splits_unref(sp);
    if (rc == KR_ENOMEM) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
    } else if (rc != KR_OK) {
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s answered krelay's own "
                      "Produce v%d (a batch of a translated Produce v0-2 "
                      "request) with a response that does not decode "
                      "(%.150s)", s->upname, ver,
                      ce.msg[0] != '\0' ? ce.msg : kr_status_str(rc));
    }
}

int
kr_s_rounds_send(struct kr_session *s, const struct kr_nreq *nr,
                 struct kr_an_decision *d)
{
    uint32_t i;

    for (i = 0; i < d->nrounds; i++) {
        struct kr_an_round *r = &d->rounds[i];
        struct kr_inflight e;
        uint8_t prefix[KR_FRAME_PREFIX];
        int rc;

        if (nr->expect) {
            memset(&e, 0, sizeof(e));
            e.correlation_id = nr->h.correlation_id;
            e.api_key = KR_API_PRODUCE;
            e.api_version = d->rounds_version;
            e.kind = KR_INF_INTERNAL;
            e.sent_ms = kr_clock_timer_ms();
            /* the broker may hold it as long as the client's: TimeoutMs
               (acks=all waits for the replicas) */
            e.wait_ms = nr->e.wait_ms;
            e.internal = malloc(sizeof(*e.internal));
            if (e.internal == NULL) {
                goto nomem;
            }
            e.internal->cb = round_answer;
            e.internal->arg = d->splits;
            if (kr_s_fifo_push(s, &e) != KR_OK) {
                free(e.internal);
                goto nomem;
            }
            kr_legacy_splits_ref(d->splits);
        } else {
            /* Acks=0: none is answered, as for the client's own */
            e = nr->e;
            e.rq = NULL;
            if (kr_s_push_optional(s, &e) != 0) {
                return -1;
            }
        }
        kr_frame_put_size(prefix, r->len);
        rc = evbuffer_add(s->up.out, prefix, sizeof(prefix));
        if (rc == 0) {
            rc = evbuffer_add_reference(s->up.out, r->p, r->len, round_free,
                                        NULL);
        }
        if (rc != 0) {
            goto nomem;
        }
        r->p = NULL;                    /* up.out frees it */
        KR_STAT_INC(s->host->stats, requests_internal);
        KR_STAT_INC(s->host->stats, legacy_produce_rounds);
    }
    return 0;
nomem:
    kr_session_close(s, KR_LOG_ERROR, "out of memory");
    return -1;
}
