/*
 * krelay_demo_cluster.c - krelay-demo-cluster: librdkafka's mock Kafka
 * cluster (kr_mock.h) as a program of its own, the upstream that
 * `krelay --demo` starts as a child process (kr_demo.h), so that krelay
 * itself never links librdkafka.  See usage() below.
 *
 * The protocol with krelay (or anything else that starts it):
 *   - once every broker listens and every topic exists, one line on
 *     stdout: the bootstrap list, "127.0.0.1:P1,127.0.0.1:P2,..." in
 *     NodeId order; nothing else is ever written there;
 *   - SIGTERM and SIGINT stop it (exit status 0);
 *   - with -w, so does end of file (or an error) on stdin: krelay holds
 *     the only write end of that pipe, so the cluster ends with krelay
 *     however krelay ends, SIGKILL included;
 *   - an error before the line: a message on stderr, exit status 1
 *     (2 for a bad command line).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "kr_common.h"
#include "kr_mock.h"

#define KR_EXIT_OK 0
#define KR_EXIT_FAIL 1
#define KR_EXIT_USAGE 2

static const char *kr_prog = "krelay-demo-cluster";

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: %s [-b BROKERS] [-t NAME[:PARTITIONS],...] [-w] [-d]\n"
"\n"
"A mock Kafka cluster (librdkafka's, in this process) on 127.0.0.1, on\n"
"ports the kernel chooses: the upstream `krelay --demo` starts.  Once\n"
"every broker listens, it prints the bootstrap list on stdout\n"
"(\"127.0.0.1:P1,127.0.0.1:P2,...\", NodeId order) and runs until\n"
"SIGTERM or SIGINT.\n"
"\n"
"  -b N     brokers, NodeIds 1..N (default 3, at most %d)\n"
"  -t LIST  topics to create, NAME[:PARTITIONS] comma-separated\n"
"           (default partitions %d), e.g. demo:3,events:6\n"
"  -w       also stop at end of file on stdin (krelay --demo holds\n"
"           the other end of that pipe)\n"
"  -d       librdkafka's debug log (mock, protocol) on stderr\n"
"  -V       print the version and librdkafka's, and exit\n"
"  -h       print this help and exit\n",
            kr_prog, KR_MOCK_MAX_BROKERS, KR_MOCK_DEFAULT_PARTITIONS);
}

/*
 * Wait for SIGTERM/SIGINT (blocked in every thread: read from sigfd)
 * and, with watch_stdin, end of file on stdin.  Returns what ended it,
 * for the log line.
 */
static const char *
wait_for_stop(int sigfd, bool watch_stdin)
{
    struct pollfd pfd[2] = {
        { .fd = sigfd, .events = POLLIN },
        { .fd = STDIN_FILENO, .events = POLLIN },
    };

    for (;;) {
        if (poll(pfd, watch_stdin ? 2 : 1, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return "poll failed";
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;

            if (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
                si.ssi_signo != SIGHUP) {
                return si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
            }
        }
        if (watch_stdin && pfd[1].revents != 0) {
            char buf[256];
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                return "end of stdin";
            }
            /* bytes on stdin mean nothing: read and dropped */
        }
    }
}

int
main(int argc, char **argv)
{
    int nbrokers = 3, opt, sigfd;
    const char *topics = NULL, *why;
    bool watch_stdin = false, debug = false;
    struct kr_mock *m;
    char err[512];
    sigset_t sigs;
    char *end;
    long v;

    while ((opt = getopt(argc, argv, "b:t:wdVh")) != -1) {
        switch (opt) {
        case 'b':
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || v < 1 ||
                v > KR_MOCK_MAX_BROKERS) {
                fprintf(stderr, "%s: -b: bad broker count '%s' (want "
                        "1..%d)\n", kr_prog, optarg, KR_MOCK_MAX_BROKERS);
                return KR_EXIT_USAGE;
            }
            nbrokers = (int)v;
            break;
        case 't':
            topics = optarg;
            break;
        case 'w':
            watch_stdin = true;
            break;
        case 'd':
            debug = true;
            break;
        case 'V':
            printf("%s %s (librdkafka %s)\n", kr_prog, PACKAGE_VERSION,
                   rd_kafka_version_str());
            return KR_EXIT_OK;
        case 'h':
            usage(stdout);
            return KR_EXIT_OK;
        default:
            usage(stderr);
            return KR_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", kr_prog,
                argv[optind]);
        usage(stderr);
        return KR_EXIT_USAGE;
    }

    /* The stop signals go to the signalfd only; SIGHUP (a terminal
     * hanging up on krelay's process group) is read and ignored: krelay
     * says when to stop.  A reader of stdout that went away must not
     * kill this process with SIGPIPE. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0 ||
        (sigfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0) {
        fprintf(stderr, "%s: signalfd: %s\n", kr_prog, strerror(errno));
        return KR_EXIT_FAIL;
    }
    signal(SIGPIPE, SIG_IGN);

    m = kr_mock_start(nbrokers, debug, err, sizeof(err));
    if (m == NULL || kr_mock_topics(m, topics, err, sizeof(err)) != KR_OK) {
        fprintf(stderr, "%s: %s\n", kr_prog, err);
        kr_mock_stop(m);
        close(sigfd);
        return KR_EXIT_FAIL;
    }
    /* Ready: the one line of the protocol. */
    printf("%s\n", kr_mock_bootstraps(m));
    if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: cannot write the bootstrap list: %s\n",
                kr_prog, strerror(errno));
        kr_mock_stop(m);
        close(sigfd);
        return KR_EXIT_FAIL;
    }

    why = wait_for_stop(sigfd, watch_stdin);
    if (debug) {
        fprintf(stderr, "%s: %s: stopping\n", kr_prog, why);
    }
    kr_mock_stop(m);
    close(sigfd);
    return KR_EXIT_OK;
}
