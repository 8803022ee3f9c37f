/*
 * krelay_passwd.c - `krelay-passwd`: a line of krelay's SASL credentials
 * file (kr_sasl_users.h) for a user, from a password read on standard
 * input: "USER MECHANISM salt=...,stored_key=...,server_key=...,
 * iterations=N" (Kafka's stored SCRAM form, kr_scram.h).  The password
 * never reaches the output, an argument or a log; its copies are wiped.
 * See usage() below and man/krelay-passwd.1.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kr_codec.h"
#include "kr_sasl_users.h"
#include "kr_scram.h"

/* longest password accepted, bytes (without the newline) */
#define PW_MAX 1023

static const char *prog = "krelay-passwd";

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: %s [-m SCRAM-SHA-256|SCRAM-SHA-512] [-i ITERATIONS] USER\n"
"       %s -h | --help | --version\n"
"\n"
"Reads USER's password from standard input (without echo on a terminal,\n"
"asked twice; from a pipe, the first line) and prints the line of\n"
"krelay's SASL credentials file for it: USER MECHANISM CREDENTIAL, where\n"
"CREDENTIAL is Kafka's stored SCRAM form (salt, stored_key, server_key,\n"
"iterations).  The password itself is not in the line.\n"
"\n"
"  -m MECHANISM   SCRAM-SHA-256 or SCRAM-SHA-512 (default SCRAM-SHA-512)\n"
"  -i ITERATIONS  PBKDF2 iterations, 4096..16384 (default 8192)\n"
"\n"
"Exit status: 0 ok, 1 no password or a failure, 2 bad usage.\n",
            prog, prog);
}

static int
usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s\n", prog, msg, arg != NULL ? ": " : "",
            arg != NULL ? arg : "");
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return 2;
}

/*
 * The option getopt_long (opterr 0) refused: a long one as given (up
 * to its '='), else a short one from optopt.  In static storage.
 */
static const char *
bad_option(char **argv, int ind)
{
    static char o[64];
    const char *a = ind > 0 ? argv[ind - 1] : NULL;

    if (a != NULL && strncmp(a, "--", 2) == 0 && a[2] != '\0') {
        snprintf(o, sizeof(o), "%.*s", (int)strcspn(a, "="), a);
    } else {
        snprintf(o, sizeof(o), "-%c", optopt);
    }
    return o;
}

/*
 * One line from fd into buf (cap bytes), without its "\n" (or "\r\n"):
 * its length, or -1 on a read error, -2 when longer than cap - 1, -3 at
 * end of file before any byte.  Byte by byte: nothing is buffered past
 * the line (no copy of the password left in stdio).
 */
static long
read_line(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    bool any = false;

    for (;;) {
        char c;
        ssize_t r = read(fd, &c, 1);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return -1;
        }
        if (r == 0) {
            if (!any) {
                return -3;
            }
            break;
        }
        any = true;
        if (c == '\n') {
            break;
        }
        if (n + 1 >= cap) {
            /* drain no further: the caller fails */
            return -2;
        }
        buf[n++] = c;
    }
    if (n > 0 && buf[n - 1] == '\r') {
        n--;
    }
    buf[n] = '\0';
    return (long)n;
}

/*
 * The terminal's settings while echo is off, for the signal handler: a
 * signal that ends the process at the prompt (Ctrl-C, a hang-up, kill)
 * must not leave the terminal without echo (ssh-keygen's and getpass's
 * behaviour: restore, then die of the same signal).
 */
static struct termios tty_saved;
static volatile sig_atomic_t tty_quiet;

static const int tty_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static void
tty_signal(int sig)
{
    if (tty_quiet) {
        /* async-signal-safe: tcsetattr, write, raise */
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
        tty_quiet = 0;
        (void)!write(STDERR_FILENO, "\n", 1);
    }
    /* SA_RESETHAND made the action the default: delivered on return */
    raise(sig);
}

/* A line read from the terminal with echo off, prompt on stderr. */
static long
read_tty(const char *prompt, char *buf, size_t cap)
{
    struct termios quiet;
    struct sigaction sa, old_sa[sizeof(tty_signals) / sizeof(tty_signals[0])];
    long n;
    size_t i;
    bool restore = false, handlers = false;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = tty_signal;
    sa.sa_flags = (int)SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < sizeof(tty_signals) / sizeof(tty_signals[0]); i++) {
        sigaddset(&sa.sa_mask, tty_signals[i]);
    }
    fputs(prompt, stderr);
    fflush(stderr);
    if (tcgetattr(STDIN_FILENO, &tty_saved) == 0) {
        quiet = tty_saved;
        quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
        quiet.c_lflag |= ICANON;
        for (i = 0; i < sizeof(tty_signals) / sizeof(tty_signals[0]); i++) {
            sigaction(tty_signals[i], &sa, &old_sa[i]);
        }
        handlers = true;
        tty_quiet = 1;
        restore = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
        if (!restore) {
            tty_quiet = 0;
        }
    }
    n = read_line(STDIN_FILENO, buf, cap);
    if (restore) {
        /* restored before the flag drops: a signal between them
           restores again, harmlessly */
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
        tty_quiet = 0;
    }
    if (handlers) {
        for (i = 0; i < sizeof(tty_signals) / sizeof(tty_signals[0]); i++) {
            sigaction(tty_signals[i], &old_sa[i], NULL);
        }
    }
    fputc('\n', stderr);
    return n;
}

/* USER as the credentials file takes it: a reason, or NULL */
static const char *
user_problem(const char *u)
{
    size_t i;

    if (u[0] == '\0') {
        return "the user name is empty";
    }
    if (u[0] == '#') {
        return "a user name may not start with '#' (a comment line)";
    }
    for (i = 0; u[i] != '\0'; i++) {
        unsigned char c = (unsigned char)u[i];

        if (c == ' ' || c == '\t') {
            return "user names may not contain whitespace";
        }
        if (c < 0x20 || c == 0x7f) {
            return "control character in the user name";
        }
    }
    if (!kr_utf8_valid((const uint8_t *)u, i)) {
        return "the user name is not valid UTF-8";
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    enum kr_scram_hash h = KR_SCRAM_SHA512;
    unsigned long iterations = KR_SCRAM_ITER_DEFAULT;
    char pw[PW_MAX + 2], again[PW_MAX + 2], *cred_text = NULL, *line = NULL;
    char err[512];
    const char *user, *why = NULL, *problem;
    struct kr_scram_cred cred;
    struct kr_sasl_users *check;
    long n;
    int opt, rc = 1;
    bool tty;

    if (argc > 0 && argv[0] != NULL && strrchr(argv[0], '/') != NULL) {
        prog = strrchr(argv[0], '/') + 1;
    } else if (argc > 0 && argv[0] != NULL) {
        prog = argv[0];
    }
    /* getopt's own messages would name argv[0] whole and say a second
       line: krelay-passwd writes one, with its name (usage_error) */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":m:i:h", longopts, NULL)) != -1) {
        char *end;

        switch (opt) {
        case 'm':
            if (!kr_scram_hash_of(optarg, &h)) {
                return usage_error("-m: the mechanism must be SCRAM-SHA-256 "
                                   "or SCRAM-SHA-512", optarg);
            }
            break;
        case 'i':
            errno = 0;
            iterations = strtoul(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' ||
                optarg[0] == '-' || optarg[0] == '+' ||
                iterations < KR_SCRAM_ITER_MIN ||
                iterations > KR_SCRAM_ITER_MAX) {
                return usage_error("-i: iterations must be a number in "
                                   "4096..16384 (Kafka's SCRAM bounds)",
                                   optarg);
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("krelay-passwd %s\n", PACKAGE_VERSION);
            return 0;
        case ':':
            return usage_error("option needs an argument",
                               bad_option(argv, optind));
        default:
            /* a known long option given "=VALUE": optopt is its val */
            return usage_error(optopt != 0 && optind > 0 &&
                               strncmp(argv[optind - 1], "--", 2) == 0
                               ? "option takes no argument"
                               : "unknown option", bad_option(argv, optind));
        }
    }
    if (optind != argc - 1) {
        return usage_error(optind == argc ? "no USER given"
                                          : "one USER only", NULL);
    }
    user = argv[optind];
    problem = user_problem(user);
    if (problem != NULL) {
        return usage_error(problem, NULL);
    }
    for (n = 0; user[n] != '\0'; n++) {
        if ((unsigned char)user[n] >= 0x80) {
            fprintf(stderr, "%s: warning: a non-ASCII user name can log in "
                    "with PLAIN only: Kafka's SCRAM takes ASCII names\n",
                    prog);
            break;
        }
    }

    tty = isatty(STDIN_FILENO) != 0;
    if (tty) {
        char prompt[256];

        snprintf(prompt, sizeof(prompt), "Password for %s: ", user);
        n = read_tty(prompt, pw, sizeof(pw));
        /* an empty one is refused below, before asking again */
        if (n > 0) {
            long m = read_tty("Again: ", again, sizeof(again));

            if (m != n || memcmp(pw, again, (size_t)n) != 0) {
                fprintf(stderr, "%s: the passwords differ\n", prog);
                goto out;
            }
        }
    } else {
        n = read_line(STDIN_FILENO, pw, sizeof(pw));
    }
    if (n == -1) {
        fprintf(stderr, "%s: reading the password: %s\n", prog,
                strerror(errno));
        goto out;
    }
    if (n == -2) {
        fprintf(stderr, "%s: the password is longer than %d bytes\n", prog,
                PW_MAX);
        goto out;
    }
    if (n <= 0) {
        fprintf(stderr, "%s: no password given (an empty password is "
                "refused, as Kafka refuses it)\n", prog);
        goto out;
    }
    if (memchr(pw, '\0', (size_t)n) != NULL) {
        fprintf(stderr, "%s: NUL byte in the password (PLAIN could not "
                "send it)\n", prog);
        goto out;
    }
    if (!kr_scram_cred_make(&cred, h, (const uint8_t *)pw, (size_t)n,
                            (uint32_t)iterations, &why)) {
        fprintf(stderr, "%s: %s\n", prog, why);
        goto out;
    }
    cred_text = kr_scram_cred_format(&cred);
    if (cred_text == NULL ||
        asprintf(&line, "%s %s %s\n", user, kr_scram_mech_name(h),
                 cred_text) < 0) {
        line = NULL;
        fprintf(stderr, "%s: out of memory\n", prog);
        goto out;
    }
    /* the line must load, and its credential take the password */
    check = kr_sasl_users_load_text(line, strlen(line), "(output)", err,
                                    sizeof(err));
    if (check == NULL || check->n != 1 ||
        kr_scram_check_password(&check->v[0].cred, (const uint8_t *)pw,
                                (size_t)n) != KR_SCRAM_OK) {
        fprintf(stderr, "%s: internal error: the line made does not check: "
                "%s\n", prog, check == NULL ? err : "password refused");
        kr_sasl_users_free(check);
        goto out;
    }
    kr_sasl_users_free(check);
    if (fputs(line, stdout) == EOF || fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing the line: %s\n", prog,
                strerror(errno));
        goto out;
    }
    rc = 0;
out:
    OPENSSL_cleanse(pw, sizeof(pw));
    OPENSSL_cleanse(again, sizeof(again));
    kr_scram_cred_wipe(&cred);
    if (cred_text != NULL) {
        OPENSSL_cleanse(cred_text, strlen(cred_text));
        free(cred_text);
    }
    if (line != NULL) {
        OPENSSL_cleanse(line, strlen(line));
        free(line);
    }
    return rc;
}
