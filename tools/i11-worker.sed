# i11-worker.sed - issue 11 "process vs worker": the mechanical part of
# moving the session code from struct kr_proxy (src/kr_proxy.c, gone) to
# struct kr_worker (include/kr_worker.h) and its counters to the
# KR_STATS table (include/kr_stats.h).  Idempotent; run it on
# include/kr_session.h and every file the session code lives in:
#
#   sed -i -f tools/i11-worker.sed include/kr_session.h src/kr_session.c
#
# tools/i11-worker-tests.sed does the same for tests/unit/check_session.c.
# Rules are applied in order: the counter rules read the original
# s->p->stats.NAME text, so they come before the general s->p-> rule.

# ---- headers and types ------------------------------------------------
s/#include "kr_proxy\.h"/#include "kr_worker.h"/
s/struct kr_proxy \*p;/struct kr_worker *w;/
s/struct kr_proxy;/struct kr_worker;/
s/kr_session_new(struct kr_proxy \*p,/kr_session_new(struct kr_worker *w,/

# ---- counters: one writer, relaxed atomics (KR_STAT_*) ----------------
s/s->p->stats\.\([a-z_0-9]*\)++/KR_STAT_INC(s->w, \1)/g
s/s->p->stats\.\([a-z_0-9]*\)--/KR_STAT_DEC(s->w, \1)/g
s/s->p->stats\.\([a-z_0-9]*\) += \([^;]*\);/KR_STAT_ADD(s->w, \1, \2);/g
s/\(^\|[^a-z_0-9>.]\)p->stats\.\([a-z_0-9]*\)++/\1KR_STAT_INC(w, \2)/g
# closes by cause: vclose takes the cause, not a counter's address
/^static void vclose(struct kr_session \*s, uint64_t \*ctr, int level,$/{
N
s/^static void vclose(struct kr_session \*s, uint64_t \*ctr, int level,\n *const char \*fmt, va_list ap) KR_PRINTF(4, 0);$/static void vclose(struct kr_session *s, enum kr_close_cause cause,\n                   int level, const char *fmt, va_list ap) KR_PRINTF(4, 0);/
}
/^vclose(struct kr_session \*s, uint64_t \*ctr, int level, const char \*fmt,$/{
N
s/^vclose(struct kr_session \*s, uint64_t \*ctr, int level, const char \*fmt,\n *va_list ap)$/vclose(struct kr_session *s, enum kr_close_cause cause, int level,\n       const char *fmt, va_list ap)/
}
s/(\*ctr)++;/KR_STAT_INC_L(s->w, closes, cause);/
s/vclose(s, &s->p->stats\.close_other,/vclose(s, KR_CLOSE_OTHER,/
s/vclose(s, &s->p->stats\.counter, level, fmt, ap);\( *\)\\$/vclose(s, cause, level, fmt, ap);\1               \\/
s/^#define CLOSE_WITH(name, counter)/#define CLOSE_WITH(name, cause)  /
s/^CLOSE_WITH(\([a-z_]*\), close_\([a-z_]*\))$/CLOSE_WITH(\1, KR_CLOSE_\U\2\E)/

# ---- the worker instead of the proxy -----------------------------------
s/s->id = ++p->next_id;/s->id = kr_worker_next_id(w);/
s/s->p = p;/s->w = w;/
s/\(^\|[^a-z_0-9>.]\)p->\(base\|sessions\|cref\|scratch\|audit\|pipe_bytes\)\b/\1w->\2/g
s/s->p->/s->w->/g
s/kr_proxy_pipe_get(s->p,/kr_worker_pipe_get(s->w,/g
s/kr_proxy_pipe_put(s->p,/kr_worker_pipe_put(s->w,/g
s/kr_proxy_group_release(/kr_worker_group_release(/g
s/kr_proxy_pipe_get/kr_worker_pipe_get/g
s/kr_proxy_pipe_put/kr_worker_pipe_put/g

# ---- comments -----------------------------------------------------------
s/session's kr_proxy (one per/session's kr_worker (one per/
s/\(the\|its\) proxy's/\1 worker's/g
s/\(by\|from\) the proxy\b/\1 the worker/g
s/^\( \*  *\)proxy's config/\1worker's config/
