"""Snooze (issue 33, C3.14): ``Client.snooze`` and the workers' ``fenceq.Snooze``.
The current lease ends with its attempt given back and its fence kept, no error
is recorded, and the job can be claimed again after the delay; a stale snooze
is refused and changes nothing. Against real daemons in client clock mode, so
that the delays are exact."""

from __future__ import annotations

import math
import pickle

import pytest

import fenceq
from conftest import Daemon


def test_snooze_gives_the_attempt_back_and_delays_the_job(client: fenceq.Client):
    """C3.14: True; the job is delayed until now + delay with attempts one lower
    and the fence kept, no error; claimable again at now + delay, with a higher fence."""
    assert client.enqueue("s", queue="q", now=1.0)
    job = client.claim_next("q", "A", 30, now=2.0)
    assert (job["id"], job["fence"], job["attempts"]) == ("s", 1, 1)
    assert client.snooze("s", "A", 1, 5, now=3.0) is True
    row = client.job("s", now=3.5)
    assert (row["state"], row["attempts"], row["fence"], row["owner"]) == ("delayed", 0, 1, None)
    assert row["not_before"] == 8.0 and row["error"] is None
    assert client.claim_next("q", "B", 30, now=7.9) is None
    again = client.claim_next("q", "B", 30, now=8.0)
    assert (again["id"], again["fence"], again["attempts"]) == ("s", 2, 1)


def test_snooze_never_uses_up_the_attempts(client: fenceq.Client):
    """A job of one attempt snoozed three times is still claimable (never dead),
    and is completed on its one attempt."""
    assert client.enqueue("once", queue="q", max_attempts=1, now=1.0)
    t = 1.0
    for n in range(3):
        t += 1
        job = client.claim_next("q", "A", 30, now=t)
        assert job is not None and job["attempts"] == 1 and job["fence"] == n + 1
        assert client.snooze("once", "A", job["fence"], 0, now=t)
    job = client.claim_next("q", "A", 30, now=t + 1)
    assert client.complete("once", "A", job["fence"], "done", now=t + 1)
    row = client.job("once", now=t + 1)
    assert (row["state"], row["attempts"], row["error"]) == ("done", 1, None)


def test_a_stale_snooze_is_refused_and_changes_nothing(client: fenceq.Client):
    """C3.14 has complete's guard (C3.5): a snooze by a lease that ended, by
    another owner, with another fence or of a finished job answers False and
    leaves the job as it was."""
    assert client.enqueue("s", queue="q", now=1.0)
    assert client.claim_next("q", "A", 10, now=2.0)["fence"] == 1
    assert client.snooze("s", "B", 1, 5, now=3.0) is False          # not the owner
    assert client.snooze("s", "A", 2, 5, now=3.0) is False          # not the fence
    assert client.job("s", now=3.0)["state"] == "leased"
    # A's lease runs out at 12 and B takes the job: A's late snooze is refused.
    assert client.claim_next("q", "B", 10, now=12.0)["fence"] == 2
    assert client.snooze("s", "A", 1, 0, now=13.0) is False
    row = client.job("s", now=13.0)
    assert (row["state"], row["owner"], row["fence"], row["attempts"]) == ("leased", "B", 2, 2)
    assert client.complete("s", "B", 2, "ok", now=14.0)
    assert client.snooze("s", "B", 2, 0, now=15.0) is False         # done: nothing to snooze
    assert client.job("s", now=15.0)["state"] == "done"
    assert client.snooze("missing", "A", 1, 0, now=15.0) is False


def test_snooze_bad_input_is_refused_by_the_daemon(client: fenceq.Client):
    """A delay out of range is InvalidArgument (a ValueError), one that is not a
    number BadRequest, each naming the field; nothing changes."""
    assert client.enqueue("s", now=1.0)
    assert client.claim_next("default", "A", 30, now=2.0)["fence"] == 1
    for delay in (-1, 1e9 + 1, math.inf):
        with pytest.raises(fenceq.InvalidArgument, match="delay"):
            client.snooze("s", "A", 1, delay, now=3.0)
    for delay in ("1", None, True):
        with pytest.raises(fenceq.BadRequest, match="delay"):
            client.snooze("s", "A", 1, delay, now=3.0)  # type: ignore[arg-type]
    with pytest.raises(fenceq.InvalidArgument, match="now"):
        client.snooze("s", "A", 1, 1)                   # client clock: now is required
    row = client.job("s", now=3.0)
    assert (row["state"], row["owner"], row["attempts"]) == ("leased", "A", 1)


def test_the_snooze_exception_checks_its_delay():
    """fenceq.Snooze refuses a delay the daemon would, when raised: a bad one
    fails the job with a clear error instead of stopping the worker."""
    assert fenceq.Snooze(0).delay == 0 and fenceq.Snooze(1e9).delay == 1e9
    assert str(fenceq.Snooze(2.5, "rate limited")) == "snoozed for 2.5 s: rate limited"
    copy = pickle.loads(pickle.dumps(fenceq.Snooze(7, "later")))   # e.g. across processes
    assert (copy.delay, copy.reason, str(copy)) == (7, "later", "snoozed for 7 s: later")
    for delay in (-0.5, 1e9 + 1, math.nan, math.inf):
        with pytest.raises(fenceq.InvalidArgument, match="delay"):
            fenceq.Snooze(delay)
    for delay in ("60", None, True):
        with pytest.raises(TypeError, match="delay"):
            fenceq.Snooze(delay)  # type: ignore[arg-type]


class Clock:
    """The ``now`` of a client clock daemon, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_queue_worker_snoozes_a_job_whose_function_raises_snooze(daemon: Daemon):
    """fn raises fenceq.Snooze(30): the outcome is "snoozed" (no error text),
    the job is delayed 30 s with its attempt given back and no error kept; it is
    not claimable before, and then runs again on the same attempt number."""
    clock = Clock(10.0)
    calls = []

    def fn(job: fenceq.Job) -> str:
        calls.append((job.attempts, job.fence))
        if len(calls) == 1:
            raise fenceq.Snooze(30, "the API said 429")
        return "done"

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "api", ttl=60, wait=0.1,
                                                  clock=clock) as w:
        assert c.enqueue("call", queue="api", max_attempts=1, now=clock.now)
        outcome = w.run_once(fn)
        assert outcome.status == fenceq.worker.SNOOZED == "snoozed"
        assert outcome.error is None and isinstance(outcome.exception, fenceq.Snooze)
        assert outcome.exception.delay == 30
        row = c.job("call", now=clock.now)
        assert (row["state"], row["attempts"], row["fence"], row["error"]) == ("delayed", 0, 1, None)
        assert row["not_before"] == 40.0
        clock.now = 39.0
        assert w.run_once(fn, wait=0) is None                  # not claimable yet
        clock.now = 40.0
        outcome = w.run_once(fn, wait=0)
        assert outcome.status == fenceq.worker.COMPLETED and outcome.result == "done"
        assert calls == [(1, 1), (1, 2)]                       # the attempt came back
        row = c.job("call", now=clock.now)
        assert (row["state"], row["attempts"], row["error"], row["result"]) == ("done", 1, None, "done")
        assert c.stats(now=clock.now)["queues"]["api"]["totals"]["failed"] == 0


def test_queue_worker_run_goes_on_after_a_snooze(daemon: Daemon):
    """In run(), a snoozed job counts as handled and the loop goes on with the
    next job (a snooze claims none ahead: the next one is long-polled for)."""
    clock = Clock(10.0)
    outcomes = []

    def fn(job: fenceq.Job) -> str:
        if job.id == "later":
            raise fenceq.Snooze(100)
        return job.id

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "mix", ttl=60, wait=0.1,
                                                  clock=clock) as w:
        for id, priority in (("first", 3), ("later", 2), ("last", 1)):
            assert c.enqueue(id, queue="mix", priority=priority, now=clock.now)
        assert w.run(fn, idle_exit=0.3, on_outcome=outcomes.append) == 3
        assert [(o.job.id, o.status) for o in outcomes] == [
            ("first", "completed"), ("later", "snoozed"), ("last", "completed")]
        assert c.job("later", now=clock.now)["not_before"] == 110.0


def test_prefetching_queue_worker_snoozes_one_job_and_completes_the_others(daemon: Daemon):
    """With prefetch, a Snooze is reported at once with snooze (as a failure is
    with fail); the other jobs of the batch are completed."""
    clock = Clock(10.0)
    outcomes = []

    def fn(job: fenceq.Job) -> str:
        if job.id == "b":
            raise fenceq.Snooze(5)
        return job.id

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "batch", ttl=60, wait=0.1,
                                                  clock=clock, prefetch=3) as w:
        for id in "abc":
            assert c.enqueue(id, queue="batch", now=clock.now)
        assert w.run(fn, max_jobs=3, on_outcome=outcomes.append) == 3
        assert sorted((o.job.id, o.status) for o in outcomes) == [
            ("a", "completed"), ("b", "snoozed"), ("c", "completed")]
        row = c.job("b", now=clock.now)
        assert (row["state"], row["attempts"], row["not_before"], row["error"]) == ("delayed", 0, 15.0, None)


def test_queue_worker_snooze_of_a_lost_lease_stores_nothing(daemon: Daemon):
    """A job cancelled under its function, which then raises Snooze: the daemon
    refuses the stale snooze, the outcome is "lost" and the job stays cancelled."""
    clock = Clock(10.0)

    def fn(job: fenceq.Job) -> str:
        with daemon.client() as other:
            assert other.cancel(job.id, now=clock.now)
        raise fenceq.Snooze(5)

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "gone", ttl=60, wait=0.1,
                                                  clock=clock) as w:
        assert c.enqueue("x", queue="gone", now=clock.now)
        outcome = w.run_once(fn)
        assert outcome.status == fenceq.worker.LOST and isinstance(outcome.exception, fenceq.Snooze)
        assert c.job("x", now=clock.now)["state"] == "cancelled"


def test_queue_worker_fails_a_job_whose_snooze_delay_is_bad(daemon: Daemon):
    """A Snooze with a bad delay cannot be raised: the function raises the
    InvalidArgument instead, and the job fails with that text; the worker goes on."""
    clock = Clock(10.0)

    def fn(job: fenceq.Job) -> str:
        raise fenceq.Snooze(-5)

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "bad", ttl=60, wait=0.1,
                                                  clock=clock, retry_in=0) as w:
        assert c.enqueue("x", queue="bad", now=clock.now)
        outcome = w.run_once(fn)
        assert outcome.status == fenceq.worker.FAILED
        assert "Snooze: delay must be in [0, 1e+09] seconds, got -5" in outcome.error
        row = c.job("x", now=clock.now)
        assert row["attempts"] == 1 and "Snooze: delay" in row["error"]


def test_worker_run_snoozes_the_job_and_the_snooze_propagates(daemon: Daemon):
    """Worker.run (a job by id): a Snooze from fn snoozes the job (attempt
    given back, delayed) and then propagates; a refused snooze (the job was
    cancelled meanwhile) answers False, as a lost lease does."""
    clock = Clock(10.0)

    def put_off(lease: fenceq.Lease) -> str:
        raise fenceq.Snooze(20)

    def cancelled(lease: fenceq.Lease) -> str:
        with daemon.client() as other:
            assert other.cancel(lease.id, now=clock.now)
        raise fenceq.Snooze(20)

    with daemon.client() as c, fenceq.Worker(daemon.endpoint, ttl=60, clock=clock) as w:
        assert c.enqueue("by-id", now=clock.now)
        with pytest.raises(fenceq.Snooze):
            w.run("by-id", put_off)
        row = c.job("by-id", now=clock.now)
        assert (row["state"], row["attempts"], row["not_before"], row["error"]) == ("delayed", 0, 30.0, None)
        assert w.run("by-id", put_off) is None                 # not claimable before 30
        clock.now = 30.0
        assert w.run("by-id", lambda lease: f"fence {lease.fence}") is True
        assert c.job("by-id", now=clock.now)["result"] == "fence 2"

        assert c.enqueue("gone", now=clock.now)
        assert w.run("gone", cancelled) is False
        assert c.job("gone", now=clock.now)["state"] == "cancelled"
