#!/usr/bin/python3
"""make bench: fenceqd against beanstalkd on one machine, side by side.

Runs the same load generator (bench/fenceq-bench) against fenceqd (--sync full
and normal) and beanstalkd (binlog fsynced on every write, -f 0, and its
default), alternating the servers each round, and reports every figure with
its ratio to beanstalkd measured in the same run. Writes bench/RESULTS.md.
Standard library only (Debian's /usr/bin/python3).
"""
import argparse
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


def echo(bindir, clients, jobs, durable=False):
    """The transport alone; `durable`: plus one fdatasynced page per batch."""
    d = tempfile.mkdtemp(prefix="fqecho-", dir="/tmp")
    try:
        cmd = [f"{bindir}/fenceq-bench", "--target", "echo-durable" if durable else "echo",
               "--endpoint", f"ipc://{d}/e", "--clients", str(clients), "--jobs", str(jobs)]
        if durable:
            cmd += ["--sync-file", f"{d}/wal"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, ignore_errors=True)


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


def sidecars(bindir, cluster, n, workload, clients, jobs):
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
            for _ in range(250):
                if os.path.exists(ep[len("ipc://"):]):
                    break
                time.sleep(0.02)
        cmd = [f"{bindir}/fenceq-bench", "--target", "fenceq", "--workload", workload,
               "--clients", str(clients), "--jobs", str(jobs),
               "--label", f"postgres-{n}-sidecars"]
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
        for _ in range(100):
            if os.path.exists(f"{d}/s"):
                break
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        p.wait()
        subprocess.run(["sqlite3", db,
                        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                        f"WHERE i < {size}) INSERT INTO jobs(id, queue, seq) "
                        "SELECT 'g' || i, 'grow', i FROM n;"], check=True)
        p = subprocess.Popen([f"{bindir}/fenceqd", "--db", db, "--listen", ep, "--log-level",
                              "warn"], stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(f"{d}/s"):
                break
            time.sleep(0.02)
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


def callgrind_instructions(bindir, jobs_small=1000, jobs_large=3000):
    """Instructions per request of fenceqd (sync=off, next workload, K=1): the
    difference of two runs, so start-up and shutdown cancel out."""
    totals = {}
    for jobs in (jobs_small, jobs_large):
        d = tempfile.mkdtemp(prefix="fqcg-")
        try:
            ep = f"ipc://{d}/s"
            out_file = f"{d}/callgrind.out"
            p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                                  f"{bindir}/fenceqd", "--db", f"{d}/b.db", "--listen", ep,
                                  "--sync", "off", "--log-level", "warn"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(500):
                if os.path.exists(f"{d}/s"):
                    break
                time.sleep(0.02)
            r = subprocess.run([f"{bindir}/fenceq-bench", "--target", "fenceq", "--endpoint", ep,
                                "--workload", "next", "--clients", "1", "--jobs", str(jobs)],
                               capture_output=True, text=True, timeout=600, check=True)
            requests = json.loads(r.stdout.strip().splitlines()[-1])["requests"]
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)
            text = Path(out_file).read_text()
            m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            totals[jobs] = (int(m.group(1)), requests + 2 * jobs)  # + the enqueues (setup)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    (i1, r1), (i2, r2) = totals[jobs_small], totals[jobs_large]
    return (i2 - i1) / (r2 - r1)


def pg_version():
    out = subprocess.run(["psql", "--version"], capture_output=True, text=True)
    m = re.search(r"\(PostgreSQL\) (\S+)", out.stdout) if out.returncode == 0 else None
    return m.group(1) if m else "?"


def fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small N, one round, no growth/callgrind")
    ap.add_argument("--no-pg", action="store_true",
                    help="skip the many-hosts figures (PostgreSQL, 1 and 3 sidecars)")
    args = ap.parse_args()
    jobs = 2000 if args.quick else args.jobs
    rounds = 1 if args.quick else args.rounds
    started = time.time()

    servers = ["fenceq-full", "fenceq-normal", "beanstalkd-f0", "beanstalkd-default"]
    # (workload for fenceq, workload for beanstalkd, K, N)
    cases = [("next", "next", 1, jobs), ("next", "next", 8, jobs),
             ("combined", "next", 1, jobs), ("combined", "next", 8, jobs),
             ("claim", "claim", 8, jobs),
             ("contended", "contended", 8, max(500, jobs // 10)),
             ("renew-heavy", "renew-heavy", 8, max(1000, jobs // 4)),
             ("pipeline", None, 8, jobs)]
    results = {}  # (server, workload, K) -> [runs]
    for rnd in range(rounds):
        order = servers if rnd % 2 == 0 else list(reversed(servers))
        for fq_wl, bs_wl, k, n in cases:
            for kind in order:
                wl = fq_wl if kind.startswith("fenceq") else bs_wl
                if wl is None:
                    continue
                r = one(args.bin, kind, wl, k, n)
                results.setdefault((kind, fq_wl, k), []).append(r)
                print(f"round {rnd + 1}: {kind:19} {fq_wl:11} K={k}: "
                      f"{r['jobs_per_s']:>8,.0f} jobs/s  p50 {r['p50_us']:>6.0f} us  "
                      f"p99 {r['p99_us']:>6.0f} us", flush=True)

    def med(kind, wl, k, key="jobs_per_s"):
        runs = results.get((kind, wl, k))
        return statistics.median(r[key] for r in runs) if runs else None

    echo1, echo8 = echo(args.bin, 1, jobs), echo(args.bin, 8, jobs)
    # The durable echo: the median of three runs (one fsync a batch is noisy).
    durable8 = sorted((echo(args.bin, 8, jobs, durable=True) for _ in range(3)),
                      key=lambda r: r["jobs_per_s"])[1]
    fsync_us = fsync_latency_us()
    grow = []
    if not args.quick:
        for size in (10_000, 100_000, 1_000_000):
            g = growth(args.bin, size, min(size, 20000), 8)
            grow.append((size, g))
            print(f"growth {size:>9,}: {g['jobs_per_s']:,.0f} jobs/s, RSS "
                  f"{g['server_peak_rss_kb'] / 1024:.1f} MiB", flush=True)
    # Many hosts: sidecars sharing one local PostgreSQL.
    pg = {}  # (sidecars, workload) -> result
    pg_jobs = max(1000, jobs // 4)
    if not args.no_pg:
        cluster = PgCluster()
        try:
            for wl in ("next", "combined"):
                for n in (1, 3):
                    r = sidecars(args.bin, cluster, n, wl, 8, pg_jobs)
                    pg[(n, wl)] = r
                    print(f"postgres, {n} sidecar(s): {wl:9} K=8: {r['jobs_per_s']:>8,.0f} jobs/s  "
                          f"p50 {r['p50_us']:>6.0f} us  p99 {r['p99_us']:>6.0f} us", flush=True)
        finally:
            cluster.stop()
    ipr = None
    if not args.quick and shutil.which("valgrind"):
        ipr = callgrind_instructions(args.bin)
        print(f"callgrind: {ipr:,.0f} instructions per request", flush=True)

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
             "delete, and `touch` for renew-heavy.",
             "- beanstalkd " + subprocess.run(["beanstalkd", "-v"], capture_output=True,
                                              text=True).stdout.strip() +
             ": `-f 0` fsyncs its binlog on every write (the same durability as fenceq "
             "`--sync full`); the default fsyncs at most every 50 ms.",
             "", "## Throughput (jobs/s) and ratio to beanstalkd in the same run", "",
             "| workload | K | fenceq full | fenceq normal | beanstalkd -f 0 | beanstalkd default "
             "| full / -f 0 | full / default | normal / default |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for fq_wl, bs_wl, k, _ in cases:
        full, normal = med("fenceq-full", fq_wl, k), med("fenceq-normal", fq_wl, k)
        f0, dflt = med("beanstalkd-f0", fq_wl, k), med("beanstalkd-default", fq_wl, k)
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "—"
        cell = lambda v: fmt(v) if v else "—"
        name = fq_wl + ("" if bs_wl in (fq_wl, None) else f" (beanstalkd: {bs_wl})")
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
              f"{durable8['p50_us']:.0f} us (median of 3 runs)"]
    bf0 = med("beanstalkd-f0", "combined", 8)
    bdef = med("beanstalkd-default", "combined", 8)
    fq = med("fenceq-full", "combined", 8)
    if bf0 and bdef and fq:
        lines += [f"- fenceq combined (one round trip a job) reaches {fq:,.0f} jobs/s, "
                  f"{fq / durable8['jobs_per_s']:.0%} of it; the targets 5x beanstalkd -f 0 "
                  f"({5 * bf0:,.0f}) and 1.0x its default ({bdef:,.0f}) are "
                  f"{5 * bf0 / durable8['jobs_per_s']:.1f}x and "
                  f"{bdef / durable8['jobs_per_s']:.1f}x this ceiling"]
    if grow:
        lines += ["", "## Growth: fenceq --sync full, next, K=8, with N jobs waiting", "",
                  "| waiting jobs | jobs/s (up to 20,000 processed) | p99 µs | peak RSS MiB |",
                  "| --- | --- | --- | --- |"]
        for size, g in grow:
            lines.append(f"| {size:,} | {g['jobs_per_s']:,.0f} | {g['p99_us']:.0f} | "
                         f"{g['server_peak_rss_kb'] / 1024:.1f} |")
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
        for wl in ("next", "combined"):
            a, b = pg.get((1, wl)), pg.get((3, wl))
            sq = med("fenceq-full", wl, 8)
            lines.append(f"| {wl} | {fmt(sq) if sq else '—'} | {fmt(a['jobs_per_s'])} | "
                         f"{fmt(b['jobs_per_s'])} | {a['p50_us']:.0f} / {a['p99_us']:.0f} | "
                         f"{b['p50_us']:.0f} / {b['p99_us']:.0f} | {a['mean_batch']:.1f} / "
                         f"{b['mean_batch']:.1f} |")
    if ipr:
        lines += ["", "## Cost per request (for regressions)", "",
                  f"`valgrind --tool=callgrind`, fenceqd --sync off, `next` workload, K=1: "
                  f"**{ipr:,.0f} instructions per request** (difference of a 1,000-job and a "
                  "3,000-job run, so start-up cancels out)."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
