"""Issue 61, "Overrides" (C3.25): two tenants of one queue, one held to
max_leased 1 and one given 10 by group_config over the queue's
group_max_leased 2, under 16 workers: neither tenant ever has more leased at
once than its own cap, and both reach it. Checked from the history of
replies alone: a lease counts from its claim's answer until its complete
is sent, a span inside the daemon's own, so the peak counted here is never
above the daemon's true peak. On SQLite, on PostgreSQL, and across three
PostgreSQL sidecars sharing the workers."""
from __future__ import annotations

import signal as signals
import threading
import time
from typing import Dict, List

import fenceq
from conftest import Daemon, daemon_on_pg_schema

QUEUE = "tenants"
CAPS = {"small": 1, "big": 10}
JOBS = {"small": 40, "big": 150}  # the small one's run one at a time
WORKERS = 16
HOLD = 0.03  # seconds a worker holds each lease


def _run(daemons: List[Daemon]) -> Dict[str, int]:
    with daemons[0].client(timeout=30) as c:
        assert c.queue_config(QUEUE, group_max_leased=2) is True
        assert c.group_config(QUEUE, "small", max_leased=1) is True
        assert c.group_config(QUEUE, "big", max_leased=10) is True
        for tenant, n_jobs in JOBS.items():
            assert c.enqueue_many([{"id": f"{tenant}-{n}", "queue": QUEUE, "group": tenant}
                                   for n in range(n_jobs)]) == [True] * n_jobs
    lock = threading.Lock()
    held = {t: 0 for t in CAPS}
    peak = {t: 0 for t in CAPS}
    done = {t: 0 for t in CAPS}
    errors: List[BaseException] = []
    deadline = time.monotonic() + 60

    def worker(n: int) -> None:
        d = daemons[n % len(daemons)]
        try:
            with d.client(timeout=30) as c:
                while time.monotonic() < deadline:
                    job = c.claim_next(QUEUE, f"w{n}", 30, wait=0.2)
                    if job is None:
                        with lock:
                            if done == JOBS:
                                return
                        continue
                    tenant = job["id"].split("-")[0]
                    with lock:
                        held[tenant] += 1
                        peak[tenant] = max(peak[tenant], held[tenant])
                    time.sleep(HOLD)
                    with lock:
                        held[tenant] -= 1
                    assert c.complete(job["id"], f"w{n}", job["fence"], "ok") is True
                    with lock:
                        done[tenant] += 1
        except BaseException as e:  # noqa: BLE001: reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert done == JOBS, done
    return peak


def test_each_tenant_stays_within_its_own_cap_and_reaches_it(either_store: Daemon):
    peak = _run([either_store])
    assert peak == CAPS, peak


def test_the_caps_hold_across_three_postgresql_sidecars(pg_uri: str, tmp_dir: str):
    with daemon_on_pg_schema(pg_uri, tmp_dir, "tn", "server") as first:
        first.start()
        others = []
        try:
            for name in ("tn2", "tn3"):
                o = Daemon(tmp_dir, name, "server")
                o.db = first.db
                others.append(o.start())
            peak = _run([first, *others])
            assert peak == CAPS, peak
        finally:
            for o in others:
                o.stop(signals.SIGKILL)
