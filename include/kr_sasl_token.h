/*
 * kr_sasl_token.h - what a SASL client sends, parsed: the principal its
 * first token claims (passthrough), and the pieces termination needs
 * (PLAIN split, SCRAM client-first and client-final fields), with the
 * strict base64 both use.  No libevent, no session, no I/O.
 *
 * Sources: RFC 4616 (PLAIN), RFC 5802 (SCRAM), RFC 7628 (OAUTHBEARER),
 * RFC 7515 (JWS compact form), and Kafka's own parsers, whose choices
 * win where they are stricter than the RFCs: PlainSaslServer (exactly
 * three NUL-separated parts, authzid empty or equal to authcid),
 * ScramMessages (gs2 header "n" only, ASCII names, reserved "m=" not
 * honoured), ScramExtensions ("tokenauth", KIP-48 delegation tokens),
 * OAuthBearerClientInitialResponse and OAuthBearerUnsecuredJws.
 *
 * Wire bytes are never assumed to be NUL-terminated; lengths are size_t.
 * Views ("pointers into the token") borrow the caller's bytes and die
 * with them.  Nothing here logs; a `why` is a static string that never
 * holds wire bytes (so never a password or a token).
 */
#ifndef KR_SASL_TOKEN_H
#define KR_SASL_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a first SASL token says about who the client claims to be. */
enum kr_sasl_principal_outcome {
    KR_SASL_PRINCIPAL_KNOWN,     /* *name: malloc'd NUL-terminated user
                                    name (no "User:"), caller frees */
    KR_SASL_PRINCIPAL_UNKNOWN,   /* mechanism or extension hides it:
                                    GSSAPI/other mechanisms, SCRAM
                                    tokenauth=true */
    KR_SASL_PRINCIPAL_MALFORMED  /* the token does not parse; *why
                                    (static string) says how */
};

/*
 * The principal a client's FIRST SASL token (len bytes at token) claims,
 * for mechanism name mech (as in SaslHandshake, case matters as in
 * Kafka): "PLAIN" -> authcid; "SCRAM-SHA-256"/"SCRAM-SHA-512" -> the
 * unescaped user of the client-first message (UNKNOWN with the extension
 * tokenauth=true: the name is a delegation token's id, KIP-48);
 * "OAUTHBEARER" -> the string claim oauth_claim (NULL: "sub") of the
 * bearer token's JWS payload, signature not checked (the broker checks
 * it); anything else (GSSAPI...) or mech NULL -> UNKNOWN.
 * name and why may be NULL.  On KNOWN, *name is malloc'd (NULL and
 * MALFORMED "out of memory" when malloc fails); otherwise *name is set
 * to NULL.  *why is set on MALFORMED only.  A PLAIN password is never
 * copied: only the user name leaves this function.
 */
enum kr_sasl_principal_outcome kr_sasl_client_principal(
    const char *mech, const uint8_t *token, size_t len,
    const char *oauth_claim, char **name, const char **why);

/* ---- PLAIN (RFC 4616) ------------------------------------------------- */

/* The three parts of a PLAIN token, pointers into it (none NUL-ended). */
struct kr_sasl_plain {
    const uint8_t *authzid;     /* may be empty (len 0) */
    size_t authzid_len;
    const uint8_t *authcid;     /* the user: non-empty UTF-8, no NUL */
    size_t authcid_len;
    const uint8_t *passwd;      /* non-empty, any bytes but NUL: secret */
    size_t passwd_len;
    bool authzid_differs;       /* on refusal only: the one reason was an
                                   authzid other than authcid (then
                                   authzid and authcid are set, passwd
                                   is not) */
};

/*
 * Split a PLAIN token `[authzid] NUL authcid NUL passwd` into *out.
 * As Kafka's PlainSaslServer: exactly two NULs, authcid and passwd
 * non-empty, authzid empty or equal to authcid; also refused: an authcid
 * or authzid that is not valid UTF-8.  Returns false with *why (may be
 * NULL) on any of those; *out is then zeroed, but for an authzid that
 * differs: authzid_differs, authzid and authcid (no passwd) set.  The password stays in the
 * caller's buffer: wipe it there (OPENSSL_cleanse) when done.
 */
bool kr_sasl_plain_split(const uint8_t *token, size_t len,
                         struct kr_sasl_plain *out, const char **why);

/* ---- SCRAM (RFC 5802, Kafka's ScramMessages) -------------------------- */

/* A client-first message, pointers into it. */
struct kr_sasl_scram_first {
    const uint8_t *gs2_header;  /* "n,," or "n,a=<authzid>,": with its
                                   final comma, as sent (c= is its
                                   base64) */
    size_t gs2_header_len;
    const uint8_t *authzid;     /* escaped as sent; len 0: none */
    size_t authzid_len;
    const uint8_t *bare;        /* client-first-message-bare, as sent:
                                   "n=...,r=...[,ext...]" (goes into the
                                   AuthMessage) */
    size_t bare_len;
    const uint8_t *user;        /* saslname, escaped as sent (=2C, =3D) */
    size_t user_len;
    const uint8_t *nonce;       /* printable ASCII but ',' */
    size_t nonce_len;
    const uint8_t *ext;         /* extensions after "r=<nonce>,", len 0:
                                   none */
    size_t ext_len;
    bool tokenauth;             /* extension tokenauth=true (any case, as
                                   Java's parseBoolean): a delegation
                                   token (KIP-48) */
};

/*
 * Parse a SCRAM client-first message (len bytes at msg) into *out:
 * gs2-header "n," ["a=" saslname] "," (channel binding flags "y" and
 * "p" are refused, as Kafka does: it supports no channel binding), then
 * "n=" saslname ",r=" nonce then ("," ALPHA "=" value)*.  A reserved
 * "m=" attribute is refused (RFC 5802: MUST fail).  Names are Kafka's
 * saslname: bytes 0x01-0x7F but ',' and '=', or "=2C"/"=3D"; any other
 * '=' escape, an empty name, a byte >= 0x80 or an empty nonce refuse it.
 * Returns false with *why (may be NULL) and *out zeroed.
 */
bool kr_sasl_scram_first_parse(const uint8_t *msg, size_t len,
                               struct kr_sasl_scram_first *out,
                               const char **why);

/*
 * A saslname (len bytes at p, as sent) unescaped ("=2C" -> ',', "=3D" ->
 * '='): malloc'd and NUL-terminated, or NULL with *why ("out of memory",
 * or a bad escape or byte when p was not checked by
 * kr_sasl_scram_first_parse).
 */
char *kr_sasl_scram_unescape(const uint8_t *p, size_t len, const char **why);

/* A client-final message, pointers into it. */
struct kr_sasl_scram_final {
    const uint8_t *cbind;       /* c=: base64 text, as sent */
    size_t cbind_len;
    const uint8_t *nonce;       /* r=: client nonce + server nonce */
    size_t nonce_len;
    const uint8_t *proof;       /* p=: base64 text (the ClientProof) */
    size_t proof_len;
    const uint8_t *without_proof; /* client-final-message-without-proof,
                                   "c=...,r=...[,ext...]" as sent */
    size_t without_proof_len;
};

/*
 * Parse a SCRAM client-final message "c=" base64 ",r=" nonce
 * ("," ALPHA "=" value)* ",p=" base64 into *out.  c= and p= must be
 * strict padded base64 (kr_sasl_b64_decode); p= non-empty and last.
 * Returns false with *why (may be NULL) and *out zeroed.  Whether c=
 * and r= are the right ones is the verifier's business (kr_scram).
 */
bool kr_sasl_scram_final_parse(const uint8_t *msg, size_t len,
                               struct kr_sasl_scram_final *out,
                               const char **why);

/* ---- OAUTHBEARER (RFC 7628) ------------------------------------------- */

/*
 * The bearer token of an OAUTHBEARER client initial response
 * "n,[a=saslname]," 0x01 ("key=value" 0x01)* 0x01 with the key "auth"
 * holding "Bearer <token>" (scheme in any case, as Kafka): *tok and
 * *tok_len point into msg.  Returns false with *why (may be NULL).
 * The token is a secret: it never goes into a log.
 */
bool kr_sasl_oauth_token(const uint8_t *msg, size_t len,
                         const uint8_t **tok, size_t *tok_len,
                         const char **why);

/* ---- base64 (RFC 4648) ------------------------------------------------ */

/*
 * Decode len bytes of base64 at in into out (room for at least
 * kr_sasl_b64_max_decoded(len) bytes), *out_len the decoded length.
 * url false: the standard alphabet with '=' padding required (length a
 * multiple of 4; SCRAM).  url true: the URL-safe alphabet ('-', '_')
 * without padding (JWS); a length of 1 mod 4 is refused.  Anything else
 * (whitespace, stray '=', bits left over in the last character) refuses
 * it: returns false.  Decoding is OpenSSL's EVP_DecodeBlock after the
 * strict checks.
 */
bool kr_sasl_b64_decode(const uint8_t *in, size_t len, bool url,
                        uint8_t *out, size_t *out_len);

/* Room kr_sasl_b64_decode needs for len bytes of text. */
size_t kr_sasl_b64_max_decoded(size_t len);

/*
 * Standard base64 with padding of len bytes at in, NUL-terminated into
 * out (room for kr_sasl_b64_encoded_len(len) + 1 bytes); returns the
 * length written without the NUL.
 */
size_t kr_sasl_b64_encode(const uint8_t *in, size_t len, char *out);

/* Length of the standard base64 of len bytes (no NUL). */
size_t kr_sasl_b64_encoded_len(size_t len);

#endif /* KR_SASL_TOKEN_H */
