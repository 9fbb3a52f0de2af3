"""One stream of a session (a lockstream.v1.LockService/Session call, or an ElectionService/Campaign
call, the session of one candidate): the messages queued for it, the tasks that write them, read
what the server says and send heartbeats, and which of its ends count as breaks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio

from lockstream._heartbeat import heartbeats
from lockstream.v1 import election_pb2 as epb
from lockstream.v1 import lockstream_pb2 as pb

logger = logging.getLogger("lockstream")

SessionCall = grpc.aio.StreamStreamCall[pb.SessionRequest, pb.SessionResponse]
CampaignCall = grpc.aio.StreamStreamCall[epb.CampaignRequest, epb.CampaignResponse]

# Ends of a stream that say it broke rather than what the server decided: worth a resume.
BREAKS = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
})

Request = TypeVar("Request", pb.SessionRequest, epb.CampaignRequest)
Response = TypeVar("Response", pb.SessionResponse, epb.CampaignResponse)


class Stream(Generic[Request, Response]):
    """One call and the tasks serving it: `heartbeat` is the message it sends as a heartbeat,
    `response` the type of what the server sends."""

    def __init__(self, call: grpc.aio.StreamStreamCall[Request, Response], now: float, endpoint: str,
                 heartbeat: Request, response: type[Response]) -> None:
        self.call: grpc.aio.StreamStreamCall[Request, Response] = call
        self.endpoint = endpoint
        self.heartbeat: Request = heartbeat
        self._response: type[Response] = response
        # None: half-close.
        self.outbox: asyncio.Queue[Request | None] = asyncio.Queue()
        self.heard = now
        #: Whether the server said anything on it yet.
        self.answered = False
        self.over = False
        self.cancel_reason = ""
        self.tasks: list[asyncio.Task[None]] = []
        #: Cuts a resume attempt that the endpoint does not answer in time.
        self.attempt_timer: asyncio.TimerHandle | None = None

    def start(self, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
              on_message: Callable[[Stream[Request, Response], Response], None],
              on_end: Callable[[Stream[Request, Response], grpc.StatusCode, str, Any], None],
              heartbeat_interval: float) -> None:
        """Starts writing the outbox, reading what the server says (each message to `on_message`;
        how the call ended to `on_end`) and, for an interval over 0, heartbeats."""
        self.tasks = [spawn(self._write()), spawn(self._read(on_message, on_end)),
                      spawn(heartbeats(self, heartbeat_interval))]

    def cut(self, reason: str) -> None:
        """Cancels the call, saying why: the stream counts as broken."""
        self.cancel_reason = reason
        self.call.cancel()

    def retire(self) -> None:
        """The stream is over: stops its tasks (bar the current one) and its call."""
        self.over = True
        if self.attempt_timer is not None:
            self.attempt_timer.cancel()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        self.call.cancel()

    async def _write(self) -> None:
        while True:
            message = await self.outbox.get()
            try:
                if message is None:
                    await self.call.done_writing()
                    return
                await self.call.write(message)
            except asyncio.CancelledError:
                raise
            except Exception:
                return  # the call is over: _read reports how

    async def _read(self, on_message: Callable[[Stream[Request, Response], Response], None],
                    on_end: Callable[[Stream[Request, Response], grpc.StatusCode, str, Any], None]) -> None:
        loop = asyncio.get_running_loop()
        call = self.call
        code, details, trailers = grpc.StatusCode.OK, "", None
        try:
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    break
                self.heard = loop.time()
                if not self.answered:
                    self.answered = True
                    if self.attempt_timer is not None:
                        self.attempt_timer.cancel()
                if isinstance(message, self._response):
                    try:
                        on_message(self, message)
                    except Exception:
                        logger.exception("lockstream: failed to handle %s", message)
            code, details = await call.code(), await call.details()
            trailers = await call.trailing_metadata()
        except grpc.aio.AioRpcError as error:
            code, details, trailers = error.code(), error.details() or "", error.trailing_metadata()
        except asyncio.CancelledError:
            if not call.cancelled():
                raise  # this task was cancelled: the session is being torn down
            code, details = grpc.StatusCode.CANCELLED, self.cancel_reason or "the call was cancelled"
        on_end(self, code, details or "", trailers)
