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
stamp="$dir/.fenceq-configured"
want="$(printf '%s\n' "CC=${CC:-} CXX=${CXX:-}" "$@")"
if [ -f "$dir/CMakeCache.txt" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
cmake -S "$(dirname "$0")/.." -B "$dir" "$@" >/dev/null
printf '%s\n' "$want" >"$stamp"
