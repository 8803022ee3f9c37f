/*
 * krelay.c - main() of the daemon: options, config check (-t), the demo
 * (--demo: the program krelay-demo-cluster as a child process, kr_demo.h),
 * logging, then kr_daemon in the foreground.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <netinet/in.h>

#include <event2/event.h>

#include "kr_conf.h"
#include "kr_log.h"
#include "kr_admin.h"
#include "kr_clock.h"
#include "kr_daemon.h"
#include "kr_demo.h"
#include "kr_proc.h"
#include "kr_rule.h"
#include "kr_sasl_client.h"
#include "kr_sasl_server.h"
#include "kr_tls_ctx.h"

#define DEMO_TOPICS "demo:3,events:6"
#define DEMO_BROKERS 3
/* How long krelay-demo-cluster may take to print its bootstrap list, and
 * to stop on SIGTERM before it is killed. */
#define DEMO_READY_MS 30000
#define DEMO_STOP_MS 5000
/* KR_PKGLIBEXECDIR: where `make install` puts krelay-demo-cluster
 * ($(pkglibexecdir), from Makefile.am). */

/* After a usage error's own line: where the whole usage is. */
static void
try_help(void)
{
    fprintf(stderr, "Try 'krelay --help' for the options.\n");
}

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: krelay -c FILE [-d] [-p PIDFILE] [-v...]\n"
"       krelay -c FILE -t [-W]\n"
"       krelay -c FILE -T\n"
"       krelay --demo [-c FILE] [--listen HOST:PORT] [--broker-port-base N]\n"
"\n"
"A protocol-aware TCP proxy for Apache Kafka.  Runs in the foreground\n"
"unless -d.\n"
"\n"
"  -c, --config FILE        read the configuration from FILE\n"
"  -t, --test               check the configuration and exit: errors and\n"
"                           warnings (\"krelay: warning: \") on stderr, then\n"
"                           the compiled rule table; exit 1 on an error\n"
"  -T, --dump               print the effective configuration (every key\n"
"                           in use, defaults included) on stdout and exit;\n"
"                           it loads back as the same configuration, and\n"
"                           -t warns of nothing it does not warn of in FILE\n"
"                           (secrets aside: not printed, and their\n"
"                           placeholder is refused when loaded)\n"
"  -W, --strict             with -t: warnings are errors too (exit 1), for\n"
"                           CI and ExecStartPre=\n"
"  -d, --daemon             run in the background (fork, new session, stdio\n"
"                           on /dev/null); the log must go to a file or\n"
"                           syslog.  Exits 0 once krelay is ready, 1 (the\n"
"                           reason on stderr) when it cannot start\n"
"  -p, --pidfile FILE       write krelay's pid to FILE, locked while it runs\n"
"                           (a second krelay with FILE refuses to start),\n"
"                           removed at exit\n"
"  -v, --verbose            more logging (repeat for more)\n"
"      --demo               start a mock Kafka cluster (%d brokers, topics\n"
"                           %s) behind krelay: the program\n"
"                           " KR_DEMO_PROGRAM ", run as a child process\n"
"                           and stopped with krelay\n"
"      --demo -c FILE       the easiest way to try rules: FILE's listeners,\n"
"                           rules, [log] and [audit] in front of the demo\n"
"                           cluster, which stands in for FILE's [upstream]\n"
"                           (may be left out); SIGHUP rereads FILE.  Its\n"
"                           listeners must serve NodeIds 1..%d; their\n"
"                           advertised_host is kept as written (warned about\n"
"                           when clients here may not reach it: try a copy\n"
"                           with advertised_host = 127.0.0.1)\n"
"      --listen HOST:PORT   --demo without -c only: bootstrap listener\n"
"                           (default 127.0.0.1:9092)\n"
"      --broker-port-base N --demo without -c only: NodeId n listens on\n"
"                           N + n (default 19092)\n"
"  -V, --version            print the version and exit\n"
"  -h, --help               print this help and exit\n"
"\n"
"Signals: SIGTERM drains then stops (a second one, or SIGINT, stops at\n"
"once), SIGHUP reloads the configuration (and reopens the log and audit\n"
"files), SIGUSR1 reopens the log and audit files.\n"
"\n"
"--demo prints what to try on stderr.  It looks for " KR_DEMO_PROGRAM "\n"
"beside krelay, then in\n"
"%s; it is built only where configure finds librdkafka.\n",
            DEMO_BROKERS, DEMO_TOPICS, DEMO_BROKERS, KR_PKGLIBEXECDIR);
}

/*
 * Copy the config loader's messages (one per line) to stderr, each with
 * the "krelay: " prefix of krelay's other messages and then kind ("" or
 * "warning: ").
 */
static void
print_prefixed(const char *kind, const char *text)
{
    const char *l = text, *nl;

    while (l != NULL && *l != '\0') {
        nl = strchr(l, '\n');
        fprintf(stderr, "krelay: %s%.*s\n", kind,
                (int)(nl != NULL ? nl - l : (long)strlen(l)), l);
        l = nl != NULL ? nl + 1 : NULL;
    }
}

/*
 * The config's warnings (kr_rule_warnings) to stderr, each line
 * "krelay: warning: FILE:LINE: ...".  Returns how many.
 */
static unsigned
print_warnings(const struct kr_conf *conf)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    unsigned n;

    if (f == NULL) {
        return kr_rule_warnings(conf->ruleset, stderr);
    }
    n = kr_rule_warnings(conf->ruleset, f);
    fclose(f);
    print_prefixed("warning: ", text);
    free(text);
    return n;
}

/*
 * Load the config from path (or text when not NULL; opts apply to a file)
 * and compile its rules, with its errors prefixed.  Returns KR_OK or the
 * loader's error.
 */
static int
load_conf(const char *path, const char *text,
          const struct kr_conf_load_opts *opts, struct kr_conf **conf)
{
    char *errs = NULL;
    size_t elen = 0;
    FILE *ef = open_memstream(&errs, &elen);
    int rc;

    if (ef == NULL) {
        return text != NULL ? kr_rule_load_string(text, path, stderr, conf)
                            : kr_rule_load_with(path, opts, stderr, conf);
    }
    rc = text != NULL ? kr_rule_load_string(text, path, ef, conf)
                      : kr_rule_load_with(path, opts, ef, conf);
    fclose(ef);
    print_prefixed("", errs);
    free(errs);
    return rc;
}

/*
 * -t: can the [section] target (a file) be opened for append, as the
 * daemon will?  Opened without truncating and closed again; a file this
 * check had to create is removed.  syslog and the section's stream
 * ("stderr" for [log], "stdout" for [audit]) need no check.  Prints a
 * FILE:LINE error (line: the key's, 0: none) and returns false when it
 * cannot.
 */
static bool
target_ok(const char *conf_path, int line, const char *section,
          const char *target, const char *stream)
{
    bool created = false;
    int fd;

    if (target == NULL || strcmp(target, "syslog") == 0 ||
        strcmp(target, stream) == 0) {
        return true;
    }
    fd = open(target, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENOENT) {
        fd = open(target, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC |
                  O_NOCTTY, 0640);
        created = fd >= 0;
    }
    if (fd < 0) {
        char where[32] = "";

        if (line > 0) {
            snprintf(where, sizeof(where), ":%d", line);
        }
        fprintf(stderr, "krelay: %s%s: [%s] target %s: cannot open for "
                "append: %s\n", conf_path, where, section, target,
                strerror(errno));
        return false;
    }
    close(fd);
    if (created) {
        (void)unlink(target);
    }
    return true;
}

/*
 * Point every [upstream] of conf at the demo cluster's brokers
 * (bootstraps: "H:P,H:P,..."), in plaintext (the demo cluster has no
 * TLS: an [upstream] ssl = true is dropped with its context) and without
 * SASL (it has none either: sasl_mechanism and metadata_sasl_mechanism
 * are dropped, demo_warnings says so).  Returns false on a parse error.
 */
static bool
demo_retarget(struct kr_conf *conf, const char *bootstraps)
{
    struct kr_hostport *hp;
    char *copy, *tok, *save = NULL;
    int i, n = 0, cap = 8;

    hp = calloc((size_t)cap, sizeof(*hp));
    copy = strdup(bootstraps);
    if (hp == NULL || copy == NULL) {
        free(hp);
        free(copy);
        return false;
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL && n < cap;
         tok = strtok_r(NULL, ",", &save)) {
        if (!kr_hostport_parse(tok, &hp[n])) {
            break;
        }
        n++;
    }
    free(copy);
    if (n == 0) {
        free(hp);
        return false;
    }
    for (i = 0; i < conf->nupstreams; i++) {
        struct kr_upstream_conf *uc = &conf->upstreams[i];
        int j;

        for (j = 0; j < uc->nbootstrap; j++) {
            free(uc->bootstrap[j].host);
        }
        free(uc->bootstrap);
        uc->bootstrap = calloc((size_t)n, sizeof(*uc->bootstrap));
        if (uc->bootstrap == NULL) {
            uc->nbootstrap = 0;
            continue;
        }
        for (j = 0; j < n; j++) {
            uc->bootstrap[j].host = strdup(hp[j].host);
            uc->bootstrap[j].port = hp[j].port;
        }
        uc->nbootstrap = n;
        uc->ssl = false;
        kr_tls_ctx_put(uc->tls);
        uc->tls = NULL;
        /* the credentials stay loaded (freed with conf), unused */
        uc->sasl.mechanism = 0;
        uc->metadata_sasl.mechanism = 0;
    }
    for (i = 0; i < n; i++) {
        free(hp[i].host);
    }
    free(hp);
    return true;
}

/*
 * Can a client of the demo on this machine reach host, a listener's
 * advertised_host?  localhost, a loopback address (127.0.0.0/8, ::1,
 * ::ffff:127.x.y.z), or the listener's own listen host (krelay binds it,
 * so it is this machine's).
 */
static bool
demo_host_local(const char *host, const char *listen_host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (strcasecmp(host, "localhost") == 0 ||
        strcasecmp(host, "localhost.") == 0 ||
        (listen_host != NULL && strcasecmp(host, listen_host) == 0)) {
        return true;
    }
    if (inet_pton(AF_INET, host, &a4) == 1) {
        return (ntohl(a4.s_addr) >> 24) == 127;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    }
    return false;
}

/*
 * What keeps conf's listeners from serving the demo cluster (--demo -c
 * FILE, at start and at a reload), one line each to f, "FILE:LINE:
 * [listener NAME]: ...": an advertised_host a client of the demo on this
 * machine may not reach (--demo keeps it: the file is the user's, and a
 * demo reached from other machines needs it), and a NodeId range that
 * leaves out some of the demo cluster's NodeIds 1..DEMO_BROKERS; SASL
 * the demo cluster cannot do (it has none): an [upstream]'s
 * sasl_mechanism or metadata_sasl_mechanism (demo_retarget drops them),
 * a listener with sasl = required (its clients' SASL would go to the
 * cluster).  Call it before demo_retarget.  Returns how many.
 */
static unsigned
demo_warnings(const struct kr_conf *conf, FILE *f)
{
    unsigned n = 0;
    int i;

    for (i = 0; i < conf->nupstreams; i++) {
        const struct kr_upstream_conf *u = &conf->upstreams[i];
        const struct kr_sasl_cred *c[2] = { &u->sasl, &u->metadata_sasl };
        const char *key[2] = { "sasl_mechanism", "metadata_sasl_mechanism" };
        int k;

        for (k = 0; k < 2; k++) {
            if (c[k]->mechanism == 0) {
                continue;
            }
            fprintf(f, "%s:%d: [upstream%s%s]: %s = %s: the demo cluster "
                    "has no SASL: --demo connects to it without "
                    "authenticating (the key is not used; trying SASL "
                    "origination needs a broker with SASL)\n", conf->path,
                    u->line, u->name[0] != '\0' ? " " : "", u->name,
                    key[k], kr_sasl_mechanism_name(
                        (enum kr_sasl_mechanism)c[k]->mechanism));
            n++;
        }
    }

    for (i = 0; i < conf->nlisteners; i++) {
        const struct kr_listener_conf *l = &conf->listeners[i];
        const char *adv = l->advertised_host;
        const char *br = adv != NULL && strchr(adv, ':') != NULL ? "[" : "";
        const char *ket = br[0] != '\0' ? "]" : "";
        char lbl[128];

        snprintf(lbl, sizeof(lbl), "%s:%d: [listener%s%s]", conf->path,
                 l->line, l->name[0] != '\0' ? " " : "", l->name);
        if (adv != NULL && !demo_host_local(adv, l->listen.host)) {
            fprintf(f, "%s: advertised_host = %s: clients of the demo are "
                    "told NodeId n is at %s%s%s:%u + n and must "
                    "reach that name from where they run; to try this "
                    "file on this machine, copy it with advertised_host = "
                    "127.0.0.1 (--demo keeps it as written)\n", lbl, adv,
                    br, adv, ket,
                    (unsigned)l->broker_port_base);
            n++;
        }
        if (l->sasl == KR_SASL_MODE_REQUIRED) {
            fprintf(f, "%s: sasl = required: clients must authenticate to "
                    "the broker, and the demo cluster has no SASL: every "
                    "client fails (try sasl = terminate: krelay "
                    "authenticates them itself)\n", lbl);
            n++;
        }
        if (l->node_id_min > 1 || l->node_id_max < DEMO_BROKERS) {
            fprintf(f, "%s: node_id_min..node_id_max is %d..%d, but the "
                    "demo cluster's brokers are NodeIds 1..%d: a client's "
                    "connection closes at the first Metadata response "
                    "naming one outside the range (set node_id_min = 1, "
                    "node_id_max = %d)\n", lbl, (int)l->node_id_min,
                    (int)l->node_id_max, DEMO_BROKERS, DEMO_BROKERS);
            n++;
        }
    }
    return n;
}

/*
 * kr_daemon's reload hook for --demo -c FILE: the reread FILE's upstreams
 * are pointed at the demo cluster too (as at start), so a reload changes
 * the rules, not where the demo's traffic goes; what demo_warnings finds
 * is logged as the daemon logs the file's own warnings.
 */
static bool
demo_reload_adjust(struct kr_conf *nc, void *arg, char *err, size_t errlen)
{
    const struct kr_demo *dm = arg;
    char *text = NULL, *l, *nl;
    size_t len = 0;
    FILE *f;

    /* the warnings first: they see the keys demo_retarget drops */
    f = open_memstream(&text, &len);
    if (f != NULL) {
        (void)demo_warnings(nc, f);
        fclose(f);
    }
    if (!demo_retarget(nc, dm->bootstraps)) {
        snprintf(err, errlen, "cannot point its upstreams at the demo "
                 "cluster (%s)", dm->bootstraps);
        free(text);
        return false;
    }
    for (l = text; l != NULL && *l != '\0'; l = nl != NULL ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        kr_log_warn("reload: warning: %.*s",
                    (int)(nl != NULL ? nl - l : (long)strlen(l)), l);
    }
    free(text);
    return true;
}

/*
 * "HOST:PORT" a client of the demo connects to for the listening socket
 * ls: its address, or 127.0.0.1 for a wildcard (0.0.0.0, [::]: krelay
 * then advertises 127.0.0.1 too).
 */
static void
demo_connect_addr(const struct kr_lsock *ls, char *buf, size_t len)
{
    const struct sockaddr *sa = (const struct sockaddr *)&ls->addr;

    if (sa->sa_family == AF_INET &&
        ((const struct sockaddr_in *)&ls->addr)->sin_addr.s_addr ==
            htonl(INADDR_ANY)) {
        snprintf(buf, len, "127.0.0.1:%u",
                 ntohs(((const struct sockaddr_in *)&ls->addr)->sin_port));
    } else if (sa->sa_family == AF_INET6 &&
               IN6_IS_ADDR_UNSPECIFIED(
                   &((const struct sockaddr_in6 *)&ls->addr)->sin6_addr)) {
        snprintf(buf, len, "127.0.0.1:%u",
                 ntohs(((const struct sockaddr_in6 *)&ls->addr)->sin6_port));
    } else {
        snprintf(buf, len, "%s", ls->addrstr);
    }
}

/* What main() watches while the daemon runs (--demo). */
struct demo_watch {
    struct kr_demo *dm;
    struct kr_daemon *d;
    bool gone;                          /* the cluster ended first */
};

/* The demo cluster's stdout: end of file means it is gone; krelay stops
 * (a demo without its cluster serves nothing). */
static void
demo_out_cb(evutil_socket_t fd, short what, void *arg)
{
    struct demo_watch *w = arg;
    char how[128];

    (void)fd;
    (void)what;
    if (kr_demo_gone(w->dm, how, sizeof(how))) {
        kr_log_error("the demo cluster (%s) %s: stopping", w->dm->path, how);
        w->gone = true;
        kr_daemon_stop(w->d);
    }
}

/*
 * fds 0, 1 and 2 open before krelay opens anything: one a supervisor left
 * closed (`krelay >&-`) would be the next descriptor krelay opens (the log
 * file, a client's socket), and [audit] target = stdout or the stderr log
 * would write into it.  A closed one becomes /dev/null, as daemons do.
 * false when /dev/null cannot be opened (errno set).
 */
static bool
std_fds_open(void)
{
    int fd, n;

    for (fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
            continue;
        }
        n = open("/dev/null", O_RDWR);
        if (n < 0) {
            return false;
        }
        if (n != fd) {                  /* the lowest free one: fd itself */
            if (dup2(n, fd) < 0) {
                close(n);
                return false;
            }
            close(n);
        }
    }
    return true;
}

/*
 * -d closes stdin, stdout and stderr and runs in /: the log must go to a
 * file or syslog, an audit file must not be stdout, and file targets
 * must be absolute (a reopen would look for them in /).  Prints why not
 * and returns false.
 */
static bool
daemon_targets_ok(const struct kr_conf *conf)
{
    const char *lt = conf->log.target, *at = conf->audit.target;
    char where[4160];

    if (lt == NULL || strcmp(lt, "stderr") == 0) {
        fprintf(stderr, "krelay: -d: the log goes to stderr, which -d points "
                "at /dev/null: set [log] target to a file or syslog\n");
        return false;
    }
    if (strcmp(lt, "syslog") != 0 && lt[0] != '/') {
        fprintf(stderr, "krelay: -d: %s: [log] target %s is a relative path: "
                "krelay -d runs in /; write an absolute one\n",
                kr_conf_where(conf, conf->log.target_line, where,
                              sizeof(where)), lt);
        return false;
    }
    if (at != NULL && strcmp(at, "stdout") == 0) {
        fprintf(stderr, "krelay: -d: %s: [audit] target = stdout, which -d "
                "points at /dev/null: set it to a file or syslog\n",
                kr_conf_where(conf, conf->audit.target_line, where,
                              sizeof(where)));
        return false;
    }
    if (at != NULL && strcmp(at, "syslog") != 0 && at[0] != '/') {
        fprintf(stderr, "krelay: -d: %s: [audit] target %s is a relative "
                "path: krelay -d runs in /; write an absolute one\n",
                kr_conf_where(conf, conf->audit.target_line, where,
                              sizeof(where)), at);
        return false;
    }
    return true;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "dump", no_argument, NULL, 'T' },
        { "strict", no_argument, NULL, 'W' },
        { "verbose", no_argument, NULL, 'v' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { "demo", no_argument, NULL, 'D' },
        { "listen", required_argument, NULL, 'L' },
        { "broker-port-base", required_argument, NULL, 'B' },
        { "daemon", no_argument, NULL, 'd' },
        { "pidfile", required_argument, NULL, 'p' },
        { NULL, 0, NULL, 0 }
    };
    const char *path = NULL, *listen = "127.0.0.1:9092";
    const char *demo_opt = NULL;        /* --listen or --broker-port-base */
    long port_base = 19092, listen_port = 9092;
    bool test = false, strict = false, demo = false, listen_wild = false;
    bool conf_log_elsewhere = false, daemonize = false, dump = false;
    const char *pid_path = NULL;
    struct kr_pidfile pf = { .fd = -1, .path = NULL };
    char *abs_conf = NULL;
    int ready_fd = -1;
    struct kr_proc_ids ids;
    bool drop = false;
    unsigned nwarn, ndemo_warn = 0, nlisten_warn = 0;
    struct kr_conf_load_opts demo_opts = { NULL };
    int verbose = 0, c, rc = 1, level;
    struct kr_conf *conf = NULL;
    struct kr_daemon *p = NULL;
    char err[512], why[600];
    struct kr_demo dm = { .pid = 0, .ctl_fd = -1, .out_fd = -1 };
    struct demo_watch watch = { .dm = &dm };
    struct event *demo_ev = NULL;
    struct kr_admin *admin = NULL;
    int64_t load_t0, load_us = 0;

    if (!std_fds_open()) {
        fprintf(stderr, "krelay: fd 0, 1 or 2 is closed and /dev/null "
                "cannot be opened in its place: %s\n", strerror(errno));
        return 1;
    }
    while ((c = getopt_long(argc, argv, "c:tTWvVhdp:", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 't':
            test = true;
            break;
        case 'W':
            strict = true;
            break;
        case 'T':
            dump = true;
            break;
        case 'd':
            daemonize = true;
            break;
        case 'p':
            pid_path = optarg;
            break;
        case 'v':
            verbose++;
            break;
        case 'V':
            printf("krelay %s\n", PACKAGE_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        case 'D':
            demo = true;
            break;
        case 'L': {
            struct kr_hostport hp;

            /* checked here, as the loader would check listen = */
            if (!kr_hostport_parse(optarg, &hp)) {
                fprintf(stderr, "krelay: --listen %s: expected HOST:PORT "
                        "(IPv6 as [ADDR]:PORT, port 1-65535)\n", optarg);
                return 2;
            }
            listen = optarg;
            listen_port = hp.port;
            listen_wild = kr_conf_is_wildcard(hp.host);
            free(hp.host);
            demo_opt = "--listen";
            break;
        }
        case 'B': {
            char *end;

            errno = 0;
            port_base = strtol(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || port_base < 1 ||
                port_base > 65535 - DEMO_BROKERS) {
                fprintf(stderr, "krelay: --broker-port-base %s: expected a "
                        "port 1-%d (NodeId %d listens on it + %d)\n", optarg,
                        65535 - DEMO_BROKERS, DEMO_BROKERS, DEMO_BROKERS);
                return 2;
            }
            demo_opt = "--broker-port-base";
            break;
        }
        default:
            try_help();
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "krelay: unexpected argument '%s'\n", argv[optind]);
        try_help();
        return 2;
    }
    if (strict && !test) {
        fprintf(stderr, "krelay: -W (--strict) applies to -t only\n");
        try_help();
        return 2;
    }
    /* -T goes with what -t goes with: -c FILE, --demo, or both */
    if (dump && (test || daemonize || pid_path != NULL)) {
        fprintf(stderr, "krelay: -T goes with -c FILE and --demo only (not "
                "with %s)\n", test ? "-t" : daemonize ? "-d" : "-p");
        try_help();
        return 2;
    }
    if ((daemonize || pid_path != NULL) && (test || demo)) {
        fprintf(stderr, "krelay: %s applies to running krelay -c FILE (not "
                "with %s)\n", daemonize ? "-d" : "-p", test ? "-t" : "--demo");
        try_help();
        return 2;
    }
    if (daemonize && path != NULL) {
        /* -d runs in /: SIGHUP must find the file again */
        abs_conf = kr_proc_abspath(path);
        if (abs_conf == NULL) {
            fprintf(stderr, "krelay: -c %s: %s\n", path, strerror(errno));
            return 1;
        }
        path = abs_conf;
    }
    if (demo_opt != NULL && (!demo || path != NULL)) {
        fprintf(stderr, "krelay: %s applies to --demo without -c only (with "
                "-c FILE, FILE's [listener] says where krelay listens)\n",
                demo_opt);
        try_help();
        return 2;
    }
    if (path == NULL && !demo) {
        fprintf(stderr, "krelay: no configuration: use -c FILE (or --demo)\n");
        try_help();
        return 2;
    }
    if (demo && path == NULL && listen_port > port_base &&
        listen_port <= port_base + DEMO_BROKERS) {
        fprintf(stderr, "krelay: --listen %s: port %ld is NodeId %ld's "
                "(--broker-port-base %ld: NodeId n listens on %ld + n)\n",
                listen, listen_port, listen_port - port_base, port_base,
                port_base);
        return 2;
    }
    if (demo && !test && !dump) {
        char exe_dir[4096];
        const char *dirs[2];

        if (kr_demo_exe_dir(exe_dir, sizeof(exe_dir)) != KR_OK) {
            exe_dir[0] = '\0';
        }
        dirs[0] = exe_dir;
        dirs[1] = KR_PKGLIBEXECDIR;
        if (kr_demo_start(&dm, dirs, 2, DEMO_BROKERS, DEMO_TOPICS,
                          DEMO_READY_MS, err, sizeof(err)) != KR_OK) {
            fprintf(stderr, "krelay: --demo: %s\n", err);
            return 1;
        }
    }
    if (demo && path == NULL) {
        char text[2048];

        snprintf(text, sizeof(text),
                 "[upstream demo]\n"
                 "bootstrap_servers = %s\n"
                 "[listener demo]\n"
                 "listen = %s\n"
                 "broker_port_base = %ld\n"
                 "node_id_min = 1\n"
                 "node_id_max = %d\n"
                 "%s",
                 dm.pid != 0 ? dm.bootstraps : "127.0.0.1:1", listen,
                 port_base, DEMO_BROKERS,
                 listen_wild ? "advertised_host = 127.0.0.1\n" : "");
        if (load_conf("(demo)", text, NULL, &conf) != KR_OK) {
            goto out;
        }
        conf->upstreams[0].stand_in = true;     /* -T: not printed */
        /* what the loader would say of a line of "(demo)", said of the
           option, with advice that fits it */
        if (listen_wild) {
            fprintf(stderr, "krelay: warning: --listen %s is a wildcard "
                    "address: the demo tells every client that the brokers "
                    "are at 127.0.0.1, so clients on other machines cannot "
                    "connect (for them: --demo -c FILE, its listener with "
                    "advertised_host)\n", listen);
            nlisten_warn = 1;
        }
    }
    if (demo) {
        /* --demo -c FILE: a FILE without [upstream] loads too */
        demo_opts.stand_in_upstream = dm.pid != 0 ? dm.bootstraps
                                                  : "127.0.0.1:1";
    }
    load_t0 = kr_clock_mono_us();
    if (conf == NULL && load_conf(path, NULL, demo ? &demo_opts : NULL,
                                  &conf) != KR_OK) {
        goto out;
    }
    load_us = kr_clock_mono_us() - load_t0;
    if (dump) {
        /* the warnings are -t's business; the errors were printed */
        kr_conf_dump(conf, stdout);
        rc = fflush(stdout) == 0 ? 0 : 1;
        goto out;
    }
    /* to stderr at start too: a warning never stops krelay (-t -W does) */
    nwarn = print_warnings(conf) + nlisten_warn;
    if (demo && path != NULL) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        if (f != NULL) {
            ndemo_warn = demo_warnings(conf, f);
            fclose(f);
            print_prefixed("warning: ", text);
            free(text);
            nwarn += ndemo_warn;
        }
    }
    if (conf->process.user != NULL || conf->process.group != NULL) {
        if (conf->process.user == NULL) {
            fprintf(stderr, "krelay: [process] group = %s without user: "
                    "set user too\n", conf->process.group);
            goto out;
        }
        if (!kr_proc_lookup(conf->process.user, conf->process.group, &ids,
                            err, sizeof(err))) {
            fprintf(stderr, "krelay: %s\n", err);
            goto out;
        }
        drop = true;
    }
    if (test) {
        const char *cp = path ? path : "(demo)";
        bool ok_log = target_ok(cp, conf->log.target_line, "log",
                                conf->log.target, "stderr");
        bool ok_audit = target_ok(cp, conf->audit.target_line, "audit",
                                  conf->audit.target, "stdout");

        if (!ok_log || !ok_audit) {
            goto out;
        }
        if (strict && nwarn > 0) {
            fprintf(stderr, "krelay: %s: %u warning%s, which -W makes "
                    "errors\n", cp, nwarn, nwarn == 1 ? "" : "s");
            goto out;
        }
        if (nwarn > 0) {
            printf("krelay: %s: configuration OK (%u warning%s)\n", cp,
                   nwarn, nwarn == 1 ? "" : "s");
        } else {
            printf("krelay: %s: configuration OK\n", cp);
        }
        kr_rule_print(conf->ruleset, stdout);
        rc = 0;
        goto out;
    }
    if (dm.pid != 0 && path != NULL && !demo_retarget(conf, dm.bootstraps)) {
        fprintf(stderr, "krelay: --demo: bad bootstrap list '%s' from %s\n",
                dm.bootstraps, dm.path);
        goto out;
    }
    if (daemonize && !daemon_targets_ok(conf)) {
        goto out;
    }
    if (pid_path != NULL && !kr_pidfile_open(&pf, pid_path, err,
                                             sizeof(err))) {
        fprintf(stderr, "krelay: %s\n", err);
        goto out;
    }
    level = conf->log.level + verbose;
    if (level > KR_LOG_TRACE) {
        level = KR_LOG_TRACE;
    }
    kr_log_level_cur = level;
    if (conf->log.target != NULL && strcmp(conf->log.target, "stderr") != 0
        && kr_log_open(conf->log.target, "krelay") != KR_OK) {
        char where[4160];

        fprintf(stderr, "krelay: %s: cannot open log %s: %s\n",
                kr_conf_where(conf, conf->log.target_line, where,
                              sizeof(where)),
                conf->log.target, strerror(errno));
        goto out;
    }
    conf_log_elsewhere = conf->log.target != NULL &&
        strcmp(conf->log.target, "stderr") != 0;
    if (daemonize) {
        /* before any thread starts (the audit writer: kr_daemon_start) */
        ready_fd = kr_proc_daemonize(err, sizeof(err));
        if (ready_fd < 0) {
            fprintf(stderr, "krelay: %s\n", err);
            goto out;
        }
    }
    if (pf.fd >= 0 && !kr_pidfile_write(&pf)) {
        snprintf(err, sizeof(err), "-p %s: cannot write the pid file: %s",
                 pf.path, strerror(errno));
        kr_log_error("%s", err);
        kr_proc_ready(ready_fd, err);
        ready_fd = -1;
        goto out;
    }
    p = kr_daemon_new(conf, true, NULL);
    if (p == NULL) {
        fprintf(stderr, "krelay: out of memory\n");
        goto out;
    }
    conf = NULL;                /* the daemon owns it */
    p->log_verbose = verbose;
    atomic_store(&p->conf_load_us, load_us);
    if (demo && path == NULL) {
        p->no_conf_file = true;
    } else if (dm.pid != 0) {
        p->reload_adjust = demo_reload_adjust;
        p->reload_adjust_arg = &dm;
        p->load_opts = &demo_opts;
    }
    if (kr_daemon_start(p, err, sizeof(err)) != KR_OK) {
        kr_log_error("cannot start: %s", err);
        if (ready_fd >= 0) {
            snprintf(why, sizeof(why), "cannot start: %s", err);
            kr_proc_ready(ready_fd, why);
            ready_fd = -1;
        }
        if (conf_log_elsewhere) {
            fprintf(stderr, "krelay: cannot start: %s\n", err);
        }
        if (demo && path == NULL && strstr(err, "Address already in use")) {
            /* another demo, or a Kafka on this machine */
            kr_log_error("--demo: choose other ports, e.g. --listen "
                         "127.0.0.1:9192 --broker-port-base 19192 (NodeId n "
                         "listens on the base + n)");
        }
        goto out;
    }
    if (dm.pid != 0) {
        char addr[80];

        watch.d = p;
        demo_ev = event_new(p->base, dm.out_fd, EV_READ | EV_PERSIST,
                            demo_out_cb, &watch);
        if (demo_ev == NULL || event_add(demo_ev, NULL) != 0) {
            kr_log_error("--demo: cannot watch the demo cluster");
            goto out;
        }
        const struct kr_listener_conf *l0 = &p->cref->conf->listeners[0];
        bool sasl_term = l0->sasl == KR_SASL_MODE_TERMINATE &&
                         l0->sasl_srv != NULL;
        char boot[320], route[800], kopts[400] = "";
        const char *port;

        /* for people, not for what reads stdout ([audit] target =
           stdout): on stderr, as the log */
        demo_connect_addr(&p->sets[0]->g[0]->socks[0], addr, sizeof(addr));
        port = strrchr(addr, ':');
        if (l0->sni != NULL) {
            /* SNI routing: clients dial names, which must reach this host */
            snprintf(boot, sizeof(boot), "%s%s",
                     l0->sni_bootstrap_name != NULL ? l0->sni_bootstrap_name
                                                    : "BOOTSTRAP-NAME",
                     port != NULL ? port : "");
            snprintf(route, sizeof(route), "Bootstrap: %s by SNI; NodeId n: "
                     "%s on the same port (clients must resolve these names "
                     "to this host, and the certificate name them)", boot,
                     l0->sni_broker_name);
        } else {
            snprintf(boot, sizeof(boot), "%s", addr);
            snprintf(route, sizeof(route), "Bootstrap: %s (NodeId n at port "
                     "%u + n)", addr, l0->broker_port_base);
        }
        if (l0->ssl) {
            snprintf(kopts, sizeof(kopts), " -X security.protocol=%s "
                     "-X ssl.ca.location=CA.pem%s",
                     sasl_term ? "sasl_ssl" : "ssl",
                     l0->ssl_client_ca != NULL
                         ? " -X ssl.certificate.location=CLIENT.pem "
                           "-X ssl.key.location=CLIENT.key"
                         : "");
        } else if (sasl_term) {
            snprintf(kopts, sizeof(kopts),
                     " -X security.protocol=sasl_plaintext");
        }
        if (sasl_term) {
            size_t kl = strlen(kopts);

            /* the first mechanism the listener offers */
            snprintf(kopts + kl, sizeof(kopts) - kl, " -X sasl.mechanism=%s "
                     "-X sasl.username=USER -X sasl.password=PASSWORD",
                     kr_sasl_srv_mech_name(l0->sasl_srv->order[0]));
        }
        fprintf(stderr,
                "krelay demo: a mock Kafka cluster (%d brokers at %s, topics "
                "%s) is behind krelay.\n"
                "%s.  Try:\n"
                "  kcat -b %s%s -L\n"
                "  echo hello | kcat -b %s%s -t demo -P\n"
                "  kcat -b %s%s -t demo -C -e\n"
                "%s%s"
                "%s%s%s"
                "Stop with Ctrl-C.\n",
                DEMO_BROKERS, dm.bootstraps, DEMO_TOPICS, route, boot, kopts,
                boot, kopts, boot, kopts,
                l0->ssl ? "(TLS: CA.pem is the CA of the listener's "
                "certificate; CLIENT.pem/.key a certificate its "
                "ssl_client_ca signed.)\n" : "",
                sasl_term ? "(SASL: USER and PASSWORD a user of the "
                "listener's sasl_credentials, whose line krelay-passwd "
                "wrote.)\n" : "",
                path != NULL ? "Rules and [audit] come from the -c file; "
                "edit it and send SIGHUP to reload.\n" : "",
                ndemo_warn > 0 ? "Read the warning" : "",
                ndemo_warn > 1 ? "s above first: clients may not reach the "
                "brokers.\n" : ndemo_warn == 1 ? " above first: clients may "
                "not reach the brokers.\n" : "");
    }
    if (p->cref->conf->admin.listen.host != NULL) {
        admin = kr_admin_start(p, &p->cref->conf->admin, err, sizeof(err));
        if (admin == NULL) {
            kr_log_error("cannot start: %s", err);
            if (conf_log_elsewhere) {
                fprintf(stderr, "krelay: cannot start: %s\n", err);
            }
            goto out;
        }
    }
    /* listeners bound, keys and certificates read, log, audit and pid
       files open: what needs root is done */
    if (drop && !kr_proc_drop(&ids, err, sizeof(err))) {
        kr_log_error("cannot drop privileges: %s: not running as root", err);
        snprintf(why, sizeof(why), "cannot drop privileges: %s", err);
        kr_proc_ready(ready_fd, why);
        ready_fd = -1;
        if (conf_log_elsewhere && !daemonize) {
            fprintf(stderr, "krelay: %s\n", why);
        }
        goto out;
    }
    if (drop) {
        kr_log_notice("running as user %s (uid %u), group %s (gid %u)",
                      ids.user, ids.uid, ids.group, ids.gid);
    }
    /* [process] workers: workers 1..N-1 on threads, after the fork (-d)
       and the privilege drop: no connection is served as root */
    if (kr_daemon_spawn_workers(p, err, sizeof(err)) != KR_OK) {
        kr_log_error("cannot start: %s", err);
        snprintf(why, sizeof(why), "cannot start: %s", err);
        kr_proc_ready(ready_fd, why);
        ready_fd = -1;
        if (conf_log_elsewhere && !daemonize) {
            fprintf(stderr, "krelay: %s\n", why);
        }
        goto out;
    }
    kr_log_notice("krelay %s started (%d listener group%s, %d worker%s)%s%s"
                  "%s", PACKAGE_VERSION, p->cref->conf->nlisteners,
                  p->cref->conf->nlisteners == 1 ? "" : "s", p->nworkers,
                  p->nworkers == 1 ? "" : "s",
                  daemonize ? ", in the background" : "",
                  pf.path != NULL ? ", pid file " : "",
                  pf.path != NULL ? pf.path : "");
    kr_proc_ready(ready_fd, NULL);
    ready_fd = -1;
    kr_proc_notify("READY=1");          /* listeners bound, worker running */
    kr_daemon_run(p);
    /* the daemon stopped its workers: the admin thread goes before they
       are freed */
    kr_admin_stop(admin);
    admin = NULL;
    kr_daemon_join(p);                  /* the workers' threads; totals */
    kr_log_notice("krelay stopped");
    rc = watch.gone ? 1 : 0;
out:
    kr_admin_stop(admin);
    kr_proc_ready(ready_fd, "cannot start (the log says why)");
    if (demo_ev != NULL) {
        event_free(demo_ev);
    }
    kr_daemon_free(p);
    if (conf != NULL) {
        kr_conf_free(conf);
    }
    if ((dm.pid != 0 || dm.out_fd >= 0) &&
        !kr_demo_stop(&dm, DEMO_STOP_MS)) {
        kr_log_warn("the demo cluster (%s) did not stop cleanly on SIGTERM",
                    dm.path);
    }
    if (pf.path != NULL) {
        char *pp = strdup(pf.path);

        if (!kr_pidfile_remove(&pf)) {
            kr_log_warn("-p %s: cannot remove the pid file: %s (emptied "
                        "instead)", pp != NULL ? pp : "", strerror(errno));
        }
        free(pp);
    }
    kr_log_close();
    libevent_global_shutdown();
    free(abs_conf);
    return rc;
}
