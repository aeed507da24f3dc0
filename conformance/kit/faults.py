"""The kit's fault scenarios: a daemon that stops answering (SIGSTOP), one
that is not there, and restarts (SIGTERM, kill -9) under a waiting client
that is never told to connect again (README, "timeout" and "restart")."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time

from .adapter import Adapter, Reply
from .daemon import Daemon
from .report import Results
from .scenarios import checker, lease, setup


def _stop(daemon: Daemon) -> None:
    """SIGSTOP, then waits (at most 5 s) until every thread of the daemon is
    stopped: the signal takes effect asynchronously, and a request sent
    before that would still be served."""
    assert daemon.proc is not None
    daemon.signal(signal.SIGSTOP)
    tasks = f"/proc/{daemon.proc.pid}/task"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            states = []
            for tid in os.listdir(tasks):
                with open(f"{tasks}/{tid}/stat", "rb") as f:
                    states.append(f.read().rsplit(b")", 1)[1].split()[0])
        except OSError:
            states = [b"?"]
        if all(state in (b"T", b"t") for state in states):
            return
        time.sleep(0.01)


def _own_reply(reply: Reply, id: str) -> list:
    """Problems unless ``reply`` is what `state` of ``id`` answers: null, or its state."""
    if reply.ok and (reply.result is None or
                     (isinstance(reply.result, dict) and reply.result.get("id") == id)):
        return []
    return [f"expected null or {id}'s state, got {reply!r} (the late reply to the enqueue?)"]


def timeout(command: str, results: Results) -> None:
    """A call that gets no reply fails with `timeout` in time, and its late
    reply is never taken for a later call's; a missing socket file is
    `unreachable` at once."""
    check = checker(results, "timeout")
    with setup(command, "server", 1, timeout=1.0) as (daemon, (client,)):
        _stop(daemon)
        try:
            check("enqueue to a stopped daemon fails with timeout after ~1 s",
                  client.call("enqueue", {"id": "t1"}), code="timeout", within=(0.9, 3.0))
        finally:
            daemon.signal(signal.SIGCONT)
        results.check("timeout: resumed, the next call gets its own reply, not the late one",
                      _own_reply(client.call("state", {"id": "t1"}), "t1"))
        check("and the one after it too", client.call("ping"),
              {"protocol": 1, "clock": "server"}, subset=True)
    folder = tempfile.mkdtemp(prefix="fq-conf-none-")
    nowhere = Adapter(command, "unreachable")
    try:
        nowhere.hello()
        nowhere.connect(f"ipc://{folder}/no-daemon.sock", 1.0)
        check("a socket file that does not exist: unreachable, at once",
              nowhere.call("ping"), code="unreachable", within=(0, 0.9))
    finally:
        nowhere.close()
        shutil.rmtree(folder, ignore_errors=True)


def restart(command: str, results: Results) -> None:
    """The daemon restarted under a waiting client, which carries on by itself."""
    check = checker(results, "restart")
    with setup(command, "server", 2, timeout=1.0) as (daemon, (worker, feeder)):
        check("enqueue rf", feeder.call("enqueue", {"id": "rf", "queue": "rs"}), True)
        check("claim rf, fence 1", worker.call("claim", {"id": "rf", "owner": "w", "ttl": 30}), 1)
        check("release rf", worker.call("release", lease("rf", "w", 1)), True)
        seq = worker.send("claim_next", {"queue": "empty", "owner": "w", "ttl": 30, "wait": 10})
        time.sleep(0.3)
        daemon.signal(signal.SIGTERM)
        check("SIGTERM under a waiting claim_next: it fails with unavailable",
              worker.receive(seq, 10), code="unavailable", within=(0, 4.0))
        results.check("restart: the daemon stopped cleanly",
                      [] if daemon.wait_exit(5) == 0 else ["fenceqd did not exit 0 within 5 s"])
        daemon.start()
        check("the same client (no connect) claims rf again: the fence went on, 2",
              worker.call("claim", {"id": "rf", "owner": "w", "ttl": 30}), 2)
        seq = worker.send("claim_next", {"queue": "rs", "owner": "w", "ttl": 30, "wait": 10})
        time.sleep(0.3)
        check("the other client (no connect) enqueues after the restart",
              feeder.call("enqueue", {"id": "r2", "queue": "rs"}), True)
        check("the waiting claim_next gets it", worker.receive(seq, 10),
              {"id": "r2", "fence": 1, "payload": None, "attempts": 1}, within=(0.1, 4.0))
        killed(daemon, worker, results)


def killed(daemon: Daemon, worker: Adapter, results: Results) -> None:
    """kill -9 under a waiting claim_next (wait 1, timeout 1): no reply ever
    comes; after a start the same client works again."""
    seq = worker.send("claim_next", {"queue": "empty", "owner": "w", "ttl": 30, "wait": 1})
    time.sleep(0.3)
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit(5)
    reply = worker.receive(seq, 1)
    problems = [] if not reply.ok and reply.code in ("timeout", "transport") and reply.message \
        else [f"expected error timeout (or transport), got {reply!r}"]
    if reply.seconds > 1 + 1 + 2:
        problems.append(f"answered after {reply.seconds:.1f} s, "
                        f"expected wait + timeout + 2 at most")
    results.check("restart: kill -9 under a waiting claim_next: it fails with timeout", problems)
    daemon.start()
    checker(results, "restart")(
        "after kill -9 and a start, the same client's next call works",
        worker.call("state", {"id": "r2"}),
        {"id": "r2", "owner": "w", "fence": 1, "done": False}, subset=True)
