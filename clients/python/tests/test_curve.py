"""fenceq.Client over tcp:// with ZeroMQ CURVE, against a real fenceqd.

The daemon serves tcp only with CURVE and answers only the clients whose
public key is in its --curve-allowed-clients file: here the first of two
client key pairs made with ``fenceqd --curve-keygen``. Everyone else (the
second key pair, no CURVE at all, a wrong server key) gets no reply: the
handshake is refused, so nothing they send is read.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from types import SimpleNamespace
from typing import Iterator

import pytest

import fenceq
from conftest import Daemon, fenceqd_binary, wait_until

#: The timeout of the clients that must get no reply.
REFUSED_TIMEOUT = 0.5


def keygen(path: str) -> str:
    """``fenceqd --curve-keygen path``: the public key line it prints."""
    out = subprocess.run([fenceqd_binary(), "--curve-keygen", path], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=10, check=True).stdout
    line = out.strip()
    assert line.startswith('public-key = "') and line.endswith('"'), out
    return line


def bare(line: str) -> str:
    """The 40 Z85 characters of a printed ``public-key = "..."`` line."""
    return line.split('"')[1]


@pytest.fixture(scope="module")
def keys() -> Iterator[SimpleNamespace]:
    """The daemon's key pair, two client key pairs, and an allowed-clients
    file that lists only the first client."""
    directory = tempfile.mkdtemp(prefix="fqk", dir="/tmp")
    try:
        k = SimpleNamespace(dir=directory)
        k.server_file = os.path.join(directory, "server.key")
        k.server_line = keygen(k.server_file)
        k.listed_file = os.path.join(directory, "listed.key")
        k.listed_line = keygen(k.listed_file)
        k.unlisted_file = os.path.join(directory, "unlisted.key")
        k.unlisted_line = keygen(k.unlisted_file)
        k.allowed_file = os.path.join(directory, "allowed")
        with open(k.allowed_file, "w") as f:
            f.write(f"# the clients allowed on tcp\n{k.listed_line}\n")
        yield k
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tcp_daemon(start_daemon, keys) -> Daemon:
    """A client-clock fenceqd serving only tcp://127.0.0.1:<free port> with
    CURVE, ready (it answered the listed client). Killed at teardown by
    ``start_daemon``."""
    curve = fenceq.curve_keys(keys.listed_file, keys.server_line)
    for attempt in range(3):  # another process may take the free port first
        d = start_daemon(name=f"tcp{attempt}", clock="client", wait=False,
                         endpoint=f"tcp://127.0.0.1:{free_port()}",
                         extra=["--allow-tcp", "--curve-secret-key", keys.server_file,
                                "--curve-allowed-clients", keys.allowed_file])
        deadline = time.monotonic() + 5
        with fenceq.Client(d.endpoint, timeout=0.2, curve=curve) as c:
            while time.monotonic() < deadline and d.proc.poll() is None:
                try:
                    c.ping()
                    return d
                except fenceq.Timeout:
                    pass
        if d.proc.poll() is None:
            raise RuntimeError(f"fenceqd on {d.endpoint} did not answer the listed client "
                               f"within 5 s: {d.stderr()}")
    raise RuntimeError(f"fenceqd could not serve tcp: {d.stderr()}")


@pytest.fixture
def listed(tcp_daemon: Daemon, keys) -> Iterator[fenceq.Client]:
    """A client with the listed key pair; the server key as keygen printed it."""
    with fenceq.Client(tcp_daemon.endpoint, timeout=5,
                       curve=fenceq.curve_keys(keys.listed_file, keys.server_line)) as c:
        yield c


def assert_refused(client: fenceq.Client, job_id: str) -> None:
    """``client``'s enqueue gets no reply: a Timeout, with nothing sent (the
    handshake never completed, so the request never left the client)."""
    with client:
        with pytest.raises(fenceq.Timeout) as e:
            client.enqueue(job_id)
        assert e.value.sent is False, e.value


def test_listed_key_enqueue_claim_complete_over_tcp(tcp_daemon: Daemon, listed: fenceq.Client):
    """The listed client works over tcp as over ipc: C3.1, C3.3, C3.5 (a stale
    fence is refused, the current one completes)."""
    assert tcp_daemon.endpoint.startswith("tcp://127.0.0.1:")
    assert listed.ping()["clock"] == "client"
    assert listed.enqueue("j") is True
    assert listed.enqueue("j") is False
    assert listed.claim("j", "w1", ttl=10, now=100) == 1
    assert listed.claim("j", "w2", ttl=10, now=105) is None   # leased by w1
    assert listed.claim("j", "w2", ttl=10, now=110) == 2      # w1's lease expired
    assert listed.complete("j", "w1", 1, "stale", now=111) is False
    assert listed.complete("j", "w2", 2, "ok", now=112) is True
    state = listed.state("j")
    assert state["done"] is True and state["result"] == "ok" and state["fence"] == 2


def test_unlisted_key_times_out_and_changes_nothing(tcp_daemon: Daemon, listed: fenceq.Client, keys):
    """A valid key pair that is not in the allowed list: no reply, no change,
    and the daemon logs the refused handshake."""
    intruder = fenceq.Client(tcp_daemon.endpoint, timeout=REFUSED_TIMEOUT,
                             curve=fenceq.curve_keys(keys.unlisted_file, bare(keys.server_line)))
    assert_refused(intruder, "intruder")
    assert listed.state("intruder") is None
    assert listed.enqueue("intruder") is True  # it did not exist
    assert wait_until(lambda: "refused a tcp client" in tcp_daemon.stderr(), 5), tcp_daemon.stderr()


def test_client_without_curve_times_out_on_tcp(tcp_daemon: Daemon, listed: fenceq.Client):
    assert_refused(fenceq.Client(tcp_daemon.endpoint, timeout=REFUSED_TIMEOUT), "plain")
    assert listed.state("plain") is None
    assert listed.enqueue("plain") is True


def test_wrong_server_key_times_out(tcp_daemon: Daemon, listed: fenceq.Client, keys):
    """The listed key pair, but another key (the unlisted client's) taken for
    the daemon's: the handshake fails."""
    curve = fenceq.curve_keys(keys.listed_file, keys.unlisted_line)
    assert curve.public_key == bare(keys.listed_line)
    assert_refused(fenceq.Client(tcp_daemon.endpoint, timeout=REFUSED_TIMEOUT, curve=curve), "wrong")
    assert listed.state("wrong") is None


def test_curve_keys_reads_keygen_files_and_refuses_bad_input(keys, tmp_path):
    # The server key as keygen printed it, or bare (surrounding blanks ignored).
    from_line = fenceq.curve_keys(keys.listed_file, keys.server_line)
    assert from_line == fenceq.curve_keys(keys.listed_file, "  " + bare(keys.server_line) + "\n")
    assert isinstance(from_line, fenceq.CurveKeys) and isinstance(from_line, tuple)
    assert from_line.server_public == bare(keys.server_line)
    assert from_line.public_key == bare(keys.listed_line)
    secret_line = next(l for l in open(keys.listed_file) if "secret-key" in l)
    assert from_line.secret_key == secret_line.split('"')[1] and len(from_line.secret_key) == 40
    assert from_line.secret_key not in repr(from_line)

    # zcert comments, metadata and blank lines are skipped.
    public, secret = from_line.public_key, from_line.secret_key
    commented = tmp_path / "commented.key"
    commented.write_text(f"   # a comment\n\nmetadata\n    name = \"ci\"\ncurve\n"
                         f"    secret-key = \"{secret}\"\n    public-key = \"{public}\"\n")
    assert fenceq.curve_keys(str(commented), keys.server_line) == from_line

    missing = str(tmp_path / "missing.key")
    with pytest.raises(ValueError, match="missing.key"):
        fenceq.curve_keys(missing, keys.server_line)

    # Each bad file: (name, text, what the error must say).
    bad_files = [
        ("nosecret.key", f"curve\n    public-key = \"{public}\"\n", r"nosecret\.key.*secret-key"),
        ("short.key", f"curve\n    public-key = \"{public[:-1]}\"\n    secret-key = \"{secret}\"\n",
         r"short\.key:2: public-key"),
        ("notz85.key", f"curve\n    public-key = \"{public}\"\n    secret-key = \"{'~' + secret[1:]}\"\n",
         r"notz85\.key:3: secret-key"),
        ("mismatched.key", f"public-key = \"{bare(keys.unlisted_line)}\"\nsecret-key = \"{secret}\"\n",
         r"mismatched\.key.*does not belong"),
    ]
    for name, text, message in bad_files:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ValueError, match=message):
            fenceq.curve_keys(str(path), keys.server_line)

    for server in ("", bare(keys.server_line)[:-1], "~" * 40, 'secret-key = "%s"' % bare(keys.server_line)):
        with pytest.raises(ValueError, match="server public key"):
            fenceq.curve_keys(keys.listed_file, server)


def test_client_refuses_bad_curve_keys_before_making_a_socket(keys):
    good = fenceq.curve_keys(keys.listed_file, keys.server_line)
    # A bad key is refused before the socket: not even the bad endpoint is looked at.
    for field, bad in (("server_public", "short"), ("public_key", "~" * 40), ("secret_key", None)):
        with pytest.raises(ValueError, match=f"curve: {field} is not a CURVE key"):
            fenceq.Client("nonsense://x", curve=good._replace(**{field: bad}))
    with pytest.raises(ValueError, match="server_public"):
        fenceq.Client("tcp://127.0.0.1:1", curve=fenceq.CurveKeys("short", good.public_key, good.secret_key))
    # Good keys, but for an endpoint fenceqd serves without CURVE.
    with pytest.raises(ValueError, match="tcp://"):
        fenceq.Client("ipc:///tmp/fenceqd.sock", curve=good)
    # The good keys make a client (connecting is asynchronous: nothing is sent yet).
    fenceq.Client("tcp://127.0.0.1:1", timeout=0.1, curve=good).close()


def test_worker_over_tcp_renews_with_the_same_keys(tcp_daemon: Daemon, listed: fenceq.Client, keys):
    """Worker(curve=...): the claim, the renewals (on their own client and
    thread) and the completion all go over CURVE. The job outlives its lease
    several times over, so its result is stored only if the renewals got
    through (C3.4, C3.5)."""
    start = time.monotonic()
    clock = lambda: 1000.0 + (time.monotonic() - start)  # noqa: E731  client clock mode
    listed.enqueue("long")
    curve = fenceq.curve_keys(keys.listed_file, keys.server_line)
    with fenceq.Worker(tcp_daemon.endpoint, ttl=0.6, renew_every=0.1, clock=clock,
                       curve=curve) as w:
        assert w.run("long", lambda lease: (time.sleep(1.5), "renewed")[1]) is True
    assert listed.state("long")["result"] == "renewed"
