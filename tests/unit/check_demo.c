/*
 * check_demo.c - krelay --demo's child process (kr_demo.h) against small
 * shell scripts that play krelay-demo-cluster: found in the first
 * directory that has it, its bootstrap line read, its arguments, an
 * early exit, silence past the timeout, end of file on its stdin, its
 * death seen on its stdout, and a stop that needs SIGKILL.  The real
 * program is tests/integration/demo.sh's.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kr_common.h"
#include "kr_demo.h"

/* A fresh directory under $TMPDIR or /tmp into dir. */
static void
tmpdir_new(char *dir, size_t len)
{
    const char *t = getenv("TMPDIR");

    snprintf(dir, len, "%s/check_demo.XXXXXX", t != NULL ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Remove dir and the files in it. */
static void
tmpdir_free(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[4200];

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
    ck_assert_int_eq(rmdir(dir), 0);
}

/* Write dir/name with body (a /bin/sh script after "#!/bin/sh\n"), with
 * mode mode. */
static void
script(const char *dir, const char *name, const char *body, mode_t mode)
{
    char p[4200];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(p, mode), 0);
}

/* The first line of dir/name into buf ("" when there is none). */
static void
read_file(const char *dir, const char *name, char *buf, size_t len)
{
    char p[4200];
    FILE *f;

    buf[0] = '\0';
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "r");
    if (f == NULL) {
        return;
    }
    if (fgets(buf, (int)len, f) != NULL) {
        buf[strcspn(buf, "\n")] = '\0';
    }
    fclose(f);
}

/* Wait up to ms ms for dm->out_fd to be readable. */
static void
wait_readable(struct kr_demo *dm, int ms)
{
    struct pollfd pfd = { .fd = dm->out_fd, .events = POLLIN };

    ck_assert_int_eq(poll(&pfd, 1, ms), 1);
}

/* Not found: every directory named in the message, and what to do; a
 * file that is not executable does not count. */
START_TEST(test_not_found)
{
    char a[256], b[256], path[4096], err[1024], want[600];
    const char *dirs[3];

    tmpdir_new(a, sizeof(a));
    tmpdir_new(b, sizeof(b));
    script(b, KR_DEMO_PROGRAM, "exit 0", 0644);
    dirs[0] = a;
    dirs[1] = NULL;                     /* skipped */
    dirs[2] = b;
    ck_assert_int_eq(kr_demo_find(dirs, 3, path, sizeof(path), err,
                                  sizeof(err)), KR_ERROR);
    snprintf(want, sizeof(want), "krelay-demo-cluster not found (looked in "
             "%s, %s): ", a, b);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "err: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "librdkafka-dev"));
    ck_assert_str_eq(path, "");
    tmpdir_free(a);
    tmpdir_free(b);
}
END_TEST

/* The first directory that has it wins. */
START_TEST(test_find_order)
{
    char a[256], b[256], c[256], path[4096], want[4200], err[1024];
    const char *dirs[3];

    tmpdir_new(a, sizeof(a));
    tmpdir_new(b, sizeof(b));
    tmpdir_new(c, sizeof(c));
    script(b, KR_DEMO_PROGRAM, "exit 0", 0755);
    script(c, KR_DEMO_PROGRAM, "exit 0", 0755);
    dirs[0] = a;
    dirs[1] = b;
    dirs[2] = c;
    ck_assert_int_eq(kr_demo_find(dirs, 3, path, sizeof(path), err,
                                  sizeof(err)), KR_OK);
    snprintf(want, sizeof(want), "%s/%s", b, KR_DEMO_PROGRAM);
    ck_assert_str_eq(path, want);
    tmpdir_free(a);
    tmpdir_free(b);
    tmpdir_free(c);
}
END_TEST

/* This test binary's own directory (krelay looks beside itself). */
START_TEST(test_exe_dir)
{
    char dir[4096];
    size_t n;

    const char *preload = getenv("LD_PRELOAD");

    ck_assert_int_eq(kr_demo_exe_dir(dir, sizeof(dir)), KR_OK);
    n = strlen(dir);
    ck_assert_uint_gt(n, 0);
    if (preload != NULL && strstr(preload, "vgpreload") != NULL) {
        return;                 /* under valgrind: valgrind's directory */
    }
    ck_assert_uint_gt(n, 11);
    ck_assert_str_eq(dir + n - 11, "/tests/unit");
}
END_TEST

/* Started: the arguments it gets, its line, the pipe protocol (end of
 * file on its stdin ends it), its exit seen on its stdout. */
START_TEST(test_start_and_stdin_eof)
{
    char d[256], err[1024], what[128], got[256];
    const char *dirs[1];
    struct kr_demo dm;
    char body[1200];

    tmpdir_new(d, sizeof(d));
    snprintf(body, sizeof(body),
             "echo \"$*\" >%s/args\n"
             "echo 127.0.0.1:1111,127.0.0.1:2222\n"
             "cat >/dev/null\n"
             "echo eof >%s/eof\n"
             "exit 4", d, d);
    script(d, KR_DEMO_PROGRAM, body, 0755);
    dirs[0] = d;
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 3, "demo:3,events:6",
                                   10000, err, sizeof(err)), KR_OK);
    ck_assert_int_gt(dm.pid, 0);
    ck_assert_str_eq(dm.bootstraps, "127.0.0.1:1111,127.0.0.1:2222");
    read_file(d, "args", got, sizeof(got));
    ck_assert_str_eq(got, "-b 3 -t demo:3,events:6 -w");
    ck_assert(!kr_demo_gone(&dm, what, sizeof(what)));  /* still runs */
    /* krelay gone (its end of the pipe closed): the child stops */
    close(dm.ctl_fd);
    dm.ctl_fd = -1;
    wait_readable(&dm, 10000);
    ck_assert(kr_demo_gone(&dm, what, sizeof(what)));
    ck_assert_str_eq(what, "exited with status 4");
    ck_assert_int_eq(dm.pid, 0);                        /* reaped */
    read_file(d, "eof", got, sizeof(got));
    ck_assert_str_eq(got, "eof");
    ck_assert(kr_demo_stop(&dm, 1000));
    ck_assert_int_eq(dm.out_fd, -1);
    tmpdir_free(d);
}
END_TEST

/* An exit before the line: its status in the message, nothing left. */
START_TEST(test_exit_before_ready)
{
    char d[256], err[1024];
    const char *dirs[1];
    struct kr_demo dm;

    tmpdir_new(d, sizeof(d));
    script(d, KR_DEMO_PROGRAM, "exit 3", 0755);
    dirs[0] = d;
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 3, "t", 10000, err,
                                   sizeof(err)), KR_ERROR);
    ck_assert_msg(strstr(err, "/" KR_DEMO_PROGRAM " exited with status 3 "
                         "before it was ready") != NULL, "err: %s", err);
    ck_assert_int_eq(dm.pid, 0);
    ck_assert_int_eq(dm.ctl_fd, -1);
    ck_assert_int_eq(dm.out_fd, -1);
    tmpdir_free(d);
}
END_TEST

/* Silence past the timeout: an error, and the child is stopped. */
START_TEST(test_ready_timeout)
{
    char d[256], err[1024], pid[32], body[300];
    const char *dirs[1];
    struct kr_demo dm;

    tmpdir_new(d, sizeof(d));
    snprintf(body, sizeof(body), "echo $$ >%s/pid\nexec sleep 60", d);
    script(d, KR_DEMO_PROGRAM, body, 0755);
    dirs[0] = d;
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 3, "t", 300, err,
                                   sizeof(err)), KR_ERROR);
    ck_assert_msg(strstr(err, "printed no bootstrap list within") != NULL,
                  "err: %s", err);
    ck_assert_int_eq(dm.pid, 0);
    read_file(d, "pid", pid, sizeof(pid));
    ck_assert_int_gt(atoi(pid), 0);
    /* reaped by kr_demo_start: no such process any more */
    ck_assert_int_eq(kill(atoi(pid), 0), -1);
    ck_assert_int_eq(errno, ESRCH);
    tmpdir_free(d);
}
END_TEST

/* Killed while running: seen on its stdout, named. */
START_TEST(test_gone_killed)
{
    char d[256], err[1024], what[128];
    const char *dirs[1];
    struct kr_demo dm;

    tmpdir_new(d, sizeof(d));
    script(d, KR_DEMO_PROGRAM, "echo 127.0.0.1:1\nexec sleep 60", 0755);
    dirs[0] = d;
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 1, "t", 10000, err,
                                   sizeof(err)), KR_OK);
    ck_assert_int_eq(kill(dm.pid, SIGKILL), 0);
    wait_readable(&dm, 10000);
    ck_assert(kr_demo_gone(&dm, what, sizeof(what)));
    ck_assert_msg(strncmp(what, "was killed by signal 9 ", 23) == 0,
                  "what: %s", what);
    ck_assert(kr_demo_stop(&dm, 1000));
    tmpdir_free(d);
}
END_TEST

/* Stop: SIGTERM is a clean stop; one that ignores it is killed after the
 * grace time and the stop says it was not clean. */
START_TEST(test_stop)
{
    char d[256], err[1024];
    const char *dirs[1];
    struct kr_demo dm;
    pid_t pid;

    tmpdir_new(d, sizeof(d));
    script(d, KR_DEMO_PROGRAM, "echo 127.0.0.1:1\nexec sleep 60", 0755);
    dirs[0] = d;
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 1, "t", 10000, err,
                                   sizeof(err)), KR_OK);
    pid = dm.pid;
    ck_assert(kr_demo_stop(&dm, 5000));
    ck_assert_int_eq(dm.pid, 0);
    ck_assert_int_eq(kill(pid, 0), -1);

    script(d, KR_DEMO_PROGRAM, "trap '' TERM\necho 127.0.0.1:1\n"
           "while :; do sleep 0.05; done", 0755);
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 1, "t", 10000, err,
                                   sizeof(err)), KR_OK);
    pid = dm.pid;
    ck_assert(!kr_demo_stop(&dm, 300));
    ck_assert_int_eq(dm.pid, 0);
    ck_assert_int_eq(kill(pid, 0), -1);
    tmpdir_free(d);
}
END_TEST

static volatile sig_atomic_t got_term;

static void
on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

/* Milliseconds on the monotonic clock. */
static long long
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A second signal while the stop waits for a child that ignores SIGTERM
 * (krelay's own handlers are gone by then: one ended krelay and left the
 * child running): the wait ends at once, the child's whole process group
 * (here a process it started) is killed, and the signal is delivered
 * only after that.
 */
START_TEST(test_stop_second_signal)
{
    char d[256], err[1024], gc[32];
    struct sigaction sa;
    const char *dirs[1];
    struct kr_demo dm;
    long long t0;
    pid_t pid, kid, grand;

    tmpdir_new(d, sizeof(d));
    script(d, KR_DEMO_PROGRAM, "trap '' TERM\nsleep 60 &\n"
           "echo $! >\"$(dirname \"$0\")/grandchild\"\n"
           "echo 127.0.0.1:1\nwhile :; do sleep 0.05; done", 0755);
    dirs[0] = d;
    ck_assert_int_eq(kr_demo_start(&dm, dirs, 1, 1, "t", 10000, err,
                                   sizeof(err)), KR_OK);
    pid = dm.pid;
    read_file(d, "grandchild", gc, sizeof(gc));
    grand = (pid_t)atoi(gc);
    ck_assert_int_gt(grand, 0);
    ck_assert_int_eq(kill(grand, 0), 0);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    ck_assert_int_eq(sigaction(SIGTERM, &sa, NULL), 0);
    got_term = 0;
    kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        usleep(300 * 1000);
        kill(getppid(), SIGTERM);
        _exit(0);
    }
    t0 = mono_ms();
    ck_assert(!kr_demo_stop(&dm, 3000));  /* Check's timeout: 4 s */
    ck_assert_msg(mono_ms() - t0 < 2000, "the stop waited %lld ms",
                  mono_ms() - t0);
    ck_assert_int_eq(dm.pid, 0);
    ck_assert_int_eq(kill(pid, 0), -1);
    ck_assert(got_term);
    ck_assert_int_eq(waitpid(kid, NULL, 0), kid);
    /* the grandchild is not ours: gone, or a zombie for init to reap */
    for (t0 = mono_ms(); kill(grand, 0) == 0 && mono_ms() - t0 < 5000;) {
        char p[64], st[256] = "";
        FILE *f;

        snprintf(p, sizeof(p), "/proc/%d/stat", (int)grand);
        f = fopen(p, "r");
        if (f != NULL) {
            (void)!fgets(st, sizeof(st), f);
            fclose(f);
        }
        if (strstr(st, ") Z ") != NULL) {
            break;
        }
        usleep(10 * 1000);
    }
    ck_assert_msg(mono_ms() - t0 < 5000, "process %d of the child's group "
                  "still runs", (int)grand);
    tmpdir_free(d);
}
END_TEST

static Suite *
demo_suite(void)
{
    Suite *s = suite_create("demo");
    TCase *tc = tcase_create("child");

    tcase_add_test(tc, test_not_found);
    tcase_add_test(tc, test_find_order);
    tcase_add_test(tc, test_exe_dir);
    tcase_add_test(tc, test_start_and_stdin_eof);
    tcase_add_test(tc, test_exit_before_ready);
    tcase_add_test(tc, test_ready_timeout);
    tcase_add_test(tc, test_gone_killed);
    tcase_add_test(tc, test_stop);
    tcase_add_test(tc, test_stop_second_signal);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(demo_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
