"""The asyncio client's elections on its connections: campaigns (checked, started, tried again while
the server is unavailable before an election, and held for a block), observations, the unary calls,
and closing them all with the client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lockstream import _checks, _election_calls
from lockstream._campaign import Campaign
from lockstream._channels import Connections
from lockstream._election import Term
from lockstream._held import Holding
from lockstream._leadership import Leadership
from lockstream._observe import Observation
from lockstream._grant import retrying
from lockstream._wire import duration
from lockstream.errors import ClientClosed
from lockstream.v1 import election_pb2 as epb


class Elections:
    """A Client's campaigns and observations, and the options they are made with (the client's)."""

    def __init__(self, connections: Connections, resume_grace: float, heartbeat_interval: float,
                 unavailable_retries: int) -> None:
        self._connections = connections
        self._resume_grace = resume_grace
        self._heartbeat_interval = heartbeat_interval
        self._unavailable_retries = unavailable_retries
        self._campaigns: set[Campaign] = set()
        self._observations: set[Observation] = set()

    def campaign(self, name: str, value: object, owner: str, timeout: object,
                 on_queued: Callable[[int], object] | None) -> Holding[Leadership]:
        """Checks what the campaign asks for now (InvalidArgument before anything is sent)."""
        name = _checks.check_name(name)
        start = _start(name, _checks.check_value(name, value), _checks.check_owner(name, owner),
                       self._resume_grace, self._heartbeat_interval)
        wait = None if timeout is None else _checks.check_seconds(name, "timeout", timeout)
        return Holding(self._elect(start, wait, on_queued))

    async def _elect(self, start: epb.CampaignStart, timeout: float | None,
                     on_queued: Callable[[int], object] | None) -> Leadership:
        async def attempt(attempt_start: epb.CampaignStart, left: float | None) -> Leadership:
            if self._connections.closed:
                raise ClientClosed(start.name)
            campaign = Campaign(self._connections, attempt_start, self._heartbeat_interval, on_queued,
                                self._elected, self._campaigns.discard)
            self._campaigns.add(campaign)
            return await campaign.elect(left)

        return await retrying(start, timeout, self._unavailable_retries, lambda: self._connections.closed,
                              attempt)

    def _elected(self, campaign: Campaign) -> None:
        """A campaign of the client was elected: any other of its campaigns that led the same
        election before is deposed (see Campaign.deposed)."""
        assert campaign.leadership is not None
        for other in list(self._campaigns):
            if other is not campaign and other.name == campaign.name:
                other.deposed(campaign.leadership.term)

    def observe(self, name: str, from_term: int | None) -> Observation:
        name = _checks.check_name(name)
        if from_term is not None:
            from_term = _checks.check_token(name, from_term)
        return Observation(self._connections, name, from_term, self._observations.add,
                           self._observations.discard)

    async def leader(self, name: str) -> Term | None:
        return await _election_calls.leader(self._connections, _checks.check_name(name))

    async def proclaim(self, name: str, term: int, value: object) -> None:
        name = _checks.check_name(name)
        term = _checks.check_token(name, term)
        await _election_calls.proclaim(self._connections, name, term, _checks.check_value(name, value))

    async def resign(self, name: str, term: int) -> None:
        name = _checks.check_name(name)
        await _election_calls.resign(self._connections, name, _checks.check_token(name, term))

    async def close(self) -> None:
        """The client is being closed: every observation ends, every candidate is withdrawn and
        every leader resigns (the connections are closed after)."""
        for observation in list(self._observations):
            observation.close_now()
        await asyncio.gather(*(campaign.close() for campaign in list(self._campaigns)))


def _start(name: str, value: bytes, owner: str, resume_grace: float,
           heartbeat_interval: float) -> epb.CampaignStart:
    start = epb.CampaignStart(name=name, value=value, owner=owner)
    if resume_grace > 0:
        start.resume_grace.CopyFrom(duration(resume_grace))
    if heartbeat_interval > 0:
        start.heartbeat_interval.CopyFrom(duration(heartbeat_interval))
    return start
