"""A sweep's answer: its rows grouped by the swept values, rates pooled over the seeds, each with its exact interval.

A sweep gives one row per run; the question it was run for ("which lease TTL
gives fewer than one false expiry in a thousand leases?") is about each grid
point, over all its seeds. `summarize` groups the rows by their swept values,
in the order the groups first appear (the sweep's run order), and gives each
group:

- its runs, and the runs that held every invariant, with the exact interval
  for the share that would;
- each pooled rate of `POOLED_RATES` whose two columns the rows have: the
  numerator's count summed over the group's runs, divided by the
  denominator's sum (false expiries per 1,000 leases is every false expiry of
  the ten seeds over every lease of the ten seeds), with the exact
  (Clopper-Pearson) interval for that many events in that many trials;
- for each invariant, the share of the runs that judged it (ok or violated;
  unknown is no verdict) in which it held, with its interval;
- the mean over the runs of a few headline metrics (`MEANS`).

Counts are pooled, never per-run rates averaged: a run of few leases would
weigh as much as one of many, a run with no leases has no rate at all, and an
average of rates has no binomial interval, while a pooled count of k events in
n trials has an exact one. The runs are taken to be draws of one rate, which
is what seeds of one grid point are. The interval is exact in the sense that
it never covers less than its confidence (it is conservative, and at zero
events still says how high the rate could be: "none in 3,594 leases" bounds it
below 1.03 per 1,000 at 95%); `shiftchange.lab.stats.binomial_interval` computes
it. Nothing is sampled: the same rows give the same summary.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shiftchange.core import InputError

from .stats import binomial_interval

__all__ = ["MEANS", "PER_1000", "POOLED_RATES", "SHARE", "PooledRate", "check_confidence", "counted", "pooled_rate", "summarize", "summary"]

PER_1000 = 1000.0
"""A rate per 1,000 trials (false expiries per 1,000 leases)."""
SHARE = 1.0
"""A rate as a share of the trials, 0 to 1 (printed as a percentage)."""


@dataclass(frozen=True)
class PooledRate:
    """A rate with a natural denominator: `numerator` events among `denominator` trials, both count columns of a sweep's row."""

    name: str
    """The summary's column for the pooled rate (and the `--metric` a plot of it takes); `.low` and `.high` are its interval."""
    numerator: str
    denominator: str
    scale: float
    """`PER_1000` or `SHARE`: the pooled fraction is multiplied by it."""
    label: str
    """A few words for a printed table's heading."""


POOLED_RATES: tuple[PooledRate, ...] = (
    PooledRate("false_expiries_per_1000_leases", "false_expiries", "leases", PER_1000, "false expiries /1k leases"),
    PooledRate("expiries_per_1000_leases", "expiries", "leases", PER_1000, "expiries /1k leases"),
    PooledRate("expiries_per_1000_lease_windows", "expiries", "lease_windows", PER_1000, "expiries /1k lease windows"),
    PooledRate("renewals_unanswered_share", "renewals_unanswered", "renewals_sent", SHARE, "renewals unanswered"),
    PooledRate("duplicate_effects_per_1000_effects", "duplicate_effects", "effects", PER_1000, "duplicate effects /1k effects"),
    PooledRate("tasks_done_share", "tasks_done", "tasks", SHARE, "tasks done"),
)
"""The rates pooled over a group's runs. A lease expires at most once, a lease window ends in one renewal or one expiry, a
renewal sent is answered or not, an effect is a duplicate or not, a task is done or not: each numerator counts a subset of
its denominator's trials, which is what a binomial interval needs."""

MEANS = ("throughput_tasks_per_h", "goodput_tasks_per_h", "queue_age_s_p99", "attempts_per_task")
"""Headline metrics averaged over a group's runs (those that have a value), as `mean.NAME`; these have no denominator to pool."""

_INVARIANT = "invariant."
_HELD, _VIOLATED = "ok", "violated"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for one: `1 run`, `2 runs`, `1,000 seeds` (`plural` when adding s is wrong)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def check_confidence(confidence: Any) -> float:
    """The confidence of every interval, a number strictly between 0 and 1; anything else is an `InputError`."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise InputError(f"the confidence must be a number strictly between 0 and 1 (0.95 is 95%), not {confidence!r}")
    return float(confidence)


def pooled_rate(rate: PooledRate, rows: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """One rate pooled over `rows`: `{"events", "trials", "value", "low", "high"}`, value and bounds scaled (None at no trials)."""
    events = sum(_count(row, rate.numerator) for row in rows)
    trials = sum(_count(row, rate.denominator) for row in rows)
    if events > trials:
        raise InputError(f"{rate.name}: {events:,} {rate.numerator} in {trials:,} {rate.denominator} is more events than trials")
    if trials == 0:
        return {"events": events, "trials": trials, "value": None, "low": None, "high": None}
    low, high = binomial_interval(events, trials, confidence)
    return {"events": events, "trials": trials, "value": rate.scale * events / trials, "low": rate.scale * low, "high": rate.scale * high}


def summarize(rows: Any, swept: Sequence[str] | str, confidence: float = 0.95) -> list[dict[str, Any]]:
    """One dict per group of `rows` (a sweep's rows, dicts or a DataFrame) with the same values of the `swept` columns.

    Groups come in the order their first row appears. Each holds the swept values, `runs`, `runs_ok` and `runs_ok.share`,
    `.low`, `.high`; for each pooled rate the rows can give, its value under its name, its interval as `NAME.low` and
    `NAME.high`, and the summed counts as `sum.NUMERATOR` and `sum.DENOMINATOR`; for each invariant, `invariant.NAME.held`
    and `.judged` runs and `.share`, `.low`, `.high` (None when no run judged it); and `mean.NAME` for each of `MEANS` the
    rows have. A rate with no trials in a group is None there. Bad input (no rows, a column the rows lack, a confidence
    outside (0, 1), a count that is no count) raises `InputError`.
    """
    confidence = check_confidence(confidence)
    listed = _records(rows)
    if not listed:
        raise InputError("there are no rows to summarize: the sweep played no run")
    swept = [swept] if isinstance(swept, str) else list(swept)
    columns = set().union(*listed)
    for column in swept:
        if column not in columns:
            raise InputError(f"the rows have no column {column!r} to group by; the swept columns are the grid's paths")
    if "ok" not in columns:
        raise InputError("the rows have no column 'ok': summarize takes a sweep's rows")
    rates = [rate for rate in POOLED_RATES if rate.numerator in columns and rate.denominator in columns]
    invariants = [column for column in dict.fromkeys(column for row in listed for column in row) if column.startswith(_INVARIANT)]
    means = [name for name in MEANS if name in columns]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in listed:
        groups.setdefault(tuple(_group_key(row.get(column)) for column in swept), []).append(row)
    return [_group(members, swept, rates, invariants, means, confidence) for members in groups.values()]


def summary(rows: Any, swept: Sequence[str] | str, confidence: float = 0.95) -> Any:
    """`summarize` as a pandas DataFrame, one row per group, when pandas is importable; else its list of dicts."""
    groups = summarize(rows, swept, confidence)
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        return groups
    return pandas.DataFrame(groups)


def _group(
    members: list[dict[str, Any]], swept: list[str], rates: list[PooledRate], invariants: list[str], means: list[str], confidence: float
) -> dict[str, Any]:
    first = members[0]
    group: dict[str, Any] = {column: first.get(column) for column in swept}
    held = sum(1 for row in members if _present(row.get("ok")) is True)
    group.update(runs=len(members), runs_ok=held)
    group.update(_share("runs_ok", held, len(members), confidence))
    for rate in rates:
        pooled = pooled_rate(rate, members, confidence)
        group[rate.name] = pooled["value"]
        group[f"{rate.name}.low"], group[f"{rate.name}.high"] = pooled["low"], pooled["high"]
        group[f"sum.{rate.numerator}"], group[f"sum.{rate.denominator}"] = pooled["events"], pooled["trials"]
    for column in invariants:
        statuses = [row.get(column) for row in members]
        ok, judged = statuses.count(_HELD), statuses.count(_HELD) + statuses.count(_VIOLATED)
        group[f"{column}.held"], group[f"{column}.judged"] = ok, judged
        group.update(_share(column, ok, judged, confidence))
    for name in means:
        values = [float(value) for row in members if (value := _present(row.get(name))) is not None]
        group[f"mean.{name}"] = sum(values) / len(values) if values else None
    return group


def _share(prefix: str, k: int, n: int, confidence: float) -> dict[str, float | None]:
    if n == 0:
        return {f"{prefix}.share": None, f"{prefix}.low": None, f"{prefix}.high": None}
    low, high = binomial_interval(k, n, confidence)
    return {f"{prefix}.share": k / n, f"{prefix}.low": low, f"{prefix}.high": high}


def _records(rows: Any) -> list[dict[str, Any]]:
    """Rows as dicts: a DataFrame's records (NaN as None), or an iterable of mappings."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        return [{column: _present(value) for column, value in record.items()} for record in rows.to_dict("records")]
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise InputError(f"summarize takes a sweep's rows (a list of dicts or a DataFrame), not {type(rows).__name__}")
    listed = list(rows)
    for row in listed:
        if not isinstance(row, Mapping):
            raise InputError(f"each row must be a mapping of column to value, not {type(row).__name__}")
    return [dict(row) for row in listed]


def _present(value: Any) -> Any:
    """None for a missing value, whether None or a float NaN (pandas' missing); numpy scalars as Python's."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _group_key(value: Any) -> Any:
    """A swept value as a group's key: 30 and 30.0 are one group (a CSV resumed may give either)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _count(row: Mapping[str, Any], column: str) -> int:
    value = _present(row.get(column))
    if value is None:
        raise InputError(f"a row has no value for {column!r}, which other rows count: give the rows of one sweep")
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or not float(value).is_integer():
        raise InputError(f"{column} must be a count (a whole number, not negative) in every row, not {value!r}")
    return int(value)
