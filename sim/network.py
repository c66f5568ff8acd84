"""The transport between workers and the orchestrator: latency, loss, duplication, reordering, partitions.

Every contract call a worker makes crosses it twice, request and response,
each with its own exponentially distributed latency, so two messages can
overtake each other. A request can be lost (the call never happens), its
response can be lost (the call happened and the caller does not know: the
case idempotent transitions exist for), and it can be delivered a second
time a little later (the duplicate's response is dropped). Loss can be
restricted to named contract calls (`lossy_calls`: renewals only, say), and
a `message_loss` fault drops the requests of named calls for a window. A
partition cuts chosen workers off in both directions for a window. A caller
that hears nothing gives up after `request_timeout_s` and sees `None`. A
request on the wire lands even when its sender crashes or stops waiting
before it arrives; only its answer goes unheard.
Faults strike through the transport's own methods: `cut`, `duplicate_burst`,
`message_loss`.

Contract calls run synchronously inside the orchestrator at the instant the
request arrives. The core's typed errors (unknown task, bad input, a store
conflict) come back as a `Rejected` answer, as they would over a real wire;
anything else is a bug and stops the run loudly.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from simpy import Interrupt

from shiftchange.core import CoreError

from .config import NetworkConfig
from .windows import Windows


@dataclass(frozen=True, slots=True)
class Rejected:
    """The orchestrator raised a typed error for this call (it names something unknown, or was malformed)."""

    reason: str
    domain: str | None = None
    accepted: bool = field(default=False, init=False)


class Transport:
    """One network, shared by every worker; faults are windows set by the nemesis."""

    def __init__(self, env: Any, config: NetworkConfig, rng: Any) -> None:
        self.env = env
        self.config = config
        self.rng = rng
        self._cut_until: dict[str, float] = {}
        self._duplicates = Windows()
        """Duplicate-delivery bursts, each with its probability."""
        self._losses = Windows()
        """Message-loss windows, each with its probability and the calls it drops (all when empty)."""
        self._lossy = frozenset(config.lossy_calls)
        self.sent = 0
        self.lost = 0
        self.lost_by_call: dict[str, int] = {}
        """Requests lost on the way in, per contract call (not their responses, not a partition's)."""
        self.duplicated = 0

    def cut(self, worker_ids: list[str], until: float) -> None:
        """Partition these workers from the orchestrator until `until`."""
        for worker_id in worker_ids:
            self._cut_until[worker_id] = max(until, self._cut_until.get(worker_id, -1.0))

    def duplicate_burst(self, until: float, probability: float) -> None:
        """Until `until`, each request is delivered a second time with this probability."""
        self._duplicates.add(self.env.now, until, probability)

    def message_loss(self, until: float, probability: float, calls: tuple[str, ...]) -> None:
        """Until `until`, requests of the named contract calls (every call when empty) are lost with this probability."""
        self._losses.add(self.env.now, until, (probability, frozenset(calls)))

    def partitioned(self, worker_id: str) -> bool:
        cut_until = self._cut_until
        return bool(cut_until) and cut_until.get(worker_id, -1.0) > self.env.now  # asked twice a call: no partition, no lookup

    def _request_lost(self, name: str) -> bool:
        config, rng = self.config, self.rng
        if (not self._lossy or name in self._lossy) and rng.random() < config.loss_probability:
            return True
        loss = self._losses.at(self.env.now)
        return loss is not None and (not loss[1] or name in loss[1]) and rng.random() < loss[0]

    def call(self, worker_id: str, contract: Callable[..., Any], *args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        """Send one contract call; returns its answer, or None when the caller heard nothing back."""
        env = self.env
        there_s = self._depart(worker_id, contract.__name__)
        if there_s is None:
            yield env.timeout(self.config.request_timeout_s)
            return None
        there = env.timeout(there_s)
        try:
            yield there
        except Interrupt:  # the caller crashed or was told to stop: the request is on the wire all the same, and lands
            there.callbacks.append(lambda _event: self._arrive(worker_id, contract, args, kwargs, there_s))
            raise
        answer, back_s = self._arrive(worker_id, contract, args, kwargs, there_s)
        yield env.timeout(back_s)
        return answer

    def send(self, worker_id: str, contract: Callable[..., Any], args: tuple, kwargs: dict, answered: Callable[[Any], None]) -> None:
        """`call` as a chain of timer callbacks, for a caller that is not a process (the heartbeat): `answered` hears the
        answer, or None, when `call` would have returned it. Two timers instead of a process and its two timeouts."""
        env = self.env
        there_s = self._depart(worker_id, contract.__name__)
        if there_s is None:
            env.timeout(self.config.request_timeout_s).callbacks.append(lambda _event: answered(None))
            return

        def arrive(_event: Any) -> None:
            answer, back_s = self._arrive(worker_id, contract, args, kwargs, there_s)
            env.timeout(back_s).callbacks.append(lambda _event: answered(answer))

        env.timeout(there_s).callbacks.append(arrive)

    def _depart(self, worker_id: str, name: str) -> float | None:
        """A request leaves: how long it takes to arrive, or None when it is lost on the way (a partition, a lost request)."""
        self.sent += 1
        there_s = self.rng.expovariate(1.0 / self.config.latency_s)
        if self.partitioned(worker_id):
            self.lost += 1
            return None
        if self._request_lost(name):
            self.lost += 1
            self.lost_by_call[name] = self.lost_by_call.get(name, 0) + 1
            return None
        return there_s

    def _arrive(self, worker_id: str, contract: Callable[..., Any], args: tuple, kwargs: dict, there_s: float) -> tuple[Any, float]:
        """The request arrives `there_s` after it left: the call runs (maybe twice); returns the answer the caller hears
        (None when it hears nothing) and how much longer until it hears it."""
        env, config, rng = self.env, self.config, self.rng
        gave_up_s = max(0.0, config.request_timeout_s - there_s)
        if self.partitioned(worker_id):
            self.lost += 1
            return None, gave_up_s
        answer = deliver(contract, args, kwargs)
        duplicate_probability = max(config.duplicate_probability, self._duplicates.at(env.now) or 0.0)
        if duplicate_probability and rng.random() < duplicate_probability:
            self.duplicated += 1
            again = env.timeout(rng.expovariate(1.0 / config.latency_s) + there_s)
            again.callbacks.append(lambda _event: deliver(contract, args, kwargs))
        back_s = rng.expovariate(1.0 / config.latency_s)
        response_lost = (not self._lossy or contract.__name__ in self._lossy) and rng.random() < config.response_loss_probability
        if self.partitioned(worker_id) or response_lost or there_s + back_s > config.request_timeout_s:
            self.lost += 1
            return None, gave_up_s
        return answer, back_s


_rejected = 0
"""Contract calls this process's simulations answered with `Rejected` (see `rejected_so_far`)."""


def rejected_so_far() -> int:
    """How many calls this process's simulations have answered with `Rejected`, counting from its start.

    A call rejected by a typed core error rolled its transaction back: whatever row it consulted left no event. The
    mutation analysis (`lab.trial`) reads it before and after a run, and keeps no record of what a run presented to the
    table when the count moved, so that a presentation it could not see never lets a mutant's run be skipped.
    """
    return _rejected


def deliver(contract: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run one contract call at the orchestrator; a typed core error becomes a `Rejected` answer."""
    global _rejected
    try:
        return contract(*args, **kwargs)
    except CoreError as error:
        _rejected += 1
        return Rejected(f"{type(error).__name__}: {error}")
