/*
 * kr_test.h - helpers the Check unit tests share: reach and set fields of
 * decoded trees by name, and build a decoded message from krelay-codec's
 * JSON form.  Tests only; everything is static and may go unused.
 */
#ifndef KR_TEST_H
#define KR_TEST_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kr_codec.h"
#include "kr_common.h"
#include "kr_json.h"

/*
 * ck_assert_msg for inner loops that run millions of times.  Every passing
 * ck_assert records its line in Check's message file (a write(2), read
 * back after the test), which under valgrind took most of check_codec's
 * time; this one reports only a failure.  On a crash, Check names the
 * last ck_assert before the loop instead of the line in it.
 */
#define KR_TEST_CHECK(expr, ...) \
    do { \
        if (!(expr)) { \
            ck_abort_msg("'" #expr "' failed: " __VA_ARGS__); \
        } \
    } while (0)

/* Field name of n (the test fails when the struct has no such field). */
static KR_UNUSED struct kr_val *
kr_test_fld(const struct kr_node *n, const char *name)
{
    struct kr_val *v = kr_node_get(n, name);

    ck_assert_msg(v != NULL, "no field %s in %s", name,
                  kr_structs[n->struct_id].name);
    return v;
}

static KR_UNUSED void
kr_test_set_i(struct kr_node *n, const char *name, int64_t x)
{
    struct kr_val *v = kr_test_fld(n, name);

    v->u.i = x;
    v->present = 1;
}

/* s is borrowed: it must outlive the tree. */
static KR_UNUSED void
kr_test_set_s(struct kr_node *n, const char *name, const char *s)
{
    struct kr_val *v = kr_test_fld(n, name);

    v->u.s.p = (const uint8_t *)s;
    v->u.s.len = (int32_t)strlen(s);
    v->is_null = 0;
    v->present = 1;
}

/* A fresh array of cnt elements (tagged fields too), arena-owned. */
static KR_UNUSED struct kr_array *
kr_test_set_arr(struct kr_arena *arena, struct kr_node *n, const char *name,
                uint32_t cnt)
{
    int idx = kr_struct_field_index(n->struct_id, name);
    const struct kr_field_desc *f;
    struct kr_array *a;

    ck_assert_int_ge(idx, 0);
    f = kr_node_field(n, (unsigned)idx);
    a = kr_array_new(arena, (enum kr_type)f->elem_type, f->struct_id, cnt,
                     n->version);
    ck_assert_ptr_nonnull(a);
    n->vals[idx].u.arr = a;
    n->vals[idx].is_null = 0;
    n->vals[idx].present = 1;
    return a;
}

static KR_UNUSED struct kr_node *
kr_test_elem(const struct kr_array *a, uint32_t i)
{
    return a->items[i].u.node;
}

/* The value at path ("Topics[0].Partitions[1].Partition") below n, or
   NULL when a component does not exist. */
static KR_UNUSED struct kr_val *
kr_test_val_at(const struct kr_node *n, const char *path)
{
    char buf[256], *comp, *save = NULL;
    struct kr_val *val = NULL;

    snprintf(buf, sizeof(buf), "%s", path);
    for (comp = strtok_r(buf, ".", &save); comp != NULL;
         comp = strtok_r(NULL, ".", &save)) {
        char *br = strchr(comp, '[');

        if (n == NULL) {
            return NULL;
        }
        if (br != NULL) {
            *br = '\0';
        }
        val = kr_node_get(n, comp);
        if (val == NULL) {
            return NULL;
        }
        while (br != NULL) {
            unsigned long i = strtoul(br + 1, &br, 10);

            if (val->u.arr == NULL || i >= val->u.arr->n) {
                return NULL;
            }
            val = &val->u.arr->items[i];
            br = strchr(br, '[');
        }
        n = val->u.node;
    }
    return val;
}

/*
 * JSON text (krelay-codec's form) -> tree -> bytes -> strictly decoded
 * tree in *m, arena-owned and borrowing from the returned frame payload
 * (malloc'd: the caller frees it after the last use of *m), of *len bytes
 * (len may be NULL).
 */
static KR_UNUSED uint8_t *
kr_test_build_len(struct kr_arena *arena, const char *text,
                  struct kr_msg *m, size_t *len)
{
    struct kr_arena tmp;
    struct kr_json_recbuf recs;
    struct kr_codec_err err;
    struct kr_wbuf w;
    struct kr_msg built;
    json_error_t jerr;
    struct iovec iov;
    struct kr_rbuf rb;
    json_t *j;
    uint8_t *out;
    int rc;

    j = json_loads(text, 0, &jerr);
    ck_assert_msg(j != NULL, "bad test JSON: %s", jerr.text);
    kr_arena_init(&tmp, 0);
    memset(&recs, 0, sizeof(recs));
    memset(&w, 0, sizeof(w));
    memset(&err, 0, sizeof(err));
    rc = kr_json_to_msg(&tmp, j, &recs, &built, &err);
    ck_assert_msg(rc == KR_OK, "to msg: %d %s at %s", rc, err.msg, err.path);
    rc = kr_encode_msg(&built, &w, &err);
    ck_assert_msg(rc == KR_OK, "encode: %d %s at %s", rc, err.msg, err.path);
    out = kr_wbuf_flatten(&w, recs.p, recs.len);
    ck_assert_ptr_nonnull(out);
    kr_rbuf_init_flat(&rb, &iov, out, w.total);
    if (built.dir == KR_DIR_REQUEST) {
        rc = kr_decode_request(arena, &rb, KR_DEC_STRICT, m, &err);
    } else {
        rc = kr_decode_response(arena, &rb, built.api_key,
                                built.api_version, KR_DEC_STRICT, m, &err);
    }
    ck_assert_msg(rc == KR_OK, "decode: %d %s at %s", rc, err.msg, err.path);
    if (len != NULL) {
        *len = w.total;
    }
    kr_wbuf_free(&w);
    kr_json_recbuf_free(&recs);
    kr_arena_free(&tmp);
    json_decref(j);
    return out;
}

/* kr_test_build_len without the length. */
static KR_UNUSED uint8_t *
kr_test_build(struct kr_arena *arena, const char *text, struct kr_msg *m)
{
    return kr_test_build_len(arena, text, m, NULL);
}

/* Whole content of file path (malloc'd, NUL-terminated); *len its bytes. */
static KR_UNUSED char *
kr_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len != NULL) {
        *len = (size_t)n;
    }
    return buf;
}

#endif /* KR_TEST_H */
