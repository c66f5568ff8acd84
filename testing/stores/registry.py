"""The store suite's registry and what every check shares: the factory and reopen types, the waits, the text a store
must hold exactly, and the two lists the checks join in the order they are defined."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shiftchange.core import (
    Store,
)

StoreFactory = Callable[[], Store]
Reopen = Callable[[Store], Store]
"""Opens a second handle on the data a store holds (another connection to its file, schema or server), as another process would."""

SETTLE_S = 0.2
"""How long a check lets the other handle run before it looks whether that handle has failed (it must not have)."""
DONE_WAIT_S = 10.0
"""The most a check waits for the other handle to finish once nothing holds it up: reached only by a store that hangs."""
CLAIMERS_TASKS = 8
"""How many admitted Attempts two concurrent claimers share out."""

LIMIT_EXAMPLES = 25
"""How many examples Hypothesis draws for each check of values at their limits, after the fixed ones."""
TODAY_S = 1_800_000_000.0
"""A time at today's epoch magnitude (January 2027, in Unix seconds): where a real store's times are."""

CLOCK_EPOCH_TOLERANCE_S = 1.0
"""How far a store's clock may read from the kit's wall clock (less its declared `clock_epoch_offset_s`)."""
CLOCK_WATCH_S = 0.5
"""How long the kit watches a store's clock advance."""
CLOCK_RATE_TOLERANCE = 0.1
"""How far, as a fraction of real time, a store's clock may drift over the watch (plus `CLOCK_JITTER_S`)."""
CLOCK_JITTER_S = 0.05
"""The reading error the kit allows a store's clock: a round trip to its server."""
CLOCK_AGREEMENT_S = 0.05
"""How far two handles' readings of the store's clock, taken together, may differ."""

SCALE_ROWS = 2_500
"""Tasks, and Attempts, the scale check writes: well past the page sizes of paginated backends (100, 1,000)."""
SCALE_CHILDREN = 1_100
"""Attempts of one task, intents of one Attempt and events of one task the scale check writes."""
SCALE_BATCH = 500
"""Records per transaction while the scale check seeds its store."""
AGE_LEAD_S = 0.25
"""How far ahead of the wall clock the kit writes the times of rows it then lets real time overtake."""
AGE_PAST_S = 0.5
"""The least time the kit lets pass after those times (a backend whose clock runs a little behind the kit's has passed them too)."""
AGE_MARGIN_S = 0.05
"""How far past the next whole second after those times the kit waits (a TTL kept in whole seconds has passed too)."""

ATOMIC_WRITES = 600
"""Writes in the transaction that must commit whole or not at all."""
KILLED_WRITES = 300
"""Writes a child process makes in the transaction it is killed in."""
HISTORY_WAIT_S = 10.0
"""The most the kit waits for store.events() inside the handle's own open transaction (a store that waits for itself)."""
LOCK_TIMEOUT_SLACK_S = 1.0
"""Past the store's stated lock timeout (and half as much again), how long a blocked writer may take to get its error."""

TERMINAL_STATES = ("blocked", "cancelled", "failed", "quarantined", "succeeded")
"""The Attempt machine's terminal states (spec/attempt.toml); a store refuses any write to an Attempt in one."""

AWKWARD_TEXT: tuple[str, ...] = (
    "",
    " ",
    "'",
    '"',
    "\\",
    "x'); DROP TABLE tasks; --",
    "%s ? :name $1",
    "NULL",
    "None",
    "0",
    "a\x00b",
    "\n\r\t\x0b\x0c",
    "\u2028\u2029",
    "\ufeffbom",
    "caf\u00e9",
    "cafe\u0301",
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
    "\U0001f680\U0001f469\u200d\U0001f4bb",
    "\U0010ffff",
    "x" * 100_000,
)
"""Valid Unicode a store must hold exactly: quotes, SQL, NUL, line breaks, both forms of é, RTL, emoji, U+10FFFF, 100k characters."""

UNENCODABLE_TEXT = ("\ud800", "lone \udfff surrogate")
"""Strings no UTF-8 codec can encode (lone surrogates): a store keeps them exactly, or refuses them with InputError."""


@dataclass(frozen=True, slots=True)
class SharedStore:
    """What the two-handle checks are functions of: the factory of fresh stores, and how to open a second handle on one."""

    make_store: StoreFactory
    reopen: Reopen
