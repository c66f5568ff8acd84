"""The states the core names, and which of them end a record: the one list the stores, the vocabulary and the tables share.

A table may move between these states as it likes; it may not add or drop
one, or change which end a record or rest (`vocabulary.check` refuses it when
the table is compiled). So the stores, the agent and the drivers can know,
without compiling a spec, which Attempts are immutable evidence and which
tasks are at rest.
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
TASK_RESTING = frozenset({"blocked", "escalated", "quarantined"})
"""A task resting here waits for an operator: only a release moves it."""
TASK_AT_REST = TASK_TERMINAL | TASK_RESTING
"""Where a task stays until someone acts: ended, or resting."""
