"""Group `vectors`: every step of protocol/vectors/*.json, through the adapter
when the step is a call a client makes, else raw (README, "vectors").

OPS is each op's wire fields, read from protocol/ops/ops.json (the one
declaration of each op): required ones, then optional ones. REQUIRED names the ops, and the fields of
each, that every adapter must carry: an `unsupported` for them fails.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import msgpack

from .adapter import Adapter, AdapterFailure
from .daemon import Daemon, Raw
from .report import Results
from .values import from_json, json_safe, reply_differences, to_json

# The one declaration of every op (issue 57): its fields and its entries'.
_SPEC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                          "protocol", "ops", "ops.json")


def _load_ops() -> Tuple[Dict[str, Tuple[List[str], List[str]]], Dict[str, Dict[str, List[str]]]]:
    with open(_SPEC_PATH, encoding="utf-8") as f:
        spec = json.load(f)
    ops: Dict[str, Tuple[List[str], List[str]]] = {}
    entries: Dict[str, Dict[str, List[str]]] = {}
    for op in spec["ops"]:
        fields: Dict[str, Any] = {}
        for inc in op.get("include", []):
            kind, _, name = inc.partition(".")
            fields.update(spec[kind][name])
        fields.update(op.get("fields", {}))
        required = [n for n, f in fields.items() if f.get("required")]
        optional = [n for n, f in fields.items() if not f.get("required")]
        # `now` is every op's that uses time (the envelope's; refused under
        # --clock server, which the vectors' suites say).
        if op["time"] != "none":
            optional.append("now")
        ops[op["name"]] = (required, optional)
        entries[op["name"]] = {n: list(spec["entries"][f["entries"]])
                               for n, f in fields.items() if "entries" in f}
    return ops, entries


# op: (required fields, optional fields), as on the wire; ENTRIES: op ->
# field -> the keys its entries may have.
OPS, ENTRIES = _load_ops()

# The required ops and the fields each must carry (README, "Required ops");
# for a batch, the keys its entries may have.
REQUIRED: Dict[str, List[str]] = {
    "ping": [],
    "enqueue": ["id", "queue", "payload", "priority", "delay", "max_attempts", "now"],
    "state": ["id"],
    "claim": ["id", "owner", "ttl", "now"],
    "renew": ["id", "owner", "fence", "ttl", "now", "progress"],
    "complete": ["id", "owner", "fence", "result", "now"],
    "release": ["id", "owner", "fence"],
    "claim_next": ["queue", "owner", "ttl", "wait", "now"],
    "complete_many": ["items", "now"],
    "renew_many": ["items", "ttl", "now"],
    "await": ["id", "wait"],
}
REQUIRED_ENTRIES = {"complete_many": {"id", "owner", "fence", "result"},
                    "renew_many": {"id", "owner", "fence"}}


def route(step: Dict[str, Any]) -> Tuple[Optional[str], Dict[str, Any], str]:
    """(op, fields) for a step an adapter call can make, or (None, {}, why it goes raw)."""
    try:
        request = msgpack.unpackb(bytes.fromhex(step["request_hex"]), raw=False)
    except Exception:  # noqa: BLE001 - any undecodable payload goes raw
        return None, {}, "not msgpack"
    if not isinstance(request, dict) or not isinstance(request.get("op"), str):
        return None, {}, "not a map with a str op"
    fields = dict(request)
    op = fields.pop("op")
    rid = fields.pop("rid", None)
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (int, str))):
        return None, {}, "a rid no client sends"
    code = step["reply"].get("error", {}).get("code") if "error" in step["reply"] else None
    if code in ("bad_request", "unknown_op"):
        return None, {}, f"a {code} request"
    if op not in OPS:
        return None, {}, "no such op"
    required, optional = OPS[op]
    if any(k not in fields for k in required) or any(k not in required + optional for k in fields):
        return None, {}, "fields outside the op's"
    for name, keys in ENTRIES[op].items():
        value = fields.get(name)
        for entry in value if isinstance(value, list) else [value]:
            if isinstance(entry, dict) and any(k not in keys for k in entry):
                return None, {}, "fields outside the op's entries"
    if not json_safe(fields):
        return None, {}, "a value JSON cannot carry"
    return op, fields, ""


def must_carry(op: str, fields: Dict[str, Any]) -> bool:
    """Whether an adapter must make this call (a required op with its required fields)."""
    if op not in REQUIRED or any(k not in REQUIRED[op] for k in fields):
        return False
    keys = REQUIRED_ENTRIES.get(op)
    if keys is None:
        return True
    entries = fields.get("items")
    return isinstance(entries, list) and all(isinstance(e, dict) and set(e) <= keys
                                             for e in entries)


def _raw_step(raw: Raw, step: Dict[str, Any]) -> List[str]:
    """The step's bytes sent by the runner itself, the reply checked as the
    vectors' README says (its rid and, when given, its exact bytes too)."""
    reply_bytes = raw.send_bytes(bytes.fromhex(step["request_hex"]))
    if reply_bytes is None:
        return ["raw: no reply within 10 s"]
    problems = []
    if "reply_hex" in step and reply_bytes.hex() != step["reply_hex"]:
        problems.append(f"raw: reply bytes {reply_bytes.hex()} != reply_hex {step['reply_hex']}")
    reply = msgpack.unpackb(reply_bytes, raw=False)
    subset = step.get("compare") == "subset"
    return problems + [f"raw: {p}" for p in reply_differences(step["reply"], reply, subset, True)]


class Counts:
    """How the steps went: through the adapter, raw by the routing rules, or
    raw because the adapter answered `unsupported` (per op)."""

    def __init__(self) -> None:
        self.adapter = 0
        self.raw = 0
        self.unsupported: Dict[str, int] = {}

    def summary(self) -> str:
        total = sum(self.unsupported.values())
        ops = ", ".join(f"{op} {n}" for op, n in sorted(self.unsupported.items()))
        return (f"vectors: {self.adapter} steps through the adapter, {self.raw} raw by design, "
                f"{total} raw as unsupported" + (f" ({ops})" if ops else ""))


def _adapter_step(adapter: Adapter, raw: Raw, step: Dict[str, Any], op: str,
                  fields: Dict[str, Any], label: str, results: Results, counts: Counts) -> None:
    """A step through the adapter (raw after an allowed `unsupported`)."""
    reply = adapter.call(op, to_json(fields))
    if reply.code == "unsupported":
        if must_carry(op, fields):
            results.check(label, [f"a required op answered unsupported: {reply.message}"])
            return
        if results.verbose:
            results.note(f"{label}: unsupported ({reply.message}), sent raw")
        counts.unsupported[op] = counts.unsupported.get(op, 0) + 1
        results.check(label, _raw_step(raw, step))
        return
    counts.adapter += 1
    line = dict(reply.line)
    if "result" in line:
        line["result"] = from_json(line["result"])
    problems = reply_differences(step["reply"], line, step.get("compare") == "subset", False)
    asked = json.dumps(to_json(fields))[:300]
    results.check(label, [f"{op} {asked}: {p}" for p in problems])


def run_suite(adapter: Adapter, suite: Dict[str, Any], results: Results, counts: Counts) -> None:
    """One suite on its own fresh daemon; each step is one check."""
    name = os.path.basename(suite["file"])
    with Daemon(suite["clock"]) as daemon, Raw(daemon.endpoint) as raw:
        connected = adapter.connect(daemon.endpoint, 5.0)
        if not results.check(f"vectors {name}: connect", [] if connected.ok else [repr(connected)]):
            return
        for step in suite["steps"]:
            label = f"vectors {name}: {step['name']}"
            op, fields, _ = route(step)
            if op is None:
                counts.raw += 1
                results.check(label, _raw_step(raw, step))
            else:
                _adapter_step(adapter, raw, step, op, fields, label, results, counts)


def load_suites(folder: str) -> List[Dict[str, Any]]:
    suites = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path, encoding="utf-8") as f:
            suite = json.load(f)
        suite["file"] = path
        suites.append(suite)
    return suites


def _start(command: str) -> Adapter:
    adapter = Adapter(command, "vectors")
    adapter.hello()
    return adapter


def run(command: str, folder: str, results: Results,
        max_unsupported: Optional[int] = None) -> None:
    """Every suite of ``folder``, through one adapter process (started again
    after one that broke the line protocol)."""
    suites = load_suites(folder)
    if not results.check("vectors: the suites are there",
                         [] if suites else [f"no *.json in {folder}"]):
        return
    counts = Counts()
    adapter = _start(command)
    try:
        for suite in suites:
            try:
                run_suite(adapter, suite, results, counts)
            except AdapterFailure as e:
                results.check(f"vectors {os.path.basename(suite['file'])}", [str(e)])
                adapter.close()
                adapter = _start(command)
    finally:
        adapter.close()
    results.note(counts.summary())
    unsupported = sum(counts.unsupported.values())
    if max_unsupported is not None:
        results.check(f"vectors: at most {max_unsupported} steps the adapter cannot make",
                      [] if unsupported <= max_unsupported else
                      [f"{unsupported} steps answered unsupported: a call this client made "
                       f"before it no longer makes, or new vector steps it cannot make "
                       f"(then raise --max-unsupported in the Makefile)"])
