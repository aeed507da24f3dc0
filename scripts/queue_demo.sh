#!/usr/bin/env bash
# A producer enqueues jobs with payloads; two `fenceq work` workers drain the
# queue, each running a shell command per job. Real daemon, temporary directory.
set -u
bin=$(cd "${1:-build/bin}" && pwd)
. "$(dirname "$0")/temp_daemon.sh"
start_temp_daemon "$bin" queue || exit 1
export PATH="$bin:$PATH"

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

# --- Queue control (issue 18): a periodic job, a limited queue, a fenced cancel.
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

# --- Unique keys (issue 31): at most one waiting job per key; replace is debounce.
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

# --- Groups (issue 31): within a priority, the groups of a queue take turns.
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

# The minutely schedule's first tick: at most a minute after it was set.
now=$(date +%s)
left=$(( 60 - now % 60 + 1 ))
echo "\$ sleep $left; fenceq list --queue reports   # the minutely tick came"
sleep "$left"
fenceq list --queue reports
echo '$ fenceq stats'
fenceq stats
