/*
 * kr_principal.c - TLS client principals as Kafka gives them: the
 * subject as Java's X500Principal.getName() writes it, and Kafka's
 * ssl.principal.mapping.rules (see kr_principal.h for what is matched and
 * what is not).
 *
 * Two parts: a DER reader and the name's writer; the rule list (Kafka's
 * grammar, Java's replacements and case mapping), whose patterns
 * kr_principal_re.c translates for PCRE2, which runs them.
 */
#include "config.h"

#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "kr_principal.h"
#include "kr_principal_int.h"

/* ---- a growing output buffer -------------------------------------------- */

struct kr_pbuf {
    char *p;
    size_t len;
    size_t cap;
    bool oom;                    /* an allocation failed: p is stale */
};

static bool
pb_reserve(struct kr_pbuf *b, size_t more)
{
    size_t cap;
    char *np;

    if (b->oom) {
        return false;
    }
    if (more < b->cap - b->len) {
        return true;
    }
    if (more > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    cap = b->cap ? b->cap : 64;
    while (cap - b->len <= more) {
        cap *= 2;
    }
    np = realloc(b->p, cap);
    if (np == NULL) {
        b->oom = true;
        return false;
    }
    b->p = np;
    b->cap = cap;
    b->p[b->len] = '\0';
    return true;
}

static void
pb_put(struct kr_pbuf *b, const void *s, size_t n)
{
    if (pb_reserve(b, n) && n > 0) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
    }
}

static void
pb_putc(struct kr_pbuf *b, char c)
{
    pb_put(b, &c, 1);
}

/* One code point as UTF-8 (cp <= 0x10FFFF, never a surrogate). */
static size_t
utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static void
pb_put_cp(struct kr_pbuf *b, uint32_t cp)
{
    char u[4];

    pb_put(b, u, utf8_encode(cp, u));
}

static void
pb_put_hex(struct kr_pbuf *b, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    if (!pb_reserve(b, 2 * n)) {
        return;
    }
    for (i = 0; i < n; i++) {
        b->p[b->len++] = hex[p[i] >> 4];
        b->p[b->len++] = hex[p[i] & 15];
    }
    b->p[b->len] = '\0';
}

/*
 * Bytes -> code points as Java's UTF-8 decoder does when it replaces
 * (new String(bytes, UTF_8)): each malformed sequence becomes one U+FFFD,
 * its length as Java counts it (a lead byte whose second byte is wrong:
 * 1; a surrogate or an overlong 3-byte form with a good second byte: the
 * bytes Java consumed); a truncated sequence at the very end is one
 * U+FFFD for all of it.  out has room for n code points.  Returns how
 * many were written.
 */
#define KR_REPL 0xFFFDu

static bool
cont(uint8_t b)
{
    return (b & 0xC0) == 0x80;
}

static size_t
utf8_decode_java(const uint8_t *s, size_t n, uint32_t *out)
{
    size_t sp = 0, dp = 0;

    while (sp < n) {
        uint8_t b1 = s[sp++];

        if (b1 < 0x80) {
            out[dp++] = b1;
        } else if ((b1 & 0xE0) == 0xC0 && (b1 & 0x1E) != 0) {
            if (sp < n) {
                uint8_t b2 = s[sp++];

                if (!cont(b2)) {
                    out[dp++] = KR_REPL;
                    sp--;
                } else {
                    out[dp++] = ((uint32_t)(b1 & 0x1F) << 6) | (b2 & 0x3F);
                }
                continue;
            }
            out[dp++] = KR_REPL;
            break;
        } else if ((b1 & 0xF0) == 0xE0) {
            if (sp + 1 < n) {
                uint8_t b2 = s[sp], b3 = s[sp + 1];
                uint32_t c;

                if ((b1 == 0xE0 && (b2 & 0xE0) == 0x80) || !cont(b2) ||
                    !cont(b3)) {
                    out[dp++] = KR_REPL;
                    if (!((b1 == 0xE0 && (b2 & 0xE0) == 0x80) || !cont(b2))) {
                        sp++;    /* b2 was good: the replacement takes it */
                    }
                    continue;
                }
                sp += 2;
                c = ((uint32_t)(b1 & 0x0F) << 12) |
                    ((uint32_t)(b2 & 0x3F) << 6) | (b3 & 0x3F);
                out[dp++] = (c >= 0xD800 && c <= 0xDFFF) ? KR_REPL : c;
                continue;
            }
            if (sp < n && ((b1 == 0xE0 && (s[sp] & 0xE0) == 0x80) ||
                           !cont(s[sp]))) {
                out[dp++] = KR_REPL;
                continue;
            }
            out[dp++] = KR_REPL;
            break;
        } else if ((b1 & 0xF8) == 0xF0) {
            if (sp + 2 < n) {
                uint8_t b2 = s[sp], b3 = s[sp + 1], b4 = s[sp + 2];
                uint32_t c = ((uint32_t)(b1 & 0x07) << 18) |
                             ((uint32_t)(b2 & 0x3F) << 12) |
                             ((uint32_t)(b3 & 0x3F) << 6) | (b4 & 0x3F);

                if (!cont(b2) || !cont(b3) || !cont(b4) || c < 0x10000 ||
                    c > 0x10FFFF) {
                    out[dp++] = KR_REPL;
                    if (b1 > 0xF4 ||
                        (b1 == 0xF0 && (b2 < 0x90 || b2 > 0xBF)) ||
                        (b1 == 0xF4 && (b2 & 0xF0) != 0x80) || !cont(b2)) {
                        /* 1 byte */
                    } else if (!cont(b3)) {
                        sp += 1;
                    } else {
                        sp += 2;
                    }
                    continue;
                }
                sp += 3;
                out[dp++] = c;
                continue;
            }
            if (b1 > 0xF4 ||
                (sp < n && ((b1 == 0xF0 && (s[sp] < 0x90 || s[sp] > 0xBF)) ||
                            (b1 == 0xF4 && (s[sp] & 0xF0) != 0x80) ||
                            !cont(s[sp])))) {
                out[dp++] = KR_REPL;
                continue;
            }
            sp++;
            if (sp < n && !cont(s[sp])) {
                out[dp++] = KR_REPL;
                continue;
            }
            out[dp++] = KR_REPL;
            break;
        } else {
            out[dp++] = KR_REPL;
        }
    }
    return dp;
}

/* ---- DER ----------------------------------------------------------------- */

struct kr_der {
    const uint8_t *p;
    size_t n;
};

/*
 * The next TLV of d: its tag byte and content; d moves past it.  Lengths
 * as the JDK reads them: definite, in up to 4 length octets, minimal or
 * not.
 */
static int
der_next(struct kr_der *d, uint8_t *tag, struct kr_der *content,
         const char **why)
{
    size_t off = 2, len;
    uint8_t l;

    if (d->n < 2) {
        *why = "a truncated DER element";
        return KR_EPROTO;
    }
    *tag = d->p[0];
    if ((*tag & 0x1F) == 0x1F) {
        *why = "a tag number above 30 (the JDK refuses it)";
        return KR_EPROTO;
    }
    l = d->p[1];
    if (l < 0x80) {
        len = l;
    } else if (l == 0x80) {
        *why = "an indefinite length (BER), which krelay does not read";
        return KR_EUNSUPPORTED;
    } else {
        unsigned k = l & 0x7F, i;

        if (k > 4 || k > d->n - 2) {
            *why = "a DER length of more than 4 octets or past the end";
            return KR_EPROTO;
        }
        len = 0;
        for (i = 0; i < k; i++) {
            len = (len << 8) | d->p[2 + i];
        }
        off += k;
    }
    if (len > d->n - off) {
        *why = "a DER length past the end of its container";
        return KR_EPROTO;
    }
    content->p = d->p + off;
    content->n = len;
    d->p += off + len;
    d->n -= off + len;
    return KR_OK;
}

/* ---- the name as X500Principal.getName() writes it ---------------------- */

/* Types the JDK writes with a keyword in RFC 2253 form, by OID content. */
static const struct {
    const char *kw;
    uint8_t len;
    uint8_t oid[10];
} kr_x500_kw[] = {
    { "CN", 3, { 0x55, 0x04, 0x03 } },
    { "C", 3, { 0x55, 0x04, 0x06 } },
    { "L", 3, { 0x55, 0x04, 0x07 } },
    { "ST", 3, { 0x55, 0x04, 0x08 } },
    { "STREET", 3, { 0x55, 0x04, 0x09 } },
    { "O", 3, { 0x55, 0x04, 0x0A } },
    { "OU", 3, { 0x55, 0x04, 0x0B } },
    /* 0.9.2342.19200300.100.1.25 and .1 */
    { "DC", 10, { 0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01,
                  0x19 } },
    { "UID", 10, { 0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01,
                   0x01 } },
};

/*
 * Value tags the JDK writes as text (primitive UTF8String,
 * PrintableString, T61String, IA5String, GeneralString, BMPString).
 */
static bool
text_tag(uint8_t tag)
{
    return tag == 0x0C || tag == 0x13 || tag == 0x14 || tag == 0x16 ||
           tag == 0x1B || tag == 0x1E;
}

/* A big number in base 1e9 limbs, least significant first. */
struct kr_bignum {
    uint32_t *limb;
    size_t n;
};

static void
bn_mul_add(struct kr_bignum *b, uint32_t mul, uint32_t add)
{
    uint64_t carry = add;
    size_t i;

    for (i = 0; i < b->n; i++) {
        uint64_t v = (uint64_t)b->limb[i] * mul + carry;

        b->limb[i] = (uint32_t)(v % 1000000000u);
        carry = v / 1000000000u;
    }
    while (carry) {
        b->limb[b->n++] = (uint32_t)(carry % 1000000000u);
        carry /= 1000000000u;
    }
}

/* b -= v, for b >= v (v < 1e9). */
static void
bn_sub_small(struct kr_bignum *b, uint32_t v)
{
    size_t i = 0;
    uint64_t borrow = v;

    while (borrow && i < b->n) {
        if (b->limb[i] >= borrow) {
            b->limb[i] -= (uint32_t)borrow;
            borrow = 0;
        } else {
            b->limb[i] = (uint32_t)(b->limb[i] + 1000000000u - borrow);
            borrow = 1;
        }
        i++;
    }
    while (b->n > 0 && b->limb[b->n - 1] == 0) {
        b->n--;
    }
}

static void
bn_put(struct kr_pbuf *out, const struct kr_bignum *b)
{
    char dec[16];
    size_t i;

    if (b->n == 0) {
        pb_putc(out, '0');
        return;
    }
    snprintf(dec, sizeof(dec), "%u", (unsigned)b->limb[b->n - 1]);
    pb_put(out, dec, strlen(dec));
    for (i = b->n - 1; i-- > 0;) {
        snprintf(dec, sizeof(dec), "%09u", (unsigned)b->limb[i]);
        pb_put(out, dec, 9);
    }
}

/* The longest OID the JDK reads (content octets; measured: 4097 fails). */
#define KR_OID_MAX 4096

/*
 * An OID's content octets: checked as the JDK checks them (not empty, at
 * most KR_OID_MAX octets, no subidentifier starting with 0x80, the last
 * octet ending one), written
 * in dotted form when out is not NULL.
 */
static int
oid_put(struct kr_pbuf *out, const struct kr_der *oid, const char **why)
{
    struct kr_bignum b;
    size_t i;
    bool first = true, start = true;

    if (oid->n == 0 || (oid->p[oid->n - 1] & 0x80) != 0) {
        *why = "an empty or unterminated OID (the JDK refuses it)";
        return KR_EPROTO;
    }
    if (oid->n > KR_OID_MAX) {
        *why = "an OID of more than 4096 octets (the JDK refuses it)";
        return KR_EPROTO;
    }
    for (i = 0; i < oid->n; i++) {
        if (start && oid->p[i] == 0x80) {
            *why = "an OID subidentifier with a leading 0x80 (the JDK "
                   "refuses it)";
            return KR_EPROTO;
        }
        start = (oid->p[i] & 0x80) == 0;
    }
    if (out == NULL) {
        return KR_OK;
    }
    /* 7 bits an octet: at most n * 7 / 29 + 1 limbs of 1e9 (> 2^29). */
    b.limb = malloc((oid->n * 7 / 29 + 2) * sizeof(*b.limb));
    if (b.limb == NULL) {
        *why = "out of memory";
        return KR_ENOMEM;
    }
    b.n = 0;
    for (i = 0; i < oid->n; i++) {
        bn_mul_add(&b, 128, oid->p[i] & 0x7F);
        if (oid->p[i] & 0x80) {
            continue;
        }
        if (first) {
            /* the first subidentifier is 40 * arc1 + arc2 (arc1 <= 2) */
            uint32_t arc1;

            if (b.n <= 1 && (b.n == 0 || b.limb[0] < 40)) {
                arc1 = 0;
            } else if (b.n <= 1 && b.limb[0] < 80) {
                arc1 = 1;
            } else {
                arc1 = 2;
            }
            bn_sub_small(&b, 40 * arc1);
            pb_putc(out, (char)('0' + arc1));
            first = false;
        }
        pb_putc(out, '.');
        bn_put(out, &b);
        b.n = 0;
    }
    free(b.limb);
    return KR_OK;
}

/* DER length octets of n, minimal, into out (at most 5). */
static size_t
der_len_put(size_t n, uint8_t out[5])
{
    size_t k = 0, i;
    uint8_t be[4];

    if (n < 0x80) {
        out[0] = (uint8_t)n;
        return 1;
    }
    while (n > 0 && k < 4) {
        be[k++] = (uint8_t)(n & 0xFF);
        n >>= 8;
    }
    out[0] = (uint8_t)(0x80 | k);
    for (i = 0; i < k; i++) {
        out[1 + i] = be[k - 1 - i];
    }
    return 1 + k;
}

static bool
x500_special(uint32_t c)
{
    return c == ',' || c == '=' || c == '+' || c == '<' || c == '>' ||
           c == '#' || c == ';' || c == '"' || c == '\\';
}

/*
 * A BMPString's bytes as Java's new String(bytes, UTF_16BE) reads them:
 * surrogate pairs joined, a lone surrogate and an odd last byte each
 * U+FFFD.  Returns the code points written to out (at most n).
 */
static size_t
utf16be_decode_java(const uint8_t *s, size_t n, uint32_t *out)
{
    size_t sp = 0, dp = 0;

    while (sp + 1 < n) {
        uint32_t u = (uint32_t)s[sp] << 8 | s[sp + 1];

        sp += 2;
        if (u >= 0xD800 && u <= 0xDBFF && sp + 1 < n) {
            uint32_t l = (uint32_t)s[sp] << 8 | s[sp + 1];

            if (l >= 0xDC00 && l <= 0xDFFF) {
                sp += 2;
                out[dp++] = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
                continue;
            }
        }
        out[dp++] = (u >= 0xD800 && u <= 0xDFFF) ? KR_REPL : u;
    }
    if (sp < n) {
        out[dp++] = KR_REPL;            /* an odd byte left */
    }
    return dp;
}

/*
 * A text value's code points as the JDK (17.0.21, Debian 12's) reads its
 * string type: BMPString as UTF-16BE; T61String, PrintableString and
 * IA5String one character per byte (ISO-8859-1); UTF8String and
 * GeneralString as UTF-8.  (17.0.15 read them all as UTF-8.)
 */
static size_t
text_decode_java(uint8_t tag, const uint8_t *s, size_t n, uint32_t *out)
{
    size_t i;

    switch (tag) {
    case 0x1E:
        return utf16be_decode_java(s, n, out);
    case 0x13:
    case 0x14:
    case 0x16:
        for (i = 0; i < n; i++) {
            out[i] = s[i];
        }
        return n;
    default:
        return utf8_decode_java(s, n, out);
    }
}

/* A text value of string type tag, decoded and escaped as the JDK does. */
static int
value_text_put(struct kr_pbuf *out, uint8_t tag, const struct kr_der *v,
               const char **why)
{
    uint32_t *cp, *esc;
    size_t n, i, k = 0, lead, trail;

    cp = malloc((v->n + 1) * 4 * sizeof(*cp));
    if (cp == NULL) {
        *why = "out of memory";
        return KR_ENOMEM;
    }
    esc = cp + v->n;
    n = text_decode_java(tag, v->p, v->n, cp);
    for (i = 0; i < n; i++) {
        if (x500_special(cp[i])) {
            esc[k++] = '\\';
            esc[k++] = cp[i];
        } else if (cp[i] == 0) {
            esc[k++] = '\\';
            esc[k++] = '0';
            esc[k++] = '0';
        } else {
            esc[k++] = cp[i];
        }
    }
    /* then every leading and trailing space or CR is escaped */
    for (lead = 0; lead < k && (esc[lead] == ' ' || esc[lead] == '\r');
         lead++) {
    }
    for (trail = k; trail > lead &&
                    (esc[trail - 1] == ' ' || esc[trail - 1] == '\r');
         trail--) {
    }
    for (i = 0; i < k; i++) {
        if (i < lead || i >= trail) {
            pb_putc(out, '\\');
        }
        pb_put_cp(out, esc[i]);
    }
    free(cp);
    return KR_OK;
}

/* One AVA: SEQUENCE { OID, value } with nothing after the value. */
static int
ava_put(struct kr_pbuf *out, struct kr_der ava, const char **why)
{
    struct kr_der oid, val;
    const char *kw = NULL;
    uint8_t tag, vtag, lenb[5];
    size_t i;
    int rc;

    rc = der_next(&ava, &tag, &oid, why);
    if (rc != KR_OK) {
        return rc;
    }
    if (tag != 0x06) {
        *why = "an AVA whose type is not an OID (the JDK refuses it)";
        return KR_EPROTO;
    }
    rc = der_next(&ava, &vtag, &val, why);
    if (rc != KR_OK) {
        return rc;
    }
    if (ava.n != 0) {
        *why = "an AVA with bytes after its value (the JDK refuses it)";
        return KR_EPROTO;
    }
    for (i = 0; i < KR_ARRAY_LEN(kr_x500_kw); i++) {
        if (oid.n == kr_x500_kw[i].len &&
            memcmp(oid.p, kr_x500_kw[i].oid, oid.n) == 0) {
            kw = kr_x500_kw[i].kw;
            break;
        }
    }
    if (kw != NULL) {
        pb_put(out, kw, strlen(kw));
    } else {
        rc = oid_put(out, &oid, why);
        if (rc != KR_OK) {
            return rc;
        }
    }
    pb_putc(out, '=');
    if (kw != NULL && text_tag(vtag)) {
        return value_text_put(out, vtag, &val, why);
    }
    /* '#' and the value's DER, its length re-encoded minimally */
    pb_putc(out, '#');
    pb_put_hex(out, &vtag, 1);
    pb_put_hex(out, lenb, der_len_put(val.n, lenb));
    pb_put_hex(out, val.p, val.n);
    return KR_OK;
}

int
kr_principal_x500_name_der(const uint8_t *der, size_t n, char **out,
                           size_t *len, const char **why)
{
    struct kr_der all = { der, n }, seq, it, *rdn = NULL;
    struct kr_pbuf b = { NULL, 0, 0, false };
    const char *dummy;
    size_t nrdn = 0, i;
    uint8_t tag;
    int rc;

    if (why == NULL) {
        why = &dummy;
    }
    *out = NULL;
    rc = der_next(&all, &tag, &seq, why);
    if (rc != KR_OK) {
        return rc;
    }
    if (tag != 0x30) {
        *why = "a Name that is not a SEQUENCE";
        return KR_EUNSUPPORTED;
    }
    if (all.n != 0) {
        *why = "bytes after the Name";
        return KR_EPROTO;
    }
    /* the RDNs, to write them last first */
    for (it = seq; it.n > 0; nrdn++) {
        struct kr_der set;

        rc = der_next(&it, &tag, &set, why);
        if (rc != KR_OK) {
            return rc;
        }
        if (tag != 0x31) {
            *why = "an RDN that is not a SET (the JDK refuses it)";
            return KR_EPROTO;
        }
    }
    if (nrdn > 0) {
        rdn = malloc(nrdn * sizeof(*rdn));
        if (rdn == NULL) {
            *why = "out of memory";
            return KR_ENOMEM;
        }
    }
    for (it = seq, i = 0; i < nrdn; i++) {
        rc = der_next(&it, &tag, &rdn[i], why);
        if (rc != KR_OK) {
            goto fail;                   /* not reached: read above */
        }
    }
    pb_reserve(&b, 0);
    for (i = nrdn; i-- > 0;) {
        struct kr_der set = rdn[i];
        bool first = true;

        if (i != nrdn - 1) {
            pb_putc(&b, ',');
        }
        while (set.n > 0) {
            struct kr_der ava;

            rc = der_next(&set, &tag, &ava, why);
            if (rc != KR_OK) {
                goto fail;
            }
            if (tag != 0x30) {
                *why = "an AVA that is not a SEQUENCE (the JDK refuses it)";
                rc = KR_EPROTO;
                goto fail;
            }
            if (!first) {
                pb_putc(&b, '+');
            }
            first = false;
            rc = ava_put(&b, ava, why);
            if (rc != KR_OK) {
                goto fail;
            }
        }
    }
    if (b.oom) {
        *why = "out of memory";
        rc = KR_ENOMEM;
        goto fail;
    }
    free(rdn);
    *out = b.p;
    if (len != NULL) {
        *len = b.len;
    }
    return KR_OK;
fail:
    free(rdn);
    free(b.p);
    return rc;
}

int
kr_principal_x500_name(const X509_NAME *name, char **out, size_t *len,
                       const char **why)
{
    unsigned char *der = NULL;
    const char *dummy;
    int n, rc;

    if (why == NULL) {
        why = &dummy;
    }
    *out = NULL;
    n = i2d_X509_NAME(name, &der);
    if (n < 0) {
        *why = "the name could not be encoded (OpenSSL)";
        return KR_ENOMEM;
    }
    rc = kr_principal_x500_name_der(der, (size_t)n, out, len, why);
    OPENSSL_free(der);
    return rc;
}

/* ---- case mapping: Java's toLowerCase/toUpperCase(Locale.ENGLISH) ---- */

/*
 * Java's upper-case mappings to more than one character (Unicode's
 * SpecialCasing.txt, unconditional), sorted, as JDK 17 makes them: made
 * with
 *   for cp: s = new String(Character.toChars(cp)).toUpperCase(ENGLISH);
 *   if (s.codePointCount(0, s.length()) > 1) print cp and s
 */
static const struct {
    uint32_t cp;
    uint32_t to0, to1, to2;      /* 0: none */
} kr_upper_x[] = {
    { 0x00DF, 0x0053, 0x0053, 0 }, { 0x0149, 0x02BC, 0x004E, 0 },
    { 0x01F0, 0x004A, 0x030C, 0 }, { 0x0390, 0x0399, 0x0308, 0x0301 },
    { 0x03B0, 0x03A5, 0x0308, 0x0301 }, { 0x0587, 0x0535, 0x0552, 0 },
    { 0x1E96, 0x0048, 0x0331, 0 }, { 0x1E97, 0x0054, 0x0308, 0 },
    { 0x1E98, 0x0057, 0x030A, 0 }, { 0x1E99, 0x0059, 0x030A, 0 },
    { 0x1E9A, 0x0041, 0x02BE, 0 }, { 0x1F50, 0x03A5, 0x0313, 0 },
    { 0x1F52, 0x03A5, 0x0313, 0x0300 }, { 0x1F54, 0x03A5, 0x0313, 0x0301 },
    { 0x1F56, 0x03A5, 0x0313, 0x0342 }, { 0x1F80, 0x1F08, 0x0399, 0 },
    { 0x1F81, 0x1F09, 0x0399, 0 }, { 0x1F82, 0x1F0A, 0x0399, 0 },
    { 0x1F83, 0x1F0B, 0x0399, 0 }, { 0x1F84, 0x1F0C, 0x0399, 0 },
    { 0x1F85, 0x1F0D, 0x0399, 0 }, { 0x1F86, 0x1F0E, 0x0399, 0 },
    { 0x1F87, 0x1F0F, 0x0399, 0 }, { 0x1F88, 0x1F08, 0x0399, 0 },
    { 0x1F89, 0x1F09, 0x0399, 0 }, { 0x1F8A, 0x1F0A, 0x0399, 0 },
    { 0x1F8B, 0x1F0B, 0x0399, 0 }, { 0x1F8C, 0x1F0C, 0x0399, 0 },
    { 0x1F8D, 0x1F0D, 0x0399, 0 }, { 0x1F8E, 0x1F0E, 0x0399, 0 },
    { 0x1F8F, 0x1F0F, 0x0399, 0 }, { 0x1F90, 0x1F28, 0x0399, 0 },
    { 0x1F91, 0x1F29, 0x0399, 0 }, { 0x1F92, 0x1F2A, 0x0399, 0 },
    { 0x1F93, 0x1F2B, 0x0399, 0 }, { 0x1F94, 0x1F2C, 0x0399, 0 },
    { 0x1F95, 0x1F2D, 0x0399, 0 }, { 0x1F96, 0x1F2E, 0x0399, 0 },
    { 0x1F97, 0x1F2F, 0x0399, 0 }, { 0x1F98, 0x1F28, 0x0399, 0 },
    { 0x1F99, 0x1F29, 0x0399, 0 }, { 0x1F9A, 0x1F2A, 0x0399, 0 },
    { 0x1F9B, 0x1F2B, 0x0399, 0 }, { 0x1F9C, 0x1F2C, 0x0399, 0 },
    { 0x1F9D, 0x1F2D, 0x0399, 0 }, { 0x1F9E, 0x1F2E, 0x0399, 0 },
    { 0x1F9F, 0x1F2F, 0x0399, 0 }, { 0x1FA0, 0x1F68, 0x0399, 0 },
    { 0x1FA1, 0x1F69, 0x0399, 0 }, { 0x1FA2, 0x1F6A, 0x0399, 0 },
    { 0x1FA3, 0x1F6B, 0x0399, 0 }, { 0x1FA4, 0x1F6C, 0x0399, 0 },
    { 0x1FA5, 0x1F6D, 0x0399, 0 }, { 0x1FA6, 0x1F6E, 0x0399, 0 },
    { 0x1FA7, 0x1F6F, 0x0399, 0 }, { 0x1FA8, 0x1F68, 0x0399, 0 },
    { 0x1FA9, 0x1F69, 0x0399, 0 }, { 0x1FAA, 0x1F6A, 0x0399, 0 },
    { 0x1FAB, 0x1F6B, 0x0399, 0 }, { 0x1FAC, 0x1F6C, 0x0399, 0 },
    { 0x1FAD, 0x1F6D, 0x0399, 0 }, { 0x1FAE, 0x1F6E, 0x0399, 0 },
    { 0x1FAF, 0x1F6F, 0x0399, 0 }, { 0x1FB2, 0x1FBA, 0x0399, 0 },
    { 0x1FB3, 0x0391, 0x0399, 0 }, { 0x1FB4, 0x0386, 0x0399, 0 },
    { 0x1FB6, 0x0391, 0x0342, 0 }, { 0x1FB7, 0x0391, 0x0342, 0x0399 },
    { 0x1FBC, 0x0391, 0x0399, 0 }, { 0x1FC2, 0x1FCA, 0x0399, 0 },
    { 0x1FC3, 0x0397, 0x0399, 0 }, { 0x1FC4, 0x0389, 0x0399, 0 },
    { 0x1FC6, 0x0397, 0x0342, 0 }, { 0x1FC7, 0x0397, 0x0342, 0x0399 },
    { 0x1FCC, 0x0397, 0x0399, 0 }, { 0x1FD2, 0x0399, 0x0308, 0x0300 },
    { 0x1FD3, 0x0399, 0x0308, 0x0301 }, { 0x1FD6, 0x0399, 0x0342, 0 },
    { 0x1FD7, 0x0399, 0x0308, 0x0342 }, { 0x1FE2, 0x03A5, 0x0308, 0x0300 },
    { 0x1FE3, 0x03A5, 0x0308, 0x0301 }, { 0x1FE4, 0x03A1, 0x0313, 0 },
    { 0x1FE6, 0x03A5, 0x0342, 0 }, { 0x1FE7, 0x03A5, 0x0308, 0x0342 },
    { 0x1FF2, 0x1FFA, 0x0399, 0 }, { 0x1FF3, 0x03A9, 0x0399, 0 },
    { 0x1FF4, 0x038F, 0x0399, 0 }, { 0x1FF6, 0x03A9, 0x0342, 0 },
    { 0x1FF7, 0x03A9, 0x0342, 0x0399 }, { 0x1FFC, 0x03A9, 0x0399, 0 },
    { 0xFB00, 0x0046, 0x0046, 0 }, { 0xFB01, 0x0046, 0x0049, 0 },
    { 0xFB02, 0x0046, 0x004C, 0 }, { 0xFB03, 0x0046, 0x0046, 0x0049 },
    { 0xFB04, 0x0046, 0x0046, 0x004C }, { 0xFB05, 0x0053, 0x0054, 0 },
    { 0xFB06, 0x0053, 0x0054, 0 }, { 0xFB13, 0x0544, 0x0546, 0 },
    { 0xFB14, 0x0544, 0x0535, 0 }, { 0xFB15, 0x0544, 0x053B, 0 },
    { 0xFB16, 0x054E, 0x0546, 0 }, { 0xFB17, 0x0544, 0x053D, 0 },
};

static pthread_once_t kr_case_once = PTHREAD_ONCE_INIT;
static locale_t kr_case_loc;     /* C.UTF-8, or 0: non-ASCII unchanged */

static void
case_init(void)
{
    kr_case_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/*
 * cp lower- or upper-cased as Java's String.toLowerCase/toUpperCase
 * (Locale.ENGLISH) maps it, into out; returns how many code points.
 */
static size_t
case_map(uint32_t cp, bool upper, uint32_t out[3])
{
    if (cp < 0x80) {
        if (upper && cp >= 'a' && cp <= 'z') {
            cp -= 32;
        } else if (!upper && cp >= 'A' && cp <= 'Z') {
            cp += 32;
        }
        out[0] = cp;
        return 1;
    }
    if (!upper && cp == 0x130) {
        out[0] = 'i';            /* Java: I with dot above -> i + U+0307 */
        out[1] = 0x307;
        return 2;
    }
    if (upper) {
        size_t lo = 0, hi = KR_ARRAY_LEN(kr_upper_x);

        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;

            if (cp < kr_upper_x[mid].cp) {
                hi = mid;
            } else if (cp > kr_upper_x[mid].cp) {
                lo = mid + 1;
            } else {
                out[0] = kr_upper_x[mid].to0;
                out[1] = kr_upper_x[mid].to1;
                out[2] = kr_upper_x[mid].to2;
                return out[2] ? 3 : 2;
            }
        }
    }
    pthread_once(&kr_case_once, case_init);
    if (kr_case_loc != (locale_t)0) {
        wint_t w = upper ? towupper_l((wint_t)cp, kr_case_loc)
                         : towlower_l((wint_t)cp, kr_case_loc);

        if (w <= 0x10FFFF && !(w >= 0xD800 && w <= 0xDFFF)) {
            cp = (uint32_t)w;
        }
    }
    out[0] = cp;
    return 1;
}

/* ---- ssl.principal.mapping.rules ---------------------------------------- */

struct kr_repl_piece {
    uint32_t group;              /* KR_REPL_LIT: literal lit[off, off+len) */
    size_t off;
    size_t len;
};

#define KR_REPL_LIT UINT32_MAX

struct kr_principal_rule {
    bool is_default;
    char casemap;                /* 0, 'L' or 'U' */
    struct kr_pre *re;           /* NULL for DEFAULT */
    struct kr_repl_piece *piece;
    size_t npiece;
    uint32_t *lit;               /* the replacement's literal code points */
};

struct kr_principal_rules {
    struct kr_principal_rule *r;
    size_t n;
};

/* A growing array of code points. */
struct kr_cps {
    uint32_t *p;
    size_t n;
    size_t cap;
    bool oom;
};

static void
cps_put(struct kr_cps *c, const uint32_t *s, size_t n)
{
    if (c->oom || n == 0) {
        return;
    }
    if (n > c->cap - c->n) {
        size_t cap = c->cap ? c->cap : 64;
        uint32_t *np;

        while (n > cap - c->n) {
            if (cap > SIZE_MAX / 8) {
                c->oom = true;
                return;
            }
            cap *= 2;
        }
        np = realloc(c->p, cap * sizeof(*np));
        if (np == NULL) {
            c->oom = true;
            return;
        }
        c->p = np;
        c->cap = cap;
    }
    memcpy(c->p + c->n, s, n * sizeof(*s));
    c->n += n;
}

/* Strict UTF-8 -> code points; false with *bad (byte offset) if not. */
static bool
utf8_decode_strict(const uint8_t *s, size_t n, uint32_t *out, size_t *nout,
                   size_t *bad)
{
    size_t i = 0, k = 0;

    while (i < n) {
        uint8_t b = s[i];
        uint32_t c, min;
        size_t len, j;

        if (b < 0x80) {
            out[k++] = b;
            i++;
            continue;
        }
        if ((b & 0xE0) == 0xC0) {
            len = 2;
            c = b & 0x1F;
            min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            len = 3;
            c = b & 0x0F;
            min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            len = 4;
            c = b & 0x07;
            min = 0x10000;
        } else {
            *bad = i;
            return false;
        }
        if (len > n - i) {
            *bad = i;
            return false;
        }
        for (j = 1; j < len; j++) {
            if (!cont(s[i + j])) {
                *bad = i;
                return false;
            }
            c = (c << 6) | (s[i + j] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
            *bad = i;
            return false;
        }
        out[k++] = c;
        i += len;
    }
    *nout = k;
    return true;
}

static bool
line_break(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x85 || c == 0x2028 ||
           c == 0x2029;
}

static bool
java_space(uint32_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static void
rule_free(struct kr_principal_rule *r)
{
    kr_pre_free(r->re);
    free(r->piece);
    free(r->lit);
}

void
kr_principal_mapping_rules_free(struct kr_principal_rules *r)
{
    size_t i;

    if (r == NULL) {
        return;
    }
    for (i = 0; i < r->n; i++) {
        rule_free(&r->r[i]);
    }
    free(r->r);
    free(r);
}

size_t
kr_principal_mapping_rules_count(const struct kr_principal_rules *r)
{
    return r == NULL ? 0 : r->n;
}

/*
 * The replacement as Kafka hands it to Java: SslPrincipalMapper first
 * turns "$N" whose group N does not exist into "\$N" (only when the
 * pattern has groups; N as Java's appendReplacement reads it: digits
 * dropped from the right while above the count and >= 10; "$0..." left
 * alone), inserting at the index of each "$N" in the ORIGINAL text into
 * the text as rewritten so far (so a second insertion lands one place
 * early per earlier one, as Kafka's does).  Then Java's replacement
 * syntax: '\' quotes the next character, "$N" is group N (the longest
 * number not above the count).  col[] gives each code point's column.
 * Returns false with *at (index into in) and why on what Java throws.
 */
static bool
repl_build(const uint32_t *in, const uint32_t *incol, size_t n,
           const struct kr_pre *re, struct kr_principal_rule *r,
           uint32_t *errcol, const char **why)
{
    unsigned ngroups = re->ngroups;
    struct kr_cps v = { NULL, 0, 0, false }, vcol = { NULL, 0, 0, false };
    struct kr_cps lit = { NULL, 0, 0, false };
    struct kr_repl_piece *pc = NULL;
    size_t npc = 0, i, cur;
    bool ok = false;

    cps_put(&v, in, n);
    cps_put(&vcol, incol, n);
    if (ngroups > 0) {
        i = 0;
        while (i < n) {
            size_t d = i + 1, gs;
            uint64_t num = 0;

            if (in[i] != '$' || d >= n || in[d] < '0' || in[d] > '9') {
                i++;
                continue;
            }
            gs = d;
            while (d < n && in[d] >= '0' && in[d] <= '9') {
                if (num <= INT32_MAX) {
                    num = num * 10 + (in[d] - '0');
                }
                d++;
            }
            i = d;
            if (in[gs] == '0') {
                continue;
            }
            if (num > INT32_MAX) {
                *errcol = incol[gs - 1];
                *why = "a group number too large for Java (Kafka fails "
                       "every client this rule matches)";
                goto out;
            }
            while (num > ngroups && num >= 10) {
                num /= 10;
            }
            if (num > ngroups && !v.oom) {
                /* insert '\' at gs - 1 of v as it is now */
                uint32_t bs = '\\', c = incol[gs - 1];
                size_t at = gs - 1;

                cps_put(&v, &bs, 1);
                cps_put(&vcol, &c, 1);
                if (v.oom || vcol.oom) {
                    break;
                }
                memmove(v.p + at + 1, v.p + at,
                        (v.n - 1 - at) * sizeof(*v.p));
                memmove(vcol.p + at + 1, vcol.p + at,
                        (vcol.n - 1 - at) * sizeof(*vcol.p));
                v.p[at] = bs;
                vcol.p[at] = c;
            }
        }
    }
    if (v.oom || vcol.oom) {
        *why = "out of memory";
        goto out;
    }
    pc = malloc((v.n + 1) * sizeof(*pc));
    if (pc == NULL) {
        *why = "out of memory";
        goto out;
    }
    for (cur = 0; cur < v.n;) {
        uint32_t c = v.p[cur];

        if (c == '\\') {
            if (cur + 1 >= v.n) {
                *errcol = vcol.p[cur];
                *why = "'\\' at the end of the replacement (Java refuses "
                       "it: Kafka fails every client this rule matches)";
                goto out;
            }
            c = v.p[cur + 1];
            cur += 2;
        } else if (c == '$') {
            uint32_t ref;

            if (cur + 1 >= v.n) {
                *errcol = vcol.p[cur];
                *why = "'$' at the end of the replacement (Java refuses "
                       "it: Kafka fails every client this rule matches)";
                goto out;
            }
            if (v.p[cur + 1] == '{') {
                /* ${name}: ASCII letters and digits, then '}' */
                char name[64];
                size_t k = 0, at = cur;

                cur += 2;
                while (cur < v.n && ((v.p[cur] >= 'a' && v.p[cur] <= 'z') ||
                                     (v.p[cur] >= 'A' && v.p[cur] <= 'Z') ||
                                     (v.p[cur] >= '0' && v.p[cur] <= '9'))) {
                    if (k + 1 < sizeof(name)) {
                        name[k] = (char)v.p[cur];
                    }
                    k++;
                    cur++;
                }
                if (k == 0 || cur >= v.n || v.p[cur] != '}' ||
                    (name[0] >= '0' && name[0] <= '9')) {
                    *errcol = vcol.p[at];
                    *why = "a malformed group name reference ${...} (Java "
                           "refuses it: Kafka fails every client this rule "
                           "matches)";
                    goto out;
                }
                cur++;
                ref = k < sizeof(name)
                    ? kr_pre_group_named(re, name, k) : 0;
                if (ref == 0) {
                    *errcol = vcol.p[at];
                    *why = "a reference ${...} to a group name the pattern "
                           "does not have (Java refuses it: Kafka fails "
                           "every client this rule matches)";
                    goto out;
                }
                pc[npc].group = ref;
                pc[npc].off = pc[npc].len = 0;
                npc++;
                continue;
            }
            if (v.p[cur + 1] < '0' || v.p[cur + 1] > '9') {
                *errcol = vcol.p[cur];
                *why = "'$' not followed by a group number (Java refuses "
                       "it: Kafka fails every client this rule matches)";
                goto out;
            }
            ref = v.p[cur + 1] - '0';
            cur += 2;
            while (cur < v.n && v.p[cur] >= '0' && v.p[cur] <= '9' &&
                   ref * 10 + (v.p[cur] - '0') <= ngroups) {
                ref = ref * 10 + (v.p[cur] - '0');
                cur++;
            }
            if (ref > ngroups) {
                *errcol = vcol.p[cur - 1];
                *why = "a reference to a group the pattern does not have "
                       "(Java refuses it: Kafka fails every client this "
                       "rule matches)";
                goto out;
            }
            pc[npc].group = ref;
            pc[npc].off = pc[npc].len = 0;
            npc++;
            continue;
        } else {
            cur++;
        }
        /* a literal code point: extend the last literal piece */
        if (npc == 0 || pc[npc - 1].group != KR_REPL_LIT) {
            pc[npc].group = KR_REPL_LIT;
            pc[npc].off = lit.n;
            pc[npc].len = 0;
            npc++;
        }
        cps_put(&lit, &c, 1);
        pc[npc - 1].len++;
    }
    if (lit.oom) {
        *why = "out of memory";
        goto out;
    }
    r->piece = pc;
    r->npiece = npc;
    r->lit = lit.p;
    pc = NULL;
    lit.p = NULL;
    ok = true;
out:
    free(pc);
    free(lit.p);
    free(v.p);
    free(vcol.p);
    return ok;
}

/* The rule's text for messages: at most 40 characters, then "...". */
static void
rule_quote(const uint32_t *cp, size_t b, size_t e, char *q, size_t qlen)
{
    struct kr_pbuf pb = { NULL, 0, 0, false };
    size_t i;

    for (i = b; i < e && i < b + 40; i++) {
        pb_put_cp(&pb, cp[i] < 0x20 ? '?' : cp[i]);
    }
    if (e > b + 40) {
        pb_put(&pb, "...", 3);
    }
    snprintf(q, qlen, "%s", pb.p != NULL && !pb.oom ? pb.p : "");
    free(pb.p);
}

static bool
at_word(const uint32_t *cp, size_t i, size_t e, const char *w)
{
    size_t k;

    for (k = 0; w[k] != '\0'; k++) {
        if (i + k >= e || cp[i + k] != (uint8_t)w[k]) {
            return false;
        }
    }
    return true;
}

/* The rules' text as code points, each with its column, up to e. */
struct kr_rtext {
    const uint32_t *cp;
    const uint32_t *col;
    size_t e;
};

/*
 * The part of a rule from t->cp[*i] up to its next unescaped '/' (the
 * pattern or the replacement, '\' pairs kept as they are, as Kafka's
 * ((\\.|[^\\/])*) reads them): [*b, *e), *i past the '/'.  False with
 * *errcol and *why when there is no such '/'.
 */
static bool
rule_part(const struct kr_rtext *t, size_t *i, size_t *b, size_t *e,
          bool pattern, uint32_t *errcol, const char **why)
{
    size_t k = *i;

    while (k < t->e && t->cp[k] != '/') {
        if (t->cp[k] == '\\') {
            if (k + 1 >= t->e || line_break(t->cp[k + 1])) {
                *errcol = t->col[k];
                *why = "a '\\' at the end of the rule or before a line "
                       "break";
                return false;
            }
            k += 2;
        } else {
            k++;
        }
    }
    if (k >= t->e) {
        *errcol = t->col[*i < t->e ? *i : t->e - 1];
        *why = pattern ? "no '/' after the pattern (a rule is "
                         "RULE:pattern/replacement/[LU])"
                       : "no '/' after the replacement (a rule is "
                         "RULE:pattern/replacement/[LU])";
        return false;
    }
    *b = *i;
    *e = k;
    *i = k + 1;
    return true;
}

/*
 * RULE:pattern/replacement/[LU] at t->cp[*i] ("RULE:" checked): *r
 * compiled, *i past it.  KR_ERROR with *errcol and *why (static, or
 * whybuf), KR_ENOMEM.
 */
static int
rule_parse(const struct kr_rtext *t, size_t *i, struct kr_principal_rule *r,
           uint32_t *errcol, const char **why, char *whybuf, size_t whylen)
{
    struct kr_pre_char *pat;
    size_t pb, pe, rb, re, k;
    int rc;

    *i += 5;
    if (!rule_part(t, i, &pb, &pe, true, errcol, why) ||
        !rule_part(t, i, &rb, &re, false, errcol, why)) {
        return KR_ERROR;
    }
    if (*i < t->e && (t->cp[*i] == 'L' || t->cp[*i] == 'U')) {
        r->casemap = (char)t->cp[*i];
        (*i)++;
    }
    pat = malloc((pe - pb + 1) * sizeof(*pat));
    if (pat == NULL) {
        return KR_ENOMEM;
    }
    for (k = pb; k < pe; k++) {
        pat[k - pb].cp = t->cp[k];
        pat[k - pb].col = t->col[k];
    }
    rc = kr_pre_compile(pat, pe - pb, &r->re, errcol, whybuf, whylen);
    free(pat);
    if (rc != KR_OK) {
        *why = whybuf;
        return rc;
    }
    if (!repl_build(t->cp + rb, t->col + rb, re - rb, r->re, r, errcol,
                    why)) {
        kr_pre_free(r->re);
        r->re = NULL;
        return strcmp(*why, "out of memory") == 0 ? KR_ENOMEM : KR_ERROR;
    }
    return KR_OK;
}

static bool
rules_add(struct kr_principal_rules *rs, size_t *cap,
          const struct kr_principal_rule *r)
{
    if (rs->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 4;
        struct kr_principal_rule *nr = realloc(rs->r, nc * sizeof(*nr));

        if (nr == NULL) {
            return false;
        }
        rs->r = nr;
        *cap = nc;
    }
    rs->r[rs->n++] = *r;
    return true;
}

int
kr_principal_mapping_rules_parse(const char *text,
                                 struct kr_principal_rules **out, char *err,
                                 size_t errlen)
{
    struct kr_principal_rules *rs;
    struct kr_rtext t;
    uint32_t *cp, *col, errcol = 0;
    size_t n = strlen(text), ncp = 0, bad, b, i, k, cap = 0;
    unsigned ruleno = 0;
    char q[200], whybuf[200];
    const char *why = NULL;
    int rc = KR_ENOMEM;

    *out = NULL;
    snprintf(err, errlen, "out of memory");
    cp = malloc((n + 1) * sizeof(*cp));
    col = malloc((n + 1) * sizeof(*col));
    rs = calloc(1, sizeof(*rs));
    if (cp == NULL || col == NULL || rs == NULL) {
        goto fail;
    }
    if (!utf8_decode_strict((const uint8_t *)text, n, cp, &ncp, &bad)) {
        snprintf(err, errlen, "byte %zu: not UTF-8", bad + 1);
        rc = KR_ERROR;
        goto fail;
    }
    for (i = 0; i < ncp; i++) {
        col[i] = (uint32_t)(i + 1);
    }
    /* Java's trim(), then entries: \s* (DEFAULT | RULE:...)? \s* (,|$) */
    b = 0;
    t.cp = cp;
    t.col = col;
    t.e = ncp;
    while (b < t.e && cp[b] <= 0x20) {
        b++;
    }
    while (t.e > b && cp[t.e - 1] <= 0x20) {
        t.e--;
    }
    for (i = b;;) {
        struct kr_principal_rule r;
        size_t start;

        while (i < t.e && java_space(cp[i])) {
            i++;
        }
        if (i == t.e) {
            break;
        }
        if (cp[i] == ',') {              /* an empty entry: ignored */
            i++;
            continue;
        }
        start = i;
        ruleno++;
        memset(&r, 0, sizeof(r));
        if (at_word(cp, i, t.e, "DEFAULT")) {
            r.is_default = true;
            i += 7;
        } else if (at_word(cp, i, t.e, "RULE:")) {
            rc = rule_parse(&t, &i, &r, &errcol, &why, whybuf,
                            sizeof(whybuf));
            if (rc != KR_OK) {
                goto rule_err;
            }
        } else {
            errcol = col[start];
            why = "not DEFAULT nor RULE:pattern/replacement/[LU]";
            rc = KR_ERROR;
            goto rule_err;
        }
        while (i < t.e && java_space(cp[i])) {
            i++;
        }
        if (i < t.e && cp[i] != ',') {
            rule_free(&r);
            for (k = i; k < t.e && cp[k] != ','; k++) {
            }
            rule_quote(cp, i, k, whybuf, sizeof(whybuf));
            rule_quote(cp, start, i, q, sizeof(q));
            snprintf(err, errlen, "rule %u (\"%s\"), column %u: \"%s\" after "
                     "the rule (a rule ends with /, /L or /U, then ',' or "
                     "the end)", ruleno, q, (unsigned)col[i], whybuf);
            rc = KR_ERROR;
            goto fail;
        }
        if (!rules_add(rs, &cap, &r)) {
            rule_free(&r);
            rc = KR_ENOMEM;
            goto fail;
        }
        if (i < t.e) {
            i++;                         /* the ',' */
        }
        continue;
rule_err:
        if (rc == KR_ENOMEM) {
            goto fail;
        }
        for (k = i; k < t.e && cp[k] != ','; k++) {
        }
        rule_quote(cp, start, k, q, sizeof(q));
        snprintf(err, errlen, "rule %u (\"%s\"), column %u: %s", ruleno, q,
                 (unsigned)errcol, why);
        goto fail;
    }
    free(cp);
    free(col);
    if (errlen > 0) {
        err[0] = '\0';
    }
    *out = rs;
    return KR_OK;
fail:
    free(cp);
    free(col);
    kr_principal_mapping_rules_free(rs);
    return rc;
}

const char *
kr_principal_map_outcome_str(enum kr_principal_map_outcome o)
{
    switch (o) {
    case KR_PRINCIPAL_MAPPED: return "mapped";
    case KR_PRINCIPAL_NO_RULE: return "no mapping rule applies";
    case KR_PRINCIPAL_TOO_COSTLY: return "a mapping rule took too long";
    case KR_PRINCIPAL_ENOMEM: return "out of memory";
    default: return "unknown";
    }
}

/*
 * The name to map: its code points (s, n), their UTF-8 (u8, what PCRE2
 * searches) and, for each byte offset of u8 that starts a character, the
 * index of that character (cp_at; cp_at[u8len] = n).
 */
struct kr_pname {
    const uint32_t *s;
    size_t n;
    char *u8;
    size_t u8len;
    size_t *cp_at;
    size_t *byte_at;             /* the inverse: byte offset of s[i] */
};

/* Java's name.replaceAll(pattern, replacement) into res. */
static enum kr_principal_map_outcome
rule_apply(const struct kr_principal_rule *r, const struct kr_pname *nm,
           struct kr_pre_subject *sj, struct kr_cps *res)
{
    size_t last = 0, from = 0, ms, me, gs, ge, i;

    for (;;) {
        switch (kr_pre_find(r->re, sj, nm->byte_at[from])) {
        case KR_PRE_MATCH:
            break;
        case KR_PRE_NOMATCH:
            goto tail;
        case KR_PRE_COSTLY:
            return KR_PRINCIPAL_TOO_COSTLY;
        default:
            return KR_PRINCIPAL_ENOMEM;
        }
        (void)kr_pre_group(sj, 0, &ms, &me);
        ms = nm->cp_at[ms];
        me = nm->cp_at[me];
        cps_put(res, nm->s + last, ms - last);
        for (i = 0; i < r->npiece; i++) {
            const struct kr_repl_piece *p = &r->piece[i];

            if (p->group == KR_REPL_LIT) {
                cps_put(res, r->lit + p->off, p->len);
            } else if (kr_pre_group(sj, p->group, &gs, &ge)) {
                gs = nm->cp_at[gs];
                ge = nm->cp_at[ge];
                cps_put(res, nm->s + gs, ge - gs);
            }
        }
        last = me;
        /* Java's find(): after an empty match, one character further
           (Java: one UTF-16 unit; see kr_principal_re.c) */
        from = me == ms ? me + 1 : me;
        if (from > nm->n) {
            break;
        }
    }
tail:
    cps_put(res, nm->s + last, nm->n - last);
    return res->oom ? KR_PRINCIPAL_ENOMEM : KR_PRINCIPAL_MAPPED;
}

/* nm->u8 and the offset maps from nm->s; false on allocation failure. */
static bool
pname_init(struct kr_pname *nm)
{
    struct kr_pbuf pb = { NULL, 0, 0, false };
    size_t i, b;

    nm->cp_at = NULL;
    nm->byte_at = malloc((nm->n + 1) * sizeof(*nm->byte_at));
    pb_reserve(&pb, 4 * nm->n);
    if (nm->byte_at == NULL || pb.oom) {
        free(pb.p);
        nm->u8 = NULL;
        return false;
    }
    for (i = 0; i < nm->n; i++) {
        nm->byte_at[i] = pb.len;
        pb_put_cp(&pb, nm->s[i]);
    }
    nm->byte_at[nm->n] = pb.len;
    nm->u8 = pb.p;
    nm->u8len = pb.len;
    nm->cp_at = malloc((pb.len + 1) * sizeof(*nm->cp_at));
    if (nm->cp_at == NULL || pb.oom) {
        return false;
    }
    for (i = 0, b = 0; b <= pb.len; b++) {
        while (i < nm->n && nm->byte_at[i + 1] <= b) {
            i++;
        }
        nm->cp_at[b] = i;        /* at a character's first byte: its index */
    }
    return true;
}

enum kr_principal_map_outcome
kr_principal_map(const struct kr_principal_rules *rules, const char *name,
                 size_t len, char **out, size_t *outlen)
{
    struct kr_cps res = { NULL, 0, 0, false };
    struct kr_pname nm;
    struct kr_pre_subject sj;
    struct kr_pbuf pb = { NULL, 0, 0, false };
    uint32_t *s = NULL;
    enum kr_principal_map_outcome o = KR_PRINCIPAL_NO_RULE;
    const struct kr_principal_rule *hit = NULL;
    size_t i;
    bool ready;

    *out = NULL;
    memset(&nm, 0, sizeof(nm));
    s = malloc((len + 1) * sizeof(*s));
    if (s == NULL) {
        return KR_PRINCIPAL_ENOMEM;
    }
    nm.s = s;
    nm.n = utf8_decode_java((const uint8_t *)name, len, s);
    ready = pname_init(&nm);
    ready = kr_pre_subject_init(&sj, nm.u8, nm.u8len) && ready;
    if (!ready) {
        o = KR_PRINCIPAL_ENOMEM;
        goto out;
    }
    for (i = 0; i < (rules != NULL ? rules->n : 1); i++) {
        const struct kr_principal_rule *r =
            rules != NULL ? &rules->r[i] : NULL;
        enum kr_pre_result mr;

        if (r == NULL || r->is_default) {
            cps_put(&res, s, nm.n);
            o = res.oom ? KR_PRINCIPAL_ENOMEM : KR_PRINCIPAL_MAPPED;
            break;
        }
        mr = kr_pre_matches(r->re, &sj);
        if (mr == KR_PRE_COSTLY) {
            o = KR_PRINCIPAL_TOO_COSTLY;
            goto out;
        }
        if (mr == KR_PRE_ENOMEM) {
            o = KR_PRINCIPAL_ENOMEM;
            goto out;
        }
        if (mr == KR_PRE_MATCH) {
            o = rule_apply(r, &nm, &sj, &res);
            hit = r;
            break;
        }
    }
    if (o != KR_PRINCIPAL_MAPPED) {
        goto out;
    }
    pb_reserve(&pb, res.n);
    for (i = 0; i < res.n; i++) {
        if (hit != NULL && hit->casemap != 0) {
            uint32_t cm[3];
            size_t k, ncm = case_map(res.p[i], hit->casemap == 'U', cm);

            for (k = 0; k < ncm; k++) {
                pb_put_cp(&pb, cm[k]);
            }
        } else {
            pb_put_cp(&pb, res.p[i]);
        }
    }
    if (pb.oom) {
        o = KR_PRINCIPAL_ENOMEM;
        free(pb.p);
        goto out;
    }
    *out = pb.p;
    if (outlen != NULL) {
        *outlen = pb.len;
    }
out:
    free(res.p);
    kr_pre_subject_done(&sj);
    free(nm.u8);
    free(nm.cp_at);
    free(nm.byte_at);
    free(s);
    return o;
}
