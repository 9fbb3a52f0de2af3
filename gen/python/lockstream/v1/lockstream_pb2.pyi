import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LockMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCK_MODE_UNSPECIFIED: _ClassVar[LockMode]
    LOCK_MODE_MUTEX: _ClassVar[LockMode]
    LOCK_MODE_READ: _ClassVar[LockMode]
    LOCK_MODE_WRITE: _ClassVar[LockMode]
    LOCK_MODE_SEMAPHORE: _ClassVar[LockMode]
    LOCK_MODE_CANDIDATE: _ClassVar[LockMode]
LOCK_MODE_UNSPECIFIED: LockMode
LOCK_MODE_MUTEX: LockMode
LOCK_MODE_READ: LockMode
LOCK_MODE_WRITE: LockMode
LOCK_MODE_SEMAPHORE: LockMode
LOCK_MODE_CANDIDATE: LockMode

class WatchLockRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class WatchLockResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: DescribeLockResponse
    def __init__(self, state: _Optional[_Union[DescribeLockResponse, _Mapping]] = ...) -> None: ...

class RevokeLockRequest(_message.Message):
    __slots__ = ("name", "reason", "force_after")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FORCE_AFTER_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    force_after: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ..., force_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RevokeLockResponse(_message.Message):
    __slots__ = ("holders_asked",)
    HOLDERS_ASKED_FIELD_NUMBER: _ClassVar[int]
    holders_asked: int
    def __init__(self, holders_asked: _Optional[int] = ...) -> None: ...

class DescribeLockRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeLockResponse(_message.Message):
    __slots__ = ("name", "holders", "waiters", "limit", "used_weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    USED_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    holders: _containers.RepeatedCompositeFieldContainer[LockRequestInfo]
    waiters: _containers.RepeatedCompositeFieldContainer[LockRequestInfo]
    limit: int
    used_weight: int
    def __init__(self, name: _Optional[str] = ..., holders: _Optional[_Iterable[_Union[LockRequestInfo, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[LockRequestInfo, _Mapping]]] = ..., limit: _Optional[int] = ..., used_weight: _Optional[int] = ...) -> None: ...

class LockRequestInfo(_message.Message):
    __slots__ = ("mode", "owner", "fencing_token", "requested_at", "instance", "peer", "value", "weight")
    MODE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    mode: LockMode
    owner: str
    fencing_token: int
    requested_at: _timestamp_pb2.Timestamp
    instance: str
    peer: str
    value: bytes
    weight: int
    def __init__(self, mode: _Optional[_Union[LockMode, str]] = ..., owner: _Optional[str] = ..., fencing_token: _Optional[int] = ..., requested_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., instance: _Optional[str] = ..., peer: _Optional[str] = ..., value: _Optional[bytes] = ..., weight: _Optional[int] = ...) -> None: ...

class ListLocksRequest(_message.Message):
    __slots__ = ("prefix", "page_size", "page_token")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    page_size: int
    page_token: str
    def __init__(self, prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListLocksResponse(_message.Message):
    __slots__ = ("locks", "next_page_token")
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[LockSummary]
    next_page_token: str
    def __init__(self, locks: _Optional[_Iterable[_Union[LockSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LockSummary(_message.Message):
    __slots__ = ("name", "holders", "waiters", "held_mode", "limit", "used_weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    HELD_MODE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    USED_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    holders: int
    waiters: int
    held_mode: LockMode
    limit: int
    used_weight: int
    def __init__(self, name: _Optional[str] = ..., holders: _Optional[int] = ..., waiters: _Optional[int] = ..., held_mode: _Optional[_Union[LockMode, str]] = ..., limit: _Optional[int] = ..., used_weight: _Optional[int] = ...) -> None: ...

class CheckTokenRequest(_message.Message):
    __slots__ = ("name", "fencing_token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    fencing_token: int
    def __init__(self, name: _Optional[str] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class CheckTokenResponse(_message.Message):
    __slots__ = ("held",)
    HELD_FIELD_NUMBER: _ClassVar[int]
    held: bool
    def __init__(self, held: _Optional[bool] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ("start", "release", "resume", "heartbeat", "set_value", "downgrade")
    START_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SET_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOWNGRADE_FIELD_NUMBER: _ClassVar[int]
    start: AcquireStart
    release: AcquireRelease
    resume: AcquireResume
    heartbeat: AcquireHeartbeat
    set_value: AcquireSetValue
    downgrade: AcquireDowngrade
    def __init__(self, start: _Optional[_Union[AcquireStart, _Mapping]] = ..., release: _Optional[_Union[AcquireRelease, _Mapping]] = ..., resume: _Optional[_Union[AcquireResume, _Mapping]] = ..., heartbeat: _Optional[_Union[AcquireHeartbeat, _Mapping]] = ..., set_value: _Optional[_Union[AcquireSetValue, _Mapping]] = ..., downgrade: _Optional[_Union[AcquireDowngrade, _Mapping]] = ...) -> None: ...

class AcquireDowngrade(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireDowngraded(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireStart(_message.Message):
    __slots__ = ("name", "mode", "wait_timeout", "owner", "resume_grace", "heartbeat_interval", "value", "limit", "weight", "locks")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESUME_GRACE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mode: LockMode
    wait_timeout: _duration_pb2.Duration
    owner: str
    resume_grace: _duration_pb2.Duration
    heartbeat_interval: _duration_pb2.Duration
    value: bytes
    limit: int
    weight: int
    locks: _containers.RepeatedCompositeFieldContainer[LockTarget]
    def __init__(self, name: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ..., resume_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., value: _Optional[bytes] = ..., limit: _Optional[int] = ..., weight: _Optional[int] = ..., locks: _Optional[_Iterable[_Union[LockTarget, _Mapping]]] = ...) -> None: ...

class LockTarget(_message.Message):
    __slots__ = ("name", "mode", "limit", "weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    mode: LockMode
    limit: int
    weight: int
    def __init__(self, name: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., limit: _Optional[int] = ..., weight: _Optional[int] = ...) -> None: ...

class LockToken(_message.Message):
    __slots__ = ("name", "fencing_token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    fencing_token: int
    def __init__(self, name: _Optional[str] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class AcquireSetValue(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    def __init__(self, value: _Optional[bytes] = ...) -> None: ...

class AcquireValueSet(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireResume(_message.Message):
    __slots__ = ("resume_token", "heartbeat_interval")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, resume_token: _Optional[str] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AcquireHeartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireRelease(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ("queued", "acquired", "released", "in_doubt", "confirmed", "resumable", "heartbeat", "revoke_requested", "value_set", "downgraded")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    IN_DOUBT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    RESUMABLE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    REVOKE_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    VALUE_SET_FIELD_NUMBER: _ClassVar[int]
    DOWNGRADED_FIELD_NUMBER: _ClassVar[int]
    queued: AcquireQueued
    acquired: AcquireAcquired
    released: AcquireReleased
    in_doubt: AcquireInDoubt
    confirmed: AcquireConfirmed
    resumable: AcquireResumable
    heartbeat: AcquireHeartbeat
    revoke_requested: AcquireRevokeRequested
    value_set: AcquireValueSet
    downgraded: AcquireDowngraded
    def __init__(self, queued: _Optional[_Union[AcquireQueued, _Mapping]] = ..., acquired: _Optional[_Union[AcquireAcquired, _Mapping]] = ..., released: _Optional[_Union[AcquireReleased, _Mapping]] = ..., in_doubt: _Optional[_Union[AcquireInDoubt, _Mapping]] = ..., confirmed: _Optional[_Union[AcquireConfirmed, _Mapping]] = ..., resumable: _Optional[_Union[AcquireResumable, _Mapping]] = ..., heartbeat: _Optional[_Union[AcquireHeartbeat, _Mapping]] = ..., revoke_requested: _Optional[_Union[AcquireRevokeRequested, _Mapping]] = ..., value_set: _Optional[_Union[AcquireValueSet, _Mapping]] = ..., downgraded: _Optional[_Union[AcquireDowngraded, _Mapping]] = ...) -> None: ...

class AcquireQueued(_message.Message):
    __slots__ = ("ahead",)
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    ahead: int
    def __init__(self, ahead: _Optional[int] = ...) -> None: ...

class AcquireAcquired(_message.Message):
    __slots__ = ("fencing_token", "tokens")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    tokens: _containers.RepeatedCompositeFieldContainer[LockToken]
    def __init__(self, fencing_token: _Optional[int] = ..., tokens: _Optional[_Iterable[_Union[LockToken, _Mapping]]] = ...) -> None: ...

class AcquireReleased(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireInDoubt(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireConfirmed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireRevokeRequested(_message.Message):
    __slots__ = ("reason", "force_at")
    REASON_FIELD_NUMBER: _ClassVar[int]
    FORCE_AT_FIELD_NUMBER: _ClassVar[int]
    reason: str
    force_at: _timestamp_pb2.Timestamp
    def __init__(self, reason: _Optional[str] = ..., force_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AcquireResumable(_message.Message):
    __slots__ = ("resume_token", "resume_grace")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESUME_GRACE_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    resume_grace: _duration_pb2.Duration
    def __init__(self, resume_token: _Optional[str] = ..., resume_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("open", "resume", "acquire", "release", "cancel", "heartbeat", "set_value", "downgrade")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SET_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOWNGRADE_FIELD_NUMBER: _ClassVar[int]
    open: SessionOpen
    resume: SessionResume
    acquire: SessionAcquire
    release: SessionRelease
    cancel: SessionCancel
    heartbeat: AcquireHeartbeat
    set_value: SessionSetValue
    downgrade: SessionDowngrade
    def __init__(self, open: _Optional[_Union[SessionOpen, _Mapping]] = ..., resume: _Optional[_Union[SessionResume, _Mapping]] = ..., acquire: _Optional[_Union[SessionAcquire, _Mapping]] = ..., release: _Optional[_Union[SessionRelease, _Mapping]] = ..., cancel: _Optional[_Union[SessionCancel, _Mapping]] = ..., heartbeat: _Optional[_Union[AcquireHeartbeat, _Mapping]] = ..., set_value: _Optional[_Union[SessionSetValue, _Mapping]] = ..., downgrade: _Optional[_Union[SessionDowngrade, _Mapping]] = ...) -> None: ...

class SessionDowngrade(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    def __init__(self, request_id: _Optional[int] = ...) -> None: ...

class SessionOpen(_message.Message):
    __slots__ = ("resume_grace", "heartbeat_interval")
    RESUME_GRACE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    resume_grace: _duration_pb2.Duration
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, resume_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SessionResume(_message.Message):
    __slots__ = ("resume_token", "heartbeat_interval")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, resume_token: _Optional[str] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SessionAcquire(_message.Message):
    __slots__ = ("request_id", "name", "mode", "wait_timeout", "owner", "value", "limit", "weight", "locks")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    name: str
    mode: LockMode
    wait_timeout: _duration_pb2.Duration
    owner: str
    value: bytes
    limit: int
    weight: int
    locks: _containers.RepeatedCompositeFieldContainer[LockTarget]
    def __init__(self, request_id: _Optional[int] = ..., name: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ..., value: _Optional[bytes] = ..., limit: _Optional[int] = ..., weight: _Optional[int] = ..., locks: _Optional[_Iterable[_Union[LockTarget, _Mapping]]] = ...) -> None: ...

class SessionSetValue(_message.Message):
    __slots__ = ("request_id", "value")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    value: bytes
    def __init__(self, request_id: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class SessionRelease(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    def __init__(self, request_id: _Optional[int] = ...) -> None: ...

class SessionCancel(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    def __init__(self, request_id: _Optional[int] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("request_id", "opened", "resumed", "queued", "acquired", "released", "in_doubt", "confirmed", "revoke_requested", "ended", "heartbeat", "value_set", "downgraded")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OPENED_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    IN_DOUBT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    REVOKE_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    VALUE_SET_FIELD_NUMBER: _ClassVar[int]
    DOWNGRADED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    opened: SessionOpened
    resumed: SessionResumed
    queued: AcquireQueued
    acquired: AcquireAcquired
    released: AcquireReleased
    in_doubt: AcquireInDoubt
    confirmed: AcquireConfirmed
    revoke_requested: AcquireRevokeRequested
    ended: SessionRequestEnded
    heartbeat: AcquireHeartbeat
    value_set: AcquireValueSet
    downgraded: AcquireDowngraded
    def __init__(self, request_id: _Optional[int] = ..., opened: _Optional[_Union[SessionOpened, _Mapping]] = ..., resumed: _Optional[_Union[SessionResumed, _Mapping]] = ..., queued: _Optional[_Union[AcquireQueued, _Mapping]] = ..., acquired: _Optional[_Union[AcquireAcquired, _Mapping]] = ..., released: _Optional[_Union[AcquireReleased, _Mapping]] = ..., in_doubt: _Optional[_Union[AcquireInDoubt, _Mapping]] = ..., confirmed: _Optional[_Union[AcquireConfirmed, _Mapping]] = ..., revoke_requested: _Optional[_Union[AcquireRevokeRequested, _Mapping]] = ..., ended: _Optional[_Union[SessionRequestEnded, _Mapping]] = ..., heartbeat: _Optional[_Union[AcquireHeartbeat, _Mapping]] = ..., value_set: _Optional[_Union[AcquireValueSet, _Mapping]] = ..., downgraded: _Optional[_Union[AcquireDowngraded, _Mapping]] = ...) -> None: ...

class SessionOpened(_message.Message):
    __slots__ = ("resume_token", "resume_grace")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESUME_GRACE_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    resume_grace: _duration_pb2.Duration
    def __init__(self, resume_token: _Optional[str] = ..., resume_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SessionResumed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionRequestEnded(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...
