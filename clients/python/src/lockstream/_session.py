"""A Client's session: its lock requests, carried by one stream after another (the session is
resumed on a new stream when one breaks) until the session ends or the client is closed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from lockstream._channels import Connections
from lockstream._requests import Requests
from lockstream._resume import Resume
from lockstream._stream import Stream
from lockstream._wire import duration
from lockstream.v1 import lockstream_pb2 as pb

#: How long close() waits for the server to confirm that every lock was released.
_CLOSE_PATIENCE = 5.0
_HEARTBEAT = pb.SessionRequest(heartbeat=pb.AcquireHeartbeat())


class Session:
    """The Session stream of a Client, and its successors after resumes. `on_over` is called
    when a session the server opened (or one being closed) ends."""

    def __init__(self, connections: Connections, resume_grace: float, heartbeat_interval: float,
                 on_over: Callable[[], None]) -> None:
        self._connections = connections
        #: What the client asks for in `open`.
        self._resume_grace = resume_grace
        self._heartbeat_interval = heartbeat_interval
        self._on_over = on_over
        self._loop = asyncio.get_running_loop()
        self.requests = Requests(self)
        self.stream: Stream[pb.SessionRequest, pb.SessionResponse] | None = None
        self._resume = Resume(self, self.requests, connections)
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.ended = False
        self._done = asyncio.Event()
        #: Whether the server opened the session (sent `opened`): it may have held locks.
        self.opened = False
        self.open(None)

    @property
    def resuming(self) -> bool:
        """Whether the stream broke and the session is being resumed on another."""
        return self._resume.resuming

    def open(self, resume_token: str | None) -> None:
        """Opens a stream that starts with `open` (or `resume`, while resuming)."""
        stream = Stream(self._connections.session_call(), self._loop.time(), self._connections.endpoint,
                        _HEARTBEAT, pb.SessionResponse)
        if resume_token is None:
            opening = pb.SessionOpen()
            if self._resume_grace > 0:
                opening.resume_grace.CopyFrom(duration(self._resume_grace))
            if self._heartbeat_interval > 0:
                opening.heartbeat_interval.CopyFrom(duration(self._heartbeat_interval))
            stream.outbox.put_nowait(pb.SessionRequest(open=opening))
        else:
            resume = pb.SessionResume(resume_token=resume_token)
            if self._heartbeat_interval > 0:
                resume.heartbeat_interval.CopyFrom(duration(self._heartbeat_interval))
            stream.outbox.put_nowait(pb.SessionRequest(resume=resume))
            self._resume.watch_attempt(stream)
        self.stream = stream
        stream.start(self._spawn, self._on_message, self._broken, self._heartbeat_interval)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def send(self, message: pb.SessionRequest) -> bool:
        """Queues `message` on the current stream, in order. Nothing is sent while the session is
        being resumed: once it is, what each request still needs is sent again (see
        Requests.resumed)."""
        stream = self.stream
        if stream is None or stream.over or self.resuming:
            return False
        stream.outbox.put_nowait(message)
        return True

    def _on_message(self, stream: Stream[pb.SessionRequest, pb.SessionResponse],
                    message: pb.SessionResponse) -> None:
        if stream is not self.stream:
            return
        self._resume.heard = stream.heard
        kind = message.WhichOneof("kind")
        if message.request_id == 0:
            if kind == "opened":
                self.opened = True
                self._resume.opened(message.opened.resume_token,
                                    message.opened.resume_grace.ToNanoseconds() / 1e9)
            elif kind == "resumed":
                self._resume.resumed()
            return  # heartbeat, or what a newer server says about the session
        self.requests.dispatch(message, kind)

    def _broken(self, stream: Stream[pb.SessionRequest, pb.SessionResponse], code: grpc.StatusCode,
                details: str, trailers: Any) -> None:
        """The stream ended with `code`: resume the session on a new one, or end it."""
        if stream.over or self.stream is not stream:
            return
        stream.retire()
        self.stream = None
        if self.ended:
            return
        if self.closing:
            self.finish(code, details)
            return
        if self._resume.after_break(stream, code, details, trailers):
            return
        if self.resuming:
            details = f"the session could not be resumed: {details or code.name}"
        self.finish(code, details)

    def finish(self, code: grpc.StatusCode, details: str) -> None:
        """Ends the session: every request ends with it (held locks lost, unless let go)."""
        if self.ended:
            return
        self.ended = True
        self._resume.stop()
        if self.stream is not None:
            self.stream.retire()
            self.stream = None
        self.requests.end_all(code, details or code.name)
        self._done.set()
        if self.opened or self.closing:
            self._on_over()

    async def close(self) -> None:
        """Releases every lock, withdraws every request, and ends the session."""
        if self.ended:
            return
        self.closing = True
        self.requests.let_go()
        stream = self.stream
        if stream is not None and not stream.over and not self.resuming:
            stream.outbox.put_nowait(None)  # half-close: the server releases what is left
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), _CLOSE_PATIENCE)
        self.finish(grpc.StatusCode.CANCELLED, "the client was closed")
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
