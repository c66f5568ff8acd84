"""The structural checker: graph properties every spec must have, checked with networkx.

Each property is a pure function of the loaded spec returning a `Property`
with PASS or FAIL and, for a FAIL, a witness: the path or row that breaks it.
The protocol properties (suspect then reconciling, cancellation through
reconciliation) use dominators: in the graph entered by an expired lease,
a state that dominates every terminal state is one no path can skip. Roles in
`[machine.roles]` say which states and triggers carry the protocol, so a
machine without a role simply has no such property to check.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import networkx as nx

from .model import RESPONSES, Machine, Row, Spec

CHAPTER_DOMAINS = (
    "authorization",
    "configuration",
    "capacity",
    "provider",
    "executor",
    "validation",
    "repository",
    "internal",
    "unknown_result",
    "contradictory_evidence",
)
"""The failure domains the chapter names; every spec must classify all of them."""

INVARIANT_NAMES = (
    "single_owner",
    "fenced_writes",
    "append_only_attempts",
    "suspect_then_reconcile",
    "one_effect_per_operation",
    "no_lost_tasks",
    "budgets_hold",
    "cancel_is_final",
    "classified_retry",
    "complete_audit",
    "truthful_states",
)
"""The invariant catalogue: DESIGN.md's ten, and `truthful_states` (each state means what it says), added when the
mutation analysis of the table showed that a row moved to the wrong state went unseen (docs/mutation-verdict.md);
every spec must state each one."""

NO_RETRY_RESPONSES = ("stop", "escalate", "quarantine")


@dataclass(frozen=True)
class Property:
    name: str
    ok: bool
    summary: str
    witness: tuple[str, ...] = ()


def graph_of(machine: Machine) -> nx.MultiDiGraph:
    """States as nodes, one edge per (row, source) labelled with its row."""
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(machine.states)
    for source, dest, row in machine.edges():
        graph.add_edge(source, dest, key=(row.index, source), row=row)
    return graph


def check_spec(spec: Spec) -> list[Property]:
    """Every property of every machine and table, in a stable order."""
    results = []
    for machine in spec.machines.values():
        for check in _MACHINE_CHECKS:
            results.extend(check(machine))
    results.append(_domains_classified(spec))
    results.append(_invariants_catalogued(spec))
    return results


def _path_text(machine: Machine, path: list[str]) -> str:
    """A state path with the row that takes each step, for a witness."""
    graph = graph_of(machine)
    steps = [path[0]]
    for here, there in itertools.pairwise(path):
        row = next(iter(graph.get_edge_data(here, there).values()))["row"]
        steps.append(f"--{row.trigger} ({row.where})--> {there}")
    return " ".join(steps)


def _reachable(machine: Machine) -> Iterator[Property]:
    graph = graph_of(machine)
    seen = nx.descendants(graph, machine.initial) | {machine.initial}
    missing = sorted(set(machine.states) - seen)
    yield Property(
        f"{machine.name}.reachable",
        not missing,
        f"every state is reachable from {machine.initial!r}",
        tuple(f"unreachable: {s} ({machine.states[s].where})" for s in missing),
    )


def _terminal_reachable(machine: Machine) -> Iterator[Property]:
    graph = graph_of(machine)
    terminal = set(machine.terminal_states)
    stuck = sorted(s for s in machine.states if s not in terminal and not (nx.descendants(graph, s) & terminal))
    witnesses = [f"no terminal state is reachable from {s} ({machine.states[s].where})" for s in stuck]
    yield Property(
        f"{machine.name}.terminal_reachable",
        not witnesses,
        "from every non-terminal state some terminal state is reachable",
        tuple(witnesses),
    )


def _terminal_absorbing(machine: Machine) -> Iterator[Property]:
    exits = [row for source, _dest, row in machine.edges() if machine.states[source].terminal]
    yield Property(
        f"{machine.name}.terminal_absorbing",
        not exits,
        "no row leaves a terminal state",
        tuple(f"exit from a terminal state: {row.label()}" for row in exits),
    )


def _deterministic(machine: Machine) -> Iterator[Property]:
    clashes = []
    rows = machine.rows
    for i, first in enumerate(rows):
        for second in rows[i + 1 :]:
            shared = sorted(set(first.sources) & set(second.sources))
            if first.trigger == second.trigger and shared and not first.excludes(second):
                clashes.append(f"{first.trigger!r} from {shared[0]!r}: {first.label()} and {second.label()} can both be enabled")
    yield Property(
        f"{machine.name}.deterministic",
        not clashes,
        "no state and trigger has two rows enabled at once (one guard told apart by !guard)",
        tuple(clashes),
    )


def _rows_traceable(machine: Machine) -> Iterator[Property]:
    """An accepted event names its trigger and the states it left and entered; coverage needs that to name one row."""
    first: dict[tuple[str, str, str], Row] = {}
    clashes = []
    for source, dest, row in machine.edges():
        earlier = first.setdefault((source, row.trigger, dest), row)
        if earlier is not row:
            clashes.append(f"{row.trigger!r} moves {source} -> {dest} in two rows: {earlier.label()} and {row.label()}")
    yield Property(
        f"{machine.name}.rows_traceable",
        not clashes,
        "every accepted event names exactly one row: no two rows share source, trigger and dest",
        tuple(clashes),
    )


def _fenced_worker_writes(machine: Machine) -> Iterator[Property]:
    """A worker row with a material effect must prove the fence, unless it issues the fence."""
    issuing = {machine.roles["issue_fence_effect"]} if "issue_fence_effect" in machine.roles else set()
    unfenced = [
        row
        for row in machine.rows
        if row.actor == "worker"
        and not row.fenced
        and not issuing & set(row.effects)
        and any(machine.effects[e].material for e in row.effects)
    ]
    yield Property(
        f"{machine.name}.fenced_worker_writes",
        not unfenced,
        "every material write by a worker proves the current lease generation and token",
        tuple(f"unfenced worker write: {row.label()}" for row in unfenced),
    )


def _entered_by(machine: Machine, trigger: str) -> tuple[nx.DiGraph, str]:
    """The machine's graph plus a virtual entry node whose edges are `trigger`'s rows."""
    graph = nx.DiGraph(graph_of(machine))
    entry = f"<{trigger}>"
    for _source, dest, row in machine.edges():
        if row.trigger == trigger:
            graph.add_edge(entry, dest)
    return graph, entry


def _must_pass(machine: Machine, trigger: str, gates: tuple[str, ...]) -> list[str]:
    """Witnesses of paths from `trigger` to a terminal state that skip a gate or take gates out of order."""
    graph, entry = _entered_by(machine, trigger)
    if entry not in graph:
        return [f"no row fires {trigger!r}"]
    region = nx.descendants(graph, entry)
    immediate = nx.immediate_dominators(graph, entry)

    def dominators(node: str) -> set[str]:
        chain = set()
        while node != entry:
            node = immediate[node]
            chain.add(node)
        return chain

    witnesses = []
    for terminal in sorted(region & set(machine.terminal_states)):
        for gate in gates:
            if gate not in dominators(terminal):
                path = nx.shortest_path(graph.subgraph(set(graph) - {gate}), entry, terminal)
                witnesses.append(f"{trigger} reaches {terminal} without passing {gate}: {_path_text(machine, path[1:])}")
                break
    for earlier, later in itertools.pairwise(gates):
        if later in region and earlier not in dominators(later):
            path = nx.shortest_path(graph.subgraph(set(graph) - {earlier}), entry, later)
            witnesses.append(f"{trigger} reaches {later} without passing {earlier} first: {_path_text(machine, path[1:])}")
    return witnesses


def _suspect_then_reconcile(machine: Machine) -> Iterator[Property]:
    roles = machine.roles
    if not {"lease_expiry_trigger", "suspect", "reconciling"} <= set(roles):
        return
    trigger = roles["lease_expiry_trigger"]
    witnesses = [
        f"expiry does not lead to {roles['suspect']}: {row.label()}"
        for row in machine.rows
        if row.trigger == trigger and row.dest != roles["suspect"]
    ]
    witnesses += _must_pass(machine, trigger, (roles["suspect"], roles["reconciling"]))
    yield Property(
        f"{machine.name}.suspect_then_reconcile",
        not witnesses,
        f"every path from an expired lease to a terminal state passes {roles['suspect']} then {roles['reconciling']}",
        tuple(witnesses),
    )


def _cancel_everywhere(machine: Machine) -> Iterator[Property]:
    if "cancel_trigger" not in machine.roles:
        return
    trigger = machine.roles["cancel_trigger"]
    covered = {source for source, _dest, row in machine.edges() if row.trigger == trigger and not row.guards}
    missing = sorted(s for s in machine.states if not machine.states[s].terminal and s not in covered)
    yield Property(
        f"{machine.name}.cancel_everywhere",
        not missing,
        f"{trigger!r} is accepted, unguarded, from every non-terminal state",
        tuple(f"cannot {trigger} from {s} ({machine.states[s].where})" for s in missing),
    )


def _cancel_through_reconciliation(machine: Machine) -> Iterator[Property]:
    if not {"cancel_trigger", "reconciling"} <= set(machine.roles):
        return
    reconciling = machine.roles["reconciling"]
    witnesses = _must_pass(machine, machine.roles["cancel_trigger"], (reconciling,))
    yield Property(
        f"{machine.name}.cancel_through_reconciliation",
        not witnesses,
        f"cancellation reaches a terminal state only through {reconciling}",
        tuple(witnesses),
    )


def _dispatch_rules(machine: Machine) -> Iterator[Property]:
    if "dispatch_effect" not in machine.roles:
        return
    effect = machine.roles["dispatch_effect"]
    dispatchable = {s for s, state in machine.states.items() if state.dispatchable}
    bad = [
        f"{row.trigger} appends an attempt from non-dispatchable {source!r} ({row.where})"
        for source, _dest, row in machine.edges()
        if effect in row.effects and source not in dispatchable
    ]
    if not any(effect in row.effects for row in machine.rows):
        bad.append(f"no row has the effect {effect!r}")
    yield Property(
        f"{machine.name}.dispatch_only_when_dispatchable",
        not bad,
        "attempts are appended only from dispatchable states (" + ", ".join(sorted(dispatchable)) + ")",
        tuple(bad),
    )


def _vocabulary_used(machine: Machine) -> Iterator[Property]:
    used = {
        "trigger": {row.trigger for row in machine.rows},
        "guard": {g.removeprefix("!") for row in machine.rows for g in row.guards},
        "effect": {e for row in machine.rows for e in row.effects},
    }
    declared = {"trigger": machine.triggers, "guard": machine.guards, "effect": machine.effects}
    unused = [
        f"{kind} {name!r} is declared ({declared[kind][name].where}) but no row uses it"
        for kind in declared
        for name in sorted(set(declared[kind]) - used[kind])
    ]
    yield Property(
        f"{machine.name}.vocabulary_used",
        not unused,
        "every declared trigger, guard and effect is used by a row",
        tuple(unused),
    )


def _domains_classified(spec: Spec) -> Property:
    problems = [f"the chapter's domain {name!r} is not classified" for name in CHAPTER_DOMAINS if name not in spec.domains]
    for domain in spec.domains.values():
        if domain.response not in RESPONSES:
            problems.append(f"{domain.name} has no permitted response ({domain.where})")
        elif domain.response in NO_RETRY_RESPONSES and domain.retries_max:
            problems.append(f"{domain.name} responds {domain.response} yet allows {domain.retries_max} automatic retries ({domain.where})")
    return Property(
        "domains.classified",
        not problems,
        "every failure domain of the chapter has a permitted response, and no stopping response retries",
        tuple(problems),
    )


def _invariants_catalogued(spec: Spec) -> Property:
    missing = [f"invariant {name!r} of DESIGN.md has no statement" for name in INVARIANT_NAMES if name not in spec.invariants]
    return Property(
        "invariants.catalogued",
        not missing,
        "every invariant of the design catalogue is stated",
        tuple(missing),
    )


_MACHINE_CHECKS: tuple[Callable[[Machine], Iterator[Property]], ...] = (
    _reachable,
    _terminal_reachable,
    _terminal_absorbing,
    _deterministic,
    _rows_traceable,
    _fenced_worker_writes,
    _suspect_then_reconcile,
    _cancel_everywhere,
    _cancel_through_reconciliation,
    _dispatch_rules,
    _vocabulary_used,
)
