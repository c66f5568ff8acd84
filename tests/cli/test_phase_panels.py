"""A map's panels say what varies: a swept trigger parameter is named per column (or row), not given the template's value.

With `--axis trigger.for_s=15,120 --trigger "slowdown ... for=60 ..."`, every panel was titled `... for=60 ...`
(the heatmap and the text grid alike): one trigger duration for every column, and one no cell played.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shiftchange.cli.phase import _print
from shiftchange.lab.phase import panel_trigger
from shiftchange.lab.report.plot import draw_phase

TRIGGER = "slowdown model_provider at=400 for=60 factor=4"


def fake_map(axes: list[str], values: list[list[object]]) -> SimpleNamespace:
    """A map's cells as `draw_phase` and the text grid read them: one discipline, one trigger, every combination of values."""
    cells = []
    for across in values[0]:
        for down in values[1] if len(values) > 1 else [None]:
            cell = {"discipline": "none", "trigger": TRIGGER, "status": "recovers", "recovered": 1, "seeds": 1, axes[0]: across}
            if len(axes) > 1:
                cell[axes[1]] = down
            cells.append(cell)
    return SimpleNamespace(axes=axes, cells=cells, rows=[])


@pytest.mark.parametrize(
    ("axes", "title"),
    [
        (["trigger.for_s"], "slowdown model_provider at=400 factor=4; for= per column"),
        (["workload.arrival_rate_per_s", "trigger.for_s"], "slowdown model_provider at=400 factor=4; for= per row"),
        (["trigger.at_s", "trigger.factor"], "slowdown model_provider for=60; at= per column; factor= per row"),
        (["workload.arrival_rate_per_s"], TRIGGER),
        (["trigger.mode"], TRIGGER),  # a slowdown has no mode: the axis leaves it alone, so the title keeps the text whole
    ],
)
def test_a_panel_names_each_swept_trigger_parameter_by_where_it_varies(axes, title):
    assert panel_trigger(TRIGGER, axes) == title


def test_the_heatmaps_titles_give_no_one_duration_to_every_column():
    """Goal: the drawn panel's title says `for= per column`, and no `for=60` (no cell played 60 s)."""
    figure = draw_phase(fake_map(["trigger.for_s", "workload.arrival_rate_per_s"], [[15.0, 120.0], [0.06, 0.1]]))
    titles = [axis.get_title() for axis in figure.axes if axis.get_title()]
    assert titles == ["none\nslowdown model_provider at=400 factor=4; for= per column"]
    assert [tick.get_text() for tick in figure.axes[0].get_xticklabels()] == ["15", "120"]


def test_the_text_grids_heading_gives_no_one_duration_to_every_column(capsys):
    _print(fake_map(["trigger.for_s"], [[15.0, 120.0]]))
    heading = capsys.readouterr().out.splitlines()[1]
    assert heading == "none, trigger slowdown model_provider at=400 factor=4; for= per column: R recovers, M metastable, O overloaded" + (
        " (recovered/seeds)"
    )
