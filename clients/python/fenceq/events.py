"""Events (issue 33): a subscriber to fenceqd's stream of committed job changes.

``fenceqd --events ENDPOINT`` publishes every job change, once its
transaction has committed, on a ZeroMQ XPUB socket (``protocol/PROTOCOL.md``,
"Events: a stream of committed changes"). Each message has two frames: the
topic, the job's queue name (UTF-8 bytes), then a msgpack map ``{seq, t,
event, id, queue, fence, owner?, group?}``. This module connects a SUB socket
to it:

    import fenceq

    with fenceq.subscribe("ipc://var/fenceqd-events.sock", "emails") as sub:
        for ev in sub:                  # forever; sub.recv(timeout=1) answers None after 1 s
            print(ev.seq, ev.event, ev.id, ev.fence, ev.owner)

Invariants this module keeps:

- A SUB subscription matches topics by prefix (``emails`` also gets
  ``emails-eu``); :meth:`Subscriber.recv` returns only the events whose topic
  frame equals the queue's name exactly and skips the others.
- A message that is not a protocol v1 event (not two frames, not a msgpack
  map, a required key missing or of the wrong type, a ``queue`` that is not
  its topic) raises :class:`fenceq.BadReply` (code ``bad_reply``); it is
  consumed, and the subscriber stays usable.
- ``seq`` numbers every event the daemon publishes, whatever its queue. A
  ``seq`` more than one past the last one received counts the events in
  between in :attr:`Subscriber.missed`; a ``seq`` not past it is a restarted
  daemon (its ``seq`` starts at 1 again) and counts nothing.
- Like a :class:`fenceq.Client`, a ``Subscriber`` belongs to the thread that
  created it: use from another thread, after ``fork`` or after ``close``
  raises :class:`fenceq.ClientMisuse`.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import msgpack
import zmq

from .client import (CurveKeys, _OneThreadSocket, _apply_curve, _check_curve_keys, _invalid,
                     _is_int, _process)
from .errors import BadReply, ClientMisuse, TransportError

#: The ``event`` values protocol v1 publishes. Others may be added
#: (additively): :meth:`Subscriber.recv` passes any str through.
#: ``suspended``: a ``suspend`` ended a lease, the job waits for its signal;
#: ``signalled``: a ``signal`` woke it (C3.23; a wait that times out is
#: ``failed`` or ``dead``); ``expired``: a job's ``deadline`` passed before a
#: claim took it, it is dead (C3.24); ``step_saved``: a ``step_save`` was
#: applied (C3.22; ``fence`` is the lease's that saved it).
EVENT_KINDS = ("enqueued", "claimed", "completed", "failed", "dead", "retried", "cancelled",
               "snoozed", "unblocked", "suspended", "signalled", "expired", "step_saved")


class Event(NamedTuple):
    """One committed change of a job, as fenceqd published it.

    ``seq``: 1, 2, 3, ... for every event the daemon publishes (all queues),
    in commit order; 1 again after a restart. ``t``: the daemon's wall clock
    (Unix seconds) when it published the event. ``event``: what happened
    (:data:`EVENT_KINDS`). ``id`` and ``queue``: the job and its queue.
    ``fence``: the job's fence after the change (a claim's new fence; the
    fence a complete or fail carried). ``owner``: the lease's owner, for
    ``claimed`` only, else ``None``. ``group``: the job's group, ``None``
    when it has none."""

    seq: int
    t: float
    event: str
    id: str
    queue: str
    fence: int
    owner: Optional[str] = None
    group: Optional[str] = None


def _bad(message: str) -> BadReply:
    return BadReply("bad_reply", f"event: {message}")


def _parse_event(frames: Sequence[bytes]) -> Event:
    """The :class:`Event` of one message's frames; :class:`fenceq.BadReply`
    when they are not a protocol v1 event (never a ``KeyError``)."""
    if len(frames) != 2:
        raise _bad(f"expected 2 frames (topic, msgpack map), got {len(frames)}")
    topic, body = bytes(frames[0]), frames[1]
    try:
        fields = msgpack.unpackb(body, raw=False)
    except Exception as e:  # not msgpack, trailing bytes, a str that is not UTF-8, ...
        raise _bad(f"body is not msgpack: {e}") from None
    if not isinstance(fields, dict):
        raise _bad(f"body is not a map: {fields!r}")

    def required(key: str, check, what: str) -> Any:
        if key not in fields:
            raise _bad(f"missing {key!r} in {fields!r}")
        value = fields[key]
        if not check(value):
            raise _bad(f"{key!r} must be {what}, got {value!r}")
        return value

    def optional(key: str) -> Optional[str]:
        value = fields.get(key)
        if value is not None and not isinstance(value, str):
            raise _bad(f"{key!r} must be a str when present, got {value!r}")
        return value

    seq = required("seq", lambda v: _is_int(v) and v >= 1, "an int >= 1")
    t = required("t", lambda v: (isinstance(v, float) or _is_int(v)) and math.isfinite(v),
                 "a finite number")
    event = required("event", lambda v: isinstance(v, str) and v != "", "a non-empty str")
    id = required("id", lambda v: isinstance(v, str), "a str")
    queue = required("queue", lambda v: isinstance(v, str), "a str")
    fence = required("fence", lambda v: _is_int(v) and v >= 0, "an int >= 0")
    owner = optional("owner")
    group = optional("group")
    if queue.encode("utf-8") != topic:
        raise _bad(f"queue {queue!r} is not its topic frame {topic!r}")
    return Event(seq, float(t), event, id, queue, fence, owner, group)


def _advance_seq(last_seq: Optional[int], seq: int) -> Tuple[int, int]:
    """``(new last_seq, events missed)`` when an event numbered ``seq`` follows
    ``last_seq`` (``None``: the first one this subscriber received, which
    counts nothing: there is no replay before it). A gap counts the seqs in
    between; a ``seq`` not past ``last_seq`` is a restarted daemon: it
    counts nothing and starts over from ``seq``."""
    if last_seq is None or seq <= last_seq:
        return seq, 0
    return seq, seq - last_seq - 1


class Subscriber(_OneThreadSocket):
    """A ZeroMQ SUB socket on fenceqd's ``--events`` endpoint, for one thread.

    ``endpoint``: the daemon's events endpoint (``ipc://…`` or ``tcp://…``;
    not its ``--listen`` endpoint, and there is no default). ``queue``: the
    queue whose events :meth:`recv` returns (its topic frame equal to the
    name, exactly); ``None``: every queue's. ``curve``: for a ``tcp://``
    endpoint, the same :class:`fenceq.CurveKeys` a :class:`fenceq.Client`
    takes (:func:`fenceq.curve_keys`); a subscriber the daemon does not
    allow (or one without CURVE on tcp) only ever times out. ``context``: the
    ``zmq.Context`` to make the socket in (default ``zmq.Context.instance()``).

    A bad endpoint, queue or CURVE key raises :class:`fenceq.InvalidArgument`
    (a ``ValueError``; a wrong Python type: ``TypeError``). Connecting is
    asynchronous, and so is the subscription: events published before it
    reached the daemon (or while it is restarting) are not received, and
    there is no replay; read the state with ``Client.job``, ``list`` or
    ``stats``. An ``ipc://`` endpoint with no daemon yet is connected once
    its socket appears.

    ``last_seq`` is the ``seq`` of the last event received (``None`` before
    the first), and ``missed`` counts the events skipped by gaps in ``seq``:
    events the daemon dropped because this subscriber fell too far behind
    (10,000 messages), or, with a ``queue``, also the events of the other
    queues (``seq`` numbers them all; the socket never receives them). Events
    of queues whose names the ``queue`` prefixes (``emails-eu`` for
    ``emails``) are received and skipped: they move ``last_seq`` without
    being returned.

    Iterating (``for ev in sub``) yields events forever. Usable as a context
    manager; leaving the block closes the socket.
    """

    _kind = "Subscriber"

    def __init__(self, endpoint: str, queue: Optional[str] = None, *,
                 curve: Optional[CurveKeys] = None,
                 context: Optional[zmq.Context] = None) -> None:
        if not isinstance(endpoint, str):
            raise TypeError(f"endpoint must be a str, got {type(endpoint).__name__}")
        if not endpoint:
            raise _invalid("endpoint must not be empty: pass fenceqd's --events endpoint")
        if queue is not None and not isinstance(queue, str):
            raise TypeError(f"queue must be a str or None, got {type(queue).__name__}")
        if queue == "":
            raise _invalid("queue must not be empty (None: every queue)")
        if curve is not None:
            curve = _check_curve_keys(curve)
            if not endpoint.startswith("tcp://"):
                raise _invalid(f"CURVE keys are for tcp:// endpoints; fenceqd serves "
                               f"{endpoint!r} without CURVE")
        self.endpoint: str = endpoint
        #: The queue whose events :meth:`recv` returns; ``None``: every queue.
        self.queue: Optional[str] = queue
        #: The ``seq`` of the last event received, ``None`` before the first.
        self.last_seq: Optional[int] = None
        #: Events skipped by gaps in ``seq`` (see the class docstring).
        self.missed: int = 0
        self._topic: Optional[bytes] = None if queue is None else queue.encode("utf-8")
        self._owner = threading.current_thread()
        self._fork = _process()
        socket = (context if context is not None else zmq.Context.instance()).socket(zmq.SUB)
        _apply_curve(socket, curve)
        try:
            socket.setsockopt(zmq.LINGER, 0)
            # The SUB prefix filter: the exact comparison is recv's.
            socket.setsockopt(zmq.SUBSCRIBE, self._topic or b"")
            socket.connect(endpoint)
        except zmq.ZMQError as e:
            socket.close(linger=0)
            raise _invalid(f"cannot connect to events endpoint {endpoint!r}: {e}") from None
        self._socket: Optional[zmq.Socket] = socket

    # -- lifecycle ---------------------------------------------------------

    def __repr__(self) -> str:
        state = "closed" if self._socket is None else "open"
        queue = "every queue" if self.queue is None else f"queue {self.queue!r}"
        return f"<fenceq.Subscriber {self.endpoint!r} {queue} {state}>"

    # -- receiving ---------------------------------------------------------

    def recv(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event of this subscriber's queue (of any queue without
        one), or ``None`` when none came within ``timeout`` seconds (``None``:
        wait as long as it takes; ``0``: only one already received). Events
        of other queues that the SUB prefix filter lets through are skipped
        within the same deadline.

        Raises :class:`fenceq.BadReply` for a message that is not a protocol
        v1 event (consumed: the next call goes on with the next message),
        :class:`fenceq.TransportError` when the socket fails,
        :class:`fenceq.ClientMisuse` after :meth:`close` or from another
        thread, and :class:`fenceq.InvalidArgument` for a negative or NaN
        ``timeout``."""
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise TypeError(f"timeout must be a number or None, got {type(timeout).__name__}")
            if not timeout >= 0:
                raise _invalid(f"timeout must be >= 0 seconds or None, got {timeout!r}")
        socket = self._usable()
        deadline = None if timeout is None or math.isinf(timeout) else time.monotonic() + timeout
        while True:
            try:
                if deadline is None:
                    ready = socket.poll(None, zmq.POLLIN)
                else:
                    remaining = deadline - time.monotonic()
                    ready = socket.poll(max(0, int(remaining * 1000 + 0.999)), zmq.POLLIN)
                if not ready:
                    return None
                frames: List[bytes] = socket.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                continue
            except zmq.ZMQError as e:
                raise TransportError("transport", f"events: the socket to {self.endpoint} failed: {e}") from None
            event = _parse_event(frames)
            self.last_seq, missed = _advance_seq(self.last_seq, event.seq)
            self.missed += missed
            if self._topic is None or bytes(frames[0]) == self._topic:
                return event
            # A prefix match (emails-eu for emails): skipped.

    def __iter__(self) -> Iterator[Event]:
        """Yields every event of the queue, forever (``recv()`` without a timeout)."""
        while True:
            event = self.recv()
            if event is not None:
                yield event

    def _usable(self) -> zmq.Socket:
        self._check_thread()
        if self._socket is None:
            raise ClientMisuse("misuse", "fenceq.Subscriber is closed")
        return self._socket


def subscribe(endpoint: str, queue: Optional[str] = None, **kw: Any) -> Subscriber:
    """A :class:`Subscriber` to fenceqd's events at ``endpoint``: of ``queue``
    (exactly), or of every queue when ``None``. ``kw``: ``curve=``,
    ``context=``, as :class:`Subscriber` takes them."""
    return Subscriber(endpoint, queue, **kw)
