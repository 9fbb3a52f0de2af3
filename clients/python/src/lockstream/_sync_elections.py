"""The blocking client's elections: a Leadership held from any thread (its loss a threading.Event,
its callbacks on the client's callback thread: a blocking Lock's, see _sync_held), and an
election's events as an iterator, both served by the asyncio client on the blocking client's event
loop thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from lockstream import aio
from lockstream._sync_held import Runner, SyncHeld
from lockstream.errors import ClientClosed


class Leadership(SyncHeld[aio.Leadership]):
    """A won election, from the moment `Client.campaign` returns until `resign()` or its loss.

    `term` is the leader's fencing token: larger for every later leader. `lost` (a
    threading.Event) is set if the leadership is lost before it is resigned. Use it as a context
    manager to resign at the end of the block. Its methods may be called from any thread.
    """

    def __init__(self, client: Runner, leadership: aio.Leadership) -> None:
        super().__init__(client, leadership)
        #: The term: the leader's fencing token.
        self.term: int = leadership.term
        #: Set when someone asked the leader to step down (see `resign_reason`).
        self.resign_requested: threading.Event = self._asked_event

    def __repr__(self) -> str:
        return repr(self._held).replace("lockstream.aio.Leadership", "lockstream.Leadership")

    def on_resign_requested(self, callback: Callable[[aio.RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks the leader to step down (at once if they
        did), on the client's callback thread; again if a later request adds a deadline."""
        self._on_asked_back(callback)

    @property
    def leading(self) -> bool:
        """Whether it still leads: neither resigned nor lost."""
        return self._held.leading

    @property
    def resign_reason(self) -> str:
        """Why the leader was asked to step down, once `resign_requested` is set."""
        return self._held.resign_reason

    def resign(self) -> None:
        """Steps down and waits for the server to confirm. Idempotent (closing the client resigns
        too). Raises LockLost if the leadership was lost first."""
        self._let_go()

    def proclaim(self, value: bytes | str) -> None:
        """Replaces the leader's value: observers are told it. NotHeld if the term is over."""
        self._client._run(lambda: self._held.proclaim(value))


class Events:
    """What `Client.observe` returns: `for event in client.observe(name):` yields the election's
    events until `close()` (or the end of `with client.observe(name) as events:`) or the client's.
    An interrupted wait (KeyboardInterrupt) does not end it."""

    def __init__(self, client: Runner, observation: aio.Observation) -> None:
        self._client = client
        self._observation = observation
        #: The election's name.
        self.name = observation.name

    def __repr__(self) -> str:
        return repr(self._observation).replace("lockstream.aio.Observation", "lockstream.Events")

    def __iter__(self) -> Events:
        return self

    def __next__(self) -> aio.ElectionEvent:
        told = self._client._run(self._next)
        if told is None:
            raise StopIteration
        return told

    async def _next(self) -> aio.ElectionEvent | None:
        # StopAsyncIteration cannot cross a future: the end is None.
        try:
            return await self._observation.__anext__()
        except StopAsyncIteration:
            return None

    def close(self) -> None:
        """Ends the observation. Idempotent."""
        try:
            self._client._run(self._observation.aclose)
        except ClientClosed:
            pass  # ended by closing the client

    def __enter__(self) -> Events:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
