/*
 * krelay_codec.c - krelay-codec: Kafka frames to JSON and back, with the
 * same codec and JSON form (kr_json.h) as the proxy.  See usage() below.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kr_codec.h"
#include "kr_frame.h"
#include "kr_json.h"
#include "kr_schema.h"

#define KR_EXIT_OK 0
#define KR_EXIT_FAIL 1
#define KR_EXIT_USAGE 2

static const char *kr_prog = "krelay-codec";

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: %s decode [--hex] [--response --api-key K --api-version V]\n"
"       %s encode [--hex]\n"
"       %s list\n"
"       %s --help | --version\n"
"\n"
"decode  Read Kafka frames on stdin, each with its 4-byte size prefix:\n"
"        back to back (binary), or with --hex one frame per line in hex\n"
"        (either case; whitespace ignored; empty lines and lines starting\n"
"        with '#' skipped).  Print one compact JSON object per frame and\n"
"        line.  Frames are requests unless --response is given with the\n"
"        ApiKey (number or name, e.g. Metadata) and version of the request\n"
"        they answer (ApiVersions responses use header v0 at every\n"
"        version).  Decoding is strict (no trailing bytes, valid UTF-8).\n"
"        A frame that fails prints\n"
"          {\"error\": \"...\", \"field\": \"path\", \"offset\": N}\n"
"        where offset counts bytes from the start of the frame, its size\n"
"        prefix included; decoding goes on with the next frame (binary\n"
"        input stops at a size prefix it cannot trust) and the exit\n"
"        status is 1.\n"
"encode  Read one JSON object per line (a response when it has apiKey and\n"
"        apiVersion, else a request) and write each as a frame with its\n"
"        size prefix: binary, or with --hex lower-case hex, one per line.\n"
"        A line that fails writes {\"error\", \"field\", \"line\"} to\n"
"        stderr, is skipped, and the exit status is 1.\n"
"list    Every API: ApiKey, name, request versions, flexible versions,\n"
"        and the versions Kafka 4.x no longer accepts.\n"
"\n"
"Exit status: 0 ok, 1 some frame or line failed, 2 bad usage.\n",
            kr_prog, kr_prog, kr_prog, kr_prog);
}

static int KR_PRINTF(1, 2)
usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", kr_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    usage(stderr);
    return KR_EXIT_USAGE;
}

/* ---- output helpers ------------------------------------------------------ */

/* Print j compactly on its own line; false on ENOMEM. */
static bool
print_json_line(FILE *f, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);

    if (s == NULL) {
        return false;
    }
    fputs(s, f);
    fputc('\n', f);
    free(s);
    return true;
}

static void
print_error(const char *msg, const char *field, const char *where,
            long long pos)
{
    json_t *o = json_pack("{s:s, s:s, s:I}", "error", msg, "field", field,
                          where, (json_int_t)pos);

    if (o == NULL || !print_json_line(stdout, o)) {
        printf("{\"error\":\"out of memory\"}\n");
    }
    json_decref(o);
}

/* ---- decode ------------------------------------------------------------- */

struct kr_decode_opts {
    bool hex;
    bool response;
    int16_t api_key;
    int16_t api_version;
};

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

/*
 * Decode one frame (size prefix included, already checked to match len)
 * and print its JSON or its error.  Returns true when it decoded.
 */
static bool
decode_frame(const struct kr_decode_opts *o, struct kr_arena *arena,
             const uint8_t *frame, size_t len)
{
    struct kr_codec_err err;
    struct kr_rbuf rb;
    struct iovec iov;
    struct kr_msg m;
    json_t *j;
    int rc;

    memset(&err, 0, sizeof(err));
    memset(&m, 0, sizeof(m));
    kr_arena_reset(arena);
    kr_rbuf_init_flat(&rb, &iov, frame + 4, len - 4);
    if (o->response) {
        rc = kr_decode_response(arena, &rb, o->api_key, o->api_version,
                                KR_DEC_STRICT, &m, &err);
    } else {
        rc = kr_decode_request(arena, &rb, KR_DEC_STRICT, &m, &err);
    }
    if (rc != KR_OK) {
        char msg[200];

        if (err.msg[0] != '\0') {
            snprintf(msg, sizeof(msg), "%s", err.msg);
        } else if (rc == KR_EUNSUPPORTED) {
            snprintf(msg, sizeof(msg), "unsupported ApiKey %d version %d",
                     (int)m.api_key, (int)m.api_version);
        } else {
            snprintf(msg, sizeof(msg), "%s", kr_status_str(rc));
        }
        print_error(msg, err.path, "offset", (long long)err.offset + 4);
        return false;
    }
    j = kr_json_from_msg(&m, &rb, 0, &err);
    if (j == NULL) {
        print_error(err.msg[0] != '\0' ? err.msg : "out of memory", err.path,
                    "offset", 0);
        return false;
    }
    if (!print_json_line(stdout, j)) {
        json_decref(j);
        print_error("out of memory", "", "offset", 0);
        return false;
    }
    json_decref(j);
    return true;
}

/* Check the size prefix of a complete frame; print an error when bad. */
static bool
check_frame(const uint8_t *frame, size_t len)
{
    char msg[128];

    if (len < 4) {
        snprintf(msg, sizeof(msg), "frame of %zu bytes is shorter than "
                 "its 4-byte size prefix", len);
        print_error(msg, "size", "offset", 0);
        return false;
    }
    if (be32(frame) != len - 4) {
        snprintf(msg, sizeof(msg), "size prefix %lu does not match the "
                 "%zu bytes that follow", (unsigned long)be32(frame),
                 len - 4);
        print_error(msg, "size", "offset", 0);
        return false;
    }
    return true;
}

static int
hexval(int ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

static bool
is_space(int ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' ||
           ch == '\v' || ch == '\f';
}

/* Skip blank and '#' lines. */
static bool
blank_line(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n && is_space((unsigned char)s[i])) {
        i++;
    }
    return i == n || s[i] == '#';
}

static int
decode_hex(const struct kr_decode_opts *o, struct kr_arena *arena)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint8_t *buf = NULL;
    size_t bufcap = 0;
    int status = KR_EXIT_OK;

    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t i, len = 0;
        int hi = -1;
        bool bad = false;

        if (blank_line(line, (size_t)n)) {
            continue;
        }
        if ((size_t)n / 2 + 1 > bufcap) {
            uint8_t *nb = realloc(buf, (size_t)n / 2 + 1);

            if (nb == NULL) {
                fprintf(stderr, "%s: out of memory\n", kr_prog);
                status = KR_EXIT_FAIL;
                break;
            }
            buf = nb;
            bufcap = (size_t)n / 2 + 1;
        }
        for (i = 0; i < (size_t)n; i++) {
            int ch = (unsigned char)line[i];
            int d;

            if (is_space(ch)) {
                continue;
            }
            d = hexval(ch);
            if (d < 0) {
                char msg[64];

                snprintf(msg, sizeof(msg), "invalid hex digit '%c'",
                         ch >= 0x20 && ch < 0x7f ? ch : '?');
                print_error(msg, "", "offset", (long long)len);
                bad = true;
                break;
            }
            if (hi < 0) {
                hi = d;
            } else {
                buf[len++] = (uint8_t)(hi << 4 | d);
                hi = -1;
            }
        }
        if (!bad && hi >= 0) {
            print_error("odd number of hex digits", "", "offset",
                        (long long)len);
            bad = true;
        }
        if (bad || !check_frame(buf, len) ||
            !decode_frame(o, arena, buf, len)) {
            status = KR_EXIT_FAIL;
        }
        fflush(stdout);
    }
    if (ferror(stdin)) {
        fprintf(stderr, "%s: reading stdin: %s\n", kr_prog, strerror(errno));
        status = KR_EXIT_FAIL;
    }
    free(line);
    free(buf);
    return status;
}

/*
 * Read exactly n bytes into *buf (grown as bytes arrive, so a huge bogus
 * size does not allocate before the data exists).  Returns the bytes read
 * (< n at end of input), or -1 on ENOMEM.
 */
static long long
read_exact(uint8_t **buf, size_t *cap, size_t at, size_t n)
{
    size_t got = 0;

    while (got < n) {
        size_t want = n - got;
        size_t r;

        if (want > 1u << 20) {
            want = 1u << 20;
        }
        if (at + got + want > *cap) {
            size_t nc = *cap > 0 ? *cap : 4096;
            uint8_t *nb;

            while (nc < at + got + want) {
                nc *= 2;
            }
            nb = realloc(*buf, nc);
            if (nb == NULL) {
                return -1;
            }
            *buf = nb;
            *cap = nc;
        }
        r = fread(*buf + at + got, 1, want, stdin);
        got += r;
        if (r < want) {
            break;
        }
    }
    return (long long)got;
}

static int
decode_binary(const struct kr_decode_opts *o, struct kr_arena *arena)
{
    uint8_t *buf = NULL;
    size_t cap = 0;
    int status = KR_EXIT_OK;
    char msg[128];

    for (;;) {
        long long r = read_exact(&buf, &cap, 0, 4);
        uint32_t size;

        if (r < 0) {
            fprintf(stderr, "%s: out of memory\n", kr_prog);
            status = KR_EXIT_FAIL;
            break;
        }
        if (r == 0) {
            break;
        }
        if (r < 4) {
            snprintf(msg, sizeof(msg), "input ends inside a size prefix "
                     "(%lld of 4 bytes)", r);
            print_error(msg, "size", "offset", 0);
            status = KR_EXIT_FAIL;
            break;
        }
        size = be32(buf);
        if (size > INT32_MAX) {
            snprintf(msg, sizeof(msg), "negative size prefix %ld",
                     (long)(int32_t)size);
            print_error(msg, "size", "offset", 0);
            status = KR_EXIT_FAIL;
            break;
        }
        r = read_exact(&buf, &cap, 4, size);
        if (r < 0) {
            fprintf(stderr, "%s: out of memory\n", kr_prog);
            status = KR_EXIT_FAIL;
            break;
        }
        if ((size_t)r < size) {
            snprintf(msg, sizeof(msg), "frame truncated: size prefix %lu, "
                     "%lld bytes follow", (unsigned long)size, r);
            print_error(msg, "size", "offset", 0);
            status = KR_EXIT_FAIL;
            break;
        }
        if (!decode_frame(o, arena, buf, (size_t)size + 4)) {
            status = KR_EXIT_FAIL;
        }
        fflush(stdout);
    }
    if (ferror(stdin)) {
        fprintf(stderr, "%s: reading stdin: %s\n", kr_prog, strerror(errno));
        status = KR_EXIT_FAIL;
    }
    free(buf);
    return status;
}

/* ApiKey by number or name; NULL when unknown. */
static const struct kr_api_desc *
parse_api(const char *s)
{
    char *end;
    long k;

    errno = 0;
    k = strtol(s, &end, 10);
    if (*s != '\0' && *end == '\0' && errno == 0) {
        if (k < 0 || k > INT16_MAX) {
            return NULL;
        }
        return kr_api_get((int16_t)k);
    }
    return kr_api_by_name(s);
}

static bool
parse_i16(const char *s, int16_t *out)
{
    char *end;
    long x;

    errno = 0;
    x = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || x < 0 ||
        x > INT16_MAX) {
        return false;
    }
    *out = (int16_t)x;
    return true;
}

static int
cmd_decode(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"hex", no_argument, NULL, 'x'},
        {"response", no_argument, NULL, 'r'},
        {"api-key", required_argument, NULL, 'k'},
        {"api-version", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    struct kr_decode_opts o;
    const struct kr_api_desc *api = NULL;
    const char *key_arg = NULL, *ver_arg = NULL;
    struct kr_arena arena;
    int ch, status;

    memset(&o, 0, sizeof(o));
    while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        switch (ch) {
        case 'x': o.hex = true; break;
        case 'r': o.response = true; break;
        case 'k': key_arg = optarg; break;
        case 'v': ver_arg = optarg; break;
        case 'h': usage(stdout); return KR_EXIT_OK;
        default: return usage_error("%s", "bad option for decode");
        }
    }
    if (optind != argc) {
        return usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (!o.response && (key_arg != NULL || ver_arg != NULL)) {
        return usage_error("%s", "--api-key/--api-version need --response");
    }
    if (o.response) {
        if (key_arg == NULL || ver_arg == NULL) {
            return usage_error("%s", "--response needs --api-key and "
                               "--api-version");
        }
        api = parse_api(key_arg);
        if (api == NULL) {
            return usage_error("unknown ApiKey '%s'", key_arg);
        }
        if (!parse_i16(ver_arg, &o.api_version) ||
            kr_api_root(api, true, o.api_version) == KR_NO_STRUCT) {
            return usage_error("unknown version '%s' for that ApiKey",
                               ver_arg);
        }
        o.api_key = api->key;
    }
    kr_arena_init(&arena, 0);
    status = o.hex ? decode_hex(&o, &arena) : decode_binary(&o, &arena);
    kr_arena_free(&arena);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing stdout: %s\n", kr_prog, strerror(errno));
        status = KR_EXIT_FAIL;
    }
    return status;
}

/* ---- encode ------------------------------------------------------------- */

static void
encode_error(const char *msg, const char *field, long long lineno)
{
    json_t *o = json_pack("{s:s, s:s, s:I}", "error", msg, "field", field,
                          "line", (json_int_t)lineno);

    if (o == NULL || !print_json_line(stderr, o)) {
        fprintf(stderr, "{\"error\":\"out of memory\"}\n");
    }
    json_decref(o);
}

/* Encode one JSON line and write its frame.  true on success. */
static bool
encode_line(bool hex, struct kr_arena *arena, struct kr_json_recbuf *recs,
            const char *line, size_t n, long long lineno)
{
    struct kr_codec_err err;
    struct kr_wbuf w;
    struct kr_msg m;
    json_error_t jerr;
    json_t *j;
    uint8_t *out;
    uint8_t pre[4];
    size_t i;
    int rc;

    kr_arena_reset(arena);
    kr_json_recbuf_reset(recs);
    j = json_loadb(line, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (j == NULL) {
        char msg[200];

        snprintf(msg, sizeof(msg), "invalid JSON at column %d: %s",
                 jerr.column, jerr.text);
        encode_error(msg, "", lineno);
        return false;
    }
    rc = kr_json_to_msg(arena, j, recs, &m, &err);
    json_decref(j);
    if (rc != KR_OK) {
        encode_error(err.msg[0] != '\0' ? err.msg : kr_status_str(rc),
                     err.path, lineno);
        return false;
    }
    memset(&w, 0, sizeof(w));
    memset(&err, 0, sizeof(err));
    rc = kr_encode_msg(&m, &w, &err);
    if (rc != KR_OK) {
        encode_error(err.msg[0] != '\0' ? err.msg : kr_status_str(rc),
                     err.path, lineno);
        kr_wbuf_free(&w);
        return false;
    }
    if (w.total > INT32_MAX) {
        encode_error("frame larger than 2 GiB", "", lineno);
        kr_wbuf_free(&w);
        return false;
    }
    out = kr_wbuf_flatten(&w, recs->p, recs->len);
    if (out == NULL && w.total > 0) {
        encode_error("out of memory", "", lineno);
        kr_wbuf_free(&w);
        return false;
    }
    kr_frame_put_size(pre, w.total);
    if (hex) {
        for (i = 0; i < 4; i++) {
            printf("%02x", pre[i]);
        }
        for (i = 0; i < w.total; i++) {
            printf("%02x", out[i]);
        }
        putchar('\n');
    } else {
        fwrite(pre, 1, 4, stdout);
        if (w.total > 0) {
            fwrite(out, 1, w.total, stdout);
        }
    }
    free(out);
    kr_wbuf_free(&w);
    return true;
}

static int
cmd_encode(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"hex", no_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    struct kr_json_recbuf recs;
    struct kr_arena arena;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long long lineno = 0;
    bool hex = false;
    int ch, status = KR_EXIT_OK;

    while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        switch (ch) {
        case 'x': hex = true; break;
        case 'h': usage(stdout); return KR_EXIT_OK;
        default: return usage_error("%s", "bad option for encode");
        }
    }
    if (optind != argc) {
        return usage_error("unexpected argument '%s'", argv[optind]);
    }
    memset(&recs, 0, sizeof(recs));
    kr_arena_init(&arena, 0);
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if (blank_line(line, (size_t)n)) {
            continue;
        }
        if (!encode_line(hex, &arena, &recs, line, (size_t)n, lineno)) {
            status = KR_EXIT_FAIL;
        }
    }
    if (ferror(stdin)) {
        fprintf(stderr, "%s: reading stdin: %s\n", kr_prog, strerror(errno));
        status = KR_EXIT_FAIL;
    }
    free(line);
    kr_json_recbuf_free(&recs);
    kr_arena_free(&arena);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing stdout: %s\n", kr_prog, strerror(errno));
        status = KR_EXIT_FAIL;
    }
    return status;
}

/* ---- list --------------------------------------------------------------- */

static void
fmt_range(char *out, size_t cap, int lo, int hi)
{
    if (lo > hi) {
        snprintf(out, cap, "-");
    } else if (lo == hi) {
        snprintf(out, cap, "%d", lo);
    } else {
        snprintf(out, cap, "%d-%d", lo, hi);
    }
}

/* valid minus valid_4x: up to two ranges, "-" when none. */
static void
fmt_removed(char *out, size_t cap, const struct kr_api_desc *a)
{
    struct kr_vrange v = a->valid, n = a->valid_4x;
    char r1[16], r2[16];

    if (v.lo > v.hi) {
        snprintf(out, cap, "-");
        return;
    }
    if (n.lo > n.hi) {
        fmt_range(out, cap, v.lo, v.hi);
        return;
    }
    r1[0] = r2[0] = '\0';
    if (v.lo < n.lo) {
        fmt_range(r1, sizeof(r1), v.lo, n.lo - 1 < v.hi ? n.lo - 1 : v.hi);
    }
    if (v.hi > n.hi) {
        fmt_range(r2, sizeof(r2), n.hi + 1 > v.lo ? n.hi + 1 : v.lo, v.hi);
    }
    if (r1[0] != '\0' && r2[0] != '\0') {
        snprintf(out, cap, "%s,%s", r1, r2);
    } else if (r1[0] != '\0' || r2[0] != '\0') {
        snprintf(out, cap, "%s", r1[0] != '\0' ? r1 : r2);
    } else {
        snprintf(out, cap, "-");
    }
}

static int
cmd_list(int argc, char **argv)
{
    int16_t k;

    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0) {
            usage(stdout);
            return KR_EXIT_OK;
        }
        return usage_error("unexpected argument '%s'", argv[1]);
    }
    printf("%-6s %-32s %-9s %-9s %s\n", "ApiKey", "Name", "Versions",
           "Flexible", "RemovedIn4x");
    for (k = 0; k <= kr_api_max; k++) {
        const struct kr_api_desc *a = kr_api_get(k);
        char valid[16], flex[16], removed[40];
        int flo, fhi;

        if (a == NULL) {
            continue;
        }
        fmt_range(valid, sizeof(valid), a->valid.lo, a->valid.hi);
        /* flexible versions among the valid ones ("9+" -> 9-13) */
        flo = a->flexible.lo > a->valid.lo ? a->flexible.lo : a->valid.lo;
        fhi = a->flexible.hi < a->valid.hi ? a->flexible.hi : a->valid.hi;
        fmt_range(flex, sizeof(flex), flo, fhi);
        fmt_removed(removed, sizeof(removed), a);
        printf("%-6d %-32s %-9s %-9s %s\n", (int)a->key, a->name, valid,
               flex, removed);
    }
    return fflush(stdout) == 0 ? KR_EXIT_OK : KR_EXIT_FAIL;
}

/* ---- main --------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    const char *cmd;

    if (argc < 2) {
        fprintf(stderr, "%s: missing command\n", kr_prog);
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0) {
        usage(stdout);
        return KR_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("krelay-codec (%s) %s\n%s\n", PACKAGE_NAME, PACKAGE_VERSION,
               kr_schema_source);
        return KR_EXIT_OK;
    }
    /* getopt_long on argv[1..]: the command plays argv[0]. */
    if (strcmp(cmd, "decode") == 0) {
        return cmd_decode(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "encode") == 0) {
        return cmd_encode(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "list") == 0) {
        return cmd_list(argc - 1, argv + 1);
    }
    return usage_error("unknown command '%s'", cmd);
}
