"""review.html is one self-contained page: checked as text here, and in a real headless Chromium's DOM.

The browser test runs a small script of its own (never the product's) in the
page through `tests/browser.py`, which inspects the laid-out DOM: each
machine's inline SVG has a non-zero box, nothing points outside the page and
the browser fetched nothing, the page's one script is inline, and the fired
column marks exactly the rows the coverage file says never fired. Without
Chromium the test skips with one line saying how to install it. Whether the
diagrams fit the window is `test_review_fit.py`'s.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.spec import load_spec
from shiftchange.spec.review import inline_svg
from tests.browser import inspect

SPEC = load_spec()

CHECK = """
(() => {
  const verdict = {diagrams: {}, external: [], tables: {}};
  for (const figure of document.querySelectorAll("figure.diagram")) {
    const svg = figure.querySelector(":scope > .viewport > svg");
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    verdict.diagrams[figure.dataset.machine] = {present: !!svg, width: box.width, height: box.height};
  }
  const pointers = ["src", "href", "xlink:href", "srcset", "poster", "action", "data", "background"];
  for (const element of document.querySelectorAll("*")) {
    for (const attribute of element.attributes) {
      const value = attribute.value.trim();
      const named = element.tagName + " " + attribute.name + "=" + value;
      if (pointers.includes(attribute.name.toLowerCase()) && !value.startsWith("#")) verdict.external.push(named);
      if (/url\\(\\s*['"]?(?!#)/i.test(value)) verdict.external.push(named);
    }
  }
  for (const style of document.querySelectorAll("style")) {
    if (/url\\(\\s*['"]?(?!#)|@import/i.test(style.textContent)) verdict.external.push("a style sheet loads something");
  }
  verdict.embedders = document.querySelectorAll("link, img, iframe, object, embed, video, audio, source, image").length;
  verdict.outside_scripts = document.querySelectorAll("script[src]").length;
  verdict.fetched = performance.getEntriesByType("resource").map((entry) => entry.name);
  for (const table of document.querySelectorAll("table.transitions")) {
    const header = [...table.tHead.rows[0].cells].map((cell) => cell.textContent);
    const fired = header.indexOf("fired");
    verdict.tables[table.dataset.machine] = {
      fired: fired,
      rows: [...table.tBodies[0].rows].map((row) => ({
        number: Number(row.cells[0].textContent),
        cell: fired < 0 ? null : row.cells[fired].textContent,
        marked: row.classList.contains("never"),
        background: getComputedStyle(row.cells[0]).backgroundColor,
      })),
    };
  }
  window.verdict = verdict;
})();
"""


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory) -> tuple[Path, dict]:
    """A review with coverage from a small real run: the folder and the coverage file's contents."""
    root = tmp_path_factory.mktemp("review")
    coverage = root / "coverage.json"
    assert main(["sim", "run", "--scenario", "mixed", "--seed", "1", "--tasks", "30", "--coverage", str(coverage)]) == 0
    assert main(["spec", "review", "-o", str(root / "page"), "--renderer", "matplotlib", "--coverage", str(coverage)]) == 0
    return root / "page", json.loads(coverage.read_text())


class _Pointers(HTMLParser):
    """Every tag, and every attribute that could point at another resource, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.pointers: list[tuple[str, str, str]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_script = tag == "script"
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "srcset", "action", "data") or "url(" in (value or ""):
                self.pointers.append((tag, name, value or ""))

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)
            self._in_script = False


def test_the_html_page_is_one_file_with_nothing_outside_it(reviewed):
    """One inline script (the zoom) that loads nothing, no link, no image file; references only to ids inside the page; no SVG prolog."""
    folder, _ = reviewed
    page = (folder / "review.html").read_text()
    parser = _Pointers()
    parser.feed(page)
    assert parser.tags.count("svg") == len(SPEC.machines)
    assert not {"link", "img", "iframe", "object", "embed", "image"} & set(parser.tags)
    (script,) = parser.scripts
    assert parser.tags.count("script") == 1 and not re.search(r"fetch\(|XMLHttpRequest|import|src\b|eval\(", script)
    assert all(value.startswith("#") or "url(#" in value for _tag, _name, value in parser.pointers), parser.pointers
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page and "http" not in page
    for name in SPEC.machines:
        (drawing,) = re.findall(rf'<figure class="diagram" data-machine="{name}"[^>]*>(.*?)</figure>', page, re.DOTALL)
        ids = re.findall(r' id="([^"]+)"', drawing)
        assert ids and all(i.startswith(f"{name}-") for i in ids), "an id of one drawing could be another's"


def test_the_html_page_says_what_the_markdown_page_says(reviewed):
    """The same tables, row for row: every transitions row and every never-fired marker of review.md is in review.html."""
    folder, data = reviewed
    page = (folder / "review.html").read_text()
    assert page.count('<tr class="never">') == sum(1 for m in data["machines"].values() for row in m["rows"] if row["fired"] == 0)
    assert "Row numbers (#) are the numbers the diagram labels its edges with (trigger #N)." in page
    for machine in SPEC.machines.values():
        assert f'<table class="transitions" data-machine="{machine.name}">' in page
        assert html.escape(machine.description) in page


def test_an_svg_is_inlined_without_prolog_metadata_or_outside_references(tmp_path):
    """A Graphviz-style file: DOCTYPE, comments and metadata go; ids and their references take the prefix; an outside link goes."""
    drawing = tmp_path / "drawing.svg"
    drawing.write_text(
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
        "<!-- Generated by graphviz -->\n"
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="80pt" height="40pt">'
        "<metadata><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'/></metadata>"
        '<defs><clipPath id="c1"><rect width="8" height="8"/></clipPath></defs>'
        '<g id="node1" clip-path="url(#c1)"><title>a &lt; b</title><use xlink:href="#c1"/>'
        '<a xlink:href="https://example.org/"><text>x &amp; y</text></a></g></svg>'
    )
    inlined = inline_svg(drawing, "task")
    assert inlined.startswith('<svg width="80pt" height="40pt">')
    assert "http" not in inlined and "metadata" not in inlined and "Generated" not in inlined
    assert '<clipPath id="task-c1">' in inlined and 'clip-path="url(#task-c1)"' in inlined and 'xlink:href="#task-c1"' in inlined
    assert "<title>a &lt; b</title>" in inlined and "<text>x &amp; y</text>" in inlined


@pytest.mark.heavy
def test_chromium_lays_out_each_diagram_and_marks_the_rows_never_fired(reviewed, tmp_path):
    """In a real browser: each machine's SVG has a box, nothing outside the page is referenced or fetched, and never is marked."""
    folder, data = reviewed
    result = inspect(folder / "review.html", CHECK, tmp_path)
    assert result["errors"] == []
    verdict = result["verdict"]
    for name in SPEC.machines:
        box = verdict["diagrams"][name]
        assert box["present"] and box["width"] > 100 and box["height"] > 100, (name, box)
    assert verdict["external"] == [] and verdict["fetched"] == []
    assert (verdict["embedders"], verdict["outside_scripts"]) == (0, 0)
    for name, machine in data["machines"].items():
        table = verdict["tables"][name]
        assert table["fired"] >= 0
        expected = {row["row"]: row["fired"] for row in machine["rows"]}
        shown = {row["number"]: row for row in table["rows"]}
        assert set(shown) == set(expected)
        for number, count in expected.items():
            assert shown[number]["marked"] == (count == 0), (name, number)
            assert shown[number]["cell"] == (f"{count:,}" if count else "never"), (name, number)
        backgrounds = {row["marked"]: row["background"] for row in table["rows"]}
        assert backgrounds[True] != backgrounds[False], "a never-fired row must look different"
