"""The upgrade corpus (issue 59, item 4): one small SQLite file per schema
version (PRAGMA user_version 0, the seed's, to rules::kSchemaVersion), each
holding the jobs of that version's features in every state it had, and
beside each the observable state today's fenceqd must report for every job
once it has migrated the file (tests/upgrade/test_upgrade_corpus.py).

How a file of version N is made: today's ladder (kSchemaV1..kSchemaVN, read
from daemon/storage/sqlite/sqlite_schema.cpp) applied to an empty file, then
the rows inserted as version N's daemon wrote them (the representation of
each version: which columns, which kids bits, kseq, khash, spilled values;
see row()). --check-history checks that the ladder's steps 1..N at the last
commit of each version N are the same text as today's (so a file made by
that daemon had the same tables and indexes); --validate DIR compares the
rows made here with files that real daemons wrote through the wire
(scenario.py; README.md says which).

PostgreSQL (README.md): pg-v00 is made here; --pg writes a real daemon's
dump through the wire; --pg-generated CLUSTER makes the versions of
PG_GENERATED as version 0's (today's PostgreSQL steps, the rows as that
version's daemon wrote them), then pg_dump; --check-pg CLUSTER checks the
steps and function names of those versions in git history and the
generator against the real daemons' dumps (6, 15, 18, 19).

    /usr/bin/python3 tests/upgrade/make_corpus.py [--check-history] [OUT_DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMA_CPP = REPO / "daemon" / "storage" / "sqlite" / "sqlite_schema.cpp"
LATEST = 24  # rules::kSchemaVersion; ladder() checks it

T0 = 1_800_000_000.0  # scenario.py's clock
NOW = T0 + 100  # the time the test reads every fixture at
BLOCKED = 1e15  # rules::kBlockedUntil
SUSPENDED = 2e15  # rules::kSuspendedUntil
BIG = 1500  # over rules::kSpillBytes
# jobs.kids bits (job_rules.hpp) and the schema that brought each.
PARENT, CHILD, RUNTIME, HEADERS, PAYLOAD, RESULT, PARKED, STEPS, SUSPEND = (
    1, 2, 4, 8, 16, 32, 64, 128, 256)
KIDS_SINCE = {PARENT: 9, CHILD: 10, RUNTIME: 11, HEADERS: 12, PAYLOAD: 18, RESULT: 18, PARKED: 19,
              STEPS: 21, SUSPEND: 22}
DEADLINE = T0 + 1_000_000  # the job "deadline"'s, far after NOW


def ladder(text: str | None = None) -> dict[int, str]:
    text = SCHEMA_CPP.read_text() if text is None else text
    steps = {int(m.group(1)): m.group(2)
             for m in re.finditer(r'kSchemaV(\d+)\s*=\s*R"sql\((.*?)\)sql"', text, re.S)}
    return steps


def khash(queue: str, key: str) -> int:
    """SqliteStore::key_hash: FNV-1a 64 over queue, a 0 byte, key."""
    h = 0xCBF29CE484222325
    for c in queue.encode() + b"\0" + key.encode():
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


# The jobs, as today's daemon writes them (scenario.py makes the same ones
# through the wire), with `since`: the first schema whose daemon could make
# it. Columns not named take the column's default.
def J(id_: str, since: int, **cols) -> dict:
    return {"id": id_, "since": since, **cols}


t = T0
JOBS = [
    J("ready-a", 0, payload="a", priority=5, created=t),
    J("ready-b", 0, payload="b", created=t + 1),
    J("delayed", 2, payload="d", not_before=t + 3602, created=t + 2, kids=PARKED),
    J("leased", 0, owner="w1", until=t + 3620, fence=1, attempts=1, created=t + 3),
    J("expired", 0, owner="w2", until=t + 30, fence=1, attempts=1, created=t + 4),
    J("done", 0, owner="w3", until=t + 81, fence=1, result="ok", done=1, attempts=1,
      created=t + 5, finished=t + 22),
    J("dead", 2, fence=1, attempts=1, max_attempts=1, dead=1, error="boom", not_before=t + 23,
      created=t + 6, finished=t + 22),
    J("retrying", 2, fence=1, attempts=1, max_attempts=3, error="transient",
      not_before=t + 3622, created=t + 7, kids=PARKED),
    # Exhausted, not yet written down dead (reap_exhausted runs later).
    J("exhausted", 2, owner="w6", until=t + 31, fence=1, attempts=1, max_attempts=1,
      created=t + 8),
    J("big", 2, payload="x" * BIG, created=t + 9, kids=PAYLOAD),
    J("big-done", 2, owner="w7", until=t + 81, fence=1, result="y" * BIG, done=1, attempts=1,
      created=t + 10, finished=t + 22, kids=RESULT),
    J("cancelled", 3, fence=1, dead=1, cancelled=1, created=t + 24, finished=t + 25),
    J("cancelled-leased", 3, fence=2, attempts=1, dead=1, cancelled=1, created=t + 24,
      finished=t + 26),
    J("progress", 3, owner="w16", until=t + 3600, fence=1, attempts=1, progress="50%",
      created=t + 26),
    J("held", 4, queue="limited", owner="w10", until=t + 3628, fence=1, attempts=1, held=1,
      created=t + 27),
    J("key-old", 5, owner="w11", until=t + 90, fence=1, result="k", done=1, attempts=1,
      ukey="K", created=t + 29, finished=t + 31),
    J("key-new", 5, ukey="K", created=t + 32),
    J("key-leased", 5, queue="other", owner="w12", until=t + 3633, fence=1, attempts=1,
      ukey="L", created=t + 32),
    J("g-a1", 6, queue="gq", owner="w13", until=t + 3636, fence=1, attempts=1, grp="A",
      created=t + 34),
    J("g-a2", 6, queue="gq", priority=1, grp="A", created=t + 34),
    J("g-b1", 6, queue="gq", grp="B", created=t + 35),
    J("parent", 9, created=t + 37, kids=PARENT),
    J("child", 9, not_before=BLOCKED, created=t + 38, kids=CHILD),
    J("parent-done", 9, owner="w14", until=t + 100, fence=1, done=1, attempts=1,
      created=t + 38, finished=t + 41, kids=PARENT),
    J("child-met", 9, not_before=t + 41, created=t + 39, kids=CHILD),
    J("runtime", 11, owner="w15", until=t + 103, fence=1, attempts=1, created=t + 42,
      kids=RUNTIME),
    J("headers", 12, created=t + 44, kids=HEADERS),
    # Schema 9..15 only: a child left blocked for good by a parent that was
    # cancelled (or died), then purged, after the child had been retried
    # (its error, kept by retry, names why; its fence raised by the cancel that
    # the parent's end brought); schema 16 settles it. scenario.py makes them.
    J("orphan-c", 9, fence=1, not_before=BLOCKED, error="parent lost-c cancelled", created=t + 45,
      kids=CHILD, until_version=15),
    # Its sibling, cancelled by the same parent's end and not retried: its
    # edge is settled (met), so schema 16 leaves it as it is.
    J("orphan-x", 9, fence=1, not_before=BLOCKED, dead=1, cancelled=1,
      error="parent lost-c cancelled", created=t + 45, finished=t + 45, kids=CHILD,
      until_version=15),
    J("orphan-d", 9, fence=1, not_before=BLOCKED, error="parent lost-d dead", created=t + 46,
      kids=CHILD, until_version=15),
    # A key's older job revived (retry) after a newer one of the key finished:
    # the unfinished job is not the key's largest seq (schema 7's second
    # UPDATE); from schema 7 a revive gives it the next seq as kseq.
    J("key-revived", 5, fence=1, max_attempts=1, error="boom", ukey="R", created=t + 47,
      revived=True),
    J("key-later", 5, owner="w18", until=t + 110, fence=1, result="r", done=1, attempts=1,
      ukey="R", created=t + 48, finished=t + 50),
    # Leased, with two steps saved by its lease (C3.22): a str and a nil.
    J("steps", 21, owner="w19", until=t + 3651, fence=1, attempts=1, created=t + 51, kids=STEPS),
    # Suspended by its lease for an hour (C3.23): no lease, the attempt given
    # back, a row of job_suspends; and a job with a deadline (C3.24).
    J("suspended", 22, fence=1, not_before=SUSPENDED, created=t + 52, kids=SUSPEND),
    J("deadline", 22, created=t + 53, expires=DEADLINE),
]
DEFAULTS = dict(owner=None, until=0.0, fence=0, result=None, done=0, queue="default",
                payload=None, priority=0, not_before=0.0, attempts=0, max_attempts=None,
                dead=0, error=None, created=0.0, seq=0, finished=0.0, cancelled=0, progress=None,
                held=0, ukey=None, grp=None, kids=0, expires=None)
EDGES = [("parent", "child", 0), ("parent-done", "child-met", 1),
         ("lost-c", "orphan-c", 0), ("lost-c", "orphan-x", 1), ("lost-d", "orphan-d", 0)]
WAITS = {"child": 1, "child-met": 0, "orphan-c": 1, "orphan-x": 1, "orphan-d": 1}  # blocked
PURGED = [("purged", 1, 2), ("lost-c", 1, 9), ("lost-d", 1, 9)]  # id, fence, since


def jobs_of(version: int) -> list[dict]:
    return [j for j in JOBS if j["since"] <= version and version <= j.get("until_version", 99)]


def row(j: dict, seq: int, version: int) -> dict:
    """Job j's row as version `version`'s daemon wrote it (seq: its place)."""
    r = {**DEFAULTS, **{k: v for k, v in j.items() if k in DEFAULTS}, "id": j["id"]}
    for c, since in COLS_SINCE.items():  # no such column yet: its default once added
        if version < since and c in DEFAULTS:
            r[c] = DEFAULTS[c]
    if r["max_attempts"] is None:  # max_attempts left out: 0 (no limit), 25 from schema 6
        r["max_attempts"] = 25 if version >= 6 else 0
    if version < 2:
        r["max_attempts"] = 0
    r["kids"] = sum(b for b in (PARENT, CHILD, RUNTIME, HEADERS, PAYLOAD, RESULT, PARKED, STEPS,
                                SUSPEND)
                    if r["kids"] & b and version >= KIDS_SINCE[b])
    if r["id"] == "steps" and version >= 22:
        # Schemas 22 and 23: a step_save no longer marked its job (24 marks
        # such jobs again); 24 keeps the steps in the row, unmarked.
        r["kids"] &= ~STEPS
    if r["id"] == "steps" and version >= 24:
        r["steps"] = "6:chargeS4:ch_1;4:nonen;"  # rows::StepText: values as they are
    r["seq"] = seq if version >= 2 else 0
    if r["ukey"] is not None:
        if version >= 7:  # revived last of all: the seq after every job's
            r["kseq"] = len(jobs_of(version)) + 1 if j.get("revived") else seq
        if 8 <= version <= 13:
            r["khash"] = khash(r["queue"], r["ukey"])
    return r


COLS_SINCE = {"queue": 2, "payload": 2, "priority": 2, "not_before": 2, "attempts": 2,
              "max_attempts": 2, "dead": 2, "error": 2, "seq": 2, "created": 2, "finished": 2,
              "cancelled": 3, "progress": 3, "held": 4, "ukey": 5, "grp": 6, "kseq": 7,
              "khash": 8, "kids": 9, "expires": 22, "steps": 24}


def make_db(path: Path, version: int, steps: dict[int, str]) -> None:
    if path.exists():
        path.unlink()
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size = 512")  # the least: a file of a few pages of its tables
    db.create_function("fenceq_khash", 2, lambda q, k: khash(q or "", k or ""))
    for n in range(1, max(version, 1) + 1):
        db.executescript(steps[n])
    if version == 0:  # the seed daemon's file: the six columns and its meta table
        db.executescript("CREATE TABLE IF NOT EXISTS fenceq_meta(key TEXT PRIMARY KEY, value);")
    seq = 0
    for j in jobs_of(version):
        seq += 1
        r = row(j, seq, version)
        spill = version >= 18
        payload, result = r["payload"], r["result"]
        if spill and payload is not None and len(payload) > 1024:
            db.execute("INSERT INTO job_payloads(id, payload) VALUES(?, ?)", (r["id"], payload))
            r["payload"] = None
        if spill and result is not None and len(result) > 1024:
            db.execute("INSERT INTO job_results(id, result) VALUES(?, ?)", (r["id"], result))
            r["result"] = None
        cols = ["id", "owner", "until", "fence", "result", "done"]
        cols += [c for c, since in COLS_SINCE.items() if version >= since and c in r]
        db.execute(f"INSERT INTO jobs({', '.join(cols)}) VALUES({', '.join('?' * len(cols))})",
                   [r[c] for c in cols])
    ids = {j["id"] for j in jobs_of(version)}
    purged = {p for p, _, since in PURGED if since <= version and (p == "purged" or
                                                                  "orphan-c" in ids)}
    if version >= 9:
        for parent, child, met in EDGES:
            if child in ids:
                db.execute("INSERT INTO job_after(parent, child, met) VALUES(?, ?, ?)",
                           (parent, child, met))
                db.execute("INSERT INTO job_waits(child, blocked, after_run, wait) "
                           "VALUES(?, ?, 0, 0)", (child, WAITS[child]))
    if version >= 2:
        for p, fence, _ in PURGED:
            if p in purged:
                db.execute("INSERT INTO purged_fences(id, fence) VALUES(?, ?)", (p, fence))
    if version >= 4:
        db.execute("INSERT INTO queue_config(queue, max_leased) VALUES('limited', 5)")
        db.execute("INSERT INTO schedules(name, cron, tz, queue, payload, priority, "
                   "max_attempts, created) VALUES('nightly', '0 3 * * *', 'UTC', 'default', "
                   "'s', 2, ?, ?)", (25 if version >= 6 else 0, t + 28))
    if version >= 11:
        db.execute("INSERT INTO job_runtimes(id, max_runtime, deadline) VALUES('runtime', 600, ?)",
                   (t + 643,))
    if version >= 12:
        db.execute("INSERT INTO job_headers(id, headers) VALUES('headers', '1:h1:v')")
    if 21 <= version <= 23:
        db.execute("INSERT INTO job_steps(id, step, value, is_bin) VALUES('steps', 'charge', "
                   "CAST('ch_1' AS BLOB), 0), ('steps', 'none', NULL, 0)")
    if version >= 22:
        db.execute("INSERT INTO job_suspends(id, token, timeout, fail) VALUES('suspended', "
                   "'0123456789abcdef0123456789abcdef', ?, 0)", (t + 3652,))
        db.execute("INSERT INTO job_deadlines(at, id) VALUES(?, 'deadline')", (DEADLINE,))
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.execute("VACUUM")
    db.close()


def status(r: dict) -> str:
    """rules::status() at NOW."""
    exhausted = r["max_attempts"] > 0 and r["attempts"] >= r["max_attempts"] and r["until"] <= NOW
    if r["done"]:
        return "done"
    if r["cancelled"]:
        return "cancelled"
    if r["dead"] or exhausted:
        return "dead"
    if r["not_before"] >= SUSPENDED:
        return "suspended"
    if r["not_before"] >= BLOCKED:
        return "blocked"
    if r["until"] > NOW:
        return "leased"
    if r["not_before"] > NOW:
        return "delayed"
    return "ready"


def expected(version: int) -> dict:
    """What today's fenceqd must answer at NOW once it migrated the file:
    `job` for each id (None for a purged one), `schedule_list`."""
    jobs = {}
    made = jobs_of(version)
    ids = {j["id"] for j in made}
    for seq, j in enumerate(made, 1):
        r = row(j, seq, version)
        rec = {"id": r["id"], "queue": r["queue"], "state": status(r), "priority": r["priority"],
               "attempts": r["attempts"], "max_attempts": r["max_attempts"],
               "fence": r["fence"], "owner": r["owner"], "until": r["until"],
               "not_before": 0.0 if r["not_before"] >= BLOCKED else r["not_before"],
               "error": r["error"], "created": r["created"], "result": r["result"],
               "payload": r["payload"]}
        if r["progress"] is not None:
            rec["progress"] = r["progress"]
        if r["ukey"] is not None:
            rec["key"] = r["ukey"]
        if r["grp"] is not None:
            rec["group"] = r["grp"]
        after = sorted(p for p, c, _ in EDGES if c == r["id"]) if version >= 9 else []
        if after:
            rec["after"] = after
        blocked = sorted(c for p, c, _ in EDGES if p == r["id"] and c in ids and WAITS[c])
        if blocked:
            rec["blocked_children"] = blocked
        if r["id"] == "headers":
            rec["headers"] = {"h": "v"}
        if r["id"] == "steps":
            rec["steps"] = {"charge": "ch_1", "none": None}
        if r["id"] == "suspended":
            rec["suspended"] = {"timeout": t + 3652, "on_timeout": "retry"}
        if r["id"] in ("orphan-c", "orphan-d"):
            # Schema 16 finds the purged parent failed; the daemon's steps
            # cancel the child (after_failure "cancel"), its fence raised.
            rec.update(state="cancelled", fence=2)
            rec["settles"] = True
        if r["id"] == "exhausted":
            rec["error_any_of"] = [None, "the last allowed attempt ended without a complete"]
            del rec["error"]
        jobs[r["id"]] = rec
    purged = ["purged"] if version >= 2 else []
    schedules = []
    if version >= 4:
        schedules = [{"name": "nightly", "cron": "0 3 * * *", "tz": "UTC", "queue": "default",
                      "payload": "s", "priority": 2, "max_attempts": 25 if version >= 6 else 0,
                      "next": 1800068400.0, "last": None}]
    return {"version": version, "now": NOW, "jobs": jobs, "purged": purged,
            "schedules": schedules}


def dump(path: Path) -> dict[str, list]:
    """The rows of every table but fenceq_meta (each run's marks), seq as
    each job's rank (a purged job's seq is skipped in a real file), kseq as
    whether it is the job's seq."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out: dict[str, list] = {}
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                              "AND name NOT IN ('fenceq_meta', 'sqlite_sequence') ORDER BY name"):
        cur = db.execute(f"SELECT * FROM {name}")
        cols = [d[0] for d in cur.description]
        out[name] = [dict(zip(cols, r)) for r in cur]
    if "seq" in (out["jobs"][0] if out["jobs"] else {}):
        rank = {r["id"]: n for n, r in enumerate(sorted(out["jobs"], key=lambda r: r["seq"]))}
        for r in out["jobs"]:
            if "kseq" in r:
                r["kseq"] = None if r["kseq"] is None else ("seq" if r["kseq"] == r["seq"]
                                                            else r["kseq"] - r["seq"])
            r["seq"] = rank[r["id"]]
    for rows in out.values():
        rows.sort(key=lambda r: json.dumps(r, sort_keys=True, default=str))
    schema = [{"type": ty, "name": n, "sql": sql} for ty, n, sql in
              sorted(db.execute("SELECT type, name, sql FROM sqlite_master"))]
    db.close()
    return {"schema": schema, **out}


def validate(real: Path, version: int, steps: dict[int, str]) -> int:
    """Differences between a file a real daemon of `version` wrote (scenario.py)
    and the file made here, the exhausted job's reap aside (the real daemon
    writes it down dead by then; the made file has it not yet reaped)."""
    made = real.with_name(real.stem + ".made.db")
    make_db(made, version, steps)
    a, b = dump(real), dump(made)
    bad = 0
    for table in sorted(set(a) | set(b)):
        ra, rb = a.get(table, []), b.get(table, [])
        if table == "schema":
            ra = [r for r in ra if r["name"] != "outbox_drained"]
        if table == "jobs":
            for r in ra + rb:
                if r["id"] == "exhausted":
                    r.update(dead=None, error=None, finished=None, not_before=None)
        if ra != rb:
            bad += 1
            print(f"{table}: the real file's rows differ from the made file's")
            for r in ra:
                if r not in rb:
                    print("  real:", r)
            for r in rb:
                if r not in ra:
                    print("  made:", r)
    print(f"version {version}: {'same' if not bad else f'{bad} tables differ'}")
    return bad


PG_SCHEMA = "fenceq_corpus"  # the schema every PostgreSQL fixture is in


def pg_v0_sql() -> str:
    """A PostgreSQL database of the contract's six columns (version 0: no
    fenceq_schema_version yet), with version 0's jobs: today's kSchemaV1 of
    pg_statements.cpp in a schema of its own."""
    text = (REPO / "daemon" / "storage" / "pg" / "pg_statements.cpp").read_text()
    create = ladder(text)[1].strip().replace("CREATE TABLE IF NOT EXISTS jobs(",
                                              f"CREATE TABLE {PG_SCHEMA}.jobs(")
    lines = [f"-- The upgrade corpus: version 0 (make_corpus.py).", f"CREATE SCHEMA {PG_SCHEMA};",
             create]

    def lit(v) -> str:
        if v is None:
            return "NULL"
        return "'" + v.replace("'", "''") + "'" if isinstance(v, str) else repr(v)
    for seq, j in enumerate(jobs_of(0), 1):
        r = row(j, seq, 0)
        cols = ["id", "owner", "until", "fence", "result", "done"]
        lines.append(f"INSERT INTO {PG_SCHEMA}.jobs({', '.join(cols)}) VALUES("
                     + ", ".join(lit(r[c]) for c in cols) + ");")
    return "\n".join(lines) + "\n"


# The PostgreSQL versions made here rather than by an old daemon: each one
# whose schema differs from the one before (pg_statements.cpp's
# migrations(): 7, 8, 9, 14, 17, 18 and 19 have no SQL of their own) and
# that has no dump of a real daemon (6, 15, 18, 19: pg_from_daemon).
PG_GENERATED = [1, 2, 3, 4, 5, 10, 11, 12, 13, 16]
PG_DIR = REPO / "daemon" / "storage" / "pg"
PG_KIDS = PARENT | CHILD  # PostgreSQL's kids bits (max_runtime, headers are columns there)
PG_COLS_SINCE = {"cancelled": 3, "progress": 3, "held": 4, "ukey": 5, "grp": 6, "kids": 10,
                 "max_runtime": 11, "deadline": 11, "headers": 12}
APPLIED = "2026-12-07 00:00:00+00"  # fenceq_schema_version.applied: fixed, for a stable dump


def pg_ladder() -> dict[int, str]:
    """Today's PostgreSQL steps (pg_statements.cpp, pg_after.cpp) by version,
    and -1: pg_groups.cpp's kGroupColumns (created at start since version
    15's last daemon, 9568d83, once)."""
    steps: dict[int, str] = {}
    for f in ("pg_statements.cpp", "pg_after.cpp"):
        steps.update(ladder((PG_DIR / f).read_text()))
    groups = re.search(r'kGroupColumns\s*=\s*R"sql\((.*?)\)sql"',
                       (PG_DIR / "pg_groups.cpp").read_text(), re.S)
    steps[-1] = groups.group(1)
    return steps


def pg_features(version: int) -> int:
    """The schema version whose jobs (jobs_of) a PostgreSQL daemon of
    `version` could make: version 1's daemon (c92dff7) created the work
    queue's columns of version 2 while it marked the database 1."""
    return 2 if version == 1 else version


def pg_row(j: dict, seq: int, version: int) -> dict:
    """Job j's row as the PostgreSQL daemon of `version` wrote it (the rows
    of the real dumps pg-v06, pg-v15: held once a claim took the job, from
    4, never cleared; the kids bits of `after` only, from 10; max_runtime,
    deadline and headers as columns; no kseq, khash or spilled values)."""
    r = row(j, seq, pg_features(version))
    claimed = r["owner"] is not None or r["attempts"] > 0 or j.get("revived", False)
    out = {c: r[c] for c in ("id", "owner", "until", "fence", "result", "done", "queue",
                             "priority", "not_before", "attempts", "max_attempts", "dead",
                             "error", "seq", "created", "finished", "cancelled", "progress",
                             "ukey", "grp")}
    out["payload"] = None if r["payload"] is None else r["payload"].encode()
    out["payload_binary"] = r["payload"] is None  # the corpus's payloads are str
    out["held"] = 1 if claimed and version >= 4 else 0
    out["kids"] = r["kids"] & PG_KIDS
    out["max_runtime"], out["deadline"] = (600.0, t + 643) if j["id"] == "runtime" else (0.0, 0.0)
    out["headers"] = "1:h1:v" if j["id"] == "headers" else None
    return {c: v for c, v in out.items() if version >= PG_COLS_SINCE.get(c, 0)}


def pg_generated_sql(version: int) -> list[tuple[str, tuple]]:
    """The statements that make schema PG_SCHEMA of `version` as its daemon
    left it (tables, indexes, sequences, marks, rows), in order. No
    functions or triggers: today's start makes every one again (CREATE OR
    REPLACE, and DROP of the former signatures; README.md says why)."""
    steps = pg_ladder()
    out: list[tuple[str, tuple]] = [
        (f"CREATE SCHEMA {PG_SCHEMA}", ()), (f"SET search_path = {PG_SCHEMA}", ()),
        ("CREATE TABLE IF NOT EXISTS fenceq_schema_version(version integer PRIMARY KEY, "
         "applied timestamptz NOT NULL DEFAULT now())", ())]
    # Version 1's daemon ran today's steps 1 and 2 as one script and marked 1
    # (c92dff7's kSchemaV1); from 2 on each daemon marked 1..N.
    upto = 2 if version == 1 else version
    # In the order those daemons ran them on an empty schema (their
    # migrate(), 158e2f6 to 4ad5f11): 11, then pg_after.cpp's (10, 15, 16),
    # then 12 and 13; so the columns of jobs stand as in pg-v15. Since
    # 623ff77 (version 19) migrations() runs in version order, as pg-v19's.
    order = [1, 2, 3, 4, 5, 6, 11, 10, 15, 16, 12, 13] if version < 19 else sorted(steps)[1:]
    out += [(steps[n], ()) for n in order if n <= upto]
    if version >= 15:
        out.append((steps[-1], ()))
    marks = [1] if version == 1 else list(range(1, version + 1))
    out.append(("INSERT INTO fenceq_schema_version(version, applied) VALUES "
                + ", ".join(f"({m}, '{APPLIED}')" for m in marks), ()))
    made = jobs_of(pg_features(version))
    ids = {j["id"] for j in made}
    for seq, j in enumerate(made, 1):
        r = pg_row(j, seq, version)
        out.append((f"INSERT INTO jobs({', '.join(r)}) VALUES({', '.join(['%s'] * len(r))})",
                    tuple(r.values())))
    out.append(("SELECT setval('jobs_seq', %s)", (len(made),)))
    for p, fence, since in PURGED:
        if since <= pg_features(version) and (p == "purged" or "orphan-c" in ids):
            out.append(("INSERT INTO purged_fences(id, fence) VALUES(%s, %s)", (p, fence)))
    if version >= 10:
        for parent, child, met in EDGES:
            if child in ids:
                out.append(("INSERT INTO job_after(parent, child, met) VALUES(%s, %s, %s)",
                            (parent, child, met)))
                out.append(("INSERT INTO job_waits(child, blocked, after_run, wait) "
                            "VALUES(%s, %s, 0, 0)", (child, WAITS[child])))
    if version >= 4:
        out.append(("INSERT INTO queue_config(queue, max_leased) VALUES('limited', 5)", ()))
        out.append(("INSERT INTO schedules(name, cron, tz, queue, payload, payload_binary, "
                    "priority, max_attempts, created) VALUES('nightly', '0 3 * * *', 'UTC', "
                    "'default', %s, false, 2, %s, %s)",
                    (b"s", 25 if version >= 6 else 0, t + 28)))
    if version >= 6:  # the groups a claim or an enqueue of each made
        out.append(("INSERT INTO queue_groups(queue, grp) VALUES('gq', 'A'), ('gq', 'B')", ()))
    return out


def pg_generated(version: int, host: str, out: Path) -> None:
    """pg_generated_sql(version) in a fresh database of the cluster at
    `host`, dumped as plain SQL (pg_dump) into `out`."""
    import psycopg2  # noqa: PLC0415
    name = f"corpus_g{version}_{os.getpid()}"
    admin = psycopg2.connect(host=host, user="postgres", dbname="postgres")
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    try:
        con = psycopg2.connect(host=host, user="postgres", dbname=name)
        with con, con.cursor() as cur:
            for sql, args in pg_generated_sql(version):
                cur.execute(sql, args or None)
        con.close()
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "-n", PG_SCHEMA,
                               f"postgresql:///{name}?host={host}&user=postgres"],
                              capture_output=True, text=True, check=True).stdout
        # pg_dump's \restrict key is random each run: a fixed one, for a stable file.
        dump = re.sub(r"^\\(un)?restrict \S+$", lambda m: f"\\{m.group(1) or ''}restrict "
                      "fenceqcorpus", dump, flags=re.M)
        out.write_text(f"-- The upgrade corpus: PostgreSQL version {version}, generated "
                       "(make_corpus.py --pg-generated: today's ladder to "
                       f"{version}, rows as version {version}'s daemon wrote them, no functions "
                       "or triggers).\n" + dump)
    finally:
        admin.cursor().execute(f"DROP DATABASE {name}")
        admin.close()


def pg_rows(host: str, db: str) -> dict[str, list]:
    """Every table's rows of PG_SCHEMA in `db` (seq as each job's rank, the
    marks' times left out), its indexes and its columns in order."""
    import psycopg2  # noqa: PLC0415
    con = psycopg2.connect(host=host, user="postgres", dbname=db)
    cur = con.cursor()
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "ORDER BY 1", (PG_SCHEMA,))
    out: dict[str, list] = {}
    for (table,) in cur.fetchall():
        cur.execute(f"SELECT * FROM {PG_SCHEMA}.{table}")
        cols = [d[0] for d in cur.description]
        rows = [{c: bytes(v) if isinstance(v, memoryview) else v for c, v in zip(cols, r)
                 if c != "applied"} for r in cur.fetchall()]
        if table == "jobs":
            rank = {r["id"]: n for n, r in enumerate(sorted(rows, key=lambda r: r["seq"]))}
            for r in rows:
                r["seq"] = rank[r["id"]]
        out[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1",
                (PG_SCHEMA,))
    out["(indexes)"] = cur.fetchall()
    cur.execute("SELECT table_name, column_name, data_type, column_default FROM "
                "information_schema.columns WHERE table_schema = %s ORDER BY 1, ordinal_position",
                (PG_SCHEMA,))
    out["(columns)"] = cur.fetchall()
    con.close()
    return out


# The last commit of each PostgreSQL version made here (check_history's
# "first commit of N + 1"^), for check_pg_history.
PG_LAST_COMMIT = {1: "c92dff7", 2: "767eb58", 3: "2bae50c", 4: "d15eba6", 5: "a8f74a1",
                  10: "f57a9d1", 11: "158e2f6", 12: "9db22d0", 13: "ec9a90a", 16: "4ad5f11"}


def check_pg_history() -> int:
    """The PostgreSQL steps at the last commit of each version of
    PG_GENERATED against today's, and the functions and triggers it created
    against today's names (pg_generated_sql leaves them out: each must be
    one today's start makes again). Version 1's single step is today's 1
    and 2 and its mark, statement for statement (pg_generated_sql runs
    them so)."""
    today = pg_ladder()
    fn = re.compile(r"CREATE (?:OR REPLACE )?(?:TRIGGER|FUNCTION) ([a-z_]+)")

    def pg_files(commit: str) -> list[str]:
        names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", commit,
                                "daemon"], capture_output=True, text=True, check=True).stdout
        return [f for f in names.split() if "pg_" in f.rsplit("/", 1)[-1] and f.endswith(".cpp")]

    def text(commit: str, f: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{f}"],
                              capture_output=True, text=True, check=True).stdout
    now_names = {m for f in pg_files("HEAD") for m in fn.findall(text("HEAD", f))}
    bad = 0
    for v, commit in PG_LAST_COMMIT.items():
        old: dict[int, str] = {}
        names: set[str] = set()
        for f in pg_files(commit):
            old.update(ladder(text(commit, f)))
            names |= set(fn.findall(text(commit, f)))
        if v == 1:  # its statements are today's 1 and 2 (jobs_seq made first) and its mark
            def stmts(sql: str) -> list[str]:
                sql = re.sub(r"--[^\n]*", "", sql)
                return sorted(" ".join(x.split()) for x in sql.split(";") if x.strip())
            same = {1: stmts(old[1]) == stmts(today[1] + today[2] + "INSERT INTO "
                                              "fenceq_schema_version(version) VALUES (1);")}
        else:
            same = {k: old[k].strip() == today[k].strip() for k in old}
            same.update({k: False for k in today if 1 <= k <= v and k not in old})
        gone = sorted(names - now_names)
        print(f"PostgreSQL version {v} ({commit}): steps {sorted(same)} "
              f"{'same' if all(same.values()) else 'DIFFER'}; functions and triggers "
              f"{sorted(names) or 'none'}{', not made today: ' + str(gone) if gone else ''}")
        bad += (not all(same.values())) + len(gone)
    return bad


def check_pg(host: str, out_dir: Path) -> int:
    """pg_generated_sql() of the versions that have a dump of a real daemon
    (6, 15, 18, 19), against that dump restored: rows, indexes and columns
    (the exhausted job's reap aside, as validate())."""
    import psycopg2  # noqa: PLC0415
    admin = psycopg2.connect(host=host, user="postgres", dbname="postgres")
    admin.autocommit = True
    bad = 0
    for v in (6, 15, 18, 19):
        real, made = f"corpus_real{v}_{os.getpid()}", f"corpus_made{v}_{os.getpid()}"
        for db in (real, made):
            admin.cursor().execute(f"CREATE DATABASE {db}")
        try:
            subprocess.run(["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-f",
                            str(out_dir / f"pg-v{v:02d}.sql"),
                            f"postgresql:///{real}?host={host}&user=postgres"],
                           check=True, capture_output=True)
            con = psycopg2.connect(host=host, user="postgres", dbname=made)
            with con, con.cursor() as cur:
                for sql, args in pg_generated_sql(v):
                    cur.execute(sql, args or None)
            con.close()
            a, b = pg_rows(host, real), pg_rows(host, made)
        finally:
            for db in (real, made):
                admin.cursor().execute(f"DROP DATABASE {db}")
        for r in a.get("jobs", []) + b.get("jobs", []):
            if r["id"] == "exhausted":
                r.update(dead=None, error=None, finished=None)
        differ = [tb for tb in sorted(set(a) | set(b)) if a.get(tb) != b.get(tb)]
        for tb in differ:
            print(f"version {v}, {tb}: the real dump's rows differ from the generated ones")
            for r in a.get(tb, []):
                if r not in b.get(tb, []):
                    print("  real:", str(r)[:300])
            for r in b.get(tb, []):
                if r not in a.get(tb, []):
                    print("  made:", str(r)[:300])
        print(f"PostgreSQL version {v}: {'same' if not differ else f'{len(differ)} differ'}")
        bad += len(differ)
    admin.close()
    return bad


def pg_expected(version: int) -> dict:
    """expected() of the jobs a PostgreSQL daemon of `version` made."""
    exp = expected(pg_features(version))
    exp["version"] = version
    if pg_features(version) != version:
        exp["features"] = pg_features(version)
    return exp


def pg_from_daemon(fenceqd: str, version: int, host: str, out: Path) -> None:
    """scenario.py on a fresh database, through `fenceqd` (of `version`,
    built from git history), dumped as plain SQL (pg_dump) into `out`."""
    import psycopg2  # noqa: PLC0415  (only here: make_db needs none)
    name = f"corpus_v{version}_{os.getpid()}"
    admin = psycopg2.connect(host=host, user="postgres", dbname="postgres")
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    uri = f"postgresql:///{name}?host={host}&user=postgres"
    try:
        con = psycopg2.connect(host=host, user="postgres", dbname=name)
        con.autocommit = True
        con.cursor().execute(f"CREATE SCHEMA {PG_SCHEMA}")
        con.close()
        with tempfile.TemporaryDirectory() as d:
            sock = Path(d) / "s.sock"
            with open(Path(d) / "log", "wb") as log:
                p = subprocess.Popen([fenceqd, "--db", f"{uri}&options=-csearch_path%3D{PG_SCHEMA}",
                                      "--clock", "client", "--listen", f"ipc://{sock}"],
                                     stdout=log, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 30
                while not sock.exists():
                    assert p.poll() is None and time.monotonic() < deadline, \
                        (Path(d) / "log").read_text()
                    time.sleep(0.05)
                subprocess.run([sys.executable, str(HERE / "scenario.py"), f"ipc://{sock}",
                                str(version)], check=True, timeout=120)
            finally:
                p.terminate()
                p.wait(timeout=30)
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "-n", PG_SCHEMA, uri],
                              capture_output=True, text=True, check=True).stdout
        commit = subprocess.run(["git", "-C", str(Path(fenceqd).resolve().parents[2]), "log", "-1",
                                 "--format=%h"], capture_output=True, text=True).stdout.strip()
        out.write_text(f"-- The upgrade corpus: version {version}, written through the wire by "
                       f"the fenceqd of commit {commit} (scenario.py; make_corpus.py --pg).\n"
                       + dump)
    finally:
        admin.cursor().execute(f"DROP DATABASE {name}")
        admin.close()


def check_history() -> int:
    """Steps 1..N at the last commit of each version N against today's."""
    today = ladder()
    bad = 0
    for n in range(2, LATEST + 1):
        first = subprocess.run(["git", "-C", str(REPO), "log", "--format=%H", "--reverse", "-S",
                                f"kSchemaVersion = {n};", "--", "daemon"],
                               capture_output=True, text=True, check=True).stdout.split()[0]
        files = subprocess.run(["git", "-C", str(REPO), "grep", "-l",
                                "ALTER TABLE jobs ADD COLUMN queue", first + "^", "--", "daemon"],
                               capture_output=True, text=True).stdout.split()
        old: dict[int, str] = {}
        for f in files:
            old.update(ladder(subprocess.run(["git", "-C", str(REPO), "show", f],
                                             capture_output=True, text=True).stdout))
        for k in range(2, n):  # version 1 was kSchema then, with fenceq_meta (make_db's v0)
            same = k in old and old[k].strip() == today[k].strip()
            print(f"version {n - 1} ({first[:8]}^): step {k} {'same' if same else 'DIFFERS'}")
            bad += not same
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=str(HERE / "corpus"))
    ap.add_argument("--check-history", action="store_true")
    ap.add_argument("--validate", nargs=2, metavar=("REAL_DB", "VERSION"))
    ap.add_argument("--pg", nargs=3, metavar=("FENCEQD", "VERSION", "PG_SOCKET_DIR"),
                    help="write OUT_DIR/pg-vNN.sql by FENCEQD (of schema VERSION) through "
                         "the wire on the cluster at PG_SOCKET_DIR, and its .json")
    ap.add_argument("--pg-generated", metavar="PG_SOCKET_DIR",
                    help="write OUT_DIR/pg-vNN.sql and .json of each version of PG_GENERATED, "
                         "generated on the cluster at PG_SOCKET_DIR")
    ap.add_argument("--check-pg", metavar="PG_SOCKET_DIR",
                    help="compare the generated schema of versions 6, 15, 18 and 19 with the "
                         "real daemons' dumps of OUT_DIR, on the cluster at PG_SOCKET_DIR")
    a = ap.parse_args()
    steps = ladder()
    assert sorted(steps) == list(range(1, LATEST + 1)), "the ladder is not 1..LATEST"
    if a.validate:
        return 1 if validate(Path(a.validate[0]), int(a.validate[1]), steps) else 0
    if a.check_history and check_history():
        return 1
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.check_pg:
        return 1 if check_pg_history() + check_pg(a.check_pg, out) else 0
    if a.pg_generated:
        for v in PG_GENERATED:
            pg_generated(v, a.pg_generated, out / f"pg-v{v:02d}.sql")
            (out / f"pg-v{v:02d}.json").write_text(json.dumps(pg_expected(v), indent=1) + "\n")
        return 0
    if a.pg:
        v = int(a.pg[1])
        pg_from_daemon(a.pg[0], v, a.pg[2], out / f"pg-v{v:02d}.sql")
        (out / f"pg-v{v:02d}.json").write_text(json.dumps(expected(v),
                                                          indent=1) + "\n")
        return 0
    (out / "pg-v00.sql").write_text(pg_v0_sql())
    (out / "pg-v00.json").write_text(json.dumps(expected(0), indent=1) + "\n")
    for v in range(0, LATEST + 1):
        make_db(out / f"sqlite-v{v:02d}.db", v, steps)
        (out / f"sqlite-v{v:02d}.json").write_text(json.dumps(expected(v), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
