"""The text a person reads of a chaos run: what ran, each verdict, the figures with their units, where the run's folder is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .judging import _scraped_row
from .plan import _PROVIDER, CONN_KILL, DROP, KILL, ORCHESTRATOR_KILL, PAUSE, SKEW, ChaosReport

if TYPE_CHECKING:
    pass


# ------------------------------------------------------------------ the report


def render_text(report: ChaosReport) -> str:
    """The report a person reads: what ran, each invariant's verdict (as `sim run` prints them), then the figures.

    An invariant's example holds recorded words with the store's Unix times as bare numbers (a refusal's "expired at
    1796499303.79..."): they are written as ISO times here (`core.timeline.readable_times`); report.json keeps them as recorded.
    """
    from shiftchange.checkers.history import invariant_rows, tally
    from shiftchange.core.timeline import readable_times

    m = report.metrics
    lines = [
        f"shiftchange chaos: {report.store}, {report.workers} workers, {report.duration_s:g} s at {report.rate_per_s:g} tasks/s,"
        f" seed {report.seed}, provider idempotency {'on' if report.idempotency else 'off'}; drain {m['drain_s']:.1f} s,"
        f" {report.wall_s:.1f} s wall",
        f"run dir: {report.run_dir} (config.json, ledger.jsonl, report.json, logs/{', spec/' if report.spec.get('source') else ''})",
        *([f"spec: {report.spec['label']}, digest {report.spec['digest']}"] if report.spec else []),
        *([f"rerun: {report.rerun}"] if report.rerun else []),
        "",
        "invariants",
        *invariant_rows(dict(report.verdicts)),
        tally(dict(report.verdicts)),
        "",
        "figures",
        *_figure_rows(report),
    ]
    if m["tasks_lost"]:
        lines += ["", f"lost: {m['tasks_lost']} tasks not at rest after the drain, e.g. {', '.join(m['lost'][:5])}"]
    verdict = "PASS: every invariant holds and no task was lost" if report.ok else "FAIL: see above; the processes' logs are in the run dir"
    lines += ["", verdict]
    return readable_times("\n".join(lines) + "\n")


def _seconds(m: Mapping[str, Any], measure: str, what: str) -> str:
    count, of = m[f"{measure}_count"], m["strikes"]
    if not count:
        return f"none measured ({of} faults hit a worker holding a lease; {what})"
    p50, mean, top = m[f"{measure}_s_p50"], m[f"{measure}_s_mean"], m[f"{measure}_s_max"]
    return f"p50 {p50:.1f} s, mean {mean:.1f} s, max {top:.1f} s over {count} of {of} faults that hit a worker holding a lease"


def _figure_rows(report: ChaosReport) -> list[str]:
    m = report.metrics
    rest = ", ".join(f"{state} {n}" for state, n in m["tasks_at_rest_otherwise"].items())
    skipped = m["faults_skipped"]

    def faults(kind: str, count: int | None, extra: str = "") -> str:
        missed = skipped.get(kind, 0)
        note = f" ({missed} skipped: no process to take it)" if missed else ""
        return f"{count:,}{extra}{note}"

    if m["connection_kills"] is None:
        connections = "n/a on SQLite"
    else:
        connections = faults(CONN_KILL, m["connection_kills"], f" ({m['backends_terminated']:,} sessions terminated)")
        if m["connection_kill_error"]:
            connections += f"; {m['connection_kill_error']}"
    if m["clock_skews"] is None:
        skews = m["clock_skews_note"]
    else:
        extra = f" ({m['clock_skews_ahead']:,} ahead, {m['clock_skews_behind']:,} behind, by {report.faults.skew_s:g} s;"
        skews = faults(SKEW, m["clock_skews"], f"{extra} {_counted(len(m['workers_skewed_at_end']), 'worker')} skewed at the end)")
    dropped = m["dropped_responses"]
    restarted = m["process_starts"].get(_PROVIDER, 1) > 1
    counted = (f", {dropped:,} dropped" + (" since the provider's last start" if restarted else "")) if dropped is not None else ""
    drops = faults(DROP, m["drops_asked"], " asked" + (counted or ", the provider's count unread"))
    pauses = [item.hold_s for item in report.delivered if item.kind == PAUSE]
    pause_extra = f" of {min(pauses):.1f}-{max(pauses):.1f} s (lease {report.config['core']['lease_ttl_s']:g} s)" if pauses else ""
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
        ("worker kills", faults(KILL, m["worker_kills"])),
        ("pauses", faults(PAUSE, m["pauses"], pause_extra)),
        ("orchestrator kills", faults(ORCHESTRATOR_KILL, m["orchestrator_kills"])),
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
    if report.scraped is not None:
        rows.append(("metrics scraped", _scraped_row(report.scraped)))
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


# ------------------------------------------------------------------ the command


def _counted(count: int, noun: str) -> str:
    """A count and its noun, singular for one (`1 worker`, `3 workers`)."""
    return f"{count:,} {noun if count == 1 else noun + 's'}"
