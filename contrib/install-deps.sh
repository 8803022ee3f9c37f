#!/bin/sh
# install-deps.sh - install everything needed to build and test krelay on
# Debian 12 (bookworm) or a close derivative.  Idempotent: run it again at
# any time.
#
#   1. Debian packages (apt-get; as root, or through sudo);
#   2. npm packages for the integration tests, into
#      ${KRELAY_DEPS_DIR:-$HOME/.cache/krelay} (outside the source tree):
#      kafkajs 2.2.4, and node-rdkafka 3.6.1, whose build also leaves a
#      librdkafka 2.12 prefix (headers, libraries, pkg-config) under
#      node_modules/node-rdkafka/build/deps/ for the modern mock upstream.
#
# Environment: KRELAY_DEPS_DIR as above; KRELAY_SKIP_APT=1 or
# KRELAY_SKIP_NPM=1 to skip a step.
set -eu

DEPS_DIR=${KRELAY_DEPS_DIR:-${HOME:-/root}/.cache/krelay}
KAFKAJS_VERSION=2.2.4
NODE_RDKAFKA_VERSION=3.6.1

log() {
    echo "install-deps: $*" >&2
}

if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    SUDO=none
fi

# ---- 1. Debian packages --------------------------------------------------
PKGS="build-essential autoconf automake libtool pkg-config
      libevent-dev libssl-dev libinih-dev check libjansson-dev
      librdkafka-dev kcat python3 python3-kafka python3-confluent-kafka
      haproxy zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev git
      valgrind man-db"
# Keep a Node.js that is already there (it may be newer than Debian's 18);
# otherwise take Debian's, with the headers node-gyp needs.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    PKGS="$PKGS nodejs npm libnode-dev"
fi

if [ "${KRELAY_SKIP_APT:-0}" != 1 ]; then
    missing=
    for p in $PKGS; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
             grep -q 'install ok installed'; then
            missing="$missing $p"
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
        log "Debian packages: all installed"
    fi
fi

# ---- 2. npm packages -----------------------------------------------------
if [ "${KRELAY_SKIP_NPM:-0}" = 1 ]; then
    exit 0
fi
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    { log "node and npm are needed for the npm packages"; exit 1; }

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
# shellcheck disable=SC2086
npm_config_nodedir=$NODEDIR \
    npm install --no-audit --no-fund --save $want
node -e "require('kafkajs'); require('node-rdkafka')" ||
    { log "npm packages installed but do not load"; exit 1; }
log "done: NODE_PATH=$DEPS_DIR/node_modules"
