"""fenceq.service: the single-file lease API, path first, served by fenceqd.

Every function takes ``path``, the SQLite file, first, and answers plain
values (``state`` answers ``done`` as 0/1)::

    init_db(path)
    enqueue(path, job_id) -> bool
    state(path, job_id) -> dict | None
    claim(path, job_id, owner, now, ttl) -> int | None     # ValueError when ttl <= 0
    renew(path, job_id, owner, fence, now, ttl) -> bool    # ValueError when ttl <= 0
    complete(path, job_id, owner, fence, now, result) -> bool
    release(path, job_id, owner, fence) -> bool
    claim_many(path, job_id, owners, now, ttl) -> list

Semantics are the contract's (C1-C3) with the caller's ``now`` (client clock,
C2.2). Jobs enqueued here have no attempt limit: ``claim`` answers ``None``
only for a missing job, a done one, or one with ``until > now``.

Since C1.3 allows one writer per file, each call goes to the fenceqd
that owns ``path``, on an IPC socket derived from the path (:func:`endpoint_for`).
When none answers, the call starts one, detached::

    fenceqd --db PATH --clock client --listen ENDPOINT --idle-exit SECONDS

The binary is ``$FENCEQD``, else ``fenceqd`` on ``PATH``, else this checkout's
``build/bin/fenceqd``. When several processes do this at once, the daemon's
lock on the database picks one winner and the others exit; every caller then
talks to the winner. The daemon exits by itself after ``$FENCEQ_IDLE_EXIT``
seconds (default :data:`IDLE_EXIT_DEFAULT`) without requests. Its log is
appended to ``PATH.fenceqd.log``.

Every call pings the daemon first (starting one if the ping goes unanswered),
then sends its request. A request is retried only when it certainly was not
applied: the daemon answered ``unavailable`` (it was shutting down), or no
connection came up so it was never sent. A timeout after sending raises
:class:`fenceq.Timeout` (a ``TimeoutError``): the request may have been
applied, as with any lost reply, and only the caller can decide.

Errors: ``ValueError`` (:class:`fenceq.InvalidArgument`) for ``ttl <= 0`` and
other bad values, :class:`fenceq.FenceqError` for the rest,
``FileNotFoundError`` when the binary or the database's folder is missing.

Connections are cached per thread and per process; the functions are safe to
call from any thread.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar, Union

from .client import PROTOCOL_VERSION, Client, _process
from .errors import BadReply, FenceqError, Timeout, Unavailable, Unreachable

__all__ = ["init_db", "enqueue", "state", "claim", "renew", "complete", "release",
           "claim_many", "endpoint_for", "find_fenceqd"]

PathLike = Union[str, "os.PathLike[str]"]
T = TypeVar("T")

#: Seconds without requests after which a daemon started here exits
#: (overridden by ``$FENCEQ_IDLE_EXIT``).
IDLE_EXIT_DEFAULT = 60
#: Seconds one request may take before :class:`fenceq.Timeout`.
CALL_TIMEOUT = 5.0
#: How long to wait for a daemon that we started to answer.
START_TIMEOUT = 15.0
#: Readiness and liveness pings are short: a miss only costs a retry.
_PROBE_TIMEOUT = 0.25
#: Start attempts per call: a started daemon may lose the lock to a daemon
#: that is itself idling out.
_MAX_SPAWNS = 3
#: After our daemon exited while no daemon holds the database, wait this long
#: (a winner may be between taking the lock and recording its pid) before
#: starting another.
_LOSER_GRACE = 0.2
#: Calls that certainly were not applied (see the module docstring) are
#: retried this often.
_ATTEMPTS = 5
#: Unix socket paths are limited to 107 bytes; keep a margin.
_MAX_IPC_PATH = 100
#: Connections kept open per thread.
_CACHE_SIZE = 8


# -- the single-file API ------------------------------------------------------

def init_db(path: PathLike) -> None:
    """Create the ``jobs`` table (C1.1) if needed; idempotent (C1.2). Starts
    the daemon for ``path`` if none is running: opening the file is what
    creates the schema."""
    _connection(path).ensure()


def enqueue(path: PathLike, job_id: str) -> bool:
    """C3.1: ``True`` when inserted, ``False`` when the job already exists.

    The job has no attempt limit (``max_attempts=0``): the single-file API
    has none, so ``claim`` takes an expired lease however often the job was
    claimed. (The wire's default, 25, is the work queue's.)"""
    return _connection(path).call(lambda c: c.enqueue(job_id, max_attempts=0))


def state(path: PathLike, job_id: str) -> Optional[Dict[str, Any]]:
    """C3.2: ``{"id", "owner", "until", "fence", "result", "done"}`` with
    ``done`` as 0/1, or ``None`` when the job does not exist."""
    row = _connection(path).call(lambda c: c.state(job_id))
    if row is None:
        return None
    return {"id": row["id"], "owner": row["owner"], "until": float(row["until"]),
            "fence": int(row["fence"]), "result": row["result"], "done": 1 if row["done"] else 0}


def claim(path: PathLike, job_id: str, owner: str, now: float, ttl: float) -> Optional[int]:
    """C3.3: the new fence, or ``None`` (missing, done, or ``until > now``).
    ``ValueError`` when ``ttl <= 0``."""
    return _connection(path).call(lambda c: c.claim(job_id, owner, ttl, now=now))


def renew(path: PathLike, job_id: str, owner: str, fence: int, now: float, ttl: float) -> bool:
    """C3.4: ``True`` only for the current generation of an unexpired lease.
    ``ValueError`` when ``ttl <= 0``."""
    return _connection(path).call(lambda c: c.renew(job_id, owner, fence, ttl, now=now))


def complete(path: PathLike, job_id: str, owner: str, fence: int, now: float,
             result: Optional[str]) -> bool:
    """C3.5: ``True`` when the lease is current; otherwise ``False`` and the
    stored result is kept."""
    return _connection(path).call(lambda c: c.complete(job_id, owner, fence, result, now=now))


def release(path: PathLike, job_id: str, owner: str, fence: int) -> bool:
    """C3.6: ``True`` when owner and fence match and the job is not done;
    the fence is kept."""
    return _connection(path).call(lambda c: c.release(job_id, owner, fence))


def claim_many(path: PathLike, job_id: str, owners: Sequence[str], now: float,
               ttl: float) -> List[Optional[int]]:
    """One ``claim`` per owner, all at once on a thread pool (each thread with
    its own connection); the results in the order of ``owners``. On a new job
    exactly one owner gets a fence (C3.7)."""
    owners = list(owners)
    if not owners:
        return []
    _connection(path).ensure()
    db = _db_path(path)
    start = threading.Barrier(len(owners))

    def one(owner: str) -> Optional[int]:
        conn = _Connection(db)
        try:
            try:
                conn.ensure()
            except BaseException:
                start.abort()  # the others must not wait for this thread
                raise
            try:  # line the claims up so that they really race
                start.wait(timeout=START_TIMEOUT)
            except threading.BrokenBarrierError:
                pass
            return conn.call(lambda c: c.claim(job_id, owner, ttl, now=now))
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=len(owners)) as pool:
        return list(pool.map(one, owners))


# -- which daemon ---------------------------------------------------------------

def _db_path(path: PathLike) -> str:
    return os.path.realpath(os.fspath(path))


def endpoint_for(path: PathLike) -> str:
    """The IPC endpoint of the daemon that owns ``path``: ``ipc://<file>.sock``
    next to the database, or, when that path is too long for a Unix socket,
    ``ipc:///tmp/fenceq-<uid>-<hash of the path>.sock``."""
    db = _db_path(path)
    beside = db + ".sock"
    if len(beside.encode()) <= _MAX_IPC_PATH:
        return "ipc://" + beside
    digest = hashlib.sha256(db.encode()).hexdigest()[:24]
    return f"ipc:///tmp/fenceq-{os.getuid()}-{digest}.sock"


def find_fenceqd() -> str:
    """``$FENCEQD``, else ``fenceqd`` on ``PATH``, else ``build/bin/fenceqd``
    of the checkout this module lives in."""
    explicit = os.environ.get("FENCEQD")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise FileNotFoundError(f"FENCEQD={explicit} is not an executable file")
        return os.path.abspath(explicit)
    on_path = shutil.which("fenceqd")
    if on_path:
        return on_path
    in_checkout = _checkout_fenceqd(__file__)
    if in_checkout and os.access(in_checkout, os.X_OK):
        return str(in_checkout)
    build = f", or build it ({in_checkout} does not exist)" if in_checkout else ""
    raise FileNotFoundError(
        "fenceq.service needs the fenceqd binary: set FENCEQD, or put fenceqd on PATH "
        f"(the fenceq .deb installs /usr/bin/fenceqd){build}")


def _checkout_fenceqd(module_file: str) -> Optional[Path]:
    """``build/bin/fenceqd`` of the repository checkout `module_file`
    (fenceq/service.py) lives in: clients/python/fenceq/ of a tree with a
    top CMakeLists.txt. None when installed elsewhere (a venv, site-packages),
    where no build directory belongs to it."""
    package = Path(module_file).resolve().parent
    python_dir, clients_dir = package.parent, package.parent.parent
    root = clients_dir.parent
    if python_dir.name != "python" or clients_dir.name != "clients" or \
            not (root / "CMakeLists.txt").is_file():
        return None
    return root / "build" / "bin" / "fenceqd"


def _idle_exit() -> str:
    value = os.environ.get("FENCEQ_IDLE_EXIT") or str(IDLE_EXIT_DEFAULT)
    try:
        if not float(value) >= 0:  # 0: the daemon never idles out
            raise ValueError
    except ValueError:
        raise ValueError(f"FENCEQ_IDLE_EXIT must be a number of seconds >= 0, got {value!r}") from None
    return value


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie (the daemon is reparented to
    init, which may be slow to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True


def _lock_holder(db: str) -> Optional[int]:
    """The pid of the running daemon that holds ``db`` (fenceqd records it in
    ``<db>.lock`` while it holds the lock), or None."""
    try:
        with open(db + ".lock", "rb") as f:
            pid = int(f.read(32).strip() or b"0")
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and _alive(pid) else None


class _Daemon:
    """One start attempt: a detached fenceqd for ``db``."""

    def __init__(self, db: str, endpoint: str) -> None:
        self.log = db + ".fenceqd.log"
        binary = find_fenceqd()
        try:
            self._log_start = os.path.getsize(self.log)
        except OSError:
            self._log_start = 0
        args = [binary, "--db", db, "--clock", "client", "--listen", endpoint,
                "--idle-exit", _idle_exit()]
        # sh starts the daemon in the background and exits, so the daemon is
        # adopted by init: it never becomes our zombie and holds none of our
        # pipes. The new session keeps it out of our terminal's signals.
        script = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!'
        proc = subprocess.Popen(["/bin/sh", "-c", script, "fenceq-spawn", self.log, *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        out, err = proc.communicate(timeout=10)
        try:
            self.pid = int(out.strip())
        except ValueError:
            raise FenceqError("unavailable", f"could not start {binary}: "
                                             f"{err.decode(errors='replace').strip()}") from None
        self.died_at: Optional[float] = None

    def dead_for(self) -> Optional[float]:
        """Seconds since the daemon was first seen gone, or None while it runs."""
        if self.died_at is None:
            if _alive(self.pid):
                return None
            self.died_at = time.monotonic()
        return time.monotonic() - self.died_at

    def log_tail(self) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(self._log_start)
                text = f.read(4096).decode(errors="replace").strip()
        except OSError:
            return ""
        return text.splitlines()[-1] if text else ""


class _Connection:
    """A client for the daemon of one database, owned by one thread."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.endpoint = endpoint_for(db)
        self._socket_file = self.endpoint[len("ipc://"):]
        self.client: Optional[Client] = None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def ensure(self) -> Client:
        """A client whose daemon answered a ping just now, starting one if needed.

        Pinging before every call (about 0.1 ms over IPC) keeps the window in
        which a request can be lost to a vanished daemon tiny: a daemon that
        was killed or idled out since the last call shows up here, where
        retrying is safe. The ping also restarts the daemon's idle timer, so it
        cannot idle out before the request that follows."""
        if self.client is None:
            self.client = Client(self.endpoint, CALL_TIMEOUT)
            self.client._connect_timeout = _PROBE_TIMEOUT
        if os.path.exists(self._socket_file):
            try:
                self._check(self.client.ping(timeout=_PROBE_TIMEOUT))
                return self.client
            except (Timeout, Unavailable, Unreachable):
                pass
        self._start()
        return self.client

    def call(self, fn: Callable[[Client], T]) -> T:
        """``fn(client)``, retried when the request certainly was not applied:
        the daemon was shutting down (``unavailable``), or had gone (no
        connection, so the request was never sent). A timeout after sending
        is raised: the request may have been applied."""
        error: Optional[FenceqError] = None
        for _ in range(_ATTEMPTS):
            client = self.ensure()
            try:
                return fn(client)
            except (Unavailable, Unreachable) as e:
                error = e
            except Timeout as e:
                if e.sent:
                    raise
                error = e
        assert error is not None
        raise error

    def _check(self, info: Dict[str, Any]) -> None:
        if info.get("protocol") != PROTOCOL_VERSION or info.get("clock") != "client":
            raise BadReply("bad_reply", f"the daemon on {self.endpoint} is not usable by "
                                        f"fenceq.service (needs protocol 1, --clock client): {info!r}")

    def _start(self) -> None:
        assert self.client is not None
        if not os.path.isdir(os.path.dirname(self.db)):
            raise FileNotFoundError(f"no such directory for the database: {self.db}")
        deadline = time.monotonic() + START_TIMEOUT
        daemon = _Daemon(self.db, self.endpoint)
        spawns = 1
        while True:
            try:
                self._check(self.client.ping(timeout=_PROBE_TIMEOUT))
                return
            except Unreachable:
                time.sleep(0.002)  # no socket yet: the daemon is starting
            except (Timeout, Unavailable):
                pass
            dead_for = daemon.dead_for()
            if dead_for is not None and _lock_holder(self.db) is None and dead_for > _LOSER_GRACE:
                # Ours exited and no daemon holds the database: it failed (see
                # its log line), or it lost to a daemon that has exited since.
                if spawns >= _MAX_SPAWNS:
                    raise FenceqError("unavailable", f"fenceqd for {self.db} did not start: "
                                                     f"{daemon.log_tail() or 'no log'} (log: {daemon.log})")
                daemon = _Daemon(self.db, self.endpoint)
                spawns += 1
            if time.monotonic() > deadline:
                raise FenceqError("unavailable", f"fenceqd for {self.db} did not answer on "
                                                 f"{self.endpoint} within {START_TIMEOUT:g} s "
                                                 f"(log: {daemon.log})")


_local = threading.local()


def _connection(path: PathLike) -> _Connection:
    """This thread's connection for ``path`` (a small LRU; reset after fork)."""
    cache: Optional["OrderedDict[str, _Connection]"] = getattr(_local, "cache", None)
    if cache is None or getattr(_local, "fork", None) != _process():
        cache = _local.cache = OrderedDict()  # a forked child must not touch the parent's sockets
        _local.fork = _process()
    db = _db_path(path)
    conn = cache.get(db)
    if conn is None:
        conn = cache[db] = _Connection(db)
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)[1].close()
    else:
        cache.move_to_end(db)
    return conn
