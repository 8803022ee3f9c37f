/*
 * kr_scram.h - SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as
 * Kafka uses them (KIP-84): stored credentials, the server side
 * (termination: krelay checks a client's proof), the client side
 * (origination: krelay logs in to a broker), and a PLAIN password
 * checked against a SCRAM credential.  OpenSSL 3 does the arithmetic
 * (PKCS5_PBKDF2_HMAC, HMAC, EVP_Digest, RAND_bytes, CRYPTO_memcmp); the
 * client's messages are parsed by kr_sasl_token.  No libevent, no
 * session, no I/O, no log.
 *
 * Secrets (passwords, salted passwords, ClientKey, StoredKey, ServerKey,
 * proofs) are wiped with OPENSSL_cleanse when a function is done with
 * its copies, and by kr_scram_*_free / kr_scram_cred_wipe.  Outcomes are
 * named (enum kr_scram_outcome) and never carry secret bytes.
 *
 * Messages produced (*out) are malloc'd, NUL-terminated text (the NUL is
 * not counted in *out_len); the caller frees them.
 */
#ifndef KR_SCRAM_H
#define KR_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kr_sasl_scram_first;

/* The two hashes Kafka offers (ScramMechanism). */
enum kr_scram_hash {
    KR_SCRAM_SHA256,                    /* "SCRAM-SHA-256", 32 bytes */
    KR_SCRAM_SHA512                     /* "SCRAM-SHA-512", 64 bytes */
};

#define KR_SCRAM_KEY_MAX 64             /* the longest hash (SHA-512) */
#define KR_SCRAM_SALT_MAX 128           /* longest salt accepted, bytes */
#define KR_SCRAM_SALT_LEN 24            /* salt of a credential made here */
#define KR_SCRAM_ITER_MIN 4096          /* Kafka's minIterations */
#define KR_SCRAM_ITER_MAX 16384         /* Kafka's maxIterations (stored) */
#define KR_SCRAM_ITER_DEFAULT 8192      /* krelay-passwd's default */
/* a broker asking krelay (origination) for more is refused: PBKDF2's
   cost is the server's to choose, within reason */
#define KR_SCRAM_CLIENT_ITER_MAX 100000
#define KR_SCRAM_NONCE_MAX 128          /* longest nonce part made here */

/* What a step of an exchange came to. */
enum kr_scram_outcome {
    KR_SCRAM_OK = 0,            /* *out holds the next message (or, for
                                   a check, the check passed) */
    KR_SCRAM_MALFORMED,         /* the peer's message does not parse */
    KR_SCRAM_TOKENAUTH,         /* tokenauth=true: a delegation token
                                   (KIP-48), which krelay cannot check */
    KR_SCRAM_AUTHZID_MISMATCH,  /* a=<authzid> differs from the user */
    KR_SCRAM_UNKNOWN_USER,      /* no credential for the user: the wire
                                   answer is the same as a wrong proof's;
                                   this outcome is for krelay's own log */
    KR_SCRAM_BAD_CHANNEL_BINDING, /* c= is not base64 of the gs2 header */
    KR_SCRAM_BAD_NONCE,         /* r= is not the nonce of this exchange
                                   (client: does not start with ours) */
    KR_SCRAM_BAD_PROOF,         /* wrong password (PLAIN check: the same) */
    KR_SCRAM_BAD_ITERATIONS,    /* client: the server's i= is outside
                                   KR_SCRAM_ITER_MIN..CLIENT_ITER_MAX */
    KR_SCRAM_BAD_SIGNATURE,     /* client: the server's v= is wrong */
    KR_SCRAM_SERVER_ERROR,      /* client: the server answered e=... */
    KR_SCRAM_BAD_USER,          /* client: a user name SCRAM cannot send
                                   (empty, NUL, or not ASCII: Kafka) */
    KR_SCRAM_STATE,             /* a step called out of order */
    KR_SCRAM_NO_MEMORY,         /* malloc or OpenSSL failed */
    KR_SCRAM_NONCE_FAILED       /* the nonce function failed or made a
                                   nonce with a byte RFC 5802 forbids */
};

/* The outcome's name ("bad proof"...): static, for logs. */
const char *kr_scram_outcome_name(enum kr_scram_outcome o);

/* "SCRAM-SHA-256" or "SCRAM-SHA-512". */
const char *kr_scram_mech_name(enum kr_scram_hash h);

/* The hash of a mechanism name (exact, as Kafka): false for others. */
bool kr_scram_hash_of(const char *mech, enum kr_scram_hash *h);

/* Bytes of the hash: 32 or 64. */
size_t kr_scram_hash_len(enum kr_scram_hash h);

/* ---- credentials ------------------------------------------------------- */

/*
 * A user's stored credential (RFC 5802 section 3), as Kafka stores it:
 * SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations),
 * StoredKey = H(HMAC(SaltedPassword, "Client Key")),
 * ServerKey = HMAC(SaltedPassword, "Server Key").  StoredKey and
 * ServerKey are secrets too (either lets one impersonate a side): wipe
 * with kr_scram_cred_wipe.
 */
struct kr_scram_cred {
    enum kr_scram_hash hash;
    uint32_t iterations;                /* 4096..16384 */
    size_t salt_len;                    /* 1..KR_SCRAM_SALT_MAX */
    uint8_t salt[KR_SCRAM_SALT_MAX];
    uint8_t stored_key[KR_SCRAM_KEY_MAX]; /* kr_scram_hash_len bytes */
    uint8_t server_key[KR_SCRAM_KEY_MAX];
};

/*
 * SaltedPassword into out (kr_scram_hash_len(h) bytes): PBKDF2 once.
 * The client side may cache it per (salt, iterations).  False when
 * OpenSSL fails or a length does not fit an int.
 */
bool kr_scram_salted_password(enum kr_scram_hash h, const uint8_t *pw,
                              size_t pw_len, const uint8_t *salt,
                              size_t salt_len, uint32_t iterations,
                              uint8_t *out);

/*
 * *c for password pw with the given salt and iterations (any count >= 1:
 * the known-answer tests use RFC 7677's).  False (*c wiped) on an
 * OpenSSL failure or a salt longer than KR_SCRAM_SALT_MAX.
 */
bool kr_scram_cred_derive(struct kr_scram_cred *c, enum kr_scram_hash h,
                          const uint8_t *pw, size_t pw_len,
                          const uint8_t *salt, size_t salt_len,
                          uint32_t iterations);

/*
 * A new credential for password pw: a KR_SCRAM_SALT_LEN-byte salt from
 * RAND_bytes, iterations in KR_SCRAM_ITER_MIN..KR_SCRAM_ITER_MAX (else
 * refused).  False with *why (static) on failure.
 */
bool kr_scram_cred_make(struct kr_scram_cred *c, enum kr_scram_hash h,
                        const uint8_t *pw, size_t pw_len,
                        uint32_t iterations, const char **why);

/*
 * Parse Kafka's stored form (ScramCredentialUtils), len bytes at text:
 * "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N", the four
 * keys each once in any order and no other; base64 strict and padded;
 * keys kr_scram_hash_len(h) bytes; salt 1..KR_SCRAM_SALT_MAX bytes; N
 * decimal in KR_SCRAM_ITER_MIN..KR_SCRAM_ITER_MAX.  False with *why
 * (static, never a key's bytes) and *c wiped.
 */
bool kr_scram_cred_parse(struct kr_scram_cred *c, enum kr_scram_hash h,
                         const char *text, size_t len, const char **why);

/* c in that stored form: malloc'd, NUL-terminated (NULL: no memory). */
char *kr_scram_cred_format(const struct kr_scram_cred *c);

/* Wipe *c (OPENSSL_cleanse). */
void kr_scram_cred_wipe(struct kr_scram_cred *c);

/*
 * A PLAIN login checked against a SCRAM credential: PBKDF2(pw, salt,
 * iterations) -> ClientKey -> H(ClientKey) == StoredKey (CRYPTO_memcmp).
 * KR_SCRAM_OK, KR_SCRAM_BAD_PROOF, or KR_SCRAM_NO_MEMORY.  Costs one
 * PBKDF2 (milliseconds at 8192 iterations): the caller may want to limit
 * how often a client can ask.
 */
enum kr_scram_outcome kr_scram_check_password(const struct kr_scram_cred *c,
                                              const uint8_t *pw,
                                              size_t pw_len);

/* ---- nonces -------------------------------------------------------------- */

/*
 * Writes a nonce part into out (cap bytes, cap > KR_SCRAM_NONCE_MAX):
 * 1..KR_SCRAM_NONCE_MAX printable ASCII bytes (0x21-0x7E) but ',', then
 * a NUL.  False on failure.  The default (NULL function):
 * kr_scram_nonce_random, 24 bytes from RAND_bytes in base64 (32
 * characters).  Tests inject fixed nonces.
 */
typedef bool (*kr_scram_nonce_fn)(void *arg, char *out, size_t cap);

bool kr_scram_nonce_random(void *arg, char *out, size_t cap);

/* ---- server side (termination) ------------------------------------------- */

enum kr_scram_server_state {
    KR_SCRAM_SERVER_START = 0,  /* waiting for client-first */
    KR_SCRAM_SERVER_FIRST_SENT, /* waiting for client-final */
    KR_SCRAM_SERVER_DONE,       /* authenticated */
    KR_SCRAM_SERVER_FAILED      /* refused: no further step */
};

/* One exchange, server side.  Zero it, then kr_scram_server_init. */
struct kr_scram_server {
    enum kr_scram_hash hash;
    enum kr_scram_server_state state;
    kr_scram_nonce_fn nonce_fn;         /* NULL: kr_scram_nonce_random */
    void *nonce_arg;
    bool unknown_user;                  /* answering with a mock */
    uint32_t mock_iterations;           /* the mock's i= (0: KR_SCRAM_ITER_
                                           DEFAULT); set after init */
    size_t mock_salt_len;               /* its salt's bytes, at most the
                                           hash's length (0: KR_SCRAM_
                                           SALT_LEN); set after init */
    struct kr_scram_cred cred;          /* the user's (or the mock) */
    char *user;                         /* unescaped user name, malloc'd */
    char *gs2_b64;                      /* base64 of the gs2 header: c= */
    char *nonce;                        /* client nonce + server nonce */
    size_t cnonce_len;                  /* the client's part of nonce */
    char *auth_msg;                     /* client-first-bare "," server-
                                           first ",": the AuthMessage so
                                           far */
    size_t auth_msg_len;
};

/* Ready *s for hash h; nonce_fn NULL: kr_scram_nonce_random. */
void kr_scram_server_init(struct kr_scram_server *s, enum kr_scram_hash h,
                          kr_scram_nonce_fn nonce_fn, void *nonce_arg);

/*
 * Answer a client-first message cf (parsed by kr_sasl_scram_first_parse;
 * its bytes must still be valid) for the user's credential cred (copied;
 * its hash must be s->hash, else KR_SCRAM_STATE).  On KR_SCRAM_OK *out
 * is server-first "r=<client nonce><server nonce>,s=<salt>,i=<N>".
 * Refused (state FAILED, *out NULL): KR_SCRAM_TOKENAUTH,
 * KR_SCRAM_AUTHZID_MISMATCH (authzid as sent compared with the unescaped
 * user, as Kafka does), KR_SCRAM_MALFORMED (a bad escape).
 *
 * cred NULL (no such user): with mock_key (mock_key_len > 0, a secret
 * the caller keeps for the process's life, e.g. 32 bytes of RAND_bytes)
 * krelay answers as for a real user, with salt HMAC-H(mock_key, user)
 * cut to s->mock_salt_len (the same salt each time for one user) and
 * s->mock_iterations (the caller sets both as its real users' are: a
 * client must not tell a name from i= or the salt's length; 0:
 * KR_SCRAM_SALT_LEN and KR_SCRAM_ITER_DEFAULT), and kr_scram_server_final
 * later answers exactly as for a wrong password (RFC 5802 section 9) but
 * returns KR_SCRAM_UNKNOWN_USER: a client cannot tell the two apart.
 * Without mock_key: KR_SCRAM_UNKNOWN_USER now, as Kafka does
 * (ScramSaslServer fails on the client-first message with the same
 * error text as a wrong password, but one round trip earlier).
 */
enum kr_scram_outcome kr_scram_server_first(
    struct kr_scram_server *s, const struct kr_sasl_scram_first *cf,
    const struct kr_scram_cred *cred, const uint8_t *mock_key,
    size_t mock_key_len, char **out, size_t *out_len);

/*
 * Check a client-final message (len bytes at msg): it parses
 * (kr_sasl_scram_final_parse), c= is base64 of the gs2 header as sent,
 * r= is this exchange's nonce (or ends with it, as Kafka takes
 * librdkafka <= 2.0's r=), the proof gives StoredKey (ClientKey =
 * ClientProof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) ==
 * StoredKey, CRYPTO_memcmp).  KR_SCRAM_OK: *out is server-final
 * "v=<ServerSignature>", state DONE.  Else state FAILED and *out is
 * server-final "e=<server-error-value>" (RFC 5802 section 7):
 * invalid-encoding (MALFORMED), channel-bindings-dont-match,
 * other-error (BAD_NONCE), invalid-proof (BAD_PROOF and
 * UNKNOWN_USER alike).  Kafka itself sends no e=: it fails the
 * SaslAuthenticate with ErrorCode 58 (SASL_AUTHENTICATION_FAILED); the
 * caller picks which to send.  *out NULL on NO_MEMORY or STATE.
 */
enum kr_scram_outcome kr_scram_server_final(struct kr_scram_server *s,
                                            const uint8_t *msg, size_t len,
                                            char **out, size_t *out_len);

/* Wipe and free what *s holds (s itself is the caller's). */
void kr_scram_server_free(struct kr_scram_server *s);

/* ---- client side (origination) -------------------------------------------- */

enum kr_scram_client_state {
    KR_SCRAM_CLIENT_START = 0,  /* nothing sent */
    KR_SCRAM_CLIENT_FIRST_SENT, /* waiting for server-first */
    KR_SCRAM_CLIENT_FIRST_READ, /* salt, iterations known: make final */
    KR_SCRAM_CLIENT_FINAL_SENT, /* waiting for server-final */
    KR_SCRAM_CLIENT_DONE,       /* server verified */
    KR_SCRAM_CLIENT_FAILED
};

/* One exchange, client side.  Zero it, then kr_scram_client_first. */
struct kr_scram_client {
    enum kr_scram_hash hash;
    enum kr_scram_client_state state;
    char *auth_msg;                     /* the AuthMessage so far */
    size_t auth_msg_len;
    size_t bare_len;                    /* client-first-bare's length */
    size_t cnonce_len;                  /* our nonce: bare's tail */
    char *nonce;                        /* the server's r= (ours + its) */
    uint32_t iterations;                /* the server's i= */
    size_t salt_len;                    /* the server's s=, decoded */
    uint8_t salt[KR_SCRAM_SALT_MAX];
    uint8_t server_sig[KR_SCRAM_KEY_MAX]; /* expected v= */
};

/*
 * Start an exchange for user (NUL-terminated; ',' and '=' escaped as
 * =2C and =3D): *out is client-first "n,,n=<user>,r=<nonce>".
 * KR_SCRAM_BAD_USER for an empty or non-ASCII name (Kafka's SCRAM names
 * are ASCII), KR_SCRAM_NONCE_FAILED, KR_SCRAM_NO_MEMORY.
 */
enum kr_scram_outcome kr_scram_client_first(struct kr_scram_client *c,
                                            enum kr_scram_hash h,
                                            const char *user,
                                            kr_scram_nonce_fn nonce_fn,
                                            void *nonce_arg, char **out,
                                            size_t *out_len);

/*
 * Read server-first (len bytes at msg): "r=<nonce>,s=<b64>,i=<N>"
 * [",ext..."] (Kafka's ServerFirstMessage; a reserved m= is refused).
 * The nonce must start with ours and be longer (BAD_NONCE); N in
 * KR_SCRAM_ITER_MIN..KR_SCRAM_CLIENT_ITER_MAX (BAD_ITERATIONS); salt
 * 1..KR_SCRAM_SALT_MAX bytes (MALFORMED).  Then c->salt, c->salt_len
 * and c->iterations say which salted password kr_scram_client_final
 * needs (the caller's cache key).
 */
enum kr_scram_outcome kr_scram_client_server_first(struct kr_scram_client *c,
                                                   const uint8_t *msg,
                                                   size_t len);

/*
 * *out: client-final "c=biws,r=<nonce>,p=<ClientProof>" from salted
 * (kr_scram_salted_password over c->salt and c->iterations, or the
 * caller's cached copy: kr_scram_hash_len bytes).  Remembers the
 * expected ServerSignature.
 */
enum kr_scram_outcome kr_scram_client_final(struct kr_scram_client *c,
                                            const uint8_t *salted,
                                            char **out, size_t *out_len);

/* kr_scram_client_final with PBKDF2 of pw done here (no cache). */
enum kr_scram_outcome kr_scram_client_final_password(
    struct kr_scram_client *c, const uint8_t *pw, size_t pw_len,
    char **out, size_t *out_len);

/*
 * Read server-final (len bytes at msg): "v=<b64>" [",ext..."] compared
 * with the expected ServerSignature (CRYPTO_memcmp): OK (state DONE) or
 * BAD_SIGNATURE; "e=<error>": SERVER_ERROR; else MALFORMED.
 */
enum kr_scram_outcome kr_scram_client_verify(struct kr_scram_client *c,
                                             const uint8_t *msg, size_t len);

/* Wipe and free what *c holds. */
void kr_scram_client_free(struct kr_scram_client *c);

#endif /* KR_SCRAM_H */
