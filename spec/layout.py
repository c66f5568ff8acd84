"""A layered layout for state diagrams: deterministic, and free of overlaps by construction.

The four steps of a Sugiyama layout, each deterministic (the table's order
breaks every tie, and nothing iterates a hashed set):

1. Break cycles: a depth-first walk from the initial state, taking edges in
   table order, turns round each edge that closes a cycle (it is drawn
   upwards, with its arrow still at its real destination).
2. Layer: the longest path from the initial state; the `bottom` states
   (terminal ones) share the last layer.
3. Order: every edge becomes a chain through the ranks between its ends,
   with its label as one box on the way; barycentre sweeps reduce crossings
   and the order with the fewest crossings is kept.
4. Place: y by bands, one per rank; x by repeated weighted least squares
   under each rank's separation constraints, solved exactly by
   pool-adjacent-violators.

Why nothing overlaps: every box (a state, a label, the point where an edge
crosses a rank) lives in the band of its rank, bands do not overlap, and
within a band consecutive boxes are at least `gap_x` apart. Edges run
straight down through bands and bend only in the gaps between them, where
there are no boxes. Sizes are in points; the caller measures its text.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

Point = tuple[float, float]
Segment = tuple[Point, ...]
"""Two points (a line) or four (a cubic Bézier: start, two controls, end)."""


@dataclass(frozen=True)
class Box:
    """Something to place: its extent left and right of its anchor, its height, and how wide a side edges may attach to."""

    key: str
    left: float
    right: float
    height: float
    ports: float = 0.0
    """Half the width of the side edges attach to (a state's own box, not the loop label beside it); default `left`."""
    body: float = 0.0
    """The height of the part edges attach to, centred in the box; default `height`."""


@dataclass(frozen=True)
class Edge:
    key: str
    source: str
    dest: str
    label: Box | None = None
    """The label's box; its anchor is where the edge passes, the text lies to its right."""


@dataclass
class Layout:
    nodes: dict[str, Point]
    """Each node's anchor: its box's centre."""
    labels: dict[str, Point]
    """Each labelled edge's label anchor (where the edge passes, vertically centred)."""
    paths: dict[str, list[Segment]]
    """Each edge's path, from its source to its destination."""
    upward: frozenset[str]
    """Edges turned round to break a cycle: drawn from below their source up to their destination."""
    width: float
    height: float
    crossings: int
    """Edge crossings between adjacent ranks in the order kept: a figure of the layout's quality."""


GAP_X = 16.0
GAP_Y = 30.0
DUMMY = 3.0
SWEEPS = 16
PLACEMENT_ROUNDS = 150


def layered(nodes: list[Box], initial: str, bottom: list[str], edges: list[Edge], gap_x: float = GAP_X, gap_y: float = GAP_Y) -> Layout:
    """Lay the graph out top to bottom; self-loops are the caller's (draw them beside their node)."""
    keys = [node.key for node in nodes]
    if len(set(keys)) != len(keys) or initial not in keys:
        raise ValueError("nodes need unique keys and must include the initial one")
    edges = [edge for edge in edges if edge.source != edge.dest]
    upward = _upward_edges(keys, initial, bottom, edges)
    layer = _layers(keys, bottom, edges, upward)
    ranks, chains, boxes = _chains(nodes, edges, upward, layer)
    crossings = _order(ranks, chains)
    x = _place(ranks, chains, boxes, gap_x)
    _straighten(ranks, chains, boxes, x, gap_x)
    bands, y = _bands(ranks, boxes, gap_y)
    paths = _paths(ranks, edges, chains, upward, boxes, x, y, bands)
    left = min(x[item] - boxes[item].left for rank in ranks for item in rank)
    right = max(x[item] + boxes[item].right for rank in ranks for item in rank)
    shift = -left

    def moved(point: Point) -> Point:
        return (point[0] + shift, point[1])

    return Layout(
        nodes={key: moved((x[_node(key)], y[_node(key)])) for key in keys},
        labels={edge.key: moved((x[_label(edge.key)], y[_label(edge.key)])) for edge in edges if edge.label is not None},
        paths={key: [tuple(moved(p) for p in segment) for segment in path] for key, path in paths.items()},
        upward=frozenset(upward),
        width=right - left,
        height=bands[-1][1] if bands else 0.0,
        crossings=crossings,
    )


def _node(key: str) -> str:
    return "n:" + key


def _label(edge_key: str) -> str:
    return "l:" + edge_key


def _upward_edges(keys: list[str], initial: str, bottom: list[str], edges: list[Edge]) -> set[str]:
    """The edges a depth-first walk from `initial` (then every other node, in order) finds closing a cycle.

    An edge between a bottom node and another always points into the bottom one, so the bottom layer stays last.
    """
    out: dict[str, list[Edge]] = {key: [] for key in keys}
    for edge in edges:
        out[edge.source].append(edge)
    status = dict.fromkeys(keys, 0)  # 0 unseen, 1 on the walk's stack, 2 finished
    upward: set[str] = set()
    for root in [initial, *keys]:
        if status[root]:
            continue
        status[root] = 1
        stack = [(root, 0)]
        while stack:
            node, next_edge = stack[-1]
            if next_edge == len(out[node]):
                status[node] = 2
                stack.pop()
                continue
            stack[-1] = (node, next_edge + 1)
            edge = out[node][next_edge]
            if status[edge.dest] == 1:
                upward.add(edge.key)
            elif status[edge.dest] == 0:
                status[edge.dest] = 1
                stack.append((edge.dest, 0))
    sinks = set(bottom)
    for edge in edges:
        if edge.source in sinks and edge.dest not in sinks:
            upward.add(edge.key)
        elif edge.dest in sinks and edge.source not in sinks:
            upward.discard(edge.key)
    return upward


def _layers(keys: list[str], bottom: list[str], edges: list[Edge], upward: set[str]) -> dict[str, int]:
    """Longest-path layers of the acyclic orientation; `bottom` nodes below every other node."""
    preds: dict[str, list[str]] = {key: [] for key in keys}
    succs: dict[str, list[str]] = {key: [] for key in keys}
    for edge in edges:
        top, low = (edge.dest, edge.source) if edge.key in upward else (edge.source, edge.dest)
        preds[low].append(top)
        succs[top].append(low)
    waiting = {key: len(preds[key]) for key in keys}
    ready = [key for key in keys if not waiting[key]]
    order: list[str] = []
    position = {key: i for i, key in enumerate(keys)}
    while ready:
        ready.sort(key=position.__getitem__)
        node = ready.pop(0)
        order.append(node)
        for low in succs[node]:
            waiting[low] -= 1
            if not waiting[low]:
                ready.append(low)
    layer: dict[str, int] = {}
    sinks = set(bottom)
    for node in order:
        if node not in sinks:
            layer[node] = max((layer[p] + 1 for p in preds[node]), default=0)
    floor = max(layer.values(), default=-1) + 1
    for node in order:
        if node in sinks:
            layer[node] = max([floor] + [layer[p] + 1 for p in preds[node]])
    return layer


def _chains(
    nodes: list[Box], edges: list[Edge], upward: set[str], layer: dict[str, int]
) -> tuple[list[list[str]], dict[str, list[str]], dict[str, Box]]:
    """Ranks of items (nodes at even ranks; labels and crossing points between) and each edge's chain of items, top to bottom."""
    boxes: dict[str, Box] = {_node(node.key): node for node in nodes}
    depth = 2 * max(layer.values(), default=0)
    ranks: list[list[str]] = [[] for _ in range(depth + 1)]
    for node in nodes:
        ranks[2 * layer[node.key]].append(_node(node.key))
    chains: dict[str, list[str]] = {}
    for edge in edges:
        turned = edge.key in upward
        top, low = (edge.dest, edge.source) if turned else (edge.source, edge.dest)
        first, last = 2 * layer[top], 2 * layer[low]
        middle = (first + last) / 2
        odd = [r for r in range(first + 1, last) if r % 2]
        # The label sits mid-way, nearer its own source on a tie.
        label_rank = min(odd, key=lambda r: (abs(r - middle), -r if turned else r)) if edge.label is not None else None
        chain = [_node(top)]
        for rank in range(first + 1, last):
            if rank == label_rank:
                item = _label(edge.key)
                boxes[item] = edge.label
            else:
                item = f"d:{edge.key}:{rank}"
                boxes[item] = Box(item, DUMMY, DUMMY, 0.0)
            ranks[rank].append(item)
            chain.append(item)
        chain.append(_node(low))
        chains[edge.key] = chain
    return ranks, chains, boxes


def _neighbours(chains: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    above: dict[str, list[str]] = {}
    below: dict[str, list[str]] = {}
    for chain in chains.values():
        for upper, lower in itertools.pairwise(chain):
            below.setdefault(upper, []).append(lower)
            above.setdefault(lower, []).append(upper)
    return above, below


def _crossings(ranks: list[list[str]], below: dict[str, list[str]]) -> int:
    total = 0
    for upper_rank, lower_rank in itertools.pairwise(ranks):
        where = {item: i for i, item in enumerate(lower_rank)}
        segments = [(i, where[low]) for i, item in enumerate(upper_rank) for low in below.get(item, ()) if low in where]
        for a, (a_top, a_low) in enumerate(segments):
            for b_top, b_low in segments[a + 1 :]:
                if (a_top - b_top) * (a_low - b_low) < 0:
                    total += 1
    return total


def _order(ranks: list[list[str]], chains: dict[str, list[str]]) -> int:
    """Reorder each rank in place by barycentre sweeps; keeps the order with the fewest crossings, and returns that count."""
    above, below = _neighbours(chains)
    best = [list(rank) for rank in ranks]
    fewest = _crossings(ranks, below)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        span = range(1, len(ranks)) if downward else range(len(ranks) - 2, -1, -1)
        for r in span:
            reference = ranks[r - 1] if downward else ranks[r + 1]
            where = {item: i for i, item in enumerate(reference)}
            linked = above if downward else below

            def key(pair: tuple[int, str], linked: dict[str, list[str]] = linked, where: dict[str, int] = where) -> tuple[float, int]:
                index, item = pair
                near = [where[n] for n in linked.get(item, ()) if n in where]
                return (sum(near) / len(near) if near else float(index), index)

            ranks[r][:] = [item for _i, item in sorted(enumerate(ranks[r]), key=key)]
        count = _crossings(ranks, below)
        if count < fewest:
            fewest, best = count, [list(rank) for rank in ranks]
    for rank, kept in zip(ranks, best, strict=True):
        rank[:] = kept
    return fewest


def _isotonic(targets: list[float], weights: list[float]) -> list[float]:
    """The non-decreasing sequence nearest `targets` in weighted least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [weight, weighted sum, count]
    for target, weight in zip(targets, weights, strict=True):
        blocks.append([weight, weight * target, 1])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][0] > blocks[-1][1] / blocks[-1][0]:
            weight_sum, total, count = blocks.pop()
            blocks[-1][0] += weight_sum
            blocks[-1][1] += total
            blocks[-1][2] += count
    out: list[float] = []
    for weight_sum, total, count in blocks:
        out += [total / weight_sum] * int(count)
    return out


def _place(ranks: list[list[str]], chains: dict[str, list[str]], boxes: dict[str, Box], gap_x: float) -> dict[str, float]:
    """x of every item: each rank as near its neighbours' mean as the separation allows."""
    above, below = _neighbours(chains)

    def separation(left: str, right: str) -> float:
        return boxes[left].right + _gap(left, right, gap_x) + boxes[right].left

    offsets: dict[str, float] = {}
    x: dict[str, float] = {}
    for rank in ranks:
        at = 0.0
        for i, item in enumerate(rank):
            if i:
                at += separation(rank[i - 1], item)
            offsets[item] = at
            x[item] = at

    def weight(a: str, b: str) -> float:
        inner = (not a.startswith("n:")) + (not b.startswith("n:"))
        return (1.0, 2.0, 8.0)[inner]  # long edges keep straight

    for round_ in range(PLACEMENT_ROUNDS):
        direction = round_ % 3  # down, up, both
        span = list(range(len(ranks))) if direction != 1 else list(range(len(ranks) - 1, -1, -1))
        for r in span:
            rank = ranks[r]
            targets, weights = [], []
            for item in rank:
                near = (above.get(item, []) if direction != 1 else []) + (below.get(item, []) if direction != 0 else [])
                if near:
                    total = sum(weight(item, n) for n in near)
                    targets.append(sum(weight(item, n) * x[n] for n in near) / total - offsets[item])
                    weights.append(total)
                else:
                    targets.append(x[item] - offsets[item])
                    weights.append(0.05)
            for item, shifted in zip(rank, _isotonic(targets, weights), strict=True):
                x[item] = round(shifted + offsets[item], 6)
    return x


def _straighten(ranks: list[list[str]], chains: dict[str, list[str]], boxes: dict[str, Box], x: dict[str, float], gap_x: float) -> None:
    """Run each long edge straight down where its neighbours leave room: fewer bends than least squares alone leaves."""
    slot = {item: (r, i) for r, rank in enumerate(ranks) for i, item in enumerate(rank)}

    def room(item: str) -> tuple[float, float]:
        r, i = slot[item]
        rank = ranks[r]
        low = x[rank[i - 1]] + boxes[rank[i - 1]].right + _gap(rank[i - 1], item, gap_x) + boxes[item].left if i else float("-inf")
        high = (
            x[rank[i + 1]] - boxes[rank[i + 1]].left - _gap(item, rank[i + 1], gap_x) - boxes[item].right
            if i + 1 < len(rank)
            else float("inf")
        )
        return low, high

    for chain in chains.values():
        inner = chain[1:-1]
        if len(inner) < 2:
            continue
        ordered = sorted(x[item] for item in inner)
        median = ordered[len(ordered) // 2]
        bounds = [room(item) for item in inner]
        low, high = max(b[0] for b in bounds), min(b[1] for b in bounds)
        if low <= high:
            # The point of the common room nearest the median: one straight run, as little moved as can be.
            target = min(max(median, low), high)
            for item in inner:
                x[item] = target


def _gap(left: str, right: str, gap_x: float) -> float:
    return DUMMY if left.startswith("d:") and right.startswith("d:") else gap_x


def _bands(ranks: list[list[str]], boxes: dict[str, Box], gap_y: float) -> tuple[list[tuple[float, float]], dict[str, float]]:
    bands: list[tuple[float, float]] = []
    y: dict[str, float] = {}
    top = 0.0
    for rank in ranks:
        height = max((boxes[item].height for item in rank), default=0.0)
        bands.append((top, top + height))
        for item in rank:
            y[item] = top + height / 2
        top += height + gap_y
    return bands, y


def _paths(
    ranks: list[list[str]],
    edges: list[Edge],
    chains: dict[str, list[str]],
    upward: set[str],
    boxes: dict[str, Box],
    x: dict[str, float],
    y: dict[str, float],
    bands: list[tuple[float, float]],
) -> dict[str, list[Segment]]:
    rank_of = {item: r for r, rank in enumerate(ranks) for item in rank}
    # Ports: the edges leaving a node's lower side (and entering its upper side) spread over it, ordered by where they go.
    lower: dict[str, list[tuple[float, int, str]]] = {}
    upper: dict[str, list[tuple[float, int, str]]] = {}
    for index, edge in enumerate(edges):
        chain = chains[edge.key]
        lower.setdefault(chain[0], []).append((x[chain[1]], index, edge.key))
        upper.setdefault(chain[-1], []).append((x[chain[-2]], index, edge.key))
    port: dict[tuple[str, str], float] = {}
    for side, attached in (("low", lower), ("up", upper)):
        for item, ends in attached.items():
            ends.sort()
            half = boxes[item].ports or boxes[item].left
            for j, (_x, _i, key) in enumerate(ends):
                port[(side, key)] = x[item] - half * 0.9 + 1.8 * half * (j + 1) / (len(ends) + 1)
    paths: dict[str, list[Segment]] = {}
    for edge in edges:
        chain = chains[edge.key]
        # Waypoints top to bottom: each enters its band at `top` and leaves it at `low`, straight down in between.
        source = chain[0]
        waypoints = [(port[("low", edge.key)], y[source] + _body(boxes[source]) / 2, bands[rank_of[source]][1])]
        for item in chain[1:-1]:
            top, low = bands[rank_of[item]]
            waypoints.append((x[item], top, low))
        dest = chain[-1]
        entry = y[dest] - _body(boxes[dest]) / 2
        waypoints.append((port[("up", edge.key)], bands[rank_of[dest]][0], entry))
        paths[edge.key] = _route(waypoints, edge.key in upward)
    return paths


def _body(box: Box) -> float:
    return box.body or box.height


def _route(waypoints: list[tuple[float, float, float]], turned: bool) -> list[Segment]:
    """Straight down through each band, a Bézier through each gap; a point in an empty band is passed smoothly."""
    segments: list[Segment] = []

    def slope(i: int) -> float:
        """The path's dx/dy where it crosses waypoint i: vertical in a band with height, else the line of its neighbours."""
        _x, top, low = waypoints[i]
        if low > top or i in (0, len(waypoints) - 1):
            return 0.0
        (x0, _t0, y0), (x1, y1, _l1) = waypoints[i - 1], waypoints[i + 1]
        return (x1 - x0) / (y1 - y0)

    first_x, first_top, first_low = waypoints[0]
    if first_low > first_top:
        segments.append(((first_x, first_top), (first_x, first_low)))
    for i in range(1, len(waypoints)):
        (x0, _top0, y0), (x1, y1, low1) = waypoints[i - 1], waypoints[i]
        third = (y1 - y0) / 3
        s0, s1 = slope(i - 1), slope(i)
        segments.append(((x0, y0), (x0 + s0 * third, y0 + third), (x1 - s1 * third, y1 - third), (x1, y1)))
        if low1 > y1:
            segments.append(((x1, y1), (x1, low1)))
    if turned:
        segments = [tuple(reversed(segment)) for segment in reversed(segments)]
    return segments
