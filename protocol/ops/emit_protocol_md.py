"""PROTOCOL.md's op reference, from ops.json and the prose beside it.

    kept: protocol/PROTOCOL.md   the part between its markers: one section
                                 per op, in ops.json's order, then one per
                                 batch entry kind

An op's section is its summary and facts (ops.json), its field table (each
field's type, whether it is required, its bounds and default from its kind in
ops.json's "kinds", with the limits of protocol/include/fenceq_protocol/limits.hpp
printed as their values, and `since`: the field's, else the op's, else
ops.json's top-level one), then the op's hand-written prose,
protocol/ops/doc/OP.md. Each op has such a file and each file an op. Its
relative links are written from its own folder (so that they resolve there
too) and rebased onto PROTOCOL.md's. The text outside the markers is
hand-written: the transport, limits, errors, events and the concepts the op
sections link to.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path
from typing import Callable, Dict

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROTOCOL = ROOT / "protocol" / "PROTOCOL.md"
DOC = HERE / "doc"
# The headers whose `inline constexpr T kName = value;` a kind may name.
HEADERS = [ROOT / "protocol" / "include" / "fenceq_protocol" / "limits.hpp",
           ROOT / "protocol" / "include" / "fenceq" / "types.hpp"]

BEGIN = "<!-- ops.json: begin (protocol/ops/generate.py --write writes this part; do not edit) -->"
END = "<!-- ops.json: end -->"
TIME_TEXT = {"none": "no", "optional": "optional", "required": "required under `--clock client`"}
LEASE_TEXT = {"none": "none", "always": "ends at `now + ttl`", "with_next": "with `next`: ends at `now + ttl`"}
BOUND_KEYS = ("bytes", "nonempty", "range", "above", "default")


def fail(message: str) -> None:
    raise SystemExit(f"emit_protocol_md.py: {message}")


def _arith(text: str):
    """A C++ constant's value: a string literal, or a number or a product or
    sum of numbers (`256 * 1024`, `1e9`); None for anything else."""
    text = text.strip()
    m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', text)
    if m:
        return json.loads(text)
    try:
        tree = ast.parse(text.replace("'", ""), mode="eval")
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
            a, b = ev(node.left), ev(node.right)
            return a * b if isinstance(node.op, ast.Mult) else a + b if isinstance(node.op, ast.Add) else a - b
        raise ValueError(text)

    try:
        return ev(tree.body)
    except ValueError:
        return None


def limits() -> dict:
    out: dict = {}
    for path in HEADERS:
        for m in re.finditer(r"inline\s+constexpr\s+[\w:<>]+\s+(k\w+)\s*=\s*([^;]+);", path.read_text()):
            value = _arith(m.group(2))
            if value is not None:
                out[m.group(1)] = value
    return out


def _value(v, lim: dict):
    """A kind's bound or default as a value: a limit's name is its value, a
    C++ string literal its text."""
    if isinstance(v, str):
        if v in lim:
            return lim[v]
        if v.startswith('"'):
            return json.loads(v)
        value = _arith(v)
        if value is None:
            fail(f"'{v}' is neither a limit of {', '.join(p.name for p in HEADERS)} nor a number")
        return value
    return v


def _num(x) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        x = int(x)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    return repr(x)


def _bytes(n: int) -> str:
    text = f"{_num(n)} bytes"
    if n >= 4096 and n % 1024 == 0:
        text += f" ({n // 1024 // 1024} MiB)" if n % (1024 * 1024) == 0 else f" ({n // 1024} KiB)"
    return text


def field_kind(spec: dict, name: str, field: dict) -> dict:
    """The kind of the field (its name's, or the one its `kind` names), with
    the field's own bounds on top; {} for a field of no kind (read by a
    hand-written reader, which says its bounds in the prose)."""
    kinds = spec.get("kinds", {})
    kind_name = field.get("kind", name)
    kind = dict(kinds[kind_name]) if kind_name in kinds and kind_name != "about" else {}
    for key in BOUND_KEYS:
        if key in field:
            kind[key] = field[key]
    return kind


def bounds(kind: dict, lim: dict) -> str:
    parts = []
    if "bytes" in kind:
        n = _value(kind["bytes"], lim)
        parts.append(("1.." + _bytes(n)) if kind.get("nonempty") else "≤ " + _bytes(n))
    elif kind.get("nonempty"):
        parts.append("not empty")
    if "range" in kind:
        lo, hi = (_value(v, lim) for v in kind["range"])
        if "above" in kind and _value(kind["above"], lim) >= lo:
            parts.append(f"> {_num(_value(kind['above'], lim))}, ≤ {_num(hi)}")
        else:
            parts.append(f"{_num(lo)}..{_num(hi)}")
    elif "above" in kind:
        parts.append(f"> {_num(_value(kind['above'], lim))}")
    return "; ".join(parts)


def default(kind: dict, lim: dict) -> str:
    if "default" not in kind:
        return ""
    v = _value(kind["default"], lim)
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'`"{v}"`' if isinstance(v, str) else _num(v)


def since(spec: dict, *holders: dict) -> str:
    """The first fenceqd version that has it: the field's, else its op's,
    else ops.json's top-level `since`."""
    for h in list(holders) + [spec]:
        if "since" in h:
            if not re.fullmatch(r"\d+\.\d+\.\d+", str(h["since"])):
                fail(f"since '{h['since']}' is not a fenceqd version (MAJOR.MINOR.PATCH)")
            return h["since"]
    fail("ops.json has no top-level `since` (the fenceqd version of every op and field that names none)")
    return ""


def field_rows(spec: dict, fields: dict, lim: dict, owner: dict, entry_note: bool = True) -> list:
    rows = ["| field | type | required | bounds | default | since | meaning |",
            "| ----- | ---- | -------- | ------ | ------- | ----- | ------- |"]
    for name, f in fields.items():
        kind = field_kind(spec, name, f)
        meaning = f.get("summary", "")
        if entry_note and "entries" in f:
            meaning = (meaning + "; " if meaning else "") + f"entries: [{f['entries']}](#entry-{f['entries']})"
        rows.append(f"| `{name}` | {f['type'].replace('|', ' or ')} | {'yes' if f.get('required') else ''} "
                    f"| {bounds(kind, lim)} | {'' if f.get('required') else default(kind, lim)} "
                    f"| {since(spec, f, owner)} | {meaning} |")
    return rows


LINK = re.compile(r"(\]\()([^)\s#]*)(#[^)\s]*)?(\))")


def rebase(text: str, source: Path) -> str:
    """The relative links of `source` (written from its folder) as PROTOCOL.md's."""
    def one(m: re.Match) -> str:
        target, anchor = m.group(2), m.group(3) or ""
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return m.group(0)
        path = (source.parent / target).resolve()
        if path == PROTOCOL:
            return f"{m.group(1)}{anchor}{m.group(4)}"
        rel = os.path.relpath(path, PROTOCOL.parent)
        if target.endswith("/"):
            rel += "/"
        return f"{m.group(1)}{rel}{anchor}{m.group(4)}"
    return LINK.sub(one, text)


def prose(spec: dict) -> dict:
    names = [op["name"] for op in spec["ops"]]
    files = {p.stem: p for p in sorted(DOC.glob("*.md"))}
    missing = [n for n in names if n not in files]
    stray = [n for n in files if n not in names]
    if missing or stray:
        fail("protocol/ops/doc/ has one OP.md per op: "
             + "; ".join(([f"none for {', '.join(missing)}"] if missing else [])
                         + ([f"{', '.join(s + '.md' for s in stray)} names no op"] if stray else [])))
    return {n: rebase(files[n].read_text().strip("\n"), files[n]) for n in names}


def reference(spec: dict, op_fields: Callable[[dict, dict], Dict[str, dict]]) -> str:
    lim = limits()
    texts = prose(spec)
    out = [BEGIN, "", "## Op reference", "",
           "One section per op, in the order of `protocol/ops/ops.json` (the one declaration of each op), "
           "written from it by `protocol/ops/generate.py --write`: the op's summary and facts, the fields it "
           "takes, then what it does (its prose is kept in `protocol/ops/doc/OP.md`). In a field table, "
           "*bounds* are what the daemon takes (a value of the right type outside them is `invalid_argument`, "
           "a value of another type `bad_request`; a field whose bounds are left blank is bounded as its "
           "prose says), *default* is what a request that leaves the field out gets, and *since* the first "
           "fenceqd version that takes the field (an older daemon refuses it with `invalid_argument`: see "
           "[Payload](#payload)). Every op may also carry the envelope's fields: "
           + ", ".join(f"`{n}` ({f['summary']})" for n, f in spec["envelope"].items())
           + ". Any other field is refused with `invalid_argument`.", "",
           "Ops: " + ", ".join(f"[`{op['name']}`](#{op['name']})" for op in spec["ops"]) + ".", ""]
    for op in spec["ops"]:
        out.append(f"### `{op['name']}`")
        out.append("")
        facts = [op["summary"][0].upper() + op["summary"][1:] + "."]
        if op.get("clause"):
            facts.append(f"Contract clause {op['clause']}.")
        facts.append(f"{'Writes' if op['writes'] else 'Reads'} the store; `now`: {TIME_TEXT[op['time']]}; "
                     f"lease: {LEASE_TEXT[op['lease']]}; answer: `{op['answer']}`"
                     + (" (a batch of up to 1,000 entries)" if op["batch"] else "")
                     + f"; since {since(spec, op)}.")
        if op.get("codec") == "custom":
            facts.append("Read by a hand-written reader (protocol/op_fields.cpp), not from the kinds: "
                         "where its bounds or defaults differ from the table's, the prose below says so.")
        out.append(" ".join(facts))
        out.append("")
        fields = op_fields(spec, op)
        out += field_rows(spec, fields, lim, op) if fields else ["No fields of its own."]
        out.append("")
        out.append(texts[op["name"]])
        out.append("")
    for kind, fields in spec["entries"].items():
        out.append(f"### Entry `{kind}`")
        out.append(f'<a id="entry-{kind}"></a>')
        out.append("")
        out += field_rows(spec, fields, lim, {}, False)
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def protocol_md(spec: dict, op_fields: Callable[[dict, dict], Dict[str, dict]]) -> str:
    text = PROTOCOL.read_text()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        return head + reference(spec, op_fields) + ("\n" + tail if tail else "")
    return text.rstrip("\n") + "\n\n" + reference(spec, op_fields)


def kept(spec: dict, op_fields: Callable[[dict, dict], Dict[str, dict]]) -> dict:
    return {PROTOCOL: protocol_md(spec, op_fields)}
