/*
 * kr_demo.c - krelay --demo's upstream, krelay-demo-cluster, as a child
 * process: found, started, waited for, watched and stopped.  See
 * kr_demo.h for the protocol.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kr_demo.h"

/* Milliseconds on the monotonic clock. */
static long long
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* What a waitpid status says, for a message. */
static void
describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(buf, len, "ended (wait status %#x)", (unsigned)status);
    }
}

/*
 * Reap the child when it exits within ms ms.  Returns true with its
 * status (dm->pid is then 0).
 */
static bool
reap_within(struct kr_demo *dm, long ms, int *status)
{
    long long end = now_ms() + ms;

    for (;;) {
        pid_t r = waitpid(dm->pid, status, WNOHANG);

        if (r == dm->pid || (r < 0 && errno == ECHILD)) {
            if (r < 0) {
                *status = 0;            /* reaped elsewhere: unknown */
            }
            dm->pid = 0;
            return true;
        }
        if (r < 0 && errno != EINTR) {
            return false;
        }
        if (now_ms() >= end) {
            return false;
        }
        sleep_ms(10);
    }
}

static void
close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

int
kr_demo_find(const char *const *dirs, int ndirs, char *path, size_t len,
             char *err, size_t errlen)
{
    char looked[1024] = "";
    size_t used = 0;
    int i;

    for (i = 0; i < ndirs; i++) {
        struct stat st;
        int n;

        if (dirs[i] == NULL || dirs[i][0] == '\0') {
            continue;
        }
        n = snprintf(path, len, "%s/%s", dirs[i], KR_DEMO_PROGRAM);
        if (n > 0 && (size_t)n < len && stat(path, &st) == 0 &&
            S_ISREG(st.st_mode) && access(path, X_OK) == 0) {
            return KR_OK;
        }
        n = snprintf(looked + used, sizeof(looked) - used, "%s%s",
                     used > 0 ? ", " : "", dirs[i]);
        if (n > 0) {
            used += (size_t)n;
            if (used >= sizeof(looked)) {
                used = sizeof(looked) - 1;
            }
        }
    }
    if (len > 0) {
        path[0] = '\0';
    }
    snprintf(err, errlen, "%s not found (looked in %s): it is installed "
             "there by make install, and built beside krelay when configure "
             "finds librdkafka (without it: install librdkafka-dev, "
             "contrib/install-deps.sh --demo, then run configure and make "
             "again)", KR_DEMO_PROGRAM, used > 0 ? looked : "no directory");
    return KR_ERROR;
}

int
kr_demo_exe_dir(char *dir, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (len > 0) {
        dir[0] = '\0';
    }
    if (n <= 0) {
        return KR_ERROR;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL || (size_t)(slash - exe) >= len) {
        return KR_ERROR;
    }
    if (slash == exe) {
        slash++;                        /* "/krelay": the root */
    }
    memcpy(dir, exe, (size_t)(slash - exe));
    dir[slash - exe] = '\0';
    return KR_OK;
}

/*
 * The child, between fork and exec: only async-signal-safe calls.
 * in/out: the pipes' child ends.  Never returns.
 */
static void
child_exec(const char *path, char *const argv[], int in, int out,
           pid_t parent)
{
    static const char msg[] = "krelay: cannot run " KR_DEMO_PROGRAM "\n";
    sigset_t none;

    /* its own process group: a terminal's Ctrl-C goes to krelay, which
       stops the cluster after its own connections */
    (void)setpgid(0, 0);
    if (dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0) {
        _exit(127);
    }
    /* a second guard beside the stdin pipe: SIGTERM when krelay (the
       thread that forked, krelay's main thread) ends; a parent gone
       already means the pipe's end of file is on its way too */
    (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        _exit(1);
    }
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)signal(SIGPIPE, SIG_DFL);
    execv(path, argv);
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
}

/*
 * Read the child's first line into dm->bootstraps within timeout_ms.
 * Returns KR_OK, or KR_ERROR with err filled (the child is left for the
 * caller to stop).
 */
static int
read_ready_line(struct kr_demo *dm, int timeout_ms, char *err,
                size_t errlen)
{
    long long end = now_ms() + timeout_ms;
    size_t have = 0;

    for (;;) {
        struct pollfd pfd = { .fd = dm->out_fd, .events = POLLIN };
        long long left = end - now_ms();
        char *nl;
        ssize_t n;
        int status;

        if (left <= 0) {
            snprintf(err, errlen, "%s printed no bootstrap list within "
                     "%d s", dm->path, timeout_ms / 1000);
            return KR_ERROR;
        }
        if (poll(&pfd, 1, (int)left) < 0) {
            if (errno == EINTR) {
                continue;
            }
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return KR_ERROR;
        }
        if (pfd.revents == 0) {
            continue;
        }
        n = read(dm->out_fd, dm->bootstraps + have,
                 sizeof(dm->bootstraps) - 1 - have);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            char what[128];

            /* closed its stdout: it is exiting (or did something odd) */
            if (reap_within(dm, 2000, &status)) {
                describe_status(status, what, sizeof(what));
            } else {
                snprintf(what, sizeof(what), "closed its stdout");
            }
            snprintf(err, errlen, "%s %s before it was ready (no "
                     "bootstrap list; its own messages, if any, are "
                     "above)", dm->path, what);
            return KR_ERROR;
        }
        have += (size_t)n;
        dm->bootstraps[have] = '\0';
        nl = strchr(dm->bootstraps, '\n');
        if (nl != NULL) {
            *nl = '\0';
            if (dm->bootstraps[0] == '\0') {
                snprintf(err, errlen, "%s printed an empty bootstrap list",
                         dm->path);
                return KR_ERROR;
            }
            return KR_OK;
        }
        if (have == sizeof(dm->bootstraps) - 1) {
            snprintf(err, errlen, "%s printed a bootstrap list longer than "
                     "%zu bytes", dm->path, sizeof(dm->bootstraps) - 1);
            return KR_ERROR;
        }
    }
}

int
kr_demo_start(struct kr_demo *dm, const char *const *dirs, int ndirs,
              int nbrokers, const char *topics, int timeout_ms,
              char *err, size_t errlen)
{
    int in[2], out[2], flags;
    char nb[16];
    char *argv[7];
    pid_t parent = getpid();

    memset(dm, 0, sizeof(*dm));
    dm->ctl_fd = -1;
    dm->out_fd = -1;
    if (kr_demo_find(dirs, ndirs, dm->path, sizeof(dm->path), err,
                     errlen) != KR_OK) {
        return KR_ERROR;
    }
    if (pipe2(in, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return KR_ERROR;
    }
    if (pipe2(out, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(in[0]);
        close(in[1]);
        return KR_ERROR;
    }
    snprintf(nb, sizeof(nb), "%d", nbrokers);
    argv[0] = (char *)KR_DEMO_PROGRAM;
    argv[1] = (char *)"-b";
    argv[2] = nb;
    argv[3] = (char *)"-t";
    argv[4] = (char *)(topics != NULL ? topics : "");
    argv[5] = (char *)"-w";
    argv[6] = NULL;
    fflush(NULL);                       /* nothing buffered twice */
    dm->pid = fork();
    if (dm->pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        dm->pid = 0;
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        return KR_ERROR;
    }
    if (dm->pid == 0) {
        child_exec(dm->path, argv, in[0], out[1], parent);
    }
    close(in[0]);
    close(out[1]);
    dm->ctl_fd = in[1];
    dm->out_fd = out[0];
    if (read_ready_line(dm, timeout_ms, err, errlen) != KR_OK) {
        (void)kr_demo_stop(dm, 1000);
        return KR_ERROR;
    }
    flags = fcntl(dm->out_fd, F_GETFL);
    if (flags < 0 || fcntl(dm->out_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "fcntl: %s", strerror(errno));
        (void)kr_demo_stop(dm, 1000);
        return KR_ERROR;
    }
    return KR_OK;
}

bool
kr_demo_gone(struct kr_demo *dm, char *what, size_t len)
{
    char buf[512];
    ssize_t n;
    int status;

    if (dm->pid == 0 || dm->out_fd < 0) {
        snprintf(what, len, "is not running");
        return true;
    }
    for (;;) {
        n = read(dm->out_fd, buf, sizeof(buf));
        if (n > 0) {
            continue;                   /* stray output: dropped */
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return false;
        }
        break;                          /* end of file, or an error */
    }
    if (reap_within(dm, 1000, &status)) {
        describe_status(status, what, len);
    } else {
        snprintf(what, len, "closed its stdout");
    }
    return true;
}

/*
 * Has the child exited within ms ms?  Not reaped (WNOWAIT), so that its
 * pid, its group's id, cannot be another's yet.  Stops waiting early
 * (false) when a signal of set is pending.
 */
static bool
exited_within(pid_t pid, long ms, const sigset_t *set)
{
    long long end = now_ms() + ms;
    sigset_t pend;
    siginfo_t si;
    int sig;

    for (;;) {
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
            0 && si.si_pid == pid) {
            return true;
        }
        if (sigpending(&pend) == 0) {
            for (sig = 1; sig < NSIG; sig++) {
                if (sigismember(set, sig) == 1 &&
                    sigismember(&pend, sig) == 1) {
                    return false;
                }
            }
        }
        if (now_ms() >= end) {
            return false;
        }
        sleep_ms(10);
    }
}

bool
kr_demo_stop(struct kr_demo *dm, int grace_ms)
{
    bool clean = true, exited;
    sigset_t stop, old;
    int status = 0;

    close_fd(&dm->ctl_fd);
    if (dm->pid > 0) {
        /* A second signal (an impatient Ctrl-C; krelay's handlers are gone
           by now) waits until the child is dealt with: it ends the grace
           time, not krelay, which would leave a child that ignores
           SIGTERM running. */
        sigemptyset(&stop);
        sigaddset(&stop, SIGHUP);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGQUIT);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGUSR1);
        sigaddset(&stop, SIGUSR2);
        (void)pthread_sigmask(SIG_BLOCK, &stop, &old);
        (void)kill(dm->pid, SIGTERM);
        exited = exited_within(dm->pid, grace_ms, &stop);
        /* always: what is left of its process group (its own children),
           and the child when it did not exit */
        (void)kill(-dm->pid, SIGKILL);
        if (!exited) {
            (void)kill(dm->pid, SIGKILL);
        }
        while (waitpid(dm->pid, &status, 0) < 0 && errno == EINTR) {
        }
        dm->pid = 0;
        clean = exited &&
                ((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
                 (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM));
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    close_fd(&dm->out_fd);
    return clean;
}
