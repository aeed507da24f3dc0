# Sourced by the consumer checks (sh): start_daemon FENCEQD DIR starts fenceqd
# on DIR/fenceq.db and ipc://DIR/fenceqd.sock ($endpoint), waits (at most 5 s)
# for its socket, and leaves its pid in $daemon; stop_daemon stops it. It
# also exits by itself after 60 s without a request, should this script die
# without stopping it.
start_daemon() {
  endpoint="ipc://$2/fenceqd.sock"
  "$1" --db "$2/fenceq.db" --listen "$endpoint" --log-level warn --idle-exit 60 &
  daemon=$!
  i=0
  until [ -S "$2/fenceqd.sock" ]; do
    i=$((i + 1))
    if [ "$i" -gt 50 ] || ! kill -0 "$daemon" 2>/dev/null; then
      echo "FAIL: fenceqd did not start ($1)" >&2
      return 1
    fi
    sleep 0.1
  done
}
stop_daemon() {
  if [ -n "${daemon:-}" ]; then
    kill "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
    daemon=
  fi
}
