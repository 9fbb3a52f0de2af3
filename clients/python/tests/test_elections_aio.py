"""Elections on the asyncio client, against a real lockstream server: campaign, observe, leader,
proclaim and resign."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Proxy, Raw, Server, queued_behind


async def within(awaitable: object) -> None:
    await asyncio.wait_for(awaitable, PATIENCE)  # type: ignore[arg-type]


async def next_event(events: lockstream.aio.Observation) -> lockstream.ElectionEvent:
    return await asyncio.wait_for(events.__anext__(), PATIENCE)


async def test_a_campaign_is_elected_with_a_term_and_resigns_when_its_block_ends(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address, owner="node-a") as client:
        async with client.campaign(name, "10.0.0.1:8080") as leadership:
            assert leadership.name == name and leadership.term > 0 and leadership.leading
            assert not leadership.lost.is_set() and leadership.error is None
            leader = await client.leader(name)
            assert leader is not None
            assert (leader.term, leader.value, leader.owner) == (leadership.term, b"10.0.0.1:8080", "node-a")
            assert leader.elected_at is not None
            # The term is a fencing token: CheckToken knows it while it lasts.
            assert await client.check_token(name, leadership.term)
        assert not leadership.leading and not leadership.lost.is_set()
        assert await client.leader(name) is None
        assert not await client.check_token(name, leadership.term)
        await leadership.resign()  # idempotent


async def test_a_second_candidate_waits_and_is_elected_after_the_first_leaves(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as a, lockstream.aio.Client(server.address) as b:
        async with a.campaign(name, b"a") as first:
            queued = asyncio.Event()
            second_task = asyncio.create_task(b.campaign(name, b"b", on_queued=queued_behind(1, queued)).__aenter__())
            await within(queued.wait())
            assert not second_task.done()
            leader = await a.leader(name)
            assert leader is not None and leader.term == first.term
        second = await asyncio.wait_for(second_task, PATIENCE)
        assert second.term > first.term and second.leading
        assert not first.lost.is_set()
        now = await b.leader(name)
        assert now is not None and (now.term, now.value) == (second.term, b"b")
        await second.resign()
        assert await a.leader(name) is None


async def test_a_leader_deposed_by_resign_elsewhere_knows_before_the_next_candidate_leads(
        server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as candidates, lockstream.aio.Client(server.address) as other:
        first = await candidates.campaign(name, b"first")
        seen: list[lockstream.LockLost] = []
        first.on_lost(seen.append)
        queued = asyncio.Event()
        lost_when_second_entered: list[bool] = []

        async def second_candidate() -> int:
            async with candidates.campaign(name, b"second", on_queued=queued_behind(1, queued)) as second:
                lost_when_second_entered.append(first.lost.is_set())
                return second.term

        task = asyncio.create_task(second_candidate())
        await within(queued.wait())
        await other.resign(name, first.term)
        second_term = await asyncio.wait_for(task, PATIENCE)
        assert lost_when_second_entered == [True]
        assert second_term > first.term
        assert first.lost.is_set() and not first.leading
        assert isinstance(first.error, lockstream.LockLost) and first.error.code == grpc.StatusCode.ABORTED
        assert seen == [first.error]
        with pytest.raises(lockstream.LockLost):
            await first.resign()
        # The stale term is refused now, by Resign and Proclaim alike.
        with pytest.raises(lockstream.NotHeld) as stale:
            await other.resign(name, first.term)
        assert stale.value.code == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(lockstream.NotHeld):
            await other.proclaim(name, first.term, b"stale")


async def test_leaving_the_block_of_a_lost_leadership_raises_lock_lost(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        with pytest.raises(lockstream.LockLost):
            async with client.campaign(name) as leadership:
                await client.resign(name, leadership.term)
                await within(leadership.lost.wait())


async def test_observe_tells_vacant_then_each_term_its_proclamations_and_the_vacancy_after_it(
        server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        async with client.observe(name) as events:
            assert await next_event(events) == lockstream.Vacant(after_term=0)
            async with client.campaign(name, b"a", owner="A") as a:
                told = await next_event(events)
                assert isinstance(told, lockstream.Term)
                assert (told.term, told.value, told.owner) == (a.term, b"a", "A") and told.elected_at is not None
                await a.proclaim("a2")
                assert await next_event(events) == lockstream.Proclaimed(term=a.term, value=b"a2")
                await client.proclaim(name, a.term, b"a3")
                assert await next_event(events) == lockstream.Proclaimed(term=a.term, value=b"a3")
                leader = await client.leader(name)
                assert leader is not None and leader.value == b"a3"
            assert await next_event(events) == lockstream.Vacant(after_term=a.term)
            async with client.campaign(name, b"b") as b:
                told = await next_event(events)
                assert isinstance(told, lockstream.Term) and (told.term, told.value) == (b.term, b"b")
                assert b.term > a.term
            assert await next_event(events) == lockstream.Vacant(after_term=b.term)
        # Closed: the iteration is over.
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()


async def test_observe_from_a_term_replays_every_term_since(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        terms = []
        for index in range(4):
            async with client.campaign(name, f"c{index}") as leadership:
                terms.append(leadership.term)
        assert terms == sorted(terms)
        seen: list[lockstream.ElectionEvent] = []
        async with client.observe(name, from_term=terms[1]) as events:
            async for event in events:
                seen.append(event)
                if isinstance(event, lockstream.Vacant):
                    break
        assert [(event.term, event.value) for event in seen[:-1] if isinstance(event, lockstream.Term)] == [
            (term, f"c{index}".encode()) for index, term in enumerate(terms) if index >= 1]
        assert len(seen) == len(terms)  # three terms, then the vacancy
        assert seen[-1] == lockstream.Vacant(after_term=terms[-1])


async def test_a_cancelled_wait_for_an_event_does_not_end_the_observation(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        async with client.observe(name) as events:
            assert await next_event(events) == lockstream.Vacant(after_term=0)
            waiting = asyncio.create_task(events.__anext__())
            await asyncio.sleep(0)  # it runs until it waits for the server's next message
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            async with client.campaign(name, b"a") as leadership:
                told = await next_event(events)
                assert isinstance(told, lockstream.Term) and told.term == leadership.term


async def test_the_leadership_is_lost_when_the_server_is_killed(start_server: Callable[..., Server],
                                                                 name: str) -> None:
    doomed = start_server()
    async with lockstream.aio.Client(doomed.address, resume_grace=0) as client:
        leadership = await client.campaign(name)
        with pytest.raises(lockstream.LockLost):
            async with leadership:
                doomed.kill()
                await within(leadership.lost.wait())
        assert isinstance(leadership.error, lockstream.LockLost) and not leadership.leading


async def test_leader_is_none_for_an_election_nobody_leads(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        assert await client.leader(name) is None


async def test_a_stale_or_foreign_term_is_refused_with_not_held(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        async with client.campaign(name, b"v") as leadership:
            for wrong in (leadership.term - 1, leadership.term + 1, 0):
                with pytest.raises(lockstream.NotHeld) as refused:
                    await client.proclaim(name, wrong, b"x")
                assert f"term {wrong} is not the current leader's" in refused.value.message
                with pytest.raises(lockstream.NotHeld):
                    await client.resign(name, wrong)
            # Nothing changed.
            assert leadership.leading
            leader = await client.leader(name)
            assert leader is not None and (leader.term, leader.value) == (leadership.term, b"v")
        with pytest.raises(lockstream.NotHeld):
            await leadership.proclaim(b"after")
        with pytest.raises(lockstream.NotHeld):
            await client.proclaim(name, leadership.term, b"after")


async def test_a_timed_out_or_cancelled_campaign_leaves_nothing_queued(server: Server, raw: Raw, name: str) -> None:
    async with lockstream.aio.Client(server.address) as leader, lockstream.aio.Client(server.address) as waiter:
        async with leader.campaign(name):
            with pytest.raises(lockstream.LockTimeout):
                await waiter.campaign(name, timeout=0)
            assert raw.describe(name).waiters == []
            queued = asyncio.Event()
            task = asyncio.create_task(waiter.campaign(name, on_queued=lambda _: queued.set()).__aenter__())
            await within(queued.wait())
            assert len(raw.describe(name).waiters) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert raw.describe(name).waiters == []
        assert await waiter.leader(name) is None


async def test_an_election_is_not_a_lock(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        async with client.campaign(name):
            with pytest.raises(lockstream.LockError) as refused:
                await client.lock(name, timeout=PATIENCE)
            assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(lockstream.InvalidArgument):
            client.campaign("")
        with pytest.raises(lockstream.InvalidArgument):
            client.campaign(name, b"x" * 1025)
        with pytest.raises(lockstream.InvalidArgument):
            client.observe(name, from_term=-1)


async def test_closing_the_client_resigns_and_withdraws_its_candidates(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as observer:
        client = lockstream.aio.Client(server.address)
        leadership = await client.campaign(name)
        queued = asyncio.Event()
        waiting = asyncio.create_task(client.campaign(name, on_queued=lambda _: queued.set()).__aenter__())
        await within(queued.wait())
        events = client.observe(name)
        assert isinstance(await next_event(events), lockstream.Term)
        reading = asyncio.create_task(events.__anext__())
        await asyncio.sleep(0)  # it runs until it waits for the server's next message
        await client.close()
        with pytest.raises(lockstream.ClientClosed):
            await asyncio.wait_for(waiting, PATIENCE)
        with pytest.raises(lockstream.ClientClosed):
            await asyncio.wait_for(reading, PATIENCE)
        with pytest.raises(lockstream.ClientClosed):
            await events.__anext__()
        assert not leadership.leading and not leadership.lost.is_set()
        assert await observer.leader(name) is None
        with pytest.raises(lockstream.ClientClosed):
            await client.leader(name)


async def test_a_leadership_outlives_a_broken_connection_with_the_same_term(proxy: Proxy, name: str) -> None:
    async with lockstream.aio.Client(proxy.address) as client:
        async with client.campaign(name) as leadership:
            doubts: list[bool] = []
            confirmed = asyncio.Event()

            def doubted(doubt: bool) -> None:
                doubts.append(doubt)
                if not doubt:
                    confirmed.set()

            leadership.on_in_doubt(doubted)
            assert proxy.cut() >= 1
            await within(confirmed.wait())
            assert doubts == [True, False]
            assert leadership.leading and not leadership.lost.is_set()
            leader = await client.leader(name)
            assert leader is not None and leader.term == leadership.term
        assert await client.leader(name) is None
