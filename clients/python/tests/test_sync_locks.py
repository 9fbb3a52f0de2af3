"""The blocking client, against real lockstream servers: taking locks in each mode, waiting in
line (and leaving it on a timeout or Ctrl-C), and what a holder does with a lock."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Calls, Raw, Server, check_history, eventually, join, queued_behind, start_thread, take


def test_two_clients_exclude_each_other(server: Server, name: str) -> None:
    history: list[tuple[str, str, int]] = []
    guard = threading.Lock()

    def work(client: lockstream.Client, who: str, mode: lockstream.Mode) -> None:
        for _ in range(10):
            with client.lock(name, mode=mode, timeout=PATIENCE) as lock:
                with guard:
                    history.append(("enter", who, lock.token))
                time.sleep(0.001)  # widen the window in which an overlap would show
                with guard:
                    history.append(("exit", who, lock.token))

    # A mutex and a write lock of the same name exclude each other too.
    with lockstream.Client(server.address, owner="a") as a, lockstream.Client(server.address, owner="b") as b:
        threads = [start_thread(lambda c=c, w=w, m=m: work(c, w, m))  # type: ignore[misc]
                   for c, w, m in ((a, "a1", "mutex"), (a, "a2", "write"), (b, "b1", "mutex"), (b, "b2", "write"))]
        for thread in threads:
            join(thread)
    assert len(history) == 80
    check_history(history)
    assert {who for _, who, _ in history} == {"a1", "a2", "b1", "b2"}


def test_waiters_are_granted_first_in_first_out(server: Server, raw: Raw, name: str) -> None:
    granted: list[tuple[str, int]] = []
    with lockstream.Client(server.address) as a, lockstream.Client(server.address) as b:
        first = a.lock(name)
        threads = []
        for index, (who, client) in enumerate([("w1", b), ("w2", a), ("w3", b), ("w4", a)]):
            queued = threading.Event()

            def wait(who: str = who, client: lockstream.Client = client, queued: threading.Event = queued,
                     ahead: int = index + 1) -> None:
                with client.lock(name, on_queued=queued_behind(ahead, queued)) as lock:
                    granted.append((who, lock.token))

            threads.append(start_thread(wait))
            assert queued.wait(PATIENCE), f"{who} was not queued behind {index + 1}"
        assert len(raw.describe(name).waiters) == 4
        first.release()
        for thread in threads:
            join(thread)
    assert [who for who, _ in granted] == ["w1", "w2", "w3", "w4"]
    tokens = [first.token] + [token for _, token in granted]
    assert tokens == sorted(tokens) and len(set(tokens)) == 5
    assert raw.describe(name).holders == [] and raw.describe(name).waiters == []


def test_readers_share_and_writers_exclude(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as readers, lockstream.Client(server.address) as writers:
        one = readers.lock(name, mode="read", timeout=5)
        two = readers.lock(name, mode="read", timeout=5)
        assert sorted(raw.holders(name)) == sorted([one.token, two.token])
        assert writers.try_lock(name, mode="write") is None

        writer_queued, writer_in = threading.Event(), threading.Event()
        writer_locks: list[lockstream.Lock] = []

        def write() -> None:
            writer_locks.append(writers.lock(name, mode="write", on_queued=lambda _: writer_queued.set()))
            writer_in.set()

        writer = start_thread(write)
        assert writer_queued.wait(PATIENCE)
        # A reader that comes after a waiting writer waits behind it: writers are not starved.
        reader_queued = threading.Event()
        late_readers: list[lockstream.Lock] = []
        late = start_thread(lambda: late_readers.append(
            readers.lock(name, mode="read", on_queued=lambda _: reader_queued.set())))
        assert reader_queued.wait(PATIENCE)

        one.release()
        assert not writer_in.is_set()
        two.release()
        join(writer)
        (held,) = writer_locks
        assert raw.holders(name) == [held.token] and held.token > max(one.token, two.token)
        assert not late_readers
        held.release()
        join(late)
        assert raw.holders(name) == [late_readers[0].token]
        late_readers[0].release()


def test_a_timeout_raises_lock_timeout_and_leaves_nothing_queued(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as holder, lockstream.Client(server.address) as waiter:
        with holder.lock(name, mode="write"):
            # try_lock answers None: not acquiring is an answer, as for threading.Lock.
            assert waiter.try_lock(name) is None
            with pytest.raises(lockstream.LockTimeout) as busy:
                waiter.lock(name, timeout=0)
            assert busy.value.code == grpc.StatusCode.DEADLINE_EXCEEDED and busy.value.lock == name
            assert isinstance(busy.value, lockstream.LockError)
            started = time.monotonic()
            with pytest.raises(lockstream.LockTimeout):
                waiter.lock(name, mode="read", timeout=0.3)
            assert time.monotonic() - started >= 0.3
            assert raw.describe(name).waiters == []
        # The client goes on after its timeouts.
        with take(waiter, name) as lock:
            assert raw.holders(name) == [lock.token]


@pytest.fixture
def interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, as in a program started from a terminal: a shell starts
    a background job with SIGINT ignored, and Python then keeps it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("interrupts")
def test_an_interrupted_wait_leaves_the_queue(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as holder, lockstream.Client(server.address) as waiter:
        held = holder.lock(name)

        def interrupt_once_queued(ahead: int) -> None:
            # Ctrl-C while the main thread waits for the lock.
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

        with pytest.raises(KeyboardInterrupt):
            waiter.lock(name, on_queued=interrupt_once_queued)
        # The request left the queue before lock() raised: a second client sees nothing queued.
        assert raw.describe(name).waiters == []
        held.release()
        # Nobody was granted the lock on the interrupted client's behalf.
        assert raw.describe(name).holders == []
        take(waiter, name).release()


@pytest.mark.usefixtures("interrupts")
def test_an_interrupt_the_kernel_gives_another_thread_still_ends_the_wait(server: Server, raw: Raw, name: str) -> None:
    # Ctrl-C reaches whichever thread the kernel picks: here the client's callback thread. Its
    # handler runs in the main thread only once that thread runs Python code again, which a
    # wait blocked for good would never do.
    with lockstream.Client(server.address) as holder, lockstream.Client(server.address) as waiter:
        held = holder.lock(name)

        def interrupt_another_thread(ahead: int) -> None:
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

        with pytest.raises(KeyboardInterrupt):
            waiter.lock(name, on_queued=interrupt_another_thread)
        assert raw.describe(name).waiters == []
        held.release()


def test_set_value_is_published(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client:
        with client.lock(name, mode="write", value=b"10.0.0.7:8080") as lock:
            assert raw.describe(name).holders[0].value == b"10.0.0.7:8080"
            lock.set_value(b"10.0.0.8:8080")
            assert raw.describe(name).holders[0].value == b"10.0.0.8:8080"
            lock.set_value("leader: 10.0.0.9")  # a str is sent as UTF-8
            assert raw.describe(name).holders[0].value == b"leader: 10.0.0.9"
            with pytest.raises(lockstream.LockError) as too_big:
                lock.set_value(b"x" * 1025)
            assert too_big.value.code == grpc.StatusCode.INVALID_ARGUMENT
            lock.set_value(b"")
            assert raw.describe(name).holders[0].value == b""
        with pytest.raises(lockstream.NotHeld):
            lock.set_value(b"too late")


def test_describe_says_who_holds_and_who_waits(server: Server, name: str) -> None:
    with lockstream.Client(server.address, owner="writer") as client, \
            lockstream.Client(server.address, owner="reader") as other:
        with client.lock(name, mode="write", value=b"10.0.0.7:8080") as lock:
            queued = threading.Event()
            waiting = start_thread(lambda: other.lock(name, mode="read", on_queued=lambda _: queued.set()).release())
            assert queued.wait(PATIENCE)
            described = other.describe(name)
            assert isinstance(described, lockstream.LockDescription) and described.name == name
            (holder,) = described.holders
            assert (holder.token, holder.mode, holder.owner, holder.value) == (
                lock.token, "write", "writer", b"10.0.0.7:8080")
            assert holder.requested_at is not None and holder.requested_at.tzinfo is not None
            assert holder.peer and holder.instance
            (waiter,) = described.waiters
            assert (waiter.mode, waiter.owner, waiter.value, waiter.weight) == ("read", "reader", b"", 0)
            assert (described.limit, described.used_weight) == (0, 0)
        join(waiting)
        assert other.describe(name).holders == () and other.describe(name).waiters == ()


def test_downgrade_lets_queued_readers_in(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as others:
        lock = client.lock(name, mode="write")
        reader_queued, writer_queued = threading.Event(), threading.Event()
        readers: list[lockstream.Lock] = []
        writers: list[lockstream.Lock] = []
        reader = start_thread(lambda: readers.append(
            others.lock(name, mode="read", on_queued=lambda _: reader_queued.set())))
        assert reader_queued.wait(PATIENCE)
        writer = start_thread(lambda: writers.append(
            others.lock(name, mode="write", on_queued=lambda _: writer_queued.set())))
        assert writer_queued.wait(PATIENCE)

        lock.downgrade()
        assert lock.mode == "read" and lock.held
        join(reader)
        assert sorted(raw.holders(name)) == sorted([lock.token, readers[0].token])  # the same token
        assert not writers
        lock.downgrade()  # again: harmless
        readers[0].release()
        lock.release()
        join(writer)
        writers[0].release()

        # Only a write lock can be downgraded; a refused downgrade leaves the lock held.
        with client.lock(name, mode="read") as read:
            with pytest.raises(lockstream.LockError) as refused:
                read.downgrade()
            assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert read.held and raw.holders(name) == [read.token]


def test_semaphore(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client:
        heavy = client.lock(name, limit=3, weight=2)
        light = take(client, name, limit=3)
        assert heavy.mode == "semaphore"
        assert client.try_lock(name, limit=3) is None
        described = raw.describe(name)
        assert (described.limit, described.used_weight) == (3, 3)
        heavy.release()
        light.release()


def test_a_revoke_request_is_seen(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client:
        with client.lock(name) as lock:
            asked = Calls[lockstream.RevokeRequest]()
            lock.on_revoke_requested(asked)
            assert raw.revoke(name, "deploy") == 1
            assert lock.revoke_requested.wait(PATIENCE) and asked.called.wait(PATIENCE)
            assert lock.revoke_reason == "deploy"
            assert [(r.reason, r.force_at) for r in asked.values] == [("deploy", None)]


def test_a_forced_revoke_after_a_cooperative_one_is_seen_too(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client:
        with client.lock(name) as lock:
            asked = Calls[lockstream.RevokeRequest]()
            lock.on_revoke_requested(asked)
            assert raw.revoke(name, "deploy") == 1
            assert asked.called.wait(PATIENCE)
            late = Calls[lockstream.RevokeRequest]()  # registered between the two: told both
            lock.on_revoke_requested(late)
            asked_before = time.time()
            assert raw.revoke(name, "deploy now", force_after=PATIENCE) == 1
            assert eventually(lambda: len(asked.values) == 2 and len(late.values) == 2), (asked.values, late.values)
            (first, second) = asked.values
            assert (first.reason, first.force_at) == ("deploy", None)
            assert second.reason == "deploy now" and second.force_at is not None
            assert asked_before + PATIENCE - 5 < second.force_at.timestamp() < time.time() + PATIENCE + 5
            assert late.values == asked.values and lock.revoke_reason == "deploy now"


def test_lock_all_takes_every_lock_or_none(server: Server, raw: Raw, name: str) -> None:
    accounts, ledger = f"{name}/accounts", f"{name}/ledger"
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as other:
        blocker = other.lock(ledger)
        with pytest.raises(lockstream.LockTimeout):
            client.lock_all([accounts, lockstream.Target(ledger, "read")], timeout=0)
        take(other, accounts).release()  # nothing of the refused set was taken
        blocker.release()
        with client.lock_all([accounts, lockstream.Target(ledger, "read")], timeout=5) as lock:
            assert list(lock.tokens) == [accounts, ledger]
            assert lock.token == lock.tokens[accounts]
            for each, token in lock.tokens.items():
                assert raw.holders(each) == [token]
        assert raw.holders(accounts) == [] and raw.holders(ledger) == []


def test_many_locks_on_one_client(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client:
        locks = [client.lock(f"{name}/{index}", timeout=5) for index in range(50)]
        assert all(raw.holders(lock.name) == [lock.token] for lock in locks[::10])
        assert client.check_token(locks[0].name, locks[0].token)
        for lock in locks:
            lock.release()
        assert not client.check_token(locks[0].name, locks[0].token)
