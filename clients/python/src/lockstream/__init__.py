"""lockstream: the Python client of the lockstream lock server.

    import lockstream

    with lockstream.Client("127.0.0.1:50051", owner="nightly-report") as client:
        with client.lock("reports/daily", mode="write", timeout=30) as lock:
            write_report(fencing_token=lock.token)  # lock.lost is set if the lock is lost
        with client.campaign("reports/leader", b"10.0.0.7:8080") as leadership:
            lead(fencing_token=leadership.term)  # leadership.lost, as lock.lost
        with client.lock("reports/daily") as lock:
            records = client.records(lock.name, lock.token)  # writable only while held
            records.update("runs", lambda runs: str(int(runs or 0) + 1))

`lockstream.aio` is the same on asyncio. The generated protobuf and gRPC modules are
`lockstream.v1.lockstream_pb2` and `lockstream.v1.lockstream_pb2_grpc` (locks),
`lockstream.v1.election_pb2` and `lockstream.v1.election_pb2_grpc` (elections), and
`lockstream.v1.records_pb2` and `lockstream.v1.records_pb2_grpc` (guarded records).
"""

from lockstream import aio
from lockstream._sync import Client, Events, HolderRecords, Leadership, Lock
from lockstream.aio import (
    RECORD_KEY_MAX_BYTES,
    RECORD_VALUE_MAX_BYTES,
    VALUE_MAX_BYTES,
    ElectionEvent,
    HistoryGone,
    LockDescription,
    LockRequestInfo,
    Mode,
    Proclaimed,
    Record,
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
    RevisionConflict,
)

__all__ = [
    "RECORD_KEY_MAX_BYTES",
    "RECORD_VALUE_MAX_BYTES",
    "VALUE_MAX_BYTES",
    "Client",
    "ClientClosed",
    "ElectionEvent",
    "Events",
    "HistoryGone",
    "HolderRecords",
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
    "Record",
    "RevisionConflict",
    "RevokeRequest",
    "Skipped",
    "Target",
    "Term",
    "Vacant",
    "aio",
]
