/*
 * kr_log.h - leveled diagnostic logging (not the audit log).
 *
 * One process-wide sink: stderr (default), syslog, or a file (reopened by
 * kr_log_reopen on SIGHUP/SIGUSR1).  The macros test the level before
 * formatting, so a disabled level costs one comparison.  Lines look like
 *   2026-11-30T12:00:00.123456Z krelay[1234]: warn: [c#0.42 127.0.0.1:5012
 *   > bootstrap] ...  (c#W.N: the connection, as its audit lines name it)
 * Thread-safe: each line is written with one write(2) call.
 */
#ifndef KR_LOG_H
#define KR_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kr_common.h"

/*
 * Levels, most severe first: a message is written when its level is <=
 * kr_log_level_cur.  Names "error".."trace" (kr_log_level_name); syslog
 * priorities LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG (trace
 * too).
 */
enum kr_log_level {
    KR_LOG_ERROR = 0,
    KR_LOG_WARN,
    KR_LOG_NOTICE,
    KR_LOG_INFO,
    KR_LOG_DEBUG,
    KR_LOG_TRACE
};

/*
 * Current threshold: messages above it are dropped.  Default NOTICE.
 * Atomic: the daemon sets it at reload while workers on other threads
 * read it.
 */
extern _Atomic int kr_log_level_cur;

/*
 * Set the sink.  target: "stderr", "syslog", or a file path (opened for
 * append, created 0640).  ident ("krelay" by default) prefixes each line;
 * NULL keeps the current one.  Returns KR_OK, or KR_ERROR with errno set
 * when the file cannot be opened (the previous sink stays).
 */
int kr_log_open(const char *target, const char *ident) KR_MUST_CHECK;
/*
 * Reopen a file sink (log rotation).  A failure is logged (to the file
 * opened before, which lines keep going to).  Returns true when the sink
 * is a file (reopened or not), false for stderr and syslog (nothing
 * done).
 */
bool kr_log_reopen(void);
/* Close the file or syslog sink and fall back to stderr.  Thread-safe. */
void kr_log_close(void);

/*
 * The socket syslog(3) sends to: glibc's _PATH_LOG, "/dev/log".  Only
 * kr_log_syslog_present reads it; unit tests point it elsewhere (set it
 * before any thread calls kr_log_syslog_present).  syslog(3) itself
 * always uses _PATH_LOG.
 */
extern const char *kr_log_syslog_path;

/*
 * Is kr_log_syslog_path a socket (a stat(2), following symlinks)?  When
 * it is not (no syslog daemon: most containers, minimal hosts), glibc's
 * syslog(3) drops every message without a word.  A socket nobody reads
 * (a daemon that died) still counts as present: only the daemon's own
 * socket tells, and syslog(3) hides that.  errno is preserved.
 */
bool kr_log_syslog_present(void);

/* Parse "error".."trace" into *level; false when unknown. */
bool kr_log_level_parse(const char *s, int *level);
/* "error".."trace" for a kr_log_level, "unknown" otherwise (static). */
const char *kr_log_level_name(int level);

/*
 * Format and write one line at level (dropped when above
 * kr_log_level_cur).  The message is cut at about 4 KiB (ending "...")
 * and control characters are escaped as \xNN, so it stays one line.
 * errno is preserved.  Prefer the kr_log_* macros.
 */
void kr_log_write(int level, const char *fmt, ...) KR_PRINTF(2, 3);

/*
 * Rate-limited variant for peer-triggered messages: at most `burst` lines
 * per second for the call site `rl` (a counter struct with static storage
 * duration: zero-initialised, never freed), then one "suppressed N
 * messages" line: written by the site's next call after its one-second
 * window, or by kr_log_rl_flush, whichever comes first, so a burst
 * followed by quiet is still reported.  The first time a site suppresses
 * a line it is linked into a process-wide list (lock-free) that
 * kr_log_rl_flush walks.  Thread-safe: several threads may share a site.
 */
struct kr_ratelimit {
    int64_t window_start_ms;            /* ms, start of the 1 s window */
    uint32_t count;                     /* lines written in the window */
    uint32_t suppressed;                /* lines dropped, not reported */
    /* set when first registered (kr_log_rl_flush) */
    struct kr_ratelimit *next;
    int level;
    unsigned burst;
    int registered;
};
void kr_log_write_rl(struct kr_ratelimit *rl, unsigned burst, int level,
                     const char *fmt, ...) KR_PRINTF(4, 5);

/*
 * Write the "suppressed N similar messages" line of every registered call
 * site that suppressed lines not yet reported.  Call it from a one-second
 * timer and at stop (kr_daemon does).  Thread-safe; returns the number of
 * summary lines written.
 */
unsigned kr_log_rl_flush(void);

/* Log at lvl (enum kr_log_level) with printf arguments; see above. */
#define kr_log(lvl, ...)                                                     \
    do {                                                                     \
        if ((lvl) <= kr_log_level_cur)                                       \
            kr_log_write((lvl), __VA_ARGS__);                                \
    } while (0)

#define kr_log_error(...) kr_log(KR_LOG_ERROR, __VA_ARGS__)
#define kr_log_warn(...) kr_log(KR_LOG_WARN, __VA_ARGS__)
#define kr_log_notice(...) kr_log(KR_LOG_NOTICE, __VA_ARGS__)
#define kr_log_info(...) kr_log(KR_LOG_INFO, __VA_ARGS__)
#define kr_log_debug(...) kr_log(KR_LOG_DEBUG, __VA_ARGS__)
#define kr_log_trace(...) kr_log(KR_LOG_TRACE, __VA_ARGS__)

/* Rate-limited: 10 lines per second per call site. */
#define kr_log_rl(lvl, ...)                                                  \
    do {                                                                     \
        static struct kr_ratelimit kr_rl_;                                   \
        if ((lvl) <= kr_log_level_cur)                                       \
            kr_log_write_rl(&kr_rl_, 10, (lvl), __VA_ARGS__);                \
    } while (0)

#endif /* KR_LOG_H */
