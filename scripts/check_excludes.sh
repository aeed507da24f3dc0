#!/bin/sh
# Every alternative of a ctest -E pattern (the Makefile's SAN_EXCLUDE) must
# still name at least one test of the build: a renamed test would otherwise
# drop out of its exclusion without a word (issue 29's session renamed the
# retention test, and the ASan build then ran its Release-build ms bounds).
# Usage: check_excludes.sh BUILD_DIR PATTERN
set -eu
build=$1
pattern=$2
names=$(cd "$build" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p')
status=0
old_ifs=$IFS
IFS='|'
for alt in $pattern; do
  if ! printf '%s\n' "$names" | grep -Eq -- "$alt"; then
    echo "check_excludes: no test matches '$alt' (a test was renamed? fix the Makefile's pattern)" >&2
    status=1
  fi
done
IFS=$old_ifs
exit $status
