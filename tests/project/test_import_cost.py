"""What importing the core costs: no spec compiled, no checker (networkx), no distribution metadata.

`import shiftchange.core` is paid by every process the runtime starts and by
every command; a spec is compiled when something first runs a table
(`core.table.packaged()`, `table_for`), never at import. Each probe runs in a
fresh interpreter, so nothing this test session imported hides a cost.
Timing is left to the measurement in the report: a timed test would fail on
a busy machine, not on a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
import shiftchange.spec.loader as loader
loads = []
real = loader.load_spec
def spy(*args, **kwargs):
    loads.append(repr(args))
    return real(*args, **kwargs)
loader.load_spec = spy  # before the core binds it: any load at import is seen
for name in sys.argv[1:]:
    __import__(name)
import shiftchange.core.table as table
print(json.dumps({
    "loads": loads,
    "packaged": table.packaged.cache_info().currsize,
    "read": table._read.cache_info().currsize,
    "loaded": sorted(m for m in ("networkx", "importlib.metadata", "shiftchange.spec.checker", "transitions") if m in sys.modules),
}))
"""


def _probe(*modules: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_importing_the_core_compiles_no_spec_and_loads_neither_the_checker_nor_metadata():
    found = _probe("shiftchange.core")
    assert found["loads"] == [], "importing the core loaded a spec"
    assert found["packaged"] == 0 and found["read"] == 0, "importing the core compiled a table"
    assert found["loaded"] == [], f"importing the core imported {found['loaded']}"


@pytest.mark.parametrize(
    "module",
    [
        "shiftchange.runtime.control",
        "shiftchange.runtime.worker",
        "shiftchange.runtime.chaos",
        "shiftchange.agent",
        "shiftchange.stores.sqlite",
        "shiftchange.cli.operator",
        "shiftchange.cli.chaos",
    ],
)
def test_importing_the_runtime_and_the_stores_compiles_no_spec(module):
    found = _probe(module)
    assert found["loads"] == [] and found["packaged"] == 0 and found["read"] == 0, f"importing {module} compiled a spec"


def test_every_public_name_of_the_spec_package_and_the_version_are_still_there():
    probe = (
        "import importlib.metadata, shiftchange, shiftchange.spec as spec; "
        "missing = [name for name in spec.__all__ if getattr(spec, name, None) is None]; "
        "from shiftchange.spec import check_spec, Property, SpecError, load_spec, edits; "
        "from shiftchange import __version__; "
        "assert __version__ == importlib.metadata.version('shiftchange'), __version__; "
        "print(missing)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
