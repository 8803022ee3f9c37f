/*
 * kr_scram.c - SCRAM-SHA-256/512 (kr_scram.h): RFC 5802's arithmetic
 * with OpenSSL 3, the stored credential's text form, both sides of an
 * exchange.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "kr_sasl_token.h"
#include "kr_scram.h"

#define WHY(w) do { if (why != NULL) { *why = (w); } } while (0)

const char *
kr_scram_outcome_name(enum kr_scram_outcome o)
{
    switch (o) {
    case KR_SCRAM_OK: return "ok";
    case KR_SCRAM_MALFORMED: return "malformed message";
    case KR_SCRAM_TOKENAUTH: return "delegation token (tokenauth) not "
                                    "supported";
    case KR_SCRAM_AUTHZID_MISMATCH: return "authorization id differs from "
                                           "the user";
    case KR_SCRAM_UNKNOWN_USER: return "unknown user";
    case KR_SCRAM_BAD_CHANNEL_BINDING: return "channel binding mismatch";
    case KR_SCRAM_BAD_NONCE: return "nonce mismatch";
    case KR_SCRAM_BAD_PROOF: return "invalid credentials";
    case KR_SCRAM_BAD_ITERATIONS: return "iteration count out of range";
    case KR_SCRAM_BAD_SIGNATURE: return "server signature mismatch";
    case KR_SCRAM_SERVER_ERROR: return "server error";
    case KR_SCRAM_BAD_USER: return "user name SCRAM cannot send";
    case KR_SCRAM_STATE: return "step out of order";
    case KR_SCRAM_NO_MEMORY: return "out of memory or crypto failure";
    case KR_SCRAM_NONCE_FAILED: return "nonce function failed";
    }
    return "?";
}

const char *
kr_scram_mech_name(enum kr_scram_hash h)
{
    return h == KR_SCRAM_SHA512 ? "SCRAM-SHA-512" : "SCRAM-SHA-256";
}

bool
kr_scram_hash_of(const char *mech, enum kr_scram_hash *h)
{
    if (strcmp(mech, "SCRAM-SHA-256") == 0) {
        *h = KR_SCRAM_SHA256;
        return true;
    }
    if (strcmp(mech, "SCRAM-SHA-512") == 0) {
        *h = KR_SCRAM_SHA512;
        return true;
    }
    return false;
}

size_t
kr_scram_hash_len(enum kr_scram_hash h)
{
    return h == KR_SCRAM_SHA512 ? 64 : 32;
}

static const EVP_MD *
md_of(enum kr_scram_hash h)
{
    return h == KR_SCRAM_SHA512 ? EVP_sha512() : EVP_sha256();
}

/* ---- primitives ------------------------------------------------------- */

static bool
hmac(enum kr_scram_hash h, const uint8_t *key, size_t key_len,
     const void *data, size_t len, uint8_t *out)
{
    unsigned int n = 0;

    if (key_len > 0x7fffffff) {
        return false;
    }
    return HMAC(md_of(h), key, (int)key_len, data, len, out, &n) != NULL &&
           n == kr_scram_hash_len(h);
}

static bool
digest(enum kr_scram_hash h, const uint8_t *data, size_t len, uint8_t *out)
{
    unsigned int n = 0;

    return EVP_Digest(data, len, out, &n, md_of(h), NULL) == 1 &&
           n == kr_scram_hash_len(h);
}

bool
kr_scram_salted_password(enum kr_scram_hash h, const uint8_t *pw,
                         size_t pw_len, const uint8_t *salt, size_t salt_len,
                         uint32_t iterations, uint8_t *out)
{
    if (pw_len > 0x7fffffff || salt_len > 0x7fffffff || iterations == 0 ||
        iterations > 0x7fffffff) {
        return false;
    }
    return PKCS5_PBKDF2_HMAC((const char *)pw, (int)pw_len, salt,
                             (int)salt_len, (int)iterations, md_of(h),
                             (int)kr_scram_hash_len(h), out) == 1;
}

/* ClientKey, StoredKey and ServerKey of a salted password (any of the
   outputs may be NULL) */
static bool
keys_of(enum kr_scram_hash h, const uint8_t *salted, uint8_t *client_key,
        uint8_t *stored_key, uint8_t *server_key)
{
    size_t n = kr_scram_hash_len(h);
    uint8_t ck[KR_SCRAM_KEY_MAX];
    bool ok;

    ok = hmac(h, salted, n, "Client Key", 10, ck) &&
         (stored_key == NULL || digest(h, ck, n, stored_key)) &&
         (server_key == NULL || hmac(h, salted, n, "Server Key", 10,
                                     server_key));
    if (ok && client_key != NULL) {
        memcpy(client_key, ck, n);
    }
    OPENSSL_cleanse(ck, sizeof(ck));
    return ok;
}

/* ---- credentials ------------------------------------------------------ */

void
kr_scram_cred_wipe(struct kr_scram_cred *c)
{
    OPENSSL_cleanse(c, sizeof(*c));
}

bool
kr_scram_cred_derive(struct kr_scram_cred *c, enum kr_scram_hash h,
                     const uint8_t *pw, size_t pw_len, const uint8_t *salt,
                     size_t salt_len, uint32_t iterations)
{
    uint8_t salted[KR_SCRAM_KEY_MAX];
    bool ok;

    kr_scram_cred_wipe(c);
    if (salt_len == 0 || salt_len > KR_SCRAM_SALT_MAX) {
        return false;
    }
    c->hash = h;
    c->iterations = iterations;
    c->salt_len = salt_len;
    memcpy(c->salt, salt, salt_len);
    ok = kr_scram_salted_password(h, pw, pw_len, salt, salt_len, iterations,
                                  salted) &&
         keys_of(h, salted, NULL, c->stored_key, c->server_key);
    OPENSSL_cleanse(salted, sizeof(salted));
    if (!ok) {
        kr_scram_cred_wipe(c);
    }
    return ok;
}

bool
kr_scram_cred_make(struct kr_scram_cred *c, enum kr_scram_hash h,
                   const uint8_t *pw, size_t pw_len, uint32_t iterations,
                   const char **why)
{
    uint8_t salt[KR_SCRAM_SALT_LEN];

    kr_scram_cred_wipe(c);
    if (iterations < KR_SCRAM_ITER_MIN || iterations > KR_SCRAM_ITER_MAX) {
        WHY("iterations must be 4096..16384 (Kafka's SCRAM bounds)");
        return false;
    }
    if (RAND_bytes(salt, (int)sizeof(salt)) != 1) {
        WHY("RAND_bytes failed");
        return false;
    }
    if (!kr_scram_cred_derive(c, h, pw, pw_len, salt, sizeof(salt),
                              iterations)) {
        WHY("PBKDF2 or HMAC failed (OpenSSL)");
        return false;
    }
    return true;
}

/* strict base64 value of len bytes at p into out (cap bytes) */
static bool
b64_field(const char *p, size_t len, uint8_t *out, size_t cap, size_t *n)
{
    uint8_t *tmp = malloc(kr_sasl_b64_max_decoded(len));
    bool ok;

    if (tmp == NULL) {
        return false;
    }
    ok = kr_sasl_b64_decode((const uint8_t *)p, len, false, tmp, n) &&
         *n <= cap;
    if (ok) {
        memcpy(out, tmp, *n);
    }
    OPENSSL_cleanse(tmp, kr_sasl_b64_max_decoded(len));
    free(tmp);
    return ok;
}

/* decimal digits (no sign, no leading zero but "0") into *v, <= max */
static bool
decimal(const char *p, size_t len, uint32_t max, uint32_t *v)
{
    uint64_t x = 0;
    size_t i;

    if (len == 0 || len > 10 || (len > 1 && p[0] == '0')) {
        return false;
    }
    for (i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        x = x * 10 + (uint64_t)(p[i] - '0');
    }
    if (x > max) {
        return false;
    }
    *v = (uint32_t)x;
    return true;
}

bool
kr_scram_cred_parse(struct kr_scram_cred *c, enum kr_scram_hash h,
                    const char *text, size_t len, const char **why)
{
    enum { K_SALT, K_STORED, K_SERVER, K_ITER, K_N };
    static const char *const keys[K_N] = {
        "salt", "stored_key", "server_key", "iterations"
    };
    bool seen[K_N] = { false, false, false, false };
    size_t pos = 0, klen = kr_scram_hash_len(h), n;

    kr_scram_cred_wipe(c);
    c->hash = h;
    while (pos <= len) {
        const char *f = text + pos, *comma, *eq;
        size_t flen, k;

        comma = memchr(f, ',', len - pos);
        flen = comma != NULL ? (size_t)(comma - f) : len - pos;
        eq = memchr(f, '=', flen);
        if (eq == NULL) {
            WHY("credential: want key=value pairs separated by ','");
            goto bad;
        }
        for (k = 0; k < K_N; k++) {
            if ((size_t)(eq - f) == strlen(keys[k]) &&
                memcmp(f, keys[k], strlen(keys[k])) == 0) {
                break;
            }
        }
        if (k == K_N) {
            WHY("credential: unknown key (want salt, stored_key, "
                "server_key, iterations)");
            goto bad;
        }
        if (seen[k]) {
            WHY("credential: a key given twice");
            goto bad;
        }
        seen[k] = true;
        eq++;
        n = flen - (size_t)(eq - f);
        switch (k) {
        case K_SALT:
            if (!b64_field(eq, n, c->salt, sizeof(c->salt), &c->salt_len) ||
                c->salt_len == 0) {
                WHY("credential: salt is not base64 of 1..128 bytes");
                goto bad;
            }
            break;
        case K_STORED:
        case K_SERVER:
            if (!b64_field(eq, n, k == K_STORED ? c->stored_key
                                                : c->server_key,
                           KR_SCRAM_KEY_MAX, &n) || n != klen) {
                WHY(h == KR_SCRAM_SHA512
                    ? "credential: stored_key or server_key is not base64 "
                      "of 64 bytes (SHA-512)"
                    : "credential: stored_key or server_key is not base64 "
                      "of 32 bytes (SHA-256)");
                goto bad;
            }
            break;
        default:
            if (!decimal(eq, n, 0xffffffffu, &c->iterations) ||
                c->iterations < KR_SCRAM_ITER_MIN ||
                c->iterations > KR_SCRAM_ITER_MAX) {
                WHY("credential: iterations must be 4096..16384 (Kafka's "
                    "SCRAM bounds)");
                goto bad;
            }
            break;
        }
        if (comma == NULL) {
            break;
        }
        pos += flen + 1;
    }
    if (!seen[K_SALT] || !seen[K_STORED] || !seen[K_SERVER] ||
        !seen[K_ITER]) {
        WHY("credential: salt, stored_key, server_key and iterations are "
            "all needed");
        goto bad;
    }
    return true;
bad:
    kr_scram_cred_wipe(c);
    return false;
}

char *
kr_scram_cred_format(const struct kr_scram_cred *c)
{
    size_t klen = kr_scram_hash_len(c->hash);
    size_t cap = 64 + kr_sasl_b64_encoded_len(c->salt_len) +
                 2 * kr_sasl_b64_encoded_len(klen);
    char *s = malloc(cap), *p;

    if (s == NULL) {
        return NULL;
    }
    p = s;
    p += sprintf(p, "salt=");
    p += kr_sasl_b64_encode(c->salt, c->salt_len, p);
    p += sprintf(p, ",stored_key=");
    p += kr_sasl_b64_encode(c->stored_key, klen, p);
    p += sprintf(p, ",server_key=");
    p += kr_sasl_b64_encode(c->server_key, klen, p);
    sprintf(p, ",iterations=%u", (unsigned)c->iterations);
    return s;
}

enum kr_scram_outcome
kr_scram_check_password(const struct kr_scram_cred *c, const uint8_t *pw,
                        size_t pw_len)
{
    uint8_t salted[KR_SCRAM_KEY_MAX], stored[KR_SCRAM_KEY_MAX];
    enum kr_scram_outcome o = KR_SCRAM_NO_MEMORY;

    if (kr_scram_salted_password(c->hash, pw, pw_len, c->salt, c->salt_len,
                                 c->iterations, salted) &&
        keys_of(c->hash, salted, NULL, stored, NULL)) {
        o = CRYPTO_memcmp(stored, c->stored_key,
                          kr_scram_hash_len(c->hash)) == 0
            ? KR_SCRAM_OK : KR_SCRAM_BAD_PROOF;
    }
    OPENSSL_cleanse(salted, sizeof(salted));
    OPENSSL_cleanse(stored, sizeof(stored));
    return o;
}

/* ---- nonces ----------------------------------------------------------- */

bool
kr_scram_nonce_random(void *arg, char *out, size_t cap)
{
    uint8_t r[24];

    (void)arg;
    if (cap < kr_sasl_b64_encoded_len(sizeof(r)) + 1 ||
        RAND_bytes(r, (int)sizeof(r)) != 1) {
        return false;
    }
    kr_sasl_b64_encode(r, sizeof(r), out);
    return true;
}

/* a nonce part from fn (NULL: random) into out; its length, 0: failed */
static size_t
make_nonce(kr_scram_nonce_fn fn, void *arg, char *out, size_t cap)
{
    size_t i;

    memset(out, 0, cap);
    if (!(fn != NULL ? fn : kr_scram_nonce_random)(arg, out, cap) ||
        out[cap - 1] != '\0') {
        return 0;
    }
    for (i = 0; out[i] != '\0'; i++) {
        if (out[i] < 0x21 || out[i] > 0x7e || out[i] == ',') {
            return 0;
        }
    }
    return i <= KR_SCRAM_NONCE_MAX ? i : 0;
}

/* ---- server side ------------------------------------------------------ */

void
kr_scram_server_init(struct kr_scram_server *s, enum kr_scram_hash h,
                     kr_scram_nonce_fn nonce_fn, void *nonce_arg)
{
    memset(s, 0, sizeof(*s));
    s->hash = h;
    s->nonce_fn = nonce_fn;
    s->nonce_arg = nonce_arg;
}

void
kr_scram_server_free(struct kr_scram_server *s)
{
    kr_scram_cred_wipe(&s->cred);
    free(s->user);
    free(s->gs2_b64);
    free(s->nonce);
    if (s->auth_msg != NULL) {
        OPENSSL_cleanse(s->auth_msg, s->auth_msg_len);
        free(s->auth_msg);
    }
    s->user = s->gs2_b64 = s->nonce = s->auth_msg = NULL;
    s->auth_msg_len = 0;
}

static enum kr_scram_outcome
server_fail(struct kr_scram_server *s, enum kr_scram_outcome o)
{
    s->state = KR_SCRAM_SERVER_FAILED;
    kr_scram_cred_wipe(&s->cred);
    return o;
}

enum kr_scram_outcome
kr_scram_server_first(struct kr_scram_server *s,
                      const struct kr_sasl_scram_first *cf,
                      const struct kr_scram_cred *cred,
                      const uint8_t *mock_key, size_t mock_key_len,
                      char **out, size_t *out_len)
{
    char snonce[KR_SCRAM_NONCE_MAX + 1], *salt_b64 = NULL, *msg = NULL;
    size_t sn, mlen;
    const char *why = NULL;
    int n;

    *out = NULL;
    *out_len = 0;
    if (s->state != KR_SCRAM_SERVER_START ||
        (cred != NULL && cred->hash != s->hash)) {
        return server_fail(s, KR_SCRAM_STATE);
    }
    if (cf->tokenauth) {
        return server_fail(s, KR_SCRAM_TOKENAUTH);
    }
    s->user = kr_sasl_scram_unescape(cf->user, cf->user_len, &why);
    if (s->user == NULL) {
        return server_fail(s, why != NULL && strcmp(why, "out of memory") == 0
                              ? KR_SCRAM_NO_MEMORY : KR_SCRAM_MALFORMED);
    }
    /* Kafka compares the authzid as sent with the unescaped user */
    if (cf->authzid_len != 0 &&
        (cf->authzid_len != strlen(s->user) ||
         memcmp(cf->authzid, s->user, cf->authzid_len) != 0)) {
        return server_fail(s, KR_SCRAM_AUTHZID_MISMATCH);
    }
    if (cred != NULL) {
        s->cred = *cred;
    } else {
        uint8_t mac[KR_SCRAM_KEY_MAX];

        if (mock_key == NULL || mock_key_len == 0) {
            return server_fail(s, KR_SCRAM_UNKNOWN_USER);
        }
        /* a salt that is the same each time for one name, keys that no
           password matches (random) */
        s->unknown_user = true;
        s->cred.hash = s->hash;
        s->cred.iterations = s->mock_iterations != 0 ? s->mock_iterations
                                                     : KR_SCRAM_ITER_DEFAULT;
        if (!hmac(s->hash, mock_key, mock_key_len, s->user, strlen(s->user),
                  mac) ||
            RAND_bytes(s->cred.stored_key, KR_SCRAM_KEY_MAX) != 1 ||
            RAND_bytes(s->cred.server_key, KR_SCRAM_KEY_MAX) != 1) {
            return server_fail(s, KR_SCRAM_NO_MEMORY);
        }
        s->cred.salt_len = s->mock_salt_len != 0 ? s->mock_salt_len
                                                 : KR_SCRAM_SALT_LEN;
        if (s->cred.salt_len > kr_scram_hash_len(s->hash)) {
            s->cred.salt_len = kr_scram_hash_len(s->hash);
        }
        memcpy(s->cred.salt, mac, s->cred.salt_len);
        OPENSSL_cleanse(mac, sizeof(mac));
    }
    sn = make_nonce(s->nonce_fn, s->nonce_arg, snonce, sizeof(snonce));
    if (sn == 0) {
        return server_fail(s, KR_SCRAM_NONCE_FAILED);
    }
    s->gs2_b64 = malloc(kr_sasl_b64_encoded_len(cf->gs2_header_len) + 1);
    salt_b64 = malloc(kr_sasl_b64_encoded_len(s->cred.salt_len) + 1);
    s->nonce = malloc(cf->nonce_len + sn + 1);
    if (s->gs2_b64 == NULL || salt_b64 == NULL || s->nonce == NULL) {
        free(salt_b64);
        return server_fail(s, KR_SCRAM_NO_MEMORY);
    }
    kr_sasl_b64_encode(cf->gs2_header, cf->gs2_header_len, s->gs2_b64);
    kr_sasl_b64_encode(s->cred.salt, s->cred.salt_len, salt_b64);
    memcpy(s->nonce, cf->nonce, cf->nonce_len);
    s->cnonce_len = cf->nonce_len;
    memcpy(s->nonce + cf->nonce_len, snonce, sn + 1);
    n = asprintf(&msg, "r=%s,s=%s,i=%u", s->nonce, salt_b64,
                 (unsigned)s->cred.iterations);
    free(salt_b64);
    if (n < 0) {
        return server_fail(s, KR_SCRAM_NO_MEMORY);
    }
    mlen = (size_t)n;
    /* AuthMessage so far: client-first-bare "," server-first "," */
    s->auth_msg_len = cf->bare_len + 1 + mlen + 1;
    s->auth_msg = malloc(s->auth_msg_len);
    if (s->auth_msg == NULL) {
        s->auth_msg_len = 0;
        free(msg);
        return server_fail(s, KR_SCRAM_NO_MEMORY);
    }
    memcpy(s->auth_msg, cf->bare, cf->bare_len);
    s->auth_msg[cf->bare_len] = ',';
    memcpy(s->auth_msg + cf->bare_len + 1, msg, mlen);
    s->auth_msg[s->auth_msg_len - 1] = ',';
    s->state = KR_SCRAM_SERVER_FIRST_SENT;
    *out = msg;
    *out_len = mlen;
    return KR_SCRAM_OK;
}

/* server-final "e=<value>" for outcome o into *out */
static enum kr_scram_outcome
server_error(struct kr_scram_server *s, enum kr_scram_outcome o, char **out,
             size_t *out_len)
{
    const char *v;

    switch (o) {
    case KR_SCRAM_MALFORMED: v = "invalid-encoding"; break;
    case KR_SCRAM_BAD_CHANNEL_BINDING: v = "channel-bindings-dont-match";
        break;
    case KR_SCRAM_BAD_PROOF:
    case KR_SCRAM_UNKNOWN_USER: v = "invalid-proof"; break;
    default: v = "other-error"; break;
    }
    *out = malloc(strlen(v) + 3);
    if (*out != NULL) {
        *out_len = (size_t)sprintf(*out, "e=%s", v);
    }
    return server_fail(s, o);
}

/*
 * Is r= of a client-final message the nonce of this exchange?  Exactly
 * s->nonce (RFC 5802), or the form librdkafka before 2.6.1 sends: its
 * client nonce, then the whole nonce again (librdkafka#4895; Debian 12's
 * 2.0.2 and kcat).  Kafka 3.x accepts any r= ending with the nonce;
 * krelay takes only that one known form: the server's part is still
 * there, so a replayed client-final still fails, and the proof covers
 * the message as sent.
 */
static bool
final_nonce_ok(const struct kr_scram_server *s, const uint8_t *r,
               size_t len)
{
    size_t n = strlen(s->nonce);

    if (len == n) {
        return memcmp(r, s->nonce, n) == 0;
    }
    return len == s->cnonce_len + n &&
           memcmp(r, s->nonce, s->cnonce_len) == 0 &&
           memcmp(r + s->cnonce_len, s->nonce, n) == 0;
}

enum kr_scram_outcome
kr_scram_server_final(struct kr_scram_server *s, const uint8_t *msg,
                      size_t len, char **out, size_t *out_len)
{
    struct kr_sasl_scram_final f;
    size_t hl = kr_scram_hash_len(s->hash), am_len, plen, i;
    uint8_t proof[KR_SCRAM_KEY_MAX * 2], sig[KR_SCRAM_KEY_MAX];
    uint8_t ck[KR_SCRAM_KEY_MAX], stored[KR_SCRAM_KEY_MAX];
    char *am = NULL;
    enum kr_scram_outcome o;
    bool ok;

    *out = NULL;
    *out_len = 0;
    if (s->state != KR_SCRAM_SERVER_FIRST_SENT) {
        return server_fail(s, KR_SCRAM_STATE);
    }
    if (!kr_sasl_scram_final_parse(msg, len, &f, NULL)) {
        return server_error(s, KR_SCRAM_MALFORMED, out, out_len);
    }
    if (f.cbind_len != strlen(s->gs2_b64) ||
        memcmp(f.cbind, s->gs2_b64, f.cbind_len) != 0) {
        return server_error(s, KR_SCRAM_BAD_CHANNEL_BINDING, out, out_len);
    }
    if (!final_nonce_ok(s, f.nonce, f.nonce_len)) {
        return server_error(s, KR_SCRAM_BAD_NONCE, out, out_len);
    }
    if (f.proof_len > kr_sasl_b64_encoded_len(hl) ||
        !kr_sasl_b64_decode(f.proof, f.proof_len, false, proof, &plen) ||
        plen != hl) {
        OPENSSL_cleanse(proof, sizeof(proof));
        return server_error(s, s->unknown_user ? KR_SCRAM_UNKNOWN_USER
                                               : KR_SCRAM_BAD_PROOF,
                            out, out_len);
    }
    am_len = s->auth_msg_len + f.without_proof_len;
    am = malloc(am_len);
    if (am == NULL) {
        OPENSSL_cleanse(proof, sizeof(proof));
        return server_fail(s, KR_SCRAM_NO_MEMORY);
    }
    memcpy(am, s->auth_msg, s->auth_msg_len);
    memcpy(am + s->auth_msg_len, f.without_proof, f.without_proof_len);
    /* ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage) */
    ok = hmac(s->hash, s->cred.stored_key, hl, am, am_len, sig);
    for (i = 0; i < hl; i++) {
        ck[i] = proof[i] ^ sig[i];
    }
    ok = ok && digest(s->hash, ck, hl, stored);
    if (!ok) {
        o = KR_SCRAM_NO_MEMORY;
    } else if (CRYPTO_memcmp(stored, s->cred.stored_key, hl) != 0 ||
               s->unknown_user) {
        o = s->unknown_user ? KR_SCRAM_UNKNOWN_USER : KR_SCRAM_BAD_PROOF;
    } else {
        /* ServerSignature = HMAC(ServerKey, AuthMessage) */
        o = hmac(s->hash, s->cred.server_key, hl, am, am_len, sig)
            ? KR_SCRAM_OK : KR_SCRAM_NO_MEMORY;
    }
    OPENSSL_cleanse(proof, sizeof(proof));
    OPENSSL_cleanse(ck, sizeof(ck));
    OPENSSL_cleanse(stored, sizeof(stored));
    OPENSSL_cleanse(am, am_len);
    free(am);
    if (o == KR_SCRAM_OK) {
        *out = malloc(2 + kr_sasl_b64_encoded_len(hl) + 1);
        if (*out == NULL) {
            OPENSSL_cleanse(sig, sizeof(sig));
            return server_fail(s, KR_SCRAM_NO_MEMORY);
        }
        memcpy(*out, "v=", 2);
        *out_len = 2 + kr_sasl_b64_encode(sig, hl, *out + 2);
        s->state = KR_SCRAM_SERVER_DONE;
        kr_scram_cred_wipe(&s->cred);
    }
    OPENSSL_cleanse(sig, sizeof(sig));
    if (o == KR_SCRAM_NO_MEMORY) {
        return server_fail(s, o);
    }
    if (o != KR_SCRAM_OK) {
        return server_error(s, o, out, out_len);
    }
    return o;
}

/* ---- client side ------------------------------------------------------ */

void
kr_scram_client_free(struct kr_scram_client *c)
{
    if (c->auth_msg != NULL) {
        OPENSSL_cleanse(c->auth_msg, c->auth_msg_len);
        free(c->auth_msg);
    }
    free(c->nonce);
    OPENSSL_cleanse(c, sizeof(*c));
}

static enum kr_scram_outcome
client_fail(struct kr_scram_client *c, enum kr_scram_outcome o)
{
    c->state = KR_SCRAM_CLIENT_FAILED;
    OPENSSL_cleanse(c->server_sig, sizeof(c->server_sig));
    return o;
}

enum kr_scram_outcome
kr_scram_client_first(struct kr_scram_client *c, enum kr_scram_hash h,
                      const char *user, kr_scram_nonce_fn nonce_fn,
                      void *nonce_arg, char **out, size_t *out_len)
{
    char cnonce[KR_SCRAM_NONCE_MAX + 1], *m, *p;
    size_t ulen = strlen(user), cn, i, cap;

    *out = NULL;
    *out_len = 0;
    if (c->state != KR_SCRAM_CLIENT_START || c->auth_msg != NULL) {
        return client_fail(c, KR_SCRAM_STATE);
    }
    c->hash = h;
    if (ulen == 0) {
        return client_fail(c, KR_SCRAM_BAD_USER);
    }
    for (i = 0; i < ulen; i++) {
        if ((uint8_t)user[i] >= 0x80) {
            return client_fail(c, KR_SCRAM_BAD_USER);
        }
    }
    cn = make_nonce(nonce_fn, nonce_arg, cnonce, sizeof(cnonce));
    if (cn == 0) {
        return client_fail(c, KR_SCRAM_NONCE_FAILED);
    }
    cap = 3 + 2 + 3 * ulen + 3 + cn + 1;
    m = malloc(cap);
    if (m == NULL) {
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    p = m + sprintf(m, "n,,n=");
    for (i = 0; i < ulen; i++) {
        if (user[i] == ',') {
            p += sprintf(p, "=2C");
        } else if (user[i] == '=') {
            p += sprintf(p, "=3D");
        } else {
            *p++ = user[i];
        }
    }
    p += sprintf(p, ",r=%s", cnonce);
    *out_len = (size_t)(p - m);
    /* the AuthMessage starts with client-first-bare: m without "n,," */
    c->bare_len = *out_len - 3;
    c->cnonce_len = cn;
    c->auth_msg = malloc(c->bare_len);
    if (c->auth_msg == NULL) {
        free(m);
        *out_len = 0;
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    memcpy(c->auth_msg, m + 3, c->bare_len);
    c->auth_msg_len = c->bare_len;
    c->state = KR_SCRAM_CLIENT_FIRST_SENT;
    *out = m;
    return KR_SCRAM_OK;
}

/* the run from pos to the next ',' or the end */
static size_t
field_end(const uint8_t *p, size_t len, size_t pos)
{
    const uint8_t *q = pos < len ? memchr(p + pos, ',', len - pos) : NULL;

    return q != NULL ? (size_t)(q - p) : len;
}

enum kr_scram_outcome
kr_scram_client_server_first(struct kr_scram_client *c, const uint8_t *msg,
                             size_t len)
{
    size_t pos, end, i, n;
    const uint8_t *cnonce;
    char *am;

    if (c->state != KR_SCRAM_CLIENT_FIRST_SENT) {
        return client_fail(c, KR_SCRAM_STATE);
    }
    if (len < 2 || memcmp(msg, "r=", 2) != 0) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    pos = 2;
    end = field_end(msg, len, pos);
    for (i = pos; i < end; i++) {
        if (msg[i] < 0x21 || msg[i] > 0x7e) {
            return client_fail(c, KR_SCRAM_MALFORMED);
        }
    }
    cnonce = (const uint8_t *)c->auth_msg + c->bare_len - c->cnonce_len;
    if (end - pos <= c->cnonce_len ||
        memcmp(msg + pos, cnonce, c->cnonce_len) != 0) {
        return client_fail(c, KR_SCRAM_BAD_NONCE);
    }
    c->nonce = malloc(end - pos + 1);
    if (c->nonce == NULL) {
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    memcpy(c->nonce, msg + pos, end - pos);
    c->nonce[end - pos] = '\0';
    pos = end;
    if (len - pos < 3 || memcmp(msg + pos, ",s=", 3) != 0) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    pos += 3;
    end = field_end(msg, len, pos);
    if (!b64_field((const char *)msg + pos, end - pos, c->salt,
                   sizeof(c->salt), &c->salt_len) || c->salt_len == 0) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    pos = end;
    if (len - pos < 3 || memcmp(msg + pos, ",i=", 3) != 0) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    pos += 3;
    end = field_end(msg, len, pos);
    for (i = pos; i < end; i++) {
        if (msg[i] < '0' || msg[i] > '9') {
            return client_fail(c, KR_SCRAM_MALFORMED);
        }
    }
    if (end == pos) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    if (!decimal((const char *)msg + pos, end - pos,
                 KR_SCRAM_CLIENT_ITER_MAX, &c->iterations) ||
        c->iterations < KR_SCRAM_ITER_MIN) {
        return client_fail(c, KR_SCRAM_BAD_ITERATIONS);
    }
    /* extensions: ("," ALPHA+ "=" 0x01-0x7F but ',')*, ignored */
    pos = end;
    while (pos < len) {
        size_t k = ++pos;

        end = field_end(msg, len, pos);
        while (k < end && ((msg[k] | 0x20) >= 'a' && (msg[k] | 0x20) <= 'z')) {
            k++;
        }
        if (k == pos || k + 1 >= end || msg[k] != '=') {
            return client_fail(c, KR_SCRAM_MALFORMED);
        }
        for (k++; k < end; k++) {
            if (msg[k] == 0 || msg[k] >= 0x80) {
                return client_fail(c, KR_SCRAM_MALFORMED);
            }
        }
        pos = end;
    }
    /* AuthMessage: client-first-bare "," server-first "," */
    n = c->auth_msg_len + 1 + len + 1;
    am = realloc(c->auth_msg, n);
    if (am == NULL) {
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    am[c->auth_msg_len] = ',';
    memcpy(am + c->auth_msg_len + 1, msg, len);
    am[n - 1] = ',';
    c->auth_msg = am;
    c->auth_msg_len = n;
    c->state = KR_SCRAM_CLIENT_FIRST_READ;
    return KR_SCRAM_OK;
}

enum kr_scram_outcome
kr_scram_client_final(struct kr_scram_client *c, const uint8_t *salted,
                      char **out, size_t *out_len)
{
    size_t hl = kr_scram_hash_len(c->hash), wlen, i, n;
    uint8_t ck[KR_SCRAM_KEY_MAX], stored[KR_SCRAM_KEY_MAX];
    uint8_t server_key[KR_SCRAM_KEY_MAX], sig[KR_SCRAM_KEY_MAX];
    char *am, *m;
    bool ok;

    *out = NULL;
    *out_len = 0;
    if (c->state != KR_SCRAM_CLIENT_FIRST_READ) {
        return client_fail(c, KR_SCRAM_STATE);
    }
    /* client-final-without-proof: "c=biws,r=<nonce>" (gs2 "n,,") */
    wlen = 9 + strlen(c->nonce);
    n = c->auth_msg_len + wlen;
    am = realloc(c->auth_msg, n + 1);
    if (am == NULL) {
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    c->auth_msg = am;
    sprintf(am + c->auth_msg_len, "c=biws,r=%s", c->nonce);
    c->auth_msg_len = n;
    m = malloc(wlen + 3 + kr_sasl_b64_encoded_len(hl) + 1);
    if (m == NULL) {
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    ok = keys_of(c->hash, salted, ck, stored, server_key) &&
         hmac(c->hash, stored, hl, am, n, sig) &&
         hmac(c->hash, server_key, hl, am, n, c->server_sig);
    if (ok) {
        /* ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage) */
        for (i = 0; i < hl; i++) {
            ck[i] ^= sig[i];
        }
        memcpy(m, am + c->auth_msg_len - wlen, wlen);
        memcpy(m + wlen, ",p=", 3);
        *out_len = wlen + 3 + kr_sasl_b64_encode(ck, hl, m + wlen + 3);
    }
    OPENSSL_cleanse(ck, sizeof(ck));
    OPENSSL_cleanse(stored, sizeof(stored));
    OPENSSL_cleanse(server_key, sizeof(server_key));
    OPENSSL_cleanse(sig, sizeof(sig));
    if (!ok) {
        free(m);
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    c->state = KR_SCRAM_CLIENT_FINAL_SENT;
    *out = m;
    return KR_SCRAM_OK;
}

enum kr_scram_outcome
kr_scram_client_final_password(struct kr_scram_client *c, const uint8_t *pw,
                               size_t pw_len, char **out, size_t *out_len)
{
    uint8_t salted[KR_SCRAM_KEY_MAX];
    enum kr_scram_outcome o;

    *out = NULL;
    *out_len = 0;
    if (c->state != KR_SCRAM_CLIENT_FIRST_READ) {
        return client_fail(c, KR_SCRAM_STATE);
    }
    if (!kr_scram_salted_password(c->hash, pw, pw_len, c->salt, c->salt_len,
                                  c->iterations, salted)) {
        return client_fail(c, KR_SCRAM_NO_MEMORY);
    }
    o = kr_scram_client_final(c, salted, out, out_len);
    OPENSSL_cleanse(salted, sizeof(salted));
    return o;
}

enum kr_scram_outcome
kr_scram_client_verify(struct kr_scram_client *c, const uint8_t *msg,
                       size_t len)
{
    size_t hl = kr_scram_hash_len(c->hash), end, n, i;
    uint8_t sig[KR_SCRAM_KEY_MAX * 2];
    bool eq;

    if (c->state != KR_SCRAM_CLIENT_FINAL_SENT) {
        return client_fail(c, KR_SCRAM_STATE);
    }
    if (len >= 2 && memcmp(msg, "e=", 2) == 0) {
        /* e= value: 0x01-0x7F but ',' and '=' (Kafka's VALUE_SAFE) */
        for (i = 2; i < len; i++) {
            if (msg[i] == 0 || msg[i] >= 0x80 || msg[i] == ',' ||
                msg[i] == '=') {
                return client_fail(c, KR_SCRAM_MALFORMED);
            }
        }
        return client_fail(c, len > 2 ? KR_SCRAM_SERVER_ERROR
                                      : KR_SCRAM_MALFORMED);
    }
    if (len < 2 || memcmp(msg, "v=", 2) != 0) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    end = field_end(msg, len, 2);
    if (end - 2 > kr_sasl_b64_encoded_len(hl) ||
        !kr_sasl_b64_decode(msg + 2, end - 2, false, sig, &n)) {
        return client_fail(c, KR_SCRAM_MALFORMED);
    }
    eq = n == hl && CRYPTO_memcmp(sig, c->server_sig, hl) == 0;
    OPENSSL_cleanse(sig, sizeof(sig));
    if (!eq) {
        return client_fail(c, KR_SCRAM_BAD_SIGNATURE);
    }
    c->state = KR_SCRAM_CLIENT_DONE;
    OPENSSL_cleanse(c->server_sig, sizeof(c->server_sig));
    return KR_SCRAM_OK;
}
