"""Real lockstream servers for the tests: `lockstream serve` from this repository (node and its
node_modules are needed: `npm ci` at the root), on the embedded store."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


class Server:
    def __init__(self) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is needed to run the lockstream server")
        self.process = subprocess.Popen(
            [node, "--import", "tsx", "src/cli.ts", "serve", "--port", "0", "--log-format", "json"],
            cwd=REPO, stdout=subprocess.PIPE, text=True,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line).get("msg", "")
            if message.startswith("lockstream listening on "):
                self.address = message.removeprefix("lockstream listening on ")
                break
        else:
            raise RuntimeError("the lockstream server exited before listening")
        # Keep reading, so that the server never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


class Proxy:
    """Forwards TCP connections to a target until `cut`, which breaks every one it carries."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        with self.lock:
            connections, self.connections = self.connections, []
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()
        return len(connections) // 2

    def close(self) -> None:
        self.listener.close()
        self.cut()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    started = Server()
    yield started
    started.stop()


@pytest.fixture
def own_server() -> Iterator[Server]:
    """A server of the test's own, to kill."""
    started = Server()
    yield started
    started.stop()


@pytest.fixture
def proxy(server: Server) -> Iterator[Proxy]:
    started = Proxy(server.address)
    yield started
    started.close()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return f"python-client/{request.node.name}/{os.getpid()}"
