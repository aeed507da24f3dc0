"""Issue 56 ("Bounded by construction"), the rows of wrong answers: each test
drives a real fenceqd over its socket (or its HTTP port) the way the issue's
reproduction did, and checks what the contract promises instead.

- row 7: a request refused as a whole (a parent that does not exist) publishes
  no event of the jobs it did not make (SQLite's ROLLBACK TO a savepoint);
- row 8: no value a SQLite file holds makes a reply undecodable, and an outbox
  row that is not a job by the protocol's rules (text not UTF-8, a BLOB where
  text is required) is dropped and counted (C3.21);
- row 10: headers of many small entries are taken up to their byte limit, and
  every refusal, one of a payload the decoder's limits refuse included, carries
  the request's rid;
- row 11: unique keys of different queues never meet, whatever bytes they hold;
- row 12: a guesser's failed dashboard logins do not lock the owner out.
"""

from __future__ import annotations

import base64
import http.client
import os
import re
import socket
import sqlite3
import subprocess
import time
from typing import Any, Dict, Optional, Tuple

import msgpack
import pytest
import zmq

import fenceq
from conftest import Daemon, fenceqd_binary
from test_events import (QUIET, events_endpoint, ready, recv_n, start_events_daemon,  # noqa: F401
                         subscribers)


def until(cond, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


# -- row 7: events of committed changes only ---------------------------------


def test_a_request_refused_for_an_unknown_parent_publishes_no_event(start_events_daemon,
                                                                     subscribers):
    """enqueue_many whose third job names a parent that does not exist is
    refused whole: no job exists, and subscribers hear of none of them (the
    events noted before SQLite's ROLLBACK TO are dropped with it). The next
    request's events come, with consecutive seqs."""
    d = start_events_daemon()
    with d.client() as c:
        sub = ready(subscribers(events_endpoint(d), "g"), c)
        assert c.enqueue("P", queue="g", now=1.0) is True
        assert [e.id for e in recv_n(sub, 1)] == ["P"]
        with pytest.raises(fenceq.InvalidArgument):
            c.enqueue_many([{"id": "ghost-1", "queue": "g"},
                            {"id": "ghost-2", "queue": "g", "after": ["P"]},
                            {"id": "ghost-3", "queue": "g", "after": ["no-such-parent"]}],
                           now=2.0)
        assert [c.job(f"ghost-{i}", now=2.0) for i in (1, 2, 3)] == [None, None, None]
        assert c.enqueue("real", queue="g", now=3.0) is True
        ev = recv_n(sub, 1)[0]
        assert (ev.event, ev.id) == ("enqueued", "real")
        assert sub.recv(timeout=QUIET) is None
        # The seq went on from P's: nothing was published (and missed) between.
        assert sub.missed == 0


# -- row 11: keys of different queues never meet -----------------------------


def test_keys_of_different_queues_never_meet_whatever_their_bytes(daemon: Daemon):
    """queue 'payments', key 'acct\\0123' and queue 'payments\\0acct', key
    '123' are two keys: the second enqueue (replace) makes its own job and
    leaves the first one's payload; each key still finds its own job."""
    with daemon.client() as c:
        first = c.enqueue_unique("victim", queue="payments", key="acct\u0000123",
                                 payload="mine", now=1.0)
        assert tuple(first) == ("victim", True)
        second = c.enqueue_unique("attacker", queue="payments\u0000acct", key="123",
                                  payload="theirs", on_conflict="replace", now=2.0)
        assert tuple(second) == ("attacker", True)
        assert c.job("victim", now=3.0)["queue"] == "payments"
        mine = c.claim_next("payments", "w", 30, now=3.0)
        assert mine["id"] == "victim" and mine["payload"] == "mine"
        theirs = c.claim_next("payments\u0000acct", "w", 30, now=3.0)
        assert theirs["id"] == "attacker" and theirs["payload"] == "theirs"
        # And each key is held by its own job.
        held = c.enqueue_unique("other", queue="payments", key="acct\u0000123", now=6.0)
        assert tuple(held) == ("victim", False)
        held = c.enqueue_unique("other", queue="payments\u0000acct", key="123", now=6.0)
        assert tuple(held) == ("attacker", False)
    # After a restart (the keys read from the file again), the same.
    daemon.stop()
    daemon.start()
    with daemon.client() as c:
        held = c.enqueue_unique("other", queue="payments", key="acct\u0000123", now=7.0)
        assert tuple(held) == ("victim", False)
        held = c.enqueue_unique("other", queue="payments\u0000acct", key="123", now=7.0)
        assert tuple(held) == ("attacker", False)


# -- row 10: headers up to their byte limit; every refusal with its rid --------


def two_byte_keys(n: int) -> Dict[str, str]:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return {alphabet[i // 64] + alphabet[i % 64]: "" for i in range(n)}


def test_headers_of_many_small_entries_are_taken_up_to_4096_bytes(daemon: Daemon):
    """65 entries of 4 bytes (260 bytes) and 2,048 entries of 2 bytes (4,096
    bytes: as many as the limit holds without a value) are taken and given
    back; one byte more is invalid_argument."""
    with daemon.client() as c:
        small = {f"h{i:02d}": "" for i in range(65)}
        assert sum(len(k) for k in small) == 195
        small = {f"k{i:02d}": "v" for i in range(65)}
        assert sum(len(k) + len(v) for k, v in small.items()) == 260
        assert c.enqueue("h65", queue="h", headers=small, now=1.0) is True
        assert c.job("h65", now=1.0)["headers"] == small
        full = two_byte_keys(2048)
        assert c.enqueue("h2048", queue="h", headers=full, now=1.0) is True
        assert c.job("h2048", now=1.0)["headers"] == full
        assert c.enqueue_many([{"id": f"m{i}", "queue": "h", "headers": full} for i in range(20)],
                              now=1.0) == [True] * 20
        over = dict(full)
        over["x"] = ""
        with pytest.raises(fenceq.InvalidArgument, match="4096 bytes"):
            c.enqueue("h2049", queue="h", headers=over, now=1.0)


def raw_call(endpoint: str, payload: bytes, timeout: float = 5.0) -> Dict[str, Any]:
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    try:
        s.connect(endpoint)
        s.send(payload)
        assert s.poll(int(timeout * 1000)), "no reply"
        return msgpack.unpackb(s.recv(), raw=False)
    finally:
        s.close()


def test_every_refusal_carries_the_requests_rid(daemon: Daemon):
    """A payload the decoder's limits refuse (a map of too many keys, too
    deep, an array too long) still gets its rid back, wherever in the map the
    rid is; so do truncated and trailing-bytes payloads whose rid is readable."""
    rid = 4242

    def refused(payload: bytes) -> Dict[str, Any]:
        reply = raw_call(daemon.endpoint, payload)
        assert reply["ok"] is False, reply
        assert reply.get("rid") == rid, reply
        return reply

    many_keys = {"op": "ping", "rid": rid, **{f"x{i}": 0 for i in range(100)}}
    assert refused(msgpack.packb(many_keys))["error"]["code"] == "bad_request"
    rid_last = {**{f"x{i}": [[i]] for i in range(100)}, "op": "ping", "rid": rid}
    refused(msgpack.packb(rid_last))
    deep: Any = 1
    for _ in range(20):
        deep = [deep]
    refused(msgpack.packb({"op": "ping", "rid": rid, "deep": deep}))
    refused(msgpack.packb({"rid": rid, "op": "enqueue_many", "jobs": [{"id": "a"}] * 5000}))
    refused(msgpack.packb({"op": "ping", "rid": rid}) + b"\x00")
    refused(msgpack.packb({"op": "ping", "rid": rid, "big": "x" * 100})[:-10])
    # A str rid too, and a rid that is not one (an array): no rid, as before.
    reply = raw_call(daemon.endpoint, msgpack.packb({**many_keys, "rid": "r-1"}))
    assert reply["rid"] == "r-1"
    reply = raw_call(daemon.endpoint, msgpack.packb({"rid": [1], "op": "ping", **{
        f"x{i}": 0 for i in range(100)}}))
    assert reply["ok"] is False and "rid" not in reply


def test_the_python_client_gets_the_refusal_not_a_timeout(daemon: Daemon):
    """The client's request refused by the decoder's limits is answered
    (bad_request) within its timeout, not a Timeout."""
    with fenceq.Client(daemon.endpoint, timeout=5) as c:
        deep: Any = "x"
        for _ in range(20):
            deep = {"k": deep}
        t0 = time.monotonic()
        with pytest.raises(fenceq.BadRequest):
            c._call("ping", {"deep": deep})
        assert time.monotonic() - t0 < 2


# -- row 8: no stored value makes a reply undecodable ------------------------


def outbox_schema() -> str:
    return subprocess.run([fenceqd_binary(), "--outbox-schema", "sqlite"], check=True,
                          capture_output=True, text=True).stdout


def test_outbox_rows_that_are_not_utf8_text_are_dropped_and_counted(start_daemon, tmp_dir):
    """Rows whose id is a BLOB, or whose queue, group or text payload is not
    UTF-8, are dropped, logged and counted rejected (C3.21); the good rows
    become jobs; stats and claim_next(max=10) answer."""
    app = os.path.join(tmp_dir, "app.db")
    conn = sqlite3.connect(app, isolation_level=None)
    conn.executescript(outbox_schema())
    rows = [
        ("X'FFFE41'", "'q'", "NULL", "NULL"),                       # a BLOB id, not UTF-8
        ("X'6964'", "'q'", "NULL", "NULL"),                         # a BLOB id, UTF-8 bytes
        ("'bad-queue'", "CAST(X'FF41' AS TEXT)", "NULL", "NULL"),    # queue not UTF-8
        ("'bad-payload'", "'q'", "CAST(X'FF41' AS TEXT)", "NULL"),   # text payload not UTF-8
        ("'bad-group'", "'q'", "NULL", "CAST(X'C328' AS TEXT)"),     # group not UTF-8
        ("'bad-queue-blob'", "X'71'", "NULL", "NULL"),              # queue a BLOB
    ]
    conn.execute("BEGIN")
    for id_, queue, payload, grp in rows:
        conn.execute(f"INSERT INTO fenceq_outbox(id, queue, payload, grp) "
                     f"VALUES ({id_}, {queue}, {payload}, {grp})")
    for i in range(4):
        conn.execute("INSERT INTO fenceq_outbox(id, queue, payload) VALUES (?, 'q', ?)",
                     (f"good-{i}", f"p{i}"))
    conn.execute("INSERT INTO fenceq_outbox(id, queue, payload) VALUES ('binary', 'q', X'FF41')")
    conn.execute("COMMIT")
    conn.close()
    d = start_daemon(clock="server", extra=["--outbox", app])
    with fenceq.Client(d.endpoint, timeout=5) as c:
        until(lambda: c.stats()["outbox"]["drained"] + c.stats()["outbox"]["rejected"] == 11,
              what="11 rows handled")
        st = c.stats()
        assert st["outbox"]["rejected"] == 6 and st["outbox"]["drained"] == 5, st["outbox"]
        jobs = c.claim_next("q", "w", 30, max=10)
        assert sorted(j["id"] for j in jobs) == ["binary", "good-0", "good-1", "good-2", "good-3"]
        assert {j["id"]: j["payload"] for j in jobs}["binary"] == b"\xffA"
    log = d.stderr()
    assert log.count("cannot be a job and is dropped") >= 6, log
    assert "UTF-8" in log and "BLOB" in log, log


def test_text_in_the_store_that_is_not_utf8_never_makes_a_reply_undecodable(start_daemon):
    """An operator's sqlite3 shell wrote an id, a queue and a text payload
    that are not UTF-8 into the store's file: stats, list, job and
    claim_next(max=10) still answer decodable replies (such bytes replaced),
    and the good jobs are handed out with them."""
    d = start_daemon(clock="server")
    with d.client() as c:
        for i in range(6):
            assert c.enqueue(f"j{i}", queue="q", payload=f"p{i}") is True
        assert c.enqueue("elsewhere", queue="r") is True
    d.stop()
    db = sqlite3.connect(d.db, isolation_level=None)
    db.execute("UPDATE jobs SET id = CAST(X'FFFE41' AS TEXT) WHERE id = 'j0'")
    db.execute("UPDATE jobs SET payload = CAST(X'FF41' AS TEXT) WHERE id = 'j1'")
    db.execute("UPDATE jobs SET queue = CAST(X'FF41' AS TEXT) WHERE id = 'elsewhere'")
    db.close()
    d.start()
    with fenceq.Client(d.endpoint, timeout=5) as c:
        st = c.stats()
        assert "?A" in st["queues"], st["queues"].keys()
        assert len(c.list(queue="q")) == 6
        jobs = c.claim_next("q", "w", 30, max=10)
        assert len(jobs) == 6
        good = [j for j in jobs if j["id"] in {f"j{i}" for i in range(2, 6)}]
        assert len(good) == 4
        for j in good:
            assert c.complete(j["id"], "w", j["fence"], "ok") is True
    out = subprocess.run([os.path.join(os.path.dirname(fenceqd_binary()), "fenceq"),
                          "--endpoint", d.endpoint, "stats"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr


# -- row 12: a guesser does not lock the owner out ---------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port: int, path: str, login: Optional[Tuple[str, str]],
             source: str = "127.0.0.1") -> Tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        headers = {}
        if login:
            headers["Authorization"] = "Basic " + base64.b64encode(
                f"{login[0]}:{login[1]}".encode()).decode()
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_a_guessers_failed_logins_do_not_lock_the_owner_out(start_daemon, tmp_dir):
    """300 wrong passwords for the user 'ops' from one address: that address
    is slowed (429: most of them are not even looked at), the failures are
    logged and counted; the owner, from another address, logs in
    with the right password at once, and so does a new address after one miss."""
    auth = os.path.join(tmp_dir, "auth")
    with open(auth, "w") as f:
        f.write("ops:right-password\n")
    os.chmod(auth, 0o600)
    port = free_port()
    d = start_daemon(clock="server",
                     extra=["--http-listen", f"127.0.0.1:{port}", "--http-auth-file", auth])
    until(lambda: _answers(port), what="the HTTP port answers")
    statuses = [http_get(port, "/api/session", ("ops", f"guess-{i}"), "127.0.0.2")[0]
                for i in range(300)]
    assert set(statuses) <= {401, 429} and statuses.count(401) >= 5
    assert statuses.count(429) > 200, statuses  # the guesser's address waits
    # The owner, elsewhere.
    assert http_get(port, "/api/session", ("ops", "right-password"), "127.0.0.1")[0] == 200
    # A new address that missed once is slowed by the user's wait, then gets in.
    assert http_get(port, "/api/session", ("ops", "typo"), "127.0.0.3")[0] == 401
    deadline = time.monotonic() + 70
    while True:
        status = http_get(port, "/api/session", ("ops", "right-password"), "127.0.0.3")[0]
        if status == 200:
            break
        assert status == 429 and time.monotonic() < deadline
        time.sleep(0.5)
    metrics = http_get(port, "/metrics", None)[1].decode()
    failures = int(re.search(r"^fenceq_http_login_failures_total (\d+)$", metrics, re.M).group(1))
    assert failures >= 6
    assert "failed login" in d.stderr()


def test_a_browser_that_logged_in_is_not_locked_out_by_a_guesser_at_its_address(start_daemon,
                                                                                 tmp_dir):
    """Behind a reverse proxy or an SSH tunnel every client is 127.0.0.1: the
    owner's browser, which logged in before (/api/session set its cookie),
    still logs in with the right password while a guesser at the same address
    is held back; a wrong password with the cookie is judged (401), not
    waved through, and the cookie of another run or user counts for nothing."""
    auth = os.path.join(tmp_dir, "auth")
    with open(auth, "w") as f:
        f.write("ops:right-password\nother:other-password\n")
    os.chmod(auth, 0o600)
    port = free_port()
    start_daemon(clock="server",
                 extra=["--http-listen", f"127.0.0.1:{port}", "--http-auth-file", auth])
    until(lambda: _answers(port), what="the HTTP port answers")
    status, headers, _ = http_request(port, "/api/session", ("ops", "right-password"))
    assert status == 200
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith("fenceq_device=") and "HttpOnly" in headers["Set-Cookie"]
    status, other_headers, _ = http_request(port, "/api/session", ("other", "other-password"))
    other_cookie = other_headers["Set-Cookie"].split(";")[0]
    assert other_cookie != cookie
    statuses = [http_request(port, "/api/session", ("ops", f"guess-{i}"))[0] for i in range(300)]
    assert statuses.count(429) > 200, statuses
    # Guess on until one is judged: a wait of 2 s or more starts then, and the
    # checks below all fall within it.
    deadline = time.monotonic() + 70
    while http_request(port, "/api/session", ("ops", "guess-x"))[0] != 401:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    started = time.monotonic()
    # Held back without the cookie; another user's cookie, or a made-up one,
    # does not lift ops's wait.
    assert http_request(port, "/api/session", ("ops", "right-password"))[0] == 429
    assert http_request(port, "/api/session", ("ops", "right-password"), other_cookie)[0] == 429
    assert http_request(port, "/api/session", ("ops", "right-password"),
                        "fenceq_device=" + "0" * 32)[0] == 429
    # The owner's browser: in at once, and again.
    for _ in range(3):
        assert http_request(port, "/api/session", ("ops", "right-password"), cookie)[0] == 200
    # Its wrong password is judged, not let in.
    assert http_request(port, "/api/session", ("ops", "wrong"), cookie)[0] == 401
    # Its logins did not start the guesser's wait over.
    assert http_request(port, "/api/session", ("ops", "guess-y"))[0] == 429
    assert time.monotonic() - started < 2, "the checks took longer than the wait"


def http_request(port: int, path: str, login: Tuple[str, str],
                 cookie: Optional[str] = None) -> Tuple[int, Any, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Authorization": "Basic " + base64.b64encode(
            f"{login[0]}:{login[1]}".encode()).decode()}
        if cookie:
            headers["Cookie"] = cookie
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def _answers(port: int) -> bool:
    try:
        return http_get(port, "/healthz", None)[0] in (200, 503)
    except OSError:
        return False
