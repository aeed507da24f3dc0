#!/usr/bin/python3
"""bench/python_client.py: complete_next from fenceq's Python client.

    /usr/bin/python3 bench/python_client.py --endpoint ipc:///tmp/b/s --jobs 20000 --clients 8

N jobs are enqueued first with enqueue_many (not measured); then K threads of
this one process, each with its own fenceq.Client (one DEALER socket; the
client's ZeroMQ context is shared by the process), take every job: claim_next,
then complete_and_claim_next (the complete_next op, one round trip a job) until
the queue is empty. The same workload as `fenceq-bench --workload combined`,
whose JSON line this prints (target "python"), so run_bench.py puts both in one
table. Python's threads share one interpreter lock: the figure is what a Python
worker process gets, not what the daemon can do.
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))
import fenceq  # noqa: E402


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--ttl", type=float, default=30)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    queue = f"py{os.getpid()}-{int(time.time())}"

    with fenceq.Client(args.endpoint, timeout=30) as c:
        for start in range(0, args.jobs, 500):
            c.enqueue_many([{"id": f"{queue}-{n}", "queue": queue}
                            for n in range(start, min(args.jobs, start + 500))])
        before = c.stats()

    completed = [0] * args.clients
    refused = [0] * args.clients
    lat = [[] for _ in range(args.clients)]
    errors = []

    def worker(i):
        try:
            with fenceq.Client(args.endpoint, timeout=30) as cl:
                owner = f"py-{i}"
                t = time.perf_counter()
                job = cl.claim_next(queue, owner, args.ttl)
                lat[i].append(time.perf_counter() - t)
                while job is not None:
                    t = time.perf_counter()
                    out = cl.complete_and_claim_next(job["id"], owner, job["fence"], "",
                                                     queue, args.ttl)
                    lat[i].append(time.perf_counter() - t)
                    if out["completed"]:
                        completed[i] += 1
                    else:
                        refused[i] += 1
                    job = out["next"]
        except Exception as e:  # reported, and the run fails
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    with fenceq.Client(args.endpoint, timeout=30) as c:
        after = c.stats()
    all_us = [x * 1e6 for xs in lat for x in xs]
    done = sum(completed)
    commits = after["commits"] - before["commits"]
    print(json.dumps({
        "label": args.label, "target": "python", "workload": "combined",
        "clients": args.clients, "jobs": args.jobs, "completed": done,
        "refused": sum(refused), "seconds": round(secs, 3),
        "jobs_per_s": round(done / secs), "requests": len(all_us),
        "p50_us": round(percentile(all_us, 0.50)), "p99_us": round(percentile(all_us, 0.99)),
        "p999_us": round(percentile(all_us, 0.999)),
        "commits_per_s": round(commits / secs), "errors": errors[:3],
    }))
    print(f"{args.label:12} python     combined    K={args.clients:<3d} {done / secs:8.0f} jobs/s  "
          f"p50 {statistics.median(all_us) if all_us else 0:6.0f} us", file=sys.stderr)
    return 0 if not errors and done == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
