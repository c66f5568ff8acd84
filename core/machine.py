"""The spec's machines compiled once for the core, and the state sets the core asks about.

Everything here is derived from the packaged spec files: a state is terminal
because the table says so, and the sets of states that hold a lease or may be
cancelled follow from the rows, not from a second list kept by hand.
"""

from __future__ import annotations

from shiftchange.spec import CompiledMachine, load_spec

SPEC = load_spec()
ATTEMPT = CompiledMachine(SPEC.attempt)
TASK = CompiledMachine(SPEC.task)

ATTEMPT_TERMINAL = ATTEMPT.terminal
TASK_TERMINAL = TASK.terminal
TASK_RESTING = frozenset(s.name for s in SPEC.task.states.values() if s.resting)
TASK_DISPATCHABLE = frozenset(s.name for s in SPEC.task.states.values() if s.dispatchable)

LEASED = frozenset(source for source, _dest, row in SPEC.attempt.edges() if row.trigger == "renew")
"""States in which a lease is honoured: exactly those a renewal may leave."""

EXPIRABLE = frozenset(source for source, _dest, row in SPEC.attempt.edges() if row.trigger == "expire")
"""States the reaper turns Suspect when the lease expires."""

FENCED = frozenset(row.trigger for row in SPEC.attempt.rows if row.fenced)
"""Triggers whose caller must prove the current lease generation and token."""

ACTIVE = frozenset(SPEC.attempt.states) - ATTEMPT_TERMINAL
"""Non-terminal Attempt states: an Attempt here blocks a retry of its task."""
