/*
 * krconfkeys.c - print krelay's config key table (src/kr_conf.c, through
 * kr_conf_key) as tab-separated lines, for tools/krmanini.py, which
 * writes man/krelay.ini.5.in from it (`make regen-man`;
 * tests/man_ini.sh fails when the committed page differs).
 *
 * Output: a header line, then one line per key in table order:
 *   section name type unit min max default default_doc reload choices help
 * unit, min, max, default, default_doc and choices are "" when the key
 * has none; choices are comma-separated; reload is APPLY, REBIND,
 * NEWCONN or RESTART (what kr_conf_reload_diff reports for the key).  Exit status 0,
 * or 1 when a field holds a tab or a newline (the format could not say
 * it).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_conf.h"

static const char *
reload_name(enum kr_conf_reload r)
{
    switch (r) {
    case KR_RELOAD_APPLY:
        return "APPLY";
    case KR_RELOAD_REBIND:
        return "REBIND";
    case KR_RELOAD_RESTART:
        return "RESTART";
    case KR_RELOAD_REFUSE:
        return "REFUSE";
    case KR_RELOAD_NEWCONN:
        return "NEWCONN";
    }
    return "?";
}

/* Print one field (NULL as "") and its separator; false for a tab or a
   newline in it. */
static bool
field(const char *s, char sep)
{
    if (s == NULL) {
        s = "";
    }
    fputs(s, stdout);
    putchar(sep);
    return strpbrk(s, "\t\n") == NULL;
}

int
main(void)
{
    struct kr_conf_key_desc d;
    size_t i, j;
    bool ok = true;

    puts("section\tname\ttype\tunit\tmin\tmax\tdefault\tdefault_doc\t"
         "reload\tchoices\thelp");
    for (i = 0; kr_conf_key(i, &d); i++) {
        char min[24] = "", max[24] = "", choices[256] = "";
        size_t used = 0;

        if (d.has_range) {
            snprintf(min, sizeof(min), "%" PRId64, d.min);
            snprintf(max, sizeof(max), "%" PRId64, d.max);
        }
        for (j = 0; d.choices != NULL && d.choices[j] != NULL; j++) {
            if (d.choices[j][0] != '\0' && used < sizeof(choices)) {
                used += (size_t)snprintf(choices + used,
                                         sizeof(choices) - used, "%s%s",
                                         used > 0 ? "," : "", d.choices[j]);
            }
        }
        if (used >= sizeof(choices)) {
            fprintf(stderr, "krconfkeys: [%s] %s: choices too long\n",
                    d.section, d.name);
            ok = false;
        }
        ok &= field(d.section, '\t');
        ok &= field(d.name, '\t');
        ok &= field(d.type, '\t');
        ok &= field(d.unit, '\t');
        ok &= field(min, '\t');
        ok &= field(max, '\t');
        ok &= field(d.def, '\t');
        ok &= field(d.def_doc, '\t');
        ok &= field(reload_name(d.reload), '\t');
        ok &= field(choices, '\t');
        ok &= field(d.help, '\n');
    }
    if (!ok) {
        fprintf(stderr, "krconfkeys: a field holds a tab or newline\n");
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
