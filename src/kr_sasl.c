/*
 * kr_sasl.c - the SASL exchange as krelay follows it (kr_sasl.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "kr_codec.h"
#include "kr_sasl.h"
#include "kr_sasl_token.h"

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

/* ---- passthrough (issue 9) ---------------------------------------------- */

enum kr_sasl_step
kr_sasl_on_handshake(struct kr_sasl *sa, const uint8_t *name, int32_t len,
                     int16_t ver, int64_t now_ms)
{
    char m[KR_SASL_MECH_NAME_MAX + 1];
    int32_t i, n = len < 0 ? 0 : len;

    if (n > KR_SASL_MECH_NAME_MAX) {
        n = KR_SASL_MECH_NAME_MAX;
    }
    for (i = 0; i < n; i++) {
        m[i] = name[i] >= 0x20 && name[i] < 0x7f ? (char)name[i] : '?';
    }
    m[n] = '\0';
    if (sa->authenticated &&
        (len < 0 || len > KR_SASL_MECH_NAME_MAX ||
         strcmp(m, sa->mech_name) != 0)) {
        return KR_SASL_STEP_MECH_CHANGED;
    }
    memcpy(sa->mech_name, m, (size_t)n + 1);
    sa->reauth = sa->authenticated;
    sa->auth = KR_SASL_AUTH_STARTED;
    sa->rounds = 0;
    sa->token_seen = false;
    sa->handshake_version = ver;
    sa->authenticate_version = -1;
    sa->session_lifetime_ms = -1;
    sa->error_code = -1;
    sa->started_ms = now_ms;
    if (!sa->reauth) {
        free(sa->principal);
        sa->principal = NULL;
        sa->pstate = KR_SASL_PS_NONE;
        sa->why = NULL;
    }
    return KR_SASL_STEP_OK;
}

void
kr_sasl_handshake_unsent(struct kr_sasl *sa)
{
    if (sa->auth != KR_SASL_AUTH_STARTED || sa->token_seen) {
        return;
    }
    if (sa->reauth) {
        sa->auth = KR_SASL_AUTH_SUCCEEDED;
        sa->reauth = false;
        return;
    }
    sa->auth = KR_SASL_AUTH_NONE;
    sa->mech_name[0] = '\0';
}

/* "User:" and name, malloc'd (NULL: ENOMEM). */
static char *
user_of(const char *name)
{
    size_t n = strlen(name);
    char *p = malloc(sizeof("User:") + n);

    if (p != NULL) {
        memcpy(p, "User:", sizeof("User:") - 1);
        memcpy(p + sizeof("User:") - 1, name, n + 1);
    }
    return p;
}

enum kr_sasl_step
kr_sasl_on_token(struct kr_sasl *sa, int16_t authenticate_version,
                 const uint8_t *tok, size_t len, const char *oauth_claim)
{
    enum kr_sasl_principal_outcome o;
    const char *why = NULL;
    char *name = NULL, *user = NULL;
    bool same;

    if (authenticate_version >= 0) {
        sa->authenticate_version = authenticate_version;
    }
    if (sa->token_seen || sa->auth != KR_SASL_AUTH_STARTED) {
        return KR_SASL_STEP_OK;
    }
    sa->token_seen = true;
    o = kr_sasl_client_principal(sa->mech_name, tok, len, oauth_claim, &name,
                                 &why);
    if (o == KR_SASL_PRINCIPAL_KNOWN) {
        user = user_of(name);
        free(name);
        if (user == NULL) {
            return KR_SASL_STEP_ENOMEM;
        }
    } else if (o == KR_SASL_PRINCIPAL_MALFORMED && why != NULL &&
               strcmp(why, "out of memory") == 0) {
        return KR_SASL_STEP_ENOMEM;
    }
    if (sa->reauth) {
        /* KIP-368: the same principal, or the connection closes */
        same = user != NULL
                   ? sa->pstate == KR_SASL_PS_VERIFIED &&
                         sa->principal != NULL &&
                         strcmp(user, sa->principal) == 0
                   : sa->pstate == KR_SASL_PS_UNKNOWN &&
                         o == KR_SASL_PRINCIPAL_UNKNOWN;
        free(user);
        return same ? KR_SASL_STEP_OK : KR_SASL_STEP_PRINCIPAL_CHANGED;
    }
    free(sa->principal);
    sa->principal = user;
    sa->pstate = user != NULL ? KR_SASL_PS_CLAIMED : KR_SASL_PS_UNKNOWN;
    sa->why = o == KR_SASL_PRINCIPAL_MALFORMED ? why : NULL;
    return KR_SASL_STEP_OK;
}

bool
kr_sasl_end_visible(const struct kr_sasl *sa)
{
    return kr_sasl_mech_of((const uint8_t *)sa->mech_name,
                           (int32_t)strlen(sa->mech_name)) != KR_SASL_OTHER ||
           strcmp(sa->mech_name, "OAUTHBEARER") == 0;
}

/* The exchange ended with success. */
static enum kr_sasl_answer
succeed(struct kr_sasl *sa)
{
    sa->auth = KR_SASL_AUTH_SUCCEEDED;
    sa->authenticated = true;
    if (sa->pstate == KR_SASL_PS_CLAIMED) {
        sa->pstate = KR_SASL_PS_VERIFIED;
    } else if (sa->pstate == KR_SASL_PS_NONE) {
        sa->pstate = KR_SASL_PS_UNKNOWN;        /* no token seen */
    }
    return KR_SASL_ANS_SUCCESS;
}

static enum kr_sasl_answer
fail(struct kr_sasl *sa, int16_t error_code)
{
    sa->auth = KR_SASL_AUTH_FAILED;
    sa->error_code = error_code;
    return KR_SASL_ANS_FAILURE;
}

/* Do len bytes at p start with the two bytes of what? */
static bool
starts(const uint8_t *p, size_t len, const char *what)
{
    return len >= 2 && p != NULL && p[0] == (uint8_t)what[0] &&
           p[1] == (uint8_t)what[1];
}

enum kr_sasl_answer
kr_sasl_on_answer(struct kr_sasl *sa, enum kr_sasl_frame f,
                  int16_t error_code, const uint8_t *bytes, size_t len,
                  int64_t lifetime_ms)
{
    enum kr_sasl_mech m = kr_sasl_mech_of((const uint8_t *)sa->mech_name,
                                          (int32_t)strlen(sa->mech_name));

    if (sa->auth != KR_SASL_AUTH_STARTED) {
        /* after a failure the broker closes; nothing changes */
        return sa->auth == KR_SASL_AUTH_FAILED ? KR_SASL_ANS_FAILURE
                                               : KR_SASL_ANS_CONTINUE;
    }
    if (f != KR_SASL_F_RAW && error_code != 0) {
        return fail(sa, error_code);
    }
    if (f == KR_SASL_F_HANDSHAKE) {
        return KR_SASL_ANS_CONTINUE;
    }
    sa->rounds++;
    if (f == KR_SASL_F_AUTHENTICATE) {
        sa->session_lifetime_ms = lifetime_ms;
    }
    switch (m) {
    case KR_SASL_PLAIN:
        /* RFC 4616: one message; the server's answer is empty.  A raw
           PLAIN failure is a close (Kafka), never an answer */
        return succeed(sa);
    case KR_SASL_SCRAM:
        /* RFC 5802: server-first, then server-final "v=" or "e=" */
        if (starts(bytes, len, "v=") && sa->rounds >= 2) {
            return succeed(sa);
        }
        if (starts(bytes, len, "e=") ||
            (f == KR_SASL_F_RAW && sa->rounds >= 2)) {
            return fail(sa, -1);
        }
        return KR_SASL_ANS_CONTINUE;
    default:
        break;
    }
    if (strcmp(sa->mech_name, "OAUTHBEARER") == 0 && len == 0) {
        /* RFC 7628: an empty answer is the success; a non-empty one the
           error challenge before the failure */
        return succeed(sa);
    }
    return KR_SASL_ANS_CONTINUE;
}

void
kr_sasl_on_local_answer(struct kr_sasl *sa)
{
    if (sa->auth == KR_SASL_AUTH_STARTED) {
        (void)fail(sa, -1);
    }
}

bool
kr_sasl_assume_done(struct kr_sasl *sa)
{
    if (sa->auth != KR_SASL_AUTH_STARTED || kr_sasl_end_visible(sa) ||
        sa->rounds == 0) {
        return false;
    }
    (void)succeed(sa);
    return true;
}

const char *
kr_sasl_auth_name(enum kr_sasl_auth a)
{
    switch (a) {
    case KR_SASL_AUTH_NONE:
        return "none";
    case KR_SASL_AUTH_STARTED:
        return "started";
    case KR_SASL_AUTH_SUCCEEDED:
        return "success";
    case KR_SASL_AUTH_FAILED:
        return "failure";
    }
    return "?";
}

const char *
kr_sasl_pstate_name(enum kr_sasl_pstate p)
{
    switch (p) {
    case KR_SASL_PS_NONE:
        return "none";
    case KR_SASL_PS_CLAIMED:
        return "claimed";
    case KR_SASL_PS_VERIFIED:
        return "verified";
    case KR_SASL_PS_UNKNOWN:
        return "unknown";
    }
    return "?";
}

void
kr_sasl_free(struct kr_sasl *sa)
{
    free(sa->principal);
    memset(sa, 0, sizeof(*sa));
}
