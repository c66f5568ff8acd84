"""`spec diagram` and `spec review` as a user meets them: the format a file's name promises, a failing property, one-line errors.

`spec diagram --format png -o x.svg` wrote PNG bytes into x.svg; `spec review` printed only "wrote ..." and exited 0
when a property failed; and an error of a spec command came after its "read ..." line, two lines where the README
promises one. Commands given `--spec DIR|REV` (sim run, sweep, explore) held the same trap on stderr: the files read, then
the refusal.
"""

from __future__ import annotations

import pytest

from shiftchange.cli.main import main

BROKEN_INVARIANTS = ("invariants.toml", "[invariants.single_owner]", "[invariants.sole_owner]")
"""An edit that fails one structural property, `invariants.catalogued` (the catalogue names single_owner)."""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("shiftchange: "), err
    return err.removeprefix("shiftchange: ").rstrip("\n")


# ------------------------------------------------------------------ spec diagram: the file's suffix and --format


@pytest.mark.parametrize(("fmt", "name"), [("png", "x.svg"), ("svg", "x.png"), ("mermaid", "x.dot"), ("dot", "x.PNG")])
def test_a_format_the_files_suffix_contradicts_is_refused_before_anything_is_written(capsys, tmp_path, fmt, name):
    """Goal: `--format png -o x.svg` is one line and status 2, and no x.svg (PNG bytes in it would open as a broken SVG)."""
    output = tmp_path / name
    status, out, err = run(capsys, "spec", "diagram", "--machine", "task", "--format", fmt, "-o", str(output))
    assert (status, out) == (2, "")
    assert f"but --format is {fmt}" in one_line(err)
    assert not output.exists()


@pytest.mark.parametrize(("name", "starts"), [("task.svg", b"<?xml"), ("task.png", b"\x89PNG"), ("task.mmd", b"%% The task machine")])
def test_without_format_the_suffix_chooses_it(capsys, tmp_path, name, starts):
    """Goal: `-o task.svg` alone draws an SVG; the format named in the line printed is the one written."""
    output = tmp_path / name
    status, out, err = run(capsys, "spec", "diagram", "--machine", "task", "-o", str(output), "--renderer", "matplotlib")
    assert (status, err) == (0, "")
    assert output.read_bytes().startswith(starts)
    first, wrote = out.splitlines()
    assert first.startswith("read ") and wrote.startswith(
        f"wrote {output} (task machine, {dict(svg='svg', png='png', mmd='mermaid')[name[5:]]}"
    )


def test_a_suffix_no_format_claims_needs_format(capsys, tmp_path):
    """Goal: `-o task.txt` without --format is one line saying what to do; with --format it is written as asked."""
    output = tmp_path / "task.txt"
    status, out, err = run(capsys, "spec", "diagram", "--machine", "task", "-o", str(output))
    assert (status, out) == (2, "")
    assert "give --format" in one_line(err) and not output.exists()
    assert run(capsys, "spec", "diagram", "--machine", "task", "--format", "mermaid", "-o", str(output))[0] == 0
    assert "flowchart" in output.read_text()


# ------------------------------------------------------------------ spec review: a failing property


def test_review_of_a_spec_that_fails_a_property_names_it_and_exits_1(capsys, tmp_path, spec_copy):
    """Goal: the review page is still written (a reviewer reads it), and the command says FAIL with the witness, status 1."""
    spec_copy.replace(*BROKEN_INVARIANTS)
    page = tmp_path / "review"
    status, out, err = run(capsys, "spec", "review", "--spec", str(spec_copy.root), "-o", str(page), "--renderer", "matplotlib")
    assert (status, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"read {spec_copy.root}")
    failing = [line for line in lines if line.startswith("FAIL  ")]
    assert [line.split()[1] for line in failing] == ["invariants.catalogued"], out
    assert any(line.startswith("      witness: ") for line in lines), out
    assert f"wrote {page / 'review.md'} and {page / 'review.html'}" in lines
    assert lines[-1].endswith("properties hold; the page marks the failing ones FAIL")
    assert "FAIL" in (page / "review.md").read_text()


# ------------------------------------------------------------------ an error is the only line


def test_a_diagram_that_cannot_be_written_is_one_line_and_no_read_line(capsys, tmp_path):
    status, out, err = run(capsys, "spec", "diagram", "--machine", "task", "-o", str(tmp_path / "no" / "task.png"))
    assert (status, out) == (2, "")
    assert one_line(err) == f"cannot write {tmp_path / 'no' / 'task.png'}: directory {tmp_path / 'no'} does not exist"


def test_a_review_that_cannot_be_written_is_one_line_and_no_read_line(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    status, out, err = run(capsys, "spec", "review", "-o", str(blocker / "review"))
    assert (status, out) == (2, "")
    assert one_line(err).startswith(f"cannot create {blocker / 'review'}")


@pytest.mark.parametrize(
    "argv",
    [
        ["sim", "run", "--tasks", "2", "--set", "nosuch=1"],
        ["sim", "run", "--tasks", "2", "--plot", "/no/such/folder/x.png"],
        ["sim", "sweep", "--tasks", "2", "--grid", "nosuch=1,2"],
        ["explore", "--replay", "no-such-step"],
    ],
    ids=["run --set", "run --plot", "sweep --grid", "explore --replay"],
)
def test_a_refusal_after_spec_is_read_is_still_one_line(capsys, spec_copy, argv):
    """Goal: with --spec, the `read spec: ...` line is said only once the work begins: a refusal before it is the one line."""
    status, out, err = run(capsys, *argv, "--spec", str(spec_copy.root))
    assert (status, out) == (2, "")
    assert "read spec" not in one_line(err)


def test_with_spec_the_files_read_are_still_said_when_the_run_plays(capsys, spec_copy):
    status, out, err = run(capsys, "sim", "run", "--tasks", "2", "--spec", str(spec_copy.root), "--no-shrink")
    assert status == 0, err
    assert err.startswith("read spec: ") and err.count("\n") == 1
    assert "invariants" in out
