"""The blocking client, against real lockstream servers: its session through broken streams and
lost servers: resumed and kept, or lost and said so (lock.lost, client.done)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Calls, Proxy, Raw, Server, eventually, join, start_thread, take


def test_the_lock_is_lost_when_the_server_is_killed(start_server: Callable[..., Server], name: str) -> None:
    doomed = start_server()
    client = lockstream.Client(doomed.address, resume_grace=1, heartbeat_interval=0.5)
    try:
        lock = client.lock(name, mode="write")
        other = client.lock(name + "/other")
        called = threading.Event()
        errors: list[lockstream.LockLost] = []

        def lost(error: lockstream.LockLost) -> None:
            errors.append(error)
            # A callback may use the client (it does not run on its event loop): here the other
            # lock of the session, lost with it.
            with pytest.raises(lockstream.LockLost):
                other.release()
            called.set()

        lock.on_lost(lost)
        with pytest.raises(lockstream.LockLost) as raised:
            with lock:
                doomed.kill()
                assert lock.lost.wait(PATIENCE), "lost was not set"
        assert called.wait(PATIENCE), "the callback was not called"
        assert errors == [lock.error] and raised.value is lock.error
        assert isinstance(errors[0], lockstream.LockLost) and errors[0].lock == name
        assert errors[0].code == grpc.StatusCode.UNAVAILABLE
        assert not lock.held and not lock.in_doubt
        with pytest.raises(lockstream.LockLost):
            lock.release()
        late: list[lockstream.LockLost] = []
        lock.on_lost(late.append)  # once lost, at once
        assert late == errors
    finally:
        client.close()


def test_a_cut_connection_is_resumed_and_the_lock_kept(server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    with lockstream.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client, \
            lockstream.Client(server.address) as other:
        lock = client.lock(name, mode="write", value=b"before")
        doubts: list[bool] = []
        lost: list[lockstream.LockLost] = []
        lock.on_in_doubt(doubts.append)
        lock.on_lost(lost.append)
        assert proxy.cut() == 1
        assert proxy.wait_for_connections(2), "the client did not reconnect"
        # Answered once the session is taken over on the new connection.
        lock.set_value(b"after the cut")
        assert eventually(lambda: doubts == [True, False]), doubts
        description = raw.describe(name)
        assert [(h.fencing_token, h.value) for h in description.holders] == [(lock.token, b"after the cut")]
        assert not lock.lost.is_set() and lock.held and not lock.in_doubt and not lost
        assert other.try_lock(name) is None
        lock.release()
        assert raw.describe(name).holders == []
        take(other, name).release()
        assert not lock.lost.is_set() and not lost


def test_a_waiting_request_keeps_its_place_through_a_cut(server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as holder, \
            lockstream.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as waiter, \
            lockstream.Client(server.address) as late:
        held = holder.lock(name)
        queued, late_queued = threading.Event(), threading.Event()
        got: list[lockstream.Lock] = []
        thread = start_thread(lambda: got.append(waiter.lock(name, on_queued=lambda _: queued.set())))
        assert queued.wait(PATIENCE)
        behind: list[lockstream.Lock] = []
        late_thread = start_thread(lambda: behind.append(late.lock(name, on_queued=lambda _: late_queued.set())))
        assert late_queued.wait(PATIENCE)
        assert proxy.cut() == 1
        assert proxy.wait_for_connections(2)
        held.release()
        join(thread)
        assert raw.holders(name) == [got[0].token]
        got[0].release()
        join(late_thread)
        behind[0].release()
        assert got[0].token < behind[0].token


def test_a_lock_asked_for_while_the_session_is_resumed_is_asked_for_after(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    with lockstream.Client(proxy.address, resume_grace=20, heartbeat_interval=0.2) as client:
        first = client.lock(name + "/first")
        proxy.gate.clear()  # the next connection waits
        assert proxy.cut() == 1
        assert eventually(lambda: first.in_doubt)
        got: list[lockstream.Lock] = []
        second = start_thread(lambda: got.append(client.lock(name + "/second", timeout=PATIENCE)))
        proxy.gate.set()
        join(second)
        assert raw.holders(name + "/second") == [got[0].token]
        assert eventually(lambda: not first.in_doubt)
        assert raw.holders(name + "/first") == [first.token] and first.held and not first.lost.is_set()
        got[0].release()
        first.release()


def test_heartbeats_notice_a_silent_connection(server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    # The proxy goes on accepting the connection's bytes and drops them: no reset, no close.
    # Three heartbeat intervals without a word from the server, then keepalive, end it; the
    # session is taken over on a new connection, with the lock.
    with lockstream.Client(proxy.address, resume_grace=30, heartbeat_interval=0.2) as client:
        lock = client.lock(name, mode="write")
        assert proxy.freeze() == 1
        assert eventually(lambda: lock.in_doubt), "the silence was not noticed"
        assert proxy.wait_for_connections(2), "the client did not reconnect"
        lock.set_value(b"through a new connection")
        assert eventually(lambda: not lock.in_doubt)
        assert [(h.fencing_token, h.value) for h in raw.describe(name).holders] == [
            (lock.token, b"through a new connection")]
        assert not lock.lost.is_set()
        lock.release()


def test_a_session_the_server_does_not_know_loses_every_lock(
        start_server: Callable[..., Server], server: Server, name: str) -> None:
    first = start_server()
    proxy = Proxy(first.address)
    try:
        with lockstream.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client:
            locks = [client.lock(name + "/a"), client.lock(name + "/b", mode="read")]
            seen = Calls[lockstream.LockLost]()
            locks[1].on_lost(seen)
            # The next connection reaches another server, which has never heard of the session.
            proxy.retarget(server.address)
            proxy.cut()
            for lock in locks:
                assert lock.lost.wait(PATIENCE)
                assert lock.error is not None and lock.error.code == grpc.StatusCode.NOT_FOUND
            assert seen.called.wait(PATIENCE) and seen.values == [locks[1].error]
            # The client goes on with a new session.
            take(client, name + "/a").release()
    finally:
        proxy.close()


def test_leaving_a_block_that_raised_after_the_lock_was_lost(start_server: Callable[..., Server], name: str) -> None:
    doomed = start_server()
    with lockstream.Client(doomed.address, resume_grace=0) as client:
        with pytest.raises(RuntimeError) as raised:
            with client.lock(name) as lock:
                doomed.kill()
                assert lock.lost.wait(PATIENCE)
                raise RuntimeError("the work failed")
        # The block's own exception propagates, and says that the lock was lost too.
        assert str(raised.value) == "the work failed"
        assert raised.value.__notes__ == [f"lockstream: the lock was lost while the block ran: {lock.error}"]


def test_a_partitioned_holder_knows_its_lock_is_lost_before_anyone_else_is_granted_it(
        server: Server, proxy: Proxy, raw: Raw, name: str) -> None:
    # Default options: what a user gets. The proxy stops forwarding both ways and keeps every
    # socket open, new ones too: no reset, no close, just silence, as in a network partition.
    with lockstream.Client(proxy.address) as holder, lockstream.Client(server.address) as other:
        lock = holder.lock(name)
        seen: list[str] = []  # in the order the callbacks run, which is the order of the events
        lock.on_in_doubt(lambda doubt: seen.append(f"in doubt {doubt}"))
        lock.on_lost(lambda error: seen.append("lost"))
        queued = threading.Event()
        granted: list[tuple[lockstream.Lock, float]] = []
        waiting = start_thread(lambda: granted.append(
            (other.lock(name, on_queued=lambda _: queued.set()), time.monotonic())))
        assert queued.wait(PATIENCE)
        assert proxy.partition() == 1
        partitioned_at = time.monotonic()
        assert lock.lost.wait(PATIENCE), "the partitioned holder never noticed"
        lost_at = time.monotonic()
        # Asked after `lost`: the server still has the lock for the old holder, nobody else has it.
        assert raw.holders(name) == [lock.token] and not granted
        assert lock.error is not None and lock.error.code == grpc.StatusCode.UNAVAILABLE
        assert not lock.held and not lock.in_doubt
        join(waiting)
        ((new, granted_at),) = granted
        assert new.token > lock.token and lost_at < granted_at
        assert eventually(lambda: seen == ["in doubt True", "lost"]), seen
        # With the defaults: lost within the grace (5 s) of the partition.
        assert lost_at - partitioned_at < 5.0, f"lost {lost_at - partitioned_at:.1f} s after the partition"
        new.release()


def test_done_says_when_every_lock_of_the_client_is_gone(
        start_server: Callable[..., Server], server: Server, name: str) -> None:
    first = start_server()
    proxy = Proxy(first.address)
    try:
        with lockstream.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client:
            done = client.done
            locks = [client.lock(name + "/a"), client.lock(name + "/b", mode="read")]
            assert not done.is_set() and not client.closed
            # The session is resumed on a server that never heard of it: every lock is lost.
            proxy.retarget(server.address)
            proxy.cut()
            assert done.wait(PATIENCE), "done was not set"
            assert all(lock.lost.is_set() for lock in locks)
            assert client.done is done
            # The next lock opens a new session, with a new done.
            lock = take(client, name + "/a")
            renewed = client.done
            assert renewed is not done and not renewed.is_set()
        # Closing the client sets it too.
        assert renewed.is_set() and client.closed
        assert not lock.lost.is_set()
    finally:
        proxy.close()
