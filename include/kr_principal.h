/*
 * kr_principal.h - the principal of a TLS client certificate as Kafka
 * gives it: the subject written as Java writes it, then Kafka's
 * ssl.principal.mapping.rules.  A pure module (no session, no config, no
 * I/O); the TLS transport calls it with the verified certificate's
 * subject, the config loader with the rules' text.
 *
 * Kafka's default principal builder (DefaultKafkaPrincipalBuilder) makes
 * an mTLS client's principal "User:" + the mapped name, where the name is
 * javax.security.auth.x500.X500Principal.getName() of the certificate's
 * subject: RFC 2253 as the JDK prints it, which is not what OpenSSL's
 * X509_NAME_print_ex(XN_FLAG_RFC2253) prints.  The JDK (OpenJDK 17,
 * measured: tests/data/principal/x500.txt and tests/principal_jdk.sh):
 *   - RDNs in the reverse of their DER order, joined by ','; the AVAs of
 *     a multi-valued RDN in their DER order (not sorted: what the
 *     certificate has), joined by '+'; an RDN with no AVA (an empty SET)
 *     is an empty string between its commas;
 *   - keywords only for CN C L ST O OU STREET DC UID; any other type
 *     (emailAddress, serialNumber, title, SN, GN ...) is its dotted OID
 *     (first arc 0, 1 or 2 from the first subidentifier; arcs of any
 *     size), and its value is '#' and the lowercase hex of the value's
 *     DER (tag, minimal length, content), whatever its type;
 *   - a value of a keyword type is text when its tag is UTF8String,
 *     PrintableString, T61String, IA5String, GeneralString or BMPString
 *     (primitive), else hex as above (NumericString, VisibleString,
 *     UniversalString, INTEGER, constructed strings ...);
 *   - text is the content decoded as the JDK of Debian 12 (17.0.21)
 *     decodes its string type: BMPString as UTF-16BE; T61String,
 *     PrintableString and IA5String one character per byte (ISO-8859-1);
 *     UTF8String and GeneralString as UTF-8, malformed sequences becoming
 *     U+FFFD as Java's decoder replaces them (how many bytes one U+FFFD
 *     stands for follows Java, not Unicode's recommendation: a
 *     UTF-8-encoded surrogate is one U+FFFD).  JDK 17.0.15 read every
 *     type as UTF-8: a broker on an older JDK may name a BMPString or
 *     T61String subject otherwise (tests/principal_jdk.sh, in make
 *     check-long, compares with the installed JDK);
 *   - escaped with '\': , = + < > # ; " and '\' anywhere; a leading or
 *     trailing space or CR (each of them, however many); U+0000 is
 *     written "\00"; every other character (controls, non-ASCII) as is.
 * The result is UTF-8 (never a NUL byte inside).
 *
 * Names the JDK refuses (so Kafka's TLS handshake fails) are refused
 * here: an AVA that is not SEQUENCE { OID, value } without extra bytes,
 * an RDN that is not a SET, a malformed OID (empty, unterminated, a
 * subidentifier with a leading 0x80, more than 4096 octets), a tag
 * number above 30, a length past its container.  Non-minimal definite
 * lengths are accepted, as the JDK does.  Not implemented
 * (KR_EUNSUPPORTED): indefinite lengths (BER; the JDK converts them), an
 * outer tag other than SEQUENCE (the JDK reads it as one RDN; OpenSSL
 * refuses such a certificate anyway).
 * OpenSSL itself cannot read a certificate whose subject has malformed
 * UTF-8, a GeneralString, VisibleString, VideotexString or
 * GraphicString, or a value that is not a string (x500.txt marks those
 * "openssl!"): such a client fails krelay's TLS handshake, where the JDK
 * would read it.  JDK versions other than 17 were not measured.
 *
 * Mapping rules (Kafka's ssl.principal.mapping.rules, KIP-371): a comma
 * separated list of DEFAULT and RULE:pattern/replacement/[LU], tried in
 * order.  A RULE applies when its pattern matches the whole name
 * (java.util.regex matches()); its result is then Java's
 * name.replaceAll(pattern, replacement) (every match from the left, not
 * only the whole name: `CN=(.*?)` with `x$1y` makes "CN=abc" "xyabc"),
 * lower-cased with L, upper-cased with U.  DEFAULT gives the name
 * unchanged.  No rule applying is not "the name unchanged": Kafka refuses
 * the client (SslPrincipalMapper throws NoMatchingRule), here
 * KR_PRINCIPAL_NO_RULE.  Kafka's default rule list is "DEFAULT".
 * Patterns are Java's (JDK 17's java.util.regex), run by PCRE2 after a
 * translation that keeps Java's meaning where the two differ, or refuses
 * the construct at its column (src/kr_principal_re.c lists both: lazy and
 * possessive quantifiers, lookaround, backreferences, named groups, the
 * flags i m s d, \b are taken; class intersections, the flags u U x,
 * scripts and blocks are not).  Replacements are Java's: $n is group n
 * (the longest number not above the group count), ${name} a named group,
 * '\' quotes the next character;
 * before that, Kafka turns a $n past the group count into a literal
 * (only when the pattern has groups; with its quirk for a second such
 * $n, reproduced).  A replacement Java would throw on (a '$' not
 * followed by a digit or '{', a trailing '\', a group or group name the
 * pattern does not have) makes Kafka fail every client the rule applies
 * to; here it is a parse error.
 * L and U map case as Java's toLowerCase/toUpperCase(Locale.ENGLISH):
 * ASCII, then the C library's C.UTF-8 tables for other characters, with
 * Java's expansions (ß -> SS and the rest of Unicode's unconditional
 * SpecialCasing, İ -> i + U+0307).  Not matched: the final sigma (Java
 * writes Σ at the end of a word as ς), and characters whose case the two
 * Unicode versions (JDK 17: 13.0) do not agree on.
 * A search (the whole-name match, or one find() of replaceAll) that
 * passes PCRE2's match limit (KR_PRINCIPAL_MATCH_STEPS calls of its
 * internal match function shared out over the start positions, as deep,
 * 32 MiB of backtracking memory: a pattern that backtracks
 * exponentially) gives KR_PRINCIPAL_TOO_COSTLY
 * where Java would go on for as long as it takes; a mapping makes at
 * most (rules + 2 x characters + 2) searches.
 *
 * Thread safety: a parsed rule list is immutable: any number of threads
 * may call kr_principal_map on it at once.  Every function is reentrant.
 */
#ifndef KR_PRINCIPAL_H
#define KR_PRINCIPAL_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "kr_common.h"

/*
 * The JDK's X500Principal.getName() of name (a certificate's subject:
 * X509_get_subject_name).  The name is read from its DER encoding
 * (i2d_X509_NAME: for a parsed certificate, the bytes it carries), so the
 * order of AVAs within an RDN is the certificate's.
 * On KR_OK *out is a malloc'd NUL-terminated UTF-8 string the caller
 * frees (free()), *len its length (len may be NULL).  On failure *out is
 * NULL and *why (when why is not NULL) a static string saying what was
 * wrong: KR_EPROTO (the JDK refuses this name too), KR_EUNSUPPORTED (the
 * JDK may accept it, krelay does not), KR_ENOMEM.
 */
int kr_principal_x500_name(const X509_NAME *name, char **out, size_t *len,
                           const char **why) KR_MUST_CHECK;

/* Same, from the Name's DER (der, n bytes: one whole SEQUENCE). */
int kr_principal_x500_name_der(const uint8_t *der, size_t n, char **out,
                               size_t *len, const char **why) KR_MUST_CHECK;

/* ---- ssl.principal.mapping.rules ---------------------------------------- */

struct kr_principal_rules;  /* a parsed, compiled rule list (immutable) */

/*
 * Parse Kafka's ssl.principal.mapping.rules text (UTF-8, NUL-terminated):
 * white space around entries is ignored (Java's trim() and \s), empty
 * entries too; each pattern is compiled.  On KR_OK *out is the rule list,
 * owned by the caller (kr_principal_mapping_rules_free), and err is "";
 * text is not referenced afterwards.  A text with no rule at all (empty,
 * or only commas) gives a list under which no name maps: Kafka refuses
 * every client then (an empty list is not DEFAULT; a config loader may
 * want to warn).  On KR_ERROR *out is NULL and err (errlen bytes) holds
 * one line for the config loader to print after FILE:LINE and the key,
 * such as
 *   rule 1 ("RULE:^CN=[a&&b]/x/"), column 12: a class intersection '&&'
 *   is not supported
 * (rules count from 1, empty entries not counted; columns count
 * characters from the start of the text, from 1; the rule is quoted up
 * to 40 characters).  KR_ENOMEM on allocation failure (err says so).
 */
int kr_principal_mapping_rules_parse(const char *text,
                                     struct kr_principal_rules **out,
                                     char *err, size_t errlen)
    KR_MUST_CHECK;

/* Free a rule list; NULL is a no-op. */
void kr_principal_mapping_rules_free(struct kr_principal_rules *r);

/* How many rules the list holds (DEFAULT counts; empty entries do not). */
size_t kr_principal_mapping_rules_count(const struct kr_principal_rules *r);

/*
 * What one search of a mapping may cost: PCRE2's match (and depth)
 * limit, which holds per start position, is this shared out over the
 * subject's positions (each gets KR_PRINCIPAL_MATCH_STEPS / (bytes + 1),
 * at least KR_PRINCIPAL_POSITION_STEPS_MIN), so that a find() trying
 * every position stays near this total.
 */
#define KR_PRINCIPAL_MATCH_STEPS 10000000u
#define KR_PRINCIPAL_POSITION_STEPS_MIN 10000u

/* What kr_principal_map decided. */
enum kr_principal_map_outcome {
    KR_PRINCIPAL_MAPPED = 0,    /* *out holds the mapped name */
    KR_PRINCIPAL_NO_RULE,       /* no rule applies: Kafka refuses the
                                   client (NoMatchingRule) */
    KR_PRINCIPAL_TOO_COSTLY,    /* a search passed PCRE2's limits
                                   (KR_PRINCIPAL_MATCH_STEPS) */
    KR_PRINCIPAL_ENOMEM
};

/* "mapped", "no rule applies" ...: a static string. */
const char *kr_principal_map_outcome_str(enum kr_principal_map_outcome o);

/*
 * Map name (len bytes of UTF-8, as kr_principal_x500_name makes it; need
 * not be NUL-terminated) through rules, as Kafka's SslPrincipalMapper
 * does.  rules NULL is Kafka's default, "DEFAULT": the name unchanged.
 * On KR_PRINCIPAL_MAPPED *out is a malloc'd NUL-terminated string the
 * caller frees, *outlen (may be NULL) its length; otherwise *out is NULL.
 * Bytes of name that are not UTF-8 are read as Java's decoder reads them
 * (U+FFFD).  The mapped name may be empty (Kafka's principal is then
 * "User:").  Allocates; each search stops at PCRE2's limits (above).
 */
enum kr_principal_map_outcome
kr_principal_map(const struct kr_principal_rules *rules, const char *name,
                 size_t len, char **out, size_t *outlen) KR_MUST_CHECK;

#endif /* KR_PRINCIPAL_H */
