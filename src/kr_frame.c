/*
 * kr_frame.c - size prefixes, request/response headers, and the leading
 * integer fields of a body, read from a flat view of a frame's start.
 *
 * Knows lengths and headers; body fields only through the schema tables.
 * Never reads outside the view it is given, never allocates.
 */
#include "config.h"

#include <string.h>

#include "kr_frame.h"
#include "kr_schema.h"

const char *
kr_frame_sniff(const uint8_t *p, size_t n)
{
    static const char *const http[] = {
        "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN",
        "TRAC"
    };
    size_t i;

    if (n < 2) {
        return NULL;
    }
    /* TLS record: ContentType handshake (22), ProtocolVersion 3.x. */
    if (p[0] == 0x16 && p[1] == 0x03) {
        return "TLS handshake";
    }
    if (n < 4) {
        return NULL;
    }
    if (memcmp(p, "PRI ", 4) == 0) {
        return "HTTP/2 preface";
    }
    if (memcmp(p, "PROX", 4) == 0) {
        return "PROXY protocol header";
    }
    for (i = 0; i < KR_ARRAY_LEN(http); i++) {
        if (memcmp(p, http[i], 4) == 0) {
            return "HTTP request";
        }
    }
    return NULL;
}

int
kr_frame_size(const uint8_t *p, size_t n, int64_t min, int64_t max,
              int32_t *size)
{
    if (n < KR_FRAME_PREFIX) {
        return KR_AGAIN;
    }
    *size = kr_frame_i32(p);
    if (*size < 0 || *size < min) {
        return KR_EPROTO;
    }
    if (*size > max) {
        return KR_ELIMIT;
    }
    return KR_OK;
}

/*
 * Make sure [off, off + len) lies in the view.  KR_OK when it does;
 * KR_EPROTO when it passes the frame; KR_AGAIN (with *need) when the
 * frame is longer than the view; KR_ELIMIT past KR_FRAME_PEEK_MAX.
 */
static int
want(size_t off, size_t len, size_t n, size_t frame_len, size_t *need)
{
    if (len > frame_len || off > frame_len - len) {
        return KR_EPROTO;
    }
    if (off + len <= n) {
        return KR_OK;
    }
    if (off + len > KR_FRAME_PEEK_MAX) {
        return KR_ELIMIT;
    }
    *need = off + len;
    return KR_AGAIN;
}

/*
 * Read an unsigned varint (at most 5 bytes, 32 bits) at *off.  Same
 * returns as want().
 */
static int
uvarint(const uint8_t *p, size_t n, size_t frame_len, size_t *off,
        uint32_t *v, size_t *need)
{
    uint32_t x = 0;
    unsigned shift = 0;
    size_t o = *off;
    int rc;

    for (;;) {
        rc = want(o, 1, n, frame_len, need);
        if (rc != KR_OK) {
            return rc;
        }
        if (shift == 28 && (p[o] & 0xf0) != 0) {
            return KR_EPROTO;       /* more than 32 bits */
        }
        x |= (uint32_t)(p[o] & 0x7f) << shift;
        if ((p[o++] & 0x80) == 0) {
            break;
        }
        shift += 7;
    }
    *off = o;
    *v = x;
    return KR_OK;
}

/* Skip a tagged-fields section at *off. */
static int
skip_tags(const uint8_t *p, size_t n, size_t frame_len, size_t *off,
          size_t *need)
{
    uint32_t count, i, tag, len;
    int rc;

    rc = uvarint(p, n, frame_len, off, &count, need);
    for (i = 0; rc == KR_OK && i < count; i++) {
        rc = uvarint(p, n, frame_len, off, &tag, need);
        if (rc == KR_OK) {
            rc = uvarint(p, n, frame_len, off, &len, need);
        }
        if (rc == KR_OK) {
            rc = want(*off, len, n, frame_len, need);
            if (rc == KR_OK) {
                *off += len;
            }
        }
    }
    return rc;
}

int
kr_frame_peek_request(const uint8_t *p, size_t n, size_t frame_len,
                      struct kr_req_hdr *h, size_t *need)
{
    size_t off = 0, keep, i;
    int16_t cid_len;
    int hv, rc;

    memset(h, 0, sizeof(*h));
    rc = want(0, KR_FRAME_REQ_MIN, n, frame_len, need);
    if (rc != KR_OK) {
        return rc;
    }
    h->api_key = kr_frame_i16(p);
    h->api_version = kr_frame_i16(p + 2);
    h->correlation_id = kr_frame_i32(p + 4);
    off = KR_FRAME_REQ_MIN;
    hv = kr_request_header_version(h->api_key, h->api_version);
    h->known = hv >= 0;
    h->hdr_version = (int8_t)hv;
    if (hv < 0) {
        hv = 1;                 /* every header but ControlledShutdown v0 */
    }
    h->client_id_null = true;
    if (hv >= 1) {
        rc = want(off, 2, n, frame_len, need);
        if (rc != KR_OK) {
            return rc;
        }
        cid_len = kr_frame_i16(p + off);
        off += 2;
        if (cid_len < -1) {
            return KR_EPROTO;
        }
        if (cid_len >= 0) {
            rc = want(off, (size_t)cid_len, n, frame_len, need);
            if (rc != KR_OK) {
                return rc;
            }
            h->client_id_null = false;
            h->client_id_len = (uint16_t)cid_len;
            keep = (size_t)cid_len < KR_FRAME_CLIENT_ID_MAX
                ? (size_t)cid_len : KR_FRAME_CLIENT_ID_MAX;
            for (i = 0; i < keep; i++) {
                uint8_t c = p[off + i];
                h->client_id[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
            }
            h->client_id[keep] = '\0';
            off += (size_t)cid_len;
        }
    }
    if (hv >= 2) {
        rc = skip_tags(p, n, frame_len, &off, need);
        if (rc != KR_OK) {
            return rc;
        }
    }
    h->hdr_len = off;
    return KR_OK;
}

int
kr_frame_response_hdr_len(const uint8_t *p, size_t n, size_t frame_len,
                          int16_t api_key, int16_t api_version,
                          size_t *hdr_len, size_t *need)
{
    size_t off = KR_FRAME_RSP_MIN;
    int rc;

    rc = want(0, KR_FRAME_RSP_MIN, n, frame_len, need);
    if (rc != KR_OK) {
        return rc;
    }
    if (kr_response_header_version(api_key, api_version) == 1) {
        rc = skip_tags(p, n, frame_len, &off, need);
        if (rc != KR_OK) {
            return rc;
        }
    }
    *hdr_len = off;
    return KR_OK;
}

static int64_t
read_int(const uint8_t *p, enum kr_type t)
{
    uint64_t x = 0;
    size_t i, len = kr_type_fixed_size(t);

    for (i = 0; i < len; i++) {
        x = x << 8 | p[i];
    }
    switch (t) {
    case KR_T_INT8:
        return (int8_t)x;
    case KR_T_INT16:
        return (int16_t)x;
    case KR_T_INT32:
        return (int32_t)x;
    case KR_T_INT64:
        return (int64_t)x;
    default:
        return (int64_t)x;      /* bool, uint16, uint32 */
    }
}

int
kr_frame_peek_fields(const uint8_t *p, size_t n, size_t frame_len,
                     bool response, int16_t api_key, int16_t api_version,
                     size_t body_off, struct kr_frame_field *f, int nf,
                     size_t *need)
{
    const struct kr_api_desc *a = kr_api_get(api_key);
    const struct kr_struct_desc *sd;
    size_t off = body_off, len;
    uint16_t sid;
    unsigned i;
    int j, left = nf, rc;

    for (j = 0; j < nf; j++) {
        f[j].found = false;
    }
    sid = kr_api_root(a, response, api_version);
    if (sid == KR_NO_STRUCT) {
        return KR_EUNSUPPORTED;
    }
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields && left > 0; i++) {
        const struct kr_field_desc *fd = &kr_fields[sd->first_field + i];
        enum kr_type t = (enum kr_type)fd->type;
        bool flex;

        if (!kr_vrange_has(fd->versions, api_version)) {
            continue;
        }
        if (fd->tag >= 0 && kr_vrange_has(fd->tagged, api_version)) {
            continue;           /* in the struct's tagged section */
        }
        flex = (fd->flags & KR_FF_FLEX_OVERRIDE)
            ? kr_vrange_has(fd->flexible, api_version)
            : kr_api_flexible(a, api_version);
        len = kr_type_fixed_size(t);
        if (len > 0) {
            rc = want(off, len, n, frame_len, need);
            if (rc != KR_OK) {
                return rc;
            }
            for (j = 0; j < nf; j++) {
                if (!f[j].found && t != KR_T_UUID && t != KR_T_FLOAT64 &&
                    f[j].id == fd->id) {
                    f[j].val = read_int(p + off, t);
                    f[j].found = true;
                    left--;
                }
            }
            off += len;
            continue;
        }
        if (t != KR_T_STRING && t != KR_T_BYTES) {
            break;              /* array, struct, records: stop here */
        }
        if (flex) {
            uint32_t l1;

            rc = uvarint(p, n, frame_len, &off, &l1, need);
            if (rc != KR_OK) {
                return rc;
            }
            len = l1 == 0 ? 0 : (size_t)l1 - 1;
        } else if (t == KR_T_STRING) {
            int16_t l;

            rc = want(off, 2, n, frame_len, need);
            if (rc != KR_OK) {
                return rc;
            }
            l = kr_frame_i16(p + off);
            off += 2;
            if (l < -1) {
                return KR_EPROTO;
            }
            len = l < 0 ? 0 : (size_t)l;
        } else {
            int32_t l;

            rc = want(off, 4, n, frame_len, need);
            if (rc != KR_OK) {
                return rc;
            }
            l = kr_frame_i32(p + off);
            off += 4;
            if (l < -1) {
                return KR_EPROTO;
            }
            len = l < 0 ? 0 : (size_t)l;
        }
        rc = want(off, len, n, frame_len, need);
        if (rc != KR_OK) {
            return rc;
        }
        off += len;
    }
    return KR_OK;
}

int
kr_frame_rsp_error_off(int16_t api_key, int16_t api_version)
{
    const struct kr_api_desc *a = kr_api_get(api_key);
    const struct kr_struct_desc *sd;
    uint16_t sid = kr_api_root(a, true, api_version);
    int off = 0;
    unsigned i;

    if (sid == KR_NO_STRUCT) {
        return -1;
    }
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *fd = &kr_fields[sd->first_field + i];

        if (!kr_vrange_has(fd->versions, api_version) ||
            (fd->tag >= 0 && kr_vrange_has(fd->tagged, api_version))) {
            continue;
        }
        if (fd->id == KR_FIELD_ERROR_CODE && fd->type == KR_T_INT16) {
            return off;
        }
        if (off == 0 && fd->id == KR_FIELD_THROTTLE_TIME_MS &&
            fd->type == KR_T_INT32) {
            off = 4;
            continue;
        }
        break;
    }
    return -1;
}

int
kr_frame_peek_rsp_error(const uint8_t *p, size_t n, size_t frame_len,
                        int16_t api_key, int16_t api_version, int16_t *code,
                        size_t *need)
{
    int off = kr_frame_rsp_error_off(api_key, api_version);
    size_t hl = 0;
    int rc;

    if (off < 0) {
        return KR_EUNSUPPORTED;
    }
    rc = kr_frame_response_hdr_len(p, n, frame_len, api_key, api_version,
                                   &hl, need);
    if (rc != KR_OK) {
        return rc;
    }
    rc = want(hl + (size_t)off, 2, n, frame_len, need);
    if (rc != KR_OK) {
        return rc;
    }
    *code = kr_frame_i16(p + hl + (size_t)off);
    return KR_OK;
}
