"""Jobs that wait for jobs (issue 32): ``enqueue``'s and the enqueue_many
entries' ``after`` and ``after_failure``, the ``"blocked"`` state in ``job``,
``list`` and ``stats``, :meth:`Client.enqueue_fan_in`, and the parents a
claimed job and ``job`` carry (``job`` also its blocked children), against a real
client-clock daemon on SQLite.
Every call passes ``now``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import fenceq
from conftest import Background, jobs_by_id, record_requests
from fenceq import JobSpec


def state(client: fenceq.Client, id: str, now: float) -> str:
    return client.job(id, now=now)["state"]


def finish(client: fenceq.Client, id: str, result: str, now: float) -> None:
    fence = client.claim(id, "w", 30, now=now)
    assert fence is not None, f"{id} is not claimable at {now}"
    assert client.complete(id, "w", fence, result, now=now) is True


# -- the request ---------------------------------------------------------------

def test_after_and_after_failure_are_sent_only_when_given_after_group(client: fenceq.Client):
    assert client.enqueue("p", queue="q", now=1)
    sent = record_requests(client)
    assert client.enqueue("c1", queue="q", group="g", after=("p",), after_failure="run", now=1) is True
    assert client.enqueue_unique("c2", "k", queue="q", after=iter(["p"]), now=1) == ("c2", True)
    assert client.enqueue("c3", queue="q", now=1) is True
    assert client.enqueue_many([JobSpec("c4", queue="q", after=["p"]),
                                {"id": "c5", "after": ("p", "c4"), "after_failure": "cancel"}], now=1) \
        == [True, True]
    fields = [f for _, f, _ in sent]
    # The C++ encoder's order: the job's fields, the key's, group, then after
    # and after_failure; an iterable of ids travels as an array.
    assert list(fields[0]) == ["id", "queue", "group", "after", "after_failure", "now"]
    assert fields[0]["after"] == ["p"] and fields[0]["after_failure"] == "run"
    assert list(fields[1]) == ["id", "queue", "key", "after", "now"] and fields[1]["after"] == ["p"]
    assert fields[2] == {"id": "c3", "queue": "q", "now": 1}
    assert fields[3]["jobs"] == [{"id": "c4", "queue": "q", "after": ["p"]},
                                 {"id": "c5", "after": ["p", "c4"], "after_failure": "cancel"}]
    # A JobSpec tuple: after and after_failure follow group (issue 33's
    # max_runtime came after them, at the end).
    assert JobSpec._fields[10:12] == ("after", "after_failure")
    assert "blocked" in fenceq.JOB_STATES and fenceq.AFTER_FAILURE == ("cancel", "run")


def test_bad_after_values_are_the_daemons_coded_errors_and_create_nothing(client: fenceq.Client):
    assert client.enqueue("p", now=1)
    invalid = [dict(after=[]), dict(after=[f"p{i}" for i in range(1001)]), dict(after=[""]),
               dict(after=["p", "p"]), dict(after=["x"]), dict(after_failure="run"),
               dict(after=["p"], after_failure="later")]
    for kwargs in invalid:
        with pytest.raises(fenceq.InvalidArgument) as e:
            client.enqueue("x", now=1, **kwargs)
        assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError), kwargs
    for kwargs in (dict(after="p"), dict(after=["p", 7]), dict(after={"p": 1})):
        with pytest.raises(fenceq.BadRequest):
            client.enqueue("x", now=1, **kwargs)
    assert client.job("x", now=1) is None


# -- blocked until the parents are done ----------------------------------------

def test_a_child_is_blocked_until_both_parents_complete_then_claimable(client: fenceq.Client):
    assert client.enqueue("parent-a", queue="q", now=1)
    assert client.enqueue("parent-b", queue="q", now=1)
    assert client.enqueue("child", queue="q", after=["parent-a", "parent-b"], now=1) is True

    assert state(client, "child", 1) == "blocked"
    assert [r["id"] for r in client.list(state="blocked", now=1)] == ["child"]
    assert jobs_by_id(client, queue="q", now=1)["child"]["state"] == "blocked"
    assert client.stats(now=1)["queues"]["q"]["blocked"] == 1
    assert client.results(["child"], now=1) == {"child": {"state": "blocked", "result": None}}

    # Only the parents are handed out; the child is not claimable by id either.
    assert sorted(j["id"] for j in client.claim_next("q", "w", 30, max=10, now=2)) == ["parent-a", "parent-b"]
    assert client.claim("child", "w", 30, now=2) is None
    assert client.claim_next("q", "w", 30, now=2) is None

    fence_a = client.job("parent-a", now=2)["fence"]
    fence_b = client.job("parent-b", now=2)["fence"]
    assert client.complete("parent-a", "w", fence_a, "A", now=3) is True
    assert state(client, "child", 3) == "blocked"   # one parent is not enough
    assert client.claim_next("q", "w", 30, now=3) is None

    assert client.complete("parent-b", "w", fence_b, "B", now=4) is True
    assert state(client, "child", 4) == "ready"
    assert client.list(state="blocked", now=4) == []
    assert "blocked" not in client.stats(now=4)["queues"]["q"]   # only while some are
    job = client.claim_next("q", "w", 30, now=5)
    assert job is not None and job["id"] == "child"
    assert client.results(["parent-a", "parent-b"], now=5) == {
        "parent-a": {"state": "done", "result": "A"},
        "parent-b": {"state": "done", "result": "B"},
    }


def test_a_delay_counts_from_the_unblocking(client: fenceq.Client):
    assert client.enqueue("p", queue="d", now=1)
    assert client.enqueue("c", queue="d", delay=10, after=["p"], now=1)
    finish(client, "p", "ok", now=50)
    assert state(client, "c", 50) == "delayed"
    assert client.claim_next("d", "w", 30, now=59) is None
    assert client.claim_next("d", "w", 30, now=60)["id"] == "c"


def test_an_enqueue_many_entry_may_wait_for_an_earlier_entry(client: fenceq.Client):
    assert client.enqueue_many([{"id": "e1", "queue": "m"}, JobSpec("e2", queue="m", after=["e1"]),
                                {"id": "e3", "queue": "m", "after": ["e2"]}], now=1) == [True, True, True]
    assert [r["id"] for r in client.list(state="blocked", now=1)] == ["e2", "e3"]
    assert client.stats(now=1)["queues"]["m"]["blocked"] == 2
    finish(client, "e1", "one", now=2)
    assert (state(client, "e2", 2), state(client, "e3", 2)) == ("ready", "blocked")


def test_an_unknown_parent_is_refused_and_nothing_is_created(client: fenceq.Client):
    assert client.enqueue("known", now=1)
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.enqueue("orphan", after=["known", "nobody"], now=1)
    assert "nobody" in e.value.message
    assert client.job("orphan", now=1) is None

    # In a batch the whole request is refused: not even the entries before it.
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_many([{"id": "b1"}, {"id": "b2", "after": ["b1"]},
                             {"id": "b3", "after": ["nobody"]}], now=1)
    # A parent must come earlier in the batch, not later.
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_many([{"id": "b1", "after": ["b2"]}, {"id": "b2"}], now=1)
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_fan_in([{"id": "f1"}], {"id": "f2", "after": ["nobody"]}, now=1)
    assert client.results(["b1", "b2", "b3", "f1", "f2"], now=1) == dict.fromkeys(
        ["b1", "b2", "b3", "f1", "f2"])
    assert [r["id"] for r in client.list(now=1)] == ["known"]


# -- a parent that fails -------------------------------------------------------

def test_a_cancelled_parent_cancels_a_default_child_and_frees_a_run_child(client: fenceq.Client):
    assert client.enqueue("parent", queue="f", now=1)
    assert client.enqueue("other", queue="f", now=1)
    assert client.enqueue("cancel-child", queue="f", after=["parent"], now=1)
    assert client.enqueue("explicit-child", queue="f", after=["parent"], after_failure="cancel", now=1)
    assert client.enqueue("grandchild", queue="f", after=["cancel-child"], now=1)
    assert client.enqueue("run-grandchild", queue="f", after=["cancel-child"], after_failure="run", now=1)
    assert client.enqueue("run-child", queue="f", after=["parent"], after_failure="run", now=1)
    assert client.enqueue("run-both", queue="f", after=["parent", "other"], after_failure="run", now=1)
    assert client.stats(now=1)["queues"]["f"]["blocked"] == 6

    assert client.cancel("parent", now=2) is True

    rows = jobs_by_id(client, queue="f", now=2)
    status = {id: (r["state"], r["error"]) for id, r in rows.items()}
    assert status["cancel-child"] == ("cancelled", "parent parent cancelled")
    assert status["explicit-child"] == ("cancelled", "parent parent cancelled")
    # Its blocked descendants go with it, unless they run regardless.
    assert status["grandchild"] == ("cancelled", "parent cancel-child cancelled")
    assert status["run-grandchild"] == ("ready", None)
    assert status["run-child"] == ("ready", None)
    assert status["run-both"] == ("blocked", None)       # "other" still holds it back
    assert client.stats(now=2)["queues"]["f"]["blocked"] == 1

    # The run child is claimable, and reads what its parent left.
    claimed = {j["id"] for j in client.claim_next("f", "w", 30, max=10, now=3)}
    assert claimed == {"other", "run-child", "run-grandchild"}
    assert client.results(["parent"], now=3) == {"parent": {"state": "cancelled", "result": None}}
    assert client.complete("other", "w", client.job("other", now=3)["fence"], "O", now=4) is True
    assert state(client, "run-both", 4) == "ready"


def test_a_dead_parent_cancels_the_child_with_its_reason(client: fenceq.Client):
    assert client.enqueue("fragile", queue="x", max_attempts=1, now=1)
    assert client.enqueue("after-fragile", queue="x", after=["fragile"], now=1)
    assert client.enqueue("regardless", queue="x", after=["fragile"], after_failure="run", now=1)
    fence = client.claim("fragile", "w", 30, now=2)
    assert client.fail("fragile", "w", fence, "boom", now=3) is True
    assert state(client, "fragile", 3) == "dead"
    row = client.job("after-fragile", now=3)
    assert (row["state"], row["error"]) == ("cancelled", "parent fragile dead")
    assert client.claim_next("x", "w", 30, now=4)["id"] == "regardless"


# -- enqueue_fan_in ------------------------------------------------------------

def test_enqueue_fan_in_is_one_request_whose_child_waits_for_every_part(client: fenceq.Client):
    parts = [{"id": f"chunk-{n}", "payload": str(n)} for n in range(3)] + [JobSpec("chunk-3", payload="3")]
    ids = [p["id"] if isinstance(p, dict) else p.id for p in parts]
    sent = record_requests(client)

    answer = client.enqueue_fan_in(parts, {"id": "sum", "payload": json.dumps(ids)}, queue="fan", now=1)

    assert answer == [True] * 5
    assert [op for op, _, _ in sent] == ["enqueue_many"]
    jobs = sent[0][1]["jobs"]
    assert [j["id"] for j in jobs] == ids + ["sum"]
    assert all(j["queue"] == "fan" for j in jobs)
    assert jobs[-1] == {"id": "sum", "queue": "fan", "payload": json.dumps(ids), "after": ids}
    assert all("after" not in j for j in jobs[:-1])
    assert state(client, "sum", 1) == "blocked"

    # Workers run the parts (in any order); the child waits for the last one.
    now = 2.0
    for _ in ids:
        job = client.claim_next("fan", "w", 30, now=now)
        assert job is not None and job["id"] in ids
        assert state(client, "sum", now) == "blocked"
        assert client.complete(job["id"], "w", job["fence"], str(int(job["payload"]) ** 2), now=now)
        now += 1
    child = client.claim_next("fan", "w", 30, now=now)
    assert child is not None and child["id"] == "sum"

    # The child reads its parents' results in one round trip.
    parents = client.results(json.loads(child["payload"]), now=now)
    assert {id: o["state"] for id, o in parents.items()} == dict.fromkeys(ids, "done")
    total = sum(int(o["result"]) for o in parents.values())
    assert total == 0 + 1 + 4 + 9
    assert client.complete("sum", "w", child["fence"], str(total), now=now) is True


def test_enqueue_fan_in_keeps_each_jobs_own_fields(client: fenceq.Client):
    assert client.enqueue("earlier", queue="own", now=1)
    sent = record_requests(client)
    assert client.enqueue_fan_in([("p1", "own"), {"id": "p2", "queue": "elsewhere", "priority": 3}],
                                 JobSpec("joined", after=["earlier"], after_failure="run", group="g"),
                                 queue="own", now=1) == [True, True, True]
    jobs = sent[0][1]["jobs"]
    assert jobs == [{"id": "p1", "queue": "own"}, {"id": "p2", "queue": "elsewhere", "priority": 3},
                    {"id": "joined", "queue": "own", "group": "g", "after": ["p1", "p2", "earlier"],
                     "after_failure": "run"}]
    # An existing part is not enqueued again (False) but is waited for all the same.
    assert client.enqueue_fan_in(["p1", {"id": "p3"}], {"id": "joined-2"}, now=1) == [False, True, True]
    assert state(client, "joined-2", 1) == "blocked"


def test_enqueue_fan_in_refuses_what_it_cannot_read_before_sending(client: fenceq.Client):
    sent = record_requests(client)
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_fan_in([], {"id": "c"})
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_fan_in([{"queue": "q"}], {"id": "c"})
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_fan_in([{"id": "p"}], 5)  # type: ignore[arg-type]
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_fan_in([{"id": "p"}], {"id": "c", "after": "other"})
    with pytest.raises(TypeError):
        client.enqueue_fan_in([{"id": "p", "max_attempt": 2}], {"id": "c"})
    assert sent == []
    # The daemon judges the rest: the child's id among the parts.
    with pytest.raises(fenceq.InvalidArgument):
        client.enqueue_fan_in([{"id": "p"}, {"id": "c"}], {"id": "c"}, now=1)
    assert client.job("p", now=1) is None


# -- a claimed job's parents, a job's parents and blocked children -------------

def test_a_claimed_child_carries_its_parents_in_id_order_on_every_claim_path(client: fenceq.Client):
    for id in ("b", "a", "solo", "z"):
        assert client.enqueue(id, queue="q", now=1)
    assert client.enqueue("k1", queue="q", after=["b", "a"], now=1)   # given out of order
    assert client.enqueue("k2", queue="q", after=["a"], now=1)
    assert client.enqueue("k3", queue="q", after=["z"], now=1)

    # Jobs without parents keep their shape: no "after" key at all.
    first = client.claim_next("q", "w", 30, max=4, now=2)
    assert sorted(j["id"] for j in first) == ["a", "b", "solo", "z"]
    assert all("after" not in j for j in first)
    fence = {j["id"]: j["fence"] for j in first}
    assert client.complete("b", "w", fence["b"], "B", now=3)
    assert client.complete("solo", "w", fence["solo"], "S", now=3)

    # complete_and_claim_next's next: the parents, in id order.
    reply = client.complete_and_claim_next("a", "w", fence["a"], "A", "q", 30, now=4)
    assert reply["completed"] is True
    assert reply["next"]["id"] == "k1" and reply["next"]["after"] == ["a", "b"]
    # claim_next with max, and complete_many's next.
    k2 = client.claim_next("q", "w", 30, max=5, now=5)
    assert [(j["id"], j["after"]) for j in k2] == [("k2", ["a"])]
    done = client.complete_many([("z", "w", fence["z"], "Z")], next=("q", 30, 5), now=6)
    assert done.completed == [True]
    assert [(j["id"], j["after"]) for j in done.next] == [("k3", ["z"])]
    # The single claim_next, and the child reads its parents with results.
    assert client.enqueue("k4", queue="q", after=["k1", "a"], now=6)
    assert client.complete("k1", "w", reply["next"]["fence"], "K1", now=7)
    child = client.claim_next("q", "w", 30, now=8)
    assert child["id"] == "k4" and child["after"] == ["a", "k1"]
    assert client.results(child["after"], now=8) == {
        "a": {"state": "done", "result": "A"}, "k1": {"state": "done", "result": "K1"}}


def test_job_lists_a_parents_still_blocked_children_and_a_childs_parents(
        client: fenceq.Client):
    assert client.enqueue("parent", queue="j", now=1)
    assert client.enqueue("other", queue="j", now=1)
    assert client.enqueue("child-b", queue="j", after=["parent"], now=1)
    assert client.enqueue("child-a", queue="j", after=["parent", "other"], now=1)

    parent = client.job("parent", now=1)
    assert parent["blocked_children"] == ["child-a", "child-b"]   # id order
    assert "after" not in parent
    child = client.job("child-a", now=1)
    assert child["after"] == ["other", "parent"] and "blocked_children" not in child
    plain = client.job("other", now=1)
    assert plain["blocked_children"] == ["child-a"]

    finish(client, "parent", "P", now=2)
    # The complete unblocked child-b (ready now); child-a still waits for
    # "other", so both parents still list it.
    assert client.job("child-b", now=2)["state"] == "ready"
    assert client.job("child-b", now=2)["after"] == ["parent"]   # kept once unblocked
    assert client.job("parent", now=2)["blocked_children"] == ["child-a"]
    assert client.job("other", now=2)["blocked_children"] == ["child-a"]
    finish(client, "other", "O", now=3)
    assert client.job("child-a", now=3)["state"] == "ready"
    assert "blocked_children" not in client.job("parent", now=3)
    assert "blocked_children" not in client.job("other", now=3)


def test_a_queue_workers_job_has_its_parents_and_an_empty_list_without(daemon):
    with daemon.client() as c:
        assert c.enqueue_fan_in(["w-1", "w-2"], "w-sum", queue="qw", now=1) == [True] * 3
    seen = {}

    def run(job: fenceq.Job) -> str:
        seen[job.id] = job.after
        return job.id

    now = [2.0]
    with fenceq.QueueWorker(daemon.endpoint, "qw", ttl=10, wait=0.2,
                            clock=lambda: now[0]) as w:
        for _ in range(3):
            outcome = w.run_once(run)
            assert outcome is not None and outcome.status == "completed"
    assert seen == {"w-1": [], "w-2": [], "w-sum": ["w-1", "w-2"]}


def _answer_with(fake_daemon, call, result: Any) -> Any:
    """``call(client)`` against a fake daemon that answers ``result``."""
    import msgpack

    endpoint, router = fake_daemon

    def serve():
        assert router.poll(5000)
        identity, empty, payload = router.recv_multipart()
        rid = msgpack.unpackb(payload, raw=False)["rid"]
        router.send_multipart([identity, empty, msgpack.packb(
            {"ok": True, "rid": rid, "result": result}, use_bin_type=True)])

    server = Background(serve)
    try:
        with fenceq.Client(endpoint, timeout=5) as c:
            return call(c)
    finally:
        server.result()


@pytest.mark.parametrize("call, result", [
    (lambda c: c.claim_next("q", "w", 30), {"id": "c", "fence": 1, "payload": None, "attempts": 1,
                                            "after": "p"}),
    (lambda c: c.claim_next("q", "w", 30, max=2), [{"id": "c", "fence": 1, "payload": None,
                                                    "attempts": 1, "after": [7]}]),
    (lambda c: c.job("c"), {"id": "c", "state": "ready", "after": None}),
    (lambda c: c.job("c"), {"id": "c", "state": "ready", "blocked_children": ["k", b"k2"]}),
])
def test_parents_or_children_that_are_not_lists_of_ids_are_bad_replies(fake_daemon, call, result):
    with pytest.raises(fenceq.BadReply):
        _answer_with(fake_daemon, call, result)
