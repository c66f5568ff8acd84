"""`shiftchange check-store MODULE:FACTORY`: the kit against a user's store, a PASS/FAIL line per check, and the exit status.

Exit 0 when every check passes, 1 when any fails (a store broken in one
contract), 2 when the argument names no usable factory, as one line on
stderr and never a traceback. A port is checked the way a user would check
one: a module of their own, importable from the current directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.testing import contract_checks, shared_store_checks, store_checks
from shiftchange.testing.stores import clock as kit_clock
from shiftchange.testing.stores import durability as kit_durability
from tests.conftest import unsynced

ROOT = Path(__file__).resolve().parents[2]
SHARED = len(shared_store_checks())
"""The two-handle checks: skipped for a MODULE:FACTORY target (one handle), run for an SQLite or PostgreSQL URL."""
CHECKS = len(store_checks()) + SHARED + len(contract_checks())
NO_CLOCK = len(kit_clock.CHECKS)
"""The checks of a store's own clock, through one handle: skipped for the memory and SQLite stores, which have none."""
NOT_DURABLE = len(kit_durability.CHECKS)
"""Skipped for the memory store, which does not say it is durable."""
MEMORY_SKIPS = SHARED + NO_CLOCK + NOT_DURABLE
"""What a memory store through one handle skips; SQLite skips SHARED + NO_CLOCK, and through two handles NO_CLOCK + 1."""


@pytest.fixture
def port(tmp_path, monkeypatch):
    """A user's package of store factories in the current directory, as `mypackage.stores`."""
    package = tmp_path / "mypackage"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "stores.py").write_text(
        textwrap.dedent(
            """
            import itertools, tempfile
            from pathlib import Path

            from shiftchange.core import MemoryStore
            from shiftchange.stores.sqlite import SQLiteStore

            _directory = Path(tempfile.mkdtemp(prefix="mypackage-"))
            _numbers = itertools.count()

            def make_store():
                return MemoryStore()

            def make_sqlite_store():
                return SQLiteStore(_directory / f"store-{next(_numbers)}.sqlite", busy_timeout_s=2.0)

            def reopen_sqlite_store(store):
                return SQLiteStore(store.path, busy_timeout_s=2.0)

            def make_nothing():
                return 42

            def make_raising():
                raise ConnectionError("the database is down")

            NOT_CALLABLE = "a string"
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in [name for name in sys.modules if name == "mypackage" or name.startswith("mypackage.")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path


def test_a_port_of_the_memory_store_passes_every_check(port, capsys):
    """Goal: a user's factory of conforming stores gets a PASS line per check, a summary of all passed, and exit 0."""
    assert main(["check-store", "mypackage.stores:make_store"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS  ") == CHECKS - MEMORY_SKIPS and out.count("SKIP  ") == MEMORY_SKIPS and "FAIL" not in out
    assert f"mypackage.stores:make_store: {CHECKS - MEMORY_SKIPS} of {CHECKS} checks pass; {MEMORY_SKIPS} skipped" in out
    assert f"store contract: {len(store_checks()) + SHARED} checks" in out


def test_a_port_of_the_sqlite_store_passes_every_check(port, capsys):
    """Goal: the SQLite store, a file per store the factory makes, passes the kit as the memory store does."""
    assert main(["check-store", "mypackage.stores:make_sqlite_store"]) == 0, capsys.readouterr().out
    skips = SHARED + NO_CLOCK
    assert f"{CHECKS - skips} of {CHECKS} checks pass; {skips} skipped" in capsys.readouterr().out


@pytest.mark.heavy
def test_a_port_of_the_sqlite_store_passes_through_two_handles_with_reopen(port, capsys):
    """Goal: `--reopen MODULE:FUNCTION` runs every two-handle check on the user's own factory, and the SQLite store passes them all
    (the store's own clock, which SQLite has not, is the only thing skipped, through one handle and through two)."""
    assert main(["check-store", "mypackage.stores:make_sqlite_store", "--reopen", "mypackage.stores:reopen_sqlite_store"]) == 0
    out = capsys.readouterr().out
    skips = NO_CLOCK + 1
    assert "store contract, through two handles:" in out and f"{CHECKS - skips} of {CHECKS} checks pass; {skips} skipped" in out
    assert "PASS  a_writer_killed_mid_transaction_leaves_nothing_visible" in out
    assert "PASS  a_writer_blocked_past_the_lock_timeout_gets_a_retryable_error_in_time" in out


def test_a_store_broken_in_one_contract_fails_with_exit_1(capsys, monkeypatch):
    """Goal: a store that keeps a rolled-back transaction's writes fails the rollback checks, named, with why, and exits 1."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["check-store", "tests.kit.broken_stores:make_unrollbacked"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  exception_rolls_back_every_write_of_the_transaction" in out
    assert "a task inserted by a rolled-back transaction: expected None" in out
    assert "PASS  task_round_trips_every_field" in out
    failed = out.count("FAIL  ")
    assert failed >= 2 and f"{CHECKS - MEMORY_SKIPS - failed} of {CHECKS} checks pass; {failed} fail; {MEMORY_SKIPS} skipped" in out


def test_the_command_line_exits_1_for_a_broken_store_without_a_traceback():
    """Goal: the installed command, run from the repository as a user would, exits 1 and writes nothing to stderr."""
    command = [sys.executable, "-m", "shiftchange", "check-store", "tests.kit.broken_stores:make_reordering"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    assert "FAIL  events_are_in_seq_order_and_filter_by_task_and_seq" in done.stdout


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mypackage.stores", "takes MODULE:FACTORY"),
        ("mypackage.absent:make_store", "cannot import mypackage.absent: ModuleNotFoundError"),
        ("mypackage.stores:make_nowhere", "mypackage.stores has no attribute 'make_nowhere'"),
        ("mypackage.stores:NOT_CALLABLE", "is a str, not a callable that makes a store"),
        ("mypackage.stores:make_nothing", "returned a int, not a Store"),
        ("mypackage.stores:make_raising", "make_raising() raised ConnectionError: the database is down"),
        (":make_store", "takes MODULE:FACTORY"),
    ],
)
def test_an_argument_that_names_no_store_factory_exits_2_with_one_line(port, capsys, target, message):
    """Goal: a target that cannot be imported, is missing, is not callable or makes no store is bad input: one line, exit 2."""
    assert main(["check-store", target]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and message in captured.err, captured.err
    assert "Traceback" not in captured.err


def test_stateful_adds_the_machine_with_a_small_budget(port, capsys):
    """Goal: --stateful runs the Hypothesis machine over the reference core on the user's store and reports it as one more check."""
    assert main(["check-store", "mypackage.stores:make_store", "--stateful", "--examples", "5"]) == 0
    out = capsys.readouterr().out
    assert "stateful machine, the reference core over this store (5 examples, seed 0): 1 check" in out
    assert "PASS  stateful_machine" in out and f"{CHECKS - MEMORY_SKIPS + 1} of {CHECKS + 1} checks pass; {MEMORY_SKIPS} skipped" in out


def test_stateful_fails_a_store_that_reorders_its_history(capsys, monkeypatch):
    """Goal: the machine reports a failure as FAIL with its message and the steps that reproduce it, and the command exits 1."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["check-store", "tests.kit.broken_stores:make_reordering", "--stateful", "--examples", "30"]) == 1
    out = capsys.readouterr().out
    stateful = out[out.index("stateful machine") :]
    assert "FAIL  stateful_machine" in stateful and "state = " in stateful


@pytest.mark.parametrize("argument", ["--examples=-1", "--examples=many", "--seed=x"])
def test_bad_options_exit_2(port, capsys, argument):
    """Goal: a negative or non-numeric budget or seed is a usage error, one line, exit 2."""
    assert main(["check-store", "mypackage.stores:make_store", argument]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_the_kits_public_names_are_exactly_what_it_exports():
    """Goal: every name in shiftchange.testing.__all__ resolves, and every public name it holds is in __all__: the surface is chosen."""
    import shiftchange.testing as kit

    assert all(getattr(kit, name) is not None for name in kit.__all__)
    public = {name for name in vars(kit) if not name.startswith("_") and name not in {"Any", "annotations"}}
    modules = {
        "checks", "contracts", "contracts_lease", "contracts_policy", "contracts_recovery", "judge", "rig", "stateful",
        "stateful_calls", "stores",
    }  # fmt: skip
    assert public - modules <= set(kit.__all__)


KIT_WITHOUT = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("hypothesis", "pytest"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Blocked())
import shiftchange.testing as kit
from shiftchange.core import MemoryStore
assert kit.check_store(MemoryStore).ok and kit.check_contracts(kit.reference_orchestrator(MemoryStore)).ok
try:
    kit.orchestrator_machine
except ImportError as error:
    print(error)
"""


def test_the_store_and_contract_suites_need_neither_pytest_nor_hypothesis():
    """Goal: with pytest and Hypothesis missing, both suites run, and asking for the machine says what to install."""
    done = subprocess.run([sys.executable, "-c", KIT_WITHOUT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "needs Hypothesis: pip install 'shiftchange[testing]'" in done.stdout


def test_a_memory_url_is_a_target_checked_through_one_handle(capsys):
    """`check-store memory:`: the kit over fresh memory stores; a memory store has no second handle, so those checks are skipped."""
    assert main(["check-store", "memory:"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert f"{CHECKS - MEMORY_SKIPS} of {CHECKS} checks pass; {MEMORY_SKIPS} skipped" in out and "through two handles" not in out


@pytest.mark.heavy
def test_a_sqlite_url_is_checked_through_two_handles(tmp_path, capsys):
    """`check-store sqlite:///DIR`: a new file per store in that directory, each opened a second time for the two-handle checks."""
    assert main(["check-store", f"sqlite:///{tmp_path}"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    skips = NO_CLOCK + 1  # the store's own clock, through one handle and through two: SQLite has none
    assert f"{CHECKS - skips} of {CHECKS} checks pass; {skips} skipped" in out and out.count("SKIP  ") == skips
    assert "store contract, through two handles:" in out and "PASS  a_writer_waits_for_the_other_handles_write_transaction" in out
    assert list(tmp_path.iterdir()) == [], "the files the kit made are removed"


def test_json_is_one_object_with_every_check_and_the_totals(capsys, monkeypatch):
    """Goal: --json prints only a JSON object: each suite's checks with name, goal, passed, skipped and detail, and totals that add up."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["check-store", "tests.kit.broken_stores:make_newest_first", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    checks = [check for suite in report["suites"] for check in suite["checks"]]
    assert report["target"] == "tests.kit.broken_stores:make_newest_first" and report["ok"] is False
    assert [suite["suite"] for suite in report["suites"]] == ["store contract", "contracts, the reference core over this store"]
    assert {tuple(check) for check in checks} == {("name", "goal", "passed", "skipped", "detail")}
    by_name = {check["name"]: check for check in checks}
    oldest = by_name["claimable_is_oldest_first_by_created_at_then_attempt_id"]
    assert oldest["passed"] is False and "oldest first" in oldest["detail"] and oldest["goal"].startswith("The claim queue")
    assert by_name["task_round_trips_every_field"] == {**by_name["task_round_trips_every_field"], "passed": True, "detail": ""}
    totals = report["totals"]
    assert totals["checks"] == len(checks) == CHECKS and totals["passed"] + totals["failed"] + totals["skipped"] == CHECKS
    assert totals["failed"] == sum(not c["passed"] and not c["skipped"] for c in checks) >= 3 and totals["skipped"] == MEMORY_SKIPS
    assert [suite["totals"]["checks"] for suite in report["suites"]] == [len(suite["checks"]) for suite in report["suites"]]


def test_json_keeps_bad_input_a_one_line_error_with_exit_2(port, capsys):
    """Goal: with --json, a target that names no factory is still exit 2 and one line on stderr, nothing on stdout."""
    assert main(["check-store", "mypackage.stores:make_nowhere", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and "no attribute" in captured.err


@pytest.mark.heavy
def test_check_store_passes_postgres_store_by_url_and_drops_its_schemas(postgres_url, capsys):
    """Done when: `shiftchange check-store` passes PostgresStore, unchanged, but for the one setting its URL turns off
    (synchronous_commit, for speed here: the durability check fails it, and only it); every schema it made is dropped after.

    Synced, the same command passes every check: benchmarks/check_store.py runs it, and tests/stores/test_transactions.py
    runs the store contract through two handles on a synced URL."""
    import psycopg

    assert main(["check-store", unsynced(postgres_url), "--stateful", "--examples", "5"]) == 1, capsys.readouterr().out
    out = capsys.readouterr().out
    assert f"{CHECKS} of {CHECKS + 1} checks pass; 1 fail" in out and "store contract, through two handles:" in out
    assert out.count("FAIL  ") == 1 and "FAIL  a_durable_store_runs_with_settings_a_commit_survives_a_crash_under" in out
    with psycopg.connect(postgres_url) as connection:
        (left,) = connection.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'check\\_%'").fetchone()
    assert left == 0


def test_a_sqlite_url_must_name_a_directory(tmp_path, capsys):
    assert main(["check-store", f"sqlite:///{tmp_path / 'missing'}"]) == 2
    assert "is not one" in capsys.readouterr().err


REOPENS = """
from shiftchange.core import MemoryStore

def make_store():
    return MemoryStore()

def reopen_nothing(store):
    return 42

def reopen_itself(store):
    return store

def reopen_raising(store):
    raise ConnectionError("no second connection")

def reopen_without_arguments():
    return MemoryStore()
"""


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("mypackage.reopens:reopen_nothing", "returned a int, not a Store"),
        ("mypackage.reopens:reopen_itself", "returned the store it was given"),
        ("mypackage.reopens:reopen_raising", "raised ConnectionError: no second connection"),
        ("mypackage.reopens:reopen_without_arguments", "raised TypeError"),
        ("mypackage.reopens:reopen_nowhere", "--reopen: mypackage.reopens has no attribute 'reopen_nowhere'"),
        ("mypackage.absent:reopen", "--reopen: cannot import mypackage.absent"),
        ("mypackage.reopens", "--reopen takes MODULE:FUNCTION"),
    ],
)
def test_a_reopen_that_opens_no_second_store_is_bad_input_with_one_line(port, capsys, argument, message):
    """Goal: --reopen is tried on a fresh store before any check runs: one that opens no store, or none of its own, is exit 2."""
    (port / "mypackage" / "reopens.py").write_text(REOPENS)
    assert main(["check-store", "mypackage.reopens:make_store", "--reopen", argument]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and message in captured.err, captured.err


def test_reopen_with_a_store_url_is_bad_input(capsys):
    """Goal: a store URL opens its own second handle; --reopen beside it is one line, exit 2."""
    assert main(["check-store", "memory:", "--reopen", "mypackage.stores:reopen"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--reopen goes with a MODULE:FACTORY target" in err and "memory::" not in err
