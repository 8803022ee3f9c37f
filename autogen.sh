#!/bin/sh
# Generate ./configure from a git checkout (tarballs ship it).
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --install --force
