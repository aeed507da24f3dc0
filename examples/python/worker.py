#!/usr/bin/env python3
"""A fenceq worker to copy: claim a job, keep its lease alive while working,
complete it with the fencing token, give it back if the work fails.

Try it from the repository root against the daemon that `make run` serves:

    make run                                              # terminal 1
    /usr/bin/python3 examples/python/worker.py --enqueue invoice-1 invoice-2   # terminal 2
    build/bin/fenceq state invoice-1

The endpoint is --endpoint, else the order every fenceq client follows
($FENCEQ_ENDPOINT, else the installed service's socket, else
ipc://var/fenceqd.sock, relative to the current directory; docs/operating.md,
"Which endpoint a client uses"). Run two copies at once: each job is processed
by exactly one of them; the other reports it as taken.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import fenceq
except ImportError:  # running from a checkout without `pip install clients/python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    import fenceq


def process(lease: fenceq.Lease) -> str:
    """The work itself. Its return value (a str, or None) becomes the job's result.

    `lease.fence` is the fencing token: anything this job writes outside fenceq
    should carry it, so that system can refuse a stale writer too. Call
    `lease.check()` before expensive or irreversible steps: it raises
    `fenceq.LeaseLost` once another worker may own the job.
    """
    for _ in range(3):
        time.sleep(0.2)          # stand-in for real work; the lease is renewed meanwhile
        lease.check()
    return f"processed {lease.id} under fence {lease.fence}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", nargs="+", metavar="JOB_ID", help="job ids to work on")
    parser.add_argument("--endpoint", help="fenceqd endpoint (default: $FENCEQ_ENDPOINT, else "
                                           f"{fenceq.SERVICE_ENDPOINT} if there, else "
                                           f"{fenceq.DEFAULT_ENDPOINT})")
    parser.add_argument("--ttl", type=float, default=10.0, help="lease length in seconds")
    parser.add_argument("--enqueue", action="store_true", help="enqueue the jobs first")
    args = parser.parse_args()

    try:
        with fenceq.Worker(args.endpoint, ttl=args.ttl, timeout=3.0) as worker:
            if args.enqueue:
                with fenceq.Client(worker.endpoint, timeout=3.0) as client:
                    for job_id in args.jobs:
                        client.enqueue(job_id)  # False when it exists already: fine
            for job_id in args.jobs:
                outcome = worker.run(job_id, process)
                if outcome is None:
                    print(f"{job_id}: not claimed (another worker has it, or it is done or missing)")
                elif outcome:
                    print(f"{job_id}: done by {worker.owner}")
                else:
                    print(f"{job_id}: lease lost; the result was refused")
    except (fenceq.Timeout, fenceq.Unreachable) as e:
        print(f"no fenceqd answered: {e.message}\n(is `make run` running, and is this the "
              "repository root? or set FENCEQ_ENDPOINT, or give --endpoint)", file=sys.stderr)
        return 2
    except fenceq.FenceqError as e:
        print(f"fenceq error {e.code}: {e.message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
