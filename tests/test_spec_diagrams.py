"""Diagrams in every format, PNG and SVG without Graphviz, and the design-review page."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree

import pytest

from shiftchange.cli.main import main
from shiftchange.spec import load_spec
from shiftchange.spec.diagram import to_dot, to_mermaid

SPEC = load_spec()
DOT_STATEMENT = re.compile(
    r'^\s*(//.*|digraph "\w+" \{|\}|(graph|node|edge) \[.*\];|"[\w ]+"( -> "[\w ]+")?( \[.*\])?;|subgraph "\w+" \{|label=.*;.*)$'
)


def test_mermaid_marks_terminals_fenced_edges_and_actors():
    text = to_mermaid(SPEC.attempt)
    assert text.splitlines()[1] == "flowchart TD"
    assert 'succeeded((("succeeded")))' in text
    assert re.search(r"^    class .*\bquarantined\b.* terminal$", text, re.M)
    assert 'running ==>|"complete · worker · fenced"| verifying' in text
    assert 'claimed -->|"expire · reaper"| suspect' in text
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
    for trigger in ("renew", "grant_tool", "record_receipt", "report_call_failure", "checkpoint"):
        assert f"{trigger} · worker · fenced" in loops[0]
    assert "penwidth=3" in loops[0]
