/*
 * replay.c - run a fuzz target over a corpus without libFuzzer.
 *
 *     replay_<target> DIR|FILE...
 *
 * Calls LLVMFuzzerTestOneInput once for every regular file (directories
 * are read one level deep, in name order), with the bytes in a buffer of
 * exactly their size.  A broken invariant aborts (exit by SIGABRT);
 * otherwise prints how many inputs ran and exits 0.  Exit 1 when a path
 * cannot be read or no input was found.  Built with the normal compiler
 * for `make check` (tests/fuzz/replay.sh) and for reproducing a crash
 * without clang.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int kr_replay_count;

static int
kr_replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, k;

    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (len == cap) {
            uint8_t *nb;

            cap = cap == 0 ? 4096 : cap * 2;
            nb = realloc(buf, cap);
            if (nb == NULL) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) {
            break;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "replay: %s: read error\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    {
        /* exactly len bytes, so ASan sees a read past the end */
        uint8_t *exact = malloc(len > 0 ? len : 1);

        if (exact == NULL) {
            free(buf);
            return -1;
        }
        if (len > 0) {
            memcpy(exact, buf, len);
        }
        free(buf);
        if (getenv("KR_REPLAY_VERBOSE") != NULL) {
            fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
        }
        (void)LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    kr_replay_count++;
    return 0;
}

static int
kr_replay_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
kr_replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    int rc = 0;

    if (d == NULL) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if (n == cap) {
            char **nn;

            cap = cap == 0 ? 64 : cap * 2;
            nn = realloc(names, cap * sizeof(*names));
            if (nn == NULL) {
                rc = -1;
                break;
            }
            names = nn;
        }
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (names[n] == NULL) {
            rc = -1;
            break;
        }
        sprintf(names[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 0) {
        qsort(names, n, sizeof(*names), kr_replay_cmp);
    }
    for (i = 0; i < n; i++) {
        struct stat st;

        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            rc = kr_replay_file(names[i]);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int
main(int argc, char **argv)
{
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (S_ISDIR(st.st_mode) ? kr_replay_dir(argv[i]) != 0
                                : kr_replay_file(argv[i]) != 0) {
            return 1;
        }
    }
    if (kr_replay_count == 0) {
        fprintf(stderr, "replay: no input in the given paths\n");
        return 1;
    }
    printf("%s: %d inputs ok\n", argv[0], kr_replay_count);
    return 0;
}
