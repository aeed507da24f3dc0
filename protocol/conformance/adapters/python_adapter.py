#!/usr/bin/python3
"""The conformance kit's adapter for the Python client (clients/python).

Reads one JSON request per line on stdin, makes the call with fenceq.Client
and prints the answer as one JSON line (protocol/conformance/README.md).
Each protocol op maps to the Client method of that name (CALLS below); the
method's answer is written back in the op's wire form (bin as {"$bin": hex}).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "clients", "python"))

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


def enqueue_and_wait(c: fenceq.Client, a: Dict[str, Any]) -> Any:
    (id,) = positional(a, "id")
    return c.enqueue_and_wait(id, a.pop("wait", 0), **a)


def call(method: str, *names: str) -> Callable[[fenceq.Client, Dict[str, Any]], Any]:
    """A method whose leading parameters are the fields ``names``, the rest keywords."""
    def run(c: fenceq.Client, a: Dict[str, Any]) -> Any:
        return getattr(c, method)(*positional(a, *names), **a)
    return run


CALLS: Dict[str, Callable[[fenceq.Client, Dict[str, Any]], Any]] = {
    "ping": call("ping"),
    "enqueue": enqueue,
    "state": call("state", "id"),
    "claim": call("claim", "id", "owner", "ttl"),
    "renew": call("renew", "id", "owner", "fence", "ttl"),
    "complete": call("complete", "id", "owner", "fence", "result"),
    "release": call("release", "id", "owner", "fence"),
    "claim_next": call("claim_next", "queue", "owner", "ttl"),
    "fail": call("fail", "id", "owner", "fence", "error"),
    "check": call("check", "id", "owner", "fence"),
    "retry": call("retry", "id"),
    "stats": call("stats"),
    "list": call("list"),
    "purge": purge,
    "metrics": call("metrics"),
    "complete_next": call("complete_and_claim_next", "id", "owner", "fence", "result", "queue",
                          "ttl"),
    "enqueue_many": enqueue_many,
    "complete_many": complete_many,
    "renew_many": call("renew_many", "items", "ttl"),
    "cancel": call("cancel", "id"),
    "job": call("job", "id"),
    "queue_config": queue_config,
    "await": call("await_job", "id"),
    "schedule_set": call("schedule_set", "name", "cron"),
    "schedule_delete": call("schedule_delete", "name"),
    "schedule_list": call("schedule_list"),
    "enqueue_and_wait": enqueue_and_wait,
    "results": call("results", "ids"),
    "snooze": call("snooze", "id", "owner", "fence", "delay"),
    "retry_many": call("retry_many", "queue"),
    "cancel_many": call("cancel_many", "queue"),
}


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
        if op not in CALLS:
            raise Unsupported(f"no op {op!r} in this adapter")
        if self.client is None:
            raise ValueError("a protocol op before connect")
        try:
            return CALLS[op](self.client, from_json(args))
        except TypeError as e:
            # The client refused the call's shape before sending (a field its
            # method has no parameter for, an entry with a key its op does
            # not take): it cannot make this call.
            raise Unsupported(str(e)) from None


def answer(session: Session, line: str) -> Dict[str, Any]:
    try:
        request = json.loads(line)
        seq, op, args = request["seq"], request["op"], request.get("args") or {}
    except (ValueError, KeyError, TypeError) as e:
        return {"seq": None, "ok": False, "error": {"code": "adapter", "message": str(e)}}
    try:
        return {"seq": seq, "ok": True, "result": to_json(session.handle(op, dict(args)))}
    except fenceq.FenceqError as e:
        return {"seq": seq, "ok": False, "error": {"code": e.code, "message": str(e) or e.code}}
    except Unsupported as e:
        return {"seq": seq, "ok": False, "error": {"code": "unsupported", "message": str(e)}}
    except (ValueError, KeyError) as e:
        return {"seq": seq, "ok": False, "error": {"code": "adapter", "message": repr(e)}}


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
