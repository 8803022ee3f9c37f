/*
 * kr_conf.c - load krelay.ini into a fresh struct kr_conf.
 *
 * Phases (style.md 3.7): parse with inih into per-section objects, apply
 * defaults, check required keys, then check the whole (port clashes,
 * upstream references).  Every error is collected as "FILE:LINE: message";
 * the config is returned only when there was none.
 *
 * Every key lives in one table, kr_conf_keys[], with its type, offset,
 * default, range and help; the inih handler only looks keys up there.
 *
 * Debian's libinih 55 (see shared/docs/test-peers.md) passes no line
 * number to the handler, cuts long lines, and treats an indented line as
 * the continuation of the previous value.  So inih reads through our own
 * reader, which hands it one physical line at a time and counts lines (the
 * handler runs while that line is current), strips leading blanks (no line
 * is ever a continuation), replaces an over-long line with a comment after
 * reporting it, and parses section headers itself (inih's section buffer
 * is 50 bytes, and a header with no keys would never reach the handler).
 * A key line that never reaches the handler is a syntax error.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "kr_conf.h"
#include "kr_log.h"

/*
 * Debian's libinih exports its compile-time settings as variables; raise
 * the line limit when that one exists (weak: other builds lack it, and
 * then the reader enforces whatever buffer size inih passes it).
 */
extern int ini_max_line;
#pragma weak ini_max_line

/* Longest line accepted, in bytes without the newline. */
#define KR_CONF_MAX_LINE 1024
/* Largest file read. */
#define KR_CONF_MAX_FILE (4 * 1024 * 1024)
#define KR_CONF_MAX_NAME 64

enum kr_cf_sect {
    KR_CS_LISTENER = 0,
    KR_CS_UPSTREAM,
    KR_CS_LOG,
    KR_CS_NKINDS
};

static const char *const kr_cf_sect_names[KR_CS_NKINDS] = {
    [KR_CS_LISTENER] = "listener",
    [KR_CS_UPSTREAM] = "upstream",
    [KR_CS_LOG] = "log",
};

enum kr_cf_type {
    KR_CT_HOSTPORT,         /* struct kr_hostport, host may be empty */
    KR_CT_HOSTPORT_LIST,    /* struct kr_hostport * + int count at off2 */
    KR_CT_HOST,             /* char *: host name or IP address */
    KR_CT_NAME,             /* char *: a section name */
    KR_CT_STRING,           /* char *: free text, not empty */
    KR_CT_PORT,             /* uint16_t */
    KR_CT_I32,              /* int32_t */
    KR_CT_I64,              /* int64_t: counts, _ms, _bytes */
    KR_CT_BOOL,             /* bool: true or false */
    KR_CT_LEVEL,            /* int: enum kr_log_level */
    KR_CT_DIAL              /* dial.NODEID: kr_dial_override * + count */
};

#define KR_CF_REQUIRED 0x1u     /* no default: must be given */
#define KR_CF_NO_RELOAD 0x2u    /* a reload cannot change it (reserved) */

struct kr_cf_key {
    enum kr_cf_sect sect;
    const char *name;       /* "dial." is a prefix: dial.NODEID */
    enum kr_cf_type type;
    size_t off;             /* into the section's struct */
    size_t off2;            /* count field of lists */
    const char *def;        /* default as written in the file; NULL:
                               required, or computed by the loader */
    int64_t min, max;       /* integer types */
    unsigned flags;
    const char *help;
};

#define LST(f) offsetof(struct kr_listener_conf, f)
#define UPS(f) offsetof(struct kr_upstream_conf, f)
#define LOGC(f) offsetof(struct kr_log_conf, f)

static const struct kr_cf_key kr_conf_keys[] = {
    { KR_CS_LISTENER, "listen", KR_CT_HOSTPORT, LST(listen), 0, NULL,
      0, 0, KR_CF_REQUIRED | KR_CF_NO_RELOAD,
      "HOST:PORT of the bootstrap listener clients are given" },
    { KR_CS_LISTENER, "advertised_host", KR_CT_HOST, LST(advertised_host),
      0, NULL, 0, 0, 0,
      "host written into Metadata responses (default: the listen host, "
      "or 127.0.0.1 when listening on a wildcard)" },
    { KR_CS_LISTENER, "broker_port_base", KR_CT_PORT, LST(broker_port_base),
      0, NULL, 1, 65535, KR_CF_REQUIRED | KR_CF_NO_RELOAD,
      "NodeId n is reached at port broker_port_base + n" },
    { KR_CS_LISTENER, "node_id_min", KR_CT_I32, LST(node_id_min), 0, "0",
      0, 65534, KR_CF_NO_RELOAD, "lowest NodeId given a port" },
    { KR_CS_LISTENER, "node_id_max", KR_CT_I32, LST(node_id_max), 0, "15",
      0, 65534, KR_CF_NO_RELOAD, "highest NodeId given a port" },
    { KR_CS_LISTENER, "upstream", KR_CT_NAME, LST(upstream), 0, NULL,
      0, 0, 0, "name of the [upstream] behind this listener "
      "(default: the only one)" },
    { KR_CS_LISTENER, "max_frame_bytes", KR_CT_I64, LST(max_frame_bytes), 0,
      "67108864", 64, INT32_MAX, 0,
      "largest Kafka frame accepted in either direction, in bytes" },
    { KR_CS_LISTENER, "max_inflight", KR_CT_I64, LST(max_inflight), 0,
      "1000", 1, 1000000, 0,
      "requests awaiting a response, per client connection" },
    { KR_CS_LISTENER, "max_buffer_bytes", KR_CT_I64, LST(max_buffer_bytes),
      0, "4194304", 4096, INT32_MAX, 0,
      "bytes buffered per direction per connection before reading stops" },
    { KR_CS_LISTENER, "max_connections", KR_CT_I64, LST(max_connections), 0,
      "10000", 1, 1000000, 0,
      "client connections, bootstrap and broker ports together" },
    { KR_CS_LISTENER, "idle_timeout_ms", KR_CT_I64, LST(idle_timeout_ms), 0,
      "600000", 0, INT32_MAX, 0,
      "close a client connection idle this long, in ms (0: never)" },

    { KR_CS_UPSTREAM, "bootstrap_servers", KR_CT_HOSTPORT_LIST,
      UPS(bootstrap), UPS(nbootstrap), NULL, 0, 0, KR_CF_REQUIRED,
      "HOST:PORT[,HOST:PORT...] of the Kafka cluster" },
    { KR_CS_UPSTREAM, "connect_timeout_ms", KR_CT_I64,
      UPS(connect_timeout_ms), 0, "10000", 1, 3600000, 0,
      "TCP connect timeout to a broker, in ms" },
    { KR_CS_UPSTREAM, "request_timeout_margin_ms", KR_CT_I64,
      UPS(request_timeout_margin_ms), 0, "30000", 0, 3600000, 0,
      "added to a request's own wait before it is given up, in ms" },
    { KR_CS_UPSTREAM, "metadata_refresh_ms", KR_CT_I64,
      UPS(metadata_refresh_ms), 0, "300000", 1000, 86400000, 0,
      "how often cluster Metadata is refreshed, in ms" },
    { KR_CS_UPSTREAM, "dial.", KR_CT_DIAL, UPS(dial), UPS(ndial), NULL,
      0, INT32_MAX, 0,
      "dial.NODEID = HOST:PORT: connect there instead of the address "
      "the broker advertises" },

    { KR_CS_LOG, "level", KR_CT_LEVEL, LOGC(level), 0, "notice", 0, 0, 0,
      "error, warn, notice, info, debug or trace" },
    { KR_CS_LOG, "target", KR_CT_STRING, LOGC(target), 0, "stderr", 0, 0, 0,
      "stderr, syslog, or the path of a file (reopened on SIGHUP)" },
};

#define KR_CF_NKEYS KR_ARRAY_LEN(kr_conf_keys)

/* One [section] as read, before the final arrays are built. */
struct kr_cf_inst {
    enum kr_cf_sect kind;
    char *name;                 /* "" when unnamed; owned by obj */
    int line;
    bool bad;                   /* header rejected: ignore its keys */
    void *obj;                  /* listener/upstream conf; &conf->log */
    int key_line[KR_CF_NKEYS];  /* 0 unset, n set at line n, -n bad */
    int *dial_line;             /* line of each dial entry */
};

struct kr_cf_state {
    const char *file;
    FILE *errs;
    int nerr;
    struct kr_conf *conf;

    /* reader */
    const char *text;
    size_t len, pos;
    int lineno;                 /* line most recently handed to inih */
    int kv_line;                /* last key line handed to inih */
    int handled_line;           /* last line the handler ran for */

    struct kr_cf_inst *insts;
    int ninsts;
    struct kr_cf_inst *cur;     /* NULL before any section or after a
                                   bad header */
    bool cur_bad;
};

static void kr_cf_err(struct kr_cf_state *st, int line, const char *fmt, ...)
    KR_PRINTF(3, 4);

static void
kr_cf_err(struct kr_cf_state *st, int line, const char *fmt, ...)
{
    va_list ap;

    st->nerr++;
    if (st->errs == NULL) {
        return;
    }
    if (line > 0) {
        fprintf(st->errs, "%s:%d: ", st->file, line);
    } else {
        fprintf(st->errs, "%s: ", st->file);
    }
    va_start(ap, fmt);
    vfprintf(st->errs, fmt, ap);
    va_end(ap);
    fputc('\n', st->errs);
}

/* "[listener a]" or "[listener]" for messages. */
static const char *
kr_cf_inst_label(const struct kr_cf_inst *in, char *buf, size_t len)
{
    if (in->name[0] != '\0') {
        snprintf(buf, len, "[%s %s]", kr_cf_sect_names[in->kind], in->name);
    } else {
        snprintf(buf, len, "[%s]", kr_cf_sect_names[in->kind]);
    }
    return buf;
}

/* ---- values ------------------------------------------------------------- */

static bool
kr_cf_name_ok(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++, n++) {
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
            *s != '.') {
            return false;
        }
    }
    return n > 0 && n <= KR_CONF_MAX_NAME;
}

/* A DNS name or IPv4 address as written: letters, digits, - . _ */
static bool
kr_cf_hostname_ok(const char *s, size_t n)
{
    size_t i;
    bool only_num = true;
    char tmp[INET_ADDRSTRLEN];
    struct in_addr a4;

    if (n == 0 || n > 253) {
        return false;
    }
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!isalnum(c) && c != '-' && c != '.' && c != '_') {
            return false;
        }
        if (!isdigit(c) && c != '.') {
            only_num = false;
        }
    }
    if (only_num) {
        /* Looks like IPv4: must be one ("999.1.1.1" is not a name). */
        if (n >= sizeof(tmp)) {
            return false;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        return inet_pton(AF_INET, tmp, &a4) == 1;
    }
    return true;
}

/* An IPv6 literal without brackets, optionally with a %zone. */
static bool
kr_cf_ipv6_ok(const char *s, size_t n)
{
    char tmp[INET6_ADDRSTRLEN + 1];
    struct in6_addr a6;
    const char *pct = memchr(s, '%', n);
    size_t alen = pct != NULL ? (size_t)(pct - s) : n;

    if (alen == 0 || alen >= sizeof(tmp)) {
        return false;
    }
    if (pct != NULL) {
        size_t i, zlen = n - alen - 1;

        if (zlen == 0 || zlen > 32) {
            return false;
        }
        for (i = 1; i <= zlen; i++) {
            if (!isalnum((unsigned char)pct[i]) && pct[i] != '_' &&
                pct[i] != '-' && pct[i] != '.') {
                return false;
            }
        }
    }
    memcpy(tmp, s, alen);
    tmp[alen] = '\0';
    return inet_pton(AF_INET6, tmp, &a6) == 1;
}

bool
kr_hostport_parse(const char *s, struct kr_hostport *hp)
{
    const char *host, *colon, *p;
    size_t hlen;
    unsigned long port = 0;
    char *h;

    if (s == NULL || hp == NULL) {
        return false;
    }
    if (*s == '[') {
        const char *rb = strchr(s, ']');

        if (rb == NULL || rb[1] != ':') {
            return false;
        }
        host = s + 1;
        hlen = (size_t)(rb - host);
        if (!kr_cf_ipv6_ok(host, hlen)) {
            return false;
        }
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            return false;
        }
        host = s;
        hlen = (size_t)(colon - s);
        /* A second colon: an IPv6 address needs brackets. */
        if (memchr(s, ':', hlen) != NULL) {
            return false;
        }
        if (hlen > 0 && !kr_cf_hostname_ok(host, hlen)) {
            return false;
        }
    }
    p = colon + 1;
    if (*p == '\0' || strlen(p) > 5) {
        return false;
    }
    for (; *p != '\0'; p++) {
        if (!isdigit((unsigned char)*p)) {
            return false;
        }
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port < 1 || port > 65535) {
        return false;
    }
    h = strndup(host, hlen);
    if (h == NULL) {
        return false;
    }
    hp->host = h;
    hp->port = (uint16_t)port;
    return true;
}

/* Strict decimal integer: optional '-', digits, nothing else. */
static bool
kr_cf_parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (*s == '\0' || !(*s == '-' || isdigit((unsigned char)*s))) {
        return false;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s) {
        return false;
    }
    *out = v;
    return true;
}

static bool
kr_cf_is_wildcard(const char *host)
{
    return host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 ||
           strcmp(host, "::") == 0 || strcmp(host, "*") == 0;
}

static void
kr_cf_free_hostports(struct kr_hostport *hp, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free(hp[i].host);
    }
    free(hp);
}

/*
 * Parse "h:p, h:p" into a new array.  Returns the count, or -1 with a
 * message in why (static text) on failure.
 */
static int
kr_cf_parse_hostport_list(const char *v, struct kr_hostport **out,
                          const char **why)
{
    struct kr_hostport *arr = NULL;
    int n = 0;
    const char *p = v;

    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char *item;
        struct kr_hostport *na;
        bool ok;

        while (len > 0 && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)p[len - 1])) {
            len--;
        }
        if (len == 0) {
            *why = "empty entry in list";
            goto fail;
        }
        item = strndup(p, len);
        if (item == NULL) {
            *why = "out of memory";
            goto fail;
        }
        na = realloc(arr, sizeof(*arr) * (size_t)(n + 1));
        if (na == NULL) {
            free(item);
            *why = "out of memory";
            goto fail;
        }
        arr = na;
        ok = kr_hostport_parse(item, &arr[n]);
        if (ok && arr[n].host[0] == '\0') {
            free(arr[n].host);
            ok = false;
        }
        free(item);
        if (!ok) {
            *why = "expected HOST:PORT[,HOST:PORT...] (IPv6 as [ADDR]:PORT)";
            goto fail;
        }
        n++;
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    *out = arr;
    return n;
fail:
    kr_cf_free_hostports(arr, n);
    return -1;
}

/* Free whatever a key of this type holds at obj and reset it. */
static void
kr_cf_clear(const struct kr_cf_key *k, void *obj)
{
    char *base = obj;

    switch (k->type) {
    case KR_CT_HOSTPORT: {
        struct kr_hostport *hp = (void *)(base + k->off);

        free(hp->host);
        hp->host = NULL;
        break;
    }
    case KR_CT_HOSTPORT_LIST: {
        struct kr_hostport **arr = (void *)(base + k->off);
        int *n = (void *)(base + k->off2);

        kr_cf_free_hostports(*arr, *n);
        *arr = NULL;
        *n = 0;
        break;
    }
    case KR_CT_HOST:
    case KR_CT_NAME:
    case KR_CT_STRING: {
        char **s = (void *)(base + k->off);

        free(*s);
        *s = NULL;
        break;
    }
    case KR_CT_DIAL: {
        struct kr_dial_override **arr = (void *)(base + k->off);
        int *n = (void *)(base + k->off2);
        int i;

        for (i = 0; i < *n; i++) {
            free((*arr)[i].addr.host);
        }
        free(*arr);
        *arr = NULL;
        *n = 0;
        break;
    }
    default:
        break;
    }
}

/*
 * Store value v for key k into obj.  Returns NULL, or why it was refused
 * (written into buf).
 */
static const char *
kr_cf_set(const struct kr_cf_key *k, void *obj, const char *v, char *buf,
          size_t blen)
{
    char *base = obj;
    int64_t iv;

    switch (k->type) {
    case KR_CT_HOSTPORT: {
        struct kr_hostport hp;

        if (!kr_hostport_parse(v, &hp)) {
            return "expected HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)";
        }
        kr_cf_clear(k, obj);
        *(struct kr_hostport *)(void *)(base + k->off) = hp;
        return NULL;
    }
    case KR_CT_HOSTPORT_LIST: {
        struct kr_hostport *arr;
        const char *why = NULL;
        int n = kr_cf_parse_hostport_list(v, &arr, &why);

        if (n < 0) {
            return why;
        }
        kr_cf_clear(k, obj);
        *(struct kr_hostport **)(void *)(base + k->off) = arr;
        *(int *)(void *)(base + k->off2) = n;
        return NULL;
    }
    case KR_CT_HOST:
    case KR_CT_NAME:
    case KR_CT_STRING: {
        size_t n = strlen(v);
        const char *s = v;
        char *copy;

        if (k->type == KR_CT_HOST) {
            if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
                s = v + 1;
                n -= 2;
                if (!kr_cf_ipv6_ok(s, n)) {
                    return "expected a host name or IP address";
                }
            } else if (memchr(v, ':', n) != NULL ? !kr_cf_ipv6_ok(v, n)
                                                 : !kr_cf_hostname_ok(v, n)) {
                return "expected a host name or IP address";
            }
        } else if (k->type == KR_CT_NAME) {
            if (!kr_cf_name_ok(v)) {
                return "expected a name (letters, digits, - _ .)";
            }
        } else if (n == 0) {
            return "empty value";
        }
        copy = strndup(s, n);
        if (copy == NULL) {
            return "out of memory";
        }
        kr_cf_clear(k, obj);
        *(char **)(void *)(base + k->off) = copy;
        return NULL;
    }
    case KR_CT_PORT:
    case KR_CT_I32:
    case KR_CT_I64:
        if (!kr_cf_parse_int(v, &iv)) {
            return k->type == KR_CT_PORT ? "expected a port number"
                                         : "expected an integer";
        }
        if (iv < k->min || iv > k->max) {
            snprintf(buf, blen, "%" PRId64 " is out of range %" PRId64
                     "..%" PRId64, iv, k->min, k->max);
            return buf;
        }
        if (k->type == KR_CT_PORT) {
            *(uint16_t *)(void *)(base + k->off) = (uint16_t)iv;
        } else if (k->type == KR_CT_I32) {
            *(int32_t *)(void *)(base + k->off) = (int32_t)iv;
        } else {
            *(int64_t *)(void *)(base + k->off) = iv;
        }
        return NULL;
    case KR_CT_BOOL:
        if (strcmp(v, "true") == 0) {
            *(bool *)(void *)(base + k->off) = true;
        } else if (strcmp(v, "false") == 0) {
            *(bool *)(void *)(base + k->off) = false;
        } else {
            return "expected true or false";
        }
        return NULL;
    case KR_CT_LEVEL: {
        int lvl;

        if (!kr_log_level_parse(v, &lvl)) {
            return "expected error, warn, notice, info, debug or trace";
        }
        *(int *)(void *)(base + k->off) = lvl;
        return NULL;
    }
    case KR_CT_DIAL:
        break;
    }
    return "internal error: bad key type";
}

/* ---- the inih handler and reader ---------------------------------------- */

static const struct kr_cf_key *
kr_cf_find_key(enum kr_cf_sect kind, const char *name, size_t *idx)
{
    size_t i;

    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if (k->sect != kind) {
            continue;
        }
        if (k->type == KR_CT_DIAL
                ? strncmp(name, k->name, strlen(k->name)) == 0
                : strcmp(name, k->name) == 0) {
            *idx = i;
            return k;
        }
    }
    return NULL;
}

static void
kr_cf_dial(struct kr_cf_state *st, struct kr_cf_inst *in,
           const struct kr_cf_key *k, const char *name, const char *value)
{
    struct kr_upstream_conf *up = in->obj;
    int line = st->lineno;
    const char *id = name + strlen(k->name);
    int64_t node;
    struct kr_hostport hp = { NULL, 0 };
    struct kr_dial_override *nd;
    int *nl;
    int i;

    if (!kr_cf_parse_int(id, &node) || node < k->min || node > k->max) {
        kr_cf_err(st, line, "'%s': expected dial.NODEID with NodeId "
                  "0..%" PRId64, name, k->max);
        return;
    }
    for (i = 0; i < up->ndial; i++) {
        if (up->dial[i].node_id == node) {
            kr_cf_err(st, line, "'%s' given twice (first at line %d)", name,
                      in->dial_line[i]);
            return;
        }
    }
    if (up->ndial >= KR_CONF_MAX_DIAL) {
        kr_cf_err(st, line, "too many dial.NODEID keys (max %d)",
                  KR_CONF_MAX_DIAL);
        return;
    }
    if (!kr_hostport_parse(value, &hp) || hp.host[0] == '\0') {
        free(hp.host);
        kr_cf_err(st, line, "'%s': bad value '%s': expected HOST:PORT "
                  "(IPv6 as [ADDR]:PORT)", name, value);
        return;
    }
    nd = realloc(up->dial, sizeof(*nd) * (size_t)(up->ndial + 1));
    nl = nd == NULL ? NULL
                    : realloc(in->dial_line,
                              sizeof(*nl) * (size_t)(up->ndial + 1));
    if (nd != NULL) {
        up->dial = nd;
    }
    if (nl == NULL) {
        free(hp.host);
        kr_cf_err(st, line, "out of memory");
        return;
    }
    in->dial_line = nl;
    up->dial[up->ndial].node_id = (int32_t)node;
    up->dial[up->ndial].addr = hp;
    in->dial_line[up->ndial] = line;
    up->ndial++;
}

static int
kr_cf_handler(void *user, const char *section, const char *name,
              const char *value)
{
    struct kr_cf_state *st = user;
    struct kr_cf_inst *in = st->cur;
    int line = st->lineno;
    const struct kr_cf_key *k;
    size_t idx;
    char lbl[KR_CONF_MAX_NAME + 32];
    char buf[128];
    const char *why;

    (void)section;              /* we track sections ourselves */
    st->handled_line = line;
    if (in == NULL) {
        if (!st->cur_bad) {
            kr_cf_err(st, line, "key '%s' outside any section", name);
        }
        return 1;
    }
    if (in->bad) {
        return 1;               /* the header was already reported */
    }
    if (name[0] == '\0') {
        kr_cf_err(st, line, "missing key name before '='");
        return 1;
    }
    k = kr_cf_find_key(in->kind, name, &idx);
    if (k == NULL) {
        kr_cf_err(st, line, "unknown key '%s' in %s", name,
                  kr_cf_inst_label(in, lbl, sizeof(lbl)));
        return 1;
    }
    if (k->type == KR_CT_DIAL) {
        kr_cf_dial(st, in, k, name, value);
        return 1;
    }
    if (in->key_line[idx] != 0) {
        kr_cf_err(st, line, "key '%s' given twice in %s (first at line %d)",
                  name, kr_cf_inst_label(in, lbl, sizeof(lbl)),
                  abs(in->key_line[idx]));
        return 1;
    }
    why = kr_cf_set(k, in->obj, value, buf, sizeof(buf));
    if (why != NULL) {
        kr_cf_err(st, line, "'%s': bad value '%s': %s", name, value, why);
        in->key_line[idx] = -line;
        return 1;
    }
    in->key_line[idx] = line;
    return 1;
}

/* A new section header "[kind NAME]" at the current line. */
static void
kr_cf_section(struct kr_cf_state *st, const char *hdr, size_t len)
{
    int line = st->lineno;
    const char *close = memchr(hdr, ']', len);
    const char *p, *rest;
    char word[32], name[KR_CONF_MAX_NAME + 2];
    size_t wl = 0, nl = 0;
    int kind, i;
    struct kr_cf_inst *in, *ni;
    char lbl[KR_CONF_MAX_NAME + 32];

    st->cur = NULL;
    st->cur_bad = true;         /* until proven good */
    if (close == NULL) {
        kr_cf_err(st, line, "syntax error: section header without ']'");
        return;
    }
    for (rest = close + 1; rest < hdr + len; rest++) {
        if (*rest == ';' || *rest == '#') {
            break;
        }
        if (!isspace((unsigned char)*rest)) {
            kr_cf_err(st, line, "syntax error: text after ']'");
            return;
        }
    }
    p = hdr + 1;
    while (p < close && isspace((unsigned char)*p)) {
        p++;
    }
    while (p < close && !isspace((unsigned char)*p)) {
        if (wl + 1 < sizeof(word)) {
            word[wl] = *p;
        }
        wl++;
        p++;
    }
    while (p < close && isspace((unsigned char)*p)) {
        p++;
    }
    while (p < close && !isspace((unsigned char)*p)) {
        if (nl + 1 < sizeof(name)) {
            name[nl] = *p;
        }
        nl++;
        p++;
    }
    while (p < close && isspace((unsigned char)*p)) {
        p++;
    }
    word[wl < sizeof(word) ? wl : sizeof(word) - 1] = '\0';
    name[nl < sizeof(name) ? nl : sizeof(name) - 1] = '\0';
    if (p != close) {
        kr_cf_err(st, line, "syntax error: expected [KIND] or [KIND NAME]");
        return;
    }
    for (kind = 0; kind < KR_CS_NKINDS; kind++) {
        if (strcmp(word, kr_cf_sect_names[kind]) == 0) {
            break;
        }
    }
    if (wl == 0 || kind == KR_CS_NKINDS) {
        kr_cf_err(st, line, "unknown section [%.*s] (expected listener, "
                  "upstream or log)", (int)(close - hdr - 1), hdr + 1);
        return;
    }
    if (nl > 0 && (nl > KR_CONF_MAX_NAME || !kr_cf_name_ok(name))) {
        kr_cf_err(st, line, "bad section name '%s' (letters, digits, - _ ., "
                  "at most %d)", name, KR_CONF_MAX_NAME);
        return;
    }
    if (kind == KR_CS_LOG && nl > 0) {
        kr_cf_err(st, line, "[log] takes no name");
        return;
    }

    ni = realloc(st->insts, sizeof(*ni) * (size_t)(st->ninsts + 1));
    if (ni == NULL) {
        kr_cf_err(st, line, "out of memory");
        return;
    }
    st->insts = ni;
    in = &st->insts[st->ninsts];
    memset(in, 0, sizeof(*in));
    in->kind = (enum kr_cf_sect)kind;
    in->line = line;
    switch (in->kind) {
    case KR_CS_LISTENER:
        in->obj = calloc(1, sizeof(struct kr_listener_conf));
        break;
    case KR_CS_UPSTREAM:
        in->obj = calloc(1, sizeof(struct kr_upstream_conf));
        break;
    default:
        in->obj = &st->conf->log;
        break;
    }
    in->name = strdup(name);
    if (in->obj == NULL || in->name == NULL) {
        if (in->kind != KR_CS_LOG) {
            free(in->obj);
        }
        free(in->name);
        kr_cf_err(st, line, "out of memory");
        return;
    }
    if (in->kind == KR_CS_LISTENER) {
        ((struct kr_listener_conf *)in->obj)->name = in->name;
        ((struct kr_listener_conf *)in->obj)->line = line;
    } else if (in->kind == KR_CS_UPSTREAM) {
        ((struct kr_upstream_conf *)in->obj)->name = in->name;
        ((struct kr_upstream_conf *)in->obj)->line = line;
    }
    st->ninsts++;

    for (i = 0; i < st->ninsts - 1; i++) {
        if (st->insts[i].kind == in->kind &&
            strcmp(st->insts[i].name, in->name) == 0) {
            kr_cf_err(st, line, "duplicate section %s (first at line %d)",
                      kr_cf_inst_label(in, lbl, sizeof(lbl)),
                      st->insts[i].line);
            in->bad = true;
            break;
        }
    }
    st->cur = in;
    st->cur_bad = false;
}

/* The previous key line never reached the handler: inih refused it. */
static void
kr_cf_check_handled(struct kr_cf_state *st)
{
    if (st->kv_line != 0 && st->handled_line != st->kv_line) {
        if (st->cur != NULL && !st->cur->bad) {
            kr_cf_err(st, st->kv_line, "syntax error: expected "
                      "'key = value'");
        } else if (st->cur == NULL && !st->cur_bad) {
            kr_cf_err(st, st->kv_line, "syntax error: expected "
                      "'key = value' or '[section]'");
        }
    }
    st->kv_line = 0;
}

/*
 * inih's fgets-style reader: one physical line per call, leading blanks
 * and the newline (and a CR before it) removed.  size is inih's buffer.
 */
static char *
kr_cf_reader(char *str, int size, void *stream)
{
    struct kr_cf_state *st = stream;
    const char *line, *nl;
    size_t len, max, skip = 0;

    kr_cf_check_handled(st);
    if (st->pos >= st->len || size < 3) {
        return NULL;
    }
    line = st->text + st->pos;
    nl = memchr(line, '\n', st->len - st->pos);
    len = nl != NULL ? (size_t)(nl - line) : st->len - st->pos;
    st->pos += len + (nl != NULL ? 1 : 0);
    st->lineno++;
    if (len > 0 && line[len - 1] == '\r') {
        len--;
    }
    if (st->lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        skip = 3;               /* UTF-8 byte order mark */
    }
    max = (size_t)size - 2;
    if (max > KR_CONF_MAX_LINE) {
        max = KR_CONF_MAX_LINE;
    }
    if (len > max) {
        kr_cf_err(st, st->lineno, "line too long (%zu bytes, max %zu)", len,
                  max);
        strcpy(str, ";\n");
        return str;
    }
    if (memchr(line, '\0', len) != NULL) {
        kr_cf_err(st, st->lineno, "NUL byte in line");
        strcpy(str, ";\n");
        return str;
    }
    while (skip < len && isspace((unsigned char)line[skip])) {
        skip++;
    }
    line += skip;
    len -= skip;
    while (len > 0 && isspace((unsigned char)line[len - 1])) {
        len--;
    }
    memcpy(str, line, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    if (len == 0 || line[0] == ';' || line[0] == '#') {
        return str;
    }
    if (line[0] == '[') {
        kr_cf_section(st, line, len);
        return str;
    }
    st->kv_line = st->lineno;
    return str;
}

/* ---- whole-config checks ------------------------------------------------ */

static void
kr_cf_free_listener(struct kr_listener_conf *l)
{
    free(l->name);
    free(l->listen.host);
    free(l->advertised_host);
    free(l->upstream);
}

static void
kr_cf_free_upstream(struct kr_upstream_conf *u)
{
    int i;

    free(u->name);
    kr_cf_free_hostports(u->bootstrap, u->nbootstrap);
    for (i = 0; i < u->ndial; i++) {
        free(u->dial[i].addr.host);
    }
    free(u->dial);
}

static int
kr_cf_key_index(enum kr_cf_sect kind, const char *name)
{
    size_t idx;

    if (kr_cf_find_key(kind, name, &idx) == NULL) {
        return -1;
    }
    return (int)idx;
}

/* Line of key name in section in, or the section line when unset. */
static int
kr_cf_line_of(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);
    int l = i >= 0 ? abs(in->key_line[i]) : 0;

    return l != 0 ? l : in->line;
}

/* True when key name of in holds a usable value (set well, or default). */
static bool
kr_cf_key_ok(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);

    if (i < 0 || in->key_line[i] < 0) {
        return false;
    }
    return in->key_line[i] > 0 || kr_conf_keys[i].def != NULL;
}

/* True when key name of in was given with a bad value. */
static bool
kr_cf_key_line_bad(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);

    return i >= 0 && in->key_line[i] < 0;
}

/* Defaults and required keys of one section. */
static void
kr_cf_finish_inst(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    size_t i;
    char lbl[KR_CONF_MAX_NAME + 32];
    char buf[128];

    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if (k->sect != in->kind || in->key_line[i] != 0 ||
            k->type == KR_CT_DIAL) {
            continue;
        }
        if (k->flags & KR_CF_REQUIRED) {
            kr_cf_err(st, in->line, "%s: missing required key '%s'",
                      kr_cf_inst_label(in, lbl, sizeof(lbl)), k->name);
        } else if (k->def != NULL &&
                   kr_cf_set(k, in->obj, k->def, buf, sizeof(buf)) != NULL) {
            kr_cf_err(st, in->line, "internal error: default of '%s'",
                      k->name);
        }
    }
    if (in->kind == KR_CS_LISTENER) {
        struct kr_listener_conf *l = in->obj;

        if (l->advertised_host == NULL && l->listen.host != NULL) {
            l->advertised_host = strdup(kr_cf_is_wildcard(l->listen.host)
                                            ? "127.0.0.1"
                                            : l->listen.host);
            if (l->advertised_host == NULL) {
                kr_cf_err(st, in->line, "out of memory");
            }
        }
    }
}

static bool
kr_cf_hosts_clash(const char *a, const char *b)
{
    return kr_cf_is_wildcard(a) || kr_cf_is_wildcard(b) ||
           strcasecmp(a, b) == 0;
}

/* Ports of one listener, when its keys are usable. */
struct kr_cf_ports {
    bool ok;                    /* listen usable */
    bool range_ok;              /* broker range usable */
    int listen;
    int lo, hi;                 /* broker ports */
};

static struct kr_cf_ports
kr_cf_listener_ports(const struct kr_cf_inst *in)
{
    const struct kr_listener_conf *l = in->obj;
    struct kr_cf_ports p = { false, false, 0, 0, 0 };

    p.ok = kr_cf_key_ok(in, "listen") && l->listen.host != NULL;
    p.listen = l->listen.port;
    p.range_ok = kr_cf_key_ok(in, "broker_port_base") &&
                 kr_cf_key_ok(in, "node_id_min") &&
                 kr_cf_key_ok(in, "node_id_max") &&
                 l->node_id_min <= l->node_id_max &&
                 (int)l->broker_port_base + l->node_id_max <= 65535;
    p.lo = (int)l->broker_port_base + l->node_id_min;
    p.hi = (int)l->broker_port_base + l->node_id_max;
    return p;
}

static void
kr_cf_check_listener(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    struct kr_listener_conf *l = in->obj;
    struct kr_cf_ports p;
    char lbl[KR_CONF_MAX_NAME + 32];

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (kr_cf_key_ok(in, "node_id_min") && kr_cf_key_ok(in, "node_id_max") &&
        l->node_id_min > l->node_id_max) {
        kr_cf_err(st, kr_cf_line_of(in, "node_id_max"),
                  "%s: node_id_min %" PRId32 " > node_id_max %" PRId32, lbl,
                  l->node_id_min, l->node_id_max);
    }
    if (kr_cf_key_ok(in, "broker_port_base") &&
        kr_cf_key_ok(in, "node_id_max") &&
        (int)l->broker_port_base + l->node_id_max > 65535) {
        kr_cf_err(st, kr_cf_line_of(in, "broker_port_base"),
                  "%s: broker_port_base %u + node_id_max %" PRId32
                  " = %d is above 65535", lbl, (unsigned)l->broker_port_base,
                  l->node_id_max, (int)l->broker_port_base + l->node_id_max);
    }
    p = kr_cf_listener_ports(in);
    if (p.ok && p.range_ok && p.listen >= p.lo && p.listen <= p.hi) {
        kr_cf_err(st, kr_cf_line_of(in, "listen"),
                  "%s: listen port %d is also the port of NodeId %d "
                  "(broker ports %d-%d)", lbl, p.listen,
                  p.listen - (int)l->broker_port_base, p.lo, p.hi);
    }
}

static void
kr_cf_check_pair(struct kr_cf_state *st, struct kr_cf_inst *a,
                 struct kr_cf_inst *b)
{
    const struct kr_listener_conf *la = a->obj, *lb = b->obj;
    struct kr_cf_ports pa = kr_cf_listener_ports(a);
    struct kr_cf_ports pb = kr_cf_listener_ports(b);
    char la_lbl[KR_CONF_MAX_NAME + 32], lb_lbl[KR_CONF_MAX_NAME + 32];

    if (!pa.ok || !pb.ok ||
        !kr_cf_hosts_clash(la->listen.host, lb->listen.host)) {
        return;
    }
    kr_cf_inst_label(a, la_lbl, sizeof(la_lbl));
    kr_cf_inst_label(b, lb_lbl, sizeof(lb_lbl));
    if (pa.listen == pb.listen) {
        kr_cf_err(st, kr_cf_line_of(b, "listen"),
                  "%s: listen port %d is already used by %s (line %d)",
                  lb_lbl, pb.listen, la_lbl, kr_cf_line_of(a, "listen"));
    }
    if (pa.range_ok && pb.listen >= pa.lo && pb.listen <= pa.hi) {
        kr_cf_err(st, kr_cf_line_of(b, "listen"),
                  "%s: listen port %d is a broker port of %s (%d-%d)",
                  lb_lbl, pb.listen, la_lbl, pa.lo, pa.hi);
    }
    if (pb.range_ok && pa.listen >= pb.lo && pa.listen <= pb.hi) {
        kr_cf_err(st, kr_cf_line_of(b, "broker_port_base"),
                  "%s: broker ports %d-%d include the listen port %d of %s",
                  lb_lbl, pb.lo, pb.hi, pa.listen, la_lbl);
    }
    if (pa.range_ok && pb.range_ok && pa.lo <= pb.hi && pb.lo <= pa.hi) {
        kr_cf_err(st, kr_cf_line_of(b, "broker_port_base"),
                  "%s: broker ports %d-%d overlap those of %s (%d-%d)",
                  lb_lbl, pb.lo, pb.hi, la_lbl, pa.lo, pa.hi);
    }
}

static void
kr_cf_check_all(struct kr_cf_state *st)
{
    int i, j, nl = 0, nu = 0;
    int eof_line = st->lineno > 0 ? st->lineno : 1;
    char lbl[KR_CONF_MAX_NAME + 32];

    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];

        if (in->bad) {
            continue;
        }
        nl += in->kind == KR_CS_LISTENER;
        nu += in->kind == KR_CS_UPSTREAM;
        kr_cf_finish_inst(st, in);
    }
    if (nl == 0) {
        kr_cf_err(st, eof_line, "no [listener] section");
    }
    if (nu == 0) {
        kr_cf_err(st, eof_line, "no [upstream] section");
    }
    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];
        int count = in->kind == KR_CS_LISTENER ? nl : nu;

        if (in->bad || in->kind == KR_CS_LOG) {
            continue;
        }
        if (count > 1 && in->name[0] == '\0') {
            kr_cf_err(st, in->line, "there are %d [%s] sections: each needs "
                      "a name, as in [%s NAME]", count,
                      kr_cf_sect_names[in->kind],
                      kr_cf_sect_names[in->kind]);
        }
    }
    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];
        struct kr_listener_conf *l = in->obj;

        if (in->bad || in->kind != KR_CS_LISTENER) {
            continue;
        }
        kr_cf_inst_label(in, lbl, sizeof(lbl));
        kr_cf_check_listener(st, in);
        if (l->upstream != NULL) {
            bool found = false;

            for (j = 0; j < st->ninsts; j++) {
                found = !st->insts[j].bad &&
                        st->insts[j].kind == KR_CS_UPSTREAM &&
                        strcmp(st->insts[j].name, l->upstream) == 0;
                if (found) {
                    break;
                }
            }
            if (!found) {
                kr_cf_err(st, kr_cf_line_of(in, "upstream"),
                          "%s: no [upstream %s] section", lbl, l->upstream);
            }
        } else if (nu > 1 && !kr_cf_key_line_bad(in, "upstream")) {
            kr_cf_err(st, in->line, "%s: there are %d [upstream] sections: "
                      "say which one with upstream = NAME", lbl, nu);
        }
        for (j = 0; j < i; j++) {
            if (!st->insts[j].bad && st->insts[j].kind == KR_CS_LISTENER) {
                kr_cf_check_pair(st, &st->insts[j], in);
            }
        }
    }
}

/* ---- building, loading, freeing ----------------------------------------- */

/*
 * Move the parsed sections into conf's arrays (even after errors, so one
 * kr_conf_free releases everything) and resolve listener -> upstream.
 */
static void
kr_cf_build(struct kr_cf_state *st)
{
    struct kr_conf *c = st->conf;
    int i, j, nl = 0, nu = 0;

    for (i = 0; i < st->ninsts; i++) {
        if (!st->insts[i].bad) {
            nl += st->insts[i].kind == KR_CS_LISTENER;
            nu += st->insts[i].kind == KR_CS_UPSTREAM;
        }
    }
    c->listeners = nl > 0 ? calloc((size_t)nl, sizeof(*c->listeners)) : NULL;
    c->upstreams = nu > 0 ? calloc((size_t)nu, sizeof(*c->upstreams)) : NULL;
    if ((nl > 0 && c->listeners == NULL) ||
        (nu > 0 && c->upstreams == NULL)) {
        kr_cf_err(st, 0, "out of memory");
    }
    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];

        if (in->kind == KR_CS_LOG) {
            free(in->name);
        } else if (in->kind == KR_CS_LISTENER) {
            if (!in->bad && c->listeners != NULL) {
                c->listeners[c->nlisteners++] =
                    *(struct kr_listener_conf *)in->obj;
            } else {
                kr_cf_free_listener(in->obj);
            }
            free(in->obj);
        } else {
            if (!in->bad && c->upstreams != NULL) {
                c->upstreams[c->nupstreams++] =
                    *(struct kr_upstream_conf *)in->obj;
            } else {
                kr_cf_free_upstream(in->obj);
            }
            free(in->obj);
        }
        free(in->dial_line);
    }
    free(st->insts);
    st->insts = NULL;
    st->ninsts = 0;

    for (i = 0; i < c->nlisteners; i++) {
        struct kr_listener_conf *l = &c->listeners[i];

        for (j = 0; j < c->nupstreams; j++) {
            if (l->upstream != NULL
                    ? strcmp(l->upstream, c->upstreams[j].name) == 0
                    : c->nupstreams == 1) {
                l->up = &c->upstreams[j];
                break;
            }
        }
    }
}

static int
kr_cf_load_buf(const char *text, size_t len, const char *name, FILE *errs,
               struct kr_conf **out)
{
    struct kr_cf_state st;
    struct kr_conf *c;
    int rc, saved_max = 0;
    bool have_max = &ini_max_line != NULL;
    char buf[128];
    size_t i;

    memset(&st, 0, sizeof(st));
    st.file = name != NULL ? name : "(config)";
    st.errs = errs;
    st.text = text;
    st.len = len;
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->path = strdup(st.file)) == NULL) {
        free(c);
        kr_cf_err(&st, 0, "out of memory");
        return KR_ERROR;
    }
    st.conf = c;
    /* [log] may be absent: its defaults apply anyway. */
    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if (k->sect == KR_CS_LOG &&
            kr_cf_set(k, &c->log, k->def, buf, sizeof(buf)) != NULL) {
            kr_cf_err(&st, 0, "internal error: default of '%s'", k->name);
        }
    }

    if (have_max) {
        saved_max = ini_max_line;
        if (saved_max < KR_CONF_MAX_LINE + 2) {
            ini_max_line = KR_CONF_MAX_LINE + 2;
        }
    }
    rc = ini_parse_stream(kr_cf_reader, &st, kr_cf_handler, &st);
    if (have_max) {
        ini_max_line = saved_max;
    }
    kr_cf_check_handled(&st);
    if (rc == -2) {
        kr_cf_err(&st, 0, "out of memory");
    } else if (rc > 0 && st.nerr == 0) {
        /* inih refused something our reader let through. */
        kr_cf_err(&st, rc, "syntax error");
    }

    kr_cf_check_all(&st);
    kr_cf_build(&st);
    if (st.nerr > 0) {
        kr_conf_free(c);
        return KR_ERROR;
    }
    *out = c;
    return KR_OK;
}

int
kr_conf_load_string(const char *text, const char *name, FILE *errs,
                    struct kr_conf **out)
{
    if (text == NULL || out == NULL) {
        return KR_ERROR;
    }
    return kr_cf_load_buf(text, strlen(text), name, errs, out);
}

int
kr_conf_load(const char *path, FILE *errs, struct kr_conf **out)
{
    FILE *f;
    char *text;
    size_t len = 0, n;
    int rc, e;

    if (path == NULL || out == NULL) {
        return KR_ERROR;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        e = errno;
        if (errs != NULL) {
            fprintf(errs, "%s: cannot open: %s\n", path, strerror(e));
        }
        return KR_ERROR;
    }
    text = malloc(KR_CONF_MAX_FILE + 1);
    if (text == NULL) {
        fclose(f);
        if (errs != NULL) {
            fprintf(errs, "%s: out of memory\n", path);
        }
        return KR_ERROR;
    }
    while ((n = fread(text + len, 1, KR_CONF_MAX_FILE + 1 - len, f)) > 0) {
        len += n;
        if (len > KR_CONF_MAX_FILE) {
            break;
        }
    }
    e = ferror(f) ? errno : 0;
    fclose(f);
    if (e != 0 || len > KR_CONF_MAX_FILE) {
        if (errs != NULL) {
            if (e != 0) {
                fprintf(errs, "%s: cannot read: %s\n", path, strerror(e));
            } else {
                fprintf(errs, "%s: file too large (max %d bytes)\n", path,
                        KR_CONF_MAX_FILE);
            }
        }
        free(text);
        return KR_ERROR;
    }
    rc = kr_cf_load_buf(text, len, path, errs, out);
    free(text);
    return rc;
}

void
kr_conf_free(struct kr_conf *c)
{
    int i;

    if (c == NULL) {
        return;
    }
    for (i = 0; i < c->nlisteners; i++) {
        kr_cf_free_listener(&c->listeners[i]);
    }
    free(c->listeners);
    for (i = 0; i < c->nupstreams; i++) {
        kr_cf_free_upstream(&c->upstreams[i]);
    }
    free(c->upstreams);
    free(c->log.target);
    free(c->path);
    free(c);
}

/* ---- dump --------------------------------------------------------------- */

static void
kr_cf_print_hostport(FILE *f, const struct kr_hostport *hp)
{
    if (strchr(hp->host, ':') != NULL) {
        fprintf(f, "[%s]:%u", hp->host, (unsigned)hp->port);
    } else {
        fprintf(f, "%s:%u", hp->host, (unsigned)hp->port);
    }
}

static void
kr_cf_dump_section(FILE *f, enum kr_cf_sect kind, const char *name,
                   const void *obj)
{
    const char *base = obj;
    size_t i;
    int j;

    if (name != NULL && name[0] != '\0') {
        fprintf(f, "[%s %s]\n", kr_cf_sect_names[kind], name);
    } else {
        fprintf(f, "[%s]\n", kr_cf_sect_names[kind]);
    }
    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];
        const void *p = base + k->off;

        if (k->sect != kind) {
            continue;
        }
        switch (k->type) {
        case KR_CT_HOSTPORT:
            if (((const struct kr_hostport *)p)->host == NULL) {
                continue;
            }
            fprintf(f, "%s = ", k->name);
            kr_cf_print_hostport(f, p);
            break;
        case KR_CT_HOSTPORT_LIST: {
            const struct kr_hostport *arr =
                *(struct kr_hostport *const *)p;
            int n = *(const int *)(const void *)(base + k->off2);

            fprintf(f, "%s = ", k->name);
            for (j = 0; j < n; j++) {
                if (j > 0) {
                    fputc(',', f);
                }
                kr_cf_print_hostport(f, &arr[j]);
            }
            break;
        }
        case KR_CT_HOST: {
            const char *s = *(char *const *)p;

            if (s == NULL) {
                continue;
            }
            fprintf(f, strchr(s, ':') != NULL ? "%s = [%s]" : "%s = %s",
                    k->name, s);
            break;
        }
        case KR_CT_NAME:
        case KR_CT_STRING: {
            const char *s = *(char *const *)p;

            if (s == NULL) {
                continue;
            }
            fprintf(f, "%s = %s", k->name, s);
            break;
        }
        case KR_CT_PORT:
            fprintf(f, "%s = %u", k->name, (unsigned)*(const uint16_t *)p);
            break;
        case KR_CT_I32:
            fprintf(f, "%s = %" PRId32, k->name, *(const int32_t *)p);
            break;
        case KR_CT_I64:
            fprintf(f, "%s = %" PRId64, k->name, *(const int64_t *)p);
            break;
        case KR_CT_BOOL:
            fprintf(f, "%s = %s", k->name,
                    *(const bool *)p ? "true" : "false");
            break;
        case KR_CT_LEVEL:
            fprintf(f, "%s = %s", k->name,
                    kr_log_level_name(*(const int *)p));
            break;
        case KR_CT_DIAL: {
            const struct kr_dial_override *d =
                *(struct kr_dial_override *const *)p;
            int n = *(const int *)(const void *)(base + k->off2);

            for (j = 0; j < n; j++) {
                fprintf(f, "dial.%" PRId32 " = ", d[j].node_id);
                kr_cf_print_hostport(f, &d[j].addr);
                fputc('\n', f);
            }
            continue;
        }
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

void
kr_conf_dump(const struct kr_conf *c, FILE *f)
{
    int i;

    if (c == NULL || f == NULL) {
        return;
    }
    fprintf(f, "; effective configuration from %s\n\n", c->path);
    for (i = 0; i < c->nupstreams; i++) {
        kr_cf_dump_section(f, KR_CS_UPSTREAM, c->upstreams[i].name,
                           &c->upstreams[i]);
    }
    for (i = 0; i < c->nlisteners; i++) {
        const struct kr_listener_conf *l = &c->listeners[i];

        /* Name the upstream even when it was implied. */
        if (l->upstream == NULL && l->up != NULL && l->up->name[0] != '\0') {
            struct kr_listener_conf tmp = *l;

            tmp.upstream = l->up->name;
            kr_cf_dump_section(f, KR_CS_LISTENER, l->name, &tmp);
        } else {
            kr_cf_dump_section(f, KR_CS_LISTENER, l->name, l);
        }
    }
    kr_cf_dump_section(f, KR_CS_LOG, NULL, &c->log);
}
