/*
 * kr_proxy_proto.h - HAProxy's PROXY protocol, versions 1 and 2, read on
 * the receiving side: the header a load balancer or proxy sends before
 * the client's own bytes, naming the client's address and port (source:
 * HAProxy's doc/proxy-protocol.txt, "The PROXY protocol Versions 1 & 2").
 *
 * A parser is fed the connection's first bytes as they arrive, in pieces
 * of any size; it takes them up to the header's end and no further, and
 * says how many more it may be given without passing that end
 * (kr_pp_want), so a caller that reads no more than that from its
 * socket never takes a byte of what follows (a TLS ClientHello, a Kafka
 * request) off the socket.  Nothing is allocated; the state is one
 * struct kr_pp of about 300 bytes.
 *
 * What is accepted, strictly as the spec says:
 *   v1  one line of at most 107 bytes ending in CRLF: "PROXY TCP4 SRC DST
 *       SPORT DPORT\r\n" (dotted quads, no leading zeros), "PROXY TCP6
 *       ..." (hexadecimal groups with at most one "::", no embedded IPv4
 *       form), ports 0..65535 without leading zeros, one space between
 *       fields; "PROXY UNKNOWN" followed by CRLF, or by a space and
 *       anything printable up to the CRLF (ignored).  A lone CR or LF, a
 *       byte outside printable US-ASCII, or no CRLF in 107 bytes is
 *       malformed.
 *   v2  the 12-byte signature, version 2, command LOCAL (0) or PROXY (1),
 *       a family 0..3 and a protocol 0..2 (anything else is malformed),
 *       the length, then that many bytes: for PROXY over AF_INET,
 *       AF_INET6 and AF_UNIX the family's address block (a length shorter
 *       than it is malformed), then TLVs, each checked to end within the
 *       length and skipped; PP2_TYPE_CRC32C, when present, is verified
 *       (RFC 4960 appendix B's CRC32c over the whole header with its
 *       value zeroed) and a mismatch is malformed.  The block of a LOCAL
 *       header, and of AF_UNSPEC or protocol UNSPEC, is skipped unparsed
 *       (the spec: ignored).  The length bounds the header (16 + 65535
 *       bytes); nothing of it but the fixed part and the IP addresses is
 *       kept.
 * Outcomes for the connection (enum kr_pp_kind): PROXIED, with the
 * source and destination of the header; UNKNOWN (v1 UNKNOWN; v2 PROXY
 * over AF_UNSPEC, AF_UNIX or an unspecified protocol: "the receiver
 * should ignore address information") and LOCAL (v2 LOCAL: the proxy's
 * own connection, a health check), with which the connection's real
 * endpoints stand.
 *
 * Pure: no sockets, no libevent, no config.
 */
#ifndef KR_PROXY_PROTO_H
#define KR_PROXY_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Versions a listener accepts (a mask: proxy_protocol = v1, v2, any). */
#define KR_PP_V1 0x1u
#define KR_PP_V2 0x2u
#define KR_PP_ANY (KR_PP_V1 | KR_PP_V2)

/* Longest v1 line, CRLF included (the spec's worst case). */
#define KR_PP_V1_MAX 107
/* The v2 fixed part: signature, version/command, family, length. */
#define KR_PP_V2_FIXED 16
/* Bytes kept of a v2 address block: AF_INET6's addresses and ports. */
#define KR_PP_V2_ADDR_KEEP 36

/* What one kr_pp_feed call came to. */
enum kr_pp_status {
    KR_PP_MORE = 0,                     /* every byte fed was the
                                           header's; it goes on */
    KR_PP_DONE,                         /* the header ended: *used bytes
                                           of this feed were its last,
                                           the rest are the stream's */
    KR_PP_MALFORMED                     /* not a header this parser
                                           accepts: kr_pp.why says what */
};

/* What a complete header says about the connection. */
enum kr_pp_kind {
    KR_PP_PROXIED = 0,                  /* src and dst are the client's
                                           and the address it reached */
    KR_PP_UNKNOWN,                      /* no usable address (v1 UNKNOWN,
                                           v2 AF_UNSPEC, AF_UNIX, protocol
                                           UNSPEC): the real endpoints */
    KR_PP_LOCAL                         /* v2 LOCAL: the proxy's own
                                           connection: the real
                                           endpoints */
};

/* An IPv4 or IPv6 socket address (what PROXIED gives). */
union kr_pp_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/*
 * One connection's parser: kr_pp_init, then kr_pp_feed until DONE or
 * MALFORMED.  The fields after `why` are the result (valid once DONE);
 * the others are the parser's own.
 */
struct kr_pp {
    uint8_t accept;                     /* KR_PP_V1 | KR_PP_V2 */
    uint8_t version;                    /* 1 or 2 once known, else 0 */
    uint8_t stage;                      /* the parser's (kr_proxy_proto.c) */
    uint8_t fam;                        /* v2: the family/protocol byte */
    uint8_t cmd;                        /* v2: the command */
    uint8_t tlv_hdr[3];                 /* v2: a TLV's type and length as
                                           they arrive */
    uint8_t tlv_n;                      /* ... bytes of it so far */
    uint8_t crc_at;                     /* v2: 0 while in a CRC32C TLV's
                                           value, 0xff otherwise */
    uint16_t n;                         /* bytes in buf */
    uint16_t addr_len;                  /* v2: address block bytes the
                                           family has (0, 12, 36, 216) */
    uint32_t left;                      /* v2: bytes of the header still
                                           to come after the fixed part */
    uint32_t tlv_left;                  /* v2: value bytes of the TLV
                                           being skipped */
    uint32_t crc;                       /* v2: CRC32c so far (inverted) */
    uint32_t crc_want;                  /* v2: the CRC32C TLV's value */
    uint32_t fed;                       /* bytes taken so far (for log
                                           lines) */
    bool has_crc;                       /* v2: a CRC32C TLV was seen */
    uint8_t buf[KR_PP_V1_MAX + 1];      /* the v1 line, or the v2 fixed
                                           part then the kept address
                                           bytes */
    const char *why;                    /* MALFORMED: what was wrong, one
                                           line without the peer (static
                                           text or text in why_buf) */
    char why_buf[96];
    /* the result, once DONE */
    enum kr_pp_kind kind;
    uint32_t size;                      /* the header's bytes in all */
    union kr_pp_addr src, dst;          /* PROXIED: the client's address
                                           and port, and the one it
                                           connected to; zero otherwise */
};

/* A parser that accepts the versions in mask accept (KR_PP_V1, _V2). */
void kr_pp_init(struct kr_pp *p, unsigned accept);

/*
 * Feed the next n bytes of the connection (any n, 0 included).  Returns
 * MORE when all n were taken and the header is not complete, DONE when
 * it is (*used: how many of these n were the header's; the src/dst/kind
 * fields are set), MALFORMED when the bytes are no header accepted here
 * (why set; *used up to the byte found wrong).  After DONE or MALFORMED
 * the parser takes nothing more (the same outcome again, *used 0).
 */
enum kr_pp_status kr_pp_feed(struct kr_pp *p, const uint8_t *b, size_t n,
                             size_t *used);

/*
 * How many bytes the parser may be fed next without passing the
 * header's end, whatever valid header it turns out to be: at least 1
 * while the header goes on, 0 once DONE or MALFORMED.  For a v2 header
 * it is exactly what remains once the fixed part is in; for v1, whose
 * end is only its CRLF, a lower bound from the fields still to come.
 */
size_t kr_pp_want(const struct kr_pp *p);

/* "v1" or "v2" of a parser that found its version, "" before. */
const char *kr_pp_version_name(const struct kr_pp *p);

/* "PROXY", "UNKNOWN" or "LOCAL" (a DONE parser's kind). */
const char *kr_pp_kind_name(enum kr_pp_kind k);

/*
 * CRC32c (Castagnoli, RFC 4960 appendix B) of n bytes, continuing crc
 * (0 to start): the checksum PP2_TYPE_CRC32C carries.
 */
uint32_t kr_pp_crc32c(uint32_t crc, const uint8_t *b, size_t n);

#endif /* KR_PROXY_PROTO_H */
