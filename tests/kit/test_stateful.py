"""The kit's Hypothesis stateful machine against the reference core on every store, and the mutants it must catch alone.

The machine is `shiftchange.testing.orchestrator_machine`; its model and the
invariant checkers judge every step (see its module). Here the reference
core runs under it on the memory and the SQLite store, with two invariants
only the reference has: its admission bookkeeping agrees with the store, and
every row it fires (and every refusal) is the answer the `transitions`
Machine built from the same rows gives, and every fence it checks or skips is
the one the rows declare (the differential oracle: the orchestrator runs a
`Table` whose compiled machines record each question asked of them). Then each mutant
of `mutants.py` must make the machine fail, from a fixed seed, within a
bounded number of examples, with the message naming the broken rule.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

from shiftchange.core import MemoryStore, Orchestrator
from shiftchange.core.table import Table
from shiftchange.core.vocabulary import GUARDS
from shiftchange.spec import CompiledMachine, load_spec
from shiftchange.spec.oracle import build_oracle, oracle_fire
from shiftchange.stores.sqlite import SQLiteStore
from shiftchange.testing import orchestrator_machine, run_machine
from shiftchange.testing.rig import World, fence
from shiftchange.testing.stateful import TERMINAL, WORKSPACE, OrchestratorMachine
from tests.kit.mutants import MUTANTS, mutant_factory

SPEC = load_spec()
ORACLES = {name: build_oracle(SPEC.machines[name]) for name in ("attempt", "task")}


FENCED_ROWS = {(source, row.trigger): row.fenced for source, _dest, row in SPEC.attempt.edges()}
FENCED_TRIGGERS = frozenset(row.trigger for row in SPEC.attempt.rows if row.fenced)


def fenced_by_the_rows(state: str, trigger: str) -> bool:
    """Whether the spec's rows fence a call of `trigger` from `state`, read from the rows themselves, not the compiled lookup.

    Where no row leaves `state` on `trigger` the call is refused either way; a trigger some row fences is still proved
    first, so that a stale caller is told it is stale.
    """
    return FENCED_ROWS.get((state, trigger), trigger in FENCED_TRIGGERS)


class RecordingMachine(CompiledMachine):
    """A compiled table that keeps every row it fires (or refuses) and every fence question, for the differential check."""

    def __init__(self, machine) -> None:
        super().__init__(machine)
        self.bind(GUARDS[machine.name])  # as core.table.Table binds the machines it compiles
        self.asked: list[tuple[str, str, dict[str, bool], str | None]] = []
        self.fences: list[tuple[str, str, bool]] = []

    def fenced(self, state, trigger):
        answer = super().fenced(state, trigger)
        self.fences.append((state, trigger, answer))
        return answer

    def fire(self, state, trigger, holds):
        values = {name: holds(name) for name in self.guards_of(state, trigger)}
        fired = super().fire(state, trigger, holds)
        self.asked.append((state, trigger, values, fired[0] if fired else None))
        return fired

    def choose(self, state, trigger, subject):
        """The core's path: the bound evaluators asked of the call; recorded with every guard's value as `fire` records it."""
        values = {name: subject.holds(name) for name in self.guards_of(state, trigger)}
        fired = super().choose(state, trigger, subject)
        self.asked.append((state, trigger, values, fired[0] if fired else None))
        return fired


def recording_table() -> Table:
    """The packaged spec compiled for the core, its two machines replaced by recording ones built from the same rows."""
    table = Table(SPEC, "the packaged spec, recorded")
    table.attempt = RecordingMachine(SPEC.attempt)
    table.task = RecordingMachine(SPEC.task)
    return table


def recorded(make_store):
    """The reference core over `make_store`, running a table whose compiled machines record every question asked of them."""

    def make(*, clock, provider, config, reliability):
        return Orchestrator(make_store(), clock, provider, config, reliability, table=recording_table())

    return make


def sqlite_store() -> SQLiteStore:
    return SQLiteStore(Path(tempfile.mkdtemp(prefix="shiftchange-")) / "store.sqlite")


class ReferenceLifecycle(OrchestratorMachine):
    """The kit's machine over the reference core, plus what only the reference core can be asked."""

    make_orchestrator = staticmethod(recorded(MemoryStore))

    @invariant()
    def admission_matches_the_store(self):
        """Admission (derived state) agrees with the store: queued ones wait (or sleep out a backoff), ended ones are gone."""
        limit = self.reliability.admission.partition_concurrency_max
        assert self.orchestrator.admission.in_flight(WORKSPACE) <= limit
        for attempt_id in self.states:
            attempt = self.store.get_attempt(attempt_id)
            status = self.orchestrator.admission_status(attempt_id)
            if attempt.state == "queued":
                expected = {"waiting", "sleeping"} if attempt.eligible_at is not None else {"waiting"}
                assert status in expected, (attempt_id, status)
            elif attempt.state in TERMINAL:
                assert status == "gone", (attempt_id, attempt.state, status)

    @invariant()
    def compiled_table_agrees_with_transitions(self):
        """Differential: every row the core fired (or refused) is the transitions Machine's answer; every fence is the rows'."""
        table = self.orchestrator.table
        for name in ("attempt", "task"):
            recorder = getattr(table, name)
            assert isinstance(recorder, RecordingMachine), f"the core does not run the {name} machine it was given"
            oracle, model = ORACLES[name]
            for state, trigger, values, dest in recorder.asked:
                assert oracle_fire(oracle, model, state, trigger, values) == dest, (name, state, trigger, values)
            recorder.asked.clear()
        for state, trigger, answer in table.attempt.fences:
            assert answer == fenced_by_the_rows(state, trigger), (state, trigger, answer)
        table.attempt.fences.clear()
        assert not table.task.fences, "the task table has no fence, and the core never asks it for one"


class SQLiteLifecycle(ReferenceLifecycle):
    """The same machine over a SQLite file per example."""

    make_orchestrator = staticmethod(recorded(sqlite_store))

    def teardown(self):
        super().teardown()
        shutil.rmtree(self.store.path.parent, ignore_errors=True)


COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much], "stateful_step_count": 80}

TestMemoryLifecycle = pytest.mark.heavy(ReferenceLifecycle.TestCase)
TestMemoryLifecycle.settings = settings(max_examples=200, **COMMON)
TestSQLiteLifecycle = pytest.mark.heavy(SQLiteLifecycle.TestCase)
TestSQLiteLifecycle.settings = settings(max_examples=40, **COMMON)


class ManyLifecycles(ReferenceLifecycle):
    pass


class ManySQLiteLifecycles(SQLiteLifecycle):
    pass


TestManyMemoryLifecycles = pytest.mark.slow(ManyLifecycles.TestCase)
TestManyMemoryLifecycles.settings = settings(max_examples=3000, **{**COMMON, "stateful_step_count": 150})
TestManySQLiteLifecycles = pytest.mark.slow(ManySQLiteLifecycles.TestCase)
TestManySQLiteLifecycles.settings = settings(max_examples=500, **{**COMMON, "stateful_step_count": 150})


# ------------------------------------------------------------------ mutants

CAUGHT_BY = {
    "complete-after-expiry": r"complete on \S+ \(running\) with generation \d+ was accepted, but its lease expired",
    "renew-with-stale-generation": r"renew on \S+ .* was accepted, but the fence is not the lease",
    "grant-after-cancel": r"grant_tool on \S+ \(cancelling\) was accepted, but it was cancelled",
    "terminal-attempt-rewritten": r"terminal \S+, which must never change",
    "admit-runs-admission-before-validating": r"admit.*: the store, history and ledger after a call that raised",
    "claim-records-probe-before-lookup": r"a claim of .* by .*w\d.*(was refused|was accepted \(healthy: False)",
    "receipt-checks-fence-before-arguments": r"receipt with a forged token and no key: expected InputError, but the call returned",
    "grant-raises-type-error-for-a-list": r"unhashable type",
}
"""What the machine says when it catches each mutant: the rule the mutant breaks, in the model's or the checkers' words."""

EXAMPLES_MAX = 600
"""The example budget each mutant must be caught within, from seed 0: from seeds 0-19 each was caught within 400 (at worst 359)."""


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_stateful_machine_alone_catches_the_mutant(name):
    """Goal: the machine, with nothing else, fails against each mutant within a bounded, seeded run, naming the broken rule."""
    machine = orchestrator_machine(mutant_factory(MUTANTS[name]))
    with pytest.raises(Exception, match=CAUGHT_BY[name]):
        run_machine(machine, examples=EXAMPLES_MAX, seed=0, shrink=False)


@pytest.mark.heavy
def test_the_reference_core_passes_the_same_seeded_run():
    """Goal: the run that catches each mutant passes unbroken, so what fails is the mutant, not the machine."""
    run_machine(orchestrator_machine(lambda **world: Orchestrator(MemoryStore(), **world)), examples=100, seed=0, shrink=False)


def test_no_rule_is_filtered_by_a_precondition_or_a_bundle():
    """Goal: every rule draw runs (the old machine rejected most of its draws): no rule has a precondition or draws from a Bundle."""
    rules = OrchestratorMachine.setup_state().rules
    assert rules, "the machine has no rules"
    assert all(not rule.preconditions and not rule.bundles for rule in rules), [
        rule.function.__name__ for rule in rules if rule.preconditions or rule.bundles
    ]


def test_a_machine_needs_its_factory():
    """Goal: the unbound base class says how to make a runnable machine instead of failing obscurely."""
    with pytest.raises(TypeError, match="orchestrator_machine"):
        OrchestratorMachine()


def test_the_recording_table_sees_every_row_the_core_fires():
    """Goal: the differential check is not vacuous: each accepted move in the history is a row the recording table fired,
    in order, and each fenced worker call asked the table whether its row is fenced."""
    world = World(recorded(MemoryStore))
    try:
        lease = world.running()
        world.orchestrator.renew_lease(*fence(lease))
        world.orchestrator.complete_attempt(*fence(lease), "done", "sha-1")
        world.orchestrator.renew_lease(lease.attempt_id, lease.generation + 1, lease.token)  # refused by the fence
        table = world.orchestrator.table
        events = [e for e in world.store.events() if e.accepted]
        for name, ours in (("attempt", lambda e: e.attempt_id is not None), ("task", lambda e: e.attempt_id is None)):
            moves = [(e.from_state, e.kind, e.to_state) for e in events if ours(e) and e.kind in SPEC.machines[name].triggers]
            fired = [(state, trigger, dest) for state, trigger, _values, dest in getattr(table, name).asked if dest is not None]
            assert moves and fired == moves, (name, fired, moves)
        assert [(s, t) for s, t, fenced in table.attempt.fences if fenced] == [
            ("claimed", "start"),
            ("running", "renew"),
            ("running", "complete"),
            ("verifying", "renew"),
        ]
    finally:
        world.close()
