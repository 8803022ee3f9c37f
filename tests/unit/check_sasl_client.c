/*
 * check_sasl_client.c - krelay's SASL client exchange (kr_sasl_client):
 * the request frames byte for byte as Kafka's schemas lay them out
 * (SaslHandshake v1, SaslAuthenticate v0/v1/v2, ApiVersions v0, written
 * here by hand, not by the codec under test), each mechanism's token
 * (PLAIN, OAUTHBEARER, SCRAM-SHA-256 with RFC 7677's exchange), the
 * broker's answers fed back (built by hand
 * too) and each failure: mechanism not enabled, credentials refused,
 * undecodable and mismatched answers, a broker without SaslAuthenticate,
 * an unreadable token file, an OAUTHBEARER error challenge.  The
 * re-authentication point, and the mechanism names against the config's
 * choices.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kr_conf.h"
#include "kr_sasl_client.h"

/* ---- bytes by hand ---------------------------------------------------- */

struct bb {
    uint8_t b[1024];
    size_t n;
};

static void
put(struct bb *b, const void *p, size_t n)
{
    ck_assert_uint_le(b->n + n, sizeof(b->b));
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void
i8(struct bb *b, uint8_t v)
{
    put(b, &v, 1);
}

static void
i16(struct bb *b, int v)
{
    i8(b, (uint8_t)(v >> 8));
    i8(b, (uint8_t)v);
}

static void
i32(struct bb *b, int32_t v)
{
    i16(b, (int)(v >> 16) & 0xffff);
    i16(b, v & 0xffff);
}

static void
i64(struct bb *b, int64_t v)
{
    i32(b, (int32_t)(v >> 32));
    i32(b, (int32_t)(v & 0xffffffff));
}

/* int16-length string */
static void
str16(struct bb *b, const char *s)
{
    i16(b, (int)strlen(s));
    put(b, s, strlen(s));
}

/* Request header v1 (v2: with its tagged fields) and ClientId "krelay". */
static void
req_hdr(struct bb *b, int key, int ver, int32_t corr, bool flexible)
{
    i16(b, key);
    i16(b, ver);
    i32(b, corr);
    str16(b, "krelay");
    if (flexible) {
        i8(b, 0);
    }
}

static const uint8_t plain_tok[] = "\0alice\0s3cret";
#define PLAIN_TOK_LEN (sizeof(plain_tok) - 1)

static struct kr_sasl_client *
mk(enum kr_sasl_mechanism m, int16_t amax, int32_t corr)
{
    struct kr_sasl_client_creds cr;
    struct kr_sasl_client *c;

    memset(&cr, 0, sizeof(cr));
    cr.mechanism = m;
    cr.username = "alice";
    cr.password = "s3cret";
    cr.password_len = 6;
    cr.token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJrcmVsYXkifQ.";
    c = kr_sasl_client_new(&cr, amax, corr);
    ck_assert_ptr_nonnull(c);
    return c;
}

static void
req_is(const struct kr_sasl_client *c, const struct bb *want, int key,
       int ver, int32_t corr)
{
    const struct kr_sasl_client_req *r = kr_sasl_client_request(c);

    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->api_key, key);
    ck_assert_int_eq(r->api_version, ver);
    ck_assert_int_eq(r->correlation_id, corr);
    ck_assert_uint_eq(r->len, want->n);
    ck_assert_mem_eq(r->frame, want->b, want->n);
}

/* SaslHandshake v1 response: ErrorCode, Mechanisms. */
static void
hs_rsp(struct bb *b, int32_t corr, int ec, const char *const *mechs)
{
    int n = 0;

    b->n = 0;
    i32(b, corr);
    i16(b, ec);
    while (mechs != NULL && mechs[n] != NULL) {
        n++;
    }
    i32(b, n);
    for (n = 0; mechs != NULL && mechs[n] != NULL; n++) {
        str16(b, mechs[n]);
    }
}

/* SaslAuthenticate response at ver: ErrorCode, ErrorMessage (NULL:
   null), AuthBytes, SessionLifetimeMs (v1+). */
static void
au_rsp(struct bb *b, int ver, int32_t corr, int ec, const char *msg,
       const void *auth, size_t alen, int64_t life)
{
    b->n = 0;
    i32(b, corr);
    if (ver >= 2) {
        i8(b, 0);                       /* response header v1 tags */
        i16(b, ec);
        if (msg == NULL) {
            i8(b, 0);
        } else {
            i8(b, (uint8_t)(strlen(msg) + 1));
            put(b, msg, strlen(msg));
        }
        i8(b, (uint8_t)(alen + 1));
        put(b, auth, alen);
        i64(b, life);
        i8(b, 0);
        return;
    }
    i16(b, ec);
    if (msg == NULL) {
        i16(b, -1);
    } else {
        str16(b, msg);
    }
    i32(b, (int32_t)alen);
    put(b, auth, alen);
    if (ver >= 1) {
        i64(b, life);
    }
}

/* ---- cases ------------------------------------------------------------ */

START_TEST(plain_v2_bytes)
{
    static const char *const ok[] = { NULL };
    struct kr_sasl_client *c = mk(KR_SASL_MECH_PLAIN, 2, 100);
    struct bb want = { .n = 0 }, rsp;

    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    req_hdr(&want, 17, 1, 100, false);
    str16(&want, "PLAIN");
    req_is(c, &want, 17, 1, 100);

    hs_rsp(&rsp, 100, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    want.n = 0;
    req_hdr(&want, 36, 2, 101, true);
    i8(&want, (uint8_t)(PLAIN_TOK_LEN + 1));    /* compact bytes */
    put(&want, plain_tok, PLAIN_TOK_LEN);
    i8(&want, 0);
    req_is(c, &want, 36, 2, 101);
    ck_assert_int_eq(kr_sasl_client_auth_version(c), 2);

    au_rsp(&rsp, 2, 101, 0, NULL, "", 0, 1500);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_DONE);
    ck_assert_int_eq(kr_sasl_client_lifetime_ms(c), 1500);
    ck_assert_ptr_null(kr_sasl_client_request(c));
    ck_assert_str_eq(kr_sasl_client_message(c), "");
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(oauthbearer_token_file_v0)
{
    static const char *const ok[] = { NULL };
    char path[] = "/tmp/check_sasl_client.XXXXXX";
    struct kr_sasl_client_creds cr;
    struct kr_sasl_client *c;
    struct bb want = { .n = 0 }, rsp;
    const char *tok[2] = { "tok-one", "tok-two" };
    char gs2[128];
    int fd, round;

    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    for (round = 0; round < 2; round++) {
        /* the file is read again by each exchange: a refresher's new
           token goes into the next (re)authentication */
        ck_assert_int_eq(ftruncate(fd, 0), 0);
        ck_assert_int_eq(pwrite(fd, tok[round], strlen(tok[round]), 0),
                         (ssize_t)strlen(tok[round]));
        ck_assert_int_eq(pwrite(fd, "\nignored\n", 9,
                                (off_t)strlen(tok[round])), 9);
        memset(&cr, 0, sizeof(cr));
        cr.mechanism = KR_SASL_MECH_OAUTHBEARER;
        cr.token_file = path;
        c = kr_sasl_client_new(&cr, 0, 7);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
        want.n = 0;
        req_hdr(&want, 17, 1, 7, false);
        str16(&want, "OAUTHBEARER");
        req_is(c, &want, 17, 1, 7);
        hs_rsp(&rsp, 7, 0, ok);
        ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                         KR_SASL_CLIENT_SEND);
        snprintf(gs2, sizeof(gs2), "n,,\001auth=Bearer %s\001\001",
                 tok[round]);
        want.n = 0;
        req_hdr(&want, 36, 0, 8, false);
        i32(&want, (int32_t)strlen(gs2));       /* v0: int32 bytes */
        put(&want, gs2, strlen(gs2));
        req_is(c, &want, 36, 0, 8);
        au_rsp(&rsp, 0, 8, 0, NULL, "", 0, 0);
        ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                         KR_SASL_CLIENT_DONE);
        ck_assert_int_eq(kr_sasl_client_lifetime_ms(c), 0);
        kr_sasl_client_free(c);
    }
    close(fd);
    unlink(path);
}
END_TEST

START_TEST(apiversions_first_then_v1)
{
    static const char *const ok[] = { NULL };
    struct kr_sasl_client *c = mk(KR_SASL_MECH_PLAIN, -1, 5);
    struct bb want = { .n = 0 }, rsp = { .n = 0 };

    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    req_hdr(&want, 18, 0, 5, false);    /* ApiVersions v0: empty body */
    req_is(c, &want, 18, 0, 5);
    ck_assert_int_eq(kr_sasl_client_auth_version(c), -1);
    /* ApiVersions v0 response: ErrorCode, [ApiKey Min Max] */
    i32(&rsp, 5);
    i16(&rsp, 0);
    i32(&rsp, 3);
    i16(&rsp, 3), i16(&rsp, 0), i16(&rsp, 12);
    i16(&rsp, 17), i16(&rsp, 0), i16(&rsp, 1);
    i16(&rsp, 36), i16(&rsp, 0), i16(&rsp, 1);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    ck_assert_int_eq(kr_sasl_client_auth_version(c), 1);
    want.n = 0;
    req_hdr(&want, 17, 1, 6, false);
    str16(&want, "PLAIN");
    req_is(c, &want, 17, 1, 6);
    hs_rsp(&rsp, 6, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    want.n = 0;
    req_hdr(&want, 36, 1, 7, false);
    i32(&want, (int32_t)PLAIN_TOK_LEN);
    put(&want, plain_tok, PLAIN_TOK_LEN);
    req_is(c, &want, 36, 1, 7);
    au_rsp(&rsp, 1, 7, 0, NULL, "", 0, 60000);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_DONE);
    ck_assert_int_eq(kr_sasl_client_lifetime_ms(c), 60000);
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(no_saslauthenticate)
{
    struct kr_sasl_client *c = mk(KR_SASL_MECH_PLAIN, -1, 1);
    struct bb rsp = { .n = 0 };

    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    i32(&rsp, 1);
    i16(&rsp, 0);
    i32(&rsp, 1);
    i16(&rsp, 17), i16(&rsp, 0), i16(&rsp, 0);  /* v0 handshake only */
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_PROTOCOL_ERROR);
    ck_assert_ptr_nonnull(strstr(kr_sasl_client_message(c),
                                 "no SaslHandshake v1"));
    ck_assert_ptr_null(kr_sasl_client_request(c));
    /* final: more input changes nothing */
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_PROTOCOL_ERROR);
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(unsupported_mechanism)
{
    static const char *const en[] = { "PLAIN", "SCRAM-SHA-256", NULL };
    struct kr_sasl_client *c = mk(KR_SASL_MECH_OAUTHBEARER, 2, 40);
    struct bb rsp;

    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    hs_rsp(&rsp, 40, 33, en);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_UNSUPPORTED_MECHANISM);
    ck_assert_str_eq(kr_sasl_client_message(c), "the broker does not "
                     "enable OAUTHBEARER (it enables: PLAIN, "
                     "SCRAM-SHA-256)");
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(authentication_failed)
{
    static const char *const ok[] = { NULL };
    struct kr_sasl_client *c = mk(KR_SASL_MECH_PLAIN, 1, 0);
    struct bb rsp;

    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    hs_rsp(&rsp, 0, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    au_rsp(&rsp, 1, 1, 58, "Authentication failed: Invalid username or "
           "password\n", "", 0, 0);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_AUTH_FAILED);
    /* the broker's words, made printable; never the password */
    ck_assert_str_eq(kr_sasl_client_message(c), "Authentication failed: "
                     "Invalid username or password?");
    ck_assert_ptr_null(strstr(kr_sasl_client_message(c), "s3cret"));
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(other_error_and_bad_frames)
{
    static const char *const ok[] = { NULL };
    struct kr_sasl_client *c = mk(KR_SASL_MECH_PLAIN, 2, 10);
    struct bb rsp;

    /* ILLEGAL_SASL_STATE on the handshake */
    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    hs_rsp(&rsp, 10, 34, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_PROTOCOL_ERROR);
    ck_assert_str_eq(kr_sasl_client_message(c), "SaslHandshake v1 "
                     "ErrorCode ILLEGAL_SASL_STATE");
    kr_sasl_client_free(c);

    /* another CorrelationId */
    c = mk(KR_SASL_MECH_PLAIN, 2, 10);
    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    hs_rsp(&rsp, 11, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_PROTOCOL_ERROR);
    ck_assert_str_eq(kr_sasl_client_message(c), "SaslHandshake v1 "
                     "response with CorrelationId 11, expected 10");
    kr_sasl_client_free(c);

    /* cut short */
    c = mk(KR_SASL_MECH_PLAIN, 2, 10);
    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    hs_rsp(&rsp, 10, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    au_rsp(&rsp, 2, 11, 0, NULL, "", 0, 0);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n - 3),
                     KR_SASL_CLIENT_PROTOCOL_ERROR);
    ck_assert_ptr_nonnull(strstr(kr_sasl_client_message(c),
                                 "SaslAuthenticate v2 response does not "
                                 "decode"));
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(oauthbearer_error_challenge)
{
    static const char *const ok[] = { NULL };
    static const char js[] = "{\"status\":\"invalid_token\"}";
    struct kr_sasl_client *c = mk(KR_SASL_MECH_OAUTHBEARER, 2, 0);
    struct bb want = { .n = 0 }, rsp;

    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    hs_rsp(&rsp, 0, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    au_rsp(&rsp, 2, 1, 0, NULL, js, strlen(js), 0);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    /* RFC 7628 3.2.3: the client answers an error challenge with kvsep */
    req_hdr(&want, 36, 2, 2, true);
    i8(&want, 2);
    i8(&want, 1);
    i8(&want, 0);
    req_is(c, &want, 36, 2, 2);
    au_rsp(&rsp, 2, 2, 58, "invalid_token", "", 0, 0);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_AUTH_FAILED);
    ck_assert_str_eq(kr_sasl_client_message(c), "invalid_token");
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(token_file_unreadable)
{
    struct kr_sasl_client_creds cr;
    struct kr_sasl_client *c;

    memset(&cr, 0, sizeof(cr));
    cr.mechanism = KR_SASL_MECH_OAUTHBEARER;
    cr.token_file = "/nonexistent/krelay-token";
    c = kr_sasl_client_new(&cr, 2, 0);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_CREDENTIALS);
    ck_assert_str_eq(kr_sasl_client_message(c), "cannot read the token "
                     "file /nonexistent/krelay-token: No such file or "
                     "directory");
    ck_assert_ptr_null(kr_sasl_client_request(c));
    kr_sasl_client_free(c);
}
END_TEST

/* RFC 7677 section 3's client nonce. */
static bool
rfc7677_nonce(void *arg, char *out, size_t cap)
{
    (void)arg;
    snprintf(out, cap, "rOprNGfwEbeRWgbNEkqO");
    return true;
}

/* The RFC 7677 exchange (user "user", password "pencil") through
   SaslAuthenticate v2; sig: the server-final to answer. */
static enum kr_sasl_client_outcome
rfc7677(const char *sig, struct kr_sasl_client **out)
{
    static const char *const ok[] = { NULL };
    static const char cf[] = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    static const char sf[] = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)"
                             "hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    static const char fin[] = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTC"
                              "AfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9"
                              "zjfMHgsqmmiz7AndVQ=";
    struct kr_sasl_client_creds cr;
    struct kr_sasl_client *c;
    struct bb want = { .n = 0 }, rsp;

    memset(&cr, 0, sizeof(cr));
    cr.mechanism = KR_SASL_MECH_SCRAM_SHA_256;
    cr.username = "user";
    cr.password = "pencil";
    cr.password_len = 6;
    cr.scram_nonce_fn = rfc7677_nonce;
    c = kr_sasl_client_new(&cr, 2, 300);
    ck_assert_ptr_nonnull(c);
    *out = c;
    ck_assert_int_eq(kr_sasl_client_start(c), KR_SASL_CLIENT_SEND);
    req_hdr(&want, 17, 1, 300, false);
    str16(&want, "SCRAM-SHA-256");
    req_is(c, &want, 17, 1, 300);
    hs_rsp(&rsp, 300, 0, ok);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    want.n = 0;
    req_hdr(&want, 36, 2, 301, true);
    i8(&want, (uint8_t)(strlen(cf) + 1));
    put(&want, cf, strlen(cf));
    i8(&want, 0);
    req_is(c, &want, 36, 2, 301);
    au_rsp(&rsp, 2, 301, 0, NULL, sf, strlen(sf), 0);
    ck_assert_int_eq(kr_sasl_client_feed(c, rsp.b, rsp.n),
                     KR_SASL_CLIENT_SEND);
    want.n = 0;
    req_hdr(&want, 36, 2, 302, true);
    i8(&want, (uint8_t)(strlen(fin) + 1));
    put(&want, fin, strlen(fin));
    i8(&want, 0);
    req_is(c, &want, 36, 2, 302);
    au_rsp(&rsp, 2, 302, 0, NULL, sig, strlen(sig), 3600000);
    return kr_sasl_client_feed(c, rsp.b, rsp.n);
}

START_TEST(scram_rfc7677)
{
    struct kr_sasl_client *c;

    ck_assert_int_eq(rfc7677("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95"
                             "G4=", &c), KR_SASL_CLIENT_DONE);
    ck_assert_int_eq(kr_sasl_client_lifetime_ms(c), 3600000);
    kr_sasl_client_free(c);
    /* a server that does not know the password: its signature differs */
    ck_assert_int_eq(rfc7677("v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95"
                             "G4=", &c), KR_SASL_CLIENT_PROTOCOL_ERROR);
    ck_assert_ptr_nonnull(strstr(kr_sasl_client_message(c),
                                 "SCRAM server-final"));
    ck_assert_ptr_null(strstr(kr_sasl_client_message(c), "pencil"));
    kr_sasl_client_free(c);
}
END_TEST

START_TEST(reauth_point)
{
    uint64_t r;
    int64_t lo = INT64_MAX, hi = 0, v;

    ck_assert_int_eq(kr_sasl_client_reauth_after_ms(0, 5), 0);
    ck_assert_int_eq(kr_sasl_client_reauth_after_ms(-1, 5), 0);
    for (r = 0; r < 5000; r++) {
        v = kr_sasl_client_reauth_after_ms(1500, r * 2654435761u);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    /* 85 %..95 % of 1500 ms, and spread over it */
    ck_assert_int_eq(lo, 1275);
    ck_assert_int_eq(hi, 1425);
}
END_TEST

START_TEST(names_are_config_choices)
{
    struct kr_conf_key_desc d;
    size_t i;
    int m, found = 0;

    for (i = 0; kr_conf_key(i, &d); i++) {
        if (strcmp(d.section, "upstream") != 0 ||
            strcmp(d.name, "sasl_mechanism") != 0) {
            continue;
        }
        found = 1;
        ck_assert_str_eq(d.choices[0], "");
        for (m = KR_SASL_MECH_PLAIN; m <= KR_SASL_MECH_OAUTHBEARER; m++) {
            ck_assert_str_eq(d.choices[m],
                             kr_sasl_mechanism_name((enum
                                                     kr_sasl_mechanism)m));
        }
        ck_assert_ptr_null(d.choices[m]);
    }
    ck_assert_int_eq(found, 1);
}
END_TEST

static Suite *
sasl_client_suite(void)
{
    Suite *s = suite_create("sasl_client");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, plain_v2_bytes);
    tcase_add_test(tc, oauthbearer_token_file_v0);
    tcase_add_test(tc, apiversions_first_then_v1);
    tcase_add_test(tc, no_saslauthenticate);
    tcase_add_test(tc, unsupported_mechanism);
    tcase_add_test(tc, authentication_failed);
    tcase_add_test(tc, other_error_and_bad_frames);
    tcase_add_test(tc, oauthbearer_error_challenge);
    tcase_add_test(tc, token_file_unreadable);
    tcase_add_test(tc, scram_rfc7677);
    tcase_add_test(tc, reauth_point);
    tcase_add_test(tc, names_are_config_choices);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(sasl_client_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
