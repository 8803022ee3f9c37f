/*
 * kr_principal_int.h - what the two files of the kr_principal module
 * share: kr_principal.c (names, rules, replacements, case mapping) and
 * kr_principal_re.c (the rules' patterns: java.util.regex syntax and
 * meaning, run by PCRE2).  Private: prefix kr_pre_.
 */
#ifndef KR_PRINCIPAL_INT_H
#define KR_PRINCIPAL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "kr_common.h"

/* A character of a pattern and the column an error there should name. */
struct kr_pre_char {
    uint32_t cp;                /* code point */
    uint32_t col;               /* column in the rules text, from 1 */
};

/*
 * A compiled pattern (immutable, shareable between threads): the PCRE2
 * program of the Java pattern's translation, its groups, its names.
 */
struct kr_pre {
    pcre2_code *code;
    unsigned ngroups;           /* capturing groups, group 0 not counted */
    struct kr_pre_name *names;  /* (?<name>...): name -> group number */
    size_t nnames;
    bool wordb;                 /* uses \b or \B: callouts 1 and 2 */
};

struct kr_pre_name {
    char *name;                 /* ASCII letters and digits, NUL-ended */
    unsigned group;
};

/*
 * Translate the Java pattern pat[0..n) (the part of a rule between
 * RULE: and its '/') into PCRE2's syntax and compile it.  KR_OK with
 * *out (kr_pre_free).  KR_ERROR with *errcol (pat[].col; one past the
 * last character for an error at the end) and err (errlen bytes), e.g.
 * "a class intersection '&&' is not supported" or "a dangling '*' (Java
 * refuses it)".  KR_ENOMEM likewise ("out of memory").
 */
int kr_pre_compile(const struct kr_pre_char *pat, size_t n,
                   struct kr_pre **out, uint32_t *errcol, char *err,
                   size_t errlen) KR_MUST_CHECK;

void kr_pre_free(struct kr_pre *re);

/* The group named name[0..n) (ASCII), or 0 when there is none. */
unsigned kr_pre_group_named(const struct kr_pre *re, const char *name,
                            size_t n);

/*
 * One subject (a name, UTF-8, valid: the caller re-encodes what it
 * decoded) and what searching it needs: match data, the limits, the
 * word-boundary classes \b needs.  Not thread-safe; the patterns are.
 */
struct kr_pre_subject {
    const char *s;              /* borrowed */
    size_t len;                 /* bytes */
    uint8_t *wclass;            /* per byte offset, for \b (or NULL) */
    pcre2_match_context *mctx;
    pcre2_match_data *md;
    uint32_t md_pairs;          /* ovector pairs md holds */
};

enum kr_pre_result {
    KR_PRE_NOMATCH = 0,
    KR_PRE_MATCH,
    KR_PRE_COSTLY,              /* PCRE2's match, depth or heap limit */
    KR_PRE_ENOMEM
};

/* Set up for s[0..len); false on allocation failure (then done() it). */
bool kr_pre_subject_init(struct kr_pre_subject *sj, const char *s,
                         size_t len) KR_MUST_CHECK;
void kr_pre_subject_done(struct kr_pre_subject *sj);

/* Java's matcher.matches(): re against the whole subject. */
enum kr_pre_result kr_pre_matches(const struct kr_pre *re,
                                  struct kr_pre_subject *sj);

/*
 * Java's find() from byte offset from (a character boundary, <= len):
 * the leftmost match starting there or later; ^ and \A match only at 0
 * and lookbehind sees what is before from, as Java's replaceAll.
 */
enum kr_pre_result kr_pre_find(const struct kr_pre *re,
                               struct kr_pre_subject *sj, size_t from);

/*
 * After KR_PRE_MATCH: group g (0: the whole match) as byte offsets
 * [*b, *e); false when it took no part in the match.
 */
bool kr_pre_group(const struct kr_pre_subject *sj, unsigned g, size_t *b,
                  size_t *e);

#endif /* KR_PRINCIPAL_INT_H */
