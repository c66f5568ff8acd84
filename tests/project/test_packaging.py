"""What a user expects of an installed package: `python -m shiftchange`, `--version`, py.typed, a license, and no Hypothesis in the core.

The default tests run against whatever install the test command made (CI
installs the checkout fresh, not editable), so they prove the installed
package. The slow test builds a wheel from the checkout and reads it, to
prove what a release would ship.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata, resources
from pathlib import Path

import pytest

import shiftchange
from shiftchange.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CORE_PACKAGES = ("spec", "core", "sim", "cli")
"""Everything but the conformance kit: none of it may need Hypothesis."""


def requirement_names(requirements: list[str]) -> set[str]:
    """The distribution each requirement names (`dask[distributed]>=2024.1` names dask)."""
    return {re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower() for requirement in requirements}


def test_python_dash_m_shiftchange_runs_the_command():
    """Goal: `python -m shiftchange` is the console script's command, also from the checkout's root (no folder there shadows it)."""
    done = subprocess.run([sys.executable, "-m", "shiftchange", "--version"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"shiftchange {metadata.version('shiftchange')}\n"


def test_version_is_the_installed_distributions(capsys):
    """Goal: `shiftchange --version` and `shiftchange.__version__` both name the installed distribution's version."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"shiftchange {metadata.version('shiftchange')}\n"
    assert shiftchange.__version__ == metadata.version("shiftchange") == PYPROJECT["project"]["version"]


def test_the_package_ships_a_py_typed_marker():
    """Goal: type checkers read the installed package's annotations: the top package holds py.typed (PEP 561: it covers the subpackages)."""
    assert resources.files("shiftchange").joinpath("py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["shiftchange"]


def test_the_project_names_its_license_and_its_urls():
    """Goal: the metadata says MIT and ships the text, and points at the home page, the repository and the issue tracker."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the shiftchange authors" in text
    assert set(project["urls"]) == {"Homepage", "Repository", "Issues"}
    assert all(url.startswith("https://github.com/shiftchange/shiftchange") for url in project["urls"].values())


def test_hypothesis_is_a_dependency_of_the_kit_and_the_tests_not_of_the_core():
    """Goal: a plain install has no Hypothesis; the `testing` extra brings it, and `dev` (the test command's install) too."""
    project = PYPROJECT["project"]
    assert "hypothesis" not in requirement_names(project["dependencies"])
    assert "hypothesis" in requirement_names(project["optional-dependencies"]["testing"])
    assert "hypothesis" in requirement_names(project["optional-dependencies"]["dev"])


def test_the_core_the_simulator_and_the_command_import_without_hypothesis():
    """Goal: with Hypothesis made unimportable, every module outside the kit imports, and the command checks the spec."""
    script = f"""
import importlib, pkgutil, sys
sys.modules["hypothesis"] = None  # `import hypothesis` now raises ImportError
for name in {CORE_PACKAGES!r}:
    package = importlib.import_module("shiftchange." + name)
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
from shiftchange.cli.main import main
sys.exit(main(["spec", "check"]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_wheel_built_from_the_checkout_ships_what_a_user_expects(tmp_path):
    """Goal: the release itself holds the top package, py.typed, the spec tables and the license, with Hypothesis only as an extra."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.skip(f"pip could not build a wheel here (no network for the build backend?): {done.stderr.strip().splitlines()[-1:]}")
    (wheel,) = tmp_path.glob("shiftchange-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA"))
        lines = archive.read(f"{info}/METADATA").decode().splitlines()
    for shipped in ("shiftchange/__init__.py", "shiftchange/__main__.py", "shiftchange/py.typed", "shiftchange/spec/attempt.toml"):
        assert shipped in names
    assert f"{info}/licenses/LICENSE" in names
    assert "License-Expression: MIT" in lines
    assert {line.split(", ")[0] for line in lines if line.startswith("Project-URL: ")} >= {"Project-URL: Homepage"}
    hypothesis = [line for line in lines if line.startswith("Requires-Dist: hypothesis")]
    assert hypothesis and all("extra ==" in line for line in hypothesis)
