/*
 * kr_sasl_server.h - SASL termination (issue 9): krelay authenticates a
 * client itself, as a Kafka broker's SaslServerAuthenticator does, with
 * PLAIN and SCRAM-SHA-256/512 checked against the credentials file
 * (kr_sasl_users).  No libevent, no session, no I/O, no log: the caller
 * (the session) hands in decoded SaslHandshake v0-1 and SaslAuthenticate
 * v0-2 requests (struct kr_msg from the generic codec) or the raw tokens
 * that follow a SaslHandshake v0 (KIP-43), and gets back a named outcome
 * with the response to send: a kr_msg built through the codec (encode it
 * with kr_encode_msg) or raw token bytes (to send with a 4-byte size).
 *
 * What a broker does, and so krelay (Kafka 4.x SaslServerAuthenticator,
 * KafkaApis, SocketServer; KIP-43, KIP-152, KIP-368):
 *   - before authentication only ApiVersions (before the handshake) and
 *     SaslHandshake / SaslAuthenticate are allowed (kr_sasl_srv_gate);
 *   - SaslHandshake naming a mechanism that is not enabled:
 *     UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, then close;
 *   - a failed SaslAuthenticate: SASL_AUTHENTICATION_FAILED (58) with an
 *     ErrorMessage (every version has the field), then close; a failed
 *     raw token: close with no answer;
 *   - SessionLifetimeMs (SaslAuthenticate v1+) from the listener's
 *     sasl_session_lifetime_ms; once it has run out the next request must
 *     be a SaslHandshake that starts re-authentication, else close (a
 *     client that never used SaslAuthenticate v1+ cannot re-authenticate:
 *     it is closed then, as a broker closes it); re-authentication keeps
 *     the mechanism and the principal;
 *   - SaslHandshake or SaslAuthenticate after authentication by a client
 *     that cannot re-authenticate: ILLEGAL_SASL_STATE (34), connection
 *     kept (KafkaApis answers them so).
 *
 * Failed credentials (wrong password, unknown user, a proof that does not
 * verify) all get one message, Kafka's: "Authentication failed during
 * authentication due to invalid credentials with SASL mechanism M".  An
 * unknown user costs what a known one does: PLAIN checks the password
 * against a fake credential (one PBKDF2), SCRAM answers with a mock
 * server-first (kr_scram's mock, salt from a per-configuration secret)
 * and fails on the proof as for a wrong password.
 *
 * Logins (each first token: a PLAIN token or a SCRAM client-first) are
 * rate limited per client address (struct kr_sasl_rate, a token bucket
 * per address in a bounded table) before any PBKDF2 is spent.
 *
 * Secrets: a PLAIN token's bytes (the password) are wiped in place
 * (OPENSSL_cleanse) once checked: the caller's frame bytes are written
 * to; a copy the caller made elsewhere is the caller's to wipe.  SCRAM
 * state is wiped by kr_scram.  Nothing this module returns holds a
 * secret: why strings are static, user names are names.
 */
#ifndef KR_SASL_SERVER_H
#define KR_SASL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_arena.h"
#include "kr_scram.h"

struct kr_msg;
struct kr_sasl_users;

/* The mechanisms krelay terminates. */
enum kr_sasl_srv_mech {
    KR_SASL_SRV_PLAIN = 0,
    KR_SASL_SRV_SCRAM_SHA_256,
    KR_SASL_SRV_SCRAM_SHA_512,
    KR_SASL_SRV_NMECH
};

/* "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" (static); "?" out of range. */
const char *kr_sasl_srv_mech_name(enum kr_sasl_srv_mech m);

/*
 * A mechanism list "PLAIN,SCRAM-SHA-256" (names exact, as Kafka's
 * sasl.enabled.mechanisms; blanks around commas allowed) into order[]
 * (at most KR_SASL_SRV_NMECH entries, each once) and *n.  False with
 * why (wlen bytes, NUL-terminated) for an empty list or name, an
 * unknown or repeated name (the name in it; OAUTHBEARER and GSSAPI
 * said to be mechanisms krelay does not terminate).
 */
bool kr_sasl_srv_mechs_parse(const char *list,
                             enum kr_sasl_srv_mech order[KR_SASL_SRV_NMECH],
                             unsigned *n, char *why, size_t wlen);

/* ---- login rate per client address ------------------------------------- */

/*
 * Token buckets keyed by client address: each address may log in
 * `burst` times at once, then `per_sec` times a second.  A bounded
 * table: KR_SASL_RATE_SETS sets of KR_SASL_RATE_WAYS entries (4096),
 * the set chosen by a keyed hash (SipHash-like mixing with a random key
 * from RAND_bytes, so a client cannot aim at another's set); when a set
 * is full the entry whose bucket is fullest now is replaced (it loses
 * the least: a full bucket is what a new entry starts with).  Thread
 * safe (a mutex): one table serves a listener on every worker.
 */
#define KR_SASL_RATE_SETS 1024
#define KR_SASL_RATE_WAYS 4
#define KR_SASL_RATE_KEY_MAX 16             /* an IPv6 address */

struct kr_sasl_rate;

/* A table; per_sec > 0 and burst >= 1.  NULL on ENOMEM. */
struct kr_sasl_rate *kr_sasl_rate_new(double per_sec, unsigned burst);

/*
 * One login by the address key (keylen bytes, at most
 * KR_SASL_RATE_KEY_MAX: cut beyond) at now_ms (a monotonic clock):
 * true when its bucket had a token (taken), false when over the limit.
 */
bool kr_sasl_rate_take(struct kr_sasl_rate *r, const void *key,
                       size_t keylen, int64_t now_ms);

void kr_sasl_rate_free(struct kr_sasl_rate *r);

struct sockaddr;

/*
 * The rate key of a client address sa into out (at most 16 bytes); its
 * length, 0 for a family without one.  IPv4: the 4 bytes; IPv6: the /64
 * (8 bytes: one host's share, so a client cannot take a fresh budget by
 * changing its interface identifier); an IPv4-mapped IPv6 address (an
 * IPv4 client on a dual-stack listener): its IPv4 address, as on an IPv4
 * listener.
 */
size_t kr_sasl_rate_key(const struct sockaddr *sa, uint8_t out[16]);

/* ---- a listener's termination settings ---------------------------------- */

/*
 * The clock the session lifetime starts from, in monotonic ms (the
 * now_ms callers pass; arg: the cfg's clock_arg).  Read when a login
 * completes, after its password check: Kafka's SaslServerAuthenticator
 * starts the lifetime at authenticationEndNanos, read once the
 * SaslServer is complete, so a slow PBKDF2 does not eat into it.
 */
typedef int64_t (*kr_sasl_srv_clock_fn)(void *arg);

/*
 * What one [listener] with sasl = terminate authenticates with, built
 * once per configuration generation and shared read-only by its
 * sessions (the rate table inside is locked).  Owns users and rate.
 */
struct kr_sasl_srv_cfg {
    enum kr_sasl_srv_mech order[KR_SASL_SRV_NMECH]; /* enabled, in order */
    unsigned nmech;
    struct kr_sasl_users *users;        /* owned */
    int64_t session_lifetime_ms;        /* 0: no re-authentication */
    struct kr_sasl_rate *rate;          /* owned; NULL: no limit */
    uint8_t mock_key[32];               /* unknown SCRAM users' salts */
    uint32_t mock_iter[2];              /* unknown SCRAM users' i= and */
    size_t mock_salt_len[2];            /* salt length, by kr_scram_hash:
                                           the users' first entry's */
    struct kr_scram_cred plain_mock;    /* unknown PLAIN users' check */
    kr_scram_nonce_fn nonce_fn;         /* NULL: random (tests: fixed) */
    void *nonce_arg;
    kr_sasl_srv_clock_fn clock_fn;      /* read when a login completes:
                                           kr_clock_timer_ms (tests:
                                           injected) */
    void *clock_arg;
};

/*
 * Settings for mechanisms order[0..n), the users (taken: freed with the
 * result, also on failure), a lifetime in ms (>= 0), per_sec logins a
 * second per address with burst (per_sec 0: no limit).  The mock key is
 * random; an unknown SCRAM user's server-first has the iterations and
 * salt length of the users' first entry for that hash (else of their
 * first entry; else krelay-passwd's); the fake PLAIN credential has the iterations of the users'
 * first entry (KR_SCRAM_ITER_DEFAULT with none), one PBKDF2 now.  The
 * clock is kr_clock_timer_ms (the session's; a test may replace it).
 * NULL on ENOMEM or an OpenSSL failure.
 */
struct kr_sasl_srv_cfg *kr_sasl_srv_cfg_new(
    const enum kr_sasl_srv_mech *order, unsigned n,
    struct kr_sasl_users *users, int64_t session_lifetime_ms,
    double per_sec, unsigned burst);

/* Wipe and free c (NULL: nothing). */
void kr_sasl_srv_cfg_free(struct kr_sasl_srv_cfg *c);

/* ---- one client connection ---------------------------------------------- */

enum kr_sasl_srv_state {
    KR_SASL_SRV_ST_START = 0,   /* nothing yet: ApiVersions, handshake */
    KR_SASL_SRV_ST_HANDSHAKEN,  /* handshake answered: first token next */
    KR_SASL_SRV_ST_SCRAM_FIRST, /* server-first sent: client-final next */
    KR_SASL_SRV_ST_DONE,        /* authenticated */
    KR_SASL_SRV_ST_FAILED       /* refused: the connection closes */
};

/* One client's exchange (and re-exchanges).  kr_sasl_srv_init it. */
struct kr_sasl_srv {
    const struct kr_sasl_srv_cfg *cfg;  /* borrowed */
    enum kr_sasl_srv_state state;
    enum kr_sasl_srv_mech mech;         /* the handshake's */
    bool raw;                           /* SaslHandshake v0: raw tokens */
    bool reauth;                        /* this exchange re-authenticates */
    bool reauth_capable;                /* used SaslAuthenticate v1+ */
    bool authenticated;                 /* once, ever: principal valid */
    struct kr_scram_server scram;
    char *user;                         /* verified user (no "User:") */
    char *claimed;                      /* the exchange's claimed user */
    enum kr_sasl_srv_mech auth_mech;    /* mechanism of the verified user */
    int64_t expires_ms;                 /* 0: never; else the cfg's
                                           clock at the login's end +
                                           the lifetime */
    uint8_t addr[KR_SASL_RATE_KEY_MAX]; /* the client's address */
    size_t addr_len;
};

/*
 * Ready s for a client at address addr (addr_len bytes: 4 for IPv4, 16
 * for IPv6; 0 for none, e.g. a Unix socket: then no rate limit).
 */
void kr_sasl_srv_init(struct kr_sasl_srv *s, const struct kr_sasl_srv_cfg *cfg,
                      const void *addr, size_t addr_len);

/* Wipe and free what s holds. */
void kr_sasl_srv_free(struct kr_sasl_srv *s);

/* What to do with a frame before it is parsed further. */
enum kr_sasl_srv_gate {
    KR_SASL_SRV_PASS = 0,       /* an ordinary request: go on as usual */
    KR_SASL_SRV_MINE,           /* SaslHandshake or SaslAuthenticate:
                                   decode it, kr_sasl_srv_request */
    KR_SASL_SRV_RAW,            /* a raw token (after a v0 handshake):
                                   no Kafka header, kr_sasl_srv_raw */
    KR_SASL_SRV_UNAUTHENTICATED, /* close: a request before
                                   authentication (Kafka: "Unexpected
                                   Kafka request ... during SASL
                                   handshake") */
    KR_SASL_SRV_IN_EXCHANGE,    /* close: a request in the middle of an
                                   exchange */
    KR_SASL_SRV_EXPIRED         /* close: the session lifetime ran out
                                   and the request does not start
                                   re-authentication (KIP-368) */
};

/* The gate's name ("expired"...), static, for log lines. */
const char *kr_sasl_srv_gate_name(enum kr_sasl_srv_gate g);

/*
 * The gate for the next frame of the client, whose ApiKey is api_key
 * (ignored when a raw token is due), at now_ms.  Pure: changes nothing.
 */
enum kr_sasl_srv_gate kr_sasl_srv_gate(const struct kr_sasl_srv *s,
                                       int16_t api_key, int64_t now_ms);

/* What a step came to. */
enum kr_sasl_srv_outcome {
    KR_SASL_SRV_CONTINUE = 0,   /* send the response; more steps come */
    KR_SASL_SRV_AUTHENTICATED,  /* send the response: s->user verified
                                   (a re-authentication: the same) */
    KR_SASL_SRV_FAILED,         /* send the response if any, then close:
                                   credentials refused (why says how) */
    KR_SASL_SRV_MALFORMED,      /* send the response if any, then close:
                                   a token that does not parse */
    KR_SASL_SRV_RATE_LIMITED,   /* send the response (58, "too many
                                   logins") if any, then close: no
                                   PBKDF2 spent */
    KR_SASL_SRV_UNSUPPORTED_MECHANISM, /* send (33 + the enabled list),
                                   then close */
    KR_SASL_SRV_ILLEGAL_STATE,  /* send (34) if any; close when
                                   res->close */
    KR_SASL_SRV_NO_MEMORY       /* close, nothing to send */
};

/* The outcome's name ("failed"...), static, for log lines. */
const char *kr_sasl_srv_outcome_name(enum kr_sasl_srv_outcome o);

/*
 * Why a login was refused, for the audit line's "reason" (doc/audit.md)
 * and the log: the operator's to know.  The client is never told: its
 * answer is the same for every credentials failure (Kafka's message, the
 * same PBKDF2 cost for an unknown user as for a wrong password).
 */
enum kr_sasl_srv_reason {
    KR_SASL_SRV_R_NONE = 0,         /* not a refusal (or out of memory,
                                       an illegal state) */
    KR_SASL_SRV_R_BAD_PASSWORD,     /* the user's entry, a wrong password
                                       or proof */
    KR_SASL_SRV_R_UNKNOWN_USER,     /* no entry for the user */
    KR_SASL_SRV_R_NO_MECH_ENTRY,    /* SCRAM: the user has an entry, but
                                       not for this hash */
    KR_SASL_SRV_R_RATE_LIMITED,     /* sasl_login_rate */
    KR_SASL_SRV_R_AUTHZID_MISMATCH, /* PLAIN: an authorization id other
                                       than the user name */
    KR_SASL_SRV_R_MALFORMED,        /* a token that does not parse */
    KR_SASL_SRV_R_DELEGATION_TOKEN, /* SCRAM tokenauth: krelay has none */
    KR_SASL_SRV_R_MECHANISM_CHANGED, /* re-authentication, KIP-368 */
    KR_SASL_SRV_R_PRINCIPAL_CHANGED, /* re-authentication, KIP-368 */
    KR_SASL_SRV_R_UNSUPPORTED_MECHANISM /* not in sasl_mechanisms */
};

/* "bad_password"... (static, doc/audit.md's words); NULL for NONE. */
const char *kr_sasl_srv_reason_name(enum kr_sasl_srv_reason r);

/* The result of a step. */
struct kr_sasl_srv_result {
    enum kr_sasl_srv_outcome outcome;
    bool close;                 /* close once the response is sent */
    bool has_rsp;               /* rsp holds a response to encode */
    struct kr_msg *rsp;         /* the caller's kr_msg, filled: arena-
                                   owned, may borrow from the request */
    uint8_t *raw;               /* raw answer (malloc'd, caller frees;
                                   raw_len 0 and raw non-NULL: send an
                                   empty token); NULL: none */
    size_t raw_len;
    const char *why;            /* static, no secret: for the log line */
    enum kr_sasl_srv_reason reason; /* a refusal's (FAILED, MALFORMED,
                                   RATE_LIMITED, UNSUPPORTED_MECHANISM) */
    const char *user;           /* the user the exchange claimed, or
                                   NULL (borrowed from s: valid until the
                                   next step) */
    enum kr_sasl_srv_mech mech; /* the exchange's mechanism */
    int64_t session_lifetime_ms; /* on AUTHENTICATED: 0 none */
};

/*
 * A decoded SaslHandshake (v0-1) or SaslAuthenticate (v0-2) request req
 * (after kr_sasl_srv_gate said MINE) at now_ms (the login rate's time;
 * a login's lifetime starts at the cfg's clock once it completes).  The
 * response is built in arena into *rsp (res->rsp = rsp) with req's
 * CorrelationId and version.  A PLAIN token's bytes inside req are
 * wiped.  Another ApiKey gives ILLEGAL_STATE with close and no response.
 */
void kr_sasl_srv_request(struct kr_sasl_srv *s, struct kr_arena *arena,
                         const struct kr_msg *req, int64_t now_ms,
                         struct kr_msg *rsp, struct kr_sasl_srv_result *res);

/*
 * A raw token (len bytes at tok, its size prefix removed) after a v0
 * handshake (gate RAW) at now_ms (as kr_sasl_srv_request's).  The
 * answer is res->raw (PLAIN: an empty token; SCRAM: server-first, then
 * server-final); a failure has none (close).  A PLAIN token's bytes are
 * wiped (tok is written to).
 */
void kr_sasl_srv_raw(struct kr_sasl_srv *s, uint8_t *tok, size_t len,
                     int64_t now_ms, struct kr_sasl_srv_result *res);

/*
 * When the session runs out (monotonic ms, as now_ms), 0 for never:
 * for a timer that closes an idle expired connection, if the caller
 * wants one (a broker closes only on the next request).
 */
int64_t kr_sasl_srv_expires_ms(const struct kr_sasl_srv *s);

#endif /* KR_SASL_SERVER_H */
