/*
 * kr_sasl_client.h - krelay as a SASL client of a broker (origination,
 * issue 9): the requests that authenticate one connection, fed the
 * broker's answers, as a state machine.  No libevent, no session, no
 * socket: the caller sends each request and hands back its response
 * (the session on a client's upstream connection with its own requests,
 * KR_INF_INTERNAL; kr_upstream on its metadata connections).
 *
 * The exchange (KIP-43, KIP-152, KIP-368):
 *   [ApiVersions v0]         only when the caller does not know the
 *                            broker's SaslAuthenticate versions
 *   SaslHandshake v1         Mechanism; ErrorCode 33 names the broker's
 *                            enabled mechanisms
 *   SaslAuthenticate v0-2    the mechanism's tokens in AuthBytes: the
 *                            highest version both sides know (v1+ gives
 *                            SessionLifetimeMs, KIP-368)
 * Mechanisms: PLAIN (RFC 4616: one round), SCRAM-SHA-256/512 (RFC 5802,
 * 7677: two rounds, the server's signature verified; the SCRAM
 * computations are kr_scram's), OAUTHBEARER (RFC 7628 client initial
 * response "n,,\x01auth=Bearer TOKEN\x01\x01"; an error challenge is
 * answered "\x01" as RFC 7628 3.2.3 says, then the broker fails it).
 * Re-authentication is a new kr_sasl_client on the same connection.
 * Requests are built by the generic codec (ClientId "krelay"), responses
 * decoded by it.
 *
 * Secrets: the password (copied) and the token are wiped
 * (OPENSSL_cleanse) when the client is freed; request frames, which
 * carry them, are wiped when replaced or freed.  No message this module
 * gives holds a secret: only outcome words and the broker's ErrorMessage
 * (printable ASCII, cut at 200 bytes).
 */
#ifndef KR_SASL_CLIENT_H
#define KR_SASL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_scram.h"

/* The mechanisms krelay authenticates with (the order of the config's
   sasl_mechanism choices: 0 is none). */
enum kr_sasl_mechanism {
    KR_SASL_MECH_NONE = 0,
    KR_SASL_MECH_PLAIN,
    KR_SASL_MECH_SCRAM_SHA_256,
    KR_SASL_MECH_SCRAM_SHA_512,
    KR_SASL_MECH_OAUTHBEARER
};

/* "PLAIN", "SCRAM-SHA-256"... as in SaslHandshake; "none" for NONE and
   out-of-range values. */
const char *kr_sasl_mechanism_name(enum kr_sasl_mechanism m);

/* What to authenticate with; every pointer is borrowed for
   kr_sasl_client_new only (the client copies what it keeps). */
struct kr_sasl_client_creds {
    enum kr_sasl_mechanism mechanism;
    const char *username;               /* PLAIN, SCRAM: not empty */
    const char *password;               /* PLAIN, SCRAM */
    size_t password_len;
    const char *token_file;             /* OAUTHBEARER: its first line is
                                           the token, read by
                                           kr_sasl_client_new (so each
                                           (re)authentication reads it) */
    const char *token;                  /* OAUTHBEARER without token_file */
    kr_scram_nonce_fn scram_nonce_fn;   /* SCRAM's client nonce (tests:
                                           RFC 7677's); NULL: random */
    void *scram_nonce_arg;
};

/* Where the exchange is after a step. */
enum kr_sasl_client_outcome {
    KR_SASL_CLIENT_SEND = 0,            /* a request waits:
                                           kr_sasl_client_request; feed
                                           its response */
    KR_SASL_CLIENT_DONE,                /* authenticated:
                                           kr_sasl_client_lifetime_ms */
    KR_SASL_CLIENT_UNSUPPORTED_MECHANISM, /* the broker does not enable
                                           the mechanism (message: the
                                           ones it enables) */
    KR_SASL_CLIENT_AUTH_FAILED,         /* the broker refused the
                                           credentials (message: its
                                           ErrorMessage) */
    KR_SASL_CLIENT_PROTOCOL_ERROR,      /* an answer krelay cannot go on
                                           with: undecodable, another
                                           error code, a broker without
                                           SaslHandshake v1 or
                                           SaslAuthenticate, a SCRAM
                                           server whose signature does
                                           not verify */
    KR_SASL_CLIENT_CREDENTIALS,         /* krelay's own credentials are
                                           unusable (a token file that
                                           cannot be read, or is empty) */
    KR_SASL_CLIENT_ENOMEM
};

/* "authentication failed", "unsupported mechanism"... for log lines. */
const char *kr_sasl_client_outcome_str(enum kr_sasl_client_outcome o);

/* A request to send: the frame without its size prefix (owned by the
   client, valid until the next step or free), and its header's keys. */
struct kr_sasl_client_req {
    const uint8_t *frame;
    size_t len;
    int16_t api_key;
    int16_t api_version;
    int32_t correlation_id;
};

struct kr_sasl_client;

/*
 * A client for one exchange.  auth_max: the broker's SaslAuthenticate
 * MaxVersion when the caller knows it (its ApiVersions answer), -1 to
 * have the exchange start with ApiVersions v0.  first_corr: the
 * CorrelationId of its first request (then +1 each).  With OAUTHBEARER
 * the token (file) is read now.  Returns NULL on ENOMEM only; a failure
 * (an unreadable token file) is the outcome of kr_sasl_client_start.
 */
struct kr_sasl_client *kr_sasl_client_new(
    const struct kr_sasl_client_creds *creds, int16_t auth_max,
    int32_t first_corr);

/* The first request (SEND), or the failure found before any (CREDENTIALS,
   ENOMEM). */
enum kr_sasl_client_outcome kr_sasl_client_start(struct kr_sasl_client *c);

/* The request to send after SEND. */
const struct kr_sasl_client_req *kr_sasl_client_request(
    const struct kr_sasl_client *c);

/*
 * The response to the last request: payload is the whole frame without
 * its size prefix (len bytes, borrowed).  Returns SEND (the next
 * request), DONE, or a failure (final: the client takes nothing more).
 */
enum kr_sasl_client_outcome kr_sasl_client_feed(struct kr_sasl_client *c,
                                                const uint8_t *payload,
                                                size_t len);

/* After a failure: what happened, safe to log (no secret); "" before. */
const char *kr_sasl_client_message(const struct kr_sasl_client *c);

/* After DONE: the broker's SessionLifetimeMs (0: none given, or
   SaslAuthenticate v0). */
int64_t kr_sasl_client_lifetime_ms(const struct kr_sasl_client *c);

/* The SaslAuthenticate version used (-1 before it is chosen). */
int16_t kr_sasl_client_auth_version(const struct kr_sasl_client *c);

/* Free c, its secrets wiped.  NULL is a no-op. */
void kr_sasl_client_free(struct kr_sasl_client *c);

/*
 * When to re-authenticate (KIP-368, as Kafka clients do): a point drawn
 * from [85 %, 95 %] of lifetime_ms with r (any 64-bit random value).
 * 0 when lifetime_ms <= 0 (no re-authentication).
 */
int64_t kr_sasl_client_reauth_after_ms(int64_t lifetime_ms, uint64_t r);

#endif /* KR_SASL_CLIENT_H */
