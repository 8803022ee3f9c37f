/*
 * kr_log.c - the diagnostic log: one process-wide sink, one write(2) per
 * line.
 *
 * A line is formatted completely on the stack (timestamp, ident, pid,
 * level, message with control characters escaped so a peer's bytes cannot
 * forge lines) and handed to the sink in one call.  Writers hold a read
 * lock on the sink, so any number of threads log at once; open, reopen and
 * close take the write lock, so no writer ever sees a closed descriptor.
 * A reopen dup2()s the new file onto the old descriptor number.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kr_clock.h"
#include "kr_log.h"

/* Longest line written, newline included; longer messages are cut. */
#define KR_LOG_LINE_MAX 4096

enum kr_log_sink {
    KR_SINK_STDERR = 0,
    KR_SINK_SYSLOG,
    KR_SINK_FILE
};

_Atomic int kr_log_level_cur = KR_LOG_NOTICE;

static pthread_rwlock_t kr_log_lock = PTHREAD_RWLOCK_INITIALIZER;
static enum kr_log_sink kr_log_sink = KR_SINK_STDERR;
static int kr_log_fd = -1;              /* file sink only */
static char *kr_log_path;               /* file sink only, malloc'd */
static char kr_log_ident[64] = "krelay"; /* openlog keeps the pointer */

static const char *const kr_log_names[] = {
    [KR_LOG_ERROR] = "error",
    [KR_LOG_WARN] = "warn",
    [KR_LOG_NOTICE] = "notice",
    [KR_LOG_INFO] = "info",
    [KR_LOG_DEBUG] = "debug",
    [KR_LOG_TRACE] = "trace",
};

static const int kr_log_syslog_prio[] = {
    [KR_LOG_ERROR] = LOG_ERR,
    [KR_LOG_WARN] = LOG_WARNING,
    [KR_LOG_NOTICE] = LOG_NOTICE,
    [KR_LOG_INFO] = LOG_INFO,
    [KR_LOG_DEBUG] = LOG_DEBUG,
    [KR_LOG_TRACE] = LOG_DEBUG,
};

bool
kr_log_level_parse(const char *s, int *level)
{
    size_t i;

    if (s == NULL) {
        return false;
    }
    for (i = 0; i < KR_ARRAY_LEN(kr_log_names); i++) {
        if (strcasecmp(s, kr_log_names[i]) == 0) {
            if (level != NULL) {
                *level = (int)i;
            }
            return true;
        }
    }
    return false;
}

const char *
kr_log_level_name(int level)
{
    if (level < 0 || (size_t)level >= KR_ARRAY_LEN(kr_log_names)) {
        return "unknown";
    }
    return kr_log_names[level];
}

/* Close whatever sink is open and fall back to stderr.  Lock held. */
static void
kr_log_close_locked(void)
{
    if (kr_log_sink == KR_SINK_FILE && kr_log_fd >= 0) {
        close(kr_log_fd);
    } else if (kr_log_sink == KR_SINK_SYSLOG) {
        closelog();
    }
    kr_log_fd = -1;
    free(kr_log_path);
    kr_log_path = NULL;
    kr_log_sink = KR_SINK_STDERR;
}

static int
kr_log_open_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
                0640);
}

int
kr_log_open(const char *target, const char *ident)
{
    int fd = -1;
    char *path = NULL;

    if (target == NULL || *target == '\0') {
        errno = EINVAL;
        return KR_ERROR;
    }
    if (strcmp(target, "stderr") != 0 && strcmp(target, "syslog") != 0) {
        /* Open before touching the current sink: a failure keeps it. */
        path = strdup(target);
        if (path == NULL) {
            errno = ENOMEM;
            return KR_ERROR;
        }
        fd = kr_log_open_file(target);
        if (fd < 0) {
            int e = errno;

            free(path);
            errno = e;
            return KR_ERROR;
        }
    }

    pthread_rwlock_wrlock(&kr_log_lock);
    kr_log_close_locked();
    if (ident != NULL && *ident != '\0') {
        snprintf(kr_log_ident, sizeof(kr_log_ident), "%s", ident);
    }
    if (fd >= 0) {
        kr_log_sink = KR_SINK_FILE;
        kr_log_fd = fd;
        kr_log_path = path;
    } else if (strcmp(target, "syslog") == 0) {
        openlog(kr_log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
        kr_log_sink = KR_SINK_SYSLOG;
    }
    pthread_rwlock_unlock(&kr_log_lock);
    return KR_OK;
}

bool
kr_log_reopen(void)
{
    int fd, e = 0;
    bool failed = false, file;
    char path[256];

    pthread_rwlock_wrlock(&kr_log_lock);
    file = kr_log_sink == KR_SINK_FILE;
    if (file) {
        snprintf(path, sizeof(path), "%s", kr_log_path);
        fd = kr_log_open_file(kr_log_path);
        if (fd < 0) {
            e = errno;
            failed = true;
        } else {
            /* Same descriptor number: nothing else needs to know. */
            if (dup2(fd, kr_log_fd) < 0) {
                e = errno;
                failed = true;
            }
            close(fd);
        }
    }
    pthread_rwlock_unlock(&kr_log_lock);
    if (failed) {
        /* Goes to the old file, which is still open. */
        kr_log_write(KR_LOG_ERROR, "cannot reopen the log file %s: %s; "
                     "log lines keep going to the file opened before", path,
                     strerror(e));
    }
    return file;
}

const char *kr_log_syslog_path = "/dev/log";

bool
kr_log_syslog_present(void)
{
    struct stat st;
    int e = errno;
    bool ok = stat(kr_log_syslog_path, &st) == 0 && S_ISSOCK(st.st_mode);

    errno = e;
    return ok;
}

void
kr_log_close(void)
{
    pthread_rwlock_wrlock(&kr_log_lock);
    kr_log_close_locked();
    pthread_rwlock_unlock(&kr_log_lock);
}

/*
 * Copy msg into dst (room for cap bytes, no terminator needed), escaping
 * control characters as \xNN so one message stays one line.  Returns the
 * number of bytes written; a cut message ends in "...".
 */
static size_t
kr_log_escape(char *dst, size_t cap, const char *msg, bool truncated)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    const unsigned char *p;

    for (p = (const unsigned char *)msg; *p != '\0'; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            if (n + 4 > cap - 3) {
                truncated = true;
                break;
            }
            dst[n++] = '\\';
            dst[n++] = 'x';
            dst[n++] = hex[*p >> 4];
            dst[n++] = hex[*p & 0xf];
            continue;
        }
        if (n + 1 > cap - 3) {
            truncated = true;
            break;
        }
        dst[n++] = (char)*p;
    }
    if (truncated) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    return n;
}

static void kr_log_vwrite(int level, const char *fmt, va_list ap)
    KR_PRINTF(2, 0);

static void
kr_log_vwrite(int level, const char *fmt, va_list ap)
{
    char msg[KR_LOG_LINE_MAX];
    char line[KR_LOG_LINE_MAX];
    int64_t now_us;
    time_t secs;
    struct tm tm;
    size_t n;
    int r;
    bool truncated;

    if (level < KR_LOG_ERROR) {
        level = KR_LOG_ERROR;
    } else if (level > KR_LOG_TRACE) {
        level = KR_LOG_TRACE;
    }
    r = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (r < 0) {
        snprintf(msg, sizeof(msg), "(bad log format \"%s\")", fmt);
        r = 0;
    }
    truncated = (size_t)r >= sizeof(msg);

    pthread_rwlock_rdlock(&kr_log_lock);
    if (kr_log_sink == KR_SINK_SYSLOG) {
        n = kr_log_escape(line, sizeof(line) - 1, msg, truncated);
        line[n] = '\0';
        syslog(kr_log_syslog_prio[level], "%s", line);
        pthread_rwlock_unlock(&kr_log_lock);
        return;
    }

    /* 2026-11-30T12:00:00.123456Z krelay[1234]: warn: message */
    now_us = kr_clock_wall_us();
    secs = (time_t)(now_us / 1000000);
    gmtime_r(&secs, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    r = snprintf(line + n, sizeof(line) - n, ".%06ldZ %s[%ld]: %s: ",
                 (long)(now_us % 1000000), kr_log_ident, (long)getpid(),
                 kr_log_names[level]);
    if (r > 0) {
        n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
    }
    /* Keep one byte for the newline. */
    n += kr_log_escape(line + n, sizeof(line) - n - 1, msg, truncated);
    line[n++] = '\n';

    {
        int fd = kr_log_sink == KR_SINK_FILE ? kr_log_fd : STDERR_FILENO;
        size_t off = 0;

        while (off < n) {
            ssize_t w = write(fd, line + off, n - off);

            if (w < 0) {
                if (errno == EINTR) {
                    continue;
                }
                break;
            }
            off += (size_t)w;
        }
    }
    pthread_rwlock_unlock(&kr_log_lock);
}

void
kr_log_write(int level, const char *fmt, ...)
{
    va_list ap;
    int saved = errno;

    if (level > kr_log_level_cur) {
        return;
    }
    va_start(ap, fmt);
    kr_log_vwrite(level, fmt, ap);
    va_end(ap);
    errno = saved;
}

/* Call sites that suppressed lines (kr_log_rl_flush); never unlinked. */
static struct kr_ratelimit *rl_list;

static void
rl_register(struct kr_ratelimit *rl, unsigned burst, int level)
{
    struct kr_ratelimit *head;
    int zero = 0;

    if (__atomic_load_n(&rl->registered, __ATOMIC_ACQUIRE) != 0 ||
        !__atomic_compare_exchange_n(&rl->registered, &zero, 1, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return;
    }
    __atomic_store_n(&rl->burst, burst, __ATOMIC_RELAXED);
    __atomic_store_n(&rl->level, level, __ATOMIC_RELAXED);
    head = __atomic_load_n(&rl_list, __ATOMIC_ACQUIRE);
    do {
        rl->next = head;
    } while (!__atomic_compare_exchange_n(&rl_list, &head, rl, true,
                                          __ATOMIC_RELEASE,
                                          __ATOMIC_ACQUIRE));
}

unsigned
kr_log_rl_flush(void)
{
    struct kr_ratelimit *rl;
    unsigned n = 0;

    for (rl = __atomic_load_n(&rl_list, __ATOMIC_ACQUIRE); rl != NULL;
         rl = rl->next) {
        uint32_t sup;
        int level = __atomic_load_n(&rl->level, __ATOMIC_RELAXED);

        if (__atomic_load_n(&rl->suppressed, __ATOMIC_RELAXED) == 0) {
            continue;
        }
        sup = __atomic_exchange_n(&rl->suppressed, 0, __ATOMIC_RELAXED);
        if (sup == 0) {
            continue;
        }
        if (level <= kr_log_level_cur) {
            kr_log_write(level, "suppressed %u similar messages in the last "
                         "second (at most %u a second)", sup,
                         __atomic_load_n(&rl->burst, __ATOMIC_RELAXED));
            n++;
        }
    }
    return n;
}

/*
 * The window is one second from the first message after the previous
 * window ended.  The summary of a finished window is written by the first
 * call after it, just before that call's own line, unless kr_log_rl_flush
 * (a timer) wrote it first.
 * Counters are updated atomically: several threads may share a call site.
 */
void
kr_log_write_rl(struct kr_ratelimit *rl, unsigned burst, int level,
                const char *fmt, ...)
{
    va_list ap;
    int saved = errno;
    int64_t now, start;

    if (level > kr_log_level_cur) {
        return;
    }
    now = kr_clock_mono_ms();
    start = __atomic_load_n(&rl->window_start_ms, __ATOMIC_RELAXED);
    if (start == 0 || now - start >= 1000) {
        if (__atomic_compare_exchange_n(&rl->window_start_ms, &start, now,
                                        false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            uint32_t sup = __atomic_exchange_n(&rl->suppressed, 0,
                                               __ATOMIC_RELAXED);

            __atomic_store_n(&rl->count, 0, __ATOMIC_RELAXED);
            if (sup > 0) {
                /* The message itself follows: it is the same call site. */
                kr_log_write(level, "suppressed %u similar messages in the "
                             "last second (at most %u a second); the next "
                             "one:", sup, burst);
            }
        }
    }
    if (__atomic_fetch_add(&rl->count, 1, __ATOMIC_RELAXED) >= burst) {
        __atomic_fetch_add(&rl->suppressed, 1, __ATOMIC_RELAXED);
        rl_register(rl, burst, level);
        errno = saved;
        return;
    }
    va_start(ap, fmt);
    kr_log_vwrite(level, fmt, ap);
    va_end(ap);
    errno = saved;
}
