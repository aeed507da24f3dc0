"""Three sidecars under 16 clients never deadlock in PostgreSQL (issue 55,
part 5).

PostgreSQL finds a deadlock only after deadlock_timeout (1 s by default), so
each one stalled a dozen requests for a second. Every statement that writes
more than one row must take its locks in one order. Here 3 real fenceqd
sidecars share one schema of ctest's cluster, and 16 client threads spread
over them run the ops that write several rows at once, on overlapping jobs:
enqueue_many with groups and `after`, claim_next of several jobs, grouped or
not, complete_many, fail, cancel of parents (their children settle), cancel_many
and retry_many, and leases that run out (the reap). The database's own count
of deadlocks (pg_stat_database.deadlocks) must not move, and no request may
fail but with a refusal.

$FENCEQ_DEADLOCK_SECONDS sets the length: ctest alone, 15 s; make test, the
issue's 10 minutes, on a cluster of its own at nice 19 beside the suites that
time nothing (scripts/soak_beside.sh); `make soak-pg`: SOAK_SECONDS, 600 s. Measured on 2026-12-06 over 60 s on the
2-core VM: 55 deadlocks (4,216 requests) before the batch's groups were
locked in one order, 49 after that alone; 0 (11,550 requests) once every
transaction that writes takes the sidecars' write lock first (kWriteLock,
pg_statements.cpp), since no two of them then wait for each other.
"""

from __future__ import annotations

import os
import random
import threading
import time

import psycopg2

from app_support import Fenceqd

import fenceq  # noqa: E402  (app_support puts the client on the path)

SECONDS = float(os.environ.get("FENCEQ_DEADLOCK_SECONDS", "15"))
QUEUES = ["q0", "q1"]
GROUPS = ["g0", "g1", "g2", None]


def deadlocks(uri: str) -> int:
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()" if conn.server_version >= 150000
                    else "SELECT 1")
        cur.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cur.fetchone()[0]


def worker(k: int, endpoint: str, stop: threading.Event, errors: list, counts: dict) -> None:
    rng = random.Random(k)
    owner = f"w{k}"
    held: list[tuple[str, int]] = []
    n = 0
    with fenceq.Client(endpoint, timeout=30) as c:
        while not stop.is_set():
            n += 1
            q = rng.choice(QUEUES)
            op = rng.random()
            try:
                if op < 0.25:
                    # A small graph: parents, and children after two of them.
                    base = f"{owner}-{n}"
                    jobs = [{"id": f"{base}-p{i}", "queue": q, "group": rng.choice(GROUPS),
                             "max_attempts": 2} for i in range(4)]
                    jobs += [{"id": f"{base}-c{i}", "queue": q,
                              "after": [f"{base}-p{i}", f"{base}-p{(i + 1) % 4}"]}
                             for i in range(4)]
                    c.enqueue_many(jobs)
                elif op < 0.55:
                    got = c.claim_next(q, owner, rng.choice([0.3, 30]), max=rng.choice([1, 4, 8]))
                    held.extend((j["id"], j["fence"]) for j in got or [])
                elif op < 0.75 and held:
                    rng.shuffle(held)
                    take, held[:] = held[:6], held[6:]
                    c.complete_many([{"id": i, "owner": owner, "fence": f, "result": "ok"}
                                     for i, f in take])
                elif op < 0.82 and held:
                    i, f = held.pop()
                    c.fail(i, owner, f, "boom", retry_in=0)
                elif op < 0.90:
                    # Another worker's parent, maybe: its children settle.
                    other = rng.randrange(16)
                    c.cancel(f"w{other}-{max(1, n - rng.randrange(1, 40))}-p{rng.randrange(4)}")
                elif op < 0.95:
                    c.cancel_many(q, state="ready", group=rng.choice(GROUPS[:3]), limit=20)
                else:
                    c.retry_many(q, state="cancelled", limit=20)
                counts[k] = counts.get(k, 0) + 1
            except fenceq.FenceqError as e:
                errors.append(f"{owner} op {op:.2f}: {e!r}"[:300])
                if len(errors) > 20:
                    return


def test_three_sidecars_under_16_clients_never_deadlock(schema, folder):
    uri = schema[0]
    cars = [Fenceqd(["--db", uri], folder, f"s{i}") for i in range(3)]
    try:
        before = deadlocks(uri)
        stop = threading.Event()
        errors: list[str] = []
        counts: dict[int, int] = {}
        threads = [threading.Thread(target=worker,
                                    args=(k, cars[k % 3].endpoint, stop, errors, counts))
                   for k in range(16)]
        for t in threads:
            t.start()
        time.sleep(SECONDS)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        time.sleep(1.0)  # the statistics of the last transactions
        after = deadlocks(uri)
        total = sum(counts.values())
        print(f"{total} requests in {SECONDS:g} s, deadlocks {after - before}")
        assert not errors, errors[:5]
        # All 16 clients ran beside each other, not a few of them.
        assert len(counts) == 16 and min(counts.values()) >= 20, counts
        assert after - before == 0, f"{after - before} deadlocks in {SECONDS:g} s"
        logs = "".join((folder / f"s{i}.log").read_text() for i in range(3))
        assert "deadlock detected" not in logs
    finally:
        for car in cars:
            car.stop()
