"""The explorer's workers: each one an `agent.Agent`, which makes every decision, and the few bits a driver adds.

A worker's enabled step is the agent's current command, labelled by the
contract it calls (`STEP_OF`): `claim:TASK` and `claim-next` for an idle
worker (any admitted task, or the longest-admitted Attempt), then `start`,
`grant`, `perform` (the provider call goes on the wire), `receipt`,
`checkpoint`, `complete`, `ack`, `report`, `fail`; and `renew`, the
heartbeat's renewal, when the worker holds a lease it has not renewed at
this instant. Taking the step carries the command out and hands the answer
back to the agent, which gives the next command.

What has a single answer is no step of its own, so traces do not grow:
`settle` hands it over at the end of every step. A `Look` is answered from
the store (the predecessor it reads is terminal, so the answer is the same
whenever it is read); `Work` at once; a `Wait` once the clock reaches its
end; a provider's answer once it arrives; and for a call whose answer was
lost, that never reached the provider or was sent past its deadline, a
`ProviderTimeout` once the deadline passes. A paused worker hears them too,
as they fall due: the agent only changes its mind, and the command it then
gives waits for the worker to wake (so a pause just before or just after an
answer arrives is one state, not two). The agent reads the instant it hears
an answer at only to set the deadline of a call that bypasses the gateway,
and in the one anti-pattern that bypasses it the call follows a step of the
worker's own.

The driver's own bits are what an operating system or a network would hold
for the agent: whether it is paused, its incarnation (a crash makes a new
agent), the provider call it awaits, the answer it will hear and when
(`wait_until`), and when it last renewed. None of them decides anything:
nothing here reads a refusal.

A `Worker` talks to the world through a `Wire` (the orchestrator's
contracts, the store for a `Look`, the provider for a call), so a unit test
can drive it against a scripted orchestrator and provider: `act` the one
step `steps` offers, answer a `perform` with `answered` (or `lost`), move
the clock to `wait_until` when nothing is offered, and `settle` after each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shiftchange.agent import Agent, Call, Command, Look, Looked, Perform, Stop, Wait, Work
from shiftchange.agent.worker import STATE_ROW_DEADLINE
from shiftchange.core import ProviderTimeout

from .config import WORKSPACE

STEP_OF = {
    "claim_attempt": "claim",
    "claim_next": "claim-next",
    "start_attempt": "start",
    "grant_tool": "grant",
    "record_receipt": "receipt",
    "checkpoint": "checkpoint",
    "complete_attempt": "complete",
    "acknowledge_cancel": "ack",
    "report_call_failure": "report",
    "report_failure": "fail",
    "renew_lease": "renew",
}
"""Each contract's step label."""
CLAIMS = ("claim", "claim-next")
PERFORM, RENEW = "perform", "renew"
DUPLICABLE = frozenset(STEP_OF.values()) - {RENEW}
"""Steps that are a request on the wire the network may deliver twice (a provider call is the provider's to answer)."""


class Wire(Protocol):
    """What a worker's steps reach: the orchestrator's contracts, the store's records, the provider."""

    def request(self, worker_id: str, call: Call, duplicate: bool) -> Any:
        """Call the contract `call` names and return its answer (`duplicate`: the network will deliver it again later)."""
        ...

    def look(self, attempt_id: str) -> Looked | None:
        """Answer a `Look`."""
        ...

    def send(self, worker: Worker, perform: Perform) -> int | None:
        """Put the provider call on the wire; the number naming it, or None when it is void (sent past its deadline)."""
        ...


def timed_out(perform: Perform) -> ProviderTimeout:
    return ProviderTimeout(f"{perform.dependency} gave no answer to {perform.key} by its deadline")


@dataclass(slots=True)
class Worker:
    """One worker: the agent, the command it waits to have carried out, and the driver's bits around it."""

    agent: Agent
    command: Command | None = None
    """The agent's current command (None: idle, it may claim)."""
    paused: bool = False
    paused_at: float = 0.0
    """When the pause began: for the history's record of it, not part of the state."""
    incarnation: int = 0
    """Bumped by a crash: a call remembers the incarnation that sent it, and no later one hears its answer."""
    call: int | None = None
    """The number of the provider call this worker awaits, while it is in flight."""
    answer: Any = None
    """What the worker will hear at `wait_until`: a provider's answer, a `ProviderTimeout`, or None (a `Wait` ends)."""
    wait_until: float | None = None
    renewed_at: float = 0.0
    stalled_until: float | None = None
    """While it is stalled: it takes no step but its heartbeat's until then (the nemesis's `stall`)."""

    @property
    def worker_id(self) -> str:
        return self.agent.worker_id

    @property
    def holding(self) -> bool:
        return self.agent.holding

    @property
    def busy(self) -> bool:
        """Whether it has anything to lose to a crash: an Attempt it works on, a claim or a call under way."""
        return self.command is not None or self.holding

    # ------------------------------------------------------------ steps

    def steps(self, admitted: list[str], now: float) -> list[tuple[str, str]]:
        """The steps this worker may take now, as (step, ":argument" or ""): its command's, or a claim; then a renewal."""
        if self.paused:
            return []
        if self.stalled_until is not None:
            return [(RENEW, "")] if self.holding and self.renewed_at < now else []
        command = self.command
        if command is None:
            return [("claim", f":{task_id}") for task_id in admitted] + ([("claim-next", "")] if admitted else [])
        steps = []
        if type(command) is Call:
            steps.append((STEP_OF[command.contract], ""))
        elif type(command) is Perform and self.call is None and self.wait_until is None:
            steps.append((PERFORM, ""))
        if self.holding and self.renewed_at < now:
            steps.append((RENEW, ""))
        return steps

    def act(self, step: str, argument: str, wire: Wire, now: float, duplicate: bool = False) -> None:
        """Take one of `steps()`: claim, renew, send the provider call, or carry out the command's contract call."""
        if step == RENEW:
            self.renew(wire, now)
        elif step == PERFORM:
            self._send(wire, now)
        else:
            if step in CLAIMS:
                self.command = self.agent.claim(WORKSPACE, argument or None)
            self.hear(wire.request(self.worker_id, self.command, duplicate), now)
            if step in CLAIMS and self.holding:
                self.renewed_at = now  # the claim's answer starts the heartbeat

    def renew(self, wire: Wire, now: float) -> None:
        """The heartbeat renews; a refusal, or a cancellation to acknowledge, interrupts whatever the agent waits on."""
        fence = self.agent.fence
        renewal = wire.request(self.worker_id, self.agent.renewal(), False)
        self.renewed_at = now
        if self.agent.renewed(fence, renewal):
            self.call = self.answer = self.wait_until = None  # the call awaited is abandoned: its answer reaches no one
            self.take(self.agent.interrupted(), now)

    def _send(self, wire: Wire, now: float) -> None:
        perform = self.command
        self.call = wire.send(self, perform)
        if self.call is None:
            self.lost()  # void: it hears nothing, and times out at the deadline

    # ---------------------------------------------------------- answers

    def hear(self, answer: Any, now: float) -> None:
        """Hand the agent the answer to its command."""
        self.take(self.agent.on(answer, now), now)

    def take(self, command: Command, now: float) -> None:
        """The agent's next command; a `Wait` ends `seconds` from now."""
        self.command = command
        if type(command) is Wait:
            self.answer, self.wait_until = None, now + command.seconds

    def answered(self, answer: Any, now: float) -> None:
        """The provider answered the call this worker awaits (an `Effect` or a `ProviderRefused`): it hears it now."""
        self.call, self.answer, self.wait_until = None, answer, now

    def lost(self) -> None:
        """The call this worker awaits will never be answered: it hears a `ProviderTimeout` at its deadline."""
        perform = self.command
        self.call, self.answer, self.wait_until = None, timed_out(perform), perform.deadline_at

    def settle(self, wire: Wire, now: float) -> None:
        """Hand the agent every answer that has a single value and is due by `now`; a stall that has run its length ends."""
        if self.stalled_until is not None and self.stalled_until <= now:
            self.stalled_until = None
        while True:
            command = self.command
            if type(command) is Stop:
                self.command = None
                return
            if type(command) is Look:
                self.hear(wire.look(command.attempt_id), now)
            elif type(command) is Work:
                self.hear(None, now)
            elif self.wait_until is not None and self.wait_until <= now:
                answer, self.answer, self.wait_until = self.answer, None, None
                self.hear(answer, now)
            else:
                return

    def restart(self) -> None:
        """A crash: the process restarts at once as a new agent with empty memory; its calls in flight still land."""
        agent = self.agent
        self.agent = Agent(agent.worker_id, agent.config, agent.backoff, agent.workflow, agent.seams)
        self.command = self.call = self.answer = self.wait_until = None
        self.paused = False
        self.stalled_until = None
        self.incarnation += 1

    # ----------------------------------------------------------- digest

    def row(self, at: Callable[[float | None], Any], now: float) -> tuple:
        """This worker's state as plain values, every time written by `at` (as a number on the clock, or relative to it),
        and whether it renewed at this instant (its renewal is a step only if not); left out: `paused_at`, the
        incarnation, the call's number, and when a worker that holds nothing last renewed (its next claim starts the
        heartbeat afresh)."""
        agent = self.agent.state_row()
        agent = (*agent[:STATE_ROW_DEADLINE], at(agent[STATE_ROW_DEADLINE]), *agent[STATE_ROW_DEADLINE + 1 :])
        return (
            self.worker_id, agent, command_row(self.command), self.paused, self.call is not None, answer_row(self.answer),
            at(self.wait_until), (at(self.renewed_at), self.renewed_at >= now) if self.holding else None, at(self.stalled_until),
        )  # fmt: skip


def command_row(command: Command | None) -> tuple | None:
    """A command as plain values; a fenced call's lease token (random, and named already by its Attempt and generation) left out."""
    if type(command) is Call:
        args = command.args[:2] + command.args[3:] if command.fenced else command.args
        return (command.contract, args, tuple(command.kwargs.items()))
    return None if command is None else (type(command).__name__,)


def answer_row(answer: Any) -> tuple | None:
    """What a worker will hear, as plain values: an effect by its identity at the provider, a refusal by its domain."""
    if answer is None:
        return None
    return (type(answer).__name__, getattr(answer, "provider_id", None), getattr(answer, "domain", None))
