"""The asyncio client's public API: Client, the Lock and Leadership it returns, an election's
events, guarded records, and their options.

    async with lockstream.aio.Client("127.0.0.1:50051", owner="billing") as client:
        async with client.lock("billing/invoice-42", mode="write", timeout=5) as lock:
            await charge(fencing_token=lock.token)
        async with client.campaign("billing/leader", b"10.0.0.7:8080") as leadership:
            await lead(fencing_token=leadership.term)

All locks of a Client are requests on one Session stream (lockstream.v1.LockService/Session),
opened on the first acquire. The stream carries heartbeats in both directions; when it breaks,
the client takes the session over on a new stream with its resume token, within the resume
grace (on the next endpoint, for a client given several), and the locks stay held with the same
tokens (`lock.in_doubt` is true meanwhile). When that fails, or when the server ends a held lock,
the lock is lost: `lock.lost` is set and the callbacks given to `lock.on_lost` are called.

Each campaign is a Campaign stream of its own (lockstream.v1.ElectionService/Campaign), with the
same heartbeats, resume and loss as a lock's; `observe` is an Observe call of its own. Guarded
records (lockstream.v1.RecordService) are unary calls on the same channels.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from lockstream import _checks
from lockstream._callbacks import call_safely as _call_safely
from lockstream._channels import Connections as _Connections
from lockstream._checks import RECORD_KEY_MAX_BYTES, RECORD_VALUE_MAX_BYTES, VALUE_MAX_BYTES, Mode
from lockstream._description import LockDescription, LockRequestInfo, description
from lockstream._election import ElectionEvent, HistoryGone, Proclaimed, Skipped, Term, Vacant
from lockstream._elections import Elections as _Elections
from lockstream._held import Holding as _Holding
from lockstream._held import RevokeRequest
from lockstream._leadership import Leadership
from lockstream._lock import Lock
from lockstream._observe import Observation
from lockstream._grant import retrying as _retrying
from lockstream._records import Change, HolderRecords, Record
from lockstream._records import get_record as _get_record
from lockstream._session import Session as _Session
from lockstream._stream import SessionCall
from lockstream._wire import MODES as _MODES
from lockstream.errors import (
    ClientClosed,
    InvalidArgument,
    LockError,
    LockLost,
    LockTimeout,
    NotHeld,
    RevisionConflict,
)
from lockstream.v1 import lockstream_pb2 as pb

# What the Client stands on, one job a module: _session (a session's life from open to end), _stream
# (one Session call), _heartbeat, _requests (the request table and what the server says of each
# request), _resume (resume and failover across endpoints), _stream_session (what a session and a
# campaign share), _channels (endpoints, channels and unary calls), _grant (waiting for a grant, and
# asking again while the server is unavailable), _lock (a held lock), _held (what a held lock and a
# leadership share); for elections, _elections (campaigns, observations and calls of a client),
# _campaign (one candidate's stream), _leadership (a won election), _observe, _election_calls and
# _election (events); _records (guarded records). The errors above, SessionCall and logger are
# importable from here as well.

logger = logging.getLogger("lockstream")

#: Metadata for every call: (key, value) pairs; bytes values for keys that end in "-bin".
Metadata = Sequence[tuple[str, str | bytes]]


@dataclass(frozen=True)
class Target:
    """One lock of a multi-lock (`acquire_all`): its name and mode; for a semaphore its limit and
    this request's weight (None: 1)."""

    name: str
    mode: Mode = "mutex"
    limit: int = 0
    weight: int | None = None

    def _message(self) -> pb.LockTarget:
        name = _checks.check_name(self.name)
        mode = _checks.check_mode(name, "semaphore" if self.limit else self.mode)
        limit, weight = _checks.check_semaphore(name, mode, self.limit, self.weight)
        target = pb.LockTarget(name=name, mode=_MODES[mode], limit=limit)
        if weight is not None:
            target.weight = weight
        return target


class _Options:
    def __init__(self, owner: str, resume_grace: float, heartbeat_interval: float,
                 metadata: tuple[tuple[str, str | bytes], ...], unavailable_retries: int) -> None:
        self.owner = owner
        self.resume_grace = resume_grace
        self.heartbeat_interval = heartbeat_interval
        self.metadata = metadata
        self.unavailable_retries = unavailable_retries


class Client:
    """Takes locks on a lockstream server, on asyncio. Close it when done (`async with`).

    `target`: "host:port", or any gRPC target ("dns:///locks.internal:50051": gRPC resolves
    it to every address of the name and connects to another on the same channel when a
    connection is lost, so a name with several addresses is one endpoint); or a list of
    them, the client's endpoints: requests go to one at a time, the first to begin with. When
    the session's stream breaks (a lost connection, UNAVAILABLE, three silent heartbeat
    intervals), the client resumes the session on the next endpoint, and so on round the list
    until one takes the resume or the grace is over; each attempt that hears nothing is cut
    after a third of what is left of the grace, at most 1 s, so that a frozen endpoint does not
    eat the grace. Held locks are in doubt meanwhile, lost when the grace runs out or a server
    answers that it does not have the session (NOT_FOUND); acquires made meanwhile wait for the
    session. A session that cannot be opened on an endpoint (refused) is opened on the next.
    `owner`: who is asking, shown to operators (each acquire may say otherwise).
    `resume_grace` (seconds, default 5): how long the server keeps this client's locks after its
    stream breaks, for the client to take them over on a new one; also the lock-delay after this
    process dies. Capped by the server's --max-resume-grace. 0: a broken stream loses every lock.
    The client counts it from the last message it heard from the server, less a tenth (at most
    0.5 s): its locks are lost before the server, which counts from when it noticed the break,
    can free them.
    `heartbeat_interval` (seconds, default 1; 0: none): heartbeats both ways; three intervals
    without a word from the server count as a broken stream, and its locks are in doubt from
    then on. Keep three intervals shorter than the grace less its margin (the defaults: 3 s and
    4.5 s), so that a silent path is noticed by itself, whatever gRPC keepalive does.
    `credentials`: TLS (grpc.ssl_channel_credentials(...)); plaintext without.
    `token`: a bearer token for the server's access policy (`authorization: Bearer <token>`).
    `metadata`: more metadata for every call.
    `unavailable_retries` (default 2): how many times an acquire tries again when the server
    answers UNAVAILABLE before a grant (never after one: a lost lock is reported, not retaken).
    `channel_options`: more grpc channel arguments; they override the client's.
    """

    def __init__(self, target: str | Sequence[str], *, owner: str = "", resume_grace: float = 5.0,
                 heartbeat_interval: float = 1.0, credentials: grpc.ChannelCredentials | None = None,
                 token: str | None = None, metadata: Metadata = (), unavailable_retries: int = 2,
                 channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        endpoints = _checks.check_endpoints(target)
        if credentials is not None and not isinstance(credentials, grpc.ChannelCredentials):
            raise InvalidArgument("", "credentials must be grpc.ChannelCredentials (grpc.ssl_channel_credentials), "
                                      f"not {type(credentials).__name__}")
        headers = _checks.check_metadata(metadata)
        if token is not None:
            if not (isinstance(token, str) and token.isascii() and token.isprintable() and " " not in token
                    and token):
                raise InvalidArgument("", "token must be a non-empty str of printable ASCII without spaces")
            headers += (("authorization", f"Bearer {token}"),)
        self._options = _Options(
            _checks.check_owner("", owner), _checks.check_seconds("", "resume_grace", resume_grace),
            _checks.check_heartbeat_interval(heartbeat_interval), headers,
            _checks.check_count("", "unavailable_retries", unavailable_retries, 0, 100))
        self._connections = _Connections(
            endpoints, credentials, _checks.check_channel_options(channel_options), headers)
        self._session: _Session | None = None
        self._elections = _Elections(self._connections, self._options.resume_grace,
                                     self._options.heartbeat_interval, self._options.unavailable_retries)
        self._done = asyncio.Event()
        #: Told True when `done` is set, False when a new `done` replaces it (on the event loop):
        #: how the blocking client mirrors it.
        self._done_watchers: list[Callable[[bool], object]] = []

    @property
    def closed(self) -> bool:
        """Whether `close()` was called: every call raises ClientClosed from then on."""
        return self._connections.closed

    @property
    def done(self) -> asyncio.Event:
        """Set when every lock of the client is gone at once, as etcd's Session.Done(): the client
        was closed, or its session ended without it (its stream broke and was not resumed within
        the grace, or the server no longer had it), and every lock it held is lost. A later
        acquire opens a new session, and `done` is a new event from then on: take it while you
        hold the locks it is about (`await client.done.wait()`)."""
        return self._done

    def _session_over(self) -> None:
        if not self._done.is_set():
            self._done.set()
            for watcher in self._done_watchers:
                _call_safely("done", watcher, True)

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The addresses the client was given, in the order it tries them."""
        return self._connections.endpoints

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to now: the first, until a session fails over."""
        return self._connections.endpoint

    @property
    def channel(self) -> grpc.aio.Channel:
        """The gRPC channel to the current endpoint, made on first use (on the running event loop)."""
        return self._connections.channel_to(self._connections.endpoint)

    def _current_session(self) -> _Session:
        if self._connections.closed:
            raise ClientClosed()
        if self._session is None or self._session.ended:
            if self._done.is_set():
                self._done = asyncio.Event()
                for watcher in self._done_watchers:
                    _call_safely("done", watcher, False)
            self._session = _Session(self._connections, self._options.resume_grace,
                                    self._options.heartbeat_interval, self._session_over)
        return self._session

    async def acquire(self, name: str, *, mode: Mode = "mutex", timeout: float | None = None,
                      owner: str | None = None, value: bytes | str = b"", limit: int = 0,
                      weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> Lock:
        """Waits until the lock is granted and returns it; release it with `await lock.release()`
        (or use `async with client.lock(...)`).

        `mode`: "mutex" (default), "read", "write"; "semaphore" when `limit` is given (up to
        `limit` holders' `weight`s at once). `timeout`: seconds to wait in the queue, then
        LockTimeout; 0 tries once; None waits as long as it takes. `value`: published with the
        request (see Lock.set_value). `on_queued(ahead)`: called while it waits, whenever the
        number of requests ahead changes. Cancelling the wait leaves the queue.

        Raises InvalidArgument, before anything is sent, for what the server would refuse (a
        name that is empty, over 512 bytes of UTF-8 or has control characters; a value over 1024
        bytes; a bad mode, timeout, limit or weight); LockError, with the server's code and
        message, for anything else (PermissionDenied, LockError(UNAVAILABLE), ...).
        """
        name = _checks.check_name(name)
        mode = _checks.check_mode(name, "semaphore" if limit else mode)
        limit, weight = _checks.check_semaphore(name, mode, limit, weight)
        message = pb.SessionAcquire(
            name=name, mode=_MODES[mode], value=_checks.check_value(name, value), limit=limit,
            owner=self._options.owner if owner is None else _checks.check_owner(name, owner))
        if weight is not None:
            message.weight = weight
        return await self._acquire(name, mode, message, self._timeout(name, timeout), on_queued)

    @staticmethod
    def _timeout(name: str, timeout: object) -> float | None:
        return None if timeout is None else _checks.check_seconds(name, "timeout", timeout)

    async def _acquire(self, name: str, mode: Mode, message: pb.SessionAcquire, timeout: float | None,
                       on_queued: Callable[[int], object] | None) -> Lock:
        async def attempt(attempt_message: pb.SessionAcquire, left: float | None) -> Lock:
            try:
                session = self._current_session()
                return await session.requests.acquire(name, mode, attempt_message, left, on_queued)
            except ClientClosed:
                raise ClientClosed(name) from None

        return await _retrying(message, timeout, self._options.unavailable_retries,
                               lambda: self._connections.closed, attempt)

    def lock(self, name: str, *, mode: Mode = "mutex", timeout: float | None = None,
             owner: str | None = None, value: bytes | str = b"", limit: int = 0,
             weight: int | None = None, on_queued: Callable[[int], object] | None = None) -> _Holding[Lock]:
        """`async with client.lock(name, mode="write", timeout=5) as lock:` holds the lock for
        the block (see `acquire`); `lock = await client.lock(...)` works too."""
        return _Holding(self.acquire(name, mode=mode, timeout=timeout, owner=owner, value=value,
                                     limit=limit, weight=weight, on_queued=on_queued))

    async def try_lock(self, name: str, *, mode: Mode = "mutex", owner: str | None = None,
                       value: bytes | str = b"", limit: int = 0, weight: int | None = None) -> Lock | None:
        """Takes the lock if it can be granted now, without queuing: the Lock, or None when it
        is held in a conflicting mode or others wait ahead (not acquiring is an answer, as for
        threading.Lock.acquire(blocking=False)). Nothing is left queued. Other failures raise."""
        try:
            return await self.acquire(name, mode=mode, timeout=0, owner=owner, value=value, limit=limit,
                                      weight=weight)
        except LockTimeout:
            return None

    async def acquire_all(self, targets: Sequence[str | Target], *, timeout: float | None = None,
                          owner: str | None = None, value: bytes | str = b"",
                          on_queued: Callable[[int], object] | None = None) -> Lock:
        """Takes every lock in `targets` (names, for mutexes, or Targets) at once, or none: the
        server queues them in one step (so two multi-locks never deadlock) and grants them
        together. One wait, one release, one loss for the set; `lock.tokens` has each lock's
        token, `lock.name` the names joined with "+"."""
        if isinstance(targets, (str, bytes)) or not isinstance(targets, Sequence):
            raise InvalidArgument("", f"targets must be a list of names or Targets, not {type(targets).__name__}")
        locks = [target if isinstance(target, Target) else Target(target) for target in targets]
        wire = [target._message() for target in locks]  # checks each
        name = "+".join(target.name for target in locks)
        if not _checks.MULTI_LOCK_MIN <= len(locks) <= _checks.MULTI_LOCK_MAX:
            raise InvalidArgument(name, f"a multi-lock takes {_checks.MULTI_LOCK_MIN} to {_checks.MULTI_LOCK_MAX} locks, "
                                        f"not {len(locks)}")
        if len({target.name for target in locks}) < len(locks):
            raise InvalidArgument(name, "a multi-lock names a lock twice")
        message = pb.SessionAcquire(
            locks=wire, value=_checks.check_value(name, value),
            owner=self._options.owner if owner is None else _checks.check_owner(name, owner))
        return await self._acquire(name, "mutex", message, self._timeout(name, timeout), on_queued)

    def lock_all(self, targets: Sequence[str | Target], *, timeout: float | None = None,
                 owner: str | None = None, value: bytes | str = b"",
                 on_queued: Callable[[int], object] | None = None) -> _Holding[Lock]:
        """`async with client.lock_all([...]) as lock:` holds every lock of the set for the block."""
        return _Holding(self.acquire_all(targets, timeout=timeout, owner=owner, value=value,
                                         on_queued=on_queued))

    async def describe(self, name: str) -> LockDescription:
        """Who holds the lock and who waits for it, first in line first (DescribeLock), across
        every server on the back end."""
        name = _checks.check_name(name)
        response: pb.DescribeLockResponse = await self._connections.unary(
            "DescribeLock", name, pb.DescribeLockRequest(name=name), pb.DescribeLockResponse)
        return description(response)

    async def check_token(self, name: str, token: int) -> bool:
        """Whether `token` is held for the lock right now (CheckToken): for resources that check
        the fencing tokens of their callers."""
        name = _checks.check_name(name)
        token = _checks.check_token(name, token)
        response: pb.CheckTokenResponse = await self._connections.unary(
            "CheckToken", name, pb.CheckTokenRequest(name=name, fencing_token=token), pb.CheckTokenResponse)
        return response.held

    def records(self, name: str, token: int) -> HolderRecords:
        """The guarded records of lock `name` as the holder of `token` (`lock.token`, or an
        election's `leadership.term`) writes them: `get(key)`, `put(key, value,
        expected_revision=None)`, `delete(key, expected_revision=None)` and `update(key, change)`
        (see HolderRecords). A write commits only while `token` holds the lock, exclusively (not
        "read"), else NotHeld; at another revision than `expected_revision`, RevisionConflict.
        Records stay until deleted, whoever holds the lock. A key follows a lock name's rule, to
        256 bytes of UTF-8; a value is at most 65536 bytes (InvalidArgument before sending)."""
        return HolderRecords(self._connections, name, token)

    async def get_record(self, name: str, key: str) -> Record | None:
        """The guarded record `key` of lock `name` (its `value` and `revision`), or None when there
        is none; anyone may read it, holder or not."""
        return await _get_record(self._connections, name, key)

    def campaign(self, name: str, value: bytes | str = b"", *, owner: str | None = None,
                 timeout: float | None = None,
                 on_queued: Callable[[int], object] | None = None) -> _Holding[Leadership]:
        """Campaigns in the election `name` with `value` (what observers and `leader()` see of this
        leader, e.g. its address; a str as UTF-8, at most 1024 bytes): `async with
        client.campaign(name, value) as leadership:` enters the block once elected and resigns
        when it leaves (the next candidate is then elected); `leadership = await
        client.campaign(...)` works too (then `await leadership.resign()`).

        Candidates are elected in the order they joined, each on a Campaign stream of its own.
        `leadership.term` is the leader's fencing token; `leadership.lost` is set if the
        leadership is lost (deposed by `resign(name, term)` from anywhere, or its stream broke and
        could not be resumed), as a Lock's. `timeout`: seconds to wait to be elected, then
        LockTimeout; 0 leads now or not at all; None waits as long as it takes. `on_queued(ahead)`:
        called while it waits. Cancelling the wait withdraws the candidate. A name is an election
        or a lock, not both (LockError FAILED_PRECONDITION)."""
        return self._elections.campaign(name, value, self._options.owner if owner is None else owner,
                                        timeout, on_queued)

    def observe(self, name: str, *, from_term: int | None = None) -> Observation:
        """The election's events, in order: `async for event in client.observe(name):` yields a
        Term as each term begins (first the current one, or Vacant when nobody leads), Proclaimed
        for each new value of its leader, Vacant when the seat is seen empty. With `from_term`, it
        first replays every term from that one on (HistoryGone first when the history no longer
        reaches back so far). Skipped says terms were missed by an observer that read too slowly.
        It lasts until closed (`async with client.observe(name) as events:`, or `aclose()`); a
        server that goes away ends it with LockError (UNAVAILABLE): observe again with
        `from_term` set to the last term seen to go on from there."""
        return self._elections.observe(name, from_term)

    async def leader(self, name: str) -> Term | None:
        """Who leads the election now (Leader): its Term (with its latest value), or None when
        nobody does."""
        return await self._elections.leader(name)

    async def proclaim(self, name: str, term: int, value: bytes | str) -> None:
        """Replaces the value of the election's leader, naming its term (Proclaim): observers are
        told it. Raises NotHeld when `term` is not the current leader's (nothing changes)."""
        await self._elections.proclaim(name, term, value)

    async def resign(self, name: str, term: int) -> None:
        """Ends the term `term` of the election, from any client (Resign): its leader's
        `leadership.lost` is set before the next candidate is elected. Raises NotHeld when `term`
        is not the current leader's."""
        await self._elections.resign(name, term)

    async def close(self) -> None:
        """Releases every lock of the client, resigns its leaderships, withdraws its waiting
        requests and candidates (they raise ClientClosed), ends its observations and closes its
        channel. Idempotent."""
        if self._connections.closed:
            return
        self._connections.closed = True
        await self._elections.close()
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        await self._connections.close()
        self._session_over()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["Change", "Client", "ElectionEvent", "HistoryGone", "HolderRecords", "Leadership", "Lock",
           "LockDescription", "LockRequestInfo", "Mode", "Observation", "Proclaimed", "RECORD_KEY_MAX_BYTES",
           "RECORD_VALUE_MAX_BYTES", "Record", "RevokeRequest", "Skipped", "Target", "Term", "VALUE_MAX_BYTES",
           "Vacant"]
