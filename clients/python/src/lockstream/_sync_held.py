"""What the blocking client's Lock and Leadership share: an asyncio Lock or Leadership (a _held.Held)
held from any thread, its loss and requests to give it back mirrored as threading.Events and told
to callbacks on the client's callback thread, letting it go, and holding it for a `with` block.
Both are served by the asyncio client on the blocking client's event loop thread (a Runner)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

from lockstream._held import Held, RevokeRequest, note_loss
from lockstream.errors import ClientClosed, LockError, LockLost

T = TypeVar("T")
#: The asyncio Lock or Leadership that a blocking one holds.
A = TypeVar("A", bound=Held)
S = TypeVar("S", bound="SyncHeld[Any]")


class Runner(Protocol):
    """What the blocking locks and elections need of their client (a _sync.Client): running a
    coroutine on its loop and waiting for it, calling a callback on its callback thread, and
    running a function on its loop."""

    def _run(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T: ...

    def _dispatch(self, callback: Callable[..., object], *args: object) -> None: ...

    def _run_soon(self, call: Callable[[], object]) -> None: ...


class SyncHeld(Generic[A]):
    """A blocking Lock or Leadership: `held`, the asyncio one, used from any thread through
    `client`. `lost` (a threading.Event) is set if it is lost before it is let go."""

    def __init__(self, client: Runner, held: A) -> None:
        # Made on the client's event loop thread (see _sync.Client._wrap): no event can be missed.
        self._client = client
        self._held = held
        #: Its name: the lock's (a multi-lock's names joined with "+"), or the election's.
        self.name: str = held.name
        #: Set when it is lost (not when it is let go).
        self.lost = threading.Event()
        #: Set when someone asked for it back.
        self._asked_event = threading.Event()
        self._guard = threading.Lock()
        self._on_lost: list[Callable[[LockLost], object]] = []
        self._on_asked: list[Callable[[RevokeRequest], object]] = []
        self._asked: RevokeRequest | None = None
        held.on_lost(self._mirror_lost)
        held._on_asked_back(self._mirror_asked)

    # On the loop thread: mirror the asyncio events, and call the callbacks on another thread, so
    # that a callback may use the client (release, close) without blocking its event loop.
    def _mirror_lost(self, error: LockLost) -> None:
        with self._guard:
            self.lost.set()
            callbacks, self._on_lost = self._on_lost, []
        for callback in callbacks:
            self._client._dispatch(callback, error)

    def _mirror_asked(self, request: RevokeRequest) -> None:
        with self._guard:
            self._asked = request
            self._asked_event.set()
            callbacks = list(self._on_asked)
        for callback in callbacks:
            self._client._dispatch(callback, request)

    def on_in_doubt(self, callback: Callable[[bool], object]) -> None:
        """Calls `callback(True)` when it falls in doubt (see `in_doubt`) and `callback(False)` when
        it is confirmed again, on the client's callback thread."""
        self._client._run_soon(lambda: self._held.on_in_doubt(
            lambda doubt: self._client._dispatch(callback, doubt)))

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` when it is lost (at once if it was). Callbacks run on the
        client's callback thread, one at a time in the order of the events: they may release locks
        or close the client, and should not block for long."""
        with self._guard:
            if not self.lost.is_set():
                self._on_lost.append(callback)
                return
        assert self._held.error is not None
        callback(self._held.error)

    def _on_asked_back(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks for it back (at once if they did), on the
        client's callback thread; again if a later request adds a deadline."""
        with self._guard:
            told = self._asked
            if told is None or told.force_at is None:
                self._on_asked.append(callback)
        if told is not None:
            callback(told)

    @property
    def error(self) -> LockLost | None:
        """Why it was lost, once `lost` is set."""
        return self._held.error

    @property
    def in_doubt(self) -> bool:
        """True while nobody can vouch for it (its stream is being resumed, or the server lost its
        coordination back end): pause what only its holder may do; `lost` may follow."""
        return self._held.in_doubt

    def _let_go(self) -> None:
        """Lets it go (release, resign) and waits for the server to confirm. Idempotent (closing
        the client lets it go too). Raises LockLost if it was lost first."""
        try:
            self._client._run(self._held._let_go)
        except ClientClosed:
            if self._held.error is not None:
                raise self._held.error from None
            # Otherwise let go by closing the client.

    async def _give_back(self) -> None:
        """Lets go of what a call whose caller was interrupted was granted (or elected to)."""
        with contextlib.suppress(LockError):
            await self._held._let_go()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        """Lets it go (release, resign). If the block finished but it was lost while the block ran,
        raises LockLost: the work was not protected all along. If the block raised, that
        propagates, with a note that says it was lost too."""
        try:
            self._client._run(lambda: self._held.__aexit__(kind, error, traceback))
        except ClientClosed:
            lost = self._held.error
            if lost is not None:
                if error is None:
                    raise lost from None
                note_loss(error, lost, self._held._WHAT)
            # Otherwise let go by closing the client.
