#!/usr/bin/python3
"""Every relative link of the repository's Markdown resolves.

    /usr/bin/python3 scripts/check_links.py [ROOT]

Reads every *.md file under ROOT (default: the repository; not .git,
node_modules or build*/ folders) and checks each link and image that is not
a URL (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`,
`![alt](path)`): the path must exist, relative to the file's folder, and an
anchor into a Markdown file must be one of its headings as GitHub names
them (lower case, punctuation dropped, spaces to hyphens; a repeated
heading gets -1, -2, ...) or an explicit `<a id="...">`/`<a name="...">`.
Links inside code blocks and `inline code` are not links. Fails naming
file:line for each broken one. Standard library only.
"""

import os
import re
import sys

SKIP_DIRS = {".git", "node_modules"}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if re.match(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", line):
                fence = None
            continue
        yield n, line


def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)    # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, names = {}, set()
        for _, line in prose_lines(path):
            for m in EXPLICIT.finditer(line):
                names.add(m.group(1))
            h = HEADING.match(line)
            if h:
                base = slug(h.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                names.add(base if n == 0 else f"{base}-{n}")
        _anchors[path] = names
    return _anchors[path]


def markdown_files(root):
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(base, name)


def check(root):
    problems, count = [], 0
    for path in markdown_files(root):
        rel = os.path.relpath(path, root)
        for n, line in prose_lines(path):
            for m in LINK.finditer(INLINE_CODE.sub("", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, mailto:, file:
                    continue
                count += 1
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                if not os.path.exists(dest):
                    problems.append(f"{rel}:{n}: {target}: no such file "
                                    f"{os.path.relpath(dest, root)}")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    problems.append(f"{rel}:{n}: {target}: {os.path.relpath(dest, root)} "
                                    f"has no heading #{anchor}")
    return count, problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    count, problems = check(root)
    for p in problems:
        print(f"FAIL {p}")
    print(f"check_links: {count} relative links, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
