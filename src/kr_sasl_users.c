/*
 * kr_sasl_users.c - the credentials file (kr_sasl_users.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kr_codec.h"
#include "kr_sasl_users.h"

/* a file bigger than this is not a credentials file */
#define KR_SASL_USERS_MAX_BYTES (64u << 20)

static void
errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void
kr_sasl_users_free(struct kr_sasl_users *u)
{
    size_t i;

    if (u == NULL) {
        return;
    }
    for (i = 0; i < u->n; i++) {
        free(u->v[i].name);
        kr_scram_cred_wipe(&u->v[i].cred);
    }
    free(u->v);
    free(u->warning);
    free(u);
}

static int
cmp_user(const void *a, const void *b)
{
    const struct kr_sasl_user *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    if (c != 0) {
        return c;
    }
    if (x->cred.hash != y->cred.hash) {
        return x->cred.hash < y->cred.hash ? -1 : 1;
    }
    return x->line < y->line ? -1 : x->line > y->line;
}

static bool
blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* what a refused entry's message ends with */
#define REDO "; write the line again with krelay-passwd(1)"

/* One line (len bytes, no '\n'): appended to u, or false with err. */
static bool
parse_line(struct kr_sasl_users *u, size_t *cap, const char *p, size_t len,
           const char *name, unsigned line, char *err, size_t errlen)
{
    const char *f[4];
    size_t fl[4], nf = 0, i = 0, k;
    struct kr_sasl_user e;
    enum kr_scram_hash h;
    char mech[16];
    const char *why = NULL;

    while (i < len) {
        while (i < len && blank(p[i])) {
            i++;
        }
        if (i == len) {
            break;
        }
        if (nf == 0 && p[i] == '#') {
            return true;
        }
        if (nf == 4) {
            break;
        }
        f[nf] = p + i;
        while (i < len && !blank(p[i])) {
            i++;
        }
        fl[nf] = (size_t)(p + i - f[nf]);
        nf++;
    }
    if (nf == 0) {
        return true;
    }
    if (nf != 3) {
        errf(err, errlen, "%s:%u: want USER MECHANISM CREDENTIAL, found %s "
             "(user names may not contain whitespace)" REDO, name, line,
             nf < 3 ? "fewer fields" : "more than three fields");
        return false;
    }
    for (k = 0; k < fl[0]; k++) {
        if ((unsigned char)f[0][k] < 0x20 || f[0][k] == 0x7f) {
            errf(err, errlen, "%s:%u: control character in the user name",
                 name, line);
            return false;
        }
    }
    if (!kr_utf8_valid((const uint8_t *)f[0], fl[0])) {
        errf(err, errlen, "%s:%u: user name is not valid UTF-8", name, line);
        return false;
    }
    if (fl[1] >= sizeof(mech)) {
        fl[1] = sizeof(mech) - 1;
    }
    memcpy(mech, f[1], fl[1]);
    mech[fl[1]] = '\0';
    if (!kr_scram_hash_of(mech, &h)) {
        errf(err, errlen, "%s:%u: mechanism must be SCRAM-SHA-256 or "
             "SCRAM-SHA-512" REDO, name, line);
        return false;
    }
    memset(&e, 0, sizeof(e));
    if (!kr_scram_cred_parse(&e.cred, h, f[2], fl[2], &why)) {
        errf(err, errlen, "%s:%u: %s" REDO, name, line, why);
        return false;
    }
    e.line = line;
    e.name = malloc(fl[0] + 1);
    if (e.name == NULL) {
        kr_scram_cred_wipe(&e.cred);
        errf(err, errlen, "%s:%u: out of memory", name, line);
        return false;
    }
    memcpy(e.name, f[0], fl[0]);
    e.name[fl[0]] = '\0';
    if (u->n == *cap) {
        size_t nc = *cap != 0 ? *cap * 2 : 16;
        struct kr_sasl_user *nv = realloc(u->v, nc * sizeof(*nv));

        if (nv == NULL) {
            free(e.name);
            kr_scram_cred_wipe(&e.cred);
            errf(err, errlen, "%s:%u: out of memory", name, line);
            return false;
        }
        u->v = nv;
        *cap = nc;
    }
    u->v[u->n++] = e;
    return true;
}

struct kr_sasl_users *
kr_sasl_users_load_text(const char *text, size_t len, const char *name,
                        char *err, size_t errlen)
{
    struct kr_sasl_users *u = calloc(1, sizeof(*u));
    size_t pos = 0, cap = 0, i;
    unsigned line = 0;

    if (u == NULL) {
        errf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    if (len > 0 && memchr(text, '\0', len) != NULL) {
        errf(err, errlen, "%s: NUL byte: not a text file", name);
        goto bad;
    }
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t l = nl != NULL ? (size_t)(nl - text) - pos : len - pos;

        line++;
        if (!parse_line(u, &cap, text + pos, l, name, line, err, errlen)) {
            goto bad;
        }
        pos += l + (nl != NULL);
    }
    if (u->n > 1) {
        size_t dup = 0;

        qsort(u->v, u->n, sizeof(u->v[0]), cmp_user);
        /* equal entries sit together, in line order: the duplicate
           reported is the one on the earliest line (as a syntax error
           is the first bad line), with the entry it repeats */
        for (i = 1; i < u->n; i++) {
            if (u->v[i].cred.hash == u->v[i - 1].cred.hash &&
                strcmp(u->v[i].name, u->v[i - 1].name) == 0 &&
                (dup == 0 || u->v[i].line < u->v[dup].line)) {
                dup = i;
            }
        }
        if (dup != 0) {
            errf(err, errlen, "%s:%u: user %s has a %s entry already "
                 "(line %u)", name, u->v[dup].line, u->v[dup].name,
                 kr_scram_mech_name(u->v[dup].cred.hash),
                 u->v[dup - 1].line);
            goto bad;
        }
    }
    return u;
bad:
    kr_sasl_users_free(u);
    return NULL;
}

struct kr_sasl_users *
kr_sasl_users_load(const char *path, char *err, size_t errlen)
{
    struct kr_sasl_users *u;
    struct stat st;
    char *buf;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        errf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        errf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > KR_SASL_USERS_MAX_BYTES) {
        errf(err, errlen, "%s: larger than 64 MiB", path);
        close(fd);
        return NULL;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        errf(err, errlen, "%s: out of memory", path);
        close(fd);
        return NULL;
    }
    for (;;) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size + 1 - got);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            errf(err, errlen, "%s: %s", path, strerror(errno));
            OPENSSL_cleanse(buf, got);
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0 || (got += (size_t)r) > (size_t)st.st_size) {
            break;
        }
    }
    close(fd);
    if (got > (size_t)st.st_size) {
        errf(err, errlen, "%s: grew while read", path);
        OPENSSL_cleanse(buf, got);
        free(buf);
        return NULL;
    }
    u = kr_sasl_users_load_text(buf, got, path, err, errlen);
    OPENSSL_cleanse(buf, got);
    free(buf);
    if (u != NULL) {
        u->warning = kr_sasl_users_mode_warning(path, (unsigned)st.st_mode,
                                                "its SCRAM keys let a reader "
                                                "try passwords offline and "
                                                "pose as krelay to clients");
    }
    return u;
}

char *
kr_sasl_users_mode_warning(const char *path, unsigned mode, const char *risk)
{
    char *w;

    if ((mode & 077) == 0) {
        return NULL;
    }
    if (asprintf(&w, "%s: mode %04o lets group or others read or write "
                 "it: %s (chmod 600)", path, mode & 07777, risk) < 0) {
        return NULL;
    }
    return w;
}

const struct kr_scram_cred *
kr_sasl_users_lookup(const struct kr_sasl_users *u, const char *user,
                     enum kr_scram_hash h)
{
    size_t lo = 0, hi = u->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct kr_sasl_user *e = &u->v[mid];
        int c = strcmp(user, e->name);

        if (c == 0) {
            c = h == e->cred.hash ? 0 : h < e->cred.hash ? -1 : 1;
        }
        if (c == 0) {
            return &e->cred;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}
