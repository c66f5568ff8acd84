"""State diagrams for design reviews, drawn from the same rows the core runs.

Mermaid and DOT are text and need nothing installed. SVG and PNG use Graphviz
when its `dot` program is on the PATH, because its layout and spline routing
read best; otherwise shiftchange lays the machine out itself (`layout.py`, a
layered layout in which no two boxes overlap by construction) and matplotlib
draws it, so the pictures work on a fresh machine.

Every format says the same things the same way: an edge's label is its
trigger and its row number (`claim #5`), the number of the review page's
table that lists the row's guards and effects; the actor is the colour (a
legend names them); a fenced row is a thick line with a bold label;
terminal states have a double border; rows in place (a state to itself)
are listed beside their state with a loop mark. A diagram of a proposed
change (`Marks`) highlights added and changed rows and draws removed ones
as dashed ghosts.

Every output is byte-identical from run to run and across `PYTHONHASHSEED`
values: everything is built in table order, the layout breaks ties by it,
matplotlib's SVG ids are salted with a constant, and no file carries a date.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .layout import Box, Edge, Layout, layered
from .model import ACTORS, Machine, Row, State

FORMATS = ("mermaid", "dot", "svg", "png")
RENDERERS = ("auto", "graphviz", "matplotlib")
ACTOR_COLOURS = {
    "orchestrator": "#1f4e9c",
    "worker": "#2e7d32",
    "reaper": "#c62828",
    "operator": "#6a1b9a",
    "provider": "#b34700",
}
"""Each colour is also a label's text colour: at least 4.5:1 against white and against every MARK_FILLS colour."""
assert set(ACTOR_COLOURS) == set(ACTORS), "every actor needs a colour"
MARK_COLOURS = {"added": "#00796b", "changed": "#b07d00", "removed": "#757575"}
"""The highlight of a row a change added, changed or removed: a line drawn round the edge (and its label), so at least 3:1
against the white page. A light highlight read as a mark on screen but vanished on a projector or in grey print."""
MARK_FILLS = {"added": "#e8f5e9", "changed": "#fff8e1"}
"""The light fill behind a highlighted label: light enough that its text, in its actor's colour, keeps 4.5:1."""
GHOST = MARK_COLOURS["removed"]
"""A removed row's or state's line and text: dashed, and still readable text (4.6:1 on white)."""
FONT = "DejaVu Sans"
"""The font matplotlib ships with, so a picture is the same on every machine."""
STATE_PT = 10.0
LABEL_PT = 8.5
TITLE_PT = 13.0
NOTE_PT = 8.0
PNG_DPI = 144
LOOP_GAP_PT = 16.0
MARGIN_PT = 18.0
PORT_PT = 14.0
INSTALL_GRAPHVIZ = "Graphviz's dot draws a better layout when installed (apt-get install graphviz, brew install graphviz)"


class DiagramError(Exception):
    """A diagram could not be produced as asked (bad format, renderer missing, unwritable file)."""


@dataclass(frozen=True)
class Marks:
    """What a proposed change did to the drawn machine, for `spec diff --diagram`.

    `added` and `changed` are row indices (`Row.index`) of the drawn (new)
    machine; `removed` are rows of the old machine, drawn as dashed ghosts, and
    `removed_states` the old states they need that the new machine lacks.
    """

    added: frozenset[int] = frozenset()
    changed: frozenset[int] = frozenset()
    removed: tuple[Row, ...] = ()
    removed_states: tuple[State, ...] = ()

    def of(self, row: Row, ghost: bool) -> str | None:
        if ghost:
            return "removed"
        return "added" if row.index in self.added else "changed" if row.index in self.changed else None


# ------------------------------------------------------------------ the view every format draws


@dataclass(frozen=True)
class _Edge:
    """The rows one drawn edge carries: same ends, actor, fencing and mark, in table order."""

    source: str
    dest: str
    rows: tuple[Row, ...]
    mark: str | None

    @property
    def actor(self) -> str:
        return self.rows[0].actor

    @property
    def fenced(self) -> bool:
        return self.rows[0].fenced

    @property
    def colour(self) -> str:
        return GHOST if self.mark == "removed" else ACTOR_COLOURS[self.actor]

    def lines(self) -> list[str]:
        return [_row_label(row, self.mark) for row in self.rows]

    def key(self, machine: str) -> str:
        numbers = "-".join(str(row.index + 1) for row in self.rows)
        return f"{machine}-{'old-' if self.mark == 'removed' else ''}row-{numbers}-from-{self.source}"


@dataclass(frozen=True)
class _View:
    name: str
    source_file: str
    initial: str
    states: tuple[State, ...]
    ghost_states: frozenset[str]
    edges: tuple[_Edge, ...]
    loops: dict[str, tuple[_Edge, ...]]

    def terminal(self, state: str) -> bool:
        return next(s for s in self.states if s.name == state).terminal


def _row_label(row: Row, mark: str | None) -> str:
    return f"{row.trigger} (old #{row.index + 1})" if mark == "removed" else f"{row.trigger} #{row.index + 1}"


def _view(machine: Machine, marks: Marks | None) -> _View:
    marks = marks or Marks()
    states = list(machine.states.values()) + [s for s in marks.removed_states if s.name not in machine.states]
    grouped: dict[tuple[str, str, str, bool, str | None], list[Row]] = {}
    drawn = [(s, row.dest_from(s), row, False) for row in machine.rows for s in row.sources]
    drawn += [(s, row.dest_from(s), row, True) for row in marks.removed for s in row.sources]
    known = {s.name for s in states}
    for source, dest, row, ghost in drawn:
        if source in known and dest in known:
            grouped.setdefault((source, dest, row.actor, row.fenced, marks.of(row, ghost)), []).append(row)
    edges = [_Edge(source, dest, tuple(rows), mark) for (source, dest, _a, _f, mark), rows in grouped.items()]
    loops: dict[str, tuple[_Edge, ...]] = {}
    for edge in edges:
        if edge.source == edge.dest:
            loops[edge.source] = (*loops.get(edge.source, ()), edge)
    return _View(
        machine.name,
        Path(machine.where.file).name,
        machine.initial,
        tuple(states),
        frozenset(s.name for s in marks.removed_states if s.name not in machine.states),
        tuple(edge for edge in edges if edge.source != edge.dest),
        loops,
    )


# ------------------------------------------------------------------ text formats


def to_mermaid(machine: Machine, marks: Marks | None = None) -> str:
    """A Mermaid flowchart: terminal states as double circles, fenced edges thick, actors coloured, labels `trigger #row`."""
    view = _view(machine, marks)
    lines = [
        f"%% The {view.name} machine, generated from {view.source_file} by `shiftchange spec diagram`.",
        "%% Edge labels are `trigger #row`: the row of the review page's transition table.",
        "flowchart TD",
        "    start_node(( )) --> " + view.initial,
    ]
    for state in view.states:
        lines.append(f'    {state.name}((("{state.name}")))' if state.terminal else f'    {state.name}(["{state.name}"])')
    link_styles = ["    linkStyle 0 stroke:#555"]
    index = 1
    for edge in _all_edges(view):
        for row in edge.rows:
            arrow = "==>" if edge.fenced else "-->"
            suffix = f" ({edge.mark})" if edge.mark in ("added", "changed") else ""
            lines.append(f'    {edge.source} {arrow}|"{_row_label(row, edge.mark)}{suffix}"| {edge.dest}')
            width = "3px" if edge.fenced else "1.5px"
            style = f"    linkStyle {index} stroke:{edge.colour},stroke-width:{width}"
            if edge.mark == "removed":
                style += ",stroke-dasharray:5 5"
            elif edge.mark:
                style = f"    linkStyle {index} stroke:{MARK_COLOURS[edge.mark]},stroke-width:5px"
            link_styles.append(style)
            index += 1
    terminal = ",".join(s.name for s in view.states if s.terminal)
    lines.append("    classDef terminal fill:#eeeeee,stroke:#222,stroke-width:3px")
    if terminal:
        lines.append(f"    class {terminal} terminal")
    if view.ghost_states:
        lines.append(f"    classDef removed stroke:{GHOST},stroke-dasharray:5 5,color:{GHOST}")
        lines.append(f"    class {','.join(s.name for s in view.states if s.name in view.ghost_states)} removed")
    return "\n".join(lines + link_styles) + "\n"


def _all_edges(view: _View) -> list[_Edge]:
    """Edges between states, then each state's loops, in table order."""
    return list(view.edges) + [edge for state in view.states for edge in view.loops.get(state.name, ())]


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(machine: Machine, marks: Marks | None = None) -> str:
    """A Graphviz digraph with a legend for actors, fenced edges, terminal states and the row numbers."""
    view = _view(machine, marks)
    q = _dot_quote
    lines = [
        f"// The {view.name} machine, generated from {view.source_file} by `shiftchange spec diagram`.",
        f"digraph {q(view.name)} {{",
        '  graph [rankdir=TB, fontname="Helvetica", labelloc=t, label=' + q(f"{view.name} machine") + "];",
        '  node [shape=box, style="rounded", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        '  "__start" [shape=point, width=0.15];',
        f'  "__start" -> {q(view.initial)};',
    ]
    for state in view.states:
        ghost = state.name in view.ghost_states
        found = f"id={q(state_id(state.name))}"
        if state.terminal:
            style = '"filled,dashed"' if ghost else "filled"
            lines.append(f'  {q(state.name)} [shape=doublecircle, style={style}, fillcolor="#eeeeee", {found}];')
        elif ghost:
            lines.append(f'  {q(state.name)} [style="rounded,dashed", color={q(GHOST)}, fontcolor={q(GHOST)}, {found}];')
        else:
            lines.append(f"  {q(state.name)} [{found}];")
    for edge in _all_edges(view):
        # Rows sharing ends, actor and fencing share one edge with a label per line: stacked loops are unreadable.
        attributes = [
            "label=" + q("\n".join(edge.lines())),
            f"id={q(edge.key(view.name))}",
            f"color={q(edge.colour)}",
            f"fontcolor={q(edge.colour)}",
        ]
        if edge.fenced:
            attributes += ["penwidth=3", 'style="bold"'] if edge.mark != "removed" else ["penwidth=3"]
        if edge.mark == "removed":
            attributes += ['style="dashed"', 'class="removed"']
        elif edge.mark:
            attributes[2] = f"color={q(MARK_COLOURS[edge.mark] + ':' + edge.colour + ':' + MARK_COLOURS[edge.mark])}"
            attributes += [f'class="{edge.mark}"']
        lines.append(f"  {q(edge.source)} -> {q(edge.dest)} [{', '.join(attributes)}];")
    lines.append(f'  "legend" [shape=plaintext, fontsize=10, label=<{_dot_legend(marks is not None)}>];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_legend(with_marks: bool) -> str:
    """The legend as one Graphviz HTML-like table, two entries a line.

    One node, not a cluster of one node per entry: dot lines a cluster's nodes up in one rank, 1,200 pt wide, which
    made the task machine 1,808 pt wide (a third of its size at a review page's width) for a legend.
    """
    cells = [f'<FONT COLOR="{colour}">{actor}</FONT>' for actor, colour in ACTOR_COLOURS.items()]
    cells += ["<B>thick edge: fenced write</B>", "trigger #N: row N of the review table", "double border: terminal state"]
    cells += ["laid out by Graphviz's dot"]
    cells = [f'<TD ALIGN="LEFT">{cell}</TD>' for cell in cells]
    marked = []
    for mark, colour in MARK_COLOURS.items() if with_marks else ():
        fill = MARK_FILLS.get(mark, "white")
        style = ' STYLE="dashed"' if mark == "removed" else ""
        marked.append(f'<TD ALIGN="LEFT" BORDER="3" COLOR="{colour}" BGCOLOR="{fill}"{style}>{mark} row</TD>')
    lines = ["".join(cells[i : i + 2]) for i in range(0, len(cells), 2)] + ["".join(marked[i : i + 2]) for i in range(0, len(marked), 2)]
    rows = "".join(f"<TR>{line}</TR>" for line in lines)
    return f'<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="4" COLOR="#757575"><TR><TD COLSPAN="2">legend</TD></TR>{rows}</TABLE>'


def state_id(name: str) -> str:
    """The id of a state's box in every SVG drawing, whatever drew it, so a page (and a test) can find each box."""
    return f"state-{name}"


# ------------------------------------------------------------------ rendering


def render(machine: Machine, fmt: str, output: str | Path, renderer: str = "auto", marks: Marks | None = None) -> str:
    """Write the diagram in `fmt` to `output`; returns the renderer used ("text", "graphviz" or "matplotlib")."""
    if fmt not in FORMATS:
        raise DiagramError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if renderer not in RENDERERS:
        raise DiagramError(f"unknown renderer {renderer!r}; use one of {', '.join(RENDERERS)}")
    path = Path(output)
    if not path.parent.is_dir():
        raise DiagramError(f"cannot write {path}: directory {path.parent} does not exist")
    if fmt in ("mermaid", "dot"):
        _write(path, (to_mermaid(machine, marks) if fmt == "mermaid" else to_dot(machine, marks)).encode())
        return "text"
    graphviz = shutil.which("dot")
    if renderer == "graphviz" and graphviz is None:
        raise DiagramError("the graphviz renderer needs the `dot` program on the PATH; use --renderer matplotlib")
    if graphviz is not None and renderer != "matplotlib":
        result = subprocess.run([graphviz, f"-T{fmt}"], input=to_dot(machine, marks).encode(), capture_output=True, check=False)
        if result.returncode != 0:
            error = result.stderr.decode(errors="replace").strip()
            raise DiagramError(f"graphviz failed: {error.splitlines()[0] if error else result.returncode}")
        _write(path, result.stdout)
        return "graphviz"
    _write(path, draw_bytes(machine, fmt, marks))
    return "matplotlib"


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as error:
        raise DiagramError(f"cannot write {path}: {error.strerror}") from None


def draw_bytes(machine: Machine, fmt: str, marks: Marks | None = None) -> bytes:
    """The matplotlib drawing as SVG or PNG bytes, the same bytes on every run."""
    import io

    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "shiftchange", "svg.fonttype": "path", "path.simplify": False}):
        figure = draw(machine, marks)
        buffer = io.BytesIO()
        description = f"The {machine.name} machine, drawn by shiftchange's layered layout with matplotlib. {INSTALL_GRAPHVIZ}."
        if fmt == "svg":
            metadata: dict[str, Any] = {"Date": None, "Title": f"{machine.name} machine", "Description": description}
            figure.savefig(buffer, format="svg", metadata=metadata)
        else:
            figure.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Title": f"{machine.name} machine", "Description": description})
    return buffer.getvalue()


@cache
def _measure(text: str, size: float, bold: bool = False) -> tuple[float, float]:
    """Width and height of `text` in points, as matplotlib draws it; the larger of two resolutions, since hinting differs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width = height = 0.0
    for dpi in (72, PNG_DPI):
        figure = Figure(dpi=dpi)
        renderer = FigureCanvasAgg(figure).get_renderer()
        extent = figure.text(0, 0, text, fontsize=size, family=FONT, fontweight="bold" if bold else "normal").get_window_extent(renderer)
        width, height = max(width, extent.width * 72 / dpi), max(height, extent.height * 72 / dpi)
    return width + 1.0, height + 1.0


@dataclass(frozen=True)
class _Placed:
    """The drawing's geometry in points, y downwards: what `draw` paints and what the tests measure."""

    view: _View
    layout: Layout
    boxes: dict[str, tuple[float, float, float, float]]
    """Each state's box: x0, y0, width, height."""
    top: float
    width: float
    height: float


def _state_size(view: _View, name: str) -> tuple[float, float]:
    """A state's box: its name padded, and wide enough to spread the edges that meet either side of it."""
    width, height = _measure(name, STATE_PT)
    inward = sum(edge.dest == name for edge in view.edges)
    outward = sum(edge.source == name for edge in view.edges)
    return max(width + 20.0, PORT_PT * (max(inward, outward) + 1)), height + 14.0


def place(machine: Machine, marks: Marks | None = None) -> _Placed:
    """Measure every text, lay the machine out and size the page."""
    view = _view(machine, marks)
    nodes = []
    for state in view.states:
        width, height = _state_size(view, state.name)
        ring = 4.0 if state.terminal else 0.0
        loop_width = loop_height = 0.0
        for edge in view.loops.get(state.name, ()):
            for line in edge.lines():
                w, h = _measure("\u21bb " + line, LABEL_PT, edge.fenced)
                loop_width, loop_height = max(loop_width, w), loop_height + h
        right = width / 2 + ring + (LOOP_GAP_PT + loop_width if loop_width else 0.0)
        nodes.append(Box(state.name, width / 2 + ring, right, max(height + 2 * ring, loop_height), ports=width / 2, body=height + 2 * ring))
    edges = []
    for edge in view.edges:
        w, h = _measure("\n".join(edge.lines()), LABEL_PT, edge.fenced)
        edges.append(Edge(edge.key(view.name), edge.source, edge.dest, Box(edge.key(view.name), 3.0, w + 5.0, h)))
    layout = layered(nodes, view.initial, [s.name for s in view.states if s.terminal], edges)
    top = MARGIN_PT + _measure("x", TITLE_PT, True)[1] + 2 * _measure("x", NOTE_PT)[1] + 30.0
    boxes = {}
    for state in view.states:
        x, y = layout.nodes[state.name]
        width, height = _state_size(view, state.name)
        boxes[state.name] = (MARGIN_PT + x - width / 2, top + y - height / 2, width, height)
    width = max(layout.width, _measure(_subtitle(view), NOTE_PT)[0], _measure(_legend_note(), NOTE_PT)[0]) + 2 * MARGIN_PT
    return _Placed(view, layout, boxes, top, width, top + layout.height + MARGIN_PT)


def _subtitle(view: _View) -> str:
    return f"Generated from {view.source_file} by `shiftchange spec diagram`, laid out by shiftchange and drawn by matplotlib."


def _legend_note() -> str:
    return f"Edge label: trigger #N, row N of the review page's transition table (guards, effects). {INSTALL_GRAPHVIZ}."


def draw(machine: Machine, marks: Marks | None = None) -> Any:
    """The diagram as a matplotlib Figure (Agg), one point per unit, y downwards."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    placed = place(machine, marks)
    legend_rows = _legend_entries(marks is not None)
    legend_height = 14.0 * _legend_lines(legend_rows, placed.width) + 20.0
    height = placed.height + legend_height
    figure = Figure(figsize=(placed.width / 72, height / 72), dpi=72)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, placed.width)
    axes.set_ylim(height, 0)
    axes.axis("off")
    _draw_header(axes, placed)
    for edge in placed.view.edges:
        _draw_edge(axes, placed, edge)
    for state in placed.view.states:
        _draw_state(axes, placed, state)
    _draw_legend(axes, placed, legend_rows, placed.height)
    return figure


def _text(axes: Any, x: float, y: float, text: str, size: float, colour: str = "#222222", bold: bool = False, **options: Any) -> Any:
    return axes.text(x, y, text, fontsize=size, family=FONT, color=colour, fontweight="bold" if bold else "normal", **options)


def _draw_header(axes: Any, placed: _Placed) -> None:
    view = placed.view
    title_height = _measure("x", TITLE_PT, True)[1]
    _text(axes, MARGIN_PT, MARGIN_PT, f"{view.name} machine", TITLE_PT, bold=True, va="top", gid="title")
    _text(axes, MARGIN_PT, MARGIN_PT + title_height + 2, _subtitle(view), NOTE_PT, "#555555", va="top", gid="renderer")
    x0, y0, width, _height = placed.boxes[view.initial]
    centre = x0 + width / 2
    axes.plot([centre], [y0 - 22], marker="o", markersize=6, color="#333333")
    _arrow(axes, [((centre, y0 - 19), (centre, y0))], "#333333", 1.2, gid="initial")


def _arrow(axes: Any, segments: list[tuple[tuple[float, float], ...]], colour: str, width: float, gid: str, **options: Any) -> None:
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path as MplPath

    vertices = [segments[0][0]]
    codes = [MplPath.MOVETO]
    for segment in segments:
        vertices += list(segment[1:])
        codes += [MplPath.LINETO] if len(segment) == 2 else [MplPath.CURVE4] * 3
    options = {"arrowstyle": "-|>", **options}
    patch = FancyArrowPatch(path=MplPath(vertices, codes), mutation_scale=9 + width, color=colour, linewidth=width, gid=gid, **options)
    axes.add_patch(patch)


def _shifted(placed: _Placed, segments: list[tuple[tuple[float, float], ...]]) -> list[tuple[tuple[float, float], ...]]:
    return [tuple((x + MARGIN_PT, y + placed.top) for x, y in segment) for segment in segments]


def _draw_edge(axes: Any, placed: _Placed, edge: _Edge) -> None:
    key = edge.key(placed.view.name)
    segments = _shifted(placed, placed.layout.paths[key])
    width = 2.8 if edge.fenced else 1.1
    if edge.mark in ("added", "changed"):
        # A cased line: the highlight outside, a white band, then the actor's line, so neither colour hides the other.
        _arrow(axes, segments, MARK_COLOURS[edge.mark], width + 6, gid=f"{edge.mark}-{key}", arrowstyle="-")
        _arrow(axes, segments, "white", width + 2, gid=f"{edge.mark}-casing-{key}", arrowstyle="-")
    _arrow(axes, segments, edge.colour, width, gid=key, linestyle="--" if edge.mark == "removed" else "-")
    x, y = placed.layout.labels[key]
    background = _highlight(edge, 0.1)
    _text(
        axes,
        x + MARGIN_PT + 5.0,
        y + placed.top,
        "\n".join(edge.lines()),
        LABEL_PT,
        edge.colour,
        edge.fenced,
        va="center",
        ha="left",
        gid=f"label-{key}",
        bbox=background,
    )


def _highlight(edge: _Edge, pad: float) -> dict[str, Any] | None:
    """The box behind an added or changed row's label: a light fill under its text, outlined in the highlight's colour."""
    if edge.mark not in MARK_FILLS:
        return None
    return {"boxstyle": f"square,pad={pad}", "facecolor": MARK_FILLS[edge.mark], "edgecolor": MARK_COLOURS[edge.mark], "linewidth": 1.5}


def _draw_state(axes: Any, placed: _Placed, state: State) -> None:
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    x0, y0, width, height = placed.boxes[state.name]
    ghost = state.name in placed.view.ghost_states
    line = {"linestyle": "--", "edgecolor": GHOST} if ghost else {"edgecolor": "#333333"}
    if state.terminal:
        ring = FancyBboxPatch(
            (x0 - 4, y0 - 4), width + 8, height + 8, boxstyle="round,pad=0,rounding_size=9", facecolor="white", linewidth=1.6, **line
        )
        axes.add_patch(ring)
    fill = "#eeeeee" if state.terminal else "white"
    box = FancyBboxPatch(
        (x0, y0), width, height, boxstyle="round,pad=0,rounding_size=6", facecolor=fill, linewidth=1.3, gid=state_id(state.name), **line
    )
    axes.add_patch(box)
    _text(
        axes,
        x0 + width / 2,
        y0 + height / 2,
        state.name,
        STATE_PT,
        GHOST if ghost else "#111111",
        ha="center",
        va="center",
        gid=f"name-{state.name}",
    )
    loops = placed.view.loops.get(state.name, ())
    if not loops:
        return
    right, middle = x0 + width, y0 + height / 2
    axes.add_patch(
        FancyArrowPatch(
            (right, middle - 5),
            (right, middle + 5),
            connectionstyle="arc3,rad=-1.1",
            arrowstyle="-|>",
            mutation_scale=8,
            color="#555555",
            linewidth=1.0,
        )
    )
    lines = [(edge, text) for edge in loops for text in edge.lines()]
    heights = [_measure("\u21bb " + text, LABEL_PT, edge.fenced)[1] for edge, text in lines]
    y = middle - sum(heights) / 2
    for line_number, ((edge, text), line_height) in enumerate(zip(lines, heights, strict=True)):
        background = _highlight(edge, 0.05)
        _text(
            axes,
            right + LOOP_GAP_PT,
            y + line_height / 2,
            "\u21bb " + text,
            LABEL_PT,
            edge.colour,
            edge.fenced,
            va="center",
            ha="left",
            gid=f"loop-{edge.key(placed.view.name)}-line-{line_number}",
            bbox=background,
        )
        y += line_height


def _legend_entries(with_marks: bool) -> list[tuple[str, str, float, str]]:
    """(text, colour, line width, line style) for each legend entry."""
    entries = [(actor, colour, 1.6, "-") for actor, colour in ACTOR_COLOURS.items()]
    entries += [("fenced write (thick line, bold label)", "#444444", 3.0, "-"), ("\u21bb row in place, beside its state", "", 0, "")]
    entries += [("double border: terminal state", "", 0, "")]
    if with_marks:
        entries += [
            ("added row", MARK_COLOURS["added"], 6.0, "-"),
            ("changed row", MARK_COLOURS["changed"], 6.0, "-"),
            ("removed row", GHOST, 1.6, "--"),
        ]
    return entries


def _legend_lines(entries: list[tuple[str, str, float, str]], width: float) -> int:
    return len(_legend_rows(entries, width)) + 1


def _legend_rows(entries: list[tuple[str, str, float, str]], width: float) -> list[list[tuple[float, tuple[str, str, float, str]]]]:
    rows: list[list[tuple[float, tuple[str, str, float, str]]]] = [[]]
    x = MARGIN_PT
    for entry in entries:
        span = (26.0 if entry[1] else 0.0) + _measure(entry[0], NOTE_PT)[0] + 18.0
        if rows[-1] and x + span > width - MARGIN_PT:
            rows.append([])
            x = MARGIN_PT
        rows[-1].append((x, entry))
        x += span
    return rows


def _draw_legend(axes: Any, placed: _Placed, entries: list[tuple[str, str, float, str]], top: float) -> None:
    y = top + 7.0
    for row_number, row in enumerate(_legend_rows(entries, placed.width)):
        for entry_number, (x, (text, colour, width, style)) in enumerate(row):
            start = x
            if colour:
                axes.plot([x, x + 20], [y, y], color=colour, linewidth=width, linestyle=style, solid_capstyle="butt")
                start = x + 26
            _text(
                axes,
                start,
                y,
                text,
                NOTE_PT,
                colour if colour in ACTOR_COLOURS.values() else "#333333",
                va="center",
                gid=f"legend-{row_number}-{entry_number}",
            )
        y += 14.0
    _text(axes, MARGIN_PT, y, _legend_note(), NOTE_PT, "#555555", va="center", gid="legend-note")
