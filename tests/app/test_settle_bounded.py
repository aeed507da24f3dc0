"""A finished parent's descendants settle in bounded steps (issue 55, part 2;
issue 56, row 3; docs/contract.md C3.13, docs/architecture.md "Bounded
work on the serving thread").

Before, the transaction that finished a parent settled every descendant:
100,000 jobs after one parent, or a chain of 100,000, held SQLite's serving
thread 0.6-2 s in one request, and on PostgreSQL the trigger ran the whole
cascade inside the finishing transaction (a chain's cancel hit the
sidecars' 10 s statement_timeout and was refused, for good). Now that
transaction settles a page of edges and the daemon's steps do the rest: here
every descendant settles, a second client's `ping`, sent every 5 ms while
it settles, stays under 20 ms at p99 (a ping slower than 5 ms also counts
for the pings it held back, so a stall counts as often as a client that did
not wait would have felt it), and a third client's requests all succeed.

Real fenceqd ($FENCEQD) on a SQLite file (`--sync normal`: daemon_args says
why) and on a PostgreSQL schema (ctest's throw-away cluster); the Python
client over IPC. Each structure is enqueued with enqueue_many of 1,000
entries. FENCEQ_SETTLE_N makes them smaller (a quick run); the figures are
printed (pytest -s) for docs/testing.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg2
import pytest

from app_support import Fenceqd, with_params

import fenceq  # noqa: E402  (app_support puts the client on the path)

PING_PROCESS = Path(__file__).resolve().parents[2] / "clients" / "python" / "tests" / "ping_process.py"
N = int(os.environ.get("FENCEQ_SETTLE_N", "100000"))
# A chain on PostgreSQL settles a generation at a time, about 0.5 ms each of
# PL/pgSQL (docs/testing.md): 100,000 take a minute to settle and 20 s to
# enqueue, each of the two chain cases. make test runs them at 25,000 (the
# steps, their pages and their bound are the same; only the count of steps
# grows) to stay within its time; make soak-pg at N.
PG_CHAIN_N = int(os.environ.get("FENCEQ_SETTLE_PG_CHAIN_N", str(N)))
PAGE = 1000
PING_EVERY = 0.005
# The bound; a machine whose cores are busy with other work (load
# average above ~4 on 2 cores) misses it without any settling, so it can be
# raised for such a run (FENCEQ_SETTLE_P99_MS), never silently.
P99_MS = float(os.environ.get("FENCEQ_SETTLE_P99_MS", "20"))
MAX_MS = 12.5 * P99_MS


# SQLite runs --sync normal (and PostgreSQL synchronous_commit off: the
# store fixture), as the Python timed suites do (their conftest's
# TIMED_SYNC, docs/testing.md): with --sync full every commit waits on the
# serving thread for an fsync, and one of this disk's rare 100-190 ms
# fsyncs held enough pings to pass the p99 bound in two of three clean-clone
# runs (p99 69 and 175 ms). The pings are to time the settle's steps.
def daemon_args(kind: str, db: str) -> list:
    return ["--db", db] + (["--sync", "normal"] if kind == "sqlite" else [])


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, folder):
    """The --db argument of either store: (kind, value)."""
    if request.param == "sqlite":
        return "sqlite", str(folder / "jobs.db")
    uri, name = request.getfixturevalue("schema")
    # As SQLite's --sync normal (daemon_args): PostgreSQL's commits do not
    # wait for its WAL's fsync, which the sidecar's serving thread waits on
    # (a clean clone: the chain whose root dies, p99 21.1 ms, max 46 ms).
    return "postgres", with_params(uri, options=f"-csearch_path={name} -csynchronous_commit=off")


class Pinger:
    """A client that pings every PING_EVERY s, in a process of its own
    (clients/python/tests/ping_process.py, whose ``held`` mode this is: a
    ping slower than that also stands for the pings it held back, L -
    PING_EVERY, L - 2 * PING_EVERY, ..., so a stall of the serving thread
    counts as often as it held pings back). Not a thread of this process:
    its garbage collections and the bystander's work held a thread back as
    long as they took."""

    def __init__(self, endpoint: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PING_PROCESS), endpoint, str(PING_EVERY), "30", "held"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline().strip()
        if ready != "ready":
            self.proc.kill()
            raise RuntimeError(f"the pinger did not start: {ready!r}")

    def halt(self) -> None:
        """Stops the pings (again: nothing); finish() reads their figures."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()

    def finish(self) -> dict:
        self.halt()
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(60)
        figures = json.loads(out)
        assert not figures["errors"], figures["errors"][:5]
        ms = sorted(x * 1000 for x in figures["latencies"])
        assert len(ms) >= 20, len(ms)
        return {"pings": len(ms), "p50": ms[len(ms) // 2], "p99": ms[int(len(ms) * 0.99)],
                "max": ms[-1]}


class Bystander:
    """A third client at work on another queue (enqueue, claim_next,
    complete, job) every 20 ms; every failure is kept."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint, self.errors, self.calls = endpoint, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    runs = 0

    def run(self) -> None:
        Bystander.runs += 1
        prefix = f"other-{Bystander.runs}"
        with fenceq.Client(self.endpoint, timeout=30) as c:
            k = 0
            while not self.stop.is_set():
                k += 1
                try:
                    assert c.enqueue(f"{prefix}-{k}", queue="other")
                    job = c.claim_next("other", "bystander", 30)
                    assert job is not None and job["id"] == f"{prefix}-{k}", job
                    assert c.complete(job["id"], "bystander", job["fence"], "ok")
                    assert c.job(job["id"])["state"] == "done"
                    self.calls += 1
                except Exception as e:  # noqa: BLE001
                    self.errors.append(repr(e)[:300])
                time.sleep(0.02)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.errors, self.errors[:5]
        assert self.calls > 0


def enqueue_chain(endpoint: str, root: str, n: int, queue: str) -> list[str]:
    """`root`, then n jobs each after the one before (one attempt each)."""
    ids = [f"{root}-{k}" for k in range(1, n + 1)]
    with fenceq.Client(endpoint, timeout=120) as c:
        assert c.enqueue(root, queue=queue, max_attempts=1)
        prev = root
        for start in range(0, n, PAGE):
            batch = []
            for job in ids[start:start + PAGE]:
                batch.append({"id": job, "queue": queue, "after": [prev], "max_attempts": 1})
                prev = job
            assert all(c.enqueue_many(batch))
    return ids


def enqueue_fan_out(endpoint: str, parent: str, n: int, queue: str) -> list[str]:
    """`parent`, then n jobs after it, from two connections at once."""
    ids = [f"{parent}-{k}" for k in range(1, n + 1)]
    with fenceq.Client(endpoint, timeout=120) as c:
        assert c.enqueue(parent, queue=queue, max_attempts=1)
    errors: list[str] = []

    def part(chunk: list[str]) -> None:
        try:
            with fenceq.Client(endpoint, timeout=120) as c:
                for start in range(0, len(chunk), PAGE):
                    batch = [{"id": j, "queue": queue, "after": [parent]}
                             for j in chunk[start:start + PAGE]]
                    assert all(c.enqueue_many(batch))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e)[:300])

    half = (n // 2 // PAGE) * PAGE
    threads = [threading.Thread(target=part, args=(ids[:half],)),
               threading.Thread(target=part, args=(ids[half:],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return ids


def row(c: fenceq.Client, queue: str) -> dict:
    return c.stats()["queues"].get(queue, {})


def quiet(endpoint: str, within: float = 30.0) -> None:
    """Waits, up to `within` s, for a second in which pings every 5 ms have a
    p99 under 5 ms: what the structure's enqueue left (the store's own
    checkpoint of 100,000 new jobs) and what the test before this one left
    on the machine (a clean clone's make test: p99 14-21 ms for the first
    cases after the PostgreSQL deadlock test, 2-9 ms alone) are not what is
    measured. Settling is: it starts after this."""
    end = time.monotonic() + within
    with fenceq.Client(endpoint, timeout=60) as c:
        while time.monotonic() < end:
            took = []
            for _ in range(200):
                t = time.monotonic()
                c.ping()
                took.append(time.monotonic() - t)
                time.sleep(max(0.0, PING_EVERY - (time.monotonic() - t)))
            if sorted(took)[int(len(took) * 0.99) - 1] < 0.005:
                return
    print(f"\n(the machine was not quiet within {within:g} s)")


def settle(endpoint: str, act, settled, what: str, timeout: float = 300) -> dict:
    """Starts the pinger and the bystander, runs `act` (the request that
    finishes the parent), then waits until `settled(stats row)`: the figures."""
    quiet(endpoint)
    pinger = Pinger(endpoint)
    bystander = Bystander(endpoint)
    try:
        time.sleep(0.3)  # both at work before the parent ends
        with fenceq.Client(endpoint, timeout=60) as c:
            t0 = time.monotonic()
            act(c)
            request = time.monotonic() - t0
            deadline = t0 + timeout
            while not settled(row(c, "q")):
                assert time.monotonic() < deadline, f"{what}: not settled within {timeout} s"
                # Every 0.5 s: a `stats` counts every job (on PostgreSQL
                # 115-190 ms for these 100,000), and asked every 50 ms the
                # daemon's counter ran back to back at its bound, half of
                # one of the two cores, beside the steps it timed (CI,
                # 2026-12-07: the fan-out's p99 21.9 ms).
                time.sleep(0.5)
            took = time.monotonic() - t0
            # At least a second of pings, so that p99 is not one ping's.
            time.sleep(max(0.0, t0 + 1.0 - time.monotonic()))
    finally:
        pinger.halt()
        bystander.stop.set()
    bystander.finish()
    figures = pinger.finish()
    figures.update(request_s=round(request, 3), settled_s=round(took, 2))
    print(f"\n{what}: {figures}")
    assert figures["p99"] < P99_MS, (what, figures)
    assert figures["max"] < MAX_MS, (what, figures)
    return figures


def spot_check(c: fenceq.Client, ids: list[str], state: str, error=None) -> None:
    for i in ids[::max(1, len(ids) // 200)] + [ids[-1]]:
        job = c.job(i)
        assert job["state"] == state, (i, job)
        if error:
            assert job["error"] == error(i), (i, job)


def test_a_chain_of_100000_whose_root_completes_then_its_next_dies(store, folder):
    """C3.13: the root's complete readies its child only; that child then
    fails its only attempt (dead) and its 99,999 descendants are cancelled,
    each naming its parent."""
    kind, db = store
    n = PG_CHAIN_N if kind == "postgres" else N
    d = Fenceqd(daemon_args(kind, db), folder, "d")
    try:
        ids = enqueue_chain(d.endpoint, "r", n, "q")
        with fenceq.Client(d.endpoint, timeout=60) as c:
            job = c.claim_next("q", "w", 60)
            assert job["id"] == "r"
            assert row(c, "q")["blocked"] == n
            settle(d.endpoint, lambda c: c.complete("r", "w", job["fence"], "ok"),
                   lambda r: r.get("ready") == 1, f"{kind}: chain of {n}, root completes")
            assert c.job(ids[1])["state"] == "blocked"
            first = c.claim_next("q", "w", 60)
            assert first["id"] == ids[0] and first["after"] == ["r"]
            settle(d.endpoint, lambda c: c.fail(ids[0], "w", first["fence"], "boom"),
                   lambda r: "blocked" not in r,
                   f"{kind}: chain of {n - 1}, root dies")
            r = row(c, "q")
            assert (r["done"], r["dead"], r["cancelled"]) == (1, 1, n - 1), r
            assert c.job(ids[0])["state"] == "dead"
            parent = dict(zip(ids[1:], ids))
            spot_check(c, ids[1:], "cancelled", lambda i: f"parent {parent[i]} "
                       + ("dead" if i == ids[1] else "cancelled"))
            assert c.claim_next("q", "w", 60) is None
    finally:
        d.stop()


def test_a_chain_of_100000_whose_root_is_cancelled(store, folder):
    kind, db = store
    n = PG_CHAIN_N if kind == "postgres" else N
    d = Fenceqd(daemon_args(kind, db), folder, "d")
    try:
        ids = enqueue_chain(d.endpoint, "r", n, "q")
        with fenceq.Client(d.endpoint, timeout=60) as c:
            settle(d.endpoint, lambda c: c.cancel("r"), lambda r: "blocked" not in r,
                   f"{kind}: chain of {n}, root cancelled")
            r = row(c, "q")
            assert r["cancelled"] == n + 1, r
            parent = dict(zip(ids, ["r"] + ids))
            spot_check(c, ids, "cancelled", lambda i: f"parent {parent[i]} cancelled")
            assert c.claim_next("q", "w", 60) is None
        if kind == "postgres":
            with psycopg2.connect(db) as conn, conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM jobs WHERE cancelled = 1")
                assert cur.fetchone()[0] == n + 1
                cur.execute("SELECT count(*) FROM job_after WHERE met = 0")
                assert cur.fetchone()[0] == 0
                cur.execute("SELECT count(*) FROM settle_pending")
                assert cur.fetchone()[0] == 0
    finally:
        d.stop()


def test_a_fan_out_of_100000_children_becomes_ready(store, folder):
    kind, db = store
    d = Fenceqd(daemon_args(kind, db), folder, "d")
    try:
        ids = enqueue_fan_out(d.endpoint, "p", N, "q")
        with fenceq.Client(d.endpoint, timeout=60) as c:
            job = c.claim_next("q", "w", 60)
            assert job["id"] == "p"
            assert row(c, "q")["blocked"] == N
            settle(d.endpoint, lambda c: c.complete("p", "w", job["fence"], "ok"),
                   lambda r: r.get("ready") == N, f"{kind}: fan-out of {N}, parent completes")
            assert "blocked" not in row(c, "q")
            spot_check(c, ids, "ready")
            got = c.claim_next("q", "w", 60, max=500)
            assert len(got) == 500 and all(j["after"] == ["p"] for j in got)
    finally:
        d.stop()


def test_what_happens_while_a_dead_parent_s_children_settle(store, folder):
    """C3.13, the steps' judgement: a parent of 30,000 fails its only attempt
    (dead) and, while its children are being cancelled, a child it cancelled
    is retried (blocked again: its parent is dead), a child not reached yet is
    cancelled by hand, and the parent itself is retried (revived): the
    children not reached yet stay blocked, none is claimable. Then the parent
    completes and the daemon is killed (-9) at once: after the restart every
    blocked child becomes ready, the retried one too; the cancelled ones stay
    cancelled."""
    kind, db = store
    n = min(N, 30000)
    d = Fenceqd(daemon_args(kind, db), folder, "d")
    try:
        ids = [f"p-{k:06d}" for k in range(1, n + 1)]
        with fenceq.Client(d.endpoint, timeout=60) as c:
            assert c.enqueue("p", queue="q", max_attempts=1)
            for start in range(0, n, PAGE):
                assert all(c.enqueue_many([{"id": j, "queue": "q", "after": ["p"]}
                                           for j in ids[start:start + PAGE]]))
            job = c.claim_next("q", "w", 60)
            assert job["id"] == "p"
            assert c.fail("p", "w", job["fence"], "boom")  # dead: its last attempt
            # The first page went with the fail.
            assert c.job(ids[0])["state"] == "cancelled"
            assert c.job(ids[0])["error"] == "parent p dead"
            assert c.retry(ids[0])
            assert c.job(ids[0])["state"] == "blocked"
            assert c.cancel(ids[-1])
            assert c.retry("p")
            assert c.job(ids[-2])["state"] == "blocked", "settled before the parent's retry"
            # The steps find the parent revived: what is left stays blocked.
            def counts() -> dict:
                return {k: v for k, v in row(c, "q").items()
                        if k in ("ready", "blocked", "cancelled", "done", "dead", "leased")}
            time.sleep(1.5)
            before = counts()
            time.sleep(0.5)
            r = counts()
            assert r == before, (before, r)
            cancelled = r["cancelled"]
            assert r["blocked"] == n - cancelled and r["ready"] == 1, r
            assert 100 <= cancelled < n - 1000, r
            job = c.claim_next("q", "w", 60)
            assert job["id"] == "p"
            assert c.complete("p", "w", job["fence"], "ok")
        d.kill9()
        d.start()
        with fenceq.Client(d.endpoint, timeout=60) as c:
            deadline = time.monotonic() + 120
            while "blocked" in row(c, "q"):
                assert time.monotonic() < deadline, row(c, "q")
                time.sleep(0.1)
            r = row(c, "q")
            assert (r["done"], r["cancelled"], r["ready"]) == (1, cancelled, n - cancelled), r
            assert c.job(ids[0])["state"] == "ready"
            assert c.job(ids[-1])["state"] == "cancelled"
            assert c.job(ids[-2])["state"] == "ready"
            states = {c.job(i)["state"] for i in ids[1:cancelled]}
            assert states == {"cancelled"}, states
            assert c.job(ids[cancelled - 1])["error"] == "parent p dead"
    finally:
        d.stop()
