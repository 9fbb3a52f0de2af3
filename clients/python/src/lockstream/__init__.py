"""lockstream: the Python client of the lockstream lock server.

    import lockstream

    with lockstream.Client("127.0.0.1:50051", owner="nightly-report") as client:
        with client.lock("reports/daily", mode="write", timeout=30) as lock:
            write_report(fencing_token=lock.token)  # lock.lost is set if the lock is lost
        with client.campaign("reports/leader", b"10.0.0.7:8080") as leadership:
            lead(fencing_token=leadership.term)  # leadership.lost, as lock.lost

`lockstream.aio` is the same on asyncio. The generated protobuf and gRPC modules are
`lockstream.v1.lockstream_pb2` and `lockstream.v1.lockstream_pb2_grpc` (locks), and
`lockstream.v1.election_pb2` and `lockstream.v1.election_pb2_grpc` (elections).
"""

from lockstream import aio
from lockstream._sync import Client, Events, Leadership, Lock
from lockstream.aio import (
    VALUE_MAX_BYTES,
    ElectionEvent,
    HistoryGone,
    LockDescription,
    LockRequestInfo,
    Mode,
    Proclaimed,
    RevokeRequest,
    Skipped,
    Target,
    Term,
    Vacant,
)
from lockstream.errors import (
    ClientClosed,
    InvalidArgument,
    LockError,
    LockLost,
    LockTimeout,
    NotHeld,
    PermissionDenied,
)

__all__ = [
    "VALUE_MAX_BYTES",
    "Client",
    "ClientClosed",
    "ElectionEvent",
    "Events",
    "HistoryGone",
    "InvalidArgument",
    "Leadership",
    "Lock",
    "LockDescription",
    "LockError",
    "LockLost",
    "LockRequestInfo",
    "LockTimeout",
    "Mode",
    "NotHeld",
    "PermissionDenied",
    "Proclaimed",
    "RevokeRequest",
    "Skipped",
    "Target",
    "Term",
    "Vacant",
    "aio",
]
