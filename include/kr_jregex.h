/*
 * kr_jregex.h - regular expressions as java.util.regex matches them, for
 * the patterns of Kafka's ssl.principal.mapping.rules (kr_principal.h):
 * a subset of Java's syntax, Java's semantics, over code points.
 *
 * Semantics are Java's (Pattern.compile(p) without flags): leftmost
 * first, alternatives tried left to right, greedy quantifiers trying
 * one more iteration first and lazy ones one fewer (POSIX regcomp is
 * leftmost-longest: other groups, other replaceAll results).  matches()
 * needs the whole input; find() the leftmost match from a position.
 * Java's quirks kept: an iteration of a repeated group that matched the
 * empty string ends the repetition at once, even below its minimum;
 * '$' and \Z also match before a final line terminator (\n, \r\n, \r,
 * U+0085, U+2028, U+2029); '.' matches anything but those; a greedy
 * unbounded repetition of a group that is not inside another repetition
 * remembers the positions where one more iteration failed and does not
 * try them again within one search (JDK 9+; it keeps `(a+)+b` from
 * taking exponential time).
 *
 * Syntax: literals (any code point), '\' before any character that is
 * not an ASCII letter or digit, \t \n \r \f \a \e \0octal \xhh \x{h...}
 * \uhhhh (a \uD8xx\uDCxx pair is one code point) \cX, \Q...\E, '.',
 * classes [...] ([^...], ranges, ']' first is a literal, '-' first or
 * last, the escapes above, \d \D \s \S \w \W), \d \D \s \S \w \W (ASCII,
 * Java's defaults), groups (...) and (?:...), '|', * + ? {n} {n,} {n,m}
 * (n, m <= 1000) and their lazy forms *? +? ?? {n,m}?, anchors ^ $ \A
 * \z \Z.  Refused as not supported (Java has them): lookahead,
 * lookbehind, atomic and named groups, inline flags (?i) ..., possessive
 * quantifiers, backreferences, \b \B \G \R \X \h \H \v \V \p{} \P{}
 * \N{} \k<>, nested classes and '&&' in a class, quantifiers on anchors,
 * a repetition of a repetition (a{2}{3}), repetition counts above 1000,
 * patterns longer than 4096 characters, lone surrogates.  Refused as Java refuses them: dangling quantifiers,
 * '{' that is not a repetition, unclosed groups and classes, an
 * unmatched ')', bad escapes and ranges.
 *
 * A run takes at most the caller's step budget (one step: one
 * instruction of the compiled program, a few nanoseconds): Java has no
 * such bound and runs a pathological pattern for as long as it takes.
 */
#ifndef KR_JREGEX_H
#define KR_JREGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kr_common.h"

struct kr_jregex;           /* a compiled pattern: immutable, shareable */

/* A character of a pattern and the column an error there should name. */
struct kr_jregex_char {
    uint32_t cp;            /* code point */
    uint32_t col;           /* the caller's column (1-based) */
};

/*
 * Compile the pattern pat[0..n).  On KR_OK *out is owned by the caller
 * (kr_jregex_free).  On KR_ERROR *out is NULL, *errcol the column of the
 * error (pat[].col; one past the last character for an error at the
 * end) and err (errlen bytes) says what, e.g. "a lookahead is not
 * supported" or "a dangling '*' (Java refuses it)".  KR_ENOMEM likewise.
 */
int kr_jregex_compile(const struct kr_jregex_char *pat, size_t n,
                      struct kr_jregex **out, uint32_t *errcol, char *err,
                      size_t errlen) KR_MUST_CHECK;

/* Free a pattern; NULL is a no-op. */
void kr_jregex_free(struct kr_jregex *re);

/* Its number of capturing groups (group 0, the whole match, not counted). */
unsigned kr_jregex_groups(const struct kr_jregex *re);

/*
 * Matching state for one input: the input (borrowed, must outlive the
 * matcher), the step budget every call shares, and working memory
 * (grown as needed, freed by kr_jregex_matcher_done).  One matcher may
 * be used with several patterns, one call at a time (not thread-safe;
 * patterns are).
 */
struct kr_jregex_matcher {
    const uint32_t *s;      /* the input, code points */
    size_t len;
    size_t steps;           /* budget left */
    /* private */
    size_t *slots;          /* captures, then loop marks */
    size_t capslots;
    uint8_t *memo;          /* failed (loop, position) pairs */
    size_t capmemo;
    struct kr_jregex_bt *st;    /* backtracking stack */
    size_t nst;
    size_t capst;
};

void kr_jregex_matcher_init(struct kr_jregex_matcher *m, const uint32_t *s,
                            size_t len, size_t steps);
void kr_jregex_matcher_done(struct kr_jregex_matcher *m);

enum kr_jregex_result {
    KR_JREGEX_NOMATCH = 0,
    KR_JREGEX_MATCH,
    KR_JREGEX_COSTLY,       /* the step budget ran out (or the backtracking
                               stack passed 2^18 entries) */
    KR_JREGEX_ENOMEM
};

/* Java's matcher.matches(): does re match the whole input? */
enum kr_jregex_result kr_jregex_matches(const struct kr_jregex *re,
                                        struct kr_jregex_matcher *m);

/*
 * Java's find() from position from (<= len): the leftmost match that
 * starts at from or after.  ^ and \A match only at 0 (Java's anchoring
 * bounds), whatever from is.
 */
enum kr_jregex_result kr_jregex_find(const struct kr_jregex *re,
                                     struct kr_jregex_matcher *m,
                                     size_t from);

/*
 * After KR_JREGEX_MATCH: group g (0: the whole match; g <=
 * kr_jregex_groups) as [*start, *end) of the input; false when the group
 * took no part in the match (Java's null group).
 */
bool kr_jregex_group(const struct kr_jregex_matcher *m, unsigned g,
                     size_t *start, size_t *end);

#endif /* KR_JREGEX_H */
