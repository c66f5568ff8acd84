"""One agent, three drivers: fed the same scripted answers, the simulator's, the explorer's and the runtime's workers make
the same contract calls and the same provider calls, in the same order, as the plain loop of `examples/agent.py` does.

Each driver runs one claim against a scripted orchestrator (every contract
answers from its own queue, the last answer repeating) and a scripted
provider (each call's outcome in turn), and the test compares what they
asked for. Renewals are left out of the comparison: when a beat falls is the
driver's clock, not the protocol. Lease tokens are masked (a fence is its
Attempt and generation), and a claim is only a claim (the simulator claims
the offered task, the others pull the next one, each in its own workspace).
Each driver's agent is built by that driver's own converter from its own
configuration, given the same settings, so a converter that disagrees shows.
"""

from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import simpy

from shiftchange.agent import Agent, AgentConfig, Call, ChapterWorkflow, Look, Looked, Perform, Stop, Wait
from shiftchange.core import Accepted, Backoff, BackoffConfig, Effect, Grant, ProviderRefused, ProviderTimeout, Refused, Renewal
from shiftchange.explore.config import ExploreConfig
from shiftchange.runtime.clock import SteppingClock
from shiftchange.runtime.config import RuntimeConfig
from shiftchange.runtime.worker import Worker as RuntimeWorker
from shiftchange.runtime.worker import agent_config as runtime_agent
from shiftchange.sim.config import SimConfig
from shiftchange.sim.world import agent_config as sim_agent

TASK, ATTEMPT, PREVIOUS, TOKEN = "task-1", "task-1#2", "task-1#1", "token-2"
CONFIG = RuntimeConfig(
    agent=AgentConfig(call_deadline_s=3.0, gateway_retries_max=2, gateway_retry_s=0.5),
    workflow=ChapterWorkflow(tool_calls=1),
    core=replace(RuntimeConfig().core, heartbeat_interval_s=0.8),
)
"""Settings away from the agent's defaults (three retries, a one-second heartbeat), so a converter that forgot one shows;
the explorer bounds a call's asks at three retries."""
SIM_CONFIG = replace(SimConfig(), core=CONFIG.core, agent=CONFIG.agent, workflow=CONFIG.workflow)
EXPLORE_CONFIG = ExploreConfig(
    lease_ttl_s=CONFIG.core.lease_ttl_s,
    heartbeat_interval_s=CONFIG.core.heartbeat_interval_s,
    call_deadline_s=CONFIG.agent.call_deadline_s,
    gateway_retries_max=CONFIG.agent.gateway_retries_max,
    gateway_retry_s=CONFIG.agent.gateway_retry_s,
    time="concrete",  # the runtime's 0.8 s heartbeat is no whole multiple of 1/1024 s, which only the concrete clock searches
)
"""The runtime's settings: the simulator's config holds the same `AgentConfig` and workflow; the explorer's flags restate them."""
CONVERTED = {
    "simulator": lambda: sim_agent(SIM_CONFIG),
    "explorer": EXPLORE_CONFIG.agent,
    "runtime": lambda: runtime_agent(CONFIG),
}
"""Each driver's own converter, from its own configuration."""
WORKFLOW = CONFIG.workflow
"""The workflow the runtime's config holds; the other drivers are handed the same one."""
BACKOFF = BackoffConfig(strategy="exponential", base_s=1.0, cap_s=8.0)
CLAIM = SimpleNamespace(
    accepted=True,
    lease=SimpleNamespace(attempt_id=ATTEMPT, task_id=TASK, generation=2, token=TOKEN),
    manifest=SimpleNamespace(task_id=TASK, hypothesis="h"),
)
RECORDS = {
    ATTEMPT: SimpleNamespace(attempt_id=ATTEMPT, hypothesis="h", previous_attempt_id=PREVIOUS, checkpoint=None),
    PREVIOUS: SimpleNamespace(attempt_id=PREVIOUS, hypothesis="h", previous_attempt_id=None, checkpoint="tools-done"),
}


def grant(*args: Any, **_kwargs: Any) -> Grant:
    operation, identity = args[3], args[4]
    return Grant(f"{operation}:{identity}", None, 1_000.0, "code_host", 100.0)


def replay(*args: Any, **kwargs: Any) -> Grant:
    granted = grant(*args, **kwargs)
    return Grant(granted.key, "pr-7", granted.deadline_at, granted.dependency, granted.timeout_left_s)


CAPACITY = Refused("rate limit", code="rate_limit", guards=("rate_allows",), domain="capacity", state="running")
SCRIPTS = {
    "resume-retry-and-replay": (
        # resumes after the predecessor's "tools-done"; a lost start, then a refusal from Running that means it landed;
        # push: a rate denial waited out, a timeout reported and backed off, then it lands; create-pr is a replay
        {
            "start_attempt": [None, Refused("already running", code="no_row", state="running")],
            "grant_tool": [CAPACITY, grant, grant, grant, replay],
        },
        [ProviderTimeout("no answer"), "land", "land"],
    ),
    "cancellation-read-from-a-refusal": (
        {"grant_tool": [grant, Refused("cancelling", code="no_row", state="cancelling")]},
        ["land"],
    ),
    "provider-refusal-fails-the-attempt": (
        {"grant_tool": [grant]},
        [ProviderRefused("authorization", "403: the credential was revoked")],
    ),
    "lease-gone-at-the-receipt": (
        {"grant_tool": [grant], "record_receipt": [Refused("stale", code="stale_fence", state="suspect")]},
        ["land"],
    ),
}


class Script:
    """A scripted orchestrator, its store and provider: each contract answers from its queue; every call is logged."""

    def __init__(self, answers: dict[str, list], outcomes: list) -> None:
        self.answers = {name: list(queue) for name, queue in answers.items()}
        self.outcomes = list(outcomes)
        self.log: list[tuple] = []
        self.store = SimpleNamespace(get_attempt=RECORDS.get, close=lambda: None)

    def __getattr__(self, contract: str):
        if contract.startswith("_"):
            raise AttributeError(contract)

        def answer(*args: Any, **kwargs: Any) -> Any:
            if contract.startswith("claim"):
                self.log.append(("claim",))  # which claim, and in which workspace, is the driver's world
            elif contract != "renew_lease":
                masked = tuple("<token>" if arg == TOKEN else arg for arg in args)
                self.log.append((contract, masked, tuple(sorted(kwargs.items()))))
            return self._next(contract, args, kwargs)

        answer.__name__ = contract  # the simulator's transport names a call by its function
        return answer

    def _next(self, contract: str, args: tuple, kwargs: dict) -> Any:
        if contract.startswith("claim"):
            return CLAIM
        if contract == "renew_lease":
            return Renewal(1e9, cancel_requested=False)
        queue = self.answers.get(contract, [Accepted("running")])
        scripted = queue.pop(0) if len(queue) > 1 else queue[0]
        return scripted(*args, **kwargs) if callable(scripted) else scripted

    def outcome(self, key: str, operation: str, identity: str) -> Any:
        """The provider's next outcome for this call: an `Effect` that landed, or the timeout or refusal to raise."""
        self.log.append(("provider", key, operation))
        outcome = self.outcomes.pop(0)
        return Effect(f"{operation}-{len(self.log)}", key, operation, identity, "", 0.0) if outcome == "land" else outcome


def agent(driver: str = "runtime") -> Agent:
    return Agent("worker-1", CONVERTED[driver](), Backoff(BACKOFF, random.Random(1)), WORKFLOW)


# ------------------------------------------------------------------ the drivers


def reference(script: Script) -> None:
    """The plain loop of `examples/agent.py`: each command carried out at once."""
    worker, now = agent(), 0.0
    command = worker.claim(CONFIG.workspace)
    while type(command) is not Stop:
        if type(command) is Call:
            answer = getattr(script, command.contract)(*command.args, **command.kwargs)
        elif type(command) is Perform:
            answer = script.outcome(command.key, command.operation, command.identity)
        elif type(command) is Look:
            answer = Looked.read(script.store, command.attempt_id)
        else:
            now += command.seconds if type(command) is Wait else 1.0
            answer = None
        command = worker.on(answer, now)


def simulator(script: Script) -> None:
    """The SimPy driver, over the simulator's own transport with no faults, and a provider that answers after a second."""
    from shiftchange.sim.config import NetworkConfig
    from shiftchange.sim.network import Transport
    from shiftchange.sim.worker import Offer, Worker, WorkerContext

    env = simpy.Environment()

    class Provider:
        def call(self, key, operation, identity, task_id, worker_id, deadline_at, via_gateway=True):
            yield env.timeout(1.0)
            outcome = script.outcome(key, operation, identity)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

    observer = SimpleNamespace(holding=_ignore, released=_ignore, paused=_ignore, crashed=_ignore, renewal=_ignore)
    offers = simpy.Store(env)
    context = WorkerContext(
        env=env,
        orchestrator=script,
        store=script.store,
        transport=Transport(env, NetworkConfig(), random.Random(1)),
        providers={"code_host": Provider(), "model_provider": Provider()},
        offers=offers,
        bench=SimpleNamespace(tool_time_s=lambda: 5.0, commit_time_s=lambda: 1.0),
        workflow_of=lambda _task_id: WORKFLOW,
        leases=observer,
        seams=agent("simulator").seams,
        agent=sim_agent(SIM_CONFIG),
        heartbeat_interval_s=SIM_CONFIG.core.heartbeat_interval_s,
        backoff=BACKOFF,
        rng=random.Random(1),
    )
    Worker(context, "worker-1").start()
    offers.put(Offer(TASK, ATTEMPT, CONFIG.workspace))
    env.run(until=10_000.0)


def explorer(script: Script) -> None:
    """The explorer's worker actor: take its one offered step, answer its provider calls, move the clock when it waits."""
    from shiftchange.explore.workers import RENEW, Worker

    class Wire:
        def request(self, _worker_id, call, _duplicate):
            return getattr(script, call.contract)(*call.args, **call.kwargs)

        def look(self, attempt_id):
            return Looked.read(script.store, attempt_id)

        def send(self, _worker, _perform):
            return 1

    wire, worker, now, claimed = Wire(), Worker(agent("explorer")), 0.0, False
    for _step in range(1_000):
        worker.settle(wire, now)
        if claimed and worker.command is None:
            return
        steps = [step for step in worker.steps([TASK], now) if step[0] != RENEW]
        if steps:
            step, argument = ("claim-next", "") if not claimed else steps[0]
            claimed = True
            worker.act(step, argument, wire, now)
        elif worker.call is not None:
            perform = worker.command
            outcome = script.outcome(perform.key, perform.operation, perform.identity)
            worker.lost() if isinstance(outcome, ProviderTimeout) else worker.answered(outcome, now)
        else:
            assert worker.wait_until is not None, worker
            now = worker.wait_until
    raise AssertionError("the explorer's worker did not finish its Attempt")


def runtime(script: Script) -> None:
    """The runtime's worker on a clock whose waits pass at once, with no heartbeat thread (renewals are not compared)."""

    class Provider:
        def call(self, key, operation, identity, task_id, worker_id, deadline_at, via_gateway=True):
            outcome = script.outcome(key, operation, identity)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

    worker = RuntimeWorker(script, Provider(), CONFIG, "worker-1", clock=SteppingClock())
    worker.backoff = Backoff(BACKOFF, random.Random(1))
    worker.agent = agent("runtime")
    assert worker.attempt()


def _ignore(*_args: Any) -> None:
    pass


DRIVERS = {"simulator": simulator, "explorer": explorer, "runtime": runtime}


def test_every_driver_converts_the_same_settings_to_the_same_agent():
    """One converter: the same deadlines, retries and lease give every driver the same agent, a call held back
    by a dependency's controls waiting at most one lease everywhere (once only the runtime capped it)."""
    converted = {driver: convert() for driver, convert in CONVERTED.items()}
    assert len(set(converted.values())) == 1, converted
    assert converted["simulator"].held_back_wait_max_s == CONFIG.core.lease_ttl_s


@pytest.mark.parametrize("scenario", sorted(SCRIPTS))
@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_every_driver_makes_the_reference_calls_for_the_same_answers(driver, scenario):
    answers, outcomes = SCRIPTS[scenario]
    expected, seen = Script(answers, outcomes), Script(answers, outcomes)
    reference(expected)
    DRIVERS[driver](seen)
    assert seen.log == expected.log
    assert expected.log[-1][0] in ("complete_attempt", "acknowledge_cancel", "report_failure", "record_receipt")


def test_the_scripts_reach_the_rows_they_are_named_for():
    """The comparison is only worth what the scripts exercise: each reaches the ending and the branches it claims to."""
    logs = {}
    for scenario, (answers, outcomes) in SCRIPTS.items():
        script = Script(answers, outcomes)
        reference(script)
        logs[scenario] = [entry[0] for entry in script.log]
    resumed = logs["resume-retry-and-replay"]
    assert resumed.count("start_attempt") == 2 and resumed.count("report_call_failure") == 1
    assert resumed.count("provider") == 3 and resumed[-1] == "complete_attempt"  # push twice, describe; create-pr replayed
    assert logs["cancellation-read-from-a-refusal"][-1] == "acknowledge_cancel"
    assert logs["provider-refusal-fails-the-attempt"][-2:] == ["report_call_failure", "report_failure"]
    assert logs["lease-gone-at-the-receipt"][-1] == "record_receipt"


def test_a_driver_that_decides_for_itself_is_caught():
    """A driver that reads an unanswered start as "not started" and gives up (a decision the agent makes otherwise) differs."""
    answers, outcomes = SCRIPTS["resume-retry-and-replay"]
    expected, seen = Script(answers, outcomes), Script(answers, outcomes)
    reference(expected)
    worker = agent()
    command = worker.claim(CONFIG.workspace)
    while type(command) is not Stop:
        answer = getattr(seen, command.contract)(*command.args, **command.kwargs) if type(command) is Call else None
        if type(command) is Look:
            answer = Looked.read(seen.store, command.attempt_id)
        if type(command) is Call and command.contract == "start_attempt" and answer is None:
            break  # the rogue driver's own rule
        command = worker.on(answer, 0.0)
    assert seen.log != expected.log
    assert [entry[0] for entry in seen.log] == ["claim", "start_attempt"]
