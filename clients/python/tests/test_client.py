"""fenceq.Client itself: errors, timeouts and late replies, the one-thread rule,
shutdown, endpoints. Against real daemons; nothing is mocked."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import msgpack
import pytest
import zmq

import fenceq
from conftest import REPO, Background, Daemon, stop_process


def test_ping_identity(client: fenceq.Client):
    info = client.ping()
    assert info["protocol"] == fenceq.PROTOCOL_VERSION == 1
    assert info["clock"] == "client"
    assert isinstance(info["version"], str) and info["version"]


def test_error_classes_carry_code_and_message(client: fenceq.Client):
    """C4.2: errors carry a stable code and a message; invalid_argument is a ValueError."""
    with pytest.raises(fenceq.FenceqError) as e:
        client.claim("e", "w", -5, now=1)
    err = e.value
    assert type(err) is fenceq.InvalidArgument
    assert isinstance(err, ValueError) and err.code == "invalid_argument"
    assert "ttl" in err.message and err.message in str(err)
    with pytest.raises(fenceq.BadRequest) as e:
        client.release("e", "w", 1.5)
    assert e.value.code == "bad_request" and not isinstance(e.value, ValueError)
    with pytest.raises(fenceq.BadRequest):
        client.enqueue(12345)  # ids are strings; the daemon decides, the client passes it on
    with pytest.raises(fenceq.UnknownOp) as e:
        client._call("teleport", {"id": "e"})
    assert e.value.code == "unknown_op"
    # The client stays usable after every error.
    assert client.enqueue("e") is True


def test_unserved_endpoint_fails_at_once_then_usable(tmp_dir: str, start_daemon):
    """No socket file: Unreachable at once, naming the absolute path, nothing
    sent; when the daemon appears the same client works, and the unsent request
    was never applied."""
    endpoint = f"ipc://{tmp_dir}/late.sock"
    with fenceq.Client(endpoint, timeout=5.0) as c:
        t0 = time.monotonic()
        with pytest.raises(ConnectionError) as e:
            c.enqueue("never-sent")
        assert time.monotonic() - t0 < 0.5
        assert isinstance(e.value, fenceq.Unreachable) and e.value.code == "unreachable"
        assert e.value.sent is False
        assert f"there is no socket at {tmp_dir}/late.sock" in str(e.value)
        assert "make run" in str(e.value)
        d = start_daemon(name="late")
        assert c.ping()["protocol"] == 1
        assert c.state("never-sent") is None
        assert d.endpoint == endpoint


def test_relative_endpoint_names_its_absolute_path(tmp_dir: str, monkeypatch):
    """A relative ipc:// path is read from the current folder: the error says
    which file that is, and a plain file there is "not a socket"."""
    monkeypatch.chdir(tmp_dir)
    with fenceq.Client("ipc://var/fenceqd.sock") as c:
        with pytest.raises(fenceq.Unreachable, match=f"no socket at {tmp_dir}/var/fenceqd.sock"):
            c.ping()
    os.mkdir(os.path.join(tmp_dir, "var"))
    Path(tmp_dir, "var", "fenceqd.sock").write_text("x")
    with fenceq.Client("ipc://var/fenceqd.sock") as c:
        with pytest.raises(fenceq.Unreachable, match="fenceqd.sock is not a socket"):
            c.ping()


def test_timeout_against_unserved_socket_file(tmp_dir: str):
    """A socket file nobody accepts on (a daemon killed with -9 leaves one):
    a TimeoutError within the timeout, nothing sent."""
    path = os.path.join(tmp_dir, "stale.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)   # bound, never listening: connections are refused
    try:
        with fenceq.Client(f"ipc://{path}", timeout=0.3) as c:
            t0 = time.monotonic()
            with pytest.raises(TimeoutError) as e:
                c.enqueue("never-sent")
            assert 0.25 <= time.monotonic() - t0 < 2.0
            assert isinstance(e.value, fenceq.Timeout) and e.value.code == "timeout"
    finally:
        stale.close()


def test_late_reply_is_never_taken_for_the_next_request(daemon: Daemon):
    """A request times out while the daemon is stopped (SIGSTOP); after SIGCONT its late
    reply arrives, and the next request gets its own reply, not that one."""
    with daemon.client(timeout=0.3) as c:
        assert c.enqueue("late-1") is True
        stop_process(daemon.proc.pid)
        try:
            with pytest.raises(fenceq.Timeout):
                c.enqueue("late-2")      # reaches the stopped daemon; reply comes later: True
        finally:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        c.timeout = 5.0
        # The late True for late-2 must be discarded: a second enqueue answers False.
        assert c.enqueue("late-2") is False
        assert c.state("late-2")["id"] == "late-2"
        assert c.state("late-1")["id"] == "late-1"


def test_many_timeouts_then_correct_replies(daemon: Daemon):
    """Several timed-out requests in a row leave several late replies; each later
    request still gets exactly its own."""
    with daemon.client(timeout=0.15) as c:
        c.enqueue("m")
        stop_process(daemon.proc.pid)
        try:
            for i in range(5):
                with pytest.raises(TimeoutError):
                    c.claim("m", f"w{i}", 10, now=i)   # w0 will win when the daemon resumes
        finally:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        c.timeout = 5.0
        assert c.claim("m", "w9", 10, now=5) is None
        assert c.state("m")["owner"] == "w0"
        assert c.release("m", "w0", 1) is True
        assert c.claim("m", "w9", 10, now=6) == 2


def test_one_thread_rule(client: fenceq.Client):
    """A Client belongs to its creating thread: use from another thread fails loudly,
    before anything is sent, and the owner keeps working."""
    caught = []

    def misuse() -> None:
        try:
            client.enqueue("from-other-thread")
        except BaseException as e:
            caught.append(e)

    t = threading.Thread(target=misuse)
    t.start()
    t.join(10)
    assert len(caught) == 1 and isinstance(caught[0], fenceq.ClientMisuse)
    assert isinstance(caught[0], RuntimeError) and "thread" in str(caught[0])
    assert isinstance(caught[0], fenceq.FenceqError) and caught[0].code == "misuse"
    assert client.state("from-other-thread") is None
    assert client.enqueue("from-owner") is True


def test_a_forked_child_cannot_use_its_parents_client(client: fenceq.Client):
    """A fork's copy of a Client fails loudly in the child (its socket is the
    parent's), a Client the child makes works, and the parent's keeps working."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        signal.alarm(10)  # a copy of the parent's socket can hang: killed, and reported so
        code = "?"
        try:
            try:
                client.enqueue("from-child")
                code = "sent"
            except fenceq.ClientMisuse as e:
                code = "misuse" if "forked child" in str(e) else "other misuse"
            with fenceq.Client(client.endpoint, timeout=5) as own:
                code += ",own" if own.enqueue("child-own") else ",own-failed"
        except BaseException as e:  # noqa: BLE001 - any failure is reported
            code += f",{type(e).__name__}"
        finally:
            os.write(write, code.encode())
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    reported = os.read(read, 200).decode()
    os.close(read)
    assert os.WIFEXITED(status) and reported == "misuse,own"
    assert client.state("from-child") is None
    assert client.state("child-own") is not None
    assert client.enqueue("from-parent") is True


def test_one_thread_rule_close_and_closed(daemon: Daemon):
    c = daemon.client()
    caught = []
    t = threading.Thread(target=lambda: caught.append(pytest.raises(fenceq.ClientMisuse, c.close)))
    t.start()
    t.join(10)
    assert caught and not c.closed
    c.close()
    c.close()  # idempotent
    with pytest.raises(fenceq.ClientMisuse) as e:
        c.ping()
    assert e.value.code == "misuse" and "closed" in e.value.message


def test_reentrant_use_fails_loudly(daemon: Daemon):
    """A signal handler that uses the client during a call gets ClientMisuse."""
    seen = []
    with daemon.client(timeout=2) as c:
        def handler(signum, frame):
            try:
                c.ping()
            except fenceq.ClientMisuse as e:
                seen.append(e)
        old = signal.signal(signal.SIGUSR1, handler)
        try:
            stop_process(daemon.proc.pid)
            main = threading.main_thread().ident

            def interrupt_then_resume() -> None:
                time.sleep(0.1)
                signal.pthread_kill(main, signal.SIGUSR1)   # to this thread, inside enqueue
                time.sleep(0.2)
                os.kill(daemon.proc.pid, signal.SIGCONT)

            threading.Thread(target=interrupt_then_resume).start()
            assert c.enqueue("reentrant") is True
        finally:
            signal.signal(signal.SIGUSR1, old)
            os.kill(daemon.proc.pid, signal.SIGCONT)
        assert len(seen) == 1
        assert c.enqueue("reentrant") is False


def test_sigterm_answers_queued_requests_applied_or_unavailable(daemon: Daemon):
    """At SIGTERM every request the daemon has taken is answered: applied, or
    `unavailable` with nothing applied (then safe to retry elsewhere)."""
    with daemon.client(timeout=5) as c:
        c.enqueue("base")
        pid = daemon.proc.pid
        stop_process(pid)
        def stop() -> None:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
        threading.Timer(0.3, stop).start()
        try:
            outcome = c.enqueue("at-shutdown")
        except fenceq.Unavailable as e:
            outcome = e
        assert daemon.proc.wait(10) == 0
    daemon.start()
    with daemon.client() as c:
        if isinstance(outcome, fenceq.Unavailable):
            assert outcome.code == "unavailable" and outcome.message
            assert c.state("at-shutdown") is None
        else:
            assert outcome is True
            assert c.state("at-shutdown") is not None


no_service = pytest.mark.skipif(
    fenceq.resolve_endpoint(environ={}).source == "service",
    reason=f"the fenceqd service's socket ({fenceq.SERVICE_ENDPOINT}) exists on this host: the "
           "development default (step 4) cannot be reached, and tests create no files under /run")


def test_resolve_endpoint_order():
    """Given, then $FENCEQ_ENDPOINT, then the service's socket when its file
    exists, then the development default; an empty value counts as none."""
    env = {"FENCEQ_ENDPOINT": "ipc:///env.sock"}
    for service in (False, True):
        assert fenceq.resolve_endpoint("ipc:///a.sock", environ=env, service_socket_exists=service) \
            == ("ipc:///a.sock", "given")
        assert fenceq.resolve_endpoint("ipc:///a.sock", environ={}, service_socket_exists=service) \
            == ("ipc:///a.sock", "given")
        for given in (None, ""):
            assert fenceq.resolve_endpoint(given, environ=env, service_socket_exists=service) \
                == ("ipc:///env.sock", "environment")
    for env in ({}, {"FENCEQ_ENDPOINT": ""}):
        assert fenceq.resolve_endpoint(environ=env, service_socket_exists=True) \
            == ("ipc:///run/fenceq/fenceqd.sock", "service")
        assert fenceq.resolve_endpoint(environ=env, service_socket_exists=False) \
            == ("ipc://var/fenceqd.sock", "development")
    assert fenceq.SERVICE_ENDPOINT == "ipc:///run/fenceq/fenceqd.sock"
    assert fenceq.DEFAULT_ENDPOINT == "ipc://var/fenceqd.sock"
    # The packaged service's socket is the one step 3 looks for.
    conf = (REPO / "systemd" / "fenceqd.conf").read_text()
    assert f"\nlisten = {fenceq.SERVICE_ENDPOINT}\n" in conf


def test_fenceq_endpoint_used_when_no_endpoint_given(monkeypatch, daemon: Daemon, tmp_dir: str):
    monkeypatch.setenv("FENCEQ_ENDPOINT", daemon.endpoint)
    monkeypatch.chdir(tmp_dir)
    with fenceq.Client() as c:
        assert (c.endpoint, c.endpoint_source) == (daemon.endpoint, "environment")
        assert c.enqueue("from-env") is True
    with daemon.client() as c:
        assert c.state("from-env") is not None


def test_given_endpoint_beats_fenceq_endpoint(monkeypatch, start_daemon):
    by_env, given = start_daemon(name="env"), start_daemon(name="given")
    monkeypatch.setenv("FENCEQ_ENDPOINT", by_env.endpoint)
    with fenceq.Client(endpoint=given.endpoint) as c:
        assert (c.endpoint, c.endpoint_source) == (given.endpoint, "given")
        assert c.enqueue("given-job") is True
    with given.client() as c:
        assert c.state("given-job") is not None
    with by_env.client() as c:
        assert c.state("given-job") is None


@no_service
def test_development_default_when_neither(monkeypatch, daemon: Daemon, tmp_dir: str):
    """No endpoint, no $FENCEQ_ENDPOINT (or an empty one), no service:
    ipc://var/fenceqd.sock (make run's), read from the current folder."""
    monkeypatch.delenv("FENCEQ_ENDPOINT", raising=False)
    assert fenceq.default_endpoint() == fenceq.DEFAULT_ENDPOINT == "ipc://var/fenceqd.sock"
    monkeypatch.chdir(tmp_dir)
    os.mkdir("var")
    os.symlink(daemon.endpoint[len("ipc://"):], "var/fenceqd.sock")
    with fenceq.Client(timeout=2) as c:
        assert (c.endpoint, c.endpoint_source) == ("ipc://var/fenceqd.sock", "development")
        assert c.enqueue("dev-job") is True
    monkeypatch.setenv("FENCEQ_ENDPOINT", "")
    with fenceq.Client(timeout=2) as c:
        assert c.endpoint_source == "development" and c.state("dev-job") is not None


@no_service
def test_unreachable_names_the_step_and_the_python_way(monkeypatch, tmp_dir: str):
    """Nothing served: the error says which step chose the endpoint and what a
    Python user changes."""
    choose = "; to use another endpoint, pass it as fenceq.Client(endpoint=...) or set FENCEQ_ENDPOINT"
    monkeypatch.chdir(tmp_dir)
    monkeypatch.delenv("FENCEQ_ENDPOINT", raising=False)
    with fenceq.Client() as c, pytest.raises(fenceq.Unreachable) as e:
        c.ping()
    assert (f"nothing serves ipc://var/fenceqd.sock (the development default): there is no "
            f"socket at {tmp_dir}/var/fenceqd.sock") in str(e.value)
    assert choose in str(e.value)
    monkeypatch.setenv("FENCEQ_ENDPOINT", f"ipc://{tmp_dir}/env.sock")
    with fenceq.Client() as c, pytest.raises(fenceq.Unreachable) as e:
        c.ping()
    assert f"nothing serves ipc://{tmp_dir}/env.sock (from FENCEQ_ENDPOINT)" in str(e.value)
    assert choose in str(e.value)
    with fenceq.Client(f"ipc://{tmp_dir}/given.sock") as c, pytest.raises(fenceq.Unreachable) as e:
        c.ping()
    assert f"nothing serves ipc://{tmp_dir}/given.sock (given explicitly)" in str(e.value)
    assert ("; to use another endpoint, pass it as fenceq.Client(endpoint=...) (FENCEQ_ENDPOINT "
            "is read only when none is given)") in str(e.value)


def test_bad_arguments_to_client():
    """Client errors (PROTOCOL.md): a bad argument the client refuses itself is
    invalid_argument, as the daemon's would be (and a ValueError)."""
    with pytest.raises(fenceq.InvalidArgument) as e:
        fenceq.Client("not-an-endpoint")
    assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError)
    assert "not-an-endpoint" in e.value.message
    with pytest.raises(fenceq.InvalidArgument) as e:
        fenceq.Client("ipc:///tmp/x.sock", timeout=0)
    assert e.value.code == "invalid_argument" and "timeout" in e.value.message


@pytest.mark.parametrize("reply", [b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"ok": "yes", "rid": 1})],
                         ids=["not msgpack", "not a map", "neither ok nor error"])
def test_bad_reply_is_bad_reply(fake_daemon, reply: bytes):
    """Client errors (PROTOCOL.md): a reply that is not a protocol v1 reply is
    bad_reply, a FenceqError (a fake daemon answers it)."""
    endpoint, router = fake_daemon

    def serve():
        assert router.poll(5000)
        identity, empty, _ = router.recv_multipart()
        router.send_multipart([identity, empty, reply])

    server = Background(serve)
    with fenceq.Client(endpoint, timeout=5) as c:
        with pytest.raises(fenceq.BadReply) as e:
            c.ping()
        assert isinstance(e.value, fenceq.FenceqError) and e.value.code == "bad_reply"
        assert e.value.message.startswith("ping: ")
    server.result()


def test_failed_socket_is_transport(client: fenceq.Client):
    """Client errors (PROTOCOL.md): a socket that fails under the client (here:
    closed behind its back) is transport, a FenceqError and a ConnectionError."""
    assert client.ping()["clock"] == "client"
    client._socket.close(linger=0)
    with pytest.raises(fenceq.TransportError) as e:
        client.ping()
    assert e.value.code == "transport" and isinstance(e.value, ConnectionError)
    assert isinstance(e.value, fenceq.FenceqError) and e.value.message.startswith("ping: ")


def test_pipelined_clients_under_load(daemon: Daemon):
    """Eight threads, each with its own Client, 100 requests each: every reply matches."""
    errors = []

    def work(i: int) -> None:
        try:
            with daemon.client() as c:
                for k in range(100):
                    job = f"load-{i}-{k}"
                    assert c.enqueue(job) is True
                    assert c.claim(job, f"w{i}", 5, now=k) == 1
                    assert c.state(job)["owner"] == f"w{i}"
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
