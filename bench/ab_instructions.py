#!/usr/bin/python3
"""A/B of two builds of fenceqd in the serving thread's instructions.

A speed budget such as "make bench's headline rows stay within 3%" cannot be
read off jobs/s on a 2-core VM whose other load moves them by more than 3%
between runs. The instructions the serving thread spends per request
(callgrind, fenceqd --sync off, one client) do not move with other load, so
two builds compare in them: the difference of a run of 1,000 and one of
3,000 jobs (start-up and shutdown cancel out), per request, for each
workload of make bench's headline rows (`next`: claim_next + complete,
`combined`: complete_next, `batch`: claim_next of 32 + complete_many,
`enqueue`: enqueue_many of 100).

  /usr/bin/python3 bench/ab_instructions.py --a OLD/build/bin --b NEW/build/bin

Each bin folder needs fenceqd and fenceq-bench. Prints one row a workload:
A's and B's instructions per request and B / A - 1. Needs valgrind (make
bench-deps installs it).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import callgrind_instructions  # noqa: E402

WORKLOADS = ["next", "combined", "batch", "enqueue"]


def instructions(bindir, workload, tries=3):
    """callgrind_instructions, tried again when the run failed (a daemon
    under valgrind on a busy machine can take longer to start than the
    bench client waits)."""
    for n in range(tries):
        try:
            return callgrind_instructions(bindir, workload=workload)[0]
        except Exception as e:  # noqa: BLE001
            if n == tries - 1:
                raise
            print(f"({bindir} {workload}: {e}; again)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="bin folder of the build to compare against")
    ap.add_argument("--b", required=True, help="bin folder of the build under test")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--pairs", type=int, default=1, help="runs of each build per workload")
    args = ap.parse_args()
    print("| workload | A instr./request | B instr./request | B / A - 1 |")
    print("| --- | --- | --- | --- |")
    for w in args.workloads.split(","):
        a = [instructions(args.a, w) for _ in range(args.pairs)]
        b = [instructions(args.b, w) for _ in range(args.pairs)]
        ma, mb = sorted(a)[len(a) // 2], sorted(b)[len(b) // 2]
        print(f"| {w} | {ma:,.0f} | {mb:,.0f} | {mb / ma - 1:+.1%} |", flush=True)


if __name__ == "__main__":
    main()
