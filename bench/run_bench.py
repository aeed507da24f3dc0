#!/usr/bin/python3
"""make bench: fenceqd against beanstalkd on one machine, side by side.

Runs the same load generator (bench/fenceq-bench) against fenceqd (--sync full
and normal) and beanstalkd (binlog fsynced on every write, -f 0, and its
default), alternating the servers each round, and reports every figure with
its ratio to beanstalkd measured in the same run. Then the Node workload
(bench/node/peers.mjs): fenceq through its Node client against the peers users
would pick instead, BullMQ on Redis and graphile-worker on PostgreSQL, also
alternated each round. Then issue 32's fan-in budget: 10,000 parents completed
with and without children waiting on them (run_fanin). Writes bench/RESULTS.md.
Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import atexit
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 32            # the batch workload's jobs a claim (a worker's prefetch)
ENQUEUE_BATCH = 1000  # the enqueue workload's jobs an enqueue_many
ECHO_PAIRS = 5        # complete_next beside the durable echo, for its target
CEILING_PAIRS = 5     # fenceqd's batches beside the in-process ceiling's, for its target
# Rounds of "complete_next by client" in make bench (at least --rounds): its
# targets are medians of per-round ratios, and two rounds gave verdicts that
# flipped from run to run (the plain client 85% to 111% of fenceq-bench).
CLIENT_ROUNDS = 4


class Server:
    """A fresh server on a temporary directory for one measurement."""

    def __init__(self, kind, bindir, extra=()):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="fqbench-")
        if kind.startswith("fenceq"):
            sync = kind.split("-")[1]
            self.endpoint = f"ipc://{self.dir}/s"
            cmd = [f"{bindir}/fenceqd", "--db", f"{self.dir}/b.db", "--listen", self.endpoint,
                   "--sync", sync, "--log-level", "warn", *extra]
        else:
            self.port = free_port()
            self.endpoint = f"127.0.0.1:{self.port}"
            cmd = ["beanstalkd", "-l", "127.0.0.1", "-p", str(self.port)]
            if kind == "beanstalkd-f0":
                cmd += ["-b", self.dir, "-f", "0"]
            elif kind == "beanstalkd-default":
                cmd += ["-b", self.dir]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_ready()

    def wait_ready(self):
        for _ in range(100):
            if self.kind.startswith("fenceq"):
                if os.path.exists(self.endpoint[len("ipc://"):]):
                    return
            else:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                    return
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError(f"{self.kind} did not start")

    def bench_args(self):
        if self.kind.startswith("fenceq"):
            return ["--target", "fenceq", "--endpoint", self.endpoint]
        return ["--target", "beanstalkd", "--addr", self.endpoint]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for_socket(endpoint, seconds=5.0):
    """True once an ipc:// endpoint's socket file exists (its daemon is serving)."""
    path = endpoint[len("ipc://"):]
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench(bindir, server, workload, clients, jobs, extra=()):
    cmd = [f"{bindir}/fenceq-bench", *server.bench_args(), "--workload", workload,
           "--clients", str(clients), "--jobs", str(jobs), "--pid", str(server.proc.pid),
           "--label", server.kind, *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"bench failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def one(bindir, kind, workload, clients, jobs, extra_bench=()):
    s = Server(kind, bindir)
    try:
        return bench(bindir, s, workload, clients, jobs, extra_bench)
    finally:
        s.stop()


def echo(bindir, clients, jobs, durable=False, pg_uri=None):
    """The transport alone; `durable`: plus one fdatasynced page per batch;
    `pg_uri`: plus one one-statement PostgreSQL commit per batch (the ceiling
    of a sidecar, `--target echo-pg`)."""
    d = tempfile.mkdtemp(prefix="fqecho-", dir="/tmp")
    try:
        target = "echo-pg" if pg_uri else "echo-durable" if durable else "echo"
        cmd = [f"{bindir}/fenceq-bench", "--target", target,
               "--endpoint", f"ipc://{d}/e", "--clients", str(clients), "--jobs", str(jobs)]
        if pg_uri:
            cmd += ["--pg-uri", pg_uri]
        elif durable:
            cmd += ["--sync-file", f"{d}/wal"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def side_by_side(first, second, pairs, label):
    """first() and second() run `pairs` times, which goes first alternated:
    [(first's run, second's run)]. A ratio from one pair holds better than
    one of two medians taken minutes apart: this VM's load drifts between
    runs, less within a pair. label(a, b) is the line printed for a pair."""
    out = []
    for i in range(pairs):
        if i % 2 == 0:
            a = first()
            b = second()
        else:
            b = second()
            a = first()
        out.append((a, b))
        print(f"pair {i + 1}: {label(a, b)}", flush=True)
    return out


def echo_pairs(bindir, jobs, pairs):
    """complete_next (`fenceqd --sync full`, K=8) beside the durable echo:
    [(fenceq run, echo run)] (side_by_side)."""
    return side_by_side(
        lambda: one(bindir, "fenceq-full", "combined", 8, jobs),
        lambda: echo(bindir, 8, jobs, durable=True), pairs,
        lambda fq, ec: f"complete_next {fq['jobs_per_s']:,.0f} jobs/s, durable echo "
                       f"{ec['jobs_per_s']:,.0f} round trips/s: "
                       f"{fq['jobs_per_s'] / ec['jobs_per_s']:.0%}")


def ceiling_pairs(bindir, jobs, pairs):
    """fenceqd's batch workload (`--sync full`, K=8, claims of BATCH) beside
    fenceq-ceiling's batches of BATCH, 8 requests a commit: [(fenceq run,
    ceiling run)] (side_by_side)."""
    return side_by_side(
        lambda: one(bindir, "fenceq-full", "batch", 8, jobs, ("--batch", str(BATCH))),
        lambda: ceiling(bindir, BATCH, 8, jobs), pairs,
        lambda fq, cl: f"batch {fq['jobs_per_s']:,.0f} jobs/s, in-process ceiling "
                       f"{cl['jobs_per_s']:,.0f} jobs/s: {fq['jobs_per_s'] / cl['jobs_per_s']:.0%}")


def pair_ratios(pairs):
    """The first run's jobs/s over the second's, pair by pair (side_by_side)."""
    return [fq["jobs_per_s"] / ec["jobs_per_s"] for fq, ec in pairs]


def median_of_3(run):
    """The middle of three runs by jobs/s (one flush a batch is noisy)."""
    return sorted((run() for _ in range(3)), key=lambda r: r["jobs_per_s"])[1]


class PgCluster:
    """A throw-away PostgreSQL cluster (scripts/pg_cluster.sh) for the
    many-hosts figures: sidecars sharing one database."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="fqpg-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        out = subprocess.run([str(ROOT / "scripts" / "pg_cluster.sh"), "start", self.dir],
                             capture_output=True, text=True, timeout=120, check=True)
        self.uri = out.stdout.strip().splitlines()[-1]
        self.n = 0

    def schema_uri(self):
        """A fresh, empty schema for one measurement."""
        self.n += 1
        name = f"bench{self.n}"
        subprocess.run(["psql", "-X", "-q", self.uri, "-c", f"CREATE SCHEMA {name}"],
                       check=True, capture_output=True)
        return f"{self.uri}&options=-csearch_path%3D{name}"

    def stop(self):
        subprocess.run([str(ROOT / "scripts" / "pg_cluster.sh"), "destroy", self.dir],
                       capture_output=True, timeout=120)


def sidecars(bindir, cluster, n, workload, clients, jobs, extra=()):
    """n fenceqd sidecars on one fresh schema; the K clients spread over them."""
    uri = cluster.schema_uri()
    d = tempfile.mkdtemp(prefix="fqside-")
    procs, endpoints = [], []
    try:
        for i in range(n):
            ep = f"ipc://{d}/s{i}"
            procs.append(subprocess.Popen([f"{bindir}/fenceqd", "--db", uri, "--listen", ep,
                                           "--log-level", "warn"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            endpoints.append(ep)
        for ep in endpoints:
            wait_for_socket(ep)
        cmd = [f"{bindir}/fenceq-bench", "--target", "fenceq", "--workload", workload,
               "--clients", str(clients), "--jobs", str(jobs),
               "--label", f"postgres-{n}-sidecars", *extra]
        for ep in endpoints:
            cmd += ["--endpoint", ep]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"bench failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)


def ceiling(bindir, batch, group, jobs, sync="full", renews=0):
    """fenceq-ceiling: the same claim + complete statements on the SQLite store,
    in-process (no transport, no codec), `group` requests a transaction; with
    `renews`, each held job renewed that many times first (renews_per_s)."""
    d = tempfile.mkdtemp(prefix="fqceil-")
    try:
        cmd = [f"{bindir}/fenceq-ceiling", "--db", f"{d}/c.db", "--jobs", str(jobs),
               "--batch", str(batch), "--group", str(group), "--sync", sync,
               "--renews", str(renews)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, ignore_errors=True)


class PgSidecar:
    """A throw-away PostgreSQL cluster and one fenceqd sidecar on it, for the
    Node workload's fenceq-on-PostgreSQL measurements."""

    def __init__(self, bindir):
        self.cluster = PgCluster()
        self.dir = tempfile.mkdtemp(prefix="fqpgside-")
        self.endpoint = f"ipc://{self.dir}/s"
        try:
            self.proc = subprocess.Popen([f"{bindir}/fenceqd", "--db", self.cluster.schema_uri(),
                                          "--listen", self.endpoint, "--log-level", "warn"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not wait_for_socket(self.endpoint):
                raise RuntimeError("fenceqd on PostgreSQL did not start")
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if getattr(self, "proc", None) and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.cluster.stop()


class Redis:
    """A throw-away redis-server on 127.0.0.1 and a temporary directory, AOF on,
    no RDB snapshots, for one BullMQ measurement."""

    def __init__(self, appendfsync):
        self.dir = tempfile.mkdtemp(prefix="fqredis-", dir="/tmp")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
             "--dir", self.dir, "--save", "", "--appendonly", "yes",
             "--appendfsync", appendfsync, "--daemonize", "no",
             "--logfile", f"{self.dir}/redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(250):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server (appendfsync {appendfsync}) did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# fenceq's 8 Node workers share one Client (one ZeroMQ socket), as BullMQ's
# one Worker with concurrency 8 shares one connection: a Client per worker
# cost the Node process about 40% more CPU a job, and 20-35% of the jobs/s
# (measured 2026-12-01, issue 29).
FENCEQ_SHARED = ["--clients", "1"]

# The Node workload (bench/node/peers.mjs): key -> (system, node script arguments).
PEERS = {
    "fenceq-next": ("fenceq", ["--mode", "single", "--variant", "next", *FENCEQ_SHARED]),
    "fenceq-combined": ("fenceq", ["--mode", "single", "--variant", "combined", *FENCEQ_SHARED]),
    # --sync normal: a power cut may lose the last commits, as appendfsync everysec
    # may lose the last second: the same class of durability as BullMQ's usual.
    "fenceq-combined-normal": ("fenceq", ["--mode", "single", "--variant", "combined", *FENCEQ_SHARED]),
    "fenceq-batch": ("fenceq", ["--mode", "batch", *FENCEQ_SHARED]),
    "fenceq-pg-combined": ("fenceq", ["--mode", "single", "--variant", "combined", *FENCEQ_SHARED]),
    "fenceq-pg-batch": ("fenceq", ["--mode", "batch", *FENCEQ_SHARED]),
    "bullmq-always": ("bullmq", ["--mode", "single"]),
    "bullmq-everysec": ("bullmq", ["--mode", "single"]),
    "graphile-single": ("graphile", ["--mode", "single"]),
    "graphile-batch": ("graphile", ["--mode", "batch"]),
}
PEERS_DIR = ROOT / "bench" / "node"
PEERS_TIMEOUT_S = 300  # the node script's own hard limit; the process is killed 30 s later


def peers_ready():
    """What the Node workload needs (`make bench` installs all of it), or why not."""
    if not shutil.which("node"):
        return "no node"
    for d in (PEERS_DIR, ROOT / "clients" / "node"):
        if not (d / "node_modules").is_dir():
            return f"no {d.relative_to(ROOT)}/node_modules (npm ci there; make bench does)"
    if not shutil.which("redis-server"):
        return "no redis-server (apt install redis-server; make bench does)"
    return None


def peer(bindir, key, jobs, workers, timeout=PEERS_TIMEOUT_S):
    """One measurement of bench/node/peers.mjs on a fresh server: fenceqd
    --sync full, redis-server, or a PostgreSQL cluster (scripts/pg_cluster.sh)."""
    system, extra = PEERS[key]
    server = None
    if key.startswith("fenceq-pg"):
        server = PgSidecar(bindir)
        conn = ["--endpoint", server.endpoint]
    elif system == "fenceq":
        server = Server("fenceq-normal" if key.endswith("-normal") else "fenceq-full", bindir)
        conn = ["--endpoint", server.endpoint]
    elif system == "bullmq":
        server = Redis(key.split("-")[1])
        conn = ["--redis-host", "127.0.0.1", "--redis-port", str(server.port)]
    else:
        server = PgCluster()
        conn = ["--pg-uri", server.uri, "--pg-schema", "graphile_worker"]
    cmd = ["node", str(PEERS_DIR / "peers.mjs"), "--system", system, *extra, *conn,
           "--jobs", str(jobs), "--workers", str(workers), "--timeout", str(timeout),
           "--label", key]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
    finally:
        server.stop()
    if out.returncode != 0:
        raise RuntimeError(f"peers failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_peers(bindir, jobs, rounds, workers=8):
    """Every PEERS measurement `rounds` times, the order reversed every other
    round; a combination that reports `skipped` is not run again."""
    results, skipped = {}, {}
    keys = list(PEERS)
    for rnd in range(rounds):
        for key in (keys if rnd % 2 == 0 else list(reversed(keys))):
            if key in skipped:
                continue
            r = peer(bindir, key, jobs, workers)
            if "skipped" in r:
                skipped[key] = r["skipped"]
                print(f"node round {rnd + 1}: {key:16} skipped: {r['skipped']}", flush=True)
                continue
            r["load1"] = os.getloadavg()[0]  # how busy the machine was, other work included
            results.setdefault(key, []).append(r)
            print(f"node round {rnd + 1}: {key:16} K={workers}: {r['jobs_per_s']:>8,.0f} jobs/s "
                  f"({r['seconds']:.2f} s; enqueue {r['enqueue_jobs_per_s']:,.0f} jobs/s)",
                  flush=True)
    return results, skipped


# complete_next at K=8 as each kind of client sends it (issue 26): the C++
# library (fenceq-bench, one ZeroMQ context per client), a plain client that
# speaks the wire protocol itself with one context shared by its workers
# (fenceq-bench --target plain), and the Python, Node and Go clients, each on
# a fresh fenceqd --sync full, alternated each round. go-prefetch: the Go
# client's prefetching Workers (claim_next max, renew_many, complete_many with
# next; bench/go), on 5 N jobs as fenceq-bench's batch workload.
CLIENT_KINDS = ("fenceq-bench", "plain", "python", "node", "go", "go-prefetch")
# The order they run in: the kinds a target compares back to back (go next
# to fenceq-bench, go-prefetch next to BullMQ when it runs), since
# this machine's load drifts within a round of a minute more than within
# seconds (issue 35: per-round ratios of go to fenceq-bench from 0.75 to 1.71
# when they ran four runs apart).
CLIENT_RUN_ORDER = ("fenceq-bench", "go", "plain", "python", "node", "go-prefetch")
GO_PREFETCH = BATCH   # each Go Worker's prefetch
# --clients-only also runs this peer in every round, among the kinds, for
# issue 35's target: a prefetching Go worker at least 2x BullMQ everysec.
CLIENT_PEER = "bullmq-everysec"
_go_bench = []        # the built bench/go binary (built once a run)


def go_bench_binary():
    """bench/go built offline (clients/go/offline.sh: Debian's Go sources)."""
    if not _go_bench:
        out_dir = tempfile.mkdtemp(prefix="fq-gobench-", dir="/tmp")
        atexit.register(shutil.rmtree, out_dir, True)
        binary = os.path.join(out_dir, "fenceq-go-bench")
        out = subprocess.run([str(ROOT / "clients" / "go" / "offline.sh"), "build", "-o", binary,
                              str(ROOT / "bench" / "go")], cwd=ROOT / "clients" / "go",
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"building bench/go failed:\n{out.stdout}{out.stderr}")
        _go_bench.append(binary)
    return _go_bench[0]


def client_kind(bindir, kind, jobs, clients=8):
    s = Server("fenceq-full", bindir)
    try:
        if kind in ("fenceq-bench", "plain"):
            target = "fenceq" if kind == "fenceq-bench" else "plain"
            cmd = [f"{bindir}/fenceq-bench", "--target", target, "--endpoint", s.endpoint,
                   "--workload", "combined", "--clients", str(clients), "--jobs", str(jobs),
                   "--pid", str(s.proc.pid), "--label", kind]
        elif kind == "python":
            cmd = ["/usr/bin/python3", str(ROOT / "bench" / "python_client.py"), "--endpoint",
                   s.endpoint, "--jobs", str(jobs), "--clients", str(clients), "--label", kind]
        elif kind in ("go", "go-prefetch"):
            cmd = [go_bench_binary(), "--endpoint", s.endpoint, "--clients", str(clients),
                   "--label", kind]
            cmd += (["--mode", "prefetch", "--prefetch", str(GO_PREFETCH), "--jobs", str(5 * jobs)]
                    if kind == "go-prefetch" else ["--jobs", str(jobs)])
        else:
            cmd = ["node", str(PEERS_DIR / "peers.mjs"), "--system", "fenceq", "--mode", "single",
                   "--variant", "combined", "--endpoint", s.endpoint, "--jobs", str(jobs),
                   "--workers", str(clients), "--timeout", str(PEERS_TIMEOUT_S), "--label", kind,
                   *FENCEQ_SHARED]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=PEERS_TIMEOUT_S + 30)
    finally:
        s.stop()
    if out.returncode != 0:
        raise RuntimeError(f"{kind} failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_client_kinds(bindir, jobs, rounds, kinds=CLIENT_RUN_ORDER, peer_jobs=None):
    """Each kind once a round, the order reversed every other round; a kind
    of PEERS (CLIENT_PEER) runs as the Node workload does, on peer_jobs."""
    results = {}
    for rnd in range(rounds):
        for kind in (kinds if rnd % 2 == 0 else tuple(reversed(kinds))):
            if kind in PEERS:
                r = peer(bindir, kind, peer_jobs or jobs, 8)
                if "skipped" in r:
                    raise RuntimeError(f"{kind} skipped: {r['skipped']}")
            else:
                r = client_kind(bindir, kind, jobs)
            results.setdefault(kind, []).append(r)
            what = ("one Worker, concurrency 8" if kind in PEERS else
                    f"prefetch {GO_PREFETCH} K=8" if kind == "go-prefetch" else "complete_next K=8")
            print(f"clients round {rnd + 1}: {kind:12} {what}: "
                  f"{r['jobs_per_s']:>8,.0f} jobs/s", flush=True)
    return results


def client_kinds_section(results, jobs, rounds):
    def med(kind, key="jobs_per_s"):
        runs = results.get(kind)
        vals = [r[key] for r in runs if key in r] if runs else []
        return statistics.median(vals) if vals else None

    base = med("fenceq-bench")
    lines = ["", "## complete_next by client (issue 26)", "",
             f"`fenceqd --sync full`, K=8 workers, N = {jobs:,} jobs, {rounds} round(s), kinds "
             "alternated each round, each run on a fresh daemon; medians. fenceq-bench: the C++ "
             "library, one ZeroMQ context per client; plain: `fenceq-bench --target plain`, no "
             "fenceq library, one context shared by the 8 workers (bench/plain_client.hpp); "
             "Python: bench/python_client.py, 8 threads of one process; Node: "
             "bench/node/peers.mjs, 8 workers of one process sharing one Client; Go: "
             "bench/go, 8 goroutines sharing one Client (its one shared connection); "
             f"go-prefetch: 8 Go Workers with Prefetch {GO_PREFETCH} (claim_next max, renew_many, "
             f"complete_many with next) on N = {5 * jobs:,} jobs, not complete_next: compare it "
             "with fenceq-bench's batch workload.", "",
             "| client | jobs/s | of fenceq-bench | p50 µs |", "| --- | --- | --- | --- |"]
    for kind in CLIENT_KINDS:
        v = med(kind)
        if v is None:
            continue
        p50 = med(kind, "p50_us")
        if kind == "go-prefetch":  # a batch figure: no ratio to complete_next
            lines.append(f"| {kind} (batch, not complete_next) | {fmt(v)} | — | — |")
            continue
        lines.append(f"| {kind} | {fmt(v)} | {v / base:.0%} | "
                     f"{f'{p50:.0f}' if p50 is not None else '—'} |" if base else
                     f"| {kind} | {fmt(v)} | — | — |")
    if med(CLIENT_PEER):
        n = results[CLIENT_PEER][0]["jobs"]
        lines.append(f"| {CLIENT_PEER} (BullMQ, Redis `appendfsync everysec`, one Worker, "
                     f"concurrency 8, N = {n:,}; bench/node/peers.mjs) | {fmt(med(CLIENT_PEER))} "
                     "| — | — |")
    return lines


GO_TARGETS_HEADING = "## The Go client's speed targets (issue 35)"


def paired_ratio(a, b, paired, times=False):
    """a's jobs/s over b's, from two kinds' runs -> (ratio or None, how it was
    taken). paired (both ran once in every round, in the same order): the
    median of the per-round ratios, since the machine's load drifts between
    rounds more than within one (make bench's client section has made the C++
    library anywhere from 5,800 to 11,000 jobs/s in one run); else the ratio
    of the medians."""
    show = (lambda x: f"{x:.2f}x") if times else (lambda x: f"{x:.0%}")
    if not a or not b:
        return None, "not measured"
    med_a = statistics.median(r["jobs_per_s"] for r in a)
    med_b = statistics.median(r["jobs_per_s"] for r in b)
    if paired and len(a) == len(b):
        per = [x["jobs_per_s"] / y["jobs_per_s"] for x, y in zip(a, b)]
        return statistics.median(per), (
            "the median of the per-round ratios "
            + ", ".join(f"{r:.2f}" for r in per)
            + f" (the medians, {fmt(med_a)} / {fmt(med_b)} jobs/s, give {show(med_a / med_b)})")
    return med_a / med_b, f"{fmt(med_a)} / {fmt(med_b)} jobs/s, ratio of medians"


def go_target_rows(kinds, bull_runs=None):
    """Issue 35's two speed targets for the Go client: complete_next at K=8
    at least 90% of the C++ library's (fenceq-bench) in the same run, and a
    prefetching Go worker (go-prefetch) at least 2x BullMQ everysec in the
    same run. -> [(target, measured, met or None, from)]. A ratio is the
    median of the per-round ratios when both sides ran in every round (the
    machine's load drifts between rounds, less within one); else, with
    bull_runs from the Node workload (make bench), the ratio of medians."""
    def runs(kind):
        return kinds.get(kind) or []

    rows = []
    r, how = paired_ratio(runs("go"), runs("fenceq-bench"), True)
    rows.append(("complete_next (K=8), Go client ≥ 90% of the C++ client (fenceq-bench)",
                 f"{r:.0%}" if r else "not measured",
                 None if r is None else round(r, 4) >= 0.9, how))
    r, how = paired_ratio(runs("go"), runs("plain"), True)
    rows.append(("complete_next (K=8), Go client / the plain C++ client: reported",
                 f"{r:.0%}" if r else "not measured", None, how))
    bull = runs(CLIENT_PEER) or bull_runs or []
    r, how = paired_ratio(runs("go-prefetch"), bull, bool(runs(CLIENT_PEER)), times=True)
    rows.append((f"Go prefetching Workers (8, Prefetch {GO_PREFETCH}) ≥ 2.0x BullMQ everysec",
                 f"{r:.2f}x" if r else "not measured", None if r is None else r >= 2.0, how))
    return rows


def go_targets_section(kinds, jobs, rounds):
    """--clients-only's verdicts on go_target_rows, in the Targets table's shape."""
    lines = ["", GO_TARGETS_HEADING, "",
             f"From the runs above ({rounds} round(s), N = {jobs:,}; go-prefetch on "
             f"{5 * jobs:,}), each on a fresh daemon or Redis, kinds alternated each round.", "",
             "| target | measured | verdict | from |", "| --- | --- | --- | --- |"]
    for target, value, ok, how in go_target_rows(kinds):
        verdict = "—" if ok is None else ("met" if ok else "**missed**")
        lines.append(f"| {target} | {value} | {verdict} | {how} |")
    return lines


# Issue 32's speed budget: 10,000 parents completed while one child waits on
# all of them, within 20% of the same completes without the child. `after`
# holds at most 1,000 ids, so the child is modelled as 10 children each
# waiting on 1,000 of the parents (every parent has one child edge to meet).
# fenceq-bench --workload fanin: the parents enqueued, then the children
# (neither measured); K=8 workers take the parents with claim_next +
# complete; the children stay unclaimed and must all be ready at the end.
FANIN_PARENTS = 10_000
FANIN_PER_CHILD = 1000
FANIN_KINDS = ("fenceq-full", "fenceq-normal")
FANIN_HEADING = "## Workflows: a fan-in's parents (issue 32's budget)"


def run_fanin(bindir, pairs, parents=FANIN_PARENTS, clients=8):
    """`pairs` pairs for each of FANIN_KINDS: a run with the children and one
    without, back to back on fresh daemons of the same settings, which goes
    first alternating from pair to pair. -> {kind: [{"with": r, "without": r}]}"""
    children = max(1, parents // FANIN_PER_CHILD)
    results = {}
    for i in range(pairs):
        for kind in FANIN_KINDS:
            pair = {}
            for variant in (("with", "without") if i % 2 == 0 else ("without", "with")):
                n = children if variant == "with" else 0
                r = one(bindir, kind, "fanin", clients, parents, ("--children", str(n)))
                pair[variant] = r
                print(f"fanin pair {i + 1}: {kind:13} {n:>2} children: "
                      f"{r['jobs_per_s']:>8,.0f} jobs/s  server CPU {r['server_cpu_s']:.2f} s",
                      flush=True)
            print(f"fanin pair {i + 1}: {kind:13} with / without: "
                  f"{pair['with']['jobs_per_s'] / pair['without']['jobs_per_s']:.2f}", flush=True)
            results.setdefault(kind, []).append(pair)
    return results


def paired(runs):
    """Of pairs {"with": r, "without": r}: med(variant, key), the median of
    that figure over the pairs; each pair's with / without throughput; and
    their median (the machine's load drifts between pairs, less within one)."""
    def med(variant, key):
        return statistics.median(p[variant][key] for p in runs)
    ratios = [p["with"]["jobs_per_s"] / p["without"]["jobs_per_s"] for p in runs]
    return med, ratios, statistics.median(ratios)


def fanin_section(results, pairs, clients=8):
    """The RESULTS.md section of run_fanin's pairs: jobs/s both ways, the
    ratio with / without (the median of the pairs' ratios: the machine's
    load drifts between pairs, less within one), the daemon's CPU a parent."""
    any_pair = next(iter(results.values()))[0]
    parents = any_pair["with"]["jobs"]
    children, per = any_pair["with"]["children"], any_pair["with"]["parents_per_child"]
    lines = ["", FANIN_HEADING, "",
             f"{parents:,} parents completed (claim_next + complete, K={clients}) while "
             f"{children} children wait on them, against the same {parents:,} completes without "
             f"the children. Budget: with / without ≥ 0.80. `after` holds at most 1,000 ids, so "
             f"the one child of the budget is modelled as {children} children of {per:,} "
             "parents each (`fenceq-bench --workload fanin --children N`; the children are in "
             "a queue of their own, stay unclaimed, and each was checked ready at the end). "
             f"{pairs} pair(s) per daemon setting, each run on a fresh daemon, which variant "
             "goes first alternated; medians.", "",
             "| fenceqd | without, jobs/s | with, jobs/s | with / without | budget | server CPU "
             "µs a parent, without / with | pairs' ratios |", "| --- | --- | --- | --- | --- "
             "| --- | --- |"]
    for kind, runs in results.items():
        med, ratios, ratio = paired(runs)
        cpu = lambda v: med(v, "server_cpu_s") / parents * 1e6
        lines.append(f"| `--sync {kind.split('-')[1]}` | {fmt(med('without', 'jobs_per_s'))} | "
                     f"{fmt(med('with', 'jobs_per_s'))} | {ratio:.3f} | "
                     f"{'met' if ratio >= 0.8 else '**missed**'} | "
                     f"{cpu('without'):.0f} / {cpu('with'):.0f} | "
                     f"{', '.join(f'{r:.2f}' for r in ratios)} |")
    return lines


KEYS_HEADING = "## Keys and groups: issue 31's speed budget"
KEYS_JOBS = 100_000  # enqueue_many: jobs a run (batches of KEYS_BATCH)
KEYS_BATCH = 100
GROUPS_WAITING = 10_000
# (name, workload, jobs, fenceq-bench's arguments without, with) per budget.
KEYS_CASES = (
    ("enqueue_many (batches of 100), keyed / not keyed", "enqueue", KEYS_JOBS,
     ("--batch", str(KEYS_BATCH)), ("--batch", str(KEYS_BATCH), "--keyed")),
    (f"claim_next + complete, {GROUPS_WAITING:,} groups waiting / no group", "next",
     2 * GROUPS_WAITING, (), ("--groups", str(GROUPS_WAITING))),
)


def run_keys(bindir, pairs, clients=8, jobs_scale=1.0):
    """`pairs` pairs per KEYS_CASES entry on fenceqd --sync full: the run
    without keys or groups and the one with them, back to back on fresh
    daemons, which goes first alternating. -> {name: [{"without": r, "with": r}]}"""
    results = {}
    for i in range(pairs):
        for name, workload, jobs, without, with_ in KEYS_CASES:
            # --quick scales the enqueue runs only: the grouped one needs its 10,000 groups.
            n = jobs if workload == "next" else max(200, int(jobs * jobs_scale))
            pair = {}
            for variant in (("without", "with") if i % 2 == 0 else ("with", "without")):
                extra = with_ if variant == "with" else without
                pair[variant] = one(bindir, "fenceq-full", workload, clients, n, extra)
            ratio = pair["with"]["jobs_per_s"] / pair["without"]["jobs_per_s"]
            print(f"keys pair {i + 1}: {name}: {pair['without']['jobs_per_s']:,.0f} / "
                  f"{pair['with']['jobs_per_s']:,.0f} jobs/s, with / without {ratio:.2f}",
                  flush=True)
            results.setdefault(name, []).append(pair)
    return results


RETENTION_HEADING = "## Retention: a worker's round trips while done jobs are removed (issue 33's budget)"
RETENTION_JOBS = 100_000


def run_retention(bindir, runs, jobs=RETENTION_JOBS):
    """`runs` runs of fenceq-retention per --sync setting, each on a fresh
    daemon, the settings alternated. -> {sync: [result]}"""
    results = {}
    for i in range(runs):
        for sync in (("normal", "full") if i % 2 == 0 else ("full", "normal")):
            s = Server(f"fenceq-{sync}", bindir)
            try:
                cmd = [f"{bindir}/fenceq-retention", "--endpoint", s.endpoint, "--jobs", str(jobs)]
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                if out.returncode != 0:
                    raise RuntimeError(f"retention failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
            finally:
                s.stop()
            print(f"retention {i + 1}, --sync {sync}: {r['jobs']:,} removed in {r['removed_s']:.1f} s, "
                  f"worker p99 {r['base_p99_ms']:.2f} -> {r['during_p99_ms']:.2f} ms, "
                  f"per-window median ratio {r['window_ratio_median']:.2f}", flush=True)
            results.setdefault(sync, []).append(r)
    return results


def retention_section(results, runs):
    """The RESULTS.md section of run_retention: medians over runs."""
    lines = ["", RETENTION_HEADING, "",
             f"`bench/retention.cpp` (fenceq-retention), {runs} run(s) per setting on fresh daemons: "
             f"{RETENTION_JOBS:,} jobs enqueued and completed, then one worker (claim_next + "
             "complete + enqueue of another queue, one request in flight) runs in windows of "
             "250 ms, alternately without a retention and with one (`keep_done` 1 s), until the "
             "done jobs are gone. Budget (issue 33): the worker's p99 during the retention at most "
             "twice its p99 without, read as the median over the pairs of windows (each window "
             "with the retention against the one before it; pooled, one window a VM stalls sets "
             "the p99 of all). tests/test_bulk.cpp asserts only that the worker is never starved "
             "(a pooled p99 under 5 ms, no round trip over 100 ms). Medians over runs.", "",
             "| fenceqd | removed in s | worker p50 ms, without / during | p99 ms, without / "
             "during | slowest ms, during | p99 ratio, per-window median | verdict | runs' ratios |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for sync, rs in results.items():
        med = lambda k: statistics.median(r[k] for r in rs)
        ratio = med("window_ratio_median")
        each = ", ".join(f"{r['window_ratio_median']:.2f}" for r in rs)
        lines.append(f"| `--sync {sync}` | {med('removed_s'):.1f} | {med('base_p50_ms'):.2f} / "
                     f"{med('during_p50_ms'):.2f} | {med('base_p99_ms'):.2f} / "
                     f"{med('during_p99_ms'):.2f} | {med('during_max_ms'):.1f} | {ratio:.2f} | "
                     f"{'met' if ratio <= 2.0 else '**missed**'} | "
                     f"{each} |")
    return lines


def keys_section(results, pairs, clients=8):
    """The RESULTS.md section of run_keys: each budget's median ratio of its
    pairs (the machine's load drifts between pairs, less within one)."""
    lines = ["", KEYS_HEADING, "",
             f"`fenceqd --sync full`, K={clients} clients, {pairs} pair(s) per row: the run "
             "without keys or groups and the one with them, back to back on fresh daemons, "
             "which goes first alternated; medians. Keyed: `fenceq-bench --keyed`, every job a "
             "unique key of its own; grouped: `--groups N`, job n in group g<n % N>. Budget "
             "(issue 31): with / without ≥ 0.80. What bounds the keyed figure: bench/README.md, "
             "\"Keys and groups\".", "",
             "| budget | without, jobs/s | with, jobs/s | with / without | verdict | server CPU "
             "µs a job, without / with | pairs' ratios |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, runs in results.items():
        med, ratios, ratio = paired(runs)
        jobs = runs[0]["with"]["jobs"]
        cpu = lambda v: med(v, "server_cpu_s") / jobs * 1e6
        lines.append(f"| {name} ({jobs:,} jobs) | {fmt(med('without', 'jobs_per_s'))} | "
                     f"{fmt(med('with', 'jobs_per_s'))} | {ratio:.2f} | "
                     f"{'met' if ratio >= 0.8 else '**missed**'} | "
                     f"{cpu('without'):.1f} / {cpu('with'):.1f} | "
                     f"{', '.join(f'{r:.2f}' for r in ratios)} |")
    return lines


def peers_smoke(bindir, jobs=200, workers=8):
    """make bench-smoke: every peer measurement once on a tiny N; checks that
    each ran every job. Writes nothing."""
    why = peers_ready()
    if why:
        raise SystemExit(f"bench-smoke: {why}")
    started = time.time()
    n = 0
    for key in PEERS:
        r = peer(bindir, key, jobs, workers, timeout=60)
        if "skipped" in r:
            print(f"bench-smoke: {key:16} skipped: {r['skipped']}", flush=True)
            continue
        if r["jobs"] != jobs or not r["jobs_per_s"] > 0:
            raise SystemExit(f"bench-smoke: {key}: unexpected result {r}")
        n += 1
        print(f"bench-smoke: {key:16} {jobs} jobs, K={workers}: {r['jobs_per_s']:,.0f} jobs/s",
              flush=True)
    print(f"bench-smoke: {n} peer measurements ran every job, in {time.time() - started:.0f} s")


def package_json(name):
    """bench/node's installed copy of an npm package's package.json ({} if none)."""
    try:
        return json.loads((PEERS_DIR / "node_modules" / name / "package.json").read_text())
    except (OSError, ValueError):
        return {}


def package_version(name):
    return package_json(name).get("version", "?")


def command_version(cmd, pattern):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return "?"
    m = re.search(pattern, out)
    return m.group(1) if m else "?"


PEERS_HEADING = "## Node workload: fenceq (Node client) vs BullMQ vs graphile-worker"


def peers_section(results, skipped, jobs, rounds, fsync_us, cpp=None, how="`make bench`"):
    """The RESULTS.md section of the Node workload. `cpp`: fenceq's figures with
    the C++ load generator from the same run ({"next": jobs/s, "combined": ...})."""
    def med(key):
        runs = results.get(key)
        return statistics.median(r["jobs_per_s"] for r in runs) if runs else None

    def med_enq(key):
        runs = results.get(key)
        return statistics.median(r["enqueue_jobs_per_s"] for r in runs) if runs else None

    redis_v = command_version(["redis-server", "--version"], r"v=(\S+)")
    node_v = command_version(["node", "--version"], r"v(\S+)")
    gw_v, bull_v = package_version("graphile-worker"), package_version("bullmq")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    loads = [r["load1"] for runs in results.values() for r in runs]
    load = (f"1-minute load average after each run {min(loads):.1f} to {max(loads):.1f}"
            if loads else "")
    rows = [
        ("fenceq-next", "fenceq, Node client", "`--sync full`; claim_next + complete",
         "fsync before each reply"),
        ("fenceq-combined", "fenceq, Node client",
         "`--sync full`; complete_next (`completeAndClaimNext`), one round trip a job",
         "fsync before each reply"),
        ("fenceq-batch", "fenceq, Node client",
         f"`--sync full`; `claimNext` of up to {BATCH}, `completeMany` of them with `next` "
         f"(the following {BATCH}), one round trip a batch", "fsync before each reply"),
        ("fenceq-combined-normal", "fenceq, Node client",
         "`--sync normal`; complete_next, one round trip a job",
         "WAL fsync at checkpoints (a power cut may lose the last commits)"),
        ("fenceq-pg-combined", f"fenceq, Node client, PostgreSQL {pg_version()}",
         "one sidecar on the same kind of cluster as graphile-worker's; complete_next",
         "commit (WAL fsync)"),
        ("fenceq-pg-batch", f"fenceq, Node client, PostgreSQL {pg_version()}",
         f"one sidecar; batches of {BATCH} as above", "commit (WAL fsync)"),
        ("bullmq-always", f"BullMQ {bull_v}, Redis {redis_v}",
         "`appendonly yes`, `appendfsync always`; one Worker, concurrency 8",
         "fsync before each reply"),
        ("bullmq-everysec", f"BullMQ {bull_v}, Redis {redis_v}",
         "`appendonly yes`, `appendfsync everysec` (BullMQ's usual); one Worker, concurrency 8",
         "fsync about once a second"),
        ("graphile-single", f"graphile-worker {gw_v}, PostgreSQL {pg_version()}",
         "`run`, concurrency 8, its defaults (one job a fetch, one completion a transaction)",
         "commit (WAL fsync)"),
        ("graphile-batch", f"graphile-worker {gw_v}, PostgreSQL {pg_version()}",
         "`run`, concurrency 8, `preset.worker.localQueue.size` 500, "
         "`completeJobBatchDelay` 0, `failJobBatchDelay` 0 (its performance docs' batching)",
         "commit (WAL fsync), completions batched"),
    ]
    lines = ["", PEERS_HEADING, "",
             f"Measured by {how} on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
             f"{os.cpu_count()} cores ({cpu}), one fsync of 4 KiB: median {fsync_us:.0f} us, "
             f"{load} (a run itself accounts for up to about 2); Node {node_v}.", "",
             f"The same workload for every system (`bench/node/peers.mjs`): N = {jobs:,} no-op "
             "jobs enqueued first (BullMQ `addBulk`, graphile-worker `addJobs` and fenceq "
             "`enqueueMany`, 1,000 a call), timed apart; "
             "then K = 8 workers in one Node process, each taking one job at a time (fenceq's "
             f"batch rows: up to {BATCH}), until the "
             "system has stored the last completion. Each run on a fresh server and directory "
             "(fenceqd, redis-server with `--save \"\"`, a PostgreSQL cluster from "
             "scripts/pg_cluster.sh with its durable defaults); systems alternated each round; "
             f"medians of {rounds} round(s).", "",
             "| system | configuration | a completion is stored by | jobs/s | enqueue jobs/s "
             "| Node CPU µs a job | runs, jobs/s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, system, conf, durable in rows:
        if key in skipped:
            lines.append(f"| {system} | {conf} | {durable} | — | — | — | skipped: {skipped[key]} |")
            continue
        m = med(key)
        runs = ", ".join(fmt(r["jobs_per_s"]) for r in results.get(key, []))
        cpu_us = (statistics.median(r["client_cpu_s"] / r["jobs"] * 1e6 for r in results[key])
                  if m else None)
        lines.append(f"| {system} | {conf} | {durable} | {fmt(m) if m else '—'} | "
                     f"{fmt(med_enq(key)) if m else '—'} | {fmt(cpu_us) if m else '—'} | "
                     f"{runs or '—'} |")
    def ratio(a, b):
        """The median over rounds of a / b, each from the same round: the
        machine's load drifts between rounds, much less within one."""
        ra, rb = results.get(a, []), results.get(b, [])
        per_round = [x["jobs_per_s"] / y["jobs_per_s"] for x, y in zip(ra, rb)]
        return f"{statistics.median(per_round):.2f}x" if per_round else "—"

    peers = [("bullmq-always", "BullMQ always"), ("bullmq-everysec", "BullMQ everysec"),
             ("graphile-single", "graphile-worker"), ("graphile-batch", "graphile-worker batched")]
    lines += ["", "fenceq (Node client, `--sync full`) over each peer: the median over rounds of "
              "the ratio within each round:", "",
              "| fenceq | jobs/s | " + " | ".join(f"/ {name}" for _, name in peers) + " |",
              "| --- | --- | " + " | ".join("---" for _ in peers) + " |"]
    for key, name in (("fenceq-next", "claim_next + complete"),
                      ("fenceq-combined", "complete_next"),
                      ("fenceq-batch", f"batches of {BATCH}"),
                      ("fenceq-combined-normal", "complete_next, `--sync normal`"),
                      ("fenceq-pg-combined", "PostgreSQL sidecar, complete_next"),
                      ("fenceq-pg-batch", f"PostgreSQL sidecar, batches of {BATCH}")):
        f = med(key)
        cells = [ratio(key, p) for p, _ in peers]
        lines.append(f"| {name} | {fmt(f) if f else '— (' + skipped.get(key, 'not run') + ')'} | "
                     + " | ".join(cells) + " |")
    lines += ["", "How each is driven (bench/node/peers.mjs says more):", "",
              "- fenceq: 8 workers sharing one `Client` (one ZeroMQ socket, requests matched to "
              "replies by rid), as BullMQ's one Worker with concurrency 8 shares one connection; "
              "a worker's next request leaves once the daemon has answered (after the fsync).",
              "- BullMQ: a Worker's completion (`moveToFinished`) also fetches its next job; "
              "the run ends at the N-th `completed` event. Completed jobs are kept (its "
              "default). Batches are a BullMQ Pro feature, not in the open-source package.",
              "- graphile-worker: its workers do not wait for a completion to commit before "
              "they fetch the next job (batched or not), so the run ends when its jobs table "
              "is empty (polled once all N jobs have run). Its `engines` asks for Node "
              f"`{package_json('graphile-worker').get('engines', {}).get('node', '?')}`; "
              f"here it runs on Node {node_v} (npm only warns)."]
    if cpp:
        lines += ["", "The same daemon driven by the C++ load generator (the first table, "
                  f"K=8): `next` {fmt(cpp['next'])} and `combined` {fmt(cpp['combined'])} "
                  "jobs/s; the difference is the Node side (one event loop for the 8 workers, "
                  "sharing the 2 cores with the daemon)."]
    return lines, ratio


def splice_section(text, heading, section_lines):
    """`text` with the section under `heading` (up to the next `## ` heading)
    replaced by `section_lines`, or with them appended."""
    lines = text.rstrip("\n").split("\n")
    if heading in lines:
        start = lines.index(heading)
        if start > 0 and lines[start - 1] == "":
            start -= 1
        end = next((i for i in range(lines.index(heading) + 1, len(lines))
                    if lines[i].startswith("## ")), len(lines))
        lines = lines[:start] + section_lines + ([""] if end < len(lines) else []) + lines[end:]
    else:
        lines += section_lines
    return "\n".join(lines) + "\n"


def fsync_latency_us(samples=200):
    d = tempfile.mkdtemp(prefix="fqfsync-", dir="/tmp")
    try:
        with open(f"{d}/f", "wb") as f:
            times = []
            for _ in range(samples):
                f.write(b"x" * 4096)
                f.flush()
                t = time.perf_counter()
                os.fsync(f.fileno())
                times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def growth(bindir, size, jobs, clients):
    """fenceqd (sync=full) with `size` waiting jobs; process `jobs` of them."""
    d = tempfile.mkdtemp(prefix="fqgrow-")
    try:
        db = f"{d}/b.db"
        ep = f"ipc://{d}/s"
        # Create the schema, then preload the queue in one SQL statement.
        p = subprocess.Popen([f"{bindir}/fenceqd", "--db", db, "--listen", ep, "--log-level",
                              "warn"], stderr=subprocess.DEVNULL)
        wait_for_socket(ep, 2.0)
        p.send_signal(signal.SIGTERM)
        p.wait()
        subprocess.run(["sqlite3", db,
                        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                        f"WHERE i < {size}) INSERT INTO jobs(id, queue, seq) "
                        "SELECT 'g' || i, 'grow', i FROM n;"], check=True)
        p = subprocess.Popen([f"{bindir}/fenceqd", "--db", db, "--listen", ep, "--log-level",
                              "warn"], stderr=subprocess.DEVNULL)
        wait_for_socket(ep, 2.0)
        try:
            cmd = [f"{bindir}/fenceq-bench", "--target", "fenceq", "--endpoint", ep,
                   "--workload", "next", "--clients", str(clients), "--jobs", str(jobs),
                   "--skip-enqueue", "--queue", "grow", "--limit", str(jobs), "--pid",
                   str(p.pid), "--label", f"grow-{size}"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
            return json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)


GROWTH_SIZES = (10_000, 100_000, 1_000_000)
GROWTH_ROUNDS = 3


def growth_rounds(bindir, rounds=GROWTH_ROUNDS):
    """growth() of every size each round, the order reversed every other
    round (sizes measured seconds apart, as the echo pairs are): a list of
    rounds, each {size: result}."""
    out = []
    for rnd in range(rounds):
        sizes = GROWTH_SIZES if rnd % 2 == 0 else tuple(reversed(GROWTH_SIZES))
        got = {}
        for size in sizes:
            g = growth(bindir, size, min(size, 20000), 8)
            got[size] = g
            print(f"growth round {rnd + 1}, {size:>9,}: {g['jobs_per_s']:,.0f} jobs/s, RSS "
                  f"{g['server_peak_rss_kb'] / 1024:.1f} MiB", flush=True)
        out.append(got)
    return out


def growth_spreads(grow):
    """Each round's spread across the sizes: 1 - slowest / fastest."""
    return [1 - min(g["jobs_per_s"] for g in r.values()) / max(g["jobs_per_s"] for g in r.values())
            for r in grow]


def callgrind_instructions(bindir, jobs_small=1000, jobs_large=3000, workload="next"):
    """Instructions per request of fenceqd (sync=off, `workload`, K=1): the
    difference of two runs, so start-up and shutdown cancel out. Returns
    (the serving thread's, all threads'): the other threads (the checkpointer,
    the stats reader, libzmq's) do as much as their timing lets them, so only
    the serving thread's count holds from run to run."""
    totals = {}
    for jobs in (jobs_small, jobs_large):
        d = tempfile.mkdtemp(prefix="fqcg-")
        try:
            ep = f"ipc://{d}/s"
            out_file = f"{d}/callgrind.out"
            p = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                                  f"--callgrind-out-file={out_file}",
                                  f"{bindir}/fenceqd", "--db", f"{d}/b.db", "--listen", ep,
                                  "--sync", "off", "--log-level", "warn"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not wait_for_socket(ep, 60.0):
                raise RuntimeError("fenceqd under valgrind did not start within 60 s")
            r = subprocess.run([f"{bindir}/fenceq-bench", "--target", "fenceq", "--endpoint", ep,
                                "--workload", workload, "--clients", "1", "--jobs", str(jobs)],
                               capture_output=True, text=True, timeout=600, check=True)
            requests = json.loads(r.stdout.strip().splitlines()[-1])["requests"]
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)

            def total(path):
                m = re.search(r"^(?:summary|totals): (\d+)", path.read_text(), re.M)
                return int(m.group(1))
            # One file a thread (-01: the main thread, which serves).
            per_thread = {f.name: total(f) for f in Path(d).glob("callgrind.out-*")}
            serving = per_thread["callgrind.out-01"]
            totals[jobs] = (serving, sum(per_thread.values()), requests + 2 * jobs)  # + enqueues
        finally:
            shutil.rmtree(d, ignore_errors=True)
    (s1, a1, r1), (s2, a2, r2) = totals[jobs_small], totals[jobs_large]
    return (s2 - s1) / (r2 - r1), (a2 - a1) / (r2 - r1)


def pg_version():
    out = subprocess.run(["psql", "--version"], capture_output=True, text=True)
    m = re.search(r"\(PostgreSQL\) (\S+)", out.stdout) if out.returncode == 0 else None
    return m.group(1) if m else "?"


def fmt(x, digits=0):
    return f"{x:,.{digits}f}"


TARGETS_HEADING = "## Targets (issue 15): met or missed, from this run"


def targets_section(med, pairs, ceil, grow, pg, peer_results, peer_ratio, kinds=None,
                    batch_pairs=None):
    """Each issue-15 target: the figure, what it is compared with, met or missed."""
    rows = []

    def add(target, value, ok, how):
        verdict = "—" if ok is None else ("met" if ok else "**missed**")
        rows.append(f"| {target} | {value} | {verdict} | {how} |")

    def peer_med(key):
        runs = peer_results.get(key)
        return statistics.median(r["jobs_per_s"] for r in runs) if runs else None

    def x(a, b):
        return a / b if a and b else None

    def xs(r):
        return f"{r:.2f}x" if r is not None else "not measured"

    batch = med("fenceq-full", "batch", 8)
    # beanstalkd's best single-job figure at K=8 (it has no batch op).
    bdef = max(filter(None, (med("beanstalkd-default", w, 8) for w in ("next", "combined"))),
               default=None)
    bull_e, bull_a = peer_med("bullmq-everysec"), peer_med("bullmq-always")
    r = x(batch, bdef)
    add("SQLite batch (K=8, 32) ≥ 2.0x beanstalkd default", xs(r), r and r >= 2.0,
        f"{fmt(batch or 0)} / {fmt(bdef or 0)} jobs/s (beanstalkd's reserve + delete)")
    r = x(batch, bull_e)
    add("SQLite batch ≥ 2.0x BullMQ everysec", xs(r), r and r >= 2.0,
        f"fenceq-bench (C++) {fmt(batch or 0)} / BullMQ (Node) {fmt(bull_e or 0)} jobs/s")
    r = x(batch, bull_a)
    add("SQLite batch ≥ 5x BullMQ always", xs(r), r and r >= 5.0,
        f"{fmt(batch or 0)} / {fmt(bull_a or 0)} jobs/s")

    def paired(target, pairs_run, want):
        """A target judged on pairs run side by side (side_by_side)."""
        if not pairs_run:
            add(target, "not measured", None, "")
            return
        ratios = pair_ratios(pairs_run)
        r = statistics.median(ratios)
        add(target, f"{r:.0%}", round(r, 4) >= want,
            (f"the median of {len(ratios)} pairs" if len(ratios) > 1 else "one pair")
            + " run side by side: " + ", ".join(f"{v:.0%}" for v in ratios))

    paired("SQLite batch ≥ 75% of the in-process ceiling", batch_pairs, 0.75)
    paired("SQLite complete_next (K=8) ≥ 90% of the durable echo", pairs, 0.9)
    if peer_ratio:
        for key, peer, want in (("fenceq-combined", "bullmq-always", 1.5),
                                ("fenceq-combined", "bullmq-everysec", 1.0),
                                ("fenceq-combined-normal", "bullmq-everysec", 1.0),
                                ("fenceq-batch", "bullmq-everysec", 2.0)):
            cell = peer_ratio(key, peer)
            val = float(cell[:-1]) if cell.endswith("x") else None
            what = key.split('-', 1)[1].replace("-normal", ", --sync normal")
            add(f"Node client {what} ≥ {want}x {peer}", cell,
                None if val is None else val >= want,
                f"{fmt(peer_med(key) or 0)} / {fmt(peer_med(peer) or 0)} jobs/s, "
                "median of per-round ratios")
        for key, peer, want in (("fenceq-pg-combined", "graphile-single", 2.0),
                                ("fenceq-pg-batch", "graphile-batch", 1.0)):
            cell = peer_ratio(key, peer)
            val = float(cell[:-1]) if cell.endswith("x") else None
            add(f"PostgreSQL, 1 sidecar, Node client: {key.split('-')[2]} ≥ {want}x {peer}", cell,
                None if val is None else val >= want,
                f"{fmt(peer_med(key) or 0)} / {fmt(peer_med(peer) or 0)} jobs/s, "
                "median of per-round ratios")
    for wl in ("combined", "batch"):
        a, b = pg.get((1, wl)), pg.get((3, wl))
        if a and b:
            r = b["jobs_per_s"] / a["jobs_per_s"]
            add(f"PostgreSQL, 3 sidecars scale up ({wl})", f"{r:.2f}x", r > 1.0,
                f"{fmt(b['jobs_per_s'])} / {fmt(a['jobs_per_s'])} jobs/s (fenceq-bench)")
    rh, sh = med("fenceq-full", "renew-heavy", 8), med("fenceq-full", "step-heavy", 8)
    if rh and sh:  # issue 60: a step_save costs at most one renew
        add("step-heavy ≥ 100% of renew-heavy (SQLite, --sync full, K=8)", f"{sh / rh:.0%}",
            round(sh / rh, 4) >= 1.0, f"{fmt(sh)} / {fmt(rh)} jobs/s, medians of the rounds")
    enq = med("fenceq-full", "enqueue", 8)
    add("enqueue_many ≥ 100k jobs/s (SQLite, --sync full)", fmt(enq) if enq else "not measured",
        enq and enq >= 100_000, f"K=8, {ENQUEUE_BATCH} jobs a request")
    p99 = max(filter(None, (med("fenceq-full", w, 8, "p99_us") for w in ("next", "combined"))),
              default=None)
    add("p99 at K=8, one job a request, ≤ 2 ms", f"{p99 / 1000:.2f} ms" if p99 else "—",
        p99 and p99 <= 2000, "the worse of next and combined")
    if kinds:
        for kind, want in (("plain", 0.9), ("python", None), ("node", None)):
            r, how = paired_ratio(kinds.get(kind), kinds.get("fenceq-bench"), True)
            name = {"plain": "plain client (one shared context)", "python": "Python client",
                    "node": "Node client"}[kind]
            target = (f"complete_next (K=8), {name}, within 10% of fenceq-bench" if want
                      else f"complete_next (K=8), {name}: reported")
            add(target, f"{r:.0%}" if r else "not measured",
                (r is not None and round(r, 4) >= want) if want else None, how)
        for target, value, ok, how in go_target_rows(kinds, peer_results.get(CLIENT_PEER)):
            add(target, value, ok, how)
    if grow:
        spreads = growth_spreads(grow)
        spread = statistics.median(spreads)
        add("growth 10^4 → 10^6 waiting jobs within 20%", f"{spread:.0%} apart",
            spread <= 0.2, f"the median of {len(grow)} rounds' spreads across the sizes ("
            + ", ".join(f"{x:.0%}" for x in spreads) + ")")
    return ["", TARGETS_HEADING, "",
            "K=8, `--sync full`; ratios from this run. The C++ rows use fenceq-bench, the Node "
            "rows bench/node/peers.mjs (both sides pay Node's client costs).", "",
            "| target | measured | verdict | from |", "| --- | --- | --- | --- |"] + rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small N, one round, no growth/callgrind")
    ap.add_argument("--no-pg", action="store_true",
                    help="skip the many-hosts figures (PostgreSQL, 1 and 3 sidecars)")
    ap.add_argument("--peer-jobs", type=int, default=40000,
                    help="N for the Node workload (fenceq's Node client, BullMQ, graphile-worker)")
    ap.add_argument("--peer-rounds", type=int, default=3)
    ap.add_argument("--no-peers", action="store_true", help="skip the Node workload")
    ap.add_argument("--clients-only", action="store_true",
                    help="only complete_next by client (C++ library, plain, Python, Node, Go, and "
                         "Go's prefetching Workers), with BullMQ everysec (on --peer-jobs) in "
                         "each round when the Node workload can run; prints the table and the "
                         "Go client's targets (issue 35), writes nothing")
    ap.add_argument("--fanin-only", action="store_true",
                    help="only issue 32's fan-in budget (10,000 parents with and without 10 "
                         "children waiting); prints the table, writes nothing")
    ap.add_argument("--keys-only", action="store_true",
                    help="only issue 31's keys and groups budget (keyed enqueue_many, grouped "
                         "claims with 10,000 groups waiting); prints the table, writes nothing")
    ap.add_argument("--retention-only", action="store_true",
                    help="only issue 33's retention budget (a worker's p99 while 100,000 done "
                         "jobs are removed, --sync normal and full); prints the table, writes nothing")
    ap.add_argument("--retention-runs", type=int, default=3, help="runs per --sync setting")
    ap.add_argument("--keys-pairs", type=int, default=3,
                    help="pairs (without and with keys or groups) per budget")
    ap.add_argument("--fanin-pairs", type=int, default=3,
                    help="pairs (with and without children) per daemon setting")
    ap.add_argument("--peers-only", action="store_true",
                    help="only the Node workload: replace its section in --out, keep the rest")
    ap.add_argument("--peers-smoke", action="store_true",
                    help="every Node workload measurement once on 200 jobs; writes nothing")
    args = ap.parse_args()
    jobs = 2000 if args.quick else args.jobs
    rounds = 1 if args.quick else args.rounds
    peer_jobs = 2000 if args.quick else args.peer_jobs
    peer_rounds = 1 if args.quick else args.peer_rounds
    fanin_parents = 2000 if args.quick else FANIN_PARENTS
    fanin_pairs = 1 if args.quick else args.fanin_pairs
    started = time.time()
    if args.peers_smoke:
        peers_smoke(args.bin)
        return
    if args.clients_only:
        kinds_run = CLIENT_RUN_ORDER
        why = peers_ready()
        if why:
            print(f"run_bench: {CLIENT_PEER} is not run: {why}", flush=True)
        else:
            kinds_run += (CLIENT_PEER,)
        kinds = run_client_kinds(args.bin, jobs, rounds, kinds_run, peer_jobs)
        print("\n".join(client_kinds_section(kinds, jobs, rounds)
                        + go_targets_section(kinds, jobs, rounds)))
        return
    keys_pairs = 1 if args.quick else args.keys_pairs
    keys_scale = 0.1 if args.quick else 1.0
    if args.keys_only:
        keys = run_keys(args.bin, keys_pairs, jobs_scale=keys_scale)
        print("\n".join(keys_section(keys, keys_pairs)))
        return
    retention_runs = 1 if args.quick else args.retention_runs
    if args.retention_only:
        ret = run_retention(args.bin, retention_runs)
        print("\n".join(retention_section(ret, retention_runs)))
        return
    if args.fanin_only:
        fanin = run_fanin(args.bin, fanin_pairs, fanin_parents)
        print("\n".join(fanin_section(fanin, fanin_pairs)))
        return
    if not args.no_peers:
        why = peers_ready()
        if why:
            raise SystemExit(f"run_bench: the Node workload cannot run: {why} (or --no-peers)")
    if args.peers_only:
        peer_results, peer_skipped = run_peers(args.bin, peer_jobs, peer_rounds)
        out = Path(args.out)
        text = out.read_text() if out.exists() else "# fenceq benchmark results\n"
        section, _ = peers_section(peer_results, peer_skipped, peer_jobs, peer_rounds,
                                   fsync_latency_us(),
                                   how=f"`bench/run_bench.py --peers-only` (in {time.time() - started:.0f} s)")
        out.write_text(splice_section(text, PEERS_HEADING, section))
        print(f"wrote the Node workload section of {args.out}")
        return

    servers = ["fenceq-full", "fenceq-normal", "beanstalkd-f0", "beanstalkd-default"]
    # (workload for fenceq, workload for beanstalkd, K, N, fenceq-bench's extra arguments)
    batch_jobs = 5 * jobs  # a batch run is ~8x faster: more jobs for a run as long
    cases = [("next", "next", 1, jobs, ()), ("next", "next", 8, jobs, ()),
             ("combined", "next", 1, jobs, ()), ("combined", "next", 8, jobs, ()),
             ("claim", "claim", 8, jobs, ()),
             ("contended", "contended", 8, max(500, jobs // 10), ()),
             ("renew-heavy", "renew-heavy", 8, max(1000, jobs // 4), ()),
             # Issue 60's budget: each of renew-heavy's renews a step_save instead.
             ("step-heavy", None, 8, max(1000, jobs // 4), ()),
             ("pipeline", None, 8, jobs, ()),
             ("batch", None, 8, batch_jobs, ("--batch", str(BATCH))),
             ("enqueue", None, 8, batch_jobs, ("--batch", str(ENQUEUE_BATCH)))]
    results = {}  # (server, workload, K) -> [runs]
    for rnd in range(rounds):
        order = servers if rnd % 2 == 0 else list(reversed(servers))
        for fq_wl, bs_wl, k, n, extra in cases:
            for kind in order:
                wl = fq_wl if kind.startswith("fenceq") else bs_wl
                if wl is None:
                    continue
                r = one(args.bin, kind, wl, k, n, extra if kind.startswith("fenceq") else ())
                results.setdefault((kind, fq_wl, k), []).append(r)
                print(f"round {rnd + 1}: {kind:19} {fq_wl:11} K={k}: "
                      f"{r['jobs_per_s']:>8,.0f} jobs/s  p50 {r['p50_us']:>6.0f} us  "
                      f"p99 {r['p99_us']:>6.0f} us", flush=True)

    def med(kind, wl, k, key="jobs_per_s"):
        runs = results.get((kind, wl, k))
        return statistics.median(r[key] for r in runs) if runs else None

    echo1, echo8 = echo(args.bin, 1, jobs), echo(args.bin, 8, jobs)
    pairs = echo_pairs(args.bin, jobs, 1 if args.quick else ECHO_PAIRS)
    # The durable echo's own figure: the middle of the pairs' echo runs.
    echoes = sorted((ec for _, ec in pairs), key=lambda r: r["jobs_per_s"])
    durable8 = echoes[len(echoes) // 2]
    fsync_us = fsync_latency_us()
    # The in-process SQLite ceiling: the batch workload's statements and batch
    # size, 8 requests a transaction (K=8 workers, one request in flight each);
    # and one job a request, for the single-job path (the median of 3). The
    # batch target is judged on pairs, fenceqd's batches beside the ceiling's;
    # the ceiling's own figure is the median of its runs in those pairs.
    batch_pairs = ceiling_pairs(args.bin, batch_jobs, 1 if args.quick else CEILING_PAIRS)
    ceil = {BATCH: statistics.median(cl["jobs_per_s"] for _, cl in batch_pairs),
            1: statistics.median(ceiling(args.bin, 1, 8, jobs)["jobs_per_s"] for _ in range(3))}
    for b in (BATCH, 1):
        print(f"ceiling: batch {b:>2}, 8 requests a commit: {ceil[b]:,.0f} jobs/s", flush=True)
    # Renews: each request renews the 32 jobs it holds 3 times (256 renews a
    # transaction) before completing them.
    ceil_renews = statistics.median(
        ceiling(args.bin, BATCH, 8, batch_jobs // 2, renews=3)["renews_per_s"] for _ in range(3))
    print(f"ceiling: renews of {BATCH} held jobs, 8 requests a commit: {ceil_renews:,.0f} renews/s",
          flush=True)
    grow = []
    if not args.quick:
        grow = growth_rounds(args.bin)
    # Many hosts: sidecars sharing one local PostgreSQL.
    pg = {}  # (sidecars, workload) -> result
    pg_jobs = max(1000, jobs // 4)
    if not args.no_pg:
        cluster = PgCluster()
        try:
            # The ceiling of one sidecar, each run on a fresh schema.
            pg[(1, "echo")] = median_of_3(
                lambda: echo(args.bin, 8, pg_jobs, pg_uri=cluster.schema_uri()))
            print(f"postgres echo: K=8: {pg[(1, 'echo')]['jobs_per_s']:>8,.0f} round trips/s",
                  flush=True)
            for wl in ("next", "combined", "batch"):
                for n in (1, 3):
                    wl_jobs, extra = (pg_jobs, ()) if wl != "batch" else \
                        (4 * pg_jobs, ("--batch", str(BATCH)))
                    r = sidecars(args.bin, cluster, n, wl, 8, wl_jobs, extra)
                    pg[(n, wl)] = r
                    print(f"postgres, {n} sidecar(s): {wl:9} K=8: {r['jobs_per_s']:>8,.0f} jobs/s  "
                          f"p50 {r['p50_us']:>6.0f} us  p99 {r['p99_us']:>6.0f} us", flush=True)
        finally:
            cluster.stop()
    # The Node workload: fenceq's Node client against BullMQ and graphile-worker.
    peer_results, peer_skipped = {}, {}
    if not args.no_peers:
        peer_results, peer_skipped = run_peers(args.bin, peer_jobs, peer_rounds)
    client_rounds = rounds if args.quick else max(rounds, CLIENT_ROUNDS)
    kinds = run_client_kinds(args.bin, jobs, client_rounds,
                             CLIENT_RUN_ORDER if not args.no_peers
                             else tuple(k for k in CLIENT_RUN_ORDER if k != "node"))
    fanin = run_fanin(args.bin, fanin_pairs, fanin_parents)
    keys = run_keys(args.bin, keys_pairs, jobs_scale=keys_scale)
    retention = run_retention(args.bin, retention_runs)
    ipr = None
    if not args.quick and shutil.which("valgrind"):
        ipr = callgrind_instructions(args.bin)
        print(f"callgrind: {ipr[0]:,.0f} instructions per request on the serving thread "
              f"({ipr[1]:,.0f} in all threads)", flush=True)

    # --- RESULTS.md ---
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    lines = ["# fenceq benchmark results", "",
             f"Written by `make bench` (`bench/run_bench.py`) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"in {time.time() - started:.0f} s.", "",
             f"- Machine: {os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
             f"one fsync of 4 KiB: median {fsync_us:.0f} us.",
             f"- Command line: `{' '.join(sys.argv)}`; N = {jobs} jobs per run, {rounds} round(s), "
             "servers alternated each round, each run on a fresh server and directory; "
             "figures are medians over rounds.",
             "- Workload: N jobs enqueued (not measured), then K client threads take each job "
             "under a 30 s lease and complete it, one request in flight per client. "
             "fenceq `next` = claim_next + complete; `combined` = complete_next (one round trip "
             "a job); `claim` = claim by id + complete; beanstalkd: reserve (or reserve-job) + "
             "delete, and `touch` for renew-heavy; `step-heavy` (fenceq only) is renew-heavy "
             "with a step_save (a 16-byte value, steps s0..s4) in place of each renew.",
             "- beanstalkd " + subprocess.run(["beanstalkd", "-v"], capture_output=True,
                                              text=True).stdout.strip() +
             ": `-f 0` fsyncs its binlog on every write (the same durability as fenceq "
             "`--sync full`); the default fsyncs at most every 50 ms.",
             "", "## Throughput (jobs/s) and ratio to beanstalkd in the same run", "",
             "| workload | K | fenceq full | fenceq normal | beanstalkd -f 0 | beanstalkd default "
             "| full / -f 0 | full / default | normal / default |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for fq_wl, bs_wl, k, _, extra in cases:
        full, normal = med("fenceq-full", fq_wl, k), med("fenceq-normal", fq_wl, k)
        f0, dflt = med("beanstalkd-f0", fq_wl, k), med("beanstalkd-default", fq_wl, k)
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "—"
        cell = lambda v: fmt(v) if v else "—"
        name = fq_wl + ("" if bs_wl in (fq_wl, None) else f" (beanstalkd: {bs_wl})")
        if extra:
            name += f" of {extra[1]}"
        lines.append(f"| {name} | {k} | {cell(full)} | {cell(normal)} | {cell(f0)} | {cell(dflt)} "
                     f"| {ratio(full, f0)} | {ratio(full, dflt)} | {ratio(normal, dflt)} |")
    lines += ["", "## Latency per request (µs) and the server's cost", "",
              "| server | workload | K | p50 | p99 | p99.9 | server CPU s | peak RSS MiB "
              "| commits/s | mean batch |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (kind, wl, k), runs in sorted(results.items()):
        m = lambda key: statistics.median(r[key] for r in runs)
        lines.append(f"| {kind} | {wl} | {k} | {m('p50_us'):.0f} | {m('p99_us'):.0f} | "
                     f"{m('p999_us'):.0f} | {m('server_cpu_s'):.2f} | "
                     f"{m('server_peak_rss_kb') / 1024:.1f} | {m('commits_per_s'):,.0f} | "
                     f"{m('mean_batch'):.2f} |")
    lines += ["", "## The transport's ceiling", "",
              "ZeroMQ IPC echo of an 80-byte msgpack request, the same client code:", "",
              f"- K=1: {echo1['jobs_per_s']:,.0f} round trips/s, p50 {echo1['p50_us']:.0f} us",
              f"- K=8: {echo8['jobs_per_s']:,.0f} round trips/s, p50 {echo8['p50_us']:.0f} us",
              f"- K=1 target for fenceq p50: 1.5 x (echo p50 + fsync) = "
              f"{1.5 * (echo1['p50_us'] + fsync_us):.0f} us", "",
              "The same echo made durable (`--target echo-durable`): it takes every request "
              "waiting, writes one 4 KiB page in place and fdatasyncs it, then answers them "
              "all. No store, no SQL: the most any server that fsyncs before it replies can "
              "do here, with one request in flight per client: each request costs at least a "
              "round trip plus an fsync, so K clients make at most K / (echo p50 + fsync) = "
              f"{8e6 / (echo8['p50_us'] + fsync_us):,.0f} requests/s at K=8.", "",
              f"- K=8: {durable8['jobs_per_s']:,.0f} round trips/s, p50 "
              f"{durable8['p50_us']:.0f} us (median of {len(echoes)} runs)"]
    bf0 = med("beanstalkd-f0", "combined", 8)
    bdef = med("beanstalkd-default", "combined", 8)
    fq = med("fenceq-full", "combined", 8)
    if bf0 and bdef and fq:
        lines += [f"- fenceq combined (one round trip a job) reaches {fq:,.0f} jobs/s, "
                  f"{fq / durable8['jobs_per_s']:.0%} of it; the targets 5x beanstalkd -f 0 "
                  f"({5 * bf0:,.0f}) and 1.0x its default ({bdef:,.0f}) are "
                  f"{5 * bf0 / durable8['jobs_per_s']:.1f}x and "
                  f"{bdef / durable8['jobs_per_s']:.1f}x this ceiling"]
    ratios = sorted(pair_ratios(pairs))
    lines += [f"- side by side with the echo ({len(pairs)} pair(s), which goes first "
              f"alternated), complete_next made {ratios[0]:.0%} to {ratios[-1]:.0%} of it, "
              f"median {statistics.median(ratios):.0%}: the Targets table's figure"]
    if grow:
        lines += ["", "## Growth: fenceq --sync full, next, K=8, with N jobs waiting", "",
                  f"{len(grow)} rounds, each of every size, the order reversed every other "
                  "round; medians, and each round's figure.", "",
                  "| waiting jobs | jobs/s (up to 20,000 processed) | rounds | p99 µs | "
                  "peak RSS MiB |", "| --- | --- | --- | --- | --- |"]
        for size in GROWTH_SIZES:
            runs = [r[size] for r in grow]
            lines.append(
                f"| {size:,} | {statistics.median(g['jobs_per_s'] for g in runs):,.0f} | "
                + ", ".join(f"{g['jobs_per_s']:,.0f}" for g in runs)
                + f" | {statistics.median(g['p99_us'] for g in runs):.0f} | "
                f"{max(g['server_peak_rss_kb'] for g in runs) / 1024:.1f} |")
        lines.append("- each round's spread across the sizes (1 - slowest / fastest): "
                     + ", ".join(f"{x:.0%}" for x in growth_spreads(grow))
                     + "; the Targets table's figure is their median")
    if pg:
        lines += ["", "## Many hosts: sidecars sharing one PostgreSQL", "",
                  f"One local PostgreSQL {pg_version()} (scripts/pg_cluster.sh: its defaults, "
                  "fsync and synchronous_commit on), N = "
                  f"{pg_jobs:,} jobs, K=8 clients spread over the sidecars; the SQLite figures "
                  "are fenceq --sync full from the table above (N = "
                  f"{jobs:,}).", "",
                  "| workload | SQLite, 1 daemon | PostgreSQL, 1 sidecar | PostgreSQL, 3 sidecars "
                  "| p50 / p99 µs, 1 sidecar | p50 / p99 µs, 3 sidecars | mean batch, 1 / 3 |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for wl in ("next", "combined", "batch"):
            a, b = pg.get((1, wl)), pg.get((3, wl))
            sq = med("fenceq-full", wl, 8)
            if wl == "batch":
                wl = f"batch of {BATCH} (N = {4 * pg_jobs:,})"
            lines.append(f"| {wl} | {fmt(sq) if sq else '—'} | {fmt(a['jobs_per_s'])} | "
                         f"{fmt(b['jobs_per_s'])} | {a['p50_us']:.0f} / {a['p99_us']:.0f} | "
                         f"{b['p50_us']:.0f} / {b['p99_us']:.0f} | {a['mean_batch']:.1f} / "
                         f"{b['mean_batch']:.1f} |")
        pe, sidecar = pg.get((1, "echo")), pg.get((1, "combined"))
        if pe and sidecar:
            lines += ["", f"The ceiling of one sidecar (`fenceq-bench --target echo-pg`, the "
                      "median of 3): the ZeroMQ echo that commits one transaction of one "
                      "statement a batch on one connection before it answers, with no store: "
                      f"**{fmt(pe['jobs_per_s'])} round trips/s** at K=8 (p50 "
                      f"{pe['p50_us']:.0f} µs). One sidecar's `combined` (complete_next) makes "
                      f"{sidecar['jobs_per_s'] / pe['jobs_per_s']:.0%} of it: the rest is what its "
                      "statements cost PostgreSQL's one backend (bench/README.md)."]
    if ipr:
        lines += ["", "## Cost per request (for regressions)", "",
                  f"`valgrind --tool=callgrind --separate-threads=yes`, fenceqd --sync off, "
                  f"`next` workload, K=1: **{ipr[0]:,.0f} instructions per request on the "
                  f"serving thread**, {ipr[1]:,.0f} in all threads (difference of a 1,000-job "
                  "and a 3,000-job run, so start-up cancels out). Only the serving thread's "
                  "figure holds from run to run: the other threads (the checkpointer, the stats "
                  "reader, libzmq's) do as much as their timing lets them."]
    lines += ["", "## The in-process ceiling (SQLite, no transport)", "",
              "`fenceq-ceiling` runs the store's own claim + complete statements on a fresh "
              "SQLite file in one process, `synchronous=FULL`, 8 requests a transaction (what "
              "the daemon's group commit sees with K=8 workers); medians of 3 (of batches: of the "
              f"{len(batch_pairs)} runs beside fenceqd's):", "",
              f"- batches of {BATCH} (claim_next max {BATCH}, complete_many): "
              f"{fmt(ceil[BATCH])} jobs/s; fenceqd's batch workload at K=8 reaches "
              f"{fmt(med('fenceq-full', 'batch', 8) or 0)} in the rounds above, and beside the "
              f"ceiling's runs (the Targets table's figure) "
              + ", ".join(f"{fmt(fq['jobs_per_s'])} against {fmt(cl['jobs_per_s'])}"
                          for fq, cl in batch_pairs),
              f"- one job a request: {fmt(ceil[1])} jobs/s (the durable echo, not this, bounds "
              "the single-job path: see above)",
              f"- renews (`--renews 3`: each request renews the {BATCH} jobs it holds, one renew "
              f"a job, 3 times before completing them): {fmt(ceil_renews)} renews/s"]
    peer_lines, peer_ratio = [], None
    if not args.no_peers:
        cpp = None
        if med("fenceq-full", "next", 8) and med("fenceq-full", "combined", 8):
            cpp = {"next": med("fenceq-full", "next", 8),
                   "combined": med("fenceq-full", "combined", 8)}
        peer_lines, peer_ratio = peers_section(peer_results, peer_skipped, peer_jobs,
                                               peer_rounds, fsync_us, cpp)
    lines += client_kinds_section(kinds, jobs, client_rounds)
    lines += fanin_section(fanin, fanin_pairs)
    lines += keys_section(keys, keys_pairs)
    lines += retention_section(retention, retention_runs)
    lines += targets_section(med, pairs, ceil, grow, pg, peer_results, peer_ratio, kinds,
                             batch_pairs)
    lines += peer_lines
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
