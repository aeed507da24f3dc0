#!/bin/sh
# clients/go/offline.sh GO-ARGUMENTS...: `go GO-ARGUMENTS` with no network,
# on the Go sources Debian installs under /usr/share/gocode (the packages
# golang-go and golang-github-vmihailenco-msgpack.v5-dev, which
# scripts/deps.sh installs).
#
# go.mod keeps its upstream requirement (msgpack v5.3.5, the version Debian
# 12 ships) and go.sum its upstream checksums, for `go get` users. This
# script leaves both alone: it writes a Go workspace, $FENCEQ_GO_WORK/go.work
# (default clients/go/.offline, which git ignores), that uses this module
# (and, when they are there, bench/go, the Go benchmark, and
# conformance/adapters/go, the conformance kit's Go adapter: modules of
# their own that use this one) and replaces
#  - msgpack and its tagparser with Debian's source directories, and
#  - the modules msgpack's go.mod names for its own tests only (testify and
#    what testify requires; their code is never compiled here) with stub
#    modules that hold nothing but a go.mod line,
# then runs go with GOWORK pointing at it, GOPROXY=off and GOSUMDB=off:
# nothing is downloaded, and a module that is not on disk is an error.
#
# Extra module folders for the workspace (the README test's temporary
# module): FENCEQ_GO_USE="dir1 dir2".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
gocode=${FENCEQ_GOCODE:-/usr/share/gocode/src}
work=${FENCEQ_GO_WORK:-$here/.offline}

for m in github.com/vmihailenco/msgpack/v5 github.com/vmihailenco/tagparser/v2; do
  if [ ! -f "$gocode/$m/go.mod" ]; then
    echo "offline.sh: no $gocode/$m (apt install golang-go golang-github-vmihailenco-msgpack.v5-dev," \
      "or run scripts/deps.sh; without Debian's sources use plain go with network access," \
      "clients/go/README.md)" >&2
    exit 1
  fi
done
command -v go >/dev/null 2>&1 || { echo "offline.sh: no go command (apt install golang-go)" >&2; exit 1; }

# msgpack's tests' requirements: only their go.mod is read (the module graph).
STUBS="github.com/stretchr/testify github.com/stretchr/objx github.com/davecgh/go-spew
github.com/pmezard/go-difflib gopkg.in/yaml.v3 gopkg.in/check.v1"

mkdir -p "$work"
tmp="$work/go.work.$$"
{
  echo "// Written by clients/go/offline.sh: do not edit, it is rewritten every run."
  echo "go 1.19"
  echo
  echo "use \"$here\""
  for m in bench/go conformance/adapters/go; do
    if [ -f "$repo/$m/go.mod" ]; then echo "use \"$repo/$m\""; fi
  done
  for d in ${FENCEQ_GO_USE:-}; do echo "use \"$d\""; done
  echo
  echo "replace github.com/vmihailenco/msgpack/v5 => \"$gocode/github.com/vmihailenco/msgpack/v5\""
  echo "replace github.com/vmihailenco/tagparser/v2 => \"$gocode/github.com/vmihailenco/tagparser/v2\""
  for m in $STUBS; do
    mkdir -p "$work/stubs/$m"
    if [ ! -f "$work/stubs/$m/go.mod" ]; then
      printf 'module %s\n' "$m" >"$work/stubs/$m/go.mod.$$"
      mv "$work/stubs/$m/go.mod.$$" "$work/stubs/$m/go.mod"
    fi
    echo "replace $m => \"$work/stubs/$m\""
  done
} >"$tmp"
mv "$tmp" "$work/go.work"

export GOWORK="$work/go.work" GOPROXY=off GOSUMDB=off GOFLAGS=
# go needs a build cache; without a HOME it has no default one.
if [ -z "${GOCACHE:-}" ] && [ -z "${HOME:-}" ] && [ -z "${XDG_CACHE_HOME:-}" ]; then
  export GOCACHE="$work/cache"
fi
exec go "$@"
