#!/bin/bash
# confluent-kafka 1.7.0 (librdkafka 2.0.2, Debian's /usr/bin/python3)
# through krelay's TLS listeners (issue 8's client matrix; make
# check-long): 200 messages produced, consumed back in a group and
# compared, on a listener with a server certificate (the client trusts
# its CA, host names checked) and on an mTLS one with a client
# certificate; Metadata names only krelay's addresses.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_py confluent_kafka
kr_setup 120
kr_start_mock tls:3 mtls:3
kr_start_krelay_tls
kr_tls_matrix confluent-kafka 200 "$KR_PY" \
    "$top_srcdir/tests/integration/confluent_kafka_client.py"
kr_finish
