#!/bin/sh
# scripts/configure.sh DIR [CMAKE ARGS...]: configures the build directory DIR
# from this repository, only when it was never configured or was configured
# with other arguments. Once configured, `cmake --build` runs the configure
# step again by itself when a CMakeLists.txt changes; configuring again for
# nothing costs seconds and, with some pkg-config files, changed the
# generated flags and rebuilt everything (issue 30).
set -eu
dir=$1
shift
# ccache, when installed (make test installs it), compiles through its cache,
# which the Makefile keys by paths relative to the checkout (CCACHE_BASEDIR):
# a clone elsewhere, such as tests/first_hour.sh's, reuses these objects.
# Adding or dropping it configures again but recompiles nothing.
if command -v ccache >/dev/null 2>&1; then
  set -- "$@" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
# A folder configured by another generator (-G; the sanitized builds moved
# from Makefiles to Ninja) is configured afresh: CMake refuses to switch one
# in place.
gen="Unix Makefiles"
for a in "$@"; do case "$a" in -G?*) gen=${a#-G} ;; esac; done
if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$gen" "$dir/CMakeCache.txt"; then
  rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
fi
stamp="$dir/.fenceq-configured"
want="$(printf '%s\n' "CC=${CC:-} CXX=${CXX:-}" "$@")"
if [ -f "$dir/CMakeCache.txt" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
cmake -S "$(dirname "$0")/.." -B "$dir" "$@" >/dev/null
printf '%s\n' "$want" >"$stamp"
