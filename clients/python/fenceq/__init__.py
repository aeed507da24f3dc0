"""fenceq: a lease-and-fencing-token job queue. Python client for fenceqd.

    import fenceq

    with fenceq.Client() as c:                     # the endpoint: fenceq.resolve_endpoint()
        c.enqueue("job-7")
        fence = c.claim("job-7", "worker-a", ttl=30)   # None: someone else has it
        if fence is not None:
            c.complete("job-7", "worker-a", fence, "done")  # False: lease lost, refused

A work queue: ``c.enqueue("job-8", queue="mail", payload=b"...")``, then
``c.claim_next("mail", "worker-a", ttl=30, wait=10)`` answers the next job
(``{"id", "fence", "payload", "attempts"}``) or ``None``;
``c.complete_and_claim_next(id, owner, fence, result, queue, ttl)`` completes a
job and claims the next one in one round trip (``{"completed", "next"}``);
``fail``, ``check``, ``retry``, ``list``, ``stats``, ``purge`` and ``metrics``
complete the set, and :class:`QueueWorker` runs a function on each job of a
queue. ``c.snooze(id, owner, fence, delay)`` puts a job off without using up
its attempt ("not now, later", C3.14); a :class:`QueueWorker`'s function does
it with ``raise fenceq.Snooze(delay)``. ``enqueue(..., max_runtime=600)``
caps each attempt at 600 s from its claim (C3.15): no renew carries the lease
past it, and an attempt still running then is refused and failed by the daemon.

Unique keys: ``c.enqueue_unique("mail-7", "user-42", queue="mail")`` enqueues
only while no unfinished job of the queue holds the key and answers
:class:`Enqueued` ``(id, created)``, the id of the job created or of the one
that holds the key (``unique_for=`` seconds also counts recent finished jobs;
``on_conflict="replace"`` debounces: a waiting holder takes the new fields);
``enqueue(..., key=)`` answers the bool, ``list(key=)`` filters on it.

Fair groups: ``c.enqueue("mail-8", queue="mail", group="customer-42")`` puts a
job in a group (a customer, a tenant); within a priority ``claim_next`` serves
the groups in turn, least recently served first, and
``queue_config(queue, group_max_leased=, group_rate=, group_per=)`` limits
each group; ``group_config(queue, group, max_leased=, rate=, per=)``
overrides those limits for one group (a tenant; C3.25), and ``INHERIT``
removes an override. ``list(group=)`` filters on it; rows carry ``"group"``.

Jobs that wait for jobs: ``c.enqueue("report", after=["part-1", "part-2"])``
creates a ``"blocked"`` job that becomes ready once every parent is done
(``after_failure="run"``: a dead or cancelled parent no longer holds it back;
by default it cancels the job); ``c.enqueue_fan_in(parts, then)`` enqueues
the parts and the job waiting for them in one request. A claimed job lists
its parents under ``"after"`` (:attr:`Job.after` in a :class:`QueueWorker`),
and ``c.results(job["after"])`` reads their results in one round trip;
``c.job(id)`` shows ``"after"`` and ``"blocked_children"``.

Batches of up to 1000 jobs, one round trip and one transaction each, every job
judged on its own: ``enqueue_many(jobs)`` (``enqueue_many_unique(jobs)``),
``claim_next(..., max=N)`` (a list), ``complete_many(items, next=(queue, ttl,
max))`` and ``renew_many(items, ttl)``; ``QueueWorker(..., prefetch=N)`` uses
them.

Bulk actions by filter (issue 33), a page of up to ``limit`` jobs a request
answering :class:`BulkResult` ``(count, more)``: ``retry_many(queue,
state="dead")``, ``cancel_many(queue, prefix="import-")``,
``purge_many(queue, state="done", older_than=3600)``; ``retry_all``,
``cancel_all`` and ``purge_all`` ask page after page and answer the total.
Retention: ``queue_config(queue, keep_done=86400)`` has the daemon remove the
queue's done jobs a day after they finished (``KEEP_FOREVER`` removes it).

Headers (issue 33): ``c.enqueue("mail-9", headers={"traceparent": tp})``
keeps a dict of str to str with the job (a W3C trace context, at most 4096
bytes): every claim gives it back (``job.get("headers", {})``;
:attr:`Job.headers` in a :class:`QueueWorker`), and so does ``c.job(id)``.

Steps (C3.22): ``c.step_save(id, owner, fence, "charge", value)`` saves a
step's result under the current lease, once per job (``False``: the lease is
not current, or the step was saved already); every later claim of the job
carries ``"steps"`` (``job.get("steps", {})``), and so does ``c.job(id)``. In
a :class:`QueueWorker` ``job.step("charge", fn)`` runs ``fn`` at most once
per job, across attempts: a retry skips the steps saved before, and a stale
worker cannot save one (:class:`LeaseLost`).

Suspend and signal (C3.23): ``token = c.suspend(id, owner, fence,
timeout=3600)`` ends the lease and puts the job to sleep until
``c.signal(token, value)`` wakes it, once (``True`` exactly once per token),
or the timeout passes (ready again with the error ``"suspend timed out"``,
or dead with ``on_timeout="fail"``); ``None``: the lease was not current.
The claims after a signal carry ``"signal"`` (its value; ``"signal" in
job``). In a :class:`QueueWorker` ``job.suspend(3600)`` answers the token and
ends the attempt (nothing is completed; :class:`LeaseLost` when refused),
and :attr:`Job.signalled` / :attr:`Job.signal` read what woke the job.
Deadlines (C3.24): ``c.enqueue(id, deadline=time.time() + 600)``: a job not
claimed by then is never claimed; it is dead with ``"deadline passed"``.

Operators hold a queue back with ``pause(queue)`` / ``resume(queue)`` and
``queue_config(queue, max_leased=, rate=, per=)``; ``await_job(id, wait)``
long-polls until a job is finished (``enqueue_and_wait`` enqueues it first);
``schedule_set(name, cron, tz=...)`` enqueues a job ``name@<tick>`` at each
tick of a cron expression (``schedule_list``, ``schedule_delete``).

Over ``tcp://`` the daemon speaks only ZeroMQ CURVE:
``fenceq.Client("tcp://host:7100", curve=fenceq.curve_keys("client.key",
server_public))`` with this client's ``fenceqd --curve-keygen`` file and the
daemon's public key (:class:`CurveKeys`).

Events (issue 33): ``fenceq.subscribe(events_endpoint, "mail")`` connects
a :class:`Subscriber` to the stream ``fenceqd --events`` publishes; its
``recv(timeout)`` answers the next :class:`Event` of the queue ``(seq, t,
event, id, queue, fence, owner, group)`` or ``None``, ``for ev in sub`` yields
them forever, and ``sub.missed`` counts the gaps in ``seq``.

Fenced writes to your own tables (issue 34): the row keeps the job's fence
and the write is conditional on it, so a stale worker's write is refused by
the application's database itself, fenceqd reachable or not:
``fenceq.fenced_upsert(db, "invoices", {"id": job_id}, {"status": "paid"},
fence)`` (``fenced_update`` for an existing row) answers ``True`` (applied)
or ``False`` (stale), for a ``sqlite3`` or ``psycopg2`` connection or cursor
(:mod:`fenceq.fenced`).

The contract every call keeps is ``docs/contract.md`` (clauses C1-C4);
docstrings name the clause. ``fenceq.service`` serves the single-file API
(``claim(path, job_id, owner, now, ttl)`` …) on top of the daemon.
"""

from .client import (
    AFTER_FAILURE,
    CANCEL_MANY_STATES,
    DEFAULT_BULK_LIMIT,
    DEFAULT_ENDPOINT,
    DEFAULT_MAX_PAGES,
    INHERIT,
    JOB_STATES,
    KEEP_FOREVER,
    MAX_AFTER,
    MAX_BATCH,
    MAX_BULK_LIMIT,
    MAX_ERROR_BYTES,
    MAX_GROUP_BYTES,
    MAX_HEADERS_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_STEP_BYTES,
    MAX_STEPS,
    MAX_STEPS_BYTES,
    MAX_SUSPEND_SECONDS,
    MAX_TOKEN_BYTES,
    MAX_WAIT_SECONDS,
    MIN_SUSPEND_SECONDS,
    ON_CONFLICT,
    ON_TIMEOUT,
    PROTOCOL_VERSION,
    PURGE_MANY_STATES,
    RETRY_MANY_STATES,
    SERVICE_ENDPOINT,
    BulkResult,
    Client,
    CompletedMany,
    CurveKeys,
    Enqueued,
    JobSpec,
    LeaseItem,
    NextClaim,
    ResolvedEndpoint,
    curve_keys,
    default_endpoint,
    resolve_endpoint,
)
from .errors import (
    BadReply,
    BadRequest,
    ClientMisuse,
    FenceqError,
    InternalError,
    InvalidArgument,
    Timeout,
    TransportError,
    Unavailable,
    Unreachable,
    OutcomeUnknown,
    UnknownOp,
    UnsupportedVersion,
)
from .fenced import RowMissing, fenced_statement, fenced_update, fenced_upsert
from .events import EVENT_KINDS, Event, Subscriber, subscribe
from .worker import Job, JobOutcome, Lease, LeaseLost, QueueWorker, Snooze, Worker

__version__ = "0.1.0"

__all__ = [
    "AFTER_FAILURE",
    "BadReply",
    "BadRequest",
    "BulkResult",
    "CANCEL_MANY_STATES",
    "Client",
    "ClientMisuse",
    "CompletedMany",
    "CurveKeys",
    "DEFAULT_BULK_LIMIT",
    "DEFAULT_ENDPOINT",
    "DEFAULT_MAX_PAGES",
    "Enqueued",
    "EVENT_KINDS",
    "Event",
    "FenceqError",
    "INHERIT",
    "InternalError",
    "InvalidArgument",
    "JOB_STATES",
    "Job",
    "JobOutcome",
    "JobSpec",
    "KEEP_FOREVER",
    "Lease",
    "LeaseItem",
    "LeaseLost",
    "MAX_AFTER",
    "MAX_BATCH",
    "MAX_BULK_LIMIT",
    "MAX_ERROR_BYTES",
    "MAX_GROUP_BYTES",
    "MAX_HEADERS_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_STEP_BYTES",
    "MAX_STEPS",
    "MAX_STEPS_BYTES",
    "MAX_SUSPEND_SECONDS",
    "MAX_TOKEN_BYTES",
    "MAX_WAIT_SECONDS",
    "MIN_SUSPEND_SECONDS",
    "NextClaim",
    "ON_CONFLICT",
    "ON_TIMEOUT",
    "PROTOCOL_VERSION",
    "PURGE_MANY_STATES",
    "QueueWorker",
    "ResolvedEndpoint",
    "RowMissing",
    "RETRY_MANY_STATES",
    "SERVICE_ENDPOINT",
    "Snooze",
    "Subscriber",
    "Timeout",
    "TransportError",
    "Unavailable",
    "Unreachable",
    "OutcomeUnknown",
    "UnknownOp",
    "UnsupportedVersion",
    "Worker",
    "curve_keys",
    "default_endpoint",
    "fenced_statement",
    "fenced_update",
    "fenced_upsert",
    "resolve_endpoint",
    "subscribe",
]
