"""Drawing and writing a run's time series: the CSV a script reads and the four panels a person looks at.

The panels are the ones a lease or capacity study reads first, one above the
other on a shared axis of simulated minutes: throughput (arrivals, tasks
done, admissions, sheds), the providers (calls offered and timed out, p99
latency), the queue (depth and the age of its oldest Attempt), and leases
(held, renewals unanswered, expiries true and false). Faults are shaded across
every panel, so cause and effect line up. matplotlib draws it off screen
(the Agg backend), so it works on a machine with no display.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shiftchange.sim.config import PROVIDERS


def check_figure_path(path: str | Path) -> Path:
    """A path a figure can be written to: a file name whose suffix matplotlib draws (png, svg, pdf, ...), in a folder that exists."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from shiftchange.core import InputError

    path = Path(path)
    kinds = FigureCanvasAgg.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in kinds:
        raise InputError(f"cannot draw {path}: a figure's name ends in one of .{', .'.join(sorted(kinds))}")
    if path.is_dir() or not path.parent.is_dir():
        raise InputError(f"cannot draw {path}: it must be a file in a folder that exists")
    return path


def write_series(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """The series as CSV, one row per window; a missing value (no call answered, so no latency) is an empty cell."""
    path = Path(path)
    columns = list(rows[0]) if rows else ["t_s", "window_s"]
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def plot_series(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "", faults: Sequence[Any] = ()) -> Path:
    """Draw the four panels of a run's series into `path` (PNG, SVG or PDF by its suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    minutes = [row["t_s"] / 60.0 for row in rows]
    figure, axes = plt.subplots(4, 1, figsize=(10, 11), sharex=True, layout="constrained")
    throughput, providers, queue, leases = axes
    _lines(throughput, minutes, rows, {"arrivals": "arrivals", "tasks_done": "done", "admissions": "admitted", "sheds": "shed"})
    throughput.set_ylabel("per window")
    throughput.set_title("throughput")
    for dependency in PROVIDERS:
        _lines(
            providers,
            minutes,
            rows,
            {
                f"{dependency}.offered": f"{dependency} offered",
                f"{dependency}.timed_out": f"{dependency} timed out",
                f"{dependency}.refused": f"{dependency} refused",
            },
        )
    providers.set_ylabel("calls per window")
    providers.set_title("providers")
    latency = providers.twinx()
    for dependency in PROVIDERS:
        _lines(latency, minutes, rows, {f"{dependency}.latency_s_p99": f"{dependency} p99 s"}, style=":")
    latency.set_ylabel("p99 latency (s)")
    _lines(queue, minutes, rows, {"queue_depth": "depth"})
    queue.set_ylabel("Attempts queued")
    queue.set_title("queue")
    age = queue.twinx()
    _lines(age, minutes, rows, {"queue_age_s": "oldest age s"}, style=":")
    age.set_ylabel("age (s)")
    _lines(leases, minutes, rows, {"leases_held": "held", "renewals_unanswered": "renewals unanswered", "expiries": "expiries"})
    _lines(leases, minutes, rows, {"false_expiries": "false expiries"}, style="--")
    leases.set_ylabel("leases")
    leases.set_title("leases")
    leases.set_xlabel("simulated time (min)")
    for axis in axes:
        for fault in faults:
            axis.axvspan(fault.at / 60.0, fault.until / 60.0, color="tab:red", alpha=0.08, linewidth=0)
        axis.grid(alpha=0.3)
    for axis, twin in ((providers, latency), (queue, age)):
        handles, labels = axis.get_legend_handles_labels()
        more_handles, more_labels = twin.get_legend_handles_labels()
        axis.legend(handles + more_handles, labels + more_labels, loc="upper right", fontsize="small")
    for axis in (throughput, leases):
        axis.legend(loc="upper right", fontsize="small")
    if title:
        figure.suptitle(title)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _lines(axis: Any, minutes: list[float], rows: Sequence[dict[str, Any]], columns: dict[str, str], style: str = "-") -> None:
    for column, label in columns.items():
        if rows and column in rows[0]:
            values = [float("nan") if row[column] is None else row[column] for row in rows]
            axis.plot(minutes, values, style, label=label, linewidth=1.2)


LOG_SPAN_DECADES = 2.0
"""A sweep's plot has a logarithmic y axis when the positive values it draws span more than this many decades."""


def plot_sweep(
    rows: Sequence[dict[str, Any]],
    x: str,
    y: str,
    path: str | Path,
    by: str | None = None,
    title: str = "",
    target: float | None = None,
    confidence: float = 0.95,
) -> Path:
    """One metric of a sweep against one swept setting: the mean over seeds as a line, their lowest and highest as a band.

    With `by` (a second swept setting), one line per value of it. Values keep the sweep's order; a setting that is not a
    number (a backoff strategy) is drawn as evenly spaced categories. Runs whose metric is missing (None) are left out,
    and runs that violated an invariant are marked with a red x, so a bad run is never averaged in unseen.

    When `y` names a pooled rate (`summary.POOLED_RATES`, such as false_expiries_per_1000_leases), the line is that rate
    pooled over each point's seeds (their events over their trials, not a mean of the runs' rates) with its exact
    interval at `confidence` as error bars; the band is still the lowest to highest seed's own rate. The y axis is
    logarithmic when the positive values drawn (means or pooled rates, bands, bounds, target) span more than
    `LOG_SPAN_DECADES` decades and none is negative (symmetric-log when one is zero, so a zero stays on the plot, at the
    bottom), else linear. `target` draws a labelled horizontal line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..summary import POOLED_RATES, check_confidence, counted, pooled_rate

    confidence = check_confidence(confidence)
    rate = next((rate for rate in POOLED_RATES if rate.name == y), None)

    def value_of(row: dict[str, Any]) -> float | None:
        if rate is None:
            return None if row.get(y) is None else float(row[y])
        trials = row.get(rate.denominator)
        return None if not trials or row.get(rate.numerator) is None else rate.scale * row[rate.numerator] / trials

    path = Path(path)
    groups: dict[Any, dict[Any, list[dict[str, Any]]]] = {}
    for row in rows:
        if value_of(row) is not None:
            groups.setdefault(row[by] if by else None, {}).setdefault(row[x], []).append(row)
    order = list(dict.fromkeys(row[x] for row in rows))
    numeric = all(isinstance(value, int | float) and not isinstance(value, bool) for value in order)
    place = (lambda value: value) if numeric else order.index
    figure, axis = plt.subplots(figsize=(8, 4.5), layout="constrained")
    drawn: list[float] = []
    shown = f"{100 * confidence:g}%"
    for label, points in groups.items():
        values = [value for value in order if value in points]
        xs = [place(value) for value in values]
        per_run = {value: [value_of(row) for row in points[value]] for value in values}
        seeds = max(map(len, per_run.values()))
        lowest, highest = [min(per_run[value]) for value in values], [max(per_run[value]) for value in values]
        if rate is None:
            means = [sum(per_run[value]) / len(per_run[value]) for value in values]
            line = axis.plot(xs, means, "o-", label=f"{by} = {label}" if by else f"mean of {counted(seeds, 'seed')}")[0]
            drawn += means
        else:
            pooled = [pooled_rate(rate, points[value], confidence) for value in values]
            centres = [one["value"] for one in pooled]
            below = [one["value"] - one["low"] for one in pooled]
            above = [one["high"] - one["value"] for one in pooled]
            name = f"{by} = {label}" if by else f"pooled over {counted(seeds, 'seed')}"
            line = axis.errorbar(xs, centres, yerr=[below, above], fmt="o-", capsize=4, label=f"{name} ({shown} exact interval)")[0]
            drawn += centres + [one["low"] for one in pooled] + [one["high"] for one in pooled]
        axis.fill_between(xs, lowest, highest, color=line.get_color(), alpha=0.15, linewidth=0)
        drawn += lowest + highest
    failed = [row for row in rows if row.get("ok") is False and value_of(row) is not None]
    if failed:
        axis.plot([place(row[x]) for row in failed], [value_of(row) for row in failed], "x", color="tab:red", label="violated an invariant")
    if target is not None:
        axis.axhline(target, color="tab:green", linestyle="--", linewidth=1.2, label=f"target = {target:g}")
        drawn.append(target)
    logarithmic = _log_scale(axis, drawn)
    if not numeric:
        axis.set_xticks(range(len(order)), [str(value) for value in order])
    axis.set_xlabel(x)
    axis.set_ylabel(f"{y} (log scale)" if logarithmic else y)
    axis.grid(alpha=0.3, which="both" if logarithmic else "major")
    axis.legend(fontsize="small")
    what = f"pooled over seeds, bars: exact {shown} interval; " if rate is not None else ""
    axis.set_title(title or f"{y} against {x}\n({what}band: lowest to highest seed)", fontsize="medium")
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _log_scale(axis: Any, drawn: Sequence[float]) -> bool:
    """Make the y axis logarithmic if the positive values drawn span more than `LOG_SPAN_DECADES`; whether it did.

    A zero cannot sit on a log axis, so with a zero among the values the axis is symmetric-log, linear from 0 up to the
    power of ten at or below the smallest positive value: the zero is drawn at the bottom, not dropped. A metric with a
    negative value drawn keeps its linear axis.
    """
    positive = [value for value in drawn if value > 0]
    if not positive or min(drawn) < 0 or math.log10(max(positive) / min(positive)) <= LOG_SPAN_DECADES:
        return False
    if any(value <= 0 for value in drawn):
        axis.set_yscale("symlog", linthresh=10 ** math.floor(math.log10(min(positive))), linscale=0.5)
        axis.set_ylim(bottom=0)
    else:
        axis.set_yscale("log")
    return True


PHASE_COLOURS = {"recovers": "#1b7837", "metastable": "#b2182b", "overloaded": "#7f7f7f", "unjudged": "#f0f0f0"}
"""Green, red, grey: readable in print, and told apart by the letter in each cell as well as by colour."""


def plot_phase(result: Any, path: str | Path) -> Path:
    """Draw `draw_phase`'s heatmaps into `path` (PNG, SVG or PDF by its suffix)."""
    path = check_figure_path(path)
    draw_phase(result).savefig(path, dpi=110)
    return path


def draw_phase(result: Any, discipline: str | None = None) -> Any:
    """A recoverability map as heatmaps: one panel per discipline (or only `discipline`) and trigger, each cell coloured by status.

    The first axis runs across, the second (if any) up; a map with more axes is drawn for its first two, so pass one
    whose other axes are fixed (`PhaseMap.where`). Each cell is labelled with its status letter and how many of its
    seeds recovered. The boundary between recovering cells and the rest is drawn as a heavy line along every cell edge
    where the status changes to or from `recovers`, so the region where the world comes back reads at a glance. Returns
    a matplotlib `Figure` made without pyplot, so drawing never changes the caller's backend (a notebook shows it with
    `display`).
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from ..phase import panel_trigger

    axes = result.axes
    across, down = axes[0], axes[1] if len(axes) > 1 else None
    panels: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in result.cells:
        if discipline is None or cell["discipline"] == discipline:
            panels.setdefault((cell["discipline"], cell["trigger"]), []).append(cell)
    count = max(1, len(panels))
    columns = min(count, 3)
    rows_of_panels = math.ceil(count / columns)
    figure = Figure(figsize=(5.2 * columns, 4.2 * rows_of_panels + 0.6))
    grid = figure.subplots(rows_of_panels, columns, squeeze=False)
    for number, ((name, trigger), cells) in enumerate(panels.items()):
        axis = grid[number // columns][number % columns]
        xs = list(dict.fromkeys(cell[across] for cell in cells))
        ys = list(dict.fromkeys(cell[down] for cell in cells)) if down else [None]
        status = {(cell[across], cell[down] if down else None): cell for cell in cells}
        for j, y in enumerate(ys):
            for i, x in enumerate(xs):
                cell = status.get((x, y))
                if cell is None:
                    continue
                axis.add_patch(Rectangle((i, j), 1, 1, color=PHASE_COLOURS[cell["status"]], alpha=0.85))
                label = f"{cell['status'][0].upper()}\n{cell['recovered']}/{cell['seeds']}"
                axis.text(i + 0.5, j + 0.5, label, ha="center", va="center", fontsize=8, color="white")
        _phase_boundary(axis, xs, ys, status)
        axis.set_xlim(0, len(xs))
        axis.set_ylim(0, len(ys))
        axis.set_xticks([i + 0.5 for i in range(len(xs))], [_tick(x) for x in xs], fontsize=8)
        axis.set_yticks([j + 0.5 for j in range(len(ys))], [_tick(y) for y in ys])
        axis.set_xlabel(across)
        axis.set_ylabel(down or "")
        axis.set_title(f"{name}\n{panel_trigger(trigger, axes)}", fontsize=9)
    for number in range(len(panels), rows_of_panels * columns):
        grid[number // columns][number % columns].axis("off")
    handles = [Rectangle((0, 0), 1, 1, color=colour) for colour in PHASE_COLOURS.values()]
    figure.legend(handles, list(PHASE_COLOURS), loc="lower center", ncol=len(PHASE_COLOURS), fontsize=8)
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    return figure


def _tick(value: Any) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _phase_boundary(axis: Any, xs: list[Any], ys: list[Any], status: dict[tuple[Any, Any], dict[str, Any]]) -> None:
    """A heavy line along each cell edge between a recovering cell and one that is not (the map's own edge is not drawn)."""

    def recovers(i: int, j: int) -> bool | None:
        if not (0 <= i < len(xs) and 0 <= j < len(ys)):
            return None
        cell = status.get((xs[i], ys[j]))
        return None if cell is None else cell["status"] == "recovers"

    for j in range(len(ys)):
        for i in range(len(xs)):
            here = recovers(i, j)
            right, above = recovers(i + 1, j), recovers(i, j + 1)
            if here is not None and right is not None and here != right:
                axis.plot([i + 1, i + 1], [j, j + 1], color="black", linewidth=2.5)
            if here is not None and above is not None and here != above:
                axis.plot([i, i + 1], [j + 1, j + 1], color="black", linewidth=2.5)
