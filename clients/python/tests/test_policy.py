"""Queue settings, await and periodic jobs (issue 18) from the Python client,
against the real daemon: pause/resume, max_leased and rate, await_job and
enqueue_and_wait, schedule_set/list/delete, and their bad inputs."""

from __future__ import annotations

import calendar
import time

import msgpack
import pytest

import fenceq
from conftest import Background, Daemon, wait_until, waiting_claims


def utc(*fields: int) -> float:
    """Unix seconds of a UTC time (year, month, day, hour, minute)."""
    return float(calendar.timegm((*fields, 0)))


def settings(client: fenceq.Client, queue: str) -> dict:
    """The settings keys of the queue in stats ({} when it has none)."""
    row = client.stats()["queues"].get(queue, {})
    return {k: row[k] for k in ("paused", "max_leased", "rate", "per") if k in row}


def test_pause_holds_claim_next_back_and_resume_lets_a_parked_claim_through(server_daemon: Daemon):
    with server_daemon.client() as c:
        assert c.enqueue("p1", queue="q")
        assert settings(c, "q") == {}                   # no settings: none of the keys
        assert c.pause("q") is True
        assert settings(c, "q") == {"paused": True, "max_leased": 0, "rate": 0, "per": 1.0}
        assert isinstance(c.stats()["queues"]["q"]["per"], float)
        assert c.claim_next("q", "w", 30) is None
        assert c.claim("p1", "w", 30) is None           # a claim by id is held back too
        assert c.enqueue("o1", queue="other")
        assert c.claim_next("other", "w", 30)["id"] == "o1"  # other queues are not affected

        def parked():
            with server_daemon.client() as w:
                return w.claim_next("q", "parked", 30, wait=5)

        waiter = Background(parked)
        assert wait_until(lambda: waiting_claims(server_daemon) == 1, 5, 0.01)
        resumed = time.monotonic()
        assert c.resume("q") is True
        job = waiter.result()
        assert job is not None and job["id"] == "p1" and job["fence"] == 1
        assert time.monotonic() - resumed < 1.0         # woken by the resume, not the wait's end
        assert settings(c, "q") == {}                   # back at the defaults: the settings went


def test_max_leased_two_of_five_the_third_claim_waits_for_a_complete(client: fenceq.Client):
    for i in range(5):
        assert client.enqueue(f"m{i}", queue="lim", now=10.0)
    assert client.queue_config("lim", max_leased=2) is True
    assert settings(client, "lim") == {"paused": False, "max_leased": 2, "rate": 0, "per": 1.0}
    first = client.claim_next("lim", "w", 60, now=10.0)
    second = client.claim_next("lim", "w", 60, now=10.0)
    assert [first["id"], second["id"]] == ["m0", "m1"]
    assert client.claim_next("lim", "w", 60, now=11.0) is None
    assert client.claim_next("lim", "w", 60, now=11.0, max=3) == []
    assert client.claim("m4", "v", 60, now=11.0) is None  # by id too
    assert client.complete("m0", "w", first["fence"], "ok", now=12.0) is True
    assert [j["id"] for j in client.claim_next("lim", "w", 60, now=12.0, max=3)] == ["m2"]
    assert client.claim_next("lim", "w", 60, now=12.0) is None
    assert client.stats()["queues"]["lim"]["leased"] == 2
    # Raised: the parked queue hands out more at once; left-out settings keep their value.
    assert client.queue_config("lim", rate=0) is True
    assert settings(client, "lim")["max_leased"] == 2
    assert client.queue_config("lim", max_leased=0) is True
    assert settings(client, "lim") == {}
    assert [j["id"] for j in client.claim_next("lim", "w", 60, now=13.0, max=5)] == ["m3", "m4"]


def test_rate_two_claims_per_minute_by_the_client_clock(client: fenceq.Client):
    for i in range(3):
        assert client.enqueue(f"r{i}", queue="rated", now=100.0)
    assert client.queue_config("rated", rate=2, per=60) is True
    assert settings(client, "rated") == {"paused": False, "max_leased": 0, "rate": 2, "per": 60.0}
    assert client.claim_next("rated", "w", 600, now=100.0)["id"] == "r0"
    assert client.claim_next("rated", "w", 600, now=130.0)["id"] == "r1"
    assert client.claim_next("rated", "w", 600, now=159.0) is None   # two in (99, 159]
    assert client.claim_next("rated", "w", 600, now=160.5)["id"] == "r2"  # r0's claim left the window


def test_await_is_woken_by_a_complete_from_another_client(server_daemon: Daemon):
    with server_daemon.client() as c:
        assert c.enqueue("a1", queue="aw", payload=b"\x00raw")
        fence = c.claim("a1", "w", 60)

        def wait_for_it():
            with server_daemon.client() as waiter:
                start = time.monotonic()
                record = waiter.await_job("a1", 10)
                return record, time.monotonic() - start

        background = Background(wait_for_it)
        time.sleep(0.3)                                   # parked by now
        assert c.complete("a1", "w", fence, "42") is True
        record, waited = background.result()
        assert 0.25 <= waited < 2.0                       # woken by the complete, not the wait's end
        assert record["id"] == "a1" and record["state"] == "done"
        assert record["result"] == "42" and record["payload"] == b"\x00raw"
        assert record == c.job("a1")                      # the record job() answers
        assert c.await_job("a1") == record                # finished: at once, wait 0 too


def test_await_answers_none_when_the_wait_passes_and_refuses_an_unknown_id(server_daemon: Daemon):
    with server_daemon.client(timeout=1.0) as c:
        assert c.enqueue("slow")
        start = time.monotonic()
        assert c.await_job("slow") is None                # wait 0: at once
        assert c.await_job("slow", 0.4) is None
        # The call's timeout (1 s) was extended by the wait: no fenceq.Timeout.
        assert 0.35 <= time.monotonic() - start < 1.5
        with pytest.raises(fenceq.InvalidArgument) as e:
            c.await_job("never-enqueued", 1)
        assert e.value.code == "invalid_argument" and "never-enqueued" in e.value.message
        with pytest.raises(fenceq.InvalidArgument):
            c.await_job("slow", -1)
        with pytest.raises(fenceq.InvalidArgument):
            c.await_job("slow", 3601)
        with pytest.raises(fenceq.BadRequest):
            c.await_job("slow", "1")  # type: ignore[arg-type]


def test_enqueue_and_wait_returns_the_record_a_worker_finished(server_daemon: Daemon):
    def worker():
        with server_daemon.client() as w:
            job = w.claim_next("ew", "worker", 30, wait=5)
            return w.complete(job["id"], "worker", job["fence"], f"done: {job['payload']}")

    background = Background(worker)
    with server_daemon.client() as c:
        record = c.enqueue_and_wait("e1", 5, queue="ew", payload="input", priority=3)
        assert background.result() is True
        assert record["state"] == "done" and record["result"] == "done: input"
        assert record["queue"] == "ew" and record["priority"] == 3 and record["payload"] == "input"
        # Again with the same id: nothing enqueued, the finished record at once.
        assert c.enqueue_and_wait("e1", 5, queue="ew") == record
        # Nobody works this queue: None once the wait passes; the job is there.
        assert c.enqueue_and_wait("e2", 0.2, queue="idle") is None
        assert c.job("e2")["state"] == "ready"


def test_enqueue_and_wait_is_one_request_and_falls_back_on_an_older_daemon(fake_daemon):
    """One request, enqueue_and_wait; a daemon without the op (unknown_op)
    gets enqueue, then await (a fake daemon answers as an older one)."""
    endpoint, router = fake_daemon
    seen = []

    def serve():
        replies = {"enqueue_and_wait": {"ok": False, "error": {"code": "unknown_op",
                                                               "message": "unknown op"}},
                   "enqueue": {"ok": True, "result": True},
                   "await": {"ok": True, "result": None}}
        for _ in range(3):
            assert router.poll(5000)
            identity, empty, payload = router.recv_multipart()
            request = msgpack.unpackb(payload, raw=False)
            seen.append(request)
            reply = dict(replies[request["op"]], rid=request["rid"])
            router.send_multipart([identity, empty, msgpack.packb(reply, use_bin_type=True)])

    server = Background(serve)
    with fenceq.Client(endpoint, timeout=5) as c:
        assert c.enqueue_and_wait("j", 0.5, queue="q", payload="p") is None
    server.result()
    assert [r["op"] for r in seen] == ["enqueue_and_wait", "enqueue", "await"]
    assert seen[0]["queue"] == "q" and seen[0]["payload"] == "p" and seen[0]["wait"] == 0.5
    assert seen[1]["queue"] == "q" and seen[2]["wait"] == 0.5


def test_schedule_set_list_delete_round_trip_and_a_tick(daemon: Daemon):
    t0 = utc(2026, 6, 1, 12, 0)
    with daemon.client() as c:
        assert c.schedule_list(now=t0) == []
        assert c.schedule_set("nightly", "0 3 * * *", tz="Europe/Berlin", queue="reports",
                              payload=b"\x01\x02", priority=5, max_attempts=2, now=t0) is True
        assert c.schedule_set("quarter", "*/15 * * * *", payload="q", now=t0) is True
        assert c.schedule_list(now=t0) == [
            # 03:00 in Berlin in June (CEST, UTC+2) is 01:00 UTC.
            {"name": "nightly", "cron": "0 3 * * *", "tz": "Europe/Berlin", "queue": "reports",
             "payload": b"\x01\x02", "priority": 5, "max_attempts": 2,
             "next": utc(2026, 6, 2, 1, 0), "last": None},
            {"name": "quarter", "cron": "*/15 * * * *", "tz": "UTC", "queue": "default",
             "payload": "q", "priority": 0, "max_attempts": 25,  # the default
             "next": utc(2026, 6, 1, 12, 15), "last": None},
        ]
        # The client clock passes 12:15: the tick's job is enqueued once, named by its tick.
        tick = "quarter@2026-06-01T12:15Z"
        assert wait_until(lambda: c.job(tick, now=t0 + 960) is not None, 5, 0.01)
        assert c.job(tick)["payload"] == "q" and c.job(tick)["queue"] == "default"
        row = {s["name"]: s for s in c.schedule_list()}["quarter"]
        assert row["last"] == utc(2026, 6, 1, 12, 15) and row["next"] == utc(2026, 6, 1, 12, 30)
        # Set again: replaced.
        assert c.schedule_set("nightly", "@weekly", now=t0 + 960) is True
        nightly = {s["name"]: s for s in c.schedule_list()}["nightly"]
        assert (nightly["cron"], nightly["tz"], nightly["queue"], nightly["payload"]) == \
            ("@weekly", "UTC", "default", None)
        assert c.schedule_delete("nightly") is True
        assert c.schedule_delete("nightly") is False
        assert [s["name"] for s in c.schedule_list()] == ["quarter"]
        assert c.list(queue="default", now=t0 + 960)[0]["id"] == tick  # its job stays


def test_bad_inputs_raise_the_clients_errors_and_change_nothing(client: fenceq.Client):
    assert client.queue_config("q", max_leased=2) is True
    bad_configs = [
        (dict(queue=""), fenceq.InvalidArgument),
        (dict(queue="q", paused=1), fenceq.BadRequest),
        (dict(queue="q", max_leased=-1), fenceq.InvalidArgument),
        (dict(queue="q", max_leased=1.5), fenceq.BadRequest),
        (dict(queue="q", rate=100001), fenceq.InvalidArgument),
        (dict(queue="q", rate=5, per=0), fenceq.InvalidArgument),
        (dict(queue="q", per=86401), fenceq.InvalidArgument),
        (dict(queue="q", per="1"), fenceq.BadRequest),
    ]
    for kwargs, error in bad_configs:
        queue = kwargs.pop("queue")
        with pytest.raises(error) as e:
            client.queue_config(queue, **kwargs)
        assert e.value.code == {fenceq.InvalidArgument: "invalid_argument",
                                fenceq.BadRequest: "bad_request"}[error], kwargs
        field = list(kwargs)[-1] if kwargs else "queue"   # the one the daemon names
        assert field in e.value.message, (kwargs, e.value.message)
    assert settings(client, "q") == {"paused": False, "max_leased": 2, "rate": 0, "per": 1.0}

    with pytest.raises(fenceq.InvalidArgument) as e:
        client.schedule_set("n", "61 * * * *")
    assert "cron" in e.value.message and "minute" in e.value.message
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.schedule_set("n", "0 25 * * *")
    assert "hour" in e.value.message
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.schedule_set("n", "* * * * *", tz="Mars/Base")
    assert "Mars/Base" in e.value.message and "time zone" in e.value.message
    for name, cron, kwargs, error in [
            ("n", "@reboot", {}, fenceq.InvalidArgument),
            ("", "* * * * *", {}, fenceq.InvalidArgument),
            ("n" * 201, "* * * * *", {}, fenceq.InvalidArgument),
            ("n", "*" * 257, {}, fenceq.InvalidArgument),
            ("n", "* * * * *", {"queue": ""}, fenceq.InvalidArgument),
            ("n", 5, {}, fenceq.BadRequest),
            ("n", "* * * * *", {"priority": "high"}, fenceq.BadRequest),
    ]:
        with pytest.raises(error):
            client.schedule_set(name, cron, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(fenceq.BadRequest):
        client.schedule_delete(3)  # type: ignore[arg-type]
    with pytest.raises(fenceq.InvalidArgument):
        client.schedule_set("n", "* * * * *", payload=b"x" * (fenceq.MAX_PAYLOAD_BYTES + 1))
    assert client.schedule_list() == []
