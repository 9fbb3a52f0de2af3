"""The asyncio client.

    async with lockstream.aio.Client("127.0.0.1:50051", owner="billing") as client:
        async with client.lock("billing/invoice-42", mode="write", timeout=5) as lock:
            await charge(fencing_token=lock.token)

All locks of a Client are requests on one Session stream (lockstream.v1.LockService/Session),
opened on the first acquire. The stream carries heartbeats in both directions; when it breaks,
the client takes the session over on a new stream with its resume token, within the resume
grace (on the next endpoint, for a client given several), and the locks stay held with the same
tokens (`lock.in_doubt` is true meanwhile). When that fails, or when the server ends a held lock,
the lock is lost: `lock.lost` is set and the callbacks given to `lock.on_lost` are called.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import grpc
import grpc.aio
from google.protobuf.duration_pb2 import Duration

from lockstream import _checks
from lockstream._checks import VALUE_MAX_BYTES, Mode
from lockstream._description import LockDescription, LockRequestInfo, description
from lockstream.errors import (
    ClientClosed,
    InvalidArgument,
    LockError,
    LockLost,
    LockTimeout,
    NotHeld,
    error_for,
    lost_error,
    status_code,
)
from lockstream.v1 import lockstream_pb2 as pb

logger = logging.getLogger("lockstream")

_MODES: dict[str, pb.LockMode] = {
    "mutex": pb.LOCK_MODE_MUTEX,
    "read": pb.LOCK_MODE_READ,
    "write": pb.LOCK_MODE_WRITE,
    "semaphore": pb.LOCK_MODE_SEMAPHORE,
}
_SERVICE = "/lockstream.v1.LockService/"
#: How long past the wait timeout a request waits for the server's own verdict (seconds).
_ANSWER_MARGIN = 5.0
#: How long a cancelled or timed-out wait waits for the server to confirm it left the queue.
_WITHDRAW_PATIENCE = 5.0
#: How long close() waits for the server to confirm that every lock was released.
_CLOSE_PATIENCE = 5.0
_RETRY_BACKOFF = 0.1
#: The client gives a broken session up this much before its grace, counted from the last
#: message heard, is over (at most a tenth of the grace): room for a timer that fires late.
_GRACE_MARGIN = 0.5
_RESUME_BACKOFF, _RESUME_BACKOFF_MAX = 0.1, 1.0
#: The longest one resume attempt waits for the endpoint's first word before the client tries
#: the next endpoint: a third of what is left of the grace, and at most this (seconds). A frozen
#: endpoint (a server paused on a connection made earlier, or stuck before it takes the session
#: over) must not eat the whole grace. (A new connection that gets no answer fails sooner by
#: itself: see grpc.min_reconnect_backoff_ms below, which is also gRPC's connect timeout.)
_ATTEMPT_PATIENCE = 1.0
# Ends of a stream that say it broke rather than what the server decided: worth a resume.
_BREAKS = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
})
_REQUEST_STATE = "lockstream-request"
_HEARTBEAT = pb.SessionRequest(heartbeat=pb.AcquireHeartbeat())

SessionCall = grpc.aio.StreamStreamCall[pb.SessionRequest, pb.SessionResponse]
#: Metadata for every call: (key, value) pairs; bytes values for keys that end in "-bin".
Metadata = Sequence[tuple[str, str | bytes]]


@dataclass(frozen=True)
class Target:
    """One lock of a multi-lock (`acquire_all`): its name and mode; for a semaphore its limit and
    this request's weight (None: 1)."""

    name: str
    mode: Mode = "mutex"
    limit: int = 0
    weight: int | None = None

    def _message(self) -> pb.LockTarget:
        name = _checks.check_name(self.name)
        mode = _checks.check_mode(name, "semaphore" if self.limit else self.mode)
        limit, weight = _checks.check_semaphore(name, mode, self.limit, self.weight)
        target = pb.LockTarget(name=name, mode=_MODES[mode], limit=limit)
        if weight is not None:
            target.weight = weight
        return target


def _duration(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def _call_safely(what: str, callback: Callable[..., object], *args: object) -> None:
    """Runs a caller's callback; what it raises is logged, never allowed to break the session."""
    try:
        callback(*args)
    except Exception:
        logger.exception("lockstream: a %s callback raised", what)


def _note_loss(error: BaseException, lost: LockLost) -> None:
    """Says on the exception that leaves a lock's block that the lock was lost as well (a note
    in its traceback, Python 3.11 and later): the block's own exception is the one raised."""
    add_note = getattr(error, "add_note", None)
    if error is not lost and add_note is not None:
        add_note(f"lockstream: the lock was lost while the block ran: {lost}")


def _cancelling() -> bool:
    """Whether the current task was asked to cancel, rather than a call it awaited being
    cancelled under it (grpc.aio cancels the calls of a channel that is closed)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11
    return task is None or cancelling is None or bool(cancelling())


@dataclass(frozen=True)
class RevokeRequest:
    """Someone asked the holder to release the lock (RevokeLock)."""

    reason: str
    #: When the lock is taken away if it is still held; None: the request is cooperative only.
    force_at: datetime | None


class Lock:
    """A held lock, from the moment `acquire` returns until `release()` or its loss.

    `token` is its fencing token: larger for every later holder of the lock. Pass it to what the
    lock protects, so that it can refuse a holder whose lock was lost. `lost` is set if the lock
    is lost before it is released (never after a release).
    """

    def __init__(self, session: _Session, request: _Request, acquired: pb.AcquireAcquired) -> None:
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
        return self._request.state == _HELD

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
            _call_safely("lost", callback, self.error)
        else:
            self._on_lost.append(callback)

    def on_revoke_requested(self, callback: Callable[[RevokeRequest], object]) -> None:
        """Calls `callback(request)` when someone asks for the lock back (at once if they did):
        a cooperative request (`force_at` None), and again if a later one adds a deadline."""
        if self.revoke is not None:
            _call_safely("revoke", callback, self.revoke)
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
            if self._request.state != _HELD:
                raise NotHeld(self.name)
            self._start_release()
        # Cancelling the wait does not stop the release.
        await self._request.ended.wait()
        if self.error is not None:
            raise self.error

    def _start_release(self) -> None:
        self._releasing = True
        self._request.state = _RELEASING
        self._session.send(self._request.release_message())

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
        if self._request.state != _HELD:
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
            _call_safely("in-doubt", callback, doubt)

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
            _call_safely("revoke", callback, self.revoke)

    def _lose(self, error: LockLost) -> None:
        if self.error is not None:
            return
        self.error = error
        self._in_doubt = False
        self.lost.set()
        for callback in self._on_lost:
            _call_safely("lost", callback, error)
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
            _note_loss(error, lost)


# Request states: waiting for a grant; given up while waiting (the caller is gone); held;
# being released; over (its `ended` arrived, or the session ended).
_WAITING, _CANCELLED, _HELD, _RELEASING, _ENDED = "waiting", "cancelled", "held", "releasing", "ended"


class _Request:
    """One lock request of the session, from `acquire` to `ended`."""

    def __init__(self, request_id: int, name: str, mode: Mode, message: pb.SessionAcquire,
                 timeout: float | None, on_queued: Callable[[int], object] | None) -> None:
        loop = asyncio.get_running_loop()
        self.id = request_id
        self.name = name
        self.mode = mode
        self.message = message
        self.message.request_id = request_id
        self.timeout = timeout
        self.deadline = None if timeout is None else loop.time() + timeout
        self.on_queued = on_queued
        self.state = _WAITING
        #: Whether its `acquire` went out on a stream (the server may have heard of it).
        self.sent = False
        #: Whether the server reported it since the current resume began.
        self.reported = False
        self.lock: Lock | None = None
        #: Why it ended before a grant.
        self.failure: LockError | None = None
        #: Set at the grant or at the end, whichever comes first.
        self.decided = asyncio.Event()
        self.ended = asyncio.Event()
        #: set_value and downgrade sent and not yet answered, oldest first: (answer, message, done).
        self.pending: list[tuple[str, pb.SessionRequest, asyncio.Future[None]]] = []

    def acquire_message(self) -> pb.SessionRequest:
        return pb.SessionRequest(acquire=self.message)

    def release_message(self) -> pb.SessionRequest:
        return pb.SessionRequest(release=pb.SessionRelease(request_id=self.id))

    def cancel_message(self) -> pb.SessionRequest:
        return pb.SessionRequest(cancel=pb.SessionCancel(request_id=self.id))


class _Stream:
    """One Session call and the tasks serving it."""

    def __init__(self, call: SessionCall, now: float, endpoint: str) -> None:
        self.call = call
        self.endpoint = endpoint
        # None: half-close.
        self.outbox: asyncio.Queue[pb.SessionRequest | None] = asyncio.Queue()
        self.heard = now
        #: Whether the server said anything on it yet.
        self.answered = False
        self.over = False
        self.cancel_reason = ""
        self.tasks: list[asyncio.Task[None]] = []
        #: Cuts a resume attempt that the endpoint does not answer in time.
        self.attempt_timer: asyncio.TimerHandle | None = None


class _SessionOver(Exception):
    """The session ended before a request could be queued on it: take the next one."""


class _Session:
    """The Session stream of a Client, and its successors after resumes."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._loop = asyncio.get_running_loop()
        self.requests: dict[int, _Request] = {}
        self._last_id = 0
        self._stream: _Stream | None = None
        self._resume_token = ""
        self._resume_grace = 0.0
        #: loop.time() of the last message from the server, on any stream of the session.
        self._heard = self._loop.time()
        self._resuming = False
        self._resume_attempts = 0
        self._resume_cause = ""
        #: loop.time() when a resume under way is given up (the grace, less its margin, is over).
        self._give_up_at = 0.0
        self._give_up_timer: asyncio.TimerHandle | None = None
        #: How many endpoints were tried to open the session (before the server said `opened`).
        self._open_attempts = 1
        self._timers: list[asyncio.TimerHandle] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.ended = False
        self._done = asyncio.Event()
        #: Whether the server opened the session (sent `opened`): it may have held locks.
        self._opened = False
        self._open(None)

    # -- streams ----------------------------------------------------------------------------------

    def _open(self, resume_token: str | None) -> None:
        """Opens a stream that starts with `open` (or `resume`, while resuming)."""
        options = self._client._options
        stream = _Stream(self._client._session_call(), self._loop.time(), self._client.endpoint)
        if resume_token is None:
            opening = pb.SessionOpen()
            if options.resume_grace > 0:
                opening.resume_grace.CopyFrom(_duration(options.resume_grace))
            if options.heartbeat_interval > 0:
                opening.heartbeat_interval.CopyFrom(_duration(options.heartbeat_interval))
            stream.outbox.put_nowait(pb.SessionRequest(open=opening))
        else:
            resume = pb.SessionResume(resume_token=resume_token)
            if options.heartbeat_interval > 0:
                resume.heartbeat_interval.CopyFrom(_duration(options.heartbeat_interval))
            stream.outbox.put_nowait(pb.SessionRequest(resume=resume))
            patience = min(_ATTEMPT_PATIENCE, max(0.0, self._give_up_at - self._loop.time()) / 3)
            stream.attempt_timer = self._loop.call_later(patience, self._unanswered, stream, patience)
        self._stream = stream
        stream.tasks = [self._spawn(self._write(stream)), self._spawn(self._read(stream)),
                        self._spawn(self._heartbeats(stream))]

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def send(self, message: pb.SessionRequest) -> bool:
        """Queues `message` on the current stream, in order. Nothing is sent while the session is
        being resumed: once it is, what each request still needs is sent again (see _resumed)."""
        stream = self._stream
        if stream is None or stream.over or self._resuming:
            return False
        stream.outbox.put_nowait(message)
        return True

    async def _write(self, stream: _Stream) -> None:
        while True:
            message = await stream.outbox.get()
            try:
                if message is None:
                    await stream.call.done_writing()
                    return
                await stream.call.write(message)
            except asyncio.CancelledError:
                raise
            except Exception:
                return  # the call is over: _read reports how

    async def _read(self, stream: _Stream) -> None:
        call = stream.call
        code, details, trailers = grpc.StatusCode.OK, "", None
        try:
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    break
                stream.heard = self._loop.time()
                if not stream.answered:
                    stream.answered = True
                    if stream.attempt_timer is not None:
                        stream.attempt_timer.cancel()
                if stream is self._stream:
                    self._heard = stream.heard
                if isinstance(message, pb.SessionResponse):
                    try:
                        self._handle(stream, message)
                    except Exception:
                        logger.exception("lockstream: failed to handle %s", message)
            code, details = await call.code(), await call.details()
            trailers = await call.trailing_metadata()
        except grpc.aio.AioRpcError as error:
            code, details, trailers = error.code(), error.details() or "", error.trailing_metadata()
        except asyncio.CancelledError:
            if not call.cancelled():
                raise  # this task was cancelled: the session is being torn down
            code, details = grpc.StatusCode.CANCELLED, stream.cancel_reason or "the call was cancelled"
        self._broken(stream, code, details or "", trailers)

    async def _heartbeats(self, stream: _Stream) -> None:
        """A heartbeat every interval; three intervals without a word from the server count as a
        broken stream (a connection that silently died, or a proxy answering for a dead server)."""
        interval = self._client._options.heartbeat_interval
        if interval <= 0:
            return
        next_beat = self._loop.time() + interval
        while not stream.over:
            silence_at = stream.heard + 3 * interval
            await asyncio.sleep(max(0.0, min(next_beat, silence_at) - self._loop.time()))
            if stream.over:
                return
            now = self._loop.time()
            if now >= stream.heard + 3 * interval:
                stream.cancel_reason = (f"nothing heard from the server for {now - stream.heard:.1f} s, "
                                        "3 heartbeat intervals")
                stream.call.cancel()
                return
            if now >= next_beat:
                stream.outbox.put_nowait(_HEARTBEAT)
                next_beat = now + interval

    def _unanswered(self, stream: _Stream, patience: float) -> None:
        """A resume attempt heard nothing from its endpoint in time: cut it (the next attempt
        goes to the next endpoint)."""
        if stream is self._stream and not stream.over and not stream.answered:
            stream.cancel_reason = f"no answer from {stream.endpoint} within {patience:.2f} s"
            stream.call.cancel()

    def _retire(self, stream: _Stream) -> None:
        stream.over = True
        if stream.attempt_timer is not None:
            stream.attempt_timer.cancel()
        current = asyncio.current_task()
        for task in stream.tasks:
            if task is not current:
                task.cancel()
        stream.call.cancel()

    def _broken(self, stream: _Stream, code: grpc.StatusCode, details: str, trailers: Any) -> None:
        """The stream ended with `code`: resume the session on a new one, or end it."""
        if stream.over or self._stream is not stream:
            return
        self._retire(stream)
        self._stream = None
        if self.ended:
            return
        if self.closing:
            self._finish(code, details)
            return
        over = any(key == _REQUEST_STATE and "ended" in str(value) for key, value in (trailers or ()))
        if (code in _BREAKS and not over and self._resume_token and self._resume_grace > 0):
            self._resume(code, details)
            return
        if code in _BREAKS and not self._opened and not stream.answered and self._open_elsewhere(
                stream, details or code.name):
            return
        if self._resuming:
            details = f"the session could not be resumed: {details or code.name}"
        self._finish(code, details)

    def _open_elsewhere(self, stream: _Stream, why: str) -> bool:
        """The stream that was to open the session broke before the server said a word (the
        endpoint refused or dropped the connection): opens the session on the next endpoint, with
        the requests made meanwhile. False once every endpoint was tried."""
        if self._open_attempts >= len(self._client.endpoints):
            return False
        self._open_attempts += 1
        endpoint = self._client._next_endpoint()
        logger.info("lockstream: could not open a session on %s (%s); trying %s", stream.endpoint, why, endpoint)
        for request in list(self.requests.values()):
            request.sent = False
            if request.state == _CANCELLED:
                self._end(request, grpc.StatusCode.CANCELLED, "withdrawn before it was sent")
        try:
            self._open(None)
        except Exception as error:  # the channel was closed
            self._finish(grpc.StatusCode.UNAVAILABLE, f"the session could not be opened: {error}")
            return True
        for request in self.requests.values():
            if request.state == _WAITING:
                request.sent = self.send(request.acquire_message())
        return True

    def _resume(self, code: grpc.StatusCode, details: str) -> None:
        """Opens another stream with the resume token, on the next endpoint in turn (the same
        one, for a client of one endpoint): now after a first break, after a backoff after the
        next ones, until one is taken over or the grace is over. Each attempt that hears nothing
        is cut after a third of what is left of the grace, at most 1 s. Held locks are in doubt
        from the break on.

        The grace is counted from the last message heard from the server, not from the break:
        the server counts from when it noticed the break, which is no earlier than the last
        message it sent, so the client gives up (and its locks are lost) before the server can
        free them, however late either side noticed."""
        if not self._resuming:
            self._resuming = True
            self._resume_attempts = 0
            self._resume_cause = details or code.name
            for request in self.requests.values():
                if request.lock is not None and request.state in (_HELD, _RELEASING):
                    request.lock._doubt(True)
        # A resumed stream that broke again before `resumed` may have been heard from since.
        if self._give_up_timer is not None:
            self._give_up_timer.cancel()
        deadline = self._heard + self._resume_grace - self._grace_margin()
        if deadline <= self._loop.time():
            self._give_up()
            return
        self._give_up_at = deadline
        self._give_up_timer = self._loop.call_at(deadline, self._give_up)
        # The first round of the endpoints goes at once; an endpoint tried again waits a backoff.
        rounds = self._resume_attempts // len(self._client.endpoints)
        delay = 0.0
        if rounds > 0:
            delay = random.uniform(0, min(_RESUME_BACKOFF_MAX, _RESUME_BACKOFF * 2 ** rounds))
        self._resume_attempts += 1
        left = self._client.endpoint
        if self._client._next_endpoint() != left:
            logger.info("lockstream: the session's stream to %s ended (%s); resuming it on %s",
                        left, details or code.name, self._client.endpoint)
        self._timers.append(self._loop.call_later(delay, self._reopen))

    def _reopen(self) -> None:
        if not self._resuming or self.ended or self.closing:
            return
        for request in self.requests.values():
            request.reported = False
        try:
            self._open(self._resume_token)
        except Exception as error:  # the channel was closed
            self._finish(grpc.StatusCode.UNAVAILABLE, f"the session could not be resumed: {error}")

    def _grace_margin(self) -> float:
        return min(_GRACE_MARGIN, self._resume_grace / 10)

    def _give_up(self) -> None:
        if self._resuming and not self.ended:
            within = self._resume_grace - self._grace_margin()
            count = len(self._client.endpoints)
            where = f" on any of its {count} endpoints" if count > 1 else ""
            self._finish(grpc.StatusCode.UNAVAILABLE,
                         f"the stream to the server broke ({self._resume_cause}) and was not resumed{where} "
                         f"within {within:g} s of its last message (the {self._resume_grace:g} s resume "
                         "grace, less a margin)")

    # -- what the server says ------------------------------------------------------------------

    def _handle(self, stream: _Stream, message: pb.SessionResponse) -> None:
        if stream is not self._stream:
            return
        kind = message.WhichOneof("kind")
        if message.request_id == 0:
            if kind == "opened":
                self._opened = True
                self._resume_token = message.opened.resume_token
                self._resume_grace = message.opened.resume_grace.ToNanoseconds() / 1e9
            elif kind == "resumed":
                self._resumed()
            return  # heartbeat, or what a newer server says about the session
        request = self.requests.get(message.request_id)
        if request is None:
            return
        if self._resuming:
            request.reported = True
        lock, state = request.lock, request.state
        if kind == "queued":
            if state == _WAITING and request.on_queued is not None:
                _call_safely("queued", request.on_queued, message.queued.ahead)
        elif kind == "acquired":
            if state == _WAITING:
                request.state = _HELD
                request.lock = Lock(self, request, message.acquired)
                request.decided.set()
            elif lock is not None:
                lock._doubt(False)  # a resumed session's report: still ours, same token
            # Cancelled: a grant that crossed our cancel; the server releases it on the cancel.
        elif kind == "in_doubt":
            if lock is not None and state in (_HELD, _RELEASING):
                lock._doubt(True)
        elif kind == "confirmed":
            if lock is not None:
                lock._doubt(False)
        elif kind == "revoke_requested":
            if lock is not None and state == _HELD:
                lock._revoke(message.revoke_requested)
        elif kind in ("value_set", "downgraded"):
            for index, (answer, _, done) in enumerate(request.pending):
                if answer == kind:
                    del request.pending[index]
                    if lock is not None:
                        lock._acknowledged(answer)
                    if not done.done():
                        done.set_result(None)
                    break
        elif kind == "ended":
            self._end(request, message.ended.code, message.ended.message)

    def _cancel_timers(self) -> None:
        """Stops the resume's give-up timer and every attempt timer: the session was resumed, or is over."""
        if self._give_up_timer is not None:
            self._give_up_timer.cancel()
            self._give_up_timer = None
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def _resumed(self) -> None:
        """The server took the resumed stream over and reported every request it still has.
        What it did not report, it does not have: that request ended with its `ended` lost in the
        break, or its `acquire` never arrived. What a reported request was sent last without an
        answer (release, cancel, set_value, downgrade: all harmless twice) is sent again."""
        self._resuming = False
        self._cancel_timers()
        for request in list(self.requests.values()):
            state = request.state
            if request.reported:
                if request.lock is not None:
                    request.lock._doubt(False)
                for _, message, _ in request.pending:
                    self.send(message)
                if state == _RELEASING:
                    self.send(request.release_message())
                elif state == _CANCELLED:
                    self.send(request.cancel_message())
            elif not request.sent:
                if state == _WAITING:
                    request.sent = self.send(request.acquire_message())
                else:
                    self._end(request, grpc.StatusCode.CANCELLED, "withdrawn before it was sent")
            elif state == _WAITING:
                # Retryable (Client.acquire queues it again, at the back, for what is left of its wait).
                self._end(request, grpc.StatusCode.UNAVAILABLE,
                          "the request lost its place in the queue while the session was being resumed")
            elif state == _HELD:
                self._end(request, grpc.StatusCode.NOT_FOUND,
                          "the server no longer has the lock after the session was resumed")
            else:
                self._end(request, grpc.StatusCode.OK, "")

    def _end(self, request: _Request, code: int | grpc.StatusCode, message: str,
             error: LockError | None = None) -> None:
        """The request is over with `code`, as it stood."""
        if request.state == _ENDED:
            return
        was, request.state = request.state, _ENDED
        if self.requests.get(request.id) is request:
            del self.requests[request.id]
        status = status_code(code)
        lock = request.lock
        loss: LockLost | None = None
        if was in (_WAITING, _CANCELLED):
            if self.closing:
                error = ClientClosed(request.name)
            request.failure = error or (error_for(request.name, status, message) if status != grpc.StatusCode.OK
                                        else LockError(request.name, grpc.StatusCode.UNKNOWN,
                                                       "the request ended without a grant"))
        elif was == _HELD and lock is not None:
            loss = lost_error(request.name, status, message) if status != grpc.StatusCode.OK else LockLost(
                request.name, grpc.StatusCode.UNKNOWN, "the server ended the request without a release")
        elif was == _RELEASING and lock is not None and status != grpc.StatusCode.OK:
            loss = lost_error(request.name, status, message)
        if loss is not None and lock is not None:
            lock._lose(loss)
        if request.pending:
            failure: LockError = loss or (lock.error if lock is not None and lock.error else
                                          ClientClosed(request.name) if self.closing else
                                          NotHeld(request.name, "the lock was released first"))
            for _, _, done in request.pending:
                if not done.done():
                    done.set_exception(failure)
            request.pending.clear()
        request.decided.set()
        request.ended.set()

    def _finish(self, code: grpc.StatusCode, details: str) -> None:
        """Ends the session: every request ends with it (held locks lost, unless let go)."""
        if self.ended:
            return
        self.ended = True
        self._resuming = False
        self._cancel_timers()
        if self._stream is not None:
            self._retire(self._stream)
            self._stream = None
        why = details or code.name
        for request in list(self.requests.values()):
            if request.state == _RELEASING and self.closing:
                self._end(request, grpc.StatusCode.OK, "")
            elif request.state == _CANCELLED:
                self._end(request, grpc.StatusCode.CANCELLED, why)
            elif request.state == _WAITING:
                # A broken session holds and queues nothing for it any more: retryable.
                broke = code in _BREAKS or code in (grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND)
                self._end(request, code, why, error_for(
                    request.name, grpc.StatusCode.UNAVAILABLE if broke else code, why))
            else:
                lost = grpc.StatusCode.UNAVAILABLE if code == grpc.StatusCode.OK else code
                self._end(request, lost, why)
        self._done.set()
        if self._opened or self.closing:
            self._client._session_over()

    # -- requests ---------------------------------------------------------------------------------

    def _new_id(self) -> int:
        while True:
            self._last_id = self._last_id % 0xFFFFFFFF + 1
            if self._last_id not in self.requests:
                return self._last_id

    async def acquire(self, name: str, mode: Mode, message: pb.SessionAcquire, timeout: float | None,
                      on_queued: Callable[[int], object] | None) -> Lock:
        if self.ended or self.closing:
            raise _SessionOver()
        request = _Request(self._new_id(), name, mode, message, timeout, on_queued)
        self.requests[request.id] = request
        request.sent = self.send(request.acquire_message())
        # The server decides the wait timeout; this bounds the wait for its verdict.
        bound = None if timeout is None else timeout + _ANSWER_MARGIN
        try:
            await asyncio.wait_for(request.decided.wait(), bound)
        except asyncio.TimeoutError:
            await self._withdraw(request)
            raise LockTimeout(name, grpc.StatusCode.DEADLINE_EXCEEDED,
                              f"no answer from the server within {bound:g} s") from None
        except BaseException:
            # Cancelled or interrupted while waiting: leave the queue (or give back a grant that
            # crossed the cancel) before going on.
            await self._withdraw(request)
            raise
        if request.lock is not None:
            return request.lock
        assert request.failure is not None
        raise request.failure

    async def _withdraw(self, request: _Request) -> None:
        """Gives the request up and waits (a little) for the server to confirm."""
        if request.state == _WAITING:
            request.state = _CANCELLED
            if request.sent:
                self.send(request.cancel_message())
            elif not self._resuming:
                self._end(request, grpc.StatusCode.CANCELLED, "withdrawn before it was sent")
        elif request.state == _HELD and request.lock is not None:
            request.lock._start_release()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(request.ended.wait(), _WITHDRAW_PATIENCE)

    async def close(self) -> None:
        """Releases every lock, withdraws every request, and ends the session."""
        if self.ended:
            return
        self.closing = True
        for request in list(self.requests.values()):
            if request.state == _WAITING:
                request.state = _CANCELLED
                # The waiter fails now, not once the server confirms (it may not be reachable).
                request.failure = ClientClosed(request.name)
                request.decided.set()
                self.send(request.cancel_message())
            elif request.state == _HELD and request.lock is not None:
                request.lock._start_release()
        stream = self._stream
        if stream is not None and not stream.over and not self._resuming:
            stream.outbox.put_nowait(None)  # half-close: the server releases what is left
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), _CLOSE_PATIENCE)
        self._finish(grpc.StatusCode.CANCELLED, "the client was closed")
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Options:
    def __init__(self, owner: str, resume_grace: float, heartbeat_interval: float,
                 metadata: tuple[tuple[str, str | bytes], ...], unavailable_retries: int) -> None:
        self.owner = owner
        self.resume_grace = resume_grace
        self.heartbeat_interval = heartbeat_interval
        self.metadata = metadata
        self.unavailable_retries = unavailable_retries


class Client:
    """Takes locks on a lockstream server, on asyncio. Close it when done (`async with`).

    `target`: "host:port", or any gRPC target ("dns:///locks.internal:50051": gRPC resolves
    it to every address of the name and connects to another on the same channel when a
    connection is lost, so a name with several addresses is one endpoint); or a list of
    them, the client's endpoints: requests go to one at a time, the first to begin with. When
    the session's stream breaks (a lost connection, UNAVAILABLE, three silent heartbeat
    intervals), the client resumes the session on the next endpoint, and so on round the list
    until one takes the resume or the grace is over; each attempt that hears nothing is cut
    after a third of what is left of the grace, at most 1 s, so that a frozen endpoint does not
    eat the grace. Held locks are in doubt meanwhile, lost when the grace runs out or a server
    answers that it does not have the session (NOT_FOUND); acquires made meanwhile wait for the
    session. A session that cannot be opened on an endpoint (refused) is opened on the next.
    `owner`: who is asking, shown to operators (each acquire may say otherwise).
    `resume_grace` (seconds, default 5): how long the server keeps this client's locks after its
    stream breaks, for the client to take them over on a new one; also the lock-delay after this
    process dies. Capped by the server's --max-resume-grace. 0: a broken stream loses every lock.
    The client counts it from the last message it heard from the server, less a tenth (at most
    0.5 s): its locks are lost before the server, which counts from when it noticed the break,
    can free them.
    `heartbeat_interval` (seconds, default 1; 0: none): heartbeats both ways; three intervals
    without a word from the server count as a broken stream, and its locks are in doubt from
    then on. Keep three intervals shorter than the grace less its margin (the defaults: 3 s and
    4.5 s), so that a silent path is noticed by itself, whatever gRPC keepalive does.
    `credentials`: TLS (grpc.ssl_channel_credentials(...)); plaintext without.
    `token`: a bearer token for the server's access policy (`authorization: Bearer <token>`).
    `metadata`: more metadata for every call.
    `unavailable_retries` (default 2): how many times an acquire tries again when the server
    answers UNAVAILABLE before a grant (never after one: a lost lock is reported, not retaken).
    `channel_options`: more grpc channel arguments; they override the client's.
    """

    def __init__(self, target: str | Sequence[str], *, owner: str = "", resume_grace: float = 5.0,
                 heartbeat_interval: float = 1.0, credentials: grpc.ChannelCredentials | None = None,
                 token: str | None = None, metadata: Metadata = (), unavailable_retries: int = 2,
                 channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        endpoints = _checks.check_endpoints(target)
        if credentials is not None and not isinstance(credentials, grpc.ChannelCredentials):
            raise InvalidArgument("", "credentials must be grpc.ChannelCredentials (grpc.ssl_channel_credentials), "
                                      f"not {type(credentials).__name__}")
        headers = _checks.check_metadata(metadata)
        if token is not None:
            if not (isinstance(token, str) and token.isascii() and token.isprintable() and " " not in token
                    and token):
                raise InvalidArgument("", "token must be a non-empty str of printable ASCII without spaces")
            headers += (("authorization", f"Bearer {token}"),)
        self._options = _Options(
            _checks.check_owner("", owner), _checks.check_seconds("", "resume_grace", resume_grace),
            _checks.check_heartbeat_interval(heartbeat_interval), headers,
            _checks.check_count("", "unavailable_retries", unavailable_retries, 0, 100))
        self._endpoints = endpoints
        #: The index in `_endpoints` of the endpoint requests go to.
        self._current = 0
        self._credentials = credentials
        self._channel_options: list[tuple[str, Any]] = [
            # gRPC notices a dead connection within about 6 s too (heartbeats, on by default, within
            # 3 s): this also serves a client without heartbeats.
            ("grpc.keepalive_time_ms", 3000),
            ("grpc.keepalive_timeout_ms", 3000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            # Resumes must get through within the grace: reconnect quickly after a break.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            *_checks.check_channel_options(channel_options),
        ]
        #: One channel per endpoint, made on first use.
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._session: _Session | None = None
        self._closed = False
        self._done = asyncio.Event()
        #: Told True when `done` is set, False when a new `done` replaces it (on the event loop):
        #: how the blocking client mirrors it.
        self._done_watchers: list[Callable[[bool], object]] = []

    @property
    def closed(self) -> bool:
        """Whether `close()` was called: every call raises ClientClosed from then on."""
        return self._closed

    @property
    def done(self) -> asyncio.Event:
        """Set when every lock of the client is gone at once, as etcd's Session.Done(): the client
        was closed, or its session ended without it (its stream broke and was not resumed within
        the grace, or the server no longer had it), and every lock it held is lost. A later
        acquire opens a new session, and `done` is a new event from then on: take it while you
        hold the locks it is about (`await client.done.wait()`)."""
        return self._done

    def _session_over(self) -> None:
        if not self._done.is_set():
            self._done.set()
            for watcher in self._done_watchers:
                _call_safely("done", watcher, True)

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The addresses the client was given, in the order it tries them."""
        return self._endpoints

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to now: the first, until a session fails over."""
        return self._endpoints[self._current]

    def _next_endpoint(self) -> str:
        """Moves on to the next endpoint in turn (the same one, for a client of one endpoint)."""
        self._current = (self._current + 1) % len(self._endpoints)
        return self.endpoint

    @property
    def channel(self) -> grpc.aio.Channel:
        """The gRPC channel to the current endpoint, made on first use (on the running event loop)."""
        return self._channel_to(self.endpoint)

    def _channel_to(self, endpoint: str) -> grpc.aio.Channel:
        if self._closed:
            raise ClientClosed()
        channel = self._channels.get(endpoint)
        if channel is None:
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(endpoint, self._credentials, options=self._channel_options)
            else:
                channel = grpc.aio.insecure_channel(endpoint, options=self._channel_options)
            self._channels[endpoint] = channel
        return channel

    def _session_call(self) -> SessionCall:
        method = self.channel.stream_stream(
            _SERVICE + "Session",
            request_serializer=pb.SessionRequest.SerializeToString,
            response_deserializer=pb.SessionResponse.FromString,
        )
        call: SessionCall = method(metadata=self._options.metadata)  # type: ignore[assignment]
        return call

    def _current_session(self) -> _Session:
        if self._closed:
            raise ClientClosed()
        if self._session is None or self._session.ended:
            if self._done.is_set():
                self._done = asyncio.Event()
                for watcher in self._done_watchers:
                    _call_safely("done", watcher, False)
            self._session = _Session(self)
        return self._session

    async def acquire(self, name: str, *, mode: Mode = "mutex", timeout: float | None = None,
                      owner: str | None = None, value: bytes | str = b"", limit: int = 0,
                      weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> Lock:
        """Waits until the lock is granted and returns it; release it with `await lock.release()`
        (or use `async with client.lock(...)`).

        `mode`: "mutex" (default), "read", "write"; "semaphore" when `limit` is given (up to
        `limit` holders' `weight`s at once). `timeout`: seconds to wait in the queue, then
        LockTimeout; 0 tries once; None waits as long as it takes. `value`: published with the
        request (see Lock.set_value). `on_queued(ahead)`: called while it waits, whenever the
        number of requests ahead changes. Cancelling the wait leaves the queue.

        Raises InvalidArgument, before anything is sent, for what the server would refuse (a
        name that is empty, over 512 bytes of UTF-8 or has control characters; a value over 1024
        bytes; a bad mode, timeout, limit or weight); LockError, with the server's code and
        message, for anything else (PermissionDenied, LockError(UNAVAILABLE), ...).
        """
        name = _checks.check_name(name)
        mode = _checks.check_mode(name, "semaphore" if limit else mode)
        limit, weight = _checks.check_semaphore(name, mode, limit, weight)
        message = pb.SessionAcquire(
            name=name, mode=_MODES[mode], value=_checks.check_value(name, value), limit=limit,
            owner=self._options.owner if owner is None else _checks.check_owner(name, owner))
        if weight is not None:
            message.weight = weight
        return await self._acquire(name, mode, message, self._timeout(name, timeout), on_queued)

    @staticmethod
    def _timeout(name: str, timeout: object) -> float | None:
        return None if timeout is None else _checks.check_seconds(name, "timeout", timeout)

    async def _acquire(self, name: str, mode: Mode, message: pb.SessionAcquire, timeout: float | None,
                       on_queued: Callable[[int], object] | None) -> Lock:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        attempt = 0
        while True:
            # A retry waits only for what is left of the first attempt's wait.
            left = timeout if deadline is None or timeout == 0 else max(0.0, deadline - loop.time())
            attempt_message = pb.SessionAcquire()
            attempt_message.CopyFrom(message)
            if left is not None:
                attempt_message.wait_timeout.CopyFrom(_duration(left))
            try:
                session = self._current_session()
                return await session.acquire(name, mode, attempt_message, left, on_queued)
            except _SessionOver:
                await asyncio.sleep(0)
                continue
            except ClientClosed:
                raise ClientClosed(name) from None
            except LockError as error:
                retry = (error.code == grpc.StatusCode.UNAVAILABLE and not self._closed
                         and attempt < self._options.unavailable_retries
                         and (deadline is None or timeout == 0 or loop.time() < deadline))
                if not retry:
                    raise
            await asyncio.sleep(_RETRY_BACKOFF * 2 ** attempt)
            attempt += 1

    def lock(self, name: str, *, mode: Mode = "mutex", timeout: float | None = None,
             owner: str | None = None, value: bytes | str = b"", limit: int = 0,
             weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> _LockContext:
        """`async with client.lock(name, mode="write", timeout=5) as lock:` holds the lock for
        the block (see `acquire`); `lock = await client.lock(...)` works too."""
        return _LockContext(self.acquire(name, mode=mode, timeout=timeout, owner=owner, value=value,
                                         limit=limit, weight=weight, on_queued=on_queued))

    async def try_lock(self, name: str, *, mode: Mode = "mutex", owner: str | None = None,
                       value: bytes | str = b"", limit: int = 0, weight: int | None = None) -> Lock | None:
        """Takes the lock if it can be granted now, without queuing: the Lock, or None when it
        is held in a conflicting mode or others wait ahead (not acquiring is an answer, as for
        threading.Lock.acquire(blocking=False)). Nothing is left queued. Other failures raise."""
        try:
            return await self.acquire(name, mode=mode, timeout=0, owner=owner, value=value, limit=limit,
                                      weight=weight)
        except LockTimeout:
            return None

    async def acquire_all(self, targets: Sequence[str | Target], *, timeout: float | None = None,
                          owner: str | None = None, value: bytes | str = b"",
                          on_queued: Callable[[int], object] | None = None) -> Lock:
        """Takes every lock in `targets` (names, for mutexes, or Targets) at once, or none: the
        server queues them in one step (so two multi-locks never deadlock) and grants them
        together. One wait, one release, one loss for the set; `lock.tokens` has each lock's
        token, `lock.name` the names joined with "+"."""
        if isinstance(targets, (str, bytes)) or not isinstance(targets, Sequence):
            raise InvalidArgument("", f"targets must be a list of names or Targets, not {type(targets).__name__}")
        locks = [target if isinstance(target, Target) else Target(target) for target in targets]
        wire = [target._message() for target in locks]  # checks each
        name = "+".join(target.name for target in locks)
        if not _checks.MULTI_LOCK_MIN <= len(locks) <= _checks.MULTI_LOCK_MAX:
            raise InvalidArgument(name, f"a multi-lock takes {_checks.MULTI_LOCK_MIN} to {_checks.MULTI_LOCK_MAX} locks, "
                                        f"not {len(locks)}")
        if len({target.name for target in locks}) < len(locks):
            raise InvalidArgument(name, "a multi-lock names a lock twice")
        message = pb.SessionAcquire(
            locks=wire, value=_checks.check_value(name, value),
            owner=self._options.owner if owner is None else _checks.check_owner(name, owner))
        return await self._acquire(name, "mutex", message, self._timeout(name, timeout), on_queued)

    def lock_all(self, targets: Sequence[str | Target], *, timeout: float | None = None,
                 owner: str | None = None, value: bytes | str = b"",
                 on_queued: Callable[[int], object] | None = None) -> _LockContext:
        """`async with client.lock_all([...]) as lock:` holds every lock of the set for the block."""
        return _LockContext(self.acquire_all(targets, timeout=timeout, owner=owner, value=value,
                                             on_queued=on_queued))

    async def describe(self, name: str) -> LockDescription:
        """Who holds the lock and who waits for it, first in line first (DescribeLock), across
        every server on the back end."""
        name = _checks.check_name(name)
        response: pb.DescribeLockResponse = await self._unary(
            "DescribeLock", name, pb.DescribeLockRequest(name=name), pb.DescribeLockResponse)
        return description(response)

    async def check_token(self, name: str, token: int) -> bool:
        """Whether `token` is held for the lock right now (CheckToken): for resources that check
        the fencing tokens of their callers."""
        name = _checks.check_name(name)
        token = _checks.check_token(name, token)
        response: pb.CheckTokenResponse = await self._unary(
            "CheckToken", name, pb.CheckTokenRequest(name=name, fencing_token=token), pb.CheckTokenResponse)
        return response.held

    async def _unary(self, method: str, name: str, request: Any, response_type: Any) -> Any:
        """Calls a unary method on the current endpoint, and on the next ones in turn while they
        answer UNAVAILABLE (it needs no session); its failures as LockError (ClientClosed once
        the client is closed)."""
        count = len(self._endpoints)
        for offset in range(count):
            call = self._channel_to(self._endpoints[(self._current + offset) % count]).unary_unary(
                _SERVICE + method,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_type.FromString,
            )
            try:
                return await call(request, metadata=self._options.metadata)
            except grpc.aio.AioRpcError as error:
                if self._closed:
                    raise ClientClosed(name) from None
                if error.code() == grpc.StatusCode.UNAVAILABLE and offset + 1 < count:
                    continue
                raise error_for(name, error.code(), error.details() or "") from None
            except asyncio.CancelledError:
                if self._closed and not _cancelling():
                    raise ClientClosed(name) from None
                raise
        raise AssertionError("INVARIANT: a client has at least one endpoint")

    async def close(self) -> None:
        """Releases every lock of the client, withdraws its waiting requests (they raise
        ClientClosed) and closes its channel. Idempotent."""
        if self._closed:
            return
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        for channel in self._channels.values():
            await channel.close()
        self._session_over()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _LockContext:
    """What Client.lock returns: awaitable (the Lock), and an async context manager that holds
    the lock for its block."""

    def __init__(self, acquiring: Any) -> None:
        self._acquiring = acquiring
        self._lock: Lock | None = None

    def __await__(self) -> Generator[Any, None, Lock]:
        lock: Lock = yield from self._acquiring.__await__()
        return lock

    async def __aenter__(self) -> Lock:
        self._lock = await self._acquiring
        return self._lock

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: object) -> None:
        if self._lock is not None:
            await self._lock.__aexit__(kind, error, traceback)


__all__ = ["Client", "Lock", "LockDescription", "LockRequestInfo", "Mode", "RevokeRequest", "Target",
           "VALUE_MAX_BYTES"]
