"""Values between msgpack, the adapter line protocol's JSON, and comparisons.

In adapter JSON a msgpack bin is ``{"$bin": "<hex>"}`` (README, "Values in
JSON"); everything else is JSON as is. Comparisons follow the vectors'
README: numbers by value (110 == 110.0, a bool is not a number), maps by
their keys (all of them, or the expected ones for a subset), arrays in order.
"""

from __future__ import annotations

import math
from typing import Any, List

BIN = "$bin"


def to_json(value: Any) -> Any:
    """A decoded msgpack value as adapter JSON (bytes become {"$bin": hex})."""
    if isinstance(value, (bytes, bytearray)):
        return {BIN: bytes(value).hex()}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def from_json(value: Any) -> Any:
    """Adapter JSON as the value msgpack would decode ({"$bin": hex} becomes bytes)."""
    if isinstance(value, dict):
        if set(value) == {BIN} and isinstance(value[BIN], str):
            return bytes.fromhex(value[BIN])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


# The largest integer every JSON reader holds exactly (JavaScript's numbers
# are doubles): a request with a larger one goes raw.
MAX_SAFE_INTEGER = 2**53 - 1


def json_safe(value: Any) -> bool:
    """Whether the value can be written as adapter JSON that every adapter
    reads back unchanged: string map keys, finite numbers, integers within
    +-(2^53 - 1)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) <= MAX_SAFE_INTEGER
    if isinstance(value, dict):
        return all(isinstance(k, str) and json_safe(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(json_safe(v) for v in value)
    return value is None or isinstance(value, (bool, int, str, bytes, bytearray))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def differences(expected: Any, actual: Any, subset: bool, where: str = "result") -> List[str]:
    """Where ``actual`` differs from ``expected`` (empty: they match)."""
    if _is_number(expected) and _is_number(actual):
        return [] if expected == actual else [f"{where}: expected {expected!r}, got {actual!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected a map, got {actual!r}"]
        out: List[str] = []
        for key, value in expected.items():
            if key not in actual:
                out.append(f"{where}.{key}: missing")
            else:
                out.extend(differences(value, actual[key], subset, f"{where}.{key}"))
        if not subset:
            out.extend(f"{where}.{key}: not expected (value {actual[key]!r})"
                       for key in actual if key not in expected)
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out.extend(differences(e, a, subset, f"{where}[{i}]"))
        return out
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


def reply_differences(expected: dict, reply: Any, subset: bool, with_rid: bool) -> List[str]:
    """A reply (the daemon's decoded map, or an adapter line turned into one)
    against a vector step's ``reply``, by the vectors' README: an error by
    ``ok``, ``code`` and a non-empty message; a result by value or subset.
    ``with_rid``: compare ``rid`` too (raw steps; a client sends its own)."""
    if not isinstance(reply, dict):
        return [f"reply is not a map: {reply!r}"]
    out: List[str] = []
    if with_rid and ("rid" in expected or "rid" in reply):
        out.extend(differences(expected.get("rid", "<absent>"), reply.get("rid", "<absent>"),
                               False, "rid"))
    if "error" in expected:
        error = reply.get("error")
        if reply.get("ok") is not False or not isinstance(error, dict):
            return out + [f"expected error {expected['error']['code']!r}, got {reply!r}"]
        if error.get("code") != expected["error"]["code"]:
            out.append(f"expected error {expected['error']['code']!r}, got {error.get('code')!r}"
                       f" ({error.get('message')!r})")
        if not isinstance(error.get("message"), str) or not error.get("message"):
            out.append(f"error message must be a non-empty string, got {error.get('message')!r}")
        return out
    if reply.get("ok") is not True or "result" not in reply:
        return out + [f"expected a result {expected.get('result')!r}, got {reply!r}"]
    return out + differences(expected.get("result"), reply.get("result"), subset)
