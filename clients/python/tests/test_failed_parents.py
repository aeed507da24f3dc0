"""A parent purged after it died or was cancelled still counts as failed
(issue 56, row 9; docs/contract.md C3.13), against a real server-clock
fenceqd over its socket, on SQLite and on a fresh PostgreSQL schema (the
cluster of conftest's pg_uri fixture: its own when none is given).

Before: cancel P, retry C, purge P left C blocked for good; purge P, then
retry C ran C though P never finished. Now the purge cancels C again, the
retry of C is refused (``False``, C stays cancelled), and a child with
``after_failure: "run"`` still runs. On PostgreSQL a purge leaves the
children it settles to the daemon's steps (each sidecar looks every
second), so those checks wait up to a few seconds."""

from __future__ import annotations

import fenceq
from conftest import Daemon, wait_until


def state(c: fenceq.Client, id: str) -> str:
    return c.job(id)["state"]


def settles_to(c: fenceq.Client, id: str, want: str) -> bool:
    return wait_until(lambda: state(c, id) == want, timeout=5.0)


def dead_parent(c: fenceq.Client, id: str) -> None:
    """``id`` (queue "p", one attempt) claimed and failed: dead."""
    assert c.enqueue(id, queue="p", max_attempts=1)
    fence = c.claim(id, "w", 30)
    assert fence is not None
    assert c.fail(id, "w", fence, "boom")
    assert state(c, id) == "dead"


def claimable(c: fenceq.Client) -> list:
    out = []
    while (job := c.claim_next("q", "w", 30)) is not None:
        out.append(job["id"])
    return sorted(out)


def test_c3_13_cancel_retry_purge_cancels_the_child_again(either_store: Daemon):
    with either_store.client() as c:
        assert c.enqueue("P", queue="p")
        assert c.enqueue("C", queue="q", after=["P"])
        assert state(c, "C") == "blocked"
        assert c.cancel("P")
        assert state(c, "C") == "cancelled"
        assert c.retry("C")
        assert state(c, "C") == "blocked"  # P may still be retried: C waits for it
        assert c.purge(0, queue="p") == 1
        assert settles_to(c, "C", "cancelled"), f"C is {state(c, 'C')} after its parent's purge"
        assert c.job("C")["error"] == "parent P cancelled"
        assert c.retry("C") is False
        assert claimable(c) == []


def test_c3_13_purge_then_retry_is_refused_and_the_child_never_runs(either_store: Daemon):
    with either_store.client() as c:
        assert c.enqueue("P", queue="p", max_attempts=1)
        assert c.enqueue("C", queue="q", after=["P"])
        assert c.enqueue("R", queue="q", after=["P"], after_failure="run")
        fence = c.claim("P", "w", 30)
        assert c.fail("P", "w", fence, "boom")
        assert state(c, "C") == "cancelled"
        assert c.purge(0, queue="p") == 1
        assert c.retry("C") is False
        assert state(c, "C") == "cancelled"
        assert c.job("C")["error"] == "parent P dead"
        # after_failure "run": its parent's failure lets it run, retried too.
        assert c.cancel("R")
        assert c.retry("R") is True
        assert claimable(c) == ["R"]
        # Enqueued after the purge: cancelled at once, as after a dead parent;
        # with after_failure "run" it runs.
        assert c.enqueue("late", queue="q", after=["P"])
        assert state(c, "late") == "cancelled"
        assert c.enqueue("late-run", queue="q", after=["P"], after_failure="run")
        assert claimable(c) == ["late-run"]


def test_c3_13_retry_many_skips_the_children_of_a_purged_failed_parent(either_store: Daemon):
    with either_store.client() as c:
        dead_parent(c, "P")
        assert c.enqueue("P2", queue="p")
        kids = [f"c{k}" for k in range(5)]
        for k in kids:
            assert c.enqueue(k, queue="q", after=["P"])
        assert c.enqueue("other", queue="q", after=["P2"])
        assert c.enqueue("R", queue="q", after=["P"], after_failure="run")
        assert c.cancel("R")
        assert c.cancel("other")
        assert c.purge(0, queue="p") == 1  # P; P2 is open
        r = c.retry_many("q", state="cancelled")
        assert r.count == 2, r  # R and other; before: all 7
        assert {k: state(c, k) for k in kids} == {k: "cancelled" for k in kids}
        assert state(c, "other") == "blocked"  # waits for P2, which may finish
        assert claimable(c) == ["R"]


def test_c3_13_cancel_many_then_purge_many_settles_a_retried_child(either_store: Daemon):
    with either_store.client() as c:
        assert c.enqueue("P", queue="p")
        assert c.enqueue("C", queue="q", after=["P"])
        assert c.enqueue("R", queue="q", after=["P"], after_failure="run")
        assert c.cancel_many("p").count == 1
        assert state(c, "C") == "cancelled"
        assert state(c, "R") == "ready"
        assert c.retry_many("q", state="cancelled").count == 1
        assert state(c, "C") == "blocked"
        assert c.purge_many("p", state="cancelled", older_than=0).count == 1
        assert settles_to(c, "C", "cancelled"), f"C is {state(c, 'C')} after its parent's purge"
        assert c.retry_many("q", state="cancelled").count == 0
        assert claimable(c) == ["R"]


def test_c3_13_a_parent_purged_done_still_counts_as_done(either_store: Daemon):
    with either_store.client() as c:
        assert c.enqueue("P", queue="p")
        fence = c.claim("P", "w", 30)
        assert c.complete("P", "w", fence, "ok")
        assert c.purge(0, queue="p") == 1
        assert c.enqueue("C", queue="q", after=["P"])
        assert claimable(c) == ["C"]
