/*
 * krbench - krelay's load generator for `make bench` (contrib/bench/).
 *
 *   krbench mock    -t NAME:PARTITIONS... [-b N] [-H PORT,...]
 *                   [-G PORT,...] [-r FILE]
 *   krbench produce -B BOOTSTRAP -t TOPIC -p PARTS -s SIZE
 *                   (-d SECONDS [-w WARMUP] | -n RECORDS) [-l LINGER_MS]
 *                   [-b BATCH_RECORDS] [-q] [-m MAP] [-C PID,...] [-S CA]
 *                   [-A MECHANISM:USER]
 *   krbench consume -B BOOTSTRAP -t TOPIC -p PARTS [-d MAXSECONDS] [-m MAP]
 *                   [-C PID,...] [-S CA] [-A MECHANISM:USER]
 *   krbench latency -a HOST:PORT[,HOST:PORT...] [-N NAME,...] -t TOPIC
 *                   [-P PART] -R RATE -n COUNT [-c CONNS] [-s SIZE]
 *                   [-V VERSION] [-W WARMUP] [-O OPENWARMUP] [-S SEED]
 *                   [-C PID,...]
 *   krbench idle    -a HOST:PORT[,HOST:PORT...] -n CONNS [-k WINDOW]
 *                   [-T HOLDSECONDS] [-t TOPIC] [-S CA]
 *   krbench handshake -a HOST:PORT[,HOST:PORT...] -n COUNT -S CA
 *                   [-C PID,...]
 *   krbench blast   -a HOST:PORT[,HOST:PORT...] [-c CONNS] [-D DEPTH]
 *                   [-d SECONDS] [-w WARMUP] [-r RECORDS] [-s SIZE]
 *                   [-p PARTITIONS] [-V VERSION] [-t TOPIC] [-S CA]
 *                   [-i USEC] [-C PID[/THREAD],...]
 *   krbench canned  -l HOST:PORT [-r FILE] [-t TOPIC] [-n NODEID]
 *                   [-i USEC]
 *
 * Every mode but mock prints one JSON object on stdout when it is done
 * (fields described in contrib/bench/results/README.md); progress and
 * errors go to stderr.  Every loop is bounded in time: nothing waits
 * forever on a peer.
 *
 * mock: librdkafka's mock cluster with N brokers (NodeIds 1..N) on
 *   kernel-chosen 127.0.0.1 ports, the given topics (partition p led by
 *   NodeId (p % N) + 1).  Writes "PORT,PORT,..." (listen ports in NodeId
 *   order) to FILE and stdout once ready.  SIGUSR2 makes broker n
 *   advertise 127.0.0.1:<n-th -H port> (an L4 proxy's listener, needs
 *   librdkafka >= 2.10: rd_kafka_mock_broker_set_host_port), SIGHUP the
 *   n-th -G port (a TLS-terminating proxy's listener; SIGHUP is ignored
 *   without -G), SIGUSR1 its own port again; each switch prints
 *   "advertise haproxy", "advertise haproxy_tls" or "advertise direct".
 *   Accepted sockets get TCP_NODELAY, as a broker's do.
 *   SIGTERM/SIGINT stop.
 * produce: librdkafka producer, acks=1, batches up to 1 MiB (batch.size),
 *   records of SIZE bytes round-robin over partitions 0..PARTS-1.  With
 *   -d, enqueues for WARMUP + SECONDS and reports the delivery rate in
 *   the SECONDS window; with -n, delivers RECORDS records (preloading).
 *   linger.ms is LINGER_MS (default 5); batch.num.messages is
 *   BATCH_RECORDS (default 1000000: batches are cut by batch.size; 1:
 *   one record per batch, and librdkafka sends a batch per request, so
 *   one record per Produce request; below 100 the queue holds at most
 *   10,000 x BATCH_RECORDS records, so that the flush after the window
 *   is short).  -q (with -n): the partitions in
 *   turn, each filled before the next, so that batches reach batch.size
 *   (librdkafka's mock answers a Fetch with one batch per partition: a
 *   broker would send up to max.partition.fetch.bytes of batches).
 * consume: librdkafka consumer assigned every partition from the
 *   beginning; reads to the end of each (partition EOF) and reports the
 *   rate between the first record and the last one.
 * latency: a raw-socket open-loop client.  Sends small Produce requests
 *   (one RecordBatch v2 of one SIZE-byte record, acks=1) at RATE per
 *   second over CONNS connections, request i scheduled at t0 + i/RATE;
 *   latency = response arrival - scheduled time (no coordinated
 *   omission).  Reports percentiles in microseconds.  With several
 *   addresses (targets, named by -N) the requests are interleaved in one
 *   run: CONNS connections per target, rounds of one request per target
 *   in an order drawn per round (splitmix64 from SEED), request i due at
 *   t0 + i/(RATE * targets), so that every target gets RATE per second
 *   and all see the same machine conditions; percentiles per target
 *   under "targets" (also with one target when -N names it).  COUNT is
 *   per target.  WARMUP closed-loop requests per target first (default
 *   200), then OPENWARMUP open-loop rounds that are sent at the rate but
 *   left out of the statistics (default 0).  "late" counts measured
 *   requests sent more than 1/RATE after their due time, "late_1ms" more
 *   than 1 ms.
 * idle: opens CONNS connections (at most WINDOW in set-up at once,
 *   round-robin over the addresses), sends ApiVersions v0 and Metadata v1
 *   (one topic) on each and reads the responses, then holds them idle.
 *   Prints "ready N" on stdout when all are idle, and exits after
 *   HOLDSECONDS or on SIGTERM/SIGINT/SIGUSR1, reporting how many were
 *   still open.  With -S, each does its TLS handshake first.
 * handshake: COUNT full TLS handshakes one after the other, round-robin
 *   over the addresses, each on a new connection closed after it (no
 *   session resumed): what a proxy's CPU per handshake is (-C).  Reports
 *   the first one's version, cipher and group.
 *
 * blast, canned: a load generator that is cheaper per request than a
 *   proxy (prebuilt Produce frames over many connections) and a scripted
 *   upstream that answers them with a prebuilt response: tests/bench/
 *   kb_blast.c says how.
 *
 * -S CA (produce, consume, idle, handshake, blast): TLS to the target, its
 *   certificate checked against the CA file and the IP address: TLS 1.3,
 *   X25519; the raw-socket clients (idle, handshake) also offer only
 *   TLS_AES_128_GCM_SHA256 (librdkafka cannot restrict TLS 1.3 suites:
 *   the proxies in the benchmark accept only that one).
 *
 * -A MECHANISM:USER (produce, consume): SASL to the target (issue 9:
 *   krelay's termination), librdkafka's sasl.mechanism MECHANISM (PLAIN,
 *   SCRAM-SHA-256, SCRAM-SHA-512) as USER, the password from the
 *   environment variable KRBENCH_SASL_PASSWORD (not on the command line,
 *   where ps shows it); SASL_PLAINTEXT, or SASL_SSL with -S.  A failed
 *   authentication ends the run at once (exit 1, "SASL authentication
 *   failed" on stderr) instead of waiting out its timeouts.  The JSON
 *   gains "sasl_mechanism".
 * -m FROM:TO,... (produce, consume): the client connects to port TO
 *   whenever librdkafka dials port FROM (rd_kafka_conf_set_connect_cb);
 *   the harness uses it to route through HAProxy when the mock cannot
 *   advertise HAProxy's ports (librdkafka < 2.10).
 * -C PID,... (produce, consume, latency, blast): report how much CPU time
 *   each of these processes (the mock, the proxies) used inside the
 *   measured window ("peer_cpu_window_s", seconds, in the order given; -1
 *   if unreadable or PID is 0, a placeholder), from /proc/PID/stat; an
 *   entry PID/NAME counts only PID's threads named NAME (e.g.
 *   PID/krelay-audit: krelay's audit writer), and how long each one's
 *   threads waited, runnable, for a CPU ("peer_wait_window_s", from
 *   /proc/PID/task/TID/schedstat).  Always reported:
 *   "system_cpu_window_s", the busy CPU seconds of the whole machine in
 *   the window (/proc/stat), so that other load can be noticed.
 */
#define _GNU_SOURCE 1

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <librdkafka/rdkafka_mock.h>

#include "kb_blast.h"
#include "kb_wire.h"

#define KB_MAX_BROKERS 16
#define KB_MAX_TOPICS 16
#define KB_MAX_MAP 16
#define KB_MAX_ADDRS 16

/* ---- small helpers ------------------------------------------------------- */

void
kb_die(const char *fmt, ...)
{
    va_list ap;

    fputs("krbench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t
kb_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This process's system (kernel) CPU time in seconds. */
double
kb_sys_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* This process's user + system CPU time in seconds. */
double
kb_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/*
 * -C PID,...: other processes (the mock, the proxies) whose CPU time is
 * read at the edges of the measured window, from /proc/PID/stat; an entry
 * PID/NAME reads only PID's threads named NAME (/proc/PID/task/TID/comm,
 * e.g. krelay's audit writer "krelay-audit"), from their
 * /proc/PID/task/TID/stat.
 */
static long kb_peers[KB_MAX_PEERS];
static const char *kb_peer_comm[KB_MAX_PEERS];  /* NULL: the process */
static int kb_npeers;

/* utime + stime in seconds from a stat file; -1 when unreadable. */
static double
kb_stat_cpu_s(const char *path)
{
    char line[1024], *p;
    unsigned long ut = 0, st = 0;
    FILE *f;
    int ok;

    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    p = fgets(line, sizeof(line), f);
    fclose(f);
    if (p == NULL || (p = strrchr(line, ')')) == NULL) {
        return -1;
    }
    /* After "pid (comm) ": state is field 3, utime 14, stime 15. */
    ok = sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                &ut, &st);
    if (ok != 2) {
        return -1;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* utime + stime of pid in seconds (comm != NULL: of its threads named
   comm only; 0 when none is); -1 when unreadable. */
static double
kb_proc_cpu_s(long pid, const char *comm)
{
    char path[300], name[64];
    double sum = 0;
    struct dirent *de;
    DIR *d;

    if (pid <= 0) {
        return -1;                  /* -C 0: a placeholder */
    }
    if (comm == NULL) {
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        return kb_stat_cpu_s(path);
    }
    snprintf(path, sizeof(path), "/proc/%ld/task", pid);
    d = opendir(path);
    if (d == NULL) {
        return -1;
    }
    while ((de = readdir(d)) != NULL) {
        FILE *f;
        double v;

        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%ld/task/%s/comm", pid,
                 de->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;               /* the thread is gone */
        }
        if (fgets(name, sizeof(name), f) == NULL) {
            name[0] = '\0';
        }
        fclose(f);
        name[strcspn(name, "\n")] = '\0';
        if (strcmp(name, comm) != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%ld/task/%s/stat", pid,
                 de->d_name);
        if ((v = kb_stat_cpu_s(path)) >= 0) {
            sum += v;
        }
    }
    closedir(d);
    return sum;
}

/*
 * CPU seconds the whole machine spent busy in processes (every CPU:
 * user, nice, system, and steal by the hypervisor), from /proc/stat; -1
 * when unreadable.  irq and softirq are left out: loopback traffic of the
 * benchmark itself is processed there without being charged to a process.
 */
static double
kb_system_busy_s(void)
{
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    int n;

    if (f == NULL) {
        return -1;
    }
    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
               &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8) {
        return -1;
    }
    /* user nice system idle iowait irq softirq steal */
    return (double)(v[0] + v[1] + v[2] + v[7]) /
           (double)sysconf(_SC_CLK_TCK);
}

/*
 * Seconds pid's threads (comm != NULL: those named comm) have spent
 * runnable but waiting for a CPU: the second field of
 * /proc/PID/task/TID/schedstat, summed over the threads alive now; -1
 * when unreadable.  With the CPU time it says whether a process was held
 * back by other load (busy + waiting = the whole window: it had work all
 * along).
 */
static double
kb_proc_wait_s(long pid, const char *comm)
{
    char path[300], name[64];
    unsigned long long run, wait;
    double sum = 0;
    struct dirent *de;
    DIR *d;

    if (pid <= 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%ld/task", pid);
    d = opendir(path);
    if (d == NULL) {
        return -1;
    }
    while ((de = readdir(d)) != NULL) {
        FILE *f;
        int ok;

        if (de->d_name[0] == '.') {
            continue;
        }
        if (comm != NULL) {
            snprintf(path, sizeof(path), "/proc/%ld/task/%s/comm", pid,
                     de->d_name);
            f = fopen(path, "r");
            if (f == NULL) {
                continue;
            }
            if (fgets(name, sizeof(name), f) == NULL) {
                name[0] = '\0';
            }
            fclose(f);
            name[strcspn(name, "\n")] = '\0';
            if (strcmp(name, comm) != 0) {
                continue;
            }
        }
        snprintf(path, sizeof(path), "/proc/%ld/task/%s/schedstat", pid,
                 de->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        ok = fscanf(f, "%llu %llu", &run, &wait);
        fclose(f);
        if (ok == 2) {
            sum += (double)wait / 1e9;
        }
    }
    closedir(d);
    return sum;
}

/* out[0..kb_npeers) = each peer's CPU seconds, out[kb_npeers] = system,
   out[kb_npeers + 1 + i] = peer i's run-queue wait. */
void
kb_peers_snap(double *out)
{
    for (int i = 0; i < kb_npeers; i++) {
        out[i] = kb_proc_cpu_s(kb_peers[i], kb_peer_comm[i]);
        out[kb_npeers + 1 + i] = kb_proc_wait_s(kb_peers[i], kb_peer_comm[i]);
    }
    out[kb_npeers] = kb_system_busy_s();
}

/*
 * ,"peer_cpu_window_s":[...] (seconds each peer ran in the window)
 * ,"system_cpu_window_s":S (busy seconds of all CPUs in the window)
 * ,"peer_wait_window_s":[...] (seconds each peer's threads waited,
 *   runnable, for a CPU in the window; summed over threads)
 */
void
kb_peers_print(const double *a, const double *b)
{
    const double *wa = a + kb_npeers + 1, *wb = b + kb_npeers + 1;

    printf(",\"peer_cpu_window_s\":[");
    for (int i = 0; i < kb_npeers; i++) {
        printf("%s%.3f", i ? "," : "",
               a[i] >= 0 && b[i] >= 0 ? b[i] - a[i] : -1.0);
    }
    printf("],\"system_cpu_window_s\":%.3f",
           a[kb_npeers] >= 0 && b[kb_npeers] >= 0 ? b[kb_npeers] -
           a[kb_npeers] : -1.0);
    printf(",\"peer_wait_window_s\":[");
    for (int i = 0; i < kb_npeers; i++) {
        printf("%s%.4f", i ? "," : "",
               wa[i] >= 0 && wb[i] >= 0 ? wb[i] - wa[i] : -1.0);
    }
    printf("]");
}

long
kb_parse_long(const char *s, long min, long max, const char *what)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        kb_die("bad %s '%s' (want %ld..%ld)", what, s, min, max);
    }
    return v;
}

double
kb_parse_double(const char *s, double min, double max, const char *what)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max)) {
        kb_die("bad %s '%s' (want %g..%g)", what, s, min, max);
    }
    return v;
}

/* "HOST:PORT" (IPv4 literal) into sin. */
void
kb_parse_addr(const char *s, struct sockaddr_in *sin)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    size_t hl;

    if (colon == NULL || (hl = (size_t)(colon - s)) == 0 ||
        hl >= sizeof(host)) {
        kb_die("bad address '%s' (want IPv4:PORT)", s);
    }
    memcpy(host, s, hl);
    host[hl] = '\0';
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)kb_parse_long(colon + 1, 1, 65535,
                                                  "port"));
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
        kb_die("bad IPv4 address '%s'", host);
    }
}

/* "IPv4:PORT,..." into addrs (at most max, else kb_die); the count. */
int
kb_parse_addrs(const char *s, struct sockaddr_in *addrs, int max)
{
    char *copy = strdup(s), *save = NULL, *tok;
    int n = 0;

    if (copy == NULL) {
        kb_die("out of memory");
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            kb_die("too many addresses");
        }
        kb_parse_addr(tok, &addrs[n++]);
    }
    free(copy);
    return n;
}

/* Raise RLIMIT_NOFILE to want (or the hard limit). */
void
kb_raise_nofile(rlim_t want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return;
    }
    if (rl.rlim_cur >= want) {
        return;
    }
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* ---- Kafka wire encoding (kb_wire.h) ------------------------------------- */

/* ApiVersions v0 request frame. */
static void
kb_apiversions_frame(struct kb_buf *b, int32_t corr)
{
    kb_i32(b, 0);
    kb_i16(b, 18);
    kb_i16(b, 0);
    kb_i32(b, corr);
    kb_str(b, "krbench", false);
    kb_set_i32(b, 0, (int32_t)(b->len - 4));
}

/* Metadata v1 request frame for one topic. */
static void
kb_metadata_frame(struct kb_buf *b, int32_t corr, const char *topic)
{
    kb_i32(b, 0);
    kb_i16(b, 3);
    kb_i16(b, 1);
    kb_i32(b, corr);
    kb_str(b, "krbench", false);
    kb_i32(b, 1);
    kb_str(b, topic, false);
    kb_set_i32(b, 0, (int32_t)(b->len - 4));
}

int
kb_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Blocking connect with TCP_NODELAY, then non-blocking.  -1 on error. */
static int
kb_connect(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;

    if (fd < 0) {
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0 ||
        kb_set_nonblock(fd) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- librdkafka common --------------------------------------------------- */

struct kb_map {
    uint16_t from, to;
};
static struct kb_map kb_maps[KB_MAX_MAP];
static int kb_nmaps;

static void
kb_parse_map(const char *s)
{
    char *copy = strdup(s), *save = NULL, *tok;

    if (copy == NULL) {
        kb_die("out of memory");
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');

        if (colon == NULL || kb_nmaps == KB_MAX_MAP) {
            kb_die("bad -m '%s' (want FROM:TO,...)", s);
        }
        *colon = '\0';
        kb_maps[kb_nmaps].from = (uint16_t)kb_parse_long(tok, 1, 65535,
                                                         "port");
        kb_maps[kb_nmaps].to = (uint16_t)kb_parse_long(colon + 1, 1, 65535,
                                                       "port");
        kb_nmaps++;
    }
    free(copy);
}

/* librdkafka's connect, with the -m port map applied. */
static int
kb_connect_cb(int fd, const struct sockaddr *addr, int addrlen,
              const char *id, void *opaque)
{
    struct sockaddr_in sin;

    (void)id;
    (void)opaque;
    if (addr->sa_family == AF_INET && addrlen >= (int)sizeof(sin)) {
        memcpy(&sin, addr, sizeof(sin));
        for (int i = 0; i < kb_nmaps; i++) {
            if (ntohs(sin.sin_port) == kb_maps[i].from) {
                sin.sin_port = htons(kb_maps[i].to);
                break;
            }
        }
        if (connect(fd, (const struct sockaddr *)&sin, sizeof(sin)) == -1 &&
            errno != EINPROGRESS) {
            return errno;
        }
        return 0;
    }
    if (connect(fd, addr, (socklen_t)addrlen) == -1 && errno != EINPROGRESS) {
        return errno;
    }
    return 0;
}

void
kb_parse_peers(const char *s)
{
    char *copy = strdup(s), *save = NULL, *tok, *slash;

    if (copy == NULL) {
        kb_die("out of memory");
    }
    /* copy stays allocated: kb_peer_comm points into it */
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (kb_npeers == KB_MAX_PEERS) {
            kb_die("too many -C pids");
        }
        slash = strchr(tok, '/');
        kb_peer_comm[kb_npeers] = NULL;
        if (slash != NULL) {
            *slash = '\0';
            if (slash[1] == '\0' || strlen(slash + 1) > 15) {
                kb_die("bad -C entry '%s/%s' (want PID/THREADNAME)", tok,
                       slash + 1);
            }
            kb_peer_comm[kb_npeers] = slash + 1;
        }
        kb_peers[kb_npeers++] = kb_parse_long(tok, 0, 1L << 30, "pid");
    }
}

static void
kb_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[512];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        kb_die("%s=%s: %s", k, v, errstr);
    }
}

/*
 * -S CAFILE (produce, consume, idle, handshake): TLS to the target, its
 * certificate checked against CAFILE (and the address's IP), with the
 * settings the benchmark compares proxies with: TLS 1.3 (the proxies
 * accept nothing older), X25519 (librdkafka: ssl.curves.list; its
 * ssl.cipher.suites is TLS 1.2's list, so TLS_AES_128_GCM_SHA256 comes
 * from the proxies, which offer nothing else).
 */
static const char *kb_tls_ca;

/*
 * -A MECHANISM:USER (produce, consume): SASL, the password from
 * KRBENCH_SASL_PASSWORD.  kb_sasl_mech and kb_sasl_user point into the
 * option's copy (kb_parse_sasl); NULL without -A.
 */
static char *kb_sasl_mech;
static const char *kb_sasl_user;

static void
kb_parse_sasl(const char *s)
{
    char *colon;

    free(kb_sasl_mech);
    kb_sasl_mech = strdup(s);
    if (kb_sasl_mech == NULL) {
        kb_die("out of memory");
    }
    colon = strchr(kb_sasl_mech, ':');
    if (colon == NULL || colon == kb_sasl_mech || colon[1] == '\0') {
        kb_die("bad -A '%s' (want MECHANISM:USER)", s);
    }
    *colon = '\0';
    kb_sasl_user = colon + 1;
}

/* A failed SASL login ends the run: librdkafka would retry until its
   timeouts (a consumer: -d seconds), and the leg would only look slow. */
static void
kb_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
        kb_die("SASL authentication failed: %s", reason);
    }
    fprintf(stderr, "krbench: %s: %s\n",
            rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/* ,"sasl_mechanism":"..." in a produce or consume JSON with -A */
static void
kb_sasl_print(void)
{
    if (kb_sasl_mech != NULL) {
        printf(",\"sasl_mechanism\":\"%s\"", kb_sasl_mech);
    }
}

static rd_kafka_conf_t *
kb_conf_new(const char *bootstrap)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    kb_conf_set(conf, "bootstrap.servers", bootstrap);
    kb_conf_set(conf, "client.id", "krbench");
    kb_conf_set(conf, "log_level", "4");
    if (kb_sasl_mech != NULL) {
        const char *pw = getenv("KRBENCH_SASL_PASSWORD");

        if (pw == NULL || *pw == '\0') {
            kb_die("-A needs the password in KRBENCH_SASL_PASSWORD");
        }
        kb_conf_set(conf, "security.protocol",
                    kb_tls_ca != NULL ? "sasl_ssl" : "sasl_plaintext");
        kb_conf_set(conf, "sasl.mechanism", kb_sasl_mech);
        kb_conf_set(conf, "sasl.username", kb_sasl_user);
        kb_conf_set(conf, "sasl.password", pw);
        rd_kafka_conf_set_error_cb(conf, kb_error_cb);
    }
    if (kb_tls_ca != NULL) {
        kb_conf_set(conf, "security.protocol",
                    kb_sasl_mech != NULL ? "sasl_ssl" : "ssl");
        kb_conf_set(conf, "ssl.ca.location", kb_tls_ca);
        kb_conf_set(conf, "ssl.curves.list", "X25519");
        kb_conf_set(conf, "ssl.endpoint.identification.algorithm", "https");
    }
    if (kb_nmaps > 0) {
        rd_kafka_conf_set_connect_cb(conf, kb_connect_cb);
    }
    return conf;
}

/*
 * The mock's accepted sockets get TCP_NODELAY, as a Kafka broker's do
 * (SocketServer: setTcpNoDelay(true)); librdkafka's mock does not set it,
 * and Nagle's algorithm then holds back a small response while the
 * previous one is unacknowledged, which shows as latency on the direct
 * leg only.  The dynamic linker resolves librdkafka's accept()/accept4()
 * to these (the program is linked with -rdynamic); they call libc's
 * through dlsym(RTLD_NEXT).
 */
typedef int (*kb_accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*kb_accept_fn)(int, struct sockaddr *, socklen_t *);

int accept(int fd, struct sockaddr *addr, socklen_t *len);
int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

static void
kb_nodelay(int s)
{
    int on = 1;

    if (s >= 0) {
        (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    }
}

int
accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    static kb_accept_fn real;
    int s;

    if (real == NULL) {
        real = (kb_accept_fn)dlsym(RTLD_NEXT, "accept");
        if (real == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    s = real(fd, addr, len);
    kb_nodelay(s);
    return s;
}

int
accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    static kb_accept4_fn real;
    int s;

    if (real == NULL) {
        real = (kb_accept4_fn)dlsym(RTLD_NEXT, "accept4");
        if (real == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    s = real(fd, addr, len, flags);
    kb_nodelay(s);
    return s;
}

/* ---- mock ---------------------------------------------------------------- */

static int
kb_mock(int argc, char **argv)
{
    struct {
        char *name;
        int parts;
    } topics[KB_MAX_TOPICS];
    int ntopics = 0, nbrokers = 3, opt, sig, ports[KB_MAX_BROKERS] = { 0 };
    int adv[KB_MAX_BROKERS] = { 0 }, nadv = 0;
    int advtls[KB_MAX_BROKERS] = { 0 }, nadvtls = 0;
    const char *ready = NULL;
    char errstr[512], list[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *mc;
    const char *bs;
    sigset_t sigs;
    size_t off = 0;

    while ((opt = getopt(argc, argv, "b:t:H:G:r:")) != -1) {
        switch (opt) {
        case 'b':
            nbrokers = (int)kb_parse_long(optarg, 1, KB_MAX_BROKERS,
                                          "brokers");
            break;
        case 't': {
            char *colon;

            if (ntopics == KB_MAX_TOPICS) {
                kb_die("too many topics");
            }
            topics[ntopics].name = strdup(optarg);
            if (topics[ntopics].name == NULL) {
                kb_die("out of memory");
            }
            colon = strrchr(topics[ntopics].name, ':');
            if (colon == NULL) {
                kb_die("bad -t '%s' (want NAME:PARTITIONS)", optarg);
            }
            *colon = '\0';
            topics[ntopics].parts = (int)kb_parse_long(colon + 1, 1, 10000,
                                                       "partitions");
            ntopics++;
            break;
        }
        case 'H':
        case 'G': {
            char *copy = strdup(optarg), *save = NULL, *tok;
            int *plist = opt == 'H' ? adv : advtls;
            int *nlist = opt == 'H' ? &nadv : &nadvtls;

            if (copy == NULL) {
                kb_die("out of memory");
            }
            for (tok = strtok_r(copy, ",", &save); tok != NULL;
                 tok = strtok_r(NULL, ",", &save)) {
                if (*nlist == KB_MAX_BROKERS) {
                    kb_die("too many -%c ports", opt);
                }
                plist[(*nlist)++] = (int)kb_parse_long(tok, 1, 65535, "port");
            }
            free(copy);
            break;
        }
        case 'r':
            ready = optarg;
            break;
        default:
            return 2;
        }
    }
    if (nadv != 0 && nadv != nbrokers) {
        kb_die("-H needs one port per broker (%d)", nbrokers);
    }
    if (nadvtls != 0 && nadvtls != nbrokers) {
        kb_die("-G needs one port per broker (%d)", nbrokers);
    }
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGUSR2);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    conf = rd_kafka_conf_new();
    kb_conf_set(conf, "log_level", "3");
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        kb_die("rd_kafka_new: %s", errstr);
    }
    mc = rd_kafka_mock_cluster_new(rk, nbrokers);
    if (mc == NULL) {
        kb_die("cannot start a mock cluster");
    }
    /* "127.0.0.1:P1,127.0.0.1:P2,..." in NodeId order. */
    bs = rd_kafka_mock_cluster_bootstraps(mc);
    for (int i = 0; i < nbrokers; i++) {
        const char *c = strchr(bs, ':');

        if (c == NULL) {
            kb_die("cannot parse bootstraps '%s'", bs);
        }
        ports[i] = atoi(c + 1);
        bs = strchr(c, ',');
        if (bs == NULL && i + 1 < nbrokers) {
            kb_die("too few brokers in bootstraps");
        }
        if (bs != NULL) {
            bs++;
        }
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
                                i ? "," : "", ports[i]);
    }
    for (int t = 0; t < ntopics; t++) {
        rd_kafka_resp_err_t err;

        /* Replication factor 1: the mock then places partition p on
         * the (p % N)-th broker, NodeId (p % N) + 1 (with N replicas
         * every leader would be NodeId 1; rd_kafka_mock_partition_set_
         * leader per partition is slow, one mock-thread round trip each). */
        err = rd_kafka_mock_topic_create(mc, topics[t].name, topics[t].parts,
                                         1);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            kb_die("topic %s: %s", topics[t].name, rd_kafka_err2str(err));
        }
    }
    if (ready != NULL) {
        char tmp[4096];
        FILE *f;

        snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
        f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%s\n", list) < 0 || fclose(f) != 0 ||
            rename(tmp, ready) != 0) {
            kb_die("%s: %s", ready, strerror(errno));
        }
    }
    printf("%s\n", list);
    fflush(stdout);
    fprintf(stderr, "krbench mock: librdkafka %s, brokers at ports %s\n",
            rd_kafka_version_str(), list);
    for (;;) {
        if (sigwait(&sigs, &sig) != 0 || (sig == SIGHUP && nadvtls == 0)) {
            continue;
        }
        if (sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGHUP) {
#if RD_KAFKA_VERSION >= 0x020a0000
            for (int i = 0; i < nbrokers; i++) {
                int port = ports[i];

                if (sig == SIGUSR2 && nadv > 0) {
                    port = adv[i];
                } else if (sig == SIGHUP) {
                    port = advtls[i];
                }
                rd_kafka_mock_broker_set_host_port(mc, i + 1, "127.0.0.1",
                                                   port);
            }
            printf("advertise %s\n", sig == SIGUSR2  ? "haproxy"
                                     : sig == SIGHUP ? "haproxy_tls"
                                                     : "direct");
#else
            (void)adv;
            (void)advtls;
            printf("advertise unsupported\n");
#endif
            fflush(stdout);
            continue;
        }
        break;
    }
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    for (int t = 0; t < ntopics; t++) {
        free(topics[t].name);
    }
    return 0;
}

/* ---- produce ------------------------------------------------------------- */

struct kb_pstats {
    uint64_t ok_records, ok_bytes, failed;
    rd_kafka_resp_err_t last_err;
};

/*
 * What the producer's own statistics (statistics.interval.ms) say of its
 * requests: how it batched, as seen through each path.  Cumulative
 * counters over the brokers (NodeId >= 0), and the latest window's
 * averages.
 */
struct kb_rkstats {
    int64_t tx, txbytes;                /* requests sent, their bytes */
    int64_t rx, rxbytes;                /* responses read, their bytes */
    double rtt_us;                      /* avg RTT, weighted by requests */
    double batch_bytes, batch_msgs;     /* topic batchsize / batchcnt avg */
    int64_t ts_us;                      /* librdkafka's "ts", 0: none yet */
};

static struct kb_rkstats kb_rks_last;

static int
kb_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *brokers, *b, *topics, *t;
    const char *key;
    struct kb_rkstats r = { 0 };
    double rtt_w = 0;

    (void)rk;
    (void)opaque;
    if (root == NULL) {
        return 0;
    }
    r.ts_us = json_integer_value(json_object_get(root, "ts"));
    brokers = json_object_get(root, "brokers");
    json_object_foreach(brokers, key, b) {
        json_int_t tx = json_integer_value(json_object_get(b, "tx"));
        json_t *rtt = json_object_get(b, "rtt");

        if (json_integer_value(json_object_get(b, "nodeid")) < 0) {
            continue;                   /* the bootstrap connections */
        }
        r.tx += tx;
        r.txbytes += json_integer_value(json_object_get(b, "txbytes"));
        r.rx += json_integer_value(json_object_get(b, "rx"));
        r.rxbytes += json_integer_value(json_object_get(b, "rxbytes"));
        if (rtt != NULL && json_integer_value(json_object_get(rtt, "cnt")) >
            0) {
            double n = (double)json_integer_value(json_object_get(rtt,
                                                                  "cnt"));

            r.rtt_us += n * (double)json_integer_value(
                json_object_get(rtt, "avg"));
            rtt_w += n;
        }
    }
    r.rtt_us = rtt_w > 0 ? r.rtt_us / rtt_w : 0;
    topics = json_object_get(root, "topics");
    json_object_foreach(topics, key, t) {
        r.batch_bytes = (double)json_integer_value(
            json_object_get(json_object_get(t, "batchsize"), "avg"));
        r.batch_msgs = (double)json_integer_value(
            json_object_get(json_object_get(t, "batchcnt"), "avg"));
    }
    json_decref(root);
    kb_rks_last = r;
    return 0;
}

static void
kb_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct kb_pstats *st = opaque;

    (void)rk;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        st->ok_records++;
        st->ok_bytes += m->len;
    } else {
        st->failed++;
        st->last_err = m->err;
    }
}

static int
kb_produce(int argc, char **argv)
{
    const char *bootstrap = NULL, *topic = NULL, *linger = "5";
    const char *batch_recs = "1000000";
    char qmax[32];
    int parts = 1, opt;
    long size = 1024, nrec = 0;
    double dur = 0, warm = 1.0;
    struct kb_pstats st = { 0 }, w0 = { 0 }, w1 = { 0 };
    struct kb_rkstats rks0 = { 0 }, rks1 = { 0 };
    double sysw0 = 0, sysw1 = 0;
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    uint8_t *payload;
    int64_t t0, tw0 = 0, tw1 = 0, tdeadline, tend;
    double cpu0, cpuw0 = 0, cpuw1 = 0;
    double peer0[KB_PEER_SNAP], peer1[KB_PEER_SNAP];
    uint64_t sent = 0;
    bool in_window = false, seq = false;

    while ((opt = getopt(argc, argv, "B:t:p:s:d:w:n:l:b:qm:C:S:A:")) != -1) {
        switch (opt) {
        case 'S': kb_tls_ca = optarg; break;
        case 'A': kb_parse_sasl(optarg); break;
        case 'q': seq = true; break;
        case 'B': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'p': parts = (int)kb_parse_long(optarg, 1, 100000, "parts");
            break;
        case 's': size = kb_parse_long(optarg, 0, 1000000, "size"); break;
        case 'd': dur = kb_parse_double(optarg, 0.1, 600, "seconds"); break;
        case 'w': warm = kb_parse_double(optarg, 0, 60, "warmup"); break;
        case 'n': nrec = kb_parse_long(optarg, 1, 1000000000L, "records");
            break;
        case 'l': linger = optarg;
            (void)kb_parse_long(optarg, 0, 60000, "linger.ms");
            break;
        case 'b': batch_recs = optarg;
            (void)kb_parse_long(optarg, 1, 1000000, "batch.num.messages");
            break;
        case 'm': kb_parse_map(optarg); break;
        case 'C': kb_parse_peers(optarg); break;
        default: return 2;
        }
    }
    if (bootstrap == NULL || topic == NULL || (dur == 0) == (nrec == 0)) {
        kb_die("produce needs -B, -t and one of -d, -n");
    }
    if (seq && nrec == 0) {
        kb_die("produce -q needs -n");
    }
    payload = malloc((size_t)size + 1);
    if (payload == NULL) {
        kb_die("out of memory");
    }
    for (long i = 0; i < size; i++) {
        payload[i] = (uint8_t)('a' + i % 26);
    }
    conf = kb_conf_new(bootstrap);
    kb_conf_set(conf, "acks", "1");
    kb_conf_set(conf, "batch.size", "1048576");
    kb_conf_set(conf, "batch.num.messages", batch_recs);
    kb_conf_set(conf, "message.max.bytes", "1200000");
    kb_conf_set(conf, "linger.ms", linger);
    kb_conf_set(conf, "compression.codec", "none");
    kb_conf_set(conf, "queue.buffering.max.kbytes", "65536");
    /* Small batches: a short queue, or the flush after the window
       (requests of one record each) takes many seconds. */
    snprintf(qmax, sizeof(qmax), "%ld",
             strtol(batch_recs, NULL, 10) >= 100 ? 1000000L
                                                  : 10000L *
                                                        strtol(batch_recs,
                                                               NULL, 10));
    kb_conf_set(conf, "queue.buffering.max.messages", qmax);
    kb_conf_set(conf, "message.timeout.ms", "30000");
    kb_conf_set(conf, "statistics.interval.ms", "500");
    rd_kafka_conf_set_stats_cb(conf, kb_stats_cb);
    rd_kafka_conf_set_dr_msg_cb(conf, kb_dr_cb);
    rd_kafka_conf_set_opaque(conf, &st);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        kb_die("rd_kafka_new: %s", errstr);
    }
    rkt = rd_kafka_topic_new(rk, topic, NULL);
    {
        /* Connect and learn the leaders before the clock starts (10 s;
           in slices, serving kb_error_cb between: a failed SASL login
           ends the run at once). */
        const struct rd_kafka_metadata *md = NULL;
        int tries = 0;

        while (rd_kafka_metadata(rk, 0, rkt, &md, 500) !=
               RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_poll(rk, 0);
            if (++tries == 20) {
                kb_die("no metadata from %s", bootstrap);
            }
        }
        rd_kafka_metadata_destroy(md);
    }
    cpu0 = kb_cpu_s();
    kb_peers_snap(peer0);
    t0 = kb_now_ns();
    if (dur > 0) {
        tw0 = t0 + (int64_t)(warm * 1e9);
        tw1 = tw0 + (int64_t)(dur * 1e9);
        tdeadline = tw1;
    } else {
        tdeadline = t0 + (int64_t)600e9;
    }
    for (;;) {
        int64_t now = kb_now_ns();

        if (dur > 0 && !in_window && now >= tw0) {
            rd_kafka_poll(rk, 0);
            w0 = st;
            rks0 = kb_rks_last;
            tw0 = kb_now_ns();
            cpuw0 = kb_cpu_s();
            sysw0 = kb_sys_s();
            kb_peers_snap(peer0);
            in_window = true;
        }
        if (now >= tdeadline || (nrec > 0 && sent >= (uint64_t)nrec)) {
            break;
        }
        for (int i = 0; i < 256 && (nrec == 0 || sent < (uint64_t)nrec);
             i++) {
            int32_t part = seq ? (int32_t)(sent * (uint64_t)parts /
                                           (uint64_t)nrec)
                               : (int32_t)(sent % (uint64_t)parts);
            bool full = false;

            /* Keep the queue full: wait for deliveries when it is. */
            while (rd_kafka_produce(rkt, part, 0, payload, (size_t)size,
                                    NULL, 0, NULL) == -1) {
                if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                    kb_die("produce: %s",
                           rd_kafka_err2str(rd_kafka_last_error()));
                }
                rd_kafka_poll(rk, 1);
                if (kb_now_ns() >= tdeadline ||
                    (dur > 0 && !in_window && kb_now_ns() >= tw0)) {
                    full = true;
                    break;
                }
            }
            if (full) {
                break;              /* window edge: back to the top */
            }
            sent++;
        }
        rd_kafka_poll(rk, 0);
    }
    if (dur > 0) {
        rd_kafka_poll(rk, 0);
        w1 = st;
        rks1 = kb_rks_last;
        tw1 = kb_now_ns();
        cpuw1 = kb_cpu_s();
        sysw1 = kb_sys_s();
        kb_peers_snap(peer1);
    }
    if (rd_kafka_flush(rk, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "krbench: flush timed out, %d messages left\n",
                rd_kafka_outq_len(rk));
    }
    tend = kb_now_ns();
    if (dur == 0) {
        /* Preload: the rate over the whole run. */
        tw0 = t0;
        tw1 = tend;
        w1 = st;
        cpuw0 = cpu0;
        cpuw1 = kb_cpu_s();
        kb_peers_snap(peer1);
    }
    {
        double secs = (double)(tw1 - tw0) / 1e9;
        uint64_t recs = w1.ok_records - w0.ok_records;
        uint64_t bytes = w1.ok_bytes - w0.ok_bytes;

        printf("{\"mode\":\"produce\",\"librdkafka\":\"%s\","
               "\"record_bytes\":%ld,\"partitions\":%d,"
               "\"window_s\":%.4f,\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
               ",\"mb_per_s\":%.3f,\"records_per_s\":%.1f,"
               "\"total_records\":%" PRIu64 ",\"total_bytes\":%" PRIu64
               ",\"failed\":%" PRIu64 ",\"last_error\":\"%s\","
               "\"elapsed_s\":%.4f,\"client_cpu_s\":%.4f,"
               "\"client_cpu_window_s\":%.4f",
               rd_kafka_version_str(), size, parts, secs, recs, bytes,
               secs > 0 ? bytes / secs / 1e6 : 0.0,
               secs > 0 ? recs / secs : 0.0, st.ok_records, st.ok_bytes,
               st.failed,
               st.failed ? rd_kafka_err2name(st.last_err) : "",
               (double)(tend - t0) / 1e9, kb_cpu_s() - cpu0, cpuw1 - cpuw0);
        if (dur > 0) {
            /* the client's kernel time: on loopback a sender also runs
               the receiver's TCP input in its softirq */
            printf(",\"client_sys_window_s\":%.4f", sysw1 - sysw0);
        }
        if (rks0.ts_us > 0 && rks1.ts_us > rks0.ts_us &&
            rks1.tx > rks0.tx) {
            /* between the statistics nearest the window's edges */
            printf(",\"requests_per_s\":%.1f,\"request_bytes_avg\":%.0f,"
                   "\"rtt_us_avg\":%.0f,\"batch_bytes_avg\":%.0f,"
                   "\"batch_records_avg\":%.1f",
                   (double)(rks1.tx - rks0.tx) * 1e6 /
                       (double)(rks1.ts_us - rks0.ts_us),
                   (double)(rks1.txbytes - rks0.txbytes) /
                       (double)(rks1.tx - rks0.tx),
                   rks1.rtt_us, rks1.batch_bytes, rks1.batch_msgs);
        }
        kb_sasl_print();
        kb_peers_print(peer0, peer1);
        printf("}\n");
    }
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(payload);
    return st.failed > 0 || st.ok_records == 0 ? 1 : 0;
}

/* ---- consume ------------------------------------------------------------- */

static int
kb_consume(int argc, char **argv)
{
    const char *bootstrap = NULL, *topic = NULL;
    int parts = 1, opt, neof = 0;
    double maxsecs = 60;
    char errstr[512], group[64];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *tp;
    rd_kafka_queue_t *q;
    rd_kafka_message_t *msgs[1024];
    bool *eof;
    uint64_t recs = 0, bytes = 0, errors = 0;
    int64_t t0, tfirst = 0, tlastrec = 0, tdeadline;
    double cpu0, cpuw0 = 0, cpuw1 = 0;
    double peer0[KB_PEER_SNAP], peer1[KB_PEER_SNAP];

    while ((opt = getopt(argc, argv, "B:t:p:d:m:C:S:A:")) != -1) {
        switch (opt) {
        case 'S': kb_tls_ca = optarg; break;
        case 'A': kb_parse_sasl(optarg); break;
        case 'B': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'p': parts = (int)kb_parse_long(optarg, 1, 100000, "parts");
            break;
        case 'd': maxsecs = kb_parse_double(optarg, 1, 600, "seconds");
            break;
        case 'm': kb_parse_map(optarg); break;
        case 'C': kb_parse_peers(optarg); break;
        default: return 2;
        }
    }
    if (bootstrap == NULL || topic == NULL) {
        kb_die("consume needs -B and -t");
    }
    eof = calloc((size_t)parts, sizeof(*eof));
    if (eof == NULL) {
        kb_die("out of memory");
    }
    snprintf(group, sizeof(group), "krbench-%ld", (long)getpid());
    conf = kb_conf_new(bootstrap);
    kb_conf_set(conf, "group.id", group);
    kb_conf_set(conf, "enable.auto.commit", "false");
    kb_conf_set(conf, "enable.auto.offset.store", "false");
    kb_conf_set(conf, "enable.partition.eof", "true");
    kb_conf_set(conf, "auto.offset.reset", "earliest");
    kb_conf_set(conf, "fetch.wait.max.ms", "10");
    kb_conf_set(conf, "statistics.interval.ms", "500");
    rd_kafka_conf_set_stats_cb(conf, kb_stats_cb);
    kb_conf_set(conf, "queued.max.messages.kbytes", "1048576");
    kb_conf_set(conf, "queued.min.messages", "10000000");
    /* librdkafka >= 2.3: no pause when the local queue is full. */
    (void)rd_kafka_conf_set(conf, "fetch.queue.backoff.ms", "0", errstr,
                            sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        kb_die("rd_kafka_new: %s", errstr);
    }
    rd_kafka_poll_set_consumer(rk);
    tp = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++) {
        rd_kafka_topic_partition_list_add(tp, topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    }
    cpu0 = kb_cpu_s();
    t0 = kb_now_ns();
    tdeadline = t0 + (int64_t)(maxsecs * 1e9);
    if (rd_kafka_assign(rk, tp) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        kb_die("assign failed");
    }
    rd_kafka_topic_partition_list_destroy(tp);
    q = rd_kafka_queue_get_consumer(rk);
    while (neof < parts && kb_now_ns() < tdeadline) {
        ssize_t n = rd_kafka_consume_batch_queue(
            q, 100, msgs, sizeof(msgs) / sizeof(msgs[0]));
        bool got = false;

        for (ssize_t i = 0; i < n; i++) {
            rd_kafka_message_t *m = msgs[i];

            if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (recs == 0) {
                    tfirst = kb_now_ns();
                    cpuw0 = kb_cpu_s();
                    kb_peers_snap(peer0);
                }
                recs++;
                bytes += m->len;
                got = true;
            } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                if (m->partition >= 0 && m->partition < parts &&
                    !eof[m->partition]) {
                    eof[m->partition] = true;
                    neof++;
                    if (neof == parts) {
                        cpuw1 = kb_cpu_s();
                        kb_peers_snap(peer1);
                    }
                }
            } else if (m->err == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
                kb_die("SASL authentication failed: %s",
                       rd_kafka_message_errstr(m));
            } else {
                errors++;
                if (errors <= 5) {
                    fprintf(stderr, "krbench: consume: %s\n",
                            rd_kafka_message_errstr(m));
                }
            }
            rd_kafka_message_destroy(m);
        }
        if (got) {
            tlastrec = kb_now_ns();
        }
    }
    {
        /* The window ends at the last record, not at the last EOF: the
         * EOFs come from Fetch requests that wait out MaxWaitMs. */
        double secs = tlastrec > tfirst ? (double)(tlastrec - tfirst) / 1e9
                                        : 0;

        printf("{\"mode\":\"consume\",\"librdkafka\":\"%s\","
               "\"partitions\":%d,\"partitions_done\":%d,"
               "\"window_s\":%.4f,\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
               ",\"mb_per_s\":%.3f,\"records_per_s\":%.1f,"
               "\"total_records\":%" PRIu64 ",\"total_bytes\":%" PRIu64
               ",\"failed\":%" PRIu64 ",\"elapsed_s\":%.4f,"
               "\"client_cpu_s\":%.4f,\"client_cpu_window_s\":%.4f",
               rd_kafka_version_str(), parts, neof, secs, recs, bytes,
               secs > 0 ? bytes / secs / 1e6 : 0.0,
               secs > 0 ? recs / secs : 0.0, recs, bytes, errors,
               (double)(kb_now_ns() - t0) / 1e9, kb_cpu_s() - cpu0,
               cpuw1 - cpuw0);
        if (kb_rks_last.rx > 0) {
            /* the whole run's responses (Fetch, bar a few) */
            printf(",\"responses\":%" PRId64 ",\"response_bytes_avg\":%.0f,"
                   "\"rtt_us_avg\":%.0f", kb_rks_last.rx,
                   (double)kb_rks_last.rxbytes / (double)kb_rks_last.rx,
                   kb_rks_last.rtt_us);
        }
        if (neof < parts) {
            kb_peers_snap(peer1);
        }
        kb_sasl_print();
        kb_peers_print(peer0, peer1);
        printf("}\n");
    }
    rd_kafka_queue_destroy(q);
    (void)rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(eof);
    return neof == parts && errors == 0 ? 0 : 1;
}

/* ---- latency ------------------------------------------------------------- */

struct kb_lconn {
    int fd;
    uint8_t *out;                   /* pending output */
    size_t out_len, out_off, out_cap;
    uint8_t in[65536];
    size_t in_len;
};

static void
kb_lconn_queue(struct kb_lconn *c, const uint8_t *p, size_t n)
{
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
    }
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap * 2 : 65536;

        while (cap < c->out_len + n) {
            cap *= 2;
        }
        c->out = realloc(c->out, cap);
        if (c->out == NULL) {
            kb_die("out of memory");
        }
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

/* Write what is pending; -1 when the connection failed. */
static int
kb_lconn_flush(struct kb_lconn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL);

        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        }
        c->out_off += (size_t)n;
    }
    return 0;
}

/*
 * Read and hand every complete response frame's CorrelationId to done().
 * -1 when the peer closed or sent a frame larger than our buffer.
 */
static int
kb_lconn_read(struct kb_lconn *c,
              void (*done)(int32_t corr, const uint8_t *p, size_t len,
                           void *arg),
              void *arg)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len,
                         0);
        size_t off = 0;

        if (n == 0) {
            return -1;
        }
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        }
        c->in_len += (size_t)n;
        while (c->in_len - off >= 8) {
            uint32_t size, corr;

            memcpy(&size, c->in + off, 4);
            size = ntohl(size);
            if (size < 4 || size > sizeof(c->in) - 4) {
                return -1;
            }
            if (c->in_len - off < 4 + (size_t)size) {
                break;
            }
            memcpy(&corr, c->in + off + 4, 4);
            done((int32_t)ntohl(corr), c->in + off + 4, size, arg);
            off += 4 + (size_t)size;
        }
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
}

struct kb_lat {
    int64_t *sched;                 /* scheduled send time per request */
    int64_t *lat;                   /* latency, -1 until answered */
    uint8_t *tgt;                   /* target index per request */
    long n, answered, stray;
    int32_t warm_left;              /* closed-loop warm-up responses due */
    int version;                    /* Produce version sent */
    int warm_error;                 /* ErrorCode of the last warm-up, or
                                       -1000 when unparsable */
};

/* uvarint at p[*off..len); false when truncated. */
static bool
kb_get_uvarint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *off < len; shift += 7) {
        uint8_t b = p[(*off)++];

        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return true;
        }
    }
    return false;
}

/*
 * ErrorCode of the first partition of a Produce response payload
 * (CorrelationId first) at version v; -1000 when it cannot be read.
 * Layout: ProduceResponse.json (flexible from v9).
 */
static int
kb_produce_error(const uint8_t *p, size_t len, int v)
{
    size_t off = 4;
    uint64_t n;
    uint16_t e;

    if (v >= 9) {
        if (!kb_get_uvarint(p, len, &off, &n) ||      /* header tags */
            !kb_get_uvarint(p, len, &off, &n) || n < 2 || /* Responses */
            !kb_get_uvarint(p, len, &off, &n) || n < 1 || /* Name */
            len - off < n - 1) {
            return -1000;
        }
        off += n - 1;
        if (!kb_get_uvarint(p, len, &off, &n) || n < 2) { /* Partitions */
            return -1000;
        }
    } else {
        uint16_t sl;

        if (len < off + 6) {
            return -1000;
        }
        memcpy(&sl, p + off + 4, 2);                  /* Responses, Name */
        off += 6 + ntohs(sl);
        off += 4;                                     /* Partitions */
    }
    off += 4;                                         /* Index */
    if (len < off + 2) {
        return -1000;
    }
    memcpy(&e, p + off, 2);
    return (int16_t)ntohs(e);
}

static void
kb_lat_done(int32_t corr, const uint8_t *p, size_t len, void *arg)
{
    struct kb_lat *L = arg;

    if (corr < 0) {
        L->warm_error = kb_produce_error(p, len, L->version);
        L->warm_left--;
        return;
    }
    if (corr >= L->n || L->lat[corr] >= 0) {
        L->stray++;
        return;
    }
    L->lat[corr] = kb_now_ns() - L->sched[corr];
    L->answered++;
}

static int
kb_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static double
kb_pct_us(const int64_t *sorted, long n, double q)
{
    long i;

    if (n == 0) {
        return 0;
    }
    i = (long)(q * (double)n + 0.999999) - 1;   /* nearest rank */
    if (i < 0) {
        i = 0;
    }
    if (i >= n) {
        i = n - 1;
    }
    return (double)sorted[i] / 1e3;
}

/* One latency target: an address and its connections. */
#define KB_LAT_MAX_TARGETS 8
struct kb_ltarget {
    char name[32];
    const char *addr;
    struct sockaddr_in sin;
    struct kb_lconn *conns;         /* nconn of them */
    long sent;                      /* requests sent to it so far */
};

/* splitmix64: the deterministic order of the targets in each round. */
static uint64_t
kb_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/*
 * Print the statistics of the measured requests (index >= first) of
 * target t, or of all of them when t < 0, as JSON members without braces
 * ("sent":...,"p99_us":...); returns how many were answered.  sorted has
 * room for L->n values.
 */
static long
kb_lat_stats(const struct kb_lat *L, int t, long first, int64_t *sorted)
{
    long m = 0, sent = 0;
    double sum = 0;

    for (long i = first; i < L->n; i++) {
        if (t >= 0 && L->tgt[i] != t) {
            continue;
        }
        if (L->sched[i] == 0) {
            continue;                   /* never sent */
        }
        sent++;
        if (L->lat[i] >= 0) {
            sorted[m++] = L->lat[i];
            sum += (double)L->lat[i];
        }
    }
    qsort(sorted, (size_t)m, sizeof(*sorted), kb_cmp_i64);
    printf("\"sent\":%ld,\"answered\":%ld,\"lost\":%ld,"
           "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,"
           "\"p999_us\":%.2f,\"max_us\":%.2f,\"mean_us\":%.2f",
           sent, m, sent - m, kb_pct_us(sorted, m, 0.50),
           kb_pct_us(sorted, m, 0.90), kb_pct_us(sorted, m, 0.99),
           kb_pct_us(sorted, m, 0.999), m ? sorted[m - 1] / 1e3 : 0.0,
           m ? sum / (double)m / 1e3 : 0.0);
    return m;
}

/*
 * latency: open-loop Produce requests to one target, or interleaved over
 * several (-a A,B,C): round r sends one request to every target, in an
 * order drawn per round (seeded, so that no target always goes first or
 * always follows the same one); request i of the run is due at
 * t0 + i / (RATE * targets), so every target sees RATE per second and
 * all of them the same machine conditions.  The first -O rounds are an
 * open-loop warm-up, left out of the statistics.
 */
static int
kb_latency(int argc, char **argv)
{
    struct kb_ltarget tg[KB_LAT_MAX_TARGETS];
    char *addrs = NULL, *names = NULL;
    const char *topic = "lat";
    int opt, nconn = 1, version = 7, nt = 0, ncp = 0;
    long n = 10000, size = 100, warm = 200, owarm = 0, nreq, first;
    long next = 0;
    double rate = 1000, total_rate, cpu0;
    uint64_t seed = 1, rs;
    int32_t part = 0;
    struct kb_buf frame = { 0 };
    struct pollfd *pfd;
    struct kb_lat L = { 0 };
    int64_t t0, tm, deadline, late_ns, *sorted, *late, *late1;
    uint8_t perm[KB_LAT_MAX_TARGETS];
    double peer0[KB_PEER_SNAP], peer1[KB_PEER_SNAP];
    long all_answered;

    memset(tg, 0, sizeof(tg));
    while ((opt = getopt(argc, argv, "a:N:t:P:R:n:c:s:V:W:O:S:C:")) != -1) {
        switch (opt) {
        case 'a': addrs = optarg; break;
        case 'N': names = optarg; break;
        case 't': topic = optarg; break;
        case 'P': part = (int32_t)kb_parse_long(optarg, 0, 100000, "part");
            break;
        case 'R': rate = kb_parse_double(optarg, 1, 1e6, "rate"); break;
        case 'n': n = kb_parse_long(optarg, 1, 100000000L, "count"); break;
        case 'c': nconn = (int)kb_parse_long(optarg, 1, 1024, "conns"); break;
        case 's': size = kb_parse_long(optarg, 0, 60000, "size"); break;
        case 'V': version = (int)kb_parse_long(optarg, 3, 12, "version");
            break;
        case 'W': warm = kb_parse_long(optarg, 0, 100000, "warmup"); break;
        case 'O': owarm = kb_parse_long(optarg, 0, 100000000L, "open warmup");
            break;
        case 'S': seed = (uint64_t)kb_parse_long(optarg, 0, 1L << 40, "seed");
            break;
        case 'C': kb_parse_peers(optarg); break;
        default: return 2;
        }
    }
    if (addrs == NULL) {
        kb_die("latency needs -a HOST:PORT[,HOST:PORT...]");
    }
    {
        char *save = NULL, *tok;

        for (tok = strtok_r(addrs, ",", &save); tok != NULL;
             tok = strtok_r(NULL, ",", &save)) {
            if (nt == KB_LAT_MAX_TARGETS) {
                kb_die("too many latency targets (at most %d)",
                       KB_LAT_MAX_TARGETS);
            }
            tg[nt].addr = tok;
            kb_parse_addr(tok, &tg[nt].sin);
            snprintf(tg[nt].name, sizeof(tg[nt].name), "t%d", nt);
            nt++;
        }
        if (names != NULL) {
            int i = 0;

            for (tok = strtok_r(names, ",", &save); tok != NULL && i < nt;
                 tok = strtok_r(NULL, ",", &save), i++) {
                snprintf(tg[i].name, sizeof(tg[i].name), "%s", tok);
            }
        }
    }
    if (nt == 0) {
        kb_die("latency needs -a HOST:PORT[,HOST:PORT...]");
    }
    if ((double)(n + owarm) * nt > (double)INT32_MAX) {
        kb_die("too many requests");
    }
    nreq = (n + owarm) * nt;
    first = owarm * nt;
    total_rate = rate * nt;
    late_ns = (int64_t)(1e9 / rate);    /* one interval of one target */
    signal(SIGPIPE, SIG_IGN);
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    kb_produce_frame(&frame, version, topic, part, 1, 1, (size_t)size);
    L.version = version;
    pfd = calloc((size_t)(nconn * nt), sizeof(*pfd));
    L.sched = calloc((size_t)nreq, sizeof(*L.sched));
    L.lat = malloc((size_t)nreq * sizeof(*L.lat));
    L.tgt = calloc((size_t)nreq, 1);
    sorted = malloc((size_t)nreq * sizeof(*sorted));
    late = calloc((size_t)nt, sizeof(*late));
    late1 = calloc((size_t)nt, sizeof(*late1));
    if (pfd == NULL || L.sched == NULL || L.lat == NULL || L.tgt == NULL ||
        sorted == NULL || late == NULL || late1 == NULL) {
        kb_die("out of memory");
    }
    for (long i = 0; i < nreq; i++) {
        L.lat[i] = -1;
    }
    L.n = nreq;
    for (int t = 0; t < nt; t++) {
        tg[t].conns = calloc((size_t)nconn, sizeof(*tg[t].conns));
        if (tg[t].conns == NULL) {
            kb_die("out of memory");
        }
        for (int i = 0; i < nconn; i++) {
            struct kb_lconn *c = &tg[t].conns[i];

            c->fd = kb_connect(&tg[t].sin);
            if (c->fd < 0) {
                kb_die("connect %s (%s): %s", tg[t].addr, tg[t].name,
                       strerror(errno));
            }
            pfd[ncp].fd = c->fd;
            ncp++;
        }
    }
    /* Closed-loop warm-up: every connection answered at least once, the
     * proxies' upstream connections made; targets alternate. */
    deadline = kb_now_ns() + (int64_t)20e9 * nt;
    for (long w = 0; w < warm * nt; w++) {
        struct kb_ltarget *T = &tg[w % nt];
        struct kb_lconn *c = &T->conns[(w / nt) % nconn];

        kb_set_i32(&frame, 8, -1 - (int32_t)(w % 1000000));
        L.warm_left = 1;
        kb_lconn_queue(c, frame.p, frame.len);
        while (L.warm_left > 0) {
            struct pollfd one = { .fd = c->fd, .events = POLLIN };

            if (kb_lconn_flush(c) != 0) {
                kb_die("warm-up: %s closed", T->addr);
            }
            if (c->out_off < c->out_len) {
                one.events |= POLLOUT;
            }
            if (kb_now_ns() > deadline) {
                kb_die("warm-up: no response from %s (%s)", T->addr,
                       T->name);
            }
            (void)poll(&one, 1, 100);
            if (kb_lconn_read(c, kb_lat_done, &L) != 0) {
                kb_die("warm-up: %s (%s) closed the connection", T->addr,
                       T->name);
            }
        }
        if (L.warm_error != 0) {
            kb_die("warm-up: Produce v%d to %s partition %d via %s: "
                   "ErrorCode %d (not the leader?)", version, topic,
                   (int)part, T->name, L.warm_error);
        }
    }
    rs = seed;
    for (int t = 0; t < nt; t++) {
        perm[t] = (uint8_t)t;
    }
    t0 = kb_now_ns() + 1000000;
    tm = 0;
    deadline = t0 + (int64_t)((double)nreq * 1e9 / total_rate) +
               (int64_t)10e9;
    cpu0 = kb_cpu_s();
    kb_peers_snap(peer0);
    while (L.answered < nreq && kb_now_ns() < deadline) {
        int64_t now = kb_now_ns(), due;
        struct timespec ts;
        int64_t wait;

        while (next < nreq &&
               (due = t0 + (int64_t)((double)next * 1e9 / total_rate)) <=
               now) {
            struct kb_ltarget *T;
            struct kb_lconn *c;
            int slot = (int)(next % nt);

            if (slot == 0 && nt > 1) {
                /* Fisher-Yates: this round's order of the targets. */
                for (int i = nt - 1; i > 0; i--) {
                    int j = (int)(kb_rand(&rs) % (uint64_t)(i + 1));
                    uint8_t x = perm[i];

                    perm[i] = perm[j];
                    perm[j] = x;
                }
            }
            if (next == first) {
                /* The measured window starts (after the open warm-up). */
                tm = now;
                cpu0 = kb_cpu_s();
                kb_peers_snap(peer0);
            }
            T = &tg[perm[slot]];
            c = &T->conns[T->sent % nconn];
            L.tgt[next] = perm[slot];
            L.sched[next] = due;
            if (next >= first) {
                if (now - due > late_ns) {
                    late[perm[slot]]++;
                }
                if (now - due > 1000000) {
                    late1[perm[slot]]++;
                }
            }
            kb_set_i32(&frame, 8, (int32_t)next);
            kb_lconn_queue(c, frame.p, frame.len);
            if (kb_lconn_flush(c) != 0) {
                kb_die("%s (%s) closed the connection", T->addr, T->name);
            }
            T->sent++;
            next++;
        }
        for (int i = 0; i < ncp; i++) {
            struct kb_lconn *c = &tg[i / nconn].conns[i % nconn];

            pfd[i].events = POLLIN;
            if (c->out_off < c->out_len) {
                pfd[i].events |= POLLOUT;
            }
        }
        wait = next < nreq
               ? t0 + (int64_t)((double)next * 1e9 / total_rate) - kb_now_ns()
               : 100000000;
        if (wait < 0) {
            wait = 0;
        }
        ts.tv_sec = wait / 1000000000;
        ts.tv_nsec = wait % 1000000000;
        if (ppoll(pfd, (nfds_t)ncp, &ts, NULL) <= 0) {
            continue;
        }
        for (int i = 0; i < ncp; i++) {
            struct kb_ltarget *T = &tg[i / nconn];
            struct kb_lconn *c = &T->conns[i % nconn];

            if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) {
                if (kb_lconn_read(c, kb_lat_done, &L) != 0) {
                    kb_die("%s (%s) closed the connection", T->addr,
                           T->name);
                }
            }
            if ((pfd[i].revents & POLLOUT) && kb_lconn_flush(c) != 0) {
                kb_die("%s (%s) closed the connection", T->addr, T->name);
            }
        }
    }
    kb_peers_snap(peer1);
    {
        double secs = tm ? (double)(kb_now_ns() - tm) / 1e9 : 0;
        long late_all = 0, late1_all = 0;

        for (int t = 0; t < nt; t++) {
            late_all += late[t];
            late1_all += late1[t];
        }
        printf("{\"mode\":\"latency\",\"produce_version\":%d,"
               "\"record_bytes\":%ld,\"request_bytes\":%zu,"
               "\"rate_per_s\":%.1f,\"connections\":%d,",
               version, size, frame.len, rate, nconn);
        if (nt > 1 || names != NULL) {
            printf("\"interleaved\":%d,\"total_rate_per_s\":%.1f,"
                   "\"order\":\"random per round\",\"seed\":%" PRIu64 ","
                   "\"targets\":{", nt, total_rate, seed);
            for (int t = 0; t < nt; t++) {
                printf("%s\"%s\":{\"address\":\"%s\",\"late\":%ld,"
                       "\"late_1ms\":%ld,", t ? "," : "", tg[t].name,
                       tg[t].addr, late[t], late1[t]);
                kb_lat_stats(&L, t, first, sorted);
                printf("}");
            }
            printf("},");
        }
        printf("\"warmup_closed\":%ld,\"warmup_open\":%ld,"
               "\"stray\":%ld,\"late\":%ld,\"late_1ms\":%ld,",
               warm, owarm, L.stray, late_all, late1_all);
        all_answered = kb_lat_stats(&L, -1, first, sorted);
        printf(",\"elapsed_s\":%.4f,\"client_cpu_s\":%.4f,"
               "\"client_cpu_window_s\":%.4f",
               secs, kb_cpu_s() - cpu0, kb_cpu_s() - cpu0);
        if (kb_npeers > 0) {
            kb_peers_print(peer0, peer1);
        }
        printf(",\"window_s\":%.4f}\n", secs);
        for (int t = 0; t < nt; t++) {
            for (int i = 0; i < nconn; i++) {
                close(tg[t].conns[i].fd);
                free(tg[t].conns[i].out);
            }
            free(tg[t].conns);
        }
        free(pfd);
        free(L.sched);
        free(L.lat);
        free(L.tgt);
        free(sorted);
        free(late);
        free(late1);
        free(frame.p);
        return all_answered == nreq - first ? 0 : 1;
    }
}

/* ---- TLS clients (-S) ---------------------------------------------------- */

/*
 * The client context of -S CAFILE: TLS 1.3 only, TLS_AES_128_GCM_SHA256,
 * X25519, the peer checked against CAFILE; no session is ever resumed
 * (no client cache: every handshake is a full one).  Tickets are taken,
 * as librdkafka's and Java's clients take them (SSL_OP_NO_TICKET would
 * spare the proxy the two it issues per handshake, and its session
 * cache the entries).
 */
SSL_CTX *
kb_tls_ctx(const char *ca)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (ctx == NULL ||
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") != 1 ||
        SSL_CTX_set1_groups_list(ctx, "X25519") != 1) {
        kb_die("cannot make a TLS client context");
    }
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        kb_die("cannot load the CA file %s", ca);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* thousands held idle: no buffers kept while nothing moves */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

/* An SSL over fd checking the peer's certificate for sin's IP. */
SSL *
kb_tls_new(SSL_CTX *ctx, int fd, const struct sockaddr_in *sin)
{
    SSL *ssl = SSL_new(ctx);
    char ip[INET_ADDRSTRLEN];

    if (ssl == NULL ||
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)) == NULL ||
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) != 1 ||
        SSL_set_fd(ssl, fd) != 1) {
        kb_die("cannot make a TLS connection");
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/* OpenSSL's reason for the last failure (its error queue emptied). */
const char *
kb_tls_err(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();

    if (e == 0) {
        snprintf(buf, len, "%s", errno != 0 ? strerror(errno) : "EOF");
    } else {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

/* ---- idle ---------------------------------------------------------------- */

enum kb_istate { KB_I_FREE, KB_I_CONNECTING, KB_I_TLS, KB_I_APIVERSIONS,
                 KB_I_METADATA };

struct kb_islot {
    enum kb_istate st;
    int fd;
    SSL *ssl;                       /* -S: the connection's TLS */
    bool want_write;                /* the handshake waits to write */
    long idx;                       /* connection number */
    int64_t started;
    uint8_t in[1 << 16];
    size_t in_len;
};

/* Send a whole frame (plain or TLS); 0 ok, -1 error. */
static int
kb_islot_send(struct kb_islot *s, const struct kb_buf *req)
{
    size_t w = 0;

    if (s->ssl != NULL) {
        /* a small frame on an idle connection: one record, written at
           once (else the connection counts as failed) */
        ERR_clear_error();
        return SSL_write_ex(s->ssl, req->p, req->len, &w) == 1 &&
               w == req->len ? 0 : -1;
    }
    return send(s->fd, req->p, req->len, MSG_NOSIGNAL) == (ssize_t)req->len
               ? 0 : -1;
}

/* Read one frame into s->in; 1 when complete, 0 need more, -1 error. */
static int
kb_islot_read(struct kb_islot *s)
{
    for (;;) {
        ssize_t n;

        if (s->ssl != NULL) {
            size_t k = 0;

            ERR_clear_error();
            if (SSL_read_ex(s->ssl, s->in + s->in_len,
                            sizeof(s->in) - s->in_len, &k) == 1) {
                n = (ssize_t)k;
            } else if (SSL_get_error(s->ssl, 0) == SSL_ERROR_WANT_READ) {
                return 0;
            } else {
                return -1;
            }
        } else {
            n = recv(s->fd, s->in + s->in_len, sizeof(s->in) - s->in_len, 0);
        }
        if (n == 0) {
            return -1;
        }
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        }
        s->in_len += (size_t)n;
        if (s->in_len >= 4) {
            uint32_t size;

            memcpy(&size, s->in, 4);
            size = ntohl(size);
            if (size > sizeof(s->in) - 4) {
                return -1;
            }
            if (s->in_len >= 4 + (size_t)size) {
                s->in_len = 0;      /* one request in flight: nothing more */
                return 1;
            }
        }
    }
}

static int
kb_idle(int argc, char **argv)
{
    struct sockaddr_in addrs[KB_MAX_ADDRS];
    int naddrs = 0, opt, window = 4;
    long nconn = 1000, opened = 0, idle = 0, failed = 0, alive = 0;
    double hold = 60;
    const char *topic = "lat";
    int *fds;
    SSL **ssls;
    SSL_CTX *tls = NULL;
    struct kb_islot *slots;
    struct pollfd *pfd;
    int64_t t0, deadline;
    sigset_t sigs;
    struct timespec ts;

    while ((opt = getopt(argc, argv, "a:n:k:T:t:S:")) != -1) {
        switch (opt) {
        case 'S': kb_tls_ca = optarg; break;
        case 'a':
            naddrs = kb_parse_addrs(optarg, addrs, KB_MAX_ADDRS);
            break;
        case 'n': nconn = kb_parse_long(optarg, 1, 1000000, "conns"); break;
        case 'k': window = (int)kb_parse_long(optarg, 1, 1024, "window");
            break;
        case 'T': hold = kb_parse_double(optarg, 0, 3600, "hold"); break;
        case 't': topic = optarg; break;
        default: return 2;
        }
    }
    if (naddrs == 0) {
        kb_die("idle needs -a HOST:PORT[,...]");
    }
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    kb_raise_nofile((rlim_t)nconn + 64);
    fds = malloc((size_t)nconn * sizeof(*fds));
    ssls = calloc((size_t)nconn, sizeof(*ssls));
    slots = calloc((size_t)window, sizeof(*slots));
    pfd = calloc((size_t)window, sizeof(*pfd));
    if (fds == NULL || ssls == NULL || slots == NULL || pfd == NULL) {
        kb_die("out of memory");
    }
    if (kb_tls_ca != NULL) {
        tls = kb_tls_ctx(kb_tls_ca);
    }
    t0 = kb_now_ns();
    deadline = t0 + (int64_t)300e9;
    while (idle + failed < nconn && kb_now_ns() < deadline) {
        for (int i = 0; i < window; i++) {
            struct kb_islot *s = &slots[i];

            if (s->st != KB_I_FREE || opened >= nconn) {
                continue;
            }
            s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                           0);
            if (s->fd < 0) {
                kb_die("socket: %s (connection %ld)", strerror(errno), opened);
            }
            s->idx = opened++;
            s->started = kb_now_ns();
            s->in_len = 0;
            s->ssl = NULL;
            s->want_write = false;
            if (connect(s->fd, (struct sockaddr *)&addrs[s->idx % naddrs],
                        sizeof(addrs[0])) != 0 && errno != EINPROGRESS) {
                close(s->fd);
                failed++;
                continue;
            }
            /* The ApiVersions request goes out once connected (POLLOUT). */
            s->st = KB_I_CONNECTING;
        }
        for (int i = 0; i < window; i++) {
            pfd[i].fd = slots[i].st == KB_I_FREE ? -1 : slots[i].fd;
            pfd[i].events = slots[i].st == KB_I_CONNECTING ||
                                    (slots[i].st == KB_I_TLS &&
                                     slots[i].want_write)
                                ? POLLOUT
                                : POLLIN;
            pfd[i].revents = 0;
        }
        if (poll(pfd, (nfds_t)window, 100) <= 0) {
            goto timeouts;
        }
        for (int i = 0; i < window; i++) {
            struct kb_islot *s = &slots[i];
            struct kb_buf req = { 0 };
            int r;

            if (s->st == KB_I_FREE || pfd[i].revents == 0) {
                continue;
            }
            if (s->st == KB_I_CONNECTING) {
                int err = 0;
                socklen_t el = sizeof(err);

                if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
                    err != 0) {
                    goto fail;
                }
                if (tls != NULL) {
                    s->ssl = kb_tls_new(tls, s->fd,
                                        &addrs[s->idx % naddrs]);
                    s->st = KB_I_TLS;
                }
            }
            if (s->st == KB_I_TLS) {
                ERR_clear_error();
                r = SSL_do_handshake(s->ssl);
                if (r != 1) {
                    int e = SSL_get_error(s->ssl, r);

                    if (e != SSL_ERROR_WANT_READ &&
                        e != SSL_ERROR_WANT_WRITE) {
                        char why[256];

                        if (failed < 5) {
                            fprintf(stderr, "krbench: idle: TLS: %s\n",
                                    kb_tls_err(why, sizeof(why)));
                        }
                        goto fail;
                    }
                    s->want_write = e == SSL_ERROR_WANT_WRITE;
                    continue;
                }
            }
            if (s->st == KB_I_CONNECTING || s->st == KB_I_TLS) {
                kb_apiversions_frame(&req, (int32_t)s->idx);
                r = kb_islot_send(s, &req);
                free(req.p);
                if (r != 0) {
                    goto fail;
                }
                s->st = KB_I_APIVERSIONS;
                continue;
            }
            r = kb_islot_read(s);
            if (r < 0) {
                goto fail;
            }
            if (r == 0) {
                continue;
            }
            if (s->st == KB_I_APIVERSIONS) {
                kb_metadata_frame(&req, (int32_t)s->idx, topic);
                r = kb_islot_send(s, &req);
                free(req.p);
                if (r != 0) {
                    goto fail;
                }
                s->st = KB_I_METADATA;
                continue;
            }
            ssls[idle] = s->ssl;    /* Metadata answered: now idle */
            fds[idle++] = s->fd;
            s->st = KB_I_FREE;
            continue;
fail:
            SSL_free(s->ssl);
            s->ssl = NULL;
            close(s->fd);
            s->st = KB_I_FREE;
            failed++;
            if (failed <= 5) {
                fprintf(stderr, "krbench: idle: connection %ld failed\n",
                        s->idx);
            }
        }
timeouts:
        for (int i = 0; i < window; i++) {
            if (slots[i].st != KB_I_FREE &&
                kb_now_ns() - slots[i].started > (int64_t)30e9) {
                SSL_free(slots[i].ssl);
                slots[i].ssl = NULL;
                close(slots[i].fd);
                slots[i].st = KB_I_FREE;
                failed++;
            }
        }
    }
    printf("ready %ld %.3f\n", idle, (double)(kb_now_ns() - t0) / 1e9);
    fflush(stdout);
    ts.tv_sec = (time_t)hold;
    ts.tv_nsec = (long)((hold - (double)ts.tv_sec) * 1e9);
    (void)sigtimedwait(&sigs, NULL, &ts);
    for (long i = 0; i < idle; i++) {
        char c;
        ssize_t r = recv(fds[i], &c, 1, MSG_PEEK | MSG_DONTWAIT);

        if (r < 0 && errno == EAGAIN) {
            alive++;
        }
        SSL_free(ssls[i]);
        close(fds[i]);
    }
    printf("{\"mode\":\"idle\",\"connections\":%ld,\"idle\":%ld,"
           "\"failed\":%ld,\"alive_at_end\":%ld,\"setup_s\":%.3f,"
           "\"tls\":%s}\n",
           nconn, idle, failed, alive, (double)(kb_now_ns() - t0) / 1e9,
           tls != NULL ? "true" : "false");
    SSL_CTX_free(tls);
    free(ssls);
    free(fds);
    free(slots);
    free(pfd);
    return idle == nconn && alive == idle ? 0 : 1;
}

/* ---- handshake ----------------------------------------------------------- */

/*
 * Full TLS handshakes, one after the other (no concurrency: the proxy's
 * CPU per handshake is the figure, not the rate), round-robin over the
 * addresses: connect, handshake (kb_tls_ctx: no resumption), close_notify
 * and our write side shut, then read until the proxy closes (its tickets
 * are read and dropped), so that the proxy has finished with one
 * connection before the next starts.  Socket timeouts bound every wait.
 */
static int
kb_handshake(int argc, char **argv)
{
    struct sockaddr_in addrs[KB_MAX_ADDRS];
    int naddrs = 0, opt;
    long n = 1000, ok = 0, failed = 0;
    const char *ca = NULL;
    char version[32] = "", cipher[64] = "", group[32] = "";
    double cpu0, peer0[KB_PEER_SNAP], peer1[KB_PEER_SNAP];
    int64_t t0, t1;
    SSL_CTX *ctx;

    while ((opt = getopt(argc, argv, "a:n:S:C:")) != -1) {
        switch (opt) {
        case 'a':
            naddrs = kb_parse_addrs(optarg, addrs, KB_MAX_ADDRS);
            break;
        case 'n': n = kb_parse_long(optarg, 1, 10000000L, "handshakes");
            break;
        case 'S': ca = optarg; break;
        case 'C': kb_parse_peers(optarg); break;
        default: return 2;
        }
    }
    if (naddrs == 0 || ca == NULL) {
        kb_die("handshake needs -a HOST:PORT[,...] and -S CAFILE");
    }
    signal(SIGPIPE, SIG_IGN);
    ctx = kb_tls_ctx(ca);
    cpu0 = kb_cpu_s();
    kb_peers_snap(peer0);
    t0 = kb_now_ns();
    for (long i = 0; i < n; i++) {
        const struct sockaddr_in *sin = &addrs[i % naddrs];
        struct timeval tv = { .tv_sec = 5 };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
        SSL *ssl;
        char buf[4096], why[256];
        ssize_t r;

        if (fd < 0) {
            kb_die("socket: %s", strerror(errno));
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
            if (failed++ < 5) {
                fprintf(stderr, "krbench: handshake %ld: connect: %s\n", i,
                        strerror(errno));
            }
            close(fd);
            continue;
        }
        ssl = kb_tls_new(ctx, fd, sin);
        ERR_clear_error();
        errno = 0;
        if (SSL_connect(ssl) != 1) {
            if (failed++ < 5) {
                fprintf(stderr, "krbench: handshake %ld: %s\n", i,
                        kb_tls_err(why, sizeof(why)));
            }
            SSL_free(ssl);
            close(fd);
            continue;
        }
        if (ok++ == 0) {
            int nid = SSL_get_negotiated_group(ssl);
            const char *g = nid != NID_undef ? OBJ_nid2sn(nid) : NULL;

            snprintf(version, sizeof(version), "%s", SSL_get_version(ssl));
            snprintf(cipher, sizeof(cipher), "%s",
                     SSL_get_cipher_name(ssl));
            snprintf(group, sizeof(group), "%s", g != NULL ? g : "?");
        }
        (void)SSL_shutdown(ssl);        /* our close_notify */
        (void)shutdown(fd, SHUT_WR);
        do {
            r = read(fd, buf, sizeof(buf));
        } while (r > 0 || (r < 0 && errno == EINTR));
        ERR_clear_error();
        SSL_free(ssl);
        close(fd);
    }
    t1 = kb_now_ns();
    kb_peers_snap(peer1);
    {
        double secs = (double)(t1 - t0) / 1e9;

        printf("{\"mode\":\"handshake\",\"handshakes\":%ld,\"failed\":%ld,"
               "\"version\":\"%s\",\"cipher\":\"%s\",\"group\":\"%s\","
               "\"window_s\":%.4f,\"handshakes_per_s\":%.1f,"
               "\"client_cpu_s\":%.4f,\"client_cpu_window_s\":%.4f",
               ok, failed, version, cipher, group, secs,
               secs > 0 ? ok / secs : 0.0, kb_cpu_s() - cpu0,
               kb_cpu_s() - cpu0);
        kb_peers_print(peer0, peer1);
        printf("}\n");
    }
    SSL_CTX_free(ctx);
    return ok == n ? 0 : 1;
}

/* ---- main ---------------------------------------------------------------- */

static void
kb_usage(FILE *f)
{
    fputs("usage: krbench mock|produce|consume|latency|idle|handshake|"
          "blast|canned [options]\n"
          "  (see the comments at the top of tests/bench/krbench.c and "
          "kb_blast.c)\n", f);
}

int
main(int argc, char **argv)
{
    const char *mode;

    if (argc < 2) {
        kb_usage(stderr);
        return 2;
    }
    mode = argv[1];
    argc--;
    argv++;
    if (strcmp(mode, "mock") == 0) {
        return kb_mock(argc, argv);
    } else if (strcmp(mode, "produce") == 0) {
        return kb_produce(argc, argv);
    } else if (strcmp(mode, "consume") == 0) {
        return kb_consume(argc, argv);
    } else if (strcmp(mode, "latency") == 0) {
        return kb_latency(argc, argv);
    } else if (strcmp(mode, "idle") == 0) {
        return kb_idle(argc, argv);
    } else if (strcmp(mode, "handshake") == 0) {
        return kb_handshake(argc, argv);
    } else if (strcmp(mode, "blast") == 0) {
        return kb_blast(argc, argv);
    } else if (strcmp(mode, "canned") == 0) {
        return kb_canned(argc, argv);
    } else if (strcmp(mode, "-h") == 0 || strcmp(mode, "--help") == 0) {
        kb_usage(stdout);
        return 0;
    }
    kb_usage(stderr);
    return 2;
}
