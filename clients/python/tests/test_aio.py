"""The asyncio client, against real lockstream servers."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Proxy, Raw, Server, check_history, queued_behind


async def within(awaitable: object) -> None:
    await asyncio.wait_for(awaitable, PATIENCE)  # type: ignore[arg-type]


async def test_two_clients_exclude_each_other(server: Server, name: str) -> None:
    history: list[tuple[str, str, int]] = []

    async def work(client: lockstream.aio.Client, who: str, mode: lockstream.Mode) -> None:
        for _ in range(10):
            async with client.lock(name, mode=mode, timeout=PATIENCE) as lock:
                history.append(("enter", who, lock.token))
                await asyncio.sleep(0.001)  # let the others run while it is held
                history.append(("exit", who, lock.token))

    async with lockstream.aio.Client(server.address) as a, lockstream.aio.Client(server.address) as b:
        await within(asyncio.gather(work(a, "a1", "mutex"), work(a, "a2", "write"),
                                    work(b, "b1", "write"), work(b, "b2", "mutex")))
    assert len(history) == 80
    check_history(history)


async def test_waiters_are_granted_first_in_first_out(server: Server, raw: Raw, name: str) -> None:
    granted: list[tuple[str, int]] = []
    async with lockstream.aio.Client(server.address) as a, lockstream.aio.Client(server.address) as b:
        first = await a.lock(name, mode="write")

        tasks = []
        for index, (who, client) in enumerate([("w1", b), ("w2", a), ("w3", b)]):
            queued = asyncio.Event()

            async def wait_queued(who: str = who, client: lockstream.aio.Client = client,
                                  queued: asyncio.Event = queued, ahead: int = index + 1) -> None:
                async with client.lock(name, mode="write",
                                       on_queued=queued_behind(ahead, queued)) as lock:
                    granted.append((who, lock.token))

            tasks.append(asyncio.create_task(wait_queued()))
            await within(queued.wait())
        assert len(raw.describe(name).waiters) == 3
        await first.release()
        await within(asyncio.gather(*tasks))
    assert [who for who, _ in granted] == ["w1", "w2", "w3"]
    tokens = [first.token] + [token for _, token in granted]
    assert tokens == sorted(tokens) and len(set(tokens)) == 4


async def test_readers_share_and_writers_exclude(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as readers, lockstream.aio.Client(server.address) as writers:
        one, two = await asyncio.gather(readers.acquire(name, mode="read"), readers.acquire(name, mode="read"))
        assert sorted(raw.holders(name)) == sorted([one.token, two.token])
        queued = asyncio.Event()
        writer = asyncio.create_task(writers.acquire(name, mode="write", on_queued=lambda _: queued.set()))
        await within(queued.wait())
        await one.release()
        assert not writer.done()
        await two.release()
        held = await asyncio.wait_for(writer, PATIENCE)
        assert raw.holders(name) == [held.token] and held.token > max(one.token, two.token)
        assert await readers.try_lock(name, mode="read") is None
        assert raw.describe(name).waiters == []  # nothing left queued
        await held.release()


async def test_timeout_and_cancellation_leave_nothing_queued(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as holder, lockstream.aio.Client(server.address) as waiter:
        async with holder.lock(name):
            with pytest.raises(lockstream.LockTimeout) as timed_out:
                await waiter.lock(name, timeout=0.2)
            assert timed_out.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert raw.describe(name).waiters == []

            # Cancelling the task that waits.
            queued = asyncio.Event()
            task = asyncio.create_task(waiter.acquire(name, on_queued=lambda _: queued.set()))
            await within(queued.wait())
            assert len(raw.describe(name).waiters) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert raw.describe(name).waiters == []

            # asyncio.wait_for's own timeout cancels the wait too.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(waiter.acquire(name), 0.3)
            assert raw.describe(name).waiters == []
        # Nobody was granted the lock on the waiter's behalf; it goes on.
        assert raw.describe(name).holders == []
        async with waiter.lock(name, timeout=0) as lock:
            assert raw.holders(name) == [lock.token]


async def test_the_lock_is_lost_when_the_server_is_killed(start_server: Callable[..., Server], name: str) -> None:
    doomed = start_server()
    async with lockstream.aio.Client(doomed.address, resume_grace=0) as client:
        lock = await client.lock(name)
        seen: list[lockstream.LockLost] = []
        lock.on_lost(seen.append)
        with pytest.raises(lockstream.LockLost):
            async with lock:
                doomed.kill()
                await within(lock.lost.wait())
        assert isinstance(lock.error, lockstream.LockLost) and seen == [lock.error]
        assert not lock.held
        with pytest.raises(lockstream.LockLost):
            await lock.release()


async def test_leaving_a_block_that_raised_after_the_lock_was_lost(
        start_server: Callable[..., Server], name: str) -> None:
    doomed = start_server()
    async with lockstream.aio.Client(doomed.address, resume_grace=0) as client:
        with pytest.raises(RuntimeError) as raised:
            async with client.lock(name) as lock:
                doomed.kill()
                await within(lock.lost.wait())
                raise RuntimeError("the work failed")
        # The block's own exception propagates, and says that the lock was lost too.
        assert str(raised.value) == "the work failed"
        assert raised.value.__notes__ == [f"lockstream: the lock was lost while the block ran: {lock.error}"]


async def test_a_cut_connection_is_resumed_and_the_lock_kept(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client, \
            lockstream.aio.Client(server.address) as other:
        lock = await client.lock(name, mode="write")
        reader_lock = await client.lock(name + "/shared", mode="read")
        doubts: list[bool] = []
        lock.on_in_doubt(doubts.append)
        assert proxy.cut() == 1
        await asyncio.to_thread(proxy.wait_for_connections, 2)
        await lock.set_value(b"resumed")
        assert doubts == [True, False]
        assert [(h.fencing_token, h.value) for h in raw.describe(name).holders] == [(lock.token, b"resumed")]
        assert raw.holders(name + "/shared") == [reader_lock.token]
        assert not lock.lost.is_set() and not reader_lock.lost.is_set() and lock.held
        assert await other.try_lock(name) is None
        await lock.release()
        await reader_lock.release()
        assert raw.describe(name).holders == []


async def test_set_value_and_downgrade(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client, lockstream.aio.Client(server.address) as others:
        async with client.lock(name, mode="write", value=b"v1") as lock:
            assert raw.describe(name).holders[0].value == b"v1"
            await asyncio.gather(lock.set_value(b"v2"), lock.set_value(b"v3"))  # applied in order
            assert raw.describe(name).holders[0].value == b"v3"
            queued = asyncio.Event()
            reader = asyncio.create_task(others.acquire(name, mode="read", on_queued=lambda _: queued.set()))
            await within(queued.wait())
            await lock.downgrade()
            assert lock.mode == "read"
            read = await asyncio.wait_for(reader, PATIENCE)
            assert sorted(raw.holders(name)) == sorted([lock.token, read.token])
            await read.release()
        async with client.lock(name, mode="mutex") as mutex:
            with pytest.raises(lockstream.LockError) as refused:
                await mutex.downgrade()
            assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION and mutex.held


async def test_revoke_request(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        async with client.lock(name) as lock:
            asked: list[lockstream.RevokeRequest] = []
            lock.on_revoke_requested(asked.append)
            assert raw.revoke(name, "maintenance") == 1
            await within(lock.revoke_requested.wait())
            assert lock.revoke_reason == "maintenance" and [r.reason for r in asked] == ["maintenance"]
            assert lock.revoke is not None and lock.revoke.force_at is None
            # A later RevokeLock with a deadline: asked again, with the deadline.
            forced = asyncio.Event()

            def on_revoke(request: lockstream.RevokeRequest) -> None:
                if request.force_at is not None:
                    forced.set()

            lock.on_revoke_requested(on_revoke)
            assert raw.revoke(name, "maintenance, now", force_after=PATIENCE) == 1
            await within(forced.wait())
            assert [(r.reason, r.force_at is not None) for r in asked] == [
                ("maintenance", False), ("maintenance, now", True)]
            assert lock.revoke_reason == "maintenance, now" and lock.held


async def test_a_resumed_session_does_not_tell_a_revoke_request_twice(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client:
        async with client.lock(name) as lock:
            asked: list[lockstream.RevokeRequest] = []
            lock.on_revoke_requested(asked.append)
            assert raw.revoke(name, "maintenance") == 1
            await within(lock.revoke_requested.wait())
            assert proxy.cut() == 1
            # Answered on the resumed stream, after the server's report of the lock (which says
            # again that its release was asked for).
            await lock.set_value(b"resumed")
            assert [(r.reason, r.force_at) for r in asked] == [("maintenance", None)]
            assert raw.revoke(name, "maintenance, now", force_after=PATIENCE) == 1
            await within(_until(lambda: len(asked) == 2))
            assert asked[1].reason == "maintenance, now" and asked[1].force_at is not None


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


async def test_closing_fails_waiters_and_releases(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as other:
        blocker = await other.lock(name + "/busy")
        client = lockstream.aio.Client(server.address)
        held = await client.lock(name)
        queued = asyncio.Event()
        waiting = asyncio.create_task(client.acquire(name + "/busy", on_queued=lambda _: queued.set()))
        await within(queued.wait())
        await client.close()
        with pytest.raises(lockstream.ClientClosed):
            await waiting
        assert raw.holders(name) == [] and raw.describe(name + "/busy").waiters == []
        assert not held.held and not held.lost.is_set()
        await blocker.release()


async def test_a_closed_client_fails_its_waiters_at_once_even_when_the_server_is_silent(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as other:
        blocker = await other.lock(name)
        client = lockstream.aio.Client(proxy.address, resume_grace=30)
        held = await client.lock(name + "/held")
        queued = asyncio.Event()
        waiting = asyncio.create_task(client.acquire(name, on_queued=lambda _: queued.set()))
        await within(queued.wait())
        assert proxy.freeze() == 1
        closed_at = time.monotonic()
        closing = asyncio.create_task(client.close())
        with pytest.raises(lockstream.ClientClosed):
            await asyncio.wait_for(waiting, 1.0)
        assert time.monotonic() - closed_at < 1.0
        with pytest.raises(lockstream.ClientClosed):
            await client.acquire(name + "/new")
        with pytest.raises(lockstream.ClientClosed):
            await client.describe(name)
        with pytest.raises(lockstream.ClientClosed):
            await held.set_value(b"too late")
        await within(closing)
        assert not held.held and not held.lost.is_set()
        await held.release()  # released by the closing: quiet
        await blocker.release()


async def test_a_bad_request_fails_alone_before_it_is_sent(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        held = await client.lock(name + "/held")
        for bad in ("n" * 10_240, "half \ud800", 42, ""):
            with pytest.raises(lockstream.InvalidArgument):
                await client.acquire(bad, timeout=1)  # type: ignore[arg-type]
        with pytest.raises(lockstream.InvalidArgument):
            await client.acquire(name, value=b"v" * 5_000)
        with pytest.raises(lockstream.InvalidArgument):
            await held.set_value("half \ud800")
        assert held.held and not held.lost.is_set()
        assert raw.holders(name + "/held") == [held.token]
        await held.release()


async def test_a_partitioned_holder_knows_its_lock_is_lost_before_anyone_else_is_granted_it(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    # Default options; the proxy stops forwarding both ways, keeping every socket open.
    async with lockstream.aio.Client(proxy.address) as holder, lockstream.aio.Client(server.address) as other:
        lock = await holder.lock(name)
        seen: list[str] = []
        lock.on_in_doubt(lambda doubt: seen.append(f"in doubt {doubt}"))
        lock.on_lost(lambda error: seen.append("lost"))
        queued = asyncio.Event()
        waiting = asyncio.create_task(other.acquire(name, on_queued=lambda _: queued.set()))
        await within(queued.wait())
        assert proxy.partition() == 1
        partitioned_at = time.monotonic()
        await within(lock.lost.wait())
        lost_at = time.monotonic()
        # Asked after `lost`: the server still has the lock for the old holder, the other still waits.
        assert raw.holders(name) == [lock.token] and not waiting.done()
        assert seen == ["in doubt True", "lost"]
        new = await asyncio.wait_for(waiting, PATIENCE)
        assert new.token > lock.token
        assert lost_at - partitioned_at < 5.0, f"lost {lost_at - partitioned_at:.1f} s after the partition"
        await new.release()


async def test_an_unreachable_server_is_unavailable_never_a_raw_grpc_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"  # nobody listens there
    async with lockstream.aio.Client(address, unavailable_retries=1) as client:
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "acquire": lambda: client.acquire("anything", timeout=5),
            "try_lock": lambda: client.try_lock("anything"),
            "acquire_all": lambda: client.acquire_all(["a", "b"], timeout=5),
            "describe": lambda: client.describe("anything"),
            "check_token": lambda: client.check_token("anything", 1),
        }
        for what, call in calls.items():
            with pytest.raises(lockstream.LockError) as failed:
                await asyncio.wait_for(call(), PATIENCE)
            assert failed.value.code == grpc.StatusCode.UNAVAILABLE, what
            assert not isinstance(failed.value, grpc.RpcError), what


async def test_done_says_when_every_lock_of_the_client_is_gone(
        start_server: Callable[..., Server], server: Server, name: str) -> None:
    doomed = start_server()
    client = lockstream.aio.Client(doomed.address, resume_grace=0)
    try:
        done = client.done
        locks = [await client.lock(name + "/a"), await client.lock(name + "/b")]
        assert not done.is_set() and not client.closed
        doomed.kill()
        await within(done.wait())
        assert all(lock.lost.is_set() for lock in locks) and not client.closed
    finally:
        await client.close()
    assert client.closed and client.done.is_set()
    # A client closed before it ever had a session is done too.
    unused = lockstream.aio.Client(server.address)
    await unused.close()
    assert unused.done.is_set()


async def test_every_call_on_a_closed_client_raises_client_closed_at_once(server: Server, name: str) -> None:
    client = lockstream.aio.Client(server.address)
    held = await client.lock(name + "/held", mode="write")
    await client.close()
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "acquire": lambda: client.acquire(name),
        "lock": lambda: client.lock(name).__aenter__(),
        "try_lock": lambda: client.try_lock(name),
        "acquire_all": lambda: client.acquire_all([name + "/a", name + "/b"]),
        "describe": lambda: client.describe(name),
        "check_token": lambda: client.check_token(name, 1),
        "set_value": lambda: held.set_value(b"late"),
        "downgrade": lambda: held.downgrade(),
    }
    for call in calls.values():
        with pytest.raises(lockstream.ClientClosed):
            await asyncio.wait_for(call(), 1.0)
    await held.release()  # released by the closing: quiet
    assert client.closed and client.done.is_set()


async def test_a_lock_runs_as_a_task_through_acquire_or_a_coroutine_holding_it(server: Server, name: str) -> None:
    # docs/python.md: lock() is a context manager and awaitable, not a coroutine, so it is no task
    # by itself; acquire() is, and a coroutine that holds lock() for a block is.
    held: list[int] = []

    async def hold(client: lockstream.aio.Client, lock_name: str) -> None:
        async with client.lock(lock_name, timeout=PATIENCE) as lock:
            held.append(lock.token)

    async with lockstream.aio.Client(server.address) as client:
        not_a_coroutine = client.lock(name)
        with pytest.raises(TypeError, match="a coroutine was expected"):
            asyncio.create_task(not_a_coroutine)  # type: ignore[arg-type]
        lock = await not_a_coroutine  # still awaitable: nothing was left queued or held
        await lock.release()
        await within(asyncio.gather(asyncio.create_task(hold(client, f"{name}/a")),
                                    asyncio.create_task(hold(client, f"{name}/b"))))
        assert len(held) == 2 and held[0] != held[1]
        task_lock = await within_result(asyncio.create_task(client.acquire(name, mode="write", timeout=PATIENCE)))
        assert task_lock.token > lock.token
        await task_lock.release()
        assert (await client.describe(name)).holders == ()


async def within_result(task: asyncio.Task[lockstream.aio.Lock]) -> lockstream.aio.Lock:
    return await asyncio.wait_for(task, PATIENCE)
