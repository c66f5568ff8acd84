"""The layered layout on any graph: no two boxes overlap, every edge joins its ends, and the result depends only on the input."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shiftchange.spec.layout import Box, Edge, layered


@st.composite
def graphs(draw):
    count = draw(st.integers(2, 9))
    keys = [f"s{i}" for i in range(count)]
    size = st.floats(4, 120, allow_nan=False)
    nodes = [Box(key, draw(size) / 2, draw(size), draw(st.floats(8, 60)), ports=0.0) for key in keys]
    pairs = draw(st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(keys)), max_size=24))
    edges = []
    for i, (source, dest) in enumerate(pairs):
        label = Box(f"e{i}", 3.0, draw(size), draw(st.floats(6, 40))) if draw(st.booleans()) else None
        edges.append(Edge(f"e{i}", source, dest, label))
    bottom = draw(st.lists(st.sampled_from(keys[1:]), unique=True, max_size=3))
    return nodes, keys[0], bottom, edges


def _rectangles(nodes, edges, layout):
    boxes = {node.key: node for node in nodes}
    out = [
        (f"node {k}", x - boxes[k].left, y - boxes[k].height / 2, x + boxes[k].right, y + boxes[k].height / 2)
        for k, (x, y) in layout.nodes.items()
    ]
    for edge in edges:
        if edge.label is not None and edge.source != edge.dest:
            x, y = layout.labels[edge.key]
            out.append(
                (f"label {edge.key}", x - edge.label.left, y - edge.label.height / 2, x + edge.label.right, y + edge.label.height / 2)
            )
    return out


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(graphs())
def test_no_two_boxes_overlap_and_edges_join_their_ends(graph):
    nodes, initial, bottom, edges = graph
    layout = layered(nodes, initial, bottom, edges)
    rectangles = _rectangles(nodes, edges, layout)
    for i, (name, x0, y0, x1, y1) in enumerate(rectangles):
        for other, a0, b0, a1, b1 in rectangles[i + 1 :]:
            assert not (x0 < a1 - 1e-6 and a0 < x1 - 1e-6 and y0 < b1 - 1e-6 and b0 < y1 - 1e-6), f"{name} overlaps {other}"
    heights = {node.key: node.height for node in nodes}
    for edge in edges:
        if edge.source == edge.dest:
            assert edge.key not in layout.paths
            continue
        path = layout.paths[edge.key]
        start, end = path[0][0], path[-1][-1]
        (_sx, sy), (_dx, dy) = layout.nodes[edge.source], layout.nodes[edge.dest]
        # The path leaves its source's box edge and arrives at its destination's, below or above as the edge runs.
        assert abs(abs(start[1] - sy) - heights[edge.source] / 2) < 1e-6
        assert abs(abs(end[1] - dy) - heights[edge.dest] / 2) < 1e-6
        for segment, following in itertools.pairwise(path):
            assert segment[-1] == following[0]
    # Terminal (bottom) states lie below every other state, and share one row unless an edge joins two of them.
    others = [y for key, (_x, y) in layout.nodes.items() if key not in bottom]
    if bottom and others:
        assert min(layout.nodes[key][1] for key in bottom) > max(others)
    if not any(edge.source in bottom and edge.dest in bottom and edge.source != edge.dest for edge in edges):
        assert len({layout.nodes[key][1] for key in bottom}) <= 1
    assert layered(nodes, initial, bottom, edges) == layout


def test_an_edge_that_closes_a_cycle_is_drawn_upwards_to_its_destination():
    nodes = [Box(k, 10, 10, 10) for k in ("a", "b", "c")]
    edges = [Edge("ab", "a", "b"), Edge("bc", "b", "c"), Edge("ca", "c", "a")]
    layout = layered(nodes, "a", [], edges)
    assert layout.upward == {"ca"}
    assert layout.nodes["a"][1] < layout.nodes["b"][1] < layout.nodes["c"][1]
    path = layout.paths["ca"]
    assert path[0][0][1] < layout.nodes["c"][1] and path[-1][-1][1] > layout.nodes["a"][1]  # leaves c's top, enters a's bottom
