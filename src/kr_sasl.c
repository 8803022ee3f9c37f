/*
 * kr_sasl.c - the SASL exchange as krelay follows it (kr_sasl.h).
 */
#include "config.h"

#include <string.h>

#include "kr_codec.h"
#include "kr_sasl.h"

enum kr_sasl_mech
kr_sasl_mech_of(const uint8_t *p, int32_t len)
{
    if (len == 5 && memcmp(p, "PLAIN", 5) == 0) {
        return KR_SASL_PLAIN;
    }
    if ((len == 13 && memcmp(p, "SCRAM-SHA-256", 13) == 0) ||
        (len == 13 && memcmp(p, "SCRAM-SHA-512", 13) == 0)) {
        return KR_SASL_SCRAM;
    }
    return KR_SASL_OTHER;
}

enum kr_sasl_mech
kr_sasl_note_handshake(struct kr_sasl *sa, const struct kr_msg *m,
                       const uint8_t **name, int32_t *namelen)
{
    const struct kr_val *v = kr_node_get_id(m->body, KR_FIELD_MECHANISM);

    if (name != NULL) {
        *name = NULL;
    }
    if (namelen != NULL) {
        *namelen = -1;
    }
    if (v == NULL || v->is_null || v->u.s.len < 0) {
        sa->mech = KR_SASL_OTHER;
        return sa->mech;
    }
    sa->mech = kr_sasl_mech_of(v->u.s.p, v->u.s.len);
    if (name != NULL) {
        *name = v->u.s.p;
    }
    if (namelen != NULL) {
        *namelen = v->u.s.len;
    }
    return sa->mech;
}

bool
kr_sasl_start_raw(struct kr_sasl *sa)
{
    switch (sa->mech) {
    case KR_SASL_PLAIN:
        sa->tokens = 1;
        return true;
    case KR_SASL_SCRAM:
        sa->tokens = 2;
        return true;
    default:
        return false;
    }
}
