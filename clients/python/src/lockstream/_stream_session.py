"""What a client's Session and a Campaign share: a session carried by one stream after another (a
LockService/Session call; an ElectionService/Campaign call, the session of one candidate), the
tasks serving them, sending on the current one, and what a broken one leads to: a resume on a new
stream (_resume), or the end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic

import grpc
import grpc.aio

from lockstream._channels import Connections
from lockstream._resume import Carried, Resume
from lockstream._stream import Request, Response, Stream


class StreamSession(Generic[Request, Response]):
    """A session on its current stream and the streams that resume it. `call` makes a call for a
    new stream (on the current endpoint), `heartbeat` is what its streams send as heartbeats,
    `response` the type of what the server sends, and `carried` what the session carries (see
    _resume.Carried). Each kind says what its streams start with (`_first`), what it does with
    what the server says (`_told`) and how it ends (`finish`), and opens its first stream once it
    is made (`open(None)`)."""

    def __init__(self, connections: Connections, heartbeat_interval: float,
                 call: Callable[[], grpc.aio.StreamStreamCall[Request, Response]], heartbeat: Request,
                 response: type[Response], carried: Carried) -> None:
        self._connections = connections
        self._heartbeat_interval = heartbeat_interval
        self._call: Callable[[], grpc.aio.StreamStreamCall[Request, Response]] = call
        self._heartbeat: Request = heartbeat
        self._response: type[Response] = response
        self._loop = asyncio.get_running_loop()
        self.stream: Stream[Request, Response] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        #: Whether the server said it has the session (it may hold or queue something).
        self.opened = False
        self._resume = Resume(self, carried, connections)

    # -- what each kind says -----------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether the session is over."""
        raise NotImplementedError

    def _first(self, resume_token: str | None) -> Request:
        """What a new stream starts with: the session's opening, or its resume with `resume_token`."""
        raise NotImplementedError

    def _told(self, message: Response) -> None:
        """What the server says on the current stream."""
        raise NotImplementedError

    def finish(self, code: grpc.StatusCode, details: str) -> None:
        """Ends the session with `code`: what it carries ends with it."""
        raise NotImplementedError

    def _not_resumed(self, code: grpc.StatusCode, why: str) -> tuple[grpc.StatusCode, str]:
        """How the session ends when its stream broke with `code` while it was being resumed."""
        return code, f"the session could not be resumed: {why}"

    # -- what they share ---------------------------------------------------------------------------

    @property
    def resuming(self) -> bool:
        """Whether the stream broke and the session is being resumed on another."""
        return self._resume.resuming

    def open(self, resume_token: str | None) -> None:
        """Opens a stream that starts with the session's opening (or its resume, while resuming)."""
        if self.ended:
            return
        stream = Stream(self._call(), self._loop.time(), self._connections.endpoint, self._heartbeat,
                        self._response)
        stream.outbox.put_nowait(self._first(resume_token))
        if resume_token is not None:
            self._resume.watch_attempt(stream)
        self.stream = stream
        stream.start(self._spawn, self._on_message, self._broken, self._heartbeat_interval)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _usable_stream(self) -> Stream[Request, Response] | None:
        """The current stream, if a message queued on it now goes out: there is one, it is not
        over, and the session is not being resumed."""
        stream = self.stream
        if stream is None or stream.over or self.resuming:
            return None
        return stream

    def send(self, message: Request) -> bool:
        """Queues `message` on the current stream, in order. Nothing is sent while the session is
        being resumed: once it is, what it carries sends again what it still needs (see
        _resume.Carried.resumed)."""
        stream = self._usable_stream()
        if stream is None:
            return False
        stream.outbox.put_nowait(message)
        return True

    def _on_message(self, stream: Stream[Request, Response], message: Response) -> None:
        if stream is not self.stream:
            return
        self._resume.heard = stream.heard
        self._told(message)

    def _broken(self, stream: Stream[Request, Response], code: grpc.StatusCode, details: str,
                trailers: Any) -> None:
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
            code, details = self._not_resumed(code, details or code.name)
        self.finish(code, details)

    def _drop_stream(self) -> None:
        """The session is over: no resume goes on, and its stream is retired."""
        self._resume.stop()
        if self.stream is not None:
            self.stream.retire()
            self.stream = None

    async def _end_tasks(self) -> None:
        """Cancels the tasks that serve the session (bar the current one) and waits for them."""
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
