"""The states the core names, and which of them end a record: the one list the stores, the vocabulary and the tables share.

A table may move between these states as it likes; it may not add or drop
one, or make a terminal state non-terminal (`vocabulary.check` refuses it when
the table is compiled). So the stores can know, without compiling a spec,
which Attempts are immutable evidence.
"""

from __future__ import annotations

ATTEMPT_STATES = frozenset(
    {
        "queued", "admitted", "claimed", "running", "suspect", "reconciling", "verifying", "cancelling", "succeeded",
        "failed", "cancelled", "blocked", "quarantined",
    }
)  # fmt: skip
ATTEMPT_TERMINAL = frozenset({"succeeded", "failed", "cancelled", "blocked", "quarantined"})
"""A terminal Attempt is immutable evidence: no store lets it be written again."""

TASK_STATES = frozenset({"inbox", "ready", "in_progress", "review", "done", "blocked", "escalated", "quarantined", "cancelled"})
TASK_TERMINAL = frozenset({"done", "cancelled"})
