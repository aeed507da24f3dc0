#!/bin/sh
# The install layout and the Debian package, from a built tree:
#  1. cmake --install --prefix P puts every file in its FHS place, rewrites the
#     unit's paths under P, and fenceq.pc builds a client;
#  2. cpack -G DEB: the file list, control fields and maintainer scripts; the
#     package's sysusers.d and tmpfiles.d entries applied to its own root; its
#     fenceqd runs and its fenceq.pc builds a client; its copyright file
#     declares the MIT license (LICENSE) in Debian's machine-readable format,
#     and lintian reports no error on it (scripts/deps.sh installs lintian).
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d /tmp/fqinst-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# has FILE LINE: FILE has LINE exactly.
has() { grep -qxF -- "$2" "$1" || fail "$1 has no line: $2"; }

# Builds tests/service/pc_consumer.cpp with pkg-config's flags only, runs it.
build_with_pkg_config() {
  flags=$(pkg-config --cflags --libs fenceq) || fail "pkg-config fenceq: $flags"
  # shellcheck disable=SC2086
  g++ -o "$tmp/consumer" "$src/tests/service/pc_consumer.cpp" $flags ||
    fail "pc_consumer does not build with: $flags"
  test "$("$tmp/consumer")" = unreachable || fail "pc_consumer did not run"
}

# --- 1. cmake --install --prefix P ------------------------------------------
p=$tmp/prefix
cmake --install "$build" --prefix "$p" >/dev/null
for f in bin/fenceqd bin/fenceq include/fenceq/client.hpp \
  lib/systemd/system/fenceqd.service lib/sysusers.d/fenceq.conf lib/tmpfiles.d/fenceq.conf \
  etc/fenceq/fenceqd.conf share/doc/fenceq/README.md share/doc/fenceq/copyright; do
  test -f "$p/$f" || fail "cmake --install: no $f"
done
# The Debian changelog is the .deb's only (CPack's install script).
test ! -e "$p/share/doc/fenceq/changelog.Debian.gz" || fail "cmake --install: a Debian changelog"
pc=$(find "$p" -name fenceq.pc)
lib=$(find "$p" -name libfenceq.a)
test -n "$pc" && test -n "$lib" || fail "cmake --install: no fenceq.pc or libfenceq.a"
test "$(dirname "$pc")" = "$(dirname "$lib")/pkgconfig" || fail "fenceq.pc is not in LIBDIR/pkgconfig"
test -f "$(dirname "$lib")/cmake/fenceq/fenceqConfig.cmake" || fail "no CMake package config"
has "$p/lib/systemd/system/fenceqd.service" \
  "ExecStart=$p/bin/fenceqd --config $p/etc/fenceq/fenceqd.conf"
has "$pc" "prefix=$p"
cmp -s "$p/etc/fenceq/fenceqd.conf" "$src/systemd/fenceqd.conf" || fail "config differs"
# A second install keeps an edited config.
echo "# edited" >>"$p/etc/fenceq/fenceqd.conf"
cmake --install "$build" --prefix "$p" >/dev/null
has "$p/etc/fenceq/fenceqd.conf" "# edited"
PKG_CONFIG_PATH=$(dirname "$pc") build_with_pkg_config

# --- 2. the .deb ----------------------------------------------------------------
# cpack runs make in the build folder: not with the jobserver of a make above us.
(cd "$build" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cpack -G DEB -B "$tmp/deb" \
  >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB"
}
deb=$(ls "$tmp"/deb/fenceq_*.deb)
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/files"
for f in ./usr/bin/fenceqd ./usr/bin/fenceq ./usr/include/fenceq/client.hpp \
  ./usr/lib/systemd/system/fenceqd.service ./usr/lib/sysusers.d/fenceq.conf \
  ./usr/lib/tmpfiles.d/fenceq.conf ./etc/fenceq/fenceqd.conf ./usr/share/doc/fenceq/README.md \
  ./usr/share/doc/fenceq/copyright ./usr/share/doc/fenceq/changelog.Debian.gz; do
  has "$tmp/files" "$f"
done
grep -qE '^\./usr/lib/([a-z0-9_-]+/)?libfenceq\.a$' "$tmp/files" || fail ".deb: no libfenceq.a"
grep -qE '^\./usr/lib/([a-z0-9_-]+/)?pkgconfig/fenceq\.pc$' "$tmp/files" || fail ".deb: no fenceq.pc"
grep -qE '^\./usr/lib/([a-z0-9_-]+/)?cmake/fenceq/fenceqConfig\.cmake$' "$tmp/files" ||
  fail ".deb: no CMake package config"
if grep -vE '^\./(usr/(bin|include|lib|share)|etc/fenceq)(/|$)|^\./(usr|etc)/$' "$tmp/files"; then
  fail ".deb: files outside /usr/{bin,include,lib,share} and /etc/fenceq (above)"
fi

test "$(dpkg-deb -f "$deb" Package)" = fenceq || fail "Package"
dpkg-deb -f "$deb" Version | grep -qE '^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+$' || fail "Version"
test "$(dpkg-deb -f "$deb" Architecture)" = "$(dpkg --print-architecture)" || fail "Architecture"
test -n "$(dpkg-deb -f "$deb" Maintainer)" || fail "Maintainer"
test -n "$(dpkg-deb -f "$deb" Description)" || fail "Description"
depends=$(dpkg-deb -f "$deb" Depends)
for d in libzmq5 libsqlite3-0 libsystemd0 libspdlog1.10 libfmt9 libstdc++6 "systemd | adduser"; do
  case "$depends" in *"$d"*) ;; *) fail "Depends lacks $d: $depends" ;; esac
done

dpkg-deb -e "$deb" "$tmp/control"
has "$tmp/control/conffiles" /etc/fenceq/fenceqd.conf
for s in postinst prerm postrm; do
  test -x "$tmp/control/$s" || fail "$s is not executable"
  sh -n "$tmp/control/$s" || fail "$s: syntax"
done
grep -q 'systemd-sysusers /usr/lib/sysusers.d/fenceq.conf' "$tmp/control/postinst" ||
  fail "postinst does not create the user"
grep -q 'systemd-tmpfiles --create /usr/lib/tmpfiles.d/fenceq.conf' "$tmp/control/postinst" ||
  fail "postinst does not create the state directory"

# What postinst does, applied to the unpacked package instead of this system.
root=$tmp/root
dpkg-deb -x "$deb" "$root"
cmp -s "$root/usr/lib/systemd/system/fenceqd.service" "$src/systemd/fenceqd.service" ||
  fail "the packaged unit differs from systemd/fenceqd.service"
systemd-sysusers --root="$root" >/dev/null 2>&1 || fail "systemd-sysusers --root"
grep -qE '^fenceq:x:[0-9]+:[0-9]+:' "$root/etc/passwd" || fail "no user fenceq"
grep -qE '^fenceq:x:[0-9]+:' "$root/etc/group" || fail "no group fenceq"
systemd-tmpfiles --root="$root" --create >/dev/null 2>&1 || fail "systemd-tmpfiles --root"
test "$(stat -c %a "$root/var/lib/fenceq")" = 750 || fail "/var/lib/fenceq mode"
"$root/usr/bin/fenceqd" --version | grep -q '^fenceqd ' || fail "the packaged fenceqd does not run"
"$root/usr/bin/fenceqd" --config "$root/etc/fenceq/fenceqd.conf" --db "$tmp/d.db" \
  --listen "ipc://$tmp/d.sock" --idle-exit 0.1 2>/dev/null || fail "the packaged config is refused"
PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$(dirname "$root$(sed -n 's/^\.//; /fenceq\.pc$/p' "$tmp/files")") \
  build_with_pkg_config

# The license: /usr/share/doc/fenceq/copyright in Debian's machine-readable
# format (copyright-format 1.0, "DEP-5"), every file under the MIT license,
# which that format names Expat, and LICENSE's text word for word.
copyright=$root/usr/share/doc/fenceq/copyright
test "$(stat -c %a "$copyright")" = 644 || fail "copyright: mode $(stat -c %a "$copyright")"
head -1 "$copyright" | grep -qxF "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ||
  fail "copyright: not copyright-format 1.0"
grep -qw MIT "$copyright" || fail "copyright does not name MIT"
grep -qxF "Files: *" "$copyright" || fail "copyright: no Files: * paragraph"
test "$(grep -c '^License: Expat$' "$copyright")" = 2 ||
  fail "copyright: not Files: * under License: Expat with its text"
# The last paragraph is the license's text: its lines indented by one
# space, "." for an empty one.
tac "$copyright" | sed '/^License:/q' | tac | sed '1d; s/^ //; s/^\.$//' >"$tmp/license.deb"
sed 1,4d "$src/LICENSE" | cmp -s - "$tmp/license.deb" ||
  fail "copyright: the license text differs from LICENSE's: $(sed 1,4d "$src/LICENSE" | diff - "$tmp/license.deb")"
grep -qxF "Copyright: $(sed -n 's/^Copyright (c) //p' "$src/LICENSE")" "$copyright" ||
  fail "copyright: not LICENSE's copyright line"

# lintian, Debian's package checker: no error (E:) on the .deb. Warnings are
# printed, not failed on. Exit status 2 is "errors found" (--fail-on error),
# 1 lintian's own failure: either fails the test.
command -v lintian >/dev/null 2>&1 || fail "no lintian (scripts/deps.sh installs it: make deps)"
rc=0
lintian --tag-display-limit 0 --fail-on error "$deb" >"$tmp/lintian.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || grep -q '^E: ' "$tmp/lintian.log"; then
  cat "$tmp/lintian.log" >&2
  fail "lintian $(basename "$deb"): exit status $rc, $(grep -c '^E: ' "$tmp/lintian.log") errors (above)"
fi
grep '^W: ' "$tmp/lintian.log" || true

echo "install ok: cmake --install layout, $(basename "$deb") ($(wc -l <"$tmp/files") entries), Depends: $depends;" \
  "copyright: MIT; lintian: no errors, $(grep -c '^W: ' "$tmp/lintian.log") warnings"
