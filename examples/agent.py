"""The smallest driver of the agent: one worker, one task, the real core, every command printed as it is carried out.

    python examples/agent.py

A driver turns the agent's commands into I/O and hands back the answers;
here the I/O is as plain as it gets: contract calls on an `Orchestrator`
over a `MemoryStore`, provider calls on a `LedgerProvider`, and a
`ManualClock` that a `Wait` or a `Work` moves forward. The heartbeat renews
before each command once a beat is due. The simulator, the explorer and the
runtime are this loop with SimPy events, search actions, or threads and
sockets in place of these lines; the agent they drive is the same object.
"""

from __future__ import annotations

import random

from shiftchange.agent import Agent, AgentConfig, Cadence, Call, ChapterWorkflow, Look, Looked, Perform, Stop, Work, agent_config, retry_for
from shiftchange.core import (
    Backoff,
    BackoffConfig,
    CoreConfig,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    ProviderRefused,
    ProviderTimeout,
)

TOOL_S, COMMIT_S = 4.0, 1.0
"""How long this world's local work takes: a slow tool call, a commit."""


def execute(command, core: Orchestrator, provider: LedgerProvider, clock: ManualClock):
    """Carry out one command; the answer goes back to the agent."""
    if isinstance(command, Call):
        return getattr(core, command.contract)(*command.args, **command.kwargs)
    if isinstance(command, Perform):
        try:
            return provider.perform(command.key, command.operation, command.identity, "")
        except (ProviderTimeout, ProviderRefused) as error:
            return error
    if isinstance(command, Look):
        return Looked.read(core.store, command.attempt_id)
    clock.advance(command.seconds if not isinstance(command, Work) else TOOL_S if command.kind == "tool" else COMMIT_S)
    return None


def describe(command) -> str:
    """One command in a few words."""
    if isinstance(command, Call):
        return f"call     {command.contract}"
    if isinstance(command, Perform):
        return f"perform  {command.operation} at {command.dependency}"
    if isinstance(command, Look):
        return f"look     at the predecessor of {command.attempt_id}"
    if isinstance(command, Work):
        return f"work     {command.kind}"
    return f"wait     {command.seconds:g} s"


def main() -> int:
    clock = ManualClock()
    config = CoreConfig(lease_ttl_s=10.0, heartbeat_interval_s=3.0)
    core = Orchestrator(MemoryStore(), clock, LedgerProvider(clock=clock), config)
    core.create_task("t1", "make the login test pass", workspace="repo")
    core.accept_task("t1")
    core.dispatch("t1", Plan("await the cache write"))
    core.run_admission()

    agent = Agent("worker-1", agent_config(config, AgentConfig()), Backoff(BackoffConfig(), random.Random(1)), ChapterWorkflow(1))
    command, cadence = agent.claim("repo"), None
    while not isinstance(command, Stop):
        print(f"t={clock.now():5.1f}  {describe(command)}")
        answer = execute(command, core, core.provider, clock)
        if cadence is None and agent.holding:
            cadence = Cadence(clock.now(), config.heartbeat_interval_s)  # the core's heartbeat, from the claim
        command = agent.on(answer, clock.now())
        while cadence is not None and agent.holding and cadence.next_at() <= clock.now():
            cadence.beat(clock.now())
            fence, renewal = agent.fence, agent.renewal()
            print(f"t={clock.now():5.1f}  {describe(renewal)} (heartbeat)")
            if agent.renewed(fence, execute(renewal, core, core.provider, clock)):
                command = agent.interrupted()
    print(f"worker-1: {command.reason}")

    attempt = core.store.get_attempts("t1")[-1]
    core.verify_attempt(attempt.attempt_id)
    decision = core.decide("t1")
    retry = retry_for("t1", decision, attempt)
    print(f"loop decision: {decision.kind} ({decision.reason}); retry: {retry}")
    ended = core.store.get_attempt(attempt.attempt_id)
    print(f"task t1 is {core.store.get_task('t1').state}; attempt {ended.attempt_id} is {ended.state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
