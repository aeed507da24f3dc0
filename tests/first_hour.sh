#!/bin/bash
# tests/first_hour.sh: a new user's first hour, scripted (issue 30, "Done when").
# `make test-first-hour` runs it (and `make test`, beside the Python and Node
# suites). The steps, each bounded in time:
#
#   1. clone: `git clone` of this checkout, checked out at its HEAD, into a
#      temporary folder. Uncommitted changes are NOT in the clone: commit
#      first to test them.
#   2. make run: in the clone, in the background, with the dashboard on
#      (HTTP_AUTH=<a users file> HTTP=127.0.0.1:<a free port the kernel
#      chose>; another port if that one was taken meanwhile), until
#      `build/bin/fenceq ping` answers there. The clone builds fenceqd and
#      fenceq from scratch: up to FIRST_HOUR_BUILD_SECONDS (900).
#   3. readme: every README code block once, in file order, on that one
#      daemon, from the clone's root as a user pastes them
#      (scripts/doctest_readme.py --cwd; no FENCEQ_ENDPOINT: the clients'
#      development default resolves, unless the installed service's socket
#      exists on this host, which the doc-test then steps around).
#   4. dashboard: Debian's chromium opens http://USER:PASSWORD@127.0.0.1:PORT/
#      (tests/browser/first_hour.mjs) and must show the queue `thumbnails`
#      with a done job (README.md's Python block worked it), every /api/
#      answer a 2xx, no error in the page.
#   5. top: `build/bin/fenceq top` in a pseudo-terminal of 80x24: its frames'
#      lines fit 80 columns and show REFUSED; `q` stops it.
#   6. stop: SIGINT to make's process group, the temporary folder removed.
#
# Exit 0 only if every step passed; otherwise the failed step is named, with
# its log. Prints the time from clone to "started" (the daemon answering) and
# the whole run's. FIRST_HOUR_KEEP=1 keeps the temporary folder. Needs what `make test` installs first: git, chromium,
# node, tests/browser's node_modules (make browser-deps; installed in the clone
# if this checkout has none) and the npm registry for clients/node's `npm ci`
# in the clone (the README's Node blocks).
#
# With ccache installed (make test installs it), the clone's build goes
# through it as every build of the tree does (scripts/configure.sh), with
# paths relative to the clone (the Makefile's CCACHE_BASEDIR): it reuses what
# this checkout's `make build` compiled, and takes seconds. FIRST_HOUR_COLD=1
# disables the cache for this run, to time a first build as a new user has it.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
BUILD_SECONDS=${FIRST_HOUR_BUILD_SECONDS:-900}
T0=$(date +%s.%N)
TMP=$(mktemp -d /tmp/fenceq-first-hour.XXXXXX)
CLONE=$TMP/fenceq
MAKE_PID=
STEP=setup

say() { printf 'first-hour: %s\n' "$*"; }
since() { $PY -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f} s')" "$1" "$(date +%s.%N)"; }
# The last lines of a log, indented.
show() { [ -s "$1" ] && { echo "--- $1 (last ${2:-60} lines)"; tail -n "${2:-60}" "$1"; }; }

stop_make() {
  [ -n "$MAKE_PID" ] || return 0
  # make's process group: make, and fenceqd it started (Ctrl-C in a terminal).
  kill -INT -- "-$MAKE_PID" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$MAKE_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$MAKE_PID" 2>/dev/null; then
    say "make run still there 10 s after SIGINT: SIGKILL"
    kill -KILL -- "-$MAKE_PID" 2>/dev/null
  fi
  wait "$MAKE_PID" 2>/dev/null
  MAKE_PID=
}
cleanup() {
  stop_make
  if [ -n "${FIRST_HOUR_KEEP:-}" ]; then say "kept $TMP (FIRST_HOUR_KEEP)"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  say "FAILED at step '$STEP': $*"
  exit 1
}

# The environment a user has: no endpoint set, so the development default of
# the clone's root resolves. On a host where the installed service's socket
# exists the clients would take it first; then the clone's socket is named.
unset FENCEQ_ENDPOINT FENCEQ_CURVE_KEY FENCEQ_CURVE_SERVER_KEY FENCEQD
# (As the clients judge it: there, or in a folder this user may not search.)
if $PY -c 'import os, sys
try: os.stat("/run/fenceq/fenceqd.sock")
except PermissionError: pass
except OSError: sys.exit(1)'; then
  export FENCEQ_ENDPOINT=ipc://$CLONE/var/fenceqd.sock
  say "the installed service's socket exists here: FENCEQ_ENDPOINT=$FENCEQ_ENDPOINT"
fi
# The clone's make must not join a calling make's jobserver (make test -j4).
unset MAKEFLAGS MFLAGS MAKELEVEL
# A first build as a new user has it: no cache (FIRST_HOUR_COLD=1).
[ -n "${FIRST_HOUR_COLD:-}" ] && export CCACHE_DISABLE=1

# --- 1. clone ------------------------------------------------------------------
STEP=clone
REV=$(git -C "$SRC" rev-parse HEAD) || fail "$SRC is not a git checkout"
if [ -n "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  say "note: $SRC has uncommitted changes; the clone has HEAD ($REV) only"
fi
git clone --quiet --no-checkout "$SRC" "$CLONE" >"$TMP/clone.log" 2>&1 &&
  git -C "$CLONE" checkout --quiet --detach "$REV" >>"$TMP/clone.log" 2>&1 ||
  { show "$TMP/clone.log"; fail "git clone $SRC"; }
say "cloned $REV into $CLONE"

# --- 2. make run, with the dashboard --------------------------------------------
STEP="make run"
AUTH=$TMP/dashboard-users                       # outside the clone: README blocks write var/
PASSWORD=$(head -c 12 /dev/urandom | base64 | tr '+/' '-_')
(umask 077; echo "ops:$PASSWORD" >"$AUTH")
free_port() {
  $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ping() { (cd "$CLONE" && timeout 10 build/bin/fenceq --timeout 1 ping) >/dev/null 2>&1; }
LOG=$TMP/make-run.log
started=
for attempt in 1 2 3 4 5; do
  PORT=$(free_port) || fail "no free port"
  : >"$LOG"
  (cd "$CLONE" && exec setsid make run HTTP_AUTH="$AUTH" HTTP="127.0.0.1:$PORT") \
    >"$LOG" 2>&1 </dev/null &
  MAKE_PID=$!
  deadline=$(( $(date +%s) + BUILD_SECONDS ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if ! kill -0 "$MAKE_PID" 2>/dev/null; then break; fi
    if [ -x "$CLONE/build/bin/fenceq" ] && ping; then started=1; break; fi
    sleep 1
  done
  [ -n "$started" ] && break
  if kill -0 "$MAKE_PID" 2>/dev/null; then
    show "$LOG"; show "$CLONE/build/build.log" 40
    fail "no answer to fenceq ping within $BUILD_SECONDS s"
  fi
  wait "$MAKE_PID" 2>/dev/null
  MAKE_PID=
  if grep -q "cannot listen for HTTP" "$LOG"; then
    say "port $PORT was taken meanwhile (attempt $attempt): another one"
    continue
  fi
  show "$LOG"; show "$CLONE/build/build.log" 40
  fail "make run exited before the daemon answered"
done
[ -n "$started" ] || { show "$LOG"; fail "no free port for the dashboard after 5 attempts"; }
CLONE_TO_STARTED=$(since "$T0")
say "started: clone to 'fenceq ping' answering took $CLONE_TO_STARTED (dashboard on 127.0.0.1:$PORT)"
# The dashboard listens once the daemon serves; wait for its port all the same.
for _ in $(seq 100); do
  $PY -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
    "$PORT" 2>/dev/null && break
  sleep 0.2
done

# --- 3. every README block, in order, on this one daemon --------------------------
STEP="README blocks on one daemon"
t=$(date +%s.%N)
if ! $PY "$CLONE/scripts/doctest_readme.py" --cwd "$CLONE" --timeout 60 >"$TMP/readme.log" 2>&1; then
  cat "$TMP/readme.log"; show "$LOG" 30
  fail "a README block failed on the one daemon (above)"
fi
say "$(grep '^doctest: [0-9]' "$TMP/readme.log") [$(since "$t")]"

# --- 4. the dashboard in chromium, the login in the URL ---------------------------
STEP="dashboard in chromium"
if [ -f "$SRC/tests/browser/node_modules/puppeteer-core/package.json" ]; then
  ln -s "$SRC/tests/browser/node_modules" "$CLONE/tests/browser/node_modules"
else
  say "no tests/browser/node_modules in $SRC: make browser-deps in the clone"
  (cd "$CLONE" && timeout 600 make --no-print-directory browser-deps) >"$TMP/browser-deps.log" 2>&1 ||
    { show "$TMP/browser-deps.log"; fail "make browser-deps"; }
fi
t=$(date +%s.%N)
if ! timeout 180 node "$CLONE/tests/browser/first_hour.mjs" \
       --url "http://ops:$PASSWORD@127.0.0.1:$PORT/" --queue thumbnails >"$TMP/browser.log" 2>&1; then
  cat "$TMP/browser.log"; show "$LOG" 30
  fail "the dashboard with the login in the URL (above)"
fi
say "dashboard: $(grep -o '"queue".*"dead":"[0-9]*"' "$TMP/browser.log" | head -1) [$(since "$t")]"

# --- 5. fenceq top at 80 columns in a pseudo-terminal -----------------------------
STEP="fenceq top at 80 columns"
t=$(date +%s.%N)
if ! (cd "$CLONE" && $PY - build/bin/fenceq >"$TMP/top.log" 2>&1) <<'EOF'
import fcntl, os, pty, re, select, signal, struct, sys, termios, time, unicodedata

COLS, ROWS = 80, 24
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm"
    os.environ.pop("COLUMNS", None)
    os.execv(sys.argv[1], [sys.argv[1], "top"])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
os.kill(pid, signal.SIGWINCH)

out = b""
def read_for(seconds, until=None):
    global out
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            out += chunk
            if until and until(out):
                return True
    return True

# Two whole frames (each starts at the cursor's home; top redraws every
# second or two): three homes. Up to 60 s on a busy machine.
read_for(60, lambda o: o.count(b"\x1b[H") >= 3)
os.write(fd, b"q")
deadline = time.monotonic() + 15
status = None
while time.monotonic() < deadline:
    read_for(0.2)
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        break
if status is None:
    print("top: still running 15 s after q: SIGINT")
    os.kill(pid, signal.SIGINT)
    time.sleep(2)
    if os.waitpid(pid, os.WNOHANG)[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

text = out.decode("utf-8", "replace")
parts = text.split("\x1b[H")
frames = [f for f in parts[1:-1] if f.strip()]     # the last one may be cut short
csi = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")
def width(s):
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in s)
problems = []
if len(frames) < 2:
    problems.append(f"{len(frames)} frame(s) in 60 s, not 2")
for n, frame in enumerate(frames[:3], 1):
    lines = [csi.sub("", l).rstrip("\r") for l in frame.split("\n")]
    lines = [l for l in lines if l.strip()]
    print(f"--- frame {n}")
    print("\n".join(lines))
    wide = [l for l in lines if width(l) > COLS]
    if wide:
        problems.append(f"frame {n}: {len(wide)} line(s) wider than {COLS} columns: {wide[0]!r}")
    if not any("REFUSED" in l for l in lines):
        problems.append(f"frame {n}: no REFUSED column")
if status is not None and (not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0):
    problems.append(f"top ended with status {status} after q")
if status is None:
    problems.append("top did not stop on q within 15 s")
for p in problems:
    print("PROBLEM", p)
sys.exit(1 if problems else 0)
EOF
then
  cat "$TMP/top.log"
  fail "fenceq top at 80 columns (above)"
fi
say "top: $(grep -c '^--- frame' "$TMP/top.log") frames at 80x24, every line within 80 columns, REFUSED shown, q stopped it [$(since "$t")]"

# --- 6. stop ------------------------------------------------------------------------
STEP=stop
stop_make
say "passed: clone to started $CLONE_TO_STARTED, whole run $(since "$T0")"
