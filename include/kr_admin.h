/*
 * kr_admin.h - the admin endpoint: HTTP (libevent's evhttp) on a thread
 * and event_base of its own, off unless [admin] listen is set.
 *
 *   GET /metrics      Prometheus text exposition format 0.0.4: every row
 *                     of the counter table (kr_stats.h) summed over the
 *                     workers, then what the process keeps (reloads, the
 *                     config's load time, audit lines, build info:
 *                     kr_admin_prom_process)
 *   GET /healthz      200 "ok" while the admin thread runs (no token
 *                     asked)
 *   GET /readyz       200 "ready" when every worker accepts on its
 *                     listeners and has an [upstream] whose last metadata
 *                     fetch succeeded (kr_upstream_health); else 503 with
 *                     the reason on one line
 *   GET /connections  JSON, ?offset=N&limit=M (default 0 and 100, limit
 *                     at most 1000): each client connection, in worker
 *                     order, with its listener, address, ClientId,
 *                     principal, requests in flight, bytes each way, age
 *   GET /config       the effective configuration, every key in use with
 *                     its value (kr_conf_dump: secrets never shown; file
 *                     names are)
 *
 * Optional bearer token ([admin] bearer_token or bearer_token_file):
 * every path but /healthz needs "Authorization: Bearer TOKEN" (401
 * otherwise); compared in constant time (CRYPTO_memcmp of SHA-256
 * digests).  The token is the current config's: a reload changes it.
 * The listen address is the start config's: a reload that changes it is
 * logged (kr_daemon.c) and applies at the next start; so does a reload
 * that removes [admin] (the endpoint keeps running with the token it
 * started with, never without one).
 *
 * Threads: the admin thread never touches a worker's sessions or
 * upstreams.  Counters are read with relaxed loads (kr_stats.h); the
 * config, the worker list and the audit counts through kr_daemon's
 * locked getters; /connections and /readyz ask each worker's loop
 * (kr_worker_call) and wait for its answer at most KR_ADMIN_CALL_MS
 * (503 after that).
 */
#ifndef KR_ADMIN_H
#define KR_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kr_common.h"
#include "kr_conf.h"

struct kr_daemon;
struct kr_admin;

/* How long a request waits for the workers' answers, ms. */
#define KR_ADMIN_CALL_MS 2000

/*
 * Bind ac->listen and start the admin thread serving d (borrowed: it
 * must outlive kr_admin_stop; its workers are added already).  Call
 * after kr_daemon_start, on the daemon's thread.  Returns the endpoint,
 * or NULL with a message in err (the address cannot be bound, out of
 * memory).
 */
struct kr_admin *kr_admin_start(struct kr_daemon *d,
                                const struct kr_admin_conf *ac, char *err,
                                size_t errlen);

/* "HOST:PORT" the endpoint listens on (the real port); static in a. */
const char *kr_admin_addr(const struct kr_admin *a);

/*
 * Stop the admin thread (requests under way are answered or dropped),
 * join it and free a.  Any thread but the admin's; before kr_daemon_free.
 * NULL is a no-op.
 */
void kr_admin_stop(struct kr_admin *a);

/* What the process keeps, for kr_admin_prom_process. */
struct kr_admin_proc {
    const char *version;                /* build info: PACKAGE_VERSION */
    int workers;
    uint64_t reloads_ok, reloads_failed;
    int64_t conf_loaded_us;             /* wall clock µs, 0: unknown */
    int64_t conf_load_us;               /* duration µs, 0: not measured */
    int64_t started_us;                 /* wall clock µs the endpoint
                                           started */
    bool audit;                         /* an [audit] sink exists */
    uint64_t audit_written, audit_dropped;
};

/*
 * Write the process metrics of p in the Prometheus text format (HELP,
 * TYPE, samples; the "krelay_" prefix): krelay_build_info,
 * krelay_workers, krelay_reloads_total{result}, krelay_config_*,
 * krelay_start_time_seconds, krelay_audit_lines_*_total.  Returns 0, or
 * -1 when a write failed.  Pure (tests).
 */
int kr_admin_prom_process(FILE *out, const struct kr_admin_proc *p);

/*
 * Is the Authorization header value hdr (NULL: none) "Bearer TOKEN" with
 * token's value?  token NULL: no token is asked, always true.  Constant
 * time in the token's bytes.  Pure (tests).
 */
bool kr_admin_auth_ok(const char *token, const char *hdr);

#endif /* KR_ADMIN_H */
