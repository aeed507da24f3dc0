#!/usr/bin/env bash
# The stale-worker story, played with the fenceq tool against a real fenceqd
# on a temporary directory (server clock: real time, a 2-second lease).
set -u
bin=${1:-build/bin}
. "$(dirname "$0")/temp_daemon.sh"
start_temp_daemon "$bin" demo || exit 1

step() {  # prints the command, runs it, shows its output and a non-zero exit status
  local shown="" a
  for a in "$@"; do case "$a" in *" "*) shown="$shown \"$a\"" ;; *) shown="$shown $a" ;; esac; done
  echo "\$ fenceq$shown"
  "$bin/fenceq" "$@"
  local rc=$?
  [ $rc -ne 0 ] && echo "  (exit $rc)"
  return 0
}

echo "# fenceqd is serving $FENCEQ_ENDPOINT"
step enqueue invoice-42
echo "# worker A claims the job with a 2 s lease and gets fence 1"
step claim invoice-42 worker-a 2
echo "# ... worker A stalls (GC pause, network partition) for 3 s; its lease expires"
sleep 3
echo "# worker B claims the job: fence 2"
step claim invoice-42 worker-b 30
step complete invoice-42 worker-b 2 "paid once, by B"
echo "# worker A wakes up and writes its late result with fence 1: refused"
step complete invoice-42 worker-a 1 "paid again, by A"
step renew invoice-42 worker-a 1 30
echo "# the stored result is B's"
step state invoice-42
echo "# and the daemon counted A's two refused writes (fenceq metrics, or /metrics)"
echo "\$ fenceq metrics | grep 'outcome=\"refused\"' | grep -v ' 0\$'"
"$bin/fenceq" metrics | grep 'outcome="refused"' | grep -v ' 0$'
