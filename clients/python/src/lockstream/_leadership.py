"""A won election as its leader sees it: its term, whether it still leads, is in doubt or was
deposed, the requests to step down, and what the leader can do (resign, proclaim). Loss is told as
a Lock tells it: `lost`, `error`, `on_lost`, and LockLost on leaving a block that lost it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timezone
from typing import Protocol

from lockstream import _checks
from lockstream._callbacks import call_safely
from lockstream._lock import RevokeRequest, note_loss
from lockstream.errors import ClientClosed, LockLost, NotHeld
from lockstream.v1 import lockstream_pb2 as pb


class LeaderCampaign(Protocol):
    """What a Leadership needs of the campaign that won it (a _campaign.Campaign): its name,
    whether it still leads, whether the client is being closed, when it is over, starting its
    resignation, and proclaiming a value for a term."""

    @property
    def name(self) -> str: ...

    @property
    def leading(self) -> bool: ...

    @property
    def closing(self) -> bool: ...

    @property
    def done(self) -> asyncio.Event: ...

    def start_resign(self) -> None: ...

    async def proclaim(self, term: int, value: bytes) -> None: ...


class Leadership:
    """A won election, from the moment the campaign enters its block (or returns) until `resign()`
    or its loss.

    `term` is the leader's fencing token: larger for every later leader of the election. Pass it
    to what the leader writes to, so that it can refuse a deposed leader. `lost` is set if the
    leadership is lost before it is resigned (never after a resignation): the server deposed it
    (Resign through any client, a revocation's deadline, the loss of its back end's session), or
    its stream broke and could not be resumed.
    """

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    def __init__(self, campaign: LeaderCampaign, term: int) -> None:
        self._campaign = campaign
        #: The election's name.
        self.name: str = campaign.name
        #: The term: the leader's fencing token.
        self.term: int = term
        #: Set when the leadership is lost (not when it is resigned).
        self.lost = asyncio.Event()
        #: Why it was lost, once `lost` is set.
        self.error: LockLost | None = None
        #: Set once someone asked the leader to step down (RevokeLock on the election's name).
        self.resign_requested = asyncio.Event()
        self.resign_request: RevokeRequest | None = None
        self._in_doubt = False
        self._resigning = False
        self._on_lost: list[Callable[[LockLost], object]] = []
        self._on_resign: list[Callable[[RevokeRequest], object]] = []
        self._on_doubt: list[Callable[[bool], object]] = []

    def __repr__(self) -> str:
        state = "lost" if self.error else "leading" if self.leading else "resigned"
        return f"<lockstream.aio.Leadership {self.name!r} term={self.term} {state}>"

    @property
    def leading(self) -> bool:
        """Whether it still leads: neither resigned (nor resigning) nor lost."""
        return self._campaign.leading

    @property
    def in_doubt(self) -> bool:
        """True while nobody can vouch for the leadership: its stream broke and is being resumed,
        or the server lost contact with its back end. It may still lead, or `lost` may follow; a
        careful leader pauses what only the leader may do."""
        return self._in_doubt

    @property
    def resign_reason(self) -> str:
        """Why the leader was asked to step down, once `resign_requested` is set ("" before)."""
        return self.resign_request.reason if self.resign_request is not None else ""

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` when the leadership is lost (at once if it was), on the event loop."""
        if self.error is not None:
            call_safely("lost", callback, self.error)
        else:
            self._on_lost.append(callback)

    def on_resign_requested(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks the leader to step down (at once if they
        did): a cooperative request (`force_at` None), and again if a later one adds a deadline."""
        if self.resign_request is not None:
            call_safely("resign", callback, self.resign_request)
        if self.resign_request is None or self.resign_request.force_at is None:
            self._on_resign.append(callback)

    def on_in_doubt(self, callback: Callable[[bool], object]) -> None:
        """Calls `callback(True)` when the leadership falls in doubt, `callback(False)` when it is
        confirmed again (see `in_doubt`)."""
        self._on_doubt.append(callback)

    async def resign(self) -> None:
        """Steps down and waits for the server to confirm; the next candidate is elected. Idempotent.
        Raises LockLost if the leadership was lost first: the work done as leader may not have been
        the only leader's."""
        if not self._resigning:
            if self.error is not None:
                raise self.error
            if not self._campaign.leading:
                raise NotHeld(self.name, "the leadership is not held")
            self._start_resign()
        # Cancelling the wait does not stop the resignation.
        await self._campaign.done.wait()
        if self.error is not None:
            raise self.error

    def _start_resign(self) -> None:
        self._resigning = True
        self._campaign.start_resign()

    async def proclaim(self, value: bytes | str) -> None:
        """Replaces the leader's value (a str as UTF-8; at most 1024 bytes): observers are told it
        (Proclaimed), and `leader()` shows it. Raises NotHeld if the term is over."""
        data = _checks.check_value(self.name, value)
        if self.error is not None:
            raise self.error
        if self._campaign.closing:
            raise ClientClosed(self.name)
        if not self._campaign.leading:
            raise NotHeld(self.name, "the leadership was resigned" if self._resigning
                          else "the leadership is not held")
        await self._campaign.proclaim(self.term, data)

    def _doubt(self, doubt: bool) -> None:
        if self._in_doubt == doubt or self.error is not None:
            return
        self._in_doubt = doubt
        for callback in self._on_doubt:
            call_safely("in-doubt", callback, doubt)

    def _resign_requested(self, message: pb.AcquireRevokeRequested) -> None:
        force_at = (message.force_at.ToDatetime(tzinfo=timezone.utc)
                    if message.HasField("force_at") else None)
        # At most two: a cooperative request, then the deadline a later one adds to it.
        if self.resign_request is not None and (self.resign_request.force_at is not None or force_at is None):
            return
        self.resign_request = RevokeRequest(message.reason, force_at)
        self.resign_requested.set()
        for callback in self._on_resign:
            call_safely("resign", callback, self.resign_request)

    def _lose(self, error: LockLost) -> None:
        if self.error is not None:
            return
        self.error = error
        self._in_doubt = False
        self.lost.set()
        for callback in self._on_lost:
            call_safely("lost", callback, error)
        self._on_lost.clear()

    async def __aenter__(self) -> Leadership:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: object) -> None:
        """Resigns. If the block finished but the leadership was lost while it ran, raises
        LockLost: it did not lead all along. If the block raised, that propagates, with a note
        that says the leadership was lost too."""
        try:
            await self.resign()
        except LockLost as lost:
            if error is None:
                raise
            note_loss(error, lost, "the leadership")
