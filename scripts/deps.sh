#!/bin/sh
# Installs the Debian packages fenceq needs to build, test and run, if any is
# missing. Runs apt-get only when something is missing; as root or via sudo.
# `scripts/deps.sh run`: only what building the daemon and the tool needs
# (make run), not the test suites' PostgreSQL, browser, clang, valgrind,
# beanstalkd and Node.js.
set -eu
# What configuring the tree and building fenceqd and fenceq need.
RUN_PKGS="cmake g++ make pkg-config
libsqlite3-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libspdlog-dev libcli11-dev
nlohmann-json3-dev catch2 libmicrohttpd-dev libsystemd-dev libpq-dev libfuse3-dev
libhowardhinnant-date-dev tzdata"
PKGS="cmake g++ make pkg-config
libsqlite3-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libspdlog-dev libcli11-dev
nlohmann-json3-dev catch2 sqlite3 libmicrohttpd-dev libsystemd-dev beanstalkd libpq-dev postgresql
systemd dpkg-dev file lintian strace fuse3 libfuse3-dev
python3 python3-zmq python3-msgpack python3-pytest python3-psycopg2 python3-pip python3-setuptools python3-wheel python3-venv
clang libclang-rt-14-dev ninja-build valgrind chromium ccache
golang-go golang-github-vmihailenco-msgpack.v5-dev
libhowardhinnant-date-dev tzdata"
# Node.js and npm for the Node client, unless a node is already installed.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
[ "${1:-}" = run ] && PKGS=$RUN_PKGS
PKGS="$PKGS ${FENCEQ_EXTRA_PKGS:-}"

missing=""
for p in $PKGS; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
  esac
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing"
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
  echo "deps: missing packages:$missing (run as root, or install them)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
