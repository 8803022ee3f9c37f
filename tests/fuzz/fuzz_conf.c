/*
 * fuzz_conf.c - fuzz target: configuration loading from a string, with
 * the rules compiled as the daemon does (kr_rule_load_string).
 *
 * Input: INI text (a NUL inside ends it, as for a C string).  Errors go
 * to /dev/null.  A config that loads is dumped (kr_conf_dump); the dump
 * must load again, dump to the same text, and differ in no key from the
 * config (kr_conf_reload_diff).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kr_conf.h"
#include "kr_rule.h"

static FILE *kr_fuzz_null;

/* kr_conf_dump of c as a malloc'd string. */
static char *
kr_fuzz_dump(const struct kr_conf *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    KR_FUZZ_ASSERT(f != NULL, "open_memstream failed");
    kr_conf_dump(c, f);
    KR_FUZZ_ASSERT(fclose(f) == 0, "fclose failed");
    return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kr_conf *c = NULL, *c2 = NULL;
    char *text, *d1, *d2;
    int rc;

    if (kr_fuzz_null == NULL) {
        kr_fuzz_null = fopen("/dev/null", "w");
        KR_FUZZ_ASSERT(kr_fuzz_null != NULL, "cannot open /dev/null");
    }
    text = malloc(size + 1);
    KR_FUZZ_ASSERT(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    rc = kr_rule_load_string(text, "fuzz.ini", kr_fuzz_null, &c);
    free(text);
    if (rc != KR_OK) {
        KR_FUZZ_ASSERT(c == NULL, "failed load set *out");
        return 0;
    }
    KR_FUZZ_ASSERT(c != NULL && c->nlisteners >= 1 && c->nupstreams >= 1,
                   "loaded config without listener or upstream");
    d1 = kr_fuzz_dump(c);
    rc = kr_conf_load_string(d1, "fuzz.ini", stderr, &c2);
    KR_FUZZ_ASSERT(rc == KR_OK, "the dump does not load:\n%s", d1);
    d2 = kr_fuzz_dump(c2);
    KR_FUZZ_ASSERT(strcmp(d1, d2) == 0, "dump of the dump differs:\n%s\n"
                   "----\n%s", d1, d2);
    KR_FUZZ_ASSERT(kr_conf_reload_diff(c, c2, NULL, NULL) == 0,
                   "the dump's config differs from the config:\n%s", d1);
    free(d1);
    free(d2);
    kr_conf_free(c2);
    kr_conf_free(c);
    return 0;
}
