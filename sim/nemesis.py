"""What breaks: a fault schedule drawn from the seed and placed by the config, applied on time and written into the history.

Two sources make one schedule. The seeded random schedule: each switched-on
kind of fault (`NemesisConfig.faults`) strikes as a Poisson process over the
arrival window, so the drain that follows is calm and a correct core can
bring every task to rest. The placed faults (`NemesisConfig.placed`, from
`--fault` or `[[fault]]`): each at its chosen time, for its chosen span, so a
tuning study can put an outage exactly at t=600 s. Both are drawn or read
up front (Jepsen's nemesis generator, made deterministic), sorted by time and
indexed; that is what lets the shrinker remove faults and replay the rest
exactly, with everything else drawn from streams the schedule does not touch.

A fault strikes through a method of the role it hits (`Worker.crash`,
`Transport.cut`, `SimProvider.outage`, `Workbench.slow`, ...): the nemesis
holds only the handles in `Targets`, never the world.

A pause can be aimed at a moment instead of a time (`before=CALL`, Jepsen's
targeted nemesis): from its time on it waits, armed, for the next worker
about to send that call, and freezes it just before the call leaves. Aimed
pauses, drawn beside the random ones (`pause_before_complete_interval_s`),
wait so for a completion: the stale worker that writes "success" over its replacement's
work is the chapter's first failure, and a pause at a random moment almost
never falls in the instant between a worker's last receipt and its report.
An aimed pause is written into the history when it strikes, at that time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

from shiftchange.checkers.history import Fault

from .config import FaultSpec, NemesisConfig, WorkloadConfig


@dataclass(frozen=True, slots=True)
class Targets:
    """What the nemesis can strike, and where it writes what it did."""

    env: Any
    workers: list[Any]
    transport: Any
    providers: Any
    bench: Any
    record: Callable[[Fault], None]
    aimed: Aimed


class Aimed:
    """Pauses armed to strike a worker just before it sends a named call; the workers ask (`take`) before each call."""

    __slots__ = ("armed", "record", "waiting")

    def __init__(self, record: Callable[[Fault], None]) -> None:
        self.armed: list[Fault] = []
        """Armed pauses, in the order they were armed (the earliest strikes first)."""
        self.record = record
        self.waiting: dict[str, tuple[str, Any]] = {}
        """task id -> (the frozen worker's Attempt, the event that wakes it): pauses that end when the task is replaced."""

    def wake_when_replaced(self, task_id: str, attempt_id: str, woken: Any) -> None:
        """Trigger `woken` the moment another Attempt of this task starts (`heard` sees every committed event)."""
        self.waiting[task_id] = (attempt_id, woken)

    def heard(self, event: Any) -> None:
        """One committed event (called only while a pause waits): a start of another Attempt of a waiting task wakes it."""
        waiting = self.waiting.get(event.task_id)
        if waiting is not None and event.kind == "start" and event.accepted and event.attempt_id != waiting[0]:
            del self.waiting[event.task_id]
            if not waiting[1].triggered:
                waiting[1].succeed()

    def arm(self, fault: Fault) -> None:
        self.armed.append(fault)

    def take(self, worker_id: str, call: str, now: float) -> Fault | None:
        """The armed pause that strikes this worker now, about to send `call` (written into the history), or None."""
        for index, fault in enumerate(self.armed):
            if _before(fault) == call and fault.target in ("busy", worker_id):
                del self.armed[index]
                struck = replace(fault, at=now, target=worker_id, until=now + (fault.until - fault.at))
                self.record(struck)
                return struck
        return None


def draw_schedule(
    nemesis: NemesisConfig, workload: WorkloadConfig, restart_s: float, worker_ids: list[str], stream: Callable[[str], random.Random]
) -> list[Fault]:
    """Every fault of the run, drawn and placed, in time order (each kind draws from its own stream)."""
    window_s = workload.arrival_span_s()
    faults: list[Fault] = []
    plans = {
        "crash": (nemesis.crash_interval_s, restart_s),
        "pause": (nemesis.pause_interval_s, nemesis.pause_s),
        "partition": (nemesis.partition_interval_s, nemesis.partition_s),
        "duplicate_burst": (nemesis.duplicate_interval_s, nemesis.duplicate_burst_s),
        "outage": (nemesis.outage_interval_s, nemesis.outage_s),
        "slow_tools": (nemesis.slow_tools_interval_s, nemesis.slow_tools_s),
        "revoked_credentials": (nemesis.revoked_interval_s, nemesis.revoked_s),
        "lost_responses": (nemesis.lost_responses_interval_s, nemesis.lost_responses_s),
    }
    for kind in nemesis.faults:
        rng = stream(f"nemesis:{kind}")  # one stream per kind: a shorter run draws a prefix of each kind's faults
        interval_s, duration_s = plans[kind]
        at = rng.expovariate(1.0 / interval_s)
        while at < window_s:
            faults.append(_drawn(kind, at, at + duration_s, rng, worker_ids, nemesis))
            at += rng.expovariate(1.0 / interval_s)
    if "pause" in nemesis.faults:  # the aimed pauses: their own stream, so they move none of the random faults
        rng, aimed = stream("nemesis:pause:aimed"), (("before", "complete_attempt"), ("wake", "replaced"))
        at = rng.expovariate(1.0 / nemesis.pause_before_complete_interval_s)
        while at < window_s:
            faults.append(Fault(at, "pause", "busy", at + nemesis.pause_s, parameters=aimed))
            at += rng.expovariate(1.0 / nemesis.pause_before_complete_interval_s)
    faults += [_placed(spec) for spec in nemesis.placed]
    faults.sort(key=lambda fault: (fault.at, fault.kind, fault.target, fault.placed))
    return faults


def _drawn(kind: str, at: float, until: float, rng: Any, workers: list[str], nemesis: NemesisConfig) -> Fault:
    if kind in ("crash", "pause"):
        return Fault(at, kind, rng.choice(workers), until)
    if kind == "partition":
        group = sorted(rng.sample(workers, min(nemesis.partition_workers, len(workers))))
        return Fault(at, kind, ",".join(group), until)
    if kind == "outage":
        return Fault(at, kind, rng.choice(("code_host", "model_provider")), until, parameters=(("mode", "fail"),))
    if kind == "lost_responses":
        target = rng.choice(("code_host", "model_provider"))
        return Fault(at, kind, target, until, parameters=(("probability", nemesis.lost_responses_probability),))
    if kind == "revoked_credentials":
        return Fault(at, kind, "code_host", until)
    if kind == "duplicate_burst":
        return Fault(at, kind, "network", until, parameters=(("probability", nemesis.duplicate_burst_probability),))
    return Fault(at, kind, "workers", until, parameters=(("factor", nemesis.slow_tools_factor),))


def _placed(spec: FaultSpec) -> Fault:
    """A placed fault as the schedule holds it (the config already checked that the workers it names exist)."""
    return Fault(spec.at_s, spec.kind, spec.target, spec.until_s, parameters=tuple(spec.parameters().items()), placed=True)


def unleash(targets: Targets, schedule: list[Fault]) -> Generator[Any, Any, None]:
    """The nemesis process: apply each fault at its time and record it."""
    env = targets.env
    for fault in schedule:
        if fault.at > env.now:
            yield env.timeout(fault.at - env.now)
        if fault.kind == "pause" and _before(fault) is not None:
            targets.aimed.arm(fault)  # it strikes, and is written down, when a worker is about to send the call
            continue
        fault = _aim(targets.workers, fault)
        strike(targets, fault)
        targets.record(fault)


def _before(fault: Fault) -> str | None:
    """The call an aimed pause waits for, or None: it strikes at its time."""
    return next((value for name, value in fault.parameters if name == "before"), None)


def wakes_when_replaced(fault: Fault) -> bool:
    """An aimed pause that ends the moment another worker starts the task's next Attempt (`wake=replaced`)."""
    return ("wake", "replaced") in fault.parameters


def _aim(workers: list[Any], fault: Fault) -> Fault:
    """Where a crash or pause falls: a placed one on the worker it names; a drawn one, or one placed on `busy`, on a busy worker.

    A drawn crash of an idle worker tests nothing, so it falls on the next
    busy worker after its target, if any.
    """
    if fault.kind not in ("crash", "pause") or (fault.placed and fault.target != "busy"):
        return fault
    ids = [worker.worker_id for worker in workers]
    aimed = ids[0] if fault.target == "busy" else fault.target
    start = ids.index(aimed)
    for step in range(len(workers)):
        worker = workers[(start + step) % len(workers)]
        if worker.holding is not None and worker.alive:
            return replace(fault, target=worker.worker_id)
    return replace(fault, target=aimed)


def strike(targets: Targets, fault: Fault) -> None:
    """Apply one fault through the method of the role it strikes."""
    kind, span_s = fault.kind, fault.until - fault.at
    if kind == "crash":
        _worker(targets, fault.target).crash(span_s)
    elif kind == "pause":
        _worker(targets, fault.target).pause(fault.until)
    elif kind == "partition":
        targets.transport.cut(fault.target.split(","), fault.until)
    elif kind == "duplicate_burst":
        targets.transport.duplicate_burst(fault.until, fault.parameter("probability"))
    elif kind == "message_loss":
        targets.transport.message_loss(fault.until, fault.parameter("probability"), fault.parameter("calls"))
    elif kind == "slow_tools":
        targets.bench.slow(fault.until, fault.parameter("factor"))
    else:
        provider = targets.providers.by_name[fault.target]
        if kind == "outage":
            provider.outage(fault.until, fault.parameter("mode"))
        elif kind == "revoked_credentials":
            provider.revoke(fault.until)
        elif kind == "lost_responses":
            provider.lose_responses(fault.until, fault.parameter("probability"))
        elif kind == "slowdown":
            provider.slow_down(fault.until, fault.parameter("factor"))
        elif kind == "capacity_drop":
            provider.drop_capacity(fault.until, fault.parameter("factor"))
        else:
            raise AssertionError(f"no way to strike a fault of kind {kind!r}")


def _worker(targets: Targets, worker_id: str) -> Any:
    return next(worker for worker in targets.workers if worker.worker_id == worker_id)
