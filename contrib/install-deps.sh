#!/bin/sh
# install-deps.sh - install what krelay needs on Debian 12 (bookworm) or
# a close derivative, in sets.  Idempotent: run it again at any time.
#
#   install-deps.sh --build   build and run krelay: compiler, autotools,
#                             pkg-config, libevent, OpenSSL, inih, jansson,
#                             PCRE2, libsystemd (sd_notify)
#   install-deps.sh --demo    --build, plus librdkafka-dev (for the program
#                             krelay-demo-cluster behind `krelay --demo`)
#                             and kcat (the quickstart's Kafka client)
#   install-deps.sh --tests   what only the tests (and `make bench`) use:
#                             Debian packages (Check, the Python clients,
#                             valgrind, HAProxy, a JDK, Node.js and npm,
#                             the headers node-rdkafka builds against), then
#                             the npm packages (below)
#   install-deps.sh --npm     the npm packages alone (node and npm must be
#                             there)
#   install-deps.sh [--all]   everything: --demo and --tests (what
#                             `make check` and CI use)
#   install-deps.sh --list SET   print the Debian packages of SET (build,
#                             demo, tests or all), one a line, and exit
#
# README.md ("Try it") says how much each set downloads.  Debian packages
# are installed with apt-get (as root, or through sudo).  The npm packages
# go into ${KRELAY_DEPS_DIR:-$HOME/.cache/krelay} (outside the source
# tree): kafkajs 2.2.4, and node-rdkafka 3.6.1, whose build (a few minutes)
# compiles librdkafka 2.12 and leaves its prefix (headers, libraries,
# pkg-config) under node_modules/node-rdkafka/build/deps/ for the modern
# mock upstream, and kafka-node 5.0.0 (an old client: Produce v0-2, Fetch
# v0-2; without its optional snappy addon).  Only
# tests/integration/kafkajs.sh, modern.sh and legacy_*.sh use them (they
# skip without).
#
# Environment: KRELAY_DEPS_DIR as above; KRELAY_SKIP_APT=1 skips the
# Debian packages, KRELAY_SKIP_NPM=1 the npm packages (e.g. behind a proxy
# that re-signs TLS, or with no access to the npm registry).
#
# Exit status: 0 done, 1 failed (a message says what), 2 bad usage.
set -eu

DEPS_DIR=${KRELAY_DEPS_DIR:-${HOME:-/root}/.cache/krelay}
KAFKAJS_VERSION=2.2.4
NODE_RDKAFKA_VERSION=3.6.1
KAFKA_NODE_VERSION=5.0.0

log() {
    echo "install-deps: $*" >&2
}

usage() {
    sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
}

# ---- the sets --------------------------------------------------------------
# Build and run krelay (the runtime libraries come with the -dev packages).
# libsystemd-dev: optional for configure (sd_notify through libsystemd;
# without it krelay writes sd_notify's datagram itself), installed so the
# build and tests/integration/daemon.sh use the library path.
PKGS_BUILD="build-essential autoconf automake pkg-config
            libevent-dev libssl-dev libinih-dev libjansson-dev libpcre2-dev
            zlib1g-dev liblz4-dev libzstd-dev libsnappy-dev libisal-dev
            libxxhash-dev libsystemd-dev"
# krelay --demo (krelay-demo-cluster) and the quickstart's client.
PKGS_DEMO="librdkafka-dev kcat"
# Tests only: Check (unit tests), Python and its Kafka clients
# (integration tests), valgrind (make check-valgrind), HAProxy (TLS
# brokers in front of the mock, make bench), the openssl program (test
# certificates, tests/tools/tls_certs.sh), git
# (tests/tools/audit_compare.sh, contrib/bench/ab.sh), the
# compression and SASL headers librdkafka 2.12 builds against (npm
# node-rdkafka).  (No libtool: configure.ac has no LT_INIT, autoreconf
# never runs libtoolize.)  man-db: tests/install.sh renders the man pages.
# openjdk-17-jdk-headless: javac and java for tests/principal_jdk.sh (the
# JDK's answers for TLS principals and mapping rules).  python3-snappy,
# python3-lz4, python3-xxhash, python3-zstandard: kafka-python's snappy,
# lz4 (magic 0's KAFKA-1493 framing needs xxhash) and zstd codecs (an old
# client's compressed message sets, a zstd topic read by an old
# consumer: tests/integration/legacy_*.sh).
PKGS_TESTS="check python3 python3-kafka python3-confluent-kafka valgrind
            haproxy openssl git zlib1g-dev libzstd-dev liblz4-dev
            libsasl2-dev man-db openjdk-17-jdk-headless python3-snappy
            python3-lz4 python3-xxhash python3-zstandard"
# Keep a Node.js that is already there (it may be newer than Debian's 18);
# otherwise take Debian's, with the headers node-gyp needs.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    PKGS_TESTS="$PKGS_TESTS nodejs npm libnode-dev"
fi

if [ "${1:-}" = --list ]; then
    case ${2:-} in
    build) set -- $PKGS_BUILD ;;
    demo) set -- $PKGS_BUILD $PKGS_DEMO ;;
    tests) set -- $PKGS_TESTS ;;
    all) set -- $PKGS_BUILD $PKGS_DEMO $PKGS_TESTS ;;
    *) usage >&2; exit 2 ;;
    esac
    printf '%s\n' "$@"
    exit 0
fi

apt_set=
npm_set=no
case ${1:---all} in
--build) apt_set=$PKGS_BUILD ;;
--demo) apt_set="$PKGS_BUILD $PKGS_DEMO" ;;
--tests) apt_set=$PKGS_TESTS; npm_set=yes ;;
--npm) npm_set=yes ;;
--all) apt_set="$PKGS_BUILD $PKGS_DEMO $PKGS_TESTS"; npm_set=yes ;;
-h | --help) usage; exit 0 ;;
*) usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { usage >&2; exit 2; }

if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    SUDO=none
fi

# ---- 1. Debian packages --------------------------------------------------
if [ -n "$apt_set" ] && [ "${KRELAY_SKIP_APT:-0}" != 1 ]; then
    missing=
    for p in $apt_set; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
             grep -q 'install ok installed'; then
            missing="$missing $p"
        fi
    done
    # Version floors: tests/data/principal/x500.txt holds the JDK's
    # answers as Debian 12's 17.0.21 gives them (17.0.15 read BMPString
    # as UTF-8 and T61String otherwise), so an older JDK already on the
    # machine is upgraded, not kept
    for pv in openjdk-17-jdk-headless:17.0.21; do
        p=${pv%%:*}
        case " $apt_set " in *" $p "*) ;; *) continue ;; esac
        v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) || continue
        [ -n "$v" ] || continue
        if dpkg --compare-versions "$v" lt "${pv#*:}"; then
            case " $missing " in *" $p "*) ;; *) missing="$missing $p" ;; esac
            log "$p $v is older than ${pv#*:}: upgrading it"
        fi
    done
    if [ -n "$missing" ]; then
        [ "$SUDO" != none ] ||
            { log "need root or sudo to install:$missing"; exit 1; }
        log "apt-get install$missing"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
        # shellcheck disable=SC2086
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends $missing
    else
        log "Debian packages (${1:---all}): all installed"
    fi
fi

# ---- 2. npm packages -----------------------------------------------------
if [ "$npm_set" != yes ] || [ "${KRELAY_SKIP_NPM:-0}" = 1 ]; then
    exit 0
fi
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    { log "node and npm are needed for the npm packages" \
          "(install-deps.sh --tests installs them)"; exit 1; }

# node-gyp must find Node's headers locally (no download): Debian's Node
# 18 has them in libnode-dev, newer Node packages in <prefix>/include/node.
NODE_PREFIX=$(dirname "$(dirname "$(command -v node)")")
if [ -f "$NODE_PREFIX/include/node/node_api.h" ]; then
    NODEDIR=$NODE_PREFIX
elif [ -f /usr/include/node/node_api.h ]; then
    NODEDIR=/usr
else
    log "Node.js headers not found (install libnode-dev or your Node's headers)"
    exit 1
fi

installed_version() {
    # $1: package; prints its installed version or nothing
    f=$DEPS_DIR/node_modules/$1/package.json
    [ -f "$f" ] || return 0
    # (node-rdkafka writes its version as "v3.6.1")
    node -e "console.log(require(process.argv[1]).version.replace(/^v/, ''))" \
        "$f" 2>/dev/null || true
}

mkdir -p "$DEPS_DIR"
cd "$DEPS_DIR"
[ -f package.json ] || npm init -y >/dev/null

want=
[ "$(installed_version kafkajs)" = "$KAFKAJS_VERSION" ] ||
    want="$want kafkajs@$KAFKAJS_VERSION"
[ "$(installed_version kafka-node)" = "$KAFKA_NODE_VERSION" ] ||
    want="$want kafka-node@$KAFKA_NODE_VERSION"
if [ "$(installed_version node-rdkafka)" != "$NODE_RDKAFKA_VERSION" ] ||
   [ ! -f node_modules/node-rdkafka/build/deps/pkgconfig/rdkafka.pc ] ||
   ! node -e "require('node-rdkafka')" >/dev/null 2>&1; then
    want="$want node-rdkafka@$NODE_RDKAFKA_VERSION"
fi
if [ -z "$want" ]; then
    log "npm packages in $DEPS_DIR: all installed"
    exit 0
fi
# node-rdkafka compiles librdkafka 2.12 (a few minutes on 2 cores).
log "npm install$want in $DEPS_DIR (nodedir $NODEDIR; node $(node --version))"
# `npm config set nodedir` is refused by npm 11: pass it in the environment.
# No parallel node-gyp (JOBS): librdkafka's generated Makefile races.
# --omit=optional: kafka-node's only optional dependency is the snappy
# addon (a native build that wants a download; the tests do not use
# kafka-node's snappy codec); kafkajs and node-rdkafka have none.
# shellcheck disable=SC2086
npm_config_nodedir=$NODEDIR \
    npm install --no-audit --no-fund --omit=optional --save $want
node -e "require('kafkajs'); require('node-rdkafka'); require('kafka-node')" ||
    { log "npm packages installed but do not load"; exit 1; }
log "done: NODE_PATH=$DEPS_DIR/node_modules"
