#!/usr/bin/env bash
# Fencing a store that fenceq does not own (contract C2.4): a second database
# keeps, per row, the highest fence that wrote it, and refuses a lower one.
# Worker A stalls past its lease; B takes over and writes; A's late write
# reaches the outside store and is refused there too.
#
#   examples/fence-outside-store/run.sh [build/bin]
set -eu
bin=${1:-build/bin}
dir=$(mktemp -d /tmp/fenceq-outside-XXXXXX)
export FENCEQ_ENDPOINT="ipc://$dir/fenceqd.sock"
"$bin/fenceqd" --db "$dir/fenceq.db" --listen "$FENCEQ_ENDPOINT" --clock client \
  --log-level warn &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do "$bin/fenceq" --timeout 0.2 ping >/dev/null 2>&1 && break; done
fq() { "$bin/fenceq" "$@"; }

outside="$dir/payments.db"
sqlite3 "$outside" "CREATE TABLE payments(invoice TEXT PRIMARY KEY, paid_by TEXT,
                                          fence INTEGER NOT NULL)"

# The one write to the outside store: applied only with a fence higher than
# the one that wrote the row last. Prints the number of rows changed.
pay() {  # invoice worker fence
  sqlite3 "$outside" "INSERT INTO payments(invoice, paid_by, fence) VALUES('$1', '$2', $3)
    ON CONFLICT(invoice) DO UPDATE SET paid_by = excluded.paid_by, fence = excluded.fence
    WHERE payments.fence < excluded.fence;
    SELECT changes();"
}

fq enqueue invoice-42 >/dev/null
fence_a=$(fq --now 100 claim invoice-42 worker-a 30)
echo "worker A claims invoice-42: fence $fence_a; then stalls"
fence_b=$(fq --now 131 claim invoice-42 worker-b 30)
echo "worker B claims invoice-42 after A's lease ended: fence $fence_b"
echo "B: fenceq check says its lease is current: $(fq --now 132 check invoice-42 worker-b "$fence_b")"
echo "B pays: rows changed = $(pay invoice-42 worker-b "$fence_b")"
fq --now 133 complete invoice-42 worker-b "$fence_b" paid >/dev/null
echo "A wakes up: fenceq check says its lease is current: $(fq --now 134 check invoice-42 worker-a "$fence_a" || true)"
echo "A pays anyway (it did not check): rows changed = $(pay invoice-42 worker-a "$fence_a") (refused by the fence)"
echo "outside store: $(sqlite3 "$outside" "SELECT invoice, paid_by, fence FROM payments")"
