"""The asyncio client: `async with lockstream.aio.Client(...) as client` and
`async with client.lock("name") as lock`.

All locks of a Client travel as requests on one Session stream (lockstream.v1.LockService/
Session), opened on the first lock. The stream carries heartbeats; when it breaks, the client
takes the session over on a new stream within the resume grace, and the locks stay held with the
same tokens. Otherwise, and when the server ends a held lock, the lock is lost: `lock.lost` is
set and the callbacks given to `lock.on_lost` are called.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Literal

import grpc
import grpc.aio
from google.protobuf.duration_pb2 import Duration

from lockstream.errors import ClientClosed, LockError, LockLost, NotHeld, error_for
from lockstream.v1 import lockstream_pb2 as pb

Mode = Literal["mutex", "read", "write", "semaphore"]

_MODES: dict[str, pb.LockMode] = {
    "mutex": pb.LOCK_MODE_MUTEX,
    "read": pb.LOCK_MODE_READ,
    "write": pb.LOCK_MODE_WRITE,
    "semaphore": pb.LOCK_MODE_SEMAPHORE,
}
_SESSION = "/lockstream.v1.LockService/Session"
_DESCRIBE = "/lockstream.v1.LockService/DescribeLock"
# Ends of a stream after which the server may still keep the session for a resume.
_BREAKS = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}

SessionCall = grpc.aio.StreamStreamCall[pb.SessionRequest, pb.SessionResponse]


@dataclass(frozen=True)
class Target:
    """One lock of a multi-lock (`acquire_all`): its name and mode; for a semaphore its limit and
    this request's weight (None: 1)."""

    name: str
    mode: Mode = "mutex"
    limit: int = 0
    weight: int | None = None

    def _message(self) -> pb.LockTarget:
        mode: Mode = "semaphore" if self.limit > 0 else self.mode
        if mode not in _MODES:
            raise ValueError(f"lock {self.name!r}: mode {mode!r}: expected one of {', '.join(_MODES)}")
        target = pb.LockTarget(name=self.name, mode=_MODES[mode], limit=self.limit)
        if self.weight is not None:
            target.weight = self.weight
        return target


def _duration(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(int(seconds * 1e9))
    return duration


async def _first(*futures: asyncio.Future[Any]) -> None:
    """Waits until one of `futures` is done (none is cancelled)."""
    await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)


class Lock:
    """A held lock. `token` is its fencing token: pass it to what the lock protects."""

    def __init__(self, session: _Session, request: _Request, acquired: pb.AcquireAcquired) -> None:
        self._session = session
        self._request = request
        self.name = request.name
        self.token = acquired.fencing_token
        #: A multi-lock's token for each of its locks, by name, in the order asked for; empty for
        #: a single lock (see `token`).
        self.tokens = {token.name: token.fencing_token for token in acquired.tokens}
        self.mode: Mode = request.mode
        #: Set when the lock is lost (not when it is released).
        self.lost = asyncio.Event()
        #: Why it was lost, once `lost` is set.
        self.error: LockLost | None = None
        #: True while the server cannot vouch for the lock (its ZooKeeper link is interrupted).
        self.in_doubt = False
        #: Set when someone asked the holder to release the lock; `revoke_reason` says why.
        self.revoke_requested = asyncio.Event()
        self.revoke_reason = ""
        self._on_lost: list[Callable[[LockLost], object]] = []
        self._on_revoke: list[Callable[[str], object]] = []
        self._ended = False

    def on_lost(self, callback: Callable[[LockLost], object]) -> None:
        """Calls `callback(error)` when the lock is lost (at once if it was)."""
        if self.error is not None:
            callback(self.error)
        else:
            self._on_lost.append(callback)

    def on_revoke_requested(self, callback: Callable[[str], object]) -> None:
        """Calls `callback(reason)` when someone asks the holder to release the lock."""
        if self.revoke_requested.is_set():
            callback(self.revoke_reason)
        else:
            self._on_revoke.append(callback)

    def _revoke(self, reason: str) -> None:
        self.revoke_reason = reason
        self.revoke_requested.set()
        for callback in self._on_revoke:
            callback(reason)

    @property
    def held(self) -> bool:
        """Whether the lock is still held (neither released nor lost)."""
        return not self._ended

    async def release(self) -> None:
        """Releases the lock and waits for the server to confirm. Raises LockLost if it was lost."""
        if self.error is not None:
            raise self.error
        if self._ended or self._request.let_go is not None:
            raise NotHeld(self.name)
        self._session.let_go(self._request, release=True)
        await asyncio.shield(self._request.ended)
        if self.error is not None:
            raise self.error

    async def set_value(self, value: bytes) -> None:
        """Replaces the value the holder publishes (at most 1 KiB; empty clears it)."""
        await self._ask(pb.SessionRequest(set_value=pb.SessionSetValue(request_id=self._request.id, value=value)))

    async def downgrade(self) -> None:
        """Turns a write hold into a read hold, with no writer let in between."""
        await self._ask(pb.SessionRequest(downgrade=pb.SessionDowngrade(request_id=self._request.id)))
        self.mode = "read"

    async def _ask(self, message: pb.SessionRequest) -> None:
        async with self._request.ask_lock:
            if self._ended:
                raise self.error or NotHeld(self.name)
            ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._request.ack, self._request.asked = ack, message
            await self._session.send(message)
            ended = self._request.ended
            await _first(ack, ended)
            if not ack.done():
                error = ended.result()
                raise error or NotHeld(self.name)

    def _end(self, error: LockError | None, let_go: bool) -> None:
        if self._ended:
            return
        self._ended = True
        if error is None or (let_go and not isinstance(error, LockLost)):
            return
        lost = error if isinstance(error, LockLost) else LockLost(self.name, error.code, error.message)
        self.error = lost
        self.lost.set()
        for callback in self._on_lost:
            callback(lost)

    async def __aenter__(self) -> Lock:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ended and self.error is None:
            return
        with contextlib.suppress(LockLost, NotHeld):
            await self.release()


class _Request:
    """One lock request of the session, from `acquire` to `ended`."""

    def __init__(self, request_id: int, name: str, mode: Mode, message: pb.SessionAcquire,
                 on_queued: Callable[[int], object] | None) -> None:
        loop = asyncio.get_running_loop()
        self.id = request_id
        self.name = name
        self.mode = mode
        self.message = message
        self.on_queued = on_queued
        self.granted: asyncio.Future[Lock] = loop.create_future()
        self.ended: asyncio.Future[LockError | None] = loop.create_future()
        self.lock: Lock | None = None
        self.let_go: pb.SessionRequest | None = None
        self.ack: asyncio.Future[None] | None = None
        self.asked: pb.SessionRequest | None = None
        self.ask_lock = asyncio.Lock()
        self.reported = False


class _Session:
    """One Session stream and its successors after resumes: every lock of a Client."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._loop = asyncio.get_running_loop()
        self.requests: dict[int, _Request] = {}
        self._last_id = 0
        self._call: SessionCall | None = None
        self._ready = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._resume_token = ""
        self._resume_grace = 0.0
        self._heard = self._loop.time()
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.ended = False
        self._done = asyncio.Event()

    # -- streams ------------------------------------------------------------------------------

    async def open(self) -> None:
        options = self._client.options
        opening = pb.SessionOpen()
        if options.resume_grace > 0:
            opening.resume_grace.CopyFrom(_duration(options.resume_grace))
        if options.heartbeat_interval > 0:
            opening.heartbeat_interval.CopyFrom(_duration(options.heartbeat_interval))
        call = self._new_call()
        await call.write(pb.SessionRequest(open=opening))
        self._use(call)

    def _new_call(self) -> SessionCall:
        method = self._client.channel.stream_stream(
            _SESSION,
            request_serializer=pb.SessionRequest.SerializeToString,
            response_deserializer=pb.SessionResponse.FromString,
        )
        call: SessionCall = method(metadata=self._client.options.metadata)  # type: ignore[assignment]
        self._heard = self._loop.time()
        return call

    def _use(self, call: SessionCall) -> None:
        self._call = call
        self._ready.set()
        self._spawn(self._read(call))
        self._spawn(self._heartbeats(call))

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, message: pb.SessionRequest) -> None:
        """Sends on the current stream, waiting while the session is being resumed. A message
        lost with a breaking stream is accounted for by the resume (see _take_over)."""
        while True:
            if self.ended:
                raise ClientClosed() if self.closing else _SessionOver()
            call = self._call
            if call is None:
                await self._ready.wait()
                continue
            async with self._write_lock:
                try:
                    await call.write(message)
                except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                    pass  # the stream is breaking: _read sees it
            return

    async def _read(self, call: SessionCall) -> None:
        code, trailers = grpc.StatusCode.OK, None
        try:
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    break
                assert isinstance(message, pb.SessionResponse)
                self._heard = self._loop.time()
                self._handle(message)
            code = await call.code()
            trailers = await call.trailing_metadata()
        except grpc.aio.AioRpcError as error:
            code, trailers = error.code(), error.trailing_metadata()
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
        details = ""
        with contextlib.suppress(Exception):
            details = await call.details() or ""
        await self._broken(call, code, details, trailers)

    async def _heartbeats(self, call: SessionCall) -> None:
        """One every interval; three intervals without a word from the server count as a broken
        stream (a connection that silently died), to be resumed on a new one."""
        interval = self._client.options.heartbeat_interval
        if interval <= 0:
            return
        while self._call is call and not call.done():
            await asyncio.sleep(interval)
            if self._call is not call:
                return
            if self._loop.time() - self._heard > 3 * interval:
                call.cancel()
                return
            await self.send(pb.SessionRequest(heartbeat=pb.AcquireHeartbeat()))

    def _handle(self, message: pb.SessionResponse) -> None:
        kind = message.WhichOneof("kind")
        if kind == "opened":
            self._resume_token = message.opened.resume_token
            self._resume_grace = message.opened.resume_grace.ToNanoseconds() / 1e9
            return
        request = self.requests.get(message.request_id)
        if request is None:
            return
        request.reported = True
        lock = request.lock
        if kind == "queued":
            if request.on_queued is not None:
                request.on_queued(message.queued.ahead)
        elif kind == "acquired":
            if lock is None:
                request.lock = Lock(self, request, message.acquired)
                request.granted.set_result(request.lock)
        elif kind == "in_doubt" and lock is not None:
            lock.in_doubt = True
        elif kind == "confirmed" and lock is not None:
            lock.in_doubt = False
        elif kind == "revoke_requested" and lock is not None:
            lock._revoke(message.revoke_requested.reason)
        elif kind in ("value_set", "downgraded"):
            if request.ack is not None and not request.ack.done():
                request.ack.set_result(None)
            request.ack, request.asked = None, None
        elif kind == "ended":
            code = message.ended.code
            self.end(request, None if code == 0 else error_for(request.name, code, message.ended.message))

    def end(self, request: _Request, error: LockError | None) -> None:
        if self.requests.get(request.id) is request:
            del self.requests[request.id]
        if not request.ended.done():
            request.ended.set_result(error)
        if request.lock is not None:
            request.lock._end(error, request.let_go is not None)

    async def _broken(self, call: SessionCall, code: grpc.StatusCode, details: str,
                      trailers: Any) -> None:
        if self._call is not call:
            return
        self._call = None
        self._ready.clear()
        ended_by_server = any(key == "lockstream-request" and "ended" in str(value)
                              for key, value in (trailers or ()))
        if (self.closing or not self._resume_token or self._resume_grace <= 0 or code not in _BREAKS
                or ended_by_server):
            self.finish(None if code == grpc.StatusCode.OK else (code, details))
            return
        self._spawn(self._resume(self._loop.time() + self._resume_grace, (code, details)))

    async def _resume(self, deadline: float, cause: tuple[grpc.StatusCode, str]) -> None:
        backoff = 0.05
        while True:
            if self.closing:
                self.finish(cause)
                return
            options = self._client.options
            resume = pb.SessionResume(resume_token=self._resume_token)
            if options.heartbeat_interval > 0:
                resume.heartbeat_interval.CopyFrom(_duration(options.heartbeat_interval))
            call = self._new_call()
            try:
                await call.write(pb.SessionRequest(resume=resume))
                await asyncio.wait_for(self._take_over(call), max(0.0, deadline - self._loop.time()))
                self._use(call)
                return
            except grpc.aio.AioRpcError as error:
                cause = (error.code(), error.details() or "")
            except (asyncio.TimeoutError, grpc.aio.UsageError, asyncio.InvalidStateError):
                pass
            call.cancel()
            if cause[0] == grpc.StatusCode.NOT_FOUND or self._loop.time() >= deadline:
                self.finish((cause[0], "could not resume the session: " + cause[1]))
                return
            await asyncio.sleep(min(backoff, max(0.0, deadline - self._loop.time())))
            backoff = min(2 * backoff, 1.0)

    async def _take_over(self, call: SessionCall) -> None:
        """Reads a resumed stream's report up to `resumed`, then settles every request it did
        not mention (the server does not know it): one never granted is asked for again, a held
        one ended meanwhile, one let go is over. What a reported request was sent last without an
        answer (release, cancel, set_value, downgrade: all idempotent) is sent again."""
        for request in self.requests.values():
            request.reported = False
        while True:
            message = await call.read()
            if message is grpc.aio.EOF:
                raise grpc.aio.AioRpcError(await call.code(), grpc.aio.Metadata(), grpc.aio.Metadata(),
                                           await call.details())
            assert isinstance(message, pb.SessionResponse)
            self._heard = self._loop.time()
            if message.WhichOneof("kind") == "resumed":
                break
            self._handle(message)
        again: list[pb.SessionRequest] = []
        for request in list(self.requests.values()):
            if request.reported:
                if request.let_go is not None:
                    again.append(request.let_go)
                elif request.asked is not None:
                    again.append(request.asked)
            elif request.let_go is not None:
                self.end(request, None)
            elif request.lock is not None:
                self.end(request, LockLost(request.name, grpc.StatusCode.ABORTED,
                                           "the lock ended while the stream was broken"))
            else:
                again.append(pb.SessionRequest(acquire=request.message))
        for message in again:
            await call.write(message)

    def finish(self, cause: tuple[grpc.StatusCode, str] | None) -> None:
        """Ends the session: every request ends (held locks lost, unless let go)."""
        if self.ended:
            return
        self.ended = True
        self._ready.set()
        for request in list(self.requests.values()):
            error: LockError | None
            if request.let_go is not None:
                error = None
            elif self.closing:
                error = ClientClosed(request.name)
            elif cause is None:
                error = LockError(request.name, grpc.StatusCode.UNAVAILABLE, "the session ended")
            else:
                error = error_for(request.name, cause[0], "the session ended: " + cause[1])
            self.end(request, error)
        self._done.set()
        if self._call is not None:
            self._call.cancel()

    # -- requests -----------------------------------------------------------------------------

    def _new_id(self) -> int:
        while True:
            self._last_id = self._last_id % 0xFFFFFFFF + 1
            if self._last_id not in self.requests:
                return self._last_id

    async def acquire(self, name: str, mode: Mode, message: pb.SessionAcquire,
                      on_queued: Callable[[int], object] | None) -> Lock:
        if self.ended or self.closing:
            raise _SessionOver()
        request = _Request(self._new_id(), name, mode, message, on_queued)
        message.request_id = request.id
        self.requests[request.id] = request
        try:
            await self.send(pb.SessionRequest(acquire=message))
            await _first(request.granted, request.ended)
        except BaseException:
            # Cancelled (or interrupted) while waiting: leave the queue, or give back a grant that
            # crossed the cancel, before going on.
            self.let_go(request, release=False)
            with contextlib.suppress(BaseException):
                await asyncio.shield(request.ended)
            raise
        if request.granted.done():
            return request.granted.result()
        error = request.ended.result()
        raise error or LockError(name, grpc.StatusCode.UNKNOWN, "ended without a grant")

    def let_go(self, request: _Request, release: bool) -> None:
        """Sends a release (or cancel) for the request, once."""
        if request.let_go is not None or request.ended.done():
            return
        request.let_go = (pb.SessionRequest(release=pb.SessionRelease(request_id=request.id)) if release
                          else pb.SessionRequest(cancel=pb.SessionCancel(request_id=request.id)))
        self._spawn(self._send_quietly(request.let_go))

    async def _send_quietly(self, message: pb.SessionRequest) -> None:
        with contextlib.suppress(LockError, _SessionOver):
            await self.send(message)

    async def close(self) -> None:
        """Releases every lock, withdraws every request, and ends the session."""
        self.closing = True
        call = self._call
        for request in list(self.requests.values()):
            if request.let_go is None:
                request.let_go = pb.SessionRequest(release=pb.SessionRelease(request_id=request.id))
                if call is not None:
                    with contextlib.suppress(Exception):
                        async with self._write_lock:
                            await call.write(request.let_go)
        if call is not None:
            with contextlib.suppress(Exception):
                async with self._write_lock:
                    await call.done_writing()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), 5)
        self.finish(None)
        for task in list(self._tasks):
            task.cancel()


class _SessionOver(Exception):
    """The session ended before a request could be queued on it: take the next one."""


class _Options:
    def __init__(self, owner: str, resume_grace: float, heartbeat_interval: float,
                 metadata: Sequence[tuple[str, str]]) -> None:
        self.owner = owner
        self.resume_grace = resume_grace
        self.heartbeat_interval = heartbeat_interval
        self.metadata = tuple(metadata)


class Client:
    """Takes locks on one lockstream server, on asyncio.

    `resume_grace` (seconds, default 5): how long the server keeps this client's locks after its
    stream breaks, for the client to take them over; 0 loses them at once. `heartbeat_interval`
    (default 5; 0: none): three intervals without a word from the server count as a broken
    stream. `credentials`: TLS (grpc.ssl_channel_credentials); plaintext without.
    `metadata`: sent with the stream (e.g. `[("authorization", "Bearer ...")]`).
    """

    def __init__(self, target: str, *, owner: str = "", resume_grace: float = 5.0,
                 heartbeat_interval: float = 5.0, credentials: grpc.ChannelCredentials | None = None,
                 metadata: Sequence[tuple[str, str]] = ()) -> None:
        self.options = _Options(owner, resume_grace, heartbeat_interval, metadata)
        self.channel = (grpc.aio.secure_channel(target, credentials) if credentials is not None
                        else grpc.aio.insecure_channel(target))
        self._session: _Session | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def _current_session(self) -> _Session:
        async with self._opening:
            if self._closed:
                raise ClientClosed()
            if self._session is None or self._session.ended:
                session = _Session(self)
                await session.open()
                self._session = session
            return self._session

    async def acquire(self, name: str, *, mode: Mode = "mutex", timeout: float | None = None,
                      owner: str | None = None, value: bytes = b"", limit: int = 0,
                      weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> Lock:
        """Waits until the lock is granted and returns it. `timeout`: seconds to wait in the queue
        (LockTimeout after; 0 tries once). Cancelling the wait leaves the queue."""
        if limit > 0:
            mode = "semaphore"
        if mode not in _MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(_MODES)}")
        message = pb.SessionAcquire(name=name, mode=_MODES[mode], value=value, limit=limit,
                                    owner=self.options.owner if owner is None else owner)
        if weight is not None:
            message.weight = weight
        if timeout is not None:
            message.wait_timeout.CopyFrom(_duration(timeout))
        return await self._acquire(name, mode, message, on_queued)

    async def _acquire(self, name: str, mode: Mode, message: pb.SessionAcquire,
                       on_queued: Callable[[int], object] | None) -> Lock:
        while True:
            session = await self._current_session()
            try:
                return await session.acquire(name, mode, message, on_queued)
            except _SessionOver:
                continue

    async def acquire_all(self, targets: Sequence[str | Target], *, timeout: float | None = None,
                          owner: str | None = None, value: bytes = b"",
                          on_queued: Callable[[int], object] | None = None) -> Lock:
        """Takes every lock in `targets` (names, for mutexes, or Targets) at once, or none: the
        server queues them in one step (one place in a single order across all locks, so two
        multi-locks never deadlock) and grants them together. One wait, one release, one loss for
        the set; `lock.tokens` has each lock's token. `lock.name` is the names joined with "+"."""
        locks = [target if isinstance(target, Target) else Target(target) for target in targets]
        message = pb.SessionAcquire(locks=[target._message() for target in locks], value=value,
                                    owner=self.options.owner if owner is None else owner)
        if timeout is not None:
            message.wait_timeout.CopyFrom(_duration(timeout))
        return await self._acquire("+".join(target.name for target in locks), "mutex", message, on_queued)

    def lock_all(self, targets: Sequence[str | Target], *, timeout: float | None = None,
                 owner: str | None = None, value: bytes = b"",
                 on_queued: Callable[[int], object] | None = None) -> _LockContext:
        """`async with client.lock_all([...]) as lock:` holds every lock of the set for the block."""
        return _LockContext(self.acquire_all(targets, timeout=timeout, owner=owner, value=value,
                                             on_queued=on_queued))

    def lock(self, name: str, *, mode: Mode = "mutex", timeout: float | None = None,
             owner: str | None = None, value: bytes = b"", limit: int = 0, weight: int | None = None,
             on_queued: Callable[[int], object] | None = None) -> _LockContext:
        """`async with client.lock(name) as lock:` holds the lock for the block (or
        `lock = await client.lock(name)`, then `await lock.release()`)."""
        return _LockContext(self.acquire(name, mode=mode, timeout=timeout, owner=owner, value=value,
                                         limit=limit, weight=weight, on_queued=on_queued))

    async def try_lock(self, name: str, *, mode: Mode = "mutex", **options: Any) -> Lock:
        """Takes the lock only if it can be granted at once; LockTimeout otherwise."""
        return await self.acquire(name, mode=mode, timeout=0, **options)

    async def describe(self, name: str) -> pb.DescribeLockResponse:
        """Who holds the lock and who waits for it."""
        method = self.channel.unary_unary(
            _DESCRIBE,
            request_serializer=pb.DescribeLockRequest.SerializeToString,
            response_deserializer=pb.DescribeLockResponse.FromString,
        )
        response: pb.DescribeLockResponse = await method(pb.DescribeLockRequest(name=name),
                                                         metadata=self.options.metadata)
        return response

    async def close(self) -> None:
        """Releases every lock of the client and closes its channel."""
        async with self._opening:
            self._closed = True
            session = self._session
        if session is not None:
            await session.close()
        await self.channel.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _LockContext:
    """What Client.lock returns: awaitable, and an async context manager releasing at exit."""

    def __init__(self, acquiring: Awaitable[Lock]) -> None:
        self._acquiring = acquiring
        self._lock: Lock | None = None

    def __await__(self) -> Generator[Any, None, Lock]:
        return self._acquiring.__await__()

    async def __aenter__(self) -> Lock:
        self._lock = await self._acquiring
        return self._lock

    async def __aexit__(self, *exc: object) -> None:
        if self._lock is not None:
            await self._lock.__aexit__(*exc)


__all__ = ["Client", "Lock", "Mode", "Target"]
