/*
 * check_proxy_proto.c - the PROXY protocol parser (kr_proxy_proto): the
 * headers HAProxy 2.6 sent (captured from `send-proxy`, `send-proxy-v2`
 * and `send-proxy-v2 proxy-v2-options crc32c,unique-id` in front of a
 * socket that printed what it got), the spec's examples and longest
 * lines, each fed whole, byte by byte and kr_pp_want bytes at a time;
 * truncated, oversized and malformed ones (bad signature, version,
 * command, family, v1 numbers and addresses, lone CR or LF, TLVs that
 * overrun, a wrong CRC32c), UNKNOWN and LOCAL.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_proxy_proto.h"
#include "kr_test.h"

/* Hex (spaces allowed) to bytes; returns the count. */
static size_t
unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    unsigned v;

    while (*hex != '\0') {
        if (*hex == ' ') {
            hex++;
            continue;
        }
        ck_assert_msg(sscanf(hex, "%2x", &v) == 1, "bad hex at %s", hex);
        ck_assert_uint_lt(n, cap);
        out[n++] = (uint8_t)v;
        hex += 2;
    }
    return n;
}

/* "ADDR:PORT" or "[ADDR]:PORT" of a. */
static const char *
addr_str(const union kr_pp_addr *a, char *buf, size_t len)
{
    char h[INET6_ADDRSTRLEN];

    if (a->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->in.sin_addr, h, sizeof(h));
        snprintf(buf, len, "%s:%u", h, ntohs(a->in.sin_port));
    } else if (a->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->in6.sin6_addr, h, sizeof(h));
        snprintf(buf, len, "[%s]:%u", h, ntohs(a->in6.sin6_port));
    } else {
        snprintf(buf, len, "none");
    }
    return buf;
}

/*
 * Feed b (n bytes) in pieces of `step` bytes (0: as kr_pp_want says,
 * which must never pass the header's end); the outcome, *consumed the
 * bytes the parser took.
 */
static enum kr_pp_status
feed(struct kr_pp *p, unsigned accept, const uint8_t *b, size_t n,
     size_t step, size_t *consumed)
{
    enum kr_pp_status st = KR_PP_MORE;
    size_t at = 0, used, k;

    kr_pp_init(p, accept);
    while (at < n && st == KR_PP_MORE) {
        k = step;
        if (k == 0) {
            k = kr_pp_want(p);
            KR_TEST_CHECK(k >= 1, "want 0 while MORE at %zu", at);
        }
        if (k > n - at) {
            k = n - at;
        }
        st = kr_pp_feed(p, b + at, k, &used);
        KR_TEST_CHECK(used <= k, "used %zu of %zu", used, k);
        if (step == 0 && st == KR_PP_DONE) {
            KR_TEST_CHECK(used == k, "want overshot: %zu of %zu at %zu",
                          used, k, at);
        }
        if (st == KR_PP_MORE) {
            KR_TEST_CHECK(used == k, "MORE took %zu of %zu", used, k);
        }
        at += used;
    }
    *consumed = at;
    return st;
}

/* A valid header and what it says; the bytes after it are the stream's. */
static const struct good {
    const char *name;
    unsigned accept;
    const char *text;                   /* a v1 line and what follows */
    const char *hex;                    /* or bytes */
    size_t size;                        /* the header's length */
    enum kr_pp_kind kind;
    const char *src, *dst;              /* addr_str, "none" */
    int version;
} good[] = {
    /* HAProxy 2.6 `send-proxy` (kcat-like client 127.0.0.1:44774) */
    { "haproxy v1", KR_PP_ANY, NULL,
      "50524f58592054435034203132372e302e302e31203132372e302e302e312034"
      "343737342033393430310d0a4b41464b41",
      44, KR_PP_PROXIED, "127.0.0.1:44774", "127.0.0.1:39401", 1 },
    /* `send-proxy-v2` */
    { "haproxy v2", KR_PP_ANY, NULL,
      "0d0a0d0a000d0a515549540a2111000c7f0000017f000001c32499ea4b41464b41",
      28, KR_PP_PROXIED, "127.0.0.1:49956", "127.0.0.1:39402", 2 },
    /* `send-proxy-v2 proxy-v2-options crc32c,unique-id` */
    { "haproxy v2 crc32c unique-id", KR_PP_V2, NULL,
      "0d0a0d0a000d0a515549540a2111001c7f0000017f0000018a5e99eb030004cb76"
      "dd780500066162633132334b41464b41",
      44, KR_PP_PROXIED, "127.0.0.1:35422", "127.0.0.1:39403", 2 },
    /* the same over IPv6 ([::1]:40026 to [::1]:39404) */
    { "haproxy v2 ipv6 crc32c", KR_PP_ANY, NULL,
      "0d0a0d0a000d0a515549540a2121002b000000000000000000000000000000010000"
      "00000000000000000000000000019c5a99ec03000405320be14b41464b41",
      59, KR_PP_PROXIED, "[::1]:40026", "[::1]:39404", 2 },
    /* seen from HAProxy in front of nginx (172.19.0.1:42578) */
    { "v2 tcp4 then HTTP", KR_PP_V2, NULL,
      "0d0a0d0a000d0a515549540a2111000cac130001ac130003a6520050474554",
      28, KR_PP_PROXIED, "172.19.0.1:42578", "172.19.0.3:80", 2 },
    /* the spec's example */
    { "spec v1 example", KR_PP_V1,
      "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n",
      NULL, 47, KR_PP_PROXIED, "192.168.0.1:56324", "192.168.0.11:443", 1 },
    /* the spec's longest lines: 56, 104, 107 bytes */
    { "v1 tcp4 longest", KR_PP_ANY,
      "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", NULL,
      56, KR_PP_PROXIED, "255.255.255.255:65535", "255.255.255.255:65535",
      1 },
    { "v1 tcp6 longest", KR_PP_ANY,
      "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n", NULL,
      104, KR_PP_PROXIED,
      "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
      "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535", 1 },
    { "v1 unknown longest", KR_PP_ANY,
      "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n", NULL,
      107, KR_PP_UNKNOWN, "none", "none", 1 },
    /* the shortest lines */
    { "v1 unknown short", KR_PP_V1, "PROXY UNKNOWN\r\n", NULL, 15,
      KR_PP_UNKNOWN, "none", "none", 1 },
    { "v1 tcp6 shortest", KR_PP_V1, "PROXY TCP6 :: :: 0 0\r\n", NULL, 22,
      KR_PP_PROXIED, "[::]:0", "[::]:0", 1 },
    { "v1 tcp4 shortest", KR_PP_V1, "PROXY TCP4 0.0.0.0 0.0.0.0 0 0\r\n",
      NULL, 32, KR_PP_PROXIED, "0.0.0.0:0", "0.0.0.0:0", 1 },
    { "v1 tcp6 short", KR_PP_V1, "PROXY TCP6 :: ::1 0 9092\r\n", NULL, 26,
      KR_PP_PROXIED, "[::]:0", "[::1]:9092", 1 },
    { "v1 tcp4 short", KR_PP_V1, "PROXY TCP4 0.0.0.0 1.2.3.4 0 1\r\n",
      NULL, 32, KR_PP_PROXIED, "0.0.0.0:0", "1.2.3.4:1", 1 },
    { "v1 tcp6 upper case", KR_PP_V1,
      "PROXY TCP6 2001:DB8::7 2001:db8:0:0:0:0:0:1 4242 9092\r\n", NULL,
      55, KR_PP_PROXIED, "[2001:db8::7]:4242", "[2001:db8::1]:9092", 1 },
    /* a trusted sender's claim (the integration test's) */
    { "v1 203.0.113.7", KR_PP_ANY,
      "PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n", NULL, 44, KR_PP_PROXIED, "203.0.113.7:4242", "127.0.0.1:9092", 1 },
    /* v2 LOCAL (HAProxy's health checks): no address block */
    { "v2 local", KR_PP_V2, NULL,
      "0d0a0d0a000d0a515549540a20000000000000", 16, KR_PP_LOCAL, "none",
      "none", 2 },
    /* LOCAL with an address block anyway: skipped, not used */
    { "v2 local with addresses", KR_PP_ANY, NULL,
      "0d0a0d0a000d0a515549540a2011000c0a0000010a000002000100020000",
      28, KR_PP_LOCAL, "none", "none", 2 },
    /* PROXY over AF_UNSPEC, over UDP, over AF_UNIX: real endpoints */
    { "v2 unspec", KR_PP_V2, NULL,
      "0d0a0d0a000d0a515549540a21000004aabbccdd00", 20, KR_PP_UNKNOWN,
      "none", "none", 2 },
    { "v2 udp4", KR_PP_V2, NULL,
      "0d0a0d0a000d0a515549540a2112000c0a0000010a00000200010002", 28,
      KR_PP_UNKNOWN, "none", "none", 2 },
    /* v2 with TLVs: ALPN "kafka", a NOOP, a custom 0xE0 (many long ones:
       tlv_long) */
    { "v2 tlvs", KR_PP_V2, NULL,
      "0d0a0d0a000d0a515549540a2111001ccb00710701020304108c2384"
      "0100056b61666b61" "040000" "e000020102" "01",
      44, KR_PP_PROXIED, "203.0.113.7:4236", "1.2.3.4:9092", 2 },
};

/* g's bytes; a v1 line is followed by a Kafka size prefix (the
   stream's first bytes, not the header's). */
static size_t
good_bytes(const struct good *g, uint8_t *b, size_t cap)
{
    size_t n;

    if (g->text != NULL) {
        n = strlen(g->text);
        ck_assert_uint_le(n + 4, cap);
        memcpy(b, g->text, n);
        memcpy(b + n, "\0\0\0\x10", 4);
        return n + 4;
    }
    return unhex(g->hex, b, cap);
}

START_TEST(good_headers)
{
    const struct good *g = &good[_i];
    static const size_t steps[] = { 1000, 1, 0, 3, 7 };
    uint8_t b[512];
    size_t n = good_bytes(g, b, sizeof(b)), used, i;
    struct kr_pp p;
    char s[80];

    ck_assert_uint_ge(n, g->size);
    for (i = 0; i < KR_ARRAY_LEN(steps); i++) {
        enum kr_pp_status st = feed(&p, g->accept, b, n, steps[i], &used);

        ck_assert_msg(st == KR_PP_DONE, "%s (step %zu): %d %s", g->name,
                      steps[i], (int)st, p.why != NULL ? p.why : "");
        ck_assert_uint_eq(used, g->size);
        ck_assert_uint_eq(p.size, g->size);
        ck_assert_int_eq(p.kind, g->kind);
        ck_assert_int_eq(p.version, g->version);
        ck_assert_str_eq(addr_str(&p.src, s, sizeof(s)), g->src);
        ck_assert_str_eq(addr_str(&p.dst, s, sizeof(s)), g->dst);
        ck_assert_uint_eq(kr_pp_want(&p), 0);
        /* done: nothing more is taken */
        ck_assert_int_eq(kr_pp_feed(&p, b, n, &used), KR_PP_DONE);
        ck_assert_uint_eq(used, 0);
    }
    /* every proper prefix: more needed, want within what is left */
    for (i = 0; i < g->size; i++) {
        enum kr_pp_status st = feed(&p, g->accept, b, i, 1000, &used);

        KR_TEST_CHECK(st == KR_PP_MORE, "%s: prefix %zu: %d %s", g->name, i,
                      (int)st, p.why != NULL ? p.why : "");
        KR_TEST_CHECK(used == i, "%s: prefix %zu used %zu", g->name, i,
                      used);
        KR_TEST_CHECK(kr_pp_want(&p) >= 1 &&
                      kr_pp_want(&p) <= g->size - i,
                      "%s: prefix %zu: want %zu, %zu left", g->name, i,
                      kr_pp_want(&p), g->size - i);
    }
    ck_assert_str_eq(kr_pp_version_name(&p), g->version == 1 ? "v1" : "v2");
}
END_TEST

/* A v2 header with a long TLV list, fed by kr_pp_want. */
START_TEST(tlv_long)
{
    uint8_t b[16 + 12 + 3 * 40 + 40 * 300];
    size_t n = 28, used, i;
    struct kr_pp p;
    char s[64];

    unhex("0d0a0d0a000d0a515549540a21110000c0000201c633640a10921f90", b,
          sizeof(b));
    for (i = 0; i < 40; i++) {
        b[n++] = 0xE0;
        b[n++] = 300 >> 8;
        b[n++] = 300 & 0xff;
        memset(b + n, (int)i, 300);
        n += 300;
    }
    b[14] = (uint8_t)((n - 16) >> 8);
    b[15] = (uint8_t)((n - 16) & 0xff);
    ck_assert_int_eq(feed(&p, KR_PP_V2, b, n, 0, &used), KR_PP_DONE);
    ck_assert_uint_eq(used, n);
    ck_assert_str_eq(addr_str(&p.src, s, sizeof(s)), "192.0.2.1:4242");
    ck_assert_str_eq(addr_str(&p.dst, s, sizeof(s)), "198.51.100.10:8080");
    ck_assert_int_eq(feed(&p, KR_PP_V2, b, n, 1, &used), KR_PP_DONE);
    /* one byte short of its last TLV: the length says more */
    b[15]++;
    ck_assert_int_eq(feed(&p, KR_PP_V2, b, n, 0, &used), KR_PP_MORE);
    ck_assert_uint_eq(kr_pp_want(&p), 1);
    b[15] -= 2;
    ck_assert_int_eq(feed(&p, KR_PP_V2, b, n, 0, &used), KR_PP_MALFORMED);
    ck_assert_ptr_nonnull(strstr(p.why, "TLV type 0xe0 of 300 bytes runs "
                                        "past the header's end (299 "
                                        "left)"));
}
END_TEST

/* A malformed header and a word of why. */
static const struct bad {
    unsigned accept;
    const char *text;                   /* or hex */
    const char *hex;
    const char *why;
} bad[] = {
    /* not the protocol at all */
    { KR_PP_ANY, "GET / HTTP/1.1\r\n", NULL,
      "not a PROXY protocol header: starts \"G" },
    { KR_PP_ANY, NULL, "160301020001", "not a PROXY protocol header: starts "
      "16" },
    { KR_PP_ANY, NULL, "000000170000", "not a PROXY protocol header" },
    { KR_PP_ANY, "POST / HTTP/1.1\r\n", NULL,
      "not a PROXY protocol header: starts \"PO\"" },
    { KR_PP_ANY, "proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n", NULL,
      "not a PROXY protocol header" },
    /* a version the listener does not take */
    { KR_PP_V2, "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\r\n", NULL,
      "a v1 header where only v2 is accepted" },
    { KR_PP_V1, NULL, "0d0a0d0a000d0a515549540a2111000c",
      "a v2 header where only v1 is accepted" },
    /* v2 signature, version, command, family */
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549550a2111000c",
      "not a PROXY protocol header: starts 0d 0a 0d 0a 00 0d 0a 51 55 49 "
      "55" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a1111000c",
      "v2: version 1 (only 2 is defined)" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a3111000c",
      "v2: version 3" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a2211000c",
      "v2: command 0x2 (LOCAL 0 or PROXY 1)" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a2141000c",
      "v2: address family and protocol 0x41" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a2113000c",
      "v2: address family and protocol 0x13" },
    /* lengths */
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a211100080102030405060708",
      "v2: length 8 is shorter than the AF_INET address block (12 bytes)" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a2121000c",
      "shorter than the AF_INET6 address block (36 bytes)" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a21310010",
      "shorter than the AF_UNIX address block (216 bytes)" },
    /* TLVs that do not fit, a cut TLV header, CRC32c */
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a21110011"
      "0a0000010a000002000100020400044142",
      "TLV type 0x04 of 4 bytes runs past the header's end (2 left)" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a2111000e"
      "0a0000010a0000020001000204ff",
      "a TLV's type and length cut by the header's end" },
    /* HAProxy's crc32c header with one address byte changed */
    { KR_PP_ANY, NULL,
      "0d0a0d0a000d0a515549540a2111001c7f0000027f0000018a5e99eb030004cb76"
      "dd780500066162633132334b41464b41",
      "v2: CRC32c 0xcb76dd78 in PP2_TYPE_CRC32C, 0x" },
    { KR_PP_ANY, NULL, "0d0a0d0a000d0a515549540a21110014"
      "0a0000010a0000020001000203000500000000",
      "PP2_TYPE_CRC32C whose length is not 4" },
    /* v1: protocol, fields, numbers */
    { KR_PP_ANY, "PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n", NULL,
      "v1: protocol \"TCP5\"" },
    { KR_PP_ANY, "PROXY tcp4 1.2.3.4 1.2.3.4 1 2\r\n", NULL,
      "v1: protocol \"t\"" },
    { KR_PP_ANY, "PROXY TCP\r\n", NULL, "v1: protocol \"TCP\"" },
    { KR_PP_ANY, "PROXY TCP4\r\n", NULL, "line ends after the protocol" },
    { KR_PP_ANY, "PROXY UNKNOWNX\r\n", NULL, "v1: protocol \"UNKNOWNX\"" },
    { KR_PP_ANY, "PROXY  TCP4 1.2.3.4 1.2.3.4 1 2\r\n", NULL,
      "v1: protocol \"\"" },
    { KR_PP_ANY, "PROXY TCP4 256.1.1.1 1.2.3.4 1 2\r\n", NULL,
      "v1 TCP4: bad source address \"256.1.1.1\"" },
    { KR_PP_ANY, "PROXY TCP4 01.2.3.4 1.2.3.4 1 2\r\n", NULL,
      "bad source address \"01.2.3.4\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n", NULL,
      "bad source address \"1.2.3\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4.5 1.2.3.4 1 2\r\n", NULL,
      "bad source address" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1..3.4 1 2\r\n", NULL,
      "bad destination address \"1..3.4\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 ::1 1 2\r\n", NULL,
      "bad destination address \"::1\"" },
    { KR_PP_ANY, "PROXY TCP6 1.2.3.4 ::1 1 2\r\n", NULL,
      "v1 TCP6: bad source address \"1.2.3.4\"" },
    { KR_PP_ANY, "PROXY TCP6 ::ffff:1.2.3.4 ::1 1 2\r\n", NULL,
      "bad source address \"::ffff:1.2.3.4\"" },
    { KR_PP_ANY, "PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2\r\n", NULL,
      "bad source address" },
    { KR_PP_ANY, "PROXY TCP6 1::2::3 ::1 1 2\r\n", NULL,
      "bad source address \"1::2::3\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n", NULL,
      "bad source port \"65536\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 080 2\r\n", NULL,
      "bad source port \"080\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 -1 2\r\n", NULL,
      "bad source port \"-1\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 1 0x10\r\n", NULL,
      "bad destination port \"0x10\"" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n", NULL,
      "v1 TCP4: no destination port" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 1 2 3\r\n", NULL,
      "text after the destination port" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 1 2 \r\n", NULL,
      "text after the destination port" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4  1.2.3.4 1 2\r\n", NULL,
      "no destination address" },
    /* v1: line endings and bytes */
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n", NULL,
      "v1: LF without CR at offset 30" },
    { KR_PP_ANY, "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\rX", NULL,
      "v1: CR not followed by LF at offset 30" },
    { KR_PP_ANY, "PROXY UNKNOWN \t\r\n", NULL,
      "v1: byte 0x09 at offset 14" },
    { KR_PP_ANY, "PROXY UNKNOWN \x80\r\n", NULL, "byte 0x80" },
};

START_TEST(bad_headers)
{
    const struct bad *t = &bad[_i];
    uint8_t b[512];
    size_t n, used;
    struct kr_pp p;
    size_t step;

    if (t->text != NULL) {
        n = strlen(t->text);
        memcpy(b, t->text, n);
    } else {
        n = unhex(t->hex, b, sizeof(b));
    }
    for (step = 0; step <= 1; step++) {
        enum kr_pp_status st = feed(&p, t->accept, b, n, step == 0 ? 1000 : 1,
                                    &used);

        ck_assert_msg(st == KR_PP_MALFORMED, "case %d: %d, used %zu", _i,
                      (int)st, used);
        ck_assert_ptr_nonnull(p.why);
        ck_assert_msg(strstr(p.why, t->why) != NULL, "case %d: \"%s\", "
                      "want \"%s\"", _i, p.why, t->why);
        ck_assert_uint_eq(kr_pp_want(&p), 0);
        ck_assert_int_eq(kr_pp_feed(&p, b, n, &used), KR_PP_MALFORMED);
        ck_assert_uint_eq(used, 0);
    }
}
END_TEST

/* Oversized v1: 107 bytes without CRLF; a 108-byte UNKNOWN line. */
START_TEST(v1_oversized)
{
    char line[200];
    size_t used;
    struct kr_pp p;

    memset(line, 'f', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    ck_assert_int_eq(feed(&p, KR_PP_ANY, (uint8_t *)line, 106, 1000, &used),
                     KR_PP_MORE);
    ck_assert_uint_eq(kr_pp_want(&p), 2);
    /* the 107th byte is no LF: over */
    ck_assert_int_eq(feed(&p, KR_PP_ANY, (uint8_t *)line, 107, 1000, &used),
                     KR_PP_MALFORMED);
    ck_assert_str_eq(p.why, "v1: no CRLF in the first 107 bytes");
    /* 105 then CRLF: 107, the longest taken */
    memcpy(line + 105, "\r\n", 2);
    ck_assert_int_eq(feed(&p, KR_PP_ANY, (uint8_t *)line, 150, 1, &used),
                     KR_PP_DONE);
    ck_assert_uint_eq(used, 107);
    /* 106 then CRLF: one too many */
    memset(line + 105, 'f', 2);
    memcpy(line + 106, "\r\n", 2);
    ck_assert_int_eq(feed(&p, KR_PP_ANY, (uint8_t *)line, 150, 1000, &used),
                     KR_PP_MALFORMED);
    ck_assert_str_eq(p.why, "v1: no CRLF in the first 107 bytes");
    ck_assert_uint_eq(used, 107);
}
END_TEST

/* Truncated: the header's bytes stop; the parser waits, never guesses. */
START_TEST(truncated)
{
    static const char *const part[] = {
        "P", "PROXY", "PROXY TCP4 1.2.3.4 1.2.3.4 1 2", "PROXY UNKNOWN",
        "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\r",
    };
    uint8_t b[64];
    size_t i, used;
    struct kr_pp p;

    for (i = 0; i < KR_ARRAY_LEN(part); i++) {
        ck_assert_int_eq(feed(&p, KR_PP_ANY, (const uint8_t *)part[i],
                              strlen(part[i]), 1000, &used), KR_PP_MORE);
        ck_assert_uint_eq(used, strlen(part[i]));
    }
    ck_assert_uint_eq(kr_pp_want(&p), 1);
    /* v2: 15 bytes, then the fixed part without its address block */
    unhex("0d0a0d0a000d0a515549540a2111000c7f000001", b, sizeof(b));
    ck_assert_int_eq(feed(&p, KR_PP_V2, b, 15, 1000, &used), KR_PP_MORE);
    ck_assert_uint_eq(kr_pp_want(&p), 1);
    ck_assert_int_eq(feed(&p, KR_PP_V2, b, 20, 1000, &used), KR_PP_MORE);
    ck_assert_uint_eq(kr_pp_want(&p), 8);
    /* nothing fed */
    kr_pp_init(&p, KR_PP_ANY);
    ck_assert_int_eq(kr_pp_feed(&p, b, 0, &used), KR_PP_MORE);
    ck_assert_uint_eq(kr_pp_want(&p), 15);
    kr_pp_init(&p, KR_PP_V2);
    ck_assert_uint_eq(kr_pp_want(&p), 16);
}
END_TEST

/* CRC32c: RFC 3720's check value, and HAProxy's header recomputed. */
START_TEST(crc32c)
{
    uint8_t b[64];
    size_t n;

    ck_assert_uint_eq(kr_pp_crc32c(0, (const uint8_t *)"123456789", 9),
                      0xE3069283u);
    ck_assert_uint_eq(kr_pp_crc32c(kr_pp_crc32c(0, (const uint8_t *)"1234",
                                                4),
                                   (const uint8_t *)"56789", 5),
                      0xE3069283u);
    n = unhex("0d0a0d0a000d0a515549540a2111001c7f0000017f0000018a5e99eb"
              "03000400000000050006616263313233", b, sizeof(b));
    ck_assert_uint_eq(n, 44);
    ck_assert_uint_eq(kr_pp_crc32c(0, b, n), 0xcb76dd78u);
    ck_assert_str_eq(kr_pp_kind_name(KR_PP_PROXIED), "PROXY");
    ck_assert_str_eq(kr_pp_kind_name(KR_PP_UNKNOWN), "UNKNOWN");
    ck_assert_str_eq(kr_pp_kind_name(KR_PP_LOCAL), "LOCAL");
}
END_TEST

/*
 * Lines of every shape (random addresses, short and long, compressed
 * IPv6 forms, ports of 1 to 5 digits) followed by stream bytes, fed as
 * kr_pp_want says: never a byte past the CRLF, the addresses read back.
 */
START_TEST(want_random)
{
    uint32_t x = 12345;
    char line[160], a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN], s[80], w[80];
    size_t n, used;
    struct kr_pp p;
    int i, k;

    for (i = 0; i < 3000; i++) {
        uint8_t ad[2][16];
        unsigned port[2];
        bool six = i % 2 == 1;

        for (k = 0; k < 32; k++) {
            x = x * 1103515245u + 12345u;
            /* many zeros: long runs for "::" */
            ((uint8_t *)ad)[k] = (x >> 16) % 3 == 0 ? 0 : (uint8_t)(x >> 8);
        }
        x = x * 1103515245u + 12345u;
        port[0] = (x >> 8) % (i % 5 == 0 ? 10 : 65536);
        x = x * 1103515245u + 12345u;
        port[1] = (x >> 8) % (i % 7 == 0 ? 100 : 65536);
        inet_ntop(six ? AF_INET6 : AF_INET, ad[0], a, sizeof(a));
        inet_ntop(six ? AF_INET6 : AF_INET, ad[1], b, sizeof(b));
        n = (size_t)snprintf(line, sizeof(line), "PROXY TCP%c %s %s %u %u\r\n",
                             six ? '6' : '4', a, b, port[0], port[1]);
        memcpy(line + n, "\0\0\0\x10", 4);
        n += 4;
        KR_TEST_CHECK(feed(&p, KR_PP_ANY, (uint8_t *)line, n, 0, &used) ==
                      KR_PP_DONE, "%s: %s", line, p.why);
        KR_TEST_CHECK(used == n - 4, "%s: used %zu", line, used);
        snprintf(w, sizeof(w), six ? "[%s]:%u" : "%s:%u", a, port[0]);
        KR_TEST_CHECK(strcmp(addr_str(&p.src, s, sizeof(s)), w) == 0,
                      "%s: %s", line, s);
        snprintf(w, sizeof(w), six ? "[%s]:%u" : "%s:%u", b, port[1]);
        KR_TEST_CHECK(strcmp(addr_str(&p.dst, s, sizeof(s)), w) == 0,
                      "%s: %s", line, s);
    }
}
END_TEST

static Suite *
pp_suite(void)
{
    Suite *s = suite_create("proxy_proto");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, good_headers, 0, (int)KR_ARRAY_LEN(good));
    tcase_add_test(tc, tlv_long);
    tcase_add_loop_test(tc, bad_headers, 0, (int)KR_ARRAY_LEN(bad));
    tcase_add_test(tc, v1_oversized);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, crc32c);
    tcase_add_test(tc, want_random);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(pp_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
