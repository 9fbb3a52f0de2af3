"""What Observe and Leader answer: an election's terms and events as plain Python values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Union

from lockstream.v1 import election_pb2 as epb


@dataclass(frozen=True)
class Term:
    """A leader's term: `term` is its fencing token (larger for every later leader), `value`
    what the leader campaigned with (or, for the current state and `leader()`, its latest
    proclaimed value), `owner` who campaigned ("" if not said), `elected_at` when the term was
    recorded (UTC, by the recording server's clock: for people)."""

    __module__ = "lockstream.aio"  # its public home, for repr, help() and pickle

    term: int
    value: bytes
    owner: str
    elected_at: datetime | None


@dataclass(frozen=True)
class Proclaimed:
    """The leader of `term` proclaimed a new `value`."""

    __module__ = "lockstream.aio"

    term: int
    value: bytes


@dataclass(frozen=True)
class Vacant:
    """Nobody leads: the last term seen to end is `after_term` (0 if none ever began)."""

    __module__ = "lockstream.aio"

    after_term: int


@dataclass(frozen=True)
class HistoryGone:
    """The history no longer reaches back to the `from_term` asked for: `first_term` is the first
    term it still has (0: none), and the replay starts there."""

    __module__ = "lockstream.aio"

    first_term: int


@dataclass(frozen=True)
class Skipped:
    """The observer fell so far behind that terms it was not told left the history: the next term
    told is `first_term` (0: none is recorded yet)."""

    __module__ = "lockstream.aio"

    first_term: int


#: One event of `observe`.
ElectionEvent = Union[Term, Proclaimed, Vacant, HistoryGone, Skipped]


def term_of(wire: epb.ElectionTerm) -> Term:
    elected_at = wire.elected_at.ToDatetime(tzinfo=timezone.utc) if wire.HasField("elected_at") else None
    return Term(term=wire.term, value=wire.value, owner=wire.owner, elected_at=elected_at)


def event(wire: epb.ObserveResponse) -> ElectionEvent | None:
    """The event of one Observe message; None for a kind this client does not know (a newer
    server's)."""
    kind = wire.WhichOneof("kind")
    if kind == "term":
        return term_of(wire.term)
    if kind == "proclaimed":
        return Proclaimed(term=wire.proclaimed.term, value=wire.proclaimed.value)
    if kind == "vacant":
        return Vacant(after_term=wire.vacant.after_term)
    if kind == "history_gone":
        return HistoryGone(first_term=wire.history_gone.first_term)
    if kind == "skipped":
        return Skipped(first_term=wire.skipped.first_term)
    return None
