#!/bin/sh
# fenceq-bench's PostgreSQL echo (`--target echo-pg`, the ceiling of a sidecar
# in make bench) runs to completion and commits once a batch: every one of
# its 300 round trips is answered, and its counter moved once for each batch
# it reports (300 / its mean batch), which lies between 100 (3 clients, one
# request in flight each: batches of at most 3) and 300 (batches of one). No
# speed is asserted. Needs ctest's cluster (the `pg` fixture).
set -eu
bin=$1
uri=${FENCEQ_TEST_PG_URI:-$(cat "$2/uri")}
dir=$(mktemp -d /tmp/fqep-XXXXXX)
schema=echo_$$_$(date +%s%N)
cleanup() {
  psql -X -q "$uri" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
psql -X -q "$uri" -c "CREATE SCHEMA $schema"
case $uri in
  *\?*) suri="$uri&options=-csearch_path%3D$schema" ;;
  *) suri="$uri?options=-csearch_path%3D$schema" ;;
esac
out=$("$bin/fenceq-bench" --target echo-pg --pg-uri "$suri" --endpoint "ipc://$dir/e" --jobs 300 \
  --clients 3)
echo "$out"
echo "$out" | grep -q '"completed": 300,' || { echo "not every round trip was answered" >&2; exit 1; }
n=$(psql -X -At "$uri" -c "SELECT n FROM $schema.fenceq_echo WHERE id = 1")
echo "commits: $n"
[ "$n" -ge 100 ] && [ "$n" -le 300 ] || { echo "expected 100 to 300 commits, found $n" >&2; exit 1; }
# Its mean batch is printed to two decimals: 300 / mean_batch within 1% of n.
echo "$out" | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
batches = r["completed"] / r["mean_batch"]
n = int(sys.argv[1])
sys.exit(0 if abs(batches - n) <= 0.01 * n else "%d commits for %.1f batches" % (n, batches))
' "$n"
# Without a database it refuses to start, with a clear error.
if "$bin/fenceq-bench" --target echo-pg --endpoint "ipc://$dir/f" --jobs 3 --clients 1 \
  2>"$dir/err"; then
  echo "echo-pg without --pg-uri ran" >&2; exit 1
fi
grep -q "echo-pg needs --pg-uri" "$dir/err"
echo "echo-pg: 300 round trips, $n commits"
