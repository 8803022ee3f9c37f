/*
 * kr_mock.c - a librdkafka mock cluster hosted in this process, shared by
 * krelay-demo-cluster and the test upstream krmock.  See kr_mock.h.
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

#include "kr_common.h"
#include "kr_mock.h"

struct kr_mock {
    rd_kafka_t *rk;                     /* hosts the cluster, no client */
    rd_kafka_mock_cluster_t *mc;
    int nbrokers;
};

struct kr_mock *
kr_mock_start(int nbrokers, bool debug, char *err, size_t errlen)
{
    struct kr_mock *m;
    rd_kafka_conf_t *conf;
    char errstr[512];
    sigset_t all, old;

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
    m->nbrokers = nbrokers;
    conf = rd_kafka_conf_new();
    /* No bootstrap.servers: this handle only hosts the cluster. */
    if (rd_kafka_conf_set(conf, "log_level", debug ? "7" : "3", errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        (debug && rd_kafka_conf_set(conf, "debug", "mock,protocol", errstr,
                                    sizeof(errstr)) != RD_KAFKA_CONF_OK)) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "librdkafka: %s", errstr);
        free(m);
        return NULL;
    }

    /* Threads inherit the creating thread's mask: block everything while
     * librdkafka starts its own (the handle's and the mock's). */
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
    return m;
}

int
kr_mock_topic(struct kr_mock *m, const char *name, int partitions,
              int replicas, char *err, size_t errlen)
{
    rd_kafka_resp_err_t rerr;

    if (partitions < 1 || replicas < 1 || replicas > m->nbrokers) {
        snprintf(err, errlen, "topic %s: %d partitions with %d replicas "
                 "(want >= 1 partitions, 1..%d replicas)", name, partitions,
                 replicas, m->nbrokers);
        return KR_ERROR;
    }
    rerr = rd_kafka_mock_topic_create(m->mc, name, partitions, replicas);
    if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "topic %s: %s", name, rd_kafka_err2str(rerr));
        return KR_ERROR;
    }
    return KR_OK;
}

/* One "NAME[:PARTITIONS]" entry of len bytes at spec. */
static int
mock_topic_spec(struct kr_mock *m, const char *spec, size_t len, char *err,
                size_t errlen)
{
    char name[256];
    const char *colon = memchr(spec, ':', len);
    size_t nlen = colon != NULL ? (size_t)(colon - spec) : len;
    long partitions = KR_MOCK_DEFAULT_PARTITIONS;

    if (nlen == 0 || nlen >= sizeof(name)) {
        snprintf(err, errlen, "bad topic name in '%.*s'", (int)len, spec);
        return KR_ERROR;
    }
    memcpy(name, spec, nlen);
    name[nlen] = '\0';
    if (colon != NULL) {
        char num[16], *end;
        size_t dlen = len - nlen - 1;

        if (dlen == 0 || dlen >= sizeof(num)) {
            snprintf(err, errlen, "bad partition count in '%.*s'", (int)len,
                     spec);
            return KR_ERROR;
        }
        memcpy(num, colon + 1, dlen);
        num[dlen] = '\0';
        errno = 0;
        partitions = strtol(num, &end, 10);
        if (errno != 0 || *end != '\0' || partitions < 1 ||
            partitions > 10000) {
            snprintf(err, errlen, "bad partition count in '%.*s' "
                     "(want 1..10000)", (int)len, spec);
            return KR_ERROR;
        }
    }
    return kr_mock_topic(m, name, (int)partitions,
                         m->nbrokers < 3 ? m->nbrokers : 3, err, errlen);
}

int
kr_mock_topics(struct kr_mock *m, const char *spec, char *err, size_t errlen)
{
    const char *p;

    for (p = spec != NULL ? spec : ""; *p != '\0';) {
        size_t n = strcspn(p, ",");

        if (n > 0 && mock_topic_spec(m, p, n, err, errlen) != KR_OK) {
            return KR_ERROR;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return KR_OK;
}

const char *
kr_mock_bootstraps(const struct kr_mock *m)
{
    return rd_kafka_mock_cluster_bootstraps(m->mc);
}

int
kr_mock_brokers(const struct kr_mock *m)
{
    return m->nbrokers;
}

rd_kafka_mock_cluster_t *
kr_mock_cluster(struct kr_mock *m)
{
    return m->mc;
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
