/*
 * kr_proc.c - the process as the operating system sees it: daemonizing,
 * the pid file, dropping privileges, sd_notify.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kr_log.h"
#include "kr_proc.h"

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

char *
kr_proc_abspath(const char *path)
{
    char cwd[PATH_MAX], *out;
    size_t n;

    if (path[0] == '/') {
        return strdup(path);
    }
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        return NULL;
    }
    n = strlen(cwd) + 1 + strlen(path) + 1;
    out = malloc(n);
    if (out != NULL) {
        snprintf(out, n, "%s/%s", cwd, path);
    }
    return out;
}

bool
kr_pidfile_open(struct kr_pidfile *pf, const char *path, char *err,
                size_t errlen)
{
    char held[32] = "";
    ssize_t n;

    pf->fd = -1;
    pf->path = kr_proc_abspath(path);
    if (pf->path == NULL) {
        snprintf(err, errlen, "-p %s: %s", path, strerror(errno ? errno
                                                                : ENOMEM));
        return false;
    }
    pf->fd = open(pf->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
                  O_NOCTTY, 0644);
    if (pf->fd < 0) {
        snprintf(err, errlen, "-p %s: cannot open the pid file: %s", path,
                 strerror(errno));
        goto fail;
    }
    if (flock(pf->fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;

        if (e == EWOULDBLOCK) {
            n = pread(pf->fd, held, sizeof(held) - 1, 0);
            held[n > 0 ? n : 0] = '\0';
            held[strcspn(held, "\n")] = '\0';
            snprintf(err, errlen, "-p %s: another krelay (pid %s) holds "
                     "this pid file: not starting", path,
                     held[0] != '\0' ? held : "unknown");
        } else {
            snprintf(err, errlen, "-p %s: cannot lock the pid file: %s",
                     path, strerror(e));
        }
        close(pf->fd);
        pf->fd = -1;
        goto fail;
    }
    return true;
fail:
    free(pf->path);
    pf->path = NULL;
    return false;
}

bool
kr_pidfile_write(struct kr_pidfile *pf)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

    if (ftruncate(pf->fd, 0) != 0) {
        return false;
    }
    return pwrite(pf->fd, buf, (size_t)n, 0) == n;
}

bool
kr_pidfile_remove(struct kr_pidfile *pf)
{
    bool ok = true;

    if (pf->fd < 0) {
        return true;
    }
    /* unlink while the lock is held: no other krelay took the file over */
    if (unlink(pf->path) != 0) {
        int e = errno;

        /* at least leave no pid a new process may reuse */
        (void)ftruncate(pf->fd, 0);
        errno = e;
        ok = false;
    }
    close(pf->fd);
    pf->fd = -1;
    free(pf->path);
    pf->path = NULL;
    return ok;
}

/* In the parent: the child's report, then exit. */
static void
parent_wait(pid_t child, int fd)
{
    char buf[1024];
    size_t len = 0;
    ssize_t n;
    int st;

    while (len < sizeof(buf) - 1 &&
           ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0 ||
            (n < 0 && errno == EINTR))) {
        len += n > 0 ? (size_t)n : 0;
    }
    buf[len] = '\0';
    if (len > 0 && buf[0] == 'R') {
        _exit(0);
    }
    if (len > 1) {
        fprintf(stderr, "krelay: %s\n", buf + 1);
    } else if (waitpid(child, &st, WNOHANG) == child && WIFSIGNALED(st)) {
        fprintf(stderr, "krelay: the daemon was killed by signal %d before "
                "it was ready\n", WTERMSIG(st));
    } else {
        fprintf(stderr, "krelay: the daemon exited before it was ready (its "
                "log says why)\n");
    }
    _exit(1);
}

int
kr_proc_daemonize(char *err, size_t errlen)
{
    int pfd[2], nul;
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "-d: pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "-d: fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid > 0) {
        close(pfd[1]);
        parent_wait(pid, pfd[0]);       /* does not return */
    }
    close(pfd[0]);
    /* the child: its own session, no terminal, nothing held open */
    if (setsid() < 0 || chdir("/") != 0) {
        kr_proc_ready(pfd[1], "-d: setsid or chdir failed");
        _exit(1);
    }
    nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 ||
        dup2(nul, 2) < 0) {
        kr_proc_ready(pfd[1], "-d: cannot point stdin, stdout and stderr "
                      "at /dev/null");
        _exit(1);
    }
    if (nul > 2) {
        close(nul);
    }
    return pfd[1];
}

void
kr_proc_ready(int fd, const char *why)
{
    char buf[1024];
    int n;

    if (fd < 0) {
        return;
    }
    n = snprintf(buf, sizeof(buf), "%s%s", why == NULL ? "R" : "E",
                 why != NULL ? why : "");
    if (n >= (int)sizeof(buf)) {
        n = (int)sizeof(buf) - 1;
    }
    while (write(fd, buf, (size_t)n) < 0 && errno == EINTR) {
    }
    close(fd);
}

bool
kr_proc_lookup(const char *user, const char *group, struct kr_proc_ids *ids,
               char *err, size_t errlen)
{
    struct passwd *pw;
    struct group *gr;

    memset(ids, 0, sizeof(*ids));
    errno = 0;
    pw = getpwnam(user);
    if (pw == NULL) {
        snprintf(err, errlen, "[process] user = %s: no such user%s%s", user,
                 errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
        return false;
    }
    ids->uid = (unsigned)pw->pw_uid;
    ids->gid = (unsigned)pw->pw_gid;
    snprintf(ids->user, sizeof(ids->user), "%s", user);
    if (group != NULL) {
        errno = 0;
        gr = getgrnam(group);
        if (gr == NULL) {
            snprintf(err, errlen, "[process] group = %s: no such group%s%s",
                     group, errno != 0 ? ": " : "",
                     errno != 0 ? strerror(errno) : "");
            return false;
        }
        ids->gid = (unsigned)gr->gr_gid;
        snprintf(ids->group, sizeof(ids->group), "%s", group);
    } else {
        gr = getgrgid(pw->pw_gid);
        snprintf(ids->group, sizeof(ids->group), "%s",
                 gr != NULL ? gr->gr_name : "(primary)");
    }
    return true;
}

bool
kr_proc_drop(const struct kr_proc_ids *ids, char *err, size_t errlen)
{
    gid_t gid = (gid_t)ids->gid;

    if (geteuid() != 0) {
        if (getuid() == (uid_t)ids->uid && geteuid() == (uid_t)ids->uid &&
            getgid() == gid && getegid() == gid) {
            return true;                /* already them */
        }
        snprintf(err, errlen, "[process] user = %s, group = %s: krelay runs "
                 "as uid %u, not root: it cannot switch to them (start it "
                 "as root, or leave user and group out)", ids->user,
                 ids->group, (unsigned)geteuid());
        return false;
    }
    if (setgroups(1, &gid) != 0) {
        snprintf(err, errlen, "setgroups(%u): %s", ids->gid, strerror(errno));
        return false;
    }
    if (setgid(gid) != 0) {
        snprintf(err, errlen, "setgid(%u): %s", ids->gid, strerror(errno));
        return false;
    }
    if (setuid((uid_t)ids->uid) != 0) {
        snprintf(err, errlen, "setuid(%u): %s", ids->uid, strerror(errno));
        return false;
    }
    if (ids->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
        snprintf(err, errlen, "root could be regained after dropping to "
                 "uid %u", ids->uid);
        return false;
    }
    return true;
}

#ifndef HAVE_LIBSYSTEMD
/* sd_notify's protocol: state as one datagram to $NOTIFY_SOCKET. */
static int
notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa;
    size_t len;
    socklen_t salen;
    ssize_t n;
    int fd, e;

    if (path == NULL || path[0] == '\0') {
        return 0;
    }
    len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path)) {
        errno = EINVAL;
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0';         /* the abstract namespace */
    }
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                        (path[0] == '/' ? 1 : 0));
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    n = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
               (const struct sockaddr *)&sa, salen);
    e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(state) ? 1 : -1;
}
#endif

void
kr_proc_notify(const char *state)
{
    char buf[128];
    int rc;

    if (strcmp(state, "RELOADING=1") == 0) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(buf, sizeof(buf), "RELOADING=1\nMONOTONIC_USEC=%llu",
                 (unsigned long long)ts.tv_sec * 1000000ULL +
                     (unsigned long long)ts.tv_nsec / 1000ULL);
        state = buf;
    }
#ifdef HAVE_LIBSYSTEMD
    rc = sd_notify(0, state);
    if (rc < 0) {
        errno = -rc;
    }
#else
    rc = notify_send(state);
#endif
    if (rc < 0) {
        kr_log_debug("sd_notify %.*s: %s", (int)strcspn(state, "\n"),
                     state, strerror(errno));
    }
}
