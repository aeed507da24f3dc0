"""`fenceq backup` while fenceqd serves, and restore-safe fences (C1.5,
docs/operating.md, "Backup, restore and moving to PostgreSQL"): a real
fenceqd on a temporary folder, over its socket, and the fenceq tool
($FENCEQ).

Each way of copying the database is taken at T1; claims go on after it
(fences rise) with one lease left open; the daemon stops; the T1 copy is
put back and the daemon started on it. Then every new claim's fence must lie
above every fence handed out before, and the open lease's renew and complete
must be refused. A restart of the database itself (clean stop, kill -9 with
--sync full, a state file lost or behind the database) must not raise the
epoch."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import psycopg2

from app_support import Fenceqd, base_uri

import fenceq  # noqa: E402  (app_support puts the client on the path)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_settle_bounded import Pinger  # noqa: E402

EPOCH = 1 << 32
TOOL = os.environ.get("FENCEQ", "fenceq")
BACKUP_N = int(os.environ.get("FENCEQ_BACKUP_N", "100000"))


def backup(db: Path, copy: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([TOOL, "backup", "--db", str(db), str(copy), *extra],
                          capture_output=True, text=True, timeout=600)


def enqueue(c: fenceq.Client, ids: list[str], payload: str = "") -> None:
    for i in range(0, len(ids), 1000):
        c.enqueue_many([{"id": j, "payload": payload} for j in ids[i:i + 1000]])


def rm_db(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(db) + suffix)
        if p.exists():
            p.unlink()


def copy_files(src: Path, dst: Path) -> None:
    """The database and its log, if any, as files (cp)."""
    rm_db(dst)
    for suffix in ("", "-wal"):
        s = Path(str(src) + suffix)
        if s.exists():
            shutil.copyfile(s, str(dst) + suffix)


def test_backup_while_eight_workers_complete_next(tmp_path):
    db = tmp_path / "jobs.db"
    d = Fenceqd(["--db", str(db)], tmp_path, "d")
    try:
        with fenceq.Client(d.endpoint, timeout=30) as c:
            enqueue(c, [f"j{i:07d}" for i in range(BACKUP_N)], "x" * 200)
        done: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def worker(n: int) -> None:
            with fenceq.Client(d.endpoint, timeout=30) as c:
                job = c.claim_next("default", f"w{n}", 60)
                while job is not None and not stop.is_set():
                    r = c.complete_and_claim_next(job["id"], f"w{n}", job["fence"], "ok",
                                                  "default", 60)
                    if r["completed"]:
                        with lock:
                            done.append(job["id"])
                    job = r["next"]

        workers = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for w in workers:
            w.start()
        time.sleep(1.0)
        with lock:
            acked = list(done)
        pinger = Pinger(d.endpoint)
        t = time.monotonic()
        out = backup(db, tmp_path / "copy.db")
        took = time.monotonic() - t
        figures = pinger.finish()
        stop.set()
        for w in workers:
            w.join(60)
        assert out.returncode == 0, out.stderr
        print(f"\nbackup of {BACKUP_N} jobs: {out.stdout.strip()} in {took:.2f} s; "
              f"{len(done) - len(acked)} completes beside it; pings during it: {figures}")
        assert (tmp_path / "copy.db").exists() and not list(tmp_path.glob("copy.db.part-*"))
        copy = sqlite3.connect(tmp_path / "copy.db")
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert copy.execute("SELECT value FROM fenceq_meta WHERE key = 'backup_taken'").fetchone()
        assert copy.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == BACKUP_N
        done_in_copy = {r[0] for r in copy.execute("SELECT id FROM jobs WHERE done = 1")}
        assert len(acked) > 0
        missing = [i for i in acked if i not in done_in_copy]
        assert not missing, missing[:5]
        copy.close()
        # An existing FILE is refused, and overwritten with --force.
        again = backup(db, tmp_path / "copy.db")
        assert again.returncode == 1 and "--force" in again.stderr
        assert backup(db, tmp_path / "copy.db", "--force").returncode == 0
    finally:
        d.stop()


def claims_before_t1(d: Fenceqd) -> None:
    """r0..r9 enqueued, each claimed and released three times: fences 1..3."""
    with fenceq.Client(d.endpoint, timeout=10) as c:
        enqueue(c, [f"r{i}" for i in range(10)])
        for i in range(10):
            for k in range(3):
                f = c.claim(f"r{i}", "early", 60)
                assert c.release(f"r{i}", "early", f)


def claims_after_t1(c: fenceq.Client) -> tuple[int, tuple[str, str, int]]:
    """Claims that raise fences past the copy's: each of r0..r9 claimed and
    released five times, then r0 leased for an hour. Answers the highest
    fence handed out and the open lease."""
    high = 0
    for i in range(10):
        for k in range(5):
            f = c.claim(f"r{i}", f"late{k}", 60)
            assert f is not None
            high = max(high, f)
            assert c.release(f"r{i}", f"late{k}", f)
    f = c.claim("r0", "holder", 3600)
    assert f is not None
    return max(high, f), ("r0", "holder", f)


def check_restored(d: Fenceqd, high: int, lease: tuple[str, str, int], why: str) -> None:
    log = d.log.read_text()
    assert why in log, log[-2000:]
    assert "every fence raised to" in log
    with fenceq.Client(d.endpoint, timeout=10) as c:
        id_, owner, fence = lease
        assert not c.renew(id_, owner, fence, 60)
        assert not c.complete(id_, owner, fence, "stale")
        for i in range(10):
            f = c.claim(f"r{i}", "after", 60)
            assert f is not None and f > high, (f, high)
        assert c.enqueue("brand-new")
        assert c.claim("brand-new", "after", 60) > high


@pytest.mark.parametrize("method", ["backup", "cp_stopped", "snapshot_running", "new_path"])
def test_a_restored_copy_hands_out_no_fence_twice(tmp_path, method):
    db = tmp_path / "jobs.db"
    copy = tmp_path / "t1.db"
    d = Fenceqd(["--db", str(db)], tmp_path, "d")
    try:
        claims_before_t1(d)
        # T1
        if method == "backup":
            out = backup(db, copy)
            assert out.returncode == 0, out.stderr
        elif method == "cp_stopped":
            d.stop()
            copy_files(db, copy)
            d.start()
        elif method == "snapshot_running":
            copy_files(db, copy)  # no write in flight: as a file system snapshot
        elif method == "new_path":
            d.stop()
            (tmp_path / "elsewhere").mkdir()
            copy_files(db, tmp_path / "elsewhere" / "jobs.db")
            d.start()
        with fenceq.Client(d.endpoint, timeout=10) as c:
            high, lease = claims_after_t1(c)
        if method == "snapshot_running":
            time.sleep(2.5)  # the run's beat (every second while it writes) is on disk
            d.kill9()
        else:
            d.stop()
        # Restore the T1 copy and start on it.
        if method == "new_path":
            target = tmp_path / "elsewhere" / "jobs.db"
            assert not Path(str(target) + ".fenceq-state").exists()
            d2 = Fenceqd(["--db", str(target), "--restored"], tmp_path / "elsewhere", "d2")
            try:
                check_restored(d2, high, lease, "started with --restored")
            finally:
                d2.stop()
            return
        rm_db(db)
        if method == "backup":
            shutil.copyfile(copy, db)
            why = "a copy made by `fenceq backup`"
        else:
            copy_files(copy, db)
            why = "is older than its state file"
        d.start()
        check_restored(d, high, lease, why)
        # The mark is cleared and the state file rewritten: the next start is
        # a restart, not another restore.
        d.stop()
        d.start()
        assert d.log.read_text().count("every fence raised to") == 1
    finally:
        d.stop()


@pytest.mark.parametrize("how", ["clean", "kill9_full", "state_lost", "state_behind"])
def test_a_restart_of_the_database_itself_raises_no_epoch(tmp_path, how):
    db = tmp_path / "jobs.db"
    state = Path(str(db) + ".fenceq-state")
    d = Fenceqd(["--db", str(db), "--sync", "full"], tmp_path, "d")
    try:
        with fenceq.Client(d.endpoint, timeout=10) as c:
            c.enqueue("a")
            f1 = c.claim("a", "w", 60)
            assert c.release("a", "w", f1)
        assert state.exists()
        old_state = state.read_text()
        with fenceq.Client(d.endpoint, timeout=10) as c:
            f2 = c.claim("a", "w", 3600)
        time.sleep(1.5)  # a beat: the state file moves on
        if how == "kill9_full":
            d.kill9()
        else:
            d.stop()
        if how == "state_lost":
            state.unlink()
        elif how == "state_behind":
            state.write_text(old_state)
        d.start()
        assert "every fence raised to" not in d.log.read_text()
        with fenceq.Client(d.endpoint, timeout=10) as c:
            assert c.renew("a", "w", f2, 60)  # the lease lives on
            assert c.release("a", "w", f2)
            assert c.claim("a", "w2", 60) == f2 + 1 < EPOCH
        assert state.exists()
    finally:
        d.stop()


def postgres_database(name: str) -> str:
    """A fresh database of the test cluster (dropped first if there), its URI."""
    uri = base_uri()
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        cur.execute(f"CREATE DATABASE {name}")
    admin.close()
    base, _, query = uri.partition("?")
    return base[:base.rindex("/") + 1] + name + ("?" + query if query else "")


def test_postgres_a_dump_restored_into_a_fresh_database_with_restored_hands_out_no_fence_twice(
        tmp_path):
    """PostgreSQL (C1.5): pg_dump at T1, claims go on (one lease left open),
    the dump restored into a fresh database and a sidecar started on it with
    --restored. No fence is handed out twice, an id first enqueued after T1
    (forgotten by the dump) starts above them too, and the next start, with
    no flag, raises nothing again."""
    src = postgres_database("fq_restore_src")
    dst = postgres_database("fq_restore_dst")
    dump = tmp_path / "t1.dump"
    d = Fenceqd(["--store", "postgres", "--pg-dsn", src], tmp_path, "src")
    try:
        claims_before_t1(d)
        # T1: a dump of the serving database.
        out = subprocess.run(["pg_dump", "-Fc", "-d", src, "-f", str(dump)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        with fenceq.Client(d.endpoint, timeout=10) as c:
            high, lease = claims_after_t1(c)
            assert c.enqueue("brand-new")  # gone in the dump: fences 1..3 forgotten
            for k in range(3):
                f = c.claim("brand-new", "late", 60)
                assert f is not None and c.release("brand-new", "late", f)
    finally:
        d.stop()
    out = subprocess.run(["pg_restore", "--no-owner", "-d", dst, str(dump)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    d2 = Fenceqd(["--store", "postgres", "--pg-dsn", dst, "--restored"], tmp_path, "dst")
    try:
        check_restored(d2, high, lease, "started with --restored")
        d2.args = [a for a in d2.args if a != "--restored"]
        d2.stop()
        d2.start()
        assert d2.log.read_text().count("every fence raised to") == 1
        with fenceq.Client(d2.endpoint, timeout=10) as c:
            assert c.enqueue("after-restart")
            assert c.claim("after-restart", "w", 60) > high  # the floor holds
    finally:
        d2.stop()
