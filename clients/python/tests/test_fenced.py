"""fenceq.fenced: writes to the application's own table, fenced by the job's
fence, in real SQLite files and a real PostgreSQL database (issue 34).

The stale-worker story with a real fenceqd: worker A claims and stalls, its
lease ends, B claims (a higher fence), writes the row and completes; A wakes
and writes: the application's database refuses A's write and the row keeps
B's, with fenceqd running and with fenceqd stopped before A writes.

PostgreSQL: conftest's pg_uri fixture, a throw-away cluster of the run's own
(scripts/pg_cluster.sh start in a /tmp folder, a Unix socket only), started
once for the session by the first test that needs it and destroyed at the end.
Without psycopg2 (Debian's python3-psycopg2) or PostgreSQL's server the
PostgreSQL tests fail; they do not skip.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from typing import Any, Iterator, List, Tuple

import pytest

import fenceq
from fenceq.fenced import quote_identifier
from conftest import Daemon

JOB = "invoice-42"


def psycopg2_module() -> Any:
    try:
        import psycopg2
    except ImportError:  # a failure, not a skip: make test installs it
        pytest.fail("psycopg2 is missing: apt-get install python3-psycopg2")
    return psycopg2


class Store:
    """One application database: ``connect()`` opens a connection (each
    worker its own), ``table`` is a fresh table of this test."""

    def __init__(self, kind: str, tmp_dir: str, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.table = "invoices_" + uuid.uuid4().hex[:12]
        self.opened: List[Any] = []
        if kind == "sqlite":
            self.path = os.path.join(tmp_dir, "app.db")
        else:
            self.psycopg2 = psycopg2_module()
            self.uri = request.getfixturevalue("pg_uri")

    def connect(self) -> Any:
        if self.kind == "sqlite":
            db = sqlite3.connect(self.path, timeout=10)
        else:
            db = self.psycopg2.connect(self.uri)
        self.opened.append(db)
        return db

    def create(self, db: Any) -> None:
        """The application's table: NOT NULL columns the worker does not
        write (customer), and the fence column, NULL until a fenced write."""
        cur = db.cursor()
        cur.execute(f"CREATE TABLE {self.table} (id TEXT PRIMARY KEY, customer TEXT NOT NULL, "
                    "status TEXT NOT NULL, paid_by TEXT, fence BIGINT)")
        db.commit()

    def row(self, key: str = JOB) -> Any:
        """The committed row, read on a fresh connection."""
        db = self.connect()
        try:
            cur = db.cursor()
            mark = "?" if self.kind == "sqlite" else "%s"
            cur.execute(f"SELECT customer, status, paid_by, fence FROM {self.table} WHERE id = {mark}",
                        (key,))
            return cur.fetchone()
        finally:
            db.close()

    def close(self) -> None:
        for db in self.opened:
            try:
                db.close()
            except Exception:  # already closed
                pass


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_dir: str) -> Iterator[Store]:
    s = Store(request.param, tmp_dir, request)
    yield s
    s.close()


def pay(mode: str, db: Any, table: str, worker: str, fence: int) -> bool:
    """The worker's side effect, through the helper; committed when applied."""
    values = {"status": "paid", "paid_by": worker}
    if mode == "upsert":
        applied = fenceq.fenced_upsert(db, table, {"id": JOB}, {"customer": "acme", **values}, fence)
    else:
        applied = fenceq.fenced_update(db, table, {"id": JOB}, values, fence)
    if applied:
        db.commit()
    else:
        db.rollback()
    return applied


@pytest.mark.parametrize("mode", ["upsert", "update"])
@pytest.mark.parametrize("daemon_up", [True, False], ids=["fenceqd running", "fenceqd stopped"])
def test_stale_worker_write_is_refused_by_the_application_database(
        store: Store, daemon: Daemon, mode: str, daemon_up: bool):
    """C2.4: the row refuses the stalled worker's write and keeps B's, whether
    fenceqd answers at that moment or not."""
    setup = store.connect()
    store.create(setup)
    if mode == "update":  # the application's row exists, never fenced yet
        cur = setup.cursor()
        mark = "?" if store.kind == "sqlite" else "%s"
        cur.execute(f"INSERT INTO {store.table} (id, customer, status) VALUES ({mark}, 'acme', 'open')",
                    (JOB,))
        setup.commit()
    db_a, db_b = store.connect(), store.connect()
    with daemon.client() as a, daemon.client() as b:
        assert a.enqueue(JOB)
        fence_a = a.claim(JOB, "worker-a", ttl=30, now=100)
        assert fence_a is not None                       # A stalls here
        assert b.claim(JOB, "worker-b", ttl=30, now=120) is None   # A's lease still holds
        fence_b = b.claim(JOB, "worker-b", ttl=30, now=131)        # A's lease ended at 130
        assert fence_b is not None and fence_b > fence_a
        assert pay(mode, db_b, store.table, "worker-b", fence_b) is True
        assert b.complete(JOB, "worker-b", fence_b, "paid by worker-b", now=132) is True
        if not daemon_up:
            daemon.stop()
            with fenceq.Client(daemon.endpoint, timeout=0.5) as probe:
                with pytest.raises(fenceq.FenceqError):
                    probe.ping()
        # A wakes up and writes anyway: the application's database refuses it.
        assert pay(mode, db_a, store.table, "worker-a", fence_a) is False
        if daemon_up:
            assert a.complete(JOB, "worker-a", fence_a, "paid by worker-a", now=133) is False
            assert a.state(JOB)["result"] == "paid by worker-b"
    assert store.row() == ("acme", "paid", "worker-b", fence_b)


def test_null_fence_applies_and_a_lower_fence_is_refused(store: Store):
    """A row whose fence is NULL was never fenced: the first fenced write
    applies. Then a lower fence is refused, the same fence may write again
    (a retried statement), a higher one applies."""
    db = store.connect()
    store.create(db)
    mark = "?" if store.kind == "sqlite" else "%s"
    db.cursor().execute(f"INSERT INTO {store.table} (id, customer, status) VALUES ({mark}, 'acme', 'open')",
                        (JOB,))
    db.commit()
    steps = [(5, "w5", True), (4, "w4", False), (5, "w5-again", True), (7, "w7", True), (6, "w6", False)]
    for fence, worker, expected in steps:
        assert fenceq.fenced_update(db, store.table, {"id": JOB}, {"paid_by": worker}, fence) is expected
        db.commit()
    assert store.row() == ("acme", "open", "w7", 7)
    # The upsert follows the same rule on an existing row.
    assert fenceq.fenced_upsert(db, store.table, {"id": JOB},
                                {"customer": "acme", "status": "x", "paid_by": "w6"}, 6) is False
    assert fenceq.fenced_upsert(db, store.table, {"id": JOB},
                                {"customer": "acme", "status": "paid", "paid_by": "w8"}, 8) is True
    db.commit()
    assert store.row() == ("acme", "paid", "w8", 8)


def test_update_of_a_missing_row_raises_and_writes_nothing(store: Store):
    db = store.connect()
    store.create(db)
    with pytest.raises(fenceq.RowMissing):
        fenceq.fenced_update(db, store.table, {"id": "nope"}, {"status": "paid"}, 3)
    db.commit()
    assert store.row("nope") is None


def test_cursor_qualified_table_and_odd_identifiers(store: Store):
    """A cursor instead of a connection; a qualified table and identifiers
    with quotes, spaces and % (psycopg2's paramstyle doubles it); values with
    quotes stay parameters."""
    db = store.connect()
    cur = db.cursor()
    if store.kind == "sqlite":
        cur.execute(f"ATTACH DATABASE '{store.path}.billing' AS \"bill ing\"")
    else:
        cur.execute('CREATE SCHEMA "bill ing"')
    table = ("bill ing", 'in"v%oice')
    quoted = ".".join(quote_identifier(p) for p in table)
    cur.execute(f'CREATE TABLE {quoted} ("the id" TEXT, "k2" INTEGER, "100% paid" TEXT, '
                '"my fence" BIGINT, PRIMARY KEY ("the id", "k2"))')
    db.commit()
    nasty = "x'); DROP TABLE t; --"
    key = {"the id": JOB, "k2": 7}
    assert fenceq.fenced_upsert(cur, table, key, {"100% paid": nasty}, 3, fence_column="my fence")
    assert not fenceq.fenced_upsert(cur, table, key, {"100% paid": "stale"}, 2, fence_column="my fence")
    assert fenceq.fenced_update(cur, table, key, {"100% paid": nasty + "!"}, 3, fence_column="my fence")
    db.commit()
    cur.execute(f'SELECT "100% paid", "my fence" FROM {quoted}')  # no parameters: % as is
    assert cur.fetchall() == [(nasty + "!", 3)]


def test_statement_text_and_paramstyles():
    sql, params = fenceq.fenced_statement("upsert", "invoices", {"id": "k"}, {"status": "paid"}, 2,
                                          dialect="sqlite")
    assert sql == ('INSERT INTO "invoices" ("id", "status", "fence") VALUES (?, ?, ?) '
                   'ON CONFLICT ("id") DO UPDATE SET "status" = excluded."status", '
                   '"fence" = excluded."fence" WHERE "invoices"."fence" IS NULL OR '
                   '"invoices"."fence" <= excluded."fence"')
    assert params == ["k", "paid", 2]
    sql, params = fenceq.fenced_statement("update", "invoices", {"id": "k"}, {"status": "paid"}, 2,
                                          dialect="postgresql")
    assert sql == ('UPDATE "invoices" SET "status" = %s, "fence" = %s WHERE "id" = %s '
                   'AND ("fence" IS NULL OR "fence" <= %s)')
    assert params == ["paid", 2, "k", 2]
    expected: List[Tuple[str, str, Any]] = [
        ("qmark", '"id" = ?', ["k"]), ("numeric", '"id" = :1', ["k"]),
        ("named", '"id" = :p1', {"p1": "k"}), ("format", '"id" = %s', ["k"]),
        ("pyformat", '"id" = %(p1)s', {"p1": "k"})]
    for style, where, bound in expected:
        sql, params = fenceq.fenced_statement("exists", "t", {"id": "k"}, {}, 1, dialect="sqlite",
                                              paramstyle=style)
        assert sql == f'SELECT 1 FROM "t" WHERE {where}' and params == bound
    sql, _ = fenceq.fenced_statement("exists", "a%b", {"c%": 1}, {}, 1, dialect="postgresql")
    assert sql == 'SELECT 1 FROM "a%%b" WHERE "c%%" = %s'
    assert quote_identifier('we"ird') == '"we""ird"'


@pytest.mark.parametrize("call", [
    lambda: fenceq.fenced_statement("upsert", "t", {}, {"a": 1}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": None}, {"a": 1}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {"id": 2}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {"fence": 2}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {}, True, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {}, -1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {}, 2.0, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {}, 1 << 63, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "", {"id": 1}, {}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", ("a", "b", "c"), {"id": 1}, {}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"i\0d": 1}, {}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {}, 1, dialect="mysql"),
    lambda: fenceq.fenced_statement("merge", "t", {"id": 1}, {}, 1, dialect="sqlite"),
    lambda: fenceq.fenced_statement("upsert", "t", {"id": 1}, {}, 1, dialect="sqlite",
                                    paramstyle="dollar"),
    lambda: fenceq.fenced_upsert(object(), "t", {"id": 1}, {}, 1),
], ids=["empty key", "None in key", "column in key and values", "fence column in values",
        "bool fence", "negative fence", "float fence", "fence past int64", "empty table",
        "three-part table", "NUL in a name", "unknown dialect", "unknown kind",
        "unknown paramstyle", "unknown driver"])
def test_bad_arguments_are_refused_before_any_sql(call):
    with pytest.raises(fenceq.InvalidArgument):
        call()
