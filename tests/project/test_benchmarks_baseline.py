"""The benchmarks' baseline tree: a git revision laid out so a fresh interpreter imports `shiftchange` from it, not from the install.

`benchmarks/sim.py --baseline REV` and `benchmarks/store.py --baseline REV`
compare the current code with REV's, side by side; that comparison means
something only if the baseline's subprocesses really run REV's files.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None
    or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", "HEAD"], capture_output=True, check=False).returncode,
    reason="needs git and this checkout's history",
)


def benchmarks_common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_materialised_revision_is_what_a_fresh_interpreter_imports(tmp_path):
    common = benchmarks_common()
    path_entry = common.materialise("HEAD", tmp_path)
    mapping = tomllib.loads((tmp_path / "source" / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    for name in mapping:
        assert (path_entry.joinpath(*name.split(".")) / "__init__.py").is_file(), name
    for module in ("shiftchange", "shiftchange.core", "shiftchange.sim.world", "shiftchange.stores.sqlite"):
        assert common.import_origin(path_entry, module).is_relative_to(path_entry), module
    assert not common.import_origin(None).is_relative_to(path_entry)


def test_a_run_on_the_wrong_tree_is_refused(tmp_path):
    common = benchmarks_common()
    with pytest.raises(SystemExit, match="measured against itself"):
        common.check_origin(ROOT / "core" / "__init__.py", tmp_path, inside=True)
    with pytest.raises(SystemExit, match="measured against itself"):
        common.check_origin(tmp_path / "shiftchange" / "core" / "__init__.py", tmp_path, inside=False)


def test_an_unknown_revision_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="does not know"):
        benchmarks_common().materialise("no-such-revision-anywhere", tmp_path)
