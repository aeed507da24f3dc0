#!/bin/sh
# The Python client's wheel, built offline with Debian's python3 and setuptools
# (python3-pip, python3-setuptools, python3-wheel; no PyPI): writes
# OUT_DIR/fenceq-<version>-py3-none-any.whl and prints its path.
# Builds from a copy of the sources, so clients/python gets no build/ or
# *.egg-info and two builds may run at once.
# Usage: python_wheel.sh OUT_DIR [SOURCE_DIR]   (SOURCE_DIR: the repository)
set -eu
out=$1
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/fqwheel-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/fenceq" "$out"
cp "$src/clients/python/pyproject.toml" "$src/clients/python/README.md" \
  "$src/clients/python/LICENSE" "$tmp/src/"
cp "$src"/clients/python/fenceq/*.py "$tmp/src/fenceq/"
version=$(sed -n 's/^version *= *"\([^"]*\)"$/\1/p' "$tmp/src/pyproject.toml")
test -n "$version" || { echo "python_wheel.sh: no version in pyproject.toml" >&2; exit 1; }
wheel=$out/fenceq-$version-py3-none-any.whl
rm -f "$wheel"
"$py" -m pip wheel --no-deps --no-build-isolation --no-index --no-cache-dir -q \
  -w "$tmp/wheel" "$tmp/src" >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  echo "python_wheel.sh: pip wheel failed" >&2
  exit 1
}
mv "$tmp/wheel/fenceq-$version-py3-none-any.whl" "$wheel"
echo "$wheel"
