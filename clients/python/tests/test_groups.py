"""Fair groups (issue 31): a job's ``group`` on enqueue, enqueue_unique,
enqueue_many / enqueue_many_unique entries and enqueue_and_wait; ``list(group=)``
and the rows' ``group``; queue_config's ``group_max_leased``, ``group_rate`` and
``group_per``; stats' group settings and ``groups_waiting``.

The encoding tests need no daemon: the client's transport is replaced, the
request it would send is packed as ``_round_trip`` packs it (rid aside) and
compared with the C++ encoder's bytes for the same request (protocol/op_fields.cpp,
field order as in the wire note: ``group`` after the key fields, before
enqueue_and_wait's ``wait``, after list's ``key``; queue_config's group settings
after ``per``). The others run against the real daemon (client clock: every
call passes ``now``)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Dict, List

import sqlite3

import msgpack
import pytest

import fenceq
from conftest import jobs_by_id, record_requests
from fenceq import JobSpec

#: The C++ encoder's bytes (protocol/op_fields.cpp's writers, encode_request;
#: rid left out, as the vectors compare requests), made from fenceq::protocol::Request
#: values with the fields each test's call gives.
GOLDEN = {
    "enqueue_all": (
        "8ca26f70a7656e7175657565a26964a26a31a57175657565a171a77061796c6f6164a170a87072696f72"
        "69747903a564656c6179cb3ff8000000000000ac6d61785f617474656d70747304a36b6579a16baa756e"
        "697175655f666f72cb4024000000000000ab6f6e5f636f6e666c696374a77265706c616365a567726f75"
        "70ab637573746f6d65722d3432a36e6f77cb401c000000000000"
    ),
    "enqueue_group": (
        "83a26f70a7656e7175657565a26964a26a32a567726f7570a167"
    ),
    "enqueue_and_wait": (
        "85a26f70b0656e71756575655f616e645f77616974a26964a27731a57175657565a171a567726f7570a1"
        "67a477616974cb4004000000000000"
    ),
    "enqueue_many": (
        "82a26f70ac656e71756575655f6d616e79a46a6f62739385a26964a161a57175657565a171a87072696f"
        "7269747901a36b6579a16ba567726f7570a2673182a26964a162a567726f7570a2673281a26964a163"
    ),
    "list": (
        "86a26f70a46c697374a57175657565a171a56c696d697432a6707265666978a170a36b6579a16ba56772"
        "6f7570a167"
    ),
    "queue_config": (
        "89a26f70ac71756575655f636f6e666967a57175657565a171a6706175736564c2aa6d61785f6c656173"
        "656408a47261746564a3706572cb404e000000000000b067726f75705f6d61785f6c656173656402aa67"
        "726f75705f7261746505a967726f75705f706572cb3ff8000000000000"
    ),
    "queue_config_group": (
        "83a26f70ac71756575655f636f6e666967a57175657565a171b067726f75705f6d61785f6c6561736564"
        "02"
    ),
    "stats_reply": (
        "83a26f6bc3a6726573756c7489a671756575657382a767726f75706564de0010b067726f75705f6d6178"
        "5f6c656173656402aa67726f75705f726174650aa967726f75705f706572cb404e000000000000ae6772"
        "6f7570735f77616974696e6703a6706175736564c2aa6d61785f6c656173656400a47261746500a37065"
        "72cb3ff0000000000000a5726561647905a764656c6179656400a66c656173656400a4646f6e6500a464"
        "65616400a963616e63656c6c656400b06f6c646573745f72656164795f616765cb0000000000000000a6"
        "746f74616c7387a7636c61696d656400a9636f6d706c6574656400a66661696c656400a7726574726965"
        "6400a46465616400a76578706972656400a77265667573656484a572656e657700a8636f6d706c657465"
        "00a772656c6561736500a46661696c00a5706c61696e88a5726561647901a764656c6179656400a66c65"
        "6173656400a4646f6e6500a46465616400a963616e63656c6c656400b06f6c646573745f72656164795f"
        "616765cb0000000000000000a6746f74616c7387a7636c61696d656400a9636f6d706c6574656400a666"
        "61696c656400a77265747269656400a46465616400a76578706972656400a77265667573656484a57265"
        "6e657700a8636f6d706c65746500a772656c6561736500a46661696c00a8726571756573747300a7636f"
        "6d6d69747300a76261746368657300ae6661696c65645f636f6d6d69747300aa6d65616e5f6261746368"
        "cb0000000000000000ae77616974696e675f636c61696d7300a6757074696d65cb0000000000000000a6"
        "77726974657384a572656e657782a76170706c69656400a77265667573656400a8636f6d706c65746582"
        "a76170706c69656400a77265667573656400a772656c6561736582a76170706c69656400a77265667573"
        "656400a46661696c82a76170706c69656400a77265667573656400a372696401"
    ),
}


class Stubbed:
    """A Client whose transport is replaced: each request is kept as the bytes
    ``_round_trip`` would send (without its rid) and answered by ``answer(op,
    fields)``, which returns the result or raises. No daemon, nothing sent."""

    def __init__(self, tmp_dir: str, answer: Callable[[str, Dict[str, Any]], Any]) -> None:
        self.client = fenceq.Client(f"ipc://{tmp_dir}/nobody.sock", timeout=1)
        self.sent: List[bytes] = []

        def round_trip(socket, op, fields, timeout):
            self.sent.append(msgpack.packb({"op": op, **fields}, use_bin_type=True))
            return answer(op, fields)

        self.client._round_trip = round_trip

    def requests(self) -> List[Dict[str, Any]]:
        return [msgpack.unpackb(b, raw=False) for b in self.sent]


def golden(name: str) -> bytes:
    return bytes.fromhex(GOLDEN[name])


@pytest.fixture
def stubbed(tmp_dir: str):
    made: List[Stubbed] = []

    def make(answer: Callable[[str, Dict[str, Any]], Any]) -> Stubbed:
        s = Stubbed(tmp_dir, answer)
        made.append(s)
        return s

    yield make
    for s in made:
        s.client.close()


# -- encoding (no daemon) ------------------------------------------------------

def test_enqueue_writes_group_last_as_the_cpp_encoder_does(stubbed):
    s = stubbed(lambda op, fields: True if "key" not in fields else {"id": fields["id"], "created": True})
    assert s.client.enqueue("j1", queue="q", payload="p", priority=3, delay=1.5, max_attempts=4, key="k",
                            unique_for=10.0, on_conflict="replace", group="customer-42", now=7.0) is True
    assert s.client.enqueue_unique("j1", "k", queue="q", payload="p", priority=3, delay=1.5,
                                   max_attempts=4, unique_for=10.0, on_conflict="replace",
                                   group="customer-42", now=7.0) == ("j1", True)
    assert s.client.enqueue("j2", group="g") is True
    assert s.sent == [golden("enqueue_all"), golden("enqueue_all"), golden("enqueue_group")]
    # No group given: none sent (the version-1 request, unchanged).
    s.client.enqueue("j3")
    assert s.requests()[-1] == {"op": "enqueue", "id": "j3"}


def test_enqueue_and_wait_writes_group_before_wait(stubbed):
    s = stubbed(lambda op, fields: None)
    assert s.client.enqueue_and_wait("w1", 2.5, queue="q", group="g") is None
    assert s.sent == [golden("enqueue_and_wait")]


def test_enqueue_and_wait_falls_back_with_the_group(stubbed):
    """A daemon without enqueue_and_wait: the enqueue of the fallback carries the group."""
    def answer(op, fields):
        if op == "enqueue_and_wait":
            raise fenceq.UnknownOp("unknown_op", "no such op")
        return True if op == "enqueue" else None

    s = stubbed(answer)
    assert s.client.enqueue_and_wait("w1", 0.5, queue="q", group="g", now=3.0) is None
    assert s.requests()[1:] == [{"op": "enqueue", "id": "w1", "queue": "q", "group": "g", "now": 3.0},
                                {"op": "await", "id": "w1", "wait": 0.5, "now": 3.0}]


def test_enqueue_many_entries_write_group_last(stubbed):
    def answer(op, fields):
        return [{"id": j["id"], "created": True} if "key" in j else True for j in fields["jobs"]]

    s = stubbed(answer)
    jobs = [JobSpec("a", queue="q", priority=1, key="k", group="g1"), {"id": "b", "group": "g2"}, ("c",)]
    assert s.client.enqueue_many(jobs) == [True, True, True]
    assert s.client.enqueue_many_unique(jobs) == [("a", True), ("b", True), ("c", True)]
    # A JobSpec tuple: group is its tenth field.
    as_tuples = [("a", "q", None, 1, None, None, "k", None, None, "g1"),
                 ("b", None, None, None, None, None, None, None, None, "g2"), ("c",)]
    assert s.client.enqueue_many(as_tuples) == [True, True, True]
    assert s.sent == [golden("enqueue_many")] * 3
    assert JobSpec._fields[9] == "group"  # issue 32's after and after_failure follow it


def test_list_writes_group_after_key(stubbed):
    s = stubbed(lambda op, fields: [])
    assert s.client.list(queue="q", limit=50, prefix="p", key="k", group="g") == []
    assert s.sent == [golden("list")]


def test_queue_config_writes_the_group_settings_after_per(stubbed):
    s = stubbed(lambda op, fields: True)
    assert s.client.queue_config("q", paused=False, max_leased=8, rate=100, per=60.0,
                                 group_max_leased=2, group_rate=5, group_per=1.5) is True
    assert s.client.queue_config("q", group_max_leased=2) is True
    assert s.sent == [golden("queue_config"), golden("queue_config_group")]


def test_rows_and_records_always_carry_group(stubbed):
    """The wire carries a row's group only when the job has one, and so do
    the client's rows and records (as for "key"): other rows keep their shape."""
    grouped = {"id": "a", "queue": "q", "state": "ready", "created": 1.0, "key": "k", "group": "g"}
    plain = {"id": "b", "queue": "q", "state": "done", "created": 2.0}
    answers = {"list": [grouped, plain], "job": dict(plain), "await": dict(plain),
               "enqueue_and_wait": dict(grouped)}
    s = stubbed(lambda op, fields: answers[op])
    rows = s.client.list(group="g")
    assert [r.get("group") for r in rows] == ["g", None]
    assert rows[0] == grouped and rows[1] == plain
    assert "group" not in s.client.job("b")
    assert "group" not in s.client.await_job("b")
    assert s.client.enqueue_and_wait("a", 1, group="g")["group"] == "g"


def test_stats_reads_the_cpp_encoders_group_settings_and_groups_waiting(stubbed):
    """A stats reply as the C++ encoder writes it (protocol/replies.cpp): a
    queue with group settings and 3 groups waiting, and a plain queue."""
    reply = msgpack.unpackb(golden("stats_reply"), raw=False)
    assert list(reply["result"]["queues"]["grouped"])[:4] == [
        "group_max_leased", "group_rate", "group_per", "groups_waiting"]
    s = stubbed(lambda op, fields: reply["result"])
    queues = s.client.stats()["queues"]
    grouped, plain = queues["grouped"], queues["plain"]
    assert {k: grouped[k] for k in ("group_max_leased", "group_rate", "group_per", "groups_waiting")} == \
        {"group_max_leased": 2, "group_rate": 10, "group_per": 60.0, "groups_waiting": 3}
    assert isinstance(grouped["group_per"], float)
    assert "groups_waiting" not in plain                                # absent: none waiting
    assert not {"group_max_leased", "group_rate", "group_per"} & set(plain)


# -- against the daemon ----------------------------------------------------------

def group_settings(client: fenceq.Client, queue: str, now: float) -> dict:
    """The group keys of the queue in stats (each only when the daemon sends it)."""
    row = client.stats(now=now)["queues"].get(queue, {})
    return {k: row[k] for k in ("group_max_leased", "group_rate", "group_per", "groups_waiting") if k in row}


def test_a_grouped_jobs_rows_carry_its_group_and_list_filters_on_it(client: fenceq.Client):
    sent = record_requests(client)
    assert client.enqueue("a1", queue="q", group="customer-42", now=1) is True
    assert sent[-1][1] == {"id": "a1", "queue": "q", "group": "customer-42", "now": 1}
    assert client.enqueue("a2", queue="q", group="customer-42", priority=2, now=1)
    assert client.enqueue("b1", queue="q", group="customer-7", now=1)
    assert client.enqueue("n1", queue="q", now=1)
    assert client.enqueue("c1", queue="other", group="customer-42", now=1)
    assert client.enqueue_unique("u1", "k", queue="q", group="customer-7", now=1) == ("u1", True)
    assert client.enqueue_many([JobSpec("m1", queue="q", group="customer-9"),
                                {"id": "m2", "queue": "q", "group": "customer-9"}], now=1) == [True, True]
    assert client.enqueue_and_wait("w1", 0, queue="q", group="customer-9", now=1) is None

    rows = jobs_by_id(client, queue="q", now=1)
    assert {i: r.get("group") for i, r in rows.items()} == {
        "a1": "customer-42", "a2": "customer-42", "b1": "customer-7", "n1": None,
        "u1": "customer-7", "m1": "customer-9", "m2": "customer-9", "w1": "customer-9"}
    assert rows["u1"]["key"] == "k"
    assert client.job("a1", now=1)["group"] == "customer-42"
    assert "group" not in client.job("n1", now=1)

    # The filter: exact, every queue unless queue= is given; with the other filters.
    assert [r["id"] for r in client.list(group="customer-42", now=1)] == ["a1", "a2", "c1"]
    assert [r["id"] for r in client.list(group="customer-42", queue="q", now=1)] == ["a1", "a2"]
    assert [r["id"] for r in client.list(group="customer-9", prefix="m", now=1)] == ["m1", "m2"]
    assert [r["id"] for r in client.list(group="customer-7", key="k", now=1)] == ["u1"]
    assert client.list(group="customer-4", now=1) == []
    assert sent[-1][1] == {"group": "customer-4", "now": 1}
    # A claimed, then finished job keeps its group.
    job = client.claim_next("q", "w", 30, now=2)
    assert job["id"] == "a2"                                            # priority 2 first
    assert client.complete("a2", "w", job["fence"], "ok", now=3)
    assert [(r["id"], r["state"]) for r in client.list(group="customer-42", state="done", now=3)] == \
        [("a2", "done")]


def test_group_max_leased_caps_each_group_and_stats_show_it(client: fenceq.Client):
    groups = ("g0", "g1", "g2")
    client.enqueue_many([JobSpec(f"{g}-{n}", queue="gm", group=g) for g in groups for n in range(5)]
                        + [JobSpec(f"free-{n}", queue="gm") for n in range(3)], now=10)
    assert group_settings(client, "gm", 10) == {"groups_waiting": 3}    # jobs of no group: not counted
    assert client.queue_config("gm", group_max_leased=2) is True
    assert group_settings(client, "gm", 10) == {"group_max_leased": 2, "group_rate": 0, "group_per": 1.0,
                                                "groups_waiting": 3}
    row = client.stats(now=10)["queues"]["gm"]
    assert isinstance(row["group_per"], float)
    assert (row["paused"], row["max_leased"], row["rate"]) == (False, 0, 0)

    def group_of(job_id: str) -> str:
        return job_id.rsplit("-", 1)[0]

    held: Dict[str, Dict[str, Any]] = {}

    def claim(now: float) -> List[Dict[str, Any]]:
        jobs = client.claim_next("gm", "w", 600, max=10, now=now)
        held.update({j["id"]: j for j in jobs})
        leased = Counter(group_of(i) for i in held)
        assert all(leased[g] <= 2 for g in groups), leased
        return jobs

    # 2 of each group, and every job without a group (no group setting limits those).
    first = claim(11)
    assert Counter(group_of(j["id"]) for j in first) == {"g0": 2, "g1": 2, "g2": 2, "free": 3}
    assert claim(11) == []                                              # every group at its cap
    assert client.stats(now=11)["queues"]["gm"]["leased"] == 9
    assert group_settings(client, "gm", 11)["groups_waiting"] == 3      # held back, still ready
    # One of g1 finished: one more of g1, and of no other.
    done = next(i for i in held if group_of(i) == "g1")
    assert client.complete(done, "w", held.pop(done)["fence"], "ok", now=12)
    assert [group_of(j["id"]) for j in claim(12)] == ["g1"]
    # Until every job is done, never more than 2 of a group at once.
    now = 13.0
    while held:
        for i, j in list(held.items()):
            assert client.complete(i, "w", j["fence"], "ok", now=now)
            del held[i]
            now += 1
            claim(now)
    assert client.stats(now=now)["queues"]["gm"]["done"] == 18
    assert "groups_waiting" not in group_settings(client, "gm", now)   # absent: none waiting

    # Back at no limit: the settings go, and stats shows none of the group keys.
    assert client.queue_config("gm", group_max_leased=0) is True
    assert group_settings(client, "gm", now) == {}


def test_group_rate_limits_claims_per_group_in_group_per_seconds(client: fenceq.Client):
    client.enqueue_many([JobSpec(f"{g}-{n}", queue="gr", group=g) for g in ("x", "y") for n in range(3)],
                        now=100)
    assert client.queue_config("gr", group_rate=1, group_per=60.0) is True
    assert group_settings(client, "gr", 100) == {"group_max_leased": 0, "group_rate": 1, "group_per": 60.0,
                                                 "groups_waiting": 2}
    first = client.claim_next("gr", "w", 600, max=10, now=100)
    assert sorted(j["id"][0] for j in first) == ["x", "y"]              # one claim per group
    assert client.claim_next("gr", "w", 600, max=10, now=130) == []     # within the 60 s
    again = client.claim_next("gr", "w", 600, max=10, now=161)
    assert sorted(j["id"][0] for j in again) == ["x", "y"]


def test_groups_share_a_priority_fairly(client: fenceq.Client):
    """One group with 50 jobs enqueued first, 5 groups with 2 jobs each, one
    priority: claimed one at a time, the first 12 claims take all 10 light jobs."""
    client.enqueue_many([JobSpec(f"heavy-{n:02}", queue="fair", group="heavy") for n in range(50)], now=1)
    light = [f"light{g}-{n}" for g in range(5) for n in range(2)]
    client.enqueue_many([JobSpec(i, queue="fair", group=i.split("-")[0]) for i in light], now=2)
    assert group_settings(client, "fair", 3)["groups_waiting"] == 6
    claimed = []
    for n in range(12):
        job = client.claim_next("fair", f"w{n}", 600, now=3 + n)
        assert job is not None
        claimed.append(job["id"])
    assert set(light) <= set(claimed), claimed
    assert sum(i.startswith("heavy-") for i in claimed) == 2
    # The heavy group's own jobs still come in their order.
    assert [i for i in claimed if i.startswith("heavy-")] == ["heavy-00", "heavy-01"]


@pytest.mark.parametrize("group", ["", "x" * 257, "é" * 129], ids=["empty", "257-bytes", "258-utf8-bytes"])
def test_bad_groups_are_invalid_arguments_and_change_nothing(client: fenceq.Client, group: str):
    """The daemon judges a group (1..256 bytes); the client sends it as given."""
    sent = record_requests(client)
    calls = [
        lambda: client.enqueue("bad", queue="q", group=group, now=1),
        lambda: client.enqueue_unique("bad", "k", queue="q", group=group, now=1),
        lambda: client.enqueue_many([JobSpec("ok", queue="q"), JobSpec("bad", queue="q", group=group)], now=1),
        lambda: client.enqueue_and_wait("bad", 0, queue="q", group=group, now=1),
        lambda: client.list(group=group, now=1),
    ]
    for call in calls:
        with pytest.raises(fenceq.InvalidArgument) as e:
            call()
        assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError)
    assert len(sent) == len(calls)                                      # each went to the daemon
    for op, fields, _ in sent:
        assert (fields["jobs"][-1] if op == "enqueue_many" else fields)["group"] == group, op
    assert client.list(now=1) == []                                     # nothing was enqueued


def test_groups_at_the_limits_and_wrong_types(client: fenceq.Client):
    longest, longest_utf8 = "x" * 256, "é" * 128                        # 256 bytes each
    assert client.enqueue("l1", queue="q", group=longest, now=1)
    assert client.enqueue("l2", queue="q", group=longest_utf8, now=1)
    assert [r["id"] for r in client.list(group=longest, now=1)] == ["l1"]
    assert client.job("l2", now=1)["group"] == longest_utf8
    with pytest.raises(fenceq.BadRequest):
        client.enqueue("t1", group=42, now=1)                           # not a str
    with pytest.raises(fenceq.BadRequest):
        client.list(group=b"bytes", now=1)
    assert client.job("t1", now=1) is None


@pytest.mark.parametrize("settings", [
    {"group_max_leased": -1}, {"group_rate": -1}, {"group_rate": 100001},
    {"group_per": 0.0}, {"group_per": -1.0}, {"group_per": 86401.0},
], ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_bad_group_settings_are_invalid_arguments_and_change_nothing(client: fenceq.Client, settings):
    sent = record_requests(client)
    assert client.queue_config("bq", group_max_leased=3) is True
    with pytest.raises(fenceq.InvalidArgument):
        client.queue_config("bq", rate=7, **settings)                  # all or nothing
    assert sent[-1][1] == {"queue": "bq", "rate": 7, **settings}       # judged by the daemon
    assert group_settings(client, "bq", 1) == {"group_max_leased": 3, "group_rate": 0, "group_per": 1.0}
    assert client.stats(now=1)["queues"]["bq"]["rate"] == 0


@pytest.mark.parametrize("old_file", [False, True])
def test_a_released_lease_wakes_its_parked_group_after_a_restart(daemon, old_file):
    """A group with nothing claimable leaves the walk until a write may make
    one of its jobs claimable (sqlite_groups.cpp). The daemon learns of such
    writes through SQLite's pre-update hook, installed once a grouped job was
    stored: across a restart it is installed from fenceq_meta's `grouped`
    mark, or, for a file from before the mark (old_file: the mark removed),
    by finding a grouped job in it."""
    c = daemon.client()
    assert c.enqueue("ready", queue="pq", group="g", now=10) is True
    assert c.enqueue("later", queue="pq", group="g", delay=3600, now=10) is True
    c.close()
    daemon.stop()
    if old_file:
        db = sqlite3.connect(daemon.db)
        db.execute("DELETE FROM fenceq_meta WHERE key = 'grouped'")
        db.commit()
        db.close()
    daemon.start()
    c = daemon.client()
    job = c.claim_next("pq", "w", 600, now=20)
    assert job is not None and job["id"] == "ready"
    # Nothing claimable now ("ready" leased for 600 s, "later" delayed an
    # hour): the group leaves the walk until the sooner of the two.
    assert c.claim_next("pq", "w", 600, now=21) is None
    # The lease ends: the group takes turns again at once.
    assert c.release("ready", "w", job["fence"]) is True
    again = c.claim_next("pq", "w2", 600, now=22)
    assert again is not None and again["id"] == "ready"
    c.close()
