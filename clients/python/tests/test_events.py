"""Events (issue 33): ``fenceq.Subscriber`` / ``fenceq.subscribe`` on the stream
``fenceqd --events`` publishes (``protocol/PROTOCOL.md``, "Events: a stream of
committed changes").

The daemon tests run a real fenceqd (client clock: every call passes ``now``)
with ``--events ipc://<tmp>/events.sock``. A SUB socket receives only once its
subscription has reached the daemon (the slow joiner), so every subscriber is
first made ready by :func:`subscribed`: it enqueues probe jobs (delayed far
into the future, so that no claim takes them) on the subscriber's queue until
one's event arrives, bounded. The message parsing and the ``seq`` arithmetic
behind ``missed`` are also tested on their own, with frames made here."""

from __future__ import annotations

import itertools
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import msgpack
import pytest
import zmq

import fenceq
from conftest import Daemon, fenceqd_binary
from fenceq.events import _advance_seq, _parse_event

#: How long a subscriber may take to become ready (its subscription to reach the daemon).
READY_WITHIN = 5.0

#: How long a test waits for an event it expects.
EVENT_TIMEOUT = 5.0

#: How long a test waits to conclude that no event comes.
QUIET = 0.5

#: Probe jobs are delayed this far past their ``now``: never claimable in a test.
PROBE_DELAY = 1e6

_probe_ids = itertools.count(1)


def events_endpoint(daemon: Daemon) -> str:
    return daemon.events  # type: ignore[attr-defined]


@pytest.fixture
def start_events_daemon(start_daemon, tmp_dir: str):
    """Factory: a client-clock fenceqd with ``--events ipc://<tmp>/<name>-events.sock``
    (its endpoint in ``.events``), plus any ``extra`` arguments."""

    def start(name: str = "ev", extra: Optional[List[str]] = None) -> Daemon:
        endpoint = f"ipc://{tmp_dir}/{name}-events.sock"
        d = start_daemon(name=name, clock="client", extra=["--events", endpoint, *(extra or [])])
        d.events = endpoint  # type: ignore[attr-defined]
        return d

    return start


@pytest.fixture
def ev_daemon(start_events_daemon) -> Daemon:
    return start_events_daemon()


@pytest.fixture
def client(ev_daemon: Daemon) -> Iterator[fenceq.Client]:
    with ev_daemon.client() as c:
        yield c


@pytest.fixture
def subscribers() -> Iterator[Callable[..., fenceq.Subscriber]]:
    """Factory: ``fenceq.subscribe(...)``, every subscriber closed at teardown."""
    made: List[fenceq.Subscriber] = []

    def make(*args: Any, **kw: Any) -> fenceq.Subscriber:
        sub = fenceq.subscribe(*args, **kw)
        made.append(sub)
        return sub

    yield make
    for sub in made:
        sub.close()


def subscribed(recv: Callable[[float], Optional[Tuple[str, str]]], client: fenceq.Client,
               queue: str, now: float = 1.0) -> None:
    """Make a subscriber ready: enqueue probe jobs on ``queue`` (one per short
    wait) until ``recv`` (``timeout -> (event, id) or None``) gets an event,
    then read on to the last probe's own ``enqueued``, so that the next event
    received is one the test made. Bounded by :data:`READY_WITHIN`."""
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        probe = f"probe-{next(_probe_ids)}"
        assert client.enqueue(probe, queue=queue, delay=PROBE_DELAY, now=now) is True
        got = recv(0.05)
        if got is None:
            continue
        while got != ("enqueued", probe):
            got = recv(max(0.0, deadline - time.monotonic()))
            assert got is not None, f"the event of {probe} did not come within {READY_WITHIN} s"
        return
    pytest.fail(f"the subscriber received no event within {READY_WITHIN} s")


def ready(sub: fenceq.Subscriber, client: fenceq.Client, queue: Optional[str] = None,
          now: float = 1.0) -> fenceq.Subscriber:
    """:func:`subscribed` for a :class:`fenceq.Subscriber` (probing on its own
    queue, or on ``queue`` when it has none)."""

    def recv(timeout: float) -> Optional[Tuple[str, str]]:
        ev = sub.recv(timeout=timeout)
        return None if ev is None else (ev.event, ev.id)

    subscribed(recv, client, sub.queue or queue or "probes", now)
    return sub


def recv_n(sub: fenceq.Subscriber, n: int) -> List[fenceq.Event]:
    """The next ``n`` events; fails if one does not come within :data:`EVENT_TIMEOUT`."""
    out = []
    for _ in range(n):
        ev = sub.recv(timeout=EVENT_TIMEOUT)
        assert ev is not None, f"expected {n} events, got {out}"
        out.append(ev)
    return out


def drain(sub: fenceq.Subscriber) -> None:
    """Read until nothing comes for :data:`QUIET` seconds (probes of another
    subscriber on the same queue); bounded."""
    for _ in range(int(READY_WITHIN / 0.05) + 2):
        if sub.recv(timeout=QUIET) is None:
            return
    pytest.fail("the events did not stop")


def brief(events: List[fenceq.Event]) -> List[Tuple[Any, ...]]:
    """What the tests compare: (event, id, queue, fence, owner, group)."""
    return [(e.event, e.id, e.queue, e.fence, e.owner, e.group) for e in events]


def consecutive(events: List[fenceq.Event]) -> bool:
    return all(b.seq == a.seq + 1 for a, b in zip(events, events[1:]))


# -- against the daemon ------------------------------------------------------


def test_enqueue_claim_complete_publish_in_seq_order(ev_daemon: Daemon, client: fenceq.Client,
                                                     subscribers):
    """One job's life: enqueued (fence 0), claimed (its owner, fence 1),
    completed (fence 1), in commit order with consecutive seqs; ``t`` is the
    daemon's wall clock even in client clock mode; nothing more is published."""
    sub = ready(subscribers(events_endpoint(ev_daemon), "emails"), client)
    before = time.time()
    assert client.enqueue("mail-9", queue="emails", now=2.0) is True
    fence = client.claim("mail-9", "w1", ttl=30, now=3.0)
    assert fence == 1
    assert client.complete("mail-9", "w1", fence, "sent", now=4.0) is True
    events = recv_n(sub, 3)
    after = time.time()
    assert brief(events) == [
        ("enqueued", "mail-9", "emails", 0, None, None),
        ("claimed", "mail-9", "emails", 1, "w1", None),
        ("completed", "mail-9", "emails", 1, None, None),
    ]
    assert consecutive(events), [e.seq for e in events]
    assert sub.last_seq == events[-1].seq and sub.missed == 0
    for e in events:
        assert isinstance(e, fenceq.Event) and isinstance(e.t, float)
        assert before - 1 <= e.t <= after + 1, (before, e.t, after)
    assert [e.t for e in events] == sorted(e.t for e in events)
    assert sub.recv(timeout=QUIET) is None


def test_claim_next_and_complete_and_claim_next_publish_claims(ev_daemon: Daemon,
                                                               client: fenceq.Client, subscribers):
    """Every claim op publishes ``claimed``: claim_next, and the ``next`` of
    complete_and_claim_next after its ``completed``."""
    sub = ready(subscribers(events_endpoint(ev_daemon), "q"), client)
    assert client.enqueue_many([{"id": "a", "queue": "q"}, {"id": "b", "queue": "q"}], now=2.0) == [True, True]
    job = client.claim_next("q", "w1", 30, now=3.0)
    assert job["id"] == "a"
    both = client.complete_and_claim_next("a", "w1", job["fence"], "ok", "q", 30, now=4.0)
    assert both["completed"] is True and both["next"]["id"] == "b"
    events = recv_n(sub, 5)
    assert brief(events) == [
        ("enqueued", "a", "q", 0, None, None),
        ("enqueued", "b", "q", 0, None, None),
        ("claimed", "a", "q", 1, "w1", None),
        ("completed", "a", "q", 1, None, None),
        ("claimed", "b", "q", 1, "w1", None),
    ]
    assert consecutive(events)
    assert sub.recv(timeout=QUIET) is None


def test_queue_filter_is_exact(ev_daemon: Daemon, client: fenceq.Client, subscribers):
    """A SUB subscription to "emails" also lets "emails-eu" through (a prefix):
    the Subscriber skips it. Every queue's subscriber gets both, topics intact."""
    emails = ready(subscribers(events_endpoint(ev_daemon), "emails"), client)
    every = ready(subscribers(events_endpoint(ev_daemon)), client, "emails")
    drain(emails)  # the second subscriber's probes (also on "emails")

    assert client.enqueue("eu-1", queue="emails-eu", now=2.0) is True
    assert emails.recv(timeout=QUIET) is None        # received and skipped
    [eu] = recv_n(every, 1)
    assert (eu.event, eu.id, eu.queue) == ("enqueued", "eu-1", "emails-eu")
    assert emails.last_seq == eu.seq                 # it was received, not missed

    assert client.enqueue("eu-2", queue="emails-eu", now=2.0) is True
    assert client.enqueue("m-1", queue="emails", now=2.0) is True
    [m] = recv_n(emails, 1)
    assert (m.event, m.id, m.queue) == ("enqueued", "m-1", "emails")
    assert brief(recv_n(every, 2)) == [("enqueued", "eu-2", "emails-eu", 0, None, None),
                                       ("enqueued", "m-1", "emails", 0, None, None)]
    assert emails.missed == 0 and every.missed == 0
    # A queue named by a prefix of the subscriber's is not its either.
    assert client.enqueue("e-1", queue="email", now=2.0) is True
    assert emails.recv(timeout=QUIET) is None
    assert [e.queue for e in recv_n(every, 1)] == ["email"]


def test_a_queue_subscriber_counts_other_queues_as_missed(ev_daemon: Daemon, client: fenceq.Client,
                                                          subscribers):
    """``seq`` numbers every event of the daemon; the events of other queues
    never reach a queue's subscriber, so they show up in ``missed``."""
    sms = ready(subscribers(events_endpoint(ev_daemon), "sms"), client)
    assert client.enqueue("s-1", queue="sms", now=2.0) is True
    assert client.enqueue_many([{"id": f"o-{i}", "queue": "other"} for i in range(3)], now=2.0) == [True] * 3
    assert client.enqueue("s-2", queue="sms", now=2.0) is True
    first, second = recv_n(sms, 2)
    assert (first.id, second.id) == ("s-1", "s-2")
    assert second.seq == first.seq + 4
    assert sms.missed == 3 and sms.last_seq == second.seq


def test_group_is_present_only_for_grouped_jobs(ev_daemon: Daemon, client: fenceq.Client,
                                                subscribers):
    """``group`` is the job's group in each of its events, ``None`` for a job
    without one; on the wire the key is absent then, and ``owner`` is only in
    ``claimed``."""
    sub = ready(subscribers(events_endpoint(ev_daemon), "g"), client)
    raw = zmq.Context.instance().socket(zmq.SUB)
    raw.setsockopt(zmq.LINGER, 0)
    raw.setsockopt(zmq.SUBSCRIBE, b"g")
    raw.connect(events_endpoint(ev_daemon))
    try:
        def raw_recv(timeout: float) -> Optional[Tuple[str, str]]:
            if not raw.poll(int(timeout * 1000)):
                return None
            body = msgpack.unpackb(raw.recv_multipart()[1], raw=False)
            return body["event"], body["id"]

        subscribed(raw_recv, client, "g")
        drain(sub)  # the raw socket's probes

        assert client.enqueue("a", queue="g", group="customer-42", now=2.0) is True
        assert client.enqueue("b", queue="g", now=2.0) is True
        assert client.claim("a", "w1", 30, now=3.0) == 1
        assert client.claim("b", "w2", 30, now=3.0) == 1
        assert client.complete("a", "w1", 1, None, now=4.0) is True
        assert client.fail("b", "w2", 1, "boom", now=4.0) is True
        assert brief(recv_n(sub, 6)) == [
            ("enqueued", "a", "g", 0, None, "customer-42"),
            ("enqueued", "b", "g", 0, None, None),
            ("claimed", "a", "g", 1, "w1", "customer-42"),
            ("claimed", "b", "g", 1, "w2", None),
            ("completed", "a", "g", 1, None, "customer-42"),
            ("failed", "b", "g", 1, None, None),
        ]
        bodies = []
        for _ in range(6):
            assert raw.poll(int(EVENT_TIMEOUT * 1000)), bodies
            topic, body = raw.recv_multipart()
            assert topic == b"g"
            bodies.append(msgpack.unpackb(body, raw=False))
        for body in bodies:
            assert ("group" in body) == (body["id"] == "a"), body
            assert ("owner" in body) == (body["event"] == "claimed"), body
            assert set(body) <= {"seq", "t", "event", "id", "queue", "fence", "owner", "group"}, body
    finally:
        raw.close(linger=0)


def test_refused_writes_publish_nothing(ev_daemon: Daemon, client: fenceq.Client, subscribers):
    """A stale complete (and a stale renew, release or fail) is refused and
    publishes nothing; an accepted renew publishes nothing either. The
    current owner's complete is the very next seq after its claim."""
    sub = ready(subscribers(events_endpoint(ev_daemon), "q"), client)
    assert client.enqueue("j", queue="q", max_attempts=5, now=1.0) is True
    assert client.claim("j", "w1", ttl=10, now=2.0) == 1
    assert client.claim("j", "w2", ttl=10, now=20.0) == 2     # w1's lease ran out
    events = recv_n(sub, 3)
    assert brief(events) == [("enqueued", "j", "q", 0, None, None),
                             ("claimed", "j", "q", 1, "w1", None),
                             ("claimed", "j", "q", 2, "w2", None)]

    assert client.complete("j", "w1", 1, "stale", now=21.0) is False
    assert sub.recv(timeout=QUIET) is None
    assert client.renew("j", "w1", 1, ttl=10, now=21.0) is False
    assert client.release("j", "w1", 1) is False
    assert client.fail("j", "w1", 1, "stale", now=21.0) is False
    assert client.renew("j", "w2", 2, ttl=10, now=22.0) is True
    assert sub.recv(timeout=QUIET) is None

    assert client.complete("j", "w2", 2, "ok", now=23.0) is True
    [done] = recv_n(sub, 1)
    assert (done.event, done.fence, done.seq) == ("completed", 2, events[-1].seq + 1)
    assert sub.missed == 0


def test_a_restarted_daemon_starts_seq_over_without_counting_missed(
        start_events_daemon, subscribers):
    """After a restart ``seq`` starts at 1 again: the subscriber (reconnected
    by ZeroMQ) takes the lower seq for a restart, not for a gap."""
    d = start_events_daemon()
    with d.client() as c:
        sub = ready(subscribers(events_endpoint(d), "r"), c)
        assert c.enqueue_many([{"id": f"r-{i}", "queue": "r"} for i in range(300)], now=2.0) == [True] * 300
        events = recv_n(sub, 300)
    assert consecutive(events) and sub.missed == 0
    high = sub.last_seq
    assert high is not None and high >= 300

    d.restart()
    with d.client() as c:
        ready(sub, c, now=3.0)   # probes until the reconnected subscriber gets one
        probe_seq = sub.last_seq
        assert probe_seq is not None and probe_seq < high
        assert sub.missed == 0
        assert c.enqueue("after", queue="r", now=3.0) is True
        [after] = recv_n(sub, 1)
    assert after.id == "after" and after.seq == probe_seq + 1 and sub.missed == 0


def test_a_subscriber_too_far_behind_sees_the_drops_as_missed(ev_daemon: Daemon,
                                                              client: fenceq.Client, subscribers):
    """A subscriber that reads nothing while the daemon publishes 30,000 events
    falls past the high-water marks: the daemon drops events rather than wait,
    and the subscriber counts them from the gaps in ``seq``. Every seq from the
    first event to the last is either received or missed."""
    sub = ready(subscribers(events_endpoint(ev_daemon), "burst"), client)
    start = sub.last_seq
    batches, size = 30, 1000
    for b in range(batches):
        jobs = [{"id": f"b{b}-{i}", "queue": "burst"} for i in range(size)]
        assert all(client.enqueue_many(jobs, now=2.0))
    received: List[fenceq.Event] = []
    for _ in range(batches * size):   # what the socket's queues held, until a quiet moment
        ev = sub.recv(timeout=QUIET)
        if ev is None:
            break
        received.append(ev)
    # One more, now that the subscriber keeps up: the last of the burst may
    # have been dropped, and only a later seq shows that gap.
    assert client.enqueue("tail", queue="burst", now=2.0) is True
    received += recv_n(sub, 1)
    assert received[-1].id == "tail"
    assert [e.seq for e in received] == sorted(e.seq for e in received)
    assert len(received) + sub.missed == batches * size + 1 == received[-1].seq - start
    assert sub.missed > 0, "nothing was dropped: the burst did not outrun the high-water marks"
    dropped = re.search(r"^fenceq_events_dropped_total(?:\{\})? (\d+)", client.metrics(now=3.0), re.M)
    assert dropped is not None and int(dropped.group(1)) == sub.missed


# -- CURVE over tcp ----------------------------------------------------------


def keygen(path: str) -> str:
    """``fenceqd --curve-keygen path``: the public key line it prints."""
    return subprocess.run([fenceqd_binary(), "--curve-keygen", path], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=10, check=True).stdout.strip()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def keys() -> Iterator[SimpleNamespace]:
    directory = tempfile.mkdtemp(prefix="fqe", dir="/tmp")
    try:
        k = SimpleNamespace()
        k.server_file = os.path.join(directory, "server.key")
        k.server_line = keygen(k.server_file)
        k.listed_file = os.path.join(directory, "listed.key")
        listed_line = keygen(k.listed_file)
        k.unlisted_file = os.path.join(directory, "unlisted.key")
        keygen(k.unlisted_file)
        k.allowed_file = os.path.join(directory, "allowed")
        with open(k.allowed_file, "w") as f:
            f.write(f"{listed_line}\n")
        yield k
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_tcp_events_with_curve(start_daemon, keys, subscribers):
    """A tcp:// events endpoint is served with the daemon's CURVE keys and
    client list: a subscriber with a listed key pair (``curve=`` as a Client
    takes it) gets the events; an unlisted one, and one without CURVE, get
    nothing."""
    d: Optional[Daemon] = None
    for attempt in range(3):  # another process may take the free port first
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        try:
            d = start_daemon(name=f"tcp{attempt}", clock="client",
                             extra=["--allow-tcp", "--curve-secret-key", keys.server_file,
                                    "--curve-allowed-clients", keys.allowed_file,
                                    "--events", endpoint])
        except RuntimeError:  # it exited: the port was taken
            continue
        d.events = endpoint  # type: ignore[attr-defined]
        break
    assert d is not None, "fenceqd could not bind a tcp events endpoint in 3 attempts"
    listed = subscribers(d.events, "t", curve=fenceq.curve_keys(keys.listed_file, keys.server_line))
    unlisted = subscribers(d.events, "t", curve=fenceq.curve_keys(keys.unlisted_file, keys.server_line))
    plain = subscribers(d.events, "t")
    with d.client() as c:
        ready(listed, c)
        assert c.enqueue("over-tcp", queue="t", now=2.0) is True
        [ev] = recv_n(listed, 1)
        assert (ev.event, ev.id) == ("enqueued", "over-tcp")
    assert unlisted.recv(timeout=QUIET) is None
    assert plain.recv(timeout=QUIET) is None


# -- the API, without a daemon -------------------------------------------------


def test_arguments_are_checked_before_connecting(tmp_dir: str):
    keys_ = fenceq.CurveKeys("a" * 40, "b" * 40, "c" * 40)
    with pytest.raises(fenceq.InvalidArgument, match="tcp://"):
        fenceq.Subscriber(f"ipc://{tmp_dir}/e.sock", curve=keys_)
    with pytest.raises(fenceq.InvalidArgument, match="CURVE key"):
        fenceq.Subscriber("tcp://127.0.0.1:1", curve=("short", "b" * 40, "c" * 40))
    with pytest.raises(fenceq.InvalidArgument, match="queue"):
        fenceq.Subscriber(f"ipc://{tmp_dir}/e.sock", "")
    with pytest.raises(TypeError):
        fenceq.Subscriber(f"ipc://{tmp_dir}/e.sock", b"emails")
    with pytest.raises(fenceq.InvalidArgument, match="endpoint"):
        fenceq.Subscriber("nonsense://x")
    with pytest.raises(fenceq.InvalidArgument):
        fenceq.Subscriber("")


def test_recv_times_out_and_close_is_final(tmp_dir: str):
    """No daemon (yet): recv answers None after its timeout; a negative
    timeout is refused; after close (idempotent), recv is misuse."""
    with fenceq.subscribe(f"ipc://{tmp_dir}/nobody.sock", "q") as sub:
        assert repr(sub) == f"<fenceq.Subscriber 'ipc://{tmp_dir}/nobody.sock' queue 'q' open>"
        start = time.monotonic()
        assert sub.recv(timeout=0.2) is None
        assert 0.15 <= time.monotonic() - start < 2
        assert sub.recv(timeout=0) is None
        with pytest.raises(fenceq.InvalidArgument):
            sub.recv(timeout=-1)
        with pytest.raises(fenceq.InvalidArgument):
            sub.recv(timeout=math.nan)
        assert sub.last_seq is None and sub.missed == 0
    assert sub.closed
    sub.close()
    with pytest.raises(fenceq.ClientMisuse):
        sub.recv(timeout=0)


def test_a_subscriber_belongs_to_its_thread(tmp_dir: str):
    with fenceq.subscribe(f"ipc://{tmp_dir}/nobody.sock") as sub:
        errors: List[BaseException] = []

        def other() -> None:
            try:
                sub.recv(timeout=0)
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join(5)
        assert len(errors) == 1 and isinstance(errors[0], fenceq.ClientMisuse)


def test_seq_arithmetic():
    """missed: the seqs between the last one and this one; the first event
    counts nothing (no replay), nor does a seq not past the last one (a
    restarted daemon starts at 1 again)."""
    assert _advance_seq(None, 1) == (1, 0)
    assert _advance_seq(None, 500) == (500, 0)
    assert _advance_seq(7, 8) == (8, 0)
    assert _advance_seq(7, 9) == (9, 1)
    assert _advance_seq(7, 20) == (20, 12)
    assert _advance_seq(7, 1) == (1, 0)
    assert _advance_seq(7, 3) == (3, 0)
    assert _advance_seq(7, 7) == (7, 0)


EVENT = {"seq": 4, "t": 1764716400.25, "event": "claimed", "id": "mail-9", "queue": "emails",
         "fence": 1, "owner": "w1"}


def frames(body: Any, topic: bytes = b"emails") -> List[bytes]:
    return [topic, msgpack.packb(body, use_bin_type=True)]


def test_parse_event():
    assert _parse_event(frames(EVENT)) == fenceq.Event(4, 1764716400.25, "claimed", "mail-9", "emails",
                                                       1, "w1", None)
    grouped = dict(EVENT, event="completed", group="g", t=1764716400)
    del grouped["owner"]
    ev = _parse_event(frames(grouped))
    assert (ev.owner, ev.group, ev.t) == (None, "g", 1764716400.0) and isinstance(ev.t, float)
    # Keys a later daemon may add are passed over.
    assert _parse_event(frames(dict(EVENT, extra=[1, 2]))).id == "mail-9"
    # UTF-8 queue names: the topic is their bytes.
    assert _parse_event(frames(dict(EVENT, queue="e-mäil"), "e-mäil".encode())).queue == "e-mäil"


def _without(key: str) -> Dict[str, Any]:
    body = dict(EVENT)
    del body[key]
    return body


@pytest.mark.parametrize("message, why", [
    ([b"emails"], "2 frames"),
    ([b"emails", msgpack.packb(EVENT), b""], "2 frames"),
    ([], "2 frames"),
    ([b"emails", b"\xc1"], "not msgpack"),
    ([b"emails", msgpack.packb(EVENT) + b"\x00"], "not msgpack"),
    ([b"emails", b"\xa2\xff\xfe"], "not msgpack"),                   # a str that is not UTF-8
    ([b"emails", msgpack.packb({1: 2})], "not msgpack"),              # a non-str key
    (frames([1, 2]), "not a map"),
    (frames("emails"), "not a map"),
    (frames(_without("seq")), "missing 'seq'"),
    (frames(_without("t")), "missing 't'"),
    (frames(_without("event")), "missing 'event'"),
    (frames(_without("id")), "missing 'id'"),
    (frames(_without("queue")), "missing 'queue'"),
    (frames(_without("fence")), "missing 'fence'"),
    (frames(dict(EVENT, seq=True)), "'seq'"),
    (frames(dict(EVENT, seq=4.0)), "'seq'"),
    (frames(dict(EVENT, seq=0)), "'seq'"),
    (frames(dict(EVENT, t="now")), "'t'"),
    (frames(dict(EVENT, t=math.inf)), "'t'"),
    (frames(dict(EVENT, event=3)), "'event'"),
    (frames(dict(EVENT, id=b"mail-9")), "'id'"),
    (frames(dict(EVENT, fence="1")), "'fence'"),
    (frames(dict(EVENT, fence=-1)), "'fence'"),
    (frames(dict(EVENT, owner=7)), "'owner'"),
    (frames(dict(EVENT, group=["g"])), "'group'"),
    (frames(EVENT, b"emails-eu"), "not its topic"),
])
def test_a_malformed_message_is_bad_reply(message: List[bytes], why: str):
    with pytest.raises(fenceq.BadReply) as e:
        _parse_event(message)
    assert e.value.code == "bad_reply" and why in e.value.message, e.value.message
