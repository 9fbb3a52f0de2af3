"""What the client checks before it sends a request: the server's own limits (_limits.py, generated
from the table proto/lockstream/v1/limits.json, and the server's validation), so that a bad argument
fails alone, at once, with InvalidArgument, instead of reaching the wire (where protobuf would raise
TypeError or UnicodeEncodeError)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

# The limits come from _limits.py; those the rest of the client uses are taken from here ("as":
# exported again).
from lockstream._limits import (
    HEARTBEAT_INTERVAL_MAX_MS,
    HEARTBEAT_INTERVAL_MIN_MS,
    LOCK_NAME_MAX_BYTES as LOCK_NAME_MAX_BYTES,
    MULTI_LOCK_MAX as MULTI_LOCK_MAX,
    MULTI_LOCK_MIN as MULTI_LOCK_MIN,
    OWNER_MAX_BYTES as OWNER_MAX_BYTES,
    RECORD_KEY_MAX_BYTES as RECORD_KEY_MAX_BYTES,
    RECORD_VALUE_MAX_BYTES as RECORD_VALUE_MAX_BYTES,
    SEMAPHORE_LIMIT_MAX as SEMAPHORE_LIMIT_MAX,
    VALUE_MAX_BYTES as VALUE_MAX_BYTES,
    WAIT_TIMEOUT_MAX_MS,
)
from lockstream.errors import InvalidArgument

Mode = Literal["mutex", "read", "write", "semaphore"]
MODES: tuple[Mode, ...] = ("mutex", "read", "write", "semaphore")

#: The longest wait (and resume grace) the server takes, in seconds.
SECONDS_MAX = WAIT_TIMEOUT_MAX_MS / 1000
#: The heartbeat intervals the server accepts, in seconds.
HEARTBEAT_INTERVAL_MIN, HEARTBEAT_INTERVAL_MAX = HEARTBEAT_INTERVAL_MIN_MS / 1000, HEARTBEAT_INTERVAL_MAX_MS / 1000
_UINT64_MAX = 2**64 - 1


def _forbidden(text: str) -> tuple[int, str] | None:
    """The index and description of the first character the server refuses in a name: control
    characters, lone surrogates (not UTF-8 at all) and U+FFFD (what invalid UTF-8 decodes to)."""
    for index, char in enumerate(text):
        category = unicodedata.category(char)
        if category == "Cc":
            return index, f"control character U+{ord(char):04X}"
        if category == "Cs":
            return index, f"lone surrogate U+{ord(char):04X}"
        if char == "\ufffd":
            return index, "invalid UTF-8 (U+FFFD)"
    return None


def _text_problem(what: str, text: str, max_bytes: int) -> str | None:
    """What is wrong with a lock name or a record key (`what`), or None: 1 to `max_bytes` of UTF-8
    without a character _forbidden refuses (the server's rule, in its words)."""
    bad = _forbidden(text)
    if bad is not None:
        return f"{what} contains {bad[1]} at index {bad[0]}"
    size = len(text.encode())
    if size == 0:
        return f"{what} is empty"
    if size > max_bytes:
        return f"{what} is {size} bytes of UTF-8; the limit is {max_bytes}"
    return None


def check_name(name: object) -> str:
    """A lock name: a str of 1 to LOCK_NAME_MAX_BYTES of UTF-8 without control characters."""
    if not isinstance(name, str):
        raise InvalidArgument("", f"a lock name must be a str, not {type(name).__name__}")
    problem = _text_problem("name", name, LOCK_NAME_MAX_BYTES)
    if problem is not None:
        raise InvalidArgument(name, f"invalid lock name: {problem}")
    return name


def check_record_key(name: str, key: object) -> str:
    """A guarded record's key: a lock name's rule, to RECORD_KEY_MAX_BYTES of UTF-8."""
    if not isinstance(key, str):
        raise InvalidArgument(name, f"a record key must be a str, not {type(key).__name__}")
    problem = _text_problem("key", key, RECORD_KEY_MAX_BYTES)
    if problem is not None:
        raise InvalidArgument(name, f"invalid record key: {problem}")
    return key


def check_owner(name: str, owner: object) -> str:
    """Who asks: a str of at most OWNER_MAX_BYTES of UTF-8 without control characters."""
    if not isinstance(owner, str):
        raise InvalidArgument(name, f"owner must be a str, not {type(owner).__name__}")
    bad = _forbidden(owner)
    if bad is not None:
        raise InvalidArgument(name, f"owner contains {bad[1]} at index {bad[0]}")
    size = len(owner.encode())
    if size > OWNER_MAX_BYTES:
        raise InvalidArgument(name, f"owner is {size} bytes of UTF-8; the limit is {OWNER_MAX_BYTES}")
    return owner


def check_value(name: str, value: object) -> bytes:
    """A published value: bytes (or a str, sent as UTF-8) of at most VALUE_MAX_BYTES."""
    return _bytes(name, "value", value, VALUE_MAX_BYTES)


def check_record_value(name: str, value: object) -> bytes:
    """A guarded record's value: bytes (or a str, sent as UTF-8) of at most RECORD_VALUE_MAX_BYTES."""
    return _bytes(name, "record value", value, RECORD_VALUE_MAX_BYTES)


def _bytes(name: str, what: str, value: object, maximum: int) -> bytes:
    """`value` as bytes (a str as UTF-8), at most `maximum` of them."""
    if isinstance(value, str):
        bad = _forbidden(value)
        if bad is not None and bad[1].startswith("lone surrogate"):
            raise InvalidArgument(name, f"{what} contains {bad[1]} at index {bad[0]}: not UTF-8")
        data = value.encode()
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise InvalidArgument(name, f"{what} must be bytes or a str, not {type(value).__name__}")
    if len(data) > maximum:
        raise InvalidArgument(name, f"{what} is {len(data)} bytes; the limit is {maximum}")
    return data


def check_mode(name: str, mode: object) -> Mode:
    if mode not in MODES:
        raise InvalidArgument(name, f"mode must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
    return mode


def check_seconds(name: str, option: str, value: object, maximum: float = SECONDS_MAX) -> float:
    """A duration in seconds: a number from 0 to `maximum`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(name, f"{option} must be a number of seconds, not {type(value).__name__}")
    if not (math.isfinite(value) and 0 <= value <= maximum):
        raise InvalidArgument(name, f"{option} must be a number of seconds from 0 to {maximum:g}, not {value!r}")
    return float(value)


def check_heartbeat_interval(value: object) -> float:
    """0 (no heartbeats), or what the server accepts: HEARTBEAT_INTERVAL_MIN to HEARTBEAT_INTERVAL_MAX
    seconds."""
    seconds = check_seconds("", "heartbeat_interval", value, HEARTBEAT_INTERVAL_MAX)
    if 0 < seconds < HEARTBEAT_INTERVAL_MIN:
        raise InvalidArgument("", f"heartbeat_interval must be 0 (none) or {HEARTBEAT_INTERVAL_MIN:g} to "
                                  f"{HEARTBEAT_INTERVAL_MAX:g} seconds, not {value!r}")
    return seconds


def check_count(name: str, option: str, value: object, minimum: int, maximum: int) -> int:
    """A whole number from `minimum` to `maximum`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(name, f"{option} must be an int, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidArgument(name, f"{option} {value} is out of range: expected {minimum} to {maximum}")
    return value


def check_semaphore(name: str, mode: Mode, limit: object, weight: object) -> tuple[int, int | None]:
    """A semaphore's limit (1 to SEMAPHORE_LIMIT_MAX) and weight (1 to the limit; None: 1); neither
    for a lock mode."""
    if mode != "semaphore":
        if limit != 0 or weight is not None:
            raise InvalidArgument(name, f"{'limit' if limit != 0 else 'weight'} applies to a semaphore only, "
                                        f"not to a {mode} lock")
        return 0, None
    checked_limit = check_count(name, "limit", limit, 1, SEMAPHORE_LIMIT_MAX)
    checked_weight = None if weight is None else check_count(name, "weight", weight, 1, checked_limit)
    return checked_limit, checked_weight


def check_token(name: str, token: object, option: str = "token") -> int:
    """A fencing token, a term or a revision: a uint64."""
    return check_count(name, option, token, 0, _UINT64_MAX)


# Schemes gRPC resolves itself ("dns:///name:port", "unix:/path", ...): what follows is theirs
# to check. Any other "name:" before a port is a host name, as gRPC reads "localhost:50051".
_SCHEMES = frozenset({"dns", "unix", "unix-abstract", "ipv4", "ipv6", "vsock"})
_BRACKETED = re.compile(r"\[([^\]]*)\](?::(.*))?")


def _port_problem(port: str) -> str | None:
    if not port.isdigit() or not port.isascii():
        return f"the port {port!r} is not a number"
    if not 1 <= int(port) <= 65535:
        return f"the port {port} is out of range: expected 1 to 65535"
    return None


def _address_problem(target: str) -> str | None:
    """What is wrong with a gRPC target, as far as the client can tell before connecting: a
    "host:port" needs a host and a port from 1 to 65535; a target with a scheme is gRPC's to
    check."""
    bad = _forbidden(target)
    if bad is not None:
        return f"it contains {bad[1]} at index {bad[0]}"
    if any(char.isspace() for char in target):
        return "it contains whitespace"
    scheme = target.split(":", 1)[0]
    if "://" in target or scheme in _SCHEMES:
        return None
    if target.startswith("["):  # "[::1]:50051"
        bracketed = _BRACKETED.fullmatch(target)
        if bracketed is None or not bracketed.group(1):
            return "an IPv6 host goes in brackets, as [::1]:50051"
        return None if bracketed.group(2) is None else _port_problem(bracketed.group(2))
    if target.count(":") != 1:
        return None  # a host alone (gRPC's default port), or an IPv6 address without a port
    host, port = target.split(":")
    if not host:
        return "there is no host before the port"
    return _port_problem(port)


def _missing_port(endpoint: str) -> str | None:
    """An endpoint of a list names its port: the TypeScript and Go clients read a list the same
    way, and a default port (gRPC's 443) is never what a list of lockstream instances means."""
    scheme = endpoint.split(":", 1)[0]
    if "://" in endpoint or scheme in _SCHEMES or endpoint.startswith("["):
        return None
    return "it has no port: each endpoint of a list is host:port" if ":" not in endpoint else None


def check_target(target: object) -> str:
    """A gRPC target ("host:port", "dns:///name:port", ...): a str gRPC can encode, and for a
    "host:port" a port from 1 to 65535. Whether it resolves shows at the first call (LockError
    UNAVAILABLE)."""
    if not isinstance(target, str) or not target:
        raise InvalidArgument("", f'target must be an address such as "127.0.0.1:50051", not {target!r}')
    problem = _address_problem(target)
    if problem is not None:
        raise InvalidArgument("", f"target {target!r} is not a valid address: {problem}")
    return target


def check_endpoints(target: object) -> tuple[str, ...]:
    """The endpoints of a client: one target (a str), or a sequence of them, each a valid
    target, none twice."""
    if isinstance(target, str):
        return (check_target(target),)
    if isinstance(target, (bytes, bytearray)) or not isinstance(target, Sequence):
        raise InvalidArgument("", 'target must be an address such as "127.0.0.1:50051" or a list of addresses, '
                                  f"not {type(target).__name__}")
    if not target:
        raise InvalidArgument("", "the list of endpoints is empty: give at least one address")
    seen: dict[str, int] = {}
    for index, endpoint in enumerate(target):
        if not isinstance(endpoint, str) or not endpoint:
            raise InvalidArgument("", f'endpoints[{index}] must be an address such as "127.0.0.1:50051", '
                                      f"not {endpoint!r}")
        problem = _address_problem(endpoint) or _missing_port(endpoint)
        if problem is not None:
            raise InvalidArgument("", f"endpoints[{index}] {endpoint!r} is not a valid address: {problem}")
        # Host names are not case-sensitive: "Host:1" and "host:1" are one endpoint (as in Go and TS).
        key = endpoint.lower()
        if key in seen:
            raise InvalidArgument("", f"endpoints[{index}] {endpoint!r} is listed twice "
                                      f"(endpoints[{seen[key]}] is the same)")
        seen[key] = index
    return tuple(target)


# gRPC's rules for a metadata key: lowercase letters, digits, "-", "_" and "."; values of keys
# that end in "-bin" are bytes, the others printable ASCII.
_METADATA_KEY = re.compile(r"[0-9a-z_.\-]+")


def check_metadata(metadata: object) -> tuple[tuple[str, str | bytes], ...]:
    """Metadata for every call: (key, value) pairs gRPC accepts (it would fail every call)."""
    if isinstance(metadata, (str, bytes)) or not isinstance(metadata, Sequence):
        raise InvalidArgument("", f"metadata must be a sequence of (key, value) pairs, not {type(metadata).__name__}")
    pairs: list[tuple[str, str | bytes]] = []
    for index, pair in enumerate(metadata):
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise InvalidArgument("", f"metadata[{index}] must be a (key, value) pair, not {pair!r}")
        key, value = pair
        if not (isinstance(key, str) and _METADATA_KEY.fullmatch(key)) or key.startswith("grpc-"):
            raise InvalidArgument("", f"metadata[{index}] key {key!r} is not a metadata key: lowercase "
                                      "letters, digits, '-', '_' and '.', not starting with 'grpc-'")
        if key.endswith("-bin"):
            if not isinstance(value, bytes):
                raise InvalidArgument("", f"metadata[{index}] {key}: the value of a -bin key must be bytes")
        elif not (isinstance(value, str) and value.isascii() and value.isprintable()):
            raise InvalidArgument("", f"metadata[{index}] {key}: the value must be a str of printable ASCII, "
                                      f"not {value!r}")
        pairs.append((key, value))
    return tuple(pairs)


def check_channel_options(options: object) -> list[tuple[str, Any]]:
    """More gRPC channel arguments: (name, value) pairs."""
    if isinstance(options, (str, bytes)) or not isinstance(options, Sequence):
        raise InvalidArgument("", f"channel_options must be a sequence of (name, value) pairs, "
                                  f"not {type(options).__name__}")
    for index, pair in enumerate(options):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise InvalidArgument("", f"channel_options[{index}] must be a (name, value) pair, not {pair!r}")
    return list(options)
