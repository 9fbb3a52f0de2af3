"""What `describe` answers: a lock's holders and waiters as plain Python values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from lockstream._checks import Mode
from lockstream.v1 import lockstream_pb2 as pb

_MODES_FROM_WIRE: dict[int, Mode] = {
    pb.LOCK_MODE_MUTEX: "mutex",
    pb.LOCK_MODE_READ: "read",
    pb.LOCK_MODE_WRITE: "write",
    pb.LOCK_MODE_SEMAPHORE: "semaphore",
}


@dataclass(frozen=True)
class LockRequestInfo:
    """One request in a lock's queue, holding or waiting."""

    #: How it wants the lock (None for a mode this client does not know).
    mode: Mode | None
    #: Who asked (the `owner` of the request), possibly "".
    owner: str
    #: The fencing token it holds, or will hold once granted.
    token: int
    #: When it was asked for (UTC).
    requested_at: datetime | None
    #: The lockstream server that serves it.
    instance: str
    #: The client's address as that server saw it.
    peer: str
    #: What it publishes (`value`, or its latest `set_value`); b"" if nothing.
    value: bytes
    #: A semaphore request's weight; 0 for the lock modes.
    weight: int


@dataclass(frozen=True)
class LockDescription:
    """Who holds a lock and who waits for it, first in line first."""

    name: str
    holders: tuple[LockRequestInfo, ...]
    waiters: tuple[LockRequestInfo, ...]
    #: A semaphore's limit and the part of it its holders use; both 0 for a lock.
    limit: int
    used_weight: int


def _info(wire: pb.LockRequestInfo) -> LockRequestInfo:
    return LockRequestInfo(
        mode=_MODES_FROM_WIRE.get(wire.mode),
        owner=wire.owner,
        token=wire.fencing_token,
        requested_at=wire.requested_at.ToDatetime(tzinfo=timezone.utc) if wire.HasField("requested_at") else None,
        instance=wire.instance,
        peer=wire.peer,
        value=wire.value,
        weight=wire.weight,
    )


def description(wire: pb.DescribeLockResponse) -> LockDescription:
    return LockDescription(
        name=wire.name,
        holders=tuple(map(_info, wire.holders)),
        waiters=tuple(map(_info, wire.waiters)),
        limit=wire.limit,
        used_weight=wire.used_weight,
    )
