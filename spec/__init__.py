"""The spec as data: transition tables, failure domains and invariants, with their checker.

Public surface: `load_spec` reads and validates the TOML files beside this
module (or a copy of them), `check_spec` runs the structural properties,
`CompiledMachine` is the lookup `core` drives, and `SpecError` is what a
malformed file raises.
"""

from .checker import Property, check_spec
from .compiled import AmbiguousTransition, CompiledMachine
from .loader import DEFAULT_DIRECTORY, SpecError, editing_directory, load_spec, shown_directory
from .model import ACTORS, RESPONSES, FailureDomain, Invariant, Machine, Row, Spec, State

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
