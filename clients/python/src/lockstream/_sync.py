"""The blocking client: the asyncio client run on an event loop thread of its own, so that
heartbeats, resumes and loss detection go on while the caller's threads do their work."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import grpc

from lockstream import aio
from lockstream._callbacks import call_safely
from lockstream._sync_elections import Events, Leadership
from lockstream._sync_held import SyncHeld
from lockstream._sync_records import HolderRecords
from lockstream.errors import ClientClosed, LockTimeout

T = TypeVar("T")
#: How long an interrupted call waits for its cancellation to run, and close() for its thread.
_CANCEL_PATIENCE = 10.0
# How often a thread waiting for a call looks up: a signal (Ctrl-C) that the kernel gave another
# thread interrupts no blocked wait, and runs its handler only once the main thread runs Python
# code again.
_SIGNAL_SLICE = 0.1


class Lock(SyncHeld[aio.Lock]):
    """A held lock, from the moment `Client.lock` returns until `release()` or its loss.

    `token` is its fencing token: larger for every later holder of the lock. Pass it to what the
    lock protects, so that it can refuse a holder whose lock was lost. `lost` (a threading.Event)
    is set if the lock is lost before it is released. Use it as a context manager to release it
    at the end of the block. Its methods may be called from any thread.
    """

    def __init__(self, client: Client, lock: aio.Lock) -> None:
        super().__init__(client, lock)
        #: The fencing token (for a multi-lock: its first lock's).
        self.token: int = lock.token
        #: A multi-lock's token for each of its locks, by name; empty for a single lock.
        self.tokens: dict[str, int] = dict(lock.tokens)
        #: Set when someone asked the holder to release the lock (see `revoke_reason`).
        self.revoke_requested: threading.Event = self._asked_event

    def __repr__(self) -> str:
        return repr(self._held).replace("lockstream.aio.Lock", "lockstream.Lock")

    def on_revoke_requested(self, callback: Callable[[aio.RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks for the lock back (at once if they did),
        on the client's callback thread; `request.reason` says why, `request.force_at` by when.
        A cooperative request (`force_at` None) may be followed by one that adds a deadline:
        the callback is called again."""
        self._on_asked_back(callback)

    @property
    def mode(self) -> aio.Mode:
        """How the lock is held: as asked, or "read" once a write lock was downgraded."""
        return self._held.mode

    @property
    def held(self) -> bool:
        """Whether the lock is still held: neither released nor lost."""
        return self._held.held

    @property
    def revoke_reason(self) -> str:
        """Why the lock was asked back, once `revoke_requested` is set."""
        return self._held.revoke_reason

    def release(self) -> None:
        """Releases the lock and waits for the server to confirm. Idempotent (closing the client
        releases it too). Raises LockLost if the lock was lost first: the work done under it may
        not have been exclusive."""
        self._let_go()

    def set_value(self, value: bytes | str) -> None:
        """Publishes `value` with the lock (a str as UTF-8; at most 1024 bytes; empty clears it):
        what DescribeLock and WatchLock show for this holder. Returns once it is published."""
        self._client._run(lambda: self._held.set_value(value))

    def downgrade(self) -> None:
        """Turns a write lock into a read lock in one step (same token, nobody granted in
        between; readers queued only behind it are granted). LockError (FAILED_PRECONDITION) for
        any other mode, and the lock stays held."""
        self._client._run(self._held.downgrade)


class Client:
    """Takes locks on a lockstream server; blocking calls, safe to use from any thread.

    `with lockstream.Client("127.0.0.1:50051", owner="billing") as client:`, or with several
    endpoints to fail over between, `lockstream.Client(["10.0.0.1:50051", "10.0.0.2:50051"])` —
    see lockstream.aio.Client for the options. Every lock of the client is a request on one Session
    stream, served by an event loop on a daemon thread of the client's own. Close the client
    when done: that releases its locks and stops the thread.
    """

    def __init__(self, target: str | Sequence[str], *, owner: str = "", resume_grace: float = 5.0,
                 heartbeat_interval: float = 1.0, credentials: grpc.ChannelCredentials | None = None,
                 token: str | None = None, metadata: aio.Metadata = (),
                 unavailable_retries: int = 2, channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        # Checks the options in the caller's thread, before a thread is started.
        self._client = aio.Client(target, owner=owner, resume_grace=resume_grace,
                                  heartbeat_interval=heartbeat_interval, credentials=credentials,
                                  token=token, metadata=metadata, unavailable_retries=unavailable_retries,
                                  channel_options=channel_options)
        self._closed = False
        # Guards _closed and _calls, the calls waited for by some thread.
        self._guard = threading.Lock()
        self._calls: set[concurrent.futures.Future[Any]] = set()
        self._callbacks: queue.SimpleQueue[tuple[Callable[..., object], tuple[object, ...]] | None] | None = None
        self._callbacks_guard = threading.Lock()
        self._done = threading.Event()
        self._client._done_watchers.append(self._done_changed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lockstream", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether `close()` was called: every call raises ClientClosed from then on."""
        return self._closed

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The addresses the client was given, in the order it tries them."""
        return self._client.endpoints

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to now: the first, until a session fails over."""
        return self._client.endpoint

    @property
    def done(self) -> threading.Event:
        """Set when every lock of the client is gone at once, as etcd's Session.Done(): the client
        was closed, or its session ended without it (its stream broke and was not resumed within
        the grace, or the server no longer had it), and every lock it held is lost. A later
        lock() opens a new session, and `done` is a new event from then on: take it while you
        hold the locks it is about (`client.done.wait()`)."""
        with self._guard:
            return self._done

    def _done_changed(self, done: bool) -> None:
        # On the loop thread: mirrors aio.Client.done.
        with self._guard:
            if done:
                self._done.set()
            else:
                self._done = threading.Event()

    def _run(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Runs the coroutine `call()` makes on the client's loop and waits for it. ClientClosed
        once the client is closed, and for a call that the closing cut short. An interrupt of the
        waiting thread (KeyboardInterrupt) cancels the call there and returns once the
        cancellation has run (a waiting request has left the queue, a crossing grant is given
        back)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a lockstream.Client cannot be used from its own event loop thread")
        result: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:
            with self._guard:
                self._calls.discard(result)
                if result.done():
                    return
                if task.cancelled():
                    result.set_exception(ClientClosed())  # cancelled by close(); or the caller is gone
                elif (error := task.exception()) is not None:
                    result.set_exception(error)
                else:
                    result.set_result(task.result())

        def start() -> None:
            try:
                task = self._loop.create_task(call())
            except BaseException as error:
                with self._guard:
                    self._calls.discard(result)
                    result.set_exception(error)
                return
            tasks.append(task)
            task.add_done_callback(settle)

        with self._guard:
            # Checked and registered under the guard that close() takes: a call is either refused
            # here or registered before close() settles every call still registered.
            if self._closed:
                raise ClientClosed()
            self._calls.add(result)
            self._loop.call_soon_threadsafe(start)
        try:
            return _result_interruptibly(result)
        except BaseException:
            if not result.done():
                self._cancel_soon(tasks)
                concurrent.futures.wait([result], timeout=_CANCEL_PATIENCE)
            raise

    def _cancel_soon(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Cancels the call whose caller is gone, on the loop (where `start` has run: both go in
        order). A call that finished meanwhile with a lock gives the lock back."""

        def cancel() -> None:
            for task in tasks:
                if not task.done():
                    task.cancel()
                elif (not task.cancelled() and task.exception() is None
                      and isinstance(task.result(), SyncHeld)):
                    self._loop.create_task(task.result()._give_back())

        with contextlib.suppress(RuntimeError):  # the loop is closed: close() settles the call
            self._loop.call_soon_threadsafe(cancel)

    def _dispatch(self, callback: Callable[..., object], *args: object) -> None:
        """Calls `callback(*args)` on the client's callback thread, in the order of the events:
        never on its event loop, so that a callback may use the client (release, close)."""
        with self._callbacks_guard:
            if self._callbacks is None:
                self._callbacks = queue.SimpleQueue()
                threading.Thread(target=self._call_back, args=(self._callbacks,),
                                 name="lockstream-callbacks", daemon=True).start()
            self._callbacks.put((callback, args))

    @staticmethod
    def _call_back(calls: queue.SimpleQueue[tuple[Callable[..., object], tuple[object, ...]] | None]) -> None:
        while (call := calls.get()) is not None:
            callback, args = call
            call_safely("lockstream", callback, *args)

    def _run_soon(self, call: Callable[[], object]) -> None:
        """Runs `call` on the client's event loop, and waits until it has."""

        async def run() -> None:
            call()

        self._run(run)

    async def _wrap(self, acquiring: Coroutine[Any, Any, aio.Lock]) -> Lock:
        return Lock(self, await acquiring)

    def _dispatching(self, on_queued: Callable[[int], object] | None) -> Callable[[int], object] | None:
        if on_queued is None:
            return None
        return lambda ahead: self._dispatch(on_queued, ahead)

    def acquire(self, name: str, *, mode: aio.Mode = "mutex", timeout: float | None = None,
                owner: str | None = None, value: bytes | str = b"", limit: int = 0,
                weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> Lock:
        """Blocks until the lock is granted and returns it (see `lock`)."""
        return self._run(lambda: self._wrap(self._client.acquire(
            name, mode=mode, timeout=timeout, owner=owner, value=value, limit=limit, weight=weight,
            on_queued=self._dispatching(on_queued))))

    def lock(self, name: str, *, mode: aio.Mode = "mutex", timeout: float | None = None,
             owner: str | None = None, value: bytes | str = b"", limit: int = 0,
             weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> Lock:
        """Blocks until the lock is granted and returns it: `with client.lock(name, mode="write",
        timeout=5) as lock:` holds it for the block.

        `mode`: "mutex" (default), "read", "write"; "semaphore" when `limit` is given (up to
        `limit` holders' `weight`s at once). `timeout`: seconds to wait in the queue, then
        LockTimeout; 0 tries once; None waits as long as it takes. `value`: published with the
        request (see Lock.set_value). `on_queued(ahead)`: called (on the client's callback thread)
        while it waits, whenever the number of requests ahead changes. An interrupted wait
        (KeyboardInterrupt) leaves the queue before it raises. LockError, with the server's code
        and message, for anything else (PermissionDenied, INVALID_ARGUMENT for a bad name, ...).
        """
        return self.acquire(name, mode=mode, timeout=timeout, owner=owner, value=value, limit=limit,
                            weight=weight, on_queued=on_queued)

    def try_lock(self, name: str, *, mode: aio.Mode = "mutex", owner: str | None = None,
                 value: bytes | str = b"", limit: int = 0, weight: int | None = None) -> Lock | None:
        """Takes the lock if it can be granted now, without queuing: the Lock, or None when it
        is held in a conflicting mode or others wait ahead (as threading.Lock.acquire(
        blocking=False) answers False). Nothing is left queued. Other failures raise."""
        try:
            return self.acquire(name, mode=mode, timeout=0, owner=owner, value=value, limit=limit,
                                weight=weight)
        except LockTimeout:
            return None

    def lock_all(self, targets: Sequence[str | aio.Target], *, timeout: float | None = None,
                 owner: str | None = None, value: bytes | str = b"",
                 on_queued: Callable[[int], object] | None = None) -> Lock:
        """Takes every lock in `targets` at once, or none (see aio.Client.acquire_all):
        `with client.lock_all(["accounts/1", Target("ledger", "read")]) as lock:`."""
        return self._run(lambda: self._wrap(self._client.acquire_all(
            targets, timeout=timeout, owner=owner, value=value, on_queued=self._dispatching(on_queued))))

    def describe(self, name: str) -> aio.LockDescription:
        """Who holds the lock and who waits for it, first in line first (DescribeLock)."""
        return self._run(lambda: self._client.describe(name))

    def check_token(self, name: str, token: int) -> bool:
        """Whether `token` is held for the lock right now (CheckToken)."""
        return self._run(lambda: self._client.check_token(name, token))

    def records(self, name: str, token: int) -> HolderRecords:
        """The guarded records of lock `name` as the holder of `token` (`lock.token`, or
        `leadership.term`) writes them: `get`, `put`, `delete`, `update` (see
        aio.Client.records). A write commits only while `token` holds the lock, else NotHeld."""
        return HolderRecords(self, self._client.records(name, token))

    def get_record(self, name: str, key: str) -> aio.Record | None:
        """The guarded record `key` of lock `name` (`value`, `revision`), or None when there is none."""
        return self._run(lambda: self._client.get_record(name, key))

    def campaign(self, name: str, value: bytes | str = b"", *, owner: str | None = None,
                 timeout: float | None = None, on_queued: Callable[[int], object] | None = None) -> Leadership:
        """Blocks until elected and returns the Leadership: `with client.campaign(name, value) as
        leadership:` leads for the block and resigns when it leaves (see aio.Client.campaign).
        `leadership.lost` (a threading.Event) is set if it is lost."""

        async def elect() -> Leadership:
            return Leadership(self, await self._client.campaign(
                name, value, owner=owner, timeout=timeout, on_queued=self._dispatching(on_queued)))

        return self._run(elect)

    def observe(self, name: str, *, from_term: int | None = None) -> Events:
        """The election's events, in order: `for event in client.observe(name):` (see
        aio.Client.observe); `with client.observe(name) as events:` ends it with the block."""
        return Events(self, self._client.observe(name, from_term=from_term))

    def leader(self, name: str) -> aio.Term | None:
        """Who leads the election now: its Term, or None when nobody does."""
        return self._run(lambda: self._client.leader(name))

    def proclaim(self, name: str, term: int, value: bytes | str) -> None:
        """Replaces the value of the leader of `term`; NotHeld when it is not the current term."""
        self._run(lambda: self._client.proclaim(name, term, value))

    def resign(self, name: str, term: int) -> None:
        """Ends the term `term` of the election; NotHeld when it is not the current term."""
        self._run(lambda: self._client.resign(name, term))

    def close(self) -> None:
        """Releases every lock of the client, resigns its leaderships, fails its waiting calls at
        once (ClientClosed), ends its observations, closes its channel and stops its thread.
        Idempotent. Every later call raises ClientClosed, except `release()` (`resign()`) and
        leaving a `with` block of a lock it released (a leadership it resigned)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a lockstream.Client cannot be closed from its own event loop thread")
        with self._guard:
            if self._closed:
                return
            self._closed = True

        async def shut_down() -> None:
            try:
                await self._client.close()
            finally:
                # Whatever still runs on the loop (a call another thread is waiting for) ends now.
                current = asyncio.current_task()
                tasks = [task for task in asyncio.all_tasks() if task is not current]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shut_down(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CANCEL_PATIENCE)
            with self._guard:
                # Calls the stopped loop never started (or never finished) must not wait forever.
                for call in self._calls:
                    if not call.done():
                        call.set_exception(ClientClosed())
                self._calls.clear()
            if not self._thread.is_alive():
                self._loop.close()
            self._done.set()
            with self._callbacks_guard:
                if self._callbacks is not None:
                    self._callbacks.put(None)  # after the callbacks already queued

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Client", "Events", "HolderRecords", "Leadership", "Lock"]


def _result_interruptibly(result: concurrent.futures.Future[T]) -> T:
    """`result.result()`, waited for in slices, so that an interrupt (KeyboardInterrupt) reaches
    the waiting thread within one slice wherever the kernel delivered the signal."""
    while True:
        try:
            return result.result(timeout=_SIGNAL_SLICE)
        except concurrent.futures.TimeoutError:
            if result.done():
                raise  # the call's own error (a lock wait that timed out)
