#!/bin/sh
# Issue 55's ten-minute deadlock run (3 PostgreSQL sidecars, 16 clients,
# tests/app/test_pg_deadlocks.py) beside the suites of `make test` that do not
# time anything, so that it costs make test no wall-clock time of its own.
#
#   scripts/soak_beside.sh start DIR SECONDS   a cluster of its own in DIR/pg,
#                                              then the run, in the background
#   scripts/soak_beside.sh wait DIR            waits for the run, prints its
#                                              summary, stops the cluster; exits
#                                              with the run's status
#   scripts/soak_beside.sh stop DIR            ends the run now (a suite failed)
#
# Everything of the run is at nice 19: the cluster's server and its backends
# (they inherit the postmaster's niceness), the three fenceqd and the clients.
# It takes the CPU the other suites leave idle, and they keep their own pace.
# Its database commits with synchronous_commit off: the locks a deadlock needs
# are the same, but its WAL flushes do not queue before the other suites'
# fsyncs. The suites that time latencies run after it has stopped (make
# test-timed).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 start DIR SECONDS | wait DIR | stop DIR" >&2; exit 2; }
cmd=$1
dir=$2
here=$(cd "$(dirname "$0")/.." && pwd)
: "${FENCEQD:?set FENCEQD to the fenceqd binary}"

case $cmd in
  start)
    seconds=${3:?seconds}
    rm -rf "$dir"
    mkdir -p "$dir"
    nice -n 19 "$here/scripts/pg_cluster.sh" start "$dir/pg" >/dev/null
    uri=$(cat "$dir/pg/uri")
    /usr/bin/python3 - "$uri" <<'EOF'
import sys, psycopg2
conn = psycopg2.connect(sys.argv[1])
conn.autocommit = True
conn.cursor().execute("ALTER DATABASE fenceq_test SET synchronous_commit = off")
EOF
    # A process group of its own (setsid), so that stop ends all of it.
    # The group's leader writes its own pid (setsid forks when its caller
    # leads a group, so $! would name a process already gone).
    FENCEQ_TEST_PG_DIR="$dir/pg" FENCEQ_DEADLOCK_SECONDS=$seconds setsid sh -c '
      echo $$ >"$2/pid"
      rc=0
      nice -n 19 /usr/bin/python3 -m pytest -q -s -p no:cacheprovider "$1" >"$2/run.log" 2>&1 || rc=$?
      echo "$rc" >"$2/rc"' soak "$here/tests/app/test_pg_deadlocks.py" "$dir" </dev/null &
    while [ ! -s "$dir/pid" ]; do sleep 0.1; done
    echo "deadlock run: ${seconds} s on 3 sidecars in the background (log: $dir/run.log)"
    ;;
  wait)
    while [ ! -f "$dir/rc" ]; do sleep 1; done
    rc=$(cat "$dir/rc")
    "$here/scripts/pg_cluster.sh" stop "$dir/pg" >/dev/null 2>&1 || true
    if [ "$rc" -eq 0 ]; then
      echo "deadlock run: $(grep -E 'requests in .* deadlocks' "$dir/run.log" | tail -n 1)"
    else
      echo "deadlock run FAILED (status $rc):" >&2
      tail -n 60 "$dir/run.log" >&2
    fi
    exit "$rc"
    ;;
  stop)
    if [ -f "$dir/pid" ] && [ ! -f "$dir/rc" ]; then
      pkill -TERM -g "$(cat "$dir/pid")" 2>/dev/null || true
      sleep 2
      pkill -KILL -g "$(cat "$dir/pid")" 2>/dev/null || true
    fi
    "$here/scripts/pg_cluster.sh" stop "$dir/pg" >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: $0 start DIR SECONDS | wait DIR | stop DIR" >&2
    exit 2
    ;;
esac
