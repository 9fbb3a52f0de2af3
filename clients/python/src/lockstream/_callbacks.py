"""Runs the callbacks callers give the client (on_lost, on_queued, ...): what one raises is
logged, never allowed to break the session."""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger("lockstream")


def call_safely(what: str, callback: Callable[..., object], *args: object) -> None:
    """Runs a caller's callback; what it raises is logged, never allowed to break the session."""
    try:
        callback(*args)
    except Exception:
        logger.exception("lockstream: a %s callback raised", what)
