#!/bin/sh
# A second `make build` compiles nothing (issue 30: it rebuilt the whole tree,
# 7.5 minutes): configuring this source tree a second time leaves every
# object's flags and every link line as the first configure wrote them, and
# scripts/configure.sh does not configure a configured tree again.
set -eu
src=$1
dir=$(mktemp -d /tmp/fqcfg-XXXXXX)
trap 'rm -rf "$dir"' EXIT
flags() { find "$dir" \( -name flags.make -o -name link.txt \) | sort | xargs md5sum; }
"$src/scripts/configure.sh" "$dir" -DCMAKE_BUILD_TYPE=Release
first=$(flags)
[ -n "$first" ] || { echo "no flags.make written by the configure" >&2; exit 1; }
cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
second=$(flags)
if [ "$first" != "$second" ]; then
  echo "a second configure changed the generated flags (every object would be rebuilt):" >&2
  printf '%s\n' "$first" >"$dir/first"
  printf '%s\n' "$second" >"$dir/second"
  diff "$dir/first" "$dir/second" >&2 || true
  exit 1
fi
# scripts/configure.sh: no configure at all when the arguments are the same,
# one when they changed.
touch -d '2000-01-01' "$dir/CMakeCache.txt"
"$src/scripts/configure.sh" "$dir" -DCMAKE_BUILD_TYPE=Release
[ "$(stat -c %Y "$dir/CMakeCache.txt")" = "$(date -d '2000-01-01' +%s)" ] ||
  { echo "scripts/configure.sh configured an already configured tree again" >&2; exit 1; }
"$src/scripts/configure.sh" "$dir" -DCMAKE_BUILD_TYPE=Debug
grep -q '^CMAKE_BUILD_TYPE:STRING=Debug$' "$dir/CMakeCache.txt" ||
  { echo "scripts/configure.sh did not configure again for new arguments" >&2; exit 1; }
echo "configure twice: the same flags; configured once per set of arguments"
