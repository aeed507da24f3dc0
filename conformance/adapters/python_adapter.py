#!/usr/bin/python3
"""The conformance kit's adapter for the Python client (clients/python).

Reads one JSON request per line on stdin, makes the call with fenceq.Client
and prints the answer as one JSON line (conformance/README.md).
Each protocol op maps to the Client method ops.json names for it (METHODS
below, read from protocol/ops/ops.json); the method's answer is written back
in the op's wire form (bin as {"$bin": hex}).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

import fenceq  # noqa: E402


class Unsupported(Exception):
    """This client cannot make the call as asked; nothing was sent."""


def from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bin"}:
            return bytes.fromhex(value["$bin"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def to_json(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"$bin": bytes(value).hex()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # the client's NamedTuples
        return to_json(value._asdict())
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def positional(a: Dict[str, Any], *names: str) -> list:
    try:
        return [a.pop(name) for name in names]
    except KeyError as e:
        raise Unsupported(f"no field {e}") from None


def keep(value: Any) -> Any:
    """queue_config's keep_*: nil on the wire removes a retention (KEEP_FOREVER here)."""
    return fenceq.KEEP_FOREVER if value is None else value


def inherit(value: Any) -> Any:
    """group_config's max_leased, rate, per: nil on the wire removes the
    group's override (INHERIT here)."""
    return fenceq.INHERIT if value is None else value


def enqueue(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    (id,) = positional(a, "id")
    if "key" in a:
        return c.enqueue_unique(id, a.pop("key"), **a)._asdict()
    return c.enqueue(id, **a)


def enqueue_many(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    (jobs,) = positional(a, "jobs")
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise Unsupported("jobs must be a list of maps")
    if not any("key" in j for j in jobs):
        return c.enqueue_many(jobs, **a)
    answers = c.enqueue_many_unique(jobs, **a)
    return [e._asdict() if "key" in j else e.created for j, e in zip(jobs, answers)]


def complete_many(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    (items,) = positional(a, "items")
    if "next" in a and a["next"] is None:
        raise Unsupported("next: nil")
    return c.complete_many(items, a.pop("next", None), **a)


def purge(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    if any(k in a for k in ("state", "prefix", "group", "limit")):
        return c.purge_many(**a)
    (older_than,) = positional(a, "older_than")
    return c.purge(older_than, **a)


def queue_config(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    (queue,) = positional(a, "queue")
    for name in ("keep_done", "keep_dead", "keep_cancelled"):
        if name in a:
            a[name] = keep(a[name])
    return c.queue_config(queue, **a)


def group_config(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    queue, group = positional(a, "queue", "group")
    for name in ("max_leased", "rate", "per"):
        if name in a:
            a[name] = inherit(a[name])
    return c.group_config(queue, group, **a)


def enqueue_and_wait(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    (id,) = positional(a, "id")
    return c.enqueue_and_wait(id, a.pop("wait", 0), **a)


def suspend(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    """C3.23: the method answers the token or None (refused); the wire's
    refusal is false."""
    token = c.suspend(*positional(a, *METHODS["suspend"][1]), **a)
    return False if token is None else token


# Each protocol op is the Client method ops.json names for it (its `method`,
# else the op's own name), its required fields (in ops.json's order) passed
# as positional parameters, the rest as keywords: read from ops.json, not
# typed here (issue 57). HOOKS are the ops whose call says more than that.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "protocol", "ops"))

from generate import load, op_fields  # noqa: E402


def _methods() -> Dict[str, Tuple[str, List[str]]]:
    spec = load()
    return {op["name"]: (op.get("method", op["name"]),
                         [n for n, f in op_fields(spec, op).items() if f.get("required")])
            for op in spec["ops"]}


METHODS = _methods()

HOOKS: Dict[str, Callable[[fenceq.Client, Dict[str, Any]], Any]] = {
    "enqueue": enqueue,
    "enqueue_many": enqueue_many,
    "complete_many": complete_many,
    "purge": purge,
    "queue_config": queue_config,
    "group_config": group_config,
    "enqueue_and_wait": enqueue_and_wait,
    "suspend": suspend,
}


def call(c: fenceq.Client, op: str, a: Dict[str, Any]) -> Any:
    if op in HOOKS:
        return HOOKS[op](c, a)
    method, required = METHODS[op]
    return getattr(c, method)(*positional(a, *required), **a)


class Session:
    def __init__(self) -> None:
        self.client: Optional[fenceq.Client] = None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def handle(self, op: str, args: Dict[str, Any]) -> Any:
        if op == "hello":
            return {"client": "python", "version": getattr(fenceq, "__version__", "")}
        if op == "connect":
            self.close()
            self.client = fenceq.Client(args["endpoint"], timeout=float(args["timeout"]))
            return True
        if op == "close":
            self.close()
            return True
        if op == "close_keep":
            # Closed, but kept: the next calls are made on the closed client.
            if self.client is None:
                raise ValueError("close_keep before connect")
            self.client.close()
            return True
        if op == "call_from_thread":
            return self.from_thread(args)
        if op not in METHODS:
            raise Unsupported(f"no op {op!r} in this adapter")
        if self.client is None:
            raise ValueError("a protocol op before connect")
        try:
            return call(self.client, op, from_json(args))
        except TypeError as e:
            # The client refused the call's shape before sending (a field its
            # method has no parameter for, an entry with a key its op does
            # not take): it cannot make this call.
            raise Unsupported(str(e)) from None

    def from_thread(self, args: Dict[str, Any]) -> Any:
        """`op` from a second thread, `after` seconds into `hold`, the call
        this (the client's own) thread makes meanwhile."""
        hold, after = args["hold"], float(args.get("after", 0.3))
        answers: Dict[str, Any] = {}

        def second() -> None:
            time.sleep(after)
            answers["thread"] = outcome(self, args["op"], dict(args.get("args") or {}))

        thread = threading.Thread(target=second)
        thread.start()
        answers["owner"] = outcome(self, hold["op"], dict(hold.get("args") or {}))
        thread.join()
        return answers


def outcome(session: Session, op: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """A call's answer: {"ok": true, "result": R} or {"ok": false, "error": {code, message}}."""
    try:
        return {"ok": True, "result": to_json(session.handle(op, args))}
    except fenceq.FenceqError as e:
        return {"ok": False, "error": {"code": e.code, "message": str(e) or e.code}}
    except Unsupported as e:
        return {"ok": False, "error": {"code": "unsupported", "message": str(e)}}
    except (ValueError, KeyError) as e:
        return {"ok": False, "error": {"code": "adapter", "message": repr(e)}}


def answer(session: Session, line: str) -> Dict[str, Any]:
    try:
        request = json.loads(line)
        seq, op, args = request["seq"], request["op"], request.get("args") or {}
    except (ValueError, KeyError, TypeError) as e:
        return {"seq": None, "ok": False, "error": {"code": "adapter", "message": str(e)}}
    return {"seq": seq, **outcome(session, op, dict(args))}


def main() -> int:
    session = Session()
    try:
        for line in sys.stdin:
            if line.strip():
                reply = answer(session, line)
                sys.stdout.write(json.dumps(reply, allow_nan=False) + "\n")
                sys.stdout.flush()
    finally:
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
