#!/bin/bash
# kafka-python 2.0.2 (Debian's /usr/bin/python3) through krelay's TLS
# listeners (issue 8's client matrix; make check-long): 200 messages
# produced, consumed back in a group and compared, on a listener with a
# server certificate (the client trusts its CA) and on an mTLS one with a
# client certificate; Metadata names only krelay's addresses; no
# connection is lost to a session ticket it did not expect.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_py kafka
kr_setup 120
kr_start_mock tls:3 mtls:3
kr_start_krelay_tls
kr_tls_matrix kafka-python 200 "$KR_PY" \
    "$top_srcdir/tests/integration/kafka_python_client.py"
# krelay sends a TLS 1.3 session ticket with the first response, never
# alone after the handshake: kafka-python 2.0.2 takes bytes it did not ask
# for as a dead connection ("Socket EVENT_READ without in-flight-requests")
# and reconnects, "connection failed" at warn
if grep -h "connection failed" "$KR_WORK"/kafka-python-*.log >&2; then
    kr_fail "kafka-python lost connections (above)"
fi
kr_finish
