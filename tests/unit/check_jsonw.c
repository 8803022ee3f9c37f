/*
 * check_jsonw.c - the direct JSON writer (kr_jsonw): escaping of every
 * byte, the invalid-UTF-8 rule, integers, commas in nested containers,
 * errors; and, on random inputs, the same text as jansson's json_dumps
 * and a round trip through jansson's parser.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kr_codec.h"
#include "kr_jsonw.h"
#include "kr_test.h"

/* jansson's compact text of v (freed by the caller). */
static char *
jdump(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    ck_assert_ptr_nonnull(s);
    return s;
}

/* The writer's text of one string value p[0..len), written with room
   reserved (as kr_audit.c writes: the short-string path) and without
   (the first byte allocates): the same text. */
static char *
wstr(const char *p, size_t len)
{
    struct kr_jsonw w;
    char *s, *cold;

    kr_jsonw_init(&w);
    kr_jsonw_str(&w, p, len);
    ck_assert(kr_jsonw_ok(&w));
    cold = kr_jsonw_take(&w, NULL);
    ck_assert_ptr_nonnull(cold);
    kr_jsonw_init(&w);
    ck_assert(kr_jsonw_reserve(&w, 1024));
    kr_jsonw_str(&w, p, len);
    ck_assert(kr_jsonw_ok(&w));
    ck_assert_str_eq(w.buf, cold);
    free(cold);
    ck_assert(kr_jsonw_ok(&w));
    s = kr_jsonw_take(&w, NULL);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* What kr_audit.c's jstr() makes of p[0..len): '?' for bytes >= 0x80
   when the string is not valid UTF-8. */
static json_t *
jstr_rule(const char *p, size_t len)
{
    char *tmp = malloc(len + 1);
    json_t *j;
    size_t i;

    ck_assert_ptr_nonnull(tmp);
    if (kr_utf8_valid((const uint8_t *)p, len)) {
        memcpy(tmp, p, len);
    } else {
        for (i = 0; i < len; i++) {
            tmp[i] = (unsigned char)p[i] >= 0x80 ? '?' : p[i];
        }
    }
    j = json_stringn(tmp, len);
    free(tmp);
    ck_assert_ptr_nonnull(j);
    return j;
}

START_TEST(test_every_byte)
{
    unsigned c;

    for (c = 0; c < 256; c++) {
        char in[3] = { 'a', (char)c, 'z' }, want[16];
        char *got = wstr(in, sizeof(in));

        if (c == '"' || c == '\\') {
            snprintf(want, sizeof(want), "\"a\\%cz\"", c);
        } else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
                   c == '\t') {
            snprintf(want, sizeof(want), "\"a\\%cz\"",
                     c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\n' ? 'n'
                     : c == '\r' ? 'r' : 't');
        } else if (c < 0x20) {
            snprintf(want, sizeof(want), "\"a\\u%04Xz\"", c);
        } else if (c >= 0x80) {
            snprintf(want, sizeof(want), "\"a?z\"");   /* lone byte */
        } else {
            snprintf(want, sizeof(want), "\"a%cz\"", c);
        }
        KR_TEST_CHECK(strcmp(got, want) == 0, "byte 0x%02x: %s, want %s",
                      c, got, want);
        /* and jansson agrees (on what it can hold) */
        if (c < 0x80) {
            json_t *j = json_stringn(in, sizeof(in));
            char *d = jdump(j);

            KR_TEST_CHECK(strcmp(got, d) == 0, "byte 0x%02x: %s, jansson %s",
                          c, got, d);
            free(d);
            json_decref(j);
        }
        free(got);
    }
}
END_TEST

/*
 * One special byte (a quote, a backslash, a control byte, a byte >= 0x80)
 * at every position of plain strings of every length up to 40: the
 * writer checks eight bytes at a time and the last eight overlapping, so
 * a special byte in any block, with plain ones after it, must still be
 * escaped.  The text parses back to the string (jansson).
 */
START_TEST(test_special_every_position)
{
    static const unsigned char specials[] = { '"', '\\', 0x01, 0x1f, 0x80,
                                              0xff };
    char in[40], *got;
    size_t len, at, k;

    for (k = 0; k < sizeof(specials); k++) {
        for (len = 1; len <= sizeof(in); len++) {
            for (at = 0; at < len; at++) {
                json_t *want, *doc;
                json_error_t err;

                memset(in, 'a', len);
                in[at] = (char)specials[k];
                got = wstr(in, len);
                doc = json_loads(got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
                want = jstr_rule(in, len);
                KR_TEST_CHECK(doc != NULL && json_equal(doc, want),
                              "byte 0x%02x at %zu of %zu: %s", specials[k],
                              at, len, got);
                json_decref(doc);
                json_decref(want);
                free(got);
            }
        }
    }
}
END_TEST

/*
 * The one-step members (kr_jsonw_kint, kr_jsonw_kstr, kr_jsonw_kcstr)
 * write what kr_jsonw_key and the value call write, for keys and values
 * that need escaping or not, first member or not, with room reserved or
 * not (the general path).
 */
START_TEST(test_member_calls)
{
    static const char *const keys[] = { "k", "time", "a\"b", "tab\t",
                                        "\xc3\xa9t\xc3\xa9", "\xff" };
    static const char *const vals[] = { "", "v", "10.0.0.7", "q\"uote",
                                        "\x01", "caf\xc3\xa9", "\xc3" };
    static const int64_t ints[] = { 0, -1, 42, INT64_MIN, INT64_MAX };
    size_t k, v, room;

    for (room = 0; room < 2; room++) {
        for (k = 0; k < KR_ARRAY_LEN(keys); k++) {
            for (v = 0; v < KR_ARRAY_LEN(vals); v++) {
                struct kr_jsonw a, b;

                kr_jsonw_init(&a);
                kr_jsonw_init(&b);
                if (room) {
                    ck_assert(kr_jsonw_reserve(&a, 512));
                    ck_assert(kr_jsonw_reserve(&b, 512));
                }
                kr_jsonw_obj_open(&a);
                kr_jsonw_obj_open(&b);
                /* twice: first member, then with its comma */
                kr_jsonw_kstr(&a, keys[k], vals[v], strlen(vals[v]));
                kr_jsonw_kcstr(&a, keys[k], vals[v]);
                kr_jsonw_kint(&a, keys[k], ints[v % KR_ARRAY_LEN(ints)]);
                kr_jsonw_kcstr(&a, keys[k], NULL);
                kr_jsonw_key(&b, keys[k]);
                kr_jsonw_str(&b, vals[v], strlen(vals[v]));
                kr_jsonw_key(&b, keys[k]);
                kr_jsonw_cstr(&b, vals[v]);
                kr_jsonw_key(&b, keys[k]);
                kr_jsonw_int(&b, ints[v % KR_ARRAY_LEN(ints)]);
                kr_jsonw_key(&b, keys[k]);
                kr_jsonw_null(&b);
                kr_jsonw_obj_close(&a);
                kr_jsonw_obj_close(&b);
                ck_assert(kr_jsonw_ok(&a) && kr_jsonw_ok(&b));
                KR_TEST_CHECK(strcmp(a.buf, b.buf) == 0,
                              "key %zu value %zu room %zu: %s vs %s", k, v,
                              room, a.buf, b.buf);
                kr_jsonw_free(&a);
                kr_jsonw_free(&b);
            }
        }
    }
}
END_TEST

START_TEST(test_utf8_rule)
{
    /* valid: as is */
    static const char ok[] = "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80";
    /* invalid anywhere: every byte >= 0x80 of the string becomes '?' */
    static const char bad[] = "\xc3\xbc ok \xff \xe2\x82";
    static const char surrogate[] = "\xed\xa0\x80";
    static const char overlong[] = "\xc0\xaf";
    char *s;

    s = wstr(ok, strlen(ok));
    ck_assert_str_eq(s, "\"gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80\"");
    free(s);
    s = wstr(bad, strlen(bad));
    ck_assert_str_eq(s, "\"?? ok ? ??\"");
    free(s);
    s = wstr(surrogate, strlen(surrogate));
    ck_assert_str_eq(s, "\"???\"");
    free(s);
    s = wstr(overlong, strlen(overlong));
    ck_assert_str_eq(s, "\"??\"");
    free(s);
    /* NUL inside, empty, NULL with length 0 */
    s = wstr("a\0b", 3);
    ck_assert_str_eq(s, "\"a\\u0000b\"");
    free(s);
    s = wstr("", 0);
    ck_assert_str_eq(s, "\"\"");
    free(s);
    s = wstr(NULL, 0);
    ck_assert_str_eq(s, "\"\"");
    free(s);
}
END_TEST

START_TEST(test_long_strings)
{
    /* longer than a chunk (4096 bytes), escapes across its edges, and a
       bad byte in a later chunk turns every high byte into '?' */
    size_t n = 3 * 4096 + 17, i;
    char *in = malloc(n);
    json_t *j;
    char *got, *want;

    ck_assert_ptr_nonnull(in);
    for (i = 0; i < n; i++) {
        in[i] = i % 7 == 0 ? '\n' : i % 11 == 0 ? '"' : (char)('a' + i % 26);
    }
    got = wstr(in, n);
    j = json_stringn(in, n);
    want = jdump(j);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    json_decref(j);
    memcpy(in + 10, "\xc3\xbc", 2);
    in[n - 5] = (char)0xfe;
    got = wstr(in, n);
    j = jstr_rule(in, n);
    want = jdump(j);
    ck_assert_str_eq(got, want);
    ck_assert_ptr_null(strchr(got, (char)0xc3));   /* valid pair too */
    ck_assert_ptr_nonnull(strstr(got, "??"));
    free(got);
    free(want);
    json_decref(j);
    free(in);
}
END_TEST

START_TEST(test_numbers_and_literals)
{
    struct kr_jsonw w;
    char *s;
    size_t len;

    kr_jsonw_init(&w);
    kr_jsonw_arr_open(&w);
    kr_jsonw_int(&w, 0);
    kr_jsonw_int(&w, -1);
    kr_jsonw_int(&w, INT64_MIN);
    kr_jsonw_int(&w, INT64_MAX);
    kr_jsonw_uint(&w, UINT64_MAX);
    kr_jsonw_uint(&w, 10);
    kr_jsonw_bool(&w, true);
    kr_jsonw_bool(&w, false);
    kr_jsonw_null(&w);
    kr_jsonw_cstr(&w, NULL);
    kr_jsonw_raw(&w, "{\"x\":1}", 7);
    kr_jsonw_arr_close(&w);
    ck_assert(kr_jsonw_ok(&w));
    ck_assert_uint_eq(kr_jsonw_depth(&w), 0);
    s = kr_jsonw_take(&w, &len);
    ck_assert_str_eq(s, "[0,-1,-9223372036854775808,9223372036854775807,"
                        "18446744073709551615,10,true,false,null,null,"
                        "{\"x\":1}]");
    ck_assert_uint_eq(len, strlen(s));
    free(s);
    ck_assert_ptr_null(w.buf);          /* taken: w is empty */
    kr_jsonw_free(&w);
}
END_TEST

START_TEST(test_nesting_commas)
{
    struct kr_jsonw w;

    kr_jsonw_init(&w);
    kr_jsonw_obj_open(&w);
    kr_jsonw_kcstr(&w, "a", "x");
    kr_jsonw_key(&w, "b");
    kr_jsonw_arr_open(&w);
    kr_jsonw_arr_close(&w);
    kr_jsonw_key(&w, "c");
    kr_jsonw_obj_open(&w);
    kr_jsonw_obj_close(&w);
    kr_jsonw_key(&w, "d");
    kr_jsonw_arr_open(&w);
    kr_jsonw_obj_open(&w);
    kr_jsonw_kint(&w, "n", 1);
    kr_jsonw_kbool(&w, "t", true);
    kr_jsonw_obj_close(&w);
    kr_jsonw_obj_open(&w);
    kr_jsonw_obj_close(&w);
    kr_jsonw_arr_open(&w);
    kr_jsonw_int(&w, 2);
    kr_jsonw_arr_close(&w);
    kr_jsonw_arr_close(&w);
    kr_jsonw_kstr(&w, "k\"\n", "v\0w", 3);
    kr_jsonw_obj_close(&w);
    ck_assert(kr_jsonw_ok(&w));
    ck_assert_str_eq(w.buf, "{\"a\":\"x\",\"b\":[],\"c\":{},\"d\":[{\"n\":1,"
                            "\"t\":true},{},[2]],\"k\\\"\\n\":\"v\\u0000w\"}");
    /* reset keeps the buffer, clears the state */
    kr_jsonw_reset(&w);
    ck_assert_ptr_nonnull(w.buf);
    ck_assert_uint_eq(w.len, 0);
    ck_assert_str_eq(w.buf, "");
    kr_jsonw_int(&w, 5);
    ck_assert_str_eq(w.buf, "5");
    kr_jsonw_free(&w);
}
END_TEST

START_TEST(test_errors)
{
    struct kr_jsonw w;
    unsigned i;

    /* close without open, the wrong close, a key in an array, a key
       twice, a close after a key: each sticks, and the text is refused */
    kr_jsonw_init(&w);
    kr_jsonw_obj_close(&w);
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_int(&w, 1);                /* nothing more is written */
    ck_assert_uint_eq(w.len, 0);
    ck_assert_ptr_null(kr_jsonw_take(&w, NULL));
    ck_assert(kr_jsonw_ok(&w));         /* take reset it */

    kr_jsonw_arr_open(&w);
    kr_jsonw_obj_close(&w);
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);

    kr_jsonw_arr_open(&w);
    kr_jsonw_key(&w, "k");
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);

    kr_jsonw_obj_open(&w);
    kr_jsonw_key(&w, "k");
    kr_jsonw_key(&w, "l");
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);

    kr_jsonw_obj_open(&w);
    kr_jsonw_key(&w, "k");
    kr_jsonw_obj_close(&w);
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);

    kr_jsonw_key(&w, "top");            /* no object open */
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);

    kr_jsonw_str(&w, NULL, 3);          /* no bytes for a length */
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);

    /* KR_JSONW_DEPTH containers, not one more */
    for (i = 0; i < KR_JSONW_DEPTH; i++) {
        kr_jsonw_arr_open(&w);
    }
    ck_assert(kr_jsonw_ok(&w));
    ck_assert_uint_eq(kr_jsonw_depth(&w), KR_JSONW_DEPTH);
    kr_jsonw_arr_open(&w);
    ck_assert(!kr_jsonw_ok(&w));
    kr_jsonw_reset(&w);
    for (i = 0; i < KR_JSONW_DEPTH; i++) {
        kr_jsonw_arr_open(&w);
    }
    for (i = 0; i < KR_JSONW_DEPTH; i++) {
        kr_jsonw_arr_close(&w);
    }
    ck_assert(kr_jsonw_ok(&w));
    ck_assert_uint_eq(w.len, 2 * KR_JSONW_DEPTH);
    kr_jsonw_free(&w);
}
END_TEST

/* ---- random documents --------------------------------------------------- */

static uint64_t rng_state;

static uint64_t
rnd(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random bytes: ASCII with controls, quotes and backslashes, valid
   multi-byte UTF-8, and (when raw) any byte at all. */
static size_t
rnd_bytes(char *out, size_t max, bool raw)
{
    size_t n = rnd() % (max + 1), i = 0;

    while (i < n) {
        unsigned k = (unsigned)(rnd() % 10);

        if (raw && k == 0) {
            out[i++] = (char)(rnd() & 0xff);
        } else if (k == 1 && i + 2 <= n) {
            out[i++] = (char)(0xc2 + rnd() % 30);
            out[i++] = (char)(0x80 + rnd() % 64);
        } else if (k == 2 && i + 3 <= n) {
            memcpy(out + i, "\xe2\x82\xac", 3);
            i += 3;
        } else if (k == 3 && i + 4 <= n) {
            memcpy(out + i, "\xf0\x9f\x98\x80", 4);
            i += 4;
        } else if (k == 4) {
            out[i++] = (char)(rnd() % 0x20);
        } else if (k == 5) {
            out[i++] = "\"\\/\x7f"[rnd() % 4];
        } else {
            out[i++] = (char)(0x20 + rnd() % 0x5f);
        }
    }
    return n;
}

/* A random jansson tree of at most depth levels. */
static json_t *
rnd_tree(unsigned depth)
{
    char buf[64];
    unsigned k = (unsigned)(rnd() % (depth > 0 ? 9 : 6)), i, n;
    json_t *v = NULL;

    switch (k) {
    case 0:
        v = json_integer((json_int_t)rnd());
        break;
    case 1:
        v = json_integer((json_int_t)(rnd() % 2000) - 1000);
        break;
    case 2: {
        size_t len = rnd_bytes(buf, sizeof(buf), false);

        v = json_stringn(buf, len);
        break;
    }
    case 3:
        v = rnd() % 2 ? json_true() : json_false();
        break;
    case 4:
        v = rnd() % 3 ? json_null()
                      : json_real((double)(int64_t)rnd() / 1e6);
        break;
    case 5:
        v = json_string("");
        break;
    case 6:
    case 7:
        v = json_object();
        n = (unsigned)(rnd() % 6);
        for (i = 0; i < n; i++) {
            size_t len = rnd_bytes(buf, 12, false);

            buf[len] = '\0';
            /* keys without NUL (jansson before 2.14 cuts them) */
            for (size_t j = 0; j < len; j++) {
                if (buf[j] == '\0') {
                    buf[j] = 'n';
                }
            }
            json_object_set_new(v, buf, rnd_tree(depth - 1));
        }
        break;
    default:
        v = json_array();
        n = (unsigned)(rnd() % 6);
        for (i = 0; i < n; i++) {
            json_array_append_new(v, rnd_tree(depth - 1));
        }
        break;
    }
    ck_assert_ptr_nonnull(v);
    return v;
}

/* The same tree through the writer's own calls (not kr_jsonw_json). */
static void
write_tree(struct kr_jsonw *w, json_t *v)
{
    const char *key;
    json_t *m;
    size_t i;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        kr_jsonw_obj_open(w);
        json_object_foreach(v, key, m) {
            kr_jsonw_key(w, key);
            write_tree(w, m);
        }
        kr_jsonw_obj_close(w);
        break;
    case JSON_ARRAY:
        kr_jsonw_arr_open(w);
        json_array_foreach(v, i, m) {
            write_tree(w, m);
        }
        kr_jsonw_arr_close(w);
        break;
    case JSON_STRING:
        kr_jsonw_str(w, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        kr_jsonw_int(w, (int64_t)json_integer_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        kr_jsonw_bool(w, json_is_true(v));
        break;
    default:                            /* null, real */
        kr_jsonw_json(w, v);
        break;
    }
}

START_TEST(test_random_trees_as_jansson)
{
    struct kr_jsonw w;
    unsigned i;

    rng_state = 14;
    kr_jsonw_init(&w);
    for (i = 0; i < 3000; i++) {
        json_t *t = rnd_tree(5), *back;
        char *want = jdump(t);

        kr_jsonw_reset(&w);
        kr_jsonw_json(&w, t);
        KR_TEST_CHECK(kr_jsonw_ok(&w) && kr_jsonw_depth(&w) == 0,
                      "tree %u", i);
        KR_TEST_CHECK(strcmp(w.buf, want) == 0, "tree %u:\n%s\nwant\n%s", i,
                      w.buf, want);
        KR_TEST_CHECK(w.len == strlen(want), "tree %u: len", i);
        kr_jsonw_reset(&w);
        write_tree(&w, t);
        KR_TEST_CHECK(kr_jsonw_ok(&w) && strcmp(w.buf, want) == 0,
                      "tree %u by calls:\n%s\nwant\n%s", i, w.buf, want);
        back = json_loads(w.buf, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        KR_TEST_CHECK(back != NULL && json_equal(back, t),
                      "tree %u does not parse back", i);
        json_decref(back);
        json_decref(t);
        free(want);
    }
    kr_jsonw_free(&w);
}
END_TEST

START_TEST(test_random_raw_strings_parse)
{
    struct kr_jsonw w;
    char buf[300], key[300];
    unsigned i;
    size_t k;

    rng_state = 1414;
    kr_jsonw_init(&w);
    for (i = 0; i < 20000; i++) {
        size_t len = rnd_bytes(buf, sizeof(buf), true);
        json_t *want = jstr_rule(buf, len), *back, *doc;
        json_error_t err;

        /* as a key (its NULs made 'n': jansson before 2.14 refuses them
           in keys) and as a member value, in an object ("v" last: it
           wins when the key is "v" too) */
        memcpy(key, buf, len);
        for (k = 0; k < len; k++) {
            key[k] = key[k] == '\0' ? 'n' : key[k];
        }
        kr_jsonw_reset(&w);
        kr_jsonw_obj_open(&w);
        kr_jsonw_keyn(&w, key, len);
        kr_jsonw_int(&w, (int64_t)i);
        kr_jsonw_kstr(&w, "v", buf, len);
        kr_jsonw_obj_close(&w);
        KR_TEST_CHECK(kr_jsonw_ok(&w), "string %u", i);
        doc = json_loads(w.buf, JSON_ALLOW_NUL, &err);
        KR_TEST_CHECK(doc != NULL, "string %u: %s: %s", i, err.text, w.buf);
        back = json_object_get(doc, "v");
        KR_TEST_CHECK(back != NULL && json_equal(back, want),
                      "string %u: %s", i, w.buf);
        json_decref(doc);
        json_decref(want);
    }
    kr_jsonw_free(&w);
}
END_TEST

static Suite *
jsonw_suite(void)
{
    Suite *s = suite_create("kr_jsonw");
    TCase *tc = tcase_create("writer");
    TCase *tr = tcase_create("random");

    tcase_add_test(tc, test_every_byte);
    tcase_add_test(tc, test_special_every_position);
    tcase_add_test(tc, test_member_calls);
    tcase_add_test(tc, test_utf8_rule);
    tcase_add_test(tc, test_long_strings);
    tcase_add_test(tc, test_numbers_and_literals);
    tcase_add_test(tc, test_nesting_commas);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    tcase_set_timeout(tr, 120);
    tcase_add_test(tr, test_random_trees_as_jansson);
    tcase_add_test(tr, test_random_raw_strings_parse);
    suite_add_tcase(s, tr);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(jsonw_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
