#!/usr/bin/python3
"""fenceq's client conformance kit: drives one client, through its adapter,
against real fenceqd daemons (README.md here says how, and what it checks).

    FENCEQD=build/bin/fenceqd /usr/bin/python3 conformance/run.py \\
        --name python --adapter '/usr/bin/python3 conformance/adapters/python_adapter.py'

Prints each failed check, then `N passed, N failed`; exits 1 on any failure,
2 when it cannot run at all.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kit import fake, faults, lifecycle, scenarios, vectors  # noqa: E402
from kit.adapter import AdapterFailure  # noqa: E402
from kit.daemon import REPO, fenceqd_binary  # noqa: E402
from kit.report import Results  # noqa: E402

GROUPS = {
    "vectors": None,  # needs the vectors folder: run() below
    "story": scenarios.story,
    "race": scenarios.race,
    "batch": scenarios.batch,
    "longpoll": scenarios.longpoll,
    "timeout": faults.timeout,
    "restart": faults.restart,
    "fake": fake.run,
    "lifecycle": lifecycle.run,
}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", required=True, help="the adapter's command line (shell-quoted)")
    p.add_argument("--name", default="adapter", help="the adapter's name in the report")
    p.add_argument("--only", default=",".join(GROUPS),
                   help=f"groups to run, comma-separated (default: all: {','.join(GROUPS)})")
    p.add_argument("--vectors", default=os.path.join(REPO, "protocol", "vectors"))
    p.add_argument("--max-unsupported", type=int, default=None, metavar="N",
                   help="fail when more than N vector steps went raw because the adapter "
                        "answered unsupported (default: no limit)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per passed check too")
    return p.parse_args()


def main() -> int:
    args = parse()
    groups = [g for g in args.only.split(",") if g]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        print(f"unknown group(s): {', '.join(unknown)}; known: {', '.join(GROUPS)}",
              file=sys.stderr)
        return 2
    if not os.access(fenceqd_binary(), os.X_OK):
        print(f"no fenceqd at {fenceqd_binary()}: build it or set FENCEQD", file=sys.stderr)
        return 2
    results = Results(args.name, args.verbose)
    started = time.monotonic()
    for group in groups:
        try:
            if group == "vectors":
                vectors.run(args.adapter, args.vectors, results, args.max_unsupported)
            else:
                GROUPS[group](args.adapter, results)
        except AdapterFailure as e:
            results.check(f"{group}: the adapter kept to the line protocol", [str(e)])
        except Exception:  # noqa: BLE001 - a broken group is a failure, the others still run
            results.check(f"{group}: ran to its end", traceback.format_exc().splitlines()[-6:])
    seconds = time.monotonic() - started
    not_applicable = (f"; {results.not_applicable_count} not applicable"
                      if results.not_applicable_count else "")
    print(f"[{args.name}] {results.passed} passed, {len(results.failed)} failed "
          f"({seconds:.1f} s{not_applicable})", flush=True)
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main())
