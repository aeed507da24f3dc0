"""The Node client's tables, from ops.json: clients/node/lib/ops_gen.js.

An emitter for generate.py (it loads every protocol/ops/emit_*.py): ``kept``
answers the file kept in the repository; ``generate.py --write`` writes it and
``generate.py --check`` fails when it differs.

ops_gen.js holds the op names, the ops that carry `now`, each op's option
fields (its optional fields, JS camelCase name -> wire name, in ops.json's
order, `now` last when the op carries it), each batch field's entry kind and
each entry kind's fields, and each op's answer with the shapes of ops.json's
"answers" section as data (lib/answers.js reads them). Before writing
anything it checks that section: every op's answer names one of its entries,
every entry is some op's answer, every shape is well formed, and every
request field a shape reads (`when`'s `given`, `entries`, `max_length`) is a
field of each op that answers it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_OPS = ROOT / "clients" / "node" / "lib" / "ops_gen.js"

TYPES = {"str", "int", "number", "bool", "nil", "bin", "map", "array"}
# What each form of shape may say (ops.json's "answers" section, its "about").
SHAPE_KEYS = {"type", "min", "keys", "optional", "values", "include", "record", "items", "entries",
              "max_length", "one_of", "when", "then", "else"}
RECORD_KEYS = {"keys", "optional", "values"}


def fail(message: str) -> None:
    raise SystemExit(f"protocol/ops/ops.json: answers: {message} (protocol/ops/emit_node.py)")


def camel(name: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def named_shapes(spec: dict) -> tuple[dict, dict]:
    """The section's answers and its helper shapes, checked for form."""
    section = spec.get("answers")
    if not isinstance(section, dict):
        fail("ops.json has no \"answers\" section")
    if not isinstance(section.get("about"), str) or not section["about"]:
        fail("no \"about\"")
    shapes = section.get("shapes", {})
    if not isinstance(shapes, dict):
        fail("\"shapes\" is not an object")
    answers = {k: v for k, v in section.items() if k not in ("about", "shapes")}
    both = sorted(set(answers) & set(shapes))
    if both:
        fail(f"{both} named both as an answer and as a shape")
    return answers, shapes


class Checker:
    """Walks a shape with the request fields it may read (an op's, or an
    entry kind's inside `entries`)."""

    def __init__(self, spec: dict, op_fields, answers: dict, shapes: dict):
        self.spec, self.op_fields, self.answers, self.shapes = spec, op_fields, answers, shapes

    def resolve(self, name: str, where: str):
        if name in self.answers:
            return self.answers[name]
        if name in self.shapes:
            return self.shapes[name]
        fail(f"{where}: '{name}' names no answer and no shape")

    def field_at(self, path: str, fields: dict, where: str) -> dict:
        head, _, rest = path.partition(".")
        if head not in fields:
            fail(f"{where}: the request has no field '{head}' (of '{path}')")
        field = fields[head]
        if not rest:
            return field
        if "entries" not in field:
            fail(f"{where}: '{head}' holds no entries (of '{path}')")
        return self.field_at(rest, self.spec["entries"][field["entries"]], where)

    def types(self, shape, where: str) -> set:
        """The wire types a shape allows, following names, `one_of` and `when`."""
        if isinstance(shape, str):
            return self.types(self.resolve(shape, where), where)
        if "one_of" in shape:
            return set().union(*(self.types(s, where) for s in shape["one_of"]))
        if "when" in shape:
            return self.types(shape["then"], where) | self.types(shape["else"], where)
        return set(shape["type"].split("|"))

    def check(self, shape, fields: dict, where: str, seen: tuple = ()) -> None:
        if isinstance(shape, str):
            if shape in seen:
                fail(f"{where}: '{shape}' refers to itself")
            self.check(self.resolve(shape, where), fields, f"{where} > {shape}", seen + (shape,))
            return
        if not isinstance(shape, dict):
            fail(f"{where}: a shape is a name or an object, not {json.dumps(shape)}")
        unknown = sorted(set(shape) - SHAPE_KEYS)
        if unknown:
            fail(f"{where}: unknown keys {unknown} (one of {sorted(SHAPE_KEYS)})")
        forms = [k for k in ("type", "one_of", "when") if k in shape]
        if len(forms) != 1:
            fail(f"{where}: a shape has exactly one of type, one_of, when (has {forms})")
        if "when" in shape:
            if set(shape) != {"when", "then", "else"}:
                fail(f"{where}: `when` goes with `then` and `else` alone")
            given = shape["when"].get("given") if isinstance(shape["when"], dict) else None
            if set(shape["when"]) != {"given"} or not isinstance(given, list) or not given:
                fail(f"{where}: `when` is {{\"given\": [request fields]}}")
            for name in given:
                self.field_at(name, fields, where)
            self.check(shape["then"], fields, f"{where} (then)", seen)
            self.check(shape["else"], fields, f"{where} (else)", seen)
            return
        if "one_of" in shape:
            if set(shape) != {"one_of"} or not isinstance(shape["one_of"], list) or len(shape["one_of"]) < 2:
                fail(f"{where}: `one_of` is a list of two shapes or more, alone")
            for i, s in enumerate(shape["one_of"]):
                self.check(s, fields, f"{where} (one_of {i})", seen)
            return
        types = shape["type"].split("|")
        for t in types:
            if t not in TYPES:
                fail(f"{where}: type '{shape['type']}' (each one of {sorted(TYPES)})")
        for key, needs in (("min", "int"), ("keys", "map"), ("optional", "map"), ("values", "map"),
                           ("include", "map"), ("record", "map"), ("items", "array"),
                           ("entries", "array"), ("max_length", "array")):
            if key in shape and needs not in types:
                fail(f"{where}: `{key}` is for a {needs}, and the type is '{shape['type']}'")
        if "min" in shape and not isinstance(shape["min"], int):
            fail(f"{where}: `min` is an int")
        self.check_map(shape, fields, where, seen)
        for name in shape.get("include", []):
            included = self.resolve(name, where)
            if not isinstance(included, dict) or "map" not in included.get("type", "").split("|"):
                fail(f"{where}: include '{name}' is not a map shape")
            self.check(name, fields, where, seen)
        if "record" in shape:
            record = shape["record"]
            if not isinstance(record, dict) or not record or set(record) - RECORD_KEYS:
                fail(f"{where}: `record` holds {sorted(RECORD_KEYS)} and nothing else")
            self.check_map(record, fields, f"{where} (record)", seen)
        if "items" in shape:
            item_fields = fields
            if "entries" in shape:
                field = self.field_at(shape["entries"], fields, where)
                if "entries" not in field or "array" not in field["type"].split("|"):
                    fail(f"{where}: entries '{shape['entries']}' is not a request field holding an array of entries")
                item_fields = self.spec["entries"][field["entries"]]
            self.check(shape["items"], item_fields, f"{where} (items)", seen)
        elif "entries" in shape:
            fail(f"{where}: `entries` goes with `items`")
        if "max_length" in shape:
            field = self.field_at(shape["max_length"], fields, where)
            if field["type"] != "int":
                fail(f"{where}: max_length '{shape['max_length']}' is not an int field of the request")

    def check_map(self, shape: dict, fields: dict, where: str, seen: tuple) -> None:
        for part in ("keys", "optional"):
            if part in shape:
                if not isinstance(shape[part], dict):
                    fail(f"{where}: `{part}` is an object of key names to shapes")
                for key, s in shape[part].items():
                    self.check(s, fields, f"{where}.{key}", seen)
        both = sorted(set(shape.get("keys", {})) & set(shape.get("optional", {})))
        if both:
            fail(f"{where}: {both} both in keys and in optional")
        if "values" in shape:
            self.check(shape["values"], fields, f"{where} (values)", seen)


def check_answers(spec: dict, op_fields) -> tuple[dict, dict]:
    answers, shapes = named_shapes(spec)
    used = set()
    checker = Checker(spec, op_fields, answers, shapes)
    for op in spec["ops"]:
        name = op["answer"]
        if name not in answers:
            fail(f"op '{op['name']}' answers '{name}', which has no entry (entries: {sorted(answers)})")
        used.add(name)
        checker.check(name, op_fields(spec, op), f"op '{op['name']}' answers '{name}'")
    unused = sorted(set(answers) - used)
    if unused:
        fail(f"{unused} answered by no op")
    for name, shape in shapes.items():
        # A shape that reads the request was checked with each op that answers with it.
        if not reads_request(shape, shapes):
            checker.check(shape, {}, f"shape '{name}'")
    return answers, shapes


def reads_request(shape, shapes: dict, seen: tuple = ()) -> bool:
    """Whether a shape reads request fields (it is then checked with each op that answers it)."""
    if isinstance(shape, str):
        return shape in shapes and shape not in seen and reads_request(shapes[shape], shapes, seen + (shape,))
    if not isinstance(shape, dict):
        return False
    if any(k in shape for k in ("when", "entries", "max_length")):
        return True
    parts = [shape.get(k) for k in ("items", "values", "then", "else")] + list(shape.get("one_of", []))
    for part in ("keys", "optional"):
        parts += list(shape.get(part, {}).values())
    parts += list(shape.get("record", {}).get("keys", {}).values()) + list(shape.get("record", {}).get("optional", {}).values())
    return any(reads_request(p, shapes, seen) for p in parts if p is not None)


def js(value) -> str:
    return json.dumps(value, indent=2)


def node_ops(spec: dict, op_fields) -> str:
    answers, shapes = check_answers(spec, op_fields)
    ops = [op["name"] for op in spec["ops"]]
    now_ops = [op["name"] for op in spec["ops"] if op["time"] != "none"]
    options, batch = {}, {}
    for op in spec["ops"]:
        fields = op_fields(spec, op)
        opts = {camel(n): n for n, f in fields.items() if not f.get("required")}
        if op["time"] != "none":
            opts["now"] = "now"
        options[op["name"]] = opts
        kinds = {n: f["entries"] for n, f in fields.items() if "entries" in f}
        if kinds:
            batch[op["name"]] = kinds
    entries = {kind: {camel(n): n for n in fields} for kind, fields in spec["entries"].items()}
    answer_of = {op["name"]: op["answer"] for op in spec["ops"]}
    parts = [
        "// Generated from protocol/ops/ops.json by protocol/ops/generate.py (protocol/ops/emit_node.py);",
        "// DO NOT EDIT: change ops.json and run protocol/ops/generate.py --write.",
        "'use strict';",
        "",
        "/** Every op's name, in ops.json's order. */",
        f"const OPS = {js(ops)};",
        "",
        "/** The ops that carry `now` under --clock client (ops.json: time optional or required). */",
        f"const NOW_OPS = {js(now_ops)};",
        "",
        "/**",
        " * Each op's optional fields, JS name -> wire name, in ops.json's order (its",
        " * includes first), `now` last when the op carries it.",
        " */",
        f"const OPTION_FIELDS = {js(options)};",
        "",
        "/** Each batch op's fields that hold entries: field -> entry kind (ENTRY_FIELDS). */",
        f"const BATCH_FIELDS = {js(batch)};",
        "",
        "/** Each entry kind's fields, JS name -> wire name, in ops.json's order. */",
        f"const ENTRY_FIELDS = {js(entries)};",
        "",
        "/** Each op's answer: its entry of ANSWERS. */",
        f"const ANSWER_OF = {js(answer_of)};",
        "",
        "/**",
        " * What each answer is on the wire (ops.json's \"answers\" section, whose",
        " * \"about\" says how to read a shape); SHAPES, the shapes they name.",
        " */",
        f"const ANSWERS = {js(answers)};",
        "",
        f"const SHAPES = {js(shapes)};",
        "",
        "module.exports = {",
        "  OPS, NOW_OPS, OPTION_FIELDS, BATCH_FIELDS, ENTRY_FIELDS, ANSWER_OF, ANSWERS, SHAPES,",
        "};",
    ]
    return "\n".join(parts) + "\n"


def kept(spec: dict, op_fields) -> dict:
    return {NODE_OPS: node_ops(spec, op_fields)}
