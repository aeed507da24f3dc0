"""What the application-side suites (tests/app) share: the test cluster's
URI, a real fenceqd started on a folder and stopped or killed (-9) at will,
and fenceq-lossyfs mounted for power cuts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python"))

import fenceq  # noqa: E402


def base_uri() -> str:
    uri = os.environ.get("FENCEQ_TEST_PG_URI")
    if uri:
        return uri
    pg_dir = os.environ.get("FENCEQ_TEST_PG_DIR")
    assert pg_dir, "set FENCEQ_TEST_PG_URI or FENCEQ_TEST_PG_DIR (ctest sets it)"
    return (Path(pg_dir) / "uri").read_text().strip()


def with_params(uri: str, **params: str) -> str:
    """``uri`` with its query's ``params`` set (urlunsplit would drop the
    ``//`` of a URI with no host part, postgresql:///db?host=DIR)."""
    base, _, query = uri.partition("?")
    fields = dict(urllib.parse.parse_qsl(query))
    fields.update(params)
    return base + "?" + urllib.parse.urlencode(fields, quote_via=urllib.parse.quote)


class Fenceqd:
    """One fenceqd ($FENCEQD) with ``args`` (its --db and the rest), serving
    an ipc:// socket in ``folder``; started at once, and again by start()."""

    def __init__(self, args: list[str], folder: Path, name: str) -> None:
        self.args, self.sock = args, folder / f"{name}.sock"
        self.log = folder / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def endpoint(self) -> str:
        return f"ipc://{self.sock}"

    def start(self) -> None:
        if self.sock.exists():
            self.sock.unlink()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [os.environ["FENCEQD"], *self.args, "--listen", self.endpoint],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        with fenceq.Client(self.endpoint, timeout=1.0) as c:
            while True:
                assert self.proc.poll() is None, self.log.read_text()[-2000:]
                try:
                    if self.sock.exists():
                        c.ping()
                        return
                except fenceq.FenceqError:
                    pass
                assert time.monotonic() < deadline, "fenceqd did not answer within 20 s"
                time.sleep(0.05)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


class LossyMount:
    """fenceq-lossyfs ($FENCEQ_LOSSYFS) on /tmp/fql-XXXXXX/{backing,mnt} (the
    prefix tests/lossyfs reaps): cut() forgets every change not fsynced, as a
    power cut would (tests/lossyfs/lossyfs.cpp). Stop what uses it first."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fql-", dir="/tmp"))
        self.backing, self.mnt = self.dir / "backing", self.dir / "mnt"
        self.backing.mkdir()
        self.mnt.mkdir()
        self.out = self.dir / "lossyfs.log"
        self.cuts = 0
        self._log = open(self.out, "wb")
        self.proc = subprocess.Popen([os.environ["FENCEQ_LOSSYFS"], str(self.backing), str(self.mnt)],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_for("lossyfs: mounted")

    def _wait_for(self, needle: str) -> None:
        deadline = time.monotonic() + 10
        while needle not in self.out.read_text(errors="replace"):
            assert self.proc.poll() is None, self.out.read_text(errors="replace")
            assert time.monotonic() < deadline, f"no '{needle}' from fenceq-lossyfs"
            time.sleep(0.02)

    def cut(self) -> None:
        self.cuts += 1
        self.proc.send_signal(signal.SIGUSR1)
        self._wait_for(f"power cut {self.cuts}:")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["umount", "-l", str(self.mnt)], stderr=subprocess.DEVNULL, check=False)
        self._log.close()
        subprocess.run(["rm", "-rf", str(self.dir)], check=False)
