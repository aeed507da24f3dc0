"""One adapter process and its line protocol (README, "The adapter line protocol").

Adapter.call() writes one request line and reads the reply line, waiting at
most the client's timeout + the call's wait + 5 s (the runner's patience);
an adapter silent longer, or one that prints something that is not a reply
to this request, is killed and the call reported as failed.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import tempfile
import time
from typing import Any, Dict, Optional

from .daemon import REPO

PATIENCE = 5.0  # seconds past the client's timeout + wait
STARTUP = 30.0  # seconds for the adapter to start and answer `hello`


class AdapterFailure(Exception):
    """The adapter broke the line protocol (no reply in time, a bad line, exited)."""


class Reply:
    """One reply line: a result, or an error code and message."""

    def __init__(self, line: Dict[str, Any], seconds: float) -> None:
        self.line = line
        self.ok = line.get("ok") is True
        self.result = line.get("result")
        error = line.get("error") if isinstance(line.get("error"), dict) else {}
        self.code: Optional[str] = None if self.ok else error.get("code")
        self.message = error.get("message")
        self.seconds = seconds

    def __repr__(self) -> str:
        if self.ok:
            return f"result {json.dumps(self.result)}"
        return f"error {self.code} ({self.message})"


class Adapter:
    """An adapter process: ``command`` (a shell-quoted command line)."""

    def __init__(self, command: str, label: str = "adapter") -> None:
        self.label = label
        self.command = command
        self.endpoint = ""
        self.timeout = 5.0
        self._seq = 0
        env = dict(os.environ)
        env.pop("FENCEQ_ENDPOINT", None)
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(shlex.split(command), cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr)
        self._buffer = b""
        self._sent: Dict[int, float] = {}
        self.dead: Optional[str] = None

    # -- the line protocol -------------------------------------------------

    def send(self, op: str, args: Optional[Dict[str, Any]] = None) -> int:
        """Writes one request line; returns its seq (read the reply with receive())."""
        if self.dead:
            raise AdapterFailure(self.dead)
        self._seq += 1
        self._sent[self._seq] = time.monotonic()
        line = json.dumps({"seq": self._seq, "op": op, "args": args or {}},
                          allow_nan=False, separators=(",", ":")) + "\n"
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            self._fail(f"cannot write to the adapter: {e}")
        return self._seq

    def receive(self, seq: int, wait: float = 0.0, patience: Optional[float] = None) -> Reply:
        """The reply line to request ``seq``, within timeout + wait + 5 s of
        its sending; Reply.seconds counts from the sending too."""
        limit = patience if patience is not None else self.timeout + wait + PATIENCE
        started = self._sent.pop(seq, time.monotonic())
        deadline = started + limit
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert self.proc.stdout is not None
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self._fail(f"no reply line within {limit:.1f} s")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self._fail(f"the adapter exited (status {self.proc.wait(5)})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        seconds = time.monotonic() - started
        try:
            line = json.loads(raw)
        except ValueError:
            self._fail(f"not a JSON line: {raw[:200]!r}")
        if not isinstance(line, dict) or line.get("seq") != seq:
            self._fail(f"not the reply to seq {seq}: {raw[:200]!r}")
        if line.get("ok") is not True and not isinstance(line.get("error"), dict):
            self._fail(f"neither a result nor an error: {raw[:200]!r}")
        return Reply(line, seconds)

    def call(self, op: str, args: Optional[Dict[str, Any]] = None) -> Reply:
        wait = (args or {}).get("wait")
        wait = float(wait) if isinstance(wait, (int, float)) else 0.0
        return self.receive(self.send(op, args), wait)

    def hello(self) -> Reply:
        """The first line: its patience includes the adapter's start (16 of them
        may be starting at once on a busy machine)."""
        return self.receive(self.send("hello"), patience=STARTUP)

    def connect(self, endpoint: str, timeout: float = 5.0) -> Reply:
        self.timeout = timeout
        self.endpoint = endpoint
        return self.call("connect", {"endpoint": endpoint, "timeout": timeout})

    # -- lifecycle ---------------------------------------------------------

    def _fail(self, why: str) -> None:
        self.dead = f"{self.label}: {why}"
        self.kill()
        raise AdapterFailure(self.dead + self.stderr_tail())

    def stderr_tail(self, lines: int = 10) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        return ("\n  stderr: " + "\n  ".join(text.splitlines()[-lines:])) if text else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def close(self) -> None:
        """EOF on stdin; the adapter must exit within 5 s (else it is killed)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
