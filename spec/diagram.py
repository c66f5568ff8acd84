"""State diagrams for design reviews, drawn from the same rows the core runs.

Mermaid and DOT are text and need nothing installed. SVG and PNG use Graphviz
when its `dot` program is on the PATH, because its layered layout reads best;
otherwise networkx lays the graph out in layers (distance from the initial
state) and matplotlib draws it, so the pictures work on a fresh machine.

In every format the same three things stand out: terminal states (double
border), the actor of each transition (one colour per actor, with a legend),
and fenced transitions (thick lines, marked "fenced").
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import networkx as nx

from .model import ACTORS, Machine, Row

FORMATS = ("mermaid", "dot", "svg", "png")
RENDERERS = ("auto", "graphviz", "matplotlib")
ACTOR_COLOURS = {
    "orchestrator": "#1f4e9c",
    "worker": "#2e7d32",
    "reaper": "#c62828",
    "operator": "#6a1b9a",
    "provider": "#ef6c00",
}
assert set(ACTOR_COLOURS) == set(ACTORS), "every actor needs a colour"


class DiagramError(Exception):
    """A diagram could not be produced as asked (bad format, renderer missing, unwritable file)."""


def _edge_label(row: Row) -> str:
    label = f"{row.trigger} · {row.actor}"
    return label + " · fenced" if row.fenced else label


def _edges(machine: Machine) -> dict[tuple[str, str], list[Row]]:
    """Rows grouped by the (source, dest) pair they draw, in table order."""
    grouped: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for source, dest, row in machine.edges():
        grouped[(source, dest)].append(row)
    return grouped


def to_mermaid(machine: Machine) -> str:
    """A Mermaid flowchart: terminal states as double circles, fenced edges thick, actors coloured."""
    lines = [
        f"%% The {machine.name} machine, generated from {Path(machine.where.file).name} by `shiftchange spec diagram`.",
        "flowchart TD",
        "    start_node(( )) --> " + machine.initial,
    ]
    for name, state in machine.states.items():
        lines.append(f'    {name}((("{name}")))' if state.terminal else f'    {name}(["{name}"])')
    link_styles = ["    linkStyle 0 stroke:#555"]
    index = 1
    for (source, dest), rows in _edges(machine).items():
        for row in rows:
            arrow = "==>" if row.fenced else "-->"
            lines.append(f'    {source} {arrow}|"{_edge_label(row)}"| {dest}')
            width = "3px" if row.fenced else "1.5px"
            link_styles.append(f"    linkStyle {index} stroke:{ACTOR_COLOURS[row.actor]},stroke-width:{width}")
            index += 1
    terminal = ",".join(machine.terminal_states)
    lines.append("    classDef terminal fill:#eeeeee,stroke:#222,stroke-width:3px")
    if terminal:
        lines.append(f"    class {terminal} terminal")
    return "\n".join(lines + link_styles) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(machine: Machine) -> str:
    """A Graphviz digraph with a legend for actors, fenced edges and terminal states."""
    q = _dot_quote
    lines = [
        f"// The {machine.name} machine, generated from {Path(machine.where.file).name} by `shiftchange spec diagram`.",
        f"digraph {q(machine.name)} {{",
        '  graph [rankdir=TB, fontname="Helvetica", labelloc=t, label=' + q(f"{machine.name} machine") + "];",
        '  node [shape=box, style="rounded", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        '  "__start" [shape=point, width=0.15];',
        f'  "__start" -> {q(machine.initial)};',
    ]
    for name, state in machine.states.items():
        if state.terminal:
            lines.append(f'  {q(name)} [shape=doublecircle, style=filled, fillcolor="#eeeeee"];')
        else:
            lines.append(f"  {q(name)};")
    for (source, dest), rows in _edges(machine).items():
        for group in _loop_groups(rows) if source == dest else [[row] for row in rows]:
            # In-place writes of one actor and fencing share one loop with a label per line: stacked loops are unreadable.
            row = group[0]
            attributes = [
                "label=" + q("\n".join(_edge_label(each) for each in group)),
                f"color={q(ACTOR_COLOURS[row.actor])}",
                f"fontcolor={q(ACTOR_COLOURS[row.actor])}",
            ]
            if row.fenced:
                attributes += ["penwidth=3", "style=bold"]
            lines.append(f"  {q(source)} -> {q(dest)} [{', '.join(attributes)}];")
    lines.append('  subgraph "cluster_legend" {')
    lines.append('    label="legend"; fontsize=10; style=dashed;')
    for actor, colour in ACTOR_COLOURS.items():
        lines.append(f"    {q('legend_' + actor)} [label={q(actor)}, shape=plaintext, fontcolor={q(colour)}];")
    lines.append('    "legend_fenced" [label="thick edge: fenced write", shape=plaintext];')
    lines.append('    "legend_terminal" [label="terminal", shape=doublecircle, style=filled, fillcolor="#eeeeee", fontsize=9];')
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _loop_groups(rows: list[Row]) -> list[list[Row]]:
    """Self-loop rows grouped by actor and fencing, in table order."""
    groups: dict[tuple[str, bool], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.actor, row.fenced), []).append(row)
    return list(groups.values())


def render(machine: Machine, fmt: str, output: str | Path, renderer: str = "auto") -> str:
    """Write the diagram in `fmt` to `output`; returns the renderer used ("text", "graphviz" or "matplotlib")."""
    if fmt not in FORMATS:
        raise DiagramError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if renderer not in RENDERERS:
        raise DiagramError(f"unknown renderer {renderer!r}; use one of {', '.join(RENDERERS)}")
    path = Path(output)
    if not path.parent.is_dir():
        raise DiagramError(f"cannot write {path}: directory {path.parent} does not exist")
    if fmt in ("mermaid", "dot"):
        _write_text(path, to_mermaid(machine) if fmt == "mermaid" else to_dot(machine))
        return "text"
    graphviz = shutil.which("dot")
    if renderer == "graphviz" and graphviz is None:
        raise DiagramError("the graphviz renderer needs the `dot` program on the PATH; use --renderer matplotlib")
    if graphviz is not None and renderer != "matplotlib":
        result = subprocess.run([graphviz, f"-T{fmt}", "-o", str(path)], input=to_dot(machine), text=True, capture_output=True, check=False)
        if result.returncode != 0:
            raise DiagramError(f"graphviz failed: {result.stderr.strip().splitlines()[0] if result.stderr.strip() else result.returncode}")
        return "graphviz"
    _draw_with_matplotlib(machine, fmt, path)
    return "matplotlib"


def _write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise DiagramError(f"cannot write {path}: {error.strerror}") from None


def _layers(machine: Machine) -> dict[str, int]:
    """Distance from the initial state; terminal states share the last layer."""
    graph = nx.DiGraph([(s, d) for s, d, _row in machine.edges() if s != d])
    graph.add_nodes_from(machine.states)
    distance = nx.single_source_shortest_path_length(graph, machine.initial)
    inner = [distance.get(s, 0) for s in machine.states if not machine.states[s].terminal]
    bottom = max(inner, default=0) + 1
    return {s: bottom if machine.states[s].terminal else distance.get(s, 0) for s in machine.states}


def _draw_with_matplotlib(machine: Machine, fmt: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    layers = _layers(machine)
    graph = nx.DiGraph()
    for name in machine.states:
        graph.add_node(name, layer=layers[name])
    position = nx.multipartite_layout(graph, subset_key="layer", align="horizontal", scale=1.0)
    position = {name: (x, -y) for name, (x, y) in position.items()}
    width = 2.2 * max(len([s for s in layers if layers[s] == layer]) for layer in set(layers.values()))
    figure, axes = plt.subplots(figsize=(max(12, width * 1.4), 2.6 * (max(layers.values()) + 1)))
    axes.set_title(f"{machine.name} machine")
    terminal = list(machine.terminal_states)
    inner = [s for s in machine.states if s not in terminal]
    nx.draw_networkx_nodes(
        graph, position, nodelist=inner, node_shape="s", node_size=2600, node_color="#ffffff", edgecolors="#333333", ax=axes
    )
    nx.draw_networkx_nodes(
        graph, position, nodelist=terminal, node_size=3400, node_color="#ffffff", edgecolors="#222222", linewidths=2.5, ax=axes
    )
    nx.draw_networkx_nodes(
        graph, position, nodelist=terminal, node_size=2500, node_color="#eeeeee", edgecolors="#222222", linewidths=1.5, ax=axes
    )
    nx.draw_networkx_labels(graph, position, font_size=8, ax=axes)
    for (source, dest), rows in _edges(machine).items():
        fenced = any(row.fenced for row in rows)
        colour = ACTOR_COLOURS[rows[0].actor]
        label = "\n".join(dict.fromkeys(row.trigger + (" (fenced)" if row.fenced else "") for row in rows))
        if source == dest:
            # networkx draws self-loops at figure scale; a marked label above the state reads better.
            x, y = position[source]
            axes.annotate(
                "\u21bb " + label.replace("\n", "\n\u21bb "),
                (x, y + 0.06),
                fontsize=6.5,
                color=colour,
                ha="center",
                va="bottom",
                fontweight="bold" if fenced else "normal",
            )
            continue
        graph.add_edge(source, dest)
        nx.draw_networkx_edges(
            graph,
            position,
            edgelist=[(source, dest)],
            edge_color=colour,
            width=3.0 if fenced else 1.2,
            node_size=3000,
            arrowsize=14,
            connectionstyle="arc3,rad=0.08",
            ax=axes,
        )
        nx.draw_networkx_edge_labels(
            graph,
            position,
            edge_labels={(source, dest): label},
            font_size=6.5,
            font_color=colour,
            connectionstyle="arc3,rad=0.08",
            bbox={"alpha": 0.7, "color": "white", "lw": 0},
            ax=axes,
        )
    handles = [Line2D([0], [0], color=c, lw=2, label=a) for a, c in ACTOR_COLOURS.items()]
    handles.append(Line2D([0], [0], color="#444444", lw=4, label="fenced (thick)"))
    handles.append(
        Line2D(
            [0],
            [0],
            marker="o",
            color="w",
            markeredgecolor="#222222",
            markerfacecolor="#eeeeee",
            markersize=12,
            markeredgewidth=2.5,
            label="terminal (double ring)",
        )
    )
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=True)
    axes.axis("off")
    figure.tight_layout()
    try:
        figure.savefig(path, format=fmt, dpi=110)
    except OSError as error:
        raise DiagramError(f"cannot write {path}: {error.strerror}") from None
    finally:
        plt.close(figure)
