"""The kit's `judge`: the checkers' own adapter (`shiftchange.checkers.judge`), re-exported where the kit's users import it.

It moved to the checkers so that a driver that judges a run (`shiftchange
chaos`) needs nothing of the conformance kit; the kit and its stateful
machine keep importing it from here.
"""

from shiftchange.checkers.judge import (
    INVARIANTS,
    OK,
    UNKNOWN,
    VIOLATED,
    CheckContext,
    Judge,
    LedgerEntry,
    Verdict,
    context_for,
    judge,
    ledger_from,
)

__all__ = [
    "INVARIANTS",
    "OK",
    "UNKNOWN",
    "VIOLATED",
    "CheckContext",
    "Judge",
    "LedgerEntry",
    "Verdict",
    "context_for",
    "judge",
    "ledger_from",
]
