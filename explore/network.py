"""The provider and the network: the calls in flight and the requests to deliver again, with the steps that answer them.

A worker's provider call is on the wire until the provider takes one of
these steps on it (`provider:STEP:N`, N naming the call):

- `land`: it lands (or, at an idempotent provider, finds its key's effect)
  and the answer comes back;
- `land-failing`: the same, and the new effect's CI verdict will fail, with
  one signature every time (as a deterministic bug gives);
- `lose`: it lands and its answer is lost (only while someone awaits it: an
  answer nobody awaits is lost by itself);
- `drop`: the provider never receives it;
- `refuse-authorization`, `refuse-configuration`: the provider refuses it
  outright in that domain, and nothing lands.

And on a landed effect, while deletions are left: `provider:delete:ID`,
someone outside the system deletes it (a pull request closed and deleted),
so a receipt that names it contradicts what the provider holds.

A worker's request to the orchestrator is answered at once; one it sent as a
duplicate is delivered a second time later (`network:redeliver:N`), and that
answer reaches no one. A provider lands nothing past a call's deadline: the
clock never passes the deadline of a call still in flight (`clock.py`), and
a call sent after its deadline is void.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shiftchange.agent import Call, Perform
from shiftchange.checkers.history import Fault, Landed
from shiftchange.checkers.rules import DELETION
from shiftchange.core import ProviderRefused, ProviderTimeout

from .config import DEPENDENCY
from .workers import Worker

REFUSALS = {"authorization": "403: the credential was revoked", "configuration": "422: the repository has no such base branch"}
"""The domains a provider refusal is reported in, with what the provider said: neither may be retried automatically."""
CI_FAILURE = "failed:ci red on the same test"
"""The verdict a `land-failing` call's effect gets: the same signature every time, as a deterministic bug gives."""
LAND, LAND_FAILING, LOSE, DROP, REFUSE, DELETE = "land", "land-failing", "lose", "drop", "refuse-", "delete"


@dataclass(frozen=True, slots=True)
class InFlight:
    """A provider call on the wire: sent by a worker's incarnation, not yet answered."""

    seq: int
    worker_id: str
    incarnation: int
    perform: Perform

    def row(self, awaited: bool, at: Callable[[float], Any]) -> tuple:
        """The call as plain values, its deadline written by `at` (as a number on the clock, or relative to it)."""
        perform = self.perform
        return (self.worker_id, perform.key, perform.operation, perform.identity, at(perform.deadline_at), perform.via_gateway, awaited)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A worker's request the network will deliver a second time; the duplicate's answer is dropped."""

    seq: int
    worker_id: str
    call: Call

    def row(self) -> tuple:
        call = self.call
        args = call.args[:2] + call.args[3:] if call.fenced else call.args  # a lease token is named by its fence already
        return (self.worker_id, call.contract, args, tuple(sorted(call.kwargs.items())))


class Network:
    """The calls in flight to the provider and the requests to deliver again, numbered in the order they were sent."""

    def __init__(self) -> None:
        self.calls: list[InFlight] = []
        self.duplicates: list[Duplicate] = []
        self.sequence = 0

    # ------------------------------------------------------------ the wire

    def request(self, world: Any, worker_id: str, call: Call, duplicate: bool) -> Any:
        """Deliver a worker's request to the orchestrator, and keep a copy to deliver again when it is a duplicate."""
        if duplicate:
            world.budgets.duplicates -= 1
            self.sequence += 1
            self.duplicates.append(Duplicate(self.sequence, worker_id, call))
        return getattr(world.orchestrator, call.contract)(*call.args, **call.kwargs)

    def send(self, world: Any, worker: Worker, perform: Perform) -> int | None:
        """Put a provider call in flight; one sent past its deadline is void (the provider lands nothing past it)."""
        now = world.clock.now()
        if now >= perform.deadline_at:
            world.append(Fault(now, "void-call", worker.worker_id, now, f"{perform.key} sent past its deadline"))
            return None
        self.sequence += 1
        self.calls.append(InFlight(self.sequence, worker.worker_id, worker.incarnation, perform))
        return self.sequence

    def awaited(self, world: Any, call: InFlight) -> Worker | None:
        """The worker awaiting this call's answer: the incarnation that sent it, still waiting on it; else None."""
        worker = world.worker(call.worker_id)
        return worker if worker.incarnation == call.incarnation and worker.call == call.seq else None

    # --------------------------------------------------------------- steps

    def steps(self, world: Any) -> list[str]:
        """Every answer the provider may give a call in flight, and every delivery of a duplicate."""
        budgets, labels = world.budgets, []
        for call in self.calls:
            labels.append(f"provider:{LAND}:{call.seq}")
            if budgets.ci_failures and not self._landed_before(world.provider, call.perform):
                labels.append(f"provider:{LAND_FAILING}:{call.seq}")
            if budgets.lost_requests:
                labels.append(f"provider:{DROP}:{call.seq}")
            if budgets.lost_responses and self.awaited(world, call) is not None:
                labels.append(f"provider:{LOSE}:{call.seq}")
            if budgets.refusals:
                labels += [f"provider:{REFUSE}{domain}:{call.seq}" for domain in REFUSALS]
        if budgets.deletions:
            provider = world.provider
            labels += [f"provider:{DELETE}:{e.provider_id}" for e in provider.ledger if e.provider_id not in provider.deleted]
        labels += [f"network:redeliver:{d.seq}" for d in self.duplicates]
        return labels

    def delete(self, world: Any, provider_id: str) -> None:
        """Someone outside deletes a landed effect at the code host, spent from the deletions budget."""
        world.budgets.deletions -= 1
        world.provider.delete(provider_id)
        now = world.clock.now()
        detail = f"{provider_id} is deleted at the code host by someone outside the system"
        world.append(Fault(now, DELETION, DEPENDENCY, now, detail, (("provider_id", provider_id),)))

    @staticmethod
    def _landed_before(provider: Any, perform: Perform) -> bool:
        """Whether this call would find its effect already there (an idempotent provider answers with it)."""
        return provider.supports_idempotency and bool(provider.find(perform.key, perform.operation, perform.identity))

    def answer(self, world: Any, how: str, seq: int) -> None:
        """The provider's step `how` on call `seq`."""
        call = next(c for c in self.calls if c.seq == seq)
        self.calls.remove(call)
        if how.startswith(REFUSE):
            self._refuse(world, call, how.removeprefix(REFUSE))
        elif how == DROP:
            world.budgets.lost_requests -= 1
            _fault(world, "lost-request", call.worker_id, f"the call {call.perform.key} never reaches the code host")
            self._lose(world, call)
        else:
            self._land(world, call, how)

    def _land(self, world: Any, call: InFlight, how: str) -> None:
        provider, perform = world.provider, call.perform
        if how == LOSE:
            world.budgets.lost_responses -= 1
            provider.lose_responses(1)
            _fault(world, "lost-response", call.worker_id, f"the answer to {perform.key} is lost")
        before = len(provider.ledger)
        try:
            answer = provider.perform(perform.key, perform.operation, perform.identity, "")
        except ProviderTimeout:
            answer = None
        for effect in provider.ledger[before:]:
            if how == LAND_FAILING:
                world.budgets.ci_failures -= 1
                provider.set_verdict(effect.provider_id, CI_FAILURE)
            world.append(
                Landed(
                    world.clock.now(), DEPENDENCY, effect.provider_id, effect.key, effect.operation, effect.identity,
                    perform.task_id, call.worker_id, perform.via_gateway,
                )
            )  # fmt: skip
        if answer is None:
            self._lose(world, call)
        else:
            self._deliver(world, call, answer)

    def _refuse(self, world: Any, call: InFlight, domain: str) -> None:
        """The provider refuses the call: nothing lands, and its worker hears the refusal in that domain."""
        world.budgets.refusals -= 1
        said = REFUSALS[domain]
        _fault(world, "refusal", call.worker_id, f"the code host refuses {call.perform.key}: {said}")
        self._deliver(world, call, ProviderRefused(domain, said))

    def _deliver(self, world: Any, call: InFlight, answer: Any) -> None:
        worker = self.awaited(world, call)
        if worker is not None:  # else that worker crashed or gave the call up: the answer reaches no one
            worker.answered(answer, world.clock.now())

    def _lose(self, world: Any, call: InFlight) -> None:
        worker = self.awaited(world, call)
        if worker is not None:
            worker.lost()

    def redeliver(self, world: Any, seq: int) -> None:
        duplicate = next(d for d in self.duplicates if d.seq == seq)
        self.duplicates.remove(duplicate)
        _fault(world, "duplicate", duplicate.worker_id, f"{duplicate.call.contract} delivered again")
        call = duplicate.call
        getattr(world.orchestrator, call.contract)(*call.args, **call.kwargs)


def _fault(world: Any, kind: str, target: str, detail: str) -> None:
    """An instant fault, into the history."""
    now = world.clock.now()
    world.append(Fault(now, kind, target, now, detail))
