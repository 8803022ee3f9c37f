/*
 * kr_stats.c - the description table generated from KR_STATS, latency
 * buckets, sums over workers and the Prometheus text.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "kr_codec.h"
#include "kr_conf.h"
#include "kr_field_ids.h"
#include "kr_rule.h"
#include "kr_schema.h"
#include "kr_stats.h"

_Static_assert(KR_STATS_RULES == KR_CONF_MAX_RULES,
               "rule_hits cells for every rule");
_Static_assert(KR_STATS_API_VERSIONS <= 64, "versions fit a label");

const struct kr_stat_desc kr_stats_desc[KR_STAT__N] = {
#define KR_STAT_DESC_(name, type, labels, cells, help)                        \
    { #name, KR_STAT_##type, KR_SL_##labels, (cells),                         \
      offsetof(struct kr_stats, name), help },
    KR_STATS(KR_STAT_DESC_)
#undef KR_STAT_DESC_
};

static const char *const close_labels[KR_CLOSE__N] = {
#define KR_CLOSE_LABEL_(id, label) label,
    KR_CLOSE_CAUSES(KR_CLOSE_LABEL_)
#undef KR_CLOSE_LABEL_
};

static const char *const rule_action_labels[KR_RA__N] = {
#define KR_RA_LABEL_(id, label) label,
    KR_STATS_RULE_ACTIONS(KR_RA_LABEL_)
#undef KR_RA_LABEL_
};

static const char *const refusal_labels[KR_REFUSAL__N] = {
#define KR_REFUSAL_LABEL_(id, label) label,
    KR_STATS_REFUSALS(KR_REFUSAL_LABEL_)
#undef KR_REFUSAL_LABEL_
};

static const char *const side_labels[KR_SIDE__N] = {
    [KR_SIDE_CLIENT] = "client",
    [KR_SIDE_UPSTREAM] = "upstream",
};

static const int64_t latency_bounds[KR_STATS_LATENCY_BOUNDS] = {
#define KR_STATS_LATENCY_V_(ms) ms,
    KR_STATS_LATENCY_MS(KR_STATS_LATENCY_V_)
#undef KR_STATS_LATENCY_V_
};

/* Observe ms in the KR_STATS_LATENCY_CELLS cells of a histogram. */
static void
observe_ms(_Atomic uint64_t *cells, int64_t ms)
{
    size_t i;

    if (ms < 0) {
        ms = 0;
    }
    for (i = 0; i < KR_STATS_LATENCY_BOUNDS && ms > latency_bounds[i];
         i++) {
    }
    /* i == KR_STATS_LATENCY_BOUNDS: the +Inf bucket */
    kr_stat_add_(&cells[i], 1);
    kr_stat_add_(&cells[KR_STATS_LATENCY_BOUNDS + 1], (uint64_t)ms);
}

void
kr_stats_observe_latency(struct kr_stats *st, int64_t ms)
{
    observe_ms(st->response_latency, ms);
}

void
kr_stats_observe_upstream(struct kr_stats *st, int64_t ms)
{
    observe_ms(st->upstream_latency, ms);
}

size_t
kr_stats_rsp_error_cell(int16_t code)
{
    if (kr_kerr_name(code) == NULL) {
        return KR_STATS_KERR_CELLS - 1;
    }
    return (size_t)(code + 1);
}

/* Count the non-zero ErrorCode fields of n and below (response_errors). */
static void
errors_walk(struct kr_stats *st, const struct kr_node *n)
{
    const struct kr_struct_desc *sd = &kr_structs[n->struct_id];
    unsigned i;
    uint32_t k;

    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *fd = &kr_fields[sd->first_field + i];
        const struct kr_val *v = &n->vals[i];

        if (!v->present || v->is_null) {
            continue;
        }
        if (fd->type == KR_T_INT16) {
            if (fd->id == KR_FIELD_ERROR_CODE && v->u.i != 0) {
                kr_stat_add_(&st->response_errors[
                                 kr_stats_rsp_error_cell((int16_t)v->u.i)],
                             1);
            }
        } else if (fd->type == KR_T_STRUCT && v->u.node != NULL) {
            errors_walk(st, v->u.node);
        } else if (fd->type == KR_T_ARRAY && v->u.arr != NULL &&
                   v->u.arr->elem_type == KR_T_STRUCT) {
            for (k = 0; k < v->u.arr->n; k++) {
                if (v->u.arr->items[k].u.node != NULL) {
                    errors_walk(st, v->u.arr->items[k].u.node);
                }
            }
        }
    }
}

void
kr_stats_response_errors(struct kr_stats *st, const struct kr_node *body)
{
    if (st != NULL && body != NULL) {
        errors_walk(st, body);
    }
}

int
kr_stats_find(const char *name)
{
    int i;

    for (i = 0; name != NULL && i < KR_STAT__N; i++) {
        if (strcmp(kr_stats_desc[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

uint64_t
kr_stats_cell(const struct kr_stats *st, enum kr_stat_id id, size_t i)
{
    const struct kr_stat_desc *d;

    if (st == NULL || (int)id < 0 || id >= KR_STAT__N) {
        return 0;
    }
    d = &kr_stats_desc[id];
    if (i >= d->cells) {
        return 0;
    }
    return kr_stat_get_((const _Atomic uint64_t *)
                        ((const char *)st + d->offset) + i);
}

uint64_t
kr_stats_sum(const struct kr_stats *const *st, int n, enum kr_stat_id id,
             size_t i)
{
    uint64_t sum = 0;
    int k;

    for (k = 0; k < n; k++) {
        sum += kr_stats_cell(st[k], id, i);
    }
    return sum;
}

/* ---- Prometheus text ---------------------------------------------------- */

/* Write s as a label value: backslash, double quote and newline escaped. */
static void
prom_label(FILE *out, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\' || *s == '"') {
            fputc('\\', out);
            fputc(*s, out);
        } else if (*s == '\n') {
            fputs("\\n", out);
        } else {
            fputc(*s, out);
        }
    }
}

/* Labels of cell i of a family d (without braces). */
static void
prom_cell_labels(FILE *out, const struct kr_stat_desc *d, size_t i,
                 kr_stats_rule_name_fn rule_name, void *arg)
{
    char buf[KR_KERR_BUFLEN];
    const char *name;

    switch (d->labels) {
    case KR_SL_CAUSE:
        fputs("cause=\"", out);
        prom_label(out, close_labels[i]);
        fputc('"', out);
        break;
    case KR_SL_API_VERSION:
        if (i == KR_STATS_API_CELLS - 1) {
            fputs("api=\"other\",version=\"other\"", out);
            break;
        }
        {
            const struct kr_api_desc *a =
                kr_api_get((int16_t)(i / KR_STATS_API_VERSIONS));

            fputs("api=\"", out);
            if (a != NULL && a->name != NULL) {
                prom_label(out, a->name);
            } else {
                fprintf(out, "%zu", i / KR_STATS_API_VERSIONS);
            }
            fprintf(out, "\",version=\"%zu\"", i % KR_STATS_API_VERSIONS);
        }
        break;
    case KR_SL_RULE:
        name = rule_name != NULL ? rule_name((int)(i / KR_RA__N), arg)
                                 : NULL;
        fputs("rule=\"", out);
        if (name != NULL) {
            prom_label(out, name);
        } else {
            fprintf(out, "rule%zu", i / KR_RA__N);
        }
        fprintf(out, "\",action=\"%s\"", rule_action_labels[i % KR_RA__N]);
        break;
    case KR_SL_BROKER:
        if (i == 0) {
            fputs("broker=\"bootstrap\"", out);
        } else if (i == KR_STATS_BROKER_CELLS - 1) {
            fputs("broker=\"other\"", out);
        } else {
            fprintf(out, "broker=\"%zu\"", i - 1);
        }
        break;
    case KR_SL_SIDE:
        fputs("side=\"", out);
        prom_label(out, side_labels[i]);
        fputc('"', out);
        break;
    case KR_SL_REFUSAL:
        fputs("kind=\"", out);
        prom_label(out, refusal_labels[i]);
        fputc('"', out);
        break;
    case KR_SL_KERR:
    case KR_SL_RSP_ERROR:
        fputs("error=\"", out);
        if (i == KR_STATS_KERR_CELLS - 1) {
            fputs(d->labels == KR_SL_KERR ? "other" : "unknown", out);
        } else {
            prom_label(out, kr_kerr_format((int16_t)((int)i - 1), buf,
                                           sizeof(buf)));
        }
        fputc('"', out);
        break;
    default:
        break;
    }
}

static void
prom_histogram(FILE *out, const char *full, const struct kr_stats *const *st,
               int n, enum kr_stat_id id)
{
    uint64_t cum = 0, sum_ms;
    size_t i;

    for (i = 0; i <= KR_STATS_LATENCY_BOUNDS; i++) {
        cum += kr_stats_sum(st, n, id, i);
        if (i < KR_STATS_LATENCY_BOUNDS) {
            fprintf(out, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", full,
                    (double)latency_bounds[i] / 1000.0, cum);
        } else {
            fprintf(out, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", full, cum);
        }
    }
    /* ms as seconds, exactly (%g would keep 6 digits of a large sum) */
    sum_ms = kr_stats_sum(st, n, id, KR_STATS_LATENCY_BOUNDS + 1);
    fprintf(out, "%s_sum %" PRIu64 ".%03u\n", full, sum_ms / 1000,
            (unsigned)(sum_ms % 1000));
    fprintf(out, "%s_count %" PRIu64 "\n", full, cum);
}

int
kr_stats_prom(FILE *out, const struct kr_stats *const *st, int n,
              kr_stats_rule_name_fn rule_name, void *arg)
{
    static const char *const types[] = { "counter", "gauge", "histogram" };
    char full[96];
    int id;
    size_t i;

    for (id = 0; id < KR_STAT__N; id++) {
        const struct kr_stat_desc *d = &kr_stats_desc[id];

        snprintf(full, sizeof(full), "krelay_%s%s", d->name,
                 d->type == KR_STAT_COUNTER     ? "_total"
                 : d->type == KR_STAT_HISTOGRAM ? "_seconds"
                                                : "");
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", full, d->help, full,
                types[d->type]);
        if (d->type == KR_STAT_HISTOGRAM) {
            prom_histogram(out, full, st, n, (enum kr_stat_id)id);
            continue;
        }
        if (d->labels == KR_SL_NONE) {
            fprintf(out, "%s %" PRIu64 "\n", full,
                    kr_stats_sum(st, n, (enum kr_stat_id)id, 0));
            continue;
        }
        for (i = 0; i < d->cells; i++) {
            uint64_t v = kr_stats_sum(st, n, (enum kr_stat_id)id, i);

            if (v == 0) {
                continue;
            }
            fprintf(out, "%s{", full);
            prom_cell_labels(out, d, i, rule_name, arg);
            fprintf(out, "} %" PRIu64 "\n", v);
        }
    }
    return ferror(out) ? -1 : 0;
}

void
kr_stats_rule_reset(struct kr_stats *st, int i)
{
    for (int a = 0; a < KR_RA__N; a++) {
        int c = kr_stats_rule_cell(i, (enum kr_stat_rule_action)a);

        if (c >= 0) {
            atomic_store_explicit(&st->rule_hits[c], 0, memory_order_relaxed);
        }
    }
}

void
kr_stats_rule_hits(struct kr_stats *st, const struct kr_verdict *v)
{
    int r[KR_RA__N], a, c;

    r[KR_RA_DENY] = v->flags & KR_VF_DENY ? v->deny_rule : -1;
    r[KR_RA_CLAMP] = v->flags & KR_VF_CLAMP ? v->clamp_rule : -1;
    r[KR_RA_POLICY] = v->flags & KR_VF_POLICY ? v->policy_rule : -1;
    r[KR_RA_THROTTLE] = v->flags & KR_VF_THROTTLE ? v->throttle_rule : -1;
    r[KR_RA_FAULT] = v->flags & (KR_VF_LATENCY | KR_VF_ERROR | KR_VF_CLOSE)
                         ? v->fault_rule
                         : -1;
    for (a = 0; a < KR_RA__N; a++) {
        c = kr_stats_rule_cell(r[a], (enum kr_stat_rule_action)a);
        if (c >= 0) {
            KR_STAT_INC_L(st, rule_hits, c);
        }
    }
}
