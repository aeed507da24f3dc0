"""How long today's fenceqd's first start on a big file of an older schema
takes (its migration), against a second start on the migrated file (no
migration): docs/operating.md, "Upgrades". Not part of make test.

    /usr/bin/python3 tests/upgrade/measure_migration.py --old-fenceqd OLD --version 18 \\
        --fenceqd build/bin/fenceqd --jobs 1000000 DIR
    /usr/bin/python3 tests/upgrade/measure_migration.py --version 17 --payload-bytes 2000 ... DIR

With --old-fenceqd, an older daemon (built from git history) writes the file
through the wire: N jobs with 200-byte payloads (--payload-bytes), a tenth of
them completed, a tenth delayed an hour. Without it, a file of a version 2
to 17 is made by SQL (today's ladder up to it), the same mix: from 2 for the
whole ladder's cost, from 17 with payloads over 1024 bytes for version 18's
move of long values.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "clients" / "python"))
sys.path.insert(0, str(HERE))

import fenceq  # noqa: E402
from make_corpus import ladder, khash  # noqa: E402


def start(binary: str, db: Path, sock: Path, log: Path) -> tuple[subprocess.Popen, float]:
    """fenceqd on db; the seconds until it answers a ping."""
    if sock.exists():
        sock.unlink()
    t0 = time.monotonic()
    with open(log, "ab") as f:
        p = subprocess.Popen([binary, "--db", str(db), "--listen", f"ipc://{sock}"],
                         stdout=f, stderr=subprocess.STDOUT)
    with fenceq.Client(f"ipc://{sock}", timeout=1.0) as c:
        while True:
            assert p.poll() is None, log.read_text()[-2000:]
            try:
                if sock.exists():
                    c.ping()
                    return p, time.monotonic() - t0
            except fenceq.FenceqError:
                pass
            assert time.monotonic() - t0 < 3600
            time.sleep(0.01)


def stop(p: subprocess.Popen) -> None:
    p.terminate()
    p.wait(timeout=600)


def fill_through_wire(binary: str, db: Path, n: int, folder: Path, payload_bytes: int) -> None:
    p, _ = start(binary, db, folder / "old.sock", folder / "old.log")
    try:
        with fenceq.Client(f"ipc://{folder / 'old.sock'}", timeout=60) as c:
            for i in range(0, n, 1000):
                batch = []
                for k in range(i, min(n, i + 1000)):
                    job = {"id": f"j{k:07d}", "payload": "x" * payload_bytes}
                    if k % 10 == 1:
                        job["delay"] = 3600
                    batch.append(job)
                c.enqueue_many(batch)
            done = 0
            while done < n // 10:  # a tenth completed (the first ready ones claimed)
                got = c.claim_next("default", "w", 600, max=1000)
                items = [{"id": j["id"], "owner": "w", "fence": j["fence"], "result": "ok"}
                         for j in got][: n // 10 - done]
                c.complete_many(items)
                done += len(items)
    finally:
        stop(p)


def fill_by_sql(db: Path, n: int, version: int, payload_bytes: int) -> None:
    """A file of `version` (today's ladder up to it), the same mix, as those
    daemons wrote such jobs (columns after version 2 at their defaults: no
    key, group, edge or extra; values inline, as before version 18)."""
    assert 2 <= version <= 17, "jobs of 18 and 19 spill or park: write those through the wire"
    con = sqlite3.connect(db)
    con.create_function("fenceq_khash", 2, lambda q, k: khash(q or "", k or ""))
    steps = ladder()
    con.executescript("".join(steps[k] for k in range(1, version + 1)))
    now = time.time()
    con.execute(
        "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?) "
        "INSERT INTO jobs(id, payload, seq, created, not_before, done, fence, attempts, owner, "
        "until, result, finished) "
        "SELECT printf('j%07d', i), ?, i + 1, ?, "
        "CASE WHEN i % 10 = 1 THEN ? + 3600 ELSE 0 END, "
        "CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END, CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END, "
        "CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END, CASE WHEN i % 10 = 0 THEN 'w' END, "
        "CASE WHEN i % 10 = 0 THEN ? + 600 ELSE 0 END, CASE WHEN i % 10 = 0 THEN 'ok' END, "
        "CASE WHEN i % 10 = 0 THEN ? ELSE 0 END FROM k",
        (n, "x" * payload_bytes, now, now, now, now))
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--fenceqd", required=True)
    ap.add_argument("--old-fenceqd")
    ap.add_argument("--version", type=int, required=True)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--payload-bytes", type=int, default=200)
    a = ap.parse_args()
    folder = Path(a.folder)
    folder.mkdir(parents=True, exist_ok=True)
    old = folder / f"v{a.version}-{a.payload_bytes}.db"
    if not old.exists():
        t0 = time.monotonic()
        if a.old_fenceqd:
            fill_through_wire(a.old_fenceqd, old, a.jobs, folder, a.payload_bytes)
        else:
            fill_by_sql(old, a.jobs, a.version, a.payload_bytes)
        print(f"made {old} in {time.monotonic() - t0:.1f} s")
    con = sqlite3.connect(old)
    v = con.execute("PRAGMA user_version").fetchone()[0]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    count = con.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    con.close()
    assert v == a.version, v
    size = old.stat().st_size
    for run in range(a.runs):
        db = folder / "copy.db"
        for s in ("", "-wal", "-shm", ".fenceq-state", ".lock"):
            Path(str(db) + s).unlink(missing_ok=True)
        shutil.copyfile(old, db)
        subprocess.run(["sync"], check=True)
        p, first = start(a.fenceqd, db, folder / "new.sock", folder / "new.log")
        stop(p)
        p, second = start(a.fenceqd, db, folder / "new.sock", folder / "new.log")
        stop(p)
        con = sqlite3.connect(db)
        after = con.execute("PRAGMA user_version").fetchone()[0]
        con.close()
        print(f"run {run + 1}: schema {v} -> {after}, {count} jobs, file {size / 1e6:.0f} MB: "
              f"first start (migration) {first:.2f} s, second start {second:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
