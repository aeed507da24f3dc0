#!/usr/bin/python3
"""Writes the shared protocol test vectors (protocol/vectors/*.json).

The suites below are the source; each JSON file holds, per step, the readable
request and reply and their msgpack bytes as hex. Run with Debian's python3:

    /usr/bin/python3 protocol/vectors/generate.py          # rewrite the files
    /usr/bin/python3 protocol/vectors/generate.py --check  # fail if they differ

How a client or the daemon is checked against a suite is in README.md here.
Every reply below was written by hand from the contract, not recorded from
the daemon.
"""
import json
import math
import struct
import sys
from pathlib import Path

import msgpack

HERE = Path(__file__).resolve().parent
# A job's max_attempts when its enqueue (or schedule) leaves it out (types.hpp).
DEFAULT_MAX_ATTEMPTS = 25


def packb(obj):
    return msgpack.packb(obj, use_bin_type=True)


def step(name, request, reply, *, subset=False, hex_reply=True, decodes=False):
    """``decodes``: an error reply to a well-formed request, refused when it is applied (no
    such job, a cron expression or time zone the daemon cannot read), not by the decoder."""
    s = {"name": name, "request": request, "request_hex": packb(request).hex(), "reply": reply}
    if hex_reply and not subset and "error" not in reply:
        s["reply_hex"] = packb(reply).hex()
    if subset:
        s["compare"] = "subset"
    if decodes:
        assert "error" in reply, name
        s["decodes"] = True
    return s


def raw(name, request_bytes, note, reply):
    """A step whose request is not a readable msgpack map (bad bytes)."""
    return {"name": name, "request_note": note, "request_hex": request_bytes.hex(), "reply": reply}


class Raw(bytes):
    """Already-encoded msgpack, placed as is by rawmap()."""


def rawmap(pairs):
    """A msgpack map from (key, value) pairs; Raw values are spliced verbatim."""
    out = bytearray([0x80 | len(pairs)])
    for k, v in pairs:
        out += packb(k)
        out += v if isinstance(v, Raw) else packb(v)
    return bytes(out)


def ok(result, rid=None):
    r = {"ok": True, "result": result}
    if rid is not None:
        r["rid"] = rid
    return r


def err(code, rid=None):
    r = {"ok": False, "error": {"code": code}}
    if rid is not None:
        r["rid"] = rid
    return r


def job(id, owner, until, fence, result, done):
    return {"id": id, "owner": owner, "until": float(until), "fence": fence, "result": result,
            "done": done}


def story():
    """C3.3-C3.5: worker A stalls, B takes the job over, A's late write is refused."""
    return [
        step("enqueue a new job", {"op": "enqueue", "id": "invoice-42", "rid": 1}, ok(True, 1)),
        step("A claims: fence 1, lease until 130", {"op": "claim", "id": "invoice-42",
             "owner": "worker-a", "ttl": 30, "now": 100.0, "rid": 2}, ok(1, 2)),
        step("B cannot claim while A's lease runs", {"op": "claim", "id": "invoice-42",
             "owner": "worker-b", "ttl": 30, "now": 129.5, "rid": 3}, ok(None, 3)),
        step("A's lease has expired (now == until): B claims, fence 2", {"op": "claim",
             "id": "invoice-42", "owner": "worker-b", "ttl": 30, "now": 130.0, "rid": 4},
             ok(2, 4)),
        step("B completes with fence 2", {"op": "complete", "id": "invoice-42",
             "owner": "worker-b", "fence": 2, "result": "paid by B", "now": 140.0, "rid": 5},
             ok(True, 5)),
        step("A wakes up: its late complete with fence 1 is refused", {"op": "complete",
             "id": "invoice-42", "owner": "worker-a", "fence": 1, "result": "paid by A",
             "now": 141.0, "rid": 6}, ok(False, 6)),
        step("the stored result is B's", {"op": "state", "id": "invoice-42", "rid": 7},
             ok(job("invoice-42", "worker-b", 160.0, 2, "paid by B", True), 7)),
    ]


def operations():
    """Every op's success and refusal cases, with the boundaries."""
    return [
        step("ping", {"op": "ping"}, ok({"protocol": 1, "clock": "client"}), subset=True),
        step("C3.2 state of a missing job is nil", {"op": "state", "id": "nope"}, ok(None)),
        step("C3.3 claim of a missing job is nil", {"op": "claim", "id": "nope", "owner": "o",
             "ttl": 5, "now": 1}, ok(None)),
        step("C3.1 enqueue", {"op": "enqueue", "id": "j"}, ok(True)),
        step("C3.1 repeated enqueue changes nothing", {"op": "enqueue", "id": "j"}, ok(False)),
        step("C3.2 fresh job has the default row", {"op": "state", "id": "j"},
             ok(job("j", None, 0.0, 0, None, False))),
        step("C3.3 claim", {"op": "claim", "id": "j", "owner": "p", "ttl": 2.5, "now": 10},
             ok(1)),
        step("C3.1 repeated enqueue during a lease keeps it", {"op": "enqueue", "id": "j"},
             ok(False)),
        step("C3.2 leased row", {"op": "state", "id": "j"},
             ok(job("j", "p", 12.5, 1, None, False))),
        step("C3.4 renew with the wrong owner", {"op": "renew", "id": "j", "owner": "q",
             "fence": 1, "ttl": 5, "now": 11}, ok(False)),
        step("C3.4 renew with the wrong fence", {"op": "renew", "id": "j", "owner": "p",
             "fence": 2, "ttl": 5, "now": 11}, ok(False)),
        step("C3.4 renew the current lease", {"op": "renew", "id": "j", "owner": "p",
             "fence": 1, "ttl": 5, "now": 11}, ok(True)),
        step("C3.2 renewed until", {"op": "state", "id": "j"},
             ok(job("j", "p", 16.0, 1, None, False))),
        step("C3.4 renew at now == until is refused", {"op": "renew", "id": "j", "owner": "p",
             "fence": 1, "ttl": 5, "now": 16}, ok(False)),
        step("C3.5 complete at now == until is refused", {"op": "complete", "id": "j",
             "owner": "p", "fence": 1, "result": "r", "now": 16}, ok(False)),
        step("C3.6 release by the expired holder still matches", {"op": "release", "id": "j",
             "owner": "p", "fence": 1}, ok(True)),
        step("C3.6 release keeps the fence", {"op": "state", "id": "j"},
             ok(job("j", None, 0.0, 1, None, False))),
        step("C3.6 a second release no longer matches the owner", {"op": "release", "id": "j",
             "owner": "p", "fence": 1}, ok(False)),
        step("C3.3 claim after release: fence 2", {"op": "claim", "id": "j", "owner": "r",
             "ttl": 10, "now": 20}, ok(2)),
        step("C3.6 release with an old fence is refused", {"op": "release", "id": "j",
             "owner": "p", "fence": 1}, ok(False)),
        step("C3.5 complete with a nil result", {"op": "complete", "id": "j", "owner": "r",
             "fence": 2, "result": None, "now": 21}, ok(True)),
        step("C3.5 done job", {"op": "state", "id": "j"}, ok(job("j", "r", 30.0, 2, None, True))),
        step("C3.5 a second complete is refused", {"op": "complete", "id": "j", "owner": "r",
             "fence": 2, "result": "again", "now": 22}, ok(False)),
        step("C3.4 renew of a done job is refused", {"op": "renew", "id": "j", "owner": "r",
             "fence": 2, "ttl": 5, "now": 22}, ok(False)),
        step("C3.6 release of a done job is refused", {"op": "release", "id": "j",
             "owner": "r", "fence": 2}, ok(False)),
        step("C3.3 claim of a done job is nil", {"op": "claim", "id": "j", "owner": "s",
             "ttl": 5, "now": 100}, ok(None)),
        step("rid str is echoed", {"op": "state", "id": "nope", "rid": "req-α"},
             ok(None, "req-α")),
        step("rid nil is echoed", {"op": "enqueue", "id": "k", "rid": None},
             {"ok": True, "result": True, "rid": None}),
        step("v 1 is accepted", {"op": "state", "id": "k", "v": 1},
             ok(job("k", None, 0.0, 0, None, False))),
        step("UTF-8 id and owner", {"op": "claim", "id": "задача-1", "owner": "wörker",
             "ttl": 1, "now": 0}, ok(None)),
    ]


def errors():
    """C4: bad input gets a coded error and changes nothing."""
    nan = Raw(struct.pack(">Bd", 0xCB, math.nan))
    inf = Raw(struct.pack(">Bd", 0xCB, math.inf))
    return [
        step("setup", {"op": "enqueue", "id": "e"}, ok(True)),
        raw("not msgpack", b"\xc1", "0xc1 is never used in msgpack", err("bad_request")),
        raw("empty payload", b"", "a zero-length frame", err("bad_request")),
        raw("truncated msgpack", packb({"op": "state", "id": "e"})[:-2],
            "a map whose last string is cut", err("bad_request")),
        raw("trailing bytes", packb({"op": "ping"}) + b"\x00", "a valid map followed by 0x00",
            err("bad_request")),
        raw("huge announced string", b"\x81\xa2op\xdb\xff\xff\xff\xf0abc",
            "str32 claiming 4 GiB with 3 bytes present", err("bad_request")),
        raw("huge announced array", b"\xdd\xff\xff\xff\xff",
            "array32 claiming 4 billion items", err("bad_request")),
        raw("huge announced map", b"\xdf\xff\xff\xff\xff", "map32 claiming 4 billion entries",
            err("bad_request")),
        step("not a map", ["op", "ping"], err("bad_request")),
        raw("non-string key", rawmap([("op", "ping"), (1, "x")]), "{op: ping, 1: x}",
            err("bad_request")),
        raw("duplicate key", rawmap([("op", "ping"), ("op", "state")]),
            "{op: ping, op: state}", err("bad_request")),
        step("missing op", {"id": "e", "rid": 9}, err("bad_request", 9)),
        step("op not a string", {"op": 3}, err("bad_request")),
        step("unknown op", {"op": "delete", "id": "e", "rid": "x"}, err("unknown_op", "x")),
        step("unsupported version", {"op": "ping", "v": 2}, err("unsupported_version")),
        step("version not an int", {"op": "ping", "v": "1"}, err("bad_request")),
        # PROTOCOL.md, "Payload": a field the op does not have is refused, not ignored (a
        # client newer than its daemon learns the daemon does not know it).
        step("a field the op does not have is refused", {"op": "state", "id": "e", "v": 1,
             "trace": [1, 2, {"x": None}], "rid": 12}, err("invalid_argument", 12)),
        step("a field an entry does not have is refused",
             {"op": "enqueue_many", "jobs": [{"id": "u1"}, {"id": "u2", "expires_at": 5}]},
             err("invalid_argument")),
        step("nothing of a refused batch was applied", {"op": "state", "id": "u1"}, ok(None)),
        step("missing id", {"op": "state"}, err("bad_request")),
        step("id of the wrong type", {"op": "state", "id": 5}, err("bad_request")),
        raw("id as bin is not a str", rawmap([("op", "state"), ("id", b"e")]),
            "{op: state, id: bin 'e'}", err("bad_request")),
        step("id over 1024 bytes", {"op": "enqueue", "id": "x" * 1025}, err("invalid_argument")),
        step("id of exactly 1024 bytes is fine", {"op": "enqueue", "id": "x" * 1024}, ok(True)),
        step("a periodic job's tick id is the schedules' alone",
             {"op": "enqueue", "id": "nightly@2026-03-27T01:30Z"}, err("invalid_argument")),
        step("an id with an @ and a date that is not a tick's is fine",
             {"op": "enqueue", "id": "ann@2026-03-27"}, ok(True)),
        step("owner over 1024 bytes", {"op": "claim", "id": "e", "owner": "o" * 1025, "ttl": 1,
             "now": 0}, err("invalid_argument")),
        raw("id not UTF-8", packb({"op": "enqueue", "id": "AB"}).replace(b"AB", b"\xff\xfe"),
            "id bytes ff fe", err("invalid_argument")),
        step("C3.3 ttl 0", {"op": "claim", "id": "e", "owner": "o", "ttl": 0, "now": 0},
             err("invalid_argument")),
        step("C3.3 ttl negative", {"op": "claim", "id": "e", "owner": "o", "ttl": -1.5,
             "now": 0}, err("invalid_argument")),
        step("C3.4 ttl 0 on renew", {"op": "renew", "id": "e", "owner": "o", "fence": 1,
             "ttl": 0, "now": 0}, err("invalid_argument")),
        step("ttl a string", {"op": "claim", "id": "e", "owner": "o", "ttl": "5", "now": 0},
             err("bad_request")),
        raw("ttl NaN", rawmap([("op", "claim"), ("id", "e"), ("owner", "o"), ("ttl", nan),
                               ("now", 0)]),
            "claim with ttl = float64 NaN", err("invalid_argument")),
        raw("now infinite", rawmap([("op", "claim"), ("id", "e"), ("owner", "o"), ("ttl", 1),
                                    ("now", inf)]),
            "claim with now = float64 +inf", err("invalid_argument")),
        step("C2.2 now missing in client clock mode", {"op": "claim", "id": "e", "owner": "o",
             "ttl": 1}, err("invalid_argument")),
        step("fence as float", {"op": "release", "id": "e", "owner": "o", "fence": 1.0},
             err("bad_request")),
        step("fence above int64", {"op": "release", "id": "e", "owner": "o",
             "fence": 2**64 - 1}, err("invalid_argument")),
        step("complete without the result key", {"op": "complete", "id": "e", "owner": "o",
             "fence": 1, "now": 0}, err("bad_request")),
        step("rid of a bad type", {"op": "ping", "rid": [1]}, err("bad_request")),
        step("C3.8 nothing above changed the job", {"op": "state", "id": "e"},
             ok(job("e", None, 0.0, 0, None, False))),
    ]


def server_clock():
    """C2.3: the daemon's own clock; a request carrying `now` is refused."""
    return [
        step("ping says server", {"op": "ping"}, ok({"protocol": 1, "clock": "server"}),
             subset=True),
        step("enqueue", {"op": "enqueue", "id": "s"}, ok(True)),
        step("C2.3 claim with now is refused", {"op": "claim", "id": "s", "owner": "o",
             "ttl": 30, "now": 5}, err("invalid_argument")),
        step("C2.3 any request with now is refused", {"op": "state", "id": "s", "now": 5},
             err("invalid_argument")),
        step("claim without now", {"op": "claim", "id": "s", "owner": "o", "ttl": 30}, ok(1)),
        step("leased by o, fence 1", {"op": "state", "id": "s"},
             ok({"id": "s", "owner": "o", "fence": 1, "done": False}), subset=True),
        step("complete without now", {"op": "complete", "id": "s", "owner": "o", "fence": 1,
             "result": "ok"}, ok(True)),
    ]


def queue():
    """The work queue: queues, payloads, priorities, delays, fail/retry, dead jobs, check, list,
    purge (all additive to protocol v1; every write still checks owner + fence + lease)."""
    def info(id, queue, state, priority, attempts, max_attempts, fence, owner, until,
             not_before, error, created):
        return {"id": id, "queue": queue, "state": state, "priority": priority,
                "attempts": attempts, "max_attempts": max_attempts, "fence": fence,
                "owner": owner, "until": float(until), "not_before": float(not_before),
                "error": error, "created": float(created)}
    return [
        step("enqueue low priority", {"op": "enqueue", "id": "q1", "queue": "img",
             "payload": "small.png", "priority": 1, "now": 10.0}, ok(True)),
        step("enqueue high priority", {"op": "enqueue", "id": "q2", "queue": "img",
             "payload": "big.png", "priority": 7, "now": 11.0}, ok(True)),
        step("enqueue delayed, 2 attempts", {"op": "enqueue", "id": "q3", "queue": "img",
             "delay": 100, "max_attempts": 2, "now": 12.0}, ok(True)),
        step("repeated enqueue changes nothing", {"op": "enqueue", "id": "q1", "queue": "x",
             "priority": 99}, ok(False)),
        step("claim_next: highest priority first", {"op": "claim_next", "queue": "img",
             "owner": "w", "ttl": 30, "now": 20.0},
             ok({"id": "q2", "fence": 1, "payload": "big.png", "attempts": 1})),
        step("claim_next: then the next", {"op": "claim_next", "queue": "img", "owner": "w",
             "ttl": 30, "now": 20.0},
             ok({"id": "q1", "fence": 1, "payload": "small.png", "attempts": 1})),
        step("claim_next: both leased, the delayed job not due: nil", {"op": "claim_next",
             "queue": "img", "owner": "w", "ttl": 30, "now": 21.0}, ok(None)),
        step("claim_next on another queue", {"op": "claim_next", "queue": "none", "owner": "w",
             "ttl": 30, "now": 21.0}, ok(None)),
        step("check the current lease", {"op": "check", "id": "q1", "owner": "w", "fence": 1,
             "now": 21.0}, ok(True)),
        step("check a wrong fence", {"op": "check", "id": "q1", "owner": "w", "fence": 2,
             "now": 21.0}, ok(False)),
        step("fail with a stale fence is refused", {"op": "fail", "id": "q1", "owner": "w",
             "fence": 0, "error": "x", "now": 22.0}, ok(False)),
        step("fail the current lease, retry in 5 s", {"op": "fail", "id": "q1", "owner": "w",
             "fence": 1, "error": "timeout talking to S3", "retry_in": 5, "now": 22.0},
             ok(True)),
        step("the failed job waits for its retry", {"op": "list", "queue": "img",
             "state": "delayed"},
             ok([info("q1", "img", "delayed", 1, 1, DEFAULT_MAX_ATTEMPTS, 1, None, 0, 27.0,
                      "timeout talking to S3", 10.0),
                 info("q3", "img", "delayed", 0, 0, 2, 0, None, 0, 112.0, None, 12.0)])),
        step("the delay ended: claimed again, fence 2", {"op": "claim_next", "queue": "img",
             "owner": "v", "ttl": 30, "now": 27.0},
             ok({"id": "q1", "fence": 2, "payload": "small.png", "attempts": 2})),
        step("complete q2", {"op": "complete", "id": "q2", "owner": "w", "fence": 1,
             "result": "ok", "now": 28.0}, ok(True)),
        step("check at now == until: expired", {"op": "check", "id": "q1", "owner": "v",
             "fence": 2, "now": 57.0}, ok(False)),
        step("the old owner's fail is refused", {"op": "fail", "id": "q1", "owner": "w",
             "fence": 1, "error": "late", "now": 57.0}, ok(False)),
        step("q1 claimed again after its lease ended", {"op": "claim", "id": "q1",
             "owner": "v", "ttl": 30, "now": 57.0}, ok(3)),
        step("complete q1", {"op": "complete", "id": "q1", "owner": "v", "fence": 3,
             "result": "ok", "now": 60.0}, ok(True)),
        step("q3 first attempt", {"op": "claim", "id": "q3", "owner": "w", "ttl": 10,
             "now": 112.0}, ok(1)),
        step("q3 fails", {"op": "fail", "id": "q3", "owner": "w", "fence": 1, "error": "e1",
             "retry_in": 0, "now": 113.0}, ok(True)),
        step("q3 second and last attempt", {"op": "claim_next", "queue": "img", "owner": "w",
             "ttl": 10, "now": 113.0},
             ok({"id": "q3", "fence": 2, "payload": None, "attempts": 2})),
        step("q3 fails again: dead", {"op": "fail", "id": "q3", "owner": "w", "fence": 2,
             "error": "e2", "now": 114.0}, ok(True)),
        step("a dead job cannot be claimed", {"op": "claim", "id": "q3", "owner": "w",
             "ttl": 10, "now": 200.0}, ok(None)),
        step("list dead jobs", {"op": "list", "state": "dead", "limit": 10},
             ok([info("q3", "img", "dead", 0, 2, 2, 2, None, 0, 114.0 + 2.0, "e2", 12.0)])),
        step("retry a job that is not dead", {"op": "retry", "id": "q2"}, ok(False)),
        step("retry the dead job", {"op": "retry", "id": "q3"}, ok(True)),
        step("revived: claimable with the next fence", {"op": "claim", "id": "q3", "owner": "w",
             "ttl": 10, "now": 200.0}, ok(3)),
        # totals: since the daemon started. Claimed: q2, q1, q1 again, q1 over
        # v's expired lease (at 57), q3 three times; failed: q1, q3, q3 (dead);
        # retried: the two fails with an attempt left and the retry of q3;
        # refused: the fail with fence 0 and the old owner's fail.
        step("stats per queue", {"op": "stats"},
             ok({"queues": {"img": {"ready": 0, "delayed": 0, "leased": 1, "done": 2,
                                    "dead": 0,
                                    "totals": {"claimed": 7, "completed": 2, "failed": 3,
                                               "retried": 3, "dead": 1, "expired": 1,
                                               "refused": {"renew": 0, "complete": 0,
                                                           "release": 0, "fail": 2}}}}}),
             subset=True),
        step("purge what finished 150 s before now 200: q2 (at 28), not q1 (at 60)",
             {"op": "purge", "older_than": 150, "now": 200.0}, ok(1)),
        step("purged", {"op": "state", "id": "q2"}, ok(None)),
        step("a purged id comes back", {"op": "enqueue", "id": "q2"}, ok(True)),
        step("with its fence: it never goes back (C1.2)", {"op": "state", "id": "q2"},
             ok(job("q2", None, 0.0, 1, None, False))),
        step("enqueue two for complete_next", {"op": "enqueue", "id": "c1", "queue": "cn",
             "payload": "p1"}, ok(True)),
        step("enqueue the second", {"op": "enqueue", "id": "c2", "queue": "cn"}, ok(True)),
        step("claim c1", {"op": "claim_next", "queue": "cn", "owner": "w", "ttl": 10,
             "now": 300.0}, ok({"id": "c1", "fence": 1, "payload": "p1", "attempts": 1})),
        step("complete_next: completes c1 and claims c2 in one round trip",
             {"op": "complete_next", "id": "c1", "owner": "w", "fence": 1, "result": "r1",
              "queue": "cn", "ttl": 10, "now": 301.0},
             ok({"completed": True, "next": {"id": "c2", "fence": 1, "payload": None,
                                             "attempts": 1}})),
        step("complete_next: a stale fence is refused; nothing left to claim",
             {"op": "complete_next", "id": "c1", "owner": "w", "fence": 1, "result": "again",
              "queue": "cn", "ttl": 10, "now": 302.0},
             ok({"completed": False, "next": None})),
        step("claim_next needs a queue", {"op": "claim_next", "owner": "w", "ttl": 5,
             "now": 1}, err("bad_request")),
        step("wait over an hour", {"op": "claim_next", "queue": "img", "owner": "w", "ttl": 5,
             "wait": 3601, "now": 1}, err("invalid_argument")),
        step("priority must be an int", {"op": "enqueue", "id": "p", "priority": 1.5},
             err("bad_request")),
        step("negative delay", {"op": "enqueue", "id": "p", "delay": -1}, err("invalid_argument")),
        step("empty queue name", {"op": "enqueue", "id": "p", "queue": ""},
             err("invalid_argument")),
        step("unknown state filter", {"op": "list", "state": "sleeping"},
             err("invalid_argument")),
        step("purge needs older_than", {"op": "purge"}, err("bad_request")),
        step("fail needs an error text", {"op": "fail", "id": "q1", "owner": "v", "fence": 2,
             "now": 27.0}, err("bad_request")),
        step("nothing above created p", {"op": "state", "id": "p"}, ok(None)),
    ]


def batches():
    """Batches: enqueue_many, claim_next with max, complete_many (with next), renew_many. Each job
    of a batch is judged on its own, exactly as the single op would judge it (C3.3-C3.5): a stale
    job fails alone. A bad entry refuses the whole request, naming its index, and applies nothing
    (C3.8)."""
    def claimed(id, fence, payload=None, attempts=1):
        return {"id": id, "fence": fence, "payload": payload, "attempts": attempts}
    return [
        step("enqueue one", {"op": "enqueue", "id": "b0", "queue": "bq", "now": 1.0}, ok(True)),
        step("enqueue_many: created or already there, in input order",
             {"op": "enqueue_many", "jobs": [
                 {"id": "b1", "queue": "bq"},
                 {"id": "b2", "queue": "bq", "payload": "hi", "priority": 5},
                 {"id": "b0", "queue": "elsewhere"}], "now": 2.0, "rid": 1},
             ok([True, True, False], 1)),
        step("claim_next with max: the most urgent first, each with its own fence",
             {"op": "claim_next", "queue": "bq", "owner": "w", "ttl": 30, "max": 2, "now": 10.0},
             ok([claimed("b2", 1, "hi"), claimed("b0", 1)])),
        step("claim_next with max 1 still answers an array",
             {"op": "claim_next", "queue": "bq", "owner": "w", "ttl": 30, "max": 1, "now": 10.0},
             ok([claimed("b1", 1)])),
        step("claim_next with max on an empty queue: an empty array",
             {"op": "claim_next", "queue": "bq", "owner": "w", "ttl": 30, "max": 5, "now": 10.0},
             ok([])),
        step("renew_many: each judged alone; a stale fence fails alone",
             {"op": "renew_many", "items": [
                 {"id": "b2", "owner": "w", "fence": 1},
                 {"id": "b0", "owner": "w", "fence": 0},
                 {"id": "b1", "owner": "w", "fence": 1}], "ttl": 60, "now": 20.0},
             ok([True, False, True])),
        step("complete_many: a stale job fails alone, the others are stored",
             {"op": "complete_many", "items": [
                 {"id": "b2", "owner": "w", "fence": 1, "result": "r2"},
                 {"id": "b0", "owner": "intruder", "fence": 1, "result": "late"},
                 {"id": "b0", "owner": "w", "fence": 1, "result": None}], "now": 21.0},
             ok([True, False, True])),
        step("the stale complete stored nothing", {"op": "state", "id": "b0"},
             ok(job("b0", "w", 40.0, 1, None, True))),
        step("completing the same lease twice: the second is false",
             {"op": "complete_many", "items": [
                 {"id": "b2", "owner": "w", "fence": 1, "result": "again"}], "now": 22.0},
             ok([False])),
        step("enqueue two more", {"op": "enqueue_many", "jobs": [
             {"id": "b3", "queue": "bq"}, {"id": "b4", "queue": "bq"}], "now": 23.0},
             ok([True, True])),
        step("complete_many with next: the completes, then up to max jobs claimed",
             {"op": "complete_many", "items": [
                 {"id": "b1", "owner": "w", "fence": 1, "result": "r1"}],
              "next": {"queue": "bq", "ttl": 30, "max": 5}, "now": 24.0},
             ok({"completed": [True], "next": [claimed("b3", 1), claimed("b4", 1)]})),
        step("complete_many with next on an empty queue",
             {"op": "complete_many", "items": [
                 {"id": "b3", "owner": "w", "fence": 1, "result": None}],
              "next": {"queue": "bq", "ttl": 30, "max": 5}, "now": 25.0},
             ok({"completed": [True], "next": []})),
        step("a bad entry refuses the whole batch", {"op": "enqueue_many", "jobs": [
             {"id": "never-1"}, {"id": "never-2", "priority": 1.5}], "rid": 2},
             err("bad_request", 2)),
        step("and nothing of it was applied", {"op": "state", "id": "never-1"}, ok(None)),
        step("an empty batch", {"op": "enqueue_many", "jobs": []}, err("invalid_argument")),
        step("a batch over 1000 jobs", {"op": "enqueue_many",
             "jobs": [{"id": "x%d" % i} for i in range(1001)]}, err("invalid_argument")),
        step("an entry that is not a map", {"op": "enqueue_many", "jobs": ["x"]},
             err("bad_request")),
        step("an item without its fence", {"op": "complete_many", "items": [
             {"id": "b4", "owner": "w", "result": None}], "now": 26.0}, err("bad_request")),
        step("renew_many needs a ttl", {"op": "renew_many", "items": [
             {"id": "b4", "owner": "w", "fence": 1}], "now": 26.0}, err("bad_request")),
        step("max 0", {"op": "claim_next", "queue": "bq", "owner": "w", "ttl": 30, "max": 0,
             "now": 26.0}, err("invalid_argument")),
        step("max over 1000", {"op": "claim_next", "queue": "bq", "owner": "w", "ttl": 30,
             "max": 1001, "now": 26.0}, err("invalid_argument")),
        step("next's max 0", {"op": "complete_many", "items": [
             {"id": "b4", "owner": "w", "fence": 1, "result": None}],
             "next": {"queue": "bq", "ttl": 30, "max": 0}, "now": 26.0},
             err("invalid_argument")),
        step("b4 is still leased: nothing above applied", {"op": "check", "id": "b4",
             "owner": "w", "fence": 1, "now": 26.0}, ok(True)),
    ]


def control():
    """Queue control (additive to protocol v1): the fenced cancel. A cancelled job is
    final (state `cancelled`), its fence went up by one, so its holder's renew, complete, fail
    and check are refused; `retry` revives it with a higher fence. Progress: renew and
    renew_many items may carry `progress`, kept with the lease and shown by state and list (the
    key only when set)."""
    def info(id, state, attempts, fence, owner, until, created, error=None):
        return {"id": id, "queue": "ctl", "state": state, "priority": 0, "attempts": attempts,
                "max_attempts": DEFAULT_MAX_ATTEMPTS, "fence": fence, "owner": owner, "until": float(until),
                "not_before": 0.0, "error": error, "created": float(created)}
    return [
        step("enqueue", {"op": "enqueue", "id": "k1", "queue": "ctl", "now": 10.0}, ok(True)),
        step("a worker claims it: fence 1", {"op": "claim_next", "queue": "ctl", "owner": "w",
             "ttl": 100, "now": 10.0},
             ok({"id": "k1", "fence": 1, "payload": None, "attempts": 1})),
        step("cancel while it is held", {"op": "cancel", "id": "k1", "now": 11.0}, ok(True)),
        step("a second cancel: already cancelled", {"op": "cancel", "id": "k1"}, ok(False)),
        step("the holder's renew is refused", {"op": "renew", "id": "k1", "owner": "w",
             "fence": 1, "ttl": 100, "now": 12.0}, ok(False)),
        step("its check too", {"op": "check", "id": "k1", "owner": "w", "fence": 1,
             "now": 12.0}, ok(False)),
        step("its complete too", {"op": "complete", "id": "k1", "owner": "w", "fence": 1,
             "result": "late", "now": 12.0}, ok(False)),
        step("its fail too", {"op": "fail", "id": "k1", "owner": "w", "fence": 1,
             "error": "late", "now": 12.0}, ok(False)),
        step("the fence went up, no lease, no result", {"op": "state", "id": "k1"},
             ok(job("k1", None, 0.0, 2, None, False))),
        step("listed as cancelled", {"op": "list", "state": "cancelled"},
             ok([info("k1", "cancelled", 1, 2, None, 0, 10.0)])),
        step("never claimed again", {"op": "claim_next", "queue": "ctl", "owner": "v",
             "ttl": 10, "now": 500.0}, ok(None)),
        step("counted per queue", {"op": "stats"},
             ok({"queues": {"ctl": {"ready": 0, "delayed": 0, "leased": 0, "done": 0,
                                    "dead": 0, "cancelled": 1}}}), subset=True),
        step("retry revives it", {"op": "retry", "id": "k1"}, ok(True)),
        step("claimed with a higher fence", {"op": "claim", "id": "k1", "owner": "v",
             "ttl": 10, "now": 500.0}, ok(3)),
        step("completed by the new holder", {"op": "complete", "id": "k1", "owner": "v",
             "fence": 3, "result": "ok", "now": 501.0}, ok(True)),
        step("a done job cannot be cancelled", {"op": "cancel", "id": "k1"}, ok(False)),
        step("a missing job cannot be cancelled", {"op": "cancel", "id": "nope"}, ok(False)),
        step("cancel needs an id", {"op": "cancel"}, err("bad_request")),
        step("the id must be a str", {"op": "cancel", "id": 5}, err("bad_request")),
        step("an id over 1024 bytes", {"op": "cancel", "id": "x" * 1025},
             err("invalid_argument")),
        step("the bad requests changed nothing", {"op": "state", "id": "k1"},
             ok(job("k1", "v", 510.0, 3, "ok", True))),
        # progress: kept with the lease by renew; state and list show the key only when set.
        step("enqueue p1", {"op": "enqueue", "id": "p1", "queue": "ctl", "now": 600.0}, ok(True)),
        step("claim p1", {"op": "claim", "id": "p1", "owner": "w", "ttl": 10, "now": 600.0},
             ok(1)),
        step("renew with progress", {"op": "renew", "id": "p1", "owner": "w", "fence": 1,
             "ttl": 10, "progress": "2/5", "now": 601.0}, ok(True)),
        step("a stale renew's progress is not stored", {"op": "renew", "id": "p1", "owner": "w",
             "fence": 0, "ttl": 10, "progress": "stale", "now": 602.0}, ok(False)),
        step("state shows it", {"op": "state", "id": "p1"},
             ok(dict(job("p1", "w", 611.0, 1, None, False), progress="2/5"))),
        step("list shows it", {"op": "list", "queue": "ctl", "state": "leased"},
             ok([dict(info("p1", "leased", 1, 1, "w", 611.0, 600.0), progress="2/5")])),
        step("renew_many items carry their own", {"op": "renew_many", "items": [
             {"id": "p1", "owner": "w", "fence": 1, "progress": "3/5"}], "ttl": 10,
             "now": 603.0}, ok([True])),
        step("state shows the latest", {"op": "state", "id": "p1"},
             ok(dict(job("p1", "w", 613.0, 1, None, False), progress="3/5"))),
        step("progress over 4 KiB", {"op": "renew", "id": "p1", "owner": "w", "fence": 1,
             "ttl": 10, "progress": "x" * 4097, "now": 604.0}, err("invalid_argument")),
        step("progress must be a str", {"op": "renew", "id": "p1", "owner": "w", "fence": 1,
             "ttl": 10, "progress": 7, "now": 604.0}, err("bad_request")),
        step("nothing changed", {"op": "state", "id": "p1"},
             ok(dict(job("p1", "w", 613.0, 1, None, False), progress="3/5"))),
        # job: one job's whole record, its list row with its result and payload.
        step("job: p1's whole record", {"op": "job", "id": "p1", "now": 604.0},
             ok(dict(info("p1", "leased", 1, 1, "w", 613.0, 600.0), progress="3/5", result=None,
                     payload=None))),
        step("enqueue d1 with a payload", {"op": "enqueue", "id": "d1", "queue": "ctl",
             "payload": "photo.jpg", "now": 700.0}, ok(True)),
        step("claim d1", {"op": "claim", "id": "d1", "owner": "w", "ttl": 10, "now": 700.0},
             ok(1)),
        step("complete d1", {"op": "complete", "id": "d1", "owner": "w", "fence": 1,
             "result": "thumbnail", "now": 701.0}, ok(True)),
        step("job: d1 with its result and payload", {"op": "job", "id": "d1", "now": 702.0},
             ok(dict(info("d1", "done", 1, 1, "w", 710.0, 700.0), result="thumbnail",
                     payload="photo.jpg"))),
        step("job: a missing id", {"op": "job", "id": "nope", "now": 702.0}, ok(None)),
        step("job needs an id", {"op": "job"}, err("bad_request")),
    ]


def policy():
    """Queue settings, await and periodic jobs (additive to protocol v1).
    queue_config {queue, paused?, max_leased?, rate?, per?} -> true: a setting left out keeps
    its value; stats shows paused/max_leased/rate/per only for a queue with settings; a paused
    queue hands out nothing (claim_next nor claim), max_leased bounds its leased jobs. await
    {id, wait?} -> the job's record (as `job`) once it is done, dead or cancelled, nil while it
    is not when the wait passes (wait 0: at once), invalid_argument for an unknown id.
    schedule_set {name, cron, tz?, queue?, payload?, priority?, max_attempts?} -> true
    (replaces one of that name), schedule_list -> every schedule by name with its next tick
    (float Unix seconds) and last tick (nil: none yet), schedule_delete {name} -> bool. The
    client clock stays below the schedules' first ticks, so none is enqueued here."""
    def detail(id, state, attempts, fence, owner, until, result, payload, created, queue="pol"):
        return {"id": id, "queue": queue, "state": state, "priority": 0, "attempts": attempts,
                "max_attempts": DEFAULT_MAX_ATTEMPTS, "fence": fence, "owner": owner, "until": float(until),
                "not_before": 0.0, "error": None, "created": float(created), "result": result,
                "payload": payload}

    def schedule(name, cron, tz, queue, payload, priority, max_attempts, next, last=None):
        return {"name": name, "cron": cron, "tz": tz, "queue": queue, "payload": payload,
                "priority": priority, "max_attempts": max_attempts, "next": float(next),
                "last": last}

    def limits(paused, max_leased, rate, per, **counts):
        return ok({"queues": {"pol": {"paused": paused, "max_leased": max_leased, "rate": rate,
                                      "per": float(per), **counts}}})

    hourly = schedule("hourly", "@hourly", "UTC", "default", None, 0, DEFAULT_MAX_ATTEMPTS, 3600)
    return [
        # queue_config: pause, max_leased, rate.
        step("enqueue q1", {"op": "enqueue", "id": "q1", "queue": "pol", "now": 100.0}, ok(True)),
        step("enqueue q2", {"op": "enqueue", "id": "q2", "queue": "pol", "now": 100.0}, ok(True)),
        step("no settings yet: stats has none of their keys (subset: the counts)", {"op": "stats"},
             ok({"queues": {"pol": {"ready": 2, "leased": 0}}}), subset=True),
        step("pause the queue", {"op": "queue_config", "queue": "pol", "paused": True, "rid": 1},
             ok(True, 1)),
        step("stats shows the settings, the others at their defaults", {"op": "stats"},
             limits(True, 0, 0, 1, ready=2), subset=True),
        step("paused: claim_next hands out nothing", {"op": "claim_next", "queue": "pol",
             "owner": "w", "ttl": 10, "now": 100.0}, ok(None)),
        step("paused: nor does a claim by id", {"op": "claim", "id": "q1", "owner": "w",
             "ttl": 10, "now": 100.0}, ok(None)),
        step("resume with a limit of one leased job", {"op": "queue_config", "queue": "pol",
             "paused": False, "max_leased": 1}, ok(True)),
        step("stats: resumed, max_leased 1", {"op": "stats"}, limits(False, 1, 0, 1, ready=2),
             subset=True),
        step("the first claim", {"op": "claim_next", "queue": "pol", "owner": "w", "ttl": 10,
             "now": 100.0}, ok({"id": "q1", "fence": 1, "payload": None, "attempts": 1})),
        step("max_leased reached: no second claim", {"op": "claim_next", "queue": "pol",
             "owner": "w", "ttl": 10, "now": 100.0}, ok(None)),
        step("complete q1", {"op": "complete", "id": "q1", "owner": "w", "fence": 1,
             "result": "r1", "now": 101.0}, ok(True)),
        step("a lease ended: the next claim", {"op": "claim_next", "queue": "pol", "owner": "w",
             "ttl": 10, "now": 101.0},
             ok({"id": "q2", "fence": 1, "payload": None, "attempts": 1})),
        step("a rate of 5 per 60 s; max_leased left out keeps its value", {"op": "queue_config",
             "queue": "pol", "rate": 5, "per": 60}, ok(True)),
        step("stats: max_leased 1, rate 5 per 60.0", {"op": "stats"},
             limits(False, 1, 5, 60, leased=1, done=1), subset=True),
        step("queue_config needs a queue", {"op": "queue_config", "paused": True},
             err("bad_request")),
        step("an empty queue", {"op": "queue_config", "queue": ""}, err("invalid_argument")),
        step("paused must be a bool", {"op": "queue_config", "queue": "pol", "paused": 1},
             err("bad_request")),
        step("max_leased below 0", {"op": "queue_config", "queue": "pol", "max_leased": -1},
             err("invalid_argument")),
        step("max_leased must be an int", {"op": "queue_config", "queue": "pol",
             "max_leased": 1.5}, err("bad_request")),
        step("max_leased over 10^9", {"op": "queue_config", "queue": "pol",
             "max_leased": 1000000001}, err("invalid_argument")),
        step("rate over 100000", {"op": "queue_config", "queue": "pol", "rate": 100001},
             err("invalid_argument")),
        step("per 0", {"op": "queue_config", "queue": "pol", "rate": 5, "per": 0},
             err("invalid_argument")),
        step("per over a day", {"op": "queue_config", "queue": "pol", "per": 86401},
             err("invalid_argument")),
        step("per must be a number", {"op": "queue_config", "queue": "pol", "per": "1"},
             err("bad_request")),
        step("the refusals changed nothing", {"op": "stats"},
             limits(False, 1, 5, 60, leased=1, done=1), subset=True),
        step("back to the defaults: the settings go", {"op": "queue_config", "queue": "pol",
             "max_leased": 0, "rate": 0, "per": 1}, ok(True)),
        # await: the job's record once it is finished.
        step("await a done job: its record at once", {"op": "await", "id": "q1", "wait": 0,
             "rid": 2}, ok(detail("q1", "done", 1, 1, "w", 110.0, "r1", None, 100.0), 2)),
        step("a wait does not hold a job that is finished already", {"op": "await", "id": "q1",
             "wait": 5}, ok(detail("q1", "done", 1, 1, "w", 110.0, "r1", None, 100.0))),
        step("await a leased job with wait 0: nil", {"op": "await", "id": "q2", "wait": 0},
             ok(None)),
        step("wait left out is 0", {"op": "await", "id": "q2"}, ok(None)),
        step("enqueue q3 with a payload", {"op": "enqueue", "id": "q3", "queue": "pol",
             "payload": "img", "now": 102.0}, ok(True)),
        step("cancel q3", {"op": "cancel", "id": "q3", "now": 102.0}, ok(True)),
        step("await a cancelled job: its record, with its payload", {"op": "await", "id": "q3",
             "wait": 0}, ok(detail("q3", "cancelled", 0, 1, None, 0, None, "img", 102.0))),
        step("await an unknown id", {"op": "await", "id": "nope", "wait": 0, "rid": 3},
             err("invalid_argument", 3), decodes=True),
        step("await needs an id", {"op": "await", "wait": 0}, err("bad_request")),
        step("wait below 0", {"op": "await", "id": "q2", "wait": -1}, err("invalid_argument")),
        step("wait over 3600", {"op": "await", "id": "q2", "wait": 3601},
             err("invalid_argument")),
        step("wait must be a number", {"op": "await", "id": "q2", "wait": "1"},
             err("bad_request")),
        # enqueue_and_wait: enqueue, then await, in one request.
        step("enqueue_and_wait a job that is done already: its record at once",
             {"op": "enqueue_and_wait", "id": "q1", "queue": "pol", "wait": 5, "rid": 4},
             ok(detail("q1", "done", 1, 1, "w", 110.0, "r1", None, 100.0), 4)),
        step("enqueue_and_wait a new job with wait 0: nil, and the job is there",
             {"op": "enqueue_and_wait", "id": "q4", "queue": "pol", "now": 103.0}, ok(None)),
        step("q4 was enqueued", {"op": "enqueue", "id": "q4", "queue": "pol", "now": 103.0},
             ok(False)),
        step("enqueue_and_wait refuses a tick's id as enqueue does",
             {"op": "enqueue_and_wait", "id": "nightly@2026-03-27T01:30Z"},
             err("invalid_argument")),
        step("enqueue_and_wait: wait over 3600",
             {"op": "enqueue_and_wait", "id": "q5", "wait": 3601}, err("invalid_argument")),
        step("enqueue_and_wait needs an id", {"op": "enqueue_and_wait", "wait": 0},
             err("bad_request")),
        step("nothing refused was enqueued", {"op": "state", "id": "q5"}, ok(None)),
        # Periodic jobs.
        step("no schedules", {"op": "schedule_list"}, ok([])),
        step("a daily job at 12:00 in Berlin", {"op": "schedule_set", "name": "nightly",
             "cron": "0 12 * * *", "tz": "Europe/Berlin", "queue": "reports", "payload": "p",
             "priority": 2, "max_attempts": 3, "now": 1000.0}, ok(True)),
        step("an hourly job, every default", {"op": "schedule_set", "name": "hourly",
             "cron": "@hourly", "now": 1000.0}, ok(True)),
        step("listed by name; next: 1970-01-01 11:00 UTC is 12:00 CET", {"op": "schedule_list",
             "now": 1000.0, "rid": 4},
             ok([hourly, schedule("nightly", "0 12 * * *", "Europe/Berlin", "reports", "p", 2, 3,
                                  39600)], 4)),
        step("set again: replaced (Mondays 06:30 UTC, the defaults)", {"op": "schedule_set",
             "name": "nightly", "cron": "30 6 * * 1", "now": 1000.0}, ok(True)),
        step("the replaced schedule; 1970-01-05 was the first Monday", {"op": "schedule_list",
             "now": 1000.0},
             ok([hourly, schedule("nightly", "30 6 * * 1", "UTC", "default", None, 0, DEFAULT_MAX_ATTEMPTS,
                                  369000)])),
        step("a minute out of range: invalid_argument", {"op": "schedule_set", "name": "bad",
             "cron": "61 * * * *"}, err("invalid_argument"), decodes=True),
        step("four fields", {"op": "schedule_set", "name": "bad", "cron": "* * * *"},
             err("invalid_argument"), decodes=True),
        step("@reboot is not a time", {"op": "schedule_set", "name": "bad", "cron": "@reboot"},
             err("invalid_argument"), decodes=True),
        step("an unknown time zone", {"op": "schedule_set", "name": "bad", "cron": "* * * * *",
             "tz": "Mars/Base"}, err("invalid_argument"), decodes=True),
        step("an empty name", {"op": "schedule_set", "name": "", "cron": "* * * * *"},
             err("invalid_argument")),
        step("a name over 200 bytes", {"op": "schedule_set", "name": "n" * 201,
             "cron": "* * * * *"}, err("invalid_argument")),
        step("a cron over 256 bytes", {"op": "schedule_set", "name": "bad", "cron": "*" * 257},
             err("invalid_argument")),
        step("an empty queue", {"op": "schedule_set", "name": "bad", "cron": "* * * * *",
             "queue": ""}, err("invalid_argument")),
        step("schedule_set needs a cron", {"op": "schedule_set", "name": "bad"},
             err("bad_request")),
        step("the cron must be a str", {"op": "schedule_set", "name": "bad", "cron": 5},
             err("bad_request")),
        step("the priority must be an int", {"op": "schedule_set", "name": "bad",
             "cron": "* * * * *", "priority": "high"}, err("bad_request")),
        step("delete nightly", {"op": "schedule_delete", "name": "nightly"}, ok(True)),
        step("delete it again: false", {"op": "schedule_delete", "name": "nightly"}, ok(False)),
        step("schedule_delete needs a name", {"op": "schedule_delete"}, err("bad_request")),
        step("the name must be a str", {"op": "schedule_delete", "name": 3}, err("bad_request")),
        step("what is left", {"op": "schedule_list", "now": 1000.0}, ok([hourly])),
    ]


def listing():
    """Listing jobs (additive to protocol v1). Every list row (and `job`'s answer)
    carries `created`, when the job was enqueued (Unix seconds). list {order?, after_created?,
    prefix?}: order "id" (the default), "created" (oldest first) or "-created" (newest first),
    ties by id (in the same direction); in created order the cursor is the last row's `after`
    (id) with its `after_created` (created), both or neither; prefix: only ids that start with
    it, in any order."""
    def row(id, created, queue="age"):
        return {"id": id, "queue": queue, "state": "ready", "priority": 0, "attempts": 0,
                "max_attempts": DEFAULT_MAX_ATTEMPTS, "fence": 0, "owner": None, "until": 0.0, "not_before": 0.0,
                "error": None, "created": float(created)}
    nan = Raw(struct.pack(">Bd", 0xCB, math.nan))
    a3, a1, a2, b2 = row("a-3", 800.0), row("a-1", 801.0), row("a-2", 802.0), row("b-2", 802.0)

    def lst(**fields):
        return dict({"op": "list", "queue": "age"}, **fields)

    def enqueue(name, id, now, queue="age"):
        return step(name, {"op": "enqueue", "id": id, "queue": queue, "now": now}, ok(True))
    u1, u2, u3 = (row("\u00fc", 900.0, "uni"), row("\u00fcber", 901.0, "uni"),
                  row("\u00fc\U0010ffff", 902.0, "uni"))
    return [
        enqueue("enqueue a-3", "a-3", 800.0),
        enqueue("enqueue a-1", "a-1", 801.0),
        enqueue("enqueue b-2", "b-2", 802.0),
        enqueue("enqueue a-2 at the same time", "a-2", 802.0),
        step("by id, each row with its created", lst(), ok([a1, a2, a3, b2])),
        step("explicit order id", lst(order="id"), ok([a1, a2, a3, b2])),
        step("oldest first; the tie at 802 by id", lst(order="created"), ok([a3, a1, a2, b2])),
        step("newest first; the tie by id, descending", lst(order="-created"),
             ok([b2, a2, a1, a3])),
        step("oldest first, a page of 2", lst(order="created", limit=2), ok([a3, a1])),
        step("the next page: after the last row's id and created",
             lst(order="created", limit=2, after="a-1", after_created=801.0), ok([a2, b2])),
        step("a cursor inside a tie", lst(order="created", after="a-2", after_created=802.0),
             ok([b2])),
        step("newest first after a cursor", lst(order="-created", after="a-2",
             after_created=802.0), ok([a1, a3])),
        step("a cursor that is no row: the rows past its place",
             lst(order="created", after="zzz", after_created=801.5), ok([a2, b2])),
        step("ids with a prefix", lst(prefix="a-"), ok([a1, a2, a3])),
        step("a prefix, newest first", lst(prefix="a-", order="-created"), ok([a2, a1, a3])),
        step("a prefix and a page", lst(prefix="a-", after="a-1", limit=1), ok([a2])),
        step("a whole id is a prefix of itself", lst(prefix="b-2"), ok([b2])),
        step("no id with this prefix", lst(prefix="a-0"), ok([])),
        step("an empty prefix: every id", lst(prefix=""), ok([a1, a2, a3, b2])),
        enqueue("enqueue ü", "\u00fc", 900.0, "uni"),
        enqueue("enqueue über", "\u00fcber", 901.0, "uni"),
        enqueue("enqueue ü and U+10FFFF", "\u00fc\U0010ffff", 902.0, "uni"),
        enqueue("enqueue v", "v", 903.0, "uni"),
        step("a prefix that is not ASCII: by code point, bytewise",
             {"op": "list", "queue": "uni", "prefix": "\u00fc"}, ok([u1, u2, u3])),
        step("... newest first", {"op": "list", "queue": "uni", "prefix": "\u00fc",
             "order": "-created"}, ok([u3, u2, u1])),
        step("job shows created too", {"op": "job", "id": "a-2"},
             ok(dict(a2, result=None, payload=None))),
        step("an unknown order", lst(order="age"), err("invalid_argument")),
        step("order must be a str", lst(order=1), err("bad_request")),
        step("after_created needs a created order", lst(after="a-1", after_created=801.0),
             err("invalid_argument")),
        step("in created order, after needs after_created", lst(order="created", after="a-1"),
             err("invalid_argument")),
        step("and after_created needs after", lst(order="-created", after_created=801.0),
             err("invalid_argument")),
        step("after_created must be a number", lst(order="created", after="a-1",
             after_created="801"), err("bad_request")),
        raw("after_created NaN", rawmap([("op", "list"), ("order", "created"), ("after", "a-1"),
                                         ("after_created", nan)]),
            "list in created order with after_created = float64 NaN", err("invalid_argument")),
        step("prefix must be a str", lst(prefix=5), err("bad_request")),
        step("a prefix over 1024 bytes", lst(prefix="a" * 1025), err("invalid_argument")),
    ]


def keys():
    """Unique keys (C3.10, additive to protocol v1): an enqueue with `key` answers
    {id, created}: the job created, or the job that holds the key (unfinished, or with
    `unique_for` enqueued within it); `on_conflict` "replace" gives a waiting holder the new
    payload, priority, max_attempts and delay, never a leased one; enqueue_many answers a map per
    keyed entry and a bool per other; list filters by key; rows carry `key` only when set."""
    def row(id, state, fence, owner, until, created, payload_key=True, priority=0, not_before=0.0,
            max_attempts=DEFAULT_MAX_ATTEMPTS, attempts=None):
        r = {"id": id, "queue": "mail", "state": state, "priority": priority,
             "attempts": fence if attempts is None else attempts, "max_attempts": max_attempts,
             "fence": fence, "owner": owner, "until": float(until),
             "not_before": float(not_before), "error": None, "created": float(created)}
        if payload_key:
            r["key"] = "welcome:ann"
        return r
    return [
        step("a keyed enqueue creates its job", {"op": "enqueue", "id": "m1", "queue": "mail",
             "payload": "hi", "key": "welcome:ann", "now": 10.0}, ok({"id": "m1", "created": True})),
        step("another id, the same key: not created, the holder named",
             {"op": "enqueue", "id": "m2", "queue": "mail", "key": "welcome:ann", "now": 11.0},
             ok({"id": "m1", "created": False})),
        step("the id taken: nothing changes, the id answered",
             {"op": "enqueue", "id": "m1", "queue": "mail", "key": "other", "now": 11.0},
             ok({"id": "m1", "created": False})),
        step("without a key: a bool, as before",
             {"op": "enqueue", "id": "p1", "queue": "plain", "now": 11.0}, ok(True)),
        step("replace: the waiting holder takes the new payload, priority and delay",
             {"op": "enqueue", "id": "m3", "queue": "mail", "payload": "hello", "priority": 3,
              "delay": 5, "key": "welcome:ann", "on_conflict": "replace", "now": 12.0}, ok({"id": "m1", "created": False})),
        step("its row: key shown, id, fence and created kept",
             {"op": "list", "queue": "mail", "now": 12.0},
             ok([row("m1", "delayed", 0, None, 0, 10.0, priority=3, not_before=17.0)])),
        step("a worker claims it", {"op": "claim_next", "queue": "mail", "owner": "w", "ttl": 100,
             "now": 17.0}, ok({"id": "m1", "fence": 1, "payload": "hello", "attempts": 1})),
        step("replace meets a leased holder: nothing changed",
             {"op": "enqueue", "id": "m4", "queue": "mail", "payload": "late",
              "key": "welcome:ann", "on_conflict": "replace", "now": 18.0},
             ok({"id": "m1", "created": False})),
        step("completed", {"op": "complete", "id": "m1", "owner": "w", "fence": 1,
             "result": "sent", "now": 19.0}, ok(True)),
        step("unique_for: the finished job enqueued within it still holds the key",
             {"op": "enqueue", "id": "m5", "queue": "mail", "key": "welcome:ann",
              "unique_for": 3600, "now": 20.0}, ok({"id": "m1", "created": False})),
        step("without unique_for a finished job does not",
             {"op": "enqueue", "id": "m5", "queue": "mail", "key": "welcome:ann", "now": 20.0},
             ok({"id": "m5", "created": True})),
        step("enqueue_many: a map per keyed entry, a bool per other",
             {"op": "enqueue_many", "jobs": [{"id": "m6", "queue": "mail", "key": "welcome:ann"},
                                             {"id": "p2", "queue": "plain"},
                                             {"id": "m7", "queue": "mail", "key": "welcome:bob"}],
              "now": 21.0},
             ok([{"id": "m5", "created": False}, True, {"id": "m7", "created": True}])),
        step("list by key", {"op": "list", "key": "welcome:bob", "now": 21.0},
             ok([dict(row("m7", "ready", 0, None, 0, 21.0), key="welcome:bob")])),
        step("an empty key", {"op": "enqueue", "id": "x", "key": ""}, err("invalid_argument")),
        step("a key over 1024 bytes", {"op": "enqueue", "id": "x", "key": "k" * 1025},
             err("invalid_argument")),
        step("a key that is not a str", {"op": "enqueue", "id": "x", "key": 5}, err("bad_request")),
        step("unique_for without a key", {"op": "enqueue", "id": "x", "unique_for": 5},
             err("invalid_argument")),
        step("unique_for 0", {"op": "enqueue", "id": "x", "key": "k", "unique_for": 0},
             err("invalid_argument")),
        step("on_conflict neither skip nor replace",
             {"op": "enqueue", "id": "x", "key": "k", "on_conflict": "merge"},
             err("invalid_argument")),
        step("on_conflict without a key", {"op": "enqueue", "id": "x", "on_conflict": "skip"},
             err("invalid_argument")),
        step("enqueue_and_wait takes no key",
             {"op": "enqueue_and_wait", "id": "x", "key": "k"}, err("invalid_argument")),
        step("nothing of those was applied", {"op": "state", "id": "x"}, ok(None)),
    ]


def groups():
    """Groups (C3.11, additive to protocol v1): `group` on enqueue and enqueue_many
    entries; claim_next serves the groups of a priority in turn (never served first, by name;
    the jobs of no group as the group ''), within the queue's group_max_leased; stats shows the
    group settings and groups_waiting; list filters by group; rows carry `group` only when set."""
    def row(id, state, fence, owner, until, attempts=None):
        return {"id": id, "queue": "g", "state": state, "priority": 0,
                "attempts": fence if attempts is None else attempts,
                "max_attempts": DEFAULT_MAX_ATTEMPTS, "fence": fence, "owner": owner,
                "until": float(until), "not_before": 0.0, "error": None, "created": 10.0,
                "group": "acme"}
    return [
        step("at most one leased job per group", {"op": "queue_config", "queue": "g",
             "group_max_leased": 1}, ok(True)),
        step("two jobs of acme, one of zeta, one of no group",
             {"op": "enqueue_many", "jobs": [{"id": "a1", "queue": "g", "group": "acme"},
                                             {"id": "a2", "queue": "g", "group": "acme"},
                                             {"id": "z1", "queue": "g", "group": "zeta"},
                                             {"id": "n1", "queue": "g"}], "now": 10.0},
             ok([True, True, True, True])),
        step("a batch claim takes the groups in turn, one lease each: no group, acme, zeta",
             {"op": "claim_next", "queue": "g", "owner": "w", "ttl": 100, "max": 4, "now": 11.0},
             ok([{"id": "n1", "fence": 1, "payload": None, "attempts": 1},
                 {"id": "a1", "fence": 1, "payload": None, "attempts": 1},
                 {"id": "z1", "fence": 1, "payload": None, "attempts": 1}])),
        step("stats: the group settings and one group waiting (subset)", {"op": "stats"},
             ok({"queues": {"g": {"group_max_leased": 1, "group_rate": 0, "group_per": 1.0,
                                  "groups_waiting": 1, "ready": 1, "leased": 3}}}), subset=True),
        step("list by group: rows carry it", {"op": "list", "group": "acme", "now": 11.0},
             ok([row("a1", "leased", 1, "w", 111.0), row("a2", "ready", 0, None, 0.0)])),
        step("a1 completed", {"op": "complete", "id": "a1", "owner": "w", "fence": 1,
             "result": None, "now": 12.0}, ok(True)),
        step("now acme may take a2", {"op": "claim_next", "queue": "g", "owner": "w",
             "ttl": 100, "now": 12.0}, ok({"id": "a2", "fence": 1, "payload": None, "attempts": 1})),
        # A group's own limits (C3.25).
        step("acme's own cap: 2 leased", {"op": "group_config", "queue": "g", "group": "acme",
             "max_leased": 2}, ok(True)),
        step("a3 and a4 of acme", {"op": "enqueue_many", "jobs": [
             {"id": "a3", "queue": "g", "group": "acme"}, {"id": "a4", "queue": "g", "group": "acme"}],
             "now": 13.0}, ok([True, True])),
        step("acme takes a3 beside a2, and no more", {"op": "claim_next", "queue": "g",
             "owner": "w", "ttl": 100, "max": 4, "now": 13.0},
             ok([{"id": "a3", "fence": 1, "payload": None, "attempts": 1}])),
        step("stats: the queue's groups with their own settings (subset)", {"op": "stats"},
             ok({"queues": {"g": {"group_overrides": 1,
                                  "group_config": {"acme": {"max_leased": 2}}}}}), subset=True),
        step("nil gives acme the queue's cap again", {"op": "group_config", "queue": "g",
             "group": "acme", "max_leased": None}, ok(True)),
        step("a group_config of an empty group", {"op": "group_config", "queue": "g",
             "group": "", "max_leased": 5}, err("invalid_argument")),
        step("a group's max_leased below 0", {"op": "group_config", "queue": "g",
             "group": "acme", "max_leased": -1}, err("invalid_argument")),
        step("a group's rate above 100,000", {"op": "group_config", "queue": "g",
             "group": "acme", "rate": 100001}, err("invalid_argument")),
        step("a group's per of 0", {"op": "group_config", "queue": "g", "group": "acme",
             "per": 0}, err("invalid_argument")),
        step("a group's max_leased that is not an int", {"op": "group_config", "queue": "g",
             "group": "acme", "max_leased": "5"}, err("bad_request")),
        step("group_config needs a group", {"op": "group_config", "queue": "g",
             "max_leased": 5}, err("bad_request")),
        step("none of those applied: acme is at the queue's cap of 1", {"op": "claim_next",
             "queue": "g", "owner": "w", "ttl": 100, "now": 14.0}, ok(None)),
        step("an empty group", {"op": "enqueue", "id": "x", "group": ""}, err("invalid_argument")),
        step("a group over 256 bytes", {"op": "enqueue", "id": "x", "group": "g" * 257},
             err("invalid_argument")),
        step("a group that is not a str", {"op": "enqueue", "id": "x", "group": 5},
             err("bad_request")),
        step("group_max_leased below 0", {"op": "queue_config", "queue": "g",
             "group_max_leased": -1}, err("invalid_argument")),
        step("group_per 0", {"op": "queue_config", "queue": "g", "group_rate": 5,
             "group_per": 0}, err("invalid_argument")),
        step("a list filter of an empty group", {"op": "list", "group": ""},
             err("invalid_argument")),
        step("nothing of those was applied", {"op": "state", "id": "x"}, ok(None)),
    ]


def results():
    """results (C3.12, additive to protocol v1): the state and result of up to 1,000 jobs
    in one round trip (a fan-in job reading its parents' results). The reply maps each id
    asked, once and in the order first asked, to {state, result}, or to nil for an id that
    does not exist."""
    return [
        step("two jobs", {"op": "enqueue_many", "jobs": [{"id": "p1", "queue": "fan"},
                                                          {"id": "p2", "queue": "fan"}],
                          "now": 10.0}, ok([True, True])),
        step("both claimed", {"op": "claim_next", "queue": "fan", "owner": "w", "ttl": 100,
                              "max": 2, "now": 11.0},
             ok([{"id": "p1", "fence": 1, "payload": None, "attempts": 1},
                 {"id": "p2", "fence": 1, "payload": None, "attempts": 1}])),
        step("p1 completed with its result", {"op": "complete", "id": "p1", "owner": "w",
             "fence": 1, "result": "41", "now": 12.0}, ok(True)),
        step("results: p1 done with its result, p2 leased with none, an unknown id nil, a "
             "repeated id once", {"op": "results", "ids": ["p1", "p2", "nope", "p1"],
                                  "now": 13.0, "rid": 7},
             ok({"p1": {"state": "done", "result": "41"},
                 "p2": {"state": "leased", "result": None}, "nope": None}, 7)),
        step("ids missing", {"op": "results"}, err("bad_request")),
        step("ids not an array", {"op": "results", "ids": "p1"}, err("bad_request")),
        step("an id that is not a str", {"op": "results", "ids": ["p1", 2]},
             err("bad_request")),
        step("no ids", {"op": "results", "ids": []}, err("invalid_argument")),
        step("an empty id", {"op": "results", "ids": [""]}, err("invalid_argument")),
        step("more than 1,000 ids", {"op": "results", "ids": ["p1"] * 1001},
             err("invalid_argument")),
    ]


def after():
    """after (C3.13, additive to protocol v1): a job that waits for others is blocked
    until each is done, unblocked in the transaction of its parent's fenced complete (a stale
    complete unblocks nothing). A claim reply names a job's parents (`after`, in id order)
    only when it has some; `job` shows `after` and the children still blocked."""
    claimed_c = {"id": "c", "fence": 1, "payload": None, "attempts": 1, "after": ["a", "b"]}
    return [
        step("a, b and c waiting for both (given out of order)",
             {"op": "enqueue_many", "jobs": [{"id": "a", "queue": "w"}, {"id": "b", "queue": "w"},
                                             {"id": "c", "queue": "w", "after": ["b", "a"]}],
              "now": 10.0}, ok([True, True, True])),
        step("c is blocked and names its parents",
             {"op": "job", "id": "c", "now": 10.5},
             ok({"id": "c", "state": "blocked", "not_before": 0.0, "after": ["a", "b"]}),
             subset=True),
        step("a is claimed and b too, c is not claimable: none more",
             {"op": "claim_next", "queue": "w", "owner": "x", "ttl": 5, "max": 3, "now": 11.0},
             ok([{"id": "a", "fence": 1, "payload": None, "attempts": 1},
                 {"id": "b", "fence": 1, "payload": None, "attempts": 1}])),
        step("a's parent page lists c as blocked", {"op": "job", "id": "a", "now": 11.5},
             ok({"id": "a", "state": "leased", "blocked_children": ["c"]}), subset=True),
        step("b completed by x at 12", {"op": "complete", "id": "b", "owner": "x", "fence": 1,
                                         "result": "B", "now": 12.0}, ok(True)),
        step("x's lease of a ended at 16: y claims a (fence 2)",
             {"op": "claim", "id": "a", "owner": "y", "ttl": 50, "now": 17.0}, ok(2)),
        step("x's stale complete of a is refused (C3.5)",
             {"op": "complete", "id": "a", "owner": "x", "fence": 1, "result": "stale",
              "now": 18.0}, ok(False)),
        step("so c is still blocked", {"op": "claim_next", "queue": "w", "owner": "z", "ttl": 5,
                                       "now": 18.5}, ok(None)),
        step("y completes a", {"op": "complete", "id": "a", "owner": "y", "fence": 2,
                               "result": "A", "now": 19.0}, ok(True)),
        step("c is claimed and its reply names its parents",
             {"op": "claim_next", "queue": "w", "owner": "z", "ttl": 5, "now": 20.0},
             ok(claimed_c)),
        step("its parents' results in one round trip",
             {"op": "results", "ids": ["a", "b"], "now": 20.5},
             ok({"a": {"state": "done", "result": "A"}, "b": {"state": "done", "result": "B"}})),
        step("a blocks nothing now", {"op": "job", "id": "a", "now": 21.0},
             ok({"id": "a", "state": "done", "result": "A"}), subset=True),
        step("an unknown parent refuses the whole request, nothing created",
             {"op": "enqueue_many", "jobs": [{"id": "d", "queue": "w"},
                                             {"id": "e", "queue": "w", "after": ["nope"]}],
              "now": 22.0}, err("invalid_argument"), decodes=True),
        step("so d does not exist", {"op": "state", "id": "d"}, ok(None)),
        step("after that is not an array", {"op": "enqueue", "id": "f", "after": "a"},
             err("bad_request")),
        step("an after entry that is not a str", {"op": "enqueue", "id": "f", "after": [1]},
             err("bad_request")),
        step("an empty after", {"op": "enqueue", "id": "f", "after": []},
             err("invalid_argument")),
        step("a job waiting for itself", {"op": "enqueue", "id": "f", "after": ["f"]},
             err("invalid_argument")),
        step("a parent named twice", {"op": "enqueue", "id": "f", "after": ["a", "a"]},
             err("invalid_argument")),
        step("more than 1,000 parents",
             {"op": "enqueue", "id": "f", "after": ["p%d" % i for i in range(1001)]},
             err("invalid_argument")),
        step("after_failure other than cancel or run",
             {"op": "enqueue", "id": "f", "after": ["a"], "after_failure": "retry"},
             err("invalid_argument")),
        step("after_failure without after", {"op": "enqueue", "id": "f", "after_failure": "run"},
             err("invalid_argument")),
    ]


def lifecycle():
    """snooze and max_runtime (C3.14, C3.15, additive to protocol v1). snooze: the current lease
    ends without using its attempt (attempts goes back down by one), the fence is kept, and the
    job can be claimed again `delay` seconds from now; a stale snooze, like a stale complete, is
    refused. max_runtime: no claim and no renew sets a lease end past the attempt's deadline
    (its claim + max_runtime), so from then on the holder's writes are refused."""
    def row(state, attempts, fence, owner, until, not_before):
        return {"id": "s", "state": state, "attempts": attempts, "fence": fence, "owner": owner,
                "until": until, "not_before": not_before}
    return [
        step("a job", {"op": "enqueue", "id": "s", "now": 1.0}, ok(True)),
        step("claimed by A (attempt 1, fence 1)",
             {"op": "claim_next", "queue": "default", "owner": "A", "ttl": 30, "now": 2.0},
             ok({"id": "s", "fence": 1, "payload": None, "attempts": 1})),
        step("A snoozes it for 5 s", {"op": "snooze", "id": "s", "owner": "A", "fence": 1,
                                      "delay": 5, "now": 3.0}, ok(True)),
        step("delayed until 8, the attempt given back, the fence kept",
             {"op": "job", "id": "s", "now": 3.5},
             ok(row("delayed", 0, 1, None, 0.0, 8.0)), subset=True),
        step("A's second snooze: its lease is over", {"op": "snooze", "id": "s", "owner": "A",
                                                      "fence": 1, "delay": 0, "now": 4.0},
             ok(False)),
        step("not claimable before 8", {"op": "claim_next", "queue": "default", "owner": "B",
                                         "ttl": 30, "now": 7.5}, ok(None)),
        step("B claims it at 8 (attempt 1 again, fence 2)",
             {"op": "claim_next", "queue": "default", "owner": "B", "ttl": 30, "now": 8.0},
             ok({"id": "s", "fence": 2, "payload": None, "attempts": 1})),
        step("A's stale snooze is refused (C3.14)",
             {"op": "snooze", "id": "s", "owner": "A", "fence": 1, "delay": 0, "now": 9.0},
             ok(False)),
        step("so B still holds it", {"op": "job", "id": "s", "now": 9.5},
             ok(row("leased", 1, 2, "B", 38.0, 8.0)), subset=True),
        step("delay missing", {"op": "snooze", "id": "s", "owner": "B", "fence": 2, "now": 10.0},
             err("bad_request")),
        step("a negative delay", {"op": "snooze", "id": "s", "owner": "B", "fence": 2,
                                  "delay": -1, "now": 10.0}, err("invalid_argument")),
        step("a delay that is not a number", {"op": "snooze", "id": "s", "owner": "B",
                                              "fence": 2, "delay": "1", "now": 10.0},
             err("bad_request")),
        step("now missing (client clock)", {"op": "snooze", "id": "s", "owner": "B",
                                            "fence": 2, "delay": 1}, err("invalid_argument")),
        step("a job whose attempts may run 10 s (max_runtime, C3.15)",
             {"op": "enqueue", "id": "m", "queue": "capped", "max_runtime": 10, "now": 20.0},
             ok(True)),
        step("claimed for 60 s at 21: its lease ends at the deadline, 31",
             {"op": "claim", "id": "m", "owner": "W", "ttl": 60, "now": 21.0}, ok(1)),
        step("the lease end is the deadline", {"op": "job", "id": "m", "now": 21.5},
             ok({"id": "m", "state": "leased", "until": 31.0}), subset=True),
        step("a renew for 60 s at 25 is applied, no further than the deadline",
             {"op": "renew", "id": "m", "owner": "W", "fence": 1, "ttl": 60, "now": 25.0},
             ok(True)),
        step("still 31", {"op": "job", "id": "m", "now": 25.5},
             ok({"id": "m", "state": "leased", "until": 31.0}), subset=True),
        step("at the deadline the complete is refused",
             {"op": "complete", "id": "m", "owner": "W", "fence": 1, "result": "late",
              "now": 31.0}, ok(False)),
        step("max_runtime 0", {"op": "enqueue", "id": "m0", "max_runtime": 0, "now": 32.0},
             err("invalid_argument")),
        step("max_runtime negative", {"op": "enqueue", "id": "m0", "max_runtime": -5,
                                      "now": 32.0}, err("invalid_argument")),
        step("max_runtime not a number", {"op": "enqueue", "id": "m0", "max_runtime": "10",
                                          "now": 32.0}, err("bad_request")),
        step("max_runtime in an enqueue_many entry, checked alike",
             {"op": "enqueue_many", "jobs": [{"id": "m1"}, {"id": "m2", "max_runtime": 2e9}],
              "now": 32.0}, err("invalid_argument")),
    ]


def bulk():
    """Bulk actions by filter and retention (C3.16, C3.17, additive to protocol v1). retry_many,
    cancel_many, and purge with a filter act on one page of at most `limit` jobs and answer
    {"count", "more"}; each job is changed as retry, cancel or purge change it (C3.16).
    queue_config's keep_* make the daemon remove finished jobs by itself, each id's fence kept
    (C3.17): here the removal rides along in the next request's transaction."""
    def claimed(i):
        return {"id": "x%d" % i, "fence": 1, "payload": None, "attempts": 1}
    return [
        step("three jobs of one attempt each",
             {"op": "enqueue_many", "jobs": [{"id": "x%d" % i, "queue": "b", "max_attempts": 1}
                                             for i in (1, 2, 3)], "now": 1.0},
             ok([True, True, True])),
        step("claimed for 5 s", {"op": "claim_next", "queue": "b", "owner": "W", "ttl": 5,
                                 "max": 3, "now": 2.0}, ok([claimed(1), claimed(2), claimed(3)])),
        step("x1 completed", {"op": "complete", "id": "x1", "owner": "W", "fence": 1,
                              "result": "r", "now": 3.0}, ok(True)),
        step("at 10 x2 and x3 are dead: a page of one",
             {"op": "retry_many", "queue": "b", "state": "dead", "limit": 1, "now": 10.0},
             ok({"count": 1, "more": True})),
        step("the next page, dead and cancelled by default",
             {"op": "retry_many", "queue": "b", "now": 10.0}, ok({"count": 1, "more": False})),
        step("retried: ready, attempts start over, the fence continues",
             {"op": "job", "id": "x3", "now": 10.0},
             ok({"id": "x3", "state": "ready", "attempts": 0, "fence": 1}), subset=True),
        step("both cancelled", {"op": "cancel_many", "queue": "b", "state": "ready", "now": 11.0},
             ok({"count": 2, "more": False})),
        step("a cancel raises the fence", {"op": "job", "id": "x2", "now": 11.0},
             ok({"id": "x2", "state": "cancelled", "fence": 2}), subset=True),
        step("purge by filter: the cancelled", {"op": "purge", "queue": "b", "state": "cancelled",
                                                "now": 12.0}, ok({"count": 2, "more": False})),
        step("x1 finished 9 s ago, not 100", {"op": "purge", "queue": "b", "state": "done",
                                              "older_than": 100, "limit": 1, "now": 12.0},
             ok({"count": 0, "more": False})),
        step("b keeps done jobs 5 s", {"op": "queue_config", "queue": "b", "keep_done": 5},
             ok(True)),
        step("x1 (done at 3) is removed with the next request", {"op": "job", "id": "x1",
                                                                 "now": 13.0}, ok(None)),
        step("x1 enqueued again", {"op": "enqueue", "id": "x1", "queue": "b", "now": 14.0},
             ok(True)),
        step("its fence continues from the removed job's",
             {"op": "claim", "id": "x1", "owner": "W", "ttl": 5, "now": 15.0}, ok(2)),
        step("retry_many needs a queue", {"op": "retry_many", "now": 16.0}, err("bad_request")),
        step("a state retry_many cannot change", {"op": "retry_many", "queue": "b",
                                                  "state": "done", "now": 16.0},
             err("invalid_argument")),
        step("a limit of 0", {"op": "cancel_many", "queue": "b", "limit": 0, "now": 16.0},
             err("invalid_argument")),
        step("more than 10,000", {"op": "purge", "limit": 10001, "now": 16.0},
             err("invalid_argument")),
        step("a state purge cannot remove", {"op": "purge", "state": "leased", "now": 16.0},
             err("invalid_argument")),
        step("a negative retention", {"op": "queue_config", "queue": "b", "keep_dead": -1},
             err("invalid_argument")),
        step("a retention that is not a number", {"op": "queue_config", "queue": "b",
                                                  "keep_cancelled": "1d"}, err("bad_request")),
    ]


def headers():
    """Job headers (C3.18, additive to protocol v1): a map of str to str on enqueue and each
    enqueue_many entry, at most 4,096 bytes of keys and values, given back in claim replies and
    by `job` under "headers" only when the job has some (C3.18)."""
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    return [
        step("a job with trace context", {"op": "enqueue", "id": "t1", "queue": "h",
                                          "headers": {"traceparent": tp}, "now": 1.0}, ok(True)),
        step("one without, and one in a batch with two headers",
             {"op": "enqueue_many", "jobs": [{"id": "t2", "queue": "h"},
                                             {"id": "t3", "queue": "h",
                                              "headers": {"a": "1", "b": ""}}], "now": 1.0},
             ok([True, True])),
        step("claimed: the headers of the jobs that have some",
             {"op": "claim_next", "queue": "h", "owner": "W", "ttl": 30, "max": 3, "now": 2.0},
             ok([{"id": "t1", "fence": 1, "payload": None, "attempts": 1,
                  "headers": {"traceparent": tp}},
                 {"id": "t2", "fence": 1, "payload": None, "attempts": 1},
                 {"id": "t3", "fence": 1, "payload": None, "attempts": 1,
                  "headers": {"a": "1", "b": ""}}])),
        step("and in the job's record", {"op": "job", "id": "t1", "now": 3.0},
             ok({"id": "t1", "headers": {"traceparent": tp}}), subset=True),
        step("headers that are not a map", {"op": "enqueue", "id": "t4", "headers": ["a"],
                                            "now": 4.0}, err("bad_request")),
        step("a value that is not a str", {"op": "enqueue", "id": "t4", "headers": {"a": 1},
                                           "now": 4.0}, err("bad_request")),
        step("an empty key", {"op": "enqueue", "id": "t4", "headers": {"": "x"}, "now": 4.0},
             err("invalid_argument")),
        step("more than 4,096 bytes", {"op": "enqueue", "id": "t4", "headers": {"k": "x" * 4096},
                                       "now": 4.0}, err("invalid_argument")),
        step("in a batch entry, checked alike",
             {"op": "enqueue_many", "jobs": [{"id": "t4"}, {"id": "t5", "headers": {"": "x"}}],
              "now": 4.0}, err("invalid_argument")),
        step("none of them enqueued", {"op": "job", "id": "t4", "now": 5.0}, ok(None)),
    ]


def steps():
    """A job's steps (C3.22, additive to protocol v1): step_save stores a step's value (a
    payload: bin, str or nil) under the current lease, once per job: a stale lease saves nothing
    and a saved step is never overwritten (false). Every later claim of the job carries
    "steps", a map of name to value, only when the job has some, and so does `job`."""
    return [
        step("an order", {"op": "enqueue", "id": "o", "queue": "orders", "now": 1.0}, ok(True)),
        step("claimed by A: no steps yet",
             {"op": "claim_next", "queue": "orders", "owner": "A", "ttl": 30, "now": 2.0},
             ok({"id": "o", "fence": 1, "payload": None, "attempts": 1})),
        step("A saves the charge", {"op": "step_save", "id": "o", "owner": "A", "fence": 1,
                                    "step": "charge", "value": "ch_1", "now": 3.0}, ok(True)),
        step("a saved step is never overwritten", {"op": "step_save", "id": "o", "owner": "A",
                                                   "fence": 1, "step": "charge",
                                                   "value": "ch_2", "now": 3.0}, ok(False)),
        step("a step's value may be nil", {"op": "step_save", "id": "o", "owner": "A",
                                           "fence": 1, "step": "email", "value": None,
                                           "now": 3.0}, ok(True)),
        step("the job's record has its steps", {"op": "job", "id": "o"},
             ok({"id": "o", "steps": {"charge": "ch_1", "email": None}}), subset=True),
        step("A's attempt fails", {"op": "fail", "id": "o", "owner": "A", "fence": 1,
                                   "error": "smtp down", "retry_in": 0, "now": 4.0}, ok(True)),
        step("B's claim carries the steps",
             {"op": "claim_next", "queue": "orders", "owner": "B", "ttl": 30, "now": 5.0},
             ok({"id": "o", "fence": 2, "payload": None, "attempts": 2,
                 "steps": {"charge": "ch_1", "email": None}})),
        step("A, late, saves nothing (C3.22)", {"op": "step_save", "id": "o", "owner": "A",
                                                "fence": 1, "step": "ship", "value": "s_1",
                                                "now": 6.0}, ok(False)),
        step("B saves the shipment", {"op": "step_save", "id": "o", "owner": "B", "fence": 2,
                                      "step": "ship", "value": "s_2", "now": 6.0}, ok(True)),
        step("another job, claimed by C, saves a step and is released",
             {"op": "enqueue", "id": "p", "queue": "next", "now": 7.0}, ok(True)),
        step("C claims it", {"op": "claim", "id": "p", "owner": "C", "ttl": 30, "now": 7.0},
             ok(1)),
        step("C's step", {"op": "step_save", "id": "p", "owner": "C", "fence": 1, "step": "a",
                          "value": "1", "now": 7.0}, ok(True)),
        step("C releases it", {"op": "release", "id": "p", "owner": "C", "fence": 1},
             ok(True)),
        step("B completes o and takes p: the next job carries its steps",
             {"op": "complete_next", "id": "o", "owner": "B", "fence": 2, "result": "done",
              "queue": "next", "ttl": 30, "now": 8.0},
             ok({"completed": True, "next": {"id": "p", "fence": 2, "payload": None,
                                             "attempts": 2, "steps": {"a": "1"}}})),
        step("the finished job keeps its steps", {"op": "job", "id": "o"},
             ok({"id": "o", "state": "done",
                 "steps": {"charge": "ch_1", "email": None, "ship": "s_2"}}), subset=True),
        step("an empty step name", {"op": "step_save", "id": "p", "owner": "B", "fence": 2,
                                     "step": "", "value": "x", "now": 9.0},
             err("invalid_argument")),
        step("a step name over 256 bytes", {"op": "step_save", "id": "p", "owner": "B",
                                            "fence": 2, "step": "s" * 257, "value": "x",
                                            "now": 9.0}, err("invalid_argument")),
        step("a step name that is not a str", {"op": "step_save", "id": "p", "owner": "B",
                                               "fence": 2, "step": 7, "value": "x", "now": 9.0},
             err("bad_request")),
        step("value missing", {"op": "step_save", "id": "p", "owner": "B", "fence": 2,
                               "step": "v", "now": 9.0}, err("bad_request")),
        step("a value that is a map", {"op": "step_save", "id": "p", "owner": "B", "fence": 2,
                                       "step": "v", "value": {"a": 1}, "now": 9.0},
             err("bad_request")),
        step("now missing (client clock)", {"op": "step_save", "id": "p", "owner": "B",
                                            "fence": 2, "step": "v", "value": "x"},
             err("invalid_argument")),
        step("none of them saved", {"op": "job", "id": "p"},
             ok({"id": "p", "steps": {"a": "1"}}), subset=True),
    ]


def signals():
    """Suspend, signal and deadlines (C3.23, C3.24, additive to protocol v1). suspend ends a
    current lease and answers a random signal token (a str of 32 hex digits, so no step here
    can show one), or false for a lease that is not current; signal answers false for a token
    that wakes nothing; a job not claimed by its deadline is never claimed (dead)."""
    return [
        step("an order", {"op": "enqueue", "id": "o", "queue": "orders", "now": 1.0}, ok(True)),
        step("claimed by A",
             {"op": "claim_next", "queue": "orders", "owner": "A", "ttl": 30, "now": 2.0},
             ok({"id": "o", "fence": 1, "payload": None, "attempts": 1})),
        step("a stale lease cannot suspend the job", {"op": "suspend", "id": "o", "owner": "A",
                                                      "fence": 7, "timeout": 60, "now": 3.0},
             ok(False)),
        step("nor another owner", {"op": "suspend", "id": "o", "owner": "B", "fence": 1,
                                   "timeout": 60, "on_timeout": "fail", "now": 3.0}, ok(False)),
        step("a timeout under a second", {"op": "suspend", "id": "o", "owner": "A", "fence": 1,
                                          "timeout": 0.5, "now": 3.0}, err("invalid_argument")),
        step("a timeout over 30 days", {"op": "suspend", "id": "o", "owner": "A", "fence": 1,
                                        "timeout": 2592001, "now": 3.0},
             err("invalid_argument")),
        step("a timeout that is not a number", {"op": "suspend", "id": "o", "owner": "A",
                                                "fence": 1, "timeout": "1h", "now": 3.0},
             err("bad_request")),
        step("timeout missing", {"op": "suspend", "id": "o", "owner": "A", "fence": 1,
                                 "now": 3.0}, err("bad_request")),
        step("on_timeout neither retry nor fail", {"op": "suspend", "id": "o", "owner": "A",
                                                   "fence": 1, "timeout": 60,
                                                   "on_timeout": "later", "now": 3.0},
             err("invalid_argument")),
        step("A still holds the job", {"op": "job", "id": "o"},
             ok({"id": "o", "state": "leased", "owner": "A", "fence": 1}), subset=True),
        step("an unknown token wakes nothing", {"op": "signal", "token": "0" * 32,
                                                "value": "paid", "now": 4.0}, ok(False)),
        step("a signal without a value", {"op": "signal", "token": "f" * 32, "now": 4.0},
             ok(False)),
        step("an empty token", {"op": "signal", "token": "", "now": 4.0},
             err("invalid_argument")),
        step("a token over 256 bytes", {"op": "signal", "token": "t" * 257, "now": 4.0},
             err("invalid_argument")),
        step("a token that is not a str", {"op": "signal", "token": 7, "now": 4.0},
             err("bad_request")),
        step("a value that is a map", {"op": "signal", "token": "t", "value": {"a": 1},
                                       "now": 4.0}, err("bad_request")),
        step("no job is suspended", {"op": "list", "state": "suspended"}, ok([])),
        step("a job with a deadline, delayed past it",
             {"op": "enqueue", "id": "d", "queue": "offers", "delay": 50, "deadline": 100.0,
              "now": 60.0}, ok(True)),
        step("at its deadline it is not claimed",
             {"op": "claim_next", "queue": "offers", "owner": "A", "ttl": 30, "now": 110.0},
             ok(None)),
        step("it is dead", {"op": "job", "id": "d"},
             ok({"id": "d", "state": "dead", "attempts": 0}), subset=True),
        step("a deadline of 0", {"op": "enqueue", "id": "e", "deadline": 0, "now": 111.0},
             err("invalid_argument")),
        step("a deadline that is not a number", {"op": "enqueue", "id": "e", "deadline": "soon",
                                                  "now": 111.0}, err("bad_request")),
        step("a deadline in an entry of enqueue_many",
             {"op": "enqueue_many", "jobs": [{"id": "f", "queue": "offers", "deadline": 200.0}],
              "now": 112.0}, ok([True])),
        step("claimed before it", {"op": "claim_next", "queue": "offers", "owner": "A",
                                   "ttl": 30, "now": 113.0},
             ok({"id": "f", "fence": 1, "payload": None, "attempts": 1})),
    ]


SUITES = {
    "story": ("client", story),
    "operations": ("client", operations),
    "errors": ("client", errors),
    "server-clock": ("server", server_clock),
    "queue": ("client", queue),
    "batches": ("client", batches),
    "control": ("client", control),
    "policy": ("client", policy),
    "listing": ("client", listing),
    "keys": ("client", keys),
    "groups": ("client", groups),
    "results": ("client", results),
    "after": ("client", after),
    "lifecycle": ("client", lifecycle),
    "bulk": ("client", bulk),
    "headers": ("client", headers),
    "steps": ("client", steps),
    "signals": ("client", signals),
}


def render(name):
    clock, fn = SUITES[name]
    doc = {"name": name, "description": fn.__doc__, "clock": clock, "steps": fn()}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for name in SUITES:
        path = HERE / f"{name}.json"
        text = render(name)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print("vectors out of date (run protocol/vectors/generate.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
