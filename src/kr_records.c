/*
 * kr_records.c - magic 0/1 message sets <-> RecordBatch v2 (legacy
 * translation, issue 10).  The formats and the rules are in
 * include/kr_records.h.
 *
 * Both directions parse their input into one array of records (offset,
 * timestamp, key and value as positions in a source buffer) reused for
 * each run, then write the output straight into the caller's buffer with
 * sizes computed first: no allocation per record.  Compressed payloads
 * are decompressed into, and recompressed from, scratch buffers of the
 * call (kr_compress).
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <isa-l/crc.h>

#include "kr_records.h"

#define V2_HEADER 61                /* RecordBatch header bytes */
#define V2_LENGTH_MIN 49            /* BatchLength of a batch of no record */
#define LOG_OVERHEAD 12             /* Offset int64 + Size int32 */
#define LEGACY_MIN_V0 14            /* crc magic attr keylen valuelen */
#define LEGACY_MIN_V1 22            /* + timestamp */

#define ATTR_TS_LOG_APPEND 0x08     /* both formats: timestamp type bit */
#define ATTR_CONTROL 0x20           /* RecordBatch attributes: control */

#define NO_TIMESTAMP (-1LL)

/* ---- CRCs ----------------------------------------------------------- */

uint32_t
kr_records_crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;

    while (n > 0) {
        int k = n > (size_t)INT_MAX ? INT_MAX : (int)n;

        c = crc32_iscsi((unsigned char *)(uintptr_t)p, k, c);
        p += k;
        n -= (size_t)k;
    }
    return c ^ 0xFFFFFFFFu;
}

uint32_t
kr_records_crc32(const uint8_t *p, size_t n)
{
    return crc32_gzip_refl(0, p, n);
}

/* ---- big-endian and varints ----------------------------------------- */

static inline uint32_t
rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t
rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) << 32 | rd32(p + 4);
}

static inline uint16_t
rd16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint8_t *
wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static inline uint8_t *
wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return p + 4;
}

static inline uint8_t *
wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)(v >> 32));
    return wr32(p + 4, (uint32_t)v);
}

/* a - b and a + b wrapping as Java's long arithmetic (wire values may be
 * anything: DefaultRecord's deltas wrap the same way) */
static inline int64_t
wsub(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int64_t
wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline uint64_t
zz64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline unsigned
uvar_size(uint64_t v)
{
    unsigned n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline unsigned
var_size(int64_t v)
{
    return uvar_size(zz64(v));
}

static inline uint8_t *
wr_uvar(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *
wr_var(uint8_t *p, int64_t v)
{
    return wr_uvar(p, zz64(v));
}

/*
 * A zigzag varint of at most maxb bytes (5 for Kafka's varint, 10 for
 * its varlong) from p[*pos..end): false when truncated or too long.
 */
static inline bool
rd_var(const uint8_t *p, size_t end, size_t *pos, unsigned maxb,
       int64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    size_t i = *pos;

    for (unsigned k = 0; k < maxb; k++) {
        if (i >= end) {
            return false;
        }
        uint8_t b = p[i++];

        v |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            *pos = i;
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return true;
        }
        shift += 7;
    }
    return false;
}

/* ---- the call's state ----------------------------------------------- */

/*
 * A record parsed from the input: key and value are positions in the
 * source the run's records come from (the input, or the decompressed
 * scratch: see struct run); a length of -1 is null.
 */
struct rec {
    int64_t offset;
    int64_t ts;
    size_t key, val;
    const uint8_t *kp, *vp;         /* down: where key and value are */
    int32_t klen, vlen;
    uint32_t size;                  /* up: the record's body size in the
                                       batch being planned */
};

struct conv {
    struct rec *r;                  /* the current run's records */
    size_t nr, cap;
    struct kr_bytes dz;             /* decompressed payloads */
    struct kr_bytes raw;            /* uncompressed payload to compress */
    struct kr_bytes z;              /* compressed payload */
    struct kr_bytes bounce;         /* down, segmented input: a batch
                                       copied whole, or the records that
                                       straddle two segments */
    char *why;
    size_t whylen;
};

/*
 * The scratch buffers a thread keeps between calls (a large one malloc'd
 * and freed per call would be mmap'd, page-faulted in and unmapped every
 * time: most of a small set's cost).  Each is kept up to KEEP_BYTES and
 * freed past it; all freed at thread exit by a pthread key's destructor.
 */
#define KEEP_BYTES (2u << 20)

struct conv_tls {
    struct rec *r;
    size_t cap;
    struct kr_bytes dz, raw, z, bounce;
};

static pthread_key_t conv_key;
static pthread_once_t conv_once = PTHREAD_ONCE_INIT;
static bool conv_key_ok;

static void
conv_tls_free(void *arg)
{
    struct conv_tls *t = arg;

    if (t != NULL) {
        free(t->r);
        kr_bytes_free(&t->dz);
        kr_bytes_free(&t->raw);
        kr_bytes_free(&t->z);
        kr_bytes_free(&t->bounce);
        free(t);
    }
}

static void
conv_key_init(void)
{
    conv_key_ok = pthread_key_create(&conv_key, conv_tls_free) == 0;
}

/* The calling thread's kept buffers (NULL: none can be kept). */
static struct conv_tls *
conv_tls(void)
{
    struct conv_tls *t;

    if (pthread_once(&conv_once, conv_key_init) != 0 || !conv_key_ok) {
        return NULL;
    }
    t = pthread_getspecific(conv_key);
    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t != NULL && pthread_setspecific(conv_key, t) != 0) {
            free(t);
            t = NULL;
        }
    }
    return t;
}

/* c's buffers: the thread's kept ones, emptied. */
static void
conv_init(struct conv *c)
{
    struct conv_tls *t = conv_tls();

    if (t != NULL) {
        c->r = t->r;
        c->cap = t->cap;
        c->dz = t->dz;
        c->raw = t->raw;
        c->z = t->z;
        c->bounce = t->bounce;
        *t = (struct conv_tls){ 0 };
    }
    c->nr = 0;
    c->dz.len = c->raw.len = c->z.len = c->bounce.len = 0;
}

static void
keep_bytes(struct kr_bytes *b)
{
    if (b->cap > KEEP_BYTES) {
        kr_bytes_free(b);
    }
}

/* c's buffers back to the thread (those past KEEP_BYTES freed). */
static void
conv_free(struct conv *c)
{
    struct conv_tls *t = conv_tls();

    if (c->cap * sizeof(*c->r) > KEEP_BYTES) {
        free(c->r);
        c->r = NULL;
        c->cap = 0;
    }
    keep_bytes(&c->dz);
    keep_bytes(&c->raw);
    keep_bytes(&c->z);
    keep_bytes(&c->bounce);
    if (t == NULL) {
        free(c->r);
        kr_bytes_free(&c->dz);
        kr_bytes_free(&c->raw);
        kr_bytes_free(&c->z);
        kr_bytes_free(&c->bounce);
        return;
    }
    t->r = c->r;                /* t's were taken by conv_init */
    t->cap = c->cap;
    t->dz = c->dz;
    t->raw = c->raw;
    t->z = c->z;
    t->bounce = c->bounce;
}

static KR_PRINTF(3, 4) enum kr_records_outcome
fail(struct conv *c, enum kr_records_outcome o, const char *fmt, ...)
{
    if (c->why != NULL && c->whylen > 0) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->why, c->whylen, fmt, ap);
        va_end(ap);
    }
    return o;
}

static struct rec *
rec_add(struct conv *c)
{
    if (c->nr == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        struct rec *nr = realloc(c->r, ncap * sizeof(*nr));

        if (nr == NULL) {
            return NULL;
        }
        c->r = nr;
        c->cap = ncap;
    }
    return &c->r[c->nr++];
}

static enum kr_records_outcome
z_outcome(struct conv *c, enum kr_z_outcome z, const char *what,
          size_t at, int64_t off, int codec)
{
    switch (z) {
    case KR_Z_OK:
        return KR_RECORDS_OK;
    case KR_Z_TOO_LARGE:
        return fail(c, KR_RECORDS_TOO_LARGE,
                    "%s at byte %zu (offset %lld): %s payload decompresses "
                    "past the limit", what, at, (long long)off,
                    kr_compression_name(codec));
    case KR_Z_NOMEM:
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    case KR_Z_UNSUPPORTED:
        return fail(c, KR_RECORDS_UNSUPPORTED_COMPRESSION,
                    "%s at byte %zu (offset %lld): codec %s not supported",
                    what, at, (long long)off, kr_compression_name(codec));
    case KR_Z_CORRUPT:
    default:
        return fail(c, KR_RECORDS_BAD_COMPRESSION,
                    "%s at byte %zu (offset %lld): %s payload does not "
                    "decompress", what, at, (long long)off,
                    kr_compression_name(codec));
    }
}

const char *
kr_records_outcome_name(enum kr_records_outcome o)
{
    switch (o) {
    case KR_RECORDS_OK:
        return "ok";
    case KR_RECORDS_CORRUPT:
        return "corrupt";
    case KR_RECORDS_BAD_COMPRESSION:
        return "bad compression";
    case KR_RECORDS_TOO_LARGE:
        return "too large";
    case KR_RECORDS_UNSUPPORTED_COMPRESSION:
        return "unsupported compression";
    case KR_RECORDS_NOMEM:
        return "out of memory";
    }
    return "unknown";
}

/* ---- magic 0/1 messages --------------------------------------------- */

/* One magic 0/1 message, parsed (positions relative to its buffer). */
struct legacy {
    int64_t offset;
    int8_t magic;
    uint8_t attr;
    int64_t ts;
    size_t key, val;
    int32_t klen, vlen;
};

/*
 * The entry at buf[pos..end): Offset, Size and a whole message with its
 * CRC checked.  *next is the position after it.  what names the set for
 * why ("message", "inner message").
 */
static enum kr_records_outcome
legacy_parse(struct conv *c, const uint8_t *buf, size_t pos, size_t end,
             const char *what, struct legacy *m, size_t *next)
{
    size_t left = end - pos;

    if (left < LOG_OVERHEAD) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu: truncated entry header (%zu bytes)",
                    what, pos, left);
    }
    m->offset = (int64_t)rd64(buf + pos);
    int32_t size = (int32_t)rd32(buf + pos + 8);

    if (size < LEGACY_MIN_V0) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu (offset %lld): size %d below the "
                    "minimum %d", what, pos, (long long)m->offset, size,
                    LEGACY_MIN_V0);
    }
    if ((size_t)size > left - LOG_OVERHEAD) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu (offset %lld): size %d past the end "
                    "(%zu bytes left)", what, pos, (long long)m->offset,
                    size, left - LOG_OVERHEAD);
    }
    size_t p = pos + LOG_OVERHEAD, mend = p + (size_t)size;
    uint32_t crc = rd32(buf + p);

    m->magic = (int8_t)buf[p + 4];
    m->attr = buf[p + 5];
    if (m->magic != 0 && m->magic != 1) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu (offset %lld): magic %d", what, pos,
                    (long long)m->offset, m->magic);
    }
    uint32_t got = kr_records_crc32(buf + p + 4, (size_t)size - 4);

    if (got != crc) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu (offset %lld): CRC 0x%08x, computed "
                    "0x%08x", what, pos, (long long)m->offset, crc, got);
    }
    p += 6;
    if (m->magic == 1) {
        if (size < LEGACY_MIN_V1) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "%s at byte %zu (offset %lld): size %d below the "
                        "magic 1 minimum %d", what, pos,
                        (long long)m->offset, size, LEGACY_MIN_V1);
        }
        m->ts = (int64_t)rd64(buf + p);
        p += 8;
    } else {
        m->ts = NO_TIMESTAMP;
    }
    m->klen = (int32_t)rd32(buf + p);
    p += 4;
    if (m->klen < -1 || (m->klen > 0 && (size_t)m->klen > mend - p - 4)) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu (offset %lld): key length %d does not "
                    "fit its size %d", what, pos, (long long)m->offset,
                    m->klen, size);
    }
    m->key = p;
    if (m->klen > 0) {
        p += (size_t)m->klen;
    }
    m->vlen = (int32_t)rd32(buf + p);
    p += 4;
    if (m->vlen < -1 || (m->vlen > 0 && (size_t)m->vlen != mend - p) ||
        (m->vlen <= 0 && p != mend)) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "%s at byte %zu (offset %lld): value length %d does "
                    "not match its size %d", what, pos, (long long)m->offset,
                    m->vlen, size);
    }
    m->val = p;
    *next = mend;
    return KR_RECORDS_OK;
}

/* Bytes of a magic 0/1 entry (with Offset and Size) for key and value. */
static inline size_t
legacy_entry_size(int magic, int32_t klen, int32_t vlen)
{
    return (size_t)LOG_OVERHEAD + (magic ? LEGACY_MIN_V1 : LEGACY_MIN_V0) +
           (size_t)(klen > 0 ? klen : 0) + (size_t)(vlen > 0 ? vlen : 0);
}

/* Write a magic 0/1 entry at p (room checked by the caller); the end. */
static uint8_t *
legacy_write(uint8_t *p, int magic, int64_t offset, uint8_t attr,
             int64_t ts, const uint8_t *key, int32_t klen,
             const uint8_t *val, int32_t vlen)
{
    size_t size = legacy_entry_size(magic, klen, vlen) - LOG_OVERHEAD;
    uint8_t *crcp, *q;

    q = wr64(p, (uint64_t)offset);
    q = wr32(q, (uint32_t)size);
    crcp = q;
    q += 4;
    *q++ = (uint8_t)magic;
    *q++ = attr;
    if (magic) {
        q = wr64(q, (uint64_t)ts);
    }
    q = wr32(q, (uint32_t)klen);
    if (klen > 0) {
        memcpy(q, key, (size_t)klen);
        q += klen;
    }
    q = wr32(q, (uint32_t)vlen);
    if (vlen > 0) {
        memcpy(q, val, (size_t)vlen);
        q += vlen;
    }
    wr32(crcp, kr_records_crc32(crcp + 4, (size_t)(q - crcp - 4)));
    return q;
}

/* ---- up: magic 0/1 -> RecordBatch v2 -------------------------------- */

/* The run of records being gathered into batches. */
struct run {
    int codec;                      /* -1: none yet */
    bool lat;                       /* LogAppendTime */
    bool in_dz;                     /* keys/values in c->dz, else input */
};

/* Body size of record r at offset delta od with timestamp delta td. */
static inline uint32_t
v2_body_size(const struct rec *r, int64_t od, int64_t td)
{
    size_t s = 1 + var_size(td) + var_size(od) + var_size(r->klen) +
               var_size(r->vlen) + 1;

    s += (size_t)(r->klen > 0 ? r->klen : 0);
    s += (size_t)(r->vlen > 0 ? r->vlen : 0);
    return (uint32_t)s;
}

/*
 * The bytes of records r[a..b) as a batch starting at a (sizes set in
 * r[].size), the records' largest timestamp in *maxts.
 */
static size_t
v2_plan(struct rec *r, size_t a, size_t b, int64_t *maxts)
{
    int64_t base = r[a].ts, mx = NO_TIMESTAMP;
    size_t tot = 0;

    for (size_t i = a; i < b; i++) {
        r[i].size = v2_body_size(&r[i], (int64_t)(i - a),
                                  wsub(r[i].ts, base));
        tot += uvar_size(zz64(r[i].size)) + r[i].size;
        if (r[i].ts > mx) {
            mx = r[i].ts;
        }
    }
    *maxts = mx;
    return tot;
}

/* Write records r[a..b) (sizes planned) at p; the end. */
static uint8_t *
v2_put_records(uint8_t *p, const struct rec *r, size_t a, size_t b,
               const uint8_t *src)
{
    int64_t base = r[a].ts;

    for (size_t i = a; i < b; i++) {
        const struct rec *x = &r[i];

        p = wr_var(p, x->size);
        *p++ = 0;
        p = wr_var(p, wsub(x->ts, base));
        p = wr_var(p, (int64_t)(i - a));
        p = wr_var(p, x->klen);
        if (x->klen > 0) {
            memcpy(p, src + x->key, (size_t)x->klen);
            p += x->klen;
        }
        p = wr_var(p, x->vlen);
        if (x->vlen > 0) {
            memcpy(p, src + x->val, (size_t)x->vlen);
            p += x->vlen;
        }
        *p++ = 0;                   /* no headers */
    }
    return p;
}

/* Fill the header of the batch at p holding len bytes in all. */
static void
v2_header(uint8_t *p, size_t len, int codec, bool lat, int32_t last_delta,
          int64_t base_ts, int64_t max_ts, int32_t count)
{
    uint16_t attr = (uint16_t)(codec | (lat ? ATTR_TS_LOG_APPEND : 0));
    uint8_t *q = p;

    q = wr64(q, 0);                             /* BaseOffset */
    q = wr32(q, (uint32_t)(len - LOG_OVERHEAD)); /* BatchLength */
    q = wr32(q, UINT32_MAX);                    /* PartitionLeaderEpoch */
    *q++ = 2;                                   /* Magic */
    q += 4;                                     /* Crc, below */
    q = wr16(q, attr);
    q = wr32(q, (uint32_t)last_delta);
    q = wr64(q, (uint64_t)base_ts);
    q = wr64(q, (uint64_t)max_ts);
    q = wr64(q, UINT64_MAX);                    /* ProducerId -1 */
    q = wr16(q, UINT16_MAX);                    /* ProducerEpoch -1 */
    q = wr32(q, UINT32_MAX);                    /* BaseSequence -1 */
    wr32(q, (uint32_t)count);
    wr32(p + 17, kr_records_crc32c(p + 21, len - 21));
}

/* One uncompressed batch of r[a..b) appended to out. */
static enum kr_records_outcome
up_put_plain(struct conv *c, struct kr_bytes *out, const struct run *ru,
             const uint8_t *src, size_t a, size_t b, size_t body,
             int64_t maxts)
{
    size_t len = V2_HEADER + body;

    if (len - LOG_OVERHEAD > INT32_MAX) {
        return fail(c, KR_RECORDS_TOO_LARGE,
                    "a batch of %zu bytes (BatchLength is an int32)", len);
    }
    if (!kr_bytes_reserve(out, len)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    uint8_t *p = out->p + out->len;

    v2_put_records(p + V2_HEADER, c->r, a, b, src);
    v2_header(p, len, 0, ru->lat, (int32_t)(b - a - 1), c->r[a].ts, maxts,
              (int32_t)(b - a));
    out->len += len;
    return KR_RECORDS_OK;
}

/*
 * One compressed batch of r[a..b) built in c->raw/c->z; *len its size.
 * It is not appended yet (up_compressed decides).
 */
static enum kr_records_outcome
up_build_z(struct conv *c, const struct run *ru, const uint8_t *src,
           size_t a, size_t b, size_t *len)
{
    int64_t maxts;
    size_t body = v2_plan(c->r, a, b, &maxts);

    c->raw.len = 0;
    if (!kr_bytes_reserve(&c->raw, body)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    v2_put_records(c->raw.p, c->r, a, b, src);
    c->raw.len = body;
    c->z.len = 0;
    if (!kr_bytes_reserve(&c->z, V2_HEADER)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    c->z.len = V2_HEADER;
    enum kr_z_outcome z = kr_compress(ru->codec, 0, c->raw.p, c->raw.len,
                                      &c->z);

    if (z != KR_Z_OK) {
        return z == KR_Z_NOMEM ? fail(c, KR_RECORDS_NOMEM, "out of memory")
                               : fail(c, KR_RECORDS_BAD_COMPRESSION,
                                      "compressing a batch with %s: %s",
                                      kr_compression_name(ru->codec),
                                      kr_z_outcome_name(z));
    }
    if (c->z.len - LOG_OVERHEAD > INT32_MAX) {
        return fail(c, KR_RECORDS_TOO_LARGE,
                    "a batch of %zu bytes (BatchLength is an int32)",
                    c->z.len);
    }
    v2_header(c->z.p, c->z.len, ru->codec, ru->lat, (int32_t)(b - a - 1),
              c->r[a].ts, maxts, (int32_t)(b - a));
    *len = c->z.len;
    return KR_RECORDS_OK;
}

/* Append c->z (a built batch) to out. */
static enum kr_records_outcome
up_take_z(struct conv *c, struct kr_bytes *out, struct kr_records_stats *st)
{
    if (!kr_bytes_add(out, c->z.p, c->z.len)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    st->batches_out++;
    return KR_RECORDS_OK;
}

/*
 * r[a..b) as compressed batches of at most limit bytes: built whole;
 * too large, split in halves (a single record goes alone).
 */
static enum kr_records_outcome
up_z_halves(struct conv *c, struct kr_bytes *out, const struct run *ru,
            const uint8_t *src, size_t a, size_t b, size_t limit,
            struct kr_records_stats *st)
{
    size_t len;
    enum kr_records_outcome o = up_build_z(c, ru, src, a, b, &len);

    if (o != KR_RECORDS_OK) {
        return o;
    }
    if (limit == 0 || len <= limit || b - a == 1) {
        return up_take_z(c, out, st);
    }
    size_t mid = a + (b - a) / 2;

    o = up_z_halves(c, out, ru, src, a, mid, limit, st);
    return o != KR_RECORDS_OK ? o
                              : up_z_halves(c, out, ru, src, mid, b, limit, st);
}

/* The run's records (c->r[0..nr)) written as batches; the run emptied. */
static enum kr_records_outcome
up_flush(struct conv *c, struct run *ru, const uint8_t *set,
         const struct kr_records_up_opts *o, struct kr_bytes *out,
         struct kr_records_stats *st)
{
    const uint8_t *src = ru->in_dz ? c->dz.p : set;
    size_t limit = o != NULL ? o->max_batch_bytes : 0, n = c->nr;
    enum kr_records_outcome oc = KR_RECORDS_OK;

    if (n == 0) {
        return KR_RECORDS_OK;
    }
    st->records_out += n;
    if (ru->codec == KR_COMPRESSION_NONE) {
        size_t i = 0;

        while (i < n && oc == KR_RECORDS_OK) {
            size_t a = i, body = 0;
            int64_t base = c->r[a].ts, mx = NO_TIMESTAMP;

            for (; i < n; i++) {
                struct rec *x = &c->r[i];
                uint32_t s = v2_body_size(x, (int64_t)(i - a),
                                          wsub(x->ts, base));
                size_t t = uvar_size(zz64(s)) + s;

                if (limit != 0 && i > a && V2_HEADER + body + t > limit) {
                    break;
                }
                x->size = s;
                body += t;
                if (x->ts > mx) {
                    mx = x->ts;
                }
            }
            oc = up_put_plain(c, out, ru, src, a, i, body, mx);
            st->batches_out++;
        }
    } else {
        size_t len;

        oc = up_build_z(c, ru, src, 0, n, &len);
        if (oc == KR_RECORDS_OK && (limit == 0 || len <= limit || n == 1)) {
            oc = up_take_z(c, out, st);
        } else if (oc == KR_RECORDS_OK) {
            /* Estimate: the ratio of the whole, 10% of margin; chunks by
             * their uncompressed size, each halved if still too large. */
            double ratio = (double)(len - V2_HEADER) / (double)c->raw.len;
            double room = (double)(limit > V2_HEADER ? limit - V2_HEADER : 1);
            size_t target = (size_t)(room / (ratio > 0.01 ? ratio : 0.01) *
                                     0.9);
            size_t i = 0;

            while (i < n && oc == KR_RECORDS_OK) {
                size_t a = i, body = 0;
                int64_t base = c->r[a].ts;

                for (; i < n; i++) {
                    uint32_t s = v2_body_size(&c->r[i], (int64_t)(i - a),
                                              wsub(c->r[i].ts, base));
                    size_t t = uvar_size(zz64(s)) + s;

                    if (i > a && body + t > target) {
                        break;
                    }
                    body += t;
                }
                oc = up_z_halves(c, out, ru, src, a, i, limit, st);
            }
        }
    }
    c->nr = 0;
    c->dz.len = 0;
    ru->codec = -1;
    return oc;
}

/* Start a run of codec/lat, flushing the current one when it differs. */
static enum kr_records_outcome
up_run(struct conv *c, struct run *ru, int codec, bool lat, bool in_dz,
       const uint8_t *set, const struct kr_records_up_opts *o,
       struct kr_bytes *out, struct kr_records_stats *st)
{
    if (ru->codec == codec && ru->lat == lat && ru->in_dz == in_dz) {
        return KR_RECORDS_OK;
    }
    enum kr_records_outcome oc = up_flush(c, ru, set, o, out, st);

    ru->codec = codec;
    ru->lat = lat;
    ru->in_dz = in_dz;
    return oc;
}

/* A set of magic 2 batches, copied after checking framing and CRCs. */
static enum kr_records_outcome
up_copy_v2(struct conv *c, const uint8_t *set, size_t n,
           struct kr_bytes *out, struct kr_records_stats *st)
{
    size_t pos = 0, len, nb = 0;

    while (pos < n) {
        if (!kr_records_batch_next(set, n, pos, &len)) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "batch at byte %zu: not a whole magic 2 batch", pos);
        }
        uint32_t crc = rd32(set + pos + 17);
        uint32_t got = kr_records_crc32c(set + pos + 21, len - 21);

        if (crc != got) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "batch at byte %zu: CRC-32C 0x%08x, computed "
                        "0x%08x", pos, crc, got);
        }
        pos += len;
        nb++;
    }
    if (!kr_bytes_add(out, set, n)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    st->batches_in += nb;
    st->batches_out += nb;
    return KR_RECORDS_OK;
}

/* The inner messages of a wrapper, decompressed at c->dz[from..). */
static enum kr_records_outcome
up_inner(struct conv *c, const struct legacy *w, size_t wpos, size_t from,
         struct kr_records_stats *st)
{
    size_t pos = from, end = c->dz.len, count = 0;
    bool lat = w->magic == 1 && (w->attr & ATTR_TS_LOG_APPEND);

    while (pos < end) {
        struct legacy m;
        size_t next;
        enum kr_records_outcome o = legacy_parse(c, c->dz.p, pos, end,
                                                 "inner message", &m, &next);

        if (o != KR_RECORDS_OK) {
            /* name the wrapper too */
            if (c->why != NULL && c->whylen > 0) {
                size_t l = strlen(c->why);

                snprintf(c->why + l, c->whylen - l,
                         " (in the wrapper at byte %zu, offset %lld)", wpos,
                         (long long)w->offset);
            }
            return o;
        }
        if (m.magic != w->magic) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "wrapper at byte %zu (offset %lld): inner message "
                        "of magic %d in a magic %d wrapper", wpos,
                        (long long)w->offset, m.magic, w->magic);
        }
        if ((m.attr & 7) != 0) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "wrapper at byte %zu (offset %lld): compressed inner "
                        "message (%s)", wpos, (long long)w->offset,
                        kr_compression_name(m.attr & 7));
        }
        struct rec *r = rec_add(c);

        if (r == NULL) {
            return fail(c, KR_RECORDS_NOMEM, "out of memory");
        }
        r->offset = m.offset;
        r->ts = lat ? w->ts : m.ts;
        r->key = m.key;
        r->klen = m.klen;
        r->val = m.val;
        r->vlen = m.vlen;
        count++;
        pos = next;
    }
    if (count == 0) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "wrapper at byte %zu (offset %lld): no inner message",
                    wpos, (long long)w->offset);
    }
    st->messages_in += count;
    return KR_RECORDS_OK;
}

static enum kr_records_outcome
up_convert(struct conv *c, const uint8_t *set, size_t n,
           const struct kr_records_up_opts *o, struct kr_bytes *out,
           struct kr_records_stats *st)
{
    struct run ru = { .codec = -1 };
    size_t pos = 0, maxu = o != NULL && o->max_uncompressed
                               ? o->max_uncompressed : SIZE_MAX;
    size_t inflated = 0;            /* the set's wrappers decompressed:
                                       maxu bounds their sum */
    enum kr_records_outcome oc;

    if (n >= 17 && set[16] == 2) {
        return up_copy_v2(c, set, n, out, st);
    }
    while (pos < n) {
        struct legacy m;
        size_t next;
        int codec;

        oc = legacy_parse(c, set, pos, n, "message", &m, &next);
        if (oc != KR_RECORDS_OK) {
            return oc;
        }
        codec = m.attr & 7;
        bool lat = m.magic == 1 && (m.attr & ATTR_TS_LOG_APPEND);

        if (codec == KR_COMPRESSION_NONE) {
            oc = up_run(c, &ru, codec, lat, false, set, o, out, st);
            if (oc != KR_RECORDS_OK) {
                return oc;
            }
            struct rec *r = rec_add(c);

            if (r == NULL) {
                return fail(c, KR_RECORDS_NOMEM, "out of memory");
            }
            r->offset = m.offset;
            r->ts = m.ts;
            r->key = m.key;
            r->klen = m.klen;
            r->val = m.val;
            r->vlen = m.vlen;
            if (ru.codec == codec && c->nr == 1) {
                st->batches_in++;
            }
            st->messages_in++;
        } else {
            if (codec == KR_COMPRESSION_ZSTD) {
                return fail(c, KR_RECORDS_UNSUPPORTED_COMPRESSION,
                            "message at byte %zu (offset %lld): zstd in a "
                            "magic %d message", pos, (long long)m.offset,
                            m.magic);
            }
            if (codec > KR_COMPRESSION_ZSTD) {
                return fail(c, KR_RECORDS_CORRUPT,
                            "message at byte %zu (offset %lld): unknown "
                            "codec %d", pos, (long long)m.offset, codec);
            }
            if (m.vlen < 0) {
                return fail(c, KR_RECORDS_CORRUPT,
                            "wrapper at byte %zu (offset %lld): null value",
                            pos, (long long)m.offset);
            }
            oc = up_run(c, &ru, codec, lat, true, set, o, out, st);
            if (oc != KR_RECORDS_OK) {
                return oc;
            }
            size_t from = c->dz.len;
            enum kr_z_outcome z = kr_decompress(
                codec, m.magic == 0 ? KR_Z_LZ4_KAFKA1493 : 0, set + m.val,
                (size_t)m.vlen, maxu - inflated, &c->dz);

            if (z != KR_Z_OK) {
                return z_outcome(c, z, "wrapper", pos, m.offset, codec);
            }
            inflated += c->dz.len - from;
            st->bytes_inflated += c->dz.len - from;
            oc = up_inner(c, &m, pos, from, st);
            if (oc != KR_RECORDS_OK) {
                return oc;
            }
            st->batches_in++;
        }
        pos = next;
    }
    return up_flush(c, &ru, set, o, out, st);
}

enum kr_records_outcome
kr_records_up(const uint8_t *set, size_t n,
              const struct kr_records_up_opts *o, struct kr_bytes *out,
              struct kr_records_stats *st, char *why, size_t whylen)
{
    struct conv c = { .why = why, .whylen = whylen };
    struct kr_records_stats s = { 0 };
    size_t len0 = out->len;
    enum kr_records_outcome oc;

    if (why != NULL && whylen > 0) {
        why[0] = '\0';
    }
    conv_init(&c);
    oc = up_convert(&c, set, n, o, out, &s);
    conv_free(&c);
    if (oc != KR_RECORDS_OK) {
        out->len = len0;
        return oc;
    }
    if (st != NULL) {
        s.bytes_in = n;
        s.bytes_out = out->len - len0;
        st->messages_in += s.messages_in;
        st->records_out += s.records_out;
        st->batches_in += s.batches_in;
        st->batches_out += s.batches_out;
        st->bytes_in += s.bytes_in;
        st->bytes_out += s.bytes_out;
        st->bytes_inflated += s.bytes_inflated;
    }
    return KR_RECORDS_OK;
}

bool
kr_records_batch_next(const uint8_t *buf, size_t n, size_t pos, size_t *len)
{
    if (pos >= n || n - pos < V2_HEADER) {
        return false;
    }
    int32_t bl = (int32_t)rd32(buf + pos + 8);

    if (bl < V2_LENGTH_MIN || (size_t)bl > n - pos - LOG_OVERHEAD ||
        buf[pos + 16] != 2) {
        return false;
    }
    *len = LOG_OVERHEAD + (size_t)bl;
    return true;
}

/* ---- down: RecordBatch v2 -> magic 0/1 ------------------------------ */

/* What one input batch or entry came to, for the byte limit. */
struct down_batch {
    int codec;                      /* of the output: none or a wrapper's */
    bool lat;
    int64_t max_ts;                 /* LogAppendTime: the batch's */
    size_t nrec;                    /* records in c->r */
};

/*
 * The body of one v2 record, p[i..rend) (after its Length varint), into
 * r: offset and timestamp from the batch's base (LogAppendTime: the
 * batch's MaxTimestamp), key and value where they are in p (kp, vp; key,
 * val their positions).  false when malformed.
 */
static bool
down_rec(const uint8_t *p, size_t i, size_t rend, int64_t base_off,
         int64_t base_ts, bool lat, int64_t max_ts, struct rec *r)
{
    int64_t td, od, kl, vl, hc;

    i++;                            /* attributes */
    if (i > rend ||
        !rd_var(p, rend, &i, 10, &td) || !rd_var(p, rend, &i, 5, &od) ||
        !rd_var(p, rend, &i, 5, &kl) || kl < -1 ||
        (kl > 0 && (uint64_t)kl > rend - i)) {
        return false;
    }
    size_t kpos = i;

    i += kl > 0 ? (size_t)kl : 0;
    if (!rd_var(p, rend, &i, 5, &vl) || vl < -1 ||
        (vl > 0 && (uint64_t)vl > rend - i)) {
        return false;
    }
    size_t vpos = i;

    i += vl > 0 ? (size_t)vl : 0;
    if (!rd_var(p, rend, &i, 5, &hc) || hc < 0) {
        return false;
    }
    for (int64_t h = 0; h < hc; h++) {
        int64_t hk, hv;

        if (!rd_var(p, rend, &i, 5, &hk) || hk < 0 ||
            (uint64_t)hk > rend - i) {
            return false;
        }
        i += (size_t)hk;
        if (!rd_var(p, rend, &i, 5, &hv) || hv < -1 ||
            (hv > 0 && (uint64_t)hv > rend - i)) {
            return false;
        }
        i += hv > 0 ? (size_t)hv : 0;
    }
    if (i != rend) {
        return false;
    }
    r->offset = wadd(base_off, od);
    r->ts = lat ? max_ts : wadd(base_ts, td);
    r->key = kpos;
    r->klen = (int32_t)kl;
    r->kp = p + kpos;
    r->val = vpos;
    r->vlen = (int32_t)vl;
    r->vp = p + vpos;
    return true;
}

/*
 * Parse the records of the v2 batch at in[pos..pos+len) (CRC checked by
 * the caller) into c->r, decompressing into c->dz when compressed.
 * *src is where keys and values are.
 */
static enum kr_records_outcome
down_parse_v2(struct conv *c, const uint8_t *in, size_t pos, size_t len,
              int codec, size_t maxu, const uint8_t **src)
{
    const uint8_t *b = in + pos;
    int64_t base_off = (int64_t)rd64(b);
    int64_t base_ts = (int64_t)rd64(b + 27);
    int64_t max_ts = (int64_t)rd64(b + 35);
    int32_t count = (int32_t)rd32(b + 57);
    bool lat = rd16(b + 21) & ATTR_TS_LOG_APPEND;
    const uint8_t *p;
    size_t i, end;

    if (count < 0) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): record count %d", pos,
                    (long long)base_off, count);
    }
    if (codec == KR_COMPRESSION_NONE) {
        p = in;
        i = pos + V2_HEADER;
        end = pos + len;
    } else {
        c->dz.len = 0;
        enum kr_z_outcome z = kr_decompress(codec, 0, b + V2_HEADER,
                                            len - V2_HEADER, maxu, &c->dz);

        if (z != KR_Z_OK) {
            return z_outcome(c, z, "batch", pos, base_off, codec);
        }
        p = c->dz.p;
        i = 0;
        end = c->dz.len;
    }
    *src = p;
    c->nr = 0;
    /* each record takes at least 7 bytes: no count larger than that */
    if ((size_t)count > (end - i) / 7 + 1) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): record count %d does "
                    "not fit %zu bytes", pos, (long long)base_off, count,
                    end - i);
    }
    for (int32_t k = 0; k < count; k++) {
        int64_t rl;
        size_t rs = i;

        if (!rd_var(p, end, &i, 5, &rl) || rl < 6 ||
            (uint64_t)rl > end - i) {
            goto bad;
        }
        size_t rend = i + (size_t)rl;
        struct rec *r = rec_add(c);

        if (r == NULL) {
            return fail(c, KR_RECORDS_NOMEM, "out of memory");
        }
        if (!down_rec(p, i, rend, base_off, base_ts, lat, max_ts, r)) {
            c->nr--;
            goto bad;
        }
        i = rend;
        continue;
bad:
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): record %d of %d "
                    "malformed (at byte %zu of the %s records)", pos,
                    (long long)base_off, k, count, rs,
                    codec ? "decompressed" : "batch's");
    }
    if (i != end) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): %zu bytes after its "
                    "%d records", pos, (long long)base_off, end - i, count);
    }
    return KR_RECORDS_OK;
}

/*
 * Write c->r (keys and values at their kp, vp) as magic messages appended
 * to out:
 * uncompressed (records below fetch_offset dropped when drop) or one
 * wrapper of codec.  *whole gets the number of messages written.
 */
static enum kr_records_outcome
down_put(struct conv *c, const struct down_batch *db,
         int magic, int64_t fetch_offset, bool drop, struct kr_bytes *out,
         struct kr_records_stats *st, size_t *written)
{
    uint8_t attr = magic == 1 && db->lat ? ATTR_TS_LOG_APPEND : 0;
    size_t need = 0, nw = 0;

    for (size_t i = 0; i < c->nr; i++) {
        need += legacy_entry_size(magic, c->r[i].klen, c->r[i].vlen);
    }
    if (db->codec == KR_COMPRESSION_NONE) {
        if (!kr_bytes_reserve(out, need)) {
            return fail(c, KR_RECORDS_NOMEM, "out of memory");
        }
        uint8_t *p = out->p + out->len;

        for (size_t i = 0; i < c->nr; i++) {
            const struct rec *r = &c->r[i];

            if (drop && r->offset < fetch_offset) {
                st->dropped_below_offset++;
                continue;
            }
            p = legacy_write(p, magic, r->offset, attr, r->ts,
                             r->kp, r->klen, r->vp, r->vlen);
            nw++;
        }
        out->len = (size_t)(p - out->p);
        *written = nw;
        return KR_RECORDS_OK;
    }

    /* one wrapper */
    int64_t first = c->r[0].offset, last = c->r[c->nr - 1].offset;
    int64_t mx = NO_TIMESTAMP;

    c->raw.len = 0;
    if (!kr_bytes_reserve(&c->raw, need)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    uint8_t *p = c->raw.p;

    for (size_t i = 0; i < c->nr; i++) {
        const struct rec *r = &c->r[i];

        if (r->ts > mx) {
            mx = r->ts;
        }
        p = legacy_write(p, magic,
                         magic == 1 ? wsub(r->offset, first) : r->offset,
                         attr, r->ts, r->kp, r->klen, r->vp, r->vlen);
    }
    c->raw.len = need;
    c->z.len = 0;
    enum kr_z_outcome z = kr_compress(db->codec,
                                      magic == 0 ? KR_Z_LZ4_KAFKA1493 : 0,
                                      c->raw.p, c->raw.len, &c->z);

    if (z != KR_Z_OK) {
        return z == KR_Z_NOMEM ? fail(c, KR_RECORDS_NOMEM, "out of memory")
                               : fail(c, KR_RECORDS_BAD_COMPRESSION,
                                      "compressing a wrapper with %s: %s",
                                      kr_compression_name(db->codec),
                                      kr_z_outcome_name(z));
    }
    if (c->z.len > INT32_MAX - LEGACY_MIN_V1) {
        return fail(c, KR_RECORDS_TOO_LARGE, "wrapper of %zu bytes",
                    c->z.len);
    }
    size_t wl = legacy_entry_size(magic, -1, (int32_t)c->z.len);

    if (!kr_bytes_reserve(out, wl)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    legacy_write(out->p + out->len, magic, last, (uint8_t)(db->codec | attr),
                 db->lat ? db->max_ts : mx, NULL, -1, c->z.p,
                 (int32_t)c->z.len);
    out->len += wl;
    st->batches_out++;
    *written = c->nr;
    return KR_RECORDS_OK;
}

/* Whole messages in out->p[from..cut): uncompressed 1, a wrapper nrec. */
static size_t
down_whole(const struct kr_bytes *out, size_t from, size_t cut, size_t nrec,
           bool wrapper)
{
    size_t pos = from, n = 0;

    while (cut - pos >= LOG_OVERHEAD) {
        size_t sz = rd32(out->p + pos + 8);

        if (sz > cut - pos - LOG_OVERHEAD) {
            break;
        }
        pos += LOG_OVERHEAD + sz;
        n += wrapper ? nrec : 1;
    }
    return n;
}

/*
 * A magic 1 entry m at in[pos..) for a magic 0 consumer: its record, or
 * a wrapper's inner records at absolute offsets (KIP-31; a wrapper at
 * offset 0 keeps the inner offsets, as AbstractLegacyRecordBatch does),
 * into c->r; *src where their keys and values are, *drop whether records
 * below the fetch offset go (uncompressed only, as downConvert).
 */
static enum kr_records_outcome
down_legacy_1to0(struct conv *c, const uint8_t *in, size_t pos,
                 const struct legacy *m, size_t maxu, struct down_batch *db,
                 const uint8_t **src, bool *drop,
                 struct kr_records_stats *st)
{
    int codec = m->attr & 7;

    c->nr = 0;
    db->codec = codec;
    db->lat = false;
    *src = in;
    *drop = codec == KR_COMPRESSION_NONE;
    if (codec == KR_COMPRESSION_NONE) {
        struct rec *r = rec_add(c);

        if (r == NULL) {
            return fail(c, KR_RECORDS_NOMEM, "out of memory");
        }
        *r = (struct rec){ .offset = m->offset, .ts = m->ts, .key = m->key,
                           .klen = m->klen, .val = m->val,
                           .vlen = m->vlen, .kp = in + m->key,
                           .vp = in + m->val };
        st->messages_in++;
        return KR_RECORDS_OK;
    }
    if (codec > KR_COMPRESSION_LZ4 || m->vlen < 0) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "wrapper at byte %zu (offset %lld): codec %d, value "
                    "length %d", pos, (long long)m->offset, codec, m->vlen);
    }
    c->dz.len = 0;
    enum kr_z_outcome z = kr_decompress(codec, 0, in + m->val,
                                        (size_t)m->vlen, maxu, &c->dz);

    if (z != KR_Z_OK) {
        return z_outcome(c, z, "wrapper", pos, m->offset, codec);
    }
    enum kr_records_outcome oc = up_inner(c, m, pos, 0, st);

    if (oc != KR_RECORDS_OK) {
        return oc;
    }
    int64_t rel_last = c->r[c->nr - 1].offset;

    if (m->offset != 0) {
        if (m->offset < rel_last) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "wrapper at byte %zu: offset %lld below its last "
                        "inner offset %lld", pos, (long long)m->offset,
                        (long long)rel_last);
        }
        for (size_t i = 0; i < c->nr; i++) {
            c->r[i].offset = wadd(c->r[i].offset,
                                  wsub(m->offset, rel_last));
        }
    }
    *src = c->dz.p;
    for (size_t i = 0; i < c->nr; i++) {
        c->r[i].kp = c->dz.p + c->r[i].key;
        c->r[i].vp = c->dz.p + c->r[i].val;
    }
    return KR_RECORDS_OK;
}

/*
 * The input as segments (kr_records_down_segs): the byte at a position,
 * as many contiguous bytes as its segment has from there, and copies.
 * Positions only grow within a call but for the restart at 0.
 */
struct segs {
    const struct iovec *v;
    int n;
    int at;                         /* the segment of the last lookup */
    size_t at_off;                  /* its first byte's position */
};

/* Byte pos (< the total) and *avail contiguous bytes from it. */
static const uint8_t *
segs_at(struct segs *s, size_t pos, size_t *avail)
{
    if (pos < s->at_off) {
        s->at = 0;
        s->at_off = 0;
    }
    while (s->at < s->n - 1 && pos - s->at_off >= s->v[s->at].iov_len) {
        s->at_off += s->v[s->at].iov_len;
        s->at++;
    }
    *avail = s->v[s->at].iov_len - (pos - s->at_off);
    return (const uint8_t *)s->v[s->at].iov_base + (pos - s->at_off);
}

/* len bytes from pos (all within the total) copied to dst. */
static void
segs_copy(struct segs *s, size_t pos, uint8_t *dst, size_t len)
{
    while (len > 0) {
        size_t av;
        const uint8_t *p = segs_at(s, pos, &av);
        size_t k = av < len ? av : len;

        memcpy(dst, p, k);
        dst += k;
        pos += k;
        len -= k;
    }
}

/* CRC-32C of len bytes from pos, segment by segment. */
static uint32_t
segs_crc32c(struct segs *s, size_t pos, size_t len)
{
    uint32_t crc = 0xFFFFFFFFu;

    while (len > 0) {
        size_t av;
        const uint8_t *p = segs_at(s, pos, &av);
        size_t k = av < len ? av : len;

        if (k > (size_t)INT_MAX) {
            k = (size_t)INT_MAX;
        }
        crc = crc32_iscsi((unsigned char *)(uintptr_t)p, (int)k, crc);
        pos += k;
        len -= k;
    }
    return crc ^ 0xFFFFFFFFu;
}

/*
 * An uncompressed v2 batch of blen bytes at pos that straddles segments
 * (its header h, CRC checked by the caller): its records into c->r where
 * they lie, those that straddle two segments copied into c->bounce
 * (reserved first for the whole batch: it never moves meanwhile).
 */
static enum kr_records_outcome
down_parse_v2_segs(struct conv *c, struct segs *s, size_t pos, size_t blen,
                   const uint8_t *h)
{
    int64_t base_off = (int64_t)rd64(h);
    int64_t base_ts = (int64_t)rd64(h + 27);
    int64_t max_ts = (int64_t)rd64(h + 35);
    int32_t count = (int32_t)rd32(h + 57);
    bool lat = rd16(h + 21) & ATTR_TS_LOG_APPEND;
    size_t q = pos + V2_HEADER, end = pos + blen;

    if (count < 0) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): record count %d", pos,
                    (long long)base_off, count);
    }
    c->nr = 0;
    if ((size_t)count > (end - q) / 7 + 1) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): record count %d does "
                    "not fit %zu bytes", pos, (long long)base_off, count,
                    end - q);
    }
    c->bounce.len = 0;
    if (!kr_bytes_reserve(&c->bounce, blen)) {
        return fail(c, KR_RECORDS_NOMEM, "out of memory");
    }
    for (int32_t k = 0; k < count; k++) {
        uint8_t vb[5];
        size_t av, i = 0, rs = q - pos - V2_HEADER;
        const uint8_t *p = segs_at(s, q, &av);
        int64_t rl;

        if (av > end - q) {
            av = end - q;
        }
        if (!rd_var(p, av, &i, 5, &rl)) {
            /* its Length may straddle: read it whole */
            size_t nb = end - q < sizeof(vb) ? end - q : sizeof(vb);

            segs_copy(s, q, vb, nb);
            i = 0;
            if (!rd_var(vb, nb, &i, 5, &rl)) {
                goto bad;
            }
        }
        if (rl < 6 || (uint64_t)rl > end - q - i) {
            goto bad;
        }
        size_t total = i + (size_t)rl;

        if (total > av) {
            /* straddles: this record copied whole */
            uint8_t *d = c->bounce.p + c->bounce.len;

            segs_copy(s, q, d, total);
            c->bounce.len += total;
            p = d;
        }
        struct rec *r = rec_add(c);

        if (r == NULL) {
            return fail(c, KR_RECORDS_NOMEM, "out of memory");
        }
        if (!down_rec(p, i, total, base_off, base_ts, lat, max_ts, r)) {
            c->nr--;
            goto bad;
        }
        q += total;
        continue;
bad:
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): record %d of %d "
                    "malformed (at byte %zu of the batch's records)", pos,
                    (long long)base_off, k, count, rs);
    }
    if (q != end) {
        return fail(c, KR_RECORDS_CORRUPT,
                    "batch at byte %zu (offset %lld): %zu bytes after its "
                    "%d records", pos, (long long)base_off, end - q, count);
    }
    return KR_RECORDS_OK;
}

static enum kr_records_outcome
down_convert(struct conv *c, struct segs *sg, size_t n,
             const struct kr_records_down_opts *o, struct kr_bytes *out,
             struct kr_records_stats *st)
{
    size_t pos = 0, len0 = out->len;
    size_t limit = o->max_bytes ? o->max_bytes : SIZE_MAX;
    size_t maxu = o->max_uncompressed ? o->max_uncompressed : SIZE_MAX;
    bool first = true;
    int magic = o->magic;

    while (pos < n && out->len - len0 < limit) {
        size_t left = n - pos, av;
        uint8_t h[V2_HEADER] = { 0 };

        if (left < 17) {
            break;                  /* partial batch at the end */
        }
        segs_copy(sg, pos, h, left < V2_HEADER ? left : V2_HEADER);
        int64_t boff = (int64_t)rd64(h);
        int32_t bl = (int32_t)rd32(h + 8);
        int bmagic = (int8_t)h[16];

        if (bmagic < 0 || bmagic > 2) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "batch at byte %zu (offset %lld): magic %d", pos,
                        (long long)boff, bmagic);
        }
        if (bl < (bmagic == 2 ? V2_LENGTH_MIN : LEGACY_MIN_V0)) {
            return fail(c, KR_RECORDS_CORRUPT,
                        "batch at byte %zu (offset %lld): length %d below "
                        "the minimum", pos, (long long)boff, bl);
        }
        if ((size_t)bl > left - LOG_OVERHEAD) {
            break;                  /* partial batch at the end */
        }
        size_t blen = LOG_OVERHEAD + (size_t)bl, start = out->len;
        struct down_batch db = { 0 };
        const uint8_t *src;
        bool drop = true, copied = false, split = false;
        size_t written = 0;
        enum kr_records_outcome oc;
        /*
         * The batch contiguous: in[bpos..bpos+blen) (in its segment, or
         * copied into c->bounce), unless split (an uncompressed v2 batch
         * that straddles segments: read where it lies).
         */
        const uint8_t *in;
        size_t bpos;

        (void)segs_at(sg, pos, &av);
        in = sg->v[sg->at].iov_base;
        bpos = pos - sg->at_off;        /* pos itself in one segment */

        if (av < blen) {
            uint16_t at = rd16(h + 21);

            if (bmagic == 2 && (at & 7) == KR_COMPRESSION_NONE &&
                !(at & ATTR_CONTROL)) {
                split = true;
            } else {
                c->bounce.len = 0;
                if (!kr_bytes_reserve(&c->bounce, blen)) {
                    return fail(c, KR_RECORDS_NOMEM, "out of memory");
                }
                segs_copy(sg, pos, c->bounce.p, blen);
                c->bounce.len = blen;
                in = c->bounce.p;
                bpos = 0;
            }
        }
        src = in;
        if (bmagic == 2) {
            uint32_t crc = rd32(h + 17);
            uint32_t got = split ? segs_crc32c(sg, pos + 21, blen - 21)
                                 : kr_records_crc32c(in + bpos + 21,
                                                     blen - 21);

            if (crc != got) {
                return fail(c, KR_RECORDS_CORRUPT,
                            "batch at byte %zu (offset %lld): CRC-32C "
                            "0x%08x, computed 0x%08x", pos, (long long)boff,
                            crc, got);
            }
            uint16_t attr = rd16(h + 21);
            int codec = attr & 7;

            st->batches_in++;
            if (attr & ATTR_CONTROL) {
                st->dropped_control++;
                pos += blen;
                continue;
            }
            if (codec > KR_COMPRESSION_ZSTD) {
                return fail(c, KR_RECORDS_CORRUPT,
                            "batch at byte %zu (offset %lld): unknown codec "
                            "%d", pos, (long long)boff, codec);
            }
            if (codec == KR_COMPRESSION_ZSTD &&
                o->zstd == KR_LEGACY_ZSTD_REFUSE) {
                if (!first) {
                    break;          /* served up to it; the next fetch
                                       starts here and is refused */
                }
                return fail(c, KR_RECORDS_UNSUPPORTED_COMPRESSION,
                            "batch at byte %zu (offset %lld): zstd for a "
                            "magic %d consumer (legacy_zstd = refuse)", pos,
                            (long long)boff, magic);
            }
            oc = split ? down_parse_v2_segs(c, sg, pos, blen, h)
                       : down_parse_v2(c, in, bpos, blen, codec, maxu, &src);
            if (oc != KR_RECORDS_OK) {
                return oc;
            }
            st->messages_in += c->nr;
            db.lat = attr & ATTR_TS_LOG_APPEND;
            db.max_ts = (int64_t)rd64(h + 35);
            db.codec = codec;
            drop = codec == KR_COMPRESSION_NONE;
            if (codec == KR_COMPRESSION_ZSTD) {
                st->zstd_recompressed++;
                if (o->zstd == KR_LEGACY_ZSTD_GZIP) {
                    db.codec = KR_COMPRESSION_GZIP;
                } else {
                    db.codec = KR_COMPRESSION_NONE;
                    drop = true;
                }
            }
        } else {
            struct legacy m;
            size_t next;

            oc = legacy_parse(c, in, bpos, bpos + blen, "message", &m,
                              &next);
            if (oc != KR_RECORDS_OK) {
                return oc;
            }
            st->batches_in++;
            if (bmagic <= magic) {
                /* as it is, as downConvert copies older batches */
                if (!kr_bytes_add(out, in + bpos, blen)) {
                    return fail(c, KR_RECORDS_NOMEM, "out of memory");
                }
                /* a copied wrapper's inner messages are not counted */
                written = (m.attr & 7) ? 0 : 1;
                st->messages_in += written;
                copied = true;
            } else {
                oc = down_legacy_1to0(c, in, bpos, &m, maxu, &db, &src,
                                      &drop, st);
                if (oc != KR_RECORDS_OK) {
                    return oc;
                }
            }
        }
        (void)src;
        if (!copied) {
            if (c->nr == 0) {
                pos += blen;
                continue;
            }
            oc = down_put(c, &db, magic, o->fetch_offset, drop, out, st,
                          &written);
            if (oc != KR_RECORDS_OK) {
                return oc;
            }
        }
        if (out->len == start) {
            pos += blen;            /* all below the fetch offset */
            continue;
        }
        if (first) {
            first = false;
            if (out->len - len0 > limit) {
                limit = out->len - len0;    /* the first batch whole */
            }
        }
        if (out->len - len0 > limit) {
            size_t cut = len0 + limit;

            written = down_whole(out, start, cut, written,
                                 db.codec != KR_COMPRESSION_NONE);
            out->len = cut;         /* a partial last message, as brokers */
        }
        st->records_out += written;
        pos += blen;
    }
    return KR_RECORDS_OK;
}

enum kr_records_outcome
kr_records_down(const uint8_t *in, size_t n,
                const struct kr_records_down_opts *o, struct kr_bytes *out,
                struct kr_records_stats *st, char *why, size_t whylen)
{
    struct iovec v = { .iov_base = (void *)(uintptr_t)in, .iov_len = n };

    return kr_records_down_segs(&v, 1, o, out, st, why, whylen);
}

enum kr_records_outcome
kr_records_down_segs(const struct iovec *seg, int nseg,
                     const struct kr_records_down_opts *o,
                     struct kr_bytes *out, struct kr_records_stats *st,
                     char *why, size_t whylen)
{
    struct conv c = { .why = why, .whylen = whylen };
    struct kr_records_stats s = { 0 };
    struct segs sg = { .v = seg, .n = nseg };
    size_t len0 = out->len, n = 0;
    enum kr_records_outcome oc;

    for (int i = 0; i < nseg; i++) {
        n += seg[i].iov_len;
    }

    if (why != NULL && whylen > 0) {
        why[0] = '\0';
    }
    if (o->magic != 0 && o->magic != 1) {
        return fail(&c, KR_RECORDS_CORRUPT, "target magic %d", o->magic);
    }
    if (n == 0) {
        return KR_RECORDS_OK;
    }
    conv_init(&c);
    oc = down_convert(&c, &sg, n, o, out, &s);
    conv_free(&c);
    if (oc != KR_RECORDS_OK) {
        out->len = len0;
        return oc;
    }
    if (st != NULL) {
        st->messages_in += s.messages_in;
        st->records_out += s.records_out;
        st->batches_in += s.batches_in;
        st->batches_out += s.batches_out;
        st->bytes_in += n;
        st->bytes_out += out->len - len0;
        st->zstd_recompressed += s.zstd_recompressed;
        st->dropped_control += s.dropped_control;
        st->dropped_below_offset += s.dropped_below_offset;
    }
    return KR_RECORDS_OK;
}
