"""Diagrams in every format, PNG and SVG without Graphviz, and the design-review page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import matplotlib.colors
import pytest

from shiftchange.cli.main import main
from shiftchange.spec import load_spec
from shiftchange.spec.diagram import MARK_COLOURS, Marks, draw, place, render, to_dot, to_mermaid

SPEC = load_spec()
DOT_STATEMENT = re.compile(
    r'^\s*(//.*|digraph "\w+" \{|\}|(graph|node|edge) \[.*\];|"[\w ]+"( -> "[\w ]+")?( \[.*\])?;|subgraph "\w+" \{|label=.*;.*)$'
)


def test_mermaid_marks_terminals_fenced_edges_and_actors():
    text = to_mermaid(SPEC.attempt)
    assert "flowchart TD" in text.splitlines()[:3]
    assert 'succeeded((("succeeded")))' in text
    assert re.search(r"^    class .*\bquarantined\b.* terminal$", text, re.M)
    complete = next(row for row in SPEC.attempt.rows if row.trigger == "complete")
    expire = next(row for row in SPEC.attempt.rows if row.trigger == "expire")
    assert f'running ==>|"complete #{complete.index + 1}"| verifying' in text
    assert f'claimed -->|"expire #{expire.index + 1}"| suspect' in text
    # One linkStyle per edge, so every edge is coloured by its actor.
    edges = len(re.findall(r"(-->|==>)", text))
    assert len(re.findall(r"^    linkStyle \d+ ", text, re.M)) == edges


def test_dot_is_well_formed():
    text = to_dot(SPEC.task)
    assert text.count("{") == text.count("}")
    bad = [line for line in text.splitlines() if line.strip() and not DOT_STATEMENT.match(line)]
    assert not bad, bad
    assert '"done" [shape=doublecircle' in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed; the structural DOT test above still runs")
def test_dot_is_accepted_by_graphviz():
    result = subprocess.run(["dot", "-Tsvg"], input=to_dot(SPEC.attempt), capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "<svg" in result.stdout


@pytest.mark.parametrize("machine", ["attempt", "task"])
def test_png_without_graphviz(machine, tmp_path, capsys):
    output = tmp_path / f"{machine}.png"
    status = main(["spec", "diagram", "--machine", machine, "--format", "png", "-o", str(output), "--renderer", "matplotlib"])
    assert status == 0
    data = output.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 600 and height > 400
    assert "matplotlib" in capsys.readouterr().out


def test_svg_without_graphviz_is_xml(tmp_path):
    output = tmp_path / "attempt.svg"
    assert main(["spec", "diagram", "--machine", "attempt", "--format", "svg", "-o", str(output), "--renderer", "matplotlib"]) == 0
    assert ElementTree.parse(output).getroot().tag.endswith("svg")


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_text_formats_through_the_command_line(fmt, tmp_path):
    output = tmp_path / f"task.{fmt}"
    assert main(["spec", "diagram", "--machine", "task", "--format", fmt, "-o", str(output)]) == 0
    assert "in_progress" in output.read_text()


def test_unwritable_output_is_exit_2(tmp_path, capsys):
    assert main(["spec", "diagram", "--machine", "task", "--format", "png", "-o", str(tmp_path / "no" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_review_page_has_every_table_and_diagram(tmp_path):
    assert main(["spec", "review", "-o", str(tmp_path / "review"), "--renderer", "matplotlib"]) == 0
    page = (tmp_path / "review" / "review.md").read_text()
    for heading in ("## Structural properties", "## The attempt machine", "## The task machine", "## Failure domains", "## Invariants"):
        assert heading in page
    assert "![attempt machine](attempt.svg)" in page and (tmp_path / "review" / "attempt.svg").exists()
    assert "```mermaid" in page
    assert "| `authorization` | stop | 0 |" in page
    assert "| `single_owner` |" in page
    assert "**FAIL**" not in page
    rows = [line for line in page.splitlines() if re.match(r"^\| \d+ \| `", line)]
    assert len(rows) == len(SPEC.attempt.rows) + len(SPEC.task.rows)


def test_dot_stacks_in_place_writes_of_one_actor_into_one_loop():
    """Running's five fenced worker writes in place are one loop with a label per line, not five loops drawn over each other."""
    loops = [line for line in to_dot(SPEC.attempt).splitlines() if line.startswith('  "running" -> "running"')]
    assert len(loops) == 1
    for row in SPEC.attempt.rows:
        if row.trigger in ("renew", "grant_tool", "record_receipt", "report_call_failure", "checkpoint") and "running" in row.sources:
            assert f"{row.trigger} #{row.index + 1}" in loops[0]
    assert "penwidth=3" in loops[0]


# ------------------------------------------------------------------ deterministic bytes

_RENDER_ALL = """
import hashlib, sys
from shiftchange.spec import load_spec
from shiftchange.spec.diagram import Marks, draw_bytes, to_dot, to_mermaid
spec = load_spec()
marks = Marks(added=frozenset({0}), changed=frozenset({5}), removed=(spec.attempt.rows[2],))
for machine in spec.machines.values():
    for fmt in ("svg", "png"):
        print(machine.name, fmt, hashlib.sha256(draw_bytes(machine, fmt)).hexdigest())
    print(machine.name, "dot", hashlib.sha256(to_dot(machine).encode()).hexdigest())
    print(machine.name, "mermaid", hashlib.sha256(to_mermaid(machine).encode()).hexdigest())
print("marked", hashlib.sha256(draw_bytes(spec.attempt, "svg", marks)).hexdigest())
"""


def _digests(seed: str, code: str = _RENDER_ALL) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.heavy
def test_every_format_is_byte_identical_across_hash_seeds():
    """Two processes with different hash seeds draw every machine in every format (and a marked diff) to the same bytes."""
    first, second = _digests("1"), _digests("2")
    assert len(first) == 2 * 4 + 1
    assert first == second


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed; the matplotlib renderer's bytes are compared above")
def test_graphviz_output_is_byte_identical_across_hash_seeds(tmp_path):
    code = (
        "import sys\nfrom shiftchange.cli.main import main\n"
        "for fmt in ('svg', 'png'):\n"
        "    for machine in ('attempt', 'task'):\n"
        "        out = sys.argv[1] + '/' + machine + '.' + fmt\n"
        "        main(['spec', 'diagram', '--machine', machine, '--format', fmt, '--renderer', 'graphviz', '-o', out])\n"
    )
    for seed in ("1", "2"):
        (tmp_path / seed).mkdir()
        result = subprocess.run([sys.executable, "-c", code, str(tmp_path / seed)], env={**os.environ, "PYTHONHASHSEED": seed}, check=False)
        assert result.returncode == 0
    for name in ("attempt.svg", "task.svg", "attempt.png", "task.png"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name


# ------------------------------------------------------------------ nothing overlaps


def _geometry(machine, marks=None):
    """What matplotlib drew, in display units: every text's box, every state's box, and points along every edge."""
    figure = draw(machine, marks)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    texts = [(text.get_gid(), text.get_text(), text.get_window_extent(renderer)) for text in axes.texts if text.get_text()]
    states = {
        patch.get_gid()[len("state-") :]: patch.get_window_extent(renderer)
        for patch in axes.patches
        if (patch.get_gid() or "").startswith("state-")
    }
    placed = place(machine, marks)
    edges = {}
    for key, segments in placed.layout.paths.items():
        points = []
        for segment in segments:
            for step in range(21):
                t = step / 20
                if len(segment) == 2:
                    (x0, y0), (x1, y1) = segment
                    point = (x0 + t * (x1 - x0), y0 + t * (y1 - y0))
                else:
                    p0, p1, p2, p3 = segment
                    weights = ((1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t**3)
                    point = tuple(sum(w * p[i] for w, p in zip(weights, (p0, p1, p2, p3), strict=True)) for i in (0, 1))
                points.append((point[0] + 18.0, point[1] + placed.top))
        edges[key] = axes.transData.transform(points)
    return texts, states, edges


def _overlap(a, b, slack=0.5):
    return a.x0 < b.x1 - slack and b.x0 < a.x1 - slack and a.y0 < b.y1 - slack and b.y0 < a.y1 - slack


def _inside(point, box, slack=1.5):
    x, y = point
    return box.x0 + slack < x < box.x1 - slack and box.y0 + slack < y < box.y1 - slack


MARKED = Marks(added=frozenset({0}), changed=frozenset({13}), removed=(SPEC.attempt.rows[4],))


@pytest.mark.parametrize(
    "machine, marks", [(SPEC.attempt, None), (SPEC.task, None), (SPEC.attempt, MARKED)], ids=["attempt", "task", "diff"]
)
def test_no_two_labels_overlap_and_no_label_or_edge_hides_a_state(machine, marks):
    """Measured on what matplotlib drew: texts pairwise apart, only a state's name on its box, no edge across a label or another state."""
    texts, states, edges = _geometry(machine, marks)
    assert len(states) == len(machine.states)
    labels = [entry for entry in texts if not entry[0].startswith("name-")]
    assert sum(entry[0].startswith(("label-", "loop-")) for entry in texts) >= len(machine.rows) // 3
    for i, (gid, text, box) in enumerate(texts):
        for other_gid, other_text, other in texts[i + 1 :]:
            assert not _overlap(box, other), f"{text!r} ({gid}) overlaps {other_text!r} ({other_gid})"
        for state, state_box in states.items():
            if gid != f"name-{state}":
                assert not _overlap(box, state_box), f"{text!r} hides the state {state}"
            else:
                assert state_box.x0 <= box.x0 and box.x1 <= state_box.x1, f"the name of {state} overflows its box"
    for key, points in edges.items():
        for _gid, text, box in labels:
            assert not any(_inside(p, box) for p in points), f"edge {key} runs through the label {text!r}"
        ends = key.split("-from-")[1]
        for state, state_box in states.items():
            if state == ends:
                continue
            touching = [p for p in points if _inside(p, state_box)]
            # An edge may end on its destination's border, never run across another state.
            assert len(touching) <= 2, f"edge {key} crosses the state {state}"


def test_the_drawing_says_which_renderer_drew_it_and_explains_row_numbers(tmp_path, capsys):
    output = tmp_path / "attempt.svg"
    assert main(["spec", "diagram", "--machine", "attempt", "--format", "svg", "-o", str(output), "--renderer", "matplotlib"]) == 0
    assert "drawn by matplotlib" in capsys.readouterr().out
    svg = output.read_text()
    assert "drawn by shiftchange's layered layout with matplotlib" in svg
    assert 'id="attempt-row-' in svg
    texts, _states, _edges = _geometry(SPEC.attempt)
    assert any(gid == "renderer" and "drawn by matplotlib" in text for gid, text, _box in texts)
    assert any(gid == "legend-note" and "row N of the review page's transition table" in text for gid, text, _box in texts)
    ids = re.findall(r' id="([^"]+)"', svg)
    assert len(ids) == len(set(ids)), "an id appears twice in one drawing"


def test_marks_highlight_changed_rows_and_draw_removed_ones_as_ghosts(tmp_path):
    changed = SPEC.attempt.rows[13]
    removed = SPEC.attempt.rows[4]
    assert render(SPEC.attempt, "svg", tmp_path / "d.svg", "matplotlib", MARKED) == "matplotlib"
    svg = (tmp_path / "d.svg").read_text()
    assert f'id="changed-attempt-row-{changed.index + 1}-from-{changed.sources[0]}' in svg
    assert f'id="attempt-old-row-{removed.index + 1}-from-{removed.sources[0]}' in svg
    dot = to_dot(SPEC.attempt, MARKED)
    assert f'id="attempt-row-{changed.index + 1}-from-{changed.sources[0]}", color="{MARK_COLOURS["changed"]}:' in dot
    assert f"{removed.trigger} (old #{removed.index + 1})" in dot and 'class="removed"' in dot
    assert "(changed)" in to_mermaid(SPEC.attempt, MARKED)
    # Readable: a highlighted label's text is not its background's colour, and a removed row's ghost label has none.
    labels = {text.get_gid(): text for text in draw(SPEC.attempt, MARKED).axes[0].texts}
    ghost = labels[f"label-attempt-old-row-{removed.index + 1}-from-{removed.sources[0]}"]
    assert ghost.get_bbox_patch() is None
    highlighted = [text for gid, text in labels.items() if gid.startswith("label-") and text.get_bbox_patch() is not None]
    assert highlighted
    for text in highlighted:
        assert text.get_bbox_patch().get_facecolor()[:3] != matplotlib.colors.to_rgb(text.get_color())
