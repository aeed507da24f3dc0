#!/usr/bin/env bash
# make demo's story, checked: B's result is the one stored, A's two late
# writes (complete and renew with fence 1) are refused, and the daemon's
# metrics count exactly those two refusals.
set -u
out=$("$(dirname "$0")/../scripts/demo.sh" "$1" 2>&1)
echo "$out"
fail() { echo "check_demo: $1"; exit 1; }
grep -q '"result":"paid once, by B","done":true' <<<"$out" || fail "B's result is not the stored one"
grep -qx 'fenceq_fenced_writes_total{op="complete",outcome="refused"} 1' <<<"$out" ||
  fail "A's late complete is not counted as refused"
grep -qx 'fenceq_fenced_writes_total{op="renew",outcome="refused"} 1' <<<"$out" ||
  fail "A's late renew is not counted as refused"
echo "check_demo: ok"
