#!/bin/sh
# The Python client in the Debian package: cpack -G DEB from a built tree; the
# .deb has every module of clients/python/fenceq (sources only) in
# /usr/lib/python3/dist-packages/fenceq, recommends python3-zmq and
# python3-msgpack, and its maintainer scripts byte-compile and clean the
# module. Unpacked (dpkg-deb -x), its fenceq module, imported by Debian's
# /usr/bin/python3 from the unpacked dist-packages, runs a worker against the
# package's own fenceqd.
# Usage: check_deb_python.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=daemon.sh  # fail, abs, consumer_tmp; start_daemon sets $endpoint and $daemon
. "$here/daemon.sh"
consumer_tmp fqdebpy

# cpack runs make in the build folder: not with the jobserver of a make above us.
(cd "$build" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL timeout 120 cpack -G DEB -B "$tmp/deb" \
  >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB"
}
deb=$(ls "$tmp"/deb/fenceq_*.deb)
dist=/usr/lib/python3/dist-packages
dpkg-deb -c "$deb" | awk '{print $6}' | sed -n "s|^\.$dist/\(.*[^/]\)$|\1|p" | sort >"$tmp/python"
(cd "$src/clients/python" && ls fenceq/*.py) | sort >"$tmp/expected"
diff -u "$tmp/expected" "$tmp/python" >&2 || fail "the .deb's $dist differs from clients/python/fenceq/*.py (above)"

recommends=$(dpkg-deb -f "$deb" Recommends)
for r in python3 python3-zmq python3-msgpack; do
  echo "$recommends" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -qx "$r" ||
    fail "Recommends lacks $r: $recommends"
done
dpkg-deb -e "$deb" "$tmp/control"
grep -q 'py3compile -p fenceq' "$tmp/control/postinst" || fail "postinst does not byte-compile the module"
grep -q 'py3clean -p fenceq' "$tmp/control/prerm" || fail "prerm does not remove the byte code"

root=$tmp/root
dpkg-deb -x "$deb" "$root"
mkdir "$tmp/run"
cp "$here/worker.py" "$tmp/run/"
start_daemon "$root/usr/bin/fenceqd" "$tmp"
out=$(cd "$tmp/run" && PYTHONPATH=$root$dist PYTHONDONTWRITEBYTECODE=1 timeout 30 /usr/bin/python3 \
  worker.py "$endpoint" invoice-42 2>&1) || {
  echo "$out" >&2
  fail "the worker, with the .deb's fenceq module"
}
echo "$out"
echo "$out" | grep -qxF "module: $root$dist/fenceq/__init__.py" || fail "fenceq was not imported from the .deb"
for kv in '"id": "invoice-42"' '"done": true' '"result": "paid"' '"fence": 1'; do
  echo "$out" | grep '^state: ' | grep -qF "$kv" || fail "the daemon's state lacks $kv"
done
echo "deb python ok: $(basename "$deb"): $(wc -l <"$tmp/python") modules in $dist, Recommends: $recommends"
