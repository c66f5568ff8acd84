"""The conformance kit: the suites a port of the store or the core must pass, installed with the package.

Trio's `check_one_way_stream(maker)` is the model: the contract tests ship
with the library, as functions of a factory, so every implementation of an
interface is held to the same suite. Public surface:

- `check_store(make_store, reopen=None)`: the transactional contract of a
  `Store`, every method of the protocol called (the claim queue, `tasks_in`,
  the leader leases); with `reopen(store)`, which opens a second handle on
  the data a store holds, also isolation between two handles, a writer that
  waits, and concurrent claimers (for a store several processes share);
- `check_contracts(make_orchestrator)`: every contract rule of the chapter,
  for an orchestrator the factory builds (`rig.OrchestratorFactory`; a store
  port plugs in with `reference_orchestrator(make_store)`);
- `orchestrator_machine(make_orchestrator)` and `run_machine`: the Hypothesis
  stateful machine over that factory (needs Hypothesis: `shiftchange[testing]`);
- `judge(events, ledger, store)`: the checkers (`shiftchange.checkers.judge`) over any
  store's history and a provider's ledger (`LedgerEntry`, `ledger_from`).

Each suite returns a `Report` (a `CheckResult` per check, passed, failed or
skipped; `raise_for_failures` turns a failed one into an exception), and
`store_checks()`, `shared_store_checks()` (functions of a `SharedStore`) and
`contract_checks()` give the checks one by one, each raising `Violation`
(or `Skipped`), for a test runner to run separately. Nothing here needs pytest.
"""

from typing import Any

from .checks import Check, CheckResult, Report, Skipped, Violation
from .contracts import check_contracts, contract_checks
from .judge import INVARIANTS, CheckContext, Judge, LedgerEntry, Verdict, context_for, judge, ledger_from
from .rig import OrchestratorFactory, reference_orchestrator
from .stores import SharedStore, check_store, shared_store_checks, store_checks

__all__ = [
    "INVARIANTS",
    "Check",
    "CheckContext",
    "CheckResult",
    "Judge",
    "LedgerEntry",
    "OrchestratorFactory",
    "OrchestratorMachine",
    "Report",
    "SharedStore",
    "Skipped",
    "Verdict",
    "Violation",
    "check_contracts",
    "check_store",
    "context_for",
    "contract_checks",
    "judge",
    "ledger_from",
    "orchestrator_machine",
    "reference_orchestrator",
    "run_machine",
    "shared_store_checks",
    "store_checks",
]

_STATEFUL = frozenset({"OrchestratorMachine", "orchestrator_machine", "run_machine"})


def __getattr__(name: str) -> Any:
    """The stateful machine is imported on first use, so the store and contract suites work without Hypothesis installed."""
    if name not in _STATEFUL:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from . import stateful
    except ModuleNotFoundError as error:
        if error.name != "hypothesis":
            raise
        raise ImportError(f"shiftchange.testing.{name} needs Hypothesis: pip install 'shiftchange[testing]'") from error
    return getattr(stateful, name)
