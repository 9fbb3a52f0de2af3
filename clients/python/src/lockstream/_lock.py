"""A held lock as its holder sees it: its token, whether it is held, in doubt or lost, the
requests to give it back, and what its holder can do with it (release, set_value, downgrade)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

import grpc

from lockstream import _checks
from lockstream._callbacks import call_safely
from lockstream._checks import Mode
from lockstream.errors import ClientClosed, LockError, LockLost, NotHeld
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


def note_loss(error: BaseException, lost: LockLost, what: str = "the lock") -> None:
    """Says on the exception that leaves a lock's block that the lock (`what`) was lost as well (a
    note in its traceback, Python 3.11 and later): the block's own exception is the one raised."""
    add_note = getattr(error, "add_note", None)
    if error is not lost and add_note is not None:
        add_note(f"lockstream: {what} was lost while the block ran: {lost}")


@dataclass(frozen=True)
class RevokeRequest:
    """Someone asked the holder to release the lock (RevokeLock)."""

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    reason: str
    #: When the lock is taken away if it is still held; None: the request is cooperative only.
    force_at: datetime | None


class Lock:
    """A held lock, from the moment `acquire` returns until `release()` or its loss.

    `token` is its fencing token: larger for every later holder of the lock. Pass it to what the
    lock protects, so that it can refuse a holder whose lock was lost. `lost` is set if the lock
    is lost before it is released (never after a release).
    """

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    def __init__(self, session: LockSession, request: LockRequest, acquired: pb.AcquireAcquired) -> None:
        self._session = session
        self._request = request
        #: The lock's name (a multi-lock's names joined with "+").
        self.name: str = request.name
        #: The fencing token (for a multi-lock: its first lock's).
        self.token: int = acquired.fencing_token
        #: A multi-lock's token for each of its locks, by name, in the order asked for; empty for
        #: a single lock (see `token`).
        self.tokens: dict[str, int] = {token.name: token.fencing_token for token in acquired.tokens}
        #: How the lock is held: as asked, or "read" once a write lock was downgraded.
        self.mode: Mode = request.mode
        #: Set when the lock is lost (not when it is released).
        self.lost = asyncio.Event()
        #: Why it was lost, once `lost` is set.
        self.error: LockLost | None = None
        #: Set once someone asked for the lock back; `revoke_reason` and `revoke` say more.
        self.revoke_requested = asyncio.Event()
        self.revoke: RevokeRequest | None = None
        self._in_doubt = False
        self._downgraded = False
        self._releasing = False
        self._on_lost: list[Callable[[LockLost], object]] = []
        self._on_revoke: list[Callable[[RevokeRequest], object]] = []
        self._on_doubt: list[Callable[[bool], object]] = []

    def __repr__(self) -> str:
        state = "lost" if self.error else "held" if self.held else "released"
        return f"<lockstream.aio.Lock {self.name!r} {self.mode} token={self.token} {state}>"

    @property
    def held(self) -> bool:
        """Whether the lock is still held: neither released (nor being released) nor lost."""
        return self._request.held

    @property
    def in_doubt(self) -> bool:
        """True while nobody can vouch for the lock: the stream holding it broke and is being
        resumed, or the server lost contact with its coordination back end. It may still be held,
        or `lost` may follow; a careful holder pauses writes to what the lock protects."""
        return self._in_doubt

    @property
    def revoke_reason(self) -> str:
        """Why the lock was asked back, once `revoke_requested` is set ("" before); the later
        request's reason once a deadline was added."""
        return self.revoke.reason if self.revoke is not None else ""

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` when the lock is lost (at once if it was), on the event loop."""
        if self.error is not None:
            call_safely("lost", callback, self.error)
        else:
            self._on_lost.append(callback)

    def on_revoke_requested(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks for the lock back (at once if they did):
        a cooperative request (`force_at` None), and again if a later one adds a deadline."""
        if self.revoke is not None:
            call_safely("revoke", callback, self.revoke)
        if self.revoke is None or self.revoke.force_at is None:
            self._on_revoke.append(callback)

    def on_in_doubt(self, callback: Callable[[bool], object]) -> None:
        """Calls `callback(True)` when the lock falls in doubt, `callback(False)` when it is
        confirmed held again (see `in_doubt`)."""
        self._on_doubt.append(callback)

    async def release(self) -> None:
        """Releases the lock and waits for the server to confirm. Idempotent. Raises LockLost if
        the lock was lost first: the work done under it may not have been exclusive."""
        if not self._releasing:
            if self.error is not None:
                raise self.error
            if not self._request.held:
                raise NotHeld(self.name)
            self._start_release()
        # Cancelling the wait does not stop the release.
        await self._request.ended.wait()
        if self.error is not None:
            raise self.error

    def _start_release(self) -> None:
        self._releasing = True
        self._session.send(self._request.start_release())

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
        if self.error is not None:
            raise self.error
        if self._session.closing:
            raise ClientClosed(self.name)
        if not self._request.held:
            raise NotHeld(self.name, "the lock was released" if self._releasing else "the lock is not held")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Nobody may be left waiting for it (a cancelled caller): never an unretrieved exception.
        done.add_done_callback(lambda future: future.cancelled() or future.exception())
        self._request.pending.append((answer, message, done))
        self._session.send(message)
        await done

    def _acknowledged(self, answer: str) -> None:
        if answer == "downgraded":
            self.mode, self._downgraded = "read", True

    def _doubt(self, doubt: bool) -> None:
        if self._in_doubt == doubt or self.error is not None:
            return
        self._in_doubt = doubt
        for callback in self._on_doubt:
            call_safely("in-doubt", callback, doubt)

    def _revoke(self, message: pb.AcquireRevokeRequested) -> None:
        force_at = (message.force_at.ToDatetime(tzinfo=timezone.utc)
                    if message.HasField("force_at") else None)
        # At most two: a cooperative request, then the deadline a later RevokeLock adds to it.
        # Anything else (a resumed session's report of what was told already) is no news.
        if self.revoke is not None and (self.revoke.force_at is not None or force_at is None):
            return
        self.revoke = RevokeRequest(message.reason, force_at)
        self.revoke_requested.set()
        for callback in self._on_revoke:
            call_safely("revoke", callback, self.revoke)

    def _lose(self, error: LockLost) -> None:
        if self.error is not None:
            return
        self.error = error
        self._in_doubt = False
        self.lost.set()
        for callback in self._on_lost:
            call_safely("lost", callback, error)
        self._on_lost.clear()

    async def __aenter__(self) -> Lock:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: object) -> None:
        """Releases the lock. If the block finished but the lock was lost while it ran, raises
        LockLost: the work was not protected all along. If the block raised, that propagates,
        with a note that says the lock was lost too."""
        try:
            await self.release()
        except LockLost as lost:
            if error is None:
                raise
            note_loss(error, lost)
