#!/bin/sh
# The Python client installed as clients/python/README.md says, by a clean
# consumer: the wheel (built here as `make package` builds it,
# packaging/python_wheel.sh) installed with pip into a fresh venv made by
# Debian's python3 with --system-site-packages (pyzmq and msgpack from Debian,
# no PyPI); then a worker script outside the repository, run by the venv's
# python, enqueues, claims and completes a job on a temporary fenceqd.
# Usage: check_python.sh FENCEQD SOURCE_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=daemon.sh  # fail, abs, consumer_tmp; start_daemon sets $endpoint and $daemon
. "$here/daemon.sh"
fenceqd=$(abs "$1")
src=$(abs "$2")
consumer_tmp fqpy

wheel=$(timeout 60 "$src/packaging/python_wheel.sh" "$tmp/packages" "$src") || fail "the wheel"
echo "wheel: $(basename "$wheel")"
# The license: MIT in the wheel's metadata, LICENSE's text in its .dist-info.
/usr/bin/python3 - "$wheel" "$src/LICENSE" <<'PY' || fail "the wheel's license"
import re, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
names = wheel.namelist()
meta = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
if not re.search(r"^License(-Expression)?: MIT$", meta, re.M):
    sys.exit("METADATA has no License: MIT")
# .dist-info/LICENSE (wheel < 0.44) or .dist-info/licenses/LICENSE (PEP 639).
files = [n for n in names if re.search(r"\.dist-info/(licenses/)?LICENSE$", n)]
if not files or wheel.read(files[0]) != open(sys.argv[2], "rb").read():
    sys.exit(f"no LICENSE, or not the repository's, in the wheel: {names}")
PY
mkdir "$tmp/consumer"
cd "$tmp/consumer"
timeout 60 /usr/bin/python3 -m venv --system-site-packages .venv || fail "python3 -m venv"
timeout 60 .venv/bin/pip install --no-index --no-build-isolation "$wheel" >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  fail "pip install --no-index $wheel"
}
grep -E '^Successfully installed fenceq-' "$tmp/pip.log"

cp "$here/worker.py" .
start_daemon "$fenceqd" "$tmp"
out=$(cd "$tmp/consumer" && env -u PYTHONPATH -u PYTHONHOME timeout 30 .venv/bin/python worker.py \
  "$endpoint" invoice-42 2>&1) || {
  echo "$out" >&2
  fail "the worker"
}
echo "$out"
echo "$out" | grep -qE "^module: $tmp/consumer/\.venv/lib/python3\.[0-9]+/site-packages/fenceq/__init__\.py$" ||
  fail "fenceq was not imported from the venv"
for kv in '"id": "invoice-42"' '"done": true' '"result": "paid"' '"fence": 1'; do
  echo "$out" | grep '^state: ' | grep -qF "$kv" || fail "the daemon's state lacks $kv"
done
echo "python consumer ok: the wheel in a venv with --system-site-packages, a worker's job completed"
