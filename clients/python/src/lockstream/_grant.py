"""Waiting for a grant (an acquire, a campaign): the wait for the server's verdict, bounded past the
wait timeout the server was given, and withdrawn when it is given up; and asking again while the
server answers UNAVAILABLE before it granted anything: each attempt waits only for what is left of
the first one's wait, after a backoff that doubles, a given number of times at most. Never after a
grant: a lost lock or leadership is reported, not retaken."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from lockstream._wire import duration
from lockstream.errors import LockError, LockTimeout
from lockstream.v1 import election_pb2 as epb
from lockstream.v1 import lockstream_pb2 as pb

#: How long past the wait timeout a request or a candidate waits for the server's own verdict
#: (seconds).
_ANSWER_MARGIN = 5.0
_RETRY_BACKOFF = 0.1

#: What an attempt sends: an acquire, or a campaign's start (each with its wait timeout).
Asking = TypeVar("Asking", pb.SessionAcquire, epb.CampaignStart)
T = TypeVar("T")


async def verdict(name: str, decided: asyncio.Event, timeout: float | None,
                  withdraw: Callable[[], Awaitable[None]]) -> None:
    """Waits until `decided` is set: granted (or elected), or failed. The server decides the wait
    timeout; this bounds the wait for its verdict, and raises LockTimeout past it. A wait that
    times out, is cancelled or is interrupted is withdrawn first (`withdraw()`: a waiting request
    leaves the queue, a grant that crossed the cancel is given back)."""
    bound = None if timeout is None else timeout + _ANSWER_MARGIN
    try:
        await asyncio.wait_for(decided.wait(), bound)
    except asyncio.TimeoutError:
        await withdraw()
        raise LockTimeout(name, grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"no answer from the server within {bound:g} s") from None
    except BaseException:
        await withdraw()
        raise


class StartOver(Exception):
    """What an attempt was to be made on was over before the attempt was sent (a session that
    ended): make it again at once, on a new one. Not a retry."""


async def retrying(asking: Asking, timeout: float | None, retries: int, closed: Callable[[], bool],
                   attempt: Callable[[Asking, float | None], Awaitable[T]]) -> T:
    """What `attempt(message, left)` returns: `message` is a copy of `asking` that waits `left`
    seconds at most (what is left of `timeout`; 0 tries once, None waits as long as it takes).
    When it fails with UNAVAILABLE, it is made again after a backoff, at most `retries` times,
    while the client is not `closed()` and `timeout` is not over; any other failure is raised."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    tried = 0
    while True:
        # A retry waits only for what is left of the first attempt's wait.
        left = timeout if deadline is None or timeout == 0 else max(0.0, deadline - loop.time())
        message = type(asking)()
        message.CopyFrom(asking)
        if left is not None:
            message.wait_timeout.CopyFrom(duration(left))
        try:
            return await attempt(message, left)
        except StartOver:
            await asyncio.sleep(0)
            continue
        except LockError as error:
            retry = (error.code == grpc.StatusCode.UNAVAILABLE and not closed() and tried < retries
                     and (deadline is None or timeout == 0 or loop.time() < deadline))
            if not retry:
                raise
        await asyncio.sleep(_RETRY_BACKOFF * 2 ** tried)
        tried += 1
