"""Per-group overrides (C3.25): ``Client.group_config(queue, group, max_leased=,
rate=, per=)`` and ``fenceq.INHERIT``; stats' ``group_overrides`` and
``group_config``.

The request tests check what the client sends (a keyword left out: not sent;
``INHERIT``: nil), first with its transport replaced (no daemon), then against
the real daemon. The others run against a real fenceqd (client clock: every
call that takes ``now`` passes it, so rate windows do not depend on how long
the test takes)."""

from __future__ import annotations

import copy
import pickle
import signal as signals
import time
from collections import Counter
from typing import Any, Dict, List

import msgpack
import pytest

import fenceq
from conftest import (Background, Daemon, daemon_on_pg_schema, record_requests, wait_until,
                      waiting_claims)

NOW = 1_000_000.0
#: The stats keys of a queue with overrides.
COUNT_KEY = "group_overrides"
CONFIGS_KEY = "group_config"


def enqueue_groups(c: fenceq.Client, queue: str, **counts: int) -> None:
    """``counts[group]`` jobs of each group in ``queue`` (ids ``<group>-<n>``)."""
    jobs = [{"id": f"{group}-{n}", "queue": queue, "group": group}
            for group, count in counts.items() for n in range(count)]
    assert c.enqueue_many(jobs, now=NOW) == [True] * len(jobs)


def claim_all(c: fenceq.Client, queue: str, now: float = NOW) -> List[Dict[str, Any]]:
    """Claim until the daemon hands out no more (batches of 10, then one by one)."""
    claimed: List[Dict[str, Any]] = list(c.claim_next(queue, "w", 60, max=10, now=now))
    while True:
        job = c.claim_next(queue, "w", 60, now=now)
        if job is None:
            return claimed
        claimed.append(job)


def groups_of(jobs: List[Dict[str, Any]]) -> Counter:
    return Counter(j["id"].rsplit("-", 1)[0] for j in jobs)


def complete(c: fenceq.Client, jobs: List[Dict[str, Any]], now: float = NOW) -> None:
    for j in jobs:
        assert c.complete(j["id"], "w", j["fence"], "ok", now=now) is True


def queue_stats(c: fenceq.Client, queue: str) -> Dict[str, Any]:
    return c.stats(now=NOW)["queues"].get(queue, {})


# -- the sentinel and the request (no daemon) ------------------------------------

def test_inherit_is_one_exported_sentinel():
    assert "INHERIT" in fenceq.__all__
    assert fenceq.INHERIT is fenceq.client.INHERIT
    assert repr(fenceq.INHERIT) == "fenceq.INHERIT"
    assert fenceq.INHERIT is not None and fenceq.INHERIT is not fenceq.KEEP_FOREVER
    assert type(fenceq.INHERIT)() is fenceq.INHERIT
    assert copy.copy(fenceq.INHERIT) is fenceq.INHERIT
    assert copy.deepcopy(fenceq.INHERIT) is fenceq.INHERIT
    assert pickle.loads(pickle.dumps(fenceq.INHERIT)) is fenceq.INHERIT


@pytest.fixture
def stubbed(tmp_dir: str):
    """A Client whose transport keeps each request's bytes (rid aside) and
    answers ``True``: nothing is sent."""
    c = fenceq.Client(f"ipc://{tmp_dir}/nobody.sock", timeout=1)
    sent: List[bytes] = []

    def round_trip(socket, op, fields, timeout):
        sent.append(msgpack.packb({"op": op, **fields}, use_bin_type=True))
        return True

    c._round_trip = round_trip
    yield c, sent
    c.close()


def test_sends_each_given_field_in_order_and_inherit_as_nil(stubbed):
    c, sent = stubbed
    assert c.group_config("q", "g", max_leased=3, rate=10, per=60.0) is True
    assert c.group_config("q", "g", max_leased=fenceq.INHERIT, rate=fenceq.INHERIT,
                          per=fenceq.INHERIT) is True
    assert c.group_config("q", "g", rate=0) is True
    assert c.group_config("q", "g") is True
    assert c.group_config("q", "g", per=fenceq.INHERIT) is True
    # As packed (key order: ops.json's, the C++ encoder's): nil is sent, None is not.
    assert [list(msgpack.unpackb(b, raw=False).items()) for b in sent] == [
        [("op", "group_config"), ("queue", "q"), ("group", "g"), ("max_leased", 3), ("rate", 10),
         ("per", 60.0)],
        [("op", "group_config"), ("queue", "q"), ("group", "g"), ("max_leased", None), ("rate", None),
         ("per", None)],
        [("op", "group_config"), ("queue", "q"), ("group", "g"), ("rate", 0)],
        [("op", "group_config"), ("queue", "q"), ("group", "g")],
        [("op", "group_config"), ("queue", "q"), ("group", "g"), ("per", None)],
    ]
    # Values are sent as given, for the daemon to judge (no client-side check).
    c.group_config("", "", max_leased=-1, per="x")
    assert msgpack.unpackb(sent[-1], raw=False) == {"op": "group_config", "queue": "", "group": "",
                                                    "max_leased": -1, "per": "x"}


def test_a_reply_that_is_not_a_bool_is_bad_reply(tmp_dir: str):
    c = fenceq.Client(f"ipc://{tmp_dir}/nobody.sock", timeout=1)
    c._round_trip = lambda socket, op, fields, timeout: {"ok": True}
    try:
        with pytest.raises(fenceq.BadReply):
            c.group_config("q", "g", max_leased=1)
    finally:
        c.close()


# -- against the daemon -------------------------------------------------------------

def test_daemon_answers_true_to_the_fields_sent(client: fenceq.Client):
    sent = record_requests(client)
    assert client.group_config("q", "big", max_leased=3, rate=5, per=2.5) is True
    assert client.group_config("q", "big", rate=fenceq.INHERIT) is True
    assert client.group_config("q", "big") is True          # nothing to change: still true
    assert client.group_config("q", "nobody", max_leased=fenceq.INHERIT) is True  # none to remove
    assert [(op, fields) for op, fields, _ in sent] == [
        ("group_config", {"queue": "q", "group": "big", "max_leased": 3, "rate": 5, "per": 2.5}),
        ("group_config", {"queue": "q", "group": "big", "rate": None}),
        ("group_config", {"queue": "q", "group": "big"}),
        ("group_config", {"queue": "q", "group": "nobody", "max_leased": None}),
    ]
    # What stayed: max_leased and per; rate removed; "nobody" has no override.
    assert queue_stats(client, "q")[CONFIGS_KEY] == {"big": {"max_leased": 3, "per": 2.5}}


def test_max_leased_override_and_inherit(client: fenceq.Client):
    q = "mq"
    assert client.queue_config(q, group_max_leased=1) is True
    assert client.group_config(q, "big", max_leased=3) is True
    enqueue_groups(client, q, big=5, small=5)

    first = claim_all(client, q)
    assert groups_of(first) == {"big": 3, "small": 1}, [j["id"] for j in first]

    # INHERIT: "big" follows the queue's 1 again. Its 3 leased jobs stay
    # leased; none more is handed out.
    assert client.group_config(q, "big", max_leased=fenceq.INHERIT) is True
    assert claim_all(client, q) == []
    assert CONFIGS_KEY not in queue_stats(client, q) and COUNT_KEY not in queue_stats(client, q)

    complete(client, first)
    second = claim_all(client, q)
    assert groups_of(second) == {"big": 1, "small": 1}, [j["id"] for j in second]

    # max_leased 0 lifts the cap for "big" alone; "small" keeps the queue's 1.
    complete(client, second)
    assert client.group_config(q, "big", max_leased=0) is True
    third = claim_all(client, q)
    assert groups_of(third) == {"big": 1, "small": 1}  # the last big job (5 - 3 - 1)
    jobs = [{"id": f"big-x{n}", "queue": q, "group": "big"} for n in range(4)]
    assert client.enqueue_many(jobs, now=NOW) == [True] * 4
    fourth = claim_all(client, q)
    assert groups_of(fourth) == {"big": 4}, [j["id"] for j in fourth]  # 5 "big" leased now


def test_both_stores_honour_and_list_the_overrides(either_store):
    """SQLite and PostgreSQL alike (server clock): the cap, INHERIT, stats,
    and a restart keeps the overrides."""
    with either_store.client(timeout=30) as c:
        assert c.queue_config("pq", group_max_leased=1) is True
        assert c.group_config("pq", "big", max_leased=3, rate=50, per=10) is True
        assert c.enqueue_many([{"id": f"{g}-{n}", "queue": "pq", "group": g}
                               for g in ("big", "small") for n in range(5)]) == [True] * 10
        first = c.claim_next("pq", "w", 60, max=10)
        assert groups_of(first) == {"big": 3, "small": 1}, [j["id"] for j in first]
        row = c.stats()["queues"]["pq"]
        assert row[COUNT_KEY] == 1
        assert row[CONFIGS_KEY] == {"big": {"max_leased": 3, "rate": 50, "per": 10.0}}
    either_store.restart()
    with either_store.client(timeout=30) as c:
        assert c.stats()["queues"]["pq"][CONFIGS_KEY] == {"big": {"max_leased": 3, "rate": 50,
                                                                  "per": 10.0}}
        assert c.group_config("pq", "big", max_leased=fenceq.INHERIT) is True
        for j in first:
            assert c.complete(j["id"], "w", j["fence"], "ok") is True
        second = c.claim_next("pq", "w", 60, max=10)
        assert groups_of(second) == {"big": 1, "small": 1}, [j["id"] for j in second]
        assert c.stats()["queues"]["pq"][CONFIGS_KEY] == {"big": {"rate": 50, "per": 10.0}}


def test_override_raises_a_cap_the_queue_does_not_set(client: fenceq.Client):
    """An override with no queue group setting limits that group alone."""
    q = "nq"
    assert client.group_config(q, "slow", max_leased=2) is True
    enqueue_groups(client, q, slow=4, other=4)
    assert groups_of(claim_all(client, q)) == {"slow": 2, "other": 4}


def test_claim_by_id_and_complete_next_honour_the_override(client: fenceq.Client):
    q = "iq"
    assert client.queue_config(q, group_max_leased=1) is True
    assert client.group_config(q, "big", max_leased=2) is True
    enqueue_groups(client, q, big=4)
    assert client.claim("big-0", "w", 60, now=NOW) == 1
    assert client.claim("big-1", "w", 60, now=NOW) == 1
    assert client.claim("big-2", "w", 60, now=NOW) is None     # 2 leased: its cap
    # complete_and_claim_next: one done, one more (2 leased again), no third.
    both = client.complete_and_claim_next("big-0", "w", 1, "ok", q, 60, now=NOW)
    assert both["completed"] is True and both["next"]["id"] == "big-2"
    assert client.claim_next(q, "w", 60, now=NOW) is None
    # INHERIT: the queue's 1; 2 leased, so complete_next hands out none.
    assert client.group_config(q, "big", max_leased=fenceq.INHERIT) is True
    both = client.complete_and_claim_next("big-1", "w", 1, "ok", q, 60, now=NOW)
    assert both["completed"] is True and both["next"] is None
    # complete_many's next: raised to 2, with big-2 completed (none leased)
    # it hands out 2 of the 3 ready (the queue's 1 would give 1, no cap 3).
    assert client.group_config(q, "big", max_leased=2) is True
    assert client.enqueue_many([{"id": f"big-{n}", "queue": q, "group": "big"} for n in (4, 5)],
                               now=NOW) == [True, True]
    done = client.complete_many([("big-2", "w", 1, "ok")], (q, 60, 10), now=NOW)
    assert done.completed == [True] and sorted(j["id"] for j in done.next) == ["big-3", "big-4"]


def test_a_parked_claim_is_woken_by_a_raised_override(server_daemon):
    with server_daemon.client() as c:
        assert c.queue_config("wq", group_max_leased=1) is True
        assert c.enqueue_many([{"id": f"w{n}", "queue": "wq", "group": "big"} for n in range(2)]) \
            == [True, True]
        assert c.claim_next("wq", "w", 60)["id"] == "w0"
        assert c.claim_next("wq", "w", 60) is None               # held back by the queue's 1

        def parked():
            with server_daemon.client() as w:
                return w.claim_next("wq", "parked", 60, wait=5)

        waiter = Background(parked)
        assert wait_until(lambda: waiting_claims(server_daemon) == 1, 5, 0.01)
        raised = time.monotonic()
        assert c.group_config("wq", "big", max_leased=2) is True
        job = waiter.result()
        assert job is not None and job["id"] == "w1"
        assert time.monotonic() - raised < 1.0   # woken by the override, not the wait's end


def test_rate_and_per_overrides(client: fenceq.Client):
    q = "rq"
    assert client.queue_config(q, group_rate=1, group_per=60) is True
    assert client.group_config(q, "fast", rate=3) is True
    assert client.group_config(q, "quick", per=1) is True     # 1 claim a second, not a minute
    enqueue_groups(client, q, fast=6, slow=6, quick=6)

    first = claim_all(client, q, now=NOW)
    assert groups_of(first) == {"fast": 3, "slow": 1, "quick": 1}, [j["id"] for j in first]
    # 2 s later: only "quick"'s window (1 s) has passed.
    assert groups_of(claim_all(client, q, now=NOW + 2)) == {"quick": 1}
    # rate 0 lifts the rate for "fast" alone.
    assert client.group_config(q, "fast", rate=0) is True
    assert groups_of(claim_all(client, q, now=NOW + 2)) == {"fast": 3}
    # Left out keeps the stored override: "quick" still has per 1.
    assert client.group_config(q, "quick", max_leased=5) is True
    assert queue_stats(client, q)[CONFIGS_KEY]["quick"] == {"max_leased": 5, "per": 1.0}
    # INHERIT per: back to the queue's minute.
    assert client.group_config(q, "quick", per=fenceq.INHERIT) is True
    assert claim_all(client, q, now=NOW + 4) == []


BAD = [
    ({"group": ""}, fenceq.InvalidArgument),
    ({"group": "g" * 257}, fenceq.InvalidArgument),
    ({"queue": ""}, fenceq.InvalidArgument),
    ({"max_leased": -1}, fenceq.InvalidArgument),
    ({"max_leased": 10**9 + 1}, fenceq.InvalidArgument),
    ({"rate": -1}, fenceq.InvalidArgument),
    ({"rate": 100001}, fenceq.InvalidArgument),
    ({"per": 0}, fenceq.InvalidArgument),
    ({"per": -1.5}, fenceq.InvalidArgument),
    ({"per": 86400.5}, fenceq.InvalidArgument),
    ({"per": "x"}, fenceq.BadRequest),
    ({"max_leased": "3"}, fenceq.BadRequest),
    ({"rate": [1]}, fenceq.BadRequest),
    ({"group": 7}, fenceq.BadRequest),
]


@pytest.mark.parametrize("bad,error", BAD, ids=[f"{next(iter(b))}={next(iter(b.values()))!r}"[:40]
                                               for b, _ in BAD])
def test_bad_input_is_refused_and_changes_nothing(client: fenceq.Client, bad: Dict[str, Any], error):
    assert client.group_config("bq", "g", max_leased=2, rate=3, per=4.0) is True
    before = queue_stats(client, "bq")
    args: Dict[str, Any] = {"queue": "bq", "group": "g", "max_leased": 5, "rate": 6, "per": 7.0}
    args.update(bad)
    with pytest.raises(error):
        client.group_config(args.pop("queue"), args.pop("group"), **args)
    assert queue_stats(client, "bq") == before
    assert before[CONFIGS_KEY] == {"g": {"max_leased": 2, "rate": 3, "per": 4.0}}


def test_range_boundaries_are_taken(client: fenceq.Client):
    assert client.group_config("eq", "g" * 256, max_leased=10**9, rate=100000, per=86400) is True
    assert client.group_config("eq", "h", max_leased=0, rate=0, per=0.001) is True
    assert queue_stats(client, "eq")[CONFIGS_KEY] == {
        "g" * 256: {"max_leased": 10**9, "rate": 100000, "per": 86400.0},
        "h": {"max_leased": 0, "rate": 0, "per": 0.001}}


def test_stats_counts_and_lists_the_overrides(client: fenceq.Client, daemon):
    assert client.queue_config("plain", group_max_leased=2) is True
    assert client.group_config("sq", "b", rate=5, per=60) is True
    assert client.group_config("sq", "a", max_leased=10) is True
    row = queue_stats(client, "sq")
    assert row[COUNT_KEY] == 2
    assert row[CONFIGS_KEY] == {"a": {"max_leased": 10}, "b": {"rate": 5, "per": 60.0}}
    assert isinstance(row[CONFIGS_KEY]["b"]["per"], float)
    # The old keys are unchanged; a queue without overrides has neither key.
    assert {"ready", "leased", "totals"} <= set(row)
    plain = queue_stats(client, "plain")
    assert plain["group_max_leased"] == 2 and COUNT_KEY not in plain and CONFIGS_KEY not in plain

    # Overrides are stored: a restart keeps them.
    client.close()
    daemon.restart()
    with daemon.client() as c:
        row = queue_stats(c, "sq")
        assert row[COUNT_KEY] == 2
        assert row[CONFIGS_KEY] == {"a": {"max_leased": 10}, "b": {"rate": 5, "per": 60.0}}
        # All three removed: the group has none.
        assert c.group_config("sq", "b", rate=fenceq.INHERIT, per=fenceq.INHERIT) is True
        row = queue_stats(c, "sq")
        assert row[COUNT_KEY] == 1 and row[CONFIGS_KEY] == {"a": {"max_leased": 10}}
        assert c.group_config("sq", "a", max_leased=fenceq.INHERIT) is True
        row = queue_stats(c, "sq")
        assert COUNT_KEY not in row and CONFIGS_KEY not in row


def test_stats_lists_the_first_100_groups_by_name(client: fenceq.Client):
    names = [f"g{n:03d}" for n in range(105)]
    for name in reversed(names):
        assert client.group_config("many", name, max_leased=1) is True
    row = queue_stats(client, "many")
    assert row[COUNT_KEY] == 105
    assert sorted(row[CONFIGS_KEY]) == names[:100]
    assert all(v == {"max_leased": 1} for v in row[CONFIGS_KEY].values())


# -- across PostgreSQL sidecars ---------------------------------------------------


def test_an_override_set_on_one_sidecar_holds_on_another(pg_uri: str, tmp_dir: str):
    """C3.25 across sidecars: a group another sidecar holds back at the
    queue's group_max_leased 1 is served as soon as a third sidecar raises its
    override, both to a claim that comes after and to one parked waiting; and
    a cap lowered there holds here at once."""
    with daemon_on_pg_schema(pg_uri, tmp_dir, "gs", "server") as a:
        a.start()
        b = Daemon(tmp_dir, "gs2", "server")
        b.db = a.db
        b.start()
        try:
            with a.client() as ca, b.client() as cb:
                assert cb.queue_config("sq", group_max_leased=1) is True
                assert cb.enqueue_many([{"id": f"s{n}", "queue": "sq", "group": "t"}
                                        for n in range(6)]) == [True] * 6
                assert ca.claim_next("sq", "w", 60)["id"] == "s0"
                assert ca.claim_next("sq", "w", 60) is None     # held back on a
                def parked():
                    with a.client() as w:
                        return w.claim_next("sq", "parked", 60, wait=5)

                waiter = Background(parked)
                assert wait_until(lambda: waiting_claims(a) == 1, 5, 0.01)
                raised = time.monotonic()
                assert cb.group_config("sq", "t", max_leased=3) is True
                job = waiter.result()
                assert job is not None and job["id"] == "s1", job
                assert time.monotonic() - raised < 4.0            # not the wait's end
                assert ca.claim_next("sq", "w", 60)["id"] == "s2"  # the third of 3
                assert ca.claim_next("sq", "w", 60) is None
                # Lowered on b: a claims nothing more until two leases end.
                assert cb.group_config("sq", "t", max_leased=1) is True
                assert ca.complete("s0", "w", 1, "ok") is True
                assert ca.claim_next("sq", "w", 60) is None      # 2 leased, cap 1
                assert ca.complete("s1", "parked", 1, "ok") is True
                assert ca.claim_next("sq", "w", 60) is None      # 1 leased, cap 1
                assert ca.complete("s2", "w", 1, "ok") is True
                assert ca.claim_next("sq", "w", 60)["id"] == "s3"
        finally:
            b.stop(signals.SIGKILL)
