from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PutRecordRequest(_message.Message):
    __slots__ = ("name", "key", "value", "fencing_token", "expected_revision", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    value: bytes
    fencing_token: int
    expected_revision: int
    request_id: bytes
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[bytes] = ..., fencing_token: _Optional[int] = ..., expected_revision: _Optional[int] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class PutRecordResponse(_message.Message):
    __slots__ = ("revision",)
    REVISION_FIELD_NUMBER: _ClassVar[int]
    revision: int
    def __init__(self, revision: _Optional[int] = ...) -> None: ...

class GetRecordRequest(_message.Message):
    __slots__ = ("name", "key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class GetRecordResponse(_message.Message):
    __slots__ = ("found", "value", "revision")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    revision: int
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ..., revision: _Optional[int] = ...) -> None: ...

class DeleteRecordRequest(_message.Message):
    __slots__ = ("name", "key", "fencing_token", "expected_revision")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    fencing_token: int
    expected_revision: int
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., fencing_token: _Optional[int] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class DeleteRecordResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...
