"""What every benchmark script shares: the word for a target's verdict, the type of a count argument, and
the previous release's code as a tree a fresh interpreter can import, for figures measured side by side.

The scripts run as `python benchmarks/NAME.py`, so this folder is on their import path.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout these scripts belong to; its git history is where a baseline revision is read from."""
PACKAGE = "shiftchange"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def positive(text: str) -> int:
    """A command-line count of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def resolve_revision(revision: str) -> str:
    """The full commit id of `revision` in this checkout's history (SystemExit if git does not know it)."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"git does not know the revision {revision!r} in {ROOT}")
    return done.stdout.strip()


def materialise(revision: str, into: Path) -> Path:
    """Extract `revision` of this checkout under `into` and lay it out as an importable `shiftchange`; returns the path entry.

    The root folders install under one import package (pyproject's
    `[tool.setuptools.package-dir]`: `shiftchange` = package/, `shiftchange.core`
    = core/, ...), so a plain checkout cannot be imported. `git archive` writes
    the revision's files to `into/source` (no worktree is registered, nothing
    is left in the repository); `into/importable/shiftchange` is then a copy of
    the revision's `package/` with every other mapped folder linked inside it,
    as that revision's own pyproject.toml maps them. The tree is byte-compiled
    once, so no timed run pays for compiling it. Put the returned directory
    first on a fresh interpreter's PYTHONPATH: the editable install's finder is
    appended to `sys.meta_path`, after the path finder, so it does not win
    (`import_origin` checks that).
    """
    commit = resolve_revision(revision)
    source, importable = into / "source", into / "importable"
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {commit} failed:\n{archive.stderr.decode(errors='replace')}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")
    setuptools = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8")).get("tool", {}).get("setuptools", {})
    mapping: dict[str, str] = setuptools.get("package-dir", {})
    if PACKAGE not in mapping:
        raise SystemExit(f"{commit[:12]}'s pyproject.toml maps no folder to {PACKAGE!r}: {mapping}")
    # The parent package first, then each subpackage inside the (by then existing) folder of its parent.
    for name in sorted(mapping, key=lambda each: each.count(".")):
        folder, target = source / mapping[name], importable.joinpath(*name.split("."))
        if not (folder / "__init__.py").is_file():
            raise SystemExit(f"{commit[:12]}: {name} maps to {mapping[name]}/, which has no __init__.py")
        if name == PACKAGE:
            shutil.copytree(folder, target)
        else:
            if target.exists():
                raise SystemExit(f"{commit[:12]}: {name} maps to {mapping[name]}/, but {target} already exists")
            target.symlink_to(folder.resolve(), target_is_directory=True)
    # compileall does not follow the linked folders: each is compiled where it lies (its __pycache__ serves the link too).
    for name in mapping:
        compileall.compile_dir(importable.joinpath(*name.split(".")).resolve(), quiet=1, workers=1)
    return importable


def child_env(path_entry: Path | None) -> dict[str, str]:
    """The environment of a measuring subprocess: `path_entry` alone on PYTHONPATH, or none (the editable install, the current code)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    if path_entry is not None:
        env["PYTHONPATH"] = str(path_entry)
    return env


def import_origin(path_entry: Path | None, module: str = f"{PACKAGE}.core") -> Path:
    """Where a fresh interpreter with `child_env(path_entry)` imports `module` from."""
    code = f"import {module} as m; print(m.__file__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(path_entry), check=False)
    if done.returncode != 0:
        raise SystemExit(f"importing {module} with PYTHONPATH={path_entry} failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])


def check_origin(origin: str | Path, tree: Path, inside: bool) -> None:
    """SystemExit unless a module's file lies inside the baseline `tree` (`inside`) or outside it (the current code)."""
    if Path(origin).is_relative_to(tree) != inside:
        whose, where = ("the baseline", "not from its tree") if inside else ("the current code", "from the baseline's tree")
        raise SystemExit(f"{whose} imported from {origin}, {where} {tree}: it would be measured against itself")


@contextlib.contextmanager
def baseline_tree(revision: str) -> Iterator[Path]:
    """`materialise(revision)` in a temporary directory, checked to import from there (and the current code not), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="shiftchange-baseline-") as name:
        path_entry = materialise(revision, Path(name))
        check_origin(import_origin(path_entry), path_entry, inside=True)
        check_origin(import_origin(None), path_entry, inside=False)
        yield path_entry


def describe_current() -> str:
    """The current code as measured: where it imports from and, for this checkout, its HEAD and whether the tree differs from it."""
    origin = import_origin(None)
    if not origin.is_relative_to(ROOT):
        return f"the installed copy in {origin.parent.parent} (not this checkout's files: install it editable to measure them)"
    head = resolve_revision("HEAD")
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, check=False
    ).stdout.split("\n")
    changed = sorted({line[3:].split("/")[0] for line in dirty if line.strip()})
    return f"working tree at {head[:12]}" + (f" (uncommitted edits under: {', '.join(changed)})" if changed else " (clean)")


def run_child(argv: list[str], path_entry: Path | None, tree: Path) -> dict:
    """Run a measuring subprocess (`python argv...`) on the current code (`path_entry` None) or the baseline `tree`.

    Returns its last stdout line, parsed as JSON. The child reports `origin`,
    the file `shiftchange.core` was imported from, which is checked to be in
    the baseline tree for a baseline run and outside it for a current one.
    """
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=child_env(path_entry), check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measuring subprocess {argv} ({'baseline' if path_entry else 'current'}) failed:\n{done.stderr}")
    figures = json.loads(done.stdout.splitlines()[-1])
    check_origin(figures["origin"], tree, inside=path_entry is not None)
    return figures


def side_by_side_runs(
    title: str, revision: str, argv: list[str], repeat: int, show: Callable[[dict], str]
) -> tuple[list[dict], list[dict]]:
    """Run the measuring child `argv` on the current code and on `revision`, alternately (A, B, A, B, ...), `repeat` times
    each, printing what is compared and one line a run (`show` of its figures); returns (current runs, baseline runs)."""
    commit = resolve_revision(revision)
    print(f"{title}: current against {revision} ({commit[:12]}), {repeat} fresh processes each, alternately")
    print(f"   current  = {describe_current()}")
    current: list[dict] = []
    baseline: list[dict] = []
    with baseline_tree(commit) as path_entry:
        print(f"   baseline = {commit[:12]}, importable from {path_entry}")
        for _ in range(repeat):
            for entry, runs in ((None, current), (path_entry, baseline)):
                figures = run_child(argv, entry, path_entry)
                runs.append(figures)
                number = len(current) + len(baseline)
                print(f"   {number:>2}. {'current ' if entry is None else 'baseline'}  {show(figures)}")
    return current, baseline


def spread(values: list[float]) -> tuple[float, float, float]:
    """(minimum, median, maximum)."""
    return min(values), statistics.median(values), max(values)
