#!/usr/bin/python3
"""Issue 60's budget, "a step_save costs at most one renew", in the serving
thread's instructions (callgrind, fenceqd --sync off, one client).

For each workload (`next`: claim_next + complete; `renew-heavy` and
`step-heavy`: the same with R renews or R step_saves a job between them),
the serving thread's instructions per job: the difference of a run of
JOBS and one of 3 x JOBS jobs, so start-up and shutdown cancel out. Then a
renew's cost is (renew-heavy - next) / R, a job's first step (step-heavy
with R = 1) - next, and a later step the rest of R = 5 over 4.

  /usr/bin/python3 bench/step_cost.py [--bin build/bin] [--jobs 2000]

Needs valgrind (make bench-deps installs it). Prints one table.
"""
import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import wait_for_socket  # noqa: E402


def serving(bindir, workload, jobs, renews):
    """The serving thread's instructions for one run of `jobs` jobs."""
    d = tempfile.mkdtemp(prefix="fqstep-")
    try:
        ep = f"ipc://{d}/s"
        p = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                              f"--callgrind-out-file={d}/callgrind.out", f"{bindir}/fenceqd",
                              "--db", f"{d}/b.db", "--listen", ep, "--sync", "off",
                              "--log-level", "warn"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for_socket(ep, 60.0):
            raise RuntimeError("fenceqd under valgrind did not start within 60 s")
        r = subprocess.run([f"{bindir}/fenceq-bench", "--target", "fenceq", "--endpoint", ep,
                            "--workload", workload, "--clients", "1", "--jobs", str(jobs),
                            "--renews", str(renews)],
                           capture_output=True, text=True, timeout=900, check=True)
        done = json.loads(r.stdout.strip().splitlines()[-1])["completed"]
        if done != jobs:
            raise RuntimeError(f"{workload}: {done} of {jobs} jobs completed")
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        text = (Path(d) / "callgrind.out-01").read_text()  # -01: the serving thread
        return int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def per_job(bindir, workload, jobs, renews=0):
    return (serving(bindir, workload, 3 * jobs, renews) -
            serving(bindir, workload, jobs, renews)) / (2 * jobs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--jobs", type=int, default=2000)
    a = ap.parse_args()
    base = per_job(a.bin, "next", a.jobs)
    renew1 = per_job(a.bin, "renew-heavy", a.jobs, 1) - base
    renew5 = (per_job(a.bin, "renew-heavy", a.jobs, 5) - base) / 5
    step1 = per_job(a.bin, "step-heavy", a.jobs, 1) - base
    step5 = per_job(a.bin, "step-heavy", a.jobs, 5) - base
    later = (step5 - step1) / 4
    print("| renew (R = 1) | renew (R = 5, each) | first step_save | each later one |")
    print("| --- | --- | --- | --- |")
    print(f"| {renew1:,.0f} | {renew5:,.0f} | {step1:,.0f} ({step1 / renew5:.2f}) | "
          f"{later:,.0f} ({later / renew5:.2f}) |")


if __name__ == "__main__":
    main()
