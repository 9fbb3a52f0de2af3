"""The asyncio client, against real lockstream servers."""

from __future__ import annotations

import asyncio

import pytest

import lockstream
from conftest import Proxy, Server

PATIENCE = 20.0


async def test_exclusion_in_queue_order(server: Server, name: str) -> None:
    history: list[str] = []
    async with lockstream.aio.Client(server.address) as a, lockstream.aio.Client(server.address) as b:
        first = await a.lock(name, mode="write")
        history.append("a+")
        queued = asyncio.Event()

        async def second() -> int:
            async with b.lock(name, mode="write", on_queued=lambda _: queued.set()) as lock:
                history.append("b+")
                return lock.token

        task = asyncio.create_task(second())
        await asyncio.wait_for(queued.wait(), PATIENCE)
        history.append("a-")
        await first.release()
        token = await asyncio.wait_for(task, PATIENCE)
        assert history == ["a+", "a-", "b+"]
        assert token > first.token


async def test_timeout_and_cancellation(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as holder, lockstream.aio.Client(server.address) as waiter:
        async with holder.lock(name):
            with pytest.raises(lockstream.LockTimeout):
                await waiter.lock(name, timeout=0.1)
            queued = asyncio.Event()
            task = asyncio.create_task(waiter.acquire(name, on_queued=lambda _: queued.set()))
            await asyncio.wait_for(queued.wait(), PATIENCE)
            assert len((await holder.describe(name)).waiters) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Cancelling the wait withdrew the request.
            assert list((await holder.describe(name)).waiters) == []


async def test_lost_when_the_server_dies(own_server: Server, name: str) -> None:
    async with lockstream.aio.Client(own_server.address, resume_grace=1) as client:
        lock = await client.lock(name)
        seen: list[lockstream.LockLost] = []
        lock.on_lost(seen.append)
        own_server.kill()
        await asyncio.wait_for(lock.lost.wait(), PATIENCE)
        assert isinstance(lock.error, lockstream.LockLost) and seen == [lock.error]
        assert not lock.held


async def test_resume_keeps_the_lock(server: Server, proxy: Proxy, name: str) -> None:
    async with lockstream.aio.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client, \
            lockstream.aio.Client(server.address) as observer:
        lock = await client.lock(name, mode="write")
        assert proxy.cut() > 0
        await lock.set_value(b"resumed")
        holders = (await observer.describe(name)).holders
        assert [(h.fencing_token, h.value) for h in holders] == [(lock.token, b"resumed")]
        assert not lock.lost.is_set()
        await lock.release()


async def test_revoke_request(server: Server, name: str) -> None:
    from lockstream.v1 import lockstream_pb2 as pb

    async with lockstream.aio.Client(server.address) as client:
        async with client.lock(name) as lock:
            revoke = client.channel.unary_unary(
                "/lockstream.v1.LockService/RevokeLock",
                request_serializer=pb.RevokeLockRequest.SerializeToString,
                response_deserializer=pb.RevokeLockResponse.FromString,
            )
            await revoke(pb.RevokeLockRequest(name=name, reason="maintenance"))
            await asyncio.wait_for(lock.revoke_requested.wait(), PATIENCE)
            assert lock.revoke_reason == "maintenance"
