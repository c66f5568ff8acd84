"""The design-review page: the whole spec as one Markdown document with its diagrams.

A review reads states, rows, failure domains and invariants as tables, sees
each machine drawn (an SVG file beside the page, and the Mermaid source
inline for viewers that render it), and sees the checker's verdict, so
nothing in the page can drift from the files the core runs.
"""

from __future__ import annotations

from pathlib import Path

from .checker import check_spec
from .diagram import DiagramError, render, to_mermaid
from .model import Machine, Spec


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machine_section(machine: Machine, image: str) -> list[str]:
    out = [f"## The {machine.name} machine", "", _cell(machine.description), ""]
    out += [f"Initial state: `{machine.initial}`. Terminal: " + ", ".join(f"`{s}`" for s in machine.terminal_states) + ".", ""]
    out += [f"![{machine.name} machine]({image})", "", "<details><summary>Mermaid source</summary>", "", "```mermaid"]
    out += [to_mermaid(machine).rstrip(), "```", "", "</details>", "", "### States", ""]
    out += ["| state | kind | meaning |", "|---|---|---|"]
    for state in machine.states.values():
        kind = "terminal" if state.terminal else "resting" if state.resting else "dispatchable" if state.dispatchable else ""
        out.append(f"| `{state.name}` | {kind} | {_cell(state.description)} |")
    out += ["", "### Transitions", ""]
    out += ["| # | trigger | from | to | actor | guards | effects | fenced | line |", "|---|---|---|---|---|---|---|---|---|"]
    for row in machine.rows:
        out.append(
            f"| {row.index + 1} | `{row.trigger}` | {', '.join(row.sources)} | {row.dest} | {row.actor} | "
            f"{', '.join(row.guards) or '-'} | {', '.join(row.effects) or '-'} | {'**fenced**' if row.fenced else ''} | {row.where.line} |"
        )
    out += ["", "### Vocabulary", "", "| kind | name | meaning |", "|---|---|---|"]
    for kind, terms in (("trigger", machine.triggers), ("guard", machine.guards), ("effect", machine.effects)):
        for term in terms.values():
            material = " (material)" if term.material else ""
            out.append(f"| {kind} | `{term.name}` | {_cell(term.description)}{material} |")
    return [*out, ""]


def write_review(spec: Spec, directory: str | Path, renderer: str = "auto") -> Path:
    """Write review.md and one SVG per machine into `directory`; returns the page's path."""
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DiagramError(f"cannot create {root}: {error.strerror}") from None
    lines = ["# shiftchange spec review", "", f"Generated from `{spec.directory}` by `shiftchange spec review`.", ""]
    lines += ["## Structural properties", "", "| property | verdict | what it means |", "|---|---|---|"]
    results = check_spec(spec)
    for result in results:
        lines.append(f"| `{result.name}` | {'PASS' if result.ok else '**FAIL**'} | {_cell(result.summary)} |")
    for result in results:
        for witness in result.witness:
            lines.append(f"- `{result.name}` witness: {_cell(witness)}")
    lines.append("")
    for machine in spec.machines.values():
        image = f"{machine.name}.svg"
        render(machine, "svg", root / image, renderer)
        lines += _machine_section(machine, image)
    lines += ["## Failure domains", "", "| domain | response | automatic retries | changed hypothesis | blast radius | meaning |"]
    lines.append("|---|---|---|---|---|---|")
    for domain in spec.domains.values():
        hypothesis = "required" if domain.changed_hypothesis_required else "no"
        lines.append(
            f"| `{domain.name}` | {domain.response} | {domain.retries_max} | {hypothesis} | "
            f"{_cell(domain.blast_radius)} | {_cell(domain.description)} |"
        )
    lines += ["", "## Invariants", "", "| invariant | what must hold |", "|---|---|"]
    for invariant in spec.invariants.values():
        lines.append(f"| `{invariant.name}` | {_cell(invariant.statement)} |")
    page = root / "review.md"
    try:
        page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError as error:
        raise DiagramError(f"cannot write {page}: {error.strerror}") from None
    return page
