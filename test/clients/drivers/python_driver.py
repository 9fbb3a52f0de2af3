"""The Python client's driver for the client conformance suite (test/clients/README.md): reads
commands as JSON lines on stdin, performs them with the installed `lockstream` package (its
asyncio API), and writes what the client reports as JSON lines on stdout, each stamped with the
wall clock in milliseconds."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import grpc
import lockstream
import lockstream.aio

#: A lone surrogate, as `surrogateescape` decodes the byte 0xff: a str that is no Unicode text.
ILL_FORMED = "\udcff"

_KIND_OF_STATUS = {
    "INVALID_ARGUMENT": "invalid-argument",
    "DEADLINE_EXCEEDED": "timeout",
    "ABORTED": "lost",
    "UNAVAILABLE": "unavailable",
    "CANCELLED": "cancelled",
    "PERMISSION_DENIED": "permission-denied",
    "RESOURCE_EXHAUSTED": "resource-exhausted",
    "FAILED_PRECONDITION": "failed-precondition",
    "NOT_FOUND": "not-found",
}

# The client's own classes, most specific first.
_KIND_OF_CLASS: list[tuple[type[BaseException], str]] = [
    (lockstream.ClientClosed, "closed"),
    (lockstream.InvalidArgument, "invalid-argument"),
    (lockstream.LockTimeout, "timeout"),
    (lockstream.LockLost, "lost"),
    (lockstream.NotHeld, "not-held"),
    (lockstream.RevisionConflict, "conflict"),
    (lockstream.PermissionDenied, "permission-denied"),
]


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "at": int(time.time() * 1000), **fields}) + "\n")
    sys.stdout.flush()


def failure(error: BaseException) -> dict[str, Any]:
    """An exception in the common vocabulary: the client's classes first, then its gRPC code."""
    found: dict[str, Any] = {"class": type(error).__name__, "message": str(error)}
    if isinstance(error, asyncio.CancelledError):
        return {**found, "kind": "cancelled"}
    if not isinstance(error, lockstream.LockError):
        # Outside the client's hierarchy: a raw gRPC or Python exception escaped it.
        code = error.code().name if isinstance(error, grpc.RpcError) else None
        return {**found, "kind": "foreign", **({"code": code} if code else {})}
    found["code"] = error.code.name
    for kind_class, kind in _KIND_OF_CLASS:
        if isinstance(error, kind_class):
            return {**found, "kind": kind}
    return {**found, "kind": _KIND_OF_STATUS.get(error.code.name, "other")}


def say_failure(event: str, id: str, error: BaseException) -> None:
    say(event, id=id, **failure(error))


def observed(event: lockstream.aio.ElectionEvent) -> dict[str, Any]:
    """An election event as the protocol's `observed` says it."""
    if isinstance(event, lockstream.aio.Term):
        return {"what": "term", "term": str(event.term), "value": event.value.decode()}
    if isinstance(event, lockstream.aio.Proclaimed):
        return {"what": "proclaimed", "term": str(event.term), "value": event.value.decode()}
    if isinstance(event, lockstream.aio.Vacant):
        return {"what": "vacant", "term": str(event.after_term)}
    if isinstance(event, lockstream.aio.HistoryGone):
        return {"what": "history-gone", "term": str(event.first_term)}
    return {"what": "skipped", "term": str(event.first_term)}


class Driver:
    def __init__(self) -> None:
        self.client: lockstream.aio.Client | None = None
        self.locks: dict[str, lockstream.aio.Lock] = {}
        self.waits: dict[str, asyncio.Task[None]] = {}
        self.leaderships: dict[str, lockstream.aio.Leadership] = {}
        self.observers: dict[str, lockstream.aio.Observation] = {}

    @property
    def connected(self) -> lockstream.aio.Client:
        assert self.client is not None, "a command before connect"
        return self.client

    def held(self, id: str, lock: lockstream.aio.Lock) -> None:
        """Reports the grant, then follows the lock: doubt, confirmation, revocation, loss."""
        self.locks[id] = lock
        fields: dict[str, Any] = {"token": str(lock.token)}
        if lock.tokens:
            fields["tokens"] = [str(token) for token in lock.tokens.values()]
        say("acquired", id=id, **fields)
        lock.on_in_doubt(lambda doubt: say("in-doubt" if doubt else "confirmed", id=id))
        lock.on_revoke_requested(lambda request: say(
            "revoke-requested", id=id, reason=request.reason,
            forceAt=None if request.force_at is None else int(request.force_at.timestamp() * 1000)))
        lock.on_lost(lambda error: say_failure("lost", id, error))

    async def perform(self, command: dict[str, Any]) -> None:
        op, id = command["op"], command.get("id", "")
        if op == "connect":
            try:
                # `addresses`: several endpoints, to fail over between; `address`: one.
                endpoints = command["addresses"] if "addresses" in command else command["address"]
                # Client options, in the Python client's units (seconds).
                options: dict[str, Any] = {}
                if "heartbeatIntervalMs" in command:
                    options["heartbeat_interval"] = command["heartbeatIntervalMs"] / 1000
                if "resumeGraceMs" in command:
                    options["resume_grace"] = command["resumeGraceMs"] / 1000
                self.client = lockstream.aio.Client(endpoints, **options)
            except Exception as error:
                say_failure("error", "", error)
                return
            say("connected")
        elif op == "acquire":
            name = command["name"] + (ILL_FORMED if command.get("invalidUtf8") else "")
            options = {"mode": command.get("mode", "mutex")}
            for option in ("limit", "owner"):
                if option in command:
                    options[option] = command[option]
            if "timeoutMs" in command:
                options["timeout"] = command["timeoutMs"] / 1000
            if "value" in command:
                options["value"] = command["value"]
            # A task is how an asyncio caller gives up a wait: it is cancelled.
            task = asyncio.current_task()
            assert task is not None
            self.waits[id] = task
            try:
                lock = await self.connected.acquire(
                    name, on_queued=lambda ahead: say("queued", id=id, ahead=ahead), **options)
            except BaseException as error:
                say_failure("error", id, error)
                return
            finally:
                self.waits.pop(id, None)
            self.held(id, lock)
        elif op == "try-lock":
            try:
                maybe = await self.connected.try_lock(command["name"])
            except Exception as error:
                say_failure("error", id, error)
                return
            if maybe is None:
                say("not-acquired", id=id)
            else:
                self.held(id, maybe)
        elif op == "acquire-all":
            try:
                lock = await self.connected.acquire_all(command["names"])
            except Exception as error:
                say_failure("error", id, error)
                return
            self.held(id, lock)
        elif op == "cancel":
            wait = self.waits.get(id)
            if wait is not None:
                wait.cancel()
        elif op == "release":
            try:
                await self.locks[id].release()
            except Exception as error:
                say_failure("error", id, error)
                return
            say("released", id=id)
        elif op == "scope":
            await self.scope(id, command["name"])
        elif op in ("campaign", "resign", "proclaim", "leader", "proclaim-term", "resign-term", "observe",
                    "stop-observe"):
            await self.elections(op, id, command)
        elif op in ("put-record", "get-record", "delete-record", "update-record"):
            try:
                await self.records(op, id, command)
            except Exception as error:
                say_failure("error", id, error)
        elif op == "close":
            await self.connected.close()
            say("closed")
        else:
            raise ValueError(f"unknown command {op!r}")

    async def elections(self, op: str, id: str, command: dict[str, Any]) -> None:
        if op == "campaign":
            # A task is how an asyncio caller gives up a wait: it is cancelled.
            task = asyncio.current_task()
            assert task is not None
            self.waits[id] = task
            try:
                leadership = await self.connected.campaign(
                    command["name"], command["value"], on_queued=lambda ahead: say("queued", id=id, ahead=ahead))
            except BaseException as error:
                say_failure("error", id, error)
                return
            finally:
                self.waits.pop(id, None)
            self.leaderships[id] = leadership
            say("elected", id=id, term=str(leadership.term))
            leadership.on_in_doubt(lambda doubt: say("in-doubt" if doubt else "confirmed", id=id))
            leadership.on_lost(lambda error: say_failure("lost", id, error))
        elif op in ("resign", "proclaim"):
            leadership = self.leaderships[id]
            try:
                if op == "resign":
                    await leadership.resign()
                else:
                    await leadership.proclaim(command["value"])
            except Exception as error:
                say_failure("error", id, error)
                return
            say("resigned" if op == "resign" else "proclaimed", id=id)
        elif op == "leader":
            try:
                leader = await self.connected.leader(command["name"])
            except Exception as error:
                say_failure("error", id, error)
                return
            if leader is None:
                say("no-leader", id=id)
            else:
                say("leader", id=id, term=str(leader.term), value=leader.value.decode())
        elif op in ("proclaim-term", "resign-term"):
            try:
                if op == "proclaim-term":
                    await self.connected.proclaim(command["name"], int(command["term"]), command["value"])
                else:
                    await self.connected.resign(command["name"], int(command["term"]))
            except Exception as error:
                say_failure("error", id, error)
                return
            say("proclaimed" if op == "proclaim-term" else "resigned", id=id)
        elif op == "observe":
            from_term = int(command["fromTerm"]) if "fromTerm" in command else None
            try:
                # Closing the observation (aclose) ends the loop cleanly.
                observation = self.connected.observe(command["name"], from_term=from_term)
                self.observers[id] = observation
                async for event in observation:
                    say("observed", id=id, **observed(event))
            except Exception as error:
                say("observe-ended", id=id, error=failure(error))
                return
            finally:
                self.observers.pop(id, None)
            say("observe-ended", id=id, error=None)
        elif op == "stop-observe":
            observer = self.observers.get(id)
            if observer is not None:
                await observer.aclose()

    async def records(self, op: str, id: str, command: dict[str, Any]) -> None:
        """Guarded records: read by anyone, written as the holder of the command's token."""
        if op == "get-record":
            record = await self.connected.get_record(command["name"], command["key"])
            say("record", id=id, found=record is not None, value="" if record is None else record.value.decode(),
                revision="0" if record is None else str(record.revision))
            return
        records = self.connected.records(command["name"], int(command["token"]))
        expected = int(command["expectedRevision"]) if "expectedRevision" in command else None
        if op == "put-record":
            revision = await records.put(command["key"], command["value"], expected_revision=expected)
            say("record-written", id=id, revision=str(revision), value=command["value"])
        elif op == "delete-record":
            say("record-deleted", id=id, deleted=await records.delete(command["key"], expected_revision=expected))
        else:
            # The value read as a decimal number (none, or empty: 0), plus `add`.
            add = int(command["add"])
            written = await records.update(
                command["key"], lambda current: str(int((current or b"").decode() or "0") + add))
            say("record-written", id=id, revision=str(written.revision), value=written.value.decode())

    async def scope(self, id: str, name: str) -> None:
        """`async with client.lock(...)`: the body waits for the loss, then leaves normally."""
        try:
            async with self.connected.lock(name) as lock:
                self.held(id, lock)
                await lock.lost.wait()
        except Exception as error:
            say("scope-exited", id=id, error=failure(error))
            return
        say("scope-exited", id=id, error=None)


async def main() -> None:
    driver = Driver()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()
    say("ready", client="python")
    while line := await reader.readline():
        if not line.strip():
            continue
        command = json.loads(line)
        if command["op"] == "connect":
            await driver.perform(command)
            continue
        # The rest run side by side: a wait must not hold up the cancel or close that ends it.
        task = asyncio.create_task(driver.perform(command))
        running.add(task)
        task.add_done_callback(running.discard)
    # End of input: the suite is done with this driver.
    if driver.client is not None:
        await driver.client.close()


if __name__ == "__main__":
    asyncio.run(main())
