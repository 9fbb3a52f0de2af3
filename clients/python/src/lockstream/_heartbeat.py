"""Heartbeats on a session's stream: one every interval, and three intervals without a word from
the server count as a broken stream (a connection that silently died, or a proxy answering for a
dead server)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lockstream.v1 import lockstream_pb2 as pb

if TYPE_CHECKING:
    from lockstream._stream import Stream

HEARTBEAT = pb.SessionRequest(heartbeat=pb.AcquireHeartbeat())


async def heartbeats(stream: Stream, interval: float) -> None:
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
            stream.outbox.put_nowait(HEARTBEAT)
            next_beat = now + interval
