"""The reference core: records, the contracts, stores and policy, sans-I/O.

Public surface: `Orchestrator` runs the contracts over a `Store`
(`MemoryStore`, `SQLiteStore`), a `Clock` and a `ProviderAdapter`; the
records and result types are re-exported here. Nothing in this package
sleeps, reads the wall clock, starts threads or draws unseeded randomness
(lease tokens come from `secrets`, which is the point of them).
"""

from .admission import AdmissionController, AdmissionDecision
from .backoff import Backoff
from .breaker import Breaker, Breakers
from .clock import Clock, ManualClock
from .config import (
    AdmissionConfig,
    BackoffConfig,
    BreakerConfig,
    CoreConfig,
    Fallback,
    RateLimitConfig,
    ReliabilityConfig,
    RetryBudgetConfig,
)
from .errors import CoreError, InputError, NotFound, StoreConflict, StoreError
from .orchestrator import Accepted, Claim, Grant, Orchestrator, Reconciliation, Refused, Renewal, mint_key
from .policy import Decision
from .provider import Effect, LedgerProvider, ProviderAdapter, ProviderRefused, ProviderTimeout
from .rate_limit import RateLimiter, TokenBucket
from .records import Attempt, Budget, Event, Intent, Lease, Manifest, Plan, Task
from .retry_budget import RetryBudget, RetryBudgets
from .store import MemoryStore, Store, Transaction

__all__ = [
    "Accepted",
    "AdmissionConfig",
    "AdmissionController",
    "AdmissionDecision",
    "Attempt",
    "Backoff",
    "BackoffConfig",
    "Breaker",
    "BreakerConfig",
    "Breakers",
    "Budget",
    "Claim",
    "Clock",
    "CoreConfig",
    "CoreError",
    "Decision",
    "Effect",
    "Event",
    "Fallback",
    "Grant",
    "InputError",
    "Intent",
    "Lease",
    "LedgerProvider",
    "Manifest",
    "ManualClock",
    "MemoryStore",
    "NotFound",
    "Orchestrator",
    "Plan",
    "ProviderAdapter",
    "ProviderRefused",
    "ProviderTimeout",
    "RateLimitConfig",
    "RateLimiter",
    "Reconciliation",
    "Refused",
    "ReliabilityConfig",
    "Renewal",
    "RetryBudget",
    "RetryBudgetConfig",
    "RetryBudgets",
    "Store",
    "StoreConflict",
    "StoreError",
    "Task",
    "TokenBucket",
    "Transaction",
    "mint_key",
]
