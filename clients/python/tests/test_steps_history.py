"""Steps under the fence, as a recorded history (C3.22, C1.4): workers claim,
save steps, stall past their leases and complete, while leases expire and
kill -9 hits the daemon; every request is recorded with its outcome (ok,
refused, or unknown: no reply) and its place in one global sequence. Then:

- no step is ever saved by a lease that was not current when it was applied:
  every save acknowledged true carried the fence of the job's newest claim
  acknowledged before it was sent, at a `now` before that lease's end, on a
  job not completed before;
- a step is saved once: for each (job, step) at most one save is
  acknowledged true, and the job's record holds that value at the end (a
  step no save was acknowledged for holds the value of a save whose reply
  was lost, or nothing);
- a retried job sees every step acknowledged before: each claim answers
  every step whose save was acknowledged before the claim was sent.

Client clock (each request carries the time a shared monotonic clock gave
it, so "the lease had ended" is the request's own judgment), --sync full.
On SQLite, on PostgreSQL, and on three PostgreSQL sidecars of one database.
Bounded: a few seconds of work, 3 kill -9s."""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import pytest

import fenceq
from conftest import Daemon, daemon_on_pg_schema

JOBS = 24
TTL = 0.3
SECONDS = 6.0
KILLS = 3
WORKERS = 6


@dataclass
class Op:
    kind: str  # claim, save, complete
    thread: int
    job: str = ""
    fence: int = 0
    step: str = ""
    value: str = ""
    now: float = 0.0
    invoked: int = 0
    returned: Optional[int] = None  # None: no reply (unknown)
    ok: Optional[bool] = None       # the flag, for save and complete
    steps: Dict[str, Any] = field(default_factory=dict)  # a claim's


class History:
    def __init__(self) -> None:
        self.seq = itertools.count(1)
        self.lock = threading.Lock()
        self.ops: List[Op] = []
        self.t0 = time.monotonic()

    def clock(self) -> float:
        return 1_000_000.0 + (time.monotonic() - self.t0)

    def tick(self) -> int:
        with self.lock:
            return next(self.seq)

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)


def worker(d: Daemon, h: History, n: int, stop: threading.Event) -> None:
    rnd = random.Random(n)
    owner = f"w{n}"
    c = d.client(timeout=1.0)

    def call(op: Op, fn) -> Any:
        nonlocal c
        op.invoked = h.tick()
        try:
            got = fn(c)
            op.returned = h.tick()
            return got
        except (fenceq.Timeout, fenceq.TransportError, fenceq.Unreachable):
            c.close()
            c = d.client(timeout=1.0)
            return None  # unknown
        finally:
            h.add(op)

    try:
        while not stop.is_set():
            now = h.clock()
            claim = Op("claim", n, now=now)
            job = call(claim, lambda cl: cl.claim_next("q", owner, TTL, now=now))
            if not job:
                time.sleep(0.01)
                continue
            claim.job, claim.fence, claim.steps = job["id"], job["fence"], job.get("steps", {})
            for k in range(3):
                if stop.is_set():
                    break
                if rnd.random() < 0.15:
                    time.sleep(TTL * 1.2)  # a stall: the lease ends, another may take it over
                now = h.clock()
                value = f"{owner}/{claim.fence}/{k}"
                # Ten names a job: an attempt saves some its predecessors did
                # (refused: saved once) and some none did yet.
                save = Op("save", n, job=claim.job, fence=claim.fence,
                          step=f"s{rnd.randrange(10)}", value=value, now=now)
                got = call(save, lambda cl: cl.step_save(save.job, owner, save.fence, save.step,
                                                         value, now=now))
                save.ok = got
            if rnd.random() < 0.3 and not stop.is_set():
                now = h.clock()
                done = Op("complete", n, job=claim.job, fence=claim.fence, now=now)
                done.ok = call(done, lambda cl: cl.complete(done.job, owner, done.fence, "r",
                                                            now=now))
    finally:
        c.close()


def run_history(daemons: List[Daemon]) -> Tuple[History, Dict[str, Dict[str, Any]]]:
    """The workers on the daemons in turn (sidecars of one database, or one
    daemon); each kill -9 hits the next daemon."""
    h = History()
    d = daemons[0]
    with d.client() as c:
        for i in range(JOBS):
            assert c.enqueue(f"j{i:02d}", queue="q", max_attempts=0, now=h.clock())
    stop = threading.Event()
    threads = [threading.Thread(target=worker, args=(daemons[n % len(daemons)], h, n, stop))
               for n in range(WORKERS)]
    for t in threads:
        t.start()
    try:
        for k in range(KILLS):
            time.sleep(SECONDS / (KILLS + 1))
            victim = daemons[k % len(daemons)]
            victim.stop(signal.SIGKILL)
            victim.start()
        time.sleep(SECONDS / (KILLS + 1))
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not any(t.is_alive() for t in threads)
    with d.client() as c:
        records = {f"j{i:02d}": c.job(f"j{i:02d}", now=h.clock()) for i in range(JOBS)}
    return h, records


def check(h: History, records: Dict[str, Dict[str, Any]]) -> Dict[str, int]:
    ops = sorted(h.ops, key=lambda o: o.invoked)
    claims = [o for o in ops if o.kind == "claim" and o.returned is not None and o.job]
    saves = [o for o in ops if o.kind == "save"]
    acked_true = [o for o in saves if o.returned is not None and o.ok is True]
    completes = [o for o in ops if o.kind == "complete" and o.returned is not None and o.ok]
    claim_of = {(o.job, o.fence): o for o in claims}
    # A step is saved once, and its value never changes.
    by_step: Dict[Tuple[str, str], List[Op]] = {}
    for o in acked_true:
        by_step.setdefault((o.job, o.step), []).append(o)
    for (job, step), oks in by_step.items():
        assert len(oks) == 1, f"{job}/{step} saved true {len(oks)} times: {[o.value for o in oks]}"
        stored = (records[job].get("steps") or {}).get(step)
        assert stored == oks[0].value, f"{job}/{step}: acknowledged {oks[0].value}, holds {stored}"
    unknown_values = {(o.job, o.step, o.value) for o in saves if o.returned is None}
    for job, rec in records.items():
        for step, value in (rec.get("steps") or {}).items():
            if (job, step) not in by_step:
                assert (job, step, value) in unknown_values, \
                    f"{job}/{step} holds {value}, which no save without a reply sent"
    # Only the current lease saves: the newest claim acknowledged before the
    # save was sent is its own, its lease had not ended at the save's now,
    # and no complete of the job was acknowledged before it.
    for o in acked_true:
        mine = claim_of.get((o.job, o.fence))
        assert mine is not None, f"{o.job}: a save true with fence {o.fence}, which no claim answered"
        assert o.now < mine.now + TTL, f"{o.job}/{o.step}: saved at {o.now} by a lease that ended"
        newer = [c for c in claims if c.job == o.job and c.fence > o.fence and c.returned < o.invoked]
        assert not newer, f"{o.job}/{o.step}: saved by fence {o.fence} after fence {newer[0].fence}"
        finished = [c for c in completes if c.job == o.job and c.returned < o.invoked]
        assert not finished, f"{o.job}/{o.step}: saved after the job was completed"
    # A retried job sees every step acknowledged before its claim was sent.
    for c in claims:
        for o in acked_true:
            if o.job == c.job and o.returned < c.invoked:
                assert c.steps.get(o.step) == o.value, \
                    f"{c.job}'s claim (fence {c.fence}) lacks {o.step}={o.value}: {c.steps}"
    return {"claims": len(claims), "saves": len(saves), "saved": len(acked_true),
            "refused": sum(1 for o in saves if o.returned is not None and o.ok is False),
            "unknown": sum(1 for o in ops if o.returned is None),
            "retried": sum(1 for c in claims if c.steps)}


def judged(daemons: List[Daemon]) -> None:
    h, records = run_history(daemons)
    counts = check(h, records)
    print(f"\n{counts}")
    # The run did what it is for: steps saved and refused, jobs retried with
    # steps, requests lost to kill -9.
    assert counts["saved"] > 20 and counts["refused"] > 0 and counts["retried"] > 5, counts


def test_c3_22_steps_history_under_kill_9_sqlite(start_daemon):
    d = start_daemon(name="sh", clock="client")
    judged([d])


def test_c3_22_steps_history_under_kill_9_postgresql(pg_uri: str, tmp_dir: str):
    with daemon_on_pg_schema(pg_uri, tmp_dir, "sh", "client") as d:
        d.start()
        judged([d])


def test_c3_22_steps_history_on_three_postgresql_sidecars(pg_uri: str, tmp_dir: str):
    """Two workers on each of three sidecars of one database; each kill -9
    hits another sidecar."""
    with daemon_on_pg_schema(pg_uri, tmp_dir, "s1", "client") as first:
        first.start()
        others = []
        try:
            for name in ("s2", "s3"):
                o = Daemon(tmp_dir, name, "client")
                o.db = first.db
                others.append(o.start())
            judged([first, *others])
        finally:
            for o in others:
                o.stop(signal.SIGKILL)
