/*
 * kr_sni.h - SNI routing names (issue 8): one TLS port serves the
 * bootstrap route and every broker, and the host name a client's
 * ClientHello sent (server_name, RFC 6066) says which.
 *
 * A listener's sni_broker_name is a host name with one $(node_id) in it:
 * with broker-$(node_id).kafka.example.com, NodeId 3 is
 * broker-3.kafka.example.com; sni_bootstrap_name, a host name, is the
 * bootstrap route.  This module checks those names, maps a name a client
 * sent to a route (kr_sni_route), and writes the name of a NodeId (what
 * address rewriting advertises, kr_rewrite.h).  Strings only: no
 * OpenSSL, no config, no event loop.
 *
 * Names are DNS host names: letters, digits, '-' and '.', labels of 1 to
 * 63 characters that neither start nor end with '-', at most
 * KR_SNI_NAME_MAX characters.  They are compared without regard to ASCII
 * case (RFC 4343) and written in lower case.  A NodeId is written in
 * decimal without leading zeros, and only that form matches: the name of
 * a NodeId is one string, so the names krelay advertises, those clients
 * send and those certificates hold agree.
 */
#ifndef KR_SNI_H
#define KR_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_common.h"

/* The placeholder sni_broker_name holds once. */
#define KR_SNI_PLACEHOLDER "$(node_id)"
/* Longest host name, in characters (RFC 1035 without the final dot). */
#define KR_SNI_NAME_MAX 253

/*
 * One listener's names, built by kr_sni_new (the config loader), read
 * only after: shared by the sessions of every worker.
 */
struct kr_sni {
    char *prefix;                       /* lower case: the pattern before
                                           $(node_id) ("broker-") */
    char *suffix;                       /* ... and after it
                                           (".kafka.example.com") */
    size_t prefix_len, suffix_len;
    char *bootstrap;                    /* lower case; NULL: no name routes
                                           to the bootstrap route */
    int32_t node_id_min, node_id_max;   /* NodeIds that have a name,
                                           inclusive */
};

/* Where the name a client sent routes it (kr_sni_route). */
enum kr_sni_route {
    KR_SNI_BROKER = 0,                  /* the name of a NodeId in range */
    KR_SNI_BOOTSTRAP,                   /* the bootstrap name */
    KR_SNI_NONE,                        /* no name was sent */
    KR_SNI_UNKNOWN,                     /* a name that is neither */
    KR_SNI_OUT_OF_RANGE                 /* the name of a NodeId outside
                                           node_id_min..node_id_max */
};

/*
 * Check that name (NUL-terminated) is a host name as above: true, or
 * false with err (errlen bytes) saying why in one line ("empty label at
 * offset 7", "'_' at offset 3: a host name has letters, digits, '-' and
 * '.' only").
 */
bool kr_sni_host_ok(const char *name, char *err, size_t errlen);

/*
 * Build the names of a listener: pattern (sni_broker_name: a host name
 * once $(node_id) is replaced by a NodeId in min..max), bootstrap
 * (sni_bootstrap_name, a host name; NULL: none), NodeIds min..max
 * (0 <= min <= max).  Refused, NULL with err (one line): a pattern
 * without $(node_id) or with two, a digit next to it ("broker1$(node_id)"
 * would make NodeId 23's name read as NodeId 123's), a name that is no
 * host name (or too long with max's digits), a bootstrap name the pattern
 * matches, out of memory.  The caller frees the result (kr_sni_free).
 */
struct kr_sni *kr_sni_new(const char *pattern, const char *bootstrap,
                          int32_t min, int32_t max, char *err,
                          size_t errlen) KR_MUST_CHECK;

/* Free m (NULL: nothing). */
void kr_sni_free(struct kr_sni *m);

/*
 * Where the name (len bytes at name, as a client sent it; NULL or len 0:
 * none) routes: KR_SNI_BROKER with *node_id, KR_SNI_BOOTSTRAP, KR_SNI_NONE,
 * KR_SNI_UNKNOWN, or KR_SNI_OUT_OF_RANGE with *node_id (-1 when the
 * digits are above INT32_MAX).  One final '.' is ignored (the same DNS
 * name).  *node_id is -1 unless said otherwise.  No allocation.
 */
enum kr_sni_route kr_sni_route(const struct kr_sni *m, const char *name,
                               size_t len, int32_t *node_id);

/*
 * The name of NodeId node_id (any int32 >= 0; the range is the caller's
 * to check) into buf (len bytes), NUL-terminated.  Returns its length, or
 * 0 when it does not fit (buf then holds "").
 */
size_t kr_sni_broker_name(const struct kr_sni *m, int32_t node_id, char *buf,
                          size_t len);

/* A route's name for log lines: "broker", "bootstrap", "none"... */
const char *kr_sni_route_name(enum kr_sni_route r);

#endif /* KR_SNI_H */
