"""Every clause of the contract (C1-C4), through fenceq.Client against a real fenceqd.

Inputs are chosen independently of the spec's own examples (odd times, odd
ttls, several generations) so that a daemon that only passes the examples fails.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time

import msgpack
import pytest
import zmq

import fenceq
from conftest import Daemon, fenceqd_binary


def read_row(db: str, job_id: str):
    """The committed row, read by another process's connection (C1.3 allows readers)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?",
                           (job_id,)).fetchone()
    finally:
        con.close()


# -- C1 storage -----------------------------------------------------------------

def test_C1_1_schema_columns_types_defaults(daemon: Daemon, tmp_dir: str):
    """C1.1: jobs has the six columns with exactly these types, constraints, defaults."""
    con = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
    cols = {r[1]: r[2:] for r in con.execute("PRAGMA table_info(jobs)")}  # type, notnull, dflt, pk
    con.close()
    assert cols["id"] == ("TEXT", 0, None, 1)
    assert cols["owner"] == ("TEXT", 0, None, 0)
    assert cols["until"] == ("REAL", 1, "0", 0)
    assert cols["fence"] == ("INTEGER", 1, "0", 0)
    assert cols["result"] == ("TEXT", 0, None, 0)
    assert cols["done"] == ("INTEGER", 1, "0", 0)
    for name, (_, notnull, default, _) in cols.items():
        assert not notnull or default is not None, f"C1.1: later column {name} needs a default"
    # A plain INSERT INTO jobs(id) still works (on a copy: only the daemon writes the file).
    daemon.stop()
    copy = os.path.join(tmp_dir, "copy.db")
    shutil.copy(daemon.db, copy)
    con = sqlite3.connect(copy)
    con.execute("INSERT INTO jobs(id) VALUES ('plain')")
    assert con.execute("SELECT owner, until, fence, result, done FROM jobs WHERE id='plain'").fetchone() \
        == (None, 0.0, 0, None, 0)
    con.close()


def test_C1_2_restart_changes_no_row_and_fence_continues(daemon: Daemon):
    """C1.2: reopening an existing file changes no row; the fence is never reset."""
    with daemon.client() as c:
        assert c.enqueue("c12")
        f1 = c.claim("c12", "w1", 2.5, now=40.25)
        assert c.release("c12", "w1", f1)
        f2 = c.claim("c12", "w2", 7, now=41)
        assert f2 == f1 + 1
        before = c.state("c12")
    daemon.restart()
    with daemon.client() as c:
        assert c.state("c12") == before
        assert c.enqueue("c12") is False          # repeated enqueue resets nothing
        assert c.state("c12") == before
        assert c.claim("c12", "w3", 1, now=48) == f2 + 1  # 41 + 7 == 48: boundary, claimable


def test_C1_3_second_daemon_refused_first_keeps_serving(daemon: Daemon, tmp_dir: str):
    """C1.3: a second daemon on the same file exits non-zero with a one-line reason
    and does not disturb the first (not even its socket)."""
    other = subprocess.run([fenceqd_binary(), "--db", daemon.db, "--listen", daemon.endpoint,
                            "--clock", "client"], capture_output=True, timeout=20)
    assert other.returncode != 0
    reason = other.stderr.decode().strip()
    assert reason and "\n" not in reason, reason
    with daemon.client(timeout=2) as c:
        assert c.ping()["clock"] == "client"


def test_C1_3_wal_and_readers_allowed(client: fenceq.Client, daemon: Daemon):
    """C1.3: the file uses WAL, and another process may read it while the daemon runs."""
    assert client.enqueue("reader")
    con = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    assert read_row(daemon.db, "reader") == ("reader", None, 0.0, 0, None, 0)


def test_C1_4_acknowledged_changes_are_committed(daemon: Daemon):
    """C1.4: a reply reporting a change comes only after the commit: readers see it at
    once, and kill -9 right after the replies loses none of them."""
    with daemon.client() as c:
        for i in range(60):
            assert c.enqueue(f"ack-{i}")
            assert read_row(daemon.db, f"ack-{i}") is not None
        fence = c.claim("ack-7", "w", 3, now=5)
        assert c.complete("ack-7", "w", fence, "seven", now=6)
    daemon.stop(signal.SIGKILL)
    con = sqlite3.connect(daemon.db)
    assert con.execute("SELECT count(*) FROM jobs WHERE id LIKE 'ack-%'").fetchone()[0] == 60
    assert con.execute("SELECT result, done, fence FROM jobs WHERE id='ack-7'").fetchone() == ("seven", 1, fence)
    con.close()


# -- C2 time --------------------------------------------------------------------

def test_C2_1_until_is_float_seconds(client: fenceq.Client):
    """C2.1: until is a float number of seconds, even from integer inputs."""
    client.enqueue("c21")
    client.claim("c21", "w", 3, now=17)
    s = client.state("c21")
    assert isinstance(s["until"], float) and s["until"] == 20.0


def test_C2_2_client_clock_uses_now_verbatim(client: fenceq.Client):
    """C2.2: the caller's now is used verbatim, without clamping (even if it goes back)."""
    client.enqueue("c22")
    f = client.claim("c22", "w", 0.75, now=1000.5)
    assert client.state("c22")["until"] == 1001.25
    # A caller that breaks its promise gets exactly what it asked for.
    assert client.renew("c22", "w", f, 2, now=999)
    assert client.state("c22")["until"] == 1001.0


def test_C2_2_client_clock_requires_now(client: fenceq.Client):
    """C2.2 (protocol): a timed request without now is invalid_argument in client clock mode."""
    client.enqueue("c22n")
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.claim("c22n", "w", 5)
    assert e.value.code == "invalid_argument" and "now" in e.value.message
    assert client.state("c22n")["fence"] == 0


def test_C2_3_server_clock_refuses_now(server_daemon: Daemon):
    """C2.3: in server clock mode a request that carries now is invalid_argument."""
    with server_daemon.client() as c:
        assert c.ping()["clock"] == "server"
        c.enqueue("c23")
        with pytest.raises(fenceq.InvalidArgument) as e:
            c.claim("c23", "w", 5, now=123.0)
        assert "now" in e.value.message
        assert c.state("c23")["fence"] == 0                         # C3.8
        with pytest.raises(ValueError):
            c.complete("c23", "w", 1, "r", now=1)


def test_C2_3_server_clock_wall_time_non_decreasing_across_restart(server_daemon: Daemon):
    """C2.3: the daemon's own wall clock, non-decreasing across calls and restarts."""
    with server_daemon.client() as c:
        c.enqueue("c23w")
        t0 = time.time()
        f = c.claim("c23w", "w", 30)
        u1 = c.state("c23w")["until"]
        assert abs(u1 - (t0 + 30)) < 5
        assert c.renew("c23w", "w", f, 30)
        u2 = c.state("c23w")["until"]
        assert u2 >= u1
    server_daemon.restart()
    with server_daemon.client() as c:
        assert c.renew("c23w", "w", f, 30)
        assert c.state("c23w")["until"] >= u2


# -- C3 operations --------------------------------------------------------------

def test_C3_1_enqueue_first_time_only_and_never_resets_lease(client: fenceq.Client):
    """C3.1: true once, then false and nothing changes, even during a lease."""
    assert client.state("c31") is None
    assert client.enqueue("c31") is True
    assert client.enqueue("c31") is False
    f = client.claim("c31", "holder", 9, now=300)
    leased = client.state("c31")
    assert client.enqueue("c31") is False
    assert client.state("c31") == leased
    assert client.claim("c31", "intruder", 9, now=301) is None
    assert f == 1


def test_C3_2_state_row_and_none(client: fenceq.Client):
    """C3.2: the stored row with its six fields and types; None for a missing id."""
    assert client.state("nobody-here") is None
    client.enqueue("c32 é")  # UTF-8 ids
    assert client.state("c32 é") == {"id": "c32 é", "owner": None, "until": 0.0, "fence": 0,
                                      "result": None, "done": False}
    f = client.claim("c32 é", "ówner", 1.5, now=2)
    client.complete("c32 é", "ówner", f, "rés", now=3)
    s = client.state("c32 é")
    assert s == {"id": "c32 é", "owner": "ówner", "until": 3.5, "fence": 1, "result": "rés", "done": True}
    assert type(s["fence"]) is int and type(s["done"]) is bool


@pytest.mark.parametrize("ttl", [0, 0.0, -1, -0.001])
def test_C3_3_claim_ttl_not_positive_is_value_error(client: fenceq.Client, ttl):
    """C3.3: ttl <= 0 is invalid_argument (a ValueError) and changes nothing."""
    job = f"c33-ttl-{ttl!r}"
    client.enqueue(job)
    with pytest.raises(ValueError) as e:
        client.claim(job, "w", ttl, now=10)
    assert isinstance(e.value, fenceq.InvalidArgument) and e.value.code == "invalid_argument"
    assert "ttl" in e.value.message
    assert client.state(job) == {"id": job, "owner": None, "until": 0.0, "fence": 0,
                                 "result": None, "done": False}


def test_C3_3_claim_none_cases_and_boundary(client: fenceq.Client):
    """C3.3: missing, done and leased (until > now) answer None; at now == until the
    job can be claimed again and the fence goes up by one."""
    assert client.claim("c33-missing", "w", 5, now=1) is None
    assert client.state("c33-missing") is None

    client.enqueue("c33")
    f1 = client.claim("c33", "a", 2.5, now=61.5)           # until 64.0
    assert f1 == 1
    assert client.claim("c33", "b", 1, now=63.999) is None  # until > now
    assert client.state("c33")["owner"] == "a"
    f2 = client.claim("c33", "b", 4, now=64.0)              # now == until
    assert f2 == 2
    assert client.state("c33")["owner"] == "b" and client.state("c33")["until"] == 68.0

    assert client.complete("c33", "b", f2, None, now=65)
    assert client.claim("c33", "c", 1, now=10_000) is None  # done
    assert client.state("c33")["fence"] == 2


def test_C3_4_renew_only_current_generation(client: fenceq.Client):
    """C3.4: only the matching owner and fence of an unexpired, not-done lease renews."""
    client.enqueue("c34")
    f1 = client.claim("c34", "a", 3, now=100)                # until 103
    with pytest.raises(fenceq.InvalidArgument):
        client.renew("c34", "a", f1, 0, now=101)
    with pytest.raises(ValueError):
        client.renew("c34", "a", f1, -2, now=101)
    assert client.state("c34")["until"] == 103.0             # C3.8
    assert client.renew("c34", "b", f1, 5, now=101) is False  # wrong owner
    assert client.renew("c34", "a", f1 + 1, 5, now=101) is False  # wrong fence
    assert client.renew("c34", "a", f1, 5, now=102) is True  # until 107
    assert client.state("c34")["until"] == 107.0
    assert client.renew("c34", "a", f1, 5, now=107) is False  # now == until: expired, not revived
    assert client.state("c34")["until"] == 107.0
    f2 = client.claim("c34", "b", 2, now=107)
    assert client.renew("c34", "a", f1, 5, now=107.5) is False  # old generation
    assert client.renew("c34", "b", f2, 2, now=108) is True
    assert client.complete("c34", "b", f2, "x", now=108.5)
    assert client.renew("c34", "b", f2, 2, now=108.6) is False  # done


def test_C3_5_stale_complete_refused_and_result_kept(client: fenceq.Client):
    """C3.5: the story. A claims and stalls, B claims after expiry and completes,
    A's late complete is refused and B's result stays."""
    client.enqueue("c35")
    fa = client.claim("c35", "A", 4, now=20)
    fb = client.claim("c35", "B", 4, now=24.5)
    assert fb == fa + 1
    assert client.complete("c35", "B", fb, "from B", now=25)
    assert client.complete("c35", "A", fa, "from A", now=26) is False
    assert client.state("c35")["result"] == "from B"
    assert client.complete("c35", "B", fb, "again", now=25.5) is False  # done
    assert client.state("c35") == {"id": "c35", "owner": "B", "until": 28.5, "fence": fb,
                                   "result": "from B", "done": True}


def test_C3_5_complete_boundary_and_expired(client: fenceq.Client):
    """C3.5: complete needs until > now: at now == until it is refused, nothing stored."""
    client.enqueue("c35b")
    f = client.claim("c35b", "A", 1.25, now=8)
    assert client.complete("c35b", "A", f, "late", now=9.25) is False
    s = client.state("c35b")
    assert s["done"] is False and s["result"] is None
    assert client.complete("c35b", "A", f + 1, "wrong fence", now=8.5) is False
    assert client.complete("c35b", "Z", f, "wrong owner", now=8.5) is False
    # A fresh generation with a None result completes.
    f2 = client.claim("c35b", "A", 1, now=10)
    assert client.complete("c35b", "A", f2, None, now=10.5) is True
    assert client.state("c35b")["done"] is True and client.state("c35b")["result"] is None


def test_C3_6_release_keeps_fence(client: fenceq.Client):
    """C3.6: release clears owner and until, keeps the fence; the next claim is fence + 1."""
    client.enqueue("c36")
    f = client.claim("c36", "a", 50, now=3)
    assert client.release("c36", "b", f) is False
    assert client.release("c36", "a", f + 1) is False
    assert client.release("c36", "a", f) is True
    assert client.state("c36") == {"id": "c36", "owner": None, "until": 0.0, "fence": f,
                                   "result": None, "done": False}
    assert client.release("c36", "a", f) is False            # owner is gone now
    g = client.claim("c36", "b", 1, now=4)
    assert g == f + 1
    assert client.complete("c36", "b", g, "ok", now=4.5)
    assert client.release("c36", "b", g) is False            # done
    assert client.state("c36")["owner"] == "b"
    assert client.release("c36-missing", "a", 1) is False


def test_C3_7_one_winner_among_concurrent_claims(daemon: Daemon):
    """C3.7: 16 threads, each with its own Client, claim one new job at once:
    exactly one fence, every other answer None. Repeated on several jobs."""
    n = 16
    for round_ in range(5):
        job = f"c37-{round_}"
        with daemon.client() as c:
            assert c.enqueue(job)
        barrier = threading.Barrier(n, timeout=10)
        results = [None] * n
        errors = []

        def claimer(i: int) -> None:
            try:
                with daemon.client() as c:
                    c.ping()
                    barrier.wait()
                    results[i] = c.claim(job, f"owner-{i}", 30, now=1000 + round_)
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=claimer, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert not errors
        winners = [r for r in results if r is not None]
        assert winners == [1], results
        with daemon.client() as c:
            assert c.state(job)["owner"] == f"owner-{results.index(1)}"


def test_C3_8_refused_requests_change_nothing(client: fenceq.Client):
    """C3.8: validation comes before any change (bad ttl, float fence, bad now)."""
    client.enqueue("c38")
    f = client.claim("c38", "a", 10, now=50)
    before = client.state("c38")
    with pytest.raises(fenceq.InvalidArgument):
        client.renew("c38", "a", f, 0, now=51)
    with pytest.raises(fenceq.BadRequest) as e:
        client.renew("c38", "a", float(f), 5, now=51)
    assert e.value.code == "bad_request" and "fence" in e.value.message
    with pytest.raises(fenceq.BadRequest):
        client.complete("c38", "a", float(f), "r", now=51)
    with pytest.raises(fenceq.InvalidArgument):
        client.complete("c38", "a", f, "r", now=math.nan)
    with pytest.raises(fenceq.InvalidArgument):
        client.claim("c38", "b", math.inf, now=70)
    assert client.state("c38") == before


# -- C4 bad input, on the raw socket -----------------------------------------------

def raw_exchange(endpoint: str, frames, timeout: float = 3.0):
    """Send frames on a fresh DEALER; the decoded reply payload, or None if none came."""
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    try:
        s.send_multipart(frames)
        if not s.poll(int(timeout * 1000)):
            return None
        return msgpack.unpackb(s.recv_multipart()[-1], raw=False)
    finally:
        s.close()


def raw(endpoint: str, payload) -> dict:
    data = payload if isinstance(payload, bytes) else msgpack.packb(payload, use_bin_type=True)
    reply = raw_exchange(endpoint, [b"", data])
    assert reply is not None, "no reply"
    return reply


def assert_error(reply: dict, code: str, field: str = "") -> None:
    assert reply["ok"] is False, reply
    assert reply["error"]["code"] == code, reply
    message = reply["error"]["message"]
    assert isinstance(message, str) and message, reply  # C4.2
    if field:
        assert field in message, reply


@pytest.mark.parametrize("payload,code,field", [
    (b"\xc1", "bad_request", ""),                                     # never-used msgpack byte
    (b"\x85\xa2op", "bad_request", ""),                               # truncated map
    (b"", "bad_request", ""),
    (msgpack.packb([1, 2, 3]), "bad_request", ""),                    # not a map
    (msgpack.packb("ping"), "bad_request", ""),
    ({"id": "x"}, "bad_request", "op"),                               # op missing
    ({"op": 7}, "bad_request", "op"),
    ({"op": "fly"}, "unknown_op", ""),
    ({"op": "enqueue"}, "bad_request", "id"),                         # id missing
    ({"op": "enqueue", "id": 5}, "bad_request", "id"),
    ({"op": "claim", "id": "x", "owner": "o", "ttl": "5", "now": 1}, "bad_request", "ttl"),
    ({"op": "claim", "id": "x", "owner": None, "ttl": 5, "now": 1}, "bad_request", "owner"),
    ({"op": "release", "id": "x", "owner": "o", "fence": 1.0}, "bad_request", "fence"),
    ({"op": "complete", "id": "x", "owner": "o", "fence": 1, "now": 1}, "bad_request", "result"),
    ({"op": "claim", "id": "x", "owner": "o", "ttl": math.nan, "now": 1}, "invalid_argument", "ttl"),
    ({"op": "claim", "id": "x", "owner": "o", "ttl": 1, "now": -math.inf}, "invalid_argument", "now"),
    ({"op": "enqueue", "id": "i" * 1025}, "invalid_argument", "id"),
    ({"op": "claim", "id": "x", "owner": "o" * 1025, "ttl": 1, "now": 1}, "invalid_argument", "owner"),
    ({"op": "ping", "v": 2}, "unsupported_version", ""),
])
def test_C4_1_bad_input_gets_error_reply(daemon: Daemon, payload, code, field):
    """C4.1/C4.2: every kind of bad input gets an error reply with a stable code and a
    message naming the field; the daemon keeps serving."""
    assert_error(raw(daemon.endpoint, payload), code, field)
    with daemon.client(timeout=2) as c:
        assert c.ping()["protocol"] == 1


def test_C4_1_bad_input_changes_nothing_and_limits_are_exact(client: fenceq.Client, daemon: Daemon):
    """C4.1: a refused request changes nothing; 1024-byte ids are fine, 1025 are not;
    a field the op does not have is refused, naming it (issue 57); rid is echoed on
    errors too."""
    assert_error(raw(daemon.endpoint, {"op": "enqueue", "id": "é" * 513}), "invalid_argument", "id")
    with pytest.raises(fenceq.InvalidArgument):   # 1026 bytes: refused for every op
        client.state("é" * 513)
    assert client.enqueue("é" * 512) is True        # 1024 bytes
    assert client.state("é" * 512)["id"] == "é" * 512
    reply = raw(daemon.endpoint, {"op": "enqueue", "id": "c41", "rid": "r-9", "colour": "blue"})
    assert reply["rid"] == "r-9"
    assert_error(reply, "invalid_argument", "colour")
    assert client.state("c41") is None  # refused: nothing was created
    ops = client.ping(describe=True)["ops"]
    assert "colour" not in ops["enqueue"] and "after" in ops["enqueue"]
    assert "jobs[].after" in ops["enqueue_many"] and "next.ttl" in ops["complete_many"]
    reply = raw(daemon.endpoint, {"op": "enqueue", "id": 1, "rid": 77})
    assert reply["rid"] == 77
    assert_error(reply, "bad_request", "id")


def test_C4_1_oversized_frame_dropped_daemon_keeps_serving(start_daemon):
    """C4.1: a frame over --max-message drops that connection, changes nothing, and
    everyone else is still served."""
    d = start_daemon(name="small", extra=["--max-message", "4096"])
    with d.client(timeout=2) as bystander:
        assert bystander.enqueue("before")
        big = msgpack.packb({"op": "enqueue", "id": "huge", "pad": "x" * 10_000})
        assert raw_exchange(d.endpoint, [b"", big], timeout=1.0) is None
        assert bystander.state("huge") is None
        assert bystander.enqueue("after") is True


def test_C4_1_envelopes_req_dealer_bare(daemon: Daemon):
    """Protocol transport: REQ, DEALER with the empty frame and bare DEALER all work."""
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(daemon.endpoint)
    try:
        req.send(msgpack.packb({"op": "enqueue", "id": "via-req"}))
        assert req.poll(3000)
        assert msgpack.unpackb(req.recv(), raw=False) == {"ok": True, "result": True}
    finally:
        req.close()
    assert raw_exchange(daemon.endpoint, [msgpack.packb({"op": "enqueue", "id": "via-bare", "rid": 1})]) \
        == {"ok": True, "result": True, "rid": 1}
