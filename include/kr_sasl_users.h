/*
 * kr_sasl_users.h - the credentials file SASL termination checks logins
 * against: one entry per line
 *
 *     USER MECHANISM salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N
 *
 * MECHANISM is SCRAM-SHA-256 or SCRAM-SHA-512, the last field Kafka's
 * stored SCRAM credential (kr_scram_cred_parse; iterations 4096..16384);
 * fields are separated by spaces or tabs; '#' starts a comment line
 * (only at the start of a line, after optional blanks); blank lines are
 * allowed.  USER is any UTF-8 without whitespace or control characters.
 * One user may have one entry per mechanism.  No plaintext password is
 * ever in the file: `krelay-passwd` writes its lines.  Files, OpenSSL
 * (through kr_scram), no libevent, no session.
 */
#ifndef KR_SASL_USERS_H
#define KR_SASL_USERS_H

#include <stddef.h>

#include "kr_scram.h"

/* One entry. */
struct kr_sasl_user {
    char *name;                     /* malloc'd, NUL-terminated */
    unsigned line;                  /* where it was, for messages */
    struct kr_scram_cred cred;      /* its hash is the mechanism */
};

/* A loaded file: entries sorted by (name, mechanism) for lookups. */
struct kr_sasl_users {
    struct kr_sasl_user *v;
    size_t n;
    char *warning;                  /* malloc'd "FILE: ..." for the
                                       caller to log, or NULL: today the
                                       file's mode letting group or others
                                       read or write it */
};

/*
 * Load the file at path.  NULL on any error, with err (errlen bytes,
 * NUL-terminated) "PATH:LINE: reason" (or "PATH: reason" for the file as
 * a whole): a bad line refuses the whole file (the first; refused
 * fields, mechanism or credential say to write the line again with
 * krelay-passwd); a duplicate user and mechanism is an error naming
 * both lines (the duplicate on the earliest line, and the line it
 * repeats).  The result is owned by the
 * caller: kr_sasl_users_free.  A file of no entries loads (n 0).
 */
struct kr_sasl_users *kr_sasl_users_load(const char *path, char *err,
                                         size_t errlen);

/*
 * The same over len bytes of text at text (no NUL needed); name stands
 * for the path in messages.  No warning (there is no file mode).
 */
struct kr_sasl_users *kr_sasl_users_load_text(const char *text, size_t len,
                                              const char *name, char *err,
                                              size_t errlen);

/* The credential of user for hash h, or NULL: borrowed from u. */
const struct kr_scram_cred *kr_sasl_users_lookup(const struct kr_sasl_users *u,
                                                 const char *user,
                                                 enum kr_scram_hash h);

/*
 * The warning for a file of secrets whose mode (st_mode) lets group or
 * others read or write it: "PATH: mode 0644 lets group or others read
 * or write it: RISK (chmod 600)", malloc'd (the caller frees), or NULL
 * when the mode is private (or out of memory).  risk says what a reader
 * could do.  kr_sasl_users_load's warning is this one; the config
 * loader gives it for password and token files (kr_conf.c).
 */
char *kr_sasl_users_mode_warning(const char *path, unsigned mode,
                                 const char *risk);

/* Wipe every credential and free u (NULL: nothing). */
void kr_sasl_users_free(struct kr_sasl_users *u);

#endif /* KR_SASL_USERS_H */
