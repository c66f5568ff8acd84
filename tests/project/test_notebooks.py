"""Every notebook executes headless at the CI scale and its claims hold; the committed executed copy matches its source.

A notebook's claims are the assertions in its last cells, so a claim that
stops holding fails the notebook's execution here. The `.ipynb` beside each
source is what a code host shows: its cells must be the source's cells (run
`python notebooks/run.py NAME` after editing NAME.py to rewrite it).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("notebook_runner", ROOT / "notebooks" / "run.py")
runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runner)

NAMES = runner.notebooks()
PLOTS = re.compile(r"plt\.show\(\)|display\([^\n]*\.figure\(")
"""A cell that shows a figure: pyplot's `plt.show()`, or `display(...figure())` of a Figure drawn without pyplot."""


def figures_missing(notebook) -> list[str]:
    """Each plotting cell with no image/png output, and each output that is a figure's text alone (`<Figure size ...>`)."""
    missing = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", ())
        pngs = sum("image/png" in output.get("data", {}) for output in outputs)
        if PLOTS.search(cell.source) and pngs < len(PLOTS.findall(cell.source)):
            missing.append(f"cell {index} shows {len(PLOTS.findall(cell.source))} figure(s) but holds {pngs} image/png output(s)")
        for output in outputs:
            text = "".join(output.get("data", {}).get("text/plain", ""))
            if text.startswith("<Figure size") and "image/png" not in output.get("data", {}):
                missing.append(f"cell {index} holds a figure's text only: {text!r}")
    return missing


def test_the_five_notebooks_are_there() -> None:
    assert {"lease-tuning", "backoff", "retry-storm", "metastability", "capacity"} <= set(NAMES)


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells if "injected-parameters" not in cell.metadata.get("tags", ())]


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_is_its_source_executed(name: str) -> None:
    committed = ROOT / "notebooks" / f"{name}.ipynb"
    assert committed.exists(), f"notebooks/{name}.ipynb is missing: run python notebooks/run.py {name}"
    executed = nbformat.read(committed, as_version=4)
    assert _cells(executed) == _cells(runner.source(name)), f"notebooks/{name}.ipynb is stale: run python notebooks/run.py {name}"
    assert any(output.get("output_type") == "display_data" for cell in executed.cells for output in cell.get("outputs", ())), (
        f"notebooks/{name}.ipynb has no plot in its outputs"
    )
    assert not any(output.get("output_type") == "error" for cell in executed.cells for output in cell.get("outputs", ()))
    assert not figures_missing(executed), f"notebooks/{name}.ipynb: {figures_missing(executed)}"


@pytest.mark.heavy
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_its_claims_hold(name: str, tmp_path: Path) -> None:
    target = runner.execute(name, "ci", tmp_path)
    executed = nbformat.read(target, as_version=4)
    assert "papermill" not in executed.metadata
    assert _cells(executed) == _cells(runner.source(name))
    assert not figures_missing(executed), f"{name} executed: {figures_missing(executed)}"


def test_every_notebook_shows_a_figure_somewhere() -> None:
    """The check above has something to check: each notebook has at least one plotting cell its pattern finds."""
    for name in NAMES:
        assert any(PLOTS.search(cell.source) for cell in runner.source(name).cells if cell.cell_type == "code"), name


def test_off_a_terminal_the_runner_says_which_notebook_runs(monkeypatch, capsys, tmp_path: Path) -> None:
    """A CI log is not a terminal: no progress bar there, but one line on stderr as each notebook starts, stdout unchanged."""
    ran = []

    def execute(name: str, scale: str, out: Path) -> Path:
        ran.append(name)
        return out / f"{name}.ipynb"

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner.sys.stderr, "isatty", lambda: False, raising=False)
    names = runner.notebooks()[:2]
    assert runner.main([*names, "--scale", "ci", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert ran == names
    assert captured.err.splitlines() == [f"{name}: running at scale ci ..." for name in names]
    assert [line.split(":")[0] for line in captured.out.splitlines()] == names
