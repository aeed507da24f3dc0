#!/bin/sh
# The load generators work, against fenceqd and beanstalkd (no speed asserted:
# benchmarks are `make bench`). Every workload, a few hundred jobs.
set -eu
bin=$1
dir=$(mktemp -d /tmp/fqbs-XXXXXX)
"$bin/fenceqd" --db "$dir/b.db" --listen "ipc://$dir/s" --log-level warn &
fq=$!
bs=
cleanup() { kill $fq $bs 2>/dev/null; wait $fq $bs 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
# beanstalkd on a port the kernel says is free now. Another test may take it
# before beanstalkd binds (a port derived from the pid once collided in CI:
# "bind(): Address already in use"), so a beanstalkd that exits is started
# again on a new port, until one listens.
listening() {
  /usr/bin/python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
    "$1" 2>/dev/null
}
for _ in $(seq 20); do
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  beanstalkd -l 127.0.0.1 -p "$port" -b "$dir" &
  bs=$!
  for _ in $(seq 100); do
    listening "$port" && break
    kill -0 $bs 2>/dev/null || break
    sleep 0.05
  done
  kill -0 $bs 2>/dev/null && listening "$port" && break
  kill $bs 2>/dev/null; wait $bs 2>/dev/null || true
  bs=
done
[ -n "$bs" ] || { echo "beanstalkd did not start on any of 20 free ports" >&2; exit 1; }
# Until fenceqd serves (its socket file exists) and beanstalkd listens: a
# fixed 0.3 s was too short for a sanitized daemon on a busy machine.
for _ in $(seq 200); do [ -S "$dir/s" ] && break; sleep 0.05; done
sleep 0.2
for wl in claim next combined pipeline contended renew-heavy; do
  "$bin/fenceq-bench" --endpoint "ipc://$dir/s" --workload $wl --jobs 300 --clients 3 --pid $fq
done
# Issue 32's budget workload: 300 parents, one child waiting on them all.
"$bin/fenceq-bench" --endpoint "ipc://$dir/s" --workload fanin --jobs 300 --clients 3 --children 1 \
  --pid $fq
# Issue 33's retention budget: a worker's round trips while 2,000 done jobs
# are removed (exits non-zero unless they all are).
"$bin/fenceq-retention" --endpoint "ipc://$dir/s" --jobs 2000 --window-ms 50
# The plain client (one shared context, no fenceq library) and the Python client.
for wl in next combined; do
  "$bin/fenceq-bench" --target plain --endpoint "ipc://$dir/s" --workload $wl --jobs 300 --clients 3
done
/usr/bin/python3 "$(dirname "$0")/../bench/python_client.py" --endpoint "ipc://$dir/s" --jobs 300 \
  --clients 3
for wl in claim next contended renew-heavy; do
  "$bin/fenceq-bench" --target beanstalkd --addr "127.0.0.1:$port" --workload $wl --jobs 300 \
    --clients 3 --pid $bs
done
"$bin/fenceq-bench" --target echo --endpoint "ipc://$dir/e" --jobs 300 --clients 3
"$bin/fenceq-bench" --target echo-durable --sync-file "$dir/wal" --endpoint "ipc://$dir/d" \
  --jobs 300 --clients 3
test -s "$dir/wal"  # it did write (and fsync) its file
echo "bench smoke: every workload ran to completion"
