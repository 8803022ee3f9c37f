/*
 * check_sasl_server.c - SASL termination (kr_sasl_server): whole PLAIN,
 * SCRAM-SHA-256 and SCRAM-SHA-512 exchanges over SaslHandshake v0 (raw
 * tokens) and v1 (SaslAuthenticate v0-2) against a client driven by
 * kr_scram's client side, every request and response going through the
 * codec (encoded, then decoded from its bytes); wrong passwords and
 * unknown users (one message), tokenauth, an unsupported mechanism over
 * v0, the login rate, session lifetime (from the login's end, through
 * an injected clock) and re-authentication, gates, and every truncated
 * token.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_field_ids.h"
#include "kr_kerr.h"
#include "kr_sasl_server.h"
#include "kr_sasl_token.h"
#include "kr_sasl_users.h"
#include "kr_schema.h"
#include "kr_scram.h"
#include "kr_test.h"

#define ITER 4096
#define PW_ALICE "alice-secret"
#define PW_BOB "bob-secret"

static const uint8_t ADDR1[4] = { 192, 0, 2, 1 };
static const uint8_t ADDR2[4] = { 192, 0, 2, 2 };

/* alice has both SCRAM entries, bob only SHA-256 */
static struct kr_sasl_users *
users_make(void)
{
    static const struct {
        const char *user, *pw;
        enum kr_scram_hash h;
    } e[] = {
        { "alice", PW_ALICE, KR_SCRAM_SHA256 },
        { "alice", PW_ALICE, KR_SCRAM_SHA512 },
        { "bob", PW_BOB, KR_SCRAM_SHA256 },
    };
    char text[4096] = "# test users\n", err[256];
    struct kr_sasl_users *u;
    size_t i;

    for (i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
        struct kr_scram_cred c;
        const char *why = NULL;
        char *f;

        ck_assert(kr_scram_cred_make(&c, e[i].h, (const uint8_t *)e[i].pw,
                                     strlen(e[i].pw), ITER, &why));
        f = kr_scram_cred_format(&c);
        ck_assert_ptr_nonnull(f);
        snprintf(text + strlen(text), sizeof(text) - strlen(text),
                 "%s %s %s\n", e[i].user, kr_scram_mech_name(e[i].h), f);
        free(f);
        kr_scram_cred_wipe(&c);
    }
    u = kr_sasl_users_load_text(text, strlen(text), "users", err,
                                sizeof(err));
    ck_assert_msg(u != NULL, "%s", err);
    ck_assert_uint_eq(u->n, 3);
    return u;
}

/*
 * The cfg's clock (clock_fn), injected: the now the last step was given
 * (step_now) plus clock_lag, what its password check took (0: a step
 * is instant).  clock_reads counts its reads.
 */
static int64_t step_now, clock_lag;
static unsigned clock_reads;

static int64_t
test_clock(void *arg)
{
    ck_assert_ptr_eq(arg, &clock_lag);
    clock_reads++;
    return step_now + clock_lag;
}

static struct kr_sasl_srv_cfg *
cfg_make(int64_t lifetime, double per_sec, unsigned burst)
{
    enum kr_sasl_srv_mech all[] = { KR_SASL_SRV_PLAIN,
                                    KR_SASL_SRV_SCRAM_SHA_256,
                                    KR_SASL_SRV_SCRAM_SHA_512 };
    struct kr_sasl_srv_cfg *c = kr_sasl_srv_cfg_new(all, 3, users_make(),
                                                    lifetime, per_sec,
                                                    burst);

    ck_assert_ptr_nonnull(c);
    c->clock_fn = test_clock;
    c->clock_arg = &clock_lag;
    return c;
}

/* ---- frames through the codec -------------------------------------------- */

/* A request encoded by the codec, then decoded from its own bytes (buf,
   which the caller frees): views in *m point into buf. */
struct req {
    uint8_t *buf;
    size_t len;
    struct kr_arena arena;
    struct kr_msg m;
};

static int32_t next_corr = 100;

static void
req_make(struct req *r, int16_t key, int16_t ver, const void *bytes,
         size_t blen)
{
    const struct kr_api_desc *a = kr_api_get(key);
    struct kr_arena ea;
    struct kr_msg m;
    struct kr_wbuf w;
    struct kr_codec_err ce;
    struct kr_val *v;
    struct kr_rbuf rb;
    struct iovec iov;
    int hv = kr_request_header_version(key, ver);

    memset(&m, 0, sizeof(m));
    memset(&w, 0, sizeof(w));
    kr_arena_init(&ea, 0);
    m.dir = KR_DIR_REQUEST;
    m.api_key = key;
    m.api_version = ver;
    m.hdr_version = (int16_t)hv;
    m.correlation_id = next_corr++;
    m.header = kr_node_new(&ea, kr_request_header_struct, (int16_t)hv);
    m.body = kr_node_new(&ea, kr_api_root(a, false, ver), ver);
    ck_assert(m.header != NULL && m.body != NULL);
    kr_test_set_i(m.header, "RequestApiKey", key);
    kr_test_set_i(m.header, "RequestApiVersion", ver);
    kr_test_set_i(m.header, "CorrelationId", m.correlation_id);
    kr_test_set_s(m.header, "ClientId", "check");
    if (key == KR_API_SASL_HANDSHAKE) {
        v = kr_node_get_id(m.body, KR_FIELD_MECHANISM);
    } else if (key == KR_API_SASL_AUTHENTICATE) {
        v = kr_node_get_id(m.body, KR_FIELD_AUTH_BYTES);
    } else {
        v = NULL;
    }
    if (v != NULL) {
        v->is_null = 0;
        v->u.s.p = blen > 0 ? bytes : (const uint8_t *)"";
        v->u.s.len = (int32_t)blen;
    }
    ck_assert_int_eq(kr_encode_msg(&m, &w, &ce), KR_OK);
    r->len = w.len;
    r->buf = malloc(w.len);
    ck_assert_ptr_nonnull(r->buf);
    memcpy(r->buf, w.buf, w.len);
    kr_wbuf_free(&w);
    kr_arena_free(&ea);
    kr_arena_init(&r->arena, 0);
    kr_rbuf_init_flat(&rb, &iov, r->buf, r->len);
    ck_assert_int_eq(kr_decode_request(&r->arena, &rb, KR_DEC_STRICT, &r->m,
                                       &ce), KR_OK);
}

static void
req_free(struct req *r)
{
    kr_arena_free(&r->arena);
    free(r->buf);
}

/* A response: encoded, then decoded again from its bytes. */
struct rsp {
    uint8_t *buf;
    struct kr_arena arena;
    struct kr_msg m;
    int16_t error;
    char msg[256];                  /* ErrorMessage, "(null)" when null */
    uint8_t auth[512];              /* AuthBytes */
    size_t auth_len;
    int64_t lifetime;               /* -1 when absent */
};

static void
rsp_read(struct rsp *o, const struct req *rq, const struct kr_msg *m)
{
    struct kr_wbuf w;
    struct kr_codec_err ce;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_val *v;

    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(kr_encode_msg(m, &w, &ce), KR_OK);
    o->buf = malloc(w.len);
    ck_assert_ptr_nonnull(o->buf);
    memcpy(o->buf, w.buf, w.len);
    kr_arena_init(&o->arena, 0);
    kr_rbuf_init_flat(&rb, &iov, o->buf, w.len);
    ck_assert_int_eq(kr_decode_response(&o->arena, &rb, rq->m.api_key,
                                        rq->m.api_version, KR_DEC_STRICT,
                                        &o->m, &ce), KR_OK);
    kr_wbuf_free(&w);
    ck_assert_int_eq(o->m.correlation_id, rq->m.correlation_id);
    o->error = (int16_t)kr_test_fld(o->m.body, "ErrorCode")->u.i;
    v = kr_node_get(o->m.body, "ErrorMessage");
    snprintf(o->msg, sizeof(o->msg), "(null)");
    if (v != NULL && !v->is_null) {
        snprintf(o->msg, sizeof(o->msg), "%.*s", (int)v->u.s.len,
                 (const char *)v->u.s.p);
    }
    o->auth_len = 0;
    v = kr_node_get(o->m.body, "AuthBytes");
    if (v != NULL && v->u.s.len > 0) {
        ck_assert_uint_lt((size_t)v->u.s.len, sizeof(o->auth));
        memcpy(o->auth, v->u.s.p, (size_t)v->u.s.len);
        o->auth_len = (size_t)v->u.s.len;
    }
    v = kr_node_get(o->m.body, "SessionLifetimeMs");
    o->lifetime = v != NULL && v->present ? v->u.i : -1;
}

static void
rsp_free(struct rsp *o)
{
    kr_arena_free(&o->arena);
    free(o->buf);
}

/* The last step's reason and why (step, scram_login): for the asserts
   on what the audit line and the log are told. */
static enum kr_sasl_srv_reason last_reason;
static const char *last_why;

/* One request through the server: its result and decoded response. */
static enum kr_sasl_srv_outcome
step(struct kr_sasl_srv *s, int16_t key, int16_t ver, const void *bytes,
     size_t blen, int64_t now, struct kr_sasl_srv_result *res,
     struct rsp *out)
{
    struct req rq;
    struct kr_arena a;
    struct kr_msg rsp;

    req_make(&rq, key, ver, bytes, blen);
    ck_assert_int_eq(kr_sasl_srv_gate(s, key, now), KR_SASL_SRV_MINE);
    kr_arena_init(&a, 0);
    step_now = now;
    kr_sasl_srv_request(s, &a, &rq.m, now, &rsp, res);
    last_reason = res->reason;
    last_why = res->why;
    memset(out, 0, sizeof(*out));
    out->lifetime = -1;
    out->error = -1;
    if (res->has_rsp) {
        rsp_read(out, &rq, &rsp);
    }
    kr_arena_free(&a);
    req_free(&rq);
    return res->outcome;
}

static void
handshake_ok(struct kr_sasl_srv *s, int16_t ver, const char *mech)
{
    struct kr_sasl_srv_result res;
    struct rsp o;
    struct kr_val *v;

    ck_assert_int_eq(step(s, KR_API_SASL_HANDSHAKE, ver, mech, strlen(mech),
                          0, &res, &o), KR_SASL_SRV_CONTINUE);
    ck_assert(res.has_rsp && !res.close);
    ck_assert_int_eq(o.error, 0);
    v = kr_test_fld(o.m.body, "Mechanisms");
    ck_assert_uint_eq(v->u.arr->n, 3);
    ck_assert_int_eq(v->u.arr->items[0].u.s.len, 5);
    ck_assert(memcmp(v->u.arr->items[0].u.s.p, "PLAIN", 5) == 0);
    ck_assert(memcmp(v->u.arr->items[2].u.s.p, "SCRAM-SHA-512", 13) == 0);
    rsp_free(&o);
}

/* "\0user\0pw" into buf; its length */
static size_t
plain_token(uint8_t *buf, const char *authz, const char *user,
            const char *pw)
{
    size_t n = 0;

    memcpy(buf + n, authz, strlen(authz));
    n += strlen(authz);
    buf[n++] = 0;
    memcpy(buf + n, user, strlen(user));
    n += strlen(user);
    buf[n++] = 0;
    memcpy(buf + n, pw, strlen(pw));
    return n + strlen(pw);
}

/* A whole PLAIN login over SaslHandshake v1 + SaslAuthenticate ver. */
static enum kr_sasl_srv_outcome
plain_login(struct kr_sasl_srv *s, int16_t ver, const char *user,
            const char *pw, int64_t now, struct rsp *o)
{
    struct kr_sasl_srv_result res;
    uint8_t tok[128];
    size_t n = plain_token(tok, "", user, pw);

    handshake_ok(s, 1, "PLAIN");
    return step(s, KR_API_SASL_AUTHENTICATE, ver, tok, n, now, &res, o);
}

/* ---- PLAIN --------------------------------------------------------------- */

START_TEST(plain_v1)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct rsp o;
    struct req rq;
    struct kr_arena a;
    struct kr_msg rsp;
    uint8_t tok[64];
    size_t n;
    int16_t ver;

    for (ver = 0; ver <= 2; ver++) {
        kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
        ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_API_VERSIONS, 0),
                         KR_SASL_SRV_PASS);
        ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_METADATA, 0),
                         KR_SASL_SRV_UNAUTHENTICATED);
        handshake_ok(&s, 1, "PLAIN");
        ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_METADATA, 0),
                         KR_SASL_SRV_IN_EXCHANGE);
        /* the token's bytes in the request frame are wiped once checked */
        n = plain_token(tok, "alice", "alice", PW_ALICE);
        req_make(&rq, KR_API_SASL_AUTHENTICATE, ver, tok, n);
        ck_assert_ptr_nonnull(memmem(rq.buf, rq.len, PW_ALICE,
                                     strlen(PW_ALICE)));
        kr_arena_init(&a, 0);
        kr_sasl_srv_request(&s, &a, &rq.m, 0, &rsp, &res);
        ck_assert_int_eq(res.outcome, KR_SASL_SRV_AUTHENTICATED);
        ck_assert(!res.close && res.has_rsp);
        ck_assert_str_eq(res.user, "alice");
        ck_assert_ptr_null(memmem(rq.buf, rq.len, PW_ALICE,
                                  strlen(PW_ALICE)));
        rsp_read(&o, &rq, &rsp);
        ck_assert_int_eq(o.error, 0);
        ck_assert_str_eq(o.msg, "(null)");
        ck_assert_uint_eq(o.auth_len, 0);
        ck_assert_int_eq(o.lifetime, ver >= 1 ? 0 : -1);
        rsp_free(&o);
        kr_arena_free(&a);
        req_free(&rq);
        ck_assert_str_eq(s.user, "alice");
        ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 0),
                         KR_SASL_SRV_PASS);
        kr_sasl_srv_free(&s);
    }
    /* bob has only a SHA-256 entry: PLAIN checks against it */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 2, "bob", PW_BOB, 0, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    rsp_free(&o);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

START_TEST(plain_v0_raw)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    uint8_t tok[64];
    size_t n;

    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    handshake_ok(&s, 0, "PLAIN");
    /* whatever the frame's first bytes: a raw token is due */
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 0),
                     KR_SASL_SRV_RAW);
    n = plain_token(tok, "", "alice", PW_ALICE);
    kr_sasl_srv_raw(&s, tok, n, 0, &res);
    ck_assert_int_eq(res.outcome, KR_SASL_SRV_AUTHENTICATED);
    ck_assert_ptr_nonnull(res.raw);     /* an empty token answers */
    ck_assert_uint_eq(res.raw_len, 0);
    ck_assert_ptr_null(memmem(tok, n, PW_ALICE, strlen(PW_ALICE)));
    free(res.raw);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 0),
                     KR_SASL_SRV_PASS);
    kr_sasl_srv_free(&s);

    /* a wrong password over raw tokens: close, no answer */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    handshake_ok(&s, 0, "PLAIN");
    n = plain_token(tok, "", "alice", "nope");
    kr_sasl_srv_raw(&s, tok, n, 0, &res);
    ck_assert_int_eq(res.outcome, KR_SASL_SRV_FAILED);
    ck_assert(res.close);
    ck_assert_ptr_null(res.raw);
    ck_assert_str_eq(res.why, "wrong password");
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/* ---- SCRAM --------------------------------------------------------------- */

/*
 * A SCRAM exchange: ver -1 for raw tokens after SaslHandshake v0, else
 * SaslHandshake v1 and SaslAuthenticate ver.  The client's side is
 * kr_scram's; it must verify the server's signature.  Returns the
 * outcome of the last step; *msg gets the failure's ErrorMessage.
 */
static enum kr_sasl_srv_outcome
scram_login(struct kr_sasl_srv *s, enum kr_scram_hash h, int ver,
            const char *user, const char *pw, int64_t now, char *msg,
            size_t msgcap, int64_t *lifetime)
{
    struct kr_scram_client cl;
    struct kr_sasl_srv_result res;
    struct rsp o;
    char *out = NULL;
    size_t out_len = 0;
    const uint8_t *ans;
    size_t ans_len;
    enum kr_sasl_srv_outcome r;

    memset(&cl, 0, sizeof(cl));
    handshake_ok(s, ver < 0 ? 0 : 1, kr_scram_mech_name(h));
    ck_assert_int_eq(kr_scram_client_first(&cl, h, user, NULL, NULL, &out,
                                           &out_len), KR_SCRAM_OK);
    if (ver < 0) {
        ck_assert_int_eq(kr_sasl_srv_gate(s, 0, now), KR_SASL_SRV_RAW);
        step_now = now;
        kr_sasl_srv_raw(s, (uint8_t *)out, out_len, now, &res);
        memset(&o, 0, sizeof(o));
        ans = res.raw;
        ans_len = res.raw_len;
    } else {
        step(s, KR_API_SASL_AUTHENTICATE, (int16_t)ver, out, out_len, now,
             &res, &o);
        ans = o.auth;
        ans_len = o.auth_len;
    }
    free(out);
    ck_assert_int_eq(res.outcome, KR_SASL_SRV_CONTINUE);
    ck_assert_int_eq(kr_scram_client_server_first(&cl, ans, ans_len),
                     KR_SCRAM_OK);
    free(res.raw);
    if (ver >= 0) {
        rsp_free(&o);
    }
    ck_assert_int_eq(kr_scram_client_final_password(
                         &cl, (const uint8_t *)pw, strlen(pw), &out,
                         &out_len), KR_SCRAM_OK);
    if (ver < 0) {
        step_now = now;
        kr_sasl_srv_raw(s, (uint8_t *)out, out_len, now, &res);
        ans = res.raw;
        ans_len = res.raw_len;
        snprintf(msg, msgcap, "(raw)");
    } else {
        step(s, KR_API_SASL_AUTHENTICATE, (int16_t)ver, out, out_len, now,
             &res, &o);
        ans = o.auth;
        ans_len = o.auth_len;
        snprintf(msg, msgcap, "%s", o.msg);
        if (lifetime != NULL) {
            *lifetime = o.lifetime;
        }
    }
    free(out);
    r = res.outcome;
    last_reason = res.reason;
    last_why = res.why;
    if (r == KR_SASL_SRV_AUTHENTICATED) {
        ck_assert_int_eq(kr_scram_client_verify(&cl, ans, ans_len),
                         KR_SCRAM_OK);
        ck_assert(!res.close);
    } else {
        ck_assert(res.close);
        if (ver < 0) {
            ck_assert_ptr_null(res.raw);    /* closed with no answer */
        } else {
            ck_assert_int_eq(o.error, KR_KERR_SASL_AUTHENTICATION_FAILED);
            ck_assert_uint_eq(o.auth_len, 0);
        }
    }
    free(res.raw);
    if (ver >= 0) {
        rsp_free(&o);
    }
    kr_scram_client_free(&cl);
    return r;
}

START_TEST(scram_exchanges)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    enum kr_scram_hash h;
    char msg[256];
    int ver;

    for (h = KR_SCRAM_SHA256; h <= KR_SCRAM_SHA512; h++) {
        for (ver = -1; ver <= 2; ver++) {
            kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
            ck_assert_int_eq(scram_login(&s, h, ver, "alice", PW_ALICE, 0,
                                         msg, sizeof(msg), NULL),
                             KR_SASL_SRV_AUTHENTICATED);
            ck_assert_str_eq(s.user, "alice");
            ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_FETCH, 0),
                             KR_SASL_SRV_PASS);
            kr_sasl_srv_free(&s);
        }
    }
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/* Wrong passwords and unknown users: one message, failed. */
START_TEST(bad_credentials)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    struct rsp o;
    char wrong[256], unknown[256];
    const char *expect512 = "Authentication failed during authentication "
        "due to invalid credentials with SASL mechanism SCRAM-SHA-512";
    const char *expect_plain = "Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism PLAIN";

    /* PLAIN */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 2, "alice", "wrong", 0, &o),
                     KR_SASL_SRV_FAILED);
    ck_assert_int_eq(o.error, KR_KERR_SASL_AUTHENTICATION_FAILED);
    ck_assert_str_eq(o.msg, expect_plain);
    ck_assert_int_eq(last_reason, KR_SASL_SRV_R_BAD_PASSWORD);
    ck_assert_str_eq(kr_sasl_srv_reason_name(last_reason), "bad_password");
    rsp_free(&o);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 2, "mallory", "wrong", 0, &o),
                     KR_SASL_SRV_FAILED);
    ck_assert_int_eq(o.error, KR_KERR_SASL_AUTHENTICATION_FAILED);
    ck_assert_str_eq(o.msg, expect_plain);
    ck_assert_int_eq(last_reason, KR_SASL_SRV_R_UNKNOWN_USER);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 0),
                     KR_SASL_SRV_UNAUTHENTICATED);
    rsp_free(&o);
    kr_sasl_srv_free(&s);

    /* SCRAM: the unknown user gets a server-first like a known one and
       fails only on its proof, with the wrong password's message */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 2, "alice", "wrong",
                                 0, wrong, sizeof(wrong), NULL),
                     KR_SASL_SRV_FAILED);
    ck_assert_int_eq(last_reason, KR_SASL_SRV_R_BAD_PASSWORD);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 2, "mallory", "wrong",
                                 0, unknown, sizeof(unknown), NULL),
                     KR_SASL_SRV_FAILED);
    ck_assert_int_eq(last_reason, KR_SASL_SRV_R_UNKNOWN_USER);
    kr_sasl_srv_free(&s);
    ck_assert_str_eq(wrong, expect512);
    ck_assert_str_eq(unknown, expect512);
    /* bob has no SHA-512 entry: as unknown to the client; the log and
       the audit line say which */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 1, "bob", PW_BOB, 0,
                                 unknown, sizeof(unknown), NULL),
                     KR_SASL_SRV_FAILED);
    ck_assert_str_eq(unknown, expect512);
    ck_assert_int_eq(last_reason, KR_SASL_SRV_R_NO_MECH_ENTRY);
    ck_assert_str_eq(kr_sasl_srv_reason_name(last_reason),
                     "no_entry_for_mechanism");
    ck_assert_str_eq(last_why, "no SCRAM-SHA-512 entry for the user (it has "
                     "SCRAM-SHA-256 only)");
    kr_sasl_srv_free(&s);
    /* PLAIN with an authzid other than the user: refused, the user
       known for the log */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    {
        struct kr_sasl_srv_result res;
        uint8_t tok[128];
        size_t n = plain_token(tok, "bob", "alice", PW_ALICE);

        handshake_ok(&s, 1, "PLAIN");
        ck_assert_int_eq(step(&s, KR_API_SASL_AUTHENTICATE, 2, tok, n, 0,
                              &res, &o), KR_SASL_SRV_MALFORMED);
        ck_assert_int_eq(res.reason, KR_SASL_SRV_R_AUTHZID_MISMATCH);
        ck_assert_str_eq(res.user, "alice");
        rsp_free(&o);
    }
    kr_sasl_srv_free(&s);
    ck_assert_ptr_null(kr_sasl_srv_reason_name(KR_SASL_SRV_R_NONE));
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/* The server-first message's s= length and i= for user over hash h. */
static void
server_first_shape(const struct kr_sasl_srv_cfg *c, enum kr_scram_hash h,
                   const char *user, size_t *salt_len, unsigned *iter)
{
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct rsp o;
    char first[256], sf[512], *sp, *ip;
    uint8_t salt[KR_SCRAM_SALT_MAX];

    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    handshake_ok(&s, 1, kr_scram_mech_name(h));
    snprintf(first, sizeof(first), "n,,n=%s,r=fyko+d2lbbFgONRv9qkxdawL",
             user);
    ck_assert_int_eq(step(&s, KR_API_SASL_AUTHENTICATE, 1, first,
                          strlen(first), 0, &res, &o),
                     KR_SASL_SRV_CONTINUE);
    ck_assert_uint_lt(o.auth_len, sizeof(sf));
    memcpy(sf, o.auth, o.auth_len);
    sf[o.auth_len] = '\0';
    rsp_free(&o);
    sp = strstr(sf, ",s=");
    ip = strstr(sf, ",i=");
    ck_assert(sp != NULL && ip != NULL && ip > sp);
    ck_assert(kr_sasl_b64_decode((const uint8_t *)sp + 3,
                                 (size_t)(ip - sp - 3), false, salt,
                                 salt_len));
    *iter = (unsigned)strtoul(ip + 3, NULL, 10);
    kr_sasl_srv_free(&s);
}

/* An unknown SCRAM user's server-first has the shape a known user's has
   (the users' iterations and salt length, not krelay-passwd's defaults):
   s= and i= do not tell which names exist. */
START_TEST(scram_unknown_shape)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    size_t known_salt, unknown_salt;
    unsigned known_iter, unknown_iter;
    int h;

    for (h = KR_SCRAM_SHA256; h <= KR_SCRAM_SHA512; h++) {
        server_first_shape(c, (enum kr_scram_hash)h, "alice", &known_salt,
                           &known_iter);
        server_first_shape(c, (enum kr_scram_hash)h, "mallory",
                           &unknown_salt, &unknown_iter);
        ck_assert_uint_eq(known_iter, ITER);
        ck_assert_uint_eq(unknown_iter, known_iter);
        ck_assert_uint_eq(unknown_salt, known_salt);
    }
    kr_sasl_srv_cfg_free(c);
}
END_TEST

START_TEST(tokenauth_refused)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct rsp o;
    const char *cf = "n,,n=alice,r=abcdefgh,tokenauth=true";

    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    handshake_ok(&s, 1, "SCRAM-SHA-256");
    ck_assert_int_eq(step(&s, KR_API_SASL_AUTHENTICATE, 2, cf, strlen(cf), 0,
                          &res, &o), KR_SASL_SRV_FAILED);
    ck_assert(res.close);
    ck_assert_int_eq(o.error, KR_KERR_SASL_AUTHENTICATION_FAILED);
    ck_assert_ptr_nonnull(strstr(res.why, "tokenauth"));
    ck_assert_int_eq(res.reason, KR_SASL_SRV_R_DELEGATION_TOKEN);
    rsp_free(&o);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

START_TEST(unsupported_mechanism)
{
    enum kr_sasl_srv_mech only[] = { KR_SASL_SRV_SCRAM_SHA_512 };
    struct kr_sasl_srv_cfg *c = kr_sasl_srv_cfg_new(only, 1, users_make(), 0,
                                                    0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct rsp o;
    struct kr_val *v;
    int16_t ver;
    const char *mechs[] = { "GSSAPI", "PLAIN", "scram-sha-512" };
    size_t i;

    ck_assert_ptr_nonnull(c);
    for (ver = 0; ver <= 1; ver++) {
        for (i = 0; i < 3; i++) {
            kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
            ck_assert_int_eq(step(&s, KR_API_SASL_HANDSHAKE, ver, mechs[i],
                                  strlen(mechs[i]), 0, &res, &o),
                             KR_SASL_SRV_UNSUPPORTED_MECHANISM);
            ck_assert(res.close && res.has_rsp);
            ck_assert_int_eq(o.error, KR_KERR_UNSUPPORTED_SASL_MECHANISM);
            v = kr_test_fld(o.m.body, "Mechanisms");
            ck_assert_uint_eq(v->u.arr->n, 1);
            ck_assert_int_eq(v->u.arr->items[0].u.s.len, 13);
            ck_assert(memcmp(v->u.arr->items[0].u.s.p, "SCRAM-SHA-512",
                             13) == 0);
            /* no raw token is expected after a refused v0 handshake */
            ck_assert_int_ne(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 0),
                             KR_SASL_SRV_RAW);
            rsp_free(&o);
            kr_sasl_srv_free(&s);
        }
    }
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/* ---- state --------------------------------------------------------------- */

START_TEST(illegal_state)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct req rq;
    struct kr_arena a;
    struct kr_msg rsp;
    struct rsp o;
    uint8_t tok[64];
    size_t n = plain_token(tok, "", "alice", PW_ALICE);

    /* SaslAuthenticate before any handshake: close, no answer (Kafka) */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_SASL_AUTHENTICATE, 0),
                     KR_SASL_SRV_UNAUTHENTICATED);
    req_make(&rq, KR_API_SASL_AUTHENTICATE, 1, tok, n);
    kr_arena_init(&a, 0);
    kr_sasl_srv_request(&s, &a, &rq.m, 0, &rsp, &res);
    ck_assert_int_eq(res.outcome, KR_SASL_SRV_ILLEGAL_STATE);
    ck_assert(res.close && !res.has_rsp);
    kr_arena_free(&a);
    req_free(&rq);
    kr_sasl_srv_free(&s);

    /* a second SaslHandshake in the middle of an exchange: 34, close */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    handshake_ok(&s, 1, "PLAIN");
    req_make(&rq, KR_API_SASL_HANDSHAKE, 1, "PLAIN", 5);
    kr_arena_init(&a, 0);
    kr_sasl_srv_request(&s, &a, &rq.m, 0, &rsp, &res);
    ck_assert_int_eq(res.outcome, KR_SASL_SRV_ILLEGAL_STATE);
    ck_assert(res.close && res.has_rsp);
    rsp_read(&o, &rq, &rsp);
    ck_assert_int_eq(o.error, KR_KERR_ILLEGAL_SASL_STATE);
    rsp_free(&o);
    kr_arena_free(&a);
    req_free(&rq);
    kr_sasl_srv_free(&s);

    /* after authentication by a client that cannot re-authenticate
       (SaslAuthenticate v0): 34 for either, connection kept */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 0, "alice", PW_ALICE, 0, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    rsp_free(&o);
    ck_assert_int_eq(step(&s, KR_API_SASL_HANDSHAKE, 1, "PLAIN", 5, 0, &res,
                          &o), KR_SASL_SRV_ILLEGAL_STATE);
    ck_assert(!res.close);
    ck_assert_int_eq(o.error, KR_KERR_ILLEGAL_SASL_STATE);
    rsp_free(&o);
    ck_assert_int_eq(step(&s, KR_API_SASL_AUTHENTICATE, 0, tok, n, 0, &res,
                          &o), KR_SASL_SRV_ILLEGAL_STATE);
    ck_assert(!res.close);
    ck_assert_int_eq(o.error, KR_KERR_ILLEGAL_SASL_STATE);
    ck_assert_str_eq(o.msg, "SaslAuthenticate request received after "
                     "successful authentication");
    rsp_free(&o);
    ck_assert_str_eq(s.user, "alice");
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/* ---- the login rate ------------------------------------------------------ */

START_TEST(rate_limit)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 1.0, 2);
    struct kr_sasl_srv s;
    struct rsp o;
    int i;

    /* a burst of 2, then one a second; the right password does not help */
    for (i = 0; i < 3; i++) {
        kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
        ck_assert_int_eq(plain_login(&s, 1, "alice", PW_ALICE, 1000, &o),
                         i < 2 ? KR_SASL_SRV_AUTHENTICATED
                               : KR_SASL_SRV_RATE_LIMITED);
        if (i == 2) {
            ck_assert_int_eq(o.error, KR_KERR_SASL_AUTHENTICATION_FAILED);
            ck_assert_str_eq(o.msg, "Authentication failed: too many "
                             "logins from this address, retry later");
            ck_assert_int_eq(last_reason, KR_SASL_SRV_R_RATE_LIMITED);
            ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 1000),
                             KR_SASL_SRV_UNAUTHENTICATED);
        }
        rsp_free(&o);
        kr_sasl_srv_free(&s);
    }
    /* another address has its own bucket */
    kr_sasl_srv_init(&s, c, ADDR2, sizeof(ADDR2));
    ck_assert_int_eq(plain_login(&s, 1, "alice", PW_ALICE, 1000, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    rsp_free(&o);
    kr_sasl_srv_free(&s);
    /* a SCRAM client-first counts too */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    {
        struct kr_sasl_srv_result res;
        const char *cf = "n,,n=alice,r=abcdefgh";

        handshake_ok(&s, 1, "SCRAM-SHA-256");
        ck_assert_int_eq(step(&s, KR_API_SASL_AUTHENTICATE, 1, cf,
                              strlen(cf), 1999, &res, &o),
                         KR_SASL_SRV_RATE_LIMITED);
        rsp_free(&o);
    }
    kr_sasl_srv_free(&s);
    /* a second later one more token */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 1, "alice", PW_ALICE, 2000, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    rsp_free(&o);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

START_TEST(rate_table)
{
    struct kr_sasl_rate *r = kr_sasl_rate_new(0.5, 3);
    uint8_t k[16];
    uint32_t i;
    int taken = 0;

    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_null(kr_sasl_rate_new(0, 3));
    ck_assert_ptr_null(kr_sasl_rate_new(1, 0));
    /* burst 3, then 0.5/s: a token each 2 s */
    memset(k, 7, sizeof(k));
    for (i = 0; i < 5; i++) {
        taken += kr_sasl_rate_take(r, k, 16, 0);
    }
    ck_assert_int_eq(taken, 3);
    ck_assert(!kr_sasl_rate_take(r, k, 16, 1999));
    ck_assert(kr_sasl_rate_take(r, k, 16, 2000));
    ck_assert(!kr_sasl_rate_take(r, k, 16, 2000));
    /* no address: no limit */
    for (i = 0; i < 10; i++) {
        ck_assert(kr_sasl_rate_take(r, NULL, 0, 0));
    }
    /* 20000 other addresses pass through the bounded table; each starts
       with a full bucket */
    for (i = 0; i < 20000; i++) {
        uint8_t a[4] = { 10, (uint8_t)(i >> 16), (uint8_t)(i >> 8),
                         (uint8_t)i };

        KR_TEST_CHECK(kr_sasl_rate_take(r, a, 4, 2000), "address %u", i);
    }
    kr_sasl_rate_free(r);
}
END_TEST

/* ---- lifetime and re-authentication -------------------------------------- */

START_TEST(lifetime)
{
    struct kr_sasl_srv_cfg *c = cfg_make(1000, 0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct rsp o;
    char msg[256];
    int64_t life = -2;

    /* SaslAuthenticate v1: SessionLifetimeMs told, enforced */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 1, "alice", PW_ALICE,
                                 5000, msg, sizeof(msg), &life),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(life, 1000);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 6000);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 5999),
                     KR_SASL_SRV_PASS);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 6000),
                     KR_SASL_SRV_EXPIRED);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_API_VERSIONS, 6000),
                     KR_SASL_SRV_EXPIRED);
    /* re-authentication (same user and mechanism) renews it */
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_SASL_HANDSHAKE, 6500),
                     KR_SASL_SRV_MINE);
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 2, "alice", PW_ALICE,
                                 6500, msg, sizeof(msg), &life),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(life, 1000);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 7499),
                     KR_SASL_SRV_PASS);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 7500),
                     KR_SASL_SRV_EXPIRED);
    /* before expiry too; another principal closes */
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 2, "mallory", "x",
                                 7000, msg, sizeof(msg), NULL),
                     KR_SASL_SRV_FAILED);
    kr_sasl_srv_free(&s);

    /* a different principal that authenticates: refused as Kafka */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 1, "alice", PW_ALICE, 0, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(o.lifetime, 1000);
    rsp_free(&o);
    ck_assert_int_eq(plain_login(&s, 1, "bob", PW_BOB, 10, &o),
                     KR_SASL_SRV_FAILED);
    ck_assert_int_eq(o.error, KR_KERR_SASL_AUTHENTICATION_FAILED);
    ck_assert_str_eq(o.msg, "Cannot change principals during "
                     "re-authentication from User.alice: User.bob");
    rsp_free(&o);
    kr_sasl_srv_free(&s);

    /* another mechanism on re-authentication: refused */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 2, "alice", PW_ALICE, 0, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    rsp_free(&o);
    handshake_ok(&s, 1, "SCRAM-SHA-256");
    {
        const char *cf = "n,,n=alice,r=abcdefgh";

        ck_assert_int_eq(step(&s, KR_API_SASL_AUTHENTICATE, 2, cf,
                              strlen(cf), 20, &res, &o), KR_SASL_SRV_FAILED);
        ck_assert_str_eq(o.msg, "SASL mechanism 'SCRAM-SHA-256' requested "
                         "by client is not supported for re-authentication "
                         "of mechanism 'PLAIN'");
        rsp_free(&o);
    }
    kr_sasl_srv_free(&s);

    /* SaslAuthenticate v0: no field to tell, and no re-authentication:
       closed at expiry even for a SaslHandshake (SocketServer) */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 0, "alice", PW_ALICE, 0, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(o.lifetime, -1);
    rsp_free(&o);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_SASL_HANDSHAKE, 1000),
                     KR_SASL_SRV_EXPIRED);
    kr_sasl_srv_free(&s);

    /* raw tokens: the same */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA256, -1, "alice", PW_ALICE,
                                 0, msg, sizeof(msg), NULL),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 999),
                     KR_SASL_SRV_PASS);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_SASL_HANDSHAKE, 1000),
                     KR_SASL_SRV_EXPIRED);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);

    /* lifetime 0: never expires, SessionLifetimeMs 0 */
    c = cfg_make(0, 0, 0);
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(plain_login(&s, 1, "alice", PW_ALICE, 0, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(o.lifetime, 0);
    rsp_free(&o);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 0);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, INT64_MAX / 2),
                     KR_SASL_SRV_PASS);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/*
 * The lifetime starts when the login completes, as Kafka's
 * (authenticationEndNanos, taken once the SaslServer is complete), not
 * at the step's now_ms, read before the password check: a login whose
 * check took 4 s (the cfg's clock 4000 ms past now_ms: a PBKDF2 on a
 * loaded host or under ASan) keeps its whole 1000 ms.
 */
START_TEST(lifetime_from_completion)
{
    struct kr_sasl_srv_cfg *c = cfg_make(1000, 0, 0);
    struct kr_sasl_srv s;
    struct rsp o;
    char msg[256];
    unsigned reads;

    clock_lag = 4000;
    /* PLAIN over SaslAuthenticate v1: its step at 5000, done at 9000 */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    reads = clock_reads;
    ck_assert_int_eq(plain_login(&s, 1, "alice", PW_ALICE, 5000, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(o.lifetime, 1000);
    rsp_free(&o);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 9999),
                     KR_SASL_SRV_PASS);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 10000),
                     KR_SASL_SRV_EXPIRED);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 10000);
    ck_assert_uint_eq(clock_reads, reads + 1);
    /* re-authentication at 10500, done at 14500: renewed from its end */
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_SASL_HANDSHAKE, 10500),
                     KR_SASL_SRV_MINE);
    ck_assert_int_eq(plain_login(&s, 2, "alice", PW_ALICE, 10500, &o),
                     KR_SASL_SRV_AUTHENTICATED);
    rsp_free(&o);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 15500);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 15499),
                     KR_SASL_SRV_PASS);
    kr_sasl_srv_free(&s);

    /* SCRAM-SHA-512 over v2 and SCRAM-SHA-256 over raw tokens: from the
       final step's end; a refused login reads no clock */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA512, 2, "alice", PW_ALICE,
                                 20000, msg, sizeof(msg), NULL),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 25000);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    ck_assert_int_eq(scram_login(&s, KR_SCRAM_SHA256, -1, "alice", PW_ALICE,
                                 30000, msg, sizeof(msg), NULL),
                     KR_SASL_SRV_AUTHENTICATED);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 35000);
    ck_assert_int_eq(kr_sasl_srv_gate(&s, KR_API_PRODUCE, 34999),
                     KR_SASL_SRV_PASS);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    reads = clock_reads;
    ck_assert_int_eq(plain_login(&s, 1, "alice", "wrong", 40000, &o),
                     KR_SASL_SRV_FAILED);
    rsp_free(&o);
    ck_assert_uint_eq(clock_reads, reads);
    ck_assert_int_eq(kr_sasl_srv_expires_ms(&s), 0);
    kr_sasl_srv_free(&s);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

/* ---- truncated tokens ---------------------------------------------------- */

/*
 * Every prefix of a token, from an exact-size buffer (ASan sees a read
 * past it), over raw tokens: the step fails, closes, sends nothing; a
 * prefix that does not parse is MALFORMED (one that does, e.g. a
 * shorter password, FAILED).
 */
START_TEST(truncated)
{
    struct kr_sasl_srv_cfg *c = cfg_make(0, 0, 0);
    struct kr_sasl_srv s;
    struct kr_sasl_srv_result res;
    struct kr_scram_client cl;
    uint8_t plain[64];
    size_t pn = plain_token(plain, "", "alice", PW_ALICE), i;
    char *cf = NULL, *cfin = NULL;
    size_t cf_len, cfin_len;

    /* PLAIN: up to the second NUL nothing parses */
    for (i = 0; i < pn; i++) {
        uint8_t *t = malloc(i > 0 ? i : 1);

        memcpy(t, plain, i);
        kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
        handshake_ok(&s, 0, "PLAIN");
        kr_sasl_srv_raw(&s, t, i, 0, &res);
        KR_TEST_CHECK(res.close && res.raw == NULL, "prefix %zu", i);
        KR_TEST_CHECK(res.outcome == (i <= 7 ? KR_SASL_SRV_MALFORMED
                                             : KR_SASL_SRV_FAILED),
                      "prefix %zu: %s", i,
                      kr_sasl_srv_outcome_name(res.outcome));
        kr_sasl_srv_free(&s);
        free(t);
    }
    /* SCRAM client-first: every prefix fails (a nonce cut short still
       parses and is answered: then the exchange goes on) */
    memset(&cl, 0, sizeof(cl));
    ck_assert_int_eq(kr_scram_client_first(&cl, KR_SCRAM_SHA256, "alice",
                                           NULL, NULL, &cf, &cf_len),
                     KR_SCRAM_OK);
    for (i = 0; i < cf_len; i++) {
        uint8_t *t = malloc(i > 0 ? i : 1);

        memcpy(t, cf, i);
        kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
        handshake_ok(&s, 0, "SCRAM-SHA-256");
        kr_sasl_srv_raw(&s, t, i, 0, &res);
        /* "n,,n=alice,r=" + nonce: from 14 bytes on it parses */
        KR_TEST_CHECK(res.outcome == (i < 14 ? KR_SASL_SRV_MALFORMED
                                             : KR_SASL_SRV_CONTINUE),
                      "prefix %zu: %s", i,
                      kr_sasl_srv_outcome_name(res.outcome));
        free(res.raw);
        kr_sasl_srv_free(&s);
        free(t);
    }
    /* SCRAM client-final: every prefix is refused */
    kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
    handshake_ok(&s, 0, "SCRAM-SHA-256");
    kr_sasl_srv_raw(&s, (uint8_t *)cf, cf_len, 0, &res);
    ck_assert_int_eq(res.outcome, KR_SASL_SRV_CONTINUE);
    ck_assert_int_eq(kr_scram_client_server_first(&cl, res.raw, res.raw_len),
                     KR_SCRAM_OK);
    free(res.raw);
    ck_assert_int_eq(kr_scram_client_final_password(
                         &cl, (const uint8_t *)PW_ALICE, strlen(PW_ALICE),
                         &cfin, &cfin_len), KR_SCRAM_OK);
    kr_sasl_srv_free(&s);
    for (i = 0; i < cfin_len; i++) {
        uint8_t *t = malloc(i > 0 ? i : 1);

        /* the same client-first again: a fresh exchange each time */
        memcpy(t, cfin, i);
        kr_sasl_srv_init(&s, c, ADDR1, sizeof(ADDR1));
        handshake_ok(&s, 0, "SCRAM-SHA-256");
        kr_sasl_srv_raw(&s, (uint8_t *)cf, cf_len, 0, &res);
        KR_TEST_CHECK(res.outcome == KR_SASL_SRV_CONTINUE, "first");
        free(res.raw);
        kr_sasl_srv_raw(&s, t, i, 0, &res);
        KR_TEST_CHECK(res.close && res.raw == NULL &&
                      (res.outcome == KR_SASL_SRV_MALFORMED ||
                       res.outcome == KR_SASL_SRV_FAILED),
                      "prefix %zu: %s", i,
                      kr_sasl_srv_outcome_name(res.outcome));
        kr_sasl_srv_free(&s);
        free(t);
    }
    free(cf);
    free(cfin);
    kr_scram_client_free(&cl);
    kr_sasl_srv_cfg_free(c);
}
END_TEST

START_TEST(mechs_parse)
{
    enum kr_sasl_srv_mech o[KR_SASL_SRV_NMECH];
    unsigned n;
    char why[256];

    ck_assert(kr_sasl_srv_mechs_parse("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                                      o, &n, why, sizeof(why)));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(o[2], KR_SASL_SRV_SCRAM_SHA_512);
    ck_assert(kr_sasl_srv_mechs_parse(" SCRAM-SHA-512 , PLAIN", o, &n,
                                      why, sizeof(why)));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(o[0], KR_SASL_SRV_SCRAM_SHA_512);
    ck_assert_int_eq(o[1], KR_SASL_SRV_PLAIN);
    ck_assert(!kr_sasl_srv_mechs_parse("", o, &n, why, sizeof(why)));
    ck_assert_str_eq(why, "no mechanism named");
    ck_assert(!kr_sasl_srv_mechs_parse("PLAIN,", o, &n, why, sizeof(why)));
    ck_assert_str_eq(why, "an empty name in the list");
    ck_assert(!kr_sasl_srv_mechs_parse("PLAIN, PLAIN", o, &n, why,
                                       sizeof(why)));
    ck_assert_str_eq(why, "PLAIN named twice");
    ck_assert(!kr_sasl_srv_mechs_parse("PLAIN,SCRAM-SHA-521 ", o, &n, why,
                                       sizeof(why)));
    ck_assert_str_eq(why, "unknown mechanism 'SCRAM-SHA-521' (krelay "
                     "terminates PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)");
    ck_assert(!kr_sasl_srv_mechs_parse("plain", o, &n, why, sizeof(why)));
    ck_assert_str_eq(why, "unknown mechanism 'plain' (krelay terminates "
                     "PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)");
    ck_assert(!kr_sasl_srv_mechs_parse("PLAIN,OAUTHBEARER", o, &n, why,
                                       sizeof(why)));
    ck_assert_str_eq(why, "krelay cannot terminate OAUTHBEARER (passthrough "
                     "and origination only)");
    ck_assert(!kr_sasl_srv_mechs_parse("GSSAPI", o, &n, why, sizeof(why)));
    ck_assert_str_eq(why, "krelay cannot terminate GSSAPI (passthrough "
                     "only)");
}
END_TEST

/* the login rate's key: IPv4 as is, IPv6 by its /64, IPv4-mapped as IPv4 */
static size_t
key_of6(const char *text, uint8_t out[16])
{
    struct sockaddr_in6 a;

    memset(&a, 0, sizeof(a));
    a.sin6_family = AF_INET6;
    ck_assert_int_eq(inet_pton(AF_INET6, text, &a.sin6_addr), 1);
    return kr_sasl_rate_key((struct sockaddr *)&a, out);
}

START_TEST(rate_key)
{
    struct sockaddr_in a4;
    uint8_t k1[16], k2[16];
    size_t n1, n2;

    memset(&a4, 0, sizeof(a4));
    a4.sin_family = AF_INET;
    ck_assert_int_eq(inet_pton(AF_INET, "192.0.2.7", &a4.sin_addr), 1);
    n1 = kr_sasl_rate_key((struct sockaddr *)&a4, k1);
    ck_assert_uint_eq(n1, 4);
    ck_assert_mem_eq(k1, "\xc0\x00\x02\x07", 4);
    /* the same host through a dual-stack listener: the same key */
    n2 = key_of6("::ffff:192.0.2.7", k2);
    ck_assert_uint_eq(n2, 4);
    ck_assert_mem_eq(k1, k2, 4);
    /* two addresses of one /64: one key; another /64: another */
    n1 = key_of6("2001:db8:1:2::1", k1);
    n2 = key_of6("2001:db8:1:2:dead:beef:0:99", k2);
    ck_assert_uint_eq(n1, 8);
    ck_assert_uint_eq(n2, 8);
    ck_assert_mem_eq(k1, k2, 8);
    n2 = key_of6("2001:db8:1:3::1", k2);
    ck_assert(memcmp(k1, k2, 8) != 0);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("sasl_server");
    TCase *t = tcase_create("core");

    tcase_set_timeout(t, 60);
    tcase_add_test(t, plain_v1);
    tcase_add_test(t, plain_v0_raw);
    tcase_add_test(t, scram_exchanges);
    tcase_add_test(t, bad_credentials);
    tcase_add_test(t, scram_unknown_shape);
    tcase_add_test(t, tokenauth_refused);
    tcase_add_test(t, unsupported_mechanism);
    tcase_add_test(t, illegal_state);
    tcase_add_test(t, rate_limit);
    tcase_add_test(t, rate_table);
    tcase_add_test(t, lifetime);
    tcase_add_test(t, lifetime_from_completion);
    tcase_add_test(t, truncated);
    tcase_add_test(t, mechs_parse);
    tcase_add_test(t, rate_key);
    suite_add_tcase(s, t);
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
