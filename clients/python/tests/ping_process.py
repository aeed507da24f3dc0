"""The pinger of the latency tests (conftest.Pinger), in a process of its own.

``ping_process.py ENDPOINT EVERY TIMEOUT [held]``: pings ENDPOINT on a
connection of its own, EVERY seconds after each reply, until its standard
input closes or says anything; then writes ``{"latencies": [...], "errors":
[...]}`` (JSON, seconds) to standard output. It prints ``ready`` once its
first ping is answered. With ``held`` (tests/app/test_settle_bounded.py) a
ping is sent EVERY seconds after the last was sent, and one slower than EVERY
also stands for the pings it held back (L - EVERY, L - 2 * EVERY, ... are
counted too): a stall counts as often as a client that did not wait for each
reply would have felt it.

Why a process: a pinger thread in the test's own process shared its GIL and
its garbage collector. A full collection of a pytest process takes 11-18 ms
here (gc.callbacks), and whichever thread triggered it held the pinger back
as long: in CI, a purge probe whose pages take 3 ms measured ping p99
29.5 ms (page max 35.8 ms). Here nothing but the daemon holds a ping back:
this process collects no garbage (gc.disable; it allocates a float a ping).
"""

import gc
import json
import select
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fenceq  # noqa: E402


def main() -> int:
    endpoint, every, timeout = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    held = sys.argv[4:] == ["held"]
    gc.disable()
    latencies, errors = [], []
    with fenceq.Client(endpoint, timeout=timeout) as c:
        c.ping()
        print("ready", flush=True)
        while True:
            t = time.monotonic()
            try:
                c.ping()
                took = time.monotonic() - t
                latencies.append(took)
                while held and took > every:
                    took -= every
                    latencies.append(took)
            except Exception as e:  # noqa: BLE001 (the parent reports it)
                errors.append(repr(e)[:300])
                break
            pause = t + every - time.monotonic() if held else every
            readable, _, _ = select.select([sys.stdin], [], [], max(0.0, pause))
            if readable:
                break
    json.dump({"latencies": latencies, "errors": errors}, sys.stdout)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
