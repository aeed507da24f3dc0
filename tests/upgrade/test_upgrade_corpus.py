"""Upgrades (issue 59, item 4): today's fenceqd ($FENCEQD) opens a copy of
each file of the corpus (tests/upgrade/corpus: one per SQLite schema
version, made by make_corpus.py), migrates it, and must then answer, through
the wire at the fixture's time (--clock client), every job's state, fence and
fields as the fixture's JSON recorded them, the purged ids as gone, and the
schedules; and then serve the migrated file: claims in urgency order with
the next fence, a delayed job claimable once its delay is over, keys still
held, a parent's complete unblocking its child, a claim's `after`, a current
lease renewed, a purged id's fence not handed out again.

The checked-in files are never opened in place (their hashes are checked)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "app"))

from app_support import Fenceqd  # noqa: E402

import fenceq  # noqa: E402  (app_support puts the client on the path)

CORPUS = HERE / "corpus"
FIXTURES = sorted(CORPUS.glob("sqlite-v*.json"))
PG_FIXTURES = sorted(CORPUS.glob("pg-v*.json"))
os.environ.setdefault("FENCEQD", str(REPO / "build" / "bin" / "fenceqd"))
LATEST = 24  # rules::kSchemaVersion


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_the_corpus_has_every_sqlite_version():
    assert [f.name for f in FIXTURES] == [f"sqlite-v{v:02d}.json" for v in range(LATEST + 1)]
    for f in FIXTURES:
        db = f.with_suffix(".db")
        v = json.loads(f.read_text())["version"]
        assert sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
            "PRAGMA user_version").fetchone()[0] == v


def observed(c: fenceq.Client, id_: str, now: float) -> dict | None:
    return c.job(id_, now=now)


def check_job(got: dict | None, want: dict) -> None:
    want = dict(want)
    want.pop("settles", None)
    errors = want.pop("error_any_of", None)
    assert got is not None, want["id"]
    if errors is not None:
        assert got.pop("error") in errors, (want["id"], got)
    assert got == want, want["id"]


def check_observed(c: fenceq.Client, exp: dict) -> None:
    """Every job as the fixture recorded it, at its time."""
    now, jobs = exp["now"], exp["jobs"]
    # The steps settle what schema 16 found (bounded wait).
    deadline = time.monotonic() + 10
    for id_, want in jobs.items():
        if want.get("settles"):
            while observed(c, id_, now)["state"] != want["state"]:
                assert time.monotonic() < deadline, observed(c, id_, now)
                time.sleep(0.05)
    for id_, want in jobs.items():
        check_job(observed(c, id_, now), want)
        st = c.state(id_)
        assert (st["fence"], st["done"]) == (want["fence"], want["state"] == "done"), id_
    for id_ in exp["purged"]:
        assert c.job(id_, now=now) is None and c.state(id_) is None
    listed = {r["id"]: r["state"] for r in c.list(limit=1000, now=now)}
    assert listed == {i: w["state"] for i, w in jobs.items()}
    assert c.schedule_list(now=now) == exp["schedules"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.stem)
def test_sqlite_file_migrates_and_serves(fixture: Path, tmp_path: Path):
    exp = json.loads(fixture.read_text())
    src = fixture.with_suffix(".db")
    before = sha(src)
    db = tmp_path / "jobs.db"
    shutil.copyfile(src, db)
    d = Fenceqd(["--db", str(db), "--clock", "client"], tmp_path, "d")
    try:
        with fenceq.Client(d.endpoint, timeout=10) as c:
            check_observed(c, exp)
            serve(c, exp)
    finally:
        d.stop()
    assert sha(src) == before, "the checked-in file changed"
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == LATEST
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


@pytest.mark.parametrize("fixture", PG_FIXTURES, ids=lambda f: f.stem)
def test_pg_dump_migrates_and_serves(fixture: Path, tmp_path: Path):
    """A plain-SQL dump restored into a database of its own on the test
    cluster; a sidecar started on its schema migrates it."""
    import psycopg2  # noqa: PLC0415  (the SQLite cases need no PostgreSQL)
    from app_support import base_uri, with_params  # noqa: PLC0415

    exp = json.loads(fixture.read_text())
    name = "upg_" + uuid.uuid4().hex[:12]
    admin = psycopg2.connect(base_uri())
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    base, _, query = base_uri().partition("?")
    uri = base.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
    d = None
    try:
        subprocess.run(["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-f",
                        str(fixture.with_suffix(".sql")), uri],
                       check=True, capture_output=True, timeout=60)
        d = Fenceqd(["--db", with_params(uri, options="-csearch_path=fenceq_corpus"),
                     "--clock", "client"], tmp_path, "d")
        with fenceq.Client(d.endpoint, timeout=10) as c:
            check_observed(c, exp)
            serve(c, exp)
        d.stop()
        con = psycopg2.connect(uri)
        with con.cursor() as cur:
            cur.execute("SELECT max(version) FROM fenceq_corpus.fenceq_schema_version")
            assert cur.fetchone()[0] == LATEST
        con.close()
    finally:
        if d is not None:
            d.stop()
        admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


def serve(c: fenceq.Client, exp: dict) -> None:
    """The migrated file serves: what each schema's rewrite must keep working."""
    # A fixture's jobs are of its version's features; PostgreSQL's version 1
    # had version 2's (its `features`).
    now, jobs, v = exp["now"], exp["jobs"], exp.get("features", exp["version"])
    # The file's leases count against a max_leased given now (schema 4's
    # held, which its UPDATE sets on the leased rows of an older file): with
    # the limit at the jobs leased, no ready job is claimed. Before any claim
    # here (a later claim of those jobs would mark them again).
    leased = [w for w in jobs.values() if w["queue"] == "default" and w["state"] == "leased"]
    assert leased
    assert c.queue_config("default", max_leased=len(leased))
    assert c.claim_next("default", "u0", 60, now=now) is None
    assert c.queue_config("default", max_leased=0)  # no settings again
    # Every ready job of the queue, most urgent first (priority, then
    # enqueue order), each at its fence + 1; nothing else.
    ready = [w for w in jobs.values() if w["queue"] == "default" and w["state"] == "ready"]
    ready.sort(key=lambda w: (-w["priority"], w["created"], w["id"]))
    got = c.claim_next("default", "u1", 100_000, max=100, now=now)
    assert sorted(j["id"] for j in got) == sorted(w["id"] for w in ready)
    if v >= 2:  # seq (and created) orders them; version 0 and 1 jobs all have seq 0
        assert [j["id"] for j in got][0] == ready[0]["id"]
    claimed = {j["id"]: j for j in got}
    for j in got:
        assert j["fence"] == jobs[j["id"]]["fence"] + 1, j["id"]
        assert j["payload"] == jobs[j["id"]]["payload"], j["id"]
        # A child's claim names its parents (schema 10's kids bit).
        assert j.get("after", []) == jobs[j["id"]].get("after", []), j["id"]
    # A lease taken before the upgrade is still current, under its fence only.
    lj = jobs["leased"]
    assert c.renew("leased", "w1", lj["fence"], 60, now=now) is True
    assert c.complete("leased", "w1", lj["fence"] - 1, "stale", now=now) is False
    if v >= 2:  # the purged id's fence is not handed out again (C1.2)
        assert c.enqueue("purged", now=now) is True
        assert c.claim("purged", "u2", 60, now=now) > 1
        # The delays run out: each delayed job is claimable then, and only then.
        later = now + 4000
        got = c.claim_next("default", "u3", 100_000, max=100, now=later)
        ids = {j["id"]: j for j in got}
        for id_ in ("delayed", "retrying"):
            assert ids[id_]["fence"] == jobs[id_]["fence"] + 1, id_
    if v >= 5:  # a key stays held by its unfinished job (schemas 7, 8 and 14)
        assert c.enqueue_unique("dup-k", "K", now=now) == ("key-new", False)
        assert c.enqueue_unique("dup-l", "L", queue="other", now=now) == ("key-leased", False)
        assert c.enqueue_unique("dup-r", "R", now=now) == ("key-revived", False)
        assert c.enqueue_unique("dup-m", "M", now=now) == ("dup-m", True)
    if v >= 6:  # each group's jobs, one turn each
        got = c.claim_next("gq", "u4", 100_000, max=10, now=now)
        assert sorted(j["id"] for j in got) == ["g-a2", "g-b1"]
    if v >= 9:  # a parent's complete unblocks its child (bounded wait)
        p = claimed["parent"]
        assert c.complete("parent", "u1", p["fence"], None, now=now) is True
        deadline = time.monotonic() + 10
        while c.job("child", now=now)["state"] != "ready":
            assert time.monotonic() < deadline, c.job("child", now=now)
            time.sleep(0.05)
        j = c.claim_next("default", "u5", 60, now=now + 4001)
        assert j is not None and j["id"] == "child" and j["after"] == ["parent"]


def notify_messages(db: Path, folder: Path) -> list[str]:
    """fenceqd started on `db` with NOTIFY_SOCKET bound here, as systemd's
    Type=notify does; the datagrams it sent until READY=1 (at most 20 s)."""
    import socket
    path = folder / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(0.2)
    env = dict(os.environ, NOTIFY_SOCKET=str(path))
    proc = subprocess.Popen([os.environ["FENCEQD"], "--db", str(db), "--listen",
                             f"ipc://{folder}/s.sock"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got: list[str] = []
    deadline = time.monotonic() + 20
    try:
        while not any("READY=1" in m for m in got):
            assert time.monotonic() < deadline, got
            assert proc.poll() is None, got
            try:
                got.append(sock.recv(65536).decode())
            except socket.timeout:
                pass
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        sock.close()
    return got


def test_an_upgrade_extends_systemds_start_timeout(tmp_path: Path):
    """A start that upgrades the schema tells systemd it goes on
    (EXTEND_TIMEOUT_USEC, before READY=1), so that the unit's start timeout
    does not kill a long upgrade and undo it (docs/operating.md, "Upgrades");
    a start that upgrades nothing, and a new file, send none."""
    old = tmp_path / "old.db"
    shutil.copy(CORPUS / "sqlite-v18.db", old)
    (tmp_path / "a").mkdir()
    got = notify_messages(old, tmp_path / "a")
    extend = [m for m in got if m.startswith("EXTEND_TIMEOUT_USEC=")]
    assert extend and got.index(extend[0]) < len(got) - 1, got
    assert "EXTEND_TIMEOUT_USEC=60000000\nSTATUS=upgrading " in extend[0], extend
    assert f"from schema version 18 to {LATEST}" in extend[0], extend
    (tmp_path / "b").mkdir()
    again = notify_messages(old, tmp_path / "b")  # now at LATEST
    assert not [m for m in again if "EXTEND_TIMEOUT_USEC" in m], again
    (tmp_path / "c").mkdir()
    new = notify_messages(tmp_path / "new.db", tmp_path / "c")
    assert not [m for m in new if "EXTEND_TIMEOUT_USEC" in m], new
