"""A sweep's table: its columns in a stable order, written as CSV or Parquet as rows arrive, and read back to resume."""

from __future__ import annotations

import csv
import importlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shiftchange.core import InputError

from .settings import format_value

if TYPE_CHECKING:
    from .sweep import Run

IDENTITY = ("scenario", "tasks", "antipattern", "seed", "config_digest", "spec_digest")
"""The columns that say which run a row is, before the swept paths; `config_digest` names the whole config the run played,
`spec_digest` the transition table (the packaged spec's digest when no spec was given)."""
_TAIL = ("ok", "digest", "replay")
_VERDICT_PREFIXES = ("invariant.", "violations.")
_ZERO_WHEN_MISSING = "final_states."
"""A final state no task of a run reached is a count of zero, not a missing value."""
WRITE_INTERVAL_S = 1.0
"""The output file is rewritten at most this often (wall seconds) while runs complete, and once at the end."""
_TEXT_COLUMNS = frozenset({"scenario", "antipattern", "config_digest", "spec_digest", "digest", "replay"})
_WHOLE_NUMBER = re.compile(r"-?\d+")
_PARQUET_MISSING = "writing .parquet needs pandas and pyarrow: pip install 'shiftchange[tables]'"


# ------------------------------------------------------------------ the table


def columns(rows: Iterable[Mapping[str, Any]], swept: Sequence[str]) -> list[str]:
    """The union of the rows' columns in a stable order: identity, swept paths, metrics, verdicts, digest, replay.

    Metrics keep the order they first appear in (the run order and the metrics' own order), with the
    members of one nested metric (`final_states.*`) sorted, so a state first reached late in a sweep
    still sits beside its siblings.
    """
    fixed = {*IDENTITY, *swept, *_TAIL}
    seen = [column for column in dict.fromkeys(column for row in rows for column in row) if column not in fixed]
    verdicts = [column for column in seen if column.startswith(_VERDICT_PREFIXES)]
    groups: dict[str, list[str]] = {}
    for column in seen:
        if not column.startswith(_VERDICT_PREFIXES):
            groups.setdefault(column.split(".", 1)[0], []).append(column)
    metrics = [column for group in groups.values() for column in sorted(group)]
    return [*IDENTITY, *swept, *metrics, *verdicts, *_TAIL]


def _complete(rows: list[Mapping[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    return [{column: row.get(column, 0 if column.startswith(_ZERO_WHEN_MISSING) else None) for column in order} for row in rows]


def _cell(value: Any) -> str:
    """A value as CSV text that `_parsed` reads back to the same value (floats print their shortest exact form)."""
    return "" if value is None else str(value)


def _parsed(column: str, text: str) -> Any:
    if text == "":
        return None
    if column in _TEXT_COLUMNS or column.startswith("invariant."):
        return text
    if text in ("True", "False"):
        return text == "True"
    if _WHOLE_NUMBER.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _texts(row: Mapping[str, Any], swept: Sequence[str]) -> dict[str, str]:
    """A row as the text a CSV holds: swept values as `--set` spells them, the rest as `_cell` does."""
    return {column: format_value(value) if column in swept else _cell(value) for column, value in row.items()}


def _write_csv(path: Path, rows: list[dict[str, Any]], order: list[str], swept: Sequence[str]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=order)
        writer.writeheader()
        writer.writerows(_texts(row, swept) for row in rows)


def _read_csv(path: Path, swept: Sequence[str]) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write_parquet(path: Path, rows: list[dict[str, Any]], order: list[str], swept: Sequence[str]) -> None:
    pandas = _parquet_modules()[0]
    pandas.DataFrame(rows, columns=order).to_parquet(path, index=False)


def _read_parquet(path: Path, swept: Sequence[str]) -> list[dict[str, str]]:
    parquet = _parquet_modules()[1]
    return [_texts(row, swept) for row in parquet.read_table(path).to_pylist()]


def _parquet_modules() -> tuple[Any, Any]:
    try:
        return importlib.import_module("pandas"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise InputError(_PARQUET_MISSING) from None


_FORMATS = {".csv": (_read_csv, _write_csv), ".parquet": (_read_parquet, _write_parquet)}


class _Output:
    """The sweep's file: what it already holds (for resuming), and its atomic, throttled rewrites."""

    def __init__(self, path: Path, swept: Sequence[str]) -> None:
        if path.suffix not in _FORMATS:
            raise InputError(f"--out must end in .csv or .parquet, not {path.name!r}")
        if path.suffix == ".parquet":
            _parquet_modules()
        self.path = path
        self.swept = list(swept)
        self.read, self._write = _FORMATS[path.suffix]
        self.written_at = -WRITE_INTERVAL_S
        self.rows_written = 0
        """How many rows the file holds: it is rewritten only when a run has added one."""
        self._probe()

    def _probe(self) -> None:
        """Fail before any run if the file could never be written."""
        try:
            with tempfile.TemporaryFile(dir=self.path.parent):
                pass
        except OSError as error:
            raise InputError(f"cannot write {self.path}: {error.strerror or error}") from None

    def resume(self, runs: list[Run]) -> dict[int, dict[str, Any]]:
        """The rows the file already holds, by run index; a row that is no run of this sweep is bad input."""
        if not self.path.exists():
            return {}
        try:
            texts = self.read(self.path, self.swept)
        except (OSError, ValueError, csv.Error) as error:
            raise InputError(f"cannot resume from {self.path}: {error}") from None
        by_key = {run.key(): run for run in runs}
        done = {}
        for text in texts:
            run = by_key.get(self._key(text))
            if run is None:
                raise InputError(
                    f"{self.path} holds a row that is no run of this sweep ({self._describe(text)}; a different config_digest means"
                    " other fixed settings, a different spec_digest another spec): choose another --out"
                )
            done[run.index] = self._typed(text, run)
        self.rows_written = len(done)
        return done

    def _key(self, text: Mapping[str, str]) -> tuple[str, ...]:
        missing = [column for column in (*IDENTITY, *self.swept) if column not in text]
        if missing:
            raise InputError(f"{self.path} is not a table of this sweep: it has no column {missing[0]!r}; choose another --out")
        return tuple(text[column] for column in (*IDENTITY, *self.swept))

    def _describe(self, text: Mapping[str, str]) -> str:
        return ", ".join(f"{column} {text[column] or '-'}" for column in (*IDENTITY, *self.swept))

    def _typed(self, text: Mapping[str, str], run: Run) -> dict[str, Any]:
        """An old row as the values a fresh run would give: the swept values are the run's own, the rest parsed from text."""
        row = {column: _parsed(column, value) for column, value in text.items()}
        row.update(run.swept)
        return row

    def flush(self, done: Mapping[int, dict[str, Any]], force: bool = False) -> None:
        """Rewrite the file with every row so far, in run order, if a row is new and a second has passed (or `force`)."""
        if len(done) == self.rows_written or (not force and time.monotonic() - self.written_at < WRITE_INTERVAL_S):
            return
        rows = [done[index] for index in sorted(done)]
        order = columns(rows, self.swept)
        self._replace(lambda temporary: self._write(temporary, _complete(rows, order), order, self.swept))
        self.written_at, self.rows_written = time.monotonic(), len(done)

    def _replace(self, write: Callable[[Path], None]) -> None:
        """Write beside the file, then rename over it: readers see the old table or the new, never a torn one."""
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        try:
            write(temporary)
            os.replace(temporary, self.path)
        except OSError as error:
            raise InputError(f"cannot write {self.path}: {error.strerror or error}") from None
        finally:
            temporary.unlink(missing_ok=True)
