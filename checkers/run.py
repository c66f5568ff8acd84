"""One record of a run, whichever driver played it: the simulator's seeded run, the explorer's search, or a chaos run.

A `Run` holds what a reader of any run asks for, under the same names: the
driver, the scenario (the simulator's), the seed (None for a search), the tasks
and the anti-pattern, its configuration as plain data, what
was searched and how far (the explorer's, None otherwise), the spec the core
ran (label and digest), each invariant's verdict, the measured figures, the
faults delivered (records with their times), how many series windows were
recorded, the coverage of the table's rows (when counted), the command that
plays the run again, the wall time, and whether it passed. What identifies a
run within its driver alone (a scenario and a history digest; a store and a run
folder; a counterexample) is its `subject`.

`to_json` is the one JSON shape every driver prints with `--json` and writes
as report.json: the same keys for every driver, in the same order, a null or an
empty value where a driver has nothing to say (an exploration delivers no
fault at a time; a simulated run searched nothing). `SCHEMA_VERSION` changes
whenever a field changes meaning. `from_json` reads one back (a report page, a
comparison), so a report written by one version is read by the same code.

Whether a run passed is the driver's to say (`ok`), because each asks a little
more than its verdicts: a chaos run also loses no task, a search passes when it
found no counterexample even if it stopped early (its verdicts then say
unknown). What a verdict means is the same everywhere: `invariants_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .history import OK, UNKNOWN, VIOLATED, Verdict

SCHEMA_VERSION = 4
"""The version of the JSON object of a run (`--json`, report.json): it changes whenever a field changes meaning.

4: the simulator's and the runtime's `config` hold the agent's settings under `agent` and its workflow under
`workflow` (they were `workers.call_deadline_s`, `workload.tool_calls`, ...); a search's `search` says how many states
a depth bound left unexpanded (`cut`); a simulated run's `subject` names the settings it changed (`settings_changed`).

3: one shape for every driver (`driver`, `search`, `subject`, `faults` as records); the simulator's was at 1 and
chaos's at 2, each its own shape."""

STATUSES = (OK, VIOLATED, UNKNOWN)
"""The three answers a checker gives."""
DRIVERS = ("sim", "explore", "chaos")
"""The drivers a run comes from: the SimPy world, the exhaustive search, real processes under faults."""

KEYS = (
    "schema_version",
    "driver",
    "ok",
    "scenario",
    "seed",
    "tasks",
    "antipattern",
    "config",
    "spec",
    "search",
    "invariants",
    "metrics",
    "faults",
    "series_windows",
    "coverage",
    "replay",
    "wall_s",
    "subject",
)
"""The top-level keys of every run's JSON object, in order."""


class RunRecordError(ValueError):
    """A run record that cannot be: an unknown driver, a verdict of an unknown status, a JSON object of another shape."""


@dataclass(frozen=True)
class Run:
    """What a run of any driver found, and what identifies it (see the module docstring)."""

    driver: str
    ok: bool
    config: Mapping[str, Any]
    spec: Mapping[str, Any]
    verdicts: Mapping[str, Verdict]
    metrics: Mapping[str, Any]
    replay: str
    scenario: str | None = None
    """The simulator's named world (None for the other drivers, whose configuration is the whole story)."""
    seed: int | None = None
    tasks: int | None = None
    """The tasks the run was given (a chaos run's: those it submitted)."""
    antipattern: str | None = None
    """The anti-pattern the run played, if any."""
    search: Mapping[str, Any] | None = None
    faults: tuple[Mapping[str, Any], ...] = ()
    series_windows: int = 0
    coverage: Mapping[str, Any] | None = None
    wall_s: float = 0.0
    subject: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.driver not in DRIVERS:
            raise RunRecordError(f"a run comes from one of the drivers {', '.join(DRIVERS)}, not {self.driver!r}")
        for name, verdict in self.verdicts.items():
            if not isinstance(verdict, Verdict) or verdict.name != name:
                raise RunRecordError(f"the verdict under {name!r} is not that invariant's Verdict: {verdict!r:.80}")
            if verdict.status not in STATUSES:
                raise RunRecordError(f"the verdict on {name} is {verdict.status!r}, not one of {', '.join(STATUSES)}")

    def to_json(self) -> dict[str, Any]:
        """The one JSON shape of a run (`KEYS`, in order)."""
        record = {
            "schema_version": SCHEMA_VERSION,
            "driver": self.driver,
            "ok": self.ok,
            "scenario": self.scenario,
            "seed": self.seed,
            "tasks": self.tasks,
            "antipattern": self.antipattern,
            "config": dict(self.config),
            "spec": dict(self.spec),
            "search": None if self.search is None else dict(self.search),
            "invariants": invariants_json(self.verdicts),
            "metrics": dict(self.metrics),
            "faults": [dict(fault) for fault in self.faults],
            "series_windows": self.series_windows,
            "coverage": None if self.coverage is None else dict(self.coverage),
            "replay": self.replay,
            "wall_s": round(self.wall_s, 3),
            "subject": dict(self.subject),
        }
        assert tuple(record) == KEYS
        return _plain(record)


def _plain(value: Any) -> Any:
    """`value` as JSON holds it: tuples become lists, mappings plain dicts (so a record read back equals the one written)."""
    if isinstance(value, Mapping):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(inner) for inner in value]
    return value


def invariants_json(verdicts: Mapping[str, Verdict]) -> dict[str, dict[str, Any]]:
    """Each verdict as JSON: `ok` (held), `status` (ok, violated or unknown), the violations counted, the example's lines."""
    return {
        name: {"ok": verdict.status == OK, "status": verdict.status, "violations": verdict.violations, "example": list(verdict.example)}
        for name, verdict in verdicts.items()
    }


def from_json(record: Mapping[str, Any]) -> Run:
    """A run's JSON object (`Run.to_json`) read back; one of another shape or version is a `RunRecordError` naming why."""
    if not isinstance(record, Mapping):
        raise RunRecordError(f"a run record is a JSON object, not {type(record).__name__}")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunRecordError(f"this reads run records of schema version {SCHEMA_VERSION}, not {version!r}")
    missing = [key for key in KEYS if key not in record]
    if missing:
        raise RunRecordError(f"the run record has no {', '.join(missing)}")
    try:
        verdicts = {
            name: Verdict(name, found["status"], int(found["violations"]), tuple(found["example"]))
            for name, found in record["invariants"].items()
        }
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise RunRecordError(f"the run record's invariants are malformed: {error}") from error
    return Run(
        driver=record["driver"],
        ok=bool(record["ok"]),
        config=record["config"],
        spec=record["spec"],
        verdicts=verdicts,
        metrics=record["metrics"],
        replay=record["replay"],
        scenario=record["scenario"],
        seed=record["seed"],
        tasks=record["tasks"],
        antipattern=record["antipattern"],
        search=record["search"],
        faults=tuple(record["faults"]),
        series_windows=record["series_windows"],
        coverage=record["coverage"],
        wall_s=record["wall_s"],
        subject=record["subject"],
    )
