"""The blocking client: an asyncio client run on a private event loop thread, so that
heartbeats, resumes and loss detection go on while the caller's thread does its work."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import grpc

from lockstream import aio
from lockstream.errors import LockLost
from lockstream.v1 import lockstream_pb2 as pb

T = TypeVar("T")


class Lock:
    """A held lock. `token` is its fencing token: pass it to what the lock protects."""

    def __init__(self, client: Client, lock: aio.Lock) -> None:
        self._client = client
        self._lock = lock
        self.name = lock.name
        self.token = lock.token
        #: A multi-lock's token for each of its locks, by name; empty for a single lock.
        self.tokens = dict(lock.tokens)
        #: Set when the lock is lost (not when it is released).
        self.lost = threading.Event()
        #: Set when someone asked the holder to release the lock.
        self.revoke_requested = threading.Event()
        self._callbacks: list[Callable[[LockLost], object]] = []
        self._guard = threading.Lock()
        client._call_soon(self._watch)

    def _watch(self) -> None:
        # On the loop thread: mirror the asyncio events into threading ones.
        self._lock.on_lost(self._lost)
        self._lock.on_revoke_requested(lambda _: self.revoke_requested.set())

    def _lost(self, error: LockLost) -> None:
        self.lost.set()
        with self._guard:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback(error)

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` (on the client's thread) when the lock is lost; at once if it was."""
        with self._guard:
            self._callbacks.append(callback)
        if self.lost.is_set() and self._lock.error is not None:
            callback(self._lock.error)

    @property
    def error(self) -> LockLost | None:
        """Why the lock was lost, once `lost` is set."""
        return self._lock.error

    @property
    def mode(self) -> aio.Mode:
        return self._lock.mode

    @property
    def in_doubt(self) -> bool:
        return self._lock.in_doubt

    @property
    def revoke_reason(self) -> str:
        return self._lock.revoke_reason

    @property
    def held(self) -> bool:
        return self._lock.held

    def release(self) -> None:
        """Releases the lock. Raises LockLost if it was lost first."""
        self._client._run(self._lock.release())

    def set_value(self, value: bytes) -> None:
        """Replaces the value the holder publishes (at most 1 KiB; empty clears it)."""
        self._client._run(self._lock.set_value(value))

    def downgrade(self) -> None:
        """Turns a write hold into a read hold, with no writer let in between."""
        self._client._run(self._lock.downgrade())

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client._run(self._lock.__aexit__(*exc))


class Client:
    """Takes locks on one lockstream server; see lockstream.aio.Client for the options."""

    def __init__(self, target: str, *, owner: str = "", resume_grace: float = 5.0,
                 heartbeat_interval: float = 5.0, credentials: grpc.ChannelCredentials | None = None,
                 metadata: Sequence[tuple[str, str]] = ()) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lockstream", daemon=True)
        self._thread.start()

        async def make() -> aio.Client:
            return aio.Client(target, owner=owner, resume_grace=resume_grace,
                              heartbeat_interval=heartbeat_interval, credentials=credentials,
                              metadata=metadata)

        self._client = self._run(make())
        self._closed = False

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs `coroutine` on the loop; an interrupt of the waiting thread cancels it there, and
        returns once the cancellation has run (a waiting request has left the queue)."""
        finished = threading.Event()

        async def guarded() -> T:
            try:
                return await coroutine
            finally:
                finished.set()

        future = asyncio.run_coroutine_threadsafe(guarded(), self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            finished.wait(10)
            raise

    def _call_soon(self, callback: Callable[[], None]) -> None:
        self._loop.call_soon_threadsafe(callback)

    def acquire(self, name: str, *, mode: aio.Mode = "mutex", timeout: float | None = None,
                owner: str | None = None, value: bytes = b"", limit: int = 0,
                weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> Lock:
        """Blocks until the lock is granted. `timeout`: seconds to wait in the queue (LockTimeout
        after; 0 tries once). Interrupting the wait (KeyboardInterrupt) leaves the queue."""
        lock = self._run(self._client.acquire(name, mode=mode, timeout=timeout, owner=owner,
                                              value=value, limit=limit, weight=weight,
                                              on_queued=on_queued))
        return Lock(self, lock)

    def lock(self, name: str, *, mode: aio.Mode = "mutex", timeout: float | None = None,
             owner: str | None = None, value: bytes = b"", limit: int = 0, weight: int | None = None,
             on_queued: Callable[[int], object] | None = None) -> Lock:
        """`with client.lock(name, mode="write", timeout=5) as lock:` holds the lock for the block."""
        return self.acquire(name, mode=mode, timeout=timeout, owner=owner, value=value, limit=limit,
                            weight=weight, on_queued=on_queued)

    def lock_all(self, targets: Sequence[str | aio.Target], *, timeout: float | None = None,
                 owner: str | None = None, value: bytes = b"",
                 on_queued: Callable[[int], object] | None = None) -> Lock:
        """Takes every lock in `targets` at once, or none (see aio.Client.acquire_all):
        `with client.lock_all(["accounts/1", Target("ledger", "read")]) as lock:`."""
        lock = self._run(self._client.acquire_all(targets, timeout=timeout, owner=owner, value=value,
                                                  on_queued=on_queued))
        return Lock(self, lock)

    def try_lock(self, name: str, *, mode: aio.Mode = "mutex", **options: Any) -> Lock:
        """Takes the lock only if it can be granted at once; LockTimeout otherwise."""
        return self.acquire(name, mode=mode, timeout=0, **options)

    def describe(self, name: str) -> pb.DescribeLockResponse:
        """Who holds the lock and who waits for it."""
        return self._run(self._client.describe(name))

    def close(self) -> None:
        """Releases every lock of the client, closes its channel and stops its thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Client", "Lock"]

