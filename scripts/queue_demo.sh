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
