"""The blocking client's guarded records: a holder's records (the asyncio HolderRecords) written
from any thread through the blocking client's event loop (a _sync_held.Runner), with `update`'s
change made in the caller's thread."""

from __future__ import annotations

from lockstream import _checks
from lockstream._records import Change, HolderRecords as AioHolderRecords, Record
from lockstream._sync_held import Runner
from lockstream.errors import RevisionConflict


class HolderRecords:
    """The guarded records of lock `name`, as the holder whose fencing token is `token` writes them
    (an election's leader: its term): what `client.records(name, token)` returns. Every write
    commits only while that token holds the lock, checked by the server in the same step: once the
    hold is over, each is refused with NotHeld, whether or not this client has heard of it yet.
    Anyone may read them. Its methods may be called from any thread."""

    def __init__(self, client: Runner, records: AioHolderRecords) -> None:
        self._client = client
        self._records = records
        #: The lock's name.
        self.name: str = records.name
        #: The fencing token the writes are made as.
        self.token: int = records.token

    def __repr__(self) -> str:
        return repr(self._records).replace("lockstream.aio.HolderRecords", "lockstream.HolderRecords")

    def get(self, key: str) -> Record | None:
        """The record `key`, or None when there is none."""
        return self._client._run(lambda: self._records.get(key))

    def put(self, key: str, value: bytes | str, *, expected_revision: int | None = None) -> int:
        """Writes `value` (a str as UTF-8) under `key` while this token holds the lock, and returns
        the record's new revision. With `expected_revision`, only if the record is at that revision
        (0: only if there is none), else RevisionConflict. NotHeld when the token does not hold
        the lock; either way nothing is written."""
        return self._client._run(lambda: self._records.put(key, value, expected_revision=expected_revision))

    def delete(self, key: str, *, expected_revision: int | None = None) -> bool:
        """Deletes the record `key`, with the same checks as `put`: whether there was one (no
        record is no error, unless `expected_revision` is set and not 0)."""
        return self._client._run(lambda: self._records.delete(key, expected_revision=expected_revision))

    def update(self, key: str, change: Change) -> Record:
        """Reads the record `key`, writes what `change(value)` makes of its value (None: there is
        none) at the revision read, and returns the record as written: a read-modify-write that
        loses no update. A write by anyone in between makes it read and change again; NotHeld, and
        nothing written, once this token does not hold the lock. `change` runs in the caller's
        thread, and may use the client."""
        while True:
            current = self.get(key)
            value = _checks.check_record_value(self.name, change(None if current is None else current.value))
            try:
                revision = self.put(key, value, expected_revision=0 if current is None else current.revision)
            except RevisionConflict:
                continue
            return Record(value, revision)
