"""The blocking client's elections: a Leadership held from any thread (its loss a threading.Event,
its callbacks on the client's callback thread, as a blocking Lock's), and an election's events as
an iterator, both served by the asyncio client on the blocking client's event loop thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from lockstream import aio
from lockstream._held import note_loss
from lockstream.errors import ClientClosed, LockError, LockLost

T = TypeVar("T")


class Runner(Protocol):
    """What the blocking elections need of their client (a _sync.Client): running a coroutine on
    its loop and waiting for it, calling a callback on its callback thread, and running a function
    on its loop."""

    def _run(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T: ...

    def _dispatch(self, callback: Callable[..., object], *args: object) -> None: ...

    def _run_soon(self, call: Callable[[], object]) -> None: ...


class Leadership:
    """A won election, from the moment `Client.campaign` returns until `resign()` or its loss.

    `term` is the leader's fencing token: larger for every later leader. `lost` (a
    threading.Event) is set if the leadership is lost before it is resigned. Use it as a context
    manager to resign at the end of the block. Its methods may be called from any thread.
    """

    def __init__(self, client: Runner, leadership: aio.Leadership) -> None:
        # Made on the client's event loop thread: no event can be missed.
        self._client = client
        self._leadership = leadership
        #: The election's name.
        self.name: str = leadership.name
        #: The term: the leader's fencing token.
        self.term: int = leadership.term
        #: Set when the leadership is lost (not when it is resigned).
        self.lost = threading.Event()
        #: Set when someone asked the leader to step down (see `resign_reason`).
        self.resign_requested = threading.Event()
        self._guard = threading.Lock()
        self._on_lost: list[Callable[[LockLost], object]] = []
        self._on_resign: list[Callable[[aio.RevokeRequest], object]] = []
        self._resign_request: aio.RevokeRequest | None = None
        leadership.on_lost(self._lost)
        leadership.on_resign_requested(self._asked)

    def __repr__(self) -> str:
        return repr(self._leadership).replace("lockstream.aio.Leadership", "lockstream.Leadership")

    # On the loop thread: mirror the asyncio events, and call the callbacks on another thread.
    def _lost(self, error: LockLost) -> None:
        with self._guard:
            self.lost.set()
            callbacks, self._on_lost = self._on_lost, []
        for callback in callbacks:
            self._client._dispatch(callback, error)

    def _asked(self, request: aio.RevokeRequest) -> None:
        with self._guard:
            self._resign_request = request
            self.resign_requested.set()
            callbacks = list(self._on_resign)
        for callback in callbacks:
            self._client._dispatch(callback, request)

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` when the leadership is lost (at once if it was), on the
        client's callback thread."""
        with self._guard:
            if not self.lost.is_set():
                self._on_lost.append(callback)
                return
        assert self._leadership.error is not None
        callback(self._leadership.error)

    def on_resign_requested(self, callback: Callable[[aio.RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks the leader to step down (at once if they
        did), on the client's callback thread; again if a later request adds a deadline."""
        with self._guard:
            told = self._resign_request
            if told is None or told.force_at is None:
                self._on_resign.append(callback)
        if told is not None:
            callback(told)

    def on_in_doubt(self, callback: Callable[[bool], object]) -> None:
        """Calls `callback(True)` when the leadership falls in doubt and `callback(False)` when it
        is confirmed again, on the client's callback thread."""
        self._client._run_soon(lambda: self._leadership.on_in_doubt(
            lambda doubt: self._client._dispatch(callback, doubt)))

    @property
    def error(self) -> LockLost | None:
        """Why the leadership was lost, once `lost` is set."""
        return self._leadership.error

    @property
    def leading(self) -> bool:
        """Whether it still leads: neither resigned nor lost."""
        return self._leadership.leading

    @property
    def in_doubt(self) -> bool:
        """True while nobody can vouch for the leadership (its stream is being resumed, or the
        server lost its back end); `lost` may follow."""
        return self._leadership.in_doubt

    @property
    def resign_reason(self) -> str:
        """Why the leader was asked to step down, once `resign_requested` is set."""
        return self._leadership.resign_reason

    def resign(self) -> None:
        """Steps down and waits for the server to confirm. Idempotent (closing the client resigns
        too). Raises LockLost if the leadership was lost first."""
        try:
            self._client._run(self._leadership.resign)
        except ClientClosed:
            if self._leadership.error is not None:
                raise self._leadership.error from None

    def proclaim(self, value: bytes | str) -> None:
        """Replaces the leader's value: observers are told it. NotHeld if the term is over."""
        self._client._run(lambda: self._leadership.proclaim(value))

    async def _give_back(self) -> None:
        """Resigns a leadership won by a call whose caller was interrupted."""
        try:
            await self._leadership.resign()
        except LockError:
            pass

    def __enter__(self) -> Leadership:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        """Resigns. If the block finished but the leadership was lost while it ran, raises
        LockLost; if the block raised, that propagates, with a note that the leadership was lost."""
        try:
            self._client._run(lambda: self._leadership.__aexit__(kind, error, traceback))
        except ClientClosed:
            lost = self._leadership.error
            if lost is not None:
                if error is None:
                    raise lost from None
                note_loss(error, lost, "the leadership")


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
