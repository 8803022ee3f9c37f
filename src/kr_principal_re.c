/*
 * kr_principal_re.c - the patterns of Kafka's ssl.principal.mapping.rules:
 * java.util.regex syntax and meaning (JDK 17), run by PCRE2 (10.42).
 *
 * PCRE2 backtracks as Java does (leftmost first, alternatives left to
 * right, greedy and lazy quantifiers, lookaround, backreferences), but a
 * number of constructs are written alike and mean something else.  So
 * the pattern is not handed to PCRE2 as it is: it is parsed here with
 * Java's grammar (the JDK's Pattern.java, read to learn) and written
 * again in a PCRE2 syntax that means what Java means, or refused at its
 * column.  What is translated (T) and what is refused (R):
 *
 *   T  characters: every literal is written \x{...} (Java's \0 octal
 *      with up to 3 digits, \xhh, \uhhhh and surrogate pairs, \cX = X ^
 *      64, \a \e: PCRE2 reads \0dd, \x, \c and \u otherwise or not);
 *      \Q...\E as Java quotes;
 *   T  classes: Java's class is computed (ranges, negation over all code
 *      points, Java's rules for ']' first, '-' and \v in ranges) and
 *      written as code point ranges; \d \s \w \h \v and their negations
 *      as Java's ASCII sets; \p{...} for Unicode general categories
 *      (Java 17 has Unicode 13, PCRE2 10.42 Unicode 14: characters new in
 *      14 differ) and Java's POSIX names (ASCII sets);
 *   T  '.', '^', '$', \Z with Java's line terminators (\n \r \r\n U+0085
 *      U+2028 U+2029; PCRE2's "any newline" also has VT and FF) and the
 *      flags m, s and d (UNIX_LINES): zero-width groups and classes;
 *   T  (?i) is ASCII-only in Java (without u): PCRE2 is never caseless,
 *      letters become [xX] and classes get the other case of their ASCII
 *      letters (Java's CIRange); \p{Lu} \p{Ll} \p{Lt} \p{Lower} \p{Upper}
 *      widen as Java widens them;
 *   T  \R: Java 17's backtracks from \r\n to \r where PCRE2's is atomic;
 *      a quantified \R is atomic in Java (each iteration), in PCRE2 not;
 *   T  \b \B: Java 17's word characters are Unicode letters and digits
 *      and '_' (not \w), with a rule for non-spacing marks: callouts
 *      that compute Java's answer (JDK 19+ changed \b to ASCII \w: the
 *      broker's JDK decides, krelay follows 17);
 *   T  backreferences \n with Java's digit rule (\12 is group 12 only if
 *      12 groups are open), to a group the pattern lacks: never matches
 *      (PCRE2 refuses it); \k<name>; named groups become numbered ones;
 *   T  a{2}{3}: Java repeats an empty atom (a{2}), PCRE2 a{2} thrice;
 *   T  possessive X*+ over a group: Java makes each iteration atomic as
 *      well as the whole: (?>(?>X)*);
 *   R  what Java's and PCRE2's matchers keep differently: a capturing
 *      group in a negative lookaround, or in a positive lookaround, an
 *      atomic group or a possessive quantifier with a '|' or a
 *      quantifier on its way to the top of the pattern (Java keeps the
 *      value it took when the match backtracks out; with neither, every
 *      match passes through it again), or inside a repeated group Java
 *      matches one iteration at a time (no '|' and no variable quantifier
 *      in it: Java's GroupCurly does not restore inner groups); a
 *      backreference under (?i); \R in such a repeated group;
 *   R  what is not implemented: class intersection && and nested
 *      classes, flags u U x c, \p{IsLatin} scripts, blocks, binary and
 *      java* properties, \X, \b{g}, \N{...}, \G, quantifiers on anchors
 *      and lookarounds, lone surrogates, more than 4096 characters;
 *      lookbehind PCRE2 10.42 cannot run (not fixed length per
 *      alternative), a program PCRE2 finds too large;
 *   R  what Java refuses, as Java does.
 * Java works on UTF-16 units in a few places where PCRE2 works on
 * characters; with characters outside the BMP (emoji...) in a name,
 * Java's answer may differ in these: after an empty match, replaceAll's
 * next search starts between the two halves of such a character (Java
 * may then write a lone surrogate); lookbehind over such a character; a
 * search that fails at its first half.
 */
#include "config.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_principal.h"
#include "kr_principal_int.h"

#define PRE_MAX_PATTERN 4096     /* characters of a Java pattern */
#define PRE_MAX_DEPTH 64         /* nested groups */
#define PRE_MAX_COUNT 65535      /* largest n, m in {n,m} (PCRE2's) */
#define PRE_HEAP_LIMIT_KIB 32768u    /* backtracking memory, a search */

/* ---- the pattern as the parser reads it --------------------------------- */

/*
 * A pattern character.  lit: it came from \Q...\E as a character Java's
 * RemoveQEQuoting escapes (ASCII, not a letter; a digit first in the
 * quote): always a literal.  Letters and other digits of a quote are left
 * as they are, as Java leaves them.
 */
struct pre_tok {
    uint32_t cp;
    uint32_t col;
    bool lit;
};

static bool
ascii_alpha(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool
ascii_digit(uint32_t c)
{
    return c >= '0' && c <= '9';
}

static struct pre_tok *
pre_tokens(const struct kr_pre_char *pat, size_t n, size_t *ntok)
{
    struct pre_tok *t = malloc((n + 1) * sizeof(*t));
    size_t i = 0, k = 0;

    if (t == NULL) {
        return NULL;
    }
    while (i < n) {
        if (pat[i].cp == '\\' && i + 1 < n && pat[i + 1].cp == 'Q') {
            bool begin = true;

            i += 2;
            while (i < n && !(pat[i].cp == '\\' && i + 1 < n &&
                              pat[i + 1].cp == 'E')) {
                uint32_t c = pat[i].cp;

                t[k].cp = c;
                t[k].col = pat[i].col;
                t[k].lit = c < 0x80 && !ascii_alpha(c) &&
                           (!ascii_digit(c) || begin);
                begin = false;
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

/* ---- output: PCRE2 pattern text, each byte with its source column ------- */

struct pre_out {
    char *p;
    uint32_t *col;
    size_t n;
    size_t cap;
    bool oom;
};

static void
out_put(struct pre_out *o, const char *s, size_t n, uint32_t col)
{
    size_t k;

    if (o->oom) {
        return;
    }
    if (n >= o->cap - o->n) {
        size_t cap = o->cap ? o->cap : 256;
        char *np;
        uint32_t *nc;

        while (n >= cap - o->n) {
            cap *= 2;
        }
        np = realloc(o->p, cap);
        if (np == NULL) {
            o->oom = true;
            return;
        }
        o->p = np;
        nc = realloc(o->col, cap * sizeof(*nc));
        if (nc == NULL) {
            o->oom = true;
            return;
        }
        o->col = nc;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    for (k = 0; k < n; k++) {
        o->col[o->n + k] = col;
    }
    o->n += n;
    o->p[o->n] = '\0';
}

static void
out_str(struct pre_out *o, const char *s, uint32_t col)
{
    out_put(o, s, strlen(s), col);
}

/* Insert s at offset at (what follows moves right). */
static void
out_insert(struct pre_out *o, size_t at, const char *s, uint32_t col)
{
    size_t n = strlen(s), tail;

    out_put(o, s, n, col);
    if (o->oom) {
        return;
    }
    tail = o->n - n - at;
    memmove(o->p + at + n, o->p + at, tail);
    memmove(o->col + at + n, o->col + at, tail * sizeof(*o->col));
    memcpy(o->p + at, s, n);
    for (tail = 0; tail < n; tail++) {
        o->col[at + tail] = col;
    }
}

/* A code point as a PCRE2 literal: letters and digits as they are. */
static void
out_cp(struct pre_out *o, uint32_t cp, uint32_t col)
{
    char b[16];

    if (cp < 0x80 && (ascii_alpha(cp) || ascii_digit(cp))) {
        b[0] = (char)cp;
        b[1] = '\0';
    } else {
        snprintf(b, sizeof(b), "\\x{%x}", (unsigned)cp);
    }
    out_str(o, b, col);
}

/* ---- sets of code points (Java's classes) ------------------------------- */

struct pre_range {
    uint32_t lo;
    uint32_t hi;
};

struct pre_set {
    struct pre_range *r;
    size_t n;
    size_t cap;
    bool oom;
    char props[256];             /* PCRE2 \p{..} \P{..} items, in order */
};

static void
set_add(struct pre_set *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        struct pre_range *nr = realloc(s->r, cap * sizeof(*nr));

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
    const struct pre_range *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sort and merge; complemented over all code points when neg. */
static void
set_normalise(struct pre_set *s, bool neg)
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
        struct pre_range *old = s->r;
        size_t nold = s->n;
        uint32_t next = 0;

        s->r = NULL;
        s->n = s->cap = 0;
        for (i = 0; i < nold; i++) {
            if (old[i].lo > next) {
                set_add(s, next, old[i].lo - 1);
            }
            next = old[i].hi + 1;
        }
        if (next <= 0x10FFFF) {
            set_add(s, next, 0x10FFFF);
        }
        free(old);
    }
}

/* Java's predefined ASCII classes, and \h \v (the same sets as PCRE2's). */
static void
set_add_named(struct pre_set *s, char which, bool neg)
{
    struct pre_set p;
    size_t i;

    memset(&p, 0, sizeof(p));
    switch (which) {
    case 'd':
        set_add(&p, '0', '9');
        break;
    case 's':
        set_add(&p, '\t', '\r');
        set_add(&p, ' ', ' ');
        break;
    case 'w':
        set_add(&p, '0', '9');
        set_add(&p, 'A', 'Z');
        set_add(&p, '_', '_');
        set_add(&p, 'a', 'z');
        break;
    case 'h':
        set_add(&p, '\t', '\t');
        set_add(&p, ' ', ' ');
        set_add(&p, 0xA0, 0xA0);
        set_add(&p, 0x1680, 0x1680);
        set_add(&p, 0x180E, 0x180E);
        set_add(&p, 0x2000, 0x200A);
        set_add(&p, 0x202F, 0x202F);
        set_add(&p, 0x205F, 0x205F);
        set_add(&p, 0x3000, 0x3000);
        break;
    case 'v':
        set_add(&p, '\n', '\r');
        set_add(&p, 0x85, 0x85);
        set_add(&p, 0x2028, 0x2029);
        break;
    default:
        break;
    }
    set_normalise(&p, neg);
    for (i = 0; i < p.n; i++) {
        set_add(s, p.r[i].lo, p.r[i].hi);
    }
    s->oom = s->oom || p.oom;
    free(p.r);
}

/*
 * lo..hi as Java adds it under (?i) without u (CIRange, BitClass): the
 * range, and each ASCII letter whose other case is in it.
 */
static void
set_add_ci(struct pre_set *s, uint32_t lo, uint32_t hi, bool ci)
{
    uint32_t c;

    set_add(s, lo, hi);
    if (!ci) {
        return;
    }
    for (c = 'A'; c <= 'z'; c++) {
        uint32_t o;

        if (!ascii_alpha(c)) {
            continue;
        }
        o = c ^ 0x20;
        if (o >= lo && o <= hi) {
            set_add(s, c, c);
        }
    }
}

static void
set_prop(struct pre_set *s, const char *item)
{
    size_t have = strlen(s->props);

    if (have + strlen(item) >= sizeof(s->props)) {
        s->oom = true;           /* reported as "too many properties" */
        return;
    }
    memcpy(s->props + have, item, strlen(item) + 1);
}

/* The set as one PCRE2 class (surrogates left out: UTF-8 has none). */
static void
out_set(struct pre_out *o, const struct pre_set *s, bool neg, uint32_t col)
{
    char b[40];
    size_t i;

    if (s->n == 0 && s->props[0] == '\0') {
        /* nothing: a class no character matches (or every one) */
        out_str(o, neg ? "[\\x{0}-\\x{10ffff}]" : "(?!)", col);
        return;
    }
    out_str(o, neg ? "[^" : "[", col);
    for (i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;

        if (lo >= 0xD800 && hi <= 0xDFFF) {
            continue;
        }
        if (lo <= 0xDFFF && hi >= 0xD800) {
            if (lo < 0xD800) {
                snprintf(b, sizeof(b), "\\x{%x}-\\x{d7ff}", (unsigned)lo);
                out_str(o, b, col);
            }
            if (hi > 0xDFFF) {
                snprintf(b, sizeof(b), "\\x{e000}-\\x{%x}", (unsigned)hi);
                out_str(o, b, col);
            }
            continue;
        }
        if (lo == hi) {
            snprintf(b, sizeof(b), "\\x{%x}", (unsigned)lo);
        } else {
            snprintf(b, sizeof(b), "\\x{%x}-\\x{%x}", (unsigned)lo,
                     (unsigned)hi);
        }
        out_str(o, b, col);
    }
    out_str(o, s->props, col);
    out_str(o, "]", col);
}

/* ---- the parser --------------------------------------------------------- */

enum {
    PF_I = 1,                    /* CASE_INSENSITIVE (ASCII) */
    PF_M = 2,                    /* MULTILINE */
    PF_S = 4,                    /* DOTALL */
    PF_D = 8                     /* UNIX_LINES */
};

/* What a group body holds, for the checks its quantifier makes. */
struct pre_body {
    bool nondet;                 /* '|' or a variable quantifier (Java's
                                    study: not deterministic) */
    bool linebreak;              /* \R outside lookarounds */
    unsigned caps;               /* capturing groups inside */
    bool alt;                    /* a '|' at this level */
    bool spinecap;               /* a capturing group inside a positive
                                    lookaround or an atomic group, and
                                    only plain groups between: allowed
                                    while no '|' or quantifier is on its
                                    way up to the top */
};

#define PRE_SPINE_MSG "a capturing group inside a lookaround or an " \
    "atomic group, under '|' or a quantifier, is not supported (Java " \
    "keeps its value when it backtracks out)"

struct pre_ps {
    const struct pre_tok *t;
    size_t n;
    size_t i;
    struct pre_out out;
    unsigned flags;
    unsigned ngroups;            /* groups opened so far */
    unsigned total;              /* the pattern's groups (pass 2) */
    struct kr_pre_name *names;
    size_t nnames;
    size_t capnames;
    unsigned depth;
    unsigned look;               /* inside lookarounds */
    unsigned behind;             /* inside lookbehinds */
    unsigned neglook;            /* inside negative lookarounds */
    unsigned atomic;             /* inside (?>...) */
    struct pre_body *body;       /* of the innermost group being read */
    bool wordb;
    bool failed;
    bool oom;
    uint32_t errcol;
    char err[200];
};

static void KR_PRINTF(3, 4)
pre_fail(struct pre_ps *ps, size_t at, const char *fmt, ...)
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

static void
pre_oom(struct pre_ps *ps)
{
    if (!ps->failed) {
        ps->oom = true;
        pre_fail(ps, ps->i, "out of memory");
    }
}

/* Token at is the (unquoted) character c. */
static bool
is(const struct pre_ps *ps, size_t at, uint32_t c)
{
    return at < ps->n && !ps->t[at].lit && ps->t[at].cp == c;
}

static uint32_t
col_at(const struct pre_ps *ps, size_t at)
{
    return at < ps->n ? ps->t[at].col
                      : (ps->n > 0 ? ps->t[ps->n - 1].col + 1 : 0);
}

static int
hexval(const struct pre_ps *ps, size_t at)
{
    uint32_t c;

    if (at >= ps->n || ps->t[at].lit) {
        return -1;
    }
    c = ps->t[at].cp;
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

static int32_t
hex4(struct pre_ps *ps)
{
    int32_t v = 0;
    unsigned j;

    for (j = 0; j < 4; j++) {
        int h = hexval(ps, ps->i + j);

        if (h < 0) {
            return -1;
        }
        v = v * 16 + h;
    }
    ps->i += 4;
    return v;
}

/* What an escape is. */
enum esc_kind {
    ESC_FAIL = 0,
    ESC_CHAR,                    /* *cp */
    ESC_SET,                     /* *set filled (\d \s \w \h \v \p ...) */
    ESC_OTHER                    /* outside a class only: emitted */
};

/*
 * \p{name} \P{name} \pX at ps->i (the 'p' or 'P'), as Java's family():
 * into set.  Supported: Unicode general categories and Java's POSIX
 * names.  (?i) widens Lu Ll Lt and Lower Upper as Java does.
 */
static bool
pre_family(struct pre_ps *ps, size_t at, struct pre_set *set)
{
    static const char *const cats[] = {
        "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Me", "Mc", "Nd", "Nl",
        "No", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cs", "Pd", "Ps", "Pe",
        "Pc", "Po", "Sm", "Sc", "Sk", "So", "Pi", "Pf", "L", "M", "N", "Z",
        "C", "P", "S",
    };
    bool comp = ps->t[ps->i].cp == 'P', ci = (ps->flags & PF_I) != 0;
    char name[64], item[64];
    size_t k = 0, c;
    struct pre_set sub;
    const char *prop = NULL, *nm;

    ps->i++;
    if (is(ps, ps->i, '{')) {
        ps->i++;
        while (ps->i < ps->n && !is(ps, ps->i, '}')) {
            if (k + 1 < sizeof(name) && ps->t[ps->i].cp < 0x80) {
                name[k++] = (char)ps->t[ps->i].cp;
            } else {
                k = sizeof(name);
            }
            ps->i++;
        }
        if (ps->i >= ps->n) {
            pre_fail(ps, at, "an unclosed \\p{...} (Java refuses it)");
            return false;
        }
        ps->i++;
        if (k == 0) {
            pre_fail(ps, at, "an empty \\p{} (Java refuses it)");
            return false;
        }
        if (k >= sizeof(name)) {
            pre_fail(ps, at, "this \\p{...} is not supported");
            return false;
        }
    } else {
        if (ps->i >= ps->n) {
            pre_fail(ps, at, "\\p at the end of the pattern (Java refuses "
                     "it)");
            return false;
        }
        if (ps->t[ps->i].cp < 0x80) {
            name[k++] = (char)ps->t[ps->i].cp;
        } else {
            name[k++] = '?';
        }
        ps->i++;
    }
    name[k] = '\0';
    nm = name;
    if (strncmp(name, "Is", 2) == 0 && k > 2 && k <= 4) {
        nm = name + 2;           /* \p{IsLu}: a category, as \p{Lu} */
    }
    memset(&sub, 0, sizeof(sub));
    for (c = 0; c < KR_ARRAY_LEN(cats); c++) {
        if (strcmp(nm, cats[c]) == 0) {
            prop = cats[c];
        }
    }
    if (prop != NULL) {
        if (ci && (strcmp(prop, "Lu") == 0 || strcmp(prop, "Ll") == 0 ||
                   strcmp(prop, "Lt") == 0)) {
            prop = "L&";         /* Java: Lu, Ll and Lt all three */
        }
        snprintf(item, sizeof(item), "\\%c{%s}", comp ? 'P' : 'p', prop);
        set_prop(set, item);
        return true;
    }
    if (nm != name) {
        nm = "";                 /* \p{IsLower} is Unicode's, not POSIX */
    }
    if (strcmp(nm, "ASCII") == 0) {
        set_add(&sub, 0, 0x7F);
    } else if (strcmp(nm, "Alnum") == 0) {
        set_add(&sub, '0', '9');
        set_add(&sub, 'A', 'Z');
        set_add(&sub, 'a', 'z');
    } else if (strcmp(nm, "Alpha") == 0 ||
               (ci && (strcmp(nm, "Lower") == 0 ||
                       strcmp(nm, "Upper") == 0))) {
        set_add(&sub, 'A', 'Z');
        set_add(&sub, 'a', 'z');
    } else if (strcmp(nm, "Blank") == 0) {
        set_add(&sub, '\t', '\t');
        set_add(&sub, ' ', ' ');
    } else if (strcmp(nm, "Cntrl") == 0) {
        set_add(&sub, 0, 0x1F);
        set_add(&sub, 0x7F, 0x7F);
    } else if (strcmp(nm, "Digit") == 0) {
        set_add(&sub, '0', '9');
    } else if (strcmp(nm, "Graph") == 0) {
        set_add(&sub, 0x21, 0x7E);
    } else if (strcmp(nm, "Lower") == 0) {
        set_add(&sub, 'a', 'z');
    } else if (strcmp(nm, "Print") == 0) {
        set_add(&sub, 0x20, 0x7E);
    } else if (strcmp(nm, "Punct") == 0) {
        set_add(&sub, 0x21, 0x2F);
        set_add(&sub, 0x3A, 0x40);
        set_add(&sub, 0x5B, 0x60);
        set_add(&sub, 0x7B, 0x7E);
    } else if (strcmp(nm, "Space") == 0) {
        set_add(&sub, '\t', '\r');
        set_add(&sub, ' ', ' ');
    } else if (strcmp(nm, "Upper") == 0) {
        set_add(&sub, 'A', 'Z');
    } else if (strcmp(nm, "XDigit") == 0) {
        set_add(&sub, '0', '9');
        set_add(&sub, 'A', 'F');
        set_add(&sub, 'a', 'f');
    } else {
        free(sub.r);
        pre_fail(ps, at, "\\%c{%s} is not supported (only Unicode general "
                 "categories and Java's POSIX classes)", comp ? 'P' : 'p',
                 name);
        return false;
    }
    set_normalise(&sub, comp);
    for (c = 0; c < sub.n; c++) {
        set_add(set, sub.r[c].lo, sub.r[c].hi);
    }
    set->oom = set->oom || sub.oom;
    free(sub.r);
    return true;
}

static void pre_backref(struct pre_ps *ps, size_t at, unsigned g);

/*
 * An escape at ps->i (the backslash), as Java's escape(): a code point,
 * a set (into *set), or (outside a class) something it emitted itself
 * (an anchor, \b, a backreference, \R: *kind says which for the
 * quantifier).  isrange: in a class, before or after '-' (\v is then
 * VT, as Java).
 */
enum other_kind {
    OK_ZERO,                     /* zero-width: no quantifier */
    OK_ITEM,                     /* one PCRE2 item */
    OK_LINEBREAK                 /* \R */
};

static enum esc_kind
pre_escape(struct pre_ps *ps, bool in_class, bool isrange, uint32_t *cp,
           struct pre_set *set, enum other_kind *kind)
{
    size_t at = ps->i;
    uint32_t c, col = col_at(ps, at);

    ps->i++;
    if (ps->i >= ps->n) {
        pre_fail(ps, at, "'\\' at the end of the pattern (Java refuses it)");
        return ESC_FAIL;
    }
    c = ps->t[ps->i++].cp;
    if (c >= 0x80) {
        *cp = c;                 /* any other character: itself */
        return ESC_CHAR;
    }
    switch (c) {
    case 't': *cp = '\t'; return ESC_CHAR;
    case 'n': *cp = '\n'; return ESC_CHAR;
    case 'r': *cp = '\r'; return ESC_CHAR;
    case 'f': *cp = '\f'; return ESC_CHAR;
    case 'a': *cp = 7; return ESC_CHAR;
    case 'e': *cp = 27; return ESC_CHAR;
    case 'd': case 's': case 'w': case 'h':
    case 'D': case 'S': case 'W': case 'H': case 'V':
        set_add_named(set, (char)(c | 0x20), c < 'a');
        return ESC_SET;
    case 'v':
        if (isrange) {
            *cp = 0x0B;
            return ESC_CHAR;
        }
        set_add_named(set, 'v', false);
        return ESC_SET;
    case 'p': case 'P':
        ps->i--;
        return pre_family(ps, at, set) ? ESC_SET : ESC_FAIL;
    case '0': {
        /* Java's o(): \0n, \0nn, \0mnn (m <= 3) */
        uint32_t v = 0;
        unsigned k = 0;

        while (k < 3 && hexval(ps, ps->i) >= 0 && ascii_digit(ps->t[ps->i].cp)
               && ps->t[ps->i].cp <= '7' && (k < 2 || v <= 037)) {
            v = v * 8 + (ps->t[ps->i++].cp - '0');
            k++;
        }
        if (k == 0) {
            pre_fail(ps, at, "an octal escape \\0 without digits (Java "
                     "refuses it)");
            return ESC_FAIL;
        }
        *cp = v;
        return ESC_CHAR;
    }
    case 'x': {
        int h1 = hexval(ps, ps->i), h2 = hexval(ps, ps->i + 1);

        if (h1 >= 0 && h2 >= 0) {
            ps->i += 2;
            *cp = (uint32_t)(h1 * 16 + h2);
            return ESC_CHAR;
        }
        if (is(ps, ps->i, '{') && hexval(ps, ps->i + 1) >= 0) {
            uint32_t w = 0;

            ps->i++;
            while (hexval(ps, ps->i) >= 0) {
                w = w * 16 + (uint32_t)hexval(ps, ps->i++);
                if (w > 0x10FFFF) {
                    pre_fail(ps, at, "\\x{...} above U+10FFFF (Java refuses "
                             "it)");
                    return ESC_FAIL;
                }
            }
            if (!is(ps, ps->i, '}')) {
                pre_fail(ps, at, "an unclosed \\x{...} (Java refuses it)");
                return ESC_FAIL;
            }
            ps->i++;
            if (w >= 0xD800 && w <= 0xDFFF) {
                pre_fail(ps, at, "a lone surrogate is not supported");
                return ESC_FAIL;
            }
            *cp = w;
            return ESC_CHAR;
        }
        pre_fail(ps, at, "a malformed \\x escape (Java refuses it)");
        return ESC_FAIL;
    }
    case 'u': {
        int32_t v = hex4(ps);

        if (v < 0) {
            pre_fail(ps, at, "\\u needs four hex digits (Java refuses it)");
            return ESC_FAIL;
        }
        if (v >= 0xD800 && v <= 0xDBFF && is(ps, ps->i, '\\') &&
            is(ps, ps->i + 1, 'u')) {
            size_t save = ps->i;
            int32_t lo;

            ps->i += 2;
            lo = hex4(ps);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + (((uint32_t)v - 0xD800) << 10) +
                      ((uint32_t)lo - 0xDC00);
                return ESC_CHAR;
            }
            ps->i = save;
        }
        if (v >= 0xD800 && v <= 0xDFFF) {
            pre_fail(ps, at, "a lone surrogate \\u%04X is not supported",
                     (unsigned)v);
            return ESC_FAIL;
        }
        *cp = (uint32_t)v;
        return ESC_CHAR;
    }
    case 'c':
        if (ps->i >= ps->n) {
            pre_fail(ps, at, "\\c at the end of the pattern (Java refuses "
                     "it)");
            return ESC_FAIL;
        }
        if (ps->t[ps->i].lit) {
            pre_fail(ps, at, "\\c before \\Q is not supported");
            return ESC_FAIL;
        }
        *cp = ps->t[ps->i++].cp ^ 64;
        return ESC_CHAR;
    default:
        break;
    }
    if (!ascii_alpha(c) && !ascii_digit(c)) {
        *cp = c;                 /* \. \$ \/ ...: the character */
        return ESC_CHAR;
    }
    if (in_class) {
        pre_fail(ps, at, "\\%c in a class (Java refuses it)", (char)c);
        return ESC_FAIL;
    }
    *kind = OK_ZERO;
    switch (c) {
    case 'A':
        out_str(&ps->out, "\\A", col);
        return ESC_OTHER;
    case 'z':
        out_str(&ps->out, "\\z", col);
        return ESC_OTHER;
    case 'Z':
        /* Java's Dollar(false) / UnixDollar(false) */
        out_str(&ps->out, (ps->flags & PF_D)
                ? "(?=\\n?\\z)"
                : "(?:\\z|(?=\\r\\n\\z)|(?<!\\r)(?=\\n\\z)|"
                  "(?=[\\r\\x{85}\\x{2028}\\x{2029}]\\z))", col);
        return ESC_OTHER;
    case 'b':
        if (c == 'b' && is(ps, ps->i, '{') && is(ps, ps->i + 1, 'g')) {
            pre_fail(ps, at, "\\b{g} is not supported");
            return ESC_FAIL;
        }
        /* FALLTHROUGH */
    case 'B':
        out_str(&ps->out, c == 'b' ? "(?C1)" : "(?C2)", col);
        ps->wordb = true;
        return ESC_OTHER;
    case 'R':
        *kind = OK_LINEBREAK;
        if (ps->look == 0) {
            ps->body->linebreak = true;
        }
        out_str(&ps->out, "(?:\\r\\n|[\\n\\x{b}\\f\\r\\x{85}\\x{2028}"
                "\\x{2029}])", col);
        return ESC_OTHER;
    case 'k': {
        char name[64];
        size_t k = 0, j;

        if (!is(ps, ps->i, '<')) {
            pre_fail(ps, at, "\\k not followed by '<' (Java refuses it)");
            return ESC_FAIL;
        }
        ps->i++;
        while (ps->i < ps->n && ps->t[ps->i].cp < 0x80 &&
               (ascii_alpha(ps->t[ps->i].cp) ||
                (k > 0 && ascii_digit(ps->t[ps->i].cp)))) {
            if (k + 1 < sizeof(name)) {
                name[k++] = (char)ps->t[ps->i].cp;
            }
            ps->i++;
        }
        name[k] = '\0';
        if (k == 0 || !is(ps, ps->i, '>')) {
            pre_fail(ps, at, "a malformed \\k<name> (Java refuses it)");
            return ESC_FAIL;
        }
        ps->i++;
        for (j = 0; j < ps->nnames; j++) {
            if (strcmp(ps->names[j].name, name) == 0) {
                *kind = OK_ITEM;
                pre_backref(ps, at, ps->names[j].group);
                return ps->failed ? ESC_FAIL : ESC_OTHER;
            }
        }
        pre_fail(ps, at, "\\k<%s>: no group <%s> before it (Java refuses "
                 "it)", name, name);
        return ESC_FAIL;
    }
    case 'G':
        pre_fail(ps, at, "\\G is not supported");
        return ESC_FAIL;
    case 'X':
        pre_fail(ps, at, "\\X is not supported");
        return ESC_FAIL;
    case 'N':
        pre_fail(ps, at, "\\N{...} is not supported");
        return ESC_FAIL;
    default:
        break;
    }
    if (c >= '1' && c <= '9') {
        /* Java's ref(): more digits while that many groups are open */
        unsigned g = c - '0';

        while (ps->i < ps->n && !ps->t[ps->i].lit &&
               ascii_digit(ps->t[ps->i].cp) &&
               g * 10 + (ps->t[ps->i].cp - '0') <= ps->ngroups) {
            g = g * 10 + (ps->t[ps->i++].cp - '0');
        }
        *kind = OK_ITEM;
        pre_backref(ps, at, g);
        return ps->failed ? ESC_FAIL : ESC_OTHER;
    }
    pre_fail(ps, at, "an unknown escape \\%c (Java refuses it)", (char)c);
    return ESC_FAIL;
}

static void
pre_backref(struct pre_ps *ps, size_t at, unsigned g)
{
    char b[32];

    if (ps->flags & PF_I) {
        pre_fail(ps, at, "a backreference under (?i) is not supported");
        return;
    }
    if (ps->behind > 0) {
        pre_fail(ps, at, "a backreference in a lookbehind (Java refuses "
                 "it: no obvious maximum length)");
        return;
    }
    if (g > ps->total) {
        /* Java: a group the pattern does not have never matches */
        out_str(&ps->out, "[^\\x{0}-\\x{10ffff}]", col_at(ps, at));
        return;
    }
    snprintf(b, sizeof(b), "\\g{%u}", g);
    out_str(&ps->out, b, col_at(ps, at));
}

/* [...] at ps->i, as Java's clazz() and range(): emitted. */
static void
pre_class(struct pre_ps *ps)
{
    struct pre_set s;
    size_t open = ps->i;
    bool neg = false, any = false, ci = (ps->flags & PF_I) != 0;

    memset(&s, 0, sizeof(s));
    ps->i++;
    if (is(ps, ps->i, '^')) {
        neg = true;
        ps->i++;
    }
    while (!ps->failed) {
        size_t at = ps->i;
        uint32_t lo, hi;
        enum other_kind kind;
        enum esc_kind e;

        if (ps->i >= ps->n) {
            pre_fail(ps, open, "an unclosed class '[' (Java refuses it)");
            break;
        }
        if (is(ps, ps->i, ']') && any) {
            ps->i++;
            break;
        }
        if (is(ps, ps->i, '[')) {
            pre_fail(ps, at, "a nested class '[' is not supported (write "
                     "'\\[' for the character)");
            break;
        }
        if (is(ps, ps->i, '&') && is(ps, ps->i + 1, '&')) {
            pre_fail(ps, at, "a class intersection '&&' is not supported");
            break;
        }
        any = true;
        if (is(ps, ps->i, '\\')) {
            bool isrange = is(ps, ps->i + 2, '-');

            e = pre_escape(ps, true, isrange, &lo, &s, &kind);
            if (e == ESC_FAIL) {
                break;
            }
            if (e == ESC_SET) {
                continue;
            }
        } else {
            lo = ps->t[ps->i++].cp;
        }
        hi = lo;
        if (is(ps, ps->i, '-') && !is(ps, ps->i + 1, '[') &&
            !is(ps, ps->i + 1, ']')) {
            ps->i++;
            if (ps->i >= ps->n) {
                pre_fail(ps, open, "an unclosed class '[' (Java refuses "
                         "it)");
                break;
            }
            if (is(ps, ps->i, '\\')) {
                struct pre_set none;

                memset(&none, 0, sizeof(none));
                e = pre_escape(ps, true, true, &hi, &none, &kind);
                free(none.r);
                if (e == ESC_FAIL) {
                    break;
                }
                if (e != ESC_CHAR) {
                    pre_fail(ps, at, "a class as the end of a range (Java "
                             "refuses it)");
                    break;
                }
            } else {
                hi = ps->t[ps->i++].cp;
            }
            if (hi < lo) {
                pre_fail(ps, at, "a range whose end is below its start "
                         "(Java refuses it)");
                break;
            }
        }
        set_add_ci(&s, lo, hi, ci);
    }
    if (!ps->failed) {
        if (s.oom) {
            if (s.props[0] != '\0') {
                pre_fail(ps, open, "a class with this many \\p{...} is not "
                         "supported");
            } else {
                pre_oom(ps);
            }
        } else {
            set_normalise(&s, false);
            out_set(&ps->out, &s, neg, col_at(ps, open));
        }
    }
    free(s.r);
}

static void pre_expr(struct pre_ps *ps);

/* What the quantifier after an atom may do with it. */
enum atom_kind {
    AK_NONE,                     /* nothing was emitted (flags) */
    AK_ITEM,                     /* one PCRE2 item: char, class, \g{n} */
    AK_LINEBREAK,                /* \R: atomic when repeated */
    AK_GROUP,                    /* a group */
    AK_ZERO                      /* anchor, lookaround, \b: none */
};

/* Flags letters at ps->i, as Java's addFlag()/subFlag(). */
static bool
pre_flags(struct pre_ps *ps, unsigned *flags)
{
    bool on = true;

    for (;;) {
        uint32_t c;
        unsigned f;

        if (ps->i >= ps->n || ps->t[ps->i].lit) {
            return true;
        }
        c = ps->t[ps->i].cp;
        switch (c) {
        case 'i': f = PF_I; break;
        case 'm': f = PF_M; break;
        case 's': f = PF_S; break;
        case 'd': f = PF_D; break;
        case 'u': case 'U': case 'x': case 'c':
            if (on) {
                pre_fail(ps, ps->i, "the inline flag '%c' is not supported",
                         (char)c);
                return false;
            }
            f = 0;               /* never on: turning it off is nothing */
            break;
        case '-':
            if (!on) {
                return true;     /* Java: a second '-' ends the flags */
            }
            on = false;
            ps->i++;
            continue;
        default:
            return true;
        }
        if (on) {
            *flags |= f;
        } else {
            *flags &= ~f;
        }
        ps->i++;
    }
}

/* A group at ps->i ('('): emitted; returns its kind (AK_NONE: flags). */
static enum atom_kind
pre_group(struct pre_ps *ps, struct pre_body *inner)
{
    size_t at = ps->i;
    uint32_t col = col_at(ps, at);
    unsigned save_flags = ps->flags, look = 0, atomic = 0, behind = 0;
    unsigned neg = 0;
    unsigned save_behind;
    struct pre_body *save_body = ps->body;
    enum atom_kind kind = AK_GROUP;
    char b[16];

    ps->i++;
    if (is(ps, ps->i, '?')) {
        ps->i++;
        if (is(ps, ps->i, ':')) {
            ps->i++;
            out_str(&ps->out, "(?:", col);
        } else if (is(ps, ps->i, '=') || is(ps, ps->i, '!')) {
            snprintf(b, sizeof(b), "(?%c", (char)ps->t[ps->i].cp);
            neg = ps->t[ps->i].cp == '!';
            ps->i++;
            out_str(&ps->out, b, col);
            look = 1;
            kind = AK_ZERO;
        } else if (is(ps, ps->i, '>')) {
            ps->i++;
            out_str(&ps->out, "(?>", col);
            atomic = 1;
        } else if (is(ps, ps->i, '<') &&
                   (is(ps, ps->i + 1, '=') || is(ps, ps->i + 1, '!'))) {
            snprintf(b, sizeof(b), "(?<%c", (char)ps->t[ps->i + 1].cp);
            neg = ps->t[ps->i + 1].cp == '!';
            ps->i += 2;
            out_str(&ps->out, b, col);
            look = 1;
            behind = 1;
            kind = AK_ZERO;
        } else if (is(ps, ps->i, '<')) {
            char name[64];
            size_t k = 0, j;

            ps->i++;
            if (ps->i >= ps->n || ps->t[ps->i].cp >= 0x80 ||
                !ascii_alpha(ps->t[ps->i].cp)) {
                pre_fail(ps, at, "a group name that does not start with a "
                         "Latin letter (Java refuses it)");
                return AK_NONE;
            }
            while (ps->i < ps->n && ps->t[ps->i].cp < 0x80 &&
                   (ascii_alpha(ps->t[ps->i].cp) ||
                    ascii_digit(ps->t[ps->i].cp))) {
                if (k + 1 >= sizeof(name)) {
                    pre_fail(ps, at, "a group name longer than %zu "
                             "characters is not supported", sizeof(name) - 1);
                    return AK_NONE;
                }
                name[k++] = (char)ps->t[ps->i++].cp;
            }
            name[k] = '\0';
            if (!is(ps, ps->i, '>')) {
                pre_fail(ps, at, "a group name not ended by '>' (Java "
                         "refuses it)");
                return AK_NONE;
            }
            ps->i++;
            for (j = 0; j < ps->nnames; j++) {
                if (strcmp(ps->names[j].name, name) == 0) {
                    pre_fail(ps, at, "a second group named <%s> (Java "
                             "refuses it)", name);
                    return AK_NONE;
                }
            }
            if (ps->nnames == ps->capnames) {
                size_t cap = ps->capnames ? 2 * ps->capnames : 4;
                struct kr_pre_name *nn = realloc(ps->names,
                                                 cap * sizeof(*nn));

                if (nn == NULL) {
                    pre_oom(ps);
                    return AK_NONE;
                }
                ps->names = nn;
                ps->capnames = cap;
            }
            ps->names[ps->nnames].name = strdup(name);
            if (ps->names[ps->nnames].name == NULL) {
                pre_oom(ps);
                return AK_NONE;
            }
            ps->names[ps->nnames].group = ps->ngroups + 1;
            ps->nnames++;
            goto capture;
        } else {
            /* inline flags (?i) or a flags group (?i:...) */
            unsigned f = ps->flags;

            if (!pre_flags(ps, &f)) {
                return AK_NONE;
            }
            if (is(ps, ps->i, ')')) {
                ps->i++;
                ps->flags = f;   /* to the end of the enclosing group */
                return AK_NONE;
            }
            if (!is(ps, ps->i, ':')) {
                pre_fail(ps, at, "an unknown group or inline flag (?%s "
                         "(Java refuses it)", ps->i < ps->n &&
                         ps->t[ps->i].cp == '#' ? "#" : "...");
                return AK_NONE;
            }
            ps->i++;
            ps->flags = f;
            out_str(&ps->out, "(?:", col);
        }
    } else {
capture:
        if (ps->neglook > 0) {
            pre_fail(ps, at, "a capturing group inside a negative "
                     "lookaround is not supported (Java keeps its value "
                     "when the lookaround fails)");
            return AK_NONE;
        }
        if (ps->look > 0 || ps->atomic > 0) {
            /* Java keeps what such a group took when the match backtracks
               out of the lookaround or atomic group; the same as PCRE2
               when every match passes through the group again */
            if (ps->body->alt) {
                pre_fail(ps, at, PRE_SPINE_MSG);
                return AK_NONE;
            }
            ps->body->spinecap = true;
        }
        ps->ngroups++;
        ps->body->caps++;
        out_str(&ps->out, "(", col);
    }
    if (++ps->depth > PRE_MAX_DEPTH) {
        pre_fail(ps, at, "groups nested deeper than %d are not supported",
                 PRE_MAX_DEPTH);
        return AK_NONE;
    }
    memset(inner, 0, sizeof(*inner));
    ps->body = inner;
    ps->look += look;
    ps->neglook += neg;
    save_behind = ps->behind;
    if (look && !behind) {
        ps->behind = 0;          /* Java studies no lookahead's length */
    }
    ps->behind += behind;
    ps->atomic += atomic;
    pre_expr(ps);
    ps->look -= look;
    ps->neglook -= neg;
    ps->behind = save_behind;
    ps->atomic -= atomic;
    ps->body = save_body;
    ps->depth--;
    ps->flags = save_flags;      /* Java: flags end with their group */
    if (ps->failed) {
        return AK_NONE;
    }
    if (!is(ps, ps->i, ')')) {
        pre_fail(ps, at, "an unclosed group '(' (Java refuses it)");
        return AK_NONE;
    }
    ps->i++;
    out_str(&ps->out, ")", col);
    if (look == 0) {
        save_body->nondet = save_body->nondet || inner->nondet;
        save_body->linebreak = save_body->linebreak || inner->linebreak;
    }
    save_body->caps += inner->caps;
    if (inner->spinecap) {
        if (save_body->alt) {
            pre_fail(ps, at, PRE_SPINE_MSG);
            return AK_NONE;
        }
        save_body->spinecap = true;
    }
    return kind;
}

/* A number of {n,m}: -1 none, -2 too large for Java's int. */
static int64_t
pre_count(struct pre_ps *ps)
{
    int64_t v = 0;
    size_t d = 0;

    while (ps->i < ps->n && !ps->t[ps->i].lit &&
           ascii_digit(ps->t[ps->i].cp)) {
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

/*
 * Java's closure(): a quantifier at ps->i for the atom emitted from out
 * offset start (kind; inner: a group's body, caps its own groups).
 */
static void
pre_closure(struct pre_ps *ps, size_t start, enum atom_kind kind,
            const struct pre_body *inner, bool capturing)
{
    size_t at = ps->i;
    int64_t min, max;
    char q[48];
    uint32_t col = col_at(ps, at);
    bool lazy = false, poss = false, ques;

    if (ps->i >= ps->n || ps->t[ps->i].lit) {
        return;
    }
    switch (ps->t[ps->i].cp) {
    case '?':
        min = 0;
        max = 1;
        ps->i++;
        break;
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
    case '{':
        ps->i++;
        min = pre_count(ps);
        if (min == -1) {
            pre_fail(ps, at, "'{' that is not a repetition {n,m} (Java "
                     "refuses it; write '\\{')");
            return;
        }
        max = min;
        if (is(ps, ps->i, ',')) {
            ps->i++;
            if (is(ps, ps->i, '}')) {
                max = -1;
            } else {
                max = pre_count(ps);
                if (max == -1) {
                    max = -3;
                }
            }
        }
        if (!is(ps, ps->i, '}')) {
            pre_fail(ps, at, "an unclosed repetition {n,m} (Java refuses "
                     "it)");
            return;
        }
        ps->i++;
        if (min == -2 || max == -2 || (max >= 0 && max < min)) {
            pre_fail(ps, at, "an illegal repetition range (Java refuses it)");
            return;
        }
        if (min > PRE_MAX_COUNT || max > PRE_MAX_COUNT) {
            pre_fail(ps, at, "a repetition count above %d is not supported",
                     PRE_MAX_COUNT);
            return;
        }
        break;
    default:
        return;
    }
    if (is(ps, ps->i, '?')) {
        lazy = true;
        ps->i++;
    } else if (is(ps, ps->i, '+')) {
        poss = true;
        ps->i++;
    }
    if (kind == AK_NONE) {
        return;                  /* Java: an empty atom repeated: nothing */
    }
    if (kind == AK_ZERO) {
        pre_fail(ps, at, "a quantifier after an anchor, a lookaround or "
                 "\\b is not supported");
        return;
    }
    ques = min == 0 && max == 1;
    if (kind == AK_GROUP && (inner->spinecap ||
                             (capturing && (ps->look > 0 || ps->atomic > 0)))) {
        pre_fail(ps, at, PRE_SPINE_MSG);
        return;
    }
    if (min != max) {
        ps->body->nondet = true; /* Java's study: a variable quantifier */
    }
    if (kind == AK_GROUP && poss && (inner->caps > 0 || capturing)) {
        pre_fail(ps, at, "a capturing group under a possessive quantifier "
                 "is not supported (Java keeps its value when it "
                 "backtracks out)");
        return;
    }
    if (kind == AK_GROUP && !ques && !poss && !inner->nondet) {
        /* Java's GroupCurly: one iteration at a time */
        if (inner->caps > 0) {
            pre_fail(ps, at, "a capturing group inside this repeated group "
                     "is not supported (Java keeps its value when it "
                     "backtracks out; a '|' or a variable quantifier in "
                     "the group makes Java match it as PCRE2 does)");
            return;
        }
        if (inner->linebreak) {
            pre_fail(ps, at, "\\R inside this repeated group is not "
                     "supported");
            return;
        }
    }
    if (max < 0) {
        snprintf(q, sizeof(q), "{%d,}", (int)min);
    } else {
        snprintf(q, sizeof(q), "{%d,%d}", (int)min, (int)max);
    }
    if (lazy) {
        strcat(q, "?");
    }
    if (kind == AK_LINEBREAK) {
        /* Java repeats \R one iteration at a time: "(?:" -> "(?>" */
        ps->out.p[start + 2] = '>';
    }
    if (poss && kind == AK_GROUP) {
        /* Java: each iteration atomic, and the whole */
        out_insert(&ps->out, start, "(?>(?>", col);
        out_str(&ps->out, ")", col);
        out_str(&ps->out, q, col);
        out_str(&ps->out, ")", col);
        return;
    }
    out_str(&ps->out, q, col);
    if (poss) {
        out_str(&ps->out, "+", col);
    }
}

/* Java's sequence(): atoms and their quantifiers up to '|' or ')'. */
static void
pre_seq(struct pre_ps *ps)
{
    while (!ps->failed && ps->i < ps->n && !is(ps, ps->i, '|') &&
           !is(ps, ps->i, ')')) {
        const struct pre_tok *t = &ps->t[ps->i];
        size_t start = ps->out.n, at = ps->i;
        uint32_t col = t->col;
        enum atom_kind kind = AK_ITEM;
        struct pre_body inner;
        bool capturing = false;

        memset(&inner, 0, sizeof(inner));
        if (t->lit) {
            ps->i++;
            goto literal;
        }
        switch (t->cp) {
        case '(':
            capturing = !is(ps, ps->i + 1, '?') ||
                        (is(ps, ps->i + 2, '<') && !is(ps, ps->i + 3, '=') &&
                         !is(ps, ps->i + 3, '!'));
            kind = pre_group(ps, &inner);
            if (ps->failed) {
                return;
            }
            if (kind == AK_NONE) {
                continue;        /* (?i): no atom; Java's closure() is
                                    not called either */
            }
            break;
        case '[':
            pre_class(ps);
            break;
        case '.':
            ps->i++;
            if (ps->flags & PF_S) {
                out_str(&ps->out, "[\\x{0}-\\x{10ffff}]", col);
            } else if (ps->flags & PF_D) {
                out_str(&ps->out, "[^\\n]", col);
            } else {
                out_str(&ps->out, "[^\\n\\r\\x{85}\\x{2028}\\x{2029}]", col);
            }
            break;
        case '^':
            ps->i++;
            kind = AK_ZERO;
            if (!(ps->flags & PF_M)) {
                out_str(&ps->out, "\\A", col);
            } else if (ps->flags & PF_D) {
                out_str(&ps->out, "(?!\\z)(?:\\A|(?<=\\n))", col);
            } else {
                out_str(&ps->out, "(?!\\z)(?:\\A|(?<=[\\n\\x{85}\\x{2028}"
                        "\\x{2029}])|(?<=\\r)(?!\\n))", col);
            }
            break;
        case '$':
            ps->i++;
            kind = AK_ZERO;
            switch (ps->flags & (PF_M | PF_D)) {
            case PF_D:
                out_str(&ps->out, "(?=\\n?\\z)", col);
                break;
            case PF_D | PF_M:
                out_str(&ps->out, "(?=\\n|\\z)", col);
                break;
            case PF_M:
                out_str(&ps->out, "(?:\\z|(?=[\\r\\x{85}\\x{2028}\\x{2029}])|"
                        "(?<!\\r)(?=\\n))", col);
                break;
            default:
                out_str(&ps->out, "(?:\\z|(?=\\r\\n\\z)|(?<!\\r)(?=\\n\\z)|"
                        "(?=[\\r\\x{85}\\x{2028}\\x{2029}]\\z))", col);
                break;
            }
            break;
        case '*':
        case '+':
        case '?':
            pre_fail(ps, at, "a dangling '%c' (Java refuses it)",
                     (char)t->cp);
            return;
        case '{':
            /* Java: an empty atom, then its repetition (or an error) */
            kind = AK_NONE;
            break;
        case '\\': {
            struct pre_set s;
            enum other_kind ok = OK_ITEM;
            enum esc_kind e;
            uint32_t cp;

            memset(&s, 0, sizeof(s));
            e = pre_escape(ps, false, false, &cp, &s, &ok);
            if (e == ESC_FAIL) {
                free(s.r);
                return;
            }
            if (e == ESC_SET) {
                if (s.oom) {
                    pre_oom(ps);
                } else {
                    set_normalise(&s, false);
                    out_set(&ps->out, &s, false, col);
                }
                free(s.r);
                break;
            }
            free(s.r);
            if (e == ESC_OTHER) {
                kind = ok == OK_ZERO ? AK_ZERO
                     : ok == OK_LINEBREAK ? AK_LINEBREAK : AK_ITEM;
                break;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                pre_fail(ps, at, "a lone surrogate is not supported");
                return;
            }
            goto emit_cp;
        literal:
            cp = t->cp;
        emit_cp:
            if ((ps->flags & PF_I) && ascii_alpha(cp)) {
                char b[8];

                snprintf(b, sizeof(b), "[%c%c]", (char)cp, (char)(cp ^ 0x20));
                out_str(&ps->out, b, col);
            } else {
                out_cp(&ps->out, cp, col);
            }
            break;
        }
        default:
            ps->i++;
            {
                uint32_t cp = t->cp;

                if ((ps->flags & PF_I) && ascii_alpha(cp)) {
                    char b[8];

                    snprintf(b, sizeof(b), "[%c%c]", (char)cp,
                             (char)(cp ^ 0x20));
                    out_str(&ps->out, b, col);
                } else {
                    out_cp(&ps->out, cp, col);
                }
            }
            break;
        }
        if (ps->failed) {
            return;
        }
        pre_closure(ps, start, kind, &inner, capturing);
        if (!ps->failed && kind == AK_NONE && at == ps->i) {
            /* '{' not followed by a valid repetition: closure() failed */
            pre_fail(ps, at, "'{' that is not a repetition (Java refuses "
                     "it; write '\\{')");
        }
    }
}

/* Java's expr(): sequences separated by '|'. */
static void
pre_expr(struct pre_ps *ps)
{
    pre_seq(ps);
    while (!ps->failed && is(ps, ps->i, '|')) {
        if (ps->body->spinecap) {
            pre_fail(ps, ps->i, PRE_SPINE_MSG);
            return;
        }
        ps->body->nondet = true;
        ps->body->alt = true;
        out_str(&ps->out, "|", col_at(ps, ps->i));
        ps->i++;
        pre_seq(ps);
    }
}

/* One pass over the tokens; false with ps->err on failure. */
static bool
pre_translate(struct pre_ps *ps)
{
    struct pre_body top;

    memset(&top, 0, sizeof(top));
    ps->body = &top;
    pre_expr(ps);
    ps->body = NULL;
    if (!ps->failed && ps->i < ps->n) {
        /* pre_expr stops only at ')' here */
        pre_fail(ps, ps->i, "an unmatched ')' (Java refuses it)");
    }
    if (!ps->failed && ps->out.oom) {
        pre_oom(ps);
    }
    return !ps->failed;
}

static void
names_free(struct kr_pre_name *names, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        free(names[i].name);
    }
    free(names);
}

/* The options every pattern is compiled with (see the top). */
#define PRE_COMPILE_OPTIONS \
    (PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_NEVER_UCP | \
     PCRE2_NEVER_BACKSLASH_C | PCRE2_DOLLAR_ENDONLY)

int
kr_pre_compile(const struct kr_pre_char *pat, size_t n, struct kr_pre **out,
               uint32_t *errcol, char *err, size_t errlen)
{
    struct pre_ps ps;
    struct pre_tok *t;
    struct kr_pre *re = NULL;
    pcre2_compile_context *cc = NULL;
    size_t nt, erroff;
    int pass, ec, rc = KR_ERROR;
    uint32_t opts = PRE_COMPILE_OPTIONS;

    *out = NULL;
    *errcol = 0;
    if (n > PRE_MAX_PATTERN) {
        *errcol = pat[0].col;
        snprintf(err, errlen, "a pattern longer than %d characters is not "
                 "supported", PRE_MAX_PATTERN);
        return KR_ERROR;
    }
    t = pre_tokens(pat, n, &nt);
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return KR_ENOMEM;
    }
    /* pass 0 counts the groups (a backreference may name a later one) */
    memset(&ps, 0, sizeof(ps));
    for (pass = 0; pass < 2; pass++) {
        unsigned total = pass == 0 ? UINT_MAX : ps.ngroups;

        free(ps.out.p);
        free(ps.out.col);
        names_free(ps.names, ps.nnames);
        memset(&ps, 0, sizeof(ps));
        ps.t = t;
        ps.n = nt;
        ps.total = total;
        if (!pre_translate(&ps)) {
            *errcol = ps.errcol != 0 ? ps.errcol : (n > 0 ? pat[0].col : 0);
            snprintf(err, errlen, "%s", ps.err);
            rc = ps.oom ? KR_ENOMEM : KR_ERROR;
            goto out;
        }
    }
    out_str(&ps.out, "", 0);    /* the empty pattern has no bytes */
    re = calloc(1, sizeof(*re));
    cc = pcre2_compile_context_create(NULL);
    if (re == NULL || cc == NULL || ps.out.oom) {
        snprintf(err, errlen, "out of memory");
        rc = KR_ENOMEM;
        goto out;
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    pcre2_set_bsr(cc, PCRE2_BSR_UNICODE);
    pcre2_set_parens_nest_limit(cc, 1000);
    if (ps.wordb) {
        /* the callouts decide: no item next to them made possessive */
        opts |= PCRE2_NO_AUTO_POSSESS;
    }
    re->code = pcre2_compile((PCRE2_SPTR)ps.out.p, ps.out.n, opts, &ec,
                             &erroff, cc);
    if (re->code == NULL) {
        PCRE2_UCHAR msg[160];

        if (ec == PCRE2_ERROR_NOMEMORY) {
            snprintf(err, errlen, "out of memory");
            rc = KR_ENOMEM;
            goto out;
        }
        pcre2_get_error_message(ec, msg, sizeof(msg));
        *errcol = erroff < ps.out.n ? ps.out.col[erroff]
                                    : (n > 0 ? pat[n - 1].col + 1 : 0);
        snprintf(err, errlen, "this is not supported (PCRE2 cannot run "
                 "its translation: %s)", (const char *)msg);
        goto out;
    }
    re->ngroups = ps.ngroups;
    re->names = ps.names;
    re->nnames = ps.nnames;
    ps.names = NULL;
    ps.nnames = 0;
    re->wordb = ps.wordb;
    *out = re;
    re = NULL;
    rc = KR_OK;
out:
    pcre2_compile_context_free(cc);
    kr_pre_free(re);
    names_free(ps.names, ps.nnames);
    free(ps.out.p);
    free(ps.out.col);
    free(t);
    return rc;
}

void
kr_pre_free(struct kr_pre *re)
{
    if (re != NULL) {
        pcre2_code_free(re->code);
        names_free(re->names, re->nnames);
        free(re);
    }
}

unsigned
kr_pre_group_named(const struct kr_pre *re, const char *name, size_t n)
{
    size_t i;

    for (i = 0; i < re->nnames; i++) {
        if (strlen(re->names[i].name) == n &&
            memcmp(re->names[i].name, name, n) == 0) {
            return re->names[i].group;
        }
    }
    return 0;
}

/* ---- matching ------------------------------------------------------------ */

/* Word classes of a code point, as Java 17's \b sees it. */
enum {
    WC_WORD = 1,                 /* a letter, a decimal digit or '_' */
    WC_BASE = 2,                 /* a letter or a decimal digit */
    WC_MN = 4                    /* a non-spacing mark */
};

static const uint8_t *
utf8_prev(const uint8_t *s, size_t *pos)
{
    do {
        (*pos)--;
    } while (*pos > 0 && (s[*pos] & 0xC0) == 0x80);
    return s + *pos;
}

/*
 * Java 17's Bound.check() at byte offset pos: a word boundary.  Word
 * characters: isLetterOrDigit or '_'; a non-spacing mark counts as the
 * letter or digit it follows (hasBaseCharacter).
 */
static bool
java_boundary(const struct kr_pre_subject *sj, size_t pos)
{
    const uint8_t *s = (const uint8_t *)sj->s;
    const uint8_t *wc = sj->wclass;
    bool left = false, right = false;

    if (pos > 0) {
        size_t p = pos;

        utf8_prev(s, &p);
        left = (wc[p] & WC_WORD) != 0;
        if (!left && (wc[p] & WC_MN)) {
            /* back over the marks to the character they sit on */
            while (p > 0 && (wc[p] & WC_MN)) {
                utf8_prev(s, &p);
            }
            left = (wc[p] & WC_BASE) != 0;
        }
    }
    if (pos < sj->len) {
        size_t p = pos;

        right = (wc[p] & WC_WORD) != 0;
        if (!right && (wc[p] & WC_MN)) {
            while (p > 0 && (wc[p] & WC_MN)) {
                utf8_prev(s, &p);
            }
            right = (wc[p] & WC_BASE) != 0;
        }
    }
    return left != right;
}

static int
pre_callout(pcre2_callout_block *cb, void *data)
{
    const struct kr_pre_subject *sj = data;
    bool at = java_boundary(sj, cb->current_position);

    /* 0: go on; 1: fail here (backtrack) */
    if (cb->callout_number == 1) {
        return at ? 0 : 1;
    }
    return at ? 1 : 0;
}

/* Classify each character of the subject once (PCRE2's Unicode tables). */
static bool
subject_classes(struct kr_pre_subject *sj)
{
    static const char pat[] = "(_)|([\\p{L}\\p{Nd}])|(\\p{Mn})";
    pcre2_code *re;
    pcre2_match_data *md;
    size_t pos = 0;
    int ec;
    PCRE2_SIZE eo;

    sj->wclass = calloc(sj->len + 1, 1);
    re = pcre2_compile((PCRE2_SPTR)pat, sizeof(pat) - 1,
                       PCRE2_UTF | PCRE2_ANCHORED, &ec, &eo, NULL);
    md = re != NULL ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    if (sj->wclass == NULL || md == NULL) {
        pcre2_match_data_free(md);
        pcre2_code_free(re);
        return false;
    }
    while (pos < sj->len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)sj->s, sj->len, pos,
                             PCRE2_NO_UTF_CHECK, md, NULL);

        if (rc == 2) {
            sj->wclass[pos] = WC_WORD;
        } else if (rc == 3) {
            sj->wclass[pos] = WC_WORD | WC_BASE;
        } else if (rc == 4) {
            sj->wclass[pos] = WC_MN;
        }
        do {
            pos++;
        } while (pos < sj->len && ((uint8_t)sj->s[pos] & 0xC0) == 0x80);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return true;
}

/* PCRE2's limit for one start position of a search in a subject of len
   bytes (KR_PRINCIPAL_MATCH_STEPS shared out, at least
   KR_PRINCIPAL_POSITION_STEPS_MIN). */
static uint32_t
pre_position_limit(size_t len)
{
    uint64_t per = KR_PRINCIPAL_MATCH_STEPS / ((uint64_t)len + 1);

    return per < KR_PRINCIPAL_POSITION_STEPS_MIN
               ? KR_PRINCIPAL_POSITION_STEPS_MIN
               : (uint32_t)per;
}

bool
kr_pre_subject_init(struct kr_pre_subject *sj, const char *s, size_t len)
{
    memset(sj, 0, sizeof(*sj));
    sj->s = s;
    sj->len = len;
    sj->mctx = pcre2_match_context_create(NULL);
    if (sj->mctx == NULL) {
        return false;
    }
    /* PCRE2's limits hold for each start position of a search, and a
       find() may try every one: share the budget out over them, so that
       one search costs at most about KR_PRINCIPAL_MATCH_STEPS whatever
       the subject's length */
    pcre2_set_match_limit(sj->mctx, pre_position_limit(len));
    pcre2_set_depth_limit(sj->mctx, pre_position_limit(len));
    pcre2_set_heap_limit(sj->mctx, PRE_HEAP_LIMIT_KIB);
    pcre2_set_callout(sj->mctx, pre_callout, sj);
    return true;
}

void
kr_pre_subject_done(struct kr_pre_subject *sj)
{
    pcre2_match_data_free(sj->md);
    pcre2_match_context_free(sj->mctx);
    free(sj->wclass);
    memset(sj, 0, sizeof(*sj));
}

static enum kr_pre_result
pre_run(const struct kr_pre *re, struct kr_pre_subject *sj, size_t from,
        uint32_t opts)
{
    int rc;

    if (re->wordb && sj->wclass == NULL && !subject_classes(sj)) {
        return KR_PRE_ENOMEM;
    }
    if (sj->md == NULL || sj->md_pairs < re->ngroups + 1) {
        pcre2_match_data_free(sj->md);
        sj->md = pcre2_match_data_create(re->ngroups + 1, NULL);
        sj->md_pairs = sj->md != NULL ? re->ngroups + 1 : 0;
        if (sj->md == NULL) {
            return KR_PRE_ENOMEM;
        }
    }
    rc = pcre2_match(re->code, (PCRE2_SPTR)sj->s, sj->len, from,
                     opts | PCRE2_NO_UTF_CHECK, sj->md, sj->mctx);
    if (rc >= 0) {
        return KR_PRE_MATCH;
    }
    switch (rc) {
    case PCRE2_ERROR_NOMATCH:
        return KR_PRE_NOMATCH;
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
        return KR_PRE_COSTLY;
    default:
        /* PCRE2_ERROR_NOMEMORY; nothing else can come from a valid
           subject and offset: a failure, never a match */
        return KR_PRE_ENOMEM;
    }
}

enum kr_pre_result
kr_pre_matches(const struct kr_pre *re, struct kr_pre_subject *sj)
{
    return pre_run(re, sj, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
}

enum kr_pre_result
kr_pre_find(const struct kr_pre *re, struct kr_pre_subject *sj, size_t from)
{
    return pre_run(re, sj, from, 0);
}

bool
kr_pre_group(const struct kr_pre_subject *sj, unsigned g, size_t *b,
             size_t *e)
{
    PCRE2_SIZE *ov;

    if (sj->md == NULL || g >= pcre2_get_ovector_count(sj->md)) {
        return false;
    }
    ov = pcre2_get_ovector_pointer(sj->md);
    if (ov[2 * g] == PCRE2_UNSET || ov[2 * g + 1] == PCRE2_UNSET) {
        return false;
    }
    *b = ov[2 * g];
    *e = ov[2 * g + 1];
    return true;
}
