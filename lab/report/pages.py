"""What a run's report page shows, as plain values: the facts, the series and its panels, the faults, the timelines.

`sim_page` builds one from a simulated run's record and its series, `explore_page` from a search's record,
`chaos_page` from a chaos report and the store it ran on; `TimelineSink` keeps task timelines as a run's history
streams past. `html.render` draws any of them (why one page and how: `html`'s docstring).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.history import Retired
from shiftchange.core import Attempt, Event, Task
from shiftchange.core.timeline import FinalRecords, Timeline, build_timeline, moment

TIMELINE_TASKS_MAX = 200
"""The page holds at most this many tasks' timelines: a million-task run's page stays a page (see `TimelineSink`)."""
CHAOS_WINDOWS_MAX = 60
"""A chaos run's history is counted in at most this many windows of whole seconds for its series."""


# ------------------------------------------------------------------ the page, as data


@dataclass(frozen=True, slots=True)
class Panel:
    """One chart: its title, what its y axis counts, and the series columns it draws with their labels."""

    title: str
    unit: str
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Span:
    """A fault drawn over every panel: from `start_s` to `end_s` on the series' time axis, with what it was."""

    start_s: float
    end_s: float
    label: str


@dataclass(frozen=True, slots=True)
class Series:
    """The run's time series: rows with a `t_s` column (seconds on `axis`), the panels to draw and the faults to shade."""

    rows: tuple[Mapping[str, Any], ...]
    panels: tuple[Panel, ...]
    axis: str
    spans: tuple[Span, ...]
    source: str
    """One sentence on where the rows come from."""


@dataclass(frozen=True, slots=True)
class FaultTable:
    """The fault schedule as the page shows it: headers, one row of text per fault, and a sentence on what it lists."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str


@dataclass(frozen=True, slots=True)
class RunPage:
    """Everything one report page shows; `report` is the run's JSON report (invariants, metrics, ok), read as it is."""

    title: str
    facts: tuple[tuple[str, str], ...]
    report: Mapping[str, Any]
    series: Series
    faults: FaultTable
    timelines: tuple[Timeline, ...]
    timelines_note: str


# The panels of `plot.plot_series`, each twin axis (latency, queue age) a panel of its own.
SIM_PANELS = (
    Panel("throughput", "per window", (("arrivals", "arrivals"), ("tasks_done", "done"), ("admissions", "admitted"), ("sheds", "shed"))),
    Panel(
        "provider calls",
        "calls per window",
        tuple(
            (f"{dependency}.{what}", f"{dependency} {what.replace('_', ' ')}")
            for dependency in ("code_host", "model_provider")
            for what in ("offered", "timed_out", "refused")
        ),
    ),
    Panel(
        "provider latency",
        "p99 seconds",
        (("code_host.latency_s_p99", "code_host p99"), ("model_provider.latency_s_p99", "model_provider p99")),
    ),
    Panel("queue", "Attempts queued", (("queue_depth", "depth"),)),
    Panel("queue age", "seconds", (("queue_age_s", "oldest age"),)),
    Panel(
        "leases",
        "leases",
        (
            ("leases_held", "held"),
            ("renewals_unanswered", "renewals unanswered"),
            ("expiries", "expiries"),
            ("false_expiries", "false expiries"),
        ),
    ),
)
CHAOS_PANELS = (
    Panel("throughput", "accepted events per window", (("create", "created"), ("claim", "claimed"), ("approve", "approved"))),
    Panel("leases", "accepted events per window", (("renew", "renewed"), ("expire", "expired"), ("reconcile", "reconciled"))),
    Panel("refusals", "refused events per window", (("refused", "refused"), ("late", "late (stale fence or lease gone)"))),
)


# ------------------------------------------------------------------ timelines of a simulated run


class TimelineSink:
    """A history sink that keeps the recovery timelines of up to `tasks_max` tasks of a simulated run.

    A task's events are held while it lives and turned into its timeline when
    it retires, from the final records the `Retired` entry carries (what the
    checkers judged), then dropped: memory is the live tasks' events plus the
    kept timelines, however long the run. Which tasks: the first to retire,
    except that a notable one (not done, or more than one Attempt) takes the
    place of the latest plain one once the page is full, because those are the
    timelines a person opens the report for. `then`, if given, sees every entry
    after this sink (the coverage count).
    """

    def __init__(self, tasks_max: int = TIMELINE_TASKS_MAX, then: Callable[[Any], None] | None = None) -> None:
        assert tasks_max >= 0, tasks_max
        self.tasks_max = tasks_max
        self.then = then
        self.retired = 0
        self._events: dict[str, list[Event]] = {}
        self._notable: list[Timeline] = []
        self._plain: list[Timeline] = []

    def __call__(self, entry: Any) -> None:
        if isinstance(entry, Event) and (entry.kind == "create" or entry.task_id in self._events):
            # An event after its task retired belongs to no final read: it is left out, so nothing is held for ever.
            self._events.setdefault(entry.task_id, []).append(entry)
        elif isinstance(entry, Retired):
            self._retire(entry)
        if self.then is not None:
            self.then(entry)

    @property
    def timelines(self) -> tuple[Timeline, ...]:
        return tuple(sorted((*self._notable, *self._plain), key=lambda timeline: timeline.task_id))

    def _retire(self, entry: Retired) -> None:
        self.retired += 1
        events = self._events.pop(entry.task.task_id, [])
        if self.tasks_max == 0:
            return
        notable = _notable(entry.task, entry.attempts)
        full = len(self._notable) + len(self._plain) >= self.tasks_max
        if full and not (notable and self._plain):
            return
        if full:
            self._plain.pop()
        timeline = build_timeline(FinalRecords(entry.task, entry.attempts, entry.intents, events), entry.task.task_id)
        (self._notable if notable else self._plain).append(timeline)

    def note(self) -> str:
        shown = len(self._notable) + len(self._plain)
        if shown == self.retired:
            return f"every task's timeline ({shown:,}), built from its final records and its events"
        return (
            f"{shown:,} of {self.retired:,} tasks' timelines (at most {self.tasks_max:,} are kept: the first to retire,"
            f" and any task not done or with more than one Attempt before the rest), built from their final records and events"
        )


def _notable(task: Task, attempts: Sequence[Attempt]) -> bool:
    return task.state != "done" or len(attempts) > 1


# ------------------------------------------------------------------ the two drivers' pages


def sim_page(report: Mapping[str, Any], series: Sequence[Mapping[str, Any]], timelines: TimelineSink | None) -> RunPage:
    """The page of a simulated run from its record's JSON (`checkers.run.Run.to_json`) and its series."""
    subject = report["subject"]
    antipattern = report["antipattern"]
    facts = [
        ("scenario", str(report["scenario"])),
        ("seed", str(report["seed"])),
        ("tasks", f"{report['tasks']:,}"),
        ("anti-pattern", antipattern if antipattern is not None else "none"),
        *_spec_fact(report.get("spec")),
        ("faults played", f"{len(report['faults']):,} of {subject['schedule_faults']:,} in the schedule"),
        ("SimPy events", f"{subject['events_processed']:,}"),
        ("history digest", str(subject["digest"])),
        ("wall time", f"{report['wall_s']:.1f} s"),
        ("replay", str(report["replay"])),
        ("times", "simulated seconds (t=…s), with the offset after the task's creation in its timeline"),
    ]
    spans = tuple(Span(fault["at_s"], fault["until_s"], f"{fault['kind']} {fault['target']}") for fault in report["faults"])
    rows = tuple(_sim_fault_row(fault) for fault in report["faults"])
    table = FaultTable(
        ("index", "from", "until", "kind", "target", "parameters", "origin"),
        rows,
        "the faults played: the seed's schedule and those the config placed (a fault `--faults` left out is not listed;"
        " its index is missing)",
    )
    window_s = series[0]["window_s"] if series else None
    source = "the recorder's rows" + (f", one per {window_s:g} s window" if window_s else "")
    title = f"shiftchange sim run: {report['scenario']}, seed {report['seed']}, {report['tasks']:,} tasks"
    return RunPage(
        title=title,
        facts=tuple(facts),
        report=report,
        series=Series(tuple(series), SIM_PANELS, "simulated time", spans, source),
        faults=table,
        timelines=() if timelines is None else timelines.timelines,
        timelines_note="no timelines were kept" if timelines is None else timelines.note(),
    )


def _spec_fact(spec: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The spec the run played, by label and digest (a report written before reports named it has none)."""
    return [] if not spec else [("spec", f"{spec['label']}, digest {spec['digest']}")]


_SCHEDULE_FIELDS = frozenset({"index", "at_s", "until_s", "kind", "target", "placed"})


def _text(value: Any) -> str:
    """A metric's value as one line of text: counts with thousands separators, no trailing zeros, n/a for None."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, Mapping):
        return "; ".join(f"{key}: {_text(inner)}" for key, inner in value.items()) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(_text(inner) for inner in value) or "none"
    return str(value)


def _sim_fault_row(fault: Mapping[str, Any]) -> tuple[str, ...]:
    parameters = ", ".join(f"{name}={_text(value)}" for name, value in fault.items() if name not in _SCHEDULE_FIELDS)
    return (
        str(fault["index"]),
        moment(fault["at_s"]),
        moment(fault["until_s"], fault["at_s"]),
        str(fault["kind"]),
        str(fault["target"]),
        parameters,
        "placed" if fault["placed"] else "drawn",
    )


def chaos_page(report: Any, store: Any, tasks_max: int = TIMELINE_TASKS_MAX) -> RunPage:
    """The page of a chaos run from its `ChaosReport` and the store it ran on (still open), read for this run's tasks only.

    The series count the judged history per window; each task's timeline is `build_timeline` over the store.
    """
    found = report.to_json()
    subject = found["subject"]
    prefix = subject["task_prefix"]
    events = [event for event in store.events() if event.task_id.startswith(prefix)]
    origin = min((event.at for event in events), default=min((item["at"] for item in found["faults"]), default=0.0))
    facts = (
        ("store", str(subject["store"])),
        ("workers", str(subject["workers"])),
        ("load", f"{subject['duration_s']:g} s at {subject['rate_per_s']:g} tasks/s"),
        ("seed", str(found["seed"])),
        ("provider idempotency", "on" if subject["idempotency"] else "off"),
        ("run began", moment(origin)),
        ("run dir", str(subject["run_dir"])),
        ("task prefix", str(prefix)),
        ("wall time", f"{found['wall_s']:.1f} s"),
        ("times", "ISO 8601 UTC on the store's clock, with the offset after the run began (faults) or the task's creation (timelines)"),
    )
    spans = tuple(
        Span(item["at"] - origin, item["at"] - origin + item["hold_s"], f"{item['kind']} {item['target']}") for item in found["faults"]
    )
    table = FaultTable(
        ("at", "kind", "target", "held", "Attempt struck", "detect", "recover", "detail"),
        tuple(_chaos_fault_row(item, origin) for item in found["faults"]),
        "the faults delivered (a fault with no process to take it is skipped, and counted in the metrics)",
    )
    rows, window_s = _chaos_series(events, origin)
    by_task: dict[str, list[Event]] = {}
    for event in events:
        by_task.setdefault(event.task_id, []).append(event)
    ordered = sorted(by_task, key=lambda task_id: (not _chaos_notable(by_task[task_id]), task_id))
    timelines = tuple(sorted((build_timeline(store, task_id) for task_id in ordered[:tasks_max]), key=lambda timeline: timeline.task_id))
    if len(timelines) == len(by_task):
        note = f"every task's timeline ({len(timelines):,})"
    else:
        note = f"{len(timelines):,} of {len(by_task):,} tasks' timelines (any task not approved or with more than one Attempt first)"
    return RunPage(
        title=f"shiftchange chaos: {subject['workers']} workers, {subject['duration_s']:g} s, seed {found['seed']}",
        facts=facts,
        report=found,
        series=Series(rows, CHAOS_PANELS, "seconds after the run began", spans, f"the judged history, counted per {window_s:g} s window"),
        faults=table,
        timelines=timelines,
        timelines_note=f"{note}, read from the store as `shiftchange timeline` reads them",
    )


def explore_page(report: Mapping[str, Any]) -> RunPage:
    """The page of a search from its record's JSON (`checkers.run.Run.to_json`): what was searched and how far, the
    verdicts, and the counterexample's path and replay when one was found. A search records no series and delivers no
    fault at a time (its faults are bounds, tried wherever they can strike), and keeps no task's timeline: those
    sections say so."""
    search, config = report["search"], report["config"]
    bounds = ", ".join(
        f"{name} {config[name]}" for name in ("workers", "tasks", "crashes", "pauses", "stalls", "lost_requests", "lost_responses",
                                              "duplicates", "cancels", "operator_calls", "ci_failures", "refusals", "deletions")
        if config.get(name)
    )  # fmt: skip
    ending = "completed: every reachable state was visited" if search["complete"] else f"INCOMPLETE: stopped by {search['stopped_by']}"
    facts = [
        ("configuration", bounds),
        ("anti-pattern", report["antipattern"] or "none"),
        *_spec_fact(report.get("spec")),
        ("search", f"{search['strategy']}, {'symmetry reduced' if search['symmetry'] else 'no symmetry reduction'}"),
        ("states", f"{search['states']:,} distinct, {search['transitions']:,} transitions, depth {search['depth']:,}"),
        ("ending", ending),
        ("the work can finish", "yes" if search["finishes"] else "no run found that ends with every task done"),
        ("wall time", f"{report['wall_s']:.1f} s"),
        ("command", str(report["replay"])),
    ]
    example = report["subject"].get("counterexample")
    if example is not None:
        facts += [("counterexample", f"{example['invariant']} after {len(example['steps'])} steps"), ("replay", example["replay"])]
    faults = FaultTable((), (), "a search delivers no fault at a time; its faults are the bounds above, tried wherever they can strike")
    return RunPage(
        title=f"shiftchange explore: {bounds}",
        facts=tuple(facts),
        report=report,
        series=Series((), (), "search steps", (), "a search records no series over time"),
        faults=faults,
        timelines=(),
        timelines_note="a search keeps no task's timeline: a counterexample's path is its verdict's evidence, and its replay plays it",
    )


def _chaos_notable(events: Sequence[Event]) -> bool:
    """A task worth opening first: it never reached approval, or it took more than one Attempt."""
    appended = sum(1 for event in events if event.accepted and event.kind == "append")
    return appended > 1 or not any(event.accepted and event.kind == "approve" for event in events)


def _chaos_fault_row(item: Mapping[str, Any], origin: float) -> tuple[str, ...]:
    seconds = _optional_seconds
    held = f"{item['hold_s']:g} s" if item["hold_s"] else ""
    if item.get("skew_s"):
        held += f" (clock {item['skew_s']:+g} s)"
    return (
        moment(item["at"], origin),
        str(item["kind"]),
        str(item["target"]),
        held,
        item.get("attempt_id") or "",
        seconds(item.get("detect_s")),
        seconds(item.get("recover_s")),
        str(item.get("detail") or ""),
    )


def _optional_seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"


def _chaos_series(events: Iterable[Event], origin: float) -> tuple[tuple[dict[str, Any], ...], float]:
    """The chaos run's history counted per window: accepted events by kind, refused and late ones; with the window's seconds.

    The window is whole seconds, chosen so the run spans at most `CHAOS_WINDOWS_MAX` of them.
    """
    events = list(events)
    span_s = max((event.at - origin for event in events), default=0.0)
    window_s = float(max(1, math.ceil(span_s / CHAOS_WINDOWS_MAX)))
    counted = [column for panel in CHAOS_PANELS for column, _ in panel.columns]
    windows = int(span_s // window_s) + 1 if events else 0
    rows = [{"t_s": index * window_s, "window_s": window_s, **dict.fromkeys(counted, 0)} for index in range(windows)]
    for event in events:
        row = rows[int((event.at - origin) // window_s)]
        if event.accepted:
            if event.kind in row:
                row[event.kind] += 1
        else:
            row["refused"] += 1
            row["late"] += int(event.late)
    return tuple(rows), window_s
