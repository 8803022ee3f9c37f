/*
 * kr_tls_ctx.h - TLS contexts (OpenSSL 3 SSL_CTX) built from file names
 * and a few settings: one for a [listener] (krelay is the TLS server of
 * its clients) or an [upstream] (krelay is the TLS client of the
 * brokers).
 *
 * The config loader (kr_conf.c) builds one per section with ssl = true
 * while it loads, so a file that does not load is a config error with the
 * key's FILE:LINE (`krelay -t`, a refused reload), and the config owns
 * the context: each config generation has its own, a reload builds new
 * ones, and connections made before keep theirs (reference counted,
 * kr_tls_ctx_ref / kr_tls_ctx_put; an SSL also holds its SSL_CTX).  The
 * transport that uses them is kr_tls.h.
 *
 * This module knows OpenSSL and files only: no event loop, no config, no
 * Kafka.  Secrets (key contents, passphrases) are never written anywhere;
 * an encrypted key is refused (no passphrase is ever asked for).
 */
#ifndef KR_TLS_CTX_H
#define KR_TLS_CTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "kr_common.h"

/* Lowest protocol version accepted (ssl_min_protocol: its choice index). */
enum kr_tls_version {
    KR_TLS_V1_2 = 0,                    /* "TLSv1.2" (the default) */
    KR_TLS_V1_3                         /* "TLSv1.3" */
};

/* What a context is built from.  Strings are borrowed for the call. */
struct kr_tls_opts {
    bool server;                        /* a listener's (else a client's,
                                           towards the brokers) */
    const char *certificate;            /* PEM file: the certificate, then
                                           its chain; server: required;
                                           client: optional (a client
                                           certificate) */
    const char *key;                    /* PEM file of its private key;
                                           NULL: in certificate's file */
    const char *ca;                     /* PEM CA bundle.  server: the CAs
                                           client certificates must chain
                                           to (mTLS: a client without a
                                           valid one is refused), NULL: no
                                           client certificate asked for;
                                           client: the CAs the brokers'
                                           certificates must chain to,
                                           NULL: the system's store */
    const char *crl;                    /* server, with ca: a PEM file of
                                           CRLs; the client certificate is
                                           checked against it.  NULL: none */
    enum kr_tls_version min_version;
    const char *ciphers;                /* TLS 1.2 cipher list (OpenSSL's
                                           syntax), NULL: OpenSSL's */
    const char *ciphersuites;           /* TLS 1.3 suites, NULL: OpenSSL's */
    bool verify_hostname;               /* client: the broker's certificate
                                           must name the host dialled (its
                                           DNS name, or its IP address in
                                           an IP SAN) */
    const char *id;                     /* server: the section's name
                                           (put in its session id
                                           context); NULL: "" */
    bool resumption;                    /* server: clients may resume
                                           sessions (tickets and the
                                           session cache, both of this
                                           context only); false: every
                                           handshake is a full one */
};

/* Which of the options a failure is about (for the key's line). */
enum kr_tls_opt {
    KR_TLS_OPT_NONE = 0,                /* none in particular (memory) */
    KR_TLS_OPT_CERTIFICATE,
    KR_TLS_OPT_KEY,
    KR_TLS_OPT_CA,
    KR_TLS_OPT_CRL,
    KR_TLS_OPT_CIPHERS,
    KR_TLS_OPT_CIPHERSUITES
};

/*
 * A context: SSL_CTX with the settings krelay always uses (below), shared
 * by every connection made with it, on any thread.  Read only once built.
 *
 * Always: TLS 1.2 at least (min_version), renegotiation refused
 * (SSL_OP_NO_RENEGOTIATION: a renegotiated client certificate would
 * change who the peer is mid-connection), no TLS 1.3 early data (a
 * replayed Produce), compression off, an EOF without close_notify read
 * as an EOF (Kafka's frames carry their length), partial writes and
 * moving write buffers (kr_tls writes straight from evbuffer chains),
 * read ahead, buffers released while idle (SSL_MODE_RELEASE_BUFFERS).
 *
 * A server's sessions belong to its context, so to one config generation
 * (a reload builds new contexts): ticket keys drawn at random for it, its
 * own session cache, and a session id context unique to it in the
 * process ("krelay#N NAME").  A session of an older generation, by ticket
 * or by id, is not resumed: the client gets a full handshake, verified
 * against this context's CA and CRL.  A resumed session's peer
 * certificate is the one its first handshake verified (kr_tls.h:
 * kr_tls_peer_subject).  TLS 1.3 tickets are not sent with the
 * handshake: kr_tls sends one just before the first bytes krelay writes
 * on the connection (a response), as a Kafka client reads only when it
 * waits for one (kafka-python 2.0.2 takes unasked-for bytes for a dead
 * connection and reconnects).  With resumption false: no tickets (none
 * sent, SSL_OP_NO_TICKET) and no cache (SSL_SESS_CACHE_OFF).
 * Early data offered by a client is refused (rejected and skipped: the
 * handshake goes on without it).  A client's context keeps no sessions:
 * each connection to a broker is a full handshake.
 * A server's keeps the name each ClientHello sent (kr_tls_ssl_sni).
 */
struct kr_tls_ctx {
    SSL_CTX *ssl;
    atomic_int refs;
    unsigned server:1;
    unsigned verify_hostname:1;         /* client: check the host name */
    unsigned verify_peer:1;             /* server: a client certificate
                                           is required and verified */
    unsigned resumption:1;              /* server: sessions may be
                                           resumed */
};

/*
 * Does the certificate of server context t name host (a DNS name, its
 * subjectAltNames with wildcards as a client checks them: X509_check_host,
 * RFC 6125)?  false for a client context or no certificate.  For `krelay
 * -t`'s warning that a client verifying host names would refuse a name
 * SNI routing advertises.
 */
bool kr_tls_ctx_names(const struct kr_tls_ctx *t, const char *host);

/*
 * Build a context from o.  Returns it (one reference: the caller's), or
 * NULL with *bad naming the option at fault and err (errlen bytes, may be
 * NULL) one line without the option's name: "cannot open /x.pem: No such
 * file or directory", "/x.pem: no start line (PEM routines)", "/k.pem:
 * the key does not match the certificate", "no cipher matches 'FOO'".
 * OpenSSL's error queue of this thread is left empty.
 */
struct kr_tls_ctx *kr_tls_ctx_new(const struct kr_tls_opts *o,
                                  enum kr_tls_opt *bad, char *err,
                                  size_t errlen) KR_MUST_CHECK;

/* One more reference to t (not NULL); returns t.  Any thread. */
struct kr_tls_ctx *kr_tls_ctx_ref(struct kr_tls_ctx *t);

/* Drop one reference; the last frees t.  NULL is a no-op.  Any thread. */
void kr_tls_ctx_put(struct kr_tls_ctx *t);

/*
 * A new SSL of t, in the role of t, with what a connection to host needs
 * when t is a client's: SNI set to host unless host is an IP literal
 * (RFC 6066) or empty, and with verify_hostname the certificate checked
 * against host (a DNS name: SAN dNSName or, without one, CN; an IP
 * literal, with or without brackets: an IP SAN).  host is ignored for a
 * server's.  Returns the SSL (the caller frees it: SSL_free), or NULL
 * with err (one line): out of memory, or verify_hostname without a host.
 */
SSL *kr_tls_ssl_new(const struct kr_tls_ctx *t, const char *host, char *err,
                    size_t errlen);

/*
 * The host name (SNI, RFC 6066) the latest ClientHello on ssl, an SSL of
 * a server's context, sent: 1 to 255 bytes, no NUL, as sent (not lower
 * cased, not checked to be a host name), or NULL when it sent none (or
 * ssl is a client's, or no ClientHello came yet).  Read from the
 * ClientHello itself by the context's ClientHello callback: for a
 * resumed session too, the name this handshake sent, never the one the
 * session was made under.  A malformed server_name extension fails the
 * handshake (decode_error).  Owned by ssl.
 */
const char *kr_tls_ssl_sni(const SSL *ssl);

/*
 * One line for what OpenSSL's error queue of this thread says (its first
 * error: "certificate verify failed (SSL routines)"), with ssl's
 * certificate verification result when that failed ("certificate verify
 * failed: hostname mismatch"); ssl may be NULL.  The queue is emptied.
 * "unknown error" when the queue is empty.  Returns buf.
 */
const char *kr_tls_err_str(const SSL *ssl, char *buf, size_t len);

#endif /* KR_TLS_CTX_H */
