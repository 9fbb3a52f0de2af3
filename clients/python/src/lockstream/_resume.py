"""Keeping a session through broken streams: taking it over on a new stream with its resume token,
on the next endpoint in turn, until one takes it or the resume grace is over; and opening it on the
next endpoint when the first one refuses. (A Campaign stream is the session of one candidate: it
is kept the same way.)"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Protocol

import grpc

from lockstream._channels import Connections
from lockstream._stream import BREAKS, Stream

logger = logging.getLogger("lockstream")

#: The client gives a broken session up this much before its grace, counted from the last
#: message heard, is over (at most a tenth of the grace): room for a timer that fires late.
_GRACE_MARGIN = 0.5
_RESUME_BACKOFF, _RESUME_BACKOFF_MAX = 0.1, 1.0
#: The longest one resume attempt waits for the endpoint's first word before the client tries
#: the next endpoint: a third of what is left of the grace, and at most this (seconds). A frozen
#: endpoint (a server paused on a connection made earlier, or stuck before it takes the session
#: over) must not eat the whole grace. (A new connection that gets no answer fails sooner by
#: itself: see grpc.min_reconnect_backoff_ms in _channels.py, which is also gRPC's connect timeout.)
_ATTEMPT_PATIENCE = 1.0
_REQUEST_STATE = "lockstream-request"


class Carried(Protocol):
    """What a resume does to what its session carries (a _requests.Requests, or a campaign's
    candidate): see Requests for what each means."""

    def doubt_held(self) -> None: ...

    def unreport(self) -> None: ...

    def unsend(self) -> None: ...

    def send_waiting(self) -> None: ...

    def resumed(self) -> None: ...


class Resumable(Protocol):
    """What a Resume needs of its session (a _session.Session): whether the server opened it,
    whether it ended or is being closed, its current stream, and opening a stream or ending it."""

    @property
    def opened(self) -> bool: ...

    @property
    def ended(self) -> bool: ...

    @property
    def closing(self) -> bool: ...

    @property
    def stream(self) -> Stream[Any, Any] | None: ...

    def open(self, resume_token: str | None) -> None: ...

    def finish(self, code: grpc.StatusCode, details: str) -> None: ...


class Resume:
    """What a session needs to outlive its stream: the resume token and grace the server gave,
    when the server was last heard from, and the resume under way (its attempts and timers)."""

    def __init__(self, session: Resumable, requests: Carried, connections: Connections) -> None:
        self._session = session
        self._requests = requests
        self._connections = connections
        self._loop = asyncio.get_running_loop()
        self._token = ""
        self._grace = 0.0
        #: loop.time() of the last message from the server, on any stream of the session.
        self.heard = self._loop.time()
        self.resuming = False
        self._attempts = 0
        self._cause = ""
        #: loop.time() when a resume under way is given up (the grace, less its margin, is over).
        self._give_up_at = 0.0
        self._give_up_timer: asyncio.TimerHandle | None = None
        #: How many endpoints were tried to open the session (before the server said `opened`).
        self._open_attempts = 1
        self._timers: list[asyncio.TimerHandle] = []

    def opened(self, token: str, grace: float) -> None:
        """The server opened the session: its resume token and grace (seconds)."""
        self._token = token
        self._grace = grace

    def after_break(self, stream: Stream[Any, Any], code: grpc.StatusCode, details: str, trailers: Any) -> bool:
        """The session's stream ended with `code`: resumes the session, or opens it on the next
        endpoint. False when neither is to be tried: the session ends."""
        over = any(key == _REQUEST_STATE and "ended" in str(value) for key, value in (trailers or ()))
        if (code in BREAKS and not over and self._token and self._grace > 0):
            self._resume(code, details)
            return True
        return bool(code in BREAKS and not self._session.opened and not stream.answered
                    and self._open_elsewhere(stream, details or code.name))

    def _open_elsewhere(self, stream: Stream[Any, Any], why: str) -> bool:
        """The stream that was to open the session broke before the server said a word (the
        endpoint refused or dropped the connection): opens the session on the next endpoint, with
        the requests made meanwhile. False once every endpoint was tried."""
        if self._open_attempts >= len(self._connections.endpoints):
            return False
        self._open_attempts += 1
        endpoint = self._connections.next_endpoint()
        logger.info("lockstream: could not open a session on %s (%s); trying %s", stream.endpoint, why, endpoint)
        self._requests.unsend()
        try:
            self._session.open(None)
        except Exception as error:  # the channel was closed
            self._session.finish(grpc.StatusCode.UNAVAILABLE, f"the session could not be opened: {error}")
            return True
        self._requests.send_waiting()
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
        if not self.resuming:
            self.resuming = True
            self._attempts = 0
            self._cause = details or code.name
            self._requests.doubt_held()
        # A resumed stream that broke again before `resumed` may have been heard from since.
        if self._give_up_timer is not None:
            self._give_up_timer.cancel()
        deadline = self.heard + self._grace - self._grace_margin()
        if deadline <= self._loop.time():
            self._give_up()
            return
        self._give_up_at = deadline
        self._give_up_timer = self._loop.call_at(deadline, self._give_up)
        # The first round of the endpoints goes at once; an endpoint tried again waits a backoff.
        rounds = self._attempts // len(self._connections.endpoints)
        delay = 0.0
        if rounds > 0:
            delay = random.uniform(0, min(_RESUME_BACKOFF_MAX, _RESUME_BACKOFF * 2 ** rounds))
        self._attempts += 1
        left = self._connections.endpoint
        if self._connections.next_endpoint() != left:
            logger.info("lockstream: the session's stream to %s ended (%s); resuming it on %s",
                        left, details or code.name, self._connections.endpoint)
        self._timers.append(self._loop.call_later(delay, self._reopen))

    def _reopen(self) -> None:
        session = self._session
        if not self.resuming or session.ended or session.closing:
            return
        self._requests.unreport()
        try:
            session.open(self._token)
        except Exception as error:  # the channel was closed
            session.finish(grpc.StatusCode.UNAVAILABLE, f"the session could not be resumed: {error}")

    def watch_attempt(self, stream: Stream[Any, Any]) -> None:
        """Cuts the resume attempt on `stream` if its endpoint says nothing within a third of what
        is left of the grace (at most _ATTEMPT_PATIENCE): the next attempt goes to the next one."""
        patience = min(_ATTEMPT_PATIENCE, max(0.0, self._give_up_at - self._loop.time()) / 3)
        stream.attempt_timer = self._loop.call_later(patience, self._unanswered, stream, patience)

    def _unanswered(self, stream: Stream[Any, Any], patience: float) -> None:
        """A resume attempt heard nothing from its endpoint in time: cut it (the next attempt
        goes to the next endpoint)."""
        if stream is self._session.stream and not stream.over and not stream.answered:
            stream.cut(f"no answer from {stream.endpoint} within {patience:.2f} s")

    def _grace_margin(self) -> float:
        return min(_GRACE_MARGIN, self._grace / 10)

    def _give_up(self) -> None:
        if self.resuming and not self._session.ended:
            within = self._grace - self._grace_margin()
            count = len(self._connections.endpoints)
            where = f" on any of its {count} endpoints" if count > 1 else ""
            self._session.finish(grpc.StatusCode.UNAVAILABLE,
                                 f"the stream to the server broke ({self._cause}) and was not resumed{where} "
                                 f"within {within:g} s of its last message (the {self._grace:g} s resume "
                                 "grace, less a margin)")

    def resumed(self) -> None:
        """The server took the resumed stream over: the resume is done (see Requests.resumed)."""
        self.stop()
        self._requests.resumed()

    def stop(self) -> None:
        """No resume under way any more: stops the give-up timer and every attempt timer (the
        session was resumed, or is over)."""
        self.resuming = False
        if self._give_up_timer is not None:
            self._give_up_timer.cancel()
            self._give_up_timer = None
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
