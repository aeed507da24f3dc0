"""`fenceq migrate --to postgresql://...` (docs/operating.md, "Backup, restore
and moving to PostgreSQL"; C1.5): a stopped SQLite store moved into a fresh
PostgreSQL schema, then read back through the wire from a sidecar on it.

A real fenceqd fills a SQLite store with random contents: jobs in every
state (ready, delayed, leased, done, dead, cancelled, blocked), keys,
groups, edges, headers, max_runtime, long and binary payloads and results,
purged ids, queue and group settings, retention and schedules. Each job's
record, each queue's list, stats, schedule_list and results are read over the
socket. The migration is killed (-9) at random points and run again; it
must commit once, and a later run copies nothing. A sidecar on the schema
must then answer the same, except what a move changes on purpose: every
fence rises past every fence before it, and every lease has ended, so the
open lease's renew and complete are refused."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psycopg2

from app_support import Fenceqd, base_uri, with_params

import fenceq  # noqa: E402  (app_support puts the client on the path)

TOOL = os.environ.get("FENCEQ", "fenceq")
FILLER = int(os.environ.get("FENCEQ_MIGRATE_FILLER", "20000"))
FAN = 5000
# Jobs fill() suspended (C3.23), by id: their signal tokens, which must still
# wake them once the store moved; and how many jobs got a deadline (C3.24).
SUSPENDED: dict = {}
STEPS: dict = {}  # the steps saved, by job
DEADLINES = [0]


def migrate(db: Path, uri: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([TOOL, "migrate", "--db", str(db), "--to", uri,
                           "--fenceqd", os.environ["FENCEQD"]],
                          capture_output=True, text=True, timeout=timeout)


def fill(c: fenceq.Client, rng: random.Random) -> dict:
    """Random contents of every kind; returns what the test holds on to."""
    held = {}
    c.queue_config("limited", max_leased=50, rate=1000, per=60)
    c.queue_config("grouped", group_max_leased=3, group_rate=100, group_per=10)
    # The groups' own settings (C3.25), one of each kind, and one on a queue
    # with no setting of its own.
    c.group_config("grouped", "big", max_leased=10, per=2.5)
    c.group_config("grouped", "slow", rate=0)
    c.group_config("tenants", "acme", max_leased=1)
    c.queue_config("paused", paused=True)
    c.queue_config("kept", keep_done=3600, keep_dead=7200, keep_cancelled=60)
    c.schedule_set("nightly", "0 3 * * *", queue="limited", payload=b"\x00\x01nightly", priority=2)
    c.schedule_set("hourly", "5 * * * *", tz="Europe/Paris", queue="grouped", payload="h")
    queues = ["default", "limited", "grouped", "paused", "kept"]
    ids = []
    for i in range(400):
        q = rng.choice(queues)
        jid = f"{q}-{i}"
        kw = {"queue": q, "priority": rng.randint(-3, 3)}
        r = rng.random()
        if r < 0.15:
            kw["payload"] = bytes(rng.randrange(256) for _ in range(rng.choice([3, 2000])))
        elif r < 0.3:
            kw["payload"] = "text é " * rng.choice([1, 300])
        if rng.random() < 0.2:
            kw["key"] = f"k{rng.randrange(60)}"
        if q == "grouped" or rng.random() < 0.1:
            kw["group"] = f"g{rng.randrange(8)}"
        if rng.random() < 0.1:
            kw["delay"] = 3600
        if rng.random() < 0.1:
            kw["headers"] = {"trace": f"t{i}", "tab": "a\tb\nc\\d"}
        if rng.random() < 0.1:
            kw["max_runtime"] = 30
        if rng.random() < 0.1:
            kw["deadline"] = time.time() + 86_400
        if rng.random() < 0.1:
            kw["max_attempts"] = 1
        if ids and rng.random() < 0.1:
            kw["after"] = rng.sample(ids[-20:], min(2, len(ids[-20:])))
            if rng.random() < 0.5:
                kw["after_failure"] = "run"
        if c.enqueue(jid, **kw):
            ids.append(jid)
            DEADLINES[0] += "deadline" in kw
    # Claims: some completed (short and long results), failed, released,
    # left open with progress; some cancelled.
    for q in ["default", "limited", "grouped", "kept"]:
        for job in c.claim_next(q, "w1", 600, max=40):
            r = rng.random()
            if r >= 0.65 and c.job(job["id"])["max_attempts"] == 1:
                r = 0  # its lease's end (the move) would make it dead, and its children with it
            if r < 0.4:
                res = "r" * rng.choice([5, 3000])
                assert c.complete(job["id"], "w1", job["fence"], res)
            elif r < 0.55:
                assert c.fail(job["id"], "w1", job["fence"], "boom\nline2", retry_in=3600)
            elif r < 0.65:
                assert c.release(job["id"], "w1", job["fence"])
            elif r < 0.72:
                # Steps saved, then suspended for a day (C3.22, C3.23). Every
                # other job's steps pass the bound of SQLite's row
                # (rules::kInlineStepsBytes) and move to job_steps; a name
                # and a str that hold the row text's separators.
                STEPS[job["id"]] = {"charge": b"\x00ch"}
                if len(STEPS) % 2:
                    STEPS[job["id"]].update({"ünï;1:x": "é;s00;", "big": bytes(range(256)) * 5})
                for name, value in STEPS[job["id"]].items():
                    assert c.step_save(job["id"], "w1", job["fence"], name, value)
                SUSPENDED[job["id"]] = c.suspend(job["id"], "w1", job["fence"], 86_400)
                assert SUSPENDED[job["id"]]
            elif r < 0.8:
                assert c.renew(job["id"], "w1", job["fence"], 600, progress="half")
                held[job["id"]] = job["fence"]
            else:
                held[job["id"]] = job["fence"]
    for jid in rng.sample(ids, 15):
        c.cancel(jid)
        held.pop(jid, None)
        SUSPENDED.pop(jid, None)
    # Purged ids (their fences are kept, C1.2).
    for i in range(20):
        c.enqueue(f"gone-{i}", queue="default")
    for job in c.claim_next("default", "w2", 60, max=60):
        if job["id"].startswith("gone-"):
            c.complete(job["id"], "w2", job["fence"], None)
        else:
            c.release(job["id"], "w2", job["fence"])
    assert c.purge(0, queue="default") >= 20
    # Bulk of plain jobs: the copy takes long enough to be killed inside.
    for i in range(0, FILLER, 1000):
        c.enqueue_many([{"id": f"fill-{j}", "queue": "filler", "payload": "x" * 40}
                        for j in range(i, min(i + 1000, FILLER))])
    return held


def snapshot(c: fenceq.Client) -> dict:
    rows = {}
    for q in ["default", "limited", "grouped", "paused", "kept", "filler"]:
        cursor = None
        while True:
            page = c.list(queue=q, limit=1000, after=cursor)
            for row in page:
                rows[row["id"]] = row
            if len(page) < 1000:
                break
            cursor = page[-1]["id"]
    records = {jid: c.job(jid) for jid in rows if not jid.startswith("fill-")}
    stats = c.stats()
    return {"rows": rows, "records": records, "stats": stats,
            "schedules": c.schedule_list(),
            "results": c.results(sorted(records)[:100])}


def test_migrate_moves_every_kind_of_row_and_keeps_fences(folder: Path, schema) -> None:
    uri, name = schema
    rng = random.Random(int(os.environ.get("FENCEQ_MIGRATE_SEED", "59")))
    db = folder / "src.db"
    d = Fenceqd(["--db", str(db)], folder, "sqlite")
    with fenceq.Client(d.endpoint, timeout=10) as c:
        held = fill(c, rng)
        before = snapshot(c)
    d.stop()
    top_fence = max(r["fence"] for r in before["records"].values())

    # Settling left to the daemon's steps (settle_pending): a parent of
    # FAN children completed, and the daemon killed -9 at once.
    d.start()
    with fenceq.Client(d.endpoint, timeout=10) as c:
        assert c.enqueue("fan-parent", queue="fan-p")
        for i in range(0, FAN, 1000):
            c.enqueue_many([{"id": f"fan-{j}", "queue": "fan", "after": ["fan-parent"]}
                            for j in range(i, min(i + 1000, FAN))])
        job = c.claim_next("fan-p", "w", 60)
        assert c.complete(job["id"], "w", job["fence"], "ok")
    d.kill9()

    # A daemon holding the file refuses the move; so does a target in use.
    d.start()
    r = migrate(db, uri)
    assert r.returncode == 1 and "already owned by another fenceqd" in r.stderr, r
    d.stop()

    # kill -9 at random points: nothing committed, or everything.
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    killed = 0
    for _ in range(5):
        p = subprocess.Popen([os.environ["FENCEQD"], "--db", str(db), "--migrate-to", uri],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.05, 0.6))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed += 1
        p.wait(timeout=60)
        with admin.cursor() as cur:
            cur.execute("SELECT to_regclass('jobs') IS NOT NULL")
            if cur.fetchone()[0]:
                cur.execute("SELECT count(*) FROM jobs")
                n = cur.fetchone()[0]
                cur.execute("SELECT count(*) FROM fenceq_meta WHERE key = 'migrated_from_sqlite'")
                done = cur.fetchone()[0]
                assert n == 0 or (done == 1 and n == len(before["rows"]) + FAN + 1), (n, done)
                if done:
                    break
    print(f"migrate: {killed} runs killed -9")

    r = migrate(db, uri)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    print("migrate:", r.stdout.strip())
    assert out["check"] == "agree" and out["jobs"] == len(before["rows"]) + FAN + 1, out
    again = migrate(db, uri)
    assert again.returncode == 0 and json.loads(again.stdout)["migrated"] == "already", again
    with admin.cursor() as cur:
        cur.execute("SELECT count(*) FROM jobs")
        assert cur.fetchone()[0] == len(before["rows"]) + FAN + 1
        cur.execute("SELECT count(*) FROM jobs WHERE expires IS NOT NULL")
        assert DEADLINES[0] >= 5 and cur.fetchone()[0] <= DEADLINES[0]
        cur.execute("SELECT count(*) FROM job_suspends")
        assert cur.fetchone()[0] == len(SUSPENDED)
    admin.close()

    pg = Fenceqd(["--store", "postgres", "--pg-dsn", uri], folder, "pg")
    try:
        with fenceq.Client(pg.endpoint, timeout=10) as c:
            after = snapshot(c)
            compare(before, after, held, top_fence)
            # The open leases of the SQLite store write nothing any more.
            for jid, fence in held.items():
                assert not c.renew(jid, "w1", fence, 60), jid
                assert not c.complete(jid, "w1", fence, "stale"), jid
            # A purged id enqueued again starts above every fence before.
            assert c.enqueue("gone-0", queue="default")
            got = c.claim("gone-0", "w3", 60)
            assert got and got > top_fence, got
            # The moved jobs are claimed in order and carry their payloads.
            job = c.claim_next("limited", "w3", 60)
            assert job is not None and job["fence"] > top_fence
            # The suspended jobs wait on, and their tokens wake them once.
            assert len(SUSPENDED) >= 5, SUSPENDED
            for jid, token in SUSPENDED.items():
                assert after["records"][jid]["state"] == "suspended", after["records"][jid]
                assert c.signal(token, value="moved"), jid
                assert not c.signal(token, value="again"), jid
                rec = c.job(jid)
                assert rec["signal"] == "moved" and rec["steps"] == STEPS[jid], rec
            # The settling the SQLite daemon left goes on here: every child
            # of the completed parent becomes ready.
            deadline = time.monotonic() + 60
            while c.stats()["queues"]["fan"].get("blocked"):
                assert time.monotonic() < deadline, c.stats()["queues"]["fan"]
                time.sleep(0.1)
            assert c.stats()["queues"]["fan"]["ready"] == FAN
    finally:
        pg.stop()


MOVED_ON_PURPOSE = {"fence", "owner", "until", "state", "deadline", "lease"}


def compare(before: dict, after: dict, held: dict, top_fence: int) -> None:
    assert set(after["rows"]) == set(before["rows"])
    for jid, rec in before["records"].items():
        got = after["records"][jid]
        assert got["fence"] > top_fence, (jid, got)
        if jid in held:
            assert rec["state"] == "leased" and got["state"] in ("ready", "dead"), (rec, got)
        else:
            assert got["state"] == rec["state"], (jid, rec, got)
        for k in set(rec) | set(got):
            if k in MOVED_ON_PURPOSE:
                continue
            if jid in held and k in ("error", "finished"):
                continue
            assert got.get(k) == rec.get(k), (jid, k, rec, got, jid in held)
    assert after["schedules"] == before["schedules"]
    for jid, res in before["results"].items():
        if jid not in held:
            assert after["results"][jid] == res, jid
    # stats: each queue's jobs by state (a lease ended is ready now) and its
    # settings and retention.
    qb, qa = before["stats"]["queues"], after["stats"]["queues"]
    assert set(qa) - {"fan", "fan-p"} == set(qb)
    for q, b in qb.items():
        a = qa[q]
        for k in ("delayed", "done", "dead", "cancelled", "blocked", "suspended", "paused",
                  "max_leased",
                  "rate", "per", "group_max_leased", "group_rate", "group_per", "keep_done",
                  "keep_dead", "keep_cancelled", "group_overrides", "group_config"):
            assert a.get(k) == b.get(k), (q, k, b.get(k), a.get(k))
        assert a["ready"] + a["leased"] == b["ready"] + b["leased"], (q, b, a)
        assert a["leased"] == 0, (q, a)


def test_migrate_refuses_a_target_in_use(folder: Path, schema) -> None:
    """A schema that holds fenceq jobs already (and no finished migration)
    is refused, and left as it was; so are a job PostgreSQL cannot store and
    a file that is not there."""
    uri, name = schema
    pg = Fenceqd(["--store", "postgres", "--pg-dsn", uri], folder, "pg")
    with fenceq.Client(pg.endpoint, timeout=10) as c:
        assert c.enqueue("theirs", payload="x")
    pg.stop()
    d = Fenceqd(["--db", str(folder / "src.db")], folder, "sqlite")
    with fenceq.Client(d.endpoint, timeout=10) as c:
        assert c.enqueue("ours")
    d.stop()
    r = migrate(folder / "src.db", uri)
    assert r.returncode == 1 and "already holds fenceq jobs" in r.stderr, r
    # A string PostgreSQL's text cannot hold: the move names the job and
    # commits nothing.
    nul = folder / "nul.db"
    d = Fenceqd(["--db", str(nul)], folder, "nul")
    with fenceq.Client(d.endpoint, timeout=10) as c:
        assert c.enqueue("plain")
        assert c.enqueue("zero", key="acct\u0000123")
    d.stop()
    fresh = with_params(base_uri(), options=f"-csearch_path={name}_nul")
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE SCHEMA {name}_nul")
    try:
        r = migrate(nul, fresh)
        assert r.returncode == 1 and "jobs 'zero': its ukey holds U+0000" in r.stderr, r
        with admin.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {name}_nul.jobs")
            assert cur.fetchone()[0] == 0
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP SCHEMA {name}_nul CASCADE")
        admin.close()
    r = migrate(folder / "missing.db", uri)
    assert r.returncode == 1 and "no such file" in r.stderr, r
    assert not (folder / "missing.db").exists()
    admin = psycopg2.connect(uri)
    with admin.cursor() as cur:
        cur.execute("SELECT id, fence FROM jobs")
        assert cur.fetchall() == [("theirs", 0)]
    admin.close()
