/*
 * fuzz_response.c - fuzz target: response decode for an (ApiKey, version)
 * chosen by the input, strict and tolerant.
 *
 * Input: byte 0 = ApiKey (modulo kr_api_max + 1; unused keys are
 * skipped), byte 1 = version (valid.lo + byte % the number of valid
 * versions), byte 2 = flags (bit 1: KR_DEC_NO_UTF8 with the strict
 * pass), byte 3 = segment seed, then the response payload (a frame
 * without its size prefix).  Round trip as in fuzz.h.
 */
#include "config.h"

#include "fuzz.h"
#include "kr_schema.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct kr_api_desc *api;
    int16_t key, ver;
    int nver;

    if (size < 4) {
        return 0;
    }
    key = (int16_t)(data[0] % (kr_api_max + 1));
    api = kr_api_get(key);
    if (api == NULL) {
        return 0;
    }
    nver = api->valid.hi - api->valid.lo + 1;
    if (nver <= 0) {
        return 0;
    }
    ver = (int16_t)(api->valid.lo + data[1] % nver);
    kr_fuzz_codec(KR_DIR_RESPONSE, key, ver,
                  KR_DEC_STRICT | (data[2] & KR_DEC_NO_UTF8), data[3],
                  data + 4, size - 4);
    kr_fuzz_codec(KR_DIR_RESPONSE, key, ver, 0, data[3], data + 4,
                  size - 4);
    return 0;
}
