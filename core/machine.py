"""The packaged spec's state sets by their old names, read on first use: nothing here compiles a spec at import.

The core itself reads its state sets from the `Table` it runs
(`context.table.leased`, `.expirable`, `.active`, ...); these names serve
code that asks about the packaged spec (operator tools, the simulator's
metrics). Importing a name from here compiles the packaged spec then, so
modules that are imported on every start ask `core.table.packaged()` when
they need it instead.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "SPEC": lambda table: table.spec,
    "ATTEMPT": lambda table: table.attempt,
    "TASK": lambda table: table.task,
    "ATTEMPT_TERMINAL": lambda table: table.attempt_terminal,
    "TASK_TERMINAL": lambda table: table.task_terminal,
    "TASK_RESTING": lambda table: table.task_resting,
    "TASK_DISPATCHABLE": lambda table: table.task_dispatchable,
    "LEASED": lambda table: table.leased,
    "EXPIRABLE": lambda table: table.expirable,
    "FENCED": lambda table: table.attempt.fenced_triggers,
    "ACTIVE": lambda table: table.active,
}


def __getattr__(name: str) -> Any:
    read = _NAMES.get(name)
    if read is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .table import packaged

    return read(packaged())
