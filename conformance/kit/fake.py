"""The kit's fake daemon (issue 57): a ROUTER socket of the kit's own that
answers what no real fenceqd ever sends, so that a client which checks no
shapes, takes the first reply it gets, or queues a request while no daemon
is there fails the kit (README, "fake").

- a reply with another request's `rid` first, then the call's own with keys
  the client does not know: the call answers its own, the unknown keys
  ignored;
- a result of the wrong shape, and a reply that is not msgpack: `bad_reply`;
- ZMQ_IMMEDIATE: a call made while the daemon is gone fails, and the daemon
  that comes back on the same endpoint never receives it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import msgpack
import zmq

from .adapter import Adapter, Reply
from .report import Results
from .scenarios import checker


class FakeDaemon:
    """A ROUTER bound on ipc://FOLDER/fake.sock; it answers only as told."""

    def __init__(self, folder: str) -> None:
        self.endpoint = f"ipc://{folder}/fake.sock"
        self.ctx = zmq.Context()
        self.sock: Optional[zmq.Socket] = None
        self.bind()

    def bind(self) -> None:
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(self.endpoint)

    def unbind(self) -> None:
        """Closes the socket (libzmq removes the ipc file): no daemon there."""
        assert self.sock is not None
        self.sock.close(0)
        self.sock = None

    def request(self, wait: float) -> Optional[Tuple[List[bytes], Dict[str, Any]]]:
        """The next request (its envelope frames and decoded payload), or None."""
        assert self.sock is not None
        if not self.sock.poll(int(wait * 1000)):
            return None
        frames = self.sock.recv_multipart()
        return frames[:-1], msgpack.unpackb(frames[-1], raw=False)

    def reply(self, envelope: List[bytes], payload: bytes) -> None:
        assert self.sock is not None
        self.sock.send_multipart([*envelope, payload])

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(0)
        self.ctx.term()


def _foreign(rid: Any) -> Any:
    return rid + 1000 if isinstance(rid, int) else f"not-{rid}"


def _answer(fake: FakeDaemon, adapter: Adapter, op: str, args: Dict[str, Any],
            replies) -> Tuple[Reply, List[str]]:
    """Sends ``op`` through the adapter; the fake answers its request with
    ``replies(rid)`` (a list of payloads). Returns the adapter's reply and the
    problems seen on the fake's side."""
    seq = adapter.send(op, args)
    got = fake.request(5.0)
    if got is None:
        return adapter.receive(seq), [f"the fake daemon got no {op} request within 5 s"]
    envelope, request = got
    problems = [] if request.get("op") == op else [f"the fake daemon got {request!r}, not a {op}"]
    for payload in replies(request.get("rid")):
        fake.reply(envelope, payload)
    return adapter.receive(seq), problems


def _state_of(id: str, **more: Any) -> Dict[str, Any]:
    return {"id": id, "owner": None, "until": 0.0, "fence": 0, "result": None, "done": False, **more}


def fake(command: str, results: Results) -> None:
    check = checker(results, "fake")
    folder = tempfile.mkdtemp(prefix="fq-conf-fake-")
    daemon = FakeDaemon(folder)
    client = Adapter(command, "fake")
    try:
        client.hello()
        client.connect(daemon.endpoint, 1.0)

        def pack(m: Dict[str, Any]) -> bytes:
            return msgpack.packb(m, use_bin_type=True)

        reply, problems = _answer(daemon, client, "state", {"id": "f1"}, lambda rid: [
            pack({"ok": True, "result": _state_of("someone-else"), "rid": _foreign(rid)}),
            pack({"ok": True, "result": _state_of("f1", colour="blue"), "rid": rid,
                  "server_note": "a key of a newer daemon"}),
        ])
        results.check("fake: a reply with another rid, then its own with unknown keys: its own, "
                      "the keys ignored", problems)
        check("its result", reply, {"id": "f1", "fence": 0, "done": False}, subset=True)

        reply, problems = _answer(daemon, client, "state", {"id": "f2"}, lambda rid: [
            pack({"ok": True, "result": "a str, not a job's state", "rid": rid})])
        results.check("fake: the fake daemon got the state request", problems)
        check("a result of the wrong shape: bad_reply", reply, code="bad_reply")

        reply, problems = _answer(daemon, client, "ping", {}, lambda rid: [b"\xc1 not msgpack"])
        results.check("fake: the fake daemon got the ping", problems)
        check("a reply that is not msgpack: bad_reply", reply, code="bad_reply")

        # The client has had replies from this endpoint: a missing socket file
        # is now a restart under way, which it may wait for within its timeout.
        daemon.unbind()
        reply = client.call("enqueue", {"id": "made-while-gone"})
        results.check("fake: a call made while no daemon is there fails (timeout or unreachable)",
                      [] if not reply.ok and reply.code in ("timeout", "unreachable")
                      else [f"expected error timeout or unreachable, got {reply!r}"])
        daemon.bind()
        late = daemon.request(1.5)
        results.check("fake: ZMQ_IMMEDIATE: the daemon that comes back never receives that call",
                      [] if late is None else
                      [f"the daemon that came back received {late[1]!r}: a request queued while no "
                       "daemon was there (set ZMQ_IMMEDIATE 1 on the DEALER before connect)"])
        # And the client goes on: its next call is answered.
        reply, problems = _answer(daemon, client, "state", {"id": "f3"}, lambda rid: [
            pack({"ok": True, "result": None, "rid": rid})])
        results.check("fake: after that, the next call reaches the daemon", problems)
        check("and gets its answer", reply, None)
    finally:
        client.close()
        daemon.close()
        shutil.rmtree(folder, ignore_errors=True)


def unreachable_names_the_path(command: str, results: Results) -> None:
    """`unreachable` for a missing socket file names the file's absolute path."""
    folder = tempfile.mkdtemp(prefix="fq-conf-path-")
    path = os.path.join(folder, "no-daemon-here.sock")
    client = Adapter(command, "path")
    try:
        client.hello()
        client.connect(f"ipc://{path}", 1.0)
        reply = client.call("ping")
        problems = []
        if reply.ok or reply.code != "unreachable":
            problems.append(f"expected error unreachable, got {reply!r}")
        elif path not in (reply.message or ""):
            problems.append(f"the message does not name {path}: {reply.message!r}")
        results.check("fake: unreachable names the socket file's absolute path", problems)
    finally:
        client.close()
        shutil.rmtree(folder, ignore_errors=True)


def run(command: str, results: Results) -> None:
    fake(command, results)
    unreachable_names_the_path(command, results)
