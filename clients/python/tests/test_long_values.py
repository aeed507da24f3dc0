"""Long payloads and results on SQLite (schema 18, issue 56): kept out of
their jobs rows (job_payloads, job_results) so that no read of a job's other
columns walks their pages, and given back exactly as sent: str as str,
bytes as bytes, through every read, a key's replace, a purge, and the
upgrade of a file of schema 17 that held them in the row.
"""
import re
import sqlite3
from typing import Dict, List

import pytest
from conftest import REPO, Daemon

LONG_TEXT = "t" * 1025  # rules::kSpillBytes is 1024: one byte over
LONG_BIN = bytes(range(256)) * 300
SHORT = "s" * 1024  # exactly at the bound: stays in the row


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    return start_daemon(clock="server")


def rows(db: str, sql: str) -> List[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def schema_version() -> int:
    """rules::kSchemaVersion: what a file is upgraded to."""
    text = (REPO / "daemon" / "storage" / "job_rules.hpp").read_text()
    return int(re.search(r"kSchemaVersion = (\d+);", text).group(1))


def spilled(db: str) -> Dict[str, List[str]]:
    return {"payloads": sorted(r[0] for r in rows(db, "SELECT id FROM job_payloads")),
            "results": sorted(r[0] for r in rows(db, "SELECT id FROM job_results"))}


def test_long_payloads_and_results_round_trip_and_leave_the_row(daemon: Daemon) -> None:
    with daemon.client() as c:
        assert c.enqueue("text", queue="q", payload=LONG_TEXT)
        assert c.enqueue("bin", queue="q", payload=LONG_BIN)
        assert c.enqueue("short", queue="q", payload=SHORT)
        assert c.job("text")["payload"] == LONG_TEXT
        got = {j["id"]: j for j in c.claim_next("q", "w", 60, max=10)}
        assert got["text"]["payload"] == LONG_TEXT and isinstance(got["text"]["payload"], str)
        assert got["bin"]["payload"] == LONG_BIN and isinstance(got["bin"]["payload"], bytes)
        assert got["short"]["payload"] == SHORT
        assert c.complete("text", "w", got["text"]["fence"], "r" * 5000)
        assert c.complete("bin", "w", got["bin"]["fence"], "ok")
        res = c.results(["text", "bin", "short"])
        assert res["text"] == {"state": "done", "result": "r" * 5000}
        assert res["bin"]["result"] == "ok" and res["short"]["result"] is None
        assert c.job("text")["result"] == "r" * 5000
        # states_only still says that a long result is there, without it.
        assert c.results(["text"], states_only=True)["text"].get("omitted") is True
    assert spilled(daemon.db) == {"payloads": ["bin", "text"], "results": ["text"]}
    # Their rows of jobs hold none of it.
    assert rows(daemon.db, "SELECT id, payload IS NULL, result IS NULL, kids & 48 FROM jobs "
                           "ORDER BY id") == [("bin", 1, 0, 16), ("short", 0, 1, 0),
                                              ("text", 1, 1, 48)]


def test_a_keys_replace_moves_the_payload_in_and_out(daemon: Daemon) -> None:
    with daemon.client() as c:
        c.enqueue_unique("k1", "key", queue="q", payload=LONG_TEXT)
        assert spilled(daemon.db)["payloads"] == ["k1"]
        c.enqueue_unique("k2", "key", queue="q", payload="small", on_conflict="replace")
        assert c.job("k1")["payload"] == "small"
        assert spilled(daemon.db)["payloads"] == []
        c.enqueue_unique("k3", "key", queue="q", payload=LONG_BIN, on_conflict="replace")
        assert c.job("k1")["payload"] == LONG_BIN
        assert spilled(daemon.db)["payloads"] == ["k1"]
        j = c.claim_next("q", "w", 60)
        assert j["id"] == "k1" and j["payload"] == LONG_BIN


def test_a_purge_takes_the_long_values_along(daemon: Daemon) -> None:
    with daemon.client() as c:
        for i in range(3):
            assert c.enqueue(f"j{i}", queue="q", payload=LONG_TEXT)
        for j in c.claim_next("q", "w", 60, max=3):
            assert c.complete(j["id"], "w", j["fence"], LONG_TEXT)
        assert len(spilled(daemon.db)["results"]) == 3
        assert c.purge(0, queue="q") == 3
        assert spilled(daemon.db) == {"payloads": [], "results": []}
        # The id again: a new job, with nothing of the old one's.
        assert c.enqueue("j0", queue="q", payload="new")
        assert c.job("j0")["payload"] == "new" and c.job("j0")["result"] is None


def test_a_file_of_schema_17_with_long_values_in_its_rows_is_upgraded(start_daemon) -> None:
    d = start_daemon(clock="server")
    with d.client() as c:
        assert c.enqueue("old", queue="q", payload=LONG_BIN)
        assert c.enqueue("done", queue="q", payload="p")
        for j in c.claim_next("q", "w", 60, max=2):
            assert c.complete(j["id"], "w", j["fence"], LONG_TEXT if j["id"] == "done" else None)
    d.stop()
    # As schema 17 left it: the values in their rows, no tables of them.
    con = sqlite3.connect(d.db)
    con.executescript(f"""
        UPDATE jobs SET payload = (SELECT payload FROM job_payloads p WHERE p.id = jobs.id),
                        kids = kids & ~16 WHERE kids & 16;
        UPDATE jobs SET result = (SELECT result FROM job_results r WHERE r.id = jobs.id),
                        kids = kids & ~32 WHERE kids & 32;
        DROP TRIGGER jobs_extras_gone;
        CREATE TRIGGER jobs_extras_gone AFTER DELETE ON jobs WHEN (OLD.kids & 12) <> 0 BEGIN
          DELETE FROM job_headers WHERE id = OLD.id;
          DELETE FROM job_runtimes WHERE id = OLD.id;
        END;
        DROP TABLE job_payloads; DROP TABLE job_results;
        DROP TABLE job_steps; DROP TABLE job_suspends;
        DROP TRIGGER jobs_deadline_gone; DROP TABLE job_deadlines;
        ALTER TABLE jobs DROP COLUMN expires; ALTER TABLE jobs DROP COLUMN steps;
        DROP TABLE group_config; ALTER TABLE queue_config DROP COLUMN group_overrides;
        PRAGMA user_version = 17;""")
    con.close()
    assert rows(d.db, "SELECT length(payload) FROM jobs WHERE id = 'old'") == [(len(LONG_BIN),)]
    d.start()
    assert rows(d.db, "PRAGMA user_version") == [(schema_version(),)]
    assert spilled(d.db) == {"payloads": ["old"], "results": ["done"]}
    with d.client() as c:
        assert c.job("old")["payload"] == LONG_BIN
        assert c.results(["done"])["done"]["result"] == LONG_TEXT
        assert c.purge(0, queue="q") == 2
    assert spilled(d.db) == {"payloads": [], "results": []}


def test_a_purge_of_every_queue_goes_queue_after_queue_in_chunks(daemon: Daemon) -> None:
    """Schema 18's jobs_finished is by (queue, finished): a purge without a
    queue takes one queue at a time, in chunks of 256 and 1 MiB, from where
    the last chunk stopped; every finished job of every queue goes, none of
    those that finished after the cutoff, no open one."""
    with daemon.client(timeout=30) as c:
        for q in ("a", "b", "c"):
            c.enqueue_many([{"id": f"{q}{i:04d}", "queue": q, "payload": LONG_TEXT if i % 50 == 0 else "p"}
                            for i in range(700)])
            for j in c.claim_next(q, "w", 60, max=600):
                assert c.complete(j["id"], "w", j["fence"], LONG_TEXT if j["id"].endswith("7") else "ok")
        assert c.purge(3600) == 0  # none finished an hour ago
        assert c.purge(0) == 1800
        left = c.stats()["queues"]
        assert {q: (left[q].get("done", 0), left[q].get("ready", 0)) for q in "abc"} == \
            {q: (0, 100) for q in "abc"}
    assert spilled(daemon.db)["results"] == []
    assert len(spilled(daemon.db)["payloads"]) == 3 * 2  # the open jobs' own: a600, a650, ...
