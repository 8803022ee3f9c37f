#!/bin/bash
# tls_certs.sh DIR: a test CA and certificates made at run time with the
# openssl CLI (ECDSA P-256; no private key is ever committed).  Writes
# into DIR (created):
#   ca.pem, ca.key          the CA ("krelay test CA")
#   server.pem, server.key  CN=localhost, SAN DNS:localhost, IP:127.0.0.1,
#                           IP:::1 (serverAuth)
#   other.pem, other.key    CN=other.example, SAN DNS:other.example only
#   sni.pem, sni.key        CN=kafka.test, SAN DNS:kafka.test,
#                           DNS:*.kafka.test (SNI routing: the bootstrap
#                           name and every broker's)
#   client.pem, client.key  CN=krelay-test-client, O=krelay tests
#                           (clientAuth)
#   rogue-ca.pem, rogue.pem, rogue.key
#                           a second CA and a client certificate of it
#                           (clientAuth): signed, but not by ca.pem
#   *-full.pem              certificate, then its key (HAProxy's crt)
# Valid for two days from now.  Keys (and *-full.pem) are mode 600, the
# rest 644.  Exits non-zero when openssl fails.
#
# tls_certs.sh --examples DIR: the same, plus the files the shipped
# configurations name under /etc/krelay/tls/ (conf/examples/tls.ini, the
# README), all readable by anyone (krelay -t runs as nobody on them):
#   krelay.pem krelay.key              CN=localhost, SAN DNS:localhost,
#                                      IP:127.0.0.1, DNS:kafka.example.com,
#                                      DNS:*.kafka.example.com (the names
#                                      conf/examples/tls-sni.ini routes)
#   kafka-ca.pem clients-ca.pem        ca.pem
#   krelay-client.pem krelay-client.key  client.pem client.key
set -eu
EXAMPLES=0
if [ "${1:-}" = --examples ]; then
    EXAMPLES=1
    shift
fi
[ $# -eq 1 ] || { echo "usage: tls_certs.sh [--examples] DIR" >&2; exit 2; }
D=$1
mkdir -p "$D"
cd "$D"
umask 077

key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
        -out "$1.key" 2>/dev/null
}

# ca NAME CN: a self-signed CA
ca() {
    key "$1"
    openssl req -new -x509 -key "$1.key" -out "$1.pem" -days 2 \
        -subj "/O=krelay tests/CN=$2" \
        -addext basicConstraints=critical,CA:true \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

# leaf NAME SUBJECT EXTFILE-LINES CA
leaf() {
    key "$1"
    openssl req -new -key "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$4.pem" -CAkey "$4.key" \
        -CAcreateserial -out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
    cat "$1.pem" "$1.key" >"$1-full.pem"
}

ca ca "krelay test CA"
ca rogue-ca "krelay rogue CA"
leaf server "/CN=localhost" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" ca
leaf other "/CN=other.example" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:other.example" ca
leaf sni "/CN=kafka.test" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:kafka.test,DNS:*.kafka.test" ca
leaf client "/O=krelay tests/CN=krelay-test-client" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth" ca
leaf rogue "/CN=krelay-rogue-client" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth" rogue-ca
rm -f ./*.srl
chmod 644 ./*.pem
chmod 600 ./*.key ./*-full.pem
if [ "$EXAMPLES" = 1 ]; then
    leaf krelay "/CN=localhost" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:kafka.example.com,DNS:*.kafka.example.com" ca
    rm -f ./*.srl krelay-full.pem
    cp ca.pem kafka-ca.pem
    cp ca.pem clients-ca.pem
    cp client.pem krelay-client.pem
    cp client.key krelay-client.key
    chmod 755 .
    chmod 644 ./*.pem ./*.key
fi
