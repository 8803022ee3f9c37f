/*
 * kr_schema.c - lookups over the generated schema tables.
 *
 * The tables themselves are in kr_schema_gen.c (tools/krgen.py).  Nothing
 * here allocates or keeps state.
 */
#include "config.h"

#include <string.h>

#include "kr_schema.h"

/* ApiKeys with header-version exceptions (Kafka's generator). */
#define KR_KEY_CONTROLLED_SHUTDOWN 7
#define KR_KEY_API_VERSIONS 18
/* JoinGroup: Kafka 4.0.0 accepted fewer versions than 4.3.1 */
#define KR_KEY_JOIN_GROUP 11
#define KR_JOIN_GROUP_MIN_4_0_0 2

const struct kr_api_desc *
kr_api_get(int16_t k)
{
    const struct kr_api_desc *a;

    if (k < 0 || k > kr_api_max) {
        return NULL;
    }
    a = &kr_apis[k];
    return a->name != NULL ? a : NULL;
}

const struct kr_api_desc *
kr_api_by_name(const char *name)
{
    int k;

    if (name == NULL) {
        return NULL;
    }
    for (k = 0; k <= (int)kr_api_max; k++) {
        if (kr_apis[k].name != NULL && strcmp(kr_apis[k].name, name) == 0) {
            return &kr_apis[k];
        }
    }
    return NULL;
}

int16_t
kr_api_min_kafka4(const struct kr_api_desc *a, const char **release)
{
    if (release != NULL) {
        *release = "4.3.1";
    }
    if (a == NULL || a->name == NULL || a->valid_4x.lo > a->valid_4x.hi) {
        return -1;
    }
    /*
     * The tables hold 4.3.1; the only version a 4.x release refused that
     * 4.3.1 accepts again is JoinGroup v0-1, dropped on the 4.0 branch
     * (4.0.0) and restored in 4.0.1 (schemas README).
     */
    if (a->key == KR_KEY_JOIN_GROUP &&
        a->valid_4x.lo < KR_JOIN_GROUP_MIN_4_0_0) {
        if (release != NULL) {
            *release = "4.0.0";
        }
        return KR_JOIN_GROUP_MIN_4_0_0;
    }
    return a->valid_4x.lo;
}

uint16_t
kr_api_root(const struct kr_api_desc *a, bool response, int16_t v)
{
    if (a == NULL || a->name == NULL || !kr_vrange_has(a->valid, v)) {
        return KR_NO_STRUCT;
    }
    return response ? a->rsp_root[v] : a->req_root[v];
}

int
kr_request_header_version(int16_t k, int16_t v)
{
    const struct kr_api_desc *a = kr_api_get(k);

    if (a == NULL || !kr_vrange_has(a->valid, v)) {
        return -1;
    }
    if (k == KR_KEY_CONTROLLED_SHUTDOWN && v == 0) {
        return 0;
    }
    return kr_api_flexible(a, v) ? 2 : 1;
}

int
kr_response_header_version(int16_t k, int16_t v)
{
    const struct kr_api_desc *a = kr_api_get(k);

    if (a == NULL || !kr_vrange_has(a->valid, v)) {
        return -1;
    }
    if (k == KR_KEY_API_VERSIONS) {
        return 0;
    }
    return kr_api_flexible(a, v) ? 1 : 0;
}

int
kr_struct_field_index(uint16_t sid, const char *name)
{
    const struct kr_struct_desc *s;
    uint16_t i;

    if (sid >= kr_nstructs || name == NULL) {
        return -1;
    }
    s = &kr_structs[sid];
    for (i = 0; i < s->nfields; i++) {
        if (strcmp(kr_fields[s->first_field + i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

int
kr_struct_field_index_id(uint16_t sid, enum kr_field_id id)
{
    const struct kr_struct_desc *s;
    uint16_t i;

    if (sid >= kr_nstructs || id == KR_FIELD_NONE) {
        return -1;
    }
    s = &kr_structs[sid];
    for (i = 0; i < s->nfields; i++) {
        if (kr_fields[s->first_field + i].id == id) {
            return i;
        }
    }
    return -1;
}

const char *
kr_field_id_name(enum kr_field_id id)
{
    if ((unsigned)id >= KR_NFIELD_IDS) {
        return NULL;
    }
    return kr_field_names[id];
}

enum kr_field_id
kr_field_id_lookup(const char *name)
{
    unsigned lo = 1, hi = KR_NFIELD_IDS;   /* search [lo, hi) */
    char first;

    if (name == NULL || name[0] == '\0') {
        return KR_FIELD_NONE;
    }
    /* The names are stored with their first letter capitalised. */
    first = name[0] >= 'a' && name[0] <= 'z' ? (char)(name[0] - 'a' + 'A')
                                             : name[0];
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const char *k = kr_field_names[mid];
        int c = (unsigned char)first - (unsigned char)k[0];

        if (c == 0) {
            c = strcmp(name + 1, k + 1);
        }
        if (c == 0) {
            return (enum kr_field_id)mid;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return KR_FIELD_NONE;
}

const char *
kr_type_name(enum kr_type t)
{
    switch (t) {
    case KR_T_NONE:
        return "none";
    case KR_T_BOOL:
        return "bool";
    case KR_T_INT8:
        return "int8";
    case KR_T_INT16:
        return "int16";
    case KR_T_UINT16:
        return "uint16";
    case KR_T_INT32:
        return "int32";
    case KR_T_UINT32:
        return "uint32";
    case KR_T_INT64:
        return "int64";
    case KR_T_FLOAT64:
        return "float64";
    case KR_T_UUID:
        return "uuid";
    case KR_T_STRING:
        return "string";
    case KR_T_BYTES:
        return "bytes";
    case KR_T_RECORDS:
        return "records";
    case KR_T_STRUCT:
        return "struct";
    case KR_T_ARRAY:
        return "[]";
    }
    return "?";
}

unsigned
kr_type_min_size(enum kr_type t, bool flex)
{
    unsigned n = kr_type_fixed_size(t);

    if (n > 0) {
        return n;
    }
    switch (t) {
    case KR_T_STRING:
        return flex ? 1 : 2;
    case KR_T_BYTES:
    case KR_T_RECORDS:
    case KR_T_ARRAY:
        return flex ? 1 : 4;
    default:
        return 1;
    }
}
