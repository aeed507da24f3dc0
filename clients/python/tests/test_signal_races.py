"""Suspend, signal and deadlines against real daemons on both stores (C3.23,
C3.24): racing signallers on one token (also across three PostgreSQL
sidecars), kill -9 between suspend and signal, a signal after the timeout,
and deadlines that pass while a job is delayed, blocked on its parents or
behind a paused queue. Server clock: the daemons' own time."""

from __future__ import annotations

import signal as signals
import threading
import time
from typing import List

import pytest

import fenceq
from conftest import Daemon, daemon_on_pg_schema, wait_until


def _suspended_job(c: fenceq.Client, job_id: str, queue: str, timeout: float = 60,
                   on_timeout=None) -> str:
    assert c.enqueue(job_id, queue=queue)
    job = c.claim_next(queue, "A", 30)
    assert job and job["id"] == job_id
    token = c.suspend(job_id, "A", job["fence"], timeout, on_timeout=on_timeout)
    assert isinstance(token, str) and len(token) == 32
    int(token, 16)  # hex digits
    return token


def _race(daemons: List[Daemon], token: str, threads: int) -> List[bool]:
    """`threads` threads, each on a connection of its own to one of the
    daemons in turn, signal `token` at once (a barrier), each with its own
    value; the answers, in no order."""
    barrier = threading.Barrier(threads)
    answers: List[bool] = []
    lock = threading.Lock()

    def signaller(d: Daemon, n: int) -> None:
        with d.client() as c:  # a Client belongs to the thread that uses it
            c.ping()
            barrier.wait(10)
            ok = c.signal(token, value=f"v{n}")
        with lock:
            answers.append(ok)

    pool = [threading.Thread(target=signaller, args=(daemons[i % len(daemons)], i))
            for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(30)
    assert not any(t.is_alive() for t in pool)
    return answers


def test_c3_23_sixteen_racing_signallers_one_true(either_store: Daemon):
    """16 threads on their own connections signal one token at once: exactly
    one answer is true, and the job's next claim carries that one's value."""
    d = either_store
    with d.client() as c:
        token = _suspended_job(c, "o", "orders")
        answers = _race([d], token, 16)
        assert sorted(answers) == [False] * 15 + [True]
        job = c.claim_next("orders", "B", 30)
        assert job and job["id"] == "o" and job["fence"] == 2
        assert job["signal"] in {f"v{n}" for n in range(16)}
        # Woken once: no second claim, and the token is used up for good.
        assert c.claim_next("orders", "C", 30) is None
        assert c.signal(token, value="again") is False


def test_c3_23_racing_signallers_across_three_postgresql_sidecars(pg_uri: str, tmp_dir: str):
    """Three sidecars on one database, 6 signallers each (18), one token:
    exactly one true (the token's row goes with the one signal that takes it)."""
    with daemon_on_pg_schema(pg_uri, tmp_dir, "sc", "server") as first:
        first.start()
        others = []
        try:
            for name in ("sc2", "sc3"):
                o = Daemon(tmp_dir, name, "server")
                o.db = first.db
                others.append(o.start())
            with first.client() as c:
                token = _suspended_job(c, "o", "orders")
                answers = _race([first, *others], token, 18)
                assert len(answers) == 18
                assert answers.count(True) == 1
                job = c.claim_next("orders", "B", 30)
                assert job and job["id"] == "o" and "signal" in job
                assert c.signal(token) is False
        finally:
            for o in others:
                o.stop(signals.SIGKILL)


def test_c3_23_a_token_and_a_signal_survive_kill_9(either_store: Daemon):
    """kill -9 after suspend: the token still wakes the job; kill -9 after the
    signal was acknowledged: the job is still woken with its value, once."""
    d = either_store
    with d.client() as c:
        token = _suspended_job(c, "a", "q")
        token_b = _suspended_job(c, "b", "q")
    d.stop(signals.SIGKILL)
    d.start()
    with d.client() as c:
        assert c.job("a")["state"] == "suspended"
        assert c.signal(token, value="paid") is True
    d.stop(signals.SIGKILL)
    d.start()
    with d.client() as c:
        assert c.signal(token, value="twice") is False
        job = c.claim_next("q", "B", 30)
        assert job and job["id"] == "a" and job["signal"] == "paid"
        assert c.job("b")["state"] == "suspended"
        assert c.signal(token_b, value=b"\x00bin") is True
        job_b = c.claim_next("q", "B", 30)
        assert job_b and job_b["id"] == "b" and job_b["signal"] == b"\x00bin"


def test_c3_23_a_signal_after_the_timeout_is_refused_and_the_job_wakes_once(
        either_store: Daemon):
    """timeout 1 s: the wait ends at the reap with 'suspend timed out' and no
    signal; a signal after it answers false and does not wake the job again."""
    d = either_store
    with d.client() as c:
        token = _suspended_job(c, "t", "q", timeout=1)
        dead_token = _suspended_job(c, "f", "q2", timeout=1, on_timeout="fail")
        assert c.job("t")["suspended"]["on_timeout"] == "retry"
        assert c.job("f")["suspended"]["on_timeout"] == "fail"
        assert wait_until(lambda: c.job("t")["state"] == "ready", 10)
        assert c.signal(token, value="late") is False
        job = c.claim_next("q", "B", 30)
        assert job and job["id"] == "t" and "signal" not in job
        assert c.job("t")["error"] == "suspend timed out"
        assert c.claim_next("q", "C", 30) is None
        assert wait_until(lambda: c.job("f")["state"] == "dead", 10)
        assert c.job("f")["error"] == "suspend timed out"
        assert c.signal(dead_token) is False


def test_c3_23_suspended_jobs_in_list_and_stats(either_store: Daemon):
    """list's state filter and stats know `suspended`."""
    d = either_store
    with d.client() as c:
        _suspended_job(c, "s1", "q")
        _suspended_job(c, "s2", "q")
        rows = c.list(state="suspended")
        assert sorted(r["id"] for r in rows) == ["s1", "s2"]
        assert c.stats()["queues"]["q"]["suspended"] == 2


def test_c3_24_a_deadline_passes_while_delayed_blocked_or_paused(either_store: Daemon):
    """Three jobs whose deadline passes while they cannot be claimed (a delay,
    a parent not done, a paused queue) are never claimed: dead, 'deadline
    passed', counted; a fourth claimed in time is not touched."""
    d = either_store
    with d.client() as c:
        soon = time.time() + 1.0
        assert c.enqueue("delayed", queue="dq", delay=3, deadline=soon)
        assert c.enqueue("parent", queue="other")
        assert c.enqueue("child", queue="bq", after=["parent"], deadline=soon)
        assert c.queue_config("pq", paused=True)
        assert c.enqueue("paused", queue="pq", deadline=soon)
        assert c.enqueue("in_time", queue="tq", deadline=soon + 60)
        claimed = c.claim_next("tq", "W", 60)
        assert claimed and claimed["id"] == "in_time"
        time.sleep(max(0.0, soon - time.time()) + 0.05)
        # The parent is done and the queue resumed after the deadline: too late.
        parent = c.claim_next("other", "W", 30)
        assert parent and c.complete("parent", "W", parent["fence"], None)
        assert c.queue_config("pq", paused=False)
        assert wait_until(lambda: all(c.job(j)["error"] == "deadline passed"
                                      for j in ("delayed", "child", "paused")), 10)
        time.sleep(3.1)  # past the delay too
        for q in ("dq", "bq", "pq"):
            assert c.claim_next(q, "W", 30) is None
            assert c.stats()["queues"][q]["totals"]["deadline_passed"] == 1
        for j in ("delayed", "child", "paused"):
            assert c.job(j)["state"] == "dead"
        assert c.job("in_time")["state"] == "leased"
        assert c.complete("in_time", "W", claimed["fence"], "ok")
