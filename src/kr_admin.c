/*
 * kr_admin.c - the admin endpoint (kr_admin.h): an evhttp server on a
 * thread of its own; metrics from the counters, readiness and the
 * connection list from the workers' loops, the effective config
 * (kr_conf_dump).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "kr_admin.h"
#include "kr_clock.h"
#include "kr_daemon.h"
#include "kr_log.h"
#include "kr_session.h"
#include "kr_stats.h"
#include "kr_upstream.h"
#include "kr_worker.h"

#define KR_ADMIN_STR_(x) #x
#define KR_ADMIN_STR(x) KR_ADMIN_STR_(x)

/* Most workers the endpoint looks at (the daemon runs far fewer). */
#define KR_ADMIN_MAX_WORKERS 1024
/* /connections: default and largest page. */
#define KR_ADMIN_PAGE 100
#define KR_ADMIN_PAGE_MAX 1000

struct kr_admin {
    struct kr_daemon *d;
    struct event_base *base;
    struct evhttp *http;
    pthread_t thread;
    bool running;
    int stop_fd;                        /* eventfd: kr_admin_stop */
    struct event *stop_ev;
    int64_t started_us;
    char addr[80];
    char *start_token;                  /* the start config's token (a
                                           copy, wiped at free): used
                                           while a reload left no [admin]
                                           section; NULL: none */
};

/* ---- pure parts ---------------------------------------------------------- */

/* SHA-256 of s (len bytes) into md (32 bytes); false on failure. */
static bool
sha256(const char *s, size_t len, unsigned char *md)
{
    unsigned int n = 0;

    return EVP_Digest(s, len, md, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

bool
kr_admin_auth_ok(const char *token, const char *hdr)
{
    static const char pre[] = "Bearer ";
    unsigned char a[32], b[32];
    const char *given;

    if (token == NULL) {
        return true;
    }
    if (hdr == NULL || strncasecmp(hdr, pre, sizeof(pre) - 1) != 0) {
        return false;
    }
    given = hdr + sizeof(pre) - 1;
    while (*given == ' ') {
        given++;
    }
    /* digests: the comparison takes the same time whatever the lengths */
    if (!sha256(token, strlen(token), a) ||
        !sha256(given, strlen(given), b)) {
        return false;
    }
    return CRYPTO_memcmp(a, b, sizeof(a)) == 0;
}

/* µs as seconds with 6 decimals, exactly (no float rounding). */
static void
prom_us(FILE *out, int64_t us)
{
    if (us < 0) {
        fputc('-', out);
        us = -us;
    }
    fprintf(out, "%" PRId64 ".%06" PRId64, us / 1000000, us % 1000000);
}

int
kr_admin_prom_process(FILE *out, const struct kr_admin_proc *p)
{
    fputs("# HELP krelay_build_info krelay's version (the value is "
          "always 1).\n# TYPE krelay_build_info gauge\n", out);
    fputs("krelay_build_info{version=\"", out);
    for (const char *c = p->version != NULL ? p->version : ""; *c; c++) {
        if (*c == '\\' || *c == '"') {
            fputc('\\', out);
        }
        if (*c == '\n') {
            fputs("\\n", out);
        } else {
            fputc(*c, out);
        }
    }
    fputs("\"} 1\n", out);
    fprintf(out, "# HELP krelay_workers Workers (event loops) running.\n"
            "# TYPE krelay_workers gauge\nkrelay_workers %d\n", p->workers);
    fprintf(out, "# HELP krelay_reloads_total Configuration reloads "
            "(SIGHUP), by result: ok (applied) or failed (refused: the "
            "running configuration stayed).\n"
            "# TYPE krelay_reloads_total counter\n"
            "krelay_reloads_total{result=\"ok\"} %" PRIu64 "\n"
            "krelay_reloads_total{result=\"failed\"} %" PRIu64 "\n",
            p->reloads_ok, p->reloads_failed);
    fputs("# HELP krelay_config_load_timestamp_seconds When the running "
          "configuration was loaded (start or the last reload that took), "
          "Unix time.\n# TYPE krelay_config_load_timestamp_seconds gauge\n"
          "krelay_config_load_timestamp_seconds ", out);
    prom_us(out, p->conf_loaded_us);
    fputs("\n# HELP krelay_config_load_duration_seconds How long reading "
          "and checking the running configuration and compiling its rules "
          "took.\n# TYPE krelay_config_load_duration_seconds gauge\n"
          "krelay_config_load_duration_seconds ", out);
    prom_us(out, p->conf_load_us);
    fputs("\n# HELP krelay_start_time_seconds When the admin endpoint "
          "started (with krelay), Unix time.\n"
          "# TYPE krelay_start_time_seconds gauge\n"
          "krelay_start_time_seconds ", out);
    prom_us(out, p->started_us);
    fputc('\n', out);
    fprintf(out, "# HELP krelay_audit_enabled 1 when an [audit] sink is "
            "open.\n# TYPE krelay_audit_enabled gauge\n"
            "krelay_audit_enabled %d\n"
            "# HELP krelay_audit_lines_written_total Audit lines written to "
            "the target since it was opened.\n"
            "# TYPE krelay_audit_lines_written_total counter\n"
            "krelay_audit_lines_written_total %" PRIu64 "\n"
            "# HELP krelay_audit_lines_dropped_total Audit lines dropped "
            "since the target was opened (queue full, target not writable, "
            "no syslog socket).\n"
            "# TYPE krelay_audit_lines_dropped_total counter\n"
            "krelay_audit_lines_dropped_total %" PRIu64 "\n",
            p->audit ? 1 : 0, p->audit_written, p->audit_dropped);
    return ferror(out) ? -1 : 0;
}

/* ---- asking the workers -------------------------------------------------- */

enum job_kind { JOB_CONNS, JOB_READY };

/* One worker's answer. */
struct job_slot {
    bool done;                          /* answered */
    bool cancelled;                     /* stopped before answering */
    /* JOB_CONNS */
    json_t *conns;                      /* array, at most want entries */
    uint64_t total;                     /* its sessions */
    /* JOB_READY */
    int listeners;                      /* open listeners */
    char why[256];                      /* "" when ready */
};

/*
 * A request to every worker.  References: the admin thread's and one
 * per queued call; the last one frees it (a worker may answer after the
 * admin gave up waiting).
 */
struct job {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    int pending;
    bool abandoned;                     /* the admin thread stopped waiting */
    enum job_kind kind;
    size_t want;                        /* JOB_CONNS: entries per worker */
    int n;
    struct job_slot *slots;
    struct kr_worker **ws;
};

struct job_call {
    struct job *j;
    int i;
};

static void
job_unref_locked(struct job *j)
{
    int i;

    if (--j->refs > 0) {
        pthread_mutex_unlock(&j->lock);
        return;
    }
    pthread_mutex_unlock(&j->lock);
    for (i = 0; i < j->n; i++) {
        json_decref(j->slots[i].conns);
    }
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->lock);
    free(j->slots);
    free(j->ws);
    free(j);
}

/* One session as /connections shows it. */
static json_t *
conn_json(const struct kr_session *s, int64_t now_us)
{
    json_t *o = json_object();
    int64_t age = now_us - s->started_us;

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "id", json_string(s->conn_id));
    json_object_set_new(o, "listener",
                        json_string(kr_session_listener_name(s)));
    json_object_set_new(o, "listener_address",
                        json_string(s->l != NULL ? s->l->addrstr : ""));
    json_object_set_new(o, "route",
                        json_string(s->l != NULL ? s->l->label : ""));
    json_object_set_new(o, "client_address", json_string(s->peer_host));
    json_object_set_new(o, "client_port", json_integer(s->peer_port));
    if (s->proxied) {
        /* the PROXY protocol header named the client: the socket's peer
           is the proxy (the audit log's proxy_addr, proxy_port) */
        json_object_set_new(o, "proxy_address", json_string(s->proxy_host));
        json_object_set_new(o, "proxy_port", json_integer(s->proxy_port));
    }
    json_object_set_new(o, "client_id", s->client_id[0]
                                            ? json_string(s->client_id)
                                            : json_null());
    json_object_set_new(o, "principal", s->principal != NULL
                                            ? json_string(s->principal)
                                            : json_null());
    json_object_set_new(o, "upstream", json_string(s->upname));
    json_object_set_new(o, "requests", json_integer((json_int_t)
                                                    s->nrequests));
    json_object_set_new(o, "in_flight", json_integer(s->fifo.len));
    json_object_set_new(o, "bytes_from_client",
                        json_integer((json_int_t)s->client.bytes_in));
    json_object_set_new(o, "bytes_to_client",
                        json_integer((json_int_t)s->client.bytes_out));
    json_object_set_new(o, "age_seconds",
                        json_real(age > 0 ? (double)age / 1e6 : 0.0));
    return o;
}

/* On worker w's thread: its sessions (the first want of them). */
static void
job_conns(struct kr_worker *w, struct job_slot *sl, size_t want)
{
    const struct kr_session *s;
    int64_t now = kr_clock_mono_us();

    sl->conns = json_array();
    for (s = w->sessions; s != NULL; s = s->next) {
        if (s->dead) {
            continue;
        }
        if (sl->conns != NULL && json_array_size(sl->conns) < want) {
            json_t *o = conn_json(s, now);

            if (o != NULL) {
                json_object_set_new(o, "worker", json_integer(w->index));
                json_array_append_new(sl->conns, o);
            }
        }
        sl->total++;
    }
}

/* On worker w's thread: listening, and an upstream reachable? */
static void
job_ready(struct kr_worker *w, struct job_slot *sl)
{
    int64_t now = kr_clock_mono_ms();
    int i, j, ok = 0;
    size_t n = 0;

    for (i = 0; i < w->ngroups; i++) {
        const struct kr_group *g = w->groups[i];

        for (j = 0; g != NULL && j < g->nlisteners; j++) {
            sl->listeners += g->listeners[j].evl != NULL;
        }
    }
    if (sl->listeners == 0) {
        snprintf(sl->why, sizeof(sl->why), "worker %d: no listener open",
                 w->index);
        return;
    }
    sl->why[0] = '\0';
    for (i = 0; i < w->nups; i++) {
        struct kr_upstream_health h;

        if (w->ups[i] == NULL) {
            continue;
        }
        kr_upstream_health(w->ups[i], &h);
        if (h.last_ok_ms > 0 && h.last_ok_ms > h.last_fail_ms) {
            ok++;
            continue;
        }
        if (n < sizeof(sl->why)) {
            int r;

            if (h.last_ok_ms == 0 && h.last_fail_ms == 0) {
                r = snprintf(sl->why + n, sizeof(sl->why) - n,
                             "%supstream%s%s: no metadata fetch finished "
                             "yet", n ? "; " : "", h.name[0] ? " " : "",
                             h.name);
            } else if (h.last_ok_ms == 0) {
                r = snprintf(sl->why + n, sizeof(sl->why) - n,
                             "%supstream%s%s: no metadata fetch succeeded "
                             "(the last failed %.1f s ago)", n ? "; " : "",
                             h.name[0] ? " " : "", h.name,
                             (double)(now - h.last_fail_ms) / 1000.0);
            } else {
                r = snprintf(sl->why + n, sizeof(sl->why) - n,
                             "%supstream%s%s: the last metadata fetch "
                             "failed %.1f s ago (the last success %.1f s "
                             "ago)", n ? "; " : "", h.name[0] ? " " : "",
                             h.name,
                             (double)(now - h.last_fail_ms) / 1000.0,
                             (double)(now - h.last_ok_ms) / 1000.0);
            }
            n = r < 0 ? sizeof(sl->why) : n + (size_t)r;
        }
    }
    if (ok > 0) {
        sl->why[0] = '\0';
    } else if (w->nups == 0) {
        snprintf(sl->why, sizeof(sl->why), "worker %d: no upstream",
                 w->index);
    }
}

/* kr_worker_call's function: w's answer, or its cancellation (NULL). */
static void
job_cb(struct kr_worker *w, void *arg)
{
    struct job_call *c = arg;
    struct job *j = c->j;
    struct job_slot *sl = &j->slots[c->i];
    bool skip;

    free(c);
    pthread_mutex_lock(&j->lock);
    skip = j->abandoned;
    pthread_mutex_unlock(&j->lock);
    if (w != NULL && !skip) {
        if (j->kind == JOB_CONNS) {
            job_conns(w, sl, j->want);
        } else {
            job_ready(w, sl);
        }
    }
    pthread_mutex_lock(&j->lock);
    sl->done = w != NULL;
    sl->cancelled = w == NULL;
    j->pending--;
    pthread_cond_signal(&j->cond);
    job_unref_locked(j);
}

/*
 * Ask every worker of a (kind, want) and wait up to KR_ADMIN_CALL_MS.
 * Returns the job (the caller's reference: job_done) with every slot
 * answered, or NULL with why (a worker did not answer in time, is
 * stopping, out of memory).
 */
static struct job *
job_run(struct kr_admin *a, enum job_kind kind, size_t want, char *why,
        size_t wlen)
{
    struct job *j = calloc(1, sizeof(*j));
    struct timespec until;
    int i, n, rc = 0;

    if (j == NULL) {
        snprintf(why, wlen, "out of memory");
        return NULL;
    }
    j->ws = calloc(KR_ADMIN_MAX_WORKERS, sizeof(*j->ws));
    if (j->ws == NULL) {
        free(j);
        snprintf(why, wlen, "out of memory");
        return NULL;
    }
    n = kr_daemon_workers(a->d, j->ws, KR_ADMIN_MAX_WORKERS);
    if (n > KR_ADMIN_MAX_WORKERS) {
        n = KR_ADMIN_MAX_WORKERS;
    }
    j->slots = calloc((size_t)(n > 0 ? n : 1), sizeof(*j->slots));
    if (j->slots == NULL) {
        free(j->ws);
        free(j);
        snprintf(why, wlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->kind = kind;
    j->want = want;
    j->n = n;
    j->refs = 1;
    for (i = 0; i < n; i++) {
        struct job_call *c = malloc(sizeof(*c));

        if (c == NULL) {
            break;
        }
        c->j = j;
        c->i = i;
        pthread_mutex_lock(&j->lock);
        j->refs++;
        j->pending++;
        pthread_mutex_unlock(&j->lock);
        if (kr_worker_call(j->ws[i], job_cb, c) != KR_OK) {
            free(c);
            pthread_mutex_lock(&j->lock);
            j->refs--;
            j->pending--;
            j->slots[i].cancelled = true;
            pthread_mutex_unlock(&j->lock);
        }
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += KR_ADMIN_CALL_MS / 1000;
    until.tv_nsec += (long)(KR_ADMIN_CALL_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->lock);
    while (j->pending > 0 && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&j->cond, &j->lock, &until);
    }
    for (i = 0; i < n; i++) {
        if (!j->slots[i].done) {
            snprintf(why, wlen, "worker %d %s", i,
                     j->slots[i].cancelled
                         ? "is stopping"
                         : "did not answer within "
                           KR_ADMIN_STR(KR_ADMIN_CALL_MS) " ms");
            j->abandoned = true;
            job_unref_locked(j);
            return NULL;
        }
    }
    pthread_mutex_unlock(&j->lock);
    return j;
}

static void
job_done(struct job *j)
{
    if (j != NULL) {
        pthread_mutex_lock(&j->lock);
        job_unref_locked(j);
    }
}

/* ---- HTTP ---------------------------------------------------------------- */

static void
reply_text(struct evhttp_request *req, int code, const char *reason,
           const char *ctype, const char *body, size_t len)
{
    struct evbuffer *b = evhttp_request_get_output_buffer(req);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-store");
    if (body != NULL) {
        evbuffer_add(b, body, len);
    }
    evhttp_send_reply(req, code, reason, NULL);
}

static void
reply_line(struct evhttp_request *req, int code, const char *reason,
           const char *text)
{
    char line[600];
    int n = snprintf(line, sizeof(line), "%s\n", text);

    reply_text(req, code, reason, "text/plain; charset=utf-8", line,
               n < 0 ? 0 : (size_t)n >= sizeof(line) ? sizeof(line) - 1
                                                      : (size_t)n);
}

/* Name of rule index i of the config arg, for the rule label. */
static const char *
rule_name(int i, void *arg)
{
    const struct kr_conf *c = arg;

    return c != NULL && i >= 0 && i < c->nrules ? c->rules[i].name : NULL;
}

static void
do_metrics(struct kr_admin *a, struct evhttp_request *req)
{
    struct kr_worker **ws = calloc(KR_ADMIN_MAX_WORKERS, sizeof(*ws));
    const struct kr_stats **st = calloc(KR_ADMIN_MAX_WORKERS, sizeof(*st));
    struct kr_conf_ref *cref = kr_daemon_conf_get(a->d);
    struct kr_admin_proc p;
    char *text = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int i, n = 0, rc = -1;

    if (ws != NULL && st != NULL) {
        n = kr_daemon_workers(a->d, ws, KR_ADMIN_MAX_WORKERS);
        if (n > KR_ADMIN_MAX_WORKERS) {
            n = KR_ADMIN_MAX_WORKERS;
        }
        for (i = 0; i < n; i++) {
            st[i] = &ws[i]->stats;
        }
        f = open_memstream(&text, &len);
    }
    if (f != NULL) {
        memset(&p, 0, sizeof(p));
        p.version = PACKAGE_VERSION;
        p.workers = n;
        p.reloads_ok = atomic_load(&a->d->reloads);
        p.reloads_failed = atomic_load(&a->d->reloads_refused);
        p.conf_loaded_us = atomic_load(&a->d->conf_loaded_us);
        p.conf_load_us = atomic_load(&a->d->conf_load_us);
        p.started_us = a->started_us;
        p.audit = cref->conf->audit.target != NULL;
        kr_daemon_audit_counts(a->d, &p.audit_written, &p.audit_dropped);
        rc = kr_stats_prom(f, (const struct kr_stats *const *)st, n,
                           rule_name, cref->conf);
        rc |= kr_admin_prom_process(f, &p);
        rc |= fclose(f) != 0 ? -1 : 0;
    }
    kr_conf_ref_put(cref);
    if (rc == 0) {
        reply_text(req, HTTP_OK, "OK", "text/plain; version=0.0.4; "
                   "charset=utf-8", text, len);
    } else {
        reply_line(req, HTTP_INTERNAL, "Internal Server Error",
                   "out of memory");
    }
    free(text);
    free(ws);
    free(st);
}

static void
do_config(struct kr_admin *a, struct evhttp_request *req)
{
    struct kr_conf_ref *cref = kr_daemon_conf_get(a->d);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f != NULL) {
        fprintf(f, "# the running configuration, from %s (secrets are "
                "never shown)\n", cref->conf->path != NULL
                                      ? cref->conf->path
                                      : "(no config file)");
        kr_conf_dump(cref->conf, f);
    }
    kr_conf_ref_put(cref);
    if (f != NULL && fclose(f) == 0) {
        reply_text(req, HTTP_OK, "OK", "text/plain; charset=utf-8", text,
                   len);
    } else {
        reply_line(req, HTTP_INTERNAL, "Internal Server Error",
                   "out of memory");
    }
    free(text);
}

static void
do_ready(struct kr_admin *a, struct evhttp_request *req)
{
    char why[300];
    struct job *j = job_run(a, JOB_READY, 0, why, sizeof(why));
    int i;

    if (j == NULL) {
        reply_line(req, 503, "Service Unavailable", why);
        return;
    }
    why[0] = '\0';
    if (j->n == 0) {
        snprintf(why, sizeof(why), "no worker runs");
    }
    for (i = 0; i < j->n && why[0] == '\0'; i++) {
        if (j->slots[i].why[0] != '\0') {
            snprintf(why, sizeof(why), "%s", j->slots[i].why);
        }
    }
    job_done(j);
    if (why[0] != '\0') {
        reply_line(req, 503, "Service Unavailable", why);
    } else {
        reply_line(req, HTTP_OK, "OK", "ready");
    }
}

/* A query parameter as a count in [0, max], or def; false: malformed. */
static bool
query_count(const struct evkeyvalq *q, const char *key, size_t def,
            size_t max, size_t *out)
{
    const char *v = evhttp_find_header(q, key);
    char *end;
    unsigned long long n;

    *out = def;
    if (v == NULL) {
        return true;
    }
    errno = 0;
    n = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n > max) {
        return false;
    }
    *out = (size_t)n;
    return true;
}

static void
do_conns(struct kr_admin *a, struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *qs = evhttp_uri_get_query(uri);
    struct evkeyvalq q;
    size_t off, lim, k, pos = 0;
    uint64_t total = 0;
    char why[300];
    struct job *j;
    json_t *root, *arr;
    char *text;
    int i;

    TAILQ_INIT(&q);
    if ((qs != NULL && evhttp_parse_query_str(qs, &q) != 0) ||
        !query_count(&q, "offset", 0, (size_t)1 << 30, &off) ||
        !query_count(&q, "limit", KR_ADMIN_PAGE, KR_ADMIN_PAGE_MAX, &lim)) {
        evhttp_clear_headers(&q);
        reply_line(req, HTTP_BADREQUEST, "Bad Request", "offset and limit: "
                   "counts (limit at most " KR_ADMIN_STR(KR_ADMIN_PAGE_MAX)
                   ")");
        return;
    }
    evhttp_clear_headers(&q);
    j = job_run(a, JOB_CONNS, off + lim, why, sizeof(why));
    if (j == NULL) {
        reply_line(req, 503, "Service Unavailable", why);
        return;
    }
    root = json_object();
    arr = json_array();
    for (i = 0; i < j->n; i++) {
        const struct job_slot *sl = &j->slots[i];

        total += sl->total;
        for (k = 0; sl->conns != NULL && k < json_array_size(sl->conns);
             k++, pos++) {
            if (pos >= off && pos < off + lim && arr != NULL) {
                json_array_append(arr, json_array_get(sl->conns, k));
            }
        }
        /* the sessions a worker did not list come after its listed ones */
        pos += sl->total - (sl->conns != NULL ? json_array_size(sl->conns)
                                              : 0);
    }
    job_done(j);
    text = NULL;
    if (root != NULL && arr != NULL) {
        json_object_set_new(root, "total", json_integer((json_int_t)total));
        json_object_set_new(root, "offset", json_integer((json_int_t)off));
        json_object_set_new(root, "limit", json_integer((json_int_t)lim));
        json_object_set_new(root, "connections", arr);
        arr = NULL;
        text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    }
    json_decref(arr);
    json_decref(root);
    if (text == NULL) {
        reply_line(req, HTTP_INTERNAL, "Internal Server Error",
                   "out of memory");
        return;
    }
    reply_text(req, HTTP_OK, "OK", "application/json", text, strlen(text));
    free(text);
}

/* The current config's token allows req (or none is asked)? */
static bool
authorized(struct kr_admin *a, struct evhttp_request *req)
{
    struct kr_conf_ref *cref = kr_daemon_conf_get(a->d);
    const struct kr_admin_conf *ac = &cref->conf->admin;
    /* a reload that removed [admin] leaves the endpoint as it started
       (until a restart), its token included */
    bool ok = kr_admin_auth_ok(ac->listen.host != NULL ? ac->token
                                                       : a->start_token,
                               evhttp_find_header(
                                   evhttp_request_get_input_headers(req),
                                   "Authorization"));

    kr_conf_ref_put(cref);
    return ok;
}

static void
http_cb(struct evhttp_request *req, void *arg)
{
    struct kr_admin *a = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

    if (path == NULL) {
        reply_line(req, HTTP_BADREQUEST, "Bad Request", "no path");
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          "GET, HEAD");
        reply_line(req, HTTP_BADMETHOD, "Method Not Allowed",
                   "GET or HEAD only");
        return;
    }
    if (strcmp(path, "/healthz") == 0) {
        reply_line(req, HTTP_OK, "OK", "ok");
        return;
    }
    if (!authorized(a, req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer realm=\"krelay\"");
        reply_line(req, 401, "Unauthorized", "a bearer token is required "
                   "(Authorization: Bearer TOKEN)");
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        do_metrics(a, req);
    } else if (strcmp(path, "/readyz") == 0) {
        do_ready(a, req);
    } else if (strcmp(path, "/connections") == 0) {
        do_conns(a, req);
    } else if (strcmp(path, "/config") == 0) {
        do_config(a, req);
    } else {
        reply_line(req, HTTP_NOTFOUND, "Not Found", "not found: /metrics, "
                   "/healthz, /readyz, /connections, /config");
    }
}

/* ---- the thread ---------------------------------------------------------- */

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
    struct kr_admin *a = arg;
    uint64_t n;

    (void)what;
    while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR) {
    }
    event_base_loopbreak(a->base);
}

static void *
admin_main(void *arg)
{
    struct kr_admin *a = arg;

    event_base_dispatch(a->base);
    return NULL;
}

static void
admin_free(struct kr_admin *a)
{
    if (a->http != NULL) {
        evhttp_free(a->http);
    }
    if (a->stop_ev != NULL) {
        event_free(a->stop_ev);
    }
    if (a->stop_fd >= 0) {
        close(a->stop_fd);
    }
    if (a->base != NULL) {
        event_base_free(a->base);
    }
    if (a->start_token != NULL) {
        OPENSSL_cleanse(a->start_token, strlen(a->start_token));
        free(a->start_token);
    }
    free(a);
}

struct kr_admin *
kr_admin_start(struct kr_daemon *d, const struct kr_admin_conf *ac,
               char *err, size_t errlen)
{
    struct kr_admin *a = calloc(1, sizeof(*a));
    struct evhttp_bound_socket *bs;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    const char *host = ac->listen.host != NULL && ac->listen.host[0]
                           ? ac->listen.host
                           : "127.0.0.1";
    char hbuf[64];

    if (a == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->d = d;
    a->stop_fd = -1;
    if (ac->token != NULL && (a->start_token = strdup(ac->token)) == NULL) {
        snprintf(err, errlen, "out of memory");
        free(a);
        return NULL;
    }
    a->started_us = kr_clock_wall_us();
    a->base = event_base_new();
    a->http = a->base != NULL ? evhttp_new(a->base) : NULL;
    a->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->stop_ev = a->stop_fd >= 0 && a->base != NULL
                     ? event_new(a->base, a->stop_fd, EV_READ | EV_PERSIST,
                                 stop_cb, a)
                     : NULL;
    if (a->http == NULL || a->stop_ev == NULL ||
        event_add(a->stop_ev, NULL) != 0) {
        snprintf(err, errlen, "out of memory");
        admin_free(a);
        return NULL;
    }
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE);
    evhttp_set_timeout(a->http, 10);
    evhttp_set_max_headers_size(a->http, 16384);
    evhttp_set_max_body_size(a->http, 4096);
    evhttp_set_gencb(a->http, http_cb, a);
    bs = evhttp_bind_socket_with_handle(a->http, host, ac->listen.port);
    if (bs == NULL) {
        snprintf(err, errlen, "[admin] listen %s%s%s:%u: cannot bind: %s",
                 strchr(host, ':') != NULL ? "[" : "", host,
                 strchr(host, ':') != NULL ? "]" : "",
                 (unsigned)ac->listen.port, strerror(errno));
        admin_free(a);
        return NULL;
    }
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss,
                    &sl) == 0) {
        snprintf(a->addr, sizeof(a->addr), "%s",
                 kr_sockaddr_str((struct sockaddr *)&ss, sl, hbuf,
                                 sizeof(hbuf)));
    } else {
        snprintf(a->addr, sizeof(a->addr), "%s:%u", host,
                 (unsigned)ac->listen.port);
    }
    if (pthread_create(&a->thread, NULL, admin_main, a) != 0) {
        snprintf(err, errlen, "admin thread: %s", strerror(errno));
        admin_free(a);
        return NULL;
    }
    a->running = true;
    kr_log_info("admin endpoint on http://%s (/metrics, /healthz, /readyz, "
                "/connections, /config)%s", a->addr,
                ac->token != NULL ? ", bearer token required" : "");
    return a;
}

const char *
kr_admin_addr(const struct kr_admin *a)
{
    return a->addr;
}

void
kr_admin_stop(struct kr_admin *a)
{
    uint64_t one = 1;

    if (a == NULL) {
        return;
    }
    if (a->running) {
        while (write(a->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
        pthread_join(a->thread, NULL);
        a->running = false;
    }
    admin_free(a);
}
