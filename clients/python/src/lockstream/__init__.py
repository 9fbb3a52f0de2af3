"""lockstream: the Python client of the lockstream lock server.

    with lockstream.Client("127.0.0.1:50051") as client:
        with client.lock("reports/daily", mode="write", timeout=30) as lock:
            ...  # lock.token, lock.lost

`lockstream.aio` is the same on asyncio.
"""

from lockstream import aio
from lockstream._sync import Client, Lock
from lockstream.aio import Target
from lockstream.errors import ClientClosed, LockError, LockLost, LockTimeout, NotHeld, PermissionDenied

__all__ = [
    "Client",
    "ClientClosed",
    "Lock",
    "LockError",
    "LockLost",
    "LockTimeout",
    "NotHeld",
    "PermissionDenied",
    "Target",
    "aio",
]
