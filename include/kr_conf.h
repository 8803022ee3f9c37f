/*
 * kr_conf.h - krelay's configuration: an INI file read with inih.
 *
 * Loading builds a fresh struct kr_conf: parse, fill defaults, check each
 * key, then check the whole (port clashes, dangling upstream names),
 * collecting every error with file:line before failing.  A loaded config
 * is immutable; a reload builds a new one and swaps it in.
 *
 * Units: keys ending in _ms are milliseconds, _bytes are bytes.  Every key
 * is documented in conf/krelay.ini with its unit and default.
 */
#ifndef KR_CONF_H
#define KR_CONF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kr_common.h"

struct kr_tls_ctx;                      /* TLS contexts: kr_tls_ctx.h */
struct kr_principal_rules;              /* mapping rules: kr_principal.h */
struct kr_sni;                          /* SNI routing names: kr_sni.h */

/* Most dial.NODEID overrides in one [upstream] section. */
#define KR_CONF_MAX_DIAL 256

/* A host and port, as written ("[::1]:9092", "kafka-1:9092"). */
struct kr_hostport {
    char *host;                 /* malloc'd, no brackets */
    uint16_t port;
};

/* dial.NODEID = HOST:PORT in an [upstream] section. */
struct kr_dial_override {
    int32_t node_id;
    struct kr_hostport addr;
};

/*
 * issue 9: SASL credentials krelay authenticates to the brokers with
 * (origination: [upstream] sasl_*; krelay's own metadata connections in
 * passthrough: metadata_sasl_*).  The loader reads the password file
 * (its first line) into secret, so each config generation has the file
 * as it was at its load; a token file is read again at each
 * (re)authentication (kr_sasl_client.h).  secret is wiped
 * (OPENSSL_cleanse) when the config is freed, and no secret is ever
 * dumped or logged.
 */
struct kr_sasl_cred {
    int mechanism;                      /* enum kr_sasl_mechanism
                                           (kr_sasl_client.h); 0: none */
    char *username;                     /* PLAIN, SCRAM: required */
    char *password_file;                /* its first line is the password */
    char *password;                     /* sasl_password, inline */
    char *token_file;                   /* OAUTHBEARER: the token, read at
                                           each authentication */
    char *token;                        /* OAUTHBEARER: inline */
    char *secret;                       /* the password as loaded (file or
                                           inline; NUL-terminated), NULL
                                           for OAUTHBEARER or none */
    size_t secret_len;
};

/* [upstream NAME] */
struct kr_upstream_conf {
    char *name;                         /* "" when unnamed */
    struct kr_hostport *bootstrap;      /* bootstrap_servers, >= 1 */
    int nbootstrap;
    int64_t connect_timeout_ms;         /* default 10000 */
    int64_t request_timeout_margin_ms;  /* default 30000: added to a
                                           request's own wait */
    int64_t metadata_refresh_ms;        /* default 300000 */
    struct kr_dial_override *dial;
    int ndial;
    int line;                           /* where the section starts */
    /* issue 8: TLS to the brokers (appended) */
    bool ssl;                           /* default false */
    char *ssl_ca;                       /* PEM CA bundle; NULL: the
                                           system's store */
    bool ssl_verify_hostname;           /* default true */
    char *ssl_certificate;              /* client certificate, NULL: none */
    char *ssl_key;                      /* NULL: in ssl_certificate */
    int ssl_min_protocol;               /* enum kr_tls_version */
    struct kr_tls_ctx *tls;             /* with ssl: the context the loader
                                           built (kr_tls_ctx.h; this
                                           config's reference), else NULL */
    /* issue 9: SASL to the brokers (appended) */
    struct kr_sasl_cred sasl;           /* origination: every connection
                                           (the clients' and krelay's own) */
    struct kr_sasl_cred metadata_sasl;  /* krelay's own metadata
                                           connections when sasl is off */
    /* issue 10: what the brokers accept (appended) */
    int broker_profile;                 /* enum kr_broker_profile
                                           (kr_broker_versions.h):
                                           learned (0, the default),
                                           kafka-4.0.0, kafka-4.0.1+ */
    bool stand_in;                      /* the demo cluster's, not the
                                           file's: the one kr_conf_load_opts.
                                           stand_in_upstream added (krelay
                                           --demo -c FILE), or --demo's
                                           own; kr_conf_dump leaves it
                                           out */
};

/* sni_fallback: a client with no SNI name, or one that routes nowhere. */
enum kr_sni_fallback {
    KR_SNI_FALLBACK_CLOSE = 0,          /* "close" (the default) */
    KR_SNI_FALLBACK_BOOTSTRAP           /* "bootstrap": the bootstrap route */
};

/* sasl: what a client must do before other requests (issue 9). */
enum kr_sasl_mode {
    KR_SASL_MODE_PASSTHROUGH = 0,       /* "passthrough" (the default):
                                           a client that starts SASL is
                                           followed; one that does not
                                           goes on unauthenticated */
    KR_SASL_MODE_REQUIRED,              /* "required": nothing but
                                           ApiVersions and SaslHandshake
                                           before authentication */
    KR_SASL_MODE_TERMINATE              /* "terminate": krelay itself
                                           authenticates clients
                                           (kr_sasl_server.h) */
};

struct kr_sasl_srv_cfg;

/* [listener NAME] */
struct kr_listener_conf {
    char *name;                         /* "" when unnamed */
    struct kr_hostport listen;          /* bootstrap listener */
    char *advertised_host;              /* default: listen host, or
                                           127.0.0.1 for a wildcard */
    uint16_t broker_port_base;          /* port of NodeId n:
                                           broker_port_base + n */
    int32_t node_id_min, node_id_max;   /* default 0..15 */
    char *upstream;                     /* upstream name; NULL = the only */
    struct kr_upstream_conf *up;        /* resolved by the loader */
    int64_t max_frame_bytes;            /* default 64 MiB */
    int64_t max_inflight;               /* per connection, default 1000 */
    int64_t max_buffer_bytes;           /* per direction per conn, 4 MiB */
    int64_t max_connections;            /* per listener group, 10000 */
    int64_t idle_timeout_ms;            /* default 600000 (Kafka's
                                           connections.max.idle.ms) */
    bool tcp_nodelay;                   /* TCP_NODELAY on accepted client
                                           sockets, default true */
    int64_t splice_min_bytes;           /* splice(2) runs of at least this
                                           many opaque bytes (record data),
                                           0: never; default 65536 */
    int line;
    /* issue 8: TLS with the clients (appended) */
    bool ssl;                           /* default false */
    char *ssl_certificate;              /* PEM chain; required with ssl */
    char *ssl_key;                      /* NULL: in ssl_certificate */
    char *ssl_client_ca;                /* mTLS CAs; NULL: no client
                                           certificate asked for */
    char *ssl_crl;                      /* PEM CRLs; NULL: none */
    int ssl_min_protocol;               /* enum kr_tls_version */
    char *ssl_ciphers;                  /* TLS 1.2 list; NULL: OpenSSL's */
    char *ssl_ciphersuites;             /* TLS 1.3; NULL: OpenSSL's */
    int64_t ssl_handshake_timeout_ms;   /* default 10000 */
    bool ssl_resumption;                /* sessions resumed (within one
                                           config generation), default
                                           true */
    struct kr_tls_ctx *tls;             /* with ssl: the context the loader
                                           built (kr_tls_ctx.h; this
                                           config's reference), else NULL */
    char *ssl_principal_mapping_rules;  /* Kafka's syntax, as written;
                                           NULL: not given (DEFAULT) */
    struct kr_principal_rules *principal_rules; /* the loader's parse of
                                           it (kr_principal.h; owned by
                                           this config, immutable); NULL:
                                           not given, Kafka's DEFAULT */
    /* issue 9: SASL termination (sasl = terminate) */
    char *sasl_mechanisms;              /* as written; default PLAIN,
                                           SCRAM-SHA-256,SCRAM-SHA-512 */
    char *sasl_credentials;             /* the credentials file
                                           (kr_sasl_users.h); required
                                           with sasl = terminate */
    int64_t sasl_session_lifetime_ms;   /* SessionLifetimeMs, 0: none */
    char *sasl_login_rate;              /* "PER_SEC,BURST" or "0" (no
                                           limit); default "5,20" */
    struct kr_sasl_srv_cfg *sasl_srv;   /* with sasl = terminate: built by
                                           the loader from the keys above
                                           and the file (owned by this
                                           config, shared read-only by its
                                           sessions), else NULL */
    /* issue 8: SNI routing (appended) */
    char *sni_broker_name;              /* "broker-$(node_id).example.com";
                                           NULL: no SNI routing (a port per
                                           NodeId, broker_port_base) */
    char *sni_bootstrap_name;           /* NULL: none */
    int sni_fallback;                   /* enum kr_sni_fallback */
    struct kr_sni *sni;                 /* with sni_broker_name: the names
                                           the loader built (kr_sni.h;
                                           owned by this config), else
                                           NULL.  broker_port_base is 0 and
                                           advertised_host NULL then */
    /* issue 9: SASL passthrough (appended) */
    int sasl;                           /* enum kr_sasl_mode */
    int64_t sasl_auth_timeout_ms;       /* SaslHandshake to success, ms;
                                           default 10000 */
    char *oauthbearer_principal_claim;  /* the JWT claim naming an
                                           OAUTHBEARER principal; default
                                           "sub" */
    /* issue 10: legacy clients (appended) */
    bool translate_legacy;              /* translate versions the brokers
                                           no longer accept (KIP-896) up,
                                           and responses back; default
                                           false */
    int legacy_zstd;                    /* zstd batches for a consumer of
                                           magic 0/1: enum kr_legacy_zstd
                                           (kr_records.h) order: gzip (0,
                                           the default), none, refuse */
    int64_t legacy_batch_max_bytes;     /* Produce v0-2 message sets become
                                           RecordBatches of at most this
                                           many bytes; 0: one batch per
                                           set; default 1048576 */
    int64_t legacy_fetch_max_bytes;     /* a translated Fetch's MaxBytes
                                           (v0-2 had none): at most this;
                                           default 2097152, kept by the
                                           loader to half of
                                           max_frame_bytes (the value in
                                           effect) */
    int64_t legacy_refuse_delay_ms;     /* without translate_legacy: a
                                           refused old client that
                                           reconnects within the window
                                           waits this long for its
                                           refusal (the answer, or an
                                           Acks=0 Produce's close); 0:
                                           none; default 1000 */
    int64_t legacy_refuse_window_ms;    /* that window, from the last
                                           refusal of the same client
                                           address; default 10000 */
    /* issue 12: the PROXY protocol (appended) */
    int proxy_protocol;                 /* 0 off, else the versions taken:
                                           kr_proxy_proto.h's KR_PP_V1,
                                           KR_PP_V2, KR_PP_ANY */
    struct kr_cidr *proxy_protocol_from; /* the senders trusted; required
                                           with proxy_protocol */
    int nproxy_protocol_from;
    int64_t proxy_protocol_timeout_ms;  /* the header within this of the
                                           accept; default 5000 */
};

/* [log] */
struct kr_log_conf {
    int level;                          /* enum kr_log_level, default notice */
    char *target;                       /* "stderr", "syslog" or a path */
    int target_line;                    /* line of `target` in the file
                                           (the section's when defaulted);
                                           0: no [log] section */
};

/* A comma-separated list of strings (names or globs), each malloc'd. */
struct kr_strlist {
    char **v;
    int n;
};

/* One entry of client_address: an IPv4 or IPv6 network. */
struct kr_cidr {
    int family;                         /* AF_INET or AF_INET6 */
    uint8_t bits;                       /* prefix length */
    uint8_t addr[16];                   /* network, host bits zero */
};

/* Rule direction (the `direction` key). */
#define KR_RDIR_REQUEST 0x1u
#define KR_RDIR_RESPONSE 0x2u
#define KR_RDIR_BOTH 0x3u

/* throttle_mode / throttle_op */
enum kr_throttle_mode { KR_THROTTLE_INJECT = 0, KR_THROTTLE_ENFORCE };
enum kr_throttle_op { KR_THROTTLE_SET = 0, KR_THROTTLE_ADD };

/* Hard limit on [rule] sections (compiled into bit sets). */
#define KR_CONF_MAX_RULES 256

/*
 * [rule NAME]: match keys (empty list = any) and actions.  Rules apply in
 * file order (index in kr_conf.rules).  -1 in an int field means "not
 * set".  Semantics: src/kr_rule.c and conf/krelay.ini.
 */
struct kr_rule_conf {
    char *name;                         /* required, unique */
    int line;
    /* match */
    struct kr_strlist listener;         /* [listener] names */
    struct kr_cidr *client_address;     /* networks */
    int nclient_address;
    struct kr_strlist client_id;        /* ClientId globs */
    struct kr_strlist principal;        /* principal globs */
    int16_t *api;                       /* ApiKeys */
    int napi;
    int32_t versions_min, versions_max; /* ApiVersion range, 0..32767 */
    int direction;                      /* KR_RDIR_*, default both */
    struct kr_strlist topic;            /* topic globs */
    /* actions */
    int32_t clamp_min_version;          /* -1: none */
    int32_t clamp_max_version;          /* -1: none */
    bool pass_unknown_apis;             /* ApiVersions: keep unknown keys */
    bool audit;
    bool audit_body;                    /* whole decoded body in the line */
    int32_t throttle_ms;                /* -1: no throttle action */
    int throttle_mode;                  /* enum kr_throttle_mode */
    int throttle_op;                    /* enum kr_throttle_op */
    int32_t throttle_jitter_ms;         /* 0..: added at random, ms */
    bool deny;
    int32_t deny_error;                 /* Kafka error code, -1: default */
    unsigned allowed_acks;              /* bit (acks + 1); 0: any */
    unsigned allowed_compression;       /* bit per codec id; 0: any */
    int32_t fault_latency_ms;           /* 0: none */
    int32_t fault_error;                /* Kafka error code, -1: none */
    double fault_error_probability;     /* 0..1, default 1 */
    double fault_close_probability;     /* 0..1, default 0 */
};

/* [audit] */
struct kr_audit_conf {
    char *target;                       /* path or "syslog"; NULL: none */
    int target_line;                    /* line of `target` in the file;
                                           0: no [audit] section */
    int64_t queue_bytes;                /* default 4 MiB */
    char *instance;                     /* the lines' "instance"; NULL:
                                           the host name
                                           (kr_audit_instance) */
};

/*
 * [admin] (the operations issue): the admin HTTP endpoint (kr_admin.h).
 * Off without the section.
 */
struct kr_admin_conf {
    struct kr_hostport listen;          /* host NULL: no [admin]; a port
                                           alone (":9644") listens on
                                           127.0.0.1 (host "127.0.0.1"
                                           after loading) */
    int listen_line;                    /* line of `listen`; 0: none */
    char *bearer_token;                 /* the token itself (a secret) */
    char *bearer_token_file;            /* file whose first line is it */
    char *token;                        /* the token in effect: a copy of
                                           bearer_token, or the first line
                                           of bearer_token_file read at
                                           load (each reload reads it
                                           again); wiped at free; NULL:
                                           none, every request allowed */
};

/*
 * [process] (the operations issue): once-per-process settings.  The
 * section may be absent: its defaults apply anyway.
 */
struct kr_process_conf {
    int64_t drain_timeout_ms;           /* SIGTERM: how long the drain
                                           may take before the connections
                                           left are closed; default 30000 */
    char *user;                         /* drop to it after binding and
                                           reading keys; NULL: no drop */
    char *group;                        /* its group; NULL: user's primary
                                           group */
    int64_t workers;                    /* event loops, one per thread,
                                           1..KR_WORKERS_MAX; default
                                           kr_conf_default_workers() */
};

/* The most [process] workers a config may ask for. */
#define KR_WORKERS_MAX 256

/*
 * [process] workers when the file does not set it: $KRELAY_WORKERS when
 * set (tests: `make check-workers`), else the CPUs krelay may run on
 * (sched_getaffinity's CPU_COUNT), at most KR_WORKERS_MAX.  Returns it,
 * or 0 when KRELAY_WORKERS is set but is not a number 1..KR_WORKERS_MAX.
 */
int64_t kr_conf_default_workers(void);

struct kr_ruleset;                      /* compiled rules: kr_rule.h */

/*
 * Something a config that loads does which is likely not what was meant
 * (issue 14): a listener on a wildcard address that advertises
 * 127.0.0.1, a clamp below what Kafka 4 accepts, a `principal` no
 * listener can give.  The loader collects them; `krelay -t` prints them
 * (-W makes them errors), the daemon prints them at start and logs them
 * at a reload.
 */
struct kr_conf_warning {
    int line;                           /* of the key (or section) at
                                           fault; 0: the file as a whole */
    char *text;                         /* malloc'd, one line without
                                           "FILE:LINE: " or newline */
};

/*
 * A whole loaded config.  Every pointer below (strings, arrays, nested
 * structs) is malloc'd and owned by it: kr_conf_free releases all, and the
 * ruleset through ruleset_free when that is set.  Counts (n*) are entries
 * of the array before them.
 */
struct kr_conf {
    char *path;                         /* file it was read from */
    struct kr_listener_conf *listeners;
    int nlisteners;
    struct kr_upstream_conf *upstreams;
    int nupstreams;
    struct kr_log_conf log;
    /* issue 3: rules and the audit sink (appended: layout compatible) */
    struct kr_rule_conf *rules;         /* file order = precedence */
    int nrules;
    struct kr_audit_conf audit;
    struct kr_ruleset *ruleset;         /* the rules compiled: NULL as
                                           the loader returns the config;
                                           set by whoever compiles them
                                           (kr_rule_load, in kr_rule.h,
                                           loads and compiles) */
    void (*ruleset_free)(struct kr_ruleset *rs);
                                        /* how kr_conf_free releases
                                           ruleset (kr_rule_free); NULL:
                                           the config does not own it */
    /* issue 14: the loader's warnings, in file order (appended) */
    struct kr_conf_warning *warnings;
    int nwarnings;
    /* the operations issue: [admin] (appended) */
    struct kr_admin_conf admin;
    /* the operations issue: [process] (appended) */
    struct kr_process_conf process;
};

/*
 * "FILE:LINE" of line (> 0) of the file c was read from, "FILE" for line
 * 0, "(no config file)" without one: where a message about a key points,
 * into buf (n bytes, cut to fit).  Returns buf.
 */
const char *kr_conf_where(const struct kr_conf *c, int line, char *buf,
                          size_t n);

/*
 * Read and check path.  The rules are checked, not compiled: *out has no
 * ruleset (the daemon loads through kr_rule_load, which compiles them).
 * On success returns KR_OK and *out (caller frees with kr_conf_free),
 * with what loads but is likely a mistake in (*out)->warnings.  On
 * failure returns KR_ERROR, *out untouched, and every problem is written
 * to errs (one line each, "FILE:LINE: message"; errs may be NULL).
 * Unknown sections or keys and bad values are errors.  A problem with no
 * line of its own (no [listener] at all) is reported at the last line; a
 * file that cannot be read as "FILE: message".  Lines may be up to 1024
 * bytes.  Call from one thread at a time: it raises libinih's global line
 * limit while it parses.
 */
int kr_conf_load(const char *path, FILE *errs,
                 struct kr_conf **out) KR_MUST_CHECK;

/* Same, from a string (tests); name is used in messages. */
int kr_conf_load_string(const char *text, const char *name, FILE *errs,
                        struct kr_conf **out) KR_MUST_CHECK;

/*
 * What a caller changes about a load (kr_conf_load_with); NULL or
 * zeroed: none, as kr_conf_load.
 */
struct kr_conf_load_opts {
    const char *stand_in_upstream;      /* NULL, or a bootstrap_servers
                                           value ("H:P,H:P"): a file with
                                           no [upstream] section loads as
                                           if it ended with an unnamed
                                           [upstream] with these servers,
                                           which its listeners without
                                           `upstream =` use (krelay --demo
                                           -c FILE: the demo cluster).  A
                                           file with one keeps its own.
                                           Borrowed for the call */
};

/* kr_conf_load and kr_conf_load_string with opts (may be NULL). */
int kr_conf_load_with(const char *path, const struct kr_conf_load_opts *opts,
                      FILE *errs, struct kr_conf **out) KR_MUST_CHECK;
int kr_conf_load_string_with(const char *text, const char *name,
                             const struct kr_conf_load_opts *opts,
                             FILE *errs, struct kr_conf **out) KR_MUST_CHECK;

/*
 * Free c and everything it owns (its ruleset too when ruleset_free is
 * set); NULL is a no-op.
 */
void kr_conf_free(struct kr_conf *c);

/*
 * Parse "HOST:PORT", "[V6]:PORT" into hp (host malloc'd, caller frees; ""
 * for ":PORT").  Returns false, hp untouched, for a missing or bad port
 * (1..65535), an unterminated bracket, a bad host name or IPv6 address,
 * an IPv6 address without brackets, or ENOMEM.
 */
bool kr_hostport_parse(const char *s, struct kr_hostport *hp);

/*
 * Is host (as kr_hostport_parse leaves it) a wildcard address, every
 * address of the machine: "", 0.0.0.0, *, or any spelling of the IPv6
 * unspecified address (with or without a %zone)?  What the loader takes
 * as one for listen and advertised_host.
 */
bool kr_conf_is_wildcard(const char *host);

/* Free a list's strings and array; leaves it empty. */
void kr_strlist_free(struct kr_strlist *l);

/*
 * Write c's warnings (struct kr_conf_warning) to f, one line each as
 * "FILE:LINE: text" ("FILE: text" without a line).  Returns the number
 * written.  kr_rule_warnings (kr_rule.h) writes these and the rule
 * table's own.
 */
unsigned kr_conf_warnings(const struct kr_conf *c, FILE *f);

/*
 * The name allowed_compression gives Kafka's compression type id
 * ("none", "gzip", "snappy", "lz4", "zstd": bit id of
 * kr_rule_conf.allowed_compression), or NULL for another id.  Static.
 */
const char *kr_conf_codec_name(int id);

/*
 * Print the effective config (every key in use with its value) to f
 * (krelay -T), as text that loads back (kr_conf_load_string) as the same
 * config, with no warning c did not have: a key its section does not use
 * (ssl_* without ssl = true, the sasl = terminate keys without it...) is
 * left out.  A value that starts with ';' is written "key =;..." so inih
 * does not take it for a comment.  Secrets are not printed: "(not shown: a
 * secret)" takes the value's place, and loading that back is refused (an
 * error naming the key: set it again), not taken for the secret.
 */
void kr_conf_dump(const struct kr_conf *c, FILE *f);

/*
 * Reload (SIGHUP).  A reload loads a whole new config and swaps it in,
 * or refuses it and keeps the running one.  What it does with a value
 * that changed is an attribute of each key in the key table
 * (src/kr_conf.c, kr_conf_keys[]); the reload code asks here instead of
 * comparing fields itself, and the man page prints the same attribute.
 * Bit values, so that a set of them can be returned.
 *
 *   APPLY    every key not named below.  Connections accepted after the
 *            reload use the new value, and open ones once they take the
 *            new config (src/kr_session.c, conf_refresh).  [log] level
 *            and target (the file is reopened), [audit] target (the new
 *            sink opens first: when it cannot, the reload is refused),
 *            every [rule] key, the [listener] limits and
 *            advertised_host; [upstream] connect_timeout_ms and
 *            request_timeout_margin_ms for client connections (the
 *            upstream's own Metadata connection keeps the values it
 *            started with); its TLS files (ssl_*: new connections get
 *            the new config's context), SASL settings (each exchange
 *            reads them) and broker_profile, for the connections of
 *            that upstream, open ones too.
 *   REBIND   [listener] listen, broker_port_base, node_id_min,
 *            node_id_max: the listener section is replaced as a whole.
 *            Its new listeners are bound (a socket of the old section on
 *            the same address is taken over, not closed), the old ones
 *            close, and the old section's open connections stay, with
 *            the listener values they had.  Every value of the section
 *            is then new.  The same as removing the section and adding
 *            another.
 *   NEWCONN  [upstream] bootstrap_servers, dial.NODEID, ssl,
 *            metadata_refresh_ms; [listener] upstream (issue 12).  New
 *            connections go by the new value, open ones keep what they
 *            had until they end: an [upstream] with such a change is
 *            built anew (its kr_upstream in each worker, a new cluster
 *            view: kr_cluster.h) and the old one serves its connections
 *            on until the last ends, then is freed; a listener's new
 *            upstream takes the listener's new connections.
 *   RESTART  [audit] queue_bytes; [admin] listen; [process] user,
 *            group.  The reload keeps the running value: only a
 *            restart applies it, or a reload that rebuilds what the key
 *            belongs to for another reason (an audit target that
 *            changes).
 *   REFUSE   never a key's or a section's today (kept for the set).
 *
 * Whole sections: adding or removing a [listener] is REBIND, a [rule]
 * or [audit] APPLY, an [upstream] NEWCONN (a removed one serves its open
 * connections until they end).  Sections are paired by kind and name:
 * a renamed section is one removed and one added.  Rule order is not
 * compared (a reload applies the rules as a whole).
 */
enum kr_conf_reload {
    KR_RELOAD_APPLY = 0x1,
    KR_RELOAD_RESTART = 0x2,
    KR_RELOAD_REBIND = 0x4,
    KR_RELOAD_REFUSE = 0x8,
    KR_RELOAD_NEWCONN = 0x10
};

/* One difference between two configs (kr_conf_reload_diff). */
struct kr_conf_change {
    const char *section;                /* "listener", "upstream", "log",
                                           "audit" or "rule" */
    const char *name;                   /* the section's name, "" when
                                           unnamed */
    const char *key;                    /* as in krelay.ini ("dial." for
                                           all dial.NODEID together); NULL
                                           when the whole section was
                                           added or removed */
    int old_index, new_index;           /* the section in old's and new's
                                           listeners, upstreams or rules
                                           (0 for [log] and [audit]); -1:
                                           not in that config */
    int line;                           /* where the section starts in
                                           new (in old when removed); 0
                                           when not known ([log], [audit])
                                           */
    enum kr_conf_reload reload;         /* what a reload does with it */
};

/* Called once per difference; ch is valid during the call only. */
typedef void kr_conf_change_fn(const struct kr_conf_change *ch, void *arg);

/*
 * Compare old (the config whose values run) with new, key by key through
 * the key table, and call fn(change, arg) for every key whose value
 * differs and every section added or removed (fn may be NULL).  Sections
 * are visited as listeners, upstreams, log, audit, rules, each in new's
 * order, then the ones removed in old's order.  A listener's upstream is
 * compared by the name it resolves to, written or implied.  Returns the
 * set (KR_RELOAD_* bits) of what was reported, 0 when the configs do not
 * differ.  Pure; reads both configs only.
 */
unsigned kr_conf_reload_diff(const struct kr_conf *old,
                             const struct kr_conf *new,
                             kr_conf_change_fn *fn, void *arg);

/*
 * The same for one [listener] (or [upstream]) section of each config,
 * whatever their names: the keys only (old_index and new_index 0).  For
 * the reload, which keeps a running listener section when nothing in the
 * result is REBIND, and a running upstream when nothing is NEWCONN.
 */
unsigned kr_conf_listener_diff(const struct kr_listener_conf *old,
                               const struct kr_listener_conf *new,
                               kr_conf_change_fn *fn, void *arg);
unsigned kr_conf_upstream_diff(const struct kr_upstream_conf *old,
                               const struct kr_upstream_conf *new,
                               kr_conf_change_fn *fn, void *arg);

/* One key of the key table, as docs and tests see it. */
struct kr_conf_key_desc {
    const char *section;                /* "listener", "upstream", "log",
                                           "audit" or "rule" */
    const char *name;                   /* as in krelay.ini; "dial."
                                           stands for dial.NODEID */
    enum kr_conf_reload reload;         /* never KR_RELOAD_REFUSE */
    bool required;                      /* no default: must be given */
    const char *def;                    /* default as written in the file;
                                           NULL: required, none, or
                                           computed by the loader */
    const char *help;                   /* one line */
    /* for the docs (man krelay.ini, tools/krconfkeys.c) */
    const char *type;                   /* the value's form: "integer",
                                           "HOST:PORT", "list of globs"... */
    const char *unit;                   /* "ms" (keys ending _ms), "bytes"
                                           (_bytes), NULL: none */
    bool has_range;                     /* min..max bound the value (an
                                           integer, or both ends of a
                                           version range) */
    int64_t min, max;                   /* when has_range, inclusive */
    const char *const *choices;         /* the words the value may be (a
                                           list's items, for a list),
                                           NULL-terminated; "" entries are
                                           none (skip them); NULL: any */
    const char *def_doc;                /* when def is NULL and the key
                                           is not required: what applies
                                           without it ("any", "none"...);
                                           NULL otherwise */
};

/*
 * The i-th key of the table (0, 1, ... in table order); false past the
 * last.  The strings are static.  The reload attribute is the one
 * kr_conf_reload_diff reports for the key.
 */
bool kr_conf_key(size_t i, struct kr_conf_key_desc *out);

/*
 * A reference-counted config: the daemon, each worker and each session
 * hold one to the config they use, so a reload swaps the current one
 * while old users keep theirs.  Counted with atomics: any thread may get
 * and put.
 */
struct kr_conf_ref {
    struct kr_conf *conf;
    atomic_int refs;
    bool owned;                         /* kr_conf_free at the last unref */
};

/*
 * A new reference to conf (refs 1), freeing conf at the last put when
 * owned.  NULL on ENOMEM.
 */
struct kr_conf_ref *kr_conf_ref_new(struct kr_conf *conf, bool owned);
/* Take one more reference to r (not NULL); returns r.  Any thread. */
struct kr_conf_ref *kr_conf_ref_get(struct kr_conf_ref *r);
/*
 * Drop one reference; at the last one, free r (and its conf when owned).
 * Any thread.  NULL is a no-op.
 */
void kr_conf_ref_put(struct kr_conf_ref *r);

#endif /* KR_CONF_H */
