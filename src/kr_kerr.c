/*
 * kr_kerr.c - Kafka error code <-> name, from Errors.java.
 *
 * The table is indexed by code + 1 (UNKNOWN_SERVER_ERROR is -1), so a
 * lookup by code is one bounds check and one load.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "kr_kerr.h"

static const char *const kr_kerr_names[KR_KERR_MAX + 2] = {
#define KR_KERR_NAME_(code, name) [(code) + 1] = #name,
    KR_KERR_LIST(KR_KERR_NAME_)
#undef KR_KERR_NAME_
};

const char *
kr_kerr_name(int16_t code)
{
    if (code < -1 || code > KR_KERR_MAX) {
        return NULL;
    }
    return kr_kerr_names[code + 1];
}

const char *
kr_kerr_format(int16_t code, char *buf, size_t len)
{
    const char *name = kr_kerr_name(code);

    if (name != NULL) {
        return name;
    }
    if (buf == NULL || len == 0) {
        return "UNKNOWN_ERROR";
    }
    snprintf(buf, len, "UNKNOWN_ERROR_%d", (int)code);
    return buf;
}

int
kr_kerr_by_name(const char *name)
{
    static const char unk[] = "UNKNOWN_ERROR_";
    size_t i;

    if (name == NULL) {
        return KR_KERR_NOT_FOUND;
    }
    for (i = 0; i < KR_KERR_MAX + 2; i++) {
        if (strcasecmp(name, kr_kerr_names[i]) == 0) {
            return (int)i - 1;
        }
    }
    if (strncasecmp(name, unk, sizeof(unk) - 1) == 0) {
        const char *num = name + sizeof(unk) - 1;
        char *end;
        long v;

        if (!(*num == '-' || (*num >= '0' && *num <= '9'))) {
            return KR_KERR_NOT_FOUND;
        }
        errno = 0;
        v = strtol(num, &end, 10);
        if (errno == 0 && *end == '\0' && v >= INT16_MIN && v <= INT16_MAX) {
            return (int)v;
        }
    }
    return KR_KERR_NOT_FOUND;
}
