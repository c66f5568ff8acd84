"""Wake-ups: an idle worker learns of admitted work without polling the claim queue.

(The PostgreSQL half is being written: until then `idle_wait` waits out its time.)
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

__all__ = ["channel", "idle_wait"]

CHANNEL_PREFIX = "shiftchange_work_"


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel a PostgreSQL store's admissions are announced on (at most 63 bytes, PostgreSQL's limit)."""
    name = CHANNEL_PREFIX + schema
    if len(name) <= 63:
        return name
    return CHANNEL_PREFIX + hashlib.sha256(schema.encode()).hexdigest()[:40]


def idle_wait(store: Any, seconds: float, stop: threading.Event) -> bool:
    """Wait until work may be waiting in `store`, `stop` is set, or `seconds` pass; whether `stop` was set."""
    return stop.wait(max(0.0, seconds))
