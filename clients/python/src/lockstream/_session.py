"""A Client's session: its lock requests, carried by one stream after another (the session is
resumed on a new stream when one breaks, as a _stream_session.StreamSession) until the session
ends or the client is closed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc

from lockstream._channels import Connections
from lockstream._requests import Requests
from lockstream._stream_session import StreamSession
from lockstream._wire import duration
from lockstream.v1 import lockstream_pb2 as pb

#: How long close() waits for the server to confirm that every lock was released.
_CLOSE_PATIENCE = 5.0
_HEARTBEAT = pb.SessionRequest(heartbeat=pb.AcquireHeartbeat())


class Session(StreamSession[pb.SessionRequest, pb.SessionResponse]):
    """The Session stream of a Client, and its successors after resumes. `on_over` is called
    when a session the server opened (or one being closed) ends."""

    def __init__(self, connections: Connections, resume_grace: float, heartbeat_interval: float,
                 on_over: Callable[[], None]) -> None:
        self.requests = Requests(self)
        super().__init__(connections, heartbeat_interval, connections.session_call, _HEARTBEAT,
                         pb.SessionResponse, self.requests)
        #: What the client asks for in `open`.
        self._resume_grace = resume_grace
        self._on_over = on_over
        self._ended = False
        self._done = asyncio.Event()
        self.open(None)

    @property
    def ended(self) -> bool:
        return self._ended

    def _first(self, resume_token: str | None) -> pb.SessionRequest:
        if resume_token is None:
            opening = pb.SessionOpen()
            if self._resume_grace > 0:
                opening.resume_grace.CopyFrom(duration(self._resume_grace))
            if self._heartbeat_interval > 0:
                opening.heartbeat_interval.CopyFrom(duration(self._heartbeat_interval))
            return pb.SessionRequest(open=opening)
        resume = pb.SessionResume(resume_token=resume_token)
        if self._heartbeat_interval > 0:
            resume.heartbeat_interval.CopyFrom(duration(self._heartbeat_interval))
        return pb.SessionRequest(resume=resume)

    def _told(self, message: pb.SessionResponse) -> None:
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

    def finish(self, code: grpc.StatusCode, details: str) -> None:
        """Ends the session: every request ends with it (held locks lost, unless let go)."""
        if self.ended:
            return
        self._ended = True
        self._drop_stream()
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
        stream = self._usable_stream()
        if stream is not None:
            stream.outbox.put_nowait(None)  # half-close: the server releases what is left
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), _CLOSE_PATIENCE)
        self.finish(grpc.StatusCode.CANCELLED, "the client was closed")
        await self._end_tasks()
