"""The shared protocol vectors (protocol/vectors/*.json) against a real daemon.

For each vector file, on a fresh daemon with the file's clock mode:

- the raw check: each step's ``request_hex`` bytes are sent as the payload
  frame and the decoded reply is compared with ``reply`` (rules below);
- the codec check: ``msgpack.packb(request)`` equals ``request_hex`` and
  ``msgpack.unpackb(reply_hex)`` equals ``reply``, where present;
- the client check: on another fresh daemon, every step whose request maps onto
  a ``fenceq.Client`` method goes through that method (the others are sent raw
  to keep the daemon's state in step), and its result or error must match.
  Methods are named like their op, except ``complete_next``:
  ``Client.complete_and_claim_next``; ``claim_next`` with ``max`` is
  ``Client.claim_next(..., max=)``; ``purge`` with a filter (``state``,
  ``prefix``, ``group`` or ``limit``, issue 33) is ``Client.purge_many``. The
  request the method sends must pack to the step's bytes (its ``rid`` aside:
  the client sends its own): the client's encoder, key order and types
  included, against the shared bytes. (``purge_many`` alone is compared in its
  own key order, the C++ encoder's, which puts ``older_than`` before the filter:
  its keys, values and msgpack types must still be the step's.)

Comparison: an error reply compares ``ok``, ``rid`` and ``error.code`` only
(``error.message`` must be a non-empty str); ``"compare": "subset"`` means every
expected key must be present and equal (recursively); otherwise exact equality.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import msgpack
import pytest
import zmq

import fenceq
from conftest import REPO, record_requests

VECTORS_DIR = REPO / "protocol" / "vectors"
VECTOR_FILES = sorted(VECTORS_DIR.glob("*.json"))


def test_vectors_exist():
    """The vectors are part of the protocol: a missing folder is a failure, not a skip."""
    assert VECTOR_FILES, f"no protocol vectors in {VECTORS_DIR}"


def load(path: Path) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        vector = json.load(f)
    assert vector["clock"] in ("client", "server"), path
    assert isinstance(vector["steps"], list) and vector["steps"], path
    return vector


def same(expected: Any, actual: Any, subset: bool) -> bool:
    """Equality with msgpack/JSON number rules (110 == 110.0; bool is not a number)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        if not subset and set(expected) != set(actual):
            return False
        return all(k in actual and same(v, actual[k], subset) for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(same(e, a, subset) for e, a in zip(expected, actual)))
    return expected == actual


def reply_matches(expected: Dict[str, Any], actual: Any, compare: str) -> bool:
    if not isinstance(actual, dict):
        return False
    if "error" in expected:
        error = actual.get("error")
        return (actual.get("ok") is expected.get("ok", False)
                and ("rid" not in expected or same(expected["rid"], actual.get("rid"), False))
                and ("rid" in expected or "rid" not in actual)
                and isinstance(error, dict)
                and error.get("code") == expected["error"]["code"]
                and isinstance(error.get("message"), str) and bool(error["message"]))
    return same(expected, actual, compare == "subset")


class Raw:
    """A bare DEALER (with the empty delimiter) for sending exact bytes."""

    def __init__(self, endpoint: str) -> None:
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)

    def exchange(self, payload: bytes) -> Any:
        self.socket.send_multipart([b"", payload])
        assert self.socket.poll(5000), "no reply within 5 s"
        return msgpack.unpackb(self.socket.recv_multipart()[-1], raw=False)

    def close(self) -> None:
        self.socket.close()


@pytest.mark.parametrize("path", VECTOR_FILES, ids=[p.stem for p in VECTOR_FILES])
def test_vector_codec(path: Path):
    """The readable forms and the bytes of each step agree (this client's encoder and
    decoder against the shared bytes)."""
    for step in load(path)["steps"]:
        if "request" in step:
            assert msgpack.packb(step["request"], use_bin_type=True) == bytes.fromhex(step["request_hex"]), \
                f"{path.name}: {step['name']}: request does not pack to request_hex"
        if "reply_hex" in step:
            decoded = msgpack.unpackb(bytes.fromhex(step["reply_hex"]), raw=False)
            assert same(step["reply"], decoded, False), f"{path.name}: {step['name']}: reply_hex"


@pytest.mark.parametrize("path", VECTOR_FILES, ids=[p.stem for p in VECTOR_FILES])
def test_vector_raw(path: Path, start_daemon):
    """Each step's exact bytes get the expected reply from a fresh daemon."""
    vector = load(path)
    d = start_daemon(name="vec", clock=vector["clock"])
    raw = Raw(d.endpoint)
    try:
        for step in vector["steps"]:
            reply = raw.exchange(bytes.fromhex(step["request_hex"]))
            assert reply_matches(step["reply"], reply, step.get("compare", "exact")), \
                f"{path.name}: step {step['name']!r}: expected {step['reply']!r}, got {reply!r}"
    finally:
        raw.close()


#: op -> (Client method, its positional fields, its optional keyword fields)
CLIENT_OPS = {
    "ping": ((), ()),
    "enqueue": (("id",), ("queue", "payload", "priority", "delay", "max_attempts", "now",
                          "key", "unique_for", "on_conflict", "group", "after", "after_failure",
                          "max_runtime", "headers", "deadline")),
    "state": (("id",), ()),
    "claim": (("id", "owner", "ttl"), ("now",)),
    "renew": (("id", "owner", "fence", "ttl"), ("now", "progress")),
    "complete": (("id", "owner", "fence", "result"), ("now",)),
    "release": (("id", "owner", "fence"), ()),
    # The work queue.
    "claim_next": (("queue", "owner", "ttl"), ("wait", "now", "max")),
    "fail": (("id", "owner", "fence", "error"), ("retry_in", "now")),
    "check": (("id", "owner", "fence"), ("now",)),
    "retry": (("id",), ()),
    # Queue control (issue 18).
    "cancel": (("id",), ("now",)),
    "job": (("id",), ("now",)),
    "stats": ((), ("now",)),
    "list": ((), ("queue", "state", "limit", "after", "now", "key", "group")),
    "purge": (("older_than",), ("queue", "now")),
    "metrics": ((), ("now",)),
    "complete_next": (("id", "owner", "fence", "result", "queue", "ttl"), ("now",)),
    # Batches.
    "enqueue_many": (("jobs",), ("now",)),
    "complete_many": (("items",), ("next", "now")),
    "renew_many": (("items", "ttl"), ("now",)),
    # Queue settings, await and periodic jobs (issue 18). await_job always
    # sends its wait: an await without one goes raw.
    "queue_config": (("queue",), ("paused", "max_leased", "rate", "per", "group_max_leased",
                                  "group_rate", "group_per", "keep_done", "keep_dead",
                                  "keep_cancelled")),
    "await": (("id", "wait"), ("now",)),
    "schedule_set": (("name", "cron"), ("tz", "queue", "payload", "priority", "max_attempts", "now")),
    "schedule_delete": (("name",), ()),
    "schedule_list": ((), ("now",)),
    # Fan-in (issue 32).
    "results": (("ids",), ("now",)),
    # Lifecycle (issue 33).
    "snooze": (("id", "owner", "fence", "delay"), ("now",)),
    "step_save": (("id", "owner", "fence", "step", "value"), ("now",)),
    # Suspend and signal (C3.23): suspend's refusal is None here, false on the
    # wire (as_wire); signal's value is optional (left out: not sent).
    "suspend": (("id", "owner", "fence", "timeout"), ("on_timeout", "now")),
    "signal": (("token",), ("value", "now")),
    # Bulk actions by filter (issue 33); purge_many: purge with a filter.
    "retry_many": (("queue",), ("state", "prefix", "group", "limit", "now")),
    "cancel_many": (("queue",), ("state", "prefix", "group", "limit", "now")),
    "purge_many": ((), ("queue", "older_than", "state", "prefix", "group", "limit", "now")),
}

#: The fields that make a purge one page by filter (purge_many), not purge by age.
PURGE_FILTER = ("state", "prefix", "group", "limit")

#: queue_config's retention fields (issue 33).
KEEP_FIELDS = ("keep_done", "keep_dead", "keep_cancelled")

#: The ops whose Client method is not named like the op.
METHOD_NAMES = {"complete_next": "complete_and_claim_next", "await": "await_job"}

#: The ops of issue 18 (queue settings, await, periodic jobs).
POLICY_OPS = ("queue_config", "await", "schedule_set", "schedule_delete", "schedule_list")


#: The batch ops (and claim_next's max): every step of theirs goes through the Client.
BATCH_OPS = ("enqueue_many", "complete_many", "renew_many")


def without_rid(request: Dict[str, Any]) -> bytes:
    """The request's bytes as the Client would send them, but for its own rid."""
    return msgpack.packb({k: v for k, v in request.items() if k != "rid"}, use_bin_type=True)


#: The ops whose answer is a job's record or rows of them: the Client gives
#: every one a "group" (None for a job in none), which the wire carries only
#: when the job has one.
RECORD_OPS = ("job", "list", "await", "enqueue_and_wait")


def as_wire(op: str, result: Any) -> Any:
    """A Client result in the shape of the wire's (CompletedMany is a map there)."""
    if isinstance(result, fenceq.CompletedMany):
        return {"completed": result.completed, "next": result.next}
    if isinstance(result, fenceq.BulkResult):
        return {"count": result.count, "more": result.more}
    if op == "suspend" and result is None:
        return False  # refused (C3.23): None here, false on the wire
    return result


# Each batch entry kind's fields, as protocol/ops/ops.json declares them (read once).
ENTRY_FIELDS = json.loads((REPO / "protocol" / "ops" / "ops.json").read_text())["entries"]


def client_call(request: Any):
    """``(op, args, kwargs)`` when the request is exactly what a Client
    method sends (no extra keys, no v, all its fields present), else None."""
    if not isinstance(request, dict) or request.get("op") not in CLIENT_OPS:
        return None
    op = request["op"]
    if op == "purge" and any(k in request for k in PURGE_FILTER):
        op = "purge_many"
    positional, optional = CLIENT_OPS[op]
    allowed = {"op", "rid", "v", *positional, *optional}
    if set(request) - allowed or any(k not in request for k in positional):
        return None
    if "v" in request:
        return None  # the Client never sends v
    for field, kind in (("jobs", "job"),):
        entries = request.get(field)
        if isinstance(entries, list) and any(
                isinstance(e, dict) and set(e) - set(ENTRY_FIELDS[kind]) for e in entries):
            return None  # an entry with a field no entry has (issue 57): it must go raw
    if "rid" in request and not (request["rid"] is None or type(request["rid"]) in (int, str)):
        return None  # the Client sends its own rid; a bad one must go raw
    if any(k in request and request[k] is None for k in optional):
        return None  # the Client leaves a None keyword out; an explicit nil must go raw
    args = [request[k] for k in positional]
    kwargs = {k: request[k] for k in optional if k in request}
    return op, args, kwargs


@pytest.mark.parametrize("path", VECTOR_FILES, ids=[p.stem for p in VECTOR_FILES])
def test_vector_through_client(path: Path, start_daemon):
    """The same steps through fenceq.Client methods where they map onto one."""
    vector = load(path)
    d = start_daemon(name="vcl", clock=vector["clock"])
    raw = Raw(d.endpoint)
    mapped = 0
    try:
        with d.client() as client:
            sent = record_requests(client)
            for step in vector["steps"]:
                payload = bytes.fromhex(step["request_hex"])
                try:
                    request = msgpack.unpackb(payload, raw=False)
                except Exception:
                    request = None
                call = client_call(request)
                expected = step["reply"]
                where = f"{path.name}: step {step['name']!r}"
                if call is None:
                    reply = raw.exchange(payload)
                    assert reply_matches(expected, reply, step.get("compare", "exact")), where
                    continue
                mapped += 1
                op, args, kwargs = call
                method = getattr(client, METHOD_NAMES.get(op, op))
                # Unique keys (issue 31): the wire's {id, created} answers come from
                # enqueue_unique and enqueue_many_unique (a map per keyed entry).
                keyed_entries = None
                if op == "enqueue" and "key" in kwargs:
                    method = client.enqueue_unique
                elif op == "enqueue_many" and isinstance(args[0], list) and any(
                        isinstance(j, dict) and "key" in j for j in args[0]):
                    method = client.enqueue_many_unique
                    keyed_entries = ["key" in j for j in args[0]]
                del sent[:]
                if "error" in expected:
                    with pytest.raises(fenceq.FenceqError) as e:
                        method(*args, **kwargs)
                    assert e.value.code == expected["error"]["code"], where
                    assert isinstance(e.value.message, str) and e.value.message, where
                    if expected["error"]["code"] == "invalid_argument":
                        assert isinstance(e.value, ValueError), where
                else:
                    result = as_wire(op, method(*args, **kwargs))
                    if isinstance(result, fenceq.Enqueued):
                        result = {"id": result.id, "created": result.created}
                    elif keyed_entries is not None:
                        result = [{"id": e.id, "created": e.created} if keyed else e.created
                                  for e, keyed in zip(result, keyed_entries)]
                    assert same(expected["result"], result, step.get("compare") == "subset"), \
                        f"{where}: expected {expected['result']!r}, got {result!r}"
                # The client's encoder against the shared bytes (unless it refused
                # the request itself, before sending anything).
                if sent:
                    assert len(sent) == 1, where
                    sent_op, sent_fields, _ = sent[0]
                    request_sent = {"op": sent_op, **sent_fields}
                    shared = request
                    if op == "purge_many" and set(request_sent) == set(request) - {"rid"}:
                        shared = {k: request[k] for k in request_sent}  # the client's key order
                    assert msgpack.packb(request_sent, use_bin_type=True) == without_rid(shared), \
                        f"{where}: the Client sent {request_sent!r}, the vector has {request!r}"
    finally:
        raw.close()
    if any(isinstance(s.get("request"), dict) and s["request"].get("op") in CLIENT_OPS
           for s in vector["steps"]):
        assert mapped, f"{path.name}: no step went through the Client"


def test_complete_next_steps_go_through_the_client():
    """Every complete_next step of the vectors maps onto Client.complete_and_claim_next
    (none is left to the raw route), and the vectors have some."""
    steps = [(path.name, step) for path in VECTOR_FILES for step in load(path)["steps"]
             if isinstance(step.get("request"), dict) and step["request"].get("op") == "complete_next"]
    assert steps, "no complete_next step in the vectors"
    for name, step in steps:
        call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
        assert call is not None and call[0] == "complete_next", f"{name}: {step['name']!r} goes raw"
        assert callable(getattr(fenceq.Client, METHOD_NAMES[call[0]]))


def test_batch_steps_go_through_the_client():
    """Every step of the batch ops (and every claim_next with max) maps onto its
    Client method, and the vectors have each of them: the batches suite is checked
    through the client, not only raw."""
    steps = [(path.name, step) for path in VECTOR_FILES for step in load(path)["steps"]
             if isinstance(step.get("request"), dict)
             and (step["request"].get("op") in BATCH_OPS
                  or (step["request"].get("op") == "claim_next" and "max" in step["request"]))]
    ops = {step["request"]["op"] for _, step in steps}
    assert ops == {*BATCH_OPS, "claim_next"}, f"the vectors lack {({*BATCH_OPS, 'claim_next'} - ops)}"
    assert any("next" in step["request"] for _, step in steps), "no complete_many with next"
    for name, step in steps:
        call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
        if step["request"]["op"] == "renew_many" and "ttl" not in step["request"]:
            assert call is None  # the Client cannot leave its ttl out: that one goes raw
            continue
        if "is not a field of" in step["reply"].get("error", {}).get("message", "") or \
                step["name"].startswith("a field an entry does not have"):
            assert call is None  # a field no entry has (issue 57): only raw bytes carry it
            continue
        assert call is not None and call[0] == step["request"]["op"], f"{name}: {step['name']!r} goes raw"


def test_policy_steps_go_through_the_client():
    """The vectors have answered steps of every op of issue 18, and each of those maps onto
    its Client method (queue_config, await_job, schedule_set, schedule_delete,
    schedule_list): the policy suite is checked through the client, not only raw."""
    typed = set()
    for path in VECTOR_FILES:
        for step in load(path)["steps"]:
            request = step.get("request")
            if not (isinstance(request, dict) and request.get("op") in POLICY_OPS):
                continue
            call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
            if call is not None:
                typed.add(call[0])
                assert callable(getattr(fenceq.Client, METHOD_NAMES.get(call[0], call[0])))
            elif "error" not in step["reply"]:
                # Only an await without its wait may go raw (the Client always sends one).
                assert request["op"] == "await" and "wait" not in request, \
                    f"{path.name}: {step['name']!r} goes raw"
    assert typed == set(POLICY_OPS), f"no step through the Client for {set(POLICY_OPS) - typed}"


def test_snooze_steps_go_through_the_client():
    """Every snooze step of the vectors that carries its delay maps onto
    Client.snooze (only the one without a delay, which the method cannot
    send, goes raw), and the vectors have answered ones: the lifecycle suite
    is checked through the client, not only raw."""
    steps = [(path.name, step) for path in VECTOR_FILES for step in load(path)["steps"]
             if isinstance(step.get("request"), dict) and step["request"].get("op") == "snooze"]
    assert any("error" not in step["reply"] for _, step in steps), "no answered snooze step"
    for name, step in steps:
        call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
        if "delay" not in step["request"]:
            assert call is None, f"{name}: {step['name']!r}"
            continue
        assert call is not None and call[0] == "snooze", f"{name}: {step['name']!r} goes raw"


def test_max_runtime_steps_go_through_the_client():
    """Every enqueue step with a max_runtime (and every enqueue_many step with
    one in an entry) maps onto its Client method, answered ones and refused
    ones alike: issue 33's cap is checked through the client, not only raw."""
    def has_max_runtime(request: Any) -> bool:
        if request.get("op") == "enqueue":
            return "max_runtime" in request
        return request.get("op") == "enqueue_many" and any(
            isinstance(j, dict) and "max_runtime" in j for j in request.get("jobs", []))

    steps = [(path.name, step) for path in VECTOR_FILES for step in load(path)["steps"]
             if isinstance(step.get("request"), dict) and has_max_runtime(step["request"])]
    assert any("error" not in step["reply"] for _, step in steps), "no answered max_runtime step"
    assert any(step["request"]["op"] == "enqueue_many" for _, step in steps), "no enqueue_many one"
    for name, step in steps:
        call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
        assert call is not None and call[0] == step["request"]["op"], f"{name}: {step['name']!r} goes raw"


def test_bulk_steps_go_through_the_client():
    """Every step of issue 33's bulk actions (retry_many, cancel_many, purge with
    a filter) and of queue_config with a retention maps onto its Client method
    (retry_many, cancel_many, purge_many, queue_config), answered and refused
    ones alike, but for a retry_many or cancel_many without its queue, which
    the methods cannot leave out: they are checked through the client, not
    only raw."""
    def is_bulk(request: Dict[str, Any]) -> bool:
        if request.get("op") == "purge":
            return any(k in request for k in PURGE_FILTER)
        if request.get("op") == "queue_config":
            return any(k in request for k in KEEP_FIELDS)
        return request.get("op") in ("retry_many", "cancel_many")

    steps = [(path.name, step) for path in VECTOR_FILES for step in load(path)["steps"]
             if isinstance(step.get("request"), dict) and is_bulk(step["request"])]
    assert any("error" not in step["reply"] for _, step in steps), "no answered bulk step"
    typed = set()
    for name, step in steps:
        call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
        if step["request"]["op"] in ("retry_many", "cancel_many") and "queue" not in step["request"]:
            assert call is None, f"{name}: {step['name']!r}"
            continue
        assert call is not None, f"{name}: {step['name']!r} goes raw"
        typed.add(call[0])
    assert typed == {"retry_many", "cancel_many", "purge_many", "queue_config"}, typed


def test_headers_steps_go_through_the_client():
    """Every enqueue step with headers (and every enqueue_many step with them in
    an entry) maps onto its Client method, answered and refused ones alike
    (headers that are not a map, a value that is not a str, an empty key, more
    than 4096 bytes), and so do the claim and job steps that give them back:
    issue 33's headers are checked through the client, not only raw."""
    def has_headers(request: Dict[str, Any]) -> bool:
        if request.get("op") == "enqueue":
            return "headers" in request
        return request.get("op") == "enqueue_many" and any(
            isinstance(j, dict) and "headers" in j for j in request.get("jobs", []))

    def gives_headers(step: Dict[str, Any]) -> bool:
        return "headers" in json.dumps(step["reply"].get("result"))

    steps = [(path.name, step) for path in VECTOR_FILES for step in load(path)["steps"]
             if isinstance(step.get("request"), dict)
             and (has_headers(step["request"]) or gives_headers(step))]
    assert any("error" in step["reply"] for _, step in steps), "no refused headers step"
    assert any(step["request"]["op"] == "enqueue_many" for _, step in steps), "no enqueue_many one"
    ops = set()
    for name, step in steps:
        call = client_call(msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False))
        assert call is not None and call[0] == step["request"]["op"], f"{name}: {step['name']!r} goes raw"
        ops.add(call[0])
    assert {"enqueue", "enqueue_many", "claim_next", "job"} <= ops, ops
