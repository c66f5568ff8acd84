"""Partial-order reduction: which steps of a state are independent, and the sleep sets that skip their second order.

Why sleep sets, and not persistent sets. Two steps of different actors on
disjoint records commute: taken in either order they reach one state, and a
full search takes both orders. Persistent (stubborn) sets would expand only
some actors' steps of a state, and reduce the states visited too; but their
condition ranges over every step that steps outside the set could enable
later, and time is shared by everything here: a crash, a lost answer or a
backoff in one task makes `clock:advance` enabled, and the clock is
dependent on every step (leases, deadlines and timestamps all read it). So
a persistent set smaller than every enabled step exists only where no other
actor can make time move, which the explorer cannot tell without running
the agent ahead. Sleep sets (Godefroid 1996, ch. 5) need independence only
between steps enabled together in the state at hand, which is decided from
the labels and the world as it is (`footprint`): they skip every step whose
other order was taken, and visit every state all the same.

The abstract clock (`abstract_time.py`) does not change this. It changes
what a state is known by, not the steps: time passing still changes every
time to come (a paused holder's lease is nearer its end, a backoff nearer
its own), a step that writes a time to come (a grant's deadline, a retry's
backoff, a claim by a worker that is then paused) writes another offset
before the clock's step than after it, and a pause or a crash changes the
clock's next instant. So the clock's step still depends on the steps of
every worker that may yet be paused or crash. Persistent sets would need
each timer to be a step of its own task, firing in any order the abstract
order allows; but the real core keeps one numeric clock that every record
and every checker reads, on which one timer cannot fire before another
that is due earlier without rewriting the records and the history.

The footprint of a step is the set of things it reads or writes, named:
its worker (`worker-1`), its task (the task's records, its history stream
in the checkers, the control plane's agenda and retries for it), a fault
budget it spends or is enabled by, a call or a duplicate in flight it
answers, the provider's ledger (every provider step, reconciliation and
verification: effect numbers are handed out in order), the numbering of
calls and duplicates on the wire, and the admission queue (a retry, a
cancellation). `clock:advance`, `control:admit`, `control:reap` and
`claim-next` read every task, and are dependent on every step. Two steps
are independent when neither is one of those and their footprints are
disjoint. Then, from a state where both are enabled:

1. each is still enabled after the other, with the same label: a step's
   enabling reads only its footprint (its worker's command, its task's
   records, its budget, its call), which the other does not write; labels
   name workers, tasks, Attempts and calls, never a count the other moves;
2. either order reaches the same state: each writes only its footprint,
   from values only its footprint holds (the clock does not move within
   either), and what both write in common are counters no state keeps
   (event and record versions, the admission controller's in-flight
   counts, read only by `control:admit`, the rate limiter's tokens, which
   the exploration's limits never let bind: `ExploreConfig.reliability`);
3. every checker gives the same verdicts on the two histories: the
   checkers fold each task's entries into that task's own state
   (`checkers.rules._Fold`, keyed by task), the two steps' entries belong
   to different tasks (a fault entry to none: it only counts), and a
   verdict is violated when any task's fold is; the final read judges each
   task's records against its own fold.

Soundness for the invariants checked. With (1)-(3), the sleep-set search
reaches every state the full search reaches, at the same least depth, and
for every path of the full search it takes a path that differs by swapping
adjacent independent steps, along which every prefix's history is judged
with the same verdicts as the corresponding prefix of the original path
(3). Breadth-first, a state's sleep set is the intersection of the sleep
sets it is reached with at its least depth (every such arrival is made
while the level above is expanded, before it is expanded itself), so the
paths of least length form an acyclic graph on which Godefroid's argument
holds as it is; arrivals by longer paths lead nowhere shorter and are
ignored. So the same states, the same quiescent states, and a violation at
the same least depth are found; a state whose every step leads back to it
is still judged as ended, its sleeping steps taken to check they do.
What the reduction leaves alone: the full search's own approximation that a
state's history is that of its first way in (`search.py`), which applies
to both alike. The test `tests/explore/test_independence.py` runs both
searches on small configurations and checks the claims (1), (2), the same
states and quiescent states, and the same violations.
"""

from __future__ import annotations

from typing import Any

from .config import TASK_PREFIX

EVERYTHING = "*"
"""The footprint of a step that reads every task (time, admission, the reaper, claim-next)."""
LEDGER, WIRE, ADMISSION = "ledger", "wire", "admission"
_BUDGET_OF_PROVIDER_STEP = {
    "land-failing": "budget:ci_failures",
    "drop": "budget:lost_requests",
    "lose": "budget:lost_responses",
    "refuse-authorization": "budget:refusals",
    "refuse-configuration": "budget:refusals",
}
_GLOBAL_CONTROL = ("admit", "reap")


def footprint(world: Any, label: str) -> frozenset[str]:
    """What the step `label` of `world` may read or write, by name; `{EVERYTHING}` for a step that reads every task."""
    actor, _, rest = label.partition(":")
    action, _, argument = rest.partition(":")
    if actor == "clock":
        return frozenset((EVERYTHING,))
    if actor == "control":
        return _control(action, argument)
    if actor == "operator":
        return _operator()
    if actor == "provider" and action == "delete":
        return frozenset((EVERYTHING,))  # what the provider holds, read by every reconciliation and verification
    if actor == "provider":
        return _provider(world, action, int(argument))
    if actor == "network":
        duplicate = next(d for d in world.network.duplicates if d.seq == int(argument))
        task = _task_of_call(duplicate.call)  # its worker too: a claim delivered again refreshes the worker's health probe
        return frozenset((EVERYTHING,)) if task is None else frozenset((f"dup:{argument}", f"worker:{duplicate.worker_id}", task))
    return _worker(world, actor, action, argument)


def _operator() -> frozenset[str]:
    """An operator's call out of turn may move its task and hand it to the loop: it commutes with nothing (no reduction)."""
    return frozenset((EVERYTHING,))


def _control(action: str, argument: str) -> frozenset[str]:
    if action in _GLOBAL_CONTROL:
        return frozenset((EVERYTHING,))
    task = _task(argument)
    if action in ("reconcile", "verify"):
        return frozenset((task, LEDGER))
    if action == "retry":
        return frozenset((task, ADMISSION))
    if action in ("cancel", "cancel-attempt"):
        return frozenset((task, ADMISSION, "budget:cancels"))
    return frozenset((task,))  # decide, approve


def _provider(world: Any, action: str, seq: int) -> frozenset[str]:
    call = next(c for c in world.network.calls if c.seq == seq)
    names = {f"call:{seq}", f"worker:{call.worker_id}", LEDGER, _task(call.perform.task_id)}
    budget = _BUDGET_OF_PROVIDER_STEP.get(action)
    if budget is not None:
        names.add(budget)
    return frozenset(names)


def _worker(world: Any, worker_id: str, action: str, argument: str) -> frozenset[str]:
    step, _, duplicate = action.partition("+")
    names = {f"worker:{worker_id}"}
    if duplicate:
        names |= {"budget:duplicates", WIRE}
    if step == "claim-next":
        return frozenset((EVERYTHING,))
    if step == "claim":
        return frozenset((*names, _task(argument)))
    if step in ("pause", "wake", "crash", "stall"):
        budget = {"pause": ("budget:pauses",), "crash": ("budget:crashes",), "stall": ("budget:stalls",)}.get(step, ())
        return frozenset((*names, *budget))
    if step == "perform":
        return frozenset((*names, WIRE))
    task = _task_of_worker(world.worker(worker_id))
    return frozenset((EVERYTHING,)) if task is None else frozenset((*names, task))


def _task_of_worker(worker: Any) -> str | None:
    """The task a worker's contract call is about: its command's, else the Attempt it holds or works on."""
    command = worker.command
    task = _task_of_call(command) if hasattr(command, "contract") else None
    if task is not None:
        return task
    agent = worker.agent
    if agent.fence is not None:
        return _task(agent.fence[0])
    return None if agent.task_id is None else _task(agent.task_id)


def _task(name: str) -> str:
    """The task a task or Attempt id names (`task-1#2` is Attempt 2 of `task-1`)."""
    return "task:" + name.partition("#")[0]


def _task_of_call(call: Any) -> str | None:
    """The task a contract call is about, from its first argument naming one; None when it names none (claim-next)."""
    for value in call.args:
        if isinstance(value, str) and value.startswith(TASK_PREFIX):
            return _task(value)
    return None


def independent(first: frozenset[str], second: frozenset[str]) -> bool:
    """Whether two steps with these footprints commute (see the module's three conditions)."""
    return EVERYTHING not in first and EVERYTHING not in second and first.isdisjoint(second)
