"""A package's docstring is its map: it names what the package holds, and nothing it no longer holds.

The top package's docstring named four of its subpackages when it held ten; the checks here read each package's
`__init__` docstring against what is installed.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.\w+)+)`")
"""A dotted name in backticks: `shiftchange.spec.compiled`, `history.Landed`, `Agenda.survey`."""


def resolves(base: Any, dotted: str) -> bool:
    """Whether `dotted` names an attribute or submodule path from `base` (a module)."""
    found = base
    for part in dotted.split("."):
        if hasattr(found, part):
            found = getattr(found, part)
            continue
        try:
            found = importlib.import_module(f"{found.__name__}.{part}")
        except (ImportError, AttributeError):
            return False
    return True


def test_the_top_package_names_every_subpackage():
    """Goal: `shiftchange`'s docstring says where the work lives: every subpackage the distribution installs."""
    doc = importlib.import_module("shiftchange").__doc__
    missing = [name for name in PACKAGES if name != "shiftchange" and f"`{name}`" not in doc]
    assert not missing, f"package/__init__.py's docstring does not name {missing}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_dotted_name_a_package_docstring_gives_is_there(package):
    """Goal: each `module.name` a package's docstring points at exists: from the package, from `shiftchange`, or from a sibling."""
    module = importlib.import_module(package)
    bases = [module, *(importlib.import_module(name) for name in PACKAGES)]
    names = DOTTED.findall(module.__doc__ or "")
    gone = [name for name in names if not any(resolves(base, name.removeprefix("shiftchange.")) for base in bases)]
    assert not gone, f"{package}'s docstring names what it does not hold: {gone}"


def test_the_dotted_names_are_found_at_all():
    """The check above has something to check: the docstrings name dozens of dotted paths."""
    assert sum(len(DOTTED.findall(importlib.import_module(name).__doc__ or "")) for name in PACKAGES) > 20
