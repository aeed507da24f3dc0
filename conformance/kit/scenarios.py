"""The kit's scenarios (README, "The scenarios"): the stale-worker story and
payload types, the 16-client race, a batch with one stale item, and
long-polls. The fault scenarios (timeouts, restarts) are in faults.py.

Each group runs on its own daemon with its own adapter processes, closed at
its end whatever happened. Every wait is bounded (the adapter's patience,
Adapter.receive; the daemon's start and stop, Daemon).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .adapter import Adapter, Reply
from .daemon import Daemon
from .report import Results
from .values import differences, from_json

RACERS = 16
Setup = Tuple[Daemon, List[Adapter]]


@contextlib.contextmanager
def setup(command: str, clock: str, count: int, timeout: float = 5.0) -> Iterator[Setup]:
    """A daemon and ``count`` adapters connected to it (all started first, so
    their start-ups overlap), each having answered a ping."""
    daemon = Daemon(clock)
    adapters: List[Adapter] = []
    try:
        adapters = [Adapter(command, f"adapter {i + 1}") for i in range(count)]
        for a in adapters:
            a.hello()
            connected = a.connect(daemon.endpoint, timeout)
            if not connected.ok:
                raise RuntimeError(f"{a.label}: connect answered {connected!r}")
        for a in adapters:
            pinged = a.call("ping")
            if not pinged.ok:
                raise RuntimeError(f"{a.label}: ping answered {pinged!r}")
        yield daemon, adapters
    finally:
        for a in adapters:
            a.close()
        daemon.close()


def expect(results: Results, name: str, reply: Reply, result: Any = None, *,
           code: Optional[str] = None, subset: bool = False,
           within: Optional[Tuple[float, float]] = None) -> bool:
    """One check: the reply is ``result`` (adapter JSON; or the error
    ``code``), answered ``within`` (low, high) seconds of its sending."""
    problems: List[str] = []
    if code is not None:
        if reply.ok or reply.code != code:
            problems.append(f"expected error {code!r}, got {reply!r}")
        elif not isinstance(reply.message, str) or not reply.message:
            problems.append("an error needs a non-empty message")
    elif not reply.ok:
        problems.append(f"expected result {result!r}, got {reply!r}")
    else:
        problems.extend(differences(from_json(result), from_json(reply.result), subset))
    if within is not None and not within[0] <= reply.seconds <= within[1]:
        problems.append(f"answered after {reply.seconds:.2f} s, "
                        f"expected {within[0]}..{within[1]} s")
    return results.check(name, problems)


def checker(results: Results, group: str) -> Callable[..., bool]:
    """expect() with the group's name before each check's."""
    return lambda name, *args, **kw: expect(results, f"{group}: {name}", *args, **kw)


def lease(id: str, owner: str, fence: int, **more: Any) -> Dict[str, Any]:
    """The fields of a lease's fenced write (renew, complete, release)."""
    return {"id": id, "owner": owner, "fence": fence, **more}


def lease_state(id: str, owner: Optional[str], until: float, fence: int,
                result: Optional[str], done: bool) -> Dict[str, Any]:
    """What `state` answers (C3.2)."""
    return {"id": id, "owner": owner, "until": until, "fence": fence, "result": result,
            "done": done}


def story(command: str, results: Results) -> None:
    """C3.3-C3.5 with two workers, each its own client (client clock)."""
    check = checker(results, "story")
    j = "invoice-42"
    late = lease(j, "worker-a", 1)
    with setup(command, "client", 2) as (_, (a, b)):
        check("enqueue", a.call("enqueue", {"id": j}), True)
        check("A claims, fence 1",
              a.call("claim", {"id": j, "owner": "worker-a", "ttl": 30, "now": 100.0}), 1)
        check("A renews its current lease (to 140)",
              a.call("renew", {**late, "ttl": 30, "now": 110.0}), True)
        check("B's claim while A's lease runs is refused (null, not an error)",
              b.call("claim", {"id": j, "owner": "worker-b", "ttl": 30, "now": 139.5}), None)
        check("B claims once A's lease ended (now == until), fence 2",
              b.call("claim", {"id": j, "owner": "worker-b", "ttl": 30, "now": 140.0}), 2)
        check("A's late renew is refused (false)",
              a.call("renew", {**late, "ttl": 30, "now": 141.0}), False)
        check("A's late complete is refused (false)",
              a.call("complete", {**late, "result": "paid by A", "now": 141.0}), False)
        check("A's late release is refused (false)", a.call("release", late), False)
        check("B completes with fence 2",
              b.call("complete", lease(j, "worker-b", 2, result="paid by B", now=150.0)), True)
        check("A's complete after B's is refused",
              a.call("complete", {**late, "result": "paid by A", "now": 151.0}), False)
        check("B's second complete is refused (the job is done)",
              b.call("complete", lease(j, "worker-b", 2, result="again", now=152.0)), False)
        check("state shows B's result and fence", a.call("state", {"id": j}),
              lease_state(j, "worker-b", 170.0, 2, "paid by B", True))
        check("state of a missing job is null", a.call("state", {"id": "nope"}), None)
    server_story(command, results)
    payloads(command, results)


def server_story(command: str, results: Results) -> None:
    """The story on the daemon's clock: a 1 s lease that really runs out."""
    check = checker(results, "server story")
    j = "lease-runs-out"
    with setup(command, "server", 2) as (_, (a, b)):
        check("enqueue", a.call("enqueue", {"id": j}), True)
        check("A claims with a 1 s lease", a.call("claim", {"id": j, "owner": "A", "ttl": 1}), 1)
        check("B is refused while it runs",
              b.call("claim", {"id": j, "owner": "B", "ttl": 30}), None)
        time.sleep(1.1)
        check("B claims once it ran out", b.call("claim", {"id": j, "owner": "B", "ttl": 30}), 2)
        check("A's renew is refused", a.call("renew", lease(j, "A", 1, ttl=30)), False)
        check("A's complete is refused", a.call("complete", lease(j, "A", 1, result="A")), False)
        check("B completes", b.call("complete", lease(j, "B", 2, result="B")), True)
        check("state shows B's result", a.call("state", {"id": j}),
              {"id": j, "owner": "B", "fence": 2, "result": "B", "done": True}, subset=True)


def payloads(command: str, results: Results) -> None:
    """A payload comes back with the msgpack type it was enqueued with: bin or str."""
    check = checker(results, "payloads")
    blob = {"$bin": "00ff10c1"}
    text = "text \u00e9"
    claim = {"queue": "pay", "owner": "w", "ttl": 30}
    with setup(command, "server", 1) as (_, (a,)):
        check("enqueue a bin payload",
              a.call("enqueue", {"id": "p-bin", "queue": "pay", "payload": blob, "priority": 5}),
              True)
        check("enqueue a str payload",
              a.call("enqueue", {"id": "p-str", "queue": "pay", "payload": text}), True)
        check("enqueue with no payload",
              a.call("enqueue", {"id": "p-nil", "queue": "pay", "priority": -1}), True)
        check("claim_next gives the bin payload back as bin (priority 5 first)",
              a.call("claim_next", claim),
              {"id": "p-bin", "fence": 1, "payload": blob, "attempts": 1})
        check("claim_next gives the str payload back as str", a.call("claim_next", claim),
              {"id": "p-str", "fence": 1, "payload": text, "attempts": 1})
        check("claim_next gives a missing payload as null", a.call("claim_next", claim),
              {"id": "p-nil", "fence": 1, "payload": None, "attempts": 1})
        check("claim_next on an empty queue is null", a.call("claim_next", claim), None)


def _all(adapters: List[Adapter], op: str, args_of: Callable[[int], Dict[str, Any]]) -> List[Reply]:
    """Sends ``op`` to every adapter before reading any reply: they race."""
    seqs = [a.send(op, args_of(i)) for i, a in enumerate(adapters)]
    wait = float(args_of(0).get("wait", 0))
    return [a.receive(seq, wait) for a, seq in zip(adapters, seqs)]


def _one_winner(replies: List[Reply], what: str) -> Tuple[List[int], List[str]]:
    """The racers whose result is not null, and the problems: any error, and
    anything but exactly one winner."""
    problems = [f"racer {i + 1}: {r!r}" for i, r in enumerate(replies) if not r.ok]
    won = [i for i, r in enumerate(replies) if r.ok and r.result is not None]
    if len(won) != 1:
        problems.append(f"{len(won)} {what} won, expected exactly 1: "
                        f"{[replies[i].result for i in won]}")
    return won, problems


def race(command: str, results: Results) -> None:
    """C3.7: 16 clients in 16 processes claim one job at once; exactly one wins."""
    check = checker(results, "race")
    with setup(command, "server", RACERS) as (_, racers):
        first = racers[0]
        check("enqueue the job", first.call("enqueue", {"id": "prize"}), True)
        replies = _all(racers, "claim",
                       lambda i: {"id": "prize", "owner": f"racer-{i + 1}", "ttl": 30})
        won, problems = _one_winner(replies, "claims")
        problems += [f"racer {i + 1} got fence {replies[i].result!r}, expected 1"
                     for i in won if replies[i].result != 1]
        if results.check(f"race: {RACERS} claims of one job, exactly one gets a fence", problems):
            check("state names the winner", first.call("state", {"id": "prize"}),
                  {"owner": f"racer-{won[0] + 1}", "fence": 1, "done": False}, subset=True)
        check("enqueue a queued job", first.call("enqueue", {"id": "queued", "queue": "race"}),
              True)
        replies = _all(racers, "claim_next",
                       lambda i: {"queue": "race", "owner": f"racer-{i + 1}", "ttl": 30})
        won, problems = _one_winner(replies, "claim_next")
        results.check(f"race: {RACERS} claim_next for one queued job, exactly one gets it",
                      problems)
        parked(command, racers, results)


def parked(command: str, racers: List[Adapter], results: Results) -> None:
    """16 claim_next parked on an empty queue, then 16 jobs: each gets its own."""
    args = {"queue": "park", "ttl": 30, "wait": 10}
    seqs = [a.send("claim_next", {**args, "owner": f"racer-{i + 1}"})
            for i, a in enumerate(racers)]
    time.sleep(0.3)
    jobs = [f"parked-{n:02d}" for n in range(len(racers))]
    feeder = Adapter(command, "feeder")
    try:
        feeder.hello()
        feeder.connect(racers[0].endpoint, 5.0)
        answers = [feeder.call("enqueue", {"id": j, "queue": "park"}) for j in jobs]
        results.check("race: enqueue 16 jobs for 16 parked claim_next",
                      [f"{j}: {r!r}" for j, r in zip(jobs, answers)
                       if not r.ok or r.result is not True])
    finally:
        feeder.close()
    replies = [a.receive(seq, 10) for a, seq in zip(racers, seqs)]
    problems = [f"racer {i + 1}: {r!r}" for i, r in enumerate(replies)
                if not (r.ok and isinstance(r.result, dict))]
    got = sorted(r.result.get("id") for r in replies if r.ok and isinstance(r.result, dict))
    if got != jobs:
        problems.append(f"the jobs handed out: {got}")
    results.check("race: 16 parked claim_next, then 16 jobs: each claim gets a job of its own",
                  problems)


def batch(command: str, results: Results) -> None:
    """C3.4 and C3.5 item by item: a batch judges each item as the single op
    would (PROTOCOL.md, "Batches"): a stale one fails alone."""
    check = checker(results, "batch")
    with setup(command, "client", 2) as (_, (w1, w2)):
        for j in ("b1", "b2", "b3"):
            check(f"enqueue {j}", w1.call("enqueue", {"id": j, "queue": "batch"}), True)
        for j, ttl in (("b1", 60), ("b2", 10), ("b3", 60)):
            check(f"worker 1 claims {j} ({ttl} s)",
                  w1.call("claim", {"id": j, "owner": "w1", "ttl": ttl, "now": 100.0}), 1)
        check("worker 2 takes b2 over once its lease ended",
              w2.call("claim", {"id": "b2", "owner": "w2", "ttl": 60, "now": 110.0}), 2)
        items = [lease(j, "w1", 1) for j in ("b1", "b2", "b3")]
        check("renew_many of worker 1's three leases: the stale b2 alone refused",
              w1.call("renew_many", {"items": items, "ttl": 60, "now": 120.0}),
              [True, False, True])
        done = [{**item, "result": f"w1 {item['id']}"} for item in items]
        check("complete_many of the three: the stale b2 alone refused",
              w1.call("complete_many", {"items": done, "now": 125.0}), [True, False, True])
        check("the stale item stored nothing (b2 still worker 2's lease)",
              w1.call("state", {"id": "b2"}), lease_state("b2", "w2", 170.0, 2, None, False))
        check("the items around it stored their results (b1)", w1.call("state", {"id": "b1"}),
              lease_state("b1", "w1", 180.0, 1, "w1 b1", True))
        check("worker 2 completes b2",
              w2.call("complete", lease("b2", "w2", 2, result="w2 b2", now=126.0)), True)
        check("the same complete_many again: every item refused (done)",
              w1.call("complete_many", {"items": done, "now": 127.0}), [False, False, False])
        check("b2 keeps worker 2's result", w1.call("state", {"id": "b2"}),
              lease_state("b2", "w2", 170.0, 2, "w2 b2", True))


def longpoll(command: str, results: Results) -> None:
    """Long-polls: the client's timeout stretches by `wait`; a job or a finish ends it early."""
    check = checker(results, "longpoll")
    with setup(command, "server", 2, timeout=0.5) as (_, (slow, other)):
        claim = {"queue": "idle", "owner": "lp", "ttl": 30}
        check("claim_next, no wait, empty queue: null at once (within the 0.5 s timeout)",
              slow.call("claim_next", claim), None)
        check("claim_next wait 1.5 under a 0.5 s timeout: null after 1.5 s, not timeout",
              slow.call("claim_next", {**claim, "wait": 1.5}), None, within=(1.4, 4.0))
        check("enqueue a job to await", other.call("enqueue", {"id": "lp-await", "queue": "lq"}),
              True)
        check("await wait 1.0 on an unfinished job: null after 1 s, not timeout",
              slow.call("await", {"id": "lp-await", "wait": 1.0}), None, within=(0.9, 3.5))
        seq = slow.send("claim_next", {"queue": "lq2", "owner": "lp", "ttl": 30, "wait": 10})
        time.sleep(0.3)
        check("another client enqueues while it waits",
              other.call("enqueue", {"id": "lp-job", "queue": "lq2", "payload": "late"}), True)
        check("the waiting claim_next gets the job, long before its wait ends",
              slow.receive(seq, 10),
              {"id": "lp-job", "fence": 1, "payload": "late", "attempts": 1}, within=(0.1, 4.0))
        seq = slow.send("await", {"id": "lp-await", "wait": 10})
        time.sleep(0.3)
        check("another client claims the awaited job",
              other.call("claim", {"id": "lp-await", "owner": "o", "ttl": 30}), 1)
        check("and completes it",
              other.call("complete", lease("lp-await", "o", 1, result="fine")), True)
        check("the waiting await answers the finished job's record", slow.receive(seq, 10),
              {"id": "lp-await", "state": "done", "result": "fine", "fence": 1}, subset=True,
              within=(0.1, 4.0))
