"""Guarded records on the asyncio client: against a real lockstream server (written by a holder,
refused for a stale token or another revision, read-modify-write without a lost update, checked
before sending), and against fake RecordServices that answer what a test tells them (the request id
of a put tried again, and a write whose outcome is unknown)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator

import grpc
import pytest

import lockstream
from conftest import PATIENCE, Server, unused_addresses
from lockstream.v1 import records_pb2 as rpb
from lockstream.v1 import records_pb2_grpc as rpb_grpc


async def test_a_holder_puts_gets_updates_and_deletes_its_records(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client, lockstream.aio.Client(server.address) as other:
        async with client.lock(name) as lock:
            records = client.records(name, lock.token)
            assert (records.name, records.token) == (name, lock.token)
            assert await records.get("offset") is None
            assert await records.put("offset", "5") == 1
            assert await records.get("offset") == lockstream.Record(value=b"5", revision=1)
            written = await records.update("offset", lambda value: str(int(value or b"0") + 3))
            assert written == lockstream.Record(value=b"8", revision=2)
            # Anyone reads it, holder or not.
            assert await other.get_record(name, "offset") == written
            assert await records.update("fresh", lambda value: b"new" if value is None else b"old") == \
                lockstream.Record(b"new", 3)
            assert await records.delete("offset") is True
            assert await records.delete("offset") is False
            assert await other.get_record(name, "offset") is None
            # A key's revisions grow across its deletion.
            assert await records.put("offset", b"\x00\xff") > 3
        # Records outlive their writer's hold.
        kept = await other.get_record(name, "offset")
        assert kept is not None and kept.value == b"\x00\xff"


async def test_a_stale_token_is_refused_with_not_held_and_nothing_is_written(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client, lockstream.aio.Client(server.address) as other:
        lock = await client.acquire(name)
        stale = client.records(name, lock.token)
        assert await stale.put("checkpoint", "1") == 1
        await lock.release()
        async with other.lock(name, timeout=PATIENCE) as next_lock:
            writes = {
                "put": stale.put("checkpoint", "late"),
                "put at the revision": stale.put("checkpoint", "late", expected_revision=1),
                "update": stale.update("checkpoint", lambda value: b"late"),
                "delete": stale.delete("checkpoint"),
            }
            for what, write in writes.items():
                with pytest.raises(lockstream.NotHeld) as refused:
                    await write
                assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION, what
                assert refused.value.lock == name, what
            assert await other.get_record(name, "checkpoint") == lockstream.Record(b"1", 1)
            # The new holder writes on from the revision it reads.
            assert await other.records(name, next_lock.token).put("checkpoint", "2", expected_revision=1) == 2
        # A token of another lock is no holder's token for this one.
        async with client.lock(name + "/other") as elsewhere:
            with pytest.raises(lockstream.NotHeld):
                await client.records(name, elsewhere.token).put("checkpoint", "x")


async def test_a_write_at_another_revision_raises_revision_conflict(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client, client.lock(name) as lock:
        records = client.records(name, lock.token)
        assert await records.put("k", "a", expected_revision=0) == 1  # 0: only a new record
        conflicts = {
            "put at an old revision": records.put("k", "b", expected_revision=7),
            "put of a new record that exists": records.put("k", "b", expected_revision=0),
            "delete at another revision": records.delete("k", expected_revision=2),
            "delete of a missing record at a revision": records.delete("missing", expected_revision=1),
        }
        for what, write in conflicts.items():
            with pytest.raises(lockstream.RevisionConflict) as refused:
                await write
            error = refused.value
            assert isinstance(error, lockstream.LockError) and error.code == grpc.StatusCode.ABORTED, what
            assert not isinstance(error, lockstream.LockLost), what
        assert await records.get("k") == lockstream.Record(b"a", 1)
        assert await records.put("k", "b", expected_revision=1) == 2
        assert await records.delete("k", expected_revision=2) is True


async def test_update_loses_no_update_among_the_holders_of_a_semaphore(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        first = await client.acquire(name, limit=2)
        second = await client.acquire(name, limit=2)
        changes = 0

        def add_one(value: bytes | None) -> str:
            nonlocal changes
            changes += 1
            return str(int(value or b"0") + 1)

        async def count(records: lockstream.aio.HolderRecords) -> None:
            for _ in range(10):
                await records.update("count", add_one)

        await asyncio.wait_for(asyncio.gather(count(client.records(name, first.token)),
                                              count(client.records(name, second.token))), PATIENCE)
        record = await client.get_record(name, "count")
        assert record is not None and record.value == b"20"
        assert changes >= 20  # more when the two crossed: each conflict was read and changed again
        await first.release()
        await second.release()


async def test_bad_keys_values_and_revisions_are_refused_before_anything_is_sent(server: Server, name: str) -> None:
    # Nobody listens at the address: a request that was sent would fail with UNAVAILABLE.
    async with lockstream.aio.Client(unused_addresses(1)[0]) as client:
        records = client.records(name, 5)
        bad = {
            "an empty key": records.get(""),
            "a key of 257 bytes": records.put("k" * 257, "v"),
            "a key of 129 two-byte characters": records.delete("é" * 129),
            "a key with a control character": records.put("a\nb", "v"),
            "a key with a lone surrogate": records.get("\udcff"),
            "a key that is no str": records.get(5),  # type: ignore[arg-type]
            "a value of 65537 bytes": records.put("k", b"v" * 65537),
            "a value that is no bytes": records.put("k", 5),  # type: ignore[arg-type]
            "a value of a lone surrogate": records.put("k", "\udcff"),
            "a negative expected revision": records.put("k", "v", expected_revision=-1),
            "an expected revision past uint64": records.delete("k", expected_revision=2**64),
            "get_record of an empty name": client.get_record("", "k"),
            "get_record of an empty key": client.get_record(name, ""),
        }
        for what, call in bad.items():
            with pytest.raises(lockstream.InvalidArgument) as refused:
                await call
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT, what
            assert str(refused.value).isprintable() and len(str(refused.value)) < 300, (what, str(refused.value))
        # The holder's name and token are checked as the records are made.
        for name_, token in (("", 1), (name, -1), (name, 2**64), (name, "1")):
            with pytest.raises(lockstream.InvalidArgument):
                client.records(name_, token)  # type: ignore[arg-type]
        # What passes the checks is sent.
        with pytest.raises(lockstream.LockError) as unsent:
            await records.get("k" * 256)
        assert unsent.value.code == grpc.StatusCode.UNAVAILABLE
    # At the limits, the server takes them.
    async with lockstream.aio.Client(server.address) as client, client.lock(name) as lock:
        records = client.records(name, lock.token)
        assert await records.put("k" * 256, b"v" * 65536) == 1
        record = await records.get("k" * 256)
        assert record is not None and len(record.value) == 65536
        # What update's change makes is checked as what put is given: nothing is written.
        with pytest.raises(lockstream.InvalidArgument):
            await records.update("k", lambda _: b"v" * 65537)
        assert await records.get("k") is None


async def test_records_fail_over_to_the_next_endpoint(server: Server, name: str) -> None:
    async with lockstream.aio.Client([*unused_addresses(1), server.address]) as client:
        async with client.lock(name) as lock:
            records = client.records(name, lock.token)
            assert await records.put("k", "v") == 1
            assert await client.get_record(name, "k") == lockstream.Record(b"v", 1)


class FakeRecords:
    """A RecordService that answers each PutRecord with the next of `answers` (a status code to
    refuse it with, or a revision) and keeps the requests it was sent."""

    def __init__(self) -> None:
        self.answers: list[grpc.StatusCode | int] = []
        self.puts: list[rpb.PutRecordRequest] = []
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        fake = self

        class Servicer(rpb_grpc.RecordServiceServicer):
            def PutRecord(self, request: rpb.PutRecordRequest,
                          context: grpc.ServicerContext) -> rpb.PutRecordResponse:
                fake.puts.append(request)
                answer = fake.answers.pop(0)
                if isinstance(answer, grpc.StatusCode):
                    context.abort(answer, f"told to answer {answer.name}")
                return rpb.PutRecordResponse(revision=answer)

        rpb_grpc.add_RecordServiceServicer_to_server(Servicer(), self.server)  # type: ignore[no-untyped-call]
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(grace=None).wait(PATIENCE)


@pytest.fixture
def fakes() -> Iterator[tuple[FakeRecords, FakeRecords]]:
    started = (FakeRecords(), FakeRecords())
    yield started
    for fake in started:
        fake.close()


async def test_a_put_tried_again_after_unavailable_carries_the_same_request_id(
        fakes: tuple[FakeRecords, FakeRecords], name: str) -> None:
    first, second = fakes
    async with lockstream.aio.Client([first.address, second.address]) as client:
        records = client.records(name, 9)
        first.answers, second.answers = [grpc.StatusCode.UNAVAILABLE], [41]
        assert await records.put("k", "v", expected_revision=3) == 41
        [tried], [again] = first.puts, second.puts
        assert len(tried.request_id) == 16 and again == tried
        assert (again.name, again.key, again.value, again.fencing_token) == (name, "k", b"v", 9)
        assert again.HasField("expected_revision") and again.expected_revision == 3
        # Every put has an id of its own; a put without a condition sends none.
        first.answers = [42]
        assert await records.put("k", "w") == 42
        assert first.puts[-1].request_id != tried.request_id and not first.puts[-1].HasField("expected_revision")


@pytest.mark.parametrize("refusal", [grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED])
async def test_a_write_refused_after_a_try_that_ended_unavailable_has_an_unknown_outcome(
        fakes: tuple[FakeRecords, FakeRecords], name: str, refusal: grpc.StatusCode) -> None:
    first, second = fakes
    async with lockstream.aio.Client([first.address, second.address]) as client:
        records = client.records(name, 9)
        # The first try may have been made: the refusal of the next may be its own doing.
        first.answers, second.answers = [grpc.StatusCode.UNAVAILABLE], [refusal]
        with pytest.raises(lockstream.LockError) as unknown:
            await records.put("k", "v", expected_revision=3)
        assert type(unknown.value) is lockstream.LockError
        assert unknown.value.code == grpc.StatusCode.UNAVAILABLE and "outcome is unknown" in unknown.value.message
        assert refusal.name in unknown.value.message
        # Without an UNAVAILABLE first, the refusal is the answer.
        first.answers = [refusal]
        expected = lockstream.NotHeld if refusal == grpc.StatusCode.FAILED_PRECONDITION else lockstream.RevisionConflict
        with pytest.raises(expected):
            await records.put("k", "v", expected_revision=3)
        # UNAVAILABLE everywhere is UNAVAILABLE.
        first.answers, second.answers = [grpc.StatusCode.UNAVAILABLE], [grpc.StatusCode.UNAVAILABLE]
        with pytest.raises(lockstream.LockError) as unavailable:
            await records.put("k", "v")
        assert unavailable.value.code == grpc.StatusCode.UNAVAILABLE
        assert "outcome is unknown" not in unavailable.value.message


async def test_records_ride_the_client_channel(server: Server, name: str) -> None:
    async with lockstream.aio.Client(server.address) as client:
        channel = client.channel
        async with client.lock(name) as lock:
            await client.records(name, lock.token).put("k", "v")
        assert client.channel is channel
        # The gRPC channel the client made is the only one: the records went over it.
        assert list(client._connections._channels.values()) == [channel]
