"""The invariant checkers: pure folds over one history, shared by the simulator, the runtime and the conformance kit.

A history is core `Event`s (every contract call, accepted or refused) with
three kinds of entry a store cannot see (`history.Landed`: an effect at a
provider; `history.Fault`: what broke and until when; `history.Retired`: a
task's final records). `rules` holds one checker per invariant of
`spec/invariants.toml`; each folds entries and gives a `Verdict` (ok,
violated with the entries that show it, or unknown). `measures` is the one
fold of the figures every driver reports beside the verdicts: time to
detect, time to recover, duplicate effects. `recovery` is where a world's
recovery after a trigger is judged, with one meaning (goodput back at a level
for a number of series windows in a row): the `goodput_recovers` verdict and
the lab's phase maps both ask it.

They belong to no world: nothing here imports SimPy, the simulator or the
runtime, and the rules read only the core's record types, so they judge the
core rather than repeat it. `shiftchange.sim` feeds them a simulated run as it
plays; `judge` feeds them any store's history and a provider's ledger, which
is how `shiftchange chaos` judges real processes (the conformance kit
re-exports it).
"""

from .history import OK, UNKNOWN, VIOLATED, CheckContext, Verdict, invariant_rows, tally
from .judge import Judge, LedgerEntry, context_for, judge, ledger_from
from .measures import Measures, Strike
from .rules import INVARIANTS

__all__ = [
    "INVARIANTS",
    "OK",
    "UNKNOWN",
    "VIOLATED",
    "CheckContext",
    "Judge",
    "LedgerEntry",
    "Measures",
    "Strike",
    "Verdict",
    "context_for",
    "invariant_rows",
    "judge",
    "ledger_from",
    "tally",
]
