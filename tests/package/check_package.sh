#!/bin/sh
# The installed C++ client, as a user's project gets it: installs the build
# into a temporary prefix, builds a consumer with find_package(fenceq) and
# again with nothing but `pkg-config --cflags --libs fenceq` (neither chooses a
# C++ standard: the fenceq::client target and fenceq.pc carry C++20), and runs
# each against the installed fenceqd.
# Usage: check_package.sh BUILD_DIR PACKAGE_TEST_DIR
set -eu
build=$1
src=$2
# shellcheck source=daemon.sh  # start_daemon sets $endpoint and $daemon
. "$src/daemon.sh"
tmp=$(mktemp -d /tmp/fqpkg-XXXXXX)
trap 'stop_daemon; rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# run_consumer BINARY JOB: the consumer's job completed, as the daemon says.
run_consumer() {
  out=$(timeout 30 "$1" "$endpoint" "$2") || fail "$1 $2: exit $?"
  echo "$out"
  test "$out" = "state: id=$2 fence=1 result=paid done=1" || fail "$1: unexpected output"
}

p=$tmp/prefix
cmake --install "$build" --prefix "$p" >/dev/null
start_daemon "$p/bin/fenceqd" "$tmp"

cmake -S "$src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$p" >/dev/null
cmake --build "$tmp/build" >/dev/null
run_consumer "$tmp/build/consumer" job-cmake

pc=$(find "$p" -name fenceq.pc)
test -n "$pc" || fail "no fenceq.pc installed"
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs fenceq) || fail "pkg-config fenceq"
case " $flags " in *" -std=c++20 "*) ;; *) fail "fenceq.pc's flags lack -std=c++20: $flags" ;; esac
# shellcheck disable=SC2086
g++ -o "$tmp/pc_consumer" "$src/consumer.cpp" $flags || fail "no build with: $flags"
run_consumer "$tmp/pc_consumer" job-pkg-config
echo "package ok: installed headers, library, CMake config and fenceq.pc; both consumers ran"
