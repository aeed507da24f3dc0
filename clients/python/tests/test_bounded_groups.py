"""Bounded by construction (issue 56, rows 4-6): bulk actions whose filter
matches nothing and claims of a queue with many groups hold the serving
thread for a bounded time, whatever the data. Each test runs a real
``fenceqd --sync full`` on an IPC socket and measures from outside: the
latency of each request, and a ``ping`` sent every 5 ms on another
connection (its latency is how long the serving thread was held).

The data is made with ``enqueue_many`` of 1000 jobs (client clock, so that
delays and windows do not depend on how long that takes)."""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Tuple

import pytest

import fenceq

NOW = 1_000_000.0  # the client clock every request carries


class Pinger:
    """A ping every 5 ms on its own connection; latencies in seconds."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.latencies: List[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with fenceq.Client(self.endpoint, timeout=10) as c:
            while not self._stop.is_set():
                t = time.monotonic()
                c.ping()
                self.latencies.append(time.monotonic() - t)
                time.sleep(0.005)

    def __enter__(self) -> "Pinger":
        self._thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def max(self) -> float:
        return max(self.latencies)

    def p99(self) -> float:
        s = sorted(self.latencies)
        return s[min(len(s) - 1, int(len(s) * 0.99))]


def timed(fn: Callable[[], object]) -> Tuple[float, object]:
    t = time.monotonic()
    out = fn()
    return time.monotonic() - t, out


def report(what: str, took: List[float], pinger: Pinger) -> None:
    took = sorted(took)
    print(f"\n{what}: {len(took)} requests, max {took[-1] * 1000:.1f} ms, "
          f"median {took[len(took) // 2] * 1000:.1f} ms; {len(pinger.latencies)} pings, "
          f"max {pinger.max() * 1000:.1f} ms, p99 {pinger.p99() * 1000:.1f} ms; slowest "
          f"{[round(x * 1000, 1) for x in took[-5:]]} ms, pings {[round(x * 1000, 1) for x in sorted(pinger.latencies)[-5:]]} ms")


@pytest.fixture
def fq(start_daemon):
    return start_daemon(name="bg", clock="client", extra=["--sync", "full"])


def enqueue(c: fenceq.Client, specs: List[fenceq.JobSpec]) -> None:
    for i in range(0, len(specs), 1000):
        assert all(c.enqueue_many(specs[i:i + 1000], now=NOW))


# -- row 6: a bulk page is bounded by the rows it examines -----------------------------


def test_bulk_action_whose_group_matches_nothing_holds_the_thread_briefly(fq):
    n = 100_000
    with fq.client(timeout=30) as c:
        enqueue(c, [fenceq.JobSpec(f"j{i:06d}", queue="q", group="g" if i % 20_000 == 7 else None)
                    for i in range(n)])
        for op in ("cancel_many", "retry_many"):
            took: List[float] = []
            pages = 0
            with Pinger(fq.endpoint) as pinger:
                more = True
                while more:
                    pages += 1
                    assert pages <= 5_000
                    t, page = timed(lambda: getattr(c, op)("q", group="none", now=NOW))
                    took.append(t)
                    assert page.count == 0
                    more = page.more
            report(f"{op} group=none over {n} jobs ({pages} pages)", took, pinger)
            assert pinger.p99() < 0.020
            assert max(took) < 0.050
        # The few that match are found and cancelled, across the pages.
        total, pages, more = 0, 0, True
        while more:
            pages += 1
            assert pages <= 5_000
            page = c.cancel_many("q", group="g", now=NOW)
            total, more = total + page.count, page.more
        assert total == 5
        assert c.stats(now=NOW)["queues"]["q"]["cancelled"] == 5
        assert c.stats(now=NOW)["queues"]["q"]["ready"] == n - 5
        # Cancelled jobs are read through jobs_dead: a retry whose group
        # matches none of them is bounded too, and finds the 5 of "g".
        cancelled, pages = 5, 0
        while cancelled < n:
            pages += 1
            assert pages <= 20_000
            cancelled += c.cancel_many("q", limit=10_000, now=NOW).count
        took = []
        with Pinger(fq.endpoint) as pinger:
            more = True
            while more:
                t, page = timed(lambda: c.retry_many("q", group="none", now=NOW))
                took.append(t)
                assert page.count == 0 and len(took) <= 5_000
                more = page.more
        report(f"retry_many group=none over {n} cancelled jobs", took, pinger)
        assert pinger.p99() < 0.020
        assert max(took) < 0.050
        total, more = 0, True
        while more:
            page = c.retry_many("q", group="g", limit=3, now=NOW)
            total, more = total + page.count, page.more
        assert total == 5
        assert c.stats(now=NOW)["queues"]["q"]["ready"] == 5

