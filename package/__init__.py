"""shiftchange: a specified state machine for durable agent execution, its reference core, and a simulator that attacks it.

The work lives in the subpackages, each a root folder of the repository:
`shiftchange.spec` (the tables), `shiftchange.core` (the reference core),
`shiftchange.sim` (the simulator) and `shiftchange.cli` (the command). This
module only names the installed version, and imports none of them, so
`import shiftchange` stays cheap.
"""

from importlib.metadata import version

__version__ = version("shiftchange")
"""The installed distribution's version, as `shiftchange --version` prints it."""

__all__ = ["__version__"]
