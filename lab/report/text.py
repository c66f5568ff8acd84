"""The text a person reads of a run, whichever driver played it: one renderer over the one record (`checkers.run.Run`).

Every driver's text has the same parts, in this order, as its page has
(`html`): the title (what ran) and the facts under it, the invariant table
(unknown printed UNKNOWN with its reason, never folded into PASS, and the
tally under it), the figures with their units, then the sections only some
runs have (a search's counterexample and the rows it reached; a chaos run's
lost tasks), how to replay a failure, and the closing line. What differs
between drivers is only which facts and figures their record holds, read from
it by name (`_TITLES`, `_FIGURES`), so a report.json read back
(`checkers.run.from_json`) prints the same text as the run did.

Times are written for a person: a Unix time on the store's clock (a chaos
run's reasons) as ISO 8601 UTC (`core.timeline.readable_times`), a simulated
time the core worded unrounded ("circuit open until 238.7556096241188") as
`t=238.76 s` (`rounded_times`); the JSON keeps both as recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shiftchange.checkers.history import UNKNOWN, Verdict, invariant_rows, tally
from shiftchange.checkers.run import Run
from shiftchange.core.table import packaged
from shiftchange.core.timeline import readable_times
from shiftchange.sim.scenarios import SCENARIOS

from ..summary import counted

__all__ = ["render", "render_minimal", "rounded_times"]

Rows = list[tuple[str, str]]


def render(run: Run) -> str:
    """The report a person reads of `run`: title and facts, invariants, figures, the driver's own sections, replay, ending."""
    lines = [*_TITLES[run.driver](run), "", "invariants", *_invariants(run.verdicts), tally(dict(run.verdicts))]
    heading, rows = _FIGURES[run.driver](run)
    if rows:
        lines += ["", heading, *_aligned(rows)]
    for section in _SECTIONS[run.driver](run):
        lines += ["", *section]
    ending = _ENDINGS.get(run.driver)
    if ending is not None:
        lines += ["", ending(run)]
    return rounded_times(readable_times("\n".join(lines) + "\n"))


def render_minimal(minimal: dict[str, Any]) -> str:
    """The shrinker's answer (the `minimal` object of the JSON report): the smallest failing run found, its timeline, its replay."""
    faults = len(minimal["faults_kept"])
    noun = "fault" if faults == 1 else "faults"
    lines = [f"shortest counterexample found: {minimal['tasks']} tasks, {faults} {noun} (after {minimal['runs']} runs)"]
    lines += [f"  {line}" for line in minimal["timeline"]]
    lines.append(f"replay: {minimal['replay']}")
    return rounded_times("\n".join(lines) + "\n")


RAW_TIME = re.compile(r"\b(until|by|at) (\d+\.\d{3,})(?![\w.])")
"""A simulated time as the core words it in a reason, the clock's float unrounded ("circuit open until 238.7556096241188")."""


def rounded_times(text: str) -> str:
    """`text` with each unrounded simulated time a recorded reason holds after "until", "by" or "at" written `t=238.76 s`.

    The core words its refusals with the clock's number as it is (it cannot tell a simulated clock from a Unix one);
    the `--json` report keeps the words as recorded, and the text a person reads rounds them as the rest of it does."""
    return RAW_TIME.sub(lambda found: f"{found.group(1)} t={float(found.group(2)):.2f} s", text)


# ------------------------------------------------------------------ the parts every run has


def _invariants(verdicts: Mapping[str, Verdict]) -> list[str]:
    """The invariant table as the checkers word it; when every unknown verdict gives the same one reason (a search
    stopped by a bound), the reason is said once under the table instead of under each row."""
    unknown = [verdict for verdict in verdicts.values() if verdict.status == UNKNOWN]
    reasons = {verdict.example for verdict in unknown}
    if len(unknown) > 1 and len(reasons) == 1 and len(next(iter(reasons))) == 1:
        shown = {name: Verdict(name, UNKNOWN, 0, ()) if v.status == UNKNOWN else v for name, v in verdicts.items()}
        return [*invariant_rows(shown), f"  ({len(unknown)} could not tell: {unknown[0].example[0]})"]
    return invariant_rows(dict(verdicts))


def _aligned(rows: Sequence[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


def _spec_words(run: Run) -> str:
    """`, spec LABEL (digest D)` for a run of a spec it was given; nothing for the packaged one."""
    spec = run.spec
    if not spec or spec.get("label") == packaged().label:
        return ""
    return f", spec {spec['label']} (digest {spec['digest']})"


# ------------------------------------------------------------------ a simulated run


def _sim_sections(run: Run) -> list[list[str]]:
    """A run that did not pass ends with the command that plays it again (a chaos run names its rerun among its facts;
    a search, its counterexample's replay)."""
    return [] if run.ok else [[f"replay: {run.replay}"]]


def _sim_title(run: Run) -> list[str]:
    subject = run.subject
    antipattern = f", anti-pattern {run.antipattern}" if run.antipattern is not None else ""
    changed = len(subject.get("settings_changed", ()))
    settings = f" with {changed} setting{'' if changed == 1 else 's'} changed" if changed else ""
    scenario = run.scenario if run.scenario in SCENARIOS else f"baseline (a {run.scenario} config)"
    return [
        f"shiftchange sim run: scenario {scenario}{settings}, seed {run.seed}, {run.tasks:,} tasks{antipattern}{_spec_words(run)}; "
        f"{counted(len(run.faults), 'fault')} injected, {subject['events_processed']:,} SimPy events, {run.wall_s:.1f} s wall"
    ]


def _sim_figures(run: Run) -> tuple[str, Rows]:
    metrics = run.metrics
    states = ", ".join(f"{state} {count:,}" for state, count in metrics["final_states"].items()) or "none"
    calls = ", ".join(f"{name} {count:,}" for name, count in metrics["provider_calls"].items()) or "none"
    sim_time_s = metrics["sim_time_s"]
    return "metrics", [
        ("tasks done", f"{metrics['tasks_done']:,} of {run.tasks:,}"),
        ("final states", states),
        ("attempts per task", f"mean {metrics['attempts_per_task']:.2f}, max {metrics['attempts_per_task_max']}"),
        ("leases", f"{metrics['leases']:,} granted, {metrics['lease_windows']:,} lease windows"),
        ("renewals", _renewals(metrics)),
        ("lease expiries", _expiries(metrics)),
        ("crash detect", _detect(metrics)),
        ("crash recover", _recover(metrics)),
        ("stale writes refused", f"{metrics['stale_writes_refused']:,}"),
        ("effects", f"{metrics['effects']:,} ({metrics['duplicate_effects']:,} duplicate)"),
        ("queue age", f"max {metrics['queue_age_s_max']:,.1f} s, p99 {metrics['queue_age_s_p99']:,.1f} s"),
        ("throughput", f"{metrics['throughput_tasks_per_h']:,.1f} tasks/h"),
        ("provider calls", calls),
        ("spend", f"${metrics['spend_usd']:,.2f}, {metrics['tokens']:,} tokens"),
        ("sim time", f"{sim_time_s:,.1f} s ({sim_time_s / 3600.0:.2f} h)"),
    ]


def _renewals(metrics: Mapping[str, Any]) -> str:
    return (
        f"{metrics['renewals_sent']:,} sent: {metrics['renewals_accepted']:,} accepted, {metrics['renewals_refused']:,} refused,"
        f" {metrics['renewals_unanswered']:,} unanswered (lost on the way, either way, or late)"
    )


def _expiries(metrics: Mapping[str, Any]) -> str:
    return (
        f"{metrics['expiries']:,}, of which {metrics['false_expiries']:,} false (the holder was alive, unpaused and renewing"
        f" when it ran out; {metrics['false_expiries_per_1000_leases']:g} per 1,000 leases)"
    )


def _crashes(metrics: Mapping[str, Any]) -> str:
    held = metrics["crashes_holding"]
    return f"{metrics['crashes']:,} crash{'' if metrics['crashes'] == 1 else 'es'}, {held:,} of a worker holding an Attempt"


def _detect(metrics: Mapping[str, Any]) -> str:
    count = metrics["crash_detect_count"]
    if count == 0:
        return f"none measured ({_crashes(metrics)}; none of their leases was seen to expire)"
    return f"mean {metrics['crash_detect_s_mean']:,.1f} s over {count:,} ({_crashes(metrics)})"


def _recover(metrics: Mapping[str, Any]) -> str:
    count = metrics["crash_recover_count"]
    if count == 0:
        return "none measured (no task whose Attempt a crash hit was claimed again)"
    return f"mean {metrics['crash_recover_s_mean']:,.1f} s, max {metrics['crash_recover_s_max']:,.1f} s over {count:,}"


# ------------------------------------------------------------------ a search


_CLOCKS = {
    "abstract": "abstract clock (states that differ only in when things happened are one)",
    "concrete": "concrete clock",
}


def _explore_title(run: Run) -> list[str]:
    search, spec = run.search or {}, run.spec
    how = "breadth-first" if search["strategy"] == "bfs" else f"depth-first to depth {search['depth_bound']}"
    reduction = "workers interchangeable" if search["symmetry"] else "no symmetry reduction"
    reduction += ", " + _CLOCKS[search.get("time", "concrete")]
    processes = f" over {search['processes']} processes" if search["processes"] > 1 else ""
    processes += ", partial-order reduction" if search["por"] else ""
    ran = spec.get("ran", spec)
    edit = f", run with the {run.antipattern} edit (digest {ran['digest']})" if ran["digest"] != spec["digest"] else ""
    bounds = (f", depth bound {search['depth_bound']}" if search["depth_bound"] is not None and search["strategy"] == "bfs" else "") + (
        f", state bound {search['states_bound']:,}" if search["states_bound"] is not None else ""
    )
    bounds += f", time limit {search['time_bound_s']:g} s" if search["time_bound_s"] is not None else ""
    return [
        run.replay.removeprefix("shiftchange "),
        f"  spec: {spec['label']} (digest {spec['digest']}){edit}",
        f"  {how}{processes}, {reduction}{bounds}",
    ]


def _explore_figures(run: Run) -> tuple[str, Rows]:
    search = run.search or {}
    pruned = f", {search['pruned']:,} steps skipped (their other order was taken)" if search["por"] else ""
    spilled = f", {search['spilled']:,} states waited on disk" if search["spilled"] else ""
    finishes = "yes, some run ends with every task done" if search["finishes"] else "no run found that ends with every task done"
    return "search", [
        ("states", f"{search['states']:,} distinct, {search['explored']:,} explored, {search['transitions']:,} transitions{pruned}"),
        ("depth", f"maximum {search['depth']}, {search['quiescent']:,} quiescent states"),
        ("the work can finish", finishes),
        ("speed", f"{search['elapsed_s']:.1f} s, {search['states_per_s']:,.0f} distinct states per second{spilled}"),
        (
            "fingerprints",
            f"states kept as {search['fingerprint_bits']}-bit fingerprints: the chance two of them collided is at most"
            f" {search['collision_probability']:.1e}",
        ),
        ("ending", _search_ending(search)),
    ]


def _search_ending(search: Mapping[str, Any]) -> str:
    stopped_by = search["stopped_by"]
    if stopped_by is None:
        return "the search completed: every reachable state was visited"
    if stopped_by == "violation":
        return "the search stopped at the first violation"
    if stopped_by == "depth":
        return f"INCOMPLETE: the depth bound left {search['cut']:,} states unexpanded"
    if stopped_by == "states":
        return f"INCOMPLETE: the state bound of {search['states_bound']:,} was reached"
    if stopped_by == "time":
        return f"INCOMPLETE: the time limit of {search['time_bound_s']:g} s was reached"
    return "INCOMPLETE: interrupted"


def _explore_sections(run: Run) -> list[list[str]]:
    sections = []
    example = run.subject.get("counterexample")
    if example is not None:
        shortest = " (a shortest path)" if (run.search or {}).get("strategy") == "bfs" else ""
        sections.append([f"{example['invariant']} is violated after {len(example['steps'])} steps{shortest}"])
        sections.append(["timeline:", *example["timeline"]])
        if not example.get("replays_on_concrete_clock", True):
            sections.append(
                [
                    "this path does not show the violation when played on the concrete clock (a state was judged as"
                    " ended on its abstract text): it may not happen with real timings"
                ]
            )
        sections.append(["replay:", f"  {example['replay']}"])
    coverage = []
    for machine, found in (run.coverage or {}).items():
        coverage.append(f"{machine} rows fired: {found['fired']} of {found['rows']}")
        coverage += [f"  never reached: {row}" for row in found["never_reached"]]
    if coverage:
        sections.append(coverage)
    return sections


def _explore_ending(run: Run) -> str:
    if run.subject.get("counterexample") is not None:
        return "FAIL: an invariant is violated on the path above"
    if (run.search or {}).get("complete"):
        return "no invariant is violated in any reachable state"
    return "no invariant is violated in any state visited (the search did not complete, so this is not a proof)"


# ------------------------------------------------------------------ a chaos run


def _chaos_title(run: Run) -> list[str]:
    s, m = run.subject, run.metrics
    spec = run.spec
    return [
        f"shiftchange chaos: {s['store']}, {s['workers']} workers, {s['duration_s']:g} s at {s['rate_per_s']:g} tasks/s,"
        f" seed {run.seed}, provider idempotency {'on' if s['idempotency'] else 'off'}; drain {m['drain_s']:.1f} s,"
        f" {run.wall_s:.1f} s wall",
        f"run dir: {s['run_dir']} (config.json, ledger.jsonl, report.json, logs/{', spec/' if spec.get('source') else ''})",
        *([f"spec: {spec['label']}, digest {spec['digest']}"] if spec else []),
        *([f"rerun: {run.replay}"] if run.replay else []),
    ]


_ORCHESTRATOR = "orchestrator"
"""The chaos orchestrator's process name, under which its scraped metrics are kept."""


def _chaos_figures(run: Run) -> tuple[str, Rows]:
    m = run.metrics
    rest = ", ".join(f"{state} {n}" for state, n in m["tasks_at_rest_otherwise"].items())
    skipped = m["faults_skipped"]

    def faults(kind: str, count: int | None, extra: str = "") -> str:
        missed = skipped.get(kind, 0)
        note = f" ({missed} skipped: no process to take it)" if missed else ""
        return f"{count:,}{extra}{note}"

    if m["connection_kills"] is None:
        connections = "n/a on SQLite"
    else:
        connections = faults("conn_kill", m["connection_kills"], f" ({m['backends_terminated']:,} sessions terminated)")
        if m["connection_kill_error"]:
            connections += f"; {m['connection_kill_error']}"
    if m["clock_skews"] is None:
        skews = m["clock_skews_note"]
    else:
        skew_s = run.subject["fault_cadences"]["skew_s"]
        extra = f" ({m['clock_skews_ahead']:,} ahead, {m['clock_skews_behind']:,} behind, by {skew_s:g} s;"
        skews = faults("skew", m["clock_skews"], f"{extra} {counted(len(m['workers_skewed_at_end']), 'worker')} skewed at the end)")
    dropped = m["dropped_responses"]
    restarted = m["process_starts"].get("provider", 1) > 1
    dropped_words = (f", {dropped:,} dropped" + (" since the provider's last start" if restarted else "")) if dropped is not None else ""
    drops = faults("drop", m["drops_asked"], " asked" + (dropped_words or ", the provider's count unread"))
    pauses = [fault["hold_s"] for fault in run.faults if fault["kind"] == "pause"]
    pause_extra = f" of {min(pauses):.1f}-{max(pauses):.1f} s (lease {run.config['core']['lease_ttl_s']:g} s)" if pauses else ""
    stale = m["stale_writes_accepted"]
    processes = f"{m['unexpected_exit_count']} unexpected exits, {len(m['unclean_exits'])} unclean exits on SIGTERM"
    processes += f", {len(m['stragglers_killed'])} SIGKILLed at shutdown"
    rows = [
        (
            "tasks",
            f"{m['tasks_submitted']:,} submitted: {m['tasks_done']:,} done, "
            f"{sum(m['tasks_at_rest_otherwise'].values()):,} at rest otherwise{f' ({rest})' if rest else ''}, {m['tasks_lost']:,} lost",
        ),
        ("duplicate effects", f"{m['duplicate_effects']:,} in the ledger (effects beyond the first of one logical operation)"),
        ("stale writes", f"{m['stale_writes_refused']:,} refused (late); {'?' if stale is None else stale} accepted (fenced_writes)"),
        ("worker kills", faults("kill", m["worker_kills"])),
        ("pauses", faults("pause", m["pauses"], pause_extra)),
        ("orchestrator kills", faults("orchestrator_kill", m["orchestrator_kills"])),
        ("connection kills", connections),
        ("dropped responses", drops),
        ("clock skews", skews),
        ("time to detect", _seconds(m, "detect", "no expiry seen")),
        ("time to recover", _seconds(m, "recover", "none reclaimed")),
        (
            "events",
            f"{m['events']:,} written ({m['events_per_s']:,.1f}/s); {m['transactions_retried']:,} transactions retried"
            f" ({m['transactions_retried_per_s']:,.2f}/s)",
        ),
        ("effects", f"{m['effects']:,} landed at the provider ({m['effects_per_s']:,.1f}/s)"),
        ("throughput", f"{m['tasks_done_per_s']:.2f} tasks done/s (submitted {m['tasks_submitted_per_s']:.2f}/s)"),
        ("processes", processes),
    ]
    if m["submit_failures"]:
        rows.append(("submissions failed", f"{len(m['submit_failures'])}, e.g. {m['submit_failures'][0]}"))
    scraped = run.subject.get("scraped")
    if scraped is not None:
        rows.append(("metrics scraped", _scraped(scraped)))
    return "figures", rows


def _seconds(m: Mapping[str, Any], measure: str, what: str) -> str:
    count, of = m[f"{measure}_count"], m["strikes"]
    if not count:
        return f"none measured ({of} faults hit a worker holding a lease; {what})"
    p50, mean, top = m[f"{measure}_s_p50"], m[f"{measure}_s_mean"], m[f"{measure}_s_max"]
    return f"p50 {p50:.1f} s, mean {mean:.1f} s, max {top:.1f} s over {count} of {of} faults that hit a worker holding a lease"


def _scraped(scraped: Mapping[str, Any]) -> str:
    """What the processes' own metrics said when the drain ended: the orchestrator's duties and the workers' calls."""
    read = {name: found["samples"] for name, found in scraped.items() if "samples" in found}
    workers = [samples for name, samples in read.items() if name != _ORCHESTRATOR]

    def summed(sample: str) -> int:
        return round(sum(samples.get(sample, 0.0) for samples in workers))

    parts = [f"{len(read)} of {len(scraped)} processes read (each since its latest start)"]
    if _ORCHESTRATOR in read:
        own = read[_ORCHESTRATOR]
        accepted, expired = own.get("shiftchange_contracts_accepted_total", 0.0), own.get("shiftchange_leases_expired_total", 0.0)
        parts.append(f"orchestrator {accepted:,.0f} contracts accepted, {expired:,.0f} leases expired")
    if workers:
        accepted, refused = summed("shiftchange_contracts_accepted_total"), summed("shiftchange_contracts_refused_total")
        parts.append(f"workers {accepted:,} accepted, {refused:,} refused, {summed('shiftchange_calls_held_back_total'):,} held back")
    return "; ".join(parts)


def _chaos_sections(run: Run) -> list[list[str]]:
    m = run.metrics
    if not m["tasks_lost"]:
        return []
    return [[f"lost: {m['tasks_lost']} tasks not at rest after the drain, e.g. {', '.join(m['lost'][:5])}"]]


def _chaos_ending(run: Run) -> str:
    return "PASS: every invariant holds and no task was lost" if run.ok else "FAIL: see above; the processes' logs are in the run dir"


_TITLES: dict[str, Callable[[Run], list[str]]] = {"sim": _sim_title, "explore": _explore_title, "chaos": _chaos_title}
"""What ran, per driver: the title line and the facts under it, each read from the record."""
_FIGURES: dict[str, Callable[[Run], tuple[str, Rows]]] = {"sim": _sim_figures, "explore": _explore_figures, "chaos": _chaos_figures}
"""The figures section, per driver: its heading and its labelled rows, each read from the record's metrics or search."""
_SECTIONS: dict[str, Callable[[Run], list[list[str]]]] = {"sim": _sim_sections, "explore": _explore_sections, "chaos": _chaos_sections}
"""The sections a driver's run may add after the figures, in order (none when there is nothing to say)."""
_ENDINGS: dict[str, Callable[[Run], str]] = {"explore": _explore_ending, "chaos": _chaos_ending}
"""The closing line, for the drivers that print one."""
