"""The work queue ops of fenceq.Client (protocol/PROTOCOL.md, "The work queue"):
enqueue's new fields, claim_next (and its long-poll), complete_next
(``complete_and_claim_next``), fail, check, retry, list, stats, purge, metrics. Against real daemons; time is the client clock with an
explicit ``now`` unless a test says otherwise."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import msgpack
import pytest
import zmq

import fenceq
from fenceq.client import _wait_extension
from conftest import Background, Daemon, jobs_by_id, record_requests, wait_until, waiting_claims


# -- enqueue ------------------------------------------------------------------


def test_plain_enqueue_sends_only_the_id_and_lands_in_the_default_queue(client: fenceq.Client):
    """enqueue(id) is the version-1 request, unchanged; the job gets every default."""
    sent = record_requests(client)
    assert client.enqueue("plain") is True
    assert sent[0][:2] == ("enqueue", {"id": "plain"})
    job = jobs_by_id(client, now=1)["plain"]
    assert isinstance(job.pop("created"), float)  # the daemon's latest client time
    assert job == {"id": "plain", "queue": "default", "state": "ready", "priority": 0, "attempts": 0,
                   "max_attempts": 25, "fence": 0, "owner": None, "until": 0.0, "not_before": 0.0,
                   "error": None}
    assert client.claim_next("default", "w", 10, now=1) == {"id": "plain", "fence": 1, "payload": None,
                                                          "attempts": 1}


def test_enqueue_sends_each_given_field_under_its_wire_name(client: fenceq.Client):
    sent = record_requests(client)
    assert client.enqueue("full", queue="q", payload=b"\x00", priority=-3, delay=2.5, max_attempts=4,
                          now=10) is True
    assert sent[0][1] == {"id": "full", "queue": "q", "payload": b"\x00", "priority": -3, "delay": 2.5,
                          "max_attempts": 4, "now": 10}
    job = jobs_by_id(client, now=10)["full"]
    assert (job["queue"], job["state"], job["priority"], job["max_attempts"], job["not_before"]) == \
        ("q", "delayed", -3, 4, 12.5)


def test_repeated_enqueue_changes_nothing(client: fenceq.Client):
    """C3.1: a second enqueue of an id answers False whatever its fields say, and
    changes nothing: not the queue, payload, priority, delay, nor the lease."""
    assert client.enqueue("once", queue="q", payload="first", priority=1, now=100) is True
    fence = client.claim_next("q", "w", 30, now=100)["fence"]
    before = jobs_by_id(client, now=101)["once"]
    assert client.enqueue("once", queue="other", payload="second", priority=9, delay=50, max_attempts=1,
                          now=101) is False
    assert jobs_by_id(client, now=101)["once"] == before
    assert client.check("once", "w", fence, now=101) is True
    assert client.release("once", "w", fence)
    assert client.claim_next("q", "w", 30, now=102)["payload"] == "first"


@pytest.mark.parametrize("payload, expected", [
    (b"\x00\xffbinary", b"\x00\xffbinary"),
    (bytearray(b"mutable"), b"mutable"),
    (memoryview(b"view"), b"view"),
    (b"", b""),
    ("text: h\u00e9llo \u2603", "text: h\u00e9llo \u2603"),
    ("", ""),
    (None, None),
], ids=["bytes", "bytearray", "memoryview", "empty-bytes", "str", "empty-str", "none"])
def test_payload_round_trip_keeps_bytes_and_str_apart(daemon: Daemon, payload, expected):
    """bytes travel as msgpack bin and come back as bytes; str as str."""
    with daemon.client() as c:
        assert c.enqueue("p", queue="pl", payload=payload, now=1)
        got = c.claim_next("pl", "w", 10, now=1)["payload"]
        assert type(got) is type(expected) and got == expected


def test_payload_limit_is_256_kib(client: fenceq.Client):
    """Exactly 256 KiB is accepted and given back whole; one byte more is
    invalid_argument (a ValueError), from the client before sending and from the
    daemon when sent anyway; a str counts its UTF-8 bytes. Nothing is created."""
    limit = fenceq.MAX_PAYLOAD_BYTES
    assert limit == 256 * 1024
    big = bytes(range(256)) * (limit // 256)
    assert client.enqueue("max", queue="big", payload=big, now=1) is True
    assert client.claim_next("big", "w", 10, now=1)["payload"] == big
    assert client.enqueue("max-str", queue="big", payload="x" * limit, now=1) is True

    sent = record_requests(client)
    for payload in (big + b"!", "\u00e9" * (limit // 2 + 1)):   # 262146 UTF-8 bytes
        with pytest.raises(ValueError) as e:
            client.enqueue("over", payload=payload, now=1)
        assert isinstance(e.value, fenceq.InvalidArgument) and "payload" in e.value.message
    assert sent == []                                            # refused before sending
    # The daemon's own check, with the same request sent raw.
    with pytest.raises(fenceq.InvalidArgument) as e:
        client._call("enqueue", {"id": "over", "payload": big + b"!", "now": 1})
    assert "payload" in e.value.message
    with pytest.raises(fenceq.InvalidArgument):
        client._call("enqueue", {"id": "over", "payload": "x" * (limit + 1), "now": 1})
    assert client.state("over") is None


# -- claim_next ---------------------------------------------------------------


def test_claim_next_priority_then_enqueue_order(client: fenceq.Client):
    """Higher priority first; equal priorities in enqueue order (not id order);
    other queues untouched."""
    for id, priority in [("m", 0), ("k", 5), ("a", 0), ("z", 5), ("b", -1), ("c", 0)]:
        assert client.enqueue(id, queue="work", priority=priority, now=1)
    assert client.enqueue("elsewhere", queue="other", priority=100, now=1)
    order = []
    for t in range(7):
        job = client.claim_next("work", "w", 100, now=2 + t)
        if job is None:
            break
        order.append(job["id"])
        assert job["fence"] == 1 and job["attempts"] == 1
    assert order == ["k", "z", "m", "a", "c", "b"]
    assert jobs_by_id(client, queue="other", now=10)["elsewhere"]["state"] == "ready"


def test_claim_next_refusals(client: fenceq.Client):
    """None for an unknown or empty queue, when every job is leased, done, or
    delayed; a leased job comes back when its lease ends (until <= now)."""
    assert client.claim_next("nothing-here", "w", 10, now=100) is None
    assert client.enqueue("l", queue="r", now=100)
    job = client.claim_next("r", "w", 10, now=100)
    assert job["id"] == "l"
    assert client.claim_next("r", "w2", 10, now=109.9) is None          # leased
    again = client.claim_next("r", "w2", 10, now=110)                   # ended: until == now
    assert again == {"id": "l", "fence": 2, "payload": None, "attempts": 2}
    assert client.complete("l", "w2", 2, "done", now=111)
    assert client.claim_next("r", "w3", 10, now=500) is None            # done


def test_claim_next_argument_errors(client: fenceq.Client):
    with pytest.raises(fenceq.InvalidArgument, match="ttl"):
        client.claim_next("q", "w", 0, now=1)
    with pytest.raises(fenceq.InvalidArgument, match="queue"):
        client.claim_next("", "w", 10, now=1)
    with pytest.raises(fenceq.InvalidArgument, match="wait"):
        client.claim_next("q", "w", 10, wait=3601, now=1)
    with pytest.raises(fenceq.InvalidArgument, match="wait"):
        client.claim_next("q", "w", 10, wait=-1, now=1)
    with pytest.raises(fenceq.InvalidArgument, match="now"):
        client.claim_next("q", "w", 10)                                 # client clock needs now
    with pytest.raises(fenceq.BadRequest):
        client.claim_next("q", "w", 10, wait="soon", now=1)


def test_delay(client: fenceq.Client):
    """Not claimable (by claim_next nor by claim) before now + delay; 'delayed'
    meanwhile. Without now, the delay counts from the highest now seen."""
    assert client.enqueue("later", queue="d", delay=10, now=100)
    assert jobs_by_id(client, now=105)["later"]["state"] == "delayed"
    assert client.claim_next("d", "w", 5, now=109.9) is None
    assert client.claim("later", "w", 5, now=109.9) is None
    assert client.claim_next("d", "w", 5, now=110)["id"] == "later"

    assert client.enqueue("no-now", queue="d2", delay=10)               # counts from 110
    assert jobs_by_id(client, now=110)["no-now"]["not_before"] == 120.0
    assert client.claim_next("d2", "w", 5, now=119) is None
    assert client.claim_next("d2", "w", 5, now=120)["id"] == "no-now"


# -- complete_next (Client.complete_and_claim_next) -----------------------------


def test_complete_and_claim_next_completes_and_claims_in_one_round_trip(client: fenceq.Client):
    """One request (op complete_next, every field under its wire name): the job is
    done with its result, and the next job of the queue is leased to the same
    owner, payload type kept."""
    assert client.enqueue("c1", queue="cn", payload="first", now=10)
    assert client.enqueue("c2", queue="cn", payload=b"\x00bin", now=10)
    assert client.enqueue("c3", queue="cn", now=10)
    assert client.enqueue("other", queue="elsewhere", priority=99, now=10)
    job = client.claim_next("cn", "w", 30, now=10)
    sent = record_requests(client)
    reply = client.complete_and_claim_next("c1", "w", job["fence"], "r1", "cn", 30, now=11)
    assert reply == {"completed": True, "next": {"id": "c2", "fence": 1, "payload": b"\x00bin", "attempts": 1}}
    assert [(op, fields) for op, fields, _ in sent] == [
        ("complete_next", {"id": "c1", "owner": "w", "fence": 1, "result": "r1", "queue": "cn", "ttl": 30,
                           "now": 11})]
    assert client.state("c1") == {"id": "c1", "owner": "w", "until": 40.0, "fence": 1, "result": "r1",
                                  "done": True}
    rows = jobs_by_id(client, now=11)
    assert (rows["c2"]["state"], rows["c2"]["owner"], rows["c2"]["until"]) == ("leased", "w", 41.0)
    assert rows["c3"]["state"] == "ready" and rows["other"]["state"] == "ready"
    # A None result is stored as nil; the last job leaves next None.
    assert client.complete_and_claim_next("c2", "w", 1, None, "cn", 30, now=12)["next"]["id"] == "c3"
    assert client.state("c2")["result"] is None and client.state("c2")["done"] is True
    assert client.complete_and_claim_next("c3", "w", 1, "r3", "cn", 30, now=13) == \
        {"completed": True, "next": None}


def test_complete_and_claim_next_stale_fence_is_refused_but_next_is_still_claimed(client: fenceq.Client):
    """C3.5 as for complete: a stale fence (or owner) completes nothing and keeps the
    job as it is, yet the next job of the queue is claimed all the same."""
    assert client.enqueue("s1", queue="sq", now=100)
    assert client.enqueue("s2", queue="sq", payload="p2", now=100)
    assert client.claim_next("sq", "w", 30, now=100)["id"] == "s1"       # fence 1
    assert client.release("s1", "w", 1)
    assert client.claim("s1", "w2", 30, now=101) == 2                    # a newer lease
    before = client.state("s1")
    reply = client.complete_and_claim_next("s1", "w", 1, "stale", "sq", 30, now=102)
    assert reply == {"completed": False, "next": {"id": "s2", "fence": 1, "payload": "p2", "attempts": 1}}
    assert client.state("s1") == before and before["done"] is False and before["result"] is None
    assert jobs_by_id(client, now=102)["s2"]["owner"] == "w"
    # The current lease still completes; a done job is refused too (next: None, queue empty).
    assert client.complete_and_claim_next("s1", "w2", 2, "fresh", "sq", 30, now=103) == \
        {"completed": True, "next": None}
    assert client.complete_and_claim_next("s1", "w2", 2, "again", "sq", 30, now=104) == \
        {"completed": False, "next": None}
    assert client.state("s1")["result"] == "fresh"


def test_complete_and_claim_next_after_the_lease_ended_can_claim_the_same_job(client: fenceq.Client):
    """"whatever the complete's outcome": an expired lease's completion is refused
    (until == now has ended), and the claim that follows may take that very job,
    with the next fence."""
    assert client.enqueue("e1", queue="eq", payload="x", now=200)
    job = client.claim_next("eq", "w", 10, now=200)
    reply = client.complete_and_claim_next("e1", "w", job["fence"], "late", "eq", 10, now=210)
    assert reply == {"completed": False, "next": {"id": "e1", "fence": 2, "payload": "x", "attempts": 2}}
    assert client.state("e1")["done"] is False


def test_complete_and_claim_next_empty_queue(client: fenceq.Client):
    """Nothing claimable in the queue (none, leased, delayed, other queues): next is
    None, and there is no wait (it answers at once)."""
    assert client.enqueue("only", queue="eq2", now=300)
    assert client.enqueue("later", queue="eq2", delay=60, now=300)
    assert client.enqueue("not-this-queue", queue="zz", now=300)
    job = client.claim_next("eq2", "w", 30, now=300)
    start = time.monotonic()
    assert client.complete_and_claim_next("only", "w", job["fence"], "ok", "eq2", 30, now=301) == \
        {"completed": True, "next": None}
    assert time.monotonic() - start < 1
    assert client.complete_and_claim_next("missing", "w", 1, "x", "never-used", 30, now=301) == \
        {"completed": False, "next": None}
    assert client.stats()["waiting_claims"] == 0                         # nothing was parked


def test_complete_and_claim_next_argument_errors_change_nothing(client: fenceq.Client):
    """A refused request applies neither half: the job is not completed."""
    assert client.enqueue("a", queue="aq", now=1)
    assert client.enqueue("b", queue="aq", now=1)
    fence = client.claim_next("aq", "w", 30, now=1)["fence"]
    with pytest.raises(fenceq.InvalidArgument, match="ttl"):
        client.complete_and_claim_next("a", "w", fence, "r", "aq", 0, now=2)
    with pytest.raises(fenceq.InvalidArgument, match="queue"):
        client.complete_and_claim_next("a", "w", fence, "r", "", 30, now=2)
    with pytest.raises(fenceq.InvalidArgument, match="now"):
        client.complete_and_claim_next("a", "w", fence, "r", "aq", 30)    # client clock needs now
    with pytest.raises(fenceq.BadRequest):
        client.complete_and_claim_next("a", "w", float(fence), "r", "aq", 30, now=2)
    with pytest.raises(fenceq.BadRequest):
        client.complete_and_claim_next("a", "w", fence, 42, "aq", 30, now=2)
    assert client.state("a")["done"] is False and client.check("a", "w", fence, now=2) is True
    assert jobs_by_id(client, now=2)["b"]["state"] == "ready"


def test_complete_and_claim_next_server_clock(server_daemon: Daemon):
    """C2.3: no now with the server clock."""
    with server_daemon.client() as c:
        assert c.enqueue("s1", queue="q") and c.enqueue("s2", queue="q")
        job = c.claim_next("q", "w", 10)
        with pytest.raises(fenceq.InvalidArgument, match="now"):
            c.complete_and_claim_next(job["id"], "w", job["fence"], "r", "q", 10, now=1)
        reply = c.complete_and_claim_next(job["id"], "w", job["fence"], "r", "q", 10)
        assert reply["completed"] is True and reply["next"]["id"] == "s2"


@pytest.mark.parametrize("result", [
    None, True, [], {"completed": True}, {"next": None}, {"completed": 1, "next": None},
    {"completed": True, "next": "c2"}, {"completed": True, "next": {"id": "c2", "fence": 1}},
    {"completed": True, "next": {"id": "c2", "fence": 1.0, "payload": None, "attempts": 1}},
    {"completed": False, "next": {"id": b"c2", "fence": 1, "payload": None, "attempts": 1}},
    {"completed": False, "next": {"id": "c2", "fence": 1, "payload": 7, "attempts": 1}},
])
def test_complete_and_claim_next_checks_the_reply_shape(fake_daemon, result: Any):
    """A reply that is not {completed: bool, next: nil | job map} is bad_reply,
    never a value the caller would misread (a fake daemon answers it)."""
    endpoint, router = fake_daemon

    def serve():
        assert router.poll(5000)
        identity, empty, payload = router.recv_multipart()
        request = msgpack.unpackb(payload, raw=False)
        assert request["op"] == "complete_next"
        router.send_multipart([identity, empty, msgpack.packb({"ok": True, "rid": request["rid"],
                                                               "result": result}, use_bin_type=True)])

    server = Background(serve)
    with fenceq.Client(endpoint, timeout=5) as c:
        with pytest.raises(fenceq.BadReply, match="complete_next") as e:
            c.complete_and_claim_next("c1", "w", 1, "r", "q", 10)
        assert e.value.code == "bad_reply" and isinstance(e.value, fenceq.FenceqError)
    server.result()


# -- fail, dead, retry ----------------------------------------------------------


def test_fail_with_retry_in_then_reclaim_with_a_larger_fence(client: fenceq.Client):
    assert client.enqueue("f", queue="q", payload=b"in", now=100)
    first = client.claim_next("q", "w", 30, now=100)
    assert client.fail("f", "w", first["fence"], "disk full", retry_in=5, now=101) is True
    job = jobs_by_id(client, now=101)["f"]
    assert (job["state"], job["error"], job["owner"], job["not_before"]) == ("delayed", "disk full", None, 106.0)
    assert client.check("f", "w", first["fence"], now=101) is False     # the lease ended
    assert client.claim_next("q", "w2", 30, now=105.9) is None
    second = client.claim_next("q", "w2", 30, now=106)
    assert second == {"id": "f", "fence": first["fence"] + 1, "payload": b"in", "attempts": 2}


def test_fail_default_backoff_doubles(client: fenceq.Client):
    """retry_in left out: min(2 ** (attempts - 1), 3600) seconds."""
    assert client.enqueue("b", queue="q", now=0)
    now = 0.0
    for attempts, backoff in [(1, 1), (2, 2), (3, 4), (4, 8)]:
        job = client.claim_next("q", "w", 30, now=now)
        assert job["attempts"] == attempts
        assert client.fail("b", "w", job["fence"], f"attempt {attempts}", now=now)
        assert jobs_by_id(client, now=now)["b"]["not_before"] == now + backoff
        now += backoff


def test_fail_refusals_change_nothing(client: fenceq.Client):
    """False for a wrong owner, a wrong fence, an ended lease (now == until), a
    done or missing job; the job is left exactly as it was."""
    assert client.enqueue("r", queue="q", now=100)
    fence = client.claim_next("q", "w", 10, now=100)["fence"]
    before = jobs_by_id(client, now=100)["r"]
    assert client.fail("r", "intruder", fence, "x", now=101) is False
    assert client.fail("r", "w", fence + 1, "x", now=101) is False
    assert client.fail("r", "w", fence - 1, "x", now=101) is False
    assert client.fail("r", "w", fence, "x", now=110) is False          # until == now: ended
    assert client.fail("missing", "w", 1, "x", now=110) is False
    assert jobs_by_id(client, now=100)["r"] == before
    fence = client.claim_next("q", "w", 10, now=110)["fence"]
    assert client.complete("r", "w", fence, "ok", now=111)
    assert client.fail("r", "w", fence, "x", now=112) is False          # done
    assert client.state("r")["result"] == "ok" and jobs_by_id(client, now=112)["r"]["error"] is None


def test_fail_argument_errors(client: fenceq.Client):
    assert client.enqueue("e", queue="q", now=1)
    fence = client.claim_next("q", "w", 10, now=1)["fence"]
    with pytest.raises(fenceq.InvalidArgument, match="retry_in"):
        client.fail("e", "w", fence, "x", retry_in=-1, now=2)
    with pytest.raises(fenceq.InvalidArgument, match="error"):
        client.fail("e", "w", fence, "x" * (fenceq.MAX_ERROR_BYTES + 1), now=2)
    with pytest.raises(fenceq.BadRequest):
        client.fail("e", "w", fence, None, now=2)
    assert client.check("e", "w", fence, now=2) is True                 # C3.8: nothing changed
    assert client.fail("e", "w", fence, "x" * fenceq.MAX_ERROR_BYTES, now=2) is True


def test_max_attempts_dead_then_retry_revives_with_a_larger_fence(client: fenceq.Client):
    """Once max_attempts claims are used the job is dead: claim_next and claim are
    refused until retry(id); then attempts start over and the fence continues."""
    assert client.enqueue("d", queue="q", payload="p", max_attempts=2, now=100)
    assert client.retry("d") is False                                   # not dead
    j1 = client.claim_next("q", "w", 10, now=100)
    assert client.fail("d", "w", j1["fence"], "first", retry_in=0, now=101)
    j2 = client.claim_next("q", "w", 10, now=101)
    assert (j2["fence"], j2["attempts"]) == (2, 2)
    assert client.fail("d", "w", j2["fence"], "second", retry_in=0, now=102)
    job = jobs_by_id(client, now=102)["d"]
    assert (job["state"], job["error"], job["attempts"]) == ("dead", "second", 2)
    assert client.stats(now=102)["queues"]["q"]["dead"] == 1
    assert client.claim_next("q", "w", 10, now=200) is None
    assert client.claim("d", "w", 10, now=200) is None
    assert client.state("d")["fence"] == 2

    assert client.retry("d") is True
    assert client.retry("d") is False                                   # not dead any more
    assert client.retry("missing") is False
    j3 = client.claim_next("q", "w", 10, now=200)
    assert j3 == {"id": "d", "fence": 3, "payload": "p", "attempts": 1}


def test_last_attempt_expiring_makes_the_job_dead(client: fenceq.Client):
    assert client.enqueue("x", queue="q", max_attempts=1, now=100)
    fence = client.claim_next("q", "w", 10, now=100)["fence"]
    assert client.claim_next("q", "w2", 10, now=110) is None
    assert jobs_by_id(client, now=110)["x"]["state"] == "dead"
    assert client.complete("x", "w", fence, "late", now=111) is False
    assert client.retry("x") is True
    assert client.claim_next("q", "w2", 10, now=111)["fence"] == fence + 1


# -- check ------------------------------------------------------------------------


def test_check_answers_whether_the_lease_is_current_and_changes_nothing(client: fenceq.Client):
    assert client.check("missing", "w", 1, now=100) is False
    assert client.enqueue("c", queue="q", now=100)
    assert client.check("c", "w", 0, now=100) is False                  # never claimed
    fence = client.claim_next("q", "w", 10, now=100)["fence"]
    before = client.state("c")
    assert client.check("c", "w", fence, now=109.9) is True
    assert client.check("c", "other", fence, now=101) is False
    assert client.check("c", "w", fence + 1, now=101) is False
    assert client.check("c", "w", fence, now=110) is False              # until == now
    assert client.state("c") == before
    fence2 = client.claim("c", "w2", 10, now=110)
    assert client.check("c", "w", fence, now=111) is False              # stale token
    assert client.check("c", "w2", fence2, now=111) is True
    assert client.complete("c", "w2", fence2, "done", now=112)
    assert client.check("c", "w2", fence2, now=112) is False            # done
    with pytest.raises(fenceq.InvalidArgument, match="now"):
        client.check("c", "w2", fence2)
    with pytest.raises(fenceq.BadRequest):
        client.check("c", "w2", 2.0, now=113)


# -- operator ops ------------------------------------------------------------------


def test_list_filters_paging_and_shape(client: fenceq.Client):
    for i in range(7):
        assert client.enqueue(f"j{i}", queue="a" if i % 2 else "b", now=100)
    assert client.enqueue("j9", queue="a", delay=50, now=100)
    fence = client.claim("j0", "w", 10, now=100)
    assert client.complete("j0", "w", fence, "r", now=101)
    client.claim("j1", "w", 10, now=101)

    everything = client.list(now=102)
    assert [j["id"] for j in everything] == ["j0", "j1", "j2", "j3", "j4", "j5", "j6", "j9"]
    for job in everything:
        assert set(job) == {"id", "queue", "state", "priority", "attempts", "max_attempts", "fence",
                            "owner", "until", "not_before", "error", "created"}
        assert job["created"] == 100.0  # when it was enqueued (the client clock here)
        assert job["state"] in fenceq.JOB_STATES
    states = {j["id"]: j["state"] for j in everything}
    assert (states["j0"], states["j1"], states["j2"], states["j9"]) == ("done", "leased", "ready", "delayed")
    assert [j["id"] for j in client.list(queue="a", now=102)] == ["j1", "j3", "j5", "j9"]
    assert [j["id"] for j in client.list(queue="b", state="ready", now=102)] == ["j2", "j4", "j6"]
    assert client.list(state="dead", now=102) == []
    # Paging: the last id of a page is the next page's `after`.
    pages, after = [], None
    while True:
        page = client.list(limit=3, after=after, now=102)
        if not page:
            break
        pages.append([j["id"] for j in page])
        after = page[-1]["id"]
    assert pages == [["j0", "j1", "j2"], ["j3", "j4", "j5"], ["j6", "j9"]]
    # The builtin list is untouched by the method of the same name.
    assert list("ab") == ["a", "b"]


def test_list_by_age_and_prefix_pages_through_every_job_once(client: fenceq.Client):
    # Enqueued in an order unlike their ids, two at the same time (ties go by id).
    for job_id, at in [("m-5", 10), ("z-1", 11), ("m-1", 12), ("a-9", 12), ("m-3", 13)]:
        assert client.enqueue(job_id, queue="age", now=at)
    assert [j["id"] for j in client.list(order="created", now=20)] == \
        ["m-5", "z-1", "a-9", "m-1", "m-3"]
    assert [j["id"] for j in client.list(order="-created", now=20)] == \
        ["m-3", "m-1", "a-9", "z-1", "m-5"]
    assert [j["created"] for j in client.list(order="created", now=20)] == \
        [10.0, 11.0, 12.0, 12.0, 13.0]

    def pages(**kwargs):
        out, after, after_created = [], None, None
        while True:
            page = client.list(limit=2, after=after, after_created=after_created, now=20,
                               **kwargs)
            if not page:
                return out
            out.append([j["id"] for j in page])
            after = page[-1]["id"]
            if kwargs.get("order", "id") != "id":
                after_created = page[-1]["created"]
    assert pages(order="created") == [["m-5", "z-1"], ["a-9", "m-1"], ["m-3"]]
    assert pages(order="-created") == [["m-3", "m-1"], ["a-9", "z-1"], ["m-5"]]
    assert pages(prefix="m-") == [["m-1", "m-3"], ["m-5"]]
    assert pages(prefix="m-", order="-created") == [["m-3", "m-1"], ["m-5"]]
    assert client.list(prefix="q", now=20) == []
    # The cursor is both keys in created order, neither in id order.
    with pytest.raises(fenceq.InvalidArgument, match="after_created"):
        client.list(order="created", after="m-5", now=20)
    with pytest.raises(fenceq.InvalidArgument, match="after_created"):
        client.list(after="m-5", after_created=10.0, now=20)
    with pytest.raises(fenceq.InvalidArgument, match="order"):
        client.list(order="age", now=20)


def test_list_argument_errors(client: fenceq.Client):
    for kwargs, field in [({"state": "sleeping"}, "state"), ({"limit": 0}, "limit"),
                          ({"limit": 1001}, "limit"), ({"queue": ""}, "queue"),
                          ({"queue": "q" * 257}, "queue")]:
        with pytest.raises(fenceq.InvalidArgument) as e:
            client.list(**kwargs)
        assert field in e.value.message, kwargs
    with pytest.raises(fenceq.BadRequest):
        client.list(limit=1.5)
    assert len(client.list(limit=1000)) == 0


def test_stats_shape_and_counts(client: fenceq.Client):
    assert client.enqueue("ready-1", queue="s", now=100)
    assert client.enqueue("ready-2", queue="s", now=104)
    assert client.enqueue("later", queue="s", delay=60, now=104)
    assert client.enqueue("leased", queue="t", now=104)
    client.claim_next("t", "w", 30, now=104)
    stats = client.stats(now=110)
    assert set(stats) == {"queues", "requests", "commits", "batches", "failed_commits", "mean_batch",
                          "waiting_claims", "uptime", "writes"}
    zeros = {"claimed": 0, "completed": 0, "failed": 0, "retried": 0, "dead": 0, "expired": 0,
             "removed": 0, "refused": {"renew": 0, "complete": 0, "release": 0, "fail": 0}}
    assert stats["queues"]["s"] == {"ready": 2, "delayed": 1, "leased": 0, "done": 0, "dead": 0,
                                    "cancelled": 0, "oldest_ready_age": 10.0, "totals": zeros}
    assert stats["queues"]["t"]["leased"] == 1
    assert stats["queues"]["t"]["totals"] == {**zeros, "claimed": 1}
    for key in ("requests", "commits", "batches", "failed_commits", "waiting_claims"):
        assert type(stats[key]) is int and stats[key] >= 0, key
    assert stats["requests"] >= 6 and stats["waiting_claims"] == 0
    assert isinstance(stats["mean_batch"], (int, float)) and isinstance(stats["uptime"], float)


def test_stats_counts_fenced_writes_applied_and_refused(client: fenceq.Client):
    """A stale write is refused and counted under its op; batch items one each."""
    before = client.stats(now=1)["writes"]
    assert set(before) == {"renew", "complete", "release", "fail"}
    assert client.enqueue("fw1", queue="fw", now=1) and client.enqueue("fw2", queue="fw", now=1)
    f1 = client.claim("fw1", "a", 30, now=2)
    f2 = client.claim("fw2", "a", 30, now=2)
    assert client.renew("fw1", "b", f1, 30, now=3) is False        # another owner
    assert client.complete("fw1", "a", f1 + 1, "x", now=3) is False  # a fence never handed out
    assert client.complete_many([{"id": "fw1", "owner": "a", "fence": f1},
                                 {"id": "fw2", "owner": "a", "fence": f2 + 5}], now=4) == [True, False]
    after = client.stats(now=5)["writes"]
    delta = {op: {k: after[op][k] - before[op][k] for k in ("applied", "refused")} for op in after}
    assert delta == {"renew": {"applied": 0, "refused": 1}, "complete": {"applied": 1, "refused": 2},
                     "release": {"applied": 0, "refused": 0}, "fail": {"applied": 0, "refused": 0}}
    lines = client.metrics(now=6).splitlines()
    refused = after["complete"]["refused"]
    assert f'fenceq_fenced_writes_total{{op="complete",outcome="refused"}} {refused}' in lines


def test_stats_counts_per_queue_a_refused_write_in_its_queue(client: fenceq.Client):
    """A stale complete is counted for its job's queue (stats' totals and
    /metrics); a write on a missing id only in the global writes."""
    assert client.enqueue("pq1", queue="pq-a", now=1) and client.enqueue("pq2", queue="pq-b", now=1)
    f1 = client.claim("pq1", "a", 10, now=2)
    assert client.claim_next("pq-a", "b", 10, now=20)["fence"] == f1 + 1  # a's lease ran out
    assert client.complete("pq1", "a", f1, "late", now=21) is False       # a woke up: refused
    assert client.complete("missing", "a", 1, "x", now=21) is False
    stats = client.stats(now=22)
    totals = stats["queues"]["pq-a"]["totals"]
    assert (totals["claimed"], totals["expired"], totals["completed"]) == (2, 1, 0)
    assert totals["refused"] == {"renew": 0, "complete": 1, "release": 0, "fail": 0}
    assert stats["queues"]["pq-b"]["totals"]["refused"]["complete"] == 0
    assert stats["writes"]["complete"]["refused"] == 2  # the missing id's too
    lines = client.metrics(now=23).splitlines()
    assert '# TYPE fenceq_stale_writes_refused_total counter' in lines
    assert 'fenceq_stale_writes_refused_total{queue="pq-a",op="complete"} 1' in lines
    assert 'fenceq_leases_expired_total{queue="pq-a"} 1' in lines


def test_metrics_is_prometheus_text(client: fenceq.Client):
    assert client.enqueue("m", queue="mq", now=1)
    text = client.metrics(now=2)
    assert isinstance(text, str) and text.endswith("\n")
    lines = text.splitlines()
    assert "# TYPE fenceq_jobs gauge" in lines
    assert 'fenceq_jobs{queue="mq",state="ready"} 1' in lines
    assert any(line.startswith("fenceq_requests_total ") for line in lines)
    for line in lines:                                   # every sample line: name{labels} value
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


def test_purge_removes_only_old_finished_jobs_and_reenqueue_continues_the_fence(client: fenceq.Client):
    """purge counts and removes done and dead jobs finished at least older_than
    seconds ago (optionally of one queue); the fence of a purged id is kept, so
    enqueueing it again continues from it (C1.2) and old tokens stay stale."""
    assert client.enqueue("done", queue="p", now=100)
    old = client.claim_next("p", "w", 10, now=100)
    fence_done = client.claim("done", "w", 10, now=110)                 # fence 2
    assert fence_done == old["fence"] + 1
    assert client.complete("done", "w", fence_done, "r", now=111)
    assert client.enqueue("dead", queue="p", max_attempts=1, now=100)
    dead = client.claim_next("p", "w", 10, now=112)
    assert client.fail("dead", "w", dead["fence"], "boom", now=113)
    assert client.enqueue("waiting", queue="p", now=100)
    assert client.enqueue("other-done", queue="o", now=100)
    f = client.claim("other-done", "w", 10, now=100)
    assert client.complete("other-done", "w", f, None, now=101)

    assert client.purge(100, now=200) == 0                              # finished < 100 s ago
    assert client.purge(87, queue="p", now=200) == 2                    # done at 111, dead at 113
    assert sorted(jobs_by_id(client, now=200)) == ["other-done", "waiting"]
    assert client.state("done") is None
    assert client.purge(0, now=200) == 1                                # other-done; never "waiting"
    assert client.purge(0, now=200) == 0

    assert client.enqueue("done", queue="p", now=201) is True
    assert client.state("done")["fence"] == fence_done
    again = client.claim_next("p", "w2", 10, now=201)
    assert again["id"] == "waiting"
    again = client.claim_next("p", "w2", 10, now=201)
    assert (again["id"], again["fence"]) == ("done", fence_done + 1)
    assert client.complete("done", "w", fence_done, "stale", now=202) is False
    with pytest.raises(fenceq.InvalidArgument, match="older_than"):
        client.purge(-1)


def test_bad_values_are_refused_and_change_nothing(client: fenceq.Client):
    """invalid_argument (a ValueError) for a right-typed bad value, bad_request
    for a wrong type; the message names the field; nothing is created (C3.8)."""
    cases = [
        ({"priority": 2 ** 31}, fenceq.InvalidArgument, "priority"),
        ({"priority": -2 ** 31 - 1}, fenceq.InvalidArgument, "priority"),
        ({"delay": -1}, fenceq.InvalidArgument, "delay"),
        ({"delay": float("nan")}, fenceq.InvalidArgument, "delay"),
        ({"delay": float("inf")}, fenceq.InvalidArgument, "delay"),
        ({"max_attempts": -1}, fenceq.InvalidArgument, "max_attempts"),
        ({"queue": ""}, fenceq.InvalidArgument, "queue"),
        ({"queue": "q" * 257}, fenceq.InvalidArgument, "queue"),
        ({"priority": 1.5}, fenceq.BadRequest, "priority"),
        ({"max_attempts": "3"}, fenceq.BadRequest, "max_attempts"),
        ({"payload": 12}, fenceq.BadRequest, "payload"),
        ({"payload": {"a": 1}}, fenceq.BadRequest, "payload"),
        ({"queue": 7}, fenceq.BadRequest, "queue"),
    ]
    for kwargs, error, field in cases:
        with pytest.raises(error) as e:
            client.enqueue("bad", now=1, **kwargs)
        assert field in e.value.message, kwargs
        assert isinstance(e.value, ValueError) == (error is fenceq.InvalidArgument)
    assert client.state("bad") is None
    # The extremes that are allowed.
    assert client.enqueue("edge", queue="q" * 256, priority=2 ** 31 - 1, max_attempts=0, delay=0, now=1)
    assert client.enqueue("edge2", queue="q" * 256, priority=-2 ** 31, now=1)
    assert [j["id"] for j in client.list(queue="q" * 256, now=1)] == ["edge", "edge2"]


def test_server_clock_refuses_now_on_queue_ops(server_daemon: Daemon):
    """C2.3 holds for the new ops too."""
    with server_daemon.client() as c:
        assert c.enqueue("s", queue="q")
        for call in (lambda: c.enqueue("t", now=1), lambda: c.claim_next("q", "w", 10, now=1),
                     lambda: c.check("s", "w", 1, now=1), lambda: c.fail("s", "w", 1, "x", now=1),
                     lambda: c.stats(now=1), lambda: c.list(now=1), lambda: c.purge(0, now=1),
                     lambda: c.metrics(now=1)):
            with pytest.raises(fenceq.InvalidArgument, match="now"):
                call()
        job = c.claim_next("q", "w", 10)
        assert c.check("s", "w", job["fence"]) is True
        assert c.fail("s", "w", job["fence"], "x", retry_in=0) is True
        assert c.stats()["queues"]["q"]["ready"] == 1


# -- long-poll ------------------------------------------------------------------------


def test_wait_extends_the_call_timeout():
    assert _wait_extension(None) == 0 and _wait_extension(0) == 0 and _wait_extension(2.5) == 2.5
    assert _wait_extension(-1) == 0 and _wait_extension(float("nan")) == 0 and _wait_extension(True) == 0
    assert _wait_extension(float("inf")) == 0 and _wait_extension(10 ** 9) == fenceq.MAX_WAIT_SECONDS
    assert _wait_extension("3") == 0


def test_long_poll_answered_by_an_enqueue_from_another_client(server_daemon: Daemon):
    """A parked claim_next is answered as soon as another client enqueues, even
    past the client's own timeout (the call's timeout is timeout + wait)."""

    def produce():
        assert wait_until(lambda: waiting_claims(server_daemon) == 1, 5, 0.01)
        time.sleep(0.5)                                      # beyond the waiter's 0.3 s timeout
        with server_daemon.client() as producer:
            return producer.enqueue("wake", queue="lp", payload=b"data")

    with server_daemon.client(timeout=0.3) as waiter:
        sent = record_requests(waiter)
        producer = Background(produce)
        start = time.monotonic()
        job = waiter.claim_next("lp", "w", 10, wait=5)
        elapsed = time.monotonic() - start
        assert producer.result() is True
        assert job == {"id": "wake", "fence": 1, "payload": b"data", "attempts": 1}
        assert 0.45 < elapsed < 4
        assert sent[0][1]["wait"] == 5 and sent[0][2] == pytest.approx(5.3)
    assert waiting_claims(server_daemon) == 0


def test_long_poll_ends_with_none_when_the_wait_is_over(server_daemon: Daemon):
    with server_daemon.client(timeout=0.2) as c:
        start = time.monotonic()
        assert c.claim_next("empty", "w", 10, wait=0.6) is None
        assert 0.55 < time.monotonic() - start < 2
        assert c.claim_next("empty", "w", 10, wait=0) is None       # no wait: at once


def test_long_poll_answered_by_a_lease_expiring(server_daemon: Daemon):
    """The only job of the queue is leased for 0.4 s: a parked claim_next gets it,
    with the next fence, once that lease ends."""
    with server_daemon.client() as c:
        assert c.enqueue("busy", queue="exp")
        first = c.claim_next("exp", "a", 0.4)
        start = time.monotonic()
        job = c.claim_next("exp", "b", 10, wait=5)
        assert 0.3 < time.monotonic() - start < 4
        assert (job["id"], job["fence"], job["attempts"]) == ("busy", first["fence"] + 1, 2)
        assert c.check("busy", "a", first["fence"]) is False


def test_long_poll_waiters_served_first_come_first_served(server_daemon: Daemon):
    """Parked requests are answered in arrival order, one job each."""

    def park(name: str):
        with server_daemon.client() as c:
            return c.claim_next("fifo", name, 10, wait=5)

    waiters = {}
    for i, name in enumerate(["first", "second", "third"]):
        waiters[name] = Background(lambda name=name: park(name))
        assert wait_until(lambda: waiting_claims(server_daemon) == i + 1, 5, 0.01)
    with server_daemon.client() as producer:
        for i, job in enumerate(["j1", "j2", "j3"]):
            assert producer.enqueue(job, queue="fifo")
            assert wait_until(lambda: waiting_claims(server_daemon) == 2 - i, 5, 0.01)
    assert {name: w.result()["id"] for name, w in waiters.items()} == \
        {"first": "j1", "second": "j2", "third": "j3"}


def test_long_poll_with_the_client_clock_is_retried_with_the_highest_now(daemon: Daemon):
    """A parked request whose own now is before the job's delay is served once
    another request carries a later now; the lease counts from that now."""

    def claim_next():
        with daemon.client() as c:
            return c.claim_next("cc", "w", 5, wait=5, now=100)

    with daemon.client() as other:
        assert other.enqueue("soon", queue="cc", delay=10, now=100)
        waiter = Background(claim_next)
        assert wait_until(lambda: other.stats()["waiting_claims"] == 1, 5, 0.01)
        assert other.enqueue("unrelated", queue="x", now=110)            # time moves to 110
        assert waiter.result()["id"] == "soon"
        assert jobs_by_id(other, now=110)["soon"]["until"] == 115.0


def test_long_poll_answered_unavailable_when_the_daemon_stops(server_daemon: Daemon):
    """A parked request is answered unavailable (nothing claimed) on SIGTERM."""

    def stop():
        assert wait_until(lambda: waiting_claims(server_daemon) == 1, 5, 0.01)
        os.kill(server_daemon.proc.pid, signal.SIGTERM)

    with server_daemon.client() as c:
        stopper = Background(stop)
        start = time.monotonic()
        with pytest.raises(fenceq.Unavailable):
            c.claim_next("stopping", "w", 10, wait=30)
        assert time.monotonic() - start < 5
        stopper.result()
