"""Headers (issue 33, C3.18): a dict of str to str kept with a job (a W3C
``traceparent``, at most 4096 bytes), given back by every claim of the job
and by ``job``, only when the job has some. Against real daemons in client
clock mode; every call passes ``now``."""

from __future__ import annotations

import types
from typing import Any, Dict, List

import pytest

import fenceq
from conftest import record_requests
from fenceq import JobSpec

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE = {"traceparent": TRACEPARENT, "tracestate": "vendor=a"}


# -- the request ---------------------------------------------------------------

def test_headers_are_sent_only_when_given_after_max_runtime(client: fenceq.Client):
    """None: not sent; given: after the other fields of the job (max_runtime
    included), in the C++ encoder's order, before ``wait`` and ``now``; in every
    enqueue-like method and an enqueue_many entry (a JobSpec's last field). A
    mapping that is not a dict goes as a dict, keys and values as given."""
    sent = record_requests(client)
    assert client.enqueue("a", queue="q", now=1) is True
    assert client.enqueue("b", queue="q", group="g", max_runtime=60, headers=TRACE, now=1) is True
    assert client.enqueue_unique("c", "k", queue="q", headers=types.MappingProxyType({"x": "1"}),
                                 now=1) == ("c", True)
    assert client.enqueue_many([JobSpec("d", queue="q", headers={"y": "2"}), {"id": "e"},
                                {"id": "f", "headers": None}], now=1) == [True, True, True]
    assert client.enqueue_and_wait("g", 0, queue="q", max_runtime=30, headers={"z": "3"}, now=1) is None
    assert client.enqueue_fan_in([{"id": "h1", "headers": {"p": "1"}}], {"id": "h", "headers": {"c": "2"}},
                                 now=1) == [True, True]
    fields = [f for _, f, _ in sent]
    assert fields[0] == {"id": "a", "queue": "q", "now": 1}
    assert list(fields[1]) == ["id", "queue", "group", "max_runtime", "headers", "now"]
    assert fields[1]["headers"] == TRACE
    assert list(fields[2]) == ["id", "queue", "key", "headers", "now"]
    assert type(fields[2]["headers"]) is dict and fields[2]["headers"] == {"x": "1"}
    assert fields[3]["jobs"] == [{"id": "d", "queue": "q", "headers": {"y": "2"}}, {"id": "e"}, {"id": "f"}]
    assert list(fields[4]) == ["id", "queue", "max_runtime", "headers", "wait", "now"]
    assert fields[5]["jobs"] == [{"id": "h1", "headers": {"p": "1"}},
                                 {"id": "h", "after": ["h1"], "headers": {"c": "2"}}]
    assert JobSpec._fields[13] == "headers" and JobSpec("x").headers is None  # deadline follows
    assert fenceq.MAX_HEADERS_BYTES == 4096


# -- given back ----------------------------------------------------------------

def test_headers_come_back_with_every_claim_and_job(client: fenceq.Client):
    """C3.18 on every claim path: claim_next (one and with max),
    complete_and_claim_next's next and complete_many's next hand a job out with
    the headers it was enqueued with; job shows them; a job without any has no
    "headers" key anywhere."""
    assert client.enqueue("one", queue="h", headers=TRACE, now=1)
    assert client.enqueue("plain", queue="h", now=1)
    job = client.claim_next("h", "W", 30, now=2)
    assert job["id"] == "one" and job["headers"] == TRACE
    assert client.job("one", now=2)["headers"] == TRACE
    r = client.complete_and_claim_next("one", "W", job["fence"], "ok", "h", 30, now=3)
    assert r["completed"] is True and r["next"]["id"] == "plain"
    assert "headers" not in r["next"] and r["next"].get("headers", {}) == {}
    assert "headers" not in client.job("plain", now=3)
    assert client.job("one", now=3)["headers"] == TRACE     # still there once done

    assert client.enqueue_many([JobSpec("m1", queue="m", headers={"a": "1"}),
                                {"id": "m2", "queue": "m"},
                                {"id": "m3", "queue": "m", "headers": {"b": "", "c": "é"}}],
                               now=4) == [True, True, True]
    jobs = client.claim_next("m", "W", 30, max=2, now=5)
    assert [(j["id"], j.get("headers")) for j in jobs] == [("m1", {"a": "1"}), ("m2", None)]
    done = client.complete_many([(j["id"], "W", j["fence"], "ok") for j in jobs],
                                next=("m", 30, 5), now=6)
    assert done.completed == [True, True]
    assert [(j["id"], j["headers"]) for j in done.next] == [("m3", {"b": "", "c": "é"})]


def test_headers_are_kept_across_attempts_and_by_await(client: fenceq.Client):
    """A failed job claimed again still has its headers; await_job and
    enqueue_and_wait answer the record with them."""
    assert client.enqueue("r", queue="retry", headers=TRACE, now=1)
    first = client.claim_next("retry", "W", 30, now=2)
    assert client.fail("r", "W", first["fence"], "boom", retry_in=0, now=3)
    second = client.claim_next("retry", "W", 30, now=4)
    assert second["attempts"] == 2 and second["headers"] == TRACE
    assert client.complete("r", "W", second["fence"], "ok", now=5)
    assert client.await_job("r", 0, now=6)["headers"] == TRACE
    record = client.enqueue_and_wait("r", 0, headers={"ignored": "x"}, now=7)  # exists: unchanged
    assert record["state"] == "done" and record["headers"] == TRACE


def test_a_replacing_enqueue_leaves_the_headers_as_they_were(client: fenceq.Client):
    """PROTOCOL.md: a keyed enqueue that replaces a waiting job (on_conflict
    "replace") changes its payload and the like, not its headers."""
    assert client.enqueue_unique("k1", "key", queue="d", payload="v1", headers={"t": "1"}, now=1) == ("k1", True)
    assert client.enqueue_unique("k2", "key", queue="d", payload="v2", headers={"t": "2"},
                                 on_conflict="replace", now=2) == ("k1", False)
    job = client.claim_next("d", "W", 30, now=3)
    assert (job["id"], job["payload"], job["headers"]) == ("k1", "v2", {"t": "1"})


def test_empty_headers_are_no_headers(client: fenceq.Client):
    """``{}`` is sent as given and stored as none: no "headers" key comes back."""
    sent = record_requests(client)
    assert client.enqueue("e", queue="e", headers={}, now=1)
    assert sent[0][1]["headers"] == {}
    assert "headers" not in client.claim_next("e", "W", 30, now=2)
    assert "headers" not in client.job("e", now=2)


def test_4096_bytes_of_keys_and_values_are_taken(client: fenceq.Client):
    """The limit counts UTF-8 bytes of keys and values: exactly 4096 is taken."""
    value = "é" * ((4096 - 1) // 2) + "x"       # 2 bytes each: 4094 + 1, and the key's 1
    headers = {"k": value}
    assert sum(len(k.encode()) + len(v.encode()) for k, v in headers.items()) == 4096
    assert client.enqueue("big", queue="b", headers=headers, now=1)
    assert client.claim_next("b", "W", 30, now=2)["headers"] == headers


# -- bad input -----------------------------------------------------------------

@pytest.mark.parametrize("headers, error", [
    ({"a": 1}, fenceq.BadRequest),                      # a value that is not a str
    ({1: "a"}, fenceq.BadRequest),                      # a key that is not a str
    (["traceparent", TRACEPARENT], fenceq.BadRequest),  # not a map
    ("traceparent", fenceq.BadRequest),
    ({"k": "x" * 5000}, fenceq.InvalidArgument),        # more than 4096 bytes
    ({"a": "x" * 2048, "b": "y" * 2048}, fenceq.InvalidArgument),   # 4098 bytes in all
    ({"": "x"}, fenceq.InvalidArgument),                # an empty key
], ids=["value-int", "key-int", "list", "str", "5000-bytes", "4098-bytes-in-all", "empty-key"])
def test_bad_headers_are_refused_and_nothing_changes(client: fenceq.Client, headers: Any, error: type):
    """The daemon judges the headers (the client sends them as given): the
    wrong type is ``bad_request``, an empty key or too many bytes
    ``invalid_argument`` (a ValueError); in enqueue, enqueue_unique,
    enqueue_and_wait and an enqueue_many entry, which refuses the whole batch.
    Nothing is enqueued."""
    assert client.enqueue("keep", queue="bad", now=1)
    before = client.stats(now=1)["queues"]["bad"]
    with pytest.raises(error):
        client.enqueue("x1", queue="bad", headers=headers, now=2)
    with pytest.raises(error):
        client.enqueue_unique("x2", "k", queue="bad", headers=headers, now=2)
    with pytest.raises(error):
        client.enqueue_and_wait("x3", 0, queue="bad", headers=headers, now=2)
    with pytest.raises(error) as e:
        client.enqueue_many([{"id": "x4", "queue": "bad"}, {"id": "x5", "queue": "bad", "headers": headers}],
                            now=2)
    assert "jobs[1]" in e.value.message
    if error is fenceq.InvalidArgument:
        assert isinstance(e.value, ValueError)
    for id in ("x1", "x2", "x3", "x4", "x5"):
        assert client.job(id, now=3) is None
    assert client.stats(now=3)["queues"]["bad"]["ready"] == before["ready"] == 1


# -- the queue worker ----------------------------------------------------------

def _run_all(daemon, queue: str, **worker_options: Any) -> List[Dict[str, Any]]:
    seen: List[Dict[str, Any]] = []
    clock = iter(range(100, 10_000))

    def handler(job: fenceq.Job) -> str:
        seen.append({"id": job.id, "headers": job.headers})
        return job.headers.get("traceparent", "none")

    with fenceq.QueueWorker(daemon.endpoint, queue, ttl=30, wait=0.05, clock=lambda: next(clock),
                            **worker_options) as w:
        assert w.run(handler, max_jobs=3, idle_exit=2) == 3
    return seen


@pytest.mark.parametrize("prefetch", [1, 3], ids=["one-at-a-time", "prefetch"])
def test_the_queue_worker_hands_the_headers_to_the_function(daemon, client: fenceq.Client, prefetch: int):
    """QueueWorker's Job has ``.headers``, the dict the job was enqueued with
    ({} for a job without any), on every path that hands a job over: a
    claim_next, the job complete_and_claim_next claimed ahead, a claim_next
    with max and complete_many's next. The by-hand trace context: the
    enqueuer puts its traceparent in, the function reads it."""
    assert client.enqueue_many([{"id": "w1", "queue": "work", "headers": {"traceparent": TRACEPARENT}},
                                {"id": "w2", "queue": "work"},
                                {"id": "w3", "queue": "work", "headers": {"tenant": "42"}}],
                               now=1) == [True, True, True]
    seen = _run_all(daemon, "work", prefetch=prefetch)
    assert seen == [{"id": "w1", "headers": {"traceparent": TRACEPARENT}},
                    {"id": "w2", "headers": {}},
                    {"id": "w3", "headers": {"tenant": "42"}}]
    assert client.job("w1", now=200)["result"] == TRACEPARENT
    assert client.job("w2", now=200)["result"] == "none"


def test_job_headers_are_a_dict_of_their_own():
    """Job.headers defaults to a new empty dict per job (not shared)."""
    a = fenceq.Job(id="a", owner="o", fence=1, ttl=1)
    b = fenceq.Job(id="b", owner="o", fence=1, ttl=1)
    a.headers["x"] = "1"
    assert b.headers == {}
