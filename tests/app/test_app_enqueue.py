"""Transactional enqueue on PostgreSQL (issue 34; docs/contract.md C3.20).

An application calls fenceq_enqueue() inside its own transaction (psycopg2,
as an application would) on the database its fenceqd sidecars share: the job
exists if and only if that transaction commits. Real fenceqd sidecars
($FENCEQD) on a real PostgreSQL (ctest's throw-away cluster: the URI in
$FENCEQ_TEST_PG_DIR/uri, or $FENCEQ_TEST_PG_URI), each test on a schema of
its own.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import psycopg2
import psycopg2.errors
import pytest

from app_support import Fenceqd, with_params

import fenceq  # noqa: E402  (app_support puts the client on the path)


def Sidecar(uri: str, folder: Path, name: str) -> Fenceqd:
    """One fenceqd on the shared database."""
    return Fenceqd(["--db", uri], folder, name)


@pytest.fixture
def sidecars(schema, folder):
    started: list[Sidecar] = []

    def start(n: int) -> list[Sidecar]:
        for i in range(n):
            started.append(Sidecar(schema[0], folder, f"s{len(started)}"))
        return started[-n:]

    yield start
    for s in started:
        s.stop()


def app_connection(uri: str):
    conn = psycopg2.connect(uri)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS orders(id text PRIMARY KEY, total int)")
    conn.commit()
    return conn


def job_ids(uri: str) -> list[str]:
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM jobs ORDER BY id")
        return [r[0] for r in cur.fetchall()]


def unfinished(uri: str) -> int:
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM jobs WHERE done = 0")
        return cur.fetchone()[0]


def test_a_committed_transaction_s_job_is_claimed_through_another_sidecar(schema, sidecars):
    a, b = sidecars(2)
    app = app_connection(schema[0])
    with app.cursor() as cur:
        cur.execute("INSERT INTO orders VALUES ('o-1', 42)")
        cur.execute("SELECT fenceq_enqueue('order-o-1', 'emails', p_payload => %s, "
                    "p_priority => 3, p_headers => %s)", ('{"order": "o-1"}', '{"traceparent": "t-1"}'))
        assert cur.fetchone()[0] is True
        # Not committed yet: no sidecar sees it.
        with fenceq.Client(b.endpoint) as c:
            assert c.claim_next("emails", "w", 30) is None
    app.commit()
    with fenceq.Client(b.endpoint) as c:
        job = c.claim_next("emails", "w", 30)
        assert job is not None and job["id"] == "order-o-1"
        assert job["payload"] == '{"order": "o-1"}' and job["fence"] == 1
        assert job["headers"] == {"traceparent": "t-1"}
        assert c.job("order-o-1")["priority"] == 3
        assert c.complete("order-o-1", "w", job["fence"], "sent")
    # The same id again: nothing changes, false.
    with app.cursor() as cur:
        cur.execute("SELECT fenceq_enqueue('order-o-1', 'emails')")
        assert cur.fetchone()[0] is False
    app.commit()
    with fenceq.Client(a.endpoint) as c:
        assert c.job("order-o-1")["state"] == "done"


def test_a_commit_wakes_a_claim_parked_on_another_sidecar(schema, sidecars):
    (a,) = sidecars(1)
    got: dict = {}

    def park() -> None:
        with fenceq.Client(a.endpoint, timeout=30) as c:
            t0 = time.monotonic()
            got["job"] = c.claim_next("wake", "w", 30, wait=20)
            got["took"] = time.monotonic() - t0

    t = threading.Thread(target=park)
    t.start()
    time.sleep(0.5)  # parked by now (the claim waits up to 20 s)
    app = app_connection(schema[0])
    with app.cursor() as cur:
        cur.execute("SELECT fenceq_enqueue('w-1', 'wake')")
    app.commit()
    t.join(timeout=30)
    assert got["job"] is not None and got["job"]["id"] == "w-1"
    # NOTIFY at the commit woke it, not the end of its 20 s wait.
    assert got["took"] < 10, got["took"]


def test_a_rolled_back_transaction_s_job_never_exists(schema, sidecars):
    (a,) = sidecars(1)
    app = app_connection(schema[0])
    with app.cursor() as cur:
        cur.execute("INSERT INTO orders VALUES ('o-2', 7)")
        cur.execute("SELECT fenceq_enqueue('order-o-2', 'emails', p_delay => 0)")
        assert cur.fetchone()[0] is True
    app.rollback()
    with fenceq.Client(a.endpoint) as c:
        assert c.claim_next("emails", "w", 30) is None
        assert c.job("order-o-2") is None
    assert job_ids(schema[0]) == []


def test_a_purged_id_enqueued_again_continues_its_fence(schema, sidecars):
    (a,) = sidecars(1)
    app = app_connection(schema[0])
    with fenceq.Client(a.endpoint) as c:
        assert c.enqueue("p-1", queue="q")
        for _ in range(2):
            job = c.claim("p-1", "w", 0.2)
            assert job is not None
            time.sleep(0.3)
        fence = c.claim("p-1", "w", 30)
        assert fence == 3 and c.complete("p-1", "w", fence, None)
        assert c.purge(0, queue="q") == 1
    with app.cursor() as cur:
        cur.execute("SELECT fenceq_enqueue('p-1', 'q', p_delay => 0.2, p_max_attempts => 2)")
        assert cur.fetchone()[0] is True
    app.commit()
    with fenceq.Client(a.endpoint) as c:
        assert c.claim_next("q", "w", 30) is None  # its delay
        time.sleep(0.4)
        job = c.claim_next("q", "w", 30)
        assert job is not None and job["fence"] == 4
        assert c.job("p-1")["max_attempts"] == 2


BAD = [
    ("p_id => NULL", "id must not be NULL"),
    ("p_id => repeat('x', 1025)", "id is longer than 1024 bytes"),
    ("p_id => 'nightly@2026-03-27T01:30Z'", "periodic job"),
    ("p_id => 'b', p_queue => ''", "queue must not be empty"),
    ("p_id => 'b', p_queue => repeat('q', 257)", "queue is longer"),
    ("p_id => 'b', p_payload => 'x', p_payload_bytes => '\\x00'::bytea", "not both"),
    ("p_id => 'b', p_payload => repeat('x', 262145)", "payload is longer"),
    ("p_id => 'b', p_priority => 2147483648", "priority"),
    ("p_id => 'b', p_delay => -1", "delay"),
    ("p_id => 'b', p_delay => 'NaN'", "delay"),
    ("p_id => 'b', p_max_attempts => -1", "max_attempts"),
    ("p_id => 'b', p_grp => ''", "grp"),
    ("p_id => 'b', p_max_runtime => 0", "max_runtime"),
    ("p_id => 'b', p_headers => '[1]'", "headers"),
    ("p_id => 'b', p_headers => '{\"a\": 1}'", "headers"),
    ("p_id => 'b', p_headers => jsonb_build_object('a', repeat('v', 4096))", "4096 bytes"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_is_refused_with_sqlstate_22023_and_changes_nothing(schema, sidecars,
                                                                      args, message):
    sidecars(1)
    app = app_connection(schema[0])
    with app.cursor() as cur:
        cur.execute("INSERT INTO orders VALUES ('o-bad', 1)")
        with pytest.raises(psycopg2.Error) as e:
            cur.execute(f"SELECT fenceq_enqueue({args})")
    assert e.value.pgcode == "22023"
    assert message in e.value.pgerror
    app.rollback()
    assert job_ids(schema[0]) == []


def test_an_application_role_needs_execute_and_no_right_on_jobs(schema, sidecars):
    (a,) = sidecars(1)
    uri, name = schema
    role, other = f"{name}_app", f"{name}_other"
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} LOGIN; CREATE ROLE {other} LOGIN")
        cur.execute(f"GRANT USAGE ON SCHEMA {name} TO {role}, {other}")
        cur.execute(f"GRANT EXECUTE ON FUNCTION fenceq_enqueue(text, text, text, bigint, "
                    f"double precision, bigint, text, double precision, jsonb, bytea) TO {role}")
    try:
        for who, allowed in ((role, True), (other, False)):
            conn = psycopg2.connect(with_params(uri, user=who))
            with conn.cursor() as cur:
                if allowed:
                    cur.execute("SELECT fenceq_enqueue('g-1', 'q')")
                    assert cur.fetchone()[0] is True
                    conn.commit()
                    with pytest.raises(psycopg2.errors.InsufficientPrivilege):
                        cur.execute("SELECT count(*) FROM jobs")
                else:
                    with pytest.raises(psycopg2.errors.InsufficientPrivilege):
                        cur.execute("SELECT fenceq_enqueue('g-2', 'q')")
            conn.close()
        with fenceq.Client(a.endpoint) as c:
            job = c.claim_next("q", "w", 30)
            assert job is not None and job["id"] == "g-1"
        # A sidecar's restart makes the function again: the grant stays, PUBLIC gets none.
        a.stop()
        a.start()
        conn = psycopg2.connect(with_params(uri, user=role))
        with conn.cursor() as cur:
            cur.execute("SELECT fenceq_enqueue('g-3', 'q')")
            assert cur.fetchone()[0] is True
        conn.commit()
        conn.close()
        assert job_ids(uri) == ["g-1", "g-3"]
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP OWNED BY {role}, {other}; DROP ROLE {role}; DROP ROLE {other}")
        admin.close()


def test_racing_application_transactions_against_kill_9_of_sidecars(schema, sidecars):
    """8 application threads commit or roll back orders with their job while the
    sidecars are killed (-9) and restarted and workers drain the queue: each
    committed order has exactly one job, each completed once; no rolled-back one has any."""
    uri = schema[0]
    cars = sidecars(3)
    app_connection(uri).close()
    committed: set[str] = set()
    rolled_back: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()
    deadline = time.monotonic() + 40

    def application(t: int) -> None:
        conn = psycopg2.connect(uri)
        rnd = random.Random(t)
        for i in range(120):
            if time.monotonic() > deadline:
                break
            oid = f"o-{t}-{i}"
            with conn.cursor() as cur:
                cur.execute("INSERT INTO orders VALUES (%s, %s)", (oid, i))
                cur.execute("SELECT fenceq_enqueue(%s, 'orders', p_payload => %s)",
                            ("job-" + oid, oid))
            if rnd.random() < 0.25:
                conn.rollback()
                with lock:
                    rolled_back.add(oid)
            else:
                conn.commit()
                with lock:
                    committed.add(oid)
        conn.close()

    done: dict[str, int] = {}

    def worker(k: int) -> None:
        while not stop.is_set() and time.monotonic() < deadline + 20:
            car = cars[k % len(cars)]
            try:
                with fenceq.Client(car.endpoint, timeout=2.0) as c:
                    while not stop.is_set():
                        job = c.claim_next("orders", f"w{k}", 5, wait=0.5)
                        if job is None:
                            continue
                        if c.complete(job["id"], f"w{k}", job["fence"], job["payload"]):
                            with lock:
                                done[job["id"]] = done.get(job["id"], 0) + 1
            except fenceq.FenceqError:
                time.sleep(0.1)  # its sidecar was killed: again once it is back

    def killer() -> None:
        rnd = random.Random(99)
        kills = 0
        while not stop.is_set() and time.monotonic() < deadline and kills < 30:
            time.sleep(0.5)
            car = rnd.choice(cars)
            car.kill9()
            car.start()
            kills += 1

    apps = [threading.Thread(target=application, args=(t,)) for t in range(8)]
    workers = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    kill = threading.Thread(target=killer)
    for t in apps + workers + [kill]:
        t.start()
    for t in apps:
        t.join(timeout=80)
    kill.join(timeout=80)
    # The workers drain what is left (leases of killed sidecars' workers expire in 5 s).
    drain_until = time.monotonic() + 30
    while time.monotonic() < drain_until and unfinished(uri) > 0:
        time.sleep(0.2)
    stop.set()
    for t in workers:
        t.join(timeout=30)
    assert committed and rolled_back
    expected = sorted("job-" + o for o in committed)
    assert job_ids(uri) == expected
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM orders ORDER BY id")
        assert sorted("job-" + r[0] for r in cur.fetchall()) == expected
    # Every job done once: a complete whose reply a kill -9 lost is done
    # without the worker knowing, so the acknowledged ones are a subset.
    assert unfinished(uri) == 0
    assert set(done) <= set(expected) and len(done) > len(expected) // 2
    assert all(n == 1 for n in done.values())
