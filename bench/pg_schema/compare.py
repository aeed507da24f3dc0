#!/usr/bin/python3
"""A PostgreSQL schema measured before a store is built on it (issue 29;
README.md here). Each round, alternated, each on a fresh schema of one fresh
cluster (scripts/pg_cluster.sh), K=8 workers one job a request (complete_next):

  sidecar        fenceqd on PostgreSQL, fenceq-bench combined (the real thing)
  stand-in       fenceq-bench --target echo-pg --echo-jobs fenceq: the same
                 transport and batches, each request fenceqd's complete and
                 claim_next statements in one pipeline a batch
                 (bench/echo_jobs.hpp), with a VACUUM sweeper as fenceqd's
  stand-in-open  the same on open.sql's schema
  stand-in-open1 the same, complete_next as one statement a request
  echo-pg        one statement a batch: the ceiling of any sidecar
  graphile       graphile-worker unbatched (bench/node/peers.mjs), on a cluster
                 of its own, when --graphile

usage: compare.py [--rounds R] [--jobs N] [--graphile] [--bin build/bin]
"""
import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import run_bench as rb  # noqa: E402  (its servers and peers)


def psql(uri, *args):
    return subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", uri, *args],
                          capture_output=True, text=True, check=True).stdout


class Sweeper:
    """fenceqd's PgSweeper (daemon/storage/pg/pg_sweeper.hpp) from outside: a
    VACUUM of `table`, then a rest of nine times its length, at least
    `every` seconds apart (about 10,000 changed rows at these rates)."""

    def __init__(self, uri, table, every=1.25):
        self.uri, self.table, self.every = uri, table, every
        self.stop_ = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop_.wait(self.every):
            t = time.monotonic()
            psql(self.uri, "-c", f"VACUUM (INDEX_CLEANUP ON, SKIP_LOCKED) {self.table}")
            self.stop_.wait(9 * (time.monotonic() - t))

    def stop(self):
        self.stop_.set()
        self.thread.join()


def bench(bindir, *args):
    out = subprocess.run([f"{bindir}/fenceq-bench", "--clients", "8", *args],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"fenceq-bench {' '.join(args)}:\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fenceq_schema(bindir, uri):
    """fenceqd's schema on `uri`: a sidecar started once and stopped."""
    side = rb.tempfile.mkdtemp(prefix="fqschema-")
    ep = f"ipc://{side}/s"
    p = subprocess.Popen([f"{bindir}/fenceqd", "--db", uri, "--listen", ep, "--log-level", "warn"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not rb.wait_for_socket(ep):
            raise RuntimeError("fenceqd did not start")
    finally:
        p.send_signal(rb.signal.SIGTERM)
        p.wait(timeout=10)
        rb.shutil.rmtree(side, ignore_errors=True)


def measure(kind, bindir, cluster, jobs):
    if kind == "graphile":
        return rb.peer(bindir, "graphile-single", jobs, 8)["jobs_per_s"]
    if kind == "sidecar":
        return rb.sidecars(bindir, cluster, 1, "combined", 8, jobs)["jobs_per_s"]
    uri = cluster.schema_uri()
    side = rb.tempfile.mkdtemp(prefix="fqecho-")
    try:
        return stand_in(kind, bindir, uri, f"ipc://{side}/s", jobs)
    finally:
        rb.shutil.rmtree(side, ignore_errors=True)


def stand_in(kind, bindir, uri, ep, jobs):
    if kind == "echo-pg":
        return bench(bindir, "--target", "echo-pg", "--pg-uri", uri, "--endpoint", ep,
                     "--jobs", str(jobs))["jobs_per_s"]
    schema = {"stand-in": "fenceq", "stand-in-open": "open", "stand-in-open1": "open1"}[kind]
    table = "jobs" if schema == "fenceq" else "jobs_open"
    if schema == "fenceq":
        fenceq_schema(bindir, uri)
    psql(uri, "-v", f"n={jobs + 100}", "-f", str(HERE / f"{schema.rstrip('1')}.sql"))
    sweeper = Sweeper(uri, table)
    try:
        return bench(bindir, "--target", "echo-pg", "--pg-uri", uri, "--echo-jobs", schema,
                     "--endpoint", ep, "--jobs", str(jobs))["jobs_per_s"]
    finally:
        sweeper.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--graphile", action="store_true")
    ap.add_argument("--bin", default=str(HERE.parent.parent / "build" / "bin"))
    args = ap.parse_args()
    kinds = ["sidecar", "stand-in", "stand-in-open", "stand-in-open1", "echo-pg"]
    if args.graphile:
        kinds.append("graphile")
    got = {k: [] for k in kinds}
    for r in range(args.rounds):
        cluster = rb.PgCluster()
        try:
            for kind in (kinds if r % 2 == 0 else list(reversed(kinds))):
                got[kind].append(measure(kind, args.bin, cluster, args.jobs))
                print(f"round {r + 1}: {kind:14} {got[kind][-1]:8,.0f} jobs/s", flush=True)
        finally:
            cluster.stop()
    print()
    for kind in kinds:
        v = got[kind]
        runs = ", ".join(f"{x:,.0f}" for x in v)
        line = f"{kind:14} median {statistics.median(v):8,.0f} jobs/s ({runs})"
        for base in ("stand-in", "graphile"):
            if base in got and kind != base:
                line += (f"; / {base} per round: "
                         f"{statistics.median(a / b for a, b in zip(v, got[base])):.2f}")
        print(line)


if __name__ == "__main__":
    main()
