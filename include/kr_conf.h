/*
 * kr_conf.h - krelay's configuration: an INI file read with inih.
 *
 * Loading builds a fresh struct kr_conf: parse, fill defaults, check each
 * key, then check the whole (port clashes, dangling upstream names),
 * collecting every error with file:line before failing.  A loaded config
 * is immutable; a reload builds a new one and swaps it in.
 *
 * Units: keys ending in _ms are milliseconds, _bytes are bytes.  Every key
 * is documented in conf/krelay.ini with its unit and default.
 */
#ifndef KR_CONF_H
#define KR_CONF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kr_common.h"

#define KR_CONF_MAX_DIAL 256

/* A host and port, as written ("[::1]:9092", "kafka-1:9092"). */
struct kr_hostport {
    char *host;                 /* malloc'd, no brackets */
    uint16_t port;
};

/* dial.NODEID = HOST:PORT in an [upstream] section. */
struct kr_dial_override {
    int32_t node_id;
    struct kr_hostport addr;
};

/* [upstream NAME] */
struct kr_upstream_conf {
    char *name;                         /* "" when unnamed */
    struct kr_hostport *bootstrap;      /* bootstrap_servers, >= 1 */
    int nbootstrap;
    int64_t connect_timeout_ms;         /* default 10000 */
    int64_t request_timeout_margin_ms;  /* default 30000: added to a
                                           request's own wait */
    int64_t metadata_refresh_ms;        /* default 300000 */
    struct kr_dial_override *dial;
    int ndial;
    int line;                           /* where the section starts */
};

/* [listener NAME] */
struct kr_listener_conf {
    char *name;                         /* "" when unnamed */
    struct kr_hostport listen;          /* bootstrap listener */
    char *advertised_host;              /* default: listen host, or
                                           127.0.0.1 for a wildcard */
    uint16_t broker_port_base;          /* port of NodeId n:
                                           broker_port_base + n */
    int32_t node_id_min, node_id_max;   /* default 0..15 */
    char *upstream;                     /* upstream name; NULL = the only */
    struct kr_upstream_conf *up;        /* resolved by the loader */
    int64_t max_frame_bytes;            /* default 64 MiB */
    int64_t max_inflight;               /* per connection, default 1000 */
    int64_t max_buffer_bytes;           /* per direction per conn, 4 MiB */
    int64_t max_connections;            /* per listener group, 10000 */
    int64_t idle_timeout_ms;            /* default 600000 (Kafka's
                                           connections.max.idle.ms) */
    int line;
};

/* [log] */
struct kr_log_conf {
    int level;                          /* enum kr_log_level, default notice */
    char *target;                       /* "stderr", "syslog" or a path */
};

struct kr_conf {
    char *path;                         /* file it was read from */
    struct kr_listener_conf *listeners;
    int nlisteners;
    struct kr_upstream_conf *upstreams;
    int nupstreams;
    struct kr_log_conf log;
};

/*
 * Read and check path.  On success returns KR_OK and *out (caller frees
 * with kr_conf_free).  On failure returns KR_ERROR, *out untouched, and
 * every problem is written to errs (one line each, "FILE:LINE: message";
 * errs may be NULL).  Unknown sections or keys and bad values are errors.
 * A problem with no line of its own (no [listener] at all) is reported at
 * the last line; a file that cannot be read as "FILE: message".  Lines may
 * be up to 1024 bytes.  Call from one thread at a time: it raises
 * libinih's global line limit while it parses.
 */
int kr_conf_load(const char *path, FILE *errs,
                 struct kr_conf **out) KR_MUST_CHECK;

/* Same, from a string (tests); name is used in messages. */
int kr_conf_load_string(const char *text, const char *name, FILE *errs,
                        struct kr_conf **out) KR_MUST_CHECK;

void kr_conf_free(struct kr_conf *c);

/*
 * Parse "HOST:PORT", "[V6]:PORT" into hp (host malloc'd).  Returns false
 * for a missing or bad port, or an unterminated bracket.
 */
bool kr_hostport_parse(const char *s, struct kr_hostport *hp);

/* Print the effective config (every key with its value) to f. */
void kr_conf_dump(const struct kr_conf *c, FILE *f);

#endif /* KR_CONF_H */
