"""What a held Lock and a Leadership share: whether it is in doubt or lost, the requests to give it
back, letting it go (release, resign) and what is left to do once it went (raise LockLost, or note
the loss on the block's own exception), and holding it for a block."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar, Generic, TypeVar

from lockstream._callbacks import call_safely
from lockstream.errors import ClientClosed, LockLost, NotHeld
from lockstream.v1 import lockstream_pb2 as pb

H = TypeVar("H", bound="Held")


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


class Held:
    """A held lock or a won election (a Lock, a Leadership), from the moment it is granted until it
    is let go (released, resigned) or lost. Each kind says what it is in messages (`_WHAT`), what
    letting it go is called (`_LET_GO`) and what its requests to give it back are called in the
    log (`_ASKED`), and answers the hooks below from what it stands on."""

    _WHAT: ClassVar[str]
    _LET_GO: ClassVar[str]
    _ASKED: ClassVar[str]

    def __init__(self, name: str) -> None:
        #: Its name: the lock's (a multi-lock's names joined with "+"), or the election's.
        self.name: str = name
        #: Set when it is lost (not when it is let go).
        self.lost = asyncio.Event()
        #: Why it was lost, once `lost` is set.
        self.error: LockLost | None = None
        self._in_doubt = False
        #: Whether letting it go began (release, resign, or closing the client).
        self._letting_go = False
        #: Set once someone asked for it back; `_asked` is the request (the later one, once a
        #: deadline was added).
        self._asked_event = asyncio.Event()
        self._asked: RevokeRequest | None = None
        self._on_lost: list[Callable[[LockLost], object]] = []
        self._on_asked: list[Callable[[RevokeRequest], object]] = []
        self._on_doubt: list[Callable[[bool], object]] = []

    # -- what each kind answers from what it stands on ---------------------------------------------

    def _holds(self) -> bool:
        """Whether it is still held: neither let go (nor being let go) nor lost."""
        raise NotImplementedError

    def _closing(self) -> bool:
        """Whether the client is being closed."""
        raise NotImplementedError

    def _over(self) -> asyncio.Event:
        """Set once what holds it is over (let go, or lost)."""
        raise NotImplementedError

    def _send_let_go(self) -> None:
        """Asks the server to let it go."""
        raise NotImplementedError

    # -- what they share ---------------------------------------------------------------------------

    @property
    def in_doubt(self) -> bool:
        """True while nobody can vouch for it: the stream holding it broke and is being resumed,
        or the server lost contact with its coordination back end. It may still be held, or
        `lost` may follow; a careful holder (or leader) pauses what only the holder may do."""
        return self._in_doubt

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` when it is lost (at once if it was), on the event loop."""
        if self.error is not None:
            call_safely("lost", callback, self.error)
        else:
            self._on_lost.append(callback)

    def on_in_doubt(self, callback: Callable[[bool], object]) -> None:
        """Calls `callback(True)` when it falls in doubt, `callback(False)` when it is confirmed
        again (see `in_doubt`)."""
        self._on_doubt.append(callback)

    def _on_asked_back(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks for it back (at once if they did): a
        cooperative request (`force_at` None), and again if a later one adds a deadline."""
        if self._asked is not None:
            call_safely(self._ASKED, callback, self._asked)
        if self._asked is None or self._asked.force_at is None:
            self._on_asked.append(callback)

    async def _let_go(self) -> None:
        """Lets it go and waits for the server to confirm. Idempotent. Raises LockLost if it was
        lost first."""
        if not self._letting_go:
            if self.error is not None:
                raise self.error
            if not self._holds():
                raise self._not_held()
            self._start_letting_go()
        # Cancelling the wait does not stop letting it go.
        await self._over().wait()
        if self.error is not None:
            raise self.error

    def _start_letting_go(self) -> None:
        self._letting_go = True
        self._send_let_go()

    def _check_held(self) -> None:
        """Raises unless it can still be used: LockLost once lost, ClientClosed while the client
        is being closed, NotHeld once let go."""
        if self.error is not None:
            raise self.error
        if self._closing():
            raise ClientClosed(self.name)
        if not self._holds():
            raise self._not_held()

    def _not_held(self) -> NotHeld:
        return NotHeld(self.name, f"{self._WHAT} was {self._LET_GO}" if self._letting_go
                       else f"{self._WHAT} is not held")

    def _doubt(self, doubt: bool) -> None:
        if self._in_doubt == doubt or self.error is not None:
            return
        self._in_doubt = doubt
        for callback in self._on_doubt:
            call_safely("in-doubt", callback, doubt)

    def _asked_back(self, message: pb.AcquireRevokeRequested) -> None:
        force_at = (message.force_at.ToDatetime(tzinfo=timezone.utc)
                    if message.HasField("force_at") else None)
        # At most two: a cooperative request, then the deadline a later one adds to it. Anything
        # else (a resumed stream's report of what was told already) is no news.
        if self._asked is not None and (self._asked.force_at is not None or force_at is None):
            return
        self._asked = RevokeRequest(message.reason, force_at)
        self._asked_event.set()
        for callback in self._on_asked:
            call_safely(self._ASKED, callback, self._asked)

    def _lose(self, error: LockLost) -> None:
        if self.error is not None:
            return
        self.error = error
        self._in_doubt = False
        self.lost.set()
        for callback in self._on_lost:
            call_safely("lost", callback, error)
        self._on_lost.clear()

    async def __aenter__(self: H) -> H:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: object) -> None:
        """Lets it go (release, resign). If the block finished but it was lost while the block
        ran, raises LockLost: the work was not protected all along. If the block raised, that
        propagates, with a note that says it was lost too."""
        try:
            await self._let_go()
        except LockLost as lost:
            if error is None:
                raise
            note_loss(error, lost, self._WHAT)



class Holding(Generic[H]):
    """What Client.lock and Client.campaign return: awaitable (the Lock, or the Leadership once
    elected), and an async context manager that holds it for its block and lets it go (release,
    resign) when the block leaves."""

    def __init__(self, granting: Coroutine[Any, Any, H]) -> None:
        self._granting = granting
        self._held: H | None = None

    def __await__(self) -> Generator[Any, None, H]:
        held: H = yield from self._granting.__await__()
        return held

    async def __aenter__(self) -> H:
        self._held = await self._granting
        return self._held

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: object) -> None:
        if self._held is not None:
            await self._held.__aexit__(kind, error, traceback)
