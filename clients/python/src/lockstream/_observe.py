"""An election's events as an async iterator over one Observe call (lockstream.v1.ElectionService/
Observe): opened at the first read, on the next endpoint while one is unavailable before it says a
word, read one message at a time (the server's flow control holds the rest back), cancelled when
the iterator is closed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from lockstream._channels import Connections, ObserveCall, cancelling
from lockstream._election import ElectionEvent, event
from lockstream.errors import ClientClosed, error_for
from lockstream.v1 import election_pb2 as epb


class Observation:
    """What `observe` returns: `async for event in client.observe(name):` yields the election's
    events (Term, Proclaimed, Vacant, HistoryGone, Skipped) until the observation is closed
    (`aclose()`, or leaving `async with client.observe(name) as events:`) or the client is.
    Cancelling a wait for the next event does not end it: the next wait goes on reading."""

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    def __init__(self, connections: Connections, name: str, from_term: int | None,
                 on_open: Callable[[Observation], None], on_over: Callable[[Observation], None]) -> None:
        self._connections = connections
        #: The election's name.
        self.name = name
        self._request = epb.ObserveRequest(name=name)
        if from_term is not None:
            self._request.from_term = from_term
        self._on_open = on_open
        self._on_over = on_over
        self._call: ObserveCall | None = None
        #: The read under way, kept when the caller's wait is cancelled.
        self._reading: asyncio.Task[Any] | None = None
        #: How many endpoints were tried, and whether the server said a word on this call.
        self._tries = 0
        self._heard = False
        self._closed = False

    def __repr__(self) -> str:
        return f"<lockstream.aio.Observation {self.name!r}{' closed' if self._closed else ''}>"

    def __aiter__(self) -> Observation:
        return self

    async def __anext__(self) -> ElectionEvent:
        while True:
            if self._connections.closed:
                self._close()
                raise ClientClosed(self.name)
            if self._closed:
                raise StopAsyncIteration
            if self._call is None:
                self._open()
            assert self._call is not None
            if self._reading is None:
                self._reading = asyncio.get_running_loop().create_task(self._call.read())
            reading = self._reading
            try:
                message = await asyncio.shield(reading)
            except grpc.aio.AioRpcError as error:
                self._reading = None
                if self._connections.closed:
                    self._close()
                    raise ClientClosed(self.name) from None
                if error.code() == grpc.StatusCode.UNAVAILABLE and self._next_endpoint():
                    continue
                self._close()
                raise error_for(self.name, error.code(), error.details() or "") from None
            except asyncio.CancelledError:
                if not reading.done():
                    raise  # the caller's wait was cancelled: the read goes on, for the next wait
                # The read itself was cancelled: the observation was closed meanwhile, or the client.
                self._close()
                if cancelling():
                    raise
                if self._connections.closed:
                    raise ClientClosed(self.name) from None
                raise StopAsyncIteration from None
            self._reading = None
            if message is grpc.aio.EOF or not isinstance(message, epb.ObserveResponse):
                self._close()  # the server ended the call (it does not, but for a newer one)
                raise StopAsyncIteration
            self._heard = True
            told = event(message)
            if told is not None:
                return told

    def _open(self) -> None:
        count = len(self._connections.endpoints)
        endpoint = self._connections.endpoints[(self._connections.current + self._tries) % count]
        self._tries += 1
        self._call = self._connections.observe_call(endpoint, self._request)
        self._on_open(self)

    def _next_endpoint(self) -> bool:
        """The call ended UNAVAILABLE: opens it on the next endpoint if it had not said a word
        and some endpoint is left to try."""
        if self._heard or self._tries >= len(self._connections.endpoints):
            return False
        self._call = None
        return True

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._call is not None:
            self._call.cancel()
        if self._reading is not None:
            self._reading.cancel()
            # Nobody awaits it any more: never an unretrieved exception.
            self._reading.add_done_callback(lambda task: task.cancelled() or task.exception())
            self._reading = None
        self._on_over(self)

    async def aclose(self) -> None:
        """Ends the observation (cancels its call). Idempotent."""
        self._close()

    async def __aenter__(self) -> Observation:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._close()

    def close_now(self) -> None:
        """The client is being closed: ends the observation."""
        with contextlib.suppress(Exception):
            self._close()
