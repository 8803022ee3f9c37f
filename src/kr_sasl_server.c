/*
 * kr_sasl_server.c - SASL termination: a client authenticated by krelay
 * (see include/kr_sasl_server.h for what a broker does and so krelay).
 */
#include "kr_sasl_server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "kr_api_keys.h"
#include "kr_clock.h"
#include "kr_codec.h"
#include "kr_field_ids.h"
#include "kr_kerr.h"
#include "kr_sasl_token.h"
#include "kr_sasl_users.h"
#include "kr_schema.h"

/* Kafka's answer to any refused credentials (SaslServerAuthenticator:
   "DO NOT include error message from the SaslException ... since it may
   contain sensitive data like the existence of the user") */
#define MSG_BAD_CREDS_FMT "Authentication failed during %s due to " \
    "invalid credentials with SASL mechanism %s"
#define MSG_RATE "Authentication failed: too many logins from this " \
    "address, retry later"
#define MSG_PLAIN_MALFORMED "Invalid SASL/PLAIN response"
#define MSG_SCRAM_MALFORMED "Authentication failed: Invalid SCRAM " \
    "client message"
#define MSG_AFTER_AUTH "SaslAuthenticate request received after " \
    "successful authentication"

static const char *const mech_names[KR_SASL_SRV_NMECH] = {
    "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"
};

const char *
kr_sasl_srv_mech_name(enum kr_sasl_srv_mech m)
{
    return (unsigned)m < KR_SASL_SRV_NMECH ? mech_names[m] : "?";
}

static bool
mech_of(const uint8_t *p, size_t len, enum kr_sasl_srv_mech *m)
{
    unsigned i;

    for (i = 0; i < KR_SASL_SRV_NMECH; i++) {
        if (strlen(mech_names[i]) == len &&
            memcmp(mech_names[i], p, len) == 0) {
            *m = (enum kr_sasl_srv_mech)i;
            return true;
        }
    }
    return false;
}

bool
kr_sasl_srv_mechs_parse(const char *list,
                        enum kr_sasl_srv_mech order[KR_SASL_SRV_NMECH],
                        unsigned *n, char *why, size_t wlen)
{
    const char *p = list;
    unsigned seen = 0;

    *n = 0;
    for (;;) {
        const char *s, *e;
        enum kr_sasl_srv_mech m;
        int il;

        while (*p == ' ' || *p == '\t') {
            p++;
        }
        s = p;
        while (*p != '\0' && *p != ',') {
            p++;
        }
        e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t')) {
            e--;
        }
        il = e - s > 64 ? 64 : (int)(e - s);
        if (e == s) {
            snprintf(why, wlen, "%s", *n == 0 && *p == '\0'
                     ? "no mechanism named" : "an empty name in the list");
            return false;
        }
        if (!mech_of((const uint8_t *)s, (size_t)(e - s), &m)) {
            if (e - s == 11 && memcmp(s, "OAUTHBEARER", 11) == 0) {
                snprintf(why, wlen, "krelay cannot terminate OAUTHBEARER "
                         "(passthrough and origination only)");
            } else if (e - s == 6 && memcmp(s, "GSSAPI", 6) == 0) {
                snprintf(why, wlen, "krelay cannot terminate GSSAPI "
                         "(passthrough only)");
            } else {
                snprintf(why, wlen, "unknown mechanism '%.*s' (krelay "
                         "terminates PLAIN, SCRAM-SHA-256 and "
                         "SCRAM-SHA-512)", il, s);
            }
            return false;
        }
        if (seen & (1u << m)) {
            snprintf(why, wlen, "%s named twice", mech_names[m]);
            return false;
        }
        seen |= 1u << m;
        order[(*n)++] = m;
        if (*p == '\0') {
            return true;
        }
        p++;                            /* the comma */
    }
}

/* ---- login rate ---------------------------------------------------------- */

struct rate_ent {
    uint8_t key[KR_SASL_RATE_KEY_MAX];
    uint8_t keylen;                     /* 0: free */
    double tokens;
    int64_t last_ms;
};

struct kr_sasl_rate {
    pthread_mutex_t mu;
    double per_sec;
    double burst;
    uint8_t hkey[16];                   /* SipHash key */
    struct rate_ent ent[KR_SASL_RATE_SETS][KR_SASL_RATE_WAYS];
};

struct kr_sasl_rate *
kr_sasl_rate_new(double per_sec, unsigned burst)
{
    struct kr_sasl_rate *r;

    if (!(per_sec > 0) || burst == 0) {
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    if (RAND_bytes(r->hkey, sizeof(r->hkey)) != 1 ||
        pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->per_sec = per_sec;
    r->burst = burst;
    return r;
}

void
kr_sasl_rate_free(struct kr_sasl_rate *r)
{
    if (r != NULL) {
        pthread_mutex_destroy(&r->mu);
        free(r);
    }
}

/* The set of a key: SipHash-2-4 (OpenSSL's) keyed by a random secret, so
   the sets addresses fall into cannot be chosen from outside. */
static unsigned
rate_set(const struct kr_sasl_rate *r, const uint8_t *key, size_t keylen)
{
    uint8_t out[8];
    size_t outlen = 0;
    uint64_t h = 0;
    unsigned i;

    if (EVP_Q_mac(NULL, "SIPHASH", NULL, NULL, NULL, r->hkey,
                  sizeof(r->hkey), key, keylen, out, sizeof(out),
                  &outlen) == NULL || outlen != sizeof(out)) {
        /* no SipHash: a plain mix (still bounded, only less even) */
        for (i = 0; i < keylen; i++) {
            h = (h ^ key[i]) * 0x100000001b3ULL;
        }
        return (unsigned)(h % KR_SASL_RATE_SETS);
    }
    for (i = 0; i < 8; i++) {
        h = h << 8 | out[i];
    }
    return (unsigned)(h % KR_SASL_RATE_SETS);
}

static double
refill(const struct kr_sasl_rate *r, const struct rate_ent *e, int64_t now)
{
    double t = e->tokens;

    if (now > e->last_ms) {
        t += (double)(now - e->last_ms) * r->per_sec / 1000.0;
    }
    return t > r->burst ? r->burst : t;
}

bool
kr_sasl_rate_take(struct kr_sasl_rate *r, const void *key, size_t keylen,
                  int64_t now_ms)
{
    struct rate_ent *set, *e = NULL;
    unsigned i;
    bool ok;

    if (r == NULL || keylen == 0) {
        return true;
    }
    if (keylen > KR_SASL_RATE_KEY_MAX) {
        keylen = KR_SASL_RATE_KEY_MAX;
    }
    pthread_mutex_lock(&r->mu);
    set = r->ent[rate_set(r, key, keylen)];
    for (i = 0; i < KR_SASL_RATE_WAYS; i++) {
        if (set[i].keylen == keylen && memcmp(set[i].key, key, keylen) == 0) {
            e = &set[i];
            e->tokens = refill(r, e, now_ms);
            break;
        }
    }
    if (e == NULL) {
        /* a free way, else the one whose bucket is fullest now */
        double best = -1;

        for (i = 0; i < KR_SASL_RATE_WAYS; i++) {
            double t = set[i].keylen == 0 ? r->burst + 1
                                          : refill(r, &set[i], now_ms);

            if (t > best) {
                best = t;
                e = &set[i];
            }
        }
        memcpy(e->key, key, keylen);
        e->keylen = (uint8_t)keylen;
        e->tokens = r->burst;
    }
    if (now_ms > e->last_ms) {
        e->last_ms = now_ms;
    }
    ok = e->tokens >= 1.0;
    if (ok) {
        e->tokens -= 1.0;
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* ---- settings ------------------------------------------------------------ */

/* The cfg's clock unless a test replaces it: the session's. */
static int64_t
clock_timer(void *arg)
{
    (void)arg;
    return kr_clock_timer_ms();
}

struct kr_sasl_srv_cfg *
kr_sasl_srv_cfg_new(const enum kr_sasl_srv_mech *order, unsigned n,
                    struct kr_sasl_users *users, int64_t session_lifetime_ms,
                    double per_sec, unsigned burst)
{
    struct kr_sasl_srv_cfg *c = calloc(1, sizeof(*c));
    uint8_t pw[32], salt[KR_SCRAM_SALT_LEN];
    uint32_t iter = KR_SCRAM_ITER_DEFAULT;
    enum kr_scram_hash h = KR_SCRAM_SHA512;
    unsigned i;
    bool ok;

    if (c == NULL || n == 0 || n > KR_SASL_SRV_NMECH) {
        free(c);
        kr_sasl_users_free(users);
        return NULL;
    }
    memcpy(c->order, order, n * sizeof(*order));
    c->nmech = n;
    c->users = users;
    c->session_lifetime_ms = session_lifetime_ms > 0 ? session_lifetime_ms
                                                     : 0;
    c->clock_fn = clock_timer;
    if (users != NULL && users->n > 0) {
        iter = users->v[0].cred.iterations;
        h = users->v[0].cred.hash;
    }
    /* an unknown SCRAM user's server-first: shaped as a known one's */
    for (i = 0; i < 2; i++) {
        const struct kr_scram_cred *f = NULL;
        size_t j;

        for (j = 0; users != NULL && j < users->n && f == NULL; j++) {
            if (users->v[j].cred.hash == (enum kr_scram_hash)i) {
                f = &users->v[j].cred;
            }
        }
        if (f == NULL && users != NULL && users->n > 0) {
            f = &users->v[0].cred;
        }
        c->mock_iter[i] = f != NULL ? f->iterations : KR_SCRAM_ITER_DEFAULT;
        c->mock_salt_len[i] = f != NULL ? f->salt_len : KR_SCRAM_SALT_LEN;
    }
    /* a credential no password is known for: unknown PLAIN users are
       checked against it, so they cost one PBKDF2 as known ones do */
    ok = RAND_bytes(c->mock_key, sizeof(c->mock_key)) == 1 &&
         RAND_bytes(pw, sizeof(pw)) == 1 &&
         RAND_bytes(salt, sizeof(salt)) == 1 &&
         kr_scram_cred_derive(&c->plain_mock, h, pw, sizeof(pw), salt,
                              sizeof(salt), iter);
    OPENSSL_cleanse(pw, sizeof(pw));
    if (ok && per_sec > 0) {
        c->rate = kr_sasl_rate_new(per_sec, burst > 0 ? burst : 1);
        ok = c->rate != NULL;
    }
    if (!ok) {
        kr_sasl_srv_cfg_free(c);
        return NULL;
    }
    return c;
}

void
kr_sasl_srv_cfg_free(struct kr_sasl_srv_cfg *c)
{
    if (c == NULL) {
        return;
    }
    kr_sasl_users_free(c->users);
    kr_sasl_rate_free(c->rate);
    kr_scram_cred_wipe(&c->plain_mock);
    OPENSSL_cleanse(c->mock_key, sizeof(c->mock_key));
    free(c);
}

/* ---- one connection ------------------------------------------------------ */

void
kr_sasl_srv_init(struct kr_sasl_srv *s, const struct kr_sasl_srv_cfg *cfg,
                 const void *addr, size_t addr_len)
{
    memset(s, 0, sizeof(*s));
    s->cfg = cfg;
    if (addr_len > sizeof(s->addr)) {
        addr_len = sizeof(s->addr);
    }
    if (addr != NULL && addr_len > 0) {
        memcpy(s->addr, addr, addr_len);
        s->addr_len = addr_len;
    }
}

void
kr_sasl_srv_free(struct kr_sasl_srv *s)
{
    kr_scram_server_free(&s->scram);
    free(s->user);
    free(s->claimed);
    s->user = NULL;
    s->claimed = NULL;
}

static const char *const gate_names[] = {
    "pass", "sasl request", "raw token", "not authenticated",
    "in the middle of an exchange", "session expired"
};

const char *
kr_sasl_srv_gate_name(enum kr_sasl_srv_gate g)
{
    return (unsigned)g < sizeof(gate_names) / sizeof(gate_names[0])
           ? gate_names[g] : "?";
}

static const char *const reason_names[] = {
    NULL, "bad_password", "unknown_user", "no_entry_for_mechanism",
    "rate_limited", "authzid_mismatch", "malformed", "delegation_token",
    "mechanism_changed", "principal_changed", "unsupported_mechanism"
};

const char *
kr_sasl_srv_reason_name(enum kr_sasl_srv_reason r)
{
    return (unsigned)r < sizeof(reason_names) / sizeof(reason_names[0])
           ? reason_names[r] : NULL;
}

static const char *const outcome_names[] = {
    "continue", "authenticated", "failed", "malformed", "rate limited",
    "unsupported mechanism", "illegal state", "out of memory"
};

const char *
kr_sasl_srv_outcome_name(enum kr_sasl_srv_outcome o)
{
    return (unsigned)o < sizeof(outcome_names) / sizeof(outcome_names[0])
           ? outcome_names[o] : "?";
}

static bool
expired(const struct kr_sasl_srv *s, int64_t now_ms)
{
    return s->expires_ms != 0 && now_ms >= s->expires_ms;
}

enum kr_sasl_srv_gate
kr_sasl_srv_gate(const struct kr_sasl_srv *s, int16_t api_key, int64_t now_ms)
{
    switch (s->state) {
    case KR_SASL_SRV_ST_START:
        if (api_key == KR_API_API_VERSIONS) {
            return KR_SASL_SRV_PASS;
        }
        return api_key == KR_API_SASL_HANDSHAKE ? KR_SASL_SRV_MINE
                                                : KR_SASL_SRV_UNAUTHENTICATED;
    case KR_SASL_SRV_ST_HANDSHAKEN:
    case KR_SASL_SRV_ST_SCRAM_FIRST:
        if (s->raw) {
            return KR_SASL_SRV_RAW;
        }
        return api_key == KR_API_SASL_AUTHENTICATE ? KR_SASL_SRV_MINE
                                                   : KR_SASL_SRV_IN_EXCHANGE;
    case KR_SASL_SRV_ST_DONE:
        if (expired(s, now_ms)) {
            /* SocketServer: only a SaslHandshake that begins
               re-authentication (a client that used SaslAuthenticate
               v1+) is taken on an expired session */
            return api_key == KR_API_SASL_HANDSHAKE && s->reauth_capable
                   ? KR_SASL_SRV_MINE : KR_SASL_SRV_EXPIRED;
        }
        return api_key == KR_API_SASL_HANDSHAKE ||
               api_key == KR_API_SASL_AUTHENTICATE ? KR_SASL_SRV_MINE
                                                   : KR_SASL_SRV_PASS;
    case KR_SASL_SRV_ST_FAILED:
    default:
        return KR_SASL_SRV_UNAUTHENTICATED;
    }
}

int64_t
kr_sasl_srv_expires_ms(const struct kr_sasl_srv *s)
{
    return s->expires_ms;
}

/* ---- responses, through the codec --------------------------------------- */

/* A response to req with header and a default body into *rsp. */
static bool
rsp_new(struct kr_arena *a, const struct kr_msg *req, struct kr_msg *rsp)
{
    const struct kr_api_desc *api = kr_api_get(req->api_key);
    uint16_t root;
    int hv;
    struct kr_val *v;

    if (api == NULL) {
        return false;
    }
    root = kr_api_root(api, true, req->api_version);
    hv = kr_response_header_version(req->api_key, req->api_version);
    if (root == KR_NO_STRUCT || hv < 0) {
        return false;
    }
    memset(rsp, 0, sizeof(*rsp));
    rsp->dir = KR_DIR_RESPONSE;
    rsp->api_key = req->api_key;
    rsp->api_version = req->api_version;
    rsp->hdr_version = (int16_t)hv;
    rsp->correlation_id = req->correlation_id;
    rsp->header = kr_node_new(a, kr_response_header_struct, (int16_t)hv);
    rsp->body = kr_node_new(a, root, req->api_version);
    if (rsp->header == NULL || rsp->body == NULL) {
        return false;
    }
    v = kr_node_get_id(rsp->header, KR_FIELD_CORRELATION_ID);
    if (v != NULL) {
        v->u.i = req->correlation_id;
    }
    return true;
}

static void
set_int(struct kr_node *n, enum kr_field_id id, int64_t x)
{
    struct kr_val *v = kr_node_get_id(n, id);

    if (v != NULL && v->present) {
        v->u.i = x;
    }
}

/* A string or bytes field: p (len bytes) or null (p NULL). */
static void
set_str(struct kr_node *n, enum kr_field_id id, const void *p, size_t len)
{
    struct kr_val *v = kr_node_get_id(n, id);

    if (v == NULL || !v->present) {
        return;
    }
    v->u.s.p = p;
    v->u.s.len = p != NULL ? (int32_t)len : -1;
    v->is_null = p == NULL;
}

/* A SaslHandshake response: error and the enabled mechanisms. */
static bool
handshake_rsp(struct kr_sasl_srv *s, struct kr_arena *a,
              const struct kr_msg *req, int16_t error, struct kr_msg *rsp)
{
    struct kr_val *v;
    struct kr_array *arr;
    unsigned i;

    if (!rsp_new(a, req, rsp)) {
        return false;
    }
    set_int(rsp->body, KR_FIELD_ERROR_CODE, error);
    v = kr_node_get_id(rsp->body, KR_FIELD_MECHANISMS);
    if (v == NULL) {
        return false;
    }
    arr = kr_array_new(a, KR_T_STRING, 0, s->cfg->nmech, req->api_version);
    if (arr == NULL) {
        return false;
    }
    for (i = 0; i < s->cfg->nmech; i++) {
        const char *name = mech_names[s->cfg->order[i]];

        arr->items[i].u.s.p = (const uint8_t *)name;
        arr->items[i].u.s.len = (int32_t)strlen(name);
        arr->items[i].present = 1;
        arr->items[i].is_null = 0;
    }
    v->u.arr = arr;
    v->is_null = 0;
    return true;
}

/* A SaslAuthenticate response: error, message (NULL: null), AuthBytes
   (copied into the arena), SessionLifetimeMs where the version has it. */
static bool
auth_rsp(struct kr_arena *a, const struct kr_msg *req, int16_t error,
         const char *msg, const void *bytes, size_t len, int64_t lifetime,
         struct kr_msg *rsp)
{
    uint8_t *copy = NULL;

    if (!rsp_new(a, req, rsp)) {
        return false;
    }
    if (len > 0) {
        copy = kr_arena_alloc(a, len);
        if (copy == NULL) {
            return false;
        }
        memcpy(copy, bytes, len);
    }
    set_int(rsp->body, KR_FIELD_ERROR_CODE, error);
    set_str(rsp->body, KR_FIELD_ERROR_MESSAGE, msg, msg ? strlen(msg) : 0);
    set_str(rsp->body, KR_FIELD_AUTH_BYTES, copy != NULL ? copy
                                                         : (const void *)"",
            len);
    set_int(rsp->body, KR_FIELD_SESSION_LIFETIME_MS, lifetime);
    return true;
}

/* ---- steps --------------------------------------------------------------- */

static void
fail(struct kr_sasl_srv *s, struct kr_sasl_srv_result *res,
     enum kr_sasl_srv_outcome o, enum kr_sasl_srv_reason r, const char *why)
{
    kr_scram_server_free(&s->scram);
    memset(&s->scram, 0, sizeof(s->scram));
    s->state = KR_SASL_SRV_ST_FAILED;
    res->outcome = o;
    res->reason = r;
    res->close = true;
    res->why = why;
}

/* A SCRAM refusal's reason (the client's messages wrong: malformed). */
static enum kr_sasl_srv_reason
scram_reason(enum kr_scram_outcome o)
{
    switch (o) {
    case KR_SCRAM_BAD_PROOF:
        return KR_SASL_SRV_R_BAD_PASSWORD;
    case KR_SCRAM_UNKNOWN_USER:
        return KR_SASL_SRV_R_UNKNOWN_USER;
    case KR_SCRAM_AUTHZID_MISMATCH:
        return KR_SASL_SRV_R_AUTHZID_MISMATCH;
    case KR_SCRAM_TOKENAUTH:
        return KR_SASL_SRV_R_DELEGATION_TOKEN;
    default:
        return KR_SASL_SRV_R_MALFORMED;
    }
}

static bool
set_claimed(struct kr_sasl_srv *s, const uint8_t *p, size_t len)
{
    char *u = malloc(len + 1);

    if (u == NULL) {
        return false;
    }
    memcpy(u, p, len);
    u[len] = '\0';
    free(s->claimed);
    s->claimed = u;
    return true;
}

/*
 * The exchange succeeded for s->claimed: the principal check on
 * re-authentication, the lifetime (from now, the check done: the cfg's
 * clock, not the step's now_ms read before its PBKDF2), the state.
 * False: the principal changed (res filled as a failure, *msg the
 * client's message).
 */
static bool
succeed(struct kr_sasl_srv *s, struct kr_arena *a,
        struct kr_sasl_srv_result *res, const char **msg)
{
    if (s->authenticated && strcmp(s->user, s->claimed) != 0) {
        /* ReauthInfo.ensurePrincipalUnchanged */
#define PRINCIPAL_FMT "Cannot change principals during " \
    "re-authentication from User.%s: User.%s"
        size_t n = sizeof(PRINCIPAL_FMT) + strlen(s->user) +
                   strlen(s->claimed);
        char *m = a != NULL ? kr_arena_alloc(a, n) : NULL;

        if (m != NULL) {
            snprintf(m, n, PRINCIPAL_FMT, s->user, s->claimed);
        }
        *msg = m;
        fail(s, res, KR_SASL_SRV_FAILED, KR_SASL_SRV_R_PRINCIPAL_CHANGED,
             "principal changed on re-authentication");
        return false;
    }
    if (!s->authenticated) {
        s->user = s->claimed;
        s->claimed = NULL;
        s->auth_mech = s->mech;
        s->authenticated = true;
    }
    res->why = s->reauth ? "re-authenticated" : "authenticated";
    s->state = KR_SASL_SRV_ST_DONE;
    s->reauth = false;
    kr_scram_server_free(&s->scram);
    memset(&s->scram, 0, sizeof(s->scram));
    s->expires_ms = s->cfg->session_lifetime_ms > 0
                    ? s->cfg->clock_fn(s->cfg->clock_arg) +
                      s->cfg->session_lifetime_ms
                    : 0;
    res->outcome = KR_SASL_SRV_AUTHENTICATED;
    res->session_lifetime_ms = s->cfg->session_lifetime_ms;
    return true;
}

/*
 * The first token of an exchange (PLAIN's only one, SCRAM's
 * client-first): *out/out_len the answer (malloc'd; PLAIN: none),
 * outcome in res.  *msg: the client's error message on failure.
 */
static void
first_token(struct kr_sasl_srv *s, struct kr_arena *a, uint8_t *tok,
            size_t len, int64_t now_ms, struct kr_sasl_srv_result *res,
            char **out, size_t *out_len, const char **msg)
{
    const struct kr_sasl_srv_cfg *c = s->cfg;
    const struct kr_scram_cred *cred;

    *out = NULL;
    *out_len = 0;
    if (s->reauth && s->mech != s->auth_mech) {
        /* ReauthInfo.saslMechanismUnchanged */
#define MECH_FMT "SASL mechanism '%s' requested by client is not " \
    "supported for re-authentication of mechanism '%s'"
        size_t n = sizeof(MECH_FMT) + 32;
        char *m = a != NULL ? kr_arena_alloc(a, n) : NULL;

        if (m != NULL) {
            snprintf(m, n, MECH_FMT, mech_names[s->mech],
                     mech_names[s->auth_mech]);
        }
        *msg = m;
        fail(s, res, KR_SASL_SRV_FAILED, KR_SASL_SRV_R_MECHANISM_CHANGED,
             "mechanism changed on re-authentication");
        return;
    }
    if (!kr_sasl_rate_take(c->rate, s->addr, s->addr_len, now_ms)) {
        *msg = MSG_RATE;
        if (s->mech == KR_SASL_SRV_PLAIN) {
            OPENSSL_cleanse(tok, len);
        }
        fail(s, res, KR_SASL_SRV_RATE_LIMITED, KR_SASL_SRV_R_RATE_LIMITED,
             "too many logins from this address (sasl_login_rate)");
        return;
    }
    if (s->mech == KR_SASL_SRV_PLAIN) {
        struct kr_sasl_plain pl;
        const char *why = NULL;
        enum kr_scram_outcome o;
        bool known;

        if (!kr_sasl_plain_split(tok, len, &pl, &why)) {
            /* an authzid other than the user: the user is known (for
               the log and the audit line's claimed principal) */
            bool authzid = pl.authzid_differs;

            if (authzid && !set_claimed(s, pl.authcid, pl.authcid_len)) {
                OPENSSL_cleanse(tok, len);
                fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE,
                     "out of memory");
                return;
            }
            res->user = authzid ? s->claimed : NULL;
            OPENSSL_cleanse(tok, len);
            *msg = MSG_PLAIN_MALFORMED;
            fail(s, res, KR_SASL_SRV_MALFORMED,
                 authzid ? KR_SASL_SRV_R_AUTHZID_MISMATCH
                         : KR_SASL_SRV_R_MALFORMED,
                 why != NULL ? why : "malformed PLAIN token");
            return;
        }
        if (!set_claimed(s, pl.authcid, pl.authcid_len)) {
            OPENSSL_cleanse(tok, len);
            fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, "out of memory");
            return;
        }
        res->user = s->claimed;
        cred = kr_sasl_users_lookup(c->users, s->claimed, KR_SCRAM_SHA512);
        if (cred == NULL) {
            cred = kr_sasl_users_lookup(c->users, s->claimed,
                                        KR_SCRAM_SHA256);
        }
        known = cred != NULL;
        o = kr_scram_check_password(known ? cred : &c->plain_mock,
                                    pl.passwd, pl.passwd_len);
        OPENSSL_cleanse(tok, len);
        if (o == KR_SCRAM_NO_MEMORY) {
            fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, "out of memory");
        } else if (o != KR_SCRAM_OK || !known) {
            *msg = NULL;            /* the credentials message */
            fail(s, res, KR_SASL_SRV_FAILED,
                 known ? KR_SASL_SRV_R_BAD_PASSWORD
                       : KR_SASL_SRV_R_UNKNOWN_USER,
                 known ? "wrong password" : "unknown user");
        } else {
            succeed(s, a, res, msg);
        }
        return;
    } else {
        struct kr_sasl_scram_first cf;
        enum kr_scram_hash h = s->mech == KR_SASL_SRV_SCRAM_SHA_512
                               ? KR_SCRAM_SHA512 : KR_SCRAM_SHA256;
        enum kr_scram_outcome o;
        const char *why = NULL;
        char *u;

        if (!kr_sasl_scram_first_parse(tok, len, &cf, &why)) {
            *msg = MSG_SCRAM_MALFORMED;
            fail(s, res, KR_SASL_SRV_MALFORMED, KR_SASL_SRV_R_MALFORMED,
                 why != NULL ? why : "malformed SCRAM client-first message");
            return;
        }
        u = kr_sasl_scram_unescape(cf.user, cf.user_len, &why);
        if (u == NULL) {
            *msg = MSG_SCRAM_MALFORMED;
            fail(s, res, KR_SASL_SRV_MALFORMED, KR_SASL_SRV_R_MALFORMED,
                 "bad SCRAM user name");
            return;
        }
        free(s->claimed);
        s->claimed = u;
        res->user = s->claimed;
        if (cf.tokenauth) {
            *msg = NULL;
            fail(s, res, KR_SASL_SRV_FAILED, KR_SASL_SRV_R_DELEGATION_TOKEN,
                 "delegation token (tokenauth) refused: krelay has no "
                 "tokens");
            return;
        }
        cred = kr_sasl_users_lookup(c->users, s->claimed, h);
        kr_scram_server_init(&s->scram, h, c->nonce_fn, c->nonce_arg);
        s->scram.mock_iterations = c->mock_iter[h];
        s->scram.mock_salt_len = c->mock_salt_len[h];
        o = kr_scram_server_first(&s->scram, &cf, cred, c->mock_key,
                                  sizeof(c->mock_key), out, out_len);
        switch (o) {
        case KR_SCRAM_OK:
            s->state = KR_SASL_SRV_ST_SCRAM_FIRST;
            res->outcome = KR_SASL_SRV_CONTINUE;
            res->why = "server-first sent";
            return;
        case KR_SCRAM_MALFORMED:
            *msg = MSG_SCRAM_MALFORMED;
            fail(s, res, KR_SASL_SRV_MALFORMED, KR_SASL_SRV_R_MALFORMED,
                 "bad SCRAM user name");
            return;
        case KR_SCRAM_NO_MEMORY:
        case KR_SCRAM_NONCE_FAILED:
        case KR_SCRAM_STATE:
            fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, kr_scram_outcome_name(o));
            return;
        default:
            *msg = NULL;
            fail(s, res, KR_SASL_SRV_FAILED, scram_reason(o),
                 kr_scram_outcome_name(o));
            return;
        }
    }
}

/* SCRAM's client-final: as first_token. */
static void
final_token(struct kr_sasl_srv *s, struct kr_arena *a, const uint8_t *tok,
            size_t len, struct kr_sasl_srv_result *res,
            char **out, size_t *out_len, const char **msg)
{
    enum kr_scram_outcome o;

    res->user = s->claimed;
    o = kr_scram_server_final(&s->scram, tok, len, out, out_len);
    if (o == KR_SCRAM_OK) {
        succeed(s, a, res, msg);
        return;
    }
    /* Kafka sends no e= message: a failed SaslAuthenticate */
    free(*out);
    *out = NULL;
    *out_len = 0;
    switch (o) {
    case KR_SCRAM_MALFORMED:
        *msg = MSG_SCRAM_MALFORMED;
        fail(s, res, KR_SASL_SRV_MALFORMED, KR_SASL_SRV_R_MALFORMED,
             "malformed SCRAM client-final message");
        break;
    case KR_SCRAM_NO_MEMORY:
    case KR_SCRAM_STATE:
        fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, kr_scram_outcome_name(o));
        break;
    default:
        *msg = NULL;
        if (o == KR_SCRAM_UNKNOWN_USER &&
            kr_sasl_users_lookup(s->cfg->users, s->claimed,
                                 s->mech == KR_SASL_SRV_SCRAM_SHA_512
                                 ? KR_SCRAM_SHA256 : KR_SCRAM_SHA512)
                != NULL) {
            /* looked up after the answer is made: the client's answer
               and its cost are an unknown user's all the same */
            fail(s, res, KR_SASL_SRV_FAILED, KR_SASL_SRV_R_NO_MECH_ENTRY,
                 s->mech == KR_SASL_SRV_SCRAM_SHA_512
                 ? "no SCRAM-SHA-512 entry for the user (it has "
                   "SCRAM-SHA-256 only)"
                 : "no SCRAM-SHA-256 entry for the user (it has "
                   "SCRAM-SHA-512 only)");
            break;
        }
        fail(s, res, KR_SASL_SRV_FAILED, scram_reason(o),
             o == KR_SCRAM_BAD_PROOF ? "wrong password"
             : o == KR_SCRAM_UNKNOWN_USER ? "unknown user"
             : kr_scram_outcome_name(o));
        break;
    }
}

static void
res_init(const struct kr_sasl_srv *s, struct kr_msg *rsp,
         struct kr_sasl_srv_result *res)
{
    memset(res, 0, sizeof(*res));
    res->rsp = rsp;
    res->mech = s->mech;
}

/* The credentials message for s's mechanism, in the arena. */
static const char *
creds_msg(const struct kr_sasl_srv *s, struct kr_arena *a)
{
    const char *what = s->reauth ? "re-authentication" : "authentication";
    size_t n = strlen(MSG_BAD_CREDS_FMT) + strlen(what) + 16;
    char *m = kr_arena_alloc(a, n);

    if (m != NULL) {
        snprintf(m, n, MSG_BAD_CREDS_FMT, what, mech_names[s->mech]);
    }
    return m;
}

static void
handshake(struct kr_sasl_srv *s, struct kr_arena *a, const struct kr_msg *req,
          struct kr_msg *rsp, struct kr_sasl_srv_result *res)
{
    const struct kr_val *v = kr_node_get_id(req->body, KR_FIELD_MECHANISM);
    enum kr_sasl_srv_mech m;
    unsigned i;
    bool enabled = false;

    if (s->state == KR_SASL_SRV_ST_DONE && !s->reauth_capable) {
        /* KafkaApis.handleSaslHandshakeRequest: after authentication */
        res->has_rsp = handshake_rsp(s, a, req, KR_KERR_ILLEGAL_SASL_STATE,
                                     rsp);
        res->outcome = res->has_rsp ? KR_SASL_SRV_ILLEGAL_STATE
                                    : KR_SASL_SRV_NO_MEMORY;
        res->close = !res->has_rsp;
        res->why = "SaslHandshake after authentication";
        return;
    }
    if (s->state != KR_SASL_SRV_ST_START && s->state != KR_SASL_SRV_ST_DONE) {
        res->has_rsp = handshake_rsp(s, a, req, KR_KERR_ILLEGAL_SASL_STATE,
                                     rsp);
        fail(s, res, KR_SASL_SRV_ILLEGAL_STATE, KR_SASL_SRV_R_NONE, "SaslHandshake in the "
             "middle of an exchange");
        return;
    }
    if (v != NULL && v->present && !v->is_null && v->u.s.len > 0 &&
        mech_of(v->u.s.p, (size_t)v->u.s.len, &m)) {
        for (i = 0; i < s->cfg->nmech; i++) {
            enabled |= s->cfg->order[i] == m;
        }
    }
    if (!enabled) {
        res->has_rsp = handshake_rsp(s, a, req,
                                     KR_KERR_UNSUPPORTED_SASL_MECHANISM, rsp);
        fail(s, res, KR_SASL_SRV_UNSUPPORTED_MECHANISM,
             KR_SASL_SRV_R_UNSUPPORTED_MECHANISM,
             "mechanism not enabled on this listener");
        return;
    }
    if (!handshake_rsp(s, a, req, 0, rsp)) {
        fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, "out of memory");
        return;
    }
    res->has_rsp = true;
    s->reauth = s->state == KR_SASL_SRV_ST_DONE;
    s->mech = m;
    res->mech = m;
    s->raw = req->api_version == 0;
    s->state = KR_SASL_SRV_ST_HANDSHAKEN;
    res->outcome = KR_SASL_SRV_CONTINUE;
    res->why = s->raw ? "handshake v0: raw tokens follow" : "handshake";
}

static void
authenticate(struct kr_sasl_srv *s, struct kr_arena *a,
             const struct kr_msg *req, int64_t now_ms, struct kr_msg *rsp,
             struct kr_sasl_srv_result *res)
{
    const struct kr_val *v = kr_node_get_id(req->body, KR_FIELD_AUTH_BYTES);
    uint8_t *tok = NULL;
    size_t len = 0;
    char *out = NULL;
    size_t out_len = 0;
    const char *msg = NULL;
    int16_t err;

    if (s->state == KR_SASL_SRV_ST_DONE) {
        /* KafkaApis.handleSaslAuthenticateRequest */
        res->has_rsp = auth_rsp(a, req, KR_KERR_ILLEGAL_SASL_STATE,
                                MSG_AFTER_AUTH, NULL, 0, 0, rsp);
        res->outcome = res->has_rsp ? KR_SASL_SRV_ILLEGAL_STATE
                                    : KR_SASL_SRV_NO_MEMORY;
        res->close = !res->has_rsp;
        res->why = "SaslAuthenticate after authentication";
        return;
    }
    if (s->state != KR_SASL_SRV_ST_HANDSHAKEN &&
        s->state != KR_SASL_SRV_ST_SCRAM_FIRST) {
        /* before any handshake: Kafka closes without an answer */
        fail(s, res, KR_SASL_SRV_ILLEGAL_STATE, KR_SASL_SRV_R_NONE, "SaslAuthenticate before "
             "SaslHandshake");
        return;
    }
    if (req->api_version >= 1) {
        /* "the client is known to support the required version if any
           one of them indicates it supports that version" */
        s->reauth_capable = true;
    }
    if (v != NULL && v->present && !v->is_null && v->u.s.len > 0) {
        /* the frame's bytes (or the arena's copy): PLAIN wipes them */
        tok = (uint8_t *)(uintptr_t)v->u.s.p;
        len = (size_t)v->u.s.len;
    }
    if (s->state == KR_SASL_SRV_ST_HANDSHAKEN) {
        first_token(s, a, tok != NULL ? tok : (uint8_t *)"", len, now_ms,
                    res, &out, &out_len, &msg);
    } else {
        final_token(s, a, tok != NULL ? tok : (const uint8_t *)"", len,
                    res, &out, &out_len, &msg);
    }
    switch (res->outcome) {
    case KR_SASL_SRV_CONTINUE:
        err = 0;
        break;
    case KR_SASL_SRV_AUTHENTICATED:
        err = 0;
        break;
    case KR_SASL_SRV_NO_MEMORY:
        free(out);
        return;
    default:
        err = KR_KERR_SASL_AUTHENTICATION_FAILED;
        if (msg == NULL) {
            msg = creds_msg(s, a);
        }
        break;
    }
    res->has_rsp = auth_rsp(a, req, err, err != 0 ? msg : NULL, out,
                            out_len, res->outcome == KR_SASL_SRV_AUTHENTICATED
                                     ? res->session_lifetime_ms : 0, rsp);
    if (out != NULL) {
        OPENSSL_cleanse(out, out_len);
        free(out);
    }
    if (!res->has_rsp) {
        fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, "out of memory");
    }
}

void
kr_sasl_srv_request(struct kr_sasl_srv *s, struct kr_arena *arena,
                    const struct kr_msg *req, int64_t now_ms,
                    struct kr_msg *rsp, struct kr_sasl_srv_result *res)
{
    res_init(s, rsp, res);
    if (req == NULL || req->body == NULL || req->dir != KR_DIR_REQUEST) {
        fail(s, res, KR_SASL_SRV_ILLEGAL_STATE, KR_SASL_SRV_R_NONE, "not a decoded request");
        return;
    }
    if (req->api_key == KR_API_SASL_HANDSHAKE) {
        handshake(s, arena, req, rsp, res);
    } else if (req->api_key == KR_API_SASL_AUTHENTICATE) {
        authenticate(s, arena, req, now_ms, rsp, res);
    } else {
        fail(s, res, KR_SASL_SRV_ILLEGAL_STATE, KR_SASL_SRV_R_NONE, "not a SASL request");
    }
}

void
kr_sasl_srv_raw(struct kr_sasl_srv *s, uint8_t *tok, size_t len,
                int64_t now_ms, struct kr_sasl_srv_result *res)
{
    char *out = NULL;
    size_t out_len = 0;
    const char *msg = NULL;

    res_init(s, NULL, res);
    if (!s->raw || (s->state != KR_SASL_SRV_ST_HANDSHAKEN &&
                    s->state != KR_SASL_SRV_ST_SCRAM_FIRST)) {
        fail(s, res, KR_SASL_SRV_ILLEGAL_STATE, KR_SASL_SRV_R_NONE, "raw token out of place");
        return;
    }
    if (s->state == KR_SASL_SRV_ST_HANDSHAKEN) {
        first_token(s, NULL, tok != NULL ? tok : (uint8_t *)"", len, now_ms,
                    res, &out, &out_len, &msg);
    } else {
        final_token(s, NULL, tok != NULL ? tok : (const uint8_t *)"", len,
                    res, &out, &out_len, &msg);
    }
    if (res->outcome == KR_SASL_SRV_CONTINUE ||
        res->outcome == KR_SASL_SRV_AUTHENTICATED) {
        /* PLAIN answers an empty token (PlainSaslServer: new byte[0]) */
        if (out == NULL) {
            out = malloc(1);
            if (out == NULL) {
                fail(s, res, KR_SASL_SRV_NO_MEMORY, KR_SASL_SRV_R_NONE, "out of memory");
                return;
            }
            out_len = 0;
        }
        res->raw = (uint8_t *)out;
        res->raw_len = out_len;
        if (res->outcome == KR_SASL_SRV_AUTHENTICATED) {
            res->session_lifetime_ms = 0;   /* never told over v0 */
        }
        return;
    }
    /* a failed raw exchange closes with no answer */
    free(out);
    res->close = true;
}

size_t
kr_sasl_rate_key(const struct sockaddr *sa, uint8_t out[16])
{
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

    if (sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family != AF_INET6) {
        return 0;
    }
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        memcpy(out, in6->sin6_addr.s6_addr + 12, 4);
        return 4;
    }
    memcpy(out, in6->sin6_addr.s6_addr, 8);
    return 8;
}
