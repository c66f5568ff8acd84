"""The review page fits a screen (issue 26, item 2): each diagram is whole at the page's first zoom, and its controls work.

Checked in a real headless Chromium (`tests/browser.py`) at 1,280 and 1,920 px,
for every renderer this machine has: every state's box lies inside the
window's width and inside its figure's visible window, the zoom buttons scale
the drawing and say by how much, a mouse drag pans it, and the page raises no
error. Beside them, without a browser: the highlights of a proposed change
(`spec diff --diagram`) stand out from the page (3:1) while any text on a
highlight's fill stays readable (4.5:1), measured on the colours the SVG and
the page's CSS actually use; and no absolute path reaches the page.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

import shiftchange
from shiftchange.cli.main import main
from shiftchange.spec import load_spec
from shiftchange.spec.diagram import Marks, render
from tests.browser import inspect

SPEC = load_spec()
WIDTHS_PX = (1280, 1920)
HIGHLIGHT_CONTRAST_MIN = 3.0
"""WCAG 2.1 SC 1.4.11: a graphical object a reader needs (the mark of a changed row) against what is next to it."""
TEXT_CONTRAST_MIN = 4.5
"""WCAG 2.1 SC 1.4.3: normal-size text against its background."""
RENDERERS = ["matplotlib", pytest.param("graphviz", marks=pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed"))]
MARKED = Marks(added=frozenset({0}), changed=frozenset({13, 1}), removed=(SPEC.attempt.rows[4],))
"""Row 1 (admit) added, rows 14 (complete, between states) and 2 (defer, in place) changed, old row 5 (claim) removed."""


@pytest.fixture(scope="module", params=RENDERERS)
def reviewed(request, tmp_path_factory) -> tuple[str, Path]:
    """The renderer, and review.html as `spec review` writes it with that renderer."""
    folder = tmp_path_factory.mktemp(f"review-{request.param}")
    assert main(["spec", "review", "-o", str(folder), "--renderer", request.param]) == 0
    return request.param, folder / "review.html"


# ------------------------------------------------------------------ in the browser

BOXES = """
const inside = (box, frame) => box.left >= frame.left - 0.5 && box.right <= frame.right + 0.5
  && box.top >= frame.top - 0.5 && box.bottom <= frame.bottom + 0.5;
function boxes() {
  const found = {};
  for (const figure of document.querySelectorAll("figure.diagram")) {
    const machine = figure.dataset.machine;
    const frame = (figure.querySelector(".viewport") || figure).getBoundingClientRect();
    const svg = figure.querySelector("svg").getBoundingClientRect();
    const states = {};
    for (const box of figure.querySelectorAll(`[id^="${machine}-state-"]`)) {
      const rect = box.getBoundingClientRect();
      states[box.id.slice(machine.length + 7)] = {
        in_window: rect.left >= 0 && rect.right <= window.innerWidth,
        in_figure: inside(rect, frame),
      };
    }
    found[machine] = {
      states: states,
      frame_right: frame.right,
      svg_width: svg.width,
      svg_height: svg.height,
      frame_height: frame.height,
      full_width: Number(figure.dataset.widthPx),
      said: figure.querySelector(".zoom output")?.value,
      toolbar_shown: figure.querySelector(".zoom")?.hidden === false,
    };
  }
  return found;
}
"""

INITIAL = BOXES + "window.verdict = {window: window.innerWidth, diagrams: boxes()};"


@pytest.mark.heavy
@pytest.mark.parametrize("width", WIDTHS_PX)
def test_every_state_box_is_in_view_at_the_page_first_zoom(reviewed, tmp_path, width):
    """Goal: a reviewer sees every state of each machine without scrolling sideways, and is told how far the drawing shrank."""
    _renderer, page = reviewed
    result = inspect(page, INITIAL, tmp_path, width=width)
    assert result["errors"] == []
    verdict = result["verdict"]
    for machine in SPEC.machines.values():
        shown = verdict["diagrams"][machine.name]
        assert sorted(shown["states"]) == sorted(machine.states), "every state's box must be findable by its id"
        hidden = {name: where for name, where in shown["states"].items() if not (where["in_window"] and where["in_figure"])}
        assert hidden == {}, f"{machine.name} at {width} px: states outside the view at first zoom"
        assert shown["frame_right"] <= verdict["window"]
        scale = shown["svg_width"] / shown["full_width"]
        assert 0.3 < scale <= 1.0, f"{machine.name} at {width} px drawn at {scale:.2f} of its size: too small to read"
        assert shown["toolbar_shown"] and shown["said"] == f"{round(100 * scale)}% of full size"


ZOOM = (
    BOXES
    + """
const figure = document.querySelector('figure.diagram[data-machine="attempt"]');
const viewport = figure.querySelector(".viewport");
const click = (action) => figure.querySelector(`button[data-zoom="${action}"]`).click();
const steps = {fitted: boxes().attempt};
click("in");
steps.zoomed_in = boxes().attempt;
const before = [viewport.scrollLeft, viewport.scrollTop];
const at = {clientX: 600, clientY: 500, button: 0, pointerType: "mouse", bubbles: true};
viewport.dispatchEvent(new PointerEvent("pointerdown", at));
window.dispatchEvent(new PointerEvent("pointermove", {...at, clientX: 500, clientY: 450}));
window.dispatchEvent(new PointerEvent("pointerup", {...at, clientX: 500, clientY: 450}));
window.dispatchEvent(new PointerEvent("pointermove", {...at, clientX: 100, clientY: 100}));
steps.dragged = [viewport.scrollLeft - before[0], viewport.scrollTop - before[1]];
click("full");
steps.full = boxes().attempt;
// Pan to each state in turn (as a drag would, by scrolling the window) and see whether it then lies in the figure.
steps.reached = {};
for (const box of figure.querySelectorAll('[id^="attempt-state-"]')) {
  const frame = viewport.getBoundingClientRect();
  const rect = box.getBoundingClientRect();
  viewport.scrollLeft += rect.left - frame.left - (frame.width - rect.width) / 2;
  viewport.scrollTop += rect.top - frame.top - (frame.height - rect.height) / 2;
  steps.reached[box.id] = inside(box.getBoundingClientRect(), viewport.getBoundingClientRect());
}
click("out");
steps.out = boxes().attempt;
click("fit");
steps.refitted = boxes().attempt;
window.verdict = steps;
"""
)


@pytest.mark.heavy
def test_the_zoom_buttons_scale_the_drawing_and_a_drag_pans_it(reviewed, tmp_path):
    """Goal: a reader who finds the fitted labels small can enlarge them, move round the enlarged drawing, and come back."""
    _renderer, page = reviewed
    result = inspect(page, ZOOM, tmp_path, width=1280)
    assert result["errors"] == []
    steps = result["verdict"]
    fitted, zoomed, full = steps["fitted"], steps["zoomed_in"], steps["full"]
    assert zoomed["svg_width"] == pytest.approx(1.25 * fitted["svg_width"], rel=0.01)
    assert zoomed["frame_height"] == pytest.approx(fitted["frame_height"], abs=1), "zooming pans inside the figure, the page stays"
    assert zoomed["said"] != fitted["said"]
    # The drag moved the drawing with the mouse (100 px left, 50 px up), and stopped when the button was released.
    assert steps["dragged"] == [100, 50]
    assert full["svg_width"] == pytest.approx(full["full_width"], abs=1) and full["said"] == "100% of full size"
    assert not all(where["in_figure"] for where in full["states"].values()), "at full size the attempt machine is wider than 1,280 px"
    assert len(steps["reached"]) == len(SPEC.attempt.states) and all(steps["reached"].values()), steps["reached"]
    assert steps["out"]["svg_width"] == pytest.approx(full["full_width"] / 1.25, abs=1)
    assert steps["refitted"] == fitted


# ------------------------------------------------------------------ colours

_NAMED = {"white": "#ffffff", "black": "#000000"}


def _luminance(colour: str) -> float:
    """WCAG 2.1's relative luminance of an sRGB colour `#rrggbb`."""
    colour = _NAMED.get(colour, colour)
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", colour), f"not a colour this test reads: {colour!r}"
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    lighter, darker = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_the_contrast_ratio_is_wcag_s():
    """The ratio itself, on known pairs: black on white 21:1, a colour on itself 1:1, #777777 on white about 4.48:1."""
    assert contrast("#000000", "white") == pytest.approx(21.0)
    assert contrast("#a5d6a7", "#a5d6a7") == pytest.approx(1.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)


def _style(element: ElementTree.Element, name: str) -> str | None:
    """A presentation value, from the element's attribute or its style (matplotlib writes style, Graphviz attributes)."""
    found = re.search(rf"(?:^|;)\s*{name}:\s*([^;]+)", element.get("style", ""))
    return found.group(1).strip() if found else element.get(name)


def _local(element: ElementTree.Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def _page_background(page: Path) -> str:
    """The background review.html's CSS gives its body; a browser's default, white, when it names none."""
    found = re.search(r"body \{[^}]*background: (#[0-9a-fA-F]{6})", page.read_text())
    return found.group(1) if found else "#ffffff"


def _matplotlib_pairs(root: ElementTree.Element) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(what, colour, background) for highlight marks and for label texts of a matplotlib drawing."""
    background = _style(root.find(".//*[@id='patch_1']/*"), "fill")
    marks, texts = [], []
    for group in root.iter():
        gid = group.get("id", "")
        if (re.match(r"(added|changed)-attempt-", gid) and "-casing-" not in gid) or re.match(r"attempt-old-row-", gid):
            marks += [(gid, _style(path, "stroke"), background) for path in group if _local(path) == "path"]
        elif gid.startswith(("label-", "loop-")):
            patch = group.find("./*[@id]/*")
            fill = _style(patch, "fill") if patch is not None else None
            behind = background if fill in (None, "none") else fill
            if fill not in (None, "none"):
                outline = _style(patch, "stroke")
                marks.append((f"{gid} outline", fill if outline in (None, "none") else outline, background))
            texts += [(gid, _style(glyphs, "fill"), behind) for glyphs in group if _local(glyphs) == "g" and _style(glyphs, "fill")]
    return marks, texts


def _graphviz_pairs(root: ElementTree.Element) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(what, colour, background) for highlight marks and texts of a Graphviz drawing: marked edges, and the legend's cells."""
    graph = root.find("./*")
    background = next(_style(child, "fill") for child in graph if _local(child) == "polygon")
    marks, texts = [], []
    for group in root.iter():
        kind = group.get("class", "")
        if kind.startswith("edge ") and kind.split()[1] in ("added", "changed", "removed"):
            text = next(child for child in group if _local(child) == "text")
            strokes = {_style(child, "stroke") for child in group if _local(child) == "path"}
            # A highlighted edge is its actor's line between two highlight lines; a removed one is the ghost's line alone.
            strokes -= set() if kind.endswith("removed") else {_style(text, "fill")}
            marks += [(f"{group.get('id')} {kind}", stroke, background) for stroke in sorted(strokes)]
            texts.append((group.get("id"), _style(text, "fill"), background))
        if kind == "node" and group.findtext("./{*}title") == "legend":
            behind = background
            for child in group:
                if _local(child) == "polygon" and _style(child, "fill") not in ("none", None):
                    behind = _style(child, "fill")
                elif _local(child) == "polygon" and _style(child, "stroke") not in ("transparent", None):
                    marks.append(("legend cell border", _style(child, "stroke"), background))
                elif _local(child) == "text":
                    texts.append((f"legend {child.text}", _style(child, "fill") or "#000000", behind))
                    behind = background
    return marks, texts


def test_highlights_stand_out_from_the_page_and_text_on_them_stays_readable(reviewed, tmp_path):
    """Goal: a reviewer can see which rows a change touched (3:1 against the page) and still read their labels (4.5:1).

    Measured on what was drawn: the strokes, fills and text colours the SVG of `spec diff --diagram` holds, and the
    background review.html's CSS names and the drawing paints.
    """
    renderer, page = reviewed
    drawing = tmp_path / "change.svg"
    assert render(SPEC.attempt, "svg", drawing, renderer, marks=MARKED) == renderer
    root = ElementTree.parse(drawing).getroot()
    marks, texts = _matplotlib_pairs(root) if renderer == "matplotlib" else _graphviz_pairs(root)
    assert len(marks) >= 4 and any(background != "#ffffff" for _what, _colour, background in texts), "found no highlight to measure"
    page_background = _page_background(page)
    measured = [(what, colour, behind, contrast(colour, behind)) for what, colour, behind in marks]
    measured += [(what, colour, page_background, contrast(colour, page_background)) for what, colour, _behind in marks]
    weak = [(what, colour, behind, round(ratio, 2)) for what, colour, behind, ratio in measured if ratio < HIGHLIGHT_CONTRAST_MIN]
    assert weak == [], f"highlights under {HIGHLIGHT_CONTRAST_MIN}:1"
    read = [(what, colour, behind, round(contrast(colour, behind), 2)) for what, colour, behind in texts]
    unreadable = [entry for entry in read if entry[3] < TEXT_CONTRAST_MIN]
    assert unreadable == [], f"text under {TEXT_CONTRAST_MIN}:1 against what it is drawn on"


# ------------------------------------------------------------------ paths


def _broken_copy(folder: Path) -> Path:
    """The packaged spec copied, with one state no row reaches: attempt.reachable fails and its witness names a file."""
    copy = folder / "proposal"
    shutil.copytree(SPEC.directory, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    with (copy / "attempt.toml").open("a") as toml:
        toml.write('\n[states.orphan]\ndescription = "No row enters it."\n')
    return copy


def test_no_absolute_path_reaches_the_page(tmp_path):
    """Goal: a page mailed or attached to a ticket names files by their names, never by where they sat on the author's machine."""
    spec = _broken_copy(tmp_path)
    coverage = tmp_path / "coverage.json"
    assert main(["sim", "run", "--seed", "1", "--tasks", "10", "--coverage", str(coverage)]) == 0
    review = ["spec", "review", "--spec", str(spec), "-o", str(tmp_path / "page"), "--renderer", "matplotlib"]
    assert main([*review, "--coverage", str(coverage)]) == 1  # the orphan fails properties: the page is written, status 1
    page = (tmp_path / "page" / "review.html").read_text()
    assert "unreachable: orphan (" in page, "the witness must be on the page, so its path is checked"
    package = Path(shiftchange.__file__).resolve().parent
    places = {tmp_path, tmp_path.resolve(), package, package.parent, Path(SPEC.directory).resolve(), Path.home(), Path.cwd()}
    for path in places - {Path("/")}:
        assert str(path) not in page, f"{path} appears in the page"
    assert "file:" not in page
