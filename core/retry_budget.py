"""Retry budgets: one per dependency, asked at the tool gateway before a call is granted again.

A retry budget caps retries as a share of first calls. Each first call to a
dependency earns `ratio` of a retry credit, up to `burst` credits held; a
retry (a grant for an operation key already granted and never receipted)
spends one credit, and is refused when less than one is held. The budget
starts full. Over any window, then, retries never exceed
ratio x first calls + burst: the credit held at the window's start (at most
burst) plus what the window's calls earned. That is the property the tests
check, and it is what stops retries from multiplying the load on a
dependency that is already failing: a retry storm's amplifier is bounded to
1 + ratio times the calls that would have been made anyway.

Prior art, facts only: gRPC's retry throttling keeps a token count per
server (each failure takes one, each success returns `token_ratio`, and
retries stop below half the maximum); the AWS SDKs' retry quota spends more
credit on a timeout than on an error and refunds on success. Both tie the
budget to outcomes. This one ties it to first calls, as Finagle's
RetryBudget does, because the gateway always knows when a call is first and
need not wait for an outcome that a lost response may never bring.

Like the rate limiter and the breakers, budgets are the orchestrator's
in-memory view of its dependencies: they start fresh when it restarts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .config import RetryBudgetConfig
from .errors import InputError


class RetryBudget:
    """One dependency's retry credit."""

    __slots__ = ("_burst", "_credit", "_ratio")

    def __init__(self, config: RetryBudgetConfig) -> None:
        if not isinstance(config, RetryBudgetConfig):
            raise InputError(f"expected a RetryBudgetConfig, not {type(config).__name__}")
        self._ratio = float(config.ratio)
        self._burst = float(config.burst)
        self._credit = self._burst

    @property
    def credit(self) -> float:
        """Retries the budget would admit now, fractions included."""
        return self._credit

    def allows(self) -> bool:
        """Whether a retry may be granted now (asking spends nothing)."""
        return self._credit >= 1

    def first_call(self) -> None:
        """A first call was granted: it earns `ratio` of a retry, up to `burst` held."""
        self._credit = min(self._burst, self._credit + self._ratio)

    def retry(self) -> bool:
        """Spend one credit for a retry that is granted; False (and nothing spent) when the budget holds less than one."""
        if self._credit < 1:
            return False
        self._credit -= 1
        return True


class _Unbudgeted:
    """A dependency without a retry budget: every retry is allowed."""

    __slots__ = ()
    credit = math.inf

    def allows(self) -> bool:
        return True

    def first_call(self) -> None:
        pass

    def retry(self) -> bool:
        return True


class RetryBudgets:
    """One retry budget per dependency name; `config` None means no budget at all (every retry allowed)."""

    __slots__ = ("_budgets",)

    def __init__(self, names: Mapping[str, object] | list[str] | tuple[str, ...], config: RetryBudgetConfig | None) -> None:
        if isinstance(names, str):
            raise InputError(f"RetryBudgets takes a collection of dependency names, not the one string {names!r}")
        for name in names:
            if not isinstance(name, str) or not name:
                raise InputError(f"a dependency name must be a non-empty string, not {name!r}")
        self._budgets = {name: (_Unbudgeted() if config is None else RetryBudget(config)) for name in names}

    def budget(self, dependency: str) -> RetryBudget | _Unbudgeted:
        """The dependency's budget; an unconfigured dependency is bad input."""
        budget = self._budgets.get(dependency)
        if budget is None:
            known = ", ".join(sorted(self._budgets)) or "none"
            raise InputError(f"no retry budget configured for dependency {dependency!r}; configured: {known}")
        return budget

    def allows(self, dependency: str) -> bool:
        return self.budget(dependency).allows()

    def credit(self, dependency: str) -> float:
        return self.budget(dependency).credit

    def granted(self, dependency: str, retry: bool) -> None:
        """A call to the dependency was granted: a retry spends credit, a first call earns it."""
        budget = self.budget(dependency)
        if retry:
            budget.retry()
        else:
            budget.first_call()
