"""Unique keys (issue 31): enqueue's ``key``, ``unique_for`` and ``on_conflict``,
``enqueue_unique`` / ``enqueue_many_unique`` and their ``(id, created)``
answers, ``list(key=)``, rows' ``key``, ``retry`` of a keyed job, and the
refusals, on the client and on the daemon. Client-clock daemons: every call
passes ``now``."""

from __future__ import annotations

import pytest

import fenceq
from conftest import Background, jobs_by_id, record_requests
from fenceq import Enqueued, JobSpec


def test_enqueue_unique_creates_then_answers_the_holder(client: fenceq.Client):
    sent = record_requests(client)
    first = client.enqueue_unique("a", "k", queue="q", now=1)
    assert first == Enqueued("a", True) and first and first.created
    assert sent[-1][:2] == ("enqueue", {"id": "a", "queue": "q", "key": "k", "now": 1})

    # The key is held by the unfinished "a": nothing created, "a" named.
    second = client.enqueue_unique("b", "k", queue="q", payload="other", now=2)
    assert second == ("a", False) and not second
    assert client.job("b", now=2) is None
    assert client.enqueue("b", queue="q", key="k", now=2) is False
    # Keys are per queue; an id that exists answers itself (whatever its key).
    assert client.enqueue_unique("c", "k", queue="q2", now=2) == ("c", True)
    assert client.enqueue_unique("a", "k2", queue="q", now=2) == ("a", False)
    assert client.list(key="k2", now=2) == []
    # enqueue keeps answering a bool, with a key or without.
    assert client.enqueue("d", queue="q", key="k3", now=2) is True
    assert client.enqueue("e", queue="q", now=2) is True

    # Once the holder is finished the key is free again.
    fence = client.claim("a", "w", 30, now=3)
    assert client.complete("a", "w", fence, "ok", now=4)
    assert client.enqueue_unique("b", "k", queue="q", now=5) == ("b", True)
    assert client.enqueue_unique("f", "k", queue="q", now=5) == ("b", False)


def test_unique_for_counts_recent_finished_jobs(client: fenceq.Client):
    sent = record_requests(client)
    assert client.enqueue_unique("w1", "k", unique_for=10, now=100) == ("w1", True)
    assert sent[-1][1] == {"id": "w1", "key": "k", "unique_for": 10, "now": 100}
    fence = client.claim("w1", "w", 30, now=100)
    assert client.complete("w1", "w", fence, "ok", now=101)

    # w1 is done, enqueued 5 s ago: a 10 s window still sees it, a 3 s one not.
    assert client.enqueue_unique("w2", "k", unique_for=10, now=105) == ("w1", False)
    assert client.job("w2", now=105) is None
    assert client.enqueue_unique("w2", "k", unique_for=3, now=105) == ("w2", True)
    # w2 is unfinished: it holds the key whatever the window.
    assert client.enqueue_unique("w3", "k", now=500) == ("w2", False)
    assert client.enqueue_unique("w3", "k", unique_for=0.5, now=500) == ("w2", False)
    # The window past, and w2 finished: a new job.
    assert client.cancel("w2", now=501)
    assert client.enqueue_unique("w3", "k", unique_for=10, now=520) == ("w3", True)


def test_replace_updates_a_waiting_holder(client: fenceq.Client):
    """on_conflict="replace": a ready or delayed holder takes the request's
    payload, priority, max_attempts and delay (from now); id, fence and
    attempts stay."""
    assert client.enqueue_unique("r1", "k", queue="q", payload="v1", priority=1, now=10)
    job = client.claim_next("q", "w", 30, now=10)
    assert job["id"] == "r1" and job["fence"] == 1
    assert client.fail("r1", "w", 1, "boom", retry_in=100, now=11)  # delayed until 111
    assert client.job("r1", now=11)["state"] == "delayed"

    sent = record_requests(client)
    answer = client.enqueue_unique("r2", "k", queue="q", payload=b"v2", priority=7, max_attempts=9,
                                   delay=5, on_conflict="replace", now=20)
    assert answer == ("r1", False)
    assert sent[-1][1]["on_conflict"] == "replace"
    row = client.job("r1", now=20)
    assert (row["payload"], row["priority"], row["max_attempts"], row["not_before"]) == (b"v2", 7, 9, 25)
    assert (row["fence"], row["attempts"], row["state"], row["key"]) == (1, 1, "delayed", "k")
    assert client.job("r2", now=20) is None

    # Without a delay the replaced job is claimable at once.
    assert client.enqueue("r3", queue="q", key="k", payload="v3", on_conflict="replace", now=21) is False
    job = client.claim_next("q", "w", 30, now=21)
    assert (job["id"], job["fence"], job["payload"], job["attempts"]) == ("r1", 2, "v3", 2)

    # "skip" (the default, also when spelled out) leaves the holder as it is.
    assert client.fail("r1", "w", 2, "again", retry_in=0, now=22)
    assert client.enqueue_unique("r4", "k", queue="q", payload="v4", on_conflict="skip", now=23) == ("r1", False)
    assert client.job("r1", now=23)["payload"] == "v3"


def test_replace_never_touches_a_leased_or_finished_holder(client: fenceq.Client):
    assert client.enqueue_unique("L1", "k", payload="orig", now=1) == ("L1", True)
    job = client.claim_next("default", "w", 30, now=1)
    assert job["id"] == "L1"
    before = client.job("L1", now=2)
    assert client.enqueue_unique("L2", "k", payload="new", priority=9, max_attempts=1, delay=50,
                                 on_conflict="replace", now=2) == ("L1", False)
    assert client.job("L1", now=2) == before  # leased: untouched
    assert client.check("L1", "w", job["fence"], now=2)

    assert client.complete("L1", "w", job["fence"], "done", now=3)
    before = client.job("L1", now=3)
    assert client.enqueue_unique("L3", "k", payload="new", unique_for=100, on_conflict="replace",
                                 now=4) == ("L1", False)
    assert client.job("L1", now=4) == before  # finished: untouched
    assert client.job("L3", now=4) is None


def test_enqueue_many_mixed_entries(client: fenceq.Client):
    sent = record_requests(client)
    answers = client.enqueue_many_unique([
        JobSpec("m1", queue="q", key="k1"),
        {"id": "m2", "queue": "q"},
        JobSpec("m3", queue="q", key="k1", payload="x"),      # held by m1, earlier in the batch
        {"id": "m1", "queue": "q"},                            # the id exists
        ("m4", "q", None, None, None, None, "k2", 5.0, "replace"),  # a plain tuple, JobSpec's order
        {"id": "m5", "queue": "q", "key": None, "unique_for": None},  # None: not sent
    ], now=1)
    assert answers == [("m1", True), ("m2", True), ("m1", False), ("m1", False), ("m4", True), ("m5", True)]
    assert all(isinstance(a, Enqueued) for a in answers)
    assert sent[-1][1]["jobs"] == [
        {"id": "m1", "queue": "q", "key": "k1"},
        {"id": "m2", "queue": "q"},
        {"id": "m3", "queue": "q", "payload": "x", "key": "k1"},
        {"id": "m1", "queue": "q"},
        {"id": "m4", "queue": "q", "key": "k2", "unique_for": 5.0, "on_conflict": "replace"},
        {"id": "m5", "queue": "q"},
    ]
    assert client.job("m3", now=1) is None

    # enqueue_many answers the created flags, keyed entries or not.
    assert client.enqueue_many([JobSpec("n1", queue="q", key="k1"), {"id": "n2", "queue": "q"},
                                {"id": "n3", "queue": "q", "key": "k3"}], now=2) == [False, True, True]
    assert client.job("n1", now=2) is None


def test_list_by_key_and_rows_carry_it(client: fenceq.Client):
    assert client.enqueue_many([JobSpec("a1", queue="q1", key="k"), JobSpec("a2", queue="q2", key="k"),
                                JobSpec("b1", queue="q1", key="kk"), JobSpec("c1", queue="q1")], now=1) \
        == [True, True, True, True]
    rows = jobs_by_id(client, now=1)
    assert {i: r.get("key") for i, r in rows.items()} == {"a1": "k", "a2": "k", "b1": "kk", "c1": None}
    assert "key" not in rows["c1"]  # rows without a key keep their shape
    assert "key" not in client.job("c1", now=1)
    assert client.job("b1", now=1)["key"] == "kk"

    sent = record_requests(client)
    assert [r["id"] for r in client.list(key="k", now=1)] == ["a1", "a2"]  # exact, any queue
    assert sent[-1][1] == {"key": "k", "now": 1}
    assert [r["id"] for r in client.list(key="k", queue="q2", now=1)] == ["a2"]
    assert client.list(key="K", now=1) == [] and client.list(key="k*", now=1) == []

    # A finished job keeps its key in its row.
    job = client.claim_next("q1", "w", 30, now=2)
    assert client.complete(job["id"], "w", job["fence"], None, now=2)
    assert [(r["id"], r["key"]) for r in client.list(key="k", state="done", now=2)] == [("a1", "k")]


def test_retry_is_refused_while_another_job_holds_the_key(client: fenceq.Client):
    assert client.enqueue_unique("d1", "k", max_attempts=1, now=1)
    fence = client.claim("d1", "w", 30, now=1)
    assert client.fail("d1", "w", fence, "boom", now=2)
    assert client.job("d1", now=2)["state"] == "dead"
    assert client.enqueue_unique("d2", "k", now=3) == ("d2", True)  # dead jobs hold no key
    assert client.retry("d1") is False
    assert client.job("d1", now=3)["state"] == "dead"
    assert client.cancel("d2", now=4)
    assert client.retry("d1") is True                              # the key is free: revived
    assert client.retry("d2") is False                             # now d1 holds it
    assert client.enqueue_unique("d3", "k", now=5) == ("d1", False)


def test_client_side_refusals_send_nothing(client: fenceq.Client):
    sent = record_requests(client)
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.enqueue_unique("x", None, now=1)
    assert e.value.code == "invalid_argument" and "key" in e.value.message
    with pytest.raises(TypeError):
        client.enqueue_many([{"id": "x", "keys": "k"}], now=1)    # a field enqueue does not take
    with pytest.raises(TypeError):
        client.enqueue_many([("x", "q", None, None, None, None, "k", 1.0, "skip", "g", ["p"], "run",
                              60.0, {"h": "1"}, 1e9, "extra")],
                            now=1)
    with pytest.raises(TypeError):
        client.enqueue_and_wait("x", 0, key="k", now=1)          # no key there: see below
    assert sent == []


@pytest.mark.parametrize("fields, error", [
    ({"key": ""}, fenceq.InvalidArgument),
    ({"key": "é" * 513}, fenceq.InvalidArgument),               # 1026 bytes
    ({"key": "k", "unique_for": 0}, fenceq.InvalidArgument),
    ({"key": "k", "unique_for": -1}, fenceq.InvalidArgument),
    ({"key": "k", "unique_for": 1e9 + 1}, fenceq.InvalidArgument),
    ({"unique_for": 5}, fenceq.InvalidArgument),                 # without a key
    ({"key": "k", "on_conflict": "merge"}, fenceq.InvalidArgument),
    ({"on_conflict": "replace"}, fenceq.InvalidArgument),        # without a key
    ({"key": 5}, fenceq.BadRequest),
    ({"key": b"k"}, fenceq.BadRequest),
    ({"key": "k", "unique_for": "5"}, fenceq.BadRequest),
    ({"key": "k", "on_conflict": True}, fenceq.BadRequest),
])
def test_daemon_refusals_change_nothing(client: fenceq.Client, fields, error):
    with pytest.raises(error):
        client.enqueue("x", queue="q", now=1, **fields)
    with pytest.raises(error) as e:
        client.enqueue_many([{"id": "y", "queue": "q"}, {"id": "x", "queue": "q", **fields}], now=1)
    assert "jobs[1]" in e.value.message
    if "key" in fields:
        with pytest.raises(error):
            client.enqueue_unique("x", fields["key"], queue="q", now=1,
                                  **{k: v for k, v in fields.items() if k != "key"})
    assert client.list(now=1) == []


def test_key_limits_and_daemon_refusals_elsewhere(client: fenceq.Client):
    longest = "é" * 512  # 1024 bytes: the longest key
    assert client.enqueue_unique("x", longest, now=1) == ("x", True)
    assert [r["id"] for r in client.list(key=longest, now=1)] == ["x"]
    with pytest.raises(fenceq.InvalidArgument):
        client.list(key="", now=1)
    with pytest.raises(fenceq.BadRequest):
        client.list(key=3, now=1)
    # enqueue_and_wait takes no key (the client has no such keyword; the daemon refuses one).
    with pytest.raises(fenceq.InvalidArgument) as e:
        client._call("enqueue_and_wait", {"id": "y", "key": "k", "wait": 0, "now": 1})
    assert "key" in e.value.message
    assert client.job("y", now=1) is None


def fake_answer(fake_daemon, call, result: bytes):
    """``call(client)`` against a fake daemon that answers ``{"ok": true,
    "rid": <the request's>, "result": <result>}`` (``result``: msgpack bytes)."""
    import msgpack

    endpoint, router = fake_daemon

    def serve():
        assert router.poll(5000)
        identity, empty, request = router.recv_multipart()
        rid = msgpack.unpackb(request)["rid"]
        head = msgpack.packb({"ok": True, "rid": rid})
        # Splice "result" into the map (fixmap: one more entry).
        reply = bytes([head[0] + 1]) + head[1:] + msgpack.packb("result") + result
        router.send_multipart([identity, empty, reply])

    server = Background(serve)
    try:
        with fenceq.Client(endpoint, timeout=5) as c:
            return call(c)
    finally:
        server.result()


def test_a_daemon_that_ignores_the_key_is_unsupported(fake_daemon):
    """A daemon older than unique keys answers a keyed enqueue with a bool."""
    import msgpack

    for call, result in ((lambda c: c.enqueue_unique("a", "k"), True),
                         (lambda c: c.enqueue("a", key="k"), True),
                         (lambda c: c.enqueue_many([JobSpec("a", key="k")]), [False])):
        with pytest.raises(fenceq.UnsupportedVersion) as e:
            fake_answer(fake_daemon, call, msgpack.packb(result))
        assert "ignored the key" in e.value.message
    with pytest.raises(fenceq.BadReply):
        fake_answer(fake_daemon, lambda c: c.enqueue_unique("a", "k"), msgpack.packb({"id": "a"}))
    with pytest.raises(fenceq.BadReply):
        fake_answer(fake_daemon, lambda c: c.enqueue("a"), msgpack.packb({"id": "a", "created": True}))
    with pytest.raises(fenceq.BadReply):
        fake_answer(fake_daemon, lambda c: c.enqueue_many([JobSpec("a", key="k"), JobSpec("b")]),
                    msgpack.packb([{"id": "a", "created": True}]))
    assert fake_answer(fake_daemon, lambda c: c.enqueue_many_unique([JobSpec("a", key="k"), JobSpec("b")]),
                       msgpack.packb([{"id": "z", "created": False}, True])) == [("z", False), ("b", True)]
