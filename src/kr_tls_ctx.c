/*
 * kr_tls_ctx.c - TLS contexts from file names and settings
 * (kr_tls_ctx.h): OpenSSL 3 only, no event loop.
 *
 * Files are opened here first (fopen) so that a missing or unreadable
 * one is named with the system's reason; what OpenSSL then refuses in it
 * comes from its error queue (kr_tls_err_str).  No passphrase callback
 * ever prompts: an encrypted key is an error.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "kr_tls_ctx.h"

/* The SSL ex_data index of why the ClientHello callback refused the
   hello (a static string, for kr_tls_err_str: OpenSSL itself says only
   "callback failed"); -1 until sni_index_make. */
static int hello_why_index = -1;

/* A passphrase is never asked for (a terminal prompt would hang a
   daemon): an encrypted key fails to load. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

bool
kr_tls_ctx_names(const struct kr_tls_ctx *t, const char *host)
{
    X509 *cert;
    int r;

    if (t == NULL || !t->server || host == NULL ||
        (cert = SSL_CTX_get0_certificate(t->ssl)) == NULL) {
        return false;
    }
    r = X509_check_host(cert, host, strlen(host), 0, NULL);
    ERR_clear_error();
    return r == 1;
}

const char *
kr_tls_err_str(const SSL *ssl, char *buf, size_t len)
{
    unsigned long e = ERR_peek_error();
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    const char *lib = e != 0 ? ERR_lib_error_string(e) : NULL;

    const char *hello = ssl != NULL && hello_why_index >= 0
                            ? SSL_get_ex_data(ssl, hello_why_index)
                            : NULL;

    if (len == 0) {
        ERR_clear_error();
        return buf;
    }
    if (hello != NULL) {
        snprintf(buf, len, "%s", hello);
    } else if (vr != X509_V_OK &&
        (e == 0 || ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED)) {
        snprintf(buf, len, "certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
    } else if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SYS) {
        snprintf(buf, len, "%s", strerror(ERR_GET_REASON(e)));
    } else if (reason != NULL) {
        snprintf(buf, len, "%s%s%s%s", reason, lib != NULL ? " (" : "",
                 lib != NULL ? lib : "", lib != NULL ? ")" : "");
    } else if (e != 0) {
        snprintf(buf, len, "OpenSSL error %lx", e);
    } else {
        snprintf(buf, len, "unknown error");
    }
    ERR_clear_error();
    return buf;
}

/* path opens for reading; else err says why. */
static bool
file_ok(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return false;
    }
    fclose(f);
    return true;
}

/* err = "PATH: what OpenSSL says". */
static void
file_err(const char *path, char *err, size_t errlen)
{
    char why[200];

    snprintf(err, errlen, "%s: %s", path, kr_tls_err_str(NULL, why,
                                                          sizeof(why)));
}

/*
 * Is the first error in the queue about a passphrase (no_passphrase
 * refused to give one: OpenSSL 3 says "interrupted or cancelled")?
 */
static bool
err_is_passphrase(void)
{
    unsigned long e = ERR_peek_error();

    return (ERR_GET_LIB(e) == ERR_LIB_CRYPTO &&
            ERR_GET_REASON(e) == ERR_R_INTERRUPTED_OR_CANCELLED) ||
           (ERR_GET_LIB(e) == ERR_LIB_PEM &&
            (ERR_GET_REASON(e) == PEM_R_BAD_PASSWORD_READ ||
             ERR_GET_REASON(e) == PEM_R_PROBLEMS_GETTING_PASSWORD ||
             ERR_GET_REASON(e) == PEM_R_BAD_DECRYPT));
}

/* ---- the server name of the ClientHello -------------------------------- */

/*
 * SNI routing (kr_tls_ssl_sni) needs the name of this handshake's own
 * ClientHello: for a TLS 1.2 session resumed, OpenSSL ties the name to
 * the session (SSL_get_servername gives the session's, or on 3.0 NULL),
 * and a client may resume under another name.  The ClientHello callback
 * keeps the name it sent in the SSL's ex_data (malloc'd, freed with the
 * SSL).
 */
static int sni_index = -1;
static pthread_once_t sni_once = PTHREAD_ONCE_INIT;

static void
sni_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
         void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    free(ptr);
}

static void
sni_index_make(void)
{
    sni_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, sni_free);
    hello_why_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/*
 * The host_name of a server_name extension's body (p, n bytes), into
 * *name (malloc'd, NUL-terminated).  RFC 6066: a list (2-byte length) of
 * one entry, type host_name (0), 1 to 255 bytes without NUL.  Returns 1,
 * 0 when malformed, -1 out of memory.
 */
static int
sni_parse(const unsigned char *p, size_t n, char **name)
{
    size_t list, len;

    if (n < 5) {
        return 0;
    }
    list = (size_t)p[0] << 8 | p[1];
    len = (size_t)p[3] << 8 | p[4];
    if (list != n - 2 || p[2] != TLSEXT_NAMETYPE_host_name ||
        len != list - 3 || len == 0 || len > 255 ||
        memchr(p + 5, '\0', len) != NULL) {
        return 0;
    }
    *name = malloc(len + 1);
    if (*name == NULL) {
        return -1;
    }
    memcpy(*name, p + 5, len);
    (*name)[len] = '\0';
    return 1;
}

/* SSL_CTX_set_client_hello_cb's callback of server contexts. */
static int
sni_hello_cb(SSL *ssl, int *al, void *arg)
{
    const unsigned char *p;
    size_t n;
    char *name = NULL;
    int r;

    (void)arg;
    if (sni_index < 0) {
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    /* a second ClientHello (after a HelloRetryRequest) replaces it; not
       set when there is none: setting even NULL makes OpenSSL allocate
       the SSL's ex_data (two blocks, 96 bytes an idle connection would
       keep for nothing) */
    name = SSL_get_ex_data(ssl, sni_index);
    if (name != NULL) {
        free(name);
        (void)SSL_set_ex_data(ssl, sni_index, NULL);
        name = NULL;
    }
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p,
                                  &n) != 1) {
        return SSL_CLIENT_HELLO_SUCCESS;
    }
    r = sni_parse(p, n, &name);
    if (r <= 0) {
        *al = r == 0 ? SSL_AD_DECODE_ERROR : SSL_AD_INTERNAL_ERROR;
        if (hello_why_index >= 0) {
            (void)SSL_set_ex_data(ssl, hello_why_index,
                                  r == 0 ? "malformed server_name extension "
                                           "(SNI, RFC 6066) in the "
                                           "ClientHello"
                                         : "out of memory");
        }
        return SSL_CLIENT_HELLO_ERROR;
    }
    if (SSL_set_ex_data(ssl, sni_index, name) != 1) {
        free(name);
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

const char *
kr_tls_ssl_sni(const SSL *ssl)
{
    if (ssl == NULL || sni_index < 0) {
        return NULL;
    }
    return SSL_get_ex_data(ssl, sni_index);
}

/* The certificate chain and its key. */
static enum kr_tls_opt
load_cert(SSL_CTX *ctx, const struct kr_tls_opts *o, char *err,
          size_t errlen)
{
    const char *key = o->key != NULL ? o->key : o->certificate;

    if (!file_ok(o->certificate, err, errlen)) {
        return KR_TLS_OPT_CERTIFICATE;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, o->certificate) != 1) {
        file_err(o->certificate, err, errlen);
        return KR_TLS_OPT_CERTIFICATE;
    }
    if (!file_ok(key, err, errlen)) {
        return o->key != NULL ? KR_TLS_OPT_KEY : KR_TLS_OPT_CERTIFICATE;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        unsigned long e = ERR_peek_error();

        if (err_is_passphrase()) {
            ERR_clear_error();
            snprintf(err, errlen, "%s: the private key is encrypted, and "
                     "krelay asks for no passphrase (store it decrypted, "
                     "readable by krelay only)", key);
        } else if (ERR_GET_LIB(e) == ERR_LIB_X509 &&
                   ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            snprintf(err, errlen, "%s: the private key does not match the "
                     "certificate in %s", key, o->certificate);
        } else if (ERR_GET_LIB(e) == ERR_LIB_OSSL_DECODER ||
                   (ERR_GET_LIB(e) == ERR_LIB_PEM &&
                    ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
            ERR_clear_error();
            snprintf(err, errlen, "%s: no PEM private key in it%s", key,
                     o->key == NULL ? " (name the key's file with ssl_key)"
                                    : "");
        } else {
            file_err(key, err, errlen);
        }
        return o->key != NULL ? KR_TLS_OPT_KEY : KR_TLS_OPT_CERTIFICATE;
    }
    return KR_TLS_OPT_NONE;
}

/* The CA bundle (and the CRLs) certificates of the peer must chain to. */
static enum kr_tls_opt
load_ca(SSL_CTX *ctx, const struct kr_tls_opts *o, char *err, size_t errlen)
{
    X509_STORE *st;
    X509_LOOKUP *lu;
    int n;

    if (o->ca == NULL) {
        if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            char why[200];

            snprintf(err, errlen, "the system's CA store: %s",
                     kr_tls_err_str(NULL, why, sizeof(why)));
            return KR_TLS_OPT_CA;
        }
        return KR_TLS_OPT_NONE;
    }
    if (!file_ok(o->ca, err, errlen)) {
        return KR_TLS_OPT_CA;
    }
    if (SSL_CTX_load_verify_file(ctx, o->ca) != 1) {
        file_err(o->ca, err, errlen);
        return KR_TLS_OPT_CA;
    }
    if (o->server) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->ca);

        if (names == NULL) {
            file_err(o->ca, err, errlen);
            return KR_TLS_OPT_CA;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
    }
    if (o->crl == NULL) {
        return KR_TLS_OPT_NONE;
    }
    if (!file_ok(o->crl, err, errlen)) {
        return KR_TLS_OPT_CRL;
    }
    st = SSL_CTX_get_cert_store(ctx);
    lu = st != NULL ? X509_STORE_add_lookup(st, X509_LOOKUP_file()) : NULL;
    n = lu != NULL ? X509_load_crl_file(lu, o->crl, X509_FILETYPE_PEM) : 0;
    if (n <= 0) {
        if (ERR_peek_error() == 0) {
            snprintf(err, errlen, "%s: no CRL in it", o->crl);
        } else {
            file_err(o->crl, err, errlen);
        }
        return KR_TLS_OPT_CRL;
    }
    /* the peer's own certificate is checked (its issuer's CRL must be in
       the file: a missing one fails the handshake) */
    X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK);
    return KR_TLS_OPT_NONE;
}

/* Server contexts made by this process: each one's session id context
   carries its number (server_sessions). */
static atomic_uint_fast64_t server_serial;

/* Early data is never accepted, whatever the session would allow. */
static int
refuse_early_data(SSL *ssl, void *arg)
{
    (void)ssl;
    (void)arg;
    return 0;
}

/*
 * A server context's session resumption (kr_tls_ctx.h): off (no tickets,
 * no cache), or tickets and the cache of this context only.  OpenSSL
 * would already give each SSL_CTX its own random ticket keys and cache;
 * both are set here so that nothing depends on that: ticket keys drawn
 * now, a session id context naming this very context (a session of
 * another context, even one presented to this one's cache, is a miss).
 * False when OpenSSL fails (memory, randomness).
 */
static bool
server_sessions(SSL_CTX *ctx, const struct kr_tls_opts *o)
{
    uint_fast64_t serial = atomic_fetch_add(&server_serial, 1) + 1;
    char sid[SSL_MAX_SID_CTX_LENGTH + 1];
    unsigned char keys[80];             /* name 16, HMAC 32, AES 32 */
    size_t n;
    bool ok;

    /* unique per context of the process (the section's name after it is
       for people; cut at OpenSSL's 32 bytes); with client certificates
       OpenSSL needs one, or a resumed handshake fails */
    n = (size_t)snprintf(sid, sizeof(sid), "krelay#%" PRIuFAST64 " %s",
                         serial, o->id != NULL ? o->id : "");
    if (n > SSL_MAX_SID_CTX_LENGTH) {
        n = SSL_MAX_SID_CTX_LENGTH;
    }
    if (SSL_CTX_set_session_id_context(ctx, (const unsigned char *)sid,
                                       (unsigned)n) != 1) {
        return false;
    }
    /* TLS 1.3 early data: none (a replayed Produce would be applied
       twice).  Tickets never allow it (max_early_data 0, kr_tls_ctx_new),
       and an offer is refused by the callback as well: OpenSSL rejects
       it, skips its records unread, and the handshake goes on */
    SSL_CTX_set_allow_early_data_cb(ctx, refuse_early_data, NULL);
    if (!o->resumption) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        return SSL_CTX_set_num_tickets(ctx, 0) == 1;
    }
    /* TLS 1.3 tickets: none with the handshake; kr_tls sends one with
       the first response (SSL_new_session_ticket) */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    if (SSL_CTX_set_num_tickets(ctx, 0) != 1) {
        return false;
    }
    ok = RAND_priv_bytes(keys, sizeof(keys)) == 1 &&
         SSL_CTX_set_tlsext_ticket_keys(ctx, keys, sizeof(keys)) == 1;
    OPENSSL_cleanse(keys, sizeof(keys));
    return ok;
}

struct kr_tls_ctx *
kr_tls_ctx_new(const struct kr_tls_opts *o, enum kr_tls_opt *bad, char *err,
               size_t errlen)
{
    struct kr_tls_ctx *t;
    SSL_CTX *ctx;
    char dummy[8];
    enum kr_tls_opt rc = KR_TLS_OPT_NONE;

    if (err == NULL) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    *bad = KR_TLS_OPT_NONE;
    ERR_clear_error();
    t = calloc(1, sizeof(*t));
    ctx = SSL_CTX_new(o->server ? TLS_server_method() : TLS_client_method());
    if (t == NULL || ctx == NULL) {
        snprintf(err, errlen, "out of memory");
        free(t);
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    SSL_CTX_set_min_proto_version(ctx, o->min_version == KR_TLS_V1_3
                                           ? TLS1_3_VERSION
                                           : TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
                             SSL_OP_IGNORE_UNEXPECTED_EOF |
                             SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS |
                          SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_max_early_data(ctx, 0);
    if (o->ciphers != NULL && SSL_CTX_set_cipher_list(ctx, o->ciphers) != 1) {
        snprintf(err, errlen, "no cipher matches '%s' (OpenSSL's cipher "
                 "list syntax: openssl ciphers -v LIST)", o->ciphers);
        rc = KR_TLS_OPT_CIPHERS;
        goto fail;
    }
    if (o->ciphersuites != NULL &&
        SSL_CTX_set_ciphersuites(ctx, o->ciphersuites) != 1) {
        snprintf(err, errlen, "'%s' is not a list of TLS 1.3 "
                 "ciphersuites (TLS_AES_128_GCM_SHA256:...)",
                 o->ciphersuites);
        rc = KR_TLS_OPT_CIPHERSUITES;
        goto fail;
    }
    if (o->certificate != NULL) {
        rc = load_cert(ctx, o, err, errlen);
        if (rc != KR_TLS_OPT_NONE) {
            goto fail;
        }
    } else if (o->server) {
        snprintf(err, errlen, "a TLS listener needs a certificate");
        rc = KR_TLS_OPT_CERTIFICATE;
        goto fail;
    }
    if (!o->server || o->ca != NULL) {
        rc = load_ca(ctx, o, err, errlen);
        if (rc != KR_TLS_OPT_NONE) {
            goto fail;
        }
        SSL_CTX_set_verify(ctx, o->server ? SSL_VERIFY_PEER |
                                            SSL_VERIFY_FAIL_IF_NO_PEER_CERT |
                                            SSL_VERIFY_CLIENT_ONCE
                                          : SSL_VERIFY_PEER, NULL);
        t->verify_peer = o->server;
    }
    if (o->server) {
        pthread_once(&sni_once, sni_index_make);
        if (sni_index < 0) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        SSL_CTX_set_client_hello_cb(ctx, sni_hello_cb, NULL);
    }
    if (!o->server) {
        /* no session is kept: kr_tls never offers one to a broker */
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    } else if (!server_sessions(ctx, o)) {
        char why[200];

        snprintf(err, errlen, "TLS session settings: %s",
                 kr_tls_err_str(NULL, why, sizeof(why)));
        goto fail;
    }
    t->ssl = ctx;
    atomic_init(&t->refs, 1);
    t->server = o->server;
    t->resumption = o->server && o->resumption;
    t->verify_hostname = !o->server && o->verify_hostname;
    ERR_clear_error();
    return t;
fail:
    *bad = rc;
    SSL_CTX_free(ctx);
    free(t);
    ERR_clear_error();
    return NULL;
}

struct kr_tls_ctx *
kr_tls_ctx_ref(struct kr_tls_ctx *t)
{
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void
kr_tls_ctx_put(struct kr_tls_ctx *t)
{
    if (t == NULL ||
        atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    SSL_CTX_free(t->ssl);
    free(t);
}

/* host as an IP literal ("[::1]" and "::1" both), into buf; NULL when
   it is a name. */
static const char *
ip_literal(const char *host, char *buf, size_t len)
{
    size_t n = strlen(host);
    unsigned char a[16];

    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= len) {
        return NULL;
    }
    memcpy(buf, host, n);
    buf[n] = '\0';
    if (strchr(buf, '%') != NULL) {
        *strchr(buf, '%') = '\0';       /* a zone: not in certificates */
    }
    return inet_pton(AF_INET, buf, a) == 1 || inet_pton(AF_INET6, buf, a) == 1
               ? buf
               : NULL;
}

SSL *
kr_tls_ssl_new(const struct kr_tls_ctx *t, const char *host, char *err,
               size_t errlen)
{
    SSL *ssl = SSL_new(t->ssl);
    char ipbuf[64];
    const char *ip;

    if (ssl == NULL) {
        ERR_clear_error();
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (t->server) {
        SSL_set_accept_state(ssl);
        return ssl;
    }
    SSL_set_connect_state(ssl);
    if (host == NULL) {
        host = "";
    }
    ip = ip_literal(host, ipbuf, sizeof(ipbuf));
    if (host[0] != '\0' && ip == NULL &&
        SSL_set_tlsext_host_name(ssl, host) != 1) {
        snprintf(err, errlen, "cannot send \"%s\" as SNI", host);
        goto fail;
    }
    if (!t->verify_hostname) {
        return ssl;
    }
    if (host[0] == '\0') {
        snprintf(err, errlen, "no host name to check the certificate "
                 "against");
        goto fail;
    }
    if (ip != NULL
            ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) != 1
            : SSL_set1_host(ssl, host) != 1) {
        snprintf(err, errlen, "cannot check the certificate against \"%s\"",
                 host);
        goto fail;
    }
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return ssl;
fail:
    ERR_clear_error();
    SSL_free(ssl);
    return NULL;
}
