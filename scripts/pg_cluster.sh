#!/bin/sh
# A throw-away PostgreSQL cluster for the tests (issue 9): initdb into DIR/data
# (trust authentication, locale C, UTF8), listening on a Unix socket in DIR
# only (no TCP), with the server's durability settings left at their defaults.
#
#   scripts/pg_cluster.sh start DIR     initdb if needed, start, create database
#                                       fenceq_test; prints the URI (also in DIR/uri)
#   scripts/pg_cluster.sh stop DIR      pg_ctl stop -m fast
#   scripts/pg_cluster.sh restart DIR   pg_ctl restart -m fast (for fault tests)
#   scripts/pg_cluster.sh destroy DIR   stop, then remove DIR
#   scripts/pg_cluster.sh uri DIR       prints the URI
#
# initdb and postgres refuse to run as root: as root the server runs as the
# `postgres` user (DIR is then owned by it; its parents must be searchable by
# it). Otherwise it runs as the calling user. Either way the superuser is named
# `postgres`. PGBIN overrides where the server binaries are looked up.
set -eu

usage() {
  echo "usage: $0 start|stop|restart|destroy|uri DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
case $2 in
  /*) dir=$2 ;;
  *) dir=$(pwd)/$2 ;;
esac
dir=${dir%/}
port=5432

# Where the server lives (its data, socket and log): DIR itself, or, when the
# postgres user could not reach DIR (root working under a 0700 home) or DIR
# is too long for a Unix socket path, a directory under /tmp named in
# DIR/server. DIR always holds the uri file.
srv=$dir
[ -f "$dir/server" ] && srv=$(cat "$dir/server")
set_paths() {
  data=$srv/data
  log=$srv/postgres.log
}
set_paths

if [ -z "${PGBIN:-}" ]; then
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$PGBIN" ] || PGBIN=$(dirname "$(command -v pg_ctl 2>/dev/null || echo /usr/bin/pg_ctl)")
fi
[ -x "$PGBIN/pg_ctl" ] || { echo "pg_cluster: no PostgreSQL server binaries (PGBIN=$PGBIN)" >&2; exit 1; }

if [ "$(id -u)" -eq 0 ]; then
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi

# postgresql:///fenceq_test?host=DIR&user=postgres; DIR percent-encoded
# unless it holds only characters that need no encoding.
uri() {
  case $srv in
    *[!A-Za-z0-9/._-]*) enc=$(printf '%s' "$srv" | od -An -v -tx1 | tr -d ' \n' | sed 's/\(..\)/%\1/g') ;;
    *) enc=$srv ;;
  esac
  printf 'postgresql:///fenceq_test?host=%s&user=postgres\n' "$enc"
}

running() { as_pg "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; }

start() {
  mkdir -p "$dir"
  if [ "$srv" = "$dir" ]; then
    if [ "$(id -u)" -eq 0 ]; then
      chown postgres: "$dir"
      chmod 0755 "$dir"
    fi
    # The socket path must fit in sockaddr_un (107 bytes).
    if [ $(( ${#dir} + 16 )) -gt 107 ] || ! as_pg test -w "$dir"; then
      srv=$(mktemp -d /tmp/fqpg.XXXXXX)
      chmod 0755 "$srv"
      [ "$(id -u)" -eq 0 ] && chown postgres: "$srv"
      echo "$srv" >"$dir/server"
      set_paths
    fi
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_pg "$PGBIN/initdb" -D "$data" -U postgres --auth=trust --locale=C --encoding=UTF8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$data/postgresql.conf" <<EOF

# scripts/pg_cluster.sh: a Unix socket in $srv only; fsync and
# synchronous_commit stay at their (durable) defaults.
listen_addresses = ''
unix_socket_directories = '$srv'
port = $port
max_connections = 200
EOF
  fi
  if ! running; then
    as_pg "$PGBIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null ||
      { tail -n 30 "$log" >&2; exit 1; }
  fi
  if [ "$(as_pg "$PGBIN/psql" -h "$srv" -p $port -U postgres -d postgres -Atqc \
      "SELECT 1 FROM pg_database WHERE datname = 'fenceq_test'")" != 1 ]; then
    as_pg "$PGBIN/psql" -h "$srv" -p $port -U postgres -d postgres -qc \
      "CREATE DATABASE fenceq_test" >/dev/null
  fi
  uri >"$dir/uri.tmp"
  mv "$dir/uri.tmp" "$dir/uri"
  cat "$dir/uri"
}

stop() {
  if [ -f "$data/PG_VERSION" ] && running; then
    as_pg "$PGBIN/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
  fi
}

case $cmd in
  start) start ;;
  stop) stop ;;
  restart)
    [ -f "$data/PG_VERSION" ] || { echo "pg_cluster: no cluster in $dir" >&2; exit 1; }
    as_pg "$PGBIN/pg_ctl" -D "$data" -l "$log" -m fast -w -t 60 restart >/dev/null ||
      { tail -n 30 "$log" >&2; exit 1; }
    ;;
  destroy)
    stop
    [ "$srv" != "$dir" ] && rm -rf "$srv"
    rm -rf "$dir"
    ;;
  uri) uri ;;
  *) usage ;;
esac
