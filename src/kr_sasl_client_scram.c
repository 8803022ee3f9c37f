/*
 * kr_sasl_client_scram.c - the SCRAM client steps of kr_sasl_client
 * (kr_sasl_client_int.h) over kr_scram.
 *
 * UNFINISHED: kr_scram (sasl-lib) is not merged yet; until it is, every
 * SCRAM exchange fails here with a message saying so.
 */
#include "config.h"

#include <stdlib.h>

#include "kr_sasl_client_int.h"

struct kr_scram_client {
    int unused;
};

struct kr_scram_client *
kr_scram_client_new(bool sha512, const char *user, uint8_t **first,
                    size_t *len, const char **why)
{
    (void)sha512;
    (void)user;
    *first = NULL;
    *len = 0;
    *why = "SCRAM is not in this build yet (kr_scram)";
    return NULL;
}

int
kr_scram_client_final(struct kr_scram_client *c, const uint8_t *sf,
                      size_t sflen, const char *password, size_t pwlen,
                      uint8_t **final, size_t *len, const char **why)
{
    (void)c;
    (void)sf;
    (void)sflen;
    (void)password;
    (void)pwlen;
    *final = NULL;
    *len = 0;
    *why = "SCRAM is not in this build yet (kr_scram)";
    return -1;
}

int
kr_scram_client_verify(struct kr_scram_client *c, const uint8_t *sfin,
                       size_t len, const char **why)
{
    (void)c;
    (void)sfin;
    (void)len;
    *why = "SCRAM is not in this build yet (kr_scram)";
    return -1;
}

void
kr_scram_client_free(struct kr_scram_client *c)
{
    free(c);
}
