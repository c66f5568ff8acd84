"""The run report a person looks at: one self-contained HTML file for a `sim run`, a search (`explore`) or a `chaos` run.

What it shows, top to bottom: what ran, the invariant table with each
verdict's evidence, the metrics, the series with the faults shaded, the fault
schedule, and one task's recovery timeline at a time, picked from a list.

The page is the HTML renderer of `lab.report`, beside the text (`text`), the
record (`record`) and the run's folder (`artifacts`, which holds
`report.html` too). It serves every driver through one driver-neutral value,
`RunPage` (`pages`): `sim_page` builds it from a simulated run, `explore_page`
from a search's record, `chaos_page` from a chaos report and the store it ran
on. Nothing here imports the runtime, and the runtime never imports this;
`cli.chaos` brings the two together.

Why it cannot disagree with the JSON report: every verdict and metric on the
page is read from the very object the JSON report is (`artifacts.report` for
a simulated run, `explore.report.to_record` for a search, `ChaosReport.to_json` for chaos: each a `checkers.run.Run`'s
one JSON shape), the series are the
recorder's rows (chaos: the judged history counted per window), and each
task's timeline is `core.timeline.build_timeline`'s, the one `shiftchange
timeline` prints, built from the same final read of the task the checkers
judged (the `Retired` entry) or from the store.

Why inline SVG and not the matplotlib PNG of `series.png`: one file that
needs nothing else must carry its figures, and SVG drawn here is small, crisp
at any width, carries a tooltip per fault, and needs no matplotlib to render
(chaos has no `plot_series` panels of its own). The panels are the ones
`plot.plot_series` draws, with each twin axis given a panel of its own.

Why so strict about the network: the page sets a Content-Security-Policy that
allows nothing but its own inline style and script and `data:` images, so a
reference to anything outside the file fails loudly in a browser instead of
quietly fetching. Every string that comes from a run (task ids, details,
examples, settings) is escaped before it enters the page; the one script
only shows and hides timelines already in the page, and reads no data.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shiftchange.checkers.history import Verdict, tally
from shiftchange.core import InputError
from shiftchange.core.timeline import Action, AttemptTimeline, Timeline, moment, offset

from .pages import (
    CHAOS_PANELS,
    SIM_PANELS,
    TIMELINE_TASKS_MAX,
    FaultTable,
    Panel,
    RunPage,
    Series,
    Span,
    TimelineSink,
    _text,
    chaos_page,
    explore_page,
    sim_page,
)

SUFFIXES = (".html", ".htm")

__all__ = [
    "CHAOS_PANELS",
    "SIM_PANELS",
    "TIMELINE_TASKS_MAX",
    "FaultTable",
    "Panel",
    "RunPage",
    "Series",
    "Span",
    "TimelineSink",
    "chaos_page",
    "check_report_path",
    "explore_page",
    "render",
    "sim_page",
    "write_page",
]


# ------------------------------------------------------------------ writing


def check_report_path(path: str | os.PathLike[str]) -> Path:
    """A path the page can be written to: an .html (or .htm) file in a writable folder that exists; else an InputError.

    Checked before a run starts, so a typo costs nothing and nothing is changed.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write the report to {path}: it is a folder, not a file")
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(f"cannot write the report to {path}: its name must end in .html")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"cannot write the report to {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"cannot write the report to {path}: it is not writable")
    return path


def write_page(page: RunPage, path: str | os.PathLike[str]) -> Path:
    """Render `page` into `path`, whole or not at all (written beside it, then renamed over it)."""
    path = check_report_path(path)
    text = render(page)
    # A name of our own rather than mkstemp's, so the page gets the permissions the umask gives any file, not 0600.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("x", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


# ------------------------------------------------------------------ rendering


def _e(value: Any) -> str:
    """Any value as escaped HTML text (attribute-safe: quotes are escaped too)."""
    return html.escape(str(value), quote=True)


def headline(report: Mapping[str, Any]) -> str:
    """The page's one word: FAIL when the run did not pass, PASS only when it passed and every invariant held, else
    INCOMPLETE (a search that stopped at a bound passed nothing it found, and proved nothing either)."""
    if not report["ok"]:
        return "FAIL"
    held = all(found["status"] == "ok" for found in report["invariants"].values())
    return "PASS" if held else "INCOMPLETE"


def render(page: RunPage) -> str:
    """The whole page as one HTML document: inline style and script, inline SVG, nothing fetched."""
    verdict = headline(page.report)
    body = [
        f'<header><h1>{_e(page.title)}</h1><p class="verdict {verdict.lower()}" id="overall">{verdict}: {_e(_tally(page.report))}</p>',
        "</header>",
        _summary(page),
        _invariants(page.report),
        _metrics(page.report),
        _series(page.series),
        _faults(page.faults),
        _timelines(page.timelines, page.timelines_note),
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_e(_POLICY)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(page.title)}</title>",
            f"<style>{_STYLE}</style>",
            "</head>",
            "<body>",
            "<main>",
            *body,
            "</main>",
            f"<script>{_SCRIPT}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


_POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def _tally(report: Mapping[str, Any]) -> str:
    """The line under the invariant table, worded by the checkers' own `tally`, as `sim run` and `chaos` print it."""
    invariants = report["invariants"]
    return tally({name: Verdict(name, found["status"], found["violations"], tuple(found["example"])) for name, found in invariants.items()})


def _section(key: str, heading: str, *parts: str) -> str:
    return f'<section id="{key}" class="section"><h2>{_e(heading)}</h2>\n' + "\n".join(parts) + "\n</section>"


def _summary(page: RunPage) -> str:
    rows = "".join(f'<tr><th scope="row">{_e(label)}</th><td>{_e(value)}</td></tr>' for label, value in page.facts)
    return _section("summary", "what ran", f'<table class="facts">{rows}</table>')


_LABELS = {"ok": "PASS", "violated": "FAIL"}


def _invariants(report: Mapping[str, Any]) -> str:
    rows = []
    for name, found in report["invariants"].items():
        status = found["status"]
        label = _LABELS.get(status, "UNKNOWN")
        if status == "ok":
            count = "0 violations"
        elif status == "violated":
            count = f"{found['violations']:,} violation{'' if found['violations'] == 1 else 's'}"
        else:
            count = "could not tell"
        evidence = f"<pre>{_e(chr(10).join(found['example']))}</pre>" if found["example"] else ""
        rows.append(
            f'<tr class="invariant {_e(status)}" data-invariant="{_e(name)}" data-status="{_e(status)}">'
            f'<td class="label">{label}</td><td><code>{_e(name)}</code></td><td>{_e(count)}</td><td>{evidence}</td></tr>'
        )
    table = _table("invariants", ("verdict", "invariant", "count", "evidence"), rows)
    note = "<p>An unknown verdict is not a pass: the checker could not tell, and says why beside it.</p>"
    return _section("invariants", "invariants", f"<p>{_e(_tally(report))}</p>", table, note)


def _table(css: str, headers: Sequence[str], rows: Sequence[str]) -> str:
    """A table of already rendered rows under escaped headers, in a box that scrolls sideways rather than overflow the page."""
    head = "".join(f"<th>{_e(header)}</th>" for header in headers)
    return f'<div class="wide"><table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _metrics(report: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr data-metric="{_e(name)}"><th scope="row"><code>{_e(name)}</code></th><td>{_e(_text(value))}</td></tr>'
        for name, value in report["metrics"].items()
    )
    note = "<p>Each name carries its unit (_s seconds, _usd dollars, _per_h per hour), as in the JSON report.</p>"
    return _section("metrics", "metrics", note, f'<div class="wide"><table class="metrics">{rows}</table></div>')


def _faults(table: FaultTable) -> str:
    if not table.rows:
        return _section("faults", "fault schedule", f"<p>No fault: {_e(table.note)}.</p>")
    rows = ["<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in table.rows]
    count = f"{len(table.rows):,} fault{'' if len(table.rows) == 1 else 's'}: {table.note}"
    return _section("faults", "fault schedule", f"<p>{_e(count)}.</p>", _table("faults", table.headers, rows))


# ------------------------------------------------------------------ the series, as inline SVG

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
_WIDTH_PX, _HEIGHT_PX = 960, 200
_LEFT_PX, _RIGHT_PX, _TOP_PX, _BOTTOM_PX = 64, 16, 12, 30
"""The chart's drawing box inside its viewBox: room on the left for the y labels and below for the x labels."""


def _series(series: Series) -> str:
    if not series.rows:
        return _section("series", "series", f"<p>No series was recorded ({_e(series.source)}).</p>")
    shaded = f" Faults are shaded red ({len(series.spans):,}); hover one for what it was." if series.spans else " No fault was played."
    intro = f"<p>{_e(series.source)}; x: {_e(series.axis)}.{_e(shaded)}</p>"
    charts = [_chart(series, panel) for panel in series.panels if any(column in series.rows[0] for column, _ in panel.columns)]
    return _section("series", "series", intro, *charts)


def _chart(series: Series, panel: Panel) -> str:
    """One panel as an SVG line chart: faults shaded first, then one polyline per column (broken where a value is missing)."""
    rows = series.rows
    columns = [(column, label) for column, label in panel.columns if column in rows[0]]
    end_s = max([row["t_s"] + row.get("window_s", 0) for row in rows] + [span.end_s for span in series.spans])
    end_s = max(end_s, 1e-9)
    values = [row[column] for row in rows for column, _ in columns if row[column] is not None]
    top = max([*values, 0]) or 1
    inner_w = _WIDTH_PX - _LEFT_PX - _RIGHT_PX
    inner_h = _HEIGHT_PX - _TOP_PX - _BOTTOM_PX

    def x(seconds: float) -> float:
        return _LEFT_PX + inner_w * min(max(seconds, 0.0), end_s) / end_s

    def y(value: float) -> float:
        return _TOP_PX + inner_h * (1 - value / top)

    parts = [f'<rect class="plot" x="{_LEFT_PX}" y="{_TOP_PX}" width="{inner_w}" height="{inner_h}"/>']
    for span in series.spans:
        left, right = x(span.start_s), x(span.end_s)
        title = f"<title>{_e(f'{span.label}: {offset(span.start_s)} to {offset(span.end_s)}')}</title>"
        width = max(right - left, 1.5)  # an instant fault (a dropped response) is still a visible line
        parts.append(f'<rect class="fault" x="{left:.1f}" y="{_TOP_PX}" width="{width:.1f}" height="{inner_h}">{title}</rect>')
    for index, (column, label) in enumerate(columns):
        colour = _COLOURS[index % len(_COLOURS)]
        for run in _unbroken(rows, column):
            points = " ".join(f"{x(row['t_s']):.1f},{y(row[column]):.1f}" for row in run)
            parts.append(f'<polyline stroke="{colour}" points="{points}"><title>{_e(label)}</title></polyline>')
    for fraction, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):  # the end label ends at the edge, not past it
        value, seconds = top * fraction, end_s * fraction
        parts.append(f'<text class="tick" x="{_LEFT_PX - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_e(_tick(value))}</text>')
        label_y = _HEIGHT_PX - 10
        parts.append(f'<text class="tick" x="{x(seconds):.1f}" y="{label_y}" text-anchor="{anchor}">{_e(_time_tick(seconds))}</text>')
    legend = "".join(
        f'<li><span class="swatch" style="background:{_COLOURS[index % len(_COLOURS)]}"></span>{_e(label)}</li>'
        for index, (_, label) in enumerate(columns)
    )
    svg = (
        f'<svg class="chart" viewBox="0 0 {_WIDTH_PX} {_HEIGHT_PX}" role="img" aria-label="{_e(panel.title)}">' + "".join(parts) + "</svg>"
    )
    caption = f"<figcaption>{_e(panel.title)} ({_e(panel.unit)})</figcaption>"
    return f'<figure class="panel" data-panel="{_e(panel.title)}">{caption}{svg}<ul class="legend">{legend}</ul></figure>'


def _unbroken(rows: Sequence[Mapping[str, Any]], column: str) -> list[list[Mapping[str, Any]]]:
    """The rows split where `column` has no value (no call answered in a window has no latency): one line per run of values."""
    runs: list[list[Mapping[str, Any]]] = [[]]
    for row in rows:
        if row[column] is None or (isinstance(row[column], float) and math.isnan(row[column])):
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(row)
    return [run for run in runs if run]


def _tick(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"


def _time_tick(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 600 else f"{seconds:.0f} s"


# ------------------------------------------------------------------ timelines


def _timelines(timelines: Sequence[Timeline], note: str) -> str:
    if not timelines:
        return _section("timeline", "task timelines", f"<p>No timeline to show: {_e(note)}.</p>")
    first = next((timeline for timeline in timelines if timeline.state != "done" or len(timeline.attempts) > 1), timelines[0])
    options = "".join(
        f'<option value="{_e(timeline.task_id)}"{" selected" if timeline is first else ""}>{_e(_choice(timeline))}</option>'
        for timeline in timelines
    )
    picker = f'<p><label for="task-picker">task</label> <select id="task-picker">{options}</select> {_e(note)}.</p>'
    views = [_timeline(timeline, hidden=timeline is not first) for timeline in timelines]
    return _section("timeline", "task timelines", picker, *views)


def _choice(timeline: Timeline) -> str:
    attempts = len(timeline.attempts)
    return f"{timeline.task_id}: {timeline.state}, {attempts} Attempt{'' if attempts == 1 else 's'}"


def _timeline(timeline: Timeline, hidden: bool) -> str:
    origin = timeline.created_at
    decision = "none yet" if timeline.decision is None else f"{timeline.decision}: {timeline.decision_reason}"
    if timeline.repeating_signature is None:
        repeats = f"none beyond the {timeline.repeats_allowed} allowed"
    else:
        repeats = f"{timeline.repeating_signature!r} repeats beyond the {timeline.repeats_allowed} allowed"
    facts = [
        ("objective", timeline.objective),
        ("state", timeline.state),
        ("created", moment(origin)),
        ("decision", decision),
        ("exhausted", timeline.exhausted or "none: another attempt fits"),
        ("repeated signature", repeats),
    ]
    budget = [
        f'<tr><th scope="row">{_e(line.name)}</th>'
        + "".join(f"<td>{_e(_amount(value, line.unit))}</td>" for value in (line.used, line.limit, line.left))
        + "</tr>"
        for line in timeline.budget
    ]
    parts = [
        f"<h3>task <code>{_e(timeline.task_id)}</code>: {_e(timeline.state)}</h3>",
        _facts(facts),
        _table("budget", ("budget", "used", "limit", "left"), budget),
        "<h4>task events</h4>",
        _actions(timeline.task_actions, origin),
        *(_attempt(attempt, origin) for attempt in timeline.attempts),
    ]
    opening = f'<article class="task-timeline" data-task="{_e(timeline.task_id)}"{" hidden" if hidden else ""}>'
    return opening + "\n".join(parts) + "</article>"


def _attempt(attempt: AttemptTimeline, origin: float) -> str:
    previous = attempt.previous_attempt_id
    recovery = "first dispatch" if previous is None else f"after {previous}: {attempt.recovery_reason}"
    worker = "never claimed" if attempt.worker_id is None else f"{attempt.worker_id}, lease generation {attempt.generation}"
    evidence = attempt.evidence
    facts = [
        ("hypothesis", attempt.hypothesis),
        ("recovery", recovery),
        ("worker", worker),
        ("path", " → ".join(attempt.state_path)),
        ("spend", f"{_amount(attempt.cost_usd, 'usd')}, {attempt.tokens:,} tokens, {_amount(attempt.elapsed_s, 's')} elapsed"),
        ("reconciliation", evidence.reconciliation or "not needed"),
    ]
    if attempt.backoff_s:
        facts.append(("backoff", f"waited {_amount(attempt.backoff_s, 's')} after a transient failure before it could be claimed"))
    if attempt.fallback:
        facts.append(("fallback", f"{attempt.fallback} (the frozen dependency changed)"))
    if evidence.evidence:
        facts.append(("verdict", evidence.evidence))
    if evidence.failure_domain:
        facts.append(("failure", f"{evidence.failure_domain}, signature {evidence.failure_signature!r}"))
    if evidence.claimed_result:
        facts.append(("worker's claim", f"{evidence.claimed_result} (head {attempt.head_sha or 'unknown'}; not evidence by itself)"))
    facts += [("receipt", f"{receipt.key} → {receipt.receipt or 'none recorded'}") for receipt in evidence.receipts]
    heading = f"<h4>Attempt {attempt.number} (<code>{_e(attempt.attempt_id)}</code>): {_e(attempt.state)}</h4>"
    return heading + _facts(facts) + _actions(attempt.actions, origin)


def _facts(facts: Sequence[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{_e(label)}</dt><dd>{_e(value)}</dd>" for label, value in facts) + "</dl>"


def _actions(actions: Sequence[Action], origin: float) -> str:
    if not actions:
        return "<p>none</p>"
    rows = []
    for action in actions:
        actor = action.worker_id or action.actor
        who = actor if action.generation is None else f"{actor} gen {action.generation}"
        if action.accepted:
            moved = "" if action.from_state == action.to_state else f"{action.from_state or ''} → {action.to_state}".strip()
            what = "  ".join(note for note in (moved, "" if action.reason == "accepted" else action.reason) if note)
            kind = "accepted"
        else:
            what = f"REFUSED ({action.reason})" + (" late" if action.late else "")
            kind = "refused late" if action.late else "refused"
        rows.append(
            f'<tr class="{kind}"><td>{_e(moment(action.at, origin))}</td><td>{_e(who)}</td><td><code>{_e(action.kind)}</code></td>'
            f"<td>{_e(what)}</td><td>{_e(action.detail)}</td></tr>"
        )
    return _table("actions", ("when", "who", "event", "what", "detail"), rows)


def _amount(value: float, unit: str) -> str:
    if unit == "usd":
        return f"${value:,.2f}"
    if unit == "s":
        return f"{value:,.0f} s"
    return f"{value:,.0f}"


# ------------------------------------------------------------------ style and script

_STYLE = """
:root { color-scheme: light; --fail: #b2182b; --pass: #1b7837; --unknown: #8a6d00; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
main { max-width: 1800px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 1.5em; margin: 0.4em 0; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
section { background: #fff; border: 1px solid #e4e4e4; border-radius: 6px; padding: 4px 16px 16px; margin: 16px 0; }
.verdict { font-weight: 600; padding: 6px 10px; border-radius: 4px; display: inline-block; }
.verdict.pass { background: #e6f4ea; color: var(--pass); }
.verdict.fail { background: #fde8e8; color: var(--fail); }
.verdict.incomplete { background: #fdf6e3; color: #7a5a00; }
table { border-collapse: collapse; }
th, td { text-align: left; vertical-align: top; padding: 3px 10px 3px 0; border-bottom: 1px solid #f0f0f0; }
.wide { overflow-x: auto; }
.invariant .label { font-weight: 700; }
.invariant.ok .label { color: var(--pass); }
.invariant.violated .label { color: var(--fail); }
.invariant.unknown .label { color: var(--unknown); }
pre { margin: 0; white-space: pre-wrap; font-size: 0.9em; }
code { font-size: 0.95em; }
figure.panel { margin: 12px 0; }
figcaption { font-weight: 600; }
svg.chart { width: 100%; height: auto; display: block; }
svg .plot { fill: #fcfcfc; stroke: #ccc; }
svg polyline { fill: none; stroke-width: 1.5; }
svg .fault { fill: #d62728; fill-opacity: 0.12; }
svg .tick { font-size: 11px; fill: #555; }
.legend { list-style: none; padding: 0; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 0.9em; }
.swatch { display: inline-block; width: 14px; height: 3px; margin-right: 6px; vertical-align: middle; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { color: #555; }
dl.facts dd { margin: 0; }
table.actions { width: 100%; }
table.actions td:nth-child(-n+3) { white-space: nowrap; }
tr.refused td { color: var(--fail); }
tr.late td:first-child::after { content: " late"; font-size: 0.8em; }
select { font: inherit; max-width: 100%; }
"""

_SCRIPT = """
(function () {
  const picker = document.getElementById("task-picker");
  if (picker === null) { return; }
  const show = function () {
    for (const view of document.querySelectorAll(".task-timeline")) { view.hidden = view.dataset.task !== picker.value; }
  };
  picker.addEventListener("change", show);
  show();
})();
"""
