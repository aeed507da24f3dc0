"""The application's outbox (issue 34; docs/contract.md C3.21).

The application keeps its data in its own database, PostgreSQL (psycopg2)
or SQLite (Python's sqlite3), and writes a row of fenceq_outbox in the same
transaction as its own rows; a real fenceqd ($FENCEQD) on its own SQLite
file, started with --outbox, makes each committed row exactly one job, and a
rolled-back row never one, whatever kill -9 and (SQLite) power cuts on
fenceq-lossyfs ($FENCEQ_LOSSYFS) do. PostgreSQL is ctest's throw-away
cluster, each test on a schema of its own (conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import psycopg2
import pytest

from app_support import Fenceqd, LossyMount, with_params

import fenceq  # noqa: E402  (app_support puts the client on the path)

KINDS = ["sqlite", "postgresql"]


def outbox_schema(kind: str) -> str:
    """fenceqd's migration helper: the DDL an application runs itself."""
    return subprocess.run([os.environ["FENCEQD"], "--outbox-schema", kind], check=True,
                          capture_output=True, text=True).stdout


class App:
    """The application's database: a SQLite file in `where`, or the schema's
    PostgreSQL URI; its own table `orders`, and fenceq_outbox from
    --outbox-schema (as the application's migrations would create it)."""

    def __init__(self, kind: str, where) -> None:
        self.kind = kind
        self.uri = str(where / "app.db") if kind == "sqlite" else where[0]
        self.p = "?" if kind == "sqlite" else "%s"
        conn = self.connect()
        self.begin(conn)
        cur = conn.cursor()
        cur.execute("CREATE TABLE IF NOT EXISTS orders(id text PRIMARY KEY, total int)")
        if kind == "sqlite":
            conn.executescript(outbox_schema(kind))
        else:
            cur.execute(outbox_schema(kind))
        conn.commit()
        conn.close()

    def connect(self):
        if self.kind == "postgresql":
            return psycopg2.connect(self.uri)
        # Transactions opened by begin(), BEGIN IMMEDIATE: a deferred one
        # whose snapshot is stale when it comes to write fails at once
        # (SQLITE_BUSY_SNAPSHOT) instead of waiting its turn.
        conn = sqlite3.connect(self.uri, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # a commit that returned survives a power cut
        return conn

    def begin(self, conn) -> None:
        if self.kind == "sqlite" and not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")

    def outbox(self, conn, id: str, *, queue: str = "orders", payload=None, **cols) -> None:
        """Adds a row in `conn`'s transaction (opened when none is)."""
        self.begin(conn)
        if isinstance(payload, bytes) and self.kind == "postgresql":
            cols["payload_bytes"] = psycopg2.Binary(payload)
        elif payload is not None:
            cols["payload"] = payload
        names = ["id", "queue", *cols]
        conn.cursor().execute(
            f"INSERT INTO fenceq_outbox({', '.join(names)}) VALUES ({', '.join([self.p] * len(names))})",
            (id, queue, *cols.values()))

    def order(self, conn, oid: str) -> None:
        self.begin(conn)
        conn.cursor().execute(f"INSERT INTO orders VALUES ({self.p}, 1)", (oid,))
        self.outbox(conn, "job-" + oid, payload=oid)

    def query(self, sql: str) -> list:
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return cur.fetchall()
        finally:
            conn.close()


@pytest.fixture(params=KINDS)
def app(request, folder):
    where = folder if request.param == "sqlite" else request.getfixturevalue("schema")
    return App(request.param, where)


def daemon(app: App, folder: Path, *extra: str, db: Path | None = None) -> Fenceqd:
    return Fenceqd(["--db", str(db or folder / "q.db"), "--outbox", app.uri, *extra], folder, "d")


@contextlib.contextmanager
def serving(app: App, folder: Path, *extra: str, db: Path | None = None):
    """daemon(), stopped at the end whatever happened."""
    d = daemon(app, folder, *extra, db=db)
    try:
        yield d
    finally:
        d.stop()


def outbox_stats(d: Fenceqd) -> dict:
    with fenceq.Client(d.endpoint) as c:
        return c.stats()["outbox"]


def until(cond, timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def test_committed_rows_become_jobs_and_a_rolled_back_one_never(app, folder):
    with serving(app, folder) as d:
        conn = app.connect()
        app.outbox(conn, "job-1", queue="mail", payload="hello", priority=3, max_attempts=2,
                   grp="customer-7", max_runtime=60)
        app.outbox(conn, "job-2", queue="mail", payload=b"\x00\x01\xff")
        app.outbox(conn, "job-3", queue="later", delay=30)
        conn.commit()
        app.outbox(conn, "job-rolled", queue="mail")
        conn.rollback()
        until(lambda: outbox_stats(d)["drained"] == 3, what="3 rows drained")
        with fenceq.Client(d.endpoint) as c:
            one = c.job("job-1")
            assert (one["queue"], one["priority"], one["max_attempts"]) == ("mail", 3, 2)
            assert one["payload"] == "hello" and one.get("group") == "customer-7"
            assert c.job("job-2")["payload"] == b"\x00\x01\xff"
            assert c.job("job-3")["state"] == "delayed"
            assert c.job("job-rolled") is None
            got = c.claim_next("mail", "w", 30)
            assert got["id"] == "job-1" and got["fence"] == 1
            metrics = c.metrics()
        until(lambda: outbox_stats(d)["pending"] == 0, what="pending 0")
        st = outbox_stats(d)
        assert st["rejected"] == 0 and st["lag"] == 0 and st["high_water"] >= 3
        assert app.query("SELECT count(*) FROM fenceq_outbox") == [(0,)]
        assert re.search(r"^fenceq_outbox_drained_total 3$", metrics, re.M)
        assert re.search(r"^fenceq_outbox_pending \d+$", metrics, re.M)


def test_a_commit_wakes_the_drain_and_a_parked_claim(app, folder):
    # On PostgreSQL a look every 30 s: only the insert trigger's NOTIFY can
    # be in time. On SQLite PRAGMA data_version, looked at every 50 ms.
    extra = ["--outbox-poll", "30"] if app.kind == "postgresql" else []
    got: dict = {}
    with serving(app, folder, *extra) as d:

        def park() -> None:
            with fenceq.Client(d.endpoint, timeout=30) as c:
                t0 = time.monotonic()
                got["job"] = c.claim_next("wake", "w", 30, wait=20)
                got["took"] = time.monotonic() - t0

        time.sleep(0.5)  # the drain's first look is over; it waits now
        t = threading.Thread(target=park)
        t.start()
        time.sleep(0.3)
        conn = app.connect()
        app.outbox(conn, "w-1", queue="wake")
        conn.commit()
        t.join(timeout=30)
        assert got["job"] is not None and got["job"]["id"] == "w-1"
        assert got["took"] < 10, got["took"]


BLOCK_DELETE = {
    "sqlite": ["CREATE TABLE test_switch(blocked INTEGER)", "INSERT INTO test_switch VALUES (1)",
               "CREATE TRIGGER test_block BEFORE DELETE ON fenceq_outbox "
               "WHEN (SELECT blocked FROM test_switch) = 1 "
               "BEGIN SELECT RAISE(ABORT, 'deletes blocked by the test'); END"],
    "postgresql": ["CREATE TABLE test_switch(blocked int)", "INSERT INTO test_switch VALUES (1)",
                   "CREATE FUNCTION test_block() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                   "IF (SELECT blocked FROM test_switch) = 1 THEN "
                   "RAISE EXCEPTION 'deletes blocked by the test'; END IF; RETURN OLD; END $$",
                   "CREATE TRIGGER test_block BEFORE DELETE ON fenceq_outbox "
                   "FOR EACH ROW EXECUTE FUNCTION test_block()"],
}


def test_a_row_whose_job_was_made_is_never_a_job_twice(app, folder):
    """The row's job commits, but the row cannot be deleted (a trigger of the
    test refuses it); the job is done and purged; kill -9; then the row is
    read again by a new fenceqd: found drained, deleted, no second job."""
    conn = app.connect()
    app.begin(conn)
    for sql in BLOCK_DELETE[app.kind]:
        conn.cursor().execute(sql)
    conn.commit()
    with serving(app, folder) as d:
        app.outbox(conn, "once", queue="q")
        conn.commit()
        with fenceq.Client(d.endpoint) as c:
            until(lambda: c.job("once") is not None, what="the job")
            job = c.claim_next("q", "w", 30)
            assert job["id"] == "once" and c.complete("once", "w", job["fence"], "done")
            assert c.purge(0, queue="q") == 1
            assert c.job("once") is None
        until(lambda: "deletes blocked by the test" in d.log.read_text(), what="a refused delete")
        assert app.query("SELECT id FROM fenceq_outbox") == [("once",)]
        d.kill9()
        app.begin(conn)
        conn.cursor().execute("UPDATE test_switch SET blocked = 0")
        conn.commit()
        d.start()
        until(lambda: app.query("SELECT count(*) FROM fenceq_outbox") == [(0,)],
              what="the row deleted")
        with fenceq.Client(d.endpoint) as c:
            assert c.job("once") is None
            assert c.claim_next("q", "w", 30) is None
        assert outbox_stats(d)["drained"] == 0  # found drained by the run before


def test_a_row_that_cannot_be_a_job_is_refused_or_dropped_and_counted(app, folder):
    with serving(app, folder) as d:
        conn = app.connect()
        # The schema's CHECKs refuse what the protocol's limits refuse, in the
        # application's own transaction.
        for bad in ({"id": ""}, {"id": "x", "queue": ""}, {"id": "x", "delay": -1},
                    {"id": "x", "priority": 2 ** 31}, {"id": "x", "max_attempts": -1},
                    {"id": "x", "payload": "p" * (256 * 1024 + 1)}):
            with pytest.raises((sqlite3.IntegrityError, psycopg2.IntegrityError)):
                app.outbox(conn, **{"queue": "q", **bad})
            conn.rollback()
        # What no CHECK can tell (a periodic job's id form): dropped at the
        # drain, logged and counted; the next row is a job all the same.
        app.outbox(conn, "nightly@2026-03-27T01:30Z", queue="q")
        app.outbox(conn, "fine", queue="q")
        conn.commit()
        until(lambda: outbox_stats(d)["rejected"] == 1 and outbox_stats(d)["drained"] == 1)
        with fenceq.Client(d.endpoint) as c:
            assert c.job("fine") is not None and c.job("nightly@2026-03-27T01:30Z") is None
        until(lambda: app.query("SELECT count(*) FROM fenceq_outbox") == [(0,)])
        assert "cannot be a job and is dropped" in d.log.read_text()


def test_large_payloads_are_drained_in_pages_of_a_few_mib(app, folder):
    with serving(app, folder) as d:
        conn = app.connect()
        for i in range(40):  # 8 MiB: more than one page (Outbox::kPageBytes, 4 MiB)
            app.outbox(conn, f"big-{i}", queue="big", payload=chr(65 + i % 26) * (200 * 1024))
        conn.commit()
        until(lambda: outbox_stats(d)["drained"] == 40, what="40 large rows drained")
        with fenceq.Client(d.endpoint) as c:
            assert c.job("big-39")["payload"] == chr(65 + 39 % 26) * (200 * 1024)
        until(lambda: app.query("SELECT count(*) FROM fenceq_outbox") == [(0,)])


def test_a_postgresql_role_with_select_and_delete_on_the_table_is_enough(schema, folder):
    app = App("postgresql", schema)  # the application's migrations made the table
    uri, name = schema
    role = f"{name}_drain"
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {name} TO {role}; "
                    f"GRANT SELECT, DELETE ON fenceq_outbox TO {role}")
    try:
        app.uri = with_params(uri, user=role)
        with serving(app, folder) as d:
            conn = psycopg2.connect(uri)
            app.outbox(conn, "granted", queue="q")
            conn.commit()
            conn.close()
            until(lambda: outbox_stats(d)["drained"] == 1, what="the row drained")
            until(lambda: outbox_stats(d)["pending"] == 0, what="the row deleted")
            assert " error " not in d.log.read_text()  # spdlog's level, as --outbox logs failures
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
        admin.close()


def test_outbox_is_refused_with_the_postgresql_store_or_a_lossy_sync(folder):
    for args, message in ((["--db", "postgresql:///x", "--outbox", "app.db"], "SQLite store"),
                          (["--db", str(folder / "q.db"), "--sync", "normal", "--outbox",
                            "app.db"], "--sync full")):
        out = subprocess.run([os.environ["FENCEQD"], *args], capture_output=True, text=True,
                             timeout=10)
        assert out.returncode == 2 and message in out.stderr, out.stderr


def race(app: App, d: Fenceqd, *, rows: int, mount: LossyMount | None = None) -> tuple[set, set]:
    """8 application threads write `rows` outbox rows (2 orders a transaction,
    one transaction in 8 rolled back, each open for up to 30 ms) while fenceqd is killed (-9) every ~2 s
    and, with `mount`, every other kill is followed by a power cut (the
    writers wait, their connections closed, as a cut stops them too)."""
    committed: set[str] = set()
    rolled_back: set[str] = set()
    lock = threading.Lock()
    running = threading.Event()
    running.set()
    idle = [threading.Event() for _ in range(8)]
    deadline = time.monotonic() + 150
    per_thread = rows // 8

    def application(t: int) -> None:
        rnd = random.Random(t)
        written, conn = 0, None
        while written < per_thread and time.monotonic() < deadline:
            if not running.is_set():
                if conn is not None:
                    conn.close()
                    conn = None
                idle[t].set()
                running.wait(timeout=60)
                idle[t].clear()
                continue
            conn = conn or app.connect()
            oids = [f"o-{t}-{written + k}" for k in range(2)]
            for oid in oids:
                app.order(conn, oid)
            written += 2
            # The writing spans ~10 s (~5 kills). On PostgreSQL inside the
            # transaction: they overlap and commit out of seq order. SQLite
            # has one writer at a time: outside it, or the others starve.
            pause = rnd.uniform(0, 0.03)
            if app.kind == "postgresql":
                time.sleep(pause)
            if rnd.random() < 0.125:
                conn.rollback()
                with lock:
                    rolled_back.update(oids)
            else:
                conn.commit()
                with lock:
                    committed.update(oids)
            if app.kind == "sqlite":
                time.sleep(pause)
        if conn is not None:
            conn.close()
        idle[t].set()

    apps = [threading.Thread(target=application, args=(t,)) for t in range(8)]
    for t in apps:
        t.start()
    kills = 0
    while any(t.is_alive() for t in apps) and time.monotonic() < deadline:
        time.sleep(random.uniform(1.5, 2.5))
        kills += 1
        if mount is not None and kills % 2 == 0:
            running.clear()
            for e in idle:
                assert e.wait(timeout=60)
            d.kill9()
            mount.cut()
            d.start()
            running.set()
        else:
            d.kill9()
            d.start()
    for t in apps:
        t.join(timeout=60)
    assert kills >= 3 and len(committed) + len(rolled_back) == rows
    return committed, rolled_back


def check_exactly_once(app: App, d: Fenceqd, db: Path, committed: set, rolled_back: set) -> None:
    until(lambda: app.query("SELECT count(*) FROM fenceq_outbox") == [(0,)], timeout=60,
          what="the outbox drained")
    until(lambda: outbox_stats(d)["pending"] == 0 and outbox_stats(d)["lag"] == 0,
          what="the lag back to 0")

    def recorded() -> int:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as q:
            return q.execute("SELECT count(*) FROM outbox_drained").fetchone()[0]

    # Every drained seq is forgotten once its row is gone for good (a start
    # forgets those a kill left recorded).
    until(lambda: recorded() == 0, what="outbox_drained emptied")
    d.stop()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as q:
        jobs = [r[0] for r in q.execute("SELECT id FROM jobs")]
    assert len(jobs) == len(set(jobs))
    assert set(jobs) == {"job-" + o for o in committed}
    assert not set(jobs) & {"job-" + o for o in rolled_back}
    assert {r[0] for r in app.query("SELECT id FROM orders")} == committed


def test_racing_transactions_against_kill_9_every_committed_row_one_job(app, folder):
    with serving(app, folder) as d:
        committed, rolled_back = race(app, d, rows=10000)
        assert committed and rolled_back
        check_exactly_once(app, d, folder / "q.db", committed, rolled_back)


def test_racing_transactions_against_kill_9_and_power_cuts_on_sqlite(folder):
    """Both files on fenceq-lossyfs: fenceqd's store and the application's."""
    mount = LossyMount()
    try:
        app = App("sqlite", mount.mnt)
        db = mount.mnt / "q.db"
        with serving(app, folder, db=db) as d:
            committed, rolled_back = race(app, d, rows=10000, mount=mount)
            assert mount.cuts >= 2
            check_exactly_once(app, d, db, committed, rolled_back)
    finally:
        mount.close()
