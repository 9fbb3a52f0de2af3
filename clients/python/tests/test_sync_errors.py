"""The blocking client, against real lockstream servers: calls that fail, and how they say so
(unreachable server, permission denied, bad requests and options, messages)."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

import lockstream
from conftest import Raw, Server, take


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
