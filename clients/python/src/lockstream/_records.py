"""Guarded records on the asyncio client: the unary calls of lockstream.v1.RecordService (GetRecord,
PutRecord, DeleteRecord) on the client's connections, the records a lock's holder writes
(HolderRecords, bound to a name and a fencing token), and their refusals in the client's terms: a
token that is not a current holder's is NotHeld, a revision other than the one expected is
RevisionConflict, and a write whose outcome cannot be known is LockError UNAVAILABLE."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from lockstream import _checks
from lockstream._channels import RECORDS, Connections, Refusal
from lockstream.errors import LockError, NotHeld, RevisionConflict, error_for
from lockstream.v1 import records_pb2 as rpb

#: How many random bytes the id of a put has (PutRecordRequest.request_id).
_REQUEST_ID_BYTES = 16


@dataclass(frozen=True)
class Record:
    """A guarded record as read or written: its value and its revision. Revisions start at 1 and
    only grow: every write or delete of any record of a lock takes the lock's next one."""

    value: bytes
    revision: int


#: What `update` makes of a record's value (None: there is no record): the value to write, bytes
#: or a str (written as UTF-8).
Change = Callable[[bytes | None], bytes | str]


async def get_record(connections: Connections, name: str, key: str) -> Record | None:
    """The record `key` of lock `name` (GetRecord), or None when there is none."""
    name = _checks.check_name(name)
    key = _checks.check_record_key(name, key)
    response: rpb.GetRecordResponse = await connections.unary(
        "GetRecord", name, rpb.GetRecordRequest(name=name, key=key), rpb.GetRecordResponse, RECORDS)
    return Record(response.value, response.revision) if response.found else None


async def put_record(connections: Connections, name: str, key: str, value: object, token: int,
              expected_revision: int | None) -> int:
    """Writes `value` under `key` as the holder of `token` (PutRecord): the record's new revision.
    Each call has a random request id of its own, sent with every try: a try made again after
    UNAVAILABLE is made at most once."""
    name = _checks.check_name(name)
    request = rpb.PutRecordRequest(
        name=name, key=_checks.check_record_key(name, key), value=_checks.check_record_value(name, value),
        fencing_token=_checks.check_token(name, token), request_id=secrets.token_bytes(_REQUEST_ID_BYTES))
    if expected_revision is not None:
        request.expected_revision = _checks.check_token(name, expected_revision, "expected_revision")
    response: rpb.PutRecordResponse = await connections.unary(
        "PutRecord", name, request, rpb.PutRecordResponse, RECORDS, _write_refused(name))
    return response.revision


async def delete_record(connections: Connections, name: str, key: str, token: int,
                 expected_revision: int | None) -> bool:
    """Deletes the record `key` as the holder of `token` (DeleteRecord): whether there was one."""
    name = _checks.check_name(name)
    request = rpb.DeleteRecordRequest(
        name=name, key=_checks.check_record_key(name, key), fencing_token=_checks.check_token(name, token))
    if expected_revision is not None:
        request.expected_revision = _checks.check_token(name, expected_revision, "expected_revision")
    response: rpb.DeleteRecordResponse = await connections.unary(
        "DeleteRecord", name, request, rpb.DeleteRecordResponse, RECORDS, _write_refused(name))
    return response.deleted


def _write_refused(name: str) -> Refusal:
    """The error for a write's refusal. After a try that ended UNAVAILABLE, the write may have
    been made by that try: a refusal of the next is then no answer (its own write may be what
    changed the revision), and the error is UNAVAILABLE, outcome unknown."""

    def refused(code: grpc.StatusCode, details: str, unavailable_before: bool) -> LockError:
        if unavailable_before and code != grpc.StatusCode.UNAVAILABLE:
            return LockError(name, grpc.StatusCode.UNAVAILABLE,
                             "the write's outcome is unknown: a try ended UNAVAILABLE, and the next was "
                             f"refused ({code.name}: {details})")
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            return NotHeld(name, details)
        if code == grpc.StatusCode.ABORTED:
            return RevisionConflict(name, details)
        return error_for(name, code, details)

    return refused


class HolderRecords:
    """The guarded records of lock `name`, as the holder whose fencing token is `token` writes them
    (an election's leader: its term): what `client.records(name, token)` returns. Every write
    commits only while that token holds the lock, checked by the server in the same step: once the
    hold is over, each is refused with NotHeld, whether or not this client has heard of it yet.
    Anyone may read them."""

    def __init__(self, connections: Connections, name: str, token: int) -> None:
        #: The lock's name.
        self.name: str = _checks.check_name(name)
        #: The fencing token the writes are made as.
        self.token: int = _checks.check_token(self.name, token)
        self._connections = connections

    def __repr__(self) -> str:
        return f"lockstream.aio.HolderRecords(name={self.name!r}, token={self.token})"

    async def get(self, key: str) -> Record | None:
        """The record `key`, or None when there is none."""
        return await get_record(self._connections, self.name, key)

    async def put(self, key: str, value: bytes | str, *, expected_revision: int | None = None) -> int:
        """Writes `value` (a str as UTF-8) under `key` while this token holds the lock, and returns
        the record's new revision. With `expected_revision`, only if the record is at that revision
        (0: only if there is none), else RevisionConflict. NotHeld when the token does not hold
        the lock; either way nothing is written."""
        return await put_record(self._connections, self.name, key, value, self.token, expected_revision)

    async def delete(self, key: str, *, expected_revision: int | None = None) -> bool:
        """Deletes the record `key`, with the same checks as `put`: whether there was one (no
        record is no error, unless `expected_revision` is set and not 0)."""
        return await delete_record(self._connections, self.name, key, self.token, expected_revision)

    async def update(self, key: str, change: Change) -> Record:
        """Reads the record `key`, writes what `change(value)` makes of its value (None: there is
        none) at the revision read, and returns the record as written: a read-modify-write that
        loses no update. A write by anyone in between (another holder of a semaphore, say) makes it
        read and change again; NotHeld, and nothing written, once this token does not hold the
        lock."""
        while True:
            current = await self.get(key)
            value = _checks.check_record_value(self.name, change(None if current is None else current.value))
            try:
                revision = await self.put(key, value, expected_revision=0 if current is None else current.revision)
            except RevisionConflict:
                continue
            return Record(value, revision)
