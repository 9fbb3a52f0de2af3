"""Elections on the blocking client, against a real lockstream server: campaign as a context
manager, observe as an iterator, and a leadership's loss seen from a thread."""

from __future__ import annotations

import threading

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Calls, Server, eventually, join, queued_behind, start_thread


def test_campaign_leads_for_its_block_and_a_second_candidate_follows(server: Server, name: str) -> None:
    with lockstream.Client(server.address, owner="sync") as a, lockstream.Client(server.address) as b:
        terms: list[int] = []
        queued = threading.Event()
        with a.campaign(name, "first") as first:
            assert first.leading and first.term > 0 and not first.lost.is_set()
            leader = a.leader(name)
            assert leader is not None and (leader.term, leader.value, leader.owner) == (first.term, b"first", "sync")

            def second_candidate() -> None:
                with b.campaign(name, b"second", on_queued=queued_behind(1, queued)) as second:
                    terms.append(second.term)

            thread = start_thread(second_candidate)
            assert queued.wait(PATIENCE)
            assert terms == []
        join(thread)
        assert len(terms) == 1 and terms[0] > first.term
        assert not first.leading and not first.lost.is_set()
        assert a.leader(name) is None


def test_observe_iterates_the_terms_in_order(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client:
        with client.observe(name) as events:
            assert next(events) == lockstream.Vacant(after_term=0)
            with client.campaign(name, b"a") as a:
                told = next(events)
                assert isinstance(told, lockstream.Term) and (told.term, told.value) == (a.term, b"a")
                a.proclaim(b"a2")
                assert next(events) == lockstream.Proclaimed(term=a.term, value=b"a2")
            assert next(events) == lockstream.Vacant(after_term=a.term)
            with client.campaign(name, b"b") as b:
                pass
        # A replay from a's term, read with a for loop.
        seen: list[lockstream.ElectionEvent] = []
        with client.observe(name, from_term=a.term) as replay:
            for event in replay:
                seen.append(event)
                if isinstance(event, lockstream.Vacant):
                    break
        assert [(e.term, e.value) for e in seen if isinstance(e, lockstream.Term)] == [(a.term, b"a"), (b.term, b"b")]
        assert lockstream.Proclaimed(term=a.term, value=b"a2") in seen
        assert seen[-1] == lockstream.Vacant(after_term=b.term)
        with pytest.raises(StopIteration):
            next(replay)


def test_a_leader_deposed_elsewhere_sees_lost_and_its_block_raises(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as other:
        lost: Calls[lockstream.LockLost] = Calls()
        with pytest.raises(lockstream.LockLost) as raised:
            with client.campaign(name) as leadership:
                leadership.on_lost(lost)
                other.resign(name, leadership.term)
                assert leadership.lost.wait(PATIENCE)
        assert raised.value.code == grpc.StatusCode.ABORTED
        assert lost.called.wait(PATIENCE) and lost.values == [leadership.error]
        with pytest.raises(lockstream.NotHeld):
            other.resign(name, leadership.term)
        with pytest.raises(lockstream.NotHeld):
            other.proclaim(name, leadership.term, b"stale")
        assert other.leader(name) is None


def test_closing_the_client_ends_its_leadership_and_observation(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as observer:
        client = lockstream.Client(server.address)
        leadership = client.campaign(name, timeout=PATIENCE)
        events = client.observe(name)
        assert isinstance(next(events), lockstream.Term)
        failures: list[BaseException] = []

        def read_on() -> None:
            try:
                next(events)
            except BaseException as error:  # what the reader saw is the test
                failures.append(error)

        reader: threading.Thread = start_thread(read_on)
        assert eventually(lambda: events._observation._reading is not None)  # it waits for the server
        client.close()
        join(reader)
        assert len(failures) == 1 and isinstance(failures[0], lockstream.ClientClosed)
        assert not leadership.leading and not leadership.lost.is_set()
        leadership.resign()  # quiet: resigned by closing the client
        events.close()  # quiet: ended by closing the client
        assert observer.leader(name) is None
