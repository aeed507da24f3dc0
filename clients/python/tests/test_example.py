"""examples/python/worker.py and queue_worker.py, the workers users copy, run as a
user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import REPO, Daemon, wait_until, waiting_claims

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


QUEUE_EXAMPLE = REPO / "examples" / "python" / "queue_worker.py"


def test_example_queue_worker_drains_the_queue_with_a_retry(server_daemon: Daemon, tmp_dir: str):
    """Produce 4 jobs, two worker threads drain them; thumb-2 fails once and is
    retried with a larger fence; every job ends done, each exactly once."""
    env = dict(os.environ, FENCEQ_ENDPOINT=server_daemon.endpoint)
    out = subprocess.run([sys.executable, str(QUEUE_EXAMPLE), "--enqueue", "4", "--idle-exit", "1"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=tmp_dir)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "producer: 4 new jobs in queue thumbnails"
    assert any("thumb-2 failed on attempt 1" in line and "RuntimeError: photo-2.jpg: decoder crashed" in line
               for line in lines)
    done = sorted(line.split(": ")[1].split(" ")[0] for line in lines if " done (fence " in line)
    assert done == ["thumb-1", "thumb-2", "thumb-3", "thumb-4"]
    assert any("thumb-2 done (fence 2)" in line for line in lines)
    assert lines[-1] == "queue thumbnails: 4 of 4 jobs done"
    with server_daemon.client() as c:
        assert c.state("thumb-3")["result"] == "photo-3.jpg -> 300px"


def test_example_queue_worker_stops_on_sigterm(server_daemon: Daemon, tmp_dir: str):
    env = dict(os.environ, FENCEQ_ENDPOINT=server_daemon.endpoint)
    proc = subprocess.Popen([sys.executable, str(QUEUE_EXAMPLE), "--queue", "idle"], env=env, cwd=tmp_dir,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: waiting_claims(server_daemon) == 2, 10), "workers did not park"
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        assert time.monotonic() - start < 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "finishing the jobs in hand" in out and "queue idle: 0 of 0 jobs done" in out
