/*
 * tree_fill.h - test helper (check_topics, check_audit): a body of any
 * API and version with every field present at that version populated, so
 * a walk visits every struct of the schema.
 *
 * Arrays get two elements, nullable structs a node, strings the text
 * given (or "S3CRET-VALUE" for fields named AuthBytes, Hmac, Salt,
 * SaltedPassword, RequestData, ResponseData), int8 fields 2 (TOPIC in
 * ResourceType), other integers 1, uuids a fixed non-zero id.  Everything
 * lives in the arena.
 */
#ifndef TREE_FILL_H
#define TREE_FILL_H

#include <string.h>

#include "kr_codec.h"

#define TREE_FILL_SECRET "S3CRET-VALUE"

static const uint8_t tree_fill_id[16] = {
    0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
};

static bool
tree_fill_secret_name(const char *name)
{
    static const char *const names[] = {
        "AuthBytes", "Hmac", "Salt", "SaltedPassword", "RequestData",
        "ResponseData"
    };
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

static void
tree_fill_scalar(struct kr_val *v, enum kr_type t, const char *name,
                 const char *text)
{
    const char *s = tree_fill_secret_name(name) ? TREE_FILL_SECRET : text;

    v->is_null = 0;
    switch (t) {
    case KR_T_INT8:
        v->u.i = 2;
        break;
    case KR_T_BOOL:
    case KR_T_INT16:
    case KR_T_UINT16:
    case KR_T_INT32:
    case KR_T_UINT32:
    case KR_T_INT64:
        v->u.i = 1;
        break;
    case KR_T_FLOAT64:
        v->u.f = 1.5;
        break;
    case KR_T_STRING:
    case KR_T_BYTES:
        v->u.s.p = (const uint8_t *)s;
        v->u.s.len = (int32_t)strlen(s);
        break;
    case KR_T_UUID:
        v->u.s.p = tree_fill_id;
        v->u.s.len = 16;
        break;
    case KR_T_RECORDS:
        v->u.rec.off = 0;
        v->u.rec.len = 0;
        break;
    default:
        break;
    }
}

static bool
tree_fill(struct kr_arena *a, struct kr_node *n, const char *text,
          unsigned depth)
{
    unsigned i, nf = kr_structs[n->struct_id].nfields;

    if (depth > 16) {
        return true;
    }
    for (i = 0; i < nf; i++) {
        const struct kr_field_desc *f = kr_node_field(n, i);
        struct kr_val *v = &n->vals[i];

        if (!kr_vrange_has(f->versions, n->version)) {
            continue;
        }
        v->present = 1;
        if (f->type == KR_T_STRUCT) {
            if (v->u.node == NULL) {
                v->u.node = kr_node_new(a, f->struct_id, n->version);
                if (v->u.node == NULL) {
                    return false;
                }
            }
            v->is_null = 0;
            if (!tree_fill(a, v->u.node, text, depth + 1)) {
                return false;
            }
        } else if (f->type == KR_T_ARRAY) {
            struct kr_array *arr = kr_array_new(a, (enum kr_type)f->elem_type,
                                                f->struct_id, 2, n->version);
            uint32_t k;

            if (arr == NULL) {
                return false;
            }
            v->u.arr = arr;
            v->is_null = 0;
            for (k = 0; k < arr->n; k++) {
                if (f->elem_type == KR_T_STRUCT) {
                    if (!tree_fill(a, arr->items[k].u.node, text,
                                   depth + 1)) {
                        return false;
                    }
                } else {
                    tree_fill_scalar(&arr->items[k],
                                     (enum kr_type)f->elem_type, f->name,
                                     text);
                }
            }
        } else {
            tree_fill_scalar(v, (enum kr_type)f->type, f->name, text);
        }
    }
    return true;
}

#endif /* TREE_FILL_H */
