"""The transition table compiled to a plain lookup for `core`'s hot path.

`core` asks one question per contract call: from this state, does this
trigger have an enabled row, and where does it lead? A dict keyed by
(state, trigger) answers it with one lookup and a few set tests, with no
framework in the loop. The `transitions` Machine built from the same rows
(`oracle.py`) is the independent interpreter tests compare against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .model import Machine, Row

Holds = Callable[[str], bool]
"""Answers whether a named guard holds for the call being decided."""


class AmbiguousTransition(AssertionError):
    """Two rows are enabled at once: the spec broke determinism (a bug, not input)."""


def _enabled(required: tuple[str, ...], forbidden: tuple[str, ...], holds: Holds) -> bool:
    # Plain loops: this runs for every contract call, and generator expressions cost several times more here.
    for guard in required:
        if not holds(guard):
            return False
    for guard in forbidden:  # noqa: SIM110 - a loop on purpose, see above
        if holds(guard):
            return False
    return True


class CompiledMachine:
    """A (state, trigger) -> candidate rows lookup with guard evaluation."""

    __slots__ = ("_bound", "_fenced_at", "_table", "fenced_triggers", "initial", "name", "states", "terminal", "triggers")

    def __init__(self, machine: Machine) -> None:
        self.name = machine.name
        self.initial = machine.initial
        self.terminal = frozenset(machine.terminal_states)
        self.states = frozenset(machine.states)
        self.triggers = frozenset(machine.triggers)
        table: dict[tuple[str, str], list[tuple[tuple[str, ...], tuple[str, ...], str, Row]]] = {}
        for source, dest, row in machine.edges():
            # In the table's own order, not a frozenset's: a refusal's reason must read the same under every hash seed.
            required = tuple(g for g in row.guards if not g.startswith("!"))
            forbidden = tuple(g[1:] for g in row.guards if g.startswith("!"))
            entry = (required, forbidden, dest, row)
            table.setdefault((source, row.trigger), []).append(entry)
        self._table = {key: tuple(value) for key, value in table.items()}
        self._fenced_at = {key: any(entry[3].fenced for entry in value) for key, value in table.items()}
        self._bound: dict[tuple[str, str], tuple] = {}
        self.fenced_triggers = frozenset(row.trigger for row in machine.rows if row.fenced)
        """Triggers with at least one fenced row: a call of one is addressed, and proved, by the fence."""

    def has(self, state: str, trigger: str) -> bool:
        """Whether the table has any row of `trigger` from `state` (guards aside)."""
        return (state, trigger) in self._table

    def fenced(self, state: str, trigger: str) -> bool:
        """Whether a call of `trigger` from `state` must prove the fence before any guard is asked.

        The rows for (state, trigger) say so; where no row exists the call is
        refused anyway, and the trigger's other rows decide, so that a stale
        caller is told it is stale rather than that no row matched.
        """
        fenced = self._fenced_at.get((state, trigger))
        return trigger in self.fenced_triggers if fenced is None else fenced

    def bind(self, evaluators: Mapping[str, Callable[[Any], bool]]) -> None:
        """Keep, for every row, the evaluators of its guards, so `choose` asks them of a subject with no lookup by name."""
        self._bound = {
            key: tuple(
                (tuple(evaluators[g] for g in required), tuple(evaluators[g] for g in forbidden), dest, row)
                for required, forbidden, dest, row in entries
            )
            for key, entries in self._table.items()
        }

    def choose(self, state: str, trigger: str, subject: Any) -> tuple[str, Row] | None:
        """`fire` with the evaluators given to `bind`, each asked of `subject`: the path a core that has bound them takes.

        The same rows in the same order, each guard asked only until its row
        is decided, so the answer is `fire`'s with `holds(name) =
        evaluators[name](subject)`.
        """
        chosen = None
        for required, forbidden, dest, row in self._bound.get((state, trigger), ()):
            for guard in required:
                if not guard(subject):
                    break
            else:
                for guard in forbidden:
                    if guard(subject):
                        break
                else:
                    if chosen is not None:
                        raise AmbiguousTransition(f"{trigger!r} from {state!r}: rows {chosen[1].where} and {row.where} both enabled")
                    chosen = (dest, row)
        return chosen

    def fire(self, state: str, trigger: str, holds: Holds) -> tuple[str, Row] | None:
        """The destination and row enabled for this call, or None when refused."""
        chosen = None
        for required, forbidden, dest, row in self._table.get((state, trigger), ()):
            if _enabled(required, forbidden, holds):
                if chosen is not None:
                    raise AmbiguousTransition(f"{trigger!r} from {state!r}: rows {chosen[1].where} and {row.where} both enabled")
                chosen = (dest, row)
        return chosen

    def why_refused(self, state: str, trigger: str, holds: Holds) -> str:
        """A short reason for a refusal, for the history."""
        candidates = self._table.get((state, trigger), ())
        if not candidates:
            return f"no {trigger!r} from {state!r}"
        reasons = []
        for required, forbidden, _dest, _row in candidates:
            failing = [g for g in required if not holds(g)] + [f"!{g}" for g in forbidden if holds(g)]
            reasons.append(" and ".join(failing))
        return f"{trigger!r} from {state!r} refused: guard " + " / ".join(reasons) + " not met"

    def failed_guards(self, state: str, trigger: str, holds: Holds) -> tuple[str, ...]:
        """The guards that keep the rows for this call disabled ("!name": a forbidden one that holds); empty when no row exists."""
        failed: dict[str, None] = {}
        for required, forbidden, _dest, _row in self._table.get((state, trigger), ()):
            failed.update(dict.fromkeys(g for g in required if not holds(g)))
            failed.update(dict.fromkeys(f"!{g}" for g in forbidden if holds(g)))
        return tuple(failed)

    def guards_of(self, state: str, trigger: str) -> tuple[str, ...]:
        """Every guard name the rows for this state and trigger consult."""
        names: set[str] = set()
        for required, forbidden, _dest, _row in self._table.get((state, trigger), ()):
            names.update(required, forbidden)
        return tuple(sorted(names))
