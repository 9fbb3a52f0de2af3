"""Clients of several endpoints: one lockstream server behind two (or three) TCP proxies, so that
every endpoint reaches the instance that has the session and a resume through any of them works.
Default options unless a test says otherwise: what a user gets."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Proxy, Raw, Server, Unanswering, eventually, unused_addresses


async def within(awaitable: object) -> None:
    await asyncio.wait_for(awaitable, PATIENCE)  # type: ignore[arg-type]


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_a_frozen_endpoint_fails_over_to_the_next_and_the_lock_is_kept(
        server: Server, proxy: Proxy, start_proxy: Callable[[str], Proxy], raw: Raw, name: str) -> None:
    second = start_proxy(server.address)
    with lockstream.Client([proxy.address, second.address]) as client, \
            lockstream.Client(server.address) as other:
        assert client.endpoints == (proxy.address, second.address) and client.endpoint == proxy.address
        lock = client.lock(name, mode="write")
        doubts: list[bool] = []
        lost: list[lockstream.LockLost] = []
        lock.on_in_doubt(doubts.append)
        lock.on_lost(lost.append)
        queued = threading.Event()
        granted: list[lockstream.Lock] = []
        waiter = threading.Thread(target=lambda: granted.append(
            other.lock(name, on_queued=lambda _: queued.set())), daemon=True)
        waiter.start()
        assert queued.wait(PATIENCE)

        # No byte passes either way and no socket closes: only the heartbeats can tell.
        assert proxy.freeze() == 1
        assert eventually(lambda: doubts == [True, False]), doubts
        assert client.endpoint == second.address and second.accepted == 1
        # Still held by the client, with the same token; the waiter was never granted it.
        assert raw.holders(name) == [lock.token] and waiter.is_alive() and not granted
        lock.set_value(b"through the second endpoint")
        assert [(h.fencing_token, h.value) for h in raw.describe(name).holders] == [
            (lock.token, b"through the second endpoint")]
        assert lock.held and not lock.in_doubt and not lock.lost.is_set() and not lost
        lock.release()
        waiter.join(PATIENCE)
        assert granted and granted[0].token > lock.token
        granted[0].release()
        assert not lost


async def test_a_killed_endpoint_fails_over_to_the_next_and_the_lock_is_kept(
        server: Server, proxy: Proxy, start_proxy: Callable[[str], Proxy], raw: Raw, name: str) -> None:
    second = start_proxy(server.address)
    async with lockstream.aio.Client([proxy.address, second.address]) as client, \
            lockstream.aio.Client(server.address) as other:
        lock = await client.lock(name)
        seen: list[str] = []
        lock.on_in_doubt(lambda doubt: seen.append(f"in doubt {doubt}"))
        lock.on_lost(lambda error: seen.append("lost"))
        queued = asyncio.Event()
        waiting = asyncio.create_task(other.acquire(name, on_queued=lambda _: queued.set()))
        await within(queued.wait())

        proxy.close()  # breaks every connection it carries, and refuses new ones
        await within(until(lambda: seen == ["in doubt True", "in doubt False"]))
        assert client.endpoint == second.address
        assert raw.holders(name) == [lock.token] and not waiting.done()
        # The session goes on through the second endpoint: new requests, then the release.
        async with client.lock(name + "/after") as after:
            assert raw.holders(name + "/after") == [after.token]
        await lock.release()
        new = await asyncio.wait_for(waiting, PATIENCE)
        assert new.token > lock.token and seen == ["in doubt True", "in doubt False"]
        await new.release()


async def test_a_lock_asked_for_while_the_client_fails_over_waits_for_the_session(
        server: Server, proxy: Proxy, start_proxy: Callable[[str], Proxy], raw: Raw, name: str) -> None:
    second = start_proxy(server.address)
    second.gate.clear()  # its connections wait: no resume can get through yet
    async with lockstream.aio.Client([proxy.address, second.address]) as client:
        first = await client.lock(name + "/first")
        proxy.close()
        await within(until(lambda: first.in_doubt))
        asking = asyncio.create_task(client.acquire(name + "/second", timeout=PATIENCE))
        await asyncio.sleep(0)  # the acquire runs up to its wait for the grant: it is asked for now
        assert not asking.done()
        second.gate.set()
        later = await asyncio.wait_for(asking, PATIENCE)
        assert raw.holders(name + "/second") == [later.token]
        await within(until(lambda: not first.in_doubt))
        assert raw.holders(name + "/first") == [first.token] and first.held and not first.lost.is_set()
        await later.release()
        await first.release()


async def test_an_endpoint_that_does_not_answer_is_given_up_in_time_for_the_next(
        server: Server, proxy: Proxy, start_proxy: Callable[[str], Proxy], unanswering: Unanswering, raw: Raw,
        name: str) -> None:
    # The second endpoint takes the resume's stream and never answers (an instance stuck before
    # it can take the session over). With the default 5 s grace, waiting on it until the
    # heartbeats give up (3 s) would leave no grace for the third: the attempt is cut short.
    third = start_proxy(server.address)
    async with lockstream.aio.Client([proxy.address, unanswering.address, third.address]) as client:
        lock = await client.lock(name)
        seen: list[str] = []
        lock.on_in_doubt(lambda doubt: seen.append(f"in doubt {doubt}"))
        lock.on_lost(lambda error: seen.append("lost"))
        assert proxy.freeze() == 1
        await within(until(lambda: seen == ["in doubt True", "in doubt False"]))
        assert unanswering.streams == 1
        assert client.endpoint == third.address and third.accepted == 1
        assert raw.holders(name) == [lock.token] and lock.held
        await lock.release()
        assert seen == ["in doubt True", "in doubt False"]


async def test_when_no_endpoint_takes_the_resume_the_lock_is_lost_before_anyone_else_is_granted_it(
        server: Server, proxy: Proxy, start_proxy: Callable[[str], Proxy], raw: Raw, name: str) -> None:
    second = start_proxy(server.address)
    async with lockstream.aio.Client([proxy.address, second.address]) as holder, \
            lockstream.aio.Client(server.address) as other:
        lock = await holder.lock(name)
        seen: list[str] = []
        lock.on_in_doubt(lambda doubt: seen.append(f"in doubt {doubt}"))
        lock.on_lost(lambda error: seen.append("lost"))
        queued = asyncio.Event()
        waiting = asyncio.create_task(other.acquire(name, on_queued=lambda _: queued.set()))
        await within(queued.wait())

        assert proxy.partition() == 1 and second.partition() == 0
        partitioned_at = time.monotonic()
        await within(lock.lost.wait())
        lost_at = time.monotonic()
        # Asked after `lost`: the server still keeps the lock for the session's grace.
        assert raw.holders(name) == [lock.token] and not waiting.done()
        assert seen == ["in doubt True", "lost"]
        assert lock.error is not None and lock.error.code == grpc.StatusCode.UNAVAILABLE
        assert "was not resumed on any of its 2 endpoints within 4.5 s" in str(lock.error), lock.error
        new = await asyncio.wait_for(waiting, PATIENCE)
        assert new.token > lock.token
        assert lost_at - partitioned_at < 5.0, f"lost {lost_at - partitioned_at:.1f} s after the partition"
        await new.release()


def test_a_refused_first_endpoint_sends_the_first_requests_to_the_second(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    [refused] = unused_addresses(1)
    with lockstream.Client([refused, proxy.address]) as client:
        # A unary call tries the next endpoint too, without moving the client.
        assert client.describe(name).holders == () and client.endpoint == refused
        with client.lock(name, timeout=PATIENCE) as lock:
            assert client.endpoint == proxy.address and proxy.accepted == 1
            assert raw.holders(name) == [lock.token]
            assert client.check_token(name, lock.token)


async def test_when_every_endpoint_refuses_a_request_is_unavailable() -> None:
    async with lockstream.aio.Client(unused_addresses(3), unavailable_retries=0) as client:
        for call in (lambda: client.acquire("anything", timeout=5), lambda: client.describe("anything")):
            with pytest.raises(lockstream.LockError) as failed:
                await asyncio.wait_for(call(), PATIENCE)
            assert failed.value.code == grpc.StatusCode.UNAVAILABLE
            assert not isinstance(failed.value, grpc.RpcError)


def test_a_session_resumed_on_a_server_that_does_not_have_it_is_lost_at_once(
        start_server: Callable[..., Server], server: Server, start_proxy: Callable[[str], Proxy],
        name: str) -> None:
    # Two endpoints, two servers: the second has never heard of the session (resuming on another
    # instance is for the servers to offer), and says so; the lock is lost then, not at the grace.
    first = start_server()
    to_first = start_proxy(first.address)
    with lockstream.Client([to_first.address, server.address], resume_grace=30) as client:
        lock = client.lock(name)
        broke_at = time.monotonic()
        to_first.close()
        assert lock.lost.wait(PATIENCE)
        assert lock.error is not None and lock.error.code == grpc.StatusCode.NOT_FOUND
        assert time.monotonic() - broke_at < 10, "lost at the grace, not at the server's answer"
        # The client goes on with a new session, on the endpoint it moved to.
        with client.lock(name, timeout=0) as again:
            assert again.held and client.endpoint == server.address


def test_a_bad_list_of_endpoints_is_refused_when_the_client_is_made(server: Server, name: str) -> None:
    refusals: dict[str, object] = {
        "the list of endpoints is empty: give at least one address": [],
        f"endpoints[1] {server.address!r} is listed twice (endpoints[0] is the same)": [server.address] * 2,
        'endpoints[1] must be an address such as "127.0.0.1:50051", not 50051': [server.address, 50051],
        'endpoints[0] must be an address such as "127.0.0.1:50051", not \'\'': ["", server.address],
        "endpoints[1] '127.0.0.1:70000' is not a valid address: the port 70000 is out of range: "
        "expected 1 to 65535": [server.address, "127.0.0.1:70000"],
        "endpoints[0] 'locks :50051' is not a valid address: it contains whitespace": ["locks :50051"],
        'target must be an address such as "127.0.0.1:50051" or a list of addresses, not bytes': b"127.0.0.1:1",
        "target 'locks:http' is not a valid address: the port 'http' is not a number": "locks:http",
        "target ':50051' is not a valid address: there is no host before the port": ":50051",
        "endpoints[1] 'localhost' is not a valid address: it has no port: each endpoint of a list is host:port":
            [server.address, "localhost"],
        "endpoints[1] 'LOCALHOST:1' is listed twice (endpoints[0] is the same)": ["localhost:1", "LOCALHOST:1"],
    }
    for message, target in refusals.items():
        for make in (lockstream.Client, lockstream.aio.Client):
            with pytest.raises(lockstream.InvalidArgument) as refused:
                make(target)  # type: ignore[arg-type]
            assert str(refused.value) == f"INVALID_ARGUMENT: {message}"
    # Any sequence of addresses, and what gRPC resolves itself.
    with lockstream.Client((server.address, "dns:///localhost:1", "[::1]:1", "localhost:1")) as client:
        assert client.endpoints == (server.address, "dns:///localhost:1", "[::1]:1", "localhost:1")
        with client.lock(name, timeout=5) as lock:
            assert lock.held and client.endpoint == server.address
