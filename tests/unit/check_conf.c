/*
 * check_conf.c - kr_conf (the INI loader), kr_log and kr_kerr.
 *
 * Config errors are compared with their exact "FILE:LINE: " prefix: the
 * loader counts lines itself because Debian's inih does not pass them.
 * conf/krelay.ini is found through $top_srcdir (AM_TESTS_ENVIRONMENT).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "kr_broker_versions.h"
#include "kr_conf.h"
#include "kr_sasl_server.h"
#include "kr_sasl_users.h"
#include "kr_sni.h"
#include "kr_test_certs.h"
#include "kr_tls_ctx.h"
#include "kr_kerr.h"
#include "kr_log.h"
#include "kr_principal.h"

/* ---- helpers ------------------------------------------------------------ */

/* Load text as "t.ini"; *errs gets every message (caller frees). */
static int
load(const char *text, struct kr_conf **out, char **errs)
{
    size_t len = 0;
    FILE *f = open_memstream(errs, &len);
    int rc;

    ck_assert_ptr_nonnull(f);
    *out = NULL;
    rc = kr_conf_load_string(text, "t.ini", f, out);
    fclose(f);
    return rc;
}

static int
count_lines(const char *s)
{
    int n = 0;

    for (; *s != '\0'; s++) {
        n += *s == '\n';
    }
    return n;
}

/* The config must fail with exactly one error, which contains want. */
static void
expect_one_error(const char *text, const char *want)
{
    struct kr_conf *c;
    char *errs = NULL;
    int rc = load(text, &c, &errs);

    ck_assert_int_eq(rc, KR_ERROR);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(errs, want) != NULL, "want \"%s\" in \"%s\"", want,
                  errs);
    ck_assert_msg(count_lines(errs) == 1, "want one error, got \"%s\"",
                  errs);
    free(errs);
}

static struct kr_conf *
load_ok(const char *text)
{
    struct kr_conf *c;
    char *errs = NULL;
    int rc = load(text, &c, &errs);

    ck_assert_msg(rc == KR_OK, "unexpected errors: %s", errs);
    ck_assert_str_eq(errs, "");
    ck_assert_ptr_nonnull(c);
    free(errs);
    return c;
}

#define MIN_UPSTREAM "[upstream]\nbootstrap_servers = k1:9092\n"
#define MIN_LISTENER "[listener]\nlisten = 127.0.0.1:19092\n" \
                     "broker_port_base = 19100\n"

/* ---- valid configurations ----------------------------------------------- */

static const char full_conf[] =
    "; a full config\n"                                     /* 1 */
    "[upstream east]\n"                                     /* 2 */
    "bootstrap_servers = k1:9092, 10.0.0.2:9093,[::1]:9094\n" /* 3 */
    "connect_timeout_ms = 2500\n"                           /* 4 */
    "request_timeout_margin_ms = 0\n"                       /* 5 */
    "metadata_refresh_ms = 60000\n"                         /* 6 */
    "dial.1 = 10.1.1.1:9092\n"                              /* 7 */
    "dial.1001 = [fd00::1]:9092\n"                          /* 8 */
    "\n"                                                    /* 9 */
    "[upstream west]\n"                                     /* 10 */
    "bootstrap_servers = w1.example.com:9092\n"             /* 11 */
    "\n"                                                    /* 12 */
    "# listeners\n"                                         /* 13 */
    "[listener a]\n"                                        /* 14 */
    "listen = 0.0.0.0:19092\n"                              /* 15 */
    "advertised_host = proxy.example.com\n"                 /* 16 */
    "broker_port_base = 19100\n"                            /* 17 */
    "node_id_min = 1\n"                                     /* 18 */
    "node_id_max = 3\n"                                     /* 19 */
    "upstream = east\n"                                     /* 20 */
    "max_frame_bytes = 1048576\n"                           /* 21 */
    "max_inflight = 5\n"                                    /* 22 */
    "max_buffer_bytes = 65536\n"                            /* 23 */
    "max_connections = 7\n"                                 /* 24 */
    "idle_timeout_ms = 0\n"                                 /* 25 */
    "[listener b]\n"                                        /* 26 */
    "listen = [::1]:29092\n"                                /* 27 */
    "broker_port_base = 29000\n"                            /* 28 */
    "upstream = west ; inline comment\n"                    /* 29 */
    "tcp_nodelay = false\n"                                 /* 30 */
    "[log]\n"                                               /* 31 */
    "level = debug\n"                                       /* 32 */
    "target = /var/log/krelay.log\n";                       /* 33 */

/* lines: whether section lines are those of full_conf (not of a dump) */
static void
check_full(const struct kr_conf *c, bool lines)
{
    const struct kr_upstream_conf *e, *w;
    const struct kr_listener_conf *a, *b;

    ck_assert_int_eq(c->nupstreams, 2);
    ck_assert_int_eq(c->nlisteners, 2);
    e = &c->upstreams[0];
    w = &c->upstreams[1];
    ck_assert_str_eq(e->name, "east");
    if (lines) {
        ck_assert_int_eq(e->line, 2);
        ck_assert_int_eq(c->listeners[0].line, 14);
    }
    ck_assert_int_eq(e->nbootstrap, 3);
    ck_assert_str_eq(e->bootstrap[0].host, "k1");
    ck_assert_uint_eq(e->bootstrap[0].port, 9092);
    ck_assert_str_eq(e->bootstrap[1].host, "10.0.0.2");
    ck_assert_uint_eq(e->bootstrap[1].port, 9093);
    ck_assert_str_eq(e->bootstrap[2].host, "::1");
    ck_assert_uint_eq(e->bootstrap[2].port, 9094);
    ck_assert_int_eq(e->connect_timeout_ms, 2500);
    ck_assert_int_eq(e->request_timeout_margin_ms, 0);
    ck_assert_int_eq(e->metadata_refresh_ms, 60000);
    ck_assert_int_eq(e->ndial, 2);
    ck_assert_int_eq(e->dial[0].node_id, 1);
    ck_assert_str_eq(e->dial[0].addr.host, "10.1.1.1");
    ck_assert_uint_eq(e->dial[0].addr.port, 9092);
    ck_assert_int_eq(e->dial[1].node_id, 1001);
    ck_assert_str_eq(e->dial[1].addr.host, "fd00::1");
    ck_assert_str_eq(w->name, "west");
    ck_assert_int_eq(w->nbootstrap, 1);
    ck_assert_str_eq(w->bootstrap[0].host, "w1.example.com");
    ck_assert_int_eq(w->ndial, 0);

    a = &c->listeners[0];
    b = &c->listeners[1];
    ck_assert_str_eq(a->name, "a");
    ck_assert_str_eq(a->listen.host, "0.0.0.0");
    ck_assert_uint_eq(a->listen.port, 19092);
    ck_assert_str_eq(a->advertised_host, "proxy.example.com");
    ck_assert_uint_eq(a->broker_port_base, 19100);
    ck_assert_int_eq(a->node_id_min, 1);
    ck_assert_int_eq(a->node_id_max, 3);
    ck_assert_str_eq(a->upstream, "east");
    ck_assert_ptr_eq(a->up, e);
    ck_assert_int_eq(a->max_frame_bytes, 1048576);
    ck_assert_int_eq(a->max_inflight, 5);
    ck_assert_int_eq(a->max_buffer_bytes, 65536);
    ck_assert_int_eq(a->max_connections, 7);
    ck_assert_int_eq(a->idle_timeout_ms, 0);
    ck_assert(a->tcp_nodelay);
    ck_assert(!b->tcp_nodelay);
    ck_assert_str_eq(b->name, "b");
    ck_assert_str_eq(b->listen.host, "::1");
    ck_assert_uint_eq(b->listen.port, 29092);
    ck_assert_str_eq(b->advertised_host, "::1");
    ck_assert_str_eq(b->upstream, "west");
    ck_assert_ptr_eq(b->up, w);

    ck_assert_int_eq(c->log.level, KR_LOG_DEBUG);
    ck_assert_str_eq(c->log.target, "/var/log/krelay.log");
}

START_TEST(test_full)
{
    struct kr_conf *c = load_ok(full_conf);

    ck_assert_str_eq(c->path, "t.ini");
    check_full(c, true);
    kr_conf_free(c);
}
END_TEST

START_TEST(test_defaults)
{
    struct kr_conf *c = load_ok(MIN_UPSTREAM
                                "[listener]\nlisten = 0.0.0.0:19092\n"
                                "broker_port_base = 19100\n");
    const struct kr_listener_conf *l = &c->listeners[0];
    const struct kr_upstream_conf *u = &c->upstreams[0];

    ck_assert_str_eq(l->name, "");
    ck_assert_str_eq(u->name, "");
    ck_assert_str_eq(l->advertised_host, "127.0.0.1");
    ck_assert_int_eq(l->node_id_min, 0);
    ck_assert_int_eq(l->node_id_max, 15);
    ck_assert_ptr_null(l->upstream);
    ck_assert_ptr_eq(l->up, u);
    ck_assert_int_eq(l->max_frame_bytes, 64 * 1024 * 1024);
    ck_assert_int_eq(l->max_inflight, 1000);
    ck_assert_int_eq(l->max_buffer_bytes, 4 * 1024 * 1024);
    ck_assert_int_eq(l->max_connections, 10000);
    ck_assert_int_eq(l->idle_timeout_ms, 600000);
    ck_assert(l->tcp_nodelay);
    ck_assert_int_eq(l->splice_min_bytes, 65536);
    ck_assert_int_eq(u->connect_timeout_ms, 10000);
    ck_assert_int_eq(u->request_timeout_margin_ms, 30000);
    ck_assert_int_eq(u->metadata_refresh_ms, 300000);
    ck_assert_int_eq(u->ndial, 0);
    ck_assert_ptr_null(u->dial);
    ck_assert_int_eq(c->log.level, KR_LOG_NOTICE);
    ck_assert_str_eq(c->log.target, "stderr");
    kr_conf_free(c);
}
END_TEST

/* advertised_host defaults to the listen host unless it is a wildcard. */
START_TEST(test_advertised_default)
{
    static const struct {
        const char *listen, *adv;
    } cases[] = {
        { "10.2.3.4:19092", "10.2.3.4" },
        { "proxy.local:19092", "proxy.local" },
        { "[fd00::5]:19092", "fd00::5" },
        { "0.0.0.0:19092", "127.0.0.1" },
        { "[::]:19092", "127.0.0.1" },
        { ":19092", "127.0.0.1" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[256];
        struct kr_conf *c;

        snprintf(text, sizeof(text), MIN_UPSTREAM "[listener]\nlisten = %s\n"
                 "broker_port_base = 19100\n", cases[i].listen);
        c = load_ok(text);
        ck_assert_str_eq(c->listeners[0].advertised_host, cases[i].adv);
        kr_conf_free(c);
    }
}
END_TEST

/* c's warnings as kr_conf_warnings writes them (caller frees). */
static char *
warnings_of(const struct kr_conf *c, unsigned *n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    ck_assert_ptr_nonnull(f);
    *n = kr_conf_warnings(c, f);
    fclose(f);
    return out;
}

/*
 * The operations issue: [admin].  A port alone listens on loopback; the
 * token comes from bearer_token_file's first line or bearer_token (which
 * warns), never both; the token is never dumped.
 */
START_TEST(test_admin_keys)
{
    char tf[] = "/tmp/check_conf_tok.XXXXXX", text[1024], *dump = NULL;
    struct kr_conf *c;
    size_t len = 0;
    FILE *f;
    unsigned n;
    char *w;
    int fd = mkstemp(tf);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "tok-one\nnext\n", 13), 13);
    close(fd);
    /* no [admin]: off */
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_ptr_null(c->admin.listen.host);
    ck_assert_ptr_null(c->admin.token);
    kr_conf_free(c);
    /* lines: 1 [upstream], 2 bootstrap, 3 [listener], 4 listen, 5 base,
       6 [admin], 7 listen, 8 bearer_token_file */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER "[admin]\n"
             "listen = :9644\nbearer_token_file = %s\n", tf);
    c = load_ok(text);
    ck_assert_str_eq(c->admin.listen.host, "127.0.0.1");
    ck_assert_uint_eq(c->admin.listen.port, 9644);
    ck_assert_int_eq(c->admin.listen_line, 7);
    ck_assert_str_eq(c->admin.token, "tok-one");
    ck_assert_int_eq(c->nwarnings, 0);
    f = open_memstream(&dump, &len);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(dump, "\n[admin]\nlisten = 127.0.0.1:9644\n"
                                       "bearer_token_file = "));
    ck_assert_ptr_null(strstr(dump, "tok-one"));
    free(dump);
    kr_conf_free(c);
    /* a token file others can read warns */
    ck_assert_int_eq(chmod(tf, 0644), 0);
    c = load_ok(text);
    w = warnings_of(c, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_ptr_nonnull(strstr(w, "t.ini:8: [admin]: bearer_token_file: "));
    ck_assert_ptr_nonnull(strstr(w, "a reader has the token of the admin "
                                    "endpoint"));
    free(w);
    kr_conf_free(c);
    /* inline: a warning, and never dumped */
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[admin]\nlisten = [::1]:9644\n"
                "bearer_token = inline-tok\n");
    ck_assert_str_eq(c->admin.listen.host, "::1");
    ck_assert_str_eq(c->admin.token, "inline-tok");
    w = warnings_of(c, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(w, "t.ini:8: [admin]: bearer_token: the token is in "
                        "the config file (bearer_token_file keeps it out of "
                        "it)\n");
    free(w);
    dump = NULL;
    f = open_memstream(&dump, &len);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(dump, "bearer_token = (not shown: a "
                                       "secret)\n"));
    ck_assert_ptr_null(strstr(dump, "inline-tok"));
    free(dump);
    kr_conf_free(c);
    /* mistakes: one error each */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER "[admin]\n"
             "listen = :9644\nbearer_token_file = %s\nbearer_token = x\n",
             tf);
    expect_one_error(text, "t.ini:9: [admin]: both bearer_token_file and "
                           "bearer_token are set: give one");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[admin]\n"
                     "bearer_token_file = /nonexistent/tok\nlisten = :1\n",
                     "t.ini:7: [admin]: bearer_token_file: cannot read "
                     "/nonexistent/tok: ");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[admin]\nbearer_token = x\n",
                     "'listen'");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[admin x]\nlisten = :1\n",
                     "[admin] takes no name");
    ck_assert_int_eq(unlink(tf), 0);
}
END_TEST

/*
 * issue 9: SASL origination keys.  The password file's first line is
 * loaded (CR LF cut), each mistake is one error at its line, an inline
 * secret warns, and no secret is ever dumped.
 */
START_TEST(test_sasl_keys)
{
    char pw[] = "/tmp/check_conf_pw.XXXXXX", text[1024], *dump = NULL;
    const struct kr_upstream_conf *u;
    struct kr_conf *c;
    size_t len = 0;
    FILE *f;
    unsigned n;
    char *w;
    int fd = mkstemp(pw);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "pw-one\r\nnext\n", 13), 13);
    close(fd);
    /* lines: 1 [upstream], 2 bootstrap, 3 mechanism, 4 user, 5 file */
    snprintf(text, sizeof(text), MIN_UPSTREAM "sasl_mechanism = "
             "SCRAM-SHA-512\nsasl_username = krelay\nsasl_password_file = "
             "%s\n" MIN_LISTENER, pw);
    c = load_ok(text);
    u = &c->upstreams[0];
    ck_assert_int_eq(u->sasl.mechanism, 3);
    ck_assert_str_eq(u->sasl.username, "krelay");
    ck_assert_uint_eq(u->sasl.secret_len, 6);
    ck_assert_str_eq(u->sasl.secret, "pw-one");
    ck_assert_int_eq(c->nwarnings, 0);
    kr_conf_free(c);
    /* a password file others can read: sasl_credentials' warning */
    ck_assert_int_eq(chmod(pw, 0644), 0);
    c = load_ok(text);
    w = warnings_of(c, &n);
    ck_assert_uint_eq(n, 1);
    snprintf(text + 600, sizeof(text) - 600, "t.ini:5: [upstream]: "
             "sasl_password_file: %s: mode 0644 lets group or others read "
             "or write it: a reader has the password krelay authenticates "
             "to the brokers with (chmod 600)\n", pw);
    ck_assert_str_eq(w, text + 600);
    free(w);
    kr_conf_free(c);
    /* the same for a token file and metadata_sasl_password_file */
    snprintf(text, sizeof(text), MIN_UPSTREAM "sasl_mechanism = "
             "OAUTHBEARER\nsasl_oauthbearer_token_file = %s\n" MIN_LISTENER,
             pw);
    c = load_ok(text);
    w = warnings_of(c, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(strstr(w, "t.ini:4: [upstream]: sasl_oauthbearer_token_"
                         "file: ") != NULL && strstr(w, "mode 0644 lets "
                         "group or others read or write it: a reader has "
                         "the token krelay authenticates to the brokers "
                         "with (chmod 600)\n") != NULL, "%s", w);
    free(w);
    kr_conf_free(c);
    snprintf(text, sizeof(text), MIN_UPSTREAM "metadata_sasl_mechanism = "
             "PLAIN\nmetadata_sasl_username = k\n"
             "metadata_sasl_password_file = %s\n" MIN_LISTENER, pw);
    c = load_ok(text);
    w = warnings_of(c, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(strstr(w, "t.ini:5: [upstream]: metadata_sasl_password_"
                         "file: ") == w && strstr(w, ": mode 0644 ") != NULL,
                  "%s", w);
    free(w);
    kr_conf_free(c);
    ck_assert_int_eq(chmod(pw, 0600), 0);
    snprintf(text, sizeof(text), MIN_UPSTREAM "sasl_mechanism = "
             "SCRAM-SHA-512\nsasl_username = krelay\nsasl_password_file = "
             "%s\n" MIN_LISTENER, pw);

    /* inline: loads, warns at its line, never dumped */
    c = load_ok(MIN_UPSTREAM "sasl_mechanism = PLAIN\nsasl_username = k\n"
                "sasl_password = inline-secret\n" MIN_LISTENER);
    ck_assert_str_eq(c->upstreams[0].sasl.secret, "inline-secret");
    w = warnings_of(c, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(w, "t.ini:5: [upstream]: sasl_password: the password "
                     "is in the config file (sasl_password_file keeps it "
                     "out of it)\n");
    free(w);
    f = open_memstream(&dump, &len);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_null(strstr(dump, "inline-secret"));
    ck_assert_ptr_nonnull(strstr(dump, "sasl_password = (not shown: a "
                                 "secret)"));
    ck_assert_ptr_nonnull(strstr(dump, "sasl_mechanism = PLAIN"));
    free(dump);
    kr_conf_free(c);

    expect_one_error(MIN_UPSTREAM "sasl_mechanism = PLAIN\n"
                     "sasl_password = p\n" MIN_LISTENER,
                     "t.ini:3: [upstream]: sasl_mechanism = PLAIN needs "
                     "sasl_username");
    expect_one_error(MIN_UPSTREAM "sasl_mechanism = SCRAM-SHA-256\n"
                     "sasl_username = k\n" MIN_LISTENER,
                     "t.ini:3: [upstream]: sasl_mechanism = SCRAM-SHA-256 "
                     "needs sasl_password_file (or sasl_password)");
    snprintf(text, sizeof(text), MIN_UPSTREAM "sasl_mechanism = PLAIN\n"
             "sasl_username = k\nsasl_password_file = %s\n"
             "sasl_password = p\n" MIN_LISTENER, pw);
    expect_one_error(text, "t.ini:6: [upstream]: both sasl_password_file "
                     "and sasl_password are set: give one");
    expect_one_error(MIN_UPSTREAM "sasl_mechanism = PLAIN\n"
                     "sasl_username = k\nsasl_password_file = "
                     "/nonexistent/pw\n" MIN_LISTENER,
                     "t.ini:5: [upstream]: sasl_password_file: cannot read "
                     "/nonexistent/pw: No such file or directory");
    expect_one_error(MIN_UPSTREAM "sasl_mechanism = OAUTHBEARER\n"
                     MIN_LISTENER, "t.ini:3: [upstream]: sasl_mechanism = "
                     "OAUTHBEARER needs sasl_oauthbearer_token_file (or "
                     "sasl_oauthbearer_token)");
    expect_one_error(MIN_UPSTREAM "sasl_mechanism = SCRAM-SHA512\n"
                     MIN_LISTENER, "t.ini:3: 'sasl_mechanism': bad value "
                     "'SCRAM-SHA512': expected PLAIN, SCRAM-SHA-256, "
                     "SCRAM-SHA-512 or OAUTHBEARER");
    expect_one_error(MIN_UPSTREAM "metadata_sasl_mechanism = OAUTHBEARER\n"
                     MIN_LISTENER, "t.ini:3: 'metadata_sasl_mechanism': "
                     "bad value 'OAUTHBEARER'");
    /* origination and a listener requiring the client's SASL: no client
       could authenticate (its SaslHandshake closes) */
    expect_one_error(MIN_UPSTREAM "sasl_mechanism = PLAIN\n"
                     "sasl_username = k\nsasl_password = p\n" MIN_LISTENER
                     "sasl = required\n", "t.ini:9: [listener]: sasl = "
                     "required, but krelay authenticates to its upstream "
                     "itself (sasl_mechanism): a client's SaslHandshake "
                     "closes its connection, so no client could ever "
                     "authenticate");
    /* an empty first line is no password */
    fd = open(pw, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "\nsecond\n", 8), 8);
    close(fd);
    snprintf(text, sizeof(text), MIN_UPSTREAM "metadata_sasl_mechanism = "
             "PLAIN\nmetadata_sasl_username = k\n"
             "metadata_sasl_password_file = %s\n" MIN_LISTENER, pw);
    snprintf(text + 600, sizeof(text) - 600, "t.ini:5: [upstream]: "
             "metadata_sasl_password_file: %s: its first line is empty", pw);
    expect_one_error(text, text + 600);
    unlink(pw);
}
END_TEST

/*
 * issue 14: a wildcard listen without advertised_host loads (errors
 * empty) with one warning at the listen line; no warning with an
 * advertised_host or a listen address of its own.
 */
START_TEST(test_warn_wildcard_listen)
{
    static const struct {
        const char *listen, *shown;
    } wild[] = {
        { "0.0.0.0:19092", "0.0.0.0:19092" },
        { "[::]:19092", "[::]:19092" },
        { "[0:0::0]:19092", "[0:0::0]:19092" },
        { ":19092", ":19092" },
        { "[::ffff:0.0.0.0]:19092", "[::ffff:0.0.0.0]:19092" },
        { "[::ffff:0:0]:19092", "[::ffff:0:0]:19092" },
    };
    static const char *const quiet[] = {
        "listen = 0.0.0.0:19092\nadvertised_host = proxy.example.com\n",
        "listen = [::]:19092\nadvertised_host = [fd00::7]\n",
        "listen = 10.1.2.3:19092\n",
        "listen = [::1]:19092\n",
        "listen = [::ffff:10.1.2.3]:19092\n",
    };
    size_t i;

    for (i = 0; i < sizeof(wild) / sizeof(wild[0]); i++) {
        char text[256], want[512];
        struct kr_conf *c;
        unsigned n;
        char *w;

        /* line 3 [listener x], 4 broker_port_base, 5 listen */
        snprintf(text, sizeof(text), MIN_UPSTREAM "[listener x]\n"
                 "broker_port_base = 19100\nlisten = %s\n", wild[i].listen);
        c = load_ok(text);
        ck_assert_str_eq(c->listeners[0].advertised_host, "127.0.0.1");
        ck_assert_int_eq(c->nwarnings, 1);
        ck_assert_int_eq(c->warnings[0].line, 5);
        w = warnings_of(c, &n);
        ck_assert_uint_eq(n, 1);
        snprintf(want, sizeof(want), "t.ini:5: [listener x]: listen = %s "
                 "is a wildcard address and there is no advertised_host: "
                 "krelay tells every client that the brokers are at "
                 "127.0.0.1, so clients on other machines cannot connect "
                 "(set advertised_host to the name or address they reach "
                 "this host by)\n", wild[i].shown);
        ck_assert_str_eq(w, want);
        free(w);
        kr_conf_free(c);
    }
    for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
        char text[256];
        struct kr_conf *c;
        unsigned n;
        char *w;

        snprintf(text, sizeof(text), MIN_UPSTREAM "[listener]\n%s"
                 "broker_port_base = 19100\n", quiet[i]);
        c = load_ok(text);
        w = warnings_of(c, &n);
        ck_assert_msg(n == 0 && c->nwarnings == 0, "%s: %s", quiet[i], w);
        ck_assert_str_eq(w, "");
        free(w);
        kr_conf_free(c);
    }
}
END_TEST

/*
 * [log] and [audit] target = syslog warn, naming what is lost, when
 * there is no syslog socket (kr_log_syslog_path pointed at a path that
 * does not exist, then at a plain file); quiet with a socket there, and
 * for other targets.
 */
START_TEST(test_warn_syslog_socket)
{
    char dir[] = "/tmp/check_syslog_XXXXXX", sock[128], file[128];
    char text[512], want[1024], *w;
    const char *saved = kr_log_syslog_path;
    struct sockaddr_un sa;
    struct kr_conf *c;
    unsigned n;
    int fd, i;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/log", dir);
    snprintf(file, sizeof(file), "%s/file", dir);
    fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    /* line 6 [log], 7 target; 8 [audit], 9 target */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "[log]\ntarget = syslog\n[audit]\ntarget = syslog\n");
    for (i = 0; i < 2; i++) {
        kr_log_syslog_path = i == 0 ? sock : file;
        c = load_ok(text);
        w = warnings_of(c, &n);
        ck_assert_uint_eq(n, 2);
        snprintf(want, sizeof(want),
                 "t.ini:7: [log]: target = syslog, but there is no syslog "
                 "socket at %s (no syslog daemon, as in most containers): "
                 "syslog(3) drops krelay's log lines without a word; use "
                 "stderr (under systemd: the journal) or a file\n"
                 "t.ini:9: [audit]: target = syslog, but there is no syslog "
                 "socket at %s (no syslog daemon, as in most containers): "
                 "every audit line would be lost (krelay counts them as "
                 "dropped and logs how many); use stdout or a file\n",
                 kr_log_syslog_path, kr_log_syslog_path);
        ck_assert_str_eq(w, want);
        free(w);
        kr_conf_free(c);
    }
    /* a socket there: no warning */
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    ck_assert_uint_lt(strlen(sock), sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    kr_log_syslog_path = sock;
    c = load_ok(text);
    w = warnings_of(c, &n);
    ck_assert_msg(n == 0, "%s", w);
    free(w);
    kr_conf_free(c);
    close(fd);
    /* no socket, other targets: no warning */
    kr_log_syslog_path = file;
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[log]\ntarget = stderr\n"
                "[audit]\ntarget = stdout\n");
    w = warnings_of(c, &n);
    ck_assert_msg(n == 0, "%s", w);
    free(w);
    kr_conf_free(c);
    kr_log_syslog_path = saved;
    unlink(sock);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* issue 14: a wildcard advertised_host is an error, not advertised. */
START_TEST(test_err_wildcard_advertised)
{
    static const struct {
        const char *value, *shown;
    } cases[] = {
        { "0.0.0.0", "0.0.0.0" },
        { "[::]", "[::]" },
        { "::", "[::]" },
        { "[0::0]", "[0::0]" },
        { "::ffff:0.0.0.0", "[::ffff:0.0.0.0]" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[256], want[256];

        /* line 3 [listener], 4 listen, 5 base, 6 advertised_host */
        snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
                 "advertised_host = %s\n", cases[i].value);
        snprintf(want, sizeof(want), "t.ini:6: [listener]: advertised_host "
                 "= %s is a wildcard address: clients would be told to "
                 "connect to it and cannot (write the name or address "
                 "clients reach this host by)\n", cases[i].shown);
        expect_one_error(text, want);
    }
}
END_TEST

/* Layout tolerated: indentation (not a continuation), CRLF, BOM, ':'. */
START_TEST(test_layout)
{
    struct kr_conf *c = load_ok("\xEF\xBB\xBF; bom\r\n"
                                "[upstream]\r\n"
                                "  bootstrap_servers = k1:9092\r\n"
                                "    connect_timeout_ms = 77\r\n"
                                "[ listener ]   ; comment\r\n"
                                "\tlisten: 127.0.0.1:19092\r\n"
                                "broker_port_base=19100");

    ck_assert_int_eq(c->upstreams[0].nbootstrap, 1);
    ck_assert_str_eq(c->upstreams[0].bootstrap[0].host, "k1");
    ck_assert_int_eq(c->upstreams[0].connect_timeout_ms, 77);
    ck_assert_uint_eq(c->listeners[0].listen.port, 19092);
    ck_assert_uint_eq(c->listeners[0].broker_port_base, 19100);
    kr_conf_free(c);
}
END_TEST

/* Debian's inih cuts lines at 200 bytes; ours are read whole up to 1024. */
START_TEST(test_long_line_ok)
{
    char text[2048];
    char list[1000] = "";
    struct kr_conf *c;
    int i;

    for (i = 0; i < 20; i++) {
        char one[64];

        snprintf(one, sizeof(one), "%sbroker-%02d.kafka.example.com:9092",
                 i > 0 ? "," : "", i);
        strcat(list, one);
    }
    ck_assert_uint_gt(strlen("bootstrap_servers = ") + strlen(list), 600);
    snprintf(text, sizeof(text), "[upstream]\nbootstrap_servers = %s\n"
             MIN_LISTENER, list);
    c = load_ok(text);
    ck_assert_int_eq(c->upstreams[0].nbootstrap, 20);
    ck_assert_str_eq(c->upstreams[0].bootstrap[19].host,
                     "broker-19.kafka.example.com");
    ck_assert_uint_eq(c->upstreams[0].bootstrap[19].port, 9092);
    kr_conf_free(c);
}
END_TEST

START_TEST(test_long_line_error)
{
    char *text = malloc(4096);
    char *errs = NULL;
    struct kr_conf *c;

    ck_assert_ptr_nonnull(text);
    /* line 3 is 1100 bytes; the bad key on line 4 must still say :4: */
    snprintf(text, 4096, MIN_UPSTREAM "; %01098d\nbogus = 1\n" MIN_LISTENER,
             0);
    ck_assert_int_eq(load(text, &c, &errs), KR_ERROR);
    ck_assert_ptr_nonnull(strstr(errs, "t.ini:3: line too long (1100 bytes, "
                                       "max 1024)\n"));
    ck_assert_ptr_nonnull(strstr(errs, "t.ini:4: unknown key 'bogus' in "
                                       "[upstream]\n"));
    ck_assert_int_eq(count_lines(errs), 2);
    free(errs);
    free(text);
}
END_TEST

/* dump -> load -> dump gives the same text and the same values. */
START_TEST(test_dump_roundtrip)
{
    struct kr_conf *c = load_ok(full_conf), *c2;
    char *d1 = NULL, *d2 = NULL, *errs = NULL;
    size_t l1 = 0, l2 = 0;
    FILE *f = open_memstream(&d1, &l1);

    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(d1, "[upstream east]\nbootstrap_servers = "
                                     "k1:9092,10.0.0.2:9093,[::1]:9094\n"));
    ck_assert_ptr_nonnull(strstr(d1, "dial.1001 = [fd00::1]:9092\n"));
    ck_assert_ptr_nonnull(strstr(d1, "[listener b]\nlisten = [::1]:29092\n"
                                     "advertised_host = [::1]\n"));
    ck_assert_ptr_nonnull(strstr(d1, "idle_timeout_ms = 0\n"));
    ck_assert_ptr_nonnull(strstr(d1, "[log]\nlevel = debug\n"));
    ck_assert_int_eq(load(d1, &c2, &errs), KR_OK);
    ck_assert_str_eq(errs, "");
    check_full(c2, false);
    f = open_memstream(&d2, &l2);
    kr_conf_dump(c2, f);
    fclose(f);
    /* Only the first line (the source path) differs. */
    ck_assert_str_eq(strchr(d1, '\n'), strchr(d2, '\n'));
    kr_conf_free(c);
    kr_conf_free(c2);
    free(d1);
    free(d2);
    free(errs);
}
END_TEST

START_TEST(test_example_file)
{
    const char *top = getenv("top_srcdir");
    char path[4096], line[4096];
    struct kr_conf *c = NULL;
    char *errs = NULL;
    size_t len = 0;
    FILE *f;
    int n = 0;

    ck_assert_msg(top != NULL, "top_srcdir is not set (run via make check)");
    snprintf(path, sizeof(path), "%s/conf/krelay.ini", top);
    f = open_memstream(&errs, &len);
    ck_assert_int_eq(kr_conf_load(path, f, &c), KR_OK);
    fclose(f);
    ck_assert_str_eq(errs, "");
    ck_assert_str_eq(c->path, path);
    ck_assert_int_eq(c->nlisteners, 1);
    ck_assert_int_eq(c->nupstreams, 1);
    ck_assert_ptr_eq(c->listeners[0].up, &c->upstreams[0]);
    ck_assert_int_eq(c->log.level, KR_LOG_NOTICE);
    kr_conf_free(c);
    free(errs);

    /* Short enough even for an unpatched inih (200-byte buffer). */
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        n++;
        ck_assert_msg(strlen(line) < 200, "line %d too long", n);
    }
    fclose(f);
    ck_assert_int_gt(n, 50);
}
END_TEST

START_TEST(test_load_missing_file)
{
    struct kr_conf *c = NULL;
    char *errs = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&errs, &len);

    ck_assert_int_eq(kr_conf_load("/nonexistent/krelay.ini", f, &c),
                     KR_ERROR);
    fclose(f);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(errs, "/nonexistent/krelay.ini: cannot open: "
                           "No such file or directory\n");
    free(errs);
    ck_assert_int_eq(kr_conf_load("/nonexistent/krelay.ini", NULL, &c),
                     KR_ERROR);
}
END_TEST

START_TEST(test_load_file_errors)
{
    char path[] = "/tmp/check_conf_XXXXXX";
    int fd = mkstemp(path);
    static const char text[] = MIN_UPSTREAM MIN_LISTENER "max_inflight = 0\n";
    struct kr_conf *c = NULL;
    char *errs = NULL, want[256];
    size_t len = 0;
    FILE *f;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1),
                     (ssize_t)sizeof(text) - 1);
    close(fd);
    f = open_memstream(&errs, &len);
    ck_assert_int_eq(kr_conf_load(path, f, &c), KR_ERROR);
    fclose(f);
    snprintf(want, sizeof(want), "%s:6: 'max_inflight': bad value '0': "
             "0 is out of range 1..1000000\n", path);
    ck_assert_str_eq(errs, want);
    unlink(path);
    free(errs);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

/* The other section's stream as a target: it would be a file named so. */
START_TEST(test_err_target_stream)
{
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[log]\nlevel = info\n"
                     "target = stdout\n",
                     "t.ini:8: [log] target = stdout: the log goes to "
                     "stderr, syslog or a file");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[audit]\ntarget = stderr\n"
                     "[rule a]\naudit = true\n",
                     "t.ini:7: [audit] target = stderr: audit lines go to "
                     "stdout, syslog or a file");
}
END_TEST

START_TEST(test_err_unknown_section)
{
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[cluster]\nfoo = 1\n",
                     "t.ini:6: unknown section [cluster]");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[log extra]\n",
                     "t.ini:6: [log] takes no name");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[listener a b]\n",
                     "t.ini:6: syntax error: expected [KIND] or [KIND NAME]");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[listener\n",
                     "t.ini:6: syntax error: section header without ']'");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[log] junk\n",
                     "t.ini:6: syntax error: text after ']'");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[upstream a/b]\n",
                     "t.ini:6: bad section name 'a/b'");
}
END_TEST

START_TEST(test_err_unknown_key)
{
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "max_frames = 1\n",
                     "t.ini:6: unknown key 'max_frames' in [listener]");
    expect_one_error("key = 1\n" MIN_UPSTREAM MIN_LISTENER,
                     "t.ini:1: key 'key' outside any section");
    expect_one_error(MIN_UPSTREAM "listen = 1.2.3.4:1\n" MIN_LISTENER,
                     "t.ini:3: unknown key 'listen' in [upstream]");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "just words\n",
                     "t.ini:6: syntax error: expected 'key = value'");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "= 5\n",
                     "t.ini:6: missing key name");
}
END_TEST

START_TEST(test_err_values)
{
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "max_inflight = 10x\n",
                     "t.ini:6: 'max_inflight': bad value '10x': "
                     "expected an integer");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "max_inflight = 0x10\n",
                     "t.ini:6: 'max_inflight': bad value '0x10'");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "max_inflight = \n",
                     "t.ini:6: 'max_inflight': bad value ''");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "idle_timeout_ms = 99999999999999999999\n",
                     "t.ini:6: 'idle_timeout_ms': bad value "
                     "'99999999999999999999': 99999999999999999999 is out "
                     "of range 0..2147483647");
    expect_one_error(MIN_UPSTREAM "[listener]\nlisten = 127.0.0.1:19092\n"
                     "broker_port_base = 70000\n",
                     "t.ini:5: 'broker_port_base': bad value '70000': "
                     "70000 is out of range 1..65535");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "max_frame_bytes = -1\n",
                     "t.ini:6: 'max_frame_bytes': bad value '-1': "
                     "-1 is out of range 64..2147483647");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[log]\nlevel = loud\n",
                     "t.ini:7: 'level': bad value 'loud': expected error, "
                     "warn, notice, info, debug or trace");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[log]\ntarget =\n",
                     "t.ini:7: 'target': bad value '': empty value");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "advertised_host = a b\n",
                     "t.ini:6: 'advertised_host': bad value 'a b': expected "
                     "a host name or IP address");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "upstream = x/y\n",
                     "t.ini:6: 'upstream': bad value 'x/y'");
}
END_TEST

START_TEST(test_err_hostport)
{
    static const char *const bad[] = {
        "nohost", "host:", "host:0", "host:65536", "host:12a", "::1:9092",
        "[::1:9092", "[::1]9092", "[::g]:9092", "[]:9092", "999.1.1.1:9092",
        "a b:9092", "host:+90", "host:-1", "[::1]:",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256], want[128];

        snprintf(text, sizeof(text), MIN_UPSTREAM "[listener]\n"
                 "listen = %s\nbroker_port_base = 19100\n", bad[i]);
        snprintf(want, sizeof(want), "t.ini:4: 'listen': bad value '%s': "
                 "expected HOST:PORT", bad[i]);
        expect_one_error(text, want);
    }
    expect_one_error("[upstream]\nbootstrap_servers = k1:9092,,k2:9092\n"
                     MIN_LISTENER, "t.ini:2: 'bootstrap_servers': bad value "
                     "'k1:9092,,k2:9092': empty entry in list");
    expect_one_error("[upstream]\nbootstrap_servers = :9092\n" MIN_LISTENER,
                     "t.ini:2: 'bootstrap_servers': bad value ':9092': "
                     "expected HOST:PORT");
    expect_one_error(MIN_UPSTREAM "dial.x = k:1\n" MIN_LISTENER,
                     "t.ini:3: 'dial.x': expected dial.NODEID");
    expect_one_error(MIN_UPSTREAM "dial.-1 = k:1\n" MIN_LISTENER,
                     "t.ini:3: 'dial.-1': expected dial.NODEID");
    expect_one_error(MIN_UPSTREAM "dial.1 = k\n" MIN_LISTENER,
                     "t.ini:3: 'dial.1': bad value 'k': expected HOST:PORT");
    expect_one_error(MIN_UPSTREAM "dial.1 = :5\n" MIN_LISTENER,
                     "t.ini:3: 'dial.1': bad value ':5'");
}
END_TEST

START_TEST(test_hostport_parse)
{
    struct kr_hostport hp = { NULL, 0 };

    ck_assert(kr_hostport_parse("[::1]:9092", &hp));
    ck_assert_str_eq(hp.host, "::1");
    ck_assert_uint_eq(hp.port, 9092);
    free(hp.host);
    ck_assert(kr_hostport_parse("[fe80::1%eth0]:1", &hp));
    ck_assert_str_eq(hp.host, "fe80::1%eth0");
    ck_assert_uint_eq(hp.port, 1);
    free(hp.host);
    ck_assert(kr_hostport_parse("[::ffff:10.0.0.1]:65535", &hp));
    ck_assert_str_eq(hp.host, "::ffff:10.0.0.1");
    ck_assert_uint_eq(hp.port, 65535);
    free(hp.host);
    ck_assert(kr_hostport_parse("kafka_1.internal:9092", &hp));
    ck_assert_str_eq(hp.host, "kafka_1.internal");
    free(hp.host);
    ck_assert(kr_hostport_parse(":9092", &hp));
    ck_assert_str_eq(hp.host, "");
    free(hp.host);
    hp.host = NULL;
    ck_assert(!kr_hostport_parse("[::1]", &hp));
    ck_assert(!kr_hostport_parse("10.0.0.1:099999", &hp));
    ck_assert(!kr_hostport_parse("", &hp));
    ck_assert(!kr_hostport_parse(NULL, &hp));
    ck_assert_ptr_null(hp.host);
}
END_TEST

START_TEST(test_err_missing_required)
{
    struct kr_conf *c;
    char *errs = NULL;

    expect_one_error(MIN_UPSTREAM "[listener]\nbroker_port_base = 19100\n",
                     "t.ini:3: [listener]: missing required key 'listen'");
    expect_one_error(MIN_UPSTREAM "[listener x]\nlisten = h:1\n",
                     "t.ini:3: [listener x]: missing required key "
                     "'broker_port_base'");
    expect_one_error("[upstream]\nconnect_timeout_ms = 5\n" MIN_LISTENER,
                     "t.ini:1: [upstream]: missing required key "
                     "'bootstrap_servers'");
    expect_one_error(MIN_LISTENER, "t.ini:3: no [upstream] section");
    expect_one_error(MIN_UPSTREAM, "t.ini:2: no [listener] section");

    ck_assert_int_eq(load("", &c, &errs), KR_ERROR);
    ck_assert_str_eq(errs, "t.ini:1: no [listener] section\n"
                           "t.ini:1: no [upstream] section (to try this "
                           "file on the demo cluster: krelay --demo -c "
                           "FILE)\n");
    free(errs);
}
END_TEST

START_TEST(test_err_ports)
{
    expect_one_error(MIN_UPSTREAM "[listener]\nlisten = h:1\n"
                     "broker_port_base = 65000\nnode_id_max = 600\n",
                     "t.ini:5: [listener]: broker_port_base 65000 + "
                     "node_id_max 600 = 65600 is above 65535");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "node_id_min = 9\nnode_id_max = 8\n",
                     "t.ini:7: [listener]: node_id_min 9 > node_id_max 8");
    /* Its own bootstrap port among its broker ports. */
    expect_one_error(MIN_UPSTREAM "[listener]\nlisten = h:19105\n"
                     "broker_port_base = 19100\n",
                     "t.ini:4: [listener]: listen port 19105 is also the "
                     "port of NodeId 5 (broker ports 19100-19115)");
}
END_TEST

#define TWO_LISTENERS(l2, b2)                                                \
    MIN_UPSTREAM "[listener a]\nlisten = 127.0.0.1:19092\n"                  \
    "broker_port_base = 19100\n[listener b]\nlisten = " l2 "\n"              \
    "broker_port_base = " b2 "\n"

START_TEST(test_err_listener_clash)
{
    /* lines: 3 [listener a], 4 listen, 5 base, 6 [listener b], 7, 8 */
    expect_one_error(TWO_LISTENERS("127.0.0.1:19092", "29100"),
                     "t.ini:7: [listener b]: listen port 19092 is already "
                     "used by [listener a] (line 4)");
    expect_one_error(TWO_LISTENERS("0.0.0.0:19110", "29100"),
                     "t.ini:7: [listener b]: listen port 19110 is a broker "
                     "port of [listener a] (19100-19115)");
    expect_one_error(TWO_LISTENERS("127.0.0.1:29092", "19080"),
                     "t.ini:8: [listener b]: broker ports 19080-19095 include "
                     "the listen port 19092 of [listener a]");
    expect_one_error(TWO_LISTENERS("127.0.0.1:29092", "19110"),
                     "t.ini:8: [listener b]: broker ports 19110-19125 "
                     "overlap those of [listener a] (19100-19115)");
    /* Different addresses may share ports. */
    {
        struct kr_conf *c = load_ok(TWO_LISTENERS("127.0.0.2:19092",
                                                  "19100"));

        ck_assert_int_eq(c->nlisteners, 2);
        ck_assert_ptr_eq(c->listeners[1].up, &c->upstreams[0]);
        kr_conf_free(c);
    }
}
END_TEST

START_TEST(test_err_upstream_refs)
{
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "upstream = nope\n",
                     "t.ini:6: [listener]: no [upstream nope] section");
    expect_one_error("[upstream a]\nbootstrap_servers = k:1\n"
                     "[upstream b]\nbootstrap_servers = k:2\n" MIN_LISTENER,
                     "t.ini:5: [listener]: there are 2 [upstream] sections: "
                     "say which one with upstream = NAME");
    expect_one_error(MIN_UPSTREAM "[upstream b]\nbootstrap_servers = k:2\n"
                     MIN_LISTENER "upstream = b\n",
                     "t.ini:1: there are 2 [upstream] sections: each needs "
                     "a name");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "[listener]\nlisten = h:2\nbroker_port_base = 2000\n",
                     "t.ini:6: duplicate section [listener] (first at "
                     "line 3)");
    expect_one_error(MIN_UPSTREAM "[listener x]\nlisten = 127.0.0.1:19092\n"
                     "broker_port_base = 19100\n"
                     "[listener]\nlisten = h:2\nbroker_port_base = 2000\n",
                     "t.ini:6: there are 2 [listener] sections: each needs a "
                     "name, as in [listener NAME]");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[log]\n[log]\n",
                     "t.ini:7: duplicate section [log] (first at line 6)");
}
END_TEST

static char *dump_of(const struct kr_conf *c);

/* Load text as "t.ini" with a stand-in [upstream]; *errs as load(). */
static int
load_stand_in(const char *text, const char *list, struct kr_conf **out,
              char **errs)
{
    struct kr_conf_load_opts o = { .stand_in_upstream = list };
    size_t len = 0;
    FILE *f = open_memstream(errs, &len);
    int rc;

    ck_assert_ptr_nonnull(f);
    *out = NULL;
    rc = kr_conf_load_string_with(text, "t.ini", &o, f, out);
    fclose(f);
    return rc;
}

/*
 * kr_conf_load_opts.stand_in_upstream (krelay --demo -c FILE, issue 14):
 * a file without [upstream] loads with an unnamed one that its listener
 * uses; a file with one keeps its own; a listener naming an upstream
 * the file lacks is still an error; without the option nothing changes.
 */
START_TEST(test_stand_in_upstream)
{
    struct kr_conf *c;
    char *errs = NULL;

    ck_assert_int_eq(load_stand_in(MIN_LISTENER "[rule r]\naudit = true\n"
                                   "[audit]\ntarget = stdout\n",
                                   "127.0.0.1:1001,[::1]:1002", &c, &errs),
                     KR_OK);
    ck_assert_str_eq(errs, "");
    free(errs);
    ck_assert_int_eq(c->nupstreams, 1);
    ck_assert_str_eq(c->upstreams[0].name, "");
    ck_assert_int_eq(c->upstreams[0].line, 7);  /* the file's last line */
    ck_assert_int_eq(c->upstreams[0].nbootstrap, 2);
    ck_assert_str_eq(c->upstreams[0].bootstrap[0].host, "127.0.0.1");
    ck_assert_uint_eq(c->upstreams[0].bootstrap[0].port, 1001);
    ck_assert_str_eq(c->upstreams[0].bootstrap[1].host, "::1");
    ck_assert_uint_eq(c->upstreams[0].bootstrap[1].port, 1002);
    /* the key table's defaults, as for a written [upstream] */
    ck_assert_int_eq(c->upstreams[0].connect_timeout_ms, 10000);
    ck_assert_ptr_eq(c->listeners[0].up, &c->upstreams[0]);
    ck_assert_int_eq(c->nrules, 1);
    ck_assert(c->upstreams[0].stand_in);
    /* krelay --demo -T -c FILE: the dump leaves the stand-in out, so it
       loads back as FILE did (with the stand-in again), dumps the same,
       and without --demo is refused as FILE is */
    {
        char *d1 = dump_of(c), *d2;
        struct kr_conf *c2;

        ck_assert_ptr_null(strstr(d1, "\n[upstream"));
        ck_assert_ptr_null(strstr(d1, "bootstrap_servers"));
        ck_assert_ptr_null(strstr(d1, "\nupstream ="));
        ck_assert_ptr_nonnull(strstr(d1, "\n; no [upstream]: krelay --demo "
                                     "points the listeners at its demo "
                                     "cluster\n"));
        ck_assert_int_eq(load_stand_in(d1, "127.0.0.1:1001,[::1]:1002", &c2,
                                       &errs), KR_OK);
        ck_assert_str_eq(errs, "");
        free(errs);
        ck_assert_int_eq(c2->nupstreams, 1);
        ck_assert(c2->upstreams[0].stand_in);
        ck_assert_uint_eq(kr_conf_reload_diff(c, c2, NULL, NULL), 0);
        d2 = dump_of(c2);
        ck_assert_str_eq(strchr(d1, '\n'), strchr(d2, '\n'));
        kr_conf_free(c2);
        ck_assert_int_eq(load(d1, &c2, &errs), KR_ERROR);
        ck_assert_ptr_null(c2);
        ck_assert_ptr_nonnull(strstr(errs, ": no [upstream] section"));
        free(errs);
        free(d1);
        free(d2);
    }
    kr_conf_free(c);

    /* the file's own [upstream] stays */
    ck_assert_int_eq(load_stand_in("[upstream mine]\nbootstrap_servers = "
                                   "k1:9092\n" MIN_LISTENER, "127.0.0.1:1",
                                   &c, &errs), KR_OK);
    free(errs);
    ck_assert_int_eq(c->nupstreams, 1);
    ck_assert_str_eq(c->upstreams[0].name, "mine");
    ck_assert_str_eq(c->upstreams[0].bootstrap[0].host, "k1");
    ck_assert(!c->upstreams[0].stand_in);
    kr_conf_free(c);

    /* a name the file does not have is still an error */
    ck_assert_int_eq(load_stand_in(MIN_LISTENER "upstream = east\n",
                                   "127.0.0.1:1", &c, &errs), KR_ERROR);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(errs, "t.ini:4: [listener]: no [upstream east] "
                           "section\n");
    free(errs);

    /* a bad list is the caller's error, said as such */
    ck_assert_int_eq(load_stand_in(MIN_LISTENER, "nonsense", &c, &errs),
                     KR_ERROR);
    ck_assert_msg(strstr(errs, "t.ini:3: the [upstream] standing in for the "
                         "missing one: bootstrap_servers 'nonsense': ") ==
                  errs && count_lines(errs) == 1, "%s", errs);
    free(errs);

    /* without the option: required, as always */
    expect_one_error(MIN_LISTENER, "t.ini:3: no [upstream] section");
}
END_TEST

START_TEST(test_err_duplicates)
{
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "\nlisten = h:2\n",
                     "t.ini:7: key 'listen' given twice in [listener] "
                     "(first at line 4)");
    /* Also when the first value was bad. */
    {
        struct kr_conf *c;
        char *errs = NULL;

        ck_assert_int_eq(load(MIN_UPSTREAM MIN_LISTENER "max_inflight = x\n"
                              "max_inflight = 5\n", &c, &errs), KR_ERROR);
        ck_assert_str_eq(errs, "t.ini:6: 'max_inflight': bad value 'x': "
                         "expected an integer\n"
                         "t.ini:7: key 'max_inflight' given twice in "
                         "[listener] (first at line 6)\n");
        free(errs);
    }
    expect_one_error(MIN_UPSTREAM "dial.3 = a:1\ndial.3 = b:1\n" MIN_LISTENER,
                     "t.ini:4: 'dial.3' given twice (first at line 3)");
    /* A repeated section name is one error, its keys are not rechecked. */
    expect_one_error("[upstream u]\nbootstrap_servers = k:1\n"
                     "[upstream u]\nbootstrap_servers = k:1\nbad_key = 1\n"
                     MIN_LISTENER,
                     "t.ini:3: duplicate section [upstream u]");
}
END_TEST

/* Every error is reported, not just the first. */
START_TEST(test_err_all_collected)
{
    struct kr_conf *c;
    char *errs = NULL;
    static const char text[] =
        "[upstream]\n"                          /* 1 */
        "bootstrap_servers = k1\n"              /* 2 */
        "color = blue\n"                        /* 3 */
        "[listener]\n"                          /* 4 */
        "listen = 127.0.0.1:19092\n"            /* 5 */
        "max_inflight = many\n"                 /* 6 */
        "[log]\n"                               /* 7 */
        "level = verbose\n"                     /* 8 */
        "[extra]\n";                            /* 9 */

    ck_assert_int_eq(load(text, &c, &errs), KR_ERROR);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(errs,
        "t.ini:2: 'bootstrap_servers': bad value 'k1': expected "
        "HOST:PORT[,HOST:PORT...] (IPv6 as [ADDR]:PORT)\n"
        "t.ini:3: unknown key 'color' in [upstream]\n"
        "t.ini:6: 'max_inflight': bad value 'many': expected an integer\n"
        "t.ini:8: 'level': bad value 'verbose': expected error, warn, "
        "notice, info, debug or trace\n"
        "t.ini:9: unknown section [extra] (expected listener, upstream, "
        "log, rule, audit, admin or process)\n"
        "t.ini:4: [listener]: missing required key 'broker_port_base' (or "
        "sni_broker_name: SNI routing, every broker on the listen port)\n");
    free(errs);
    /* errs may be NULL. */
    ck_assert_int_eq(kr_conf_load_string(text, "t.ini", NULL, &c), KR_ERROR);
}
END_TEST

/* ---- kr_kerr ------------------------------------------------------------ */

START_TEST(test_kerr_names)
{
    char buf[KR_KERR_BUFLEN];
    int code;

    ck_assert_str_eq(kr_kerr_name(-1), "UNKNOWN_SERVER_ERROR");
    ck_assert_str_eq(kr_kerr_name(0), "NONE");
    ck_assert_str_eq(kr_kerr_name(1), "OFFSET_OUT_OF_RANGE");
    ck_assert_str_eq(kr_kerr_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
    ck_assert_str_eq(kr_kerr_name(6), "NOT_LEADER_OR_FOLLOWER");
    ck_assert_str_eq(kr_kerr_name(7), "REQUEST_TIMED_OUT");
    ck_assert_str_eq(kr_kerr_name(15), "COORDINATOR_NOT_AVAILABLE");
    ck_assert_str_eq(kr_kerr_name(16), "NOT_COORDINATOR");
    ck_assert_str_eq(kr_kerr_name(25), "UNKNOWN_MEMBER_ID");
    ck_assert_str_eq(kr_kerr_name(27), "REBALANCE_IN_PROGRESS");
    ck_assert_str_eq(kr_kerr_name(29), "TOPIC_AUTHORIZATION_FAILED");
    ck_assert_str_eq(kr_kerr_name(31), "CLUSTER_AUTHORIZATION_FAILED");
    ck_assert_str_eq(kr_kerr_name(35), "UNSUPPORTED_VERSION");
    ck_assert_str_eq(kr_kerr_name(42), "INVALID_REQUEST");
    ck_assert_str_eq(kr_kerr_name(58), "SASL_AUTHENTICATION_FAILED");
    ck_assert_str_eq(kr_kerr_name(72), "LISTENER_NOT_FOUND");
    ck_assert_str_eq(kr_kerr_name(89), "THROTTLING_QUOTA_EXCEEDED");
    ck_assert_str_eq(kr_kerr_name(100), "UNKNOWN_TOPIC_ID");
    ck_assert_str_eq(kr_kerr_name(110), "FENCED_MEMBER_EPOCH");
    ck_assert_str_eq(kr_kerr_name(129), "REBOOTSTRAP_REQUIRED");
    ck_assert_str_eq(kr_kerr_name(KR_KERR_MAX),
                     "SHARE_SESSION_LIMIT_REACHED");
    ck_assert_ptr_null(kr_kerr_name(KR_KERR_MAX + 1));
    ck_assert_ptr_null(kr_kerr_name(-2));
    ck_assert_ptr_null(kr_kerr_name(INT16_MIN));
    ck_assert_str_eq(kr_kerr_format(35, buf, sizeof(buf)),
                     "UNSUPPORTED_VERSION");
    ck_assert_str_eq(kr_kerr_format(500, buf, sizeof(buf)),
                     "UNKNOWN_ERROR_500");
    ck_assert_str_eq(kr_kerr_format(INT16_MIN, buf, sizeof(buf)),
                     "UNKNOWN_ERROR_-32768");

    /* Every code has a distinct name that maps back to it. */
    for (code = -1; code <= KR_KERR_MAX; code++) {
        const char *n = kr_kerr_name((int16_t)code);

        ck_assert_ptr_nonnull(n);
        ck_assert_int_eq(kr_kerr_by_name(n), code);
    }
    /* the enum is made from the same list: its names are Kafka's */
#define KR_KERR_CHECK_(c, name)                                             \
    ck_assert_int_eq(KR_KERR_##name, c);                                    \
    ck_assert_str_eq(kr_kerr_name(KR_KERR_##name), #name);
    KR_KERR_LIST(KR_KERR_CHECK_)
#undef KR_KERR_CHECK_
    ck_assert_int_eq(KR_KERR_UNSUPPORTED_VERSION, 35);
    ck_assert_int_eq(KR_KERR_UNKNOWN_TOPIC_ID, 100);
    ck_assert_int_eq(KR_KERR_MAX, 133);
    ck_assert_int_eq(kr_kerr_by_name("not_leader_or_follower"), 6);
    ck_assert_int_eq(kr_kerr_by_name("UNKNOWN_ERROR_500"), 500);
    ck_assert_int_eq(kr_kerr_by_name("UNKNOWN_ERROR_-7"), -7);
    ck_assert_int_eq(kr_kerr_by_name("UNKNOWN_ERROR_40000"),
                     KR_KERR_NOT_FOUND);
    ck_assert_int_eq(kr_kerr_by_name("UNKNOWN_ERROR_ 5"), KR_KERR_NOT_FOUND);
    ck_assert_int_eq(kr_kerr_by_name("UNKNOWN_ERROR_"), KR_KERR_NOT_FOUND);
    ck_assert_int_eq(kr_kerr_by_name("NO_SUCH_ERROR"), KR_KERR_NOT_FOUND);
    ck_assert_int_eq(kr_kerr_by_name(NULL), KR_KERR_NOT_FOUND);
}
END_TEST

/* ---- kr_log ------------------------------------------------------------- */

START_TEST(test_log_levels)
{
    static const char *const names[] = {
        "error", "warn", "notice", "info", "debug", "trace",
    };
    int lvl, i;

    for (i = 0; i < 6; i++) {
        lvl = -1;
        ck_assert(kr_log_level_parse(names[i], &lvl));
        ck_assert_int_eq(lvl, i);
        ck_assert_str_eq(kr_log_level_name(i), names[i]);
    }
    ck_assert_int_eq(KR_LOG_TRACE, 5);
    ck_assert(kr_log_level_parse("WARN", &lvl));
    ck_assert_int_eq(lvl, KR_LOG_WARN);
    lvl = 42;
    ck_assert(!kr_log_level_parse("warning", &lvl));
    ck_assert(!kr_log_level_parse("", &lvl));
    ck_assert(!kr_log_level_parse(NULL, &lvl));
    ck_assert_int_eq(lvl, 42);
    ck_assert_str_eq(kr_log_level_name(99), "unknown");
    ck_assert_int_eq(kr_log_level_cur, KR_LOG_NOTICE);
}
END_TEST

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;

    ck_assert_ptr_nonnull(f);
    buf = calloc(1, 65536);
    ck_assert_ptr_nonnull(buf);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* "2026-11-30T12:00:00.123456Z " */
static bool
is_timestamp(const char *s)
{
    static const char pat[] = "dddd-dd-ddTdd:dd:dd.ddddddZ ";
    size_t i;

    for (i = 0; pat[i] != '\0'; i++) {
        if (pat[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i]) {
            return false;
        }
    }
    return true;
}

/* issue 9: sasl = terminate: the credentials file loaded with the config,
   a bad line an error at the key's line naming the file's own line, the
   keys checked, warnings for a readable file and for unused keys */
START_TEST(test_sasl_terminate)
{
    char dir[] = "/tmp/check_sasl_XXXXXX";
    char path[256], bad[256], text[2048], want[512];
    const char *cred = "salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key="
        "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=,server_key="
        "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,iterations=4096";
    struct kr_conf *c;
    char *errs = NULL;
    FILE *f;
    int i;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/users", dir);
    snprintf(bad, sizeof(bad), "%s/bad", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# users\nuser SCRAM-SHA-256 %s\n", cred);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0600), 0);
    f = fopen(bad, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "user SCRAM-SHA-256 %s\nuser2 SCRAM-SHA-1 %s\n", cred, cred);
    fclose(f);
    ck_assert_int_eq(chmod(bad, 0600), 0);

    /* loads: the settings built, the user there */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = SCRAM-SHA-256, PLAIN\n"
             "sasl_session_lifetime_ms = 60000\n"
             "sasl_login_rate = 2.5,10\n", path);
    c = load_ok(text);
    ck_assert_int_eq(c->listeners[0].sasl, KR_SASL_MODE_TERMINATE);
    ck_assert_ptr_nonnull(c->listeners[0].sasl_srv);
    ck_assert_uint_eq(c->listeners[0].sasl_srv->nmech, 2);
    ck_assert_int_eq(c->listeners[0].sasl_srv->order[0],
                     KR_SASL_SRV_SCRAM_SHA_256);
    ck_assert_int_eq(c->listeners[0].sasl_srv->session_lifetime_ms, 60000);
    ck_assert_ptr_nonnull(c->listeners[0].sasl_srv->rate);
    ck_assert_ptr_nonnull(kr_sasl_users_lookup(
        c->listeners[0].sasl_srv->users, "user", KR_SCRAM_SHA256));
    ck_assert_int_eq(c->nwarnings, 0);
    kr_conf_free(c);

    /* the defaults: three mechanisms, 5,20 */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n", path);
    c = load_ok(text);
    ck_assert_uint_eq(c->listeners[0].sasl_srv->nmech, 3);
    ck_assert_int_eq(c->listeners[0].sasl_srv->session_lifetime_ms, 0);
    ck_assert_ptr_nonnull(c->listeners[0].sasl_srv->rate);
    kr_conf_free(c);

    /* a bad line of the file: an error at sasl_credentials' line (5)
       naming the file's line (2) */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n", bad);
    snprintf(want, sizeof(want), "t.ini:7: [listener]: sasl_credentials: "
             "%s:2: ", bad);
    expect_one_error(text, want);

    /* no file, a missing file, bad mechanisms, a bad rate */
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "sasl = terminate\n",
                     "t.ini:6: [listener]: sasl = terminate needs "
                     "sasl_credentials");
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s/none\n", dir);
    expect_one_error(text, "t.ini:7: [listener]: sasl_credentials: ");
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = PLAIN,GSSAPI\n", path);
    expect_one_error(text, "t.ini:8: [listener]: sasl_mechanisms = "
                     "PLAIN,GSSAPI: krelay cannot terminate GSSAPI "
                     "(passthrough only)");
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = PLAIN,SCRAM-SHA-521\n", path);
    expect_one_error(text, "t.ini:8: [listener]: sasl_mechanisms = "
                     "PLAIN,SCRAM-SHA-521: unknown mechanism 'SCRAM-SHA-521'"
                     " (krelay terminates PLAIN, SCRAM-SHA-256 and "
                     "SCRAM-SHA-512)");
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = OAUTHBEARER\n", path);
    expect_one_error(text, "t.ini:8: [listener]: sasl_mechanisms = "
                     "OAUTHBEARER: krelay cannot terminate OAUTHBEARER "
                     "(passthrough and origination only)");
    /* an offered SCRAM mechanism no entry has (the file: one
       SCRAM-SHA-256 entry): a warning at sasl_mechanisms' line, each */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = SCRAM-SHA-512\n"
             "oauthbearer_principal_claim = email\n", path);
    c = load_ok(text);
    ck_assert_int_eq(c->nwarnings, 2);
    snprintf(want, sizeof(want), "[listener]: sasl_mechanisms offers "
             "SCRAM-SHA-512 but no entry of %s is SCRAM-SHA-512: every "
             "SCRAM-SHA-512 login fails (krelay-passwd -m SCRAM-SHA-512 "
             "writes such entries)", path);
    ck_assert_int_eq(c->warnings[1].line, 8);
    ck_assert_str_eq(c->warnings[1].text, want);
    /* oauthbearer_principal_claim: passthrough's, unused here */
    ck_assert_int_eq(c->warnings[0].line, 9);
    ck_assert_str_eq(c->warnings[0].text, "[listener]: "
                     "oauthbearer_principal_claim is set but sasl is "
                     "terminate: krelay terminates no OAUTHBEARER, the key "
                     "is not used");
    kr_conf_free(c);
    /* PLAIN takes any entry; a SCRAM-SHA-256 entry serves that one */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = PLAIN,SCRAM-SHA-256\n", path);
    c = load_ok(text);
    ck_assert_int_eq(c->nwarnings, 0);
    kr_conf_free(c);
    /* every mechanism, in any order: the default's offer, not warned
       (a file with SCRAM-SHA-256 entries only: SCRAM-SHA-512 logins fail
       with the default too) */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_mechanisms = SCRAM-SHA-512,PLAIN,SCRAM-SHA-256\n", path);
    c = load_ok(text);
    ck_assert_int_eq(c->nwarnings, 0);
    kr_conf_free(c);
    {
        static const char *const rates[] = { "5", "0,3", "5,0", "x", "5,",
                                             "-1,2", "5,2x" };

        for (i = 0; i < 7; i++) {
            snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
                     "sasl = terminate\nsasl_credentials = %s\n"
                     "sasl_login_rate = %s\n", path, rates[i]);
            expect_one_error(text, "t.ini:8: [listener]: sasl_login_rate");
        }
    }
    /* 0: no limit */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n"
             "sasl_login_rate = 0\n", path);
    c = load_ok(text);
    ck_assert_ptr_null(c->listeners[0].sasl_srv->rate);
    kr_conf_free(c);

    /* a file others can read: loads, with a warning */
    ck_assert_int_eq(chmod(path, 0644), 0);
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl = terminate\nsasl_credentials = %s\n", path);
    ck_assert_int_eq(load(text, &c, &errs), KR_OK);
    free(errs);
    ck_assert_int_eq(c->nwarnings, 1);
    ck_assert_int_eq(c->warnings[0].line, 7);
    ck_assert_ptr_nonnull(strstr(c->warnings[0].text, "sasl_credentials"));
    kr_conf_free(c);

    /* the keys without terminate: not used, a warning each */
    snprintf(text, sizeof(text), MIN_UPSTREAM MIN_LISTENER
             "sasl_credentials = %s\nsasl_login_rate = 1,1\n", path);
    ck_assert_int_eq(load(text, &c, &errs), KR_OK);
    free(errs);
    ck_assert_int_eq(c->nwarnings, 2);
    ck_assert_ptr_nonnull(strstr(c->warnings[0].text, "sasl is not "
                                 "terminate"));
    ck_assert_ptr_null(c->listeners[0].sasl_srv);
    kr_conf_free(c);

    unlink(path);
    unlink(bad);
    rmdir(dir);
}
END_TEST

START_TEST(test_log_file_reopen)
{
    char dir[] = "/tmp/check_log_XXXXXX";
    char path[256], old[256], old2[256], want[512];
    char *text, *nl;
    struct stat sb;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/krelay.log", dir);
    snprintf(old, sizeof(old), "%s/krelay.log.1", dir);
    snprintf(old2, sizeof(old2), "%s/krelay.log.2", dir);

    ck_assert_int_eq(kr_log_open(path, "ktest"), KR_OK);
    ck_assert_int_eq(stat(path, &sb), 0);
    {
        mode_t mask = umask(0);

        umask(mask);
        ck_assert_int_eq(sb.st_mode & 0777, 0640 & ~mask);
    }
    kr_log_notice("first %d", 1);
    kr_log_debug("not written at notice");
    kr_log_error("ctl\nchars\x01 stay on one line");
    kr_log_level_cur = KR_LOG_TRACE;
    kr_log_trace("trace now");
    kr_log_level_cur = KR_LOG_NOTICE;

    ck_assert_int_eq(rename(path, old), 0);
    ck_assert(kr_log_reopen());         /* a file sink: reopened */
    kr_log_warn("second");
    /* a reopen that fails says so, in the file opened before, which
       lines keep going to */
    ck_assert_int_eq(rename(path, old2), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert(kr_log_reopen());
    kr_log_warn("third");
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(rename(old2, path), 0);
    kr_log_close();
    ck_assert(!kr_log_reopen());        /* stderr: nothing to reopen */

    text = slurp(old);
    ck_assert_int_eq(count_lines(text), 3);
    ck_assert(is_timestamp(text));
    snprintf(want, sizeof(want), "Z ktest[%ld]: notice: first 1\n",
             (long)getpid());
    ck_assert_ptr_nonnull(strstr(text, want));
    ck_assert_ptr_eq(strstr(text, want), text + 26);
    ck_assert_ptr_null(strstr(text, "not written"));
    ck_assert_ptr_nonnull(strstr(text, ": error: ctl\\x0achars\\x01 stay on "
                                       "one line\n"));
    nl = strchr(text, '\n');
    ck_assert(is_timestamp(nl + 1));
    ck_assert_ptr_nonnull(strstr(text, ": trace: trace now\n"));
    ck_assert_ptr_null(strstr(text, "second"));
    free(text);

    text = slurp(path);
    ck_assert_int_eq(count_lines(text), 3);
    ck_assert(is_timestamp(text));
    ck_assert_ptr_nonnull(strstr(text, ": warn: second\n"));
    snprintf(want, sizeof(want), ": error: cannot reopen the log file %s: "
             "Is a directory; log lines keep going to the file opened "
             "before\n", path);
    ck_assert_msg(strstr(text, want) != NULL, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, ": warn: third\n"));
    free(text);

    /* A file that cannot be opened keeps the old sink. */
    errno = 0;
    ck_assert_int_eq(kr_log_open("/nonexistent/dir/x.log", NULL), KR_ERROR);
    ck_assert_int_eq(errno, ENOENT);

    unlink(path);
    unlink(old);
    rmdir(dir);
}
END_TEST

START_TEST(test_log_long_line)
{
    char dir[] = "/tmp/check_log_XXXXXX";
    char path[256];
    char *big = malloc(10000), *text;

    ck_assert_ptr_nonnull(big);
    memset(big, 'x', 9999);
    big[9999] = '\0';
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/krelay.log", dir);
    ck_assert_int_eq(kr_log_open(path, "krelay"), KR_OK);
    kr_log_error("%s", big);
    kr_log_close();
    text = slurp(path);
    ck_assert_int_eq(count_lines(text), 1);
    ck_assert_uint_eq(strlen(text), 4096);
    ck_assert_ptr_nonnull(strstr(text, "krelay["));
    ck_assert_ptr_nonnull(strstr(text, "xxx...\n"));
    free(text);
    free(big);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_log_ratelimit)
{
    char dir[] = "/tmp/check_log_XXXXXX";
    char path[256];
    static struct kr_ratelimit rl;
    char *text;
    int i;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/krelay.log", dir);
    ck_assert_int_eq(kr_log_open(path, NULL), KR_OK);
    /* A window that cannot end by itself, so timing does not matter. */
    rl.window_start_ms = INT64_MAX / 2;
    for (i = 0; i < 15; i++) {
        kr_log_write_rl(&rl, 10, KR_LOG_WARN, "peer msg %d", i);
    }
    ck_assert_uint_eq(rl.count, 15);
    ck_assert_uint_eq(rl.suppressed, 5);
    /* Now let it end: the next call writes the summary first. */
    rl.window_start_ms = 1;
    kr_log_write_rl(&rl, 10, KR_LOG_WARN, "peer msg %d", 99);
    ck_assert_uint_eq(rl.suppressed, 0);
    ck_assert_uint_eq(rl.count, 1);
    /* Disabled level: nothing counted. */
    kr_log_write_rl(&rl, 10, KR_LOG_DEBUG, "quiet");
    ck_assert_uint_eq(rl.count, 1);
    kr_log_close();

    text = slurp(path);
    ck_assert_int_eq(count_lines(text), 12);
    ck_assert_ptr_nonnull(strstr(text, ": warn: peer msg 9\n"));
    ck_assert_ptr_null(strstr(text, "peer msg 10\n"));
    ck_assert_ptr_null(strstr(text, "peer msg 14\n"));
    /* The summary never shows a raw format string; the message follows. */
    ck_assert_ptr_nonnull(strstr(text, ": warn: suppressed 5 similar "
                                       "messages in the last second (at most "
                                       "10 a second); the next one:\n"));
    ck_assert_ptr_null(strstr(text, "%d"));
    ck_assert_ptr_nonnull(strstr(text, "peer msg 99\n"));
    ck_assert(strstr(text, "suppressed 5") < strstr(text, "peer msg 99"));
    free(text);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* A burst then quiet: kr_log_rl_flush (the proxy's timer) reports it. */
START_TEST(test_log_rl_flush)
{
    char dir[] = "/tmp/check_log_XXXXXX";
    char path[256];
    static struct kr_ratelimit rl;
    char *text;
    int i;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/krelay.log", dir);
    ck_assert_int_eq(kr_log_open(path, NULL), KR_OK);
    kr_log_level_cur = KR_LOG_INFO;
    rl.window_start_ms = INT64_MAX / 2;     /* never ends by itself */
    for (i = 0; i < 13; i++) {
        kr_log_write_rl(&rl, 10, KR_LOG_WARN, "burst %d", i);
    }
    ck_assert_uint_eq(rl.suppressed, 3);
    ck_assert_int_eq(rl.registered, 1);
    ck_assert_uint_eq(kr_log_rl_flush(), 1);
    ck_assert_uint_eq(rl.suppressed, 0);
    /* nothing new: nothing written */
    ck_assert_uint_eq(kr_log_rl_flush(), 0);
    kr_log_write_rl(&rl, 10, KR_LOG_WARN, "burst %d", 13);
    kr_log_write_rl(&rl, 10, KR_LOG_WARN, "burst %d", 14);
    ck_assert_uint_eq(kr_log_rl_flush(), 1);
    kr_log_close();

    text = slurp(path);
    ck_assert_int_eq(count_lines(text), 12);
    ck_assert_ptr_nonnull(strstr(text, ": warn: suppressed 3 similar "
                                       "messages in the last second (at most "
                                       "10 a second)\n"));
    ck_assert_ptr_nonnull(strstr(text, ": warn: suppressed 2 similar "
                                       "messages in the last second (at most "
                                       "10 a second)\n"));
    ck_assert_ptr_null(strstr(text, "burst 10\n"));
    free(text);
    unlink(path);
    rmdir(dir);
}
END_TEST

static void *
log_thread(void *arg)
{
    int i;

    for (i = 0; i < 2000; i++) {
        kr_log_notice("thread %ld line %d", (long)(intptr_t)arg, i);
    }
    return NULL;
}

/* Threads logging during reopens: every line whole, none lost. */
START_TEST(test_log_threads)
{
    char dir[] = "/tmp/check_log_XXXXXX";
    char path[256];
    pthread_t th[4];
    char *text, *p;
    long i;
    int lines = 0;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/krelay.log", dir);
    ck_assert_int_eq(kr_log_open(path, "krelay"), KR_OK);
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, log_thread,
                                        (void *)(intptr_t)i), 0);
    }
    for (i = 0; i < 50; i++) {
        kr_log_reopen();
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    kr_log_close();
    text = malloc(1 << 20);
    ck_assert_ptr_nonnull(text);
    {
        FILE *f = fopen(path, "r");
        size_t n;

        ck_assert_ptr_nonnull(f);
        n = fread(text, 1, (1 << 20) - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    for (p = text; *p != '\0'; p = strchr(p, '\n') + 1) {
        ck_assert(is_timestamp(p));
        ck_assert_ptr_nonnull(strchr(p, '\n'));
        lines++;
    }
    ck_assert_int_eq(lines, 8000);
    free(text);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- reload: each key's attribute and kr_conf_reload_diff --------------- */

/*
 * The config the reload rows change one key of.  Two upstreams so that a
 * listener's upstream can change; one section of every kind.
 */
static const char *const reload_base[] = {
    "[upstream u1]", "bootstrap_servers = 127.0.0.1:9092", NULL,
    "[upstream u2]", "bootstrap_servers = 127.0.0.1:9093", NULL,
    "[listener a]", "listen = 127.0.0.1:29092", "broker_port_base = 29100",
    "upstream = u1", NULL,
    "[log]", NULL,
    "[audit]", "target = audit.log", NULL,
    "[rule r]", "api = Produce", "audit = true", NULL,
    "[admin]", "listen = 127.0.0.1:29644", NULL,
    "[process]", NULL,
    NULL
};

/*
 * What the reload (src/kr_daemon.c, reload(); kr_proxy.c before issue
 * 11) did with each key before the reload attribute, read from its code, and one change of it: the key's lines in its section
 * before and after ("": the key is not written).  A base line of the same
 * key is left out; a line "-KEY" only leaves out the base's KEY.
 *   - a running listener group is kept when same_listeners() holds: name,
 *     listen, broker_port_base, node_id_min, node_id_max equal (REBIND
 *     otherwise); a kept group takes the new section (g->lc) but keeps
 *     the upstream it was opened with (g->up): `upstream` is RESTART;
 *   - upstreams are made at start only (p->ups from cref0); the reload
 *     compares with that first config and warns when same_upstream()
 *     fails: bootstrap_servers and dial.* (RESTART); metadata_refresh_ms
 *     is read only by the running upstream (RESTART, not warned today);
 *     sessions read connect_timeout_ms and request_timeout_margin_ms
 *     through their listener's lc->up, from the new config (APPLY);
 *   - the audit sink is reopened only when its target changes, with the
 *     new queue_bytes (RESTART otherwise); log level and target apply;
 *   - the new config's rules replace the old ones (APPLY).
 * Issue 12 turned what was RESTART for upstreams (and the listener's
 * upstream) into NEWCONN: a new upstream for new connections.
 */
/* Test certificates (kr_test_certs.h) for the reload and tls cases. */
static char *certs;

static void
certs_setup(void)
{
    certs = kr_test_certs_dir();
    ck_assert_ptr_nonnull(certs);
}

static void
certs_teardown(void)
{
    kr_test_certs_rm(certs);
    certs = NULL;
}

struct reload_row {
    const char *sect;                   /* the base section's header */
    const char *key;
    enum kr_conf_reload want;
    const char *before, *after;
};

/* An SNI routing listener's lines: TLS, no broker_port_base. */
#define SNI_ROW "ssl = true\nssl_certificate = @D@/server-full.pem\n" \
                "-broker_port_base\n"

static const struct reload_row reload_rows[] = {
    { "[listener a]", "listen", KR_RELOAD_REBIND,
      "listen = 127.0.0.1:29092", "listen = 127.0.0.1:29093" },
    { "[listener a]", "advertised_host", KR_RELOAD_APPLY,
      "", "advertised_host = kafka.example" },
    { "[listener a]", "broker_port_base", KR_RELOAD_REBIND,
      "broker_port_base = 29100", "broker_port_base = 29200" },
    { "[listener a]", "node_id_min", KR_RELOAD_REBIND, "", "node_id_min = 1" },
    { "[listener a]", "node_id_max", KR_RELOAD_REBIND,
      "", "node_id_max = 20" },
    { "[listener a]", "upstream", KR_RELOAD_NEWCONN,
      "upstream = u1", "upstream = u2" },
    { "[listener a]", "max_frame_bytes", KR_RELOAD_APPLY,
      "", "max_frame_bytes = 8388608" },
    { "[listener a]", "max_inflight", KR_RELOAD_APPLY,
      "", "max_inflight = 10" },
    { "[listener a]", "max_buffer_bytes", KR_RELOAD_APPLY,
      "", "max_buffer_bytes = 65536" },
    { "[listener a]", "max_connections", KR_RELOAD_APPLY,
      "", "max_connections = 5" },
    { "[listener a]", "idle_timeout_ms", KR_RELOAD_APPLY,
      "", "idle_timeout_ms = 0" },
    { "[listener a]", "tcp_nodelay", KR_RELOAD_APPLY,
      "", "tcp_nodelay = false" },
    { "[listener a]", "splice_min_bytes", KR_RELOAD_APPLY,
      "", "splice_min_bytes = 0" },
    /* issue 8: new connections (their handshakes) use the new context;
       with ssl false the other keys load, unused (a warning) */
    { "[listener a]", "ssl", KR_RELOAD_APPLY,
      "ssl_certificate = @D@/server-full.pem",
      "ssl = true\nssl_certificate = @D@/server-full.pem" },
    { "[listener a]", "ssl_certificate", KR_RELOAD_APPLY,
      "", "ssl_certificate = /etc/krelay/a.pem" },
    { "[listener a]", "ssl_key", KR_RELOAD_APPLY,
      "", "ssl_key = /etc/krelay/a.key" },
    { "[listener a]", "ssl_client_ca", KR_RELOAD_APPLY,
      "", "ssl_client_ca = /etc/krelay/ca.pem" },
    { "[listener a]", "ssl_crl", KR_RELOAD_APPLY,
      "", "ssl_crl = /etc/krelay/crl.pem" },
    { "[listener a]", "ssl_min_protocol", KR_RELOAD_APPLY,
      "", "ssl_min_protocol = TLSv1.3" },
    { "[listener a]", "ssl_ciphers", KR_RELOAD_APPLY,
      "", "ssl_ciphers = HIGH" },
    { "[listener a]", "ssl_ciphersuites", KR_RELOAD_APPLY,
      "", "ssl_ciphersuites = TLS_AES_128_GCM_SHA256" },
    { "[listener a]", "ssl_handshake_timeout_ms", KR_RELOAD_APPLY,
      "", "ssl_handshake_timeout_ms = 500" },
    { "[listener a]", "ssl_principal_mapping_rules", KR_RELOAD_APPLY,
      "", "ssl_principal_mapping_rules = RULE:^CN=([^,]+).*$/$1/, DEFAULT" },
    { "[listener a]", "ssl_resumption", KR_RELOAD_APPLY,
      "", "ssl_resumption = false" },
    /* issue 9: SASL termination; a reload applies to new connections
       (and the credentials file is read again) */
    { "[listener a]", "sasl_mechanisms", KR_RELOAD_APPLY,
      "", "sasl_mechanisms = PLAIN" },
    { "[listener a]", "sasl_credentials", KR_RELOAD_APPLY,
      "", "sasl_credentials = /etc/krelay/sasl-users" },
    { "[listener a]", "sasl_session_lifetime_ms", KR_RELOAD_APPLY,
      "", "sasl_session_lifetime_ms = 60000" },
    { "[listener a]", "sasl_login_rate", KR_RELOAD_APPLY,
      "", "sasl_login_rate = 1,2" },
    /* issue 8: SNI routing binds one port instead of one per NodeId (a
       new pattern: new connections only, as a new broker_port_base);
       the bootstrap name and the fallback apply to new connections */
    { "[listener a]", "sni_broker_name", KR_RELOAD_REBIND,
      SNI_ROW "sni_broker_name = b-$(node_id).kafka.test",
      SNI_ROW "sni_broker_name = broker-$(node_id).kafka.test" },
    { "[listener a]", "sni_bootstrap_name", KR_RELOAD_APPLY,
      SNI_ROW "sni_broker_name = b-$(node_id).kafka.test",
      SNI_ROW "sni_broker_name = b-$(node_id).kafka.test\n"
      "sni_bootstrap_name = kafka.test" },
    { "[listener a]", "sni_fallback", KR_RELOAD_APPLY,
      SNI_ROW "sni_broker_name = b-$(node_id).kafka.test",
      SNI_ROW "sni_broker_name = b-$(node_id).kafka.test\n"
      "sni_fallback = bootstrap" },
    { "[listener a]", "sasl", KR_RELOAD_APPLY, "", "sasl = required" },
    { "[listener a]", "sasl_auth_timeout_ms", KR_RELOAD_APPLY, "",
      "sasl_auth_timeout_ms = 30000" },
    { "[listener a]", "oauthbearer_principal_claim", KR_RELOAD_APPLY, "",
      "oauthbearer_principal_claim = azp" },
    /* issue 10: legacy clients; connections take them with the new
       config (conf_refresh), as the rules */
    { "[listener a]", "translate_legacy", KR_RELOAD_APPLY, "",
      "translate_legacy = true" },
    { "[listener a]", "legacy_zstd", KR_RELOAD_APPLY, "",
      "legacy_zstd = refuse" },
    { "[listener a]", "legacy_batch_max_bytes", KR_RELOAD_APPLY, "",
      "legacy_batch_max_bytes = 65536" },
    { "[listener a]", "legacy_fetch_max_bytes", KR_RELOAD_APPLY, "",
      "legacy_fetch_max_bytes = 65536" },
    { "[listener a]", "legacy_refuse_delay_ms", KR_RELOAD_APPLY, "",
      "legacy_refuse_delay_ms = 0" },
    { "[listener a]", "legacy_refuse_window_ms", KR_RELOAD_APPLY, "",
      "legacy_refuse_window_ms = 60000" },
    { "[listener a]", "proxy_protocol", KR_RELOAD_APPLY,
      "proxy_protocol = v1\nproxy_protocol_from = 10.0.0.0/8",
      "proxy_protocol = any\nproxy_protocol_from = 10.0.0.0/8" },
    { "[listener a]", "proxy_protocol_from", KR_RELOAD_APPLY,
      "proxy_protocol = v2\nproxy_protocol_from = 10.0.0.0/8",
      "proxy_protocol = v2\nproxy_protocol_from = 10.0.0.0/8, fd00::/8" },
    { "[listener a]", "proxy_protocol_timeout_ms", KR_RELOAD_APPLY,
      "proxy_protocol = v2\nproxy_protocol_from = 10.0.0.0/8",
      "proxy_protocol = v2\nproxy_protocol_from = 10.0.0.0/8\n"
      "proxy_protocol_timeout_ms = 3000" },

    { "[upstream u1]", "bootstrap_servers", KR_RELOAD_NEWCONN,
      "bootstrap_servers = 127.0.0.1:9092",
      "bootstrap_servers = 127.0.0.1:9092,127.0.0.1:9094" },
    { "[upstream u1]", "connect_timeout_ms", KR_RELOAD_APPLY,
      "", "connect_timeout_ms = 500" },
    { "[upstream u1]", "request_timeout_margin_ms", KR_RELOAD_APPLY,
      "", "request_timeout_margin_ms = 0" },
    { "[upstream u1]", "metadata_refresh_ms", KR_RELOAD_NEWCONN,
      "", "metadata_refresh_ms = 1000" },
    { "[upstream u1]", "dial.", KR_RELOAD_NEWCONN,
      "dial.1 = 127.0.0.1:9095", "dial.1 = 127.0.0.1:9096" },
    /* issue 8: TLS or not is the running upstream's (as the brokers it
       dials); its files and checks apply to connections made after the
       reload (the worker gives the running upstream the new context) */
    { "[upstream u1]", "ssl", KR_RELOAD_NEWCONN, "", "ssl = true" },
    { "[upstream u1]", "ssl_ca", KR_RELOAD_APPLY,
      "", "ssl_ca = /etc/krelay/ca.pem" },
    { "[upstream u1]", "ssl_verify_hostname", KR_RELOAD_APPLY,
      "", "ssl_verify_hostname = false" },
    { "[upstream u1]", "ssl_certificate", KR_RELOAD_APPLY,
      "", "ssl_certificate = /etc/krelay/c.pem" },
    { "[upstream u1]", "ssl_key", KR_RELOAD_APPLY,
      "", "ssl_key = /etc/krelay/c.key" },
    { "[upstream u1]", "ssl_min_protocol", KR_RELOAD_APPLY,
      "", "ssl_min_protocol = TLSv1.3" },
    /* issue 9: SASL credentials apply to the next (re)authentication;
       the password file is read by each config generation */
    { "[upstream u1]", "sasl_mechanism", KR_RELOAD_APPLY,
      "sasl_username = u\nsasl_password = p",
      "sasl_mechanism = PLAIN\nsasl_username = u\nsasl_password = p" },
    { "[upstream u1]", "sasl_username", KR_RELOAD_APPLY,
      "sasl_mechanism = PLAIN\nsasl_username = u\nsasl_password = p",
      "sasl_mechanism = PLAIN\nsasl_username = v\nsasl_password = p" },
    { "[upstream u1]", "sasl_password_file", KR_RELOAD_APPLY,
      "", "sasl_password_file = /etc/krelay/pw" },
    { "[upstream u1]", "sasl_password", KR_RELOAD_APPLY,
      "", "sasl_password = p" },
    { "[upstream u1]", "sasl_oauthbearer_token_file", KR_RELOAD_APPLY,
      "", "sasl_oauthbearer_token_file = /etc/krelay/token" },
    { "[upstream u1]", "sasl_oauthbearer_token", KR_RELOAD_APPLY,
      "", "sasl_oauthbearer_token = t" },
    /* (any readable file with a first line stands for a password file) */
    { "[upstream u1]", "metadata_sasl_mechanism", KR_RELOAD_APPLY,
      "metadata_sasl_username = m\n"
      "metadata_sasl_password_file = /proc/version",
      "metadata_sasl_mechanism = SCRAM-SHA-256\nmetadata_sasl_username = m\n"
      "metadata_sasl_password_file = /proc/version" },
    { "[upstream u1]", "metadata_sasl_username", KR_RELOAD_APPLY,
      "", "metadata_sasl_username = m" },
    { "[upstream u1]", "metadata_sasl_password_file", KR_RELOAD_APPLY,
      "", "metadata_sasl_password_file = /etc/krelay/mpw" },
    /* issue 10: what the operator asserts about the cluster; decisions
       after the reload use it */
    { "[upstream u1]", "broker_profile", KR_RELOAD_APPLY,
      "", "broker_profile = kafka-4.0.0" },

    { "[log]", "level", KR_RELOAD_APPLY, "", "level = debug" },
    { "[log]", "target", KR_RELOAD_APPLY, "", "target = krelay.log" },

    { "[audit]", "target", KR_RELOAD_APPLY,
      "target = audit.log", "target = audit2.log" },
    { "[audit]", "queue_bytes", KR_RELOAD_RESTART,
      "", "queue_bytes = 8192" },
    { "[audit]", "instance", KR_RELOAD_APPLY,
      "", "instance = proxy-eu-1" },

    /* the operations issue: the admin endpoint keeps its address until a
       restart; the token is read from the current config per request */
    { "[admin]", "listen", KR_RELOAD_RESTART,
      "listen = 127.0.0.1:29644", "listen = :29645" },
    { "[admin]", "bearer_token_file", KR_RELOAD_APPLY,
      "", "bearer_token_file = @D@/server-full.pem" },
    { "[admin]", "bearer_token", KR_RELOAD_APPLY,
      "", "bearer_token = fake-token" },
    { "[process]", "drain_timeout_ms", KR_RELOAD_APPLY,
      "", "drain_timeout_ms = 5000" },
    { "[process]", "user", KR_RELOAD_RESTART, "", "user = nobody" },
    { "[process]", "group", KR_RELOAD_RESTART, "", "group = nogroup" },
    { "[process]", "workers", KR_RELOAD_RESTART, "workers = 3",
      "workers = 4" },

    { "[rule r]", "listener", KR_RELOAD_APPLY, "", "listener = a" },
    { "[rule r]", "client_address", KR_RELOAD_APPLY,
      "client_address = 10.0.0.0/8", "client_address = 10.0.0.0/9" },
    { "[rule r]", "client_id", KR_RELOAD_APPLY, "", "client_id = x*" },
    { "[rule r]", "principal", KR_RELOAD_APPLY, "", "principal = p*" },
    { "[rule r]", "api", KR_RELOAD_APPLY,
      "api = Produce", "api = Produce, Fetch" },
    { "[rule r]", "versions", KR_RELOAD_APPLY, "", "versions = 3-9" },
    { "[rule r]", "direction", KR_RELOAD_APPLY, "", "direction = request" },
    { "[rule r]", "topic", KR_RELOAD_APPLY, "", "topic = t*" },
    { "[rule r]", "clamp_min_version", KR_RELOAD_APPLY,
      "", "clamp_min_version = 3" },
    { "[rule r]", "clamp_max_version", KR_RELOAD_APPLY,
      "", "clamp_max_version = 7" },
    { "[rule r]", "pass_unknown_apis", KR_RELOAD_APPLY,
      "clamp_max_version = 7",
      "clamp_max_version = 7\npass_unknown_apis = true" },
    { "[rule r]", "audit", KR_RELOAD_APPLY,
      "audit = true\ndeny = true", "audit = false\ndeny = true" },
    { "[rule r]", "audit_body", KR_RELOAD_APPLY, "", "audit_body = true" },
    { "[rule r]", "throttle_ms", KR_RELOAD_APPLY, "", "throttle_ms = 100" },
    { "[rule r]", "throttle_mode", KR_RELOAD_APPLY,
      "throttle_ms = 100", "throttle_ms = 100\nthrottle_mode = enforce" },
    { "[rule r]", "throttle_op", KR_RELOAD_APPLY,
      "throttle_ms = 100", "throttle_ms = 100\nthrottle_op = add" },
    { "[rule r]", "throttle_jitter_ms", KR_RELOAD_APPLY,
      "throttle_ms = 100", "throttle_ms = 100\nthrottle_jitter_ms = 10" },
    { "[rule r]", "deny", KR_RELOAD_APPLY, "", "deny = true" },
    { "[rule r]", "deny_error", KR_RELOAD_APPLY,
      "deny = true", "deny = true\ndeny_error = 29" },
    { "[rule r]", "allowed_acks", KR_RELOAD_APPLY, "", "allowed_acks = 1" },
    { "[rule r]", "allowed_compression", KR_RELOAD_APPLY,
      "", "allowed_compression = none" },
    { "[rule r]", "fault_latency_ms", KR_RELOAD_APPLY,
      "", "fault_latency_ms = 5" },
    { "[rule r]", "fault_error", KR_RELOAD_APPLY, "", "fault_error = 6" },
    { "[rule r]", "fault_error_probability", KR_RELOAD_APPLY,
      "fault_error = 6", "fault_error = 6\nfault_error_probability = 0.5" },
    { "[rule r]", "fault_close_probability", KR_RELOAD_APPLY,
      "", "fault_close_probability = 0.5" },
};

/* "listener" of "[listener a]" into buf. */
static const char *
sect_kind(const char *hdr, char *buf, size_t len)
{
    size_t n = strcspn(hdr + 1, " ]");

    snprintf(buf, len, "%.*s", (int)n, hdr + 1);
    return buf;
}

/*
 * Does one of the lines of text set the key of line ("key = value"), or
 * leave it out ("-key")?
 */
static bool
sets_key(const char *text, const char *line)
{
    size_t klen = strcspn(line, " =");
    const char *p;

    for (p = text; *p != '\0'; p += strcspn(p, "\n"), p += *p == '\n') {
        if (strncmp(p, line, klen) == 0 && strchr(" =", p[klen]) != NULL) {
            return true;
        }
        if (p[0] == '-' && strncmp(p + 1, line, klen) == 0 &&
            strchr("\n", p[1 + klen]) != NULL) {
            return true;
        }
    }
    return false;
}

/*
 * The base config with row's lines before (after = false) or after, in
 * place of the base's lines of the same keys.
 */
static struct kr_conf *
reload_load(const struct reload_row *row, bool after)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    const char *const *l = reload_base;
    struct kr_conf *c;

    ck_assert_ptr_nonnull(f);
    for (; *l != NULL; l++) {
        bool mine = strcmp(*l, row->sect) == 0;
        const char *lines = after ? row->after : row->before, *at;

        fprintf(f, "%s\n", *l);
        for (l++; *l != NULL; l++) {
            if (!mine || (!sets_key(row->before, *l) &&
                          !sets_key(row->after, *l))) {
                fprintf(f, "%s\n", *l);
            }
        }
        for (; mine && lines[0] != '\0'; lines += strcspn(lines, "\n"),
                                        lines += *lines == '\n') {
            size_t n = strcspn(lines, "\n");

            if (lines[0] == '-') {
                continue;               /* "-KEY": left out */
            }
            /* @D@: the test certificates' directory */
            for (; (at = strstr(lines, "@D@")) != NULL && at < lines + n;
                 n -= (size_t)(at + 3 - lines), lines = at + 3) {
                ck_assert_ptr_nonnull(certs);
                fprintf(f, "%.*s%s", (int)(at - lines), lines, certs);
            }
            fprintf(f, "%.*s\n", (int)n, lines);
        }
    }
    fclose(f);
    c = load_ok(text);
    free(text);
    return c;
}

/* What kr_conf_reload_diff reported (up to 8 changes). */
struct reload_seen {
    int n;
    struct kr_conf_change ch[8];
    char sect[8][16], name[8][16], key[8][32];
};

static void
reload_collect(const struct kr_conf_change *ch, void *arg)
{
    struct reload_seen *s = arg;

    ck_assert_int_lt(s->n, 8);
    s->ch[s->n] = *ch;
    snprintf(s->sect[s->n], sizeof(s->sect[0]), "%s", ch->section);
    snprintf(s->name[s->n], sizeof(s->name[0]), "%s", ch->name);
    snprintf(s->key[s->n], sizeof(s->key[0]), "%s",
             ch->key != NULL ? ch->key : "(section)");
    s->n++;
}

/* Every key of the table has a row, with the attribute the table says. */
START_TEST(test_reload_attributes)
{
    struct kr_conf_key_desc d;
    size_t i, j, nkeys = 0;
    char kind[16];

    for (i = 0; kr_conf_key(i, &d); i++) {
        bool found = false;

        nkeys++;
        ck_assert(d.reload == KR_RELOAD_APPLY ||
                  d.reload == KR_RELOAD_RESTART ||
                  d.reload == KR_RELOAD_REBIND ||
                  d.reload == KR_RELOAD_NEWCONN);
        ck_assert_ptr_nonnull(d.help);
        for (j = 0; j < sizeof(reload_rows) / sizeof(reload_rows[0]); j++) {
            const struct reload_row *r = &reload_rows[j];

            if (strcmp(sect_kind(r->sect, kind, sizeof(kind)),
                       d.section) == 0 && strcmp(r->key, d.name) == 0) {
                ck_assert_msg(r->want == d.reload, "[%s] %s: reload %d, "
                              "want %d", d.section, d.name, (int)d.reload,
                              (int)r->want);
                found = true;
            }
        }
        ck_assert_msg(found, "[%s] %s: no reload row: what does a reload do "
                      "with it?", d.section, d.name);
    }
    ck_assert_uint_eq(nkeys, sizeof(reload_rows) / sizeof(reload_rows[0]));
    ck_assert(!kr_conf_key(nkeys, &d));
}
END_TEST

/*
 * What the man page (tools/krconfkeys.c) prints of each key: a form, the
 * unit its name says, a default or what applies without one, ranges
 * whose default lies inside, and the log levels as kr_log names them.
 */
START_TEST(test_key_docs)
{
    struct kr_conf_key_desc d;
    size_t i, n;
    bool level_seen = false;

    for (i = 0; kr_conf_key(i, &d); i++) {
        size_t len = strlen(d.name);
        const char *want_unit =
            len > 3 && strcmp(d.name + len - 3, "_ms") == 0 ? "ms"
            : len > 6 && strcmp(d.name + len - 6, "_bytes") == 0 ? "bytes"
                                                                 : NULL;

        ck_assert_msg(d.type != NULL && strcmp(d.type, "?") != 0,
                      "[%s] %s: no type", d.section, d.name);
        if (want_unit == NULL) {
            ck_assert_ptr_null(d.unit);
        } else {
            ck_assert_str_eq(d.unit, want_unit);
        }
        ck_assert_msg(d.def != NULL || d.required || d.def_doc != NULL,
                      "[%s] %s: no default and no def_doc row: what applies "
                      "without it?", d.section, d.name);
        ck_assert(d.def_doc == NULL || (d.def == NULL && !d.required));
        if (d.has_range) {
            ck_assert_int_le(d.min, d.max);
        }
        if (d.has_range && d.def != NULL &&
            strcmp(d.type, "integer") == 0) {
            long long v = atoll(d.def);

            ck_assert_msg(v >= d.min && v <= d.max, "[%s] %s: default %s "
                          "outside its range", d.section, d.name, d.def);
        }
        if (strcmp(d.section, "log") == 0 && strcmp(d.name, "level") == 0) {
            level_seen = true;
            ck_assert_ptr_nonnull(d.choices);
            for (n = 0; d.choices[n] != NULL; n++) {
                int lvl = -1;

                ck_assert_str_eq(d.choices[n], kr_log_level_name((int)n));
                ck_assert(kr_log_level_parse(d.choices[n], &lvl));
                ck_assert_int_eq(lvl, (int)n);
            }
            ck_assert_str_eq(kr_log_level_name((int)n), "unknown");
        }
    }
    ck_assert(level_seen);
}
END_TEST

/* Changing one key reports that key alone, with its attribute. */
START_TEST(test_reload_diff_key)
{
    const struct reload_row *r = &reload_rows[_i];
    struct kr_conf *a = reload_load(r, false), *b = reload_load(r, true);
    struct reload_seen seen;
    char kind[16];
    unsigned set;

    memset(&seen, 0, sizeof(seen));
    ck_assert_uint_eq(kr_conf_reload_diff(a, a, reload_collect, &seen), 0);
    ck_assert_int_eq(seen.n, 0);
    set = kr_conf_reload_diff(a, b, reload_collect, &seen);
    ck_assert_msg(seen.n == 1, "%s %s: %d changes, first [%s] %s", r->sect,
                  r->key, seen.n, seen.sect[0], seen.key[0]);
    ck_assert_str_eq(seen.sect[0], sect_kind(r->sect, kind, sizeof(kind)));
    ck_assert_str_eq(seen.key[0], r->key);
    ck_assert_int_eq(seen.ch[0].reload, r->want);
    ck_assert_uint_eq(set, (unsigned)r->want);
    if (strcmp(kind, "listener") == 0) {
        ck_assert_str_eq(seen.name[0], "a");
        ck_assert_int_eq(seen.ch[0].old_index, 0);
        ck_assert_int_eq(seen.ch[0].new_index, 0);
        ck_assert_int_eq(seen.ch[0].line, b->listeners[0].line);
        ck_assert_uint_eq(kr_conf_listener_diff(&a->listeners[0],
                                                &b->listeners[0], NULL,
                                                NULL), set);
    } else if (strcmp(kind, "upstream") == 0) {
        ck_assert_str_eq(seen.name[0], "u1");
        ck_assert_uint_eq(kr_conf_upstream_diff(&a->upstreams[0],
                                                &b->upstreams[0], NULL,
                                                NULL), set);
    } else if (strcmp(kind, "rule") == 0) {
        ck_assert_str_eq(seen.name[0], "r");
        ck_assert_int_eq(seen.ch[0].line, b->rules[0].line);
    }
    /* and back */
    seen.n = 0;
    ck_assert_uint_eq(kr_conf_reload_diff(b, a, reload_collect, &seen), set);
    ck_assert_int_eq(seen.n, 1);
    kr_conf_free(a);
    kr_conf_free(b);
}
END_TEST

/*
 * The tests reload() made before the reload attribute, word for word: a
 * running listener group serves a new [listener] when same_listeners() holds; an
 * upstream that fails same_upstream() gets the "changes need a restart"
 * warning.  The attributes must decide the same, for every row.
 */
static bool
today_same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

static bool
today_same_listeners(const struct kr_listener_conf *a,
                     const struct kr_listener_conf *b)
{
    return today_same_str(a->name, b->name) &&
           today_same_str(a->listen.host, b->listen.host) &&
           a->listen.port == b->listen.port &&
           a->broker_port_base == b->broker_port_base &&
           a->node_id_min == b->node_id_min &&
           a->node_id_max == b->node_id_max &&
           /* issue 8: one socket, or one per NodeId */
           today_same_str(a->sni_broker_name, b->sni_broker_name);
}

static bool
today_same_upstream(const struct kr_upstream_conf *a,
                    const struct kr_upstream_conf *b)
{
    int i;

    if (!today_same_str(a->name, b->name) || a->nbootstrap != b->nbootstrap ||
        a->ndial != b->ndial) {
        return false;
    }
    for (i = 0; i < a->nbootstrap; i++) {
        if (!today_same_str(a->bootstrap[i].host, b->bootstrap[i].host) ||
            a->bootstrap[i].port != b->bootstrap[i].port) {
            return false;
        }
    }
    for (i = 0; i < a->ndial; i++) {
        if (a->dial[i].node_id != b->dial[i].node_id ||
            !today_same_str(a->dial[i].addr.host, b->dial[i].addr.host) ||
            a->dial[i].addr.port != b->dial[i].addr.port) {
            return false;
        }
    }
    return true;
}

START_TEST(test_reload_as_today)
{
    const struct reload_row *r = &reload_rows[_i];
    struct kr_conf *a = reload_load(r, false), *b = reload_load(r, true);
    unsigned set;

    set = kr_conf_listener_diff(&a->listeners[0], &b->listeners[0], NULL,
                                NULL);
    ck_assert_msg(today_same_listeners(&a->listeners[0], &b->listeners[0]) ==
                  !(set & KR_RELOAD_REBIND), "%s %s: kept %d, rebind %u",
                  r->sect, r->key,
                  today_same_listeners(&a->listeners[0], &b->listeners[0]),
                  set & KR_RELOAD_REBIND);
    set = kr_conf_upstream_diff(&a->upstreams[0], &b->upstreams[0], NULL,
                                NULL);
    if (strcmp(r->key, "metadata_refresh_ms") == 0 ||
        (strcmp(r->sect, "[upstream u1]") == 0 &&
         strcmp(r->key, "ssl") == 0)) {
        /* the differences: kept without a warning before the reload
           attribute, warned once it said RESTART (ssl: issue 8), built
           anew for new connections since issue 12 (NEWCONN) */
        ck_assert(today_same_upstream(&a->upstreams[0], &b->upstreams[0]));
        ck_assert_uint_eq(set, KR_RELOAD_NEWCONN);
    } else {
        /* what was warned as needing a restart is NEWCONN now */
        ck_assert_msg(today_same_upstream(&a->upstreams[0],
                                          &b->upstreams[0]) ==
                      !(set & KR_RELOAD_NEWCONN), "%s %s", r->sect, r->key);
    }
    kr_conf_free(a);
    kr_conf_free(b);
}
END_TEST

#define RELOAD_U "[upstream u1]\nbootstrap_servers = 127.0.0.1:9092\n"
#define RELOAD_L "[listener a]\nlisten = 127.0.0.1:29092\n" \
                 "broker_port_base = 29100\n"

/* Sections added, removed, renamed; things that are no change. */
START_TEST(test_reload_diff_sections)
{
    static const struct {
        const char *old, *new;
        int n;                          /* changes */
        unsigned set;
        const char *first;              /* "section name key old new" */
    } cases[] = {
        /* a listener added: its listeners bind */
        { RELOAD_U RELOAD_L,
          RELOAD_U RELOAD_L "[listener b]\nlisten = 127.0.0.1:39092\n"
          "broker_port_base = 39100\n",
          1, KR_RELOAD_REBIND, "listener b (section) -1 1" },
        /* renamed: one removed, one added (both rebind) */
        { RELOAD_U RELOAD_L,
          RELOAD_U "[listener c]\nlisten = 127.0.0.1:29092\n"
          "broker_port_base = 29100\n",
          2, KR_RELOAD_REBIND, "listener c (section) -1 0" },
        /* a new upstream: new connections of its listeners use it
           (before issue 12 the reload was refused) */
        { RELOAD_U RELOAD_L,
          RELOAD_U "[upstream u2]\nbootstrap_servers = 127.0.0.1:9093\n"
          "[listener a]\nlisten = 127.0.0.1:29092\n"
          "broker_port_base = 29100\nupstream = u1\n",
          1, KR_RELOAD_NEWCONN, "upstream u2 (section) -1 1" },
        /* an upstream gone: it serves its open connections until they
           end */
        { RELOAD_U "[upstream u2]\nbootstrap_servers = 127.0.0.1:9093\n"
          "[listener a]\nlisten = 127.0.0.1:29092\n"
          "broker_port_base = 29100\nupstream = u1\n",
          RELOAD_U "[listener a]\nlisten = 127.0.0.1:29092\n"
          "broker_port_base = 29100\nupstream = u1\n",
          1, KR_RELOAD_NEWCONN, "upstream u2 (section) 1 -1" },
        /* an upstream written or implied is the same one */
        { RELOAD_U RELOAD_L, RELOAD_U RELOAD_L "upstream = u1\n",
          0, 0, NULL },
        /* rules added and removed apply; their order is not compared */
        { RELOAD_U RELOAD_L "[rule x]\ndeny = true\n",
          RELOAD_U RELOAD_L "[rule y]\nallowed_acks = 1\n[rule x]\n"
          "deny = true\n",
          1, KR_RELOAD_APPLY, "rule y (section) -1 0" },
        { RELOAD_U RELOAD_L "[rule x]\ndeny = true\n[rule y]\n"
          "allowed_acks = 1\n",
          RELOAD_U RELOAD_L "[rule y]\nallowed_acks = 1\n[rule x]\n"
          "deny = true\n",
          0, 0, NULL },
        { RELOAD_U RELOAD_L "[rule x]\ndeny = true\n", RELOAD_U RELOAD_L,
          1, KR_RELOAD_APPLY, "rule x (section) 0 -1" },
        /* the audit sink opened and closed */
        { RELOAD_U RELOAD_L, RELOAD_U RELOAD_L "[audit]\ntarget = a.log\n",
          1, KR_RELOAD_APPLY, "audit  (section) -1 0" },
        { RELOAD_U RELOAD_L "[audit]\ntarget = a.log\nqueue_bytes = 8192\n",
          RELOAD_U RELOAD_L,
          1, KR_RELOAD_APPLY, "audit  (section) 0 -1" },
        /* a key written at its default value is no change */
        { RELOAD_U RELOAD_L, RELOAD_U RELOAD_L "node_id_max = 15\n",
          0, 0, NULL },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kr_conf *a = load_ok(cases[i].old);
        struct kr_conf *b = load_ok(cases[i].new);
        struct reload_seen seen;
        char first[128];
        unsigned set;

        memset(&seen, 0, sizeof(seen));
        set = kr_conf_reload_diff(a, b, reload_collect, &seen);
        ck_assert_msg(seen.n == cases[i].n, "case %zu: %d changes", i,
                      seen.n);
        ck_assert_msg(set == cases[i].set, "case %zu: set %#x", i, set);
        if (cases[i].first != NULL) {
            snprintf(first, sizeof(first), "%s %s %s %d %d", seen.sect[0],
                     seen.name[0], seen.key[0], seen.ch[0].old_index,
                     seen.ch[0].new_index);
            ck_assert_str_eq(first, cases[i].first);
        }
        ck_assert_uint_eq(kr_conf_reload_diff(a, b, NULL, NULL), set);
        kr_conf_free(a);
        kr_conf_free(b);
    }
}
END_TEST

/* A config and the load of its dump differ in nothing. */
START_TEST(test_reload_diff_dump)
{
    static const char rules[] =
        "[audit]\ntarget = syslog\nqueue_bytes = 8192\n"
        "instance = proxy-eu-1\n"
        "[rule r1]\nlistener = a, b\nclient_address = 10.0.0.0/8, ::1\n"
        "client_id = x*\nprincipal = User:*\napi = Produce, Fetch\n"
        "versions = 3-9\ndirection = request\ntopic = t*, u?\n"
        "deny = true\ndeny_error = TOPIC_AUTHORIZATION_FAILED\n"
        "[rule r2]\napi = Produce\nallowed_acks = -1, 1\n"
        "allowed_compression = none, zstd\nclamp_min_version = 3\n"
        "clamp_max_version = 9\naudit = true\naudit_body = true\n"
        "[rule r3]\nthrottle_ms = 100\nthrottle_mode = enforce\n"
        "throttle_op = add\nthrottle_jitter_ms = 7\nfault_latency_ms = 5\n"
        "fault_error = 6\nfault_error_probability = 0.25\n"
        "fault_close_probability = 0.125\n";
    char *text = malloc(sizeof(full_conf) + sizeof(rules));
    char *d = NULL;
    size_t len = 0;
    struct kr_conf *a, *b;
    struct reload_seen seen;
    FILE *f;

    ck_assert_ptr_nonnull(text);
    snprintf(text, sizeof(full_conf) + sizeof(rules), "%s%s", full_conf,
             rules);
    a = load_ok(text);
    ck_assert_int_eq(a->nrules, 3);
    ck_assert_str_eq(a->audit.instance, "proxy-eu-1");
    f = open_memstream(&d, &len);
    ck_assert_ptr_nonnull(f);
    kr_conf_dump(a, f);
    fclose(f);
    b = load_ok(d);
    memset(&seen, 0, sizeof(seen));
    ck_assert_uint_eq(kr_conf_reload_diff(a, b, reload_collect, &seen), 0);
    ck_assert_msg(seen.n == 0, "[%s %s] %s differs", seen.sect[0],
                  seen.name[0], seen.key[0]);
    kr_conf_free(a);
    kr_conf_free(b);
    free(d);
    free(text);
}
END_TEST

/* ---- issue 8: TLS keys -------------------------------------------------- */

/* printf into a malloc'd string (the test fails on ENOMEM). */
static char *
fmt(const char *f, ...) KR_PRINTF(1, 2);

static char *
fmt(const char *f, ...)
{
    va_list ap;
    char *out = NULL;
    int n;

    va_start(ap, f);
    n = vasprintf(&out, f, ap);
    va_end(ap);
    ck_assert_int_ge(n, 0);
    return out;
}

/*
 * A TLS listener and a TLS upstream load with their contexts built from
 * the files; the dump loads back the same; a key that no section with
 * ssl = true uses is a warning at its line.
 */
START_TEST(test_tls_keys)
{
    char *text = fmt(
        "[upstream]\n"                                        /* 1 */
        "bootstrap_servers = localhost:9093\n"                /* 2 */
        "ssl = true\n"                                        /* 3 */
        "ssl_ca = %s/ca.pem\n"                                /* 4 */
        "ssl_certificate = %s/client.pem\n"                   /* 5 */
        "ssl_key = %s/client.key\n"                           /* 6 */
        "[listener]\n"                                        /* 7 */
        "listen = 127.0.0.1:19092\n"                          /* 8 */
        "broker_port_base = 19100\n"                          /* 9 */
        "ssl = true\n"                                        /* 10 */
        "ssl_certificate = %s/server.pem\n"                   /* 11 */
        "ssl_key = %s/server.key\n"                           /* 12 */
        "ssl_client_ca = %s/ca.pem\n"                         /* 13 */
        "ssl_crl = %s/crl.pem\n"                              /* 14 */
        "ssl_min_protocol = TLSv1.3\n"                        /* 15 */
        "ssl_ciphersuites = TLS_AES_128_GCM_SHA256\n"         /* 16 */
        "ssl_ciphers = ECDHE+AESGCM\n"                        /* 17 */
        "ssl_handshake_timeout_ms = 2500\n",                  /* 18 */
        certs, certs, certs, certs, certs, certs, certs);
    struct kr_conf *c = load_ok(text), *d;
    const struct kr_listener_conf *l = &c->listeners[0];
    const struct kr_upstream_conf *u = &c->upstreams[0];
    char *dump = NULL, *w;
    size_t len = 0;
    unsigned nw;
    FILE *f;

    ck_assert(l->ssl);
    ck_assert_ptr_nonnull(l->tls);
    ck_assert(l->tls->server && l->tls->verify_peer);
    ck_assert_int_eq(l->ssl_min_protocol, KR_TLS_V1_3);
    ck_assert_int_eq(SSL_CTX_get_min_proto_version(l->tls->ssl),
                     TLS1_3_VERSION);
    ck_assert_int_eq(l->ssl_handshake_timeout_ms, 2500);
    /* resumption by default: the server's cache, tickets */
    ck_assert(l->ssl_resumption && l->tls->resumption);
    ck_assert_int_eq(SSL_CTX_get_session_cache_mode(l->tls->ssl),
                     SSL_SESS_CACHE_SERVER);
    ck_assert((SSL_CTX_get_options(l->tls->ssl) & SSL_OP_NO_TICKET) == 0);
    ck_assert(u->ssl && u->ssl_verify_hostname);
    ck_assert_ptr_nonnull(u->tls);
    ck_assert(!u->tls->server && u->tls->verify_hostname);
    ck_assert_int_eq(u->ssl_min_protocol, KR_TLS_V1_2);
    w = warnings_of(c, &nw);
    ck_assert_msg(nw == 0, "%s", w);
    free(w);
    f = open_memstream(&dump, &len);
    ck_assert_ptr_nonnull(f);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(dump, "ssl_min_protocol = TLSv1.3"));
    d = load_ok(dump);
    ck_assert_ptr_nonnull(d->listeners[0].tls);
    ck_assert_uint_eq(kr_conf_reload_diff(c, d, NULL, NULL), 0);
    kr_conf_free(c);
    kr_conf_free(d);
    free(dump);
    free(text);

    /* the defaults: no TLS, nothing built */
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert(!c->listeners[0].ssl && c->listeners[0].tls == NULL);
    ck_assert(!c->upstreams[0].ssl && c->upstreams[0].tls == NULL);
    ck_assert(c->upstreams[0].ssl_verify_hostname);
    ck_assert_int_eq(c->listeners[0].ssl_handshake_timeout_ms, 10000);
    ck_assert(c->listeners[0].ssl_resumption);
    kr_conf_free(c);

    /* ssl_resumption = false: no tickets (none sent), no cache */
    text = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
               "ssl_certificate = %s/server-full.pem\n"
               "ssl_resumption = false\n", certs);
    c = load_ok(text);
    l = &c->listeners[0];
    ck_assert(!l->ssl_resumption && !l->tls->resumption);
    ck_assert_int_eq(SSL_CTX_get_session_cache_mode(l->tls->ssl),
                     SSL_SESS_CACHE_OFF);
    ck_assert((SSL_CTX_get_options(l->tls->ssl) & SSL_OP_NO_TICKET) != 0);
    ck_assert_uint_eq(SSL_CTX_get_num_tickets(l->tls->ssl), 0);
    kr_conf_free(c);
    free(text);

    /* keys without ssl = true: loaded, unused, said so */
    c = load_ok(MIN_UPSTREAM "ssl_ca = /nonexistent/ca.pem\n"
                MIN_LISTENER "ssl_certificate = /nonexistent/a.pem\n");
    ck_assert_ptr_null(c->listeners[0].tls);
    w = warnings_of(c, &nw);
    ck_assert_uint_eq(nw, 2);
    ck_assert_msg(strstr(w, "t.ini:3: [upstream]: ssl_ca is set but ssl "
                         "is not true") != NULL, "%s", w);
    ck_assert_msg(strstr(w, "t.ini:7: [listener]: ssl_certificate is set") !=
                  NULL, "%s", w);
    free(w);
    kr_conf_free(c);
}
END_TEST

/* Files that do not load and keys that go together: FILE:LINE errors. */
START_TEST(test_tls_errors)
{
    char *t;

    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/nope.pem\n", certs);
    expect_one_error(t, "t.ini:7: [listener]: ssl_certificate: cannot open ");
    expect_one_error(t, "nope.pem: No such file or directory");
    free(t);
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server.pem\n"
            "ssl_key = %s/other.key\n", certs, certs);
    expect_one_error(t, "t.ini:8: [listener]: ssl_key: ");
    expect_one_error(t, "does not match the certificate");
    free(t);
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_client_ca = %s/server.key\n", certs, certs);
    expect_one_error(t, "t.ini:8: [listener]: ssl_client_ca: ");
    free(t);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "ssl = true\n",
                     "t.ini:6: [listener]: ssl = true needs ssl_certificate");
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_crl = %s/crl.pem\n", certs, certs);
    expect_one_error(t, "t.ini:8: [listener]: ssl_crl needs ssl_client_ca");
    free(t);
    t = fmt(MIN_UPSTREAM "ssl = true\nssl_key = %s/client.key\n"
            MIN_LISTENER, certs);
    expect_one_error(t, "t.ini:4: [upstream]: ssl_key without "
                        "ssl_certificate");
    free(t);
    t = fmt(MIN_UPSTREAM "ssl = true\nssl_ca = %s/nope.pem\n" MIN_LISTENER,
            certs);
    expect_one_error(t, "t.ini:4: [upstream]: ssl_ca: cannot open ");
    free(t);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "ssl_min_protocol = TLSv1.1\n",
                     "t.ini:6: 'ssl_min_protocol': bad value 'TLSv1.1': "
                     "expected TLSv1.2 or TLSv1.3");
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_ciphers = NOPE\n", certs);
    expect_one_error(t, "t.ini:8: [listener]: ssl_ciphers: no cipher matches "
                        "'NOPE'");
    free(t);
}
END_TEST

/* The name rules map name to (kr_principal_map; "!" when none applies). */
static char *
mapped(const struct kr_principal_rules *rules, const char *name)
{
    char *out = NULL;
    size_t len;

    if (kr_principal_map(rules, name, strlen(name), &out, &len) !=
        KR_PRINCIPAL_MAPPED) {
        return strdup("!");
    }
    return out;
}

/*
 * ssl_principal_mapping_rules (issue 8): parsed at load into the
 * listener's rule list (Kafka's syntax, kr_principal.h), dumped and
 * loaded back the same; a rule that does not parse is an error at the
 * key's line with kr_principal's reason; warnings where no client
 * certificate is asked for and where the list holds no rule; a listener
 * with ssl and ssl_client_ca gives principals, so a rule on principal it
 * covers is no longer warned about.
 */
START_TEST(test_principal_rules)
{
    char *text = fmt(MIN_UPSTREAM MIN_LISTENER                /* 1-5 */
                     "ssl = true\n"                            /* 6 */
                     "ssl_certificate = %s/server-full.pem\n"  /* 7 */
                     "ssl_client_ca = %s/ca.pem\n"             /* 8 */
                     "ssl_principal_mapping_rules = "
                     "RULE:^CN=([^,]+),O=(.*)$/$2-$1/L ,"
                     " , RULE:^CN=([^,]+)$/$1/U,DEFAULT\n"     /* 9 */
                     "[rule r]\nprincipal = User:bob*\n"        /* 10-11 */
                     "deny = true\n", certs, certs);
    struct kr_conf *c = load_ok(text), *d;
    const struct kr_listener_conf *l = &c->listeners[0];
    char *dump = NULL, *w, *m, *t;
    size_t len = 0;
    unsigned nw;
    FILE *f;

    ck_assert_ptr_nonnull(l->principal_rules);
    ck_assert_uint_eq(kr_principal_mapping_rules_count(l->principal_rules),
                      3);
    m = mapped(l->principal_rules, "CN=Bob,O=Acme");
    ck_assert_str_eq(m, "acme-bob");
    free(m);
    m = mapped(l->principal_rules, "CN=bob");
    ck_assert_str_eq(m, "BOB");
    free(m);
    m = mapped(l->principal_rules, "OU=x,CN=bob");
    ck_assert_str_eq(m, "OU=x,CN=bob");
    free(m);
    w = warnings_of(c, &nw);
    ck_assert_msg(nw == 0, "%s", w);
    free(w);
    f = open_memstream(&dump, &len);
    ck_assert_ptr_nonnull(f);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(dump, "ssl_principal_mapping_rules = "
                                       "RULE:^CN=([^,]+),O=(.*)$/$2-$1/L"));
    d = load_ok(dump);
    ck_assert_ptr_nonnull(d->listeners[0].principal_rules);
    ck_assert_uint_eq(kr_conf_reload_diff(c, d, NULL, NULL), 0);
    kr_conf_free(c);
    kr_conf_free(d);
    free(dump);
    free(text);

    /* not given: Kafka's DEFAULT (no list) */
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_client_ca = %s/ca.pem\n", certs, certs);
    c = load_ok(t);
    ck_assert_ptr_null(c->listeners[0].principal_rules);
    kr_conf_free(c);
    free(t);

    /* errors at the key's line, with kr_principal's reason */
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_client_ca = %s/ca.pem\n"
            "ssl_principal_mapping_rules = DEFAULT, RULE:abc\n", certs,
            certs);
    expect_one_error(t, "t.ini:9: [listener]: ssl_principal_mapping_rules: "
                        "rule 2 (\"RULE:abc\"), column 15: no '/' after the "
                        "pattern");
    free(t);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "ssl_principal_mapping_rules = NOPE\n",
                     "t.ini:6: [listener]: ssl_principal_mapping_rules: "
                     "rule 1 (\"NOPE\"), column 1: ");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "ssl_principal_mapping_rules = RULE:^CN=(.*/x/\n",
                     "t.ini:6: [listener]: ssl_principal_mapping_rules: "
                     "rule 1 (\"RULE:^CN=(.*/x/\"), column ");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "ssl_principal_mapping_rules =\n",
                     "t.ini:6: 'ssl_principal_mapping_rules': ");

    /* warnings: nothing to map (no client certificate), no rule at all,
       no TLS; a principal rule on a listener without ssl_client_ca */
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_principal_mapping_rules = DEFAULT\n"
            "[rule r]\nprincipal = User:bob*\ndeny = true\n", certs);
    c = load_ok(t);
    w = warnings_of(c, &nw);
    /* (the rule on principal: SASL gives every listener principals) */
    ck_assert_msg(nw == 1, "%s", w);
    ck_assert_msg(strstr(w, "t.ini:8: [listener]: ssl_principal_mapping_rules"
                         " is set but ssl_client_ca is not: no client "
                         "certificate is asked for, the key is not used\n")
                  != NULL, "%s", w);
    free(w);
    kr_conf_free(c);
    free(t);
    t = fmt(MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
            "ssl_certificate = %s/server-full.pem\n"
            "ssl_client_ca = %s/ca.pem\n"
            "ssl_principal_mapping_rules = , ,\n", certs, certs);
    c = load_ok(t);
    ck_assert_uint_eq(
        kr_principal_mapping_rules_count(c->listeners[0].principal_rules), 0);
    w = warnings_of(c, &nw);
    ck_assert_msg(nw == 1 && strstr(w, "t.ini:9: [listener]: "
                                       "ssl_principal_mapping_rules holds no "
                                       "rule: no client certificate maps to "
                                       "a principal, every client is "
                                       "refused") != NULL, "%s", w);
    free(w);
    kr_conf_free(c);
    free(t);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER
                "ssl_principal_mapping_rules = DEFAULT\n");
    w = warnings_of(c, &nw);
    ck_assert_msg(nw == 1 && strstr(w, "t.ini:6: [listener]: "
                                       "ssl_principal_mapping_rules is set "
                                       "but ssl is not true") != NULL,
                  "%s", w);
    free(w);
    kr_conf_free(c);
}
END_TEST

/*
 * `principal` rules: issue 14 warned of one whose listeners had no
 * ssl_client_ca; since issue 9 every listener gives principals (SASL
 * passthrough), so none warns.
 */
START_TEST(test_principal_warning)
{
    char *t = fmt(MIN_UPSTREAM
                  "[listener m]\nlisten = 127.0.0.1:19092\n"   /* 3-4 */
                  "broker_port_base = 19100\nssl = true\n"     /* 5-6 */
                  "ssl_certificate = %s/server-full.pem\n"     /* 7 */
                  "ssl_client_ca = %s/ca.pem\n"                /* 8 */
                  "[listener p]\nlisten = 127.0.0.1:29092\n"   /* 9-10 */
                  "broker_port_base = 29100\nssl = true\n"     /* 11-12 */
                  "ssl_certificate = %s/server-full.pem\n"     /* 13 */
                  "[rule any]\nprincipal = User:a*\n"          /* 14-15 */
                  "deny = true\n"                              /* 16 */
                  "[rule on-m]\nlistener = m\n"                /* 17-18 */
                  "principal = User:a*\ndeny = true\n"         /* 19-20 */
                  "[rule on-p]\nlistener = p\n"                /* 21-22 */
                  "principal = User:a*\ndeny = true\n",        /* 23-24 */
                  certs, certs, certs);
    struct kr_conf *c = load_ok(t);
    unsigned nw;
    char *w = warnings_of(c, &nw);

    /* issue 9: a listener without ssl_client_ca gives SASL principals */
    ck_assert_msg(nw == 0, "%s", w);
    free(w);
    kr_conf_free(c);
    free(t);
}
END_TEST

/*
 * One mistake, one error: an action whose value is refused does not also
 * make its rule "have no action", and a section header that does not
 * parse does not also make the file "have no [listener]" (nor a file
 * that is not text at all).
 */
START_TEST(test_no_follow_on_errors)
{
    static const char *const actions[] = {
        "allowed_acks = 2", "allowed_compression = brotli",
        "throttle_ms = -5", "fault_error = NO_SUCH_ERROR",
        "clamp_max_version = x", "fault_close_probability = 2"
    };
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(actions); i++) {
        char *text = fmt(MIN_UPSTREAM MIN_LISTENER
                         "[rule r]\napi = Produce\n%s\n", actions[i]);
        char *key = fmt("'%.*s'", (int)strcspn(actions[i], " "),
                        actions[i]);

        expect_one_error(text, key);    /* the key's own error, alone */
        free(key);
        free(text);
    }
    expect_one_error(MIN_UPSTREAM "[listener\nlisten = 127.0.0.1:19092\n",
                     "section header without ']'");
    expect_one_error("\x01\x02garbage\n" MIN_UPSTREAM MIN_LISTENER,
                     "syntax error");
    /* with the file otherwise good, a missing section is still said */
    expect_one_error(MIN_UPSTREAM, "no [listener] section");
}
END_TEST

/*
 * A deny rule that matches everything (no api, topic or client) refuses
 * ApiVersions too: a warning at its deny line; none once it names an
 * API, a topic or a client.
 */
START_TEST(test_warn_deny_everything)
{
    static const char *const narrowing[] = {
        "api = CreateTopics", "topic = secret-*", "client_id = bad-*",
        "client_address = 10.0.0.0/8", "versions = 0-2"
    };
    struct kr_conf *c = load_ok(MIN_UPSTREAM MIN_LISTENER
                                "[rule all]\ndeny = true\n");
    unsigned nw, i;
    char *w = warnings_of(c, &nw);

    ck_assert_msg(nw == 1 && strstr(w, ":7: [rule all]: deny = true with no "
                                       "api, topic or client to match "
                                       "refuses every request") != NULL,
                  "%u: %s", nw, w);
    free(w);
    kr_conf_free(c);
    for (i = 0; i < KR_ARRAY_LEN(narrowing); i++) {
        char *text = fmt(MIN_UPSTREAM MIN_LISTENER
                         "[rule some]\ndeny = true\n%s\n", narrowing[i]);

        c = load_ok(text);
        w = warnings_of(c, &nw);
        ck_assert_msg(nw == 0, "%s: %s", narrowing[i], w);
        free(w);
        kr_conf_free(c);
        free(text);
    }
}
END_TEST

/* A TLS listener (lines 3-8), and one routing by SNI (3-9). */
#define SNI_BASE                                                             \
    "[listener s]\n"                                    /* 3 */              \
    "listen = 127.0.0.1:19093\n"                        /* 4 */              \
    "ssl = true\n"                                      /* 5 */              \
    "ssl_certificate = %s/sni-full.pem\n"               /* 6 */              \
    "node_id_min = 1\n"                                 /* 7 */              \
    "node_id_max = 3\n"                                 /* 8 */
#define SNI_LISTENER                                                         \
    SNI_BASE "sni_broker_name = Broker-$(node_id).Kafka.test\n" /* 9 */

/*
 * SNI routing: one port, the names built; no broker ports to clash with
 * another listener's, no advertised_host; its dump loads the same.
 */
START_TEST(test_sni_keys)
{
    char *text = fmt(MIN_UPSTREAM SNI_LISTENER
                     "sni_bootstrap_name = kafka.test\n"      /* 10 */
                     "sni_fallback = bootstrap\n"              /* 11 */
                     /* NodeIds 1..3 on ports 0 + n, were there any */
                     "[listener p]\nlisten = 127.0.0.1:2\n"
                     "broker_port_base = 19100\n", certs);
    struct kr_conf *c = load_ok(text), *d;
    const struct kr_listener_conf *l = &c->listeners[0];
    char *dump = NULL, *w;
    size_t len = 0;
    unsigned nw;
    int32_t id;
    FILE *f;

    ck_assert_str_eq(l->name, "s");
    ck_assert_ptr_nonnull(l->sni);
    ck_assert_str_eq(l->sni_broker_name, "Broker-$(node_id).Kafka.test");
    ck_assert_str_eq(l->sni->prefix, "broker-");
    ck_assert_str_eq(l->sni->bootstrap, "kafka.test");
    ck_assert_int_eq(l->sni->node_id_min, 1);
    ck_assert_int_eq(l->sni->node_id_max, 3);
    ck_assert_int_eq(l->sni_fallback, KR_SNI_FALLBACK_BOOTSTRAP);
    ck_assert_uint_eq(l->broker_port_base, 0);
    ck_assert_ptr_null(l->advertised_host);
    ck_assert_int_eq(kr_sni_route(l->sni, "broker-2.kafka.test", 19, &id),
                     KR_SNI_BROKER);
    ck_assert_int_eq(id, 2);
    ck_assert_ptr_null(c->listeners[1].sni);
    w = warnings_of(c, &nw);
    ck_assert_msg(nw == 0, "%s", w);
    free(w);
    f = open_memstream(&dump, &len);
    ck_assert_ptr_nonnull(f);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_null(strstr(dump, "broker_port_base = 0"));
    ck_assert_ptr_nonnull(strstr(dump, "sni_fallback = bootstrap"));
    d = load_ok(dump);
    ck_assert_ptr_nonnull(d->listeners[0].sni);
    ck_assert_uint_eq(kr_conf_reload_diff(c, d, NULL, NULL), 0);
    kr_conf_free(d);
    free(dump);
    kr_conf_free(c);
    free(text);

    /* the defaults: close; no bootstrap name; not dumped without SNI */
    text = fmt(MIN_UPSTREAM SNI_LISTENER, certs);
    c = load_ok(text);
    ck_assert_int_eq(c->listeners[0].sni_fallback, KR_SNI_FALLBACK_CLOSE);
    ck_assert_ptr_null(c->listeners[0].sni->bootstrap);
    kr_conf_free(c);
    free(text);

    /* a certificate that names none of them (localhost): one warning at
       ssl_certificate's line, the first name and how many more */
    text = fmt(MIN_UPSTREAM SNI_LISTENER "sni_bootstrap_name = kafka.test\n",
               certs);
    w = strstr(text, "sni-full.pem");
    ck_assert_ptr_nonnull(w);
    {
        /* server-full.pem for sni-full.pem */
        char *t2 = fmt("%.*sserver%s", (int)(w - text), text, w + 3);

        free(text);
        text = t2;
    }
    c = load_ok(text);
    w = warnings_of(c, &nw);
    ck_assert_msg(nw == 1 && strstr(w, "6: [listener s]: the certificate "
                                       "(ssl_certificate) does not name "
                                       "kafka.test (nor 3 other names SNI "
                                       "routing advertises)") != NULL,
                  "%u: %s", nw, w);
    free(w);
    kr_conf_free(c);
    free(text);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_ptr_null(c->listeners[0].sni);
    dump = NULL;
    f = open_memstream(&dump, &len);
    ck_assert_ptr_nonnull(f);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_null(strstr(dump, "sni_"));
    free(dump);
    kr_conf_free(c);

    /* sni_* without sni_broker_name: loaded, unused, said so */
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "sni_bootstrap_name = k.test\n"
                "sni_fallback = bootstrap\n");
    ck_assert_ptr_null(c->listeners[0].sni);
    w = warnings_of(c, &nw);
    ck_assert_uint_eq(nw, 2);
    ck_assert_msg(strstr(w, "t.ini:6: [listener]: sni_bootstrap_name is set "
                         "but sni_broker_name is not") != NULL, "%s", w);
    ck_assert_msg(strstr(w, "t.ini:7: [listener]: sni_fallback is set") !=
                  NULL, "%s", w);
    free(w);
    kr_conf_free(c);
}
END_TEST

/* text with each @D@ replaced by the test certificates' directory
   (caller frees) */
static char *
with_certs(const char *text)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    const char *at;

    ck_assert_ptr_nonnull(f);
    for (; (at = strstr(text, "@D@")) != NULL; text = at + 3) {
        fprintf(f, "%.*s%s", (int)(at - text), text, certs);
    }
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return out;
}

/*
 * krelay -T's output passes krelay -t -W: a dump prints no key its section
 * does not use (a default printed for one would load back as a key given
 * but not used: a warning).  A listener and an upstream in each mode that
 * leaves keys unused: plain (the ssl_*, sasl = terminate and
 * proxy_protocol keys), TLS without and with client certificates (the
 * principal rules), sasl = terminate (oauthbearer_principal_claim),
 * proxy_protocol, SNI routing.  Each loads with no warning, its dump loads
 * with none, and the dump of that dump is the same text.
 */
START_TEST(test_dump_no_unused_keys)
{
    static const char *const rows[] = {
        MIN_UPSTREAM MIN_LISTENER,
        "[upstream]\nbootstrap_servers = localhost:9093\nssl = true\n"
        "ssl_ca = @D@/ca.pem\n" MIN_LISTENER "ssl = true\n"
        "ssl_certificate = @D@/server-full.pem\n",
        MIN_UPSTREAM MIN_LISTENER "ssl = true\n"
        "ssl_certificate = @D@/server-full.pem\n"
        "ssl_client_ca = @D@/ca.pem\n"
        "ssl_principal_mapping_rules = RULE:^CN=(.*)$/$1/L,DEFAULT\n",
        MIN_UPSTREAM MIN_LISTENER "sasl = terminate\n"
        "sasl_credentials = @D@/users\n",
        MIN_UPSTREAM MIN_LISTENER "sasl = required\n",
        MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v2\n"
        "proxy_protocol_from = 10.0.0.0/8\n",
        MIN_UPSTREAM "[listener s]\nlisten = 127.0.0.1:19093\nssl = true\n"
        "ssl_certificate = @D@/sni-full.pem\nnode_id_min = 1\n"
        "node_id_max = 3\nsni_broker_name = broker-$(node_id).kafka.test\n"
        "sni_bootstrap_name = kafka.test\n",
    };
    const char *cred = "user SCRAM-SHA-256 salt=W22ZaJ0SNY7soEsUEjb6gQ==,"
        "stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=,"
        "server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
        "iterations=4096\n";
    char *users = fmt("%s/users", certs);
    size_t i;
    FILE *f = fopen(users, "w");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(cred, f), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(users, 0600), 0);
    for (i = 0; i < KR_ARRAY_LEN(rows); i++) {
        char *text = with_certs(rows[i]), *d1 = NULL, *d2 = NULL, *w;
        struct kr_conf *c = load_ok(text), *c2;
        size_t l1 = 0, l2 = 0;
        unsigned nw;

        w = warnings_of(c, &nw);
        ck_assert_msg(nw == 0, "row %zu: %s", i, w);
        free(w);
        f = open_memstream(&d1, &l1);
        ck_assert_ptr_nonnull(f);
        kr_conf_dump(c, f);
        fclose(f);
        c2 = load_ok(d1);
        w = warnings_of(c2, &nw);
        ck_assert_msg(nw == 0, "row %zu: the dump warns: %s", i, w);
        free(w);
        f = open_memstream(&d2, &l2);
        ck_assert_ptr_nonnull(f);
        kr_conf_dump(c2, f);
        fclose(f);
        ck_assert_str_eq(strchr(d1, '\n'), strchr(d2, '\n'));
        ck_assert_uint_eq(kr_conf_reload_diff(c, c2, NULL, NULL), 0);
        kr_conf_free(c);
        kr_conf_free(c2);
        free(d1);
        free(d2);
        free(text);
    }
    /* what each mode leaves out, and what it keeps */
    {
        char *text = with_certs(rows[0]), *d = NULL;
        struct kr_conf *c = load_ok(text);
        size_t l = 0;

        f = open_memstream(&d, &l);
        ck_assert_ptr_nonnull(f);
        kr_conf_dump(c, f);
        fclose(f);
        ck_assert_ptr_null(strstr(d, "ssl_"));
        ck_assert_ptr_null(strstr(d, "sasl_mechanisms"));
        ck_assert_ptr_null(strstr(d, "sasl_login_rate"));
        ck_assert_ptr_null(strstr(d, "proxy_protocol_timeout_ms"));
        ck_assert_ptr_nonnull(strstr(d, "\nssl = false\n"));
        ck_assert_ptr_nonnull(strstr(d, "\nsasl = passthrough\n"));
        ck_assert_ptr_nonnull(strstr(d, "\noauthbearer_principal_claim = "
                                     "sub\n"));
        ck_assert_ptr_nonnull(strstr(d, "\nproxy_protocol = off\n"));
        kr_conf_free(c);
        free(d);
        free(text);
        text = with_certs(rows[3]);
        c = load_ok(text);
        d = NULL;
        f = open_memstream(&d, &l);
        ck_assert_ptr_nonnull(f);
        kr_conf_dump(c, f);
        fclose(f);
        ck_assert_ptr_nonnull(strstr(d, "\nsasl_login_rate = 5,20\n"));
        ck_assert_ptr_null(strstr(d, "oauthbearer_principal_claim"));
        kr_conf_free(c);
        free(d);
        free(text);
    }
    ck_assert_int_eq(unlink(users), 0);
    free(users);
}
END_TEST

/* The 1-based line of text where needle first starts (0: not there). */
static int
line_of(const char *text, const char *needle)
{
    const char *at = strstr(text, needle), *p;
    int n = 1;

    if (at == NULL) {
        return 0;
    }
    for (p = text; p < at; p++) {
        n += *p == '\n';
    }
    return n;
}

/*
 * An inline secret is dumped as "(not shown: a secret)", and that
 * placeholder loaded back is refused with one error at its line naming
 * the key, not taken for the secret: without it a dump loaded back
 * authenticated with the placeholder (the admin endpoint's token became
 * those words).  A value that only contains them is a secret like any.
 */
START_TEST(test_dump_secret_refused)
{
    static const struct {
        const char *text;
        const char *secret;
        const char *key;
        const char *sect;
    } t[] = {
        { MIN_UPSTREAM MIN_LISTENER "[admin]\nlisten = :9644\n"
          "bearer_token = tok-inline\n", "tok-inline", "bearer_token",
          "[admin]" },
        { "[upstream east]\nbootstrap_servers = k1:9092\n"
          "sasl_mechanism = PLAIN\nsasl_username = k\n"
          "sasl_password = pw-inline\n" MIN_LISTENER, "pw-inline",
          "sasl_password", "[upstream east]" },
        { MIN_UPSTREAM "sasl_mechanism = OAUTHBEARER\n"
          "sasl_oauthbearer_token = jwt-inline\n" MIN_LISTENER,
          "jwt-inline", "sasl_oauthbearer_token", "[upstream]" },
    };
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(t); i++) {
        struct kr_conf *c = load_ok(t[i].text);
        char *d = dump_of(c), *key_line = fmt("\n%s = (not shown: a "
                                              "secret)\n", t[i].key);
        char *want = fmt("t.ini:%d: %s: %s: krelay -T hid this secret; set "
                         "it again (or %s_file)", line_of(d, key_line) + 1,
                         t[i].sect, t[i].key, t[i].key);

        ck_assert_msg(strstr(d, key_line) != NULL, "row %zu: %s", i, d);
        ck_assert_ptr_null(strstr(d, t[i].secret));
        expect_one_error(d, want);
        kr_conf_free(c);
        free(d);
        free(key_line);
        free(want);
    }
    /* only the placeholder whole: a password that contains it loads */
    {
        struct kr_conf *c = load_ok(MIN_UPSTREAM "sasl_mechanism = PLAIN\n"
                                    "sasl_username = k\nsasl_password = "
                                    "x(not shown: a secret)\n" MIN_LISTENER);

        ck_assert_str_eq(c->upstreams[0].sasl.secret,
                         "x(not shown: a secret)");
        kr_conf_free(c);
    }
    /* the key not secret: a value like any (a user name) */
    {
        struct kr_conf *c = load_ok(MIN_UPSTREAM "sasl_mechanism = PLAIN\n"
                                    "sasl_username = (not shown: a secret)"
                                    "\nsasl_password = p\n" MIN_LISTENER);

        ck_assert_str_eq(c->upstreams[0].sasl.username,
                         "(not shown: a secret)");
        kr_conf_free(c);
    }
}
END_TEST

/*
 * issue 10: the legacy keys, their defaults, their values dumped and read
 * back, the choices in their enums' order, and bad values.
 */
START_TEST(test_legacy_keys)
{
    struct kr_conf *c = load_ok(MIN_UPSTREAM MIN_LISTENER), *d;
    const struct kr_listener_conf *l = &c->listeners[0];
    struct kr_conf_key_desc kd;
    char *dump = NULL;
    size_t len = 0, i;
    bool seen = false;
    FILE *f;

    /* defaults */
    ck_assert_int_eq(c->upstreams[0].broker_profile,
                     KR_BROKER_PROFILE_LEARNED);
    ck_assert(!l->translate_legacy);
    ck_assert_int_eq(l->legacy_zstd, 0);                /* gzip */
    ck_assert_int_eq(l->legacy_batch_max_bytes, 1048576);
    ck_assert_int_eq(l->legacy_fetch_max_bytes, 2097152);
    ck_assert_int_eq(l->legacy_refuse_delay_ms, 1000);
    ck_assert_int_eq(l->legacy_refuse_window_ms, 10000);
    kr_conf_free(c);

    c = load_ok(MIN_UPSTREAM "broker_profile = kafka-4.0.1+\n" MIN_LISTENER
                "translate_legacy = true\nlegacy_zstd = refuse\n"
                "legacy_batch_max_bytes = 0\nlegacy_refuse_delay_ms = 0\n"
                "legacy_refuse_window_ms = 60000\n"
                "legacy_fetch_max_bytes = 65536\n");
    l = &c->listeners[0];
    ck_assert_int_eq(c->upstreams[0].broker_profile,
                     KR_BROKER_PROFILE_KAFKA_4_0_1);
    ck_assert(l->translate_legacy);
    ck_assert_int_eq(l->legacy_zstd, 2);                /* refuse */
    ck_assert_int_eq(l->legacy_batch_max_bytes, 0);
    ck_assert_int_eq(l->legacy_fetch_max_bytes, 65536);
    ck_assert_int_eq(l->legacy_refuse_delay_ms, 0);
    ck_assert_int_eq(l->legacy_refuse_window_ms, 60000);
    f = open_memstream(&dump, &len);
    ck_assert_ptr_nonnull(f);
    kr_conf_dump(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(dump, "broker_profile = kafka-4.0.1+"));
    ck_assert_ptr_nonnull(strstr(dump, "legacy_zstd = refuse"));
    ck_assert_ptr_nonnull(strstr(dump, "legacy_fetch_max_bytes = 65536"));
    d = load_ok(dump);
    ck_assert_uint_eq(kr_conf_reload_diff(c, d, NULL, NULL), 0);
    kr_conf_free(d);
    free(dump);
    kr_conf_free(c);

    /* broker_profile's choices are kr_broker_profile_name's, in order */
    for (i = 0; kr_conf_key(i, &kd); i++) {
        size_t n;

        if (strcmp(kd.name, "broker_profile") != 0) {
            continue;
        }
        seen = true;
        ck_assert_ptr_nonnull(kd.choices);
        for (n = 0; kd.choices[n] != NULL; n++) {
            ck_assert_str_eq(kd.choices[n], kr_broker_profile_name((int)n));
        }
        ck_assert_uint_eq(n, 3);
    }
    ck_assert(seen);

    expect_one_error(MIN_UPSTREAM "broker_profile = kafka-4\n" MIN_LISTENER,
                     "t.ini:3: 'broker_profile': bad value 'kafka-4': "
                     "expected learned, kafka-4.0.0 or kafka-4.0.1+");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "legacy_zstd = lz4\n",
                     "t.ini:6: 'legacy_zstd': bad value 'lz4': expected "
                     "gzip, none or refuse");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "legacy_refuse_delay_ms = 60001\n",
                     "t.ini:6: 'legacy_refuse_delay_ms'");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "legacy_batch_max_bytes = -1\n",
                     "t.ini:6: 'legacy_batch_max_bytes'");
    /* below 64 KiB a consumer of large records would crawl */
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "legacy_fetch_max_bytes = 65535\n",
                     "t.ini:6: 'legacy_fetch_max_bytes'");
}
END_TEST

/* c's dump (caller frees) */
static char *
dump_of(const struct kr_conf *c)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    ck_assert_ptr_nonnull(f);
    kr_conf_dump(c, f);
    ck_assert_int_eq(fclose(f), 0);
    return out;
}

/*
 * krelay -t warns of a legacy_fetch_max_bytes given above half of
 * max_frame_bytes (the half applies: -T prints it), at its line; not of
 * the default above it, of the half itself, or of the key's least value
 * (65536) when the half is below that (-T prints the least then, and its
 * output must load back without a warning).
 */
START_TEST(test_warn_legacy_fetch_above_half)
{
    static const struct {
        const char *keys;               /* the listener's */
        const char *want;               /* the one warning, or NULL */
    } t[] = {
        { "max_frame_bytes = 1048576\nlegacy_fetch_max_bytes = 1048576\n",
          "t.ini:8: [listener]: legacy_fetch_max_bytes = 1048576 is above "
          "half of max_frame_bytes (1048576): 524288 applies (krelay holds "
          "a translated Fetch response whole, within max_frame_bytes)\n" },
        { "max_frame_bytes = 65536\nlegacy_fetch_max_bytes = 131072\n",
          "t.ini:8: [listener]: legacy_fetch_max_bytes = 131072 is above "
          "half of max_frame_bytes (65536): 32768 applies (krelay holds a "
          "translated Fetch response whole, within max_frame_bytes)\n" },
        { "max_frame_bytes = 1048576\n", NULL },
        { "max_frame_bytes = 1048576\nlegacy_fetch_max_bytes = 524288\n",
          NULL },
        { "max_frame_bytes = 65536\nlegacy_fetch_max_bytes = 65536\n",
          NULL },
    };
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(t); i++) {
        char *text = fmt(MIN_UPSTREAM MIN_LISTENER "translate_legacy = true\n"
                         "%s", t[i].keys);
        struct kr_conf *c = load_ok(text), *d;
        char *w, *dump;
        unsigned n;

        w = warnings_of(c, &n);
        if (t[i].want != NULL) {
            ck_assert_msg(n == 1, "row %zu: %u warnings: %s", i, n, w);
            ck_assert_str_eq(w, t[i].want);
        } else {
            ck_assert_msg(n == 0, "row %zu: %s", i, w);
        }
        free(w);
        /* -T's output of it: no warning */
        dump = dump_of(c);
        d = load_ok(dump);
        w = warnings_of(d, &n);
        ck_assert_msg(n == 0, "row %zu: the dump warns: %s", i, w);
        free(w);
        free(dump);
        kr_conf_free(d);
        kr_conf_free(c);
        free(text);
    }
}
END_TEST

/*
 * legacy_fetch_max_bytes as it applies: a translated Fetch's MaxBytes is
 * at most half of max_frame_bytes too (kr_analyse.c, legacy_fetch_cap),
 * so the loader keeps it to that, and -T prints it after a comment saying
 * so; a half below the key's least value (65536) is printed as the least,
 * which loads back to the same half.  Each dump loads back to the same
 * value, with no warning, and dumps the same text.  A reload that lowers
 * max_frame_bytes below twice the value says that it changes too.
 */
START_TEST(test_dump_legacy_fetch_cap)
{
    static const struct {
        const char *keys;               /* the listener's */
        const char *want;               /* in the dump */
        int64_t loaded;                 /* legacy_fetch_max_bytes loaded
                                           (and of the dump loaded) */
    } t[] = {
        /* the default 2 MiB, frames of 1 MiB: 512 KiB applies */
        { "max_frame_bytes = 1048576\n",
          "\nmax_frame_bytes = 1048576\n", 524288 },
        { "max_frame_bytes = 1048576\n",
          "\n; legacy_fetch_max_bytes: at most half of max_frame_bytes, "
          "524288, applies (krelay holds a translated response whole)\n"
          "legacy_fetch_max_bytes = 524288\n", 524288 },
        /* exactly the half: the same comment, the same value */
        { "max_frame_bytes = 4194304\n",
          "\n; legacy_fetch_max_bytes: at most half of max_frame_bytes, "
          "2097152, applies (krelay holds a translated response whole)\n"
          "legacy_fetch_max_bytes = 2097152\n", 2097152 },
        /* below the half: as given, no comment */
        { "max_frame_bytes = 4194304\nlegacy_fetch_max_bytes = 1048576\n",
          "\nlegacy_batch_max_bytes = 1048576\n"
          "legacy_fetch_max_bytes = 1048576\n", 1048576 },
        /* a half below 65536: the comment gives it, the least printed */
        { "max_frame_bytes = 65536\n",
          "\n; legacy_fetch_max_bytes: at most half of max_frame_bytes, "
          "32768, applies (krelay holds a translated response whole)\n"
          "legacy_fetch_max_bytes = 65536\n", 32768 },
    };
    struct reload_seen seen;
    struct kr_conf *a, *b;
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(t); i++) {
        char *text = fmt(MIN_UPSTREAM MIN_LISTENER "translate_legacy = true\n"
                         "%s", t[i].keys);
        struct kr_conf *c = load_ok(text), *d;
        char *d1 = dump_of(c), *d2;
        unsigned nw;
        char *w;

        ck_assert_int_eq(c->listeners[0].legacy_fetch_max_bytes,
                         t[i].loaded);
        ck_assert_msg(strstr(d1, t[i].want) != NULL, "row %zu: want \"%s\" "
                      "in \"%s\"", i, t[i].want, d1);
        d = load_ok(d1);
        ck_assert_int_eq(d->listeners[0].legacy_fetch_max_bytes,
                         t[i].loaded);
        w = warnings_of(d, &nw);
        ck_assert_msg(nw == 0, "row %zu: %s", i, w);
        free(w);
        d2 = dump_of(d);
        ck_assert_str_eq(strchr(d1, '\n'), strchr(d2, '\n'));
        kr_conf_free(c);
        kr_conf_free(d);
        free(d1);
        free(d2);
        free(text);
    }
    a = load_ok(MIN_UPSTREAM MIN_LISTENER);
    b = load_ok(MIN_UPSTREAM MIN_LISTENER "max_frame_bytes = 1048576\n");
    memset(&seen, 0, sizeof(seen));
    kr_conf_reload_diff(a, b, reload_collect, &seen);
    ck_assert_int_eq(seen.n, 2);
    ck_assert_str_eq(seen.key[0], "max_frame_bytes");
    ck_assert_str_eq(seen.key[1], "legacy_fetch_max_bytes");
    kr_conf_free(a);
    kr_conf_free(b);
}
END_TEST

/* What does not go with SNI routing, and names that are no names. */
START_TEST(test_sni_errors)
{
    static const struct {
        const char *extra;              /* lines 10.. (9.. with a pattern
                                           of its own) */
        const char *want;
    } t[] = {
        { "broker_port_base = 19100\n",
          "t.ini:10: [listener s]: broker_port_base does not go with "
          "sni_broker_name" },
        { "advertised_host = kafka.test\n",
          "t.ini:10: [listener s]: advertised_host does not go with "
          "sni_broker_name" },
        { "sni_broker_name = broker.kafka.test\n",
          "t.ini:9: [listener s]: sni_broker_name = broker.kafka.test: no "
          "$(node_id) in it" },
        { "sni_broker_name = b$(node_id)$(node_id).kafka.test\n",
          "t.ini:9: [listener s]: sni_broker_name = "
          "b$(node_id)$(node_id).kafka.test: $(node_id) twice" },
        { "sni_broker_name = b*$(node_id).kafka.test\n",
          "'*' at offset 1: a host name has letters" },
        { "sni_bootstrap_name = kafka_test\n",
          "t.ini:10: [listener s]: sni_bootstrap_name = kafka_test is not a "
          "host name: '_' at offset 5" },
        { "sni_bootstrap_name = broker-12.kafka.test\n",
          "t.ini:10: [listener s]: sni_bootstrap_name = broker-12.kafka.test: "
          "the bootstrap name broker-12.kafka.test has the form of a "
          "broker's name (NodeId 12)" },
        { "sni_fallback = nowhere\n",
          "t.ini:10: 'sni_fallback': bad value 'nowhere': expected close "
          "or bootstrap" },
        { "sni_broker_name = "
          "ab123456789012345678901234567890123456789012345678901234567890-"
          "$(node_id).kafka.test\n",
          "NodeId 3's name would be no host name: the label at offset 0 "
          "has 64 characters" },
    };
    size_t i;

    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char *text = strstr(t[i].extra, "sni_broker_name") != NULL
                         ? fmt(MIN_UPSTREAM SNI_BASE "%s", certs, t[i].extra)
                         : fmt(MIN_UPSTREAM SNI_LISTENER "%s", certs,
                               t[i].extra);

        expect_one_error(text, t[i].want);
        free(text);
    }
    expect_one_error(MIN_UPSTREAM "[listener s]\nlisten = 127.0.0.1:19093\n"
                     "sni_broker_name = b-$(node_id).kafka.test\n",
                     "t.ini:5: [listener s]: sni_broker_name needs ssl = "
                     "true: the name comes from the client's TLS handshake");
    /* without SNI routing, a port per NodeId */
    expect_one_error(MIN_UPSTREAM "[listener x]\nlisten = h:1\n",
                     "t.ini:3: [listener x]: missing required key "
                     "'broker_port_base' (or sni_broker_name");
}
END_TEST

/*
 * proxy_protocol (issue 12): the versions, the trusted senders parsed as
 * client_address networks are, required with it, warned about without.
 */
START_TEST(test_proxy_protocol)
{
    struct kr_conf *c;
    const struct kr_listener_conf *l;

    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_int_eq(c->listeners[0].proxy_protocol, 0);
    ck_assert_int_eq(c->listeners[0].nproxy_protocol_from, 0);
    ck_assert_int_eq(c->listeners[0].proxy_protocol_timeout_ms, 5000);
    kr_conf_free(c);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v2\n"
                "proxy_protocol_from = 10.1.2.3/8, 2001:db8::/32,"
                "127.0.0.1\nproxy_protocol_timeout_ms = 3000\n");
    l = &c->listeners[0];
    ck_assert_int_eq(l->proxy_protocol, 2);
    ck_assert_int_eq(l->nproxy_protocol_from, 3);
    ck_assert_int_eq(l->proxy_protocol_from[0].family, AF_INET);
    ck_assert_int_eq(l->proxy_protocol_from[0].bits, 8);
    ck_assert_int_eq(l->proxy_protocol_from[0].addr[0], 10);
    ck_assert_int_eq(l->proxy_protocol_from[0].addr[1], 0);
    ck_assert_int_eq(l->proxy_protocol_from[1].family, AF_INET6);
    ck_assert_int_eq(l->proxy_protocol_from[1].bits, 32);
    ck_assert_int_eq(l->proxy_protocol_from[2].bits, 32);
    ck_assert_int_eq(l->proxy_protocol_timeout_ms, 3000);
    ck_assert_int_eq(c->nwarnings, 0);
    kr_conf_free(c);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v1\n"
                "proxy_protocol_from = 0.0.0.0/0\n");
    ck_assert_int_eq(c->listeners[0].proxy_protocol, 1);
    kr_conf_free(c);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = any\n"
                "proxy_protocol_from = ::/0\n");
    ck_assert_int_eq(c->listeners[0].proxy_protocol, 3);
    kr_conf_free(c);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v1\n",
                     "t.ini:6: [listener]: proxy_protocol = v1 needs "
                     "proxy_protocol_from: the addresses of the load "
                     "balancers trusted to send the header");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v2\n"
                     "proxy_protocol_from = 10.0.0.0/33\n",
                     "t.ini:7: 'proxy_protocol_from': bad value "
                     "'10.0.0.0/33': '10.0.0.0/33' is not ADDR[/BITS] (IPv4 "
                     "or IPv6)");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v2\n"
                     "proxy_protocol_from = 10.0.0.0/8,,::1\n",
                     "t.ini:7: 'proxy_protocol_from': bad value");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v3\n"
                     "proxy_protocol_from = 10.0.0.0/8\n",
                     "t.ini:6: 'proxy_protocol': bad value 'v3': expected "
                     "off, v1, v2 or any");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "proxy_protocol = v2\n"
                     "proxy_protocol_from = 10.0.0.0/8\n"
                     "proxy_protocol_timeout_ms = 50\n",
                     "t.ini:8: 'proxy_protocol_timeout_ms': bad value '50'");
    /* without proxy_protocol: not used, a warning each */
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "proxy_protocol_from = 10.0.0.0/8\n"
                "proxy_protocol_timeout_ms = 3000\n");
    ck_assert_int_eq(c->nwarnings, 2);
    ck_assert_int_eq(c->warnings[0].line, 6);
    ck_assert_str_eq(c->warnings[0].text, "[listener]: proxy_protocol_from "
                     "is set but proxy_protocol is off: no header is read, "
                     "the key is not used");
    ck_assert_int_eq(c->warnings[1].line, 7);
    kr_conf_free(c);
}
END_TEST

/*
 * [process] workers: the CPUs krelay may run on by default, or
 * $KRELAY_WORKERS (make check-workers), which a key in the file beats;
 * 1..256.
 */
START_TEST(test_process_workers)
{
    const char *env = getenv("KRELAY_WORKERS");
    char *saved = env != NULL ? strdup(env) : NULL;
    struct kr_conf *c;
    cpu_set_t set;
    int64_t cpus;

    CPU_ZERO(&set);
    ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    cpus = CPU_COUNT(&set) > KR_WORKERS_MAX ? KR_WORKERS_MAX
                                             : CPU_COUNT(&set);
    unsetenv("KRELAY_WORKERS");
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_int_eq(c->process.workers, cpus);
    kr_conf_free(c);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = 3\n");
    ck_assert_int_eq(c->process.workers, 3);
    kr_conf_free(c);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = 0\n",
                     "workers");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER
                     "[process]\nworkers = 257\n", "workers");
    setenv("KRELAY_WORKERS", "5", 1);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_int_eq(c->process.workers, 5);
    kr_conf_free(c);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = 2\n");
    ck_assert_int_eq(c->process.workers, 2);
    kr_conf_free(c);
    setenv("KRELAY_WORKERS", "0", 1);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER, "KRELAY_WORKERS");
    setenv("KRELAY_WORKERS", "2x", 1);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER, "KRELAY_WORKERS");
    /* a bad $KRELAY_WORKERS is only a bad default: the file's key wins */
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = 2\n");
    ck_assert_int_eq(c->process.workers, 2);
    kr_conf_free(c);
    setenv("KRELAY_WORKERS", "0", 1);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = 3\n");
    ck_assert_int_eq(c->process.workers, 3);
    kr_conf_free(c);
    /* ... and a bad key stays one error, the key's */
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = x\n",
                     "workers");
    /* the value read as the file's: blanks around it dropped, '+' and
       other signs of strtoll's leniency refused */
    setenv("KRELAY_WORKERS", " 3", 1);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_int_eq(c->process.workers, 3);
    kr_conf_free(c);
    setenv("KRELAY_WORKERS", "4 \t", 1);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER);
    ck_assert_int_eq(c->process.workers, 4);
    kr_conf_free(c);
    c = load_ok(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers =  3 \n");
    ck_assert_int_eq(c->process.workers, 3);
    kr_conf_free(c);
    setenv("KRELAY_WORKERS", "+3", 1);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER, "KRELAY_WORKERS");
    expect_one_error(MIN_UPSTREAM MIN_LISTENER "[process]\nworkers = +3\n",
                     "workers");
    setenv("KRELAY_WORKERS", " ", 1);
    expect_one_error(MIN_UPSTREAM MIN_LISTENER, "KRELAY_WORKERS");
    if (saved != NULL) {
        setenv("KRELAY_WORKERS", saved, 1);
    } else {
        unsetenv("KRELAY_WORKERS");
    }
    free(saved);
}
END_TEST

static Suite *
conf_suite(void)
{
    Suite *s = suite_create("conf");
    TCase *tc = tcase_create("conf");
    TCase *tk = tcase_create("kerr");
    TCase *tl = tcase_create("log");
    TCase *tr = tcase_create("reload");
    int nrows = (int)(sizeof(reload_rows) / sizeof(reload_rows[0]));

    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_admin_keys);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_proxy_protocol);
    tcase_add_test(tc, test_advertised_default);
    tcase_add_test(tc, test_warn_wildcard_listen);
    tcase_add_test(tc, test_warn_syslog_socket);
    tcase_add_test(tc, test_err_wildcard_advertised);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_long_line_ok);
    tcase_add_test(tc, test_long_line_error);
    tcase_add_test(tc, test_dump_roundtrip);
    tcase_add_test(tc, test_process_workers);
    tcase_add_test(tc, test_example_file);
    tcase_add_test(tc, test_load_missing_file);
    tcase_add_test(tc, test_load_file_errors);
    tcase_add_test(tc, test_err_unknown_section);
    tcase_add_test(tc, test_err_target_stream);
    tcase_add_test(tc, test_err_unknown_key);
    tcase_add_test(tc, test_err_values);
    tcase_add_test(tc, test_err_hostport);
    tcase_add_test(tc, test_hostport_parse);
    tcase_add_test(tc, test_err_missing_required);
    tcase_add_test(tc, test_err_ports);
    tcase_add_test(tc, test_err_listener_clash);
    tcase_add_test(tc, test_err_upstream_refs);
    tcase_add_test(tc, test_stand_in_upstream);
    tcase_add_test(tc, test_err_duplicates);
    tcase_add_test(tc, test_err_all_collected);
    tcase_add_unchecked_fixture(tc, certs_setup, certs_teardown);
    tcase_add_test(tc, test_tls_keys);
    tcase_add_test(tc, test_sasl_keys);
    tcase_add_test(tc, test_tls_errors);
    tcase_add_test(tc, test_sasl_terminate);
    tcase_add_test(tc, test_sni_keys);
    tcase_add_test(tc, test_dump_no_unused_keys);
    tcase_add_test(tc, test_dump_secret_refused);
    tcase_add_test(tc, test_no_follow_on_errors);
    tcase_add_test(tc, test_warn_deny_everything);
    tcase_add_test(tc, test_sni_errors);
    tcase_add_test(tc, test_legacy_keys);
    tcase_add_test(tc, test_dump_legacy_fetch_cap);
    tcase_add_test(tc, test_warn_legacy_fetch_above_half);
    tcase_add_test(tc, test_principal_rules);
    tcase_add_test(tc, test_principal_warning);
    suite_add_tcase(s, tc);

    tcase_add_unchecked_fixture(tr, certs_setup, certs_teardown);
    tcase_add_test(tr, test_reload_attributes);
    tcase_add_test(tr, test_key_docs);
    tcase_add_loop_test(tr, test_reload_diff_key, 0, nrows);
    tcase_add_loop_test(tr, test_reload_as_today, 0, nrows);
    tcase_add_test(tr, test_reload_diff_sections);
    tcase_add_test(tr, test_reload_diff_dump);
    suite_add_tcase(s, tr);

    tcase_add_test(tk, test_kerr_names);
    suite_add_tcase(s, tk);

    tcase_add_test(tl, test_log_levels);
    tcase_add_test(tl, test_log_file_reopen);
    tcase_add_test(tl, test_log_long_line);
    tcase_add_test(tl, test_log_ratelimit);
    tcase_add_test(tl, test_log_rl_flush);
    tcase_add_test(tl, test_log_threads);
    suite_add_tcase(s, tl);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(conf_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
