/*
 * check_rule.c - [rule]/[audit] config keys, rule compilation, matching
 * and verdicts (kr_rule.h).
 *
 * Requests are built from their JSON form (kr_json_to_msg) so topics,
 * ClientId and versions are real decoded trees.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_json.h"
#include "kr_rule.h"
#include "kr_topics.h"

#define BASE "[upstream]\nbootstrap_servers = 127.0.0.1:9092\n" \
             "[listener a]\nlisten = 127.0.0.1:29092\n" \
             "broker_port_base = 29100\n" \
             "[listener b]\nlisten = 127.0.0.1:39092\n" \
             "broker_port_base = 39100\n"
/* BASE is 8 lines: a rule section starts at line 9 */

static int
load(const char *text, struct kr_conf **out, char **errs)
{
    size_t len = 0;
    FILE *f = open_memstream(errs, &len);
    int rc;

    ck_assert_ptr_nonnull(f);
    *out = NULL;
    rc = kr_rule_load_string(text, "t.ini", f, out);
    fclose(f);
    return rc;
}

static struct kr_conf *
load_ok(const char *text)
{
    struct kr_conf *c;
    char *errs = NULL;
    int rc = load(text, &c, &errs);

    ck_assert_msg(rc == KR_OK, "config refused: %s", errs);
    free(errs);
    ck_assert_ptr_nonnull(c->ruleset);
    return c;
}

static void
expect_error(const char *text, const char *want)
{
    struct kr_conf *c;
    char *errs = NULL;
    int rc = load(text, &c, &errs);

    ck_assert_int_eq(rc, KR_ERROR);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(errs, want) != NULL, "want '%s' in:\n%s", want,
                  errs);
    free(errs);
}

/* A decoded request from JSON; arena-owned. */
static void
build_req(struct kr_arena *a, const char *json, struct kr_msg *m)
{
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    int rc;

    ck_assert_msg(j != NULL, "bad test JSON: %s", je.text);
    memset(&recs, 0, sizeof(recs));
    memset(&err, 0, sizeof(err));
    rc = kr_json_to_msg(a, j, &recs, m, &err);
    ck_assert_msg(rc == KR_OK, "kr_json_to_msg: %s at %s", err.msg,
                  err.path);
    json_decref(j);
    kr_json_recbuf_free(&recs);
}

#define PRODUCE(ver, cid, topics)                                           \
    "{\"header\":{\"RequestApiKey\":0,\"RequestApiVersion\":" #ver ","      \
    "\"CorrelationId\":7,\"ClientId\":\"" cid "\"},\"body\":{\"Acks\":-1,"  \
    "\"TimeoutMs\":1000,\"TopicData\":[" topics "]}}"
#define TOPIC(name) "{\"Name\":\"" name "\",\"PartitionData\":[]}"

static void
addr4(struct sockaddr_in *sa, const char *ip)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    ck_assert_int_eq(inet_pton(AF_INET, ip, &sa->sin_addr), 1);
}

static void
addr6(struct sockaddr_in6 *sa, const char *ip)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin6_family = AF_INET6;
    ck_assert_int_eq(inet_pton(AF_INET6, ip, &sa->sin6_addr), 1);
}

/* ---- primitives ------------------------------------------------------- */

START_TEST(test_glob)
{
    ck_assert(kr_glob_match("secret-*", "secret-a", 8));
    ck_assert(kr_glob_match("secret-*", "secret-", 7));
    ck_assert(!kr_glob_match("secret-*", "secret", 6));
    ck_assert(kr_glob_match("*", "", 0));
    ck_assert(kr_glob_match("a?c", "abc", 3));
    ck_assert(!kr_glob_match("a?c", "ac", 2));
    ck_assert(kr_glob_match("*-log-*", "app-log-1", 9));
    ck_assert(!kr_glob_match("*-log-*", "app-log", 7));
    ck_assert(kr_glob_match("a\\*", "a*", 2));
    ck_assert(!kr_glob_match("a\\*", "ab", 2));
    /* the length bounds the string: no NUL needed */
    ck_assert(kr_glob_match("abc", "abcdef", 3));
    ck_assert(!kr_glob_match("abcd", "abcdef", 3));
}
END_TEST

START_TEST(test_cidr)
{
    struct kr_conf *c = load_ok(BASE "[rule r]\nclient_address = "
                                "10.1.0.0/16, 2001:db8::/32, 192.0.2.7\n"
                                "throttle_ms = 5\n");
    const struct kr_rule_conf *r = &c->rules[0];
    struct sockaddr_in s4;
    struct sockaddr_in6 s6;

    ck_assert_int_eq(r->nclient_address, 3);
    addr4(&s4, "10.1.200.3");
    ck_assert(kr_cidr_match(&r->client_address[0], (void *)&s4));
    addr4(&s4, "10.2.0.1");
    ck_assert(!kr_cidr_match(&r->client_address[0], (void *)&s4));
    addr6(&s6, "2001:db8:ffff::1");
    ck_assert(kr_cidr_match(&r->client_address[1], (void *)&s6));
    ck_assert(!kr_cidr_match(&r->client_address[0], (void *)&s6));
    addr6(&s6, "2001:db9::1");
    ck_assert(!kr_cidr_match(&r->client_address[1], (void *)&s6));
    /* an IPv4-mapped IPv6 peer matches the IPv4 network */
    addr6(&s6, "::ffff:10.1.0.9");
    ck_assert(kr_cidr_match(&r->client_address[0], (void *)&s6));
    addr4(&s4, "192.0.2.7");
    ck_assert(kr_cidr_match(&r->client_address[2], (void *)&s4));
    addr4(&s4, "192.0.2.8");
    ck_assert(!kr_cidr_match(&r->client_address[2], (void *)&s4));
    kr_conf_free(c);
}
END_TEST

/* ---- config ------------------------------------------------------------ */

START_TEST(test_conf_values)
{
    struct kr_conf *c = load_ok(BASE "[audit]\ntarget = /tmp/x.log\n"
                                "[rule r]\n"
                                "listener = b\n"
                                "client_id = app-*,tool\n"
                                "api = Produce, fetch, 19\n"
                                "versions = 3-9\n"
                                "direction = request\n"
                                "topic = t-*\n"
                                "audit = true\n"
                                "deny = true\n"
                                "deny_error = topic_authorization_failed\n"
                                "[rule p]\n"
                                "api = Produce\n"
                                "allowed_acks = all, 1\n"
                                "allowed_compression = zstd,none\n"
                                "fault_error = 6\n"
                                "fault_error_probability = 0.25\n"
                                "throttle_ms = 100\n"
                                "throttle_mode = enforce\n"
                                "throttle_op = add\n");
    const struct kr_rule_conf *r = &c->rules[0], *p = &c->rules[1];

    ck_assert_int_eq(c->nrules, 2);
    ck_assert_str_eq(c->audit.target, "/tmp/x.log");
    ck_assert_int_eq(c->audit.queue_bytes, 4194304);
    ck_assert_str_eq(r->name, "r");
    ck_assert_int_eq(r->line, 11);
    ck_assert_int_eq(r->listener.n, 1);
    ck_assert_str_eq(r->listener.v[0], "b");
    ck_assert_int_eq(r->client_id.n, 2);
    ck_assert_str_eq(r->client_id.v[1], "tool");
    ck_assert_int_eq(r->napi, 3);
    ck_assert_int_eq(r->api[0], KR_API_PRODUCE);
    ck_assert_int_eq(r->api[1], KR_API_FETCH);
    ck_assert_int_eq(r->api[2], KR_API_CREATE_TOPICS);
    ck_assert_int_eq(r->versions_min, 3);
    ck_assert_int_eq(r->versions_max, 9);
    ck_assert_int_eq(r->direction, KR_RDIR_REQUEST);
    ck_assert_int_eq(r->deny_error, 29);
    ck_assert_int_eq(r->throttle_ms, -1);
    ck_assert_int_eq(r->clamp_max_version, -1);
    ck_assert_uint_eq(p->allowed_acks, (1u << 0) | (1u << 2));
    ck_assert_uint_eq(p->allowed_compression, (1u << 0) | (1u << 4));
    ck_assert_int_eq(p->fault_error, 6);
    ck_assert(p->fault_error_probability == 0.25);
    ck_assert_int_eq(p->throttle_mode, KR_THROTTLE_ENFORCE);
    ck_assert_int_eq(p->throttle_op, KR_THROTTLE_ADD);
    ck_assert_int_eq(p->direction, KR_RDIR_BOTH);
    ck_assert_int_eq(p->versions_min, 0);
    ck_assert_int_eq(p->versions_max, 32767);
    kr_conf_free(c);
}
END_TEST

START_TEST(test_conf_errors)
{
    expect_error(BASE "[rule]\ndeny = true\n",
                 "t.ini:9: [rule] needs a name");
    expect_error(BASE "[rule r]\napi = Prodce\ndeny = true\n",
                 "t.ini:10: 'api': bad value 'Prodce': 'Prodce' is not a "
                 "Kafka API name");
    expect_error(BASE "[rule r]\napi = Produce\n",
                 "t.ini:9: [rule r]: no action");
    expect_error(BASE "[rule r]\nclamp_max_version = 3\n",
                 "t.ini:10: [rule r]: a version clamp needs api");
    expect_error(BASE "[rule r]\naudit = true\n",
                 "t.ini:10: [rule r]: audit = true but there is no [audit]");
    expect_error(BASE "[rule r]\nlistener = c\ndeny = true\n",
                 "t.ini:10: [rule r]: no [listener c] section");
    expect_error(BASE "[rule r]\nclient_address = 10.0.0.0/33\n"
                 "deny = true\n", "t.ini:10: 'client_address'");
    expect_error(BASE "[rule r]\nversions = 5-3\ndeny = true\n",
                 "t.ini:10: 'versions'");
    expect_error(BASE "[rule r]\ndirection = sideways\ndeny = true\n",
                 "expected request, response or both");
    expect_error(BASE "[rule r]\nfault_error = NO_SUCH_ERROR\n",
                 "t.ini:10: 'fault_error'");
    expect_error(BASE "[rule r]\nfault_close_probability = 1.5\n",
                 "t.ini:10: 'fault_close_probability'");
    expect_error(BASE "[rule r]\napi = Fetch\nallowed_acks = 1\n",
                 "t.ini:11: [rule r]: allowed_acks and allowed_compression "
                 "are a Produce policy");
    expect_error(BASE "[rule r]\ndeny = true\n[rule r]\ndeny = true\n",
                 "t.ini:11: duplicate section [rule r]");
    expect_error(BASE "[audit x]\ntarget = syslog\n",
                 "t.ini:9: [audit] takes no name");
    expect_error(BASE "[audit]\nqueue_bytes = 10\n",
                 "missing required key 'target'");
    expect_error(BASE "[rule r]\nthrottle_mode = enforce\ndeny = true\n",
                 "t.ini:10: [rule r]: throttle_mode without throttle_ms");
}
END_TEST

/* Rules that could never act or cannot be carried out are refused. */
START_TEST(test_conf_refusals)
{
    struct kr_conf *c;

    /* SaslHandshake v0 and v1 frame what follows differently */
    expect_error(BASE "[rule r]\napi = Produce, SaslHandshake\n"
                 "clamp_min_version = 1\n",
                 "t.ini:11: [rule r]: SaslHandshake cannot be clamped");
    /* a deny acts on requests; throttle and faults on responses */
    expect_error(BASE "[rule r]\ndirection = response\ndeny = true\n",
                 "t.ini:11: [rule r]: deny acts on requests, but direction "
                 "= response");
    expect_error(BASE "[rule r]\ndirection = response\napi = Produce\n"
                 "allowed_acks = all\n",
                 "t.ini:12: [rule r]: allowed_acks acts on requests");
    expect_error(BASE "[rule r]\ndirection = response\napi = Produce\n"
                 "clamp_max_version = 7\n",
                 "t.ini:12: [rule r]: clamp_max_version acts on requests");
    expect_error(BASE "[rule r]\ndirection = request\nthrottle_ms = 100\n",
                 "t.ini:11: [rule r]: throttle_ms acts on responses, but "
                 "direction = request");
    expect_error(BASE "[rule r]\ndirection = request\n"
                 "fault_error = NOT_LEADER_OR_FOLLOWER\n",
                 "t.ini:11: [rule r]: fault_error acts on responses");
    expect_error(BASE "[rule r]\ndirection = request\n"
                 "fault_close_probability = 0.5\n",
                 "t.ini:11: [rule r]: fault_close_probability acts on "
                 "responses");
    /* pass_unknown_apis only acts with this rule's clamp */
    expect_error(BASE "[rule r]\npass_unknown_apis = true\n",
                 "t.ini:10: [rule r]: pass_unknown_apis only changes the "
                 "ApiVersions responses this rule clamps");
    /* error codes Kafka does not define, as numbers and names */
    expect_error(BASE "[rule r]\ndeny = true\ndeny_error = 999\n",
                 "t.ini:11: 'deny_error': bad value '999': error code 999 "
                 "is not one Kafka defines");
    expect_error(BASE "[rule r]\ndeny = true\n"
                 "deny_error = UNKNOWN_ERROR_500\n",
                 "t.ini:11: 'deny_error'");
    expect_error(BASE "[rule r]\nfault_error = 134\n",
                 "t.ini:10: 'fault_error': bad value '134': error code 134");
    /* a clamp leaving no version krelay knows */
    expect_error(BASE "[rule r]\napi = Fetch, Produce\n"
                 "clamp_min_version = 14\n",
                 "t.ini:11: [rule r]: clamp_min_version 14 is above every "
                 "Produce version krelay knows (0-13)");
    /* a deny naming an API krelay cannot answer, over the rule's range */
    expect_error(BASE "[rule r]\napi = Produce, AlterUserScramCredentials,"
                 " SaslAuthenticate\ndeny = true\n",
                 "t.ini:10: [rule r]: deny = true, but krelay cannot build "
                 "an error response for AlterUserScramCredentials v0 ");
    expect_error(BASE "[rule r]\napi = Produce, AlterUserScramCredentials,"
                 " SaslAuthenticate\ndeny = true\n",
                 "an error response for SaslAuthenticate v0-2 ");
    expect_error(BASE "[rule r]\napi = OffsetFetch\nversions = 3-5\n"
                 "deny = true\n",
                 "an error response for OffsetFetch v3-5 ");

    /* the good neighbours of each refusal load */
    c = load_ok(BASE "[rule r]\ndirection = response\nthrottle_ms = 5\n"
                "fault_error = 6\n[rule s]\ndirection = request\n"
                "api = Produce\ndeny = true\ndeny_error = 133\n"
                "[rule t]\napi = Produce\nclamp_min_version = 13\n"
                "pass_unknown_apis = true\n"
                "[rule u]\ndeny = true\n"
                "[rule v]\napi = FindCoordinator, OffsetCommit, Fetch\n"
                "deny = true\ndeny_error = GROUP_AUTHORIZATION_FAILED\n");
    ck_assert_int_eq(c->nrules, 5);
    ck_assert_int_eq(c->rules[1].deny_error, 133);
    ck_assert_int_eq(c->rules[4].deny_error, 30);
    ck_assert(c->rules[2].pass_unknown_apis);
    kr_conf_free(c);
}
END_TEST

/* The dump of a config with rules loads and dumps the same. */
START_TEST(test_conf_dump_roundtrip)
{
    const char *text = BASE "[audit]\ntarget = syslog\n"
                       "[rule r]\nlistener = a,b\n"
                       "client_address = 10.1.2.3/16,::1\n"
                       "api = Produce,Metadata\nversions = 2\n"
                       "topic = x*\naudit = true\naudit_body = true\n"
                       "fault_close_probability = 0.1\n"
                       "[rule s]\napi = Produce\nclamp_max_version = 3\n"
                       "allowed_compression = gzip\nallowed_acks = 0\n";
    struct kr_conf *c = load_ok(text), *c2;
    char *d1 = NULL, *d2 = NULL;
    size_t l1 = 0, l2 = 0;
    FILE *f = open_memstream(&d1, &l1);

    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(d1, "client_address = 10.1.0.0/16,::1/128"));
    ck_assert_ptr_nonnull(strstr(d1, "api = Produce,Metadata"));
    ck_assert_ptr_nonnull(strstr(d1, "versions = 2-2"));
    ck_assert_ptr_nonnull(strstr(d1, "allowed_acks = 0\n"));
    ck_assert_ptr_null(strstr(d1, "throttle_ms"));
    c2 = load_ok(d1);
    f = open_memstream(&d2, &l2);
    kr_conf_dump(c2, f);
    fclose(f);
    ck_assert_str_eq(d1, d2);
    free(d1);
    free(d2);
    kr_conf_free(c);
    kr_conf_free(c2);
}
END_TEST

/* ---- compile, lookup, evaluation -------------------------------------- */

START_TEST(test_lookup_clamp_only)
{
    struct kr_conf *c = load_ok(BASE "[rule old]\napi = Produce, Fetch\n"
                                "clamp_max_version = 7\n");
    const struct kr_ruleset *rs = c->ruleset;
    struct kr_rule_mask m;

    kr_rule_conn_mask(rs, "a", NULL, NULL, &m);
    /* inside the clamp: pass-through */
    ck_assert_ptr_null(kr_rule_lookup(rs, KR_API_PRODUCE, 7, &m));
    ck_assert_ptr_null(kr_rule_lookup(rs, KR_API_PRODUCE, 3, &m));
    ck_assert_ptr_nonnull(kr_rule_lookup(rs, KR_API_PRODUCE, 8, &m));
    ck_assert_ptr_nonnull(kr_rule_lookup(rs, KR_API_FETCH, 12, &m));
    ck_assert_ptr_null(kr_rule_lookup(rs, KR_API_METADATA, 12, &m));
    /* out of range keys and versions */
    ck_assert_ptr_null(kr_rule_lookup(rs, -1, 0, &m));
    ck_assert_ptr_null(kr_rule_lookup(rs, 30000, 0, &m));
    ck_assert_ptr_null(kr_rule_lookup(rs, KR_API_PRODUCE, 999, &m));
    kr_conf_free(c);
}
END_TEST

/*
 * issue 9: a principal krelay cannot know (SASL GSSAPI...): rules naming
 * principals fail closed -- deny, policy, clamp, throttle enforce and
 * audit apply; ThrottleTimeMs injection and faults do not; other matchers
 * still hold.
 */
START_TEST(test_conn_mask_unknown)
{
    struct kr_conf *c = load_ok(BASE "[rule d]\nprincipal = User:bob\n"
                                "api = Produce\ndeny = true\n"
                                "[rule a]\nprincipal = User:bob\n"
                                "audit = true\n"
                                "[rule i]\nprincipal = User:bob\n"
                                "throttle_ms = 5\n"
                                "[rule e]\nprincipal = User:bob\n"
                                "throttle_ms = 5\nthrottle_mode = enforce\n"
                                "[rule f]\nprincipal = User:bob\n"
                                "fault_latency_ms = 5\n"
                                "[rule l]\nlistener = b\n"
                                "principal = User:bob\ndeny = true\n"
                                "[audit]\ntarget = /dev/null\n");
    const struct kr_ruleset *rs = c->ruleset;
    struct kr_rule_mask m;

    kr_rule_conn_mask_unknown(rs, "a", NULL, &m);
    ck_assert(kr_rule_mask_has(&m, 0));
    ck_assert(kr_rule_mask_has(&m, 1));
    ck_assert(!kr_rule_mask_has(&m, 2));
    ck_assert(kr_rule_mask_has(&m, 3));
    ck_assert(!kr_rule_mask_has(&m, 4));
    ck_assert(!kr_rule_mask_has(&m, 5));        /* listener b only */
    ck_assert_ptr_nonnull(kr_rule_lookup(rs, KR_API_PRODUCE, 9, &m));
    /* a known other principal: none of them */
    kr_rule_conn_mask(rs, "a", NULL, "User:alice", &m);
    ck_assert_ptr_null(kr_rule_lookup(rs, KR_API_PRODUCE, 9, &m));
    kr_conf_free(c);
}
END_TEST

START_TEST(test_conn_mask)
{
    struct kr_conf *c = load_ok(BASE "[rule onlyb]\nlistener = b\n"
                                "deny = true\n"
                                "[rule net]\nclient_address = 10.0.0.0/8\n"
                                "throttle_ms = 1\n"
                                "[rule who]\nprincipal = User:bob*\n"
                                "audit_body = false\nthrottle_ms = 2\n");
    const struct kr_ruleset *rs = c->ruleset;
    struct kr_rule_mask m;
    struct sockaddr_in s4;

    addr4(&s4, "10.9.9.9");
    kr_rule_conn_mask(rs, "a", (void *)&s4, NULL, &m);
    ck_assert(!kr_rule_mask_has(&m, 0));
    ck_assert(kr_rule_mask_has(&m, 1));
    ck_assert(!kr_rule_mask_has(&m, 2));
    addr4(&s4, "192.168.1.1");
    kr_rule_conn_mask(rs, "b", (void *)&s4, "User:bobby", &m);
    ck_assert(kr_rule_mask_has(&m, 0));
    ck_assert(!kr_rule_mask_has(&m, 1));
    ck_assert(kr_rule_mask_has(&m, 2));
    /* Metadata on listener a from 192.168.1.1: nothing applies */
    kr_rule_conn_mask(rs, "a", (void *)&s4, NULL, &m);
    ck_assert_ptr_null(kr_rule_lookup(rs, KR_API_METADATA, 9, &m));
    kr_conf_free(c);
}
END_TEST

START_TEST(test_eval_topics_deny)
{
    struct kr_conf *c = load_ok(BASE "[audit]\ntarget = syslog\n"
                                "[rule aud]\napi = Produce\naudit = true\n"
                                "[rule sec]\ntopic = secret-*\ndeny = true\n"
                                "[rule thr]\napi = Produce\n"
                                "throttle_ms = 50\n");
    const struct kr_ruleset *rs = c->ruleset;
    const struct kr_rule_slot *sl;
    struct kr_rule_mask m;
    struct kr_arena a;
    struct kr_msg req;
    struct kr_verdict v;

    kr_arena_init(&a, 0);
    kr_rule_conn_mask(rs, "a", NULL, NULL, &m);
    sl = kr_rule_lookup(rs, KR_API_PRODUCE, 9, &m);
    ck_assert_ptr_nonnull(sl);

    /* one of two topics is secret: the whole request is denied */
    build_req(&a, PRODUCE(9, "app", TOPIC("public") "," TOPIC("secret-x")),
              &req);
    ck_assert(kr_rule_eval(rs, sl, &m, &req, NULL, &v));
    ck_assert_uint_eq(v.flags & KR_VF_DENY, KR_VF_DENY);
    ck_assert_int_eq(v.deny_rule, 1);
    ck_assert_int_eq(v.deny_error, -1);         /* the API's default */
    ck_assert(v.flags & KR_VF_AUDIT);           /* earlier rule applied */
    ck_assert(!(v.flags & KR_VF_THROTTLE));     /* deny ended evaluation */

    build_req(&a, PRODUCE(9, "app", TOPIC("public")), &req);
    ck_assert(kr_rule_eval(rs, sl, &m, &req, NULL, &v));
    ck_assert(!(v.flags & KR_VF_DENY));
    ck_assert(v.flags & KR_VF_AUDIT);
    ck_assert(v.flags & KR_VF_THROTTLE);
    ck_assert_int_eq(v.throttle_ms, 50);
    ck_assert_int_eq(v.throttle_rule, 2);
    kr_arena_free(&a);
    kr_conf_free(c);
}
END_TEST

/*
 * audit_body from any matching audit rule, not only the first: a broad
 * audit rule before a narrow one with bodies (conf/examples/audit-only.ini
 * does this) still gives the narrow rule's requests their bodies.
 */
START_TEST(test_eval_audit_body_any)
{
    struct kr_conf *c = load_ok(BASE "[audit]\ntarget = syslog\n"
                                "[rule broad]\napi = Produce\naudit = true\n"
                                "[rule pay]\ntopic = pay-*\naudit = true\n"
                                "audit_body = true\n");
    const struct kr_ruleset *rs = c->ruleset;
    const struct kr_rule_slot *sl;
    struct kr_rule_mask m;
    struct kr_arena a;
    struct kr_msg req;
    struct kr_verdict v;

    kr_arena_init(&a, 0);
    kr_rule_conn_mask(rs, "a", NULL, NULL, &m);
    sl = kr_rule_lookup(rs, KR_API_PRODUCE, 9, &m);
    ck_assert_ptr_nonnull(sl);
    build_req(&a, PRODUCE(9, "app", TOPIC("pay-eu")), &req);
    ck_assert(kr_rule_eval(rs, sl, &m, &req, NULL, &v));
    ck_assert(v.flags & KR_VF_AUDIT);
    ck_assert(v.audit_body);
    build_req(&a, PRODUCE(9, "app", TOPIC("other")), &req);
    ck_assert(kr_rule_eval(rs, sl, &m, &req, NULL, &v));
    ck_assert(v.flags & KR_VF_AUDIT);
    ck_assert(!v.audit_body);
    kr_arena_free(&a);
    kr_conf_free(c);
}
END_TEST

START_TEST(test_eval_precedence)
{
    struct kr_conf *c = load_ok(BASE
                                "[rule t1]\napi = Produce\nclient_id = x*\n"
                                "throttle_ms = 10\n"
                                "[rule t2]\napi = Produce\nthrottle_ms = 20\n"
                                "throttle_op = add\n"
                                "[rule c1]\napi = Produce\n"
                                "clamp_max_version = 7\n"
                                "[rule c2]\napi = Produce\n"
                                "clamp_max_version = 5\n"
                                "[rule f]\napi = Produce\n"
                                "fault_latency_ms = 30\n"
                                "allowed_acks = 1\n");
    const struct kr_ruleset *rs;
    const struct kr_rule_slot *sl;
    struct kr_rule_mask m;
    struct kr_arena a;
    struct kr_msg req;
    struct kr_verdict v;
    char cerr[128];

    /*
     * The loader refuses a latency with direction = request (it would
     * never act); the compiler must still honour direction: recompile
     * with rule f turned to direction = request.
     */
    c->rules[4].direction = KR_RDIR_REQUEST;
    kr_rule_free(c->ruleset);
    c->ruleset = kr_rule_compile(c, cerr, sizeof(cerr));
    ck_assert_ptr_nonnull(c->ruleset);
    rs = c->ruleset;
    kr_arena_init(&a, 0);
    kr_rule_conn_mask(rs, "a", NULL, NULL, &m);
    sl = kr_rule_lookup(rs, KR_API_PRODUCE, 9, &m);
    ck_assert_ptr_nonnull(sl);
    build_req(&a, PRODUCE(9, "xyz", TOPIC("t")), &req);
    ck_assert(kr_rule_eval(rs, sl, &m, &req, NULL, &v));
    /* first throttle wins */
    ck_assert_int_eq(v.throttle_ms, 10);
    ck_assert(!v.throttle_add);
    /* first clamp wins: 7, and v9 is above it */
    ck_assert(v.flags & KR_VF_CLAMP);
    ck_assert_int_eq(v.clamp_max, 7);
    ck_assert_int_eq(v.clamp_rule, 2);
    /* direction = request: the latency (response side) does not apply,
       the produce policy (request side) does */
    ck_assert(!(v.flags & KR_VF_LATENCY));
    ck_assert(v.flags & KR_VF_POLICY);
    ck_assert_uint_eq(v.acks_mask, 1u << 2);

    /* ClientId "other" skips t1: t2 wins */
    build_req(&a, PRODUCE(6, "other", TOPIC("t")), &req);
    sl = kr_rule_lookup(rs, KR_API_PRODUCE, 6, &m);
    ck_assert_ptr_nonnull(sl);
    ck_assert(kr_rule_eval(rs, sl, &m, &req, NULL, &v));
    ck_assert_int_eq(v.throttle_ms, 20);
    ck_assert(v.throttle_add);
    /* v6 is inside c1's clamp: c1 wins and nothing is clamped */
    ck_assert(!(v.flags & KR_VF_CLAMP));
    ck_assert_int_eq(v.clamp_rule, 2);
    kr_arena_free(&a);
    kr_conf_free(c);
}
END_TEST

START_TEST(test_conn_clamps)
{
    struct kr_conf *c = load_ok(BASE
                                "[rule legacy]\napi = Produce,Fetch\n"
                                "client_id = legacy-*\n"
                                "clamp_max_version = 7\n"
                                "[rule all]\napi = Produce\n"
                                "clamp_min_version = 3\n"
                                "clamp_max_version = 9\n"
                                "pass_unknown_apis = true\n");
    struct kr_clamp cl[KR_API_DELETE_SHARE_GROUP_OFFSETS + 200];
    struct kr_rule_mask m;
    bool pass;

    kr_rule_conn_mask(c->ruleset, "a", NULL, NULL, &m);
    ck_assert_int_eq(kr_rule_conn_clamps(c->ruleset, &m, "legacy-1", 8, cl,
                                         &pass), 2);
    ck_assert_int_eq(cl[KR_API_PRODUCE].min, 0);
    ck_assert_int_eq(cl[KR_API_PRODUCE].max, 7);
    ck_assert_int_eq(cl[KR_API_FETCH].max, 7);
    ck_assert(cl[KR_API_METADATA].min > cl[KR_API_METADATA].max);
    ck_assert(pass);
    ck_assert_int_eq(kr_rule_conn_clamps(c->ruleset, &m, "new", 3, cl,
                                         &pass), 1);
    ck_assert_int_eq(cl[KR_API_PRODUCE].min, 3);
    ck_assert_int_eq(cl[KR_API_PRODUCE].max, 9);
    ck_assert(cl[KR_API_FETCH].min > cl[KR_API_FETCH].max);
    kr_conf_free(c);
}
END_TEST

/* kr_rule_print's text for the rules of text (caller frees). */
static char *
printed(const char *text)
{
    struct kr_conf *c = load_ok(text);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    ck_assert_ptr_nonnull(f);
    kr_rule_print(c->ruleset, f);
    fclose(f);
    kr_conf_free(c);
    return out;
}

#define HAS(out, s) ck_assert_msg(strstr((out), (s)) != NULL, \
                                  "want \"%s\" in:\n%s", (s), (out))
#define HAS_NOT(out, s) ck_assert_msg(strstr((out), (s)) == NULL, \
                                      "\"%s\" in:\n%s", (s), (out))

/* issue 14: the table names APIs, errors, acks and codecs as written */
START_TEST(test_print)
{
    char *out = printed(BASE "[rule old]\napi = Produce\n"
                        "clamp_max_version = 7\n");

    HAS(out, "rule 1 [rule old] (line 9):\n  match: api=Produce "
             "direction=both\n  actions: clamp(0-7)\n");
    HAS(out, "\n  Produce v8-13: old / -\n");
    HAS_NOT(out, "Produce v0");
    HAS(out, "\n6 (ApiKey, ApiVersion) slots have rules\n");
    free(out);

    out = printed(BASE "[rule adm]\napi = CreateTopics, 20\n"
                  "versions = 7\ndeny = true\n"
                  "deny_error = cluster_authorization_failed\n"
                  "[rule num]\napi = Fetch\ndeny = true\n"
                  "deny_error = 29\n"
                  "[rule dflt]\napi = Metadata\ndeny = true\n"
                  "[rule pol]\napi = Produce\nallowed_acks = 1, -1\n"
                  "allowed_compression = zstd, NONE\n"
                  "fault_error = 6\nfault_error_probability = 0.5\n"
                  "[rule acks]\napi = Produce\nallowed_acks = 0\n");
    HAS(out, "  match: api=CreateTopics,DeleteTopics versions=7-7 "
             "direction=both\n  actions: deny(CLUSTER_AUTHORIZATION_FAILED)"
             "\n");
    HAS(out, "  actions: deny(TOPIC_AUTHORIZATION_FAILED)\n");
    HAS(out, "  actions: deny(the API's default error)\n");
    HAS(out, "  actions: policy(allowed_acks = all,1, allowed_compression = "
             "none,zstd) fault_error(NOT_LEADER_OR_FOLLOWER, p=0.5)\n");
    HAS(out, "  actions: policy(allowed_acks = 0)\n");
    /* one version of one API: "slot has" */
    HAS(out, "\n  CreateTopics v7: adm / -\n");
    HAS(out, "\n  Fetch v0-18: num / -\n");
    HAS_NOT(out, "(19)");
    HAS_NOT(out, "mask");
    HAS_NOT(out, "error 31");
    free(out);

    out = printed(BASE "[rule one]\napi = CreateTopics\nversions = 7\n"
                  "deny = true\n");
    HAS(out, "\n1 (ApiKey, ApiVersion) slot has rules\n");
    free(out);
}
END_TEST

/*
 * issue 13: what the rules decide about a request krelay cannot decode,
 * from its header alone.
 */
START_TEST(test_gate)
{
    struct kr_conf *c = load_ok(BASE "[audit]\ntarget = syslog\n"
        "[rule aud]\naudit = true\n"                       /* 0 */
        "[rule evil]\nclient_id = evil*\ndeny = true\n"    /* 1 */
        "[rule nodel]\napi = DeleteTopics\nversions = 0-8\n"
        "deny = true\n"                                    /* 2 */
        "[rule sec]\napi = Produce\ntopic = secret-*\n"
        "deny = true\n"                                    /* 3 */
        "[rule old]\napi = Fetch\nclamp_max_version = 20\n" /* 4 */
        "[rule thr]\nlistener = b\napi = Metadata\n"
        "throttle_ms = 10\nthrottle_mode = enforce\n");    /* 5 */
    const struct kr_ruleset *rs = c->ruleset;
    struct kr_rule_mask ma, mb;
    struct kr_gate_result g;
    int16_t dt = kr_apis[KR_API_DELETE_TOPICS].valid.hi + 1;
    int16_t pr = kr_apis[KR_API_PRODUCE].valid.hi + 1;
    int16_t fe = kr_apis[KR_API_FETCH].valid.hi + 1;
    int16_t md = kr_apis[KR_API_METADATA].valid.hi + 1;
    bool *enf = calloc((size_t)kr_api_max + 1, sizeof(*enf));

    ck_assert_ptr_nonnull(enf);
    kr_rule_conn_mask(rs, "a", NULL, NULL, &ma);
    kr_rule_conn_mask(rs, "b", NULL, NULL, &mb);

    /* a deny on the API, whatever the ClientId */
    kr_rule_gate(rs, &ma, KR_API_DELETE_TOPICS, dt, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    ck_assert_int_eq(g.rule, 2);
    ck_assert(g.audit);
    /* a ClientId rule matches on the request's own ClientId, whole */
    kr_rule_gate(rs, &ma, 1000, 0, "evil-corp", 9, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    ck_assert_int_eq(g.rule, 1);
    kr_rule_gate(rs, &ma, 1000, 0, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_OBSERVE);
    ck_assert_int_eq(g.rule, 0);
    kr_rule_gate(rs, &ma, 1000, 0, NULL, 0, &g);    /* null ClientId */
    ck_assert_int_eq(g.gate, KR_GATE_OBSERVE);
    /* a topic rule cannot be checked without the body: it could match */
    kr_rule_gate(rs, &ma, KR_API_PRODUCE, pr, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    ck_assert_int_eq(g.rule, 3);
    /* a clamp enforces only outside it: v19 and v20 are inside 0-20 */
    kr_rule_gate(rs, &ma, KR_API_FETCH, fe, "good", 4, &g);
    ck_assert_int_eq(g.gate, fe > 20 ? KR_GATE_REFUSE : KR_GATE_OBSERVE);
    kr_rule_gate(rs, &ma, KR_API_FETCH, 21, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    ck_assert_int_eq(g.rule, 4);
    /* throttle enforce is enforcing, on its listener only */
    kr_rule_gate(rs, &mb, KR_API_METADATA, md, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    ck_assert_int_eq(g.rule, 5);
    ck_assert(g.throttle_enforce);
    ck_assert_int_eq(g.throttle_ms, 10);
    kr_rule_gate(rs, &ma, KR_API_METADATA, md, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_OBSERVE);
    ck_assert(!g.throttle_enforce);

    /* ApiVersions: what to cap, for ClientId good and evil */
    ck_assert(!kr_rule_conn_enforced(rs, &ma, "good", 4, enf));
    ck_assert(enf[KR_API_DELETE_TOPICS]);
    ck_assert(enf[KR_API_PRODUCE]);
    ck_assert(!enf[KR_API_METADATA]);
    ck_assert(!enf[KR_API_HEARTBEAT]);
    /* Fetch v21+ is outside the clamp: capped although v19, v20 pass */
    ck_assert(enf[KR_API_FETCH]);
    ck_assert(kr_rule_conn_enforced(rs, &ma, "evil", 4, enf));
    ck_assert(enf[KR_API_HEARTBEAT]);
    ck_assert(!kr_rule_conn_enforced(rs, &mb, "good", 4, enf));
    ck_assert(enf[KR_API_METADATA]);

    ck_assert(kr_rule_enforces(&c->rules[1]));
    ck_assert(kr_rule_enforces(&c->rules[4]));
    ck_assert(kr_rule_enforces(&c->rules[5]));
    ck_assert(!kr_rule_enforces(&c->rules[0]));

    /* a negative ApiVersion is no version: every range could hold it */
    kr_rule_gate(rs, &ma, KR_API_DELETE_TOPICS, -1, "good", 4, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    kr_rule_gate(rs, &ma, KR_API_METADATA, -5, "evil-x", 6, &g);
    ck_assert_int_eq(g.gate, KR_GATE_REFUSE);
    ck_assert_int_eq(g.rule, 1);
    free(enf);
    kr_conf_free(c);

    /* a deny on versions far above the tables still caps the API */
    c = load_ok(BASE "[rule d]\napi = DeleteTopics\nversions = 8-9\n"
                "deny = true\n"
                "[rule c]\napi = Fetch\nversions = 19-25\n"
                "clamp_max_version = 25\n");
    enf = calloc((size_t)kr_api_max + 1, sizeof(*enf));
    ck_assert_ptr_nonnull(enf);
    kr_rule_conn_mask(c->ruleset, "a", NULL, NULL, &ma);
    ck_assert(!kr_rule_conn_enforced(c->ruleset, &ma, NULL, 0, enf));
    ck_assert(enf[KR_API_DELETE_TOPICS]);
    ck_assert(!enf[KR_API_FETCH]);          /* 19-25 are all inside */
    free(enf);
    enf = NULL;
    kr_conf_free(c);

    /* no enforcing rule at all: everything may pass */
    c = load_ok(BASE "[audit]\ntarget = syslog\n"
                "[rule aud]\napi = Produce\naudit = true\n");
    kr_rule_conn_mask(c->ruleset, "a", NULL, NULL, &ma);
    kr_rule_gate(c->ruleset, &ma, 1000, 3, "x", 1, &g);
    ck_assert_int_eq(g.gate, KR_GATE_PASS);
    ck_assert_int_eq(g.rule, -1);
    kr_rule_gate(c->ruleset, &ma, KR_API_PRODUCE, pr, "x", 1, &g);
    ck_assert_int_eq(g.gate, KR_GATE_OBSERVE);
    kr_conf_free(c);
}
END_TEST

/* issue 13: a topic deny meets a TopicId krelay has not learned */
START_TEST(test_eval_unknown_topic_id)
{
    struct kr_conf *c = load_ok(BASE "[audit]\ntarget = syslog\n"
        "[rule aud]\napi = Fetch\ntopic = other\naudit = true\n"
        "[rule sec]\napi = Fetch\ntopic = secret-*\ndeny = true\n");
    const struct kr_ruleset *rs = c->ruleset;
    static const uint8_t id[16] = { 1, 2, 3, 4, 5, 6, 7, 8,
                                    9, 10, 11, 12, 13, 14, 15, 16 };
    struct kr_topic_map *map = kr_topic_map_new();
    const struct kr_rule_slot *sl;
    struct kr_rule_mask m;
    struct kr_arena a;
    struct kr_msg req;
    struct kr_verdict v;

    ck_assert_ptr_nonnull(map);
    kr_arena_init(&a, 0);
    kr_rule_conn_mask(rs, "a", NULL, NULL, &m);
    sl = kr_rule_lookup(rs, KR_API_FETCH, 13, &m);
    ck_assert_ptr_nonnull(sl);
    build_req(&a, "{\"header\":{\"RequestApiKey\":1,\"RequestApiVersion\":"
              "13,\"CorrelationId\":3,\"ClientId\":\"c\"},\"body\":{"
              "\"Topics\":[{\"TopicId\":\"AQIDBAUGBwgJCgsMDQ4PEA\","
              "\"Partitions\":[{\"Partition\":0}]}]}}", &req);
    ck_assert_uint_eq(kr_topics_unresolved(&req, map), 1);
    /* unknown: the deny cannot be checked, so it fails closed */
    ck_assert(kr_rule_eval(rs, sl, &m, &req, map, &v));
    ck_assert_uint_eq(v.flags & KR_VF_UNKNOWN_TOPIC_ID,
                      KR_VF_UNKNOWN_TOPIC_ID);
    ck_assert_int_eq(v.deny_rule, 1);
    ck_assert(!(v.flags & KR_VF_AUDIT));        /* observing: no match */
    /* learned as a public topic: passes; as a secret one: denied */
    ck_assert(kr_topic_map_put(map, id, "public", 6));
    ck_assert_uint_eq(kr_topics_unresolved(&req, map), 0);
    ck_assert(!kr_rule_eval(rs, sl, &m, &req, map, &v));
    ck_assert_uint_eq(v.flags, 0);
    ck_assert(kr_topic_map_put(map, id, "secret-1", 8));
    ck_assert(kr_rule_eval(rs, sl, &m, &req, map, &v));
    ck_assert_uint_eq(v.flags & (KR_VF_DENY | KR_VF_UNKNOWN_TOPIC_ID),
                      KR_VF_DENY);
    kr_topic_map_free(map);
    kr_arena_free(&a);
    kr_conf_free(c);
}
END_TEST

/* issue 13: `krelay -t` says where pass_unknown_apis has no effect */
START_TEST(test_warnings)
{
    struct kr_conf *c = load_ok(BASE
        "[rule c]\napi = Produce\nclamp_max_version = 7\n"
        "pass_unknown_apis = true\n"
        "[rule d]\nlistener = a\nclient_id = evil\ndeny = true\n");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(kr_rule_warnings(c->ruleset, f), 1);
    fclose(f);
    ck_assert_str_eq(out, "t.ini:9: [rule c]: pass_unknown_apis "
                     "has no effect on connections [rule d] (line 13) could "
                     "match: an enforcing rule without `api` covers ApiKeys "
                     "krelay cannot decode, so they are left out of "
                     "ApiVersions and refused\n");
    free(out);
    kr_conf_free(c);
    /* on another listener, or with `api`, the deny cannot interfere */
    c = load_ok(BASE
        "[rule c]\nlistener = b\napi = Produce\nclamp_max_version = 7\n"
        "pass_unknown_apis = true\n"
        "[rule d]\nlistener = a\nclient_id = evil\ndeny = true\n"
        "[rule e]\napi = Fetch\ndeny = true\n");
    f = fopen("/dev/null", "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(kr_rule_warnings(c->ruleset, f), 0);
    fclose(f);
    kr_conf_free(c);
}
END_TEST

/* Every warning of text's config, as kr_rule_warnings writes them. */
static char *
warnings_of(const char *text, unsigned *n)
{
    struct kr_conf *c;
    char *errs = NULL, *out = NULL;
    size_t len = 0;
    FILE *f;

    /* a warning never fails the load: no error, the config is there */
    ck_assert_int_eq(load(text, &c, &errs), KR_OK);
    ck_assert_str_eq(errs, "");
    free(errs);
    f = open_memstream(&out, &len);
    ck_assert_ptr_nonnull(f);
    *n = kr_rule_warnings(c->ruleset, f);
    fclose(f);
    ck_assert_uint_ge(*n, (unsigned)c->nwarnings);
    kr_conf_free(c);
    return out;
}

/*
 * issue 14: a clamp_max_version below the lowest version Kafka 4 accepts
 * (4.3.1's, JoinGroup 4.0.0's) warns once per API, at the key's line.
 */
START_TEST(test_warn_clamp_kafka4)
{
    unsigned n;
    char *out;

    /* lines: 9 [rule old], 10 api, 11 clamp_max_version */
    out = warnings_of(BASE "[rule old]\n"
                      "api = Produce, Fetch, Metadata, JoinGroup, "
                      "LeaderAndIsr\nclamp_max_version = 2\n", &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(out,
        "t.ini:11: [rule old]: clamp_max_version 2 is below the lowest "
        "Produce version Kafka 4 accepts (3, per the 4.3.1 schemas): "
        "clients that follow the clamp are left Produce v0-2, which Kafka 4 "
        "brokers refuse, so against Kafka 4 they cannot use Produce at "
        "all\n"
        "t.ini:11: [rule old]: clamp_max_version 2 is below the lowest "
        "Fetch version Kafka 4 accepts (4, per the 4.3.1 schemas): clients "
        "that follow the clamp are left Fetch v0-2, which Kafka 4 brokers "
        "refuse, so against Kafka 4 they cannot use Fetch at all\n");
    free(out);

    /* JoinGroup: 4.3.1 takes v0, 4.0.0 did not take v0-1 */
    out = warnings_of(BASE "[rule jg]\napi = JoinGroup\n"
                      "clamp_min_version = 1\nclamp_max_version = 1\n", &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(out,
        "t.ini:12: [rule jg]: clamp_max_version 1 is below the lowest "
        "JoinGroup version Kafka 4.0.0 accepts (2; 4.0.1 and later accept "
        "lower ones again): clients that follow the clamp are left "
        "JoinGroup v1, which Kafka 4.0.0 brokers refuse, so against Kafka "
        "4.0.0 they cannot use JoinGroup at all\n");
    free(out);

    /* at or above the minimum, clamp_min_version only, or no Kafka 4
       version at all (LeaderAndIsr): quiet */
    out = warnings_of(BASE "[rule a]\napi = Produce\nclamp_max_version = 3\n"
                      "[rule b]\napi = Fetch\nclamp_max_version = 4\n"
                      "[rule c]\napi = JoinGroup\nclamp_max_version = 2\n"
                      "[rule d]\napi = Produce, Fetch\n"
                      "clamp_min_version = 0\n"
                      "[rule e]\napi = LeaderAndIsr, Metadata\n"
                      "clamp_max_version = 0\n", &n);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(out, "");
    free(out);
}
END_TEST

/* The config is refused with exactly the errors want (whole text). */
static void
expect_errors_exactly(const char *text, const char *want)
{
    struct kr_conf *c;
    char *errs = NULL;
    int rc = load(text, &c, &errs);

    ck_assert_int_eq(rc, KR_ERROR);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(errs, want);
    free(errs);
}

/*
 * Two upstreams: u1 with broker_profile (line 3), u2 without; listener a
 * on u1 (translate_legacy tl_a, line 8), listener b on u2 (tl_b, line
 * 13).  16 lines with the blank one: a rule section starts at line 17.
 */
#define PROFILE_BASE(profile, tl_a, tl_b)                                    \
    "[upstream u1]\nbootstrap_servers = 127.0.0.1:9092\n"                    \
    "broker_profile = " profile "\n"                                         \
    "[upstream u2]\nbootstrap_servers = 127.0.0.1:9093\n"                    \
    "[listener a]\nlisten = 127.0.0.1:29092\n"                               \
    "translate_legacy = " tl_a "\n"                                          \
    "broker_port_base = 29100\nupstream = u1\n"                              \
    "[listener b]\nlisten = 127.0.0.1:39092\n"                               \
    "translate_legacy = " tl_b "\n"                                          \
    "broker_port_base = 39100\nupstream = u2\n\n"

/*
 * issue 10: with broker_profile, a clamp below the profile's minimum is
 * an error unless translate_legacy covers it on the listener; without one
 * the Kafka 4 warning stays, unless translation covers the versions.
 */
START_TEST(test_clamp_profile)
{
    unsigned n;
    char *out;

    /* no profile: a warning per API without translation, none with it
       on every listener */
    out = warnings_of(PROFILE_BASE("learned", "false", "false")
                      "[rule old]\napi = Produce, Fetch, JoinGroup\n"
                      "clamp_max_version = 1\n", &n);
    ck_assert_uint_eq(n, 3);
    free(out);
    out = warnings_of(PROFILE_BASE("learned", "true", "true")
                      "[rule old]\napi = Produce, Fetch, JoinGroup\n"
                      "clamp_max_version = 1\n", &n);
    ck_assert_msg(n == 0, "%s", out);
    free(out);
    /* on a alone: the rule on both listeners warns, the rule on a does
       not (line 19: clamp_max_version) */
    out = warnings_of(PROFILE_BASE("learned", "true", "false")
                      "[rule old]\napi = Fetch\nclamp_max_version = 2\n"
                      "[rule olda]\nlistener = a\napi = Fetch\n"
                      "clamp_max_version = 2\n", &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(out,
        "t.ini:19: [rule old]: clamp_max_version 2 is below the lowest "
        "Fetch version Kafka 4 accepts (4, per the 4.3.1 schemas): clients "
        "that follow the clamp are left Fetch v0-2, which Kafka 4 brokers "
        "refuse, so against Kafka 4 they cannot use Fetch at all\n");
    free(out);

    /* a profile (u1, listener a) without translation: an error, and
       nothing of the warning for b's u2 */
    expect_errors_exactly(PROFILE_BASE("kafka-4.0.1+", "false", "false")
                          "[rule old]\napi = Fetch\nclamp_min_version = 1\n"
                          "clamp_max_version = 3\n",
        "t.ini:20: [rule old]: clamp_max_version 3 is below the lowest Fetch "
        "version the brokers of [upstream u1] accept (broker_profile = "
        "kafka-4.0.1+: 4): clients of [listener a] that follow the clamp "
        "are left Fetch v1-3, which those brokers refuse; set "
        "translate_legacy = true there (krelay translates them up) or raise "
        "the clamp\n");
    /* ... and with translation on a: loads, and b (no profile, no
       translation) warns */
    out = warnings_of(PROFILE_BASE("kafka-4.0.1+", "true", "false")
                      "[rule old]\napi = Fetch\nclamp_max_version = 3\n", &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_ptr_nonnull(strstr(out, "t.ini:19: [rule old]: "
                                      "clamp_max_version 3 is below the "
                                      "lowest Fetch version Kafka 4 "
                                      "accepts"));
    free(out);
    out = warnings_of(PROFILE_BASE("kafka-4.0.1+", "true", "false")
                      "[rule old]\nlistener = a\napi = Produce, Fetch, "
                      "ListOffsets, OffsetCommit\nclamp_max_version = 0\n",
                      &n);
    ck_assert_msg(n == 0, "%s", out);
    free(out);

    /* versions krelay does not translate: an error, translation or not */
    expect_errors_exactly(PROFILE_BASE("kafka-4.0.0", "true", "false")
                          "[rule logs]\nlistener = a\napi = DescribeLogDirs\n"
                          "clamp_max_version = 0\n",
        "t.ini:20: [rule logs]: clamp_max_version 0 is below the lowest "
        "DescribeLogDirs version the brokers of [upstream u1] accept "
        "(broker_profile = kafka-4.0.0: 1): clients of [listener a] that "
        "follow the clamp are left DescribeLogDirs v0, which those brokers "
        "refuse; krelay does not translate them: raise the clamp\n");

    /* JoinGroup v0-1: 4.0.0 refuses them, 4.0.1+ takes them */
    expect_errors_exactly(PROFILE_BASE("kafka-4.0.0", "false", "false")
                          "[rule jg]\nlistener = a\napi = JoinGroup\n"
                          "clamp_max_version = 1\n",
        "t.ini:20: [rule jg]: clamp_max_version 1 is below the lowest "
        "JoinGroup version the brokers of [upstream u1] accept "
        "(broker_profile = kafka-4.0.0: 2): clients of [listener a] that "
        "follow the clamp are left JoinGroup v0-1, which those brokers "
        "refuse; set translate_legacy = true there (krelay translates them "
        "up) or raise the clamp\n");
    out = warnings_of(PROFILE_BASE("kafka-4.0.1+", "false", "false")
                      "[rule jg]\nlistener = a\napi = JoinGroup\n"
                      "clamp_max_version = 1\n", &n);
    ck_assert_msg(n == 0, "%s", out);
    free(out);
    out = warnings_of(PROFILE_BASE("kafka-4.0.0", "true", "false")
                      "[rule jg]\nlistener = a\napi = JoinGroup\n"
                      "clamp_max_version = 1\n", &n);
    ck_assert_msg(n == 0, "%s", out);
    free(out);
}
END_TEST

/* issue 14 warned of rules on principal where no listener had
   ssl_client_ca; since issue 9 (SASL passthrough) every listener gives
   principals: none warns */
START_TEST(test_warn_principal)
{
    unsigned n;
    char *out;

    out = warnings_of(BASE "[rule who]\ndeny = true\n"
                      "principal = User:bob, User:al*\n", &n);
    ck_assert_msg(n == 0, "%s", out);
    free(out);
    out = warnings_of(BASE "[rule who]\nlistener = b\n"
                      "principal = User:bob\nthrottle_ms = 5\n", &n);
    ck_assert_msg(n == 0, "%s", out);
    free(out);
}
END_TEST

/* The loader's warnings come first, then the rule table's, file order. */
START_TEST(test_warn_order)
{
    unsigned n;
    char *out;
    const char *l2, *l3;

    out = warnings_of("[upstream]\nbootstrap_servers = 127.0.0.1:9092\n"
                      "[listener]\nlisten = 0.0.0.0:29092\n"
                      "broker_port_base = 29100\n"
                      "[rule c]\napi = Produce\nclamp_max_version = 2\n"
                      "pass_unknown_apis = true\n"
                      "[rule d]\ndeny = true\n", &n);
    ck_assert_uint_eq(n, 3 + 1);
    ck_assert_msg(strncmp(out, "t.ini:4: [listener]: listen = 0.0.0.0:29092"
                          " is a wildcard", 42) == 0, "%s", out);
    l2 = strchr(out, '\n') + 1;
    ck_assert_msg(strncmp(l2, "t.ini:8: [rule c]: clamp_max_version 2", 38)
                  == 0, "%s", out);
    l3 = strchr(l2, '\n') + 1;
    ck_assert_msg(strncmp(l3, "t.ini:11: [rule d]: deny = true with no", 38)
                  == 0, "%s", out);
    ck_assert_msg(strstr(strchr(l3, '\n') + 1, "t.ini:6: [rule c]: "
                         "pass_unknown_apis has no effect") != NULL,
                  "%s", out);
    free(out);
}
END_TEST

static Suite *
rule_suite(void)
{
    Suite *s = suite_create("rule");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_glob);
    tcase_add_test(tc, test_cidr);
    tcase_add_test(tc, test_conf_values);
    tcase_add_test(tc, test_conf_errors);
    tcase_add_test(tc, test_conf_refusals);
    tcase_add_test(tc, test_conf_dump_roundtrip);
    tcase_add_test(tc, test_lookup_clamp_only);
    tcase_add_test(tc, test_conn_mask);
    tcase_add_test(tc, test_conn_mask_unknown);
    tcase_add_test(tc, test_eval_topics_deny);
    tcase_add_test(tc, test_eval_precedence);
    tcase_add_test(tc, test_eval_audit_body_any);
    tcase_add_test(tc, test_conn_clamps);
    tcase_add_test(tc, test_print);
    tcase_add_test(tc, test_gate);
    tcase_add_test(tc, test_warnings);
    tcase_add_test(tc, test_warn_clamp_kafka4);
    tcase_add_test(tc, test_clamp_profile);
    tcase_add_test(tc, test_warn_principal);
    tcase_add_test(tc, test_warn_order);
    tcase_add_test(tc, test_eval_unknown_topic_id);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(rule_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
