"""The same transition rows as a `transitions` Machine: an independent interpreter.

Tests drive this Machine and the compiled lookup with the same calls and
require the same answer, refusals included, so a bug in either shows up as a
disagreement. It is for diagrams and oracles only: `core` never imports this
module, and its hot path uses `compiled.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

from transitions import Machine as TransitionsMachine
from transitions import MachineError

from .model import Machine


class _Model:
    """The object the `transitions` Machine drives; guards are attributes."""


def _attribute(guard: str) -> str:
    return "guard_" + guard


def build_oracle(machine: Machine) -> tuple[TransitionsMachine, _Model]:
    """A `transitions` Machine with one transition per row and source state."""
    model = _Model()
    for guard in machine.guards:
        setattr(model, _attribute(guard), False)
    oracle = TransitionsMachine(
        model=model,
        states=list(machine.states),
        initial=machine.initial,
        auto_transitions=False,
        ignore_invalid_triggers=False,
    )
    for source, dest, row in machine.edges():
        oracle.add_transition(
            row.trigger,
            source,
            dest,
            conditions=[_attribute(g) for g in sorted(row.required)],
            unless=[_attribute(g) for g in sorted(row.forbidden)],
        )
    return oracle, model


def oracle_fire(oracle: TransitionsMachine, model: _Model, state: str, trigger: str, holds: Mapping[str, bool]) -> str | None:
    """Ask the `transitions` Machine where `trigger` leads from `state`; None if refused."""
    for guard, value in holds.items():
        setattr(model, _attribute(guard), value)
    oracle.set_state(state, model=model)
    try:
        moved = model.trigger(trigger)
    except MachineError:
        return None
    return model.state if moved else None
