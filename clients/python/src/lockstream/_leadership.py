"""A won election as its leader sees it: its term, whether it still leads, and what the leader can
do (resign, proclaim). Doubt, loss and the requests to step down are told as a held Lock tells them
(_held): `in_doubt`, `lost`, `error`, `on_lost`, and LockLost on leaving a block that lost it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from lockstream import _checks
from lockstream._held import Held, RevokeRequest


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


class Leadership(Held):
    """A won election, from the moment the campaign enters its block (or returns) until `resign()`
    or its loss.

    `term` is the leader's fencing token: larger for every later leader of the election. Pass it
    to what the leader writes to, so that it can refuse a deposed leader. `lost` is set if the
    leadership is lost before it is resigned (never after a resignation): the server deposed it
    (Resign through any client, a revocation's deadline, the loss of its back end's session), or
    its stream broke and could not be resumed.
    """

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    _WHAT = "the leadership"
    _LET_GO = "resigned"
    _ASKED = "resign"

    def __init__(self, campaign: LeaderCampaign, term: int) -> None:
        super().__init__(campaign.name)
        self._campaign = campaign
        #: The term: the leader's fencing token.
        self.term: int = term
        #: Set once someone asked the leader to step down (RevokeLock on the election's name).
        self.resign_requested: asyncio.Event = self._asked_event

    def __repr__(self) -> str:
        state = "lost" if self.error else "leading" if self.leading else "resigned"
        return f"<lockstream.aio.Leadership {self.name!r} term={self.term} {state}>"

    @property
    def leading(self) -> bool:
        """Whether it still leads: neither resigned (nor resigning) nor lost."""
        return self._campaign.leading

    @property
    def resign_request(self) -> RevokeRequest | None:
        """The request to step down, once `resign_requested` is set (None before); the later
        request once a deadline was added."""
        return self._asked

    @property
    def resign_reason(self) -> str:
        """Why the leader was asked to step down, once `resign_requested` is set ("" before)."""
        return self._asked.reason if self._asked is not None else ""

    def on_resign_requested(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks the leader to step down (at once if they
        did): a cooperative request (`force_at` None), and again if a later one adds a deadline."""
        self._on_asked_back(callback)

    async def resign(self) -> None:
        """Steps down and waits for the server to confirm; the next candidate is elected. Idempotent.
        Raises LockLost if the leadership was lost first: the work done as leader may not have been
        the only leader's."""
        await self._let_go()

    async def proclaim(self, value: bytes | str) -> None:
        """Replaces the leader's value (a str as UTF-8; at most 1024 bytes): observers are told it
        (Proclaimed), and `leader()` shows it. Raises NotHeld if the term is over."""
        data = _checks.check_value(self.name, value)
        self._check_held()
        await self._campaign.proclaim(self.term, data)

    # What a Held asks of its kind.
    def _holds(self) -> bool:
        return self._campaign.leading

    def _closing(self) -> bool:
        return self._campaign.closing

    def _over(self) -> asyncio.Event:
        return self._campaign.done

    def _send_let_go(self) -> None:
        self._campaign.start_resign()
