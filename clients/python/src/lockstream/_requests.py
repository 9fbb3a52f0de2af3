"""The lock requests of a session: each one's state from acquire to end, the table of them by id,
what the server says about each, and what ending one means for its waiter or its lock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

import grpc

from lockstream._callbacks import call_safely
from lockstream._checks import Mode
from lockstream._lock import Lock, LockSession
from lockstream._grant import StartOver, verdict
from lockstream._stream import BREAKS
from lockstream.errors import (
    ClientClosed,
    LockError,
    LockLost,
    NotHeld,
    error_for,
    lost_error,
    status_code,
)
from lockstream.v1 import lockstream_pb2 as pb

#: How long a cancelled or timed-out wait waits for the server to confirm it left the queue.
_WITHDRAW_PATIENCE = 5.0

# Request states: waiting for a grant; given up while waiting (the caller is gone); held;
# being released; over (its `ended` arrived, or the session ended).
WAITING, CANCELLED, HELD, RELEASING, ENDED = "waiting", "cancelled", "held", "releasing", "ended"


class RequestsSession(LockSession, Protocol):
    """What the requests need of their session (a _session.Session): what their locks need, and
    whether the session ended or is being resumed."""

    @property
    def ended(self) -> bool: ...

    @property
    def resuming(self) -> bool: ...


class SessionOver(StartOver):
    """The session ended before a request could be queued on it: take the next one."""


class Request:
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
        self.state = WAITING
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

    @property
    def held(self) -> bool:
        return self.state == HELD

    def start_release(self) -> pb.SessionRequest:
        """The request is being released from now on: the message that releases it."""
        self.state = RELEASING
        return self.release_message()

    def acquire_message(self) -> pb.SessionRequest:
        return pb.SessionRequest(acquire=self.message)

    def release_message(self) -> pb.SessionRequest:
        return pb.SessionRequest(release=pb.SessionRelease(request_id=self.id))

    def cancel_message(self) -> pb.SessionRequest:
        return pb.SessionRequest(cancel=pb.SessionCancel(request_id=self.id))


class Requests:
    """The requests of a session by id, and what becomes of them as the session goes on: granted,
    answered, withdrawn, sent again on a new stream, ended."""

    def __init__(self, session: RequestsSession) -> None:
        self._session = session
        self.by_id: dict[int, Request] = {}
        self._last_id = 0

    def _new_id(self) -> int:
        while True:
            self._last_id = self._last_id % 0xFFFFFFFF + 1
            if self._last_id not in self.by_id:
                return self._last_id

    # -- what the caller asks for ------------------------------------------------------------------

    async def acquire(self, name: str, mode: Mode, message: pb.SessionAcquire, timeout: float | None,
                      on_queued: Callable[[int], object] | None) -> Lock:
        session = self._session
        if session.ended or session.closing:
            raise SessionOver()
        request = Request(self._new_id(), name, mode, message, timeout, on_queued)
        self.by_id[request.id] = request
        request.sent = session.send(request.acquire_message())
        await verdict(name, request.decided, timeout, lambda: self._withdraw(request))
        if request.lock is not None:
            return request.lock
        assert request.failure is not None
        raise request.failure

    async def _withdraw(self, request: Request) -> None:
        """Gives the request up and waits (a little) for the server to confirm."""
        if request.state == WAITING:
            request.state = CANCELLED
            if request.sent:
                self._session.send(request.cancel_message())
            elif not self._session.resuming:
                self.end(request, grpc.StatusCode.CANCELLED, "withdrawn before it was sent")
        elif request.state == HELD and request.lock is not None:
            request.lock._start_letting_go()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(request.ended.wait(), _WITHDRAW_PATIENCE)

    def let_go(self) -> None:
        """The client is being closed: every lock is released and every waiter fails now, not
        once the server confirms (it may not be reachable)."""
        for request in list(self.by_id.values()):
            if request.state == WAITING:
                request.state = CANCELLED
                request.failure = ClientClosed(request.name)
                request.decided.set()
                self._session.send(request.cancel_message())
            elif request.state == HELD and request.lock is not None:
                request.lock._start_letting_go()

    # -- what the server says ------------------------------------------------------------------

    def dispatch(self, message: pb.SessionResponse, kind: str | None) -> None:
        """What the server said about one request (`kind` of `message`)."""
        request = self.by_id.get(message.request_id)
        if request is None:
            return
        if self._session.resuming:
            request.reported = True
        lock, state = request.lock, request.state
        if kind == "queued":
            if state == WAITING and request.on_queued is not None:
                call_safely("queued", request.on_queued, message.queued.ahead)
        elif kind == "acquired":
            if state == WAITING:
                request.state = HELD
                request.lock = Lock(self._session, request, message.acquired)
                request.decided.set()
            elif lock is not None:
                lock._doubt(False)  # a resumed session's report: still ours, same token
            # Cancelled: a grant that crossed our cancel; the server releases it on the cancel.
        elif kind == "in_doubt":
            if lock is not None and state in (HELD, RELEASING):
                lock._doubt(True)
        elif kind == "confirmed":
            if lock is not None:
                lock._doubt(False)
        elif kind == "revoke_requested":
            if lock is not None and state == HELD:
                lock._asked_back(message.revoke_requested)
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
            self.end(request, message.ended.code, message.ended.message)

    # -- across streams ----------------------------------------------------------------------------

    def doubt_held(self) -> None:
        """The stream broke and is being resumed: every held lock is in doubt."""
        for request in self.by_id.values():
            if request.lock is not None and request.state in (HELD, RELEASING):
                request.lock._doubt(True)

    def unreport(self) -> None:
        """A resume attempt begins: the server has reported nothing on it yet."""
        for request in self.by_id.values():
            request.reported = False

    def unsend(self) -> None:
        """The stream that was to open the session broke before the server said a word: nothing
        went out on it (a request withdrawn meanwhile ends here)."""
        for request in list(self.by_id.values()):
            request.sent = False
            if request.state == CANCELLED:
                self.end(request, grpc.StatusCode.CANCELLED, "withdrawn before it was sent")

    def send_waiting(self) -> None:
        """Asks again, on a new stream, for every request still waiting."""
        for request in self.by_id.values():
            if request.state == WAITING:
                request.sent = self._session.send(request.acquire_message())

    def resumed(self) -> None:
        """The server took the resumed stream over and reported every request it still has.
        What it did not report, it does not have: that request ended with its `ended` lost in the
        break, or its `acquire` never arrived. What a reported request was sent last without an
        answer (release, cancel, set_value, downgrade: all harmless twice) is sent again."""
        send = self._session.send
        for request in list(self.by_id.values()):
            state = request.state
            if request.reported:
                if request.lock is not None:
                    request.lock._doubt(False)
                for _, message, _ in request.pending:
                    send(message)
                if state == RELEASING:
                    send(request.release_message())
                elif state == CANCELLED:
                    send(request.cancel_message())
            elif not request.sent:
                if state == WAITING:
                    request.sent = send(request.acquire_message())
                else:
                    self.end(request, grpc.StatusCode.CANCELLED, "withdrawn before it was sent")
            elif state == WAITING:
                # Retryable (Client.acquire queues it again, at the back, for what is left of its wait).
                self.end(request, grpc.StatusCode.UNAVAILABLE,
                         "the request lost its place in the queue while the session was being resumed")
            elif state == HELD:
                self.end(request, grpc.StatusCode.NOT_FOUND,
                         "the server no longer has the lock after the session was resumed")
            else:
                self.end(request, grpc.StatusCode.OK, "")

    # -- ends --------------------------------------------------------------------------------------

    def end(self, request: Request, code: int | grpc.StatusCode, message: str,
            error: LockError | None = None) -> None:
        """The request is over with `code`, as it stood."""
        if request.state == ENDED:
            return
        was, request.state = request.state, ENDED
        if self.by_id.get(request.id) is request:
            del self.by_id[request.id]
        status = status_code(code)
        lock = request.lock
        loss: LockLost | None = None
        if was in (WAITING, CANCELLED):
            if self._session.closing:
                error = ClientClosed(request.name)
            request.failure = error or (error_for(request.name, status, message) if status != grpc.StatusCode.OK
                                        else LockError(request.name, grpc.StatusCode.UNKNOWN,
                                                       "the request ended without a grant"))
        elif was == HELD and lock is not None:
            loss = lost_error(request.name, status, message) if status != grpc.StatusCode.OK else LockLost(
                request.name, grpc.StatusCode.UNKNOWN, "the server ended the request without a release")
        elif was == RELEASING and lock is not None and status != grpc.StatusCode.OK:
            loss = lost_error(request.name, status, message)
        if loss is not None and lock is not None:
            lock._lose(loss)
        if request.pending:
            failure: LockError = loss or (lock.error if lock is not None and lock.error else
                                          ClientClosed(request.name) if self._session.closing else
                                          NotHeld(request.name, "the lock was released first"))
            for _, _, done in request.pending:
                if not done.done():
                    done.set_exception(failure)
            request.pending.clear()
        request.decided.set()
        request.ended.set()

    def end_all(self, code: grpc.StatusCode, why: str) -> None:
        """The session ended with `code`: so does every request (held locks lost, unless let go)."""
        for request in list(self.by_id.values()):
            if request.state == RELEASING and self._session.closing:
                self.end(request, grpc.StatusCode.OK, "")
            elif request.state == CANCELLED:
                self.end(request, grpc.StatusCode.CANCELLED, why)
            elif request.state == WAITING:
                # A broken session holds and queues nothing for it any more: retryable.
                broke = code in BREAKS or code in (grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND)
                self.end(request, code, why, error_for(
                    request.name, grpc.StatusCode.UNAVAILABLE if broke else code, why))
            else:
                lost = grpc.StatusCode.UNAVAILABLE if code == grpc.StatusCode.OK else code
                self.end(request, lost, why)
