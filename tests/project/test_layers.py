"""The layers hold: the agent is sans-I/O, every driver runs it, and no driver holds a decision that belongs in it.

DESIGN's rule for drivers: a driver that branches on a refusal code or a
guard name holds a decision that belongs in the agent. These tests read the
drivers' source (the AST, not the text, so a comment or docstring may still
name a guard) and fail on any such read, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shiftchange.core.machine import SPEC
from shiftchange.core.results import REFUSAL_CODES

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = {
    "sim": ["sim/worker.py", "sim/control.py"],
    "explore": sorted(str(p.relative_to(ROOT)) for p in (ROOT / "explore").glob("*.py") if p.name != "__init__.py"),
    "runtime": ["runtime/worker.py", "runtime/control.py"],
}
GUARDS = frozenset(SPEC.attempt.guards) | frozenset(SPEC.task.guards)
DECIDING_NAMES = frozenset({"FENCE_CODES", "LATE_CODES", "LEASE_GONE", "REFUSAL_CODES", "GUARD_CODES"})
DECIDING_ATTRIBUTES = frozenset({"code", "guards"})
NOT_IN_THE_AGENT = ("simpy", "sqlite3", "psycopg", "psycopg_pool", "threading", "time", "socket", "http", "urllib", "random", "asyncio")


def _tree(path: str) -> ast.AST:
    return ast.parse((ROOT / path).read_text(), filename=path)


def _modules(folder: str) -> list[Path]:
    """Every module of a layer's folder, its subpackages' included (stores/postgres/, runtime/chaos/, testing/stores/)."""
    return sorted((ROOT / folder).rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module if node.level == 0 else f"shiftchange.{Path(node.module).name}")
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _decisions(path: str, tree: ast.AST | None = None) -> list[str]:
    """Every place a driver reads a refusal's code or guards, names a code set, or compares with a guard or a refusal code."""
    found = []
    for node in ast.walk(_tree(path) if tree is None else tree):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and node.attr in DECIDING_ATTRIBUTES:
            found.append(f"{where} reads .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in DECIDING_NAMES:
            found.append(f"{where} uses {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in GUARDS:
            found.append(f"{where} names the guard {node.value!r}")
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Constant) and operand.value in REFUSAL_CODES:
                    found.append(f"{where} compares with the refusal code {operand.value!r}")
    return found


def test_every_driver_has_its_modules():
    for driver, paths in DRIVERS.items():
        assert paths, f"the {driver} driver has no modules"
        for path in paths:
            assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_no_driver_reads_a_refusal_code_or_a_guard_name(driver):
    found = [place for path in DRIVERS[driver] for place in _decisions(path)]
    assert not found, "decisions that belong in shiftchange.agent:\n" + "\n".join(found)


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_every_driver_runs_the_agent(driver):
    imported = set().union(*(_imports(_tree(path)) for path in DRIVERS[driver]))
    assert any(name.startswith("shiftchange.agent") for name in imported), f"no module of the {driver} driver imports shiftchange.agent"


def test_the_agent_is_sans_io():
    for path in sorted((ROOT / "agent").glob("*.py")):
        relative = str(path.relative_to(ROOT))
        for name in _imports(_tree(relative)):
            top = name.split(".")[0]
            assert top not in NOT_IN_THE_AGENT, f"{relative} imports {name}"
            assert not name.startswith(("shiftchange.sim", "shiftchange.explore", "shiftchange.runtime", "shiftchange.testing")), (
                f"{relative} imports the driver or kit module {name}"
            )


DATABASE_DRIVERS = ("sqlite3", "psycopg", "psycopg_pool", "psycopg2", "asyncpg")


def test_the_core_imports_no_database_driver_nor_a_store_adapter():
    """The core holds the store protocol and MemoryStore; every adapter that does I/O lives in shiftchange.stores."""
    for path in sorted((ROOT / "core").glob("*.py")):
        relative = str(path.relative_to(ROOT))
        for name in _imports(_tree(relative)):
            assert name.split(".")[0] not in DATABASE_DRIVERS, f"{relative} imports the database driver {name}"
            assert not name.startswith(("shiftchange.stores", "shiftchange.sim", "shiftchange.runtime", "shiftchange.explore")), (
                f"{relative} imports {name}, a layer above the core"
            )


def test_importing_the_core_loads_no_database_driver():
    """The import graph as Python walks it (the static check above cannot see an import hidden behind a call)."""
    import subprocess
    import sys

    probe = (
        "import sys, shiftchange.core, shiftchange.agent, shiftchange.checkers; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {DATABASE_DRIVERS!r} or m.startswith('shiftchange.stores')))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", f"importing the core, the agent and the checkers loaded {loaded}"


def test_the_stores_import_the_core_and_not_the_reverse():
    for path in _modules("stores"):
        relative = str(path.relative_to(ROOT))
        imported = _imports(_tree(relative))
        assert not any(
            name.startswith(("shiftchange.sim", "shiftchange.runtime", "shiftchange.explore", "shiftchange.testing")) for name in imported
        ), f"{relative} imports a driver or the kit"


def test_the_runtime_does_not_import_the_test_kit():
    for path in _modules("runtime"):
        relative = str(path.relative_to(ROOT))
        imported = _imports(_tree(relative))
        assert not any(name.startswith("shiftchange.testing") for name in imported), f"{relative} imports shiftchange.testing"


def test_the_checker_finds_each_kind_of_decision_planted_in_a_driver():
    planted = "def f(answer):\n    return 'no_call_in_flight' in answer.guards or answer.code == 'stale_fence' or LATE_CODES\n"
    found = _decisions("planted.py", ast.parse(planted))
    assert len(found) == 5, found  # the guard name, .guards, .code, the refusal code compared with, the code set


FORBIDDEN_IMPORTS = {
    "sim": ("shiftchange.lab",),
    "explore": ("shiftchange.lab", "shiftchange.sim", "simpy"),
    "runtime": ("shiftchange.lab",),
    "testing": ("shiftchange.runtime",),
    "checkers": ("shiftchange.lab", "shiftchange.sim", "shiftchange.explore", "shiftchange.runtime", "simpy"),
    "package": ("shiftchange.sim", "shiftchange.explore", "shiftchange.runtime", "shiftchange.lab", "simpy"),
}
"""Who may not import whom: the drivers never import the lab above them, the explorer neither the simulator nor SimPy,
the kit never the runtime it is meant to be pointed at, the checkers (and the one record of a run) no driver and no lab,
and the top-level modules (the anti-patterns) no driver."""


@pytest.mark.parametrize("folder", sorted(FORBIDDEN_IMPORTS))
def test_a_layer_imports_nothing_it_must_not(folder):
    forbidden = FORBIDDEN_IMPORTS[folder]
    found = []
    for path in _modules(folder):
        relative = str(path.relative_to(ROOT))
        found += [f"{relative} imports {name}" for name in sorted(_imports(_tree(relative))) if name.startswith(forbidden)]
    assert not found, "\n".join(found)


def test_the_layer_scans_reach_into_subpackages():
    """The scans above read every module of a layer, not only its top folder: the split packages are layers' modules too."""
    scanned = {str(path.relative_to(ROOT)) for folder in ("stores", "runtime", "testing") for path in _modules(folder)}
    assert {"stores/postgres/transaction.py", "runtime/chaos/run.py", "testing/stores/shared.py"} <= scanned


def test_the_forbidden_imports_check_finds_a_planted_import():
    planted = "from shiftchange.sim.world import play\nimport simpy\n"
    assert {name for name in _imports(ast.parse(planted)) if name.startswith(FORBIDDEN_IMPORTS["explore"])} == {
        "shiftchange.sim.world",
        "shiftchange.sim.world.play",
        "simpy",
    }


@pytest.mark.parametrize(
    ("module", "absent"), [("shiftchange.explore", ("simpy", "shiftchange.sim")), ("shiftchange.testing", ("shiftchange.runtime",))]
)
def test_importing_a_layer_loads_none_of_what_it_must_not(module, absent):
    """The import graph as Python walks it: exploring loads no SimPy (nor the simulator), the kit no runtime."""
    import subprocess
    import sys

    probe = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'simpy' or m.startswith({absent!r})))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", f"importing {module} loaded {loaded}"


def _cli_graph() -> dict[str, set[str]]:
    """The command line's modules and the ones of them each imports (at module level or inside a function)."""
    modules = {path.stem for path in (ROOT / "cli").glob("*.py") if path.stem != "__init__"}
    graph = {}
    for name in modules:
        imported = _imports(_tree(f"cli/{name}.py"))
        graph[name] = {
            other for other in modules if other != name and (f"shiftchange.{other}" in imported or f"shiftchange.cli.{other}" in imported)
        }
    return graph


def test_the_command_line_imports_in_one_direction():
    """Each command's module takes what it shares from cli.common, never from cli.main, and no module imports itself back
    through another: the graph of the command line's modules has no circle."""
    graph = _cli_graph()
    assert not [name for name, imported in graph.items() if "main" in imported], graph
    state: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", f"the command line imports in a circle: {' -> '.join((*path, name))}"
        state[name] = "open"
        for other in sorted(graph[name]):
            visit(other, (*path, name))
        state[name] = "done"

    for name in sorted(graph):
        visit(name, ())
    assert "common" in graph["main"] and not graph["common"]
