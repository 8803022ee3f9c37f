#!/bin/bash
# kafkajs 2.2.4 (npm, from $KRELAY_DEPS_DIR) through krelay's TLS
# listeners (issue 8's client matrix; make check-long): 200 messages
# produced, consumed back in a group and compared, on a listener with a
# server certificate (the client trusts its CA) and on an mTLS one with a
# client certificate; Metadata names only krelay's addresses.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_node kafkajs
kr_setup 120
kr_start_mock tls:3 mtls:3
kr_start_krelay_tls
kr_tls_matrix kafkajs 200 node "$top_srcdir/tests/integration/kafkajs_client.js"
kr_finish
