/*
 * kr_sasl_client_int.h - the SCRAM client steps kr_sasl_client.c needs
 * (RFC 5802, 7677), private to the module: kr_sasl_client_scram.c
 * carries them out with kr_scram (the SCRAM computations: nonce,
 * PBKDF2, proofs and signatures), which krelay's SCRAM server shares.
 * Every token is malloc'd; the caller wipes (OPENSSL_cleanse) and frees
 * it.  A why is a static string, never wire bytes or a secret.
 */
#ifndef KR_SASL_CLIENT_INT_H
#define KR_SASL_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kr_scram_client;

/* A client for user (SHA-512 when sha512, else SHA-256) with its
   client-first message in *first (*len bytes).  NULL with *why. */
struct kr_scram_client *kr_scram_client_new(bool sha512, const char *user,
                                            uint8_t **first, size_t *len,
                                            const char **why);

/* The client-final message for the server-first message sf (sflen
   bytes) and the password (pwlen bytes) in *final (*len bytes).  0, or
   -1 with *why (a malformed server-first, a nonce that does not extend
   the client's, too few iterations, ENOMEM). */
int kr_scram_client_final(struct kr_scram_client *c, const uint8_t *sf,
                          size_t sflen, const char *password, size_t pwlen,
                          uint8_t **final, size_t *len, const char **why);

/* The server-final message (len bytes): 0 when its signature verifies,
   -1 with *why. */
int kr_scram_client_verify(struct kr_scram_client *c, const uint8_t *sfin,
                           size_t len, const char **why);

/* Free c with its keys wiped.  NULL is a no-op. */
void kr_scram_client_free(struct kr_scram_client *c);

#endif /* KR_SASL_CLIENT_INT_H */
