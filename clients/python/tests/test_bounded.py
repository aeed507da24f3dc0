"""Bounded by construction (issue 56): a request that no client reads, or an
events subscriber that subscribes to much, holds neither the serving thread
nor the daemon's heap in proportion to the data. Each test runs a real
``fenceqd`` (``--sync normal``: conftest's TIMED_SYNC says why) and measures
from outside: a ``ping`` sent every
5 ms on another connection (its latency is how long the serving thread was
held) and the daemon's VmRSS from /proc."""

from __future__ import annotations

import os
import time
from typing import Iterator, List, Optional

import msgpack
import pytest
import zmq

import fenceq
from conftest import TIMED_SYNC, Pinger

MB = 1 << 20


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def report(what: str, pinger: Pinger, grew: int) -> None:
    print(f"\n{what}: {len(pinger.latencies)} pings, max {pinger.max() * 1000:.1f} ms, "
          f"p99 {pinger.p99() * 1000:.1f} ms, RSS +{grew / MB:.1f} MiB")


@pytest.fixture
def daemon(start_daemon, tmp_dir: str):
    endpoint = f"ipc://{tmp_dir}/b-events.sock"
    d = start_daemon(name="b", clock="server",
                     extra=[*TIMED_SYNC, "--events", endpoint, "--max-message", str(4 * MB)])
    d.events = endpoint  # type: ignore[attr-defined]
    yield d


def settle_rss(pid: int, below: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    now = rss(pid)
    while now > below and time.monotonic() < deadline:
        time.sleep(0.1)
        now = rss(pid)
    return now


# --- events subscriptions ------------------------------------------------------


def subscribe_and_leave(daemon, subscriptions: List[bytes], hold: float = 1.0,
                        connections: int = 1) -> tuple:
    """`connections` XSUBs each send their share of `subscriptions` (every
    connections-th) while pings run, stay `hold` s, leave. Returns (pinger,
    RSS growth while subscribed, RSS growth after they left)."""
    pid = daemon.proc.pid
    with fenceq.Client(daemon.endpoint) as c:
        c.ping()
    base = rss(pid)
    ctx = zmq.Context()
    try:
        with Pinger(daemon.endpoint, timeout=30) as p:
            socks = []
            for _ in range(connections):
                s = ctx.socket(zmq.XSUB)
                s.setsockopt(zmq.LINGER, 0)
                s.setsockopt(zmq.SNDHWM, 0)
                s.connect(daemon.events)
                socks.append(s)
            for n, s in enumerate(socks):
                for sub in subscriptions[n::connections]:
                    s.send(b"\x01" + sub)
            end = time.monotonic() + hold
            peak = base
            while time.monotonic() < end:
                peak = max(peak, rss(pid))
                time.sleep(0.01)
            for s in socks:
                s.close()
            time.sleep(0.3)
        after = settle_rss(pid, base + 16 * MB, 5.0)
    finally:
        ctx.term()
    return p, peak - base, after - base


def test_large_subscriptions_are_refused(daemon):
    # 100 subscriptions of 60 KB: no queue name is longer than 256 bytes.
    subs = [b"%03d" % i + b"x" * 60_000 for i in range(100)]
    p, grew, kept = subscribe_and_leave(daemon, subs)
    report("100 subscriptions of 60 KB", p, grew)
    assert grew < 32 * MB and kept < 16 * MB
    assert p.p99() < 0.02


def next_event(c: fenceq.Client, sub, queue: str, within: float) -> bool:
    """Whether `sub` gets an event of `queue` within `within` s, enqueueing a
    probe job every 0.2 s (a subscriber that reconnects misses the ones of
    meanwhile)."""
    deadline = time.monotonic() + within
    n = 0
    while time.monotonic() < deadline:
        n += 1
        c.enqueue(f"probe-{queue}-{time.monotonic_ns()}-{n}", queue=queue)
        if sub.recv(timeout=0.2) is not None:
            return True
    return False


def test_many_subscriptions_are_given_back_and_subscribers_get_events_again(daemon):
    # 40,000 distinct ones of 200 bytes, each a name a queue could have:
    # libzmq keeps a trie node per byte, 31 bytes of memory per byte of
    # subscription (about 250 MB for these). Past 512 KiB of subscriptions
    # the daemon closes the socket and binds it anew (events.hpp): every
    # subscriber of it reconnects and subscribes again.
    with fenceq.Client(daemon.endpoint) as c, fenceq.Subscriber(daemon.events, queue="q") as sub:
        assert next_event(c, sub, "q", 5.0)
        subs = [os.urandom(195) + b"%05d" % i for i in range(40_000)]
        p, grew, kept = subscribe_and_leave(daemon, subs, hold=2.0)
        report("40,000 subscriptions of 200 bytes", p, grew)
        print(f"  after the subscriber left: RSS +{kept / MB:.1f} MiB")
        # What it holds while subscribed: the trie of one socket at the
        # bound (about 16 MiB), since libzmq takes in one or two subscription
        # messages of a connection at a time (kSubscriptionsQueued, events.hpp).
        # Before (100 at a time), the one a reconnecting subscriber sends all
        # at once was filed in one go, past the bound: +63 to +267 MiB in 5 of
        # 11 runs on a quiet machine (issue 56 row 1); +16 to +17 MiB in 18
        # runs since, 10 of them beside 3 CPU hogs and a writer of fsynced
        # files.
        assert grew < 32 * MB
        assert kept < 16 * MB
        assert p.p99() < 0.02
        # The subscriber that was there before, reconnected by its library,
        # gets its events again.
        assert next_event(c, sub, "q", 10.0)
    # And a new one does.
    with fenceq.Client(daemon.endpoint) as c, fenceq.Subscriber(daemon.events, queue="q") as sub:
        assert next_event(c, sub, "q", 5.0)


def test_many_subscribers_each_subscribing_much_are_bounded_too(daemon):
    # 100 connections, 400 distinct subscriptions of 200 bytes each (each
    # connection's buffers on top of the one trie): +26 to +30 MiB measured.
    subs = [os.urandom(192) + b"%08d" % i for i in range(40_000)]
    p, grew, kept = subscribe_and_leave(daemon, subs, hold=2.0, connections=100)
    report("100 subscribers of 400 subscriptions of 200 bytes", p, grew)
    assert grew < 64 * MB
    assert kept < 16 * MB
    assert p.p99() < 0.02


# --- results ---------------------------------------------------------------------


def finished_with_results(client: fenceq.Client, n: int, size: int, prefix: str = "r") -> List[str]:
    """`n` jobs completed with results of `size` bytes."""
    ids = [f"{prefix}{i:04d}" for i in range(n)]
    for k in range(0, n, 100):
        client.enqueue_many([{"id": i, "queue": "big"} for i in ids[k:k + 100]])
    body = "x" * size
    for _ in range(n):
        job = client.claim_next("big", "w", 60)
        assert job is not None
        assert client.complete(job["id"], "w", job["fence"], body) is True
    return ids


def send_unread(endpoint: str, ctx: zmq.Context, request: dict, n: int) -> List[zmq.Socket]:
    """`n` connections that each send `request` and never read the reply."""
    out = []
    for _ in range(n):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVHWM, 1)
        s.setsockopt(zmq.RCVBUF, 4096)
        s.connect(endpoint)
        s.send_multipart([b"", msgpack.packb(request)])
        out.append(s)
    return out


def test_results_that_no_one_reads_are_bounded_in_bytes(daemon):
    pid = daemon.proc.pid
    with fenceq.Client(daemon.endpoint, timeout=30) as c:
        ids = finished_with_results(c, 100, 1_000_000)
    base = rss(pid)
    ctx = zmq.Context()
    try:
        with Pinger(daemon.endpoint, timeout=30) as p:
            time.sleep(0.2)
            socks = send_unread(daemon.endpoint, ctx, {"op": "results", "ids": ids}, 4)
            peak = base
            end = time.monotonic() + 3
            while time.monotonic() < end:
                peak = max(peak, rss(pid))
                time.sleep(0.05)
        for s in socks:
            s.close()
    finally:
        ctx.term()
    report("4 unread results of 100 x 1 MB", p, peak - base)
    assert peak - base < 64 * MB
    assert p.p99() < 0.02
    with fenceq.Client(daemon.endpoint, timeout=30) as c:
        # A reply holds about 1 MiB: the rest come back omitted, to ask again.
        got = c.results(ids)
        taken = [i for i in ids if got[i]["result"] is not None]
        assert 1 <= len(taken) <= 2 and taken == ids[:len(taken)]
        assert all(got[i] == {"state": "done", "result": None, "omitted": True}
                   for i in ids[len(taken):])
        again = c.results(ids[len(taken):])
        assert again[ids[len(taken)]]["result"] == "x" * 1_000_000
        # States only: no result at all.
        states = c.results(ids, states_only=True)
        assert all(v == {"state": "done", "result": None, "omitted": True}
                   for v in states.values())


def test_the_dashboards_states_of_1000_parents_hold_nothing(daemon):
    pid = daemon.proc.pid
    with fenceq.Client(daemon.endpoint, timeout=30) as c:
        # 1,000 parents: 100 with 1 MB results, the others with 1 KB ones.
        ids = finished_with_results(c, 100, 1_000_000, "big") + \
            finished_with_results(c, 900, 1000, "small")
    base = rss(pid)
    ctx = zmq.Context()
    try:
        with Pinger(daemon.endpoint, timeout=30) as p:
            time.sleep(0.2)
            # As the job page asks: 100 ids a request, all at once, states only.
            socks = []
            for k in range(0, 1000, 100):
                socks += send_unread(daemon.endpoint, ctx, {"op": "results", "ids": ids[k:k + 100],
                                                            "states_only": True}, 1)
            replies = []
            for s in socks:
                assert s.poll(10_000), "no reply"
                replies.append(msgpack.unpackb(s.recv_multipart()[1]))
            peak = rss(pid)
            time.sleep(0.5)
        for s in socks:
            s.close()
    finally:
        ctx.term()
    report("the job page's states of 1,000 parents", p, peak - base)
    assert peak - base < 64 * MB
    assert p.p99() < 0.02
    for reply in replies:
        assert reply["ok"] and all(v["state"] == "done" and v["result"] is None
                                   for v in reply["result"].values())


def test_a_purge_whose_filter_matches_nothing_holds_the_thread_briefly(daemon):
    """C3.16: purge with a filter pages by the rows it examines. Before, one
    purge of group "none" over 200,000 cancelled jobs held the thread
    274-382 ms (ping max 662 ms) for {count: 0, more: false}."""
    n = 200_000
    with daemon.client(timeout=60) as c:
        for i in range(0, n, 1000):
            assert all(c.enqueue_many([fenceq.JobSpec(f"j{k:06d}", queue="q",
                                                      group="g" if k % 50_000 == 7 else None)
                                       for k in range(i, i + 1000)]))
        assert c.cancel_all("q", limit=10_000) == n
        took: List[float] = []
        with Pinger(daemon.endpoint, timeout=10) as pinger:
            more = True
            while more:
                assert len(took) < 5_000
                t = time.monotonic()
                page = c.purge_many("q", group="none")
                took.append(time.monotonic() - t)
                assert page.count == 0
                more = page.more
        print(f"\npurge group=none over {n} cancelled jobs: {len(took)} pages, max "
              f"{max(took) * 1000:.1f} ms; {len(pinger.latencies)} pings, max "
              f"{pinger.max() * 1000:.1f} ms, p99 {pinger.p99() * 1000:.1f} ms")
        assert pinger.p99() < 0.020
        assert max(took) < 0.050
        found, more = 0, True
        while more:  # the few that match, found across the pages
            page = c.purge_many("q", group="g")
            found, more = found + page.count, page.more
        assert found == 4
        assert c.stats()["queues"]["q"]["cancelled"] == n - 4
