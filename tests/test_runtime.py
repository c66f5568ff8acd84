"""The runtime's pieces apart from a chaos run: the admission leader lease, its fence, the configuration, the commands' refusals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shiftchange.core import InputError, LedgerProvider, ManualClock, MemoryStore, Orchestrator, Plan
from shiftchange.core.sqlite_store import SQLiteStore
from shiftchange.runtime.config import RuntimeConfig, load_config
from shiftchange.runtime.leadership import FencedStore, Leadership, NotLeader
from shiftchange.runtime.worker import worker_store_url


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    made = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "leader.sqlite")
    yield made
    made.close()


def test_one_leader_at_a_time_and_a_stale_one_is_fenced_out(store):
    """Goal: exactly one process leads admission; when its lease runs out another takes it, and the first is refused inside its tx."""
    clock = ManualClock(100.0)
    first = Leadership(store, "admission", "orchestrator-a", 3.0, clock)
    second = Leadership(store, "admission", "orchestrator-b", 3.0, clock)
    assert first.hold() and not second.hold()
    clock.advance(2.0)
    assert first.hold(), "the holder renews before expiry"
    clock.advance(2.5)
    assert not second.hold(), "renewed at 102 for 3 s: still held at 104.5"
    clock.advance(1.0)  # 105.5: expired (the first was paused and did not renew)
    assert second.hold() and second.generation == first.generation + 1
    with pytest.raises(NotLeader), store.transaction() as tx:
        first.check(tx)
    assert not first.hold(), "the woken first leader finds the lease taken and does not lead"
    with store.transaction() as tx:
        second.check(tx)


def test_a_fenced_admission_step_of_a_deposed_leader_records_nothing(store):
    """Goal: the admission step runs inside the leader's fence; a deposed leader's step is refused whole, no event, no admission."""
    clock = ManualClock(0.0)
    provider = LedgerProvider(clock=clock)
    plain = Orchestrator(store, clock, provider)
    plain.create_task("t1", "objective", "repo")
    plain.accept_task("t1")
    plain.dispatch("t1", Plan("hypothesis 1 for t1"))
    old = Leadership(store, "admission", "old", 3.0, clock)
    assert old.hold()
    fenced = Orchestrator(FencedStore(store, old), clock, provider)
    clock.advance(4.0)
    assert Leadership(store, "admission", "new", 3.0, clock).hold()
    before = len(store.events())
    with pytest.raises(NotLeader):
        fenced.run_admission()
    assert len(store.events()) == before
    assert store.get_attempts("t1")[-1].state == "queued"


def test_refresh_lets_admission_see_attempts_other_processes_ended(tmp_path):
    """Goal: an orchestrator's bulkhead counts what the store holds, once refreshed, not only the moves it saw itself."""
    from shiftchange.core import AdmissionConfig, ReliabilityConfig

    path = tmp_path / "shared.sqlite"
    clock = ManualClock(0.0)
    reliability = ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=1))
    with SQLiteStore(path) as mine, SQLiteStore(path) as theirs:
        admitting = Orchestrator(mine, clock, LedgerProvider(clock=clock), reliability=reliability)
        elsewhere = Orchestrator(theirs, clock, LedgerProvider(clock=clock), reliability=reliability)
        for task_id in ("t1", "t2"):
            admitting.create_task(task_id, "objective", "repo")
            admitting.accept_task(task_id)
            admitting.dispatch(task_id, Plan(f"hypothesis 1 for {task_id}"))
        admitting.run_admission()
        claim = elsewhere.claim_attempt("t1", "w1", "repo")
        lease = claim.lease
        elsewhere.start_attempt(lease.attempt_id, lease.generation, lease.token)
        elsewhere.report_failure(lease.attempt_id, lease.generation, lease.token, "executor", "executor:crashed")
        elsewhere.reconcile_attempt(lease.attempt_id)
        assert elsewhere.store.get_attempt(lease.attempt_id).state == "failed"
        stale = admitting.run_admission()
        assert all(result.state != "admitted" for result in stale.values())
        assert mine.get_attempts("t2")[-1].state == "queued", "without a refresh the slot still looks taken"
        admitting.refresh()
        results = admitting.run_admission()
        assert [r.state for r in results.values()] == ["admitted"]


def test_the_runtime_configuration_round_trips_and_refuses_unknown_settings(tmp_path):
    config = RuntimeConfig(tool_call_s=0.5)
    path = tmp_path / "config.json"
    path.write_text(config.to_json())
    assert load_config(path) == config
    path.write_text(json.dumps({"tool_call_seconds": 1}))
    with pytest.raises(InputError, match="unknown runtime setting"):
        load_config(path)
    with pytest.raises(InputError, match="leader_lease_s"):
        RuntimeConfig(leader_lease_s=0.1, admission_interval_s=0.3)


def test_a_worker_names_itself_to_postgresql_only():
    assert worker_store_url("postgresql://u@h/db", "w3") == "postgresql://u@h/db?application_name=shiftchange-worker:w3"
    assert worker_store_url("postgresql://u@h/db?schema=s", "w3").endswith("?schema=s&application_name=shiftchange-worker:w3")
    assert worker_store_url("sqlite:///run.db", "w3") == "sqlite:///run.db"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["worker", "--store", "memory:", "--provider", "http://127.0.0.1:9"], "store other processes can share"),
        (["orchestrator", "--store", "nosuch://x", "--provider", "http://127.0.0.1:9"], "store"),
        (["db", "migrate", "--store", "nosuch://x"], "store"),
    ],
)
def test_runtime_commands_refuse_bad_input_in_one_line(argv, words):
    done = subprocess.run([sys.executable, "-m", "shiftchange", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr


def _claim_until_empty(url: str, worker_id: str, ready, found) -> None:
    """One racing process: once every racer is ready, claim_next until nothing is left; report what it was granted."""
    from shiftchange.core import Orchestrator
    from shiftchange.core.stores import open_store
    from shiftchange.runtime.clock import WallClock

    store = open_store(url)
    orchestrator = Orchestrator(store, WallClock(), LedgerProvider())
    claims, refusals = [], 0
    ready.wait(60)  # start together: a racer that had finished importing first could otherwise take everything alone
    while True:
        claim = orchestrator.claim_next(worker_id, "repo", True)
        if claim is None:
            break
        if not claim.accepted:
            refusals += 1
            continue
        claims.append((claim.lease.attempt_id, claim.lease.generation))
    store.close()
    found.put((worker_id, claims, refusals))


def test_many_processes_racing_claim_next_each_take_different_attempts(postgres_url):
    """Goal: eight processes pulling from one PostgreSQL store claim every admitted Attempt exactly once, without a refusal."""
    import multiprocessing
    import uuid

    from shiftchange.core import AdmissionConfig, CoreConfig, ReliabilityConfig
    from shiftchange.core.stores import open_store
    from shiftchange.runtime.clock import WallClock

    url = postgres_url + ("&" if "?" in postgres_url else "?") + f"schema=race_{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    try:
        reliability = ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=500, queue_depth_max=500))
        setup = Orchestrator(store, WallClock(), LedgerProvider(), CoreConfig(admitted_max=500), reliability)
        for number in range(200):
            setup.create_task(f"t{number}", "objective", "repo")
            setup.accept_task(f"t{number}")
            setup.dispatch(f"t{number}", Plan(f"hypothesis 1 for t{number}"))
        assert sum(result.state == "admitted" for result in setup.run_admission().values()) == 200
        context = multiprocessing.get_context("spawn")
        found, ready = context.Queue(), context.Barrier(8)
        racers = [context.Process(target=_claim_until_empty, args=(url, f"w{number}", ready, found)) for number in range(8)]
        for racer in racers:
            racer.start()
        reports = [found.get(timeout=120) for _ in racers]
        for racer in racers:
            racer.join(timeout=30)
        claimed = [attempt for _worker, claims, _refused in reports for attempt, _generation in claims]
        assert sorted(claimed) == sorted(a.attempt_id for t in range(200) for a in store.get_attempts(f"t{t}"))
        assert len(set(claimed)) == 200, "no Attempt was claimed twice"
        assert sum(refused for _worker, _claims, refused in reports) == 0, "SKIP LOCKED: racers skip, they are not refused"
        assert sum(1 for _worker, claims, _refused in reports if claims) >= 2, "the work was shared"
        accepted = [e for e in store.events() if e.kind == "claim" and e.accepted]
        assert len(accepted) == 200 and {e.generation for e in accepted} == {1}
    finally:
        store.drop_schema()


def test_the_runtime_and_the_kit_never_import_the_simulator():
    """Goal (DESIGN, layers): the checkers belong to no world; judging a real run must not load SimPy or `shiftchange.sim`."""
    probe = (
        "import sys\n"
        "import shiftchange.runtime.chaos, shiftchange.runtime.worker, shiftchange.runtime.control, shiftchange.testing\n"
        "import shiftchange.checkers.rules\n"
        "print(sorted(name for name in sys.modules if name == 'simpy' or name.startswith('shiftchange.sim')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def any_store(request, tmp_path):
    if request.param == "postgresql":
        made = request.getfixturevalue("make_postgres_store")()
    else:
        made = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "claims.sqlite")
    yield made
    made.close()


def test_claim_next_takes_its_own_workspace_behind_older_work_of_others(any_store):
    """Goal: a worker of one workspace is never starved by older admitted work of other workspaces queued ahead of it."""
    from shiftchange.core import AdmissionConfig, ReliabilityConfig

    clock = ManualClock(0.0)
    reliability = ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=50))
    orchestrator = Orchestrator(any_store, clock, LedgerProvider(clock=clock), reliability=reliability)
    for number in range(12):
        workspace = "repo" if number == 11 else "other"
        orchestrator.create_task(f"t{number}", "objective", workspace)
        orchestrator.accept_task(f"t{number}")
        orchestrator.dispatch(f"t{number}", Plan(f"hypothesis 1 for t{number}"))
        clock.advance(1.0)
    orchestrator.run_admission()
    claim = orchestrator.claim_next("w1", "repo", True)
    assert claim is not None and claim.accepted and claim.lease.task_id == "t11"
    assert orchestrator.claim_next("w1", "repo", True) is None, "nothing else in repo: None, and nothing recorded"
    assert [e.kind for e in any_store.events() if e.worker_id == "w1"] == ["claim"]
    other = orchestrator.claim_next("w2", "other", True)
    assert other.lease.task_id == "t0", "oldest first"
