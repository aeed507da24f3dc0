"""examples/python/worker.py, the worker users copy, run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, Daemon

EXAMPLE = REPO / "examples" / "python" / "worker.py"


def run_example(args, endpoint: str, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FENCEQ_ENDPOINT=endpoint)
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=cwd)


def test_example_worker_processes_jobs_once(server_daemon: Daemon, tmp_dir: str):
    """Two copies of the example on the same jobs: every job done exactly once (C3.7)."""
    jobs = [f"ex-{i}" for i in range(4)]
    env = dict(os.environ, FENCEQ_ENDPOINT=server_daemon.endpoint)
    procs = [subprocess.Popen([sys.executable, str(EXAMPLE), "--enqueue", *jobs], env=env, cwd=tmp_dir,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out)
    done_lines = [line for out in outs for line in out.splitlines() if ": done by " in line]
    assert sorted(line.split(":")[0] for line in done_lines) == jobs
    with server_daemon.client() as c:
        for job in jobs:
            s = c.state(job)
            assert s["done"] is True and s["result"] == f"processed {job} under fence 1"


def test_example_worker_without_daemon_says_so(tmp_dir: str):
    out = run_example(["job-x"], f"ipc://{tmp_dir}/nobody.sock", tmp_dir)
    assert out.returncode == 2
    assert "make run" in out.stderr
