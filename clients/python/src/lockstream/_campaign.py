"""One candidate of an election on a Campaign stream of its own (lockstream.v1.ElectionService/
Campaign: the session of one candidate), from `start` to its end: what the server says of it, its
Leadership once elected, its withdrawal or resignation, and its resume on a new stream (on the next
endpoint) when one breaks, as a Session is resumed (_stream_session, _resume)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc

from lockstream import _election_calls
from lockstream._callbacks import call_safely
from lockstream._channels import Connections
from lockstream._grant import verdict
from lockstream._leadership import Leadership
from lockstream._stream import BREAKS
from lockstream._stream_session import StreamSession
from lockstream.errors import ClientClosed, LockError, LockLost, error_for, lost_error
from lockstream.v1 import election_pb2 as epb

#: How long a withdrawal, and a campaign's part of closing the client, wait for the server.
_PATIENCE = 5.0

_HEARTBEAT = epb.CampaignRequest(heartbeat=epb.CampaignHeartbeat())
_RESIGN = epb.CampaignRequest(resign=epb.CampaignResign())

# A candidate's states: waiting to be elected; given up while waiting (the caller is gone); leading;
# resigning; over (its call ended, or the client was closed).
WAITING, CANCELLED, LEADING, RESIGNING, ENDED = "waiting", "cancelled", "leading", "resigning", "ended"


class Campaign(StreamSession[epb.CampaignRequest, epb.CampaignResponse]):
    """One candidate and its Campaign stream, and the streams that resume it. `start` is its first
    message (with the client's resume grace and heartbeat interval in it); `on_elected(campaign)`
    is called when it is elected, before its caller hears of it, and `on_over(campaign)` once it
    is over."""

    def __init__(self, connections: Connections, start: epb.CampaignStart, heartbeat_interval: float,
                 on_queued: Callable[[int], object] | None, on_elected: Callable[[Campaign], None],
                 on_over: Callable[[Campaign], None]) -> None:
        super().__init__(connections, heartbeat_interval, connections.campaign_call, _HEARTBEAT,
                         epb.CampaignResponse, self)
        self.name = start.name
        self._start = start
        self._on_queued = on_queued
        self._on_elected = on_elected
        self._on_over = on_over
        self.state = WAITING
        self.leadership: Leadership | None = None
        #: Why it ended before it was elected.
        self.failure: LockError | None = None
        #: Set once it is elected or over, whichever comes first.
        self.decided = asyncio.Event()
        #: Set once it is over.
        self.done = asyncio.Event()
        self.open(None)

    # -- what its StreamSession, _resume and the Leadership need of it -----------------------------

    @property
    def ended(self) -> bool:
        return self.state == ENDED

    @property
    def leading(self) -> bool:
        return self.state == LEADING and (self.leadership is None or self.leadership.error is None)

    def deposed(self, term: int) -> None:
        """Another candidate of the client was elected in this election with `term`: the server
        elects nobody before the last leader's term is over, so this leadership (of an older
        term) is lost, whether or not its stream's end has been read yet (gRPC may hand another
        stream's message over first). A resignation under way is not a loss: it went through."""
        leadership = self.leadership
        if self.state == LEADING and leadership is not None and leadership.term < term:
            leadership._lose(LockLost(self.name, grpc.StatusCode.ABORTED,
                                      f'election "{self.name}": term {leadership.term} is over: '
                                      f"term {term} was elected"))

    def _first(self, resume_token: str | None) -> epb.CampaignRequest:
        if resume_token is None:
            return epb.CampaignRequest(start=self._start)
        resume = epb.CampaignResume(resume_token=resume_token)
        if self._start.HasField("heartbeat_interval"):
            resume.heartbeat_interval.CopyFrom(self._start.heartbeat_interval)
        return epb.CampaignRequest(resume=resume)

    def start_resign(self) -> None:
        """The leader steps down from now on (see Leadership.resign)."""
        self.state = RESIGNING
        self.send(_RESIGN)

    async def proclaim(self, term: int, value: bytes) -> None:
        await _election_calls.proclaim(self._connections, self.name, term, value)

    # What a resume does to the candidate (see _resume.Carried): the `start` goes out with each
    # stream that opens it, and a `resign` not yet answered goes out again once it is resumed.
    def doubt_held(self) -> None:
        if self.leadership is not None and self.state in (LEADING, RESIGNING):
            self.leadership._doubt(True)

    def unreport(self) -> None:
        pass

    def unsend(self) -> None:
        if self.state == CANCELLED:
            self.finish(grpc.StatusCode.CANCELLED, "withdrawn before the server heard of it")

    def send_waiting(self) -> None:
        pass

    def resumed(self) -> None:
        if self.leadership is not None and self.state == LEADING:
            self.leadership._doubt(False)
        if self.state in (RESIGNING, CANCELLED):
            self.send(_RESIGN)

    # -- the caller's side -------------------------------------------------------------------------

    async def elect(self, timeout: float | None) -> Leadership:
        """Waits until the candidate is elected and returns its Leadership; withdraws it when the
        wait is cancelled, interrupted or timed out."""
        await verdict(self.name, self.decided, timeout, self._withdraw)
        if self.leadership is not None:
            return self.leadership
        assert self.failure is not None
        raise self.failure

    async def _withdraw(self) -> None:
        """Gives the candidate up (or the leadership that crossed the withdrawal) and waits (a
        little) for the server to confirm; then ends the stream whatever it said."""
        if self.state == WAITING:
            self.state = CANCELLED
            self.send(_RESIGN)
        elif self.state == LEADING and self.leadership is not None:
            self.leadership._start_letting_go()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.done.wait(), _PATIENCE)
        self.finish(grpc.StatusCode.CANCELLED, "withdrawn")

    async def close(self) -> None:
        """The client is being closed: withdraws the candidate, or resigns the leadership, and
        waits (a little) for the server to confirm. A waiting caller fails with ClientClosed now."""
        if self.ended:
            return
        self.closing = True
        if self.state == WAITING:
            self.state = CANCELLED
            self.failure = ClientClosed(self.name)
            self.decided.set()
            self.send(_RESIGN)
        elif self.state == LEADING and self.leadership is not None:
            self.leadership._start_letting_go()
        if self._usable_stream() is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.done.wait(), _PATIENCE)
        self.finish(grpc.StatusCode.CANCELLED, "the client was closed")
        await self._end_tasks()

    # -- what the server says ----------------------------------------------------------------------

    def _told(self, message: epb.CampaignResponse) -> None:
        self.opened = True
        kind = message.WhichOneof("kind")
        if kind == "resumable":
            grace = message.resumable.resume_grace.ToNanoseconds() / 1e9
            self._resume.opened(message.resumable.resume_token, grace)
            return
        if kind in ("queued", "elected") and self.resuming:
            self._resume.resumed()  # the server took the candidate over: where it stands follows
        leadership = self.leadership
        if kind == "queued":
            if self.state == WAITING and self._on_queued is not None:
                call_safely("queued", self._on_queued, message.queued.ahead)
        elif kind == "elected":
            if self.state == WAITING:
                self.state = LEADING
                self.leadership = Leadership(self, message.elected.term)
                self._on_elected(self)
                self.decided.set()
            elif leadership is not None:
                leadership._doubt(False)  # a resumed stream's report: still leading, same term
            # Cancelled: elected as it withdrew; the `resign` it sent steps it down.
        elif kind == "in_doubt":
            if leadership is not None and self.state in (LEADING, RESIGNING):
                leadership._doubt(True)
        elif kind == "confirmed":
            if leadership is not None:
                leadership._doubt(False)
        elif kind == "resign_requested":
            if leadership is not None and self.state == LEADING:
                leadership._asked_back(message.resign_requested)
        # `resigned` is followed by the call's end (OK); `heartbeat` says only that it is alive.

    def _not_resumed(self, code: grpc.StatusCode, why: str) -> tuple[grpc.StatusCode, str]:
        if code == grpc.StatusCode.NOT_FOUND and self.state in (RESIGNING, CANCELLED):
            code = grpc.StatusCode.OK  # the server no longer has what it was asked to end
        return code, f"the candidate could not be resumed: {why}"

    def finish(self, code: grpc.StatusCode, details: str) -> None:
        """The candidate is over with `code`, as it stood: a waiter fails, a leader is lost
        (unless it resigned)."""
        if self.ended:
            return
        was, self.state = self.state, ENDED
        self._drop_stream()
        why = details or code.name
        if was in (WAITING, CANCELLED) and self.failure is None:
            if self.closing:
                self.failure = ClientClosed(self.name)
            else:
                # A broken stream holds and queues nothing any more: retryable.
                broke = code in BREAKS or code in (grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND)
                self.failure = error_for(self.name, grpc.StatusCode.UNAVAILABLE if broke else code, why)
        elif was == LEADING and self.leadership is not None:
            self.leadership._lose(lost_error(self.name, code, why) if code != grpc.StatusCode.OK else LockLost(
                self.name, grpc.StatusCode.UNKNOWN, "the server ended the term without a resign"))
        elif was == RESIGNING and self.leadership is not None and code != grpc.StatusCode.OK and not self.closing:
            self.leadership._lose(lost_error(self.name, code, why))
        self.decided.set()
        self.done.set()
        self._on_over(self)
