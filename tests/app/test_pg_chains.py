"""Deep chains of `after` settle on both stores, and a grouped job wakes a
claim parked on another sidecar (issue 55, parts 2 and 3; docs/contract.md
C3.13 and C3.11).

Part 2: PostgreSQL settled a dead or cancelled parent's descendants with a row
trigger that fired once more for each generation, nested; at about 800
generations it raised "stack depth limit exceeded", and since the reap that
killed the root ran in every batch, every request of every client failed
`internal` from then on. Here a chain of 1,000 (and one of 5,000) settles
whichever way its root ends, no other client's request fails meanwhile, and
the daemon's error replies stay small.

Part 3: a grouped job enqueued through sidecar A, or by fenceq_enqueue() in an
application's transaction, in a queue and a group neither sidecar had seen,
must wake a claim_next parked on sidecar B at once (it waited its whole wait).

Real fenceqd ($FENCEQD) on ctest's throw-away cluster (a schema per test) and
on a SQLite file; the Python client over IPC.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg2
import pytest

from app_support import Fenceqd

import fenceq  # noqa: E402  (app_support puts the client on the path)


@pytest.fixture(params=["postgres", "sqlite"])
def store(request, folder):
    """The --db argument of either store: (kind, value)."""
    if request.param == "sqlite":
        return "sqlite", str(folder / "jobs.db")
    schema = request.getfixturevalue("schema")
    return "postgres", schema[0]


def enqueue_chain(c: fenceq.Client, root: str, n: int, queue: str) -> list[str]:
    """`root`, then n jobs each after the one before, in entries of 500."""
    assert c.enqueue(root, queue=queue, max_attempts=1)
    ids = [f"{root}-{k}" for k in range(1, n + 1)]
    prev = root
    for start in range(0, n, 500):
        batch = []
        for job in ids[start:start + 500]:
            batch.append({"id": job, "queue": queue, "after": [prev]})
            prev = job
        assert all(c.enqueue_many(batch))
    return ids


class Bystander:
    """Another client that keeps working while a chain settles: a claim_next
    and a job read on another queue every 20 ms; every failure is kept."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint, self.errors, self.calls = endpoint, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self) -> None:
        with fenceq.Client(self.endpoint, timeout=30) as c:
            k = 0
            while not self.stop.is_set():
                k += 1
                try:
                    c.enqueue(f"other-{k}", queue="other")
                    job = c.claim_next("other", "bystander", 30)
                    assert job is not None
                    assert c.complete(job["id"], "bystander", job["fence"], "ok")
                    assert c.job(job["id"])["state"] == "done"
                    self.calls += 1
                except Exception as e:  # noqa: BLE001 (every failure is the finding)
                    self.errors.append(repr(e)[:300])
                time.sleep(0.02)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.errors, self.errors[:5]
        assert self.calls > 0


def wait_for(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what} not within {seconds} s"
        time.sleep(0.1)


@pytest.mark.parametrize("ending", ["dies", "cancelled", "completes"])
def test_a_chain_of_1000_settles_however_its_root_ends(store, folder, ending):
    kind, db = store
    d = Fenceqd(["--db", db], folder, "d")
    try:
        with fenceq.Client(d.endpoint, timeout=60) as c:
            ids = enqueue_chain(c, "root", 1000, "chain")
            bystander = Bystander(d.endpoint)
            job = c.claim_next("chain", "w", 1 if ending == "dies" else 30)
            assert job["id"] == "root"
            if ending == "dies":
                # Its only attempt's lease runs out: the reap writes it dead.
                wait_for(lambda: c.job("root")["state"] == "dead", 20, "the reap")
            elif ending == "cancelled":
                assert c.cancel("root")
            else:
                assert c.complete("root", "w", job["fence"], "done")
            if ending == "completes":
                # Only the first child is ready; the rest still wait, in order.
                first = wait_for(lambda: c.claim_next("chain", "w", 30), 10, "the first child")
                assert first["id"] == "root-1"
                assert c.job("root-2")["state"] == "blocked"
            else:
                last = wait_for(lambda: (lambda j: j if j["state"] == "cancelled" else None)(
                    c.job(ids[-1])), 60, "the last descendant's cancel")
                assert "parent root-999 cancelled" in last["error"], last
                first = c.job("root-1")
                assert first["state"] == "cancelled"
                assert first["error"] == ("parent root dead" if ending == "dies"
                                          else "parent root cancelled"), first
                states = {c.job(i)["state"] for i in ids[::50]}
                assert states == {"cancelled"}, states
                assert c.claim_next("chain", "w", 30) is None
            bystander.finish()
            # The daemon still serves everything, the reap included.
            assert c.enqueue("after-all", queue="chain")
            assert c.claim_next("chain", "w2", 30)["id"] in ("after-all", "root-2")
    finally:
        d.stop()


def test_a_chain_of_5000_on_postgresql_needs_no_stack(schema, folder):
    """Far past the ~800 generations where the nested trigger failed."""
    d = Fenceqd(["--db", schema[0]], folder, "d")
    try:
        with fenceq.Client(d.endpoint, timeout=120) as c:
            ids = enqueue_chain(c, "deep", 5000, "deep")
            assert c.cancel("deep")
            # The cancel settles a page; the daemon's steps do the rest (issue 55).
            wait_for(lambda: c.job(ids[-1])["state"] == "cancelled", 60, "the last cancel")
        with psycopg2.connect(schema[0]) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM jobs WHERE cancelled = 1")
            assert cur.fetchone()[0] == 5001
        assert "stack depth" not in (folder / "d.log").read_text()
    finally:
        d.stop()


def test_a_store_error_s_reply_and_log_line_are_bounded(schema, folder):
    """A failing statement's error (PL/pgSQL context included) reaches the
    client and the log cut to a bounded size: here a trigger that the
    database administrator added raises with a 200 KB message."""
    d = Fenceqd(["--db", schema[0]], folder, "d")
    try:
        with psycopg2.connect(schema[0]) as conn, conn.cursor() as cur:
            cur.execute("CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                        "RAISE EXCEPTION '%', repeat('x', 200000); END $$")
            cur.execute("CREATE TRIGGER boom BEFORE INSERT ON jobs FOR EACH ROW "
                        "WHEN (NEW.queue = 'boom') EXECUTE FUNCTION boom()")
        size_before = (folder / "d.log").stat().st_size
        with fenceq.Client(d.endpoint, timeout=30) as c:
            with pytest.raises(fenceq.FenceqError) as e:
                c.enqueue("b-1", queue="boom")
            assert e.value.code == "internal"
            assert len(str(e.value)) < 2000, len(str(e.value))
            # The others of its kind are served.
            assert c.enqueue("fine", queue="fine")
        grown = (folder / "d.log").stat().st_size - size_before
        assert grown < 4000, grown
    finally:
        d.stop()


def park(endpoint: str, queue: str, got: dict, wait: float = 12) -> threading.Thread:
    def run() -> None:
        with fenceq.Client(endpoint, timeout=wait + 10) as c:
            t0 = time.monotonic()
            got["job"] = c.claim_next(queue, "parked", 30, wait=wait)
            got["took"] = time.monotonic() - t0
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)  # parked by now
    return t


@pytest.mark.parametrize("through", ["sidecar", "fenceq_enqueue"])
def test_a_grouped_job_wakes_a_claim_parked_on_another_sidecar(schema, folder, through):
    a = Fenceqd(["--db", schema[0]], folder, "a")
    b = Fenceqd(["--db", schema[0]], folder, "b")
    try:
        for round_ in range(3):  # a new queue and group each time
            queue, group = f"new-{through}-{round_}", f"tenant-{round_}"
            got: dict = {}
            t = park(b.endpoint, queue, got)
            if through == "sidecar":
                with fenceq.Client(a.endpoint) as c:
                    assert c.enqueue(f"g-{round_}", queue=queue, group=group)
            else:
                with psycopg2.connect(schema[0]) as conn, conn.cursor() as cur:
                    cur.execute("SELECT fenceq_enqueue(%s, %s, p_grp => %s)",
                                (f"g-{round_}", queue, group))
            t.join(timeout=30)
            assert got["job"] is not None and got["job"]["id"] == f"g-{round_}", got
            assert got["took"] < 1.5, got["took"]
    finally:
        a.stop()
        b.stop()


def test_a_reap_that_fails_does_not_fail_the_requests_beside_it(schema, folder):
    """A side step of the batch (here the reap, made to fail by a trigger the
    database administrator added for one job) is dropped from the batch and
    tried again later: the requests it rode with are answered as if it were
    not there (issue 55: a reap whose settling failed failed every request,
    of every client, for good)."""
    d = Fenceqd(["--db", schema[0]], folder, "d")
    try:
        with psycopg2.connect(schema[0]) as conn, conn.cursor() as cur:
            cur.execute("CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                        "RAISE EXCEPTION 'the reap of % fails', NEW.id; END $$")
            cur.execute("CREATE TRIGGER poison BEFORE UPDATE ON jobs FOR EACH ROW "
                        "WHEN (NEW.id = 'poison' AND NEW.dead = 1) EXECUTE FUNCTION poison()")
        with fenceq.Client(d.endpoint, timeout=30) as c:
            assert c.enqueue("poison", queue="p", max_attempts=1)
            assert c.claim_next("p", "w", 0.5)["id"] == "poison"
            time.sleep(1.0)  # its only lease has run out: every reap now fails
            bystander = Bystander(d.endpoint)
            time.sleep(3.0)
            bystander.finish()
            # Still not written dead (the reap keeps failing), and still dead to every read.
            assert c.job("poison")["state"] == "dead"
        log = (folder / "d.log").read_text()
        assert "run again without it" in log
    finally:
        d.stop()
