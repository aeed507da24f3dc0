#!/usr/bin/python3
"""What each index on `jobs` costs a job that is in none of them.

Issue 31's speed budget asks that jobs without key or group cost within 3%
of what they cost before keys and groups. This measures the SQLite side of
it with nothing else in the way: the same jobs table (schema v6's columns),
N jobs inserted, then N completed (`done = 1`), one transaction each, under
valgrind's callgrind, for several sets of indexes. A job here has no key and
no group, so every partial index below excludes it; the instructions it
still costs are what an index costs by being there.

  /usr/bin/python3 bench/index_cost.py [--jobs 20000]

Prints the instructions a job costs to insert and to complete with each set,
and the difference against `before` (the indexes of schema v4). Needs
valgrind (make bench-deps installs it).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

COLUMNS = """
CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0,
 fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0,
 queue TEXT NOT NULL DEFAULT 'default', payload BLOB, priority INTEGER NOT NULL DEFAULT 0,
 not_before REAL NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
 max_attempts INTEGER NOT NULL DEFAULT 0, dead INTEGER NOT NULL DEFAULT 0, error TEXT,
 seq INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL DEFAULT 0,
 finished REAL NOT NULL DEFAULT 0, cancelled INTEGER NOT NULL DEFAULT 0, progress TEXT,
 held INTEGER NOT NULL DEFAULT 0, ukey TEXT, grp TEXT);
CREATE INDEX jobs_last_attempt ON jobs(until)
  WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts;
CREATE INDEX jobs_finished ON jobs(finished) WHERE done = 1 OR dead = 1;
CREATE INDEX jobs_held ON jobs(queue, until) WHERE held = 1 AND done = 0 AND dead = 0;
"""

NEXT = "CREATE INDEX jobs_next ON jobs(queue, priority DESC, seq) WHERE done = 0 AND dead = 0"

# Each set: the indexes beside COLUMNS' three.
SETS = {
    "before": NEXT + ";",
    "schema v6 (today)": NEXT + """ AND grp IS NULL;
CREATE INDEX jobs_ukey ON jobs(queue, ukey, created) WHERE ukey IS NOT NULL;
CREATE UNIQUE INDEX jobs_ukey_open ON jobs(queue, ukey) WHERE ukey IS NOT NULL AND done = 0 AND dead = 0;
CREATE INDEX jobs_group ON jobs(queue, grp, priority DESC, seq) WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE INDEX jobs_group_top ON jobs(queue, priority DESC) WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE INDEX jobs_group_leased ON jobs(queue, grp) WHERE held = 1 AND done = 0 AND dead = 0 AND grp IS NOT NULL;""",
    "one index, not of done": NEXT + """;
CREATE INDEX jobs_ukey ON jobs(queue, ukey, created) WHERE ukey IS NOT NULL;""",
    "one index, of done": NEXT + """;
CREATE INDEX jobs_group ON jobs(queue, grp, priority DESC, seq) WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;""",
    "grp a column of jobs_next": """CREATE INDEX jobs_next ON jobs(queue, priority DESC, grp, seq)
  WHERE done = 0 AND dead = 0;""",
    "a trigger to a side table": NEXT + """;
CREATE TABLE side(id TEXT PRIMARY KEY, queue TEXT, grp TEXT, priority INT, seq INT);
CREATE INDEX side_g ON side(queue, grp, priority DESC, seq);
CREATE TRIGGER side_in AFTER INSERT ON jobs WHEN NEW.grp IS NOT NULL
  BEGIN INSERT INTO side VALUES(NEW.id, NEW.queue, NEW.grp, NEW.priority, NEW.seq); END;
CREATE TRIGGER side_out AFTER UPDATE OF done, dead ON jobs WHEN NEW.grp IS NOT NULL
  BEGIN DELETE FROM side WHERE id = NEW.id; END;""",
}


def run_one(schema, jobs, complete, path):
    """The workload itself, run under callgrind by measure()."""
    import sqlite3
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    db.executescript(COLUMNS + schema)
    ids = [("job-%d" % i,) for i in range(jobs)]
    db.execute("BEGIN")
    db.executemany("INSERT INTO jobs(id, queue, seq, created, payload, max_attempts) "
                   "VALUES(?1, 'q', 0, 1.0, x'00', 25)", ids)
    db.execute("COMMIT")
    if complete:
        db.execute("BEGIN")
        db.executemany("UPDATE jobs SET result = 'ok', done = 1, finished = 2.0 "
                       "WHERE id = ?1 AND done = 0", ids)
        db.execute("COMMIT")


def measure(name, jobs, complete):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                        sys.executable, os.path.abspath(__file__), "--child", name,
                        "--jobs", str(jobs), "--db", os.path.join(d, "q.db")]
                       + (["--complete"] if complete else []),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            m = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
        return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--child")
    ap.add_argument("--db")
    ap.add_argument("--complete", action="store_true")
    a = ap.parse_args()
    if a.child:
        run_one(SETS[a.child], a.jobs, a.complete, a.db)
        return
    rows = {}
    for name in SETS:
        insert = measure(name, a.jobs, False)
        both = measure(name, a.jobs, True)
        rows[name] = (insert / a.jobs, (both - insert) / a.jobs)
    base_i, base_c = rows["before"]
    print("%-28s %12s %12s %10s %10s" % ("indexes", "insert/job", "complete/job", "+insert", "+complete"))
    for name, (i, c) in rows.items():
        print("%-28s %12.0f %12.0f %+10.0f %+10.0f" % (name, i, c, i - base_i, c - base_c))


if __name__ == "__main__":
    main()
