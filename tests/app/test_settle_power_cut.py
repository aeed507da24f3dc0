"""A settle step's COMMIT skips its fsync on SQLite, even with --sync full
(docs/operating.md, "Durability"; Store::relax_next_commit): what a power cut
may undo is steps alone, never an acknowledged write, and the next start
does their work again (C1.4, C3.13).

Real fenceqd ($FENCEQD) on fenceq-lossyfs ($FENCEQ_LOSSYFS), which forgets
at a cut whatever was not fsynced. A parent of 20,000 children completes (its
own transaction settles one page; steps do the rest); while the steps run, a
worker claims the children they make ready, each claim acknowledged. Then
kill -9 and a power cut, in rounds. After each restart: the parent is still
done, every acknowledged claim is still there (its COMMIT's fsync took the
steps before it along: one WAL), and in the end every child is settled
(ready or leased, none left blocked), each exactly once.
"""

from __future__ import annotations

import time

from app_support import Fenceqd, LossyMount

import fenceq  # noqa: E402  (app_support puts the client on the path)

CHILDREN = 20000
ROUNDS = 3


def settled(c: fenceq.Client) -> dict:
    return c.stats()["queues"].get("kids", {})


def test_a_power_cut_while_children_settle_loses_no_acknowledged_write(tmp_path):
    mount = LossyMount()
    try:
        db = str(mount.mnt / "jobs.db")
        d = Fenceqd(["--db", db, "--sync", "full", "--clock", "server"], tmp_path, "d")
        claimed: dict[str, int] = {}  # acknowledged claims: id -> fence
        with fenceq.Client(d.endpoint, timeout=30) as c:
            c.enqueue("parent", queue="top")
            for k in range(0, CHILDREN, 1000):
                c.enqueue_many([{"id": f"kid-{i:05d}", "queue": "kids", "after": ["parent"]}
                                for i in range(k, k + 1000)])
            job = c.claim_next("top", "w", 600)
            assert job and job["id"] == "parent"
            assert c.complete("parent", "w", job["fence"], "ok")
        for _ in range(ROUNDS):
            with fenceq.Client(d.endpoint, timeout=30) as c:
                # A few claims while the steps go on (each one acknowledged).
                for _ in range(5):
                    for j in c.claim_next("kids", "w", 600, max=20):
                        assert j["id"] not in claimed, j["id"]
                        claimed[j["id"]] = j["fence"]
            d.kill9()
            mount.cut()
            d.start()
            with fenceq.Client(d.endpoint, timeout=30) as c:
                parent = c.job("parent")
                assert parent is not None and parent["state"] == "done", parent
                for jid, fence in claimed.items():
                    got = c.job(jid)
                    assert got is not None and got["state"] == "leased", (jid, got)
                    assert got["fence"] == fence, (jid, got, fence)
        assert claimed, "no child was ready before the cuts"
        # Whatever a cut undid is settled again: every child ready or leased.
        with fenceq.Client(d.endpoint, timeout=30) as c:
            deadline = time.monotonic() + 60
            while settled(c).get("blocked", 0):
                assert time.monotonic() < deadline, settled(c)
                time.sleep(0.2)
            row = settled(c)
            assert row.get("ready", 0) + row.get("leased", 0) == CHILDREN, row
            assert row.get("leased", 0) == len(claimed), (row, len(claimed))
            # Each child claimable once more: no child twice, none lost.
            rest = []
            while True:
                page = c.claim_next("kids", "w2", 600, max=1000)
                if not page:
                    break
                rest += [j["id"] for j in page]
            assert len(rest) == len(set(rest)) == CHILDREN - len(claimed)
            assert not set(rest) & set(claimed)
        d.stop()
    finally:
        mount.close()
