"""Steps (C3.22): ``Client.step_save`` saves a step's result under the current
lease, once per job; every later claim of the job (and ``job``) carries
``steps``, only when it has some. ``fenceq.Job.step`` runs a step at most once
per job, across attempts, and a stale worker cannot save one. Against real
daemons in client clock mode; every call passes ``now``."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import msgpack
import pytest

import fenceq
from conftest import Background, Daemon, record_requests, wait_until, waiting_claims

KIB = 1024


class Clock:
    """The ``now`` of a client clock daemon, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- Client.step_save ------------------------------------------------------------

def test_step_save_sends_the_op_in_the_vectors_order(client: fenceq.Client):
    """The request is {id, owner, fence, step, value, now}, packed as the
    shared vector's bytes (protocol/vectors/steps.json, "A saves the charge");
    nil is sent as a value (it is one), bytes-likes as bin."""
    sent = record_requests(client)
    assert client.enqueue("o", queue="orders", now=1.0)
    assert client.claim_next("orders", "A", 30, now=2.0)["fence"] == 1
    assert client.step_save("o", "A", 1, "charge", "ch_1", now=3.0) is True
    assert client.step_save("o", "A", 1, "email", None, now=3.0) is True
    assert client.step_save("o", "A", 1, "blob", bytearray(b"\x00\x01"), now=3.0) is True
    op, fields, _ = sent[2]
    assert op == "step_save" and list(fields) == ["id", "owner", "fence", "step", "value", "now"]
    assert msgpack.packb({"op": op, **fields}, use_bin_type=True) == msgpack.packb(
        {"op": "step_save", "id": "o", "owner": "A", "fence": 1, "step": "charge", "value": "ch_1",
         "now": 3.0}, use_bin_type=True)
    assert "value" in sent[3][1] and sent[3][1]["value"] is None
    assert type(sent[4][1]["value"]) is bytes
    assert fenceq.MAX_STEP_BYTES == 256 and fenceq.MAX_STEPS == 64
    assert fenceq.MAX_STEPS_BYTES == 256 * KIB


def test_a_saved_step_is_never_overwritten(client: fenceq.Client):
    """C3.22: the second save of a name answers False, even by the lease that
    saved it and with another value; the first value stays."""
    assert client.enqueue("o", queue="q", now=1.0)
    assert client.claim_next("q", "A", 30, now=1.0)["fence"] == 1
    assert client.step_save("o", "A", 1, "charge", "ch_1", now=2.0) is True
    assert client.step_save("o", "A", 1, "charge", "ch_2", now=2.0) is False
    assert client.step_save("o", "A", 1, "charge", None, now=2.0) is False
    assert client.job("o", now=2.0)["steps"] == {"charge": "ch_1"}
    # Nor by the next attempt.
    assert client.fail("o", "A", 1, "boom", retry_in=0, now=3.0)
    job = client.claim_next("q", "B", 30, now=3.0)
    assert job["fence"] == 2 and job["steps"] == {"charge": "ch_1"}
    assert client.step_save("o", "B", 2, "charge", "ch_3", now=4.0) is False
    assert client.job("o", now=4.0)["steps"] == {"charge": "ch_1"}


def test_values_round_trip_through_every_claim_and_job(client: fenceq.Client):
    """bin, str and nil come back as saved (bytes, str, None) from claim_next
    (one, with max), complete_and_claim_next's next, complete_many's next,
    job and await_job; a job without steps has no "steps" key anywhere."""
    saved = {"bin": b"\x00\xffcharge", "str": "ch_1 \u00e9", "nil": None, "empty": ""}
    assert client.enqueue("s", queue="q", now=1.0)
    assert client.enqueue("plain", queue="q", now=1.0)
    first = client.claim_next("q", "A", 30, now=2.0)
    assert first["id"] == "s" and "steps" not in first
    for name, value in saved.items():
        assert client.step_save("s", "A", 1, name, value, now=2.0) is True
    row = client.job("s", now=2.0)
    assert row["steps"] == saved and type(row["steps"]["bin"]) is bytes
    assert "steps" not in client.job("plain", now=2.0)

    def back(job: Dict[str, Any]) -> None:
        assert job["id"] == "s" and job["steps"] == saved
        assert type(job["steps"]["bin"]) is bytes and type(job["steps"]["str"]) is str

    # claim_next, one job.
    assert client.release("s", "A", 1)
    back(client.claim_next("q", "A", 30, now=3.0))
    # claim_next with max: s with its steps, plain without.
    assert client.release("s", "A", 2)
    jobs = client.claim_next("q", "A", 30, max=5, now=4.0)
    assert [j["id"] for j in jobs] == ["s", "plain"]
    back(jobs[0])
    assert "steps" not in jobs[1]
    # complete_and_claim_next's next.
    assert client.release("s", "A", 3)
    reply = client.complete_and_claim_next("plain", "A", 1, "ok", "q", 30, now=5.0)
    assert reply["completed"] is True
    back(reply["next"])
    # complete_many's next.
    assert client.enqueue("other", queue="o2", now=6.0)
    other = client.claim_next("o2", "A", 30, now=6.0)
    assert client.release("s", "A", 4)
    done = client.complete_many([("other", "A", other["fence"], "ok")], ("q", 30, 2), now=7.0)
    assert done.completed == [True] and len(done.next) == 1
    back(done.next[0])
    # The finished job keeps them: job and await_job.
    assert client.complete("s", "A", 5, "done", now=8.0)
    assert client.job("s", now=9.0)["steps"] == saved
    record = client.await_job("s", 0, now=9.0)
    assert record["state"] == "done" and record["steps"] == saved
    assert "steps" not in client.await_job("plain", 0, now=9.0)


def test_a_parked_claim_carries_the_steps(daemon: Daemon, client: fenceq.Client):
    """A claim_next waiting for a job (a parked claim) is answered with the
    job's steps when a release makes it claimable."""
    assert client.enqueue("s", queue="q", now=1.0)
    assert client.claim_next("q", "A", 30, now=1.0)["fence"] == 1
    assert client.step_save("s", "A", 1, "charge", b"ch", now=1.0)

    def parked() -> Optional[Dict[str, Any]]:
        with daemon.client() as c:
            return c.claim_next("q", "B", 30, wait=5, now=2.0)

    claim = Background(parked)
    assert wait_until(lambda: waiting_claims(daemon) == 1, 5)
    assert client.release("s", "A", 1)
    job = claim.result()
    assert (job["id"], job["fence"], job["steps"]) == ("s", 2, {"charge": b"ch"})


def test_a_stale_lease_saves_nothing(client: fenceq.Client):
    """C3.22 has complete's guard (C3.5): another owner, another fence, an
    expired, released or finished lease and a missing job answer False, and
    nothing is saved."""
    assert client.enqueue("s", queue="q", now=1.0)
    assert client.enqueue("t", queue="q2", now=1.0)
    assert client.claim_next("q", "A", 10, now=1.0)["fence"] == 1
    assert client.step_save("s", "B", 1, "x", "1", now=2.0) is False      # not the owner
    assert client.step_save("s", "A", 2, "x", "1", now=2.0) is False      # not the fence
    assert client.step_save("s", "A", 1, "x", "1", now=11.0) is False     # expired (until 11)
    assert "steps" not in client.job("s", now=11.0)
    assert client.claim_next("q", "B", 10, now=12.0)["fence"] == 2          # B took it over
    assert client.step_save("s", "A", 1, "x", "A's", now=12.0) is False   # A, late
    assert client.step_save("s", "B", 2, "x", "B's", now=12.0) is True
    assert client.release("s", "B", 2)
    assert client.step_save("s", "B", 2, "y", "1", now=13.0) is False     # released
    assert client.claim_next("q2", "C", 10, now=13.0)["fence"] == 1
    assert client.complete("t", "C", 1, "ok", now=13.0)
    assert client.step_save("t", "C", 1, "y", "1", now=14.0) is False     # done
    assert client.step_save("missing", "C", 1, "y", "1", now=14.0) is False
    assert client.job("s", now=14.0)["steps"] == {"x": "B's"}
    assert "steps" not in client.job("t", now=14.0)


def test_step_save_bad_input(client: fenceq.Client):
    """An empty step name and one of 257 bytes are InvalidArgument (256 is
    fine), a name that is not a str and a value that is not a payload
    BadRequest, a missing value BadRequest (sent raw: the method always sends
    one), a missing now under the client clock InvalidArgument; a value over
    256 KiB is refused before anything is sent. Nothing is saved."""
    assert client.enqueue("s", queue="q", now=1.0)
    assert client.claim_next("q", "A", 30, now=1.0)["fence"] == 1
    for name in ("", "s" * 257, "\u00e9" * 129):                   # 258 bytes of UTF-8
        with pytest.raises(fenceq.InvalidArgument, match="step"):
            client.step_save("s", "A", 1, name, "x", now=2.0)
    with pytest.raises(fenceq.BadRequest, match="step"):
        client.step_save("s", "A", 1, 7, "x", now=2.0)  # type: ignore[arg-type]
    for value in ({"a": 1}, 5, [b"x"], True):
        with pytest.raises(fenceq.BadRequest, match="value"):
            client.step_save("s", "A", 1, "v", value, now=2.0)  # type: ignore[arg-type]
    with pytest.raises(fenceq.BadRequest, match="value"):
        client._call("step_save", {"id": "s", "owner": "A", "fence": 1, "step": "v", "now": 2.0})
    with pytest.raises(fenceq.InvalidArgument, match="now"):
        client.step_save("s", "A", 1, "v", "x")                   # client clock: now is required
    sent = record_requests(client)
    with pytest.raises(fenceq.InvalidArgument, match="value"):
        client.step_save("s", "A", 1, "v", b"x" * (256 * KIB + 1), now=2.0)
    assert sent == []                                              # refused here
    assert "steps" not in client.job("s", now=2.0)
    assert client.step_save("s", "A", 1, "\u00e9" * 128, "256 bytes", now=2.0) is True
    assert client.job("s", now=2.0)["steps"] == {"\u00e9" * 128: "256 bytes"}


def test_step_save_bounds_per_job(client: fenceq.Client):
    """A job saves at most 64 steps, their values 256 KiB in all; past either
    the save is InvalidArgument and nothing changes (a stale lease or a
    saved name still answers False)."""
    assert client.enqueue("many", queue="q", now=1.0)
    assert client.enqueue("big", queue="q", now=1.0)
    assert client.claim_next("q", "A", 60, max=2, now=1.0)
    for n in range(fenceq.MAX_STEPS):
        assert client.step_save("many", "A", 1, f"s{n}", None, now=2.0) is True
    with pytest.raises(fenceq.InvalidArgument, match="64"):
        client.step_save("many", "A", 1, "one more", None, now=2.0)
    assert client.step_save("many", "A", 1, "s0", None, now=2.0) is False
    assert len(client.job("many", now=2.0)["steps"]) == fenceq.MAX_STEPS

    assert client.step_save("big", "A", 1, "a", b"x" * (128 * KIB), now=2.0) is True
    assert client.step_save("big", "A", 1, "b", "y" * (128 * KIB - 1), now=2.0) is True
    with pytest.raises(fenceq.InvalidArgument):
        client.step_save("big", "A", 1, "c", b"zz", now=2.0)
    assert client.step_save("big", "A", 1, "c", b"z", now=2.0) is True     # 256 KiB exactly
    steps = client.job("big", now=2.0)["steps"]
    assert sorted(steps) == ["a", "b", "c"] and sum(len(v) for v in steps.values()) == 256 * KIB


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
    (lambda c: c.claim_next("q", "w", 30), {**CLAIMED, "steps": {"a": 1}}),
    (lambda c: c.claim_next("q", "w", 30), {**CLAIMED, "steps": ["a"]}),
    (lambda c: c.claim_next("q", "w", 30, max=2), [{**CLAIMED, "steps": {"a": {"x": 1}}}]),
    (lambda c: c.job("c"), {"id": "c", "state": "ready", "steps": None}),
    (lambda c: c.job("c"), {"id": "c", "state": "ready", "steps": {b"a": "x"}}),
])
def test_steps_that_are_not_a_map_of_payloads_are_bad_replies(fake_daemon, call, result):
    """A claimed job or a record whose steps are not a map of str to
    payloads is the daemon's fault: BadReply, not a job."""
    with pytest.raises(fenceq.BadReply):
        _answer_with(fake_daemon, call, result)


# -- Job.step in a QueueWorker ------------------------------------------------

@pytest.mark.parametrize("prefetch", [1, 3])
def test_a_retried_job_resumes_after_its_saved_steps(daemon: Daemon, prefetch: int):
    """The story: the handler charges, then fails sending the email. The retry
    finds the charge in its claim and skips it (charge's function ran once
    across both attempts), sends the email and completes. Both ways of
    claiming: claim_next (prefetch 1) and claim_next with max (prefetch 3)."""
    clock = Clock(10.0)
    calls: List[str] = []
    seen: List[Dict[str, Any]] = []

    def charge() -> str:
        calls.append("charge")
        return "ch_1Nq"

    def email() -> None:
        calls.append("email")
        if calls.count("email") == 1:
            raise ConnectionError("smtp down")
        return None

    def handler(job: fenceq.Job) -> str:
        seen.append(dict(job.steps))
        receipt = job.step("charge", charge)
        job.step("email", email)
        return f"charged {receipt}"

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "orders", ttl=60, wait=0.1,
                                                  retry_in=0, clock=clock, prefetch=prefetch) as w:
        assert c.enqueue("order-7", queue="orders", now=clock.now)
        first = w.run_once(handler)
        assert first.status == "failed" and "smtp down" in first.error
        assert first.job.steps == {"charge": "ch_1Nq"}
        assert c.job("order-7", now=clock.now)["steps"] == {"charge": "ch_1Nq"}
        second = w.run_once(handler)
        assert second.status == "completed" and second.result == "charged ch_1Nq"
        assert second.job.attempts == 2
        assert second.job.steps == {"charge": "ch_1Nq", "email": None}
    assert calls == ["charge", "email", "email"]          # charge ran once, email twice
    assert seen == [{}, {"charge": "ch_1Nq"}]             # what each claim handed out
    with daemon.client() as c:
        row = c.job("order-7", now=clock.now)
    assert (row["state"], row["result"]) == ("done", "charged ch_1Nq")
    assert row["steps"] == {"charge": "ch_1Nq", "email": None}


def test_a_stalled_worker_cannot_save_a_step(daemon: Daemon):
    """Worker A claims and saves nothing; it stalls past its lease, and worker
    B claims the job and saves "charge". A wakes while B holds the lease: its
    step("charge") is not saved (the daemon answers False: LeaseLost), so B's
    value stays, and A's job ends "lost" with nothing stored. B goes on and
    completes with its own charge."""
    clock = Clock(1.0)
    calls: List[str] = []
    outcomes: Dict[str, Any] = {}

    def charge(who: str):
        def fn() -> str:
            calls.append(who)
            return f"ch_{who}"
        return fn

    with daemon.client() as c, \
            fenceq.QueueWorker(daemon.endpoint, "orders", owner="A", ttl=10, renew_every=1000,
                               wait=0.1, clock=clock) as a, \
            fenceq.QueueWorker(daemon.endpoint, "orders", owner="B", ttl=30, renew_every=1000,
                               wait=0.1, clock=clock) as b:

        def b_fn(job: fenceq.Job) -> str:
            assert job.steps == {}                       # A saved nothing
            value = job.step("charge", charge("B"))
            # A wakes now, while B holds the lease: its step is refused.
            with pytest.raises(fenceq.LeaseLost) as lost:
                outcomes["a_job"].step("charge", charge("A"))
            assert lost.value.code == "lease_lost"
            assert outcomes["a_job"].steps == {}        # nothing recorded on A's side
            return value

        def a_fn(job: fenceq.Job) -> str:
            outcomes["a_job"] = job
            clock.now = 20.0                            # A stalls past its lease (until 11)
            outcomes["b"] = b.run_once(b_fn)            # meanwhile B claims the job
            job.step("charge", charge("A"))             # A wakes: refused again (B completed)
            calls.append("A went on")                   # never reached
            return "A done"

        assert c.enqueue("order-8", queue="orders", now=clock.now)
        a_outcome = a.run_once(a_fn)
        assert a_outcome.status == "lost" and isinstance(a_outcome.exception, fenceq.LeaseLost)
        assert outcomes["b"].status == "completed" and outcomes["b"].result == "ch_B"
        assert outcomes["b"].job.fence == 2
        row = c.job("order-8", now=clock.now)
        assert (row["state"], row["result"], row["fence"]) == ("done", "ch_B", 2)
        assert row["steps"] == {"charge": "ch_B"}
    # A's function ran (it could not know), but its value was never saved.
    assert calls == ["B", "A", "A"]


def test_job_step_checks_before_it_runs_or_sends(daemon: Daemon):
    """Job.step: a saved step answers its value without calling fn; a name
    that is not a str (TypeError) or not 1..256 bytes (InvalidArgument) is
    refused before fn runs; a value that is not bytes, str or None is a
    TypeError before anything is sent (and fails the job); a bytearray is
    saved and answered as bytes; a lease known lost runs nothing."""
    clock = Clock(1.0)
    ran: List[str] = []

    def never() -> str:
        ran.append("never")
        return "x"

    def handler(job: fenceq.Job) -> Optional[str]:
        sent = record_requests(w._client)
        with pytest.raises(TypeError, match="name"):
            job.step(b"charge", never)  # type: ignore[arg-type]
        for name in ("", "n" * 257):
            with pytest.raises(fenceq.InvalidArgument, match="name"):
                job.step(name, never)
        assert ran == [] and sent == []
        assert job.step("blob", lambda: bytearray(b"\x01\x02")) == b"\x01\x02"
        assert job.steps == {"blob": b"\x01\x02"} and type(job.steps["blob"]) is bytes
        assert job.step("blob", never) == b"\x01\x02"           # saved: fn not called
        assert [op for op, _, _ in sent] == ["step_save"]
        with pytest.raises(TypeError, match="bytes, str or None"):
            job.step("count", lambda: 42)                       # type: ignore[arg-type, return-value]
        assert [op for op, _, _ in sent] == ["step_save"] and "count" not in job.steps
        job.lost.set()                                          # as a refused renewal does
        with pytest.raises(fenceq.LeaseLost):
            job.step("after loss", never)
        job.lost.clear()
        assert ran == []
        return job.step("bad", lambda: {"a": 1})                # type: ignore[arg-type, return-value]

    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "q", ttl=30, wait=0.1,
                                                  clock=clock) as w:
        assert c.enqueue("j", queue="q", now=clock.now)
        outcome = w.run_once(handler)
        assert outcome.status == "failed" and "TypeError" in outcome.error
        assert c.job("j", now=clock.now)["steps"] == {"blob": b"\x01\x02"}

    # A Job made by hand has no worker to save with: only saved steps answer.
    job = fenceq.Job(id="by-hand", owner="o", fence=1, ttl=1, steps={"a": "1"})
    assert job.step("a", never) == "1"
    with pytest.raises(fenceq.ClientMisuse):
        job.step("b", never)
    assert ran == []
    assert fenceq.Job(id="x", owner="o", fence=1, ttl=1).steps == {}


def test_held_jobs_carry_their_steps(daemon: Daemon):
    """The job a completion claims ahead (complete_and_claim_next's next,
    prefetch 1) is a Job with its steps, and the next run_once skips them."""
    clock = Clock(1.0)
    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "q", ttl=30, wait=0.1,
                                                  clock=clock) as w:
        assert c.enqueue("a", queue="q", priority=1, now=1.0)
        assert c.enqueue("b", queue="q", now=1.0)
        assert c.claim("b", "X", 30, now=1.0) == 1
        assert c.step_save("b", "X", 1, "first", "saved by X", now=1.0)
        assert c.release("b", "X", 1)

        def handler(job: fenceq.Job) -> str:
            return job.step("first", lambda: f"{job.id} ran it")

        outcome = w.run_once(handler, take_next=True)
        assert (outcome.job.id, outcome.status, outcome.result) == ("a", "completed", "a ran it")
        assert w.held is not None and w.held.id == "b"
        assert w.held.steps == {"first": "saved by X"}
        outcome = w.run_once(handler)
        assert (outcome.job.id, outcome.status, outcome.result) == ("b", "completed", "saved by X")


def test_retry_of_a_dead_job_keeps_its_steps(client: fenceq.Client):
    """A job that died after saving steps, retried, is claimed with them."""
    assert client.enqueue("d", queue="q", max_attempts=1, now=1.0)
    assert client.claim_next("q", "A", 30, now=1.0)["fence"] == 1
    assert client.step_save("d", "A", 1, "charge", "ch_1", now=1.0)
    assert client.fail("d", "A", 1, "boom", now=2.0)
    assert client.job("d", now=2.0)["state"] == "dead"
    assert client.retry("d")
    job = client.claim_next("q", "B", 30, now=3.0)
    assert (job["id"], job["fence"], job["steps"]) == ("d", 2, {"charge": "ch_1"})
