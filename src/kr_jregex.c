/*
 * kr_jregex.c - java.util.regex's matching for Kafka's principal mapping
 * rules (see kr_jregex.h): pattern -> tree -> program -> backtracking run.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_jregex.h"

/*
 * The pattern is parsed into a tree (struct re_node), compiled to a
 * program for a backtracking machine (struct re_inst; Pike's instruction
 * set run depth first, as Perl and Java match: alternatives left to
 * right, greedy quantifiers trying one more first, lazy ones one fewer),
 * and run over code points.  {n,m} is expanded (n copies, then m - n
 * optional ones); when the repeated group can match the empty string, an
 * iteration that did ends the repetition and goes on after it, even
 * below n, as Java's Loop does.  Like Java (since JDK 9), a greedy
 * unbounded repetition of a group that is inside no other repetition
 * remembers the positions where one more iteration failed and does not
 * try them again within one search: without it `(a+)+b` on a long run of
 * a's takes exponential time, with it Java answers at once.  The tree is
 * walked recursively, so patterns are limited to RE_MAX_PATTERN
 * characters.
 */

enum re_op {
    RE_CHAR,                     /* arg: the code point */
    RE_ANY,                      /* '.': not a line terminator */
    RE_CLASS,                    /* arg: class index */
    RE_SPLIT,                    /* try x, then y */
    RE_JMP,                      /* x */
    RE_SAVE,                     /* slots[arg] = sp (undone on backtrack) */
    RE_PROGRESS,                 /* sp == slots[arg] (an empty iteration):
                                    go to x */
    RE_REPEAT,                   /* another iteration of greedy loop arg
                                    (body x, exit y) unless it failed at
                                    sp before: Java's Loop memo */
    RE_BOL,                      /* ^ \A: the start of the input */
    RE_EOL,                      /* $ \Z: the end, or before a final line
                                    terminator */
    RE_EOI,                      /* \z: the end */
    RE_MATCH
};

struct re_inst {
    uint8_t op;
    uint32_t arg;
    uint32_t x;
    uint32_t y;
};

struct re_range {
    uint32_t lo;
    uint32_t hi;
};

struct re_class {
    struct re_range *r;          /* sorted, disjoint */
    size_t n;
};

struct kr_jregex {
    struct re_inst *code;
    size_t ncode;
    struct re_class *cls;
    size_t ncls;
    unsigned ngroups;            /* capturing groups (group 0 not counted) */
    unsigned nslots;             /* 2 * (ngroups + 1), then loop marks */
    unsigned nmemo;              /* RE_REPEAT loops */
};

#define RE_MAX_PATTERN 4096      /* characters of a pattern */
#define RE_MAX_CODE 20000        /* instructions after expanding {n,m} */
#define RE_MAX_COUNT 1000        /* largest n, m in {n,m} */
#define RE_MAX_DEPTH 100         /* nested groups */
#define RE_MAX_STACK (1u << 18)  /* backtrack entries of one run */
#define RE_NONE SIZE_MAX         /* an unset capture */

enum re_kind {
    A_EMPTY, A_CHAR, A_ANY, A_CLASS, A_BOL, A_EOL, A_EOI, A_CAT, A_ALT,
    A_GROUP, A_REPEAT
};

struct re_node {
    uint8_t kind;
    uint8_t lazy;
    int32_t a;                   /* child; CAT, ALT: left */
    int32_t b;                   /* CAT, ALT: right */
    uint32_t v;                  /* CHAR: code point; CLASS: index;
                                    GROUP: number, 0 = not capturing */
    int32_t min;                 /* REPEAT */
    int32_t max;                 /* REPEAT: -1 = unbounded */
};

/* A pattern as the parser sees it: code points, quoted ones flagged. */
struct re_tok {
    uint32_t cp;
    uint32_t col;                /* column in the rules text, from 1 */
    bool lit;                    /* from \Q...\E: always a literal */
};

struct re_parser {
    const struct re_tok *t;
    size_t n;
    size_t i;
    struct re_node *nd;
    size_t nnd;
    size_t capnd;
    struct re_class *cls;
    size_t ncls;
    size_t capcls;
    unsigned ngroups;
    unsigned depth;
    bool failed;
    uint32_t errcol;
    char err[160];
};

static void KR_PRINTF(3, 4)
re_fail(struct re_parser *ps, size_t at, const char *fmt, ...)
{
    va_list ap;

    if (ps->failed) {
        return;
    }
    ps->failed = true;
    ps->errcol = at < ps->n ? ps->t[at].col
                            : (ps->n > 0 ? ps->t[ps->n - 1].col + 1 : 0);
    va_start(ap, fmt);
    vsnprintf(ps->err, sizeof(ps->err), fmt, ap);
    va_end(ap);
}

static int32_t
re_new(struct re_parser *ps, uint8_t kind)
{
    struct re_node *nn;

    if (ps->failed) {
        return -1;
    }
    if (ps->nnd == ps->capnd) {
        size_t cap = ps->capnd ? 2 * ps->capnd : 32;

        nn = realloc(ps->nd, cap * sizeof(*nn));
        if (nn == NULL) {
            re_fail(ps, ps->i, "out of memory");
            return -1;
        }
        ps->nd = nn;
        ps->capnd = cap;
    }
    nn = &ps->nd[ps->nnd];
    memset(nn, 0, sizeof(*nn));
    nn->kind = kind;
    nn->a = nn->b = -1;
    return (int32_t)ps->nnd++;
}

static int32_t
re_pair(struct re_parser *ps, uint8_t kind, int32_t a, int32_t b)
{
    int32_t k;

    if (a < 0 || b < 0) {
        return -1;
    }
    k = re_new(ps, kind);
    if (k >= 0) {
        ps->nd[k].a = a;
        ps->nd[k].b = b;
    }
    return k;
}

/* ---- character classes ---- */

struct re_set {
    struct re_range *r;
    size_t n;
    size_t cap;
    bool oom;
};

static void
set_add(struct re_set *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        struct re_range *nr = realloc(s->r, cap * sizeof(*nr));

        if (nr == NULL) {
            s->oom = true;
            return;
        }
        s->r = nr;
        s->cap = cap;
    }
    s->r[s->n].lo = lo;
    s->r[s->n].hi = hi;
    s->n++;
}

static int
range_cmp(const void *a, const void *b)
{
    const struct re_range *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sort and merge; complemented over all code points when neg. */
static void
set_normalise(struct re_set *s, bool neg)
{
    size_t i, k = 0;

    if (s->n > 0) {
        qsort(s->r, s->n, sizeof(*s->r), range_cmp);
        for (i = 1; i < s->n; i++) {
            if (s->r[i].lo <= s->r[k].hi + 1) {
                if (s->r[i].hi > s->r[k].hi) {
                    s->r[k].hi = s->r[i].hi;
                }
            } else {
                s->r[++k] = s->r[i];
            }
        }
        s->n = k + 1;
    }
    if (neg) {
        struct re_set c = { NULL, 0, 0, false };
        uint32_t next = 0;

        for (i = 0; i < s->n; i++) {
            if (s->r[i].lo > next) {
                set_add(&c, next, s->r[i].lo - 1);
            }
            next = s->r[i].hi + 1;
        }
        if (next <= 0x10FFFF) {
            set_add(&c, next, 0x10FFFF);
        }
        free(s->r);
        c.oom = c.oom || s->oom;
        *s = c;
    }
}

/* \d \s \w (neg: \D \S \W) added to s. */
static void
set_add_predef(struct re_set *s, uint32_t which, bool neg)
{
    struct re_set p = { NULL, 0, 0, false };
    size_t i;

    switch (which) {
    case 'd':
        set_add(&p, '0', '9');
        break;
    case 's':
        set_add(&p, '\t', '\r');
        set_add(&p, ' ', ' ');
        break;
    default:                     /* 'w' */
        set_add(&p, '0', '9');
        set_add(&p, 'A', 'Z');
        set_add(&p, '_', '_');
        set_add(&p, 'a', 'z');
        break;
    }
    set_normalise(&p, neg);
    for (i = 0; i < p.n; i++) {
        set_add(s, p.r[i].lo, p.r[i].hi);
    }
    s->oom = s->oom || p.oom;
    free(p.r);
}

/* Keep s as class k of the program; returns its index or -1. */
static int32_t
re_class_keep(struct re_parser *ps, struct re_set *s)
{
    if (s->oom || ps->failed) {
        free(s->r);
        re_fail(ps, ps->i, "out of memory");
        return -1;
    }
    if (ps->ncls == ps->capcls) {
        size_t cap = ps->capcls ? 2 * ps->capcls : 4;
        struct re_class *nc = realloc(ps->cls, cap * sizeof(*nc));

        if (nc == NULL) {
            free(s->r);
            re_fail(ps, ps->i, "out of memory");
            return -1;
        }
        ps->cls = nc;
        ps->capcls = cap;
    }
    ps->cls[ps->ncls].r = s->r;
    ps->cls[ps->ncls].n = s->n;
    return (int32_t)ps->ncls++;
}

static bool
re_peek(const struct re_parser *ps, size_t at, uint32_t c)
{
    return at < ps->n && !ps->t[at].lit && ps->t[at].cp == c;
}

static int
hexval(uint32_t c)
{
    if (c >= '0' && c <= '9') {
        return (int)(c - '0');
    }
    if (c >= 'a' && c <= 'f') {
        return (int)(c - 'a' + 10);
    }
    if (c >= 'A' && c <= 'F') {
        return (int)(c - 'A' + 10);
    }
    return -1;
}

/* k hex digits at ps->i, or -1 (no error set). */
static int32_t
re_hex(struct re_parser *ps, unsigned k)
{
    int32_t v = 0;
    unsigned j;

    for (j = 0; j < k; j++) {
        int h = ps->i + j < ps->n ? hexval(ps->t[ps->i + j].cp) : -1;

        if (h < 0) {
            return -1;
        }
        v = v * 16 + h;
    }
    ps->i += k;
    return v;
}

/*
 * An escape at ps->i (the backslash): a single code point (*cp, returns
 * 1), a predefined class (*cp = 'd' 's' 'w' or upper case, returns 2),
 * an anchor (*cp = 'A' 'z' 'Z', returns 3; not in a class), or 0 after
 * re_fail.  in_class: inside [...].
 */
static int
re_escape(struct re_parser *ps, bool in_class, uint32_t *cp)
{
    size_t at = ps->i;
    uint32_t c;

    ps->i++;
    if (ps->i >= ps->n) {
        re_fail(ps, at, "'\\' at the end of the pattern (Java refuses it)");
        return 0;
    }
    c = ps->t[ps->i++].cp;
    switch (c) {
    case 't': *cp = '\t'; return 1;
    case 'n': *cp = '\n'; return 1;
    case 'r': *cp = '\r'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'a': *cp = 7; return 1;
    case 'e': *cp = 27; return 1;
    case 'd': case 'D': case 's': case 'S': case 'w': case 'W':
        *cp = c;
        return 2;
    case 'A': case 'z': case 'Z':
        if (in_class) {
            break;
        }
        *cp = c;
        return 3;
    case '0': {
        /* \0n \0nn \0mnn (m <= 3) */
        uint32_t v = 0;
        unsigned k = 0;

        while (k < 3 && ps->i < ps->n && ps->t[ps->i].cp >= '0' &&
               ps->t[ps->i].cp <= '7' && (k < 2 || v <= 037)) {
            v = v * 8 + (ps->t[ps->i++].cp - '0');
            k++;
        }
        if (k == 0) {
            re_fail(ps, at, "an octal escape \\0 without digits (Java "
                    "refuses it)");
            return 0;
        }
        *cp = v;
        return 1;
    }
    case 'x': {
        int32_t v;

        if (re_peek(ps, ps->i, '{')) {
            uint32_t w = 0;
            size_t d = 0;

            ps->i++;
            while (ps->i < ps->n && hexval(ps->t[ps->i].cp) >= 0) {
                w = w * 16 + (uint32_t)hexval(ps->t[ps->i++].cp);
                if (w > 0x10FFFF) {
                    re_fail(ps, at, "\\x{...} above U+10FFFF (Java "
                            "refuses it)");
                    return 0;
                }
                d++;
            }
            if (d == 0 || !re_peek(ps, ps->i, '}')) {
                re_fail(ps, at, "a malformed \\x{...} (Java refuses it)");
                return 0;
            }
            ps->i++;
            *cp = w;
        } else {
            v = re_hex(ps, 2);
            if (v < 0) {
                re_fail(ps, at, "\\x needs two hex digits (Java refuses "
                        "it)");
                return 0;
            }
            *cp = (uint32_t)v;
        }
        if (*cp >= 0xD800 && *cp <= 0xDFFF) {
            re_fail(ps, at, "a surrogate code point is not supported");
            return 0;
        }
        return 1;
    }
    case 'u': {
        int32_t v = re_hex(ps, 4);

        if (v < 0) {
            re_fail(ps, at, "\\u needs four hex digits (Java refuses it)");
            return 0;
        }
        if (v >= 0xD800 && v <= 0xDBFF && re_peek(ps, ps->i, '\\') &&
            re_peek(ps, ps->i + 1, 'u')) {
            size_t save = ps->i;
            int32_t lo;

            ps->i += 2;
            lo = re_hex(ps, 4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + (((uint32_t)v - 0xD800) << 10) +
                      ((uint32_t)lo - 0xDC00);
                return 1;
            }
            ps->i = save;
        }
        if (v >= 0xD800 && v <= 0xDFFF) {
            re_fail(ps, at, "a lone surrogate \\u%04X is not supported",
                    (unsigned)v);
            return 0;
        }
        *cp = (uint32_t)v;
        return 1;
    }
    case 'c':
        if (ps->i >= ps->n) {
            re_fail(ps, at, "\\c at the end of the pattern (Java refuses "
                    "it)");
            return 0;
        }
        *cp = ps->t[ps->i++].cp ^ 64;
        return 1;
    default:
        break;
    }
    if (c >= '1' && c <= '9') {
        re_fail(ps, at, "a backreference \\%c is not supported", (char)c);
        return 0;
    }
    if (c < 0x80 && c != 0 && strchr("bBGRXhHvVpPNkE", (int)c) != NULL) {
        if (in_class && c == 'b') {
            re_fail(ps, at, "\\b in a class (Java refuses it)");
        } else {
            re_fail(ps, at, "\\%c is not supported", (char)c);
        }
        return 0;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        if (c == 'A' || c == 'z' || c == 'Z') {
            re_fail(ps, at, "\\%c in a class is not supported", (char)c);
        } else {
            re_fail(ps, at, "an unknown escape \\%c (Java refuses it)",
                    (char)c);
        }
        return 0;
    }
    *cp = c;                     /* any other character: itself */
    return 1;
}

/* [...] at ps->i. */
static int32_t
re_class(struct re_parser *ps)
{
    struct re_set s = { NULL, 0, 0, false };
    size_t open = ps->i;
    bool neg = false, first = true;
    int32_t k;

    ps->i++;
    if (re_peek(ps, ps->i, '^')) {
        neg = true;
        ps->i++;
    }
    for (;;) {
        uint32_t lo, hi;
        size_t at = ps->i;
        int e;

        if (ps->i >= ps->n) {
            re_fail(ps, open, "an unclosed class '[' (Java refuses it)");
            break;
        }
        if (re_peek(ps, ps->i, ']') && !first) {
            ps->i++;
            break;
        }
        first = false;
        if (re_peek(ps, ps->i, '[')) {
            re_fail(ps, at, "a nested class '[' is not supported (write "
                    "'\\[' for the character)");
            break;
        }
        if (re_peek(ps, ps->i, '&') && re_peek(ps, ps->i + 1, '&')) {
            re_fail(ps, at, "a class intersection '&&' is not supported");
            break;
        }
        if (re_peek(ps, ps->i, '\\')) {
            e = re_escape(ps, true, &lo);
            if (e == 0) {
                break;
            }
            if (e == 2) {
                set_add_predef(&s, lo | 0x20, lo < 'a');
                continue;
            }
        } else {
            lo = ps->t[ps->i++].cp;
        }
        hi = lo;
        if (re_peek(ps, ps->i, '-') && ps->i + 1 < ps->n &&
            !re_peek(ps, ps->i + 1, ']')) {
            size_t at2 = ps->i + 1;

            ps->i++;
            if (re_peek(ps, ps->i, '[')) {
                re_fail(ps, ps->i, "a nested class '[' is not supported");
                break;
            }
            if (re_peek(ps, ps->i, '\\')) {
                e = re_escape(ps, true, &hi);
                if (e == 0) {
                    break;
                }
                if (e != 1) {
                    re_fail(ps, at2, "a class as the end of a range (Java "
                            "refuses it)");
                    break;
                }
            } else {
                hi = ps->t[ps->i++].cp;
            }
            if (hi < lo) {
                re_fail(ps, at, "a range whose end is below its start (Java "
                        "refuses it)");
                break;
            }
        }
        set_add(&s, lo, hi);
    }
    if (ps->failed) {
        free(s.r);
        return -1;
    }
    set_normalise(&s, neg);
    k = re_class_keep(ps, &s);
    if (k < 0) {
        return -1;
    }
    {
        int32_t nd = re_new(ps, A_CLASS);

        if (nd >= 0) {
            ps->nd[nd].v = (uint32_t)k;
        }
        return nd;
    }
}

static int32_t re_alt(struct re_parser *ps);

/* A number of {n,m}, or -1 (none) or -2 (too large for Java). */
static int64_t
re_count(struct re_parser *ps)
{
    int64_t v = 0;
    size_t d = 0;

    while (ps->i < ps->n && !ps->t[ps->i].lit && ps->t[ps->i].cp >= '0' &&
           ps->t[ps->i].cp <= '9') {
        if (v <= INT32_MAX) {
            v = v * 10 + (ps->t[ps->i].cp - '0');
        }
        ps->i++;
        d++;
    }
    if (d == 0) {
        return -1;
    }
    return v > INT32_MAX ? -2 : v;
}

/* A quantifier after atom a, if any. */
static int32_t
re_quant(struct re_parser *ps, int32_t a, bool anchor)
{
    int64_t min, max;
    size_t at = ps->i;
    int32_t k;

    if (ps->i >= ps->n || ps->t[ps->i].lit) {
        return a;
    }
    switch (ps->t[ps->i].cp) {
    case '*':
        min = 0;
        max = -1;
        ps->i++;
        break;
    case '+':
        min = 1;
        max = -1;
        ps->i++;
        break;
    case '?':
        min = 0;
        max = 1;
        ps->i++;
        break;
    case '{':
        ps->i++;
        min = re_count(ps);
        if (min == -1) {
            re_fail(ps, at, "'{' that is not a repetition {n,m} (Java "
                    "refuses it; write '\\{')");
            return -1;
        }
        max = min;
        if (re_peek(ps, ps->i, ',')) {
            ps->i++;
            max = re_count(ps);
            if (max == -1 && re_peek(ps, ps->i, '}')) {
                max = -1;
            } else if (max == -1) {
                max = -3;
            }
        }
        if (!re_peek(ps, ps->i, '}')) {
            re_fail(ps, at, "an unclosed repetition {n,m} (Java refuses "
                    "it)");
            return -1;
        }
        ps->i++;
        if (min == -2 || max == -2 || (max >= 0 && max < min)) {
            re_fail(ps, at, "an illegal repetition range (Java refuses "
                    "it)");
            return -1;
        }
        if (min > RE_MAX_COUNT || max > RE_MAX_COUNT) {
            re_fail(ps, at, "a repetition count above %d is not supported",
                    RE_MAX_COUNT);
            return -1;
        }
        break;
    default:
        return a;
    }
    if (anchor) {
        re_fail(ps, at, "a quantifier after an anchor is not supported");
        return -1;
    }
    k = re_new(ps, A_REPEAT);
    if (k < 0) {
        return -1;
    }
    ps->nd[k].a = a;
    ps->nd[k].min = (int32_t)min;
    ps->nd[k].max = (int32_t)max;
    if (re_peek(ps, ps->i, '?')) {
        ps->nd[k].lazy = 1;
        ps->i++;
    } else if (re_peek(ps, ps->i, '+')) {
        re_fail(ps, ps->i, "a possessive quantifier is not supported");
        return -1;
    }
    if (ps->i < ps->n && !ps->t[ps->i].lit) {
        uint32_t c = ps->t[ps->i].cp;

        if (c == '*' || c == '+' || c == '?') {
            re_fail(ps, ps->i, "a dangling '%c' (Java refuses it)", (char)c);
            return -1;
        }
        if (c == '{') {
            re_fail(ps, ps->i, "a repetition of a repetition is not "
                    "supported");
            return -1;
        }
    }
    return k;
}

/* One atom and its quantifier; -1 on error. */
static int32_t
re_atom(struct re_parser *ps)
{
    size_t at = ps->i;
    const struct re_tok *t = &ps->t[ps->i];
    int32_t k;
    uint32_t cp;

    if (t->lit) {
        k = re_new(ps, A_CHAR);
        if (k >= 0) {
            ps->nd[k].v = t->cp;
        }
        ps->i++;
        return re_quant(ps, k, false);
    }
    switch (t->cp) {
    case '(': {
        uint32_t g = 0;

        ps->i++;
        if (re_peek(ps, ps->i, '?')) {
            if (re_peek(ps, ps->i + 1, ':')) {
                ps->i += 2;
            } else if (re_peek(ps, ps->i + 1, '=') ||
                       re_peek(ps, ps->i + 1, '!')) {
                re_fail(ps, at, "a lookahead is not supported");
                return -1;
            } else if (re_peek(ps, ps->i + 1, '<') &&
                       (re_peek(ps, ps->i + 2, '=') ||
                        re_peek(ps, ps->i + 2, '!'))) {
                re_fail(ps, at, "a lookbehind is not supported");
                return -1;
            } else if (re_peek(ps, ps->i + 1, '<')) {
                re_fail(ps, at, "a named group is not supported");
                return -1;
            } else if (re_peek(ps, ps->i + 1, '>')) {
                re_fail(ps, at, "an atomic group is not supported");
                return -1;
            } else {
                re_fail(ps, at, "inline flags (?...) are not supported");
                return -1;
            }
        } else {
            g = ++ps->ngroups;
        }
        if (++ps->depth > RE_MAX_DEPTH) {
            re_fail(ps, at, "groups nested deeper than %d are not "
                    "supported", RE_MAX_DEPTH);
            return -1;
        }
        k = re_alt(ps);
        ps->depth--;
        if (ps->failed) {
            return -1;
        }
        if (!re_peek(ps, ps->i, ')')) {
            re_fail(ps, at, "an unclosed group '(' (Java refuses it)");
            return -1;
        }
        ps->i++;
        {
            int32_t gr = re_new(ps, A_GROUP);

            if (gr < 0) {
                return -1;
            }
            ps->nd[gr].a = k;
            ps->nd[gr].v = g;
            return re_quant(ps, gr, false);
        }
    }
    case '[':
        k = re_class(ps);
        return k < 0 ? -1 : re_quant(ps, k, false);
    case '.':
        ps->i++;
        return re_quant(ps, re_new(ps, A_ANY), false);
    case '^':
        ps->i++;
        return re_quant(ps, re_new(ps, A_BOL), true);
    case '$':
        ps->i++;
        return re_quant(ps, re_new(ps, A_EOL), true);
    case '*':
    case '+':
    case '?':
        re_fail(ps, at, "a dangling '%c' (Java refuses it)", (char)t->cp);
        return -1;
    case '{':
        re_fail(ps, at, "'{' that is not a repetition (Java refuses it; "
                "write '\\{')");
        return -1;
    case '\\': {
        int e = re_escape(ps, false, &cp);

        if (e == 0) {
            return -1;
        }
        if (e == 3) {
            k = re_new(ps, cp == 'A' ? A_BOL : cp == 'z' ? A_EOI : A_EOL);
            return re_quant(ps, k, true);
        }
        if (e == 2) {
            struct re_set s = { NULL, 0, 0, false };
            int32_t c;

            set_add_predef(&s, cp | 0x20, cp < 'a');
            set_normalise(&s, false);
            c = re_class_keep(ps, &s);
            if (c < 0) {
                return -1;
            }
            k = re_new(ps, A_CLASS);
            if (k >= 0) {
                ps->nd[k].v = (uint32_t)c;
            }
            return re_quant(ps, k, false);
        }
        k = re_new(ps, A_CHAR);
        if (k >= 0) {
            ps->nd[k].v = cp;
        }
        return re_quant(ps, k, false);
    }
    default:
        ps->i++;
        k = re_new(ps, A_CHAR);
        if (k >= 0) {
            ps->nd[k].v = t->cp;
        }
        return re_quant(ps, k, false);
    }
}

static int32_t
re_seq(struct re_parser *ps)
{
    int32_t k = re_new(ps, A_EMPTY);

    while (!ps->failed && ps->i < ps->n && !re_peek(ps, ps->i, '|') &&
           !re_peek(ps, ps->i, ')')) {
        k = re_pair(ps, A_CAT, k, re_atom(ps));
    }
    return ps->failed ? -1 : k;
}

static int32_t
re_alt(struct re_parser *ps)
{
    int32_t k = re_seq(ps);

    while (!ps->failed && re_peek(ps, ps->i, '|')) {
        ps->i++;
        k = re_pair(ps, A_ALT, k, re_seq(ps));
    }
    return ps->failed ? -1 : k;
}

/* Can node k match the empty string? */
static bool
re_nullable(const struct re_parser *ps, int32_t k)
{
    const struct re_node *n = &ps->nd[k];

    switch (n->kind) {
    case A_CHAR:
    case A_ANY:
    case A_CLASS:
        return false;
    case A_CAT:
        return re_nullable(ps, n->a) && re_nullable(ps, n->b);
    case A_ALT:
        return re_nullable(ps, n->a) || re_nullable(ps, n->b);
    case A_GROUP:
        return re_nullable(ps, n->a);
    case A_REPEAT:
        return n->min == 0 || re_nullable(ps, n->a);
    default:
        return true;
    }
}

struct re_gen {
    const struct re_parser *ps;
    struct re_inst *code;
    size_t n;
    unsigned nslots;
    unsigned nmemo;
    unsigned depth;              /* repetitions around what is generated */
    bool full;                   /* more than RE_MAX_CODE */
};

static size_t
re_emit(struct re_gen *g, uint8_t op, uint32_t arg)
{
    if (g->n >= RE_MAX_CODE) {
        g->full = true;
        return RE_MAX_CODE;
    }
    g->code[g->n].op = op;
    g->code[g->n].arg = arg;
    g->code[g->n].x = g->code[g->n].y = 0;
    return g->n++;
}

static void
re_patch(struct re_gen *g, size_t at, uint32_t x, uint32_t y)
{
    if (at < RE_MAX_CODE) {
        g->code[at].x = x;
        g->code[at].y = y;
    }
}

static void re_gen_node(struct re_gen *g, int32_t k);

/*
 * x{min,max} (max -1: unbounded) as Java runs it: min copies, then the
 * optional ones (a loop when unbounded).  When x can match the empty
 * string, an iteration that did ends the repetition at once, even below
 * min (Java's Loop checks progress after every iteration).  An
 * unbounded greedy loop over a group outside any other repetition gets
 * Java's memo of failed positions (RE_REPEAT; not on the first
 * iteration of x* : Loop.matchInit).
 */
static void
re_gen_repeat(struct re_gen *g, const struct re_node *n)
{
    bool nullable = re_nullable(g->ps, n->a);
    bool memo = n->max < 0 && !n->lazy && g->depth == 0 &&
                g->ps->nd[n->a].kind == A_GROUP;
    size_t nopt = n->max < 0 ? 1 : (size_t)(n->max - n->min);
    size_t *exits, nexit = 0, mark = 0, i, s, body, exit;

    /* a PROGRESS after each copy, a SPLIT before each optional one */
    exits = malloc(((size_t)n->min + 2 * nopt + 1) * sizeof(*exits));
    if (exits == NULL) {
        g->full = true;          /* reported as too large: rare */
        return;
    }
    if (nullable) {
        mark = g->nslots++;
    }
    g->depth++;
    for (i = 0; i < (size_t)n->min && !g->full; i++) {
        if (nullable) {
            re_emit(g, RE_SAVE, (uint32_t)mark);
        }
        re_gen_node(g, n->a);
        if (nullable) {
            exits[nexit++] = re_emit(g, RE_PROGRESS, (uint32_t)mark);
        }
    }
    if (n->max < 0) {
        /* L: SPLIT|REPEAT body, exit; body: x; [PROGRESS]; back to L */
        if (memo && n->min > 0) {
            s = re_emit(g, RE_REPEAT, g->nmemo);
        } else {
            s = re_emit(g, RE_SPLIT, 0);
        }
        body = g->n;
        if (nullable) {
            re_emit(g, RE_SAVE, (uint32_t)mark);
        }
        re_gen_node(g, n->a);
        if (nullable) {
            exits[nexit++] = re_emit(g, RE_PROGRESS, (uint32_t)mark);
        }
        if (memo && n->min == 0) {
            size_t r = re_emit(g, RE_REPEAT, g->nmemo);

            re_patch(g, r, (uint32_t)body, 0);
            exits[nexit++] = r;
        } else {
            size_t j = re_emit(g, RE_JMP, 0);

            re_patch(g, j, (uint32_t)s, 0);
        }
        if (n->lazy) {
            re_patch(g, s, 0, (uint32_t)body);
        } else {
            re_patch(g, s, (uint32_t)body, 0);
        }
        exits[nexit++] = s;
        if (memo) {
            g->nmemo++;
        }
    } else {
        for (i = 0; i < nopt && !g->full; i++) {
            s = re_emit(g, RE_SPLIT, 0);
            re_patch(g, s, (uint32_t)(s + 1), (uint32_t)(s + 1));
            exits[nexit++] = s;
            if (nullable) {
                re_emit(g, RE_SAVE, (uint32_t)mark);
            }
            re_gen_node(g, n->a);
            if (nullable) {
                exits[nexit++] = re_emit(g, RE_PROGRESS, (uint32_t)mark);
            }
        }
    }
    g->depth--;
    exit = g->n;
    for (i = 0; i < nexit && !g->full; i++) {
        struct re_inst *in = &g->code[exits[i]];

        switch (in->op) {
        case RE_PROGRESS:
            in->x = (uint32_t)exit;
            break;
        case RE_REPEAT:
            in->y = (uint32_t)exit;
            break;
        default:                 /* RE_SPLIT: the branch that leaves */
            if (n->lazy) {
                in->x = (uint32_t)exit;
            } else {
                in->y = (uint32_t)exit;
            }
            break;
        }
    }
    free(exits);
}

static void
re_gen_node(struct re_gen *g, int32_t k)
{
    const struct re_node *n = &g->ps->nd[k];
    size_t s, j;

    if (g->full) {
        return;
    }
    switch (n->kind) {
    case A_EMPTY:
        break;
    case A_CHAR:
        re_emit(g, RE_CHAR, n->v);
        break;
    case A_ANY:
        re_emit(g, RE_ANY, 0);
        break;
    case A_CLASS:
        re_emit(g, RE_CLASS, n->v);
        break;
    case A_BOL:
        re_emit(g, RE_BOL, 0);
        break;
    case A_EOL:
        re_emit(g, RE_EOL, 0);
        break;
    case A_EOI:
        re_emit(g, RE_EOI, 0);
        break;
    case A_CAT:
        re_gen_node(g, n->a);
        re_gen_node(g, n->b);
        break;
    case A_ALT:
        s = re_emit(g, RE_SPLIT, 0);
        re_gen_node(g, n->a);
        j = re_emit(g, RE_JMP, 0);
        re_patch(g, s, (uint32_t)(s + 1), (uint32_t)(j + 1));
        re_gen_node(g, n->b);
        re_patch(g, j, (uint32_t)g->n, 0);
        break;
    case A_GROUP:
        if (n->v > 0) {
            re_emit(g, RE_SAVE, 2 * n->v);
        }
        re_gen_node(g, n->a);
        if (n->v > 0) {
            re_emit(g, RE_SAVE, 2 * n->v + 1);
        }
        break;
    case A_REPEAT:
        re_gen_repeat(g, n);
        break;
    default:
        break;
    }
}

static void
re_parts_free(struct kr_jregex *p)
{
    size_t i;

    for (i = 0; i < p->ncls; i++) {
        free(p->cls[i].r);
    }
    free(p->cls);
    free(p->code);
    memset(p, 0, sizeof(*p));
}

/*
 * Compile the pattern t[0..n) into p.  On failure returns false with
 * *errcol and err (errlen) set; p is left empty.
 */
static bool
re_compile(const struct re_tok *t, size_t n, struct kr_jregex *p,
           uint32_t *errcol, char *err, size_t errlen)
{
    struct re_parser ps;
    struct re_gen g;
    int32_t root;
    size_t i;

    memset(&ps, 0, sizeof(ps));
    memset(p, 0, sizeof(*p));
    ps.t = t;
    ps.n = n;
    root = re_alt(&ps);
    if (!ps.failed && ps.i < ps.n) {
        re_fail(&ps, ps.i, "an unmatched ')' (Java refuses it)");
    }
    if (ps.failed) {
        goto fail;
    }
    memset(&g, 0, sizeof(g));
    g.ps = &ps;
    g.nslots = 2 * (ps.ngroups + 1);
    g.code = malloc(RE_MAX_CODE * sizeof(*g.code));
    if (g.code == NULL) {
        re_fail(&ps, 0, "out of memory");
        goto fail;
    }
    re_emit(&g, RE_SAVE, 0);
    re_gen_node(&g, root);
    re_emit(&g, RE_SAVE, 1);
    re_emit(&g, RE_MATCH, 0);
    if (g.full) {
        free(g.code);
        re_fail(&ps, 0, "the pattern is too large once its repetitions are "
                "expanded (more than %d steps)", RE_MAX_CODE);
        goto fail;
    }
    p->code = realloc(g.code, g.n * sizeof(*g.code));
    if (p->code == NULL) {
        p->code = g.code;
    }
    p->ncode = g.n;
    p->cls = ps.cls;
    p->ncls = ps.ncls;
    p->ngroups = ps.ngroups;
    p->nslots = g.nslots;
    p->nmemo = g.nmemo;
    free(ps.nd);
    return true;
fail:
    for (i = 0; i < ps.ncls; i++) {
        free(ps.cls[i].r);
    }
    free(ps.cls);
    free(ps.nd);
    *errcol = ps.errcol;
    snprintf(err, errlen, "%s", ps.err);
    return false;
}

static bool
line_term(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x85 || c == 0x2028 ||
           c == 0x2029;
}

static bool
class_has(const struct re_class *c, uint32_t cp)
{
    size_t lo = 0, hi = c->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (cp < c->r[mid].lo) {
            hi = mid;
        } else if (cp > c->r[mid].hi) {
            lo = mid + 1;
        } else {
            return true;
        }
    }
    return false;
}

/* Java's '$' without MULTILINE at sp. */
static bool
at_eol(const uint32_t *s, size_t len, size_t sp)
{
    if (sp == len) {
        return true;
    }
    if (sp + 2 == len) {
        return s[sp] == '\r' && s[sp + 1] == '\n';
    }
    if (sp + 1 == len) {
        if (s[sp] == '\n') {
            return sp == 0 || s[sp - 1] != '\r';
        }
        return line_term(s[sp]);
    }
    return false;
}

enum re_bt_kind {
    RE_BT_BRANCH,                /* resume at pc at, position val */
    RE_BT_RESTORE,               /* slots[at] = val */
    RE_BT_MEMO                   /* loop memo failed at val; then as a
                                    branch to at */
};

struct kr_jregex_bt {
    uint16_t kind;
    uint16_t memo;               /* RE_BT_MEMO: the loop */
    uint32_t at;                 /* pc, or slot */
    size_t val;                  /* sp, or the slot's old value */
};


enum re_result { RE_NOMATCH = 0, RE_MATCHED = 1, RE_COSTLY = -1,
                 RE_OOM = -2 };

static bool
re_push(struct kr_jregex_matcher *vm, uint16_t kind, uint32_t at, size_t val,
        enum re_result *why)
{
    if (vm->nst == vm->capst) {
        size_t cap = vm->capst ? 2 * vm->capst : 64;
        struct kr_jregex_bt *ns;

        if (cap > RE_MAX_STACK) {
            *why = RE_COSTLY;
            return false;
        }
        ns = realloc(vm->st, cap * sizeof(*ns));
        if (ns == NULL) {
            *why = RE_OOM;
            return false;
        }
        vm->st = ns;
        vm->capst = cap;
    }
    vm->st[vm->nst].kind = kind;
    vm->st[vm->nst].memo = 0;
    vm->st[vm->nst].at = at;
    vm->st[vm->nst].val = val;
    vm->nst++;
    return true;
}

/*
 * Match p at start (the whole rest of the input when full, as matches()
 * with start 0; else as far as it goes, as find() at one position).
 * On RE_MATCHED vm->slots hold the groups (RE_NONE: did not take part).
 * vm->slots and vm->memo are large enough for p (the caller's job).
 */
static enum re_result
re_run(const struct kr_jregex *p, struct kr_jregex_matcher *vm, size_t start,
       bool full)
{
    size_t pc = 0, sp = start, i;
    enum re_result why = RE_NOMATCH;

    for (i = 0; i < p->nslots; i++) {
        vm->slots[i] = RE_NONE;
    }
    vm->nst = 0;
    for (;;) {
        const struct re_inst *in = &p->code[pc];

        if (vm->steps == 0) {
            return RE_COSTLY;
        }
        vm->steps--;
        switch (in->op) {
        case RE_CHAR:
            if (sp < vm->len && vm->s[sp] == in->arg) {
                sp++;
                pc++;
                continue;
            }
            break;
        case RE_ANY:
            if (sp < vm->len && !line_term(vm->s[sp])) {
                sp++;
                pc++;
                continue;
            }
            break;
        case RE_CLASS:
            if (sp < vm->len && class_has(&p->cls[in->arg], vm->s[sp])) {
                sp++;
                pc++;
                continue;
            }
            break;
        case RE_SPLIT:
            if (!re_push(vm, RE_BT_BRANCH, in->y, sp, &why)) {
                return why;
            }
            pc = in->x;
            continue;
        case RE_REPEAT:
            if (vm->memo[in->arg * (vm->len + 1) + sp]) {
                pc = in->y;
                continue;
            }
            if (!re_push(vm, RE_BT_MEMO, in->y, sp, &why)) {
                return why;
            }
            vm->st[vm->nst - 1].memo = (uint16_t)in->arg;
            pc = in->x;
            continue;
        case RE_JMP:
            pc = in->x;
            continue;
        case RE_SAVE:
            if (!re_push(vm, RE_BT_RESTORE, in->arg, vm->slots[in->arg],
                         &why)) {
                return why;
            }
            vm->slots[in->arg] = sp;
            pc++;
            continue;
        case RE_PROGRESS:
            pc = vm->slots[in->arg] == sp ? in->x : pc + 1;
            continue;
        case RE_BOL:
            if (sp == 0) {
                pc++;
                continue;
            }
            break;
        case RE_EOL:
            if (at_eol(vm->s, vm->len, sp)) {
                pc++;
                continue;
            }
            break;
        case RE_EOI:
            if (sp == vm->len) {
                pc++;
                continue;
            }
            break;
        case RE_MATCH:
            if (!full || sp == vm->len) {
                return RE_MATCHED;
            }
            break;
        default:
            break;
        }
        /* fail: undo to the latest branch */
        for (;;) {
            struct kr_jregex_bt *b;

            if (vm->nst == 0) {
                return RE_NOMATCH;
            }
            b = &vm->st[--vm->nst];
            if (b->kind == RE_BT_RESTORE) {
                vm->slots[b->at] = b->val;
            } else {
                if (b->kind == RE_BT_MEMO) {
                    vm->memo[b->memo * (vm->len + 1) + b->val] = 1;
                }
                pc = b->at;
                sp = b->val;
                break;
            }
        }
    }
}

/* The pattern as the parser reads it: \Q...\E made literal, as Java. */
static struct re_tok *
pattern_tokens(const struct kr_jregex_char *pat, size_t n, size_t *ntok)
{
    struct re_tok *t = malloc((n + 1) * sizeof(*t));
    size_t i = 0, k = 0;

    if (t == NULL) {
        return NULL;
    }
    while (i < n) {
        if (pat[i].cp == '\\' && i + 1 < n && pat[i + 1].cp == 'Q') {
            i += 2;
            while (i < n && !(pat[i].cp == '\\' && i + 1 < n &&
                              pat[i + 1].cp == 'E')) {
                t[k].cp = pat[i].cp;
                t[k].col = pat[i].col;
                t[k].lit = true;
                k++;
                i++;
            }
            if (i < n) {
                i += 2;
            }
            continue;
        }
        if (pat[i].cp == '\\' && i + 1 < n) {
            t[k].cp = pat[i].cp;
            t[k].col = pat[i].col;
            t[k].lit = false;
            k++;
            i++;
        }
        t[k].cp = pat[i].cp;
        t[k].col = pat[i].col;
        t[k].lit = false;
        k++;
        i++;
    }
    *ntok = k;
    return t;
}

int
kr_jregex_compile(const struct kr_jregex_char *pat, size_t n,
                  struct kr_jregex **out, uint32_t *errcol, char *err,
                  size_t errlen)
{
    struct kr_jregex *re;
    struct re_tok *t;
    size_t nt;

    *out = NULL;
    *errcol = 0;
    if (n > RE_MAX_PATTERN) {
        *errcol = pat[0].col;
        snprintf(err, errlen, "a pattern longer than %d characters is not "
                 "supported", RE_MAX_PATTERN);
        return KR_ERROR;
    }
    re = calloc(1, sizeof(*re));
    t = pattern_tokens(pat, n, &nt);
    if (re == NULL || t == NULL) {
        free(re);
        free(t);
        snprintf(err, errlen, "out of memory");
        return KR_ENOMEM;
    }
    if (!re_compile(t, nt, re, errcol, err, errlen)) {
        free(t);
        free(re);
        if (*errcol == 0) {
            *errcol = n > 0 ? pat[0].col : 0;
        }
        return strcmp(err, "out of memory") == 0 ? KR_ENOMEM : KR_ERROR;
    }
    free(t);
    *out = re;
    return KR_OK;
}

void
kr_jregex_free(struct kr_jregex *re)
{
    if (re != NULL) {
        re_parts_free(re);
        free(re);
    }
}

unsigned
kr_jregex_groups(const struct kr_jregex *re)
{
    return re->ngroups;
}

void
kr_jregex_matcher_init(struct kr_jregex_matcher *m, const uint32_t *s,
                       size_t len, size_t steps)
{
    memset(m, 0, sizeof(*m));
    m->s = s;
    m->len = len;
    m->steps = steps;
}

void
kr_jregex_matcher_done(struct kr_jregex_matcher *m)
{
    free(m->slots);
    free(m->memo);
    free(m->st);
    m->slots = NULL;
    m->memo = NULL;
    m->st = NULL;
    m->capslots = m->capmemo = m->capst = m->nst = 0;
}

/* Room in m for re's slots and a cleared memo (a new search). */
static bool
matcher_ready(const struct kr_jregex *re, struct kr_jregex_matcher *m)
{
    size_t nmemo;

    if (re->nslots > m->capslots) {
        size_t *ns = realloc(m->slots, re->nslots * sizeof(*ns));

        if (ns == NULL) {
            return false;
        }
        m->slots = ns;
        m->capslots = re->nslots;
    }
    if (re->nmemo > 0 && m->len + 1 > SIZE_MAX / re->nmemo) {
        return false;
    }
    nmemo = re->nmemo * (m->len + 1);
    if (nmemo > m->capmemo) {
        uint8_t *nm = realloc(m->memo, nmemo);

        if (nm == NULL) {
            return false;
        }
        m->memo = nm;
        m->capmemo = nmemo;
    }
    if (nmemo > 0) {
        memset(m->memo, 0, nmemo);
    }
    return true;
}

static enum kr_jregex_result
result_of(enum re_result r)
{
    switch (r) {
    case RE_MATCHED: return KR_JREGEX_MATCH;
    case RE_COSTLY: return KR_JREGEX_COSTLY;
    case RE_OOM: return KR_JREGEX_ENOMEM;
    default: return KR_JREGEX_NOMATCH;
    }
}

enum kr_jregex_result
kr_jregex_matches(const struct kr_jregex *re, struct kr_jregex_matcher *m)
{
    if (!matcher_ready(re, m)) {
        return KR_JREGEX_ENOMEM;
    }
    return result_of(re_run(re, m, 0, true));
}

enum kr_jregex_result
kr_jregex_find(const struct kr_jregex *re, struct kr_jregex_matcher *m,
               size_t from)
{
    size_t st;

    if (!matcher_ready(re, m)) {
        return KR_JREGEX_ENOMEM;
    }
    for (st = from; st <= m->len; st++) {
        enum re_result r = re_run(re, m, st, false);

        if (r != RE_NOMATCH) {
            return result_of(r);
        }
    }
    return KR_JREGEX_NOMATCH;
}

bool
kr_jregex_group(const struct kr_jregex_matcher *m, unsigned g,
                size_t *start, size_t *end)
{
    if (m->slots[2 * g] == RE_NONE || m->slots[2 * g + 1] == RE_NONE) {
        return false;
    }
    *start = m->slots[2 * g];
    *end = m->slots[2 * g + 1];
    return true;
}
