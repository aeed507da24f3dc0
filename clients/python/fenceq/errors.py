"""Errors raised by the fenceq Python client.

A refusal is a value (``claim`` answers ``None``, a stale ``complete`` answers
``False``); everything here is a failure. Every failure the daemon reports, and
every failure of the client's own, is a :class:`FenceqError` carrying a
stable ``code``: the daemon's codes from protocol v1 (``bad_request``,
``unknown_op``, ``invalid_argument``, ``unsupported_version``, ``unavailable``,
``internal``, ``outcome_unknown``) and the client codes that every fenceq
client shares (``protocol/PROTOCOL.md``, "Client errors"): ``timeout``,
``unreachable``, ``transport``, ``bad_reply``, ``misuse`` and ``lease_lost``
(:class:`fenceq.LeaseLost`, in ``fenceq.worker``). ``invalid_argument`` is also
the code of an argument the client refuses itself, before sending anything.
"""

from __future__ import annotations

from typing import Dict, Type


class FenceqError(Exception):
    """A request failed. ``code`` is stable and meant for programs; ``message``
    is for humans (the daemon's message names the offending field, C4.2)."""

    code: str = "error"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class BadRequest(FenceqError):
    """``bad_request``: a field is missing or has the wrong type (C4.1),
    for example a float where the protocol wants an int (``fence``)."""


class UnknownOp(FenceqError):
    """``unknown_op``: the daemon has no such operation."""


class InvalidArgument(FenceqError, ValueError):
    """``invalid_argument``: a field has the right type but a bad value,
    such as ``ttl <= 0`` (C3.3, C3.4), NaN, an over-long id, or ``now``
    sent to a server-clock daemon (C2.3). Also a ``ValueError``. The client
    raises it itself, before sending anything, for a bad value it can see: an
    over-long payload, a malformed endpoint, timeout or CURVE key."""


class UnsupportedVersion(FenceqError):
    """``unsupported_version``: the daemon does not speak this protocol version."""


class Unavailable(FenceqError):
    """``unavailable``: the daemon is shutting down and applied nothing of the
    request; it is safe to retry against a daemon that is running."""


class InternalError(FenceqError):
    """``internal``: the daemon's store failed; nothing of the request was
    applied (C1.4)."""


class OutcomeUnknown(FenceqError):
    """``outcome_unknown``: the request's transaction may or may not have been
    applied (the daemon lost its PostgreSQL connection while it committed, or
    the fsync of its SQLite commit failed). Read the job's state, or repeat the
    request (fences make a repeat safe)."""


class Timeout(FenceqError, TimeoutError):
    """``timeout``: no reply within the client's timeout. Also a ``TimeoutError``.

    The request may or may not have been applied (it may still be queued or
    in flight), unless ``sent`` is false: then no connection to a daemon
    came up in time and the request was never handed to one. The client stays
    usable: the late reply, if one comes, is recognised by its ``rid`` and
    discarded, never taken for another request's reply."""

    def __init__(self, code: str, message: str, sent: bool = True) -> None:
        super().__init__(code, message)
        #: Whether the request left this client (False: it cannot have been applied).
        self.sent = sent


class Unreachable(FenceqError, ConnectionError):
    """``unreachable``: before a client's first reply, its ``ipc://`` socket
    file is missing (no daemon there: the message names the absolute path),
    not a socket, or not this user's to connect to. Raised at once; the
    request was not sent. Also a ``ConnectionError``. Once a daemon has
    answered, a missing socket file is taken for a restart and waited for
    (:class:`Timeout` if it does not come back in time)."""

    #: Always False: the request never left this client.
    sent = False


class TransportError(FenceqError, ConnectionError):
    """``transport``: the ZeroMQ socket failed while sending or receiving (a
    failure of the socket itself, not of the daemon). The request may or may
    not have been applied. Also a ``ConnectionError``."""


class BadReply(FenceqError):
    """``bad_reply``: the reply is not a protocol v1 reply for the request
    (not msgpack, not a map, a result of the wrong shape), or the daemon is not
    one this client can use. The request may or may not have been applied."""


class ClientMisuse(FenceqError, RuntimeError):
    """``misuse``: a :class:`fenceq.Client` was used from a thread other than
    its creator's, from inside one of its own calls (a signal handler), after
    ``fork`` or after ``close``. A programming error: nothing was sent. Also a
    ``RuntimeError``."""


#: Daemon error code -> exception class. Codes this client does not know yet
#: become a plain :class:`FenceqError` with the code preserved.
ERRORS_BY_CODE: Dict[str, Type[FenceqError]] = {
    "bad_request": BadRequest,
    "unknown_op": UnknownOp,
    "invalid_argument": InvalidArgument,
    "unsupported_version": UnsupportedVersion,
    "unavailable": Unavailable,
    "internal": InternalError,
    "outcome_unknown": OutcomeUnknown,
}


def error_from_reply(code: str, message: str) -> FenceqError:
    """The exception for an error reply ``{"code": code, "message": message}``."""
    return ERRORS_BY_CODE.get(code, FenceqError)(code, message)
