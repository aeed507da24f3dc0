"""The corpus's jobs made through the wire by a real fenceqd (--clock client),
of today or built from an older commit: what make_corpus.py checks its
generated files against (make_corpus.py --validate). Only the features of
`version` are used, so an older daemon is asked nothing it does not know.

    /usr/bin/python3 tests/upgrade/scenario.py ENDPOINT VERSION
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

import fenceq  # noqa: E402

T0 = 1_800_000_000.0  # every fixture's clock starts here (2027-01-15)
BIG = 1500  # bytes: over kSpillBytes (1024), so schema 18 moves it


def run(endpoint: str, version: int) -> None:
    with fenceq.Client(endpoint, timeout=10) as c:
        call = c._call  # the raw op: fields as this version's daemon took them

        def enq(id_: str, at: float, **f) -> None:
            r = call("enqueue", {"id": id_, "now": at, **f})
            # a keyed enqueue of a later daemon answers a map
            assert r is True or (isinstance(r, dict) and r.get("id") == id_), (id_, r)

        def claim(id_: str, owner: str, ttl: float, at: float) -> int:
            fence = call("claim", {"id": id_, "owner": owner, "ttl": ttl, "now": at})
            assert isinstance(fence, int), (id_, fence)
            return fence

        t = T0
        enq("ready-a", t, payload="a", priority=5)
        enq("ready-b", t + 1, payload="b")
        enq("delayed", t + 2, payload="d", delay=3600)
        enq("leased", t + 3)
        enq("expired", t + 4)
        enq("done", t + 5)
        enq("dead", t + 6, max_attempts=1)
        enq("retrying", t + 7, max_attempts=3)
        enq("exhausted", t + 8, max_attempts=1)
        enq("big", t + 9, payload="x" * BIG)
        enq("big-done", t + 10)
        enq("purged", t + 11, queue="gone")
        claim("leased", "w1", 3600, t + 20)
        claim("expired", "w2", 10, t + 20)
        f = claim("done", "w3", 60, t + 21)
        assert call("complete", {"id": "done", "owner": "w3", "fence": f, "result": "ok",
                                 "now": t + 22}) is True
        f = claim("dead", "w4", 60, t + 21)
        assert call("fail", {"id": "dead", "owner": "w4", "fence": f, "error": "boom",
                             "now": t + 22}) is True
        f = claim("retrying", "w5", 60, t + 21)
        assert call("fail", {"id": "retrying", "owner": "w5", "fence": f, "error": "transient",
                             "retry_in": 3600, "now": t + 22}) is True
        claim("exhausted", "w6", 10, t + 21)
        f = claim("big-done", "w7", 60, t + 21)
        assert call("complete", {"id": "big-done", "owner": "w7", "fence": f,
                                 "result": "y" * BIG, "now": t + 22}) is True
        f = claim("purged", "w8", 60, t + 21)
        assert call("complete", {"id": "purged", "owner": "w8", "fence": f, "result": None,
                                 "now": t + 22}) is True
        assert call("purge", {"older_than": 0, "queue": "gone", "now": t + 23}) == 1
        if version >= 3:  # cancel, progress
            enq("cancelled", t + 24)
            assert call("cancel", {"id": "cancelled", "now": t + 25}) is True
            enq("cancelled-leased", t + 24)
            claim("cancelled-leased", "w9", 60, t + 25)
            assert call("cancel", {"id": "cancelled-leased", "now": t + 26}) is True
            enq("progress", t + 26)
            f = claim("progress", "w16", 3574, t + 26)
            assert call("renew", {"id": "progress", "owner": "w16", "fence": f, "ttl": 3573,
                                  "progress": "50%", "now": t + 27}) is True
        if version >= 4:  # queue settings, schedules
            assert call("queue_config", {"queue": "limited", "max_leased": 5}) is True
            enq("held", t + 27, queue="limited")
            call("claim_next", {"queue": "limited", "owner": "w10", "ttl": 3600, "now": t + 28})
            assert call("schedule_set", {"name": "nightly", "cron": "0 3 * * *",
                                         "payload": "s", "priority": 2, "now": t + 28}) is True
        if version >= 5:  # unique keys
            enq("key-old", t + 29, key="K")
            f = claim("key-old", "w11", 60, t + 30)
            assert call("complete", {"id": "key-old", "owner": "w11", "fence": f,
                                     "result": "k", "now": t + 31}) is True
            enq("key-new", t + 32, key="K")
            enq("key-leased", t + 32, key="L", queue="other")
            claim("key-leased", "w12", 3600, t + 33)
        if version >= 6:  # groups
            enq("g-a1", t + 34, queue="gq", group="A")
            enq("g-a2", t + 34, queue="gq", group="A", priority=1)
            enq("g-b1", t + 35, queue="gq", group="B")
            claim("g-a1", "w13", 3600, t + 36)
        if version >= 9:  # after
            enq("parent", t + 37)
            enq("child", t + 38, after=["parent"])
            enq("parent-done", t + 38)
            enq("child-met", t + 39, after=["parent-done"])
            f = claim("parent-done", "w14", 60, t + 40)
            assert call("complete", {"id": "parent-done", "owner": "w14", "fence": f,
                                     "result": None, "now": t + 41}) is True
        if version >= 11:  # max_runtime
            enq("runtime", t + 42, max_runtime=600)
            claim("runtime", "w15", 60, t + 43)
        if version >= 12:  # headers
            enq("headers", t + 44, headers={"h": "v"})
        if 9 <= version <= 15:  # children left blocked for good (what schema 16 settles)
            orphans(call, t)
        if version >= 5:  # a key's older job revived after a newer one finished
            enq("key-revived", t + 47, key="R", max_attempts=1)
            f = claim("key-revived", "w17", 60, t + 48)
            assert call("fail", {"id": "key-revived", "owner": "w17", "fence": f,
                                 "error": "boom", "now": t + 48}) is True
            enq("key-later", t + 48, key="R")
            f = claim("key-later", "w18", 60, t + 50)
            assert call("complete", {"id": "key-later", "owner": "w18", "fence": f,
                                     "result": "r", "now": t + 50}) is True
            assert call("retry", {"id": "key-revived"}) is True
        if version >= 21:  # steps (C3.22)
            enq("steps", t + 51)
            f = claim("steps", "w19", 3600, t + 51)
            for step, value in (("charge", "ch_1"), ("none", None)):
                assert call("step_save", {"id": "steps", "owner": "w19", "fence": f, "step": step,
                                          "value": value, "now": t + 51}) is True
        if version >= 22:  # suspend (C3.23) and a deadline (C3.24)
            enq("suspended", t + 52)
            f = claim("suspended", "w20", 3600, t + 52)
            token = call("suspend", {"id": "suspended", "owner": "w20", "fence": f,
                                     "timeout": 3600, "now": t + 52})
            assert isinstance(token, str) and len(token) == 32, token
            enq("deadline", t + 53, deadline=t + 1_000_000)


def orphans(call, t: float) -> None:
    """Before schema 16: a child retried while its parent was cancelled (or
    dead) waits for it again; once the parent is purged nothing settles it."""
    def settled(id_: str, at: float) -> None:
        deadline = time.monotonic() + 10
        while call("job", {"id": id_, "now": at})["state"] != "cancelled":
            assert time.monotonic() < deadline, call("job", {"id": id_, "now": at})
            time.sleep(0.05)

    call("enqueue", {"id": "lost-c", "queue": "gone2", "now": t + 45})
    call("enqueue", {"id": "orphan-c", "after": ["lost-c"], "now": t + 45})
    call("enqueue", {"id": "orphan-x", "after": ["lost-c"], "now": t + 45})  # not retried
    assert call("cancel", {"id": "lost-c", "now": t + 45}) is True
    settled("orphan-c", t + 45)
    settled("orphan-x", t + 45)
    call("enqueue", {"id": "lost-d", "queue": "gone2", "max_attempts": 1, "now": t + 46})
    call("enqueue", {"id": "orphan-d", "after": ["lost-d"], "now": t + 46})
    f = call("claim", {"id": "lost-d", "owner": "w19", "ttl": 60, "now": t + 46})
    assert call("fail", {"id": "lost-d", "owner": "w19", "fence": f, "error": "gone",
                         "now": t + 46}) is True
    settled("orphan-d", t + 46)
    assert call("retry", {"id": "orphan-c"}) is True
    assert call("retry", {"id": "orphan-d"}) is True
    assert call("purge", {"older_than": 0, "queue": "gone2", "now": t + 46}) == 2


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]))
