/*
 * kr_rewrite.h - response rewriting so that clients only ever talk to
 * krelay.
 *
 * Two jobs, both driven by the schema tables (no per-API code):
 *   1. Broker addresses: every endpoint-shaped struct (KR_SF_ENDPOINT: a
 *      broker id + Host + Port) in a client-facing response gets Host =
 *      the listener's advertised_host and Port = broker_port_base +
 *      NodeId; with SNI routing (ctx->sni) Host = the NodeId's name
 *      (broker-3.kafka.example.com) and Port = the listener's own.
 *      Covers Metadata Brokers, FindCoordinator (top level and
 *      Coordinators[]), DescribeCluster Brokers, and the KIP-951
 *      NodeEndpoints tagged fields of Produce, Fetch, ShareFetch and
 *      ShareAcknowledge responses.  A NodeId outside [node_id_min,
 *      node_id_max] is never leaked: the rewrite fails.
 *   2. ApiVersions responses: the advertised MaxVersion of each API whose
 *      responses krelay must decode (kr_rewrite_wants) is capped to what
 *      krelay's tables know; with clamps in the ctx, entries are also
 *      clamped (kr_clamp_apiversions, kr_translate.h).  A broker's KIP-511
 *      answer (ErrorCode 35, v0 body) passes byte for byte.
 *
 * Frames that need neither are never decoded: the session asks
 * kr_rewrite_wants() per (ApiKey, ApiVersion) and forwards the rest
 * cut-through.
 */
#ifndef KR_REWRITE_H
#define KR_REWRITE_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "kr_common.h"
#include "kr_conf.h"

struct kr_upstream;

struct kr_arena;
struct kr_clamp;
struct kr_node;
struct kr_sni;

/*
 * What a listener advertises to its clients.
 *
 * clamps / pass_unknown_apis (issue 3, version clamping) shape ApiVersions
 * responses: clamps is NULL (no clamp rule applies: today's behaviour,
 * every entry passes but the MaxVersion caps above) or an array of
 * kr_api_max + 1 struct kr_clamp (kr_translate.h) indexed by ApiKey,
 * borrowed for the call.  With clamps, each entry is intersected with its
 * clamp (Produce's MinVersion stays as the broker sent it), every clamped
 * API is also capped at what krelay's tables know (krelay may have to
 * translate it), and ApiKeys unknown to the tables are dropped unless
 * pass_unknown_apis.  Zero-initialised fields keep the old behaviour.
 *
 * enforced / enforced_unknown (issue 13, kr_rule_conn_enforced): the APIs
 * an enforcing rule could match on this connection are capped at what the
 * tables know, and when such a rule could match ApiKeys the tables do not
 * know those are dropped whatever pass_unknown_apis says.  The ranges
 * themselves come from kr_advertise_range (kr_translate.h), which has the
 * precedence of every step.
 */
struct kr_rewrite_ctx {
    const char *advertised_host;    /* Host written (borrowed); unused
                                       with sni */
    uint16_t broker_port_base;      /* Port written: this + NodeId */
    int32_t node_id_min, node_id_max; /* NodeIds allowed, inclusive */
    struct kr_upstream *upstream;   /* learns broker addresses; may be NULL */
    const char *who;                /* client name for log lines */
    const struct kr_clamp *clamps;  /* NULL: no clamp rule */
    bool pass_unknown_apis;         /* with clamps: keep unknown ApiKeys */
    const bool *enforced;           /* kr_api_max + 1 entries, or NULL:
                                       an enforcing rule could match the
                                       API above the tables' max */
    bool enforced_unknown;          /* an enforcing rule could match an
                                       ApiKey the tables do not know */
    /* issue 8: SNI routing (appended) */
    const struct kr_sni *sni;       /* non-NULL: Host written is NodeId's
                                       name (kr_sni_broker_name), Port
                                       sni_port; borrowed */
    uint16_t sni_port;              /* the listener's own port */
    /* issue 9: SASL termination (appended) */
    bool sasl_local;                /* krelay answers SASL itself: its
                                       own SaslHandshake/SaslAuthenticate
                                       ranges advertised (kr_advert) */
    /* issue 10: legacy translation (appended) */
    const struct kr_clamp *legacy;  /* translate_legacy: the versions
                                       krelay translates up (kr_advert's
                                       legacy, kr_bv_legacy_ranges());
                                       NULL: off */
};

/* Result details of one rewrite (for logs, metrics and tests). */
struct kr_rewrite_result {
    unsigned endpoints;         /* endpoint structs rewritten */
    unsigned capped;            /* ApiVersions entries capped or dropped */
    bool changed;               /* out differs from the input */
    size_t trailing;            /* bytes after the known body, kept */
    unsigned dropped;           /* kr_rewrite_tail: endpoint fields
                                   dropped because the rewrite did not
                                   fit the frame's length */
    int32_t bad_node_id;        /* with KR_ELIMIT: the NodeId out of range */
    char err[160];              /* why it failed (NUL-terminated) */
};

/*
 * Build the per-(ApiKey, version) table of responses that may carry
 * broker endpoints.  Call once at start (idempotent, not thread-safe).
 */
void kr_rewrite_init(void);

/*
 * True when the response to (api_key, api_version) must be held whole and
 * passed through kr_rewrite_response: ApiVersions, or a version whose
 * response schema has an endpoint struct.  O(1).
 */
bool kr_rewrite_wants(int16_t api_key, int16_t api_version);

/*
 * Rewrite one response.  payload holds the frame without its size prefix
 * (response header + body) and is drained; out receives the new frame
 * WITH its size prefix.  When nothing changes, the original bytes are
 * moved to out unchanged (no re-encode).  Records inside the response are
 * moved between evbuffers, never copied.
 *
 * Returns KR_OK; KR_ELIMIT when a NodeId is outside the listener's range
 * (res->bad_node_id says which; nothing is written to out); KR_EPROTO when
 * the response cannot be decoded (res->err says why).  On error the
 * caller closes the client connection and logs res->err.
 */
int kr_rewrite_response(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                        int16_t api_version, struct evbuffer *payload,
                        struct evbuffer *out,
                        struct kr_rewrite_result *res) KR_MUST_CHECK;

/*
 * What kr_rewrite_response_observed hands its caller: the response's
 * decoded body (at the version decoded), borrowed for the call only.
 */
typedef void (*kr_rewrite_observe_fn)(void *arg, const struct kr_node *body);

/*
 * kr_rewrite_response, and observe(arg, body) once with the decoded body
 * when the response decodes (before it is rewritten; not called when it
 * does not decode).  So a caller reads what the rewrite decoded anyway,
 * without a second decode (the session counts its ErrorCodes,
 * response_errors).  observe may be NULL.
 */
int kr_rewrite_response_observed(const struct kr_rewrite_ctx *ctx,
                                 int16_t api_key, int16_t api_version,
                                 struct evbuffer *payload,
                                 struct evbuffer *out,
                                 struct kr_rewrite_result *res,
                                 kr_rewrite_observe_fn observe, void *arg)
    KR_MUST_CHECK;

/*
 * True when responses to (api_key, api_version) carry broker endpoints
 * only in the body's top-level tagged fields (KIP-951 NodeEndpoints:
 * Fetch v16+, Produce v10+, ShareFetch, ShareAcknowledge): the session
 * may forward such a frame as it arrives, walking it with kr_scan
 * (kr_scan.h), and pass only the tail (the body's tagged-field section)
 * through kr_rewrite_tail.  Computed from the tables at kr_rewrite_init.
 */
bool kr_rewrite_streamable(int16_t api_key, int16_t api_version);

/*
 * For a response kr_rewrite_streamable says holds endpoints only in the
 * body's top-level tagged fields: true when body, decoded from the frame
 * as received with KR_DEC_TAGS_EXACT (as kr_rewrite_response decodes it),
 * has none of those fields (or only empty ones), so that
 * kr_rewrite_response would decode the frame again only to move it
 * unchanged.  false for every other (api_key, api_version), and when
 * body is NULL.  Reads the tree, changes nothing.
 */
bool kr_rewrite_tree_none(int16_t api_key, int16_t api_version,
                          const struct kr_node *body);

/* Tag of the unknown tagged field kr_rewrite_tail pads with. */
#define KR_PAD_TAG 10000u

/*
 * Rewrite the tail of a streamed response (kr_rewrite_streamable): tail
 * holds the payload bytes from where kr_scan stopped to the end of the
 * frame (the body's tagged-field section, then any trailing bytes) and is
 * drained; out receives exactly as many bytes, because the frame's size
 * prefix already went to the client.  Endpoints are rewritten as in
 * kr_rewrite_response.  When the rewritten section is shorter, an unknown
 * tagged field (tag KR_PAD_TAG or above, zero bytes) pads it; when it is
 * longer, the tagged fields that carry endpoints are dropped (KIP-951:
 * clients then fall back to a metadata refresh) and the rest padded;
 * res->dropped counts them.  Unchanged tails are moved, not copied.
 *
 * Returns KR_OK; KR_ELIMIT for a NodeId outside the listener's range
 * (res->bad_node_id); KR_EPROTO when the section does not decode (res->err
 * says why); KR_ENOMEM.  On error nothing usable was written to out: the
 * caller closes the client connection.
 */
int kr_rewrite_tail(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                    int16_t api_version, struct evbuffer *tail,
                    struct evbuffer *out,
                    struct kr_rewrite_result *res) KR_MUST_CHECK;

/*
 * Rewrite the broker endpoints of a decoded response body (api_key at
 * api_version) in place, as kr_rewrite_response does on the wire: for an
 * audit line that shows what the client gets, with res->changed telling
 * whether anything was rewritten.  ApiVersions and APIs without endpoints
 * are left alone (KR_OK, nothing changed).  Returns what
 * kr_rewrite_response would for the same tree (KR_ELIMIT with
 * res->bad_node_id, KR_ERROR...); the tree's hosts then borrow
 * ctx->advertised_host, or with ctx->sni live in arena (the tree's: a
 * NodeId's name is written there).  Learns nothing (kr_upstream).
 */
int kr_rewrite_tree(const struct kr_rewrite_ctx *ctx, int16_t api_key,
                    int16_t api_version, struct kr_node *body,
                    struct kr_arena *arena, struct kr_rewrite_result *res);

#endif /* KR_REWRITE_H */
