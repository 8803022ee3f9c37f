/*
 * kr_conf.c - load krelay.ini into a fresh struct kr_conf.
 *
 * Phases (style.md 3.7): parse with inih into per-section objects, apply
 * defaults, check required keys, then check the whole (port clashes,
 * upstream references).  Every error is collected as "FILE:LINE: message";
 * the config is returned only when there was none.
 *
 * Every key lives in one table, kr_conf_keys[], with its type, offset,
 * default, range and help; the inih handler only looks keys up there.
 *
 * Debian's libinih 55 (see shared/docs/test-peers.md) passes no line
 * number to the handler, cuts long lines, and treats an indented line as
 * the continuation of the previous value.  So inih reads through our own
 * reader, which hands it one physical line at a time and counts lines (the
 * handler runs while that line is current), strips leading blanks (no line
 * is ever a continuation), replaces an over-long line with a comment after
 * reporting it, and parses section headers itself (inih's section buffer
 * is 50 bytes, and a header with no keys would never reach the handler).
 * A key line that never reaches the handler is a syntax error.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "kr_action.h"
#include "kr_api_keys.h"
#include "kr_broker_versions.h"
#include "kr_conf.h"
#include "kr_kerr.h"
#include "kr_log.h"
#include "kr_principal.h"
#include "kr_sasl_server.h"
#include "kr_sasl_users.h"
#include "kr_schema.h"
#include "kr_sni.h"
#include "kr_tls_ctx.h"

#include <openssl/crypto.h>

/*
 * Debian's libinih exports its compile-time settings as variables; raise
 * the line limit when that one exists (weak: other builds lack it, and
 * then the reader enforces whatever buffer size inih passes it).
 */
extern int ini_max_line;
#pragma weak ini_max_line

/* Longest line accepted, in bytes without the newline. */
#define KR_CONF_MAX_LINE 1024
/* Largest file read. */
#define KR_CONF_MAX_FILE (4 * 1024 * 1024)
#define KR_CONF_MAX_NAME 64

enum kr_cf_sect {
    KR_CS_LISTENER = 0,
    KR_CS_UPSTREAM,
    KR_CS_LOG,
    KR_CS_RULE,
    KR_CS_AUDIT,
    KR_CS_ADMIN,
    KR_CS_PROCESS,
    KR_CS_NKINDS
};

static const char *const kr_cf_sect_names[KR_CS_NKINDS] = {
    [KR_CS_LISTENER] = "listener",
    [KR_CS_UPSTREAM] = "upstream",
    [KR_CS_LOG] = "log",
    [KR_CS_RULE] = "rule",
    [KR_CS_AUDIT] = "audit",
    [KR_CS_ADMIN] = "admin",
    [KR_CS_PROCESS] = "process",
};

enum kr_cf_type {
    KR_CT_HOSTPORT,         /* struct kr_hostport, host may be empty */
    KR_CT_HOSTPORT_LIST,    /* struct kr_hostport * + int count at off2 */
    KR_CT_HOST,             /* char *: host name or IP address */
    KR_CT_NAME,             /* char *: a section name */
    KR_CT_STRING,           /* char *: free text, not empty */
    KR_CT_PATH,             /* char *: a file's path, not empty */
    KR_CT_PORT,             /* uint16_t */
    KR_CT_I32,              /* int32_t */
    KR_CT_I64,              /* int64_t: counts, _ms, _bytes */
    KR_CT_BOOL,             /* bool: true or false */
    KR_CT_LEVEL,            /* int: enum kr_log_level */
    KR_CT_DIAL,             /* dial.NODEID: kr_dial_override * + count */
    KR_CT_NAMES,            /* struct kr_strlist of section names */
    KR_CT_GLOBS,            /* struct kr_strlist of globs */
    KR_CT_CIDRS,            /* struct kr_cidr * + int count at off2 */
    KR_CT_APIS,             /* int16_t * ApiKeys + int count at off2 */
    KR_CT_VRANGE,           /* "N" or "N-M": int32 lo at off, hi at off2 */
    KR_CT_CHOICE,           /* int: index into choices[] */
    KR_CT_KERR,             /* int32: Kafka error name or number */
    KR_CT_ACKS,             /* unsigned: bit (acks + 1) per -1,0,1/all */
    KR_CT_CODECS,           /* unsigned: bit per compression codec id */
    KR_CT_PROB              /* double in 0..1 */
};

#define KR_CF_REQUIRED 0x1u     /* no default: must be given */
#define KR_CF_REBIND 0x2u       /* reload: KR_RELOAD_REBIND */
#define KR_CF_NEG_UNSET 0x4u    /* a negative value means "not set" (not
                                   dumped) */
#define KR_CF_RESTART 0x8u      /* reload: KR_RELOAD_RESTART */
#define KR_CF_SECRET 0x10u      /* a secret: never dumped */
/*
 * What kr_conf_dump (krelay -T, GET /config) prints in place of a secret's
 * value.  Loaded back, it is refused with an error naming the key, not
 * taken for the secret itself.
 */
#define KR_CF_SECRET_HIDDEN "(not shown: a secret)"

/* legacy_fetch_max_bytes's least value: below 64 KiB a consumer of large
   records would crawl. */
#define KR_CF_LEGACY_FETCH_MIN 65536
#define KR_CF_NEWCONN 0x20u     /* reload: KR_RELOAD_NEWCONN */
/* A key with none of KR_CF_REBIND, KR_CF_RESTART, KR_CF_NEWCONN:
   KR_RELOAD_APPLY. */

struct kr_cf_key {
    enum kr_cf_sect sect;
    const char *name;       /* "dial." is a prefix: dial.NODEID */
    enum kr_cf_type type;
    size_t off;             /* into the section's struct */
    size_t off2;            /* count field of lists */
    const char *def;        /* default as written in the file; NULL:
                               required, or computed by the loader */
    int64_t min, max;       /* integer types */
    unsigned flags;
    const char *help;
    const char *const *choices; /* KR_CT_CHOICE: NULL-terminated, "" =
                                   no such value; KR_CT_LEVEL: the names,
                                   for the docs */
};

static const char *const kr_cf_dir_choices[] = {
    "", "request", "response", "both", NULL
};
static const char *const kr_cf_tmode_choices[] = {
    "inject", "enforce", NULL
};
static const char *const kr_cf_top_choices[] = { "set", "add", NULL };
/* ssl_min_protocol: enum kr_tls_version's order. */
static const char *const kr_cf_tls_choices[] = {
    "TLSv1.2", "TLSv1.3", NULL
};
/* sasl_mechanism: enum kr_sasl_mechanism's order (kr_sasl_client.h;
   check_sasl_client holds them together); metadata_sasl_mechanism: the
   mechanisms with a password */
static const char *const kr_cf_sasl_choices[] = {
    "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", NULL
};
static const char *const kr_cf_msasl_choices[] = {
    "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", NULL
};
/* sni_fallback: enum kr_sni_fallback's order. */
static const char *const kr_cf_sni_fallback_choices[] = {
    "close", "bootstrap", NULL
};
/* sasl: enum kr_sasl_mode's order. */
static const char *const kr_cf_sasl_mode_choices[] = {
    "passthrough", "required", "terminate", NULL
};
/* broker_profile: enum kr_broker_profile's order (kr_broker_versions.h;
   check_conf holds them together). */
static const char *const kr_cf_profile_choices[] = {
    "learned", "kafka-4.0.0", "kafka-4.0.1+", NULL
};
/* legacy_zstd: enum kr_legacy_zstd's order (kr_records.h). */
static const char *const kr_cf_legacy_zstd_choices[] = {
    "gzip", "none", "refuse", NULL
};
/* proxy_protocol: the index is kr_proxy_proto.h's KR_PP_V1/_V2 mask. */
static const char *const kr_cf_proxy_choices[] = {
    "off", "v1", "v2", "any", NULL
};
/* kr_log_level_name's names, in level order (check_conf compares). */
static const char *const kr_cf_level_choices[] = {
    "error", "warn", "notice", "info", "debug", "trace", NULL
};
/* RecordBatch attributes bits 0-2 (Kafka's CompressionType ids). */
static const char *const kr_cf_codec_names[] = {
    "none", "gzip", "snappy", "lz4", "zstd", NULL
};

#define LST(f) offsetof(struct kr_listener_conf, f)
#define UPS(f) offsetof(struct kr_upstream_conf, f)
#define LOGC(f) offsetof(struct kr_log_conf, f)
#define RUL(f) offsetof(struct kr_rule_conf, f)
#define AUD(f) offsetof(struct kr_audit_conf, f)
#define ADM(f) offsetof(struct kr_admin_conf, f)
#define PRC(f) offsetof(struct kr_process_conf, f)

static const struct kr_cf_key kr_conf_keys[] = {
    { KR_CS_LISTENER, "listen", KR_CT_HOSTPORT, LST(listen), 0, NULL,
      0, 0, KR_CF_REQUIRED | KR_CF_REBIND,
      "HOST:PORT of the bootstrap listener clients are given", NULL },
    { KR_CS_LISTENER, "advertised_host", KR_CT_HOST, LST(advertised_host),
      0, NULL, 0, 0, 0,
      "host written into Metadata responses (default: the listen host, "
      "or 127.0.0.1 when listening on a wildcard); a wildcard address "
      "here is an error", NULL },
    { KR_CS_LISTENER, "broker_port_base", KR_CT_PORT, LST(broker_port_base),
      0, NULL, 1, 65535, KR_CF_REBIND,
      "NodeId n is reached at port broker_port_base + n (required, except "
      "with sni_broker_name, where it is an error)", NULL },
    { KR_CS_LISTENER, "node_id_min", KR_CT_I32, LST(node_id_min), 0, "0",
      0, 65534, KR_CF_REBIND, "lowest NodeId given a port (with "
      "sni_broker_name: a name)", NULL },
    { KR_CS_LISTENER, "node_id_max", KR_CT_I32, LST(node_id_max), 0, "15",
      0, 65534, KR_CF_REBIND, "highest NodeId given a port (with "
      "sni_broker_name: a name)", NULL },
    { KR_CS_LISTENER, "upstream", KR_CT_NAME, LST(upstream), 0, NULL,
      0, 0, KR_CF_NEWCONN, "name of the [upstream] behind this listener "
      "(default: the only one)", NULL },
    { KR_CS_LISTENER, "max_frame_bytes", KR_CT_I64, LST(max_frame_bytes), 0,
      "67108864", 64, INT32_MAX, 0,
      "largest request, and largest response krelay must hold whole, "
      "in bytes", NULL },
    { KR_CS_LISTENER, "max_inflight", KR_CT_I64, LST(max_inflight), 0,
      "1000", 1, 1000000, 0,
      "requests awaiting a response, per client connection", NULL },
    { KR_CS_LISTENER, "max_buffer_bytes", KR_CT_I64, LST(max_buffer_bytes),
      0, "4194304", 4096, INT32_MAX, 0,
      "bytes buffered per direction per connection before reading stops",
      NULL },
    { KR_CS_LISTENER, "max_connections", KR_CT_I64, LST(max_connections), 0,
      "10000", 1, 1000000, 0,
      "client connections, bootstrap and broker ports together, per "
      "worker: with [process] workers = N the listener takes up to N "
      "times as many", NULL },
    { KR_CS_LISTENER, "idle_timeout_ms", KR_CT_I64, LST(idle_timeout_ms), 0,
      "600000", 0, INT32_MAX, 0,
      "close a client connection idle this long, in ms (0: never)", NULL },
    { KR_CS_LISTENER, "tcp_nodelay", KR_CT_BOOL, LST(tcp_nodelay), 0,
      "true", 0, 0, 0,
      "TCP_NODELAY on client connections (as Kafka brokers set it)", NULL },
    { KR_CS_LISTENER, "splice_min_bytes", KR_CT_I64, LST(splice_min_bytes),
      0, "65536", 0, INT32_MAX, 0,
      "move runs of at least this many bytes krelay does not read (record "
      "data) socket to socket with splice(2), in bytes (0: never)", NULL },
    /* issue 8: TLS with the clients */
    { KR_CS_LISTENER, "ssl", KR_CT_BOOL, LST(ssl), 0, "false", 0, 0, 0,
      "TLS on every port of this listener (bootstrap and brokers): clients "
      "must start with a TLS handshake (one that sends plaintext Kafka or "
      "HTTP is refused and logged); needs ssl_certificate", NULL },
    { KR_CS_LISTENER, "ssl_certificate", KR_CT_PATH, LST(ssl_certificate),
      0, NULL, 0, 0, 0, "PEM file: the listener's certificate, then the "
      "intermediate CA certificates clients need (a chain); read at start "
      "and by each reload", NULL },
    { KR_CS_LISTENER, "ssl_key", KR_CT_PATH, LST(ssl_key), 0, NULL, 0, 0, 0,
      "PEM file with the certificate's private key, not encrypted (make it "
      "readable by krelay only); its contents are never logged", NULL },
    { KR_CS_LISTENER, "ssl_client_ca", KR_CT_PATH, LST(ssl_client_ca), 0,
      NULL, 0, 0, 0, "PEM file of the CAs client certificates must chain "
      "to: with it every client must present a valid certificate (mutual "
      "TLS) or its handshake fails", NULL },
    { KR_CS_LISTENER, "ssl_crl", KR_CT_PATH, LST(ssl_crl), 0, NULL, 0, 0, 0,
      "PEM file of certificate revocation lists: a revoked client "
      "certificate is refused (needs ssl_client_ca; the CRL of the "
      "client certificate's issuer must be in it)", NULL },
    { KR_CS_LISTENER, "ssl_min_protocol", KR_CT_CHOICE,
      LST(ssl_min_protocol), 0, "TLSv1.2", 0, 0, 0,
      "lowest TLS version accepted: TLSv1.2 or TLSv1.3", kr_cf_tls_choices },
    { KR_CS_LISTENER, "ssl_ciphers", KR_CT_STRING, LST(ssl_ciphers), 0, NULL,
      0, 0, 0, "TLS 1.2 ciphers, in OpenSSL's cipher list syntax (openssl "
      "ciphers -v LIST shows what a list means)", NULL },
    { KR_CS_LISTENER, "ssl_ciphersuites", KR_CT_STRING,
      LST(ssl_ciphersuites), 0, NULL, 0, 0, 0,
      "TLS 1.3 ciphersuites, separated by colons", NULL },
    { KR_CS_LISTENER, "ssl_handshake_timeout_ms", KR_CT_I64,
      LST(ssl_handshake_timeout_ms), 0, "10000", 100, 3600000, 0,
      "close a client connection whose TLS handshake is not done this "
      "long after it was accepted, in ms", NULL },
    { KR_CS_LISTENER, "ssl_principal_mapping_rules", KR_CT_STRING,
      LST(ssl_principal_mapping_rules), 0, NULL, 0, 0, 0,
      "Kafka's ssl.principal.mapping.rules: how a client certificate's "
      "subject becomes the connection's principal (User:NAME), a comma "
      "separated list of DEFAULT and RULE:pattern/replacement/[LU]; a "
      "client no rule maps is refused (needs ssl_client_ca)", NULL },
    { KR_CS_LISTENER, "ssl_resumption", KR_CT_BOOL, LST(ssl_resumption), 0,
      "true", 0, 0, 0, "clients may resume a TLS session (tickets and "
      "the session cache) made since the last reload: a reload, whatever "
      "it changed, makes every client's next handshake a full one, "
      "checked against the CA and CRL then loaded; a resumed session "
      "keeps the client certificate its first handshake verified. false: "
      "no tickets, no cache, every handshake a full one", NULL },
    /* issue 9: SASL termination (sasl = terminate) */
    { KR_CS_LISTENER, "sasl_mechanisms", KR_CT_STRING, LST(sasl_mechanisms),
      0, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", 0, 0, 0,
      "with sasl = terminate: the mechanisms offered, in the order "
      "SaslHandshake lists them (Kafka's sasl.enabled.mechanisms)", NULL },
    { KR_CS_LISTENER, "sasl_credentials", KR_CT_PATH, LST(sasl_credentials),
      0, NULL, 0, 0, 0,
      "with sasl = terminate: the credentials file, a line per user and "
      "mechanism, USER SCRAM-SHA-256|SCRAM-SHA-512 salt=...,stored_key=...,"
      "server_key=...,iterations=N (krelay-passwd writes them; PLAIN "
      "logins are checked against the user's SCRAM-SHA-512 entry, else "
      "its SCRAM-SHA-256 one); read at start and by each reload; make it "
      "readable by krelay only", NULL },
    { KR_CS_LISTENER, "sasl_session_lifetime_ms", KR_CT_I64,
      LST(sasl_session_lifetime_ms), 0, "0", 0, INT64_C(31536000000), 0,
      "with sasl = terminate: SessionLifetimeMs given to clients "
      "(KIP-368, Kafka's connections.max.reauth.ms): once it runs out a "
      "client must re-authenticate before its next request or is closed; "
      "0: never", NULL },
    { KR_CS_LISTENER, "sasl_login_rate", KR_CT_STRING, LST(sasl_login_rate),
      0, "5,20", 0, 0, 0,
      "with sasl = terminate: logins per second per client address (an "
      "IPv6 client's /64; an IPv4 client on a dual-stack listener by its "
      "IPv4 address), and the burst allowed at once, as PER_SEC,BURST "
      "(0: no limit); a login over it is refused before any password is "
      "hashed", NULL },
    /* issue 8: SNI routing */
    { KR_CS_LISTENER, "sni_broker_name", KR_CT_STRING, LST(sni_broker_name),
      0, NULL, 0, 0, KR_CF_REBIND,
      "SNI routing: the listen port alone serves the bootstrap route and "
      "every broker, and the host name a client sends in its TLS handshake "
      "(SNI) says which.  This name, with $(node_id) in place of a NodeId "
      "(broker-$(node_id).kafka.example.com: broker-3.kafka.example.com is "
      "NodeId 3), routes to that broker, and responses advertise each "
      "broker as its name on the listen port.  Needs ssl = true and a "
      "certificate for every name (*.kafka.example.com); "
      "broker_port_base and advertised_host do not go with it", NULL },
    { KR_CS_LISTENER, "sni_bootstrap_name", KR_CT_STRING,
      LST(sni_bootstrap_name), 0, NULL, 0, 0, 0,
      "with sni_broker_name: the host name that routes to the bootstrap "
      "route (the one clients are given as bootstrap servers)", NULL },
    { KR_CS_LISTENER, "sni_fallback", KR_CT_CHOICE, LST(sni_fallback), 0,
      "close", 0, 0, 0,
      "with sni_broker_name: a client that sends no host name, or one that "
      "is neither sni_bootstrap_name nor a broker's name in node_id_min.."
      "node_id_max, is closed after its handshake (close) or given the "
      "bootstrap route (bootstrap); either way one log line names the "
      "client and the name", kr_cf_sni_fallback_choices },
    /* issue 9: SASL passthrough */
    { KR_CS_LISTENER, "sasl", KR_CT_CHOICE, LST(sasl), 0, "passthrough",
      0, 0, 0,
      "SASL between clients and brokers, which authenticate them: "
      "passthrough follows a client that starts SASL (its principal for "
      "rules and the audit log; requests pipelined behind an "
      "authentication step held until the broker's answer) and lets a "
      "client that does not go on; required also closes a client that "
      "sends anything but ApiVersions and SaslHandshake before it "
      "authenticated; terminate: krelay authenticates clients itself "
      "(PLAIN, SCRAM-SHA-256/512 against sasl_credentials) and never "
      "forwards their SASL requests", kr_cf_sasl_mode_choices },
    { KR_CS_LISTENER, "sasl_auth_timeout_ms", KR_CT_I64,
      LST(sasl_auth_timeout_ms), 0, "10000", 100, 3600000, 0,
      "close a client whose SASL authentication takes longer, in ms: "
      "from its SaslHandshake to the success (the broker's, or krelay's "
      "with sasl = terminate); on a listener with sasl = terminate or "
      "required from the accept, so a client that sends nothing, or only "
      "ApiVersions, is closed then (passthrough leaves that to the "
      "broker)", NULL },
    { KR_CS_LISTENER, "oauthbearer_principal_claim", KR_CT_STRING,
      LST(oauthbearer_principal_claim), 0, "sub", 0, 0, 0,
      "the claim of an OAUTHBEARER token's JWT payload that names the "
      "principal (Kafka's sasl.oauthbearer.sub.claim.name); passthrough "
      "only", NULL },
    /* issue 10: legacy clients */
    { KR_CS_LISTENER, "translate_legacy", KR_CT_BOOL, LST(translate_legacy),
      0, "false", 0, 0, 0,
      "translate the request versions Kafka 4 removed (KIP-896: Produce "
      "v0-2, Fetch v0-3, ListOffsets v0, OffsetCommit v0-1, OffsetFetch "
      "v0, CreateTopics v0-1, DeleteTopics v0, OffsetForLeaderEpoch v0-1, "
      "DescribeConfigs v0, the ACL APIs v0, JoinGroup v0-1) up to the "
      "lowest version the brokers accept, their message sets to "
      "RecordBatch v2 and back, and the responses back down, and "
      "advertise those versions in ApiVersions; false: krelay answers "
      "such a request UNSUPPORTED_VERSION (an Acks=0 Produce: a close), "
      "with one log line saying to enable this",
      NULL },
    { KR_CS_LISTENER, "legacy_zstd", KR_CT_CHOICE, LST(legacy_zstd), 0,
      "gzip", 0, 0, 0,
      "with translate_legacy: what an old consumer (Fetch v0-3, message "
      "format magic 0/1, which cannot carry zstd) gets for zstd batches: "
      "gzip (recompressed), none (uncompressed) or refuse (the "
      "partition's UNSUPPORTED_COMPRESSION_TYPE, as brokers answered)",
      kr_cf_legacy_zstd_choices },
    { KR_CS_LISTENER, "legacy_batch_max_bytes", KR_CT_I64,
      LST(legacy_batch_max_bytes), 0, "1048576", 0, INT32_MAX, 0,
      "with translate_legacy: the largest RecordBatch a partition's "
      "Produce v0-2 message set may become (brokers check "
      "max.message.bytes per batch; a single record larger goes alone); "
      "a larger set is split into several batches, and since Produce v3+ "
      "takes one batch per partition, the batches before each "
      "partition's last go up first in Produce requests of krelay's own "
      "(in order, at most 256; the client's answer merges theirs; with "
      "Acks 1 or all one at a time, and at the first error nothing more "
      "goes up and the client gets that error for every partition, so a "
      "retry keeps the partition's order; not atomic as a broker's "
      "append: README); 0: no limit", NULL },
    { KR_CS_LISTENER, "legacy_fetch_max_bytes", KR_CT_I64,
      LST(legacy_fetch_max_bytes), 0, "2097152", KR_CF_LEGACY_FETCH_MIN,
      INT32_MAX, 0,
      "with translate_legacy: the MaxBytes of an old consumer's Fetch "
      "(v0-2 had none: the response was as large as its partitions' "
      "limits added up) sent up, at most half of max_frame_bytes; "
      "krelay holds a translated response whole to convert it, and "
      "smaller responses cost less per byte.  The partitions go up in "
      "krelay's order (topics by name, partitions by index), rotated by "
      "one from one Fetch to the next on a connection, so that every "
      "partition comes first in turn (KIP-74), whatever order the "
      "client sends; a first batch larger than this still comes whole",
      NULL },
    { KR_CS_LISTENER, "legacy_refuse_delay_ms", KR_CT_I64,
      LST(legacy_refuse_delay_ms), 0, "1000", 0, 60000, 0,
      "without translate_legacy: a client refused for a version the "
      "brokers no longer accept that reconnects within "
      "legacy_refuse_window_ms gets its refusal this much later, in ms "
      "(its UNSUPPORTED_VERSION answer, or for a Produce with Acks=0, "
      "which has no answer, the close: nothing more is read from it "
      "meanwhile; a drain ends the wait), so a client retrying in a loop "
      "is slowed (counted); 0: no delay",
      NULL },
    { KR_CS_LISTENER, "legacy_refuse_window_ms", KR_CT_I64,
      LST(legacy_refuse_window_ms), 0, "10000", 0, 3600000, 0,
      "how long after its last refusal a client address counts as "
      "retrying (legacy_refuse_delay_ms), in ms; each worker remembers "
      "the addresses it refused (a reconnection another worker accepts "
      "is not delayed)", NULL },
    /* issue 12: the PROXY protocol */
    { KR_CS_LISTENER, "proxy_protocol", KR_CT_CHOICE, LST(proxy_protocol),
      0, "off", 0, 0, 0,
      "HAProxy's PROXY protocol header (v1 text, v2 binary, any: either) "
      "required before anything else on every connection, before TLS: "
      "its source address and port become the client's for logs, the "
      "audit log and client_address rules.  Only from proxy_protocol_from "
      "(required then); a connection from elsewhere is closed at accept, "
      "one with a malformed or missing header when it is found, each "
      "with one log line.  off: no header is read (one sent would be "
      "taken for the client's first bytes and refused)",
      kr_cf_proxy_choices },
    { KR_CS_LISTENER, "proxy_protocol_from", KR_CT_CIDRS,
      LST(proxy_protocol_from), LST(nproxy_protocol_from), NULL, 0, 0, 0,
      "with proxy_protocol: the load balancers and proxies trusted to send "
      "the header, ADDR[/BITS][,ADDR[/BITS]...] (IPv4 or IPv6; an "
      "IPv4-mapped IPv6 peer matches IPv4 networks)", NULL },
    { KR_CS_LISTENER, "proxy_protocol_timeout_ms", KR_CT_I64,
      LST(proxy_protocol_timeout_ms), 0, "5000", 100, 3600000, 0,
      "with proxy_protocol: close a connection whose header is not complete "
      "this long after it was accepted, in ms (the spec asks for at least "
      "3 s, a TCP retransmit)", NULL },

    { KR_CS_UPSTREAM, "bootstrap_servers", KR_CT_HOSTPORT_LIST,
      UPS(bootstrap), UPS(nbootstrap), NULL, 0, 0,
      KR_CF_REQUIRED | KR_CF_NEWCONN,
      "HOST:PORT[,HOST:PORT...] of the Kafka cluster", NULL },
    { KR_CS_UPSTREAM, "connect_timeout_ms", KR_CT_I64,
      UPS(connect_timeout_ms), 0, "10000", 1, 3600000, 0,
      "TCP connect timeout to a broker, in ms", NULL },
    { KR_CS_UPSTREAM, "request_timeout_margin_ms", KR_CT_I64,
      UPS(request_timeout_margin_ms), 0, "30000", 0, 3600000, 0,
      "added to a request's own wait before it is given up, in ms", NULL },
    { KR_CS_UPSTREAM, "metadata_refresh_ms", KR_CT_I64,
      UPS(metadata_refresh_ms), 0, "300000", 1000, 86400000, KR_CF_NEWCONN,
      "how often cluster Metadata is refreshed, in ms", NULL },
    { KR_CS_UPSTREAM, "dial.", KR_CT_DIAL, UPS(dial), UPS(ndial), NULL,
      0, INT32_MAX, KR_CF_NEWCONN,
      "dial.NODEID = HOST:PORT: connect there instead of the address "
      "the broker advertises", NULL },
    /* issue 8: TLS to the brokers */
    { KR_CS_UPSTREAM, "ssl", KR_CT_BOOL, UPS(ssl), 0, "false", 0, 0,
      KR_CF_NEWCONN, "TLS on every connection to the brokers: the "
      "clients' and krelay's own metadata connection", NULL },
    { KR_CS_UPSTREAM, "ssl_ca", KR_CT_PATH, UPS(ssl_ca), 0, NULL, 0, 0, 0,
      "PEM file of the CAs the brokers' certificates must chain to", NULL },
    { KR_CS_UPSTREAM, "ssl_verify_hostname", KR_CT_BOOL,
      UPS(ssl_verify_hostname), 0, "true", 0, 0, 0,
      "a broker's certificate must name the host krelay was given for it: "
      "the host the broker advertises (also with dial.NODEID, which only "
      "changes where krelay connects), or the bootstrap_servers host; an "
      "IP address is checked against the certificate's IP addresses. "
      "false: any certificate the CAs signed", NULL },
    { KR_CS_UPSTREAM, "ssl_certificate", KR_CT_PATH, UPS(ssl_certificate), 0,
      NULL, 0, 0, 0, "PEM file: a client certificate (then its chain) "
      "krelay presents to the brokers", NULL },
    { KR_CS_UPSTREAM, "ssl_key", KR_CT_PATH, UPS(ssl_key), 0, NULL, 0, 0, 0,
      "PEM file with the client certificate's private key, not encrypted; "
      "its contents are never logged", NULL },
    { KR_CS_UPSTREAM, "ssl_min_protocol", KR_CT_CHOICE,
      UPS(ssl_min_protocol), 0, "TLSv1.2", 0, 0, 0,
      "lowest TLS version krelay accepts from a broker: TLSv1.2 or "
      "TLSv1.3", kr_cf_tls_choices },
    /* issue 9: SASL to the brokers (origination) */
    { KR_CS_UPSTREAM, "sasl_mechanism", KR_CT_CHOICE, UPS(sasl.mechanism), 0,
      NULL, 0, 0, 0, "krelay authenticates every connection to the brokers "
      "itself (the clients' and its own metadata connections) with this "
      "mechanism, before any client request goes on, and again before the "
      "session lifetime the broker gives runs out (KIP-368)",
      kr_cf_sasl_choices },
    { KR_CS_UPSTREAM, "sasl_username", KR_CT_STRING, UPS(sasl.username), 0,
      NULL, 0, 0, 0, "the user krelay authenticates as (PLAIN, SCRAM)",
      NULL },
    { KR_CS_UPSTREAM, "sasl_password_file", KR_CT_PATH,
      UPS(sasl.password_file), 0, NULL, 0, 0, 0, "file whose first line is "
      "sasl_username's password (read at start and at each reload)", NULL },
    { KR_CS_UPSTREAM, "sasl_password", KR_CT_STRING, UPS(sasl.password), 0,
      NULL, 0, 0, KR_CF_SECRET, "the password itself, in the config file "
      "(krelay -t warns: prefer sasl_password_file); never printed", NULL },
    { KR_CS_UPSTREAM, "sasl_oauthbearer_token_file", KR_CT_PATH,
      UPS(sasl.token_file), 0, NULL, 0, 0, 0, "OAUTHBEARER: file holding "
      "the bearer token (its first line), read again at each "
      "authentication and re-authentication, so an external refresher "
      "can replace it", NULL },
    { KR_CS_UPSTREAM, "sasl_oauthbearer_token", KR_CT_STRING,
      UPS(sasl.token), 0, NULL, 0, 0, KR_CF_SECRET, "OAUTHBEARER: the "
      "bearer token itself, in the config file (krelay -t warns); never "
      "printed", NULL },
    { KR_CS_UPSTREAM, "metadata_sasl_mechanism", KR_CT_CHOICE,
      UPS(metadata_sasl.mechanism), 0, NULL, 0, 0, 0, "without "
      "sasl_mechanism (the clients' own SASL passes through): the "
      "mechanism of krelay's own metadata connections only",
      kr_cf_msasl_choices },
    { KR_CS_UPSTREAM, "metadata_sasl_username", KR_CT_STRING,
      UPS(metadata_sasl.username), 0, NULL, 0, 0, 0, "the user of "
      "krelay's own metadata connections", NULL },
    { KR_CS_UPSTREAM, "metadata_sasl_password_file", KR_CT_PATH,
      UPS(metadata_sasl.password_file), 0, NULL, 0, 0, 0, "file whose "
      "first line is metadata_sasl_username's password", NULL },
    /* issue 10: what the brokers accept */
    { KR_CS_UPSTREAM, "broker_profile", KR_CT_CHOICE, UPS(broker_profile),
      0, "learned", 0, 0, 0,
      "what the brokers accept, for legacy translation (translate_legacy) "
      "and krelay -t: learned (from each broker's ApiVersions answer, "
      "which krelay asks for itself on a connection whose client did not "
      "ask, before its first request of a version Kafka 4 removed; a "
      "Kafka 4 broker, recognised by its minima, refuses Produce v0-2 "
      "although it advertises them), kafka-4.0.0 or kafka-4.0.1+ (the "
      "versions those releases removed, KIP-896; they differ in JoinGroup "
      "v0-1, which 4.0.0 refuses).  A profile holds whatever the brokers "
      "advertise, except where a broker's own minimum is higher, and "
      "krelay asks no ApiVersions of its own; with one, krelay -t refuses "
      "a clamp below its minimum unless translate_legacy covers it",
      kr_cf_profile_choices },

    { KR_CS_LOG, "level", KR_CT_LEVEL, LOGC(level), 0, "notice", 0, 0, 0,
      "error, warn, notice, info, debug or trace", kr_cf_level_choices },
    { KR_CS_LOG, "target", KR_CT_STRING, LOGC(target), 0, "stderr", 0, 0, 0,
      "stderr, syslog (needs a syslog daemon's socket, /dev/log: krelay "
      "-t warns without one), or the path of a file (reopened on SIGHUP "
      "and SIGUSR1; a relative path is taken from krelay's working "
      "directory, / under systemd, not from the config file's)", NULL },

    { KR_CS_AUDIT, "target", KR_CT_STRING, AUD(target), 0, NULL, 0, 0,
      KR_CF_REQUIRED, "where audit JSON lines go: syslog (needs a syslog "
      "daemon's socket, /dev/log: krelay -t warns without one, and the "
      "lines are counted as dropped), stdout (under systemd: the "
      "journal), or the path of a file (reopened on SIGHUP and SIGUSR1; "
      "a relative path is taken from krelay's working directory, / under "
      "systemd, not from the config file's)", NULL },
    { KR_CS_AUDIT, "queue_bytes", KR_CT_I64, AUD(queue_bytes), 0, "4194304",
      4096, INT32_MAX, KR_CF_RESTART, "audit lines buffered per worker "
      "thread (each has a queue of this size) before its lines are "
      "dropped (and counted), in bytes", NULL },
    { KR_CS_AUDIT, "instance", KR_CT_STRING, AUD(instance), 0, NULL, 0, 0, 0,
      "this krelay's name in every audit line (default: the host name); "
      "a reload applies it to the lines written after it", NULL },
    /* the operations issue: the admin endpoint (kr_admin.h) */
    { KR_CS_ADMIN, "listen", KR_CT_HOSTPORT, ADM(listen), 0, NULL, 0, 0,
      KR_CF_REQUIRED | KR_CF_RESTART, "HOST:PORT of the admin HTTP endpoint "
      "(/metrics, /healthz, /readyz, /connections, /config); a port alone, "
      ":PORT, listens on 127.0.0.1 (a restart applies a change)", NULL },
    { KR_CS_ADMIN, "bearer_token_file", KR_CT_PATH, ADM(bearer_token_file),
      0, NULL, 0, 0, 0, "file whose first line is the token every request "
      "but GET /healthz must bring (Authorization: Bearer TOKEN; 401 "
      "without it); read at start and at each reload", NULL },
    { KR_CS_ADMIN, "bearer_token", KR_CT_STRING, ADM(bearer_token), 0, NULL,
      0, 0, KR_CF_SECRET, "the token itself, in the config file (krelay -t "
      "warns: prefer bearer_token_file); never printed", NULL },
    /* the operations issue: [process] */
    { KR_CS_PROCESS, "drain_timeout_ms", KR_CT_I64, PRC(drain_timeout_ms),
      0, "30000", 0, INT32_MAX, 0, "SIGTERM drains: how long krelay waits, "
      "in ms, for the responses owed before it closes the connections "
      "left (0: close them at once)", NULL },
    { KR_CS_PROCESS, "user", KR_CT_STRING, PRC(user), 0, NULL, 0, 0,
      KR_CF_RESTART, "the user krelay runs as once listeners are bound and "
      "keys read, when started as root (a restart applies a change)", NULL },
    { KR_CS_PROCESS, "group", KR_CT_STRING, PRC(group), 0, NULL, 0, 0,
      KR_CF_RESTART, "its group (with user; a restart applies a change)",
      NULL },
    { KR_CS_PROCESS, "workers", KR_CT_I64, PRC(workers), 0, NULL, 1,
      KR_WORKERS_MAX, KR_CF_RESTART, "event loops, one per thread: each "
      "accepts on its own SO_REUSEPORT socket of every listener (the "
      "kernel spreads new connections over them) and serves its "
      "connections alone, with its own upstream connections; what one "
      "worker learns of the cluster the others read at once (a restart "
      "applies a change)", NULL },

    /* [rule NAME]: match keys */
    { KR_CS_RULE, "listener", KR_CT_NAMES, RUL(listener), 0, NULL, 0, 0, 0,
      "[listener] names the rule applies to (default: all)", NULL },
    { KR_CS_RULE, "client_address", KR_CT_CIDRS, RUL(client_address),
      RUL(nclient_address), NULL, 0, 0, 0,
      "client networks, ADDR[/BITS] IPv4 or IPv6 (default: any)", NULL },
    { KR_CS_RULE, "client_id", KR_CT_GLOBS, RUL(client_id), 0, NULL, 0, 0, 0,
      "ClientId globs (default: any)", NULL },
    { KR_CS_RULE, "principal", KR_CT_GLOBS, RUL(principal), 0, NULL, 0, 0, 0,
      "principal globs (User:NAME): a client certificate's (ssl and "
      "ssl_client_ca), or the one the broker verified in the client's SASL "
      "exchange (which wins); on a connection whose SASL principal krelay "
      "cannot know (GSSAPI...) a rule naming principals fails closed: it "
      "applies when it denies, clamps, sets a produce policy, enforces a "
      "throttle or audits, not when it only injects ThrottleTimeMs or "
      "faults", NULL },
    { KR_CS_RULE, "api", KR_CT_APIS, RUL(api), RUL(napi), NULL, 0, 0, 0,
      "Kafka API names (Produce, Fetch...) or ApiKeys (default: all)", NULL },
    { KR_CS_RULE, "versions", KR_CT_VRANGE, RUL(versions_min),
      RUL(versions_max), "0-32767", 0, INT16_MAX, 0,
      "ApiVersion N or range N-M the request must have", NULL },
    { KR_CS_RULE, "direction", KR_CT_CHOICE, RUL(direction), 0, "both", 0, 0,
      0, "request (deny, clamp, policy), response (throttle, fault) or "
      "both", kr_cf_dir_choices },
    { KR_CS_RULE, "topic", KR_CT_GLOBS, RUL(topic), 0, NULL, 0, 0, 0,
      "topic globs; a request matches when it names a matching topic", NULL },
    /* actions */
    { KR_CS_RULE, "clamp_min_version", KR_CT_I32, RUL(clamp_min_version), 0,
      NULL, 0, INT16_MAX, KR_CF_NEG_UNSET,
      "lowest ApiVersion clients may use", NULL },
    { KR_CS_RULE, "clamp_max_version", KR_CT_I32, RUL(clamp_max_version), 0,
      NULL, 0, INT16_MAX, KR_CF_NEG_UNSET,
      "highest ApiVersion clients may use", NULL },
    { KR_CS_RULE, "pass_unknown_apis", KR_CT_BOOL, RUL(pass_unknown_apis), 0,
      "false", 0, 0, 0, "keep ApiKeys krelay does not know in ApiVersions "
      "responses", NULL },
    { KR_CS_RULE, "audit", KR_CT_BOOL, RUL(audit), 0, "false", 0, 0, 0,
      "one JSON line per request/response pair to the [audit] target", NULL },
    { KR_CS_RULE, "audit_body", KR_CT_BOOL, RUL(audit_body), 0, "false",
      0, 0, 0, "also the whole decoded request and response bodies", NULL },
    { KR_CS_RULE, "throttle_ms", KR_CT_I32, RUL(throttle_ms), 0, NULL,
      0, 3600000, KR_CF_NEG_UNSET, "ThrottleTimeMs to set or add, in ms",
      NULL },
    { KR_CS_RULE, "throttle_mode", KR_CT_CHOICE, RUL(throttle_mode), 0,
      "inject", 0, 0, 0, "inject (the field only) or enforce (also delay "
      "the client as brokers do).  Enforcement is per connection, kept by "
      "the worker that serves it: no state is shared between connections "
      "or [process] workers, so what it limits is each connection's pace "
      "(a client with more connections gets more, whatever the number of "
      "workers or of krelay instances)", kr_cf_tmode_choices },
    { KR_CS_RULE, "throttle_op", KR_CT_CHOICE, RUL(throttle_op), 0, "set",
      0, 0, 0, "set or add", kr_cf_top_choices },
    { KR_CS_RULE, "throttle_jitter_ms", KR_CT_I32, RUL(throttle_jitter_ms), 0,
      "0", 0, 3600000, 0, "up to this many ms added at random", NULL },
    { KR_CS_RULE, "deny", KR_CT_BOOL, RUL(deny), 0, "false", 0, 0, 0,
      "refuse matching requests with the API's own error response", NULL },
    { KR_CS_RULE, "deny_error", KR_CT_KERR, RUL(deny_error), 0, NULL, 1,
      INT16_MAX, KR_CF_NEG_UNSET, "Kafka error name or code for deny "
      "(default: *_AUTHORIZATION_FAILED as fits the API)", NULL },
    { KR_CS_RULE, "allowed_acks", KR_CT_ACKS, RUL(allowed_acks), 0, NULL,
      0, 0, 0, "Produce Acks allowed: list of -1 (all), 0, 1", NULL },
    { KR_CS_RULE, "allowed_compression", KR_CT_CODECS,
      RUL(allowed_compression), 0, NULL, 0, 0, 0,
      "Produce compression allowed: none, gzip, snappy, lz4, zstd", NULL },
    { KR_CS_RULE, "fault_latency_ms", KR_CT_I32, RUL(fault_latency_ms), 0,
      "0", 0, 3600000, 0, "delay matching responses, in ms", NULL },
    { KR_CS_RULE, "fault_error", KR_CT_KERR, RUL(fault_error), 0, NULL, 1,
      INT16_MAX, KR_CF_NEG_UNSET,
      "Kafka error written into every ErrorCode of matching responses", NULL },
    { KR_CS_RULE, "fault_error_probability", KR_CT_PROB,
      RUL(fault_error_probability), 0, "1", 0, 0, 0,
      "chance per matching response that fault_error applies, 0..1", NULL },
    { KR_CS_RULE, "fault_close_probability", KR_CT_PROB,
      RUL(fault_close_probability), 0, "0", 0, 0, 0,
      "chance per matching request that the connection is closed, 0..1", NULL },
};

#define KR_CF_NKEYS KR_ARRAY_LEN(kr_conf_keys)

/*
 * For the docs only (kr_conf_key's def_doc): what applies when a key
 * that has no default and is not required is left out.  check_conf fails
 * for such a key without a row here.
 */
static const struct {
    enum kr_cf_sect sect;
    const char *name;
    const char *doc;
} kr_cf_def_docs[] = {
    { KR_CS_LISTENER, "advertised_host",
      "the listen host; 127.0.0.1 for a wildcard" },
    { KR_CS_LISTENER, "upstream", "the only [upstream]" },
    { KR_CS_UPSTREAM, "dial.", "none" },
    { KR_CS_LISTENER, "ssl_certificate", "none (required with ssl = true)" },
    { KR_CS_LISTENER, "ssl_key", "the ssl_certificate file" },
    { KR_CS_LISTENER, "ssl_client_ca",
      "none: no client certificate is asked for" },
    { KR_CS_LISTENER, "ssl_crl", "none" },
    { KR_CS_LISTENER, "ssl_ciphers", "OpenSSL's default list" },
    { KR_CS_LISTENER, "ssl_ciphersuites", "OpenSSL's default suites" },
    { KR_CS_LISTENER, "ssl_principal_mapping_rules",
      "DEFAULT (Kafka's: the subject as it is)" },
    { KR_CS_LISTENER, "broker_port_base",
      "none: required without sni_broker_name" },
    { KR_CS_LISTENER, "sni_broker_name",
      "none: a port per NodeId (broker_port_base)" },
    { KR_CS_LISTENER, "sasl_credentials",
      "none (required with sasl = terminate)" },
    { KR_CS_LISTENER, "proxy_protocol_from",
      "none (required with proxy_protocol)" },
    { KR_CS_LISTENER, "sni_bootstrap_name",
      "none: only sni_fallback = bootstrap reaches the bootstrap route" },
    { KR_CS_UPSTREAM, "ssl_ca",
      "the system's CA store (OpenSSL's default paths)" },
    { KR_CS_UPSTREAM, "ssl_certificate", "none: no client certificate" },
    { KR_CS_UPSTREAM, "ssl_key", "the ssl_certificate file" },
    { KR_CS_UPSTREAM, "sasl_mechanism",
      "none: krelay does not authenticate to the brokers (a client's own "
      "SASL passes through)" },
    { KR_CS_UPSTREAM, "sasl_username", "none (required with PLAIN and "
      "SCRAM)" },
    { KR_CS_UPSTREAM, "sasl_password_file",
      "none (one of it and sasl_password with PLAIN and SCRAM)" },
    { KR_CS_UPSTREAM, "sasl_password", "none" },
    { KR_CS_UPSTREAM, "sasl_oauthbearer_token_file",
      "none (one of it and sasl_oauthbearer_token with OAUTHBEARER)" },
    { KR_CS_UPSTREAM, "sasl_oauthbearer_token", "none" },
    { KR_CS_UPSTREAM, "metadata_sasl_mechanism",
      "none: krelay's own metadata connections do not authenticate (it "
      "learns broker addresses from the clients' Metadata responses and "
      "dial.NODEID)" },
    { KR_CS_UPSTREAM, "metadata_sasl_username", "none (required with "
      "metadata_sasl_mechanism)" },
    { KR_CS_UPSTREAM, "metadata_sasl_password_file", "none (required with "
      "metadata_sasl_mechanism)" },
    { KR_CS_AUDIT, "instance", "the host name (gethostname)" },
    { KR_CS_ADMIN, "bearer_token_file",
      "none: no token (one of it and bearer_token asks for one)" },
    { KR_CS_ADMIN, "bearer_token", "none" },
    { KR_CS_PROCESS, "user", "none: krelay stays the user it was started "
      "as" },
    { KR_CS_PROCESS, "group", "the user's primary group" },
    { KR_CS_PROCESS, "workers", "the CPUs krelay may run on "
      "(sched_getaffinity), at most 256; the environment variable "
      "KRELAY_WORKERS, when set, replaces that default" },
    { KR_CS_RULE, "listener", "every listener" },
    { KR_CS_RULE, "client_address", "any address" },
    { KR_CS_RULE, "client_id", "any ClientId" },
    { KR_CS_RULE, "principal", "any, with a principal or without" },
    { KR_CS_RULE, "api", "every API" },
    { KR_CS_RULE, "topic", "any request, naming topics or not" },
    { KR_CS_RULE, "clamp_min_version", "none" },
    { KR_CS_RULE, "clamp_max_version", "none" },
    { KR_CS_RULE, "throttle_ms", "none (no throttle action)" },
    { KR_CS_RULE, "deny_error",
      "the *_AUTHORIZATION_FAILED error that fits the API" },
    { KR_CS_RULE, "allowed_acks", "any" },
    { KR_CS_RULE, "allowed_compression", "any" },
    { KR_CS_RULE, "fault_error", "none" },
};

static bool kr_cf_parse_int(const char *s, int64_t *out);

int64_t
kr_conf_default_workers(void)
{
    const char *env = getenv("KRELAY_WORKERS");
    cpu_set_t set;
    int n;

    if (env != NULL && env[0] != '\0') {
        char buf[32];
        size_t b = 0, e = strlen(env);
        int64_t v;

        /* as a value in the file: blanks around it dropped (inih strips
           them), then kr_cf_parse_int's digits ("+3", "3x" refused) */
        while (b < e && isspace((unsigned char)env[b])) {
            b++;
        }
        while (e > b && isspace((unsigned char)env[e - 1])) {
            e--;
        }
        if (e - b >= sizeof(buf)) {
            return 0;
        }
        memcpy(buf, env + b, e - b);
        buf[e - b] = '\0';
        return kr_cf_parse_int(buf, &v) && v >= 1 && v <= KR_WORKERS_MAX
                   ? v
                   : 0;
    }
    CPU_ZERO(&set);
    n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > KR_WORKERS_MAX ? KR_WORKERS_MAX : n;
}

/* One [section] as read, before the final arrays are built. */
struct kr_cf_inst {
    enum kr_cf_sect kind;
    char *name;                 /* "" when unnamed; owned by obj */
    int line;
    bool bad;                   /* header rejected: ignore its keys */
    void *obj;                  /* listener/upstream conf; &conf->log */
    int key_line[KR_CF_NKEYS];  /* 0 unset, n set at line n, -n bad */
    int *dial_line;             /* line of each dial entry */
};

struct kr_cf_state {
    const char *file;
    FILE *errs;
    int nerr;
    struct kr_conf *conf;

    /* reader */
    const char *text;
    size_t len, pos;
    int lineno;                 /* line most recently handed to inih */
    int kv_line;                /* last key line handed to inih */
    int handled_line;           /* last line the handler ran for */

    struct kr_cf_inst *insts;
    int ninsts;
    struct kr_cf_inst *cur;     /* NULL before any section or after a
                                   bad header */
    bool cur_bad;
    const char *stand_in_upstream;  /* kr_conf_load_opts */
};

static void kr_cf_err(struct kr_cf_state *st, int line, const char *fmt, ...)
    KR_PRINTF(3, 4);

static void
kr_cf_err(struct kr_cf_state *st, int line, const char *fmt, ...)
{
    va_list ap;

    st->nerr++;
    if (st->errs == NULL) {
        return;
    }
    if (line > 0) {
        fprintf(st->errs, "%s:%d: ", st->file, line);
    } else {
        fprintf(st->errs, "%s: ", st->file);
    }
    va_start(ap, fmt);
    vfprintf(st->errs, fmt, ap);
    va_end(ap);
    fputc('\n', st->errs);
}

static void kr_cf_warn(struct kr_cf_state *st, int line, const char *fmt,
                       ...) KR_PRINTF(3, 4);

/*
 * A warning (struct kr_conf_warning) at line: kept in the config, which
 * still loads.  Out of memory is an error.
 */
static void
kr_cf_warn(struct kr_cf_state *st, int line, const char *fmt, ...)
{
    struct kr_conf *c = st->conf;
    struct kr_conf_warning *nw;
    va_list ap;
    char *text = NULL;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&text, fmt, ap);
    va_end(ap);
    nw = n < 0 ? NULL
               : realloc(c->warnings,
                         sizeof(*nw) * (size_t)(c->nwarnings + 1));
    if (nw == NULL) {
        if (n >= 0) {
            free(text);
        }
        kr_cf_err(st, line, "out of memory");
        return;
    }
    c->warnings = nw;
    nw[c->nwarnings].line = line;
    nw[c->nwarnings].text = text;
    c->nwarnings++;
}

/* "[listener a]" or "[listener]" for messages. */
static const char *
kr_cf_inst_label(const struct kr_cf_inst *in, char *buf, size_t len)
{
    if (in->name[0] != '\0') {
        snprintf(buf, len, "[%s %s]", kr_cf_sect_names[in->kind], in->name);
    } else {
        snprintf(buf, len, "[%s]", kr_cf_sect_names[in->kind]);
    }
    return buf;
}

/* ---- values ------------------------------------------------------------- */

static bool
kr_cf_name_ok(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++, n++) {
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
            *s != '.') {
            return false;
        }
    }
    return n > 0 && n <= KR_CONF_MAX_NAME;
}

/* A DNS name or IPv4 address as written: letters, digits, - . _ */
static bool
kr_cf_hostname_ok(const char *s, size_t n)
{
    size_t i;
    bool only_num = true;
    char tmp[INET_ADDRSTRLEN];
    struct in_addr a4;

    if (n == 0 || n > 253) {
        return false;
    }
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!isalnum(c) && c != '-' && c != '.' && c != '_') {
            return false;
        }
        if (!isdigit(c) && c != '.') {
            only_num = false;
        }
    }
    if (only_num) {
        /* Looks like IPv4: must be one ("999.1.1.1" is not a name). */
        if (n >= sizeof(tmp)) {
            return false;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        return inet_pton(AF_INET, tmp, &a4) == 1;
    }
    return true;
}

/* An IPv6 literal without brackets, optionally with a %zone. */
static bool
kr_cf_ipv6_ok(const char *s, size_t n)
{
    char tmp[INET6_ADDRSTRLEN + 1];
    struct in6_addr a6;
    const char *pct = memchr(s, '%', n);
    size_t alen = pct != NULL ? (size_t)(pct - s) : n;

    if (alen == 0 || alen >= sizeof(tmp)) {
        return false;
    }
    if (pct != NULL) {
        size_t i, zlen = n - alen - 1;

        if (zlen == 0 || zlen > 32) {
            return false;
        }
        for (i = 1; i <= zlen; i++) {
            if (!isalnum((unsigned char)pct[i]) && pct[i] != '_' &&
                pct[i] != '-' && pct[i] != '.') {
                return false;
            }
        }
    }
    memcpy(tmp, s, alen);
    tmp[alen] = '\0';
    return inet_pton(AF_INET6, tmp, &a6) == 1;
}

bool
kr_hostport_parse(const char *s, struct kr_hostport *hp)
{
    const char *host, *colon, *p;
    size_t hlen;
    unsigned long port = 0;
    char *h;

    if (s == NULL || hp == NULL) {
        return false;
    }
    if (*s == '[') {
        const char *rb = strchr(s, ']');

        if (rb == NULL || rb[1] != ':') {
            return false;
        }
        host = s + 1;
        hlen = (size_t)(rb - host);
        if (!kr_cf_ipv6_ok(host, hlen)) {
            return false;
        }
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            return false;
        }
        host = s;
        hlen = (size_t)(colon - s);
        /* A second colon: an IPv6 address needs brackets. */
        if (memchr(s, ':', hlen) != NULL) {
            return false;
        }
        if (hlen > 0 && !kr_cf_hostname_ok(host, hlen)) {
            return false;
        }
    }
    p = colon + 1;
    if (*p == '\0' || strlen(p) > 5) {
        return false;
    }
    for (; *p != '\0'; p++) {
        if (!isdigit((unsigned char)*p)) {
            return false;
        }
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port < 1 || port > 65535) {
        return false;
    }
    h = strndup(host, hlen);
    if (h == NULL) {
        return false;
    }
    hp->host = h;
    hp->port = (uint16_t)port;
    return true;
}

/* Strict decimal integer: optional '-', digits, nothing else. */
static bool
kr_cf_parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (*s == '\0' || !(*s == '-' || isdigit((unsigned char)*s))) {
        return false;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s) {
        return false;
    }
    *out = v;
    return true;
}

/*
 * A wildcard address (every address of the machine): empty, 0.0.0.0, or
 * any spelling of the IPv6 unspecified address ("::", "0:0::0", with or
 * without a %zone) or of 0.0.0.0 mapped to IPv6 ("::ffff:0.0.0.0": Linux
 * binds it as INADDR_ANY).
 */
static bool
kr_cf_is_wildcard(const char *host)
{
    char tmp[INET6_ADDRSTRLEN + 1];
    const char *pct;
    struct in6_addr a6;
    size_t n;

    if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 ||
        strcmp(host, "*") == 0) {
        return true;
    }
    pct = strchr(host, '%');
    n = pct != NULL ? (size_t)(pct - host) : strlen(host);
    if (n == 0 || n >= sizeof(tmp)) {
        return false;
    }
    memcpy(tmp, host, n);
    tmp[n] = '\0';
    if (inet_pton(AF_INET6, tmp, &a6) != 1) {
        return false;
    }
    return IN6_IS_ADDR_UNSPECIFIED(&a6) ||
           (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 0 &&
            a6.s6_addr[13] == 0 && a6.s6_addr[14] == 0 &&
            a6.s6_addr[15] == 0);
}

bool
kr_conf_is_wildcard(const char *host)
{
    return host != NULL && kr_cf_is_wildcard(host);
}

static void
kr_cf_free_hostports(struct kr_hostport *hp, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free(hp[i].host);
    }
    free(hp);
}

/*
 * Parse "h:p, h:p" into a new array.  Returns the count, or -1 with a
 * message in why (static text) on failure.
 */
static int
kr_cf_parse_hostport_list(const char *v, struct kr_hostport **out,
                          const char **why)
{
    struct kr_hostport *arr = NULL;
    int n = 0;
    const char *p = v;

    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char *item;
        struct kr_hostport *na;
        bool ok;

        while (len > 0 && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)p[len - 1])) {
            len--;
        }
        if (len == 0) {
            *why = "empty entry in list";
            goto fail;
        }
        item = strndup(p, len);
        if (item == NULL) {
            *why = "out of memory";
            goto fail;
        }
        na = realloc(arr, sizeof(*arr) * (size_t)(n + 1));
        if (na == NULL) {
            free(item);
            *why = "out of memory";
            goto fail;
        }
        arr = na;
        ok = kr_hostport_parse(item, &arr[n]);
        if (ok && arr[n].host[0] == '\0') {
            free(arr[n].host);
            ok = false;
        }
        free(item);
        if (!ok) {
            *why = "expected HOST:PORT[,HOST:PORT...] (IPv6 as [ADDR]:PORT)";
            goto fail;
        }
        n++;
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    *out = arr;
    return n;
fail:
    kr_cf_free_hostports(arr, n);
    return -1;
}

/* ---- rule values -------------------------------------------------------- */

static void kr_cf_clear(const struct kr_cf_key *k, void *obj);

void
kr_strlist_free(struct kr_strlist *l)
{
    int i;

    for (i = 0; i < l->n; i++) {
        free(l->v[i]);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/*
 * Split "a, b,c" into trimmed items: items[i] point into buf (a copy of
 * v, caller frees).  Returns the count or -1 (why set).
 */
static int
kr_cf_split(const char *v, char **bufp, char ***itemsp, const char **why)
{
    char *buf = strdup(v), *p, **items = NULL;
    int n = 0;

    *bufp = buf;
    *itemsp = NULL;
    if (buf == NULL) {
        *why = "out of memory";
        return -1;
    }
    p = buf;
    for (;;) {
        char *end = strchr(p, ','), *e, **ni;

        if (end != NULL) {
            *end = '\0';
        }
        while (isspace((unsigned char)*p)) {
            p++;
        }
        e = p + strlen(p);
        while (e > p && isspace((unsigned char)e[-1])) {
            *--e = '\0';
        }
        if (*p == '\0') {
            *why = "empty entry in list";
            free(items);
            return -1;
        }
        ni = realloc(items, sizeof(*ni) * (size_t)(n + 1));
        if (ni == NULL) {
            *why = "out of memory";
            free(items);
            return -1;
        }
        items = ni;
        items[n++] = p;
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    *itemsp = items;
    return n;
}

/* "ADDR" or "ADDR/BITS", IPv4 or IPv6. */
static bool
kr_cf_parse_cidr(const char *s, struct kr_cidr *c)
{
    char tmp[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(s, '/');
    size_t alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
    int64_t bits = -1;
    int i, maxbits;

    if (alen == 0 || alen >= sizeof(tmp)) {
        return false;
    }
    memcpy(tmp, s, alen);
    tmp[alen] = '\0';
    memset(c, 0, sizeof(*c));
    if (inet_pton(AF_INET, tmp, c->addr) == 1) {
        c->family = AF_INET;
        maxbits = 32;
    } else if (inet_pton(AF_INET6, tmp, c->addr) == 1) {
        c->family = AF_INET6;
        maxbits = 128;
    } else {
        return false;
    }
    if (slash != NULL) {
        if (!kr_cf_parse_int(slash + 1, &bits) || slash[1] == '-' ||
            bits > maxbits) {
            return false;
        }
    } else {
        bits = maxbits;
    }
    c->bits = (uint8_t)bits;
    for (i = 0; i < 16; i++) {     /* clear host bits */
        int keep = (int)bits - i * 8;

        if (keep <= 0) {
            c->addr[i] = 0;
        } else if (keep < 8) {
            c->addr[i] &= (uint8_t)(0xff << (8 - keep));
        }
    }
    return true;
}

/* An API by Kafka name (any case) or number. */
static int
kr_cf_parse_api(const char *s)
{
    int64_t k;
    int16_t i;

    if (kr_cf_parse_int(s, &k)) {
        return k >= 0 && k <= kr_api_max && kr_api_get((int16_t)k) != NULL
                   ? (int)k : -1;
    }
    for (i = 0; i <= kr_api_max; i++) {
        const struct kr_api_desc *a = kr_api_get(i);

        if (a != NULL && a->name != NULL && strcasecmp(a->name, s) == 0) {
            return i;
        }
    }
    return -1;
}

static const char *
kr_cf_set_list(const struct kr_cf_key *k, void *obj, const char *v,
               char *buf, size_t blen)
{
    char *base = obj, *copy, **items;
    const char *why = NULL;
    int n, i;

    n = kr_cf_split(v, &copy, &items, &why);
    if (n < 0) {
        free(copy);
        return why;
    }
    switch (k->type) {
    case KR_CT_NAMES:
    case KR_CT_GLOBS: {
        struct kr_strlist l = { NULL, 0 };

        l.v = calloc((size_t)n, sizeof(*l.v));
        if (l.v == NULL) {
            why = "out of memory";
            break;
        }
        for (i = 0; i < n && why == NULL; i++) {
            if (k->type == KR_CT_NAMES && !kr_cf_name_ok(items[i])) {
                snprintf(buf, blen, "'%.40s' is not a name (letters, "
                         "digits, - _ .)", items[i]);
                why = buf;
            } else if ((l.v[i] = strdup(items[i])) == NULL) {
                why = "out of memory";
            } else {
                l.n++;
            }
        }
        if (why != NULL) {
            kr_strlist_free(&l);
            break;
        }
        kr_cf_clear(k, obj);
        *(struct kr_strlist *)(void *)(base + k->off) = l;
        break;
    }
    case KR_CT_CIDRS: {
        struct kr_cidr *arr = calloc((size_t)n, sizeof(*arr));

        if (arr == NULL) {
            why = "out of memory";
            break;
        }
        for (i = 0; i < n; i++) {
            if (!kr_cf_parse_cidr(items[i], &arr[i])) {
                snprintf(buf, blen, "'%.60s' is not ADDR[/BITS] (IPv4 or "
                         "IPv6)", items[i]);
                why = buf;
                break;
            }
        }
        if (why != NULL) {
            free(arr);
            break;
        }
        kr_cf_clear(k, obj);
        *(struct kr_cidr **)(void *)(base + k->off) = arr;
        *(int *)(void *)(base + k->off2) = n;
        break;
    }
    case KR_CT_APIS: {
        int16_t *arr = calloc((size_t)n, sizeof(*arr));
        int j;

        if (arr == NULL) {
            why = "out of memory";
            break;
        }
        for (i = 0; i < n; i++) {
            int a = kr_cf_parse_api(items[i]);

            if (a < 0) {
                snprintf(buf, blen, "'%.40s' is not a Kafka API name or "
                         "ApiKey", items[i]);
                why = buf;
                break;
            }
            for (j = 0; j < i; j++) {
                if (arr[j] == a) {
                    snprintf(buf, blen, "'%.40s' named twice", items[i]);
                    why = buf;
                }
            }
            arr[i] = (int16_t)a;
        }
        if (why != NULL) {
            free(arr);
            break;
        }
        kr_cf_clear(k, obj);
        *(int16_t **)(void *)(base + k->off) = arr;
        *(int *)(void *)(base + k->off2) = n;
        break;
    }
    case KR_CT_ACKS:
    case KR_CT_CODECS: {
        unsigned mask = 0;

        for (i = 0; i < n && why == NULL; i++) {
            if (k->type == KR_CT_ACKS) {
                if (strcmp(items[i], "all") == 0 ||
                    strcmp(items[i], "-1") == 0) {
                    mask |= 1u << 0;
                } else if (strcmp(items[i], "0") == 0) {
                    mask |= 1u << 1;
                } else if (strcmp(items[i], "1") == 0) {
                    mask |= 1u << 2;
                } else {
                    snprintf(buf, blen, "'%.40s': expected -1 (or all), 0 "
                             "or 1", items[i]);
                    why = buf;
                }
            } else {
                int c;

                for (c = 0; kr_cf_codec_names[c] != NULL; c++) {
                    if (strcasecmp(items[i], kr_cf_codec_names[c]) == 0) {
                        break;
                    }
                }
                if (kr_cf_codec_names[c] == NULL) {
                    snprintf(buf, blen, "'%.40s': expected none, gzip, "
                             "snappy, lz4 or zstd", items[i]);
                    why = buf;
                } else {
                    mask |= 1u << c;
                }
            }
        }
        if (why == NULL) {
            *(unsigned *)(void *)(base + k->off) = mask;
        }
        break;
    }
    default:
        why = "internal error: not a list";
        break;
    }
    free(items);
    free(copy);
    return why;
}

/* Free whatever a key of this type holds at obj and reset it. */
static void
kr_cf_clear(const struct kr_cf_key *k, void *obj)
{
    char *base = obj;

    switch (k->type) {
    case KR_CT_HOSTPORT: {
        struct kr_hostport *hp = (void *)(base + k->off);

        free(hp->host);
        hp->host = NULL;
        break;
    }
    case KR_CT_HOSTPORT_LIST: {
        struct kr_hostport **arr = (void *)(base + k->off);
        int *n = (void *)(base + k->off2);

        kr_cf_free_hostports(*arr, *n);
        *arr = NULL;
        *n = 0;
        break;
    }
    case KR_CT_HOST:
    case KR_CT_NAME:
    case KR_CT_STRING:
    case KR_CT_PATH: {
        char **s = (void *)(base + k->off);

        if (*s != NULL && (k->flags & KR_CF_SECRET)) {
            OPENSSL_cleanse(*s, strlen(*s));
        }
        free(*s);
        *s = NULL;
        break;
    }
    case KR_CT_DIAL: {
        struct kr_dial_override **arr = (void *)(base + k->off);
        int *n = (void *)(base + k->off2);
        int i;

        for (i = 0; i < *n; i++) {
            free((*arr)[i].addr.host);
        }
        free(*arr);
        *arr = NULL;
        *n = 0;
        break;
    }
    case KR_CT_NAMES:
    case KR_CT_GLOBS:
        kr_strlist_free((void *)(base + k->off));
        break;
    case KR_CT_CIDRS:
    case KR_CT_APIS: {
        void **arr = (void *)(base + k->off);
        int *n = (void *)(base + k->off2);

        free(*arr);
        *arr = NULL;
        *n = 0;
        break;
    }
    default:
        break;
    }
}

/*
 * Store value v for key k into obj.  Returns NULL, or why it was refused
 * (written into buf).
 */
static const char *
kr_cf_set(const struct kr_cf_key *k, void *obj, const char *v, char *buf,
          size_t blen)
{
    char *base = obj;
    int64_t iv;

    switch (k->type) {
    case KR_CT_HOSTPORT: {
        struct kr_hostport hp;

        if (!kr_hostport_parse(v, &hp)) {
            return "expected HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)";
        }
        kr_cf_clear(k, obj);
        *(struct kr_hostport *)(void *)(base + k->off) = hp;
        return NULL;
    }
    case KR_CT_HOSTPORT_LIST: {
        struct kr_hostport *arr;
        const char *why = NULL;
        int n = kr_cf_parse_hostport_list(v, &arr, &why);

        if (n < 0) {
            return why;
        }
        kr_cf_clear(k, obj);
        *(struct kr_hostport **)(void *)(base + k->off) = arr;
        *(int *)(void *)(base + k->off2) = n;
        return NULL;
    }
    case KR_CT_HOST:
    case KR_CT_NAME:
    case KR_CT_STRING:
    case KR_CT_PATH: {
        size_t n = strlen(v);
        const char *s = v;
        char *copy;

        if (k->type == KR_CT_HOST) {
            if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
                s = v + 1;
                n -= 2;
                if (!kr_cf_ipv6_ok(s, n)) {
                    return "expected a host name or IP address";
                }
            } else if (memchr(v, ':', n) != NULL ? !kr_cf_ipv6_ok(v, n)
                                                 : !kr_cf_hostname_ok(v, n)) {
                return "expected a host name or IP address";
            }
        } else if (k->type == KR_CT_NAME) {
            if (!kr_cf_name_ok(v)) {
                return "expected a name (letters, digits, - _ .)";
            }
        } else if (n == 0) {
            return "empty value";
        }
        copy = strndup(s, n);
        if (copy == NULL) {
            return "out of memory";
        }
        kr_cf_clear(k, obj);
        *(char **)(void *)(base + k->off) = copy;
        return NULL;
    }
    case KR_CT_PORT:
    case KR_CT_I32:
    case KR_CT_I64:
        if (!kr_cf_parse_int(v, &iv)) {
            size_t d = (*v == '-') ? 1 : 0;

            /* All digits but too many for 64 bits: say it is too big. */
            if (v[d] != '\0' && strspn(v + d, "0123456789") == strlen(v + d)) {
                snprintf(buf, blen, "%s is out of range %" PRId64 "..%"
                         PRId64, v, k->min, k->max);
                return buf;
            }
            return k->type == KR_CT_PORT ? "expected a port number"
                                         : "expected an integer";
        }
        if (iv < k->min || iv > k->max) {
            snprintf(buf, blen, "%" PRId64 " is out of range %" PRId64
                     "..%" PRId64, iv, k->min, k->max);
            return buf;
        }
        if (k->type == KR_CT_PORT) {
            *(uint16_t *)(void *)(base + k->off) = (uint16_t)iv;
        } else if (k->type == KR_CT_I32) {
            *(int32_t *)(void *)(base + k->off) = (int32_t)iv;
        } else {
            *(int64_t *)(void *)(base + k->off) = iv;
        }
        return NULL;
    case KR_CT_BOOL:
        if (strcmp(v, "true") == 0) {
            *(bool *)(void *)(base + k->off) = true;
        } else if (strcmp(v, "false") == 0) {
            *(bool *)(void *)(base + k->off) = false;
        } else {
            return "expected true or false";
        }
        return NULL;
    case KR_CT_LEVEL: {
        int lvl;

        if (!kr_log_level_parse(v, &lvl)) {
            return "expected error, warn, notice, info, debug or trace";
        }
        *(int *)(void *)(base + k->off) = lvl;
        return NULL;
    }
    case KR_CT_DIAL:
        break;
    case KR_CT_NAMES:
    case KR_CT_GLOBS:
    case KR_CT_CIDRS:
    case KR_CT_APIS:
    case KR_CT_ACKS:
    case KR_CT_CODECS:
        return kr_cf_set_list(k, obj, v, buf, blen);
    case KR_CT_VRANGE: {
        const char *dash = strchr(v, '-');
        int64_t lo, hi;
        char tmp[32];

        if (dash == NULL) {
            if (!kr_cf_parse_int(v, &lo)) {
                return "expected a version N or a range N-M";
            }
            hi = lo;
        } else {
            size_t n = (size_t)(dash - v);

            if (n == 0 || n >= sizeof(tmp)) {
                return "expected a version N or a range N-M";
            }
            memcpy(tmp, v, n);
            tmp[n] = '\0';
            if (!kr_cf_parse_int(tmp, &lo) || dash[1] == '-' ||
                !kr_cf_parse_int(dash + 1, &hi)) {
                return "expected a version N or a range N-M";
            }
        }
        if (lo < k->min || hi > k->max || lo > hi) {
            snprintf(buf, blen, "expected N-M with %" PRId64 " <= N <= M "
                     "<= %" PRId64, k->min, k->max);
            return buf;
        }
        *(int32_t *)(void *)(base + k->off) = (int32_t)lo;
        *(int32_t *)(void *)(base + k->off2) = (int32_t)hi;
        return NULL;
    }
    case KR_CT_CHOICE: {
        int i;
        size_t used = 0;

        for (i = 0; k->choices[i] != NULL; i++) {
            if (k->choices[i][0] != '\0' && strcmp(v, k->choices[i]) == 0) {
                *(int *)(void *)(base + k->off) = i;
                return NULL;
            }
        }
        /* "expected A, B or C", as [log] level's */
        {
            size_t nc = 0, j = 0;

            for (i = 0; k->choices[i] != NULL; i++) {
                nc += k->choices[i][0] != '\0';
            }
            used = (size_t)snprintf(buf, blen, "expected");
            for (i = 0; k->choices[i] != NULL && used < blen; i++) {
                if (k->choices[i][0] != '\0') {
                    j++;
                    used += (size_t)snprintf(buf + used, blen - used, "%s%s",
                                             j == 1 ? " "
                                             : j == nc ? " or " : ", ",
                                             k->choices[i]);
                }
            }
        }
        return buf;
    }
    case KR_CT_KERR: {
        int code;

        if (kr_cf_parse_int(v, &iv)) {
            code = iv >= k->min && iv <= k->max ? (int)iv : -1;
        } else {
            code = kr_kerr_by_name(v);
        }
        if (code < k->min || code > k->max) {
            return "expected a Kafka error name (e.g. "
                   "TOPIC_AUTHORIZATION_FAILED) or a code > 0";
        }
        if (kr_kerr_name((int16_t)code) == NULL) {
            snprintf(buf, blen, "error code %d is not one Kafka defines "
                     "(clients could not interpret it)", code);
            return buf;
        }
        *(int32_t *)(void *)(base + k->off) = code;
        return NULL;
    }
    case KR_CT_PROB: {
        char *end;
        double d;

        errno = 0;
        d = strtod(v, &end);
        if (errno != 0 || end == v || *end != '\0' || !isfinite(d) ||
            d < 0.0 || d > 1.0) {
            return "expected a probability from 0 to 1";
        }
        *(double *)(void *)(base + k->off) = d;
        return NULL;
    }
    }
    return "internal error: bad key type";
}

/* ---- the inih handler and reader ---------------------------------------- */

static const struct kr_cf_key *
kr_cf_find_key(enum kr_cf_sect kind, const char *name, size_t *idx)
{
    size_t i;

    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if (k->sect != kind) {
            continue;
        }
        if (k->type == KR_CT_DIAL
                ? strncmp(name, k->name, strlen(k->name)) == 0
                : strcmp(name, k->name) == 0) {
            *idx = i;
            return k;
        }
    }
    return NULL;
}

static void
kr_cf_dial(struct kr_cf_state *st, struct kr_cf_inst *in,
           const struct kr_cf_key *k, const char *name, const char *value)
{
    struct kr_upstream_conf *up = in->obj;
    int line = st->lineno;
    const char *id = name + strlen(k->name);
    int64_t node;
    struct kr_hostport hp = { NULL, 0 };
    struct kr_dial_override *nd;
    int *nl;
    int i;

    if (!kr_cf_parse_int(id, &node) || node < k->min || node > k->max) {
        kr_cf_err(st, line, "'%s': expected dial.NODEID with NodeId "
                  "0..%" PRId64, name, k->max);
        return;
    }
    for (i = 0; i < up->ndial; i++) {
        if (up->dial[i].node_id == node) {
            kr_cf_err(st, line, "'%s' given twice (first at line %d)", name,
                      in->dial_line[i]);
            return;
        }
    }
    if (up->ndial >= KR_CONF_MAX_DIAL) {
        kr_cf_err(st, line, "too many dial.NODEID keys (max %d)",
                  KR_CONF_MAX_DIAL);
        return;
    }
    if (!kr_hostport_parse(value, &hp) || hp.host[0] == '\0') {
        free(hp.host);
        kr_cf_err(st, line, "'%s': bad value '%s': expected HOST:PORT "
                  "(IPv6 as [ADDR]:PORT)", name, value);
        return;
    }
    nd = realloc(up->dial, sizeof(*nd) * (size_t)(up->ndial + 1));
    nl = nd == NULL ? NULL
                    : realloc(in->dial_line,
                              sizeof(*nl) * (size_t)(up->ndial + 1));
    if (nd != NULL) {
        up->dial = nd;
    }
    if (nl == NULL) {
        free(hp.host);
        kr_cf_err(st, line, "out of memory");
        return;
    }
    in->dial_line = nl;
    up->dial[up->ndial].node_id = (int32_t)node;
    up->dial[up->ndial].addr = hp;
    in->dial_line[up->ndial] = line;
    up->ndial++;
}

static int
kr_cf_handler(void *user, const char *section, const char *name,
              const char *value)
{
    struct kr_cf_state *st = user;
    struct kr_cf_inst *in = st->cur;
    int line = st->lineno;
    const struct kr_cf_key *k;
    size_t idx;
    char lbl[KR_CONF_MAX_NAME + 32];
    char buf[128];
    const char *why;

    (void)section;              /* we track sections ourselves */
    st->handled_line = line;
    if (in == NULL) {
        if (!st->cur_bad) {
            kr_cf_err(st, line, "key '%s' outside any section", name);
        }
        return 1;
    }
    if (in->bad) {
        return 1;               /* the header was already reported */
    }
    if (name[0] == '\0') {
        kr_cf_err(st, line, "missing key name before '='");
        return 1;
    }
    k = kr_cf_find_key(in->kind, name, &idx);
    if (k == NULL) {
        kr_cf_err(st, line, "unknown key '%s' in %s", name,
                  kr_cf_inst_label(in, lbl, sizeof(lbl)));
        return 1;
    }
    if (k->type == KR_CT_DIAL) {
        kr_cf_dial(st, in, k, name, value);
        return 1;
    }
    if (in->key_line[idx] != 0) {
        kr_cf_err(st, line, "key '%s' given twice in %s (first at line %d)",
                  name, kr_cf_inst_label(in, lbl, sizeof(lbl)),
                  abs(in->key_line[idx]));
        return 1;
    }
    if ((k->flags & KR_CF_SECRET) && strcmp(value, KR_CF_SECRET_HIDDEN) == 0) {
        /* krelay -T's output: the secret itself is not in it */
        kr_cf_err(st, line, "%s: %s: krelay -T hid this secret; set it "
                  "again (or %s_file)",
                  kr_cf_inst_label(in, lbl, sizeof(lbl)), name, name);
        in->key_line[idx] = -line;
        return 1;
    }
    why = kr_cf_set(k, in->obj, value, buf, sizeof(buf));
    if (why != NULL) {
        kr_cf_err(st, line, "'%s': bad value '%s': %s", name, value, why);
        in->key_line[idx] = -line;
        return 1;
    }
    in->key_line[idx] = line;
    return 1;
}

/*
 * A new section of kind named name ("" unnamed) starting at line, with
 * its object: appended to st->insts and returned (NULL, reported, when
 * out of memory).  The pointer is good until the next one is added.
 */
static struct kr_cf_inst *
kr_cf_inst_add(struct kr_cf_state *st, enum kr_cf_sect kind,
               const char *name, int line)
{
    struct kr_cf_inst *in, *ni;

    ni = realloc(st->insts, sizeof(*ni) * (size_t)(st->ninsts + 1));
    if (ni == NULL) {
        kr_cf_err(st, line, "out of memory");
        return NULL;
    }
    st->insts = ni;
    in = &st->insts[st->ninsts];
    memset(in, 0, sizeof(*in));
    in->kind = kind;
    in->line = line;
    switch (in->kind) {
    case KR_CS_LISTENER:
        in->obj = calloc(1, sizeof(struct kr_listener_conf));
        break;
    case KR_CS_UPSTREAM:
        in->obj = calloc(1, sizeof(struct kr_upstream_conf));
        break;
    case KR_CS_RULE: {
        struct kr_rule_conf *r = calloc(1, sizeof(*r));

        if (r != NULL) {
            /* "not set" values the key table has no default for */
            r->clamp_min_version = r->clamp_max_version = -1;
            r->throttle_ms = -1;
            r->deny_error = r->fault_error = -1;
        }
        in->obj = r;
        break;
    }
    case KR_CS_AUDIT:
        in->obj = &st->conf->audit;
        break;
    case KR_CS_ADMIN:
        in->obj = &st->conf->admin;
        break;
    case KR_CS_PROCESS:
        in->obj = &st->conf->process;
        break;
    default:
        in->obj = &st->conf->log;
        break;
    }
    in->name = strdup(name);
    if (in->obj == NULL || in->name == NULL) {
        if (in->kind != KR_CS_LOG && in->kind != KR_CS_AUDIT &&
            in->kind != KR_CS_ADMIN &&
            in->kind != KR_CS_PROCESS) {
            free(in->obj);
        }
        free(in->name);
        kr_cf_err(st, line, "out of memory");
        return NULL;
    }
    if (in->kind == KR_CS_LISTENER) {
        ((struct kr_listener_conf *)in->obj)->name = in->name;
        ((struct kr_listener_conf *)in->obj)->line = line;
    } else if (in->kind == KR_CS_UPSTREAM) {
        ((struct kr_upstream_conf *)in->obj)->name = in->name;
        ((struct kr_upstream_conf *)in->obj)->line = line;
    } else if (in->kind == KR_CS_RULE) {
        ((struct kr_rule_conf *)in->obj)->name = in->name;
        ((struct kr_rule_conf *)in->obj)->line = line;
    }
    st->ninsts++;
    return in;
}

/* A new section header "[kind NAME]" at the current line. */
static void
kr_cf_section(struct kr_cf_state *st, const char *hdr, size_t len)
{
    int line = st->lineno;
    const char *close = memchr(hdr, ']', len);
    const char *p, *rest;
    char word[32], name[KR_CONF_MAX_NAME + 2];
    size_t wl = 0, nl = 0;
    int kind, i;
    struct kr_cf_inst *in;
    char lbl[KR_CONF_MAX_NAME + 32];

    st->cur = NULL;
    st->cur_bad = true;         /* until proven good */
    if (close == NULL) {
        kr_cf_err(st, line, "syntax error: section header without ']'");
        return;
    }
    for (rest = close + 1; rest < hdr + len; rest++) {
        if (*rest == ';' || *rest == '#') {
            break;
        }
        if (!isspace((unsigned char)*rest)) {
            kr_cf_err(st, line, "syntax error: text after ']'");
            return;
        }
    }
    p = hdr + 1;
    while (p < close && isspace((unsigned char)*p)) {
        p++;
    }
    while (p < close && !isspace((unsigned char)*p)) {
        if (wl + 1 < sizeof(word)) {
            word[wl] = *p;
        }
        wl++;
        p++;
    }
    while (p < close && isspace((unsigned char)*p)) {
        p++;
    }
    while (p < close && !isspace((unsigned char)*p)) {
        if (nl + 1 < sizeof(name)) {
            name[nl] = *p;
        }
        nl++;
        p++;
    }
    while (p < close && isspace((unsigned char)*p)) {
        p++;
    }
    word[wl < sizeof(word) ? wl : sizeof(word) - 1] = '\0';
    name[nl < sizeof(name) ? nl : sizeof(name) - 1] = '\0';
    if (p != close) {
        kr_cf_err(st, line, "syntax error: expected [KIND] or [KIND NAME]");
        return;
    }
    for (kind = 0; kind < KR_CS_NKINDS; kind++) {
        if (strcmp(word, kr_cf_sect_names[kind]) == 0) {
            break;
        }
    }
    if (wl == 0 || kind == KR_CS_NKINDS) {
        kr_cf_err(st, line, "unknown section [%.*s] (expected listener, "
                  "upstream, log, rule, audit, admin or process)",
                  (int)(close - hdr - 1),
                  hdr + 1);
        return;
    }
    if (nl > 0 && (nl > KR_CONF_MAX_NAME || !kr_cf_name_ok(name))) {
        kr_cf_err(st, line, "bad section name '%s' (letters, digits, - _ ., "
                  "at most %d)", name, KR_CONF_MAX_NAME);
        return;
    }
    if ((kind == KR_CS_LOG || kind == KR_CS_AUDIT || kind == KR_CS_ADMIN ||
         kind == KR_CS_PROCESS) && nl > 0) {
        kr_cf_err(st, line, "[%s] takes no name", kr_cf_sect_names[kind]);
        return;
    }
    if (kind == KR_CS_RULE && nl == 0) {
        kr_cf_err(st, line, "[rule] needs a name, as in [rule NAME]");
        return;
    }

    in = kr_cf_inst_add(st, (enum kr_cf_sect)kind, name, line);
    if (in == NULL) {
        return;
    }

    for (i = 0; i < st->ninsts - 1; i++) {
        if (st->insts[i].kind == in->kind &&
            strcmp(st->insts[i].name, in->name) == 0) {
            kr_cf_err(st, line, "duplicate section %s (first at line %d)",
                      kr_cf_inst_label(in, lbl, sizeof(lbl)),
                      st->insts[i].line);
            in->bad = true;
            break;
        }
    }
    st->cur = in;
    st->cur_bad = false;
}

/* The previous key line never reached the handler: inih refused it. */
static void
kr_cf_check_handled(struct kr_cf_state *st)
{
    if (st->kv_line != 0 && st->handled_line != st->kv_line) {
        if (st->cur != NULL && !st->cur->bad) {
            kr_cf_err(st, st->kv_line, "syntax error: expected "
                      "'key = value'");
        } else if (st->cur == NULL && !st->cur_bad) {
            kr_cf_err(st, st->kv_line, "syntax error: expected "
                      "'key = value' or '[section]'");
        }
    }
    st->kv_line = 0;
}

/*
 * inih's fgets-style reader: one physical line per call, leading blanks
 * and the newline (and a CR before it) removed.  size is inih's buffer.
 */
static char *
kr_cf_reader(char *str, int size, void *stream)
{
    struct kr_cf_state *st = stream;
    const char *line, *nl;
    size_t len, max, skip = 0;

    kr_cf_check_handled(st);
    if (st->pos >= st->len || size < 3) {
        return NULL;
    }
    line = st->text + st->pos;
    nl = memchr(line, '\n', st->len - st->pos);
    len = nl != NULL ? (size_t)(nl - line) : st->len - st->pos;
    st->pos += len + (nl != NULL ? 1 : 0);
    st->lineno++;
    if (len > 0 && line[len - 1] == '\r') {
        len--;
    }
    if (st->lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        skip = 3;               /* UTF-8 byte order mark */
    }
    max = (size_t)size - 2;
    if (max > KR_CONF_MAX_LINE) {
        max = KR_CONF_MAX_LINE;
    }
    if (len > max) {
        kr_cf_err(st, st->lineno, "line too long (%zu bytes, max %zu)", len,
                  max);
        strcpy(str, ";\n");
        return str;
    }
    if (memchr(line, '\0', len) != NULL) {
        kr_cf_err(st, st->lineno, "NUL byte in line");
        strcpy(str, ";\n");
        return str;
    }
    while (skip < len && isspace((unsigned char)line[skip])) {
        skip++;
    }
    line += skip;
    len -= skip;
    while (len > 0 && isspace((unsigned char)line[len - 1])) {
        len--;
    }
    memcpy(str, line, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    if (len == 0 || line[0] == ';' || line[0] == '#') {
        return str;
    }
    if (line[0] == '[') {
        kr_cf_section(st, line, len);
        return str;
    }
    st->kv_line = st->lineno;
    return str;
}

/* ---- whole-config checks ------------------------------------------------ */

static void
kr_cf_free_listener(struct kr_listener_conf *l)
{
    free(l->name);
    free(l->listen.host);
    free(l->advertised_host);
    free(l->upstream);
    free(l->ssl_certificate);
    free(l->ssl_key);
    free(l->ssl_client_ca);
    free(l->ssl_crl);
    free(l->ssl_ciphers);
    free(l->ssl_ciphersuites);
    kr_tls_ctx_put(l->tls);
    free(l->ssl_principal_mapping_rules);
    kr_principal_mapping_rules_free(l->principal_rules);
    free(l->sni_broker_name);
    free(l->sni_bootstrap_name);
    kr_sni_free(l->sni);
    free(l->sasl_mechanisms);
    free(l->sasl_credentials);
    free(l->sasl_login_rate);
    kr_sasl_srv_cfg_free(l->sasl_srv);
    free(l->oauthbearer_principal_claim);
    free(l->proxy_protocol_from);
}

/* A secret's bytes wiped, then freed. */
static void
kr_cf_free_secret(char *p)
{
    if (p != NULL) {
        OPENSSL_cleanse(p, strlen(p));
        free(p);
    }
}

static void
kr_cf_free_sasl(struct kr_sasl_cred *c)
{
    free(c->username);
    free(c->password_file);
    kr_cf_free_secret(c->password);
    free(c->token_file);
    kr_cf_free_secret(c->token);
    if (c->secret != NULL) {
        OPENSSL_cleanse(c->secret, c->secret_len);
        free(c->secret);
    }
}

static void
kr_cf_free_upstream(struct kr_upstream_conf *u)
{
    int i;

    free(u->name);
    kr_cf_free_hostports(u->bootstrap, u->nbootstrap);
    for (i = 0; i < u->ndial; i++) {
        free(u->dial[i].addr.host);
    }
    free(u->dial);
    free(u->ssl_ca);
    free(u->ssl_certificate);
    free(u->ssl_key);
    kr_tls_ctx_put(u->tls);
    kr_cf_free_sasl(&u->sasl);
    kr_cf_free_sasl(&u->metadata_sasl);
}

static void
kr_cf_free_rule(struct kr_rule_conf *r)
{
    size_t i;

    for (i = 0; i < KR_CF_NKEYS; i++) {
        if (kr_conf_keys[i].sect == KR_CS_RULE) {
            kr_cf_clear(&kr_conf_keys[i], r);
        }
    }
    free(r->name);
}

static int
kr_cf_key_index(enum kr_cf_sect kind, const char *name)
{
    size_t idx;

    if (kr_cf_find_key(kind, name, &idx) == NULL) {
        return -1;
    }
    return (int)idx;
}

/* Line of key name in section in, or the section line when unset. */
static int
kr_cf_line_of(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);
    int l = i >= 0 ? abs(in->key_line[i]) : 0;

    return l != 0 ? l : in->line;
}

/* True when key name of in holds a usable value (set well, or default). */
static bool
kr_cf_key_ok(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);

    if (i < 0 || in->key_line[i] < 0) {
        return false;
    }
    return in->key_line[i] > 0 || kr_conf_keys[i].def != NULL;
}

/* True when key name of in was given with a bad value. */
static bool
kr_cf_key_line_bad(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);

    return i >= 0 && in->key_line[i] < 0;
}

/* True when key name of in was given with a good value. */
static bool
kr_cf_key_given(const struct kr_cf_inst *in, const char *name)
{
    int i = kr_cf_key_index(in->kind, name);

    return i >= 0 && in->key_line[i] > 0;
}

/*
 * [log] or [audit] target = syslog where there is no syslog socket
 * (kr_log_syslog_present: containers, minimal hosts): glibc's syslog(3)
 * would drop every line without a word.  A warning naming the effect.
 */
static void
kr_cf_check_syslog(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    const char *target = in->kind == KR_CS_AUDIT
                             ? ((struct kr_audit_conf *)in->obj)->target
                             : ((struct kr_log_conf *)in->obj)->target;

    if (target == NULL || strcmp(target, "syslog") != 0 ||
        kr_log_syslog_present()) {
        return;
    }
    kr_cf_warn(st, kr_cf_line_of(in, "target"), "[%s]: target = syslog, "
               "but there is no syslog socket at %s (no syslog daemon, as "
               "in most containers): %s", kr_cf_sect_names[in->kind],
               kr_log_syslog_path, in->kind == KR_CS_AUDIT
               ? "every audit line would be lost (krelay counts them as "
                 "dropped and logs how many); use stdout or a file"
               : "syslog(3) drops krelay's log lines without a word; use "
                 "stderr (under systemd: the journal) or a file");
}

static void kr_cf_check_admin(struct kr_cf_state *st,
                              struct kr_cf_inst *in);

/* Defaults and required keys of one section. */
static void
kr_cf_finish_inst(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    size_t i;
    char lbl[KR_CONF_MAX_NAME + 32];
    char buf[128];

    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if (k->sect != in->kind || in->key_line[i] != 0 ||
            k->type == KR_CT_DIAL) {
            continue;
        }
        if (k->flags & KR_CF_REQUIRED) {
            kr_cf_err(st, in->line, "%s: missing required key '%s'",
                      kr_cf_inst_label(in, lbl, sizeof(lbl)), k->name);
        } else if (k->def != NULL &&
                   kr_cf_set(k, in->obj, k->def, buf, sizeof(buf)) != NULL) {
            kr_cf_err(st, in->line, "internal error: default of '%s'",
                      k->name);
        }
    }
    if (in->kind == KR_CS_LISTENER) {
        struct kr_listener_conf *l = in->obj;

        if (l->advertised_host == NULL && l->listen.host != NULL &&
            !kr_cf_key_given(in, "sni_broker_name") &&
            !kr_cf_key_line_bad(in, "sni_broker_name")) {
            bool wild = kr_cf_is_wildcard(l->listen.host);

            l->advertised_host = strdup(wild ? "127.0.0.1" : l->listen.host);
            if (l->advertised_host == NULL) {
                kr_cf_err(st, in->line, "out of memory");
            } else if (wild && !kr_cf_key_line_bad(in, "advertised_host")) {
                kr_cf_warn(st, kr_cf_line_of(in, "listen"), "%s: listen = "
                           "%s%s%s:%u is a wildcard address and there is no "
                           "advertised_host: krelay tells every client that "
                           "the brokers are at 127.0.0.1, so clients on "
                           "other machines cannot connect (set "
                           "advertised_host to the name or address they "
                           "reach this host by)",
                           kr_cf_inst_label(in, lbl, sizeof(lbl)),
                           strchr(l->listen.host, ':') != NULL ? "[" : "",
                           l->listen.host,
                           strchr(l->listen.host, ':') != NULL ? "]" : "",
                           (unsigned)l->listen.port);
            }
        }
    }
    if (in->kind == KR_CS_LOG) {
        struct kr_log_conf *lg = in->obj;

        lg->target_line = kr_cf_line_of(in, "target");
        if (lg->target != NULL && strcmp(lg->target, "stdout") == 0) {
            /* it would be a file named "stdout" */
            kr_cf_err(st, lg->target_line, "[log] target = stdout: the log "
                      "goes to stderr, syslog or a file (stdout is for audit "
                      "lines: [audit] target = stdout)");
        }
    } else if (in->kind == KR_CS_AUDIT) {
        struct kr_audit_conf *au = in->obj;

        au->target_line = kr_cf_line_of(in, "target");
        if (au->target != NULL && strcmp(au->target, "stderr") == 0) {
            kr_cf_err(st, au->target_line, "[audit] target = stderr: audit "
                      "lines go to stdout, syslog or a file (stderr is the "
                      "log's)");
        }
    }
    if (in->kind == KR_CS_LOG || in->kind == KR_CS_AUDIT) {
        kr_cf_check_syslog(st, in);
    }
    if (in->kind == KR_CS_ADMIN) {
        kr_cf_check_admin(st, in);
    }
}

static bool
kr_cf_hosts_clash(const char *a, const char *b)
{
    return kr_cf_is_wildcard(a) || kr_cf_is_wildcard(b) ||
           strcasecmp(a, b) == 0;
}

/* Ports of one listener, when its keys are usable. */
struct kr_cf_ports {
    bool ok;                    /* listen usable */
    bool range_ok;              /* broker range usable */
    int listen;
    int lo, hi;                 /* broker ports */
};

static struct kr_cf_ports
kr_cf_listener_ports(const struct kr_cf_inst *in)
{
    const struct kr_listener_conf *l = in->obj;
    struct kr_cf_ports p = { false, false, 0, 0, 0 };

    p.ok = kr_cf_key_ok(in, "listen") && l->listen.host != NULL;
    p.listen = l->listen.port;
    p.range_ok = l->sni_broker_name == NULL &&
                 kr_cf_key_ok(in, "broker_port_base") &&
                 kr_cf_key_ok(in, "node_id_min") &&
                 kr_cf_key_ok(in, "node_id_max") &&
                 l->node_id_min <= l->node_id_max &&
                 (int)l->broker_port_base + l->node_id_max <= 65535;
    p.lo = (int)l->broker_port_base + l->node_id_min;
    p.hi = (int)l->broker_port_base + l->node_id_max;
    return p;
}

/* Half of l's max_frame_bytes (at least 1): the most a translated
   Fetch's MaxBytes may be (kr_analyse.c: legacy_fetch_cap). */
static int64_t
kr_cf_half_frame(const struct kr_listener_conf *l)
{
    return l->max_frame_bytes / 2 > 0 ? l->max_frame_bytes / 2 : 1;
}

static void
kr_cf_check_listener(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    struct kr_listener_conf *l = in->obj;
    struct kr_cf_ports p;
    char lbl[KR_CONF_MAX_NAME + 32];

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (kr_cf_key_given(in, "advertised_host") &&
        l->advertised_host != NULL && kr_cf_is_wildcard(l->advertised_host)) {
        kr_cf_err(st, kr_cf_line_of(in, "advertised_host"),
                  "%s: advertised_host = %s%s%s is a wildcard address: "
                  "clients would be told to connect to it and cannot (write "
                  "the name or address clients reach this host by)", lbl,
                  strchr(l->advertised_host, ':') != NULL ? "[" : "",
                  l->advertised_host,
                  strchr(l->advertised_host, ':') != NULL ? "]" : "");
    }
    if (kr_cf_key_ok(in, "node_id_min") && kr_cf_key_ok(in, "node_id_max") &&
        l->node_id_min > l->node_id_max) {
        kr_cf_err(st, kr_cf_line_of(in, "node_id_max"),
                  "%s: node_id_min %" PRId32 " > node_id_max %" PRId32, lbl,
                  l->node_id_min, l->node_id_max);
    }
    if (kr_cf_key_ok(in, "broker_port_base") &&
        kr_cf_key_ok(in, "node_id_max") &&
        (int)l->broker_port_base + l->node_id_max > 65535) {
        kr_cf_err(st, kr_cf_line_of(in, "broker_port_base"),
                  "%s: broker_port_base %u + node_id_max %" PRId32
                  " = %d is above 65535", lbl, (unsigned)l->broker_port_base,
                  l->node_id_max, (int)l->broker_port_base + l->node_id_max);
    }
    /* legacy_fetch_max_bytes as it applies: a translated Fetch's MaxBytes
       is at most half of max_frame_bytes too (kr_analyse.c:
       legacy_fetch_cap), so the config holds that, which -T prints and a
       reload compares */
    if (kr_cf_key_ok(in, "max_frame_bytes") &&
        kr_cf_key_ok(in, "legacy_fetch_max_bytes") &&
        l->legacy_fetch_max_bytes > kr_cf_half_frame(l)) {
        /* given above it, warned (unless it is the least the key takes,
           which -T prints for a half below that, so that its output
           loads back without a warning) */
        if (kr_cf_key_given(in, "legacy_fetch_max_bytes") &&
            l->legacy_fetch_max_bytes > KR_CF_LEGACY_FETCH_MIN) {
            kr_cf_warn(st, kr_cf_line_of(in, "legacy_fetch_max_bytes"),
                       "%s: legacy_fetch_max_bytes = %" PRId64 " is above "
                       "half of max_frame_bytes (%" PRId64 "): %" PRId64
                       " applies (krelay holds a translated Fetch response "
                       "whole, within max_frame_bytes)", lbl,
                       l->legacy_fetch_max_bytes, l->max_frame_bytes,
                       kr_cf_half_frame(l));
        }
        l->legacy_fetch_max_bytes = kr_cf_half_frame(l);
    }
    p = kr_cf_listener_ports(in);
    if (p.ok && p.range_ok && p.listen >= p.lo && p.listen <= p.hi) {
        kr_cf_err(st, kr_cf_line_of(in, "listen"),
                  "%s: listen port %d is also the port of NodeId %d "
                  "(broker ports %d-%d)", lbl, p.listen,
                  p.listen - (int)l->broker_port_base, p.lo, p.hi);
    }
}

static void
kr_cf_check_pair(struct kr_cf_state *st, struct kr_cf_inst *a,
                 struct kr_cf_inst *b)
{
    const struct kr_listener_conf *la = a->obj, *lb = b->obj;
    struct kr_cf_ports pa = kr_cf_listener_ports(a);
    struct kr_cf_ports pb = kr_cf_listener_ports(b);
    char la_lbl[KR_CONF_MAX_NAME + 32], lb_lbl[KR_CONF_MAX_NAME + 32];

    if (!pa.ok || !pb.ok ||
        !kr_cf_hosts_clash(la->listen.host, lb->listen.host)) {
        return;
    }
    kr_cf_inst_label(a, la_lbl, sizeof(la_lbl));
    kr_cf_inst_label(b, lb_lbl, sizeof(lb_lbl));
    if (pa.listen == pb.listen) {
        kr_cf_err(st, kr_cf_line_of(b, "listen"),
                  "%s: listen port %d is already used by %s (line %d)",
                  lb_lbl, pb.listen, la_lbl, kr_cf_line_of(a, "listen"));
    }
    if (pa.range_ok && pb.listen >= pa.lo && pb.listen <= pa.hi) {
        kr_cf_err(st, kr_cf_line_of(b, "listen"),
                  "%s: listen port %d is a broker port of %s (%d-%d)",
                  lb_lbl, pb.listen, la_lbl, pa.lo, pa.hi);
    }
    if (pb.range_ok && pa.listen >= pb.lo && pa.listen <= pb.hi) {
        kr_cf_err(st, kr_cf_line_of(b, "broker_port_base"),
                  "%s: broker ports %d-%d include the listen port %d of %s",
                  lb_lbl, pb.lo, pb.hi, pa.listen, la_lbl);
    }
    if (pa.range_ok && pb.range_ok && pa.lo <= pb.hi && pb.lo <= pa.hi) {
        kr_cf_err(st, kr_cf_line_of(b, "broker_port_base"),
                  "%s: broker ports %d-%d overlap those of %s (%d-%d)",
                  lb_lbl, pb.lo, pb.hi, la_lbl, pa.lo, pa.hi);
    }
}

/* Versions [*lo, *hi] of api both known to krelay and in r's versions
 * range; false when there are none. */
static bool
kr_cf_rule_versions(const struct kr_rule_conf *r, int16_t api, int16_t *lo,
                    int16_t *hi)
{
    const struct kr_api_desc *a = kr_api_get(api);
    int32_t l, h;

    if (a == NULL || a->valid.lo > a->valid.hi) {
        return false;
    }
    l = r->versions_min > a->valid.lo ? r->versions_min : a->valid.lo;
    h = r->versions_max < a->valid.hi ? r->versions_max : a->valid.hi;
    if (l < 0) {
        l = 0;
    }
    *lo = (int16_t)l;
    *hi = (int16_t)h;
    return l <= h;
}

/*
 * A deny (or produce policy) answers in place of the broker with the
 * API's error response: refuse a rule naming an API, over the versions it
 * matches, that krelay cannot build one for (such a request would only
 * close the connection).  A rule without api is checked per request.
 */
static void
kr_cf_check_answerable(struct kr_cf_state *st, struct kr_cf_inst *in,
                       const char *lbl, const char *action, int16_t api)
{
    const struct kr_rule_conf *r = in->obj;
    char vs[160];
    size_t used = 0;
    int16_t lo, hi, v;

    if (!kr_cf_rule_versions(r, api, &lo, &hi)) {
        return;
    }
    vs[0] = '\0';
    for (v = lo; v <= hi; v++) {
        int16_t w = v;

        if (kr_action_error_response_supported(api, v)) {
            continue;
        }
        while (w < hi &&
               !kr_action_error_response_supported(api, (int16_t)(w + 1))) {
            w++;
        }
        if (used < sizeof(vs)) {
            used += (size_t)snprintf(vs + used, sizeof(vs) - used,
                                     w > v ? "%s%d-%d" : "%s%d",
                                     used > 0 ? "," : "", v, w);
        }
        v = w;
    }
    if (vs[0] != '\0') {
        kr_cf_err(st, kr_cf_line_of(in, "api"), "%s: %s, but krelay cannot "
                  "build an error response for %s v%s (such a request would "
                  "close the connection): leave it out of api or narrow "
                  "versions", lbl, action, kr_api_get(api)->name, vs);
    }
}

/*
 * The [upstream] section behind listener section l: the one its upstream
 * key names, else the only one; NULL when neither resolves (an error of
 * its own).
 */
static const struct kr_cf_inst *
kr_cf_listener_upstream(const struct kr_cf_state *st,
                        const struct kr_cf_inst *l)
{
    const struct kr_listener_conf *lc = l->obj;
    const struct kr_cf_inst *only = NULL;
    int i, nu = 0;

    for (i = 0; i < st->ninsts; i++) {
        const struct kr_cf_inst *u = &st->insts[i];

        if (u->bad || u->kind != KR_CS_UPSTREAM) {
            continue;
        }
        if (lc->upstream != NULL && strcmp(lc->upstream, u->name) == 0) {
            return u;
        }
        nu++;
        only = u;
    }
    return lc->upstream == NULL && nu == 1 ? only : NULL;
}

/* Does rule r apply to listener section l (its `listener` names)? */
static bool
kr_cf_rule_on_listener(const struct kr_rule_conf *r,
                       const struct kr_cf_inst *l)
{
    int i;

    for (i = 0; i < r->listener.n; i++) {
        if (strcmp(r->listener.v[i], l->name) == 0) {
            return true;
        }
    }
    return r->listener.n == 0;
}

/*
 * Does legacy translation carry requests of api at versions lo..max
 * (those below floor, the lowest version the brokers accept) up to floor?
 * Only where floor is where translation ends (kr_bv_decide's rule); l:
 * translation on or not.
 */
static bool
kr_cf_legacy_covers(const struct kr_listener_conf *l, int16_t api, int lo,
                    int16_t floor)
{
    int16_t tlo, thi;

    return kr_bv_legacy_range(api, &tlo, &thi) && lo >= tlo &&
           floor == thi + 1 && (l == NULL || l->translate_legacy);
}

/*
 * A clamp_max_version below the lowest version of api the brokers accept:
 * clients that follow the clamp are left only versions they refuse.  For
 * each listener the rule applies to, with the [upstream] behind it:
 *   - broker_profile set: below that profile's minimum
 *     (kr_bv_profile_min) is an error (kr_cf_err), unless translate_legacy
 *     is on for the listener and translation covers those versions;
 *   - no profile: below Kafka 4's minimum (kr_api_min_kafka4) is a
 *     warning, as krelay does not know which Kafka is upstream, unless
 *     translation covers those versions (translate_legacy on).
 * One error (the first listener at fault) or one warning per API.
 */
static void
kr_cf_check_clamp_kafka4(struct kr_cf_state *st, struct kr_cf_inst *in,
                         const char *lbl, const struct kr_api_desc *a)
{
    const struct kr_rule_conf *r = in->obj;
    const char *rel, *kafka;
    char vs[32], llbl[KR_CONF_MAX_NAME + 32], ulbl[KR_CONF_MAX_NAME + 32];
    int16_t k4 = kr_api_min_kafka4(a, &rel);
    int lo = r->clamp_min_version > a->valid.lo ? r->clamp_min_version
                                                : a->valid.lo;
    int max = r->clamp_max_version, i, nlist = 0;
    bool warn = false;

    if (max < 0) {
        return;
    }
    snprintf(vs, sizeof(vs), lo < max ? "v%d-%d" : "v%d", lo, max);
    for (i = 0; i < st->ninsts; i++) {
        const struct kr_cf_inst *l = &st->insts[i], *u;
        const struct kr_listener_conf *lc = l->obj;
        int profile;
        int16_t pmin;

        if (l->bad || l->kind != KR_CS_LISTENER ||
            !kr_cf_rule_on_listener(r, l)) {
            continue;
        }
        nlist++;
        u = kr_cf_listener_upstream(st, l);
        profile = u != NULL
                      ? ((const struct kr_upstream_conf *)u->obj)
                            ->broker_profile
                      : KR_BROKER_PROFILE_LEARNED;
        pmin = kr_bv_profile_min(profile, a->key);
        if (profile == KR_BROKER_PROFILE_LEARNED || pmin < 0) {
            warn = warn || (k4 >= 0 && max < k4 &&
                            !kr_cf_legacy_covers(lc, a->key, lo, k4));
            continue;
        }
        if (max >= pmin || kr_cf_legacy_covers(lc, a->key, lo, pmin)) {
            continue;
        }
        kr_cf_inst_label(l, llbl, sizeof(llbl));
        kr_cf_inst_label(u, ulbl, sizeof(ulbl));
        kr_cf_err(st, kr_cf_line_of(in, "clamp_max_version"),
                  "%s: clamp_max_version %d is below the lowest %s version "
                  "the brokers of %s accept (broker_profile = %s: %d): "
                  "clients of %s that follow the clamp are left %s %s, "
                  "which those brokers refuse; %s", lbl, max, a->name, ulbl,
                  kr_broker_profile_name(profile), (int)pmin, llbl, a->name,
                  vs,
                  kr_cf_legacy_covers(NULL, a->key, lo, pmin)
                      ? "set translate_legacy = true there (krelay "
                        "translates them up) or raise the clamp"
                      : "krelay does not translate them: raise the clamp");
        return;
    }
    if (nlist == 0) {
        /* the rule names no listener that loaded (an error of its own) */
        warn = k4 >= 0 && max < k4;
    }
    if (!warn) {
        return;
    }
    kafka = strcmp(rel, "4.0.0") == 0 ? "Kafka 4.0.0" : "Kafka 4";
    kr_cf_warn(st, kr_cf_line_of(in, "clamp_max_version"),
               "%s: clamp_max_version %d is below the lowest %s version %s "
               "accepts (%d%s): clients that follow the clamp are left %s "
               "%s, which %s brokers refuse, so against %s they cannot use "
               "%s at all", lbl, max, a->name, kafka,
               (int)k4, strcmp(rel, "4.0.0") == 0
                            ? "; 4.0.1 and later accept lower ones again"
                            : ", per the 4.3.1 schemas",
               a->name, vs, kafka, kafka, a->name);
}

/* Rule keys with a side: {key, given}. */
struct kr_cf_side_key {
    const char *key;
    bool given;
};

/*
 * Rules that could never act, or whose action krelay could not carry
 * out: a request-side action with direction = response and the reverse,
 * pass_unknown_apis without a clamp, a clamp leaving no version krelay
 * knows, a deny or produce policy on an API krelay cannot answer.
 */
static void
kr_cf_check_rule_acts(struct kr_cf_state *st, struct kr_cf_inst *in,
                      const char *lbl)
{
    const struct kr_rule_conf *r = in->obj;
    bool clamp = r->clamp_min_version >= 0 || r->clamp_max_version >= 0;
    bool policy = r->allowed_acks != 0 || r->allowed_compression != 0;
    const struct kr_cf_side_key req_keys[] = {
        { "deny", r->deny },
        { "clamp_min_version", r->clamp_min_version >= 0 },
        { "clamp_max_version", r->clamp_max_version >= 0 },
        { "pass_unknown_apis", r->pass_unknown_apis },
        { "allowed_acks", r->allowed_acks != 0 },
        { "allowed_compression", r->allowed_compression != 0 },
    };
    const struct kr_cf_side_key rsp_keys[] = {
        { "throttle_ms", r->throttle_ms >= 0 },
        { "fault_latency_ms", r->fault_latency_ms > 0 },
        { "fault_error", r->fault_error >= 0 },
        { "fault_close_probability", r->fault_close_probability > 0 },
    };
    size_t i;
    int j;

    for (i = 0; r->direction == KR_RDIR_RESPONSE &&
                i < KR_ARRAY_LEN(req_keys); i++) {
        if (req_keys[i].given) {
            kr_cf_err(st, kr_cf_line_of(in, req_keys[i].key),
                      "%s: %s acts on requests, but direction = response: "
                      "it would never apply (use direction = request or "
                      "both)", lbl, req_keys[i].key);
        }
    }
    for (i = 0; r->direction == KR_RDIR_REQUEST &&
                i < KR_ARRAY_LEN(rsp_keys); i++) {
        if (rsp_keys[i].given) {
            kr_cf_err(st, kr_cf_line_of(in, rsp_keys[i].key),
                      "%s: %s acts on responses, but direction = request: "
                      "it would never apply (use direction = response or "
                      "both)", lbl, rsp_keys[i].key);
        }
    }
    if (r->pass_unknown_apis && !clamp) {
        kr_cf_err(st, kr_cf_line_of(in, "pass_unknown_apis"),
                  "%s: pass_unknown_apis only changes the ApiVersions "
                  "responses this rule clamps: it needs clamp_min_version "
                  "or clamp_max_version (and api)", lbl);
    }
    for (j = 0; clamp && j < r->napi; j++) {
        const struct kr_api_desc *a = kr_api_get(r->api[j]);

        if (a == NULL || a->valid.lo > a->valid.hi) {
            continue;
        }
        if (r->api[j] == KR_API_SASL_HANDSHAKE) {
            /* v0 and v1 frame what follows differently (raw tokens or
               SaslAuthenticate): translating one into the other would put
               krelay and the broker out of step */
            kr_cf_err(st, kr_cf_line_of(in, r->clamp_max_version >= 0
                                                ? "clamp_max_version"
                                                : "clamp_min_version"),
                      "%s: SaslHandshake cannot be clamped: its versions "
                      "frame the SASL exchange after it differently", lbl);
        } else if (r->clamp_min_version > a->valid.hi) {
            kr_cf_err(st, kr_cf_line_of(in, "clamp_min_version"),
                      "%s: clamp_min_version %d is above every %s version "
                      "krelay knows (%d-%d): no version would be left",
                      lbl, (int)r->clamp_min_version, a->name,
                      (int)a->valid.lo, (int)a->valid.hi);
        } else if (r->clamp_max_version >= 0 &&
                   r->clamp_max_version < a->valid.lo) {
            kr_cf_err(st, kr_cf_line_of(in, "clamp_max_version"),
                      "%s: clamp_max_version %d is below every %s version "
                      "krelay knows (%d-%d): no version would be left",
                      lbl, (int)r->clamp_max_version, a->name,
                      (int)a->valid.lo, (int)a->valid.hi);
        } else {
            kr_cf_check_clamp_kafka4(st, in, lbl, a);
        }
    }
    if (r->direction & KR_RDIR_REQUEST) {
        for (j = 0; r->deny && j < r->napi; j++) {
            kr_cf_check_answerable(st, in, lbl, "deny = true", r->api[j]);
        }
        if (policy && !r->deny) {
            kr_cf_check_answerable(st, in, lbl, "a produce policy",
                                   KR_API_PRODUCE);
        }
    }
}

/* ---- issue 9: SASL to the brokers ------------------------------------- */

/* Longest password or token file read, in bytes. */
#define KR_CF_SECRET_FILE_MAX 65536

/*
 * The first line of file path (without its end of line) into *out
 * (malloc'd, NUL-terminated, *len bytes): the password of a
 * sasl_password_file.  0, or -1 with why (errno's words, "is empty"...;
 * never the file's bytes).  What was read is wiped.  *mode: the file's
 * st_mode (0 when it could not be had).
 */
static int
kr_cf_read_secret(const char *path, char **out, size_t *len,
                  unsigned *mode, char *why, size_t wlen)
{
    char *buf = malloc(KR_CF_SECRET_FILE_MAX + 1);
    FILE *f;
    struct stat sb;
    size_t n, i;

    *out = NULL;
    *len = 0;
    *mode = 0;
    if (buf == NULL) {
        snprintf(why, wlen, "out of memory");
        return -1;
    }
    f = fopen(path, "re");
    if (f == NULL) {
        snprintf(why, wlen, "cannot read %s: %s", path, strerror(errno));
        free(buf);
        return -1;
    }
    if (fstat(fileno(f), &sb) == 0) {
        *mode = (unsigned)sb.st_mode;
    }
    n = fread(buf, 1, KR_CF_SECRET_FILE_MAX + 1, f);
    if (ferror(f)) {
        snprintf(why, wlen, "cannot read %s: %s", path, strerror(errno));
        n = 0;
        fclose(f);
        goto fail;
    }
    fclose(f);
    if (n > KR_CF_SECRET_FILE_MAX) {
        snprintf(why, wlen, "%s is larger than %d bytes: not a password "
                 "file", path, KR_CF_SECRET_FILE_MAX);
        goto fail;
    }
    for (i = 0; i < n && buf[i] != '\n'; i++) {
        if (buf[i] == '\0') {
            snprintf(why, wlen, "%s: its first line holds a NUL byte", path);
            goto fail;
        }
    }
    if (i > 0 && buf[i - 1] == '\r') {
        i--;
    }
    if (i == 0) {
        snprintf(why, wlen, "%s: its first line is empty", path);
        goto fail;
    }
    *out = malloc(i + 1);
    if (*out == NULL) {
        snprintf(why, wlen, "out of memory");
        goto fail;
    }
    memcpy(*out, buf, i);
    (*out)[i] = '\0';
    *len = i;
    OPENSSL_cleanse(buf, n);
    free(buf);
    return 0;
fail:
    OPENSSL_cleanse(buf, n);
    free(buf);
    return -1;
}

/*
 * A file of secrets named by key that group or others may read: the
 * warning sasl_credentials gets (kr_sasl_users_mode_warning), at key's
 * line.
 */
static void
kr_cf_warn_mode(struct kr_cf_state *st, int line, const char *lbl,
                const char *key, const char *path, unsigned mode,
                const char *risk)
{
    char *w = kr_sasl_users_mode_warning(path, mode, risk);

    if (w != NULL) {
        kr_cf_warn(st, line, "%s: %s: %s", lbl, key, w);
        free(w);
    }
}

/*
 * [admin]: a port alone listens on loopback; the token from
 * bearer_token or the first line of bearer_token_file (read now: each
 * config generation, so a reload, reads it again), not both.
 */
static void
kr_cf_check_admin(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    struct kr_admin_conf *a = in->obj;
    char why[600];
    size_t len;
    unsigned mode;
    int fl = kr_cf_line_of(in, "bearer_token_file");

    a->listen_line = kr_cf_line_of(in, "listen");
    if (a->listen.host != NULL && a->listen.host[0] == '\0') {
        char *lo = strdup("127.0.0.1");

        if (lo == NULL) {
            kr_cf_err(st, a->listen_line, "out of memory");
            return;
        }
        free(a->listen.host);
        a->listen.host = lo;
    }
    if (a->bearer_token != NULL && a->bearer_token_file != NULL) {
        kr_cf_err(st, kr_cf_line_of(in, "bearer_token"), "[admin]: both "
                  "bearer_token_file and bearer_token are set: give one");
        return;
    }
    if (a->bearer_token != NULL) {
        kr_cf_warn(st, kr_cf_line_of(in, "bearer_token"), "[admin]: "
                   "bearer_token: the token is in the config file "
                   "(bearer_token_file keeps it out of it)");
        a->token = strdup(a->bearer_token);
        if (a->token == NULL) {
            kr_cf_err(st, kr_cf_line_of(in, "bearer_token"),
                      "out of memory");
        }
    } else if (a->bearer_token_file != NULL) {
        if (kr_cf_read_secret(a->bearer_token_file, &a->token, &len, &mode,
                              why, sizeof(why)) != 0) {
            kr_cf_err(st, fl, "[admin]: bearer_token_file: %s", why);
            return;
        }
        kr_cf_warn_mode(st, fl, "[admin]", "bearer_token_file",
                        a->bearer_token_file, mode, "a reader has the token "
                        "of the admin endpoint");
    }
}

/*
 * One set of SASL credentials of an [upstream] (prefix "sasl_" or
 * "metadata_sasl_"): what the mechanism needs, given once; the password
 * file read now (an error at its line when it cannot be: each config
 * generation, so a reload, reads it again); the token file checked
 * readable (read at each authentication).  Keys that go unused warn.
 */
static void
kr_cf_check_sasl_cred(struct kr_cf_state *st, struct kr_cf_inst *in,
                      struct kr_sasl_cred *c, const char *pre,
                      const char *lbl)
{
    char kmech[48], kuser[48], kpf[48], kpw[48], ktf[48], ktok[48];
    char why[600];
    bool oauth = c->mechanism == 4, meta = pre[0] == 'm';
    const char *unused[3];
    int i, nu = 0;

    snprintf(kmech, sizeof(kmech), "%smechanism", pre);
    snprintf(kuser, sizeof(kuser), "%susername", pre);
    snprintf(kpf, sizeof(kpf), "%spassword_file", pre);
    snprintf(kpw, sizeof(kpw), "%spassword", pre);
    snprintf(ktf, sizeof(ktf), "%soauthbearer_token_file", pre);
    snprintf(ktok, sizeof(ktok), "%soauthbearer_token", pre);
    if (c->mechanism == 0) {
        const char *keys[] = { kuser, kpf, kpw, ktf, ktok };

        for (i = 0; i < (int)KR_ARRAY_LEN(keys); i++) {
            if (kr_cf_key_given(in, keys[i])) {
                kr_cf_warn(st, kr_cf_line_of(in, keys[i]), "%s: %s is set "
                           "but %s is not: krelay does not authenticate "
                           "%s, the key is not used", lbl, keys[i], kmech,
                           meta ? "its metadata connections"
                                : "to the brokers");
            }
        }
        return;
    }
    if (oauth) {
        unused[nu++] = kuser;
        unused[nu++] = kpf;
        unused[nu++] = kpw;
        if (kr_cf_key_given(in, ktf) && kr_cf_key_given(in, ktok)) {
            kr_cf_err(st, kr_cf_line_of(in, ktok), "%s: both %s and %s are "
                      "set: give one", lbl, ktf, ktok);
        } else if (!kr_cf_key_given(in, ktf) && !kr_cf_key_given(in, ktok)) {
            if (!kr_cf_key_line_bad(in, ktf) &&
                !kr_cf_key_line_bad(in, ktok)) {
                kr_cf_err(st, kr_cf_line_of(in, kmech), "%s: %s = "
                          "OAUTHBEARER needs %s (or %s)", lbl, kmech, ktf,
                          ktok);
            }
        } else if (c->token_file != NULL) {
            FILE *f = fopen(c->token_file, "re");
            struct stat sb;

            if (f == NULL) {
                kr_cf_err(st, kr_cf_line_of(in, ktf), "%s: %s: cannot read "
                          "%s: %s", lbl, ktf, c->token_file,
                          strerror(errno));
            } else {
                if (fstat(fileno(f), &sb) == 0) {
                    kr_cf_warn_mode(st, kr_cf_line_of(in, ktf), lbl, ktf,
                                    c->token_file, (unsigned)sb.st_mode,
                                    "a reader has the token krelay "
                                    "authenticates to the brokers with");
                }
                fclose(f);
            }
        } else {
            kr_cf_warn(st, kr_cf_line_of(in, ktok), "%s: %s: the token is "
                       "in the config file (%s keeps it out of it, and "
                       "can be refreshed)", lbl, ktok, ktf);
        }
    } else {
        if (!meta) {
            unused[nu++] = ktf;
            unused[nu++] = ktok;
        }
        if (c->username == NULL && !kr_cf_key_line_bad(in, kuser)) {
            kr_cf_err(st, kr_cf_line_of(in, kmech), "%s: %s = %s needs %s",
                      lbl, kmech, kr_cf_sasl_choices[c->mechanism], kuser);
        }
        if (!meta && kr_cf_key_given(in, kpf) && kr_cf_key_given(in, kpw)) {
            kr_cf_err(st, kr_cf_line_of(in, kpw), "%s: both %s and %s are "
                      "set: give one", lbl, kpf, kpw);
        } else if (c->password_file == NULL && (meta || c->password == NULL)) {
            if (!kr_cf_key_line_bad(in, kpf) &&
                (meta || !kr_cf_key_line_bad(in, kpw))) {
                kr_cf_err(st, kr_cf_line_of(in, kmech), "%s: %s = %s needs "
                          "%s%s%s%s", lbl, kmech,
                          kr_cf_sasl_choices[c->mechanism], kpf,
                          meta ? "" : " (or ", meta ? "" : kpw,
                          meta ? "" : ")");
            }
        } else if (c->password_file != NULL) {
            unsigned mode;

            if (kr_cf_read_secret(c->password_file, &c->secret,
                                  &c->secret_len, &mode, why,
                                  sizeof(why)) != 0) {
                kr_cf_err(st, kr_cf_line_of(in, kpf), "%s: %s: %s", lbl,
                          kpf, why);
            } else {
                kr_cf_warn_mode(st, kr_cf_line_of(in, kpf), lbl, kpf,
                                c->password_file, mode, "a reader has the "
                                "password krelay authenticates to the "
                                "brokers with");
            }
        } else {
            c->secret_len = strlen(c->password);
            c->secret = malloc(c->secret_len + 1);
            if (c->secret == NULL) {
                kr_cf_err(st, kr_cf_line_of(in, kpw), "out of memory");
            } else {
                memcpy(c->secret, c->password, c->secret_len + 1);
            }
            kr_cf_warn(st, kr_cf_line_of(in, kpw), "%s: %s: the password "
                       "is in the config file (%s keeps it out of it)", lbl,
                       kpw, kpf);
        }
    }
    for (i = 0; i < nu; i++) {
        if (kr_cf_key_given(in, unused[i])) {
            kr_cf_warn(st, kr_cf_line_of(in, unused[i]), "%s: %s is not "
                       "used with %s = %s", lbl, unused[i], kmech,
                       kr_cf_sasl_choices[c->mechanism]);
        }
    }
}

/* An [upstream]'s SASL keys (origination, metadata connections). */
static void
kr_cf_check_sasl(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    struct kr_upstream_conf *u = in->obj;
    char lbl[KR_CONF_MAX_NAME + 32];

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    kr_cf_check_sasl_cred(st, in, &u->sasl, "sasl_", lbl);
    if (u->sasl.mechanism != 0 && u->metadata_sasl.mechanism != 0) {
        kr_cf_warn(st, kr_cf_line_of(in, "metadata_sasl_mechanism"), "%s: "
                   "metadata_sasl_mechanism is not used: with "
                   "sasl_mechanism krelay's metadata connections "
                   "authenticate with the sasl_* credentials", lbl);
        return;
    }
    kr_cf_check_sasl_cred(st, in, &u->metadata_sasl, "metadata_sasl_", lbl);
}

/*
 * A listener with sasl = required in front of an upstream krelay
 * authenticates to itself (sasl_mechanism): a client must authenticate
 * before anything else, and its SaslHandshake closes the connection
 * (origination): no client could ever work.
 */
static void
kr_cf_check_sasl_pair(struct kr_cf_state *st, struct kr_cf_inst *in,
                      const char *lbl)
{
    const struct kr_listener_conf *l = in->obj;
    int j;

    if (l->sasl != KR_SASL_MODE_REQUIRED) {
        return;
    }
    for (j = 0; j < st->ninsts; j++) {
        const struct kr_cf_inst *u = &st->insts[j];

        if (u->bad || u->kind != KR_CS_UPSTREAM ||
            (l->upstream != NULL && strcmp(u->name, l->upstream) != 0)) {
            continue;
        }
        if (((const struct kr_upstream_conf *)u->obj)->sasl.mechanism != 0) {
            kr_cf_err(st, kr_cf_line_of(in, "sasl"), "%s: sasl = required, "
                      "but krelay authenticates to its upstream itself "
                      "(sasl_mechanism): a client's SaslHandshake closes "
                      "its connection, so no client could ever "
                      "authenticate", lbl);
        }
        return;
    }
}

/* The keys of kind's TLS settings besides `ssl`. */
static const char *const kr_cf_tls_keys[2][11] = {
    { "ssl_certificate", "ssl_key", "ssl_client_ca", "ssl_crl",
      "ssl_min_protocol", "ssl_ciphers", "ssl_ciphersuites",
      "ssl_handshake_timeout_ms", "ssl_principal_mapping_rules",
      "ssl_resumption", NULL },
    { "ssl_ca", "ssl_verify_hostname", "ssl_certificate", "ssl_key",
      "ssl_min_protocol", NULL }
};

/* The key a context option of kind is set by. */
static const char *
kr_cf_tls_key(enum kr_cf_sect kind, enum kr_tls_opt o)
{
    switch (o) {
    case KR_TLS_OPT_CERTIFICATE:
        return "ssl_certificate";
    case KR_TLS_OPT_KEY:
        return "ssl_key";
    case KR_TLS_OPT_CA:
        return kind == KR_CS_LISTENER ? "ssl_client_ca" : "ssl_ca";
    case KR_TLS_OPT_CRL:
        return "ssl_crl";
    case KR_TLS_OPT_CIPHERS:
        return "ssl_ciphers";
    case KR_TLS_OPT_CIPHERSUITES:
        return "ssl_ciphersuites";
    case KR_TLS_OPT_NONE:
        break;
    }
    return "ssl";
}

/*
 * The TLS keys of a [listener] or [upstream]: what must go together, and
 * with ssl = true the context, built now from the files (kr_tls_ctx.h),
 * so that a file that does not load is an error at its key's line, here
 * as at a reload.  ssl_* keys without ssl = true are not used: a warning.
 */
static void
kr_cf_check_tls(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    bool listener = in->kind == KR_CS_LISTENER;
    const char *const *keys = kr_cf_tls_keys[listener ? 0 : 1];
    struct kr_listener_conf *l = listener ? in->obj : NULL;
    struct kr_upstream_conf *u = listener ? NULL : in->obj;
    struct kr_tls_ctx **out = listener ? &l->tls : &u->tls;
    char lbl[KR_CONF_MAX_NAME + 32], why[512];
    struct kr_tls_opts o;
    enum kr_tls_opt bad;
    const char *k;
    bool ok = true;
    int i;

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (!(listener ? l->ssl : u->ssl)) {
        for (i = 0; keys[i] != NULL; i++) {
            if (kr_cf_key_given(in, keys[i])) {
                kr_cf_warn(st, kr_cf_line_of(in, keys[i]), "%s: %s is set "
                           "but ssl is not true: no TLS %s, the key is not "
                           "used", lbl, keys[i], listener ? "on this listener"
                                                          : "to the brokers");
            }
        }
        return;
    }
    for (i = 0; keys[i] != NULL; i++) {
        ok = ok && !kr_cf_key_line_bad(in, keys[i]);
    }
    memset(&o, 0, sizeof(o));
    if (listener) {
        if (!kr_cf_key_given(in, "ssl_certificate") &&
            !kr_cf_key_line_bad(in, "ssl_certificate")) {
            kr_cf_err(st, kr_cf_line_of(in, "ssl"), "%s: ssl = true needs "
                      "ssl_certificate (and ssl_key, unless the key is in "
                      "that file)", lbl);
            ok = false;
        }
        if (kr_cf_key_given(in, "ssl_crl") &&
            !kr_cf_key_given(in, "ssl_client_ca")) {
            kr_cf_err(st, kr_cf_line_of(in, "ssl_crl"), "%s: ssl_crl needs "
                      "ssl_client_ca (revocation lists are for client "
                      "certificates)", lbl);
            ok = false;
        }
        o.server = true;
        o.certificate = l->ssl_certificate;
        o.key = l->ssl_key;
        o.ca = l->ssl_client_ca;
        o.crl = l->ssl_crl;
        o.min_version = (enum kr_tls_version)l->ssl_min_protocol;
        o.ciphers = l->ssl_ciphers;
        o.ciphersuites = l->ssl_ciphersuites;
        o.id = in->name;
        o.resumption = l->ssl_resumption;
    } else {
        o.certificate = u->ssl_certificate;
        o.key = u->ssl_key;
        o.ca = u->ssl_ca;
        o.min_version = (enum kr_tls_version)u->ssl_min_protocol;
        o.verify_hostname = u->ssl_verify_hostname;
    }
    if (kr_cf_key_given(in, "ssl_key") &&
        !kr_cf_key_given(in, "ssl_certificate")) {
        kr_cf_err(st, kr_cf_line_of(in, "ssl_key"), "%s: ssl_key without "
                  "ssl_certificate", lbl);
        ok = false;
    }
    if (!ok) {
        return;
    }
    *out = kr_tls_ctx_new(&o, &bad, why, sizeof(why));
    if (*out == NULL) {
        k = kr_cf_tls_key(in->kind, bad);
        kr_cf_err(st, kr_cf_line_of(in, k), "%s: %s: %s", lbl, k, why);
    }
}

/*
 * A listener's ssl_principal_mapping_rules, parsed now (kr_principal.h),
 * so that a rule that does not compile is an error at the key's line with
 * kr_principal's reason, at start as at a reload.  Parsed whenever given;
 * where no client certificate is asked for (it is then never used) and
 * where no rule is left (every client refused, as Kafka does) a warning.
 */
static void
kr_cf_check_mapping(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    struct kr_listener_conf *l = in->obj;
    const char *k = "ssl_principal_mapping_rules";
    char lbl[KR_CONF_MAX_NAME + 32], why[512];
    int line = kr_cf_line_of(in, k);

    if (l->ssl_principal_mapping_rules == NULL) {
        return;
    }
    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (kr_principal_mapping_rules_parse(l->ssl_principal_mapping_rules,
                                         &l->principal_rules, why,
                                         sizeof(why)) != KR_OK) {
        kr_cf_err(st, line, "%s: %s: %s", lbl, k, why);
        return;
    }
    if (kr_principal_mapping_rules_count(l->principal_rules) == 0) {
        kr_cf_warn(st, line, "%s: %s holds no rule: no client certificate "
                   "maps to a principal, every client is refused (Kafka's "
                   "default is DEFAULT)", lbl, k);
    } else if (l->ssl && l->ssl_client_ca == NULL) {
        kr_cf_warn(st, line, "%s: %s is set but ssl_client_ca is not: no "
                   "client certificate is asked for, the key is not used",
                   lbl, k);
    }
}

/* The keys that go with sasl = terminate. */
static const char *const kr_cf_sasl_term_keys[] = {
    "sasl_mechanisms", "sasl_credentials", "sasl_session_lifetime_ms",
    "sasl_login_rate", NULL
};

/* The keys that go with proxy_protocol (not off). */
static const char *const kr_cf_proxy_keys[] = {
    "proxy_protocol_from", "proxy_protocol_timeout_ms", NULL
};

/* The keys that go with sni_broker_name. */
static const char *const kr_cf_sni_keys[] = {
    "sni_bootstrap_name", "sni_fallback", NULL
};

/* sasl_login_rate: "PER_SEC,BURST" (PER_SEC > 0, a decimal; BURST a
   whole number >= 1) or "0". */
static bool
kr_cf_parse_login_rate(const char *s, double *per_sec, unsigned *burst)
{
    char *end;
    unsigned long b;

    errno = 0;
    *per_sec = strtod(s, &end);
    if (end == s || errno != 0 || !(*per_sec >= 0) || *per_sec > 1e6) {
        return false;
    }
    while (*end == ' ') {
        end++;
    }
    if (*end == '\0') {
        *burst = 0;
        return *per_sec == 0;
    }
    if (*end != ',' || *per_sec == 0) {
        return false;
    }
    s = end + 1;
    while (*s == ' ') {
        s++;
    }
    if (*s < '0' || *s > '9') {
        return false;
    }
    b = strtoul(s, &end, 10);
    while (*end == ' ') {
        end++;
    }
    if (*end != '\0' || errno != 0 || b < 1 || b > 1000000) {
        return false;
    }
    *burst = (unsigned)b;
    return true;
}

/*
 * An offered SCRAM mechanism no entry of the credentials file has: every
 * login with it fails (a file of SCRAM-SHA-512 lines, krelay-passwd's
 * default, behind sasl_mechanisms = SCRAM-SHA-256).  PLAIN takes any
 * entry.  Warned for a list that leaves a mechanism out: the default
 * offers every one (both SCRAM hashes, and PLAIN, which takes any entry),
 * and so does a list that names them all, such as the default as -T
 * prints it.
 */
static void
kr_cf_check_sasl_term_mechs(struct kr_cf_state *st, struct kr_cf_inst *in,
                            const char *lbl,
                            const enum kr_sasl_srv_mech *order, unsigned n,
                            const struct kr_sasl_users *users)
{
    const struct kr_listener_conf *l = in->obj;
    unsigned i;
    size_t j;

    if (n == KR_SASL_SRV_NMECH) {
        return;
    }
    for (i = 0; i < n; i++) {
        enum kr_scram_hash h = order[i] == KR_SASL_SRV_SCRAM_SHA_256
                               ? KR_SCRAM_SHA256 : KR_SCRAM_SHA512;
        const char *m = kr_sasl_srv_mech_name(order[i]);

        if (order[i] == KR_SASL_SRV_PLAIN) {
            continue;
        }
        for (j = 0; j < users->n && users->v[j].cred.hash != h; j++) {
        }
        if (j == users->n) {
            kr_cf_warn(st, kr_cf_line_of(in, "sasl_mechanisms"), "%s: "
                       "sasl_mechanisms offers %s but no entry of %s is "
                       "%s: every %s login fails (krelay-passwd -m %s "
                       "writes such entries)", lbl, m, l->sasl_credentials,
                       m, m, m);
        }
    }
}

/*
 * sasl = terminate: the mechanisms, the login rate and the credentials
 * file, loaded now (kr_sasl_users.h) so that a bad line is an error here
 * (with the file's own line in the message), at start as at a reload;
 * the listener's kr_sasl_srv_cfg built from them.  The keys without
 * sasl = terminate are not used: a warning.
 */
static void
kr_cf_check_sasl_term(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    struct kr_listener_conf *l = in->obj;
    enum kr_sasl_srv_mech order[KR_SASL_SRV_NMECH];
    struct kr_sasl_users *users;
    char lbl[KR_CONF_MAX_NAME + 32], why[512];
    double per_sec = 0;
    unsigned n = 0, burst = 0;
    bool ok = true;
    int i;

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (l->sasl == KR_SASL_MODE_TERMINATE &&
        kr_cf_key_given(in, "oauthbearer_principal_claim")) {
        kr_cf_warn(st, kr_cf_line_of(in, "oauthbearer_principal_claim"),
                   "%s: oauthbearer_principal_claim is set but sasl is "
                   "terminate: krelay terminates no OAUTHBEARER, the key is "
                   "not used", lbl);
    }
    if (l->sasl != KR_SASL_MODE_TERMINATE) {
        for (i = 0; kr_cf_sasl_term_keys[i] != NULL; i++) {
            if (kr_cf_key_given(in, kr_cf_sasl_term_keys[i])) {
                kr_cf_warn(st, kr_cf_line_of(in, kr_cf_sasl_term_keys[i]),
                           "%s: %s is set but sasl is not terminate: the "
                           "key is not used", lbl, kr_cf_sasl_term_keys[i]);
            }
        }
        return;
    }
    for (i = 0; kr_cf_sasl_term_keys[i] != NULL; i++) {
        ok = ok && !kr_cf_key_line_bad(in, kr_cf_sasl_term_keys[i]);
    }
    if (!ok) {
        return;
    }
    if (!kr_sasl_srv_mechs_parse(l->sasl_mechanisms, order, &n, why,
                                 sizeof(why))) {
        kr_cf_err(st, kr_cf_line_of(in, "sasl_mechanisms"),
                  "%s: sasl_mechanisms = %s: %s", lbl, l->sasl_mechanisms,
                  why);
        ok = false;
    }
    if (!kr_cf_parse_login_rate(l->sasl_login_rate, &per_sec, &burst)) {
        kr_cf_err(st, kr_cf_line_of(in, "sasl_login_rate"),
                  "%s: sasl_login_rate = %s: write PER_SEC,BURST (logins a "
                  "second per client address, and how many at once), e.g. "
                  "5,20, or 0 for no limit", lbl, l->sasl_login_rate);
        ok = false;
    }
    if (l->sasl_credentials == NULL) {
        kr_cf_err(st, kr_cf_line_of(in, "sasl"), "%s: sasl = terminate "
                  "needs sasl_credentials (a file krelay-passwd writes "
                  "lines of)", lbl);
        return;
    }
    users = kr_sasl_users_load(l->sasl_credentials, why, sizeof(why));
    if (users == NULL) {
        kr_cf_err(st, kr_cf_line_of(in, "sasl_credentials"),
                  "%s: sasl_credentials: %s", lbl, why);
        return;
    }
    if (users->warning != NULL) {
        kr_cf_warn(st, kr_cf_line_of(in, "sasl_credentials"),
                   "%s: sasl_credentials: %s", lbl, users->warning);
    }
    if (users->n == 0) {
        kr_cf_warn(st, kr_cf_line_of(in, "sasl_credentials"),
                   "%s: sasl_credentials: %s holds no user: every login is "
                   "refused", lbl, l->sasl_credentials);
    } else if (ok) {
        kr_cf_check_sasl_term_mechs(st, in, lbl, order, n, users);
    }
    if (!ok) {
        kr_sasl_users_free(users);
        return;
    }
    l->sasl_srv = kr_sasl_srv_cfg_new(order, n, users,
                                      l->sasl_session_lifetime_ms, per_sec,
                                      burst);
    if (l->sasl_srv == NULL) {
        kr_cf_err(st, kr_cf_line_of(in, "sasl"), "%s: sasl = terminate: "
                  "out of memory", lbl);
    }
}

/* Broker names checked against the certificate at most (a range of
   NodeIds may be large; the first misses are what a warning names). */
#define KR_CF_SNI_CERT_CHECKS 4096

/*
 * SNI routing: every name it advertises (the bootstrap name, each
 * broker's in node_id_min..node_id_max) should be one the listener's
 * certificate names, else a client that verifies host names (librdkafka,
 * the Java client by default) refuses the handshake: a warning naming the
 * first name missing and how many are.
 */
static void
kr_cf_check_sni_cert(struct kr_cf_state *st, struct kr_cf_inst *in,
                     const char *lbl)
{
    struct kr_listener_conf *l = in->obj;
    char name[300], first[300];
    unsigned missing = 0, checked = 0;
    int64_t id;

    if (l->tls == NULL || l->sni == NULL) {
        return;
    }
    first[0] = '\0';
    if (l->sni_bootstrap_name != NULL &&
        !kr_tls_ctx_names(l->tls, l->sni_bootstrap_name)) {
        snprintf(first, sizeof(first), "%s", l->sni_bootstrap_name);
        missing++;
    }
    for (id = l->node_id_min;
         id <= l->node_id_max && checked < KR_CF_SNI_CERT_CHECKS; id++) {
        checked++;
        if (kr_sni_broker_name(l->sni, (int32_t)id, name, sizeof(name)) ==
                0 ||
            kr_tls_ctx_names(l->tls, name)) {
            continue;
        }
        if (missing++ == 0) {
            snprintf(first, sizeof(first), "%s", name);
        }
    }
    if (missing > 0) {
        char more[80] = "";

        if (missing > 1) {
            snprintf(more, sizeof(more), " (nor %u other names SNI "
                     "routing advertises)", missing - 1);
        }
        kr_cf_warn(st, kr_cf_line_of(in, "ssl_certificate"), "%s: the "
                   "certificate (ssl_certificate) does not name %s%s: "
                   "clients that verify host names refuse the handshake "
                   "for it; add the names, or a wildcard, to its "
                   "subjectAltName", lbl, first, more);
    }
}

/*
 * proxy_protocol (issue 12): trusted senders are required with it (the
 * spec: "only from a number of known sources"); without it the keys that
 * go with it are not used (a warning).
 */
static void
kr_cf_check_proxy(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    const char *const *opt = kr_cf_proxy_keys;
    const struct kr_listener_conf *l = in->obj;
    char lbl[KR_CONF_MAX_NAME + 32];
    int i;

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (kr_cf_key_line_bad(in, "proxy_protocol")) {
        return;
    }
    if (l->proxy_protocol == 0) {
        for (i = 0; opt[i] != NULL; i++) {
            if (kr_cf_key_given(in, opt[i])) {
                kr_cf_warn(st, kr_cf_line_of(in, opt[i]), "%s: %s is set "
                           "but proxy_protocol is off: no header is read, "
                           "the key is not used", lbl, opt[i]);
            }
        }
        return;
    }
    if (!kr_cf_key_given(in, "proxy_protocol_from") &&
        !kr_cf_key_line_bad(in, "proxy_protocol_from")) {
        kr_cf_err(st, kr_cf_line_of(in, "proxy_protocol"), "%s: "
                  "proxy_protocol = %s needs proxy_protocol_from: the "
                  "addresses of the load balancers trusted to send the "
                  "header (any other client could claim any address)", lbl,
                  kr_cf_proxy_choices[l->proxy_protocol]);
    }
}

/*
 * SNI routing (sni_broker_name): TLS on, one port (no broker_port_base,
 * no advertised_host: each broker is advertised as its name), and the
 * names built (l->sni).  Without it, broker_port_base is required and
 * the other sni_* keys are not used (a warning, as ssl_* without ssl).
 */
static void
kr_cf_check_sni(struct kr_cf_state *st, struct kr_cf_inst *in)
{
    const char *const *opt = kr_cf_sni_keys;
    struct kr_listener_conf *l = in->obj;
    char lbl[KR_CONF_MAX_NAME + 32], why[256];
    struct kr_sni *m;
    bool ok = true;
    int i;

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    if (!kr_cf_key_given(in, "sni_broker_name")) {
        if (kr_cf_key_line_bad(in, "sni_broker_name")) {
            return;
        }
        if (!kr_cf_key_given(in, "broker_port_base") &&
            !kr_cf_key_line_bad(in, "broker_port_base")) {
            kr_cf_err(st, in->line, "%s: missing required key "
                      "'broker_port_base' (or sni_broker_name: SNI routing, "
                      "every broker on the listen port)", lbl);
        }
        for (i = 0; opt[i] != NULL; i++) {
            if (kr_cf_key_given(in, opt[i])) {
                kr_cf_warn(st, kr_cf_line_of(in, opt[i]), "%s: %s is set "
                           "but sni_broker_name is not: no SNI routing, the "
                           "key is not used", lbl, opt[i]);
            }
        }
        return;
    }
    if (!l->ssl && !kr_cf_key_line_bad(in, "ssl")) {
        kr_cf_err(st, kr_cf_line_of(in, "sni_broker_name"), "%s: "
                  "sni_broker_name needs ssl = true: the name comes from the "
                  "client's TLS handshake (SNI)", lbl);
        ok = false;
    }
    if (kr_cf_key_given(in, "broker_port_base")) {
        kr_cf_err(st, kr_cf_line_of(in, "broker_port_base"), "%s: "
                  "broker_port_base does not go with sni_broker_name: with "
                  "SNI routing every broker is reached on the listen port "
                  "(remove broker_port_base)", lbl);
        ok = false;
    }
    if (kr_cf_key_given(in, "advertised_host")) {
        kr_cf_err(st, kr_cf_line_of(in, "advertised_host"), "%s: "
                  "advertised_host does not go with sni_broker_name: each "
                  "broker is advertised as its name (sni_broker_name) on "
                  "the listen port", lbl);
        ok = false;
    }
    if (!ok || kr_cf_key_line_bad(in, "node_id_min") ||
        kr_cf_key_line_bad(in, "node_id_max") ||
        kr_cf_key_line_bad(in, "sni_bootstrap_name") ||
        l->node_id_min > l->node_id_max) {
        return;
    }
    if (l->sni_bootstrap_name != NULL &&
        !kr_sni_host_ok(l->sni_bootstrap_name, why, sizeof(why))) {
        kr_cf_err(st, kr_cf_line_of(in, "sni_bootstrap_name"), "%s: "
                  "sni_bootstrap_name = %s is not a host name: %s", lbl,
                  l->sni_bootstrap_name, why);
        return;
    }
    m = kr_sni_new(l->sni_broker_name, NULL, l->node_id_min, l->node_id_max,
                   why, sizeof(why));
    if (m == NULL) {
        kr_cf_err(st, kr_cf_line_of(in, "sni_broker_name"), "%s: "
                  "sni_broker_name = %s: %s", lbl, l->sni_broker_name, why);
        return;
    }
    kr_sni_free(m);
    l->sni = kr_sni_new(l->sni_broker_name, l->sni_bootstrap_name,
                        l->node_id_min, l->node_id_max, why, sizeof(why));
    if (l->sni == NULL) {
        kr_cf_err(st, kr_cf_line_of(in, "sni_bootstrap_name"), "%s: "
                  "sni_bootstrap_name = %s: %s", lbl, l->sni_bootstrap_name,
                  why);
        return;
    }
    kr_cf_check_sni_cert(st, in, lbl);
}

/* True when one of keys (NULL-terminated) was given on a line whose
   value was refused: a follow-on error about it would mislead. */
static bool
kr_cf_any_line_bad(const struct kr_cf_inst *in, const char *const *keys)
{
    int i;

    for (i = 0; keys[i] != NULL; i++) {
        if (kr_cf_key_line_bad(in, keys[i])) {
            return true;
        }
    }
    return false;
}

/* Keys of one [rule] that only make sense together. */
static void
kr_cf_check_rule(struct kr_cf_state *st, struct kr_cf_inst *in,
                 bool have_audit)
{
    static const char *const action_keys[] = {
        "deny", "audit", "throttle_ms", "clamp_min_version",
        "clamp_max_version", "pass_unknown_apis", "allowed_acks",
        "allowed_compression", "fault_latency_ms", "fault_error",
        "fault_close_probability", NULL
    };
    struct kr_rule_conf *r = in->obj;
    char lbl[KR_CONF_MAX_NAME + 32];
    int i, j;
    bool produce = r->napi == 0;

    kr_cf_inst_label(in, lbl, sizeof(lbl));
    for (i = 0; i < r->napi; i++) {
        produce = produce || r->api[i] == 0;
    }
    for (i = 0; i < r->listener.n; i++) {
        bool found = false;

        for (j = 0; j < st->ninsts && !found; j++) {
            found = !st->insts[j].bad &&
                    st->insts[j].kind == KR_CS_LISTENER &&
                    strcmp(st->insts[j].name, r->listener.v[i]) == 0;
        }
        if (!found) {
            kr_cf_err(st, kr_cf_line_of(in, "listener"),
                      "%s: no [listener %s] section", lbl, r->listener.v[i]);
        }
    }
    if (!r->deny && !r->audit && r->throttle_ms < 0 &&
        r->clamp_min_version < 0 && r->clamp_max_version < 0 &&
        !r->pass_unknown_apis && r->allowed_acks == 0 &&
        r->allowed_compression == 0 && r->fault_latency_ms == 0 &&
        r->fault_error < 0 && r->fault_close_probability == 0 &&
        !kr_cf_any_line_bad(in, action_keys)) {
        /* (an action whose value was refused has its own error) */
        kr_cf_err(st, in->line, "%s: no action (deny, audit, throttle_ms, "
                  "clamp_min_version, clamp_max_version, allowed_acks, "
                  "allowed_compression, fault_*)", lbl);
    }
    if (r->deny && r->napi == 0 && r->topic.n == 0 &&
        r->nclient_address == 0 && r->client_id.n == 0 &&
        r->principal.n == 0 && !kr_cf_key_given(in, "versions")) {
        /* every request of every client, ApiVersions and Metadata
           included: no client gets past its first request */
        kr_cf_warn(st, kr_cf_line_of(in, "deny"), "%s: deny = true with no "
                   "api, topic or client to match refuses every request, "
                   "ApiVersions and Metadata included: no client can use "
                   "%s (name what to refuse with api = ...)", lbl,
                   r->listener.n > 0 ? "its listeners" : "krelay");
    }
    if ((r->clamp_min_version >= 0 || r->clamp_max_version >= 0) &&
        r->napi == 0) {
        kr_cf_err(st, kr_cf_line_of(in, r->clamp_max_version >= 0
                                            ? "clamp_max_version"
                                            : "clamp_min_version"),
                  "%s: a version clamp needs api = NAME[,NAME...]", lbl);
    }
    if (r->clamp_min_version >= 0 && r->clamp_max_version >= 0 &&
        r->clamp_min_version > r->clamp_max_version) {
        kr_cf_err(st, kr_cf_line_of(in, "clamp_max_version"),
                  "%s: clamp_min_version %d > clamp_max_version %d", lbl,
                  (int)r->clamp_min_version, (int)r->clamp_max_version);
    }
    if (kr_cf_key_given(in, "deny_error") && !r->deny) {
        kr_cf_err(st, kr_cf_line_of(in, "deny_error"),
                  "%s: deny_error without deny = true", lbl);
    }
    if (kr_cf_key_given(in, "audit_body") && r->audit_body && !r->audit) {
        kr_cf_err(st, kr_cf_line_of(in, "audit_body"),
                  "%s: audit_body without audit = true", lbl);
    }
    if (r->audit && !have_audit) {
        kr_cf_err(st, kr_cf_line_of(in, "audit"),
                  "%s: audit = true but there is no [audit] section with a "
                  "target", lbl);
    }
    if (r->throttle_ms < 0) {
        static const char *const tk[] = {
            "throttle_mode", "throttle_op", "throttle_jitter_ms"
        };

        for (i = 0; i < 3; i++) {
            if (kr_cf_key_given(in, tk[i])) {
                kr_cf_err(st, kr_cf_line_of(in, tk[i]), "%s: %s without "
                          "throttle_ms", lbl, tk[i]);
            }
        }
    }
    if (kr_cf_key_given(in, "fault_error_probability") &&
        r->fault_error < 0) {
        kr_cf_err(st, kr_cf_line_of(in, "fault_error_probability"),
                  "%s: fault_error_probability without fault_error", lbl);
    }
    if ((r->allowed_acks != 0 || r->allowed_compression != 0) && !produce) {
        kr_cf_err(st, kr_cf_line_of(in, r->allowed_acks != 0
                                            ? "allowed_acks"
                                            : "allowed_compression"),
                  "%s: allowed_acks and allowed_compression are a Produce "
                  "policy, but api does not name Produce", lbl);
    }
    if (r->deny && (r->clamp_min_version >= 0 || r->clamp_max_version >= 0 ||
                    r->throttle_ms >= 0 || r->allowed_acks != 0 ||
                    r->allowed_compression != 0)) {
        kr_cf_err(st, kr_cf_line_of(in, "deny"), "%s: deny = true refuses "
                  "every matching request: the rule's clamp, throttle and "
                  "policy keys would never apply", lbl);
    }
    kr_cf_check_rule_acts(st, in, lbl);
}

/*
 * kr_conf_load_opts.stand_in_upstream: a file without any [upstream]
 * section gets an unnamed one, as if it ended with "[upstream]" and
 * "bootstrap_servers = LIST" (its line: the file's last, where problems
 * with no line of their own are reported).
 */
static void
kr_cf_stand_in(struct kr_cf_state *st, const char *list)
{
    int i, line = st->lineno > 0 ? st->lineno : 1;
    size_t idx;
    const struct kr_cf_key *k;
    struct kr_cf_inst *in;
    char buf[128];
    const char *why;

    for (i = 0; i < st->ninsts; i++) {
        if (st->insts[i].kind == KR_CS_UPSTREAM) {
            return;
        }
    }
    in = kr_cf_inst_add(st, KR_CS_UPSTREAM, "", line);
    k = kr_cf_find_key(KR_CS_UPSTREAM, "bootstrap_servers", &idx);
    if (in == NULL || k == NULL) {
        return;
    }
    ((struct kr_upstream_conf *)in->obj)->stand_in = true;
    why = kr_cf_set(k, in->obj, list, buf, sizeof(buf));
    if (why != NULL) {
        kr_cf_err(st, line, "the [upstream] standing in for the missing one: "
                  "bootstrap_servers '%s': %s", list, why);
        in->key_line[idx] = -line;
        return;
    }
    in->key_line[idx] = line;
}

/*
 * $KRELAY_WORKERS is only the default of [process] workers: a bad value
 * is an error when the file leaves workers to it, and nothing when the
 * file sets workers (well or badly: a bad key has its own error).
 */
static void
kr_cf_check_workers(struct kr_cf_state *st)
{
    int i, k = kr_cf_key_index(KR_CS_PROCESS, "workers");

    for (i = 0; i < st->ninsts; i++) {
        const struct kr_cf_inst *in = &st->insts[i];

        if (in->kind == KR_CS_PROCESS && k >= 0 && in->key_line[k] != 0) {
            return;
        }
    }
    if (kr_conf_default_workers() == 0) {
        kr_cf_err(st, 0, "the environment variable KRELAY_WORKERS (the "
                  "default of [process] workers, which the file does not "
                  "set) is not a number 1..%d", KR_WORKERS_MAX);
    }
}

static void
kr_cf_check_all(struct kr_cf_state *st)
{
    int i, j, nl = 0, nu = 0;
    int eof_line = st->lineno > 0 ? st->lineno : 1;
    bool parsed;
    char lbl[KR_CONF_MAX_NAME + 32];

    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];

        if (in->bad) {
            continue;
        }
        nl += in->kind == KR_CS_LISTENER;
        nu += in->kind == KR_CS_UPSTREAM;
        kr_cf_finish_inst(st, in);
    }
    /* a file that did not parse (a syntax error, a refused section) may
       hold the sections in the lines refused: said once it parses */
    parsed = st->nerr == 0;
    if (nl == 0 && parsed) {
        kr_cf_err(st, eof_line, "no [listener] section");
    }
    if (nu == 0 && parsed) {
        kr_cf_err(st, eof_line, "no [upstream] section (to try this file "
                  "on the demo cluster: krelay --demo -c FILE)");
    }
    {
        int nr = 0;
        bool have_audit = st->conf->audit.target != NULL;

        for (i = 0; i < st->ninsts; i++) {
            struct kr_cf_inst *in = &st->insts[i];

            if (in->bad || in->kind != KR_CS_RULE) {
                continue;
            }
            if (++nr == KR_CONF_MAX_RULES + 1) {
                kr_cf_err(st, in->line, "too many [rule] sections (max %d)",
                          KR_CONF_MAX_RULES);
            }
            kr_cf_check_rule(st, in, have_audit);
        }
    }
    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];
        int count = in->kind == KR_CS_LISTENER ? nl : nu;

        if (in->bad || (in->kind != KR_CS_LISTENER &&
                        in->kind != KR_CS_UPSTREAM)) {
            continue;
        }
        if (in->kind == KR_CS_UPSTREAM) {
            kr_cf_check_tls(st, in);
            kr_cf_check_sasl(st, in);
        }
        if (count > 1 && in->name[0] == '\0') {
            kr_cf_err(st, in->line, "there are %d [%s] sections: each needs "
                      "a name, as in [%s NAME]", count,
                      kr_cf_sect_names[in->kind],
                      kr_cf_sect_names[in->kind]);
        }
    }
    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];
        struct kr_listener_conf *l = in->obj;

        if (in->bad || in->kind != KR_CS_LISTENER) {
            continue;
        }
        kr_cf_inst_label(in, lbl, sizeof(lbl));
        kr_cf_check_listener(st, in);
        kr_cf_check_tls(st, in);
        kr_cf_check_mapping(st, in);
        kr_cf_check_sasl_term(st, in);
        kr_cf_check_sni(st, in);
        kr_cf_check_proxy(st, in);
        if (l->upstream != NULL) {
            bool found = false;

            for (j = 0; j < st->ninsts; j++) {
                found = !st->insts[j].bad &&
                        st->insts[j].kind == KR_CS_UPSTREAM &&
                        strcmp(st->insts[j].name, l->upstream) == 0;
                if (found) {
                    break;
                }
            }
            if (!found) {
                kr_cf_err(st, kr_cf_line_of(in, "upstream"),
                          "%s: no [upstream %s] section", lbl, l->upstream);
            }
        } else if (nu > 1 && !kr_cf_key_line_bad(in, "upstream")) {
            kr_cf_err(st, in->line, "%s: there are %d [upstream] sections: "
                      "say which one with upstream = NAME", lbl, nu);
        }
        kr_cf_check_sasl_pair(st, in, lbl);
        for (j = 0; j < i; j++) {
            if (!st->insts[j].bad && st->insts[j].kind == KR_CS_LISTENER) {
                kr_cf_check_pair(st, &st->insts[j], in);
            }
        }
    }
}

/* ---- building, loading, freeing ----------------------------------------- */

/*
 * Move the parsed sections into conf's arrays (even after errors, so one
 * kr_conf_free releases everything) and resolve listener -> upstream.
 */
static void
kr_cf_build(struct kr_cf_state *st)
{
    struct kr_conf *c = st->conf;
    int i, j, nl = 0, nu = 0;

    int nr = 0;

    for (i = 0; i < st->ninsts; i++) {
        if (!st->insts[i].bad) {
            nl += st->insts[i].kind == KR_CS_LISTENER;
            nu += st->insts[i].kind == KR_CS_UPSTREAM;
            nr += st->insts[i].kind == KR_CS_RULE;
        }
    }
    c->rules = nr > 0 ? calloc((size_t)nr, sizeof(*c->rules)) : NULL;
    if (nr > 0 && c->rules == NULL) {
        kr_cf_err(st, 0, "out of memory");
    }
    c->listeners = nl > 0 ? calloc((size_t)nl, sizeof(*c->listeners)) : NULL;
    c->upstreams = nu > 0 ? calloc((size_t)nu, sizeof(*c->upstreams)) : NULL;
    if ((nl > 0 && c->listeners == NULL) ||
        (nu > 0 && c->upstreams == NULL)) {
        kr_cf_err(st, 0, "out of memory");
    }
    for (i = 0; i < st->ninsts; i++) {
        struct kr_cf_inst *in = &st->insts[i];

        if (in->kind == KR_CS_LOG || in->kind == KR_CS_AUDIT ||
            in->kind == KR_CS_ADMIN || in->kind == KR_CS_PROCESS) {
            free(in->name);
        } else if (in->kind == KR_CS_RULE) {
            if (!in->bad && c->rules != NULL) {
                c->rules[c->nrules++] = *(struct kr_rule_conf *)in->obj;
            } else {
                kr_cf_free_rule(in->obj);
            }
            free(in->obj);
        } else if (in->kind == KR_CS_LISTENER) {
            if (!in->bad && c->listeners != NULL) {
                c->listeners[c->nlisteners++] =
                    *(struct kr_listener_conf *)in->obj;
            } else {
                kr_cf_free_listener(in->obj);
            }
            free(in->obj);
        } else {
            if (!in->bad && c->upstreams != NULL) {
                c->upstreams[c->nupstreams++] =
                    *(struct kr_upstream_conf *)in->obj;
            } else {
                kr_cf_free_upstream(in->obj);
            }
            free(in->obj);
        }
        free(in->dial_line);
    }
    free(st->insts);
    st->insts = NULL;
    st->ninsts = 0;

    for (i = 0; i < c->nlisteners; i++) {
        struct kr_listener_conf *l = &c->listeners[i];

        for (j = 0; j < c->nupstreams; j++) {
            if (l->upstream != NULL
                    ? strcmp(l->upstream, c->upstreams[j].name) == 0
                    : c->nupstreams == 1) {
                l->up = &c->upstreams[j];
                break;
            }
        }
    }
}

static int
kr_cf_load_buf(const char *text, size_t len, const char *name,
               const struct kr_conf_load_opts *opts, FILE *errs,
               struct kr_conf **out)
{
    struct kr_cf_state st;
    struct kr_conf *c;
    int rc, saved_max = 0;
    bool have_max = &ini_max_line != NULL;
    char buf[128];
    size_t i;

    memset(&st, 0, sizeof(st));
    st.file = name != NULL ? name : "(config)";
    st.errs = errs;
    st.text = text;
    st.len = len;
    st.stand_in_upstream = opts != NULL ? opts->stand_in_upstream : NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->path = strdup(st.file)) == NULL) {
        free(c);
        kr_cf_err(&st, 0, "out of memory");
        return KR_ERROR;
    }
    st.conf = c;
    /* [log] and [process] may be absent: their defaults apply anyway. */
    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if ((k->sect == KR_CS_LOG ||
             (k->sect == KR_CS_PROCESS && k->def != NULL)) &&
            kr_cf_set(k, k->sect == KR_CS_LOG ? (void *)&c->log
                                              : (void *)&c->process,
                      k->def, buf, sizeof(buf)) != NULL) {
            kr_cf_err(&st, 0, "internal error: default of '%s'", k->name);
        }
    }
    /* 0 when $KRELAY_WORKERS is bad: an error only if the file does not
       set workers itself (kr_cf_check_workers) */
    c->process.workers = kr_conf_default_workers();

    if (have_max) {
        saved_max = ini_max_line;
        if (saved_max < KR_CONF_MAX_LINE + 2) {
            ini_max_line = KR_CONF_MAX_LINE + 2;
        }
    }
    rc = ini_parse_stream(kr_cf_reader, &st, kr_cf_handler, &st);
    if (have_max) {
        ini_max_line = saved_max;
    }
    kr_cf_check_handled(&st);
    if (rc == -2) {
        kr_cf_err(&st, 0, "out of memory");
    } else if (rc > 0 && st.nerr == 0) {
        /* inih refused something our reader let through. */
        kr_cf_err(&st, rc, "syntax error");
    }

    if (st.stand_in_upstream != NULL) {
        kr_cf_stand_in(&st, st.stand_in_upstream);
    }
    kr_cf_check_all(&st);
    kr_cf_check_workers(&st);
    kr_cf_build(&st);
    if (st.nerr > 0) {
        kr_conf_free(c);
        return KR_ERROR;
    }
    *out = c;
    return KR_OK;
}

int
kr_conf_load_string(const char *text, const char *name, FILE *errs,
                    struct kr_conf **out)
{
    return kr_conf_load_string_with(text, name, NULL, errs, out);
}

int
kr_conf_load_string_with(const char *text, const char *name,
                         const struct kr_conf_load_opts *opts, FILE *errs,
                         struct kr_conf **out)
{
    if (text == NULL || out == NULL) {
        return KR_ERROR;
    }
    return kr_cf_load_buf(text, strlen(text), name, opts, errs, out);
}

int
kr_conf_load(const char *path, FILE *errs, struct kr_conf **out)
{
    return kr_conf_load_with(path, NULL, errs, out);
}

int
kr_conf_load_with(const char *path, const struct kr_conf_load_opts *opts,
                  FILE *errs, struct kr_conf **out)
{
    FILE *f;
    char *text;
    size_t len = 0, n;
    int rc, e;

    if (path == NULL || out == NULL) {
        return KR_ERROR;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        e = errno;
        if (errs != NULL) {
            fprintf(errs, "%s: cannot open: %s\n", path, strerror(e));
        }
        return KR_ERROR;
    }
    text = malloc(KR_CONF_MAX_FILE + 1);
    if (text == NULL) {
        fclose(f);
        if (errs != NULL) {
            fprintf(errs, "%s: out of memory\n", path);
        }
        return KR_ERROR;
    }
    while ((n = fread(text + len, 1, KR_CONF_MAX_FILE + 1 - len, f)) > 0) {
        len += n;
        if (len > KR_CONF_MAX_FILE) {
            break;
        }
    }
    e = ferror(f) ? errno : 0;
    fclose(f);
    if (e != 0 || len > KR_CONF_MAX_FILE) {
        if (errs != NULL) {
            if (e != 0) {
                fprintf(errs, "%s: cannot read: %s\n", path, strerror(e));
            } else {
                fprintf(errs, "%s: file too large (max %d bytes)\n", path,
                        KR_CONF_MAX_FILE);
            }
        }
        free(text);
        return KR_ERROR;
    }
    rc = kr_cf_load_buf(text, len, path, opts, errs, out);
    free(text);
    return rc;
}

void
kr_conf_free(struct kr_conf *c)
{
    int i;

    if (c == NULL) {
        return;
    }
    for (i = 0; i < c->nlisteners; i++) {
        kr_cf_free_listener(&c->listeners[i]);
    }
    free(c->listeners);
    for (i = 0; i < c->nupstreams; i++) {
        kr_cf_free_upstream(&c->upstreams[i]);
    }
    free(c->upstreams);
    for (i = 0; i < c->nrules; i++) {
        kr_cf_free_rule(&c->rules[i]);
    }
    free(c->rules);
    if (c->ruleset_free != NULL) {
        c->ruleset_free(c->ruleset);
    }
    for (i = 0; i < c->nwarnings; i++) {
        free(c->warnings[i].text);
    }
    free(c->warnings);
    free(c->audit.target);
    free(c->audit.instance);
    for (i = 0; i < (int)KR_CF_NKEYS; i++) {
        if (kr_conf_keys[i].sect == KR_CS_ADMIN) {
            kr_cf_clear(&kr_conf_keys[i], &c->admin);
        }
    }
    if (c->admin.token != NULL) {
        OPENSSL_cleanse(c->admin.token, strlen(c->admin.token));
        free(c->admin.token);
    }
    free(c->process.user);
    free(c->process.group);
    free(c->log.target);
    free(c->path);
    free(c);
}

const char *
kr_conf_codec_name(int id)
{
    return id >= 0 && id < (int)KR_ARRAY_LEN(kr_cf_codec_names) - 1
               ? kr_cf_codec_names[id] : NULL;
}

unsigned
kr_conf_warnings(const struct kr_conf *c, FILE *f)
{
    int i;

    for (i = 0; c != NULL && i < c->nwarnings; i++) {
        if (c->warnings[i].line > 0) {
            fprintf(f, "%s:%d: %s\n", c->path, c->warnings[i].line,
                    c->warnings[i].text);
        } else {
            fprintf(f, "%s: %s\n", c->path, c->warnings[i].text);
        }
    }
    return c != NULL ? (unsigned)c->nwarnings : 0;
}

/* ---- reload: what changed, and what a reload does with it --------------- */

/* What adding and removing a section of each kind does (kr_conf.h). */
static const enum kr_conf_reload kr_cf_sect_reload[KR_CS_NKINDS][2] = {
    [KR_CS_LISTENER] = { KR_RELOAD_REBIND, KR_RELOAD_REBIND },
    [KR_CS_UPSTREAM] = { KR_RELOAD_NEWCONN, KR_RELOAD_NEWCONN },
    [KR_CS_LOG] = { KR_RELOAD_APPLY, KR_RELOAD_APPLY },
    [KR_CS_RULE] = { KR_RELOAD_APPLY, KR_RELOAD_APPLY },
    [KR_CS_AUDIT] = { KR_RELOAD_APPLY, KR_RELOAD_APPLY },
    [KR_CS_ADMIN] = { KR_RELOAD_RESTART, KR_RELOAD_RESTART },
    [KR_CS_PROCESS] = { KR_RELOAD_APPLY, KR_RELOAD_APPLY },
};

static enum kr_conf_reload
kr_cf_key_reload(const struct kr_cf_key *k)
{
    if (k->flags & KR_CF_REBIND) {
        return KR_RELOAD_REBIND;
    }
    if (k->flags & KR_CF_NEWCONN) {
        return KR_RELOAD_NEWCONN;
    }
    return (k->flags & KR_CF_RESTART) ? KR_RELOAD_RESTART : KR_RELOAD_APPLY;
}

/* NULL and "" are the same (an unnamed section, an unset string). */
static bool
kr_cf_same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

static bool
kr_cf_same_hostport(const struct kr_hostport *a, const struct kr_hostport *b)
{
    return kr_cf_same_str(a->host, b->host) && a->port == b->port;
}

/* Does key k hold the same value in the section objects a and b? */
static bool
kr_cf_same_value(const struct kr_cf_key *k, const void *a, const void *b)
{
    const char *pa = (const char *)a + k->off;
    const char *pb = (const char *)b + k->off;
    int na = 0, i;

    switch (k->type) {
    case KR_CT_HOSTPORT_LIST:           /* an int count at off2 */
    case KR_CT_DIAL:
    case KR_CT_CIDRS:
    case KR_CT_APIS:
        na = *(const int *)(const void *)((const char *)a + k->off2);
        if (na != *(const int *)(const void *)((const char *)b + k->off2)) {
            return false;
        }
        break;
    case KR_CT_VRANGE:                  /* hi at off2, lo below */
        if (*(const int32_t *)(const void *)((const char *)a + k->off2) !=
            *(const int32_t *)(const void *)((const char *)b + k->off2)) {
            return false;
        }
        break;
    default:
        break;
    }
    switch (k->type) {
    case KR_CT_HOSTPORT:
        return kr_cf_same_hostport((const void *)pa, (const void *)pb);
    case KR_CT_HOSTPORT_LIST: {
        const struct kr_hostport *x = *(struct kr_hostport *const *)
                                          (const void *)pa;
        const struct kr_hostport *y = *(struct kr_hostport *const *)
                                          (const void *)pb;

        for (i = 0; i < na; i++) {
            if (!kr_cf_same_hostport(&x[i], &y[i])) {
                return false;
            }
        }
        return true;
    }
    case KR_CT_HOST:
    case KR_CT_NAME:
    case KR_CT_STRING:
    case KR_CT_PATH:
        return kr_cf_same_str(*(char *const *)(const void *)pa,
                              *(char *const *)(const void *)pb);
    case KR_CT_PORT:
        return *(const uint16_t *)(const void *)pa ==
               *(const uint16_t *)(const void *)pb;
    case KR_CT_I32:
    case KR_CT_KERR:
    case KR_CT_VRANGE:
        return *(const int32_t *)(const void *)pa ==
               *(const int32_t *)(const void *)pb;
    case KR_CT_I64:
        return *(const int64_t *)(const void *)pa ==
               *(const int64_t *)(const void *)pb;
    case KR_CT_BOOL:
        return *(const bool *)(const void *)pa ==
               *(const bool *)(const void *)pb;
    case KR_CT_LEVEL:
    case KR_CT_CHOICE:
        return *(const int *)(const void *)pa == *(const int *)(const void *)pb;
    case KR_CT_ACKS:
    case KR_CT_CODECS:
        return *(const unsigned *)(const void *)pa ==
               *(const unsigned *)(const void *)pb;
    case KR_CT_PROB:
        return *(const double *)(const void *)pa ==
               *(const double *)(const void *)pb;
    case KR_CT_DIAL: {
        const struct kr_dial_override *x =
            *(struct kr_dial_override *const *)(const void *)pa;
        const struct kr_dial_override *y =
            *(struct kr_dial_override *const *)(const void *)pb;

        for (i = 0; i < na; i++) {
            if (x[i].node_id != y[i].node_id ||
                !kr_cf_same_hostport(&x[i].addr, &y[i].addr)) {
                return false;
            }
        }
        return true;
    }
    case KR_CT_NAMES:
    case KR_CT_GLOBS: {
        const struct kr_strlist *x = (const void *)pa;
        const struct kr_strlist *y = (const void *)pb;

        if (x->n != y->n) {
            return false;
        }
        for (i = 0; i < x->n; i++) {
            if (strcmp(x->v[i], y->v[i]) != 0) {
                return false;
            }
        }
        return true;
    }
    case KR_CT_CIDRS: {
        const struct kr_cidr *x = *(struct kr_cidr *const *)(const void *)pa;
        const struct kr_cidr *y = *(struct kr_cidr *const *)(const void *)pb;

        for (i = 0; i < na; i++) {
            if (x[i].family != y[i].family || x[i].bits != y[i].bits ||
                memcmp(x[i].addr, y[i].addr, sizeof(x[i].addr)) != 0) {
                return false;
            }
        }
        return true;
    }
    case KR_CT_APIS: {
        const int16_t *x = *(int16_t *const *)(const void *)pa;
        const int16_t *y = *(int16_t *const *)(const void *)pb;

        return na == 0 || memcmp(x, y, sizeof(*x) * (size_t)na) == 0;
    }
    }
    return false;
}

/*
 * Report each key of kind whose value differs between the section
 * objects a and b (*ch filled but for key and reload).  Returns the set.
 */
static unsigned
kr_cf_diff_keys(enum kr_cf_sect kind, const void *a, const void *b,
                struct kr_conf_change *ch, kr_conf_change_fn *fn, void *arg)
{
    unsigned set = 0;
    size_t i;

    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];

        if (k->sect != kind || kr_cf_same_value(k, a, b)) {
            continue;
        }
        ch->key = k->name;
        ch->reload = kr_cf_key_reload(k);
        set |= (unsigned)ch->reload;
        if (fn != NULL) {
            fn(ch, arg);
        }
    }
    return set;
}

/* A listener with its upstream named as it resolves (written or not). */
static struct kr_listener_conf
kr_cf_listener_resolved(const struct kr_listener_conf *l)
{
    struct kr_listener_conf r = *l;

    if (r.upstream == NULL && r.up != NULL) {
        r.upstream = r.up->name;
    }
    return r;
}

unsigned
kr_conf_listener_diff(const struct kr_listener_conf *old,
                      const struct kr_listener_conf *new,
                      kr_conf_change_fn *fn, void *arg)
{
    struct kr_listener_conf a = kr_cf_listener_resolved(old);
    struct kr_listener_conf b = kr_cf_listener_resolved(new);
    struct kr_conf_change ch = {
        kr_cf_sect_names[KR_CS_LISTENER], new->name, NULL, 0, 0, new->line,
        KR_RELOAD_APPLY
    };

    return kr_cf_diff_keys(KR_CS_LISTENER, &a, &b, &ch, fn, arg);
}

unsigned
kr_conf_upstream_diff(const struct kr_upstream_conf *old,
                      const struct kr_upstream_conf *new,
                      kr_conf_change_fn *fn, void *arg)
{
    struct kr_conf_change ch = {
        kr_cf_sect_names[KR_CS_UPSTREAM], new->name, NULL, 0, 0, new->line,
        KR_RELOAD_APPLY
    };

    return kr_cf_diff_keys(KR_CS_UPSTREAM, old, new, &ch, fn, arg);
}

/* Report a whole section added (oi < 0) or removed (ni < 0). */
static unsigned
kr_cf_diff_whole(enum kr_cf_sect kind, const char *name, int oi, int ni,
                 int line, kr_conf_change_fn *fn, void *arg)
{
    struct kr_conf_change ch = {
        kr_cf_sect_names[kind], name != NULL ? name : "", NULL, oi, ni, line,
        kr_cf_sect_reload[kind][oi < 0 ? 0 : 1]
    };

    if (fn != NULL) {
        fn(&ch, arg);
    }
    return (unsigned)ch.reload;
}

/*
 * One kind of named section, held in arrays of n* elements of size sz
 * whose name and line fields are at name_off and line_off.
 */
struct kr_cf_arr {
    enum kr_cf_sect kind;
    const void *a, *b;
    int na, nb;
    size_t sz, name_off, line_off;
};

static const char *
kr_cf_arr_name(const struct kr_cf_arr *x, const void *base, int i)
{
    return *(char *const *)(const void *)((const char *)base +
                                          (size_t)i * x->sz + x->name_off);
}

static int
kr_cf_arr_line(const struct kr_cf_arr *x, const void *base, int i)
{
    return *(const int *)(const void *)((const char *)base +
                                        (size_t)i * x->sz + x->line_off);
}

/* The index of the section called name in base (n of them), or -1. */
static int
kr_cf_arr_find(const struct kr_cf_arr *x, const void *base, int n,
               const char *name)
{
    int i;

    for (i = 0; i < n; i++) {
        if (kr_cf_same_str(kr_cf_arr_name(x, base, i), name)) {
            return i;
        }
    }
    return -1;
}

static unsigned
kr_cf_diff_arr(const struct kr_cf_arr *x, kr_conf_change_fn *fn, void *arg)
{
    unsigned set = 0;
    int i, j;

    for (j = 0; j < x->nb; j++) {
        const char *name = kr_cf_arr_name(x, x->b, j);
        const void *sb = (const char *)x->b + (size_t)j * x->sz;
        int line = kr_cf_arr_line(x, x->b, j);

        i = kr_cf_arr_find(x, x->a, x->na, name);
        if (i < 0) {
            set |= kr_cf_diff_whole(x->kind, name, -1, j, line, fn, arg);
        } else if (x->kind == KR_CS_LISTENER) {
            struct kr_listener_conf la =
                kr_cf_listener_resolved(&((const struct kr_listener_conf *)
                                          x->a)[i]);
            struct kr_listener_conf lb = kr_cf_listener_resolved(sb);
            struct kr_conf_change ch = {
                kr_cf_sect_names[x->kind], name, NULL, i, j, line,
                KR_RELOAD_APPLY
            };

            set |= kr_cf_diff_keys(x->kind, &la, &lb, &ch, fn, arg);
        } else {
            struct kr_conf_change ch = {
                kr_cf_sect_names[x->kind], name, NULL, i, j, line,
                KR_RELOAD_APPLY
            };

            set |= kr_cf_diff_keys(x->kind,
                                   (const char *)x->a + (size_t)i * x->sz, sb,
                                   &ch, fn, arg);
        }
    }
    for (i = 0; i < x->na; i++) {
        const char *name = kr_cf_arr_name(x, x->a, i);

        if (kr_cf_arr_find(x, x->b, x->nb, name) < 0) {
            set |= kr_cf_diff_whole(x->kind, name, i, -1,
                                    kr_cf_arr_line(x, x->a, i), fn, arg);
        }
    }
    return set;
}

unsigned
kr_conf_reload_diff(const struct kr_conf *old, const struct kr_conf *new,
                    kr_conf_change_fn *fn, void *arg)
{
    const struct kr_cf_arr arrs[] = {
        { KR_CS_LISTENER, old->listeners, new->listeners, old->nlisteners,
          new->nlisteners, sizeof(struct kr_listener_conf),
          offsetof(struct kr_listener_conf, name),
          offsetof(struct kr_listener_conf, line) },
        { KR_CS_UPSTREAM, old->upstreams, new->upstreams, old->nupstreams,
          new->nupstreams, sizeof(struct kr_upstream_conf),
          offsetof(struct kr_upstream_conf, name),
          offsetof(struct kr_upstream_conf, line) },
        { KR_CS_RULE, old->rules, new->rules, old->nrules, new->nrules,
          sizeof(struct kr_rule_conf), offsetof(struct kr_rule_conf, name),
          offsetof(struct kr_rule_conf, line) },
    };
    struct kr_conf_change ch = {
        kr_cf_sect_names[KR_CS_LOG], "", NULL, 0, 0, 0, KR_RELOAD_APPLY
    };
    unsigned set;

    set = kr_cf_diff_arr(&arrs[0], fn, arg);
    set |= kr_cf_diff_arr(&arrs[1], fn, arg);
    set |= kr_cf_diff_keys(KR_CS_LOG, &old->log, &new->log, &ch, fn, arg);
    /* [audit] is there when it has a target (a required key) */
    if (old->audit.target != NULL && new->audit.target != NULL) {
        ch.section = kr_cf_sect_names[KR_CS_AUDIT];
        set |= kr_cf_diff_keys(KR_CS_AUDIT, &old->audit, &new->audit, &ch,
                               fn, arg);
    } else if (old->audit.target != NULL || new->audit.target != NULL) {
        set |= kr_cf_diff_whole(KR_CS_AUDIT, "",
                                old->audit.target != NULL ? 0 : -1,
                                new->audit.target != NULL ? 0 : -1, 0, fn,
                                arg);
    }
    set |= kr_cf_diff_arr(&arrs[2], fn, arg);
    /* [admin] is there when it has a listen address (a required key) */
    if (old->admin.listen.host != NULL && new->admin.listen.host != NULL) {
        ch.section = kr_cf_sect_names[KR_CS_ADMIN];
        set |= kr_cf_diff_keys(KR_CS_ADMIN, &old->admin, &new->admin, &ch,
                               fn, arg);
    } else if (old->admin.listen.host != NULL ||
               new->admin.listen.host != NULL) {
        set |= kr_cf_diff_whole(KR_CS_ADMIN, "",
                                old->admin.listen.host != NULL ? 0 : -1,
                                new->admin.listen.host != NULL ? 0 : -1, 0,
                                fn, arg);
    }
    ch.section = kr_cf_sect_names[KR_CS_PROCESS];
    set |= kr_cf_diff_keys(KR_CS_PROCESS, &old->process, &new->process, &ch,
                           fn, arg);
    return set;
}

/* A value's form as the docs say it. */
static const char *
kr_cf_type_doc(enum kr_cf_type t)
{
    switch (t) {
    case KR_CT_HOSTPORT:
        return "HOST:PORT";
    case KR_CT_HOSTPORT_LIST:
        return "list of HOST:PORT";
    case KR_CT_HOST:
        return "host name or IP address";
    case KR_CT_NAME:
        return "section name";
    case KR_CT_STRING:
        return "string";
    case KR_CT_PATH:
        return "file path";
    case KR_CT_PORT:
        return "port";
    case KR_CT_I32:
    case KR_CT_I64:
        return "integer";
    case KR_CT_BOOL:
        return "boolean (true or false)";
    case KR_CT_LEVEL:
        return "log level";
    case KR_CT_DIAL:
        return "HOST:PORT, one key per NodeId (dial.NODEID)";
    case KR_CT_NAMES:
        return "list of names";
    case KR_CT_GLOBS:
        return "list of globs";
    case KR_CT_CIDRS:
        return "list of ADDR[/BITS]";
    case KR_CT_APIS:
        return "list of Kafka API names or ApiKeys";
    case KR_CT_VRANGE:
        return "version N or range N-M";
    case KR_CT_CHOICE:
        return "keyword";
    case KR_CT_KERR:
        return "Kafka error name or code";
    case KR_CT_ACKS:
        return "list of Acks: -1 (or all), 0, 1";
    case KR_CT_CODECS:
        return "list of compression codecs";
    case KR_CT_PROB:
        return "number from 0 to 1";
    }
    return "?";
}

/* "ms" or "bytes" by the name's suffix (the file's unit convention). */
static const char *
kr_cf_unit(const char *name)
{
    size_t n = strlen(name);

    if (n > 3 && strcmp(name + n - 3, "_ms") == 0) {
        return "ms";
    }
    if (n > 6 && strcmp(name + n - 6, "_bytes") == 0) {
        return "bytes";
    }
    return NULL;
}

bool
kr_conf_key(size_t i, struct kr_conf_key_desc *out)
{
    const struct kr_cf_key *k;
    size_t j;

    if (i >= KR_CF_NKEYS || out == NULL) {
        return false;
    }
    k = &kr_conf_keys[i];
    out->section = kr_cf_sect_names[k->sect];
    out->name = k->name;
    out->reload = kr_cf_key_reload(k);
    out->required = (k->flags & KR_CF_REQUIRED) != 0;
    out->def = k->def;
    out->help = k->help;
    out->type = kr_cf_type_doc(k->type);
    out->unit = kr_cf_unit(k->name);
    out->has_range = k->type == KR_CT_PORT || k->type == KR_CT_I32 ||
                     k->type == KR_CT_I64 || k->type == KR_CT_VRANGE;
    out->min = out->has_range ? k->min : 0;
    out->max = out->has_range ? k->max : 0;
    out->choices = k->type == KR_CT_CODECS ? kr_cf_codec_names : k->choices;
    out->def_doc = NULL;
    for (j = 0; j < KR_ARRAY_LEN(kr_cf_def_docs) && k->def == NULL &&
                !out->required; j++) {
        if (kr_cf_def_docs[j].sect == k->sect &&
            strcmp(kr_cf_def_docs[j].name, k->name) == 0) {
            out->def_doc = kr_cf_def_docs[j].doc;
        }
    }
    return true;
}

/* ---- dump --------------------------------------------------------------- */

static void
kr_cf_print_hostport(FILE *f, const struct kr_hostport *hp)
{
    if (strchr(hp->host, ':') != NULL) {
        fprintf(f, "[%s]:%u", hp->host, (unsigned)hp->port);
    } else {
        fprintf(f, "%s:%u", hp->host, (unsigned)hp->port);
    }
}

static bool
kr_cf_name_in(const char *const *list, const char *name)
{
    for (; *list != NULL; list++) {
        if (strcmp(*list, name) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Keys that only go with another one are dumped only with it: the dump is
 * the configuration in effect, and a key the section does not use is not
 * part of it.  A default printed for such a key (ssl_min_protocol without
 * ssl = true, sasl_login_rate without sasl = terminate...) would also
 * load back as a key given but not used, which -t warns about, so a dump
 * would fail -t -W.  These are the cases the checks warn about (the key
 * lists are theirs).
 */
static bool
kr_cf_key_dumped(enum kr_cf_sect kind, const void *obj, const char *name)
{
    if (kind == KR_CS_RULE) {
        const struct kr_rule_conf *r = obj;

        if (strncmp(name, "throttle_", 9) == 0 &&
            strcmp(name, "throttle_ms") != 0) {
            return r->throttle_ms >= 0;
        }
        if (strcmp(name, "fault_error_probability") == 0) {
            return r->fault_error >= 0;
        }
        if (strcmp(name, "audit_body") == 0) {
            return r->audit;
        }
    } else if (kind == KR_CS_UPSTREAM) {
        const struct kr_upstream_conf *u = obj;

        if (!u->ssl && kr_cf_name_in(kr_cf_tls_keys[1], name)) {
            return false;
        }
    } else if (kind == KR_CS_LISTENER) {
        const struct kr_listener_conf *l = obj;
        bool term = l->sasl == KR_SASL_MODE_TERMINATE;

        if (kr_cf_name_in(kr_cf_tls_keys[0], name)) {
            if (strcmp(name, "ssl_principal_mapping_rules") == 0) {
                return l->ssl && l->ssl_client_ca != NULL;
            }
            return l->ssl;
        }
        if (kr_cf_name_in(kr_cf_sasl_term_keys, name)) {
            return term;
        }
        if (strcmp(name, "oauthbearer_principal_claim") == 0) {
            return !term;
        }
        if (kr_cf_name_in(kr_cf_proxy_keys, name)) {
            return l->proxy_protocol != 0;
        }
        if (kr_cf_name_in(kr_cf_sni_keys, name)) {
            return l->sni_broker_name != NULL;
        }
    }
    return true;
}

/*
 * legacy_fetch_max_bytes, which the loader keeps to half of
 * max_frame_bytes (kr_cf_check_listener), as it applies: after a comment
 * when the half is what applies.  A half below the key's least value
 * (max_frame_bytes under 128 KiB) is printed as the least, which loads
 * back to the same half (the comment gives it).  Either way the dump
 * loads back to the same value, and its own dump is the same text.
 */
static void
kr_cf_dump_legacy_fetch(FILE *f, const struct kr_cf_key *k,
                        const struct kr_listener_conf *l)
{
    int64_t half = kr_cf_half_frame(l);

    if (l->legacy_fetch_max_bytes < half) {
        fprintf(f, "%s = %" PRId64 "\n", k->name, l->legacy_fetch_max_bytes);
        return;
    }
    fprintf(f, "; %s: at most half of max_frame_bytes, %" PRId64 ", applies "
            "(krelay holds a translated response whole)\n", k->name, half);
    fprintf(f, "%s = %" PRId64 "\n", k->name, half < k->min ? k->min : half);
}

static void
kr_cf_dump_section(FILE *f, enum kr_cf_sect kind, const char *name,
                   const void *obj)
{
    const char *base = obj;
    size_t i;
    int j;

    if (name != NULL && name[0] != '\0') {
        fprintf(f, "[%s %s]\n", kr_cf_sect_names[kind], name);
    } else {
        fprintf(f, "[%s]\n", kr_cf_sect_names[kind]);
    }
    for (i = 0; i < KR_CF_NKEYS; i++) {
        const struct kr_cf_key *k = &kr_conf_keys[i];
        const void *p = base + k->off;

        if (k->sect != kind) {
            continue;
        }
        if (!kr_cf_key_dumped(kind, obj, k->name)) {
            continue;
        }
        if (kind == KR_CS_LISTENER &&
            strcmp(k->name, "legacy_fetch_max_bytes") == 0) {
            kr_cf_dump_legacy_fetch(f, k, obj);
            continue;
        }
        switch (k->type) {
        case KR_CT_HOSTPORT:
            if (((const struct kr_hostport *)p)->host == NULL) {
                continue;
            }
            fprintf(f, "%s = ", k->name);
            kr_cf_print_hostport(f, p);
            break;
        case KR_CT_HOSTPORT_LIST: {
            const struct kr_hostport *arr =
                *(struct kr_hostport *const *)p;
            int n = *(const int *)(const void *)(base + k->off2);

            fprintf(f, "%s = ", k->name);
            for (j = 0; j < n; j++) {
                if (j > 0) {
                    fputc(',', f);
                }
                kr_cf_print_hostport(f, &arr[j]);
            }
            break;
        }
        case KR_CT_HOST: {
            const char *s = *(char *const *)p;

            if (s == NULL) {
                continue;
            }
            fprintf(f, strchr(s, ':') != NULL ? "%s = [%s]" : "%s = %s",
                    k->name, s);
            break;
        }
        case KR_CT_NAME:
        case KR_CT_STRING:
        case KR_CT_PATH: {
            const char *s = *(char *const *)p;

            if (s == NULL) {
                continue;
            }
            /* issue 9: a secret's value is never printed */
            fprintf(f, "%s = %s", k->name,
                    (k->flags & KR_CF_SECRET) ? KR_CF_SECRET_HIDDEN : s);
            break;
        }
        case KR_CT_PORT:
            if (*(const uint16_t *)p == 0) {
                continue;               /* not set (sni_broker_name) */
            }
            fprintf(f, "%s = %u", k->name, (unsigned)*(const uint16_t *)p);
            break;
        case KR_CT_I32:
        case KR_CT_KERR:
            if ((k->flags & KR_CF_NEG_UNSET) && *(const int32_t *)p < 0) {
                continue;
            }
            fprintf(f, "%s = %" PRId32, k->name, *(const int32_t *)p);
            break;
        case KR_CT_NAMES:
        case KR_CT_GLOBS: {
            const struct kr_strlist *l = p;

            if (l->n == 0) {
                continue;
            }
            fprintf(f, "%s = ", k->name);
            for (j = 0; j < l->n; j++) {
                fprintf(f, "%s%s", j > 0 ? "," : "", l->v[j]);
            }
            break;
        }
        case KR_CT_CIDRS: {
            const struct kr_cidr *cs = *(struct kr_cidr *const *)p;
            int n = *(const int *)(const void *)(base + k->off2);
            char a[INET6_ADDRSTRLEN];

            if (n == 0) {
                continue;
            }
            fprintf(f, "%s = ", k->name);
            for (j = 0; j < n; j++) {
                inet_ntop(cs[j].family, cs[j].addr, a, sizeof(a));
                fprintf(f, "%s%s/%u", j > 0 ? "," : "", a,
                        (unsigned)cs[j].bits);
            }
            break;
        }
        case KR_CT_APIS: {
            const int16_t *as = *(int16_t *const *)p;
            int n = *(const int *)(const void *)(base + k->off2);

            if (n == 0) {
                continue;
            }
            fprintf(f, "%s = ", k->name);
            for (j = 0; j < n; j++) {
                const struct kr_api_desc *a = kr_api_get(as[j]);

                fprintf(f, "%s%s", j > 0 ? "," : "",
                        a != NULL && a->name != NULL ? a->name : "?");
            }
            break;
        }
        case KR_CT_VRANGE:
            fprintf(f, "%s = %" PRId32 "-%" PRId32, k->name,
                    *(const int32_t *)p,
                    *(const int32_t *)(const void *)(base + k->off2));
            break;
        case KR_CT_CHOICE:
            if (k->choices[*(const int *)p][0] == '\0') {
                continue;               /* "": not set (sasl_mechanism) */
            }
            fprintf(f, "%s = %s", k->name, k->choices[*(const int *)p]);
            break;
        case KR_CT_ACKS:
        case KR_CT_CODECS: {
            unsigned m = *(const unsigned *)p;
            int b;
            bool first = true;

            if (m == 0) {
                continue;
            }
            fprintf(f, "%s = ", k->name);
            for (b = 0; b < 5; b++) {
                static const char *const acks[] = { "-1", "0", "1" };

                if (!(m & (1u << b)) || (k->type == KR_CT_ACKS && b > 2)) {
                    continue;
                }
                fprintf(f, "%s%s", first ? "" : ",",
                        k->type == KR_CT_ACKS ? acks[b]
                                              : kr_cf_codec_names[b]);
                first = false;
            }
            break;
        }
        case KR_CT_PROB:
            fprintf(f, "%s = %.17g", k->name, *(const double *)p);
            break;
        case KR_CT_I64:
            fprintf(f, "%s = %" PRId64, k->name, *(const int64_t *)p);
            break;
        case KR_CT_BOOL:
            fprintf(f, "%s = %s", k->name,
                    *(const bool *)p ? "true" : "false");
            break;
        case KR_CT_LEVEL:
            fprintf(f, "%s = %s", k->name,
                    kr_log_level_name(*(const int *)p));
            break;
        case KR_CT_DIAL: {
            const struct kr_dial_override *d =
                *(struct kr_dial_override *const *)p;
            int n = *(const int *)(const void *)(base + k->off2);

            for (j = 0; j < n; j++) {
                fprintf(f, "dial.%" PRId32 " = ", d[j].node_id);
                kr_cf_print_hostport(f, &d[j].addr);
                fputc('\n', f);
            }
            continue;
        }
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

/*
 * The dump's lines to f as inih reads them back: a value that starts with
 * ';' after "key = " would be an inline comment (inih: a ';' after
 * whitespace), so such a line is written "key =;..." (no blank: inih
 * then keeps it).  Other values need nothing: the loader never keeps
 * leading or trailing blanks (inih strips them), a '#' starts a comment
 * only at the start of a line, and a list's items are joined without
 * blanks.
 */
static void
kr_cf_put_dump(FILE *f, const char *text)
{
    const char *l, *nl, *eq;
    size_t n;

    for (l = text; *l != '\0'; l = nl) {
        nl = strchr(l, '\n');
        nl = nl != NULL ? nl + 1 : l + strlen(l);
        n = (size_t)(nl - l);
        eq = l[0] != ';' && l[0] != '[' ? memchr(l, '=', n) : NULL;
        if (eq != NULL && eq > l && eq[-1] == ' ' && eq + 2 < nl &&
            eq[1] == ' ' && eq[2] == ';') {
            fwrite(l, 1, (size_t)(eq + 1 - l), f);
            fwrite(eq + 2, 1, (size_t)(nl - eq - 2), f);
        } else {
            fwrite(l, 1, n, f);
        }
    }
}

static void kr_cf_dump_all(const struct kr_conf *c, FILE *f);

void
kr_conf_dump(const struct kr_conf *c, FILE *f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m;

    if (c == NULL || f == NULL) {
        return;
    }
    m = open_memstream(&text, &len);
    if (m == NULL) {
        kr_cf_dump_all(c, f);           /* out of memory: as it is */
        return;
    }
    kr_cf_dump_all(c, m);
    if (fclose(m) == 0 && text != NULL) {
        kr_cf_put_dump(f, text);
    }
    free(text);
}

static void
kr_cf_dump_all(const struct kr_conf *c, FILE *f)
{
    int i;

    fprintf(f, "; effective configuration from %s\n\n", c->path);
    for (i = 0; i < c->nupstreams; i++) {
        if (c->upstreams[i].stand_in) {
            /* not the file's: it loads back in its place (--demo -c) */
            fprintf(f, "; no [upstream]: krelay --demo points the "
                    "listeners at its demo cluster\n\n");
            continue;
        }
        kr_cf_dump_section(f, KR_CS_UPSTREAM, c->upstreams[i].name,
                           &c->upstreams[i]);
    }
    for (i = 0; i < c->nlisteners; i++) {
        const struct kr_listener_conf *l = &c->listeners[i];

        /* Name the upstream even when it was implied. */
        if (l->upstream == NULL && l->up != NULL && l->up->name[0] != '\0'
            && !l->up->stand_in) {
            struct kr_listener_conf tmp = *l;

            tmp.upstream = l->up->name;
            kr_cf_dump_section(f, KR_CS_LISTENER, l->name, &tmp);
        } else {
            kr_cf_dump_section(f, KR_CS_LISTENER, l->name, l);
        }
    }
    kr_cf_dump_section(f, KR_CS_LOG, NULL, &c->log);
    kr_cf_dump_section(f, KR_CS_PROCESS, NULL, &c->process);
    if (c->audit.target != NULL) {
        kr_cf_dump_section(f, KR_CS_AUDIT, NULL, &c->audit);
    }
    if (c->admin.listen.host != NULL) {
        kr_cf_dump_section(f, KR_CS_ADMIN, NULL, &c->admin);
    }
    for (i = 0; i < c->nrules; i++) {
        kr_cf_dump_section(f, KR_CS_RULE, c->rules[i].name, &c->rules[i]);
    }
}

/* ---- reference-counted configs ----------------------------------------- */

struct kr_conf_ref *
kr_conf_ref_new(struct kr_conf *conf, bool owned)
{
    struct kr_conf_ref *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    r->conf = conf;
    r->owned = owned;
    atomic_init(&r->refs, 1);
    return r;
}

struct kr_conf_ref *
kr_conf_ref_get(struct kr_conf_ref *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

void
kr_conf_ref_put(struct kr_conf_ref *r)
{
    /* release: this thread's reads of the config happen before the free
       that another thread's last put may do (acquire there) */
    if (r == NULL ||
        atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) > 1) {
        return;
    }
    if (r->owned) {
        kr_conf_free(r->conf);
    }
    free(r);
}

const char *
kr_conf_where(const struct kr_conf *c, int line, char *buf, size_t n)
{
    if (c == NULL || c->path == NULL) {
        snprintf(buf, n, "(no config file)");
    } else if (line > 0) {
        snprintf(buf, n, "%s:%d", c->path, line);
    } else {
        snprintf(buf, n, "%s", c->path);
    }
    return buf;
}
