"""`check_contracts(make_orchestrator)`: every contract rule of the chapter, run against any orchestrator the factory builds.

Each check builds its own world from the factory (see `rig.py` for the
protocol): a fresh store, a `ManualClock`, a `LedgerProvider`, the
configuration the rule is stated against. It drives the contracts and checks
what the chapter says must hold, in the records and in the history: every
call, accepted or refused, appends exactly its documented events. A store or
a core that passes the suite can stand in for the reference one.

The suite is three modules by family: authority (dispatch, retry, claim,
renew, complete, the reaper), what happened outside (reconciliation,
idempotency, cancellation, verification), and what may follow (the loop
decision, budgets, bad input, the history).
"""

from __future__ import annotations

from . import contracts_lease, contracts_policy, contracts_recovery
from .checks import Check, Report, run_checks
from .rig import OrchestratorFactory

__all__ = ["check_contracts", "contract_checks"]

_CHECKS: tuple[Check, ...] = (*contracts_lease.CHECKS, *contracts_recovery.CHECKS, *contracts_policy.CHECKS)


def contract_checks() -> tuple[Check, ...]:
    """Every contract check, in the suite's order (each is a function of `make_orchestrator`)."""
    return _CHECKS


def check_contracts(make_orchestrator: OrchestratorFactory) -> Report:
    """Run every contract check against orchestrators from `make_orchestrator` (see `rig.OrchestratorFactory`)."""
    return run_checks("contract", _CHECKS, make_orchestrator)
