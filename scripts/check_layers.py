#!/usr/bin/python3
"""The daemon's layers (docs/architecture.md, "Folders and layers"): an
#include may point to its own folder or to a folder below it, never up nor
sideways. Run by the build (daemon/CMakeLists.txt: a change of any daemon
source runs it again, and an include that points up fails the build) and by
ctest (`layers: ...`, with --self-test: a tree with an upward include is
refused), which also checks that docs/architecture.md's table of folders
names every folder at its layer and every file of each, and that every path
the page names is in the tree (the build does not:
a doc is no reason to fail a build).

    check_layers.py [ROOT]        check ROOT (the repository; default: here)
    check_layers.py --self-test   check that the checker refuses what it must
    check_layers.py --stamp FILE  touch FILE when the check passes (the build)

The ground of the whole tree is protocol/ (its headers, fenceq_protocol/...):
everything may include it, and it includes nothing of the daemon's nor of the
clients' (clients/cpp/include/fenceq/...). The daemon includes no client
header, and the C++ client and the conformance adapters no daemon header.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# Each folder of daemon/ and its rank: a file may include a header of its own
# folder, or of a folder of lower rank. Folders of the same rank are
# independent of each other (SQLite and PostgreSQL, the store contract and
# the cron parser).
LAYERS = {
    "base": 1,               # logging, options, metrics text, memory policy, notify
    "storage": 2,            # the store contract: Store, job rules, rows, errors
    "schedules": 2,          # cron expressions
    "storage/sqlite": 3,     # the SQLite store
    "storage/pg": 3,         # the PostgreSQL store
    "outbox": 4,             # --outbox: the application's outbox
    "execution": 5,          # the executor, its parts, the counters, the clock
    "transport": 6,          # the ROUTER sockets and the serving loop
    "http": 7,               # /metrics, /healthz, the dashboard
    "service": 8,            # main.cpp, and the choice of store
}
SOURCES = (".cpp", ".hpp", ".h", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def folder_of(path: str) -> str | None:
    """A daemon file's layer folder (daemon/storage/pg/x.cpp: storage/pg)."""
    parts = Path(path).parts
    if not parts or parts[0] != "daemon" or len(parts) < 3:
        return None
    two = "/".join(parts[1:3])
    return two if two in LAYERS else parts[1]


def tracked(root: Path, *folders: str, every: bool = False) -> list[str]:
    """The files of `folders` (daemon/ and protocol/ by default) in git, or
    on disk outside a repository; sources only unless `every`."""
    folders = folders or ("daemon", "protocol", "clients/cpp", "conformance")
    try:
        out = subprocess.check_output(["git", "-C", str(root), "ls-files", *folders],
                                      text=True, stderr=subprocess.DEVNULL).split()
        if not out:
            raise FileNotFoundError
    except (OSError, subprocess.CalledProcessError):
        out = sorted(str(p.relative_to(root)) for d in folders
                     for p in (root / d).rglob("*") if p.is_file())
    return [f for f in out if every or f.endswith(SOURCES)]


def is_protocol(root: Path, name: str) -> bool:
    """A header of protocol/include (fenceq_protocol/..., fenceq/types.hpp)."""
    return name.startswith("fenceq_protocol/") or (root / "protocol" / "include" / name).is_file()


def check(root: Path) -> list[str]:
    problems = []
    for f in tracked(root):
        text = (root / f).read_text(errors="replace")
        here = folder_of(f)
        for lineno, name in ((text.count("\n", 0, m.start()) + 1, m.group(1))
                             for m in INCLUDE.finditer(text)):
            where = f"{f}:{lineno}: #include \"{name}\""
            if f.startswith(("clients/", "conformance/")):
                # Above protocol/, beside the daemon: none of its headers.
                if "/" in name and name.split("/")[0] in {l.split("/")[0] for l in LAYERS}:
                    problems.append(f"{where}: a daemon header, in a client")
                continue
            if name.startswith("fenceq/") and not is_protocol(root, name):
                problems.append(f"{where}: a client's header, above the daemon and protocol/")
                continue
            if f.startswith("protocol/"):
                if "/" in name and not is_protocol(root, name):
                    problems.append(f"{where}: protocol/ is the ground: it includes only its own")
                continue
            if here is None or is_protocol(root, name):
                continue
            if "/" not in name:
                problems.append(f"{where}: a daemon include names its folder "
                                f"(\"{here}/{name}\" or the folder it is in)")
                continue
            target = folder_of("daemon/" + name)
            if target is None or target not in LAYERS:
                problems.append(f"{where}: not a folder of the daemon's layers")
            elif here not in LAYERS:
                problems.append(f"{f}: daemon/{here}/ is not in scripts/check_layers.py's LAYERS")
            elif target != here and LAYERS[target] >= LAYERS[here]:
                how = "up" if LAYERS[target] > LAYERS[here] else "sideways"
                problems.append(f"{where}: points {how}, from {here} (layer {LAYERS[here]}) "
                                f"to {target} (layer {LAYERS[target]})")
    return problems


def check_doc(root: Path) -> list[str]:
    """docs/architecture.md's "Folders and layers" table: a row per folder of
    LAYERS, at its layer, naming each of its files (by stem)."""
    doc = root / "docs" / "architecture.md"
    if not doc.is_file():
        return []
    text = doc.read_text()
    start = text.find("## Folders and layers")
    if start < 0:
        return [f"{doc}: no section \"Folders and layers\""]
    end = text.find("\n## ", start + 1)
    rows = {}
    for line in text[start:end if end > 0 else None].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`") and cells[1].endswith("/`"):
            rows[cells[1].strip("`").rstrip("/")] = (cells[0], cells[3])
    problems = []
    for folder, rank in LAYERS.items():
        if folder not in rows:
            problems.append(f"docs/architecture.md: no row for daemon/{folder}/")
            continue
        layer, files = rows[folder]
        if layer != str(rank):
            problems.append(f"docs/architecture.md: daemon/{folder}/ is at layer {rank}, "
                            f"not {layer}")
        named = set(re.findall(r"`([^`]+)`", files))
        for f in sorted(tracked(root, f"daemon/{folder}", every=True)):
            rel = Path(f).relative_to(f"daemon/{folder}")
            if len(rel.parts) > 1:
                if folder + "/" + rel.parts[0] not in LAYERS and rel.parts[0] + "/" not in named:
                    problems.append(f"docs/architecture.md: daemon/{folder}/'s row does not "
                                    f"name {rel.parts[0]}/")
                continue
            stem = rel.name if rel.suffix not in SOURCES else rel.stem
            if stem not in named and rel.name not in named:
                problems.append(f"docs/architecture.md: daemon/{folder}/'s row does not "
                                f"name {stem}")
    for folder in rows:
        if folder not in LAYERS:
            problems.append(f"docs/architecture.md: a row for {folder}/, not a layer")
    # Every path the page names is there: from the repository's root, or
    # from daemon/ (a folder of the layers), clients/cpp/ (the C++ client's
    # include/ and src/), protocol/include/ or daemon/http/ (web/).
    bases = ("", "daemon/", "clients/cpp/", "protocol/include/", "daemon/http/")
    for name in sorted(set(re.findall(r"`([^`\s]+/[^`\s]*)`", text))):
        if name.startswith("/") or "://" in name or "*" in name or "..." in name:
            continue
        if not any((root / (b + name)).exists() for b in bases):
            problems.append(f"docs/architecture.md: names {name}, which is not in the tree")
    return sorted(set(problems))


def self_test() -> int:
    cases = {
        "daemon/storage/store.hpp": ('#include "execution/executor.hpp"\n', "points up"),
        "daemon/storage/sqlite/a.cpp": ('#include "storage/pg/pg_store.hpp"\n', "sideways"),
        "daemon/execution/b.cpp": ('#include "executor.hpp"\n', "names its folder"),
        "daemon/base/c.cpp": ('#include "fenceq/client.hpp"\n', "a client's header"),
        "protocol/d.cpp": ('#include "storage/store.hpp"\n', "the ground"),
        "daemon/transport/e.cpp": ('#include "storage/store.hpp"\n#include "base/x.hpp"\n', None),
    }
    failed = 0
    for path, (text, want) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / path
            p.parent.mkdir(parents=True)
            p.write_text(text)
            got = check(Path(tmp))
            ok = (not got) if want is None else (len(got) == 1 and want in got[0])
            print(f"{'ok  ' if ok else 'FAIL'} {path}: {got or 'accepted'}")
            failed += not ok
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--self-test"]:
        return self_test()
    stamp = None
    if argv[1:2] == ["--stamp"]:
        stamp, argv = argv[2], argv[:1] + argv[3:]
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = check(root) + ([] if stamp else check_doc(root))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} problem(s) with the layers "
              "(docs/architecture.md, \"Folders and layers\")", file=sys.stderr)
        return 1
    if stamp:
        Path(stamp).touch()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
