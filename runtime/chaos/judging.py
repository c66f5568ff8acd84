"""How a chaos run is judged: the store's history and the provider's ledger through the checkers, the measures, the
faults' hits on Attempts, the figures, and the command that runs it again."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .plan import (
    _STRIKES,
    CONN_KILL,
    DRAIN_DEFAULT_S,
    DROP,
    FAULT_KINDS,
    KILL,
    ORCHESTRATOR_KILL,
    PAUSE,
    SKEW,
    SKEW_VARIABLE,
    ChaosError,
    ChaosFaults,
    ChaosReport,
    Delivered,
    RunSpec,
)
from .processes import _masked

if TYPE_CHECKING:
    from shiftchange.checkers import LedgerEntry, Measures
    from shiftchange.core import Event


class _Judging:
    """The judging half of `_Run`: the verdicts, the measures and the figures of a run that has stopped."""

    def judge(self) -> ChaosReport:
        from shiftchange.checkers import context_for, judge
        from shiftchange.core import StoreError, StoreRetryable
        from shiftchange.runtime.codehost import read_ledger

        try:
            mine = set(self.task_ids)
            events = [event for event in self.store.events() if event.task_id.startswith(self.prefix)]
            records = read_ledger(self.ledger_path) if self.ledger_path.exists() else []
            ledger = ledger_entries(records, self.store, self.prefix)
            keyless = () if self.idempotency else ("code_host",)  # its code host ignores keys: findings there are final
            verdicts = judge(events, ledger, self.store, context=context_for(self.config.core, keyless=keyless))
            tasks = {task_id: self.store.get_task(task_id) for task_id in sorted(mine)}
        except (StoreError, StoreRetryable, OSError, ValueError) as error:
            raise ChaosError(f"cannot read the run back for judgement: {type(error).__name__}: {error}") from None
        measures = self._measure(events, ledger)
        metrics = self._metrics(events, ledger, verdicts, tasks, measures, getattr(records, "torn", 0))
        return ChaosReport(
            store=_masked(self.store_url),
            task_prefix=self.prefix,
            run_dir=str(self.run_dir),
            workers=self.workers,
            duration_s=self.duration_s,
            seed=self.seed,
            rate_per_s=self.rate_per_s,
            idempotency=self.idempotency,
            faults=self.faults,
            config=json.loads(self.config.to_json()),
            verdicts=verdicts,
            metrics=metrics,
            delivered=self.delivered,
            spec=self.spec.to_json() if self.spec is not None else {},
            rerun=self.rerun(),
            scraped=self.scraped,
        )

    def rerun(self) -> str:
        """The `shiftchange chaos` command that runs this configuration again: same store, load, seed, faults and spec, a fresh
        run dir. The store's password is masked; a fault cadence is named only where it is not the default."""
        words = ["shiftchange", "chaos", "--store", _masked(self.store_url), "--workers", str(self.workers)]
        words += ["--duration", _number(self.duration_s), "--seed", str(self.seed), "--rate", _number(self.rate_per_s)]
        if self.drain_s != DRAIN_DEFAULT_S:
            words += ["--drain", _number(self.drain_s)]
        defaults = ChaosFaults()
        for kind in FAULT_KINDS:
            if kind == SKEW and self.kind != "postgresql":
                continue  # refused on SQLite: one machine, one clock
            if self.faults.every_s(kind) != defaults.every_s(kind):
                words += [f"--{kind.replace('_', '-')}-every", _number(self.faults.every_s(kind))]
        if self.kind == "postgresql" and self.faults.skew_s != defaults.skew_s:
            words += ["--skew", _number(self.faults.skew_s)]
        if not self.idempotency:
            words.append("--no-idempotency")
        if self.metrics:
            words.append("--metrics")
        if self.spec is not None and self.spec.source is not None:
            words += ["--spec", self.spec.source]
        return shlex.join(words)

    def _measure(self, events: list[Event], ledger: list[LedgerEntry]) -> Measures:
        """The shared measures over the run: each kill or pause of a worker holding a lease is a strike, then the history folds."""
        from shiftchange.checkers import Measures

        accepted = sorted((event for event in events if event.accepted), key=lambda event: (event.at, event.seq))
        measures = Measures()
        struck = [(item, measures.struck(claim.task_id, claim.attempt_id, item.at)) for item, claim in self._hits(accepted)]
        for event in accepted:
            measures.event(event)
        for entry in ledger:
            measures.landed(entry.landed())
        for item, strike in struck:
            item.detect_s = None if strike.detect_s is None else _round(strike.detect_s)
            item.recover_s = None if strike.recover_s is None else _round(strike.recover_s)
        return measures

    def _hits(self, accepted: list[Event]) -> list[tuple[Delivered, Event]]:
        """Each kill or pause with the claim of the Attempt its worker held at that instant (and names it on the fault)."""
        leased = self._table.leased
        claims: dict[str, list[Event]] = {}
        by_attempt: dict[str, list[Event]] = {}
        for event in accepted:
            if event.attempt_id is not None:
                by_attempt.setdefault(event.attempt_id, []).append(event)
            if event.kind == "claim" and event.attempt_id is not None:
                claims.setdefault(event.worker_id or "", []).append(event)
        hits = []
        for item in self.delivered:
            if item.kind not in _STRIKES:
                continue
            held = None
            for claim in claims.get(item.target, ()):
                if claim.at >= item.at:
                    break
                held = claim
            if held is None:
                continue
            ended = any(
                event.seq > held.seq and event.at < item.at and event.to_state is not None and event.to_state not in leased
                for event in by_attempt.get(held.attempt_id or "", ())
            )
            if not ended:
                item.attempt_id = held.attempt_id
                hits.append((item, held))
        return hits

    def _metrics(
        self,
        events: list[Event],
        ledger: list[Any],
        verdicts: Mapping[str, Any],
        tasks: Mapping[str, Any],
        measures: Measures,
        torn: int,
    ) -> dict[str, Any]:
        states: dict[str, int] = {}
        lost: list[str] = []
        for task_id, task in tasks.items():
            state = task.state if task is not None else "missing"
            states[state] = states.get(state, 0) + 1
            if task is None or task.state not in self.at_rest:
                lost.append(f"{task_id} ({state})")
        counts = dict.fromkeys(FAULT_KINDS, 0)
        for item in self.delivered:
            counts[item.kind] += 1
        span_s = max(1e-9, (self.drain_ended or self.wall.now()) - self.began)
        load_s = max(1e-9, (self.load_ended or self.wall.now()) - self.began)
        done = states.get("done", 0)
        retries = sum(getattr(event, "retries", 0) for event in events)
        fence_verdict = verdicts.get("fenced_writes")
        postgres = self.kind == "postgresql"
        return {
            "tasks_submitted": len(tasks),
            "tasks_done": done,
            "tasks_at_rest_otherwise": {state: n for state, n in sorted(states.items()) if state != "done" and state in self.at_rest},
            "tasks_lost": len(lost),
            "lost": lost[:20],
            "final_states": dict(sorted(states.items())),
            "submit_failures": self.submit_failures[:20],
            "stale_writes_refused": sum(1 for event in events if not event.accepted and event.late),
            "stale_writes_accepted": fence_verdict.violations if fence_verdict is not None else None,
            "worker_kills": counts[KILL],
            "pauses": counts[PAUSE],
            "orchestrator_kills": counts[ORCHESTRATOR_KILL],
            "connection_kills": counts[CONN_KILL] if postgres else None,
            "connection_kills_note": None if postgres else "n/a on SQLite",
            "backends_terminated": self.backends_terminated if postgres else None,
            "connection_kill_error": self.admin_error or None,
            "drops_asked": counts[DROP],
            "clock_skews": counts[SKEW] if postgres else None,
            "clock_skews_ahead": sum(1 for item in self.delivered if item.kind == SKEW and item.skew_s > 0) if postgres else None,
            "clock_skews_behind": sum(1 for item in self.delivered if item.kind == SKEW and item.skew_s < 0) if postgres else None,
            "clock_skews_note": None if postgres else "n/a on SQLite (one machine, one clock)",
            "workers_skewed_at_end": sorted(child.name for child in self.workers_by_index if child.env.get(SKEW_VARIABLE)),
            "dropped_responses": self.provider_counters.get("dropped_responses"),
            "faults_skipped": {kind: n for kind, n in self.skipped.items() if n},
            **measures.summary(),
            "events": len(events),
            "events_per_s": _round(len(events) / span_s),
            "transactions_retried": retries,
            "transactions_retried_per_s": _round(retries / span_s),
            "effects": len(ledger),
            "effects_per_s": _round(len(ledger) / span_s),
            "ledger_torn_lines": torn,
            "provider_counters": self.provider_counters,
            "tasks_done_per_s": _round(done / span_s),
            "tasks_submitted_per_s": _round(len(tasks) / load_s),
            "load_s": _round(load_s),
            "drain_s": _round((self.drain_ended or self.wall.now()) - (self.load_ended or self.wall.now())),
            "drained": self.drained,
            "process_starts": {child.name: child.starts for child in self.children.values()},
            "unexpected_exits": self.unexpected[:50],
            "unexpected_exit_count": len(self.unexpected),
            "unclean_exits": self.unclean,
            "stragglers_killed": self.stragglers,
        }


def ledger_entries(records: Iterable[Mapping[str, Any]], store: Any, prefix: str = "") -> list[Any]:
    """The checkers' `LedgerEntry`s for the provider's ledger records (`read_ledger`), keeping those of tasks whose id starts with `prefix`.

    A record that names no task is named by the intent its key was minted for
    (as `shiftchange.checkers.ledger_from` does); one with no intent either is
    kept, and the audit judges it.
    """
    from shiftchange.checkers import LedgerEntry

    entries = []
    for record in records:
        task_id = str(record.get("task_id") or "")
        if not task_id:
            intent = store.get_intent(str(record["key"]))
            task_id = intent.task_id if intent is not None else ""
        if task_id and not task_id.startswith(prefix):
            continue
        entries.append(
            LedgerEntry(
                float(record["at"]),
                str(record["provider_id"]),
                str(record["key"]),
                str(record["operation"]),
                str(record["identity"]),
                task_id,
                str(record.get("dependency") or "code_host"),
                str(record.get("worker_id") or ""),
                bool(record.get("via_gateway", True)),
            )
        )
    return entries


def _round(value: float) -> float:
    return round(value, 3)


def _number(value: float) -> str:
    """A number as a command line gives it back: 15 for 15.0, 0.8 for 0.8000000000000002."""
    return format(value, ".12g")


def _metrics_url(log_path: Path) -> str:
    """The metrics URL a process logged since its latest start mark (a restarted process serves on another port)."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    latest = text[text.rfind("=== shiftchange chaos: start") :]
    found = re.search(r"serving metrics on (http://\S+)", latest)
    if found is None:
        raise ValueError(f"no metrics URL in {log_path} since its latest start")
    return found.group(1)


def _copy_spec(spec: RunSpec, folder: Path) -> Path:
    """Copy the files `spec` was read from into `folder` (a revision's with `git show`), and check the copy is that spec."""
    from shiftchange.spec import SpecError, load_spec

    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in spec.files:
            path = Path(name)
            if path.is_file():
                text = path.read_bytes()
            else:  # REV:folder/file, as the revision's files are named
                shown = subprocess.run(["git", "show", name], capture_output=True, check=False)
                if shown.returncode:
                    raise ChaosError(f"cannot copy the spec into the run dir: git show {name} failed")
                text = shown.stdout
            (folder / path.name).write_bytes(text)
    except OSError as error:
        raise ChaosError(f"cannot copy the spec into {folder}: {error.strerror or error}") from None
    try:
        copied = load_spec(folder).digest
    except SpecError as error:
        raise ChaosError(f"the spec {spec.label} changed while chaos read it: {error}") from None
    if copied != spec.digest:
        raise ChaosError(f"the spec {spec.label} changed while chaos read it (digest {spec.digest}, then {copied}): run again")
    return folder
