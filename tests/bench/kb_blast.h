/*
 * kb_blast.h - what krbench.c and kb_blast.c give each other.
 *
 * kb_blast.c holds two modes of krbench (tests/bench/krbench.c's main()
 * dispatches to them): "blast", a load generator cheaper per request than
 * any proxy (prebuilt Produce frames over many connections, optionally
 * TLS), and "canned", a scripted upstream that answers every Produce
 * with a prebuilt response.  Together they make a workload in which the
 * proxy between them is the bottleneck (contrib/bench/README.md,
 * "blast").  krbench.c gives them its small helpers below, defined there.
 */
#ifndef KB_BLAST_H
#define KB_BLAST_H

#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

#include <openssl/ssl.h>

/* ---- kb_blast.c ---- */

/* krbench blast ARGS... / krbench canned ARGS... (argv[0] is the mode):
   the process's exit status (0 ok, 1 failed, 2 usage). */
int kb_blast(int argc, char **argv);
int kb_canned(int argc, char **argv);

/* ---- krbench.c's helpers ---- */

/* -C PID,...: at most this many peers; a snapshot of them
   (kb_peers_snap) has KB_PEER_SNAP doubles */
#define KB_MAX_PEERS 12
#define KB_PEER_SNAP (2 * KB_MAX_PEERS + 1)

/* "krbench: MESSAGE" on stderr, exit 1. */
void kb_die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                  noreturn));
/* CLOCK_MONOTONIC in nanoseconds. */
int64_t kb_now_ns(void);
/* This process's kernel, and user + kernel, CPU seconds (getrusage). */
double kb_sys_s(void);
double kb_cpu_s(void);
/* A number in [min, max] or kb_die naming what. */
long kb_parse_long(const char *s, long min, long max, const char *what);
double kb_parse_double(const char *s, double min, double max,
                       const char *what);
/* "IPv4:PORT" into sin or kb_die. */
void kb_parse_addr(const char *s, struct sockaddr_in *sin);
/* "IPv4:PORT,..." into addrs (at most max, else kb_die); the count. */
int kb_parse_addrs(const char *s, struct sockaddr_in *addrs, int max);
/* Raise RLIMIT_NOFILE to want (or the hard limit). */
void kb_raise_nofile(rlim_t want);
int kb_set_nonblock(int fd);
/* -C PID,...: the peers whose CPU is read at the window's edges;
   out[] has KB_PEER_SNAP doubles: each peer's CPU seconds, the
   machine's busy seconds, each peer's seconds spent runnable but
   waiting for a CPU (schedstat); kb_peers_print writes
   ,"peer_cpu_window_s":[...],"system_cpu_window_s":S,
   "peer_wait_window_s":[...] from two snapshots. */
void kb_parse_peers(const char *s);
void kb_peers_snap(double *out);
void kb_peers_print(const double *a, const double *b);
/* The TLS clients' context (TLS 1.3, TLS_AES_128_GCM_SHA256, X25519,
   the peer checked against CAFILE; no session resumed); an SSL over fd
   checking the peer for sin's IP; OpenSSL's last error as text. */
SSL_CTX *kb_tls_ctx(const char *ca);
SSL *kb_tls_new(SSL_CTX *ctx, int fd, const struct sockaddr_in *sin);
const char *kb_tls_err(char *buf, size_t len);

#endif /* KB_BLAST_H */
