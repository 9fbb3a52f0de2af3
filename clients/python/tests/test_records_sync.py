"""Guarded records on the blocking client, against a real lockstream server: written by a holder
(a lock's or an election leader's), refused for a stale token or another revision, `update`'s
change made in the caller's thread and read again after a write in between, checked before
sending."""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
import pytest

import lockstream
from conftest import Server, unused_addresses


def test_a_holder_puts_gets_updates_and_deletes_its_records(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as other:
        with client.lock(name) as lock:
            records = client.records(lock.name, lock.token)
            assert repr(records) == f"lockstream.HolderRecords(name={name!r}, token={lock.token})"
            assert records.get("offset") is None
            assert records.put("offset", b"5") == 1
            assert records.update("offset", lambda value: str(int(value or b"0") + 3)) == lockstream.Record(b"8", 2)
            assert other.get_record(name, "offset") == lockstream.Record(b"8", 2)
            with pytest.raises(lockstream.InvalidArgument):  # a change that makes no bytes writes nothing
                records.update("offset", lambda _: 5)  # type: ignore[arg-type,return-value]
            assert records.delete("offset", expected_revision=2) is True
            assert records.delete("offset") is False
            assert client.get_record(name, "offset") is None


def test_a_stale_token_is_refused_with_not_held_and_nothing_is_written(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, lockstream.Client(server.address) as other:
        lock = client.lock(name)
        stale = client.records(name, lock.token)
        assert stale.put("checkpoint", "1") == 1
        lock.release()
        with other.lock(name) as next_lock:
            writes: dict[str, Callable[[], object]] = {
                "put": lambda: stale.put("checkpoint", "late"),
                "update": lambda: stale.update("checkpoint", lambda value: b"late"),
                "delete": lambda: stale.delete("checkpoint"),
            }
            for what, write in writes.items():
                with pytest.raises(lockstream.NotHeld) as refused:
                    write()
                assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION, what
            assert other.get_record(name, "checkpoint") == lockstream.Record(b"1", 1)
            assert other.records(name, next_lock.token).put("checkpoint", "2", expected_revision=1) == 2


def test_a_write_at_another_revision_raises_revision_conflict(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, client.lock(name) as lock:
        records = client.records(name, lock.token)
        assert records.put("k", "a") == 1
        with pytest.raises(lockstream.RevisionConflict) as refused:
            records.put("k", "b", expected_revision=0)
        assert refused.value.code == grpc.StatusCode.ABORTED and refused.value.lock == name
        with pytest.raises(lockstream.RevisionConflict):
            records.delete("k", expected_revision=5)
        assert records.get("k") == lockstream.Record(b"a", 1)


def test_update_changes_in_the_callers_thread_and_reads_again_after_a_write_in_between(
        server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client, client.lock(name) as lock:
        records = client.records(name, lock.token)
        seen: list[tuple[bytes | None, threading.Thread]] = []

        def change(value: bytes | None) -> bytes:
            seen.append((value, threading.current_thread()))
            if len(seen) == 1:
                records.put("k", b"in between")  # the client may be used here
            return (value or b"") + b"+"

        assert records.update("k", change) == lockstream.Record(b"in between+", 2)
        assert seen == [(None, threading.current_thread()), (b"in between", threading.current_thread())]


def test_a_leader_writes_records_with_its_term(server: Server, name: str) -> None:
    with lockstream.Client(server.address) as client:
        with client.campaign(name, "me") as leadership:
            assert client.records(name, leadership.term).put("config", "v1") == 1
        with client.campaign(name, "next") as successor:
            with pytest.raises(lockstream.NotHeld):
                client.records(name, leadership.term).put("config", "stale")
            assert client.records(name, successor.term).update("config", lambda v: (v or b"") + b"+").value == b"v1+"


def test_bad_keys_and_values_are_refused_before_anything_is_sent(name: str) -> None:
    # Nobody listens at the address: a request that was sent would fail with UNAVAILABLE.
    with lockstream.Client(unused_addresses(1)[0]) as client:
        records = client.records(name, 1)
        bad: dict[str, Callable[[], object]] = {
            "an empty key": lambda: records.get(""),
            "a key of 257 bytes": lambda: records.put("k" * 257, "v"),
            "a key with a control character": lambda: records.delete("\x1b[31m"),
            "a value of 65537 bytes": lambda: records.put("k", "v" * 65537),
            "a negative expected revision": lambda: records.put("k", "v", expected_revision=-1),
            "get_record of a key that is no str": lambda: client.get_record(name, None),  # type: ignore[arg-type]
        }
        for what, call in bad.items():
            with pytest.raises(lockstream.InvalidArgument) as refused:
                call()
            assert isinstance(refused.value, ValueError), what
            assert str(refused.value).isprintable(), what
        with pytest.raises(lockstream.InvalidArgument):
            client.records("", 1)
        with pytest.raises(lockstream.LockError) as unsent:
            records.get("k")
        assert unsent.value.code == grpc.StatusCode.UNAVAILABLE
