/*
 * kr_session_kmux.c - framing: the requests a client sends and the
 * responses its upstream sends, frame by frame (the session module,
 * src/kr_session_int.h).
 *
 * next_request and next_response look at the frame at the scan point and
 * say what happens to it as a named outcome (enum nreq_outcome, enum
 * nrsp_outcome: wait, forward cut-through, hold, stream, the rules, drop,
 * refuse, krelay's own); process_requests and process_responses apply
 * them, moving forwarded bytes between buffers without copying
 * (move_bytes), starting splice lanes for runs krelay does not read, and
 * handing whole frames to the rules (kr_session_rules.c).  Streamed
 * responses (kr_rewrite_streamable) are walked by kr_scan as they arrive.
 * See the diagram at the top of kr_session.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kr_action.h"
#include "kr_analyse.h"
#include "kr_api_keys.h"
#include "kr_audit.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_conn.h"
#include "kr_evcodec.h"
#include "kr_frame.h"
#include "kr_inflight.h"
#include "kr_kerr.h"
#include "kr_listener.h"
#include "kr_log.h"
#include "kr_rewrite.h"
#include "kr_sasl.h"
#include "kr_scan.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_topics.h"
#include "kr_translate.h"
#include "kr_upstream.h"
#include "kr_session_int.h"

/*
 * How many of the first n bytes of in (0 < n < its length) lie in the
 * chain that byte n is in: evbuffer_remove_buffer(in, out, n) moves the
 * whole chains before that chain and copies these bytes (libevent 2.1:
 * evbuffer_add of the head of the chain it splits).  0 when n falls on a
 * chain boundary.  Walks the chains, 8 at a time (a few per 256 KiB).
 */
static size_t
split_copy_len(struct evbuffer *in, size_t n)
{
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr pos;
    size_t done = 0;
    int i, k;

    while (done < n) {
        if (evbuffer_ptr_set(in, &pos, done, EVBUFFER_PTR_SET) != 0) {
            return 0;
        }
        k = evbuffer_peek(in, (ev_ssize_t)(n - done), &pos, v, 8);
        if (k <= 0) {
            return 0;
        }
        for (i = 0; i < k && i < 8; i++) {
            if (done + v[i].iov_len > n) {
                return n - done;
            }
            done += v[i].iov_len;
        }
    }
    return 0;
}

/*
 * Move the first n bytes of in to out, never copying them: the whole
 * chain list when n is all of in (the common case: a read that ends
 * inside a frame or at its end), else evbuffer_remove_buffer, which
 * moves whole chains and copies only the head of a chain split by the
 * frame boundary where parsing stopped (a next frame whose header is not
 * complete yet, or one that is held): counted in stats.copied_bytes.
 * A chain moved into an output keeps its whole capacity; memory held by
 * a backlog of mostly empty chains is bounded in update_io (out_full),
 * not by copying.
 */
static void
move_bytes(struct kr_session *s, struct evbuffer *in, struct evbuffer *out,
           size_t n)
{
    if (n == 0) {
        return;
    }
    if (n >= evbuffer_get_length(in)) {
        evbuffer_add_buffer(out, in);
    } else {
        KR_STAT_ADD(s->host->stats, copied_bytes, split_copy_len(in, n));
        evbuffer_remove_buffer(in, out, n);
    }
}

/*
 * Copy up to len bytes of in from offset off into small (len <= smallsz)
 * or the worker's scratch buffer.  Returns the count copied.
 */
static size_t
peek(struct kr_session *s, struct evbuffer *in, size_t off, size_t len,
     uint8_t *small, size_t smallsz, const uint8_t **pk)
{
    struct evbuffer_ptr pos;
    uint8_t *dst;
    ev_ssize_t n;

    if (len > KR_FRAME_PEEK_MAX + KR_FRAME_PREFIX) {
        len = KR_FRAME_PEEK_MAX + KR_FRAME_PREFIX;
    }
    dst = len <= smallsz ? small : s->host->scratch;
    *pk = dst;
    if (evbuffer_ptr_set(in, &pos, off, EVBUFFER_PTR_SET) != 0) {
        return 0;
    }
    n = evbuffer_copyout_from(in, &pos, dst, len);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- requests ------------------------------------------------------------ */

/*
 * The request-side hook: requests that must be held whole before they
 * are forwarded (and may be decoded).  Rules per (ApiKey, ApiVersion)
 * will extend this.
 */
static bool
req_hold(int16_t api_key, int16_t api_version)
{
    (void)api_version;
    return api_key == KR_API_SASL_HANDSHAKE;
}

/*
 * The response-side hook: responses held whole and processed
 * (kr_rewrite_response) instead of cut-through.
 */
static bool
rsp_hold(int16_t api_key, int16_t api_version)
{
    return kr_rewrite_wants(api_key, api_version);
}

/* Remember the Mechanism of a decoded SaslHandshake request m. */
static void
sasl_note_mech(struct kr_session *s, const struct kr_msg *m)
{
    const uint8_t *name;
    int32_t len;

    (void)kr_sasl_note_handshake(&s->sasl, m, &name, &len);
    if (len >= 0) {
        kr_log_debug("[%s] SaslHandshake v%d Mechanism %.*s", s->name,
                     m->api_version, (int)(len > 40 ? 40 : len),
                     name != NULL ? (const char *)name : "");
    }
}

/* Kafka's sasl.server.max.receive.size: frames before authentication. */
#define KR_SASL_MAX_RECEIVE (512 * 1024)

/* Would krelay refuse this SaslHandshake (issue 9: v0 with a mechanism
   whose raw token exchange krelay cannot see the end of; any listener,
   rules or not)? */
static bool
sasl_refused(struct kr_session *s, int16_t ver)
{
    return ver == 0 && s->sasl.mech == KR_SASL_OTHER;
}

/*
 * A SaslHandshake request m goes to the broker (issue 9): the exchange
 * starts (kr_sasl_on_handshake).  A re-authentication (KIP-368) naming
 * another mechanism closes the connection, as a broker does.  One krelay
 * refuses (sasl_refused) starts nothing.  Returns 0, or -1 when closed.
 */
static int
sasl_handshake_seen(struct kr_session *s, const struct kr_msg *m)
{
    const struct kr_val *v = kr_node_get_id(m->body, KR_FIELD_MECHANISM);
    const uint8_t *name = NULL;
    int32_t len = -1;
    char was[KR_SASL_MECH_NAME_MAX + 1];

    if (sasl_refused(s, m->api_version)) {
        return 0;
    }
    if (v != NULL && !v->is_null && v->u.s.len >= 0) {
        name = v->u.s.p;
        len = v->u.s.len;
    }
    memcpy(was, s->sasl.mech_name, sizeof(was));
    switch (kr_sasl_on_handshake(&s->sasl, name, len, m->api_version,
                                 kr_clock_timer_ms())) {
    case KR_SASL_STEP_OK:
        return 0;
    case KR_SASL_STEP_MECH_CHANGED: {
        char shown[41];
        int32_t i, n = len < 0 ? 0 : (len > 40 ? 40 : len);

        /* the client's bytes as the log shows them: printable or '?' */
        for (i = 0; i < n; i++) {
            shown[i] = name[i] >= 0x20 && name[i] < 0x7f ? (char)name[i]
                                                         : '?';
        }
        shown[n] = '\0';
        kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                       "SASL re-authentication (KIP-368) "
                       "names mechanism %s, not %s as the connection "
                       "authenticated with: closed, as a broker closes it",
                       len < 0 ? "null" : shown, was);
        return -1;
    }
    default:
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
}

/*
 * Copy the whole frame at offset off of in (flen payload bytes after the
 * prefix) into one malloc'd buffer (*buf) and decode it there (a request,
 * or the response to (key, ver)): its bytes fields are then views into
 * *buf, never copies in the arena, and the caller wipes *buf
 * (OPENSSL_cleanse: SASL tokens) before freeing it.  KR_OK, or the
 * codec's error with err filled; KR_ENOMEM.
 */
static int
decode_copy(struct evbuffer *in, size_t off, size_t flen, bool rsp,
            int16_t key, int16_t ver, uint8_t **buf, struct kr_arena *arena,
            struct kr_msg *m, struct kr_codec_err *err)
{
    struct evbuffer_ptr pos;
    struct iovec iov;
    struct kr_rbuf rb;

    kr_arena_init(arena, 1 << 20);
    *buf = malloc(flen > 0 ? flen : 1);
    if (*buf == NULL) {
        return KR_ENOMEM;
    }
    if (evbuffer_ptr_set(in, &pos, off + KR_FRAME_PREFIX,
                         EVBUFFER_PTR_SET) != 0 ||
        evbuffer_copyout_from(in, &pos, *buf, flen) != (ev_ssize_t)flen) {
        snprintf(err->msg, sizeof(err->msg), "short frame");
        err->path[0] = '\0';
        return KR_EPROTO;
    }
    iov.iov_base = *buf;
    iov.iov_len = flen;
    rb.seg = &iov;
    rb.nseg = 1;
    rb.len = flen;
    return rsp ? kr_decode_response(arena, &rb, key, ver, 0, m, err)
               : kr_decode_request(arena, &rb, 0, m, err);
}

/* The bytes value id of decoded m (NULL, 0 when absent or null). */
static const uint8_t *
msg_bytes(const struct kr_msg *m, uint16_t id, size_t *len)
{
    const struct kr_val *v = kr_node_get_id(m->body, id);

    *len = 0;
    if (v == NULL || !v->present || v->is_null || v->u.s.len <= 0) {
        return NULL;
    }
    *len = (size_t)v->u.s.len;
    return v->u.s.p;
}

/*
 * A client token (a raw one: ver -1, len bytes at tok) or the whole
 * SaslAuthenticate request at offset off of in (flen payload bytes) goes
 * to the broker: its AuthBytes, the exchange's first token, give the
 * principal (kr_sasl_on_token).  Everything krelay copied of it is wiped.
 * A re-authentication as another principal closes the connection.
 * Returns 0, or -1 when closed.
 */
static int
sasl_token_seen(struct kr_session *s, struct evbuffer *in, size_t off,
                size_t flen, int16_t ver)
{
    struct kr_codec_err err;
    struct kr_arena arena;
    struct kr_msg m;
    const uint8_t *tok = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    enum kr_sasl_step st;
    int rc;

    if (s->sasl.token_seen || s->sasl.auth != KR_SASL_AUTH_STARTED) {
        if (ver >= 0) {
            s->sasl.authenticate_version = ver;
        }
        return 0;                       /* only the first one is read */
    }
    memset(&err, 0, sizeof(err));
    if (ver < 0) {
        struct evbuffer_ptr pos;

        kr_arena_init(&arena, 1 << 20);
        buf = malloc(flen > 0 ? flen : 1);
        rc = buf == NULL ? KR_ENOMEM : KR_OK;
        if (rc == KR_OK &&
            (evbuffer_ptr_set(in, &pos, off + KR_FRAME_PREFIX,
                              EVBUFFER_PTR_SET) != 0 ||
             evbuffer_copyout_from(in, &pos, buf, flen) !=
                 (ev_ssize_t)flen)) {
            rc = KR_EPROTO;
        }
        tok = buf;
        len = flen;
    } else {
        rc = decode_copy(in, off, flen, false, KR_API_SASL_AUTHENTICATE, ver,
                         &buf, &arena, &m, &err);
        if (rc == KR_OK) {
            tok = msg_bytes(&m, KR_FIELD_AUTH_BYTES, &len);
        }
    }
    if (rc == KR_ENOMEM) {
        free(buf);
        kr_arena_free(&arena);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (rc != KR_OK) {
        /* the broker judges it; its principal is unknown (fail closed) */
        tok = NULL;
        len = 0;
    }
    st = kr_sasl_on_token(&s->sasl, ver, tok, len,
                          s->lc->oauthbearer_principal_claim);
    if (buf != NULL) {
        OPENSSL_cleanse(buf, flen);
        free(buf);
    }
    kr_arena_free(&arena);
    switch (st) {
    case KR_SASL_STEP_OK:
        if (s->sasl.why != NULL || rc != KR_OK) {
            kr_log_info("[%s] SASL %s: the client's first token does not "
                        "give a principal (%s): unknown, rules naming "
                        "principals fail closed", s->name,
                        s->sasl.mech_name,
                        rc != KR_OK ? "SaslAuthenticate does not decode"
                                    : s->sasl.why);
        }
        return 0;
    case KR_SASL_STEP_PRINCIPAL_CHANGED:
        kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                       "SASL re-authentication (KIP-368) "
                       "claims another principal than %s, which the "
                       "connection authenticated as: closed, as a broker "
                       "closes it", s->sasl.principal != NULL
                                        ? s->sasl.principal
                                        : "the unknown one");
        return -1;
    default:
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
}

/* What the SASL gate decided about a request (sasl_gate). */
enum sasl_gate_outcome {
    SGATE_CLOSED = -1,                  /* the session was closed */
    SGATE_PASS = 0,                     /* on its way as any request */
    SGATE_HOLD                          /* held: a SASL step is in flight */
};

/*
 * The SASL gate (issue 9) for the request with header h (flen payload
 * bytes): before authentication frames are capped at
 * sasl.server.max.receive.size; while a SASL step is in flight only
 * ApiVersions and SaslAuthenticate go on, anything else is held (not
 * read further: judged by the rules once the broker answered, the
 * principal known).  A SaslHandshake too: whether it starts a new
 * exchange or a re-authentication (KIP-368, same principal) depends on
 * the answers before it (a broker that authenticated the first exchange
 * answers a pipelined second one ILLEGAL_SASL_STATE and keeps the first
 * principal).  In the middle of an exchange with nothing in flight
 * another request is closed on (as the broker would), unless the
 * mechanism's end is not visible and every answer was a success (then
 * the exchange is taken as done); with sasl = required nothing else goes
 * before the client authenticated.
 */
static enum sasl_gate_outcome
sasl_gate(struct kr_session *s, const struct kr_req_hdr *h, size_t flen)
{
    struct kr_sasl *sa = &s->sasl;
    bool step = h->known && (h->api_key == KR_API_SASL_HANDSHAKE ||
                             h->api_key == KR_API_SASL_AUTHENTICATE);
    bool pre = !sa->authenticated &&
               (sa->auth != KR_SASL_AUTH_NONE ||
                s->lc->sasl == KR_SASL_MODE_REQUIRED);

    if ((step || pre) && flen > KR_SASL_MAX_RECEIVE) {
        kr_s_close_bad(s, KR_REFUSAL_OVERSIZED, KR_LOG_WARN,
                       "%s v%d request of %zu bytes before "
                       "SASL authentication is done: above 524288 (Kafka's "
                       "sasl.server.max.receive.size)",
                       kr_s_api_name(h->api_key), h->api_version, flen);
        return SGATE_CLOSED;
    }
    if ((step && !(h->api_key == KR_API_SASL_HANDSHAKE && sa->inflight > 0)) ||
        (h->known && h->api_key == KR_API_API_VERSIONS)) {
        return SGATE_PASS;
    }
    if (sa->inflight > 0) {
        if (!s->req_blocked) {
            kr_log_debug("[%s] %s v%d CorrelationId %d held until the broker "
                         "answers the SASL step before it", s->name,
                         kr_s_api_name(h->api_key), h->api_version,
                         h->correlation_id);
        }
        s->req_blocked = 1;
        return SGATE_HOLD;
    }
    if (sa->auth == KR_SASL_AUTH_STARTED) {
        if (kr_sasl_assume_done(sa)) {
            return kr_s_sasl_outcome(s, KR_SASL_ANS_SUCCESS) == 0
                       ? SGATE_PASS
                       : SGATE_CLOSED;
        }
        kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                       "%s v%d request (CorrelationId %d) "
                       "in the middle of SASL %s authentication, before the "
                       "broker answered its end: closed, as a broker closes "
                       "it", kr_s_api_name(h->api_key), h->api_version,
                       h->correlation_id, sa->mech_name);
        return SGATE_CLOSED;
    }
    if (sa->auth == KR_SASL_AUTH_FAILED) {
        kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                       "%s v%d request (CorrelationId %d) "
                       "after failed SASL %s authentication: closed",
                       kr_s_api_name(h->api_key), h->api_version,
                       h->correlation_id, sa->mech_name);
        return SGATE_CLOSED;
    }
    if (s->lc->sasl == KR_SASL_MODE_REQUIRED && !sa->authenticated) {
        kr_s_close_bad(s, KR_REFUSAL_UNEXPECTED, KR_LOG_NOTICE,
                       "%s v%d request (CorrelationId %d) "
                       "before SASL authentication, on a listener with sasl "
                       "= required: closed", kr_s_api_name(h->api_key),
                       h->api_version, h->correlation_id);
        return SGATE_CLOSED;
    }
    return SGATE_PASS;
}

/*
 * Decode a whole SaslHandshake request at offset off of in (frame_len
 * payload bytes after the prefix) with the codec; remember Mechanism and
 * start the exchange (sasl_handshake_seen).
 */
static int
decode_sasl_handshake(struct kr_session *s, struct evbuffer *in, size_t off,
                      size_t frame_len)
{
    struct evbuffer_iovec ev[KR_RBUF_MAX_SEG];
    struct iovec iov[KR_RBUF_MAX_SEG];
    struct evbuffer_ptr pos;
    struct kr_arena arena;
    struct kr_codec_err err;
    struct kr_rbuf rb;
    struct kr_msg m;
    int i, n, rc;

    if (evbuffer_ptr_set(in, &pos, off + KR_FRAME_PREFIX,
                         EVBUFFER_PTR_SET) != 0) {
        kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                       "SaslHandshake request: bad offset");
        return -1;
    }
    n = evbuffer_peek(in, (ev_ssize_t)frame_len, &pos, ev, KR_RBUF_MAX_SEG);
    if (n < 0 || n > KR_RBUF_MAX_SEG) {
        kr_s_close_bad(s, KR_REFUSAL_UNDECODABLE, KR_LOG_WARN,
                       "SaslHandshake request of %zu bytes in "
                       "too many pieces", frame_len);
        return -1;
    }
    for (i = 0; i < n; i++) {
        iov[i].iov_base = ev[i].iov_base;
        iov[i].iov_len = ev[i].iov_len;
    }
    if (n > 0) {                /* the last segment may run past the frame */
        size_t sum = 0;

        for (i = 0; i < n - 1; i++) {
            sum += iov[i].iov_len;
        }
        iov[n - 1].iov_len = frame_len - sum;
    }
    rb.seg = iov;
    rb.nseg = n;
    rb.len = frame_len;
    kr_arena_init(&arena, 1 << 20);
    memset(&err, 0, sizeof(err));
    rc = kr_decode_request(&arena, &rb, 0, &m, &err);
    if (rc != KR_OK) {
        kr_s_close_bad(s, KR_REFUSAL_UNDECODABLE, KR_LOG_WARN,
                       "cannot decode SaslHandshake request: "
                       "%s at %s", err.msg, err.path);
        kr_arena_free(&arena);
        return -1;
    }
    sasl_note_mech(s, &m);
    rc = sasl_handshake_seen(s, &m);
    kr_arena_free(&arena);
    return rc;
}

/* Leading body fields to peek per ApiKey: the request's own wait. */
static int
request_fields(int16_t key, struct kr_frame_field *f)
{
    switch (key) {
    case KR_API_PRODUCE:
        f[0].id = KR_FIELD_ACKS;
        f[1].id = KR_FIELD_TIMEOUT_MS;
        return 2;
    case KR_API_FETCH:
        f[0].id = KR_FIELD_MAX_WAIT_MS;
        return 1;
    case KR_API_JOIN_GROUP:
        f[0].id = KR_FIELD_REBALANCE_TIMEOUT_MS;
        f[1].id = KR_FIELD_SESSION_TIMEOUT_MS;
        return 2;
    default:
        return 0;
    }
}

/* What the rules path needs of a whole request frame, into *nr. */
static void
nreq_fill(struct kr_nreq *nr, const struct kr_req_hdr *h,
          struct kr_inflight *e, size_t flen, bool expect)
{
    nr->h = *h;
    e->correlation_id = h->correlation_id;
    e->api_key = h->api_key;
    e->api_version = h->api_version;
    e->kind = KR_INF_REQUEST;
    nr->e = *e;
    nr->flen = flen;
    nr->expect = expect;
}

static int scan_in(struct kr_scan *sc, struct evbuffer *in, size_t off,
                   size_t n, size_t *used);

/*
 * n bytes of the streamed request at offset off of in go upstream: the
 * scanner walks them (its size prefix excepted).  Once the walk ends
 * (the end of the body, its tagged fields included, or a fault) the rest
 * passes unscanned.
 */
static void
rstream_feed(struct kr_session *s, struct evbuffer *in, size_t off, size_t n)
{
    size_t pre = min_sz(n, s->req_st->prefix), used;
    int rc;

    s->req_st->prefix -= (uint32_t)pre;
    if (n == pre) {
        return;
    }
    rc = scan_in(&s->req_st->scan, in, off + pre, n - pre, &used);
    if (rc != KR_AGAIN) {
        kr_s_rstream_end(s, rc);
    }
}

/*
 * Look at the frame starting at offset scan of client.in (avail bytes
 * there, >= 4) and say what happens to it (enum nreq_outcome).
 */
static enum nreq_outcome
next_request(struct kr_session *s, struct evbuffer *in, size_t scan,
             size_t avail, struct kr_nreq *nr)
{
    const struct kr_listener_conf *lc = s->lc;
    struct kr_frame_field f[2];
    uint8_t small[KR_PEEK_SMALL];
    const uint8_t *pk;
    struct kr_req_hdr h;
    struct kr_inflight e;
    size_t c, flen, have, need = 0;
    int32_t size;
    int nf, rc;
    bool expect = true, legacy = false;

    c = peek(s, in, scan, min_sz(avail, sizeof(small)), small, sizeof(small),
             &pk);
    if (c < KR_FRAME_PREFIX) {
        return NREQ_WAIT;
    }
    memset(&e, 0, sizeof(e));
    e.sent_ms = kr_clock_timer_ms();
    if (s->nrequests == 0 && s->sasl.tokens == 0 &&
        c >= KR_FRAME_PREFIX + 2 && pk[KR_FRAME_PREFIX] == 0x60 &&
        kr_api_get(kr_frame_i16(pk + KR_FRAME_PREFIX)) == NULL) {
        /* issue 9: a Kafka 0.9 client with GSSAPI sends its first
           Kerberos token raw, with no SaslHandshake: an RFC 2743 3.1
           InitialContextToken, tag 0x60, where the ApiKey would be.
           Brokers take such a first packet as GSSAPI; krelay cannot
           answer it nor see where the exchange ends */
        kr_s_close_bad(s, KR_REFUSAL_WRONG_PROTOCOL, KR_LOG_NOTICE,
                       "first frame (%02x %02x %02x %02x "
                       "after its size, ApiKey %d unknown) looks like a raw "
                       "GSSAPI (Kerberos) token from a Kafka client older "
                       "than 0.10, which sends no SaslHandshake: krelay "
                       "cannot follow that exchange; closed",
                       pk[KR_FRAME_PREFIX], pk[KR_FRAME_PREFIX + 1],
                       c > KR_FRAME_PREFIX + 2 ? pk[KR_FRAME_PREFIX + 2] : 0,
                       c > KR_FRAME_PREFIX + 3 ? pk[KR_FRAME_PREFIX + 3] : 0,
                       kr_frame_i16(pk + KR_FRAME_PREFIX));
        return NREQ_CLOSED;
    }
    if (s->sasl_srv != NULL) {
        /* issue 9: krelay is this client's SASL server (sasl = terminate):
           its SASL steps are answered here, nothing else goes before
           authentication */
        enum nreq_outcome o = kr_s_term_next(s, in, scan, avail, nr);

        if (o != NREQ_FORWARD) {
            return o;
        }
    }
    if (s->sasl.tokens > 0) {
        rc = kr_frame_size(pk, c, 0, lc->max_frame_bytes, &size);
        if (rc != KR_OK) {
            kr_s_close_bad(s, size < 0 ? KR_REFUSAL_MALFORMED
                                       : KR_REFUSAL_OVERSIZED,
                           KR_LOG_WARN, "SASL token frame of %d bytes "
                           "(max_frame_bytes %" PRId64 ")", size,
                           lc->max_frame_bytes);
            return NREQ_CLOSED;
        }
        if (size > KR_SASL_MAX_RECEIVE) {
            kr_s_close_bad(s, KR_REFUSAL_OVERSIZED, KR_LOG_WARN,
                           "SASL token frame of %d bytes: "
                           "above 524288 (Kafka's "
                           "sasl.server.max.receive.size)", size);
            return NREQ_CLOSED;
        }
        if (!s->sasl.token_seen && s->sasl.auth == KR_SASL_AUTH_STARTED) {
            /* the exchange's first token gives the principal: whole */
            if (avail - KR_FRAME_PREFIX < (size_t)size) {
                return NREQ_WAIT;
            }
            if (sasl_token_seen(s, in, scan, (size_t)size, -1) != 0) {
                return NREQ_CLOSED;
            }
        }
        e.kind = KR_INF_SASL_TOKEN;
        e.correlation_id = -1;
        e.sasl = 1;
        if (kr_s_fifo_push(s, &e) != KR_OK) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return NREQ_CLOSED;
        }
        s->sasl.tokens--;
        KR_STAT_INC(s->host->stats, sasl_tokens);
        s->req_remain = KR_FRAME_PREFIX + (uint64_t)size;
        return NREQ_FORWARD;
    }
    rc = kr_frame_size(pk, c, KR_FRAME_REQ_MIN, lc->max_frame_bytes, &size);
    if (rc != KR_OK) {
        const char *what = kr_frame_sniff(pk, c);

        if (what != NULL) {
            kr_s_close_bad(s, KR_REFUSAL_WRONG_PROTOCOL, KR_LOG_WARN,
                           "%s on a plaintext listener", what);
        } else if (size < 0) {
            kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                           "negative frame size %d "
                           "(%02x %02x %02x %02x): not a Kafka client?", size,
                           pk[0], pk[1], pk[2], pk[3]);
        } else if (rc == KR_EPROTO) {
            kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                           "request frame of %d bytes is "
                           "shorter than a request header", size);
        } else {
            kr_s_close_bad(s, KR_REFUSAL_OVERSIZED, KR_LOG_WARN,
                           "request frame of %d bytes exceeds "
                           "max_frame_bytes %" PRId64, size,
                           lc->max_frame_bytes);
        }
        return NREQ_CLOSED;
    }
    flen = (size_t)size;
    have = min_sz(avail - KR_FRAME_PREFIX, flen);
    for (;;) {
        rc = kr_frame_peek_request(pk + KR_FRAME_PREFIX,
                                   min_sz(c - KR_FRAME_PREFIX, flen), flen,
                                   &h, &need);
        if (rc != KR_AGAIN) {
            break;
        }
        if (need > have) {
            return NREQ_WAIT;
        }
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
    }
    if (rc != KR_OK) {
        kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                       "malformed request header (ApiKey %d, "
                       "ApiVersion %d, %zu bytes): %s", h.api_key,
                       h.api_version, flen, kr_status_str(rc));
        return NREQ_CLOSED;
    }
    if (kr_s_fifo_inflight(s) >= (uint64_t)lc->max_inflight) {
        s->req_blocked = 1;
        return NREQ_WAIT;
    }
    /* issue 9: SASL before the rules (a held request is judged once the
       broker answered, with the principal then known) */
    switch (s->sasl_srv != NULL ? SGATE_PASS : sasl_gate(s, &h, flen)) {
    case SGATE_CLOSED:
        return NREQ_CLOSED;
    case SGATE_HOLD:
        return NREQ_WAIT;
    case SGATE_PASS:
        break;
    }
    if (h.known && (h.api_key == KR_API_SASL_HANDSHAKE ||
                    h.api_key == KR_API_SASL_AUTHENTICATE)) {
        if (avail - KR_FRAME_PREFIX < flen) {
            return NREQ_WAIT;           /* wait for the whole frame */
        }
        if (h.api_key == KR_API_SASL_HANDSHAKE
                ? decode_sasl_handshake(s, in, scan, flen) != 0
                : sasl_token_seen(s, in, scan, flen, h.api_version) != 0) {
            return NREQ_CLOSED;
        }
        /* a step of the exchange, unless krelay refuses it (issue 13) */
        e.sasl = h.api_key == KR_API_SASL_AUTHENTICATE ||
                 !sasl_refused(s, h.api_version);
    }
    if (!h.client_id_null &&
        (*s->host->audit != NULL || s->client_id[0] == '\0')) {
        /* the close line's client_id: the last one the connection sent,
           whatever path its requests take (the header's printable
           prefix; a copy of at most 49 bytes, with an audit sink only;
           without one the first, for the admin's /connections) */
        _Static_assert(sizeof(s->client_id) > KR_FRAME_CLIENT_ID_MAX,
                       "kr_session.client_id holds kr_req_hdr's");
        memcpy(s->client_id, h.client_id, strlen(h.client_id) + 1);
        s->client_id_cut = h.client_id_len > KR_FRAME_CLIENT_ID_MAX;
    }
    nf = h.known ? request_fields(h.api_key, f) : 0;
    for (;;) {
        if (nf == 0) {
            break;
        }
        rc = kr_frame_peek_fields(pk + KR_FRAME_PREFIX,
                                  min_sz(c - KR_FRAME_PREFIX, flen), flen,
                                  false, h.api_key, h.api_version,
                                  h.hdr_len, f, nf, &need);
        if (rc != KR_AGAIN) {
            break;
        }
        if (need > have) {
            return NREQ_WAIT;
        }
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
    }
    if (nf > 0 && rc != KR_OK && rc != KR_EUNSUPPORTED) {
        kr_s_close_bad(s, KR_REFUSAL_MALFORMED, KR_LOG_WARN,
                       "malformed %s v%d request "
                       "(CorrelationId %d): %s", kr_s_api_name(h.api_key),
                       h.api_version, h.correlation_id, kr_status_str(rc));
        return NREQ_CLOSED;
    }
    if (nf > 0 && rc == KR_OK) {
        if (h.api_key == KR_API_PRODUCE) {
            if (f[0].found && f[0].val == 0) {
                expect = false;
            }
            if (f[1].found && f[1].val > 0) {
                e.wait_ms = f[1].val;
            }
        } else if (f[0].found && f[0].val > 0) {
            e.wait_ms = f[0].val;
        } else if (nf > 1 && f[1].found && f[1].val > 0) {
            e.wait_ms = f[1].val;
        }
    }
    /* the rules: one table lookup for every frame */
    nr->slot = NULL;
    nr->av_new = false;
    nr->sasl_refuse = false;
    nr->cid = NULL;
    nr->cidlen = 0;
    if (h.api_key == KR_API_API_VERSIONS) {
        const struct kr_api_desc *ad = kr_api_get(KR_API_API_VERSIONS);

        nr->av_new = ad != NULL && h.api_version > ad->valid.hi;
        if (!nr->av_new && h.api_version >= 3 && *s->host->audit != NULL) {
            /* KIP-511: the client's software, for its audit lines (one
               above KR_SW_FRAME_MAX is not read: names unknown) */
            if (flen <= KR_SW_FRAME_MAX && avail - KR_FRAME_PREFIX < flen) {
                return NREQ_WAIT;       /* small: wait for all of it */
            }
            kr_s_note_client_software(s, in, scan + KR_FRAME_PREFIX, flen);
        }
        if (!nr->av_new) {
            char *cid = NULL;
            size_t cidlen = 0;

            (void)kr_s_request_client_id(in, scan + KR_FRAME_PREFIX, &h, &cid,
                                         &cidlen);
            kr_s_apiversions_clamps(s, cid, cidlen);
            free(cid);
        }
    } else if (!h.known && s->sasl.tokens == 0) {
        /* issue 13: krelay cannot decode it; may it pass? */
        if (!kr_s_request_client_id(in, scan + KR_FRAME_PREFIX, &h, &nr->cid,
                                    &nr->cidlen)) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return NREQ_CLOSED;
        }
        kr_rule_gate(s->cref->conf->ruleset, &s->rmask, h.api_key,
                     h.api_version, nr->cid, nr->cidlen, &nr->gate);
        if (nr->gate.gate == KR_GATE_REFUSE) {
            nreq_fill(nr, &h, &e, flen, expect);
            return NREQ_REFUSE;     /* process_requests frees nr->cid */
        }
        if (nr->gate.gate == KR_GATE_OBSERVE) {
            char why[160], abuf[24], text[300];

            kr_analyse_unknown_why(&h, why, sizeof(why));
            snprintf(text, sizeof(text), "%s v%d CorrelationId %d: %s",
                     kr_analyse_api_label(h.api_key, abuf, sizeof(abuf)),
                     h.api_version, h.correlation_id, why);
            kr_s_undecodable_note(s, text);
            if (nr->gate.audit) {
                /* its audit line is written with the response */
                struct kr_an_request r;
                struct kr_an_req *a;

                /* from its header alone (nr is filled only on return) */
                memset(&r, 0, sizeof(r));
                r.h = &h;
                r.flen = flen;
                a = kr_an_req_from_header(&r, nr->cid, nr->cidlen, why,
                                          KR_AUDIT_FORWARDED);
                if (a != NULL) {
                    a->v.flags = KR_VF_AUDIT;
                    e.rq = kr_s_rq_wrap(a);
                }
            }
        }
        free(nr->cid);
        nr->cid = NULL;
    }
    if ((h.api_key == KR_API_SASL_HANDSHAKE ||
         h.api_key == KR_API_SASL_AUTHENTICATE) && s->orig != NULL) {
        /* before any rule: a rule matching it must not forward a
           client's SASL step onto krelay's authenticated upstream */
        return kr_s_orig_client_sasl(s, &h) != 0 ? NREQ_CLOSED : NREQ_WAIT;
    }
    if (h.known && s->sasl.tokens == 0) {
        if (kr_s_av_wanted(s, h.api_key, h.api_version)) {
            /* issue 10: what the broker accepts decides its route, and
               the client never asked: krelay asks first */
            nr->h = h;
            return NREQ_ASK;
        }
        nr->slot = kr_rule_lookup(s->cref->conf->ruleset, h.api_key,
                                  h.api_version, &s->rmask);
        /* issue 10: a version the brokers no longer accept is held and
           decoded, to be translated up or refused */
        legacy = kr_s_legacy_route(s, h.api_key, h.api_version) !=
                 KR_AN_LEGACY_PASS;
    }
    if (nr->slot != NULL && h.api_key == KR_API_PRODUCE && !legacy) {
        /* issue 14: a Produce its rules only audit is not held, whatever
           its size: it streams to the broker as it arrives (its records
           spliced as an unaudited one's), its line built by a scanner
           (kr_s_rstream_*), which costs less than decoding it */
        switch (kr_s_rstream_begin(s, in, scan, &h, flen, expect, nr->slot,
                                   &e)) {
        case RSTREAM_CLOSED:
            return NREQ_CLOSED;
        case RSTREAM_HOLD:
            break;
        case RSTREAM_PASS:
        case RSTREAM_STREAM:
            nr->slot = NULL;
            break;
        }
    }
    if (nr->slot != NULL || nr->av_new || legacy) {
        if (avail - KR_FRAME_PREFIX < flen) {
            return NREQ_WAIT;           /* wait for the whole frame */
        }
        nreq_fill(nr, &h, &e, flen, expect);
        return NREQ_RULES;
    }
    if (h.known && req_hold(h.api_key, h.api_version)) {
        /* whole and decoded above (issue 9) */
        if (h.api_key == KR_API_SASL_HANDSHAKE &&
            sasl_refused(s, h.api_version)) {
            /* issue 9: krelay could not find the Kafka frames after
               its raw tokens: answered UNSUPPORTED_SASL_MECHANISM */
            nreq_fill(nr, &h, &e, flen, expect);
            nr->sasl_refuse = true;
            return NREQ_RULES;
        }
    }
    e.correlation_id = h.correlation_id;
    e.api_key = h.api_key;
    e.api_version = h.api_version;
    e.kind = KR_INF_REQUEST;
    if (expect) {
        if (kr_s_fifo_push(s, &e) != KR_OK) {
            kr_s_rstream_drop(s);       /* it borrows e.rq's state */
            kr_s_rq_free(e.rq);
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return NREQ_CLOSED;
        }
    } else {
        KR_STAT_INC(s->host->stats, requests_acks0);
        if (kr_s_push_optional(s, &e) != 0) {
            return NREQ_CLOSED;
        }
    }
    if (h.known && h.api_key == KR_API_SASL_HANDSHAKE && h.api_version == 0) {
        s->want_rsp_first = 1;      /* raw SASL tokens may follow it */
    }
    KR_STAT_INC(s->host->stats, requests);
    s->nrequests++;
    KR_STAT_INC_L(s->host->stats, api_requests,
                  kr_stats_api_cell(h.api_key, h.api_version));
    kr_log_trace("[%s] request %s v%d CorrelationId %d ClientId %s, "
                 "%zu bytes%s", s->name, kr_s_api_name(h.api_key),
                 h.api_version, h.correlation_id,
                 h.client_id_null ? "(null)" : h.client_id, flen,
                 expect ? "" : ", Acks=0: no response");
    s->req_remain = KR_FRAME_PREFIX + (uint64_t)flen;
    return NREQ_FORWARD;
}

size_t
kr_s_finish_request(struct kr_session *s)
{
    struct evbuffer *in = s->client.in;
    size_t total = evbuffer_get_length(in), take = 0;

    if (s->req_remain > 0 && s->upl.left == 0) {
        /* (while a lane runs, the rest goes socket to pipe: client.in
           holds nothing of it) */
        take = s->req_remain < total ? (size_t)s->req_remain : total;
    }
    if (take > 0) {
        if (s->rstream) {
            rstream_feed(s, in, 0, take);
        }
        s->req_remain -= take;
        KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, take);
        move_bytes(s, in, s->up.out, take);
    }
    evbuffer_drain(in, evbuffer_get_length(in));
    return take;
}

/* Forward whole or partial request frames from client.in to up.out. */
int
kr_s_process_requests(struct kr_session *s)
{
    struct evbuffer *in = s->client.in;
    size_t total = evbuffer_get_length(in), scan = 0, avail, take;
    struct kr_nreq nr;
    int rc;

    if (s->closing) {
        /* nothing after the request that closes it is forwarded (the
           rest of one forwarded in part is) */
        (void)kr_s_finish_request(s);
        return 0;
    }
    if (s->client.stage != KR_STAGE_FRAMES) {
        return 0;       /* client_preamble comes first (a timer or an
                           upstream read may get here before it) */
    }
    kr_s_conf_refresh(s);
    for (;;) {
        avail = total - scan;
        if (s->req_remain > 0) {
            take = min_sz(avail, s->req_remain);
            if (s->rstream) {
                rstream_feed(s, in, scan, take);
            }
            scan += take;
            s->req_remain -= take;
            if (s->req_remain > 0) {
                break;
            }
            continue;
        }
        if ((s->orig_hold && !s->up_after_auth) || s->av_hold ||
            s->rounds != NULL) {
            /* SASL origination: krelay authenticates the upstream
               connection first (kr_session_sasl.c); the upstream read
               that ends it resumes the requests, as after max_inflight.
               (With sasl = terminate there is no upstream before the
               client's own login, which krelay answers itself.)  The
               same for krelay's own ApiVersions (issue 10,
               kr_session_av.c), and for a translated Produce whose
               rounds go up one at a time (issue 10,
               kr_session_rounds.c): nothing overtakes it */
            s->req_blocked = avail > 0;
            break;
        }
        if (s->want_rsp_first) {
            /* a SaslHandshake v0 is in flight: whether raw SASL tokens
               follow is known only from its answer (the up read resumes
               the requests, as after max_inflight) */
            s->req_blocked = 1;
            break;
        }
        if (s->sasl.tokens > 0 && s->nready > 0) {
            /* the handshake's answer is held (fault latency): a token's
               answer cannot wait behind it, so the token waits
               (kr_s_rtimer_cb resumes the requests) */
            break;
        }
        if (avail < KR_FRAME_PREFIX || s->enforce_wait ||
            (s->paused_until_ms != 0 &&
             kr_clock_timer_ms() < s->paused_until_ms)) {
            break;
        }
        rc = next_request(s, in, scan, avail, &nr);
        if (rc == NREQ_CLOSED) {
            return -1;
        }
        if (rc == NREQ_WAIT) {
            break;
        }
        if (rc == NREQ_REFUSE) {
            char why[160];

            /* what came before goes on; nothing from here does */
            KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, scan);
            move_bytes(s, in, s->up.out, scan);
            kr_analyse_unknown_why(&nr.h, why, sizeof(why));
            rc = kr_s_refuse_request(s, &nr, nr.cid, nr.cidlen, why);
            free(nr.cid);
            return rc;
        }
        if (rc == NREQ_SASL_TERM) {
            /* krelay answers it (issue 9): what was scanned goes first */
            KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, scan);
            move_bytes(s, in, s->up.out, scan);
            scan = 0;
            if (kr_s_term_step(s, &nr) != 0) {
                return -1;
            }
            if (s->closing) {
                return 0;
            }
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NREQ_ASK) {
            /* issue 10: what was scanned goes first, then krelay's
               ApiVersions; the gate above holds the rest (av_hold) */
            KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, scan);
            move_bytes(s, in, s->up.out, scan);
            scan = 0;
            if (kr_s_av_ask(s, &nr.h) != 0) {
                return -1;
            }
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NREQ_RULES) {
            /* keep the order: what was scanned goes first */
            KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, scan);
            move_bytes(s, in, s->up.out, scan);
            scan = 0;
            if (kr_s_rule_request(s, &nr) != 0) {
                return -1;
            }
            if (s->closing) {
                return 0;       /* client.in was discarded */
            }
            total = evbuffer_get_length(in);
        }
    }
    KR_STAT_ADD(s->host->stats, client_to_upstream_bytes, scan);
    move_bytes(s, in, s->up.out, scan);
    return 0;
}

/* ---- responses --------------------------------------------------------- */

/*
 * The whole SaslAuthenticate response (version ver) at offset off of in
 * (flen payload bytes) answers a step of the exchange (issue 9): its
 * ErrorCode, AuthBytes and (v1+) SessionLifetimeMs move it on
 * (kr_sasl_on_answer).  The copy krelay decoded is wiped.  Returns 0, or
 * -1 when closed.
 */
static int
sasl_authenticate_answer(struct kr_session *s, struct evbuffer *in,
                         size_t off, size_t flen, int16_t ver)
{
    struct kr_codec_err err;
    struct kr_arena arena;
    struct kr_msg m;
    const struct kr_val *v;
    const uint8_t *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int16_t code = KR_KERR_UNKNOWN_SERVER_ERROR;
    int64_t life = -1;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = decode_copy(in, off, flen, true, KR_API_SASL_AUTHENTICATE, ver, &buf,
                     &arena, &m, &err);
    if (rc == KR_ENOMEM) {
        kr_arena_free(&arena);
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    if (rc == KR_OK) {
        v = kr_node_get_id(m.body, KR_FIELD_ERROR_CODE);
        code = v != NULL && v->present ? (int16_t)v->u.i : code;
        b = msg_bytes(&m, KR_FIELD_AUTH_BYTES, &len);
        v = kr_node_get_id(m.body, KR_FIELD_SESSION_LIFETIME_MS);
        life = v != NULL && v->present ? v->u.i : -1;
    } else {
        kr_log_info("[%s] SaslAuthenticate v%d response from %s does not "
                    "decode (%s): taken as a failure", s->name, ver,
                    s->upname, err.msg);
    }
    rc = kr_s_sasl_outcome(s, kr_sasl_on_answer(&s->sasl,
                                                KR_SASL_F_AUTHENTICATE, code,
                                                b, len, life));
    if (buf != NULL) {
        OPENSSL_cleanse(buf, flen);
        free(buf);
    }
    kr_arena_free(&arena);
    return rc;
}

/*
 * After a SaslHandshake v0 response with ErrorCode 0: switch to raw token
 * frames.  Only PLAIN and SCRAM ever reach the broker over v0
 * (sasl_refused); a count krelay does not know is a fault of its own,
 * never a reason to stop parsing: closed.  Returns 0, or -1 when closed.
 */
static int
sasl_start(struct kr_session *s)
{
    if (kr_sasl_start_raw(&s->sasl)) {
        return 0;
    }
    kr_session_close(s, KR_LOG_ERROR, "SaslHandshake v0 accepted for a SASL "
                     "mechanism whose raw tokens krelay cannot count: "
                     "closed (a krelay bug: such a handshake is refused)");
    return -1;
}

static int
held_response(struct kr_session *s, int16_t key, int16_t ver, size_t flen)
{
    struct kr_rewrite_result res;
    struct evbuffer *hold = kr_s_hold_take(s);
    int rc;

    if (hold == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    evbuffer_drain(s->up.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->up.in, hold, flen);
    kr_s_fifo_pop(s);
    if (key == KR_API_API_VERSIONS) {
        kr_s_learn_apiversions(s, ver, hold);
    }
    memset(&res, 0, sizeof(res));
    /* no rules here: its ErrorCodes are counted from the rewrite's tree
       (next_response left them) */
    rc = kr_rewrite_response_observed(&s->rw, key, ver, hold,
                                      s->client.out, &res,
                                      kr_s_errors_by_rewrite(key, ver)
                                          ? kr_s_count_errors_cb
                                          : NULL,
                                      s);
    kr_s_hold_put(s, hold);
    if (rc == KR_ELIMIT && res.bad_node_id >= 0) {
        kr_s_close_up(s, KR_LOG_WARN, "%s v%d response names NodeId %d, "
                      "outside this listener's node_id_min..node_id_max "
                      "%d..%d: widen the range (and broker_port_base) in the "
                      "config", kr_s_api_name(key), ver, res.bad_node_id,
                      s->lc->node_id_min, s->lc->node_id_max);
        return -1;
    }
    if (rc == KR_ELIMIT && res.bad_node_id < -1) {
        /* -1 is "no node"; other negative ids are no broker's */
        kr_s_close_up(s, KR_LOG_WARN, "%s v%d response from %s names NodeId "
                      "%d: a broker's NodeId cannot be negative (the upstream "
                      "sent an invalid response)", kr_s_api_name(key), ver,
                      s->upname, res.bad_node_id);
        return -1;
    }
    if (rc != KR_OK) {
        kr_s_close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from %s: "
                      "%s", kr_s_api_name(key), ver, s->upname,
                      res.err[0] ? res.err : kr_status_str(rc));
        return -1;
    }
    KR_STAT_INC(s->host->stats, responses);
    KR_STAT_INC(s->host->stats, responses_held);
    KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, flen + KR_FRAME_PREFIX);
    kr_log_trace("[%s] response %s v%d held: %u endpoints rewritten, %u "
                 "versions capped", s->name, kr_s_api_name(key), ver,
                 res.endpoints, res.capped);
    return 0;
}

/*
 * Feed sc at most n bytes of in from offset off, without copying
 * them; *used gets how many it consumed.  Returns the scanner's status
 * (KR_AGAIN when it wants more than those n bytes).
 */
static int
scan_in(struct kr_scan *sc, struct evbuffer *in, size_t off, size_t n,
        size_t *used)
{
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr ptr;
    size_t u;
    int i, k, rc = sc->status;

    *used = 0;
    while (rc == KR_AGAIN && n > 0) {
        if (evbuffer_ptr_set(in, &ptr, off, EVBUFFER_PTR_SET) != 0) {
            break;
        }
        k = evbuffer_peek(in, (ev_ssize_t)n, &ptr, v, (int)KR_ARRAY_LEN(v));
        if (k <= 0) {
            break;
        }
        for (i = 0; i < k && i < (int)KR_ARRAY_LEN(v) && rc == KR_AGAIN &&
             n > 0; i++) {
            rc = kr_scan_feed(sc, v[i].iov_base, min_sz(v[i].iov_len, n),
                              &u);
            off += u;
            n -= u;
            *used += u;
        }
    }
    return rc;
}

/* s->rsp_st's scanner, made at the first use (then kept); NULL when
   closed (out of memory). */
static struct kr_scan *
scanner(struct kr_session *s)
{
    if (s->rsp_st == NULL) {
        s->rsp_st = calloc(1, sizeof(*s->rsp_st));
        if (s->rsp_st == NULL) {
            kr_s_close_up(s, KR_LOG_ERROR, "out of memory (response scanner)");
            return NULL;
        }
    }
    return &s->rsp_st->scan;
}

/*
 * Start streaming the response at the head of the FIFO (flen payload
 * bytes): its endpoints sit only in the body's tagged fields
 * (kr_rewrite_streamable), so everything before them goes to the client
 * as it arrives, walked by kr_scan, and only the tail is held and
 * rewritten (stream_more).  Memory per connection stays at the socket
 * reads in flight, not the frame (a Fetch response may be tens of MiB).
 * audit: a Fetch response whose rules only audit it (kr_s_rsp_scan_only)
 * streams the same way, any version, its audit line built from what the
 * scanner sees (kr_s_stream_audit_start); its tail is rewritten only
 * when it may hold endpoints.  scan: the frame's offset in up.in (the
 * earlier frames before it go to the client first).  Returns 0, -1 when
 * closed, 1 (audit only) when it cannot be scanned: hold it instead.
 */
static int
stream_start(struct kr_session *s, struct kr_inflight *e, size_t flen,
             bool audit, size_t scan)
{
    if (scanner(s) == NULL) {
        return -1;
    }
    if (kr_scan_init(&s->rsp_st->scan, e->api_key, e->api_version, true,
                     flen) != KR_OK) {
        if (audit) {
            return 1;
        }
        kr_s_close_up(s, KR_LOG_ERROR, "internal: cannot scan %s v%d responses",
                      kr_s_api_name(e->api_key), e->api_version);
        return -1;
    }
    if (audit) {
        /* what goes to the client before it: its out buffer, the splice
           lane, the frames before scan in up.in */
        kr_s_stream_audit_start(s, e, flen,
                                evbuffer_get_length(s->client.out) +
                                    s->dn.queued + scan);
    }
    s->stream_rewrite = kr_rewrite_streamable(e->api_key, e->api_version);
    s->stream_key = e->api_key;
    s->stream_ver = e->api_version;
    s->stream_left = flen;
    s->streaming = 1;
    kr_s_fifo_pop(s);
    KR_STAT_INC(s->host->stats, responses);
    KR_STAT_INC(s->host->stats, responses_streamed);
    return 0;
}

/*
 * A whole streamable response at offset scan of in (flen payload bytes):
 * 1 when its body has no tagged fields (the tail kr_scan leaves is the
 * single byte 0: nothing to rewrite, no decode needed), 0 when it has
 * some (hold and rewrite it), -1 when malformed (closed).  The common
 * Produce and Fetch response costs a walk of its structure, no tree and
 * no allocation.
 */
static int
no_tags(struct kr_session *s, const struct kr_inflight *e,
        struct evbuffer *in, size_t scan, size_t flen)
{
    struct evbuffer_ptr ptr;
    size_t off = scan + KR_FRAME_PREFIX, used = 0;
    uint8_t last;
    int rc;

    if (scanner(s) == NULL) {
        return -1;
    }
    rc = kr_scan_init(&s->rsp_st->scan, e->api_key, e->api_version, true, flen);
    if (rc == KR_OK) {
        rc = scan_in(&s->rsp_st->scan, in, off, flen, &used);
    }
    if (rc == KR_AGAIN) {
        return 0;                       /* let the held path judge it */
    }
    if (rc != KR_OK) {
        kr_s_close_up(s, KR_LOG_WARN, "malformed %s v%d response from %s: %s",
                      kr_s_api_name(e->api_key), e->api_version, s->upname,
                      s->rsp_st->scan.msg);
        return -1;
    }
    off += used;
    if (flen - used != 1 ||
        evbuffer_ptr_set(in, &ptr, off, EVBUFFER_PTR_SET) != 0 ||
        evbuffer_copyout_from(in, &ptr, &last, 1) != 1) {
        return 0;
    }
    return last == 0;
}

/*
 * Go on with the streamed response: scan what arrived after *scan (those
 * bytes join the pass-through run), then, once the whole tail is here,
 * forward the run and write the tail through kr_rewrite_tail.  Returns 1
 * when the frame is done, 0 when more bytes are needed, -1 when closed.
 */
static int
stream_more(struct kr_session *s, struct evbuffer *in, size_t *scan,
            size_t total)
{
    struct kr_rewrite_result res;
    struct evbuffer_ptr ptr;
    struct evbuffer *hold;
    size_t used, tail;
    uint8_t last;
    int rc;

    rc = scan_in(&s->rsp_st->scan, in, *scan,
                 min_sz(total - *scan, (size_t)s->stream_left), &used);
    *scan += used;
    s->stream_left -= used;
    if (rc == KR_AGAIN) {
        return 0;
    }
    if (rc != KR_OK && !s->stream_rewrite &&
        kr_s_stream_audit_undecodable(s, s->rsp_st->scan.msg)) {
        /* issue 13: a Produce response its rules only audit fails open,
           as the held path does: the rest of the frame passes as it is */
        kr_s_stream_plain_end(s);
        return 1;
    }
    if (rc != KR_OK) {
        kr_s_close_up(s, KR_LOG_WARN, "malformed %s v%d response from %s: %s",
                      kr_s_api_name(s->stream_key), s->stream_ver, s->upname,
                      s->rsp_st->scan.msg);
        return -1;
    }
    if (!s->stream_rewrite) {
        kr_s_stream_plain_end(s);
        return 1;
    }
    tail = (size_t)s->stream_left;
    if ((int64_t)tail > s->lc->max_frame_bytes) {
        kr_s_close_up(s, KR_LOG_WARN, "%s v%d response from %s has %zu bytes "
                      "of tagged fields, above max_frame_bytes %" PRId64,
                      kr_s_api_name(s->stream_key), s->stream_ver, s->upname,
                      tail, s->lc->max_frame_bytes);
        return -1;
    }
    if (total - *scan < tail) {
        return 0;
    }
    if (tail == 1 && evbuffer_ptr_set(in, &ptr, *scan, EVBUFFER_PTR_SET) ==
        0 && evbuffer_copyout_from(in, &ptr, &last, 1) == 1 && last == 0) {
        /* no tagged fields, nothing to rewrite: the byte joins the run
           (no split of the chain it is in, so nothing is copied) */
        *scan += 1;
        s->streaming = 0;
        s->stream_left = 0;
        s->fifo.head_since_ms = kr_clock_timer_ms();
        kr_s_stream_audit_end(s, false);
        return 1;
    }
    if ((hold = kr_s_hold_take(s)) == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, *scan);
    move_bytes(s, in, s->client.out, *scan);
    *scan = 0;
    evbuffer_remove_buffer(in, hold, tail);
    rc = kr_rewrite_tail(&s->rw, s->stream_key, s->stream_ver, hold,
                         s->client.out, &res);
    kr_s_hold_put(s, hold);
    if (rc == KR_ELIMIT && res.bad_node_id < -1) {
        kr_s_close_up(s, KR_LOG_WARN, "%s v%d response from %s names NodeId "
                      "%d: a broker's NodeId cannot be negative (the upstream "
                      "sent an invalid response)", kr_s_api_name(s->stream_key),
                      s->stream_ver, s->upname, res.bad_node_id);
        return -1;
    }
    if (rc == KR_ELIMIT) {
        kr_s_close_up(s, KR_LOG_WARN, "%s v%d response names NodeId %d, "
                      "outside this listener's node_id_min..node_id_max "
                      "%d..%d: widen the range (and broker_port_base) in the "
                      "config", kr_s_api_name(s->stream_key), s->stream_ver,
                      res.bad_node_id, s->lc->node_id_min, s->lc->node_id_max);
        return -1;
    }
    if (rc != KR_OK) {
        /* res.err's offsets count from the tail's first byte */
        kr_s_close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from %s: "
                      "%s (in its tagged fields, which start at frame offset %"
                      PRIu64 ")", kr_s_api_name(s->stream_key), s->stream_ver,
                      s->upname, res.err[0] ? res.err : kr_status_str(rc),
                      s->rsp_st->scan.off + KR_FRAME_PREFIX);
        return -1;
    }
    KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, tail);
    if (res.dropped > 0) {
        KR_STAT_INC(s->host->stats, endpoints_dropped);
        kr_log_debug("[%s] %s v%d response: the advertised endpoints are "
                     "longer than the broker's and do not fit the streamed "
                     "frame: dropped (clients refresh metadata instead)",
                     s->name, kr_s_api_name(s->stream_key), s->stream_ver);
    }
    kr_log_trace("[%s] response %s v%d streamed: %u endpoints rewritten",
                 s->name, kr_s_api_name(s->stream_key), s->stream_ver,
                 res.endpoints);
    s->streaming = 0;
    s->stream_left = 0;
    s->fifo.head_since_ms = kr_clock_timer_ms();
    kr_s_stream_audit_end(s, res.changed);
    return 1;
}

/*
 * The scanner reached the end of a streamed response whose tail is not
 * rewritten (a Fetch streamed for its audit line at a version without
 * endpoints), or stopped at bytes it cannot walk where the response
 * fails open (kr_s_stream_audit_undecodable): the rest of the frame
 * passes as it is (rsp_remain), and its audit line is written.
 */
void
kr_s_stream_plain_end(struct kr_session *s)
{
    s->streaming = 0;
    s->rsp_remain = s->stream_left;
    s->stream_left = 0;
    if (s->rsp_remain == 0) {
        s->fifo.head_since_ms = kr_clock_timer_ms();
    }
    kr_s_stream_audit_end(s, false);
}

/*
 * A response to a Produce with Acks=0 is dropped (the client expects
 * none): counted; the first one says, once per connection, that this
 * upstream answers them (from then on they are all remembered).
 */
static void
acks0_dropped(struct kr_session *s)
{
    if (!s->acks0_answered) {
        s->acks0_answered = 1;
        kr_log_debug("[%s] upstream %s answers Produce requests with "
                     "Acks=0 (Kafka brokers do not): krelay drops those "
                     "responses", s->name, s->upname);
    }
    KR_STAT_INC(s->host->stats, responses_dropped);
}

/* What next_response decided about the response frame at the scan point. */
enum nrsp_outcome {
    NRSP_CLOSED = -1,                   /* the session was closed */
    NRSP_WAIT,                          /* more bytes are needed */
    NRSP_CUT_THROUGH,                   /* accepted: s->rsp_remain bytes go
                                           on as they are */
    NRSP_HOLD,                          /* whole, held to rewrite broker
                                           addresses (*flen_out) */
    NRSP_RULES,                         /* whole, for rule_response
                                           (*idx_out its entry) */
    NRSP_DROP,                          /* answers an Acks=0 Produce: drop
                                           it (*flen_out) */
    NRSP_STREAM,                        /* streamed: only part is here and
                                           only its tail needs rewriting
                                           (s->streaming set; the size
                                           prefix passes as it is) */
    NRSP_INTERNAL                       /* whole, the answer to krelay's own
                                           request (*idx_out its entry,
                                           *flen_out): never forwarded */
};

/*
 * Look at the response frame at offset scan of up.in and say what
 * happens to it (enum nrsp_outcome).
 */
/*
 * response_errors for a response krelay does not decode (e, flen payload
 * bytes at scan in in, avail bytes there, its first c bytes at pk): its
 * top-level ErrorCode where it sits at a fixed offset
 * (kr_frame_peek_rsp_error), counted when not 0.  Returns 0, or 1 when
 * the bytes that hold it have not all come (wait: the frame is longer).
 */
static int
rsp_top_error(struct kr_session *s, struct kr_inflight *e, struct evbuffer *in,
              size_t scan, size_t avail, size_t flen, int16_t up_version,
              const uint8_t *pk, size_t c)
{
    uint8_t small[KR_PEEK_SMALL];
    size_t n = min_sz(avail - KR_FRAME_PREFIX, flen), need = 0;
    int16_t code = 0;
    int rc;

    if (kr_frame_rsp_error_off(e->api_key, up_version) < 0) {
        e->metered |= KR_INF_M_ERROR;
        return 0;
    }
    rc = kr_frame_peek_rsp_error(pk + KR_FRAME_PREFIX,
                                 min_sz(c - KR_FRAME_PREFIX, flen), flen,
                                 e->api_key, up_version, &code, &need);
    if (rc == KR_AGAIN && need <= n) {
        /* (a header with tagged fields longer than the first peek) */
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
        rc = kr_frame_peek_rsp_error(pk + KR_FRAME_PREFIX,
                                     min_sz(c - KR_FRAME_PREFIX, flen), flen,
                                     e->api_key, up_version, &code, &need);
    }
    if (rc == KR_AGAIN && need > n) {
        return 1;
    }
    e->metered |= KR_INF_M_ERROR;
    if (rc == KR_OK && code != 0) {
        KR_STAT_INC_L(s->host->stats, response_errors,
                      kr_stats_rsp_error_cell(code));
    }
    return 0;
}

static enum nrsp_outcome
next_response(struct kr_session *s, struct evbuffer *in, size_t scan,
              size_t avail, size_t *flen_out, uint32_t *idx_out)
{
    uint32_t idx;
    struct kr_inflight *e;
    uint8_t small[KR_PEEK_SMALL];
    struct kr_frame_field f[1];
    const uint8_t *pk;
    size_t c, flen, hl = 0, need = 0;
    int32_t size, corr;
    int64_t now;
    int rc;

    c = peek(s, in, scan, min_sz(avail, sizeof(small)), small, sizeof(small),
             &pk);
    for (;;) {
        e = kr_s_fifo_waiting(s, &idx);
        if (e == NULL && s->acks0_forgot > 0 &&
            kr_frame_size(pk, c, KR_FRAME_RSP_MIN, INT32_MAX, &size) ==
                KR_OK) {
            if (c < KR_FRAME_PREFIX + KR_FRAME_RSP_MIN) {
                return NRSP_WAIT;
            }
            /* the answer to a Produce with Acks=0 that krelay stopped
               remembering (push_optional): the client expects none */
            s->acks0_forgot--;
            acks0_dropped(s);
            *flen_out = (size_t)size;
            return NRSP_DROP;
        }
        if (e == NULL) {
            kr_s_close_up(s, KR_LOG_WARN, "upstream %s sent %zu bytes with no "
                          "request in flight", s->upname, avail);
            return NRSP_CLOSED;
        }
        if (e->kind == KR_INF_SASL_TOKEN) {
            if (idx > 0) {
                kr_s_close_up(s, KR_LOG_ERROR, "internal: SASL token behind %u "
                              "answered requests", idx);
                return NRSP_CLOSED;
            }
            if (kr_frame_size(pk, c, 0, INT32_MAX, &size) != KR_OK) {
                kr_s_close_up(s, KR_LOG_WARN, "upstream %s sent a SASL token "
                              "frame of %d bytes", s->upname, size);
                return NRSP_CLOSED;
            }
            if (e->sasl == 1) {
                /* issue 9: PLAIN's answer, SCRAM's "v=" or "e=" */
                size_t n = min_sz((size_t)size, 2);

                if (c < KR_FRAME_PREFIX + n) {
                    return NRSP_WAIT;
                }
                e->sasl = 2;
                if (kr_s_sasl_outcome(s, kr_sasl_on_answer(
                                             &s->sasl, KR_SASL_F_RAW, 0,
                                             pk + KR_FRAME_PREFIX,
                                             (size_t)size, -1)) != 0) {
                    return NRSP_CLOSED;
                }
            }
            kr_s_fifo_pop(s);
            KR_STAT_INC(s->host->stats, sasl_tokens);
            s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)size;
            return NRSP_CUT_THROUGH;
        }
        if (kr_frame_size(pk, c, KR_FRAME_RSP_MIN, INT32_MAX, &size) !=
            KR_OK) {
            kr_s_close_up(s, KR_LOG_WARN, "upstream %s sent a response frame "
                          "of %d bytes", s->upname, size);
            return NRSP_CLOSED;
        }
        if (c < KR_FRAME_PREFIX + KR_FRAME_RSP_MIN) {
            return NRSP_WAIT;
        }
        flen = (size_t)size;
        corr = kr_frame_i32(pk + KR_FRAME_PREFIX);
        if (corr != e->correlation_id && s->acks0_forgot > 0 &&
            !kr_inflight_has(&s->fifo, corr)) {
            /* the answer to a Produce with Acks=0 that krelay stopped
               remembering (push_optional): the client expects none */
            s->acks0_forgot--;
            acks0_dropped(s);
            *flen_out = flen;
            return NRSP_DROP;
        }
        if (!e->optional) {
            break;
        }
        if (corr == e->correlation_id) {
            /* a response to a Produce with Acks=0: the client does not
               expect it */
            kr_s_fifo_remove(s, idx);
            acks0_dropped(s);
            *flen_out = flen;
            return NRSP_DROP;
        }
        /* the answer to a later request: this Acks=0 Produce got none,
           as from Kafka; stop remembering them */
        s->acks0_silent = 1;
        kr_s_fifo_remove(s, idx);
    }
    if (corr != e->correlation_id) {
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s answered CorrelationId %d "
                      "but the oldest request in flight is %s v%d "
                      "CorrelationId %d", s->upname, corr,
                      kr_s_api_name(e->api_key), e->api_version,
                      e->correlation_id);
        return NRSP_CLOSED;
    }
    now = kr_clock_timer_ms();
    if (e->kind == KR_INF_REQUEST && !(e->metered & KR_INF_M_UPSTREAM)) {
        /* its first bytes are here: once, however often this frame is
           looked at again while it comes */
        e->metered |= KR_INF_M_UPSTREAM;
        kr_stats_observe_upstream(s->host->stats, now - e->sent_ms);
    }
    if (s->rstream && e->rq != NULL && e->rq == s->req_st->rq) {
        /* its audit line would lose what is still to come; a broker
           answers a request only once it has all of it */
        kr_s_close_up(s, KR_LOG_WARN, "upstream %s answered %s v%d "
                      "CorrelationId %d before krelay had sent the whole "
                      "request", s->upname, kr_s_api_name(e->api_key),
                      e->api_version, e->correlation_id);
        return NRSP_CLOSED;
    }
    if (e->kind == KR_INF_INTERNAL) {
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            kr_s_close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes to "
                          "krelay's own request exceeds max_frame_bytes %"
                          PRId64, kr_s_api_name(e->api_key), e->api_version,
                          flen, s->lc->max_frame_bytes);
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        *flen_out = flen;
        *idx_out = idx;
        return NRSP_INTERNAL;
    }
    if (e->sasl == 1 && e->api_key == KR_API_SASL_AUTHENTICATE) {
        /* issue 9: its ErrorCode, AuthBytes, SessionLifetimeMs (whole) */
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            kr_s_close_up(s, KR_LOG_WARN, "SaslAuthenticate v%d response of "
                          "%zu bytes exceeds max_frame_bytes %" PRId64,
                          e->api_version, flen, s->lc->max_frame_bytes);
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        e->sasl = 2;
        if (sasl_authenticate_answer(s, in, scan, flen, e->api_version) != 0) {
            return NRSP_CLOSED;
        }
    }
    if (e->sasl == 1 && e->api_key == KR_API_SASL_HANDSHAKE) {
        f[0].id = KR_FIELD_ERROR_CODE;
        for (;;) {
            rc = kr_frame_response_hdr_len(pk + KR_FRAME_PREFIX,
                                           min_sz(c - KR_FRAME_PREFIX, flen),
                                           flen,
                                           e->api_key, e->api_version, &hl,
                                           &need);
            if (rc == KR_OK) {
                rc = kr_frame_peek_fields(pk + KR_FRAME_PREFIX,
                                          min_sz(c - KR_FRAME_PREFIX, flen),
                                          flen, true,
                                          e->api_key, e->api_version, hl, f,
                                          1, &need);
            }
            if (rc != KR_AGAIN) {
                break;
            }
            if (need > min_sz(avail - KR_FRAME_PREFIX, flen)) {
                return NRSP_WAIT;
            }
            c = peek(s, in, scan, KR_FRAME_PREFIX + need, small,
                     sizeof(small), &pk);
        }
        e->sasl = 2;
        if (kr_s_sasl_outcome(s, kr_sasl_on_answer(
                                     &s->sasl, KR_SASL_F_HANDSHAKE,
                                     rc == KR_OK && f[0].found
                                         ? (int16_t)f[0].val
                                         : KR_KERR_UNKNOWN_SERVER_ERROR,
                                     NULL, 0, -1)) != 0) {
            return NRSP_CLOSED;
        }
        if (e->api_version == 0 && rc == KR_OK && f[0].found &&
            f[0].val == 0 && sasl_start(s) != 0) {
            return NRSP_CLOSED;
        }
        if (e->api_version == 0) {
            s->want_rsp_first = 0;
        }
    }
    if (e->kind == KR_INF_REQUEST && !(e->metered & KR_INF_M_ERROR) &&
        ((e->rq == NULL &&
          !kr_s_errors_by_rewrite(e->api_key, e->api_version)) ||
         (idx == 0 && (kr_s_rsp_scan_only(e) ||
                       ((int64_t)flen > s->lc->max_frame_bytes &&
                        kr_s_rsp_may_stream(e))))) &&
        rsp_top_error(s, e, in, scan, avail, flen,
                      e->rq != NULL ? e->rq->a->up_version : e->api_version,
                      pk, c) != 0) {
        /* not decoded: its top-level ErrorCode, if at a fixed offset (the
           rules' responses are counted where they are decoded) */
        return NRSP_WAIT;
    }
    if (idx == 0 && e->rq != NULL && kr_s_rsp_scan_only(e)) {
        /* issue 14: a Fetch response its rules only audit is not held:
           streamed, its audit line built from what the scanner sees */
        rc = stream_start(s, e, flen, true, scan);
        if (rc <= 0) {
            return rc == 0 ? NRSP_STREAM : NRSP_CLOSED;
        }
    }
    if (idx == 0 && e->rq != NULL &&
        (int64_t)flen > s->lc->max_frame_bytes && kr_s_rsp_may_stream(e)) {
        /* issue 13: too large to hold for rules that only observe it:
           it goes on as if no rule had wanted it */
        kr_s_rsp_let_go(s, e, flen);
    }
    if (idx > 0 || e->rq != NULL) {
        /* the rules' response, or one that waits behind a held one */
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            kr_s_close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes "
                          "exceeds max_frame_bytes %" PRId64 " (krelay must "
                          "hold it %s)", kr_s_api_name(e->api_key),
                          e->api_version, flen, s->lc->max_frame_bytes,
                          idx > 0 ? "behind responses held for the rules" :
                          "to translate it back to the client's version");
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        *flen_out = flen;
        *idx_out = idx;
        return NRSP_RULES;
    }
    if (rsp_hold(e->api_key, e->api_version)) {
        if (kr_rewrite_streamable(e->api_key, e->api_version)) {
            if (avail - KR_FRAME_PREFIX < flen) {
                /* not all here yet: forward it as it arrives */
                return stream_start(s, e, flen, false, scan) == 0
                           ? NRSP_STREAM
                           : NRSP_CLOSED;
            }
            rc = no_tags(s, e, in, scan, flen);
            if (rc < 0) {
                return NRSP_CLOSED;
            }
            if (rc == 1) {
                /* no tagged fields, so no endpoints: cut-through */
                kr_s_fifo_pop_at(s, now);
                KR_STAT_INC(s->host->stats, responses);
                KR_STAT_INC(s->host->stats, responses_streamed);
                s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)flen;
                return NRSP_CUT_THROUGH;
            }
            if ((int64_t)flen > s->lc->max_frame_bytes) {
                /* too big to hold: streamed, as when it arrives in
                   pieces (max_frame_bytes does not apply to these) */
                return stream_start(s, e, flen, false, scan) == 0
                           ? NRSP_STREAM
                           : NRSP_CLOSED;
            }
        }
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            kr_s_close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes "
                          "exceeds max_frame_bytes %" PRId64 " (krelay must "
                          "hold it to rewrite broker addresses)",
                          kr_s_api_name(e->api_key), e->api_version, flen,
                          s->lc->max_frame_bytes);
            return NRSP_CLOSED;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return NRSP_WAIT;
        }
        *flen_out = flen;
        return NRSP_HOLD;
    }
    kr_s_fifo_pop_at(s, now);
    KR_STAT_INC(s->host->stats, responses);
    s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)flen;
    return NRSP_CUT_THROUGH;
}

/*
 * The whole response to krelay's own request (entry idx, flen payload
 * bytes) is at the start of up.in: hand it to its owner, never to the
 * client.  Returns 0, or -1 when closed (by the owner too).
 */
static int
internal_response(struct kr_session *s, uint32_t idx, size_t flen)
{
    struct kr_inflight *e = kr_s_fifo_at(s, idx);
    struct kr_internal *in = e->internal;
    int16_t key = e->api_key, ver = e->api_version;
    struct evbuffer *hold = kr_s_hold_take(s);

    if (hold == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return -1;
    }
    evbuffer_drain(s->up.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->up.in, hold, flen);
    e->internal = NULL;
    kr_s_fifo_remove(s, idx);
    KR_STAT_INC(s->host->stats, responses_internal);
    kr_log_debug("[%s] response to krelay's own %s v%d request: %zu bytes",
                 s->name, kr_s_api_name(key), ver, flen);
    in->cb(s, in->arg, key, ver, hold);
    free(in);
    kr_s_hold_put(s, hold);
    return s->dead ? -1 : 0;
}

/* Forward responses from up.in to client.out, in order. */
int
kr_s_process_responses(struct kr_session *s)
{
    struct evbuffer *in = s->up.in;
    size_t total = evbuffer_get_length(in), scan = 0, avail, take, flen;
    struct kr_inflight *e;
    uint32_t idx = 0;
    int rc;

    for (;;) {
        avail = total - scan;
        if (s->streaming) {
            rc = stream_more(s, in, &scan, total);
            if (rc < 0) {
                return -1;
            }
            if (rc == 0) {
                break;
            }
            total = evbuffer_get_length(in);
            continue;
        }
        if (s->rsp_remain > 0) {
            take = min_sz(avail, s->rsp_remain);
            scan += take;
            s->rsp_remain -= take;
            if (s->rsp_remain > 0) {
                break;
            }
            /* the next one's clock */
            s->fifo.head_since_ms = kr_clock_timer_ms();
            continue;
        }
        if (s->rsp_drop > 0) {
            /* scan is 0: the bytes before were moved on (NRSP_DROP) */
            take = min_sz(avail, s->rsp_drop);
            evbuffer_drain(in, take);
            s->rsp_drop -= take;
            total = evbuffer_get_length(in);
            if (s->rsp_drop > 0) {
                break;
            }
            continue;
        }
        if (avail < KR_FRAME_PREFIX) {
            break;
        }
        if (s->nready > 0 && (e = kr_s_fifo_first(s, &idx)) != NULL &&
            e->rq != NULL && e->rq->ready) {
            /* built responses at the head go out before what follows */
            KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            kr_s_flush_ready(s);
            total = evbuffer_get_length(in);
            avail = total;
        }
        rc = next_response(s, in, scan, avail, &flen, &idx);
        if (rc == NRSP_CLOSED) {
            return -1;
        }
        if (rc == NRSP_WAIT) {
            break;
        }
        if (rc == NRSP_STREAM) {
            scan += KR_FRAME_PREFIX;    /* the size prefix goes as it is */
            continue;
        }
        if (rc == NRSP_DROP) {
            KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            s->rsp_drop = KR_FRAME_PREFIX + (uint64_t)flen;
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NRSP_RULES || rc == NRSP_INTERNAL) {
            KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            if ((rc == NRSP_RULES ? kr_s_rule_response(s, idx, flen)
                                  : internal_response(s, idx, flen)) != 0) {
                return -1;
            }
            kr_s_flush_ready(s);
            total = evbuffer_get_length(in);
            continue;
        }
        if (rc == NRSP_HOLD) {
            /* keep the order: what was scanned goes first */
            KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, scan);
            move_bytes(s, in, s->client.out, scan);
            scan = 0;
            e = kr_s_fifo_head(s);
            if (held_response(s, e->api_key, e->api_version, flen) != 0) {
                return -1;
            }
            total = evbuffer_get_length(in);
        }
    }
    KR_STAT_ADD(s->host->stats, upstream_to_client_bytes, scan);
    move_bytes(s, in, s->client.out, scan);
    if (s->nready > 0) {
        kr_s_flush_ready(s);
    }
    return 0;
}
