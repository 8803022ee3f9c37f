/*
 * kr_mock.h - an in-process librdkafka mock cluster (rdkafka_mock.h), the
 * upstream of `krelay --demo`.  Only built with librdkafka (HAVE_RDKAFKA).
 *
 * The mock runs in librdkafka's own threads; krelay talks to it over
 * loopback TCP exactly as to a real cluster.
 */
#ifndef KR_MOCK_H
#define KR_MOCK_H

#include <stddef.h>

struct kr_mock;

/*
 * Start a mock cluster of nbrokers brokers (NodeIds 1..nbrokers) on
 * 127.0.0.1, and create each topic of topics, a comma-separated list of
 * NAME[:PARTITIONS] (default 3 partitions), e.g. "demo:6,audit".  The
 * bootstrap list ("127.0.0.1:P1,127.0.0.1:P2,...") is written to
 * bootstraps (NUL-terminated, truncated to len).  Returns NULL with a
 * message in err (errlen bytes) on failure.  The caller owns the result
 * and stops it with kr_mock_stop.
 */
struct kr_mock *kr_mock_start(int nbrokers, const char *topics,
                              char *bootstraps, size_t len,
                              char *err, size_t errlen);

/* Stop the cluster (destroys its librdkafka handle) and free m; NULL is a
 * no-op. */
void kr_mock_stop(struct kr_mock *m);

#endif /* KR_MOCK_H */
