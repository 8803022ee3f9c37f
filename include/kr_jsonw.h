/*
 * kr_jsonw.h - a direct JSON writer: compact JSON text (RFC 8259)
 * appended to a growable buffer, with no tree built and no allocation
 * once the buffer is large enough (the audit log's lines, issue 14).
 *
 * Shape.  A writer holds one buffer (malloc'd, grown by doubling, kept
 * across kr_jsonw_reset so that a writer reused per line allocates
 * nothing) and a stack of open containers.  Calls append in document
 * order; the writer puts the commas and colons:
 *
 *     struct kr_jsonw w;
 *
 *     kr_jsonw_init(&w);
 *     kr_jsonw_obj_open(&w);
 *     kr_jsonw_kcstr(&w, "api", "Produce");
 *     kr_jsonw_kint(&w, "api_key", 0);
 *     kr_jsonw_key(&w, "topics");
 *     kr_jsonw_arr_open(&w);
 *     kr_jsonw_str(&w, name, name_len);
 *     kr_jsonw_arr_close(&w);
 *     kr_jsonw_obj_close(&w);
 *     if (kr_jsonw_ok(&w)) use(w.buf, w.len);   // {"api":"Produce",...}
 *     kr_jsonw_free(&w);
 *
 * Output is byte for byte what jansson's json_dumps(JSON_COMPACT) writes
 * for the same values (tests/unit/check_jsonw.c checks it): strings
 * escape '"', '\\' and every byte below 0x20 (\b \f \n \r \t, others
 * \u00XX with upper-case hex), and nothing else ('/', DEL and non-ASCII
 * stay as they are); integers in decimal.  Strings that are not valid
 * UTF-8 (kr_utf8_valid) have every byte >= 0x80 written as '?', the rule
 * of kr_audit.c's jstr(), so a peer's garbage stays one JSON string.
 * Keys are escaped as strings are.
 *
 * Errors.  Sticky: out of memory, a close that does not match the open
 * container, a key outside an object, or more than KR_JSONW_DEPTH open
 * containers set w->failed; later calls do nothing; kr_jsonw_ok says
 * whether the text is whole.  A document left unclosed is not detected
 * (kr_jsonw_depth is 0 when it is closed).
 *
 * Ownership: the writer owns buf until kr_jsonw_take hands it over (or
 * kr_jsonw_free frees it).  buf is NUL-terminated after every call that
 * succeeded (len excludes the NUL).  Not thread-safe: one writer per
 * thread.  Pure: no I/O, no global state; kr_jsonw_json reads a jansson
 * value without changing it.
 */
#ifndef KR_JSONW_H
#define KR_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Most containers open at once. */
#define KR_JSONW_DEPTH 256

struct kr_jsonw {
    char *buf;                  /* the text, NUL-terminated; NULL until the
                                   first byte */
    size_t len, cap;            /* bytes written (no NUL), allocated */
    unsigned depth;             /* containers open */
    bool failed;                /* sticky error (see above) */
    bool after_key;             /* a key was written: a value comes */
    uint64_t more[KR_JSONW_DEPTH / 64];   /* bit d: depth d has a member
                                             (the next one needs a comma) */
    uint64_t obj[KR_JSONW_DEPTH / 64];    /* bit d: depth d is an object */
};

/* An empty writer; allocates nothing. */
void kr_jsonw_init(struct kr_jsonw *w);
/* Empty again (len 0, no container open, error cleared), keeping the
   buffer for the next document. */
void kr_jsonw_reset(struct kr_jsonw *w);
/* Free the buffer; w is then as after kr_jsonw_init. */
void kr_jsonw_free(struct kr_jsonw *w);
/*
 * Hand the text over: a malloc'd NUL-terminated string the caller frees
 * (its length in *len when len is not NULL), and w is empty (as after
 * kr_jsonw_init).  NULL (and w reset) when w failed or holds nothing.
 */
char *kr_jsonw_take(struct kr_jsonw *w, size_t *len);
/* true while no error happened. */
static inline bool
kr_jsonw_ok(const struct kr_jsonw *w)
{
    return !w->failed;
}
/* Containers open now (0: the document is closed). */
static inline unsigned
kr_jsonw_depth(const struct kr_jsonw *w)
{
    return w->depth;
}
/* Room for n more bytes in w->buf (false and failed on ENOMEM). */
bool kr_jsonw_reserve(struct kr_jsonw *w, size_t n);

/* ---- containers ---------------------------------------------------------- */

void kr_jsonw_obj_open(struct kr_jsonw *w);
void kr_jsonw_obj_close(struct kr_jsonw *w);
void kr_jsonw_arr_open(struct kr_jsonw *w);
void kr_jsonw_arr_close(struct kr_jsonw *w);
/*
 * Members rendered before by a writer (len bytes of text, each member
 * preceded by its comma: `,"k":1,"l":"v"`), appended to the object being
 * written, which must have a member already; len 0 appends nothing.  The
 * caller vouches for the text (kr_audit.c's memo of a connection's keys).
 * Fails w (sticky) when no such object is open or a key waits.
 */
void kr_jsonw_members_raw(struct kr_jsonw *w, const char *text, size_t len);
/* A member's key (NUL-terminated, escaped); its value comes next. */
void kr_jsonw_key(struct kr_jsonw *w, const char *key);
/* The same with a key of len bytes (may hold NULs). */
void kr_jsonw_keyn(struct kr_jsonw *w, const char *key, size_t len);

/* ---- values: an array element, a member's value after a key, or the
        whole document ------------------------------------------------------ */

/* A string of len bytes (may hold NULs; p may be NULL when len is 0). */
void kr_jsonw_str(struct kr_jsonw *w, const char *p, size_t len);
/* A NUL-terminated string. */
void kr_jsonw_cstr(struct kr_jsonw *w, const char *s);
void kr_jsonw_int(struct kr_jsonw *w, int64_t v);
void kr_jsonw_uint(struct kr_jsonw *w, uint64_t v);
void kr_jsonw_bool(struct kr_jsonw *w, bool v);
void kr_jsonw_null(struct kr_jsonw *w);
/*
 * Text that is already one JSON value (len bytes, copied as is: the
 * caller vouches for it), e.g. a fragment formatted once and reused.
 */
void kr_jsonw_raw(struct kr_jsonw *w, const char *json, size_t len);
/*
 * A jansson value, as json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)
 * writes it: objects in their (insertion) order, strings as they are
 * (jansson holds valid UTF-8: the '?' rule never applies), reals through
 * jansson itself (its "%.17g" form).  NULL is written as null.
 */
void kr_jsonw_json(struct kr_jsonw *w, const json_t *v);

/* ---- members: key and value in one call ---------------------------------- */

void kr_jsonw_kstr(struct kr_jsonw *w, const char *key, const char *p,
                   size_t len);
void kr_jsonw_kcstr(struct kr_jsonw *w, const char *key, const char *s);
void kr_jsonw_kint(struct kr_jsonw *w, const char *key, int64_t v);
void kr_jsonw_kbool(struct kr_jsonw *w, const char *key, bool v);

#endif /* KR_JSONW_H */
