/*
 * kr_session_rounds.c - a translated Produce v0-2 whose records became
 * several RecordBatches per partition goes up as several Produce
 * requests (issue 10: "batches are split to at most a configurable
 * size"; struct kr_legacy_split says why and how they are aligned).
 *
 *   apply_request (kr_session_rules.c), KR_AN_FORWARD_TRANSLATED with
 *   d->nrounds > 0:
 *     kr_s_rounds_send  --> Acks != 0: every round gets its in-flight
 *                           entry now (KR_INF_INTERNAL, the client's
 *                           CorrelationId, a reference to the splits
 *                           each), in order, the client's own entry after
 *                           them (apply_request pushes it); only round 0
 *                           is written.  The client's request, which
 *                           carries every partition's last batch, waits
 *                           in s->rounds->frame, and so do the client's
 *                           later requests (process_requests holds them
 *                           while s->rounds is set, as av_hold does: the
 *                           client is not read on, req_blocked).
 *                           Acks=0: the rounds and the client's request
 *                           all go at once, optional entries (no answer
 *                           to wait for).
 *     round_answer      <-- a round's response, never the client's:
 *                           decoded at the upstream version, its
 *                           partitions taken (kr_legacy_split_take).
 *                           No error in any of them
 *                           (kr_legacy_split_round_error): the next round
 *                           is written (its entry is the FIFO's next, its
 *                           clock starts now), after the last the
 *                           client's request; s->rounds goes, the upstream
 *                           read that brought the answer resumes the
 *                           client's requests.  The client's response
 *                           comes after every round's and gets them
 *                           merged (kr_analyse.c legacy_down).
 *                           An error: nothing more goes up; the waiting
 *                           rounds' entries leave the FIFO and the
 *                           client's request is answered by krelay with
 *                           that error for its every partition
 *                           (kr_s_rounds_failed_answer ->
 *                           kr_analyse_rounds_failed).  A retry of the set
 *                           then stores it after a prefix of it: the
 *                           partition's order is kept (a prefix may be
 *                           stored twice, as any retry without
 *                           idempotence stores it).
 *
 * Each round waits for its answer as the client's request would
 * (TimeoutMs, the session's request timeout from when it becomes the
 * oldest entry).  A round's answer that does not decode closes the
 * connection blaming the upstream (the client's answer could not be
 * told).  A connection that closes with rounds in flight or waiting lets
 * their references go once each (session_free calls each entry's owner
 * with no payload, then kr_s_rounds_free).
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
#include "kr_kerr.h"
#include "kr_legacy_records.h"
#include "kr_log.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_session_int.h"

/*
 * A translated Produce whose rounds go up one at a time (Acks != 0): the
 * session's while they do (s->rounds).
 */
struct kr_s_rounds {
    struct kr_legacy_splits *splits;    /* one reference */
    struct kr_an_round *v;              /* the rounds' frames (malloc'd,
                                           each NULL once written) */
    uint32_t n;                         /* rounds */
    uint32_t next;                      /* the next to write (the one
                                           answered is next - 1) */
    int16_t version;                    /* their version (the client's
                                           request's upstream version) */
    int16_t client_version;             /* the client's Produce version */
    int32_t correlation_id;             /* the client's */
    struct evbuffer *frame;             /* the client's request as it goes
                                           up, size prefix included */
};

/* evbuffer_add_reference's cleanup: a round's frame (malloc'd). */
static void
round_free(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)(uintptr_t)data);
}

void
kr_s_rounds_free(struct kr_session *s)
{
    struct kr_s_rounds *st = s->rounds;
    uint32_t i;

    if (st == NULL) {
        return;
    }
    for (i = 0; i < st->n; i++) {
        free(st->v[i].p);
    }
    free(st->v);
    if (st->frame != NULL) {
        evbuffer_free(st->frame);
    }
    kr_legacy_splits_unref(st->splits);
    free(st);
    s->rounds = NULL;
}

uint32_t
kr_s_rounds_unsent(const struct kr_session *s)
{
    return s->rounds != NULL ? s->rounds->n - s->rounds->next : 0;
}

/* Round r's frame onto up.out (taken from r).  0, or -1 on ENOMEM. */
static int
round_write(struct kr_session *s, struct kr_an_round *r)
{
    uint8_t prefix[KR_FRAME_PREFIX];

    kr_frame_put_size(prefix, r->len);
    if (evbuffer_add(s->up.out, prefix, sizeof(prefix)) != 0 ||
        evbuffer_add_reference(s->up.out, r->p, r->len, round_free,
                               NULL) != 0) {
        return -1;
    }
    r->p = NULL;                        /* up.out frees it */
    KR_STAT_INC(s->host->stats, requests_internal);
    KR_STAT_INC(s->host->stats, legacy_produce_rounds);
    return 0;
}

static void round_answer(struct kr_session *s, void *arg, int16_t key,
                         int16_t ver, struct evbuffer *payload);

/* Is e the entry of a round of sp? */
static bool
round_entry(const struct kr_inflight *e, const struct kr_legacy_splits *sp)
{
    return e->kind == KR_INF_INTERNAL && e->internal != NULL &&
           e->internal->cb == round_answer && e->internal->arg == sp;
}

/*
 * The rounds of st end before the last (error; why says why, for the
 * client's answer's audit note): the waiting rounds' entries leave the
 * FIFO (their references go), the client's request is answered by krelay
 * with error, s->rounds goes.  Returns 0, or -1 when closed.
 */
static int
rounds_fail(struct kr_session *s, struct kr_s_rounds *st, int16_t error,
            const char *why)
{
    struct kr_inflight *e, *client = NULL;
    uint32_t i;

    for (i = 0; i < s->fifo.len;) {
        e = kr_s_fifo_at(s, i);
        if (round_entry(e, st->splits)) {
            free(e->internal);
            e->internal = NULL;
            kr_s_fifo_remove(s, i);     /* the entries before it keep
                                           their places */
            kr_legacy_splits_unref(st->splits);
            continue;
        }
        i++;
    }
    /* the client's entry: the last of its CorrelationId (nothing the
       client sent after it was read) */
    for (i = s->fifo.len; i-- > 0;) {
        e = kr_s_fifo_at(s, i);
        if (e->kind == KR_INF_REQUEST && e->rq != NULL && !e->rq->ready &&
            e->correlation_id == st->correlation_id) {
            client = e;
            break;
        }
    }
    KR_STAT_INC(s->host->stats, legacy_produce_rounds_failed);
    if (client == NULL) {
        /* krelay's bug: apply_request pushed it after the rounds */
        kr_session_close(s, KR_LOG_ERROR, "the entry of Produce v%d "
                         "CorrelationId %d is not in flight",
                         st->client_version, st->correlation_id);
        return -1;
    }
    kr_s_rounds_free(s);
    if (s->up.connected) {
        /* nothing to write: up_write_cb sees whether a client's EOF
           can go on to the upstream now (client_eof_progress) */
        kr_conn_set_writing(&s->up, true);
    }
    return kr_s_rounds_failed_answer(s, client, error, why);
}

/* Round st->next - 1 was answered with error (for split which): the
   set ends there.  0, or -1 when closed. */
static int
round_failed(struct kr_session *s, struct kr_s_rounds *st, int16_t error,
             const struct kr_legacy_split *which)
{
    char ebuf[KR_KERR_BUFLEN], why[320];
    uint32_t unsent = st->n - st->next;

    snprintf(why, sizeof(why), "not sent: krelay's own Produce v%d ahead "
             "of it (%u of %u, with the batches before its partitions' "
             "last) was answered with %s (%d) for topic %.64s partition %d",
             st->version, st->next, st->n,
             kr_kerr_format(error, ebuf, sizeof(ebuf)), error,
             which != NULL ? which->topic : "?",
             which != NULL ? which->partition : -1);
    kr_log_info("[%s] Produce v%d CorrelationId %d %s: krelay answers it "
                "with that error for its every partition, its %u other "
                "Produce request%s not sent (a retry sends the whole set "
                "again, after the part stored)", s->name, st->client_version,
                st->correlation_id, why, unsent, unsent == 1 ? "" : "s");
    return rounds_fail(s, st, error, why);
}

/*
 * The client closed its connection (or it was reset) while its set went
 * up: a client gone that way has given up on the request, and retries
 * it on a new connection.  The rest of the set (and anything the client
 * sent after it) would land among the retry's batches, so it goes no
 * further: the part stored stays a prefix, as after a failed round.  The
 * client's request is answered REQUEST_TIMED_OUT (for a client that only
 * half-closed), and the connection closes after the responses owed.  0,
 * or -1 when closed.
 */
static int
client_gone(struct kr_session *s, struct kr_s_rounds *st)
{
    char why[200];
    uint32_t sent = st->next, n = st->n;
    int32_t corr = st->correlation_id;
    int16_t ver = st->client_version;

    snprintf(why, sizeof(why), "not sent: the client closed the connection "
             "after %u of the %u Produce requests of krelay's own ahead of "
             "it", sent, n);
    if (rounds_fail(s, st, KR_KERR_REQUEST_TIMED_OUT, why) != 0) {
        return -1;
    }
    return kr_s_close_after_owed(s, KR_LOG_INFO, "client closed the "
                                 "connection while its Produce v%d "
                                 "CorrelationId %d went up in parts "
                                 "(translate_legacy): %u of %u sent, the "
                                 "rest and what it sent after not", ver,
                                 corr, sent, n + 1);
}

/*
 * Round st->next - 1 was answered without an error: the next one up, or
 * after the last the client's request; s->rounds goes then.  0, or -1
 * when closed.
 */
static int
rounds_next(struct kr_session *s, struct kr_s_rounds *st)
{
    if (st->next < st->n) {
        if (round_write(s, &st->v[st->next]) != 0) {
            goto nomem;
        }
        st->next++;
    } else {
        if (evbuffer_add_buffer(s->up.out, st->frame) != 0) {
            goto nomem;
        }
        kr_s_rounds_free(s);
        /* the upstream read that brought this resumes the client's
           requests (req_blocked), as after krelay's own ApiVersions */
    }
    if (s->up.connected) {
        kr_conn_set_writing(&s->up, true);  /* up_write_cb flushes it */
    }
    return 0;
nomem:
    kr_session_close(s, KR_LOG_ERROR, "out of memory");
    return -1;
}

/* A round's answer (payload NULL: the connection closes first). */
static void
round_answer(struct kr_session *s, void *arg, int16_t key, int16_t ver,
             struct evbuffer *payload)
{
    struct kr_legacy_splits *sp = arg;
    struct kr_s_rounds *st = s->rounds;
    const struct kr_legacy_split *which = NULL;
    struct iovec stack[KR_RBUF_MAX_SEG], *heap = NULL;
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct kr_msg m;
    int16_t error = KR_KERR_NONE;
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
    if (rc == KR_OK && st != NULL && st->splits == sp) {
        error = kr_legacy_split_round_error(sp, st->next - 1, &which);
    }
    kr_legacy_splits_unref(sp);
    if (rc == KR_ENOMEM) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    if (rc != KR_OK) {
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s answered krelay's own "
                      "Produce v%d (a batch of a translated Produce v0-2 "
                      "request) with a response that does not decode "
                      "(%.150s)", s->upname, ver,
                      ce.msg[0] != '\0' ? ce.msg : kr_status_str(rc));
        return;
    }
    if (st == NULL || st->splits != sp) {
        /* an Acks != 0 round always has its state: krelay's bug */
        kr_session_close(s, KR_LOG_ERROR, "the answer to krelay's own "
                         "Produce v%d has no translated request waiting "
                         "for it", ver);
        return;
    }
    if (error != KR_KERR_NONE) {
        (void)round_failed(s, st, error, which);
    } else if (kr_conn_peer_gone(s->client.fd)) {
        (void)client_gone(s, st);
    } else {
        (void)rounds_next(s, st);
    }
}

struct evbuffer *
kr_s_rounds_send(struct kr_session *s, const struct kr_nreq *nr,
                 struct kr_an_decision *d)
{
    struct kr_s_rounds *st = NULL;
    uint32_t i;

    if (nr->expect) {
        st = calloc(1, sizeof(*st));
        if (st == NULL || (st->frame = evbuffer_new()) == NULL) {
            free(st);
            goto nomem;
        }
        st->splits = d->splits;         /* d's reference, taken */
        d->splits = NULL;
        st->v = d->rounds;              /* the frames, taken */
        st->n = d->nrounds;
        d->rounds = NULL;
        d->nrounds = 0;
        st->version = d->rounds_version;
        st->client_version = nr->h.api_version;
        st->correlation_id = nr->h.correlation_id;
        s->rounds = st;
    }
    for (i = 0; i < (st != NULL ? st->n : d->nrounds); i++) {
        struct kr_inflight e;

        if (st != NULL) {
            memset(&e, 0, sizeof(e));
            e.correlation_id = nr->h.correlation_id;
            e.api_key = KR_API_PRODUCE;
            e.api_version = st->version;
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
            e.internal->arg = st->splits;
            if (kr_s_fifo_push(s, &e) != KR_OK) {
                free(e.internal);
                goto nomem;
            }
            kr_legacy_splits_ref(st->splits);
            continue;                   /* written in its turn */
        }
        /* Acks=0: none is answered, as for the client's own */
        e = nr->e;
        e.rq = NULL;
        if (kr_s_push_optional(s, &e) != 0) {
            return NULL;
        }
        if (round_write(s, &d->rounds[i]) != 0) {
            goto nomem;
        }
    }
    if (st == NULL) {
        return s->up.out;
    }
    if (round_write(s, &st->v[0]) != 0) {
        goto nomem;
    }
    st->next = 1;
    return st->frame;
nomem:
    kr_session_close(s, KR_LOG_ERROR, "out of memory");
    return NULL;
}
