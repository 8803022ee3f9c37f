/*
 * kr_compress.c - Kafka's record compression codecs over whole buffers
 * (see kr_compress.h): gzip (zlib), snappy (libsnappy's C API, Java's
 * xerial framing written here), lz4 (liblz4's frame API, the KAFKA-1493
 * header checksum fixed or written here with libxxhash's XXH32), zstd
 * (libzstd).
 *
 * Output.  Decompression appends to a kr_bytes in steps: a size the input
 * declares (gzip's ISIZE, zstd's content size, snappy's lengths) is used
 * as the first reservation only when it is within max_out; otherwise the
 * output doubles from a small step, never past entry length + max_out.
 * When max_out bytes are out and the stream has not ended, one more
 * byte is asked for into a scratch byte: any byte there is
 * KR_Z_TOO_LARGE.  So a bomb costs at most max_out bytes of memory.
 *
 * Contexts.  zlib's inflate and deflate states, libzstd's DCtx/CCtx and
 * liblz4's frame contexts cost from kilobytes to a few hundred KiB to
 * create, more than a small wrapper message costs to decompress; each
 * thread keeps its own set (created on first use, reset per call, freed
 * at thread exit by a pthread key's destructor).  No other state: the
 * functions are thread-safe.  A zstd DCtx that a frame's window made
 * larger than KR_Z_ZSTD_DCTX_KEEP is freed after the call rather than
 * kept by the thread.
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "kr_compress.h"

/*
 * snappy-java's SnappyOutputStream block size: DEFAULT_BLOCK_SIZE =
 * 32 * 1024 (xerial/snappy-java SnappyOutputStream.java), which Kafka
 * takes (new SnappyOutputStream(out) in CompressionType.SNAPPY, later
 * SnappyCompression with CompressionType.SNAPPY's default block size).
 */
#define KR_Z_SNAPPY_BLOCK (32 * 1024)
/* The xerial header: magic 82 'SNAPPY' 00, int32 version, int32 oldest
   compatible version (SnappyCodec.java: DEFAULT_VERSION 1,
   MINIMUM_COMPATIBLE_VERSION 1), big-endian. */
#define KR_Z_XERIAL_HDR 16
static const uint8_t xerial_magic[8] = {
    0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0
};
/*
 * Snappy expands at most 64 bytes per 3 input bytes (a copy element with
 * a 2-byte offset: tag + 2 bytes for up to 64 bytes; a literal at best
 * copies 1:1): a block whose declared length passes 22 times its size is
 * corrupt, and nothing is reserved for it.
 */
#define KR_Z_SNAPPY_MAX_RATIO 22

/* LZ4 frame magic number (LZ4 Frame Format Description, v1.6.x). */
#define KR_Z_LZ4_MAGIC 0x184D2204u
/* Magic, FLG, BD, content size, dictionary id, HC. */
#define KR_Z_LZ4_HDR_MAX (4 + 2 + 8 + 4 + 1)

/* The first output reservation when the input declares no size. */
#define KR_Z_STEP_MIN 4096
/* Output steps for lz4 at least one 64 KiB block (Kafka's block size),
   so liblz4 decodes straight into the output. */
#define KR_Z_LZ4_STEP (64 * 1024)
/* A thread keeps a zstd DCtx up to this size (a large window grows it). */
#define KR_Z_ZSTD_DCTX_KEEP (8u << 20)
/* librdkafka's default zstd level (and zstd's ZSTD_CLEVEL_DEFAULT). */
#define KR_Z_ZSTD_LEVEL 3

/* ---- kr_bytes ------------------------------------------------------------ */

bool
kr_bytes_reserve(struct kr_bytes *b, size_t n)
{
    size_t need, cap;
    uint8_t *p;

    if (b->cap - b->len >= n)
        return true;
    if (n > SIZE_MAX - b->len)
        return false;
    need = b->len + n;
    cap = b->cap < 64 ? 64 : b->cap;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool
kr_bytes_add(struct kr_bytes *b, const void *p, size_t n)
{
    if (n == 0)
        return true;
    if (!kr_bytes_reserve(b, n))
        return false;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return true;
}

void
kr_bytes_free(struct kr_bytes *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/*
 * Room for need more bytes, the capacity doubling as kr_bytes_reserve's
 * does but never past len + limit (limit >= need): appending many
 * outputs to one buffer stays amortised O(1), and a decompression's
 * output never reserves past its max_out.
 */
static bool
bytes_grow_within(struct kr_bytes *b, size_t need, size_t limit)
{
    size_t add;
    uint8_t *p;

    if (b->cap - b->len >= need)
        return true;
    add = b->cap > need ? b->cap : need;
    if (add > limit)
        add = limit > need ? limit : need;
    if (add > SIZE_MAX - b->len)
        return false;
    p = realloc(b->p, b->len + add);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = b->len + add;
    return true;
}

/* ---- names --------------------------------------------------------------- */

const char *
kr_compression_name(int codec)
{
    switch (codec) {
    case KR_COMPRESSION_NONE: return "none";
    case KR_COMPRESSION_GZIP: return "gzip";
    case KR_COMPRESSION_SNAPPY: return "snappy";
    case KR_COMPRESSION_LZ4: return "lz4";
    case KR_COMPRESSION_ZSTD: return "zstd";
    default: return "unknown";
    }
}

const char *
kr_z_outcome_name(enum kr_z_outcome o)
{
    switch (o) {
    case KR_Z_OK: return "ok";
    case KR_Z_CORRUPT: return "corrupt";
    case KR_Z_TOO_LARGE: return "too large";
    case KR_Z_UNSUPPORTED: return "unsupported codec";
    case KR_Z_NOMEM: return "out of memory";
    }
    return "unknown";
}

/* ---- per-thread contexts ------------------------------------------------- */

struct z_tls {
    z_stream inf;          /* gzip inflate, windowBits 15 + 16 */
    z_stream def;          /* gzip deflate, Z_DEFAULT_COMPRESSION */
    bool inf_ok, def_ok;   /* inf/def initialised */
    ZSTD_DCtx *zd;
    ZSTD_CCtx *zc;         /* level KR_Z_ZSTD_LEVEL set at creation */
    LZ4F_dctx *ld;
    LZ4F_cctx *lc;
};

static pthread_key_t z_key;
static pthread_once_t z_once = PTHREAD_ONCE_INIT;
static bool z_key_ok;

static void
z_tls_free(void *arg)
{
    struct z_tls *t = arg;

    if (t == NULL)
        return;
    if (t->inf_ok)
        inflateEnd(&t->inf);
    if (t->def_ok)
        deflateEnd(&t->def);
    ZSTD_freeDCtx(t->zd);
    ZSTD_freeCCtx(t->zc);
    if (t->ld != NULL)
        LZ4F_freeDecompressionContext(t->ld);
    if (t->lc != NULL)
        LZ4F_freeCompressionContext(t->lc);
    free(t);
}

static void
z_key_init(void)
{
    z_key_ok = pthread_key_create(&z_key, z_tls_free) == 0;
}

/* The calling thread's contexts (none created yet); NULL on ENOMEM. */
static struct z_tls *
z_tls(void)
{
    struct z_tls *t;

    if (pthread_once(&z_once, z_key_init) != 0 || !z_key_ok)
        return NULL;
    t = pthread_getspecific(z_key);
    if (t != NULL)
        return t;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    if (pthread_setspecific(z_key, t) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

/* ---- output in steps ------------------------------------------------------ */

/*
 * The output of one decompression: out from base (its length on entry),
 * at most max bytes; scratch takes the one byte asked for past max.
 */
struct z_out {
    struct kr_bytes *b;
    size_t base, max;
    size_t step;           /* next reservation (doubles with the output) */
    uint8_t scratch;
    bool over;             /* the window handed out is the scratch byte */
};

static void
z_out_init(struct z_out *o, struct kr_bytes *b, size_t max_out, size_t first)
{
    o->b = b;
    o->base = b->len;
    o->max = max_out;
    o->step = first < KR_Z_STEP_MIN ? KR_Z_STEP_MIN : first;
    o->over = false;
}

static size_t
z_out_len(const struct z_out *o)
{
    return o->b->len - o->base;
}

/*
 * Where the next output goes: *dst with *room > 0 bytes (out's free
 * space, grown by a step when full), or the scratch byte once max bytes
 * are out.  false on ENOMEM.
 */
static bool
z_out_room(struct z_out *o, uint8_t **dst, size_t *room)
{
    size_t left = o->max - z_out_len(o);
    size_t want;

    if (left == 0) {
        o->over = true;
        *dst = &o->scratch;
        *room = 1;
        return true;
    }
    o->over = false;
    if (o->b->cap == o->b->len) {
        want = o->step < left ? o->step : left;
        if (!bytes_grow_within(o->b, want, left))
            return false;
        o->step = z_out_len(o) + want; /* double: the output so far */
    }
    *room = o->b->cap - o->b->len;
    if (*room > left)
        *room = left;
    *dst = o->b->p + o->b->len;
    return true;
}

/*
 * n bytes were written where z_out_room said: false when they went to
 * the scratch byte (the output passes max).
 */
static bool
z_out_wrote(struct z_out *o, size_t n)
{
    if (o->over)
        return n == 0;
    o->b->len += n;
    return true;
}

/* ---- gzip ---------------------------------------------------------------- */

static enum kr_z_outcome
gzip_decompress(struct z_tls *t, const uint8_t *in, size_t n, size_t max_out,
                struct kr_bytes *out)
{
    z_stream *s = &t->inf;
    struct z_out o;
    size_t left = n, hint = n > SIZE_MAX / 4 ? SIZE_MAX : n * 4;
    uint8_t *dst;
    size_t room;
    int rc;

    if (!t->inf_ok) {
        memset(s, 0, sizeof(*s));
        /* 15 + 16: a gzip wrapper only (RFC 1952), 32 KiB window. */
        rc = inflateInit2(s, 15 + 16);
        if (rc != Z_OK)
            return rc == Z_MEM_ERROR ? KR_Z_NOMEM : KR_Z_CORRUPT;
        t->inf_ok = true;
    } else if (inflateReset(s) != Z_OK) {
        return KR_Z_CORRUPT;
    }
    /* ISIZE, the last member's length mod 2^32: a first reservation. */
    if (n >= 18) {
        const uint8_t *z = in + n - 4;
        size_t isize = (size_t)z[0] | (size_t)z[1] << 8 |
                       (size_t)z[2] << 16 | (size_t)z[3] << 24;

        if (isize <= max_out)
            hint = isize;
    }
    if (hint > max_out)
        hint = max_out;
    z_out_init(&o, out, max_out, hint);
    s->next_in = (Bytef *)(uintptr_t)in;
    s->avail_in = 0;
    for (;;) {
        size_t before_out;

        if (s->avail_in == 0 && left > 0) {
            s->avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
            left -= s->avail_in;
        }
        if (!z_out_room(&o, &dst, &room))
            goto nomem;
        if (room > UINT_MAX)
            room = UINT_MAX;
        s->next_out = dst;
        s->avail_out = (uInt)room;
        before_out = s->avail_out;
        rc = inflate(s, Z_NO_FLUSH);
        if (!z_out_wrote(&o, before_out - s->avail_out))
            goto too_large;
        if (rc == Z_STREAM_END) {
            if (s->avail_in == 0 && left == 0)
                return KR_Z_OK;
            /* Another member (GZIPInputStream reads them in turn); bytes
               that are not one fail in inflate: trailing garbage. */
            if (inflateReset(s) != Z_OK)
                goto corrupt;
            continue;
        }
        if (rc == Z_OK)
            continue;
        if (rc == Z_BUF_ERROR && s->avail_out == 0)
            continue;                   /* more room */
        if (rc == Z_MEM_ERROR)
            goto nomem;
        goto corrupt;                   /* truncated (Z_BUF_ERROR), bad */
    }
corrupt:
    out->len = o.base;
    return KR_Z_CORRUPT;
too_large:
    out->len = o.base;
    return KR_Z_TOO_LARGE;
nomem:
    out->len = o.base;
    return KR_Z_NOMEM;
}

static enum kr_z_outcome
gzip_compress(struct z_tls *t, const uint8_t *in, size_t n,
              struct kr_bytes *out)
{
    z_stream *s = &t->def;
    size_t base = out->len, bound, done = 0;
    int rc;

    if (!t->def_ok) {
        memset(s, 0, sizeof(*s));
        /* Java's GZIPOutputStream: a gzip member, deflate at zlib's
           default level (6), 32 KiB window. */
        rc = deflateInit2(s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                          Z_DEFAULT_STRATEGY);
        if (rc != Z_OK)
            return KR_Z_NOMEM;
        t->def_ok = true;
    } else if (deflateReset(s) != Z_OK) {
        return KR_Z_NOMEM;
    }
    bound = deflateBound(s, n > ULONG_MAX ? ULONG_MAX : (uLong)n);
    if (n > UINT_MAX)
        bound += (n / UINT_MAX + 1) * 16;  /* deflateBound is per call */
    if (!kr_bytes_reserve(out, bound))
        return KR_Z_NOMEM;
    s->next_in = (Bytef *)(uintptr_t)in;
    s->avail_in = 0;
    for (;;) {
        size_t room = out->cap - out->len;
        size_t before;

        if (s->avail_in == 0 && done < n) {
            s->avail_in = n - done > UINT_MAX ? UINT_MAX : (uInt)(n - done);
            done += s->avail_in;
        }
        if (room == 0) {
            if (!kr_bytes_reserve(out, 64 * 1024))
                goto nomem;
            room = out->cap - out->len;
        }
        if (room > UINT_MAX)
            room = UINT_MAX;
        s->next_out = out->p + out->len;
        s->avail_out = (uInt)room;
        before = s->avail_out;
        rc = deflate(s, done == n ? Z_FINISH : Z_NO_FLUSH);
        out->len += before - s->avail_out;
        if (rc == Z_STREAM_END)
            return KR_Z_OK;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            goto nomem;
    }
nomem:
    out->len = base;
    return KR_Z_NOMEM;
}

/* ---- snappy -------------------------------------------------------------- */

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A raw snappy block's declared length, checked against its size. */
static bool
snappy_declared(const uint8_t *p, size_t n, size_t *len)
{
    if (snappy_uncompressed_length((const char *)p, n, len) != SNAPPY_OK)
        return false;
    return *len / KR_Z_SNAPPY_MAX_RATIO <= n;
}

/*
 * One raw snappy block p[0..n) declaring len bytes, appended to out
 * within o's limit.
 */
static enum kr_z_outcome
snappy_block(struct z_out *o, const uint8_t *p, size_t n, size_t len)
{
    size_t got = len;

    if (len > o->max - z_out_len(o)) {
        /* A block that is whole would pass max_out; one that is not
           does not decompress at all. */
        return snappy_validate_compressed_buffer((const char *)p, n) ==
               SNAPPY_OK ? KR_Z_TOO_LARGE : KR_Z_CORRUPT;
    }
    if (!bytes_grow_within(o->b, len, o->max - z_out_len(o)))
        return KR_Z_NOMEM;
    if (len == 0)
        return snappy_validate_compressed_buffer((const char *)p, n) ==
               SNAPPY_OK ? KR_Z_OK : KR_Z_CORRUPT;
    if (snappy_uncompress((const char *)p, n, (char *)o->b->p + o->b->len,
                          &got) != SNAPPY_OK || got != len)
        return KR_Z_CORRUPT;
    o->b->len += len;
    return KR_Z_OK;
}

/* The input is (another) xerial header at p[0..n). */
static bool
xerial_header(const uint8_t *p, size_t n)
{
    return n >= KR_Z_XERIAL_HDR &&
           memcmp(p, xerial_magic, sizeof(xerial_magic)) == 0;
}

static enum kr_z_outcome
snappy_decompress(const uint8_t *in, size_t n, size_t max_out,
                  struct kr_bytes *out)
{
    struct z_out o;
    enum kr_z_outcome r;
    size_t total = 0, i, len;

    z_out_init(&o, out, max_out, 0);
    if (!xerial_header(in, n)) {
        /* A raw block (snappy-java's SnappyInputStream reads one too when
           the magic is not there). */
        if (!snappy_declared(in, n, &len))
            return KR_Z_CORRUPT;
        r = snappy_block(&o, in, n, len);
        if (r != KR_Z_OK)
            out->len = o.base;
        return r;
    }
    /*
     * Xerial: 16-byte header, then blocks of int32 big-endian size + raw
     * snappy.  A second header where a block would start begins another
     * stream (SnappyInputStream reads concatenated streams).  First walk
     * the blocks to check the framing and to reserve the declared total
     * once when it is within max_out.
     */
    for (i = 0; i < n;) {
        uint32_t bl;

        if (xerial_header(in + i, n - i)) {
            if ((int32_t)be32(in + i + 8) < 1) /* as SnappyInputStream */
                return KR_Z_CORRUPT;
            i += KR_Z_XERIAL_HDR;
            continue;
        }
        if (n - i < 4)
            return KR_Z_CORRUPT;
        bl = be32(in + i);
        i += 4;
        if (bl > n - i || !snappy_declared(in + i, bl, &len))
            return KR_Z_CORRUPT;
        total = total + len < total ? SIZE_MAX : total + len;
        i += bl;
    }
    if (total <= max_out && !bytes_grow_within(out, total, max_out))
        return KR_Z_NOMEM;
    for (i = 0; i < n;) {
        uint32_t bl;

        if (xerial_header(in + i, n - i)) {
            i += KR_Z_XERIAL_HDR;
            continue;
        }
        bl = be32(in + i);
        i += 4;
        if (!snappy_declared(in + i, bl, &len))
            r = KR_Z_CORRUPT;
        else
            r = snappy_block(&o, in + i, bl, len);
        if (r != KR_Z_OK) {
            out->len = o.base;
            return r;
        }
        i += bl;
    }
    return KR_Z_OK;
}

static enum kr_z_outcome
snappy_compress_xerial(const uint8_t *in, size_t n, struct kr_bytes *out)
{
    size_t base = out->len, i;

    /* snappy-java writes the header, then a block per 32 KiB; an empty
       input is the header alone. */
    if (!kr_bytes_reserve(out, KR_Z_XERIAL_HDR + 4 +
                          snappy_max_compressed_length(KR_Z_SNAPPY_BLOCK)))
        return KR_Z_NOMEM;
    memcpy(out->p + out->len, xerial_magic, sizeof(xerial_magic));
    put_be32(out->p + out->len + 8, 1);     /* version */
    put_be32(out->p + out->len + 12, 1);    /* compatible version */
    out->len += KR_Z_XERIAL_HDR;
    for (i = 0; i < n;) {
        size_t chunk = n - i < KR_Z_SNAPPY_BLOCK ? n - i : KR_Z_SNAPPY_BLOCK;
        size_t clen = snappy_max_compressed_length(chunk);

        if (!kr_bytes_reserve(out, 4 + clen))
            goto nomem;
        if (snappy_compress((const char *)in + i, chunk,
                            (char *)out->p + out->len + 4, &clen) !=
            SNAPPY_OK)
            goto nomem;                 /* only a short buffer fails */
        put_be32(out->p + out->len, (uint32_t)clen);
        out->len += 4 + clen;
        i += chunk;
    }
    return KR_Z_OK;
nomem:
    out->len = base;
    return KR_Z_NOMEM;
}

/* ---- lz4 ----------------------------------------------------------------- */

/* The frame descriptor's checksum byte over p[0..n) (lz4 frame format:
   (XXH32(descriptor, 0) >> 8) & 0xFF). */
static uint8_t
lz4_hc(const uint8_t *p, size_t n)
{
    return (uint8_t)((XXH32(p, n, 0) >> 8) & 0xFF);
}

static enum kr_z_outcome
lz4_decompress(struct z_tls *t, unsigned flags, const uint8_t *in, size_t n,
               size_t max_out, struct kr_bytes *out)
{
    uint8_t fixed[KR_Z_LZ4_HDR_MAX];
    const uint8_t *seg[2];
    size_t segn[2], nseg = 0, si = 0, hl, ret;
    struct z_out o;
    uint8_t flg, hc;

    /*
     * The header: magic, FLG, BD, [content size], [dict id], HC.  Kafka
     * reads only its own frames (KafkaLZ4BlockInputStream: the magic,
     * version 01, no dictionary); HC is checked here, so that magic 0's
     * (KAFKA-1493: XXH32 over the magic number too) can be accepted and
     * replaced by the right one before liblz4 sees it.
     */
    if (n < 7 || (in[0] | in[1] << 8 | in[2] << 16 | (uint32_t)in[3] << 24)
                 != KR_Z_LZ4_MAGIC)
        return KR_Z_CORRUPT;
    flg = in[4];
    if ((flg >> 6) != 1 || (flg & 0x01) != 0)
        return KR_Z_CORRUPT;            /* version, dictionary id */
    hl = 7 + ((flg & 0x08) ? 8 : 0);
    if (n < hl)
        return KR_Z_CORRUPT;
    hc = in[hl - 1];
    if (hc == lz4_hc(in + 4, hl - 5)) {
        seg[nseg] = in;
        segn[nseg++] = n;
    } else if ((flags & KR_Z_LZ4_KAFKA1493) && hc == lz4_hc(in, hl - 1)) {
        /* Magic 0: the broken checksum accepted (the right one too, as
           librdkafka's fix-up does; Kafka ignores it for magic 0). */
        memcpy(fixed, in, hl);
        fixed[hl - 1] = lz4_hc(in + 4, hl - 5);
        seg[nseg] = fixed;
        segn[nseg++] = hl;
        seg[nseg] = in + hl;
        segn[nseg++] = n - hl;
    } else {
        return KR_Z_CORRUPT;
    }
    if (t->ld == NULL) {
        if (LZ4F_isError(LZ4F_createDecompressionContext(&t->ld,
                                                         LZ4F_VERSION))) {
            t->ld = NULL;
            return KR_Z_NOMEM;
        }
    } else {
        LZ4F_resetDecompressionContext(t->ld);
    }
    z_out_init(&o, out, max_out, n * 4 < KR_Z_LZ4_STEP ? KR_Z_LZ4_STEP :
                                 n * 4);
    for (;;) {
        uint8_t *dst;
        size_t room, srcn, dstn;

        if (!z_out_room(&o, &dst, &room)) {
            out->len = o.base;
            return KR_Z_NOMEM;
        }
        srcn = segn[si];
        dstn = room;
        ret = LZ4F_decompress(t->ld, dst, &dstn, seg[si], &srcn, NULL);
        if (LZ4F_isError(ret))
            goto corrupt;
        if (!z_out_wrote(&o, dstn)) {
            out->len = o.base;
            return KR_Z_TOO_LARGE;
        }
        seg[si] += srcn;
        segn[si] -= srcn;
        if (ret == 0) {
            /* The end mark (and content checksum) read: nothing may
               follow (one frame, as Kafka writes). */
            if (segn[si] != 0 || si + 1 < nseg)
                goto corrupt;
            return KR_Z_OK;
        }
        if (segn[si] == 0) {
            if (si + 1 < nseg) {
                si++;
                continue;
            }
            if (dstn < room)
                goto corrupt;           /* truncated */
        }
    }
corrupt:
    out->len = o.base;
    return KR_Z_CORRUPT;
}

static enum kr_z_outcome
lz4_compress(struct z_tls *t, unsigned flags, const uint8_t *in, size_t n,
             struct kr_bytes *out)
{
    LZ4F_preferences_t prefs;
    size_t bound, w, r;
    uint8_t *dst;

    /* KafkaLZ4BlockOutputStream: 64 KiB blocks, independent, no block or
       content checksum, no content size; liblz4's fast mode. */
    memset(&prefs, 0, sizeof(prefs));
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
    prefs.frameInfo.contentSize = 0;
    prefs.compressionLevel = 0;
    prefs.autoFlush = 1;
    if (t->lc == NULL &&
        LZ4F_isError(LZ4F_createCompressionContext(&t->lc, LZ4F_VERSION))) {
        t->lc = NULL;
        return KR_Z_NOMEM;
    }
    bound = LZ4F_HEADER_SIZE_MAX + LZ4F_compressBound(n, &prefs) +
            LZ4F_compressBound(0, &prefs);        /* the end mark */
    if (!kr_bytes_reserve(out, bound))
        return KR_Z_NOMEM;
    dst = out->p + out->len;
    w = LZ4F_compressBegin(t->lc, dst, bound, &prefs);
    if (LZ4F_isError(w) || w != 7)
        return KR_Z_NOMEM;
    r = LZ4F_compressUpdate(t->lc, dst + w, bound - w, in, n, NULL);
    if (LZ4F_isError(r))
        return KR_Z_NOMEM;
    w += r;
    r = LZ4F_compressEnd(t->lc, dst + w, bound - w, NULL);
    if (LZ4F_isError(r))
        return KR_Z_NOMEM;
    w += r;
    if (flags & KR_Z_LZ4_KAFKA1493) {
        /* Magic 0: HC over the magic number and the descriptor (FLG, BD:
           no content size here), as Kafka's magic 0 writers did. */
        dst[6] = lz4_hc(dst, 6);
    }
    out->len += w;
    return KR_Z_OK;
}

/* ---- zstd ---------------------------------------------------------------- */

static enum kr_z_outcome
zstd_decompress(struct z_tls *t, const uint8_t *in, size_t n, size_t max_out,
                struct kr_bytes *out)
{
    unsigned long long total;
    ZSTD_inBuffer ib = { in, n, 0 };
    enum kr_z_outcome r = KR_Z_CORRUPT;
    struct z_out o;
    size_t ret;

    if (t->zd == NULL) {
        t->zd = ZSTD_createDCtx();
        if (t->zd == NULL)
            return KR_Z_NOMEM;
    } else {
        ZSTD_DCtx_reset(t->zd, ZSTD_reset_session_only);
    }
    if (n == 0)
        return KR_Z_CORRUPT;            /* no frame */
    /* One frame declaring its size, within max_out (as librdkafka and
       kr_compress write them): one reservation, one call, no window
       buffer. */
    total = ZSTD_getFrameContentSize(in, n);
    if (total == ZSTD_CONTENTSIZE_ERROR)
        return KR_Z_CORRUPT;
    if (total != ZSTD_CONTENTSIZE_UNKNOWN && total <= max_out &&
        ZSTD_findFrameCompressedSize(in, n) == n) {
        uint8_t none;

        if (!bytes_grow_within(out, (size_t)total, max_out))
            return KR_Z_NOMEM;
        ret = ZSTD_decompressDCtx(t->zd, total ? out->p + out->len : &none,
                                  (size_t)total, in, n);
        if (ZSTD_isError(ret) || ret != total)
            return KR_Z_CORRUPT;
        out->len += (size_t)total;
        return KR_Z_OK;
    }
    /* A frame without its size (zstd-jni's ZstdOutputStream writes
       none), several frames (read in turn, as zstd-jni does), or a size
       past max_out: streaming, bounded. */
    z_out_init(&o, out, max_out, n * 4);
    for (;;) {
        ZSTD_outBuffer ob;
        uint8_t *dst;
        size_t room;

        if (!z_out_room(&o, &dst, &room)) {
            r = KR_Z_NOMEM;
            break;
        }
        ob.dst = dst;
        ob.size = room;
        ob.pos = 0;
        ret = ZSTD_decompressStream(t->zd, &ob, &ib);
        if (ZSTD_isError(ret)) {
            r = ZSTD_getErrorCode(ret) == ZSTD_error_memory_allocation ?
                KR_Z_NOMEM : KR_Z_CORRUPT;
            break;
        }
        if (!z_out_wrote(&o, ob.pos)) {
            r = KR_Z_TOO_LARGE;
            break;
        }
        if (ret == 0 && ib.pos == ib.size) {
            r = KR_Z_OK;                /* the last frame ended */
            break;
        }
        if (ib.pos == ib.size && ob.pos < ob.size) {
            r = KR_Z_CORRUPT;           /* truncated */
            break;
        }
    }
    if (ZSTD_sizeof_DCtx(t->zd) > KR_Z_ZSTD_DCTX_KEEP) {
        ZSTD_freeDCtx(t->zd);
        t->zd = NULL;
    }
    if (r != KR_Z_OK)
        out->len = o.base;
    return r;
}

static enum kr_z_outcome
zstd_compress(struct z_tls *t, const uint8_t *in, size_t n,
              struct kr_bytes *out)
{
    size_t bound = ZSTD_compressBound(n), w;

    if (t->zc == NULL) {
        t->zc = ZSTD_createCCtx();
        if (t->zc == NULL)
            return KR_Z_NOMEM;
        if (ZSTD_isError(ZSTD_CCtx_setParameter(t->zc, ZSTD_c_compressionLevel,
                                                KR_Z_ZSTD_LEVEL))) {
            ZSTD_freeCCtx(t->zc);
            t->zc = NULL;
            return KR_Z_NOMEM;
        }
    } else {
        /* A session reset keeps the parameters (the level). */
        ZSTD_CCtx_reset(t->zc, ZSTD_reset_session_only);
    }
    if (!kr_bytes_reserve(out, bound))
        return KR_Z_NOMEM;
    w = ZSTD_compress2(t->zc, out->p + out->len, bound, in, n);
    if (ZSTD_isError(w))
        return KR_Z_NOMEM;
    out->len += w;
    return KR_Z_OK;
}

/* ---- the interface ------------------------------------------------------- */

enum kr_z_outcome
kr_decompress(int codec, unsigned flags, const uint8_t *in, size_t n,
              size_t max_out, struct kr_bytes *out)
{
    struct z_tls *t;

    if (codec == KR_COMPRESSION_SNAPPY)
        return snappy_decompress(in, n, max_out, out);
    if (codec != KR_COMPRESSION_GZIP && codec != KR_COMPRESSION_LZ4 &&
        codec != KR_COMPRESSION_ZSTD)
        return KR_Z_UNSUPPORTED;
    t = z_tls();
    if (t == NULL)
        return KR_Z_NOMEM;
    switch (codec) {
    case KR_COMPRESSION_GZIP:
        return gzip_decompress(t, in, n, max_out, out);
    case KR_COMPRESSION_LZ4:
        return lz4_decompress(t, flags, in, n, max_out, out);
    default:
        return zstd_decompress(t, in, n, max_out, out);
    }
}

enum kr_z_outcome
kr_compress(int codec, unsigned flags, const uint8_t *in, size_t n,
            struct kr_bytes *out)
{
    struct z_tls *t;

    if (codec == KR_COMPRESSION_SNAPPY)
        return snappy_compress_xerial(in, n, out);
    if (codec != KR_COMPRESSION_GZIP && codec != KR_COMPRESSION_LZ4 &&
        codec != KR_COMPRESSION_ZSTD)
        return KR_Z_UNSUPPORTED;
    t = z_tls();
    if (t == NULL)
        return KR_Z_NOMEM;
    switch (codec) {
    case KR_COMPRESSION_GZIP:
        return gzip_compress(t, in, n, out);
    case KR_COMPRESSION_LZ4:
        return lz4_compress(t, flags, in, n, out);
    default:
        return zstd_compress(t, in, n, out);
    }
}
