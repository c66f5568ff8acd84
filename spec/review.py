"""The design-review page: the whole spec as one Markdown document and one self-contained HTML file, with its diagrams.

A review reads states, rows, failure domains and invariants as tables, sees
each machine drawn (an SVG file beside review.md, with the Mermaid source
inline for viewers that render it; the same SVG inlined in review.html), and
sees the checker's verdict, so nothing in the page can drift from the files
the core runs. Given a coverage (`sim run --coverage`), each transitions table
gains a "fired" column and each machine a short list of the rows no run fired.

Both pages are rendered from one list of blocks (headings, paragraphs, tables,
figures), so they cannot say different things. review.html is one file that
needs nothing else: inline CSS, every SVG inlined with its XML prolog,
DOCTYPE, comments and metadata dropped, every name space declaration dropped
(an HTML parser needs none), and every id prefixed with its machine's name so
two drawings in one page never share one. It can be mailed, attached to a
ticket or opened offline and shows exactly what review.md shows; it names no
absolute path (a witness names its file within the spec folder, an outside
folder is named by its name), since where the author kept the spec means
nothing to its reader.

Each diagram fits the column: its SVG scales by its viewBox to the column's
width (CSS alone, never wider than its own size), so every state is on screen
at first, and one small inline script adds zoom buttons, a "N% of full size"
readout and drag-to-pan, because fitting the attempt machine to a 1,280 px
window draws its labels at about three quarters of their size. The
alternative, a drawing at its own size in a scrolling box (what the page did),
put the initial state off screen at 1,280 px; a pan-zoom library would be the
page's only dependency and is far more than a few buttons need.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from .checker import Property, check_spec
from .coverage import Coverage
from .diagram import DiagramError, render, to_mermaid
from .loader import shown_directory
from .model import Machine, Spec

RECORDED_BY_SHOWN_MAX = 3
"""The page names at most this many of the commands that recorded a coverage, then how many more."""

Span = tuple[str, str]
"""A run of text and its style: "" (plain), "code" or "strong"."""
Cell = tuple[Span, ...]


def _plain(text: str) -> Cell:
    return (("", text),)


def _code(text: str) -> Cell:
    return (("code", text),)


def _strong(text: str) -> Cell:
    return (("strong", text),)


def _codes(names: tuple[str, ...] | list[str]) -> Cell:
    """Names as code, separated by commas."""
    spans: list[Span] = []
    for name in names:
        spans += [("", ", ")] if spans else []
        spans.append(("code", name))
    return tuple(spans)


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str


@dataclass(frozen=True)
class _Paragraph:
    spans: Cell


@dataclass(frozen=True)
class _Bullets:
    items: tuple[Cell, ...]


@dataclass(frozen=True)
class _Table:
    kind: str
    """What the table lists (its HTML class): "properties", "states", "transitions", ..."""
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    never: frozenset[int] = frozenset()
    """Positions of rows no run fired (only in a transitions table with coverage)."""
    machine: str = ""


@dataclass(frozen=True)
class _Figure:
    machine: str
    image: str
    """The SVG file beside review.md."""
    svg: str
    """The same drawing as an inline <svg> element for review.html."""
    mermaid: str
    drawn_by: str
    """The renderer that drew the SVG: "graphviz" or "matplotlib"."""
    width_px: float
    """The drawing's own width in CSS pixels: the page shows it narrower to fit the column, never wider."""


_DRAWN_BY = {
    "graphviz": "Graphviz's dot",
    "matplotlib": "shiftchange's layered layout with matplotlib (Graphviz's dot draws it when installed)",
}


@dataclass(frozen=True)
class _Pre:
    """Preformatted text: a task's timeline, replay commands."""

    text: str


_Block = _Heading | _Paragraph | _Bullets | _Table | _Figure | _Pre


@dataclass(frozen=True)
class ChangeExample:
    """One invariant the proposal breaks and the base holds: its shortest counterexample, as `spec diff --run` found it."""

    invariant: str
    check: str
    """explore or simulate: which found it."""
    found_in: str
    size_text: str
    example: tuple[str, ...]
    timeline: str | None
    """The violating task's timeline, as `shiftchange timeline` and the run report draw one."""
    replay: tuple[str, ...]


@dataclass(frozen=True)
class ChangeRun:
    """What `spec diff OLD NEW --run` found the change does, for the review page's section of that name.

    Plain data (the lab makes it, `shiftchange.lab.compare`), so the page imports neither the simulator nor the explorer.
    """

    base: str
    proposal: str
    scale: tuple[str, ...]
    """What both trials ran, one line each."""
    verdicts: tuple[tuple[str, str, str, str], ...]
    """(check, invariant or property, the base's verdict, the proposal's), each verdict ok, violated or unknown."""
    broken: tuple[str, ...]
    """"check invariant" for each verdict ok in the base and violated in the proposal."""
    examples: tuple[ChangeExample, ...]
    elapsed_s: float = 0.0


def _change_section(run: ChangeRun) -> list[_Block]:
    """The section "What this change does": both trials side by side, and each broken invariant's shortest counterexample."""
    blocks: list[_Block] = [_Heading(2, "What this change does")]
    verdict = (
        _strong(f"The proposal breaks {len(run.broken)} verdict(s) the base holds: {', '.join(run.broken)}.")
        if run.broken
        else _plain("The proposal breaks no verdict the base holds.")
    )
    blocks += [
        _Paragraph((("", "Base "), ("code", run.base), ("", ", proposal "), ("code", run.proposal), ("", f"; {run.elapsed_s:.0f} s."))),
        _Paragraph(verdict),
        _Bullets(tuple(_plain(line) for line in run.scale)),
    ]
    shown = {"ok": _plain("ok"), "violated": _strong("VIOLATED"), "unknown": _plain("unknown"), "": _plain("-")}
    rows = tuple(
        (_plain(check), _code(name), shown.get(base, _plain(base)), shown.get(proposal, _plain(proposal)))
        for check, name, base, proposal in run.verdicts
        if base != "ok" or proposal != "ok"
    )
    held = sum(1 for _c, _n, base, proposal in run.verdicts if base == proposal == "ok")
    tally = f"{held} verdicts are ok in both; the others, side by side:" if rows else f"All {held} verdicts are ok in both."
    blocks.append(_Paragraph(_plain(tally)))
    if rows:
        blocks.append(_Table("verdicts", ("check", "invariant", "base", "proposal"), rows))
    for example in run.examples:
        blocks += [
            _Heading(3, f"{example.invariant}: broken ({example.check})"),
            _Paragraph((("", f"Shortest counterexample: {example.size_text}, in "), ("code", example.found_in), ("", "."))),
        ]
        if example.example:
            blocks.append(_Bullets(tuple(_plain(line) for line in example.example[:6])))
        if example.timeline:
            blocks += [_Paragraph(_plain("The violating task's timeline:")), _Pre(example.timeline.rstrip())]
        blocks += [_Paragraph(_plain("Replay:")), _Pre("\n".join(example.replay))]
    return blocks


# ------------------------------------------------------------------ content


def _properties(spec: Spec, results: Sequence[Property] | None = None) -> list[_Block]:
    results = check_spec(spec) if results is None else results
    rows = tuple((_code(r.name), _plain("PASS") if r.ok else _strong("FAIL"), _plain(r.summary)) for r in results)
    # A witness names its file by the path it was read from; the page names the folder once, so a file is its name in it.
    folder = str(Path(spec.directory)) + os.sep
    witnesses = tuple((*_code(r.name), ("", f" witness: {witness.replace(folder, '')}")) for r in results for witness in r.witness)
    blocks: list[_Block] = [_Heading(2, "Structural properties"), _Table("properties", ("property", "verdict", "what it means"), rows)]
    return [*blocks, _Bullets(witnesses)] if witnesses else blocks


def _coverage_summary(machine: Machine, coverage: Coverage) -> list[_Block]:
    """The totals, the rows never fired, the accepted events that matched no row and the refused calls, of one machine."""
    name = machine.name
    keys = coverage.identity[name]
    runs = f"{coverage.runs:,} run" + ("" if coverage.runs == 1 else "s")
    blocks: list[_Block] = [_Paragraph(_strong(f"{coverage.rows_fired(name)} of {len(keys)} rows fired in {runs}."))]
    never = coverage.never_fired(name)
    if never:
        blocks.append(_Paragraph(_plain("Rows never fired:")))
        blocks.append(
            _Bullets(
                tuple((("", f"#{key.number} "), ("code", key.trigger), ("", f": {', '.join(key.sources)} -> {key.dest}")) for key in never)
            )
        )
    unmatched = [entry for entry in coverage.unmatched if entry.machine == name]
    if unmatched:
        blocks.append(_Paragraph(_plain("Accepted events that matched no row:")))
        items = tuple(
            (("code", entry.trigger), ("", f': {entry.from_state} -> {entry.to_state}, {entry.events:,} events, e.g. "{entry.example}"'))
            for entry in unmatched
        )
        blocks.append(_Bullets(items))
    refused = coverage.refused.get(name, {})
    if refused:
        spans: list[Span] = [("", "Refused calls: ")]
        for position, (trigger, count) in enumerate(sorted(refused.items())):
            spans += [("", ", ")] if position else []
            spans += [("code", trigger), ("", f" {count:,}")]
        blocks.append(_Paragraph((*spans, ("", "."))))
    return blocks


def _transitions(machine: Machine, coverage: Coverage | None) -> _Table:
    header = ("#", "trigger", "from", "to", *(("fired",) if coverage else ()), "actor", "guards", "effects", "fenced", "line")
    rows, never = [], set()
    for position, row in enumerate(machine.rows):
        fired: tuple[Cell, ...] = ()
        if coverage is not None:
            count = coverage.count(machine.name, row.index + 1)
            fired = (_plain(f"{count:,}"),) if count else (_strong("never"),)
            if not count:
                never.add(position)
        rows.append(
            (
                _plain(str(row.index + 1)),
                _code(row.trigger),
                _plain(", ".join(row.sources)),
                _plain(row.dest),
                *fired,
                _plain(row.actor),
                _plain(", ".join(row.guards) or "-"),
                _plain(", ".join(row.effects) or "-"),
                _strong("fenced") if row.fenced else _plain(""),
                _plain(str(row.where.line)),
            )
        )
    return _Table("transitions", header, tuple(rows), frozenset(never), machine.name)


def _machine_section(machine: Machine, figure: _Figure, coverage: Coverage | None) -> list[_Block]:
    terminal: Cell = (("", "Initial state: "), ("code", machine.initial), ("", ". Terminal: "), *_codes(machine.terminal_states), ("", "."))
    blocks: list[_Block] = [_Heading(2, f"The {machine.name} machine"), _Paragraph(_plain(machine.description)), _Paragraph(terminal)]
    if coverage is not None:
        blocks += _coverage_summary(machine, coverage)
    blocks += [figure, _Heading(3, "States")]
    states = []
    for state in machine.states.values():
        kind = "terminal" if state.terminal else "resting" if state.resting else "dispatchable" if state.dispatchable else ""
        states.append((_code(state.name), _plain(kind), _plain(state.description)))
    blocks.append(_Table("states", ("state", "kind", "meaning"), tuple(states), machine=machine.name))
    numbering = "Row numbers (#) are the numbers the diagram labels its edges with (trigger #N)."
    if coverage is not None:
        numbering += " Fired counts the accepted events of each row; never marks a row no run fired."
    blocks += [_Heading(3, "Transitions"), _Paragraph(_plain(numbering)), _transitions(machine, coverage), _Heading(3, "Vocabulary")]
    terms = []
    for kind, named in (("trigger", machine.triggers), ("guard", machine.guards), ("effect", machine.effects)):
        for term in named.values():
            terms.append((_plain(kind), _code(term.name), _plain(term.description + (" (material)" if term.material else ""))))
    blocks.append(_Table("vocabulary", ("kind", "name", "meaning"), tuple(terms), machine=machine.name))
    return blocks


def _tables(spec: Spec) -> list[_Block]:
    domains = []
    for domain in spec.domains.values():
        hypothesis = "required" if domain.changed_hypothesis_required else "no"
        domains.append(
            (
                _code(domain.name),
                _plain(domain.response),
                _plain(str(domain.retries_max)),
                _plain(hypothesis),
                _plain(domain.blast_radius),
                _plain(domain.description),
            )
        )
    header = ("domain", "response", "automatic retries", "changed hypothesis", "blast radius", "meaning")
    invariants = tuple((_code(invariant.name), _plain(invariant.statement)) for invariant in spec.invariants.values())
    return [
        _Heading(2, "Failure domains"),
        _Table("domains", header, tuple(domains)),
        _Heading(2, "Invariants"),
        _Table("invariants", ("invariant", "what must hold"), invariants),
    ]


def _shown_source(directory: str) -> str:
    """The spec folder as the page names it: never an absolute path.

    The page is mailed and attached to tickets; `/home/someone/...` says nothing to its reader that the folder's name
    does not, and tells them about the author's machine.
    """
    shown = shown_directory(directory)
    return Path(shown).name + "/" if Path(shown).is_absolute() else shown


def _opening(spec: Spec, coverage: Coverage | None) -> list[_Block]:
    source = _shown_source(spec.directory)
    blocks: list[_Block] = [
        _Heading(1, "shiftchange spec review"),
        _Paragraph((("", "Generated from "), ("code", source), ("", " by "), ("code", "shiftchange spec review"), ("", "."))),
    ]
    if coverage is None:
        return blocks
    commands = coverage.recorded_by[:RECORDED_BY_SHOWN_MAX]
    runs = f"{coverage.runs:,} run" + ("" if coverage.runs == 1 else "s")
    spans: list[Span] = [("", f"Transition coverage: {runs}, {coverage.events:,} events, recorded by ")]
    for position, command in enumerate(commands):
        spans += [("", "; ")] if position else []
        spans.append(("code", command))
    more = len(coverage.recorded_by) - len(commands)
    spans.append(("", f" and {more:,} more." if more > 0 else "."))
    return [*blocks, _Paragraph(tuple(spans))]


# ------------------------------------------------------------------ Markdown


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_spans(spans: Cell, in_table: bool = False) -> str:
    out = []
    for style, text in spans:
        text = _md_cell(text) if in_table else text
        out.append(f"`{text}`" if style == "code" else f"**{text}**" if style == "strong" else text)
    return "".join(out)


def _markdown(blocks: list[_Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, _Heading):
            lines += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, _Paragraph):
            lines += [_md_spans(block.spans, in_table=True), ""]
        elif isinstance(block, _Bullets):
            lines += [*(f"- {_md_spans(item, in_table=True)}" for item in block.items), ""]
        elif isinstance(block, _Pre):
            lines += ["```text", block.text, "```", ""]
        elif isinstance(block, _Table):
            lines.append("| " + " | ".join(block.header) + " |")
            lines.append("|" + "---|" * len(block.header))
            lines += ["| " + " | ".join(_md_spans(cell, in_table=True) for cell in row) + " |" for row in block.rows]
            lines.append("")
        else:
            lines += [
                f"![{block.machine} machine]({block.image})",
                "",
                f"*The {block.machine} machine, drawn by {_DRAWN_BY[block.drawn_by]}.*",
                "",
            ]
            lines += ["<details><summary>Mermaid source</summary>", ""]
            lines += ["```mermaid", block.mermaid.rstrip(), "```", "", "</details>", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ HTML

_CSS = """
body { font-family: system-ui, sans-serif; line-height: 1.45; margin: 2rem auto; max-width: 80rem; padding: 0 1rem; }
body { color: #1b1b1b; background: #ffffff; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #c8c8c8; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
code { font-family: ui-monospace, monospace; font-size: 0.9em; background: #f5f5f5; padding: 0 0.2em; }
figure { margin: 1rem 0; }
figure.diagram .viewport { overflow: auto; border: 1px solid #c8c8c8; }
figure.diagram svg { display: block; width: 100%; max-width: var(--full-width); height: auto; }
figure.diagram.zoomed svg { max-width: none; }
figure.diagram.zoomed .viewport { cursor: grab; }
.zoom:not([hidden]) { display: flex; gap: 0.4rem; align-items: center; margin-bottom: 0.3rem; font-size: 0.9rem; }
.zoom button { font: inherit; min-width: 2rem; padding: 0.1rem 0.5rem; }
tr.never td { background: #fdecea; }
td.fired { text-align: right; }
td.fired.never { color: #a61b1b; font-weight: bold; }
pre { background: #f5f5f5; padding: 0.75rem; overflow-x: auto; }
pre.text { max-width: 100%; font-size: 0.85rem; }
pre.text code { background: none; padding: 0; }
"""


def _html_spans(spans: Cell) -> str:
    out = []
    for style, text in spans:
        escaped = html.escape(text)
        out.append(f"<code>{escaped}</code>" if style == "code" else f"<strong>{escaped}</strong>" if style == "strong" else escaped)
    return "".join(out)


def _html_table(table: _Table) -> Iterator[str]:
    machine = f' data-machine="{html.escape(table.machine)}"' if table.machine else ""
    yield f'<table class="{table.kind}"{machine}>'
    yield "<thead><tr>" + "".join(f"<th>{html.escape(name)}</th>" for name in table.header) + "</tr></thead>"
    yield "<tbody>"
    fired_column = table.header.index("fired") if "fired" in table.header else None
    for position, row in enumerate(table.rows):
        never = position in table.never
        cells = []
        for column, cell in enumerate(row):
            css = ("fired never" if never else "fired") if column == fired_column else ""
            cells.append(f'<td class="{css}">' if css else "<td>")
            cells[-1] += _html_spans(cell) + "</td>"
        yield ('<tr class="never">' if never else "<tr>") + "".join(cells) + "</tr>"
    yield "</tbody></table>"


def _html_figure(figure: _Figure, caption: str) -> str:
    """A diagram fitted to the column (CSS alone, so it fits without the script too), with zoom buttons the script shows."""
    name = html.escape(figure.machine)
    bar = (
        f'<div class="zoom" role="toolbar" aria-label="zoom the {name} diagram" hidden>'
        '<button type="button" data-zoom="out" aria-label="zoom out">\u2212</button>'
        '<button type="button" data-zoom="fit">fit width</button>'
        '<button type="button" data-zoom="in" aria-label="zoom in">+</button>'
        '<button type="button" data-zoom="full">full size</button>'
        "<output></output></div>"
    )
    width = f"{figure.width_px:.0f}"
    return (
        f'<figure class="diagram" data-machine="{name}" data-width-px="{width}" style="--full-width: {width}px">'
        f'{bar}<div class="viewport">{figure.svg}</div><figcaption>{caption}</figcaption></figure>'
    )


_ZOOM_SCRIPT = """
(() => {
  "use strict";
  const STEP = 1.25; // one click of + or -
  const SCALE_MAX = 4; // of the drawing's own size
  for (const figure of document.querySelectorAll("figure.diagram")) {
    const viewport = figure.querySelector(".viewport");
    const svg = viewport.querySelector("svg");
    const bar = figure.querySelector(".zoom");
    const said = bar.querySelector("output");
    const full = Number(figure.dataset.widthPx);
    let scale = null; // null: fit to the column, whatever its width
    const fit = () => Math.min(1, viewport.clientWidth / full);
    const current = () => (scale === null ? fit() : scale);
    const show = () => { said.value = Math.round(100 * current()) + "% of full size"; };
    const zoom = (next) => {
      const before = current();
      const centre = [viewport.scrollLeft + viewport.clientWidth / 2, viewport.scrollTop + viewport.clientHeight / 2];
      if (next <= fit() + 1e-9) {
        scale = null;
        figure.classList.remove("zoomed");
        svg.style.width = viewport.style.height = "";
      } else {
        // The window keeps the fitted drawing's height, so zooming pans inside it instead of pushing the page down.
        if (scale === null) viewport.style.height = svg.getBoundingClientRect().height + "px";
        scale = Math.min(next, SCALE_MAX);
        figure.classList.add("zoomed");
        svg.style.width = full * scale + "px";
        viewport.scrollLeft = centre[0] * (scale / before) - viewport.clientWidth / 2;
        viewport.scrollTop = centre[1] * (scale / before) - viewport.clientHeight / 2;
      }
      show();
    };
    bar.addEventListener("click", (event) => {
      const action = event.target.closest("button")?.dataset.zoom;
      const targets = {in: current() * STEP, out: current() / STEP, full: 1, fit: 0};
      if (action in targets) zoom(targets[action]);
    });
    // Drag to pan with a mouse; touch and pens pan the scrolling window natively.
    viewport.addEventListener("pointerdown", (event) => {
      if (scale === null || event.button !== 0 || event.pointerType !== "mouse") return;
      const start = [event.clientX, event.clientY, viewport.scrollLeft, viewport.scrollTop];
      const move = (moved) => {
        viewport.scrollLeft = start[2] - (moved.clientX - start[0]);
        viewport.scrollTop = start[3] - (moved.clientY - start[1]);
      };
      const stop = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", stop);
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", stop);
      event.preventDefault();
    });
    window.addEventListener("resize", show);
    bar.hidden = false;
    show();
  }
})();
"""
"""The page's one script: zoom buttons and drag-to-pan over each diagram, a few lines and nothing fetched."""


def _html(blocks: list[_Block]) -> str:
    body: list[str] = []
    opened = False
    for block in blocks:
        if isinstance(block, _Heading):
            if block.level <= 2 and opened:
                body.append("</section>")
                opened = False
            if block.level == 2:
                anchor = re.sub(r"[^a-z0-9]+", "-", block.text.lower()).strip("-")
                body.append(f'<section id="{anchor}">')
                opened = True
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, _Paragraph):
            body.append(f"<p>{_html_spans(block.spans)}</p>")
        elif isinstance(block, _Bullets):
            body.append("<ul>" + "".join(f"<li>{_html_spans(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, _Pre):
            body.append(f'<pre class="text"><code>{html.escape(block.text)}</code></pre>')
        elif isinstance(block, _Table):
            body += _html_table(block)
        else:
            name = html.escape(block.machine)
            caption = f"The {name} machine, drawn by {html.escape(_DRAWN_BY[block.drawn_by])}"
            body.append(_html_figure(block, caption))
            body.append(f"<details><summary>Mermaid source</summary><pre><code>{html.escape(block.mermaid)}</code></pre></details>")
    if opened:
        body.append("</section>")
    body.append(f"<script>{_ZOOM_SCRIPT}</script>")
    head = '<meta charset="utf-8">\n<title>shiftchange spec review</title>\n<style>' + _CSS + "</style>"
    return '<!DOCTYPE html>\n<html lang="en">\n<head>\n' + head + "\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"


_XLINK = "{http://www.w3.org/1999/xlink}"
_XML = "{http://www.w3.org/XML/1998/namespace}"
_SVG = "{http://www.w3.org/2000/svg}"
_DROPPED = frozenset({"metadata", "script", "foreignObject"})
"""SVG elements left out of the page: metadata names external vocabularies, and a drawing runs nothing (only the page's zoom does)."""
_REFERENCE = re.compile(r"url\(#([^)]+)\)")


def inline_svg(path: str | Path, prefix: str) -> str:
    """The <svg> element of an SVG file as HTML text: no prolog, DOCTYPE, comments or metadata; every id prefixed by `prefix`.

    References inside the drawing (`href="#id"`, `url(#id)`) follow their ids; an attribute that points anywhere else is dropped.
    """
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise DiagramError(f"cannot inline {path}: {error}") from None
    if root.tag not in (f"{_SVG}svg", "svg"):
        raise DiagramError(f"cannot inline {path}: its root element is {root.tag}, not svg")
    return "".join(_svg_text(root, f"{prefix}-"))


def svg_width_px(path: str | Path) -> float:
    """The width an SVG file asks for, in CSS pixels (1 pt is 4/3 px); its viewBox's width when it names none."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise DiagramError(f"cannot read {path}: {error}") from None
    found = re.fullmatch(r"\s*([0-9.]+)\s*(pt|px)?\s*", root.get("width", ""))
    if found:
        return float(found.group(1)) * (4 / 3 if found.group(2) == "pt" else 1.0)
    box = root.get("viewBox", "").replace(",", " ").split()
    if len(box) != 4:
        raise DiagramError(f"cannot tell how wide {path} is: no width in pt or px and no viewBox")
    return float(box[2])


def _svg_text(element: ElementTree.Element, prefix: str) -> Iterator[str]:
    name = element.tag.removeprefix(_SVG)
    if name.startswith("{") or name in _DROPPED:
        return
    attributes = []
    for key, value in element.attrib.items():
        local = key.removeprefix(_XLINK).removeprefix(_XML)
        if key.startswith("{") and local == key:
            continue  # an attribute of another name space (none that a browser draws)
        if local == "href":
            if not value.startswith("#"):
                continue
            value = f"#{prefix}{value[1:]}"
        elif local == "id":
            value = prefix + value
        value = _REFERENCE.sub(lambda match: f"url(#{prefix}{match.group(1)})", value)
        shown = f"xlink:{local}" if key.startswith(_XLINK) else f"xml:{local}" if key.startswith(_XML) else local
        attributes.append(f' {shown}="{html.escape(value)}"')
    yield f"<{name}{''.join(attributes)}>"
    if element.text:
        yield html.escape(element.text, quote=False)
    for child in element:
        yield from _svg_text(child, prefix)
        if child.tail:
            yield html.escape(child.tail, quote=False)
    yield f"</{name}>"


# ------------------------------------------------------------------ the files


def write_review(
    spec: Spec,
    directory: str | Path,
    renderer: str = "auto",
    coverage: Coverage | None = None,
    results: Sequence[Property] | None = None,
    change: ChangeRun | None = None,
) -> Path:
    """Write review.md, review.html and one SVG per machine into `directory`; returns review.md's path.

    With `coverage`, the transition tables show how often each row fired; a coverage of other rows is refused (CoverageError).
    `results` are the spec's structural properties when the caller has checked them already (`check_spec`), else checked here.
    With `change` (`spec diff --run`), the page opens with the section "What this change does".
    """
    if coverage is not None:
        coverage.check_against(spec)
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DiagramError(f"cannot create {root}: {error.strerror}") from None
    blocks = [*_opening(spec, coverage), *(_change_section(change) if change is not None else []), *_properties(spec, results)]
    for machine in spec.machines.values():
        image = f"{machine.name}.svg"
        drawn_by = render(machine, "svg", root / image, renderer)
        svg = inline_svg(root / image, machine.name)
        figure = _Figure(machine.name, image, svg, to_mermaid(machine), drawn_by, svg_width_px(root / image))
        blocks += _machine_section(machine, figure, coverage)
    blocks += _tables(spec)
    page = root / "review.md"
    _write(page, _markdown(blocks))
    _write(root / "review.html", _html(blocks))
    return page


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise DiagramError(f"cannot write {path}: {error.strerror}") from None
