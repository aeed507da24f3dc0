"""fenceq.Worker: claim, renew in the background, complete with the fence,
release on exception, report a lost lease. Against real daemons."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

import fenceq
from conftest import Daemon, wait_until


def test_worker_renews_while_the_job_runs_then_completes(server_daemon: Daemon):
    """C3.4 + C3.5: a job that runs for several ttls keeps its lease (nobody else can
    claim it meanwhile) and completes with its fence."""
    with server_daemon.client() as other, fenceq.Worker(server_daemon.endpoint, ttl=0.5) as w:
        assert other.enqueue("long")
        seen = {}

        def job(lease: fenceq.Lease) -> str:
            seen["fence"] = lease.fence
            for _ in range(6):                      # 1.5 s: three ttls
                time.sleep(0.25)
                assert other.claim("long", "intruder", 5) is None
                lease.check()
            return "finished"

        assert w.run("long", job) is True
        s = other.state("long")
        assert s["done"] is True and s["result"] == "finished"
        assert s["owner"] == w.owner and s["fence"] == seen["fence"] == 1


def test_worker_claim_refused_does_not_run(server_daemon: Daemon):
    """C3.3: a job that is leased, done or missing is not run; run() answers None."""
    calls = []
    with server_daemon.client() as other, fenceq.Worker(server_daemon.endpoint, ttl=5) as w:
        other.enqueue("taken")
        other.claim("taken", "someone", 30)
        assert w.run("taken", calls.append) is None
        assert w.run("missing", calls.append) is None
    assert calls == []


def test_worker_releases_on_exception_and_keeps_fence(server_daemon: Daemon):
    """C3.6: an exception in the job releases the lease (owner cleared, fence kept) so
    the next claim gets fence + 1 at once; the exception propagates."""
    with server_daemon.client() as other, fenceq.Worker(server_daemon.endpoint, ttl=30) as w:
        other.enqueue("boom")

        def job(lease: fenceq.Lease) -> str:
            raise KeyError("disk on fire")

        with pytest.raises(KeyError):
            w.run("boom", job)
        s = other.state("boom")
        assert s["owner"] is None and s["until"] == 0.0 and s["fence"] == 1 and s["done"] is False
        assert other.claim("boom", "next", 30) == 2


def test_worker_stale_completion_refused_result_kept(server_daemon: Daemon):
    """C3.5, the story through Worker: the worker stalls past its lease (no renewal in
    time), another owner claims and completes, the worker's completion is refused
    and the other owner's result is kept."""
    with server_daemon.client() as other, \
            fenceq.Worker(server_daemon.endpoint, ttl=0.3, renew_every=30) as w:
        other.enqueue("stall")

        def job(lease: fenceq.Lease) -> str:
            time.sleep(0.45)                            # the lease has expired
            fence = other.claim("stall", "B", 30)
            assert fence == lease.fence + 1
            assert other.complete("stall", "B", fence, "B's result")
            return "A's result"

        assert w.run("stall", job) is False
        s = other.state("stall")
        assert s["result"] == "B's result" and s["owner"] == "B" and s["fence"] == 2


def test_worker_reports_lost_lease_to_the_job(server_daemon: Daemon):
    """C3.4: when a renewal answers false (the lease was taken away), the job sees
    lease.lost, lease.check() raises LeaseLost, and nothing is completed."""
    with server_daemon.client() as other, \
            fenceq.Worker(server_daemon.endpoint, ttl=3, renew_every=0.1) as w:
        other.enqueue("lost")
        flags = {}

        def job(lease: fenceq.Lease) -> str:
            # An operator takes the job away: release in the worker's name, claim anew.
            assert other.release("lost", lease.owner, lease.fence)
            assert other.claim("lost", "C", 30) == lease.fence + 1
            flags["lost"] = lease.lost.wait(5)
            with pytest.raises(fenceq.LeaseLost) as e:
                lease.check()
            assert e.value.code == "lease_lost"
            return "should not be stored"

        assert w.run("lost", job) is False
        assert flags["lost"] is True
        s = other.state("lost")
        assert s["owner"] == "C" and s["done"] is False and s["result"] is None


def test_worker_lease_lost_raised_from_job_answers_false(server_daemon: Daemon):
    with server_daemon.client() as other, \
            fenceq.Worker(server_daemon.endpoint, ttl=3, renew_every=0.1) as w:
        other.enqueue("abort")

        def job(lease: fenceq.Lease) -> str:
            other.release("abort", lease.owner, lease.fence)
            assert wait_until(lease.lost.is_set, 5)
            lease.check()
            return "unreachable"

        assert w.run("abort", job) is False


def test_worker_with_client_clock(daemon: Daemon):
    """C2.2: against --clock client the worker passes the caller's now everywhere."""
    ticks = itertools.count(1000, 0.25)
    with daemon.client() as other, \
            fenceq.Worker(daemon.endpoint, ttl=1, renew_every=0.05, clock=lambda: next(ticks)) as w:
        other.enqueue("sim")

        def job(lease: fenceq.Lease) -> None:
            time.sleep(0.3)                             # a few renewals at +0.25 s each
            assert not lease.lost.is_set() and lease.renew_error is None
            return None

        assert w.run("sim", job) is True
        s = other.state("sim")
        assert s["done"] is True and s["result"] is None and s["until"] > 1001


def test_worker_result_must_be_str(server_daemon: Daemon):
    with server_daemon.client() as other, fenceq.Worker(server_daemon.endpoint, ttl=30) as w:
        other.enqueue("typed")
        with pytest.raises(TypeError):
            w.run("typed", lambda lease: {"not": "a str"})
        assert other.state("typed")["owner"] is None


def test_worker_arguments():
    with pytest.raises(ValueError):
        fenceq.Worker("ipc:///tmp/unused.sock", ttl=0)
    with pytest.raises(ValueError):
        fenceq.Worker("ipc:///tmp/unused.sock", ttl=1, renew_every=-1)


def test_worker_is_for_one_thread(server_daemon: Daemon):
    w = fenceq.Worker(server_daemon.endpoint, ttl=5)
    caught = []
    t = threading.Thread(target=lambda: caught.append(pytest.raises(fenceq.ClientMisuse, w.run, "x", str)))
    t.start()
    t.join(10)
    assert caught
    w.close()
