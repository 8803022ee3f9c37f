/*
 * kr_mock.h - a librdkafka mock cluster (rdkafka_mock.h) hosted in this
 * process: what the two programs built on it share.  krelay-demo-cluster
 * (src/krelay_demo_cluster.c, the upstream `krelay --demo` starts as a
 * child process) and krmock (tests/mock/krmock.c, the test upstream)
 * start their clusters and create their topics here; krmock adds its
 * test-only parts (chosen ports, the accept log, injected errors).
 *
 * Built into libkrmock.a, only where configure found librdkafka
 * (HAVE_RDKAFKA), and linked into those two programs alone: krelay and
 * libkrelay.a never link librdkafka (tools/modgraph.rules,
 * tests/integration/krelay_cli.sh).
 *
 * The brokers listen on 127.0.0.1 on ports the kernel chooses (unless
 * the program interposes bind(), as krmock does); clients talk to them
 * over loopback TCP exactly as to a real cluster.
 */
#ifndef KR_MOCK_H
#define KR_MOCK_H

#include <stdbool.h>
#include <stddef.h>

#include <librdkafka/rdkafka_mock.h>

/* NodeIds 1..KR_MOCK_MAX_BROKERS at the most. */
#define KR_MOCK_MAX_BROKERS 64
/* The partition count of a kr_mock_topics entry without one. */
#define KR_MOCK_DEFAULT_PARTITIONS 3

struct kr_mock;

/*
 * Start a mock cluster of nbrokers brokers (NodeIds 1..nbrokers, 1 ..
 * KR_MOCK_MAX_BROKERS).  librdkafka's threads start with every signal
 * blocked, so that a signal always reaches the program's own thread
 * (sigwait, signalfd or a handler), never a librdkafka one.  librdkafka
 * logs errors only, or with debug everything the mock and the protocol
 * do (debug=mock,protocol), on stderr.  Every broker listens when this
 * returns.  Returns the cluster, owned by the caller (kr_mock_stop), or
 * NULL with a message in err (errlen bytes).
 */
struct kr_mock *kr_mock_start(int nbrokers, bool debug, char *err,
                              size_t errlen);

/*
 * Create topic name with partitions partitions (>= 1), each with
 * replicas replicas (1..the broker count).  Returns KR_OK, or KR_ERROR
 * with a message in err (a name the mock refuses, e.g. one that exists).
 */
int kr_mock_topic(struct kr_mock *m, const char *name, int partitions,
                  int replicas, char *err, size_t errlen);

/*
 * Create each topic of spec, a comma-separated list of NAME[:PARTITIONS]
 * (PARTITIONS 1..10000, default KR_MOCK_DEFAULT_PARTITIONS), e.g.
 * "demo:3,events:6,audit", with min(3, brokers) replicas.  Empty
 * entries are skipped; NULL or "" creates none.  Returns KR_OK, or
 * KR_ERROR with a message in err naming the entry (the topics before it
 * exist).
 */
int kr_mock_topics(struct kr_mock *m, const char *spec, char *err,
                   size_t errlen);

/*
 * The bootstrap list, "127.0.0.1:P1,127.0.0.1:P2,..." in NodeId order:
 * librdkafka's string, valid until kr_mock_stop.
 */
const char *kr_mock_bootstraps(const struct kr_mock *m);

/* The broker count given to kr_mock_start. */
int kr_mock_brokers(const struct kr_mock *m);

/*
 * librdkafka's handle of the cluster, for what this module does not
 * wrap (rd_kafka_mock_set_apiversion, partition leaders, injected
 * errors); valid until kr_mock_stop.
 */
rd_kafka_mock_cluster_t *kr_mock_cluster(struct kr_mock *m);

/*
 * Stop the cluster (its brokers close their sockets), destroy its
 * librdkafka handle and free m.  NULL is a no-op.
 */
void kr_mock_stop(struct kr_mock *m);

#endif /* KR_MOCK_H */
