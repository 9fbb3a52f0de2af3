"""Real lockstream servers for the tests: `lockstream serve` from this repository (node and the
repository's node_modules are needed: `npm ci` at its root), on the in-memory store. Without node
the tests fail; they are never skipped."""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import grpc
import pytest

import lockstream
from lockstream.v1 import lockstream_pb2 as pb
from lockstream.v1 import lockstream_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[3]
#: How long any wait in the tests may take before it counts as a failure (never a pause).
PATIENCE = 30.0
_LISTENING = "lockstream listening on "


class Server:
    """`lockstream serve --port 0` in a process of its own; `address` is where it listens."""

    def __init__(self, *args: str) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed: the tests need it to run the lockstream server")
        # Only the flags given here: no LOCKSTREAM_* setting of the caller's may leak in.
        env = {key: value for key, value in os.environ.items() if not key.startswith("LOCKSTREAM_")}
        self.process = subprocess.Popen(
            [node, "--import", "tsx", "src/cli.ts", "serve", "--port", "0", "--http-port", "0",
             "--log-format", "json", *args],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []

        def pump() -> None:  # keeps reading, so that the server never blocks on a full pipe
            assert self.process.stdout is not None
            with self.process.stdout:
                for line in self.process.stdout:
                    self.log.append(line)
                    lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 60
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise RuntimeError("the lockstream server did not start listening within 60 s") from None
            if line is None:
                raise RuntimeError(f"the lockstream server exited before listening:\n{''.join(self.log)}")
            try:
                message = str(json.loads(line).get("msg", ""))
            except (ValueError, AttributeError):
                continue
            if message.startswith(_LISTENING):
                self.address = message.removeprefix(_LISTENING).strip()
                self.port = int(self.address.rsplit(":", 1)[1])
                return

    def kill(self) -> None:
        """SIGKILL: the process dies at once, without closing anything."""
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Proxy:
    """Forwards TCP connections to `target`. `cut()` breaks every connection it carries, `freeze()`
    black-holes them (bytes are read and dropped, nothing is closed), `partition()` black-holes
    them and every later one (a network partition: the client reaches nobody, the server hears
    nothing), `retarget()` sends new connections elsewhere, `gate` holds new ones back while
    clear. `accepted` counts the connections it forwarded."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        #: While clear, new connections wait (in the listen backlog) before they are forwarded.
        self.gate = threading.Event()
        self.gate.set()
        self._partitioned = False
        self._black_holed: list[socket.socket] = []
        self._pairs: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self._guard = threading.Lock()
        self._changed = threading.Condition(self._guard)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.gate.wait()
            if self._partitioned:
                # Accepted and never answered, never forwarded: the server does not hear of it.
                dropped = threading.Event()
                dropped.set()
                threading.Thread(target=self._pipe, args=(client, client, dropped), daemon=True).start()
                with self._guard:
                    self._black_holed.append(client)
                continue
            host, port = self.target.rsplit(":", 1)
            try:
                upstream = socket.create_connection((host, int(port)))
            except OSError:
                client.close()
                continue
            frozen = threading.Event()
            with self._guard:
                self._pairs.append((client, upstream, frozen))
                self.accepted += 1
                self._changed.notify_all()
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink, frozen), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, frozen: threading.Event) -> None:
        try:
            while data := source.recv(65536):
                if not frozen.is_set():
                    sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def wait_for_connections(self, count: int, timeout: float = PATIENCE) -> bool:
        """Waits until the proxy has accepted `count` connections in all."""
        with self._changed:
            return self._changed.wait_for(lambda: self.accepted >= count, timeout)

    def cut(self) -> int:
        """Breaks every connection the proxy carries; returns how many there were."""
        with self._guard:
            pairs, self._pairs = self._pairs, []
        for client, upstream, _ in pairs:
            for end in (client, upstream):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()
        return len(pairs)

    def freeze(self) -> int:
        """Silently drops whatever the connections it carries now send, both ways, from now on."""
        with self._guard:
            pairs, self._pairs = self._pairs, []
        for _, _, frozen in pairs:
            frozen.set()
        return len(pairs)

    def partition(self) -> int:
        """Black-holes every connection, those it carries now and every later one; returns how
        many it carried."""
        with self._guard:
            self._partitioned = True
        return self.freeze()

    def retarget(self, target: str) -> None:
        self.target = target

    def close(self) -> None:
        self.gate.set()
        self.listener.close()
        self.cut()
        with self._guard:
            held, self._black_holed = self._black_holed, []
        for client in held:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            client.close()


class Unanswering:
    """A gRPC server that takes every Session stream and never says a word on it: a lockstream
    instance that accepts connections but is stuck before it can take a session over. `streams`
    counts the streams it was sent."""

    def __init__(self) -> None:
        self.streams = 0
        self._guard = threading.Lock()
        self._stopped = threading.Event()
        # Lets the client's keepalive pings (every 3 s) through, as lockstream does.
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8), options=[
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 1000),
            ("grpc.http2.max_ping_strikes", 0),
        ])
        unanswering = self

        class Servicer(pb_grpc.LockServiceServicer):
            def Session(self, requests: Iterator[pb.SessionRequest], context: grpc.ServicerContext) -> \
                    Iterator[pb.SessionResponse]:
                with unanswering._guard:
                    unanswering.streams += 1
                # Reads on, answers nothing, until the client gives the stream up.
                for _ in requests:
                    pass
                return iter(())

        pb_grpc.add_LockServiceServicer_to_server(Servicer(), self.server)  # type: ignore[no-untyped-call]
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(grace=None).wait(PATIENCE)


class Raw:
    """The generated stub, straight on a channel of its own: how the tests look at the server."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.LockServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def describe(self, name: str) -> pb.DescribeLockResponse:
        response: pb.DescribeLockResponse = self.stub.DescribeLock(pb.DescribeLockRequest(name=name), timeout=PATIENCE)
        return response

    def holders(self, name: str) -> list[int]:
        return [holder.fencing_token for holder in self.describe(name).holders]

    def waiters(self, name: str) -> list[int]:
        return [waiter.fencing_token for waiter in self.describe(name).waiters]

    def revoke(self, name: str, reason: str, force_after: float | None = None) -> int:
        request = pb.RevokeLockRequest(name=name, reason=reason)
        if force_after is not None:
            request.force_after.FromNanoseconds(round(force_after * 1e9))
        response: pb.RevokeLockResponse = self.stub.RevokeLock(request, timeout=PATIENCE)
        return response.holders_asked

    def close(self) -> None:
        self.channel.close()


def check_history(history: list[tuple[str, str, int]]) -> None:
    """Every entry is followed by the same holder's exit before anyone else enters, and every
    holder's token is larger than the one before."""
    assert len(history) % 2 == 0
    last = -1
    for index in range(0, len(history), 2):
        (enter, who, token), (exit_, who_out, token_out) = history[index], history[index + 1]
        assert (enter, exit_) == ("enter", "exit"), f"overlap at {index}: {history[index:index + 2]}"
        assert (who, token) == (who_out, token_out)
        assert token > last
        last = token


T = TypeVar("T")


class Calls(Generic[T]):
    """A callback that records what it is called with; `called` is set at the first call."""

    def __init__(self) -> None:
        self.values: list[T] = []
        self.called = threading.Event()

    def __call__(self, value: T) -> None:
        self.values.append(value)
        self.called.set()


class Settable(Protocol):
    def set(self) -> None: ...


def queued_behind(ahead: int, event: Settable) -> Callable[[int], None]:
    """An on_queued callback that sets `event` once the request waits behind `ahead` others."""

    def queued(count: int) -> None:
        if count == ahead:
            event.set()

    return queued


def eventually(condition: Callable[[], bool], timeout: float = PATIENCE) -> bool:
    """Polls `condition` until it holds (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


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


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One server for the whole run, shared by every test that does not kill its server."""
    started = Server()
    yield started
    started.stop()


@pytest.fixture(scope="session")
def raw(server: Server) -> Iterator[Raw]:
    stub = Raw(server.address)
    yield stub
    stub.close()


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Starts servers of the test's own (to kill); stops them after the test."""
    started: list[Server] = []

    def start(*args: str) -> Server:
        started.append(Server(*args))
        return started[-1]

    yield start
    for each in started:
        each.stop()


@pytest.fixture
def proxy(server: Server) -> Iterator[Proxy]:
    started = Proxy(server.address)
    yield started
    started.close()


@pytest.fixture
def start_proxy() -> Iterator[Callable[[str], Proxy]]:
    """Starts proxies of the test's own (to any address); closes them after the test."""
    started: list[Proxy] = []

    def start(target: str) -> Proxy:
        started.append(Proxy(target))
        return started[-1]

    yield start
    for each in started:
        each.close()


@pytest.fixture
def unanswering() -> Iterator[Unanswering]:
    started = Unanswering()
    yield started
    started.close()


def unused_addresses(count: int) -> list[str]:
    """`count` different loopback addresses nobody listens on: connections to them are refused."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for each in sockets:  # bound side by side: no port is handed out twice
            each.bind(("127.0.0.1", 0))
        return [f"127.0.0.1:{each.getsockname()[1]}" for each in sockets]
    finally:
        for each in sockets:
            each.close()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A lock name of the test's own (tests of the same name in two files get two names)."""
    return f"python-client/{request.node.path.stem}/{request.node.name}/{os.getpid()}"
