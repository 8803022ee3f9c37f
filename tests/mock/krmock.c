/*
 * krmock - krelay's test upstream: librdkafka's mock cluster
 * (rdkafka_mock.h) in a small program with fixed ports.
 *
 *   krmock [-b BROKERS] [-p BASE | -P PORT,PORT,...] [-t NAME:PARTITIONS]...
 *          [-r READYFILE] [-a ACCEPTLOG] [-A HOST] [-e KEY:ERR:N]...
 *          [-K 4.0.0|4.0.1] [-V KEY:MIN:MAX]... [-R MS] [-d]
 *
 * Broker NodeId n (1..BROKERS) listens on 127.0.0.1:BASE+n, or on the n-th
 * port of -P; without either the kernel chooses.  librdkafka 2.0.2 has no
 * API to choose a mock broker's port, so this program defines bind(): the
 * dynamic linker resolves librdkafka's call to it, and it rewrites port 0
 * of the mock's IPv4 listeners to the next chosen port before calling
 * libc's bind (dlsym(RTLD_NEXT)).  Brokers are created in NodeId order, so
 * the n-th listener is NodeId n.
 *
 * Once every broker listens and the topics exist, the bootstrap list
 * ("127.0.0.1:P1,127.0.0.1:P2,...") is written to READYFILE (atomically:
 * a temporary file renamed) and to stdout.
 *
 * ACCEPTLOG gets one line per connection a mock broker accepts:
 *   accept port=BROKERPORT peer=IP:PORT pid=PID comm=NAME
 * where PID/NAME own the peer socket (found through /proc/net/tcp and
 * /proc/PID/fd), or pid=-1 comm=? when not found.  Tests use it to prove
 * that no client reaches a broker port directly.
 *
 * Signals: SIGTERM, SIGINT stop.  SIGUSR1 moves the leader of every
 * partition of every -t topic to the next broker (partition p is led by
 * broker ((p + moves) % BROKERS) + 1), so that a Produce or Fetch sent to
 * the old leader gets NOT_LEADER_OR_FOLLOWER (with librdkafka >= 2.4, the
 * KIP-951 CurrentLeader and NodeEndpoints fields in Produce v10 and Fetch
 * v16 responses).  Each move prints "leaders moved N" on stdout.
 *
 * The cluster is started and its topics created by src/kr_mock.c, as
 * krelay-demo-cluster (krelay --demo's upstream) does; what this file adds
 * is for tests only.
 *
 * -R MS delays every broker's responses by MS milliseconds
 * (rd_kafka_mock_broker_set_rtt): each response leaves MS after its
 * request was read, so a client that keeps sending has requests in
 * flight at any moment (drain_idempotent.sh's SIGTERM lands on some).
 *
 * -A HOST (librdkafka >= 2.10) makes every broker advertise HOST instead
 * of 127.0.0.1 (rd_kafka_mock_broker_set_host_port).
 *
 * -V KEY:MIN:MAX restricts ApiKey KEY to versions MIN..MAX
 * (rd_kafka_mock_set_apiversion, before any client connects): ApiVersions
 * advertises that range and a request outside it is refused as the mock
 * refuses any unsupported version (it closes the connection).  MAX must
 * not exceed what the mock implements (Produce 7 with librdkafka 2.0.2);
 * MIN = MAX = -1 removes the API.  E.g. -V 0:3:7 is Produce as Kafka 4.0
 * accepts it (KIP-896).
 *
 * -K 4.0.0 or -K 4.0.1 makes the whole cluster look like that Kafka 4
 * release to a client: once the brokers listen, krmock asks broker 1 for
 * its ApiVersions (v0, on its own connection) and restricts every API the
 * mock implements to the versions Kafka 4 accepts, through the same
 * rd_kafka_mock_set_apiversion as -V: minimum max(mock's, Kafka 4's),
 * maximum the mock's (never above what it implements); an API Kafka 4
 * does not have (none here) or none of whose mock versions Kafka 4
 * accepts is removed.  Kafka 4's minima are krelay's own tables
 * (kr_api_min_kafka4, include/kr_schema.h: the 4.3.1 schemas; JoinGroup
 * 2 in 4.0.0, 0 again from 4.0.1, KAFKA-19444).  With librdkafka 2.0.2:
 * Fetch 4-11, ListOffsets 1-5, OffsetCommit 2-7, OffsetFetch 1-5 and, for
 * 4.0.0, JoinGroup 2-5; the others keep the mock's ranges.
 *
 * Produce is the exception, as in Kafka 4 (KAFKA-18659): a 4.x broker
 * still advertises Produce MinVersion 0 although it refuses v0-2 when
 * sent, so -K leaves Produce advertised 0-7.  The refusal is then the
 * mock's: it accepts only RecordBatch v2 (magic 2), and what old clients
 * send with Produce v0-2 is a magic 0 or 1 message set, which it answers
 * with UNSUPPORTED_VERSION (35) per partition (a real 4.x broker closes
 * the connection instead).  Keeping MinVersion 0 matters beyond fidelity:
 * librdkafka before 2.8 compresses only when the broker advertises
 * Produce v0 (produce_min_version.sh).  For the strict variant (Produce
 * advertised 3-7 and v0-2 closed), add -V 0:3:7 after -K: every -V is
 * applied after -K, so -V overrides it API by API.  What -K did is
 * printed on stderr ("krmock: -K 4.0.0: ...").
 */
#define _GNU_SOURCE 1

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "kr_common.h"
#include "kr_mock.h"
#include "kr_api_keys.h"
#include "kr_schema.h"

#define KR_TM_MAX_BROKERS KR_MOCK_MAX_BROKERS
#define KR_TM_MAX_TOPICS 128
#define KR_TM_MAX_APIVERSIONS 16
#define KR_TM_MAX_APIKEY 127

struct kr_tm_topic {
    char *name;
    int partitions;
};

/* Ports handed out by the bind() interposer, in NodeId order. */
static int kr_tm_ports[KR_TM_MAX_BROKERS];
static int kr_tm_nports;
static int kr_tm_next_port;
/* Listening sockets the interposer rewrote or saw (for the accept log). */
static int kr_tm_listen_fds[KR_TM_MAX_BROKERS];
static int kr_tm_nlisten;
static pthread_mutex_t kr_tm_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *kr_tm_accept_log;

typedef int (*kr_tm_bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*kr_tm_accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*kr_tm_accept4_fn)(int, struct sockaddr *, socklen_t *, int);

int bind(int fd, const struct sockaddr *addr, socklen_t len);
int accept(int fd, struct sockaddr *addr, socklen_t *len);
int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

static void
kr_tm_die(const char *fmt, ...)
{
    va_list ap;

    fputs("krmock: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/*
 * The bind() every caller in this process gets.  Only an IPv4 loopback
 * bind to port 0 (what the mock cluster does for each broker) is changed,
 * and only while chosen ports remain.
 */
int
bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static kr_tm_bind_fn real_bind;
    struct sockaddr_in sin;
    int port = 0, rc;

    if (real_bind == NULL) {
        real_bind = (kr_tm_bind_fn)dlsym(RTLD_NEXT, "bind");
        if (real_bind == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    if (addr == NULL || len < (socklen_t)sizeof(sin) ||
        addr->sa_family != AF_INET) {
        return real_bind(fd, addr, len);
    }
    memcpy(&sin, addr, sizeof(sin));
    if (ntohl(sin.sin_addr.s_addr) != INADDR_LOOPBACK) {
        return real_bind(fd, addr, len);
    }
    pthread_mutex_lock(&kr_tm_lock);
    if (sin.sin_port == 0 && kr_tm_next_port < kr_tm_nports) {
        port = kr_tm_ports[kr_tm_next_port++];
    }
    if (kr_tm_nlisten < KR_TM_MAX_BROKERS) {
        kr_tm_listen_fds[kr_tm_nlisten++] = fd;
    }
    pthread_mutex_unlock(&kr_tm_lock);
    if (port != 0) {
        int on = 1;

        sin.sin_port = htons((uint16_t)port);
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        rc = real_bind(fd, (const struct sockaddr *)&sin, sizeof(sin));
        if (rc != 0) {
            fprintf(stderr, "krmock: bind 127.0.0.1:%d: %s\n", port,
                    strerror(errno));
        }
        return rc;
    }
    return real_bind(fd, addr, len);
}

static bool
kr_tm_is_listener(int fd)
{
    bool found = false;

    pthread_mutex_lock(&kr_tm_lock);
    for (int i = 0; i < kr_tm_nlisten; i++) {
        if (kr_tm_listen_fds[i] == fd) {
            found = true;
        }
    }
    pthread_mutex_unlock(&kr_tm_lock);
    return found;
}

/*
 * Find the inode of the IPv4 TCP socket whose local end is `local` and
 * remote end is `remote` (network byte order), from /proc/net/tcp.
 */
static unsigned long
kr_tm_find_inode(const struct sockaddr_in *local,
                 const struct sockaddr_in *remote)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    unsigned long found = 0;

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned int la, lp, ra, rp, st;
        unsigned long inode;

        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*d: %8X:%4X %8X:%4X %2X %*s %*s %*s %*u %*u %lu",
                   &la, &lp, &ra, &rp, &st, &inode) != 6) {
            continue;
        }
        /* /proc prints the address as the host-order value of s_addr. */
        if (la == local->sin_addr.s_addr && lp == ntohs(local->sin_port) &&
            ra == remote->sin_addr.s_addr && rp == ntohs(remote->sin_port) &&
            inode != 0) {
            found = inode;
            break;
        }
    }
    fclose(f);
    return found;
}

/* The process that holds socket inode, or -1; its name into comm. */
static long
kr_tm_find_owner(unsigned long inode, char *comm, size_t commlen)
{
    DIR *proc = opendir("/proc");
    struct dirent *de;
    char want[64], path[PATH_MAX], link[128];
    long owner = -1;

    snprintf(comm, commlen, "?");
    if (proc == NULL || inode == 0) {
        if (proc != NULL) {
            closedir(proc);
        }
        return -1;
    }
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    while (owner < 0 && (de = readdir(proc)) != NULL) {
        DIR *fds;
        struct dirent *fe;
        char *end;
        long pid = strtol(de->d_name, &end, 10);

        if (*end != '\0' || pid <= 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
        fds = opendir(path);
        if (fds == NULL) {
            continue;
        }
        while ((fe = readdir(fds)) != NULL) {
            ssize_t n;

            if (fe->d_name[0] == '.') {
                continue;
            }
            snprintf(path, sizeof(path), "/proc/%ld/fd/%s", pid, fe->d_name);
            n = readlink(path, link, sizeof(link) - 1);
            if (n <= 0) {
                continue;
            }
            link[n] = '\0';
            if (strcmp(link, want) == 0) {
                owner = pid;
                break;
            }
        }
        closedir(fds);
    }
    closedir(proc);
    if (owner > 0) {
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%ld/comm", owner);
        f = fopen(path, "r");
        if (f != NULL) {
            if (fgets(comm, (int)commlen, f) != NULL) {
                comm[strcspn(comm, "\n")] = '\0';
            }
            fclose(f);
        }
    }
    return owner;
}

static void
kr_tm_log_accept(int listen_fd, int fd)
{
    struct sockaddr_in local, peer;
    socklen_t llen = sizeof(local), plen = sizeof(peer);
    char ip[INET_ADDRSTRLEN], comm[64];
    long pid;

    if (kr_tm_accept_log == NULL || !kr_tm_is_listener(listen_fd)) {
        return;
    }
    if (getsockname(fd, (struct sockaddr *)&local, &llen) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
        local.sin_family != AF_INET || peer.sin_family != AF_INET) {
        return;
    }
    /* The peer's socket: local end = our peer, remote end = us. */
    pid = kr_tm_find_owner(kr_tm_find_inode(&peer, &local), comm,
                           sizeof(comm));
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
    pthread_mutex_lock(&kr_tm_lock);
    fprintf(kr_tm_accept_log, "accept port=%u peer=%s:%u pid=%ld comm=%s\n",
            ntohs(local.sin_port), ip, ntohs(peer.sin_port), pid, comm);
    fflush(kr_tm_accept_log);
    pthread_mutex_unlock(&kr_tm_lock);
}

int
accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    static kr_tm_accept_fn real_accept;
    int s;

    if (real_accept == NULL) {
        real_accept = (kr_tm_accept_fn)dlsym(RTLD_NEXT, "accept");
        if (real_accept == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    s = real_accept(fd, addr, len);
    if (s >= 0) {
        kr_tm_log_accept(fd, s);
    }
    return s;
}

int
accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    static kr_tm_accept4_fn real_accept4;
    int s;

    if (real_accept4 == NULL) {
        real_accept4 = (kr_tm_accept4_fn)dlsym(RTLD_NEXT, "accept4");
        if (real_accept4 == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    s = real_accept4(fd, addr, len, flags);
    if (s >= 0) {
        kr_tm_log_accept(fd, s);
    }
    return s;
}

static int
kr_tm_parse_int(const char *s, int min, int max, const char *what)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        kr_tm_die("bad %s '%s' (want %d..%d)", what, s, min, max);
    }
    return (int)v;
}

static void
kr_tm_usage(FILE *f)
{
    fputs("usage: krmock [-b BROKERS] [-p BASE | -P PORT,PORT,...]\n"
          "              [-t NAME:PARTITIONS]... [-r READYFILE]\n"
          "              [-a ACCEPTLOG] [-A HOST] [-e KEY:ERR:N]...\n"
          "              [-K 4.0.0|4.0.1] [-V KEY:MIN:MAX]... [-R MS] [-d]\n"
          "  -b N     brokers, NodeIds 1..N (default 3)\n"
          "  -p BASE  NodeId n listens on 127.0.0.1:BASE+n\n"
          "  -P LIST  one port per broker, in NodeId order\n"
          "  -t T:N   create topic T with N partitions (repeatable)\n"
          "  -r FILE  write the bootstrap list to FILE once listening\n"
          "  -a FILE  log every accepted connection and its owner pid\n"
          "  -A HOST  brokers advertise HOST (librdkafka >= 2.10)\n"
          "  -e K:E:N the next N requests of ApiKey K get error code E\n"
          "           (rd_kafka_mock_push_request_errors; repeatable)\n"
          "  -K REL   every API restricted to what Kafka REL (4.0.0, or\n"
          "           4.0.1 and later) accepts; Produce stays 0-7 as\n"
          "           Kafka 4 advertises it (KAFKA-18659); -V overrides\n"
          "  -V K:MIN:MAX  ApiKey K supports only versions MIN..MAX\n"
          "           (rd_kafka_mock_set_apiversion; -1:-1 removes it;\n"
          "           repeatable), e.g. -V 0:3:7: Produce 3-7 only\n"
          "  -R MS    every response delayed by MS milliseconds\n"
          "           (rd_kafka_mock_broker_set_rtt)\n"
          "  -d       librdkafka debug logs (debug=mock,protocol)\n"
          "SIGTERM/SIGINT stop; SIGUSR1 moves every partition leader.\n",
          f);
}

static void
kr_tm_write_ready(const char *path, const char *bootstraps)
{
    char tmp[PATH_MAX];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        kr_tm_die("ready file path too long");
    }
    f = fopen(tmp, "w");
    if (f == NULL) {
        kr_tm_die("%s: %s", tmp, strerror(errno));
    }
    fprintf(f, "%s\n", bootstraps);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        kr_tm_die("%s: %s", path, strerror(errno));
    }
}

static void
kr_tm_move_leaders(rd_kafka_mock_cluster_t *mc, struct kr_tm_topic *topics,
                   int ntopics, int nbrokers, int moves)
{
    for (int t = 0; t < ntopics; t++) {
        for (int p = 0; p < topics[t].partitions; p++) {
            int32_t leader = (int32_t)((p + moves) % nbrokers) + 1;
            rd_kafka_resp_err_t err;

            err = rd_kafka_mock_partition_set_leader(mc, topics[t].name, p,
                                                     leader);
            if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                fprintf(stderr, "krmock: %s [%d] leader %d: %s\n",
                        topics[t].name, p, (int)leader, rd_kafka_err2str(err));
            }
        }
    }
}

/* ApiVersions as the mock advertises it: index ApiKey, lo > hi = absent. */
struct kr_tm_apis {
    int16_t lo[KR_TM_MAX_APIKEY + 1];
    int16_t hi[KR_TM_MAX_APIKEY + 1];
};

/* Read exactly n bytes from fd (a receive timeout is set): 0 or -1. */
static int
kr_tm_read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static int16_t
kr_tm_be16(const uint8_t *p)
{
    return (int16_t)(((unsigned)p[0] << 8) | p[1]);
}

static int32_t
kr_tm_be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                     ((uint32_t)p[2] << 8) | p[3]);
}

/*
 * Ask the first broker of bootstraps ("127.0.0.1:P,...") for its
 * ApiVersions v0 on a connection of our own, and fill out.  Dies on any
 * failure (the cluster was just started: nothing should fail).
 */
static void
kr_tm_query_apiversions(const char *bootstraps, struct kr_tm_apis *out)
{
    /* size 10; ApiKey 18, version 0, CorrelationId 1, ClientId null */
    static const uint8_t req[] = {0, 0, 0, 10, 0, 18, 0, 0,
                                  0, 0, 0, 1, 0xff, 0xff};
    struct sockaddr_in sin;
    struct timeval tv = {.tv_sec = 10};
    const char *colon = strchr(bootstraps, ':');
    uint8_t hdr[4], *body;
    int32_t size, n;
    int fd;

    for (int k = 0; k <= KR_TM_MAX_APIKEY; k++) {
        out->lo[k] = 1;
        out->hi[k] = 0;
    }
    if (colon == NULL) {
        kr_tm_die("-K: no port in '%s'", bootstraps);
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((uint16_t)atoi(colon + 1));
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        connect(fd, (const struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        write(fd, req, sizeof(req)) != (ssize_t)sizeof(req) ||
        kr_tm_read_full(fd, hdr, sizeof(hdr)) != 0) {
        kr_tm_die("-K: ApiVersions from %s: %s", bootstraps,
                  strerror(errno));
    }
    size = kr_tm_be32(hdr);
    if (size < 10 || size > 1 << 16 || (body = malloc((size_t)size)) == NULL ||
        kr_tm_read_full(fd, body, (size_t)size) != 0) {
        kr_tm_die("-K: ApiVersions response of %d bytes unreadable",
                  (int)size);
    }
    close(fd);
    /* v0: CorrelationId, ErrorCode, [ApiKey MinVersion MaxVersion] */
    n = kr_tm_be32(body + 6);
    if (kr_tm_be32(body) != 1 || kr_tm_be16(body + 4) != 0 || n < 0 ||
        10 + (int64_t)n * 6 > size) {
        kr_tm_die("-K: bad ApiVersions response (%d bytes, error %d)",
                  (int)size, (int)kr_tm_be16(body + 4));
    }
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *e = body + 10 + i * 6;
        int16_t k = kr_tm_be16(e);

        if (k >= 0 && k <= KR_TM_MAX_APIKEY) {
            out->lo[k] = kr_tm_be16(e + 2);
            out->hi[k] = kr_tm_be16(e + 4);
        }
    }
    free(body);
}

/*
 * -K RELEASE: restrict every API the mock advertises to what Kafka
 * RELEASE accepts (the comment at the top).  release_4_0_0: JoinGroup
 * min 2 (kr_api_min_kafka4); else 4.0.1 and later (the 4.3.1 minima).
 */
static void
kr_tm_kafka4(rd_kafka_mock_cluster_t *mc, const char *bootstraps,
             const char *release, bool release_4_0_0)
{
    struct kr_tm_apis apis;
    char said[1024];
    size_t used = 0;

    kr_tm_query_apiversions(bootstraps, &apis);
    said[0] = '\0';
    for (int16_t k = 0; k <= KR_TM_MAX_APIKEY; k++) {
        const struct kr_api_desc *a = kr_api_get(k);
        int16_t lo = apis.lo[k], hi = apis.hi[k], min4;
        rd_kafka_resp_err_t err;

        if (lo > hi || a == NULL) {
            continue;   /* not in the mock, or unknown to krelay: as is */
        }
        if (k == KR_API_PRODUCE) {
            /* KAFKA-18659: advertised from 0, v0-2 refused when sent
             * (here: the mock's magic check) */
            used += (size_t)snprintf(said + used, sizeof(said) - used,
                                     " %s %d..%d (kept: KAFKA-18659)",
                                     a->name, lo, hi);
            continue;
        }
        min4 = release_4_0_0 ? kr_api_min_kafka4(a, NULL)
               : (a->valid_4x.lo <= a->valid_4x.hi ? a->valid_4x.lo : -1);
        if (min4 <= lo && (min4 >= 0 && hi <= a->valid_4x.hi)) {
            continue;   /* Kafka 4 accepts every version the mock has */
        }
        if (min4 > lo) {
            lo = min4;
        }
        if (min4 >= 0 && hi > a->valid_4x.hi) {
            hi = a->valid_4x.hi;
        }
        if (min4 < 0 || lo > hi) {
            lo = hi = -1;   /* nothing in common: removed */
        }
        err = rd_kafka_mock_set_apiversion(mc, k, lo, hi);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            kr_tm_die("-K %s: %s %d..%d: %s", release, a->name, lo, hi,
                      rd_kafka_err2str(err));
        }
        if (used < sizeof(said)) {
            used += (size_t)snprintf(said + used, sizeof(said) - used,
                                     " %s %d..%d", a->name, lo, hi);
        }
    }
    fprintf(stderr, "krmock: -K %s:%s\n", release, said);
}

int
main(int argc, char **argv)
{
    struct kr_tm_topic topics[KR_TM_MAX_TOPICS];
    int ntopics = 0, nbrokers = 3, base = -1, opt, moves = 0, sig;
    const char *ready = NULL, *accept_path = NULL, *adv_host = NULL;
    const char *port_list = NULL, *kafka4 = NULL;
    int push[8][3], npush = 0, rtt_ms = 0;
    int apiver[KR_TM_MAX_APIVERSIONS][3], napiver = 0;
    bool debug = false;
    char errstr[512];
    struct kr_mock *mock;
    rd_kafka_mock_cluster_t *mc;
    const char *bootstraps;
    sigset_t sigs;

    while ((opt = getopt(argc, argv, "b:p:P:t:r:a:A:e:K:V:R:dh")) != -1) {
        switch (opt) {
        case 'b':
            nbrokers = kr_tm_parse_int(optarg, 1, KR_TM_MAX_BROKERS,
                                       "broker count");
            break;
        case 'p':
            base = kr_tm_parse_int(optarg, 1, 65535 - KR_TM_MAX_BROKERS,
                                   "base port");
            break;
        case 'P':
            port_list = optarg;
            break;
        case 't': {
            char *colon;

            if (ntopics == KR_TM_MAX_TOPICS) {
                kr_tm_die("too many topics");
            }
            topics[ntopics].name = strdup(optarg);
            if (topics[ntopics].name == NULL) {
                kr_tm_die("out of memory");
            }
            colon = strrchr(topics[ntopics].name, ':');
            topics[ntopics].partitions = 3;
            if (colon != NULL) {
                *colon = '\0';
                topics[ntopics].partitions =
                    kr_tm_parse_int(colon + 1, 1, 100000, "partition count");
            }
            if (topics[ntopics].name[0] == '\0') {
                kr_tm_die("empty topic name in '%s'", optarg);
            }
            ntopics++;
            break;
        }
        case 'r':
            ready = optarg;
            break;
        case 'a':
            accept_path = optarg;
            break;
        case 'A':
            adv_host = optarg;
            break;
        case 'e':
            if (npush == 8 ||
                sscanf(optarg, "%d:%d:%d", &push[npush][0], &push[npush][1],
                       &push[npush][2]) != 3 ||
                push[npush][2] < 1 || push[npush][2] > 1000) {
                kr_tm_die("-e: expected APIKEY:ERRORCODE:COUNT (at most 8)");
            }
            npush++;
            break;
        case 'K':
            if (strcmp(optarg, "4.0.0") != 0 && strcmp(optarg, "4.0.1") != 0) {
                kr_tm_die("-K: expected 4.0.0 or 4.0.1 (4.0.1 and later), "
                          "not '%s'", optarg);
            }
            kafka4 = optarg;
            break;
        case 'V': {
            int *v = apiver[napiver];
            char tail;

            if (napiver == KR_TM_MAX_APIVERSIONS ||
                sscanf(optarg, "%d:%d:%d%c", &v[0], &v[1], &v[2], &tail) !=
                    3 ||
                v[0] < 0 || v[0] > INT16_MAX || v[1] < -1 ||
                v[1] > INT16_MAX || v[2] < -1 || v[2] > INT16_MAX ||
                (v[1] == -1) != (v[2] == -1) || v[1] > v[2]) {
                kr_tm_die("-V: expected APIKEY:MIN:MAX with 0 <= MIN <= "
                          "MAX, or APIKEY:-1:-1 (at most %d)",
                          KR_TM_MAX_APIVERSIONS);
            }
            napiver++;
            break;
        }
        case 'R':
            rtt_ms = kr_tm_parse_int(optarg, 0, 600000, "-R milliseconds");
            break;
        case 'd':
            debug = true;
            break;
        case 'h':
            kr_tm_usage(stdout);
            return 0;
        default:
            kr_tm_usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        kr_tm_usage(stderr);
        return 2;
    }
    if (base > 0 && port_list != NULL) {
        kr_tm_die("-p and -P are exclusive");
    }
    if (base > 0) {
        for (int i = 0; i < nbrokers; i++) {
            kr_tm_ports[i] = base + i + 1;
        }
        kr_tm_nports = nbrokers;
    } else if (port_list != NULL) {
        char *copy = strdup(port_list), *save = NULL, *tok;

        if (copy == NULL) {
            kr_tm_die("out of memory");
        }
        for (tok = strtok_r(copy, ",", &save); tok != NULL;
             tok = strtok_r(NULL, ",", &save)) {
            if (kr_tm_nports == KR_TM_MAX_BROKERS) {
                kr_tm_die("too many ports");
            }
            kr_tm_ports[kr_tm_nports++] = kr_tm_parse_int(tok, 1, 65535,
                                                          "port");
        }
        free(copy);
        if (kr_tm_nports != nbrokers) {
            kr_tm_die("-P lists %d ports for %d brokers", kr_tm_nports,
                      nbrokers);
        }
    }
#if RD_KAFKA_VERSION < 0x020a0000
    if (adv_host != NULL) {
        kr_tm_die("-A needs librdkafka >= 2.10 (built with %s)",
                  rd_kafka_version_str());
    }
#endif
    if (accept_path != NULL) {
        kr_tm_accept_log = fopen(accept_path, "a");
        if (kr_tm_accept_log == NULL) {
            kr_tm_die("%s: %s", accept_path, strerror(errno));
        }
    }

    /* Block the signals before librdkafka starts its threads, so that
     * they inherit the mask and only sigwait() below sees them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    mock = kr_mock_start(nbrokers, debug, errstr, sizeof(errstr));
    if (mock == NULL) {
        kr_tm_die("%s", errstr);
    }
    mc = kr_mock_cluster(mock);
    if (kr_tm_nports > 0 && kr_tm_next_port != kr_tm_nports) {
        kr_tm_die("only %d of %d broker ports were bound", kr_tm_next_port,
                  kr_tm_nports);
    }
#if RD_KAFKA_VERSION >= 0x020a0000
    if (adv_host != NULL) {
        for (int i = 0; i < nbrokers; i++) {
            /* Ports were handed out in NodeId order; without -p/-P we
             * do not know them, so -A needs one. */
            if (kr_tm_nports == 0) {
                kr_tm_die("-A needs -p or -P");
            }
            rd_kafka_mock_broker_set_host_port(mc, i + 1, adv_host,
                                               kr_tm_ports[i]);
        }
    }
#endif
    if (kafka4 != NULL) {
        kr_tm_kafka4(mc, kr_mock_bootstraps(mock), kafka4,
                     strcmp(kafka4, "4.0.0") == 0);
    }
    for (int i = 0; i < napiver; i++) {
        rd_kafka_resp_err_t err;

        err = rd_kafka_mock_set_apiversion(mc, (int16_t)apiver[i][0],
                                           (int16_t)apiver[i][1],
                                           (int16_t)apiver[i][2]);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            kr_tm_die("-V %d:%d:%d: %s", apiver[i][0], apiver[i][1],
                      apiver[i][2], rd_kafka_err2str(err));
        }
    }
    for (int t = 0; t < ntopics; t++) {
        if (kr_mock_topic(mock, topics[t].name, topics[t].partitions,
                          nbrokers, errstr, sizeof(errstr)) != KR_OK) {
            kr_tm_die("%s", errstr);
        }
    }
    /* Every broker is a replica of every partition (replication factor
     * = brokers); make leadership explicit so that SIGUSR1 moves it
     * predictably. */
    kr_tm_move_leaders(mc, topics, ntopics, nbrokers, 0);
    for (int i = 0; i < npush; i++) {
        rd_kafka_resp_err_t errs[1000];

        for (int j = 0; j < push[i][2]; j++) {
            errs[j] = (rd_kafka_resp_err_t)push[i][1];
        }
        rd_kafka_mock_push_request_errors_array(mc, (int16_t)push[i][0],
                                                (size_t)push[i][2], errs);
    }

    for (int i = 0; i < nbrokers && rtt_ms > 0; i++) {
        rd_kafka_resp_err_t err;

        err = rd_kafka_mock_broker_set_rtt(mc, i + 1, rtt_ms);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            kr_tm_die("-R %d: broker %d: %s", rtt_ms, i + 1,
                      rd_kafka_err2str(err));
        }
    }

    bootstraps = kr_mock_bootstraps(mock);
    if (ready != NULL) {
        kr_tm_write_ready(ready, bootstraps);
    }
    printf("%s\n", bootstraps);
    fflush(stdout);
    fprintf(stderr, "krmock: librdkafka %s, %d brokers at %s\n",
            rd_kafka_version_str(), nbrokers, bootstraps);

    for (;;) {
        if (sigwait(&sigs, &sig) != 0) {
            continue;
        }
        if (sig == SIGUSR1) {
            moves++;
            kr_tm_move_leaders(mc, topics, ntopics, nbrokers, moves);
            printf("leaders moved %d\n", moves);
            fflush(stdout);
            continue;
        }
        if (sig == SIGHUP) {
            continue;
        }
        break;
    }
    fprintf(stderr, "krmock: signal %d, stopping\n", sig);
    kr_mock_stop(mock);
    if (kr_tm_accept_log != NULL) {
        fclose(kr_tm_accept_log);
    }
    for (int t = 0; t < ntopics; t++) {
        free(topics[t].name);
    }
    return 0;
}
