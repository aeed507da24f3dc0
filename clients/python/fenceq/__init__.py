"""fenceq: a lease-and-fencing-token job queue. Python client for fenceqd.

    import fenceq

    with fenceq.Client() as c:                     # $FENCEQ_ENDPOINT or ipc://var/fenceqd.sock
        c.enqueue("job-7")
        fence = c.claim("job-7", "worker-a", ttl=30)   # None: someone else has it
        if fence is not None:
            c.complete("job-7", "worker-a", fence, "done")  # False: lease lost, refused

The contract every call keeps is ``shared/spec/contract.md`` (clauses C1-C4);
docstrings name the clause. ``fenceq.service`` keeps the original single-file
API (``claim(path, job_id, owner, now, ttl)`` …) working on top of the daemon.
"""

from .client import DEFAULT_ENDPOINT, PROTOCOL_VERSION, Client, ClientMisuse, default_endpoint
from .errors import (
    BadRequest,
    FenceqError,
    InternalError,
    InvalidArgument,
    ProtocolError,
    Timeout,
    Unavailable,
    UnknownOp,
    UnsupportedVersion,
)
from .worker import Lease, LeaseLost, Worker

__version__ = "0.1.0"

__all__ = [
    "BadRequest",
    "Client",
    "ClientMisuse",
    "DEFAULT_ENDPOINT",
    "FenceqError",
    "InternalError",
    "InvalidArgument",
    "Lease",
    "LeaseLost",
    "PROTOCOL_VERSION",
    "ProtocolError",
    "Timeout",
    "Unavailable",
    "UnknownOp",
    "UnsupportedVersion",
    "Worker",
    "default_endpoint",
]
