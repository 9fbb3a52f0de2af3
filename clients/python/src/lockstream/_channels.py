"""The client's connections: its endpoints and the one requests go to now, a gRPC channel to each,
and the calls made on them (Session and Campaign streams, Observe calls, and unary calls of every
service that move on to the next endpoint while one is unavailable)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import grpc.aio

from lockstream._stream import CampaignCall, Request, Response, SessionCall
from lockstream.errors import ClientClosed, LockError, error_for
from lockstream.v1 import election_pb2 as epb
from lockstream.v1 import lockstream_pb2 as pb

LOCKS = "/lockstream.v1.LockService/"
ELECTIONS = "/lockstream.v1.ElectionService/"
RECORDS = "/lockstream.v1.RecordService/"

#: The error for a unary call's refusal: its code, its details, and whether an earlier try of the
#: call ended UNAVAILABLE (on another endpoint).
Refusal = Callable[[grpc.StatusCode, str, bool], LockError]

ObserveCall = grpc.aio.UnaryStreamCall[epb.ObserveRequest, epb.ObserveResponse]


def cancelling() -> bool:
    """Whether the current task was asked to cancel, rather than a call it awaited being
    cancelled under it (grpc.aio cancels the calls of a channel that is closed)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11
    return task is None or cancelling is None or bool(cancelling())


class Connections:
    """The endpoints of a Client, in the order it tries them, and a channel to each, made on first
    use (on the running event loop). `closed` once the client is closed: no call is made then."""

    def __init__(self, endpoints: tuple[str, ...], credentials: grpc.ChannelCredentials | None,
                 channel_options: Sequence[tuple[str, Any]], metadata: tuple[tuple[str, str | bytes], ...]) -> None:
        self.endpoints = endpoints
        #: The index in `endpoints` of the endpoint requests go to.
        self.current = 0
        self.closed = False
        self._credentials = credentials
        self._metadata = metadata
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
            *channel_options,
        ]
        #: One channel per endpoint, made on first use.
        self._channels: dict[str, grpc.aio.Channel] = {}

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to now: the first, until a session fails over."""
        return self.endpoints[self.current]

    def next_endpoint(self) -> str:
        """Moves on to the next endpoint in turn (the same one, for a client of one endpoint)."""
        self.current = (self.current + 1) % len(self.endpoints)
        return self.endpoint

    def channel_to(self, endpoint: str) -> grpc.aio.Channel:
        if self.closed:
            raise ClientClosed()
        channel = self._channels.get(endpoint)
        if channel is None:
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(endpoint, self._credentials, options=self._channel_options)
            else:
                channel = grpc.aio.insecure_channel(endpoint, options=self._channel_options)
            self._channels[endpoint] = channel
        return channel

    def session_call(self) -> SessionCall:
        """A new Session call on the current endpoint."""
        return self._stream_call(LOCKS + "Session", pb.SessionRequest, pb.SessionResponse)

    def campaign_call(self) -> CampaignCall:
        """A new Campaign call on the current endpoint."""
        return self._stream_call(ELECTIONS + "Campaign", epb.CampaignRequest, epb.CampaignResponse)

    def _stream_call(self, method: str, request: type[Request],
                     response: type[Response]) -> grpc.aio.StreamStreamCall[Request, Response]:
        """A new call of the bidirectional streaming `method` on the current endpoint."""
        calls = self.channel_to(self.endpoint).stream_stream(
            method,
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )
        call: grpc.aio.StreamStreamCall[Request, Response] = calls(  # type: ignore[assignment]
            metadata=self._metadata)
        return call

    def observe_call(self, endpoint: str, request: epb.ObserveRequest) -> ObserveCall:
        """A new Observe call on `endpoint`."""
        method = self.channel_to(endpoint).unary_stream(
            ELECTIONS + "Observe",
            request_serializer=epb.ObserveRequest.SerializeToString,
            response_deserializer=epb.ObserveResponse.FromString,
        )
        call: ObserveCall = method(request, metadata=self._metadata)  # type: ignore[assignment]
        return call

    async def unary(self, method: str, name: str, request: Any, response_type: Any, service: str = LOCKS,
                    refused: Refusal | None = None) -> Any:
        """Calls a unary method of `service` on the current endpoint, and on the next ones in turn
        while they answer UNAVAILABLE (it needs no session), once each; its failures as LockError
        (ClientClosed once the client is closed), made by `refused` if given, else error_for."""
        count = len(self.endpoints)
        for offset in range(count):
            call = self.channel_to(self.endpoints[(self.current + offset) % count]).unary_unary(
                service + method,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_type.FromString,
            )
            try:
                return await call(request, metadata=self._metadata)
            except grpc.aio.AioRpcError as error:
                if self.closed:
                    raise ClientClosed(name) from None
                if error.code() == grpc.StatusCode.UNAVAILABLE and offset + 1 < count:
                    continue
                if refused is not None:
                    # Only UNAVAILABLE moves on: every try before this one ended UNAVAILABLE.
                    raise refused(error.code(), error.details() or "", offset > 0) from None
                raise error_for(name, error.code(), error.details() or "") from None
            except asyncio.CancelledError:
                if self.closed and not cancelling():
                    raise ClientClosed(name) from None
                raise
        raise AssertionError("INVARIANT: a client has at least one endpoint")

    async def close(self) -> None:
        """Closes every channel (`closed` is set already)."""
        for channel in self._channels.values():
            await channel.close()
