"""The common worker loop: claim, keep the lease alive while the job runs,
complete with the fence, release on failure.

What ``Worker.run(job_id, fn)`` does, and why:

1. ``claim`` the job (C3.3). ``None`` means someone else holds it, or it is
   done or missing: ``run`` answers ``None`` and ``fn`` is not called.
2. Call ``fn(lease)`` while a background thread renews the lease every
   ``renew_every`` seconds (default ``ttl / 3``) with its own
   :class:`~fenceq.Client` (clients are one per thread).
3. When a renewal answers ``False`` the lease is gone for good (C3.4: an
   expired lease is never revived, and the fence of a newer claim never goes
   back, C1.2): ``lease.lost`` is set so the job can stop early
   (``lease.check()`` raises :class:`LeaseLost`), and no ``complete`` is sent.
4. Otherwise ``complete`` with the fence (C3.5). The daemon has the last word:
   if the lease expired in the meantime (a renewal that could not get
   through, a stalled process) the completion is refused and ``run`` answers
   ``False``; the result stored by the new owner is kept.
5. If ``fn`` raises, the lease is released (C3.6) so another worker can take
   the job at once, and the exception propagates.

:class:`QueueWorker` does the same for "the next job of a queue"
(``claim_next`` with a long-poll ``wait``), hands the job (its payload, its
parents, its headers: :class:`Job`) to the function, and reports an
exception with ``fail`` (so the daemon retries the job after a backoff, or
marks it dead) instead of releasing it. Its function can split its work into
steps (``job.step("charge", fn)``, :meth:`Job.step`): each step's result is
saved under the fence as it finishes, and a retried job skips the steps its
earlier attempts saved. A function that must wait for the world (a
payment's webhook, a person's approval) suspends its job (``token =
job.suspend(3600)``, :meth:`Job.suspend`, C3.23): the attempt ends there,
nothing is completed, and the job comes back once ``Client.signal(token,
value)`` wakes it (:attr:`Job.signalled`, :attr:`Job.signal`) or the
timeout passes. A function that cannot work on its
job yet raises :class:`Snooze` (``raise
fenceq.Snooze(60)``): the job is snoozed (C3.14) instead, its attempt given
back and no error recorded, and comes back after the delay. In
:meth:`QueueWorker.run` a successful job is completed with
``complete_and_claim_next``: the completion and the claim of the following job
share one round trip. With ``prefetch=N`` it holds up to N jobs at once: it
claims them with one ``claim_next(max=N)``, renews all their leases with one
``renew_many``, and completes finished jobs in batches with ``complete_many``,
which claims the next ones in the same round trip.

Side effects outside fenceq are not fenced by this (C2.4): a job that writes
elsewhere should pass ``lease.fence`` along and have that system check it.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from .client import (
    MAX_BATCH,
    MAX_ERROR_BYTES,
    MAX_STEP_BYTES,
    MAX_WAIT_SECONDS,
    Client,
    CurveKeys,
    LeaseItem,
    NextClaim,
    _invalid,
)
from .errors import ClientMisuse, FenceqError, InternalError, Timeout, Unavailable

log = logging.getLogger("fenceq.worker")

#: The longest delay of a :class:`Snooze`, in seconds: the daemon's bound.
MAX_SNOOZE_SECONDS = 1e9


class Snooze(Exception):
    """Raised by a job function that cannot work on its job yet (someone
    else's rate limit, a resource that is not there): "not now, try again in
    ``delay`` seconds". The worker snoozes the job (``Client.snooze``, C3.14)
    instead of failing it: the lease ends, its attempt is given back (a job
    may be snoozed any number of times without becoming dead), no error is
    recorded, and the job can be claimed again ``delay`` seconds from now.
    ``reason`` (optional) only goes to the log.

    ``delay`` is checked here, so that a bad one fails the job with a clear
    error rather than stopping the worker: a ``TypeError`` when it is not a
    number, :class:`fenceq.InvalidArgument` (a ``ValueError``) when it is
    not in 0..1e9 seconds."""

    def __init__(self, delay: float, reason: Optional[str] = None) -> None:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)):
            raise TypeError(f"Snooze: delay must be a number of seconds, got {type(delay).__name__}")
        if not 0 <= delay <= MAX_SNOOZE_SECONDS:  # NaN fails this too
            raise _invalid(f"Snooze: delay must be in [0, {MAX_SNOOZE_SECONDS:g}] seconds, got {delay!r}")
        super().__init__(f"snoozed for {delay:g} s" + (f": {reason}" if reason else ""))
        self.delay = delay
        self.reason = reason

    def __reduce__(self) -> Tuple[Any, Tuple[float, Optional[str]]]:
        # Rebuilt from its delay and reason (pickling, multiprocessing), not its message.
        return (type(self), (self.delay, self.reason))


class LeaseLost(FenceqError):
    """``lease_lost``: raised by :meth:`Lease.check` once a renewal was
    refused. Raised out of a job function, it makes ``Worker.run`` answer
    ``False`` (nothing to release: the lease is no longer ours)."""

    def __init__(self, message: str = "the lease was lost") -> None:
        super().__init__("lease_lost", message)


@dataclass
class Lease:
    """The lease a job function runs under."""

    id: str
    owner: str
    #: The fencing token of this claim; hand it to any external system the
    #: job writes to, so that system can refuse stale writers too (C2.4).
    fence: int
    ttl: float
    #: Set when a renewal was refused (another owner may hold the job now),
    #: and by a :meth:`Job.suspend` that ended the lease.
    lost: threading.Event = field(default_factory=threading.Event)
    #: The last error a renewal hit (timeouts are retried; see Worker).
    renew_error: Optional[BaseException] = None

    def check(self) -> None:
        """Raise :class:`LeaseLost` if the lease was lost. Call it before
        expensive or irreversible steps."""
        if self.lost.is_set():
            raise LeaseLost(f"lease on {self.id!r} (fence {self.fence}) was lost")


def default_owner() -> str:
    """``host:pid:random``: unique per Worker, readable in ``state`` output."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker:
    """Runs jobs under a lease. For one thread, like :class:`~fenceq.Client`.

    ``ttl`` is the lease length in seconds; ``renew_every`` defaults to
    ``ttl / 3``. ``clock`` is only for daemons in client clock mode (C2.2):
    a function returning the current ``now``, passed with every request.
    ``curve``: keys for a ``tcp://`` endpoint (:func:`~fenceq.curve_keys`),
    used by the renewals too.
    """

    def __init__(self, endpoint: Optional[str] = None, *, owner: Optional[str] = None,
                 ttl: float = 30.0, renew_every: Optional[float] = None,
                 timeout: float = 5.0, clock: Optional[Callable[[], float]] = None,
                 curve: Optional[CurveKeys] = None) -> None:
        if not ttl > 0:
            raise _invalid(f"ttl must be > 0, got {ttl!r}")  # C3.3
        if renew_every is not None and not renew_every > 0:
            raise _invalid(f"renew_every must be > 0, got {renew_every!r}")
        self.owner: str = owner or default_owner()
        self.ttl = ttl
        self.renew_every: float = renew_every if renew_every is not None else ttl / 3
        self.timeout = timeout
        self._clock = clock
        self._curve = curve
        self._client = Client(endpoint, timeout, curve=curve)
        self.endpoint: str = self._client.endpoint

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> Optional[float]:
        return self._clock() if self._clock is not None else None

    def run(self, job_id: str, fn: Callable[[Lease], Optional[str]]) -> Optional[bool]:
        """Claim ``job_id``, run ``fn(lease)`` and complete with its return
        value (a str or ``None``) as the result.

        Answers ``None`` when the claim was refused (``fn`` not called),
        ``True`` when the completion was accepted, ``False`` when the lease
        was lost before or at completion (the result was not stored).
        Exceptions from ``fn`` propagate after the lease is released.

        A :class:`Snooze` from ``fn`` snoozes the job instead of releasing
        it (its attempt given back, claimable again after ``delay``) and
        then propagates, so the caller knows the job was put off; when the
        snooze is refused (the lease was lost meanwhile) ``run`` answers
        ``False`` instead, as for a lost lease.

        ``claim`` answers only the fence, so a :class:`Lease` has no headers
        (issue 33): ``Client.job(job_id).get("headers", {})`` reads them, or
        use :class:`QueueWorker`, whose :class:`Job` has them.
        """
        client = self._client
        fence = client.claim(job_id, self.owner, self.ttl, now=self._now())
        if fence is None:
            return None
        lease = Lease(id=job_id, owner=self.owner, fence=fence, ttl=self.ttl)
        renewer = _Renewer(self.endpoint, lease, self.renew_every, self.timeout, self._clock,
                           self._curve)
        renewer.start()
        try:
            result = fn(lease)
        except LeaseLost:
            renewer.stop()
            return False
        except Snooze as snooze:
            renewer.stop()
            if lease.lost.is_set():
                return False  # the lease is someone else's: nothing to snooze
            if not client.snooze(job_id, self.owner, fence, snooze.delay, now=self._now()):
                return False  # refused: the lease ended meanwhile
            raise
        except BaseException:
            renewer.stop()
            if not lease.lost.is_set():
                try:
                    client.release(job_id, self.owner, fence)
                except FenceqError:
                    pass  # the lease expires by itself; the job's error matters more
            raise
        # Stop renewing before completing, so no renewal can race the completion.
        renewer.stop()
        if lease.lost.is_set():
            return False
        if result is not None and not isinstance(result, str):
            client.release(job_id, self.owner, fence)
            raise TypeError(f"a job's result must be a str or None, got {type(result).__name__}")
        return client.complete(job_id, self.owner, fence, result, now=self._now())


#: A step's value (:meth:`Job.step`, C3.22): a payload, or ``None``.
StepValue = Union[bytes, str, None]


@dataclass
class Job(Lease):
    """A job claimed from a queue by :class:`QueueWorker`: the lease it runs
    under (``id``, ``owner``, ``fence``, ``ttl``, ``lost``, ``check()``)
    and what ``claim_next`` answered."""

    queue: str = "default"
    #: As enqueued: ``bytes`` (enqueued as bytes), ``str``, or ``None``.
    payload: Union[bytes, str, None] = None
    #: Claims of this job so far, this one included (1 the first time; more
    #: after a ``fail``, an expired lease or a release).
    attempts: int = 0
    #: The ids of the jobs it waited for (``enqueue(..., after=)``, issue 32),
    #: in id order; read their results with ``Client.results``. Empty for a
    #: job enqueued without ``after``.
    after: List[str] = field(default_factory=list)
    #: The headers it was enqueued with (``enqueue(..., headers=)``, issue
    #: 33), such as the W3C ``traceparent`` of the request that enqueued it:
    #: continue that trace here. Empty for a job enqueued without headers.
    headers: Dict[str, str] = field(default_factory=dict)
    #: The steps saved so far (C3.22): each step's name and its value
    #: (``bytes``, ``str`` or ``None``, as saved), those of earlier attempts
    #: as this claim handed them out, and those :meth:`step` saved since.
    #: Empty for a job that saved none.
    steps: Dict[str, StepValue] = field(default_factory=dict)
    #: Whether a signal woke the job since it last suspended (C3.23): the
    #: claim carried ``"signal"``. ``False`` for a job never suspended, and
    #: for one its suspend's timeout woke (its ``error`` is then ``"suspend
    #: timed out"``: ``Client.job(id)["error"]``).
    signalled: bool = False
    #: The value of that signal (``bytes``, ``str`` or ``None``, as sent to
    #: ``Client.signal``); ``None`` when not :attr:`signalled` too, so read
    #: :attr:`signalled` first.
    signal: StepValue = None
    #: The token this attempt's :meth:`suspend` answered, once it has:
    #: the attempt is over then. ``None`` until then.
    signal_token: Optional[str] = field(default=None, init=False, compare=False)
    # How step() saves a step under this lease: set by the QueueWorker that
    # claimed the job (its Client, its clock); None for a Job made by hand.
    _save_step: Optional[Callable[[str, StepValue], bool]] = field(
        default=None, init=False, repr=False, compare=False)
    # How suspend() suspends the job under this lease, likewise.
    _suspend_job: Optional[Callable[[float, Optional[str]], Optional[str]]] = field(
        default=None, init=False, repr=False, compare=False)
    # True from the moment suspend() sends its request: a renewal refused
    # from then on is the suspend's doing (or the lease was lost anyway,
    # which suspend() then raises), not worth a warning.
    _suspending: bool = field(default=False, init=False, repr=False, compare=False)

    def suspend(self, timeout: float, on_timeout: Optional[str] = None) -> str:
        """End this attempt and put the job to sleep until the world answers
        (C3.23): ``Client.suspend`` under this job's lease. Answers the
        signal token: hand it to whoever will answer (a payment provider's
        webhook, an approval link), who wakes the job with
        ``Client.signal(token, value)``. The job's next claim then runs the
        function again with :attr:`signalled` ``True`` and :attr:`signal`
        the value, and with the :attr:`steps` saved before: a function that
        suspends is written to be run again, its steps skipped::

            def handle(job):
                job.step("charge", lambda: charge(job.id))
                if not job.signalled:
                    token = job.suspend(3600)          # the attempt ends here
                    ask_for_approval(job.id, token)    # then hand the token on
                    return None                        # nothing is completed
                return f"approved: {job.signal}"

        A successful suspend ends the lease (its attempt given back): the
        worker stores nothing for this attempt, whatever the function does
        after it (it returns: its value is dropped; it raises: logged), and
        the outcome is ``"suspended"``. :attr:`signal_token` keeps the
        token, ``lost`` is set (the lease is no longer ours), and nothing
        more can be done under it: :meth:`step` and :meth:`check` raise
        :class:`LeaseLost`. When the ``timeout`` (seconds, 1..2,592,000)
        passes with no signal the job is ready again, with the error
        ``"suspend timed out"`` and :attr:`signalled` ``False``
        (``on_timeout="retry"``, the default), or dead (``"fail"``).

        When the daemon refuses (the lease expired, was taken over, released
        or cancelled) this raises :class:`LeaseLost`, as :meth:`step` does:
        nothing is stored (outcome ``"lost"``). A lease known lost raises it
        before anything is sent. A bad ``timeout`` or ``on_timeout`` raises
        :class:`fenceq.InvalidArgument` (:class:`fenceq.BadRequest` for a
        ``timeout`` that is not a number) and changes nothing: the job fails,
        as for any exception. Call it from the thread that runs the job's
        function; a Job not handed out by a :class:`QueueWorker` raises
        :class:`fenceq.ClientMisuse`."""
        if self.signal_token is not None:
            raise LeaseLost(f"{self.id!r} (fence {self.fence}) was suspended already: this attempt "
                            f"is over (its token: job.signal_token)")
        if self._suspend_job is None:
            raise ClientMisuse("misuse", f"Job.suspend: job {self.id!r} was not handed out by a "
                                         "QueueWorker, so it cannot suspend it; nothing was sent")
        self.check()
        self._suspending = True
        try:
            token = self._suspend_job(timeout, on_timeout)
        except BaseException:
            self._suspending = False
            raise
        if token is None:
            raise LeaseLost(f"{self.id!r} was not suspended: the lease (fence {self.fence}) is no "
                            "longer current")
        self.signal_token = token
        self.lost.set()  # the lease ended: nothing more is done under it
        return token

    def step(self, name: str, fn: Callable[[], StepValue]) -> StepValue:
        """Run one step of the job at most once per job, across attempts:
        the value of step ``name`` if an attempt of the job saved it already
        (``fn`` is not called), else ``fn()``'s value once it is saved.

        When ``name`` is in :attr:`steps` (saved by an earlier attempt, whose
        claim handed it back, or by this one) its value is answered and
        ``fn`` is not called. Otherwise ``fn()`` runs and its value is saved
        with ``Client.step_save`` under this job's lease (its ``id``,
        ``owner`` and ``fence``), recorded in :attr:`steps` and answered. A
        job that fails after some steps is retried from the first step not
        saved: the saved ones are skipped, so an irreversible step (a
        charge, an email) is not done again.

        The fence makes this safe: a worker whose lease ended (a stall, a
        lost network, a cancel) cannot save a step. The daemon answers
        ``False`` then (or when a step of that name was saved meanwhile: a
        saved step is never overwritten), and this raises :class:`LeaseLost`:
        nothing further of the function runs, and the worker stores nothing
        (outcome ``"lost"``). The value ``fn`` computed is dropped; the
        attempt that holds the job now runs the step itself, or finds the
        value it saved. Side effects of ``fn`` outside fenceq are not fenced
        by this (C2.4): pass :attr:`fence` to systems that can check it.
        "At most once" is for what is saved: an attempt that ends between
        ``fn()`` returning and its save (a crash, a lost lease) leaves the
        step unsaved, and the next attempt runs ``fn`` again; make such a
        step idempotent (a payment API's idempotency key: the job's id and
        the step's name) where running it twice costs.

        ``fn`` takes no argument and returns the step's value: ``bytes``
        (also ``bytearray`` and ``memoryview``, saved and answered as
        ``bytes``), ``str`` or ``None``, at most 256 KiB; anything else
        raises ``TypeError`` before anything is sent (and fails the job, as
        any exception of the function does). A job saves at most 64 steps,
        their values 256 KiB in all (past that: :class:`fenceq.InvalidArgument`).

        ``name`` is a str of 1..256 bytes (UTF-8): another type raises
        ``TypeError``, an empty or longer one :class:`fenceq.InvalidArgument`,
        before ``fn`` runs. Before ``fn`` runs, a lease known to be lost
        (:meth:`check`) raises :class:`LeaseLost`. Call it from the thread
        that runs the job's function (it uses the worker's Client); a Job not
        handed out by a :class:`QueueWorker` raises
        :class:`fenceq.ClientMisuse` unless the step is in :attr:`steps`."""
        if not isinstance(name, str):
            raise TypeError(f"Job.step: a step's name must be a str, got {type(name).__name__}")
        if name in self.steps:
            return self.steps[name]
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            raise _invalid(f"Job.step: step name {name!r} is not valid UTF-8; nothing was run") from None
        if not 1 <= size <= MAX_STEP_BYTES:
            raise _invalid(f"Job.step: a step's name must be 1..{MAX_STEP_BYTES} bytes, got {size}; "
                           "nothing was run")
        if self._save_step is None:
            raise ClientMisuse("misuse", f"Job.step: job {self.id!r} was not handed out by a "
                                         "QueueWorker, so it cannot save a step; nothing was run")
        self.check()
        value = fn()
        if isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        if value is not None and not isinstance(value, (bytes, str)):
            raise TypeError(f"Job.step {name!r}: a step's value must be bytes, str or None, "
                            f"got {type(value).__name__}; nothing was saved")
        if not self._save_step(name, value):
            raise LeaseLost(f"step {name!r} of {self.id!r} was not saved: the lease (fence "
                            f"{self.fence}) is no longer current, or the step was saved already")
        self.steps[name] = value
        return value


#: :attr:`JobOutcome.status` values.
COMPLETED, FAILED, LOST, SNOOZED, SUSPENDED = "completed", "failed", "lost", "snoozed", "suspended"


@dataclass
class JobOutcome:
    """What :meth:`QueueWorker.run_once` did with one job."""

    job: Job
    #: ``"completed"``: the function returned and ``complete`` was accepted.
    #: ``"failed"``: the function raised and ``fail`` was accepted (the daemon
    #: retries the job after a backoff, or it is dead now).
    #: ``"snoozed"``: the function raised :class:`Snooze` and ``snooze`` was
    #: accepted: the job comes back after the delay, its attempt given back,
    #: no error recorded.
    #: ``"suspended"``: the function suspended the job (:meth:`Job.suspend`,
    #: its token in ``job.signal_token``): the attempt ended there, nothing
    #: else was stored; the job comes back once signalled or timed out.
    #: ``"lost"``: the lease was gone before the result, the failure, the
    #: snooze or the suspend could be stored; nothing was stored, another
    #: worker may have the job.
    status: str
    #: The function's return value (the job's result when completed; dropped
    #: when suspended).
    result: Optional[str] = None
    #: The text sent with ``fail`` (``"ValueError: bad input"``), when it raised.
    error: Optional[str] = None
    #: The exception the function raised, if any (the :class:`Snooze` of a
    #: snoozed job; for a suspended one, what it raised after its suspend).
    exception: Optional[BaseException] = None


def error_text(exc: BaseException) -> str:
    """What :class:`QueueWorker` stores as a failed job's error: the
    exception's type and message (``"ValueError: bad input"``), as valid UTF-8, cut
    to the 64 KiB the daemon keeps."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    # Always valid UTF-8 (a lone surrogate becomes "?"), cut on a character boundary.
    return text.encode("utf-8", "replace")[:MAX_ERROR_BYTES].decode("utf-8", "ignore")


class QueueWorker:
    """Takes the next job of a queue, runs it under a renewed lease, and
    stores the outcome. For one thread, like :class:`~fenceq.Client`
    (except :meth:`stop`, which any thread or a signal handler may call).

    ::

        def resize(job: fenceq.Job) -> str:
            image = json.loads(job.payload)
            ...                      # job.check() before irreversible steps
            return "ok"

        with fenceq.QueueWorker(queue="thumbnails", ttl=30) as w:
            w.run(resize)            # until w.stop(); one job at a time

    For each job (:meth:`run_once`):

    1. ``claim_next`` on ``queue``, long-polling up to ``wait`` seconds
       (unless the previous job's completion already claimed this one, see 3).
    2. ``fn(job)`` runs while a background thread renews the lease every
       ``renew_every`` seconds (default ``ttl / 3``). A refused renewal sets
       ``job.lost``; ``job.check()`` then raises :class:`LeaseLost`.
    3. ``fn`` returns a str or ``None``: ``complete`` with it, under the fence.
       In :meth:`run` (and in ``run_once(take_next=True)``) the completion
       also claims the next job of the queue in the same round trip
       (:meth:`~fenceq.Client.complete_and_claim_next`); that job is the one
       the next :meth:`run_once` runs. When the queue had none, the next
       :meth:`run_once` long-polls with ``claim_next`` as in 1. No next job is
       claimed once :meth:`stop` was called, nor for the last of ``max_jobs``.
    4. ``fn`` raises an ``Exception`` (or returns something else): ``fail``
       with the exception's text (:func:`error_text`) and ``retry_in``
       (``None``: the daemon's backoff, ``min(2 ** (attempts - 1), 3600)`` s).
       The job comes back after the backoff, or is dead once its
       ``max_attempts`` are used; the exception does not propagate (it is in
       the :class:`JobOutcome`, and logged on the ``fenceq.worker`` logger).
       :class:`LeaseLost` stores nothing (the lease is someone else's).
       :class:`Snooze` (``raise fenceq.Snooze(60)``: "not now, later") is
       reported with ``snooze`` instead of ``fail``: the attempt is given
       back, no error is recorded, and the job can be claimed again after
       the Snooze's ``delay``; the outcome is ``"snoozed"``.
       A function that suspended its job (``job.suspend(timeout)``, C3.23)
       ended its attempt there: whatever it returns or raises afterwards,
       nothing is completed, failed or released (the lease is gone); the
       outcome is ``"suspended"``.
    5. ``fn`` raises a ``BaseException`` that is not an ``Exception``
       (``KeyboardInterrupt``, ``SystemExit``): the lease is released (the
       job is claimable again at once; the attempt stays used, so on its
       last attempt the daemon marks it dead) and the exception propagates.

    Errors talking to the daemon (:class:`~fenceq.Timeout`,
    :class:`~fenceq.Unavailable` …) propagate out of :meth:`run_once` and
    :meth:`run`; a lease left behind that way ends by itself after ``ttl``.

    A job claimed ahead (3.) is leased to this worker while it waits for the
    next :meth:`run_once`; :meth:`run` runs it at once, and :meth:`run`
    returning, :meth:`stop` and :meth:`close` release it untouched (its
    attempt stays used). Between ``run_once(take_next=True)`` calls of your
    own, keep the pause well under ``ttl``.

    **Prefetch** (``prefetch=N``, 1..1000; 1, the default, is all of the
    above): the worker holds up to N jobs at once, never more.

    - It claims up to N jobs with one ``claim_next(max=N)`` (long-polling as
      in 1. when the queue is empty) and runs them one after another, in the
      daemon's order (most urgent first).
    - One background thread renews **every** lease it holds (jobs waiting
      their turn, the one running, finished ones not completed yet) with one
      ``renew_many`` every ``renew_every`` seconds. A job whose renewal is
      refused is no longer ours: it is dropped (logged; ``job.lost`` set),
      never run if it had not started, never completed; the others go on.
    - A finished job is completed with ``complete_many``, together with the
      others finished since, once the jobs claimed ahead are all run (or when
      the oldest completion has waited ``renew_every``); that request also
      claims the next jobs, up to N held in all. A job the daemon refuses
      there is ``"lost"`` (logged); the others in the batch are completed.
      A failed job is reported with ``fail`` at once.
    - :meth:`run` hands a completed job's outcome to ``on_outcome`` when its
      batch is answered. :meth:`stop`, ``max_jobs`` and an exception end it
      as above: what finished is completed (claiming nothing more), jobs held
      and not started are released untouched (their attempts stay used).

    Prefetch many short jobs (fewer round trips and commits); not long ones: a
    prefetched job stays leased to this worker, unclaimable by any other, while
    the jobs before it run.

    ``clock`` is only for daemons in client clock mode (C2.2): a function
    returning the current ``now``, passed with every request. ``curve``: keys
    for a ``tcp://`` endpoint (:func:`~fenceq.curve_keys`), used by the
    renewals too.
    """

    def __init__(self, endpoint: Optional[str] = None, queue: str = "default", *,
                 owner: Optional[str] = None, ttl: float = 30.0, renew_every: Optional[float] = None,
                 wait: float = 1.0, retry_in: Optional[float] = None, timeout: float = 5.0,
                 clock: Optional[Callable[[], float]] = None,
                 curve: Optional[CurveKeys] = None, prefetch: int = 1) -> None:
        if not ttl > 0:
            raise _invalid(f"ttl must be > 0, got {ttl!r}")  # C3.3
        if renew_every is not None and not renew_every > 0:
            raise _invalid(f"renew_every must be > 0, got {renew_every!r}")
        if not 0 < wait <= MAX_WAIT_SECONDS:
            raise _invalid(f"wait must be in (0, {MAX_WAIT_SECONDS:g}] seconds, got {wait!r}")
        if retry_in is not None and not retry_in >= 0:
            raise _invalid(f"retry_in must be >= 0, got {retry_in!r}")
        if not (isinstance(prefetch, int) and not isinstance(prefetch, bool) and 1 <= prefetch <= MAX_BATCH):
            raise _invalid(f"prefetch must be an int in 1..{MAX_BATCH}, got {prefetch!r}")
        self.queue = queue
        self.owner: str = owner or default_owner()
        self.ttl = ttl
        self.renew_every: float = renew_every if renew_every is not None else ttl / 3
        #: Longest single long-poll; also how soon :meth:`stop` is noticed by an idle :meth:`run`.
        self.wait = wait
        self.retry_in = retry_in
        self.timeout = timeout
        self._clock = clock
        self._stopping = False
        #: The job the last completion claimed ahead, run by the next run_once (prefetch 1).
        self._held: Optional[Job] = None
        #: Most jobs leased to this worker at once (see "Prefetch" in the class doc).
        self.prefetch: int = prefetch
        #: prefetch > 1: the jobs claimed and not run yet, in the daemon's order.
        self._ahead: Deque[Job] = deque()
        #: prefetch > 1: the jobs run successfully whose completion is not sent
        #: yet, with their results, and when the oldest of them finished.
        self._pending: List[Tuple[Job, Optional[str]]] = []
        self._pending_since = 0.0
        self._curve = curve
        self._client = Client(endpoint, timeout, curve=curve)
        self.endpoint: str = self._client.endpoint
        #: prefetch > 1: every lease this worker holds (claimed ahead, running,
        #: finished and not completed yet), renewed together in the background.
        self._leases: Optional[_LeaseKeeper] = None
        if prefetch > 1:
            self._leases = _LeaseKeeper(self.endpoint, self.owner, ttl, self.renew_every, timeout,
                                        clock, curve, weakref.ref(self))

    def close(self) -> None:
        """Release the jobs claimed ahead (untouched; best effort), stop
        renewing, then close the connection. Idempotent."""
        if not self._client.closed:
            self._release_held("closing")
        if self._leases is not None:
            self._leases.close()
        self._client.close()

    @property
    def held(self) -> Optional[Job]:
        """The job claimed ahead that the next :meth:`run_once` runs (leased to
        this worker and not run yet), or ``None``."""
        if self.prefetch > 1:
            return self._ahead[0] if self._ahead else None
        return self._held

    @property
    def held_jobs(self) -> List[Job]:
        """Every job claimed ahead and not run yet, in the order they will run
        (at most ``prefetch``; with ``prefetch=1`` at most the one :attr:`held`)."""
        if self.prefetch > 1:
            return list(self._ahead)
        return [self._held] if self._held is not None else []

    def __enter__(self) -> "QueueWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop(self) -> None:
        """Ask :meth:`run` to return: after the job in progress, or within
        ``wait`` seconds when idle. The job in progress is completed without
        claiming a next one. A job that a long-poll or a completion hands over
        after the request, or one claimed ahead before it, is released
        untouched (its attempt stays used: on a job's last attempt the daemon
        marks it dead). Later :meth:`run_once` calls claim nothing. Safe from
        any thread and from a signal handler."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    def _now(self) -> Optional[float]:
        return self._clock() if self._clock is not None else None

    def run(self, fn: Callable[[Job], Optional[str]], *, max_jobs: Optional[int] = None,
            idle_exit: Optional[float] = None,
            on_outcome: Optional[Callable[[JobOutcome], None]] = None) -> int:
        """Run jobs one after another until :meth:`stop`, until ``max_jobs``
        jobs were handled, or (``idle_exit`` seconds) until the queue gave no
        job for that long. Answers how many jobs were handled (any outcome).
        ``on_outcome`` is called with each job's :class:`JobOutcome` (to log
        or count them). Each long-poll lasts at most ``wait`` seconds, so a
        stop is noticed that soon.

        A successful job is completed with
        :meth:`~fenceq.Client.complete_and_claim_next`, so a busy queue costs
        one round trip a job; ``claim_next`` (long-polling) only runs when the
        queue had nothing. Nothing stays claimed when ``run`` returns: a job
        claimed ahead of a stop is released untouched, and the last of
        ``max_jobs`` claims no next job. (``on_outcome`` runs while the next
        job is already leased: keep it short compared with ``ttl``.)

        With ``prefetch`` > 1 see "Prefetch" in the class doc: jobs are claimed
        and completed in batches, and a completed job's outcome reaches
        ``on_outcome`` when its batch's completion is answered (a failed one's
        at once), so outcomes may come in another order than the jobs ran."""
        if self.prefetch > 1:
            return self._run_prefetch(fn, max_jobs, idle_exit, on_outcome)
        handled = 0
        idle_since = time.monotonic()
        try:
            while not self._stopping and (max_jobs is None or handled < max_jobs):
                wait = self.wait
                if idle_exit is not None and self._held is None:
                    left = idle_exit - (time.monotonic() - idle_since)
                    if left <= 0:
                        break
                    wait = min(wait, left)
                take_next = max_jobs is None or handled + 1 < max_jobs
                outcome = self.run_once(fn, wait=wait, take_next=take_next)
                if outcome is None:
                    continue
                handled += 1
                if on_outcome is not None:
                    on_outcome(outcome)
                idle_since = time.monotonic()
        finally:
            if self._held is not None and not self._client.closed:
                self._release_held("stopping" if self._stopping else "run() returns")
        return handled

    def run_once(self, fn: Callable[[Job], Optional[str]], *, wait: Optional[float] = None,
                 take_next: bool = False) -> Optional[JobOutcome]:
        """Run the job the previous completion claimed ahead (:attr:`held`),
        else claim the next job (long-polling up to ``wait`` seconds, default
        the worker's; 0: do not wait); run ``fn(job)`` and store the outcome
        (see the class). ``None`` when no job came, or when :meth:`stop` was
        called (then a job that came meanwhile, or was held, is released
        untouched).

        ``take_next=True``: when ``fn`` succeeds, complete the job and claim
        the next one in one round trip; that job becomes :attr:`held`, for
        the next ``run_once`` (or :meth:`close`, which releases it). The
        default claims nothing beyond this job.

        With ``prefetch`` > 1: when no job is held, claim up to ``prefetch``
        jobs at once (the first runs now, the others are :attr:`held_jobs`,
        their leases renewed in the background until they run or
        :meth:`close` releases them); the job is completed with
        ``complete_many`` before ``run_once`` returns, and ``take_next=True``
        claims more in that round trip, up to ``prefetch`` held."""
        if self.prefetch > 1:
            return self._run_once_prefetch(fn, wait, take_next)
        if self._stopping:
            self._release_held("stopping")
            return None
        client = self._client
        job, self._held = self._held, None
        if job is None:
            wait = self.wait if wait is None else wait
            claimed = client.claim_next(self.queue, self.owner, self.ttl, wait=wait or None, now=self._now())
            if claimed is None:
                return None
            job = self._job(claimed)
            if self._stopping:
                self._release(job, "stopping")
                return None
        return self._handle(job, fn, take_next)

    def _job(self, claimed: Dict[str, Any]) -> Job:
        job = Job(id=claimed["id"], owner=self.owner, fence=claimed["fence"], ttl=self.ttl,
                  queue=self.queue, payload=claimed["payload"], attempts=claimed["attempts"],
                  after=list(claimed.get("after", ())), headers=dict(claimed.get("headers") or {}),
                  steps=dict(claimed.get("steps") or {}),
                  signalled="signal" in claimed, signal=claimed.get("signal"))
        me = weakref.ref(self)
        job._save_step = _step_saver(me, job)
        job._suspend_job = _suspender(me, job)
        return job

    def _release(self, job: Job, why: str) -> None:
        self._client.release(job.id, job.owner, job.fence)
        log.info("%s: released %s (fence %d) untouched", why, job.id, job.fence)

    def _release_held(self, why: str) -> None:
        """Release the jobs claimed ahead, if any (best effort: a lease that
        cannot be released ends by itself after ``ttl``)."""
        job, self._held = self._held, None
        ahead = [job] if job is not None else []
        while self._ahead:
            ahead.append(self._ahead.popleft())
        for job in ahead:
            self._drop(job, why)

    def _drop(self, job: Job, why: str) -> None:
        """Stop renewing ``job`` and release it untouched (best effort)."""
        if self._leases is not None:
            self._leases.discard(job)
        if job.lost.is_set():
            return  # no longer ours: nothing to release
        try:
            self._release(job, why)
        except FenceqError as e:
            log.warning("%s: could not release %s (fence %d), its lease ends by itself: %s",
                        why, job.id, job.fence, e)

    def _run_fn(self, job: Job, fn: Callable[[Job], Optional[str]],
                stop_renewing: Callable[[], Any]) -> Tuple[Optional[JobOutcome], Optional[str]]:
        """Run ``fn(job)``. When it fails, stop renewing, store the failure and
        answer ``(outcome, None)``; when it succeeds answer ``(None, result)``
        with the lease still renewed: the caller completes it."""
        client = self._client
        try:
            try:
                result = fn(job)
            except Exception as e:
                if job.signal_token is None:
                    raise
                stop_renewing()
                return self._suspended(job, None, e), None
            if job.signal_token is not None:
                # Suspended (C3.23): the attempt ended there, nothing to store.
                stop_renewing()
                return self._suspended(job, result, None), None
            if result is not None and not isinstance(result, str):
                raise TypeError(f"a job's result must be a str or None, got {type(result).__name__}")
        except LeaseLost as e:
            stop_renewing()
            log.warning("%s (fence %d): lease lost, nothing stored", job.id, job.fence)
            return JobOutcome(job, LOST, exception=e), None
        except Snooze as e:
            stop_renewing()
            return self._snooze(job, e), None
        except Exception as e:
            stop_renewing()
            error = error_text(e)
            if job.lost.is_set():
                ok = False  # the lease is someone else's: a fail would be refused anyway
            else:
                ok = client.fail(job.id, job.owner, job.fence, error, retry_in=self.retry_in, now=self._now())
            if ok:
                log.warning("%s (fence %d, attempt %d) failed: %s", job.id, job.fence, job.attempts, error,
                            exc_info=e)
            else:
                log.warning("%s (fence %d) failed after its lease was lost, nothing stored: %s",
                            job.id, job.fence, error, exc_info=e)
            return JobOutcome(job, FAILED if ok else LOST, error=error, exception=e), None
        except BaseException:
            stop_renewing()
            if not job.lost.is_set():
                try:
                    client.release(job.id, job.owner, job.fence)
                except FenceqError:
                    pass  # the lease expires by itself
            raise
        return None, result

    @staticmethod
    def _suspended(job: Job, result: Any, exception: Optional[Exception]) -> JobOutcome:
        """The outcome of a job its function suspended (:meth:`Job.suspend`):
        nothing is sent, whatever the function did after the suspend."""
        log.info("%s (fence %d, attempt %d): suspended until signalled, its attempt given back",
                 job.id, job.fence, job.attempts)
        if exception is not None:
            log.warning("%s (fence %d) raised after its suspend, nothing stored: %s", job.id,
                        job.fence, error_text(exception), exc_info=exception)
        return JobOutcome(job, SUSPENDED, result=result, exception=exception)

    def _snooze(self, job: Job, snooze: Snooze) -> JobOutcome:
        """Report a :class:`Snooze` from the job function with ``snooze``:
        the job comes back after its delay, with its attempt given back."""
        if job.lost.is_set():
            ok = False  # the lease is someone else's: a snooze would be refused anyway
        else:
            ok = self._client.snooze(job.id, job.owner, job.fence, snooze.delay, now=self._now())
        if ok:
            log.info("%s (fence %d, attempt %d): %s, its attempt given back", job.id, job.fence,
                     job.attempts, snooze)
        else:
            log.warning("%s (fence %d): snooze refused, the lease was lost: nothing stored",
                        job.id, job.fence)
        return JobOutcome(job, SNOOZED if ok else LOST, exception=snooze)

    def _handle(self, job: Job, fn: Callable[[Job], Optional[str]], take_next: bool = False) -> JobOutcome:
        client = self._client
        renewer = _Renewer(self.endpoint, job, self.renew_every, self.timeout, self._clock,
                           self._curve)
        renewer.start()
        outcome, result = self._run_fn(job, fn, renewer.stop)
        if outcome is not None:
            return outcome
        # Stop renewing before completing, so no renewal can race the completion.
        renewer.stop()
        if job.lost.is_set():
            ok = False
        elif take_next and not self._stopping:
            reply = client.complete_and_claim_next(job.id, job.owner, job.fence, result, self.queue,
                                                   self.ttl, now=self._now())
            ok = reply["completed"]
            if reply["next"] is not None:
                self._held = self._job(reply["next"])
                if self._stopping:  # stop() came while the completion was on its way
                    self._release_held("stopping")
        else:
            ok = client.complete(job.id, job.owner, job.fence, result, now=self._now())
        if not ok:
            log.warning("%s (fence %d): lease lost, the result was refused", job.id, job.fence)
        return JobOutcome(job, COMPLETED if ok else LOST, result=result)

    # -- prefetch (prefetch > 1) -------------------------------------------

    def _claim_ahead(self, wait: Optional[float], most: int) -> None:
        """Claim up to ``most`` jobs (no more than ``prefetch`` held in all)
        with one ``claim_next(max=...)``, long-polling up to ``wait``."""
        assert self._leases is not None
        want = min(most, self.prefetch - len(self._leases))
        if want <= 0:
            return
        claimed = self._client.claim_next(self.queue, self.owner, self.ttl, max=want,
                                          wait=wait or None, now=self._now())
        self._hold(claimed)

    def _hold(self, claimed: List[Dict[str, Any]]) -> None:
        assert self._leases is not None
        jobs = [self._job(c) for c in claimed]
        self._leases.add(jobs)
        self._ahead.extend(jobs)

    def _next_ahead(self) -> Optional[Job]:
        """The next job claimed ahead whose lease is still ours. One whose
        renewal was refused (the keeper logged it) is skipped: never run."""
        while self._ahead:
            job = self._ahead.popleft()
            if not job.lost.is_set():
                return job
        return None

    def _finished(self, job: Job, fn: Callable[[Job], Optional[str]]) -> Optional[JobOutcome]:
        """Run a held job. A failure is stored at once and answered; a success
        waits in ``_pending`` (its lease still renewed) for :meth:`_flush`."""
        assert self._leases is not None
        leases = self._leases
        outcome, result = self._run_fn(job, fn, lambda: leases.discard(job))
        if outcome is not None:
            return outcome
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append((job, result))
        return None

    def _flush(self, more: int) -> List[JobOutcome]:
        """Complete the finished jobs with one ``complete_many`` and, in the same
        round trip, claim up to ``more`` jobs (no more than ``prefetch`` held in
        all; none once stopping). A job whose lease is gone is left out, one
        the daemon refuses answers ``lost``; the others are completed."""
        assert self._leases is not None
        pending, self._pending = self._pending, []
        outcomes: List[Optional[JobOutcome]] = []
        items: List[Tuple[int, Job, Optional[str]]] = []
        for job, result in pending:
            # Before the request: a completed lease is not renewed any more, and
            # a request that fails leaves no lease behind but to expire.
            self._leases.discard(job)
            if job.lost.is_set():
                log.warning("%s (fence %d): lease lost, the result was not sent", job.id, job.fence)
                outcomes.append(JobOutcome(job, LOST, result=result))
            else:
                items.append((len(outcomes), job, result))
                outcomes.append(None)
        if not items:
            return [o for o in outcomes if o is not None]
        leases = [LeaseItem(job.id, job.owner, job.fence, result) for _, job, result in items]
        more = 0 if self._stopping else min(more, self.prefetch - len(self._leases))
        if more > 0:
            reply = self._client.complete_many(leases, NextClaim(self.queue, self.ttl, more), now=self._now())
            completed = reply.completed
            self._hold(reply.next)
        else:
            completed = self._client.complete_many(leases, now=self._now())
        for (i, job, result), ok in zip(items, completed):
            if not ok:
                log.warning("%s (fence %d): lease lost, the result was refused", job.id, job.fence)
            outcomes[i] = JobOutcome(job, COMPLETED if ok else LOST, result=result)
        return [o for o in outcomes if o is not None]

    def _wind_down(self, report: Callable[[List[JobOutcome]], None], quiet: bool) -> None:
        """Complete what is finished (claiming nothing more), then release what
        is held. ``quiet`` (an exception is on its way out): a daemon error is
        logged instead of raised; the leases it leaves end by themselves."""
        try:
            if self._pending and not self._client.closed:
                report(self._flush(0))
        except FenceqError as e:
            if not quiet:
                raise
            log.warning("could not complete the finished jobs, their leases end by themselves: %s", e)
        finally:
            if self._ahead and not self._client.closed:
                self._release_held("stopping" if self._stopping else "run() returns")

    def _run_prefetch(self, fn: Callable[[Job], Optional[str]], max_jobs: Optional[int],
                      idle_exit: Optional[float],
                      on_outcome: Optional[Callable[[JobOutcome], None]]) -> int:
        def report(outcomes: List[JobOutcome]) -> None:
            if on_outcome is not None:
                for outcome in outcomes:
                    on_outcome(outcome)

        handled = 0
        idle_since = time.monotonic()
        try:
            while not self._stopping and (max_jobs is None or handled < max_jobs):
                # Claim no job that max_jobs would leave unrun.
                most = self.prefetch if max_jobs is None else max_jobs - handled - len(self._ahead)
                # Completions go out when the jobs claimed ahead are all run, or
                # once the oldest has waited renew_every; they claim more jobs.
                if self._pending and (not self._ahead
                                      or time.monotonic() - self._pending_since >= self.renew_every):
                    report(self._flush(most))
                    continue  # the jobs it claimed count against max_jobs
                job = self._next_ahead()
                if job is None:
                    wait = self.wait
                    if idle_exit is not None:
                        left = idle_exit - (time.monotonic() - idle_since)
                        if left <= 0:
                            break
                        wait = min(wait, left)
                    self._claim_ahead(wait, most)
                    if self._stopping:
                        break  # what came is released below
                    job = self._next_ahead()
                    if job is None:
                        continue
                outcome = self._finished(job, fn)
                handled += 1
                idle_since = time.monotonic()
                if outcome is not None:
                    report([outcome])
        except BaseException:
            self._wind_down(report, quiet=True)
            raise
        self._wind_down(report, quiet=False)
        return handled

    def _run_once_prefetch(self, fn: Callable[[Job], Optional[str]], wait: Optional[float],
                           take_next: bool) -> Optional[JobOutcome]:
        if self._stopping:
            self._release_held("stopping")
            return None
        job = self._next_ahead()
        if job is None:
            self._claim_ahead(self.wait if wait is None else wait, self.prefetch)
            if self._stopping:
                self._release_held("stopping")
                return None
            job = self._next_ahead()
            if job is None:
                return None
        outcome = self._finished(job, fn)
        if outcome is None:
            outcome = self._flush(self.prefetch if take_next else 0)[0]
        return outcome


def _suspender(worker: "weakref.ReferenceType[QueueWorker]",
               job: Job) -> Callable[[float, Optional[str]], Optional[str]]:
    """:meth:`Job.suspend`'s call: ``suspend`` under ``job``'s lease with the
    worker's Client and clock; a suspended job's lease is renewed no more."""
    def suspend(timeout: float, on_timeout: Optional[str]) -> Optional[str]:
        w = worker()
        if w is None:
            raise ClientMisuse("misuse", f"Job.suspend: the QueueWorker that claimed {job.id!r} is gone")
        token = w._client.suspend(job.id, job.owner, job.fence, timeout, on_timeout=on_timeout,
                                  now=w._now())
        if token is not None and w._leases is not None:
            w._leases.discard(job)
        return token
    return suspend


def _step_saver(worker: "weakref.ReferenceType[QueueWorker]", job: Job) -> Callable[[str, StepValue], bool]:
    """:meth:`Job.step`'s save: ``step_save`` under ``job``'s lease with the
    worker's Client and clock. The worker is held weakly: a job kept by the
    lease keeper's thread must not keep a forgotten worker alive."""
    def save(name: str, value: StepValue) -> bool:
        w = worker()
        if w is None:
            raise ClientMisuse("misuse", f"Job.step: the QueueWorker that claimed {job.id!r} is gone")
        return w._client.step_save(job.id, job.owner, job.fence, name, value, now=w._now())
    return save


def _suspending(lease: Lease) -> bool:
    """Whether ``lease`` is a :class:`Job` whose :meth:`Job.suspend` was
    sent (or answered): a refused renewal is then no news."""
    return getattr(lease, "_suspending", False) or getattr(lease, "signal_token", None) is not None


class _Renewer:
    """Background renewal of one lease, on its own thread and Client."""

    def __init__(self, endpoint: str, lease: Lease, every: float, timeout: float,
                 clock: Optional[Callable[[], float]], curve: Optional[CurveKeys]) -> None:
        self._endpoint = endpoint
        self._curve = curve
        self._lease = lease
        self._every = every
        # A renewal that takes longer than the interval is no longer useful.
        self._timeout = min(timeout, max(every, 0.05))
        self._clock = clock
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"fenceq-renew-{lease.id}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(self._timeout + 1.0)

    def _loop(self) -> None:
        lease = self._lease
        try:
            with Client(self._endpoint, self._timeout, curve=self._curve) as client:
                while not self._stopping.wait(self._every):
                    if getattr(lease, "signal_token", None) is not None:
                        return  # suspended (Job.suspend): the lease ended
                    now = self._clock() if self._clock is not None else None
                    try:
                        ok = client.renew(lease.id, lease.owner, lease.fence, lease.ttl, now=now)
                    except (Timeout, Unavailable, InternalError) as e:
                        lease.renew_error = e  # transient: try again next round
                        continue
                    if not ok and _suspending(lease):
                        lease.lost.set()  # suspended meanwhile: refused, as it should be
                        return
                    if not ok:
                        # Cancelled (issue 18), or taken over after it expired:
                        # the job is not ours any more, whatever we do with it.
                        log.warning("%s (fence %d): renewal refused (cancelled, or the lease is "
                                    "no longer ours): the job is not this worker's any more",
                                    lease.id, lease.fence)
                        lease.lost.set()
                        return
        except BaseException as e:  # a bad argument or a broken client: stop renewing
            lease.renew_error = e


class _LeaseKeeper:
    """The leases a prefetching :class:`QueueWorker` holds, all renewed with
    one ``renew_many`` every ``every`` seconds from a background thread with
    its own Client. The thread runs while there is a lease to renew (and the
    worker exists); a lease whose renewal is refused is dropped and its
    ``lost`` set: the job is no longer ours."""

    def __init__(self, endpoint: str, owner: str, ttl: float, every: float, timeout: float,
                 clock: Optional[Callable[[], float]], curve: Optional[CurveKeys],
                 worker: "weakref.ReferenceType[QueueWorker]") -> None:
        self._endpoint = endpoint
        self._owner = owner
        self._ttl = ttl
        self._every = every
        # A renewal that takes longer than the interval is no longer useful.
        self._timeout = min(timeout, max(every, 0.05))
        self._clock = clock
        self._curve = curve
        self._worker = worker
        self._lock = threading.Lock()
        #: (id, fence) -> the job: a job claimed again by this worker is another lease.
        self._jobs: Dict[Tuple[str, int], Job] = {}
        self._thread: Optional[threading.Thread] = None
        self._closed = threading.Event()

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def add(self, jobs: List[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._jobs[(job.id, job.fence)] = job
            if self._jobs and self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name=f"fenceq-renew-many-{self._owner}")
                self._thread.start()

    def discard(self, job: Job) -> None:
        """Stop renewing ``job`` (completed, failed, released, or lost)."""
        with self._lock:
            if self._jobs.get((job.id, job.fence)) is job:
                del self._jobs[(job.id, job.fence)]

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            thread = self._thread
            self._jobs.clear()
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout + 1.0)

    def _loop(self) -> None:
        me = threading.current_thread()
        try:
            with Client(self._endpoint, self._timeout, curve=self._curve) as client:
                while not self._closed.wait(self._every):
                    with self._lock:
                        held = list(self._jobs.values())
                        if not held or self._worker() is None:
                            self._thread = None  # add() starts another when there are leases again
                            return
                    now = self._clock() if self._clock is not None else None
                    try:
                        renewed = client.renew_many(held, self._ttl, now=now)
                    except (Timeout, Unavailable, InternalError) as e:
                        for job in held:
                            job.renew_error = e  # transient: try again next round
                        continue
                    lost = []
                    with self._lock:
                        for job, ok in zip(held, renewed):
                            # A job completed or dropped meanwhile is not ours to judge.
                            if not ok and self._jobs.get((job.id, job.fence)) is job:
                                del self._jobs[(job.id, job.fence)]
                                job.lost.set()
                                if not _suspending(job):  # a suspend's doing: no warning
                                    lost.append(job)
                    for job in lost:
                        log.warning("%s (fence %d): renewal refused (cancelled, or the lease is "
                                    "no longer ours): dropped", job.id, job.fence)
        except BaseException as e:  # a bad argument or a broken client: stop renewing
            with self._lock:
                held = list(self._jobs.values())
            for job in held:
                job.renew_error = e
            log.warning("renewing the held leases stopped: %s", e)
        finally:
            with self._lock:
                if self._thread is me:
                    self._thread = None
