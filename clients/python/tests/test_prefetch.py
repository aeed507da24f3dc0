"""fenceq.QueueWorker(prefetch=N): up to N jobs held at once, claimed with one
claim_next(max=N), all their leases renewed with one renew_many, finished jobs
completed in batches with complete_many (claiming the next ones in the same
round trip). Against real daemons."""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections import Counter
from typing import List

import pytest

import fenceq
from conftest import Background, Daemon, wait_until


@pytest.fixture
def wire(monkeypatch) -> List[tuple]:
    """Every request any fenceq.Client sends (the renewal threads' too), as
    (thread name, op, fields)."""
    sent: List[tuple] = []
    original = fenceq.Client._round_trip

    def spy(self, socket, op, fields, timeout):
        sent.append((threading.current_thread().name, op, dict(fields)))
        return original(self, socket, op, fields, timeout)

    monkeypatch.setattr(fenceq.Client, "_round_trip", spy)
    return sent


def ops(sent: List[tuple], *names: str) -> List[tuple]:
    return [s for s in sent if s[1] in names]


def leased_by(client: fenceq.Client, queue: str, owner: str) -> List[str]:
    return [j["id"] for j in client.list(queue=queue, state="leased", limit=1000) if j["owner"] == owner]


def test_prefetch_runs_every_job_exactly_once_holding_at_most_n(server_daemon: Daemon):
    """Three workers with prefetch=4 drain 60 jobs: each job runs exactly once and
    is completed with its result; no worker ever holds more than 4 leases (the
    daemon's own list, asked from inside every job)."""
    n, ids = 4, [f"j{i:03d}" for i in range(60)]
    with server_daemon.client() as c:
        assert c.enqueue_many([{"id": id, "queue": "pf", "payload": id} for id in ids]) == [True] * len(ids)
    runs: Counter = Counter()
    most_held: Counter = Counter()
    lock = threading.Lock()

    def work() -> int:
        with server_daemon.client() as observer, \
                fenceq.QueueWorker(server_daemon.endpoint, "pf", ttl=10, wait=0.2, prefetch=n) as w:
            def fn(job: fenceq.Job) -> str:
                held = leased_by(observer, "pf", w.owner)
                assert job.id in held
                with lock:
                    runs[job.id] += 1
                    most_held[w.owner] = max(most_held[w.owner], len(held))
                assert len(held) <= n and len(w._leases) <= n
                time.sleep(0.002)
                return f"did {job.payload}"

            return w.run(fn, idle_exit=0.5)

    workers = [Background(work) for _ in range(3)]
    handled = [w.result(timeout=30) for w in workers]
    assert sum(handled) == len(ids)
    assert runs == Counter({id: 1 for id in ids})
    assert all(1 <= held <= n for held in most_held.values()) and max(most_held.values()) > 1
    with server_daemon.client() as c:
        stats = c.stats()["queues"]["pf"]
        assert (stats["done"], stats["leased"], stats["ready"]) == (len(ids), 0, 0)
        assert all(c.state(id)["result"] == f"did {id}" for id in ids)


def test_prefetch_claims_and_completes_in_batches(server_daemon: Daemon, wire):
    """12 short jobs with prefetch=4: one claim_next(max=4), then each batch of 4
    finished jobs goes out in one complete_many that claims the next 4: 4 requests
    for 12 jobs (plus the idle long-poll), no single complete or claim."""
    ids = [f"b{i:02d}" for i in range(12)]
    with server_daemon.client() as c:
        c.enqueue_many([{"id": id, "queue": "bq"} for id in ids])
    ran = []
    outcomes = []
    with fenceq.QueueWorker(server_daemon.endpoint, "bq", ttl=30, wait=0.2, prefetch=4) as w:
        del wire[:]
        assert w.run(lambda job: ran.append(job.id) or job.id.upper(), idle_exit=0.3,
                     on_outcome=outcomes.append) == 12
        main = threading.current_thread().name
        sent = [(op, fields) for thread, op, fields in wire if thread == main]
    assert ran == ids
    assert [(o.job.id, o.status, o.result) for o in outcomes] == [(id, "completed", id.upper()) for id in ids]
    assert [op for op, _ in sent[:4]] == ["claim_next", "complete_many", "complete_many", "complete_many"]
    assert sent[0][1]["max"] == 4
    assert [len(fields["items"]) for op, fields in sent if op == "complete_many"] == [4, 4, 4]
    assert [fields.get("next") for op, fields in sent if op == "complete_many"] == \
        [{"queue": "bq", "ttl": 30, "max": 4}] * 3
    assert {op for op, _ in sent} <= {"claim_next", "complete_many"}
    assert len(sent) <= 4 + 3                                            # + the idle long-polls
    with server_daemon.client() as c:
        assert all(c.state(id)["result"] == id.upper() for id in ids)


def test_prefetch_renews_every_held_lease_with_renew_many(server_daemon: Daemon, wire):
    """ttl 0.6 s, 3 jobs of 0.35 s each held at once: the last one waits ~0.7 s,
    past its ttl, and is still ours because one renew_many renews every held lease
    (never a single renew); every job completes."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": id, "queue": "rq"} for id in ("r1", "r2", "r3")])
    checks = []
    start = time.monotonic()
    with server_daemon.client() as observer, \
            fenceq.QueueWorker(server_daemon.endpoint, "rq", ttl=0.6, renew_every=0.1, wait=0.2,
                               prefetch=3) as w:
        def fn(job: fenceq.Job) -> str:
            # This job's lease and those of the jobs waiting their turn are current.
            held = [job, *w.held_jobs]
            checks.append((job.id, all(observer.check(j.id, j.owner, j.fence) for j in held)))
            if job.id == "r3":
                assert time.monotonic() - start > 0.6                     # claimed more than a ttl ago
            time.sleep(0.35)
            job.check()
            return "ok"

        outcomes = []
        assert w.run(fn, max_jobs=3, on_outcome=outcomes.append) == 3
    assert time.monotonic() - start > 0.6 * 1.5
    assert sorted((o.job.id, o.status) for o in outcomes) == [("r1", "completed"), ("r2", "completed"),
                                                              ("r3", "completed")]
    assert checks == [("r1", True), ("r2", True), ("r3", True)]
    renewals = ops(wire, "renew_many")
    assert not ops(wire, "renew")
    assert renewals and all(thread.startswith("fenceq-renew-many-") for thread, _, _ in renewals)
    assert max(len(fields["items"]) for _, _, fields in renewals) == 3     # every held lease at once
    assert all(fields["ttl"] == 0.6 for _, _, fields in renewals)
    with server_daemon.client() as c:
        assert all(c.state(id)["result"] == "ok" for id in ("r1", "r2", "r3"))


def test_prefetch_a_held_job_stolen_is_dropped_and_never_run(server_daemon: Daemon, caplog):
    """A job waiting its turn whose lease was taken over: its renewal is refused,
    the worker drops it (logged) and never runs nor completes it; the others go on."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": "a", "queue": "sq", "priority": 3}, {"id": "b", "queue": "sq", "priority": 2},
                        {"id": "c", "queue": "sq", "priority": 1}])
    ran = []
    with fenceq.QueueWorker(server_daemon.endpoint, "sq", ttl=10, renew_every=0.05, wait=0.2,
                            prefetch=3) as w:
        def fn(job: fenceq.Job) -> str:
            ran.append(job.id)
            if job.id == "a":
                (b,) = [j for j in w.held_jobs if j.id == "b"]
                with server_daemon.client() as operator:
                    assert operator.release("b", b.owner, b.fence)
                    assert operator.claim("b", "other", 30) == b.fence + 1
                assert b.lost.wait(5)                                       # the renewal said false
            return f"ran {job.id}"

        outcomes = []
        assert w.run(fn, idle_exit=0.3, on_outcome=outcomes.append) == 2
    assert ran == ["a", "c"]
    assert sorted((o.job.id, o.status) for o in outcomes) == [("a", "completed"), ("c", "completed")]
    assert any("b (fence 1): renewal refused" in r.getMessage() for r in caplog.records)
    with server_daemon.client() as c:
        b = c.state("b")
        assert (b["owner"], b["fence"], b["done"], b["result"]) == ("other", 2, False, None)
        assert c.state("a")["result"] == "ran a" and c.state("c")["result"] == "ran c"


def test_prefetch_a_finished_job_stolen_fails_alone_in_its_batch(server_daemon: Daemon, wire, caplog):
    """A finished job whose lease was taken over before its batch went out (the
    renewer had not noticed yet): complete_many refuses it alone, its outcome is
    'lost' (logged) and nothing of it is stored; the batch's other jobs are completed."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": i, "queue": "fq"} for i in ("f1", "f2", "f3")])
    with fenceq.QueueWorker(server_daemon.endpoint, "fq", ttl=30, renew_every=20, wait=0.2,
                            prefetch=3) as w:
        def fn(job: fenceq.Job) -> str:
            if job.id == "f2":                                          # f1 finished, not completed yet
                with server_daemon.client() as operator:
                    assert operator.release("f1", job.owner, 1)
                    assert operator.claim("f1", "other", 30) == 2
            return f"result {job.id}"

        outcomes = []
        assert w.run(fn, max_jobs=3, on_outcome=outcomes.append) == 3
    assert [(o.job.id, o.status) for o in outcomes] == [("f1", "lost"), ("f2", "completed"), ("f3", "completed")]
    (batch,) = ops(wire, "complete_many")
    assert [item["id"] for item in batch[2]["items"]] == ["f1", "f2", "f3"] and "next" not in batch[2]
    assert any("f1 (fence 1): lease lost, the result was refused" in r.getMessage() for r in caplog.records)
    with server_daemon.client() as c:
        f1 = c.state("f1")
        assert (f1["owner"], f1["fence"], f1["done"], f1["result"]) == ("other", 2, False, None)
        assert [c.state(i)["result"] for i in ("f2", "f3")] == ["result f2", "result f3"]


def test_prefetch_failures_are_reported_at_once_and_the_batch_goes_on(server_daemon: Daemon, wire):
    with server_daemon.client() as c:
        c.enqueue_many([{"id": i, "queue": "xq"} for i in ("x1", "x2", "x3")])

    def fn(job: fenceq.Job) -> str:
        if job.id == "x2":
            raise ValueError("bad x2")
        return "ok"

    outcomes = []
    with fenceq.QueueWorker(server_daemon.endpoint, "xq", ttl=30, wait=0.2, retry_in=100, prefetch=3) as w:
        assert w.run(fn, max_jobs=3, on_outcome=outcomes.append) == 3
    assert [(o.job.id, o.status) for o in outcomes] == [("x2", "failed"), ("x1", "completed"), ("x3", "completed")]
    assert [op for _, op, _ in wire if op in ("fail", "complete_many")] == ["fail", "complete_many"]
    with server_daemon.client() as c:
        x2 = {j["id"]: j for j in c.list(queue="xq")}["x2"]
        assert (x2["state"], x2["error"]) == ("delayed", "ValueError: bad x2")


def test_prefetch_max_jobs_claims_nothing_beyond(server_daemon: Daemon):
    """max_jobs=5 with prefetch=4 of 10 jobs: 5 claimed in all (4, then 1 with the
    completion), 5 run, nothing held when run returns."""
    ids = [f"m{i}" for i in range(10)]
    with server_daemon.client() as c:
        c.enqueue_many([{"id": id, "queue": "mq", "max_attempts": 1} for id in ids])
    with fenceq.QueueWorker(server_daemon.endpoint, "mq", ttl=30, prefetch=4) as w:
        assert w.run(lambda job: "ok", max_jobs=5) == 5
        assert w.held_jobs == [] and len(w._leases) == 0
    with server_daemon.client() as c:
        rows = {j["id"]: j for j in c.list(queue="mq")}
        assert [rows[id]["state"] for id in ids] == ["done"] * 5 + ["ready"] * 5
        assert all(rows[id]["attempts"] == 0 for id in ids[5:])


def test_prefetch_stop_completes_what_finished_and_releases_the_rest(server_daemon: Daemon):
    """stop() inside the second job: the two run are completed, the two held and
    not started are released untouched (their attempt stays used), none claimed after."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": f"s{i}", "queue": "stq"} for i in range(6)])
    ran = []
    with fenceq.QueueWorker(server_daemon.endpoint, "stq", ttl=30, prefetch=4) as w:
        def fn(job: fenceq.Job) -> str:
            ran.append(job.id)
            if len(ran) == 2:
                w.stop()
            return "ok"

        assert w.run(fn) == 2
        assert w.held_jobs == []
    assert ran == ["s0", "s1"]
    with server_daemon.client() as c:
        rows = {j["id"]: j for j in c.list(queue="stq")}
        assert [rows[f"s{i}"]["state"] for i in range(6)] == ["done", "done", "ready", "ready", "ready", "ready"]
        assert [(rows[f"s{i}"]["fence"], rows[f"s{i}"]["owner"]) for i in (2, 3, 4, 5)] == \
            [(1, None), (1, None), (0, None), (0, None)]


def test_prefetch_keyboard_interrupt_completes_finished_releases_the_others(server_daemon: Daemon):
    with server_daemon.client() as c:
        c.enqueue_many([{"id": f"k{i}", "queue": "kq"} for i in range(4)])

    def fn(job: fenceq.Job) -> str:
        if job.id == "k1":
            raise KeyboardInterrupt
        return "ok"

    with fenceq.QueueWorker(server_daemon.endpoint, "kq", ttl=30, prefetch=4) as w:
        with pytest.raises(KeyboardInterrupt):
            w.run(fn)
        assert w.held_jobs == [] and len(w._leases) == 0
    with server_daemon.client() as c:
        rows = {j["id"]: j for j in c.list(queue="kq")}
        assert [rows[f"k{i}"]["state"] for i in range(4)] == ["done", "ready", "ready", "ready"]
        assert all(rows[f"k{i}"]["owner"] is None for i in range(1, 4))


def test_prefetch_run_once_holds_the_rest_renewed_until_close(server_daemon: Daemon):
    """run_once with prefetch=3: claims 3, runs one and completes it before it
    returns; the other two stay held, renewed past their ttl, and run next;
    close() releases what is still held."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": f"o{i}", "queue": "oq"} for i in range(5)])
    w = fenceq.QueueWorker(server_daemon.endpoint, "oq", ttl=0.5, renew_every=0.1, prefetch=3)
    try:
        first = w.run_once(lambda job: "one")
        assert (first.job.id, first.status) == ("o0", "completed")
        assert [j.id for j in w.held_jobs] == ["o1", "o2"] and w.held.id == "o1"
        time.sleep(1.0)                                                   # two ttls
        with server_daemon.client() as c:
            assert all(c.check(j.id, j.owner, j.fence) for j in w.held_jobs)
            assert c.state("o0")["result"] == "one"
        second = w.run_once(lambda job: "two", take_next=True)          # completes o1, claims o3, o4
        assert (second.job.id, second.status) == ("o1", "completed")
        assert [j.id for j in w.held_jobs] == ["o2", "o3", "o4"]
    finally:
        w.close()
    with server_daemon.client() as c:
        rows = {j["id"]: j for j in c.list(queue="oq")}
        assert [rows[f"o{i}"]["state"] for i in range(5)] == ["done", "done", "ready", "ready", "ready"]
        assert [(rows[f"o{i}"]["fence"], rows[f"o{i}"]["owner"]) for i in (2, 3, 4)] == [(1, None)] * 3


def test_prefetch_with_client_clock(daemon: Daemon, wire):
    """C2.2: claim_next, renew_many and complete_many carry the clock's now."""
    ticks = itertools.count(1000.0, 0.01)
    with daemon.client() as c:
        c.enqueue_many([{"id": f"t{i}", "queue": "tq"} for i in range(4)], now=1000)
    with fenceq.QueueWorker(daemon.endpoint, "tq", ttl=1, renew_every=0.05, wait=0.2, prefetch=2,
                            clock=lambda: next(ticks)) as w:
        def fn(job: fenceq.Job) -> str:
            time.sleep(0.12)
            return "ok"

        assert w.run(fn, idle_exit=0.3) == 4
    sent = ops(wire, "claim_next", "renew_many", "complete_many")
    assert {op for _, op, _ in sent} == {"claim_next", "renew_many", "complete_many"}
    assert all(isinstance(fields.get("now"), float) and fields["now"] >= 1000 for _, _, fields in sent)
    with daemon.client() as c:
        assert all(c.state(f"t{i}")["done"] for i in range(4))


def test_prefetch_one_is_todays_worker(server_daemon: Daemon, wire):
    """prefetch=1 (the default) sends exactly what it always did: claim_next without
    max, complete_next, a single renew from a per-job thread; no batch op."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": "p1", "queue": "one"}, {"id": "p2", "queue": "one"}])
    del wire[:]
    with fenceq.QueueWorker(server_daemon.endpoint, "one", ttl=0.3, wait=0.2) as w:
        assert w.prefetch == 1
        assert w.run(lambda job: time.sleep(0.2) or "ok", idle_exit=0.3) == 2
    assert not ops(wire, "enqueue_many", "complete_many", "renew_many")
    assert all("max" not in fields for _, op, fields in wire if op == "claim_next")
    assert ops(wire, "complete_next") and ops(wire, "renew")


@pytest.mark.parametrize("prefetch", [0, -1, fenceq.MAX_BATCH + 1, 1.5, True, "2"])
def test_prefetch_argument(prefetch):
    with pytest.raises(ValueError):
        fenceq.QueueWorker("ipc:///tmp/unused.sock", "q", prefetch=prefetch)


def test_prefetch_forgotten_worker_stops_renewing(server_daemon: Daemon):
    """A prefetching worker dropped without close(): its renewal thread ends, so
    the leases of the jobs it held end by themselves (after ttl)."""
    with server_daemon.client() as c:
        c.enqueue_many([{"id": f"g{i}", "queue": "gq"} for i in range(3)])

    def forget() -> None:
        w = fenceq.QueueWorker(server_daemon.endpoint, "gq", ttl=0.3, renew_every=0.05, prefetch=3)
        assert w.run_once(lambda job: "ok").status == "completed"
        assert len(w.held_jobs) == 2

    forget()
    gc.collect()
    assert wait_until(lambda: not any(t.name.startswith("fenceq-renew-many-") for t in threading.enumerate()),
                      5)
    with server_daemon.client() as c:
        assert wait_until(lambda: c.claim_next("gq", "next", 30) is not None, 5)
