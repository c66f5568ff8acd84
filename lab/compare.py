"""What a proposed change does when it runs: the base and the proposal on trial alike, their verdicts side by side.

`compare(base, proposal, scale)` runs both trials with every check (none
stops early), lines up each (check, invariant) verdict of the two, and for
every invariant the proposal violates where the base holds it keeps the
shortest counterexample: the explorer's path when a search found it (a
shortest path, breadth-first), else the simulator's run, shrunk. `broken` is
what `spec diff --run` exits 1 for; `change_run` is the review page's
section "What this change does" (`spec.review.ChangeRun`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.history import OK, VIOLATED
from shiftchange.spec.model import Spec
from shiftchange.spec.review import ChangeExample, ChangeRun

from .trial import CHECKS, STRUCTURE, Counterexample, Scale, Trial, run_trial

__all__ = ["Comparison", "compare"]


@dataclass(frozen=True)
class Comparison:
    base: Trial
    proposal: Trial
    verdicts: tuple[tuple[str, str, str, str], ...]
    """(check, name, the base's status, the proposal's), in check order; "" where one side has no such verdict."""
    broken: tuple[tuple[str, str], ...]
    """(check, name): ok in the base, violated in the proposal."""
    fixed: tuple[tuple[str, str], ...]
    """(check, name): violated in the base, ok in the proposal."""
    examples: tuple[Counterexample, ...]
    """The shortest counterexample of each invariant the proposal breaks (explorer or simulator), one per invariant."""

    @property
    def elapsed_s(self) -> float:
        return self.base.elapsed_s + self.proposal.elapsed_s

    def lines(self) -> list[str]:
        """The text `spec diff --run` prints: the scale, the verdicts that differ or fail, and each broken invariant's story."""
        lines = [
            f"run: base {self.base.label} and proposal {self.proposal.label}, every check, {self.elapsed_s:.1f} s",
            *(f"  {line}" for line in self.base.scale.lines()),
        ]
        for trial, name in ((self.base, "base"), (self.proposal, "proposal")):
            spent = ", ".join(f"{run.check} {run.runs} runs {run.elapsed_s:.1f} s" for run in trial.checks)
            lines.append(f"  {name}: {spent}")
        width = max((len(name) for _check, name, _b, _p in self.verdicts), default=10)
        differing = [row for row in self.verdicts if row[2] != OK or row[3] != OK]
        held = len(self.verdicts) - len(differing)
        lines += ["", f"verdicts: {held} ok in both" + (", the others side by side (base -> proposal):" if differing else "")]
        for check, name, base, proposal in differing:
            mark = "BROKEN" if (check, name) in self.broken else "fixed" if (check, name) in self.fixed else ""
            lines.append(f"  {check:<9} {name:<{width}}  {base or '-':>8} -> {proposal or '-':<8} {mark}".rstrip())
        if not self.broken:
            lines += ["", "the proposal breaks no verdict the base holds"]
        else:
            shown = ", ".join(f"{check} {name}" for check, name in self.broken)
            lines += ["", f"the proposal breaks {len(self.broken)} verdict(s) the base holds: {shown}"]
        for example in self.examples:
            lines += ["", f"{example.invariant} broken: shortest counterexample {example.size_text}, {example.found_in}"]
            lines += [f"  {line}" for line in example.example[:4]]
            if example.timeline:
                lines += ["", *example.timeline.rstrip().splitlines()]
            lines += ["", "replay:", *(f"  {command}" for command in example.replay)]
        return lines

    def change_run(self) -> ChangeRun:
        examples = tuple(
            ChangeExample(e.invariant, e.check, e.found_in, e.size_text, e.example, e.timeline, e.replay) for e in self.examples
        )
        return ChangeRun(
            self.base.label,
            self.proposal.label,
            tuple(self.base.scale.lines()),
            self.verdicts,
            tuple(f"{check} {name}" for check, name in self.broken),
            examples,
            self.elapsed_s,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "scale": self.base.scale.to_json(),
            "base": self.base.to_json(),
            "proposal": self.proposal.to_json(),
            "verdicts": [{"check": c, "name": n, "base": b or None, "proposal": p or None} for c, n, b, p in self.verdicts],
            "broken": [{"check": c, "name": n} for c, n in self.broken],
            "fixed": [{"check": c, "name": n} for c, n in self.fixed],
            "counterexamples": [example.to_json() for example in self.examples],
            "elapsed_s": round(self.elapsed_s, 3),
        }


def compare(base: Spec, proposal: Spec, scale: Scale | None = None, *, base_label: str, proposal_label: str) -> Comparison:
    """Both specs on trial with every check, at one scale; labels name each in its replay commands (a folder or a revision)."""
    scale = Scale() if scale is None else scale
    old = run_trial(base, scale, label=base_label)
    new = run_trial(proposal, scale, label=proposal_label)
    before, after = old.verdicts(), new.verdicts()
    keys = sorted(dict.fromkeys([*before, *after]), key=lambda key: CHECKS.index(key[0]))
    verdicts = tuple((check, name, _status(before, check, name), _status(after, check, name)) for check, name in keys)
    broken = tuple((check, name) for check, name, was, now in verdicts if was in (OK, "") and now == VIOLATED)
    fixed = tuple((check, name) for check, name, was, now in verdicts if was == VIOLATED and now == OK)
    examples: dict[str, Counterexample] = {}
    for check, name in broken:
        if check == STRUCTURE or name in examples:
            continue
        shortest = new.shortest(name)
        if shortest is not None:
            examples[name] = shortest
    return Comparison(old, new, verdicts, broken, fixed, tuple(examples.values()))


def _status(verdicts: dict[tuple[str, str], Any], check: str, name: str) -> str:
    found = verdicts.get((check, name))
    return "" if found is None else found.status
