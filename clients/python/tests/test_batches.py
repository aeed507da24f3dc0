"""The batch ops of fenceq.Client (protocol/PROTOCOL.md, "Batches"):
enqueue_many, claim_next with max, complete_many (with next) and renew_many.
Every job of a batch is judged on its own, as the single op would judge it: a
stale job fails alone. A bad entry refuses the whole request and nothing is
applied (C3.8). Against real daemons; the client clock with an explicit ``now``
unless a test says otherwise."""

from __future__ import annotations

import msgpack
import pytest
import zmq

import fenceq
from fenceq import JobSpec, LeaseItem, NextClaim
from conftest import Background, Daemon, jobs_by_id, record_requests, wait_until, waiting_claims


# -- enqueue_many -------------------------------------------------------------


def test_enqueue_many_answers_in_input_order_and_sends_enqueues_fields(client: fenceq.Client):
    """C3.1 for each job: True created, False already there (and unchanged).
    Dicts, JobSpecs and tuples; None fields are not sent, like enqueue's."""
    assert client.enqueue("old", queue="q", payload="kept", now=1)
    sent = record_requests(client)
    result = client.enqueue_many([
        {"id": "a", "queue": "q", "payload": b"\x00\x01", "priority": 2},
        JobSpec("b", queue="q", delay=5, max_attempts=3),
        ("c", "q", "text", None, None, None),
        {"id": "old", "queue": "q", "payload": "replaced?", "priority": 9},
        JobSpec("d", payload=bytearray(b"ba")),
    ], now=10)
    assert result == [True, True, True, False, True]
    assert sent[0][0] == "enqueue_many" and sent[0][1] == {
        "jobs": [{"id": "a", "queue": "q", "payload": b"\x00\x01", "priority": 2},
                 {"id": "b", "queue": "q", "delay": 5, "max_attempts": 3},
                 {"id": "c", "queue": "q", "payload": "text"},
                 {"id": "old", "queue": "q", "payload": "replaced?", "priority": 9},
                 {"id": "d", "payload": b"ba"}],
        "now": 10}
    rows = jobs_by_id(client, now=10)
    assert (rows["a"]["priority"], rows["a"]["state"]) == (2, "ready")
    assert (rows["b"]["state"], rows["b"]["not_before"], rows["b"]["max_attempts"]) == ("delayed", 15.0, 3)
    assert rows["d"]["queue"] == "default"
    assert rows["old"]["priority"] == 0
    claimed = client.claim_next("q", "w", 30, max=10, now=10)
    assert [(j["id"], j["payload"]) for j in claimed] == [("a", b"\x00\x01"), ("old", "kept"), ("c", "text")]


def test_enqueue_many_one_bad_entry_refuses_the_whole_batch(client: fenceq.Client):
    """C3.8: a bad value in any entry: invalid_argument naming its index, and none
    of the batch is applied (not even the good entries before it). A wrong type:
    bad_request, nothing applied."""
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.enqueue_many([{"id": "g1"}, {"id": "g2"}, {"id": "bad", "delay": -1}, {"id": "g3"}], now=1)
    assert "jobs[2]" in e.value.message and "delay" in e.value.message
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.enqueue_many([{"id": "g1"}, {"id": "bad", "queue": ""}], now=1)
    assert "jobs[1]" in e.value.message
    with pytest.raises(fenceq.BadRequest) as e:
        client.enqueue_many([JobSpec("g1"), JobSpec("bad", priority=1.5)], now=1)
    assert "jobs[1]" in e.value.message
    with pytest.raises(fenceq.BadRequest) as e:
        client.enqueue_many([{"id": "g1"}, {"queue": "q"}], now=1)           # no id
    assert "jobs[1]" in e.value.message
    with pytest.raises(fenceq.BadRequest):
        client.enqueue_many([{"id": "g1"}, "just-an-id"], now=1)            # not a map: the daemon says so
    for id in ("g1", "g2", "g3", "bad"):
        assert client.state(id) is None
    assert client.list(now=1) == []


def test_enqueue_many_sizes_are_the_daemons(client: fenceq.Client):
    """An empty batch and one over 1000 jobs are the daemon's to refuse; 1000 is fine."""
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_many([])
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_many([{"id": f"x{i}"} for i in range(fenceq.MAX_BATCH + 1)])
    assert client.state("x0") is None
    assert client.enqueue_many(({"id": f"x{i}"} for i in range(fenceq.MAX_BATCH)), now=1) == \
        [True] * fenceq.MAX_BATCH
    assert client.stats(now=1)["queues"]["default"]["ready"] == fenceq.MAX_BATCH


def test_enqueue_many_client_side_checks_send_nothing(client: fenceq.Client):
    """What enqueue checks before sending, enqueue_many checks for each entry (the
    payload's size, naming the entry); a key enqueue does not take is a TypeError,
    as enqueue(**job) would raise. Nothing is sent."""
    sent = record_requests(client)
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.enqueue_many([{"id": "ok"}, {"id": "big", "payload": b"x" * (fenceq.MAX_PAYLOAD_BYTES + 1)}])
    assert "jobs[1]" in e.value.message and "nothing was sent" in e.value.message
    with pytest.raises(TypeError, match=r"jobs\[0\].*'prority'"):
        client.enqueue_many([{"id": "typo", "prority": 3}])
    with pytest.raises(TypeError, match=r"jobs\[0\]"):
        client.enqueue_many([("a", "q", None, 1, 0, 0, "key", 5.0, "skip", "grp", ["p"], "run", 60.0,
                              {"h": "1"}, 1e9, "one too many")])
    assert sent == []
    assert client.enqueue_many([{"id": "edge", "payload": "x" * fenceq.MAX_PAYLOAD_BYTES}], now=1) == [True]


# -- claim_next with max -------------------------------------------------------


def test_claim_next_max_takes_the_most_urgent_first(client: fenceq.Client):
    """Up to max jobs, most urgent first (priority, then enqueue order), each
    claimed as a single claim_next would: its own fence, lease and attempt."""
    client.enqueue_many([{"id": "low", "queue": "q", "priority": -1}, {"id": "n1", "queue": "q"},
                         {"id": "hi", "queue": "q", "priority": 5}, {"id": "n2", "queue": "q"},
                         {"id": "later", "queue": "q", "delay": 100}, {"id": "other", "queue": "o"}], now=1)
    assert client.claim("n2", "w", 30, now=1) == 1                          # leased: not claimable
    claimed = client.claim_next("q", "w", 30, max=3, now=2)
    assert claimed == [{"id": "hi", "fence": 1, "payload": None, "attempts": 1},
                       {"id": "n1", "fence": 1, "payload": None, "attempts": 1},
                       {"id": "low", "fence": 1, "payload": None, "attempts": 1}]
    for id in ("hi", "n1", "low"):
        s = client.state(id)
        assert (s["owner"], s["until"], s["fence"]) == ("w", 32.0, 1)
    assert client.claim_next("q", "w", 30, max=1000, now=3) == []          # the rest: leased or delayed
    assert client.claim_next("q", "w", 30, now=3) is None                  # without max: unchanged
    # When a lease ends the job is claimable again: a new fence and attempt.
    again = client.claim_next("q", "w2", 30, max=2, now=32)
    assert [(j["id"], j["fence"], j["attempts"]) for j in again] == [("hi", 2, 2), ("n1", 2, 2)]


def test_claim_next_max_one_still_answers_a_list(client: fenceq.Client):
    assert client.enqueue("only", queue="q", now=1)
    sent = record_requests(client)
    assert client.claim_next("q", "w", 30, max=1, now=1) == [{"id": "only", "fence": 1, "payload": None,
                                                             "attempts": 1}]
    assert sent[0][1] == {"queue": "q", "owner": "w", "ttl": 30, "max": 1, "now": 1}
    assert client.claim_next("q", "w", 30, max=1, now=1) == []


@pytest.mark.parametrize("max", [0, -1, fenceq.MAX_BATCH + 1])
def test_claim_next_max_out_of_range_is_refused(client: fenceq.Client, max):
    assert client.enqueue("j", queue="q", now=1)
    with pytest.raises(fenceq.InvalidArgument):
        client.claim_next("q", "w", 30, max=max, now=1)
    assert client.state("j")["fence"] == 0


def test_claim_next_max_long_polls_until_one_job_comes(daemon: Daemon):
    """With wait: answered as soon as at least one job is claimable (with every job
    claimable then, up to max), or [] once the wait ends. The call's timeout is
    the client's plus wait."""
    with daemon.client(timeout=0.5) as c:
        sent = record_requests(c)
        assert c.claim_next("q", "w", 30, max=5, wait=0.2, now=1) == []
        assert sent[-1][2] == pytest.approx(0.5 + 0.2)

        def produce():
            assert wait_until(lambda: waiting_claims(daemon) == 1, 5, 0.01)
            with daemon.client() as producer:
                return producer.enqueue_many([{"id": "p1", "queue": "q"}, {"id": "p2", "queue": "q"}], now=2)

        producer = Background(produce)
        claimed = c.claim_next("q", "w", 30, max=5, wait=5, now=2)
        assert producer.result() == [True, True]
        assert [j["id"] for j in claimed] == ["p1", "p2"]


# -- complete_many --------------------------------------------------------------


def test_complete_many_a_stale_job_fails_alone(client: fenceq.Client):
    """C3.5 for each item: a stale one (another owner's lease, an old fence, an
    ended lease, a job already done) answers False and stores nothing; the others
    in the same batch are stored."""
    client.enqueue_many([{"id": i, "queue": "q"} for i in ("a", "b", "c", "d", "e")], now=1)
    jobs = {j["id"]: j for j in client.claim_next("q", "w", 10, max=5, now=1)}
    # b: taken over by another worker after its lease ended; its fence moved on.
    assert client.claim("b", "other", 100, now=11) == 2
    # d: done already.
    assert client.complete("d", "w", jobs["d"]["fence"], "first", now=2)
    # e, a, c: renewed, so still ours at 11.
    assert client.renew_many([("a", "w", 1), ("c", "w", 1), ("e", "w", 1)], 30, now=5) == [True] * 3
    sent = record_requests(client)
    result = client.complete_many([
        LeaseItem("a", "w", jobs["a"]["fence"], "ra"),
        {"id": "b", "owner": "w", "fence": 1, "result": "stale b"},       # the old fence
        ("c", "w", 1, "rc"),
        {"id": "d", "owner": "w", "fence": 1, "result": "again"},          # done
        {"id": "e", "owner": "intruder", "fence": 1, "result": "x"},       # not its owner
        {"id": "e", "owner": "w", "fence": 1},                              # result absent: None
        {"id": "e", "owner": "w", "fence": 1, "result": "twice"},           # the same lease again
    ], now=11)
    assert result == [True, False, True, False, False, True, False]
    assert sent[0][1]["items"][5] == {"id": "e", "owner": "w", "fence": 1, "result": None}
    assert (client.state("a")["result"], client.state("a")["done"]) == ("ra", True)
    assert client.state("c")["result"] == "rc"
    b = client.state("b")
    assert (b["owner"], b["fence"], b["done"], b["result"]) == ("other", 2, False, None)
    assert client.state("d")["result"] == "first"
    assert (client.state("e")["result"], client.state("e")["done"]) == (None, True)


def test_complete_many_takes_lease_and_job_objects(daemon: Daemon):
    """Items may be anything with id, owner and fence: a fenceq.Lease, a job dict
    from claim_next with an owner added (its other keys are left out)."""
    with daemon.client() as c:
        c.enqueue_many([{"id": "x", "queue": "q", "payload": "p"}, {"id": "y", "queue": "q"}], now=1)
        x, y = c.claim_next("q", "w", 30, max=2, now=1)
        sent = record_requests(c)
        lease = fenceq.Lease(id="x", owner="w", fence=x["fence"], ttl=30)
        assert c.complete_many([lease, {**y, "owner": "w", "result": "done y"}], now=2) == [True, True]
        assert sent[0][1]["items"] == [{"id": "x", "owner": "w", "fence": 1, "result": None},
                                       {"id": "y", "owner": "w", "fence": 1, "result": "done y"}]


def test_complete_many_with_next_claims_in_the_same_round_trip(client: fenceq.Client):
    """The completes, then up to next.max jobs of next.queue claimed (whatever the
    completes answered) for the last item's owner, in one request."""
    client.enqueue_many([{"id": f"j{i}", "queue": "q"} for i in range(6)], now=1)
    first = client.claim_next("q", "w", 30, max=2, now=1)
    sent = record_requests(client)
    reply = client.complete_many([(j["id"], "w", j["fence"], "ok") for j in first]
                                 + [("j5", "w", 7, "stale")], NextClaim("q", 30, 3), now=2)
    assert isinstance(reply, fenceq.CompletedMany)
    assert reply.completed == [True, True, False]
    assert [j["id"] for j in reply.next] == ["j2", "j3", "j4"]
    assert [op for op, _, _ in sent] == ["complete_many"]
    assert sent[0][1]["next"] == {"queue": "q", "ttl": 30, "max": 3}
    for j in reply.next:
        s = client.state(j["id"])
        assert (s["owner"], s["until"], s["fence"]) == ("w", 32.0, j["fence"])

    # A (queue, ttl, max) tuple or a dict; fewer left than max; unpacks as a pair.
    completed, nxt = client.complete_many([(j["id"], "w", j["fence"], None) for j in reply.next],
                                          next=("q", 30, 10), now=3)
    assert completed == [True] * 3 and [j["id"] for j in nxt] == ["j5"]
    done = client.complete_many([("j5", "w", 1, None)], next={"queue": "q", "ttl": 30, "max": 5}, now=4)
    assert done.completed == [True] and done.next == []                   # no wait: the queue is empty


def test_complete_many_next_is_claimed_for_the_last_items_owner(client: fenceq.Client):
    """PROTOCOL.md's next has no owner: the daemon claims for the last item's owner."""
    client.enqueue_many([{"id": "a", "queue": "q"}, {"id": "b", "queue": "q"}, {"id": "n", "queue": "q"}],
                        now=1)
    assert client.claim("a", "wa", 30, now=1) == 1
    assert client.claim("b", "wb", 30, now=1) == 1
    reply = client.complete_many([("a", "wa", 1, None), ("b", "wb", 1, None)], NextClaim("q", 30, 1), now=2)
    assert reply.completed == [True, True] and reply.next[0]["id"] == "n"
    assert client.state("n")["owner"] == "wb"


def test_complete_many_bad_next_or_item_refuses_everything(client: fenceq.Client):
    """A bad next (max 0, ttl <= 0, an empty queue) or a bad item refuses the whole
    request: not even the good completes are applied."""
    client.enqueue_many([{"id": "a", "queue": "q"}, {"id": "b", "queue": "q"}], now=1)
    (a,) = client.claim_next("q", "w", 30, max=1, now=1)
    for next in (NextClaim("q", 30, 0), NextClaim("q", 30, 1001), NextClaim("q", 0, 1), NextClaim("", 30, 1)):
        with pytest.raises(fenceq.InvalidArgument) as e:
            client.complete_many([("a", "w", 1, "r")], next, now=2)
        assert "next" in e.value.message
    with pytest.raises(fenceq.BadRequest):
        client.complete_many([("a", "w", 1, "r")], {"queue": "q", "ttl": 30}, now=2)     # no max
    with pytest.raises(fenceq.BadRequest) as e:
        client.complete_many([("a", "w", 1, "r"), {"id": "b", "owner": "w", "result": None}], now=2)
    assert "items[1]" in e.value.message
    with pytest.raises(fenceq.BadRequest):
        client.complete_many([("a", "w", 1, "r"), ("b", "w", 1.0, None)], now=2)        # a float fence
    with pytest.raises(fenceq.InvalidArgument):
        client.complete_many([], now=2)
    with pytest.raises(fenceq.InvalidArgument):
        client.complete_many([("a", "w", 1, None)] * (fenceq.MAX_BATCH + 1), now=2)
    with pytest.raises(TypeError):
        client.complete_many([("a", "w", 1, None)], next=("q", 30), now=2)
    assert client.check("a", "w", 1, now=2) is True and client.state("a")["done"] is False
    assert client.state("b")["fence"] == 0
    assert client.complete_many([("a", "w", 1, None)] * fenceq.MAX_BATCH, now=2) == \
        [True] + [False] * (fenceq.MAX_BATCH - 1)


# -- renew_many -------------------------------------------------------------------


def test_renew_many_a_stale_lease_fails_alone(client: fenceq.Client):
    """C3.4 for each item: the current leases end at now + ttl; an ended, stolen,
    done or unknown one answers False and is not revived; the others go on."""
    client.enqueue_many([{"id": i, "queue": "q"} for i in ("a", "b", "c", "d")], now=1)
    client.claim_next("q", "w", 10, max=4, now=1)                          # all until 11
    assert client.complete("c", "w", 1, None, now=2)
    assert client.renew("d", "w", 1, 20, now=2)                            # d until 22
    sent = record_requests(client)
    result = client.renew_many([LeaseItem("a", "w", 1, "ignored"), ("b", "w", 0), ("c", "w", 1),
                                {"id": "d", "owner": "w", "fence": 1}, ("nope", "w", 1)], 30, now=5)
    assert result == [True, False, False, True, False]
    assert sent[0][1] == {"items": [{"id": "a", "owner": "w", "fence": 1}, {"id": "b", "owner": "w", "fence": 0},
                                    {"id": "c", "owner": "w", "fence": 1}, {"id": "d", "owner": "w", "fence": 1},
                                    {"id": "nope", "owner": "w", "fence": 1}],
                          "ttl": 30, "now": 5}
    assert [client.state(i)["until"] for i in "abd"] == [35.0, 11.0, 35.0]
    # Once a lease has ended it is never revived, even inside a batch.
    assert client.renew_many([("a", "w", 1), ("b", "w", 1)], 30, now=20) == [True, False]
    assert client.claim("b", "other", 30, now=20) == 2


def test_renew_many_bad_ttl_renews_nothing(client: fenceq.Client):
    assert client.enqueue("a", queue="q", now=1)
    client.claim_next("q", "w", 10, max=1, now=1)
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(fenceq.InvalidArgument):
            client.renew_many([("a", "w", 1)], ttl, now=2)
    assert client.state("a")["until"] == 11.0


# -- clocks -------------------------------------------------------------------------


def test_batches_on_a_server_clock_daemon(server_daemon: Daemon):
    """C2.3: without now they all work; any now is refused and nothing is applied."""
    with server_daemon.client() as c:
        with pytest.raises(fenceq.InvalidArgument):
            c.enqueue_many([{"id": "a", "queue": "q"}], now=1)
        assert c.state("a") is None
        assert c.enqueue_many([{"id": "a", "queue": "q"}, {"id": "b", "queue": "q"}]) == [True, True]
        jobs = c.claim_next("q", "w", 30, max=5)
        assert [j["id"] for j in jobs] == ["a", "b"]
        with pytest.raises(fenceq.InvalidArgument):
            c.renew_many([("a", "w", 1)], 30, now=1)
        assert c.renew_many([("a", "w", 1), ("b", "w", 1)], 30) == [True, True]
        with pytest.raises(fenceq.InvalidArgument):
            c.complete_many([("a", "w", 1, None)], now=1)
        assert c.complete_many([("a", "w", 1, "ok"), ("b", "w", 1, "ok")]) == [True, True]


def test_batches_on_a_client_clock_daemon_need_now(client: fenceq.Client):
    """C2.2: renew_many and complete_many (and claim_next) must carry now;
    enqueue_many may leave it out."""
    assert client.enqueue_many([{"id": "a", "queue": "q"}]) == [True]
    with pytest.raises(fenceq.InvalidArgument):
        client.claim_next("q", "w", 30, max=1)
    (job,) = client.claim_next("q", "w", 30, max=1, now=1)
    with pytest.raises(fenceq.InvalidArgument):
        client.renew_many([("a", "w", 1)], 30)
    with pytest.raises(fenceq.InvalidArgument):
        client.complete_many([("a", "w", 1, None)])
    assert client.complete_many([("a", "w", 1, None)], now=2) == [True]


def test_daemon_answers_an_array_when_a_long_poll_with_max_ends_empty(daemon: Daemon):
    """PROTOCOL.md, Batches: with max, "always an array ... or [] when the wait ends"."""
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(daemon.endpoint)
    try:
        socket.send_multipart([b"", msgpack.packb({"op": "claim_next", "queue": "q", "owner": "w", "ttl": 30,
                                                   "max": 5, "wait": 0.1, "now": 1})])
        assert socket.poll(5000)
        reply = msgpack.unpackb(socket.recv_multipart()[-1], raw=False)
    finally:
        socket.close()
    assert reply == {"ok": True, "result": []}
