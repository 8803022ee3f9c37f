/*
 * kr_sasl_client.c - krelay as a SASL client of a broker (origination):
 * the exchange as a state machine over request frames built and response
 * frames decoded by the generic codec (kr_sasl_client.h).
 *
 *   S_APIVERSIONS --(ranges)--> S_HANDSHAKE --(ErrorCode 0)--> S_AUTH
 *   S_AUTH: PLAIN one round; SCRAM client-first, client-final, then the
 *   server-final verified; OAUTHBEARER one round (an error challenge:
 *   "\x01", then the broker's failure) --> DONE or a failure.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <openssl/crypto.h>

#include "kr_api_keys.h"
#include "kr_arena.h"
#include "kr_codec.h"
#include "kr_field_ids.h"
#include "kr_kerr.h"
#include "kr_sasl_client.h"
#include "kr_schema.h"
#include "kr_scram.h"

#define KR_SC_CLIENT_ID "krelay"
#define KR_SC_MSG_MAX 200               /* bytes of a broker's message kept */
#define KR_SC_TOKEN_MAX 65536           /* bytes of a token file read */

enum sc_state {
    S_NEW = 0,
    S_APIVERSIONS,                      /* ApiVersions v0 sent */
    S_HANDSHAKE,                        /* SaslHandshake v1 sent */
    S_AUTH_FIRST,                       /* first SaslAuthenticate sent */
    S_AUTH_FINAL,                       /* SCRAM client-final sent */
    S_AUTH_OAUTH_ERR,                   /* OAUTHBEARER "\x01" sent after an
                                           error challenge */
    S_DONE,
    S_FAILED
};

struct kr_sasl_client {
    enum kr_sasl_mechanism mech;
    enum sc_state state;
    enum kr_sasl_client_outcome fail;   /* S_FAILED: why */
    int16_t auth_max;                   /* broker's SaslAuthenticate max,
                                           -1 unknown */
    int16_t auth_ver;                   /* the one used, -1 not chosen */
    int32_t corr;                       /* next CorrelationId */
    char *username;
    char *secret;                       /* password or token (wiped) */
    size_t secret_len;
    bool token_bad;                     /* OAUTHBEARER token unusable */
    struct kr_scram_client scram;       /* SCRAM's state (kr_scram) */
    bool scram_on;                      /* scram holds an exchange */
    kr_scram_nonce_fn nonce_fn;         /* SCRAM nonces (NULL: random) */
    void *nonce_arg;
    struct kr_sasl_client_req req;
    uint8_t *frame;                     /* req.frame's bytes (wiped) */
    size_t frame_len;
    int64_t lifetime_ms;
    char msg[400];
};

static const char *const mech_names[] = {
    [KR_SASL_MECH_NONE] = "none",
    [KR_SASL_MECH_PLAIN] = "PLAIN",
    [KR_SASL_MECH_SCRAM_SHA_256] = "SCRAM-SHA-256",
    [KR_SASL_MECH_SCRAM_SHA_512] = "SCRAM-SHA-512",
    [KR_SASL_MECH_OAUTHBEARER] = "OAUTHBEARER",
};

const char *
kr_sasl_mechanism_name(enum kr_sasl_mechanism m)
{
    if ((unsigned)m >= KR_ARRAY_LEN(mech_names)) {
        return "none";
    }
    return mech_names[m];
}

const char *
kr_sasl_client_outcome_str(enum kr_sasl_client_outcome o)
{
    switch (o) {
    case KR_SASL_CLIENT_SEND:
        return "in progress";
    case KR_SASL_CLIENT_DONE:
        return "authenticated";
    case KR_SASL_CLIENT_UNSUPPORTED_MECHANISM:
        return "mechanism not enabled on the broker";
    case KR_SASL_CLIENT_AUTH_FAILED:
        return "authentication failed";
    case KR_SASL_CLIENT_PROTOCOL_ERROR:
        return "SASL protocol error";
    case KR_SASL_CLIENT_CREDENTIALS:
        return "krelay's credentials are unusable";
    case KR_SASL_CLIENT_ENOMEM:
        return "out of memory";
    }
    return "?";
}

/* ---- helpers ------------------------------------------------------------ */

static void
wipe_free(void *p, size_t n)
{
    if (p != NULL) {
        OPENSSL_cleanse(p, n);
        free(p);
    }
}

static enum kr_sasl_client_outcome
failed(struct kr_sasl_client *c, enum kr_sasl_client_outcome o,
       const char *fmt, ...) KR_PRINTF(3, 4);

static enum kr_sasl_client_outcome
failed(struct kr_sasl_client *c, enum kr_sasl_client_outcome o,
       const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
    va_end(ap);
    c->state = S_FAILED;
    c->fail = o;
    wipe_free(c->frame, c->frame_len);
    c->frame = NULL;
    c->frame_len = 0;
    memset(&c->req, 0, sizeof(c->req));
    return o;
}

/* A broker's string as a log may show it: printable ASCII, others '?',
   at most KR_SC_MSG_MAX bytes ("(none)" for null). */
static void
safe_str(const struct kr_val *v, char *out, size_t len)
{
    size_t i, n;

    if (v == NULL || !v->present || v->is_null || v->u.s.p == NULL) {
        snprintf(out, len, "(none)");
        return;
    }
    n = (size_t)v->u.s.len;
    if (n > KR_SC_MSG_MAX) {
        n = KR_SC_MSG_MAX;
    }
    if (n + 1 > len) {
        n = len - 1;
    }
    for (i = 0; i < n; i++) {
        uint8_t b = v->u.s.p[i];

        out[i] = b >= 0x20 && b < 0x7f ? (char)b : '?';
    }
    out[n] = '\0';
}

/* Read the first line of path (the OAUTHBEARER token) into c->secret. */
static void
read_token(struct kr_sasl_client *c, const char *path)
{
    char *buf = malloc(KR_SC_TOKEN_MAX + 1);
    FILE *f;
    size_t n = 0, i;

    c->token_bad = true;
    if (buf == NULL) {
        snprintf(c->msg, sizeof(c->msg), "out of memory");
        return;
    }
    f = fopen(path, "re");
    if (f == NULL) {
        snprintf(c->msg, sizeof(c->msg), "cannot read the token file %s: %s",
                 path, strerror(errno));
        goto out;
    }
    n = fread(buf, 1, KR_SC_TOKEN_MAX + 1, f);
    fclose(f);
    if (n > KR_SC_TOKEN_MAX) {
        snprintf(c->msg, sizeof(c->msg), "the token file %s is larger than "
                 "%d bytes", path, KR_SC_TOKEN_MAX);
        goto out;
    }
    for (i = 0; i < n && buf[i] != '\n' && buf[i] != '\r'; i++) {
    }
    if (i == 0) {
        snprintf(c->msg, sizeof(c->msg), "the token file %s is empty", path);
        goto out;
    }
    c->secret = malloc(i + 1);
    if (c->secret != NULL) {
        memcpy(c->secret, buf, i);
        c->secret[i] = '\0';
        c->secret_len = i;
        c->token_bad = false;
    }
out:
    OPENSSL_cleanse(buf, n);
    free(buf);
}

/*
 * Encode request key/ver with ClientId "krelay" and the next
 * CorrelationId into c->frame (c->req), the body filled by the codec's
 * defaults, then Mechanism (SaslHandshake) or AuthBytes (SaslAuthenticate:
 * bytes, blen).  Returns SEND or a failure.
 */
static enum kr_sasl_client_outcome
build(struct kr_sasl_client *c, int16_t key, int16_t ver,
      const uint8_t *bytes, size_t blen)
{
    const struct kr_api_desc *a = kr_api_get(key);
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_wbuf w;
    struct kr_msg m;
    struct kr_val *v;
    int rc;
    enum kr_sasl_client_outcome o = KR_SASL_CLIENT_SEND;

    memset(&w, 0, sizeof(w));
    memset(&ce, 0, sizeof(ce));
    kr_arena_init(&arena, 0);
    rc = kr_msg_request_new(&arena, &m, key, ver, c->corr++, KR_SC_CLIENT_ID);
    if (rc == KR_EUNSUPPORTED) {
        o = failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "krelay cannot build "
                   "ApiKey %d v%d", key, ver);
        goto out;
    }
    if (rc != KR_OK) {
        o = failed(c, KR_SASL_CLIENT_ENOMEM, "out of memory");
        goto out;
    }
    if (key == KR_API_SASL_HANDSHAKE) {
        const char *name = kr_sasl_mechanism_name(c->mech);

        v = kr_node_get_id(m.body, KR_FIELD_MECHANISM);
        if (v != NULL) {
            v->is_null = 0;
            v->u.s.p = (const uint8_t *)name;
            v->u.s.len = (int32_t)strlen(name);
        }
    } else if (key == KR_API_SASL_AUTHENTICATE) {
        v = kr_node_get_id(m.body, KR_FIELD_AUTH_BYTES);
        if (v != NULL) {
            v->is_null = 0;
            v->u.s.p = bytes != NULL ? bytes : (const uint8_t *)"";
            v->u.s.len = (int32_t)blen;
        }
    }
    rc = kr_encode_msg(&m, &w, &ce);
    if (rc != KR_OK || w.failed) {
        o = failed(c, rc == KR_OK || rc == KR_ENOMEM ? KR_SASL_CLIENT_ENOMEM
                                                     : KR_SASL_CLIENT_PROTOCOL_ERROR,
                   "cannot encode %s v%d: %s", a->name, ver,
                   rc == KR_OK ? "out of memory" : ce.msg);
        goto out;
    }
    wipe_free(c->frame, c->frame_len);
    c->frame = w.buf;                   /* taken: the wbuf lets go */
    c->frame_len = w.len;
    w.buf = NULL;
    w.len = w.cap = 0;
    c->req.frame = c->frame;
    c->req.len = c->frame_len;
    c->req.api_key = key;
    c->req.api_version = ver;
    c->req.correlation_id = m.correlation_id;
out:
    if (w.buf != NULL) {
        OPENSSL_cleanse(w.buf, w.cap);
    }
    kr_wbuf_free(&w);
    kr_arena_free(&arena);
    return o;
}

/* The next SaslHandshake, at v1. */
static enum kr_sasl_client_outcome
send_handshake(struct kr_sasl_client *c)
{
    c->state = S_HANDSHAKE;
    return build(c, KR_API_SASL_HANDSHAKE, 1, NULL, 0);
}

/* The mechanism's first token. */
static enum kr_sasl_client_outcome
send_first(struct kr_sasl_client *c)
{
    enum kr_sasl_client_outcome o;
    uint8_t *tok = NULL;
    size_t n = 0, ul;

    c->state = S_AUTH_FIRST;
    switch (c->mech) {
    case KR_SASL_MECH_PLAIN:
        /* RFC 4616: [authzid] NUL authcid NUL passwd */
        ul = strlen(c->username);
        n = 1 + ul + 1 + c->secret_len;
        tok = malloc(n);
        if (tok == NULL) {
            return failed(c, KR_SASL_CLIENT_ENOMEM, "out of memory");
        }
        tok[0] = 0;
        memcpy(tok + 1, c->username, ul);
        tok[1 + ul] = 0;
        memcpy(tok + 2 + ul, c->secret, c->secret_len);
        break;
    case KR_SASL_MECH_OAUTHBEARER: {
        /* RFC 7628 3.1: gs2-header kvsep "auth=Bearer " token kvsep kvsep */
        static const char pre[] = "n,,\x01" "auth=Bearer ";

        n = sizeof(pre) - 1 + c->secret_len + 2;
        tok = malloc(n);
        if (tok == NULL) {
            return failed(c, KR_SASL_CLIENT_ENOMEM, "out of memory");
        }
        memcpy(tok, pre, sizeof(pre) - 1);
        memcpy(tok + sizeof(pre) - 1, c->secret, c->secret_len);
        tok[n - 2] = 0x01;
        tok[n - 1] = 0x01;
        break;
    }
    case KR_SASL_MECH_SCRAM_SHA_256:
    case KR_SASL_MECH_SCRAM_SHA_512: {
        /* RFC 5802: client-first "n,,n=<user>,r=<nonce>" (kr_scram) */
        char *out = NULL;
        enum kr_scram_outcome so;

        c->scram_on = true;
        so = kr_scram_client_first(&c->scram,
                                   c->mech == KR_SASL_MECH_SCRAM_SHA_512
                                       ? KR_SCRAM_SHA512 : KR_SCRAM_SHA256,
                                   c->username, c->nonce_fn, c->nonce_arg,
                                   &out, &n);
        if (so != KR_SCRAM_OK) {
            free(out);
            return failed(c, so == KR_SCRAM_NO_MEMORY
                                 ? KR_SASL_CLIENT_ENOMEM
                                 : KR_SASL_CLIENT_CREDENTIALS,
                          "SCRAM client-first for sasl_username: %s",
                          kr_scram_outcome_name(so));
        }
        tok = (uint8_t *)out;
        break;
    }
    default:
        return failed(c, KR_SASL_CLIENT_CREDENTIALS, "no mechanism");
    }
    o = build(c, KR_API_SASL_AUTHENTICATE, c->auth_ver, tok, n);
    wipe_free(tok, n);
    return o;
}

/* ---- responses ---------------------------------------------------------- */

/* The ApiVersions v0 answer: SaslHandshake v1 and SaslAuthenticate. */
static enum kr_sasl_client_outcome
on_api_versions(struct kr_sasl_client *c, const struct kr_msg *m)
{
    const struct kr_val *ec = kr_node_get_id(m->body, KR_FIELD_ERROR_CODE);
    const struct kr_val *keys = kr_node_get_id(m->body, KR_FIELD_API_KEYS);
    int64_t hs_max = -1, au_max = -1, au_min = -1;
    char buf[64];
    uint32_t i;

    if (ec != NULL && ec->u.i != 0) {
        return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "ApiVersions "
                      "ErrorCode %s",
                      kr_kerr_format((int16_t)ec->u.i, buf, sizeof(buf)));
    }
    for (i = 0; keys != NULL && keys->u.arr != NULL && i < keys->u.arr->n;
         i++) {
        struct kr_node *e = keys->u.arr->items[i].u.node;
        const struct kr_val *k, *lo, *hi;

        if (e == NULL) {
            continue;
        }
        k = kr_node_get_id(e, KR_FIELD_API_KEY);
        lo = kr_node_get_id(e, KR_FIELD_MIN_VERSION);
        hi = kr_node_get_id(e, KR_FIELD_MAX_VERSION);
        if (k == NULL || lo == NULL || hi == NULL) {
            continue;
        }
        if (k->u.i == KR_API_SASL_HANDSHAKE) {
            hs_max = hi->u.i;
        } else if (k->u.i == KR_API_SASL_AUTHENTICATE) {
            au_min = lo->u.i;
            au_max = hi->u.i;
        }
    }
    if (hs_max < 1 || au_max < 0 || au_min > 2) {
        return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "the broker offers "
                      "no SaslHandshake v1 with SaslAuthenticate v0-2 "
                      "(Kafka before 1.0?)");
    }
    c->auth_max = (int16_t)au_max;
    c->auth_ver = (int16_t)(au_max < 2 ? au_max : 2);
    return send_handshake(c);
}

/* The SaslHandshake v1 answer. */
static enum kr_sasl_client_outcome
on_handshake(struct kr_sasl_client *c, const struct kr_msg *m)
{
    const struct kr_val *ec = kr_node_get_id(m->body, KR_FIELD_ERROR_CODE);
    const struct kr_val *ms = kr_node_get_id(m->body, KR_FIELD_MECHANISMS);
    char list[300], buf[64];
    size_t used = 0;
    uint32_t i;

    if (ec != NULL && ec->u.i == 0) {
        return send_first(c);
    }
    list[0] = '\0';
    for (i = 0; ms != NULL && ms->u.arr != NULL && i < ms->u.arr->n &&
         used < sizeof(list) - 1; i++) {
        char one[64];

        safe_str(&ms->u.arr->items[i], one, sizeof(one));
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                 i > 0 ? ", " : "", one);
    }
    if (ec != NULL && ec->u.i == KR_KERR_UNSUPPORTED_SASL_MECHANISM) {
        return failed(c, KR_SASL_CLIENT_UNSUPPORTED_MECHANISM, "the broker "
                      "does not enable %s (it enables: %s)",
                      kr_sasl_mechanism_name(c->mech),
                      list[0] != '\0' ? list : "none");
    }
    return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "SaslHandshake v1 "
                  "ErrorCode %s", ec != NULL
                      ? kr_kerr_format((int16_t)ec->u.i, buf, sizeof(buf))
                      : "absent");
}

/* A SaslAuthenticate answer. */
static enum kr_sasl_client_outcome
on_authenticate(struct kr_sasl_client *c, const struct kr_msg *m)
{
    const struct kr_val *ec = kr_node_get_id(m->body, KR_FIELD_ERROR_CODE);
    const struct kr_val *em = kr_node_get_id(m->body, KR_FIELD_ERROR_MESSAGE);
    const struct kr_val *ab = kr_node_get_id(m->body, KR_FIELD_AUTH_BYTES);
    const struct kr_val *lt = kr_node_get_id(m->body,
                                             KR_FIELD_SESSION_LIFETIME_MS);
    const uint8_t *bytes = ab != NULL && !ab->is_null ? ab->u.s.p : NULL;
    size_t blen = bytes != NULL ? (size_t)ab->u.s.len : 0;
    char msg[KR_SC_MSG_MAX + 1], buf[64];
    char *tok = NULL;
    size_t n = 0;
    enum kr_sasl_client_outcome o;
    enum kr_scram_outcome so;

    if (ec == NULL || ec->u.i != 0) {
        safe_str(em, msg, sizeof(msg));
        if (ec != NULL && ec->u.i == KR_KERR_SASL_AUTHENTICATION_FAILED) {
            return failed(c, KR_SASL_CLIENT_AUTH_FAILED, "%s", msg);
        }
        return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "SaslAuthenticate "
                      "v%d ErrorCode %s: %s", m->api_version, ec != NULL
                          ? kr_kerr_format((int16_t)ec->u.i, buf, sizeof(buf))
                          : "absent", msg);
    }
    switch (c->state) {
    case S_AUTH_FIRST:
        if (c->mech == KR_SASL_MECH_SCRAM_SHA_256 ||
            c->mech == KR_SASL_MECH_SCRAM_SHA_512) {
            so = kr_scram_client_server_first(&c->scram,
                                              bytes != NULL ? bytes
                                                            : (const uint8_t *)"",
                                              blen);
            if (so == KR_SCRAM_OK) {
                so = kr_scram_client_final_password(
                    &c->scram, (const uint8_t *)c->secret, c->secret_len,
                    &tok, &n);
            }
            if (so != KR_SCRAM_OK) {
                wipe_free(tok, n);
                return failed(c, so == KR_SCRAM_NO_MEMORY
                                     ? KR_SASL_CLIENT_ENOMEM
                                     : KR_SASL_CLIENT_PROTOCOL_ERROR,
                              "SCRAM server-first: %s",
                              kr_scram_outcome_name(so));
            }
            c->state = S_AUTH_FINAL;
            o = build(c, KR_API_SASL_AUTHENTICATE, c->auth_ver,
                      (const uint8_t *)tok, n);
            wipe_free(tok, n);
            return o;
        }
        if (c->mech == KR_SASL_MECH_OAUTHBEARER && blen > 0) {
            /* RFC 7628 3.2.2: an error challenge; the client answers
               kvsep and the server fails the exchange */
            c->state = S_AUTH_OAUTH_ERR;
            return build(c, KR_API_SASL_AUTHENTICATE, c->auth_ver,
                         (const uint8_t *)"\x01", 1);
        }
        break;
    case S_AUTH_FINAL:
        so = kr_scram_client_verify(&c->scram,
                                    bytes != NULL ? bytes
                                                  : (const uint8_t *)"",
                                    blen);
        if (so == KR_SCRAM_SERVER_ERROR) {
            return failed(c, KR_SASL_CLIENT_AUTH_FAILED, "SCRAM "
                          "server-final: the broker answered an error");
        }
        if (so != KR_SCRAM_OK) {
            return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "SCRAM "
                          "server-final: %s (the broker's signature does "
                          "not prove it knows the password)",
                          kr_scram_outcome_name(so));
        }
        break;
    case S_AUTH_OAUTH_ERR:
        return failed(c, KR_SASL_CLIENT_AUTH_FAILED, "the broker sent an "
                      "OAUTHBEARER error challenge, then accepted");
    default:
        return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "unexpected "
                      "SaslAuthenticate answer");
    }
    c->lifetime_ms = lt != NULL && lt->present && lt->u.i > 0 ? lt->u.i : 0;
    c->state = S_DONE;
    wipe_free(c->frame, c->frame_len);
    c->frame = NULL;
    c->frame_len = 0;
    memset(&c->req, 0, sizeof(c->req));
    return KR_SASL_CLIENT_DONE;
}

/* ---- API ---------------------------------------------------------------- */

struct kr_sasl_client *
kr_sasl_client_new(const struct kr_sasl_client_creds *cr, int16_t auth_max,
                   int32_t first_corr)
{
    struct kr_sasl_client *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->mech = cr->mechanism;
    c->nonce_fn = cr->scram_nonce_fn;
    c->nonce_arg = cr->scram_nonce_arg;
    c->auth_max = auth_max;
    c->auth_ver = auth_max < 0 ? -1 : auth_max < 2 ? auth_max : 2;
    c->corr = first_corr;
    if (c->mech == KR_SASL_MECH_OAUTHBEARER) {
        if (cr->token_file != NULL) {
            read_token(c, cr->token_file);
        } else if (cr->token != NULL && cr->token[0] != '\0') {
            c->secret_len = strlen(cr->token);
            c->secret = strdup(cr->token);
        } else {
            c->token_bad = true;
            snprintf(c->msg, sizeof(c->msg), "no OAUTHBEARER token");
        }
    } else {
        c->username = strdup(cr->username != NULL ? cr->username : "");
        c->secret_len = cr->password != NULL ? cr->password_len : 0;
        c->secret = malloc(c->secret_len + 1);
        if (c->secret != NULL) {
            if (c->secret_len > 0) {
                memcpy(c->secret, cr->password, c->secret_len);
            }
            c->secret[c->secret_len] = '\0';
        }
        if (c->username == NULL) {
            kr_sasl_client_free(c);
            return NULL;
        }
    }
    if (c->secret == NULL && !c->token_bad) {
        kr_sasl_client_free(c);
        return NULL;
    }
    return c;
}

enum kr_sasl_client_outcome
kr_sasl_client_start(struct kr_sasl_client *c)
{
    char why[sizeof(c->msg)];

    if (c->state != S_NEW) {
        return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "started twice");
    }
    if (c->mech < KR_SASL_MECH_PLAIN || c->mech > KR_SASL_MECH_OAUTHBEARER) {
        return failed(c, KR_SASL_CLIENT_CREDENTIALS, "no SASL mechanism");
    }
    if (c->token_bad) {
        snprintf(why, sizeof(why), "%s", c->msg);
        return failed(c, KR_SASL_CLIENT_CREDENTIALS, "%s", why);
    }
    if (c->auth_max < 0) {
        c->state = S_APIVERSIONS;
        return build(c, KR_API_API_VERSIONS, 0, NULL, 0);
    }
    return send_handshake(c);
}

const struct kr_sasl_client_req *
kr_sasl_client_request(const struct kr_sasl_client *c)
{
    return c->frame != NULL ? &c->req : NULL;
}

enum kr_sasl_client_outcome
kr_sasl_client_feed(struct kr_sasl_client *c, const uint8_t *payload,
                    size_t len)
{
    struct kr_codec_err ce;
    struct kr_arena arena;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_msg m;
    enum kr_sasl_client_outcome o;
    int16_t key = c->req.api_key, ver = c->req.api_version;
    int32_t corr = c->req.correlation_id;
    int rc;

    if (c->state == S_FAILED) {
        return c->fail;
    }
    if (c->state == S_DONE || c->state == S_NEW || c->frame == NULL) {
        return failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "a response when "
                      "none was expected");
    }
    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    kr_rbuf_init_flat(&rb, &iov, payload, len);
    rc = kr_decode_response(&arena, &rb, key, ver, 0, &m, &ce);
    if (rc != KR_OK) {
        o = failed(c, rc == KR_ENOMEM ? KR_SASL_CLIENT_ENOMEM
                                      : KR_SASL_CLIENT_PROTOCOL_ERROR,
                   "%s v%d response does not decode: %.120s at %.100s",
                   kr_api_get(key)->name, ver, ce.msg,
                   ce.path[0] != '\0' ? ce.path : "?");
    } else if (m.correlation_id != corr) {
        o = failed(c, KR_SASL_CLIENT_PROTOCOL_ERROR, "%s v%d response with "
                   "CorrelationId %d, expected %d", kr_api_get(key)->name,
                   ver, m.correlation_id, corr);
    } else if (c->state == S_APIVERSIONS) {
        o = on_api_versions(c, &m);
    } else if (c->state == S_HANDSHAKE) {
        o = on_handshake(c, &m);
    } else {
        o = on_authenticate(c, &m);
    }
    kr_arena_free(&arena);
    return o;
}

const char *
kr_sasl_client_message(const struct kr_sasl_client *c)
{
    return c->state == S_FAILED ? c->msg : "";
}

int64_t
kr_sasl_client_lifetime_ms(const struct kr_sasl_client *c)
{
    return c->lifetime_ms;
}

int16_t
kr_sasl_client_auth_version(const struct kr_sasl_client *c)
{
    return c->auth_ver;
}

void
kr_sasl_client_free(struct kr_sasl_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->scram_on) {
        kr_scram_client_free(&c->scram);
    }
    wipe_free(c->frame, c->frame_len);
    if (c->secret != NULL) {
        wipe_free(c->secret, c->secret_len + 1);
    }
    free(c->username);
    OPENSSL_cleanse(c, sizeof(*c));
    free(c);
}

int64_t
kr_sasl_client_reauth_after_ms(int64_t lifetime_ms, uint64_t r)
{
    int64_t lo, span;

    if (lifetime_ms <= 0) {
        return 0;
    }
    lo = lifetime_ms / 100 * 85 + lifetime_ms % 100 * 85 / 100;
    span = lifetime_ms / 100 * 10 + lifetime_ms % 100 * 10 / 100;
    return lo + (span > 0 ? (int64_t)(r % (uint64_t)(span + 1)) : 0);
}
