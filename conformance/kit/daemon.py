"""A real fenceqd on a temporary folder, and a raw DEALER to it.

Every wait is bounded: a daemon that does not answer a ping within 10 s of
its start fails the group that started it, and stop() kills what SIGTERM
did not end within 5 s.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, List, Optional

import msgpack
import zmq

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fenceqd_binary() -> str:
    default = os.path.join(REPO, "build", "bin", "fenceqd")
    return os.path.abspath(os.environ.get("FENCEQD") or default)


class Daemon:
    """fenceqd --clock CLOCK on DIR/fenceq.db, serving ipc://DIR/fenceqd.sock.

    The default --sync full: after a kill -9 with `normal` or `off` the next
    start raises every fence to a new epoch and ends the leases
    (docs/operating.md), which the restart group would see."""

    def __init__(self, clock: str = "client") -> None:
        self.clock = clock
        # A short folder: an ipc:// path must fit a sockaddr_un (107 bytes).
        self.dir = tempfile.mkdtemp(prefix="fq-conf-")
        self.endpoint = f"ipc://{self.dir}/fenceqd.sock"
        self.proc: Optional[subprocess.Popen] = None
        self._log = open(os.path.join(self.dir, "fenceqd.log"), "ab")
        self.start()

    def start(self) -> None:
        """Starts (or starts again) the daemon on the same folder and endpoint."""
        args = [fenceqd_binary(), "--db", os.path.join(self.dir, "fenceq.db"),
                "--listen", self.endpoint, "--clock", self.clock,
                "--log-level", "warn", "--idle-exit", "300"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=self._log)
        deadline = time.monotonic() + 10
        with Raw(self.endpoint) as raw:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"fenceqd exited {self.proc.returncode}: {self.log_tail()}")
                if os.path.exists(self.endpoint[len("ipc://"):]):
                    reply = raw.call({"op": "ping"}, timeout=1.0)
                    if isinstance(reply, dict) and reply.get("ok") is True:
                        return
                time.sleep(0.02)
        raise RuntimeError(f"fenceqd did not answer a ping within 10 s: {self.log_tail()}")

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait_exit(self, seconds: float) -> Optional[int]:
        """The daemon's exit status, or None if it still runs after ``seconds``."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """SIGTERM (SIGCONT first, in case a check stopped it), then SIGKILL after 5 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            if self.wait_exit(5) is None:
                self.signal(signal.SIGKILL)
                self.wait_exit(5)

    def close(self) -> None:
        self.stop()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 15) -> str:
        self._log.flush()
        try:
            with open(os.path.join(self.dir, "fenceqd.log"), "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "Daemon":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Raw:
    """A DEALER that sends payload frames as they are: the runner's own
    connection, for vector steps no adapter call can make."""

    def __init__(self, endpoint: str) -> None:
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)

    def send_bytes(self, payload: bytes, timeout: float = 10.0) -> Optional[bytes]:
        """The reply payload to ``payload``, or None when none came in time."""
        self.socket.send_multipart([b"", payload])
        if not self.socket.poll(int(timeout * 1000)):
            return None
        frames: List[bytes] = self.socket.recv_multipart()
        return frames[-1]

    def call(self, request: Any, timeout: float = 10.0) -> Any:
        reply = self.send_bytes(msgpack.packb(request), timeout)
        return None if reply is None else msgpack.unpackb(reply, raw=False)

    def close(self) -> None:
        self.socket.close(linger=0)

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
