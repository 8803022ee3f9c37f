/*
 * check_frame.c - size prefixes, protocol sniffing, request header peek
 * (header v0/v1/v2), table-driven leading-field peek, and parsing a
 * stream of frames cut at every byte boundary.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_frame.h"

/* ---- a tiny frame builder ---------------------------------------------- */

struct fb {
    uint8_t b[4096];
    size_t n;
};

static void
put8(struct fb *f, uint8_t v)
{
    ck_assert_uint_lt(f->n, sizeof(f->b));
    f->b[f->n++] = v;
}

static void
put16(struct fb *f, int16_t v)
{
    put8(f, (uint8_t)((uint16_t)v >> 8));
    put8(f, (uint8_t)v);
}

static void
put32(struct fb *f, int32_t v)
{
    put16(f, (int16_t)((uint32_t)v >> 16));
    put16(f, (int16_t)(uint32_t)v);
}

static void
putstr(struct fb *f, const char *s)
{
    size_t i, n;

    if (s == NULL) {
        put16(f, -1);
        return;
    }
    n = strlen(s);
    put16(f, (int16_t)n);
    for (i = 0; i < n; i++) {
        put8(f, (uint8_t)s[i]);
    }
}

/* compact (flexible) string: uvarint len+1, 0 = null; short strings */
static void
putcstr(struct fb *f, const char *s)
{
    size_t i, n;

    if (s == NULL) {
        put8(f, 0);
        return;
    }
    n = strlen(s);
    ck_assert_uint_lt(n, 127);
    put8(f, (uint8_t)(n + 1));
    for (i = 0; i < n; i++) {
        put8(f, (uint8_t)s[i]);
    }
}

/* Start a frame: placeholder size, then the request header. */
static size_t
begin_req(struct fb *f, int16_t key, int16_t ver, int32_t corr,
          const char *client_id, int hv)
{
    size_t at = f->n;

    put32(f, 0);
    put16(f, key);
    put16(f, ver);
    put32(f, corr);
    if (hv >= 1) {
        putstr(f, client_id);
    }
    if (hv >= 2) {
        put8(f, 0);             /* no tagged fields */
    }
    return at;
}

static void
end_frame(struct fb *f, size_t at)
{
    int32_t size = (int32_t)(f->n - at - 4);

    f->b[at] = (uint8_t)(size >> 24);
    f->b[at + 1] = (uint8_t)(size >> 16);
    f->b[at + 2] = (uint8_t)(size >> 8);
    f->b[at + 3] = (uint8_t)size;
}

/* ---- sniffing and sizes ------------------------------------------------ */

START_TEST(sniff_protocols)
{
    static const uint8_t tls[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01 };
    static const uint8_t kafka[] = { 0x00, 0x00, 0x00, 0x20, 0x00, 0x12 };

    ck_assert_str_eq(kr_frame_sniff(tls, sizeof(tls)), "TLS handshake");
    ck_assert_str_eq(kr_frame_sniff(tls, 2), "TLS handshake");
    ck_assert_ptr_null(kr_frame_sniff(tls, 1));
    ck_assert_str_eq(kr_frame_sniff((const uint8_t *)"GET / HTTP/1.1", 14),
                     "HTTP request");
    ck_assert_str_eq(kr_frame_sniff((const uint8_t *)"POST /x", 7),
                     "HTTP request");
    ck_assert_str_eq(kr_frame_sniff((const uint8_t *)"PRI * HTTP/2.0", 14),
                     "HTTP/2 preface");
    ck_assert_str_eq(kr_frame_sniff((const uint8_t *)"PROXY TCP4 ", 11),
                     "PROXY protocol header");
    ck_assert_ptr_null(kr_frame_sniff(kafka, sizeof(kafka)));
    ck_assert_ptr_null(kr_frame_sniff((const uint8_t *)"GE", 2));
}
END_TEST

START_TEST(size_limits)
{
    static const uint8_t ok[] = { 0x00, 0x00, 0x01, 0x00 };
    static const uint8_t neg[] = { 0xff, 0xff, 0xff, 0xfe };
    static const uint8_t small[] = { 0x00, 0x00, 0x00, 0x07 };
    static const uint8_t big[] = { 0x7f, 0xff, 0xff, 0xff };
    int32_t size = 0;

    ck_assert_int_eq(kr_frame_size(ok, 3, 8, 1000, &size), KR_AGAIN);
    ck_assert_int_eq(kr_frame_size(ok, 4, 8, 1000, &size), KR_OK);
    ck_assert_int_eq(size, 256);
    ck_assert_int_eq(kr_frame_size(ok, 4, 8, 255, &size), KR_ELIMIT);
    ck_assert_int_eq(size, 256);
    ck_assert_int_eq(kr_frame_size(ok, 4, 8, 256, &size), KR_OK);
    ck_assert_int_eq(kr_frame_size(neg, 4, 0, 1000, &size), KR_EPROTO);
    ck_assert_int_eq(size, -2);
    ck_assert_int_eq(kr_frame_size(small, 4, 8, 1000, &size), KR_EPROTO);
    ck_assert_int_eq(size, 7);
    ck_assert_int_eq(kr_frame_size(small, 4, 0, 1000, &size), KR_OK);
    ck_assert_int_eq(kr_frame_size(big, 4, 8, INT32_MAX, &size), KR_OK);
    ck_assert_int_eq(size, INT32_MAX);
    ck_assert_int_eq(kr_frame_size(big, 4, 8, 64 << 20, &size), KR_ELIMIT);
}
END_TEST

/* ---- request headers -------------------------------------------------- */

START_TEST(header_v1)
{
    struct fb f = { .n = 0 };
    struct kr_req_hdr h;
    size_t at, need = 0;

    /* Metadata v2: non-flexible, header v1 */
    at = begin_req(&f, KR_API_METADATA, 2, 0x01020304, "rdkafka", 1);
    put32(&f, -1);
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(h.api_key, 3);
    ck_assert_int_eq(h.api_version, 2);
    ck_assert_int_eq(h.correlation_id, 0x01020304);
    ck_assert_int_eq(h.hdr_version, 1);
    ck_assert(h.known);
    ck_assert(!h.client_id_null);
    ck_assert_str_eq(h.client_id, "rdkafka");
    ck_assert_uint_eq(h.client_id_len, 7);
    ck_assert_uint_eq(h.hdr_len, 8 + 2 + 7);
}
END_TEST

START_TEST(header_v2_tags)
{
    struct fb f = { .n = 0 };
    struct kr_req_hdr h;
    size_t at, need = 0;

    /* Metadata v12: flexible, header v2 with one tagged field (3 bytes) */
    at = f.n;
    put32(&f, 0);
    put16(&f, KR_API_METADATA);
    put16(&f, 12);
    put32(&f, -7);
    putstr(&f, "c\x01x");       /* non-printable byte shown as '?' */
    put8(&f, 1);                /* 1 tagged field */
    put8(&f, 5);                /* tag 5 */
    put8(&f, 3);                /* 3 bytes */
    put8(&f, 0xaa);
    put8(&f, 0xbb);
    put8(&f, 0xcc);
    put8(&f, 0x42);             /* body starts here */
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(h.hdr_version, 2);
    ck_assert_int_eq(h.correlation_id, -7);
    ck_assert_str_eq(h.client_id, "c?x");
    ck_assert_uint_eq(h.hdr_len, 8 + 2 + 3 + 1 + 1 + 1 + 3);
    ck_assert_uint_eq(f.b[4 + h.hdr_len], 0x42);

    /* a tagged field running past the frame is malformed */
    f.b[4 + 8 + 2 + 3 + 2] = 100;
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_EPROTO);
}
END_TEST

START_TEST(header_v0_and_unknown)
{
    struct fb f = { .n = 0 };
    struct kr_req_hdr h;
    size_t at, need = 0;

    /* ControlledShutdown v0: header v0, no ClientId */
    at = begin_req(&f, KR_API_CONTROLLED_SHUTDOWN, 0, 9, NULL, 0);
    put32(&f, 1);
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(h.hdr_version, 0);
    ck_assert(h.client_id_null);
    ck_assert_uint_eq(h.hdr_len, 8);

    /* unknown ApiKey: read as header v1, known = false */
    f.n = 0;
    at = begin_req(&f, 999, 3, 10, NULL, 1);
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert(!h.known);
    ck_assert_int_eq(h.hdr_version, -1);
    ck_assert(h.client_id_null);
    ck_assert_uint_eq(h.hdr_len, 10);
    ck_assert_int_eq(h.api_key, 999);
}
END_TEST

START_TEST(header_malformed)
{
    struct fb f = { .n = 0 };
    struct kr_req_hdr h;
    size_t at, need = 0;

    /* frame shorter than the 8-byte header */
    ck_assert_int_eq(kr_frame_peek_request((const uint8_t *)"\0\0\0", 3, 3,
                                           &h, &need), KR_EPROTO);
    /* ClientId length < -1 */
    at = begin_req(&f, KR_API_METADATA, 2, 1, NULL, 0);
    put16(&f, -5);
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_EPROTO);
    /* ClientId longer than the frame */
    f.n = 0;
    at = begin_req(&f, KR_API_METADATA, 2, 1, NULL, 0);
    put16(&f, 30);
    put8(&f, 'a');
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_EPROTO);
    /* the same ClientId in a longer frame, seen partly: wait for it */
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, 100, &h,
                                           &need), KR_AGAIN);
    ck_assert_uint_eq(need, 8 + 2 + 30);
}
END_TEST

/* ---- leading fields ----------------------------------------------------- */

START_TEST(fields_produce)
{
    struct kr_frame_field fl[2] = { { .id = KR_FIELD_ACKS },
                                    { .id = KR_FIELD_TIMEOUT_MS } };
    struct fb f = { .n = 0 };
    struct kr_req_hdr h;
    size_t at, need = 0;

    /* Produce v3: TransactionalId (null), Acks 0, TimeoutMs 1500 */
    at = begin_req(&f, KR_API_PRODUCE, 3, 1, "p", 1);
    putstr(&f, NULL);
    put16(&f, 0);
    put32(&f, 1500);
    put32(&f, 0);               /* TopicData: empty */
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          h.api_key, h.api_version,
                                          h.hdr_len, fl, 2, &need), KR_OK);
    ck_assert(fl[0].found && fl[1].found);
    ck_assert_int_eq(fl[0].val, 0);
    ck_assert_int_eq(fl[1].val, 1500);

    /* Produce v9 (flexible): compact TransactionalId "tx", Acks -1 */
    f.n = 0;
    at = begin_req(&f, KR_API_PRODUCE, 9, 2, "p", 2);
    putcstr(&f, "tx");
    put16(&f, -1);
    put32(&f, 30000);
    put8(&f, 1);                /* TopicData: compact, empty */
    put8(&f, 0);                /* tags */
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          h.api_key, h.api_version,
                                          h.hdr_len, fl, 2, &need), KR_OK);
    ck_assert_int_eq(fl[0].val, -1);
    ck_assert_int_eq(fl[1].val, 30000);

    /* seen partly: ask for the bytes up to TimeoutMs */
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, h.hdr_len + 4, f.n - 4,
                                          false, h.api_key, h.api_version,
                                          h.hdr_len, fl, 2, &need),
                     KR_AGAIN);
    ck_assert_uint_eq(need, h.hdr_len + 3 + 2);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, need, f.n - 4,
                                          false, h.api_key, h.api_version,
                                          h.hdr_len, fl, 2, &need),
                     KR_AGAIN);
    ck_assert_uint_eq(need, h.hdr_len + 3 + 2 + 4);

    /* a version the tables do not know */
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          KR_API_PRODUCE, 99, h.hdr_len, fl,
                                          2, &need), KR_EUNSUPPORTED);
}
END_TEST

START_TEST(fields_fetch_joingroup)
{
    struct kr_frame_field fl[2] = { { .id = KR_FIELD_REBALANCE_TIMEOUT_MS },
                                    { .id = KR_FIELD_SESSION_TIMEOUT_MS } };
    struct kr_frame_field mw[1] = { { .id = KR_FIELD_MAX_WAIT_MS } };
    struct fb f = { .n = 0 };
    struct kr_req_hdr h;
    size_t at, need = 0;

    /* Fetch v4: ReplicaId, MaxWaitMs */
    at = begin_req(&f, KR_API_FETCH, 4, 1, "c", 1);
    put32(&f, -1);
    put32(&f, 500);
    put32(&f, 1);
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          h.api_key, h.api_version,
                                          h.hdr_len, mw, 1, &need), KR_OK);
    ck_assert(mw[0].found);
    ck_assert_int_eq(mw[0].val, 500);

    /* Fetch v15: no ReplicaId (ReplicaState is tagged) */
    f.n = 0;
    at = begin_req(&f, KR_API_FETCH, 15, 1, "c", 2);
    put32(&f, 250);
    put32(&f, 1);
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          h.api_key, h.api_version,
                                          h.hdr_len, mw, 1, &need), KR_OK);
    ck_assert_int_eq(mw[0].val, 250);

    /* JoinGroup v5: GroupId, SessionTimeoutMs, RebalanceTimeoutMs */
    f.n = 0;
    at = begin_req(&f, KR_API_JOIN_GROUP, 5, 1, "c", 1);
    putstr(&f, "group-1");
    put32(&f, 10000);
    put32(&f, 300000);
    putstr(&f, "");
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          h.api_key, h.api_version,
                                          h.hdr_len, fl, 2, &need), KR_OK);
    ck_assert(fl[0].found && fl[1].found);
    ck_assert_int_eq(fl[0].val, 300000);
    ck_assert_int_eq(fl[1].val, 10000);

    /* JoinGroup v0 has no RebalanceTimeoutMs */
    f.n = 0;
    at = begin_req(&f, KR_API_JOIN_GROUP, 0, 1, "c", 1);
    putstr(&f, "g");
    put32(&f, 6000);
    putstr(&f, "");             /* MemberId */
    putstr(&f, "consumer");     /* ProtocolType */
    put32(&f, 0);               /* Protocols: the walk stops here */
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_peek_request(f.b + 4, f.n - 4, f.n - 4, &h,
                                           &need), KR_OK);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, false,
                                          h.api_key, h.api_version,
                                          h.hdr_len, fl, 2, &need), KR_OK);
    ck_assert(!fl[0].found);
    ck_assert(fl[1].found);
    ck_assert_int_eq(fl[1].val, 6000);
}
END_TEST

START_TEST(fields_response)
{
    struct kr_frame_field ec[1] = { { .id = KR_FIELD_ERROR_CODE } };
    struct fb f = { .n = 0 };
    size_t at = 0, hl = 0, need = 0;

    /* SaslHandshake v0 response: CorrelationId, ErrorCode 34, [PLAIN] */
    put32(&f, 0);
    put32(&f, 77);
    put16(&f, 34);
    put32(&f, 1);
    putstr(&f, "PLAIN");
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_response_hdr_len(f.b + 4, f.n - 4, f.n - 4,
                                               KR_API_SASL_HANDSHAKE, 0, &hl,
                                               &need), KR_OK);
    ck_assert_uint_eq(hl, 4);
    ck_assert_int_eq(kr_frame_peek_fields(f.b + 4, f.n - 4, f.n - 4, true,
                                          KR_API_SASL_HANDSHAKE, 0, hl, ec,
                                          1, &need), KR_OK);
    ck_assert(ec[0].found);
    ck_assert_int_eq(ec[0].val, 34);

    /* flexible response header (Metadata v12): CorrelationId + tags */
    f.n = 0;
    put32(&f, 0);
    put32(&f, 1);
    put8(&f, 0);
    put32(&f, 0);               /* ThrottleTimeMs */
    end_frame(&f, at);
    ck_assert_int_eq(kr_frame_response_hdr_len(f.b + 4, f.n - 4, f.n - 4,
                                               KR_API_METADATA, 12, &hl,
                                               &need), KR_OK);
    ck_assert_uint_eq(hl, 5);
    /* ApiVersions v3 is flexible but its response header is v0 */
    ck_assert_int_eq(kr_frame_response_hdr_len(f.b + 4, f.n - 4, f.n - 4,
                                               KR_API_API_VERSIONS, 3, &hl,
                                               &need), KR_OK);
    ck_assert_uint_eq(hl, 4);
}
END_TEST

/* ---- a stream cut at every byte ------------------------------------------ */

struct seen {
    int32_t corr[8];
    int16_t key[8];
    int n;
};

/*
 * Parse as many whole frames as the first len bytes of p hold, the way
 * the session does (size, then header).  Returns the bytes consumed.
 */
static size_t
split(const uint8_t *p, size_t len, struct seen *sn)
{
    size_t off = 0, need;
    struct kr_req_hdr h;
    int32_t size;
    int rc;

    for (;;) {
        rc = kr_frame_size(p + off, len - off, 8, 1 << 20, &size);
        if (rc == KR_AGAIN) {
            return off;
        }
        ck_assert_int_eq(rc, KR_OK);
        rc = kr_frame_peek_request(p + off + 4,
                                   len - off - 4 < (size_t)size
                                   ? len - off - 4 : (size_t)size,
                                   (size_t)size, &h, &need);
        if (rc == KR_AGAIN) {
            ck_assert_uint_gt(need, len - off - 4);
            return off;
        }
        ck_assert_int_eq(rc, KR_OK);
        if (len - off - 4 < (size_t)size) {
            return off;
        }
        ck_assert_int_lt(sn->n, 8);
        sn->corr[sn->n] = h.correlation_id;
        sn->key[sn->n] = h.api_key;
        sn->n++;
        off += 4 + (size_t)size;
    }
}

START_TEST(every_byte_boundary)
{
    struct fb f = { .n = 0 };
    size_t at, cut, used, used2;
    int i;

    at = begin_req(&f, KR_API_METADATA, 12, 100, "client-one", 2);
    put8(&f, 1);
    put8(&f, 0);
    end_frame(&f, at);
    at = begin_req(&f, KR_API_PRODUCE, 3, 101, NULL, 1);
    putstr(&f, NULL);
    put16(&f, 1);
    put32(&f, 100);
    put32(&f, 0);
    end_frame(&f, at);
    at = begin_req(&f, KR_API_HEARTBEAT, 0, 102, "x", 1);
    putstr(&f, "g");
    put32(&f, 1);
    putstr(&f, "m");
    end_frame(&f, at);

    for (cut = 0; cut <= f.n; cut++) {
        struct seen sn = { .n = 0 };

        /* first part, then the rest appended: as two reads */
        used = split(f.b, cut, &sn);
        ck_assert_uint_le(used, cut);
        used2 = split(f.b + used, f.n - used, &sn);
        ck_assert_uint_eq(used + used2, f.n);
        ck_assert_int_eq(sn.n, 3);
        for (i = 0; i < 3; i++) {
            ck_assert_int_eq(sn.corr[i], 100 + i);
        }
        ck_assert_int_eq(sn.key[0], KR_API_METADATA);
        ck_assert_int_eq(sn.key[1], KR_API_PRODUCE);
        ck_assert_int_eq(sn.key[2], KR_API_HEARTBEAT);
    }
}
END_TEST

static Suite *
frame_suite(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, sniff_protocols);
    tcase_add_test(tc, size_limits);
    tcase_add_test(tc, header_v1);
    tcase_add_test(tc, header_v2_tags);
    tcase_add_test(tc, header_v0_and_unknown);
    tcase_add_test(tc, header_malformed);
    tcase_add_test(tc, fields_produce);
    tcase_add_test(tc, fields_fetch_joingroup);
    tcase_add_test(tc, fields_response);
    tcase_add_test(tc, every_byte_boundary);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(frame_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
