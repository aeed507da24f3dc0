#!/bin/sh
# The Node client installed as clients/node/README.md says, by a clean
# consumer: the tarball (built here as `make package` builds it, npm pack)
# installed with npm into a new project of its own (zeromq's prebuilt binary
# and @msgpack/msgpack from the npm registry, or npm's cache); then a CommonJS
# worker (require) and an ES module worker (import) each enqueue, claim and
# complete a job on a temporary fenceqd.
# Usage: check_node.sh FENCEQD SOURCE_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=daemon.sh  # fail, abs, consumer_tmp; start_daemon sets $endpoint and $daemon
. "$here/daemon.sh"
fenceqd=$(abs "$1")
src=$(abs "$2")
consumer_tmp fqnode
npm_quiet="--no-audit --no-fund --loglevel=error"

version=$(node -p "require('$src/clients/node/package.json').version")
mkdir "$tmp/packages"
# shellcheck disable=SC2086
(cd "$src/clients/node" && timeout 60 npm pack --pack-destination "$tmp/packages" $npm_quiet >/dev/null) ||
  fail "npm pack"
tarball=$tmp/packages/fenceq-$version.tgz
test -f "$tarball" || fail "npm pack wrote no $(basename "$tarball")"
echo "tarball: $(basename "$tarball") ($(tar tzf "$tarball" | wc -l) files)"
# The license: package.json's "license": "MIT", and LICENSE's text in the tarball.
tar xzOf "$tarball" package/LICENSE | cmp -s - "$src/LICENSE" ||
  fail "the tarball has no package/LICENSE, or not the repository's"
test "$(tar xzOf "$tarball" package/package.json |
  node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).license)')" = MIT ||
  fail "the tarball's package.json: license is not MIT"

mkdir "$tmp/consumer"
cd "$tmp/consumer"
printf '{ "name": "fenceq-consumer", "version": "1.0.0", "private": true }\n' >package.json
# shellcheck disable=SC2086
timeout 90 npm install $npm_quiet "$tarball" >"$tmp/npm.log" 2>&1 || {
  cat "$tmp/npm.log" >&2
  fail "npm install $tarball"
}
{ test -d node_modules/fenceq && ! test -L node_modules/fenceq; } || fail "node_modules/fenceq is not a copy"
test -f node_modules/zeromq/package.json || fail "zeromq was not installed"
grep -qE '"fenceq": *"file:' package.json || fail "package.json does not depend on the tarball"

cp "$here/worker.cjs" "$here/worker.mjs" "$here/story.cjs" .
start_daemon "$fenceqd" "$tmp"
for w in worker.cjs worker.mjs; do
  job="invoice-${w#worker.}"
  out=$(env -u NODE_PATH -u NODE_OPTIONS timeout 30 node "$w" "$endpoint" "$job" 2>&1) || {
    echo "$out" >&2
    fail "$w"
  }
  echo "$w: $out"
  # require takes the package's CommonJS entry, import its ES module one.
  case $w in *.cjs) entry=$tmp/consumer/node_modules/fenceq/index.js ;;
  *) entry=file://$tmp/consumer/node_modules/fenceq/index.mjs ;; esac
  echo "$out" | grep -qxF "module: $entry" || fail "$w: fenceq is not $entry"
  for kv in "\"id\":\"$job\"" '"done":true' '"result":"paid"' '"fence":1'; do
    echo "$out" | grep '^state: ' | grep -qF "$kv" || fail "$w: the daemon's state lacks $kv"
  done
done
echo "node consumer ok: npm install of the tarball, CommonJS and ES module workers' jobs completed"
