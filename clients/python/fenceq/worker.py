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

Side effects outside fenceq are not fenced by this (C2.4): a job that writes
elsewhere should pass ``lease.fence`` along and have that system check it.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from .client import Client
from .errors import FenceqError, InternalError, Timeout, Unavailable


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
    #: Set when a renewal was refused: another owner may hold the job now.
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
    """

    def __init__(self, endpoint: Optional[str] = None, *, owner: Optional[str] = None,
                 ttl: float = 30.0, renew_every: Optional[float] = None,
                 timeout: float = 5.0, clock: Optional[Callable[[], float]] = None) -> None:
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, got {ttl!r}")  # C3.3
        if renew_every is not None and not renew_every > 0:
            raise ValueError(f"renew_every must be > 0, got {renew_every!r}")
        self.owner: str = owner or default_owner()
        self.ttl = ttl
        self.renew_every: float = renew_every if renew_every is not None else ttl / 3
        self.timeout = timeout
        self._clock = clock
        self._client = Client(endpoint, timeout)
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
        """
        client = self._client
        fence = client.claim(job_id, self.owner, self.ttl, now=self._now())
        if fence is None:
            return None
        lease = Lease(id=job_id, owner=self.owner, fence=fence, ttl=self.ttl)
        renewer = _Renewer(self.endpoint, lease, self.renew_every, self.timeout, self._clock)
        renewer.start()
        try:
            result = fn(lease)
        except LeaseLost:
            renewer.stop()
            return False
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


class _Renewer:
    """Background renewal of one lease, on its own thread and Client."""

    def __init__(self, endpoint: str, lease: Lease, every: float, timeout: float,
                 clock: Optional[Callable[[], float]]) -> None:
        self._endpoint = endpoint
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
            with Client(self._endpoint, self._timeout) as client:
                while not self._stopping.wait(self._every):
                    now = self._clock() if self._clock is not None else None
                    try:
                        ok = client.renew(lease.id, lease.owner, lease.fence, lease.ttl, now=now)
                    except (Timeout, Unavailable, InternalError) as e:
                        lease.renew_error = e  # transient: try again next round
                        continue
                    if not ok:
                        lease.lost.set()
                        return
        except BaseException as e:  # a bad argument or a broken client: stop renewing
            lease.renew_error = e
