/*
 * check_stats.c - unit tests for kr_stats: the KR_STATS table (names
 * unique and Prometheus-valid, help present, cells and offsets
 * consistent), labelled families counting in the right cell, the
 * latency histograms, response error codes (from a decoded tree and at
 * a fixed offset), sums over workers and the Prometheus text.
 */
#include "config.h"

#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_arena.h"
#include "kr_codec.h"
#include "kr_common.h"
#include "kr_frame.h"
#include "kr_kerr.h"
#include "kr_rule.h"
#include "kr_stats.h"

/* An owner of a struct kr_stats, as a worker is. */
struct owner {
    struct kr_stats stats;
};

static struct owner *
owner_new(void)
{
    struct owner *o = calloc(1, sizeof(*o));

    ck_assert_ptr_nonnull(o);
    return o;
}

/* Every cell of o that is not 0, as "id:cell" (at most max). */
static int
nonzero(const struct owner *o, char out[][32], int max)
{
    int id, n = 0;
    size_t i;

    for (id = 0; id < KR_STAT__N; id++) {
        for (i = 0; i < kr_stats_desc[id].cells; i++) {
            if (kr_stats_cell(&o->stats, (enum kr_stat_id)id, i) != 0 &&
                n < max) {
                snprintf(out[n++], 32, "%s:%zu", kr_stats_desc[id].name, i);
            }
        }
    }
    return n;
}

START_TEST(table_names_unique_help_present)
{
    size_t cells = 0;
    int i, j;

    ck_assert_int_gt(KR_STAT__N, 10);
    for (i = 0; i < KR_STAT__N; i++) {
        const struct kr_stat_desc *d = &kr_stats_desc[i];
        const char *c;

        ck_assert_ptr_nonnull(d->name);
        /* Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]* (lower
           snake case here) */
        ck_assert_msg(islower((unsigned char)d->name[0]), "%s", d->name);
        for (c = d->name; *c != '\0'; c++) {
            ck_assert_msg(islower((unsigned char)*c) ||
                              isdigit((unsigned char)*c) || *c == '_',
                          "%s", d->name);
        }
        ck_assert_msg(d->help != NULL && strlen(d->help) > 10, "%s: help",
                      d->name);
        ck_assert_msg(strchr(d->help, '\n') == NULL, "%s: help", d->name);
        ck_assert_msg(d->cells >= 1, "%s", d->name);
        ck_assert_msg((d->labels == KR_SL_NONE) == (d->cells == 1) ||
                          d->type == KR_STAT_HISTOGRAM,
                      "%s: one cell iff no labels", d->name);
        ck_assert_msg((d->type == KR_STAT_HISTOGRAM) ==
                          (d->labels == KR_SL_LATENCY_MS),
                      "%s: histogram buckets", d->name);
        /* Prometheus' unit suffix: a count of bytes ends in "_bytes"
           (exposed "..._bytes_total"), none carries "bytes" elsewhere */
        c = strstr(d->name, "bytes");
        ck_assert_msg(c == NULL || (c > d->name && c[-1] == '_' &&
                                    strcmp(c, "bytes") == 0),
                      "%s: bytes is the unit suffix", d->name);
        ck_assert_int_eq(kr_stats_find(d->name), i);
        for (j = 0; j < i; j++) {
            ck_assert_msg(strcmp(kr_stats_desc[j].name, d->name) != 0,
                          "%s twice", d->name);
        }
        /* rows laid out in table order, back to back */
        ck_assert_uint_eq(d->offset, cells * sizeof(uint64_t));
        cells += d->cells;
    }
    ck_assert_uint_eq(cells * sizeof(uint64_t), sizeof(struct kr_stats));
    ck_assert_int_eq(kr_stats_find("no_such_counter"), -1);
    ck_assert_int_eq(kr_stats_find(NULL), -1);
}
END_TEST

START_TEST(scalar_counts)
{
    struct owner *o = owner_new();
    char seen[8][32];

    KR_STAT_INC(&o->stats, requests);
    KR_STAT_INC(&o->stats, requests);
    KR_STAT_ADD(&o->stats, client_to_upstream_bytes, 1000);
    KR_STAT_INC(&o->stats, conn_active);
    KR_STAT_INC(&o->stats, conn_active);
    KR_STAT_DEC(&o->stats, conn_active);
    ck_assert_uint_eq(KR_STAT_GET(&o->stats, requests), 2);
    ck_assert_uint_eq(KR_STAT_GET(&o->stats, client_to_upstream_bytes), 1000);
    ck_assert_uint_eq(KR_STAT_GET(&o->stats, conn_active), 1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, KR_STAT_ID_requests, 0), 2);
    /* nothing else moved */
    ck_assert_int_eq(nonzero(o, seen, 8), 3);
    free(o);
}
END_TEST

START_TEST(family_right_cell)
{
    struct owner *o = owner_new();
    char seen[8][32], want[32];
    size_t produce9 = kr_stats_api_cell(KR_API_PRODUCE, 9);
    size_t fetch9 = kr_stats_api_cell(KR_API_FETCH, 9);

    KR_STAT_INC_L(&o->stats, api_requests, produce9);
    KR_STAT_INC_L(&o->stats, api_requests, produce9);
    KR_STAT_INC_L(&o->stats, api_requests, kr_stats_api_cell(KR_API_FETCH, 12));
    ck_assert_uint_ne(produce9, fetch9);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, api_requests, produce9), 2);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, api_requests, fetch9), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, api_requests,
                                    kr_stats_api_cell(KR_API_FETCH, 12)), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, api_requests,
                                    kr_stats_api_cell(KR_API_PRODUCE, 8)), 0);
    /* outside the cells: the one "other" cell, never out of range */
    ck_assert_uint_eq(kr_stats_api_cell(-1, 0), KR_STATS_API_CELLS - 1);
    ck_assert_uint_eq(kr_stats_api_cell(KR_STATS_API_KEYS, 0),
                      KR_STATS_API_CELLS - 1);
    ck_assert_uint_eq(kr_stats_api_cell(0, KR_STATS_API_VERSIONS),
                      KR_STATS_API_CELLS - 1);
    ck_assert_uint_eq(kr_stats_api_cell(0, -1), KR_STATS_API_CELLS - 1);

    KR_STAT_INC_L(&o->stats, closes, KR_CLOSE_UPSTREAM);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, closes, KR_CLOSE_UPSTREAM), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, closes, KR_CLOSE_CLIENT), 0);

    KR_STAT_INC_L(&o->stats, errors_answered,
                  kr_stats_kerr_cell(KR_KERR_TOPIC_AUTHORIZATION_FAILED));
    ck_assert_uint_eq(kr_stats_kerr_cell(-1), 0);
    ck_assert_uint_eq(kr_stats_kerr_cell(KR_KERR_MAX),
                      KR_STATS_KERR_CELLS - 2);
    ck_assert_uint_eq(kr_stats_kerr_cell(KR_KERR_MAX + 1),
                      KR_STATS_KERR_CELLS - 1);
    ck_assert_uint_eq(kr_stats_kerr_cell(-2), KR_STATS_KERR_CELLS - 1);
    ck_assert_uint_eq(kr_stats_broker_cell(true, 5), 0);
    ck_assert_uint_eq(kr_stats_broker_cell(false, 0), 1);
    ck_assert_uint_eq(kr_stats_broker_cell(false, KR_STATS_BROKERS - 1),
                      KR_STATS_BROKERS);
    ck_assert_uint_eq(kr_stats_broker_cell(false, KR_STATS_BROKERS),
                      KR_STATS_BROKER_CELLS - 1);
    ck_assert_uint_eq(kr_stats_broker_cell(false, -1),
                      KR_STATS_BROKER_CELLS - 1);
    ck_assert_int_eq(kr_stats_rule_cell(3, KR_RA_DENY), 3 * KR_RA__N);
    ck_assert_int_eq(kr_stats_rule_cell(3, KR_RA_FAULT),
                     3 * KR_RA__N + KR_RA__N - 1);
    ck_assert_int_eq(kr_stats_rule_cell(KR_STATS_RULES - 1, KR_RA_FAULT),
                     KR_STATS_RULE_CELLS - 1);
    ck_assert_int_eq(kr_stats_rule_cell(-1, KR_RA_DENY), -1);
    ck_assert_int_eq(kr_stats_rule_cell(KR_STATS_RULES, KR_RA_DENY), -1);
    ck_assert_int_eq(kr_stats_rule_cell(0, KR_RA__N), -1);

    /* exactly the cells incremented moved */
    ck_assert_int_eq(nonzero(o, seen, 8), 4);
    snprintf(want, sizeof(want), "api_requests:%zu", produce9);
    ck_assert_str_eq(seen[1], want);
    snprintf(want, sizeof(want), "closes:%d", KR_CLOSE_UPSTREAM);
    ck_assert_str_eq(seen[0], want);
    snprintf(want, sizeof(want), "errors_answered:%d",
             KR_KERR_TOPIC_AUTHORIZATION_FAILED + 1);
    ck_assert_str_eq(seen[3], want);
    free(o);
}
END_TEST

START_TEST(latency_buckets)
{
    struct owner *o = owner_new();
    const enum kr_stat_id id = KR_STAT_ID_response_latency;

    kr_stats_observe_latency(&o->stats, 0);     /* le 1 ms */
    kr_stats_observe_latency(&o->stats, 1);     /* le 1 ms: bounds are
                                                   inclusive */
    kr_stats_observe_latency(&o->stats, 2);     /* le 2 */
    kr_stats_observe_latency(&o->stats, 7);     /* le 10 */
    kr_stats_observe_latency(&o->stats, -5);    /* counts as 0 */
    kr_stats_observe_latency(&o->stats, 1000000);       /* +Inf */
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, 0), 3);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, 1), 1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, 2), 0);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, 3), 1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, KR_STATS_LATENCY_BOUNDS),
                      1);
    /* the sum cell */
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id,
                                    KR_STATS_LATENCY_BOUNDS + 1),
                      1000010);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, KR_STATS_LATENCY_CELLS),
                      0);
    free(o);
}
END_TEST

/* Rule names for the exposition test. */
static const char *
rule_name(int i, void *arg)
{
    (void)arg;
    return i == 2 ? "deny-\"admin\"" : NULL;
}

/*
 * kr_stats_rule_hits: each action a verdict names counts for its rule
 * under that action, so one rule that clamps and throttles a request
 * counts once under each; a verdict without actions counts nothing.
 */
START_TEST(rule_hits_by_action)
{
    struct owner *o = owner_new();
    struct kr_verdict v;
    int r, a, moved = 0;

    memset(&v, 0, sizeof(v));
    kr_stats_rule_hits(&o->stats, &v);
    v.flags = KR_VF_CLAMP | KR_VF_THROTTLE;
    v.clamp_rule = 2;
    v.throttle_rule = 2;
    kr_stats_rule_hits(&o->stats, &v);
    v.flags = KR_VF_DENY | KR_VF_ERROR;
    v.deny_rule = 0;
    v.fault_rule = 7;
    kr_stats_rule_hits(&o->stats, &v);
    v.flags = KR_VF_POLICY | KR_VF_CLOSE;
    v.policy_rule = 0;
    v.fault_rule = 7;
    kr_stats_rule_hits(&o->stats, &v);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(2, KR_RA_CLAMP)), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(2, KR_RA_THROTTLE)),
                      1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(0, KR_RA_DENY)), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(0, KR_RA_POLICY)), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(7, KR_RA_FAULT)), 2);
    for (r = 0; r < KR_STATS_RULES; r++) {
        for (a = 0; a < KR_RA__N; a++) {
            moved += KR_STAT_GET_L(&o->stats, rule_hits,
                                   kr_stats_rule_cell(
                                       r, (enum kr_stat_rule_action)a)) != 0;
        }
    }
    ck_assert_int_eq(moved, 5);
    /* a reload put another rule at index 0: its cells start again, the
       others keep theirs */
    kr_stats_rule_reset(&o->stats, 0);
    kr_stats_rule_reset(&o->stats, KR_STATS_RULES);     /* no-op */
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(0, KR_RA_DENY)), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(0, KR_RA_POLICY)), 0);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(2, KR_RA_CLAMP)), 1);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, rule_hits,
                                    kr_stats_rule_cell(7, KR_RA_FAULT)), 2);
    free(o);
}
END_TEST

START_TEST(sum_and_prometheus_text)
{
    struct owner *a = owner_new(), *b = owner_new();
    const struct kr_stats *st[3];
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    KR_STAT_ADD(&a->stats, requests, 3);
    KR_STAT_ADD(&b->stats, requests, 4);
    KR_STAT_INC_L(&a->stats, api_requests,
                  kr_stats_api_cell(KR_API_PRODUCE, 9));
    KR_STAT_INC_L(&b->stats, api_requests,
                  kr_stats_api_cell(KR_API_PRODUCE, 9));
    KR_STAT_INC_L(&b->stats, closes, KR_CLOSE_TIMEOUT);
    KR_STAT_INC_L(&a->stats, rule_hits, kr_stats_rule_cell(2, KR_RA_DENY));
    KR_STAT_INC_L(&a->stats, errors_answered, kr_stats_kerr_cell(29));
    KR_STAT_INC_L(&a->stats, tls_handshake_failures, KR_SIDE_UPSTREAM);
    KR_STAT_INC_L(&b->stats, tls_handshake_failures, KR_SIDE_UPSTREAM);
    KR_STAT_INC_L(&a->stats, upstream_connect_failures,
                  kr_stats_broker_cell(true, 7));
    KR_STAT_INC_L(&b->stats, upstream_connect_failures,
                  kr_stats_broker_cell(false, 7));
    KR_STAT_INC_L(&b->stats, upstream_connect_failures,
                  kr_stats_broker_cell(false, 1000));
    KR_STAT_INC_L(&a->stats, frames_refused, KR_REFUSAL_WRONG_PROTOCOL);
    KR_STAT_INC_L(&b->stats, frames_refused, KR_REFUSAL_WRONG_PROTOCOL);
    KR_STAT_INC_L(&b->stats, frames_refused, KR_REFUSAL_UNEXPECTED);
    KR_STAT_ADD(&a->stats, client_to_upstream_bytes, 5);
    kr_stats_observe_latency(&a->stats, 3);
    kr_stats_observe_latency(&b->stats, 40);
    kr_stats_observe_upstream(&b->stats, 7);
    KR_STAT_INC_L(&a->stats, response_errors,
                  kr_stats_rsp_error_cell(KR_KERR_UNKNOWN_TOPIC_OR_PARTITION));
    KR_STAT_INC_L(&b->stats, response_errors,
                  kr_stats_rsp_error_cell(KR_KERR_UNKNOWN_TOPIC_OR_PARTITION));
    KR_STAT_INC_L(&b->stats, response_errors, kr_stats_rsp_error_cell(-300));
    st[0] = &a->stats;
    st[1] = NULL;               /* skipped */
    st[2] = &b->stats;
    ck_assert_uint_eq(kr_stats_sum(st, 3, KR_STAT_ID_requests, 0), 7);

    f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(kr_stats_prom(f, st, 3, rule_name, NULL), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "# HELP krelay_requests_total "));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE krelay_requests_total "
                                       "counter\nkrelay_requests_total 7\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE krelay_conn_active gauge\n"
                                       "krelay_conn_active 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_api_requests_total{api="
                                       "\"Produce\",version=\"9\"} 2\n"));
    /* only cells that moved are listed */
    ck_assert_ptr_null(strstr(text, "version=\"8\""));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_closes_total{cause="
                                       "\"timeout\"} 1\n"));
    ck_assert_ptr_null(strstr(text, "cause=\"client\""));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_rule_hits_total{rule="
                                       "\"deny-\\\"admin\\\"\",action="
                                       "\"deny\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_errors_answered_total{"
                                       "error=\"TOPIC_AUTHORIZATION_FAILED\""
                                       "} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_tls_handshake_failures_"
                                       "total{side=\"upstream\"} 2\n"));
    ck_assert_ptr_null(strstr(text, "side=\"client\""));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_upstream_connect_failures_"
                                       "total{broker=\"bootstrap\"} 1\n"
                                       "krelay_upstream_connect_failures_"
                                       "total{broker=\"7\"} 1\n"
                                       "krelay_upstream_connect_failures_"
                                       "total{broker=\"other\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkrelay_frames_refused_total{kind="
                                       "\"wrong_protocol\"} 2\n"
                                       "krelay_frames_refused_total{kind="
                                       "\"unexpected\"} 1\n"));
    ck_assert_ptr_null(strstr(text, "kind=\"oversized\""));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE krelay_client_to_upstream_"
                                       "bytes_total counter\nkrelay_client_"
                                       "to_upstream_bytes_total 5\n"));
    ck_assert_ptr_null(strstr(text, "krelay_bytes_"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE krelay_response_latency_"
                                       "seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_response_latency_seconds_"
                                       "bucket{le=\"0.002\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_response_latency_seconds_"
                                       "bucket{le=\"0.005\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_response_latency_seconds_"
                                       "bucket{le=\"0.05\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_response_latency_seconds_"
                                       "bucket{le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_response_latency_seconds_"
                                       "sum 0.043\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_response_latency_seconds_"
                                       "count 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE krelay_upstream_latency_"
                                       "seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_upstream_latency_seconds_"
                                       "bucket{le=\"0.005\"} 0\n"
                                       "krelay_upstream_latency_seconds_"
                                       "bucket{le=\"0.01\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "krelay_upstream_latency_seconds_"
                                       "sum 0.007\n"
                                       "krelay_upstream_latency_seconds_"
                                       "count 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE krelay_response_errors_total "
                                       "counter\nkrelay_response_errors_"
                                       "total{error=\"UNKNOWN_TOPIC_OR_"
                                       "PARTITION\"} 2\nkrelay_response_"
                                       "errors_total{error=\"unknown\"} 1\n"
                                       "# HELP"));
    free(text);
    free(a);
    free(b);
}
END_TEST

START_TEST(upstream_latency_buckets)
{
    struct owner *o = owner_new();
    const enum kr_stat_id id = KR_STAT_ID_upstream_latency;
    char seen[8][32];

    kr_stats_observe_upstream(&o->stats, 1);    /* le 1 ms */
    kr_stats_observe_upstream(&o->stats, 3);    /* le 5 */
    kr_stats_observe_upstream(&o->stats, 30000);        /* le 30 s */
    kr_stats_observe_upstream(&o->stats, 30001);        /* +Inf */
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, 0), 1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, 2), 1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id,
                                    KR_STATS_LATENCY_BOUNDS - 1), 1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id, KR_STATS_LATENCY_BOUNDS),
                      1);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, id,
                                    KR_STATS_LATENCY_BOUNDS + 1),
                      1 + 3 + 30000 + 30001);
    /* its own cells: response_latency did not move */
    ck_assert_int_eq(nonzero(o, seen, 8), 5);
    ck_assert_uint_eq(kr_stats_cell(&o->stats, KR_STAT_ID_response_latency,
                                    0), 0);
    free(o);
}
END_TEST

/*
 * An OffsetCommit v2 response (header v0, no ThrottleTimeMs, nothing
 * flexible): topic "a" partitions 0 (UNKNOWN_TOPIC_OR_PARTITION), 1
 * (NONE), topic "b" partitions 0 (UNKNOWN_TOPIC_OR_PARTITION), 1 (code
 * 999, which Kafka does not name).
 */
static const uint8_t offset_commit_v2[] = {
    0, 0, 0, 7,                         /* CorrelationId */
    0, 0, 0, 2,                         /* Topics */
    0, 1, 'a', 0, 0, 0, 2,              /* Name, Partitions */
    0, 0, 0, 0, 0, 3,                   /* 0: UNKNOWN_TOPIC_OR_PARTITION */
    0, 0, 0, 1, 0, 0,                   /* 1: NONE */
    0, 1, 'b', 0, 0, 0, 2,
    0, 0, 0, 0, 0, 3,
    0, 0, 0, 1, 0x03, 0xe7,             /* 999 */
};

START_TEST(response_errors_from_tree)
{
    struct owner *o = owner_new();
    struct kr_arena arena;
    struct kr_codec_err ce;
    struct iovec iov[1];
    struct kr_rbuf rb;
    struct kr_msg m;
    char seen[8][32], want[32];

    kr_arena_init(&arena, 0);
    memset(&ce, 0, sizeof(ce));
    kr_rbuf_init_flat(&rb, iov, offset_commit_v2, sizeof(offset_commit_v2));
    ck_assert_int_eq(kr_decode_response(&arena, &rb, KR_API_OFFSET_COMMIT, 2,
                                        0, &m, &ce), KR_OK);
    kr_stats_response_errors(&o->stats, m.body);
    kr_stats_response_errors(&o->stats, NULL);  /* nothing */
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, response_errors,
                                    kr_stats_rsp_error_cell(
                                        KR_KERR_UNKNOWN_TOPIC_OR_PARTITION)),
                      2);
    ck_assert_uint_eq(KR_STAT_GET_L(&o->stats, response_errors,
                                    KR_STATS_KERR_CELLS - 1), 1);
    /* NONE is not counted: exactly those two cells moved */
    ck_assert_int_eq(nonzero(o, seen, 8), 2);
    snprintf(want, sizeof(want), "response_errors:%d",
             KR_KERR_UNKNOWN_TOPIC_OR_PARTITION + 1);
    ck_assert_str_eq(seen[0], want);
    ck_assert_uint_eq(kr_stats_rsp_error_cell(KR_KERR_NONE), 1);
    ck_assert_uint_eq(kr_stats_rsp_error_cell(-1), 0);
    ck_assert_uint_eq(kr_stats_rsp_error_cell(KR_KERR_MAX + 1),
                      KR_STATS_KERR_CELLS - 1);
    ck_assert_uint_eq(kr_stats_rsp_error_cell(-2), KR_STATS_KERR_CELLS - 1);
    kr_arena_free(&arena);
    free(o);
}
END_TEST

START_TEST(response_error_fixed_offset)
{
    /* FindCoordinator v3 (flexible: header tags, then ThrottleTimeMs,
       ErrorCode COORDINATOR_NOT_AVAILABLE) */
    static const uint8_t fc3[] = { 0, 0, 0, 9, 0, 0, 0, 0, 5, 0, 15, 0 };
    /* Heartbeat v0: ErrorCode REBALANCE_IN_PROGRESS first */
    static const uint8_t hb0[] = { 0, 0, 0, 9, 0, 27 };
    int16_t code = 0;
    size_t need = 0;

    /* the table the schemas give (4.3.1 JSON): ErrorCode first ... */
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_API_VERSIONS, 0), 0);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_API_VERSIONS, 3), 0);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_FIND_COORDINATOR, 0), 0);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_HEARTBEAT, 0), 0);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_SYNC_GROUP, 0), 0);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_JOIN_GROUP, 0), 0);
    /* ... after ThrottleTimeMs ... */
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_FIND_COORDINATOR, 1), 4);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_FIND_COORDINATOR, 3), 4);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_HEARTBEAT, 1), 4);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_JOIN_GROUP, 2), 4);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_INIT_PRODUCER_ID, 0), 4);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_FETCH, 7), 4);
    /* ... and elsewhere: none */
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_FIND_COORDINATOR, 4), -1);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_FETCH, 6), -1);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_PRODUCE, 9), -1);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_METADATA, 12), -1);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_OFFSET_COMMIT, 2), -1);
    ck_assert_int_eq(kr_frame_rsp_error_off(999, 0), -1);
    ck_assert_int_eq(kr_frame_rsp_error_off(KR_API_HEARTBEAT, 999), -1);

    ck_assert_int_eq(kr_frame_peek_rsp_error(fc3, sizeof(fc3), sizeof(fc3),
                                             KR_API_FIND_COORDINATOR, 3,
                                             &code, &need), KR_OK);
    ck_assert_int_eq(code, KR_KERR_COORDINATOR_NOT_AVAILABLE);
    ck_assert_int_eq(kr_frame_peek_rsp_error(hb0, sizeof(hb0), sizeof(hb0),
                                             KR_API_HEARTBEAT, 0, &code,
                                             &need), KR_OK);
    ck_assert_int_eq(code, KR_KERR_REBALANCE_IN_PROGRESS);
    /* not all here: the payload bytes wanted */
    ck_assert_int_eq(kr_frame_peek_rsp_error(fc3, 6, sizeof(fc3),
                                             KR_API_FIND_COORDINATOR, 3,
                                             &code, &need), KR_AGAIN);
    ck_assert_uint_eq(need, 11);
    /* a frame too short to hold it */
    ck_assert_int_eq(kr_frame_peek_rsp_error(hb0, 5, 5, KR_API_HEARTBEAT, 0,
                                             &code, &need), KR_EPROTO);
    ck_assert_int_eq(kr_frame_peek_rsp_error(hb0, sizeof(hb0), sizeof(hb0),
                                             KR_API_PRODUCE, 9, &code,
                                             &need), KR_EUNSUPPORTED);
}
END_TEST

static Suite *
stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("table");

    tcase_add_test(tc, table_names_unique_help_present);
    tcase_add_test(tc, scalar_counts);
    tcase_add_test(tc, family_right_cell);
    tcase_add_test(tc, latency_buckets);
    tcase_add_test(tc, rule_hits_by_action);
    tcase_add_test(tc, sum_and_prometheus_text);
    tcase_add_test(tc, upstream_latency_buckets);
    tcase_add_test(tc, response_errors_from_tree);
    tcase_add_test(tc, response_error_fixed_offset);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(stats_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
