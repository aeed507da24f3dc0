"""Bulk actions by filter and retention (issue 33; protocol/PROTOCOL.md, "Bulk
actions and retention"): ``retry_many``, ``cancel_many``, ``purge_many`` and
their ``*_all`` helpers; ``queue_config``'s ``keep_done``, ``keep_dead`` and
``keep_cancelled``; stats' retention keys and ``totals["removed"]``.

Against real daemons: the client clock (every call that needs a time passes
``now``) unless a test says otherwise; retention runs on the server clock,
since the daemon removes jobs as its own time passes. Every wait is bounded."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import pytest

import fenceq
from conftest import Daemon, jobs_by_id, record_requests, wait_until


def dead_jobs(client: fenceq.Client, queue: str, prefix: str, n: int, now: float) -> List[str]:
    """``n`` jobs of ``queue`` (``<prefix>00``, ...) enqueued with max_attempts 1,
    claimed and failed: dead. Answers their ids."""
    ids = [f"{prefix}{i:02d}" for i in range(n)]
    assert client.enqueue_many([fenceq.JobSpec(i, queue=queue, max_attempts=1) for i in ids],
                               now=now) == [True] * n
    jobs = client.claim_next(queue, "w", 100, max=n, now=now)
    assert sorted(j["id"] for j in jobs) == ids
    for job in jobs:
        assert client.fail(job["id"], "w", job["fence"], "boom", now=now + 1) is True
    return ids


def states(client: fenceq.Client, now: float, **filters: Any) -> Dict[str, str]:
    """Each job's state (up to 1000 jobs), by id."""
    return {i: row["state"] for i, row in jobs_by_id(client, limit=1000, now=now, **filters).items()}


# -- retry_many / retry_all --------------------------------------------------------


def test_retry_many_pages_dead_jobs_back_and_their_fences_continue(client: fenceq.Client):
    ids = dead_jobs(client, "rq", "r-", 30, now=10)
    assert client.stats(now=12)["queues"]["rq"]["dead"] == 30
    sent = record_requests(client)
    pages = [client.retry_many("rq", state="dead", limit=10, now=12) for _ in range(4)]
    assert pages == [fenceq.BulkResult(10, True), fenceq.BulkResult(10, True),
                     fenceq.BulkResult(10, False), fenceq.BulkResult(0, False)]
    assert isinstance(pages[0], tuple) and pages[0].count == 10 and pages[0].more is True
    # The fields in the C++ encoder's order, each only when given.
    assert [list(fields) for _, fields, _ in sent] == [["queue", "state", "limit", "now"]] * 4
    assert sent[0][:2] == ("retry_many", {"queue": "rq", "state": "dead", "limit": 10, "now": 12})

    row = client.stats(now=12)["queues"]["rq"]
    assert (row["ready"], row["dead"]) == (30, 0)
    listed = jobs_by_id(client, queue="rq", limit=1000, now=12)
    assert sorted(listed) == ids
    assert all(r["state"] == "ready" and r["attempts"] == 0 and r["fence"] == 1 for r in listed.values())
    # Attempts start over and the fence continues (C1.2): the next claim gets fence 2.
    again = client.claim_next("rq", "v", 100, max=30, now=13)
    assert len(again) == 30 and {j["fence"] for j in again} == {2} and {j["attempts"] for j in again} == {1}
    assert client.complete(again[0]["id"], "w", 1, "stale", now=13) is False  # the old holder: refused


def test_retry_many_takes_dead_and_cancelled_by_default_and_filters_by_prefix_and_group(
        client: fenceq.Client):
    dead_jobs(client, "rg", "a-", 3, now=10)
    dead_jobs(client, "rg", "b-", 2, now=10)
    assert client.enqueue("c-1", queue="rg", group="g1", now=10)
    assert client.enqueue("c-2", queue="rg", group="g2", now=10)
    assert client.cancel("c-1", now=11) and client.cancel("c-2", now=11)
    assert client.retry_many("rg", prefix="b-", now=12) == (2, False)
    assert client.retry_many("rg", group="g2", now=12) == (1, False)
    assert states(client, 12, queue="rg") == {"a-00": "dead", "a-01": "dead", "a-02": "dead",
                                               "b-00": "ready", "b-01": "ready",
                                               "c-1": "cancelled", "c-2": "ready"}
    assert client.retry_many("rg", now=12) == (4, False)  # no state: dead and cancelled
    assert set(states(client, 12, queue="rg").values()) == {"ready"}
    assert client.retry_many("other-queue", now=12) == (0, False)


def test_retry_all_loops_until_no_more_and_is_bounded_by_max_pages(client: fenceq.Client):
    dead_jobs(client, "ra", "x-", 25, now=10)
    sent = record_requests(client)
    assert client.retry_all("ra", state="dead", limit=4, max_pages=3, now=12) == 12
    assert len(sent) == 3  # stopped by max_pages with jobs left
    assert client.stats(now=12)["queues"]["ra"]["dead"] == 13
    sent.clear()
    assert client.retry_all("ra", limit=4, now=12) == 13
    assert [op for op, _, _ in sent] == ["retry_many"] * 4  # 4 + 4 + 4 + 1, the last with more false
    assert "max_pages" not in sent[0][1]
    assert client.stats(now=12)["queues"]["ra"]["dead"] == 0
    assert client.retry_all("ra", now=12) == 0


def test_retry_all_stops_after_a_page_that_retried_none(client: fenceq.Client):
    """Keyed dead jobs whose key an unfinished job holds cannot be retried:
    each page would find them again, so the helper stops at the first page
    that retried none instead of asking max_pages times."""
    for i in range(3):
        assert client.enqueue_unique(f"k-{i}", f"key-{i}", queue="rk", max_attempts=1, now=10).created
    for job in client.claim_next("rk", "w", 100, max=3, now=10):
        assert client.fail(job["id"], "w", job["fence"], "boom", now=11)
    for i in range(3):
        assert client.enqueue_unique(f"k-{i}-again", f"key-{i}", queue="rk", now=12).created
    sent = record_requests(client)
    assert client.retry_all("rk", state="dead", limit=2, max_pages=50, now=12) == 0
    assert len(sent) == 1
    assert client.stats(now=12)["queues"]["rk"]["dead"] == 3


# -- cancel_many / cancel_all ------------------------------------------------------


def test_cancel_many_on_a_prefix_raises_the_fence_of_a_held_job(client: fenceq.Client):
    for i in range(5):
        assert client.enqueue(f"imp-{i}", queue="cq", now=10)
    for i in range(3):
        assert client.enqueue(f"keep-{i}", queue="cq", now=10)
    held = client.claim_next("cq", "w", 100, now=10)
    assert held["id"] == "imp-0" and held["fence"] == 1
    assert client.cancel_many("cq", prefix="imp-", now=11) == fenceq.BulkResult(5, False)
    assert states(client, 11, queue="cq") == {**{f"imp-{i}": "cancelled" for i in range(5)},
                                               **{f"keep-{i}": "ready" for i in range(3)}}
    # The holder's writes are refused from then on, as after cancel.
    assert client.complete("imp-0", "w", 1, "late", now=12) is False
    assert client.state("imp-0")["fence"] == 2 and client.state("imp-0")["result"] is None
    assert client.stats(now=12)["queues"]["cq"]["cancelled"] == 5
    assert client.cancel_many("cq", prefix="imp-", now=12) == (0, False)  # cancelled: not again


def test_cancel_many_by_state_and_cancel_all_in_pages(client: fenceq.Client):
    for i in range(12):
        assert client.enqueue(f"d-{i:02d}", queue="cs", delay=100, now=10)
    for i in range(3):
        assert client.enqueue(f"r-{i}", queue="cs", now=10)
    assert client.cancel_many("cs", state="ready", now=11) == (3, False)
    sent = record_requests(client)
    assert client.cancel_all("cs", state="delayed", limit=5, now=11) == 12
    assert [fields["limit"] for _, fields, _ in sent] == [5, 5, 5]
    row = client.stats(now=11)["queues"]["cs"]
    assert (row["cancelled"], row["delayed"], row["ready"]) == (15, 0, 0)


# -- purge_many / purge_all --------------------------------------------------------


def test_purge_many_by_state_keeps_the_others_and_the_fences(client: fenceq.Client):
    dead = dead_jobs(client, "pq", "dead-", 4, now=10)
    for i in range(3):
        assert client.enqueue(f"done-{i}", queue="pq", now=10)
        job = client.claim_next("pq", "w", 100, now=10)
        assert client.complete(job["id"], "w", job["fence"], "ok", now=11)
    assert client.enqueue("gone", queue="pq", now=10) and client.cancel("gone", now=11)
    sent = record_requests(client)
    assert client.purge_many("pq", state="dead", now=12) == fenceq.BulkResult(4, False)
    assert sent[-1][:2] == ("purge", {"queue": "pq", "state": "dead", "now": 12})
    assert states(client, 12, queue="pq") == {"done-0": "done", "done-1": "done", "done-2": "done",
                                               "gone": "cancelled"}
    # A purged id enqueued again continues from its fence (C1.2).
    assert client.enqueue(dead[0], queue="pq", now=12) is True
    assert client.claim(dead[0], "w", 10, now=12) == 2
    # older_than: finished at 11, judged at 12: none is 5 s old.
    assert client.purge_many("pq", state="done", older_than=5, now=12) == (0, False)
    assert client.purge_many("pq", state="done", older_than=5, now=20) == (3, False)
    assert states(client, 20, queue="pq") == {dead[0]: "leased", "gone": "cancelled"}


def test_purge_many_without_a_filter_is_a_page_and_purge_all_loops(client: fenceq.Client):
    dead_jobs(client, "pa", "a-", 7, now=10)
    dead_jobs(client, "pb", "b-", 2, now=10)
    sent = record_requests(client)
    # Nothing of the filter given: limit 1000 is sent, so the daemon answers a page.
    assert client.purge_many("pb", now=12) == (2, False)
    assert sent[-1][1] == {"queue": "pb", "limit": fenceq.DEFAULT_BULK_LIMIT, "now": 12}
    sent.clear()
    assert client.purge_all("pa", limit=3, now=12) == 7
    assert [op for op, _, _ in sent] == ["purge"] * 3
    assert all(fields["limit"] == 3 for _, fields, _ in sent)
    assert jobs_by_id(client, queue="pa", now=12) == {}
    # Of every queue: no queue sent.
    dead_jobs(client, "pc", "c-", 2, now=20)
    dead_jobs(client, "pd", "d-", 2, now=20)
    sent.clear()
    assert client.purge_all(state="dead", limit=3, now=22) == 4
    assert "queue" not in sent[0][1]
    assert jobs_by_id(client, now=22) == {}


def test_the_old_purge_by_age_still_answers_an_int(client: fenceq.Client):
    dead_jobs(client, "po", "o-", 2, now=10)
    sent = record_requests(client)
    assert client.purge(0, queue="po", now=12) == 2
    assert sent[0][1] == {"older_than": 0, "queue": "po", "now": 12}
    assert client.purge(0, now=12) == 0


# -- bad input ---------------------------------------------------------------------


def test_bad_filters_are_coded_errors_and_change_nothing(client: fenceq.Client):
    dead_jobs(client, "bq", "b-", 3, now=10)
    assert client.enqueue("ready-1", queue="bq", now=10)
    before = jobs_by_id(client, queue="bq", now=12)
    for call, field in [
            (lambda: client.retry_many("bq", state="done", now=12), "state"),
            (lambda: client.retry_many("bq", state="ready", now=12), "state"),
            (lambda: client.retry_many("bq", limit=0, now=12), "limit"),
            (lambda: client.retry_many("bq", limit=fenceq.MAX_BULK_LIMIT + 1, now=12), "limit"),
            (lambda: client.retry_many("", now=12), "queue"),
            (lambda: client.cancel_many("bq", state="done", now=12), "state"),
            (lambda: client.cancel_many("bq", state="cancelled", now=12), "state"),
            (lambda: client.cancel_many("bq", limit=0, now=12), "limit"),
            (lambda: client.purge_many("bq", state="ready", now=12), "state"),
            (lambda: client.purge_many("bq", limit=0, now=12), "limit"),
            (lambda: client.retry_all("bq", state="done", now=12), "state"),
            (lambda: client.cancel_all("bq", limit=0, now=12), "limit"),
            (lambda: client.purge_all("bq", state="leased", now=12), "state")]:
        with pytest.raises(fenceq.InvalidArgument) as e:
            call()
        assert field in e.value.message, e.value.message
    for call in [lambda: client.retry_many("bq", limit=2.5, now=12),
                 lambda: client.cancel_many("bq", prefix=5, now=12),  # type: ignore[arg-type]
                 lambda: client.purge_many("bq", state=1, now=12)]:  # type: ignore[arg-type]
        with pytest.raises(fenceq.BadRequest):
            call()
    assert jobs_by_id(client, queue="bq", now=12) == before
    # max_pages is the client's: refused before anything is sent.
    sent = record_requests(client)
    for bad in (0, -1, 1.5, None):
        with pytest.raises(fenceq.InvalidArgument, match="max_pages"):
            client.retry_all("bq", max_pages=bad)  # type: ignore[arg-type]
        with pytest.raises(fenceq.InvalidArgument, match="max_pages"):
            client.purge_all(max_pages=bad)  # type: ignore[arg-type]
    assert sent == []


def test_a_bulk_answer_of_the_wrong_shape_is_bad_reply(client: fenceq.Client):
    for answer in [3, {"count": 1}, {"count": -1, "more": False}, {"count": 1.0, "more": False},
                   {"count": 1, "more": 0}, None]:
        client._round_trip = lambda socket, op, fields, timeout, answer=answer: answer
        with pytest.raises(fenceq.BadReply, match="count"):
            client.retry_many("q")
        with pytest.raises(fenceq.BadReply):
            client.purge_all()


# -- retention ---------------------------------------------------------------------


def test_queue_config_sends_keep_fields_and_keep_forever_as_nil(client: fenceq.Client):
    sent = record_requests(client)
    assert client.queue_config("kq", keep_done=86400, keep_dead=0.5, keep_cancelled=0) is True
    assert sent[-1][1] == {"queue": "kq", "keep_done": 86400, "keep_dead": 0.5, "keep_cancelled": 0}
    row = client.stats(now=1)["queues"]["kq"]
    assert (row["keep_done"], row["keep_dead"], row["keep_cancelled"]) == (86400.0, 0.5, 0.0)
    assert isinstance(row["keep_done"], float)
    # Left out: kept as stored.
    assert client.queue_config("kq", max_leased=3) is True
    assert client.stats(now=1)["queues"]["kq"]["keep_done"] == 86400.0
    # KEEP_FOREVER (math.inf) is nil on the wire: that retention goes.
    assert client.queue_config("kq", keep_done=fenceq.KEEP_FOREVER, keep_cancelled=float("inf")) is True
    assert sent[-1][1] == {"queue": "kq", "keep_done": None, "keep_cancelled": None}
    row = client.stats(now=1)["queues"]["kq"]
    assert "keep_done" not in row and "keep_cancelled" not in row and row["keep_dead"] == 0.5
    assert client.queue_config("kq", keep_dead=fenceq.KEEP_FOREVER) is True
    assert not {"keep_done", "keep_dead", "keep_cancelled"} & set(client.stats(now=1)["queues"]["kq"])


def test_queue_config_bad_keep_values_change_nothing(client: fenceq.Client):
    assert client.queue_config("kb", keep_done=60) is True
    for kwargs in ({"keep_done": -1}, {"keep_dead": 1e11}, {"keep_cancelled": float("nan")},
                   {"keep_done": -fenceq.KEEP_FOREVER}):
        with pytest.raises(fenceq.InvalidArgument):
            client.queue_config("kb", **kwargs)
    with pytest.raises(fenceq.BadRequest):
        client.queue_config("kb", keep_done="a day")  # type: ignore[arg-type]
    row = client.stats(now=1)["queues"]["kb"]
    assert row["keep_done"] == 60.0 and "keep_dead" not in row and "keep_cancelled" not in row


def test_stats_removed_defaults_to_zero_and_keeps_are_absent_when_unset(client: fenceq.Client):
    assert client.enqueue("s-1", queue="plain", now=1)
    row = client.stats(now=1)["queues"]["plain"]
    assert row["totals"]["removed"] == 0
    assert row.get("keep_done") is None and row.get("keep_dead") is None
    # A daemon before retention sends no "removed": the client reads 0.
    old = {"queues": {"q": {"ready": 0, "totals": {"claimed": 0}}, "r": {"ready": 1}}}
    client._round_trip = lambda socket, op, fields, timeout: old
    stats = client.stats()
    assert stats["queues"]["q"]["totals"] == {"claimed": 0, "removed": 0}
    assert "totals" not in stats["queues"]["r"]


def test_retention_removes_done_jobs_and_counts_them(server_daemon: Daemon):
    """keep_done=0.5: the daemon removes the queue's done jobs about half a
    second after they finished (a pass every second), counts them in
    totals["removed"], keeps every other job and each id's fence."""
    with server_daemon.client() as c:
        assert c.queue_config("ret", keep_done=0.5) is True
        assert c.stats()["queues"]["ret"]["keep_done"] == 0.5
        for i in range(6):
            assert c.enqueue(f"job-{i}", queue="ret")
        assert c.enqueue("other-done", queue="elsewhere")
        for _ in range(4):
            job = c.claim_next("ret", "w", 30)
            assert c.complete(job["id"], "w", job["fence"], "ok")
        job = c.claim_next("elsewhere", "w", 30)
        assert c.complete(job["id"], "w", job["fence"], "ok")

        def removed() -> bool:
            row = c.stats()["queues"]["ret"]
            return row["done"] == 0 and row["totals"]["removed"] == 4

        assert wait_until(removed, 10, 0.1), c.stats()["queues"]["ret"]
        row = c.stats()["queues"]["ret"]
        assert (row["ready"], row["done"], row["totals"]["completed"]) == (2, 0, 4)
        assert sorted(jobs_by_id(c, queue="ret")) == ["job-4", "job-5"]
        # No retention on the other queue: its done job stays.
        assert c.stats()["queues"]["elsewhere"]["done"] == 1
        assert c.stats()["queues"]["elsewhere"]["totals"]["removed"] == 0
        # A removed id enqueued again continues from its fence.
        assert c.enqueue("job-0", queue="ret") is True
        assert c.claim("job-0", "w", 30) == 2
        # Without the retention, done jobs stay.
        assert c.queue_config("ret", keep_done=fenceq.KEEP_FOREVER) is True
        job = c.claim_next("ret", "w", 30)
        assert c.complete(job["id"], "w", job["fence"], "ok")
        time.sleep(1.5)  # more than a retention pass
        row = c.stats()["queues"]["ret"]
        assert row["done"] == 1 and row["totals"]["removed"] == 4 and "keep_done" not in row
