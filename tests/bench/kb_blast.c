/*
 * kb_blast.c - krbench blast and krbench canned: a workload in which the
 * proxy between them is the bottleneck (contrib/bench/README.md, the
 * blast workloads).
 *
 *   krbench blast  -a HOST:PORT[,HOST:PORT...] [-c CONNS] [-D DEPTH]
 *                  [-d SECONDS] [-w WARMUP] [-r RECORDS] [-s SIZE]
 *                  [-p PARTITIONS] [-V VERSION] [-t TOPIC] [-S CAFILE]
 *                  [-i USEC] [-C PID[/THREAD],...]
 *   krbench canned -l HOST:PORT [-r FILE] [-t TOPIC] [-n NODEID]
 *                  [-i USEC]
 *
 * blast: CONNS connections (default 64, round-robin over the addresses;
 *   with -S each does its TLS handshake first: kb_tls_ctx's settings)
 *   send one prebuilt Produce request over and over (version VERSION,
 *   default 9, Acks=1, topic TOPIC, PARTITIONS partitions from 0
 *   (default 1), each one RecordBatch v2 of RECORDS records of SIZE
 *   bytes: default 16 x 1 KiB), keeping DEPTH
 *   requests in flight on each (default 4), for WARMUP (default 1) then
 *   SECONDS (default 3) seconds.  Each connection holds DEPTH copies of
 *   the frame back to back in one ring; a request's CorrelationId is its
 *   number on the connection, patched into its copy in place when the
 *   copy is reused (its previous request has been answered, so it was
 *   wholly sent).  Whatever is queued goes in one write (sendmsg of the
 *   ring's one or two pieces; TLS: SSL_write_ex of the contiguous piece,
 *   partial writes on, a record at a time).  Every response is checked:
 *   its CorrelationId is the next one due on its connection and the
 *   ErrorCode of its single partition, at the fixed offset the canned
 *   response has (kb_produce_response), is 0; a bad response closes its
 *   connection and fails the run.  No allocation after the start.
 *   Reports requests/s, records/s and MB/s of record bytes (10^6 bytes of
 *   record values) in the window, its own CPU and socket calls (reads,
 *   writes, epoll_waits), and with -C the peers' CPU and run-queue wait.
 *   -i USEC (blast and canned): sleep USEC microseconds before each
 *   epoll_wait (default 0), so that one wake-up handles what many
 *   connections received meanwhile: with enough requests in flight the
 *   proxy never runs dry, and the peers' CPU per request falls (fewer
 *   wake-ups, larger reads); blast_scale uses it.
 * canned: a scripted upstream on HOST:PORT (port 0: chosen by the kernel;
 *   the port is written to FILE and stdout once listening).  Reads in
 *   large pieces and looks only at each request's header (size, ApiKey,
 *   version, CorrelationId); the rest of the frame is skipped unread.
 *   Answers Produce v3-v12 with a prebuilt response of that version (one
 *   topic TOPIC, default "blast", partition 0, ErrorCode 0, BaseOffset 0:
 *   whatever the request held; Acks=0 is not told apart, every Produce
 *   is answered), ApiVersions (v0 body: Produce 3-12, Metadata 1,
 *   ApiVersions 0; another version gets ErrorCode 35, as Kafka answers)
 *   and Metadata v1 (one broker, itself as NODEID, default 1, at HOST:PORT;
 *   TOPIC with partition 0 led by it): what krelay's upstream fetch asks
 *   (src/kr_upstream.c).  Any other request closes its connection with a
 *   line on stderr.  Responses of one read go out in one write.  Stops on
 *   SIGTERM/SIGINT and prints its counts (and its recv, send and
 *   epoll_wait calls) as JSON.
 *
 * Layouts: ProduceRequest/ProduceResponse.json (flexible from v9),
 * MetadataResponse.json v1, ApiVersionsResponse.json v0.
 */
#define _GNU_SOURCE 1

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "kb_blast.h"
#include "kb_wire.h"

#define KB_B_MAX_ADDRS 16
#define KB_B_MAX_CONNS 4096
#define KB_B_IN 65536               /* blast: response bytes per connection */
#define KB_C_IN 65536               /* canned: request bytes read at once */
#define KB_C_OUT_HIGH (1u << 20)    /* canned: stop reading above this */
#define KB_C_MAX_FRAME (100u << 20) /* canned: larger is a bad frame */
#define KB_PRODUCE_MIN 3
#define KB_PRODUCE_MAX 12           /* v13 names topics by TopicId */

/* ---- the canned Produce response ---------------------------------------- */

/*
 * Append a whole Produce response frame (size prefix included, the
 * CorrelationId 0 at byte offset 4) at version v: topic, one partition
 * part, ErrorCode 0, BaseOffset 0, LogAppendTimeMs -1, LogStartOffset -1,
 * no record errors.  Returns the offset of the partition's ErrorCode from
 * the frame's start: where blast checks it.
 */
static size_t
kb_produce_response(struct kb_buf *b, int v, const char *topic, int32_t part)
{
    bool flex = v >= 9;
    size_t start = b->len, err_at;

    kb_i32(b, 0);                   /* size, patched below */
    kb_i32(b, 0);                   /* CorrelationId */
    if (flex) {
        kb_uvarint(b, 0);           /* header tagged fields */
        kb_uvarint(b, 2);           /* Responses: 1 */
        kb_str(b, topic, true);
        kb_uvarint(b, 2);           /* PartitionResponses: 1 */
    } else {
        kb_i32(b, 1);
        kb_str(b, topic, false);
        kb_i32(b, 1);
    }
    kb_i32(b, part);                /* Index */
    err_at = b->len - start;
    kb_i16(b, 0);                   /* ErrorCode */
    kb_i64(b, 0);                   /* BaseOffset */
    kb_i64(b, -1);                  /* LogAppendTimeMs (v2+) */
    kb_i64(b, -1);                  /* LogStartOffset (v5+: v3, v4 not) */
    if (v < 5) {
        b->len -= 8;
    }
    if (v >= 8) {
        if (flex) {
            kb_uvarint(b, 1);       /* RecordErrors: empty */
            kb_uvarint(b, 0);       /* ErrorMessage: null */
            kb_uvarint(b, 0);       /* partition tagged fields */
            kb_uvarint(b, 0);       /* topic tagged fields */
        } else {
            kb_i32(b, 0);
            kb_i16(b, -1);
        }
    }
    kb_i32(b, 0);                   /* ThrottleTimeMs */
    if (flex) {
        kb_uvarint(b, 0);           /* body tagged fields */
    }
    kb_set_i32(b, start, (int32_t)(b->len - start - 4));
    return err_at;
}

static uint32_t
kb_get_u32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return ntohl(v);
}

static int16_t
kb_get_i16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, 2);
    return (int16_t)ntohs(v);
}

/* Add or change fd's epoll interest; kb_die when epoll refuses. */
static void
kb_epoll_set(int ep, int op, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = { .events = events, .data.ptr = ptr };

    if (epoll_ctl(ep, op, fd, &ev) != 0) {
        kb_die("epoll_ctl: %s", strerror(errno));
    }
}

/* Sleep us microseconds (0: not at all). */
static void
kb_pause_us(long us)
{
    struct timespec ts = { .tv_sec = us / 1000000,
                           .tv_nsec = (us % 1000000) * 1000 };

    if (us > 0) {
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

/* ---- blast ----------------------------------------------------------------- */

struct kb_bconn {
    int fd;
    SSL *ssl;                       /* NULL: plaintext */
    uint8_t *ring;                  /* depth copies of the request */
    size_t wpos;                    /* next byte of ring to write */
    size_t wleft;                   /* bytes queued from wpos (wrapping) */
    int64_t issued;                 /* requests queued; request i has
                                       CorrelationId (int32)i */
    int64_t answered;               /* responses read */
    uint8_t *in;                    /* KB_B_IN bytes */
    size_t in_len;
    bool want_out;                  /* EPOLLOUT is in the interest */
    bool dead;
};

struct kb_blast {
    int depth;
    size_t frame_len, ring_len, err_at;
    int64_t responses;              /* every connection's, whole run */
    long bad;                       /* bad responses */
    long lost;                      /* connections closed or failed */
    int64_t reads, writes, waits;   /* recv/SSL_read_ex, sendmsg/
                                       SSL_write_ex and epoll_wait calls */
};

/* Queue requests until depth are in flight (patching CorrelationIds). */
static void
bconn_refill(const struct kb_blast *B, struct kb_bconn *c)
{
    while (c->issued - c->answered < B->depth) {
        size_t slot = (size_t)(c->issued % B->depth) * B->frame_len;
        uint32_t corr = htonl((uint32_t)c->issued);

        memcpy(c->ring + slot + 8, &corr, 4);
        c->wleft += B->frame_len;
        c->issued++;
    }
}

/*
 * Write what is queued until the socket takes no more.  -1 when the
 * connection failed.  A retried SSL_write_ex starts at the same byte with
 * at least as many (only appended to since), as OpenSSL requires.
 */
static int
bconn_flush(struct kb_blast *B, struct kb_bconn *c)
{
    while (c->wleft > 0) {
        size_t first = B->ring_len - c->wpos, done;

        if (first > c->wleft) {
            first = c->wleft;
        }
        if (c->ssl != NULL) {
            int r = SSL_write_ex(c->ssl, c->ring + c->wpos, first, &done);

            B->writes++;

            if (r <= 0) {
                int e = SSL_get_error(c->ssl, r);

                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    return 0;       /* EPOLLOUT or the next read */
                }
                return -1;
            }
        } else {
            struct iovec iov[2] = {
                { c->ring + c->wpos, first },
                { c->ring, c->wleft - first },
            };
            struct msghdr mh = { .msg_iov = iov,
                                 .msg_iovlen = c->wleft > first ? 2 : 1 };
            ssize_t r = sendmsg(c->fd, &mh, MSG_NOSIGNAL);

            B->writes++;

            if (r < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return errno == EAGAIN ? 0 : -1;
            }
            done = (size_t)r;
        }
        c->wpos = (c->wpos + done) % B->ring_len;
        c->wleft -= done;
        if (c->ssl == NULL && c->wleft > 0) {
            return 0;               /* the socket is full */
        }
    }
    return 0;
}

/* Check and count the complete responses in c->in.  -1: a bad one. */
static int
bconn_parse(struct kb_blast *B, struct kb_bconn *c)
{
    size_t off = 0;

    while (c->in_len - off >= 8) {
        uint32_t size = kb_get_u32(c->in + off);
        int32_t corr, want = (int32_t)(uint32_t)c->answered;
        int16_t ec;

        if (size < 4 || size > KB_B_IN - 4) {
            fprintf(stderr, "krbench blast: response of %u bytes\n", size);
            return -1;
        }
        if (c->in_len - off < 4 + (size_t)size) {
            break;
        }
        corr = (int32_t)kb_get_u32(c->in + off + 4);
        if (c->answered >= c->issued || corr != want ||
            4 + (size_t)size < B->err_at + 2) {
            fprintf(stderr, "krbench blast: response CorrelationId %d, "
                    "%u bytes (want %d, at least %zu)\n", (int)corr, size,
                    (int)want, B->err_at - 2);
            return -1;
        }
        ec = kb_get_i16(c->in + off + B->err_at);
        if (ec != 0) {
            fprintf(stderr, "krbench blast: Produce ErrorCode %d (request "
                    "%d)\n", (int)ec, (int)corr);
            return -1;
        }
        c->answered++;
        B->responses++;
        off += 4 + (size_t)size;
    }
    if (off > 0) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    return 0;
}

/* Read and check what arrived.  -1: closed, failed or a bad response. */
static int
bconn_read(struct kb_blast *B, struct kb_bconn *c)
{
    for (;;) {
        size_t room = KB_B_IN - c->in_len, got;

        if (c->ssl != NULL) {
            int r = SSL_read_ex(c->ssl, c->in + c->in_len, room, &got);

            B->reads++;

            if (r <= 0) {
                int e = SSL_get_error(c->ssl, r);

                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                    return 0;
                }
                return -1;
            }
        } else {
            ssize_t r = recv(c->fd, c->in + c->in_len, room, 0);

            B->reads++;

            if (r == 0) {
                return -1;
            }
            if (r < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return errno == EAGAIN ? 0 : -1;
            }
            got = (size_t)r;
        }
        c->in_len += got;
        if (bconn_parse(B, c) != 0) {
            B->bad++;
            return -1;
        }
        /* plaintext: a short read drained the socket; TLS: read_ahead
           may hold more records than the one SSL_read_ex returned */
        if (c->ssl != NULL ? !SSL_has_pending(c->ssl) : got < room) {
            return 0;
        }
    }
}

static void
bconn_close(struct kb_blast *B, struct kb_bconn *c)
{
    if (c->dead) {
        return;
    }
    c->dead = true;
    B->lost++;
    if (c->ssl != NULL) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    close(c->fd);                   /* also leaves the epoll set */
}

/* Connect (and handshake) one connection, blocking with time limits;
   then non-blocking.  false on failure (a line on stderr). */
static bool
bconn_open(struct kb_bconn *c, const struct sockaddr_in *sin, SSL_CTX *ctx)
{
    struct timeval tv = { .tv_sec = 5 };
    int on = 1;
    char why[256];

    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        kb_die("socket: %s", strerror(errno));
    }
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    if (connect(c->fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
        fprintf(stderr, "krbench blast: connect: %s\n", strerror(errno));
        close(c->fd);
        return false;
    }
    if (ctx != NULL) {
        c->ssl = kb_tls_new(ctx, c->fd, sin);
        ERR_clear_error();
        errno = 0;
        if (SSL_connect(c->ssl) != 1) {
            fprintf(stderr, "krbench blast: TLS handshake: %s\n",
                    kb_tls_err(why, sizeof(why)));
            SSL_free(c->ssl);
            c->ssl = NULL;
            close(c->fd);
            return false;
        }
    }
    if (kb_set_nonblock(c->fd) != 0) {
        kb_die("fcntl: %s", strerror(errno));
    }
    return true;
}

int
kb_blast(int argc, char **argv)
{
    struct sockaddr_in addrs[KB_B_MAX_ADDRS];
    int naddrs = 0, opt, nconns = 64, version = 9, nrec = 16, ep, alive = 0;
    int nparts = 1;
    int connected = 0;
    long lost;
    long size = 1024, pause_us = 0;
    double secs = 3, warm = 1;
    const char *topic = "blast", *ca = NULL;
    char tls_version[32] = "", cipher[64] = "", group[32] = "";
    struct kb_blast B = { .depth = 4 };
    struct kb_buf frame = { 0 }, resp = { 0 };
    struct kb_bconn *conns;
    SSL_CTX *ctx = NULL;
    double cpu_start, cpu0 = 0, cpu1 = 0, sys0 = 0, sys1 = 0;
    double peer0[KB_PEER_SNAP], peer1[KB_PEER_SNAP];
    int64_t t_start, t_warm, t_end, w0 = 0, w1 = 0, r0 = 0, r1 = 0;
    int64_t calls0[3] = { 0 }, calls1[3] = { 0 };
    bool measuring = false, done = false;

    while ((opt = getopt(argc, argv, "a:c:D:d:w:r:s:V:t:S:C:i:p:")) != -1) {
        switch (opt) {
        case 'p': nparts = (int)kb_parse_long(optarg, 1, 10000, "partitions");
            break;
        case 'i': pause_us = kb_parse_long(optarg, 0, 100000, "pause");
            break;
        case 'a':
            naddrs = kb_parse_addrs(optarg, addrs, KB_B_MAX_ADDRS);
            break;
        case 'c': nconns = (int)kb_parse_long(optarg, 1, KB_B_MAX_CONNS,
                                              "connections");
            break;
        case 'D': B.depth = (int)kb_parse_long(optarg, 1, 1024, "depth");
            break;
        case 'd': secs = kb_parse_double(optarg, 0.1, 3600, "seconds");
            break;
        case 'w': warm = kb_parse_double(optarg, 0, 600, "warm-up");
            break;
        case 'r': nrec = (int)kb_parse_long(optarg, 1, 100000, "records");
            break;
        case 's': size = kb_parse_long(optarg, 0, 1 << 20, "record size");
            break;
        case 'V': version = (int)kb_parse_long(optarg, KB_PRODUCE_MIN,
                                               KB_PRODUCE_MAX, "version");
            break;
        case 't': topic = optarg; break;
        case 'S': ca = optarg; break;
        case 'C': kb_parse_peers(optarg); break;
        default: return 2;
        }
    }
    if (naddrs == 0) {
        kb_die("blast needs -a HOST:PORT[,...]");
    }
    signal(SIGPIPE, SIG_IGN);
    kb_raise_nofile((rlim_t)nconns + 64);
    kb_produce_frame(&frame, version, topic, 0, nparts, nrec, (size_t)size);
    B.err_at = kb_produce_response(&resp, version, topic, 0);
    free(resp.p);
    B.frame_len = frame.len;
    B.ring_len = frame.len * (size_t)B.depth;
    if (ca != NULL) {
        ctx = kb_tls_ctx(ca);
        /* big writes, kept buffers, records read ahead in one read */
        SSL_CTX_clear_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                         SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_read_ahead(ctx, 1);
    }
    conns = calloc((size_t)nconns, sizeof(*conns));
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || ep < 0) {
        kb_die("cannot set up: %s", strerror(errno));
    }
    cpu_start = kb_cpu_s();
    t_start = kb_now_ns();
    for (int i = 0; i < nconns; i++) {
        struct kb_bconn *c = &conns[i];

        c->ring = malloc(B.ring_len);
        c->in = malloc(KB_B_IN);
        if (c->ring == NULL || c->in == NULL) {
            kb_die("out of memory");
        }
        for (int d = 0; d < B.depth; d++) {
            memcpy(c->ring + (size_t)d * frame.len, frame.p, frame.len);
        }
        if (!bconn_open(c, &addrs[i % naddrs], ctx)) {
            c->dead = true;
            B.lost++;
            continue;
        }
        if (c->ssl != NULL && tls_version[0] == '\0') {
            int nid = SSL_get_negotiated_group(c->ssl);
            const char *g = nid != NID_undef ? OBJ_nid2sn(nid) : NULL;

            snprintf(tls_version, sizeof(tls_version), "%s",
                     SSL_get_version(c->ssl));
            snprintf(cipher, sizeof(cipher), "%s",
                     SSL_get_cipher_name(c->ssl));
            snprintf(group, sizeof(group), "%s", g != NULL ? g : "?");
        }
        kb_epoll_set(ep, EPOLL_CTL_ADD, c->fd, EPOLLIN, c);
        alive++;
        connected++;
    }
    fprintf(stderr, "krbench blast: %d of %d connections%s, Produce v%d of "
            "%zu bytes (%d partition(s) x %d x %ld-byte records), %d in "
            "flight each\n", alive, nconns, ctx != NULL ? " (TLS)" : "",
            version, frame.len, nparts, nrec, size, B.depth);
    t_warm = kb_now_ns() + (int64_t)(warm * 1e9);
    t_end = t_warm + (int64_t)(secs * 1e9);
    for (int i = 0; i < nconns; i++) {
        struct kb_bconn *c = &conns[i];

        if (c->dead) {
            continue;
        }
        bconn_refill(&B, c);
        if (bconn_flush(&B, c) != 0) {
            bconn_close(&B, c);
            alive--;
        } else if (c->wleft > 0) {
            kb_epoll_set(ep, EPOLL_CTL_MOD, c->fd, EPOLLIN | EPOLLOUT, c);
            c->want_out = true;
        }
    }
    while (!done && alive > 0) {
        struct epoll_event evs[256];
        int64_t now = kb_now_ns();
        int n;

        if (!measuring && now >= t_warm) {
            measuring = true;
            w0 = now;
            r0 = B.responses;
            calls0[0] = B.reads, calls0[1] = B.writes, calls0[2] = B.waits;
            cpu0 = kb_cpu_s();
            sys0 = kb_sys_s();
            kb_peers_snap(peer0);
        } else if (measuring && now >= t_end) {
            w1 = now;
            r1 = B.responses;
            calls1[0] = B.reads, calls1[1] = B.writes, calls1[2] = B.waits;
            cpu1 = kb_cpu_s();
            sys1 = kb_sys_s();
            kb_peers_snap(peer1);
            done = true;
            break;
        }
        kb_pause_us(pause_us);
        n = epoll_wait(ep, evs, 256, 10);
        B.waits++;
        if (n < 0 && errno != EINTR) {
            kb_die("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            struct kb_bconn *c = evs[i].data.ptr;

            if (c->dead) {
                continue;
            }
            if ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) &&
                bconn_read(&B, c) != 0) {
                bconn_close(&B, c);
                alive--;
                continue;
            }
            bconn_refill(&B, c);
            if (bconn_flush(&B, c) != 0) {
                bconn_close(&B, c);
                alive--;
                continue;
            }
            if ((c->wleft > 0) != c->want_out) {
                c->want_out = c->wleft > 0;
                kb_epoll_set(ep, EPOLL_CTL_MOD, c->fd,
                             EPOLLIN | (c->want_out ? EPOLLOUT : 0), c);
            }
        }
    }
    if (!done) {
        fprintf(stderr, "krbench blast: every connection failed\n");
        w1 = kb_now_ns();
        if (!measuring) {
            w0 = w1;
            cpu0 = kb_cpu_s();
            sys0 = kb_sys_s();
            kb_peers_snap(peer0);
        }
        r1 = B.responses;
        cpu1 = kb_cpu_s();
        sys1 = kb_sys_s();
        kb_peers_snap(peer1);
    }
    lost = B.lost;
    {
        double win = (double)(w1 - w0) / 1e9;
        double reqs = (double)(r1 - r0), per_s = win > 0 ? reqs / win : 0;
        int recs = nrec * nparts;   /* records per request */
        double rec_bytes = (double)recs * (double)size;

        printf("{\"mode\":\"blast\",\"connections\":%d,\"connected\":%d,"
               "\"depth\":%d,\"tls\":%s,\"version\":\"%s\",\"cipher\":\"%s\","
               "\"group\":\"%s\",\"produce_version\":%d,\"request_bytes\":%zu,"
               "\"partitions_per_request\":%d,"
               "\"records_per_request\":%d,\"record_bytes\":%ld,"
               "\"window_s\":%.4f,\"requests\":%.0f,\"requests_per_s\":%.1f,"
               "\"records_per_s\":%.1f,\"mb_per_s\":%.2f,"
               "\"wire_mb_per_s\":%.2f,\"total_requests\":%" PRId64 ","
               "\"total_bytes\":%.0f,\"elapsed_s\":%.3f,"
               "\"bad_responses\":%ld,\"lost_connections\":%ld,"
               "\"client_cpu_s\":%.4f,\"client_cpu_window_s\":%.4f,"
               "\"client_sys_window_s\":%.4f,\"reads_window\":%" PRId64
               ",\"writes_window\":%" PRId64 ",\"epoll_waits_window\":%"
               PRId64,
               nconns, connected, B.depth,
               ctx != NULL ? "true" : "false", tls_version, cipher, group,
               version, frame.len, nparts, recs, size, win, reqs, per_s,
               per_s * recs, per_s * rec_bytes / 1e6,
               per_s * (double)frame.len / 1e6, B.responses,
               (double)B.responses * rec_bytes,
               (double)(kb_now_ns() - t_start) / 1e9, B.bad, B.lost,
               kb_cpu_s() - cpu_start, cpu1 - cpu0, sys1 - sys0,
               calls1[0] - calls0[0], calls1[1] - calls0[1],
               calls1[2] - calls0[2]);
        kb_peers_print(peer0, peer1);
        printf("}\n");
        fflush(stdout);
    }
    for (int i = 0; i < nconns; i++) {
        bconn_close(&B, &conns[i]);
        free(conns[i].ring);
        free(conns[i].in);
    }
    free(conns);
    free(frame.p);
    close(ep);
    if (ctx != NULL) {
        SSL_CTX_free(ctx);
    }
    return done && B.bad == 0 && lost == 0 && r1 > r0 ? 0 : 1;
}

/* ---- canned ---------------------------------------------------------------- */

struct kb_cconn {
    int fd;
    uint8_t *in;                    /* KB_C_IN bytes */
    size_t in_len;
    uint64_t skip;                  /* bytes of the current request still
                                       to pass over */
    struct kb_buf out;              /* responses not yet written, from
                                       out_off; reused (grows, never
                                       shrinks) */
    size_t out_off;
    uint32_t events;                /* the epoll interest */
    struct kb_cconn *next_free;
};

struct kb_canned {
    struct kb_buf produce[KB_PRODUCE_MAX + 1];  /* by version */
    struct kb_buf apiversions, apiversions_bad, metadata;
    long conns, produce_n, apiversions_n, metadata_n, refused;
    long reads, writes, waits;      /* recv, send and epoll_wait calls */
};

static volatile sig_atomic_t kb_c_stop;

static void
kb_c_on_signal(int sig)
{
    (void)sig;
    kb_c_stop = 1;
}

/* ApiVersions v0 response frame (CorrelationId 0) with ErrorCode ec. */
static void
kb_c_apiversions(struct kb_buf *b, int16_t ec)
{
    static const int16_t keys[][3] = {
        { 0, KB_PRODUCE_MIN, KB_PRODUCE_MAX },  /* Produce */
        { 3, 1, 1 },                            /* Metadata */
        { 18, 0, 0 },                           /* ApiVersions */
    };

    kb_i32(b, 0);
    kb_i32(b, 0);                   /* CorrelationId */
    kb_i16(b, ec);
    kb_i32(b, 3);
    for (int i = 0; i < 3; i++) {
        kb_i16(b, keys[i][0]);
        kb_i16(b, keys[i][1]);
        kb_i16(b, keys[i][2]);
    }
    kb_set_i32(b, 0, (int32_t)(b->len - 4));
}

/* Metadata v1 response frame: one broker (itself), topic with
   partition 0 led by it. */
static void
kb_c_metadata(struct kb_buf *b, int32_t node, const char *host,
              uint16_t port, const char *topic)
{
    kb_i32(b, 0);
    kb_i32(b, 0);                   /* CorrelationId */
    kb_i32(b, 1);                   /* Brokers */
    kb_i32(b, node);
    kb_str(b, host, false);
    kb_i32(b, port);
    kb_i16(b, -1);                  /* Rack: null */
    kb_i32(b, node);                /* ControllerId */
    kb_i32(b, 1);                   /* Topics */
    kb_i16(b, 0);
    kb_str(b, topic, false);
    kb_i8(b, 0);                    /* IsInternal */
    kb_i32(b, 1);                   /* Partitions */
    kb_i16(b, 0);
    kb_i32(b, 0);                   /* PartitionIndex */
    kb_i32(b, node);                /* LeaderId */
    kb_i32(b, 1);                   /* ReplicaNodes */
    kb_i32(b, node);
    kb_i32(b, 1);                   /* IsrNodes */
    kb_i32(b, node);
    kb_set_i32(b, 0, (int32_t)(b->len - 4));
}

/* Append the answer to one request header (at hdr: ApiKey, version,
   CorrelationId).  false: not scripted (logged). */
static bool
kb_c_answer(struct kb_canned *K, struct kb_cconn *c, const uint8_t *hdr)
{
    int16_t key = kb_get_i16(hdr), ver = kb_get_i16(hdr + 2);
    const struct kb_buf *r = NULL;

    if (key == 0 && ver >= KB_PRODUCE_MIN && ver <= KB_PRODUCE_MAX) {
        r = &K->produce[ver];
        K->produce_n++;
    } else if (key == 18) {
        r = ver == 0 ? &K->apiversions : &K->apiversions_bad;
        K->apiversions_n++;
    } else if (key == 3 && ver == 1) {
        r = &K->metadata;
        K->metadata_n++;
    } else {
        fprintf(stderr, "krbench canned: ApiKey %d v%d is not scripted: "
                "connection closed\n", (int)key, (int)ver);
        K->refused++;
        return false;
    }
    kb_put(&c->out, r->p, r->len);
    memcpy(c->out.p + c->out.len - r->len + 4, hdr + 4, 4);
    return true;
}

/* Pass over c->in: headers answered, bodies skipped.  -1: a bad frame. */
static int
kb_c_parse(struct kb_canned *K, struct kb_cconn *c)
{
    size_t off = 0;

    for (;;) {
        if (c->skip > 0) {
            size_t k = c->in_len - off;

            if (k > c->skip) {
                k = (size_t)c->skip;
            }
            off += k;
            c->skip -= k;
            if (c->skip > 0) {
                break;
            }
        }
        if (c->in_len - off < 12) {
            break;
        }
        {
            uint32_t size = kb_get_u32(c->in + off);

            if (size < 8 || size > KB_C_MAX_FRAME) {
                fprintf(stderr, "krbench canned: request of %u bytes: "
                        "connection closed\n", size);
                return -1;
            }
            if (!kb_c_answer(K, c, c->in + off + 4)) {
                return -1;
            }
            c->skip = size - 8;
            off += 12;
        }
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 0;
}

/*
 * Read what arrived (as much as fits) and answer it.  Bodies are read and
 * passed over: skipping large ones unread (recv MSG_TRUNC, then the next
 * header alone) took more CPU per request than copying them, on the
 * 2-vCPU VM (two calls per request instead of one per several).  -1:
 * closed, failed or a bad frame.
 */
static int
kb_c_read(struct kb_canned *K, struct kb_cconn *c)
{
    for (;;) {
        size_t want = KB_C_IN - c->in_len;
        ssize_t r = recv(c->fd, c->in + c->in_len, want, 0);

        K->reads++;

        if (r > 0) {
            c->in_len += (size_t)r;
            if (kb_c_parse(K, c) != 0) {
                return -1;
            }
            if ((size_t)r < want) {
                return 0;           /* drained */
            }
            continue;
        }
        if (r == 0) {
            return -1;
        }
        if (errno == EINTR) {
            continue;
        }
        return errno == EAGAIN ? 0 : -1;
    }
}

/* Write pending responses.  -1: the connection failed. */
static int
kb_c_flush(struct kb_canned *K, struct kb_cconn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off,
                         c->out.len - c->out_off, MSG_NOSIGNAL);

        K->writes++;

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN ? 0 : -1;
        }
        c->out_off += (size_t)n;
    }
    c->out.len = c->out_off = 0;
    return 0;
}

/* The interest c needs now: read unless too much is unsent, write while
   something is. */
static void
kb_c_interest(int ep, struct kb_cconn *c)
{
    size_t pending = c->out.len - c->out_off;
    uint32_t want = (pending < KB_C_OUT_HIGH ? EPOLLIN : 0) |
                    (pending > 0 ? EPOLLOUT : 0);

    if (want != c->events) {
        c->events = want;
        kb_epoll_set(ep, EPOLL_CTL_MOD, c->fd, want, c);
    }
}

int
kb_canned(int argc, char **argv)
{
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    const char *listen_at = NULL, *ready = NULL, *topic = "blast";
    char host[INET_ADDRSTRLEN];
    int opt, lfd, ep, on = 1;
    int32_t node = 1;
    long pause_us = 0;
    struct kb_canned K;
    struct kb_cconn *free_list = NULL;
    struct sigaction sa;
    double cpu0 = kb_cpu_s();

    memset(&K, 0, sizeof(K));
    while ((opt = getopt(argc, argv, "l:r:t:n:i:")) != -1) {
        switch (opt) {
        case 'i': pause_us = kb_parse_long(optarg, 0, 100000, "pause");
            break;
        case 'l': listen_at = optarg; break;
        case 'r': ready = optarg; break;
        case 't': topic = optarg; break;
        case 'n': node = (int32_t)kb_parse_long(optarg, 0, INT32_MAX,
                                                "NodeId");
            break;
        default: return 2;
        }
    }
    if (listen_at == NULL) {
        kb_die("canned needs -l HOST:PORT");
    }
    {
        /* kb_parse_addr's form, port 0 allowed */
        const char *colon = strrchr(listen_at, ':');

        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        if (colon == NULL || (size_t)(colon - listen_at) >= sizeof(host)) {
            kb_die("bad address '%s' (want IPv4:PORT)", listen_at);
        }
        memcpy(host, listen_at, (size_t)(colon - listen_at));
        host[colon - listen_at] = '\0';
        sin.sin_port = htons((uint16_t)kb_parse_long(colon + 1, 0, 65535,
                                                     "port"));
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
            kb_die("bad IPv4 address '%s'", host);
        }
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = kb_c_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    kb_raise_nofile(65536);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(lfd, (const struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        listen(lfd, 1024) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &slen) != 0) {
        kb_die("cannot listen on %s: %s", listen_at, strerror(errno));
    }
    inet_ntop(AF_INET, &sin.sin_addr, host, sizeof(host));
    for (int v = KB_PRODUCE_MIN; v <= KB_PRODUCE_MAX; v++) {
        (void)kb_produce_response(&K.produce[v], v, topic, 0);
    }
    kb_c_apiversions(&K.apiversions, 0);
    kb_c_apiversions(&K.apiversions_bad, 35);   /* UNSUPPORTED_VERSION */
    kb_c_metadata(&K.metadata, node, host, ntohs(sin.sin_port), topic);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        kb_die("epoll_create1: %s", strerror(errno));
    }
    kb_epoll_set(ep, EPOLL_CTL_ADD, lfd, EPOLLIN, NULL);
    if (ready != NULL) {
        FILE *f = fopen(ready, "w");

        if (f == NULL || fprintf(f, "%u\n", ntohs(sin.sin_port)) < 0 ||
            fclose(f) != 0) {
            kb_die("cannot write %s", ready);
        }
    }
    printf("%u\n", ntohs(sin.sin_port));
    fflush(stdout);
    fprintf(stderr, "krbench canned: NodeId %d at %s:%u, topic %s\n",
            (int)node, host, ntohs(sin.sin_port), topic);
    while (!kb_c_stop) {
        struct epoll_event evs[256];
        int n;

        kb_pause_us(pause_us);
        n = epoll_wait(ep, evs, 256, 200);
        K.waits++;

        if (n < 0 && errno != EINTR) {
            kb_die("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            struct kb_cconn *c = evs[i].data.ptr;
            bool bad = false;

            if (c == NULL) {        /* the listener */
                int fd;

                while ((fd = accept4(lfd, NULL, NULL,
                                     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (free_list != NULL) {
                        c = free_list;
                        free_list = c->next_free;
                    } else if ((c = calloc(1, sizeof(*c))) == NULL ||
                               (c->in = malloc(KB_C_IN)) == NULL) {
                        kb_die("out of memory");
                    }
                    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on,
                                     sizeof(on));
                    c->fd = fd;
                    c->in_len = 0;
                    c->skip = 0;
                    c->out.len = c->out_off = 0;
                    c->events = EPOLLIN;
                    kb_epoll_set(ep, EPOLL_CTL_ADD, fd, EPOLLIN, c);
                    K.conns++;
                }
                continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                bad = kb_c_read(&K, c) != 0;
            }
            if (!bad && kb_c_flush(&K, c) != 0) {
                bad = true;
            }
            if (bad) {
                close(c->fd);
                c->next_free = free_list;
                free_list = c;
                continue;
            }
            kb_c_interest(ep, c);
        }
    }
    printf("{\"mode\":\"canned\",\"connections\":%ld,\"produce\":%ld,"
           "\"apiversions\":%ld,\"metadata\":%ld,\"refused\":%ld,"
           "\"reads\":%ld,\"writes\":%ld,\"epoll_waits\":%ld,"
           "\"cpu_s\":%.3f}\n", K.conns, K.produce_n, K.apiversions_n,
           K.metadata_n, K.refused, K.reads, K.writes, K.waits,
           kb_cpu_s() - cpu0);
    return 0;
}
