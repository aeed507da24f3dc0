"""fenceq.QueueWorker: claim_next with a long-poll, renew in the background,
complete with the function's result, fail with the exception's text. Against
real daemons."""

from __future__ import annotations

import itertools
import time

import pytest

import fenceq
from fenceq.worker import error_text
from conftest import Background, Daemon, wait_until, waiting_claims


def jobs(client: fenceq.Client, **filters):
    return {j["id"]: j for j in client.list(**filters)}


def test_queue_worker_completes_jobs_with_their_payloads(server_daemon: Daemon):
    """Each job runs once, gets its payload (bytes as bytes, str as str) and is
    completed with fn's return value under its fence; run() answers the count."""
    seen = []
    outcomes = []

    def fn(job: fenceq.Job) -> str:
        seen.append((job.id, job.payload, job.attempts, job.fence, job.queue))
        return f"{job.id}: {job.payload!r}"

    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "jobs", ttl=10,
                                                         wait=0.2) as w:
        assert c.enqueue("b", queue="jobs", payload=b"\x01\x02")
        assert c.enqueue("a", queue="jobs", payload="text", priority=1)
        assert c.enqueue("c", queue="jobs")
        assert c.enqueue("elsewhere", queue="other")
        assert w.run(fn, idle_exit=0.3, on_outcome=outcomes.append) == 3
        assert seen == [("a", "text", 1, 1, "jobs"), ("b", b"\x01\x02", 1, 1, "jobs"), ("c", None, 1, 1, "jobs")]
        assert [(o.job.id, o.status, o.result) for o in outcomes] == [
            ("a", "completed", "a: 'text'"), ("b", "completed", "b: b'\\x01\\x02'"), ("c", "completed", "c: None")]
        for id in "abc":
            s = c.state(id)
            assert s["done"] is True and s["owner"] == w.owner and s["result"].startswith(id)
        assert c.state("elsewhere")["fence"] == 0
        assert w.run_once(fn, wait=0) is None                  # drained


def test_queue_worker_renews_while_the_job_runs(server_daemon: Daemon):
    """C3.4: a job running for three ttls keeps its lease (check says so, nobody
    else can claim it) and completes."""
    checks = []

    def fn(job: fenceq.Job) -> str:
        with server_daemon.client() as other:
            for _ in range(5):                                  # 1.25 s: 2.5 ttls
                time.sleep(0.25)
                checks.append(other.check(job.id, job.owner, job.fence))
                assert other.claim_next("slow", "intruder", 5) is None
                job.check()
        return "finished"

    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "slow", ttl=0.5) as w:
        assert c.enqueue("long", queue="slow")
        outcome = w.run_once(fn)
        assert outcome.status == fenceq.worker.COMPLETED and outcome.result == "finished"
        assert checks == [True] * 5 and outcome.job.renew_error is None
        assert c.state("long")["result"] == "finished"


def test_queue_worker_fails_with_the_exception_text_then_the_job_is_retried(server_daemon: Daemon):
    """An exception in fn is reported with fail (error kept, lease ended, fence kept)
    and does not propagate; the job comes back after retry_in with a larger fence."""
    attempts = []

    def fn(job: fenceq.Job) -> str:
        attempts.append((job.attempts, job.fence))
        if job.attempts == 1:
            raise ValueError(f"cannot parse {job.payload!r}")
        return "second time lucky"

    with server_daemon.client() as c, \
            fenceq.QueueWorker(server_daemon.endpoint, "flaky", ttl=10, retry_in=0.3) as w:
        assert c.enqueue("f", queue="flaky", payload="<xml>")
        outcome = w.run_once(fn)
        assert outcome.status == "failed" and isinstance(outcome.exception, ValueError)
        assert outcome.error == "ValueError: cannot parse '<xml>'"
        job = jobs(c)["f"]
        assert (job["state"], job["error"], job["owner"], job["fence"]) == \
            ("delayed", "ValueError: cannot parse '<xml>'", None, 1)
        outcome = w.run_once(fn, wait=3)                        # parked until the backoff ends
        assert outcome.status == "completed" and outcome.result == "second time lucky"
        assert attempts == [(1, 1), (2, 2)]


def test_queue_worker_failures_use_up_max_attempts(server_daemon: Daemon):
    with server_daemon.client() as c, \
            fenceq.QueueWorker(server_daemon.endpoint, "doomed", ttl=10, retry_in=0, wait=0.2) as w:
        assert c.enqueue("d", queue="doomed", max_attempts=2)

        def fn(job: fenceq.Job) -> str:
            raise RuntimeError(f"attempt {job.attempts}")

        assert w.run(fn, idle_exit=0.3) == 2
        job = jobs(c)["d"]
        assert (job["state"], job["error"], job["attempts"]) == ("dead", "RuntimeError: attempt 2", 2)
        assert c.retry("d") is True
        outcome = w.run_once(lambda job: "revived")
        assert (outcome.status, outcome.job.fence, outcome.job.attempts) == ("completed", 3, 1)


def test_queue_worker_result_must_be_a_str(server_daemon: Daemon):
    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "t", ttl=10, retry_in=0) as w:
        assert c.enqueue("typed", queue="t")
        outcome = w.run_once(lambda job: {"not": "a str"})
        assert outcome.status == "failed" and isinstance(outcome.exception, TypeError)
        assert jobs(c)["typed"]["error"] == "TypeError: a job's result must be a str or None, got dict"


def test_queue_worker_lease_lost_stores_nothing(server_daemon: Daemon):
    """The lease is taken away while fn runs: job.check() raises LeaseLost, the
    outcome is 'lost', and neither a result nor an error is stored."""
    with server_daemon.client() as c, \
            fenceq.QueueWorker(server_daemon.endpoint, "q", ttl=5, renew_every=0.05) as w:
        assert c.enqueue("taken", queue="q")

        def fn(job: fenceq.Job) -> str:
            with server_daemon.client() as operator:
                assert operator.release(job.id, job.owner, job.fence)
                assert operator.claim(job.id, "other", 30) == job.fence + 1
            assert job.lost.wait(5)
            job.check()
            return "unreachable"

        outcome = w.run_once(fn)
        assert outcome.status == "lost" and isinstance(outcome.exception, fenceq.LeaseLost)
        s = c.state("taken")
        assert s["owner"] == "other" and s["done"] is False and jobs(c)["taken"]["error"] is None

        # An exception after the lease was lost is not reported with fail either.
        assert c.enqueue("taken-2", queue="q")

        def fn2(job: fenceq.Job) -> str:
            with server_daemon.client() as operator:
                operator.release(job.id, job.owner, job.fence)
                operator.claim(job.id, "other", 30)
            assert job.lost.wait(5)
            raise OSError("too late")

        outcome = w.run_once(fn2)
        assert outcome.status == "lost" and outcome.error == "OSError: too late"
        assert jobs(c)["taken-2"]["error"] is None


def test_queue_worker_releases_and_propagates_on_keyboard_interrupt(server_daemon: Daemon):
    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "q", ttl=30) as w:
        assert c.enqueue("ki", queue="q")

        def fn(job: fenceq.Job) -> str:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            w.run(fn)
        s = c.state("ki")
        assert s["owner"] is None and s["fence"] == 1 and jobs(c)["ki"]["state"] == "ready"


def test_queue_worker_long_polls_for_the_next_job(server_daemon: Daemon):
    def produce():
        assert wait_until(lambda: waiting_claims(server_daemon) == 1, 5, 0.01)
        with server_daemon.client() as producer:
            return producer.enqueue("late", queue="lp", payload="hello")

    with fenceq.QueueWorker(server_daemon.endpoint, "lp", ttl=10, wait=5, timeout=0.5) as w:
        producer = Background(produce)
        outcome = w.run_once(lambda job: job.payload.upper())
        assert producer.result() is True
        assert outcome.status == "completed" and outcome.result == "HELLO"


def test_queue_worker_stop(server_daemon: Daemon):
    """stop() from another thread ends an idle run() within `wait`; from inside a
    job, after that job; a job handed over after stop() is released untouched."""
    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "s", ttl=10, wait=0.3) as w:
        Background(lambda: (time.sleep(0.2), w.stop()))
        start = time.monotonic()
        assert w.run(str) == 0
        assert time.monotonic() - start < 2 and w.stopping

    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "s", ttl=10, wait=0.3) as w:
        for id in ("s1", "s2"):
            assert c.enqueue(id, queue="s")

        def fn(job: fenceq.Job) -> str:
            w.stop()
            return "stopped after me"

        assert w.run(fn) == 1
        assert c.state("s1")["done"] is True and c.state("s2")["fence"] == 0
        assert w.run_once(fn) is None and c.state("s2")["fence"] == 0   # stopped: claims nothing

    called = []
    with server_daemon.client() as c, fenceq.QueueWorker(server_daemon.endpoint, "s3", ttl=10, wait=5) as w:
        def stop_then_enqueue():
            assert wait_until(lambda: waiting_claims(server_daemon) == 1, 5, 0.01)
            w.stop()
            with server_daemon.client() as producer:
                producer.enqueue("arrives", queue="s3")

        helper = Background(stop_then_enqueue)
        assert w.run(called.append) == 0
        helper.result()
        s = c.state("arrives")
        assert called == [] and s["owner"] is None and s["fence"] == 1
        assert c.claim_next("s3", "next", 10)["fence"] == 2


def requests_served(daemon: Daemon) -> int:
    """The daemon's request count, not counting the stats request that asks."""
    with daemon.client() as c:
        return c.stats()["requests"] - 1


def test_queue_worker_run_takes_one_round_trip_a_job(server_daemon: Daemon):
    """run() completes each job with complete_next, which also claims the next one:
    draining 10 jobs costs 1 claim_next + 10 complete_next + the idle long-poll,
    not a claim_next and a complete for each job (~20)."""
    ids = [f"j{i:02d}" for i in range(10)]
    with server_daemon.client() as c:
        for id in ids:
            assert c.enqueue(id, queue="drain", payload=id)
    seen = []
    with fenceq.QueueWorker(server_daemon.endpoint, "drain", ttl=30, wait=0.2) as w:
        sent = record_ops(w)
        before = requests_served(server_daemon)
        assert w.run(lambda job: seen.append(job.id) or f"did {job.payload}", idle_exit=0.3) == 10
        used = requests_served(server_daemon) - before - 1          # - the first requests_served
        assert w.held is None
    assert seen == ids
    assert sent[:2] == ["claim_next", "complete_next"] and sent.count("complete_next") == 10
    assert "complete" not in sent and sent.count("claim_next") <= 3
    assert used == len(sent) and used <= 10 + 3, sent
    with server_daemon.client() as c:
        assert all(c.state(id)["result"] == f"did {id}" for id in ids)
        assert c.stats()["queues"]["drain"]["done"] == 10 and c.stats()["queues"]["drain"]["leased"] == 0


def test_queue_worker_run_once_alone_claims_nothing_ahead(server_daemon: Daemon):
    """The contrast: run_once (take_next=False, the default) is claim_next +
    complete, two round trips a job, and leaves the next job alone."""
    with server_daemon.client() as c:
        for id in ("a", "b", "c"):
            assert c.enqueue(id, queue="one")
    with fenceq.QueueWorker(server_daemon.endpoint, "one", ttl=30) as w:
        sent = record_ops(w)
        before = requests_served(server_daemon)
        assert w.run_once(lambda job: "x").status == "completed"
        assert w.run_once(lambda job: "y").status == "completed"
        assert requests_served(server_daemon) - before - 1 == 4
        assert sent == ["claim_next", "complete", "claim_next", "complete"] and w.held is None
        with server_daemon.client() as c:
            assert c.state("c")["fence"] == 0

        # take_next=True: the next job is held (leased to the worker) for the next run_once.
        with server_daemon.client() as c:
            assert c.enqueue("d", queue="one")
        outcome = w.run_once(lambda job: "z", take_next=True)
        assert outcome.job.id == "c" and outcome.status == "completed"
        assert w.held is not None and w.held.id == "d" and w.held.fence == 1
        with server_daemon.client() as c:
            assert c.check("d", w.owner, 1) is True
        assert w.run_once(lambda job: f"ran {job.id}").job.id == "d"   # no claim_next for it
        assert sent[4:] == ["claim_next", "complete_next", "complete"] and w.held is None


def test_queue_worker_max_jobs_claims_nothing_beyond(server_daemon: Daemon):
    """The last of max_jobs is completed with a plain complete: the job after it is
    not claimed (a claim would use up one of its attempts)."""
    with server_daemon.client() as c:
        for id in ("m1", "m2", "m3"):
            assert c.enqueue(id, queue="mx", max_attempts=1)
    with fenceq.QueueWorker(server_daemon.endpoint, "mx", ttl=30) as w:
        sent = record_ops(w)
        assert w.run(lambda job: "ok", max_jobs=2) == 2
        assert sent == ["claim_next", "complete_next", "complete"] and w.held is None
    with server_daemon.client() as c:
        row = jobs(c)["m3"]
        assert (row["state"], row["fence"], row["attempts"]) == ("ready", 0, 0)


def test_queue_worker_refused_completion_still_runs_the_next_job(server_daemon: Daemon):
    """A completion refused as stale (the lease was taken over without the renewer
    noticing yet) is 'lost', and the next job that came with it is run."""
    with server_daemon.client() as c:
        assert c.enqueue("r1", queue="rq", priority=1)
        assert c.enqueue("r2", queue="rq")

    def fn(job: fenceq.Job) -> str:
        if job.id == "r1":
            with server_daemon.client() as operator:
                assert operator.release(job.id, job.owner, job.fence)
                assert operator.claim(job.id, "other", 30) == job.fence + 1
        return f"result of {job.id}"

    outcomes = []
    with fenceq.QueueWorker(server_daemon.endpoint, "rq", ttl=30, wait=0.2) as w:
        sent = record_ops(w)
        assert w.run(fn, idle_exit=0.3, on_outcome=outcomes.append) == 2
    assert [(o.job.id, o.status) for o in outcomes] == [("r1", "lost"), ("r2", "completed")]
    assert sent[:2] == ["claim_next", "complete_next"] and sent[2] == "complete_next"
    with server_daemon.client() as c:
        assert c.state("r1")["owner"] == "other" and c.state("r1")["done"] is False
        assert c.state("r2")["result"] == "result of r2"


def test_queue_worker_stop_during_the_completion_releases_the_next_job(server_daemon: Daemon):
    """stop() arriving while complete_next is on its way: the job it claimed is
    released untouched (never run), and run() returns."""
    with server_daemon.client() as c:
        for id in ("x1", "x2", "x3"):
            assert c.enqueue(id, queue="sx")
    ran = []
    with fenceq.QueueWorker(server_daemon.endpoint, "sx", ttl=30, wait=0.2) as w:
        original = w._client.complete_and_claim_next

        def complete_then_stop(*args, **kwargs):
            reply = original(*args, **kwargs)
            w.stop()                                               # as if from a signal handler
            return reply

        w._client.complete_and_claim_next = complete_then_stop
        assert w.run(lambda job: ran.append(job.id) or "ok") == 1
        assert w.held is None
    with server_daemon.client() as c:
        assert ran == ["x1"] and c.state("x1")["done"] is True
        rows = jobs(c)
        assert (rows["x2"]["state"], rows["x2"]["owner"], rows["x2"]["fence"]) == ("ready", None, 1)
        assert rows["x3"]["fence"] == 0
        assert c.claim_next("sx", "next", 10)["id"] == "x2"


def test_queue_worker_held_job_is_released_by_stop_and_by_close(server_daemon: Daemon):
    """A job claimed ahead and not run yet is released untouched by run_once after
    stop(), and by close()."""
    with server_daemon.client() as c:
        for id in ("h1", "h2", "h3", "h4"):
            assert c.enqueue(id, queue="hq")
    with fenceq.QueueWorker(server_daemon.endpoint, "hq", ttl=30) as w:
        assert w.run_once(lambda job: "ok", take_next=True).job.id == "h1"
        assert w.held.id == "h2"
        w.stop()
        assert w.run_once(lambda job: "never") is None and w.held is None
    with server_daemon.client() as c:
        assert (c.state("h2")["owner"], c.state("h2")["fence"], c.state("h2")["done"]) == (None, 1, False)

    w = fenceq.QueueWorker(server_daemon.endpoint, "hq", ttl=30)
    assert w.run_once(lambda job: "ok", take_next=True).job.id == "h2"
    assert w.held.id == "h3"
    w.close()
    w.close()                                                      # idempotent
    with server_daemon.client() as c:
        assert (c.state("h3")["owner"], c.state("h3")["fence"]) == (None, 1)
        assert c.state("h4")["fence"] == 0


def record_ops(worker: fenceq.QueueWorker) -> list:
    """The ops the worker's own client sends (renewals use clients of their own)."""
    sent = []
    client = worker._client
    original = client._round_trip

    def spy(socket, op, fields, timeout):
        sent.append(op)
        return original(socket, op, fields, timeout)

    client._round_trip = spy
    return sent


def test_queue_worker_with_client_clock(daemon: Daemon):
    """C2.2: every request carries the clock's now (claim_next, renew, fail, complete)."""
    ticks = itertools.count(1000, 0.25)
    # renew_every 0.25: a renewal's own timeout is capped at it (worker.py), and at 0.05 a
    # round trip slowed past 50 ms by make test's parallel suites set renew_error (a CI run).
    with daemon.client() as c, fenceq.QueueWorker(daemon.endpoint, "sim", ttl=1, renew_every=0.25,
                                                 wait=0.2, retry_in=5, clock=lambda: next(ticks)) as w:
        assert c.enqueue("sim-1", queue="sim", now=1000)

        def fn(job: fenceq.Job) -> str:
            if job.attempts == 1:
                raise ValueError("first try")
            time.sleep(0.6)                                     # two renewals at +0.25 each
            assert not job.lost.is_set() and job.renew_error is None
            return "ok"

        assert w.run_once(fn).status == "failed"
        failed = jobs(c, now=1000)["sim-1"]
        assert failed["state"] == "delayed" and failed["not_before"] > 1005
        assert w.run_once(fn, wait=0) is None                   # the clock has not reached it yet
        for _ in range(20):                                     # move the client clock past the backoff
            next(ticks)
        assert w.run_once(fn, wait=0).status == "completed"
        assert c.state("sim-1")["done"] is True


def test_queue_worker_arguments():
    for kwargs in ({"ttl": 0}, {"renew_every": 0}, {"wait": 0}, {"wait": 3601}, {"retry_in": -1}):
        with pytest.raises(ValueError):
            fenceq.QueueWorker("ipc:///tmp/unused.sock", "q", **kwargs)


def test_queue_worker_is_for_one_thread(server_daemon: Daemon):
    w = fenceq.QueueWorker(server_daemon.endpoint, "q", ttl=5)
    with pytest.raises(fenceq.ClientMisuse):
        Background(lambda: w.run_once(str, wait=0)).result()
    w.close()


def test_error_text():
    assert error_text(ValueError("bad input")) == "ValueError: bad input"
    assert error_text(KeyError("k")) == "KeyError: 'k'"
    long = error_text(RuntimeError("\u00e9" * fenceq.MAX_ERROR_BYTES))
    assert len(long.encode()) <= fenceq.MAX_ERROR_BYTES and long.startswith("RuntimeError: \u00e9")
    assert error_text(RuntimeError("\ud800")) == "RuntimeError: ?"
