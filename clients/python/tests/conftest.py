"""Fixtures: real fenceqd daemons on IPC sockets in temporary directories.

The daemon binary is ``$FENCEQD``, else the checkout's ``build/bin/fenceqd``.
Every daemon a test starts (directly, or through ``fenceq.service``) is killed
at teardown, and every wait below is bounded.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import zmq

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO = PACKAGE_DIR.parents[1]
sys.path.insert(0, str(PACKAGE_DIR))

import fenceq  # noqa: E402

#: fenceq.service daemons started by tests idle out quickly.
SERVICE_IDLE_EXIT = "3"


def fenceqd_binary() -> str:
    return os.path.abspath(os.environ.get("FENCEQD") or str(REPO / "build" / "bin" / "fenceqd"))


@pytest.fixture(scope="session", autouse=True)
def _environment() -> Iterator[None]:
    binary = fenceqd_binary()
    if not os.access(binary, os.X_OK):
        pytest.exit(f"fenceqd binary not found at {binary}: build it or set FENCEQD", returncode=2)
    saved = {k: os.environ.get(k) for k in ("FENCEQD", "FENCEQ_IDLE_EXIT", "FENCEQ_ENDPOINT")}
    os.environ["FENCEQD"] = binary
    os.environ["FENCEQ_IDLE_EXIT"] = SERVICE_IDLE_EXIT
    os.environ.pop("FENCEQ_ENDPOINT", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def live_fenceqd(db_prefix: str) -> List[int]:
    """Pids of running (not zombie) fenceqd processes whose --db starts with ``db_prefix``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"fenceqd"):
            continue
        if stat.rsplit(b")", 1)[1].split()[0] == b"Z":
            continue
        for i, arg in enumerate(argv[:-1]):
            if arg == b"--db" and argv[i + 1].decode(errors="replace").startswith(db_prefix):
                pids.append(int(entry))
    return pids


def stop_process(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until every one of its threads is stopped (the
    signal takes effect asynchronously; a request sent before that is served)."""
    os.kill(pid, signal.SIGSTOP)

    def all_stopped() -> bool:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
            return all(Path(f"/proc/{pid}/task/{t}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"T"
                       for t in tasks)
        except OSError:
            return False

    assert wait_until(all_stopped, 5, 0.002), f"process {pid} did not stop"


def wait_until(predicate, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


# The --sync of a SQLite daemon whose serving thread the timed suites time
# with pings (test_bounded*, the scale sweep; tests/app/test_settle_bounded.py
# does the same). Not --sync full: there each commit waits on the serving
# thread for an fsync, and this project's VMs have a disk whose own fsync
# has a long tail: an fdatasync of 4 KiB, 100 a second on a quiet machine,
# took 0.29 ms at p50, 0.58 ms at p99 and 187 ms at most (1,873 calls in
# 20 s, four over 20 ms; 2026-12-08). One such stall holds every ping of its
# length (37 at one every 5 ms), enough for a p99 over a few hundred pings:
# the single 31-264 ms stalls that failed these suites in clean clones
# (docs/testing.md). --sync normal fsyncs the log at checkpoints only, on the
# checkpointer's thread, so the pings time the serving thread's own work,
# which is what these suites bound; --sync full's commits are the kill -9
# and power-cut tests'.
TIMED_SYNC = ["--sync", "normal"]
# The same for a PostgreSQL sidecar, whose serving thread waits for each
# COMMIT, and so for PostgreSQL's WAL fsync on the same disk.
TIMED_PG = "-csynchronous_commit=off"


class Pinger:
    """A ping every 5 ms on a connection of its own while a probe runs (issue
    56's measure of how long the serving thread was held); latencies in
    seconds. The pings come from a process of their own (ping_process.py
    says why), and this process collects no garbage meanwhile (gc.disable
    from enter to exit): a collection in the middle of a probe's loop timed
    it, not the daemon."""

    def __init__(self, endpoint: str, timeout: float = 30) -> None:
        self.endpoint, self.timeout = endpoint, timeout
        self.latencies: List[float] = []
        self.errors: List[str] = []
        self._proc: Optional[subprocess.Popen] = None
        self._gc_was_enabled = False

    def __enter__(self) -> "Pinger":
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("ping_process.py")), self.endpoint,
             "0.005", str(self.timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        ready = self._proc.stdout.readline().strip()  # its first ping answered
        if ready != "ready":
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(f"the pinger did not start: {ready!r}")
        self._gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if self._gc_was_enabled:
            gc.enable()
        assert self._proc is not None
        try:
            out, _ = self._proc.communicate("stop\n", timeout=self.timeout + 5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            raise
        figures = json.loads(out)
        self.latencies, self.errors = figures["latencies"], figures["errors"]
        if exc_type is None:
            assert not self.errors, f"a ping failed: {self.errors}"
            assert self.latencies, "no ping was answered"

    def max(self) -> float:
        return max(self.latencies)

    def p99(self) -> float:
        s = sorted(self.latencies)
        return s[min(len(s) - 1, int(len(s) * 0.99))]


class Background(threading.Thread):
    """Runs ``fn`` on its own thread (with its own Clients); ``result()`` joins
    and answers its value or re-raises its exception in the test's thread."""

    def __init__(self, fn) -> None:
        super().__init__(daemon=True)
        self._fn = fn
        self._value: Any = None
        self._error: Any = None
        self.start()

    def run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as e:  # handed to the test's thread
            self._error = e

    def result(self, timeout: float = 10) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "background call did not finish"
        if self._error is not None:
            raise self._error
        return self._value


@pytest.fixture
def tmp_dir() -> Iterator[str]:
    """A short directory under /tmp (IPC paths must stay under ~100 bytes).
    Kills any fenceqd still serving a database in it."""
    path = tempfile.mkdtemp(prefix="fq", dir="/tmp")
    yield path
    for pid in live_fenceqd(path + "/"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(path, ignore_errors=True)


class Daemon:
    """One fenceqd process on ``<dir>/<name>.db`` serving ``ipc://<dir>/<name>.sock``."""

    def __init__(self, directory: str, name: str = "fq", clock: str = "client",
                 extra: Optional[List[str]] = None, endpoint: Optional[str] = None) -> None:
        self.db = os.path.join(directory, name + ".db")
        self.endpoint = endpoint or f"ipc://{directory}/{name}.sock"
        self.clock = clock
        self.extra = list(extra or [])
        self.stderr_path = os.path.join(directory, name + ".stderr")
        self.proc: Optional[subprocess.Popen] = None

    def argv(self) -> List[str]:
        return [fenceqd_binary(), "--db", self.db, "--listen", self.endpoint,
                "--clock", self.clock, *self.extra]

    def start(self, wait: bool = True) -> "Daemon":
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Ping until the daemon answers (connecting is asynchronous)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        if self.endpoint.startswith("ipc://"):
            # Connect once the socket file exists: a connection attempt made
            # before that is only retried after ZeroMQ's reconnect interval.
            path = self.endpoint[len("ipc://"):]
            while not os.path.exists(path) and time.monotonic() < deadline and self.proc.poll() is None:
                time.sleep(0.002)
        with fenceq.Client(self.endpoint, timeout=0.2) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"fenceqd exited with {self.proc.returncode}: {self.stderr()}")
                try:
                    c.ping()
                    return
                except fenceq.Timeout:
                    pass
                except fenceq.Unreachable:
                    time.sleep(0.002)
        raise RuntimeError(f"fenceqd did not answer within {timeout} s: {self.stderr()}")

    def stderr(self) -> str:
        try:
            return Path(self.stderr_path).read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> Optional[int]:
        """Signal the daemon and wait for it; SIGKILL if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        rc = self.proc.returncode
        self.proc = None
        return rc

    def restart(self) -> "Daemon":
        self.stop()
        return self.start()

    def client(self, timeout: float = 5.0) -> fenceq.Client:
        return fenceq.Client(self.endpoint, timeout=timeout)


@pytest.fixture
def fake_daemon(tmp_dir: str) -> Iterator[Tuple[str, Any]]:
    """A ROUTER socket standing in for fenceqd, for replies fenceqd never
    sends: (its endpoint, the socket); the test answers through it."""
    endpoint = f"ipc://{tmp_dir}/fake.sock"
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)
    try:
        yield endpoint, router
    finally:
        router.close(linger=0)


@pytest.fixture
def start_daemon(tmp_dir: str):
    """Factory: ``start_daemon(name="fq", clock="client", extra=[...], endpoint=None)``."""
    started: List[Daemon] = []

    def start(name: str = "fq", clock: str = "client", extra: Optional[List[str]] = None,
              wait: bool = True, endpoint: Optional[str] = None) -> Daemon:
        d = Daemon(tmp_dir, name, clock, extra, endpoint)
        started.append(d)
        return d.start(wait)

    yield start
    for d in started:
        d.stop(signal.SIGKILL)


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    """A fresh client-clock daemon (C2.2)."""
    return start_daemon(clock="client")


@pytest.fixture
def server_daemon(start_daemon) -> Daemon:
    """A fresh server-clock daemon (C2.3)."""
    return start_daemon(name="srv", clock="server")


@pytest.fixture
def client(daemon: Daemon) -> Iterator[fenceq.Client]:
    with daemon.client() as c:
        yield c


def waiting_claims(daemon: Daemon) -> int:
    """How many claim_next requests the daemon holds (``stats``, from a fresh client)."""
    with daemon.client() as c:
        return c.stats()["waiting_claims"]


def jobs_by_id(client: fenceq.Client, **filters: Any) -> Dict[str, Dict[str, Any]]:
    """``client.list(**filters)`` as a map from job id to its row."""
    return {j["id"]: j for j in client.list(**filters)}


def record_requests(client: fenceq.Client) -> List[Tuple[str, Dict[str, Any], float]]:
    """Spy on the client's transport: every request it sends, as
    ``(op, fields, timeout)`` (``fields`` without ``op`` and ``rid``), appended
    to the returned list; the requests still go to the daemon."""
    sent: List[Tuple[str, Dict[str, Any], float]] = []
    original = client._round_trip

    def spy(socket, op, fields, timeout):
        sent.append((op, dict(fields), timeout))
        return original(socket, op, fields, timeout)

    client._round_trip = spy
    return sent


@pytest.fixture(scope="session")
def pg_uri() -> Iterator[str]:
    """The PostgreSQL cluster of the PostgreSQL cases: FENCEQ_TEST_PG_URI, or
    the ``uri`` file of FENCEQ_TEST_PG_DIR (ctest's cluster), or else a
    throw-away cluster of this run's own (scripts/pg_cluster.sh, in /tmp),
    started on first use and destroyed at the end. Those cases fail without
    one; they do not skip (make test installs PostgreSQL)."""
    uri = os.environ.get("FENCEQ_TEST_PG_URI")
    pg_dir = os.environ.get("FENCEQ_TEST_PG_DIR")
    if uri or pg_dir:
        yield uri or (Path(pg_dir) / "uri").read_text().strip()
        return
    cluster = str(REPO / "scripts" / "pg_cluster.sh")
    directory = tempfile.mkdtemp(prefix="fqpy-pg-", dir="/tmp")
    try:
        started = subprocess.run([cluster, "start", directory], capture_output=True, text=True,
                                 timeout=180)
        assert started.returncode == 0, f"pg_cluster.sh start failed: {started.stderr}"
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([cluster, "destroy", directory], capture_output=True, timeout=120)


@contextlib.contextmanager
def daemon_on_pg_schema(uri: str, tmp_dir: str, name: str, clock: str,
                        options: str = "") -> Iterator[Daemon]:
    """A fenceqd (not started) on a fresh schema of the PostgreSQL cluster at
    ``uri`` (the :func:`pg_uri` fixture's), stopped and the schema dropped
    after; ``options``: more of its connection's settings (TIMED_PG)."""
    try:
        import psycopg2
    except ImportError:  # a failure, not a skip: make test installs it
        pytest.fail("psycopg2 is missing: apt-get install python3-psycopg2")
    schema = name + "_" + uuid.uuid4().hex[:12]
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE SCHEMA {schema}")
    base, _, query = uri.partition("?")
    fields = dict(urllib.parse.parse_qsl(query))
    fields["options"] = f"-csearch_path={schema} {options}".strip()
    d = Daemon(tmp_dir, name, clock)
    d.db = base + "?" + urllib.parse.urlencode(fields, quote_via=urllib.parse.quote)
    try:
        yield d
    finally:
        d.stop(signal.SIGKILL)
        with admin.cursor() as cur:
            cur.execute(f"DROP SCHEMA {schema} CASCADE")
            # Its writes to disk now, not in the cluster's own checkpoint
            # during the next test, whose pings may be timed.
            cur.execute("CHECKPOINT")
        admin.close()


@pytest.fixture(params=["sqlite", "postgres"])
def either_store(request, tmp_dir: str, start_daemon) -> Iterator[Daemon]:
    """A fresh server-clock fenceqd on SQLite, or on a fresh schema of the
    PostgreSQL cluster of the :func:`pg_uri` fixture (dropped after)."""
    if request.param == "sqlite":
        yield start_daemon(name="st", clock="server")
        return
    with daemon_on_pg_schema(request.getfixturevalue("pg_uri"), tmp_dir, "st", "server") as d:
        yield d.start()
