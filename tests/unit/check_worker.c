/*
 * check_worker.c - issue 11, process vs worker: one kr_daemon (config
 * reference, log and audit sinks) with two workers, each on an event_base
 * of its own run by a thread of its own, each accepting on sockets of its
 * own (separate ports, kr_daemon_add_worker), in front of a scripted
 * broker on a third thread (plain blocking sockets, poll).  Real traffic
 * goes through both workers at once; the responses must arrive, each
 * worker's counters must count exactly its own traffic (read from this
 * thread while the workers run: the relaxed atomics an admin endpoint
 * will read), a reload must reach both workers through their mailboxes,
 * and the shared sinks must hold every line.  Built with --enable-tsan it
 * is the ThreadSanitizer proof of the sharing rules in kr_worker.h.
 *
 * The scripted broker answers every request with a Heartbeat v0 response
 * ([size][CorrelationId][ErrorCode 0]) and never answers the connections
 * whose first request has ClientId "krelay" (kr_upstream's own metadata
 * fetch).
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <jansson.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "kr_api_keys.h"
#include "kr_conf.h"
#include "kr_daemon.h"
#include "kr_frame.h"
#include "kr_log.h"
#include "kr_rule.h"
#include "kr_stats.h"
#include "kr_upstream.h"
#include "kr_worker.h"

#define FB_CONNS 64
#define NWORKERS 2
/* Clients per worker and Heartbeats per client: different per worker so
   that counters mixed up between workers cannot pass. */
static const int nclients[NWORKERS] = { 2, 3 };
static const int nreqs[NWORKERS] = { 5, 7 };

/* ---- the scripted broker (a thread, blocking sockets) ---------------- */

struct fb_conn {
    int fd;
    uint8_t *buf;
    size_t len, cap;
    bool decided, internal;
};

struct fb {
    int lfd;
    uint16_t port;
    int stop[2];                        /* pipe: write to stop */
    pthread_t th;
    struct fb_conn c[FB_CONNS];
    int n;
    atomic_int answered;
};

static void
write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    ssize_t w;

    while (n > 0) {
        w = write(fd, b, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return;             /* the peer went away: the test sees it */
        }
        b += w;
        n -= (size_t)w;
    }
}

static void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Answer the complete frames in c's buffer; false when c closed. */
static bool
fb_frames(struct fb *fb, struct fb_conn *c)
{
    size_t off = 0;

    while (c->len - off >= 4) {
        size_t flen = 4 + (size_t)kr_frame_i32(c->buf + off);
        const uint8_t *f = c->buf + off;
        uint8_t rsp[10];

        if (flen < 14 || flen > (1u << 20)) {
            return false;
        }
        if (c->len - off < flen) {
            break;
        }
        if (!c->decided) {
            int16_t cl = kr_frame_i16(f + 12);

            c->decided = true;
            c->internal = cl == 6 && flen >= 20 &&
                          memcmp(f + 14, "krelay", 6) == 0;
        }
        if (!c->internal) {
            put32(rsp, 6);
            memcpy(rsp + 4, f + 8, 4);          /* CorrelationId */
            rsp[8] = rsp[9] = 0;                /* ErrorCode NONE */
            /* counted before it is written: the client may read it
               and the test load the count before this thread runs on */
            atomic_fetch_add(&fb->answered, 1);
            write_all(c->fd, rsp, sizeof(rsp));
        }
        off += flen;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return true;
}

static void
fb_close(struct fb_conn *c)
{
    close(c->fd);
    free(c->buf);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

static void *
fb_main(void *arg)
{
    struct fb *fb = arg;
    struct pollfd pf[FB_CONNS + 2];
    int i, n, polled;

    for (;;) {
        pf[0].fd = fb->stop[0];
        pf[0].events = POLLIN;
        pf[1].fd = fb->lfd;
        pf[1].events = POLLIN;
        for (i = 0; i < fb->n; i++) {
            pf[2 + i].fd = fb->c[i].fd;
            pf[2 + i].events = POLLIN;
        }
        polled = fb->n;
        n = poll(pf, (nfds_t)(2 + polled), 1000);
        if (n < 0 && errno != EINTR) {
            break;
        }
        if (n <= 0) {
            continue;
        }
        if (pf[0].revents != 0) {
            break;
        }
        if ((pf[1].revents & POLLIN) && fb->n < FB_CONNS) {
            int fd = accept(fb->lfd, NULL, NULL);

            if (fd >= 0) {
                memset(&fb->c[fb->n], 0, sizeof(fb->c[fb->n]));
                fb->c[fb->n++].fd = fd;
            }
        }
        /* only the connections poll saw: one accepted just now has no
           revents yet (and a blocking read on it could wait forever) */
        for (i = 0; i < polled; i++) {
            struct fb_conn *c = &fb->c[i];
            ssize_t r;

            if (pf[2 + i].revents == 0 || c->fd < 0) {
                continue;
            }
            if (c->cap - c->len < 4096) {
                c->cap = c->cap ? c->cap * 2 : 16384;
                c->buf = realloc(c->buf, c->cap);
                if (c->buf == NULL) {
                    abort();
                }
            }
            r = read(c->fd, c->buf + c->len, c->cap - c->len);
            if (r <= 0) {
                if (r < 0 && errno == EINTR) {
                    continue;
                }
                fb_close(c);
                continue;
            }
            c->len += (size_t)r;
            if (!fb_frames(fb, c)) {
                fb_close(c);
            }
        }
        /* drop closed connections (fd -1) from the poll set */
        for (i = n = 0; i < fb->n; i++) {
            if (fb->c[i].fd >= 0) {
                fb->c[n++] = fb->c[i];
            }
        }
        fb->n = n;
    }
    for (i = 0; i < fb->n; i++) {
        fb_close(&fb->c[i]);
    }
    return NULL;
}

static void
fb_start(struct fb *fb)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int on = 1;

    memset(fb, 0, sizeof(*fb));
    atomic_init(&fb->answered, 0);
    fb->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fb->lfd, 0);
    (void)setsockopt(fb->lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fb->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(fb->lfd, 64), 0);
    ck_assert_int_eq(getsockname(fb->lfd, (struct sockaddr *)&sin, &len), 0);
    fb->port = ntohs(sin.sin_port);
    ck_assert_int_eq(pipe(fb->stop), 0);
    ck_assert_int_eq(pthread_create(&fb->th, NULL, fb_main, fb), 0);
}

static void
fb_stop(struct fb *fb)
{
    ck_assert_int_eq(write(fb->stop[1], "x", 1), 1);
    ck_assert_int_eq(pthread_join(fb->th, NULL), 0);
    close(fb->stop[0]);
    close(fb->stop[1]);
    close(fb->lfd);
}

/* ---- clients (this thread, blocking sockets with a timeout) ----------- */

static int
cli_open(uint16_t port)
{
    struct sockaddr_in sin;
    struct timeval tv = { 30, 0 };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons(port);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    return fd;
}

/* n Heartbeat v0 requests, CorrelationIds first..first + n - 1. */
static void
cli_heartbeats(int fd, int32_t first, int n)
{
    static const char group[] = "g", member[] = "m";
    uint8_t f[64];
    size_t len;
    int i;

    for (i = 0; i < n; i++) {
        len = 4;
        f[len++] = 0;
        f[len++] = KR_API_HEARTBEAT;            /* ApiKey */
        f[len++] = 0;
        f[len++] = 0;                           /* ApiVersion 0 */
        put32(f + len, (uint32_t)(first + i));  /* CorrelationId */
        len += 4;
        f[len++] = 0;
        f[len++] = 5;
        memcpy(f + len, "check", 5);            /* ClientId */
        len += 5;
        f[len++] = 0;
        f[len++] = 1;
        memcpy(f + len, group, 1);              /* GroupId */
        len += 1;
        put32(f + len, 1);                      /* GenerationId */
        len += 4;
        f[len++] = 0;
        f[len++] = 1;
        memcpy(f + len, member, 1);             /* MemberId */
        len += 1;
        put32(f, (uint32_t)(len - 4));
        write_all(fd, f, len);
    }
}

/*
 * Read n responses to CorrelationIds first.. in order; returns the
 * ErrorCode of the last (each must be 10 bytes: Heartbeat v0).
 */
static int
cli_responses(int fd, int32_t first, int n)
{
    uint8_t r[10];
    int i, err = -1;

    for (i = 0; i < n; i++) {
        size_t got = 0;

        while (got < sizeof(r)) {
            ssize_t k = read(fd, r + got, sizeof(r) - got);

            ck_assert_msg(k > 0, "response %d of %d: %s", i + 1, n,
                          k == 0 ? "connection closed" : strerror(errno));
            got += (size_t)k;
        }
        ck_assert_int_eq(kr_frame_i32(r), 6);
        ck_assert_int_eq(kr_frame_i32(r + 4), first + i);
        err = kr_frame_i16(r + 8);
    }
    return err;
}

/* ---- the daemon and its two workers ------------------------------------ */

struct env {
    struct fb fb;
    struct kr_conf conf, conf2;
    struct kr_listener_conf lc;
    struct kr_upstream_conf uc;
    struct kr_hostport bs;
    struct kr_rule_conf rule, rule2;
    int16_t apis[1];
    char audit_path[64], log_path[64];
    struct kr_daemon *d;
    struct event_base *base[NWORKERS];
    struct kr_worker *w[NWORKERS];
    pthread_t th[NWORKERS];
    uint16_t port[NWORKERS];
};

static struct env T;

static void *
worker_main(void *arg)
{
    struct event_base *base = arg;

    event_base_dispatch(base);
    return NULL;
}

/* A rule on Heartbeat (index 0 of its config): audit, or deny. */
static void
heartbeat_rule(struct kr_rule_conf *r, const char *name, bool deny)
{
    memset(r, 0, sizeof(*r));
    T.apis[0] = KR_API_HEARTBEAT;
    r->name = (char *)name;
    r->api = T.apis;
    r->napi = 1;
    r->versions_min = 0;
    r->versions_max = INT16_MAX;
    r->direction = KR_RDIR_BOTH;
    r->clamp_min_version = r->clamp_max_version = -1;
    r->throttle_ms = -1;
    r->deny_error = -1;
    r->fault_error = -1;
    r->fault_error_probability = 1;
    r->audit = !deny;
    r->deny = deny;
}

static void
compile(struct kr_conf *c)
{
    char err[128] = "";

    c->ruleset = kr_rule_compile(c, err, sizeof(err));
    ck_assert_msg(c->ruleset != NULL, "%s", err);
}

/* The scripted broker, the log and audit files, both configs. */
static void
setup_conf(void)
{
    int fd;

    memset(&T, 0, sizeof(T));
    fb_start(&T.fb);
    snprintf(T.audit_path, sizeof(T.audit_path), "/tmp/check_worker_"
             "audit.XXXXXX");
    fd = mkstemp(T.audit_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(T.log_path, sizeof(T.log_path), "/tmp/check_worker_log."
             "XXXXXX");
    fd = mkstemp(T.log_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    /* both workers log every accept and close into one file */
    ck_assert_int_eq(kr_log_open(T.log_path, "check_worker"), KR_OK);
    kr_log_level_cur = KR_LOG_DEBUG;

    T.bs.host = (char *)"127.0.0.1";
    T.bs.port = T.fb.port;
    T.uc.name = (char *)"";
    T.uc.bootstrap = &T.bs;
    T.uc.nbootstrap = 1;
    T.uc.connect_timeout_ms = 5000;
    T.uc.request_timeout_margin_ms = 30000;
    T.uc.metadata_refresh_ms = 300000;
    T.lc.name = (char *)"";
    T.lc.listen.host = (char *)"127.0.0.1";
    T.lc.listen.port = 0;               /* each set of sockets its own */
    T.lc.advertised_host = (char *)"127.0.0.1";
    T.lc.broker_port_base = 0;
    T.lc.node_id_min = 0;
    T.lc.node_id_max = 0;
    T.lc.up = &T.uc;
    T.lc.max_frame_bytes = 1 << 20;
    T.lc.max_inflight = 1000;
    T.lc.max_buffer_bytes = 1 << 20;
    T.lc.max_connections = 100;
    T.lc.sasl_auth_timeout_ms = 10000;
    T.lc.tcp_nodelay = true;
    T.conf.path = (char *)"check_worker";
    T.conf.listeners = &T.lc;
    T.conf.nlisteners = 1;
    T.conf.upstreams = &T.uc;
    T.conf.nupstreams = 1;
    T.conf.audit.target = T.audit_path;
    heartbeat_rule(&T.rule, "audit-heartbeat", false);
    T.conf.rules = &T.rule;
    T.conf.nrules = 1;
    compile(&T.conf);
    /* what the reload brings: the same listener, sink and upstream, a
       deny rule instead */
    T.conf2 = T.conf;
    T.conf2.path = (char *)"check_worker (reloaded)";
    heartbeat_rule(&T.rule2, "deny-heartbeat", true);
    T.conf2.rules = &T.rule2;
    compile(&T.conf2);
}

static void
setup(void)
{
    char err[256] = "";
    int i;

    setup_conf();
    T.d = kr_daemon_new(&T.conf, false, NULL);
    ck_assert_ptr_nonnull(T.d);
    T.d->main_worker = false;           /* the workers are threads here */
    ck_assert_msg(kr_daemon_start(T.d, err, sizeof(err)) == KR_OK, "%s",
                  err);
    for (i = 0; i < NWORKERS; i++) {
        T.base[i] = event_base_new();
        ck_assert_ptr_nonnull(T.base[i]);
        T.w[i] = kr_daemon_add_worker(T.d, T.base[i], true, err,
                                      sizeof(err));
        ck_assert_msg(T.w[i] != NULL, "%s", err);
        /* read before its thread runs it */
        T.port[i] = kr_worker_port(T.w[i], 0, KR_NODE_BOOTSTRAP);
        ck_assert_uint_ne(T.port[i], 0);
    }
    ck_assert_uint_ne(T.port[0], T.port[1]);
    /* issue 12: each worker its own kr_upstream, one cluster view (the
       daemon's) behind them (read before the threads run) */
    ck_assert_int_eq(T.w[0]->nups, 1);
    ck_assert_int_eq(T.w[1]->nups, 1);
    ck_assert_ptr_ne(T.w[0]->ups[0], T.w[1]->ups[0]);
    ck_assert_ptr_eq(kr_upstream_cluster(T.w[0]->ups[0]),
                     kr_upstream_cluster(T.w[1]->ups[0]));
    ck_assert_ptr_nonnull(kr_upstream_cluster(T.w[0]->ups[0]));
    for (i = 0; i < NWORKERS; i++) {
        ck_assert_int_eq(pthread_create(&T.th[i], NULL, worker_main,
                                        T.base[i]), 0);
    }
}

static void
teardown(void)
{
    int i;

    if (T.d != NULL) {
        kr_daemon_stop(T.d);    /* idempotent */
        for (i = 0; i < NWORKERS; i++) {
            if (T.th[i] != 0) {
                pthread_join(T.th[i], NULL);
            }
        }
        kr_daemon_free(T.d);
    }
    for (i = 0; i < NWORKERS; i++) {
        if (T.base[i] != NULL) {
            event_base_free(T.base[i]);
        }
    }
    fb_stop(&T.fb);
    kr_rule_free(T.conf.ruleset);
    kr_rule_free(T.conf2.ruleset);
    kr_log_close();
    unlink(T.audit_path);
    unlink(T.log_path);
}

/* Lines of path that contain what. */
static int
count_lines(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    int n = 0;

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, what) != NULL;
    }
    fclose(f);
    return n;
}

/*
 * The admin thread an endpoint will be: reads every cell of both
 * workers' counters in a loop while they run, until stop.  Under TSan a
 * counter written without an atomic store is reported here.
 */
struct admin {
    pthread_t th;
    atomic_bool stop;
    _Atomic uint64_t rounds;
    uint64_t last;
};

static void *
admin_main(void *arg)
{
    struct admin *a = arg;
    const struct kr_stats *st[NWORKERS];
    int i, id;
    size_t c;

    for (i = 0; i < NWORKERS; i++) {
        st[i] = &T.w[i]->stats;
    }
    while (!atomic_load(&a->stop)) {
        uint64_t sum = 0;

        for (id = 0; id < KR_STAT__N; id++) {
            for (c = 0; c < kr_stats_desc[id].cells; c++) {
                sum += kr_stats_sum(st, NWORKERS, (enum kr_stat_id)id, c);
            }
        }
        a->last = sum;
        atomic_fetch_add(&a->rounds, 1);
    }
    return NULL;
}

/* Sleep ms milliseconds. */
static void
nap(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

START_TEST(two_workers_two_threads)
{
    int fds[NWORKERS][4];
    int i, k, total = 0, extra = 0, denied[NWORKERS] = { 0, 0 };
    int32_t corr[NWORKERS][4];
    size_t hb0 = kr_stats_api_cell(KR_API_HEARTBEAT, 0);
    FILE *f;
    char line[8192];
    char ids[64][32];
    bool seen[64] = { false };
    int nids = 0, widx[NWORKERS], per_worker[NWORKERS] = { 0, 0 };
    /* static: the admin thread must not point into this stack if an
       assertion leaves the function early (Check's nofork longjmp) */
    static struct admin adm;

    for (i = 0; i < NWORKERS; i++) {
        widx[i] = T.w[i]->index;         /* the workers are freed below */
    }
    memset(&adm, 0, sizeof(adm));
    atomic_init(&adm.stop, false);
    atomic_init(&adm.rounds, 0);
    ck_assert_int_eq(pthread_create(&adm.th, NULL, admin_main, &adm), 0);

    /* 1. traffic through both workers at once: every client sends all
       its requests before any response is read */
    for (i = 0; i < NWORKERS; i++) {
        for (k = 0; k < nclients[i]; k++) {
            fds[i][k] = cli_open(T.port[i]);
            corr[i][k] = 1000 * (i + 1) + 100 * k;
            cli_heartbeats(fds[i][k], corr[i][k], nreqs[i]);
        }
    }
    for (i = 0; i < NWORKERS; i++) {
        for (k = 0; k < nclients[i]; k++) {
            ck_assert_int_eq(cli_responses(fds[i][k], corr[i][k],
                                           nreqs[i]), 0);
            corr[i][k] += nreqs[i];
        }
        total += nclients[i] * nreqs[i];
    }
    /* the admin thread read every counter at least once while the
       workers ran (on a loaded machine it may not have run yet) */
    for (k = 0; atomic_load(&adm.rounds) == 0 && k < 10000; k++) {
        nap(1);
    }
    atomic_store(&adm.stop, true);
    ck_assert_int_eq(pthread_join(adm.th, NULL), 0);
    ck_assert_int_eq(atomic_load(&T.fb.answered), total);
    ck_assert_uint_gt(atomic_load(&adm.rounds), 0);

    /* 2. each worker counted its own traffic, read from this thread
       while it runs */
    for (i = 0; i < NWORKERS; i++) {
        uint64_t n = (uint64_t)(nclients[i] * nreqs[i]);

        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, conn_accepted),
                          (uint64_t)nclients[i]);
        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, conn_active),
                          (uint64_t)nclients[i]);
        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, requests), n);
        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, responses), n);
        ck_assert_uint_eq(KR_STAT_GET_L(&T.w[i]->stats, api_requests, hb0), n);
        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, client_to_upstream_bytes), n * 29);
        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, upstream_to_client_bytes), n * 10);
        ck_assert_uint_eq(KR_STAT_GET_L(&T.w[i]->stats, errors_answered,
                                        kr_stats_kerr_cell(0)), 0);
    }

    /* 3. a reload reaches both workers through their mailboxes: the deny
       rule answers the next Heartbeats (bounded: each try is answered,
       by the old rules or the new) */
    ck_assert_int_eq(kr_daemon_reload_conf(T.d, &T.conf2, false), KR_OK);
    for (i = 0; i < NWORKERS; i++) {
        int tries;

        for (tries = 0; tries < 500 && denied[i] == 0; tries++) {
            cli_heartbeats(fds[i][0], corr[i][0], 1);
            if (cli_responses(fds[i][0], corr[i][0], 1) != 0) {
                denied[i] = 1;
            } else {
                extra++;                /* still audited, by the old rules */
            }
            corr[i][0]++;
            if (denied[i] == 0) {
                nap(2);
            }
        }
        ck_assert_msg(denied[i], "worker %d never applied the reload", i);
        ck_assert_uint_ge(KR_STAT_GET_L(&T.w[i]->stats, rule_hits,
                                        kr_stats_rule_cell(0, KR_RA_DENY)),
                          1);
    }
    /* the other clients of each worker: denied at once now */
    for (i = 0; i < NWORKERS; i++) {
        for (k = 1; k < nclients[i]; k++) {
            cli_heartbeats(fds[i][k], corr[i][k], 2);
            ck_assert_int_ne(cli_responses(fds[i][k], corr[i][k], 2), 0);
        }
        ck_assert_uint_ge(KR_STAT_GET(&T.w[i]->stats, requests),
                          (uint64_t)(nclients[i] * nreqs[i] +
                                     2 * (nclients[i] - 1) + 1));
    }

    /* 4. stop: both loops end, every session closes */
    kr_daemon_stop(T.d);
    for (i = 0; i < NWORKERS; i++) {
        ck_assert_int_eq(pthread_join(T.th[i], NULL), 0);
        T.th[i] = 0;
        ck_assert_uint_eq(KR_STAT_GET(&T.w[i]->stats, conn_active), 0);
        ck_assert_uint_eq(KR_STAT_GET_L(&T.w[i]->stats, closes, KR_CLOSE_OTHER),
                          (uint64_t)nclients[i]);
        for (k = 0; k < nclients[i]; k++) {
            close(fds[i][k]);
        }
    }
    kr_daemon_free(T.d);                /* flushes the audit sink */
    T.d = NULL;

    /* 5. the shared sinks: one audit line per audited request, from both
       workers; c#IDs unique across workers in the one log */
    ck_assert_int_eq(count_lines(T.audit_path, "\"api\":\"Heartbeat\""),
                     total + extra);
    f = fopen(T.log_path, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "[c#");

        if (p != NULL && strstr(line, "] accepted") != NULL &&
            nids < 64) {
            /* "c#W.N": the worker that accepted it, its count */
            ck_assert_int_eq(sscanf(p + 1, "%31[c#0-9.]", ids[nids]), 1);
            nids++;
        }
    }
    fclose(f);
    ck_assert_int_eq(nids, nclients[0] + nclients[1]);
    for (i = 0; i < nids; i++) {
        int w = -1, n = -1;

        ck_assert_int_eq(sscanf(ids[i], "c#%d.%d", &w, &n), 2);
        ck_assert_msg((w == widx[0] || w == widx[1]) && widx[0] != widx[1] &&
                      n >= 1 && n <= 4, "%s", ids[i]);
        for (k = 0; k < i; k++) {
            ck_assert_msg(strcmp(ids[i], ids[k]) != 0, "%s twice", ids[i]);
        }
        per_worker[w == widx[0] ? 0 : 1]++;
    }
    ck_assert_int_eq(per_worker[0], nclients[0]);
    ck_assert_int_eq(per_worker[1], nclients[1]);
    /* every audit line names its connection as the log does: each of
       them, from both workers, and no other */
    f = fopen(T.audit_path, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *j = json_loads(line, 0, NULL);
        const char *cid = json_string_value(json_object_get(j, "conn_id"));
        bool known = false;

        ck_assert_msg(cid != NULL, "no conn_id: %s", line);
        for (i = 0; i < nids; i++) {
            if (strcmp(cid, ids[i]) == 0) {
                known = true;
                seen[i] = true;
            }
        }
        ck_assert_msg(known, "conn_id %s is not in the log", cid);
        json_decref(j);
    }
    fclose(f);
    for (i = 0; i < nids; i++) {
        ck_assert_msg(seen[i], "no audit line of %s", ids[i]);
    }
}
END_TEST


/* ---- the reload's notice line: once every worker applied it ------------- */

/* A worker's loop held by a call (hold_call) until released. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;                          /* 0, 1: holding, 2: released */
} hold = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void
hold_call(struct kr_worker *w, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hold.mu);
    if (w != NULL) {
        hold.state = 1;
        pthread_cond_broadcast(&hold.cv);
        while (hold.state != 2) {
            pthread_cond_wait(&hold.cv, &hold.mu);
        }
    }
    pthread_mutex_unlock(&hold.mu);
}

static void
hold_set(int state)
{
    pthread_mutex_lock(&hold.mu);
    hold.state = state;
    pthread_cond_broadcast(&hold.cv);
    pthread_mutex_unlock(&hold.mu);
}

/* A new client of worker i: the ErrorCode of its Heartbeat (0: passed,
   else denied by the reloaded rule). */
static int
heartbeat_error(int i)
{
    int fd = cli_open(T.port[i]), err;

    cli_heartbeats(fd, 7, 1);
    err = cli_responses(fd, 7, 1);
    close(fd);
    return err;
}

/*
 * The "reloaded" notice line says the reload is done: it is written once
 * every worker applied the new configuration, not when the daemon posted
 * it to their mailboxes.  Worker 1's loop is held (a call that waits)
 * across the reload: worker 0 applies it (its new clients are denied),
 * the line waits; released, worker 1 applies it and the line comes, once.
 */
START_TEST(reload_line_after_every_worker)
{
    const char *line = "notice: reloaded check_worker (reloaded): 1 "
                       "listener group (0 new), 1 rule";
    int tries;

    ck_assert_int_eq(heartbeat_error(0), 0);
    ck_assert_int_eq(heartbeat_error(1), 0);
    hold_set(0);
    ck_assert_int_eq(kr_worker_call(T.w[1], hold_call, NULL), KR_OK);
    pthread_mutex_lock(&hold.mu);
    while (hold.state != 1) {
        pthread_cond_wait(&hold.cv, &hold.mu);
    }
    pthread_mutex_unlock(&hold.mu);

    T.conf2.log.level = KR_LOG_INFO;    /* the line is a notice */
    ck_assert_int_eq(kr_daemon_reload_conf(T.d, &T.conf2, false), KR_OK);
    for (tries = 0; tries < 2000 && heartbeat_error(0) == 0; tries++) {
        nap(5);
    }
    ck_assert_msg(tries < 2000, "worker 0 never applied the reload");
    ck_assert_int_eq(count_lines(T.log_path, line), 0);

    hold_set(2);
    for (tries = 0; tries < 2000 && count_lines(T.log_path, line) == 0;
         tries++) {
        nap(5);
    }
    ck_assert_int_eq(count_lines(T.log_path, line), 1);
    ck_assert_int_ne(heartbeat_error(1), 0);
    ck_assert_int_eq(count_lines(T.log_path, "did not apply it"), 0);
}
END_TEST
/* ---- [process] workers = 2: SO_REUSEPORT sets --------------------------- */

/* The daemon's thread: d->base (worker 0 on it), until kr_daemon_stop. */
static void *
daemon_main(void *arg)
{
    (void)kr_daemon_run(arg);
    return NULL;
}

/* kr_worker_call on worker 0: stop the daemon from its own thread. */
static void
stop_call(struct kr_worker *w, void *arg)
{
    if (w != NULL) {
        kr_daemon_stop(arg);
    }
}

/* Is SO_REUSEPORT set on fd? */
static bool
has_reuseport(int fd)
{
    int on = 0;
    socklen_t len = sizeof(on);

    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, &len), 0);
    return on != 0;
}

#define RP_CLIENTS 32

/*
 * workers = 2 as krelay runs them: worker 0 on the daemon's base,
 * worker 1 on a thread of kr_daemon_spawn_workers; the listener on port
 * 0 becomes one port for both (two SO_REUSEPORT sockets), the kernel
 * spreads the connections over both workers, and a second daemon on that
 * address is refused (a second krelay of the same user could otherwise
 * join the group and take a share of the connections).
 */
START_TEST(reuseport_sets)
{
    char err[256] = "";
    struct kr_daemon *d2;
    struct kr_conf c2;
    struct kr_listener_conf lc2;
    const struct kr_lsock *s0, *s1;
    pthread_t dth;
    uint16_t port;
    uint64_t acc[2];
    int fds[RP_CLIENTS], i, k;

    T.conf.process.workers = 2;
    T.d = kr_daemon_new(&T.conf, false, NULL);
    ck_assert_ptr_nonnull(T.d);
    ck_assert_msg(kr_daemon_start(T.d, err, sizeof(err)) == KR_OK, "%s",
                  err);
    ck_assert(T.d->reuseport);
    ck_assert_int_eq(T.d->nsets, 2);
    ck_assert_int_eq(T.d->nworkers, 1);         /* worker 0, on d->base */
    s0 = &T.d->sets[0]->g[0]->socks[0];
    s1 = &T.d->sets[1]->g[0]->socks[0];
    port = kr_daemon_port(T.d, 0, KR_NODE_BOOTSTRAP);
    ck_assert_uint_ne(port, 0);
    ck_assert_uint_eq(kr_lsock_port(s0), port);
    ck_assert_uint_eq(kr_lsock_port(s1), port);
    ck_assert_int_ne(s0->fd, s1->fd);
    ck_assert(has_reuseport(s0->fd));
    ck_assert(has_reuseport(s1->fd));

    /* a second daemon on that address: refused, as a plain bind is */
    c2 = T.conf;
    lc2 = T.lc;
    lc2.listen.port = port;
    c2.listeners = &lc2;
    c2.audit.target = NULL;
    d2 = kr_daemon_new(&c2, false, NULL);
    ck_assert_ptr_nonnull(d2);
    d2->main_worker = false;
    ck_assert_int_eq(kr_daemon_start(d2, err, sizeof(err)), KR_ERROR);
    ck_assert_msg(strstr(err, "Address already in use") != NULL, "%s", err);
    kr_daemon_free(d2);

    ck_assert_msg(kr_daemon_spawn_workers(T.d, err, sizeof(err)) == KR_OK,
                  "%s", err);
    ck_assert_int_eq(T.d->nworkers, 2);
    ck_assert_int_eq(T.d->nthreads, 1);
    ck_assert_int_eq(T.d->wset[1], 1);
    ck_assert_int_eq(pthread_create(&dth, NULL, daemon_main, T.d), 0);

    /* connections to the one port: both workers serve some */
    for (i = 0; i < RP_CLIENTS; i++) {
        fds[i] = cli_open(port);
        cli_heartbeats(fds[i], 100 * i, 2);
    }
    for (i = 0; i < RP_CLIENTS; i++) {
        ck_assert_int_eq(cli_responses(fds[i], 100 * i, 2), 0);
    }
    ck_assert_int_eq(atomic_load(&T.fb.answered), 2 * RP_CLIENTS);
    for (k = 0; k < 2; k++) {
        acc[k] = KR_STAT_GET(&T.d->workers[k]->stats, conn_accepted);
        ck_assert_msg(acc[k] > 0, "worker %d accepted no connection", k);
        ck_assert_uint_eq(KR_STAT_GET(&T.d->workers[k]->stats, requests),
                          2 * acc[k]);
    }
    ck_assert_uint_eq(acc[0] + acc[1], RP_CLIENTS);

    /* stop from the daemon's thread, then join worker 1's */
    ck_assert_int_eq(kr_worker_call(T.d->workers[0], stop_call, T.d), KR_OK);
    ck_assert_int_eq(pthread_join(dth, NULL), 0);
    kr_daemon_join(T.d);
    ck_assert_int_eq(T.d->nthreads, 0);
    for (k = 0; k < 2; k++) {
        ck_assert_uint_eq(KR_STAT_GET(&T.d->workers[k]->stats, conn_active),
                          0);
    }
    for (i = 0; i < RP_CLIENTS; i++) {
        close(fds[i]);
    }
    kr_daemon_free(T.d);
    T.d = NULL;
}
END_TEST

static Suite *
worker_suite(void)
{
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("threads");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, two_workers_two_threads);
    tcase_add_test(tc, reload_line_after_every_worker);
    suite_add_tcase(s, tc);
    tc = tcase_create("reuseport");
    tcase_add_checked_fixture(tc, setup_conf, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reuseport_sets);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(worker_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
