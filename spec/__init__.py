"""The spec as data: transition tables, failure domains and invariants, with their checker.

Public surface: `load_spec` reads and validates the TOML files beside this
module (or a copy of them), `check_spec` runs the structural properties,
`CompiledMachine` is the lookup `core` drives, and `SpecError` is what a
malformed file raises.

Every name is imported on first use (PEP 562): the core imports
`shiftchange.spec.compiled` on every start, and that must not pull in the
checker (networkx) nor anything else it does not run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checker import Property, check_spec
    from .compiled import AmbiguousTransition, CompiledMachine
    from .loader import DEFAULT_DIRECTORY, SpecError, editing_directory, load_spec, shown_directory
    from .model import ACTORS, RESPONSES, FailureDomain, Invariant, Machine, Row, Spec, State

_WHERE = {
    "Property": "checker",
    "check_spec": "checker",
    "AmbiguousTransition": "compiled",
    "CompiledMachine": "compiled",
    "DEFAULT_DIRECTORY": "loader",
    "SpecError": "loader",
    "editing_directory": "loader",
    "load_spec": "loader",
    "shown_directory": "loader",
    "ACTORS": "model",
    "RESPONSES": "model",
    "FailureDomain": "model",
    "Invariant": "model",
    "Machine": "model",
    "Row": "model",
    "Spec": "model",
    "State": "model",
}
"""Each public name and the submodule that defines it."""

__all__ = [
    "ACTORS",
    "DEFAULT_DIRECTORY",
    "RESPONSES",
    "AmbiguousTransition",
    "CompiledMachine",
    "FailureDomain",
    "Invariant",
    "Machine",
    "Property",
    "Row",
    "Spec",
    "SpecError",
    "State",
    "check_spec",
    "editing_directory",
    "load_spec",
    "shown_directory",
]


def __getattr__(name: str) -> Any:
    submodule = _WHERE.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{submodule}", __name__), name)
    globals()[name] = value  # asked once: the next read is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
