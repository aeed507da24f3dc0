# Sourced by the demo scripts: start_temp_daemon BIN NAME [FENCEQD ARGS...]
# starts fenceqd on a fresh temporary directory ($dir), exports
# FENCEQ_ENDPOINT for the fenceq tool, waits until it answers, and stops it
# and removes the directory when the script exits.
start_temp_daemon() {
  local bin=$1 name=$2
  shift 2
  dir=$(mktemp -d "/tmp/fenceq-$name-XXXXXX")
  export FENCEQ_ENDPOINT="ipc://$dir/fenceqd.sock"
  "$bin/fenceqd" --db "$dir/fenceq.db" --listen "$FENCEQ_ENDPOINT" --log-level warn "$@" &
  daemon=$!
  trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$dir"' EXIT
  # No socket yet fails at once (unreachable): retry every 0.1 s, 10 s at most.
  for _ in $(seq 100); do "$bin/fenceq" --timeout 0.2 ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "fenceqd did not start" >&2
  return 1
}
