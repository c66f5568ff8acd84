"""The mutation analysis as one self-contained HTML page, beside the review page: score, kinds, checks, rows, survivors, kills.

Every figure is read from the `MutationReport` the text and `--json` are
made of, so the three cannot disagree. The page needs nothing else (inline
style, no script), and every string from the spec is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from .mutate import MutationReport, percent

__all__ = ["write_mutation_page"]

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
main { max-width: 1400px; margin: 0 auto; padding: 16px 24px 48px; }
section { background: #fff; border: 1px solid #e4e4e4; border-radius: 6px; padding: 4px 16px 16px; margin: 16px 0; overflow-x: auto; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
table { border-collapse: collapse; }
th, td { text-align: left; vertical-align: top; padding: 3px 12px 3px 0; border-bottom: 1px solid #f0f0f0; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
.score { font-size: 1.3em; font-weight: 600; }
tr.weak td { color: #b2182b; }
code { font-size: 0.95em; overflow-wrap: anywhere; }
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name in header)
    body = []
    for number, row in enumerate(rows):
        css = f' class="{classes[number]}"' if number < len(classes) and classes[number] else ""
        body.append(f"<tr{css}>" + "".join(row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cell(value: object, code: bool = False, number: bool = False) -> str:
    text = f"<code>{_e(value)}</code>" if code else _e(value)
    return f'<td class="number">{text}</td>' if number else f"<td>{text}</td>"


def render(report: MutationReport) -> str:
    total, killed = len(report.results), len(report.killed)
    facts = [f"<li>{_e(line)}</li>" for line in report.scale.lines()]
    facts.append(f"<li>{total:,} mutants, {report.executor} ({report.processes}), {report.elapsed_s:,.1f} s in all</li>")
    opening = (
        f"<h1>Mutation analysis of <code>{_e(report.label)}</code></h1>"
        f"<p>digest <code>{_e(report.digest)}</code>; kinds {_e(', '.join(report.kinds))}</p>"
        f'<p class="score">mutation score: {killed:,} of {total:,} killed ({_e(percent(killed, total))})</p>'
        f"<ul>{''.join(facts)}</ul>"
    )
    kinds = [
        [_cell(kind, code=True), _cell(dead, number=True), _cell(count, number=True), _cell(percent(dead, count), number=True)]
        for kind, (dead, count) in report.per_kind().items()
    ]
    checks = [
        [
            _cell(check),
            _cell(f"{spent['mutants']:,}", number=True),
            _cell(f"{spent['runs']:,}", number=True),
            _cell(f"{spent['elapsed_s']:,.1f}", number=True),
            _cell(f"{spent['killed']:,}", number=True),
        ]
        for check, spent in report.per_check().items()
    ]
    rows = []
    weak = []
    for result_key, (dead, count) in report.per_row().items():
        machine, row = result_key
        first = next(r.mutant for r in report.results if (r.mutant.machine, r.mutant.row) == result_key)
        rows.append(
            [
                _cell(f"{machine} {row}"),
                _cell(first.row_text, code=True),
                _cell(first.where, code=True),
                _cell(dead, number=True),
                _cell(count, number=True),
                _cell(percent(dead, count), number=True),
            ]
        )
        weak.append("weak" if dead < count else "")
    survivors = [
        [
            _cell(f"{r.mutant.machine} {r.mutant.row}"),
            _cell(r.mutant.where, code=True),
            _cell(r.mutant.row_text, code=True),
            _cell(r.mutant.change),
            _cell(report.reading(r)),
            _cell(r.folder or "", code=True),
        ]
        for r in report.survivors
    ]
    kills = [
        [
            _cell(r.mutant.id, code=True),
            _cell(r.mutant.change),
            _cell(r.check),
            _cell(r.invariant, code=True),
            _cell(r.replay[0] if r.replay else "", code=True),
        ]
        for r in report.killed
    ]
    sections = [
        f"<section>{opening}</section>",
        "<section><h2>per kind</h2>" + _table(("kind", "killed", "mutants", "score"), kinds) + "</section>",
        "<section><h2>per check</h2><p>cheapest first; each mutant runs until the first check that kills it.</p>"
        + _table(("check", "mutants", "runs", "seconds", "killed"), checks)
        + "</section>",
        f"<section><h2>survivors ({len(survivors)})</h2>"
        + (_table(("row", "where", "base row", "change", "reading", "spec"), survivors) if survivors else "<p>none</p>")
        + "</section>",
        "<section><h2>per row</h2>" + _table(("row", "base row", "where", "killed", "mutants", "score"), rows, weak) + "</section>",
        f"<section><h2>killed ({len(kills)})</h2>" + _table(("mutant", "change", "check", "invariant", "replay"), kills) + "</section>",
    ]
    head = f'<meta charset="utf-8">\n<title>shiftchange spec mutate</title>\n<style>{_STYLE}</style>'
    body = "\n".join(sections)
    return f'<!DOCTYPE html>\n<html lang="en">\n<head>\n{head}\n</head>\n<body><main>\n{body}\n</main></body>\n</html>\n'


def write_mutation_page(report: MutationReport, path: str | Path) -> Path:
    """Write the page to `path` (its folder made if missing); an OSError says why it could not."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(report), encoding="utf-8")
    return target
