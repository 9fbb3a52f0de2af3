"""The blocking client, against real lockstream servers."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Calls, Proxy, Raw, Server, check_history, eventually, queued_behind


def start_thread(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def take(client: lockstream.Client, name: str, **options: Any) -> lockstream.Lock:
    """try_lock on a lock that must be free."""
    lock = client.try_lock(name, **options)
    assert lock is not None, f"{name} is not free"
    return lock


def join(thread: threading.Thread) -> None:
    thread.join(PATIENCE)
    assert not thread.is_alive(), "the thread did not finish in time"


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


def test_closing_the_client_releases_its_locks_and_fails_its_waiters(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as other:
        blocker = other.lock(name + "/busy")
        client = lockstream.Client(server.address)
        held = client.lock(name)
        queued = threading.Event()
        failures: list[BaseException] = []

        def wait() -> None:
            try:
                client.lock(name + "/busy", on_queued=lambda _: queued.set())
            except BaseException as error:
                failures.append(error)

        waiter = start_thread(wait)
        assert queued.wait(PATIENCE)
        client.close()
        join(waiter)
        assert len(failures) == 1 and isinstance(failures[0], lockstream.ClientClosed)
        assert raw.holders(name) == [] and raw.describe(name + "/busy").waiters == []
        assert not held.held and not held.lost.is_set()
        with pytest.raises(lockstream.ClientClosed):
            client.lock(name)
        client.close()  # idempotent
        blocker.release()


def test_a_closed_client_fails_its_waiters_at_once_even_when_the_server_is_silent(
        server: Server, proxy: Proxy, name: str) -> None:
    with lockstream.Client(server.address) as other:
        blocker = other.lock(name)
        client = lockstream.Client(proxy.address, resume_grace=30)
        held = client.lock(name + "/held")
        queued = threading.Event()
        failed: list[tuple[BaseException, float]] = []

        def wait() -> None:
            try:
                client.lock(name, on_queued=lambda _: queued.set())
            except BaseException as error:
                failed.append((error, time.monotonic()))

        waiter = start_thread(wait)
        assert queued.wait(PATIENCE)
        assert proxy.freeze() == 1  # the server hears nothing more of the client, nor it of the server
        closed_at = time.monotonic()
        closing = start_thread(client.close)  # waits a while for the silent server's confirmation
        join(waiter)
        (error, failed_at), = failed
        assert isinstance(error, lockstream.ClientClosed) and error.lock == name
        assert failed_at - closed_at < 1.0, f"the waiter failed {failed_at - closed_at:.1f} s after close()"
        started = time.monotonic()
        with pytest.raises(lockstream.ClientClosed):
            client.lock(name + "/new")
        with pytest.raises(lockstream.ClientClosed):
            client.describe(name)
        assert time.monotonic() - started < 1.0
        join(closing)
        # A lock the closing released: releasing it again, or leaving its block, is quiet.
        assert not held.held and not held.lost.is_set()
        held.release()
        with held:
            pass
        blocker.release()


def test_calls_racing_close_end_with_client_closed(server: Server, name: str) -> None:
    # Calls keep arriving while the client closes and its loop stops: each one must end with
    # ClientClosed, none may wait forever for a loop that will never run it. The race is
    # narrow, so a few rounds with threads that call as fast as they can (a call that runs on
    # the loop only, no server round trip).
    for round_ in range(5):
        client = lockstream.Client(server.address)
        lock = client.lock(f"{name}/{round_}")
        outcomes: list[BaseException] = []
        guard = threading.Lock()
        calling = threading.Barrier(9)

        def call_until_closed() -> None:
            lock.on_in_doubt(lambda _: None)
            calling.wait(PATIENCE)  # every thread has made a call
            try:
                while True:
                    lock.on_in_doubt(lambda _: None)
            except BaseException as error:
                with guard:
                    outcomes.append(error)

        threads = [start_thread(call_until_closed) for _ in range(8)]
        calling.wait(PATIENCE)
        client.close()
        for thread in threads:
            join(thread)
        assert len(outcomes) == 8
        assert all(isinstance(outcome, lockstream.ClientClosed) for outcome in outcomes), outcomes


def test_an_unreachable_server_is_unavailable() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"  # nobody listens there
    with lockstream.Client(address, unavailable_retries=1) as client:
        with pytest.raises(lockstream.LockError) as failed:
            client.lock("anything", timeout=5)
        assert failed.value.code == grpc.StatusCode.UNAVAILABLE
        # Never a raw grpc error, whatever the call.
        with pytest.raises(lockstream.LockError) as described:
            client.describe("anything")
        assert described.value.code == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(lockstream.LockError) as checked:
            client.check_token("anything", 1)
        assert checked.value.code == grpc.StatusCode.UNAVAILABLE


def test_permission_denied(start_server: Callable[..., Server], tmp_path: Path) -> None:
    token = "python-client-test-token"
    policy = tmp_path / "access.yaml"
    policy.write_text(
        "callers:\n"
        "  - name: billing\n"
        f"    token_sha256: {hashlib.sha256(token.encode()).hexdigest()}\n"
        "    locks:\n"
        "      - { prefix: billing/, modes: [mutex, read, write] }\n"
    )
    guarded = start_server("--auth-file", str(policy))
    with lockstream.Client(guarded.address, token=token) as client:
        with client.lock("billing/invoice", mode="write", timeout=5) as lock:
            assert lock.token > 0
        with pytest.raises(lockstream.PermissionDenied) as denied:
            client.lock("reports/daily", timeout=5)
        assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED and "reports/daily" in str(denied.value)
        # The session goes on after a refused request.
        take(client, "billing/invoice").release()
    with lockstream.Client(guarded.address) as anonymous:
        with pytest.raises(lockstream.LockError) as unknown:
            anonymous.lock("billing/invoice", timeout=5)
        assert unknown.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_a_bad_request_fails_alone_before_it_is_sent(server: Server, raw: Raw, name: str) -> None:
    with lockstream.Client(server.address) as client:
        held = client.lock(name + "/held", mode="write")
        bad_calls: dict[str, Callable[[], object]] = {
            # Sent, these two would be over the server's message limit and end the whole session.
            "a 10 KB name": lambda: client.lock("n" * 10_240, timeout=1),
            "a 5 KB value": lambda: client.lock(name, value=b"v" * 5_000, timeout=1),
            # Sent, these would raise UnicodeEncodeError and TypeError from protobuf.
            "a lone surrogate": lambda: client.lock("half \ud800", timeout=1),
            "an int name": lambda: client.lock(42, timeout=1),  # type: ignore[arg-type]
            "a control character": lambda: client.lock("bell\x07", timeout=1),
            "an empty name": lambda: client.lock("", timeout=1),
            "a 513-byte name": lambda: client.lock("é" * 256 + "n", timeout=1),
            "an unknown mode": lambda: client.lock(name, mode="exclusive"),  # type: ignore[arg-type]
            "a negative timeout": lambda: client.lock(name, timeout=-1),
            "an infinite timeout": lambda: client.lock(name, timeout=float("inf")),
            "a weight without a limit": lambda: client.lock(name, weight=2),
            "a weight over the limit": lambda: client.lock(name, limit=2, weight=3),
            "an owner of 300 bytes": lambda: client.lock(name, owner="o" * 300),
            "a value that is no bytes": lambda: client.lock(name, value=5),  # type: ignore[arg-type]
            "a multi-lock of one": lambda: client.lock_all([name]),
            "a multi-lock of 17": lambda: client.lock_all([f"{name}/{index}" for index in range(17)]),
            "a multi-lock naming a lock twice": lambda: client.lock_all([name, name]),
            "a str for a multi-lock": lambda: client.lock_all("ab"),
            "describe of an int": lambda: client.describe(7),  # type: ignore[arg-type]
            "a negative token": lambda: client.check_token(name, -1),
            "a set_value of 1025 bytes": lambda: held.set_value(b"x" * 1025),
        }
        for what, call in bad_calls.items():
            with pytest.raises(lockstream.InvalidArgument) as refused:
                call()
            error = refused.value
            assert isinstance(error, lockstream.LockError) and isinstance(error, ValueError), what
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, what
            # One short line: a long name is shortened, control characters are escaped.
            assert len(str(error)) < 300 and str(error).isprintable(), (what, str(error))
        # Nothing reached the server: the session and its lock are untouched.
        assert held.held and not held.lost.is_set() and not held.in_doubt
        assert raw.holders(name + "/held") == [held.token]
        assert raw.describe(name).holders == [] and raw.describe(name).waiters == []
        with client.lock(name, timeout=1) as lock:
            assert raw.holders(name) == [lock.token]
        held.release()
    with pytest.raises(lockstream.InvalidArgument):
        lockstream.Client(server.address, resume_grace=-1)
    with pytest.raises(lockstream.InvalidArgument):
        lockstream.Client(server.address, heartbeat_interval=0.01)
    with pytest.raises(lockstream.InvalidArgument):
        lockstream.Client(server.address, token="two words")


def test_bad_client_options_are_refused_when_the_client_is_made(server: Server, name: str) -> None:
    # Each of these would fail every call later, with a UnicodeEncodeError, a TypeError or a
    # raw grpc error.
    bad_options: dict[str, dict[str, Any]] = {
        "a lone surrogate in the target": {"target": "\ud800:50051"},
        "a control character in the target": {"target": "127.0.0.1:50051\n"},
        "a target that is no str": {"target": 50051},
        "an empty target": {"target": ""},
        "a metadata key with capitals and a space": {"metadata": [("Bad Key", "x")]},
        "a metadata key gRPC reserves": {"metadata": [("grpc-timeout", "1S")]},
        "a line break in a metadata value": {"metadata": [("k", "a\nb")]},
        "an int metadata value": {"metadata": [("k", 5)]},
        "a str -bin value": {"metadata": [("k-bin", "x")]},
        "metadata that is a str": {"metadata": "ab"},
        "credentials that are no credentials": {"credentials": "tls"},
        "channel_options that are no pairs": {"channel_options": ["grpc.keepalive_time_ms"]},
        "a negative resume grace": {"resume_grace": -1},
        "a heartbeat too short for the server": {"heartbeat_interval": 0.01},
        "a token with a space": {"token": "two words"},
    }
    for what, options in bad_options.items():
        options = {"target": server.address, **options}
        with pytest.raises(lockstream.InvalidArgument) as refused:
            lockstream.Client(**options)
        assert str(refused.value).isprintable() and len(str(refused.value)) < 300, what
    # What gRPC accepts works.
    with lockstream.Client(server.address, metadata=[("x-request-source", "tests"), ("trace-bin", b"\x00\x01")],
                           channel_options=[("grpc.primary_user_agent", "lockstream-tests")]) as client:
        with client.lock(name, timeout=5) as lock:
            assert lock.held


def test_messages_name_the_lock_once_and_escape_control_characters(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as holder, lockstream.Client(server.address) as client:
        with holder.lock(name):
            with pytest.raises(lockstream.LockTimeout) as busy:
                client.lock(name, timeout=0)
        message = str(busy.value)
        assert message.startswith("DEADLINE_EXCEEDED: ") and message.count(name) == 1, message
        with pytest.raises(lockstream.InvalidArgument) as bad:
            client.lock("line\nbreak\x1b[31m", timeout=0)
        assert str(bad.value) == ('INVALID_ARGUMENT: lock "line\\nbreak\\x1b[31m": invalid lock name: '
                                  "name contains control character U+000A at index 4")
        assert bad.value.lock == "line\nbreak\x1b[31m"
        # The longest name there is, in the server's own message: shown once, shortened.
        longest = f"{name}/".ljust(512, "n")
        with holder.lock(longest):
            with pytest.raises(lockstream.LockTimeout) as long_busy:
                client.lock(longest, timeout=0)
        message = str(long_busy.value)
        assert long_busy.value.lock == longest and longest in long_busy.value.message
        assert longest[:100] in message and longest not in message and message.count("(512 characters)") == 1
        assert len(message) < 300, message


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


def test_every_call_on_a_closed_client_raises_client_closed_at_once(server: Server, name: str) -> None:
    client = lockstream.Client(server.address)
    held = client.lock(name + "/held", mode="write")
    client.close()
    calls: dict[str, Callable[[], object]] = {
        "lock": lambda: client.lock(name),
        "acquire": lambda: client.acquire(name),
        "try_lock": lambda: client.try_lock(name),
        "lock_all": lambda: client.lock_all([name + "/a", name + "/b"]),
        "describe": lambda: client.describe(name),
        "check_token": lambda: client.check_token(name, 1),
        "set_value": lambda: held.set_value(b"late"),
        "downgrade": lambda: held.downgrade(),
        "on_in_doubt": lambda: held.on_in_doubt(lambda _: None),
    }
    for what, call in calls.items():
        started = time.monotonic()
        with pytest.raises(lockstream.ClientClosed):
            call()
        assert time.monotonic() - started < 1.0, what
    held.release()  # released by the closing: quiet
    assert client.closed and client.done.is_set()
