"""The fenceq client: one ZeroMQ DEALER socket speaking protocol v1 to fenceqd.

Contract (``docs/contract.md``) and wire format (``protocol/PROTOCOL.md``)
are the daemon's; this module only moves requests and replies. A refusal is a
value (``None`` / ``False``); a failure raises :class:`fenceq.FenceqError`.

Invariants this module keeps:

- Every request carries a fresh integer ``rid``; a reply is accepted only when
  it echoes that ``rid``. A reply that arrives after its request timed out is
  therefore discarded by the next request instead of being taken for its reply.
- The socket is created with ``ZMQ_IMMEDIATE``: a request is queued only on a
  completed connection, so a timeout while no daemon is reachable means the
  request was never sent (it cannot be applied later by a daemon that appears).
- A ``Client`` belongs to the thread that created it (ZeroMQ sockets are not
  thread-safe). Use from any other thread, re-entrant use (a signal handler),
  use after ``fork`` or after ``close`` raises :class:`fenceq.ClientMisuse`
  (code ``misuse``) before anything is sent.
- ``tcp://`` endpoints are served only with ZeroMQ CURVE: pass
  ``curve=curve_keys(key_file, server_public)``. A handshake the daemon
  refuses (a key not on its list, a wrong server key, no CURVE at all) is
  never completed, so such a client only ever sees :class:`Timeout` with
  nothing sent.
"""

from __future__ import annotations

import builtins
import math
import os
import stat
import struct
import threading
import time
from typing import (Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Union,
                    overload)

import msgpack
import zmq
from zmq.utils import z85

from .errors import (
    BadReply,
    ClientMisuse,
    InvalidArgument,
    Timeout,
    TransportError,
    UnknownOp,
    Unreachable,
    UnsupportedVersion,
    error_from_reply,
)

#: The installed service's socket (systemd/fenceqd.conf): where every fenceq
#: client connects when given no endpoint and no ``FENCEQ_ENDPOINT``, if its
#: file exists.
SERVICE_ENDPOINT = "ipc:///run/fenceq/fenceqd.sock"

#: The development default, the last step of :func:`resolve_endpoint`: the
#: socket that ``make run`` serves, relative to the current directory (so:
#: run from the repository root).
DEFAULT_ENDPOINT = "ipc://var/fenceqd.sock"

#: The protocol version this client speaks (the ``protocol`` field of ``ping``).
PROTOCOL_VERSION = 1


#: The largest ``payload`` the daemon takes, in bytes (a str counts its UTF-8 bytes).
MAX_PAYLOAD_BYTES = 256 * 1024

#: The longest ``error`` text :meth:`Client.fail` takes, in bytes (UTF-8).
MAX_ERROR_BYTES = 64 * 1024

#: The longest ``wait`` of :meth:`Client.claim_next`, in seconds.
MAX_WAIT_SECONDS = 3600.0

#: The states :meth:`Client.list` reports and filters on. ``"blocked"``: a
#: job enqueued with ``after`` whose parents are not all done yet (issue 32).
#: ``"suspended"``: a job whose holder suspended it (:meth:`Client.suspend`,
#: C3.23), waiting for the signal of its token or its timeout.
JOB_STATES = ("ready", "delayed", "leased", "done", "dead", "cancelled", "blocked", "suspended")

#: What a job's payload may be: msgpack bin (bytes-like) or str, or None for none.
Payload = Union[bytes, bytearray, memoryview, str, None]

#: What ``on_conflict`` takes: ``"skip"`` (the daemon's default) or ``"replace"``.
ON_CONFLICT = ("skip", "replace")

#: What ``after_failure`` takes (only with ``after``): ``"cancel"`` (the
#: daemon's default: a parent that becomes dead or is cancelled cancels the
#: job) or ``"run"`` (that parent no longer holds the job back).
AFTER_FAILURE = ("cancel", "run")

#: Most parents one job waits for (``after``), and most parts of
#: :meth:`Client.enqueue_fan_in`.
MAX_AFTER = 1000

#: The longest ``group`` of a job (and of :meth:`Client.list`'s filter), in
#: bytes (UTF-8); the daemon refuses an empty or longer one.
MAX_GROUP_BYTES = 256

#: The most bytes of a job's ``headers`` (issue 33), its keys' and values'
#: UTF-8 bytes in all; the daemon refuses more (``invalid_argument``).
MAX_HEADERS_BYTES = 4096

#: A job's steps (:meth:`Client.step_save`, C3.22): the longest step name,
#: in bytes (UTF-8; the daemon refuses an empty or longer one), the most
#: steps one job saves, and the most bytes of their values in all (each value
#: is a payload, at most :data:`MAX_PAYLOAD_BYTES`). The daemon refuses a
#: step_save past either bound (``invalid_argument``).
MAX_STEP_BYTES = 256
MAX_STEPS = 64
MAX_STEPS_BYTES = 256 * 1024

#: :meth:`Client.suspend`'s ``timeout`` (C3.23): at least 1 second, at most
#: 30 days (2,592,000 s); the daemon refuses others (``invalid_argument``).
MIN_SUSPEND_SECONDS = 1
MAX_SUSPEND_SECONDS = 30 * 24 * 3600

#: What :meth:`Client.suspend`'s ``on_timeout`` takes: ``"retry"`` (the
#: daemon's default: the job is ready again, with the error ``"suspend timed
#: out"``) or ``"fail"`` (it is dead, with that error).
ON_TIMEOUT = ("retry", "fail")

#: The longest token :meth:`Client.signal` takes, in bytes (UTF-8); the
#: daemon refuses an empty or longer one. The tokens :meth:`Client.suspend`
#: answers are 32 lowercase hex digits (128 random bits).
MAX_TOKEN_BYTES = 256

#: Most jobs or items one batch op takes (``enqueue_many``, ``complete_many``,
#: ``renew_many``) and the largest ``max`` of ``claim_next``.
MAX_BATCH = 1000

#: The largest ``limit`` of a bulk action (:meth:`Client.retry_many`,
#: :meth:`Client.cancel_many`, :meth:`Client.purge_many`): the most jobs one
#: request acts on (issue 33).
MAX_BULK_LIMIT = 10000

#: The daemon's ``limit`` of a bulk action when none is given.
DEFAULT_BULK_LIMIT = 1000

#: The most pages (requests) :meth:`Client.retry_all`, :meth:`Client.cancel_all`
#: and :meth:`Client.purge_all` ask for by default.
DEFAULT_MAX_PAGES = 10000

#: :meth:`Client.queue_config`'s ``keep_done``, ``keep_dead`` and
#: ``keep_cancelled``: remove that retention (sent as nil: the jobs are kept
#: until purged, the default). ``None`` leaves the stored retention as it is.
KEEP_FOREVER = math.inf


class _Inherit:
    """The type of :data:`INHERIT` (one instance: compare with ``is``)."""

    _instance: "Optional[_Inherit]" = None

    def __new__(cls) -> "_Inherit":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "fenceq.INHERIT"

    def __reduce__(self) -> str:
        return "INHERIT"  # pickled by name: unpickles as this one instance

    def __copy__(self) -> "_Inherit":
        return self

    def __deepcopy__(self, memo: Any) -> "_Inherit":
        return self


#: :meth:`Client.group_config`'s ``max_leased``, ``rate`` and ``per``: remove
#: that override of the group (sent as nil: the group follows the queue's
#: ``group_max_leased``, ``group_rate`` or ``group_per`` again). ``None``
#: leaves the stored override as it is.
INHERIT = _Inherit()

#: The states each bulk action can change (the daemon's default: all of them).
RETRY_MANY_STATES = ("dead", "cancelled")
CANCEL_MANY_STATES = ("ready", "delayed", "leased", "blocked", "dead", "suspended")
PURGE_MANY_STATES = ("done", "dead", "cancelled")


class _NoValue:
    """The default of :meth:`Client.signal`'s ``value``: no value is sent
    (the daemon takes nil), unlike ``None``, which is sent as nil."""

    def __repr__(self) -> str:
        return "<no value>"


_NO_VALUE: Any = _NoValue()


class JobSpec(NamedTuple):
    """One job of :meth:`Client.enqueue_many`: the fields :meth:`Client.enqueue`
    takes (``None``: not sent, the daemon's default), the unique ``key`` and
    its ``unique_for`` and ``on_conflict`` included, the job's ``group``, the
    jobs it waits for, ``after`` (a list of ids; a parent may be an earlier
    entry of the same batch) with its ``after_failure``, and the cap on each
    attempt, ``max_runtime``, and its ``headers`` (a dict of str to str, such
    as a W3C ``traceparent``; issue 33), and its ``deadline`` (Unix seconds:
    not claimed by then, it is dead; C3.24). A plain dict with these keys
    works too. The fields are in the wire's order (a new one goes last, so
    that positional tuples keep their meaning)."""

    id: str
    queue: Optional[str] = None
    payload: Payload = None
    priority: Optional[int] = None
    delay: Optional[float] = None
    max_attempts: Optional[int] = None
    key: Optional[str] = None
    unique_for: Optional[float] = None
    on_conflict: Optional[str] = None
    group: Optional[str] = None
    after: Optional[Sequence[str]] = None
    after_failure: Optional[str] = None
    max_runtime: Optional[float] = None
    headers: Optional[Mapping[str, str]] = None
    deadline: Optional[float] = None


class Enqueued(NamedTuple):
    """What :meth:`Client.enqueue_unique` answers (and
    :meth:`Client.enqueue_many_unique`, per job): ``created`` is ``True``
    when this request created job ``id``; ``False`` when nothing was created,
    and ``id`` is then the job that holds the key (the one that keeps it
    unique, or with ``on_conflict="replace"`` the one that took this request's
    fields if it was waiting), or this request's own id when that id existed
    already. Unpack it (``id, created = ...``); its truth value is
    ``created``, as :meth:`Client.enqueue` would answer."""

    id: str
    created: bool

    def __bool__(self) -> bool:
        return self.created


class LeaseItem(NamedTuple):
    """One lease of :meth:`Client.complete_many` (with its ``result``, a str or
    ``None``) or :meth:`Client.renew_many` (``result`` unused; ``progress``, a
    str or ``None``, sent when set). A dict with the keys ``id``, ``owner``,
    ``fence`` (and ``result`` or ``progress``), a plain tuple in this order, or
    any object with ``id``, ``owner`` and ``fence`` attributes (a
    :class:`fenceq.Lease` or :class:`fenceq.Job`) works too."""

    id: str
    owner: str
    fence: int
    result: Optional[str] = None
    progress: Optional[str] = None


class NextClaim(NamedTuple):
    """The ``next`` of :meth:`Client.complete_many`: after the completions,
    claim up to ``max`` (1..1000) jobs of ``queue`` with a lease of ``ttl``
    seconds. A ``(queue, ttl, max)`` tuple or a dict with these keys works too."""

    queue: str
    ttl: float
    max: int


class CompletedMany(NamedTuple):
    """What :meth:`Client.complete_many` with ``next`` answers: ``completed``,
    one bool per item (what :meth:`Client.complete` would answer), and
    ``next``, the jobs claimed afterwards (``[]`` when the queue had none)."""

    completed: List[bool]
    next: List[Dict[str, Any]]


class BulkResult(NamedTuple):
    """What one page of a bulk action answers (:meth:`Client.retry_many`,
    :meth:`Client.cancel_many`, :meth:`Client.purge_many`): ``count``, how many
    jobs this request acted on, and ``more``: whether jobs that pass the
    filter are left (ask again: the next request goes on where this one
    stopped; :meth:`Client.retry_all` and the other ``*_all`` helpers do)."""

    count: int
    more: bool


#: Characters in the Z85 text of a CURVE key (32 bytes).
CURVE_KEY_CHARS = 40


class CurveKeys(NamedTuple):
    """What a :class:`Client` needs for a ``tcp://`` endpoint (ZeroMQ CURVE):
    the daemon's public key and this client's key pair, each as its 40
    characters of Z85 text. Make one with :func:`curve_keys`. Its ``repr``
    leaves the secret key out."""

    server_public: str
    public_key: str
    secret_key: str

    def __repr__(self) -> str:
        return (f"CurveKeys(server_public={self.server_public!r}, "
                f"public_key={self.public_key!r}, secret_key=<hidden>)")


def _invalid(message: str) -> InvalidArgument:
    """The client's own ``invalid_argument``: a bad value it refuses before
    sending anything (``protocol/PROTOCOL.md``, "Client errors")."""
    return InvalidArgument("invalid_argument", message)


def _z85_key_error(text: Any) -> Optional[str]:
    """Why ``text`` is not the Z85 text of a CURVE key, or ``None`` when it is."""
    if not isinstance(text, str):
        return f"expected a str, got {type(text).__name__}"
    if len(text) != CURVE_KEY_CHARS:
        return f"expected {CURVE_KEY_CHARS} Z85 characters, got {len(text)}"
    try:
        z85.decode(text)
    except (KeyError, ValueError, struct.error):  # a non-Z85 character, or a group beyond 32 bits
        return "not valid Z85 text"
    return None


def _check_curve_keys(keys: Any) -> CurveKeys:
    """``keys`` as a :class:`CurveKeys` whose three keys are valid;
    InvalidArgument (a ValueError) otherwise."""
    try:
        keys = CurveKeys(*keys)
    except TypeError:
        raise _invalid(f"curve: expected CurveKeys(server_public, public_key, secret_key), "
                       f"got {type(keys).__name__}") from None
    for field in CurveKeys._fields:
        problem = _z85_key_error(getattr(keys, field))
        if problem is not None:
            raise _invalid(f"curve: {field} is not a CURVE key: {problem}")
    return keys


def _zcert_property(line: str) -> Optional[tuple]:
    """``(name, value)`` of a zcert ``name = value`` line (``=`` a word of its
    own, as the daemon reads it: ``=`` is also a Z85 digit), else ``None``."""
    words = line.split(None, 2)
    if len(words) < 2 or words[1] != "=":
        return None
    return words[0], (words[2].strip() if len(words) > 2 else "")


def curve_keys(key_file: str, server_public: str) -> CurveKeys:
    """This client's CURVE key pair, read from ``key_file``, paired with the
    daemon's public key: what ``Client(..., curve=...)`` takes.

    ``key_file`` is a file written by ``fenceqd --curve-keygen FILE`` (zcert
    text: ``public-key = "…"`` and ``secret-key = "…"`` lines; whole lines
    starting with ``#`` are comments, the ``curve`` and ``metadata`` section
    lines and other ``name = "value"`` properties are skipped).
    ``server_public`` is the daemon's public key: its 40 Z85 characters, or
    the line ``fenceqd --curve-keygen`` printed (``public-key = "…"``).

    Raises :class:`fenceq.InvalidArgument` (a ``ValueError``) naming the file
    (and line) when the file cannot be read, lacks either key, holds one twice,
    or a key is not 40 Z85 characters, or when ``server_public`` is not a key.
    """
    server_text = server_public.strip() if isinstance(server_public, str) else server_public
    prop = _zcert_property(server_text) if isinstance(server_text, str) else None
    if prop is not None:
        name, value = prop
        if name != "public-key" or len(value) < 2 or value[0] != '"' or value[-1] != '"':
            raise _invalid(f"server public key: expected its 40 Z85 characters or "
                           f"'public-key = \"<40 Z85 chars>\"', got {server_public!r}")
        server_text = value[1:-1]
    problem = _z85_key_error(server_text)
    if problem is not None:
        raise _invalid(f"server public key {server_public!r} is not a CURVE key: {problem}")

    try:
        with open(key_file, "r", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise _invalid(f"cannot read CURVE key file {key_file}: {e}") from None
    found: Dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        text = line.strip()
        # Only whole lines are comments: '#' is also a Z85 digit.
        if not text or text.startswith("#") or text in ("curve", "metadata"):
            continue
        prop = _zcert_property(text)
        if prop is None:
            raise _invalid(f"{key_file}:{n}: expected 'public-key = \"<40 Z85 chars>\"' or "
                           f"'secret-key = \"<40 Z85 chars>\"', got {text!r}")
        name, value = prop
        if name not in ("public-key", "secret-key"):
            continue  # another zcert property (metadata)
        if name in found:
            raise _invalid(f"{key_file}:{n}: a second {name} line")
        if len(value) < 2 or value[0] != '"' or value[-1] != '"':
            raise _invalid(f"{key_file}:{n}: expected {name} = \"<40 Z85 chars>\"")
        problem = _z85_key_error(value[1:-1])
        if problem is not None:
            raise _invalid(f"{key_file}:{n}: {name} is not a CURVE key: {problem}")
        found[name] = value[1:-1]
    for name in ("public-key", "secret-key"):
        if name not in found:
            raise _invalid(f"CURVE key file {key_file} has no {name} line "
                           "(expected a file written by fenceqd --curve-keygen)")
    try:
        derived = zmq.curve_public(found["secret-key"].encode("ascii")).decode("ascii")
    except zmq.ZMQError:  # a libzmq without CURVE: Client will say so
        derived = found["public-key"]
    if derived != found["public-key"]:
        raise _invalid(f"CURVE key file {key_file}: its public-key does not belong to its secret-key")
    return CurveKeys(server_text, found["public-key"], found["secret-key"])


class ResolvedEndpoint(NamedTuple):
    """An endpoint and the step of :func:`resolve_endpoint`'s order that chose
    it: ``"given"``, ``"environment"``, ``"service"`` or ``"development"``."""

    endpoint: str
    source: str


#: How an error names each step of the order.
# The longest ZMQ_RCVTIMEO (an int of milliseconds, ~24.8 days); a call
# allowed longer waits again.
_MAX_RCVTIMEO_MS = 2**31 - 1

_CHOSEN_BY = {
    "given": "given explicitly",
    "environment": "from FENCEQ_ENDPOINT",
    "service": "the installed service's socket",
    "development": "the development default",
}


def _service_socket_exists() -> bool:
    """Whether :data:`SERVICE_ENDPOINT`'s file is there. One in a folder this
    user may not search (``/run/fenceq`` outside group ``fenceq``) counts: the
    service is, and the error then says who may connect."""
    try:
        os.stat(SERVICE_ENDPOINT[len("ipc://"):])
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def resolve_endpoint(endpoint: Optional[str] = None, *,
                     environ: Optional[Mapping[str, str]] = None,
                     service_socket_exists: Optional[bool] = None) -> ResolvedEndpoint:
    """The endpoint a :class:`Client` connects to, the first of (as in every
    fenceq client: docs/operating.md, "Which endpoint a client uses"):

    1. ``endpoint``, when given and not empty;
    2. ``$FENCEQ_ENDPOINT``, when set and not empty;
    3. :data:`SERVICE_ENDPOINT`, when its socket file exists;
    4. :data:`DEFAULT_ENDPOINT`, the development default.

    ``environ`` (default ``os.environ``) and ``service_socket_exists``
    (default: looked up) are the order's other inputs, given by tests."""
    if endpoint:
        return ResolvedEndpoint(endpoint, "given")
    env = (os.environ if environ is None else environ).get("FENCEQ_ENDPOINT")
    if env:
        return ResolvedEndpoint(env, "environment")
    if service_socket_exists is None:
        service_socket_exists = _service_socket_exists()
    if service_socket_exists:
        return ResolvedEndpoint(SERVICE_ENDPOINT, "service")
    return ResolvedEndpoint(DEFAULT_ENDPOINT, "development")


def default_endpoint() -> str:
    """The endpoint a :class:`Client` given none connects to:
    :func:`resolve_endpoint`'s."""
    return resolve_endpoint().endpoint


def _ipc_problem(endpoint: str) -> str:
    """Why nothing can answer on an ipc:// endpoint, when its socket file says
    so ("" otherwise): none there (its absolute path: a relative one is read
    from the current folder), not a socket, or one this user may not connect to."""
    if not endpoint.startswith("ipc://") or len(endpoint) == 6 or endpoint[6] == "@":
        return ""
    path = endpoint[6:]
    absolute = os.path.abspath(path)
    denied = (f"this user may not connect to {absolute} "
              "(permission denied: fenceqd's --ipc-mode sets who may)")
    try:
        mode = os.stat(path).st_mode
    except PermissionError:  # a folder on the way is not ours to search
        return denied
    except OSError:
        return (f"there is no socket at {absolute} (is fenceqd running? `make run` starts one "
                "that serves ipc://var/fenceqd.sock from the repository's folder)")
    if not stat.S_ISSOCK(mode):
        return f"{absolute} is not a socket"
    if not os.access(path, os.W_OK):
        return denied
    return ""


def _hint(endpoint: str) -> str:
    why = _ipc_problem(endpoint)
    return f"; {why}" if why else ""


# Which fork of the process this is: 0 in the one that imported fenceq, and
# one more in each child forked since. A Client made in one must not be used
# in another (its socket is the parent's). os.getpid() would say so too, but
# it is a system call, ~1.5 us on a VM, each round trip.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def _process() -> int:
    return _forks


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional(fields: Dict[str, Any], key: str, value: Any) -> Dict[str, Any]:
    """Add ``key`` to a request only when the caller gave it (None: absent)."""
    if value is not None:
        fields[key] = value
    return fields


def _keep_field(fields: Dict[str, Any], key: str, value: Any) -> None:
    """queue_config's ``keep_*`` (issue 33): ``None`` not sent (the stored
    retention kept), :data:`KEEP_FOREVER` (``math.inf``) sent as nil (the
    retention removed), anything else as it is, for the daemon to judge."""
    if value is None:
        return
    if isinstance(value, float) and math.isinf(value) and value > 0:
        fields[key] = None
    else:
        fields[key] = value


def _override_field(fields: Dict[str, Any], key: str, value: Any) -> None:
    """group_config's ``max_leased``, ``rate`` and ``per`` (C3.25): ``None``
    not sent (the stored override kept), :data:`INHERIT` sent as nil (the
    override removed), anything else as it is, for the daemon to judge."""
    if value is None:
        return
    fields[key] = None if value is INHERIT else value


def _bulk_fields(fields: Dict[str, Any], state: Optional[str], prefix: Optional[str],
                 group: Optional[str], limit: Optional[int]) -> Dict[str, Any]:
    """A bulk action's filter, each field sent only when given, in the order
    of the C++ encoder (``state``, ``prefix``, ``group``, ``limit``)."""
    _optional(fields, "state", state)
    _optional(fields, "prefix", prefix)
    _optional(fields, "group", group)
    _optional(fields, "limit", limit)
    return fields


def _bulk_result(op: str, result: Any) -> BulkResult:
    """A bulk action's answer ``{"count": int >= 0, "more": bool}``."""
    if not (isinstance(result, dict) and _is_int(result.get("count")) and result["count"] >= 0
            and isinstance(result.get("more"), bool)):
        raise BadReply("bad_reply", f"{op}: expected a map {{count: int, more: bool}}, got {result!r}")
    return BulkResult(result["count"], result["more"])


def _check_max_pages(max_pages: Any) -> None:
    if not (_is_int(max_pages) and max_pages >= 1):
        raise _invalid(f"max_pages must be an int >= 1, got {max_pages!r}; nothing was sent")


def _payload_field(payload: Any, name: str = "payload") -> Any:
    """bytes-like -> bytes (msgpack bin); str stays str. Over the protocol's
    limit: refused here, since a frame beyond the daemon's ``--max-message``
    would get no reply at all, only a timeout. Other types go to the daemon,
    which refuses them (``bad_request``). ``name``: the field, for the
    message (a step's ``value`` is a payload too)."""
    if isinstance(payload, (bytearray, memoryview)):
        payload = bytes(payload)
    if isinstance(payload, bytes):
        size = len(payload)
    elif isinstance(payload, str):
        size = len(payload.encode("utf-8", "surrogatepass"))
    else:
        return payload
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidArgument("invalid_argument", f"field '{name}' is longer than {MAX_PAYLOAD_BYTES} bytes "
                                                  f"({size} bytes); nothing was sent")
    return payload


def _is_ids(value: Any) -> bool:
    """A list of job ids (strs): a claimed job's and ``job``'s ``after``,
    ``job``'s ``blocked_children``."""
    return isinstance(value, builtins.list) and all(isinstance(i, str) for i in value)


def _is_headers(value: Any) -> bool:
    """A job's ``headers`` as the daemon gives them back (issue 33): a map of str to str."""
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in value.items())


def _is_steps(value: Any) -> bool:
    """A job's saved ``steps`` as the daemon gives them back (C3.22): a map of
    each step's name (a str) to its value, a payload (bin, str or nil),
    decoded as payloads are (bin: ``bytes``, str: ``str``, nil: ``None``)."""
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, (bytes, str, type(None)))
                                           for k, v in value.items())


def _is_payload(value: Any) -> bool:
    """A payload as the daemon gives it back: bin (``bytes``), str or nil."""
    return isinstance(value, (bytes, str, type(None)))


def _is_suspended(value: Any) -> bool:
    """``job``'s ``suspended`` (C3.23): ``{"timeout": Unix seconds when the
    wait ends, "on_timeout": "retry" | "fail"}``."""
    return (isinstance(value, dict)
            and isinstance(value.get("timeout"), (int, float)) and not isinstance(value["timeout"], bool)
            and isinstance(value.get("on_timeout"), str))


def _is_claimed_job(value: Any) -> bool:
    """The shape of a job ``claim_next`` (and ``complete_next``) hands out;
    ``after`` (its parents, issue 32), ``headers`` (issue 33) and ``steps``
    (C3.22) only for a job that has some, ``signal`` (C3.23, a payload; nil
    is a value too) only for a job a signal woke."""
    return (isinstance(value, dict) and isinstance(value.get("id"), str)
            and _is_int(value.get("fence")) and _is_int(value.get("attempts"))
            and "payload" in value and _is_payload(value["payload"])
            and ("after" not in value or _is_ids(value["after"]))
            and ("headers" not in value or _is_headers(value["headers"]))
            and ("steps" not in value or _is_steps(value["steps"]))
            and ("signal" not in value or _is_payload(value["signal"])))


def _is_record(value: Any) -> bool:
    """A job's whole record (``job``, ``await``, ``enqueue_and_wait``): a map
    whose ``after`` and ``blocked_children`` are lists of ids, whose
    ``headers`` a map of str to str, whose ``steps`` a map of str to
    payloads, whose ``signal`` a payload and whose ``suspended`` a map
    ``{timeout, on_timeout}``, each when present."""
    return (isinstance(value, dict)
            and all(_is_ids(value[k]) for k in ("after", "blocked_children") if k in value)
            and ("headers" not in value or _is_headers(value["headers"]))
            and ("steps" not in value or _is_steps(value["steps"]))
            and ("signal" not in value or _is_payload(value["signal"]))
            and ("suspended" not in value or _is_suspended(value["suspended"])))


def _ids_field(ids: Any) -> Any:
    """``after``: a list of ids (any iterable of them is sent as a list); a
    str, bytes, a mapping or anything not iterable goes as it is, for the
    daemon to refuse (``bad_request``)."""
    if isinstance(ids, (str, bytes, bytearray, Mapping)):
        return ids
    try:
        return builtins.list(ids)
    except TypeError:
        return ids


def _headers_field(headers: Any) -> Any:
    """``headers``: a mapping is sent as a dict (msgpack map), its keys and
    values as they are; anything else goes as it is, for the daemon to refuse
    (``bad_request``). The daemon judges the contents: a key or value that is
    not a str (``bad_request``), an empty key or more than
    :data:`MAX_HEADERS_BYTES` (``invalid_argument``)."""
    if isinstance(headers, Mapping) and not isinstance(headers, dict):
        return dict(headers)
    return headers


def _enqueue_fields(id: str, queue: Optional[str], payload: Payload, priority: Optional[int],
                    delay: Optional[float], max_attempts: Optional[int], key: Optional[str] = None,
                    unique_for: Optional[float] = None, on_conflict: Optional[str] = None,
                    group: Optional[str] = None, after: Optional[Iterable[str]] = None,
                    after_failure: Optional[str] = None,
                    max_runtime: Optional[float] = None,
                    headers: Optional[Mapping[str, str]] = None,
                    deadline: Optional[float] = None) -> Dict[str, Any]:
    """enqueue's fields (and enqueue_and_wait's), each sent only when given, in
    the order of the C++ encoder: the job's, the key's, ``group``, then
    ``after`` and ``after_failure``, then ``max_runtime`` and ``headers``
    (issue 33), then ``deadline`` (C3.24)."""
    fields: Dict[str, Any] = {"id": id}
    _optional(fields, "queue", queue)
    if payload is not None:
        fields["payload"] = _payload_field(payload)
    _optional(fields, "priority", priority)
    _optional(fields, "delay", delay)
    _optional(fields, "max_attempts", max_attempts)
    _optional(fields, "key", key)
    _optional(fields, "unique_for", unique_for)
    _optional(fields, "on_conflict", on_conflict)
    _optional(fields, "group", group)
    if after is not None:
        fields["after"] = _ids_field(after)
    _optional(fields, "after_failure", after_failure)
    _optional(fields, "max_runtime", max_runtime)
    if headers is not None:
        fields["headers"] = _headers_field(headers)
    _optional(fields, "deadline", deadline)
    return fields


def _enqueued(op: str, result: Any, keyed: bool, id: Any) -> Enqueued:
    """An enqueue's answer as :class:`Enqueued`: a keyed request's
    ``{"id", "created"}`` map; an unkeyed one's bool, for its own ``id``
    (the job created, or the one that had the id). A keyed request answered
    with a bool came to a daemon that does not know unique keys: it ignored
    the key."""
    if keyed:
        if isinstance(result, dict) and isinstance(result.get("id"), str) \
                and isinstance(result.get("created"), bool):
            return Enqueued(result["id"], result["created"])
        if isinstance(result, bool):
            raise UnsupportedVersion(
                "unsupported_version",
                f"{op}: the daemon answered a keyed enqueue with {result!r}, not {{id, created}}: "
                "it does not know unique keys and ignored the key"
                + (" (the job was created without it)" if result else ""))
        raise BadReply("bad_reply", f"{op}: expected a map {{id: str, created: bool}}, got {result!r}")
    if not isinstance(result, bool):
        raise BadReply("bad_reply", f"{op}: expected a bool, got {result!r}")
    return Enqueued(id, result)


def _wait_extension(wait: Any) -> float:
    """How much longer than the client's timeout a long-poll (``claim_next``,
    ``await``) may take: its ``wait``, when that is a number the daemon can
    accept (anything else is refused at once, so it needs no extension)."""
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and math.isfinite(wait) and wait > 0:
        return min(float(wait), MAX_WAIT_SECONDS)
    return 0.0


def _job_entry(index: int, job: Any) -> Any:
    """One entry of ``enqueue_many``'s ``jobs``, as :meth:`Client.enqueue` would
    send its fields (``None``: not sent). A mapping with a key ``enqueue`` does
    not take raises ``TypeError`` (as ``enqueue(**job)`` would); a payload over
    the limit :class:`fenceq.InvalidArgument`; nothing is sent then. Anything
    that is neither a mapping nor a tuple goes to the daemon as it is, which
    refuses it (``bad_request`` naming the index)."""
    if isinstance(job, Mapping):
        unknown = [k for k in job if k not in JobSpec._fields]
        if unknown:
            raise TypeError(f"jobs[{index}]: unexpected field {unknown[0]!r} (an entry takes "
                            f"{', '.join(JobSpec._fields)}); nothing was sent")
        fields = job
    elif isinstance(job, (tuple, builtins.list)):
        try:
            fields = JobSpec(*job)._asdict()
        except TypeError:
            raise TypeError(f"jobs[{index}]: expected a JobSpec, a mapping or an "
                            f"({', '.join(JobSpec._fields)}) tuple, "
                            f"got {job!r}") from None
    else:
        return job
    entry: Dict[str, Any] = {}
    for key in JobSpec._fields:
        value = fields.get(key)
        if value is None:
            continue
        if key == "payload":
            try:
                value = _payload_field(value)
            except InvalidArgument as e:
                raise InvalidArgument(e.code, f"jobs[{index}]: {e.message}") from None
        elif key == "after":
            value = _ids_field(value)
        elif key == "headers":
            value = _headers_field(value)
        entry[key] = value
    return entry


_LEASE_FIELDS = ("id", "owner", "fence")


def _lease_entry(index: int, item: Any, with_result: bool) -> Any:
    """One entry of ``complete_many``'s or ``renew_many``'s ``items``:
    ``{"id", "owner", "fence"}`` plus ``"result"`` (default ``None``) for
    ``complete_many``. From a mapping only the keys present are taken (so a
    missing one is the daemon's ``bad_request``), other keys are left out.
    Anything the client cannot read goes to the daemon as it is, which refuses
    it (``bad_request`` naming the index)."""
    if isinstance(item, Mapping):
        entry = {k: item[k] for k in _LEASE_FIELDS if k in item}
        if with_result:
            entry["result"] = item.get("result")
        elif item.get("progress") is not None:
            entry["progress"] = item["progress"]
        return entry
    if isinstance(item, (tuple, builtins.list)):
        try:
            item = LeaseItem(*item)
        except TypeError:
            raise TypeError(f"items[{index}]: expected a LeaseItem, a mapping or an "
                            f"(id, owner, fence[, result]) tuple, got {item!r}") from None
    elif not all(hasattr(item, k) for k in _LEASE_FIELDS):
        return item
    entry = {"id": item.id, "owner": item.owner, "fence": item.fence}
    if with_result:
        entry["result"] = getattr(item, "result", None)
    elif getattr(item, "progress", None) is not None:
        entry["progress"] = item.progress
    return entry


def _next_field(next: Any) -> Dict[str, Any]:
    """``complete_many``'s ``next``: ``{"queue", "ttl", "max"}``."""
    if isinstance(next, Mapping):
        unknown = [k for k in next if k not in NextClaim._fields]
        if unknown:
            raise TypeError(f"next: unexpected field {unknown[0]!r} (next takes queue, ttl, max); "
                            "nothing was sent")
        return {k: next[k] for k in NextClaim._fields if k in next}
    try:
        return NextClaim(*next)._asdict()
    except TypeError:
        raise TypeError(f"next: expected a NextClaim, a mapping or a (queue, ttl, max) tuple, "
                        f"got {next!r}") from None


def _check_bools(op: str, result: Any, count: int) -> List[bool]:
    if not (isinstance(result, builtins.list) and len(result) == count
            and all(isinstance(b, bool) for b in result)):
        raise BadReply("bad_reply", f"{op}: expected an array of {count} bools, got {result!r}")
    return result


def _check_jobs(op: str, result: Any, most: Any) -> List[Dict[str, Any]]:
    if not (isinstance(result, builtins.list) and all(_is_claimed_job(j) for j in result)
            and (not _is_int(most) or len(result) <= most)):
        raise BadReply("bad_reply", f"{op}: expected an array of at most {most} job maps, "
                                        f"got {result!r}")
    return result


def _is_outcome(value: Any) -> bool:
    """One value of ``results``' map: ``{"state": str, "result": str or nil}``."""
    return (isinstance(value, dict) and isinstance(value.get("state"), str)
            and "result" in value and isinstance(value["result"], (str, type(None))))


def _check_results(result: Any, asked: Any) -> Dict[str, Optional[Dict[str, Any]]]:
    """``results``' answer: a map of each id asked (each once) to an outcome or nil."""
    if not (isinstance(result, dict) and all(isinstance(k, str) for k in result)
            and all(v is None or _is_outcome(v) for v in result.values())
            and (not (isinstance(asked, builtins.list) and all(isinstance(i, str) for i in asked))
                 or set(result) == set(asked))):
        raise BadReply("bad_reply", "results: expected a map of each id asked to {state, result} "
                                    f"or nil, got {result!r}")
    return result


def _apply_curve(socket: "zmq.Socket", curve: Optional["CurveKeys"]) -> None:
    """CURVE keys on ``socket`` before it connects (the options apply to the
    connections it makes); closes it and raises :class:`InvalidArgument` when
    libzmq refuses them. Nothing without ``curve``."""
    if curve is None:
        return
    try:
        socket.setsockopt(zmq.CURVE_SERVERKEY, curve.server_public.encode("ascii"))
        socket.setsockopt(zmq.CURVE_PUBLICKEY, curve.public_key.encode("ascii"))
        socket.setsockopt(zmq.CURVE_SECRETKEY, curve.secret_key.encode("ascii"))
    except zmq.ZMQError as e:
        socket.close(linger=0)
        raise _invalid(f"cannot use CURVE keys (libzmq {zmq.zmq_version()}, "
                       f"CURVE support: {zmq.has('curve')}): {e}") from None


class _OneThreadSocket:
    """What a :class:`Client` and a ``Subscriber`` share: one ZeroMQ socket
    (``self._socket``) used by the thread and process that made it
    (``self._owner``, ``self._fork``), closed by ``close()``, ``with`` or
    garbage collection. ``_kind`` names the class in misuse errors."""

    _kind = "Client"
    _socket: Optional[zmq.Socket]

    def close(self) -> None:
        """Close the socket. Idempotent. Must be called from the owning thread."""
        if self._socket is None:
            return
        self._check_thread()
        socket, self._socket = self._socket, None
        socket.close(linger=0)

    @property
    def closed(self) -> bool:
        return self._socket is None

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten one (or one in the thread-local cache of a finished
        # thread) is closed quietly; in a forked child the socket is the
        # parent's and must not be touched.
        socket = getattr(self, "_socket", None)
        if socket is not None and getattr(self, "_fork", None) == _process():
            try:
                socket.close(linger=0)
            except Exception:
                pass

    def _check_thread(self) -> None:
        kind = self._kind
        if _process() != self._fork:
            raise ClientMisuse("misuse", f"fenceq.{kind} used in a forked child; "
                                         f"create a new {kind} there")
        current = threading.current_thread()
        if current is not self._owner:
            raise ClientMisuse(
                "misuse",
                f"fenceq.{kind} created in thread {self._owner.name!r} used from thread "
                f"{current.name!r}: a {kind} is for one thread, create one per thread")


class Client(_OneThreadSocket):
    """A connection to one fenceqd, for one thread.

    ``endpoint`` is a ZeroMQ endpoint (``ipc://…`` or ``tcp://…``); ``None``
    means :func:`resolve_endpoint`'s order, and ``endpoint_source`` says which
    step chose it. ``timeout`` (seconds) bounds every call:
    waiting for a connection, sending, and waiting for the reply.

    Thread rule: a ``Client`` may only be used by the thread that created it;
    other threads must create their own (clients are cheap: one socket each).
    Misuse raises :class:`fenceq.ClientMisuse` (code ``misuse``) instead of
    mixing replies.

    Time: against a daemon in server clock mode (the default, C2.3) leave
    ``now`` unset; a ``now`` is refused with :class:`fenceq.InvalidArgument`.
    Against ``--clock client`` (C2.2) every call that needs a time must pass
    ``now``, a non-decreasing number of seconds that the daemon uses verbatim.

    ``curve``: for a ``tcp://`` endpoint, which the daemon serves only with
    ZeroMQ CURVE, the daemon's public key and this client's key pair
    (:func:`curve_keys`). A bad key raises :class:`fenceq.InvalidArgument` (a
    ``ValueError``) before any socket is made, as do a bad ``timeout`` and an
    endpoint ZeroMQ cannot parse. A handshake the daemon refuses (this key not
    on its list, a wrong server key; also no ``curve`` at all on tcp) gets no
    reply: every call raises :class:`fenceq.Timeout` with ``sent`` false.

    Usable as a context manager; leaving the block closes the socket.
    """

    def __init__(self, endpoint: Optional[str] = None, timeout: float = 5.0,
                 curve: Optional[CurveKeys] = None) -> None:
        chosen = resolve_endpoint(endpoint)
        self.endpoint: str = chosen.endpoint
        #: Which step of :func:`resolve_endpoint`'s order chose ``endpoint``.
        self.endpoint_source: str = chosen.source
        if not timeout > 0:
            raise _invalid(f"timeout must be > 0 seconds, got {timeout!r}")
        if curve is not None:
            curve = _check_curve_keys(curve)
            if not self.endpoint.startswith("tcp://"):
                raise _invalid(f"CURVE keys are for tcp:// endpoints; fenceqd serves "
                               f"{self.endpoint!r} without CURVE")
        #: Seconds each call may take; may be changed between calls.
        self.timeout: float = float(timeout)
        self._owner = threading.current_thread()
        self._fork = _process()
        self._busy = False
        self._next_rid = 1
        self._answered = False
        self._rcvtimeo = -1  # the socket's ZMQ_RCVTIMEO (ms); -1: ZeroMQ's default, none
        # How long a call waits for a connection before giving up unsent
        # (None: the whole timeout). fenceq.service shortens it to notice a
        # vanished daemon quickly.
        self._connect_timeout: Optional[float] = None
        socket = zmq.Context.instance().socket(zmq.DEALER)
        _apply_curve(socket, curve)
        try:
            # Closing must never block on unsent requests.
            socket.setsockopt(zmq.LINGER, 0)
            # Queue only on completed connections: see the module docstring.
            socket.setsockopt(zmq.IMMEDIATE, 1)
            socket.connect(self.endpoint)
        except zmq.ZMQError as e:
            socket.close(linger=0)
            raise _invalid(f"cannot connect to endpoint {self.endpoint!r}: {e}") from None
        self._socket: Optional[zmq.Socket] = socket

    # -- lifecycle ---------------------------------------------------------

    def __repr__(self) -> str:
        state = "closed" if self._socket is None else "open"
        return f"<fenceq.Client {self.endpoint!r} {state}>"

    # -- operations (protocol v1) -----------------------------------------

    def ping(self, timeout: Optional[float] = None, *, describe: bool = False) -> Dict[str, Any]:
        """The daemon's identity: ``{"protocol": 1, "version": str,
        "clock": "server" | "client"}``. ``timeout`` overrides the client's for
        this call (for readiness probes). With ``describe=True`` the answer
        also has ``"ops"``: each op's name mapped to the fields this daemon
        takes (it refuses any other field with ``InvalidArgument``)."""
        if not isinstance(describe, bool):
            raise InvalidArgument("invalid_argument", "ping: describe must be a bool")
        result = self._call("ping", {"describe": True} if describe else {}, timeout)
        if not isinstance(result, dict):
            raise BadReply("bad_reply", f"ping: expected a map, got {result!r}")
        return result

    def enqueue(self, id: str, *, queue: Optional[str] = None, payload: Payload = None,
                priority: Optional[int] = None, delay: Optional[float] = None,
                max_attempts: Optional[int] = None, key: Optional[str] = None,
                unique_for: Optional[float] = None, on_conflict: Optional[str] = None,
                group: Optional[str] = None, after: Optional[Iterable[str]] = None,
                after_failure: Optional[str] = None, max_runtime: Optional[float] = None,
                headers: Optional[Mapping[str, str]] = None, deadline: Optional[float] = None,
                now: Optional[float] = None) -> bool:
        """C3.1: insert job ``id`` and answer ``True``; ``False`` (and no change
        at all, not even to a lease in progress or to any of the fields below)
        when the id exists, or when its unique ``key`` is held (below).

        Every keyword is optional and sent only when given (``enqueue(id)``
        sends exactly ``{"op": "enqueue", "id": id}``):

        - ``queue``: the queue's name (1..256 bytes); the daemon's default is
          ``"default"``.
        - ``payload``: ``bytes`` (sent as msgpack bin; also ``bytearray`` and
          ``memoryview``) or ``str`` (sent as msgpack str), at most 256 KiB
          (:data:`MAX_PAYLOAD_BYTES`; a str counts its UTF-8 bytes).
          :meth:`claim_next` gives it back with the same type. A larger one
          raises :class:`fenceq.InvalidArgument` without being sent.
        - ``priority``: a 32-bit int, higher is claimed first (default 0);
          equal priorities are claimed in enqueue order.
        - ``delay``: seconds (>= 0) before the job can be claimed, by
          :meth:`claim_next` and by :meth:`claim`.
        - ``max_attempts``: claims allowed before the job is dead (default:
          the daemon's, 25; 0: no limit).
        - ``key``: the job's unique key within its queue (a str, 1..1024
          bytes). No job is created while a job of the same queue and key is
          unfinished (ready, delayed or leased), nor with ``unique_for`` while
          one was enqueued within the last ``unique_for`` seconds (finished or
          not). :meth:`enqueue_unique` also answers which job holds the key.
        - ``unique_for``: seconds (0 < x <= 1e9), only with ``key``.
        - ``on_conflict``: only with ``key``; ``"skip"`` (the default: the
          holder stays as it is) or ``"replace"``: a holder that is ready or
          delayed (not leased, not finished) takes this request's
          ``payload``, ``priority``, ``max_attempts`` and ``delay`` (counted
          from now), keeping its id, fence and attempts. A leased or finished
          holder is never touched. Either way the answer is ``False``.
        - ``group``: the job's group within its queue (a str, 1..256 bytes,
          :data:`MAX_GROUP_BYTES`), such as a customer or a tenant. Within one
          priority :meth:`claim_next` serves the groups with claimable jobs in
          turn, the least recently served first (jobs without a group are one
          group of their own), so a group with many jobs does not starve the
          others; :meth:`queue_config`'s ``group_max_leased``, ``group_rate``
          and ``group_per`` limit each group. :meth:`list` filters on it and
          its rows show it.
        - ``after``: the jobs this one waits for (issue 32), a list of 1..1000
          distinct ids (:data:`MAX_AFTER`), each an existing job other than
          this one. The job is created ``"blocked"`` (a state of
          :data:`JOB_STATES`: listed, counted by :meth:`stats`, never
          claimed) until every parent is done; then it is ready, or delayed
          when it has a ``delay`` (counted from then). Its code can read the
          parents' results with :meth:`results`.
        - ``after_failure``: only with ``after``; ``"cancel"`` (the daemon's
          default) or ``"run"`` (:data:`AFTER_FAILURE`). When a parent
          becomes dead or is cancelled, a blocked job is cancelled (error
          ``"parent ID dead"`` / ``"parent ID cancelled"``), and so are its
          blocked descendants; with ``"run"`` that parent no longer holds it
          back instead.
        - ``max_runtime``: seconds (0 < x <= 1e9), a hard cap on each attempt
          counted from its claim (issue 33, C3.15): no claim or renew sets the
          lease end past claim time + ``max_runtime`` (a renew still answers
          ``True``); from then on the holder's writes are refused, and the
          daemon writes the attempt down as failed (``"max_runtime
          exceeded"``, the fence raised), retried after the backoff or dead.
        - ``headers``: a dict of str to str kept with the job (issue 33,
          C3.18), such as a W3C ``traceparent`` and ``tracestate``: keys not
          empty, at most 4096 bytes (:data:`MAX_HEADERS_BYTES`) of keys and
          values in all. Every claim of the job gives them back under
          ``"headers"`` (:meth:`claim_next`, :meth:`complete_and_claim_next`,
          :meth:`complete_many`; :attr:`fenceq.Job.headers` in a
          :class:`~fenceq.QueueWorker`), and so does :meth:`job`. A mapping
          is sent as a dict; ``{}`` is no headers.
        - ``deadline``: a Unix time in seconds (> 0, at most 1e11; such as
          ``time.time() + 600``), C3.24: a job not claimed by then is never
          claimed. Once it passes, the daemon makes the job ``"dead"`` with
          the error ``"deadline passed"``, whatever held it back (a
          ``delay``, its ``after`` parents, a paused or rate-limited queue,
          busy workers), and counts it in the queue's :meth:`stats` totals
          (``"deadline_passed"``). A claim before the deadline runs as any
          other (the deadline does not bound the attempt: ``max_runtime``
          does), and so do its retries, as long as each is claimed before the
          deadline. Under the client clock it is compared with each request's
          ``now``.
        - ``now``: client clock mode only, the time ``delay`` counts from
          (default: the highest ``now`` the daemon has seen).

        A bad value (``delay < 0``, a priority beyond 32 bits, an empty
        ``queue``, ``key`` or ``group``, a ``group`` over 256 bytes,
        ``unique_for <= 0``, ``max_runtime`` out of (0, 1e9], ``on_conflict``
        other than :data:`ON_CONFLICT`, ``unique_for`` or ``on_conflict``
        without a ``key``; an empty ``after``, over 1000 ids, an empty, repeated or
        unknown id or the job's own, ``after_failure`` without ``after`` or
        other than :data:`AFTER_FAILURE`; an empty header key, headers over
        4096 bytes; a ``deadline`` <= 0 or over 1e11) raises
        :class:`fenceq.InvalidArgument` (a ``ValueError``); a value of the
        wrong type (``after`` not a list, an id not a str, a ``max_runtime``
        not a number, ``headers`` not a mapping or a header key or value not
        a str, a ``deadline`` not a number)
        :class:`fenceq.BadRequest`. Nothing changes (C3.8). The PostgreSQL
        store refuses ``after`` for now (``InvalidArgument``). With ``key``,
        a daemon that answers without the key's answer (one older than
        unique keys, which ignores ``key``) raises
        :class:`fenceq.UnsupportedVersion`.
        """
        fields = _enqueue_fields(id, queue, payload, priority, delay, max_attempts,
                                 key, unique_for, on_conflict, group, after, after_failure,
                                 max_runtime, headers, deadline)
        result = self._call("enqueue", self._timed(fields, now))
        return _enqueued("enqueue", result, key is not None, id).created

    def enqueue_unique(self, id: str, key: str, *, queue: Optional[str] = None,
                       payload: Payload = None, priority: Optional[int] = None,
                       delay: Optional[float] = None, max_attempts: Optional[int] = None,
                       unique_for: Optional[float] = None, on_conflict: Optional[str] = None,
                       group: Optional[str] = None, after: Optional[Iterable[str]] = None,
                       after_failure: Optional[str] = None, max_runtime: Optional[float] = None,
                       headers: Optional[Mapping[str, str]] = None,
                       deadline: Optional[float] = None,
                       now: Optional[float] = None) -> Enqueued:
        """:meth:`enqueue` job ``id`` with the unique ``key`` (required), and
        answer :class:`Enqueued` ``(id, created)``: ``(id, True)`` when the
        job was created; else ``created`` is ``False`` and ``id`` names the
        job that holds the key (with ``on_conflict="replace"``: the one that
        took this request's fields, unless it was leased or finished), or is
        this request's own ``id`` when that id existed already (nothing
        changed, C3.1). The keywords are :meth:`enqueue`'s.

        ``key=None`` raises :class:`fenceq.InvalidArgument` before anything
        is sent. Other errors as for :meth:`enqueue`."""
        if key is None:
            raise _invalid("enqueue_unique needs a key (enqueue() enqueues without one); "
                           "nothing was sent")
        fields = _enqueue_fields(id, queue, payload, priority, delay, max_attempts,
                                 key, unique_for, on_conflict, group, after, after_failure,
                                 max_runtime, headers, deadline)
        return _enqueued("enqueue", self._call("enqueue", self._timed(fields, now)), True, id)

    def state(self, id: str) -> Optional[Dict[str, Any]]:
        """C3.2: the committed row ``{"id", "owner", "until", "fence",
        "result", "done"}`` (``done`` a bool, ``until`` a float), or ``None``
        when the job does not exist."""
        result = self._call("state", {"id": id})
        if result is not None and not isinstance(result, dict):
            raise BadReply("bad_reply", f"state: expected a map or nil, got {result!r}")
        return result

    def claim(self, id: str, owner: str, ttl: float, now: Optional[float] = None) -> Optional[int]:
        """C3.3: take the lease on ``id`` for ``ttl`` seconds and answer the new
        fence; ``None`` when the job is missing, done, or leased
        (``until > now``; at ``now == until`` it can be claimed).

        Raises :class:`fenceq.InvalidArgument` (a ``ValueError``) when
        ``ttl <= 0``; nothing changes (C3.8)."""
        result = self._call("claim", self._timed({"id": id, "owner": owner, "ttl": ttl}, now))
        if result is not None and not _is_int(result):
            raise BadReply("bad_reply", f"claim: expected an int or nil, got {result!r}")
        return result

    def renew(self, id: str, owner: str, fence: int, ttl: float, now: Optional[float] = None, *,
              progress: Optional[str] = None) -> bool:
        """C3.4: extend the lease to ``now + ttl`` and answer ``True`` only when
        ``owner`` and ``fence`` match, the job is not done and the lease has
        not expired (``until > now``). An expired lease is never revived.
        ``progress`` (a str of at most 4 KiB), when given, is kept with the
        lease and shown by :meth:`state` and :meth:`list` (key ``progress``,
        present once a renew stored one); a refused renew stores nothing.

        Raises :class:`fenceq.InvalidArgument` when ``ttl <= 0``. ``fence``
        must be an int (a float is :class:`fenceq.BadRequest`)."""
        fields: Dict[str, Any] = {"id": id, "owner": owner, "fence": fence, "ttl": ttl}
        _optional(fields, "progress", progress)
        return self._expect_bool("renew", self._timed(fields, now))

    def complete(self, id: str, owner: str, fence: int, result: Optional[str],
                 now: Optional[float] = None) -> bool:
        """C3.5: store ``result`` (a str or ``None``), mark the job done and
        answer ``True`` only while the lease is current (owner and fence match,
        not done, ``until > now``). Otherwise ``False``, and the stored result
        is kept: a stalled worker's late completion is refused here."""
        fields = self._timed({"id": id, "owner": owner, "fence": fence, "result": result}, now)
        return self._expect_bool("complete", fields)

    def release(self, id: str, owner: str, fence: int) -> bool:
        """C3.6: give the lease back (owner cleared, ``until = 0``, fence kept)
        and answer ``True`` when owner and fence match and the job is not
        done; otherwise ``False``."""
        return self._expect_bool("release", {"id": id, "owner": owner, "fence": fence})

    # -- the work queue (protocol v1, additive) -----------------------------

    @overload
    def claim_next(self, queue: str, owner: str, ttl: float, *, wait: Optional[float] = None,
                   now: Optional[float] = None, max: None = None) -> Optional[Dict[str, Any]]: ...

    @overload
    def claim_next(self, queue: str, owner: str, ttl: float, *, wait: Optional[float] = None,
                   now: Optional[float] = None, max: int) -> List[Dict[str, Any]]: ...

    def claim_next(self, queue: str, owner: str, ttl: float, *, wait: Optional[float] = None,
                   now: Optional[float] = None,
                   max: Optional[int] = None) -> Union[Optional[Dict[str, Any]], List[Dict[str, Any]]]:
        """Claim the most urgent claimable job of ``queue`` (highest priority,
        then enqueue order; not done, not dead, lease free, delay passed,
        attempts left) exactly as :meth:`claim` would, and answer
        ``{"id": str, "fence": int, "payload": bytes | str | None,
        "attempts": int}`` (``attempts`` counts this claim); ``None`` when the
        queue has no claimable job. A job enqueued with ``after`` (issue 32)
        also has ``"after"``: its parents' ids, in id order, all done now (or
        dead or cancelled, for an ``after_failure="run"`` job); read their
        results with :meth:`results`. Other jobs have no ``"after"`` key:
        ``job.get("after", [])`` reads both. Likewise a job enqueued with
        ``headers`` (issue 33) has ``"headers"``, the dict it was enqueued
        with (such as its W3C ``traceparent``), and other jobs have no such
        key: ``job.get("headers", {})`` reads both. A job that saved steps
        (:meth:`step_save`, C3.22) in an earlier attempt has ``"steps"``: a
        dict of each step's name to its value (``bytes``, ``str`` or
        ``None``, as saved); ``job.get("steps", {})`` reads every job alike.
        A job that a :meth:`signal` woke since it last suspended
        (:meth:`suspend`, C3.23) has ``"signal"``: the signal's value
        (``bytes``, ``str`` or ``None``, as sent; ``None`` is a value too),
        so ``"signal" in job`` says whether it was signalled; a job never
        signalled, or woken by its suspend's timeout, has no such key.

        ``max`` (1..1000): claim up to ``max`` jobs in one round trip and
        answer a **list** of them, most urgent first, ``[]`` when there is
        none (``max=1`` answers a list too). Each is claimed exactly as a
        single ``claim_next`` would: its own fence, lease and attempt. Every
        one of them is leased to ``owner``: run it, renew it
        (:meth:`renew_many`) or :meth:`release` it.

        ``wait`` (0..3600 s): when no job is claimable the daemon holds the
        request and answers as soon as one becomes claimable (an enqueue, a
        release, a fail, a retry, a lease expiring, a delay ending), or
        ``None`` (with ``max``: ``[]``) once ``wait`` seconds have passed.
        With ``max`` it answers as soon as at least one job is claimable, with
        as many as there are then (up to ``max``). This call's timeout is the
        client's ``timeout`` plus ``wait``. If the daemon stops meanwhile the
        call raises :class:`fenceq.Unavailable` (nothing was claimed).

        Raises :class:`fenceq.InvalidArgument` when ``ttl <= 0``, ``wait`` or
        ``max`` is out of range or ``queue`` is empty.
        """
        fields: Dict[str, Any] = {"queue": queue, "owner": owner, "ttl": ttl}
        _optional(fields, "max", max)
        _optional(fields, "wait", wait)
        result = self._call("claim_next", self._timed(fields, now), self.timeout + _wait_extension(wait))
        if max is not None:
            return _check_jobs("claim_next", result, max)
        if result is not None and not _is_claimed_job(result):
            raise BadReply("bad_reply", f"claim_next: expected a job map or nil, got {result!r}")
        return result

    def complete_and_claim_next(self, id: str, owner: str, fence: int, result: Optional[str],
                                queue: str, ttl: float, *,
                                now: Optional[float] = None) -> Dict[str, Any]:
        """:meth:`complete` and then :meth:`claim_next` in one round trip (the
        ``complete_next`` op): answers ``{"completed": bool, "next": job |
        None}``.

        ``completed`` is what :meth:`complete` would answer for ``id``: ``True``
        only while that lease is current (owner and fence match, not done,
        ``until > now``), and a refusal keeps the stored result (C3.5).
        ``next`` is what :meth:`claim_next` on ``queue`` for ``owner`` with
        ``ttl`` would answer, ``{"id", "fence", "payload", "attempts"}`` (and
        ``"after"`` for a job with parents, ``"headers"`` for a job with
        headers, ``"steps"`` for a job with saved steps, ``"signal"`` for a
        job a signal woke) or ``None``, **whatever** the
        completion's outcome: a refused completion still claims the next job
        (which may be ``id`` itself again, when its lease had expired). A job in ``next`` is leased to ``owner``: run it,
        or :meth:`release` it.

        There is no ``wait``: when ``next`` is ``None``, call
        :meth:`claim_next` with one to long-poll. Argument errors are those of
        the two ops (``ttl <= 0``, an empty ``queue``: :class:`fenceq.InvalidArgument`),
        and then nothing changes, not even the completion."""
        fields = {"id": id, "owner": owner, "fence": fence, "result": result, "queue": queue, "ttl": ttl}
        reply = self._call("complete_next", self._timed(fields, now))
        if not (isinstance(reply, dict) and isinstance(reply.get("completed"), bool) and "next" in reply
                and (reply["next"] is None or _is_claimed_job(reply["next"]))):
            raise BadReply("bad_reply", "complete_next: expected a map {completed: bool, "
                                            f"next: job map or nil}}, got {reply!r}")
        return reply

    # -- batches (protocol v1, additive) ------------------------------------

    def enqueue_many(self, jobs: Iterable[Union[JobSpec, Mapping[str, Any]]], *,
                     now: Optional[float] = None) -> List[bool]:
        """:meth:`enqueue` for each of ``jobs`` (up to 1000), in one round trip
        and one transaction: answers one bool per job, in input order: ``True``
        created, ``False`` the id existed (and nothing of it changed, C3.1) or
        the job's unique key was held (:meth:`enqueue_many_unique` also
        answers which job holds it). Jobs are judged in order: a key taken by
        an earlier job of the batch is held for the later ones.

        A job is a :class:`JobSpec` or a dict with the keys :meth:`enqueue`
        takes (``id``, and ``queue``, ``payload``, ``priority``, ``delay``,
        ``max_attempts``, ``key``, ``unique_for``, ``on_conflict``, ``group``,
        ``after``, ``after_failure``, ``max_runtime``, ``headers``,
        ``deadline``; ``None`` or absent: not sent). A job's ``after`` may name earlier jobs of the same batch (a
        graph in one request: :meth:`enqueue_fan_in`). ``now``: client clock mode only,
        for every job (see :meth:`enqueue`).

        One bad entry refuses the **whole** request and nothing is applied:
        :class:`fenceq.InvalidArgument` for a bad value (the message names the
        entry: ``jobs[3]: ...``), :class:`fenceq.BadRequest` for a wrong type
        or a missing ``id``; also for an empty list or more than 1000 jobs
        (the daemon judges those). Checked here, before anything is sent: a
        payload over 256 KiB (``InvalidArgument``) and a dict key ``enqueue``
        does not take (``TypeError``).

        All of a batch travels in one frame: keep it under the daemon's
        ``--max-message`` (default 1 MiB), or the daemon drops the connection
        and the call raises :class:`fenceq.Timeout`."""
        return [e.created for e in self._enqueue_many(jobs, now)]

    def enqueue_fan_in(self, parts: Iterable[Union[JobSpec, Mapping[str, Any], str]],
                       then: Union[JobSpec, Mapping[str, Any], str], *, queue: Optional[str] = None,
                       now: Optional[float] = None) -> List[bool]:
        """Fan-out/fan-in in one :meth:`enqueue_many` request (one round trip,
        one transaction): every job of ``parts``, then the job ``then``
        waiting for all of them (its ``after`` is the parts' ids, followed by
        any ids ``then`` names in its own ``after``). Answers
        :meth:`enqueue_many`'s answer, one bool per job: the parts' in order,
        then ``then``'s last.

        ``parts`` (1..999 jobs) and ``then`` are job specs as
        :meth:`enqueue_many` takes them (a :class:`JobSpec`, a dict with at
        least ``id``, or a tuple), or a bare id (a str: a job with only its
        id). ``queue``: the queue of every job that names none (``None``:
        the daemon's default). ``then``'s ``after_failure`` says what a dead or cancelled part does to it
        (default: cancels it; ``"run"``: it runs without that part's
        result). Once claimed, the child's job dict lists its parents under
        ``"after"`` (in id order), and it reads their results with
        :meth:`results` (``c.results(child["after"])``).

        Checked here, before anything is sent: no part, a part or ``then``
        without a str ``id``, a ``then`` whose own ``after`` is not a list
        (:class:`fenceq.InvalidArgument`). The daemon refuses the whole
        request, and creates nothing, as for
        :meth:`enqueue_many` (a part's id repeated, more than 1000 jobs,
        ``then``'s id among the parts: :class:`fenceq.InvalidArgument`).
        An existing part id is not enqueued again (its bool is ``False``)
        and still counts as a parent."""
        specs = builtins.list(parts)
        if not specs:
            raise _invalid("enqueue_fan_in needs at least one part; nothing was sent")
        entries = [_job_entry(i, {"id": job} if isinstance(job, str) else job)
                   for i, job in enumerate(specs)]
        child = _job_entry(len(entries), {"id": then} if isinstance(then, str) else then)
        for i, entry in enumerate(entries + [child]):
            if not (isinstance(entry, dict) and isinstance(entry.get("id"), str)):
                name = "then" if i == len(entries) else f"parts[{i}]"
                raise _invalid(f"enqueue_fan_in: {name} must be a job spec with a str id, "
                               f"got {(specs + [then])[i]!r}; nothing was sent")
        own = child.get("after", [])
        if not isinstance(own, builtins.list):
            raise _invalid(f"enqueue_fan_in: then's after must be a list of ids, got {own!r}; "
                           "nothing was sent")
        child["after"] = [e["id"] for e in entries] + own
        jobs = []
        for entry in entries + [child]:
            if queue is not None and "queue" not in entry:
                entry["queue"] = queue
            jobs.append({k: entry[k] for k in JobSpec._fields if k in entry})  # the wire's order
        return self.enqueue_many(jobs, now=now)

    def enqueue_many_unique(self, jobs: Iterable[Union[JobSpec, Mapping[str, Any]]], *,
                            now: Optional[float] = None) -> List[Enqueued]:
        """:meth:`enqueue_many`, answering one :class:`Enqueued` ``(id,
        created)`` per job, in input order: for a job with a ``key`` what
        :meth:`enqueue_unique` would answer (the id of the job created, or
        of the one that holds the key, or the job's own id when that id
        existed); for a job without one its own id and what
        :meth:`enqueue` would answer. Jobs and errors as for
        :meth:`enqueue_many`."""
        return self._enqueue_many(jobs, now)

    def _enqueue_many(self, jobs: Iterable[Any], now: Optional[float]) -> List[Enqueued]:
        entries = [_job_entry(i, job) for i, job in enumerate(jobs)]
        result = self._call("enqueue_many", self._timed({"jobs": entries}, now))
        if not (isinstance(result, builtins.list) and len(result) == len(entries)):
            raise BadReply("bad_reply", f"enqueue_many: expected an array of {len(entries)} "
                                        f"answers, got {result!r}")
        answers = []
        for i, (entry, answer) in enumerate(zip(entries, result)):
            keyed = isinstance(entry, dict) and "key" in entry
            answers.append(_enqueued(f"enqueue_many: jobs[{i}]", answer, keyed,
                                     entry.get("id") if isinstance(entry, dict) else None))
        return answers

    @overload
    def complete_many(self, items: Iterable[Any], next: None = None, *,
                      now: Optional[float] = None) -> List[bool]: ...

    @overload
    def complete_many(self, items: Iterable[Any], next: Union[NextClaim, Mapping[str, Any], tuple], *,
                      now: Optional[float] = None) -> CompletedMany: ...

    def complete_many(self, items: Iterable[Any], next: Any = None, *,
                      now: Optional[float] = None) -> Union[List[bool], CompletedMany]:
        """:meth:`complete` for each of ``items`` (up to 1000), in order, in
        one round trip and one transaction: answers one bool per item, what
        :meth:`complete` would answer for it. Each item is judged on its own
        (its owner, fence and lease, C3.5): a stale one answers ``False`` and
        stores nothing, the others are stored. The same lease twice: the
        second answers ``False``.

        An item is a :class:`LeaseItem` ``(id, owner, fence, result)``, a dict
        with those keys (``result`` absent: ``None``; other keys are left out,
        so a job dict from :meth:`claim_next` with an ``owner`` added works),
        or a :class:`fenceq.Lease` / :class:`fenceq.Job` (result ``None``).

        ``next`` (a :class:`NextClaim` ``(queue, ttl, max)``, such a tuple or
        a dict): after the completions, claim up to ``max`` jobs of ``queue``
        with a lease of ``ttl``, as ``claim_next(queue, owner, ttl, max=max)``
        would, in the same round trip, whatever the completions answered. The
        daemon claims them for the **last item's owner**. Answers a
        :class:`CompletedMany` ``(completed, next)``: ``completed`` the bools,
        ``next`` the claimed jobs, as :meth:`claim_next` answers them (with
        ``"after"``, ``"headers"``, ``"steps"`` and ``"signal"`` when they have
        some; ``[]`` when none;
        no ``wait``: long-poll with ``claim_next(..., wait=)`` then).

        A bad field anywhere (``ttl <= 0``, ``max`` outside 1..1000, a missing
        fence, an empty list, over 1000 items) refuses the whole request
        (:class:`fenceq.InvalidArgument` or :class:`fenceq.BadRequest`, the
        message naming the item) and nothing changes. ``now``: client clock
        mode only, where it is required."""
        entries = [_lease_entry(i, item, True) for i, item in enumerate(items)]
        fields: Dict[str, Any] = {"items": entries}
        if next is not None:
            fields["next"] = _next_field(next)
        reply = self._call("complete_many", self._timed(fields, now))
        if next is None:
            return _check_bools("complete_many", reply, len(entries))
        if not (isinstance(reply, dict) and "completed" in reply and "next" in reply):
            raise BadReply("bad_reply", "complete_many: expected a map {completed: [bool...], "
                                            f"next: [job...]}}, got {reply!r}")
        return CompletedMany(_check_bools("complete_many", reply["completed"], len(entries)),
                             _check_jobs("complete_many", reply["next"], fields["next"].get("max")))

    def renew_many(self, items: Iterable[Any], ttl: float, *, now: Optional[float] = None) -> List[bool]:
        """:meth:`renew` for each of ``items`` (up to 1000) to ``now + ttl``,
        in one round trip: answers one bool per item, what :meth:`renew` would
        answer for it (``False``: that lease is gone for good, C3.4; the
        others are renewed all the same). For a worker that holds several
        jobs. Items as for :meth:`complete_many` (a ``result`` is not sent).

        Raises :class:`fenceq.InvalidArgument` when ``ttl <= 0`` and
        :class:`fenceq.BadRequest` for a malformed item; then nothing is
        renewed. ``now``: client clock mode only, where it is required."""
        entries = [_lease_entry(i, item, False) for i, item in enumerate(items)]
        result = self._call("renew_many", self._timed({"items": entries, "ttl": ttl}, now))
        return _check_bools("renew_many", result, len(entries))

    def fail(self, id: str, owner: str, fence: int, error: str, *, retry_in: Optional[float] = None,
             now: Optional[float] = None) -> bool:
        """The current owner reports that the job failed. ``True`` when the
        lease was current (owner and fence match, not done, ``until > now``):
        ``error`` (a str, at most 64 KiB) is kept, the lease ends (fence
        kept), and the job becomes claimable again after ``retry_in`` seconds
        (default: ``min(2 ** (attempts - 1), 3600)``), or **dead** when its
        ``max_attempts`` are used up. ``False`` otherwise, and nothing
        changes: a stale worker cannot fail a job it no longer holds.

        Raises :class:`fenceq.InvalidArgument` when ``retry_in < 0`` or
        ``error`` is too long."""
        fields: Dict[str, Any] = {"id": id, "owner": owner, "fence": fence, "error": error}
        _optional(fields, "retry_in", retry_in)
        return self._expect_bool("fail", self._timed(fields, now))

    def snooze(self, id: str, owner: str, fence: int, delay: float, *,
               now: Optional[float] = None) -> bool:
        """C3.14: the current owner puts the job off ("not now, later": a rate
        limit, a resource not there yet). ``True`` when the lease was current
        (owner and fence match, not done, ``until > now``): the lease ends,
        the attempt it used is given back (``attempts`` goes down by one), the
        fence is kept, no error is recorded, and the job can be claimed again
        ``delay`` seconds (0..1e9) from now. ``False`` otherwise, and nothing
        changes: a stale worker cannot snooze a job it no longer holds.

        Raises :class:`fenceq.InvalidArgument` when ``delay`` is out of range,
        :class:`fenceq.BadRequest` when it is not a number."""
        fields: Dict[str, Any] = {"id": id, "owner": owner, "fence": fence, "delay": delay}
        return self._expect_bool("snooze", self._timed(fields, now))

    def step_save(self, id: str, owner: str, fence: int, step: str, value: Payload, *,
                  now: Optional[float] = None) -> bool:
        """C3.22: the current owner saves the result of one step of its job,
        so that a later attempt of the job skips that step. ``True`` when the
        lease was current (owner and fence match, not done, ``until > now``,
        as for :meth:`complete`) and the job had no step named ``step``: the
        step is saved with ``value``, and every later claim of the job gives
        it back (``"steps"`` in :meth:`claim_next`,
        :meth:`complete_and_claim_next` and :meth:`complete_many`; and in
        :meth:`job`). ``False`` otherwise, and nothing changes: a stale,
        expired or released lease saves nothing, and a step once saved is
        never overwritten, not even by the lease that saved it. So a step
        runs at most once per job, across attempts, and a worker whose lease
        ended cannot record a step that the attempt after it then skips.
        :meth:`fenceq.Job.step` does it all for a :class:`~fenceq.QueueWorker`'s
        function.

        ``step``: the step's name, a str of 1..256 bytes
        (:data:`MAX_STEP_BYTES`). ``value`` (required; ``None`` is a value
        too): a payload, ``bytes`` (also ``bytearray`` and ``memoryview``,
        sent as bin) or ``str``, at most 256 KiB, given back with the same
        type. A job saves at most 64 steps (:data:`MAX_STEPS`) whose values
        hold at most 256 KiB in all (:data:`MAX_STEPS_BYTES`).

        Raises :class:`fenceq.InvalidArgument` (a ``ValueError``) when
        ``step`` is empty, longer than 256 bytes or not UTF-8, or the job's
        steps would pass either bound; a ``value`` over 256 KiB is refused
        here, before anything is sent. :class:`fenceq.BadRequest` when
        ``step`` is not a str or ``value`` not a payload (a dict, an int).
        Nothing changes then. ``now``: client clock mode only, where it is
        required."""
        fields: Dict[str, Any] = {"id": id, "owner": owner, "fence": fence, "step": step,
                                  "value": _payload_field(value, "value")}
        return self._expect_bool("step_save", self._timed(fields, now))

    def suspend(self, id: str, owner: str, fence: int, timeout: float, *,
                on_timeout: Optional[str] = None, now: Optional[float] = None) -> Optional[str]:
        """C3.23: the current owner ends its lease and puts the job to sleep
        until the world answers (a payment's webhook, a person's approval):
        answers the **signal token** (a str of 32 hex digits, 128 random
        bits) that wakes it, for whoever will answer to pass to
        :meth:`signal`. ``None`` when the lease was not current (owner or
        fence do not match, it expired, was released, or the job is done),
        and nothing changes: a stale worker cannot suspend a job it no
        longer holds.

        When the lease was current (as for :meth:`complete`): the lease
        ends, the attempt is given back (as :meth:`snooze` gives it), the
        fence is kept, and the job is ``"suspended"`` (:data:`JOB_STATES`:
        listed and counted as such, never claimed) until a :meth:`signal`
        with the token wakes it, at once, or ``timeout`` seconds pass. Its
        next claims carry ``"signal"``, the signal's value. On the timeout
        (no signal) the job is ready again with the error ``"suspend timed
        out"`` and no ``"signal"`` (``on_timeout="retry"``, the default), or
        dead with that error (``"fail"``). The daemon applies a timeout when
        it next looks (on SQLite at its next batch, on PostgreSQL within
        about 250 ms), not at the exact second. Each suspend answers a new
        token: one of an earlier wait no longer wakes the job, and the signal
        that woke it before is forgotten. :meth:`fenceq.Job.suspend` does it
        for a :class:`~fenceq.QueueWorker`'s function.

        ``timeout``: seconds, 1..2,592,000 (30 days;
        :data:`MIN_SUSPEND_SECONDS`, :data:`MAX_SUSPEND_SECONDS`).
        ``on_timeout``: ``"retry"`` or ``"fail"`` (:data:`ON_TIMEOUT`);
        ``None`` (the default) is not sent: the daemon's ``"retry"``.

        Raises :class:`fenceq.InvalidArgument` (a ``ValueError``) when
        ``timeout`` is out of range or ``on_timeout`` is neither,
        :class:`fenceq.BadRequest` when ``timeout`` is not a number. Nothing
        changes then. ``now``: client clock mode only, where it is required
        (the timeout counts from it)."""
        fields: Dict[str, Any] = {"id": id, "owner": owner, "fence": fence, "timeout": timeout}
        _optional(fields, "on_timeout", on_timeout)
        result = self._call("suspend", self._timed(fields, now))
        if result is False:
            return None
        if not (isinstance(result, str) and 1 <= len(result.encode("utf-8", "surrogatepass"))
                <= MAX_TOKEN_BYTES):
            raise BadReply("bad_reply", f"suspend: expected a token (a str) or false, got {result!r}")
        return result

    def signal(self, token: str, value: Any = _NO_VALUE, *, now: Optional[float] = None) -> bool:
        """C3.23: wake the job suspended with ``token`` (what :meth:`suspend`
        answered), once. ``True`` when the token is a suspended job's whose
        wait has not timed out: the job is ready at once, and every claim of
        it from now on (until it suspends again) carries ``"signal"``:
        ``value``, with its type (``bytes``, ``str`` or ``None``). The token
        is then used up. ``False`` for a token used before, unknown, or whose
        wait timed out, and nothing changes: of signals that race on one
        token (a webhook delivered twice) exactly one is ``True``.

        ``value`` (optional): a payload, ``bytes`` (also ``bytearray`` and
        ``memoryview``, sent as bin), ``str`` or ``None``, at most 256 KiB.
        Left out, nothing is sent and the claims carry ``None`` (a signal
        without a value is still a signal: ``"signal" in job``).

        Raises :class:`fenceq.InvalidArgument` (a ``ValueError``) when
        ``token`` is empty or longer than 256 bytes
        (:data:`MAX_TOKEN_BYTES`); a ``value`` over 256 KiB is refused here,
        before anything is sent. :class:`fenceq.BadRequest` when ``token``
        is not a str or ``value`` is not a payload. ``now``: client clock
        mode only, optional (default: the highest ``now`` the daemon has
        seen; a wait whose timeout has passed by then is not woken)."""
        fields: Dict[str, Any] = {"token": token}
        if value is not _NO_VALUE:
            fields["value"] = _payload_field(value, "value")
        return self._expect_bool("signal", self._timed(fields, now))

    def check(self, id: str, owner: str, fence: int, *, now: Optional[float] = None) -> bool:
        """``True`` when ``owner`` and ``fence`` are the job's current lease
        (not done, ``until > now``); changes nothing. What a system outside
        the store asks before it acts on a token (C2.4); such a system should
        still refuse a fence lower than the highest it has seen, since the
        lease can end right after this answer."""
        return self._expect_bool("check", self._timed({"id": id, "owner": owner, "fence": fence}, now))

    def retry(self, id: str) -> bool:
        """Operator: revive a **dead** (or cancelled) job and answer ``True``:
        its attempts start over, it is claimable at once, and its fence
        continues from where it was (C1.2), so the next claim gets a larger
        fence than any before. ``False`` when the job is missing or not dead,
        or when it has a unique key that another unfinished job of its queue
        holds now."""
        return self._expect_bool("retry", {"id": id})

    def cancel(self, id: str, *, now: Optional[float] = None) -> bool:
        """Operator: cancel a job that is not done and answer ``True``: it
        becomes ``cancelled`` (final, listed and counted as such; :meth:`retry`
        revives it), its lease ends and its fence goes up by one, so its
        holder's :meth:`renew`, :meth:`complete`, :meth:`fail` and
        :meth:`check` are refused from then on and no result is stored.
        ``False`` when the job is missing, done or cancelled already.
        ``now``: client clock mode only (the time it is stamped finished)."""
        return self._expect_bool("cancel", self._timed({"id": id}, now))

    def stats(self, *, now: Optional[float] = None) -> Dict[str, Any]:
        """Operator: ``{"queues": {name: {"ready", "delayed", "leased", "done",
        "dead", "cancelled", "oldest_ready_age", "totals"}}, "requests", "commits",
        "batches", "failed_commits", "mean_batch", "waiting_claims", "uptime", "writes"}``;
        each queue's ``totals`` counts since the daemon started ``{"claimed",
        "completed", "failed", "retried", "dead", "expired", "removed", "refused": {op: n}}``
        (PROTOCOL.md, "Per-queue counters"; absent from an older daemon);
        ``writes`` is ``{op: {"applied", "refused"}}`` for ``renew``,
        ``complete``, ``release`` and ``fail`` since the daemon started (batch
        items one each; refused: the lease was not the job's current one).
        ``oldest_ready_age``, ``mean_batch`` and ``uptime`` are seconds or
        ratios (float); the rest are counts (int). A queue with settings
        (:meth:`queue_config`) also has ``"paused"`` (bool), ``"max_leased"``,
        ``"rate"`` (int) and ``"per"`` (float); a queue without any has none
        of these keys. One with group settings (``group_max_leased`` or
        ``group_rate`` above 0) also has ``"group_max_leased"``,
        ``"group_rate"`` (int) and ``"group_per"`` (float). A queue with
        groups waiting has ``"groups_waiting"``: how many of its groups have a
        ready job (jobs of no group are not counted; absent when none, so
        other queues keep their shape). A queue with per-group overrides
        (:meth:`group_config`, C3.25) has ``"group_overrides"`` (how many
        groups have one, an int) and ``"group_config"`` (group -> its
        overrides ``{"max_leased", "rate", "per"}``, each key only when set;
        the first 100 groups by name); a queue without any has neither key.
        A queue with jobs waiting for their parents (:meth:`enqueue`'s
        ``after``) has ``"blocked"``: how
        many (an int; absent when none, likewise), and one with suspended
        jobs (:meth:`suspend`, C3.23) has ``"suspended"``, likewise. A queue
        whose jobs' deadlines passed (:meth:`enqueue`'s ``deadline``, C3.24)
        counts them in ``totals["deadline_passed"]`` (absent while none:
        ``totals.get("deadline_passed", 0)``).
        A queue with a retention (:meth:`queue_config`'s ``keep_done``,
        ``keep_dead``, ``keep_cancelled``, issue 33) has those keys (float
        seconds), each only when set; ``row.get("keep_done")`` is ``None``
        for none. Its ``totals["removed"]`` counts the jobs its retention
        removed (0 also from a daemon before retention, which sends none).
        ``now``: client clock mode only, the time ``oldest_ready_age`` is
        measured at."""
        result = self._call("stats", self._timed({}, now))
        if not (isinstance(result, dict) and isinstance(result.get("queues"), dict)):
            raise BadReply("bad_reply", f"stats: expected a map with 'queues', got {result!r}")
        for row in result["queues"].values():
            if isinstance(row, dict) and isinstance(row.get("totals"), dict):
                row["totals"].setdefault("removed", 0)
        return result

    def job(self, id: str, *, now: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """Operator: one job's whole record, its :meth:`list` row with
        ``"result"`` and ``"payload"`` (``str``, ``bytes`` when it was sent as
        bytes, or ``None``), or ``None`` when the id does not exist. ``now``:
        client clock mode only, the time its state is judged at.

        Jobs that wait for jobs (issue 32): ``"after"``, the ids of the jobs
        it waits (or waited) for, in id order, only for a job enqueued with
        ``after``; ``"blocked_children"``, the ids of its children (the jobs
        with it in their ``after``) that are still blocked, by it or by
        another parent (the first 1000 in id order), only while there are
        any: once none is blocked any more, the key is gone.
        ``row.get("after", [])`` and ``row.get("blocked_children", [])`` read
        every job alike.

        Headers (issue 33): ``"headers"``, the dict of str to str the job was
        enqueued with, only for a job that has some (``row.get("headers",
        {})`` reads every job alike).

        Steps (C3.22): ``"steps"``, the dict of each step the job's attempts
        saved (:meth:`step_save`) to its value (``bytes``, ``str`` or
        ``None``, as saved), only for a job that has some
        (``row.get("steps", {})`` reads every job alike). :meth:`claim` (by
        id) answers only the fence: this is where its holder reads them.

        Suspend and signal (C3.23): ``"signal"``, the value of the
        :meth:`signal` that woke the job since it last suspended (``bytes``,
        ``str`` or ``None``), only for a job a signal woke (``"signal" in
        row``); and while the job is ``"suspended"``, ``"suspended":
        {"timeout": <Unix seconds when its wait ends>, "on_timeout": "retry"
        | "fail"}``."""
        result = self._call("job", self._timed({"id": id}, now))
        if result is not None and not _is_record(result):
            raise BadReply("bad_reply", "job: expected a map (its after and blocked_children "
                                        "lists of ids, its headers str to str, its steps str to "
                                        "payloads, its signal a payload, its suspended a map) "
                                        f"or nil, got {result!r}")
        return result

    def results(self, ids: Iterable[str], *, states_only: bool = False,
                now: Optional[float] = None) -> Dict[str, Optional[Dict[str, Any]]]:
        """The state and result of up to 1000 jobs in one round trip (the op
        ``results``, issue 32: a job reads its parents' results, fan-in).
        Answers a dict keyed by each id of ``ids``, once (duplicates
        collapse), in the order first asked: ``{"state": str, "result": str
        or None}``, ``state`` one of :data:`JOB_STATES` and ``result`` what a
        :meth:`complete` stored (``None`` until then); ``None`` for an id that
        does not exist. Changes nothing.

        ``ids`` is sent as a list (a str, bytes, a mapping or anything not
        iterable goes as it is, for the daemon to refuse). The daemon refuses an empty list, more than 1000 ids or an empty
        id with :class:`fenceq.InvalidArgument`, and a non-list or an id that
        is not a str with :class:`fenceq.BadRequest`. ``now``: client clock
        mode only, the time ``state`` is judged at.

        A reply holds about 1 MiB of results at most (issue 56): the results
        past that, in the order asked, come back as ``{"state", "result":
        None, "omitted": True}``; ask again for those ids. ``states_only``:
        no result at all (each job that has one ``omitted``), to show states."""
        asked: Any = ids
        if not isinstance(ids, (str, bytes, bytearray, Mapping)):
            try:
                asked = builtins.list(ids)
            except TypeError:
                pass  # not iterable: the daemon's bad_request
        fields: Dict[str, Any] = {"ids": asked}
        if states_only:
            fields["states_only"] = True
        return _check_results(self._call("results", self._timed(fields, now)), asked)

    def list(self, *, queue: Optional[str] = None, state: Optional[str] = None,
             limit: Optional[int] = None, after: Optional[str] = None,
             order: Optional[str] = None, after_created: Optional[float] = None,
             prefix: Optional[str] = None, key: Optional[str] = None,
             group: Optional[str] = None,
             now: Optional[float] = None) -> List[Dict[str, Any]]:
        """Operator: one page of jobs, in id order or by age, as dicts ``{"id",
        "queue", "state", "priority", "attempts", "max_attempts", "fence",
        "owner", "until", "not_before", "error", "created"}`` (``created``:
        when the job was enqueued, Unix seconds), plus ``"progress"`` and
        ``"key"`` (its unique key) only for a job that has one, and
        ``"group"``: the job's group, ``None`` for a job in none.

        Filters: ``queue``; ``state``, one of :data:`JOB_STATES` (``"ready"``,
        ``"delayed"``, ``"leased"``, ``"done"``, ``"dead"``, ``"cancelled"``,
        ``"blocked"``: waiting for its ``after`` parents, ``"suspended"``:
        waiting for a :meth:`signal`);
        ``prefix``: only ids that start with it; ``key``: only the jobs of
        this unique key (exact; of any queue unless ``queue`` is given);
        ``group``: only the jobs of this group (exact, 1..256 bytes; of any
        queue unless ``queue`` is given); ``limit`` (1..1000, the
        daemon's default 100). ``order``: ``"id"`` (the default),
        ``"created"`` (oldest first) or ``"-created"`` (newest first), ties
        by id. To page, pass the last row's id as ``after``, and in created
        order its ``created`` as ``after_created`` too; an empty or short
        page is the end. ``now``: client clock mode only, the time ``state``
        is judged at.

        Named like the wire op; it is a method, so it never shadows the
        builtin ``list`` outside the class (``client.list()``)."""
        fields: Dict[str, Any] = {}
        _optional(fields, "queue", queue)
        _optional(fields, "state", state)
        _optional(fields, "limit", limit)
        _optional(fields, "after", after)
        _optional(fields, "order", order)
        _optional(fields, "after_created", after_created)
        _optional(fields, "prefix", prefix)
        _optional(fields, "key", key)
        _optional(fields, "group", group)
        result = self._call("list", self._timed(fields, now))
        if not (isinstance(result, builtins.list) and all(isinstance(j, dict) for j in result)):
            raise BadReply("bad_reply", f"list: expected an array of maps, got {result!r}")
        return result

    def purge(self, older_than: float, *, queue: Optional[str] = None,
              now: Optional[float] = None) -> int:
        """Operator: remove the done and dead jobs (of ``queue``, or of every
        queue) that finished at least ``older_than`` seconds ago, and answer
        how many. The fence of a purged id is kept: enqueueing that id again
        continues from it (C1.2), so no old token becomes valid again.
        ``now``: client clock mode only. By state, prefix or group, a page at
        a time: :meth:`purge_many` and :meth:`purge_all`."""
        result = self._call("purge", self._timed(_optional({"older_than": older_than}, "queue", queue), now))
        if not (_is_int(result) and result >= 0):
            raise BadReply("bad_reply", f"purge: expected a count, got {result!r}")
        return result

    # -- bulk actions by filter (issue 33; protocol v1, additive) -------------

    def retry_many(self, queue: str, *, state: Optional[str] = None,
                   prefix: Optional[str] = None, group: Optional[str] = None,
                   limit: Optional[int] = None, now: Optional[float] = None) -> BulkResult:
        """Operator: one page of :meth:`retry` by filter (the op
        ``retry_many``): up to ``limit`` (1..10000, :data:`MAX_BULK_LIMIT`;
        the daemon's default 1000) jobs of ``queue`` in ``state`` (``"dead"``
        or ``"cancelled"``, :data:`RETRY_MANY_STATES`; ``None``: both) whose
        id starts with ``prefix`` and of ``group`` (each filter only when
        given) are each retried as :meth:`retry` would: attempts start over,
        claimable at once, the fence continues (C1.2). A job with a unique
        key another unfinished job of its queue holds stays as it is.

        Answers :class:`BulkResult` ``(count, more)``: how many were retried,
        and whether jobs that pass the filter are left; the next request goes
        on where this one stopped (:meth:`retry_all` loops). A page also stops
        early, with ``more`` true, once the daemon has worked on it for a few
        milliseconds.

        A ``state`` the op cannot change (``"done"``) or a ``limit`` out of
        range raises :class:`fenceq.InvalidArgument`, a wrong type
        :class:`fenceq.BadRequest`; nothing changes then. ``now``: client
        clock mode only."""
        fields = _bulk_fields({"queue": queue}, state, prefix, group, limit)
        return _bulk_result("retry_many", self._call("retry_many", self._timed(fields, now)))

    def cancel_many(self, queue: str, *, state: Optional[str] = None,
                    prefix: Optional[str] = None, group: Optional[str] = None,
                    limit: Optional[int] = None, now: Optional[float] = None) -> BulkResult:
        """Operator: one page of :meth:`cancel` by filter (the op
        ``cancel_many``): up to ``limit`` jobs of ``queue`` in ``state``
        (``"ready"``, ``"delayed"``, ``"leased"``, ``"blocked"``, ``"dead"``
        or ``"suspended"``, :data:`CANCEL_MANY_STATES`; ``None``: all six), of
        ``prefix`` and ``group``, each cancelled as :meth:`cancel` would: the
        fence goes up, so a holder's later writes are refused. Answers
        :class:`BulkResult` ``(count, more)`` (:meth:`cancel_all` loops).
        Filters, limits and errors as for :meth:`retry_many` (``"done"`` or
        ``"cancelled"`` as ``state``: :class:`fenceq.InvalidArgument`)."""
        fields = _bulk_fields({"queue": queue}, state, prefix, group, limit)
        return _bulk_result("cancel_many", self._call("cancel_many", self._timed(fields, now)))

    def purge_many(self, queue: Optional[str] = None, *, state: Optional[str] = None,
                   prefix: Optional[str] = None, group: Optional[str] = None,
                   limit: Optional[int] = None, older_than: Optional[float] = None,
                   now: Optional[float] = None) -> BulkResult:
        """Operator: one page of :meth:`purge` by filter (the op ``purge``
        with a filter): up to ``limit`` finished jobs (of ``queue``, or of
        every queue) in ``state`` (``"done"``, ``"dead"`` or ``"cancelled"``,
        :data:`PURGE_MANY_STATES`; ``None``: all three), of ``prefix`` and
        ``group``, that finished at least ``older_than`` seconds ago (the
        daemon's default 0), are removed. Each id's fence is kept: enqueued
        again, it continues from it (C1.2). Answers :class:`BulkResult`
        ``(count, more)`` (:meth:`purge_all` loops).

        Given no ``state``, ``prefix``, ``group`` nor ``limit``, it sends
        ``limit=1000`` (:data:`DEFAULT_BULK_LIMIT`), so that the daemon
        answers a page, never the unbounded :meth:`purge`. Errors as for
        :meth:`retry_many`."""
        fields: Dict[str, Any] = {}
        _optional(fields, "queue", queue)
        _optional(fields, "older_than", older_than)
        _bulk_fields(fields, state, prefix, group, limit)
        if not any(k in fields for k in ("state", "prefix", "group", "limit")):
            fields["limit"] = DEFAULT_BULK_LIMIT  # a page, not purge by age alone
        return _bulk_result("purge", self._call("purge", self._timed(fields, now)))

    def retry_all(self, queue: str, *, state: Optional[str] = None,
                  prefix: Optional[str] = None, group: Optional[str] = None,
                  limit: Optional[int] = None, max_pages: int = DEFAULT_MAX_PAGES,
                  now: Optional[float] = None) -> int:
        """Operator: :meth:`retry_many` page after page while ``more``, and
        answer how many jobs were retried in all. Bounded: at most
        ``max_pages`` requests (default 10000, :data:`DEFAULT_MAX_PAGES`),
        and it also stops after a page that retried none (its jobs cannot be
        retried, such as keyed jobs whose key another job holds: asking again
        would find the same ones). Jobs that pass the filter may be left
        then, and so when others are added meanwhile: :meth:`list` shows
        them. A ``max_pages`` below 1 raises :class:`fenceq.InvalidArgument`
        before anything is sent; an error on a later page is raised after
        the earlier pages were applied."""
        _check_max_pages(max_pages)
        return self._bulk_all(lambda: self.retry_many(queue, state=state, prefix=prefix,
                                                      group=group, limit=limit, now=now), max_pages)

    def cancel_all(self, queue: str, *, state: Optional[str] = None,
                   prefix: Optional[str] = None, group: Optional[str] = None,
                   limit: Optional[int] = None, max_pages: int = DEFAULT_MAX_PAGES,
                   now: Optional[float] = None) -> int:
        """Operator: :meth:`cancel_many` page after page while ``more`` (as
        :meth:`retry_all`: at most ``max_pages``, stopped by a page that
        cancelled none), answering how many jobs were cancelled in all."""
        _check_max_pages(max_pages)
        return self._bulk_all(lambda: self.cancel_many(queue, state=state, prefix=prefix,
                                                       group=group, limit=limit, now=now), max_pages)

    def purge_all(self, queue: Optional[str] = None, *, state: Optional[str] = None,
                  prefix: Optional[str] = None, group: Optional[str] = None,
                  limit: Optional[int] = None, older_than: Optional[float] = None,
                  max_pages: int = DEFAULT_MAX_PAGES, now: Optional[float] = None) -> int:
        """Operator: :meth:`purge_many` page after page while ``more`` (as
        :meth:`retry_all`: at most ``max_pages``, stopped by a page that
        removed none), answering how many jobs were removed in all."""
        _check_max_pages(max_pages)
        return self._bulk_all(lambda: self.purge_many(queue, state=state, prefix=prefix, group=group,
                                                      limit=limit, older_than=older_than, now=now),
                              max_pages)

    @staticmethod
    def _bulk_all(page: Any, max_pages: int) -> int:
        total = 0
        for _ in range(max_pages):
            result = page()
            total += result.count
            if not result.more or result.count == 0:
                break
        return total

    def metrics(self, *, now: Optional[float] = None) -> str:
        """The :meth:`stats` figures in the Prometheus text exposition format
        (``fenceq_jobs{queue=…,state=…}``, ``fenceq_requests_total`` …)."""
        result = self._call("metrics", self._timed({}, now))
        if not isinstance(result, str):
            raise BadReply("bad_reply", f"metrics: expected a str, got {result!r}")
        return result

    # -- queue settings, await and periodic jobs (protocol v1, additive) ------

    def queue_config(self, queue: str, *, paused: Optional[bool] = None,
                     max_leased: Optional[int] = None, rate: Optional[int] = None,
                     per: Optional[float] = None, group_max_leased: Optional[int] = None,
                     group_rate: Optional[int] = None,
                     group_per: Optional[float] = None, keep_done: Optional[float] = None,
                     keep_dead: Optional[float] = None,
                     keep_cancelled: Optional[float] = None) -> bool:
        """Operator: change the settings of ``queue`` and answer ``True``. They
        are stored (a restart keeps them) and hold back every claim of the
        queue, by :meth:`claim_next` and by :meth:`claim`, on every daemon of
        a shared database. Each keyword is sent only when given; a setting
        left out keeps its stored value:

        - ``paused``: ``True`` hands out no job of the queue until ``False``
          (which wakes the claims parked on it).
        - ``max_leased`` (0..10**9): at most this many of its jobs leased at
          once; 0: no limit.
        - ``rate`` (0..100000) and ``per`` (seconds, 0 < per <= 86400, the
          daemon's default 1): at most ``rate`` claims in any ``per`` seconds;
          ``rate`` 0: no limit.
        - ``group_max_leased`` (0..10**9): at most this many jobs of any one
          ``group`` (see :meth:`enqueue`) leased at once; 0: no limit.
        - ``group_rate`` (0..100000) and ``group_per`` (seconds, 0 <
          group_per <= 86400, the daemon's default 1): at most
          ``group_rate`` claims per group in any ``group_per`` seconds;
          ``group_rate`` 0: no limit. Jobs without a group are limited by
          no group setting.
        - ``keep_done``, ``keep_dead``, ``keep_cancelled`` (seconds,
          0..1e10; issue 33): retention. The queue's done, dead or cancelled
          jobs are removed by the daemon itself this many seconds after they
          finished, as :meth:`purge` would (each id's fence kept); it counts
          them in :meth:`stats` as ``totals["removed"]``.
          :data:`KEEP_FOREVER` (``math.inf``) removes that retention (sent
          as nil: the jobs are kept until purged, the default); ``None``, as
          for every keyword, leaves the stored value as it is.

        Settings that hold nothing back (not paused, no limit; ``per`` or
        ``group_per`` alone) are removed: :meth:`stats` shows the keys
        ``paused``, ``max_leased``, ``rate`` and ``per`` only for a queue
        that has some, and ``group_max_leased``, ``group_rate`` and
        ``group_per`` only for one with a group limit. A bad value raises
        :class:`fenceq.InvalidArgument` (a wrong type
        :class:`fenceq.BadRequest`) and nothing changes."""
        fields: Dict[str, Any] = {"queue": queue}
        _optional(fields, "paused", paused)
        _optional(fields, "max_leased", max_leased)
        _optional(fields, "rate", rate)
        _optional(fields, "per", per)
        _optional(fields, "group_max_leased", group_max_leased)
        _optional(fields, "group_rate", group_rate)
        _optional(fields, "group_per", group_per)
        _keep_field(fields, "keep_done", keep_done)
        _keep_field(fields, "keep_dead", keep_dead)
        _keep_field(fields, "keep_cancelled", keep_cancelled)
        return self._expect_bool("queue_config", fields)

    def group_config(self, queue: str, group: str, *,
                     max_leased: Optional[Union[int, _Inherit]] = None,
                     rate: Optional[Union[int, _Inherit]] = None,
                     per: Optional[Union[float, _Inherit]] = None) -> bool:
        """Operator: override the group settings of ``queue`` for one
        ``group`` (a tenant: one on a larger plan, an account that must stay
        slow; C3.25) and answer ``True``. The overrides are stored (a restart
        keeps them) and every claim path honours them (:meth:`claim`,
        :meth:`claim_next`, the next jobs of :meth:`complete_and_claim_next`
        and :meth:`complete_many`), on every daemon of a shared database; a
        group held back under its old setting is looked at again at once.
        ``group`` is a str of 1..256 bytes (:data:`MAX_GROUP_BYTES`). Each
        keyword is sent only when given; one left out keeps the group's
        stored override:

        - ``max_leased`` (0..10**9): at most this many jobs of the group
          leased at once, in place of the queue's ``group_max_leased``; 0: no
          limit for this group, even where the queue sets one.
        - ``rate`` (0..100000): at most this many claims of the group in any
          ``group_per`` seconds, in place of the queue's ``group_rate``; 0:
          no rate limit for this group alone.
        - ``per`` (seconds, 0 < per <= 86400): this group's window, in place
          of the queue's ``group_per``.

        :data:`INHERIT` removes that override (sent as nil: the group
        follows the queue's setting again; a group whose three overrides are
        all removed has none); ``None``, as for every keyword, leaves the
        stored override as it is. :meth:`stats` shows, for a queue with
        overrides, ``"group_overrides"`` (how many groups have one) and
        ``"group_config"`` (group -> its overrides, each key only when set;
        the first 100 groups by name). A bad value raises
        :class:`fenceq.InvalidArgument` (a wrong type
        :class:`fenceq.BadRequest`) and nothing changes."""
        fields: Dict[str, Any] = {"queue": queue, "group": group}
        _override_field(fields, "max_leased", max_leased)
        _override_field(fields, "rate", rate)
        _override_field(fields, "per", per)
        return self._expect_bool("group_config", fields)

    def pause(self, queue: str) -> bool:
        """Operator: ``queue_config(queue, paused=True)``: no job of ``queue`` is
        handed out (claims wait, long-polls stay parked) until :meth:`resume`."""
        return self.queue_config(queue, paused=True)

    def resume(self, queue: str) -> bool:
        """Operator: ``queue_config(queue, paused=False)``: the queue hands out
        jobs again, first to the claims parked on it."""
        return self.queue_config(queue, paused=False)

    def await_job(self, id: str, wait: float = 0, *,
                  now: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """Wait up to ``wait`` seconds (0..3600) for job ``id`` to be finished
        (``done``, ``dead`` or ``cancelled``) and answer its whole record, as
        :meth:`job` answers it (its :meth:`list` row with ``"result"`` and
        ``"payload"``); ``None`` when the wait passes first (at once with
        ``wait=0`` for a job not finished yet). The op is ``await`` (a Python
        keyword, hence the name).

        The daemon holds the request (a long-poll): it answers as soon as a
        complete, a fail that leaves the job dead, or a cancel finishes it.
        This call's timeout is the client's ``timeout`` plus ``wait``. If the
        daemon stops meanwhile the call raises :class:`fenceq.Unavailable`.

        Raises :class:`fenceq.InvalidArgument` when there is no job ``id`` or
        ``wait`` is out of range. ``now``: client clock mode only, the time
        the job's state is judged at."""
        fields = self._timed({"id": id, "wait": wait}, now)
        result = self._call("await", fields, self.timeout + _wait_extension(wait))
        if result is not None and not _is_record(result):
            raise BadReply("bad_reply", f"await: expected a map or nil, got {result!r}")
        return result

    def enqueue_and_wait(self, id: str, wait: float, *, queue: Optional[str] = None,
                         payload: Payload = None, priority: Optional[int] = None,
                         delay: Optional[float] = None, max_attempts: Optional[int] = None,
                         group: Optional[str] = None, max_runtime: Optional[float] = None,
                         headers: Optional[Mapping[str, str]] = None,
                         deadline: Optional[float] = None,
                         now: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """:meth:`enqueue` job ``id`` (the keywords as there), then
        :meth:`await_job` it for up to ``wait`` seconds: its record once a
        worker finished it, ``None`` when the wait passes first. One request
        (the op ``enqueue_and_wait``; against a daemon without it, two). An
        ``id`` that exists already is awaited all the same (the enqueue
        changes nothing, C3.1): enqueue-and-wait with the same id is safe to
        repeat. ``now`` goes with the request. It takes a ``group``, a
        ``max_runtime``, ``headers`` and a ``deadline`` but no unique ``key`` (the daemon refuses one): :meth:`enqueue_unique`, then
        :meth:`await_job` the id it answers. The record has ``"headers"``,
        ``"steps"`` and ``"signal"`` when the job has them, as :meth:`job`'s
        (a job whose ``deadline`` passed is finished too: dead)."""
        fields = _enqueue_fields(id, queue, payload, priority, delay, max_attempts, group=group,
                                 max_runtime=max_runtime, headers=headers, deadline=deadline)
        fields["wait"] = wait
        try:
            result = self._call("enqueue_and_wait", self._timed(fields, now),
                                self.timeout + _wait_extension(wait))
        except UnknownOp:
            # A daemon before enqueue_and_wait: the same in two requests.
            self.enqueue(id, queue=queue, payload=payload, priority=priority, delay=delay,
                         max_attempts=max_attempts, group=group, max_runtime=max_runtime,
                         headers=headers, deadline=deadline, now=now)
            return self.await_job(id, wait, now=now)
        if result is not None and not _is_record(result):
            raise BadReply("bad_reply", f"enqueue_and_wait: expected a map or nil, got {result!r}")
        return result

    def schedule_set(self, name: str, cron: str, *, tz: str = "UTC", queue: str = "default",
                     payload: Payload = None, priority: int = 0, max_attempts: int = 0,
                     now: Optional[float] = None) -> bool:
        """Operator: a periodic job. At each tick of ``cron`` (5 fields: minute
        hour day-of-month month day-of-week, or a macro such as ``@daily``),
        read in the IANA time zone ``tz``, the daemon enqueues one job
        ``NAME@YYYY-MM-DDTHH:MMZ`` (the tick in UTC) into ``queue`` with
        ``payload``, ``priority`` and ``max_attempts`` as :meth:`enqueue`
        takes them; once per tick whatever restarts or daemons, and after
        downtime only the latest tick missed. Replaces a schedule of that name
        and answers ``True``.

        The keywords that keep their defaults are not sent (the daemon's
        defaults are the same). ``name`` is 1..200 bytes, ``cron`` at most
        256. A bad ``cron`` or ``tz`` raises :class:`fenceq.InvalidArgument`,
        its message naming the field; so does a 1001st schedule. ``now``:
        client clock mode only, the time the schedule counts from."""
        fields: Dict[str, Any] = {"name": name, "cron": cron}
        if tz != "UTC":
            fields["tz"] = tz
        if queue != "default":
            fields["queue"] = queue
        if payload is not None:
            fields["payload"] = _payload_field(payload)
        if priority != 0:
            fields["priority"] = priority
        if max_attempts != 0:
            fields["max_attempts"] = max_attempts
        return self._expect_bool("schedule_set", self._timed(fields, now))

    def schedule_delete(self, name: str) -> bool:
        """Operator: remove the schedule ``name`` and answer ``True``; ``False``
        when there is none. The jobs it enqueued stay."""
        return self._expect_bool("schedule_delete", {"name": name})

    def schedule_list(self, *, now: Optional[float] = None) -> List[Dict[str, Any]]:
        """Operator: every schedule, by name, as dicts ``{"name", "cron", "tz",
        "queue", "payload", "priority", "max_attempts", "next", "last"}``:
        ``next`` is the next tick (float Unix seconds; ``None`` when there is
        none within five years), ``last`` the last tick enqueued (``None``:
        none yet). ``payload`` is ``str``, ``bytes`` or ``None`` as it was set.
        ``now``: client clock mode only, the time ``next`` follows."""
        result = self._call("schedule_list", self._timed({}, now))
        if not (isinstance(result, builtins.list) and all(isinstance(s, dict) for s in result)):
            raise BadReply("bad_reply", f"schedule_list: expected an array of maps, got {result!r}")
        return result

    # -- transport ----------------------------------------------------------

    @staticmethod
    def _timed(fields: Dict[str, Any], now: Optional[float]) -> Dict[str, Any]:
        if now is not None:
            fields["now"] = now
        return fields

    def _expect_bool(self, op: str, fields: Dict[str, Any]) -> bool:
        result = self._call(op, fields)
        if not isinstance(result, bool):
            raise BadReply("bad_reply", f"{op}: expected a bool, got {result!r}")
        return result

    def _call(self, op: str, fields: Dict[str, Any], timeout: Optional[float] = None) -> Any:
        """Send one request and return its ``result``, or raise."""
        self._check_thread()
        if self._socket is None:
            raise ClientMisuse("misuse", "fenceq.Client is closed")
        if self._busy:
            raise ClientMisuse("misuse", "fenceq.Client re-entered (from a signal handler?) during a call")
        self._busy = True
        try:
            return self._round_trip(self._socket, op, fields, self.timeout if timeout is None else timeout)
        except zmq.ZMQError as e:
            # The socket itself failed (not the daemon): the request may or
            # may not have left, so its outcome is unknown.
            raise TransportError("transport", f"{op}: the socket to {self.endpoint} failed: {e}") from None
        finally:
            self._busy = False

    def _round_trip(self, socket: zmq.Socket, op: str, fields: Dict[str, Any], timeout: float) -> Any:
        rid = self._next_rid
        self._next_rid += 1
        payload = msgpack.packb({"op": op, "rid": rid, **fields}, use_bin_type=True)
        start = time.monotonic()
        deadline = start + timeout
        connect_timeout = timeout if self._connect_timeout is None else min(timeout, self._connect_timeout)

        # Until the first reply, a missing or foreign ipc:// socket file fails
        # at once (a wrong endpoint, or no daemon); afterwards the daemon is
        # known to be there, and a missing file is a restart worth waiting for.
        if not self._answered:
            why = _ipc_problem(self.endpoint)
            if why:
                # Which step chose the endpoint, and what the caller changes.
                choose = "pass it as fenceq.Client(endpoint=...)" + (
                    " (FENCEQ_ENDPOINT is read only when none is given)"
                    if self.endpoint_source == "given" else " or set FENCEQ_ENDPOINT")
                raise Unreachable("unreachable", f"{op}: nothing serves {self.endpoint} "
                                                 f"({_CHOSEN_BY[self.endpoint_source]}): {why}; "
                                                 f"to use another endpoint, {choose}; "
                                                 "the request was not sent")

        # Send: with ZMQ_IMMEDIATE a send is refused (Again) while no connection
        # to the daemon exists; then POLLOUT says when one does. Sent at once
        # first: a poll of its own cost ~9 us a call, a tenth of a round trip's
        # Python time.
        while True:
            try:
                # The empty delimiter frame makes the envelope REQ-compatible.
                socket.send_multipart([b"", payload], flags=zmq.NOBLOCK)
                break
            except zmq.Again:  # no connection (yet, or any more)
                pass
            if not self._wait(socket, zmq.POLLOUT, start + connect_timeout):
                raise Timeout("timeout", f"{op}: no connection to {self.endpoint} within "
                                         f"{connect_timeout:g} s; the request was not sent"
                                         f"{_hint(self.endpoint)}", sent=False)

        # Receive: skip replies to earlier requests that timed out. A blocking
        # receive bounded by ZMQ_RCVTIMEO (set when the time left changes by a
        # millisecond or more), not a poll and then a receive: one call a reply.
        while True:
            left = deadline - time.monotonic()
            remaining_ms = max(0, min(_MAX_RCVTIMEO_MS, int(left * 1000 + 0.999)))
            if remaining_ms != self._rcvtimeo:
                socket.setsockopt(zmq.RCVTIMEO, remaining_ms)
                self._rcvtimeo = remaining_ms
            try:
                frames = socket.recv_multipart()
            except zmq.Again:
                if remaining_ms == _MAX_RCVTIMEO_MS and time.monotonic() < deadline:
                    continue  # a timeout longer than ZMQ_RCVTIMEO can say
                raise Timeout("timeout", f"{op}: no reply from {self.endpoint} within {timeout:g} s; "
                                         "the request may or may not have been applied"
                                         f"{_hint(self.endpoint)}") from None
            try:
                reply = msgpack.unpackb(frames[-1], raw=False)
            except Exception as e:
                raise BadReply("bad_reply", f"{op}: reply is not msgpack: {e}") from None
            if not isinstance(reply, dict):
                raise BadReply("bad_reply", f"{op}: reply is not a map: {reply!r}")
            echoed = reply.get("rid")
            if not (_is_int(echoed) and echoed == rid):
                continue  # a late reply (lower rid): its request already timed out
            self._answered = True
            return self._result(op, reply)

    @staticmethod
    def _wait(socket: zmq.Socket, event: int, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bool(socket.poll(0, event))
        return bool(socket.poll(max(1, int(remaining * 1000 + 0.999)), event))

    @staticmethod
    def _result(op: str, reply: Dict[str, Any]) -> Any:
        ok = reply.get("ok")
        if ok is True:
            if "result" not in reply:
                raise BadReply("bad_reply", f"{op}: ok reply without result: {reply!r}")
            return reply["result"]
        error = reply.get("error")
        if ok is False and isinstance(error, dict) and isinstance(error.get("code"), str):
            message = error.get("message")
            raise error_from_reply(error["code"], message if isinstance(message, str) else "")
        raise BadReply("bad_reply", f"{op}: malformed reply: {reply!r}")
