/*
 * kr_audit.c - the audit log: sink (queue + writer thread) and line
 * formatting (see kr_audit.h).
 *
 * Sink.  Every thread that writes lines has a ring of its own in the
 * sink (queue_bytes each), single producer, single consumer: the thread
 * copies a line and its '\n' in and publishes it with a release store, no
 * lock and no syscall (struct audit_ring).  The writer thread takes each
 * ring's published bytes in turn and writes them where they lie (one
 * writev(2) of at most two pieces per ring and pass: a file, or fd 1 for
 * "stdout"; or one syslog(3) call per line), and only then gives the
 * space back: a ring holds the lines waiting and those being written.
 * A thread finds its ring through a thread-local cache keyed by the sink
 * (its address and a process-unique id, so a sink opened where a closed
 * one was is never mistaken for it); the first write of a thread to a
 * sink (or one after the cache forgot it) looks the ring up, or makes
 * it, under the sink's mutex: once per thread and sink.  Rings stay until
 * the sink closes: a ring whose thread ended is drained like the others
 * and freed by kr_audit_close.  Lines of one thread are written in the
 * order it wrote them; lines of different threads interleave as the
 * writer drains their rings (a ring's batch, then the next ring's), never
 * within a line.  fd 1 is never closed nor reopened; a full non-blocking
 * target is waited for (audit_wait_writable).  A file is reopened when
 * the atomic reopen flag is set (checked before each write and at least
 * every 100 ms); a failed reopen keeps the old descriptor.  Before each
 * syslog batch the writer looks for the syslog socket (one stat(2),
 * kr_log_syslog_present): without one syslog(3) would drop the lines
 * silently, so they are counted as dropped instead, and logged.  The
 * writer blocks every signal, so SIGHUP and friends go to the event
 * loops.
 *
 * Batching.  The writer is not woken for every line: it sleeps until a
 * line arrives in empty rings, then waits up to KR_AUDIT_LINGER_MS for
 * more (a producer ends that once its ring holds a quarter of
 * queue_bytes, or KR_AUDIT_WAKE_BYTES), and writes what every ring holds.
 * It wakes at most about 1000 / KR_AUDIT_LINGER_MS times a second however
 * many lines come (a wake-up per line, a futex call and a context switch
 * each, was half of an audit line's cost), and a line reaches the target
 * within about KR_AUDIT_LINGER_MS; kr_audit_flush and kr_audit_close end
 * the wait at once.
 *
 * Waking the writer.  Its state (enum kr_audit_wstate) is an atomic that
 * producers read after each line: RUN (awake) asks nothing of them, so a
 * busy writer costs a line no syscall and no lock.  Going to sleep, the
 * writer stores IDLE (or LINGER), a seq_cst fence, and looks at the rings
 * again; a producer stores its head, a seq_cst fence, and reads the
 * state: one of the two sees the other (a line is never left asleep
 * with).  The producer that sees IDLE (or LINGER with its ring past
 * wake_bytes) and wins the compare-and-swap to RUN signals the writer's
 * condition variable under the mutex the writer sleeps with.
 *
 * Flushing.  kr_audit_flush takes a number (flush_seq) and waits for the
 * writer to finish a pass that began after it: a pass writes every line
 * published before it read flush_seq, in every ring, so every line
 * written before the flush (on any thread that handed its result over)
 * is out when it returns.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kr_api_keys.h"
#include "kr_audit.h"
#include "kr_json.h"
#include "kr_jsonw.h"
#include "kr_kerr.h"
#include "kr_log.h"

/*
 * The sink's writer batches (see the top of this file): how long it
 * waits for more lines after the first of a batch, and the bytes after
 * which a producer ends that wait (or a quarter of a ring, when that is
 * less).
 */
#define KR_AUDIT_LINGER_MS 10
#define KR_AUDIT_WAKE_BYTES (256u << 10)

/*
 * A target that takes no more bytes for now (fd 1 a full pipe that
 * another process made non-blocking: EAGAIN) is waited for, however long,
 * while krelay runs (producers drop lines once their ring is full); once
 * the sink is closing, for at most this long more, then the rest is
 * counted as lost.
 */
#define KR_AUDIT_STOP_GRACE_MS 1000

/*
 * What the sink's writer thread is doing (atomic: producers read it after
 * each line, see "Waking the writer" at the top of this file).
 */
enum kr_audit_wstate {
    KR_AW_RUN = 0,                /* awake: nothing to do for it */
    KR_AW_IDLE,                   /* asleep, nothing queued: wake it */
    KR_AW_LINGER                  /* asleep, a batch started: wake it
                                     once a ring holds wake_bytes */
};

/* Rings a thread remembers (sink, ring) pairs of before it looks one up
   under the sink's mutex. */
#define KR_AUDIT_TCACHE 4

/* ---- sink --------------------------------------------------------------- */

/* Where a sink writes, from its target. */
enum audit_kind {
    AUDIT_FILE = 0,               /* a path: opened, reopenable */
    AUDIT_SYSLOG,                 /* "syslog": syslog(3) per line */
    AUDIT_STDOUT                  /* "stdout": write(2) to fd 1 */
};

/*
 * One writing thread's ring of lines: single producer (the thread that
 * owns it), single consumer (the writer thread).  The producer copies a
 * line (and its '\n') in at woff, wrapping around the end if it must,
 * and publishes head with release: its low 32 bits count the bytes
 * published, its high 32 bits the lines, both modulo 2^32 (one atomic,
 * so the writer knows a batch's lines without looking for them; a ring
 * never holds 2^32 bytes: queue_bytes <= INT32_MAX).  The writer reads
 * head with acquire, writes the bytes from roff to head and only then
 * publishes tail (bytes written, modulo 2^32) with release, which gives
 * the space back (the producer reads tail with acquire before it reuses
 * bytes).  head and tail have cache lines of their own: the producer
 * writes only head's, the writer only tail's.
 */
#define AUDIT_HEAD_BYTES(h) ((uint32_t)(h))
#define AUDIT_HEAD_LINES(h) ((uint32_t)((h) >> 32))

struct audit_ring {
    _Alignas(64) _Atomic uint64_t head;   /* producer: lines and bytes
                                             published */
    uint32_t tail_seen;                   /* producer: tail last read */
    size_t woff;                          /* producer: where the next
                                             line goes, < cap */
    _Alignas(64) _Atomic uint32_t tail;   /* writer: bytes written */
    uint32_t tlines;                      /* writer: lines written */
    size_t roff;                          /* writer: where the next
                                             batch starts, < cap */
    _Alignas(64) struct audit_ring *next; /* the sink's list; set before
                                             the ring is published */
    uint64_t owner;                       /* the thread's token */
    char *data;                           /* cap bytes (the sink's) */
};

struct kr_audit {
    /* what producers read per line: set at open (stop: at close) */
    _Alignas(64) uint64_t id;     /* unique in the process: the thread
                                     caches' key with the address */
    size_t cap;                   /* each ring's bytes (queue_bytes) */
    size_t wake_bytes;            /* a ring's bytes that end the linger */
    atomic_bool stop;
    /* written by the writer when it sleeps and wakes */
    _Alignas(64) _Atomic int wstate;     /* enum kr_audit_wstate */
    _Alignas(64) pthread_mutex_t mu;     /* ring registration, the
                                            writer's sleeps, flush waits;
                                            never taken per line */
    pthread_cond_t wake;          /* producers, flush, close -> writer */
    pthread_cond_t idle;          /* writer -> kr_audit_flush */
    pthread_t thread;
    _Atomic(struct audit_ring *) rings;  /* newest first; only added to
                                            (under mu) until close */
    _Atomic uint64_t flush_seq;   /* kr_audit_flush calls so far
                                     (incremented under mu) */
    uint64_t flush_done;          /* writer, under mu: every line
                                     published before flush call
                                     flush_done is written */
    unsigned flush_waiters;       /* under mu */
    enum audit_kind kind;
    int fd;                       /* file target; 1 for stdout */
    char *path;                   /* the target as given */
    atomic_int reopen;
    int64_t giveup_ms;            /* writer: closing, stop waiting for a
                                     full target then (0: not yet) */
    /* writer: lines lost while the target fails, reported once when it
       starts failing, then at most every KR_AUDIT_LOST_REPORT_MS, and
       when it works again or the sink closes (audit_lost) */
    bool failing;
    char fail_why[160];
    uint64_t lost_unreported;
    int64_t lost_report_ms;       /* next report due (failing) */
    _Alignas(64) _Atomic uint64_t dropped;  /* written per line only on
                                               a drop */
    _Atomic uint64_t written;     /* writer: per batch */
};

/* Sink ids and thread tokens (never 0). */
static _Atomic uint64_t audit_next_id = 1;
static _Atomic uint64_t audit_next_token = 1;

/*
 * This thread's rings: (sink, id) -> ring, KR_AUDIT_TCACHE of them.  An
 * entry of a sink that closed is never read through: a sink opened later
 * at the same address has another id.
 */
struct audit_tcache {
    const struct kr_audit *au;
    uint64_t id;
    struct audit_ring *ring;
};
static _Thread_local struct audit_tcache audit_tc[KR_AUDIT_TCACHE];
static _Thread_local unsigned audit_tc_next;
static _Thread_local uint64_t audit_token;

static int
audit_open_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

static void
audit_do_reopen(struct kr_audit *au)
{
    int fd;

    if (au->kind != AUDIT_FILE || !atomic_exchange(&au->reopen, 0)) {
        return;
    }
    fd = audit_open_file(au->path);
    if (fd < 0) {
        kr_log_rl(KR_LOG_ERROR, "audit: cannot reopen %s: %s; audit lines "
                  "keep going to the file opened before", au->path,
                  strerror(errno));
        return;
    }
    close(au->fd);
    au->fd = fd;
}

/* Milliseconds on the monotonic clock. */
static int64_t
audit_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Wait until au->fd takes bytes again after EAGAIN (see
 * KR_AUDIT_STOP_GRACE_MS; au->giveup_ms is set when closing is first
 * seen, for every batch left).  true: write again; false: give
 * up (closing and the grace is over, or poll failed).
 */
static bool
audit_wait_writable(struct kr_audit *au)
{
    struct pollfd pfd;

    for (;;) {
        int r;

        if (au->giveup_ms != 0 && audit_now_ms() >= au->giveup_ms) {
            return false;
        }
        pfd.fd = au->fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        r = poll(&pfd, 1, 100);
        if (r > 0) {
            return true;            /* writable, or an error write reports */
        }
        if (r < 0 && errno != EINTR) {
            return false;
        }
        if (atomic_load(&au->stop) && au->giveup_ms == 0) {
            au->giveup_ms = audit_now_ms() + KR_AUDIT_STOP_GRACE_MS;
        }
    }
}

/* A target that keeps failing is reported this often, not per batch. */
#define KR_AUDIT_LOST_REPORT_MS 60000

/* Report the lost lines not reported yet (writer thread). */
static void
audit_report_lost(struct kr_audit *au)
{
    if (au->lost_unreported > 0) {
        kr_log_error("audit: %s: %llu line%s lost", au->fail_why,
                     (unsigned long long)au->lost_unreported,
                     au->lost_unreported == 1 ? "" : "s");
        au->lost_unreported = 0;
    }
    au->lost_report_ms = audit_now_ms() + KR_AUDIT_LOST_REPORT_MS;
}

/*
 * lost lines of a batch could not be written, because of why: counted as
 * dropped; logged at once when the target starts failing, then in one
 * line a minute while it goes on failing (a reader gone for good must not
 * fill the log), and at close.
 */
static void
audit_lost(struct kr_audit *au, uint64_t lost, const char *why)
{
    atomic_fetch_add(&au->dropped, lost);
    if (au->failing && strcmp(au->fail_why, why) != 0) {
        audit_report_lost(au);          /* another cause: the old one's */
    }
    snprintf(au->fail_why, sizeof(au->fail_why), "%s", why);
    au->lost_unreported += lost;
    if (!au->failing || audit_now_ms() >= au->lost_report_ms) {
        au->failing = true;
        audit_report_lost(au);
    }
}

/* A batch went out whole: a failing target works again. */
static void
audit_ok(struct kr_audit *au)
{
    if (au->failing) {
        audit_report_lost(au);
        kr_log_notice("audit: writing to %s again", au->path);
        au->failing = false;
    }
}

/* Lines ('\n') in n bytes at p. */
static uint64_t
audit_count_lines(const char *p, size_t n)
{
    const char *end = p + n;
    uint64_t lines = 0;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        lines++;
        p++;
    }
    return lines;
}

/*
 * Write one ring's batch, nlines whole lines in iov[0..niov) (niov 1 or
 * 2: the
 * second when the batch wraps around the ring's end; a line may then
 * start in the first and end in the second), to the target.
 */
static void
audit_emit(struct kr_audit *au, struct iovec *iov, int niov, uint64_t nlines)
{
    int i;

    audit_do_reopen(au);
    if (au->kind == AUDIT_SYSLOG && !kr_log_syslog_present()) {
        /* syslog(3) would drop them without a word: count them */
        char why[160];

        snprintf(why, sizeof(why), "no syslog socket at %s (no syslog "
                 "daemon)", kr_log_syslog_path);
        audit_lost(au, nlines, why);
        return;
    }
    if (au->kind == AUDIT_SYSLOG) {
        /* (a part: the start of a line the second iovec ends) */
        const char *part = NULL;
        size_t partlen = 0;

        for (i = 0; i < niov; i++) {
            const char *p = iov[i].iov_base;
            size_t len = iov[i].iov_len, off = 0;

            while (off < len) {
                const char *nl = memchr(p + off, '\n', len - off);

                if (nl == NULL) {
                    part = p + off;   /* continues in the next iovec */
                    partlen = len - off;
                    break;
                }
                syslog(LOG_INFO | LOG_DAEMON, "%.*s%.*s", (int)partlen,
                       part != NULL ? part : "", (int)(nl - (p + off)),
                       p + off);
                part = NULL;
                partlen = 0;
                off = (size_t)(nl - p) + 1;
            }
        }
        atomic_fetch_add(&au->written, nlines);
        audit_ok(au);
        return;
    }
    while (niov > 0) {
        ssize_t w = writev(au->fd, iov, niov);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (audit_wait_writable(au)) {
                continue;
            }
            errno = EAGAIN;
        }
        if (w <= 0) {
            uint64_t lost = 0;
            char why[160];

            for (i = 0; i < niov; i++) {
                lost += audit_count_lines(iov[i].iov_base, iov[i].iov_len);
            }
            snprintf(why, sizeof(why), "write to %s failed: %s", au->path,
                     w == 0            ? "no progress"
                     : errno == EAGAIN ? "not writable while closing"
                                       : strerror(errno));
            atomic_fetch_add(&au->written, nlines - lost);
            audit_lost(au, lost, why);
            return;
        }
        while (niov > 0 && (size_t)w >= iov[0].iov_len) {
            w -= (ssize_t)iov[0].iov_len;
            iov++;
            niov--;
        }
        if (niov > 0) {
            iov[0].iov_base = (char *)iov[0].iov_base + w;
            iov[0].iov_len -= (size_t)w;
        }
    }
    atomic_fetch_add(&au->written, nlines);
    audit_ok(au);
}

/* abs = now (CLOCK_REALTIME, as the condition variables use) + ms. */
static void
audit_deadline(struct timespec *abs, long ms)
{
    clock_gettime(CLOCK_REALTIME, abs);
    abs->tv_nsec += ms * 1000 * 1000;
    while (abs->tv_nsec >= 1000000000L) {
        abs->tv_sec++;
        abs->tv_nsec -= 1000000000L;
    }
}

/* Bytes waiting in every ring (writer thread). */
static uint64_t
audit_pending(struct kr_audit *au)
{
    struct audit_ring *r;
    uint64_t n = 0;

    for (r = atomic_load_explicit(&au->rings, memory_order_acquire);
         r != NULL; r = r->next) {
        n += (uint32_t)(AUDIT_HEAD_BYTES(atomic_load_explicit(
                            &r->head, memory_order_acquire)) -
                        atomic_load_explicit(&r->tail, memory_order_relaxed));
    }
    return n;
}

/*
 * Sleep (writer thread) in state st (IDLE or LINGER) until ms pass, a
 * producer wakes it (sets RUN), a flush asks (flush_seq moves past seen)
 * or the sink closes.  The state is announced before the rings are
 * looked at once more (with a fence, as producers have one between their
 * head and their reading of the state): a line published meanwhile is
 * seen here (IDLE: any; LINGER: the batch grown to wake_bytes), or its
 * producer sees the state and wakes the writer.
 */
static void
audit_sleep(struct kr_audit *au, enum kr_audit_wstate st, long ms,
            uint64_t seen)
{
    struct timespec ts;

    pthread_mutex_lock(&au->mu);
    atomic_store(&au->wstate, st);
    atomic_thread_fence(memory_order_seq_cst);
    if (st == KR_AW_IDLE
            ? audit_pending(au) > 0 || atomic_load(&au->reopen)
            : audit_pending(au) >= au->wake_bytes) {
        atomic_store(&au->wstate, KR_AW_RUN);
        pthread_mutex_unlock(&au->mu);
        return;
    }
    audit_deadline(&ts, ms);
    while (atomic_load(&au->wstate) == (int)st && !atomic_load(&au->stop) &&
           atomic_load(&au->flush_seq) == seen &&
           pthread_cond_timedwait(&au->wake, &au->mu, &ts) == 0) {
    }
    atomic_store(&au->wstate, KR_AW_RUN);
    pthread_mutex_unlock(&au->mu);
}

/* Every line published before flush call seen is written: tell the
   flushes waiting for it (writer thread). */
static void
audit_passed(struct kr_audit *au, uint64_t seen)
{
    if (seen == au->flush_done) {
        return;                       /* (only the writer writes it) */
    }
    pthread_mutex_lock(&au->mu);
    au->flush_done = seen;
    if (au->flush_waiters > 0) {
        pthread_cond_broadcast(&au->idle);
    }
    pthread_mutex_unlock(&au->mu);
}

/*
 * The writer thread.  A pass: note the flushes asked so far and whether
 * the sink closes, then write every ring's lines published by then (each
 * ring's batch in one writev, 1 or 2 pieces), give the space back, and
 * tell the flushes.  Between passes it sleeps when the rings are empty
 * (IDLE, at most 100 ms: a reopen is done then too), or lingers
 * KR_AUDIT_LINGER_MS for a batch to grow.
 */
static void *
audit_writer(void *arg)
{
    struct kr_audit *au = arg;

    for (;;) {
        uint64_t seen = atomic_load(&au->flush_seq);
        bool stop = atomic_load(&au->stop);
        uint64_t pending = audit_pending(au);
        struct audit_ring *r;

        if (pending == 0) {
            audit_passed(au, seen);
            if (stop) {
                break;                /* everything written */
            }
            audit_do_reopen(au);
            audit_sleep(au, KR_AW_IDLE, 100, seen);
            continue;
        }
        /* A batch has begun: give it time to grow, unless it is big
           already or someone waits for it. */
        if (pending < au->wake_bytes && !stop && seen == au->flush_done) {
            audit_sleep(au, KR_AW_LINGER, KR_AUDIT_LINGER_MS, seen);
        }
        for (r = atomic_load_explicit(&au->rings, memory_order_acquire);
             r != NULL; r = r->next) {
            uint64_t h = atomic_load_explicit(&r->head,
                                              memory_order_acquire);
            uint32_t t = atomic_load_explicit(&r->tail,
                                              memory_order_relaxed);
            size_t off = r->roff, n = (uint32_t)(AUDIT_HEAD_BYTES(h) - t);
            struct iovec iov[2];
            int niov = 1;

            if (n == 0) {
                continue;
            }
            iov[0].iov_base = r->data + off;
            iov[0].iov_len = n < au->cap - off ? n : au->cap - off;
            if (iov[0].iov_len < n) {
                iov[1].iov_base = r->data;
                iov[1].iov_len = n - iov[0].iov_len;
                niov = 2;
            }
            audit_emit(au, iov, niov,
                       (uint32_t)(AUDIT_HEAD_LINES(h) - r->tlines));
            r->tlines = AUDIT_HEAD_LINES(h);
            r->roff = (off + n) % au->cap;
            atomic_store_explicit(&r->tail, AUDIT_HEAD_BYTES(h),
                                  memory_order_release);
        }
        audit_passed(au, seen);
    }
    return NULL;
}

static void
audit_free(struct kr_audit *au)
{
    struct audit_ring *r, *next;

    if (au->kind == AUDIT_FILE && au->fd >= 0) {
        close(au->fd);
    }
    for (r = atomic_load(&au->rings); r != NULL; r = next) {
        next = r->next;
        free(r->data);
        free(r);
    }
    pthread_cond_destroy(&au->idle);
    pthread_cond_destroy(&au->wake);
    pthread_mutex_destroy(&au->mu);
    free(au->path);
    free(au);
}

struct kr_audit *
kr_audit_open(const char *target, size_t queue_bytes, char *err,
              size_t errlen)
{
    struct kr_audit *au;
    sigset_t all, old;
    int r;

    if (target == NULL || *target == '\0') {
        snprintf(err, errlen, "audit: no target");
        return NULL;
    }
    if (queue_bytes == 0) {
        queue_bytes = KR_AUDIT_QUEUE_DEFAULT;
    }
    if (queue_bytes < KR_AUDIT_QUEUE_MIN) {
        queue_bytes = KR_AUDIT_QUEUE_MIN;
    }
    if (queue_bytes > KR_AUDIT_QUEUE_MAX) {
        queue_bytes = KR_AUDIT_QUEUE_MAX;   /* the rings count modulo 2^32 */
    }
    au = aligned_alloc(64, (sizeof(*au) + 63) / 64 * 64);
    if (au == NULL) {
        snprintf(err, errlen, "audit: out of memory");
        return NULL;
    }
    memset(au, 0, sizeof(*au));
    au->fd = -1;
    pthread_mutex_init(&au->mu, NULL);
    pthread_cond_init(&au->wake, NULL);
    pthread_cond_init(&au->idle, NULL);
    au->id = atomic_fetch_add(&audit_next_id, 1);
    atomic_init(&au->rings, NULL);
    au->cap = queue_bytes;
    au->wake_bytes = queue_bytes / 4 < KR_AUDIT_WAKE_BYTES
                         ? queue_bytes / 4
                         : KR_AUDIT_WAKE_BYTES;
    atomic_init(&au->wstate, KR_AW_RUN);
    au->kind = strcmp(target, "syslog") == 0   ? AUDIT_SYSLOG
               : strcmp(target, "stdout") == 0 ? AUDIT_STDOUT
                                               : AUDIT_FILE;
    au->path = strdup(target);
    if (au->path == NULL) {
        snprintf(err, errlen, "audit: out of memory");
        audit_free(au);
        return NULL;
    }
    if (au->kind == AUDIT_STDOUT) {
        au->fd = STDOUT_FILENO;
    } else if (au->kind == AUDIT_FILE) {
        au->fd = audit_open_file(target);
        if (au->fd < 0) {
            snprintf(err, errlen, "audit: cannot open %s: %s", target,
                     strerror(errno));
            audit_free(au);
            return NULL;
        }
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r = pthread_create(&au->thread, NULL, audit_writer, au);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        snprintf(err, errlen, "audit: cannot start writer thread: %s",
                 strerror(r));
        audit_free(au);
        return NULL;
    }
    /* its name in ps -L, top -H and /proc/PID/task/TID/comm: make bench's
       blast_scale counts its CPU apart from the workers' */
    (void)pthread_setname_np(au->thread, "krelay-audit");
    return au;
}

bool
kr_audit_reopen(struct kr_audit *au)
{
    if (au != NULL && au->kind == AUDIT_FILE) {
        atomic_store(&au->reopen, 1);
        return true;
    }
    return false;
}

void
kr_audit_close(struct kr_audit *au)
{
    if (au == NULL) {
        return;
    }
    pthread_mutex_lock(&au->mu);
    atomic_store(&au->stop, true);
    pthread_cond_signal(&au->wake);
    pthread_mutex_unlock(&au->mu);
    pthread_join(au->thread, NULL);
    audit_report_lost(au);              /* the writer has ended */
    audit_free(au);
}

/*
 * The calling thread's ring of au, looked up (or made) under au->mu and
 * remembered in the thread's cache; NULL on ENOMEM.  A thread evicted
 * from its cache finds its ring again by its token: one ring per thread
 * and sink, so its lines stay in order.
 */
static struct audit_ring *
audit_ring_find(struct kr_audit *au)
{
    struct audit_tcache *e;
    struct audit_ring *r;

    pthread_mutex_lock(&au->mu);
    if (audit_token == 0) {
        audit_token = atomic_fetch_add(&audit_next_token, 1);
    }
    for (r = atomic_load_explicit(&au->rings, memory_order_relaxed);
         r != NULL && r->owner != audit_token; r = r->next) {
    }
    if (r == NULL) {
        size_t sz = (sizeof(*r) + 63) / 64 * 64;

        r = aligned_alloc(64, sz);
        if (r != NULL) {
            memset(r, 0, sz);
            r->data = malloc(au->cap);
            if (r->data == NULL) {
                free(r);
                r = NULL;
            }
        }
        if (r != NULL) {
            atomic_init(&r->head, 0);
            atomic_init(&r->tail, 0);
            r->owner = audit_token;
            r->next = atomic_load_explicit(&au->rings, memory_order_relaxed);
            atomic_store_explicit(&au->rings, r, memory_order_release);
        }
    }
    pthread_mutex_unlock(&au->mu);
    if (r != NULL) {
        e = &audit_tc[audit_tc_next++ % KR_AUDIT_TCACHE];
        e->au = au;
        e->id = au->id;
        e->ring = r;
    }
    return r;
}

/* A producer found the writer asleep in state st after publishing its
   ring r up to head h: wake it when it wants that. */
static void
audit_kick(struct kr_audit *au, struct audit_ring *r, int st, uint64_t h)
{
    if (st == KR_AW_LINGER &&
        (uint32_t)(AUDIT_HEAD_BYTES(h) -
                   atomic_load_explicit(&r->tail, memory_order_relaxed)) <
            au->wake_bytes) {
        return;                       /* the linger's end will do */
    }
    if (!atomic_compare_exchange_strong(&au->wstate, &st, KR_AW_RUN)) {
        return;                       /* woken already */
    }
    pthread_mutex_lock(&au->mu);
    pthread_cond_signal(&au->wake);
    pthread_mutex_unlock(&au->mu);
}

bool
kr_audit_write(struct kr_audit *au, const char *line, size_t len)
{
    struct audit_ring *r = NULL;
    uint64_t h;
    size_t first;
    unsigned i;
    int st;

    if (au == NULL || line == NULL) {
        return false;
    }
    if (atomic_load_explicit(&au->stop, memory_order_relaxed) ||
        len >= au->cap) {
        goto drop;
    }
    for (i = 0; i < KR_AUDIT_TCACHE; i++) {
        if (audit_tc[i].au == au && audit_tc[i].id == au->id) {
            r = audit_tc[i].ring;
            break;
        }
    }
    if (r == NULL && (r = audit_ring_find(au)) == NULL) {
        goto drop;
    }
    h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (len + 1 > au->cap - (uint32_t)(AUDIT_HEAD_BYTES(h) - r->tail_seen)) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (len + 1 >
            au->cap - (uint32_t)(AUDIT_HEAD_BYTES(h) - r->tail_seen)) {
            goto drop;
        }
    }
    first = au->cap - r->woff;
    if (len < first) {
        memcpy(r->data + r->woff, line, len);
        r->data[r->woff + len] = '\n';
        r->woff += len + 1;
    } else {
        memcpy(r->data + r->woff, line, first);
        memcpy(r->data, line + first, len - first);
        r->data[len - first] = '\n';
        r->woff = len - first + 1;
    }
    if (r->woff == au->cap) {
        r->woff = 0;
    }
    h = (uint64_t)(AUDIT_HEAD_LINES(h) + 1u) << 32 |
        (uint32_t)(AUDIT_HEAD_BYTES(h) + len + 1);
    atomic_store_explicit(&r->head, h, memory_order_release);
    /* Waking the writer: see the top of this file. */
    atomic_thread_fence(memory_order_seq_cst);
    st = atomic_load_explicit(&au->wstate, memory_order_relaxed);
    if (st != KR_AW_RUN) {
        audit_kick(au, r, st, h);
    }
    return true;

drop:
    atomic_fetch_add_explicit(&au->dropped, 1, memory_order_relaxed);
    if (r != NULL) {
        /* a full ring: a writer lingering must not sleep on it */
        st = atomic_load_explicit(&au->wstate, memory_order_relaxed);
        if (st != KR_AW_RUN) {
            audit_kick(au, r, st,
                       atomic_load_explicit(&r->head, memory_order_relaxed));
        }
    }
    return false;
}

uint64_t
kr_audit_dropped(const struct kr_audit *au)
{
    return au != NULL ? atomic_load(&((struct kr_audit *)au)->dropped) : 0;
}

uint64_t
kr_audit_written(const struct kr_audit *au)
{
    return au != NULL ? atomic_load(&((struct kr_audit *)au)->written) : 0;
}

size_t
kr_audit_rings(const struct kr_audit *au)
{
    struct kr_audit *m = (struct kr_audit *)au;
    struct audit_ring *r;
    size_t n = 0;

    if (m == NULL) {
        return 0;
    }
    pthread_mutex_lock(&m->mu);
    for (r = atomic_load_explicit(&m->rings, memory_order_relaxed);
         r != NULL; r = r->next) {
        n++;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

void
kr_audit_flush(struct kr_audit *au)
{
    uint64_t mine;

    if (au == NULL) {
        return;
    }
    pthread_mutex_lock(&au->mu);
    mine = atomic_fetch_add(&au->flush_seq, 1) + 1;
    au->flush_waiters++;
    pthread_cond_signal(&au->wake);
    while (au->flush_done < mine) {
        pthread_cond_wait(&au->idle, &au->mu);
    }
    au->flush_waiters--;
    pthread_mutex_unlock(&au->mu);
}

/* ---- formatting helpers ------------------------------------------------- */

static const char *const kr_audit_actions[] = {
    "forwarded", "rewritten", "clamped", "denied", "delayed", "throttled",
    "faulted", "refused", "translated"
};

const char *
kr_audit_action_name(unsigned bit)
{
    unsigned i;

    for (i = 0; i < KR_ARRAY_LEN(kr_audit_actions); i++) {
        if (bit == 1u << i) {
            return kr_audit_actions[i];
        }
    }
    return NULL;
}

void
kr_audit_time(int64_t t_us, char *out, size_t len)
{
    /* The date and time of day change once a second: formatted then, per
       thread (gmtime_r, strftime and snprintf cost 100 ns a line). */
    static _Thread_local int64_t last_sec = INT64_MIN;
    static _Thread_local char date[24];
    static _Thread_local size_t dlen;     /* 0: gmtime_r/strftime failed */
    int64_t sec = t_us / 1000000, us = t_us % 1000000;
    int i;

    if (us < 0) {
        us += 1000000;
        sec--;
    }
    if (sec != last_sec) {
        time_t t = (time_t)sec;
        struct tm tm;

        dlen = gmtime_r(&t, &tm) != NULL
                   ? strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm)
                   : 0;
        last_sec = sec;
    }
    if (dlen == 0) {
        snprintf(out, len, "1970-01-01T00:00:00.000000Z");
        return;
    }
    if (len < dlen + 9) {               /* ".uuuuuuZ" and the NUL */
        snprintf(out, len, "%s.%06dZ", date, (int)us);
        return;
    }
    memcpy(out, date, dlen);
    out[dlen] = '.';
    for (i = 6; i > 0; i--) {
        out[dlen + (size_t)i] = (char)('0' + us % 10);
        us /= 10;
    }
    out[dlen + 7] = 'Z';
    out[dlen + 8] = '\0';
}

/* ---- instance ------------------------------------------------------------ */

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_name[256];

static void
host_read(void)
{
    if (gethostname(host_name, sizeof(host_name) - 1) != 0 ||
        host_name[0] == '\0') {
        snprintf(host_name, sizeof(host_name), "unknown");
    }
    host_name[sizeof(host_name) - 1] = '\0';
}

const char *
kr_audit_instance(const char *configured)
{
    if (configured != NULL) {
        return configured;
    }
    pthread_once(&host_once, host_read);
    return host_name;
}

/* ---- error codes --------------------------------------------------------- */

#define KR_AUDIT_ERRS_MAX 64      /* distinct codes kept per line */

struct kr_errcount {
    int16_t code[KR_AUDIT_ERRS_MAX];
    uint64_t n[KR_AUDIT_ERRS_MAX];
    unsigned used;
    bool more;                    /* codes past the first
                                     KR_AUDIT_ERRS_MAX were left out */
};

static void
err_add(struct kr_errcount *ec, int16_t code)
{
    unsigned i;

    for (i = 0; i < ec->used; i++) {
        if (ec->code[i] == code) {
            ec->n[i]++;
            return;
        }
    }
    if (ec->used < KR_AUDIT_ERRS_MAX) {
        ec->code[ec->used] = code;
        ec->n[ec->used] = 1;
        ec->used++;
    } else {
        ec->more = true;
    }
}

/* ---- request capture ------------------------------------------------- */

/*
 * Bytes of a string from the wire that a line keeps: a topic name's
 * (Kafka allows 249; a scanner keeps KR_SCAN_CAP_MAX bytes of one, and
 * the held and the streamed paths must cut a name alike) and any other's
 * (ClientId, TransactionalId, GroupId, MemberId: up to 32767 bytes each
 * on the wire, 6 bytes each in JSON when they are control bytes).  A
 * longer string is cut on a UTF-8 character boundary, and the line says
 * so (doc/audit.md: "<key>_truncated"), so that no single string can make
 * a line too long for the sink's queue.
 */
#define KR_AUDIT_NAME_MAX 255
#define KR_AUDIT_STR_MAX 1024
_Static_assert(KR_SCAN_CAP_MAX >= KR_AUDIT_STR_MAX &&
               KR_SCAN_CAP_MAX >= KR_AUDIT_NAME_MAX,
               "a scanner keeps what a line keeps of a string");

/*
 * The length to keep of a string of which p holds max bytes (at least)
 * and that is longer than max: max, less the bytes of a UTF-8 character
 * that would go past it.  Reads p[0..max) only.
 */
static size_t
str_cut(const char *p, size_t max)
{
    size_t i = max, back;

    for (back = 0; back < 4 && i > 0; back++) {
        uint8_t c = (uint8_t)p[--i];
        size_t need;

        if ((c & 0xc0) == 0x80) {
            continue;                   /* a continuation byte */
        }
        need = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        return i + need > max ? i : max;
    }
    return max;                         /* not UTF-8 there: as is */
}

struct kr_audit_topic {
    char *name;
    size_t len;
    bool cut;                     /* name cut to KR_AUDIT_NAME_MAX */
    unsigned partitions;
    int64_t records;              /* Produce: records sent, -1: unknown or
                                     not a Produce */
    int64_t bytes;                /* Produce: record bytes sent; Fetch:
                                     returned; -1: not known */
};

/* A string kept from the tree (NUL-terminated copy, at most
   KR_AUDIT_STR_MAX bytes; NULL: absent or null). */
struct kr_audit_str {
    char *p;
    size_t len;
    bool cut;                     /* the wire's was longer */
};

struct kr_audit_req {
    struct kr_audit_str client_id;     /* p NULL: null or absent */
    bool has_client_id;           /* the header has a ClientId field */
    struct kr_audit_topic *topics;
    size_t ntopics, cap;
    struct kr_audit_slot *slots;  /* the index of topics (see topic_entry);
                                     NULL while they are few */
    size_t nslots;                /* a power of two */
    uint64_t probes;              /* names compared, slots visited */
    bool truncated;               /* more than KR_AUDIT_TOPICS_MAX */
    bool failed;                  /* out of memory while capturing */
    json_t *body;                 /* redacted JSON body, or NULL */
    bool has_acks;                /* Produce */
    int64_t acks;
    struct kr_audit_str txn_id;   /* TransactionalId (txn_id_val) */
    struct kr_audit_str group_id, member_id;
    bool scanned;                 /* the response was scanned, not
                                     decoded: its errors are serrs */
    bool serrs_lost;              /* an error seen could not be kept
                                     (ENOMEM): its errors are unknown */
    struct kr_errcount *serrs;    /* made at the first ErrorCode != 0 */
};

/* Distinct topics kept per line. */
#define KR_AUDIT_TOPICS_MAX 4096

/*
 * Finding a topic's entry.  A request may name a topic many times (a
 * Produce of 1,000,000 entries fits in 8 MB), so the entry is found in
 * O(1): up to KR_AUDIT_TOPICS_SCAN topics by comparing each, then through
 * an index of the kept topics: open addressing with linear probing over
 * a keyed hash (SipHash-1-3 with a key drawn once per process, so that a
 * client cannot choose names that collide), at most a quarter full.  A
 * lookup visits at most KR_AUDIT_PROBES_MAX slots, so no entry costs more
 * than that many comparisons whatever the names: a new topic that finds
 * no free slot within them is not kept (topics_truncated), which a
 * random key makes as likely as never.
 */
#define KR_AUDIT_TOPICS_SCAN 8
#define KR_AUDIT_PROBES_MAX 32

struct kr_audit_slot {
    uint32_t hash;                /* the name's hash, low 32 bits */
    uint32_t idx;                 /* topics[idx - 1]; 0: a free slot */
};

static pthread_once_t sip_once = PTHREAD_ONCE_INIT;
static uint64_t sip_key[2];

static void
sip_key_read(void)
{
    struct timespec ts;

    if (getrandom(sip_key, sizeof(sip_key), GRND_NONBLOCK) ==
        (ssize_t)sizeof(sip_key)) {
        return;
    }
    /* no entropy yet (early boot): weaker, still not the client's to
       choose */
    clock_gettime(CLOCK_REALTIME, &ts);
    sip_key[0] = (uint64_t)ts.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^
                 (uint64_t)getpid();
    sip_key[1] = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
}

static inline uint64_t
sip_rotl(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

#define KR_SIP_ROUND(v0, v1, v2, v3)                                         \
    do {                                                                     \
        v0 += v1;                                                            \
        v1 = sip_rotl(v1, 13);                                               \
        v1 ^= v0;                                                            \
        v0 = sip_rotl(v0, 32);                                               \
        v2 += v3;                                                            \
        v3 = sip_rotl(v3, 16);                                               \
        v3 ^= v2;                                                            \
        v0 += v3;                                                            \
        v3 = sip_rotl(v3, 21);                                               \
        v3 ^= v0;                                                            \
        v2 += v1;                                                            \
        v1 = sip_rotl(v1, 17);                                               \
        v1 ^= v2;                                                            \
        v2 = sip_rotl(v2, 32);                                               \
    } while (0)

/* SipHash-1-3 of p[0..len) under the process's key. */
static uint64_t
name_hash(const char *p, size_t len)
{
    const uint8_t *b = (const uint8_t *)p;
    uint64_t v0, v1, v2, v3, m;
    size_t i, k;

    pthread_once(&sip_once, sip_key_read);
    v0 = sip_key[0] ^ UINT64_C(0x736f6d6570736575);
    v1 = sip_key[1] ^ UINT64_C(0x646f72616e646f6d);
    v2 = sip_key[0] ^ UINT64_C(0x6c7967656e657261);
    v3 = sip_key[1] ^ UINT64_C(0x7465646279746573);
    for (i = 0; i + 8 <= len; i += 8) {
        for (m = 0, k = 0; k < 8; k++) {
            m |= (uint64_t)b[i + k] << (8 * k);
        }
        v3 ^= m;
        KR_SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    for (m = (uint64_t)len << 56, k = 0; i + k < len; k++) {
        m |= (uint64_t)b[i + k] << (8 * k);
    }
    v3 ^= m;
    KR_SIP_ROUND(v0, v1, v2, v3);
    v0 ^= m;
    v2 ^= 0xff;
    KR_SIP_ROUND(v0, v1, v2, v3);
    KR_SIP_ROUND(v0, v1, v2, v3);
    KR_SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* Put topics[idx - 1] (hash h) into the index's first free slot from
   its place (rebuilding: every kept topic finds one, the index being at
   most a quarter full). */
static void
index_put(struct kr_audit_slot *slots, size_t nslots, uint32_t h,
          uint32_t idx)
{
    size_t i = h & (nslots - 1);

    while (slots[i].idx != 0) {
        i = (i + 1) & (nslots - 1);
    }
    slots[i].hash = h;
    slots[i].idx = idx;
}

/* The index at nslots slots (at least 4 per kept topic), built anew;
   false on ENOMEM (r->failed). */
static bool
index_build(struct kr_audit_req *r, size_t nslots)
{
    struct kr_audit_slot *ns = calloc(nslots, sizeof(*ns));
    size_t i;

    if (ns == NULL) {
        r->failed = true;
        return false;
    }
    if (r->slots != NULL) {
        for (i = 0; i < r->nslots; i++) {
            if (r->slots[i].idx != 0) {
                index_put(ns, nslots, r->slots[i].hash, r->slots[i].idx);
            }
        }
    } else {
        for (i = 0; i < r->ntopics; i++) {
            index_put(ns, nslots,
                      (uint32_t)name_hash(r->topics[i].name,
                                          r->topics[i].len),
                      (uint32_t)i + 1);
        }
    }
    free(r->slots);
    r->slots = ns;
    r->nslots = nslots;
    return true;
}

/*
 * The entry of topic name (len bytes; longer: the name goes on past them,
 * a scanner's cut), added when new and add; NULL when absent, or not kept
 * (past the cap, r->truncated), or out of memory (r->failed).  A name
 * longer than KR_AUDIT_NAME_MAX is cut (str_cut), and its entry is that
 * of every name cut alike.  O(1) comparisons (see above).
 */
static struct kr_audit_topic *
topic_entry(struct kr_audit_req *r, const char *name, size_t len,
            bool longer, bool add)
{
    struct kr_audit_topic *t;
    size_t i, k, free_slot = SIZE_MAX;
    uint32_t h = 0;
    bool cut = longer || len > KR_AUDIT_NAME_MAX;

    if (cut) {
        len = str_cut(name, len < KR_AUDIT_NAME_MAX ? len
                                                    : KR_AUDIT_NAME_MAX);
    }
    if (r->slots == NULL) {
        for (i = 0; i < r->ntopics; i++) {
            t = &r->topics[i];
            r->probes++;
            if (t->len == len && t->cut == cut &&
                memcmp(t->name, name, len) == 0) {
                return t;
            }
        }
    } else {
        h = (uint32_t)name_hash(name, len);
        for (k = 0, i = h & (r->nslots - 1); k < KR_AUDIT_PROBES_MAX;
             k++, i = (i + 1) & (r->nslots - 1)) {
            const struct kr_audit_slot *sl = &r->slots[i];

            r->probes++;
            if (sl->idx == 0) {
                free_slot = i;
                break;
            }
            t = &r->topics[sl->idx - 1];
            if (sl->hash == h && t->len == len && t->cut == cut &&
                memcmp(t->name, name, len) == 0) {
                return t;
            }
        }
    }
    if (!add) {
        return NULL;
    }
    if (r->ntopics >= KR_AUDIT_TOPICS_MAX ||
        (r->slots != NULL && free_slot == SIZE_MAX)) {
        r->truncated = true;
        return NULL;
    }
    if (r->ntopics == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 8;
        struct kr_audit_topic *nt = realloc(r->topics, ncap * sizeof(*nt));

        if (nt == NULL) {
            r->failed = true;
            return NULL;
        }
        r->topics = nt;
        r->cap = ncap;
    }
    t = &r->topics[r->ntopics];
    t->name = malloc(len > 0 ? len : 1);
    if (t->name == NULL) {
        r->failed = true;
        return NULL;
    }
    memcpy(t->name, name, len);
    t->len = len;
    t->cut = cut;
    t->partitions = 0;
    t->records = -1;
    t->bytes = -1;
    r->ntopics++;
    if (r->slots != NULL) {
        r->slots[free_slot].hash = h;
        r->slots[free_slot].idx = (uint32_t)r->ntopics;
    }
    /* index the topics once they are many; keep it a quarter full */
    if ((r->slots == NULL && r->ntopics >= KR_AUDIT_TOPICS_SCAN) ||
        (r->slots != NULL && r->ntopics * 4 > r->nslots)) {
        if (!index_build(r, r->slots == NULL ? KR_AUDIT_TOPICS_SCAN * 8
                                             : r->nslots * 2)) {
            return NULL;
        }
        t = &r->topics[r->ntopics - 1];
    }
    return t;
}

uint64_t
kr_audit_req_probes(const struct kr_audit_req *r)
{
    return r != NULL ? r->probes : 0;
}

static bool
capture_topic(void *arg, const char *topic, size_t len, unsigned partitions)
{
    struct kr_audit_req *r = arg;
    struct kr_audit_topic *t = topic_entry(r, topic, len, false, true);

    if (t != NULL) {
        t->partitions += partitions;
    }
    return !r->failed;
}

void
kr_audit_req_free(struct kr_audit_req *r)
{
    size_t i;

    if (r == NULL) {
        return;
    }
    for (i = 0; i < r->ntopics; i++) {
        free(r->topics[i].name);
    }
    free(r->topics);
    free(r->slots);
    free(r->client_id.p);
    free(r->txn_id.p);
    free(r->group_id.p);
    free(r->member_id.p);
    free(r->serrs);
    json_decref(r->body);
    free(r);
}

/*
 * Keep a string of full bytes on the wire of which p holds n (n < full:
 * a scanner's cut, n >= KR_AUDIT_STR_MAX then) as keep_str does.  false
 * on ENOMEM.
 */
static bool
keep_bytes(const char *p, size_t n, size_t full, struct kr_audit_str *out)
{
    if (full > KR_AUDIT_STR_MAX) {
        n = str_cut(p, KR_AUDIT_STR_MAX);
        out->cut = true;
    }
    out->p = malloc(n + 1);
    if (out->p == NULL) {
        return false;
    }
    if (n > 0) {
        memcpy(out->p, p, n);
    }
    out->p[n] = '\0';
    out->len = n;
    return true;
}

/* Keep string value v (non-null, present) in *out, cut to
   KR_AUDIT_STR_MAX; false on ENOMEM. */
static bool
keep_str(const struct kr_val *v, struct kr_audit_str *out)
{
    if (v == NULL || !v->present || v->is_null || v->u.s.len < 0 ||
        (v->u.s.p == NULL && v->u.s.len > 0)) {
        return true;
    }
    return keep_bytes((const char *)v->u.s.p, (size_t)v->u.s.len,
                      (size_t)v->u.s.len, out);
}

/*
 * String field id of body n: at the top level, else in the first
 * element of a top-level array of structs (OffsetFetch v8+ Groups,
 * LeaveGroup v3+ Members).
 */
static const struct kr_val *
top_or_first(const struct kr_node *n, enum kr_field_id id)
{
    const struct kr_struct_desc *sd;
    const struct kr_val *v = kr_node_get_id(n, id);
    unsigned i;

    if (v != NULL && v->present && !v->is_null) {
        return v;
    }
    if (n == NULL || n->struct_id >= kr_nstructs) {
        return NULL;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *a = &n->vals[i];

        if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
            kr_vrange_has(f->versions, n->version) && !a->is_null &&
            a->u.arr != NULL && a->u.arr->n > 0 &&
            !a->u.arr->items[0].is_null &&
            (v = kr_node_get_id(a->u.arr->items[0].u.node, id)) != NULL &&
            v->present && !v->is_null) {
            return v;
        }
    }
    return NULL;
}

/* The name of a topic struct node tn (Name or Topic, else its TopicId
   resolved): *p, *len; false when it names none. */
static bool
topic_name(const struct kr_node *tn, const struct kr_topic_map *map,
           char *idbuf, const char **p, size_t *len)
{
    const struct kr_struct_desc *sd;
    const struct kr_val *id = NULL;
    unsigned i;

    if (tn == NULL || tn->struct_id >= kr_nstructs) {
        return false;
    }
    sd = &kr_structs[tn->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(tn, i);
        const struct kr_val *v = &tn->vals[i];

        if (!kr_vrange_has(f->versions, tn->version) || !v->present ||
            v->is_null) {
            continue;
        }
        if (f->entity == KR_E_TOPIC_NAME && f->type == KR_T_STRING &&
            v->u.s.len >= 0) {
            *p = (const char *)v->u.s.p;
            *len = (size_t)v->u.s.len;
            return *len == 0 || *p != NULL;
        }
        if (f->id == KR_FIELD_TOPIC_ID && f->type == KR_T_UUID &&
            v->u.s.len == 16 && v->u.s.p != NULL) {
            id = v;
        }
    }
    if (id != NULL) {
        static const uint8_t zero[16];
        const char *nm;

        if (memcmp(id->u.s.p, zero, 16) == 0) {
            return false;
        }
        nm = kr_topic_map_name(map, id->u.s.p);
        if (nm == NULL) {
            kr_uuid_format(id->u.s.p, idbuf);
            nm = idbuf;
        }
        *p = nm;
        *len = strlen(nm);
        return true;
    }
    return false;
}

/*
 * The request's TransactionalId, at the top level of body: Produce v3+,
 * InitProducerId, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
 * (TransactionalId) and AddPartitionsToTxn v0-3 (V3AndBelowTransactionalId;
 * v4+, which brokers send, batches transactions: none).  NULL when none.
 */
static const struct kr_val *
txn_id_val(const struct kr_node *body)
{
    const struct kr_val *v = kr_node_get_id(body, KR_FIELD_TRANSACTIONAL_ID);

    if (v != NULL && v->present && !v->is_null) {
        return v;
    }
    return kr_node_get_id(body, KR_FIELD_V3_AND_BELOW_TRANSACTIONAL_ID);
}

/* Produce: per topic the records and record bytes of its partitions. */
static void
capture_produce(struct kr_audit_req *r, const struct kr_msg *req,
                const struct kr_rbuf *payload,
                const struct kr_topic_map *map)
{
    const struct kr_val *acks = kr_node_get_id(req->body, KR_FIELD_ACKS);
    const struct kr_val *topics = kr_node_get_id(req->body,
                                                 KR_FIELD_TOPIC_DATA);
    uint32_t t, k;

    if (acks != NULL && acks->present) {
        r->has_acks = true;
        r->acks = acks->u.i;
    }
    if (topics == NULL || topics->is_null || topics->u.arr == NULL) {
        return;
    }
    for (t = 0; t < topics->u.arr->n; t++) {
        const struct kr_node *tn = topics->u.arr->items[t].u.node;
        const struct kr_val *parts;
        struct kr_audit_topic *e;
        char idbuf[24];
        const char *name;
        size_t len;

        if (topics->u.arr->items[t].is_null ||
            !topic_name(tn, map, idbuf, &name, &len) ||
            (e = topic_entry(r, name, len, false, false)) == NULL) {
            continue;
        }
        if (e->bytes < 0) {
            e->bytes = 0;
            e->records = payload != NULL ? 0 : -2;
        }
        parts = kr_node_get_id(tn, KR_FIELD_PARTITION_DATA);
        for (k = 0; parts != NULL && !parts->is_null && parts->u.arr != NULL &&
             k < parts->u.arr->n; k++) {
            const struct kr_node *pn = parts->u.arr->items[k].u.node;
            const struct kr_val *rec = kr_node_get_id(pn, KR_FIELD_RECORDS);
            uint64_t n;

            if (rec == NULL || rec->is_null || rec->u.rec.len <= 0) {
                continue;
            }
            e->bytes += rec->u.rec.len;
            if (e->records >= 0 &&
                kr_records_count(payload, rec->u.rec.off, rec->u.rec.len,
                                 &n) == KR_OK) {
                e->records += (int64_t)n;
            } else {
                e->records = -2;        /* unknown from here on */
            }
        }
    }
}

struct kr_audit_req *
kr_audit_capture(const struct kr_msg *req, const struct kr_rbuf *payload,
                 const struct kr_topic_map *map, bool with_body)
{
    struct kr_audit_req *r;
    const struct kr_val *cid;

    if (req == NULL) {
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    cid = req->header != NULL
              ? kr_node_get_id(req->header, KR_FIELD_CLIENT_ID)
              : NULL;
    if (cid != NULL && cid->present) {
        r->has_client_id = true;
        if (!keep_str(cid, &r->client_id)) {
            kr_audit_req_free(r);
            return NULL;
        }
    }
    kr_topics_each(req, map, capture_topic, r);
    if (!r->failed && req->body != NULL && req->api_key == KR_API_PRODUCE) {
        capture_produce(r, req, payload, map);
    }
    if (!r->failed && req->body != NULL &&
        (!keep_str(txn_id_val(req->body), &r->txn_id) ||
         !keep_str(top_or_first(req->body, KR_FIELD_GROUP_ID),
                   &r->group_id) ||
         !keep_str(top_or_first(req->body, KR_FIELD_MEMBER_ID),
                   &r->member_id))) {
        r->failed = true;
    }
    if (r->failed) {
        kr_audit_req_free(r);
        return NULL;
    }
    if (with_body && req->body != NULL) {
        struct kr_codec_err err;

        memset(&err, 0, sizeof(err));
        r->body = kr_json_from_node_redact(req->body, NULL,
                                           KR_JSON_RECORDS_SIZE |
                                           KR_JSON_REDACT, NULL, NULL, &err);
        if (r->body == NULL) {
            kr_audit_req_free(r);
            return NULL;
        }
    }
    return r;
}

/* ---- a Fetch response's record bytes ------------------------------------- */

/* The response was seen: every request topic returned 0 bytes so far. */
static void
rsp_seen(struct kr_audit_req *r)
{
    size_t i;

    for (i = 0; i < r->ntopics; i++) {
        if (r->topics[i].bytes < 0) {
            r->topics[i].bytes = 0;
        }
    }
}

/* The entry of a topic the response names (added when new), or NULL;
   longer: see topic_entry. */
static struct kr_audit_topic *
rsp_topic(struct kr_audit_req *r, const char *name, size_t len, bool longer)
{
    struct kr_audit_topic *t = topic_entry(r, name, len, longer, true);

    r->failed = false;              /* the line goes on without it */
    if (t != NULL && t->bytes < 0) {
        t->bytes = 0;
    }
    return t;
}

void
kr_audit_note_response(struct kr_audit_req *r, const struct kr_msg *rsp,
                       const struct kr_topic_map *map)
{
    const struct kr_val *resp;
    uint32_t t, k;

    if (r == NULL || rsp == NULL || rsp->body == NULL ||
        rsp->api_key != KR_API_FETCH) {
        return;
    }
    rsp_seen(r);
    resp = kr_node_get_id(rsp->body, KR_FIELD_RESPONSES);
    for (t = 0; resp != NULL && !resp->is_null && resp->u.arr != NULL &&
         t < resp->u.arr->n; t++) {
        const struct kr_node *tn = resp->u.arr->items[t].u.node;
        const struct kr_val *parts;
        struct kr_audit_topic *e;
        char idbuf[24];
        const char *name;
        size_t len;

        if (resp->u.arr->items[t].is_null ||
            !topic_name(tn, map, idbuf, &name, &len) ||
            (e = rsp_topic(r, name, len, false)) == NULL) {
            continue;
        }
        parts = kr_node_get_id(tn, KR_FIELD_PARTITIONS);
        for (k = 0; parts != NULL && !parts->is_null && parts->u.arr != NULL &&
             k < parts->u.arr->n; k++) {
            const struct kr_val *rec;

            if (parts->u.arr->items[k].is_null) {
                continue;
            }
            rec = kr_node_get_id(parts->u.arr->items[k].u.node,
                                 KR_FIELD_RECORDS);
            if (rec != NULL && !rec->is_null && rec->u.rec.len > 0) {
                e->bytes += rec->u.rec.len;
            }
        }
    }
}

/*
 * The topic a scanned TopicId (p, n bytes) names: its name in as->map,
 * else the id as Kafka prints it (into idbuf); NULL for no id (not 16
 * bytes, or all zero).
 */
static const char *
scan_topic_id_name(const struct kr_audit_scan *as, const uint8_t *p,
                   size_t n, char idbuf[24])
{
    static const uint8_t zero[16];
    const char *name;

    if (p == NULL || n != 16 || memcmp(p, zero, 16) == 0) {
        return NULL;
    }
    name = kr_topic_map_name(as->map, p);
    if (name == NULL) {
        kr_uuid_format(p, idbuf);
        name = idbuf;
    }
    return name;
}

void
kr_audit_scan_start(struct kr_audit_scan *as, struct kr_audit_req *r,
                    const struct kr_topic_map *map, int16_t api_key)
{
    as->req = r;
    as->map = map;
    as->cur = SIZE_MAX;
    as->errors_only = api_key != KR_API_FETCH;
    if (r == NULL) {
        return;
    }
    if (!as->errors_only) {
        rsp_seen(r);
    }
    r->scanned = true;
}

void
kr_audit_scan_event(void *arg, enum kr_scan_what what, const uint8_t *p,
                    size_t n, int64_t val)
{
    struct kr_audit_scan *as = arg;
    struct kr_audit_req *r = as->req;
    struct kr_audit_topic *t;
    char idbuf[24];
    const char *name;

    if (r == NULL || (as->errors_only && what != KR_SCAN_ERROR_CODE)) {
        return;
    }
    switch (what) {
    case KR_SCAN_TOPIC:
        as->cur = SIZE_MAX;
        if (val < 0) {
            break;                      /* a null name names nothing */
        }
        /* a name longer than the scanner keeps is cut (topic_entry) */
        t = rsp_topic(r, p != NULL ? (const char *)p : "", n,
                      val > (int64_t)n);
        as->cur = t != NULL ? (size_t)(t - r->topics) : SIZE_MAX;
        break;
    case KR_SCAN_TOPIC_ID:
        as->cur = SIZE_MAX;
        name = scan_topic_id_name(as, p, n, idbuf);
        if (name == NULL) {
            break;
        }
        t = rsp_topic(r, name, strlen(name), false);
        as->cur = t != NULL ? (size_t)(t - r->topics) : SIZE_MAX;
        break;
    case KR_SCAN_RECORDS:
        if (as->cur < r->ntopics && val > 0) {
            r->topics[as->cur].bytes += val;
        }
        break;
    case KR_SCAN_ERROR_CODE:
        if (val != 0 && r->serrs == NULL &&
            (r->serrs = calloc(1, sizeof(*r->serrs))) == NULL) {
            r->serrs_lost = true;
        }
        if (val != 0 && r->serrs != NULL) {
            err_add(r->serrs, (int16_t)val);
        }
        break;
    case KR_SCAN_ACKS:
    case KR_SCAN_TRANSACTIONAL_ID:
    case KR_SCAN_RECORD_COUNT:
        break;                          /* a request's */
    }
}

void
kr_audit_scan_abandon(struct kr_audit_scan *as)
{
    struct kr_audit_req *r = as->req;

    if (r == NULL) {
        return;
    }
    r->scanned = false;
    r->serrs_lost = false;
    free(r->serrs);
    r->serrs = NULL;
    as->req = NULL;
}

/* ---- a Produce request as it streams by --------------------------------- */

struct kr_audit_req *
kr_audit_stream_req_new(const char *client_id, size_t len, bool has_client_id)
{
    struct kr_audit_req *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    r->has_client_id = has_client_id;
    if (client_id != NULL && !keep_bytes(client_id, len, len, &r->client_id)) {
        kr_audit_req_free(r);
        return NULL;
    }
    return r;
}

void
kr_audit_produce_scan_start(struct kr_audit_scan *as, struct kr_audit_req *r,
                            const struct kr_topic_map *map)
{
    as->req = r;
    as->map = map;
    as->cur = SIZE_MAX;
}

/* A topic the request names: its entry, new ones with 0 bytes and 0
   records (capture_topic, then capture_produce, of the held path). */
static void
produce_topic(struct kr_audit_scan *as, const char *name, size_t len,
              bool longer)
{
    struct kr_audit_req *r = as->req;
    struct kr_audit_topic *t = topic_entry(r, name, len, longer, true);

    as->cur = SIZE_MAX;
    if (t == NULL) {
        return;
    }
    if (t->bytes < 0) {
        t->bytes = 0;
        t->records = 0;
    }
    as->cur = (size_t)(t - r->topics);
}

void
kr_audit_produce_scan_event(void *arg, enum kr_scan_what what,
                            const uint8_t *p, size_t n, int64_t val)
{
    struct kr_audit_scan *as = arg;
    struct kr_audit_req *r = as->req;
    struct kr_audit_topic *t;
    char idbuf[24];
    const char *name;

    if (r == NULL || r->failed) {
        return;
    }
    t = as->cur < r->ntopics ? &r->topics[as->cur] : NULL;
    switch (what) {
    case KR_SCAN_TOPIC:
        as->cur = SIZE_MAX;
        if (val >= 0) {
            produce_topic(as, p != NULL ? (const char *)p : "", n,
                          val > (int64_t)n);
        }
        break;
    case KR_SCAN_TOPIC_ID:
        as->cur = SIZE_MAX;
        name = scan_topic_id_name(as, p, n, idbuf);
        if (name != NULL) {
            produce_topic(as, name, strlen(name), false);
        }
        break;
    case KR_SCAN_RECORDS:
        /* one records field per partition entry */
        if (t != NULL) {
            t->partitions++;
            if (val > 0) {
                t->bytes += val;
            }
        }
        break;
    case KR_SCAN_RECORD_COUNT:
        if (t != NULL && t->records >= 0) {
            t->records = val >= 0 ? t->records + val
                                  : -2;     /* unknown from here on */
        }
        break;
    case KR_SCAN_ACKS:
        r->has_acks = true;
        r->acks = val;
        break;
    case KR_SCAN_TRANSACTIONAL_ID:
        if (val >= 0 && r->txn_id.p == NULL &&
            !keep_bytes(p != NULL ? (const char *)p : "", n, (size_t)val,
                        &r->txn_id)) {
            r->failed = true;
        }
        break;
    case KR_SCAN_ERROR_CODE:
        break;
    }
}

struct kr_audit_req *
kr_audit_produce_scan_end(struct kr_audit_scan *as)
{
    struct kr_audit_req *r = as->req;

    as->req = NULL;
    as->cur = SIZE_MAX;
    if (r != NULL && r->failed) {
        kr_audit_req_free(r);
        return NULL;
    }
    return r;
}

/* ---- error codes in a response ------------------------------------------ */

static void
err_walk(struct kr_errcount *ec, const struct kr_node *n, unsigned depth)
{
    const struct kr_struct_desc *sd;
    unsigned i;

    if (n == NULL || n->struct_id >= kr_nstructs || depth > 64) {
        return;
    }
    sd = &kr_structs[n->struct_id];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        const struct kr_val *v = &n->vals[i];

        if (!kr_vrange_has(f->versions, n->version) || v->is_null ||
            (f->tag >= 0 && kr_vrange_has(f->tagged, n->version) &&
             !v->present)) {
            continue;
        }
        if ((f->flags & KR_FF_ERROR_CODE) && f->type == KR_T_INT16) {
            if (v->u.i != 0) {
                err_add(ec, (int16_t)v->u.i);
            }
        } else if (f->type == KR_T_STRUCT) {
            err_walk(ec, v->u.node, depth + 1);
        } else if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
                   v->u.arr != NULL) {
            uint32_t k;

            for (k = 0; k < v->u.arr->n; k++) {
                if (!v->u.arr->items[k].is_null) {
                    err_walk(ec, v->u.arr->items[k].u.node, depth + 1);
                }
            }
        }
    }
}

static int
cmp_code(const void *a, const void *b)
{
    int16_t x = *(const int16_t *)a, y = *(const int16_t *)b;

    return (x > y) - (x < y);
}

/* {"NAME": count, ...} of ec (NULL: none), by code. */
static void
errors_put(struct kr_jsonw *w, const struct kr_errcount *ec)
{
    int16_t sorted[KR_AUDIT_ERRS_MAX];
    unsigned i, k;

    kr_jsonw_obj_open(w);
    if (ec != NULL) {
        memcpy(sorted, ec->code, ec->used * sizeof(sorted[0]));
        qsort(sorted, ec->used, sizeof(sorted[0]), cmp_code);
    }
    for (i = 0; ec != NULL && i < ec->used; i++) {
        char buf[KR_KERR_BUFLEN];

        for (k = 0; k < ec->used && ec->code[k] != sorted[i]; k++) {
        }
        /* distinct codes have distinct names: no key twice */
        kr_jsonw_key(w, kr_kerr_format(sorted[i], buf, sizeof(buf)));
        kr_jsonw_int(w, (int64_t)ec->n[k]);
    }
    kr_jsonw_obj_close(w);
}

/* The error codes of a decoded response (NULL: none); true when some
   were left out (more than KR_AUDIT_ERRS_MAX distinct). */
static bool
errors_rsp(struct kr_jsonw *w, const struct kr_msg *rsp)
{
    struct kr_errcount ec;

    ec.used = 0;
    ec.more = false;
    if (rsp != NULL) {
        err_walk(&ec, rsp->body, 0);
    }
    errors_put(w, &ec);
    return ec.more;
}

/* ---- lines -------------------------------------------------------------- */

/*
 * Lines are written in document order with kr_jsonw (no tree): each key
 * is written once, where the tables of doc/audit.md put it.  The keys of
 * the line are written by kr_jsonw_k*, set_str and set_kept, those of a
 * topic entry by tset_* (tests/tools/audit_keys.py reads these calls to
 * hold the code and doc/audit.md together: keep the key a literal).
 * Strings from the wire go through kr_jsonw_str (bytes >= 0x80 of a
 * string that is not valid UTF-8 written as '?').
 */

/* Bytes reserved up front: most lines fit (one allocation a line; a
   Produce request line of one topic is about 600 bytes).  The writer
   allocates the next power of two above it and its NUL: 1 KiB, a size
   malloc keeps per thread (tcache), so a line costs little to allocate
   and free. */
#define KR_AUDIT_LINE_GUESS 1000

/*
 * Bytes of topic entries a line holds at most: with the strings cut
 * (KR_AUDIT_NAME_MAX, KR_AUDIT_STR_MAX), a line without bodies stays
 * near 1 MiB, which the default queue (4 MiB) takes; 4096 topics of
 * Kafka's longest names (249 bytes) take 1.2 MB.
 */
#define KR_AUDIT_TOPICS_BYTES (1u << 20)

/* key: v, when v is not NULL. */
static void
set_str(struct kr_jsonw *w, const char *key, const char *v)
{
    if (v != NULL) {
        kr_jsonw_kstr(w, key, v, strlen(v));
    }
}

/* key: the kept string v, when there is one, then "<key>_truncated":
   true when it was cut (audit_keys.py knows both keys). */
static void
set_kept(struct kr_jsonw *w, const char *key, const struct kr_audit_str *v)
{
    char tkey[64];

    if (v->p == NULL) {
        return;
    }
    kr_jsonw_kstr(w, key, v->p, v->len);
    if (v->cut) {
        snprintf(tkey, sizeof(tkey), "%s_truncated", key);
        kr_jsonw_kbool(w, tkey, true);
    }
}

/* A string the session gives (p, len bytes), cut as keep_str cuts. */
static struct kr_audit_str
given_str(const char *p, size_t len)
{
    struct kr_audit_str v = { (char *)p, len, false };

    if (p != NULL && len > KR_AUDIT_STR_MAX) {
        v.len = str_cut(p, KR_AUDIT_STR_MAX);
        v.cut = true;
    }
    return v;
}

/* A topic entry's string and integer members. */
static void
tset_str(struct kr_jsonw *w, const char *key, const char *p, size_t len)
{
    kr_jsonw_kstr(w, key, p, len);
}

static void
tset_int(struct kr_jsonw *w, const char *key, int64_t v)
{
    kr_jsonw_kint(w, key, v);
}

static void
tset_bool(struct kr_jsonw *w, const char *key, bool v)
{
    kr_jsonw_kbool(w, key, v);
}

/* ---- a connection's memo of its peer keys -------------------------------- */

/* Bytes of the values a memo part compares at most (else: no memo). */
#define KR_AUDIT_MEMO_KEY 1024

/* One run of members: the values it came from (key) and its text. */
struct memo_part {
    bool valid;
    size_t klen, tlen;
    char *key, *text;
};

struct kr_audit_memo {
    struct memo_part head, tail;
};

struct kr_audit_memo *
kr_audit_memo_new(void)
{
    return calloc(1, sizeof(struct kr_audit_memo));
}

void
kr_audit_memo_free(struct kr_audit_memo *m)
{
    if (m == NULL) {
        return;
    }
    free(m->head.key);
    free(m->head.text);
    free(m->tail.key);
    free(m->tail.text);
    free(m);
}

/* Values serialised for comparison: each string as a 2-byte length
   (0xffff: NULL) and its bytes, each integer as 8 bytes. */
struct memo_key {
    size_t len;
    bool over;                  /* did not fit: no memo */
    char b[KR_AUDIT_MEMO_KEY];
};

static void
mk_str(struct memo_key *k, const char *v)
{
    size_t n = v != NULL ? strlen(v) : 0;

    if (k->over || n > 0xfffe || k->len + 2 + n > sizeof(k->b)) {
        k->over = true;
        return;
    }
    if (v == NULL) {
        n = 0xffff;
    }
    k->b[k->len++] = (char)(n >> 8);
    k->b[k->len++] = (char)(n & 0xff);
    if (v != NULL) {
        memcpy(k->b + k->len, v, n);
        k->len += n;
    }
}

static void
mk_int(struct memo_key *k, int64_t v)
{
    if (k->over || k->len + sizeof(v) > sizeof(k->b)) {
        k->over = true;
        return;
    }
    memcpy(k->b + k->len, &v, sizeof(v));
    k->len += sizeof(v);
}

/* Copy the memo's text for key k, when it is k's; true when done. */
static bool
memo_use(struct kr_jsonw *w, const struct memo_part *m,
         const struct memo_key *k)
{
    if (m == NULL || k->over || !m->valid || m->klen != k->len ||
        memcmp(m->key, k->b, k->len) != 0) {
        return false;
    }
    kr_jsonw_members_raw(w, m->text, m->tlen);
    return true;
}

/* Keep the members w got since start as m's text for key k (out of
   memory: the memo is dropped, the line is not affected). */
static void
memo_keep(struct memo_part *m, const struct memo_key *k,
          const struct kr_jsonw *w, size_t start)
{
    char *key, *text;
    size_t tlen;

    if (m == NULL || k->over) {
        return;
    }
    m->valid = false;
    if (!kr_jsonw_ok(w) || w->len < start ||
        (w->len > start && w->buf[start] != ',')) {
        return;
    }
    tlen = w->len - start;
    key = realloc(m->key, k->len > 0 ? k->len : 1);
    if (key == NULL) {
        return;
    }
    m->key = key;
    text = realloc(m->text, tlen > 0 ? tlen : 1);
    if (text == NULL) {
        return;
    }
    m->text = text;
    memcpy(m->key, k->b, k->len);
    memcpy(m->text, w->buf + start, tlen);
    m->klen = k->len;
    m->tlen = tlen;
    m->valid = true;
}

/* time, type, and who and where up to the client's address and port, the
   route and the upstream (doc/audit.md "Keys of every line"); all but
   the time from p's memo when it has them. */
static void
peer_head(struct kr_jsonw *w, int64_t time_us, const char *type,
          const struct kr_audit_peer *p)
{
    struct memo_part *m = p->memo != NULL ? &p->memo->head : NULL;
    struct memo_key k;
    char ts[40];
    size_t start;

    kr_audit_time(time_us, ts, sizeof(ts));
    kr_jsonw_kcstr(w, "time", ts);
    if (m != NULL) {
        k.len = 0;
        k.over = false;
        mk_str(&k, type);
        mk_str(&k, p->instance);
        mk_str(&k, p->conn_id);
        mk_str(&k, p->listener);
        mk_str(&k, p->client_addr);
        mk_int(&k, p->client_port);
        mk_str(&k, p->proxy_addr);
        mk_int(&k, p->proxy_port);
        mk_str(&k, p->route);
        mk_int(&k, p->node_id);
        mk_str(&k, p->upstream_addr);
        if (memo_use(w, m, &k)) {
            return;
        }
    }
    start = w->len;
    kr_jsonw_kcstr(w, "type", type);
    set_str(w, "instance", p->instance);
    set_str(w, "conn_id", p->conn_id);
    set_str(w, "listener", p->listener);
    set_str(w, "client_addr", p->client_addr);
    kr_jsonw_kint(w, "client_port", p->client_port);
    if (p->proxy_addr != NULL) {
        set_str(w, "proxy_addr", p->proxy_addr);
        kr_jsonw_kint(w, "proxy_port", p->proxy_port);
    }
    set_str(w, "route", p->route);
    if (p->route != NULL && strcmp(p->route, "node") == 0) {
        kr_jsonw_kint(w, "node_id", p->node_id);
    }
    set_str(w, "upstream_addr", p->upstream_addr);
    if (m != NULL) {
        memo_keep(m, &k, w, start);
    }
}

/* The keys after client_id: the client's software, the principal (from
   p's memo when it has them). */
static void
peer_tail(struct kr_jsonw *w, const struct kr_audit_peer *p)
{
    struct memo_part *m = p->memo != NULL ? &p->memo->tail : NULL;
    struct memo_key k;
    size_t start = w->len;

    if (m != NULL) {
        k.len = 0;
        k.over = false;
        mk_str(&k, p->client_sw_name);
        mk_str(&k, p->client_sw_version);
        mk_str(&k, p->principal);
        mk_str(&k, p->principal_state);
        if (memo_use(w, m, &k)) {
            return;
        }
    }
    if (p->client_sw_name != NULL && p->client_sw_name[0] != '\0') {
        set_str(w, "client_software_name", p->client_sw_name);
    }
    if (p->client_sw_version != NULL && p->client_sw_version[0] != '\0') {
        set_str(w, "client_software_version", p->client_sw_version);
    }
    set_str(w, "principal", p->principal);
    set_str(w, "principal_state", p->principal_state);
    if (m != NULL) {
        memo_keep(m, &k, w, start);
    }
}

/* The request's own keys after total_us: Produce, group ids. */
static void
request_facts(struct kr_jsonw *w, const struct kr_audit_req *req)
{
    if (req == NULL) {
        return;
    }
    if (req->has_acks) {
        kr_jsonw_kint(w, "acks", req->acks);
    }
    set_kept(w, "transactional_id", &req->txn_id);
    set_kept(w, "group_id", &req->group_id);
    set_kept(w, "member_id", &req->member_id);
}

/*
 * The topics' entries; false when they passed KR_AUDIT_TOPICS_BYTES of
 * the line and the rest were left out.
 */
static bool
topics_put(struct kr_jsonw *w, const struct kr_audit_req *req)
{
    size_t i, start = w->len;

    kr_jsonw_key(w, "topics");
    kr_jsonw_arr_open(w);
    for (i = 0; req != NULL && i < req->ntopics; i++) {
        const struct kr_audit_topic *t = &req->topics[i];

        if (w->len - start > KR_AUDIT_TOPICS_BYTES) {
            kr_jsonw_arr_close(w);
            return false;
        }
        kr_jsonw_obj_open(w);
        tset_str(w, "name", t->name, t->len);
        if (t->cut) {
            tset_bool(w, "name_truncated", true);
        }
        tset_int(w, "partitions", t->partitions);
        if (t->records >= 0) {
            tset_int(w, "records", t->records);
        }
        if (t->bytes >= 0) {
            tset_int(w, "record_bytes", t->bytes);
        }
        kr_jsonw_obj_close(w);
    }
    kr_jsonw_arr_close(w);
    return true;
}

/* The line of w, handed over (NULL when it failed: ENOMEM); w is freed. */
static char *
take_line(struct kr_jsonw *w)
{
    char *s = kr_jsonw_depth(w) == 0 ? kr_jsonw_take(w, NULL) : NULL;

    kr_jsonw_free(w);           /* a failed writer keeps its buffer */
    return s;
}

char *
kr_audit_format(const struct kr_audit_info *info,
                const struct kr_audit_req *req, const struct kr_msg *rsp,
                bool with_body)
{
    const struct kr_api_desc *api;
    struct kr_jsonw w;
    struct kr_audit_str cid;
    bool has_rsp, all_topics, errs_more = false;
    size_t i;

    if (info == NULL) {
        return NULL;
    }
    kr_jsonw_init(&w);
    (void)kr_jsonw_reserve(&w, KR_AUDIT_LINE_GUESS);
    kr_jsonw_obj_open(&w);
    peer_head(&w, info->time_us, "request", &info->peer);
    if (info->client_id != NULL) {
        cid = given_str(info->client_id,
                        info->client_id_len > 0 ? info->client_id_len
                                                : strlen(info->client_id));
        set_kept(&w, "client_id", &cid);
    } else if (req != NULL && req->has_client_id) {
        if (req->client_id.p != NULL) {
            set_kept(&w, "client_id", &req->client_id);
        } else {
            kr_jsonw_key(&w, "client_id");
            kr_jsonw_null(&w);
        }
    }
    peer_tail(&w, &info->peer);
    api = kr_api_get(info->api_key);
    has_rsp = rsp != NULL || info->rsp_bytes > 0;
    kr_jsonw_kcstr(&w, "api", api != NULL ? api->name : "UNKNOWN");
    kr_jsonw_kint(&w, "api_key", info->api_key);
    kr_jsonw_kint(&w, "api_version", info->api_version);
    if (info->translated) {
        kr_jsonw_kint(&w, "upstream_version", info->upstream_version);
    }
    kr_jsonw_kint(&w, "correlation_id", info->correlation_id);
    kr_jsonw_kint(&w, "request_bytes", (int64_t)info->req_bytes);
    if (has_rsp) {
        kr_jsonw_kint(&w, "response_bytes", (int64_t)info->rsp_bytes);
        if (info->actions & KR_AUDIT_FORWARDED) {
            kr_jsonw_kint(&w, "upstream_us", info->upstream_us);
        }
    }
    kr_jsonw_kint(&w, "total_us", info->total_us);
    request_facts(&w, req);
    all_topics = topics_put(&w, req);
    if ((req != NULL && req->truncated) || !all_topics) {
        kr_jsonw_kbool(&w, "topics_truncated", true);
    }
    /* a response that came but was not decoded nor scanned: its errors
       are unknown */
    kr_jsonw_key(&w, "errors");
    if (rsp == NULL && req != NULL && req->scanned && req->serrs_lost) {
        kr_jsonw_null(&w);              /* out of memory: not known */
    } else if (rsp == NULL && req != NULL && req->scanned) {
        errors_put(&w, req->serrs);
        errs_more = req->serrs != NULL && req->serrs->more;
    } else if (rsp == NULL && (info->rsp_bytes > 0 || info->incomplete)) {
        /* or no whole response reached the client */
        kr_jsonw_null(&w);
    } else {
        errs_more = errors_rsp(&w, rsp);
    }
    if (errs_more) {
        kr_jsonw_kbool(&w, "errors_truncated", true);
    }
    kr_jsonw_key(&w, "actions");
    kr_jsonw_arr_open(&w);
    for (i = 0; i < KR_ARRAY_LEN(kr_audit_actions); i++) {
        if (info->actions & (1u << i)) {
            kr_jsonw_cstr(&w, kr_audit_actions[i]);
        }
    }
    kr_jsonw_arr_close(&w);
    if (info->incomplete) {
        kr_jsonw_kbool(&w, "incomplete", true);
    }
    set_str(&w, "decode_error", info->decode_error);
    set_str(&w, "note", info->note);
    /* bodies are rare (audit_body): written from their redacted trees */
    if (with_body && req != NULL && req->body != NULL) {
        kr_jsonw_key(&w, "request_body");
        kr_jsonw_json(&w, req->body);
    }
    if (with_body && rsp != NULL && rsp->body != NULL) {
        struct kr_codec_err err;
        json_t *b;

        memset(&err, 0, sizeof(err));
        b = kr_json_from_node_redact(rsp->body, NULL,
                                     KR_JSON_RECORDS_SIZE | KR_JSON_REDACT,
                                     NULL, NULL, &err);
        if (b == NULL) {
            kr_jsonw_free(&w);
            return NULL;
        }
        kr_jsonw_key(&w, "response_body");
        kr_jsonw_json(&w, b);
        json_decref(b);
    }
    kr_jsonw_obj_close(&w);
    return take_line(&w);
}

char *
kr_audit_format_conn(const struct kr_audit_conn *c)
{
    struct kr_audit_str cid;
    struct kr_jsonw w;

    if (c == NULL || c->event == NULL) {
        return NULL;
    }
    kr_jsonw_init(&w);
    (void)kr_jsonw_reserve(&w, KR_AUDIT_LINE_GUESS);
    kr_jsonw_obj_open(&w);
    peer_head(&w, c->time_us, "connection", &c->peer);
    if (c->client_id != NULL) {
        cid = given_str(c->client_id, strlen(c->client_id));
        cid.cut = cid.cut || c->client_id_cut;
        set_kept(&w, "client_id", &cid);
    }
    peer_tail(&w, &c->peer);
    set_str(&w, "event", c->event);
    if (c->cause != NULL) {
        set_str(&w, "cause", c->cause);
        set_str(&w, "reason", c->reason);
        kr_jsonw_kint(&w, "bytes_from_client",
                      (int64_t)c->bytes_from_client);
        kr_jsonw_kint(&w, "bytes_to_client", (int64_t)c->bytes_to_client);
        kr_jsonw_kint(&w, "requests", (int64_t)c->requests);
        kr_jsonw_kint(&w, "duration_us", c->duration_us);
    }
    kr_jsonw_obj_close(&w);
    return take_line(&w);
}

char *
kr_audit_format_auth(const struct kr_audit_auth *a)
{
    struct kr_audit_str cid;
    struct kr_jsonw w;

    if (a == NULL || a->outcome == NULL) {
        return NULL;
    }
    kr_jsonw_init(&w);
    (void)kr_jsonw_reserve(&w, KR_AUDIT_LINE_GUESS);
    kr_jsonw_obj_open(&w);
    peer_head(&w, a->time_us, "authentication", &a->peer);
    if (a->client_id != NULL) {
        cid = given_str(a->client_id, strlen(a->client_id));
        cid.cut = cid.cut || a->client_id_cut;
        set_kept(&w, "client_id", &cid);
    }
    peer_tail(&w, &a->peer);
    set_str(&w, "mechanism", a->mechanism);
    set_str(&w, "outcome", a->outcome);
    if (a->error_code >= 0) {
        kr_jsonw_kint(&w, "error_code", a->error_code);
    }
    if (a->reason != NULL) {
        set_str(&w, "reason", a->reason);
    }
    kr_jsonw_kbool(&w, "reauth", a->reauth);
    kr_jsonw_kint(&w, "handshake_version", a->handshake_version);
    if (a->authenticate_version >= 0) {
        kr_jsonw_kint(&w, "authenticate_version", a->authenticate_version);
    }
    if (a->session_lifetime_ms >= 0) {
        kr_jsonw_kint(&w, "session_lifetime_ms", a->session_lifetime_ms);
    }
    kr_jsonw_obj_close(&w);
    return take_line(&w);
}

/*
 * The value of top-level key at the first `,"key":` of line: within a
 * JSON string every '"' is escaped, so that text is a key; bodies come
 * last, after the keys looked for here.  The letters (quoted) or the
 * digits that follow, at most max, into out (max + 1 bytes); their
 * count.
 */
static size_t
about_value(const char *line, const char *key, bool quoted, char *out,
            size_t max)
{
    char pat[32];
    const char *p;
    size_t n = 0;

    snprintf(pat, sizeof(pat), ",\"%s\":%s", key, quoted ? "\"" : "");
    p = strstr(line, pat);
    if (p == NULL) {
        return 0;
    }
    for (p += strlen(pat); n < max; p++) {
        char c = *p;

        if (!(quoted ? (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                     : (c >= '0' && c <= '9') || (c == '-' && n == 0))) {
            break;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return n;
}

void
kr_audit_line_about(const char *line, char *out, size_t len)
{
    char api[48], event[16], cid[16];
    size_t n;

    if (out == NULL || len == 0) {
        return;
    }
    if (line == NULL) {
        snprintf(out, len, "an audit line");
        return;
    }
    n = strlen(line);
    if (about_value(line, "api", true, api, sizeof(api) - 1) > 0) {
        if (about_value(line, "correlation_id", false, cid,
                        sizeof(cid) - 1) == 0) {
            snprintf(cid, sizeof(cid), "?");
        }
        snprintf(out, len, "the %s request line (correlation_id %s, %zu "
                 "bytes)", api, cid, n);
    } else if (about_value(line, "event", true, event,
                           sizeof(event) - 1) > 0) {
        snprintf(out, len, "the connection %s line (%zu bytes)", event, n);
    } else {
        snprintf(out, len, "an audit line (%zu bytes)", n);
    }
}
