#!/bin/sh
# A throw-away PostgreSQL cluster for the tests: initdb into DIR/data
# (trust authentication, locale C, UTF8), listening on a Unix socket in DIR
# only (no TCP), with the server's durability settings left at their defaults.
#
#   scripts/pg_cluster.sh start DIR     initdb if needed, start, create database
#                                       fenceq_test; prints the URI (also in DIR/uri)
#   scripts/pg_cluster.sh stop DIR      pg_ctl stop -m fast
#   scripts/pg_cluster.sh restart DIR   pg_ctl restart -m fast (for fault tests)
#   scripts/pg_cluster.sh destroy DIR   stop, then remove DIR
#   scripts/pg_cluster.sh uri DIR       prints the URI
#   scripts/pg_cluster.sh standby DIR PRIMARY
#                                       a streaming standby of the cluster in
#                                       PRIMARY, synchronous (PRIMARY waits for it
#                                       before a commit returns), started in DIR
#   scripts/pg_cluster.sh crash DIR     pg_ctl stop -m immediate (no shutdown
#                                       checkpoint, as a machine failure)
#   scripts/pg_cluster.sh promote DIR   the standby in DIR becomes a primary
#
# initdb and postgres refuse to run as root: as root the server runs as the
# `postgres` user (DIR is then owned by it; its parents must be searchable by
# it). Otherwise it runs as the calling user. Either way the superuser is named
# `postgres`. PGBIN overrides where the server binaries are looked up.
set -eu

usage() {
  echo "usage: $0 start|stop|restart|destroy|uri|crash|promote DIR, or standby DIR PRIMARY" >&2
  exit 2
}
[ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$1" = standby ]; } || usage
cmd=$1
absolute() {
  case $1 in
    /*) printf '%s' "${1%/}" ;;
    *) printf '%s' "$(pwd)/${1%/}" ;;
  esac
}
dir=$(absolute "$2")
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

# Where DIR's server lives: DIR or the /tmp directory it names.
place() {
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
}

start() {
  place
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

# A synchronous streaming standby of the primary in $1, in DIR.
standby() {
  primary_dir=$(absolute "$1")
  primary_srv=$primary_dir
  [ -f "$primary_dir/server" ] && primary_srv=$(cat "$primary_dir/server")
  place
  if [ ! -f "$data/PG_VERSION" ]; then
    as_pg "$PGBIN/pg_basebackup" -h "$primary_srv" -p $port -U postgres -D "$data" -R -c fast \
      -X stream >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    # Its own socket; the connection to the primary named, for the primary's
    # synchronous_standby_names (the auto.conf is read last: this wins over
    # the primary_conninfo -R wrote there).
    cat >>"$data/postgresql.auto.conf" <<EOF

# scripts/pg_cluster.sh: a standby of $primary_srv
unix_socket_directories = '$srv'
primary_conninfo = 'host=$primary_srv port=$port user=postgres application_name=fenceq_standby'
EOF
  fi
  if ! running; then
    as_pg "$PGBIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null ||
      { tail -n 30 "$log" >&2; exit 1; }
  fi
  # The primary's commits now wait for this standby to have them.
  as_pg "$PGBIN/psql" -h "$primary_srv" -p $port -U postgres -d postgres -qc \
    "ALTER SYSTEM SET synchronous_standby_names = 'fenceq_standby'" >/dev/null
  as_pg "$PGBIN/psql" -h "$primary_srv" -p $port -U postgres -d postgres -qAtc \
    "SELECT pg_reload_conf()" >/dev/null
  # Wait (bounded) until it streams as the synchronous standby.
  n=0
  until [ "$(as_pg "$PGBIN/psql" -h "$primary_srv" -p $port -U postgres -d postgres -qAtc \
      "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'fenceq_standby'")" = sync ]; do
    n=$((n + 1))
    [ $n -lt 300 ] || { echo "pg_cluster: the standby did not become synchronous" >&2; exit 1; }
    sleep 0.1
  done
  uri >"$dir/uri.tmp"
  mv "$dir/uri.tmp" "$dir/uri"
  cat "$dir/uri"
}

case $cmd in
  start) start ;;
  standby) standby "$3" ;;
  crash)
    if [ -f "$data/PG_VERSION" ] && running; then
      as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate -w -t 60 stop >/dev/null
    fi
    ;;
  promote)
    as_pg "$PGBIN/pg_ctl" -D "$data" -w -t 60 promote >/dev/null ||
      { tail -n 30 "$log" >&2; exit 1; }
    ;;
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
