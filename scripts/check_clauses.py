#!/usr/bin/python3
"""Every contract clause the repository cites is defined in docs/contract.md.

    /usr/bin/python3 scripts/check_clauses.py [REPOSITORY_ROOT]

Tests, comments and docs cite clauses by id (`C3.5 stale complete keeps
result`, `C1-C4`). This script collects every id that docs/contract.md defines
(a heading `## C1 Storage`, or a list item starting with its bold id,
`- **C1.1** ...`), then scans the repository's text files for citations and
exits 1, naming file:line, for each cited id that is not defined. It also
fails when the contract defines an id twice or a sub-clause without its parent.

Skipped: .git, node_modules, build folders (build*/), caches, var/ (the data of
`make run`), and files that are not UTF-8 text. Standard library only.
"""

import os
import re
import sys

CONTRACT = os.path.join("docs", "contract.md")
# A citation: C1 to C4, optionally with sub-clause numbers (C3.5). Ranges such
# as C1-C4 or C3.3-C3.5 cite both ends.
CITATION = re.compile(r"\bC[1-4](?:\.[0-9]+)*\b")
# Definitions in docs/contract.md.
HEADING = re.compile(r"^#{2,6}\s+(C[1-4](?:\.[0-9]+)*)\b")
LIST_ITEM = re.compile(r"^\s*[-*]\s+\*\*(C[1-4](?:\.[0-9]+)*)\*\*")

SKIP_DIRS = {".git", "node_modules", "__pycache__", ".pytest_cache", ".mypy_cache"}
SKIP_TOP_DIRS = {"var"}
MAX_BYTES = 4 << 20


def defined_clauses(path, shown):
    """id -> line of its definition; problems found in the contract itself."""
    defined, problems = {}, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = HEADING.match(line) or LIST_ITEM.match(line)
            if not m:
                continue
            cid = m.group(1)
            if cid in defined:
                problems.append(f"{shown}:{n}: {cid} is defined twice "
                                f"(first on line {defined[cid]})")
            else:
                defined[cid] = n
    for cid, n in defined.items():
        parent = cid.rsplit(".", 1)[0]
        if parent != cid and parent not in defined:
            problems.append(f"{shown}:{n}: {cid} is defined but its parent {parent} is not")
    return defined, problems


def text_files(root):
    for top, dirs, files in os.walk(root):
        at_root = os.path.samefile(top, root)
        dirs[:] = sorted(d for d in dirs
                         if d not in SKIP_DIRS and not d.startswith("build")
                         and not (at_root and d in SKIP_TOP_DIRS))
        for name in sorted(files):
            path = os.path.join(top, name)
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            if os.path.getsize(path) > MAX_BYTES:
                continue
            with open(path, "rb") as f:
                data = f.read()
            if b"\0" in data:
                continue
            try:
                yield path, data.decode("utf-8")
            except UnicodeDecodeError:
                continue


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    contract = os.path.join(root, CONTRACT)
    if not os.path.isfile(contract):
        print(f"check_clauses: {contract} does not exist", file=sys.stderr)
        return 1
    defined, problems = defined_clauses(contract, CONTRACT)
    if not defined:
        problems.append(f"{CONTRACT}: defines no clause "
                        "(a heading '## C1 ...' or a list item '- **C1.1** ...')")

    citations, cited, files = 0, set(), 0
    for path, text in text_files(root):
        rel = os.path.relpath(path, root)
        found = False
        for n, line in enumerate(text.splitlines(), 1):
            for m in CITATION.finditer(line):
                found = True
                citations += 1
                cited.add(m.group(0))
                if m.group(0) not in defined:
                    problems.append(f"{rel}:{n}: {m.group(0)} is cited but not defined in "
                                    f"{CONTRACT}")
        files += found

    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_clauses: {len(problems)} problem(s); define the clause in {CONTRACT} "
              "or fix the citation", file=sys.stderr)
        return 1
    print(f"check_clauses: {citations} citations of {len(cited)} clause ids in {files} files, "
          f"all defined in {CONTRACT} ({len(defined)} clauses)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
