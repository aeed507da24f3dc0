"""Counting checks: each one passes or fails, and a failure says why."""

from __future__ import annotations

import sys
from typing import List


class Results:
    def __init__(self, adapter: str, verbose: bool = False) -> None:
        self.adapter = adapter
        self.verbose = verbose
        self.passed = 0
        self.failed: List[str] = []
        self.not_applicable_count = 0

    def check(self, name: str, problems: List[str]) -> bool:
        """One check: passed when ``problems`` is empty, else failed with them."""
        if problems:
            self.failed.append(name)
            print(f"FAIL [{self.adapter}] {name}", flush=True)
            for problem in problems[:8]:
                print(f"     {problem}", flush=True)
            return False
        self.passed += 1
        if self.verbose:
            print(f"ok   [{self.adapter}] {name}", flush=True)
        return True

    def not_applicable(self, name: str, why: str) -> None:
        """A check that does not apply to this client (it answered
        `unsupported` for it, as its documentation allows): printed always,
        counted apart, neither passed nor failed."""
        self.not_applicable_count += 1
        print(f"n/a  [{self.adapter}] {name}: {why}", flush=True)

    def note(self, text: str) -> None:
        print(f"     [{self.adapter}] {text}", file=sys.stdout, flush=True)
