"""A queue that gains limits counts the leases it handed out before them
(issue 56): on SQLite they are marked held in steps beside the requests,
the queue's claims wait meanwhile, and a restart in the middle goes on where
the marking stopped (fenceq_meta 'mark_held:<queue>')."""

from __future__ import annotations

import sqlite3

from conftest import Daemon

N, LEASED = 30_000, 4_000


def fill(d: Daemon, queue: str, n: int, leased: int) -> None:
    with d.client(timeout=60) as c:
        for start in range(0, n, 1000):
            c.enqueue_many([{"id": f"{queue}-{i:06d}", "queue": queue}
                            for i in range(start, min(n, start + 1000))])
        got = 0
        while got < leased:
            got += len(c.claim_next(queue, "early", 3600, max=min(1000, leased - got)))


def marks(db: str) -> list:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT key, value FROM fenceq_meta WHERE key LIKE 'mark_held:%'").fetchall()
    finally:
        con.close()


def test_leases_from_before_the_limits_count_and_the_marking_holds_no_one_up(start_daemon) -> None:
    d = start_daemon(clock="server")
    fill(d, "big", N, LEASED)
    with d.client(timeout=30) as c:
        assert c.queue_config("big", max_leased=LEASED + 1) is True
        # Exactly one more: the 4,000 leases taken before count.
        got = c.claim_next("big", "late", 60, max=10, wait=5)
        assert len(got) == 1
        assert c.claim_next("big", "late", 60, max=10) == []
        assert c.complete(got[0]["id"], "late", got[0]["fence"], "ok")
        assert len(c.claim_next("big", "late", 60, max=10, wait=5)) == 1
    assert marks(d.db) == []  # done: the serving thread's share is timed by test_scale_sweep.py


def test_a_restart_in_the_middle_of_the_marking_goes_on(start_daemon) -> None:
    d = start_daemon(clock="server")
    fill(d, "q", 5_000, 300)
    with d.client() as c:
        assert c.queue_config("q", max_leased=301) is True
    d.stop()
    # As a kill in the middle of the marking leaves it: half of the leases
    # not marked yet, the marking's row in fenceq_meta.
    con = sqlite3.connect(d.db)
    con.executescript("UPDATE jobs SET held = 0 WHERE queue = 'q' AND rowid % 2 = 0;"
                      "INSERT OR REPLACE INTO fenceq_meta(key, value) VALUES('mark_held:q', 0);")
    con.close()
    d.start()
    with d.client() as c:
        got = c.claim_next("q", "late", 60, max=10, wait=5)
        assert len(got) == 1, "max_leased counted every lease from before the restart"
        assert c.claim_next("q", "late", 60, max=10) == []
    assert marks(d.db) == []


def test_limits_set_again_mark_nothing(start_daemon) -> None:
    d = start_daemon(clock="server")
    fill(d, "q", 100, 10)
    with d.client() as c:
        assert c.queue_config("q", max_leased=20) is True
        assert len(c.claim_next("q", "w", 60, max=50, wait=5)) == 10
        assert c.queue_config("q", max_leased=25) is True
        assert marks(d.db) == []  # limited already: nothing to mark
        assert len(c.claim_next("q", "w", 60, max=50, wait=5)) == 5
