/*
 * kr_test_certs.h - a test CA and certificates made at run time with the
 * OpenSSL API (ECDSA P-256), for the unit tests that need TLS files
 * (check_tls, check_conf).  No private key is committed; the integration
 * tests make theirs with the openssl CLI (tests/tools/tls_certs.sh), with
 * the same names.
 */
#ifndef KR_TEST_CERTS_H
#define KR_TEST_CERTS_H

/*
 * Write into the existing directory dir (PEM files; keys unencrypted):
 *   ca.pem ca.key           CN=krelay test CA
 *   server.pem server.key   CN=localhost; SAN DNS:localhost, IP:127.0.0.1
 *   other.pem other.key     CN=other.example; SAN DNS:other.example
 *   client.pem client.key   O=krelay tests, CN=krelay-test-client
 *   rogue-ca.pem, rogue.pem rogue.key
 *                           another CA, and a client certificate of it
 *   revoked.pem revoked.key CN=krelay-revoked-client, of ca.pem
 *   crl.pem                 ca.pem's CRL: revoked.pem is revoked
 *   sni.pem sni.key         CN=kafka.test; SAN DNS:kafka.test,
 *                           DNS:*.kafka.test (SNI routing's names)
 *   server-full.pem         server.pem then server.key
 *   sni-full.pem            sni.pem then sni.key
 * Returns 0, or -1 (a message on stderr).
 */
int kr_test_certs(const char *dir);

/* A new temporary directory with kr_test_certs' files (malloc'd path). */
char *kr_test_certs_dir(void);

/* Remove what kr_test_certs_dir made, and free dir. */
void kr_test_certs_rm(char *dir);

#endif /* KR_TEST_CERTS_H */
