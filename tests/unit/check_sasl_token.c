/*
 * check_sasl_token.c - what SASL clients send, parsed (kr_sasl_token):
 * the principal of a first token for PLAIN, SCRAM and OAUTHBEARER (and
 * UNKNOWN for the rest and for delegation tokens), the PLAIN split, the
 * SCRAM client-first and client-final fields, escapes, strict base64,
 * and every prefix of each valid message parsed from a buffer of exactly
 * its size (ASan sees a read past it).  No libevent, no session: this
 * binary links libkrelay.a without them.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_sasl_token.h"
#include "kr_test.h"

/* kr_sasl_client_principal over a C string (len given: NULs inside) */
static enum kr_sasl_principal_outcome
principal(const char *mech, const char *tok, size_t len, const char *claim,
          char **name, const char **why)
{
    uint8_t *copy = malloc(len > 0 ? len : 1);
    enum kr_sasl_principal_outcome o;

    ck_assert_ptr_nonnull(copy);
    memcpy(copy, tok, len);
    o = kr_sasl_client_principal(mech, copy, len, claim, name, why);
    free(copy);
    return o;
}

/* the outcome must be KNOWN with name want */
static void
known(const char *mech, const char *tok, size_t len, const char *claim,
      const char *want)
{
    char *name = NULL;
    const char *why = "unset";
    enum kr_sasl_principal_outcome o =
        principal(mech, tok, len, claim, &name, &why);

    ck_assert_msg(o == KR_SASL_PRINCIPAL_KNOWN, "%s: outcome %d (%s)",
                  mech, (int)o, o == KR_SASL_PRINCIPAL_MALFORMED ? why : "");
    ck_assert_ptr_nonnull(name);
    ck_assert_str_eq(name, want);
    free(name);
}

/* the outcome must be MALFORMED, and why must contain want_why */
static void
malformed(const char *mech, const char *tok, size_t len,
          const char *want_why)
{
    char *name = (char *)"not reset";
    const char *why = NULL;
    enum kr_sasl_principal_outcome o =
        principal(mech, tok, len, NULL, &name, &why);

    ck_assert_msg(o == KR_SASL_PRINCIPAL_MALFORMED, "%s %.*s: outcome %d",
                  mech, (int)len, tok, (int)o);
    ck_assert_ptr_null(name);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, want_why) != NULL, "why '%s', want '%s'", why,
                  want_why);
}

#define S(lit) lit, sizeof(lit) - 1

START_TEST(plain_principal)
{
    struct kr_sasl_plain pl;
    const char *why = NULL;
    static const uint8_t tok[] = "alice\0alice\0pw";

    known("PLAIN", S("\0alice\0secret"), NULL, "alice");
    known("PLAIN", S("alice\0alice\0secret"), NULL, "alice");
    known("PLAIN", S("\0J\xc3\xbcrgen\0secret"), NULL, "J\xc3\xbcrgen");
    /* the password may hold any byte but NUL, even invalid UTF-8 */
    known("PLAIN", S("\0bob\0\xff\xfe"), NULL, "bob");
    malformed("PLAIN", S("bob\0alice\0secret"), "authorization id differs");
    malformed("PLAIN", S("\0\0secret"), "user name not specified");
    malformed("PLAIN", S("\0alice\0"), "password not specified");
    malformed("PLAIN", S("\0alice\0pw\0"), "more than three");
    malformed("PLAIN", S("alice"), "not three");
    malformed("PLAIN", S(""), "not three");
    malformed("PLAIN", S("\0al\xffice\0pw"), "UTF-8");

    ck_assert(kr_sasl_plain_split(tok, sizeof(tok) - 1, &pl, &why));
    ck_assert_ptr_eq(pl.authzid, tok);
    ck_assert_uint_eq(pl.authzid_len, 5);
    ck_assert_ptr_eq(pl.authcid, tok + 6);
    ck_assert_uint_eq(pl.authcid_len, 5);
    ck_assert_ptr_eq(pl.passwd, tok + 12);
    ck_assert_uint_eq(pl.passwd_len, 2);
    ck_assert(!kr_sasl_plain_split(tok, 11, &pl, &why));
    ck_assert_ptr_null(pl.passwd);
    ck_assert_uint_eq(pl.passwd_len, 0);
}
END_TEST

START_TEST(scram_principal)
{
    known("SCRAM-SHA-256", S("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), NULL,
          "user");
    known("SCRAM-SHA-512", S("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), NULL,
          "user");
    /* escapes: =2C -> ',' =3D -> '=' */
    known("SCRAM-SHA-256", S("n,,n=a=2Cb=3Dc=3D,r=xyz"), NULL, "a,b=c=");
    known("SCRAM-SHA-256", S("n,a=bob,n=bob,r=xyz,ext=1,other=x"), NULL,
          "bob");
    known("SCRAM-SHA-256", S("n,,n=bob,r=xyz,tokenauth=false"), NULL, "bob");
    malformed("SCRAM-SHA-256", S("n,,n=a=2cb,r=x"), "not followed by 2C");
    malformed("SCRAM-SHA-256", S("n,,n=a=41,r=x"), "not followed by 2C");
    malformed("SCRAM-SHA-256", S("n,,n=a=3C,r=x"), "not followed by 2C");
    malformed("SCRAM-SHA-256", S("n,,n=a=2,r=x"), "not followed by 2C");
    malformed("SCRAM-SHA-256", S("n,,n=a=,r=x"), "not followed by 2C");
    malformed("SCRAM-SHA-256", S("n,,n=,r=x"), "empty name");
    malformed("SCRAM-SHA-256", S("n,,n=J\xc3\xbcrgen,r=x"), "non-ASCII");
    malformed("SCRAM-SHA-256", S("n,,n=a\0b,r=x"), "NUL");
    malformed("SCRAM-SHA-256", S("y,,n=bob,r=x"), "channel binding");
    malformed("SCRAM-SHA-256", S("p=tls-unique,,n=bob,r=x"),
              "channel binding");
    malformed("SCRAM-SHA-256", S("n,a=alice,n=bob,r=x"),
              "authorization id differs");
    malformed("SCRAM-SHA-256", S("n,,m=ext,n=bob,r=x"), "reserved");
    malformed("SCRAM-SHA-256", S("n,,n=bob,r="), "empty nonce");
    malformed("SCRAM-SHA-256", S("n,,n=bob,r=a b"), "printable");
    malformed("SCRAM-SHA-256", S("n,,n=bob,r=x,"), "nothing after");
    malformed("SCRAM-SHA-256", S("n,,n=bob,r=x,=1"), "extension");
    malformed("SCRAM-SHA-256", S("n,,n=bob,r=x,k1=v"), "extension");
    malformed("SCRAM-SHA-256", S("n,,n=bob,r=x,k="), "empty value");
    malformed("SCRAM-SHA-256", S("n,,n=bob"), "no r=");
    malformed("SCRAM-SHA-256", S("n,,r=x"), "no n=");
    malformed("SCRAM-SHA-256", S("n,x,n=bob,r=x"), "gs2 header");
    /* Kafka's ScramMessages: case matters in the mechanism */
    ck_assert_int_eq(principal("scram-sha-256", S("n,,n=bob,r=x"), NULL,
                               NULL, NULL), KR_SASL_PRINCIPAL_UNKNOWN);
}
END_TEST

START_TEST(scram_tokenauth_unknown)
{
    char *name = (char *)"x";

    ck_assert_int_eq(principal("SCRAM-SHA-256",
                               S("n,,n=tokenid,r=x,tokenauth=true"), NULL,
                               &name, NULL), KR_SASL_PRINCIPAL_UNKNOWN);
    ck_assert_ptr_null(name);
    ck_assert_int_eq(principal("SCRAM-SHA-512",
                               S("n,,n=t,r=x,a=b,tokenauth=TRUE,c=d"), NULL,
                               &name, NULL), KR_SASL_PRINCIPAL_UNKNOWN);
    ck_assert_int_eq(principal("GSSAPI", S("\x60\x82" "anything"), NULL, &name,
                               NULL), KR_SASL_PRINCIPAL_UNKNOWN);
    ck_assert_ptr_null(name);
    ck_assert_int_eq(principal(NULL, S("x"), NULL, &name, NULL),
                     KR_SASL_PRINCIPAL_UNKNOWN);
}
END_TEST

START_TEST(scram_first_fields)
{
    static const char m[] = "n,a=bo=2Cb,n=bo=2Cb,r=fyko+d2lbbFgONRv9qkxdawL,"
                            "tokenauth=true";
    struct kr_sasl_scram_first f;
    const char *why = NULL;
    char *u;

    ck_assert(kr_sasl_scram_first_parse((const uint8_t *)m, strlen(m), &f,
                                        &why));
    ck_assert_uint_eq(f.gs2_header_len, 11);
    ck_assert(memcmp(f.gs2_header, "n,a=bo=2Cb,", 11) == 0);
    ck_assert_uint_eq(f.authzid_len, 6);
    ck_assert(memcmp(f.authzid, "bo=2Cb", 6) == 0);
    ck_assert_ptr_eq(f.bare, (const uint8_t *)m + 11);
    ck_assert_uint_eq(f.bare_len, strlen(m) - 11);
    ck_assert_uint_eq(f.user_len, 6);
    ck_assert(memcmp(f.user, "bo=2Cb", 6) == 0);
    ck_assert_uint_eq(f.nonce_len, 24);
    ck_assert(memcmp(f.nonce, "fyko+d2lbbFgONRv9qkxdawL", 24) == 0);
    ck_assert_uint_eq(f.ext_len, 14);
    ck_assert(memcmp(f.ext, "tokenauth=true", 14) == 0);
    ck_assert(f.tokenauth);
    u = kr_sasl_scram_unescape(f.user, f.user_len, &why);
    ck_assert_str_eq(u, "bo,b");
    free(u);
    ck_assert_ptr_null(kr_sasl_scram_unescape((const uint8_t *)"a=b", 3,
                                              &why));
    ck_assert_ptr_nonnull(strstr(why, "2C or 3D"));
    ck_assert(!kr_sasl_scram_first_parse((const uint8_t *)m, 3, &f, &why));
    ck_assert_ptr_null(f.user);
}
END_TEST

START_TEST(scram_final_fields)
{
    /* RFC 7677's client-final */
    static const char m[] =
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    static const struct {
        const char *msg, *why;
    } bad[] = {
        { "c=biws,r=x", "p= (proof) is not the last" },
        { "c=biws,r=x,p=", "not base64" },
        { "c=biws,r=x,p=abc", "not base64" },
        { "c=biws,r=x,p=ab=c", "not base64" },
        { "c=biws,r=x,p=abcd,e=f", "not the last" },
        { "c=biw,r=x,p=abcd", "channel binding" },
        { "c=,r=x,p=abcd", "channel binding" },
        { "r=x,c=biws,p=abcd", "no c=" },
        { "c=biws,p=abcd", "no r=" },
        { "c=biws,r=,p=abcd", "empty nonce" },
        { "c=biws,r=x,,p=abcd", "empty attribute" },
        { "c=biws,r=x,9=1,p=abcd", "extension" },
        { "p=abcd", "no p=" },
    };
    struct kr_sasl_scram_final f;
    const char *why = NULL;
    size_t i;

    ck_assert(kr_sasl_scram_final_parse((const uint8_t *)m, strlen(m), &f,
                                        &why));
    ck_assert_uint_eq(f.cbind_len, 4);
    ck_assert(memcmp(f.cbind, "biws", 4) == 0);
    ck_assert_uint_eq(f.nonce_len, 50);
    ck_assert(memcmp(f.nonce, "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)"
                     "hNlF$k0", 50) == 0);
    ck_assert_uint_eq(f.proof_len, 44);
    ck_assert(memcmp(f.proof, "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                     44) == 0);
    ck_assert_ptr_eq(f.without_proof, (const uint8_t *)m);
    ck_assert_uint_eq(f.without_proof_len, strlen(m) - 47);
    /* an extension between r= and p= */
    ck_assert(kr_sasl_scram_final_parse((const uint8_t *)"c=biws,r=x,ab=c,"
                                        "p=abcd", 22, &f, &why));
    ck_assert_uint_eq(f.without_proof_len, 15);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        ck_assert_msg(!kr_sasl_scram_final_parse((const uint8_t *)bad[i].msg,
                                                 strlen(bad[i].msg), &f,
                                                 &why), "%s", bad[i].msg);
        ck_assert_msg(why != NULL && strstr(why, bad[i].why) != NULL,
                      "%s: why '%s', want '%s'", bad[i].msg, why, bad[i].why);
        ck_assert_ptr_null(f.proof);
    }
}
END_TEST

/* base64url of s without padding, malloc'd */
static char *
b64url(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(kr_sasl_b64_encoded_len(n) + 1), *p;

    ck_assert_ptr_nonnull(o);
    kr_sasl_b64_encode((const uint8_t *)s, n, o);
    for (p = o; *p != '\0'; p++) {
        if (*p == '+') {
            *p = '-';
        } else if (*p == '/') {
            *p = '_';
        } else if (*p == '=') {
            *p = '\0';
            break;
        }
    }
    return o;
}

/* an OAUTHBEARER initial response for header/payload JSON (sig: the
   signature part as is), authzid (NULL: none), extra kvpairs */
static char *
oauth_msg(const char *hdr, const char *payload, const char *sig,
          const char *authzid, const char *extra, size_t *len)
{
    char *h = b64url(hdr), *p = b64url(payload), *m;
    int n;

    n = asprintf(&m, "n,%s%s,\x01%sauth=Bearer %s.%s.%s\x01\x01",
                 authzid != NULL ? "a=" : "", authzid != NULL ? authzid : "",
                 extra, h, p, sig);
    ck_assert_int_gt(n, 0);
    *len = (size_t)n;
    free(h);
    free(p);
    return m;
}

#define NONE "{\"alg\":\"none\"}"

START_TEST(oauth_principal)
{
    size_t len;
    char *m;
    const uint8_t *tok;
    size_t tok_len;
    const char *why;

    m = oauth_msg(NONE, "{\"sub\":\"alice\",\"iat\":1}", "", NULL, "", &len);
    known("OAUTHBEARER", m, len, NULL, "alice");
    ck_assert(kr_sasl_oauth_token((const uint8_t *)m, len, &tok, &tok_len,
                                  &why));
    ck_assert_uint_eq(tok_len, len - (size_t)(tok - (const uint8_t *)m) - 2);
    free(m);
    /* a signature, an authzid, extensions, another claim */
    m = oauth_msg("{\"alg\":\"RS256\"}", "{\"sub\":\"s\",\"client_id\":"
                  "\"svc-1\"}", "c2lnbmF0dXJl", "svc-1", "host=x\x01", &len);
    known("OAUTHBEARER", m, len, "client_id", "svc-1");
    known("OAUTHBEARER", m, len, NULL, "s");
    free(m);
    /* JSON escapes in the claim come out decoded */
    m = oauth_msg(NONE, "{\"sub\":\"a\\u00e9b\"}", "", NULL, "", &len);
    known("OAUTHBEARER", m, len, NULL, "a\xc3\xa9" "b");
    free(m);
    m = oauth_msg(NONE, "{\"iat\":1}", "", NULL, "", &len);
    malformed("OAUTHBEARER", m, len, "claim is missing");
    free(m);
    m = oauth_msg(NONE, "{\"sub\":7}", "", NULL, "", &len);
    malformed("OAUTHBEARER", m, len, "not a string");
    free(m);
    m = oauth_msg(NONE, "{\"sub\":\"  \"}", "", NULL, "", &len);
    malformed("OAUTHBEARER", m, len, "empty");
    free(m);
    m = oauth_msg(NONE, "[\"sub\"]", "", NULL, "", &len);
    malformed("OAUTHBEARER", m, len, "JSON object");
    free(m);
    m = oauth_msg("not json", "{\"sub\":\"a\"}", "", NULL, "", &len);
    malformed("OAUTHBEARER", m, len, "JSON object");
    free(m);
    m = oauth_msg(NONE, "{\"sub\":\"a\"}", "a", NULL, "", &len);
    malformed("OAUTHBEARER", m, len, "signature is not base64url");
    free(m);
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer abc\x01\x01"),
              "not a JWS");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer a.b.c.d\x01\x01"),
              "not a JWS");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer .e30.\x01\x01"),
              "empty JWS");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer e30.e3=.\x01\x01"),
              "bad character");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Basic abc\x01\x01"),
              "not Bearer");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer\x01\x01"),
              "no token");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer \x01\x01"),
              "no token");
    malformed("OAUTHBEARER", S("n,,\x01host=x\x01\x01"), "no auth=");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer a.b.c\x01"),
              "not ended");
    malformed("OAUTHBEARER", S("n,,\x01" "auth=Bearer a.b.c"), "not ended");
    malformed("OAUTHBEARER", S("n,,auth=Bearer a.b.c\x01\x01"), "no 0x01");
    malformed("OAUTHBEARER", S("n,,\x01=x\x01\x01"), "key=value");
    malformed("OAUTHBEARER", S("n,,\x01k=\x01\x01"), "key=value");
    malformed("OAUTHBEARER", S("n,,\x01k=a\x02\x01\x01"), "bad byte");
    malformed("OAUTHBEARER", S("y,,\x01" "auth=Bearer a.b.c\x01\x01"),
              "channel binding");
}
END_TEST

START_TEST(base64_strict)
{
    static const struct {
        const char *in;
        bool url, ok;
        const char *out;
    } rows[] = {
        { "", false, true, "" },
        { "Zg==", false, true, "f" },
        { "Zm8=", false, true, "fo" },
        { "Zm9v", false, true, "foo" },
        { "Zm9vYg==", false, true, "foob" },
        { "Zg=", false, false, NULL },
        { "Zg", false, false, NULL },
        { "Zh==", false, false, NULL },     /* bits left over */
        { "Zm9=", false, false, NULL },
        { "Z===", false, false, NULL },
        { "=Zg=", false, false, NULL },
        { " Zg==", false, false, NULL },
        { "Zg==Zg==", false, false, NULL },
        { "-_8=", false, false, NULL },
        { "+/8=", false, true, "\xfb\xff" },
        { "-_8", true, true, "\xfb\xff" },
        { "+/8", true, false, NULL },
        { "Zg", true, true, "f" },
        { "Zg==", true, false, NULL },
        { "Z", true, false, NULL },
        { "Zh", true, false, NULL },
        { "", true, true, "" },
    };
    uint8_t out[32];
    size_t i, n;
    char enc[16];

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        bool ok = kr_sasl_b64_decode((const uint8_t *)rows[i].in,
                                     strlen(rows[i].in), rows[i].url, out,
                                     &n);

        ck_assert_msg(ok == rows[i].ok, "%s url=%d", rows[i].in,
                      rows[i].url);
        if (ok) {
            ck_assert_uint_eq(n, strlen(rows[i].out));
            ck_assert(memcmp(out, rows[i].out, n) == 0);
        }
    }
    ck_assert_uint_eq(kr_sasl_b64_encode((const uint8_t *)"foob", 4, enc), 8);
    ck_assert_str_eq(enc, "Zm9vYg==");
    ck_assert_uint_eq(kr_sasl_b64_encode((const uint8_t *)"", 0, enc), 0);
    ck_assert_str_eq(enc, "");
    ck_assert_uint_eq(kr_sasl_b64_encoded_len(4), 8);
}
END_TEST

/*
 * Every prefix of a valid message, from a buffer of exactly that size:
 * no crash, no read past it (ASan, valgrind), and either MALFORMED with
 * a reason or KNOWN with the whole message's name.  Prefixes shorter
 * than min_ok are all MALFORMED.
 */
static void
prefixes(const char *mech, const char *msg, size_t len, size_t min_ok,
         const char *want)
{
    size_t n;

    for (n = 0; n < len; n++) {
        uint8_t *p = malloc(n > 0 ? n : 1);
        char *name = NULL;
        const char *why = NULL;
        enum kr_sasl_principal_outcome o;

        KR_TEST_CHECK(p != NULL, "malloc");
        memcpy(p, msg, n);
        o = kr_sasl_client_principal(mech, n > 0 ? p : NULL, n, NULL, &name,
                                     &why);
        free(p);
        if (o == KR_SASL_PRINCIPAL_KNOWN) {
            KR_TEST_CHECK(n >= min_ok, "%s prefix %zu parsed", mech, n);
            KR_TEST_CHECK(name != NULL && strcmp(name, want) == 0,
                          "%s prefix %zu: %s", mech, n, name);
            free(name);
        } else {
            KR_TEST_CHECK(o == KR_SASL_PRINCIPAL_MALFORMED && why != NULL &&
                          name == NULL, "%s prefix %zu: %d", mech, n,
                          (int)o);
        }
    }
}

START_TEST(every_prefix)
{
    static const char fin[] =
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    size_t len, n, ok = 0;
    char *m;

    /* PLAIN: valid from the first password byte on */
    prefixes("PLAIN", S("ad=min\0ad=min\0pass word"), 15, "ad=min");
    prefixes("SCRAM-SHA-256", S("n,a=a=2Cb,n=a=2Cb,r=nonce,tokenauth=fal"),
             19, "a,b");
    m = oauth_msg(NONE, "{\"sub\":\"alice\"}", "c2ln", "alice", "k=v\x01",
                  &len);
    prefixes("OAUTHBEARER", m, len, len, "alice");
    free(m);
    /* client-final: each prefix is refused or parses into its own bytes */
    for (n = 0; n < sizeof(fin) - 1; n++) {
        uint8_t *p = malloc(n > 0 ? n : 1);
        struct kr_sasl_scram_final f;
        const char *why = NULL;

        KR_TEST_CHECK(p != NULL, "malloc");
        memcpy(p, fin, n);
        if (kr_sasl_scram_final_parse(n > 0 ? p : NULL, n, &f, &why)) {
            KR_TEST_CHECK(f.proof + f.proof_len == p + n, "prefix %zu", n);
            ok++;
        } else {
            KR_TEST_CHECK(why != NULL, "prefix %zu", n);
        }
        free(p);
    }
    /* the proof's prefixes of 4, 8, ... 40 characters */
    ck_assert_uint_eq(ok, 10);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("sasl_token");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, plain_principal);
    tcase_add_test(tc, scram_principal);
    tcase_add_test(tc, scram_tokenauth_unknown);
    tcase_add_test(tc, scram_first_fields);
    tcase_add_test(tc, scram_final_fields);
    tcase_add_test(tc, oauth_principal);
    tcase_add_test(tc, base64_strict);
    tcase_add_test(tc, every_prefix);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
