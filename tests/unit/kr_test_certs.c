/*
 * kr_test_certs.c - test certificates made with the OpenSSL API
 * (kr_test_certs.h).
 */
#include "config.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "kr_test_certs.h"

/* One certificate and its key. */
struct tc {
    EVP_PKEY *key;
    X509 *crt;
};

static int
add_ext(X509 *crt, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int ok;

    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, crt, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) {
        return -1;
    }
    ok = X509_add_ext(crt, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1 ? 0 : -1;
}

/*
 * A certificate for subject (O, CN; o may be NULL) signed by ca (NULL:
 * self-signed), with the extensions exts[] (nid, value pairs, 0 ends).
 */
static int
make(struct tc *out, const struct tc *ca, const char *o, const char *cn,
     long serial, const int *nids, const char *const *vals)
{
    X509_NAME *name;
    int i;

    memset(out, 0, sizeof(*out));
    out->key = EVP_EC_gen("P-256");
    out->crt = X509_new();
    if (out->key == NULL || out->crt == NULL) {
        return -1;
    }
    X509_set_version(out->crt, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(out->crt), serial);
    X509_gmtime_adj(X509_getm_notBefore(out->crt), -3600);
    X509_gmtime_adj(X509_getm_notAfter(out->crt), 2 * 86400);
    X509_set_pubkey(out->crt, out->key);
    name = X509_get_subject_name(out->crt);
    if ((o != NULL &&
         X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                    (const unsigned char *)o, -1, -1,
                                    0) != 1) ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   (const unsigned char *)cn, -1, -1,
                                   0) != 1) {
        return -1;
    }
    X509_set_issuer_name(out->crt, ca != NULL
                                       ? X509_get_subject_name(ca->crt)
                                       : name);
    for (i = 0; nids[i] != 0; i++) {
        if (add_ext(out->crt, ca != NULL ? ca->crt : out->crt, nids[i],
                    vals[i]) != 0) {
            return -1;
        }
    }
    return X509_sign(out->crt, ca != NULL ? ca->key : out->key,
                     EVP_sha256()) > 0 ? 0 : -1;
}

static int
save(const char *dir, const char *name, const struct tc *t, bool full)
{
    char path[4096];
    FILE *f;
    int ok;

    snprintf(path, sizeof(path), "%s/%s.pem", dir, name);
    f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    ok = PEM_write_X509(f, t->crt) == 1;
    fclose(f);
    snprintf(path, sizeof(path), "%s/%s.key", dir, name);
    f = fopen(path, "w");
    if (f == NULL || !ok) {
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    ok = PEM_write_PrivateKey(f, t->key, NULL, NULL, 0, NULL, NULL) == 1;
    fclose(f);
    if (ok && full) {
        snprintf(path, sizeof(path), "%s/%s-full.pem", dir, name);
        f = fopen(path, "w");
        if (f == NULL) {
            return -1;
        }
        ok = PEM_write_X509(f, t->crt) == 1 &&
             PEM_write_PrivateKey(f, t->key, NULL, NULL, 0, NULL, NULL) == 1;
        fclose(f);
    }
    return ok ? 0 : -1;
}

/* crl.pem: ca's CRL, revoking rev (and nothing else). */
static int
save_crl(const char *dir, const struct tc *ca, const struct tc *rev)
{
    X509_CRL *crl = X509_CRL_new();
    X509_REVOKED *r = X509_REVOKED_new();
    ASN1_TIME *t = ASN1_TIME_new();
    char path[4096];
    FILE *f;
    int ok = 0;

    if (crl == NULL || r == NULL || t == NULL) {
        goto out;
    }
    X509_CRL_set_version(crl, 1);
    X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca->crt));
    X509_gmtime_adj(t, -3600);
    X509_CRL_set1_lastUpdate(crl, t);
    X509_gmtime_adj(t, 2 * 86400);
    X509_CRL_set1_nextUpdate(crl, t);
    X509_REVOKED_set_serialNumber(r, X509_get_serialNumber(rev->crt));
    X509_gmtime_adj(t, -60);
    X509_REVOKED_set_revocationDate(r, t);
    if (X509_CRL_add0_revoked(crl, r) != 1) {
        goto out;
    }
    r = NULL;
    X509_CRL_sort(crl);
    if (X509_CRL_sign(crl, ca->key, EVP_sha256()) <= 0) {
        goto out;
    }
    snprintf(path, sizeof(path), "%s/crl.pem", dir);
    f = fopen(path, "w");
    if (f != NULL) {
        ok = PEM_write_X509_CRL(f, crl) == 1;
        fclose(f);
    }
out:
    X509_REVOKED_free(r);
    X509_CRL_free(crl);
    ASN1_TIME_free(t);
    return ok ? 0 : -1;
}

static void
tc_free(struct tc *t)
{
    EVP_PKEY_free(t->key);
    X509_free(t->crt);
}

int
kr_test_certs(const char *dir)
{
    static const int ca_nids[] = {
        NID_basic_constraints, NID_key_usage, NID_subject_key_identifier, 0
    };
    static const char *const ca_vals[] = {
        "critical,CA:true", "critical,keyCertSign,cRLSign", "hash"
    };
    static const int leaf_nids[] = {
        NID_basic_constraints, NID_key_usage, NID_ext_key_usage,
        NID_authority_key_identifier, NID_subject_alt_name, 0
    };
    static const int client_nids[] = {
        NID_basic_constraints, NID_key_usage, NID_ext_key_usage,
        NID_authority_key_identifier, 0
    };
    static const char *const server_vals[] = {
        "CA:false", "critical,digitalSignature", "serverAuth", "keyid",
        "DNS:localhost,IP:127.0.0.1"
    };
    static const char *const other_vals[] = {
        "CA:false", "critical,digitalSignature", "serverAuth", "keyid",
        "DNS:other.example"
    };
    static const char *const sni_vals[] = {
        "CA:false", "critical,digitalSignature", "serverAuth", "keyid",
        "DNS:kafka.test,DNS:*.kafka.test"
    };
    static const char *const client_vals[] = {
        "CA:false", "critical,digitalSignature", "clientAuth", "keyid"
    };
    struct tc ca, rca, server, other, sni, client, rogue, revoked;
    int rc = -1;

    memset(&ca, 0, sizeof(ca));
    memset(&rca, 0, sizeof(rca));
    memset(&server, 0, sizeof(server));
    memset(&other, 0, sizeof(other));
    memset(&sni, 0, sizeof(sni));
    memset(&client, 0, sizeof(client));
    memset(&rogue, 0, sizeof(rogue));
    memset(&revoked, 0, sizeof(revoked));
    if (make(&ca, NULL, "krelay tests", "krelay test CA", 1, ca_nids,
             ca_vals) != 0 ||
        make(&rca, NULL, "krelay tests", "krelay rogue CA", 2, ca_nids,
             ca_vals) != 0 ||
        make(&server, &ca, NULL, "localhost", 3, leaf_nids,
             server_vals) != 0 ||
        make(&other, &ca, NULL, "other.example", 4, leaf_nids,
             other_vals) != 0 ||
        make(&client, &ca, "krelay tests", "krelay-test-client", 5,
             client_nids, client_vals) != 0 ||
        make(&rogue, &rca, NULL, "krelay-rogue-client", 6, client_nids,
             client_vals) != 0 ||
        make(&revoked, &ca, "krelay tests", "krelay-revoked-client", 7,
             client_nids, client_vals) != 0 ||
        make(&sni, &ca, NULL, "kafka.test", 8, leaf_nids, sni_vals) != 0) {
        fprintf(stderr, "kr_test_certs: cannot make the certificates\n");
        goto out;
    }
    if (save(dir, "ca", &ca, false) != 0 ||
        save(dir, "rogue-ca", &rca, false) != 0 ||
        save(dir, "server", &server, true) != 0 ||
        save(dir, "other", &other, false) != 0 ||
        save(dir, "sni", &sni, true) != 0 ||
        save(dir, "client", &client, false) != 0 ||
        save(dir, "rogue", &rogue, false) != 0 ||
        save(dir, "revoked", &revoked, false) != 0 ||
        save_crl(dir, &ca, &revoked) != 0) {
        fprintf(stderr, "kr_test_certs: cannot write into %s\n", dir);
        goto out;
    }
    rc = 0;
out:
    tc_free(&ca);
    tc_free(&rca);
    tc_free(&server);
    tc_free(&other);
    tc_free(&sni);
    tc_free(&client);
    tc_free(&rogue);
    tc_free(&revoked);
    return rc;
}

char *
kr_test_certs_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    char *dir;

    if (asprintf(&dir, "%s/krelay-certs.XXXXXX",
                 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp") < 0) {
        return NULL;
    }
    if (mkdtemp(dir) == NULL || kr_test_certs(dir) != 0) {
        kr_test_certs_rm(dir);
        return NULL;
    }
    return dir;
}

void
kr_test_certs_rm(char *dir)
{
    DIR *d;
    struct dirent *e;
    char path[4096];

    if (dir == NULL) {
        return;
    }
    d = opendir(dir);
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}
