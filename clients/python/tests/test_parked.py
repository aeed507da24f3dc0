"""Delayed jobs leave claim_next's walk until their time comes (issue 56,
the scale sweep; SQLite schema 19, rules::kKidsParked).

Before, a claim_next stepped over every delayed job of its queue before the
first claimable one: 10^5 of them cost 20 ms of the serving thread a call
that found nothing (0.1 ms since). An enqueue with a delay, a fail with a
retry_in and a snooze park the job; each claim_next first brings back the
parked jobs whose delay is over, at most 4,096 a call. Leased jobs are
parked only after a long walk over them (rules::kLongWalkSteps), and a job claimed by id, released, failed
or snoozed goes back to the walk in time here too. These check that what is claimable is still claimed, once, in the
contract's order (C3: highest priority, then enqueue order), under the
client's clock (C2.2), whatever the clock of the request that parked or woke
a job. Real fenceqd ($FENCEQD) on a SQLite file, over IPC.
"""

from __future__ import annotations

import sqlite3
from typing import List

import fenceq

T = 1_000_000.0  # the client's clock


def ids(page) -> List[str]:
    return [j["id"] for j in page or []]


def test_a_lease_that_ran_out_is_claimed_again_in_order(client):
    for i in range(3):
        assert client.enqueue(f"j{i}", queue="q", now=T)
    assert ids(client.claim_next("q", "a", 10, now=T, max=10)) == ["j0", "j1", "j2"]
    assert client.claim_next("q", "b", 10, now=T + 5) is None
    assert client.enqueue("late", queue="q", now=T + 5)
    # Their leases over, they come first again: enqueued before "late".
    got = client.claim_next("q", "b", 10, now=T + 11, max=10)
    assert ids(got) == ["j0", "j1", "j2", "late"]
    assert [j["fence"] for j in got] == [2, 2, 2, 1]


def test_a_released_job_is_claimable_at_once_and_a_delayed_one_at_its_time(client):
    assert client.enqueue("d", queue="q", delay=50, priority=5, now=T)
    assert client.enqueue("r", queue="q", now=T)
    job = client.claim_next("q", "a", 600, now=T + 1)
    assert job["id"] == "r"
    assert client.release("r", "a", job["fence"]) is True
    assert client.claim_next("q", "b", 600, now=T + 2)["id"] == "r"
    assert client.claim_next("q", "b", 600, now=T + 49) is None
    assert client.claim_next("q", "b", 600, now=T + 50)["id"] == "d"


def test_a_failed_job_waits_for_its_retry_in(client):
    assert client.enqueue("f", queue="q", now=T)
    job = client.claim_next("q", "a", 600, now=T)
    assert client.fail("f", "a", job["fence"], "boom", retry_in=30, now=T + 1) is True
    assert client.claim_next("q", "a", 600, now=T + 30) is None
    assert client.claim_next("q", "a", 600, now=T + 31)["id"] == "f"


def test_a_job_woken_under_a_later_clock_is_not_claimed_under_an_earlier_one(client):
    """C2.2: each request's `now` is the clock. A claim_next at T+20 wakes
    the job delayed to T+10 and claims a more urgent one; one at T+5 does not
    claim the woken job, not due by its clock; one at T+10 does."""
    assert client.enqueue("w", queue="q", delay=10, priority=-1, now=T)
    assert client.enqueue("r", queue="q", now=T)
    assert client.claim_next("q", "a", 600, now=T + 20)["id"] == "r"
    assert client.claim_next("q", "b", 600, now=T + 5) is None
    assert client.claim_next("q", "b", 600, now=T + 10)["id"] == "w"


def test_a_job_claimed_by_id_while_parked_and_released_is_claimable_again(client):
    assert client.enqueue("p", queue="q", delay=100, now=T)
    assert client.claim("p", "a", 60, now=T + 1) is None  # not yet (C3.3)
    fence = client.claim("p", "a", 60, now=T + 100)
    assert fence == 1
    assert client.release("p", "a", fence) is True
    assert client.claim_next("q", "b", 60, now=T + 101)["id"] == "p"


def test_more_jobs_due_at_once_than_a_wake_page_are_each_claimed_once(client):
    """5,000 delayed jobs come due together: claim_next brings back 4,096 a
    call, and every job is claimed exactly once, most urgent first among
    the ones back."""
    n = 5_000
    for i in range(0, n, 1000):
        assert all(client.enqueue_many(
            [fenceq.JobSpec(f"d{k:05d}", queue="q", delay=10, priority=k % 3) for k in range(i, i + 1000)],
            now=T))
    assert client.claim_next("q", "w", 600, now=T + 9, max=1000) == []
    seen: List[str] = []
    pages = 0
    while True:
        page = client.claim_next("q", "w", 600, now=T + 11, max=1000)
        if not page:
            break
        pages += 1
        assert pages <= 20
        prios = [int(j["id"][1:]) % 3 for j in page]  # each one's priority
        assert prios == sorted(prios, reverse=True)  # within a page: most urgent first
        seen += ids(page)
    assert len(seen) == n and len(set(seen)) == n
    assert pages == 5
    # All back and claimed: the last pages were of the lowest priority.
    assert client.stats(now=T + 11)["queues"]["q"]["leased"] == n


def test_a_parked_job_cancelled_then_retried_is_claimable_at_once(client):
    """A retry brings a job back open, "claimable at once" (docs/contract.md, `retry`): a bit
    it kept from a delay it had before it was cancelled must not keep it
    out of the walk, also once every other parked job was woken."""
    assert client.enqueue("d1", queue="q", delay=10, now=T)
    assert client.enqueue("d2", queue="q", delay=10, now=T)
    assert client.cancel("d2", now=T + 1) is True
    assert client.claim_next("q", "a", 600, now=T + 11)["id"] == "d1"  # the last parked one woken
    assert client.retry("d2") is True
    assert client.claim_next("q", "a", 600, now=T + 12)["id"] == "d2"


def fill_leased(client, n: int, ttl: float) -> List[dict]:
    jobs = []
    for i in range(0, n, 1000):
        client.enqueue_many([{"id": f"h{j:05d}", "queue": "held"} for j in range(i, min(i + 1000, n))],
                            now=T)
    while len(jobs) < n:
        page = client.claim_next("held", "a", ttl, now=T, max=1000)
        assert page
        jobs.extend(page)
    return jobs


def parked_count(db: str) -> int:
    """Jobs with the parked bit, read from the file beside the daemon (WAL)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(*) FROM jobs WHERE kids & 64").fetchone()[0]


def test_leased_jobs_parked_after_a_long_walk_come_back_when_their_leases_end(daemon, client):
    """A claim_next that stepped over thousands of leased jobs parks those at
    the head of its walk (rules::kLongWalkSteps): each must come back, in
    order, when its lease ends by release, fail, unclaim-like snooze, or
    time, and its holder's writes must still work while it is parked."""
    jobs = fill_leased(client, 5000, 600)
    by_id = {j["id"]: j for j in jobs}
    # Walks that find nothing: each parks a page of the leased head.
    for k in range(8):
        assert client.claim_next("held", "b", 600, now=T + 1 + k / 100) is None
        assert client.claim_next("held", "b", 600, now=T + 1 + k / 100, max=1000) == []
    parked = parked_count(daemon.db)
    assert parked >= 4000, parked  # the walks now skip them
    # The holder's lease writes work on parked jobs.
    h0, h1, h2, h3 = (by_id[f"h{i:05d}"] for i in range(4))
    assert client.renew("h00000", "a", h0["fence"], 600, now=T + 2) is True
    assert client.complete("h00001", "a", h1["fence"], "ok", now=T + 2) is True
    # Released: claimable at once, first in order.
    assert client.release("h00002", "a", h2["fence"]) is True
    assert client.fail("h04999", "a", by_id["h04999"]["fence"], "x", retry_in=0, now=T + 3) is True
    got = client.claim_next("held", "c", 600, now=T + 3, max=10)
    assert ids(got) == ["h00002", "h04999"]
    assert client.snooze("h00003", "a", h3["fence"], 5, now=T + 3) is True
    assert client.claim_next("held", "c", 600, now=T + 4) is None
    assert client.claim_next("held", "c", 600, now=T + 8)["id"] == "h00003"
    # Every lease ran out (h00000's renew ran to T + 602): all come back,
    # each claimed once, in enqueue order; h00001 is done.
    back = []
    while True:
        page = client.claim_next("held", "d", 600, now=T + 601, max=1000)
        if not page:
            break
        back.extend(ids(page))
    expect = [f"h{i:05d}" for i in range(5000) if i not in (0, 1, 2, 3, 4999)]
    assert back == expect
    assert client.claim_next("held", "d", 600, now=T + 603)["id"] == "h00000"
    assert client.job("h00001")["state"] == "done"
