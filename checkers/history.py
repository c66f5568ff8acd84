"""The history a simulated run leaves: core events, provider effects, faults and retirements, in one stream.

Jepsen's shape: everything that happened is appended to one history, and the
checkers are pure folds over it. The core's own `Event`s (every contract
call, accepted or refused) come from the store; the simulator adds three
kinds of entry the store cannot see:

- `Landed`: an effect that landed at a provider (the provider's ledger, in
  the order it grew), whoever caused it and whatever key it came with;
- `Fault`: what the nemesis broke, and until when;
- `Retired`: a task leaving the live set, with the final records of the task,
  its Attempts and its intents (Jepsen's final read). A task retires once it
  rests (terminal, blocked, escalated, quarantined) and a grace period for
  late calls has passed, or when the run ends, whatever its state.

Retirement is what keeps a million-task run in bounded memory: the store
forgets the task and every checker forgets what it kept about it.

The history is streamed, not stored: `History.append` hands each entry to
every checker and folds it into a running SHA-256 digest, so two runs with the
same code, configuration and seed can be compared by digest alone. A bounded
tail of recent entries is kept for the human-readable timeline.
"""

from __future__ import annotations

import hashlib
import operator
from collections import deque
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from shiftchange.core import Attempt, Event, Intent, Task

OK, VIOLATED, UNKNOWN = "ok", "violated", "unknown"


@dataclass(frozen=True, slots=True)
class Landed:
    """One effect that landed at a provider (its ledger's entry), with the task it belongs to."""

    at: float
    dependency: str
    """Which provider's ledger: "code_host" or "model_provider"."""
    provider_id: str
    key: str
    operation: str
    identity: str
    """The logical operation's identity at the provider (a PR's task and head SHA)."""
    task_id: str
    worker_id: str
    via_gateway: bool
    """False when the worker called the provider without a grant (the unrecorded-effects anti-pattern)."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault the nemesis injected: a crash, a pause, a partition, an outage, a duplicate burst, a slow-tool tail, ..."""

    at: float
    kind: str
    target: str
    until: float
    detail: str = ""
    parameters: tuple[tuple[str, Any], ...] = ()
    """The kind's parameters (probability, factor, mode, calls), as (name, value) pairs."""
    placed: bool = False
    """Placed at a chosen time by the config (`--fault`), not drawn from the seed."""

    def parameter(self, name: str) -> Any:
        return dict(self.parameters)[name]

    def as_record(self) -> dict[str, Any]:
        """Plain data for the run's report: when, what, where, until when, with what parameters."""
        parameters = {name: list(value) if isinstance(value, tuple) else value for name, value in self.parameters}
        return {"at_s": self.at, "kind": self.kind, "target": self.target, "until_s": self.until, "placed": self.placed, **parameters}


@dataclass(frozen=True, slots=True)
class Retired:
    """A task leaves the live set with its final records; `drained` when the run ended with it still live."""

    at: float
    task: Task
    attempts: tuple[Attempt, ...]
    intents: tuple[Intent, ...]
    drained: bool = False


Entry = Event | Landed | Fault | Retired
_METHODS = {Event: "event", Landed: "landed", Fault: "fault", Retired: "retired"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one checker concluded: ok, violated (with the shortest example it kept), or unknown (it could not tell)."""

    name: str
    status: str
    violations: int
    example: tuple[str, ...]
    """The entries that show the first violation, rendered one per line; empty when ok."""

    @property
    def ok(self) -> bool:
        return self.status == OK


_LABELS = {OK: "PASS", VIOLATED: "FAIL"}
"""Anything else a checker answers is printed UNKNOWN."""
_EXAMPLE_INDENT = " " * 11


def invariant_rows(verdicts: dict[str, Verdict]) -> list[str]:
    """The invariant table as `sim run` and `chaos` print it: PASS, FAIL or UNKNOWN, the name, the count, then the example."""
    width = max((len(name) for name in verdicts), default=0)
    rows = []
    for name, verdict in verdicts.items():
        label = _LABELS.get(verdict.status, "UNKNOWN")
        if verdict.status == OK:
            count = "0 violations"
        elif verdict.status == VIOLATED:
            count = f"{verdict.violations:,} violation{'' if verdict.violations == 1 else 's'}"
        else:
            count = "could not tell"
        rows.append(f"  {label:<7}  {name:<{width}}  {count}")
        rows += [f"{_EXAMPLE_INDENT}{line}" for line in verdict.example]
    return rows


def tally(verdicts: dict[str, Verdict]) -> str:
    """The line under the invariant table: all hold, or how many of them do and what became of the rest."""
    statuses = [verdict.status for verdict in verdicts.values()]
    held, violated = statuses.count(OK), statuses.count(VIOLATED)
    unknown = len(statuses) - held - violated
    if held == len(statuses):
        return f"all {held} invariants hold"
    parts = [f"{violated} violated"] if violated else []
    parts += [f"{unknown} unknown (not checked to the end, so not a pass)"] if unknown else []
    return f"{held} of {len(statuses)} invariants hold; {', '.join(parts)}"


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What a checker may know besides the history: the configured limits the invariants are stated against."""

    lease_ttl_s: float
    attempt_spend_max_usd: float
    reason_length_min: int
    keyless: frozenset[str] = frozenset()
    """The dependencies that ignore operation keys (a call repeated there lands again). Every provider lands nothing past
    a call's deadline, so reconciliation's findings (`effects_landed`, `effects_absent`) wait there for every call to
    settle, and are final: a call of the reconciled Attempt that lands afterwards contradicts them. (Where keys are
    honoured, reconciliation may conclude with a call in flight by design: a retry under the same key is deduplicated.)"""


class Checker(Protocol):
    """A fold over the history: one method per kind of entry, and a verdict at the end."""

    name: str

    def event(self, event: Event) -> None: ...

    def landed(self, landed: Landed) -> None: ...

    def fault(self, fault: Fault) -> None: ...

    def retired(self, retired: Retired) -> None: ...

    def verdict(self) -> Verdict: ...


def describe(entry: Entry) -> str:
    """One line a person can read: when, who, what, with which fence, and what became of it."""
    if isinstance(entry, Event):
        fence = f" gen {entry.generation}" if entry.generation is not None else ""
        who = f"{entry.actor} {entry.worker_id}" if entry.worker_id else entry.actor
        subject = entry.attempt_id or entry.task_id
        move = f" {entry.from_state}->{entry.to_state}" if entry.from_state != entry.to_state else ""
        outcome = "accepted" if entry.accepted else f"REFUSED ({entry.reason})"
        detail = f" [{entry.detail}]" if entry.detail else ""
        return f"t={entry.at:9.2f}  #{entry.seq:<7} {who}: {entry.kind} {subject}{fence}{move} {outcome}{detail}"
    if isinstance(entry, Landed):
        how = "" if entry.via_gateway else " WITHOUT A GRANT"
        return (
            f"t={entry.at:9.2f}  {entry.dependency}: effect {entry.provider_id} landed for {entry.task_id}"
            f" ({entry.operation} {entry.identity}, key {entry.key}, worker {entry.worker_id}{how})"
        )
    if isinstance(entry, Fault):
        parameters = "".join(f" {name}={','.join(v) if isinstance(v, tuple) else v}" for name, v in entry.parameters)
        detail = f": {entry.detail}" if entry.detail else ""
        until = f" until t={entry.until:.2f}" if entry.until > entry.at else ""  # an instant fault (a lost answer) has no span
        return f"t={entry.at:9.2f}  nemesis: {entry.kind} {entry.target}{parameters}{until}{detail}"
    states = ", ".join(f"{a.attempt_id} {a.state}" for a in entry.attempts) or "no attempts"
    how = "still live when the run ended" if entry.drained else "retired"
    return f"t={entry.at:9.2f}  {entry.task.task_id} {how}: task {entry.task.state}; {states}"


def _fingerprint(entry: Entry) -> bytes:
    """The part of an entry that must be identical across replays (records print their fields in a fixed order).

    A lease token is drawn from `secrets`, as it must be, so its digest on an
    Attempt record is left out: whether a lease was issued is kept, not which.
    """
    kind = type(entry)
    if kind is Event:  # most entries: the values in field order, read in C (a record's repr costs several times more)
        return repr(_EVENT_VALUES(entry)).encode()
    if kind is Retired:
        attempts = tuple(replace(a, token_digest=None if a.token_digest is None else "issued") for a in entry.attempts)
        return repr((entry.at, entry.task, attempts, entry.drained, tuple((i.key, i.receipt) for i in entry.intents))).encode()
    return repr(entry).encode()


_EVENT_VALUES = operator.attrgetter(*(field.name for field in fields(Event)))
"""An event's values in its fields' order, as one tuple: what its fingerprint is made of."""


class History:
    """The stream every entry passes through: to each checker, into the digest, and into a bounded tail."""

    def __init__(
        self, checkers: list[Checker], tail_max: int = 2000, keep_all: bool = False, sink: Any = None, digest: bool = True
    ) -> None:
        """`digest=False` keeps no running digest, so the history can be copied (pickled) with its checkers."""
        self.checkers = checkers
        self._sink = sink
        """Called with every entry (the run artifacts' history file), or None."""
        self._failed: dict[str, str] = {}
        self._digest = hashlib.sha256() if digest else None
        self.count = 0
        self.tail: deque[Entry] = deque(maxlen=None if keep_all else tail_max)
        """The latest entries (every entry with `keep_all`, which the shrinker uses on small runs)."""
        # Bound methods per kind of entry, looked up once: append runs for every entry of a million-task run.
        self._folds = {kind: [(c.name, getattr(c, method)) for c in checkers] for kind, method in _METHODS.items()}

    def append(self, entry: Entry) -> None:
        self.count += 1
        if self._digest is not None:
            self._digest.update(_fingerprint(entry))
        self.tail.append(entry)
        if self._sink is not None:
            self._sink(entry)
        for name, fold in self._folds[type(entry)]:
            try:
                fold(entry)
            except Exception as error:  # a crashing checker yields unknown, never a crashed run
                if name not in self._failed:
                    self._failed[name] = f"checker crashed on entry {self.count}: {type(error).__name__}: {error}"
                self._folds = {kind: [(n, f) for n, f in folds if n != name] for kind, folds in self._folds.items()}

    def digest(self) -> str:
        if self._digest is None:
            raise RuntimeError("this history was made with digest=False: it keeps no digest")
        return self._digest.hexdigest()

    @property
    def crashed(self) -> dict[str, str]:
        """Checker name -> why: the checkers that crashed on an entry and were dropped from the fold (their verdict is unknown)."""
        return self._failed

    def verdicts(self) -> dict[str, Verdict]:
        results = {}
        for checker in self.checkers:
            if checker.name in self._failed:
                results[checker.name] = Verdict(checker.name, UNKNOWN, 0, (self._failed[checker.name],))
                continue
            try:
                results[checker.name] = checker.verdict()
            except Exception as error:
                results[checker.name] = Verdict(
                    checker.name, UNKNOWN, 0, (f"checker crashed at the verdict: {type(error).__name__}: {error}",)
                )
        return results
