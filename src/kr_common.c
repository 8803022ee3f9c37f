/*
 * kr_common.c - status code names.
 */
#include "config.h"

#include "kr_common.h"

const char *
kr_status_str(int status)
{
    switch (status) {
    case KR_OK: return "ok";
    case KR_AGAIN: return "need more bytes";
    case KR_ERROR: return "error";
    case KR_ENOMEM: return "out of memory";
    case KR_EPROTO: return "malformed input";
    case KR_EUNSUPPORTED: return "unsupported ApiKey or version";
    case KR_ELIMIT: return "limit exceeded";
    default: return "unknown status";
    }
}
