/*
 * check_scram.c - SCRAM-SHA-256/512 (kr_scram): RFC 7677's exchange
 * driven through both sides with its nonces, byte for byte; the same
 * exchange in SHA-512 against committed vectors; credentials made,
 * parsed, formatted, refused; PLAIN passwords against a credential;
 * wrong proofs, nonces, channel bindings, unknown users (answered like
 * a wrong password), iteration bounds, server errors and signatures on
 * the client side; every prefix of the server's messages.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_sasl_token.h"
#include "kr_scram.h"
#include "kr_test.h"

/* RFC 7677 section 3 */
#define CNONCE "rOprNGfwEbeRWgbNEkqO"
#define SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define SALT_B64 "W22ZaJ0SNY7soEsUEjb6gQ=="
#define C_FIRST "n,,n=user,r=" CNONCE
#define S_FIRST "r=" CNONCE SNONCE ",s=" SALT_B64 ",i=4096"
#define C_FINAL_256 "c=biws,r=" CNONCE SNONCE \
    ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define S_FINAL_256 "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

/*
 * SHA-512 has no RFC vector: the same user, password, nonces, salt and
 * iterations, computed once with Python's hashlib/hmac and committed:
 *
 * python3 -c '
 * import hashlib,hmac,base64
 * h=hashlib.sha512
 * salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
 * sp=hashlib.pbkdf2_hmac("sha512",b"pencil",salt,4096)
 * ck=hmac.new(sp,b"Client Key",h).digest(); sk=h(ck).digest()
 * svk=hmac.new(sp,b"Server Key",h).digest()
 * cn="rOprNGfwEbeRWgbNEkqO"; n=cn+"%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
 * am="n=user,r="+cn+",r="+n+",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r="+n
 * cs=hmac.new(sk,am.encode(),h).digest()
 * print("p="+base64.b64encode(bytes(a^b for a,b in zip(ck,cs))).decode())
 * print("v="+base64.b64encode(hmac.new(svk,am.encode(),h).digest()).decode())
 * print("stored_key="+base64.b64encode(sk).decode())
 * print("server_key="+base64.b64encode(svk).decode())'
 *
 * (with sha256 in place of sha512 it prints RFC 7677's p= and v=, and
 * the SHA-256 stored_key and server_key below)
 */
#define C_FINAL_512 "c=biws,r=" CNONCE SNONCE \
    ",p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wd" \
    "p6dybEmDYXYTxwnYPJQ=="
#define S_FINAL_512 "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekL" \
    "tifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw=="
#define CRED_512 "salt=" SALT_B64 ",stored_key=6AAub3065EYRmyFpM2RNwqK+eGnrk" \
    "YuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg==,server_key=" \
    "jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nL" \
    "DfKF24mvD5nmE6rA==,iterations=4096"
#define CRED_256 "salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFz" \
    "pcXkuLmtbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=," \
    "iterations=4096"

#define PW "pencil"

/* a nonce function that gives its argument (a C string) */
static bool
fixed_nonce(void *arg, char *out, size_t cap)
{
    snprintf(out, cap, "%s", (const char *)arg);
    return true;
}

static bool
failing_nonce(void *arg, char *out, size_t cap)
{
    (void)arg;
    (void)out;
    (void)cap;
    return false;
}

static const uint8_t *
u8(const char *s)
{
    return (const uint8_t *)s;
}

/* RFC 7677's credential, derived (iterations 4096 is below what parse
   accepts for stored credentials? no: 4096 is the minimum) */
static void
rfc_cred(struct kr_scram_cred *c, enum kr_scram_hash h)
{
    uint8_t salt[32];
    size_t n;

    ck_assert(kr_sasl_b64_decode(u8(SALT_B64), strlen(SALT_B64), false, salt,
                                 &n));
    ck_assert(kr_scram_cred_derive(c, h, u8(PW), strlen(PW), salt, n, 4096));
}

/* The server side of RFC 7677's exchange (or its SHA-512 twin). */
static void
server_kat(enum kr_scram_hash h, const char *c_final, const char *s_final)
{
    struct kr_scram_server s;
    struct kr_sasl_scram_first cf;
    struct kr_scram_cred cred;
    char *out;
    size_t len;

    rfc_cred(&cred, h);
    kr_scram_server_init(&s, h, fixed_nonce, (void *)SNONCE);
    ck_assert(kr_sasl_scram_first_parse(u8(C_FIRST), strlen(C_FIRST), &cf,
                                        NULL));
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_OK);
    ck_assert_str_eq(out, S_FIRST);
    ck_assert_uint_eq(len, strlen(S_FIRST));
    free(out);
    ck_assert_int_eq(kr_scram_server_final(&s, u8(c_final), strlen(c_final),
                                           &out, &len), KR_SCRAM_OK);
    ck_assert_str_eq(out, s_final);
    ck_assert_uint_eq(len, strlen(s_final));
    ck_assert_int_eq(s.state, KR_SCRAM_SERVER_DONE);
    free(out);
    /* no step after the end */
    ck_assert_int_eq(kr_scram_server_final(&s, u8(c_final), strlen(c_final),
                                           &out, &len), KR_SCRAM_STATE);
    ck_assert_ptr_null(out);
    kr_scram_server_free(&s);
    kr_scram_cred_wipe(&cred);
}

/* The client side of the same. */
static void
client_kat(enum kr_scram_hash h, const char *c_final, const char *s_final)
{
    struct kr_scram_client c;
    char *out;
    size_t len;

    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(kr_scram_client_first(&c, h, "user", fixed_nonce,
                                           (void *)CNONCE, &out, &len),
                     KR_SCRAM_OK);
    ck_assert_str_eq(out, C_FIRST);
    ck_assert_uint_eq(len, strlen(C_FIRST));
    free(out);
    ck_assert_int_eq(kr_scram_client_server_first(&c, u8(S_FIRST),
                                                  strlen(S_FIRST)),
                     KR_SCRAM_OK);
    ck_assert_uint_eq(c.iterations, 4096);
    ck_assert_uint_eq(c.salt_len, 16);
    ck_assert_int_eq(kr_scram_client_final_password(&c, u8(PW), strlen(PW),
                                                    &out, &len),
                     KR_SCRAM_OK);
    ck_assert_str_eq(out, c_final);
    ck_assert_uint_eq(len, strlen(c_final));
    free(out);
    ck_assert_int_eq(kr_scram_client_verify(&c, u8(s_final), strlen(s_final)),
                     KR_SCRAM_OK);
    ck_assert_int_eq(c.state, KR_SCRAM_CLIENT_DONE);
    kr_scram_client_free(&c);
}

START_TEST(rfc7677_sha256)
{
    server_kat(KR_SCRAM_SHA256, C_FINAL_256, S_FINAL_256);
    client_kat(KR_SCRAM_SHA256, C_FINAL_256, S_FINAL_256);
}
END_TEST

START_TEST(vectors_sha512)
{
    server_kat(KR_SCRAM_SHA512, C_FINAL_512, S_FINAL_512);
    client_kat(KR_SCRAM_SHA512, C_FINAL_512, S_FINAL_512);
}
END_TEST

START_TEST(salted_password_cached)
{
    /* the caller's cached salted password gives the same client-final */
    struct kr_scram_client c;
    uint8_t salted[KR_SCRAM_KEY_MAX];
    char *out;
    size_t len;

    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(kr_scram_client_first(&c, KR_SCRAM_SHA256, "user",
                                           fixed_nonce, (void *)CNONCE, &out,
                                           &len), KR_SCRAM_OK);
    free(out);
    ck_assert_int_eq(kr_scram_client_server_first(&c, u8(S_FIRST),
                                                  strlen(S_FIRST)),
                     KR_SCRAM_OK);
    ck_assert(kr_scram_salted_password(KR_SCRAM_SHA256, u8(PW), strlen(PW),
                                       c.salt, c.salt_len, c.iterations,
                                       salted));
    ck_assert_int_eq(kr_scram_client_final(&c, salted, &out, &len),
                     KR_SCRAM_OK);
    ck_assert_str_eq(out, C_FINAL_256);
    free(out);
    kr_scram_client_free(&c);
}
END_TEST

START_TEST(cred_text)
{
    static const char reordered[] =
        "iterations=4096,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl"
        "2dU=,salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXk"
        "uLmtbsT4qY=";
    struct kr_scram_cred c, p;
    const char *why = NULL;
    char *s;

    rfc_cred(&c, KR_SCRAM_SHA512);
    s = kr_scram_cred_format(&c);
    ck_assert_str_eq(s, CRED_512);
    ck_assert(kr_scram_cred_parse(&p, KR_SCRAM_SHA512, s, strlen(s), &why));
    ck_assert(memcmp(&p, &c, sizeof(c)) == 0);
    free(s);
    rfc_cred(&c, KR_SCRAM_SHA256);
    s = kr_scram_cred_format(&c);
    ck_assert_str_eq(s, CRED_256);
    free(s);
    /* any order */
    ck_assert(kr_scram_cred_parse(&p, KR_SCRAM_SHA256, reordered,
                                  strlen(reordered), &why));
    ck_assert(memcmp(&p, &c, sizeof(c)) == 0);
    ck_assert_int_eq(kr_scram_check_password(&p, u8(PW), strlen(PW)),
                     KR_SCRAM_OK);
    ck_assert_int_eq(kr_scram_check_password(&p, u8("pencil "), 7),
                     KR_SCRAM_BAD_PROOF);
    ck_assert_int_eq(kr_scram_check_password(&p, u8(""), 0),
                     KR_SCRAM_BAD_PROOF);
    kr_scram_cred_wipe(&c);
    kr_scram_cred_wipe(&p);
}
END_TEST

START_TEST(cred_refused)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        { CRED_512, "32 bytes" },   /* SHA-512 keys for SHA-256 */
        { "", "key=value" },
        { "salt=" SALT_B64, "all needed" },
        { CRED_256 ",", "key=value" },
        { CRED_256 ",salt=" SALT_B64, "twice" },
        { CRED_256 ",pepper=1", "unknown key" },
        { "salt=W22ZaJ0SNY7soEsUEjb6gQ=,stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZ"
          "kBFzpcXkuLmtbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSr"
          "mfPwDl2dU=,iterations=4096", "salt" },
        { "salt=,stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=,se"
          "rver_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,iterations="
          "4096", "salt" },
        { "salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLm"
          "tbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
          "iterations=4095", "4096..16384" },
        { "salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLm"
          "tbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
          "iterations=16385", "4096..16384" },
        { "salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLm"
          "tbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
          "iterations=04096", "4096..16384" },
        { "salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLm"
          "tbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
          "iterations=+4096", "4096..16384" },
        { "salt=" SALT_B64 ",stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLm"
          "tbsT4qY,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
          "iterations=4096", "32 bytes" },
    };
    struct kr_scram_cred c;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = NULL;

        ck_assert_msg(!kr_scram_cred_parse(&c, KR_SCRAM_SHA256, bad[i].text,
                                           strlen(bad[i].text), &why),
                      "row %zu", i);
        ck_assert_msg(why != NULL && strstr(why, bad[i].why) != NULL,
                      "row %zu: why '%s', want '%s'", i, why, bad[i].why);
        ck_assert_uint_eq(c.iterations, 0);
    }
}
END_TEST

START_TEST(cred_make)
{
    struct kr_scram_cred a, b;
    const char *why = NULL;

    ck_assert(!kr_scram_cred_make(&a, KR_SCRAM_SHA256, u8("x"), 1, 4095,
                                  &why));
    ck_assert_ptr_nonnull(strstr(why, "4096..16384"));
    ck_assert(!kr_scram_cred_make(&a, KR_SCRAM_SHA256, u8("x"), 1, 16385,
                                  &why));
    ck_assert(kr_scram_cred_make(&a, KR_SCRAM_SHA512, u8("s3cret"), 6, 4096,
                                 &why));
    ck_assert(kr_scram_cred_make(&b, KR_SCRAM_SHA512, u8("s3cret"), 6, 4096,
                                 &why));
    ck_assert_uint_eq(a.salt_len, KR_SCRAM_SALT_LEN);
    ck_assert_uint_eq(a.iterations, 4096);
    /* a fresh salt each time, so different keys for one password */
    ck_assert(memcmp(a.salt, b.salt, KR_SCRAM_SALT_LEN) != 0);
    ck_assert(memcmp(a.stored_key, b.stored_key, 64) != 0);
    ck_assert_int_eq(kr_scram_check_password(&a, u8("s3cret"), 6),
                     KR_SCRAM_OK);
    ck_assert_int_eq(kr_scram_check_password(&b, u8("s3cret"), 6),
                     KR_SCRAM_OK);
    ck_assert_int_eq(kr_scram_check_password(&a, u8("s3cre"), 5),
                     KR_SCRAM_BAD_PROOF);
    kr_scram_cred_wipe(&a);
    kr_scram_cred_wipe(&b);
}
END_TEST

/* a server that has sent RFC 7677's server-first */
static void
server_at_final(struct kr_scram_server *s, const char *c_first)
{
    struct kr_sasl_scram_first cf;
    struct kr_scram_cred cred;
    char *out;
    size_t len;

    rfc_cred(&cred, KR_SCRAM_SHA256);
    kr_scram_server_init(s, KR_SCRAM_SHA256, fixed_nonce, (void *)SNONCE);
    ck_assert(kr_sasl_scram_first_parse(u8(c_first), strlen(c_first), &cf,
                                        NULL));
    ck_assert_int_eq(kr_scram_server_first(s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_OK);
    free(out);
    kr_scram_cred_wipe(&cred);
}

/* the server's answer to c_final: outcome want and server-final e_want */
static void
server_refuses(const char *c_final, enum kr_scram_outcome want,
               const char *e_want)
{
    struct kr_scram_server s;
    char *out = NULL;
    size_t len = 0;

    server_at_final(&s, C_FIRST);
    ck_assert_int_eq(kr_scram_server_final(&s, u8(c_final), strlen(c_final),
                                           &out, &len), want);
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(out, e_want);
    ck_assert_uint_eq(len, strlen(e_want));
    ck_assert_int_eq(s.state, KR_SCRAM_SERVER_FAILED);
    free(out);
    kr_scram_server_free(&s);
}

START_TEST(server_refusals)
{
    /* one bit of the proof changed */
    server_refuses("c=biws,r=" CNONCE SNONCE
                   ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU=",
                   KR_SCRAM_BAD_PROOF, "e=invalid-proof");
    /* a proof of the wrong length */
    server_refuses("c=biws,r=" CNONCE SNONCE ",p=dHzbZapWIk4jUhN+",
                   KR_SCRAM_BAD_PROOF, "e=invalid-proof");
    /* another password's proof: the SHA-512 one cut is no use either */
    server_refuses(C_FINAL_512, KR_SCRAM_BAD_PROOF, "e=invalid-proof");
    server_refuses("c=biws,r=" CNONCE "X" SNONCE
                   ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                   KR_SCRAM_BAD_NONCE, "e=other-error");
    server_refuses("c=biws,r=" CNONCE
                   ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                   KR_SCRAM_BAD_NONCE, "e=other-error");
    /* librdkafka < 2.6.1's r= (its nonce again in front: sasl_
       termination.sh) passes the nonce check and is judged by its proof,
       which covers the message as sent: RFC 7677's proof is not this
       message's (server_doubled_nonce has the right one) */
    server_refuses("c=biws,r=" CNONCE CNONCE SNONCE
                   ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                   KR_SCRAM_BAD_PROOF, "e=invalid-proof");
    /* c= of "y,," */
    server_refuses("c=eSws,r=" CNONCE SNONCE
                   ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                   KR_SCRAM_BAD_CHANNEL_BINDING,
                   "e=channel-bindings-dont-match");
    server_refuses("c=biws,r=" CNONCE SNONCE, KR_SCRAM_MALFORMED,
                   "e=invalid-encoding");
}
END_TEST

/*
 * librdkafka before 2.6.1 (librdkafka#4895; Debian 12's 2.0.2, kcat) sends
 * r= as its client nonce followed by the whole nonce: accepted in that
 * exact form only.  Proof and signature from
 *   python3 -c 'import hashlib,hmac,base64;C="rOprNGfwEbeRWgbNEkqO";
 *   S="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";s=base64.b64decode(
 *   "W22ZaJ0SNY7soEsUEjb6gQ==");sp=hashlib.pbkdf2_hmac("sha256",
 *   b"pencil",s,4096);ck=hmac.new(sp,b"Client Key","sha256").digest();
 *   sk=hashlib.sha256(ck).digest();sv=hmac.new(sp,b"Server Key",
 *   "sha256").digest();am=("n=user,r="+C+",r="+C+S+",s=W22ZaJ0SNY7soEsU"
 *   "Ejb6gQ==,i=4096,c=biws,r="+C+C+S).encode();g=hmac.new(sk,am,
 *   "sha256").digest();print(base64.b64encode(bytes(a^b for a,b in
 *   zip(ck,g))).decode(),base64.b64encode(hmac.new(sv,am,"sha256")
 *   .digest()).decode())'
 */
START_TEST(server_doubled_nonce)
{
    static const char fin[] = "c=biws,r=" CNONCE CNONCE SNONCE
                              ",p=1Y75+q7XaCGJj/r6vyQWwoNxSzV5ksS8xhp5Lqyriec=";
    struct kr_scram_server s;
    char *out = NULL;
    size_t len = 0;

    server_at_final(&s, C_FIRST);
    ck_assert_int_eq(kr_scram_server_final(&s, u8(fin), strlen(fin), &out,
                                           &len), KR_SCRAM_OK);
    ck_assert_str_eq(out, "v=3svB0h5EwFJ/+WVn2GpJ5uBzW8HEv9nm1rcYAhYlm0A=");
    ck_assert_int_eq(s.state, KR_SCRAM_SERVER_DONE);
    free(out);
    kr_scram_server_free(&s);
    /* any other prefix before the nonce is still refused */
    server_refuses("c=biws,r=X" CNONCE SNONCE
                   ",p=1Y75+q7XaCGJj/r6vyQWwoNxSzV5ksS8xhp5Lqyriec=",
                   KR_SCRAM_BAD_NONCE, "e=other-error");
    server_refuses("c=biws,r=" CNONCE SNONCE CNONCE SNONCE
                   ",p=1Y75+q7XaCGJj/r6vyQWwoNxSzV5ksS8xhp5Lqyriec=",
                   KR_SCRAM_BAD_NONCE, "e=other-error");
    server_refuses("c=biws,r=" CNONCE "X" CNONCE SNONCE
                   ",p=1Y75+q7XaCGJj/r6vyQWwoNxSzV5ksS8xhp5Lqyriec=",
                   KR_SCRAM_BAD_NONCE, "e=other-error");
}
END_TEST

START_TEST(server_authzid_cbind)
{
    /* an authzid equal to the user goes into c= as sent */
    struct kr_scram_server s;
    struct kr_sasl_scram_first cf;
    struct kr_scram_cred cred;
    char *out;
    size_t len;

    server_at_final(&s, "n,a=user,n=user,r=" CNONCE);
    /* c=biws is "n,," : not this exchange's gs2 header */
    ck_assert_int_eq(kr_scram_server_final(&s, u8(C_FINAL_256),
                                           strlen(C_FINAL_256), &out, &len),
                     KR_SCRAM_BAD_CHANNEL_BINDING);
    free(out);
    kr_scram_server_free(&s);
    /* an authzid that is not the user, tokenauth: refused at once */
    rfc_cred(&cred, KR_SCRAM_SHA256);
    kr_scram_server_init(&s, KR_SCRAM_SHA256, NULL, NULL);
    ck_assert(kr_sasl_scram_first_parse(u8("n,a=admin,n=user,r=x"), 20, &cf,
                                        NULL));
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_AUTHZID_MISMATCH);
    ck_assert_ptr_null(out);
    kr_scram_server_free(&s);
    kr_scram_server_init(&s, KR_SCRAM_SHA256, NULL, NULL);
    ck_assert(kr_sasl_scram_first_parse(u8("n,,n=user,r=x,tokenauth=true"),
                                        28, &cf, NULL));
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_TOKENAUTH);
    kr_scram_server_free(&s);
    /* a credential of the other hash; a nonce function that fails */
    kr_scram_server_init(&s, KR_SCRAM_SHA512, NULL, NULL);
    ck_assert(kr_sasl_scram_first_parse(u8(C_FIRST), strlen(C_FIRST), &cf,
                                        NULL));
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_STATE);
    kr_scram_server_free(&s);
    kr_scram_server_init(&s, KR_SCRAM_SHA256, failing_nonce, NULL);
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_NONCE_FAILED);
    kr_scram_server_free(&s);
    kr_scram_server_init(&s, KR_SCRAM_SHA256, fixed_nonce, (void *)"a,b");
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &out,
                                           &len), KR_SCRAM_NONCE_FAILED);
    kr_scram_server_free(&s);
    kr_scram_cred_wipe(&cred);
}
END_TEST

/* server-first for an unknown user with the mock key */
static char *
mock_first(struct kr_scram_server *s, const char *c_first)
{
    static const uint8_t key[32] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    struct kr_sasl_scram_first cf;
    char *out;
    size_t len;

    kr_scram_server_init(s, KR_SCRAM_SHA256, fixed_nonce, (void *)SNONCE);
    ck_assert(kr_sasl_scram_first_parse(u8(c_first), strlen(c_first), &cf,
                                        NULL));
    ck_assert_int_eq(kr_scram_server_first(s, &cf, NULL, key, sizeof(key),
                                           &out, &len), KR_SCRAM_OK);
    return out;
}

START_TEST(unknown_user)
{
    struct kr_scram_server s, t;
    struct kr_sasl_scram_first cf;
    char *a, *b, *out;
    size_t len;

    /* the mock: a server-first like a real one, the same salt each time
       for one user, another for another user */
    a = mock_first(&s, C_FIRST);
    b = mock_first(&t, C_FIRST);
    ck_assert_str_eq(a, b);
    ck_assert_int_eq(strncmp(a, "r=" CNONCE SNONCE ",s=", 55), 0);
    ck_assert_ptr_nonnull(strstr(a, ",i=8192"));
    ck_assert_ptr_null(strstr(a, SALT_B64));
    free(b);
    kr_scram_server_free(&t);
    b = mock_first(&t, "n,,n=other,r=" CNONCE);
    ck_assert_str_ne(a, b);
    free(a);
    free(b);
    kr_scram_server_free(&t);
    /* the final answer is a wrong password's, byte for byte */
    ck_assert_int_eq(kr_scram_server_final(&s, u8(C_FINAL_256),
                                           strlen(C_FINAL_256), &out, &len),
                     KR_SCRAM_UNKNOWN_USER);
    ck_assert_str_eq(out, "e=invalid-proof");
    free(out);
    kr_scram_server_free(&s);
    /* without a mock key: refused at once, as Kafka */
    kr_scram_server_init(&s, KR_SCRAM_SHA256, NULL, NULL);
    ck_assert(kr_sasl_scram_first_parse(u8(C_FIRST), strlen(C_FIRST), &cf,
                                        NULL));
    ck_assert_int_eq(kr_scram_server_first(&s, &cf, NULL, NULL, 0, &out,
                                           &len), KR_SCRAM_UNKNOWN_USER);
    ck_assert_ptr_null(out);
    kr_scram_server_free(&s);
}
END_TEST

/* a client that has sent RFC 7677's client-first */
static void
client_at_first(struct kr_scram_client *c)
{
    char *out;
    size_t len;

    memset(c, 0, sizeof(*c));
    ck_assert_int_eq(kr_scram_client_first(c, KR_SCRAM_SHA256, "user",
                                           fixed_nonce, (void *)CNONCE, &out,
                                           &len), KR_SCRAM_OK);
    free(out);
}

static enum kr_scram_outcome
client_reads(const char *s_first)
{
    struct kr_scram_client c;
    enum kr_scram_outcome o;

    client_at_first(&c);
    o = kr_scram_client_server_first(&c, u8(s_first), strlen(s_first));
    kr_scram_client_free(&c);
    return o;
}

START_TEST(client_server_first)
{
    ck_assert_int_eq(client_reads(S_FIRST), KR_SCRAM_OK);
    ck_assert_int_eq(client_reads(S_FIRST ",ext=val"), KR_SCRAM_OK);
    ck_assert_int_eq(client_reads("r=" CNONCE ",s=" SALT_B64 ",i=4096"),
                     KR_SCRAM_BAD_NONCE);
    ck_assert_int_eq(client_reads("r=rOprNGfwEbeRWgbNEkqX" SNONCE ",s="
                                  SALT_B64 ",i=4096"), KR_SCRAM_BAD_NONCE);
    ck_assert_int_eq(client_reads("r=rOpr,s=" SALT_B64 ",i=4096"),
                     KR_SCRAM_BAD_NONCE);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=" SALT_B64
                                  ",i=4095"), KR_SCRAM_BAD_ITERATIONS);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=" SALT_B64
                                  ",i=100000"), KR_SCRAM_OK);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=" SALT_B64
                                  ",i=100001"), KR_SCRAM_BAD_ITERATIONS);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=" SALT_B64
                                  ",i=99999999999"), KR_SCRAM_BAD_ITERATIONS);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=" SALT_B64 ",i="),
                     KR_SCRAM_MALFORMED);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=" SALT_B64
                                  ",i=-4096"), KR_SCRAM_MALFORMED);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=W22Z,i=4096,"),
                     KR_SCRAM_MALFORMED);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=,i=4096"),
                     KR_SCRAM_MALFORMED);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",s=W22Z=,i=4096"),
                     KR_SCRAM_MALFORMED);
    ck_assert_int_eq(client_reads("m=x,r=" CNONCE SNONCE ",s=" SALT_B64
                                  ",i=4096"), KR_SCRAM_MALFORMED);
    ck_assert_int_eq(client_reads("r=" CNONCE SNONCE ",i=4096,s=" SALT_B64),
                     KR_SCRAM_MALFORMED);
}
END_TEST

START_TEST(client_server_final)
{
    static const struct {
        const char *msg;
        enum kr_scram_outcome want;
    } rows[] = {
        { "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=,x=y", KR_SCRAM_OK },
        { "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G0=",
          KR_SCRAM_BAD_SIGNATURE },
        { "v=6rriTRBi23WpRR/w", KR_SCRAM_BAD_SIGNATURE },
        { "v=6rriTRBi23WpRR/w=", KR_SCRAM_MALFORMED },
        { "e=invalid-proof", KR_SCRAM_SERVER_ERROR },
        { "e=", KR_SCRAM_MALFORMED },
        { "e=a=b", KR_SCRAM_MALFORMED },
        { "x=1", KR_SCRAM_MALFORMED },
        { "", KR_SCRAM_MALFORMED },
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct kr_scram_client c;
        char *out;
        size_t len;

        client_at_first(&c);
        ck_assert_int_eq(kr_scram_client_server_first(&c, u8(S_FIRST),
                                                      strlen(S_FIRST)),
                         KR_SCRAM_OK);
        ck_assert_int_eq(kr_scram_client_final_password(&c, u8(PW),
                                                        strlen(PW), &out,
                                                        &len), KR_SCRAM_OK);
        free(out);
        ck_assert_msg(kr_scram_client_verify(&c, u8(rows[i].msg),
                                             strlen(rows[i].msg)) ==
                      rows[i].want, "%s", rows[i].msg);
        kr_scram_client_free(&c);
    }
}
END_TEST

START_TEST(client_user_escaped)
{
    struct kr_scram_client c;
    struct kr_sasl_scram_first cf;
    char *out, *u;
    size_t len;

    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(kr_scram_client_first(&c, KR_SCRAM_SHA512, "a,b=c",
                                           fixed_nonce, (void *)"N0nce",
                                           &out, &len), KR_SCRAM_OK);
    ck_assert_str_eq(out, "n,,n=a=2Cb=3Dc,r=N0nce");
    /* what the server side parses back */
    ck_assert(kr_sasl_scram_first_parse(u8(out), len, &cf, NULL));
    u = kr_sasl_scram_unescape(cf.user, cf.user_len, NULL);
    ck_assert_str_eq(u, "a,b=c");
    free(u);
    free(out);
    kr_scram_client_free(&c);
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(kr_scram_client_first(&c, KR_SCRAM_SHA512, "",
                                           NULL, NULL, &out, &len),
                     KR_SCRAM_BAD_USER);
    kr_scram_client_free(&c);
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(kr_scram_client_first(&c, KR_SCRAM_SHA512, "J\xc3\xbc",
                                           NULL, NULL, &out, &len),
                     KR_SCRAM_BAD_USER);
    kr_scram_client_free(&c);
    /* steps out of order */
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(kr_scram_client_final_password(&c, u8(PW), 6, &out,
                                                    &len), KR_SCRAM_STATE);
    kr_scram_client_free(&c);
}
END_TEST

/* krelay on both sides, random nonces and a made credential */
START_TEST(both_sides_random)
{
    enum kr_scram_hash hs[2] = { KR_SCRAM_SHA256, KR_SCRAM_SHA512 };
    size_t i;

    for (i = 0; i < 2; i++) {
        struct kr_scram_cred cred;
        struct kr_scram_client c;
        struct kr_scram_server s;
        struct kr_sasl_scram_first cf;
        char *m1, *m2, *m3, *m4;
        size_t l1, l2, l3, l4;

        ck_assert(kr_scram_cred_make(&cred, hs[i], u8("hunter2"), 7, 4096,
                                     NULL));
        memset(&c, 0, sizeof(c));
        kr_scram_server_init(&s, hs[i], NULL, NULL);
        ck_assert_int_eq(kr_scram_client_first(&c, hs[i], "svc=1,x", NULL,
                                               NULL, &m1, &l1), KR_SCRAM_OK);
        ck_assert(kr_sasl_scram_first_parse(u8(m1), l1, &cf, NULL));
        ck_assert_int_eq(kr_scram_server_first(&s, &cf, &cred, NULL, 0, &m2,
                                               &l2), KR_SCRAM_OK);
        ck_assert_str_eq(s.user, "svc=1,x");
        ck_assert_int_eq(kr_scram_client_server_first(&c, u8(m2), l2),
                         KR_SCRAM_OK);
        ck_assert_int_eq(kr_scram_client_final_password(&c, u8("hunter2"), 7,
                                                        &m3, &l3),
                         KR_SCRAM_OK);
        ck_assert_int_eq(kr_scram_server_final(&s, u8(m3), l3, &m4, &l4),
                         KR_SCRAM_OK);
        ck_assert_int_eq(kr_scram_client_verify(&c, u8(m4), l4),
                         KR_SCRAM_OK);
        free(m1);
        free(m2);
        free(m3);
        free(m4);
        kr_scram_client_free(&c);
        kr_scram_server_free(&s);
        kr_scram_cred_wipe(&cred);
    }
}
END_TEST

/* Every prefix of the server's messages and of client-final, from
   buffers of exactly that size: no crash, never OK but for the whole. */
START_TEST(every_prefix)
{
    static const char *const finals[] = { S_FINAL_256, "e=other-error" };
    size_t n, f;

    for (n = 0; n < strlen(S_FIRST); n++) {
        struct kr_scram_client c;
        uint8_t *p = malloc(n > 0 ? n : 1);

        memcpy(p, S_FIRST, n);
        client_at_first(&c);
        KR_TEST_CHECK(kr_scram_client_server_first(&c, p, n) != KR_SCRAM_OK
                      || n >= strlen(S_FIRST) - 3, "prefix %zu", n);
        kr_scram_client_free(&c);
        free(p);
    }
    for (f = 0; f < 2; f++) {
        for (n = 0; n < strlen(finals[f]); n++) {
            struct kr_scram_client c;
            uint8_t *p = malloc(n > 0 ? n : 1);
            char *out;
            size_t len;

            memcpy(p, finals[f], n);
            client_at_first(&c);
            kr_scram_client_server_first(&c, u8(S_FIRST), strlen(S_FIRST));
            kr_scram_client_final_password(&c, u8(PW), 6, &out, &len);
            free(out);
            KR_TEST_CHECK(kr_scram_client_verify(&c, p, n) != KR_SCRAM_OK,
                          "prefix %zu", n);
            kr_scram_client_free(&c);
            free(p);
        }
    }
    for (n = 0; n < strlen(C_FINAL_256); n++) {
        struct kr_scram_server s;
        uint8_t *p = malloc(n > 0 ? n : 1);
        char *out = NULL;
        size_t len;

        memcpy(p, C_FINAL_256, n);
        server_at_final(&s, C_FIRST);
        KR_TEST_CHECK(kr_scram_server_final(&s, p, n, &out, &len) !=
                      KR_SCRAM_OK && out != NULL && out[0] == 'e',
                      "prefix %zu", n);
        free(out);
        kr_scram_server_free(&s);
        free(p);
    }
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("scram");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, rfc7677_sha256);
    tcase_add_test(tc, vectors_sha512);
    tcase_add_test(tc, salted_password_cached);
    tcase_add_test(tc, cred_text);
    tcase_add_test(tc, cred_refused);
    tcase_add_test(tc, cred_make);
    tcase_add_test(tc, server_refusals);
    tcase_add_test(tc, server_doubled_nonce);
    tcase_add_test(tc, server_authzid_cbind);
    tcase_add_test(tc, unknown_user);
    tcase_add_test(tc, client_server_first);
    tcase_add_test(tc, client_server_final);
    tcase_add_test(tc, client_user_escaped);
    tcase_add_test(tc, both_sides_random);
    tcase_add_test(tc, every_prefix);
    tcase_set_timeout(tc, 60);
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
