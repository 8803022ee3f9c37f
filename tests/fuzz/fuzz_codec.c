/*
 * fuzz_codec.c - the codec round trip shared by the request and response
 * fuzz targets (see fuzz.h), and the helpers every target uses.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "kr_json.h"
#include "kr_scan.h"

void
kr_fuzz_hexdump(const char *what, const uint8_t *p, size_t len)
{
    size_t i;

    fprintf(stderr, "%s (%zu bytes): ", what, len);
    for (i = 0; i < len; i++) {
        fprintf(stderr, "%02x", p[i]);
    }
    fputc('\n', stderr);
}

static uint32_t
kr_fuzz_rnd(uint32_t *x)
{
    /* xorshift32 */
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static int
kr_fuzz_cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return x < y ? -1 : x > y;
}

void
kr_fuzz_segs_split(struct kr_fuzz_segs *s, const uint8_t *p, size_t len,
                   uint32_t seed)
{
    size_t cut[KR_RBUF_MAX_SEG + 1];
    uint32_t x = seed * 2654435761u + 1;
    int i;

    s->n = seed == 0 ? 1 : 1 + (int)(seed % KR_RBUF_MAX_SEG);
    cut[0] = 0;
    for (i = 1; i < s->n; i++) {
        cut[i] = len == 0 ? 0 : kr_fuzz_rnd(&x) % (len + 1);
    }
    qsort(cut + 1, (size_t)(s->n - 1), sizeof(cut[0]), kr_fuzz_cmp_size);
    cut[s->n] = len;
    for (i = 0; i < s->n; i++) {
        size_t k = cut[i + 1] - cut[i];
        uint8_t *m = malloc(k);

        if (m == NULL && k > 0) {
            abort();
        }
        if (k > 0) {
            memcpy(m, p + cut[i], k);
        }
        s->iov[i].iov_base = m;
        s->iov[i].iov_len = k;
    }
    s->rb.seg = s->iov;
    s->rb.nseg = s->n;
    s->rb.len = len;
}

void
kr_fuzz_segs_free(struct kr_fuzz_segs *s)
{
    int i;

    for (i = 0; i < s->n; i++) {
        free(s->iov[i].iov_base);
    }
    s->n = 0;
}

uint8_t *
kr_fuzz_encode(const struct kr_msg *m, const uint8_t *src, size_t src_len,
               size_t *len, int *rc, struct kr_codec_err *err)
{
    struct kr_wbuf w;
    uint8_t *out;

    memset(&w, 0, sizeof(w));
    memset(err, 0, sizeof(*err));
    *rc = kr_encode_msg(m, &w, err);
    if (*rc != KR_OK) {
        kr_wbuf_free(&w);
        return NULL;
    }
    out = kr_wbuf_flatten(&w, src, src_len);
    KR_FUZZ_ASSERT(out != NULL, "kr_wbuf_flatten failed: %zu bytes, "
                   "%zu records slices, source %zu bytes", w.total,
                   w.nrecs, src_len);
    *len = w.total;
    kr_wbuf_free(&w);
    return out;
}

static int
kr_fuzz_decode(struct kr_arena *a, const struct kr_rbuf *rb,
               enum kr_dir dir, int16_t key, int16_t ver, unsigned flags,
               struct kr_msg *m, struct kr_codec_err *err)
{
    memset(m, 0, sizeof(*m));
    memset(err, 0, sizeof(*err));
    if (dir == KR_DIR_REQUEST) {
        return kr_decode_request(a, rb, flags, m, err);
    }
    return kr_decode_response(a, rb, key, ver, flags, m, err);
}

static bool kr_fuzz_node_has_nan(const struct kr_node *n);

static bool
kr_fuzz_val_has_nan(uint8_t type, uint8_t elem_type,
                    const struct kr_val *v)
{
    uint32_t i;

    if (v->is_null) {
        return false;
    }
    switch (type) {
    case KR_T_FLOAT64:
        return isnan(v->u.f);
    case KR_T_STRUCT:
        return v->u.node != NULL && kr_fuzz_node_has_nan(v->u.node);
    case KR_T_ARRAY:
        if (v->u.arr == NULL) {
            return false;
        }
        for (i = 0; i < v->u.arr->n; i++) {
            if (kr_fuzz_val_has_nan(elem_type, KR_T_NONE,
                                    &v->u.arr->items[i])) {
                return true;
            }
        }
        return false;
    default:
        return false;
    }
}

/* True when a float64 below n is a NaN (JSON keeps no NaN payload). */
static bool
kr_fuzz_node_has_nan(const struct kr_node *n)
{
    unsigned i;

    for (i = 0; i < kr_structs[n->struct_id].nfields; i++) {
        const struct kr_field_desc *fd = kr_node_field(n, i);

        if (kr_fuzz_val_has_nan(fd->type, fd->elem_type, &n->vals[i])) {
            return true;
        }
    }
    return false;
}

/* What the scanner's observer saw of records fields (kr_fuzz_scan). */
struct kr_fuzz_recs {
    const struct kr_scan *sc;
    uint64_t off[64];               /* a records field's payload offset */
    int64_t len[64];                /* its length (> 0 only) */
    int64_t cnt[64];                /* its count (KR_SCAN_RECORD_COUNT) */
    unsigned nrec, ncnt;
};

static void
kr_fuzz_recs_cb(void *arg, enum kr_scan_what what, const uint8_t *p,
                size_t n, int64_t val)
{
    struct kr_fuzz_recs *fr = arg;

    (void)p;
    (void)n;
    if (what == KR_SCAN_RECORDS && val > 0 && fr->nrec < 64) {
        fr->off[fr->nrec] = fr->sc->off;    /* the value starts here */
        fr->len[fr->nrec++] = val;
    } else if (what == KR_SCAN_RECORD_COUNT && fr->ncnt < 64) {
        fr->cnt[fr->ncnt++] = val;
    }
}

/*
 * The resumable scanner (kr_scan) against the tolerant decoder, on the
 * same payload fed in pieces drawn from seed: it never reads past a
 * piece (ASan), never consumes more than it is given, and where the
 * decoder accepts the payload the scanner stops exactly where the body's
 * tagged fields start (they decode with kr_decode_tags up to the
 * decoder's end of body), or at the end of a classic body.  Every other
 * seed counts records (kr_scan_count_records): each count it gives is
 * kr_records_count's over the same records field.
 */
static void
kr_fuzz_scan(enum kr_dir dir, int16_t key, int16_t ver, uint32_t seed,
             const uint8_t *p, size_t len, int drc, const struct kr_msg *m)
{
    struct kr_fuzz_recs fr;
    unsigned i;
    struct kr_scan sc;
    struct kr_codec_err err;
    struct kr_arena a;
    struct kr_node *tn;
    struct iovec iov;
    struct kr_rbuf rb;
    size_t at = 0, used, n, toff;
    uint32_t x = seed * 2654435761u + 1;
    int rc;

    if (dir == KR_DIR_REQUEST) {
        if (len < 4) {
            return;
        }
        key = (int16_t)(p[0] << 8 | p[1]);
        ver = (int16_t)(p[2] << 8 | p[3]);
    }
    if (kr_scan_init(&sc, key, ver, dir == KR_DIR_RESPONSE, len) != KR_OK) {
        KR_FUZZ_ASSERT(drc != KR_OK, "the decoder knows ApiKey %d v%d, the "
                       "scanner does not", key, ver);
        return;
    }
    memset(&fr, 0, sizeof(fr));
    fr.sc = &sc;
    if (seed & 1) {
        kr_scan_watch(&sc, kr_fuzz_recs_cb, &fr);
        kr_scan_count_records(&sc, true);
    }
    do {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        n = seed == 0 ? len - at : 1 + x % (len / 3 + 1);
        if (n > len - at) {
            n = len - at;
        }
        /* a piece of its own, so that ASan sees a read past it */
        {
            uint8_t *piece = malloc(n > 0 ? n : 1);

            KR_FUZZ_ASSERT(piece != NULL, "out of memory");
            memcpy(piece, p + at, n);
            rc = kr_scan_feed(&sc, piece, n, &used);
            free(piece);
        }
        KR_FUZZ_ASSERT(used <= n, "scanner consumed %zu of %zu", used, n);
        at += used;
        KR_FUZZ_ASSERT(sc.off == at, "scanner offset %llu, fed %zu",
                       (unsigned long long)sc.off, at);
        if (rc == KR_AGAIN && kr_scan_skippable(&sc) > 0 && (x & 4)) {
            /* as the session's splice lane does: some of the value it
               skips is forwarded without being fed */
            uint64_t k = 1 + x % kr_scan_skippable(&sc);

            KR_FUZZ_ASSERT(k <= len - at, "skippable %llu past the frame",
                           (unsigned long long)kr_scan_skippable(&sc));
            KR_FUZZ_ASSERT(kr_scan_skip(&sc, kr_scan_skippable(&sc) + 1) ==
                           KR_ELIMIT, "skip past skippable accepted");
            rc = kr_scan_skip(&sc, k);
            at += (size_t)k;
            KR_FUZZ_ASSERT(sc.off == at, "scanner offset %llu after a skip "
                           "to %zu", (unsigned long long)sc.off, at);
        }
    } while (rc == KR_AGAIN && at < len);
    KR_FUZZ_ASSERT(rc == KR_OK || rc == KR_EPROTO, "scanner status %d at "
                   "the end of the frame", rc);
    KR_FUZZ_ASSERT(fr.ncnt <= fr.nrec, "%u counts for %u records fields",
                   fr.ncnt, fr.nrec);
    for (i = 0; i < fr.ncnt; i++) {
        uint64_t want;
        int64_t w;

        kr_rbuf_init_flat(&rb, &iov, p, len);
        w = kr_records_count(&rb, fr.off[i], (int32_t)fr.len[i], &want) ==
                    KR_OK ? (int64_t)want : -1;
        KR_FUZZ_ASSERT(fr.cnt[i] == w, "records field at %llu (%lld bytes): "
                       "scanner counted %lld, kr_records_count %lld",
                       (unsigned long long)fr.off[i], (long long)fr.len[i],
                       (long long)fr.cnt[i], (long long)w);
    }
    if (drc != KR_OK) {
        return;
    }
    if (rc != KR_OK) {
        /* the tolerant decoder accepted: only KR_DEC_TAGS_EXACT's rule
           (a known tagged field fills its size, each tag once) may
           separate them */
        struct kr_msg mx;

        kr_arena_init(&a, 0);
        kr_rbuf_init_flat(&rb, &iov, p, len);
        rc = kr_fuzz_decode(&a, &rb, dir, key, ver, KR_DEC_TAGS_EXACT, &mx,
                            &err);
        kr_arena_free(&a);
        KR_FUZZ_ASSERT(rc != KR_OK, "decoder accepts with "
                       "KR_DEC_TAGS_EXACT, scanner refuses: %s", sc.msg);
        return;
    }
    if (!kr_api_flexible(kr_api_get(key), ver)) {
        KR_FUZZ_ASSERT(at == m->trailing_off, "classic body: scanner at "
                       "%zu, decoder at %zu", at, m->trailing_off);
        return;
    }
    kr_arena_init(&a, 0);
    kr_rbuf_init_flat(&rb, &iov, p, len);
    toff = at;
    rc = kr_decode_tags(&a, &rb, &toff, m->body->struct_id, ver, 0, &tn,
                        &err);
    KR_FUZZ_ASSERT(rc == KR_OK && toff == m->trailing_off, "tail at %zu: "
                   "%s, ends at %zu, body at %zu", at, kr_status_str(rc),
                   toff, m->trailing_off);
    kr_arena_free(&a);
}

/*
 * decoded m1 (from rb, flat copy p) encodes to out1: its JSON text must
 * load back into a tree that encodes to out1 too.
 */
static void
kr_fuzz_json_round_trip(const struct kr_msg *m1, const struct kr_rbuf *rb,
                        const uint8_t *out1, size_t len1)
{
    struct kr_codec_err err;
    struct kr_json_recbuf recs;
    struct kr_arena a;
    struct kr_msg m3;
    json_error_t jerr;
    json_t *j, *j2;
    uint8_t *out3;
    size_t len3 = 0;
    char *text;
    int rc;

    memset(&err, 0, sizeof(err));
    j = kr_json_from_msg(m1, rb, 0, &err);
    KR_FUZZ_ASSERT(j != NULL, "kr_json_from_msg of a decoded tree: %s at "
                   "%s: %s", kr_status_str(err.status), err.path, err.msg);
    text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    KR_FUZZ_ASSERT(text != NULL, "json_dumps failed");
    j2 = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    KR_FUZZ_ASSERT(j2 != NULL, "own JSON does not load: %s: %s", jerr.text,
                   text);

    kr_arena_init(&a, 0);
    memset(&recs, 0, sizeof(recs));
    memset(&m3, 0, sizeof(m3));
    rc = kr_json_to_msg(&a, j2, &recs, &m3, &err);
    KR_FUZZ_ASSERT(rc == KR_OK, "kr_json_to_msg of own JSON: %s at %s: "
                   "%s\n%s", kr_status_str(rc), err.path, err.msg, text);
    KR_FUZZ_ASSERT(m3.api_key == m1->api_key &&
                   m3.api_version == m1->api_version &&
                   m3.correlation_id == m1->correlation_id,
                   "JSON changed the header: %s", text);
    out3 = kr_fuzz_encode(&m3, recs.p, recs.len, &len3, &rc, &err);
    KR_FUZZ_ASSERT(out3 != NULL, "tree from own JSON does not encode: %s "
                   "at %s: %s\n%s", kr_status_str(rc), err.path, err.msg,
                   text);
    if ((len3 != len1 || memcmp(out1, out3, len1) != 0) &&
        !kr_fuzz_node_has_nan(m1->body)) {
        kr_fuzz_hexdump("encoded", out1, len1);
        kr_fuzz_hexdump("via JSON", out3, len3);
        KR_FUZZ_ASSERT(0, "JSON round trip changed the bytes: %s", text);
    }
    free(out3);
    free(text);
    json_decref(j2);
    kr_json_recbuf_free(&recs);
    kr_arena_free(&a);
}

int
kr_fuzz_codec(enum kr_dir dir, int16_t key, int16_t ver, unsigned flags,
              uint32_t seed, const uint8_t *p, size_t len)
{
    struct kr_fuzz_segs segs;
    struct kr_codec_err err;
    struct kr_arena a;
    struct iovec iov;
    struct kr_rbuf rb;
    struct kr_msg m1, m2;
    uint8_t *out1, *out2;
    size_t len1 = 0, len2 = 0;
    bool canonical = (flags & KR_FUZZ_CANONICAL) != 0;
    int rc, ret;

    flags &= ~KR_FUZZ_CANONICAL;
    kr_arena_init(&a, 0);
    kr_fuzz_segs_split(&segs, p, len, seed);
    ret = rc = kr_fuzz_decode(&a, &segs.rb, dir, key, ver, flags, &m1,
                              &err);
    if (getenv("KR_FUZZ_TRACE") != NULL) {
        fprintf(stderr, "%s ApiKey %d v%d flags %#x: %s%s%s\n",
                dir == KR_DIR_REQUEST ? "request" : "response",
                m1.api_key, m1.api_version, flags, kr_status_str(rc),
                rc == KR_OK ? "" : " at ", rc == KR_OK ? "" : err.path);
    }
    if ((flags & KR_DEC_STRICT) == 0) {
        kr_fuzz_scan(dir, key, ver, seed, p, len, rc, &m1);
    }
    if (rc != KR_OK) {
        if (canonical) {
            kr_fuzz_hexdump("payload", p, len);
            KR_FUZZ_ASSERT(0, "an encoding does not decode: %s at %s "
                           "(offset %zu): %s", kr_status_str(rc), err.path,
                           err.offset, err.msg);
        }
        KR_FUZZ_ASSERT(rc == KR_EPROTO || rc == KR_EUNSUPPORTED,
                       "decode returned %d (%s)", rc, kr_status_str(rc));
        goto out;
    }
    KR_FUZZ_ASSERT(m1.trailing_off + m1.trailing == len &&
                   m1.body_off <= m1.trailing_off,
                   "body_off %zu trailing_off %zu trailing %zu of %zu",
                   m1.body_off, m1.trailing_off, m1.trailing, len);
    KR_FUZZ_ASSERT((flags & KR_DEC_STRICT) == 0 || m1.trailing == 0,
                   "strict decode left %zu trailing bytes", m1.trailing);

    /* every successful decode re-encodes ... */
    out1 = kr_fuzz_encode(&m1, p, len, &len1, &rc, &err);
    if (out1 == NULL) {
        kr_fuzz_hexdump("payload", p, len);
        KR_FUZZ_ASSERT(0, "decoded tree does not encode: %s at %s: %s",
                       kr_status_str(rc), err.path, err.msg);
    }
    if (canonical && (len1 != len || memcmp(p, out1, len) != 0)) {
        kr_fuzz_hexdump("payload", p, len);
        kr_fuzz_hexdump("re-encoded", out1, len1);
        KR_FUZZ_ASSERT(0, "an encoding does not re-encode to itself");
    }
    if ((flags & KR_DEC_STRICT) != 0 && m1.trailing == 0) {
        KR_FUZZ_ASSERT(len1 <= len, "strict re-encoding grew %zu -> %zu",
                       len, len1);
    }

    /* ... and that encoding decodes and re-encodes to identical bytes */
    kr_rbuf_init_flat(&rb, &iov, out1, len1);
    rc = kr_fuzz_decode(&a, &rb, dir, key, ver, flags, &m2, &err);
    if (rc != KR_OK) {
        kr_fuzz_hexdump("payload", p, len);
        kr_fuzz_hexdump("encoded", out1, len1);
        KR_FUZZ_ASSERT(0, "own encoding does not decode: %s at %s "
                       "(offset %zu): %s", kr_status_str(rc), err.path,
                       err.offset, err.msg);
    }
    KR_FUZZ_ASSERT(m2.trailing == 0 && m2.api_key == m1.api_key &&
                   m2.api_version == m1.api_version &&
                   m2.correlation_id == m1.correlation_id,
                   "re-decode changed the header");
    out2 = kr_fuzz_encode(&m2, out1, len1, &len2, &rc, &err);
    KR_FUZZ_ASSERT(out2 != NULL, "re-decoded tree does not encode: %s at "
                   "%s: %s", kr_status_str(rc), err.path, err.msg);
    if (len2 != len1 || memcmp(out1, out2, len1) != 0) {
        kr_fuzz_hexdump("payload", p, len);
        kr_fuzz_hexdump("encoded", out1, len1);
        kr_fuzz_hexdump("re-encoded", out2, len2);
        KR_FUZZ_ASSERT(0, "re-encoding is not idempotent");
    }

    /* JSON form: only where every string was checked to be UTF-8 */
    if ((flags & (KR_DEC_STRICT | KR_DEC_NO_UTF8)) == KR_DEC_STRICT) {
        kr_fuzz_json_round_trip(&m1, &segs.rb, out1, len1);
    }
    free(out2);
    free(out1);
out:
    kr_fuzz_segs_free(&segs);
    kr_arena_free(&a);
    return ret;
}
