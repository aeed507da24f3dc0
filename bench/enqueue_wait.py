#!/usr/bin/python3
"""Enqueue-and-wait against plain enqueue, claim and complete, on a large store.

Producers enqueue jobs; workers claim_next and complete them. In the "plain"
run producers enqueue and go on; in the "await" run each producer enqueues a
job and awaits it (enqueue_and_wait) before the next, so a job's finish must
reach its producer through the daemon's await. Both runs use the same
Python client, processes and store (prefilled with --store-jobs jobs of
another queue, as a long-lived store would be), so the ratio of their
throughputs is what await costs.

  /usr/bin/python3 bench/enqueue_wait.py --fenceqd build/bin/fenceqd \
      --store-jobs 1000000 --jobs 3000 --producers 30 --workers 4
"""
import argparse
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import fenceq  # noqa: E402


def start(fenceqd, d):
    endpoint = "ipc://" + os.path.join(d, "s")
    p = subprocess.Popen([fenceqd, "--db", os.path.join(d, "db"), "--listen", endpoint,
                          "--clock", "server"], stderr=open(os.path.join(d, "log"), "ab"))
    for _ in range(200):
        try:
            with fenceq.Client(endpoint, timeout=0.2) as c:
                c.ping()
                return p, endpoint
        except fenceq.FenceqError:
            time.sleep(0.05)
    raise RuntimeError("fenceqd did not start")


def prefill(fenceqd, d, n):
    p, _ = start(fenceqd, d)  # creates the schema
    p.send_signal(signal.SIGTERM)
    p.wait()
    db = sqlite3.connect(os.path.join(d, "db"))
    db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
               "INSERT INTO jobs(id, queue, seq, created, not_before) SELECT 'old-' || i, "
               "'archive', i, 1.0, 1e12 FROM n", (n,))
    db.commit()
    db.close()


def producer(endpoint, mode, ids, queue):
    with fenceq.Client(endpoint, timeout=60) as c:
        for i in ids:
            if mode == "await":
                job = c.enqueue_and_wait(i, 30, queue=queue)
                assert job and job["state"] == "done", job
            else:
                c.enqueue(i, queue=queue)


def worker(endpoint, queue, owner, stop, completed):
    with fenceq.Client(endpoint, timeout=10) as c:
        while not stop.is_set():
            job = c.claim_next(queue, owner, 30, wait=0.2)
            if job and c.complete(job["id"], owner, job["fence"], "ok"):
                with completed.get_lock():
                    completed.value += 1


def run(endpoint, mode, round_, jobs, producers, workers):
    queue = "q-%s-%d" % (mode, round_)
    stop = mp.Event()
    completed = mp.Value("q", 0)
    ws = [mp.Process(target=worker, args=(endpoint, queue, "w%d" % k, stop, completed))
          for k in range(workers)]
    for w in ws:
        w.start()
    ids = ["%s-%d" % (queue, i) for i in range(jobs)]
    t0 = time.monotonic()
    ps = [mp.Process(target=producer, args=(endpoint, mode, ids[k::producers], queue))
          for k in range(producers)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        assert p.exitcode == 0, "a producer failed"
    while completed.value < jobs:  # plain: until every job is completed
        time.sleep(0.002)
    seconds = time.monotonic() - t0
    stop.set()
    for w in ws:
        w.join()
    return jobs / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fenceqd", default="build/bin/fenceqd")
    ap.add_argument("--store-jobs", type=int, default=1000000)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--producers", type=int, default=30)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        prefill(a.fenceqd, d, a.store_jobs)
        p, endpoint = start(a.fenceqd, d)
        try:
            rates = {"plain": [], "await": []}
            for r in range(a.rounds):
                for mode in (["plain", "await"] if r % 2 == 0 else ["await", "plain"]):
                    rate = run(endpoint, mode, r, a.jobs, a.producers, a.workers)
                    rates[mode].append(rate)
                    print("round %d %-5s %8.0f jobs/s" % (r + 1, mode, rate), flush=True)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait()
    med = {m: sorted(v)[len(v) // 2] for m, v in rates.items()}
    print("store of %d jobs, %d producers, %d workers: enqueue+claim+complete %.0f jobs/s, "
          "enqueue-and-wait %.0f jobs/s (%.0f%%)" % (a.store_jobs, a.producers, a.workers,
                                                      med["plain"], med["await"],
                                                      100 * med["await"] / med["plain"]))


if __name__ == "__main__":
    main()
