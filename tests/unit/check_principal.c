/*
 * check_principal.c - unit tests for kr_principal (TLS principals as
 * Kafka gives them), with its patterns: java.util.regex's, translated
 * for PCRE2 (src/kr_principal_re.c).
 *
 * The expected strings come from the JDK: tests/data/principal/x500.txt
 * (X500Principal.getName() of certificate subjects) and
 * tests/data/principal/mapping.txt (Kafka's mapping rules run by
 * java.util.regex), both found through $top_srcdir and kept equal to what
 * the JDK says by tests/principal_jdk.sh.  No key and no certificate is
 * needed here: names are the committed DER, read by OpenSSL
 * (d2i_X509_NAME) and built with its API.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "kr_principal.h"
#include "../../src/kr_principal_int.h"

/* ---- the tables ------------------------------------------------------------ */

#define KR_MAX_FIELDS 64

/* One record: its lines as (key, value), both NUL-terminated in buf. */
struct rec {
    char *key[KR_MAX_FIELDS];
    char *val[KR_MAX_FIELDS];
    unsigned n;
    unsigned line;              /* of its first line, for messages */
};

struct table {
    char *buf;
    struct rec *r;
    size_t n;
};

/* Read tests/data/principal/NAME into records (header comments skipped). */
static void
table_load(const char *name, struct table *t)
{
    const char *top = getenv("top_srcdir");
    char path[4096], *p, *nl;
    size_t cap = 0, len;
    unsigned line = 0;
    bool in_rec = false;
    FILE *f;

    ck_assert_msg(top != NULL, "top_srcdir is not set (run via make check)");
    snprintf(path, sizeof(path), "%s/tests/data/principal/%s", top, name);
    f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    t->buf = malloc(len + 1);
    ck_assert_ptr_nonnull(t->buf);
    ck_assert_uint_eq(fread(t->buf, 1, len, f), len);
    t->buf[len] = '\0';
    fclose(f);
    t->r = NULL;
    t->n = 0;
    for (p = t->buf; *p != '\0'; p = nl + 1) {
        struct rec *r;
        char *sp;

        line++;
        nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "%s: no newline at the end", name);
        *nl = '\0';
        if (*p == '\0') {
            in_rec = false;
            continue;
        }
        if (*p == '#' && !in_rec) {
            continue;
        }
        if (!in_rec) {
            if (t->n == cap) {
                cap = cap ? 2 * cap : 64;
                t->r = realloc(t->r, cap * sizeof(*t->r));
                ck_assert_ptr_nonnull(t->r);
            }
            memset(&t->r[t->n], 0, sizeof(t->r[0]));
            t->r[t->n].line = line;
            t->n++;
            in_rec = true;
        }
        r = &t->r[t->n - 1];
        ck_assert_uint_lt(r->n, KR_MAX_FIELDS);
        sp = strchr(p, ' ');
        if (sp != NULL) {
            *sp = '\0';
        }
        r->key[r->n] = p;
        r->val[r->n] = sp != NULL ? sp + 1 : nl;  /* nl: now "" */
        r->n++;
    }
}

static void
table_free(struct table *t)
{
    free(t->r);
    free(t->buf);
}

static const char *
rec_get(const struct rec *r, const char *key)
{
    unsigned i;

    for (i = 0; i < r->n; i++) {
        if (strcmp(r->key[i], key) == 0) {
            return r->val[i];
        }
    }
    return NULL;
}

/* The table's TEXT: %XX is that byte.  Returns a malloc'd string. */
static char *
text_dec(const char *s, size_t *len)
{
    char *out = malloc(strlen(s) + 1);
    size_t k = 0;
    unsigned v;

    ck_assert_ptr_nonnull(out);
    while (*s != '\0') {
        if (s[0] == '%' && s[1] != '\0' && s[2] != '\0' &&
            sscanf(s + 1, "%2x", &v) == 1) {
            out[k++] = (char)v;
            s += 3;
        } else {
            out[k++] = *s++;
        }
    }
    out[k] = '\0';
    if (len != NULL) {
        *len = k;
    }
    return out;
}

static uint8_t *
hex_dec(const char *s, size_t *len)
{
    size_t n = strlen(s), i;
    uint8_t *out = malloc(n / 2 + 1);
    unsigned v;

    ck_assert_ptr_nonnull(out);
    ck_assert_msg(n % 2 == 0, "odd hex %s", s);
    for (i = 0; i < n / 2; i++) {
        ck_assert_int_eq(sscanf(s + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return out;
}

/* ---- X500Principal.getName() ------------------------------------------------ */

/*
 * Every record of x500.txt: the DER as is, and through OpenSSL's
 * X509_NAME (d2i, as a certificate's subject is) when OpenSSL reads it.
 */
START_TEST(test_x500_table)
{
    struct table t;
    size_t i, via_openssl = 0, refused = 0, ok = 0;

    table_load("x500.txt", &t);
    ck_assert_uint_ge(t.n, 50);
    for (i = 0; i < t.n; i++) {
        const struct rec *r = &t.r[i];
        const char *name = rec_get(r, "name"), *der_hex = rec_get(r, "der");
        const char *jdk = rec_get(r, "jdk"), *krelay = rec_get(r, "krelay");
        const char *why = NULL;
        const unsigned char *p;
        uint8_t *der;
        size_t n, len = 0, elen;
        char *out = NULL, *exp;
        X509_NAME *xn;
        int rc;

        ck_assert_msg(name != NULL && der_hex != NULL, "x500.txt:%u: a "
                      "record without name or der", r->line);
        der = hex_dec(der_hex, &n);
        rc = kr_principal_x500_name_der(der, n, &out, &len, &why);
        if (krelay != NULL) {
            ck_assert_str_eq(krelay, "unsupported");
            ck_assert_msg(rc == KR_EUNSUPPORTED, "x500.txt:%u (%s): rc %d",
                          r->line, name, rc);
            ck_assert_ptr_null(out);
            ck_assert_ptr_nonnull(why);
            refused++;
        } else if (jdk == NULL) {
            ck_assert_msg(rec_get(r, "jdk!") != NULL, "x500.txt:%u: no jdk",
                          r->line);
            ck_assert_msg(rc == KR_EPROTO, "x500.txt:%u (%s): the JDK "
                          "refuses this name, krelay gave %d \"%s\"",
                          r->line, name, rc, out != NULL ? out : "");
            ck_assert_ptr_null(out);
            ck_assert_ptr_nonnull(why);
            refused++;
        } else {
            exp = text_dec(jdk, &elen);
            ck_assert_msg(rc == KR_OK, "x500.txt:%u (%s): rc %d (%s)",
                          r->line, name, rc, why);
            ck_assert_msg(len == elen && memcmp(out, exp, len) == 0,
                          "x500.txt:%u (%s):\n  krelay %s\n  jdk    %s",
                          r->line, name, out, exp);
            ck_assert_uint_eq(strlen(out), len);
            free(out);
            out = NULL;
            /* the same through OpenSSL's X509_NAME, when OpenSSL reads it
               (the table says which) */
            p = der;
            xn = d2i_X509_NAME(NULL, &p, (long)n);
            ck_assert_msg((xn != NULL) == (rec_get(r, "openssl!") == NULL),
                          "x500.txt:%u (%s): OpenSSL %s the name", r->line,
                          name, xn != NULL ? "reads" : "does not read");
            if (xn != NULL) {
                rc = kr_principal_x500_name(xn, &out, &len, NULL);
                ck_assert_msg(rc == KR_OK, "x500.txt:%u: rc %d", r->line, rc);
                ck_assert_msg(len == elen && memcmp(out, exp, len) == 0,
                              "x500.txt:%u (%s) via X509_NAME:\n  krelay "
                              "%s\n  jdk    %s", r->line, name, out, exp);
                X509_NAME_free(xn);
                via_openssl++;
            }
            free(exp);
            ok++;
        }
        free(out);
        free(der);
    }
    ck_assert_uint_ge(via_openssl, 40);
    ck_assert_uint_ge(refused, 8);
    table_free(&t);
}
END_TEST

/*
 * A subject built with OpenSSL's API, as a CA's software builds one: the
 * multi-valued RDN's AVAs are added in one order and written (DER: SET
 * OF sorted by encoding) in another, which is the one Java shows.
 */
START_TEST(test_x500_openssl_api)
{
    X509_NAME *xn = X509_NAME_new();
    char *out = NULL;
    size_t len;

    ck_assert_ptr_nonnull(xn);
    ck_assert_int_eq(X509_NAME_add_entry_by_txt(xn, "O", MBSTRING_UTF8,
                     (const unsigned char *)"Example, Inc.", -1, -1, 0), 1);
    ck_assert_int_eq(X509_NAME_add_entry_by_txt(xn, "OU", MBSTRING_UTF8,
                     (const unsigned char *)"z", -1, -1, 0), 1);
    ck_assert_int_eq(X509_NAME_add_entry_by_txt(xn, "CN", MBSTRING_UTF8,
                     (const unsigned char *)"a", -1, -1, -1), 1);
    ck_assert_int_eq(X509_NAME_add_entry_by_txt(xn, "emailAddress",
                     MBSTRING_ASC, (const unsigned char *)"a@b.c", -1, -1,
                     0), 1);
    ck_assert_int_eq(X509_NAME_add_entry_by_txt(xn, "CN", MBSTRING_UTF8,
                     (const unsigned char *)" Jürgen#1 ", -1, -1, 0), 1);
    ck_assert_int_eq(kr_principal_x500_name(xn, &out, &len, NULL), KR_OK);
    /* what the JDK writes for this subject (x500.txt has each piece) */
    ck_assert_str_eq(out, "CN=\\ Jürgen\\#1\\ ,"
                          "1.2.840.113549.1.9.1=#16056140622e63,"
                          "CN=a+OU=z,O=Example\\, Inc.");
    ck_assert_uint_eq(len, strlen(out));
    free(out);
    X509_NAME_free(xn);
}
END_TEST

/* What the JDK refuses or krelay does not read, without a table. */
START_TEST(test_x500_refused)
{
    static const struct {
        const char *hex;
        int rc;
    } cases[] = {
        { "", KR_EPROTO },                           /* nothing */
        { "30", KR_EPROTO },                         /* truncated */
        { "3003310130", KR_EPROTO },                 /* AVA past its SET */
        { "30003000", KR_EPROTO },                   /* bytes after */
        { "3100", KR_EUNSUPPORTED },                 /* not a SEQUENCE */
        { "3080310b300906035504030c0261620000", KR_EUNSUPPORTED },
        { "30850000000d310b300906035504030c026162", KR_EPROTO },
        { "300d310b300906035504030c0361", KR_EPROTO },
    };
    size_t i, n;
    char *out;
    const char *why;

    for (i = 0; i < KR_ARRAY_LEN(cases); i++) {
        uint8_t *der = hex_dec(cases[i].hex, &n);

        out = (char *)1;
        why = NULL;
        ck_assert_int_eq(kr_principal_x500_name_der(der, n, &out, NULL, &why),
                         cases[i].rc);
        ck_assert_ptr_null(out);
        ck_assert_ptr_nonnull(why);
        free(der);
    }
}
END_TEST

/* The JDK reads OIDs of up to 4096 octets (measured: 4097 fails). */
START_TEST(test_x500_oid_limit)
{
    static const size_t sizes[] = { 4096, 4097 };
    size_t k;

    for (k = 0; k < 2; k++) {
        size_t oidn = sizes[k], n = 0, i;
        uint8_t *der = malloc(oidn + 32);
        char *out = NULL;
        int rc;

        /* 30 82 L 31 82 L 30 82 L 06 82 oidn <oid> 0c 01 61 */
        der[n++] = 0x30;
        der[n++] = 0x82;
        der[n++] = (uint8_t)((oidn + 15) >> 8);
        der[n++] = (uint8_t)(oidn + 15);
        der[n++] = 0x31;
        der[n++] = 0x82;
        der[n++] = (uint8_t)((oidn + 11) >> 8);
        der[n++] = (uint8_t)(oidn + 11);
        der[n++] = 0x30;
        der[n++] = 0x82;
        der[n++] = (uint8_t)((oidn + 7) >> 8);
        der[n++] = (uint8_t)(oidn + 7);
        der[n++] = 0x06;
        der[n++] = 0x82;
        der[n++] = (uint8_t)(oidn >> 8);
        der[n++] = (uint8_t)oidn;
        der[n++] = 0x2A;
        for (i = 1; i < oidn; i++) {
            der[n++] = 0x01;
        }
        der[n++] = 0x0C;
        der[n++] = 0x01;
        der[n++] = 'a';
        rc = kr_principal_x500_name_der(der, n, &out, NULL, NULL);
        if (k == 0) {
            ck_assert_int_eq(rc, KR_OK);
            ck_assert(strncmp(out, "1.2.1.1.1.", 10) == 0);
            ck_assert_str_eq(out + strlen(out) - 10, ".1=#0c0161");
        } else {
            ck_assert_int_eq(rc, KR_EPROTO);
        }
        free(out);
        free(der);
    }
}
END_TEST

/* ---- mapping rules ---------------------------------------------------------- */

/* Map name through rules text; the result, or the outcome's name. */
static char *
map1(const char *rules, const char *name, size_t len)
{
    struct kr_principal_rules *r = NULL;
    char err[512], *out = NULL;
    enum kr_principal_map_outcome o;

    ck_assert_msg(kr_principal_mapping_rules_parse(rules, &r, err,
                                                   sizeof(err)) == KR_OK,
                  "%s: %s", rules, err);
    o = kr_principal_map(r, name, len, &out, NULL);
    kr_principal_mapping_rules_free(r);
    if (o != KR_PRINCIPAL_MAPPED) {
        ck_assert_ptr_null(out);
        out = strdup(kr_principal_map_outcome_str(o));
    }
    return out;
}

static void
assert_map(const char *rules, const char *name, const char *exp)
{
    char *got = map1(rules, name, strlen(name));

    ck_assert_msg(strcmp(got, exp) == 0, "%s on \"%s\": \"%s\", not \"%s\"",
                  rules, name, got, exp);
    free(got);
}

/* Parse must fail with exactly msg (and KR_ERROR). */
static void
assert_parse_err(const char *rules, const char *msg)
{
    struct kr_principal_rules *r = (struct kr_principal_rules *)1;
    char err[512];

    ck_assert_int_eq(kr_principal_mapping_rules_parse(rules, &r, err,
                                                      sizeof(err)),
                     KR_ERROR);
    ck_assert_ptr_null(r);
    ck_assert_msg(strcmp(err, msg) == 0, "%s:\n  got  %s\n  want %s", rules,
                  err, msg);
}

/*
 * Every record of mapping.txt: RULE:pattern/replace/case, each input
 * mapped as the JDK maps it; a rule Java refuses (pattern-error) or
 * throws on (replacement-error) is refused when it loads, a construct
 * krelay does not implement too.
 */
START_TEST(test_mapping_table)
{
    struct table t;
    size_t i, names = 0, refused = 0;

    table_load("mapping.txt", &t);
    ck_assert_uint_ge(t.n, 30);
    for (i = 0; i < t.n; i++) {
        const struct rec *r = &t.r[i];
        const char *name = rec_get(r, "name"), *cs = rec_get(r, "case");
        const char *krelay = rec_get(r, "krelay");
        char *pat = text_dec(rec_get(r, "pattern"), NULL);
        char *rep = text_dec(rec_get(r, "replace"), NULL);
        char rules[4096], err[512];
        struct kr_principal_rules *rs = NULL;
        bool java_refuses = false;
        unsigned k;
        int rc;

        for (k = 0; k < r->n; k++) {
            if (strcmp(r->key[k], "java!") == 0 &&
                (strncmp(r->val[k], "pattern-error", 13) == 0 ||
                 strncmp(r->val[k], "replacement-error", 17) == 0)) {
                java_refuses = true;
            }
        }
        snprintf(rules, sizeof(rules), "RULE:%s/%s/%s", pat, rep,
                 cs != NULL ? cs : "");
        rc = kr_principal_mapping_rules_parse(rules, &rs, err, sizeof(err));
        if (krelay != NULL || java_refuses) {
            ck_assert_msg(rc == KR_ERROR, "mapping.txt:%u (%s): %s loads",
                          r->line, name, rules);
            if (krelay != NULL) {
                ck_assert_msg(strstr(err, "not supported") != NULL,
                              "mapping.txt:%u: %s", r->line, err);
            }
            refused++;
        } else {
            ck_assert_msg(rc == KR_OK, "mapping.txt:%u (%s): %s", r->line,
                          name, err);
            for (k = 0; k < r->n; k++) {
                char *in, *exp, *out = NULL;
                size_t inlen, elen, olen = 0;
                enum kr_principal_map_outcome o;

                if (strcmp(r->key[k], "input") != 0) {
                    continue;
                }
                ck_assert_uint_lt(k + 1, r->n);
                in = text_dec(r->val[k], &inlen);
                o = kr_principal_map(rs, in, inlen, &out, &olen);
                if (strcmp(r->key[k + 1], "java") == 0) {
                    exp = text_dec(r->val[k + 1], &elen);
                    ck_assert_msg(o == KR_PRINCIPAL_MAPPED,
                                  "mapping.txt:%u (%s) \"%s\": %s", r->line,
                                  name, in, kr_principal_map_outcome_str(o));
                    ck_assert_msg(olen == elen &&
                                  memcmp(out, exp, olen) == 0,
                                  "mapping.txt:%u (%s) \"%s\":\n  krelay "
                                  "%s\n  java   %s", r->line, name, in, out,
                                  exp);
                    free(exp);
                } else {
                    ck_assert_str_eq(r->key[k + 1], "java!");
                    ck_assert_str_eq(r->val[k + 1], "nomatch");
                    ck_assert_msg(o == KR_PRINCIPAL_NO_RULE,
                                  "mapping.txt:%u (%s) \"%s\": %s", r->line,
                                  name, in, kr_principal_map_outcome_str(o));
                    ck_assert_ptr_null(out);
                }
                free(out);
                free(in);
                names++;
            }
            kr_principal_mapping_rules_free(rs);
        }
        free(pat);
        free(rep);
    }
    ck_assert_uint_ge(names, 30);
    ck_assert_uint_ge(refused, 8);
    table_free(&t);
}
END_TEST

/* A rule list: first applying rule wins; DEFAULT; none -> NO_RULE. */
START_TEST(test_rule_list)
{
    static const char *list =
        "RULE:^CN=(.*?),OU=A(,.*)?$/$1/L, RULE:^CN=([^,]*),OU=B.*$/$1@b/U ,"
        "\n\tDEFAULT";
    struct kr_principal_rules *r;
    char err[256], *out;
    size_t len;

    assert_map(list, "CN=Ann,OU=A,O=x", "ann");
    assert_map(list, "CN=Ann,OU=A", "ann");
    assert_map(list, "CN=bo,OU=B,O=x", "BO@B");
    assert_map(list, "CN=c,OU=C", "CN=c,OU=C");
    /* a pattern with commas, and rules that do not end in DEFAULT */
    assert_map("RULE:^CN=([^,]*),.*$/$1/", "CN=a,O=b", "a");
    assert_map("RULE:^CN=([^,]*),.*$/$1/", "O=b",
               "no mapping rule applies");
    /* DEFAULT first: later rules never apply */
    assert_map("DEFAULT,RULE:^(.*)$/x/", "CN=a", "CN=a");
    /* empty entries and white space are nothing; no rule at all: Kafka
       refuses every client (NoMatchingRule) */
    assert_map(" , ,DEFAULT, ,", "CN=a", "CN=a");
    assert_map("", "CN=a", "no mapping rule applies");
    assert_map(" \t,\n, ", "CN=a", "no mapping rule applies");
    ck_assert_int_eq(kr_principal_mapping_rules_parse(list, &r, err,
                                                      sizeof(err)), KR_OK);
    ck_assert_str_eq(err, "");
    ck_assert_uint_eq(kr_principal_mapping_rules_count(r), 3);
    kr_principal_mapping_rules_free(r);
    ck_assert_int_eq(kr_principal_mapping_rules_parse(" ,, ", &r, err,
                                                      sizeof(err)), KR_OK);
    ck_assert_uint_eq(kr_principal_mapping_rules_count(r), 0);
    kr_principal_mapping_rules_free(r);
    ck_assert_uint_eq(kr_principal_mapping_rules_count(NULL), 0);
    kr_principal_mapping_rules_free(NULL);
    /* no rules configured: Kafka's default, DEFAULT; not NUL-terminated */
    out = NULL;
    ck_assert_int_eq(kr_principal_map(NULL, "CN=abcdef", 4, &out, &len),
                     KR_PRINCIPAL_MAPPED);
    ck_assert_str_eq(out, "CN=a");
    ck_assert_uint_eq(len, 4);
    free(out);
    /* bytes that are not UTF-8 are read as U+FFFD */
    assert_map("RULE:^CN=(.)(.)$/$2$1/", "CN=\xff" "b", "b\xef\xbf\xbd");
    /* lower case: I with dot above becomes i + U+0307, as in Java */
    assert_map("RULE:(.*)/$1/L", "\xc4\xb0X", "i\xcc\x87x");
    /* an empty result is a result */
    assert_map("RULE:^CN=.*$//", "CN=a", "");
}
END_TEST

/* Parse errors: one line, the rule and the column. */
START_TEST(test_rule_errors)
{
    assert_parse_err("DEFAULTX", "rule 1 (\"DEFAULT\"), column 8: \"X\" "
                     "after the rule (a rule ends with /, /L or /U, then ',' "
                     "or the end)");
    assert_parse_err("DEFAULT, FOO", "rule 2 (\"FOO\"), column 10: not "
                     "DEFAULT nor RULE:pattern/replacement/[LU]");
    assert_parse_err("RULE:abc", "rule 1 (\"RULE:abc\"), column 6: no '/' "
                     "after the pattern (a rule is "
                     "RULE:pattern/replacement/[LU])");
    assert_parse_err("RULE:a/b", "rule 1 (\"RULE:a/b\"), column 8: no '/' "
                     "after the replacement (a rule is "
                     "RULE:pattern/replacement/[LU])");
    assert_parse_err("RULE:a/b/LU", "rule 1 (\"RULE:a/b/L\"), column 11: "
                     "\"U\" after the rule (a rule ends with /, /L or /U, "
                     "then ',' or the end)");
    assert_parse_err("RULE:a/b/c/", "rule 1 (\"RULE:a/b/\"), column 10: "
                     "\"c/\" after the rule (a rule ends with /, /L or /U, "
                     "then ',' or the end)");
    /* the column is the pattern's character, counted in characters */
    assert_parse_err("DEFAULT,RULE:^CN=é[a&&b]/x/",
                     "rule 2 (\"RULE:^CN=é[a&&b]/x/\"), column 21: a class "
                     "intersection '&&' is not supported");
    assert_parse_err("RULE:^CN=(?x)a/x/", "rule 1 (\"RULE:^CN=(?x)a/x/\"), "
                     "column 12: the inline flag 'x' is not supported");
    assert_parse_err("RULE:a**/x/", "rule 1 (\"RULE:a**/x/\"), column 8: a "
                     "dangling '*' (Java refuses it)");
    assert_parse_err("RULE:(a/x/", "rule 1 (\"RULE:(a/x/\"), column 6: an "
                     "unclosed group '(' (Java refuses it)");
    assert_parse_err("RULE:a)/x/", "rule 1 (\"RULE:a)/x/\"), column 7: an "
                     "unmatched ')' (Java refuses it)");
    assert_parse_err("RULE:(a)/$x/", "rule 1 (\"RULE:(a)/$x/\"), column 10: "
                     "'$' not followed by a group number (Java refuses it: "
                     "Kafka fails every client this rule matches)");
    assert_parse_err("RULE:a/$1/", "rule 1 (\"RULE:a/$1/\"), column 9: a "
                     "reference to a group the pattern does not have (Java "
                     "refuses it: Kafka fails every client this rule "
                     "matches)");
    assert_parse_err("RULE:a\\\n/x/", "rule 1 (\"RULE:a\\?/x/\"), column 7: "
                     "a '\\' at the end of the rule or before a line break");
    assert_parse_err("RULE:a{70000}/x/", "rule 1 (\"RULE:a{70000}/x/\"), "
                     "column 7: a repetition count above 65535 is not "
                     "supported");
    /* what PCRE2 refuses in the translation: at the construct's column */
    assert_parse_err("RULE:x(?<=ab?)c/x/", "rule 1 (\"RULE:x(?<=ab?)c/x/\"), "
                     "column 7: this is not supported (PCRE2 cannot run its "
                     "translation: lookbehind assertion is not fixed length)");
    /* group names in the replacement */
    assert_parse_err("RULE:(?<cn>a)/${ou}/", "rule 1 (\"RULE:(?<cn>a)/${ou}/\"), "
                     "column 15: a reference ${...} to a group name the "
                     "pattern does not have (Java refuses it: Kafka fails "
                     "every client this rule matches)");
    assert_parse_err("RULE:(?<cn>a)/${cn/", "rule 1 (\"RULE:(?<cn>a)/${cn/\"), "
                     "column 15: a malformed group name reference ${...} "
                     "(Java refuses it: Kafka fails every client this rule "
                     "matches)");
    assert_parse_err("RULE:a/x/,RULE:\xff/y/", "byte 16: not UTF-8");
}
END_TEST

/*
 * A pattern that backtracks exponentially stops at PCRE2's match limit
 * (Java would go on), and the next rule is not tried.
 */
START_TEST(test_rule_costly)
{
    char name[64];

    memset(name, 'a', 40);
    name[40] = 'd';
    name[41] = '\0';
    assert_map("RULE:(?:a|aa)+[bc]/x/,DEFAULT", name,
               "a mapping rule took too long");
    /* the same rule on a name it matches at once */
    assert_map("RULE:(?:a|aa)+[bc]/x/,DEFAULT", "aab", "x");
}
END_TEST

/*
 * PCRE2's limit holds per start position, and replaceAll's find() may
 * try every position of the name: the budget is shared out over them,
 * so a rule that matches (lazily, at once) but whose replacement search
 * backtracks at each of 3,000 positions ends (mapped or too costly)
 * instead of costing 3,000 times the limit (minutes: the adversarial
 * pass measured 6.9 s for 80 positions with the whole limit each).
 */
START_TEST(test_rule_costly_positions)
{
    enum { N = 3000 };
    char *name = malloc(N + 4), *out = NULL;
    struct kr_principal_rules *r = NULL;
    char err[256];
    size_t len;
    enum kr_principal_map_outcome o;

    ck_assert_ptr_nonnull(name);
    memcpy(name, "CN=", 3);
    memset(name + 3, 'a', N);
    name[N + 3] = '\0';
    ck_assert_int_eq(kr_principal_mapping_rules_parse(
                         "RULE:CN=a*?|(?:a|a){0,18}(?:b|$)/x/", &r, err,
                         sizeof(err)), KR_OK);
    o = kr_principal_map(r, name, N + 3, &out, &len);
    ck_assert_msg(o == KR_PRINCIPAL_MAPPED || o == KR_PRINCIPAL_TOO_COSTLY,
                  "%s", kr_principal_map_outcome_str(o));
    free(out);
    kr_principal_mapping_rules_free(r);
    free(name);
}
END_TEST

/* ---- the translated patterns directly --------------------------------------- */

static struct kr_pre *
pre(const char *pat)
{
    struct kr_pre_char c[256];
    struct kr_pre *re = NULL;
    uint32_t col;
    char err[256];
    size_t i, n = strlen(pat);

    ck_assert_uint_lt(n, 256);
    for (i = 0; i < n; i++) {
        c[i].cp = (uint8_t)pat[i];
        c[i].col = (uint32_t)(i + 1);
    }
    ck_assert_msg(kr_pre_compile(c, n, &re, &col, err, sizeof(err)) == KR_OK,
                  "%s: %s", pat, err);
    return re;
}

/* find() from a position, groups that take no part, ^ only at 0. */
START_TEST(test_pre_find)
{
    struct kr_pre_subject sj;
    struct kr_pre *re = pre("(a)|(b)");
    size_t b, e;

    ck_assert(kr_pre_subject_init(&sj, "abab", 4));
    ck_assert_uint_eq(re->ngroups, 2);
    ck_assert_int_eq(kr_pre_find(re, &sj, 1), KR_PRE_MATCH);
    ck_assert(kr_pre_group(&sj, 0, &b, &e));
    ck_assert_uint_eq(b, 1);
    ck_assert_uint_eq(e, 2);
    ck_assert(!kr_pre_group(&sj, 1, &b, &e));
    ck_assert(kr_pre_group(&sj, 2, &b, &e));
    ck_assert_int_eq(kr_pre_matches(re, &sj), KR_PRE_NOMATCH);
    kr_pre_free(re);
    re = pre("^b");
    ck_assert_int_eq(kr_pre_find(re, &sj, 1), KR_PRE_NOMATCH);
    kr_pre_free(re);
    /* a lookbehind sees what is before the search's start, as Java's */
    re = pre("(?<=a)b");
    ck_assert_int_eq(kr_pre_find(re, &sj, 1), KR_PRE_MATCH);
    ck_assert(kr_pre_group(&sj, 0, &b, &e));
    ck_assert_uint_eq(b, 1);
    kr_pre_free(re);
    /* named groups are numbered groups */
    re = pre("(?<first>a)(b)(?<third>a)");
    ck_assert_uint_eq(kr_pre_group_named(re, "first", 5), 1);
    ck_assert_uint_eq(kr_pre_group_named(re, "third", 5), 3);
    ck_assert_uint_eq(kr_pre_group_named(re, "thir", 4), 0);
    kr_pre_free(re);
    kr_pre_subject_done(&sj);
    kr_pre_free(NULL);
}
END_TEST

static Suite *
principal_suite(void)
{
    Suite *s = suite_create("kr_principal");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_x500_table);
    tcase_add_test(tc, test_x500_openssl_api);
    tcase_add_test(tc, test_x500_refused);
    tcase_add_test(tc, test_x500_oid_limit);
    tcase_add_test(tc, test_mapping_table);
    tcase_add_test(tc, test_rule_list);
    tcase_add_test(tc, test_rule_errors);
    tcase_add_test(tc, test_rule_costly);
    tcase_add_test(tc, test_rule_costly_positions);
    tcase_add_test(tc, test_pre_find);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(principal_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
