#!/usr/bin/env bash
# A producer enqueues jobs with payloads; two `fenceq work` workers drain the
# queue, each running a shell command per job; then queue control, unique
# keys, groups and workflows, and the stale-worker story with Go workers.
# Real daemon, temporary directory.
#
#   scripts/queue_demo.sh [BIN [SECTION...]]
#
# SECTION: thumbs, control, keys, groups, workflows, resume, go, tick (default: all,
# in that order; tick waits for the minutely schedule that control sets, up
# to a minute). tests/check_demo.sh plays `workflows` and `go` alone. `go`
# builds clients/go/examples/stale-worker offline (clients/go/offline.sh)
# and needs Debian's golang-go and golang-github-vmihailenco-msgpack.v5-dev,
# which `make test`'s packages include and `make demo-queue`'s do not: when
# they are missing the section says so and is skipped (nothing is installed).
set -u
bin=$(cd "${1:-build/bin}" && pwd)
. "$(dirname "$0")/temp_daemon.sh"
start_temp_daemon "$bin" queue || exit 1
export PATH="$bin:$PATH"

# A producer enqueues thumbnails; two workers drain the queue.
demo_thumbs() {
  echo '$ for n in 1 2 3 4 5 6; do fenceq enqueue thumb-$n --queue thumbs --payload "photo-$n.jpg"; done'
  for n in 1 2 3 4 5 6; do fenceq enqueue "thumb-$n" --queue thumbs --payload "photo-$n.jpg" >/dev/null; done
  echo '$ fenceq enqueue thumb-urgent --queue thumbs --payload "cover.jpg" --priority 10'
  fenceq enqueue thumb-urgent --queue thumbs --payload "cover.jpg" --priority 10 >/dev/null
  echo '$ fenceq enqueue thumb-broken --queue thumbs --payload "broken.jpg" --max-attempts 2'
  fenceq enqueue thumb-broken --queue thumbs --payload "broken.jpg" --max-attempts 2 >/dev/null

  cat > "$dir/thumb.sh" <<'SH'
#!/bin/sh
read photo
case "$photo" in broken*) echo "cannot decode $photo" >&2; exit 1 ;; esac
sleep 0.3
echo "thumbnail of $photo by $FENCEQ_OWNER (fence $FENCEQ_FENCE)"
SH
  chmod +x "$dir/thumb.sh"
  echo '$ fenceq work --queue thumbs --owner worker-1 --retry-in 0 --exit-when-empty --wait 1 -- ./thumb.sh &'
  echo '$ fenceq work --queue thumbs --owner worker-2 --retry-in 0 --exit-when-empty --wait 1 -- ./thumb.sh &'
  ( cd "$dir" && fenceq work --queue thumbs --owner worker-1 --retry-in 0 --exit-when-empty --wait 1 -- ./thumb.sh ) 2>&1 &
  w1=$!
  ( cd "$dir" && fenceq work --queue thumbs --owner worker-2 --retry-in 0 --exit-when-empty --wait 1 -- ./thumb.sh ) 2>&1 &
  w2=$!
  wait $w1 $w2
  echo '$ fenceq stats'
  fenceq stats
  echo '$ fenceq state thumb-urgent'
  fenceq state thumb-urgent
  echo '$ fenceq list --state dead'
  fenceq list --state dead
}

# --- Queue control (issue 18): a periodic job, a limited queue, a fenced cancel.
demo_control() {
  echo
  echo '# Queue control: a periodic job, a queue limited to 2 leases at once, a cancel.'
  echo "\$ fenceq schedule set minutely '* * * * *' --queue reports --payload 'sales report'"
  fenceq schedule set minutely '* * * * *' --queue reports --payload 'sales report' >/dev/null
  echo "\$ fenceq schedule set nightly '30 2 * * *' --tz Europe/Berlin --queue reports"
  fenceq schedule set nightly '30 2 * * *' --tz Europe/Berlin --queue reports >/dev/null
  echo '$ fenceq schedule list'
  fenceq schedule list

  echo '$ fenceq limit renders --max-leased 2'
  fenceq limit renders --max-leased 2 >/dev/null
  echo '$ for n in 1 2 3 4; do fenceq enqueue render-$n --queue renders --payload "scene-$n"; done'
  for n in 1 2 3 4; do fenceq enqueue "render-$n" --queue renders --payload "scene-$n" >/dev/null; done
  cat > "$dir/render.sh" <<'SH'
#!/bin/sh
read scene
sleep 0.6
echo "rendered $scene"
SH
  chmod +x "$dir/render.sh"
  for w in 1 2 3; do
    echo "\$ fenceq work --queue renders --owner render-$w --exit-when-empty --wait 2 -- ./render.sh &"
  done
  pids=""
  for w in 1 2 3; do
    ( cd "$dir" && fenceq work --queue renders --owner "render-$w" --exit-when-empty --wait 2 \
        -- ./render.sh ) 2>&1 &
    pids="$pids $!"
  done
  sleep 0.3
  echo '$ fenceq list --queue renders --state leased   # three workers, two leases'
  fenceq list --queue renders --state leased
  # shellcheck disable=SC2086
  wait $pids

  echo '$ fenceq enqueue render-long --queue renders --payload scene-long'
  fenceq enqueue render-long --queue renders --payload scene-long >/dev/null
  cat > "$dir/long.sh" <<'SH'
#!/bin/sh
sleep 30
echo "never stored"
SH
  chmod +x "$dir/long.sh"
  echo '$ fenceq work --queue renders --owner render-1 --ttl 3 --max-jobs 1 -- ./long.sh &'
  ( cd "$dir" && fenceq work --queue renders --owner render-1 --ttl 3 --max-jobs 1 -- ./long.sh ) 2>&1 &
  long=$!
  sleep 0.5
  echo '$ fenceq cancel render-long'
  fenceq cancel render-long
  wait $long
  echo '$ fenceq show render-long'
  fenceq show render-long
}

# --- Unique keys (issue 31): at most one waiting job per key; replace is debounce.
demo_keys() {
  echo
  echo '# Unique keys: one waiting job per key; --on-conflict replace keeps the last edit.'
  for v in 1 2 3; do
    echo "\$ fenceq enqueue index-doc42-v$v --queue search --key doc-42 --delay 2 --payload 'doc 42 v$v' --on-conflict replace"
    fenceq enqueue "index-doc42-v$v" --queue search --key doc-42 --delay 2 --payload "doc 42 v$v" \
      --on-conflict replace
  done
  echo '$ fenceq list --queue search   # one job, the first id, the last payload'
  fenceq list --queue search
  echo '$ fenceq show index-doc42-v1'
  fenceq show index-doc42-v1
}

# --- Groups (issue 31): within a priority, the groups of a queue take turns.
demo_groups() {
  echo
  echo '# Groups: 200 jobs of one customer do not hold back 5 of another (same priority).'
  echo '$ for n in $(seq 200); do echo "{\"id\": \"big-$n\"}"; done | fenceq enqueue --from - --queue tenants --group big'
  for n in $(seq 200); do echo "{\"id\": \"big-$n\"}"; done |
    fenceq enqueue --from - --queue tenants --group big
  echo '$ for n in 1 2 3 4 5; do fenceq enqueue small-$n --queue tenants --group small; done'
  for n in 1 2 3 4 5; do fenceq enqueue "small-$n" --queue tenants --group small >/dev/null; done
  echo '$ fenceq list --queue tenants --group small --limit 2'
  fenceq list --queue tenants --group small --limit 2
  echo "\$ fenceq work --queue tenants --owner worker-1 --exit-when-empty --wait 1 -- sh -c 'echo \$FENCEQ_JOB_ID >> claimed.txt' 2>/dev/null"
  ( cd "$dir" && fenceq work --queue tenants --owner worker-1 --exit-when-empty --wait 1 \
      -- sh -c 'echo "$FENCEQ_JOB_ID" >> claimed.txt' ) 2>/dev/null
  echo "\$ head -12 claimed.txt | paste -sd ' '   # the order the worker claimed them"
  head -12 "$dir/claimed.txt" | paste -sd ' '
  echo '$ grep -n small claimed.txt   # which of the 205 claims were the small jobs'
  grep -n small "$dir/claimed.txt"
}

# --- Workflows (issue 32): a job that waits for jobs; a stale complete unblocks nothing.
demo_workflows() {
  echo
  echo '# Workflows: a book waits for its three pages, then reads their results.'
  echo '$ for n in 1 2 3; do fenceq enqueue page-$n --queue pages --payload "chapter $n"; done'
  for n in 1 2 3; do fenceq enqueue "page-$n" --queue pages --payload "chapter $n" >/dev/null; done
  echo '$ fenceq enqueue book --queue books --after page-1,page-2,page-3'
  fenceq enqueue book --queue books --after page-1,page-2,page-3 >/dev/null
  echo '$ fenceq list --queue books --state blocked   # the book waits for its pages'
  fenceq list --queue books --state blocked
  cat > "$dir/page.sh" <<'SH'
#!/bin/sh
read chapter
printf '%s, typeset by %s' "$chapter" "$FENCEQ_OWNER"
SH
  chmod +x "$dir/page.sh"
  echo '$ fenceq work --queue pages --owner typesetter --exit-when-empty --wait 0.3 -- ./page.sh'
  ( cd "$dir" && fenceq work --queue pages --owner typesetter --exit-when-empty --wait 0.3 \
      -- ./page.sh ) 2>&1
  # The last page's complete made the book ready, in the same transaction.
  echo '$ fenceq work --queue books --owner binder --max-jobs 1 --exit-when-empty --wait 1 -- fenceq results page-1 page-2 page-3'
  fenceq work --queue books --owner binder --max-jobs 1 --exit-when-empty --wait 1 \
    -- fenceq results page-1 page-2 page-3 2>&1
  echo '$ fenceq state book   # its result: the pages'"'"' results, read in one round trip'
  fenceq state book

  echo
  echo '# A parent whose worker stalls: its late complete is refused and unblocks nothing.'
  echo '$ fenceq enqueue index --queue pages --payload "the index"'
  fenceq enqueue index --queue pages --payload "the index" >/dev/null
  echo '$ fenceq enqueue print-run --queue books --after book,index'
  fenceq enqueue print-run --queue books --after book,index >/dev/null
  echo '$ fenceq claim index worker-a 1   # a 1 s lease: fence 1'
  fenceq claim index worker-a 1
  echo '# ... worker-a stalls for 1.5 s; its lease runs out'
  sleep 1.5
  echo '$ fenceq claim index worker-b 30   # fence 2'
  fenceq claim index worker-b 30
  echo '$ fenceq complete index worker-a 1 "index by A"   # the old fence: refused'
  fenceq complete index worker-a 1 "index by A"
  echo "  (exit $?)"
  echo '$ fenceq list --queue books --state blocked   # print-run still waits'
  fenceq list --queue books --state blocked
  echo '$ fenceq complete index worker-b 2 "index by B"'
  fenceq complete index worker-b 2 "index by B"
  echo '$ fenceq results index print-run   # B'"'"'s complete unblocked print-run'
  fenceq results index print-run
}

# --- The stale-worker story with Go workers (issue 35): A, a Go worker, stops
# for longer than its lease; B, a fenceq.Worker in Go, takes the job over; A's
# late complete and renew carry the old fence and are refused.
GO_PKGS="golang-go golang-github-vmihailenco-msgpack.v5-dev"
demo_go() {
  echo
  echo '# Go workers: A freezes past its lease, B takes the job over, A'"'"'s late writes are refused.'
  local repo gocode=/usr/share/gocode/src/github.com/vmihailenco/msgpack/v5
  repo=$(cd "$(dirname "$0")/.." && pwd)
  if ! command -v go >/dev/null 2>&1 || [ ! -f "$gocode/go.mod" ]; then
    echo "# (skipped: the Go workers need Debian's $GO_PKGS;"
    echo "#  apt install them, or FENCEQ_EXTRA_PKGS=\"$GO_PKGS\" scripts/deps.sh run, then run this again)"
    return 0
  fi
  echo '# (A and B: clients/go/examples/stale-worker, built with clients/go/offline.sh)'
  local log
  if ! log=$(cd "$repo/clients/go" && ./offline.sh build -o "$dir/stale-worker" ./examples/stale-worker 2>&1); then
    echo "$log"
    echo "queue_demo: building the Go worker failed" >&2
    return 1
  fi
  echo '$ fenceq enqueue pay-7 --queue payments --payload "invoice 7"'
  fenceq enqueue pay-7 --queue payments --payload "invoice 7" >/dev/null
  echo '$ ./stale-worker a payments &   # worker A (Go): a 1 s lease, then it freezes'
  ( cd "$dir" && exec ./stale-worker a payments ) &
  local a=$! st=""
  # A stops itself right after its claim (SIGSTOP); 30 s at most.
  for _ in $(seq 300); do
    st=$(awk '{print $3}' "/proc/$a/stat" 2>/dev/null)
    case $st in T | Z | "") break ;; esac
    sleep 0.1
  done
  if [ "$st" != T ]; then
    kill "$a" 2>/dev/null
    wait "$a"
    echo "queue_demo: worker A did not claim the job and stop (exit $?)" >&2
    return 1
  fi
  echo '$ sleep 1.5   # A is frozen (a GC pause, a frozen VM): no renewal, its lease runs out'
  sleep 1.5
  echo '$ ./stale-worker b payments   # worker B (Go, a fenceq.Worker) takes the job over'
  ( cd "$dir" && ./stale-worker b payments ) 2>&1
  echo '$ kill -CONT %1   # A goes on, with its old fence'
  kill -CONT "$a"
  wait "$a"
  echo "  (worker A exited $?)"
  echo '$ fenceq state pay-7   # B'"'"'s result, fence 2'
  fenceq state pay-7
}

# --- Durable steps and signals (issue 60): a retried job resumes after its
# saved step, a stalled worker cannot save it again, and the job waits for a
# webhook without holding a worker.
demo_resume() {
  echo
  echo '# Steps and signals: charge once, resume after a failure, wait for the webhook.'
  echo "\$ fenceq enqueue order-7 --queue orders --payload 'order 7: 30 EUR'"
  fenceq enqueue order-7 --queue orders --payload 'order 7: 30 EUR' >/dev/null
  echo '$ fenceq claim order-7 worker-a 1            # A takes it, a 1 s lease'
  fa=$(fenceq claim order-7 worker-a 1)
  echo "$fa"
  echo "\$ fenceq step-save order-7 worker-a $fa charge ch_1Nq   # A charged the card: saved"
  fenceq step-save order-7 worker-a "$fa" charge ch_1Nq
  echo '$ sleep 1.2                                  # A stalls (a GC pause, a lost network)...'
  sleep 1.2
  echo '$ fenceq claim order-7 worker-b 30           # ...its lease ends; B takes the job over'
  fb=$(fenceq claim order-7 worker-b 30)
  echo "$fb"
  echo "\$ fenceq step-save order-7 worker-a $fa charge ch_2xx   # A wakes and charges again: refused"
  fenceq step-save order-7 worker-a "$fa" charge ch_2xx
  echo "  (exit $?: A's fence $fa is stale, and a saved step is never overwritten)"
  echo "\$ fenceq step-save order-7 worker-b $fb email sent       # B skipped charge (saved), sent the email"
  fenceq step-save order-7 worker-b "$fb" email sent
  echo "\$ fenceq suspend order-7 worker-b $fb 3600   # B waits for the shipping webhook, holding no lease"
  token=$(fenceq suspend order-7 worker-b "$fb" 3600)
  echo "$token"
  echo '$ fenceq show order-7'
  fenceq show order-7
  echo "\$ fenceq signal $token shipped   # the webhook"
  fenceq signal "$token" shipped
  echo "\$ fenceq signal $token shipped   # the same webhook, delivered twice: refused"
  fenceq signal "$token" shipped
  echo "  (exit $?)"
  echo '$ fenceq claim-next orders worker-c 30      # C resumes: the steps and the signal come with the job'
  job=$(fenceq claim-next orders worker-c 30)
  echo "$job"
  fc=$(printf '%s' "$job" | sed -n 's/.*"fence": *\([0-9]*\).*/\1/p')
  echo "\$ fenceq complete order-7 worker-c $fc 'charged ch_1Nq, emailed, shipped'"
  fenceq complete order-7 worker-c "$fc" 'charged ch_1Nq, emailed, shipped'
  echo '$ fenceq state order-7'
  fenceq state order-7
}

# The minutely schedule's first tick: at most a minute after it was set.
demo_tick() {
  now=$(date +%s)
  left=$(( 60 - now % 60 + 1 ))
  echo "\$ sleep $left; fenceq list --queue reports   # the minutely tick came"
  sleep "$left"
  fenceq list --queue reports
  echo '$ fenceq stats'
  fenceq stats
}

sections=("${@:2}")
[ ${#sections[@]} -gt 0 ] || sections=(thumbs control keys groups workflows resume go tick)
for section in "${sections[@]}"; do
  if ! declare -F "demo_$section" >/dev/null; then
    echo "queue_demo: no section '$section' (thumbs, control, keys, groups, workflows, resume, go, tick)" >&2
    exit 2
  fi
done
for section in "${sections[@]}"; do "demo_$section"; done
