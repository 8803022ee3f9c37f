/*
 * fuzz_frame.c - fuzz target: framing (kr_frame.h).
 *
 * Input: byte 0 = ApiKey and byte 1 = version for responses (as in
 * fuzz_response.c), bytes 2-3 = the first view size n (big-endian,
 * modulo the payload size + 1), byte 4 bit 0 = response, then a payload
 * (a frame without its size prefix).
 *
 * Each peek is driven as the proxy drives it: a view of n bytes (copied
 * to a buffer of exactly n bytes, so AddressSanitizer sees a read past
 * it); on KR_AGAIN the view grows to *need, which must be more than n and
 * at most the payload.  The result must equal the one from the whole
 * payload.  Where the codec decodes the payload, the framing must agree
 * with it: header length, ApiKey, version, CorrelationId, and the values
 * of the leading body fields.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "kr_frame.h"
#include "kr_schema.h"

/* What one peek gave. */
struct kr_fuzz_peek {
    int rc;
    struct kr_req_hdr h;                /* request header */
    size_t hdr_len;                     /* response header */
    struct kr_frame_field f[8];         /* leading fields */
};

static const enum kr_field_id kr_fuzz_fields[8] = {
    KR_FIELD_ACKS, KR_FIELD_TIMEOUT_MS, KR_FIELD_MAX_WAIT_MS,
    KR_FIELD_REBALANCE_TIMEOUT_MS, KR_FIELD_ERROR_CODE,
    KR_FIELD_THROTTLE_TIME_MS, KR_FIELD_REPLICA_ID,
    KR_FIELD_SESSION_TIMEOUT_MS
};

enum kr_fuzz_what { KR_FUZZ_REQ, KR_FUZZ_RSP, KR_FUZZ_FIELDS };

struct kr_fuzz_frame {
    const uint8_t *p;                   /* whole payload */
    size_t len;
    bool response;
    int16_t key, ver;
    size_t body_off;
};

static void
kr_fuzz_peek_once(const struct kr_fuzz_frame *fr, enum kr_fuzz_what what,
                  size_t n, struct kr_fuzz_peek *out, size_t *need)
{
    uint8_t *view = malloc(n);
    int i;

    KR_FUZZ_ASSERT(view != NULL || n == 0, "out of memory");
    if (n > 0) {
        memcpy(view, fr->p, n);
    }
    memset(out, 0, sizeof(*out));
    for (i = 0; i < 8; i++) {
        out->f[i].id = kr_fuzz_fields[i];
    }
    switch (what) {
    case KR_FUZZ_REQ:
        out->rc = kr_frame_peek_request(view, n, fr->len, &out->h, need);
        break;
    case KR_FUZZ_RSP:
        out->rc = kr_frame_response_hdr_len(view, n, fr->len, fr->key,
                                            fr->ver, &out->hdr_len, need);
        break;
    case KR_FUZZ_FIELDS:
        out->rc = kr_frame_peek_fields(view, n, fr->len, fr->response,
                                       fr->key, fr->ver, fr->body_off,
                                       out->f, 8, need);
        break;
    }
    free(view);
}

static bool
kr_fuzz_peek_eq(enum kr_fuzz_what what, const struct kr_fuzz_peek *a,
                const struct kr_fuzz_peek *b)
{
    int i;

    if (a->rc != b->rc) {
        return false;
    }
    if (a->rc != KR_OK) {
        return true;
    }
    switch (what) {
    case KR_FUZZ_REQ:
        return memcmp(&a->h, &b->h, sizeof(a->h)) == 0;
    case KR_FUZZ_RSP:
        return a->hdr_len == b->hdr_len;
    case KR_FUZZ_FIELDS:
        for (i = 0; i < 8; i++) {
            if (a->f[i].found != b->f[i].found ||
                (a->f[i].found && a->f[i].val != b->f[i].val)) {
                return false;
            }
        }
        return true;
    }
    return false;
}

/* Peek from a view of n bytes, growing it on KR_AGAIN; check it. */
static void
kr_fuzz_peek(const struct kr_fuzz_frame *fr, enum kr_fuzz_what what,
             size_t n, struct kr_fuzz_peek *out)
{
    struct kr_fuzz_peek whole;
    size_t need = 0;

    for (;;) {
        need = 0;
        kr_fuzz_peek_once(fr, what, n, out, &need);
        if (out->rc != KR_AGAIN) {
            break;
        }
        KR_FUZZ_ASSERT(need > n && need <= fr->len &&
                       need <= KR_FRAME_PEEK_MAX,
                       "peek %d: KR_AGAIN with need %zu for a view of "
                       "%zu of %zu bytes", (int)what, need, n, fr->len);
        n = need;
    }
    KR_FUZZ_ASSERT(out->rc == KR_OK || out->rc == KR_EPROTO ||
                   out->rc == KR_ELIMIT || out->rc == KR_EUNSUPPORTED,
                   "peek %d returned %d", (int)what, out->rc);
    kr_fuzz_peek_once(fr, what, fr->len, &whole, &need);
    KR_FUZZ_ASSERT(whole.rc != KR_AGAIN, "peek %d: KR_AGAIN with the whole "
                   "payload (%zu bytes)", (int)what, fr->len);
    if (out->rc != KR_ELIMIT) {
        KR_FUZZ_ASSERT(kr_fuzz_peek_eq(what, out, &whole),
                       "peek %d: view from %zu bytes gave %d, the whole "
                       "payload %d (or other values)", (int)what, n,
                       out->rc, whole.rc);
    }
}

/* Leading fields agree with the decoded body. */
static void
kr_fuzz_check_fields(const struct kr_fuzz_frame *fr, const struct kr_msg *m)
{
    struct kr_fuzz_peek pf;
    int i;

    kr_fuzz_peek(fr, KR_FUZZ_FIELDS, fr->body_off, &pf);
    KR_FUZZ_ASSERT(pf.rc == KR_OK, "codec decodes (ApiKey %d v%d) but "
                   "kr_frame_peek_fields gives %d", fr->key, fr->ver,
                   pf.rc);
    for (i = 0; i < 8; i++) {
        const struct kr_val *v;

        if (!pf.f[i].found) {
            continue;
        }
        v = kr_node_get_id(m->body, pf.f[i].id);
        KR_FUZZ_ASSERT(v != NULL && v->present && v->u.i == pf.f[i].val,
                       "%s: kr_frame_peek_fields read %lld, the codec %lld "
                       "(ApiKey %d v%d)", kr_field_id_name(pf.f[i].id),
                       (long long)pf.f[i].val,
                       v != NULL ? (long long)v->u.i : -1LL, fr->key,
                       fr->ver);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct kr_api_desc *api;
    struct kr_fuzz_frame fr;
    struct kr_fuzz_peek pk;
    struct kr_codec_err err;
    struct kr_arena a;
    struct iovec iov;
    struct kr_rbuf rb;
    struct kr_msg m;
    int32_t fsize;
    size_t n0;
    int rc, nver;

    if (size < 5) {
        return 0;
    }
    memset(&fr, 0, sizeof(fr));
    fr.p = data + 5;
    fr.len = size - 5;
    fr.response = (data[4] & 1) != 0;
    n0 = ((size_t)data[2] << 8 | data[3]) % (fr.len + 1);

    /* the payload as a stream start too */
    (void)kr_frame_sniff(fr.p, n0);
    rc = kr_frame_size(fr.p, n0, data[0], 1 << 20, &fsize);
    KR_FUZZ_ASSERT(n0 >= 4 ? rc != KR_AGAIN : rc == KR_AGAIN,
                   "kr_frame_size %d for %zu bytes", rc, n0);

    kr_arena_init(&a, 0);
    kr_rbuf_init_flat(&rb, &iov, fr.p, fr.len);
    memset(&m, 0, sizeof(m));
    if (!fr.response) {
        kr_fuzz_peek(&fr, KR_FUZZ_REQ, n0, &pk);
        rc = kr_decode_request(&a, &rb, 0, &m, &err);
        if (rc == KR_OK) {
            KR_FUZZ_ASSERT(pk.rc == KR_OK && pk.h.known &&
                           pk.h.api_key == m.api_key &&
                           pk.h.api_version == m.api_version &&
                           pk.h.correlation_id == m.correlation_id &&
                           pk.h.hdr_version == m.hdr_version &&
                           pk.h.hdr_len == m.body_off,
                           "codec and kr_frame_peek_request disagree: "
                           "rc %d, hdr_len %zu vs body_off %zu", pk.rc,
                           pk.h.hdr_len, m.body_off);
            fr.key = m.api_key;
            fr.ver = m.api_version;
            fr.body_off = m.body_off;
            kr_fuzz_check_fields(&fr, &m);
        }
        goto out;
    }
    fr.key = (int16_t)(data[0] % (kr_api_max + 1));
    api = kr_api_get(fr.key);
    nver = api != NULL ? api->valid.hi - api->valid.lo + 1 : 0;
    fr.ver = nver > 0 ? (int16_t)(api->valid.lo + data[1] % nver)
                      : (int16_t)data[1];
    kr_fuzz_peek(&fr, KR_FUZZ_RSP, n0, &pk);
    rc = kr_decode_response(&a, &rb, fr.key, fr.ver, 0, &m, &err);
    if (rc == KR_OK) {
        KR_FUZZ_ASSERT(pk.rc == KR_OK && pk.hdr_len == m.body_off,
                       "codec and kr_frame_response_hdr_len disagree: "
                       "rc %d, hdr_len %zu vs body_off %zu", pk.rc,
                       pk.hdr_len, m.body_off);
        fr.body_off = m.body_off;
        kr_fuzz_check_fields(&fr, &m);
    }
out:
    kr_arena_free(&a);
    return 0;
}
