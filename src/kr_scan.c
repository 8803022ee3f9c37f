/*
 * kr_scan.c - resumable structure scanner (see kr_scan.h).
 *
 * A stack machine over the generated tables.  Each step looks at the top
 * frame and either schedules a skip (bytes never looked at), schedules a
 * read of a small prefix (length, count, marker, tag header), pushes a
 * frame (struct or array) or pops one.  Reads and skips survive the end
 * of a feed, so a frame may arrive one byte at a time.
 *
 * The observer (kr_scan_watch): step marks a body field it wants
 * (watch_kind) in wnext before starting its value; a fixed-width one
 * (ErrorCode, TopicId) and a topic name's bytes are then "captured": the
 * skip over them copies them into cap (cap_on) and tells the observer
 * when it ends (cap_end); a records length is told as it is read.  A
 * captured skip is never skippable (kr_scan_skippable 0), so its bytes
 * always come through kr_scan_feed.
 */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "kr_scan.h"
#include "kr_schema.h"

/* Struct nesting allowed in a body, as kr_codec's decoder allows. */
#define KR_SCAN_MAX_DEPTH 16

/* kr_scan_frame.kind */
enum {
    F_FIELDS = 1,   /* a struct's untagged fields */
    F_TAGS,         /* its tagged fields: .remain left, .seen known ones */
    F_ARRAY,        /* an array: .remain elements left */
    F_TAGVAL        /* a known tagged field's value, which must end at
                       .end exactly (tag .remain) */
};

/* kr_scan.rkind: how a pending value is encoded */
enum { R_NONE = 0, R_I8, R_I16, R_I32, R_UVAR };

/* kr_scan.rwhy: what a pending value is */
enum {
    W_STRING = 1,   /* string length */
    W_BYTES,        /* bytes or records length */
    W_ARRAY,        /* array count */
    W_MARKER,       /* nullable struct marker */
    W_TAG_COUNT,    /* number of tagged fields */
    W_TAG_ID,       /* a tag */
    W_TAG_SIZE      /* a tagged field's size */
};

static int
fail(struct kr_scan *sc, uint64_t at, const char *fmt, ...)
    KR_PRINTF(3, 4);

static int
fail(struct kr_scan *sc, uint64_t at, const char *fmt, ...)
{
    char what[96];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(sc->msg, sizeof(sc->msg), "%s at payload offset %llu", what,
             (unsigned long long)at);
    sc->status = KR_EPROTO;
    return KR_EPROTO;
}

static uint64_t
left(const struct kr_scan *sc)
{
    return sc->limit - sc->off;
}

static bool
tagged_at(const struct kr_field_desc *f, int16_t v)
{
    return f->tag >= 0 && kr_vrange_has(f->tagged, v);
}

static int
push(struct kr_scan *sc, uint8_t kind, uint16_t sid, bool flex, uint8_t et,
     uint32_t remain, int16_t v)
{
    struct kr_scan_frame *f;
    int depth = 0, i;
    bool quiet;

    if (sc->nframes >= KR_SCAN_MAX_FRAMES) {
        return fail(sc, sc->off, "structs nested too deep");
    }
    if (kind == F_FIELDS) {
        if (sid >= kr_nstructs) {
            return fail(sc, sc->off, "no struct %u", (unsigned)sid);
        }
        for (i = 0; i < sc->nframes; i++) {
            depth += sc->st[i].kind != F_ARRAY &&
                     sc->st[i].kind != F_TAGVAL && !sc->st[i].hdr;
        }
        if (depth >= KR_SCAN_MAX_DEPTH) {
            return fail(sc, sc->off, "structs nested deeper than %d",
                        KR_SCAN_MAX_DEPTH);
        }
    }
    quiet = kind == F_TAGVAL ||
            (sc->nframes > 0 && sc->st[sc->nframes - 1].quiet);
    f = &sc->st[sc->nframes++];
    memset(f, 0, sizeof(*f));
    f->quiet = quiet;
    f->kind = kind;
    f->sid = sid;
    f->flex = flex;
    f->et = et;
    f->remain = remain;
    f->v = v;
    return KR_OK;
}

static void
want(struct kr_scan *sc, uint8_t kind, uint8_t why)
{
    sc->rkind = kind;
    sc->rwhy = why;
    sc->rgot = 0;
    sc->rdone = 0;
    sc->rval = 0;
    sc->rstart = sc->off;
}

/* Which watched value field f is (enum kr_scan_what), 0: none; root:
   f is a field of the body's root struct. */
static uint8_t
watch_kind(const struct kr_field_desc *f, bool root)
{
    if ((f->flags & KR_FF_ERROR_CODE) && f->type == KR_T_INT16) {
        return KR_SCAN_ERROR_CODE;
    }
    if (f->id == KR_FIELD_ACKS && f->type == KR_T_INT16) {
        return KR_SCAN_ACKS;
    }
    if (root && f->id == KR_FIELD_TRANSACTIONAL_ID &&
        f->type == KR_T_STRING) {
        return KR_SCAN_TRANSACTIONAL_ID;
    }
    if (f->type == KR_T_RECORDS) {
        return KR_SCAN_RECORDS;
    }
    if (f->entity == KR_E_TOPIC_NAME && f->type == KR_T_STRING) {
        return KR_SCAN_TOPIC;
    }
    if (f->id == KR_FIELD_TOPIC_ID && f->type == KR_T_UUID) {
        return KR_SCAN_TOPIC_ID;
    }
    return 0;
}

/* A captured skip ended: tell the observer. */
static void
cap_end(struct kr_scan *sc)
{
    uint8_t what = sc->cap_on;

    sc->cap_on = 0;
    switch (what) {
    case KR_SCAN_ERROR_CODE:
    case KR_SCAN_ACKS:
        sc->watch(sc->watch_arg, (enum kr_scan_what)what, NULL, 0,
                  (int16_t)((uint16_t)sc->cap[0] << 8 | sc->cap[1]));
        break;
    case KR_SCAN_TOPIC_ID:
    case KR_SCAN_TOPIC:
    case KR_SCAN_TRANSACTIONAL_ID:
        sc->watch(sc->watch_arg, (enum kr_scan_what)what, sc->cap,
                  sc->cap_len, sc->cap_full);
        break;
    default:
        break;
    }
}

/* Capture the next n bytes (a skip about to be scheduled) for what. */
static void
cap_begin(struct kr_scan *sc, uint8_t what, uint64_t n)
{
    sc->cap_on = what;
    sc->cap_len = 0;
    sc->cap_full = (int64_t)n;
}

/* Skip n bytes known to be within the frame. */
static inline int
skip_ok(struct kr_scan *sc, uint64_t n)
{
    sc->skip = n;
    if (n == 0 && sc->cap_on) {
        cap_end(sc);
    }
    return KR_OK;
}

static int
skip(struct kr_scan *sc, uint64_t n, const char *what)
{
    if (n > left(sc)) {
        return fail(sc, sc->off, "%s of %llu bytes past the end of the "
                    "frame (%llu bytes left)", what, (unsigned long long)n,
                    (unsigned long long)left(sc));
    }
    return skip_ok(sc, n);
}

/*
 * Start one value of type t (element type et, struct sid) at the
 * cursor: a skip, a read, or a pushed frame.
 */
static int
start_value(struct kr_scan *sc, uint8_t t, uint8_t et, uint16_t sid,
            bool flex, bool nullable)
{
    int16_t v = sc->st[sc->nframes - 1].v;
    uint8_t w = sc->wnext;
    unsigned fs;

    sc->wnext = 0;
    sc->r_et = et;
    sc->r_sid = sid;
    sc->r_flex = flex;
    sc->r_nullable = nullable;
    sc->r_watch = w;
    fs = kr_type_fixed_size((enum kr_type)t);
    if (fs > 0) {
        if (w == KR_SCAN_ERROR_CODE || w == KR_SCAN_TOPIC_ID ||
            w == KR_SCAN_ACKS) {
            cap_begin(sc, w, fs);
        }
        if (fs <= left(sc)) {
            return skip_ok(sc, fs);
        }
        return skip(sc, fs, kr_type_name((enum kr_type)t));
    }
    switch (t) {
    case KR_T_STRING:
        want(sc, flex ? R_UVAR : R_I16, W_STRING);
        return KR_OK;
    case KR_T_BYTES:
    case KR_T_RECORDS:
        want(sc, flex ? R_UVAR : R_I32, W_BYTES);
        sc->r_et = (uint8_t)t;          /* for the messages: which one */
        return KR_OK;
    case KR_T_ARRAY:
        want(sc, flex ? R_UVAR : R_I32, W_ARRAY);
        return KR_OK;
    case KR_T_STRUCT:
        if (nullable) {
            want(sc, R_I8, W_MARKER);
            return KR_OK;
        }
        return push(sc, F_FIELDS, sid, flex, 0, 0, v);
    default:
        return fail(sc, sc->off, "unknown field type %u", (unsigned)t);
    }
}

/* A length (string/bytes) or count (array) decoded from the wire. */
static int
signed_len(const struct kr_scan *sc, uint8_t kind, int64_t *len)
{
    switch (kind) {
    case R_I16:
        *len = (int16_t)sc->rval;
        break;
    case R_I32:
        *len = (int32_t)sc->rval;
        break;
    default:
        *len = (int64_t)sc->rval - 1;   /* compact: n + 1 */
        break;
    }
    return KR_OK;
}

/*
 * A tagged field of sc->rtag, size bytes, in the struct of tags frame t.
 * An unknown tag is skipped by its size, as clients skip it.  A known one
 * is walked like any value and must fill its size exactly, and appear
 * once: a client reads the value it knows, not the size, so bytes hidden
 * after the value (or a second copy) would be read as something else
 * (a broker address past krelay's rewrite).  Kafka's rule, and the
 * decoder's with KR_DEC_TAGS_EXACT.
 */
static int
tag_value(struct kr_scan *sc, struct kr_scan_frame *t, uint32_t size)
{
    const struct kr_struct_desc *sd = &kr_structs[t->sid];
    const struct kr_field_desc *f = NULL;
    int16_t v = t->v;
    uint16_t i;

    if (size > left(sc)) {
        return fail(sc, sc->off, "tagged field %u of %u bytes past the end "
                    "of the frame (%llu bytes left)", sc->rtag, size,
                    (unsigned long long)left(sc));
    }
    for (i = 0; i < sd->nfields && (sd->flags & KR_SF_HAS_TAGS); i++) {
        const struct kr_field_desc *c = &kr_fields[sd->first_field + i];

        if (c->tag >= 0 && (uint32_t)c->tag == sc->rtag &&
            kr_vrange_has(c->versions, v) && tagged_at(c, v)) {
            f = c;
            break;
        }
    }
    if (f == NULL) {
        return skip(sc, size, "tagged field");
    }
    if (sc->rtag < 32) {
        if (t->seen & (UINT32_C(1) << sc->rtag)) {
            return fail(sc, sc->rstart, "duplicate tagged field %u (%s)",
                        sc->rtag, f->name);
        }
        t->seen |= UINT32_C(1) << sc->rtag;
    }
    if (push(sc, F_TAGVAL, t->sid, true, 0, sc->rtag, v) != KR_OK) {
        return KR_EPROTO;
    }
    sc->st[sc->nframes - 1].end = sc->off + size;
    return start_value(sc, f->type, f->elem_type, f->struct_id, true,
                       kr_vrange_has(f->nullable, v));
}

/* A pending value is complete: act on it. */
static int
got_value(struct kr_scan *sc)
{
    struct kr_scan_frame *top = &sc->st[sc->nframes - 1];
    uint8_t why = sc->rwhy, kind = sc->rkind;
    int64_t len = 0;

    sc->rkind = R_NONE;
    switch (why) {
    case W_STRING:
    case W_BYTES:
    case W_ARRAY: {
        const char *what = why == W_STRING ? "string"
                         : why == W_ARRAY ? "array"
                         : sc->r_et == KR_T_RECORDS ? "records" : "bytes";

        bool told = (sc->r_watch == KR_SCAN_RECORDS && why == W_BYTES) ||
                    ((sc->r_watch == KR_SCAN_TOPIC ||
                      sc->r_watch == KR_SCAN_TRANSACTIONAL_ID) &&
                     why == W_STRING);

        (void)signed_len(sc, kind, &len);
        if (len < 0) {
            if (len == -1 && sc->r_nullable) {
                if (told) {
                    sc->watch(sc->watch_arg,
                              (enum kr_scan_what)sc->r_watch, NULL, 0, -1);
                }
                return KR_OK;
            }
            if (len == -1) {
                return fail(sc, sc->rstart, "null %s where the field is "
                            "not nullable", what);
            }
            return fail(sc, sc->rstart, "negative %s length %lld", what,
                        (long long)len);
        }
        if (why == W_ARRAY) {
            if ((uint64_t)len > left(sc) /
                kr_type_min_size((enum kr_type)sc->r_et, sc->r_flex)) {
                return fail(sc, sc->rstart, "array count %lld past the end "
                            "of the frame (%llu bytes left)", (long long)len,
                            (unsigned long long)left(sc));
            }
            return push(sc, F_ARRAY, sc->r_sid, sc->r_flex, sc->r_et,
                        (uint32_t)len, top->v);
        }
        if (told && why == W_STRING) {
            cap_begin(sc, sc->r_watch, (uint64_t)len);
        } else if (told && (uint64_t)len <= left(sc)) {
            sc->watch(sc->watch_arg, KR_SCAN_RECORDS, NULL, 0, len);
            if (sc->count_records && len > 0) {
                /* the batch walk (batch_take) passes the value */
                sc->bw_on = 1;
                sc->bw_bad = 0;
                sc->bw_got = 0;
                sc->bw_need = 18;
                sc->bw_start = sc->off;
                sc->bw_end = sc->off + (uint64_t)len;
                sc->bw_n = 0;
                return KR_OK;
            }
        }
        return skip(sc, (uint64_t)len, what);
    }
    case W_MARKER:
        if ((int8_t)sc->rval < 0) {
            return KR_OK;               /* null struct */
        }
        return push(sc, F_FIELDS, sc->r_sid, sc->r_flex, 0, 0, top->v);
    case W_TAG_COUNT:
        if (sc->rval > left(sc) / 2) {
            return fail(sc, sc->rstart, "tagged field count %u past the end "
                        "of the frame (%llu bytes left)", sc->rval,
                        (unsigned long long)left(sc));
        }
        top->kind = F_TAGS;
        top->remain = sc->rval;
        return KR_OK;
    case W_TAG_ID:
        sc->rtag = sc->rval;
        want(sc, R_UVAR, W_TAG_SIZE);
        return KR_OK;
    case W_TAG_SIZE:
        return tag_value(sc, top, sc->rval);
    default:
        return fail(sc, sc->off, "internal: value kind %u", why);
    }
}

/* One step of the walk at the top frame. */
static int
step(struct kr_scan *sc)
{
    struct kr_scan_frame *top;

    if (sc->nframes == 0) {
        sc->status = KR_OK;             /* end of a classic body */
        return KR_OK;
    }
    top = &sc->st[sc->nframes - 1];
    switch (top->kind) {
    case F_ARRAY:
        if (top->remain == 0) {
            sc->nframes--;
            return KR_OK;
        }
        top->remain--;
        return start_value(sc, top->et, KR_T_NONE, top->sid, top->flex,
                           false);
    case F_TAGVAL:
        if (sc->off != top->end) {
            return fail(sc, sc->off, "tagged field %u: its value ends %lld "
                        "bytes %s its size", top->remain,
                        (long long)(sc->off > top->end ? sc->off - top->end
                                                       : top->end - sc->off),
                        sc->off > top->end ? "past" : "before the end of");
        }
        sc->nframes--;
        return KR_OK;
    case F_TAGS:
        if (top->remain == 0) {
            sc->nframes--;
            return KR_OK;
        }
        top->remain--;
        want(sc, R_UVAR, W_TAG_ID);
        return KR_OK;
    default: {
        const struct kr_struct_desc *sd = &kr_structs[top->sid];
        bool watching = sc->watch != NULL && !top->hdr && !top->quiet;
        uint64_t run = 0;

        /* fixed-size fields no one watches, one after the other, are
           skipped as one run */
        while (top->i < sd->nfields) {
            const struct kr_field_desc *f =
                &kr_fields[sd->first_field + top->i];
            bool flex = top->flex;
            uint8_t w;
            unsigned fs;

            if (!kr_vrange_has(f->versions, top->v) ||
                tagged_at(f, top->v)) {
                top->i++;
                continue;
            }
            w = watching ? watch_kind(f, top->root) : 0;
            fs = kr_type_fixed_size((enum kr_type)f->type);
            if (fs > 0 && w == 0) {
                run += fs;
                top->i++;
                continue;
            }
            if (run > 0) {
                break;                  /* the run first, f next */
            }
            top->i++;
            if (f->flags & KR_FF_FLEX_OVERRIDE) {
                flex = kr_vrange_has(f->flexible, top->v);
            }
            sc->wnext = w;
            return start_value(sc, f->type, f->elem_type, f->struct_id,
                               flex, kr_vrange_has(f->nullable, top->v));
        }
        if (run > 0) {
            return run <= left(sc) ? skip_ok(sc, run)
                                   : skip(sc, run, "fixed-size fields");
        }
        if (!top->flex) {
            sc->nframes--;
            return KR_OK;
        }
        if (top->root && !sc->body_tags) {
            sc->status = KR_OK;         /* the body's tagged fields */
            return KR_OK;
        }
        want(sc, R_UVAR, W_TAG_COUNT);
        return KR_OK;
    }
    }
}

int
kr_scan_init(struct kr_scan *sc, int16_t api_key, int16_t api_version,
             bool response, uint64_t payload_len)
{
    const struct kr_api_desc *a = kr_api_get(api_key);
    uint16_t root;
    int hv;

    /* a frame costs 1.6 KB of arrays: only the members before them are
       cleared (see struct kr_scan) */
    memset(sc, 0, offsetof(struct kr_scan, msg));
    sc->msg[0] = '\0';
    sc->status = KR_EUNSUPPORTED;
    if (a == NULL || api_version < 0 || api_version > a->valid.hi) {
        return KR_EUNSUPPORTED;
    }
    root = kr_api_root(a, response, api_version);
    hv = response ? kr_response_header_version(api_key, api_version)
                  : kr_request_header_version(api_key, api_version);
    if (root == KR_NO_STRUCT || root >= kr_nstructs || hv < 0) {
        return KR_EUNSUPPORTED;
    }
    sc->status = KR_AGAIN;
    sc->limit = payload_len;
    /* the body's root first, so the header (on top) is walked first */
    if (push(sc, F_FIELDS, root, kr_api_flexible(a, api_version), 0, 0,
             api_version) != KR_OK ||
        push(sc, F_FIELDS,
             response ? kr_response_header_struct : kr_request_header_struct,
             response ? hv >= 1 : hv >= 2, 0, 0, (int16_t)hv) != KR_OK) {
        sc->status = KR_EUNSUPPORTED;
        return KR_EUNSUPPORTED;
    }
    sc->st[0].root = 1;
    sc->st[1].hdr = 1;
    return KR_OK;
}

/*
 * Take bytes of a pending value from p[*k..n).  Returns KR_OK (complete
 * or not: see sc->rdone) or KR_EPROTO.
 */
static int
take_value(struct kr_scan *sc, const uint8_t *p, size_t n, size_t *k)
{
    static const uint8_t width[] = { 0, 1, 2, 4, 5 };

    while (*k < n && !sc->rdone) {
        uint8_t b = p[*k];

        if (sc->off >= sc->limit) {
            return fail(sc, sc->rstart, "frame ends inside a length, count "
                        "or tag");
        }
        if (sc->rkind == R_UVAR) {
            if (sc->rgot == 4 && b > 0x0f) {
                return fail(sc, sc->rstart, "varint longer than 32 bits");
            }
            sc->rval |= (uint32_t)(b & 0x7f) << (7 * sc->rgot);
            sc->rdone = !(b & 0x80);
        } else {
            sc->rval = sc->rval << 8 | b;
            sc->rdone = sc->rgot + 1 == width[sc->rkind];
        }
        sc->rgot++;
        (*k)++;
        sc->off++;
    }
    return KR_OK;
}

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * One step of the batch walk inside a counted records value (bw_on),
 * with kr_records_count's rules: a batch is baseOffset int64, length
 * int32 (the bytes after it), then at offset 16 its magic; a RecordBatch
 * (magic 2, length >= 49) holds recordsCount at offset 57, an
 * uncompressed MessageSet entry (magic 0/1, length >= 6: its crc, magic
 * and attributes) one record.  Gathers header
 * bytes from p[*k..n), then schedules the skip over the rest of the
 * batch.  Returns true when it made progress, false when it needs bytes.
 */
static bool
batch_take(struct kr_scan *sc, const uint8_t *p, size_t n, size_t *k)
{
    uint64_t blen;
    int32_t len, count;
    int magic;

    if (sc->off == sc->bw_end) {
        sc->bw_on = 0;
        sc->watch(sc->watch_arg, KR_SCAN_RECORD_COUNT, NULL, 0,
                  sc->bw_bad ? -1 : (int64_t)sc->bw_n);
        return true;
    }
    if (!sc->bw_bad && sc->bw_got == 0 && sc->bw_end - sc->off < 18) {
        sc->bw_bad = 1;                 /* not even a batch's header */
    }
    if (sc->bw_bad) {
        sc->skip = sc->bw_end - sc->off;
        return true;
    }
    if (sc->bw_got < sc->bw_need && *k < n) {
        size_t c = sc->bw_need - sc->bw_got;

        if (c > n - *k) {
            c = n - *k;
        }
        memcpy(sc->bw_h + sc->bw_got, p + *k, c);
        sc->bw_got = (uint8_t)(sc->bw_got + c);
        *k += c;
        sc->off += c;
    }
    if (sc->bw_got < sc->bw_need) {
        return false;
    }
    len = (int32_t)be32(sc->bw_h + 8);
    magic = (int8_t)sc->bw_h[16];
    if (len < 0 || (uint64_t)len > sc->bw_end - sc->bw_start - 12 ||
        (magic == 2 && len < KR_SCAN_BATCH_HDR - 12) ||
        (magic != 2 && len < 18 - 12) ||
        (magic != 0 && magic != 1 && magic != 2) ||
        (magic != 2 && (sc->bw_h[17] & 0x07u) != 0)) {
        /* malformed, or compressed magic 0/1 (its records are hidden
           inside one entry): uncountable, as kr_records_count says */
        sc->bw_bad = 1;
        sc->skip = sc->bw_end - sc->off;
        return true;
    }
    if (magic == 2 && sc->bw_need < KR_SCAN_BATCH_HDR) {
        sc->bw_need = KR_SCAN_BATCH_HDR;
        return true;
    }
    if (magic == 2) {
        count = (int32_t)be32(sc->bw_h + KR_SCAN_BATCH_HDR - 4);
        if (count < 0) {
            sc->bw_bad = 1;
            sc->skip = sc->bw_end - sc->off;
            return true;
        }
        sc->bw_n += (uint64_t)count;
    } else {
        sc->bw_n++;
    }
    blen = 12 + (uint64_t)len;
    sc->skip = sc->bw_start + blen - sc->off;
    sc->bw_start += blen;
    sc->bw_got = 0;
    sc->bw_need = 18;
    return true;
}

int
kr_scan_feed(struct kr_scan *sc, const uint8_t *p, size_t n, size_t *used)
{
    size_t k = 0;
    int rc = KR_OK;

    while (sc->status == KR_AGAIN && rc == KR_OK) {
        if (sc->skip > 0) {
            uint64_t t = sc->skip < n - k ? sc->skip : n - k;

            if (sc->cap_on && t > 0) {
                size_t room = sizeof(sc->cap) - sc->cap_len;
                size_t c = t < room ? (size_t)t : room;

                memcpy(sc->cap + sc->cap_len, p + k, c);
                sc->cap_len = (uint16_t)(sc->cap_len + c);
            }
            k += (size_t)t;
            sc->off += t;
            sc->skip -= t;
            if (sc->skip > 0) {
                break;
            }
            if (sc->cap_on) {
                cap_end(sc);
            }
        } else if (sc->rkind != R_NONE) {
            rc = take_value(sc, p, n, &k);
            if (rc != KR_OK || !sc->rdone) {
                break;
            }
            rc = got_value(sc);
        } else if (sc->bw_on) {
            if (!batch_take(sc, p, n, &k)) {
                break;
            }
        } else {
            rc = step(sc);
        }
    }
    if (sc->status == KR_AGAIN && sc->off >= sc->limit) {
        /* the machine needs bytes the frame does not have */
        (void)fail(sc, sc->off, "frame ends inside the message");
    }
    *used = k;
    return sc->status;
}

void
kr_scan_watch(struct kr_scan *sc, kr_scan_watch_fn fn, void *arg)
{
    sc->watch = fn;
    sc->watch_arg = arg;
    sc->wnext = 0;
}

void
kr_scan_count_records(struct kr_scan *sc, bool on)
{
    sc->count_records = on;
}

int64_t
kr_scan_records_so_far(const struct kr_scan *sc)
{
    if (!sc->bw_on) {
        return -2;
    }
    return sc->bw_bad ? -1 : (int64_t)sc->bw_n;
}

void
kr_scan_body_tags(struct kr_scan *sc, bool on)
{
    sc->body_tags = on;
}

uint64_t
kr_scan_skippable(const struct kr_scan *sc)
{
    return sc->status == KR_AGAIN && !sc->cap_on ? sc->skip : 0;
}

int
kr_scan_skip(struct kr_scan *sc, uint64_t n)
{
    size_t used;

    if (n > kr_scan_skippable(sc)) {
        return KR_ELIMIT;
    }
    sc->off += n;
    sc->skip -= n;
    /* what follows the skip may need no byte (a frame pops, the walk
       reaches the body's tagged fields) */
    return kr_scan_feed(sc, NULL, 0, &used);
}
