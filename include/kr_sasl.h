/*
 * kr_sasl.h - what krelay follows of a client's SASL exchange
 * (passthrough): the mechanism a SaslHandshake named, and after a
 * SaslHandshake v0 how many raw token frames (no Kafka header, KIP-43)
 * the client still sends before Kafka requests resume.
 *
 * SaslHandshake v1+ is followed by SaslAuthenticate requests, ordinary
 * Kafka frames: nothing to count.  After v0 the tokens are raw
 * size-prefixed frames each answered by one raw frame: PLAIN is one round
 * trip (RFC 4616), SCRAM-SHA-256/512 two (RFC 5802: client-first and
 * client-final); for any other mechanism krelay cannot tell where the
 * exchange ends, so the session refuses such a v0 handshake
 * (UNSUPPORTED_SASL_MECHANISM) rather than pass the rest of the
 * connection unparsed.
 * Termination and origination (krelay as the SASL server or client)
 * build on this module.
 *
 * Passthrough (issue 9): the exchange as a state machine the session
 * feeds with what it sees (kr_sasl_on_handshake, kr_sasl_on_token for
 * each client token, kr_sasl_on_answer for each broker answer): the
 * authentication's outcome (enum kr_sasl_auth) and the principal the
 * first token claims (enum kr_sasl_pstate; its parse is kr_sasl_token.h)
 * -- claimed until the broker answers success, verified after, unknown
 * where the mechanism hides it.  Where an exchange ends: PLAIN after one
 * successful token, SCRAM-SHA-256/512 once the server-final message
 * ("v=") came, OAUTHBEARER on an empty successful answer (a non-empty one
 * is the error challenge RFC 7628 section 3.2.2 sends before the
 * failure); for other mechanisms (GSSAPI) krelay cannot tell: the session
 * decides once the client goes on with other requests
 * (kr_sasl_assume_done).  KIP-368 re-authentication must keep the
 * mechanism and the principal.  No libevent, no session, no I/O, no
 * logging: secrets never leave the caller's buffers.
 */
#ifndef KR_SASL_H
#define KR_SASL_H

#include <stdbool.h>
#include <stdint.h>

struct kr_msg;

/* The mechanism of the last SaslHandshake, as far as krelay cares. */
enum kr_sasl_mech {
    KR_SASL_NONE = 0,                   /* no handshake seen */
    KR_SASL_PLAIN,                      /* one raw round trip */
    KR_SASL_SCRAM,                      /* two raw round trips */
    KR_SASL_OTHER                       /* raw tokens uncounted: refused
                                           over SaslHandshake v0 */
};

/* Bytes of a mechanism name kept (Kafka's are at most 20: SCRAM-SHA-512). */
#define KR_SASL_MECH_NAME_MAX 63

/* The authentication as far as krelay can tell (audit: "outcome"). */
enum kr_sasl_auth {
    KR_SASL_AUTH_NONE = 0,              /* no SaslHandshake forwarded */
    KR_SASL_AUTH_STARTED,               /* an exchange is under way (its
                                           SaslHandshake was forwarded) */
    KR_SASL_AUTH_SUCCEEDED,             /* the broker answered its end
                                           with success */
    KR_SASL_AUTH_FAILED                 /* the broker (or krelay, for a
                                           step it answered itself)
                                           answered an error */
};

/* What krelay knows of the principal (audit: "principal_state"). */
enum kr_sasl_pstate {
    KR_SASL_PS_NONE = 0,                /* no token seen */
    KR_SASL_PS_CLAIMED,                 /* the first token names it; the
                                           broker has not answered success
                                           yet: rules never see it */
    KR_SASL_PS_VERIFIED,                /* the broker answered success */
    KR_SASL_PS_UNKNOWN                  /* the mechanism hides it (GSSAPI,
                                           others, SCRAM tokenauth), or the
                                           token does not parse: rules
                                           naming principals fail closed */
};

/* What a client step means for the connection (kr_sasl_on_*). */
enum kr_sasl_step {
    KR_SASL_STEP_OK = 0,                /* forward it */
    KR_SASL_STEP_MECH_CHANGED,          /* re-authentication (KIP-368)
                                           names another mechanism: close
                                           the connection, as brokers do */
    KR_SASL_STEP_PRINCIPAL_CHANGED,     /* re-authentication claims
                                           another principal (or one krelay
                                           cannot compare): close */
    KR_SASL_STEP_ENOMEM
};

/* Which of the broker's answers (kr_sasl_on_answer). */
enum kr_sasl_frame {
    KR_SASL_F_HANDSHAKE = 0,            /* SaslHandshake response */
    KR_SASL_F_AUTHENTICATE,             /* SaslAuthenticate response */
    KR_SASL_F_RAW                       /* a raw token after SaslHandshake
                                           v0 (no ErrorCode) */
};

/* What a broker's answer means. */
enum kr_sasl_answer {
    KR_SASL_ANS_CONTINUE = 0,           /* a step succeeded, the exchange
                                           goes on (or, for a mechanism
                                           whose end krelay cannot see,
                                           may be over) */
    KR_SASL_ANS_SUCCESS,                /* authenticated: the exchange's
                                           end, with success */
    KR_SASL_ANS_FAILURE                 /* refused: the broker closes */
};

/*
 * SASL state of one client connection.  Zero-initialised: none (then
 * nothing to free).  The *_version, session_lifetime_ms and error_code
 * fields mean something once auth is not KR_SASL_AUTH_NONE.
 */
struct kr_sasl {
    enum kr_sasl_mech mech;             /* from the SaslHandshake request */
    uint32_t tokens;                    /* raw client tokens still to come */
    /* passthrough (issue 9) */
    enum kr_sasl_auth auth;             /* the last exchange's state */
    enum kr_sasl_pstate pstate;
    char mech_name[KR_SASL_MECH_NAME_MAX + 1]; /* the mechanism the last
                                           handshake named, bytes outside
                                           printable ASCII as '?'; "" none */
    char *principal;                    /* "User:NAME" when pstate is
                                           CLAIMED or VERIFIED (malloc'd),
                                           else NULL */
    const char *why;                    /* pstate UNKNOWN from a token that
                                           does not parse: why (static,
                                           never wire bytes); else NULL */
    uint32_t inflight;                  /* SASL requests (SaslHandshake,
                                           SaslAuthenticate, raw tokens)
                                           forwarded and not answered yet:
                                           the session counts them */
    uint32_t rounds;                    /* successful answers to this
                                           exchange's tokens */
    bool token_seen;                    /* this exchange's first token */
    bool authenticated;                 /* some exchange succeeded on this
                                           connection */
    bool reauth;                        /* this exchange follows one that
                                           succeeded (KIP-368) */
    int16_t handshake_version;          /* its SaslHandshake's ApiVersion */
    int16_t authenticate_version;       /* its last SaslAuthenticate's, -1:
                                           none (raw tokens) */
    int64_t session_lifetime_ms;        /* SaslAuthenticate v1+'s
                                           SessionLifetimeMs of the
                                           success, ms (0: none); -1: not
                                           given (v0, raw tokens) */
    const char *reason;                 /* termination: why krelay refused
                                           (kr_sasl_srv_reason_name, static;
                                           the audit line's "reason"), NULL:
                                           none or not krelay's decision */
    int16_t error_code;                 /* the failing answer's ErrorCode;
                                           -1: none given (raw tokens,
                                           krelay's own answer) */
    int64_t started_ms;                 /* monotonic ms of its handshake */
};

/*
 * The mechanism named by len bytes at p (a SaslHandshake Mechanism):
 * PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 exactly (case matters, as in
 * Kafka), else KR_SASL_OTHER.
 */
enum kr_sasl_mech kr_sasl_mech_of(const uint8_t *p, int32_t len);

/*
 * Remember the Mechanism of a decoded SaslHandshake request m (null or
 * absent: KR_SASL_OTHER) in sa->mech and return it.  *name and *namelen
 * (both may be NULL) get the name's bytes inside m (borrowed; p may be
 * NULL when the length is 0), or NULL and -1 when it is null or absent.
 */
enum kr_sasl_mech kr_sasl_note_handshake(struct kr_sasl *sa,
                                         const struct kr_msg *m,
                                         const uint8_t **name,
                                         int32_t *namelen);

/*
 * A SaslHandshake v0 was answered with ErrorCode 0: raw tokens follow.
 * Sets sa->tokens for the mechanism and returns true; false for a
 * mechanism without a known token count (KR_SASL_OTHER, KR_SASL_NONE:
 * such a handshake is never forwarded, so the caller closes).
 */
bool kr_sasl_start_raw(struct kr_sasl *sa);

/* ---- passthrough (issue 9) -------------------------------------------- */

/*
 * A SaslHandshake request (version ver) naming mechanism name (len bytes,
 * -1: null) is forwarded at now_ms (monotonic): a new exchange starts,
 * a re-authentication when one succeeded before (then the mechanism must
 * be the one of the first exchange: else KR_SASL_STEP_MECH_CHANGED, the
 * state untouched).  Call after kr_sasl_note_handshake.
 */
enum kr_sasl_step kr_sasl_on_handshake(struct kr_sasl *sa,
                                       const uint8_t *name, int32_t len,
                                       int16_t ver, int64_t now_ms);

/*
 * The SaslHandshake kr_sasl_on_handshake saw was answered by krelay
 * itself (refused or denied by a rule), never reaching the broker: the
 * state goes back to what it was (no exchange, or the one that
 * succeeded).
 */
void kr_sasl_handshake_unsent(struct kr_sasl *sa);

/*
 * A client token (len bytes at tok: SaslAuthenticate AuthBytes of
 * version authenticate_version, or -1 for a raw token after
 * SaslHandshake v0) is forwarded.  The exchange's first one gives the
 * principal (kr_sasl_client_principal; oauth_claim: the OAUTHBEARER
 * claim, NULL: "sub"): CLAIMED, or UNKNOWN (sa->why says why when the
 * token does not parse).  On a re-authentication the claim must be the
 * verified principal: else KR_SASL_STEP_PRINCIPAL_CHANGED (two unknown
 * ones count as the same).  tok is only read: the caller wipes it.
 */
enum kr_sasl_step kr_sasl_on_token(struct kr_sasl *sa,
                                   int16_t authenticate_version,
                                   const uint8_t *tok, size_t len,
                                   const char *oauth_claim);

/*
 * The broker answered a step: f says which; error_code its ErrorCode
 * (ignored for KR_SASL_F_RAW); bytes/len its AuthBytes or raw token
 * (may be NULL when len is 0; only their first two bytes are read);
 * lifetime_ms its SessionLifetimeMs (-1: the version has none).  Moves
 * the exchange on (auth, pstate, rounds) and says what it means.
 */
enum kr_sasl_answer kr_sasl_on_answer(struct kr_sasl *sa,
                                      enum kr_sasl_frame f,
                                      int16_t error_code,
                                      const uint8_t *bytes, size_t len,
                                      int64_t lifetime_ms);

/* krelay answered a SASL step itself (a rule denied it): failure. */
void kr_sasl_on_local_answer(struct kr_sasl *sa);

/*
 * Does krelay see where this exchange's mechanism ends (PLAIN, SCRAM,
 * OAUTHBEARER)?  For the others an exchange whose every answer so far was
 * a success may be over: the session assumes so once the client sends
 * another request with nothing in flight (kr_sasl_assume_done: success,
 * principal still unknown).  kr_sasl_assume_done returns false when the
 * exchange had no successful token answer yet.
 */
bool kr_sasl_end_visible(const struct kr_sasl *sa);
bool kr_sasl_assume_done(struct kr_sasl *sa);

/* Names for log and audit lines: "success", "claimed"... */
const char *kr_sasl_auth_name(enum kr_sasl_auth a);
const char *kr_sasl_pstate_name(enum kr_sasl_pstate p);

/* Free what sa holds (principals); sa is zeroed (none). */
void kr_sasl_free(struct kr_sasl *sa);

#endif /* KR_SASL_H */
