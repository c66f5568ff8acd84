"""The simulator end to end: every scenario holds every invariant, every anti-pattern is caught, runs replay, shrinking keeps the failure.

These are the issue's acceptance tests. The default run plays each scenario
for 10 seeds at a small task count, enough that every kind of fault the
scenario switches on strikes in some seed (the test asserts it); `-m slow`
plays 510 seeds more of each. The whole-simulation tests are `heavy`. A failure
message carries the replay command, so a red test is one command away from a
person reading the timeline.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shiftchange.antipatterns import ANTIPATTERNS
from shiftchange.checkers import recovery
from shiftchange.checkers.rules import INVARIANTS
from shiftchange.lab.shrink import shrink
from shiftchange.sim.scenarios import SCENARIOS, scenario_config
from shiftchange.sim.world import play

TASKS = 120
SEEDS = range(10)
SLOW_SEEDS = range(10, 520)


def _replay(scenario: str, seed: int, tasks: int, antipattern: str | None = None) -> str:
    extra = f" --antipattern {antipattern}" if antipattern else ""
    return f"shiftchange sim run --scenario {scenario} --seed {seed} --tasks {tasks}{extra}"


def _failures(outcome) -> str:
    return "; ".join(f"{v.name}: {v.status} {v.violations} {' | '.join(v.example[:3])}" for v in outcome.verdicts.values() if not v.ok)


RECOVERY_MISS_SHARE_MAX = 0.1
"""goodput_recovers is a quantitative property of a world, not a safety invariant: the share of seeds whose goodput may
stay down past the bound. The correct core misses it in about one seed in sixty in the retry-storm world at 120 tasks
(7 of seeds 0-399 under the agent's worker, 6 under the worker before it; its anti-pattern misses nearly every seed)."""


def _holds(scenario: str, seed: int, tasks: int = TASKS) -> tuple[bool, set[str], set[str]]:
    """Every invariant holds and every task retires once; returns whether goodput recovered (True where it is not judged),
    the kinds of fault the config switches on or places, and the kinds that struck (were due before the run ended)."""
    config = scenario_config(scenario, seed, tasks)
    outcome = play(config, seed, scenario)
    assert set(outcome.verdicts) == set(INVARIANTS) | ({recovery.NAME} if config.recovery is not None else set())
    safety = {name: verdict for name, verdict in outcome.verdicts.items() if name != recovery.NAME}
    assert all(verdict.ok for verdict in safety.values()), f"{_failures(outcome)}; replay: {_replay(scenario, seed, tasks)}"
    states = outcome.metrics["final_states"]
    assert sum(states.values()) == tasks, f"every task retires exactly once: {states}"
    recovered = outcome.verdicts.get(recovery.NAME)
    switched_on = set(config.nemesis.faults) | {spec.kind for spec in config.nemesis.placed}
    struck = {fault.kind for fault in outcome.schedule if fault.at < outcome.metrics["sim_time_s"]}
    return recovered is None or recovered.ok, switched_on, struck


def _holds_for(scenario: str, seeds: range) -> None:
    missed, switched_on, struck = [], set(), set()
    for seed in seeds:
        recovered, on, hit = _holds(scenario, seed)
        missed += [] if recovered else [seed]
        switched_on |= on
        struck |= hit
    assert len(missed) <= RECOVERY_MISS_SHARE_MAX * len(seeds), (
        f"goodput stayed down past the bound in {len(missed)} of {len(seeds)} seeds {missed}; replay: {_replay(scenario, missed[0], TASKS)}"
    )
    assert switched_on <= struck, f"{sorted(switched_on - struck)} never struck in {scenario} seeds {seeds.start}-{seeds.stop - 1}"


@pytest.mark.heavy
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_correct_core_holds_every_invariant_in_every_scenario(scenario):
    """Ten seeds of each scenario: the reference core keeps all eleven invariants under its faults, every kind of fault the
    scenario switches on strikes in at least one seed, and goodput comes back after a trigger in all but one of them."""
    _holds_for(scenario, SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_correct_core_holds_every_invariant_for_510_more_seeds(scenario):
    """Five hundred and ten more seeds of each scenario: the default test's longer variant, behind the slow marker."""
    _holds_for(scenario, SLOW_SEEDS)


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(ANTIPATTERNS))
def test_every_antipattern_is_caught_by_its_expected_invariant(name):
    """Each of the chapter's failure modes, switched on in its scenario, is reported violated by the invariant named for it."""
    pattern = ANTIPATTERNS[name]
    caught = []
    for seed in range(3):
        outcome = play(scenario_config(pattern.scenario, seed, TASKS), seed, pattern.scenario, pattern)
        verdict = outcome.verdicts[pattern.invariant]
        caught.append(verdict.status == "violated" and verdict.violations > 0 and bool(verdict.example))
    assert all(caught), f"{name} escaped {pattern.invariant} in seeds {[s for s, c in enumerate(caught) if not c]}"


def test_thirteen_antipatterns_each_name_a_known_scenario_and_invariant():
    """The table DESIGN.md asks for: thirteen switches, each with a scenario that exists and one of the eleven invariants
    (or, for the retry storm, a quantitative property of the world: goodput_recovers)."""
    assert len(ANTIPATTERNS) == 13
    for pattern in ANTIPATTERNS.values():
        assert pattern.scenario in SCENARIOS and pattern.invariant in (*INVARIANTS, recovery.NAME), pattern.name
    assert ANTIPATTERNS["retry-storm"].invariant == recovery.NAME


def test_the_same_seed_gives_the_same_history_and_another_seed_does_not():
    """Determinism: (code, config, seed) fixes the history digest; a different seed changes it."""
    config = scenario_config("mixed", 7, 80)
    first, second = play(config, 7, "mixed"), play(config, 7, "mixed")
    assert first.digest == second.digest and first.metrics == second.metrics
    assert play(config, 8, "mixed").digest != first.digest


def test_replay_in_a_fresh_process_with_another_hash_seed_gives_the_same_digest():
    """No hidden dependence on set order or object ids: another interpreter with another PYTHONHASHSEED replays the digest."""
    code = (
        "from shiftchange.sim.scenarios import scenario_config; from shiftchange.sim.world import play; "
        "print(play(scenario_config('swarm', 5, 60), 5, 'swarm').digest)"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        digests.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip())
    assert len(digests) == 1 and play(scenario_config("swarm", 5, 60), 5, "swarm").digest in digests


def test_the_shrunk_run_still_violates_and_is_no_bigger():
    """The shrinker's output, replayed from its task count and kept faults, violates the same invariant."""
    pattern = ANTIPATTERNS["no-fencing"]
    config = scenario_config(pattern.scenario, 1, TASKS)
    found = shrink(config, 1, pattern.scenario, pattern, budget_runs=25)
    assert found is not None
    assert found.tasks <= TASKS and len(found.faults_kept) <= len(found.outcome.schedule)
    replayed = play(config.with_tasks(found.tasks), 1, pattern.scenario, pattern, faults_kept=found.faults_kept)
    assert replayed.verdicts[found.invariant].status == "violated"
    assert replayed.digest == found.outcome.digest
    assert found.timeline and found.invariant in found.timeline[0]


def test_a_run_that_holds_has_nothing_to_shrink():
    """Shrinking a passing run says so (None) instead of inventing a counterexample."""
    assert shrink(scenario_config("baseline", 2, 30), 2, "baseline") is None


def test_the_public_surface_is_what_the_package_says():
    """Every name `shiftchange.sim` exports exists, and every sim module opens with a docstring saying its one job."""
    import importlib
    import pkgutil

    import shiftchange.sim as sim

    assert all(hasattr(sim, name) for name in sim.__all__)
    for module in pkgutil.iter_modules(sim.__path__):
        loaded = importlib.import_module(f"shiftchange.sim.{module.name}")
        assert loaded.__doc__ and loaded.__doc__.strip(), module.name


def test_progress_reports_simulated_time_and_retired_tasks_as_they_grow():
    """The progress hook sees simulated time advance and the retired count climb to every task."""
    seen = []
    outcome = play(scenario_config("baseline", 4, 40), 4, "baseline", progress=lambda *report: seen.append(report))
    times, retired, totals = zip(*seen, strict=True)
    assert list(times) == sorted(times) and list(retired) == sorted(retired)
    assert set(totals) == {40} and retired[-1] == 40 and outcome.ok


def test_bad_fault_indices_are_refused_before_anything_runs():
    """A kept-fault index outside the seed's schedule is bad input, not a silently shorter schedule."""
    from shiftchange.core import InputError

    with pytest.raises(InputError):
        play(scenario_config("mixed", 1, 20), 1, "mixed", faults_kept=(10_000,))


def _provider(latency_s: float = 1.0):
    import random

    import simpy

    from shiftchange.sim.config import ProviderConfig
    from shiftchange.sim.provider import SimProvider

    env = simpy.Environment()
    landed = []
    provider = SimProvider(env, "code_host", ProviderConfig(latency_s=latency_s), random.Random(1), landed.append, lambda *a: "passed")
    return env, provider, landed


def _call(env, provider, deadline_at: float, outcome: list) -> object:
    from shiftchange.core import ProviderTimeout

    def caller():
        try:
            outcome.append((yield from provider.call("push:t:sha", "push", "t:sha", "t", "worker-1", deadline_at)))
        except ProviderTimeout as timeout:
            outcome.append(timeout)

    return env.process(caller())


def test_a_call_sent_after_its_deadline_is_dropped_and_never_lands():
    """Deadline propagation: a worker paused past its grant's deadline cannot land the effect (the swarm seed 480 bug)."""
    env, provider, landed = _provider()
    outcome: list = []
    env.run(until=10.0)
    _call(env, provider, deadline_at=5.0, outcome=outcome)
    env.run(until=1000.0)
    assert type(outcome[0]).__name__ == "ProviderTimeout" and landed == [] and provider.find("push:t:sha", "push", "t:sha") == []


def test_work_that_would_finish_after_the_deadline_is_abandoned_not_landed_late():
    """A call slower than its deadline times out for the caller and leaves nothing behind, even long after."""
    env, provider, landed = _provider(latency_s=1000.0)
    outcome: list = []
    _call(env, provider, deadline_at=0.001, outcome=outcome)
    env.run(until=100_000.0)
    assert type(outcome[0]).__name__ == "ProviderTimeout" and landed == []


def test_the_swarm_run_that_found_the_late_landing_now_holds():
    """Regression: swarm seed 480 landed a paused worker's push after its replacement's; every invariant holds now."""
    outcome = play(scenario_config("swarm", 480, 60), 480, "swarm")
    assert outcome.ok, _failures(outcome)


# ------------------------------------------------------------------ the worker alone, against scripted answers


class _Scripted:
    """Any object with the orchestrator's contract methods will do: this one answers from a script and logs every call.

    `answers` maps a contract to its answer, or to a function of its arguments; a contract it does not name is accepted.
    """

    def __init__(self, answers: dict):
        self.answers = answers
        self.calls: list[tuple[str, tuple]] = []
        self.clock = None
        self.sent_at: dict[str, float] = {}
        """Each contract's first call, on `clock` (when set)."""

    def __getattr__(self, contract: str):
        from shiftchange.core import Accepted

        def answer(*args, **kwargs):
            self.calls.append((contract, args))
            if self.clock is not None:
                self.sent_at.setdefault(contract, self.clock())
            scripted = self.answers.get(contract, Accepted("running"))
            return scripted(*args) if callable(scripted) else scripted

        answer.__name__ = contract  # the transport names calls by their function's name
        return answer


class _Landing:
    """A provider whose every call lands `latency_s` later."""

    def __init__(self, env, latency_s: float):
        self.env, self.latency_s = env, latency_s
        self.keys: list[str] = []

    def call(self, key, operation, identity, task_id, worker_id, deadline_at, via_gateway=True):
        from shiftchange.core import Effect

        self.keys.append(key)
        yield self.env.timeout(self.latency_s)
        return Effect(f"pr-{len(self.keys)}", key, operation, identity, "", self.env.now)


def _lone_worker(answers: dict, provider_latency_s: float = 1.0, aimed=None):
    """One sim `Worker` with no World: a scripted orchestrator, a provider that lands, the real transport and lease ground truth."""
    import random
    from types import SimpleNamespace

    import simpy

    from shiftchange.agent import AgentConfig, OperationsWorkflow, WorkerSeams
    from shiftchange.core import BackoffConfig, Grant, Renewal
    from shiftchange.sim.config import NetworkConfig
    from shiftchange.sim.metrics import Metrics
    from shiftchange.sim.network import Transport
    from shiftchange.sim.worker import Offer, Worker, WorkerContext

    env = simpy.Environment()
    lease = SimpleNamespace(attempt_id="t#1", task_id="t", generation=1, token="k")
    claim = SimpleNamespace(accepted=True, lease=lease, manifest=SimpleNamespace(hypothesis="h"))
    grant = Grant("create-pr:t:sha", None, 100.0, "code_host", 100.0)
    orchestrator = _Scripted({"claim_attempt": claim, "grant_tool": grant, "renew_lease": Renewal(60.0, False), **answers})
    orchestrator.clock = lambda: env.now
    provider = _Landing(env, provider_latency_s)
    offers = simpy.Store(env)
    leases = Metrics(60.0)
    context = WorkerContext(
        env=env,
        orchestrator=orchestrator,
        store=SimpleNamespace(get_attempt=lambda attempt_id: None),  # a first Attempt: nothing to resume from
        transport=Transport(env, NetworkConfig(), random.Random(1)),
        providers={"code_host": provider},
        offers=offers,
        bench=SimpleNamespace(),
        workflow_of=lambda task_id: OperationsWorkflow(("create-pr",)),
        leases=leases,
        seams=WorkerSeams(),
        agent=AgentConfig(call_deadline_s=60.0),
        heartbeat_interval_s=10.0,
        backoff=BackoffConfig(),
        rng=random.Random(1),
        aimed=aimed,
    )
    worker = Worker(context, "worker-1")
    worker.start()
    offers.put(Offer("t", "t#1", "repo-0"))
    return env, worker, orchestrator, provider, leases


def test_the_worker_drives_the_agent_against_a_scripted_orchestrator_without_a_world():
    """The sim worker needs no World: against scripted answers it makes the agent's calls in order, and lets go at the end."""
    env, worker, orchestrator, provider, leases = _lone_worker({}, provider_latency_s=25.0)
    env.run(until=100.0)
    contracts = [contract for contract, _args in orchestrator.calls]
    assert [c for c in contracts if c != "renew_lease"] == [
        "claim_attempt",
        "start_attempt",
        "grant_tool",
        "record_receipt",
        "complete_attempt",
    ]
    assert contracts.count("renew_lease") == 2  # the 25 s provider call spans two beats of 10 s from the claim
    assert provider.keys == ["create-pr:t:sha"]  # the provider is called with the key the gateway minted
    assert worker.holding is None and leases.renewals["accepted"] == 2


def test_a_refused_renewal_stops_the_worker_in_the_middle_of_a_provider_call():
    """The heartbeat interrupts the workflow when the agent says so: no receipt, no completion after the lease is gone."""
    from shiftchange.core import Refused

    refused = Refused("stale", code="stale_fence", state="suspect")
    env, worker, orchestrator, _provider, leases = _lone_worker({"renew_lease": refused}, provider_latency_s=25.0)
    env.run(until=100.0)
    contracts = [contract for contract, _args in orchestrator.calls]
    assert contracts == ["claim_attempt", "start_attempt", "grant_tool", "renew_lease"]
    assert worker.holding is None and leases.renewals["refused"] == 1


def test_a_request_on_the_wire_lands_though_its_sender_stops_waiting():
    """A crash or a refused renewal interrupts the caller; the request it already sent still reaches the orchestrator."""
    import random

    import simpy

    from shiftchange.sim.config import NetworkConfig
    from shiftchange.sim.network import Transport

    env = simpy.Environment()
    transport = Transport(env, NetworkConfig(latency_s=1.0), random.Random(3))
    landed, heard = [], []

    def complete_attempt(*args):
        landed.append(env.now)
        return "accepted"

    def caller():
        try:
            heard.append((yield from transport.call("worker-1", complete_attempt, "t#1", 1, "k")))
        except simpy.Interrupt:
            heard.append("interrupted")

    process = env.process(caller())

    def interrupter():
        yield env.timeout(0)
        process.interrupt("crash")

    env.process(interrupter())
    env.run()
    assert heard == ["interrupted"]
    assert len(landed) == 1 and landed[0] > 0  # it landed later, after the sender had stopped waiting


def test_an_aimed_pause_freezes_the_worker_with_its_completion_in_hand():
    """Armed before `complete_attempt`, the pause strikes the worker about to send it, and is written down then."""
    from shiftchange.checkers.history import Fault
    from shiftchange.sim.nemesis import Aimed

    recorded = []
    aimed = Aimed(recorded.append)
    aimed.arm(Fault(0.0, "pause", "busy", 50.0, parameters=(("before", "complete_attempt"),)))
    env, _worker, orchestrator, _provider, _leases = _lone_worker({}, provider_latency_s=5.0, aimed=aimed)
    env.run(until=200.0)
    sent_at = orchestrator.sent_at
    [struck] = recorded
    assert struck.target == "worker-1" and struck.kind == "pause" and 5.0 < struck.at < 6.0  # after the receipt, not at 0
    assert struck.until == struck.at + 50.0 and not aimed.armed
    assert sent_at["complete_attempt"] >= struck.until  # the completion left only when the pause ended
    assert sent_at["record_receipt"] < struck.at


def test_an_aimed_pause_that_wakes_when_replaced_wakes_as_the_retry_starts():
    """`wake=replaced`: the frozen worker's completion leaves when another worker starts its task's next Attempt."""
    from shiftchange.core import Event
    from shiftchange.lab.settings import PLACED_PATH, apply
    from shiftchange.sim.config import FaultSpec
    from shiftchange.sim.scenarios import scenario_config

    aimed = FaultSpec.parse("pause busy at=0 for=600 before=complete_attempt wake=replaced")
    config = apply(scenario_config("baseline", 1, 40), {PLACED_PATH: (aimed,)})
    heard = []
    outcome = play(config, 1, "baseline", history_sink=heard.append)
    assert outcome.ok
    [pause] = [entry for entry in heard if type(entry) is not Event and getattr(entry, "kind", None) == "pause"]
    events = [entry for entry in heard if type(entry) is Event]
    stale = next(e for e in events if e.kind == "complete" and not e.accepted and e.at > pause.at)
    retry_start = next(e for e in events if e.kind == "start" and e.task_id == stale.task_id and e.at > pause.at)
    assert stale.worker_id == pause.target and retry_start.worker_id != pause.target
    assert retry_start.at <= stale.at < retry_start.at + 1.0 < pause.until  # woken by the retry, long before the pause's end
    assert stale.code in ("stale_fence", "lease_expired", "no_lease") or "lease" in stale.reason
