#!/usr/bin/python3
"""Every code block of the READMEs runs as written, or says why not.

    /usr/bin/python3 scripts/doctest_readme.py --bin build/bin [-v] [FILE ...]
    /usr/bin/python3 scripts/doctest_readme.py --cwd DIR [--endpoint E] [--bin BIN] [FILE ...]

Reads the fenced code blocks of README.md, the docs/ pages the README's
material moved to (docs/features.md, docs/dashboard.md, docs/benchmarks.md),
clients/python/README.md, clients/node/README.md and clients/cpp/README.md
(those that exist; or the FILEs given) and runs each one against a fresh
temporary `fenceqd`:

- sh, shell, bash: pasted twice into one `dash` session, then twice into one
  `bash` session (a fresh daemon for each shell). The shell must still be
  there after the second paste: a block that exits the shell would close the
  user's terminal.
- python, py: /usr/bin/python3 with clients/python on PYTHONPATH.
- js, javascript, mjs, cjs: node, as an ES module (.mjs) when the block has
  an `import ... from` or `export` line or is tagged mjs, else as CommonJS
  (.cjs). `fenceq` resolves to clients/node (a node_modules/fenceq link in the
  run's folder); clients/node/node_modules is installed with `npm ci` first
  if it is missing (a fresh clone: `make test` runs ctest before test-node).
- go: a whole program (package main) in a module of its own, built with the
  Go client offline from Debian's Go sources (clients/go/offline.sh; at
  least 300 s for the first build), then run.
- cpp, c++: compiled with c++ -std=c++20 -Wall -Werror against the client
  library (--cpp-lib, default BIN/../clients/cpp/libfenceq.a, and the
  headers of clients/cpp/include and protocol/include; --cpp-flag adds the
  build's -fsanitize=...), then run.

A block passes when it exits 0 within --timeout seconds (default 30) and
writes nothing on stderr (the tool's refusals are `false`/`null` on stdout
with exit 1; its errors, a traceback, a rejected promise go to stderr).

Each run's current folder is a new temporary folder laid out like the
repository root, so the READMEs' relative paths work: build/bin links to
--bin, and the daemon was started there with its defaults (var/fenceq.db,
ipc://var/fenceqd.sock). FENCEQ_ENDPOINT and HOSTNAME are removed from the
environment, so the blocks find that daemon as a user's would (docs/operating.md,
"Which endpoint a client uses"); but on a host where the installed service's
socket exists, which the clients would take first, FENCEQ_ENDPOINT names the
temporary daemon's socket, so that no block reaches the host's service. FENCEQD
is --bin's fenceqd (for fenceq.service).

With --cwd DIR (one daemon, as a user): every block of every file runs once,
in file order, against the daemon already serving there, from DIR as the
current folder, as a user pastes the READMEs one block after another into a
terminal of the checkout where `make run` serves: sh blocks pasted once into
one `bash` session each (the shell must still be there at the end), the other
languages as above (their source files and the node_modules/fenceq link in a
temporary folder, run from DIR). The environment is prepared as above, with
DIR as the run's folder: the blocks find the daemon by the clients' order from
DIR (ipc://var/fenceqd.sock there), or at --endpoint E, which sets
FENCEQ_ENDPOINT for every block. --bin defaults to DIR/build/bin. No block
gets a daemon of its own, so a block that counts on ids or queues no other
block (nor an earlier run of itself) has used fails here and not in the
default mode. Daemons that blocks started themselves (fenceq.service; a
<db>.lock that was not there before) are stopped at the end; the files
blocks wrote in DIR stay, as they would for the user.

A block that cannot run is marked on the line right before its opening fence:

    <!-- doctest: skip (the reason, in words) -->

That is the only marker; the reason is required. An unmarked block in a
language not listed above, a marker with no block after it, or an unknown
marker fails the run, naming file:line. Standard library only.
"""

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEFAULT_FILES = ["README.md", "docs/features.md", "docs/dashboard.md", "docs/benchmarks.md",
                 "clients/python/README.md", "clients/node/README.md", "clients/cpp/README.md"]
PYTHON = "/usr/bin/python3"
SERVICE_SOCKET = "/run/fenceq/fenceqd.sock"

SHELL = {"sh", "shell", "bash"}
PY = {"python", "py", "python3"}
JS = {"js", "javascript", "mjs", "cjs"}
CPP = {"cpp", "c++", "cxx"}
GO = {"go", "golang"}

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`{]*)")
MARKER = re.compile(r"<!--\s*doctest:\s*(.*?)\s*-->", re.S)
SKIP = re.compile(r"^skip\s*\((.*\S.*)\)$", re.S)
ESM = re.compile(r"^\s*(import\s+[\w{*'\"]|export\s)", re.M)


class Block:
    def __init__(self, path, line, lang, text, skip):
        self.path, self.line, self.lang, self.text, self.skip = path, line, lang, text, skip

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def parse(path, rel):
    """The file's blocks, and the problems with its markers."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, problems = [], []
    used_markers, in_blocks = set(), set()
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        body = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i >= len(lines):
            problems.append(f"{rel}:{start + 1}: code block never closed")
        in_blocks.update(range(start + 1, i + 2))
        i += 1
        # The marker: a <!-- doctest: ... --> comment ending on the last
        # non-blank line before the fence.
        skip = None
        j = start - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        if j >= 0 and lines[j].rstrip().endswith("-->"):
            k = j
            while k >= 0 and "<!--" not in lines[k] and j - k < 20:
                k -= 1
            comment = "\n".join(lines[k:j + 1]) if k >= 0 else ""
            mm = MARKER.search(comment)
            if mm:
                used_markers.add(k + 1)
                sm = SKIP.match(mm.group(1))
                if sm:
                    skip = " ".join(sm.group(1).split())
                else:
                    problems.append(f"{rel}:{k + 1}: unknown doctest marker {mm.group(0)!r} "
                                    "(the only one is `<!-- doctest: skip (REASON) -->`)")
                    skip = False            # neither run nor counted: a problem already
        blocks.append(Block(rel, start + 1, lang, "\n".join(body) + "\n", skip))
    for n, line in enumerate(lines, 1):
        if re.search(r"<!--\s*doctest", line) and n not in used_markers and n not in in_blocks:
            problems.append(f"{rel}:{n}: doctest marker not right before a code block")
    return blocks, problems


# --- running -------------------------------------------------------------

class Failure(Exception):
    pass


def service_socket_exists():
    """As the clients judge it: there, or in a folder this user may not search."""
    try:
        os.stat(SERVICE_SOCKET)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def block_env(bindir, run_dir, endpoint=None):
    env = dict(os.environ)
    for k in ("FENCEQ_ENDPOINT", "FENCEQ_CURVE_KEY", "FENCEQ_CURVE_SERVER_KEY", "HOSTNAME",
              "PYTHONPATH", "NODE_PATH", "NODE_OPTIONS"):
        env.pop(k, None)
    if endpoint:
        env["FENCEQ_ENDPOINT"] = endpoint
    elif service_socket_exists():
        env["FENCEQ_ENDPOINT"] = f"ipc://{run_dir}/var/fenceqd.sock"
    env["FENCEQD"] = os.path.join(bindir, "fenceqd")
    env["FENCEQ_IDLE_EXIT"] = "5"          # a daemon fenceq.service starts ends soon
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.path.join(ROOT, "clients", "python")
    return env


class TempDaemon:
    """A temporary folder laid out like the repository root (build/bin, var/),
    with fenceqd serving its defaults there."""

    def __init__(self, bindir):
        self.bindir = bindir

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="fenceq-doctest-")
        self.files = self.dir                  # where a block's source file goes
        os.makedirs(os.path.join(self.dir, "build"))
        os.symlink(self.bindir, os.path.join(self.dir, "build", "bin"))
        os.makedirs(os.path.join(self.dir, "var"))
        os.makedirs(os.path.join(self.dir, "node_modules"))
        os.symlink(os.path.join(ROOT, "clients", "node"),
                   os.path.join(self.dir, "node_modules", "fenceq"))
        self.log_path = os.path.join(self.dir, "fenceqd.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([os.path.join(self.bindir, "fenceqd"), "--log-level", "warn"],
                                         cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            r = subprocess.run([os.path.join(self.bindir, "fenceq"), "--timeout", "0.2", "ping"],
                               cwd=self.dir, env=block_env(self.bindir, self.dir),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                self.env = block_env(self.bindir, self.dir)
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log()
                self.__exit__()
                raise Failure(f"fenceqd did not start in {self.dir}:\n{log}")
            time.sleep(0.05)

    def log(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def __exit__(self, *exc):
        stop(self.proc)
        # Daemons a block started itself (fenceq.service): each records its
        # pid in <db>.lock in the run's folder.
        for base, _, files in os.walk(self.dir):
            for name in files:
                if name.endswith(".lock"):
                    stop_pid(os.path.join(base, name))
        shutil.rmtree(self.dir, ignore_errors=True)


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_pid(lock):
    try:
        with open(lock, "rb") as f:
            pid = int(f.read(32).strip() or b"0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0]
    except (OSError, ValueError):
        return
    if pid <= 0 or not argv0.endswith(b"fenceqd"):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}"):
            return
        time.sleep(0.05)


class SharedDaemon:
    """--cwd's mode: the daemon already serving for DIR, which no block gets
    to itself. Entered once per block: the block runs from DIR, its source
    file in a temporary folder of its own (with the node_modules/fenceq link)."""

    def __init__(self, bindir, cwd, endpoint):
        self.bindir, self.dir, self.endpoint = bindir, cwd, endpoint
        self.env = block_env(bindir, cwd, endpoint)
        self.locks_before = self.locks()

    def locks(self):
        found = set()
        for base, dirs, files in os.walk(self.dir):
            dirs[:] = [d for d in dirs if d not in (".git", "node_modules") and
                       not d.startswith("build")]
            found.update(os.path.join(base, n) for n in files if n.endswith(".lock"))
        return found

    def ping(self):
        r = subprocess.run([os.path.join(self.bindir, "fenceq"), "--timeout", "5", "ping"],
                           cwd=self.dir, env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            where = self.endpoint or "the clients' order from there"
            raise Failure(f"no daemon answers for {self.dir} ({where}): start it first "
                          f"(make run there)\n{r.stdout}{r.stderr}")

    def __enter__(self):
        self.files = tempfile.mkdtemp(prefix="fenceq-doctest-block-")
        os.makedirs(os.path.join(self.files, "node_modules"))
        os.symlink(os.path.join(ROOT, "clients", "node"),
                   os.path.join(self.files, "node_modules", "fenceq"))
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.files, ignore_errors=True)

    def close(self):
        """Daemons the blocks started themselves (fenceq.service), by the
        lock files they left; the daemon of DIR itself is left alone."""
        for lock in sorted(self.locks() - self.locks_before):
            stop_pid(lock)


def run(cmd, cwd, env, timeout, stdin_text=None):
    """(exit status, stdout, stderr); the whole process group is killed after."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True,
                            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(stdin_text.encode() if stdin_text is not None else None,
                                    timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)      # anything it left in the background
    except ProcessLookupError:
        pass
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    if VERBOSE:
        print(f"--- {' '.join(cmd)}\n{out}{err}", end="" if (out + err).endswith("\n") else "\n")
    if timed_out:
        raise Failure(f"still running after {timeout} s (an endless loop? a client left open?): "
                      f"killed\n--- stdout\n{out}--- stderr\n{err}")
    return proc.returncode, out, err


def check(status, out, err, what):
    if status != 0 or err.strip():
        raise Failure(f"{what}: exit status {status}"
                      f"{', and it wrote on stderr' if err.strip() else ''}\n"
                      f"--- stdout\n{out}--- stderr\n{err}")


def run_shell(block, args):
    dash = shutil.which("dash") or "/bin/sh"
    bash = shutil.which("bash") or "/bin/bash"
    if args.shared:
        end = "doctest: the bash session is still there after the paste"
        with args.shared as d:
            status, out, err = run([bash], d.dir, d.env, args.timeout, f"{block.text}\necho '{end}'\n")
        if end not in out:
            raise Failure(f"pasted into bash: the shell exited (status {status}) before the end "
                          f"of the paste; a user's terminal would close\n--- stdout\n{out}--- stderr\n{err}")
        check(status, out, err, "pasted into bash")
        return "bash, pasted once"
    shown = []
    for shell in (dash, bash):
        name = os.path.basename(shell)
        end = f"doctest: the {name} session is still there after the second paste"
        script = f"{block.text}\n{block.text}\necho '{end}'\n"
        with TempDaemon(args.bin) as d:
            status, out, err = run([shell], d.dir, d.env, args.timeout, script)
            if end not in out:
                raise Failure(f"pasted twice into {name}: the shell exited (status {status}) "
                              f"before the end of the second paste; a user's terminal would close"
                              f"\n--- stdout\n{out}--- stderr\n{err}")
            check(status, out, err, f"pasted twice into {name}")
        shown.append(name)
    return " and ".join(shown) + ", pasted twice each"


def session(args):
    """Where a block runs: a fresh temporary daemon, or --cwd's."""
    return args.shared or TempDaemon(args.bin)


def run_python(block, args):
    with session(args) as d:
        path = os.path.join(d.files, "snippet.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(block.text)
        check(*run([PYTHON, path], d.dir, d.env, args.timeout), PYTHON)
    return PYTHON


def run_js(block, args):
    ensure_node_modules()
    esm = block.lang == "mjs" or (block.lang != "cjs" and ESM.search(block.text) is not None)
    name = "snippet.mjs" if esm else "snippet.cjs"
    with session(args) as d:
        path = os.path.join(d.files, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(block.text)
        check(*run(["node", path], d.dir, d.env, args.timeout), f"node {name}")
    return f"node, {'an ES module' if esm else 'CommonJS'}"


def run_cpp(block, args):
    lib = args.cpp_lib or os.path.join(os.path.dirname(args.bin), "clients", "cpp", "libfenceq.a")
    if not os.path.exists(lib):
        raise Failure(f"the C++ client library {lib} is missing: build the project first")
    includes = args.cpp_include or [os.path.join(ROOT, "clients", "cpp", "include"),
                                    os.path.join(ROOT, "protocol", "include")]
    zmq = subprocess.run(["pkg-config", "--libs", "libzmq"], capture_output=True, text=True)
    zmq_libs = zmq.stdout.split() if zmq.returncode == 0 else ["-lzmq"]
    with session(args) as d:
        src, exe = os.path.join(d.files, "snippet.cpp"), os.path.join(d.files, "snippet")
        with open(src, "w", encoding="utf-8") as f:
            f.write(block.text)
        cmd = ["c++", "-std=c++20", "-Wall", "-Werror"] + (args.cpp_flag or []) + \
              [f"-I{i}" for i in includes] + [src, lib] + zmq_libs + ["-o", exe]
        check(*run(cmd, d.dir, d.env, max(args.timeout, 120)), "compiling it")
        check(*run([exe], d.dir, d.env, args.timeout), "running it")
    return "compiled against the client library, then run"


_node_ready = False
VERBOSE = False


def ensure_node_modules():
    """clients/node's dependencies, installed with `npm ci` if missing. A lock
    keeps two runs from installing at once."""
    global _node_ready
    if _node_ready:
        return
    node_dir = os.path.join(ROOT, "clients", "node")
    need = [os.path.join(node_dir, "node_modules", p, "package.json")
            for p in ("zeromq", "@msgpack/msgpack")]
    if not all(os.path.exists(p) for p in need):
        lock_path = os.path.join(tempfile.gettempdir(), "fenceq-doctest-npm-" +
                                 hashlib.sha1(node_dir.encode()).hexdigest()[:12] + ".lock")
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not all(os.path.exists(p) for p in need):
                print(f"doctest: {node_dir}/node_modules is missing: npm ci", flush=True)
                try:
                    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                                       cwd=node_dir, capture_output=True, text=True, timeout=600)
                except (OSError, subprocess.TimeoutExpired) as e:
                    raise Failure(f"npm ci in {node_dir} failed: {e}")
                if r.returncode != 0 or not all(os.path.exists(p) for p in need):
                    raise Failure(f"npm ci in {node_dir} failed (exit {r.returncode}); the Node "
                                  f"blocks need its node_modules\n{r.stdout}{r.stderr}")
    _node_ready = True


def run_go(block, args):
    offline = os.path.join(ROOT, "clients", "go", "offline.sh")
    with session(args) as d:
        prog = os.path.join(d.files, "goprog")
        os.makedirs(prog, exist_ok=True)
        with open(os.path.join(prog, "go.mod"), "w", encoding="utf-8") as f:
            f.write("module readmeblock\n\ngo 1.19\n")
        with open(os.path.join(prog, "main.go"), "w", encoding="utf-8") as f:
            f.write(block.text)
        # The workspace of offline.sh, with this module in it; its own folder,
        # so that runs in parallel never share one.
        env = dict(d.env, FENCEQ_GO_USE=prog, FENCEQ_GO_WORK=os.path.join(d.files, "gowork"))
        exe = os.path.join(prog, "snippet")
        check(*run([offline, "build", "-o", exe, "."], prog, env, max(args.timeout, 300)),
              "go build")
        # Run from the session's folder, as the other blocks: a relative endpoint is read there.
        check(*run([exe], d.dir, d.env, args.timeout), "the program")
    return "go build (offline), then run"


RUNNERS = [(SHELL, run_shell), (PY, run_python), (JS, run_js), (CPP, run_cpp), (GO, run_go)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", help="the folder of fenceqd and fenceq (with --cwd: DIR/build/bin)")
    ap.add_argument("--cwd", metavar="DIR",
                    help="one daemon, as a user: every block once, in order, from DIR, against "
                         "the daemon already serving there (make run)")
    ap.add_argument("--endpoint", help="with --cwd: the daemon's endpoint (FENCEQ_ENDPOINT for "
                                       "every block); default: the clients' order from DIR")
    ap.add_argument("--timeout", type=float, default=30, help="seconds a block may run")
    ap.add_argument("--cpp-lib", help="the C++ client library (libfenceq.a)")
    ap.add_argument("--cpp-include", action="append", help="include folder for C++ blocks")
    ap.add_argument("--cpp-flag", action="append",
                    help="compiler flag for C++ blocks (--cpp-flag=-fsanitize=address)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show every run's output")
    ap.add_argument("files", nargs="*", help="Markdown files (relative to the repository root)")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    if args.endpoint and not args.cwd:
        ap.error("--endpoint goes with --cwd")
    if not args.bin and not args.cwd:
        ap.error("--bin is required (or --cwd DIR, whose build/bin is the default)")
    if args.cwd:
        args.cwd = os.path.abspath(args.cwd)
        if not os.path.isdir(args.cwd):
            ap.error(f"--cwd {args.cwd}: no such folder")
    args.bin = os.path.abspath(args.bin or os.path.join(args.cwd, "build", "bin"))
    # The blocks compile in another folder: paths given relative to this one, made absolute.
    args.cpp_lib = args.cpp_lib and os.path.abspath(args.cpp_lib)
    args.cpp_include = args.cpp_include and [os.path.abspath(i) for i in args.cpp_include]
    for tool in ("fenceqd", "fenceq"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            print(f"doctest: {args.bin}/{tool} is missing: build the project first", file=sys.stderr)
            return 2

    files = args.files or [f for f in DEFAULT_FILES if os.path.exists(os.path.join(ROOT, f))]
    blocks, problems = [], []
    for rel in files:
        b, p = parse(os.path.join(ROOT, rel), rel)
        blocks += b
        problems += p

    args.shared = None
    if args.cwd:
        args.shared = SharedDaemon(args.bin, args.cwd, args.endpoint)
        try:
            args.shared.ping()
        except Failure as e:
            print(f"doctest: {e}", file=sys.stderr)
            return 2
        print(f"doctest: one daemon: every block once, in order, from {args.cwd}"
              f"{', FENCEQ_ENDPOINT=' + args.endpoint if args.endpoint else ''}", flush=True)

    ran, skipped, failed = 0, [], []
    start = time.monotonic()
    for block in blocks:
        if block.skip is False:
            continue
        if block.skip is not None:
            skipped.append(block)
            print(f"skip {block.where} ({block.skip})")
            continue
        runner = next((fn for langs, fn in RUNNERS if block.lang in langs), None)
        if runner is None:
            msg = (f"{block.where}: a ```{block.lang or ''} block, which the doc-test runner "
                   f"cannot run: make it sh, python, js, cpp or go, or put "
                   f"`<!-- doctest: skip (REASON) -->` right before it")
            failed.append(msg)
            print(f"FAIL {msg}")
            continue
        t0 = time.monotonic()
        try:
            how = runner(block, args)
            ran += 1
            print(f"ok   {block.where} ({how}, {time.monotonic() - t0:.1f} s)", flush=True)
        except Failure as e:
            failed.append(f"{block.where}: {str(e).splitlines()[0]}")
            print(f"FAIL {block.where} ({block.lang}): {e}\n--- the block\n{block.text}", flush=True)

    if args.shared:
        args.shared.close()
    for p in problems:
        print(f"FAIL {p}")
    print(f"doctest: {ran} blocks run, {len(skipped)} skipped with reasons, "
          f"{len(failed) + len(problems)} failed, in {len(files)} files "
          f"({time.monotonic() - start:.0f} s)")
    reasons = {}
    for b in skipped:
        reasons.setdefault(b.skip, []).append(b.where)
    for reason, where in reasons.items():
        print(f"  skipped ({reason}): {', '.join(where)}")
    if failed or problems:
        for f in failed + problems:
            print(f"  failed: {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
