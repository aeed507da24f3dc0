#!/usr/bin/env bash
# The dashboard screenshots of docs/dashboard.md and the README (docs/dashboard-overview.png,
# docs/dashboard-jobs.png, docs/dashboard-job.png): a temporary fenceqd with
# the dashboard, three queues at work (one limited to two leases, one
# paused), a dead job, then tests/browser/shots.mjs in Debian's chromium.
# About 40 s.
#   scripts/dashboard_shots.sh [BIN_DIR] [OUT_PREFIX]
set -u
bin=$(cd "${1:-build/bin}" && pwd)
out=${2:-docs/dashboard}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/temp_daemon.sh"
users=$(mktemp)
chmod 600 "$users"
echo "ops:demo-password" > "$users"
port=18437
start_temp_daemon "$bin" shots --http-listen "127.0.0.1:$port" --http-auth-file "$users" || exit 1
export PATH="$bin:$PATH"
trap 'kill $(jobs -p) 2>/dev/null; rm -f "$users"' EXIT

fenceq limit emails --max-leased 2 >/dev/null
fenceq pause thumbnails >/dev/null
for n in $(seq 1 400); do echo "{\"id\":\"mail-$n\",\"queue\":\"emails\",\"payload\":\"to user$n@example.com\"}"; done > "$dir/mails.jsonl"
fenceq enqueue --from "$dir/mails.jsonl" >/dev/null
for n in $(seq 1 60); do fenceq enqueue "thumb-$n" --queue thumbnails --payload "photo-$n.jpg" >/dev/null; done
for n in $(seq 1 200); do echo "{\"id\":\"report-$n\",\"queue\":\"reports\"}"; done > "$dir/reports.jsonl"
fenceq enqueue --from "$dir/reports.jsonl" >/dev/null
fenceq enqueue mail-bounced --queue emails --max-attempts 1 \
  --payload '{"to": "ann@example.com", "template": "welcome"}' >/dev/null
fenceq claim mail-bounced worker-7 30 >/dev/null
fenceq fail mail-bounced worker-7 1 'SMTP 550: mailbox unavailable' >/dev/null
cat > "$dir/work.sh" <<'SH'
#!/bin/sh
cat >/dev/null
sleep 0.2
echo ok
SH
chmod +x "$dir/work.sh"
for w in 1 2 3; do
  ( cd "$dir" && fenceq work --queue emails --owner "mailer-$w" --wait 5 -- ./work.sh ) >/dev/null 2>&1 &
done
for w in 1 2; do
  ( cd "$dir" && fenceq work --queue reports --owner "reporter-$w" --wait 5 -- ./work.sh ) >/dev/null 2>&1 &
done
cd "$here/tests/browser" && node shots.mjs --url "http://127.0.0.1:$port" --user ops \
  --password demo-password --job mail-bounced --wait 25 --out "$here/$out"
echo "wrote $out-overview.png, $out-jobs.png and $out-job.png"
