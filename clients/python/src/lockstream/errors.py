"""What can go wrong with a lock (or an election, or a guarded record), as exceptions carrying the
gRPC status the server gave."""

from __future__ import annotations

import grpc

_CODES = {code.value[0]: code for code in grpc.StatusCode}


def status_code(code: int | grpc.StatusCode) -> grpc.StatusCode:
    """The grpc.StatusCode for a numeric google.rpc.Code (UNKNOWN for one gRPC does not know)."""
    return code if isinstance(code, grpc.StatusCode) else _CODES.get(code, grpc.StatusCode.UNKNOWN)


#: Lock names longer than this are shortened where a message names them (`.lock` keeps it whole).
_NAME_SHOWN_MAX = 100


def printable(text: str) -> str:
    """`text` with control characters, lone surrogates and other unprintable code points
    escaped as Python would write them (\\n, \\x1b, \\u202e), so that it prints as one honest line."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def _quoted(name: str) -> str:
    """The name in quotes, as messages show it: a long one shortened, saying how long it is."""
    if len(name) <= _NAME_SHOWN_MAX:
        return f'"{name}"'
    return f'"{name[:_NAME_SHOWN_MAX]}..." ({len(name)} characters)'


class LockError(Exception):
    """A lock request failed. `code` is its gRPC status (a grpc.StatusCode), `message` the
    server's words (or the client's, for what only the client saw), `lock` the lock's name.
    str() names the lock once (shortened if long) and escapes control characters."""

    def __init__(self, lock: str, code: grpc.StatusCode, message: str) -> None:
        # The server's messages name the lock already (in quotes); name it only where they do
        # not, and shorten a long name either way.
        if not lock:
            about = message
        elif f'"{lock}"' in message:
            about = message.replace(f'"{lock}"', _quoted(lock), 1)
        else:
            about = f"lock {_quoted(lock)}: {message}"
        super().__init__(printable(f"{code.name}: {about}"))
        self.lock = lock
        self.code = code
        self.message = message


class InvalidArgument(LockError, ValueError):
    """The request is malformed (a bad name, value, mode, timeout, ...): refused by the client
    before anything is sent, or by the server (INVALID_ARGUMENT). Also a ValueError. Nothing
    else of the client is affected."""

    def __init__(self, lock: str, message: str) -> None:
        super().__init__(lock, grpc.StatusCode.INVALID_ARGUMENT, message)


class LockTimeout(LockError):
    """The lock was not granted within the wait timeout (for try_lock, or a timeout of 0: it was
    not free). Nothing is left queued on the caller's behalf."""


class LockLost(LockError):
    """A held lock was lost before it was released: the server took it away (ABORTED), or the
    stream holding it broke and could not be resumed. Someone else may hold it now: stop the
    work it protects."""


class PermissionDenied(LockError):
    """The server's access policy does not let this caller take the lock (PERMISSION_DENIED)."""


class ClientClosed(LockError):
    """The client was closed."""

    def __init__(self, lock: str = "") -> None:
        super().__init__(lock, grpc.StatusCode.CANCELLED, "the client was closed")


class NotHeld(LockError):
    """The lock was released (or has not been granted) before the call; for an election, the term
    named (proclaim, resign) is not the current leader's, or the leadership is over; for a guarded
    record's write, the fencing token named is not a current holder's (nothing was written)."""

    def __init__(self, lock: str, message: str = "the lock is not held") -> None:
        super().__init__(lock, grpc.StatusCode.FAILED_PRECONDITION, message)


class RevisionConflict(LockError):
    """A guarded record's write conditioned on a revision (`expected_revision`) found the record at
    another: someone wrote it since it was read (ABORTED). Nothing was written."""

    def __init__(self, lock: str, message: str) -> None:
        super().__init__(lock, grpc.StatusCode.ABORTED, message)


def error_for(lock: str, code: int | grpc.StatusCode, message: str) -> LockError:
    """The exception for a request that ended with `code` before it was granted."""
    status = status_code(code)
    if status == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(lock, message)
    kind: type[LockError] = {
        grpc.StatusCode.DEADLINE_EXCEEDED: LockTimeout,
        grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    }.get(status, LockError)
    return kind(lock, status, message)


def lost_error(lock: str, code: int | grpc.StatusCode, message: str) -> LockLost:
    """The exception for a held lock that ended with `code` without the holder's release: the
    server's word for ABORTED (it took the lock away), else why the client must assume so."""
    status = status_code(code)
    if status == grpc.StatusCode.ABORTED:
        return LockLost(lock, status, message)
    return LockLost(lock, status, f'lock "{lock}" must be assumed lost: {message or status.name}')


__all__ = [
    "ClientClosed",
    "InvalidArgument",
    "LockError",
    "LockLost",
    "LockTimeout",
    "NotHeld",
    "PermissionDenied",
    "RevisionConflict",
    "error_for",
    "lost_error",
    "printable",
    "status_code",
]
