"""shiftchange: a specified state machine for durable agent execution, its reference core, and a simulator that attacks it.

The work lives in the subpackages, each a root folder of the repository:
`shiftchange.spec` (the tables), `shiftchange.core` (the reference core),
`shiftchange.stores` (the SQLite and PostgreSQL stores; the latter a package
of its own, `shiftchange.stores.postgres`), `shiftchange.agent` (the worker's
reference), `shiftchange.checkers` (the invariants' checkers and the one
record of a run), `shiftchange.sim` (the simulated world),
`shiftchange.explore` (the exhaustive explorer), `shiftchange.runtime` (real
processes on a wall clock; its chaos harness `shiftchange.runtime.chaos`),
`shiftchange.testing` (the conformance kit; its store suite
`shiftchange.testing.stores`), `shiftchange.lab` (everything
over runs of any driver: one run with its outputs, sweeps, phase maps,
tuners, a table put on trial; its reports `shiftchange.lab.report`) and
`shiftchange.cli` (the command). This
module only names the installed version, and imports none of them, so
`import shiftchange` stays cheap: the version is read from the installed
metadata on first use (importlib.metadata alone costs tens of milliseconds).
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        # The installed distribution's version, as `shiftchange --version` prints it; kept once read.
        value = globals()["__version__"] = version("shiftchange")
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
