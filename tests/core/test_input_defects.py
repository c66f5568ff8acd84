"""Bad input gets a clear, typed error and changes nothing: the defects issue 12 found, each pinned down, on every store.

Each test sends one bad argument and checks three things: the error is the
core's typed one (`InputError` for a malformed value, `NotFound` for an id
that names nothing), the store's history and records are exactly as before,
and this process's view (the admission queue, the health probes) is too.
A contract checks all its arguments before the fence, before any admission
step and before any probe is recorded, so none of these may leave a trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from shiftchange.core import (
    Claim,
    Grant,
    InputError,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    NotFound,
    Orchestrator,
    Plan,
    ReliabilityConfig,
    Seams,
    Store,
)
from shiftchange.testing.rig import WORKSPACE, World, fence

HYPOTHESIS = "the fixture leaks a port between tests"
LONE_SURROGATE = "half a pair: \ud800"


@dataclass(frozen=True)
class TwoTasks:
    """A world with two tasks: task-1's Attempt running under a lease (`fence`) with one granted call (`key`), task-2's queued."""

    world: World
    fence: tuple[str, int, str]
    key: str

    def snapshot(self) -> tuple:
        """Everything a call could change: the history, every record, and admission's view of each Attempt."""
        store, core = self.world.store, self.world.orchestrator
        tasks = [store.get_task(task_id) for task_id in ("task-1", "task-2")]
        attempts = [attempt for task_id in ("task-1", "task-2") for attempt in store.get_attempts(task_id)]
        intents = [store.get_intent(self.key)]
        admission = [core.admission_status(attempt.attempt_id) for attempt in attempts]
        return store.events(), tasks, attempts, intents, admission, core.admission.queue_depth(), core.admission.in_flight()


def two_tasks(store: Store) -> TwoTasks:
    """The reference core with its default reliability controls over `store`, driven to the scene every test here starts from."""
    world = World.over(store, ReliabilityConfig())
    lease = world.running("task-1")
    grant = world.grant(lease, "sha-1", "create-pr")
    assert isinstance(grant, Grant), grant
    world.dispatched("task-2")  # after the admission step, so it waits in the queue
    return TwoTasks(world, fence(lease), grant.key)


@pytest.fixture
def scene(store) -> TwoTasks:
    return two_tasks(store)


@pytest.fixture
def world(scene) -> World:
    return scene.world


def rejected(scene: TwoTasks, error: type[Exception], call: Callable[[], Any], *named: str) -> None:
    """`call` raises `error` whose message names each of `named`, and leaves the world exactly as it was."""
    before = scene.snapshot()
    with pytest.raises(error) as raised:
        call()
    for word in named:
        assert word in str(raised.value), raised.value
    assert scene.snapshot() == before


# ---------------------------------------------------------------- admission


@pytest.mark.parametrize(("attempt_id", "error"), [(None, InputError), ("nope#1", NotFound)], ids=["none", "unknown"])
def test_admit_with_a_bad_id_runs_no_admission_step(world, scene, attempt_id, error):
    """admit(None) and admit("nope#1") raise before the step: task-2's queued Attempt stays queued and no event is appended."""
    assert world.store.get_attempt("task-2#1").state == "queued" and world.orchestrator.admission_status("task-2#1") == "waiting"
    rejected(scene, error, lambda: world.orchestrator.admit(attempt_id), "attempt_id" if error is InputError else "nope#1")
    assert world.store.get_attempt("task-2#1").state == "queued"


def test_admission_status_of_a_non_string_is_an_input_error(world, scene):
    """A list is not an attempt id: a typed error, not the TypeError of an unhashable set member."""
    rejected(scene, InputError, lambda: world.orchestrator.admission_status(["task-2#1"]), "attempt_id")


# -------------------------------------------------------------- the gateway


def test_grant_tool_with_a_list_for_a_dependency_is_an_input_error(world, scene):
    """dependency=["code_host"] is a typed InputError naming the argument, not a TypeError from a dict lookup."""
    rejected(
        scene, InputError, lambda: world.orchestrator.grant_tool(*scene.fence, "push", "sha-1", dependency=["code_host"]), "dependency"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"call_deadline_s": math.nan},
        {"cost_usd": -1.0},
        {"tokens": 1.5},
        {"spans_attempts": "yes"},
        {"key": 7},
        {"request": LONE_SURROGATE},
    ],
    ids=["nan-deadline", "negative-cost", "fractional-tokens", "string-flag", "number-key", "lone-surrogate"],
)
def test_grant_tool_checks_every_argument_before_the_fence(world, scene, arguments):
    """With a forged token as well, each bad argument is an InputError: no refused grant_tool is kept in the history."""
    attempt_id, generation, _token = scene.fence
    rejected(scene, InputError, lambda: world.orchestrator.grant_tool(attempt_id, generation, "forged", "push", "sha-1", **arguments))


def test_record_receipt_with_a_forged_token_and_no_key_is_an_input_error(world, scene):
    """key=None is checked before the fence: an InputError, not a refused (and recorded) forged call."""
    attempt_id, generation, _token = scene.fence
    rejected(scene, InputError, lambda: world.orchestrator.record_receipt(attempt_id, generation, "forged", None, "pr-1"), "key")


def test_report_call_failure_with_a_number_for_a_key_is_an_input_error(world, scene):
    """key=123 is checked before the fence: an InputError, and nothing appended."""
    attempt_id, generation, _token = scene.fence
    rejected(scene, InputError, lambda: world.orchestrator.report_call_failure(attempt_id, generation, "forged", 123, "503"), "key")


def test_a_receipt_for_an_unknown_key_is_not_found_before_the_fence(world, scene):
    """A key that names no intent is NotFound whatever the fence presented: no refusal is recorded for it."""
    attempt_id, generation, _token = scene.fence
    rejected(scene, NotFound, lambda: world.orchestrator.record_receipt(attempt_id, generation, "forged", "push:nowhere", "pr-1"))


@pytest.mark.parametrize(
    "contract",
    ["start_attempt", "renew_lease", "acknowledge_cancel"],
)
@pytest.mark.parametrize(("generation", "token"), [("1", "token"), (True, "token"), (1, None), (1, "")], ids=str)
def test_a_fence_of_the_wrong_type_is_an_input_error_not_a_refusal(world, scene, contract, generation, token):
    """A generation that is not an integer, or a token that is not text, never reaches the fence to be kept as a refusal."""
    rejected(scene, InputError, lambda: getattr(world.orchestrator, contract)(scene.fence[0], generation, token))


# ------------------------------------------------------------ lone surrogates


@pytest.mark.parametrize(
    "call",
    [
        lambda core: core.create_task("task-\ud800", "objective", WORKSPACE),
        lambda core: core.create_task("task-3", LONE_SURROGATE, WORKSPACE),
        lambda core: core.cancel_task("task-2", LONE_SURROGATE),
        lambda core: core.retry("task-2", LONE_SURROGATE, Plan(HYPOTHESIS)),
        lambda core: core.dispatch("task-2", Plan(LONE_SURROGATE)),
        lambda core: core.claim_attempt("task-2", "worker-\udfff", WORKSPACE),
    ],
    ids=["task-id", "objective", "cancel-reason", "retry-reason", "hypothesis", "worker-id"],
)
def test_text_with_a_lone_surrogate_is_the_same_input_error_on_every_store(world, scene, call):
    """The memory store would keep such text and SQLite could not encode it: the core refuses it first, for both alike."""
    rejected(scene, InputError, lambda: call(world.orchestrator), "lone surrogate")


def test_a_fenced_write_with_a_lone_surrogate_is_refused_before_the_fence(world, scene):
    """Even a call with a valid fence changes nothing when its text is not Unicode."""
    rejected(scene, InputError, lambda: world.orchestrator.checkpoint(*scene.fence, LONE_SURROGATE), "checkpoint")
    rejected(scene, InputError, lambda: world.orchestrator.complete_attempt(*scene.fence, LONE_SURROGATE), "result")


# ------------------------------------------------------------------ claims


def test_claim_of_an_unknown_task_records_no_health_probe(world, scene):
    """NotFound, and the failing probe it carried is not recorded: the worker, never probed, may still claim."""
    rejected(scene, NotFound, lambda: world.orchestrator.claim_attempt("nope", "worker-b", WORKSPACE, healthy=False), "nope")
    assert world.orchestrator.admit("task-2#1").state == "admitted"
    assert isinstance(world.orchestrator.claim_attempt("task-2", "worker-b", WORKSPACE), Claim)


def test_claim_with_a_non_boolean_probe_is_an_input_error(world, scene):
    rejected(scene, InputError, lambda: world.orchestrator.claim_attempt("task-2", "worker-b", WORKSPACE, healthy="yes"), "healthy")


def test_a_probe_taken_with_a_claim_is_recorded_with_it(world):
    """The probe a claim carries still counts: a failing one refuses this claim, and the next claim without one too."""
    core = world.orchestrator
    assert core.admit("task-2#1").state == "admitted"
    refused = core.claim_attempt("task-2", "worker-b", WORKSPACE, healthy=False)
    assert not refused.accepted and "worker_healthy" in refused.guards
    again = core.claim_attempt("task-2", "worker-b", WORKSPACE)
    assert not again.accepted and "worker_healthy" in again.guards


# ------------------------------------------------------------------- clock


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -1.0, -math.inf, "1", True], ids=str)
def test_manual_clock_refuses_a_step_that_is_not_finite_and_forward(seconds):
    """advance(nan) would stop every lease from expiring; it is an InputError, as advance(-1) is (both are ValueErrors too)."""
    clock = ManualClock(10.0)
    with pytest.raises(InputError):
        clock.advance(seconds)
    assert clock.now() == 10.0
    with pytest.raises(ValueError):
        clock.advance(seconds)


@pytest.mark.parametrize("now_s", [math.nan, math.inf, 5.0], ids=str)
def test_manual_clock_set_refuses_nan_infinity_and_the_past(now_s):
    clock = ManualClock(10.0)
    with pytest.raises(InputError):
        clock.set(now_s)
    assert clock.now() == 10.0


def test_manual_clock_cannot_start_at_nan():
    with pytest.raises(InputError):
        ManualClock(math.nan)


# ----------------------------------------------------------- construction


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"config": {"lease_ttl_s": 30.0}}, "CoreConfig"),
        ({"reliability": {"attempt_spend_max_usd": 5.0}}, "ReliabilityConfig"),
        ({"rng": 42}, "Random"),
        ({"seams": {"fence": None}}, "Seams"),
    ],
    ids=["config-dict", "reliability-dict", "rng-int", "seams-dict"],
)
def test_orchestrator_with_a_dict_for_a_config_is_an_input_error_naming_the_type(arguments, named):
    """Orchestrator(config={...}) says which type it expected, instead of an AttributeError from deep inside."""
    clock = ManualClock()
    with pytest.raises(InputError) as raised:
        Orchestrator(MemoryStore(), clock, LedgerProvider(clock=clock), **arguments)
    assert named in str(raised.value)


def test_seams_with_a_value_that_is_not_a_rule_is_an_input_error():
    with pytest.raises(InputError, match="mint_key"):
        Seams(mint_key="create-pr:fixed")
    with pytest.raises(InputError, match="fence"):
        Seams(fence=object())


def test_bad_input_leaves_the_history_the_memory_store_leaves(store):
    """Every store answers bad input as the memory store does: the histories after the same calls are equal, field for field."""
    histories = []
    for scene in (two_tasks(MemoryStore()), two_tasks(store)):
        for call in (
            lambda core: core.create_task("task-\ud800", "objective", WORKSPACE),
            lambda core: core.admit(None),
            lambda core, scene=scene: core.record_receipt(scene.fence[0], scene.fence[1], "forged", None, "pr-1"),
        ):
            with pytest.raises(InputError):
                call(scene.world.orchestrator)
        histories.append([(e.kind, e.accepted, e.reason, e.code, e.late) for e in scene.world.store.events()])
        scene.world.close()
    assert histories[0] == histories[1]
