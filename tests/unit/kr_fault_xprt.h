/*
 * kr_fault_xprt.h - a fault-injecting transport for the session tests: a
 * struct kr_conn_ops over plain TCP that, driven by a seeded PRNG, does
 * what a record layer (TLS) does to its caller, so every path of the
 * kr_conn seam runs in check_session before a real TLS transport exists:
 *
 *   - short reads and writes (one byte, or a random size);
 *   - "again" (EAGAIN) with nothing done, and again asking for the
 *     opposite event: a read that wants the socket writable (it took the
 *     socket's bytes but gives them only when called again after a write
 *     event), a write that wants it readable (only when the socket has
 *     something to read, or the wait could never end);
 *   - bytes held inside the transport (pending): a read takes more from
 *     the socket than it returns; the rest is readable without a socket
 *     event, as decrypted bytes inside OpenSSL are;
 *   - a handshake of a few steps, each waiting for writability (or for
 *     readability when the socket has bytes).
 *
 * splice is off (a record layer).  Every fault taken is counted in
 * kr_fault_stats, so a test can check each path ran.  Test code only:
 * one process, one thread, no locking.
 */
#ifndef KR_FAULT_XPRT_H
#define KR_FAULT_XPRT_H

#include <stdint.h>

#include "kr_conn.h"

/*
 * How often each fault is taken, in per mille of the calls where it
 * applies (drawn in this order; what is left is a plain call).
 * hs_steps: handshake steps before it is done (0: done at the first);
 * hs_want_read: how often a step waits for readability when the socket
 * has bytes (else for writability).
 */
struct kr_fault_conf {
    uint64_t seed;
    unsigned read_again;                /* EAGAIN, nothing read */
    unsigned read_want_write;           /* take the bytes, EAGAIN + want
                                           write; give them next time */
    unsigned read_one;                  /* a 1-byte read */
    unsigned read_short;                /* a read of a random size */
    unsigned read_hold;                 /* read all, return a part: the
                                           rest is pending */
    unsigned read_gulp;                 /* take all the socket has, return
                                           at most gulp_max (a record) */
    size_t gulp_max;                    /* the most a read returns of
                                           what the transport holds (a
                                           record); 0: no limit (a gulp:
                                           16384) */
    unsigned write_want_read;           /* EAGAIN + want read, of the
                                           writes that find the socket
                                           readable (drawn first) */
    unsigned write_again;               /* EAGAIN, nothing written */
    unsigned write_one;                 /* 1 byte written */
    unsigned write_short;               /* a random part written */
    unsigned hs_steps;
    unsigned hs_want_read;
};

/* What was taken, summed over every connection since kr_fault_setup. */
struct kr_fault_stats {
    uint64_t conns;                     /* opened */
    uint64_t reads, read_again, read_want_write, read_one, read_short,
             read_hold, read_gulp;
    uint64_t read_pending;              /* reads served from held bytes */
    uint64_t read_pending_quiet;        /* ... while the socket had nothing
                                           to read: only kr_conn_kick (or a
                                           write event the read asked for)
                                           can have called them */
    uint64_t read_after_want_write;     /* reads retried after want write */
    uint64_t writes, write_again, write_want_read, write_one, write_short;
    uint64_t hs_steps, hs_want_read, hs_want_write, hs_done;
    uint64_t misuse;                    /* a read during the handshake, a
                                           write before it was done: the
                                           stages were not kept */
};

extern struct kr_fault_stats kr_fault_stats;

/* The transport: a worker's sessions use it when it is their
   kr_session_host.conn_ops. */
extern const struct kr_conn_ops kr_fault_ops;

/* Use conf (copied) for connections opened from now on; zero the stats. */
void kr_fault_setup(const struct kr_fault_conf *conf);

#endif /* KR_FAULT_XPRT_H */
