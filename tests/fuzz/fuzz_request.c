/*
 * fuzz_request.c - fuzz target: request decode, strict and tolerant.
 *
 * Input: byte 0 = flags (bit 1: KR_DEC_NO_UTF8 with the strict pass),
 * byte 1 = segment seed (0: one segment; see kr_fuzz_segs_split), then
 * the request payload (a frame without its size prefix).  Both passes
 * check the round trip described in fuzz.h.
 */
#include "config.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    kr_fuzz_codec(KR_DIR_REQUEST, 0, 0,
                  KR_DEC_STRICT | (data[0] & KR_DEC_NO_UTF8), data[1],
                  data + 2, size - 2);
    kr_fuzz_codec(KR_DIR_REQUEST, 0, 0, 0, data[1], data + 2, size - 2);
    return 0;
}
