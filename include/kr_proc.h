/*
 * kr_proc.h - the process as the operating system sees it (the operations
 * issue): daemonizing (-d), the pid file (-p), dropping privileges
 * ([process] user and group), telling the service manager how krelay is
 * (sd_notify).
 *
 * All of it runs in main() (src/krelay.c), on its one thread: daemonizing
 * forks, which must happen before any thread starts (the audit writer is
 * started by kr_daemon_start, after it).
 */
#ifndef KR_PROC_H
#define KR_PROC_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A pid file, locked (flock, LOCK_EX) for as long as krelay runs: the lock,
 * not the file's existence, says a krelay runs, so a file a crash left
 * behind is taken over and a running krelay's is refused.
 */
struct kr_pidfile {
    int fd;                             /* -1: none */
    char *path;                         /* absolute, malloc'd */
};

/*
 * Open (creating it, mode 0644; not through a symlink) and lock path's pid
 * file into pf; nothing is written yet (kr_pidfile_write).  false with a
 * message in err when it cannot be opened, or is locked by another
 * process ("another krelay (pid N) holds it").  path relative: from the
 * current directory.
 */
bool kr_pidfile_open(struct kr_pidfile *pf, const char *path, char *err,
                     size_t errlen);

/* Write the calling process's pid ("N\n") over pf's content; false with
   errno set on failure. */
bool kr_pidfile_write(struct kr_pidfile *pf);

/* Remove and unlock pf's file (at exit); no-op when none.  false when the
   file could not be removed (errno set: after dropping privileges, the
   directory may not be writable any more). */
bool kr_pidfile_remove(struct kr_pidfile *pf);

/*
 * Daemonize: fork; the parent waits for the child to report (kr_proc_ready)
 * and exits with status 0 once it is ready, or 1 after printing the
 * reason the child gave on stderr (the parent never returns).  The child
 * starts a session (setsid), changes to "/", points fds 0-2 at /dev/null
 * and returns the descriptor to report on, or -1 with a message in err
 * (still in the parent: nothing forked).  Call before any thread starts.
 */
int kr_proc_daemonize(char *err, size_t errlen);

/*
 * Report to the waiting parent on fd (from kr_proc_daemonize) and close
 * it: why == NULL: ready (the parent exits 0); else why the start failed
 * (the parent prints "krelay: WHY" and exits 1).  fd < 0: no-op.
 */
void kr_proc_ready(int fd, const char *why);

/*
 * Where [process] user and group lead: uid and gid, looked up
 * (getpwnam/getgrnam) before anything is started, so an unknown name
 * stops krelay at once.  group NULL: the user's primary group.
 */
struct kr_proc_ids {
    unsigned uid, gid;
    char user[64], group[64];           /* the names, for messages */
};

/* Look user and group up into ids; false with a message in err. */
bool kr_proc_lookup(const char *user, const char *group,
                    struct kr_proc_ids *ids, char *err, size_t errlen);

/*
 * Become ids for good: setgroups (ids->gid alone), setgid, setuid; then
 * check that root cannot be regained.  A process that does not run as
 * root can only "become" its own uid and gid (else: an error).  false
 * with a message in err: the caller must not go on (it would run with
 * more privileges than configured).
 */
bool kr_proc_drop(const struct kr_proc_ids *ids, char *err, size_t errlen);

/*
 * Tell the service manager (systemd, Type=notify) krelay's state: state
 * is sd_notify's text ("READY=1", "RELOADING=1", "STOPPING=1"; RELOADING
 * gets the MONOTONIC_USEC= systemd 253 asks for).  Sent to $NOTIFY_SOCKET
 * (a path, or "@NAME" in the abstract namespace) as one AF_UNIX datagram:
 * through libsystemd's sd_notify where configure found libsystemd
 * (HAVE_LIBSYSTEMD), else by a writer of its own (the protocol is that
 * one datagram: krelay's unit is Type=notify, so every build must speak
 * it).  Nothing without NOTIFY_SOCKET; a failure is logged at debug only
 * (the manager's problem, not the proxy's).  Any thread.
 */
void kr_proc_notify(const char *state);

/* path made absolute against the current directory (malloc'd; a copy
   when absolute already), NULL on ENOMEM or when getcwd fails. */
char *kr_proc_abspath(const char *path);

#endif /* KR_PROC_H */
