import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from lockstream.v1 import lockstream_pb2 as _lockstream_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CampaignRequest(_message.Message):
    __slots__ = ("start", "resign", "resume", "heartbeat")
    START_FIELD_NUMBER: _ClassVar[int]
    RESIGN_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    start: CampaignStart
    resign: CampaignResign
    resume: CampaignResume
    heartbeat: CampaignHeartbeat
    def __init__(self, start: _Optional[_Union[CampaignStart, _Mapping]] = ..., resign: _Optional[_Union[CampaignResign, _Mapping]] = ..., resume: _Optional[_Union[CampaignResume, _Mapping]] = ..., heartbeat: _Optional[_Union[CampaignHeartbeat, _Mapping]] = ...) -> None: ...

class CampaignStart(_message.Message):
    __slots__ = ("name", "value", "owner", "wait_timeout", "resume_grace", "heartbeat_interval")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RESUME_GRACE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: bytes
    owner: str
    wait_timeout: _duration_pb2.Duration
    resume_grace: _duration_pb2.Duration
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., value: _Optional[bytes] = ..., owner: _Optional[str] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., resume_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CampaignResign(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CampaignResume(_message.Message):
    __slots__ = ("resume_token", "heartbeat_interval")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, resume_token: _Optional[str] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CampaignHeartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("queued", "elected", "resigned", "in_doubt", "confirmed", "resumable", "heartbeat", "resign_requested")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    ELECTED_FIELD_NUMBER: _ClassVar[int]
    RESIGNED_FIELD_NUMBER: _ClassVar[int]
    IN_DOUBT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    RESUMABLE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    RESIGN_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    queued: CampaignQueued
    elected: CampaignElected
    resigned: CampaignResigned
    in_doubt: CampaignInDoubt
    confirmed: CampaignConfirmed
    resumable: CampaignResumable
    heartbeat: CampaignHeartbeat
    resign_requested: _lockstream_pb2.AcquireRevokeRequested
    def __init__(self, queued: _Optional[_Union[CampaignQueued, _Mapping]] = ..., elected: _Optional[_Union[CampaignElected, _Mapping]] = ..., resigned: _Optional[_Union[CampaignResigned, _Mapping]] = ..., in_doubt: _Optional[_Union[CampaignInDoubt, _Mapping]] = ..., confirmed: _Optional[_Union[CampaignConfirmed, _Mapping]] = ..., resumable: _Optional[_Union[CampaignResumable, _Mapping]] = ..., heartbeat: _Optional[_Union[CampaignHeartbeat, _Mapping]] = ..., resign_requested: _Optional[_Union[_lockstream_pb2.AcquireRevokeRequested, _Mapping]] = ...) -> None: ...

class CampaignQueued(_message.Message):
    __slots__ = ("ahead",)
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    ahead: int
    def __init__(self, ahead: _Optional[int] = ...) -> None: ...

class CampaignElected(_message.Message):
    __slots__ = ("term",)
    TERM_FIELD_NUMBER: _ClassVar[int]
    term: int
    def __init__(self, term: _Optional[int] = ...) -> None: ...

class CampaignResigned(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CampaignInDoubt(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CampaignConfirmed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CampaignResumable(_message.Message):
    __slots__ = ("resume_token", "resume_grace")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESUME_GRACE_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    resume_grace: _duration_pb2.Duration
    def __init__(self, resume_token: _Optional[str] = ..., resume_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("name", "from_term")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FROM_TERM_FIELD_NUMBER: _ClassVar[int]
    name: str
    from_term: int
    def __init__(self, name: _Optional[str] = ..., from_term: _Optional[int] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("term", "proclaimed", "vacant", "history_gone", "skipped")
    TERM_FIELD_NUMBER: _ClassVar[int]
    PROCLAIMED_FIELD_NUMBER: _ClassVar[int]
    VACANT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_GONE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    term: ElectionTerm
    proclaimed: ElectionProclaimed
    vacant: ElectionVacant
    history_gone: ElectionHistoryGone
    skipped: ElectionSkipped
    def __init__(self, term: _Optional[_Union[ElectionTerm, _Mapping]] = ..., proclaimed: _Optional[_Union[ElectionProclaimed, _Mapping]] = ..., vacant: _Optional[_Union[ElectionVacant, _Mapping]] = ..., history_gone: _Optional[_Union[ElectionHistoryGone, _Mapping]] = ..., skipped: _Optional[_Union[ElectionSkipped, _Mapping]] = ...) -> None: ...

class ElectionTerm(_message.Message):
    __slots__ = ("term", "value", "owner", "elected_at")
    TERM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    ELECTED_AT_FIELD_NUMBER: _ClassVar[int]
    term: int
    value: bytes
    owner: str
    elected_at: _timestamp_pb2.Timestamp
    def __init__(self, term: _Optional[int] = ..., value: _Optional[bytes] = ..., owner: _Optional[str] = ..., elected_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ElectionProclaimed(_message.Message):
    __slots__ = ("term", "value")
    TERM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    term: int
    value: bytes
    def __init__(self, term: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class ElectionVacant(_message.Message):
    __slots__ = ("after_term",)
    AFTER_TERM_FIELD_NUMBER: _ClassVar[int]
    after_term: int
    def __init__(self, after_term: _Optional[int] = ...) -> None: ...

class ElectionHistoryGone(_message.Message):
    __slots__ = ("first_term",)
    FIRST_TERM_FIELD_NUMBER: _ClassVar[int]
    first_term: int
    def __init__(self, first_term: _Optional[int] = ...) -> None: ...

class ElectionSkipped(_message.Message):
    __slots__ = ("first_term",)
    FIRST_TERM_FIELD_NUMBER: _ClassVar[int]
    first_term: int
    def __init__(self, first_term: _Optional[int] = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ("leader",)
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: ElectionTerm
    def __init__(self, leader: _Optional[_Union[ElectionTerm, _Mapping]] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ("name", "term", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    term: int
    value: bytes
    def __init__(self, name: _Optional[str] = ..., term: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("name", "term")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    name: str
    term: int
    def __init__(self, name: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
