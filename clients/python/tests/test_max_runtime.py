"""max_runtime (issue 33, C3.15): ``enqueue``'s (and every enqueue-like
method's) hard cap on one attempt, counted from its claim. No claim and no
renew sets the lease end past claim time + max_runtime; from the deadline on
the holder's writes are refused, and the daemon writes the attempt down as a
failure (``"max_runtime exceeded"``, the fence raised), retried after the
backoff or dead. Against real daemons in client clock mode, so that the
deadlines are exact; every call passes ``now``."""

from __future__ import annotations

import math
from typing import Any, Dict

import pytest

import fenceq
from conftest import Daemon, record_requests, wait_until
from fenceq import JobSpec


def until(client: fenceq.Client, id: str, now: float) -> float:
    """The lease end ``job`` shows for ``id``."""
    return client.job(id, now=now)["until"]


def written_down(client: fenceq.Client, id: str, now: float) -> Dict[str, Any]:
    """``id``'s row once the daemon wrote its overrun attempt down (its error
    set). The daemon does that with a batch of writes (SQLite), so this
    enqueues jobs of a queue of their own at ``now`` until it shows."""
    ticks = iter(range(1000))

    def error_set() -> bool:
        assert client.enqueue(f"tick-{id}-{next(ticks)}", queue="ticks", now=now)
        return client.job(id, now=now)["error"] is not None

    assert wait_until(error_set, 5, interval=0.05), f"{id}: the overrun was not written down"
    return client.job(id, now=now)


# -- the request ---------------------------------------------------------------

def test_max_runtime_is_sent_only_when_given_after_after_failure(client: fenceq.Client):
    """None: not sent (the daemon's default, no cap); given: after the other
    fields of the job, in the C++ encoder's order, before ``now``; in every
    enqueue-like method and an enqueue_many entry (a JobSpec's last field)."""
    assert client.enqueue("p", now=1)
    sent = record_requests(client)
    assert client.enqueue("a", queue="q", now=1) is True
    assert client.enqueue("b", queue="q", group="g", after=["p"], after_failure="run",
                          max_runtime=600, now=1) is True
    assert client.enqueue_unique("c", "k", queue="q", max_runtime=2.5, now=1) == ("c", True)
    assert client.enqueue_many([JobSpec("d", queue="q", max_runtime=60), {"id": "e"},
                                {"id": "f", "max_runtime": None}], now=1) == [True, True, True]
    assert client.enqueue_and_wait("g", 0, queue="q", group="g", max_runtime=30, now=1) is None
    assert client.enqueue_fan_in(["h1", {"id": "h2", "max_runtime": 5}],
                                 {"id": "h", "max_runtime": 7}, now=1) == [True, True, True]
    fields = [f for _, f, _ in sent]
    assert fields[0] == {"id": "a", "queue": "q", "now": 1}
    assert list(fields[1]) == ["id", "queue", "group", "after", "after_failure", "max_runtime", "now"]
    assert fields[1]["max_runtime"] == 600
    assert list(fields[2]) == ["id", "queue", "key", "max_runtime", "now"]
    assert fields[3]["jobs"] == [{"id": "d", "queue": "q", "max_runtime": 60}, {"id": "e"}, {"id": "f"}]
    assert list(fields[4]) == ["id", "queue", "group", "max_runtime", "wait", "now"]
    assert fields[5]["jobs"] == [{"id": "h1"}, {"id": "h2", "max_runtime": 5},
                                 {"id": "h", "after": ["h1", "h2"], "max_runtime": 7}]
    # max_runtime went last in issue 33; headers came after it.
    assert JobSpec._fields[12:14] == ("max_runtime", "headers") and JobSpec("x").max_runtime is None


# -- the cap -------------------------------------------------------------------

def test_the_lease_of_a_claim_ends_at_claim_time_plus_max_runtime(client: fenceq.Client):
    """C3.15 on every claim path: claim, claim_next (one and with max) and
    complete_and_claim_next's next end the lease at the deadline when the ttl
    would go further, and as asked when it would not; a job without
    max_runtime is not capped."""
    assert client.enqueue("m", queue="capped", max_runtime=10, now=20)
    assert client.claim("m", "W", 60, now=21) == 1
    assert until(client, "m", 21.5) == 31.0                     # the ttl would give 81
    assert client.enqueue_many([JobSpec("n1", queue="n", max_runtime=4),
                                {"id": "n2", "queue": "n", "max_runtime": 4},
                                JobSpec("n3", queue="n", max_runtime=4)], now=22) == [True] * 3
    jobs = client.claim_next("n", "W", 60, max=2, now=23)
    assert [until(client, j["id"], 23) for j in jobs] == [27.0, 27.0]
    r = client.complete_and_claim_next(jobs[0]["id"], "W", jobs[0]["fence"], "ok", "n", 60, now=24)
    assert r["completed"] is True and r["next"]["id"] == "n3"
    assert until(client, "n3", 24) == 28.0
    assert client.enqueue("short", queue="s", max_runtime=100, now=25)
    assert client.claim_next("s", "W", 5, now=26)["id"] == "short"
    assert until(client, "short", 26) == 31.0                   # the ttl ends first
    assert client.enqueue("free", queue="f", now=30)
    assert client.claim("free", "W", 60, now=31) == 1
    assert until(client, "free", 31) == 91.0


def test_a_renew_is_applied_but_never_past_the_deadline(client: fenceq.Client):
    """A renew answers True and extends the lease, no further than the
    deadline; a shorter one is as asked; at the deadline the lease is over and
    a renew is refused."""
    assert client.enqueue("m", max_runtime=10, now=1)
    fence = client.claim_next("default", "A", 30, now=2)["fence"]   # deadline 12
    assert until(client, "m", 2) == 12.0
    assert client.renew("m", "A", fence, 60, now=5) is True
    assert until(client, "m", 5) == 12.0
    assert client.renew("m", "A", fence, 3, now=6) is True
    assert until(client, "m", 6) == 9.0
    assert client.renew("m", "A", fence, 60, now=8) is True
    assert until(client, "m", 8) == 12.0
    assert client.renew("m", "A", fence, 60, now=12) is False
    assert client.check("m", "A", fence, now=12) is False


def test_a_complete_at_or_after_the_deadline_is_refused_and_the_attempt_failed(client: fenceq.Client):
    """C3.15: the complete at the deadline is refused (nothing stored); the
    daemon writes the attempt down as "max_runtime exceeded" with the fence
    raised, so even release is refused; the retry gets a higher fence and
    may complete."""
    assert client.enqueue("m", queue="capped", max_runtime=10, now=20)
    assert client.claim("m", "W", 60, now=21) == 1              # deadline 31
    assert client.complete("m", "W", 1, "late", now=31) is False
    row = written_down(client, "m", 32)
    assert (row["error"], row["fence"], row["owner"], row["attempts"]) == ("max_runtime exceeded", 2, None, 1)
    assert row["state"] in ("ready", "delayed") and row["result"] is None
    assert client.complete("m", "W", 1, "later still", now=40) is False
    assert client.release("m", "W", 1) is False
    again = client.claim_next("capped", "V", 60, now=40)
    assert (again["id"], again["fence"], again["attempts"]) == ("m", 3, 2)
    assert client.complete("m", "V", 3, "in time", now=45) is True
    assert client.job("m", now=45)["result"] == "in time"


def test_an_overrun_last_attempt_makes_the_job_dead(client: fenceq.Client):
    """With its attempts used up, the overrun attempt leaves the job dead of it."""
    assert client.enqueue("once", max_attempts=1, max_runtime=5, now=1)
    assert client.claim("once", "A", 60, now=2) == 1            # deadline 7
    row = written_down(client, "once", 8)
    assert (row["state"], row["error"], row["fence"]) == ("dead", "max_runtime exceeded", 2)


def test_enqueue_and_wait_and_enqueue_fan_in_cap_their_jobs(client: fenceq.Client):
    """The cap given to enqueue_and_wait and to a fan-in's part and child is the
    one their claims get."""
    assert client.enqueue_and_wait("w", 0, queue="ew", max_runtime=8, now=1) is None
    assert client.claim_next("ew", "A", 60, now=2)["id"] == "w"
    assert until(client, "w", 2) == 10.0
    assert client.enqueue_fan_in([JobSpec("p", queue="fan", max_runtime=3)],
                                 {"id": "c", "queue": "fan", "max_runtime": 6}, now=3) == [True, True]
    assert client.claim_next("fan", "A", 60, now=4)["id"] == "p"
    assert until(client, "p", 4) == 7.0
    assert client.complete("p", "A", 1, "part", now=5) is True
    child = client.claim_next("fan", "A", 60, now=6)
    assert (child["id"], child["after"]) == ("c", ["p"])
    assert until(client, "c", 6) == 12.0


# -- bad values ----------------------------------------------------------------

def test_bad_max_runtime_is_the_daemons_coded_error_and_creates_nothing(client: fenceq.Client):
    """0 or less, above 1e9, NaN or infinity: InvalidArgument (a ValueError)
    naming the field; not a number: BadRequest. In enqueue_many the message
    names the entry and none of the batch is applied; enqueue_and_wait's is
    refused before its wait."""
    for bad in (0, -5, 1e9 + 1, math.inf, math.nan):
        with pytest.raises(fenceq.InvalidArgument, match="max_runtime") as e:
            client.enqueue("x", max_runtime=bad, now=1)
        assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError)
    for bad in ("10", True, [1]):
        with pytest.raises(fenceq.BadRequest, match="max_runtime"):
            client.enqueue("x", max_runtime=bad, now=1)  # type: ignore[arg-type]
    with pytest.raises(fenceq.InvalidArgument, match=r"jobs\[1\].*max_runtime"):
        client.enqueue_many([{"id": "ok"}, JobSpec("x", max_runtime=2e9)], now=1)
    with pytest.raises(fenceq.InvalidArgument, match="max_runtime"):
        client.enqueue_unique("x", "k", max_runtime=0, now=1)
    with pytest.raises(fenceq.InvalidArgument, match="max_runtime"):
        client.enqueue_and_wait("x", 5, max_runtime=-1, now=1)
    with pytest.raises(fenceq.InvalidArgument, match="max_runtime"):
        client.enqueue_fan_in(["ok"], {"id": "x", "max_runtime": 0}, now=1)
    assert client.job("x", now=1) is None and client.job("ok", now=1) is None
    assert client.enqueue("edge", max_runtime=1e9, now=1) is True   # the bound itself is fine


# -- through a QueueWorker -----------------------------------------------------

class Clock:
    """The ``now`` of a client clock daemon, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_queue_worker_whose_function_overruns_loses_the_job(daemon: Daemon):
    """A function still running at the deadline: its result is refused (the
    outcome is "lost", nothing stored), and the daemon fails the attempt."""
    clock = Clock(10.0)

    def slow(job: fenceq.Job) -> str:
        clock.now = 26.0                                    # past the deadline, 10 + 15
        return "too late"

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "slow", ttl=60, wait=0.1,
                                                  clock=clock) as w:
        assert c.enqueue("x", queue="slow", max_runtime=15, now=clock.now)
        outcome = w.run_once(slow)
        assert outcome.status == fenceq.worker.LOST and outcome.result == "too late"
        row = written_down(c, "x", clock.now)
        assert (row["error"], row["result"], row["fence"]) == ("max_runtime exceeded", None, 2)
