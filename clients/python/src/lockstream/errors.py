"""What can go wrong with a lock, as exceptions carrying the server's status."""

from __future__ import annotations

import grpc

_CODES = {code.value[0]: code for code in grpc.StatusCode}


class LockError(Exception):
    """A lock request ended with an error: `code` is its gRPC status, `message` the server's words."""

    def __init__(self, lock: str, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f'lock "{lock}": {code.name}: {message}')
        self.lock = lock
        self.code = code
        self.message = message


class LockTimeout(LockError):
    """The lock was not granted within the wait timeout (try_lock: it was held)."""


class LockLost(LockError):
    """A held lock was lost: whatever it protected may be held by someone else now."""


class PermissionDenied(LockError):
    """The caller may not take the lock."""


class ClientClosed(LockError):
    """The client was closed."""

    def __init__(self, lock: str = "") -> None:
        super().__init__(lock, grpc.StatusCode.CANCELLED, "the client was closed")


class NotHeld(LockError):
    """The lock was released (or lost) before the call."""

    def __init__(self, lock: str) -> None:
        super().__init__(lock, grpc.StatusCode.FAILED_PRECONDITION, "the lock is not held")


def error_for(lock: str, code: int | grpc.StatusCode, message: str) -> LockError:
    """The exception for a request that ended with `code`."""
    status = code if isinstance(code, grpc.StatusCode) else _CODES.get(code, grpc.StatusCode.UNKNOWN)
    kind: type[LockError] = {
        grpc.StatusCode.DEADLINE_EXCEEDED: LockTimeout,
        grpc.StatusCode.ABORTED: LockLost,
        grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    }.get(status, LockError)
    return kind(lock, status, message)
