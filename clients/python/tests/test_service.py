"""fenceq.service: the single-file API's eight steps, and the daemon it starts by itself.

Each test works on its own new database in a temporary directory, with inputs
of its own. Daemons started by the module idle out
after $FENCEQ_IDLE_EXIT seconds (3 in this suite, see conftest) and are killed
at teardown anyway.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import fenceq
from fenceq import service
from conftest import PACKAGE_DIR, live_fenceqd, stop_process, wait_until

JOBS_COLUMNS = [  # name, type, notnull, default, pk (C1.1)
    ("id", "TEXT", 0, None, 1),
    ("owner", "TEXT", 0, None, 0),
    ("until", "REAL", 1, "0", 0),
    ("fence", "INTEGER", 1, "0", 0),
    ("result", "TEXT", 0, None, 0),
    ("done", "INTEGER", 1, "0", 0),
]


@pytest.fixture
def db(tmp_dir: str) -> str:
    return os.path.join(tmp_dir, "seed.db")


def columns(path: str):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[1:6] for r in con.execute("PRAGMA table_info(jobs)")][:6]
    finally:
        con.close()


def run_python(code: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh /usr/bin/python3 that imports fenceq from this checkout."""
    prelude = f"import sys; sys.path.insert(0, {str(PACKAGE_DIR)!r})\n"
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True,
                          timeout=timeout, env=os.environ.copy())


# -- the single-file API's eight steps ---------------------------------------------

def test_seed_1_init_db_idempotent_and_schema(db: str):
    """Step 1 (C1.1, C1.2): init_db creates the jobs table as specified; repeating it,
    also with a new daemon, changes no row."""
    assert not os.path.exists(db)
    assert service.init_db(db) is None
    assert columns(db) == JOBS_COLUMNS
    service.init_db(db)
    assert service.enqueue(db, "keep")
    fence = service.claim(db, "keep", "w", 12.5, 30)
    before = service.state(db, "keep")
    service.init_db(db)
    assert service.state(db, "keep") == before
    for pid in live_fenceqd(db):          # a new daemon reopens the file: still nothing changes
        os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not live_fenceqd(db), 10)
    service.init_db(db)
    assert columns(db) == JOBS_COLUMNS
    assert service.state(db, "keep") == before and before["fence"] == fence == 1


def test_seed_1_sqlite3_shell_shows_schema(db: str):
    """Step 1: ``sqlite3 path .schema`` shows the jobs table (when the shell is installed)."""
    service.init_db(db)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sql = con.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='jobs'").fetchone()
    con.close()
    assert sql and "CREATE TABLE" in sql[0].upper()
    shell = "/usr/bin/sqlite3"
    if os.access(shell, os.X_OK):
        out = subprocess.run([shell, db, ".schema jobs"], capture_output=True, text=True, timeout=10)
        assert out.returncode == 0 and "jobs" in out.stdout, out.stderr


def test_seed_2_enqueue_first_time_only(db: str):
    """Step 2 (C3.1)."""
    service.init_db(db)
    assert service.enqueue(db, "e-1") is True
    assert service.enqueue(db, "e-1") is False
    assert service.enqueue(db, "e-2") is True
    f = service.claim(db, "e-2", "w", 3, 9)
    assert service.enqueue(db, "e-2") is False
    assert service.state(db, "e-2")["owner"] == "w" and service.state(db, "e-2")["fence"] == f


def test_seed_3_state_dict_or_none(db: str):
    """Step 3 (C3.2): a dict with the API's keys and types (done as 0/1), or None."""
    service.init_db(db)
    assert service.state(db, "absent") is None
    service.enqueue(db, "s")
    s = service.state(db, "s")
    assert s == {"id": "s", "owner": None, "until": 0.0, "fence": 0, "result": None, "done": 0}
    assert list(s) == ["id", "owner", "until", "fence", "result", "done"]
    f = service.claim(db, "s", "w", 7, 2)
    assert service.complete(db, "s", "w", f, 8, "out")
    s = service.state(db, "s")
    assert s == {"id": "s", "owner": "w", "until": 9.0, "fence": 1, "result": "out", "done": 1}
    assert type(s["done"]) is int and type(s["until"]) is float and type(s["fence"]) is int


def test_seed_4_claim_errors_none_and_boundary(db: str):
    """Step 4 (C3.3): ValueError for ttl <= 0 (argument order: now, then ttl); None for
    missing, done and leased jobs; at now == until the job is claimable again."""
    service.init_db(db)
    service.enqueue(db, "c")
    with pytest.raises(ValueError):
        service.claim(db, "c", "w", 10, 0)      # now=10, ttl=0
    with pytest.raises(ValueError):
        service.claim(db, "c", "w", 10, -3)
    assert service.state(db, "c")["fence"] == 0
    assert service.claim(db, "missing", "w", 1, 1) is None
    assert service.claim(db, "c", "a", 0.5, 6) == 1          # until 6.5
    assert service.claim(db, "c", "b", 6.25, 6) is None      # until > now
    assert service.claim(db, "c", "b", 6.5, 2) == 2          # now == until
    assert service.state(db, "c")["owner"] == "b"
    assert service.complete(db, "c", "b", 2, 7, "r")
    assert service.claim(db, "c", "z", 100, 1) is None       # done


def test_seed_5_renew_only_current_generation(db: str):
    """Step 5 (C3.4)."""
    service.init_db(db)
    service.enqueue(db, "r")
    f1 = service.claim(db, "r", "a", 20, 4)                  # until 24
    with pytest.raises(ValueError):
        service.renew(db, "r", "a", f1, 21, 0)               # now=21, ttl=0
    assert service.renew(db, "r", "a", f1, 22, 5) is True    # until 27
    assert service.state(db, "r")["until"] == 27.0
    assert service.renew(db, "r", "x", f1, 23, 5) is False
    assert service.renew(db, "r", "a", f1, 27, 5) is False   # expired at now == until
    f2 = service.claim(db, "r", "b", 27, 5)
    assert f2 == f1 + 1
    assert service.renew(db, "r", "a", f1, 28, 5) is False   # the old generation
    assert service.renew(db, "r", "b", f2, 28, 5) is True


def test_seed_6_stale_complete_refused_result_kept(db: str):
    """Step 6 (C3.5): A stalls, B takes over and completes, A's late complete is refused."""
    service.init_db(db)
    service.enqueue(db, "story")
    fa = service.claim(db, "story", "A", 100, 2)
    fb = service.claim(db, "story", "B", 103, 2)
    assert service.complete(db, "story", "B", fb, 104, "B's") is True
    assert service.complete(db, "story", "A", fa, 104.5, "A's") is False
    s = service.state(db, "story")
    assert s["result"] == "B's" and s["done"] == 1 and s["owner"] == "B" and s["fence"] == fb


def test_seed_7_release_keeps_fence(db: str):
    """Step 7 (C3.6)."""
    service.init_db(db)
    service.enqueue(db, "rel")
    f = service.claim(db, "rel", "a", 1, 100)
    assert service.release(db, "rel", "b", f) is False
    assert service.release(db, "rel", "a", f) is True
    assert service.state(db, "rel") == {"id": "rel", "owner": None, "until": 0.0, "fence": f,
                                        "result": None, "done": 0}
    assert service.claim(db, "rel", "b", 2, 1) == f + 1


def test_seed_8_claim_many_one_winner_in_input_order(db: str):
    """Step 8 (C3.7): one claim per owner at once; exactly one fence; results in the
    order of the owners."""
    service.init_db(db)
    owners = [f"owner-{i:02d}" for i in range(12)]
    for round_ in range(3):
        job = f"many-{round_}"
        service.enqueue(db, job)
        results = service.claim_many(db, job, owners, 50 + round_, 10)
        assert len(results) == len(owners)
        assert [r for r in results if r is not None] == [1]
        assert service.state(db, job)["owner"] == owners[results.index(1)]
    assert service.claim_many(db, "nobody", owners[:3], 1, 1) == [None, None, None]
    assert service.claim_many(db, "many-0", [], 1, 1) == []
    with pytest.raises(ValueError):
        service.claim_many(db, "many-1", owners[:2], 70, 0)


# -- the daemon behind it --------------------------------------------------------------

def test_service_starts_one_detached_daemon_per_path(db: str):
    """The module starts `fenceqd --db PATH --clock client` on the socket derived from
    the path, detached: its own session, no pipe of ours, so a caller that captures
    output returns at once (not after the daemon's idle exit)."""
    t0 = time.monotonic()
    out = run_python(f"from fenceq import service; print(service.enqueue({db!r}, 'x'))")
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == "True"
    assert time.monotonic() - t0 < float(os.environ["FENCEQ_IDLE_EXIT"])
    (pid,) = live_fenceqd(db)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    assert argv[argv.index("--db") + 1] == os.path.realpath(db)
    assert argv[argv.index("--clock") + 1] == "client"
    assert argv[argv.index("--listen") + 1] == service.endpoint_for(db) == f"ipc://{os.path.realpath(db)}.sock"
    assert os.getsid(pid) != os.getsid(0)
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/2") == os.path.realpath(db) + ".fenceqd.log"
    assert service.state(db, "x")["id"] == "x"     # this process finds the same daemon
    assert live_fenceqd(db) == [pid]


SEED_STEPS = """
from fenceq import service as s
p = PATH
s.init_db(p); s.init_db(p)                                             # 1
assert s.enqueue(p, "job") is True and s.enqueue(p, "job") is False    # 2
assert s.state(p, "none") is None and s.state(p, "job")["done"] == 0   # 3
try:
    s.claim(p, "job", "a", 3, 0); raise SystemExit("no ValueError")
except ValueError:
    pass
f1 = s.claim(p, "job", "a", 3, 4)                                      # 4: until 7
assert s.claim(p, "job", "b", 6, 4) is None
assert s.renew(p, "job", "a", f1, 5, 2) is True                        # 5: until 7
f2 = s.claim(p, "job", "b", 7, 4)                                      # now == until
assert f2 == f1 + 1 and s.renew(p, "job", "a", f1, 7.5, 2) is False
assert s.complete(p, "job", "b", f2, 8, "b") is True                   # 6
assert s.complete(p, "job", "a", f1, 9, "a") is False and s.state(p, "job")["result"] == "b"
s.enqueue(p, "rel"); f = s.claim(p, "rel", "x", 1, 9)                  # 7
assert s.release(p, "rel", "x", f) is True and s.state(p, "rel")["fence"] == f
r = s.claim_many(p, "new", ["u", "v", "w"], 1, 1)                      # 8: missing job
s.enqueue(p, "new"); r = s.claim_many(p, "new", ["u", "v", "w"], 1, 1)
assert sorted(r, key=str) == [1, None, None], r
print("seed ok")
"""


def test_seed_steps_from_a_fresh_interpreter(db: str):
    """The eight steps in a new /usr/bin/python3 process (no state from this suite)."""
    out = run_python(SEED_STEPS.replace("PATH", repr(db)))
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == "seed ok"


def test_two_processes_at_once_end_with_one_daemon(db: str):
    """Several processes calling fenceq.service on the same new path at once end with
    exactly one daemon (the daemon's lock decides; the losers exit)."""
    start_at = time.time() + 1.5
    code = (f"import time, json\nfrom fenceq import service\n"
            f"time.sleep(max(0, {start_at!r} - time.time()))\n"
            f"r = service.enqueue({db!r}, 'race')\n"
            f"print(json.dumps([r, service.claim({db!r}, 'race', 'p', 1, 5)]))\n")
    procs = [subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(PACKAGE_DIR)!r})\n" + code],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=40)
        assert p.returncode == 0, err.decode()
        outputs.append(json.loads(out))
    assert sorted(o[0] for o in outputs) == [False, False, True]      # one enqueue inserted
    assert sorted(o[1] for o in outputs if o[1] is not None) == [1]   # one claim won
    assert wait_until(lambda: len(live_fenceqd(db)) <= 1, 5)
    assert len(live_fenceqd(db)) == 1


def test_idle_daemon_exits_and_is_started_again(db: str, monkeypatch):
    """A daemon started by the module exits after FENCEQ_IDLE_EXIT seconds without
    requests, removing its socket; the next call starts a new one; no row changed."""
    monkeypatch.setenv("FENCEQ_IDLE_EXIT", "1")
    service.init_db(db)
    service.enqueue(db, "idle")
    f = service.claim(db, "idle", "w", 5, 100)
    (pid,) = live_fenceqd(db)
    assert wait_until(lambda: not live_fenceqd(db), 6, 0.05), "the daemon did not idle out"
    assert not os.path.exists(db + ".sock")
    assert service.state(db, "idle")["fence"] == f
    (pid2,) = live_fenceqd(db)
    assert pid2 != pid


def test_missing_binary_is_reported(db: str, monkeypatch):
    monkeypatch.setenv("FENCEQD", os.path.join(os.path.dirname(db), "no-such-fenceqd"))
    with pytest.raises(FileNotFoundError) as e:
        service.init_db(db)
    assert "FENCEQD" in str(e.value)


def test_daemon_that_cannot_start_is_reported(tmp_dir: str):
    """A daemon that fails (here: the database path is a directory) is reported with
    its own reason from the log, not as a hang."""
    bad = os.path.join(tmp_dir, "dir.db")
    os.mkdir(bad)
    t0 = time.monotonic()
    with pytest.raises(fenceq.FenceqError) as e:
        service.enqueue(bad, "x")
    assert time.monotonic() - t0 < 20
    assert e.value.code == "unavailable" and "fenceqd" in e.value.message


def test_daemon_shutting_down_under_a_call_is_retried(db: str):
    """A call that meets its daemon shutting down (answered `unavailable`: nothing was
    applied) starts a new daemon and is retried; the caller just sees its result.
    The shutdown is timed between the module's readiness ping and the request."""
    service.init_db(db)
    (pid,) = live_fenceqd(db)
    attempts = []

    def enqueue_during_shutdown(client: fenceq.Client) -> bool:
        attempts.append(live_fenceqd(db))
        if len(attempts) == 1:                  # after the ping, before the request
            stop_process(pid)

            def stop() -> None:
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)

            threading.Timer(0.3, stop).start()
        return client.enqueue("during-shutdown")

    assert service._connection(db).call(enqueue_during_shutdown) is True
    assert len(attempts) == 2 and attempts[0] == [pid] and pid not in attempts[1]
    assert service.state(db, "during-shutdown")["id"] == "during-shutdown"
    assert len(live_fenceqd(db)) == 1


def test_killed_daemon_is_replaced_by_the_next_call(db: str):
    """A daemon killed with -9 (stale socket file, no answer) is replaced by the next
    call, even one made right after a successful call; no acknowledged change is lost."""
    service.init_db(db)
    service.enqueue(db, "k9")
    f = service.claim(db, "k9", "w", 1, 50)
    (pid,) = live_fenceqd(db)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not live_fenceqd(db), 5)
    assert os.path.exists(db + ".sock")          # left behind by the killed daemon
    t0 = time.monotonic()
    assert service.renew(db, "k9", "w", f, 2, 50) is True
    assert time.monotonic() - t0 < 5
    assert service.state(db, "k9")["until"] == 52.0
    (pid2,) = live_fenceqd(db)
    assert pid2 != pid


def test_long_path_uses_short_socket(tmp_dir: str):
    """A path too long for a Unix socket gets a short /tmp socket derived from its hash."""
    deep = os.path.join(tmp_dir, *(["d" * 40] * 3))
    os.makedirs(deep)
    path = os.path.join(deep, "seed.db")
    endpoint = service.endpoint_for(path)
    assert endpoint.startswith(f"ipc:///tmp/fenceq-{os.getuid()}-") and len(endpoint) < 100
    assert service.endpoint_for(path) == endpoint
    try:
        assert service.enqueue(path, "deep") is True
        assert service.state(path, "deep")["fence"] == 0
    finally:
        for pid in live_fenceqd(path):
            os.kill(pid, signal.SIGTERM)
        assert wait_until(lambda: not live_fenceqd(path), 10)
    assert not os.path.exists(endpoint[len("ipc://"):])


def test_service_missing_directory_is_an_error(tmp_dir: str):
    with pytest.raises(FileNotFoundError):
        service.enqueue(os.path.join(tmp_dir, "no", "such", "dir.db"), "x")


def test_service_refuses_a_server_clock_daemon(start_daemon, tmp_dir: str):
    """The module needs client clock (C2.2); a server-clock daemon on the derived
    socket is reported, not silently used."""
    db = os.path.join(tmp_dir, "clocked.db")
    d = start_daemon(name="clocked", clock="server", endpoint=service.endpoint_for(db))
    with pytest.raises(fenceq.FenceqError) as e:
        service.enqueue(d.db, "x")
    assert "clock" in e.value.message


def test_checkout_fenceqd_only_inside_a_checkout(tmp_path):
    # issue 30: installed in a venv, the error named .venv/lib/build/bin/fenceqd.
    from fenceq.service import _checkout_fenceqd
    repo = tmp_path / "repo"
    (repo / "clients" / "python" / "fenceq").mkdir(parents=True)
    (repo / "CMakeLists.txt").write_text("project(x)\n")
    module = repo / "clients" / "python" / "fenceq" / "service.py"
    module.write_text("")
    assert _checkout_fenceqd(str(module)) == repo.resolve() / "build" / "bin" / "fenceqd"
    venv = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "fenceq"
    venv.mkdir(parents=True)
    (venv / "service.py").write_text("")
    assert _checkout_fenceqd(str(venv / "service.py")) is None


def test_find_fenceqd_outside_a_checkout_names_no_build_path(monkeypatch, tmp_path):
    import fenceq.service as service
    monkeypatch.delenv("FENCEQD", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no fenceqd on it
    monkeypatch.setattr(service, "__file__", str(tmp_path / "site-packages" / "fenceq" / "service.py"))
    with pytest.raises(FileNotFoundError) as err:
        service.find_fenceqd()
    assert "build" not in str(err.value)
    assert "FENCEQD" in str(err.value) and "PATH" in str(err.value)
