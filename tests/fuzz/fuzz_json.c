/*
 * fuzz_json.c - fuzz target: JSON text -> message (kr_json_to_msg) ->
 * encode.
 *
 * Input: JSON text as krelay-codec encode reads it.  A tree built from
 * JSON must encode; its encoding must decode strictly (JSON strings are
 * UTF-8) and encode back to itself, and its JSON form must give the same
 * bytes again (kr_fuzz_codec with KR_FUZZ_CANONICAL).
 */
#include "config.h"

#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "kr_json.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    struct kr_arena a;
    struct kr_msg m;
    json_error_t jerr;
    json_t *j;
    uint8_t *out;
    size_t len = 0;
    int rc;

    j = json_loadb((const char *)data, size,
                   JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (j == NULL) {
        return 0;
    }
    kr_arena_init(&a, 0);
    memset(&recs, 0, sizeof(recs));
    memset(&m, 0, sizeof(m));
    memset(&err, 0, sizeof(err));
    rc = kr_json_to_msg(&a, j, &recs, &m, &err);
    if (rc != KR_OK) {
        KR_FUZZ_ASSERT(rc == KR_EPROTO || rc == KR_EUNSUPPORTED,
                       "kr_json_to_msg returned %d (%s)", rc,
                       kr_status_str(rc));
        goto out;
    }
    out = kr_fuzz_encode(&m, recs.p, recs.len, &len, &rc, &err);
    if (out == NULL) {
        /* kr_encode_msg may refuse a tree (e.g. too long a string) */
        KR_FUZZ_ASSERT(rc == KR_EPROTO, "encode of a tree from JSON "
                       "returned %d (%s)", rc, kr_status_str(rc));
        goto out;
    }
    kr_fuzz_codec(m.dir, m.api_key, m.api_version,
                  KR_DEC_STRICT | KR_FUZZ_CANONICAL, 0, out, len);
    free(out);
out:
    json_decref(j);
    kr_json_recbuf_free(&recs);
    kr_arena_free(&a);
    return 0;
}
