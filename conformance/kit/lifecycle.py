"""Group `lifecycle` (issue 57): what a client does around its calls, not in
them (README, "lifecycle").

- A call after `close()` on the same client object is `misuse`, answered at
  once, nothing sent (PROTOCOL.md "Client errors": `closed` is for a call
  that was waiting for its reply when close() was called; a call made after
  it is `misuse`). Control op `close_keep`.
- A call from a second thread while the client's own thread is in a call is
  `misuse`, nothing sent, and the owner's call still gets its answer
  (docs/clients.md section 10). Control op `call_from_thread`. A client safe
  to share (Go) or with no threads (Node, one event loop) answers
  `unsupported`: reported as not applicable, not as passed.
- ZMQ_LINGER 0: with requests still queued in the client for a daemon that
  reads nothing (SIGSTOP, its socket buffer full), `close` and the adapter's
  exit are prompt. A client left at ZeroMQ's default linger (-1) waits in its
  context's end for those requests to be written, that is forever.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Dict, List

import msgpack

from .adapter import Adapter, Reply
from .daemon import Daemon, Raw
from .fake import FakeDaemon
from .report import Results
from .scenarios import checker

# LINGER: requests this big, this many, while the daemon reads nothing: more
# than an AF_UNIX socket's buffer holds (212992 bytes by default), so that
# the first stays half written and the next ones queued in the client's
# ZeroMQ pipe. Under the clients' payload limit (256 KiB).
BIG_PAYLOAD = 250 * 1000
BIG_REQUESTS = 4
PROMPT = 5.0  # seconds: close answered, and the adapter gone after end of input (a lingering
# socket holds it for as long as the daemon stays stopped: for ever)


def _pack(m: Dict[str, Any]) -> bytes:
    return msgpack.packb(m, use_bin_type=True)


def _not_applicable(results: Results, name: str, reply: Reply) -> bool:
    """An `unsupported` answer: the check does not apply to this client (said,
    not counted as passed)."""
    if not reply.ok and reply.code == "unsupported":
        results.not_applicable(name, reply.message or "unsupported")
        return True
    return False


def after_close(command: str, results: Results) -> None:
    """close_keep, then a call on the closed client: misuse, at once, nothing sent."""
    check = checker(results, "lifecycle")
    folder = tempfile.mkdtemp(prefix="fq-conf-life-")
    daemon = FakeDaemon(folder)
    client = Adapter(command, "lifecycle")
    try:
        client.hello()
        client.connect(daemon.endpoint, 1.0)
        # One answered call first: the client is connected and has had a reply.
        seq = client.send("state", {"id": "c1"})
        got = daemon.request(5.0)
        if got is not None:
            daemon.reply(got[0], _pack({"ok": True, "result": None, "rid": got[1].get("rid")}))
        check("a call before close() is answered", client.receive(seq), None)
        closed = client.call("close_keep")
        name = "a call after close() on the same client: misuse, at once, nothing sent"
        if _not_applicable(results, f"lifecycle: {name}", closed):
            return
        check("close_keep answers true", closed, True)
        reply = client.call("state", {"id": "c2"})
        check("a call after close(): misuse, at once", reply, code="misuse", within=(0.0, 1.0))
        late = daemon.request(0.5)
        results.check("lifecycle: a call after close() sends nothing",
                      [] if late is None else [f"the daemon received {late[1]!r}"])
        check("close after close_keep answers true (close is idempotent)", client.call("close"), True)
    finally:
        client.close()
        daemon.close()
        shutil.rmtree(folder, ignore_errors=True)


def second_thread(command: str, results: Results) -> None:
    """call_from_thread: while the adapter's own thread waits in a `state`
    (held unanswered by the fake daemon), a second thread's `state` is
    misuse, nothing sent; the owner's call then gets its own answer."""
    check = checker(results, "lifecycle")
    folder = tempfile.mkdtemp(prefix="fq-conf-thr-")
    daemon = FakeDaemon(folder)
    client = Adapter(command, "lifecycle")
    try:
        client.hello()
        client.connect(daemon.endpoint, 3.0)
        seq = client.send("call_from_thread", {
            "op": "state", "args": {"id": "from-thread"},
            "hold": {"op": "state", "args": {"id": "owner"}}, "after": 0.3})
        got = daemon.request(5.0)
        if got is None:
            reply = client.receive(seq)
            if _not_applicable(results, "lifecycle: a call from a second thread: misuse, "
                                        "nothing sent", reply):
                return
            results.check("lifecycle: the owner's call reached the daemon",
                          [f"the fake daemon got no request within 5 s; the adapter answered {reply!r}"])
            return
        envelope, request = got
        problems: List[str] = []
        if request.get("op") != "state" or request.get("id") != "owner":
            problems.append(f"the first request is {request!r}, not the owner's state")
        # The second thread calls 0.3 s after the owner's call started: give
        # it 1.2 s to (wrongly) send.
        late = daemon.request(1.2)
        if late is not None:
            problems.append(f"the second thread's call was sent: {late[1]!r}")
        daemon.reply(envelope, _pack({"ok": True, "result": None, "rid": request.get("rid")}))
        reply = client.receive(seq)
        results.check("lifecycle: a call from a second thread sends nothing", problems)
        if not reply.ok:
            results.check("lifecycle: call_from_thread answered", [f"got {reply!r}"])
            return
        answers = reply.result if isinstance(reply.result, dict) else {}
        thread, owner = answers.get("thread"), answers.get("owner")
        results.check("lifecycle: a call from a second thread while the owner's is in progress: "
                      "misuse", [] if isinstance(thread, dict) and thread.get("ok") is False
                      and (thread.get("error") or {}).get("code") == "misuse"
                      and (thread.get("error") or {}).get("message")
                      else [f"expected error misuse, got {thread!r}"])
        results.check("lifecycle: the owner's call gets its own answer",
                      [] if owner == {"ok": True, "result": None}
                      else [f"expected {{'ok': True, 'result': None}}, got {owner!r}"])
        seq = client.send("state", {"id": "after"})
        got = daemon.request(5.0)
        if got is not None:
            daemon.reply(got[0], _pack({"ok": True, "result": None, "rid": got[1].get("rid")}))
        check("after that, the owner's next call works", client.receive(seq), None)
    finally:
        client.close()
        daemon.close()
        shutil.rmtree(folder, ignore_errors=True)


def _queue_big(results: Results, client: Adapter, prefix: str) -> bool:
    """BIG_REQUESTS big enqueues to the stopped daemon, each timing out."""
    for i in range(BIG_REQUESTS):
        reply = client.call("enqueue", {"id": f"{prefix}-{i}", "payload": "x" * BIG_PAYLOAD})
        if reply.ok or reply.code != "timeout":
            results.check(f"lifecycle: linger: {client.label}: a big enqueue to a stopped daemon "
                          "times out", [f"expected error timeout, got {reply!r}"])
            return False
    return True


def _sockets(pid: int) -> int:
    """How many sockets the process holds open (its connections: libzmq wakes
    its threads with eventfds, and an adapter's stdio is pipes)."""
    count = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0  # the process is gone
    for fd in fds:
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed while we looked
    return count


def _connections_closed(proc: subprocess.Popen, baseline: int, within: float) -> bool:
    """Waits up to `within` s until the process holds no more sockets than
    `baseline` (what it held before it connected)."""
    deadline = time.monotonic() + within
    while _sockets(proc.pid) > baseline:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def linger(command: str, results: Results) -> None:
    """ZMQ_LINGER 0, seen two ways, with requests queued in a client for a
    daemon stopped with SIGSTOP when the client is closed: (a) the adapter
    still exits at once at its end of input (a context's end waits for a
    lingering socket); (b) after the daemon resumes, the requests of a closed
    client that is still in a running process never reach it (a lingering
    socket would go on sending them: jobs the caller was told had timed out
    and that it closed the client on, enqueued after all)."""
    check = checker(results, "lifecycle")
    daemon = Daemon("client")
    exiting = Adapter(command, "linger (a)")
    staying = Adapter(command, "linger (b)")
    ids = [f"{p}-{i}" for p in ("a", "b") for i in range(BIG_REQUESTS)]
    baseline = 0
    try:
        for client in (exiting, staying):
            client.hello()
            if client is staying:
                assert staying.proc is not None
                baseline = _sockets(staying.proc.pid)
            client.connect(daemon.endpoint, 0.5)
            check(f"linger: {client.label}: a ping before the daemon stops", client.call("ping"),
                  {"protocol": 1}, subset=True)
        daemon.signal(signal.SIGSTOP)
        if not (_queue_big(results, exiting, "a") and _queue_big(results, staying, "b")):
            return
        for client in (exiting, staying):
            check(f"linger: {client.label}: close with requests queued for a stopped daemon, "
                  f"within {PROMPT} s", client.call("close"), True, within=(0.0, PROMPT))
        # (a) the end of input: the adapter exits, the daemon still stopped.
        name = f"lifecycle: linger: the adapter exits within {PROMPT} s of its end of input"
        started = time.monotonic()
        assert exiting.proc.stdin is not None
        exiting.proc.stdin.close()
        try:
            status = exiting.proc.wait(PROMPT)
            results.check(name, [] if status == 0 else [f"it exited with status {status}"])
        except subprocess.TimeoutExpired:
            results.check(name, [f"still running after {time.monotonic() - started:.1f} s: its "
                                 "requests to the stopped daemon held it up (set ZMQ_LINGER 0 "
                                 "on the DEALER)" + exiting.stderr_tail()])
            exiting.kill()
        # (b) the daemon resumes while the other adapter still runs, once the
        # closed client's connection is gone. zmq_close() returns before
        # libzmq's I/O thread drops the queue and closes the connection: on
        # a busy machine that can come later than the SIGCONT below, and the
        # queued requests were then written (seen in CI). A lingering socket
        # keeps its connection for as long as it has requests to write.
        assert staying.proc is not None
        if not _connections_closed(staying.proc, baseline, PROMPT):
            results.check(f"lifecycle: linger: a closed client's connection is gone within "
                          f"{PROMPT} s", [f"the adapter still holds {_sockets(staying.proc.pid)} "
                                          f"sockets ({baseline} before it connected): a "
                                          "lingering socket (set ZMQ_LINGER 0 on the DEALER)"])
        daemon.signal(signal.SIGCONT)
        time.sleep(1.5)
        with Raw(daemon.endpoint) as raw:
            states = {id: raw.call({"op": "state", "id": id}, timeout=5.0) for id in ids}
            # The control: the daemon takes such an enqueue now.
            made = raw.call({"op": "enqueue", "id": "control", "payload": "x" * BIG_PAYLOAD})
        problems = [f"{id}: {reply!r}" for id, reply in states.items()
                    if not (isinstance(reply, dict) and reply.get("ok") is True
                            and reply.get("result") is None)]
        if problems:
            problems.insert(0, "requests of a closed client reached the daemon once it resumed "
                               "(set ZMQ_LINGER 0 on the DEALER, or close with linger 0):")
        if not (isinstance(made, dict) and made.get("ok") is True and made.get("result") is True):
            problems.append(f"the control enqueue answered {made!r}, not true")
        results.check("lifecycle: linger: requests queued when the client was closed are never "
                      "sent (ZMQ_LINGER 0)", problems)
    finally:
        for client in (exiting, staying):
            client.kill()
            client.close()
        daemon.close()


def run(command: str, results: Results) -> None:
    after_close(command, results)
    second_thread(command, results)
    linger(command, results)
