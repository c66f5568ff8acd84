"""Execute the notebooks: each `notebooks/NAME.py` (jupytext percent format, the source) into `NAME.ipynb` with its outputs.

    python notebooks/run.py                       # every notebook at full scale, written beside its source
    python notebooks/run.py capacity --scale ci   # one notebook at the small scale CI runs
    python notebooks/run.py --scale ci --out /tmp/nb

The `.py` file is what a reviewer diffs; the `.ipynb` beside it is the same
cells executed, committed so a code host shows the plots without running
anything. Each notebook has one cell tagged `parameters` that sets `SCALE`;
papermill injects the chosen scale after it, as it does for any parameter.
A claim that fails is an `AssertionError` in the notebook's last cells, and
this command exits 1 naming the notebook and the cell. Volatile metadata
(timestamps, durations, kernel paths) is stripped, so executing an unchanged
notebook twice at one scale writes the same bytes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCALES = ("ci", "full")
CELL_TIMEOUT_S = 3600


def notebooks() -> list[str]:
    """The notebooks' names: every `.py` in this folder except this runner."""
    return sorted(path.stem for path in HERE.glob("*.py") if path.name != Path(__file__).name)


def source(name: str):
    """The notebook `name` read from its percent-format source."""
    import jupytext

    return jupytext.read(HERE / f"{name}.py", fmt="py:percent")


def strip(notebook) -> None:
    """Drop what changes from one execution to the next without the outputs changing."""
    notebook.metadata.pop("papermill", None)
    notebook.metadata.pop("widgets", None)
    notebook.metadata.get("kernelspec", {}).pop("env", None)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index:03d}"  # jupytext draws fresh random ids on every read
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)


def execute(name: str, scale: str, out: Path) -> Path:
    """Run notebook `name` at `scale` and write the executed notebook to `out`/NAME.ipynb; raise on a failed cell."""
    import nbformat
    import papermill

    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, not {scale!r}")
    notebook = source(name)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.ipynb"
    with tempfile.TemporaryDirectory() as scratch:
        unexecuted = Path(scratch) / f"{name}.ipynb"
        nbformat.write(notebook, unexecuted)
        papermill.execute_notebook(
            str(unexecuted),
            str(target),
            parameters={"SCALE": scale},
            kernel_name="python3",
            cwd=str(HERE),
            progress_bar=sys.stderr.isatty(),  # tqdm over the cells, on a terminal only: a log gets one line a notebook
            execution_timeout=CELL_TIMEOUT_S,
        )
    executed = nbformat.read(target, as_version=4)
    strip(executed)
    nbformat.write(executed, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute shiftchange's notebooks and write them with their outputs.")
    parser.add_argument("names", nargs="*", help=f"notebooks to run (default: all of {', '.join(notebooks())})")
    parser.add_argument("--scale", default="full", choices=SCALES, help="ci: the small scale CI runs; full: the published figures")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the executed .ipynb files (default: beside the sources)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in notebooks()]
    if unknown:
        parser.exit(2, f"run.py: no notebook {unknown[0]!r}; the notebooks are {', '.join(notebooks())}\n")
    failed = 0
    for name in args.names or notebooks():
        began = time.perf_counter()
        if not sys.stderr.isatty():  # no bar off a terminal (it would be a wall of carriage returns): say what runs instead
            print(f"{name}: running at scale {args.scale} ...", file=sys.stderr, flush=True)
        try:
            target = execute(name, args.scale, args.out)
        except Exception as error:  # papermill's PapermillExecutionError names the cell and the exception
            failed += 1
            first = str(error).strip().splitlines()
            print(f"{name}: FAILED at scale {args.scale}: {first[-1] if first else type(error).__name__}", file=sys.stderr)
            continue
        print(f"{name}: ran at scale {args.scale} in {time.perf_counter() - began:.0f} s -> {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
