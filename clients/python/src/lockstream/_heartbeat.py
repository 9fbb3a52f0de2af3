"""Heartbeats on a session's stream: one every interval, and three intervals without a word from
the server count as a broken stream (a connection that silently died, or a proxy answering for a
dead server)."""

from __future__ import annotations

import asyncio
from typing import Protocol, TypeVar

Message = TypeVar("Message")


class Beating(Protocol[Message]):
    """What heartbeats need of the stream they keep (a _stream.Stream): whether it is over, when
    the server was last heard on it, its queue of messages to send, its heartbeat message, and a
    way to cut it."""

    @property
    def over(self) -> bool: ...

    @property
    def heard(self) -> float: ...

    @property
    def outbox(self) -> asyncio.Queue[Message | None]: ...

    @property
    def heartbeat(self) -> Message: ...

    def cut(self, reason: str) -> None: ...


async def heartbeats(stream: Beating[Message], interval: float) -> None:
    """A heartbeat every `interval` seconds (none for 0) until the stream is over; cuts the stream
    once the server has said nothing for three intervals."""
    if interval <= 0:
        return
    loop = asyncio.get_running_loop()
    next_beat = loop.time() + interval
    while not stream.over:
        silence_at = stream.heard + 3 * interval
        await asyncio.sleep(max(0.0, min(next_beat, silence_at) - loop.time()))
        if stream.over:
            return
        now = loop.time()
        if now >= stream.heard + 3 * interval:
            stream.cut(f"nothing heard from the server for {now - stream.heard:.1f} s, 3 heartbeat intervals")
            return
        if now >= next_beat:
            stream.outbox.put_nowait(stream.heartbeat)
            next_beat = now + interval
