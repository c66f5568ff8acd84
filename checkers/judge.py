"""`judge(events, ledger)`: the invariant checkers over any store's history and a provider's ledger.

DESIGN's fourth principle is that one checker judges a simulated run and a
real one. The checkers (`rules`) are folds over one history of core
`Event`s, effects that landed, and the final records of each task; the
simulator feeds them as it runs. This module feeds them the same entries
from anywhere else: a deployment's store (its `events()`, and its records
for the final read) and its provider's ledger. It lives with the checkers,
not in the conformance kit, so a driver that judges (`shiftchange chaos`)
needs nothing of the kit; the kit re-exports it for its users.

What a ledger is. The checkers need, for each effect that landed: when, at
which dependency, the provider's id for it, the operation key it came with,
the logical operation (operation and identity, e.g. a PR's head SHA) and the
task it belongs to. That is `LedgerEntry`; a deployment builds one per
effect from its provider's records (a code host's PR list, a payment
processor's idempotency log). `ledger_from` builds them from the core's
`Effect`s (a `LedgerProvider`'s ledger), naming each effect's task from the
intent its key was minted for; an effect with no intent under its key did
not come through the gateway, and says so.

Verdicts are the simulator's: ok, violated (with the entries that show the
first violation, the witness), or unknown (nothing to judge, or a checker
crashed on this history: a crash is never a verdict). `no_lost_tasks` reads
the store as drained: judge a quiescent deployment, or leave it out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from shiftchange.core import CoreConfig, Effect, Event, InputError, ReliabilityConfig, Store

from .history import OK, UNKNOWN, VIOLATED, CheckContext, Landed, Retired, Verdict
from .rules import INVARIANTS, all_checkers

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


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One effect that landed at a provider, as a deployment can record it."""

    at: float
    """When it landed, on the clock the orchestrator's events use."""
    provider_id: str
    key: str
    """The operation key the call carried (the one the gateway minted, if it came through the gateway)."""
    operation: str
    identity: str
    """The logical operation's identity at the provider (a PR's head SHA): two effects of one (operation, identity) are a duplicate."""
    task_id: str
    dependency: str = "code_host"
    worker_id: str = ""
    via_gateway: bool = True
    """False for an effect the deployment knows bypassed the gateway; the checkers also find one by its unminted key."""

    def landed(self) -> Landed:
        return Landed(
            self.at,
            self.dependency,
            self.provider_id,
            self.key,
            self.operation,
            self.identity,
            self.task_id,
            self.worker_id,
            self.via_gateway,
        )


def ledger_from(effects: Iterable[Effect], store: Store, dependency: str = "code_host") -> list[LedgerEntry]:
    """Ledger entries for the core's `Effect`s (a `LedgerProvider`'s `ledger`), each named by the task of the intent its key names.

    An effect whose key has no intent in `store` did not pass the gateway: its
    entry says so (`via_gateway=False`) and names no task.
    """
    entries = []
    for effect in effects:
        intent = store.get_intent(effect.key)
        task_id = intent.task_id if intent is not None else ""
        entries.append(
            LedgerEntry(
                effect.at_s, effect.provider_id, effect.key, effect.operation, effect.identity, task_id, dependency, "", intent is not None
            )
        )
    return entries


def context_for(
    config: CoreConfig | None = None, reliability: ReliabilityConfig | None = None, keyless: Iterable[str] = ()
) -> CheckContext:
    """What the checkers must know of the deployment: its lease TTL, per-Attempt spend ceiling and minimum retry reason, and
    the dependencies that ignore operation keys (`CheckContext.keyless`: there, reconciliation's findings are final)."""
    config = config if config is not None else CoreConfig()
    reliability = reliability if reliability is not None else ReliabilityConfig()
    return CheckContext(config.lease_ttl_s, reliability.attempt_spend_max_usd, config.reason_length_min, frozenset(keyless))


class Judge:
    """The checkers folding one history as it grows; `verdicts` may be asked at any point, and folding goes on after it."""

    def __init__(self, context: CheckContext | None = None, invariants: Iterable[str] | None = None) -> None:
        chosen = INVARIANTS if invariants is None else tuple(invariants)
        unknown = sorted(set(chosen) - set(INVARIANTS))
        if unknown:
            raise InputError(f"no invariant named {', '.join(unknown)}; the invariants are {', '.join(INVARIANTS)}")
        checkers = all_checkers(context if context is not None else context_for())
        self._checkers = [checker for checker in checkers if checker.name in chosen]
        self._crashed: dict[str, str] = {}
        self._task_ids: dict[str, None] = {}
        self._entries = 0
        self._latest_at = 0.0

    def event(self, event: Event) -> None:
        self._task_ids.setdefault(event.task_id, None)
        self._fold("event", event, event.at)

    def landed(self, entry: LedgerEntry | Landed) -> None:
        self._fold("landed", entry.landed() if isinstance(entry, LedgerEntry) else entry, entry.at)

    def verdicts(self, store: Store | None = None) -> dict[str, Verdict]:
        """Each invariant's verdict so far; with `store`, after a final read of every task the history named from it.

        The final read is what the rules about final records (budgets, retry
        classification, the audit, lost tasks) judge; without it they are unknown.
        It is made on copies, so this judge keeps folding afterwards.
        """
        checkers = self._checkers
        if store is not None:
            checkers = [_fork(checker) for checker in checkers]
            for retired in self._final_read(store):
                for checker in checkers:
                    self._call(checker, "retired", retired)
        verdicts = {}
        for checker in checkers:
            crashed = self._crashed.get(checker.name)
            if crashed is None:
                try:
                    verdicts[checker.name] = checker.verdict()
                    continue
                except Exception as error:
                    crashed = f"checker crashed at the verdict: {type(error).__name__}: {error}"
            verdicts[checker.name] = Verdict(checker.name, UNKNOWN, 0, (crashed,))
        return verdicts

    def _final_read(self, store: Store) -> list[Retired]:
        final = []
        for task_id in self._task_ids:
            task = store.get_task(task_id)
            if task is None:
                continue
            attempts = tuple(store.get_attempts(task_id))
            intents = tuple(intent for attempt in attempts for intent in store.get_intents(attempt.attempt_id))
            final.append(Retired(self._latest_at, task, attempts, intents, drained=True))
        return final

    def _fold(self, method: str, entry: object, at: float) -> None:
        self._entries += 1
        self._latest_at = max(self._latest_at, at)
        for checker in self._checkers:
            self._call(checker, method, entry)

    def _call(self, checker: object, method: str, entry: object) -> None:
        name = checker.name  # type: ignore[attr-defined]
        if name in self._crashed:
            return
        try:
            getattr(checker, method)(entry)
        except Exception as error:  # a crashing checker yields unknown, never a crashed judgement
            self._crashed[name] = f"checker crashed on entry {self._entries}: {type(error).__name__}: {error}"


def _fork(checker: object) -> object:
    """A copy of a checker that a final read may consume while the original folds on.

    Two levels deep and no further: a checker's retirement hook drops the
    retired task's state from its own containers and reads that state, but
    writes only the checker's own counters. A deep copy would also copy every
    Event a checker keeps, which costs more than the judgement itself.
    """
    twin = copy.copy(checker)
    for name, value in vars(checker).items():
        if isinstance(value, dict):
            setattr(twin, name, {key: copy.copy(item) for key, item in value.items()})
        elif isinstance(value, list | set):
            setattr(twin, name, copy.copy(value))
    return twin


def judge(
    events: Iterable[Event],
    ledger: Iterable[LedgerEntry | Landed] = (),
    store: Store | None = None,
    *,
    context: CheckContext | None = None,
    invariants: Iterable[str] | None = None,
) -> dict[str, Verdict]:
    """Judge a history and a ledger by every invariant (or the named ones); `store` gives the final read of each task.

    Events and ledger entries are folded in time order; at one instant the
    events come first, since a call is granted before its effect can land.
    """
    entries: list[tuple[float, int, int, object]] = [(e.at, 0, index, e) for index, e in enumerate(events)]
    entries += [(entry.at, 1, index, entry) for index, entry in enumerate(ledger)]
    entries.sort(key=lambda item: item[:3])
    judgement = Judge(context, invariants)
    for _at, kind, _index, entry in entries:
        if kind == 0:
            judgement.event(entry)  # type: ignore[arg-type]
        else:
            judgement.landed(entry)  # type: ignore[arg-type]
    return judgement.verdicts(store)
