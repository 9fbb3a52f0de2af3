"""The unary calls of lockstream.v1.ElectionService (Leader, Proclaim, Resign) on the client's
connections, their answers and refusals in the client's terms: nobody leading is None, a term that
is not the current leader's is NotHeld."""

from __future__ import annotations

import grpc

from lockstream._channels import ELECTIONS, Connections
from lockstream._election import Term, term_of
from lockstream.errors import LockError, NotHeld
from lockstream.v1 import election_pb2 as epb


async def leader(connections: Connections, name: str) -> Term | None:
    """The current term of the election, or None when nobody leads (NOT_FOUND)."""
    try:
        response: epb.LeaderResponse = await connections.unary(
            "Leader", name, epb.LeaderRequest(name=name), epb.LeaderResponse, ELECTIONS)
    except LockError as error:
        if error.code == grpc.StatusCode.NOT_FOUND:
            return None
        raise
    return term_of(response.leader)


async def proclaim(connections: Connections, name: str, term: int, value: bytes) -> None:
    """Replaces the value of the leader of `term`; NotHeld when `term` is not the current one."""
    await _on_term(connections, "Proclaim", name,
                   epb.ProclaimRequest(name=name, term=term, value=value), epb.ProclaimResponse)


async def resign(connections: Connections, name: str, term: int) -> None:
    """Ends the term `term`; NotHeld when it is not the current one."""
    await _on_term(connections, "Resign", name, epb.ResignRequest(name=name, term=term), epb.ResignResponse)


async def _on_term(connections: Connections, method: str, name: str,
                   request: epb.ProclaimRequest | epb.ResignRequest, response_type: type[object]) -> None:
    try:
        await connections.unary(method, name, request, response_type, ELECTIONS)
    except LockError as error:
        if error.code == grpc.StatusCode.FAILED_PRECONDITION:
            raise NotHeld(name, error.message) from None
        raise
