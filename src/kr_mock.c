/*
 * kr_mock.c - the in-process librdkafka mock cluster behind `krelay
 * --demo`.  See kr_mock.h.
 *
 * Brokers listen on kernel-chosen 127.0.0.1 ports (no bind() tricks: that
 * is the test program tests/mock/krmock.c).  librdkafka's threads are
 * started with every signal blocked, so that signals reach krelay's own
 * handlers and never a mock thread.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "kr_mock.h"

#define KR_MOCK_DEFAULT_PARTITIONS 3
#define KR_MOCK_MAX_BROKERS 64

struct kr_mock {
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *mc;
};

/* Create one "NAME[:PARTITIONS]" topic; 0 or -1 with err filled in. */
static int
kr_mock_topic(struct kr_mock *m, int nbrokers, const char *spec, size_t len,
              char *err, size_t errlen)
{
    char name[256];
    const char *colon = memchr(spec, ':', len);
    size_t nlen = colon != NULL ? (size_t)(colon - spec) : len;
    long partitions = KR_MOCK_DEFAULT_PARTITIONS;
    int rf = nbrokers < 3 ? nbrokers : 3;
    rd_kafka_resp_err_t rerr;

    if (nlen == 0 || nlen >= sizeof(name)) {
        snprintf(err, errlen, "bad topic name in '%.*s'", (int)len, spec);
        return -1;
    }
    memcpy(name, spec, nlen);
    name[nlen] = '\0';
    if (colon != NULL) {
        char num[16], *end;
        size_t dlen = len - nlen - 1;

        if (dlen == 0 || dlen >= sizeof(num)) {
            snprintf(err, errlen, "bad partition count in '%.*s'", (int)len,
                     spec);
            return -1;
        }
        memcpy(num, colon + 1, dlen);
        num[dlen] = '\0';
        errno = 0;
        partitions = strtol(num, &end, 10);
        if (errno != 0 || *end != '\0' || partitions < 1 ||
            partitions > 10000) {
            snprintf(err, errlen, "bad partition count in '%.*s' "
                     "(want 1..10000)", (int)len, spec);
            return -1;
        }
    }
    rerr = rd_kafka_mock_topic_create(m->mc, name, (int)partitions, rf);
    if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "mock topic %s: %s", name,
                 rd_kafka_err2str(rerr));
        return -1;
    }
    return 0;
}

struct kr_mock *
kr_mock_start(int nbrokers, const char *topics, char *bootstraps, size_t len,
              char *err, size_t errlen)
{
    struct kr_mock *m;
    rd_kafka_conf_t *conf;
    char errstr[512];
    sigset_t all, old;
    const char *p;

    if (nbrokers < 1 || nbrokers > KR_MOCK_MAX_BROKERS) {
        snprintf(err, errlen, "mock broker count %d out of range 1..%d",
                 nbrokers, KR_MOCK_MAX_BROKERS);
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    conf = rd_kafka_conf_new();
    /* No bootstrap.servers: this handle only hosts the cluster.  Keep
     * librdkafka's own logging to errors. */
    if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "librdkafka: %s", errstr);
        free(m);
        return NULL;
    }

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (m->rk != NULL) {
        m->mc = rd_kafka_mock_cluster_new(m->rk, nbrokers);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (m->rk == NULL) {
        /* rd_kafka_new destroyed conf. */
        snprintf(err, errlen, "librdkafka: %s", errstr);
        free(m);
        return NULL;
    }
    if (m->mc == NULL) {
        snprintf(err, errlen, "cannot start a mock cluster of %d brokers",
                 nbrokers);
        kr_mock_stop(m);
        return NULL;
    }

    for (p = topics != NULL ? topics : ""; *p != '\0';) {
        size_t n = strcspn(p, ",");

        if (n > 0 && kr_mock_topic(m, nbrokers, p, n, err, errlen) != 0) {
            kr_mock_stop(m);
            return NULL;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }

    if (bootstraps != NULL && len > 0) {
        snprintf(bootstraps, len, "%s",
                 rd_kafka_mock_cluster_bootstraps(m->mc));
    }
    return m;
}

void
kr_mock_stop(struct kr_mock *m)
{
    if (m == NULL) {
        return;
    }
    if (m->mc != NULL) {
        rd_kafka_mock_cluster_destroy(m->mc);
    }
    if (m->rk != NULL) {
        rd_kafka_destroy(m->rk);
    }
    free(m);
}
