"""The reference core: records, the contracts, stores and policy, sans-I/O.

Public surface: `Orchestrator` runs the contracts over a `Store`
(`MemoryStore` here; the SQLite and PostgreSQL adapters and `open_store` are
`shiftchange.stores`), a `Clock` and a `ProviderAdapter`, with the
rules it may swap passed as `Seams`; the records and result types (a
`Refused` carries one of `REFUSAL_CODES`) are re-exported here. Nothing in this package
imports a database driver, sleeps, reads the wall clock, starts threads or draws unseeded randomness
(lease tokens come from `secrets`, which is the point of them).
"""

from .admission import AdmissionController, AdmissionDecision
from .backoff import Backoff
from .breaker import Breaker, Breakers
from .clock import Clock, ManualClock
from .concurrency import ConcurrencyLimit, ConcurrencyLimits
from .config import (
    AdmissionConfig,
    BackoffConfig,
    BreakerConfig,
    ConcurrencyLimitConfig,
    CoreConfig,
    Fallback,
    RateLimitConfig,
    ReliabilityConfig,
    RetryBudgetConfig,
)
from .errors import CoreError, InputError, NotFound, StoreConflict, StoreContention, StoreError, StoreRetryable, StoreUnavailable
from .fence import Fence, LeaseFence
from .gateway import ToolCall
from .limits import LIMITS, StoreLimits
from .orchestrator import Orchestrator
from .policy import Decision
from .provider import Effect, LedgerProvider, ProviderAdapter, ProviderRefused, ProviderTimeout
from .rate_limit import RateLimiter, TokenBucket
from .records import Attempt, Budget, Event, Intent, Leader, Lease, Manifest, Plan, Task
from .results import REFUSAL_CODES, Accepted, Claim, Grant, Reconciliation, Refused, Renewal, Result
from .retry_budget import RetryBudget, RetryBudgets
from .seams import KeyRequest, Seams, mint_key
from .store import Durability, MemoryStore, Store, Transaction
from .tasks import SUBMISSIONS_MAX, Submission

__all__ = [
    "LIMITS",
    "REFUSAL_CODES",
    "SUBMISSIONS_MAX",
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
    "ConcurrencyLimit",
    "ConcurrencyLimitConfig",
    "ConcurrencyLimits",
    "CoreConfig",
    "CoreError",
    "Decision",
    "Durability",
    "Effect",
    "Event",
    "Fallback",
    "Fence",
    "Grant",
    "InputError",
    "Intent",
    "KeyRequest",
    "Leader",
    "Lease",
    "LeaseFence",
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
    "Result",
    "RetryBudget",
    "RetryBudgetConfig",
    "RetryBudgets",
    "Seams",
    "Store",
    "StoreConflict",
    "StoreContention",
    "StoreError",
    "StoreLimits",
    "StoreRetryable",
    "StoreUnavailable",
    "Submission",
    "Task",
    "TokenBucket",
    "ToolCall",
    "Transaction",
    "mint_key",
]
