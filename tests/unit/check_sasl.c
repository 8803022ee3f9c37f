/*
 * check_sasl.c - the SASL passthrough state machine (kr_sasl.h, issue 9):
 * exchanges fed step by step as the session feeds them, their outcome
 * and the principal's state; KIP-368 re-authentication.  The tokens'
 * parsing itself is check_sasl_token's.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kr_sasl.h"

#define U8(s) ((const uint8_t *)(s))

/* A SaslHandshake for mech, version ver, at 1000 ms. */
static enum kr_sasl_step
hs(struct kr_sasl *sa, const char *mech, int16_t ver)
{
    sa->mech = kr_sasl_mech_of(U8(mech), (int32_t)strlen(mech));
    return kr_sasl_on_handshake(sa, U8(mech), (int32_t)strlen(mech), ver,
                                1000);
}

static enum kr_sasl_step
tok(struct kr_sasl *sa, int16_t ver, const char *t, size_t len)
{
    return kr_sasl_on_token(sa, ver, U8(t), len, NULL);
}

static enum kr_sasl_answer
ans(struct kr_sasl *sa, enum kr_sasl_frame f, int16_t err, const char *b,
    int64_t life)
{
    return kr_sasl_on_answer(sa, f, err, U8(b), b != NULL ? strlen(b) : 0,
                             life);
}

/* PLAIN over SaslHandshake v1 + SaslAuthenticate v2: claimed, then
   verified with the SessionLifetimeMs remembered. */
START_TEST(plain_v1)
{
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    ck_assert_int_eq(hs(&sa, "PLAIN", 1), KR_SASL_STEP_OK);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_STARTED);
    ck_assert_str_eq(sa.mech_name, "PLAIN");
    ck_assert_int_eq(sa.started_ms, 1000);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_HANDSHAKE, 0, NULL, -1),
                     KR_SASL_ANS_CONTINUE);
    ck_assert_int_eq(tok(&sa, 2, "\0alice\0alice-secret", 19),
                     KR_SASL_STEP_OK);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_CLAIMED);
    ck_assert_str_eq(sa.principal, "User:alice");
    ck_assert_int_eq(sa.authenticate_version, 2);
    ck_assert(!sa.authenticated);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "", 3600000),
                     KR_SASL_ANS_SUCCESS);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_SUCCEEDED);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_VERIFIED);
    ck_assert_int_eq(sa.session_lifetime_ms, 3600000);
    ck_assert(sa.authenticated);
    ck_assert(!sa.reauth);
    ck_assert_str_eq(kr_sasl_auth_name(sa.auth), "success");
    ck_assert_str_eq(kr_sasl_pstate_name(sa.pstate), "verified");
    kr_sasl_free(&sa);
    ck_assert_ptr_null(sa.principal);
}
END_TEST

/* A refused SaslAuthenticate: failure, the claim stays claimed. */
START_TEST(plain_failure)
{
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "PLAIN", 1);
    tok(&sa, 1, "\0bob\0wrong", 10);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 58, NULL, 0),
                     KR_SASL_ANS_FAILURE);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_FAILED);
    ck_assert_int_eq(sa.error_code, 58);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_CLAIMED);
    ck_assert_str_eq(sa.principal, "User:bob");
    ck_assert(!sa.authenticated);
    /* nothing after it changes that */
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "", 0),
                     KR_SASL_ANS_FAILURE);
    kr_sasl_free(&sa);
}
END_TEST

/* SCRAM over SaslAuthenticate: server-first goes on, "v=" ends it; over
   raw v0 tokens the same, and a second raw answer without "v=" fails. */
START_TEST(scram)
{
    static const char first[] = "n,,n=al=2Cice,r=abcdef";
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "SCRAM-SHA-512", 1);
    ck_assert_int_eq(tok(&sa, 1, first, strlen(first)), KR_SASL_STEP_OK);
    ck_assert_str_eq(sa.principal, "User:al,ice");
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0,
                         "r=abcdefXYZ,s=c2FsdA==,i=4096", 0),
                     KR_SASL_ANS_CONTINUE);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_CLAIMED);
    tok(&sa, 1, "c=biws,r=abcdefXYZ,p=cHJvb2Y=", 29);
    ck_assert_str_eq(sa.principal, "User:al,ice");  /* the first one's */
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "v=c2lnbmF0dXJl",
                         0),
                     KR_SASL_ANS_SUCCESS);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_VERIFIED);
    ck_assert_int_eq(sa.session_lifetime_ms, 0);
    kr_sasl_free(&sa);

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "SCRAM-SHA-256", 0);
    ck_assert(kr_sasl_start_raw(&sa));
    tok(&sa, -1, first, strlen(first));
    ck_assert_int_eq(sa.authenticate_version, -1);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_RAW, 0, "r=abcdefXYZ,s=c2FsdA==,i=4096",
                         -1),
                     KR_SASL_ANS_CONTINUE);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_RAW, 0, "v=c2ln", -1),
                     KR_SASL_ANS_SUCCESS);
    ck_assert_int_eq(sa.session_lifetime_ms, -1);
    kr_sasl_free(&sa);

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "SCRAM-SHA-256", 0);
    tok(&sa, -1, first, strlen(first));
    ans(&sa, KR_SASL_F_RAW, 0, "r=x", -1);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_RAW, 0, "e=invalid-proof", -1),
                     KR_SASL_ANS_FAILURE);
    ck_assert_int_eq(sa.error_code, -1);
    kr_sasl_free(&sa);
}
END_TEST

/* SCRAM with tokenauth=true (a delegation token) and GSSAPI: unknown; an
   unobservable end is assumed only after a successful token answer. */
START_TEST(unknown_principals)
{
    static const char dt[] = "n,,n=tokenid,r=abc,tokenauth=true";
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "SCRAM-SHA-256", 1);
    tok(&sa, 1, dt, strlen(dt));
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_UNKNOWN);
    ck_assert_ptr_null(sa.principal);
    ck_assert(kr_sasl_end_visible(&sa));
    ck_assert(!kr_sasl_assume_done(&sa));
    kr_sasl_free(&sa);

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "GSSAPI", 1);
    ck_assert(!kr_sasl_end_visible(&sa));
    ck_assert_int_eq(ans(&sa, KR_SASL_F_HANDSHAKE, 0, NULL, -1),
                     KR_SASL_ANS_CONTINUE);
    ck_assert(!kr_sasl_assume_done(&sa));       /* no token answered yet */
    tok(&sa, 1, "\x60\x82krb5", 6);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_UNKNOWN);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "\x60\x01", 0),
                     KR_SASL_ANS_CONTINUE);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_STARTED);
    ck_assert(kr_sasl_assume_done(&sa));
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_SUCCEEDED);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_UNKNOWN);
    kr_sasl_free(&sa);

    /* a first token that does not parse: unknown, with why */
    memset(&sa, 0, sizeof(sa));
    hs(&sa, "PLAIN", 1);
    tok(&sa, 1, "no-nul-at-all", 13);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_UNKNOWN);
    ck_assert_ptr_nonnull(sa.why);
    kr_sasl_free(&sa);
}
END_TEST

/* OAUTHBEARER: the claim named (default sub); an empty answer is the
   success, a non-empty one the error challenge (goes on). */
START_TEST(oauthbearer)
{
    /* {"alg":"none"} . {"sub":"carol","app":"billing"} . */
    static const char t[] =
        "n,,\x01" "auth=Bearer eyJhbGciOiJub25lIn0."
        "eyJzdWIiOiJjYXJvbCIsImFwcCI6ImJpbGxpbmcifQ.\x01\x01";
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "OAUTHBEARER", 1);
    ck_assert(kr_sasl_end_visible(&sa));
    ck_assert_int_eq(kr_sasl_on_token(&sa, 2, U8(t), strlen(t), NULL),
                     KR_SASL_STEP_OK);
    ck_assert_str_eq(sa.principal, "User:carol");
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0,
                         "{\"status\":\"invalid_token\"}", 0),
                     KR_SASL_ANS_CONTINUE);
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 58, NULL, 0),
                     KR_SASL_ANS_FAILURE);
    kr_sasl_free(&sa);

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "OAUTHBEARER", 1);
    ck_assert_int_eq(kr_sasl_on_token(&sa, 2, U8(t), strlen(t), "app"),
                     KR_SASL_STEP_OK);
    ck_assert_str_eq(sa.principal, "User:billing");
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "", 60000),
                     KR_SASL_ANS_SUCCESS);
    ck_assert_int_eq(sa.session_lifetime_ms, 60000);
    kr_sasl_free(&sa);
}
END_TEST

/* KIP-368: the same mechanism and principal pass (the verified one stays
   during the exchange); another mechanism or principal is refused. */
START_TEST(reauth)
{
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "PLAIN", 1);
    tok(&sa, 2, "\0alice\0pw1", 10);
    ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "", 1000);
    ck_assert(sa.authenticated);

    ck_assert_int_eq(hs(&sa, "SCRAM-SHA-256", 1), KR_SASL_STEP_MECH_CHANGED);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_SUCCEEDED);  /* untouched */
    ck_assert_str_eq(sa.mech_name, "PLAIN");

    ck_assert_int_eq(hs(&sa, "PLAIN", 1), KR_SASL_STEP_OK);
    ck_assert(sa.reauth);
    ck_assert_int_eq(sa.pstate, KR_SASL_PS_VERIFIED);
    ck_assert_int_eq(tok(&sa, 2, "\0alice\0pw2", 10), KR_SASL_STEP_OK);
    ck_assert_str_eq(sa.principal, "User:alice");
    ck_assert_int_eq(ans(&sa, KR_SASL_F_AUTHENTICATE, 0, "", 2000),
                     KR_SASL_ANS_SUCCESS);
    ck_assert_int_eq(sa.session_lifetime_ms, 2000);

    ck_assert_int_eq(hs(&sa, "PLAIN", 1), KR_SASL_STEP_OK);
    ck_assert_int_eq(tok(&sa, 2, "\0mallory\0pw", 11),
                     KR_SASL_STEP_PRINCIPAL_CHANGED);
    ck_assert_str_eq(sa.principal, "User:alice");
    kr_sasl_free(&sa);
}
END_TEST

/* A handshake krelay answered itself starts nothing; another step krelay
   answered fails the exchange. */
START_TEST(local_answers)
{
    struct kr_sasl sa;

    memset(&sa, 0, sizeof(sa));
    hs(&sa, "GSSAPI", 0);
    kr_sasl_handshake_unsent(&sa);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_NONE);
    ck_assert_str_eq(sa.mech_name, "");

    hs(&sa, "PLAIN", 1);
    tok(&sa, 1, "\0a\0b", 4);
    kr_sasl_on_local_answer(&sa);
    ck_assert_int_eq(sa.auth, KR_SASL_AUTH_FAILED);
    ck_assert_int_eq(sa.error_code, -1);
    kr_sasl_free(&sa);
}
END_TEST

static Suite *
sasl_suite(void)
{
    Suite *s = suite_create("sasl");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, plain_v1);
    tcase_add_test(tc, plain_failure);
    tcase_add_test(tc, scram);
    tcase_add_test(tc, unknown_principals);
    tcase_add_test(tc, oauthbearer);
    tcase_add_test(tc, reauth);
    tcase_add_test(tc, local_answers);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(sasl_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
