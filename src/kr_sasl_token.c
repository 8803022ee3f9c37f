/*
 * kr_sasl_token.c - what a SASL client sends, parsed (kr_sasl_token.h).
 *
 * Each parser walks its bytes with an explicit position and length and
 * never reads past them; nothing assumes a NUL.  Where Kafka's parsers
 * (regular expressions over the token decoded as UTF-8) are stricter
 * than the RFCs, Kafka's rules are followed, so that what krelay accepts
 * is what a broker would have accepted.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "kr_codec.h"
#include "kr_sasl_token.h"

#define WHY(w) do { if (why != NULL) { *why = (w); } } while (0)

/* ---- base64 ------------------------------------------------------------ */

static int
b64_val(uint8_t c, bool url)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == (url ? '-' : '+')) {
        return 62;
    }
    if (c == (url ? '_' : '/')) {
        return 63;
    }
    return -1;
}

size_t
kr_sasl_b64_max_decoded(size_t len)
{
    return len / 4 * 3 + 3;
}

size_t
kr_sasl_b64_encoded_len(size_t len)
{
    return (len + 2) / 3 * 4;
}

/*
 * Strict check of base64 text: the alphabet, padding (std) or its
 * absence (url), and no bits left over in the last character.  *pad:
 * how many '=' (std) or how many would be needed (url).
 */
static bool
b64_check(const uint8_t *in, size_t len, bool url, size_t *pad)
{
    size_t data = len, i, rem;
    int last;

    if (!url) {
        if (len % 4 != 0) {
            return false;
        }
        *pad = 0;
        while (data > 0 && *pad < 2 && in[data - 1] == '=') {
            data--;
            (*pad)++;
        }
    }
    for (i = 0; i < data; i++) {
        if (b64_val(in[i], url) < 0) {
            return false;
        }
    }
    rem = data % 4;
    if (rem == 1) {
        return false;
    }
    if (url) {
        *pad = rem == 0 ? 0 : 4 - rem;
    }
    if (rem == 0) {
        return true;
    }
    last = b64_val(in[data - 1], url);
    /* 2 characters carry 12 bits for 8, 3 carry 18 for 16 */
    return (last & (rem == 2 ? 0x0f : 0x03)) == 0;
}

bool
kr_sasl_b64_decode(const uint8_t *in, size_t len, bool url, uint8_t *out,
                   size_t *out_len)
{
    unsigned char *tmp = NULL;
    const unsigned char *src = in;
    size_t pad = 0, n = len, i;
    int got;

    *out_len = 0;
    if (len > (size_t)INT_MAX - 4 || !b64_check(in, len, url, &pad)) {
        return false;
    }
    if (len == 0) {
        return true;
    }
    if (url) {
        /* EVP_DecodeBlock knows the standard alphabet, padded */
        n = len + pad;
        tmp = malloc(n);
        if (tmp == NULL) {
            return false;
        }
        for (i = 0; i < len; i++) {
            tmp[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
        }
        memset(tmp + len, '=', pad);
        src = tmp;
    }
    got = EVP_DecodeBlock(out, src, (int)n);
    if (tmp != NULL) {
        OPENSSL_cleanse(tmp, n);
        free(tmp);
    }
    if (got < 0 || (size_t)got < pad) {
        return false;
    }
    *out_len = (size_t)got - pad;
    return true;
}

size_t
kr_sasl_b64_encode(const uint8_t *in, size_t len, char *out)
{
    size_t done = 0, n = 0;

    /* EVP_EncodeBlock takes an int: large inputs in whole groups */
    while (len - done > 0) {
        size_t chunk = len - done;

        if (chunk > 3 * (1u << 28)) {
            chunk = 3 * (1u << 28);
        }
        n += (size_t)EVP_EncodeBlock((unsigned char *)out + n, in + done,
                                     (int)chunk);
        done += chunk;
    }
    out[n] = '\0';
    return n;
}

/* ---- shared pieces ------------------------------------------------------ */

/* n bytes at p equal lower-case ASCII s, letters in any case */
static bool
ascii_caseeq(const uint8_t *p, const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        uint8_t c = p[i];

        if (c >= 'A' && c <= 'Z') {
            c = (uint8_t)(c + 32);
        }
        if (c != (uint8_t)s[i]) {
            return false;
        }
    }
    return true;
}

/* s (NUL-terminated) at p[*pos]: consumed when there. */
static bool
eat(const uint8_t *p, size_t len, size_t *pos, const char *s)
{
    size_t n = strlen(s);

    if (len - *pos < n || memcmp(p + *pos, s, n) != 0) {
        return false;
    }
    *pos += n;
    return true;
}

/* The run from *pos up to (not including) the next ',' or the end. */
static size_t
upto_comma(const uint8_t *p, size_t len, size_t pos)
{
    const uint8_t *c;

    if (pos >= len) {
        return len;
    }
    c = memchr(p + pos, ',', len - pos);

    return c != NULL ? (size_t)(c - p) : len;
}

/* The nonce at *pos (up to a ',' or lim): printable ASCII but ',', not
   empty (RFC 5802 "printable"); *pos moves past it. */
static bool
nonce_at(const uint8_t *msg, size_t lim, size_t *pos, const uint8_t **nonce,
         size_t *nonce_len, const char **why)
{
    size_t end = upto_comma(msg, lim, *pos), i;

    if (end == *pos) {
        WHY("empty nonce");
        return false;
    }
    for (i = *pos; i < end; i++) {
        if (msg[i] < 0x21 || msg[i] > 0x7e) {
            WHY("nonce not printable ASCII");
            return false;
        }
    }
    *nonce = msg + *pos;
    *nonce_len = end - *pos;
    *pos = end;
    return true;
}

/*
 * Kafka's SASLNAME: (0x01-0x7F but ',' and '=' | "=2C" | "=3D")+.  The
 * run is the bytes before a ',' (the caller cut there).
 */
static bool
saslname_ok(const uint8_t *p, size_t len, const char **why)
{
    size_t i;

    if (len == 0) {
        WHY("empty name");
        return false;
    }
    for (i = 0; i < len; i++) {
        if (p[i] == 0) {
            WHY("NUL byte in a name");
            return false;
        }
        if (p[i] >= 0x80) {
            WHY("non-ASCII byte in a name (Kafka's SCRAM names are ASCII)");
            return false;
        }
        if (p[i] == '=') {
            if (len - i >= 3 &&
                ((p[i + 1] == '2' && p[i + 2] == 'C') ||
                 (p[i + 1] == '3' && p[i + 2] == 'D'))) {
                i += 2;
                continue;
            }
            WHY("'=' in a name not followed by 2C or 3D (RFC 5802)");
            return false;
        }
    }
    return true;
}

char *
kr_sasl_scram_unescape(const uint8_t *p, size_t len, const char **why)
{
    char *s;
    size_t i, o = 0;

    if (!saslname_ok(p, len, why)) {
        return NULL;
    }
    s = malloc(len + 1);
    if (s == NULL) {
        WHY("out of memory");
        return NULL;
    }
    for (i = 0; i < len; i++) {
        if (p[i] == '=') {
            s[o++] = p[i + 1] == '2' ? ',' : '=';
            i += 2;
        } else {
            s[o++] = (char)p[i];
        }
    }
    s[o] = '\0';
    return s;
}

/* ("," ALPHA+ "=" [0x01-0x7F but ',']+)* with the leading ',' of the
   first one already eaten (ext non-empty) or len 0. */
static bool
scram_ext_ok(const uint8_t *p, size_t len, bool *tokenauth,
             const char **why)
{
    size_t pos = 0;

    if (tokenauth != NULL) {
        *tokenauth = false;
    }
    if (len == 0) {
        return true;
    }
    for (;;) {
        size_t end = upto_comma(p, len, pos), k = pos, eq, i;

        while (k < end && ((p[k] | 0x20) >= 'a' && (p[k] | 0x20) <= 'z')) {
            k++;
        }
        if (k == pos || k >= end || p[k] != '=') {
            WHY("bad extension: want name=value (RFC 5802)");
            return false;
        }
        eq = k;
        if (eq + 1 == end) {
            WHY("bad extension: empty value");
            return false;
        }
        for (i = eq + 1; i < end; i++) {
            if (p[i] == 0 || p[i] >= 0x80) {
                WHY("bad extension: value not ASCII");
                return false;
            }
        }
        if (tokenauth != NULL && eq - pos == 9 &&
            memcmp(p + pos, "tokenauth", 9) == 0) {
            /* Java's Boolean.parseBoolean: "true" in any case */
            *tokenauth = end - eq - 1 == 4 &&
                         ascii_caseeq(p + eq + 1, "true", 4);
        }
        if (end == len) {
            return true;
        }
        pos = end + 1;
    }
}

/* gs2-header "n," ["a=" saslname] "," at p[*pos]: the authzid's view. */
static bool
gs2_header(const uint8_t *p, size_t len, size_t *pos,
           const uint8_t **authzid, size_t *authzid_len, const char **why)
{
    *authzid = NULL;
    *authzid_len = 0;
    if (len - *pos >= 1 && (p[*pos] == 'y' || p[*pos] == 'p')) {
        WHY("channel binding flag y or p in the gs2 header (Kafka "
            "supports no channel binding)");
        return false;
    }
    if (!eat(p, len, pos, "n,")) {
        WHY("no gs2 header \"n,\"");
        return false;
    }
    if (eat(p, len, pos, "a=")) {
        size_t end = upto_comma(p, len, *pos);

        if (!saslname_ok(p + *pos, end - *pos, why)) {
            return false;
        }
        *authzid = p + *pos;
        *authzid_len = end - *pos;
        *pos = end;
    }
    if (!eat(p, len, pos, ",")) {
        WHY("gs2 header not ended by ','");
        return false;
    }
    return true;
}

/* ---- PLAIN -------------------------------------------------------------- */

bool
kr_sasl_plain_split(const uint8_t *token, size_t len,
                    struct kr_sasl_plain *out, const char **why)
{
    const uint8_t *n1, *n2;
    struct kr_sasl_plain r;

    memset(out, 0, sizeof(*out));
    n1 = len > 0 ? memchr(token, 0, len) : NULL;
    n2 = n1 != NULL ? memchr(n1 + 1, 0, len - (size_t)(n1 + 1 - token))
                    : NULL;
    if (n2 == NULL) {
        WHY("not three NUL-separated parts (RFC 4616)");
        return false;
    }
    if (memchr(n2 + 1, 0, len - (size_t)(n2 + 1 - token)) != NULL) {
        WHY("more than three NUL-separated parts (RFC 4616)");
        return false;
    }
    memset(&r, 0, sizeof(r));
    r.authzid = token;
    r.authzid_len = (size_t)(n1 - token);
    r.authcid = n1 + 1;
    r.authcid_len = (size_t)(n2 - r.authcid);
    r.passwd = n2 + 1;
    r.passwd_len = len - (size_t)(r.passwd - token);
    if (r.authcid_len == 0) {
        WHY("user name not specified");
        return false;
    }
    if (r.passwd_len == 0) {
        WHY("password not specified");
        return false;
    }
    if (!kr_utf8_valid(r.authcid, r.authcid_len) ||
        !kr_utf8_valid(r.authzid, r.authzid_len)) {
        WHY("user name or authorization id not valid UTF-8");
        return false;
    }
    if (r.authzid_len != 0 &&
        (r.authzid_len != r.authcid_len ||
         memcmp(r.authzid, r.authcid, r.authcid_len) != 0)) {
        WHY("authorization id differs from the user name (Kafka refuses "
            "it)");
        out->authzid = r.authzid;
        out->authzid_len = r.authzid_len;
        out->authcid = r.authcid;
        out->authcid_len = r.authcid_len;
        out->authzid_differs = true;
        return false;
    }
    *out = r;
    return true;
}

/* ---- SCRAM -------------------------------------------------------------- */

bool
kr_sasl_scram_first_parse(const uint8_t *msg, size_t len,
                          struct kr_sasl_scram_first *out, const char **why)
{
    struct kr_sasl_scram_first r;
    size_t pos = 0, end;

    memset(out, 0, sizeof(*out));
    memset(&r, 0, sizeof(r));
    if (!gs2_header(msg, len, &pos, &r.authzid, &r.authzid_len, why)) {
        return false;
    }
    r.gs2_header = msg;
    r.gs2_header_len = pos;
    r.bare = msg + pos;
    r.bare_len = len - pos;
    if (len - pos >= 2 && msg[pos] == 'm' && msg[pos + 1] == '=') {
        WHY("reserved attribute m= (RFC 5802: must fail)");
        return false;
    }
    if (!eat(msg, len, &pos, "n=")) {
        WHY("no n= (user name) after the gs2 header");
        return false;
    }
    end = upto_comma(msg, len, pos);
    if (!saslname_ok(msg + pos, end - pos, why)) {
        return false;
    }
    r.user = msg + pos;
    r.user_len = end - pos;
    pos = end;
    if (!eat(msg, len, &pos, ",r=")) {
        WHY("no r= (nonce) after the user name");
        return false;
    }
    if (!nonce_at(msg, len, &pos, &r.nonce, &r.nonce_len, why)) {
        return false;
    }
    if (pos < len) {
        pos++;  /* the ',' */
        if (pos == len) {
            WHY("',' after the nonce and nothing after it");
            return false;
        }
        r.ext = msg + pos;
        r.ext_len = len - pos;
    }
    if (!scram_ext_ok(r.ext, r.ext_len, &r.tokenauth, why)) {
        return false;
    }
    *out = r;
    return true;
}

/* strict padded base64 text */
static bool
b64_text_ok(const uint8_t *p, size_t len)
{
    size_t pad;

    return b64_check(p, len, false, &pad);
}

bool
kr_sasl_scram_final_parse(const uint8_t *msg, size_t len,
                          struct kr_sasl_scram_final *out, const char **why)
{
    struct kr_sasl_scram_final r;
    size_t pos = 0, end, wp, i;
    const uint8_t *c;

    memset(out, 0, sizeof(*out));
    memset(&r, 0, sizeof(r));
    /* the proof is the last attribute: after the last ',' */
    for (c = NULL, i = len; i > 0; i--) {
        if (msg[i - 1] == ',') {
            c = msg + i - 1;
            break;
        }
    }
    if (c == NULL) {
        WHY("no p= (proof) attribute");
        return false;
    }
    wp = (size_t)(c - msg);
    pos = wp + 1;
    if (!eat(msg, len, &pos, "p=")) {
        WHY("p= (proof) is not the last attribute");
        return false;
    }
    if (pos == len || !b64_text_ok(msg + pos, len - pos)) {
        WHY("p= (proof) is not base64");
        return false;
    }
    r.proof = msg + pos;
    r.proof_len = len - pos;
    r.without_proof = msg;
    r.without_proof_len = wp;
    pos = 0;
    if (!eat(msg, wp, &pos, "c=")) {
        WHY("no c= (channel binding) first");
        return false;
    }
    end = upto_comma(msg, wp, pos);
    if (!b64_text_ok(msg + pos, end - pos) || end == pos) {
        WHY("c= (channel binding) is not base64");
        return false;
    }
    r.cbind = msg + pos;
    r.cbind_len = end - pos;
    pos = end;
    if (!eat(msg, wp, &pos, ",r=")) {
        WHY("no r= (nonce) after c=");
        return false;
    }
    if (!nonce_at(msg, wp, &pos, &r.nonce, &r.nonce_len, why)) {
        return false;
    }
    if (pos < wp) {
        pos++;
        if (pos == wp) {
            WHY("empty attribute before p=");
            return false;
        }
        if (!scram_ext_ok(msg + pos, wp - pos, NULL, why)) {
            return false;
        }
    }
    *out = r;
    return true;
}

/* ---- OAUTHBEARER -------------------------------------------------------- */

bool
kr_sasl_oauth_token(const uint8_t *msg, size_t len, const uint8_t **tok,
                    size_t *tok_len, const char **why)
{
    const uint8_t *authzid, *auth = NULL, *a, *t;
    size_t authzid_len, auth_len = 0, pos = 0, i, k, n;

    *tok = NULL;
    *tok_len = 0;
    if (!gs2_header(msg, len, &pos, &authzid, &authzid_len, why)) {
        return false;
    }
    if (!eat(msg, len, &pos, "\x01")) {
        WHY("no 0x01 after the gs2 header (RFC 7628)");
        return false;
    }
    /* ( key=value 0x01 )* 0x01 and the end */
    while (!(len - pos == 1 && msg[pos] == 0x01)) {
        const uint8_t *sep;
        size_t eq;

        if (pos == len) {
            WHY("not ended by 0x01 0x01 (RFC 7628)");
            return false;
        }
        sep = memchr(msg + pos, 0x01, len - pos);
        if (sep == NULL) {
            WHY("key=value not ended by 0x01 (RFC 7628)");
            return false;
        }
        n = (size_t)(sep - msg);
        for (k = pos; k < n && ((msg[k] | 0x20) >= 'a' &&
                                (msg[k] | 0x20) <= 'z'); k++) {
        }
        if (k == pos || k == n || msg[k] != '=' || k + 1 == n) {
            WHY("bad key=value pair (RFC 7628)");
            return false;
        }
        eq = k;
        for (i = eq + 1; i < n; i++) {
            if (!((msg[i] >= 0x21 && msg[i] <= 0x7e) || msg[i] == ' ' ||
                  msg[i] == '\t' || msg[i] == '\r' || msg[i] == '\n')) {
                WHY("bad byte in a value (RFC 7628)");
                return false;
            }
        }
        if (eq - pos == 4 && memcmp(msg + pos, "auth", 4) == 0) {
            auth = msg + eq + 1;        /* the last one wins, as Kafka */
            auth_len = n - eq - 1;
        }
        pos = n + 1;
    }
    if (auth == NULL) {
        WHY("no auth= pair (RFC 7628)");
        return false;
    }
    /* scheme: \w+, then spaces, then [-_.a-zA-Z0-9]+ (Kafka's) */
    a = auth;
    for (k = 0; k < auth_len && (a[k] == '_' || (a[k] >= '0' && a[k] <= '9')
                                 || ((a[k] | 0x20) >= 'a' &&
                                     (a[k] | 0x20) <= 'z')); k++) {
    }
    if (k != 6 || !ascii_caseeq(a, "bearer", 6)) {
        WHY("auth= scheme is not Bearer");
        return false;
    }
    if (k == auth_len || a[k] != ' ') {
        WHY("auth= has no token after Bearer");
        return false;
    }
    while (k < auth_len && a[k] == ' ') {
        k++;
    }
    t = a + k;
    n = auth_len - k;
    if (n == 0) {
        WHY("auth= has no token after Bearer");
        return false;
    }
    for (i = 0; i < n; i++) {
        if (!(t[i] == '-' || t[i] == '_' || t[i] == '.' ||
              (t[i] >= '0' && t[i] <= '9') ||
              ((t[i] | 0x20) >= 'a' && (t[i] | 0x20) <= 'z'))) {
            WHY("bad character in the bearer token");
            return false;
        }
    }
    *tok = t;
    *tok_len = n;
    return true;
}

/* One base64url part of a JWS decoded and parsed as a JSON object. */
static json_t *
jws_part(const uint8_t *p, size_t len, const char **why)
{
    size_t cap = kr_sasl_b64_max_decoded(len), n;
    uint8_t *buf;
    json_t *j = NULL;

    if (len == 0) {
        WHY("empty JWS header or payload");
        return NULL;
    }
    buf = malloc(cap);
    if (buf == NULL) {
        WHY("out of memory");
        return NULL;
    }
    if (!kr_sasl_b64_decode(p, len, true, buf, &n)) {
        WHY("JWS part is not base64url");
    } else {
        j = json_loadb((const char *)buf, n, 0, NULL);
        if (j == NULL || !json_is_object(j)) {
            WHY("JWS header or payload is not a JSON object");
            json_decref(j);
            j = NULL;
        }
    }
    OPENSSL_cleanse(buf, cap);
    free(buf);
    return j;
}

/* The claim of a JWS compact token header.payload.signature. */
static enum kr_sasl_principal_outcome
oauth_principal(const uint8_t *msg, size_t len, const char *claim,
                char **name, const char **why)
{
    const uint8_t *tok, *d1, *d2;
    size_t tok_len, n, pad;
    json_t *hdr, *pl, *v;
    const char *s;

    if (!kr_sasl_oauth_token(msg, len, &tok, &tok_len, why)) {
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    d1 = memchr(tok, '.', tok_len);
    d2 = d1 != NULL ? memchr(d1 + 1, '.', tok_len - (size_t)(d1 + 1 - tok))
                    : NULL;
    if (d2 == NULL || memchr(d2 + 1, '.', tok_len -
                             (size_t)(d2 + 1 - tok)) != NULL) {
        WHY("bearer token is not a JWS header.payload.signature");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    n = tok_len - (size_t)(d2 + 1 - tok);
    if (!b64_check(d2 + 1, n, true, &pad)) {
        WHY("JWS signature is not base64url");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    hdr = jws_part(tok, (size_t)(d1 - tok), why);
    if (hdr == NULL) {
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    json_decref(hdr);
    pl = jws_part(d1 + 1, (size_t)(d2 - d1 - 1), why);
    if (pl == NULL) {
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    v = json_object_get(pl, claim);
    if (v == NULL) {
        json_decref(pl);
        WHY("the principal claim is missing from the JWS payload");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    if (!json_is_string(v)) {
        json_decref(pl);
        WHY("the principal claim is not a string");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    s = json_string_value(v);
    if (s[strspn(s, " \t\r\n\v\f")] == '\0') {
        json_decref(pl);
        WHY("the principal claim is empty");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    *name = strdup(s);
    json_decref(pl);
    if (*name == NULL) {
        WHY("out of memory");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    return KR_SASL_PRINCIPAL_KNOWN;
}

/* ---- the principal ------------------------------------------------------ */

static enum kr_sasl_principal_outcome
dup_name(const uint8_t *p, size_t len, char **name, const char **why)
{
    *name = malloc(len + 1);
    if (*name == NULL) {
        WHY("out of memory");
        return KR_SASL_PRINCIPAL_MALFORMED;
    }
    memcpy(*name, p, len);
    (*name)[len] = '\0';
    return KR_SASL_PRINCIPAL_KNOWN;
}

enum kr_sasl_principal_outcome
kr_sasl_client_principal(const char *mech, const uint8_t *token, size_t len,
                         const char *oauth_claim, char **name,
                         const char **why)
{
    char *dummy = NULL;
    enum kr_sasl_principal_outcome o;

    if (name == NULL) {
        name = &dummy;
    }
    *name = NULL;
    if (mech == NULL) {
        return KR_SASL_PRINCIPAL_UNKNOWN;
    }
    if (strcmp(mech, "PLAIN") == 0) {
        struct kr_sasl_plain pl;

        if (!kr_sasl_plain_split(token, len, &pl, why)) {
            return KR_SASL_PRINCIPAL_MALFORMED;
        }
        o = dup_name(pl.authcid, pl.authcid_len, name, why);
    } else if (strcmp(mech, "SCRAM-SHA-256") == 0 ||
               strcmp(mech, "SCRAM-SHA-512") == 0) {
        struct kr_sasl_scram_first cf;

        if (!kr_sasl_scram_first_parse(token, len, &cf, why)) {
            return KR_SASL_PRINCIPAL_MALFORMED;
        }
        if (cf.tokenauth) {
            return KR_SASL_PRINCIPAL_UNKNOWN;
        }
        *name = kr_sasl_scram_unescape(cf.user, cf.user_len, why);
        if (*name == NULL) {
            return KR_SASL_PRINCIPAL_MALFORMED;
        }
        /* Kafka compares the authzid as sent (escaped) with the
           unescaped user name: so does krelay */
        if (cf.authzid_len != 0 &&
            (cf.authzid_len != strlen(*name) ||
             memcmp(cf.authzid, *name, cf.authzid_len) != 0)) {
            free(*name);
            *name = NULL;
            WHY("authorization id differs from the user name (Kafka "
                "refuses it)");
            return KR_SASL_PRINCIPAL_MALFORMED;
        }
        o = KR_SASL_PRINCIPAL_KNOWN;
    } else if (strcmp(mech, "OAUTHBEARER") == 0) {
        o = oauth_principal(token, len,
                            oauth_claim != NULL ? oauth_claim : "sub",
                            name, why);
    } else {
        return KR_SASL_PRINCIPAL_UNKNOWN;
    }
    if (name == &dummy) {
        free(dummy);
    }
    return o;
}
