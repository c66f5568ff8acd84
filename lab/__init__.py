"""The lab over runs: what studies worlds, as opposed to the worlds themselves (`shiftchange.sim`, `shiftchange.explore`).

Runs of the simulator: `run` (one run with every output it was asked for),
`settings` (a config's fields by dotted path), `sweep` (a grid of settings
times seeds into a table), `summary` and `stats`, `phase` (phase maps),
`tune` and `tune_calls` (`sim tune`), `shrink` (minimise a violating run),
`contention` (Brooker's backoff experiment). Runs of any driver: `report`,
one renderer per format over one record of a run (`report.record`,
`report.text`, `report.html`, `report.plot`, `report.coverage`,
`report.artifacts`).

The design review:

`trial.run_trial(spec, Scale(...))` runs a `Spec` value through the
structural check, an exhaustive exploration of small configurations and a
simulation, cheapest first, and returns per-invariant verdicts per check with
each violation's counterexample (the explorer's path or the simulator's run,
the violating task's timeline, replay commands). `mutate.mutate(spec)` puts
every single-point mutant of the table (`mutants.mutants_of`) on trial and
scores the checks by the mutants they kill. `write.write_spec` writes a spec
value as a spec folder, since every replay command names a spec by a folder.

Nothing here is imported by the core, the simulator or the explorer: the lab
drives them, as `shiftchange spec mutate` and `spec diff --run` do.
"""

from .mutants import KINDS, Mutant, MutantError, mutants_of
from .trial import CHECKS, Counterexample, Finding, Scale, Trial, TrialError, run_trial
from .write import SpecWriteError, write_spec

__all__ = [
    "CHECKS",
    "KINDS",
    "Counterexample",
    "Finding",
    "Mutant",
    "MutantError",
    "Scale",
    "SpecWriteError",
    "Trial",
    "TrialError",
    "mutants_of",
    "run_trial",
    "write_spec",
]
