/*
 * kr_sni.c - SNI routing names (kr_sni.h): a pattern with one $(node_id)
 * split into a prefix and a suffix, names matched against them.
 *
 * A name matches the pattern when it starts with the prefix and ends
 * with the suffix (ASCII case ignored) and what lies between is a NodeId
 * in its one written form (decimal, no sign, no leading zero).  The
 * digits' span is fixed by the lengths, so no backtracking is needed,
 * and since no digit may touch $(node_id) in the pattern, a name never
 * reads as two NodeIds.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kr_sni.h"

/* A NodeId has at most this many digits (INT32_MAX). */
#define KR_SNI_DIGITS_MAX 10
/* Longest DNS label. */
#define KR_SNI_LABEL_MAX 63

static bool
host_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.';
}

bool
kr_sni_host_ok(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name), i, start = 0;

    if (n == 0) {
        snprintf(err, errlen, "an empty name");
        return false;
    }
    if (n > KR_SNI_NAME_MAX) {
        snprintf(err, errlen, "%zu characters: a host name has at most %d",
                 n, KR_SNI_NAME_MAX);
        return false;
    }
    for (i = 0; i <= n; i++) {
        unsigned char c = (unsigned char)name[i];

        if (i < n && !host_char(c)) {
            if (isprint(c)) {
                snprintf(err, errlen, "'%c' at offset %zu: a host name has "
                         "letters, digits, '-' and '.' only", c, i);
            } else {
                snprintf(err, errlen, "byte 0x%02x at offset %zu: a host "
                         "name has letters, digits, '-' and '.' only", c, i);
            }
            return false;
        }
        if (i < n && c != '.') {
            continue;
        }
        /* a label ends at i */
        if (i == start) {
            snprintf(err, errlen, "an empty label at offset %zu (%s)", i,
                     i == n ? "a final '.'" : "'.' at its start or \"..\"");
            return false;
        }
        if (i - start > KR_SNI_LABEL_MAX) {
            snprintf(err, errlen, "the label at offset %zu has %zu "
                     "characters: at most %d", start, i - start,
                     KR_SNI_LABEL_MAX);
            return false;
        }
        if (name[start] == '-' || name[i - 1] == '-') {
            snprintf(err, errlen, "the label at offset %zu %s with '-'",
                     start, name[start] == '-' ? "starts" : "ends");
            return false;
        }
        start = i + 1;
    }
    return true;
}

static char *
lower_dup(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    size_t i;

    if (s == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        s[i] = (char)tolower((unsigned char)p[i]);
    }
    s[n] = '\0';
    return s;
}

void
kr_sni_free(struct kr_sni *m)
{
    if (m == NULL) {
        return;
    }
    free(m->prefix);
    free(m->suffix);
    free(m->bootstrap);
    free(m);
}

/*
 * Does name (len bytes) have the pattern's form?  Then *val gets its
 * NodeId, or -1 when the digits are above INT32_MAX.
 */
static bool
match_form(const struct kr_sni *m, const char *name, size_t len,
           int32_t *val)
{
    size_t nd, i;
    const char *d;
    int64_t v = 0;

    if (len <= m->prefix_len + m->suffix_len) {
        return false;
    }
    nd = len - m->prefix_len - m->suffix_len;
    d = name + m->prefix_len;
    if (strncasecmp(name, m->prefix, m->prefix_len) != 0 ||
        strncasecmp(d + nd, m->suffix, m->suffix_len) != 0 ||
        (d[0] == '0' && nd > 1)) {
        return false;
    }
    for (i = 0; i < nd; i++) {
        if (d[i] < '0' || d[i] > '9') {
            return false;
        }
        if (v <= INT32_MAX) {
            v = v * 10 + (d[i] - '0');
        }
    }
    *val = v > INT32_MAX ? -1 : (int32_t)v;
    return true;
}

struct kr_sni *
kr_sni_new(const char *pattern, const char *bootstrap, int32_t min,
           int32_t max, char *err, size_t errlen)
{
    const char *ph = strstr(pattern, KR_SNI_PLACEHOLDER);
    size_t phl = strlen(KR_SNI_PLACEHOLDER), plen = strlen(pattern);
    char name[KR_SNI_NAME_MAX + 2 * KR_SNI_DIGITS_MAX + 16];
    char why[160];
    struct kr_sni *m;
    int32_t v;

    if (ph == NULL) {
        snprintf(err, errlen, "no %s in it: each broker needs a name of "
                 "its own, as in broker-%s.kafka.example.com",
                 KR_SNI_PLACEHOLDER, KR_SNI_PLACEHOLDER);
        return NULL;
    }
    if (strstr(ph + phl, KR_SNI_PLACEHOLDER) != NULL) {
        snprintf(err, errlen, "%s twice: it goes in once",
                 KR_SNI_PLACEHOLDER);
        return NULL;
    }
    if ((ph > pattern && isdigit((unsigned char)ph[-1])) ||
        isdigit((unsigned char)ph[phl])) {
        snprintf(err, errlen, "a digit next to %s: the NodeId's digits "
                 "would run into it (put a '-' or a letter between)",
                 KR_SNI_PLACEHOLDER);
        return NULL;
    }
    if (min < 0 || min > max) {
        snprintf(err, errlen, "NodeIds %d..%d: no range", (int)min,
                 (int)max);
        return NULL;
    }
    /* the longest name: max's digits */
    if (plen - phl + KR_SNI_DIGITS_MAX >= sizeof(name)) {
        snprintf(err, errlen, "%zu characters: a host name has at most %d",
                 plen, KR_SNI_NAME_MAX);
        return NULL;
    }
    snprintf(name, sizeof(name), "%.*s%d%s", (int)(ph - pattern), pattern,
             (int)max, ph + phl);
    if (!kr_sni_host_ok(name, why, sizeof(why))) {
        snprintf(err, errlen, "NodeId %d's name would be no host name: "
                 "%s", (int)max, why);
        return NULL;
    }
    if (bootstrap != NULL && !kr_sni_host_ok(bootstrap, why, sizeof(why))) {
        snprintf(err, errlen, "the bootstrap name %s is not a host name: %s",
                 bootstrap, why);
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->prefix_len = (size_t)(ph - pattern);
    m->suffix_len = plen - m->prefix_len - phl;
    m->prefix = lower_dup(pattern, m->prefix_len);
    m->suffix = lower_dup(ph + phl, m->suffix_len);
    m->bootstrap = bootstrap != NULL ? lower_dup(bootstrap, strlen(bootstrap))
                                     : NULL;
    m->node_id_min = min;
    m->node_id_max = max;
    if (m->prefix == NULL || m->suffix == NULL ||
        (bootstrap != NULL && m->bootstrap == NULL)) {
        kr_sni_free(m);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (m->bootstrap != NULL &&
        match_form(m, m->bootstrap, strlen(m->bootstrap), &v)) {
        snprintf(err, errlen, "the bootstrap name %s has the form of a "
                 "broker's name (NodeId %s%d): a name routes one way only",
                 bootstrap, v < 0 ? "above " : "", v < 0 ? INT32_MAX : v);
        kr_sni_free(m);
        return NULL;
    }
    return m;
}

enum kr_sni_route
kr_sni_route(const struct kr_sni *m, const char *name, size_t len,
             int32_t *node_id)
{
    int32_t v;

    *node_id = -1;
    if (name == NULL || len == 0) {
        return KR_SNI_NONE;
    }
    if (name[len - 1] == '.') {
        len--;                          /* "a.b." is "a.b" */
    }
    if (m->bootstrap != NULL && len == strlen(m->bootstrap) &&
        strncasecmp(name, m->bootstrap, len) == 0) {
        return KR_SNI_BOOTSTRAP;
    }
    if (!match_form(m, name, len, &v)) {
        return KR_SNI_UNKNOWN;
    }
    *node_id = v;
    if (v < m->node_id_min || v > m->node_id_max) {
        return KR_SNI_OUT_OF_RANGE;
    }
    return KR_SNI_BROKER;
}

size_t
kr_sni_broker_name(const struct kr_sni *m, int32_t node_id, char *buf,
                   size_t len)
{
    int n;

    if (len == 0) {
        return 0;
    }
    n = snprintf(buf, len, "%s%d%s", m->prefix, (int)node_id, m->suffix);
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

const char *
kr_sni_route_name(enum kr_sni_route r)
{
    switch (r) {
    case KR_SNI_BROKER:
        return "broker";
    case KR_SNI_BOOTSTRAP:
        return "bootstrap";
    case KR_SNI_NONE:
        return "none";
    case KR_SNI_UNKNOWN:
        return "unknown";
    case KR_SNI_OUT_OF_RANGE:
        return "out of range";
    }
    return "?";
}
