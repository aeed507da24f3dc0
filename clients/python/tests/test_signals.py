"""Suspend, signal and deadlines (C3.23, C3.24): ``Client.suspend`` ends a
current lease and answers a signal token (``None``: the lease was not
current); ``Client.signal`` wakes the job once per token, and its claims
carry ``"signal"``; a job's suspend that times out makes it ready again
("suspend timed out") or dead. ``enqueue(..., deadline=)``: a job not claimed
by then is never claimed (dead, "deadline passed"). ``fenceq.Job.suspend``
ends a QueueWorker's attempt. Against real daemons in client clock mode;
every call passes ``now``, and what the daemon applies at its next batch (a
timeout) is polled for, with a bound."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

import msgpack
import pytest

import fenceq
from conftest import Background, Daemon, record_requests, wait_until

KIB = 1024


class Clock:
    """The ``now`` of a client clock daemon, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def claim_when_ready(c: fenceq.Client, queue: str, owner: str, now: float,
                     seconds: float = 5.0) -> Optional[Dict[str, Any]]:
    """claim_next until it answers a job (a suspend's timeout is applied at
    the daemon's next batch, not at once), for at most ``seconds``."""
    got: List[Dict[str, Any]] = []

    def claimed() -> bool:
        job = c.claim_next(queue, owner, 30, now=now)
        if job is not None:
            got.append(job)
        return bool(got)

    wait_until(claimed, seconds)
    return got[0] if got else None


def is_token(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 32 and all(ch in "0123456789abcdef" for ch in value)


# -- 1. the story --------------------------------------------------------------

@pytest.mark.parametrize("prefetch", [1, 3])
def test_c3_23_the_order_story_steps_suspend_and_signal(daemon: Daemon, prefetch: int):
    """C3.22 + C3.23, the whole story with QueueWorkers (both ways of claiming:
    claim_next, and claim_next with max). Attempt 1 (worker A) charges (a
    step) and fails sending the email. Attempt 2 (worker B) skips the charge,
    sends the email and, not yet approved, suspends: the attempt ends there
    ("suspended", nothing completed), its token handed on. Meanwhile A,
    stalled since attempt 1, wakes up late: it cannot save "charge" again, nor
    any step. The approval signals the token with a value: True, once (the
    webhook's second delivery is False). Attempt 3 finds the signal and both
    steps in its claim and completes. The charge ran once in all."""
    clock = Clock(10.0)
    calls: List[str] = []
    seen: List[Dict[str, Any]] = []
    handed_on: List[str] = []
    stalled: Dict[str, fenceq.Job] = {}

    def charge() -> str:
        calls.append("charge")
        return "ch_1Nq"

    def email() -> None:
        calls.append("email")
        if calls.count("email") == 1:
            raise ConnectionError("smtp down")

    def handler(job: fenceq.Job) -> Optional[str]:
        seen.append({"steps": dict(job.steps), "signalled": job.signalled, "signal": job.signal})
        stalled.setdefault("A", job)                     # attempt 1's job, kept by the stalled A
        receipt = job.step("charge", charge)
        job.step("email", email)
        if not job.signalled:
            token = job.suspend(3600)                    # wait for the approval
            handed_on.append(token)                      # e.g. a link in the email
            return "dropped: the attempt ended at the suspend"
        return f"{receipt} {job.signal!r}"

    with daemon.client() as c, \
            fenceq.QueueWorker(daemon.endpoint, "orders", owner="A", ttl=60, wait=0.1, retry_in=0,
                               clock=clock, prefetch=prefetch) as a, \
            fenceq.QueueWorker(daemon.endpoint, "orders", owner="B", ttl=60, wait=0.1, retry_in=0,
                               clock=clock, prefetch=prefetch) as b:
        assert c.enqueue("order-7", queue="orders", now=clock.now)

        first = a.run_once(handler)
        assert first.status == "failed" and "smtp down" in first.error
        assert first.job.fence == 1 and first.job.steps == {"charge": "ch_1Nq"}

        clock.now = 11.0
        second = b.run_once(handler)
        assert second.status == "suspended", second
        assert second.job.fence == 2 and second.job.attempts == 2
        assert second.result == "dropped: the attempt ended at the suspend"
        token = second.job.signal_token
        assert is_token(token) and handed_on == [token]
        assert second.job.lost.is_set()                  # the lease ended with the suspend
        row = c.job("order-7", now=clock.now)
        assert row["state"] == "suspended" and row["owner"] is None and row["fence"] == 2
        assert row["suspended"] == {"timeout": 11.0 + 3600, "on_timeout": "retry"}
        assert row["steps"] == {"charge": "ch_1Nq", "email": None}
        assert "signal" not in row and row["result"] is None
        assert [r["id"] for r in c.list(state="suspended", now=clock.now)] == ["order-7"]
        assert c.stats(now=clock.now)["queues"]["orders"]["suspended"] == 1
        assert a.run_once(handler, wait=0) is None       # a suspended job is not claimed

        # A, stalled since attempt 1 (fence 1), wakes up late: refused.
        late = stalled["A"]
        assert late.fence == 1
        assert c.step_save("order-7", "A", 1, "charge", "ch_again", now=clock.now) is False
        with pytest.raises(fenceq.LeaseLost):
            late.step("refund", lambda: calls.append("refund") or "rf_1")  # ran, never saved
        assert c.suspend("order-7", "A", 1, 60, now=clock.now) is None
        assert c.job("order-7", now=clock.now)["steps"] == {"charge": "ch_1Nq", "email": None}

        clock.now = 12.0
        assert c.signal(token, "approved", now=clock.now) is True
        assert c.signal(token, "approved", now=clock.now) is False    # delivered twice: once
        assert c.job("order-7", now=clock.now)["signal"] == "approved"

        third = a.run_once(handler)
        assert third.status == "completed" and third.result == "ch_1Nq 'approved'"
        assert third.job.fence == 3 and third.job.signalled and third.job.signal == "approved"
        assert third.job.steps == {"charge": "ch_1Nq", "email": None}
        assert c.signal(token, "later", now=clock.now) is False

    assert calls == ["charge", "email", "email", "refund"]    # charge once; A's refund unsaved
    assert seen == [
        {"steps": {}, "signalled": False, "signal": None},
        {"steps": {"charge": "ch_1Nq"}, "signalled": False, "signal": None},
        {"steps": {"charge": "ch_1Nq", "email": None}, "signalled": True, "signal": "approved"},
    ]
    with daemon.client() as c:
        row = c.job("order-7", now=12.0)
    assert (row["state"], row["result"], row["fence"]) == ("done", "ch_1Nq 'approved'", 3)
    assert row["steps"] == {"charge": "ch_1Nq", "email": None}


def test_c3_23_the_claim_carries_the_signal_with_its_type(client: fenceq.Client):
    """A signal's value comes back in the claim as sent: bin as bytes, str as
    str, an explicit None as None and no value at all as None too; both are
    "signal" in the claim. A job never signalled has no "signal"."""
    values = {"bin": b"\x00\xffpaid", "str": "paid", "nil": None}
    for n, name in enumerate([*values, "absent"]):
        assert client.enqueue(name, queue=name, now=1.0)
        job = client.claim_next(name, "A", 30, now=1.0)
        token = client.suspend(name, "A", job["fence"], 60, now=2.0)
        assert is_token(token)
        if name == "absent":
            assert client.signal(token, now=3.0) is True
        else:
            assert client.signal(token, values[name], now=3.0) is True
        job = client.claim_next(name, "B", 30, now=4.0)
        assert job is not None and "signal" in job
        assert job["signal"] == values.get(name) and type(job["signal"]) is type(values.get(name))
        assert client.job(name, now=4.0)["signal"] == values.get(name)
    assert client.enqueue("plain", queue="plain", now=5.0)
    job = client.claim_next("plain", "A", 30, now=5.0)
    assert "signal" not in job and "signal" not in client.job("plain", now=5.0)


def test_c3_23_suspend_and_signal_send_the_vectors_fields(client: fenceq.Client):
    """suspend sends {id, owner, fence, timeout, on_timeout?, now} (on_timeout
    only when given), signal {token, value?, now?}: no value at all unless
    given (None is sent as nil), bytes-likes as bin; the shared vector's
    bytes (protocol/vectors/signals.json, "nor another owner")."""
    sent = record_requests(client)
    assert client.enqueue("o", queue="orders", now=1.0)
    assert client.claim_next("orders", "A", 30, now=2.0)["fence"] == 1
    assert client.suspend("o", "B", 1, 60, on_timeout="fail", now=3.0) is None
    op, fields, _ = sent[-1]
    assert msgpack.packb({"op": op, **fields}, use_bin_type=True) == bytes.fromhex(
        "87a26f70a773757370656e64a26964a16fa56f776e6572a142a566656e636501a774696d656f75743c"
        "aa6f6e5f74696d656f7574a46661696ca36e6f77cb4008000000000000")
    token = client.suspend("o", "A", 1, 60, now=3.0)
    assert list(sent[-1][1]) == ["id", "owner", "fence", "timeout", "now"]
    assert client.signal("0" * 32, now=4.0) is False
    assert sent[-1][1] == {"token": "0" * 32, "now": 4.0}
    assert client.signal("0" * 32, None, now=4.0) is False
    assert "value" in sent[-1][1] and sent[-1][1]["value"] is None
    assert client.signal(token, memoryview(b"ok")) is True          # now is optional
    assert sent[-1][1] == {"token": token, "value": b"ok"} and type(sent[-1][1]["value"]) is bytes
    assert fenceq.MIN_SUSPEND_SECONDS == 1 and fenceq.MAX_SUSPEND_SECONDS == 2_592_000
    assert fenceq.ON_TIMEOUT == ("retry", "fail") and fenceq.MAX_TOKEN_BYTES == 256
    assert "suspended" in fenceq.JOB_STATES
    assert {"suspended", "signalled", "expired"} <= set(fenceq.EVENT_KINDS)


def test_c3_23_a_new_suspend_forgets_the_old_signal_and_token(client: fenceq.Client):
    """Signalled, claimed, suspended again: the first token wakes nothing any
    more, and a claim after the second wait timed out has no "signal"."""
    assert client.enqueue("r", queue="q", now=1.0)
    job = client.claim_next("q", "A", 30, now=1.0)
    first = client.suspend("r", "A", job["fence"], 60, now=1.0)
    assert client.signal(first, "v", now=2.0) is True
    job = client.claim_next("q", "A", 30, now=2.0)
    assert job["signal"] == "v"
    second = client.suspend("r", "A", job["fence"], 1, now=3.0)
    assert is_token(second) and second != first
    assert client.signal(first, "again", now=3.0) is False
    assert "signal" not in client.job("r", now=3.0)
    job = claim_when_ready(client, "q", "B", now=5.0)
    assert job is not None and job["id"] == "r" and "signal" not in job


def test_c3_23_a_cancelled_suspended_job_wakes_no_more(client: fenceq.Client):
    """cancel and cancel_many (state "suspended", and with no state) take a
    suspended job: cancelled, and its token wakes nothing."""
    tokens = {}
    for id in ("a", "b", "c"):
        assert client.enqueue(id, queue="q", now=1.0)
        job = client.claim_next("q", "A", 30, now=1.0)
        tokens[id] = client.suspend(id, "A", job["fence"], 60, now=1.0)
    assert "suspended" in fenceq.CANCEL_MANY_STATES
    assert client.cancel("a", now=2.0) is True
    assert client.cancel_many("q", state="suspended", prefix="b", now=2.0) == (1, False)
    assert client.cancel_many("q", now=2.0) == (1, False)
    for id, token in tokens.items():
        assert client.job(id, now=2.0)["state"] == "cancelled"
        assert client.signal(token, "late", now=2.0) is False
    assert client.claim_next("q", "B", 30, now=3.0) is None


# -- 2. timeouts ---------------------------------------------------------------

def test_c3_23_a_suspend_times_out_ready_again_or_dead(client: fenceq.Client):
    """timeout 1 s, the client clock moved past it: with on_timeout "retry"
    (the default) the job is claimable again, with no "signal" and the error
    "suspend timed out", and its token wakes nothing; with "fail" it is dead
    with that error. Polled: the daemon applies a timeout at its next batch."""
    assert client.enqueue("t", queue="q", now=1.0)
    assert client.enqueue("f", queue="q2", now=1.0)
    t = client.claim_next("q", "A", 30, now=1.0)
    f = client.claim_next("q2", "A", 30, now=1.0)
    token = client.suspend("t", "A", t["fence"], 1, now=2.0)
    dead_token = client.suspend("f", "A", f["fence"], 1, on_timeout="fail", now=2.0)
    assert is_token(token) and is_token(dead_token)
    assert client.job("t", now=2.0)["suspended"] == {"timeout": 3.0, "on_timeout": "retry"}
    assert client.job("f", now=2.0)["suspended"] == {"timeout": 3.0, "on_timeout": "fail"}
    assert client.claim_next("q", "B", 30, now=2.5) is None           # still waiting

    job = claim_when_ready(client, "q", "B", now=4.0)
    assert job is not None and job["id"] == "t" and job["fence"] == t["fence"] + 1
    assert "signal" not in job and job["attempts"] == 1               # the attempt was given back
    row = client.job("t", now=4.0)
    assert row["error"] == "suspend timed out" and "suspended" not in row
    assert client.signal(token, "late", now=4.0) is False

    assert wait_until(lambda: client.job("f", now=4.0)["state"] == "dead", 5)
    row = client.job("f", now=4.0)
    assert row["error"] == "suspend timed out" and "suspended" not in row
    assert client.claim_next("q2", "B", 30, now=4.0) is None
    assert client.signal(dead_token, now=4.0) is False


def test_c3_23_a_workers_suspend_that_times_out_runs_the_job_again(daemon: Daemon):
    """QueueWorker: job.suspend(1, on_timeout="retry"); no signal comes; once
    the clock is past the wait, the next run_once gets the job back with
    signalled False (and the error "suspend timed out" on its record)."""
    clock = Clock(1.0)
    runs: List[bool] = []

    def handler(job: fenceq.Job) -> Optional[str]:
        runs.append(job.signalled)
        if len(runs) == 1:
            job.suspend(1)
            return None
        return "gave up waiting"

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "q", ttl=30, wait=0.05,
                                                  clock=clock) as w:
        assert c.enqueue("j", queue="q", now=clock.now)
        assert w.run_once(handler).status == "suspended"
        clock.now = 3.0
        outcome = None
        for _ in range(100):                            # bounded: the daemon's next batch
            outcome = w.run_once(handler)
            if outcome is not None:
                break
        assert outcome is not None and outcome.status == "completed"
        assert not outcome.job.signalled and outcome.job.signal is None
        assert c.job("j", now=clock.now)["error"] == "suspend timed out"
    assert runs == [False, False]


# -- 3. a stale lease ----------------------------------------------------------

def test_c3_23_a_lease_that_is_not_current_cannot_suspend(client: fenceq.Client):
    """suspend answers None, and nothing changes, for a stale fence, another
    owner, an expired lease, a released one, a done job and a missing one."""
    assert client.enqueue("s", queue="q", now=1.0)
    job = client.claim_next("q", "A", 10, now=1.0)
    before = client.job("s", now=2.0)
    assert client.suspend("s", "A", job["fence"] + 1, 60, now=2.0) is None
    assert client.suspend("s", "B", job["fence"], 60, now=2.0) is None
    assert client.job("s", now=2.0) == before                           # still A's
    assert client.suspend("s", "A", job["fence"], 60, now=11.0) is None  # expired at 11
    assert client.job("s", now=11.0)["state"] == "ready"
    job = client.claim_next("q", "B", 10, now=12.0)
    assert client.suspend("s", "A", job["fence"] - 1, 60, now=12.0) is None   # A, late
    assert client.release("s", "B", job["fence"])
    assert client.suspend("s", "B", job["fence"], 60, now=12.0) is None       # released
    job = client.claim_next("q", "C", 10, now=13.0)
    assert client.complete("s", "C", job["fence"], "done", now=13.0)
    assert client.suspend("s", "C", job["fence"], 60, now=13.0) is None       # done
    assert client.suspend("missing", "C", 1, 60, now=13.0) is None
    row = client.job("s", now=13.0)
    assert (row["state"], row["result"]) == ("done", "done") and "suspended" not in row
    assert client.list(state="suspended", now=13.0) == []
    assert "suspended" not in client.stats(now=13.0)["queues"]["q"]


def test_c3_23_a_stale_workers_suspend_raises_lease_lost(daemon: Daemon, caplog):
    """Worker A's lease expires while its function runs and B claims the job;
    A's job.suspend is refused: LeaseLost, outcome "lost", nothing stored
    (B's lease and the job's state untouched)."""
    clock = Clock(1.0)
    with daemon.client() as c, \
            fenceq.QueueWorker(daemon.endpoint, "q", owner="A", ttl=10, renew_every=1000,
                               wait=0.1, clock=clock) as a:
        assert c.enqueue("j", queue="q", now=clock.now)
        taken: Dict[str, Any] = {}

        def a_fn(job: fenceq.Job) -> str:
            clock.now = 20.0                                   # stalled past its lease
            taken.update(c.claim_next("q", "B", 30, now=clock.now))
            job.suspend(60)
            return "never"

        outcome = a.run_once(a_fn)
        assert outcome.status == "lost" and isinstance(outcome.exception, fenceq.LeaseLost)
        assert outcome.exception.code == "lease_lost"
        assert outcome.job.signal_token is None
        row = c.job("j", now=clock.now)
        assert (row["state"], row["owner"], row["fence"]) == ("leased", "B", taken["fence"])
        assert "suspended" not in row


# -- 4. deadlines --------------------------------------------------------------

def test_c3_24_a_job_not_claimed_by_its_deadline_is_never_claimed(client: fenceq.Client):
    """enqueue and enqueue_many (JobSpec and dict entries) with a deadline: a
    job claimed before it runs as usual; one whose deadline passed is not
    claimed: dead with "deadline passed", counted in the queue's totals."""
    sent = record_requests(client)
    assert client.enqueue("late", queue="offers", delay=50, deadline=100.0, now=60.0)
    assert sent[-1][1] == {"id": "late", "queue": "offers", "delay": 50, "deadline": 100.0,
                           "now": 60.0}
    assert client.enqueue_unique("keyed", "k", queue="other", headers={"h": "1"}, deadline=1e9,
                                 now=60.0) == ("keyed", True)
    # The C++ encoder's order: deadline after every other field of the job.
    assert list(sent[-1][1]) == ["id", "queue", "key", "headers", "deadline", "now"]
    assert fenceq.JobSpec._fields[-1] == "deadline" and fenceq.JobSpec("x").deadline is None
    assert client.enqueue_many([fenceq.JobSpec("in-time", queue="offers", deadline=200.0),
                                {"id": "late-2", "queue": "offers2", "deadline": 105.0}],
                               now=61.0) == [True, True]
    assert sent[-1][1]["jobs"] == [{"id": "in-time", "queue": "offers", "deadline": 200.0},
                                   {"id": "late-2", "queue": "offers2", "deadline": 105.0}]
    job = client.claim_next("offers", "A", 100, now=62.0)
    assert job["id"] == "in-time"                              # "late" is still delayed
    assert client.claim_next("offers", "A", 30, now=110.0) is None
    assert client.claim_next("offers2", "A", 30, now=110.0) is None
    for id in ("late", "late-2"):
        assert wait_until(lambda: client.job(id, now=110.0)["error"] == "deadline passed", 5)
        row = client.job(id, now=110.0)
        assert (row["state"], row["attempts"], row["fence"]) == ("dead", 0, 0)
    totals = client.stats(now=110.0)["queues"]["offers"]["totals"]
    assert totals["deadline_passed"] == 1
    assert client.complete("in-time", "A", job["fence"], "ok", now=110.0)  # not touched


def test_c3_24_enqueue_and_wait_takes_a_deadline(client: fenceq.Client):
    """enqueue_and_wait sends the deadline; the job it enqueued is dead once
    the deadline passed unclaimed, and the await answers its record."""
    sent = record_requests(client)
    assert client.enqueue_and_wait("w", 0, queue="q", deadline=9.0, now=8.0) is None
    assert list(sent[-1][1].items()) == [("id", "w"), ("queue", "q"), ("deadline", 9.0),
                                         ("wait", 0), ("now", 8.0)]
    assert client.claim_next("q", "A", 30, now=10.0) is None
    row = client.enqueue_and_wait("w", 0, queue="q", now=10.0)
    assert row is not None and row["state"] == "dead"


# -- 5. bad input --------------------------------------------------------------

def test_c3_23_c3_24_bad_input_is_a_coded_error_and_changes_nothing(client: fenceq.Client):
    """timeout 0 (and 0.5, over 30 days), on_timeout "x": InvalidArgument; a
    timeout that is not a number: BadRequest. An empty token, one over 256
    bytes: InvalidArgument; a token not a str, a value not a payload:
    BadRequest; a value over 256 KiB refused before anything is sent. A
    deadline of 0, or below: InvalidArgument; not a number: BadRequest. The
    job stays leased; no job is created."""
    assert client.enqueue("o", queue="q", now=1.0)
    fence = client.claim_next("q", "A", 30, now=1.0)["fence"]
    for timeout in (0, 0.5, 2_592_001):
        with pytest.raises(fenceq.InvalidArgument, match="timeout") as e:
            client.suspend("o", "A", fence, timeout, now=2.0)
        assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError)
    with pytest.raises(fenceq.InvalidArgument, match="on_timeout"):
        client.suspend("o", "A", fence, 60, on_timeout="x", now=2.0)
    with pytest.raises(fenceq.BadRequest, match="timeout"):
        client.suspend("o", "A", fence, "1h", now=2.0)  # type: ignore[arg-type]
    with pytest.raises(fenceq.InvalidArgument, match="now"):
        client.suspend("o", "A", fence, 60)             # client clock: now is required
    row = client.job("o", now=2.0)
    assert (row["state"], row["owner"], row["fence"]) == ("leased", "A", fence)

    for token in ("", "t" * 257):
        with pytest.raises(fenceq.InvalidArgument, match="token") as e:
            client.signal(token, now=2.0)
        assert e.value.code == "invalid_argument"
    with pytest.raises(fenceq.BadRequest, match="token"):
        client.signal(7, now=2.0)  # type: ignore[arg-type]
    with pytest.raises(fenceq.BadRequest, match="value"):
        client.signal("t", {"a": 1}, now=2.0)
    sent = record_requests(client)
    with pytest.raises(fenceq.InvalidArgument, match="value"):
        client.signal("t", b"x" * (256 * KIB + 1), now=2.0)
    assert sent == []

    for deadline in (0, -1.0):
        with pytest.raises(fenceq.InvalidArgument, match="deadline") as e:
            client.enqueue("e", deadline=deadline, now=2.0)
        assert e.value.code == "invalid_argument"
    with pytest.raises(fenceq.BadRequest, match="deadline"):
        client.enqueue("e", deadline="soon", now=2.0)  # type: ignore[arg-type]
    with pytest.raises(fenceq.InvalidArgument, match="deadline"):
        client.enqueue_many([fenceq.JobSpec("e", deadline=0)], now=2.0)
    assert client.job("e", now=2.0) is None


# -- the worker's job.suspend --------------------------------------------------

def test_job_suspend_ends_the_attempt_whatever_the_function_does_after(daemon: Daemon, caplog):
    """After a successful job.suspend the worker sends nothing for the
    attempt: a function that raises afterwards is not failed, one that calls
    job.step afterwards gets LeaseLost before its fn runs (outcome still
    "suspended"), and a second suspend is LeaseLost too. The lease is renewed
    no more (no refused renewal is logged)."""
    clock = Clock(1.0)
    ran: List[str] = []

    def raises_after(job: fenceq.Job) -> str:
        job.suspend(60)
        raise RuntimeError("after the suspend")

    def steps_after(job: fenceq.Job) -> str:
        job.suspend(60, on_timeout="fail")
        with pytest.raises(fenceq.LeaseLost):
            job.suspend(60)
        job.step("later", lambda: ran.append("later") or "x")
        return "never"

    caplog.set_level(logging.INFO, logger="fenceq.worker")
    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "q", ttl=30, renew_every=0.02,
                                                  wait=0.1, clock=clock) as w:
        assert c.enqueue("a", queue="q", priority=1, now=clock.now)
        assert c.enqueue("b", queue="q", now=clock.now)
        sent = record_requests(w._client)
        first = w.run_once(raises_after)
        assert first.status == "suspended" and isinstance(first.exception, RuntimeError)
        second = w.run_once(steps_after)
        assert second.status == "suspended" and isinstance(second.exception, fenceq.LeaseLost)
        assert [op for op, _, _ in sent] == ["claim_next", "suspend", "claim_next", "suspend"]
        assert sent[3][1]["on_timeout"] == "fail"
        for id in ("a", "b"):
            row = c.job(id, now=clock.now)
            assert row["state"] == "suspended" and row["error"] is None
        assert c.job("b", now=clock.now)["suspended"]["on_timeout"] == "fail"
    assert ran == []
    assert not [r for r in caplog.records if "renewal refused" in r.getMessage()]
    assert any("suspended until signalled" in r.getMessage() for r in caplog.records)


def test_job_suspend_checks_before_it_sends(daemon: Daemon):
    """A lease known lost raises LeaseLost and sends nothing; a bad timeout is
    the daemon's InvalidArgument and fails the job (its lease was still
    current: nothing changed); a Job made by hand cannot suspend."""
    clock = Clock(1.0)

    def handler(job: fenceq.Job) -> str:
        sent = record_requests(w._client)
        job.lost.set()                                   # as a refused renewal does
        with pytest.raises(fenceq.LeaseLost):
            job.suspend(60)
        job.lost.clear()
        assert sent == [] and job.signal_token is None
        job.suspend(0)                                   # InvalidArgument: the job fails
        return "never"

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "q", ttl=30, wait=0.1,
                                                  retry_in=100, clock=clock) as w:
        assert c.enqueue("j", queue="q", now=clock.now)
        outcome = w.run_once(handler)
        assert outcome.status == "failed" and isinstance(outcome.exception, fenceq.InvalidArgument)
        assert c.job("j", now=clock.now)["state"] == "delayed"

    job = fenceq.Job(id="by-hand", owner="o", fence=1, ttl=1)
    with pytest.raises(fenceq.ClientMisuse):
        job.suspend(60)
    assert (job.signalled, job.signal, job.signal_token) == (False, None, None)


def test_held_and_prefetched_jobs_carry_their_signal(daemon: Daemon):
    """The job a completion claims ahead (complete_and_claim_next's next) and
    the jobs of complete_many's next are Jobs with signalled and signal."""
    clock = Clock(1.0)
    with daemon.client() as c:
        for id in ("s1", "s2", "s3"):
            assert c.enqueue(id, queue="wake", now=1.0)
        tokens = [c.suspend(job["id"], "X", job["fence"], 60, now=1.0)
                  for job in c.claim_next("wake", "X", 30, max=3, now=1.0)]
        for id, token in zip(("s1", "s2", "s3"), tokens):
            assert c.signal(token, f"v-{id}", now=1.0)
        assert c.enqueue("first", queue="wake", priority=1, now=1.0)

        with fenceq.QueueWorker(daemon.endpoint, "wake", ttl=30, wait=0.1, clock=clock) as w:
            outcome = w.run_once(lambda job: None, take_next=True)
            assert outcome.job.id == "first" and not outcome.job.signalled
            assert w.held is not None and w.held.signalled and w.held.signal == "v-s1"
            assert w.run_once(lambda job: job.signal).result == "v-s1"

        got: List[fenceq.Job] = []
        with fenceq.QueueWorker(daemon.endpoint, "wake", ttl=30, wait=0.1, clock=clock,
                                prefetch=2) as w:
            assert w.run(lambda job: got.append(job), max_jobs=2) == 2
        assert [(j.id, j.signalled, j.signal) for j in got] == [("s2", True, "v-s2"),
                                                                ("s3", True, "v-s3")]


# -- events -------------------------------------------------------------------

def test_c3_23_c3_24_events_suspended_signalled_expired(start_daemon, tmp_dir: str):
    """fenceqd --events publishes "suspended" (a suspend), "signalled" (a
    signal) and "expired" (a deadline passed); the Subscriber passes them on
    as Events of fenceq.EVENT_KINDS. The subscriber is made ready first
    (probe jobs until one's event arrives: the slow joiner), bounded."""
    events = f"ipc://{tmp_dir}/ev-events.sock"
    d = start_daemon(name="ev", clock="client", extra=["--events", events])
    with d.client() as c, fenceq.subscribe(events, "q") as sub:
        ready = False
        for n in range(50):                              # bounded: ~5 s
            assert c.enqueue(f"probe-{n}", queue="q", delay=1e6, now=1.0)
            if sub.recv(timeout=0.1) is not None:
                ready = True
                break
        assert ready, "the subscription did not reach the daemon"
        assert c.enqueue("o", queue="q", now=1.0)
        job = c.claim_next("q", "A", 30, now=1.0)
        assert job["id"] == "o"
        token = c.suspend("o", "A", job["fence"], 60, now=2.0)
        assert c.signal(token, "v", now=3.0)
        assert c.enqueue("d", queue="q", delay=10, deadline=5.0, now=3.0)
        assert c.claim_next("q", "A", 30, now=4.0)["id"] == "o"
        assert c.claim_next("q", "A", 30, now=20.0) is None   # d: its deadline passed
        seen: List[Any] = []
        for _ in range(200):                             # bounded
            ev = sub.recv(timeout=0.05)
            if ev is None:
                c.stats(now=20.0)   # client clock: d is written down dead with a later batch
            elif not ev.id.startswith("probe-"):
                seen.append((ev.event, ev.id))
            if ("expired", "d") in seen:
                break
    assert ("suspended", "o") in seen and ("signalled", "o") in seen and ("expired", "d") in seen
    assert seen.index(("suspended", "o")) < seen.index(("signalled", "o"))
    assert {"suspended", "signalled", "expired"} <= set(fenceq.EVENT_KINDS)


# -- replies the daemon never sends ----------------------------------------------

def _answer_with(fake_daemon, call, result: Any) -> Any:
    """``call(client)`` against a fake daemon that answers ``result``."""
    endpoint, router = fake_daemon

    def serve() -> None:
        assert router.poll(5000)
        identity, empty, payload = router.recv_multipart()
        rid = msgpack.unpackb(payload, raw=False)["rid"]
        router.send_multipart([identity, empty, msgpack.packb(
            {"ok": True, "rid": rid, "result": result}, use_bin_type=True)])

    server = Background(serve)
    try:
        with fenceq.Client(endpoint, timeout=5) as c:
            return call(c)
    finally:
        server.result()


CLAIMED = {"id": "c", "fence": 1, "payload": None, "attempts": 1}


@pytest.mark.parametrize("call, result", [
    (lambda c: c.suspend("c", "w", 1, 60), True),
    (lambda c: c.suspend("c", "w", 1, 60), None),
    (lambda c: c.suspend("c", "w", 1, 60), ""),
    (lambda c: c.suspend("c", "w", 1, 60), 7),
    (lambda c: c.signal("t"), "yes"),
    (lambda c: c.claim_next("q", "w", 30), {**CLAIMED, "signal": {"a": 1}}),
    (lambda c: c.claim_next("q", "w", 30, max=2), [{**CLAIMED, "signal": 5}]),
    (lambda c: c.job("c"), {"id": "c", "state": "suspended", "suspended": 5}),
    (lambda c: c.job("c"), {"id": "c", "state": "suspended", "suspended": {"timeout": "x",
                                                                          "on_timeout": "retry"}}),
    (lambda c: c.job("c"), {"id": "c", "state": "ready", "signal": ["v"]}),
])
def test_bad_suspend_and_signal_replies_are_bad_replies(fake_daemon, call, result):
    """A suspend answered with anything but a token or false (true never
    comes), a signal with anything but a bool, a claimed job or record whose
    signal is not a payload or whose suspended is not {timeout, on_timeout}:
    the daemon's fault, BadReply."""
    with pytest.raises(fenceq.BadReply):
        _answer_with(fake_daemon, call, result)


def test_a_suspend_answered_false_is_none(fake_daemon):
    assert _answer_with(fake_daemon, lambda c: c.suspend("c", "w", 1, 60), False) is None
    assert _answer_with(fake_daemon, lambda c: c.suspend("c", "w", 1, 60), "f" * 32) == "f" * 32
