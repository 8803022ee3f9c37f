/*
 * kr_tls.h - the TLS transport: a struct kr_conn_ops (kr_conn.h) over
 * OpenSSL 3, SSL_read_ex / SSL_write_ex on the connection's socket.
 *
 * The owner picks it for a connection by setting c->xprt_ctx to a
 * struct kr_tls_ctx (kr_tls_ctx.h: a listener's, making krelay the TLS
 * server, or an upstream's, the client) before kr_conn_open with
 * &kr_tls_ops; the connection takes its own reference to the context.
 * For an upstream c->host names the broker (SNI, certificate check).
 *
 * Stages (kr_conn.h): before KR_STAGE_HANDSHAKE a read takes the
 * socket's bytes as they are, at most KR_TLS_SNIFF_MAX of them (the
 * owner's sniff: a ClientHello, or plaintext Kafka or HTTP sent to a TLS
 * port); the handshake's first step creates the SSL and feeds it what the
 * sniff left in c->in before reading the socket.  Nothing large is
 * allocated before then: the SSL and its buffers come with the handshake,
 * and OpenSSL releases its buffers while the connection is idle.
 *
 * Reads decrypt into c->in up to the size asked (records, one after the
 * other); what OpenSSL holds beyond is pending (kr_conn_kick).  Writes go
 * straight from c->out's chains (partial writes, moving buffers: no copy),
 * except that a run of small chains (each below KR_TLS_COALESCE) is
 * copied into one record of up to KR_TLS_COALESCE bytes; those bytes are
 * counted in c->copied.  A step that must wait for the opposite event
 * (SSL_ERROR_WANT_WRITE on a read, WANT_READ on a write) says so in
 * c->want.  splice is off.  Knows no Kafka.
 *
 * After the handshake, what read ahead took off the socket with the
 * peer's last handshake message (a client writing its first request right
 * behind its Finished) is pending.  On a listener with session resumption
 * (kr_tls_ctx.h), a TLS 1.3 connection's session ticket is sent with the
 * first write, not after the handshake.
 */
#ifndef KR_TLS_H
#define KR_TLS_H

#include <openssl/x509.h>

#include "kr_conn.h"
#include "kr_tls_ctx.h"

/* Most bytes read raw before the handshake (the sniff). */
#define KR_TLS_SNIFF_MAX 16
/* Small chains are coalesced into records of up to this many bytes
   (TLS's largest record: 16 KiB of plaintext). */
#define KR_TLS_COALESCE 16384

/* The transport. */
extern const struct kr_conn_ops kr_tls_ops;

/*
 * The subject of the certificate c's peer presented and the handshake
 * verified (a listener with ssl_client_ca: the client's; an upstream:
 * the broker's), or NULL (not TLS, handshake not done, no certificate,
 * or not verified).  For a resumed session, the one its first, verified
 * handshake saw.  Owned by c's SSL: valid until c is closed.
 */
const X509_NAME *kr_tls_peer_subject(const struct kr_conn *c);

/*
 * Whether the verified peer certificate of c (as kr_tls_peer_subject)
 * has a subjectAltName extension marked critical: with an empty subject
 * the JDK (so Kafka) accepts a certificate only then (RFC 5280 4.1.2.6).
 */
bool kr_tls_peer_san_critical(const struct kr_conn *c);

/*
 * The host name c's client sent in its ClientHello (SNI: kr_tls_ssl_sni,
 * this handshake's, also when it resumed a session), or NULL (none sent,
 * not TLS, not a server's connection, no ClientHello read yet).  Owned by
 * c's SSL: valid until c is closed.
 */
const char *kr_tls_sni(const struct kr_conn *c);

/*
 * "TLSv1.3 TLS_AES_128_GCM_SHA256" (and " resumed") of c's TLS
 * connection into buf, or "" when it has none yet.  Returns buf.
 */
const char *kr_tls_describe(const struct kr_conn *c, char *buf, size_t len);

#endif /* KR_TLS_H */
