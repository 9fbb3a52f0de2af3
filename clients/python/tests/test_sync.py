"""The blocking client, against real lockstream servers."""

from __future__ import annotations

import os
import signal
import threading
import time

import grpc
import pytest

import lockstream
from conftest import Proxy, Server

PATIENCE = 20.0


def test_exclusion_in_queue_order_with_growing_tokens(server: Server, name: str) -> None:
    history: list[str] = []
    tokens: dict[str, int] = {}
    guard = threading.Lock()

    def record(event: str) -> None:
        with guard:
            history.append(event)

    clients = [lockstream.Client(server.address, owner=who) for who in "abc"]
    try:
        first = clients[0].lock(name, mode="write")
        record("a+")
        tokens["a"] = first.token
        threads = []
        for who, client in zip("bc", clients[1:]):
            queued = threading.Event()

            def hold(who: str = who, client: lockstream.Client = client, queued: threading.Event = queued) -> None:
                with client.lock(name, mode="write", on_queued=lambda _: queued.set()) as lock:
                    record(who + "+")
                    tokens[who] = lock.token
                    record(who + "-")

            thread = threading.Thread(target=hold)
            thread.start()
            threads.append(thread)
            assert queued.wait(PATIENCE), f"{who} did not queue"
        record("a-")
        first.release()
        for thread in threads:
            thread.join(PATIENCE)
        assert history == ["a+", "a-", "b+", "b-", "c+", "c-"]
        assert tokens["a"] < tokens["b"] < tokens["c"]
    finally:
        for client in clients:
            client.close()


def test_readers_share_and_a_writer_times_out(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as writer:
        with client.lock(name, mode="read") as one, client.lock(name, mode="read") as two:
            assert {holder.fencing_token for holder in client.describe(name).holders} == {one.token, two.token}
            with pytest.raises(lockstream.LockTimeout) as timed_out:
                writer.try_lock(name, mode="write")
            assert timed_out.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert timed_out.value.lock == name
            started = time.monotonic()
            with pytest.raises(lockstream.LockTimeout):
                writer.lock(name, mode="write", timeout=0.2)
            assert time.monotonic() - started >= 0.2
        with writer.lock(name, mode="write", timeout=5) as lock:
            assert lock.token > two.token


def test_an_interrupted_wait_leaves_the_queue(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as holder, lockstream.Client(server.address) as waiter:
        held = holder.lock(name)

        def interrupt_once_queued(ahead: int) -> None:
            # Ctrl-C while the main thread waits for the lock.
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

        with pytest.raises(KeyboardInterrupt):
            waiter.lock(name, on_queued=interrupt_once_queued)
        # The request left the queue before lock() raised.
        assert list(holder.describe(name).waiters) == []
        held.release()
        # The client goes on.
        waiter.try_lock(name).release()


def test_lost_is_set_and_the_callback_called_when_the_server_dies(own_server: Server, name: str) -> None:
    client = lockstream.Client(own_server.address, resume_grace=1)
    try:
        lock = client.lock(name, mode="write")
        called = threading.Event()
        errors: list[lockstream.LockLost] = []
        lock.on_lost(lambda error: (errors.append(error), called.set()))
        own_server.kill()
        assert lock.lost.wait(PATIENCE)
        assert called.wait(PATIENCE)
        assert isinstance(errors[0], lockstream.LockLost) and errors[0].lock == name
        with pytest.raises(lockstream.LockLost):
            lock.release()
    finally:
        client.close()


def test_a_broken_connection_is_resumed_and_the_lock_kept(server: Server, proxy: Proxy, name: str) -> None:
    with lockstream.Client(proxy.address, resume_grace=10, heartbeat_interval=0.2) as client, \
            lockstream.Client(server.address) as observer:
        lock = client.lock(name, mode="write")
        assert proxy.cut() > 0
        # Answered once the session is taken over on a new connection.
        lock.set_value(b"after the cut")
        holders = observer.describe(name).holders
        assert [(h.fencing_token, h.value) for h in holders] == [(lock.token, b"after the cut")]
        assert not lock.lost.is_set()
        with pytest.raises(lockstream.LockTimeout):
            observer.try_lock(name)
        lock.release()
        observer.try_lock(name).release()


def test_value_and_downgrade(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as reader_client:
        with client.lock(name, mode="write", value=b"10.0.0.7:8080") as lock:
            assert client.describe(name).holders[0].value == b"10.0.0.7:8080"
            lock.set_value(b"10.0.0.8:8080")
            assert client.describe(name).holders[0].value == b"10.0.0.8:8080"
            queued = threading.Event()
            readers: list[lockstream.Lock] = []
            thread = threading.Thread(target=lambda: readers.append(
                reader_client.lock(name, mode="read", on_queued=lambda _: queued.set())))
            thread.start()
            assert queued.wait(PATIENCE)
            lock.downgrade()
            assert lock.mode == "read"
            thread.join(PATIENCE)
            assert len(readers) == 1 and len(client.describe(name).holders) == 2
            readers[0].release()
        with client.lock(name, mode="read") as read:
            with pytest.raises(lockstream.LockError) as refused:
                read.downgrade()
            assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_semaphore(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client:
        heavy = client.lock(name, limit=3, weight=2)
        light = client.try_lock(name, limit=3)
        with pytest.raises(lockstream.LockTimeout):
            client.try_lock(name, limit=3)
        described = client.describe(name)
        assert (described.limit, described.used_weight) == (3, 3)
        heavy.release()
        light.release()


def test_revoke_request_is_seen(server: Server, name: str) -> None:
    from lockstream.v1 import lockstream_pb2 as pb
    from lockstream.v1 import lockstream_pb2_grpc as rpc

    with lockstream.Client(server.address) as client, grpc.insecure_channel(server.address) as channel:
        with client.lock(name) as lock:
            rpc.LockServiceStub(channel).RevokeLock(pb.RevokeLockRequest(name=name, reason="deploy"))
            assert lock.revoke_requested.wait(PATIENCE)
            assert lock.revoke_reason == "deploy"


def test_lock_all_takes_every_lock_or_none(server: Server, name: str) -> None:
    accounts, ledger = f"{name}/accounts", f"{name}/ledger"
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as other:
        blocker = other.lock(ledger)
        with pytest.raises(lockstream.LockTimeout):
            client.lock_all([accounts, lockstream.Target(ledger, "read")], timeout=0)
        other.try_lock(accounts).release()  # nothing of the refused set was taken
        blocker.release()
        with client.lock_all([accounts, lockstream.Target(ledger, "read")], timeout=5) as lock:
            assert list(lock.tokens) == [accounts, ledger]
            assert lock.token == lock.tokens[accounts]
            for each, token in lock.tokens.items():
                assert [h.fencing_token for h in client.describe(each).holders] == [token]
        assert not client.describe(accounts).holders and not client.describe(ledger).holders
