"""How the client's Python values are written in lockstream.v1's messages: lock modes and durations."""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration

from lockstream.v1 import lockstream_pb2 as pb

MODES: dict[str, pb.LockMode] = {
    "mutex": pb.LOCK_MODE_MUTEX,
    "read": pb.LOCK_MODE_READ,
    "write": pb.LOCK_MODE_WRITE,
    "semaphore": pb.LOCK_MODE_SEMAPHORE,
}


def duration(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration
