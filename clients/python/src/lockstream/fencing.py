"""The lockstream-fencing-token header: how a call made inside a held lock carries the lock's
fencing token to the resource it writes to, so that the resource can refuse a holder whose lock
was lost (the TypeScript SDK's lockstream/fencing checks it on the resource's side).

    metadata = [fencing_metadata(lock.name, lock.token)]           # a gRPC call's metadata
    headers = {FENCING_HEADER: format_fencing_token(lock.name, lock.token)}  # an HTTP request's
"""

from __future__ import annotations

import re
from urllib.parse import quote

from lockstream.errors import InvalidArgument

#: The gRPC metadata key and HTTP header that carry a fenced call's token, as "<lock name,
#: percent-encoded as JavaScript's encodeURIComponent does>:<token in decimal>".
FENCING_HEADER = "lockstream-fencing-token"

_TOKEN_MAX = 2**64 - 1
#: What encodeURIComponent leaves as it is, besides letters and digits (quote keeps "_.-~" anyway).
_UNESCAPED = "-_.!~*'()"
_TOKEN = re.compile(r"[0-9]+")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def format_fencing_token(name: str, token: int) -> str:
    """The FENCING_HEADER value for the lock `name` held with `token`."""
    if not 0 <= token <= _TOKEN_MAX:
        raise InvalidArgument(name, f"fencing token {token} is not a uint64")
    return quote(name, safe=_UNESCAPED) + f":{token}"


def parse_fencing_token(value: str) -> tuple[str, int]:
    """The lock name and token of a FENCING_HEADER value; InvalidArgument says what is malformed."""
    name_part, colon, token_part = value.rpartition(":")
    if not colon:
        raise _malformed(value, "no ':' between the lock name and the token")
    if not _TOKEN.fullmatch(token_part) or int(token_part) > _TOKEN_MAX:
        raise _malformed(value, "the token is not a decimal uint64")
    if not all("\x21" <= char <= "\x7e" for char in name_part):
        raise _malformed(value, "the lock name has a character unencoded (percent-encode the name as UTF-8)")
    if "%" in _PERCENT.sub("", name_part):
        raise _malformed(value, "a % without two hex digits in the lock name")
    try:
        name = _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), name_part).encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise _malformed(value, "the lock name is not percent-encoded UTF-8") from None
    if not name:
        raise _malformed(value, "the lock name is empty")
    return name, int(token_part)


def fencing_metadata(name: str, token: int) -> tuple[str, str]:
    """The (key, value) pair to add to a gRPC call's metadata."""
    return FENCING_HEADER, format_fencing_token(name, token)


def _malformed(value: str, reason: str) -> InvalidArgument:
    return InvalidArgument("", f"{FENCING_HEADER} {value!r}: {reason}")
