/*
 * kr_rule.c - compile [rule] sections into the per-(ApiKey, ApiVersion)
 * table, match connections and requests, build verdicts, print the table
 * (`krelay -t`).  See kr_rule.h for the model and precedence.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_kerr.h"
#include "kr_rule.h"
#include "kr_schema.h"
#include "kr_topics.h"

#define KR_GLOB_MAX_DEPTH 64

/* ---- matching primitives ---------------------------------------------- */

static bool
glob_at(const char *p, const char *s, size_t len, int depth)
{
    size_t i = 0;

    if (depth > KR_GLOB_MAX_DEPTH) {
        return false;
    }
    for (; *p != '\0'; p++) {
        if (*p == '*') {
            while (p[1] == '*') {
                p++;
            }
            if (p[1] == '\0') {
                return true;
            }
            for (; i <= len; i++) {
                if (glob_at(p + 1, s + i, len - i, depth + 1)) {
                    return true;
                }
            }
            return false;
        }
        if (i >= len) {
            return false;
        }
        if (*p == '?') {
            i++;
            continue;
        }
        if (*p == '\\' && p[1] != '\0') {
            p++;
        }
        if (*p != s[i]) {
            return false;
        }
        i++;
    }
    return i == len;
}

bool
kr_glob_match(const char *pat, const char *s, size_t len)
{
    if (pat == NULL || s == NULL) {
        return false;
    }
    return glob_at(pat, s, len, 0);
}

static bool
globs_match(const struct kr_strlist *l, const char *s, size_t len)
{
    int i;

    for (i = 0; i < l->n; i++) {
        if (kr_glob_match(l->v[i], s, len)) {
            return true;
        }
    }
    return false;
}

bool
kr_cidr_match(const struct kr_cidr *c, const struct sockaddr *sa)
{
    const uint8_t *a;
    uint8_t v4m[16];
    int family, i, bits;

    if (c == NULL || sa == NULL) {
        return false;
    }
    if (sa->sa_family == AF_INET) {
        a = (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)
                ->sin_addr;
        family = AF_INET;
    } else if (sa->sa_family == AF_INET6) {
        a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        family = AF_INET6;
        /* ::ffff:a.b.c.d matches IPv4 networks too */
        if (c->family == AF_INET &&
            memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
            memcpy(v4m, a + 12, 4);
            a = v4m;
            family = AF_INET;
        }
    } else {
        return false;
    }
    if (family != c->family) {
        return false;
    }
    bits = c->bits;
    for (i = 0; bits > 0; i++, bits -= 8) {
        uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));

        if ((a[i] & m) != c->addr[i]) {
            return false;
        }
    }
    return true;
}

static void
mask_set(struct kr_rule_mask *m, int i)
{
    m->w[i / 64] |= UINT64_C(1) << (i % 64);
}

/* ---- compile ------------------------------------------------------------ */

static bool
has_clamp(const struct kr_rule_conf *r)
{
    return r->clamp_min_version >= 0 || r->clamp_max_version >= 0;
}

static bool
has_policy(const struct kr_rule_conf *r)
{
    return r->allowed_acks != 0 || r->allowed_compression != 0;
}

static bool
has_fault(const struct kr_rule_conf *r)
{
    return r->fault_latency_ms > 0 || r->fault_error >= 0 ||
           r->fault_close_probability > 0;
}

static bool
names_api(const struct kr_rule_conf *r, int16_t api)
{
    int j;

    for (j = 0; j < r->napi; j++) {
        if (r->api[j] == api) {
            return true;
        }
    }
    return r->napi == 0;
}

static bool
outside_clamp(const struct kr_rule_conf *r, int16_t v)
{
    return (r->clamp_min_version >= 0 && v < r->clamp_min_version) ||
           (r->clamp_max_version >= 0 && v > r->clamp_max_version);
}

/*
 * Enforcing actions (issue 13) rule r takes on requests of (api, v),
 * whatever else matches: deny, the produce policy, a clamp v is outside
 * of; and on their responses: throttle_mode = enforce.
 */
static bool
rule_enforces_request(const struct kr_rule_conf *r, int16_t api, int16_t v)
{
    return (r->direction & KR_RDIR_REQUEST) &&
           (r->deny || (has_policy(r) && api == KR_API_PRODUCE) ||
            (has_clamp(r) && outside_clamp(r, v)));
}

static bool
rule_enforces_response(const struct kr_rule_conf *r)
{
    return (r->direction & KR_RDIR_RESPONSE) && r->throttle_ms >= 0 &&
           r->throttle_mode == KR_THROTTLE_ENFORCE;
}

bool
kr_rule_enforces(const struct kr_rule_conf *r)
{
    return ((r->direction & KR_RDIR_REQUEST) &&
            (r->deny || has_policy(r) || has_clamp(r))) ||
           rule_enforces_response(r);
}

/* Does rule r act on requests of (api, v)?  On their responses? */
static void
rule_sides(const struct kr_rule_conf *r, int16_t api, int16_t v, bool *req,
           bool *rsp)
{
    bool rq = r->deny || r->audit || (has_clamp(r) && outside_clamp(r, v)) ||
              (has_policy(r) && api == KR_API_PRODUCE);
    bool rs = r->audit || r->throttle_ms >= 0 || has_fault(r);

    *req = (r->direction & KR_RDIR_REQUEST) && rq;
    *rsp = (r->direction & KR_RDIR_RESPONSE) && rs;
}

static int
add_rule(struct kr_ruleset *rs, int i, int16_t api)
{
    const struct kr_rule_conf *r = &rs->conf->rules[i];
    const struct kr_api_desc *a = kr_api_get(api);
    int16_t v, lo, hi;

    if (a == NULL || a->valid.hi < a->valid.lo) {
        return KR_OK;
    }
    lo = (int16_t)(r->versions_min > a->valid.lo ? r->versions_min
                                                 : a->valid.lo);
    hi = (int16_t)(r->versions_max < a->valid.hi ? r->versions_max
                                                 : a->valid.hi);
    for (v = lo < 0 ? 0 : lo; v <= hi; v++) {
        bool rq, rsp;

        rule_sides(r, api, v, &rq, &rsp);
        if (!rq && !rsp) {
            continue;
        }
        /* A topic rule never matches a request that cannot name one. */
        if (r->topic.n > 0 && !kr_topics_possible(kr_api_root(a, false, v))) {
            continue;
        }
        if (rs->tab[api] == NULL) {
            rs->tab[api] = calloc((size_t)a->valid.hi + 1,
                                  sizeof(**rs->tab));
            if (rs->tab[api] == NULL) {
                return KR_ENOMEM;
            }
        }
        if (rq) {
            mask_set(&rs->tab[api][v].req, i);
        }
        if (rsp) {
            mask_set(&rs->tab[api][v].rsp, i);
        }
    }
    return KR_OK;
}

struct kr_ruleset *
kr_rule_compile(const struct kr_conf *conf, char *err, size_t errlen)
{
    struct kr_ruleset *rs = calloc(1, sizeof(*rs));
    int i, j;
    int16_t k;

    if (rs == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rs->conf = conf;
    rs->nrules = conf->nrules;
    rs->ntab = (int16_t)(kr_api_max + 1);
    rs->tab = calloc((size_t)rs->ntab, sizeof(*rs->tab));
    if (rs->tab == NULL || rs->nrules > KR_CONF_MAX_RULES) {
        snprintf(err, errlen, rs->tab == NULL ? "out of memory"
                                              : "too many rules");
        kr_rule_free(rs);
        return NULL;
    }
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &conf->rules[i];

        rs->any_audit = rs->any_audit || r->audit;
        if (r->audit) {
            mask_set(&rs->audit_mask, i);
        }
        rs->any_clamp = rs->any_clamp || has_clamp(r) ||
                        r->pass_unknown_apis;
        if (r->napi > 0) {
            for (j = 0; j < r->napi; j++) {
                if (add_rule(rs, i, r->api[j]) != KR_OK) {
                    goto oom;
                }
            }
        } else {
            for (k = 0; k <= kr_api_max; k++) {
                if (add_rule(rs, i, k) != KR_OK) {
                    goto oom;
                }
            }
        }
    }
    return rs;
oom:
    snprintf(err, errlen, "out of memory compiling rules");
    kr_rule_free(rs);
    return NULL;
}

void
kr_rule_free(struct kr_ruleset *rs)
{
    int16_t k;

    if (rs == NULL) {
        return;
    }
    for (k = 0; rs->tab != NULL && k < rs->ntab; k++) {
        free(rs->tab[k]);
    }
    free(rs->tab);
    free(rs);
}

/* Compile the rules of a config just loaded (rc its load's result). */
static int
load_compile(int rc, FILE *errs, struct kr_conf *c, struct kr_conf **out)
{
    char err[128];

    if (rc != KR_OK) {
        return rc;
    }
    c->ruleset = kr_rule_compile(c, err, sizeof(err));
    if (c->ruleset == NULL) {
        if (errs != NULL) {
            fprintf(errs, "%s: %s\n", c->path, err);
        }
        kr_conf_free(c);
        return KR_ERROR;
    }
    c->ruleset_free = kr_rule_free;
    *out = c;
    return KR_OK;
}

int
kr_rule_load(const char *path, FILE *errs, struct kr_conf **out)
{
    return kr_rule_load_with(path, NULL, errs, out);
}

int
kr_rule_load_with(const char *path, const struct kr_conf_load_opts *opts,
                  FILE *errs, struct kr_conf **out)
{
    struct kr_conf *c = NULL;
    int rc = kr_conf_load_with(path, opts, errs, &c);

    return load_compile(rc, errs, c, out);
}

int
kr_rule_load_string(const char *text, const char *name, FILE *errs,
                    struct kr_conf **out)
{
    struct kr_conf *c = NULL;
    int rc = kr_conf_load_string(text, name, errs, &c);

    return load_compile(rc, errs, c, out);
}

/* ---- connections and lookup --------------------------------------------- */

/* kr_rule_conn_mask, with unknown: the principal cannot be known. */
static void
conn_mask(const struct kr_ruleset *rs, const char *listener,
          const struct sockaddr *sa, const char *principal, bool unknown,
          struct kr_rule_mask *out)
{
    int i, j;

    memset(out, 0, sizeof(*out));
    if (rs == NULL) {
        return;
    }
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];
        bool ok = true;

        if (r->listener.n > 0) {
            ok = false;
            for (j = 0; j < r->listener.n && listener != NULL; j++) {
                ok = ok || strcmp(r->listener.v[j], listener) == 0;
            }
        }
        if (ok && r->nclient_address > 0) {
            ok = false;
            for (j = 0; j < r->nclient_address; j++) {
                ok = ok || kr_cidr_match(&r->client_address[j], sa);
            }
        }
        if (ok && r->principal.n > 0 && unknown) {
            ok = kr_rule_enforces(r) || r->audit;       /* fail closed */
        } else if (ok && r->principal.n > 0) {
            ok = principal != NULL &&
                 globs_match(&r->principal, principal, strlen(principal));
        }
        if (ok) {
            mask_set(out, i);
        }
    }
}

void
kr_rule_conn_mask(const struct kr_ruleset *rs, const char *listener,
                  const struct sockaddr *sa, const char *principal,
                  struct kr_rule_mask *out)
{
    conn_mask(rs, listener, sa, principal, false, out);
}

void
kr_rule_conn_mask_unknown(const struct kr_ruleset *rs, const char *listener,
                          const struct sockaddr *sa,
                          struct kr_rule_mask *out)
{
    conn_mask(rs, listener, sa, NULL, true, out);
}

const struct kr_rule_slot *
kr_rule_lookup(const struct kr_ruleset *rs, int16_t api_key,
               int16_t api_version, const struct kr_rule_mask *conn)
{
    const struct kr_rule_slot *sl;
    const struct kr_api_desc *a;

    if (rs == NULL || api_key < 0 || api_key >= rs->ntab ||
        rs->tab[api_key] == NULL || api_version < 0) {
        return NULL;
    }
    a = &kr_apis[api_key];
    if (api_version > a->valid.hi) {
        return NULL;
    }
    sl = &rs->tab[api_key][api_version];
    if (!kr_rule_mask_any(&sl->req, conn) &&
        !kr_rule_mask_any(&sl->rsp, conn)) {
        return NULL;
    }
    return sl;
}

/* ---- evaluation --------------------------------------------------------- */

struct topic_match {
    const struct kr_strlist *globs;
    bool hit;
};

static bool
topic_cb(void *arg, const char *topic, size_t len, unsigned partitions)
{
    struct topic_match *tm = arg;

    (void)partitions;
    if (globs_match(tm->globs, topic, len)) {
        tm->hit = true;
        return false;
    }
    return true;
}

static bool
client_id_of(const struct kr_msg *req, const char **p, size_t *len)
{
    const struct kr_val *v = req->header != NULL
                                 ? kr_node_get_id(req->header,
                                                  KR_FIELD_CLIENT_ID)
                                 : NULL;

    if (v == NULL || !v->present || v->is_null || v->u.s.len < 0) {
        return false;
    }
    *p = (const char *)v->u.s.p;
    *len = (size_t)v->u.s.len;
    return true;
}

bool
kr_rule_eval(const struct kr_ruleset *rs, const struct kr_rule_slot *slot,
             const struct kr_rule_mask *conn, const struct kr_msg *req,
             const struct kr_topic_map *map, struct kr_verdict *v)
{
    const char *cid = NULL;
    size_t cidlen = 0;
    bool have_cid, matched = false, clamp_seen = false, policy_seen = false;
    int i;

    memset(v, 0, sizeof(*v));
    v->deny_rule = v->clamp_rule = v->policy_rule = v->throttle_rule =
        v->fault_rule = -1;
    if (rs == NULL || slot == NULL || req == NULL) {
        return false;
    }
    have_cid = client_id_of(req, &cid, &cidlen);
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];
        bool in_req = kr_rule_mask_has(&slot->req, i),
             in_rsp = kr_rule_mask_has(&slot->rsp, i);
        /*
         * A clamp-only rule is in the slots of versions outside its clamp
         * only; but the first clamp naming the API wins even when the
         * request is inside it, so every clamp rule is looked at.
         */
        bool clampable = has_clamp(r) && (r->direction & KR_RDIR_REQUEST) &&
                         names_api(r, req->api_key) &&
                         req->api_version >= r->versions_min &&
                         req->api_version <= r->versions_max;

        if ((!in_req && !in_rsp && !clampable) ||
            !kr_rule_mask_has(conn, i)) {
            continue;
        }
        if (r->client_id.n > 0 &&
            (!have_cid || !globs_match(&r->client_id, cid, cidlen))) {
            continue;
        }
        if (r->topic.n > 0) {
            struct topic_match tm = { &r->topic, false };

            kr_topics_each(req, map, topic_cb, &tm);
            if (!tm.hit) {
                if (in_req && rule_enforces_request(r, req->api_key,
                                                    req->api_version) &&
                    kr_topics_unresolved(req, map) > 0) {
                    /* a TopicId krelay has not learned may name a topic
                       this rule covers: fail closed (issue 13) */
                    matched = true;
                    v->flags |= KR_VF_UNKNOWN_TOPIC_ID;
                    v->deny_rule = i;
                    break;
                }
                continue;
            }
        }
        matched = true;
        if (r->audit) {
            /* no conflict to settle: audited if any matching rule says
               so, with bodies if any of them asks (a narrow audit_body
               rule after a broad audit rule still gets its bodies) */
            v->flags |= KR_VF_AUDIT;
            v->audit_body = v->audit_body || r->audit_body;
        }
        if (clampable && !clamp_seen) {
            clamp_seen = true;
            v->clamp_min = (int16_t)(r->clamp_min_version >= 0
                                         ? r->clamp_min_version : 0);
            v->clamp_max = (int16_t)(r->clamp_max_version >= 0
                                         ? r->clamp_max_version
                                         : INT16_MAX);
            v->clamp_rule = i;
            if (outside_clamp(r, req->api_version)) {
                v->flags |= KR_VF_CLAMP;
            }
        }
        if (in_req) {
            if (r->deny) {
                v->flags |= KR_VF_DENY;
                /* -1: the API's default (kr_action_deny_error) */
                v->deny_error = (int16_t)r->deny_error;
                v->deny_rule = i;
                break;          /* a deny ends the evaluation */
            }
            if (has_policy(r) && !policy_seen &&
                req->api_key == KR_API_PRODUCE) {
                policy_seen = true;
                v->flags |= KR_VF_POLICY;
                v->acks_mask = r->allowed_acks;
                v->codec_mask = r->allowed_compression;
                v->policy_rule = i;
            }
        }
        if (in_rsp) {
            if (r->throttle_ms >= 0 && !(v->flags & KR_VF_THROTTLE)) {
                v->flags |= KR_VF_THROTTLE;
                v->throttle_ms = r->throttle_ms;
                v->throttle_jitter_ms = r->throttle_jitter_ms;
                v->throttle_add = r->throttle_op == KR_THROTTLE_ADD;
                v->throttle_enforce = r->throttle_mode == KR_THROTTLE_ENFORCE;
                v->throttle_rule = i;
            }
            if (r->fault_latency_ms > 0 && !(v->flags & KR_VF_LATENCY)) {
                v->flags |= KR_VF_LATENCY;
                v->latency_ms = r->fault_latency_ms;
                v->fault_rule = v->fault_rule < 0 ? i : v->fault_rule;
            }
            if (r->fault_error >= 0 && !(v->flags & KR_VF_ERROR)) {
                v->flags |= KR_VF_ERROR;
                v->fault_error = (int16_t)r->fault_error;
                v->fault_error_p = r->fault_error_probability;
                v->fault_rule = v->fault_rule < 0 ? i : v->fault_rule;
            }
            if (r->fault_close_probability > 0 &&
                !(v->flags & KR_VF_CLOSE)) {
                v->flags |= KR_VF_CLOSE;
                v->fault_close_p = r->fault_close_probability;
                v->fault_rule = v->fault_rule < 0 ? i : v->fault_rule;
            }
        }
    }
    return matched;
}

enum kr_rule_need
kr_rule_eval_header(const struct kr_ruleset *rs,
                    const struct kr_rule_slot *slot,
                    const struct kr_rule_mask *conn, int16_t api_key,
                    int16_t api_version, const char *cid, size_t cidlen,
                    struct kr_verdict *v)
{
    int i;

    memset(v, 0, sizeof(*v));
    v->deny_rule = v->clamp_rule = v->policy_rule = v->throttle_rule =
        v->fault_rule = -1;
    if (rs == NULL || slot == NULL) {
        return KR_RULE_NEEDS_BODY;
    }
    /* kr_rule_eval's walk, stopping at anything it needs the body for */
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];
        bool in_req = kr_rule_mask_has(&slot->req, i),
             in_rsp = kr_rule_mask_has(&slot->rsp, i);
        bool clampable = has_clamp(r) && (r->direction & KR_RDIR_REQUEST) &&
                         names_api(r, api_key) &&
                         api_version >= r->versions_min &&
                         api_version <= r->versions_max;

        if ((!in_req && !in_rsp && !clampable) ||
            !kr_rule_mask_has(conn, i)) {
            continue;
        }
        if (r->client_id.n > 0 &&
            (cid == NULL || !globs_match(&r->client_id, cid, cidlen))) {
            continue;
        }
        if (r->topic.n > 0 || clampable ||
            (in_req && (r->deny || has_policy(r))) ||
            (in_rsp && (r->throttle_ms >= 0 || has_fault(r)))) {
            return KR_RULE_NEEDS_BODY;
        }
        if (r->audit) {
            v->flags |= KR_VF_AUDIT;
            v->audit_body = v->audit_body || r->audit_body;
        }
    }
    return v->audit_body ? KR_RULE_NEEDS_BODY : KR_RULE_HEADER_ENOUGH;
}

/* ---- requests krelay cannot decode (issue 13) ----------------------- */

/* Could rule r match (api_key, api_version) from what the header says? */
static bool
header_match(const struct kr_rule_conf *r, int16_t api_key,
             int16_t api_version, const char *cid, size_t cidlen)
{
    const struct kr_api_desc *a = kr_api_get(api_key);

    /* a negative ApiVersion is no version at all: any range may hold */
    if (!names_api(r, api_key) ||
        (api_version >= 0 && (api_version < r->versions_min ||
                              api_version > r->versions_max))) {
        return false;
    }
    if (r->client_id.n > 0 &&
        (cid == NULL || !globs_match(&r->client_id, cid, cidlen))) {
        return false;
    }
    /* known layout whose requests cannot name a topic: add_rule's test */
    if (r->topic.n > 0 && a != NULL && api_version >= a->valid.lo &&
        api_version <= a->valid.hi &&
        !kr_topics_possible(kr_api_root(a, false, api_version))) {
        return false;
    }
    return true;
}

void
kr_rule_gate(const struct kr_ruleset *rs, const struct kr_rule_mask *conn,
             int16_t api_key, int16_t api_version, const char *client_id,
             size_t client_id_len, struct kr_gate_result *out)
{
    bool throttle_seen = false;
    int i;

    memset(out, 0, sizeof(*out));
    out->gate = KR_GATE_PASS;
    out->rule = -1;
    if (rs == NULL || conn == NULL) {
        return;
    }
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];
        bool enf, obs;

        if (!kr_rule_mask_has(conn, i) ||
            !header_match(r, api_key, api_version, client_id,
                          client_id_len)) {
            continue;
        }
        enf = rule_enforces_request(r, api_key, api_version) ||
              rule_enforces_response(r);
        obs = r->audit ||
              ((r->direction & KR_RDIR_RESPONSE) &&
               (r->throttle_ms >= 0 || has_fault(r)));
        if (r->audit) {
            out->audit = true;
        }
        if ((r->direction & KR_RDIR_RESPONSE) && r->throttle_ms >= 0 &&
            !throttle_seen) {
            throttle_seen = true;
            out->throttle_enforce = r->throttle_mode == KR_THROTTLE_ENFORCE;
            out->throttle_ms = r->throttle_ms;
        }
        if (enf && out->gate != KR_GATE_REFUSE) {
            out->gate = KR_GATE_REFUSE;
            out->rule = i;
        } else if (obs && out->gate == KR_GATE_PASS) {
            out->gate = KR_GATE_OBSERVE;
            out->rule = i;
        }
    }
}

/*
 * Could rule r enforce something on a request of ApiKey api at some
 * version above hi (the tables' max), from ClientId cid?  Its versions
 * there are [max(hi + 1, versions_min), versions_max]; a clamp enforces
 * only on the ones outside it.
 */
static bool
enforces_above(const struct kr_rule_conf *r, int16_t api, int32_t hi,
               const char *cid, size_t cidlen)
{
    int32_t lo = hi + 1 > r->versions_min ? hi + 1 : r->versions_min;
    int32_t top = r->versions_max;

    if (lo > top || !header_match(r, api, (int16_t)lo, cid, cidlen)) {
        return false;
    }
    if (rule_enforces_response(r) ||
        ((r->direction & KR_RDIR_REQUEST) &&
         (r->deny || (has_policy(r) && api == KR_API_PRODUCE)))) {
        return true;
    }
    return (r->direction & KR_RDIR_REQUEST) && has_clamp(r) &&
           ((r->clamp_min_version >= 0 && lo < r->clamp_min_version) ||
            (r->clamp_max_version >= 0 && top > r->clamp_max_version));
}

bool
kr_rule_conn_enforced(const struct kr_ruleset *rs,
                      const struct kr_rule_mask *conn, const char *client_id,
                      size_t client_id_len, bool *enforced)
{
    struct kr_gate_result g;
    int16_t k;
    int i;

    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *a = kr_api_get(k);

        enforced[k] = false;
        if (a == NULL || a->valid.hi < a->valid.lo ||
            a->valid.hi == INT16_MAX) {
            continue;
        }
        for (i = 0; rs != NULL && i < rs->nrules && !enforced[k]; i++) {
            enforced[k] = kr_rule_mask_has(conn, i) &&
                          enforces_above(&rs->conf->rules[i], k,
                                         a->valid.hi, client_id,
                                         client_id_len);
        }
    }
    /* an ApiKey no table knows: only rules without `api` can match it */
    kr_rule_gate(rs, conn, INT16_MAX, -1, client_id, client_id_len, &g);
    return g.gate == KR_GATE_REFUSE;
}

bool
kr_rule_conn_topic_enforced(const struct kr_ruleset *rs,
                            const struct kr_rule_mask *conn, int16_t api)
{
    int i;

    for (i = 0; rs != NULL && i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];

        if (kr_rule_mask_has(conn, i) && r->topic.n > 0 &&
            names_api(r, api) && kr_rule_enforces(r)) {
            return true;
        }
    }
    return false;
}

int
kr_rule_conn_clamps(const struct kr_ruleset *rs,
                    const struct kr_rule_mask *conn, const char *client_id,
                    size_t client_id_len, struct kr_clamp *clamps,
                    bool *pass_unknown)
{
    int i, j, n = 0;
    int16_t k;

    for (k = 0; k <= kr_api_max; k++) {
        clamps[k].min = 0;
        clamps[k].max = -1;
    }
    *pass_unknown = false;
    if (rs == NULL) {
        return 0;
    }
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];

        if (!kr_rule_mask_has(conn, i) || r->topic.n > 0 || r->deny ||
            !(r->direction & KR_RDIR_REQUEST)) {
            continue;
        }
        if (r->client_id.n > 0 &&
            (client_id == NULL ||
             !globs_match(&r->client_id, client_id, client_id_len))) {
            continue;
        }
        *pass_unknown = *pass_unknown || r->pass_unknown_apis;
        if (!has_clamp(r)) {
            continue;
        }
        for (j = 0; j < r->napi; j++) {
            struct kr_clamp *c = &clamps[r->api[j]];

            if (c->min <= c->max) {
                continue;       /* an earlier rule clamps it */
            }
            c->min = (int16_t)(r->clamp_min_version >= 0
                                   ? r->clamp_min_version : 0);
            c->max = (int16_t)(r->clamp_max_version >= 0
                                   ? r->clamp_max_version : INT16_MAX);
            n++;
        }
    }
    return n;
}

/* ---- printing ----------------------------------------------------------- */

static void
print_list(FILE *f, const char *key, const struct kr_strlist *l)
{
    int i;

    if (l->n == 0) {
        return;
    }
    fprintf(f, " %s=", key);
    for (i = 0; i < l->n; i++) {
        fprintf(f, "%s%s", i ? "," : "", l->v[i]);
    }
}

static const char *
api_name(int16_t k)
{
    const struct kr_api_desc *a = kr_api_get(k);

    return a != NULL && a->name != NULL ? a->name : "?";
}

/*
 * The produce policy as the config writes it: "policy(allowed_acks =
 * all,1, allowed_compression = none,zstd)" (kr_rule_conf.allowed_acks:
 * bit acks + 1, -1 written "all").
 */
static void
print_policy(const struct kr_rule_conf *r, FILE *f)
{
    static const char *const acks[] = { "all", "0", "1" };
    const char *sep = "";
    int b;

    fprintf(f, " policy(");
    if (r->allowed_acks != 0) {
        fprintf(f, "allowed_acks = ");
        for (b = 0; b < (int)KR_ARRAY_LEN(acks); b++) {
            if (r->allowed_acks & (1u << b)) {
                fprintf(f, "%s%s", sep, acks[b]);
                sep = ",";
            }
        }
        sep = ", ";
    }
    if (r->allowed_compression != 0) {
        fprintf(f, "%sallowed_compression = ", sep);
        sep = "";
        for (b = 0; kr_conf_codec_name(b) != NULL; b++) {
            if (r->allowed_compression & (1u << b)) {
                fprintf(f, "%s%s", sep, kr_conf_codec_name(b));
                sep = ",";
            }
        }
    }
    fputc(')', f);
}

static void
print_rule(const struct kr_rule_conf *r, int i, FILE *f)
{
    static const char *const dirs[] = { "", "request", "response", "both" };
    char a[INET6_ADDRSTRLEN], eb[KR_KERR_BUFLEN];
    int j;

    fprintf(f, "rule %d [rule %s] (line %d):\n  match:", i + 1, r->name,
            r->line);
    print_list(f, "listener", &r->listener);
    if (r->nclient_address > 0) {
        fprintf(f, " client_address=");
        for (j = 0; j < r->nclient_address; j++) {
            inet_ntop(r->client_address[j].family, r->client_address[j].addr,
                      a, sizeof(a));
            fprintf(f, "%s%s/%u", j ? "," : "", a,
                    (unsigned)r->client_address[j].bits);
        }
    }
    print_list(f, "client_id", &r->client_id);
    print_list(f, "principal", &r->principal);
    if (r->napi > 0) {
        fprintf(f, " api=");
        for (j = 0; j < r->napi; j++) {
            fprintf(f, "%s%s", j ? "," : "", api_name(r->api[j]));
        }
    } else {
        fprintf(f, " api=*");
    }
    if (r->versions_min != 0 || r->versions_max != INT16_MAX) {
        fprintf(f, " versions=%d-%d", (int)r->versions_min,
                (int)r->versions_max);
    }
    fprintf(f, " direction=%s", dirs[r->direction & 3]);
    print_list(f, "topic", &r->topic);
    fprintf(f, "\n  actions:");
    if (r->deny && r->deny_error >= 0) {
        fprintf(f, " deny(%s)", kr_kerr_format((int16_t)r->deny_error, eb,
                                               sizeof(eb)));
    } else if (r->deny) {
        fprintf(f, " deny(the API's default error)");
    }
    if (has_clamp(r)) {
        fprintf(f, " clamp(%d-%d)", (int)(r->clamp_min_version >= 0
                                              ? r->clamp_min_version : 0),
                (int)(r->clamp_max_version >= 0 ? r->clamp_max_version
                                                : INT16_MAX));
    }
    if (r->pass_unknown_apis) {
        fprintf(f, " pass_unknown_apis");
    }
    if (has_policy(r)) {
        print_policy(r, f);
    }
    if (r->audit) {
        fprintf(f, " audit%s", r->audit_body ? "(body)" : "");
    }
    if (r->throttle_ms >= 0) {
        fprintf(f, " throttle(%s %d ms, %s, jitter %d ms)",
                r->throttle_op == KR_THROTTLE_ADD ? "add" : "set",
                (int)r->throttle_ms,
                r->throttle_mode == KR_THROTTLE_ENFORCE ? "enforce"
                                                        : "inject",
                (int)r->throttle_jitter_ms);
    }
    if (r->fault_latency_ms > 0) {
        fprintf(f, " latency(%d ms)", (int)r->fault_latency_ms);
    }
    if (r->fault_error >= 0) {
        fprintf(f, " fault_error(%s, p=%g)",
                kr_kerr_format((int16_t)r->fault_error, eb, sizeof(eb)),
                r->fault_error_probability);
    }
    if (r->fault_close_probability > 0) {
        fprintf(f, " fault_close(p=%g)", r->fault_close_probability);
    }
    fputc('\n', f);
}

static bool
slot_eq(const struct kr_rule_slot *a, const struct kr_rule_slot *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

static bool
slot_empty(const struct kr_rule_slot *a)
{
    static const struct kr_rule_slot zero;

    return slot_eq(a, &zero);
}

static void
print_mask(FILE *f, const struct kr_ruleset *rs,
           const struct kr_rule_mask *m)
{
    int i;
    bool first = true;

    for (i = 0; i < rs->nrules; i++) {
        if (kr_rule_mask_has(m, i)) {
            fprintf(f, "%s%s", first ? "" : ",", rs->conf->rules[i].name);
            first = false;
        }
    }
    if (first) {
        fprintf(f, "-");
    }
}

/* Could rules a and b apply to one connection (their listener lists)? */
static bool
listeners_overlap(const struct kr_rule_conf *a, const struct kr_rule_conf *b)
{
    int i, j;

    if (a->listener.n == 0 || b->listener.n == 0) {
        return true;
    }
    for (i = 0; i < a->listener.n; i++) {
        for (j = 0; j < b->listener.n; j++) {
            if (strcmp(a->listener.v[i], b->listener.v[j]) == 0) {
                return true;
            }
        }
    }
    return false;
}

unsigned
kr_rule_warnings(const struct kr_ruleset *rs, FILE *f)
{
    const char *path;
    unsigned n;
    int i, j;

    if (rs == NULL) {
        return 0;
    }
    n = kr_conf_warnings(rs->conf, f);
    path = rs->conf->path != NULL ? rs->conf->path : "(config)";
    for (i = 0; i < rs->nrules; i++) {
        const struct kr_rule_conf *r = &rs->conf->rules[i];

        if (!r->pass_unknown_apis) {
            continue;
        }
        for (j = 0; j < rs->nrules; j++) {
            const struct kr_rule_conf *e = &rs->conf->rules[j];

            if (e->napi == 0 && kr_rule_enforces(e) &&
                listeners_overlap(r, e)) {
                fprintf(f, "%s:%d: [rule %s]: pass_unknown_apis "
                        "has no effect on connections [rule %s] (line %d) "
                        "could match: an enforcing rule without `api` "
                        "covers ApiKeys krelay cannot decode, so they are "
                        "left out of ApiVersions and refused\n", path,
                        r->line, r->name, e->name, e->line);
                n++;
                break;
            }
        }
    }
    return n;
}

void
kr_rule_print(const struct kr_ruleset *rs, FILE *f)
{
    int i;
    int16_t k, v, hi;
    unsigned slots = 0;

    if (rs == NULL || rs->nrules == 0) {
        fprintf(f, "rules: none (every frame passes through)\n");
        return;
    }
    fprintf(f, "rules: %d, in precedence order\n", rs->nrules);
    for (i = 0; i < rs->nrules; i++) {
        print_rule(&rs->conf->rules[i], i, f);
    }
    fprintf(f, "compiled table (ApiKey, versions: request-side rules / "
            "response-side rules; other frames pass through):\n");
    for (k = 0; k < rs->ntab; k++) {
        if (rs->tab[k] == NULL) {
            continue;
        }
        hi = kr_apis[k].valid.hi;
        for (v = 0; v <= hi; v++) {
            int16_t w = v;
            const struct kr_rule_slot *s = &rs->tab[k][v];

            if (slot_empty(s)) {
                continue;
            }
            while (w + 1 <= hi && slot_eq(&rs->tab[k][w + 1], s)) {
                w++;
            }
            fprintf(f, "  %s v%d", api_name(k), v);
            if (w > v) {
                fprintf(f, "-%d", w);
            }
            fprintf(f, ": ");
            print_mask(f, rs, &s->req);
            fprintf(f, " / ");
            print_mask(f, rs, &s->rsp);
            fputc('\n', f);
            slots += (unsigned)(w - v + 1);
            v = w;
        }
    }
    fprintf(f, "%u (ApiKey, ApiVersion) slot%s rules\n", slots,
            slots == 1 ? " has" : "s have");
}
