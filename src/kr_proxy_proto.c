/*
 * kr_proxy_proto.c - the PROXY protocol's v1 and v2 headers, read
 * incrementally (kr_proxy_proto.h; HAProxy's doc/proxy-protocol.txt).
 *
 * The parser moves through stages as bytes come: START (the first byte
 * tells the version: 'P' for v1, CR for v2's signature), V1 (the line,
 * checked byte by byte as far as a prefix can be, then whole at its
 * CRLF), V2_FIXED (signature, version/command, family, length), V2_ADDR
 * (the family's address block, the IP addresses kept), V2_TLV (type,
 * length, value skipped, each ending inside the header), V2_SKIP (a
 * block read past unparsed: LOCAL, AF_UNSPEC, protocol UNSPEC), then
 * DONE or BAD.  A v2 header's bytes are summed into a CRC32c as they
 * pass, the value of a PP2_TYPE_CRC32C TLV as zeros.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kr_common.h"
#include "kr_proxy_proto.h"

enum pp_stage {
    ST_START = 0,
    ST_V1,
    ST_V2_FIXED,
    ST_V2_ADDR,
    ST_V2_TLV,
    ST_V2_SKIP,
    ST_DONE,
    ST_BAD
};

/* PP2 values (the spec's names). */
#define PP2_CMD_LOCAL 0x0
#define PP2_CMD_PROXY 0x1
#define PP2_FAM_UNSPEC 0x0
#define PP2_FAM_INET 0x1
#define PP2_FAM_INET6 0x2
#define PP2_FAM_UNIX 0x3
#define PP2_TRANS_UNSPEC 0x0
#define PP2_TRANS_STREAM 0x1
#define PP2_TRANS_DGRAM 0x2
#define PP2_TYPE_CRC32C 0x03
#define CRC_NONE 0xff

static const uint8_t v2_sig[12] = {
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A
};
static const char v1_prefix[] = "PROXY ";

static enum kr_pp_status pp_bad(struct kr_pp *p, const char *fmt, ...)
    KR_PRINTF(2, 3);

static enum kr_pp_status
pp_bad(struct kr_pp *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(p->why_buf, sizeof(p->why_buf), fmt, ap);
    va_end(ap);
    p->why = p->why_buf;
    p->stage = ST_BAD;
    return KR_PP_MALFORMED;
}

void
kr_pp_init(struct kr_pp *p, unsigned accept)
{
    memset(p, 0, sizeof(*p));
    p->accept = (uint8_t)(accept & KR_PP_ANY);
    p->stage = ST_START;
    p->crc = 0xFFFFFFFFu;
    p->crc_at = CRC_NONE;
}

const char *
kr_pp_version_name(const struct kr_pp *p)
{
    return p->version == 1 ? "v1" : p->version == 2 ? "v2" : "";
}

const char *
kr_pp_kind_name(enum kr_pp_kind k)
{
    switch (k) {
    case KR_PP_PROXIED:
        return "PROXY";
    case KR_PP_UNKNOWN:
        return "UNKNOWN";
    case KR_PP_LOCAL:
        return "LOCAL";
    }
    return "?";
}

/* ---- CRC32c (Castagnoli; RFC 4960 appendix B) ------------------------ */

/* One byte into a running (inverted) CRC32c, bit by bit: headers are
   small and a table would be 1 KiB for nothing. */
static uint32_t
crc_byte(uint32_t crc, uint8_t b)
{
    int i;

    crc ^= b;
    for (i = 0; i < 8; i++) {
        crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc;
}

uint32_t
kr_pp_crc32c(uint32_t crc, const uint8_t *b, size_t n)
{
    size_t i;

    crc = ~crc;
    for (i = 0; i < n; i++) {
        crc = crc_byte(crc, b[i]);
    }
    return ~crc;
}

static void
crc_add(struct kr_pp *p, const uint8_t *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        p->crc = crc_byte(p->crc, b[i]);
    }
}

/* ---- v1 ------------------------------------------------------------------ */

/* Printable bytes of b (n) for a message: "16 03 01" as hex when any is
   not printable, else the text. */
static const char *
show(const uint8_t *b, size_t n, char *out, size_t olen)
{
    size_t i, used = 0;
    bool text = true;

    for (i = 0; i < n; i++) {
        text = text && b[i] >= 0x20 && b[i] < 0x7f && b[i] != '"';
    }
    out[0] = '\0';
    if (text) {
        snprintf(out, olen, "\"%.*s\"", (int)n, (const char *)b);
        return out;
    }
    for (i = 0; i < n && used + 4 < olen; i++) {
        used += (size_t)snprintf(out + used, olen - used, "%s%02x",
                                 i > 0 ? " " : "", b[i]);
    }
    return out;
}

/* tok (len bytes, no space) could still become a v1 protocol name. */
static bool
v1_proto_prefix(const uint8_t *tok, size_t len)
{
    static const char *const names[] = { "TCP4", "TCP6", "UNKNOWN" };
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(names); i++) {
        if (len <= strlen(names[i]) && memcmp(tok, names[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* tok (len bytes) is a whole v1 protocol name. */
static bool
v1_proto_is(const uint8_t *tok, size_t len, const char *name)
{
    return len == strlen(name) && memcmp(tok, name, len) == 0;
}

/*
 * The fewest bytes any valid line needs after the n bytes in buf, at
 * least 1: the CRLF, the fields not started at their shortest (a dotted
 * quad 7, an IPv6 address 2, a port 1, each after a space), and what the
 * current field lacks of its shortest.  The shortest lines: "PROXY
 * UNKNOWN\r\n" (15), "PROXY TCP6 :: :: 0 0\r\n" (22), "PROXY TCP4 0.0.0.0
 * 0.0.0.0 0 0\r\n" (32).
 */
static size_t
v1_min_left(const struct kr_pp *p)
{
    static const uint8_t min4[4] = { 7, 7, 1, 1 }, min6[4] = { 2, 2, 1, 1 };
    const uint8_t *b = p->buf, *tok, *sp, *ml;
    size_t n = p->n, tl, f = 0, c = 0, rem, j;

    if (n > 0 && b[n - 1] == '\r') {
        return 1;
    }
    if (n < 6) {
        return 15 - n;
    }
    tok = b + 6;
    tl = n - 6;
    sp = memchr(tok, ' ', tl);
    if (sp == NULL) {
        if (tl == 0 || tok[0] == 'U') {
            return 15 - n;              /* tl <= 7: at least 2 */
        }
        return tl == 4 && tok[3] == '4' ? 32 - n : 22 - n;
    }
    if (tok[0] == 'U') {
        return 2;
    }
    ml = tok[3] == '4' ? min4 : min6;
    for (tok = sp + 1; tok < b + n; tok++) {
        if (*tok == ' ') {
            f++;
            c = 0;
        } else {
            c++;
        }
    }
    if (f > 3) {
        return 2;                       /* too many fields: the CRLF's
                                           check refuses it */
    }
    rem = c < ml[f] ? ml[f] - c : 0;
    for (j = f + 1; j < 4; j++) {
        rem += 1u + ml[j];
    }
    return rem + 2;
}

/* A decimal in 0..max, 1-5 digits, no leading zero (but "0"). */
static bool
v1_number(const char *s, size_t len, unsigned max, unsigned *out)
{
    unsigned v = 0;
    size_t i;

    if (len == 0 || len > 5 || (len > 1 && s[0] == '0')) {
        return false;
    }
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* A dotted quad as the spec has it: four decimals 0..255, no leading
   zeros, one dot between each. */
static bool
v1_ipv4(const char *s, size_t len, struct in_addr *a)
{
    uint8_t q[4];
    size_t i = 0, start;
    unsigned v;
    int k;

    for (k = 0; k < 4; k++) {
        start = i;
        while (i < len && s[i] != '.') {
            i++;
        }
        if (!v1_number(s + start, i - start, 255, &v) || i - start > 3) {
            return false;
        }
        q[k] = (uint8_t)v;
        if (k < 3) {
            if (i >= len) {
                return false;
            }
            i++;                        /* the dot */
        }
    }
    if (i != len) {
        return false;
    }
    memcpy(a, q, 4);
    return true;
}

/* An IPv6 address of hexadecimal groups with at most one "::" (no
   embedded dotted quad, no zone): inet_pton's reading, on those bytes. */
static bool
v1_ipv6(const char *s, size_t len, struct in6_addr *a)
{
    char tmp[INET6_ADDRSTRLEN];
    size_t i;

    if (len < 2 || len > 39) {
        return false;
    }
    for (i = 0; i < len; i++) {
        char c = s[i];

        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
              (c >= 'A' && c <= 'F') || c == ':')) {
            return false;
        }
    }
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    return inet_pton(AF_INET6, tmp, a) == 1;
}

/* The next field of line (from *at, ending at a space or at end), as s
   and len; false when there is none or it is empty. */
static bool
v1_field(const char *line, size_t end, size_t *at, const char **s,
         size_t *len)
{
    size_t i = *at;

    if (i > end) {
        return false;
    }
    *s = line + i;
    while (i < end && line[i] != ' ') {
        i++;
    }
    *len = (size_t)(line + i - *s);
    *at = i + 1;                        /* past the space (or end + 1) */
    return *len > 0;
}

/* The whole line (buf, n bytes with its CRLF) is in: parse it. */
static enum kr_pp_status
v1_line(struct kr_pp *p)
{
    const char *line = (const char *)p->buf, *s;
    size_t end = (size_t)p->n - 2, at = 6, len;
    unsigned sport, dport;
    bool six;
    static const char *const what[4] = { "source address",
                                         "destination address",
                                         "source port", "destination port" };
    int k;

    p->size = p->n;
    if (!v1_field(line, end, &at, &s, &len)) {
        return pp_bad(p, "v1: no protocol after \"PROXY \"");
    }
    if (v1_proto_is((const uint8_t *)s, len, "UNKNOWN")) {
        /* "the receiver must ignore anything presented before the
           CRLF" (bytes already checked printable) */
        p->kind = KR_PP_UNKNOWN;
        p->stage = ST_DONE;
        return KR_PP_DONE;
    }
    if (v1_proto_is((const uint8_t *)s, len, "TCP4")) {
        six = false;
    } else if (v1_proto_is((const uint8_t *)s, len, "TCP6")) {
        six = true;
    } else {
        return pp_bad(p, "v1: protocol \"%.*s\" (TCP4, TCP6 or UNKNOWN)",
                      (int)(len > 16 ? 16 : len), s);
    }
    for (k = 0; k < 4; k++) {
        union kr_pp_addr *a = k % 2 == 0 ? &p->src : &p->dst;
        bool ok;

        if (!v1_field(line, end, &at, &s, &len)) {
            return pp_bad(p, "v1 %s: no %s", six ? "TCP6" : "TCP4",
                          what[k]);
        }
        if (k < 2 && !six) {
            ok = v1_ipv4(s, len, &a->in.sin_addr);
            a->in.sin_family = AF_INET;
        } else if (k < 2) {
            ok = v1_ipv6(s, len, &a->in6.sin6_addr);
            a->in6.sin6_family = AF_INET6;
        } else {
            ok = v1_number(s, len, 65535, k == 2 ? &sport : &dport);
        }
        if (!ok) {
            return pp_bad(p, "v1 %s: bad %s \"%.*s\"", six ? "TCP6" : "TCP4",
                          what[k], (int)(len > 40 ? 40 : len), s);
        }
    }
    if (at <= end) {
        return pp_bad(p, "v1: text after the destination port");
    }
    if (six) {
        p->src.in6.sin6_port = htons((uint16_t)sport);
        p->dst.in6.sin6_port = htons((uint16_t)dport);
    } else {
        p->src.in.sin_port = htons((uint16_t)sport);
        p->dst.in.sin_port = htons((uint16_t)dport);
    }
    p->kind = KR_PP_PROXIED;
    p->stage = ST_DONE;
    return KR_PP_DONE;
}

/* One byte c of a v1 line (its first byte was 'P'). */
static enum kr_pp_status
v1_byte(struct kr_pp *p, uint8_t c)
{
    size_t pos = p->n;
    char sh[40];

    p->buf[pos] = c;                    /* pos < KR_PP_V1_MAX: room */
    if (pos < 6) {
        if (c != (uint8_t)v1_prefix[pos]) {
            return pp_bad(p, "not a PROXY protocol header: starts %s",
                          show(p->buf, pos + 1, sh, sizeof(sh)));
        }
    } else if (p->buf[pos - 1] == '\r') {
        if (c != '\n') {
            return pp_bad(p, "v1: CR not followed by LF at offset %zu",
                          pos - 1);
        }
        p->n++;
        return v1_line(p);
    } else if (c == '\n') {
        return pp_bad(p, "v1: LF without CR at offset %zu", pos);
    } else if (c != '\r' && (c < 0x20 || c > 0x7e)) {
        return pp_bad(p, "v1: byte 0x%02x at offset %zu (printable "
                      "US-ASCII only)", c, pos);
    }
    if (pos >= 6 && memchr(p->buf + 6, ' ', pos - 6) == NULL) {
        /* c follows the protocol name so far (bytes 6..pos-1) */
        if (c == ' ' || c == '\r') {
            if (!v1_proto_is(p->buf + 6, pos - 6, "TCP4") &&
                !v1_proto_is(p->buf + 6, pos - 6, "TCP6") &&
                !v1_proto_is(p->buf + 6, pos - 6, "UNKNOWN")) {
                return pp_bad(p, "v1: protocol \"%.*s\" (TCP4, TCP6 or "
                              "UNKNOWN)", (int)(pos - 6),
                              (const char *)p->buf + 6);
            }
            if (c == '\r' && p->buf[6] != 'U') {
                return pp_bad(p, "v1: line ends after the protocol");
            }
        } else if (!v1_proto_prefix(p->buf + 6, pos - 5)) {
            return pp_bad(p, "v1: protocol \"%.*s\" (TCP4, TCP6 or "
                          "UNKNOWN)", (int)(pos - 5),
                          (const char *)p->buf + 6);
        }
    }
    p->n++;
    if (p->n >= KR_PP_V1_MAX) {
        return pp_bad(p, "v1: no CRLF in the first %d bytes",
                      KR_PP_V1_MAX);
    }
    return KR_PP_MORE;
}

/* ---- v2 ------------------------------------------------------------------ */

/* The fixed part is in: what follows it. */
static enum kr_pp_status
v2_fixed_done(struct kr_pp *p)
{
    uint8_t fam = p->fam >> 4, proto = p->fam & 0xf;

    p->left = (uint32_t)p->buf[14] << 8 | p->buf[15];
    p->size = KR_PP_V2_FIXED + p->left;
    if (p->cmd == PP2_CMD_LOCAL) {
        p->kind = KR_PP_LOCAL;          /* "discard the protocol block
                                           including the family" */
        p->stage = ST_V2_SKIP;
        return KR_PP_MORE;
    }
    if (fam == PP2_FAM_UNSPEC || proto == PP2_TRANS_UNSPEC) {
        p->kind = KR_PP_UNKNOWN;        /* "should ignore address
                                           information" */
        p->stage = ST_V2_SKIP;
        return KR_PP_MORE;
    }
    p->addr_len = fam == PP2_FAM_INET ? 12 : fam == PP2_FAM_INET6 ? 36 : 216;
    if (p->left < p->addr_len) {
        return pp_bad(p, "v2: length %" PRIu32 " is shorter than the %s "
                      "address block (%u bytes)", p->left,
                      fam == PP2_FAM_INET ? "AF_INET"
                      : fam == PP2_FAM_INET6 ? "AF_INET6" : "AF_UNIX",
                      (unsigned)p->addr_len);
    }
    /* UDP, and AF_UNIX: not a TCP client: the UNSPEC fallback the spec
       asks of a receiver for combinations it does not support */
    p->kind = fam != PP2_FAM_UNIX && proto == PP2_TRANS_STREAM
                  ? KR_PP_PROXIED : KR_PP_UNKNOWN;
    p->stage = ST_V2_ADDR;
    return KR_PP_MORE;
}

/* One byte c of the v2 fixed part. */
static enum kr_pp_status
v2_fixed_byte(struct kr_pp *p, uint8_t c)
{
    size_t pos = p->n;
    char sh[40];

    p->buf[p->n++] = c;
    if (pos < sizeof(v2_sig) && c != v2_sig[pos]) {
        return pp_bad(p, "not a PROXY protocol header: starts %s",
                      show(p->buf, p->n, sh, sizeof(sh)));
    }
    if (pos == 12) {
        if (c >> 4 != 2) {
            return pp_bad(p, "v2: version %u (only 2 is defined)", c >> 4);
        }
        p->cmd = c & 0xf;
        if (p->cmd != PP2_CMD_LOCAL && p->cmd != PP2_CMD_PROXY) {
            return pp_bad(p, "v2: command 0x%x (LOCAL 0 or PROXY 1)",
                          p->cmd);
        }
    } else if (pos == 13) {
        p->fam = c;
        if (c >> 4 > PP2_FAM_UNIX || (c & 0xf) > PP2_TRANS_DGRAM) {
            return pp_bad(p, "v2: address family and protocol 0x%02x "
                          "(family 0-3, protocol 0-2)", c);
        }
    } else if (pos == 15) {
        return v2_fixed_done(p);
    }
    return KR_PP_MORE;
}

/* The last of the header's bytes went by. */
static enum kr_pp_status
v2_done(struct kr_pp *p)
{
    uint32_t crc = ~p->crc;

    if (p->stage == ST_V2_TLV && p->tlv_n > 0) {
        return pp_bad(p, "v2: a TLV's type and length cut by the "
                      "header's end");
    }
    if (p->has_crc && crc != p->crc_want) {
        return pp_bad(p, "v2: CRC32c 0x%08" PRIx32 " in PP2_TYPE_CRC32C, "
                      "0x%08" PRIx32 " computed", p->crc_want, crc);
    }
    if (p->kind == KR_PP_PROXIED && p->fam >> 4 == PP2_FAM_INET) {
        const uint8_t *a = p->buf + KR_PP_V2_FIXED;

        p->src.in.sin_family = AF_INET;
        memcpy(&p->src.in.sin_addr, a, 4);
        memcpy(&p->src.in.sin_port, a + 8, 2);
        p->dst.in.sin_family = AF_INET;
        memcpy(&p->dst.in.sin_addr, a + 4, 4);
        memcpy(&p->dst.in.sin_port, a + 10, 2);
    } else if (p->kind == KR_PP_PROXIED) {
        const uint8_t *a = p->buf + KR_PP_V2_FIXED;

        p->src.in6.sin6_family = AF_INET6;
        memcpy(&p->src.in6.sin6_addr, a, 16);
        memcpy(&p->src.in6.sin6_port, a + 32, 2);
        p->dst.in6.sin6_family = AF_INET6;
        memcpy(&p->dst.in6.sin6_addr, a + 16, 16);
        memcpy(&p->dst.in6.sin6_port, a + 34, 2);
    }
    p->stage = ST_DONE;
    return KR_PP_DONE;
}

/*
 * Up to n bytes of the block after the fixed part (n <= p->left): the
 * address block, TLVs, or bytes skipped.  *took: how many were taken.
 */
static enum kr_pp_status
v2_block(struct kr_pp *p, const uint8_t *b, size_t n, size_t *took)
{
    size_t k, off;

    *took = 0;
    if (p->stage == ST_V2_SKIP) {
        crc_add(p, b, n);
        *took = n;
        return KR_PP_MORE;
    }
    if (p->stage == ST_V2_ADDR) {
        off = (size_t)(p->size - KR_PP_V2_FIXED - p->left);
        k = p->addr_len - off < n ? p->addr_len - off : n;
        if (off < KR_PP_V2_ADDR_KEEP) {
            size_t keep = KR_PP_V2_ADDR_KEEP - off < k
                              ? KR_PP_V2_ADDR_KEEP - off : k;

            memcpy(p->buf + KR_PP_V2_FIXED + off, b, keep);
        }
        crc_add(p, b, k);
        *took = k;
        if (off + k == p->addr_len) {
            p->stage = ST_V2_TLV;
        }
        return KR_PP_MORE;
    }
    /* ST_V2_TLV */
    if (p->tlv_left > 0) {
        k = p->tlv_left < n ? p->tlv_left : n;
        if (p->crc_at != CRC_NONE) {
            size_t i;

            for (i = 0; i < k; i++) {
                p->crc_want = p->crc_want << 8 | b[i];
                p->crc = crc_byte(p->crc, 0);
            }
        } else {
            crc_add(p, b, k);
        }
        p->tlv_left -= (uint32_t)k;
        if (p->tlv_left == 0) {
            p->crc_at = CRC_NONE;
        }
        *took = k;
        return KR_PP_MORE;
    }
    p->tlv_hdr[p->tlv_n++] = b[0];
    crc_add(p, b, 1);
    *took = 1;
    if (p->tlv_n == 3) {
        uint32_t len = (uint32_t)p->tlv_hdr[1] << 8 | p->tlv_hdr[2];

        p->tlv_n = 0;
        if (len > p->left - 1) {
            return pp_bad(p, "v2: TLV type 0x%02x of %" PRIu32 " bytes runs "
                          "past the header's end (%" PRIu32 " left)",
                          p->tlv_hdr[0], len, p->left - 1);
        }
        if (p->tlv_hdr[0] == PP2_TYPE_CRC32C) {
            if (len != 4 || p->has_crc) {
                return pp_bad(p, "v2: %s PP2_TYPE_CRC32C%s",
                              p->has_crc ? "a second" : "a",
                              len != 4 ? " whose length is not 4" : "");
            }
            p->has_crc = true;
            p->crc_at = 0;
        }
        p->tlv_left = len;
    }
    return KR_PP_MORE;
}

/* ---- feeding -------------------------------------------------------------- */

enum kr_pp_status
kr_pp_feed(struct kr_pp *p, const uint8_t *b, size_t n, size_t *used)
{
    enum kr_pp_status st = KR_PP_MORE;
    size_t i = 0, took;

    *used = 0;
    if (p->stage == ST_DONE) {
        return KR_PP_DONE;
    }
    if (p->stage == ST_BAD) {
        return KR_PP_MALFORMED;
    }
    while (i < n && st == KR_PP_MORE) {
        switch (p->stage) {
        case ST_START:
            if (b[i] == 'P' && (p->accept & KR_PP_V1)) {
                p->version = 1;
                p->stage = ST_V1;
            } else if (b[i] == v2_sig[0] && (p->accept & KR_PP_V2)) {
                p->version = 2;
                p->stage = ST_V2_FIXED;
            } else {
                char sh[40];

                *used = 0;
                return pp_bad(p, "%s: starts %s",
                              b[i] == 'P' ? "a v1 header where only v2 is "
                                            "accepted"
                              : b[i] == v2_sig[0] &&
                                      !(p->accept & KR_PP_V2)
                                  ? "a v2 header where only v1 is accepted"
                                  : "not a PROXY protocol header",
                              show(b, n - i < 8 ? n - i : 8, sh, sizeof(sh)));
            }
            break;
        case ST_V1:
            st = v1_byte(p, b[i]);
            i++;
            break;
        case ST_V2_FIXED:
            crc_add(p, b + i, 1);
            st = v2_fixed_byte(p, b[i]);
            i++;
            if (st == KR_PP_MORE && p->n == KR_PP_V2_FIXED &&
                p->left == 0) {
                st = v2_done(p);
            }
            break;
        default:
            st = v2_block(p, b + i, n - i < p->left ? n - i : p->left,
                          &took);
            i += took;
            p->left -= (uint32_t)took;
            if (st == KR_PP_MORE && p->left == 0) {
                st = v2_done(p);
            }
            break;
        }
    }
    *used = i;
    p->fed += (uint32_t)i;
    return st;
}

size_t
kr_pp_want(const struct kr_pp *p)
{
    switch (p->stage) {
    case ST_START:
        return (p->accept & KR_PP_V1) ? 15 : KR_PP_V2_FIXED;
    case ST_V1:
        return v1_min_left(p);
    case ST_V2_FIXED:
        return KR_PP_V2_FIXED - (size_t)p->n;
    case ST_V2_ADDR:
    case ST_V2_TLV:
    case ST_V2_SKIP:
        return p->left;
    default:
        return 0;
    }
}
