#!/usr/bin/env python3
"""A fenceq queue worker to copy: take the next job of a queue, run it with its
payload under a renewed lease, complete it with the fence, or report the error
with `fail` so the daemon retries it later (or marks it dead). While the queue
has work, `QueueWorker.run` completes a job and claims the next one in a single
round trip (`complete_next`); it long-polls only when the queue is empty.

Try it from the repository root against the daemon that `make run` serves:

    make run                                                        # terminal 1
    /usr/bin/python3 examples/python/queue_worker.py --enqueue 6 --idle-exit 2   # terminal 2
    build/bin/fenceq list --queue thumbnails

`--enqueue N` first produces N jobs with JSON payloads (one of them fails on
its first attempt, to show a retry). Without `--idle-exit` the workers run
until Ctrl-C or SIGTERM: each finishes the job in hand and stops. Run several
copies at once: each job is processed by exactly one worker at a time. The
endpoint is --endpoint, else the order every fenceq client follows
($FENCEQ_ENDPOINT, else the installed service's socket, else
ipc://var/fenceqd.sock, relative to the current directory; docs/operating.md,
"Which endpoint a client uses").
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import List

try:
    import fenceq
except ImportError:  # running from a checkout without `pip install clients/python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    import fenceq

print_lock = threading.Lock()


def say(text: str) -> None:
    with print_lock:
        print(text, flush=True)


def make_thumbnail(job: fenceq.Job) -> str:
    """The work itself. Its return value (a str, or None) becomes the job's
    result; an exception becomes the job's error and the job is retried.

    `job.payload` is what the producer enqueued (str here; bytes stay bytes).
    `job.fence` is the fencing token: anything this job writes outside fenceq
    should carry it, so that system can refuse a stale writer too (C2.4).
    `job.check()` raises fenceq.LeaseLost once another worker may own the job.
    """
    task = json.loads(job.payload)
    if task.get("flaky") and job.attempts == 1:
        raise RuntimeError(f"{task['image']}: decoder crashed")
    time.sleep(0.1)              # stand-in for real work; the lease is renewed meanwhile
    job.check()
    return f"{task['image']} -> {task['width']}px"


def produce(client: fenceq.Client, queue: str, count: int) -> None:
    fresh = 0
    for i in range(1, count + 1):
        payload = json.dumps({"image": f"photo-{i}.jpg", "width": 100 * i, "flaky": i == 2})
        # The last job waits for the others: priority 1 is claimed first.
        if client.enqueue(f"thumb-{i}", queue=queue, payload=payload,
                          priority=0 if i == count else 1, max_attempts=3):
            fresh += 1
    say(f"producer: {fresh} new jobs in queue {queue}")


def report(name: str, outcome: fenceq.JobOutcome) -> None:
    job = outcome.job
    if outcome.status == "completed":
        say(f"{name}: {job.id} done (fence {job.fence}): {outcome.result}")
    elif outcome.status == "failed":
        say(f"{name}: {job.id} failed on attempt {job.attempts}, the daemon will retry it: {outcome.error}")
    else:
        say(f"{name}: {job.id} lease lost; nothing stored")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="fenceqd endpoint (default: $FENCEQ_ENDPOINT, else "
                                           f"{fenceq.SERVICE_ENDPOINT} if there, else "
                                           f"{fenceq.DEFAULT_ENDPOINT})")
    parser.add_argument("--queue", default="thumbnails", help="queue to work on (default: thumbnails)")
    parser.add_argument("--enqueue", type=int, default=0, metavar="N", help="produce N jobs first")
    parser.add_argument("--workers", type=int, default=2, help="worker threads (default: 2)")
    parser.add_argument("--ttl", type=float, default=10.0, help="lease length in seconds")
    parser.add_argument("--idle-exit", type=float, metavar="SECONDS",
                        help="stop once no job came for this long (default: run until stopped)")
    args = parser.parse_args()

    # report() prints every outcome; keep the library's own warnings quiet.
    logging.getLogger("fenceq.worker").setLevel(logging.ERROR)

    try:
        with fenceq.Client(args.endpoint, timeout=3.0) as client:
            client.ping()
            if args.enqueue:
                produce(client, args.queue, args.enqueue)
    except (fenceq.Timeout, fenceq.Unreachable) as e:
        print(f"no fenceqd answered: {e.message}\n(is `make run` running, and is this the "
              "repository root? or set FENCEQ_ENDPOINT, or give --endpoint)", file=sys.stderr)
        return 2

    workers: List[fenceq.QueueWorker] = []
    failures: List[BaseException] = []
    stopping = threading.Event()

    def stop(signum, frame) -> None:
        say(f"signal {signum}: finishing the jobs in hand")
        stopping.set()
        for worker in list(workers):
            worker.stop()            # safe in a signal handler: it only sets a flag

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def work(name: str) -> None:
        # One QueueWorker per thread: like a Client, it belongs to its thread.
        with fenceq.QueueWorker(args.endpoint, args.queue, ttl=args.ttl, retry_in=0.5,
                                timeout=3.0, owner=name) as worker:
            workers.append(worker)
            if stopping.is_set():
                worker.stop()
            try:
                worker.run(make_thumbnail, idle_exit=args.idle_exit,
                           on_outcome=lambda outcome: report(name, outcome))
            except fenceq.FenceqError as e:
                failures.append(e)

    threads = [threading.Thread(target=work, args=(f"worker-{i + 1}",)) for i in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)              # short joins: signal handlers run in this thread

    if failures:
        print(f"fenceq error: {failures[0]}", file=sys.stderr)
        return 2
    with fenceq.Client(args.endpoint, timeout=3.0) as client:
        jobs = client.list(queue=args.queue, limit=1000)
    done = sum(1 for job in jobs if job["state"] == "done")
    say(f"queue {args.queue}: {done} of {len(jobs)} jobs done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
