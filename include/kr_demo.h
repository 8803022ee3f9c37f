/*
 * kr_demo.h - the upstream of `krelay --demo`: the program
 * krelay-demo-cluster (librdkafka's mock cluster; built only where
 * configure finds librdkafka) run as a child process.  krelay itself
 * never links librdkafka: a production install does not need it.
 *
 * The program is looked for in a list of directories, in order (krelay
 * gives: its own directory, so that build/krelay --demo finds
 * build/krelay-demo-cluster, then $(pkglibexecdir) where `make install`
 * puts it).  It runs as
 *
 *     krelay-demo-cluster -b BROKERS -t TOPICS -w
 *
 * in a process group of its own (a Ctrl-C on the terminal reaches krelay
 * alone, which then stops it), with
 *   - stdin: the read end of a pipe whose write end only this process
 *     holds (close-on-exec): when this process ends, however it ends,
 *     the kernel closes it and the child stops at end of file (-w);
 *   - PR_SET_PDEATHSIG SIGTERM as a second guard for the same;
 *   - stdout: a pipe read here.  Its first line is the bootstrap list
 *     ("127.0.0.1:P1,...", NodeId order), written once every broker
 *     listens; end of file on it later means the child is gone;
 *   - stderr: this process's (librdkafka's own error lines).
 * See src/krelay_demo_cluster.c for the child's side.
 *
 * Single-threaded use, before any worker thread starts (kr_demo_start
 * forks).
 */
#ifndef KR_DEMO_H
#define KR_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kr_common.h"

/* The program's file name. */
#define KR_DEMO_PROGRAM "krelay-demo-cluster"

/* A running demo cluster, filled in by kr_demo_start whatever it
 * returns (on failure: pid 0 and both fds -1, nothing to stop). */
struct kr_demo {
    pid_t pid;                          /* the child, 0: none */
    int ctl_fd;                         /* write end of its stdin, -1 */
    int out_fd;                         /* read end of its stdout, -1;
                                           non-blocking once ready */
    char path[4096];                    /* the program that runs */
    char bootstraps[1024];              /* its first line, without the
                                           newline */
};

/*
 * Find KR_DEMO_PROGRAM in dirs (ndirs entries; NULL or "" entries are
 * skipped), the first executable file wins.  Returns KR_OK with its path
 * in path (len bytes), or KR_ERROR with a message in err naming every
 * place searched and what to do ("krelay-demo-cluster not found (looked
 * in ...): ...").
 */
int kr_demo_find(const char *const *dirs, int ndirs, char *path, size_t len,
                 char *err, size_t errlen) KR_MUST_CHECK;

/*
 * The directory this process's executable is in (/proc/self/exe) into
 * dir (len bytes).  Returns KR_OK, or KR_ERROR (dir is then "").
 */
int kr_demo_exe_dir(char *dir, size_t len) KR_MUST_CHECK;

/*
 * Find the program in dirs (kr_demo_find), start it with nbrokers
 * brokers and topics (its -t list), and wait until it prints its
 * bootstrap list, at most timeout_ms ms.  Returns KR_OK with dm filled
 * in (the caller stops it with kr_demo_stop), or KR_ERROR with a message
 * in err: not found; cannot start; it exited (its status) or closed its
 * stdout before the line; no line within timeout_ms; a line too long or
 * empty.  On error no child is left running and dm holds none.
 */
int kr_demo_start(struct kr_demo *dm, const char *const *dirs, int ndirs,
                  int nbrokers, const char *topics, int timeout_ms,
                  char *err, size_t errlen) KR_MUST_CHECK;

/*
 * dm->out_fd is readable (or its event fired): read what is there.
 * Returns true when the child is gone (end of file or an error on its
 * stdout), with what happened in what (len bytes): "exited with status
 * N", "was killed by signal N (Terminated)" or "closed its stdout"; the
 * child is then reaped when it has exited, and kr_demo_stop still frees
 * the rest.  false: it still runs (stray bytes are dropped).
 */
bool kr_demo_gone(struct kr_demo *dm, char *what, size_t len);

/*
 * Stop the child: close its stdin and send it SIGTERM, wait up to
 * grace_ms ms for it to exit, then SIGKILL its process group (what it
 * left running) and it; reap it and close both pipes.  HUP, INT, QUIT,
 * TERM, USR1 and USR2 are blocked meanwhile: one that comes ends the
 * wait (the child is killed) and is delivered once the child is gone.
 * Returns true when it exited by itself (status 0 or SIGTERM) within
 * grace_ms.  A dm with no child (pid 0) is a no-op that returns true.
 */
bool kr_demo_stop(struct kr_demo *dm, int grace_ms);

#endif /* KR_DEMO_H */
