"""Contract checks of the loop decision, budgets, bad input and the history: what may follow an Attempt, and what a call leaves behind."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from shiftchange.core import Budget, Claim, Decision, InputError, Lease, NotFound, Orchestrator, Plan, Refused

from .checks import Check, Violation, collector, expect, expect_equal, expect_raises
from .contracts_lease import end_blocked, end_cancelled, end_quarantined, end_succeeded
from .rig import CHANGED_HYPOTHESIS, FIRST_HYPOTHESIS, REASON, WORKSPACE, OrchestratorFactory, World, appends, fence, refused_on, world_of

CHECKS: list[Check] = []
_check = collector(CHECKS)


# -------------------------------------------------------------------- policy


def end_failed_in(domain: str) -> Callable[[World], str]:
    def end(world: World) -> str:
        return world.failed(world.running(), domain, f"{domain} trouble").attempt_id

    end.__name__ = f"end_failed_{domain}"
    return end


DECISIONS = (
    (end_succeeded, "verify", "review"),
    (end_blocked, "escalate", "blocked"),
    (end_quarantined, "escalate", "quarantined"),
    (end_failed_in("executor"), "retry", "in_progress"),
    (end_failed_in("validation"), "correct", "in_progress"),
    (end_failed_in("authorization"), "stop", "escalated"),
)


@_check
def each_ended_attempt_gets_exactly_one_decision_with_its_reason(make: OrchestratorFactory) -> None:
    """After an Attempt ends, decide makes one of verify, correct, retry, stop, escalate, records it with its reason, and moves the task."""
    for end, kind, task_state in DECISIONS:
        with world_of(make) as world:
            attempt_id = end(world)
            moves = task_state != "in_progress"
            with appends(world.store, 2 if moves else 1, f"decide after {end.__name__}"):
                decision = world.orchestrator.decide("task-1")
            expect(isinstance(decision, Decision) and decision.kind == kind, f"the decision after {end.__name__}: {decision}")
            expect(bool(decision.reason), f"the decision after {end.__name__} gives no reason")
            task = world.store.get_task("task-1")
            recorded = (task.state, task.decision, task.decision_reason)
            expect_equal(recorded, (task_state, kind, decision.reason), f"the task after decide ({end.__name__})")
            decided = [(e.accepted, e.reason, e.detail) for e in world.store.events() if e.kind == "decide" and e.attempt_id == attempt_id]
            expect_equal(decided, [(True, kind, decision.reason)], f"the decide events ({end.__name__})")
            again = world.orchestrator.decide("task-1")
            expect_equal((again.kind, world.store.get_task("task-1").state), (kind, task_state), f"a second decide ({end.__name__})")


@_check
def decide_on_an_active_attempt_is_refused(make: OrchestratorFactory) -> None:
    """No decision while the latest Attempt is still running."""
    with world_of(make) as world:
        world.running()
        with appends(world.store, 1, "a refused decide") as events:
            result = world.orchestrator.decide("task-1")
        expect(isinstance(result, Refused) and not events[0].accepted, f"decide while the Attempt runs: {result}")
        expect_equal(world.store.get_task("task-1").decision, None, "the task's decision")


@_check
def stop_after_a_cancelled_attempt_takes_the_task_out_of_progress(make: OrchestratorFactory) -> None:
    """A stop decision stops the task: it does not stay in progress with nothing active and no way to retry."""
    with world_of(make) as world:
        end_cancelled(world)
        decision = world.orchestrator.decide("task-1")
        expect_equal(decision.kind, "stop", "the decision after a cancelled Attempt")
        expect(world.store.get_task("task-1").state != "in_progress", "the task stays in progress after a stop decision")


@_check
def repeated_failure_signature_is_quarantined_and_escalated(make: OrchestratorFactory) -> None:
    """The same failure signature on consecutive Attempts is a poison item: dead-lettered, and the loop escalates."""
    with world_of(make) as world:
        world.failed(world.running(), "validation", "test_ports fails")
        second = world.retried(hypothesis=CHANGED_HYPOTHESIS)
        expect_equal(world.failed(second, "validation", "test_ports fails").state, "quarantined", "the second identical failure")
        decision = world.orchestrator.decide("task-1")
        expect(decision.kind == "escalate" and "test_ports fails" in decision.reason, f"the decision after poison: {decision}")
        expect_equal(world.store.get_task("task-1").state, "quarantined", "the task after poison")
        third = world.orchestrator.retry("task-1", REASON, Plan("a third idea entirely"))
        expect(isinstance(third, Refused), f"a retry of a quarantined task: {third}")


@_check
def repeated_signatures_max_sets_how_long_a_run_of_one_signature_may_grow_before_it_is_poison(make: OrchestratorFactory) -> None:
    """With repeated_signatures_max=2 the second identical failure is retried, and only the third is dead-lettered."""
    with world_of(make) as world:
        budget = Budget(repeated_signatures_max=2, attempts_max=5)
        world.failed(world.running(budget=budget), "validation", "test_ports fails")
        second = world.retried(hypothesis=CHANGED_HYPOTHESIS)
        expect_equal(world.failed(second, "validation", "test_ports fails").state, "failed", "the second identical failure")
        third = world.retried(hypothesis="a third idea entirely")
        expect_equal(world.failed(third, "validation", "test_ports fails").state, "quarantined", "the third identical failure")


# ------------------------------------------------------------------- budgets


@_check
def grant_beyond_the_cost_budget_is_refused(make: OrchestratorFactory) -> None:
    """A tool call whose cost would pass cost_max_usd is refused before it starts, and nothing is charged for it."""
    with world_of(make) as world:
        lease = world.running(budget=Budget(cost_max_usd=1.0))
        expect(world.orchestrator.grant_tool(*fence(lease), "model-call", "plan-1", cost_usd=0.6).accepted, "a grant within budget")
        with appends(world.store, 1, "a grant past the budget"):
            result = world.orchestrator.grant_tool(*fence(lease), "model-call", "plan-2", cost_usd=0.6)
        expect(refused_on(result, "spend_within_budget"), f"a grant past cost_max_usd: {result}")
        charged = (world.store.get_task("task-1").cost_usd, world.attempt(lease.attempt_id).cost_usd)
        expect_equal(charged, (0.6, 0.6), "the (task, Attempt) cost after the refused grant")
        expect_equal(world.store.get_intent("model-call:task-1:plan-2"), None, "an intent of the refused grant")


@_check
def nothing_a_worker_sends_raises_the_budget(make: OrchestratorFactory) -> None:
    """A worker cannot buy room with negative spend, and whatever it sends leaves the task's budget as it was."""
    with world_of(make) as world:
        lease = world.running(budget=Budget(cost_max_usd=1.0, tokens_max=100))
        budget = world.store.get_task("task-1").budget
        for bad in ({"cost_usd": -5.0}, {"tokens": -100}, {"cost_usd": float("nan")}):
            with expect_raises(InputError, f"grant_tool with {bad}"):
                world.orchestrator.grant_tool(*fence(lease), "model-call", "plan-1", **bad)
        expect_equal(world.store.get_task("task-1").budget, budget, "the task's budget")
        expect_equal(world.store.get_task("task-1").cost_usd, 0, "the task's cost")


@_check
def records_handed_out_by_contracts_are_not_live(make: OrchestratorFactory) -> None:
    """Editing the Task create_task returned changes nothing in the store, and a manifest's budget cannot be edited at all."""
    with world_of(make) as world:
        task = world.orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE, budget=Budget(cost_max_usd=1.0))
        world.task_ids.append("task-1")
        world.orchestrator.accept_task("task-1")
        world.orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))
        world.orchestrator.admit("task-1#1")
        claim = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
        expect(isinstance(claim, Claim), f"the claim of admitted task-1#1: {claim}")
        before = world.snapshot()
        task.state = "done"
        with expect_raises(dataclasses.FrozenInstanceError, "editing a manifest's budget"):
            claim.manifest.budget.cost_max_usd = 1e6  # type: ignore[misc]
        expect_equal(world.snapshot(), before, "the store after editing what contracts returned")


@_check
def exhausted_attempts_budget_stops_and_escalates_the_task(make: OrchestratorFactory) -> None:
    """When the attempts budget is used up, decide says stop and the task is escalated to a human."""
    with world_of(make) as world:
        world.failed(world.running(budget=Budget(attempts_max=1)))
        decision = world.orchestrator.decide("task-1")
        expect(decision.kind == "stop" and "attempts" in decision.reason, f"the decision with no Attempt left: {decision}")
        expect_equal(world.store.get_task("task-1").state, "escalated", "the task")
        retry = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
        expect(isinstance(retry, Refused), f"a retry of an escalated task: {retry}")


@_check
def release_by_an_operator_may_extend_the_budget(make: OrchestratorFactory) -> None:
    """Only a human decision extends a budget: after release with a larger budget, the retry is accepted."""
    with world_of(make) as world:
        world.failed(world.running(budget=Budget(attempts_max=1)))
        world.orchestrator.decide("task-1")
        with appends(world.store, 1, "a release"):
            released = world.orchestrator.release("task-1", "one more try, it was a flaky runner", Budget(attempts_max=2))
        expect_equal(released.state, "ready", "the released task")
        task = world.store.get_task("task-1")
        expect_equal((task.budget.attempts_max, task.interruptions), (2, 1), "the released task's (attempts_max, interruptions)")
        expect(world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS)).accepted, "the retry after the release")
        expect_equal(len(world.store.get_attempts("task-1")), 2, "Attempts after the release and retry")


# ----------------------------------------------------------------- bad input


def unknown_id_calls(lease: Lease) -> dict[str, Callable[[Orchestrator], object]]:
    token = lease.token
    return {
        "accept_task": lambda o: o.accept_task("task-9"),
        "dispatch": lambda o: o.dispatch("task-9", Plan(FIRST_HYPOTHESIS)),
        "retry": lambda o: o.retry("task-9", REASON, Plan(CHANGED_HYPOTHESIS)),
        "admit": lambda o: o.admit("task-9#1"),
        "claim_attempt": lambda o: o.claim_attempt("task-9", "worker-a", WORKSPACE),
        "start_attempt": lambda o: o.start_attempt("task-9#1", 1, token),
        "renew_lease": lambda o: o.renew_lease("task-1#9", 1, token),
        "grant_tool": lambda o: o.grant_tool("task-9#1", 1, token, "create-pr", "sha-1"),
        "record_receipt": lambda o: o.record_receipt(lease.attempt_id, lease.generation, token, "create-pr:task-1:sha-9", "pr-1"),
        "checkpoint": lambda o: o.checkpoint("task-9#1", 1, token, "step 3"),
        "complete_attempt": lambda o: o.complete_attempt("task-9#1", 1, token, "done"),
        "report_failure": lambda o: o.report_failure("task-9#1", 1, token, "executor", "crash"),
        "reconcile_attempt": lambda o: o.reconcile_attempt("task-9#1"),
        "verify_attempt": lambda o: o.verify_attempt("task-9#1"),
        "cancel_attempt": lambda o: o.cancel_attempt("task-9#1", "operator stops it"),
        "acknowledge_cancel": lambda o: o.acknowledge_cancel("task-9#1", 1, token),
        "decide": lambda o: o.decide("task-9"),
        "release": lambda o: o.release("task-9", "operator releases it"),
        "cancel_task": lambda o: o.cancel_task("task-9", "operator stops it"),
    }


HUGE = "x" * 1_000_001


def bad_input_calls(lease: Lease) -> dict[str, Callable[[Orchestrator], object]]:
    attempt_id, generation, token = fence(lease)

    def grant(orchestrator: Orchestrator, **changes: object) -> object:
        arguments = {"operation": "create-pr", "identity": "sha-1", **changes}
        return orchestrator.grant_tool(attempt_id, generation, token, **arguments)

    return {
        "create_task non-str id": lambda o: o.create_task(7, "objective", WORKSPACE),
        "create_task huge objective": lambda o: o.create_task("task-2", HUGE, WORKSPACE),
        "create_task negative cost budget": lambda o: o.create_task("task-2", "objective", WORKSPACE, budget=Budget(cost_max_usd=-1.0)),
        "create_task NaN elapsed budget": lambda o: o.create_task(
            "task-2", "objective", WORKSPACE, budget=Budget(elapsed_max_s=float("nan"))
        ),
        "create_task bool attempts budget": lambda o: o.create_task("task-2", "objective", WORKSPACE, budget=Budget(attempts_max=True)),
        "create_task no attempts budget": lambda o: o.create_task("task-2", "objective", WORKSPACE, budget=Budget(attempts_max=0)),
        "dispatch plan not a Plan": lambda o: o.dispatch("task-1", FIRST_HYPOTHESIS),
        "dispatch huge hypothesis": lambda o: o.dispatch("task-1", Plan(HUGE)),
        "retry non-str reason": lambda o: o.retry("task-1", 1234567890, Plan(CHANGED_HYPOTHESIS)),
        "retry huge reason": lambda o: o.retry("task-1", HUGE, Plan(CHANGED_HYPOTHESIS)),
        "retry non-str base sha": lambda o: o.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS, base_sha=0)),
        "claim non-str worker": lambda o: o.claim_attempt("task-1", 42, WORKSPACE),
        "claim non-bool health": lambda o: o.claim_attempt("task-1", "worker-b", WORKSPACE, healthy="yes"),
        "renew non-str attempt id": lambda o: o.renew_lease(123, generation, token),
        "renew bool generation": lambda o: o.renew_lease(attempt_id, True, token),
        "renew negative generation": lambda o: o.renew_lease(attempt_id, -1, token),
        "renew float generation": lambda o: o.renew_lease(attempt_id, 1.0, token),
        "renew huge generation": lambda o: o.renew_lease(attempt_id, 2**70, token),
        "renew non-str token": lambda o: o.renew_lease(attempt_id, generation, None),
        "renew huge token": lambda o: o.renew_lease(attempt_id, generation, HUGE),
        "grant negative cost": lambda o: grant(o, cost_usd=-0.01),
        "grant NaN cost": lambda o: grant(o, cost_usd=float("nan")),
        "grant infinite cost": lambda o: grant(o, cost_usd=float("inf")),
        "grant negative tokens": lambda o: grant(o, tokens=-1),
        "grant float tokens": lambda o: grant(o, tokens=1.5),
        "grant absurd deadline": lambda o: grant(o, call_deadline_s=1e9),
        "grant huge request": lambda o: grant(o, request=HUGE),
        "grant empty operation": lambda o: grant(o, operation=""),
        "grant non-str key": lambda o: grant(o, key=12345),
        "grant huge key": lambda o: grant(o, key=HUGE),
        "grant non-bool spans_attempts": lambda o: grant(o, spans_attempts="no"),
        "receipt empty provider id": lambda o: o.record_receipt(attempt_id, generation, token, "create-pr:task-1:sha-1", ""),
        "receipt non-str key": lambda o: o.record_receipt(attempt_id, generation, token, None, "pr-1"),
        "checkpoint empty": lambda o: o.checkpoint(attempt_id, generation, token, ""),
        "complete huge result": lambda o: o.complete_attempt(attempt_id, generation, token, HUGE),
        "complete non-str result": lambda o: o.complete_attempt(attempt_id, generation, token, 42),
        "complete non-str head sha": lambda o: o.complete_attempt(attempt_id, generation, token, "done", head_sha=42),
        "complete bool generation": lambda o: o.complete_attempt(attempt_id, False, token, "done"),
        "report unknown domain": lambda o: o.report_failure(attempt_id, generation, token, "martian", "crash"),
        "report empty signature": lambda o: o.report_failure(attempt_id, generation, token, "executor", ""),
        "cancel empty reason": lambda o: o.cancel_attempt(attempt_id, ""),
        "cancel non-str reason": lambda o: o.cancel_attempt(attempt_id, 5),
        "acknowledge str generation": lambda o: o.acknowledge_cancel(attempt_id, "1", token),
        "reconcile non-str id": lambda o: o.reconcile_attempt(["task-1#1"]),
        "decide non-str id": lambda o: o.decide(None),
        "release negative budget": lambda o: o.release("task-1", "operator releases it", Budget(attempts_max=-1)),
    }


def _each_raises_and_changes_nothing(make: OrchestratorFactory, kind: type[Exception], calls: Callable[[Lease], dict]) -> None:
    """Each call, in a world of its own with a running Attempt, raises `kind` and leaves store, history and provider as they were."""
    for name in calls(Lease("", "", "", 0, "", 0)):
        with world_of(make) as world:
            lease = world.running()
            before = world.snapshot()
            with expect_raises(kind, name):
                calls(lease)[name](world.orchestrator)
            expect_equal(world.snapshot(), before, f"{name}: tasks, Attempts, intents, history and ledger after the refused call")


@_check
def unknown_ids_raise_not_found_and_change_nothing(make: OrchestratorFactory) -> None:
    """An id that names no record is NotFound, and the store, its history and the provider are as they were."""
    _each_raises_and_changes_nothing(make, NotFound, unknown_id_calls)


@_check
def bad_input_raises_input_error_and_changes_nothing(make: OrchestratorFactory) -> None:
    """Wrong types and absurd values are InputError, and the store, its history and the provider are as they were."""
    _each_raises_and_changes_nothing(make, InputError, bad_input_calls)


@_check
def arguments_are_checked_before_any_fence_step_or_probe(make: OrchestratorFactory) -> None:
    """Bad input raises before the fence is checked, an admission step runs or a health probe is kept: nothing at all changes."""
    with world_of(make) as world:
        lease = world.running()
        world.dispatched("task-2")
        forged = (lease.attempt_id, lease.generation, "f" * 43)
        calls: dict[str, tuple[type[Exception], Callable[[], object]]] = {
            "admit(None)": (InputError, lambda: world.orchestrator.admit(None)),
            "admit of an unknown Attempt": (NotFound, lambda: world.orchestrator.admit("nope#1")),
            "grant_tool with a list for dependency": (
                InputError,
                lambda: world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", dependency=["code_host"]),
            ),
            "record_receipt with a forged token and no key": (
                InputError,
                lambda: world.orchestrator.record_receipt(*forged, None, "pr-1"),
            ),
            "report_call_failure with a forged token and a number for key": (
                InputError,
                lambda: world.orchestrator.report_call_failure(*forged, 123, "503"),
            ),
            "claim_attempt of an unknown task with a failing probe": (
                NotFound,
                lambda: world.orchestrator.claim_attempt("task-9", "worker-z", WORKSPACE, healthy=False),
            ),
        }
        for name, (kind, call) in calls.items():
            before = world.snapshot()
            with expect_raises(kind, name):
                call()
            expect_equal(world.snapshot(), before, f"{name}: tasks, Attempts, intents, history and ledger after the refused call")
        admitted = world.orchestrator.admit("task-2#1")
        expect_equal(getattr(admitted, "state", admitted), "admitted", "admission of task-2#1 after the refused calls")
        claim = world.orchestrator.claim_attempt("task-2", "worker-z", WORKSPACE)
        expect(isinstance(claim, Claim), f"a claim by worker-z, whose probe came with a call that raised, was refused: {claim}")


@_check
def text_a_store_cannot_hold_is_refused_with_input_error_or_kept_exactly(make: OrchestratorFactory) -> None:
    """Text with a lone surrogate is refused with InputError and changes nothing, or is kept and read back exactly: never another error."""
    with world_of(make) as world:
        before = world.snapshot()
        try:
            world.orchestrator.create_task("task-1", "fix \ud800 the test", WORKSPACE)
        except InputError:
            expect_equal(world.snapshot(), before, "the store after a task with a lone surrogate was refused")
            return
        except Exception as error:
            raise Violation(f"create_task with a lone surrogate raised {type(error).__name__}: {error}, not InputError") from error
        expect_equal(world.store.get_task("task-1").objective, "fix \ud800 the test", "the objective read back")


# ------------------------------------------------------------------- history


@_check
def every_contract_call_appends_its_documented_events(make: OrchestratorFactory) -> None:
    """Walking an Attempt through every contract, accepted and refused, each call appends exactly its documented events.

    The documented counts: 1 per call, except an accepted dispatch or retry
    (2: the task transition and the appended Attempt), reconciliation from
    Suspect (2), a cancel of an Attempt nobody holds (3), an acknowledgement
    (2), a decide that moves the task (2), and the reaper (1 per move).
    """
    with world_of(make) as world:
        orchestrator, store = world.orchestrator, world.store
        steps: list[tuple[int, str, Callable[[], object]]] = [
            (1, "create_task", lambda: orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE)),
            (1, "dispatch of an inbox task", lambda: orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))),
            (1, "accept_task", lambda: orchestrator.accept_task("task-1")),
            (2, "dispatch", lambda: orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))),
            (1, "claim of a queued Attempt", lambda: orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)),
            (1, "admit", lambda: orchestrator.admit("task-1#1")),
        ]
        _walk(store, steps)
        with appends(store, 1, "claim"):
            claim = orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
        expect(isinstance(claim, Claim), f"the claim of admitted task-1#1: {claim}")
        lease = claim.lease
        forged = (lease.attempt_id, lease.generation, "f" * 43)
        fenced: list[tuple[int, str, Callable[[], object]]] = [
            (1, "start with a forged token", lambda: orchestrator.start_attempt(*forged)),
            (1, "start", lambda: orchestrator.start_attempt(*fence(lease))),
            (1, "renew with a forged token", lambda: orchestrator.renew_lease(*forged)),
            (1, "renew", lambda: orchestrator.renew_lease(*fence(lease))),
            (1, "grant with a forged token", lambda: orchestrator.grant_tool(*forged, "create-pr", "sha-1")),
            (1, "checkpoint", lambda: orchestrator.checkpoint(*fence(lease), "tests written")),
            (1, "checkpoint with a forged token", lambda: orchestrator.checkpoint(*forged, "tests written")),
            (1, "reconcile of a running Attempt", lambda: orchestrator.reconcile_attempt(lease.attempt_id)),
            (1, "verify of a running Attempt", lambda: orchestrator.verify_attempt(lease.attempt_id)),
            (1, "decide while running", lambda: orchestrator.decide("task-1")),
            (1, "complete with a forged token", lambda: orchestrator.complete_attempt(*forged, "done")),
            (1, "acknowledge with nothing to acknowledge", lambda: orchestrator.acknowledge_cancel(*fence(lease))),
        ]
        _walk(store, fenced)
        with appends(store, 1, "grant"):
            grant = orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        effect = world.provider.perform(grant.key, "create-pr", "sha-1", "open it")
        closing: list[tuple[int, str, Callable[[], object]]] = [
            (1, "record_receipt", lambda: orchestrator.record_receipt(*fence(lease), grant.key, effect.provider_id)),
            (1, "complete", lambda: orchestrator.complete_attempt(*fence(lease), "opened the pull request")),
            (1, "a second complete", lambda: orchestrator.complete_attempt(*fence(lease), "opened the pull request")),
            (1, "verify", lambda: orchestrator.verify_attempt(lease.attempt_id)),
            (2, "decide after success", lambda: orchestrator.decide("task-1")),
            (1, "cancel of a succeeded Attempt", lambda: orchestrator.cancel_attempt(lease.attempt_id, "operator tidies up")),
            (1, "approve", lambda: orchestrator.approve("task-1")),
        ]
        _walk(store, closing)
        expect_equal(store.get_task("task-1").state, "done", "the task at the end of the walk")
        history = store.events()
        seqs = [e.seq for e in history]
        expect_equal(seqs, sorted(set(seqs)), "the history's seq numbers (rising, each once)")
        expect(all(isinstance(e.reason, str) and e.reason for e in history), "every event says why, in a non-empty reason")


def _walk(store: object, steps: list[tuple[int, str, Callable[[], object]]]) -> None:
    for count, what, step in steps:
        with appends(store, count, what):  # type: ignore[arg-type]
            step()
