/*
 * kr_rule.h - the compiled rule set ([rule NAME] sections), matching, and
 * the verdict a request gets.
 *
 * kr_rule_load reads a config (kr_conf_load, which only parses and
 * checks) and compiles every [rule] into a table indexed by (ApiKey,
 * ApiVersion): each slot holds two bit sets of rule
 * indexes, the rules whose request-side actions apply there and those
 * whose response-side actions apply (the `direction` key).  A rule with
 * no `api` goes into every known API's slots, one with `versions` only
 * into those versions.  A rule whose only action is a clamp goes only
 * into the slots of versions outside its clamp: a client that obeys the
 * clamp costs nothing.
 *
 * Per connection, the rules whose static matchers (listener, client
 * address, principal) hold are computed once into a struct kr_rule_mask.
 * Per frame, kr_rule_lookup is one table read and a few ANDs: NULL means
 * pass-through (no decode, no allocation).  Otherwise the session decodes
 * the request and kr_rule_eval walks the slot's rules in file order,
 * checking the per-request matchers (ClientId, topics), and fills a
 * struct kr_verdict.
 *
 * Precedence (issue 3): every matching rule applies, in file order; of two
 * actions of the same kind the first wins; a deny ends the evaluation; a
 * request naming several topics is denied whole if any of them matches a
 * deny rule.
 *
 * Request-side actions: deny, clamp, produce policy (allowed_acks,
 * allowed_compression).  Response-side actions: throttle, fault.  Audit
 * belongs to both (one line per request/response pair).
 *
 * At the edge of the tables (issue 13): a request krelay cannot decode
 * never reaches kr_rule_eval; kr_rule_gate decides from its header alone
 * whether an enforcing rule (deny, produce policy, a clamp the version is
 * outside of, throttle enforce: fail closed) or only observing ones
 * (audit, ThrottleTimeMs inject, faults: fail open) could match it.
 *
 * Everything here is immutable after compile and may be shared by every
 * worker thread.
 */
#ifndef KR_RULE_H
#define KR_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_translate.h"

struct kr_topic_map;

#define KR_RULE_MASK_WORDS (KR_CONF_MAX_RULES / 64)

/* A set of rule indexes (bit i = conf->rules[i]). */
struct kr_rule_mask {
    uint64_t w[KR_RULE_MASK_WORDS];
};

/* One (ApiKey, ApiVersion) slot of the table. */
struct kr_rule_slot {
    struct kr_rule_mask req;            /* request-side actions apply */
    struct kr_rule_mask rsp;            /* response-side actions apply */
};

/* Compiled rules; owned by the struct kr_conf they were compiled from. */
struct kr_ruleset {
    const struct kr_conf *conf;         /* rules[] are conf->rules */
    int nrules;
    struct kr_rule_slot **tab;          /* [ApiKey]: NULL or
                                           valid.hi + 1 slots */
    int16_t ntab;                       /* kr_api_max + 1 */
    bool any_audit;                     /* some rule audits */
    struct kr_rule_mask audit_mask;     /* the rules that audit */
    bool any_clamp;                     /* some rule clamps */
};

/* Verdict flags (struct kr_verdict.flags). */
#define KR_VF_DENY      0x0001u         /* answer locally with deny_error */
#define KR_VF_CLAMP     0x0002u         /* translate to clamp_to */
#define KR_VF_POLICY    0x0004u         /* check the produce policy */
#define KR_VF_AUDIT     0x0008u         /* one audit line for the pair */
#define KR_VF_THROTTLE  0x0010u         /* ThrottleTimeMs action */
#define KR_VF_LATENCY   0x0020u         /* hold the response latency_ms */
#define KR_VF_ERROR     0x0040u         /* replace errors (probability) */
#define KR_VF_CLOSE     0x0080u         /* close (probability) */
#define KR_VF_UNKNOWN_TOPIC_ID 0x0100u  /* an enforcing topic rule could
                                           not be checked: the request
                                           names a TopicId the map does not
                                           know (deny_rule names the rule);
                                           answer UNKNOWN_TOPIC_ID, never
                                           forward (issue 13) */

/*
 * What the rules decided for one request.  Rule indexes name the rule
 * whose action won (for log lines: conf->rules[i].name).  Plain data: the
 * session copies it into its in-flight entry.
 */
struct kr_verdict {
    unsigned flags;                     /* KR_VF_* */
    int16_t deny_error;                 /* Kafka error code; -1: the
                                           API's default
                                           (kr_action_deny_error) */
    int deny_rule;
    int16_t clamp_min, clamp_max;       /* the winning clamp for this API */
    int clamp_rule;
    unsigned acks_mask, codec_mask;     /* produce policy (0: any) */
    int policy_rule;
    bool audit_body;
    int32_t throttle_ms;                /* ms */
    int32_t throttle_jitter_ms;         /* ms, 0..: uniform extra */
    bool throttle_add;                  /* add (true) or set */
    bool throttle_enforce;              /* enforce (true) or inject */
    int throttle_rule;
    int32_t latency_ms;                 /* ms */
    int16_t fault_error;                /* replacement ErrorCode */
    double fault_error_p;               /* 0..1 */
    double fault_close_p;               /* 0..1 */
    int fault_rule;
};

/*
 * Read and check path (kr_conf_load), then compile its rules into
 * (*out)->ruleset, which kr_conf_free then frees (ruleset_free).  How the
 * daemon reads a config: at start, for -t and at a reload.  Returns what
 * kr_conf_load returns, with its messages in errs; a config that loads
 * but does not compile (ENOMEM) is KR_ERROR, *out untouched, and one line
 * "FILE: message" in errs (may be NULL).
 */
int kr_rule_load(const char *path, FILE *errs,
                 struct kr_conf **out) KR_MUST_CHECK;

/* Same, from a string (kr_conf_load_string; tests, --demo). */
int kr_rule_load_string(const char *text, const char *name, FILE *errs,
                        struct kr_conf **out) KR_MUST_CHECK;

/* kr_rule_load with kr_conf_load_with's opts (may be NULL): krelay --demo
 * -c FILE, where the demo cluster stands in for a missing [upstream]. */
int kr_rule_load_with(const char *path, const struct kr_conf_load_opts *opts,
                      FILE *errs, struct kr_conf **out) KR_MUST_CHECK;

/*
 * Compile conf->rules into a new ruleset.  Returns NULL with a message in
 * err on ENOMEM (the loader has checked every value already).  Free with
 * kr_rule_free.
 */
struct kr_ruleset *kr_rule_compile(const struct kr_conf *conf, char *err,
                                   size_t errlen);
/*
 * Free rs (its table; not the conf).  NULL is a no-op.  kr_conf_free
 * calls it for the ruleset of a config from kr_rule_load.
 */
void kr_rule_free(struct kr_ruleset *rs);

/*
 * The rules whose static matchers hold for a connection that came in on
 * [listener listener] ("" when unnamed) from sa (may be NULL: matches no
 * client_address rule), with principal (NULL until TLS/SASL give one:
 * then a rule with `principal` does not match).
 */
void kr_rule_conn_mask(const struct kr_ruleset *rs, const char *listener,
                       const struct sockaddr *sa, const char *principal,
                       struct kr_rule_mask *out);

/*
 * The same for a connection whose principal krelay cannot know (SASL
 * GSSAPI and other mechanisms, SCRAM delegation tokens, a first token
 * that does not parse: issue 9): rules naming principals fail closed --
 * one matches when it enforces something (deny, produce policy, a clamp,
 * throttle_mode = enforce: kr_rule_enforces) or audits; one that only
 * injects ThrottleTimeMs or faults does not.
 */
void kr_rule_conn_mask_unknown(const struct kr_ruleset *rs,
                               const char *listener,
                               const struct sockaddr *sa,
                               struct kr_rule_mask *out);

/*
 * The slot of (api_key, api_version) when some rule of conn may apply
 * there; NULL for pass-through.  O(1).
 */
const struct kr_rule_slot *kr_rule_lookup(const struct kr_ruleset *rs,
                                          int16_t api_key,
                                          int16_t api_version,
                                          const struct kr_rule_mask *conn);

/*
 * Evaluate the rules of slot (from kr_rule_lookup) for the decoded request
 * req (topics resolved through map, may be NULL) from a connection with
 * mask conn.  Fills *v (zeroed first).  Returns true when some rule
 * matched (v->flags may still be 0, e.g. a clamp the request is inside).
 */
bool kr_rule_eval(const struct kr_ruleset *rs, const struct kr_rule_slot *slot,
                  const struct kr_rule_mask *conn, const struct kr_msg *req,
                  const struct kr_topic_map *map, struct kr_verdict *v);

/* Whether a request's verdict needs its body (kr_rule_eval_header). */
enum kr_rule_need {
    KR_RULE_NEEDS_BODY = 0,             /* decode it: kr_rule_eval */
    KR_RULE_HEADER_ENOUGH               /* *v is what kr_rule_eval would
                                           give, from the header alone */
};

/*
 * The verdict of slot's rules for a request of (api_key, api_version)
 * from ClientId cid (cidlen bytes; NULL: null), when no matching rule
 * looks at the body: every rule of conn that matches the header only
 * audits it, without audit_body, and names no topic (no deny, produce
 * policy, clamp of the API, throttle or fault).  Then *v (zeroed first)
 * is kr_rule_eval's verdict (flags KR_VF_AUDIT, or 0 when no rule
 * matches) and the session may stream the request past krelay (a
 * Produce request's records are spliced, its audit line built by the
 * scanner).  Otherwise KR_RULE_NEEDS_BODY: hold and decode it.
 */
enum kr_rule_need kr_rule_eval_header(const struct kr_ruleset *rs,
                                      const struct kr_rule_slot *slot,
                                      const struct kr_rule_mask *conn,
                                      int16_t api_key, int16_t api_version,
                                      const char *cid, size_t cidlen,
                                      struct kr_verdict *v);

/*
 * What the rules decide about a request krelay cannot decode (issue 13):
 * its (ApiKey, ApiVersion) is not in the schema tables, or its body does
 * not decode.  Enforcing actions (deny, produce policy, a clamp the
 * version is outside of, throttle_mode = enforce) fail closed; observing
 * ones (audit, ThrottleTimeMs inject, fault injection) fail open.
 */
enum kr_gate {
    KR_GATE_PASS,                       /* no rule could match: forward */
    KR_GATE_OBSERVE,                    /* only observing rules could
                                           match: forward unchanged */
    KR_GATE_REFUSE                      /* an enforcing rule could match:
                                           never forward */
};

/* kr_rule_gate's answer: the outcome and the rules behind it. */
struct kr_gate_result {
    enum kr_gate gate;
    int rule;                           /* the first enforcing rule (REFUSE)
                                           or observing rule (OBSERVE) that
                                           could match, in file order; -1
                                           for PASS */
    bool audit;                         /* an audit rule could match */
    bool throttle_enforce;              /* the first throttle rule that
                                           could match enforces */
    int32_t throttle_ms;                /* its throttle_ms (ms), 0 when
                                           none */
};

/*
 * Which rules of conn could match a request of (api_key, api_version)
 * whose body krelay cannot look at.  Without the body only what the
 * header gives is checked: the rule's `api` (unset, or lists api_key),
 * `versions` (holds api_version) and `client_id` (globs against the
 * request's own ClientId, client_id_len bytes; client_id NULL for a null
 * ClientId, which matches no client_id rule); a `topic` rule counts as
 * matching unless (ApiKey, ApiVersion) is known and its requests cannot
 * name a topic.  api_key and api_version may lie outside the tables (an
 * unknown ApiKey matches only rules without `api`).  Pure; O(rules).
 */
void kr_rule_gate(const struct kr_ruleset *rs, const struct kr_rule_mask *conn,
                  int16_t api_key, int16_t api_version,
                  const char *client_id, size_t client_id_len,
                  struct kr_gate_result *out);

/*
 * For the ApiVersions response of a connection (mask conn, the ApiVersions
 * request's ClientId): enforced[k] (kr_api_max + 1 entries) is set when
 * an enforcing rule could match a version of ApiKey k above what krelay's
 * tables know (kr_rule_gate at valid.hi + 1 gives KR_GATE_REFUSE): that
 * API's MaxVersion must then be capped at the tables' max, so that
 * well-behaved clients never send a version krelay would refuse.
 * Returns true when an enforcing rule could match ApiKeys the tables do
 * not know at all (they are then left out of the response).
 */
bool kr_rule_conn_enforced(const struct kr_ruleset *rs,
                           const struct kr_rule_mask *conn,
                           const char *client_id, size_t client_id_len,
                           bool *enforced);

/*
 * True when a rule of conn with `topic` and an enforcing action could
 * apply to requests of ApiKey api (whatever their ClientId): a reload
 * that brings one makes krelay restart fetch sessions (issue 13).
 */
bool kr_rule_conn_topic_enforced(const struct kr_ruleset *rs,
                                 const struct kr_rule_mask *conn,
                                 int16_t api);

/*
 * True when rule r has an enforcing action (see enum kr_gate) for some
 * request.  For `krelay -t` warnings.
 */
bool kr_rule_enforces(const struct kr_rule_conf *r);

/*
 * The version clamps of every rule of conn that matches ClientId client_id
 * (NULL: matches only rules without client_id) and has no topic key:
 * clamps[k] for ApiKey k, kr_api_max + 1 entries (min > max when none;
 * the first matching rule clamping an API wins).  *pass_unknown: some
 * such rule sets pass_unknown_apis.  Returns the number of APIs clamped.
 */
int kr_rule_conn_clamps(const struct kr_ruleset *rs,
                        const struct kr_rule_mask *conn,
                        const char *client_id, size_t client_id_len,
                        struct kr_clamp *clamps, bool *pass_unknown);

/*
 * Shell-style glob: '*' any run, '?' one byte, '\\' escapes.  pat is
 * NUL-terminated; s is len bytes, need not be.  false when either is NULL.
 */
bool kr_glob_match(const char *pat, const char *s, size_t len);

/*
 * True when address sa (AF_INET or AF_INET6) lies in network c; an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d) also matches IPv4 networks.
 * false for another family or when either is NULL.
 */
bool kr_cidr_match(const struct kr_cidr *c, const struct sockaddr *sa);

/*
 * Write every warning of the config rs was compiled from to f, one line
 * each as "FILE:LINE: text" (the caller adds its own prefix: `krelay -t`
 * writes "krelay: warning: "): the loader's (kr_conf_warnings), then the
 * rule table's (issue 13: pass_unknown_apis on connections an enforcing
 * rule without `api` could match, where it has no effect).  Returns the
 * number written.
 */
unsigned kr_rule_warnings(const struct kr_ruleset *rs, FILE *f);

/*
 * Print the compiled table to f: one line per rule (its matchers and
 * actions), then per ApiKey the version ranges each rule touches
 * (`krelay -t`).  APIs, Kafka errors, acks and compression types are
 * written by name, as the config writes them.
 */
void kr_rule_print(const struct kr_ruleset *rs, FILE *f);

/* True when masks a and b share a rule; kr_rule_mask_has: bit i is set. */
static inline bool
kr_rule_mask_any(const struct kr_rule_mask *a, const struct kr_rule_mask *b)
{
    uint64_t r = 0;
    int i;

    for (i = 0; i < KR_RULE_MASK_WORDS; i++) {
        r |= a->w[i] & b->w[i];
    }
    return r != 0;
}

static inline bool
kr_rule_mask_has(const struct kr_rule_mask *m, int i)
{
    return (m->w[i / 64] >> (i % 64)) & 1u;
}

#endif /* KR_RULE_H */
