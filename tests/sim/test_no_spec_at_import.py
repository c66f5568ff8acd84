"""Nothing in the simulator compiles a spec when it is imported: each module reads the table of the run it serves
(the world's, the orchestrator's), or the packaged one when it is first asked for, never at import."""

from __future__ import annotations

import subprocess
import sys

IMPORT_EVERY_SIM_MODULE = """
import importlib, pkgutil
import shiftchange.sim as sim
for module in pkgutil.iter_modules(sim.__path__):
    importlib.import_module(f"shiftchange.sim.{module.name}")
for name in ("main", "sweep", "phase", "tune"):
    importlib.import_module(f"shiftchange.cli.{name}")
from shiftchange.core import table
assert table.packaged.cache_info().currsize == 0, "the packaged spec was compiled at import"
assert table._read.cache_info().currsize == 0, "a spec folder or revision was read at import"
print("no spec at import")
"""


def test_importing_the_simulator_compiles_no_spec():
    done = subprocess.run([sys.executable, "-c", IMPORT_EVERY_SIM_MODULE], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no spec at import"
