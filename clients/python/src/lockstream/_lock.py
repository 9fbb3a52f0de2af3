"""A held lock as its holder sees it: its token, whether it is held, and what its holder can do with
it (release, set_value, downgrade); being in doubt or lost, and the requests to give it back, as a
Leadership's (_held)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import grpc

from lockstream import _checks
from lockstream._checks import Mode
from lockstream._held import Held, RevokeRequest
from lockstream.errors import LockError
from lockstream.v1 import lockstream_pb2 as pb


class LockSession(Protocol):
    """What a Lock needs of its session (a _session.Session): whether it is being closed, and
    sending a message on it."""

    @property
    def closing(self) -> bool: ...

    def send(self, message: pb.SessionRequest) -> bool: ...


class LockRequest(Protocol):
    """What a Lock needs of the request it was granted to (a _requests.Request): its id, name and
    mode, whether it is held, when it ended, the set_value and downgrade messages awaiting an
    answer, and starting its release."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def mode(self) -> Mode: ...

    @property
    def held(self) -> bool: ...

    @property
    def ended(self) -> asyncio.Event: ...

    @property
    def pending(self) -> list[tuple[str, pb.SessionRequest, asyncio.Future[None]]]: ...

    def start_release(self) -> pb.SessionRequest: ...


class Lock(Held):
    """A held lock, from the moment `acquire` returns until `release()` or its loss.

    `token` is its fencing token: larger for every later holder of the lock. Pass it to what the
    lock protects, so that it can refuse a holder whose lock was lost. `lost` is set if the lock
    is lost before it is released (never after a release).
    """

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    _WHAT = "the lock"
    _LET_GO = "released"
    _ASKED = "revoke"

    def __init__(self, session: LockSession, request: LockRequest, acquired: pb.AcquireAcquired) -> None:
        super().__init__(request.name)
        self._session = session
        self._request = request
        #: The fencing token (for a multi-lock: its first lock's).
        self.token: int = acquired.fencing_token
        #: A multi-lock's token for each of its locks, by name, in the order asked for; empty for
        #: a single lock (see `token`).
        self.tokens: dict[str, int] = {token.name: token.fencing_token for token in acquired.tokens}
        #: How the lock is held: as asked, or "read" once a write lock was downgraded.
        self.mode: Mode = request.mode
        #: Set once someone asked for the lock back; `revoke_reason` and `revoke` say more.
        self.revoke_requested: asyncio.Event = self._asked_event
        self._downgraded = False

    def __repr__(self) -> str:
        state = "lost" if self.error else "held" if self.held else "released"
        return f"<lockstream.aio.Lock {self.name!r} {self.mode} token={self.token} {state}>"

    @property
    def held(self) -> bool:
        """Whether the lock is still held: neither released (nor being released) nor lost."""
        return self._request.held

    @property
    def revoke(self) -> RevokeRequest | None:
        """The request to give the lock back, once `revoke_requested` is set (None before); the
        later request once a deadline was added."""
        return self._asked

    @property
    def revoke_reason(self) -> str:
        """Why the lock was asked back, once `revoke_requested` is set ("" before); the later
        request's reason once a deadline was added."""
        return self._asked.reason if self._asked is not None else ""

    def on_revoke_requested(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks for the lock back (at once if they did):
        a cooperative request (`force_at` None), and again if a later one adds a deadline."""
        self._on_asked_back(callback)

    async def release(self) -> None:
        """Releases the lock and waits for the server to confirm. Idempotent. Raises LockLost if
        the lock was lost first: the work done under it may not have been exclusive."""
        await self._let_go()

    async def set_value(self, value: bytes | str) -> None:
        """Publishes `value` with the lock (a str as UTF-8; at most 1024 bytes; empty clears it):
        what DescribeLock and WatchLock show for this holder. Returns once it is published."""
        data = _checks.check_value(self.name, value)
        await self._ask("value_set", pb.SessionRequest(
            set_value=pb.SessionSetValue(request_id=self._request.id, value=data)))

    async def downgrade(self) -> None:
        """Turns a write lock into a read lock in one step: the token stays, nobody is granted
        in between, and readers queued behind it that waited only for it are granted. Raises
        LockError (FAILED_PRECONDITION) for a mutex, read or semaphore lock, which stays held:
        nothing is upgraded (release it and acquire a write lock instead)."""
        if self._downgraded:
            return
        if self.mode != "write":
            raise LockError(self.name, grpc.StatusCode.FAILED_PRECONDITION,
                            f"only a write lock can be downgraded, not a {self.mode} lock")
        await self._ask("downgraded", pb.SessionRequest(
            downgrade=pb.SessionDowngrade(request_id=self._request.id)))

    async def _ask(self, answer: str, message: pb.SessionRequest) -> None:
        self._check_held()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Nobody may be left waiting for it (a cancelled caller): never an unretrieved exception.
        done.add_done_callback(lambda future: future.cancelled() or future.exception())
        self._request.pending.append((answer, message, done))
        self._session.send(message)
        await done

    def _acknowledged(self, answer: str) -> None:
        if answer == "downgraded":
            self.mode, self._downgraded = "read", True

    # What a Held asks of its kind.
    def _holds(self) -> bool:
        return self._request.held

    def _closing(self) -> bool:
        return self._session.closing

    def _over(self) -> asyncio.Event:
        return self._request.ended

    def _send_let_go(self) -> None:
        self._session.send(self._request.start_release())
