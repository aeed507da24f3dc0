"""Queue control (issue 18) from the Python client, against the real daemon:
the fenced cancel, and progress on renew and renew_many."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import fenceq
from conftest import Daemon, wait_until


def test_cancel_refuses_the_holders_writes_and_retry_revives_it(client: fenceq.Client):
    assert client.enqueue("j", queue="q")
    job = client.claim_next("q", "w", 100, now=10.0)
    assert job is not None and job["fence"] == 1
    assert client.cancel("j") is True
    assert client.cancel("j") is False  # cancelled already
    assert client.renew("j", "w", 1, 100, now=11.0) is False
    assert client.complete("j", "w", 1, "late", now=11.0) is False
    assert client.fail("j", "w", 1, "late", now=11.0) is False
    assert client.check("j", "w", 1, now=11.0) is False
    state = client.state("j")
    assert state["fence"] == 2 and state["result"] is None and state["done"] is False
    [row] = client.list(state="cancelled")
    assert row["id"] == "j" and row["state"] == "cancelled"
    assert client.stats()["queues"]["q"]["cancelled"] == 1
    assert client.claim_next("q", "v", 10, now=500.0) is None
    assert client.retry("j") is True
    again = client.claim_next("q", "v", 10, now=500.0)
    assert again["fence"] == 3
    assert client.cancel("missing") is False


def test_cancel_bad_input_is_a_coded_error(client: fenceq.Client):
    assert client.enqueue("j")
    with pytest.raises(fenceq.InvalidArgument):
        client.cancel("x" * 1025)
    with pytest.raises(fenceq.BadRequest):
        client.cancel(5)  # type: ignore[arg-type]
    assert client.list(state="cancelled") == []


def test_progress_kept_with_the_lease_shown_by_state_and_list(client: fenceq.Client):
    assert client.enqueue("p")
    fence = client.claim("p", "w", 10, now=1.0)
    assert "progress" not in client.state("p")
    assert client.renew("p", "w", fence, 10, now=2.0, progress="1/3") is True
    assert client.state("p")["progress"] == "1/3"
    assert client.list()[0]["progress"] == "1/3"
    assert client.renew("p", "w", fence + 1, 10, now=3.0, progress="stale") is False
    assert client.state("p")["progress"] == "1/3"
    assert client.renew_many([fenceq.LeaseItem("p", "w", fence, progress="2/3")], 10,
                             now=3.0) == [True]
    assert client.state("p")["progress"] == "2/3"
    assert client.renew_many([{"id": "p", "owner": "w", "fence": fence, "progress": "3/3"}],
                             10, now=4.0) == [True]
    assert client.state("p")["progress"] == "3/3"
    with pytest.raises(fenceq.InvalidArgument):
        client.renew("p", "w", fence, 10, now=5.0, progress="x" * 4097)
    assert client.state("p")["progress"] == "3/3"
    assert client.state("p")["until"] == 14.0


def test_worker_stops_treating_a_cancelled_job_as_its_own_and_logs_it(
        daemon: Daemon, caplog: pytest.LogCaptureFixture):
    """The renewal after a cancel is refused: the lease is lost (lease.check()
    raises), nothing is completed, and the worker says so in its log."""
    caplog.set_level(logging.WARNING, logger="fenceq.worker")
    with daemon.client() as c:
        assert c.enqueue("long")
    started = threading.Event()
    outcome = {}

    def job(lease: fenceq.Lease):
        started.set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lease.check()  # raises LeaseLost once a renewal was refused
            time.sleep(0.02)
        return "should never be stored"

    def run():
        with fenceq.Worker(daemon.endpoint, owner="w", ttl=0.6,
                           clock=lambda: time.time()) as w:
            outcome["r"] = w.run("long", job)

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(5)
    with daemon.client() as c:
        assert c.cancel("long")
    t.join(15)
    assert not t.is_alive()
    assert outcome["r"] is False
    with daemon.client() as c:
        state = c.state("long")
        assert state["result"] is None and state["done"] is False
    assert wait_until(lambda: any("renewal refused (cancelled" in r.getMessage()
                                  for r in caplog.records), 5)
