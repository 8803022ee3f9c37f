/*
 * check_sasl_users.c - the credentials file (kr_sasl_users): entries,
 * comments and blank lines; each refusal with its line and reason
 * (fields, user names with whitespace, mechanisms, credentials,
 * duplicates); lookups; the mode warning of a file others can read;
 * krelay-passwd's line (run from $top_builddir): it loads here and its
 * credential takes the password and refuses another; its usage errors;
 * on a terminal (a pty): echo off at the prompt and back after Ctrl-C,
 * an empty first password refused before "Again:", two equal ones.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "kr_sasl_users.h"

/* RFC 7677's "user"/"pencil" credential (check_scram.c derives it) */
#define CRED_256 "salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=WG5d8oPm3OtcPnkdi" \
    "4Uo7BkeZkBFzpcXkuLmtbsT4qY=,server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQx" \
    "SrmfPwDl2dU=,iterations=4096"
#define CRED_512 "salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=6AAub3065EYRmyFpM" \
    "2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg==" \
    ",server_key=jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSV" \
    "kkCFewf91nLDfKF24mvD5nmE6rA==,iterations=4096"

static struct kr_sasl_users *
load(const char *text, char *err, size_t errlen)
{
    return kr_sasl_users_load_text(text, strlen(text), "users.txt", err,
                                   errlen);
}

START_TEST(entries)
{
    char err[256] = "";
    struct kr_sasl_users *u = load(
        "# krelay users\n"
        "\n"
        "   \t\n"
        "  # indented comment\n"
        "user SCRAM-SHA-256 " CRED_256 "\n"
        "user\tSCRAM-SHA-512\t" CRED_512 "\r\n"
        "alice SCRAM-SHA-512 " CRED_512, err, sizeof(err));
    const struct kr_scram_cred *c;

    ck_assert_msg(u != NULL, "%s", err);
    ck_assert_uint_eq(u->n, 3);
    ck_assert_ptr_null(u->warning);
    c = kr_sasl_users_lookup(u, "user", KR_SCRAM_SHA256);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->hash, KR_SCRAM_SHA256);
    ck_assert_int_eq(kr_scram_check_password(c, (const uint8_t *)"pencil", 6),
                     KR_SCRAM_OK);
    c = kr_sasl_users_lookup(u, "user", KR_SCRAM_SHA512);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(kr_scram_check_password(c, (const uint8_t *)"pencil", 6),
                     KR_SCRAM_OK);
    ck_assert_ptr_nonnull(kr_sasl_users_lookup(u, "alice", KR_SCRAM_SHA512));
    ck_assert_ptr_null(kr_sasl_users_lookup(u, "alice", KR_SCRAM_SHA256));
    ck_assert_ptr_null(kr_sasl_users_lookup(u, "User", KR_SCRAM_SHA256));
    ck_assert_ptr_null(kr_sasl_users_lookup(u, "", KR_SCRAM_SHA256));
    kr_sasl_users_free(u);
    u = load("", err, sizeof(err));
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->n, 0);
    ck_assert_ptr_null(kr_sasl_users_lookup(u, "user", KR_SCRAM_SHA256));
    kr_sasl_users_free(u);
    kr_sasl_users_free(NULL);
}
END_TEST

START_TEST(refusals)
{
    static const struct {
        const char *text, *err;
    } bad[] = {
        { "# c\nuser SCRAM-SHA-256\n", "users.txt:2: want USER MECHANISM "
          "CREDENTIAL, found fewer fields (user names may not contain "
          "whitespace)" },
        { "jo hn SCRAM-SHA-256 " CRED_256, "users.txt:1: want USER MECHANISM"
          " CREDENTIAL, found more than three fields (user names may not "
          "contain whitespace)" },
        { "\n\nuser PLAIN " CRED_256, "users.txt:3: mechanism must be "
          "SCRAM-SHA-256 or SCRAM-SHA-512; write the line again with "
          "krelay-passwd(1)" },
        { "user scram-sha-256 " CRED_256, "users.txt:1: mechanism must be" },
        { "user SCRAM-SHA-256 " CRED_512, "users.txt:1: credential: "
          "stored_key or server_key is not base64 of 32 bytes (SHA-256)" },
        { "user SCRAM-SHA-256 password=pencil", "users.txt:1: credential: "
          "unknown key (want salt, stored_key, server_key, iterations); "
          "write the line again with krelay-passwd(1)" },
        { "user SCRAM-SHA-256 salt=W22ZaJ0SNY7soEsUEjb6gQ==,iterations=4096",
          "users.txt:1: credential: salt, stored_key, server_key and "
          "iterations are all needed" },
        { "u\x01 SCRAM-SHA-256 " CRED_256, "users.txt:1: control character" },
        { "u\xff SCRAM-SHA-256 " CRED_256, "users.txt:1: user name is not "
          "valid UTF-8" },
        { "a SCRAM-SHA-256 " CRED_256 "\nb SCRAM-SHA-256 " CRED_256 "\n"
          "a SCRAM-SHA-512 " CRED_512 "\na SCRAM-SHA-256 " CRED_256 "\n",
          "users.txt:4: user a has a SCRAM-SHA-256 entry already (line 1)" },
        /* several: the earliest line, not the first name in sort order */
        { "z SCRAM-SHA-256 " CRED_256 "\na SCRAM-SHA-256 " CRED_256 "\n"
          "z SCRAM-SHA-256 " CRED_256 "\na SCRAM-SHA-256 " CRED_256 "\n"
          "z SCRAM-SHA-256 " CRED_256 "\n",
          "users.txt:3: user z has a SCRAM-SHA-256 entry already (line 1)" },
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[512] = "";

        ck_assert_ptr_null(load(bad[i].text, err, sizeof(err)));
        ck_assert_msg(strncmp(err, bad[i].err, strlen(bad[i].err)) == 0,
                      "row %zu: '%s', want '%s'", i, err, bad[i].err);
    }
}
END_TEST

START_TEST(from_file)
{
    char path[] = "/tmp/krelay-users-XXXXXX", err[512] = "";
    struct kr_sasl_users *u;
    FILE *f;
    int fd = mkstemp(path);

    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs("user SCRAM-SHA-256 " CRED_256 "\n", f);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0600), 0);
    u = kr_sasl_users_load(path, err, sizeof(err));
    ck_assert_msg(u != NULL, "%s", err);
    ck_assert_uint_eq(u->n, 1);
    ck_assert_ptr_null(u->warning);
    kr_sasl_users_free(u);
    /* readable by others: loads, with a warning for the log */
    ck_assert_int_eq(chmod(path, 0644), 0);
    u = kr_sasl_users_load(path, err, sizeof(err));
    ck_assert_ptr_nonnull(u);
    ck_assert_ptr_nonnull(u->warning);
    ck_assert_ptr_nonnull(strstr(u->warning, "mode 0644"));
    ck_assert_ptr_nonnull(strstr(u->warning, "chmod 600"));
    ck_assert_int_eq(strncmp(u->warning, path, strlen(path)), 0);
    kr_sasl_users_free(u);
    /* a bad line: the path and the line */
    f = fopen(path, "a");
    fputs("bad line\n", f);
    fclose(f);
    ck_assert_ptr_null(kr_sasl_users_load(path, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, ":2: want USER"));
    ck_assert_int_eq(strncmp(err, path, strlen(path)), 0);
    unlink(path);
    ck_assert_ptr_null(kr_sasl_users_load(path, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
    ck_assert_ptr_null(kr_sasl_users_load("/tmp", err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
}
END_TEST


/*
 * Run krelay-passwd with args and the password text on stdin (through
 * a file: no shell quoting of the password); its stdout into out, its
 * exit status returned.
 */
static int
run_passwd(const char *args, const char *stdin_text, char *out, size_t cap,
           char *errout, size_t errcap)
{
    const char *top = getenv("top_builddir");
    char in[] = "/tmp/krelay-pw-in-XXXXXX", eo[] = "/tmp/krelay-pw-err-XXXXXX";
    char cmd[1024];
    FILE *p, *e;
    size_t n;
    int fd, st;

    fd = mkstemp(in);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, stdin_text, strlen(stdin_text)),
                     (ssize_t)strlen(stdin_text));
    close(fd);
    fd = mkstemp(eo);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(cmd, sizeof(cmd), "%s/krelay-passwd %s <%s 2>%s",
             top != NULL ? top : ".", args, in, eo);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    st = pclose(p);
    e = fopen(eo, "r");
    n = fread(errout, 1, errcap - 1, e);
    errout[n] = '\0';
    fclose(e);
    unlink(in);
    unlink(eo);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

START_TEST(krelay_passwd_line)
{
    char out[1024], eo[1024], err[512];
    struct kr_sasl_users *u;
    const struct kr_scram_cred *c;

    /* defaults: SCRAM-SHA-512, 8192 iterations; one line from a pipe */
    ck_assert_int_eq(run_passwd("svc-a", "t0p secret\nignored\n", out,
                                sizeof(out), eo, sizeof(eo)), 0);
    ck_assert_msg(strncmp(out, "svc-a SCRAM-SHA-512 salt=", 25) == 0, "%s",
                  out);
    ck_assert_ptr_nonnull(strstr(out, ",iterations=8192\n"));
    ck_assert_ptr_null(strstr(out, "t0p"));
    u = load(out, err, sizeof(err));
    ck_assert_msg(u != NULL, "%s", err);
    c = kr_sasl_users_lookup(u, "svc-a", KR_SCRAM_SHA512);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(kr_scram_check_password(c, (const uint8_t *)"t0p secret",
                                             10), KR_SCRAM_OK);
    ck_assert_int_eq(kr_scram_check_password(c, (const uint8_t *)"t0p secreT",
                                             10), KR_SCRAM_BAD_PROOF);
    kr_sasl_users_free(u);
    /* -m, -i; CRLF and no final newline */
    ck_assert_int_eq(run_passwd("-m SCRAM-SHA-256 -i 4096 bob", "pw\r\n",
                                out, sizeof(out), eo, sizeof(eo)), 0);
    ck_assert_ptr_nonnull(strstr(out, ",iterations=4096\n"));
    u = load(out, err, sizeof(err));
    ck_assert_ptr_nonnull(u);
    c = kr_sasl_users_lookup(u, "bob", KR_SCRAM_SHA256);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(kr_scram_check_password(c, (const uint8_t *)"pw", 2),
                     KR_SCRAM_OK);
    kr_sasl_users_free(u);
    ck_assert_int_eq(run_passwd("carol", "pw", out, sizeof(out), eo,
                                sizeof(eo)), 0);
    /* refusals: usage 2, no password 1 */
    ck_assert_int_eq(run_passwd("-i 4095 bob", "pw\n", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_ptr_nonnull(strstr(eo, "4096..16384"));
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(run_passwd("-i 16385 bob", "pw\n", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_int_eq(run_passwd("-m PLAIN bob", "pw\n", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_ptr_nonnull(strstr(eo, "SCRAM-SHA-256 or SCRAM-SHA-512"));
    ck_assert_int_eq(run_passwd("", "pw\n", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_ptr_nonnull(strstr(eo, "no USER"));
    ck_assert_int_eq(run_passwd("'jo hn'", "pw\n", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_ptr_nonnull(strstr(eo, "whitespace"));
    ck_assert_int_eq(run_passwd("bob", "", out, sizeof(out), eo,
                                sizeof(eo)), 1);
    ck_assert_ptr_nonnull(strstr(eo, "no password"));
    ck_assert_int_eq(run_passwd("bob", "\n", out, sizeof(out), eo,
                                sizeof(eo)), 1);
    ck_assert_str_eq(out, "");
    /* one line naming the program as the others do, not getopt's */
    ck_assert_int_eq(run_passwd("-x bob", "pw\n", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_str_eq(eo, "krelay-passwd: unknown option: -x\n"
                     "Try 'krelay-passwd --help'.\n");
    ck_assert_int_eq(run_passwd("bob -m", "", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_str_eq(eo, "krelay-passwd: option needs an argument: -m\n"
                     "Try 'krelay-passwd --help'.\n");
    ck_assert_int_eq(run_passwd("--nope bob", "", out, sizeof(out), eo,
                                sizeof(eo)), 2);
    ck_assert_ptr_nonnull(strstr(eo, "unknown option: --nope\n"));
}
END_TEST

/* krelay-passwd USER on a new pty (its stdin and stderr), stdout a pipe */
struct pty_run {
    pid_t pid;
    int master, slave, out;         /* slave: the parent's, for tcgetattr */
    char text[2048];                /* what the terminal showed */
    size_t len;
};

static void
pty_start(struct pty_run *r, const char *user)
{
    const char *top = getenv("top_builddir");
    char path[512];
    int p[2];

    memset(r, 0, sizeof(*r));
    snprintf(path, sizeof(path), "%s/krelay-passwd",
             top != NULL ? top : ".");
    r->master = posix_openpt(O_RDWR | O_NOCTTY);
    ck_assert_int_ge(r->master, 0);
    ck_assert_int_eq(grantpt(r->master), 0);
    ck_assert_int_eq(unlockpt(r->master), 0);
    r->slave = open(ptsname(r->master), O_RDWR | O_NOCTTY);
    ck_assert_int_ge(r->slave, 0);
    ck_assert_int_eq(pipe(p), 0);
    r->pid = fork();
    ck_assert_int_ge(r->pid, 0);
    if (r->pid == 0) {
        int t;

        setsid();
        t = open(ptsname(r->master), O_RDWR);   /* the controlling tty */
        if (t < 0) {
            _exit(126);
        }
        dup2(t, 0);
        dup2(t, 2);
        dup2(p[1], 1);
        execl(path, "krelay-passwd", user, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    r->out = p[0];
}

/* the pty's output read until want is in it (true) or 10 s pass */
static bool
pty_wait_text(struct pty_run *r, const char *want)
{
    time_t end = time(NULL) + 10;

    while (strstr(r->text, want) == NULL && time(NULL) < end) {
        struct pollfd pf = { .fd = r->master, .events = POLLIN };
        ssize_t n;

        if (poll(&pf, 1, 200) <= 0) {
            continue;
        }
        n = read(r->master, r->text + r->len, sizeof(r->text) - 1 - r->len);
        if (n <= 0) {
            break;
        }
        r->len += (size_t)n;
        r->text[r->len] = '\0';
    }
    return strstr(r->text, want) != NULL;
}

/* the terminal's ECHO flag, once it is echo_on (true) or 10 s pass */
static bool
pty_wait_echo(struct pty_run *r, bool echo_on)
{
    time_t end = time(NULL) + 10;

    do {
        struct termios t;

        ck_assert_int_eq(tcgetattr(r->slave, &t), 0);
        if (((t.c_lflag & ECHO) != 0) == echo_on) {
            return true;
        }
        usleep(10000);
    } while (time(NULL) < end);
    return false;
}

static int
pty_finish(struct pty_run *r, char *out, size_t cap)
{
    size_t n = 0;
    ssize_t k;
    int st;

    while (n + 1 < cap && (k = read(r->out, out + n, cap - 1 - n)) > 0) {
        n += (size_t)k;
    }
    out[n] = '\0';
    ck_assert_int_eq(waitpid(r->pid, &st, 0), r->pid);
    return st;
}

/* what the pty still holds (the program has exited) */
static void
pty_drain(struct pty_run *r)
{
    struct pollfd pf = { .fd = r->master, .events = POLLIN };
    ssize_t n;

    while (r->len + 1 < sizeof(r->text) && poll(&pf, 1, 100) > 0 &&
           (n = read(r->master, r->text + r->len,
                     sizeof(r->text) - 1 - r->len)) > 0) {
        r->len += (size_t)n;
        r->text[r->len] = '\0';
    }
}

static void
pty_close(struct pty_run *r)
{
    close(r->out);
    close(r->master);
    close(r->slave);
}

START_TEST(krelay_passwd_tty)
{
    struct pty_run r;
    char out[1024], err[512];
    struct kr_sasl_users *u;
    int st;

    /* Ctrl-C at the prompt: dies of SIGINT, echo back on */
    pty_start(&r, "bob");
    ck_assert_msg(pty_wait_text(&r, "Password for bob: "), "%s", r.text);
    ck_assert(pty_wait_echo(&r, false));
    ck_assert_int_eq(write(r.master, "se\x03", 3), 3);
    st = pty_finish(&r, out, sizeof(out));
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "status %#x",
                  st);
    ck_assert(pty_wait_echo(&r, true));
    ck_assert_str_eq(out, "");
    pty_close(&r);

    /* an empty first password: refused, "Again:" never asked */
    pty_start(&r, "bob");
    ck_assert(pty_wait_text(&r, "Password for bob: "));
    ck_assert(pty_wait_echo(&r, false));
    ck_assert_int_eq(write(r.master, "\n", 1), 1);
    ck_assert(pty_wait_text(&r, "no password"));
    st = pty_finish(&r, out, sizeof(out));
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    ck_assert_msg(strstr(r.text, "Again") == NULL, "%s", r.text);
    ck_assert_str_eq(out, "");
    pty_close(&r);

    /* the same password twice, not echoed: the line */
    pty_start(&r, "bob");
    ck_assert(pty_wait_text(&r, "Password for bob: "));
    ck_assert(pty_wait_echo(&r, false));
    ck_assert_int_eq(write(r.master, "s3cret\n", 7), 7);
    ck_assert(pty_wait_text(&r, "Again: "));
    ck_assert(pty_wait_echo(&r, false));
    ck_assert_int_eq(write(r.master, "s3cret\n", 7), 7);
    st = pty_finish(&r, out, sizeof(out));
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", r.text);
    pty_drain(&r);
    ck_assert_msg(strstr(r.text, "s3cret") == NULL, "echoed: %s", r.text);
    pty_close(&r);
    u = load(out, err, sizeof(err));
    ck_assert_msg(u != NULL, "%s: %s", err, out);
    ck_assert_int_eq(kr_scram_check_password(
                         kr_sasl_users_lookup(u, "bob", KR_SCRAM_SHA512),
                         (const uint8_t *)"s3cret", 6), KR_SCRAM_OK);
    kr_sasl_users_free(u);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("sasl_users");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, entries);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, from_file);
    tcase_add_test(tc, krelay_passwd_line);
    tcase_add_test(tc, krelay_passwd_tty);
    tcase_set_timeout(tc, 30);
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
