#!/usr/bin/env bash
# make demo's story, checked: B's result is the one stored, A's two late
# writes (complete and renew with fence 1) are refused, and the daemon's
# metrics count exactly those two refusals.
# Then make demo-queue's workflows section (scripts/queue_demo.sh BIN
# workflows; the whole demo waits up to a minute for a schedule), checked:
# the book is blocked until its pages are done and then stores their
# results; worker-a's complete with the stale fence is refused and leaves
# print-run blocked; worker-b's complete makes it ready.
# Then its `go` section (issue 35), checked: worker A (Go) claims with fence
# 1 and freezes, worker B (a Go fenceq.Worker) completes the job with fence
# 2, A's late complete and renew with fence 1 are both refused, and the
# stored result is B's. queue_demo.sh skips that section only when Debian's
# Go packages are missing (make test installs them).
set -u
out=$("$(dirname "$0")/../scripts/demo.sh" "$1" 2>&1)
echo "$out"
fail() { echo "check_demo: $1"; exit 1; }
grep -q '"result":"paid once, by B","done":true' <<<"$out" || fail "B's result is not the stored one"
grep -qx 'fenceq_fenced_writes_total{op="complete",outcome="refused"} 1' <<<"$out" ||
  fail "A's late complete is not counted as refused"
grep -qx 'fenceq_fenced_writes_total{op="renew",outcome="refused"} 1' <<<"$out" ||
  fail "A's late renew is not counted as refused"

wf=$("$(dirname "$0")/../scripts/queue_demo.sh" "$1" workflows 2>&1)
echo "$wf"
# What the command shown as `$ CMD` printed: the lines after it, up to the
# next command, comment or blank line (nothing when CMD was not shown).
printed() { awk -v cmd="\$ $1" '$0 == cmd {on = 1; next} on && /^(\$ |# |$)/ {exit} on' <<<"$wf"; }
# only_blocked ID CMD: CMD listed one job, ID, blocked.
only_blocked() {
  local rows
  rows=$(printed "$2")
  grep -q "^{\"id\":\"$1\",\"queue\":\"books\",\"state\":\"blocked\"," <<<"$rows" &&
    [ "$(wc -l <<<"$rows")" = 1 ]
}
only_blocked book 'fenceq list --queue books --state blocked   # the book waits for its pages' ||
  fail "the book is not the one blocked job before its pages are done"
book=$(printed "fenceq state book   # its result: the pages' results, read in one round trip")
for n in 1 2 3; do
  grep -qF "chapter $n, typeset by typesetter" <<<"$book" ||
    fail "the book's result lacks page $n: $book"
done
grep -q '"done":true}$' <<<"$book" || fail "the book is not done: $book"
refused=$(printed 'fenceq complete index worker-a 1 "index by A"   # the old fence: refused')
[ "$refused" = "$(printf 'false\n  (exit 1)')" ] ||
  fail "worker-a's complete with the stale fence is not refused: $refused"
only_blocked print-run 'fenceq list --queue books --state blocked   # print-run still waits' ||
  fail "the refused complete unblocked print-run"
[ "$(printed 'fenceq complete index worker-b 2 "index by B"')" = true ] ||
  fail "worker-b's complete is not applied"
after_b=$(printed "fenceq results index print-run   # B's complete unblocked print-run")
[ "$after_b" = '{"index":{"state":"done","result":"index by B"},'`
               `'"print-run":{"state":"ready","result":null}}' ] ||
  fail "B's result is not the stored one, or print-run is not ready after it: $after_b"

go_out=$("$(dirname "$0")/../scripts/queue_demo.sh" "$1" go 2>&1)
echo "$go_out"
if grep -q '^# (skipped: the Go workers need' <<<"$go_out"; then
  echo "check_demo: the Go workers' section was skipped (no Go toolchain or msgpack sources)"
else
  for line in 'worker-a (Go): claimed pay-7 with fence 1 and a 1 s lease; it freezes now (SIGSTOP: no renewal)' \
              'worker-b (Go): pay-7 with fence 2: completed, result "paid once, by B"' \
              'worker-a (Go): woke up; Complete(pay-7, fence 1) = false' \
              'worker-a (Go): Renew(pay-7, fence 1) = false' \
              '  (worker A exited 0)'; do
    grep -qxF "$line" <<<"$go_out" || fail "the Go workers' story lacks the line: $line"
  done
  state=$(awk '$0 == "$ fenceq state pay-7   # B'"'"'s result, fence 2" {getline; print}' <<<"$go_out")
  grep -q '^{"id":"pay-7","owner":"worker-b",.*"fence":2,"result":"paid once, by B","done":true}$' \
    <<<"$state" || fail "the stored result is not B's: $state"
fi
# Its `resume` section (issue 60): A's late save of charge with its stale
# fence is refused, the job waits suspended holding no lease, one signal of
# its token wakes it (the second is refused), and C's claim carries the
# saved steps and the signal.
rs=$("$(dirname "$0")/../scripts/queue_demo.sh" "$1" resume 2>&1)
echo "$rs"
wf=$rs
[ "$(printed 'fenceq step-save order-7 worker-a 1 charge ch_2xx   # A wakes and charges again: refused')" = \
  "$(printf 'false\n  (exit 1: A'"'"'s fence 1 is stale, and a saved step is never overwritten)')" ] ||
  fail "A's late save of charge is not refused"
grep -q '^{"id":"order-7","queue":"orders","state":"suspended",.*"steps":{"charge":"ch_1Nq","email":"sent"}' \
  <<<"$rs" || fail "the job is not suspended with its two steps"
grep -qx 'true' <<<"$(printed "$(grep -o '^\$ fenceq signal [0-9a-f]* shipped   # the webhook$' <<<"$rs" | cut -c3-)")" ||
  fail "the signal did not wake the job"
grep -q '^{"id":"order-7","fence":3,.*"steps":{"charge":"ch_1Nq","email":"sent"},"signal":"shipped"}$' \
  <<<"$rs" || fail "C's claim does not carry the steps and the signal"
grep -q '^{"id":"order-7","owner":"worker-c",.*"fence":3,"result":"charged ch_1Nq, emailed, shipped","done":true}$' \
  <<<"$rs" || fail "C's result is not the stored one"
echo "check_demo: ok"
