"""The blocking client, against real lockstream servers: closing it, and calls racing or
following the close."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import lockstream
from conftest import PATIENCE, Calls, Proxy, Raw, Server, join, start_thread


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
