#!/bin/sh
# Installs the build into a temporary prefix, builds a consumer project with
# find_package(fenceq), and runs it.
set -eu
build=$1
src=$2
tmp=$(mktemp -d /tmp/fqpkg-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
out=$("$tmp/build/consumer")
test "$out" = "timeout"
echo "package ok: headers, library and config installed; consumer built and ran"
