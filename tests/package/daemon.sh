# Sourced by the consumer checks (sh). fail MESSAGE: says it, exits 1.
# consumer_tmp PREFIX: a fresh folder in $tmp, removed (and the daemon
# stopped) when the script exits. abs PATH: PATH made absolute.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
consumer_tmp() {
  tmp=$(mktemp -d "/tmp/$1-XXXXXX")
  trap 'stop_daemon; rm -rf "$tmp"' EXIT
}
abs() {
  case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}

# start_daemon FENCEQD DIR starts fenceqd
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
