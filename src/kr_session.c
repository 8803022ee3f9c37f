/*
 * kr_session.c - one client connection, its upstream connection, and
 * the frames between them.
 *
 *            client                  krelay                    upstream
 *                                                              (broker)
 *   accept --------> kr_session_new
 *                    kr_upstream_resolve(NodeId | bootstrap)
 *                         `--> resolved_cb --> up_connect ------> connect
 *
 *   requests:
 *     bytes ---(a)--> client.in
 *                      |  process_requests: per frame
 *                      |   (b) size prefix: sniff TLS/HTTP, limits
 *                      |   (c) kr_frame_peek_request: ApiKey, ApiVersion,
 *                      |       CorrelationId, ClientId
 *                      |   (d) table-driven peek of leading fields: Acks,
 *                      |       TimeoutMs, MaxWaitMs, RebalanceTimeoutMs
 *                      |   (e) req_hold? (SaslHandshake: decode Mechanism)
 *                      |   (f) fifo_push {CorrelationId, ApiKey, ApiVersion,
 *                      |       time, wait}   (not for Produce Acks=0)
 *                      v
 *                    cut-through: evbuffer_add_buffer/remove_buffer
 *                      (whole frame or the part read so far: req_remain)
 *                      v
 *                    up.out ------------------(g) writev---------> broker
 *
 *   responses:
 *     client <--(m)-- client.out <--------------------------- up.in <-- bytes
 *                      ^                                       |
 *                      |                      process_responses: per frame
 *                      |                (h) size prefix, CorrelationId ==
 *                      |                    fifo head? else close
 *                      |                (i) rsp_hold? (kr_rewrite_wants)
 *                      |                     no: cut-through (rsp_remain)
 *                      |                     yes: wait for the whole frame,
 *                      |                          move it to s->hold,
 *                      +------ kr_rewrite_response(hold -> client.out)
 *                                       (j) fifo_pop; SaslHandshake v0 OK
 *                                           -> raw SASL token frames
 *
 *   backpressure (update_io): read the client only while up.out <
 *   max_buffer_bytes and fewer than max_inflight requests wait; read the
 *   upstream only while client.out < max_buffer_bytes.
 *   timer (arm_timer): connect_timeout_ms until connected; then the head
 *   request's own wait + request_timeout_margin_ms; idle_timeout_ms when
 *   nothing is in flight.
 *   every close: kr_session_close (one log line, both sides freed).
 *
 * I/O uses raw events: one readv of up to 256 KiB into
 * evbuffer_reserve_space per readable event, and one writev
 * (evbuffer_write) per flush; events are added/removed only when the
 * backpressure state changes (bufferevents read 4 KiB at a time with an
 * ioctl per read: half the throughput, measured).  Bytes are moved, not
 * copied, except the tail of a chain split by a frame boundary
 * (evbuffer_remove_buffer copies that part) and small amounts added to
 * a backlog (move_bytes); when every byte read can be forwarded the
 * whole chain list moves (evbuffer_add_buffer).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_frame.h"
#include "kr_listener.h"
#include "kr_log.h"
#include "kr_proxy.h"
#include "kr_rewrite.h"
#include "kr_session.h"
#include "kr_upstream.h"

#define KR_READ_MIN (16 * 1024)
#define KR_READ_MAX (256 * 1024)
/*
 * libevent allocates a chain as the next power of two >= its header +
 * the size asked for: ask for a power of two minus this so a 256 KiB
 * read takes a 256 KiB chain, not 512 KiB.
 */
#define KR_CHAIN_HDR 128
/* Below this many bytes (or a quarter of a read) forwarded bytes are
   copied rather than moved as whole, mostly empty chains. */
#define KR_COPY_MAX 4096
#define KR_PEEK_SMALL 260           /* first copy of a frame's start */
#define KR_DRAIN_MS 5000            /* flush responses after upstream EOF */

enum timer_kind { T_NONE, T_CONNECT, T_REQUEST, T_IDLE, T_DRAIN };

static void session_free(struct kr_session *s);
static void arm_timer(struct kr_session *s);

/* ---- transport: plain TCP ------------------------------------------- */

static ssize_t
tcp_read(struct kr_conn *c, struct evbuffer *in, size_t max)
{
    struct evbuffer_iovec v[2];
    struct iovec iov[2];
    ssize_t r;
    size_t left;
    int i, n;

    n = evbuffer_reserve_space(in, (ev_ssize_t)max, v, 2);
    if (n <= 0) {
        errno = ENOMEM;
        return -1;
    }
    left = max;
    for (i = 0; i < n; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
        left -= iov[i].iov_len;
    }
    do {
        r = readv(c->fd, iov, n);
    } while (r < 0 && errno == EINTR);
    if (r <= 0) {
        return r;
    }
    left = (size_t)r;
    for (i = 0; i < n && left > 0; i++) {
        v[i].iov_len = iov[i].iov_len < left ? iov[i].iov_len : left;
        left -= v[i].iov_len;
    }
    if (evbuffer_commit_space(in, v, i) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return r;
}

static ssize_t
tcp_write(struct kr_conn *c, struct evbuffer *out)
{
    return evbuffer_write(out, c->fd);
}

static void
tcp_close(struct kr_conn *c)
{
    (void)c;
}

const struct kr_conn_ops kr_conn_tcp_ops = {
    "tcp", tcp_read, tcp_write, tcp_close
};

static bool
again(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

static void
set_reading(struct kr_conn *c, bool on)
{
    if (c->rev == NULL || (bool)c->reading == on) {
        return;
    }
    if (on) {
        event_add(c->rev, NULL);
    } else {
        event_del(c->rev);
    }
    c->reading = on;
}

static void
set_writing(struct kr_conn *c, bool on)
{
    if (c->wev == NULL || (bool)c->writing == on) {
        return;
    }
    if (on) {
        event_add(c->wev, NULL);
    } else {
        event_del(c->wev);
    }
    c->writing = on;
}

/* Read once; adapt the next read's size to what this one got. */
static ssize_t
conn_read(struct kr_conn *c)
{
    size_t want = c->read_size - KR_CHAIN_HDR;
    ssize_t n = c->ops->read(c, c->in, want);

    if (n > 0) {
        c->bytes_in += (uint64_t)n;
        if ((size_t)n == want && c->read_size < KR_READ_MAX) {
            c->read_size *= 2;
        } else if ((size_t)n < c->read_size / 4 &&
                   c->read_size > KR_READ_MIN) {
            c->read_size /= 2;
        }
    }
    return n;
}

static void
conn_init(struct kr_conn *c)
{
    c->fd = -1;
    c->ops = &kr_conn_tcp_ops;
    c->read_size = KR_READ_MIN;
    c->in = evbuffer_new();
    c->out = evbuffer_new();
}

static void
conn_close(struct kr_conn *c)
{
    if (c->rev != NULL) {
        event_free(c->rev);
        c->rev = NULL;
    }
    if (c->wev != NULL) {
        event_free(c->wev);
        c->wev = NULL;
    }
    c->reading = c->writing = 0;
    if (c->fd >= 0) {
        c->ops->close(c);
        close(c->fd);
        c->fd = -1;
    }
    c->connected = 0;
}

/* ---- logging and the one close path ------------------------------------ */

static void
vclose(struct kr_session *s, uint64_t *ctr, int level, const char *fmt,
       va_list ap)
{
    static struct kr_ratelimit rl;
    char msg[320];

    if (s->dead) {
        return;
    }
    s->dead = 1;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (level <= kr_log_level_cur) {
        if (level <= KR_LOG_WARN) {
            kr_log_write_rl(&rl, 10, level, "[%s] %s", s->name, msg);
        } else {
            kr_log_write(level, "[%s] %s (%" PRIu64 " bytes up, %" PRIu64
                         " down)", s->name, msg, s->client.bytes_in,
                         s->client.bytes_out);
        }
    }
    (*ctr)++;
    if (s->resolve != NULL) {
        kr_upstream_resolve_cancel(s->resolve);
        s->resolve = NULL;
    }
    if (s->timer != NULL) {
        event_free(s->timer);
        s->timer = NULL;
    }
    conn_close(&s->client);
    conn_close(&s->up);
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else if (s->p->sessions == s) {
        s->p->sessions = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    s->prev = s->next = NULL;
    s->g->nconn--;
    s->p->stats.conn_active--;
    if (s->depth == 0) {
        session_free(s);
    }
}

void
kr_session_close(struct kr_session *s, int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vclose(s, &s->p->stats.close_other, level, fmt, ap);
    va_end(ap);
}

#define CLOSE_WITH(name, counter)                                           \
    static void KR_PRINTF(3, 4)                                             \
    name(struct kr_session *s, int level, const char *fmt, ...)             \
    {                                                                       \
        va_list ap;                                                         \
        va_start(ap, fmt);                                                  \
        vclose(s, &s->p->stats.counter, level, fmt, ap);                    \
        va_end(ap);                                                         \
    }
CLOSE_WITH(close_bad, close_bad_input)
CLOSE_WITH(close_client, close_client)
CLOSE_WITH(close_up, close_upstream)
CLOSE_WITH(close_timeout, close_timeout)

static void
session_free(struct kr_session *s)
{
    if (s->client.in != NULL) {
        evbuffer_free(s->client.in);
    }
    if (s->client.out != NULL) {
        evbuffer_free(s->client.out);
    }
    if (s->up.in != NULL) {
        evbuffer_free(s->up.in);
    }
    if (s->up.out != NULL) {
        evbuffer_free(s->up.out);
    }
    if (s->hold != NULL) {
        evbuffer_free(s->hold);
    }
    free(s->fifo);
    if (s->cref != NULL) {
        kr_conf_ref_put(s->cref);
    }
    free(s);
}

static void
leave(struct kr_session *s)
{
    if (--s->depth == 0 && s->dead) {
        session_free(s);
    }
}

/* ---- in-flight FIFO ------------------------------------------------------ */

static int
fifo_push(struct kr_session *s, const struct kr_inflight *e)
{
    if (s->fifo_len == s->fifo_cap) {
        uint32_t cap = s->fifo_cap ? s->fifo_cap * 2 : 8, i;
        struct kr_inflight *f = malloc(cap * sizeof(*f));

        if (f == NULL) {
            return KR_ENOMEM;
        }
        for (i = 0; i < s->fifo_len; i++) {
            f[i] = s->fifo[(s->fifo_head + i) % s->fifo_cap];
        }
        free(s->fifo);
        s->fifo = f;
        s->fifo_cap = cap;
        s->fifo_head = 0;
    }
    s->fifo[(s->fifo_head + s->fifo_len) % s->fifo_cap] = *e;
    if (s->fifo_len++ == 0) {
        s->head_since_ms = e->sent_ms;
    }
    return KR_OK;
}

static struct kr_inflight *
fifo_head(struct kr_session *s)
{
    return s->fifo_len ? &s->fifo[s->fifo_head] : NULL;
}

static void
fifo_pop(struct kr_session *s)
{
    s->fifo_head = (s->fifo_head + 1) % s->fifo_cap;
    s->fifo_len--;
    s->head_since_ms = kr_now_ms();
    s->last_active_ms = s->head_since_ms;
}

static const char *
api_name(int16_t key)
{
    const struct kr_api_desc *a = kr_api_get(key);

    return a != NULL && a->name != NULL ? a->name : "ApiKey?";
}

/* ---- timers ----------------------------------------------------------- */

static int64_t
deadline(struct kr_session *s, enum timer_kind *kind)
{
    const struct kr_listener_conf *lc = s->lc;
    const struct kr_inflight *e;
    int64_t connect_ms = lc->up ? lc->up->connect_timeout_ms : 10000;
    int64_t margin_ms = lc->up ? lc->up->request_timeout_margin_ms : 30000;

    if (s->draining) {
        *kind = T_DRAIN;
        return s->last_active_ms + KR_DRAIN_MS;
    }
    if (!s->up.connected) {
        *kind = T_CONNECT;
        return s->started_ms + connect_ms;
    }
    e = fifo_head(s);
    if (e != NULL) {
        *kind = T_REQUEST;
        return s->head_since_ms + e->wait_ms + margin_ms;
    }
    if (lc->idle_timeout_ms > 0) {
        *kind = T_IDLE;
        return s->last_active_ms + lc->idle_timeout_ms;
    }
    *kind = T_NONE;
    return INT64_MAX;
}

static void
timer_add(struct kr_session *s, int64_t at, int64_t now)
{
    struct timeval tv;
    int64_t d = at > now ? at - now : 0;

    tv.tv_sec = (time_t)(d / 1000);
    tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
    event_add(s->timer, &tv);
    s->timer_at = at;
}

/*
 * Arm the timer when the deadline moved earlier; a later deadline is
 * found when the timer fires early and re-arms (no event_add per frame).
 */
static void
arm_timer(struct kr_session *s)
{
    enum timer_kind kind;
    int64_t at;

    if (s->dead) {
        return;
    }
    at = deadline(s, &kind);
    if (kind == T_NONE) {
        return;
    }
    if (s->timer_at == 0 || at < s->timer_at) {
        timer_add(s, at, kr_now_ms());
    }
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    const struct kr_inflight *e;
    enum timer_kind kind;
    int64_t now = kr_now_ms(), at;

    (void)fd;
    (void)what;
    s->depth++;
    s->timer_at = 0;
    at = deadline(s, &kind);
    if (kind != T_NONE && now >= at) {
        switch (kind) {
        case T_CONNECT:
            close_timeout(s, KR_LOG_WARN, "no upstream connection to %s "
                          "after connect_timeout_ms %" PRId64,
                          s->upname[0] ? s->upname : "(resolving)",
                          s->lc->up ? s->lc->up->connect_timeout_ms : 0);
            break;
        case T_REQUEST:
            e = fifo_head(s);
            close_timeout(s, KR_LOG_WARN, "upstream %s sent no response to "
                          "%s v%d CorrelationId %d in %" PRId64 " ms",
                          s->upname, api_name(e->api_key), e->api_version,
                          e->correlation_id, now - s->head_since_ms);
            break;
        case T_IDLE:
            close_timeout(s, KR_LOG_INFO, "idle for idle_timeout_ms %" PRId64,
                          s->lc->idle_timeout_ms);
            break;
        default:
            close_up(s, KR_LOG_INFO, "upstream closed the connection; "
                     "client did not take the last responses");
            break;
        }
    } else if (kind != T_NONE) {
        timer_add(s, at, now);
    }
    leave(s);
}

/* ---- backpressure and flushing ----------------------------------------- */

static void
update_io(struct kr_session *s)
{
    size_t maxb = (size_t)s->lc->max_buffer_bytes;

    if (s->dead) {
        return;
    }
    set_reading(&s->client, !s->draining && !s->req_blocked &&
                evbuffer_get_length(s->up.out) < maxb);
    set_reading(&s->up, s->up.connected && !s->draining &&
                evbuffer_get_length(s->client.out) < maxb);
}

/* Write what we can now; watch for writability while bytes remain. */
static int
conn_flush(struct kr_session *s, struct kr_conn *c)
{
    ssize_t n;

    if (s->dead) {
        return -1;
    }
    if (c->fd < 0 || !c->connected) {
        return 0;
    }
    if (evbuffer_get_length(c->out) > 0) {
        n = c->ops->write(c, c->out);
        if (n < 0 && !again(errno)) {
            if (c == &s->client) {
                close_client(s, KR_LOG_INFO, "write to client: %s",
                             strerror(errno));
            } else {
                close_up(s, KR_LOG_WARN, "write to upstream %s: %s",
                         s->upname, strerror(errno));
            }
            return -1;
        }
        if (n > 0) {
            c->bytes_out += (uint64_t)n;
        }
    }
    set_writing(c, evbuffer_get_length(c->out) > 0);
    return 0;
}

/*
 * Move the first n bytes of in (read with read_size) to out.  Whole
 * chains move without a copy.  But a chain moved into an output keeps
 * its whole capacity, so when out already holds bytes the peer has not
 * taken (a backlog that can grow to max_buffer_bytes), small amounts (a
 * few requests in a 256 KiB chain) are copied instead: the memory held
 * stays within 4x of the bytes held.  Without a backlog the chain is
 * written and freed at once, so it moves.
 */
static void
move_bytes(struct evbuffer *in, struct evbuffer *out, size_t n,
           size_t read_size)
{
    if (n == 0) {
        return;
    }
    if (evbuffer_get_length(out) > 0 &&
        (n < KR_COPY_MAX || n < read_size / 4)) {
        evbuffer_add(out, evbuffer_pullup(in, (ev_ssize_t)n), n);
        evbuffer_drain(in, n);
    } else if (n == evbuffer_get_length(in)) {
        evbuffer_add_buffer(out, in);
    } else {
        evbuffer_remove_buffer(in, out, n);
    }
}

/*
 * Copy up to len bytes of in from offset off into small (len <= smallsz)
 * or the proxy's scratch buffer.  Returns the count copied.
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
    dst = len <= smallsz ? small : s->p->scratch;
    *pk = dst;
    if (evbuffer_ptr_set(in, &pos, off, EVBUFFER_PTR_SET) != 0) {
        return 0;
    }
    n = evbuffer_copyout_from(in, &pos, dst, len);
    return n < 0 ? 0 : (size_t)n;
}

static size_t
min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
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

static enum kr_sasl_mech
sasl_mech_of(const uint8_t *p, int32_t len)
{
    if (len == 5 && memcmp(p, "PLAIN", 5) == 0) {
        return KR_SASL_PLAIN;
    }
    if ((len == 13 && memcmp(p, "SCRAM-SHA-256", 13) == 0) ||
        (len == 13 && memcmp(p, "SCRAM-SHA-512", 13) == 0)) {
        return KR_SASL_SCRAM;
    }
    return KR_SASL_OTHER;
}

/*
 * Decode a whole SaslHandshake request at offset off of in (frame_len
 * payload bytes after the prefix) with the codec; remember Mechanism.
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
    struct kr_val *v;
    int i, n, rc;

    if (evbuffer_ptr_set(in, &pos, off + KR_FRAME_PREFIX,
                         EVBUFFER_PTR_SET) != 0) {
        close_bad(s, KR_LOG_WARN, "SaslHandshake request: bad offset");
        return -1;
    }
    n = evbuffer_peek(in, (ev_ssize_t)frame_len, &pos, ev, KR_RBUF_MAX_SEG);
    if (n < 0 || n > KR_RBUF_MAX_SEG) {
        close_bad(s, KR_LOG_WARN, "SaslHandshake request of %zu bytes in "
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
        close_bad(s, KR_LOG_WARN, "cannot decode SaslHandshake request: %s "
                  "at %s", err.msg, err.path);
        kr_arena_free(&arena);
        return -1;
    }
    v = kr_node_get(m.body, "Mechanism");
    if (v == NULL || v->is_null || v->u.s.len < 0) {
        s->sasl_mech = KR_SASL_OTHER;
    } else {
        s->sasl_mech = sasl_mech_of(v->u.s.p, v->u.s.len);
        kr_log_debug("[%s] SaslHandshake v%d Mechanism %.*s", s->name,
                     m.api_version, (int)(v->u.s.len > 40 ? 40 :
                                          v->u.s.len),
                     (const char *)v->u.s.p);
    }
    kr_arena_free(&arena);
    return 0;
}

/* Leading body fields to peek per ApiKey: the request's own wait. */
static int
request_fields(int16_t key, struct kr_frame_field *f)
{
    switch (key) {
    case KR_API_PRODUCE:
        f[0].name = "Acks";
        f[1].name = "TimeoutMs";
        return 2;
    case KR_API_FETCH:
        f[0].name = "MaxWaitMs";
        return 1;
    case KR_API_JOIN_GROUP:
        f[0].name = "RebalanceTimeoutMs";
        f[1].name = "SessionTimeoutMs";
        return 2;
    default:
        return 0;
    }
}

/*
 * Look at the frame starting at offset scan of client.in (avail bytes
 * there, >= 4).  Returns 1 when the frame was accepted (s->req_remain
 * set), 0 to wait for more bytes (or a free in-flight slot), -1 when
 * the session was closed.
 */
static int
next_request(struct kr_session *s, struct evbuffer *in, size_t scan,
             size_t avail)
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
    bool expect = true;

    c = peek(s, in, scan, min_sz(avail, sizeof(small)), small, sizeof(small),
             &pk);
    if (c < KR_FRAME_PREFIX) {
        return 0;
    }
    if (!s->seen_first) {
        const char *what = kr_frame_sniff(pk, c);

        s->seen_first = 1;
        if (what != NULL) {
            close_bad(s, KR_LOG_WARN, "%s on a plaintext listener", what);
            return -1;
        }
    }
    memset(&e, 0, sizeof(e));
    e.sent_ms = kr_now_ms();
    if (s->sasl_tokens > 0) {
        rc = kr_frame_size(pk, c, 0, lc->max_frame_bytes, &size);
        if (rc != KR_OK) {
            close_bad(s, KR_LOG_WARN, "SASL token frame of %d bytes "
                      "(max_frame_bytes %" PRId64 ")", size,
                      lc->max_frame_bytes);
            return -1;
        }
        e.kind = KR_INF_SASL_TOKEN;
        e.correlation_id = -1;
        if (fifo_push(s, &e) != KR_OK) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
        s->sasl_tokens--;
        s->p->stats.sasl_tokens++;
        s->req_remain = KR_FRAME_PREFIX + (uint64_t)size;
        return 1;
    }
    rc = kr_frame_size(pk, c, KR_FRAME_REQ_MIN, lc->max_frame_bytes, &size);
    if (rc != KR_OK) {
        const char *what = kr_frame_sniff(pk, c);

        if (what != NULL) {
            close_bad(s, KR_LOG_WARN, "%s on a plaintext listener", what);
        } else if (size < 0) {
            close_bad(s, KR_LOG_WARN, "negative frame size %d "
                      "(%02x %02x %02x %02x): not a Kafka client?", size,
                      pk[0], pk[1], pk[2], pk[3]);
        } else if (rc == KR_EPROTO) {
            close_bad(s, KR_LOG_WARN, "request frame of %d bytes is "
                      "shorter than a request header", size);
        } else {
            close_bad(s, KR_LOG_WARN, "request frame of %d bytes exceeds "
                      "max_frame_bytes %" PRId64, size, lc->max_frame_bytes);
        }
        return -1;
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
            return 0;
        }
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
    }
    if (rc != KR_OK) {
        close_bad(s, KR_LOG_WARN, "malformed request header (ApiKey %d, "
                  "ApiVersion %d, %zu bytes): %s", h.api_key, h.api_version,
                  flen, kr_status_str(rc));
        return -1;
    }
    if (s->fifo_len >= (uint64_t)lc->max_inflight) {
        s->req_blocked = 1;
        return 0;
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
            return 0;
        }
        c = peek(s, in, scan, KR_FRAME_PREFIX + need, small, sizeof(small),
                 &pk);
    }
    if (nf > 0 && rc != KR_OK && rc != KR_EUNSUPPORTED) {
        close_bad(s, KR_LOG_WARN, "malformed %s v%d request (CorrelationId "
                  "%d): %s", api_name(h.api_key), h.api_version,
                  h.correlation_id, kr_status_str(rc));
        return -1;
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
    if (h.known && req_hold(h.api_key, h.api_version)) {
        if (avail - KR_FRAME_PREFIX < flen) {
            return 0;           /* wait for the whole frame */
        }
        if (h.api_key == KR_API_SASL_HANDSHAKE &&
            decode_sasl_handshake(s, in, scan, flen) != 0) {
            return -1;
        }
    }
    if (expect) {
        e.correlation_id = h.correlation_id;
        e.api_key = h.api_key;
        e.api_version = h.api_version;
        e.kind = KR_INF_REQUEST;
        if (fifo_push(s, &e) != KR_OK) {
            kr_session_close(s, KR_LOG_ERROR, "out of memory");
            return -1;
        }
    } else {
        s->p->stats.requests_acks0++;
    }
    s->p->stats.requests++;
    kr_log_trace("[%s] request %s v%d CorrelationId %d ClientId %s, "
                 "%zu bytes%s", s->name, api_name(h.api_key),
                 h.api_version, h.correlation_id,
                 h.client_id_null ? "(null)" : h.client_id, flen,
                 expect ? "" : ", Acks=0: no response");
    s->req_remain = KR_FRAME_PREFIX + (uint64_t)flen;
    return 1;
}

/* Forward whole or partial request frames from client.in to up.out. */
static int
process_requests(struct kr_session *s)
{
    struct evbuffer *in = s->client.in;
    size_t total = evbuffer_get_length(in), scan = 0, avail, take;
    int rc;

    for (;;) {
        avail = total - scan;
        if (s->req_remain > 0) {
            take = min_sz(avail, s->req_remain);
            scan += take;
            s->req_remain -= take;
            if (s->req_remain > 0) {
                break;
            }
            continue;
        }
        if (s->opaque) {
            scan = total;
            break;
        }
        if (avail < KR_FRAME_PREFIX) {
            break;
        }
        rc = next_request(s, in, scan, avail);
        if (rc < 0) {
            return -1;
        }
        if (rc == 0) {
            break;
        }
    }
    s->p->stats.bytes_up += scan;
    move_bytes(in, s->up.out, scan, s->client.read_size);
    return 0;
}

/* ---- responses --------------------------------------------------------- */

/* After a SaslHandshake v0 response: switch to raw token frames. */
static void
sasl_start(struct kr_session *s)
{
    switch (s->sasl_mech) {
    case KR_SASL_PLAIN:
        s->sasl_tokens = 1;
        break;
    case KR_SASL_SCRAM:
        s->sasl_tokens = 2;
        break;
    default:
        s->opaque = 1;
        kr_log_notice("[%s] SASL mechanism without a known token count "
                      "after SaslHandshake v0: the rest of this connection "
                      "passes through unparsed", s->name);
        break;
    }
}

/* Process a held response (whole frame at the start of up.in). */
static int
held_response(struct kr_session *s, int16_t key, int16_t ver, size_t flen)
{
    struct kr_rewrite_result res;
    int rc;

    evbuffer_drain(s->up.in, KR_FRAME_PREFIX);
    evbuffer_remove_buffer(s->up.in, s->hold, flen);
    fifo_pop(s);
    memset(&res, 0, sizeof(res));
    rc = kr_rewrite_response(&s->rw, key, ver, s->hold, s->client.out,
                             &res);
    evbuffer_drain(s->hold, evbuffer_get_length(s->hold));
    if (rc == KR_ELIMIT) {
        close_up(s, KR_LOG_WARN, "%s v%d response names NodeId %d, outside "
                 "this listener's node_id_min..node_id_max %d..%d: widen "
                 "the range (and broker_port_base) in the config",
                 api_name(key), ver, res.bad_node_id, s->lc->node_id_min,
                 s->lc->node_id_max);
        return -1;
    }
    if (rc != KR_OK) {
        close_up(s, KR_LOG_WARN, "cannot rewrite %s v%d response from %s: "
                 "%s", api_name(key), ver, s->upname,
                 res.err[0] ? res.err : kr_status_str(rc));
        return -1;
    }
    s->p->stats.responses++;
    s->p->stats.responses_held++;
    s->p->stats.bytes_down += flen + KR_FRAME_PREFIX;
    kr_log_trace("[%s] response %s v%d held: %u endpoints rewritten, %u "
                 "versions capped", s->name, api_name(key), ver,
                 res.endpoints, res.capped);
    return 0;
}

/*
 * Look at the response frame at offset scan of up.in.  Returns 1 when
 * accepted cut-through (s->rsp_remain set), 2 when the frame is whole
 * and must be held (*flen_out set), 0 to wait, -1 when closed.
 */
static int
next_response(struct kr_session *s, struct evbuffer *in, size_t scan,
              size_t avail, size_t *flen_out)
{
    struct kr_inflight *e = fifo_head(s);
    uint8_t small[KR_PEEK_SMALL];
    struct kr_frame_field f[1];
    const uint8_t *pk;
    size_t c, flen, hl = 0, need = 0;
    int32_t size, corr;
    int rc;

    if (e == NULL) {
        close_up(s, KR_LOG_WARN, "upstream %s sent %zu bytes with no request "
                 "in flight", s->upname, avail);
        return -1;
    }
    c = peek(s, in, scan, min_sz(avail, sizeof(small)), small, sizeof(small),
             &pk);
    if (e->kind == KR_INF_SASL_TOKEN) {
        if (kr_frame_size(pk, c, 0, INT32_MAX, &size) != KR_OK) {
            close_up(s, KR_LOG_WARN, "upstream %s sent a SASL token frame "
                     "of %d bytes", s->upname, size);
            return -1;
        }
        fifo_pop(s);
        s->p->stats.sasl_tokens++;
        s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)size;
        return 1;
    }
    if (kr_frame_size(pk, c, KR_FRAME_RSP_MIN, INT32_MAX, &size) != KR_OK) {
        close_up(s, KR_LOG_WARN, "upstream %s sent a response frame of %d "
                 "bytes", s->upname, size);
        return -1;
    }
    if (c < KR_FRAME_PREFIX + KR_FRAME_RSP_MIN) {
        return 0;
    }
    flen = (size_t)size;
    corr = kr_frame_i32(pk + KR_FRAME_PREFIX);
    if (corr != e->correlation_id) {
        close_up(s, KR_LOG_WARN, "upstream %s answered CorrelationId %d but "
                 "the oldest request in flight is %s v%d CorrelationId %d",
                 s->upname, corr, api_name(e->api_key), e->api_version,
                 e->correlation_id);
        return -1;
    }
    if (e->api_key == KR_API_SASL_HANDSHAKE && e->api_version == 0) {
        f[0].name = "ErrorCode";
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
                return 0;
            }
            c = peek(s, in, scan, KR_FRAME_PREFIX + need, small,
                     sizeof(small), &pk);
        }
        if (rc == KR_OK && f[0].found && f[0].val == 0) {
            sasl_start(s);
        }
    }
    if (rsp_hold(e->api_key, e->api_version)) {
        if ((int64_t)flen > s->lc->max_frame_bytes) {
            close_up(s, KR_LOG_WARN, "%s v%d response of %zu bytes exceeds "
                     "max_frame_bytes %" PRId64 " (krelay must hold it to "
                     "rewrite broker addresses)", api_name(e->api_key),
                     e->api_version, flen, s->lc->max_frame_bytes);
            return -1;
        }
        if (avail - KR_FRAME_PREFIX < flen) {
            return 0;
        }
        *flen_out = flen;
        return 2;
    }
    fifo_pop(s);
    s->p->stats.responses++;
    s->rsp_remain = KR_FRAME_PREFIX + (uint64_t)flen;
    return 1;
}

/* Forward responses from up.in to client.out, in order. */
static int
process_responses(struct kr_session *s)
{
    struct evbuffer *in = s->up.in;
    size_t total = evbuffer_get_length(in), scan = 0, avail, take, flen;
    struct kr_inflight *e;
    int rc;

    for (;;) {
        avail = total - scan;
        if (s->rsp_remain > 0) {
            take = min_sz(avail, s->rsp_remain);
            scan += take;
            s->rsp_remain -= take;
            if (s->rsp_remain > 0) {
                break;
            }
            continue;
        }
        if (s->opaque) {
            scan = total;
            break;
        }
        if (avail < KR_FRAME_PREFIX) {
            break;
        }
        rc = next_response(s, in, scan, avail, &flen);
        if (rc < 0) {
            return -1;
        }
        if (rc == 0) {
            break;
        }
        if (rc == 2) {
            /* keep the order: what was scanned goes first */
            s->p->stats.bytes_down += scan;
            move_bytes(in, s->client.out, scan, s->up.read_size);
            scan = 0;
            e = fifo_head(s);
            if (held_response(s, e->api_key, e->api_version, flen) != 0) {
                return -1;
            }
            total = evbuffer_get_length(in);
        }
    }
    s->p->stats.bytes_down += scan;
    move_bytes(in, s->client.out, scan, s->up.read_size);
    return 0;
}

/* ---- callbacks ------------------------------------------------------------ */

static void
client_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    ssize_t n;

    (void)fd;
    (void)what;
    s->depth++;
    n = conn_read(&s->client);
    if (n > 0) {
        s->last_active_ms = kr_now_ms();
        if (process_requests(s) == 0 && conn_flush(s, &s->up) == 0) {
            update_io(s);
            arm_timer(s);
        }
    } else if (n == 0) {
        close_client(s, KR_LOG_INFO, "client closed the connection");
    } else if (!again(errno)) {
        close_client(s, KR_LOG_INFO, "client read: %s", strerror(errno));
    }
    leave(s);
}

static void
client_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;

    (void)fd;
    (void)what;
    s->depth++;
    if (conn_flush(s, &s->client) == 0) {
        if (s->draining && evbuffer_get_length(s->client.out) == 0) {
            close_up(s, KR_LOG_INFO, "upstream %s closed the connection "
                     "(last responses delivered)", s->upname);
        } else {
            update_io(s);
        }
    }
    leave(s);
}

/* Upstream gone: deliver what the client has not taken yet, then close. */
static void
upstream_eof(struct kr_session *s, const char *why)
{
    if (evbuffer_get_length(s->client.out) > 0 && s->rsp_remain == 0) {
        kr_log_debug("[%s] upstream %s: %s; flushing responses", s->name,
                     s->upname, why);
        conn_close(&s->up);
        s->draining = 1;
        s->last_active_ms = kr_now_ms();
        update_io(s);
        s->timer_at = 0;
        arm_timer(s);
        return;
    }
    if (s->fifo_len == 0 && s->rsp_remain == 0) {
        close_up(s, KR_LOG_INFO, "upstream %s: %s", s->upname, why);
    } else {
        close_up(s, KR_LOG_WARN, "upstream %s: %s with %u requests in flight",
                 s->upname, why, s->fifo_len);
    }
}

static void
up_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    ssize_t n;

    (void)fd;
    (void)what;
    s->depth++;
    n = conn_read(&s->up);
    if (n > 0) {
        if (process_responses(s) != 0) {
            goto out;
        }
        if (s->req_blocked && s->fifo_len < (uint64_t)s->lc->max_inflight) {
            s->req_blocked = 0;
            if (process_requests(s) != 0 || conn_flush(s, &s->up) != 0) {
                goto out;
            }
        }
        if (conn_flush(s, &s->client) == 0) {
            update_io(s);
            arm_timer(s);
        }
    } else if (n == 0) {
        upstream_eof(s, "closed the connection");
    } else if (!again(errno)) {
        upstream_eof(s, strerror(errno));
    }
out:
    leave(s);
}

static void
up_connected(struct kr_session *s)
{
    s->up.connected = 1;
    kr_log_debug("[%s] connected to upstream %s", s->name, s->upname);
    /* the deadline changes from connect to request/idle */
    if (s->timer != NULL) {
        event_del(s->timer);
    }
    s->timer_at = 0;
    arm_timer(s);
}

static void
up_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_session *s = arg;
    socklen_t len = sizeof(int);
    int err = 0;

    (void)what;
    s->depth++;
    if (!s->up.connected) {
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
        if (err != 0) {
            close_up(s, KR_LOG_WARN, "connect to upstream %s: %s",
                     s->upname, strerror(err));
            goto out;
        }
        up_connected(s);
    }
    if (conn_flush(s, &s->up) == 0) {
        update_io(s);
    }
out:
    leave(s);
}

static void
up_connect(struct kr_session *s, const struct sockaddr *sa, socklen_t salen)
{
    struct event_base *base = s->p->base;
    int fd, on = 1, rc;

    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        close_up(s, KR_LOG_ERROR, "socket for upstream %s: %s", s->upname,
                 strerror(errno));
        return;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    s->up.fd = fd;
    s->up.rev = event_new(base, fd, EV_READ | EV_PERSIST, up_read_cb, s);
    s->up.wev = event_new(base, fd, EV_WRITE | EV_PERSIST, up_write_cb, s);
    if (s->up.rev == NULL || s->up.wev == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        return;
    }
    do {
        rc = connect(fd, sa, salen);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        up_connected(s);
        if (conn_flush(s, &s->up) == 0) {
            update_io(s);
        }
        return;
    }
    if (errno != EINPROGRESS) {
        close_up(s, KR_LOG_WARN, "connect to upstream %s: %s", s->upname,
                 strerror(errno));
        return;
    }
    set_writing(&s->up, true);
}

static void
resolved_cb(void *arg, int status, const struct sockaddr *addr,
            socklen_t addrlen, const char *what)
{
    struct kr_session *s = arg;

    s->resolve = NULL;
    s->depth++;
    snprintf(s->upname, sizeof(s->upname), "%s", what ? what : "?");
    if (status != KR_OK || addr == NULL) {
        if (s->l->node_id == KR_NODE_BOOTSTRAP) {
            close_up(s, KR_LOG_WARN, "no bootstrap server reachable (%s)",
                     s->upname);
        } else {
            close_up(s, KR_LOG_WARN, "upstream has no address for NodeId "
                     "%d (%s)", s->l->node_id, s->upname);
        }
    } else {
        up_connect(s, addr, addrlen);
    }
    leave(s);
}

/* ---- creation ------------------------------------------------------------ */

int
kr_session_new(struct kr_proxy *p, struct kr_group *g,
               const struct kr_listener *l, evutil_socket_t fd,
               const struct sockaddr *sa, socklen_t salen)
{
    struct kr_session *s;
    char peer[64];
    int on = 1;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        close(fd);
        kr_log_rl(KR_LOG_ERROR, "out of memory accepting a connection");
        return KR_ENOMEM;
    }
    s->id = ++p->next_id;
    s->p = p;
    s->g = g;
    s->l = l;
    s->cref = kr_conf_ref_get(p->cref);
    s->lc = g->lc;
    conn_init(&s->client);
    conn_init(&s->up);
    s->client.fd = fd;
    s->client.connected = 1;
    s->hold = evbuffer_new();
    s->timer = evtimer_new(p->base, timer_cb, s);
    s->client.rev = event_new(p->base, fd, EV_READ | EV_PERSIST,
                              client_read_cb, s);
    s->client.wev = event_new(p->base, fd, EV_WRITE | EV_PERSIST,
                              client_write_cb, s);
    kr_sockaddr_str(sa, salen, peer, sizeof(peer));
    snprintf(s->name, sizeof(s->name), "c#%" PRIu64 " %s > %s", s->id, peer,
             l->label);
    s->rw.advertised_host = s->lc->advertised_host;
    s->rw.broker_port_base = s->lc->broker_port_base;
    s->rw.node_id_min = s->lc->node_id_min;
    s->rw.node_id_max = s->lc->node_id_max;
    s->rw.upstream = g->up;
    s->rw.who = s->name;
    s->started_ms = s->last_active_ms = kr_now_ms();
    s->next = p->sessions;
    if (p->sessions != NULL) {
        p->sessions->prev = s;
    }
    p->sessions = s;
    g->nconn++;
    p->stats.conn_active++;
    p->stats.conn_accepted++;
    s->depth++;
    if (s->client.in == NULL || s->client.out == NULL || s->up.in == NULL ||
        s->up.out == NULL || s->hold == NULL || s->timer == NULL ||
        s->client.rev == NULL || s->client.wev == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "out of memory");
        leave(s);
        return KR_ENOMEM;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    kr_log_debug("[%s] accepted", s->name);
    update_io(s);
    arm_timer(s);
    if (g->up == NULL) {
        kr_session_close(s, KR_LOG_ERROR, "listener has no upstream");
    } else {
        s->resolve = kr_upstream_resolve(g->up, l->node_id, resolved_cb, s);
    }
    leave(s);
    return KR_OK;
}
