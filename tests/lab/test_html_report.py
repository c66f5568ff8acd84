"""The run report page (`lab.report.html`): one self-contained file that says what the JSON report says.

Checked as text (nothing outside the file, every string escaped, the same
verdicts and metrics as report.json, each timeline holding exactly its
task's events) and in a real headless Chromium through `tests/browser.py`:
every section laid out with a non-zero box at 1280 and 1920 px, nothing
fetched, no console error, and the task picker showing another task's
timeline when it changes. Without Chromium the browser tests skip with one
line saying how to install it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.lab.report.html import SIM_PANELS, TimelineSink, headline, render, sim_page
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play
from tests.browser import inspect

SECTIONS = ("summary", "invariants", "metrics", "series", "faults", "timeline")

CHECK = (
    f"const SECTIONS = {json.dumps(SECTIONS)};\n"
    + """
(() => {
  const verdict = {sections: {}, external: []};
  for (const id of SECTIONS) {
    const element = document.getElementById(id);
    const box = element === null ? {width: 0, height: 0} : element.getBoundingClientRect();
    verdict.sections[id] = {present: element !== null, width: box.width, height: box.height};
  }
  verdict.charts = [...document.querySelectorAll("figure.panel svg")].map((svg) => {
    const box = svg.getBoundingClientRect();
    return [box.width, box.height];
  });
  verdict.faults_shaded = document.querySelectorAll("svg rect.fault").length;
  const pointers = ["src", "href", "xlink:href", "srcset", "poster", "action", "data", "background"];
  for (const element of document.querySelectorAll("*")) {
    for (const attribute of element.attributes) {
      const named = element.tagName + " " + attribute.name + "=" + attribute.value;
      if (pointers.includes(attribute.name.toLowerCase())) verdict.external.push(named);
      if (/url\\(/i.test(attribute.value)) verdict.external.push(named);
    }
  }
  verdict.embedders = document.querySelectorAll("link, img, iframe, object, embed, video, audio, source, image").length;
  verdict.fetched = performance.getEntriesByType("resource").map((entry) => entry.name);
  verdict.page_width = document.documentElement.scrollWidth;
  verdict.window_width = window.innerWidth;
  const picker = document.getElementById("task-picker");
  const shown = () => [...document.querySelectorAll(".task-timeline")]
    .filter((view) => view.getBoundingClientRect().height > 0)
    .map((view) => ({task: view.dataset.task, heading: view.querySelector("h3").textContent}));
  verdict.options = [...picker.options].map((option) => option.value);
  verdict.before = {value: picker.value, shown: shown()};
  const other = verdict.options.find((value) => value !== picker.value);
  picker.value = other;
  picker.dispatchEvent(new Event("change"));
  verdict.after = {value: picker.value, shown: shown()};
  window.verdict = verdict;
})();
"""
)


def assert_page_in_browser(page: Path, tmp: Path, width: int, shaded: int) -> dict:
    """Load the page at `width` px and check what a person sees; returns the verdict for checks of the caller's own."""
    seen = inspect(page, CHECK, tmp, width=width)
    assert seen["errors"] == [], seen["errors"]
    verdict = seen["verdict"]
    for section, box in verdict["sections"].items():
        assert box["present"] and box["width"] > 0 and box["height"] > 0, (width, section, box)
    assert verdict["charts"] and all(w > 0 and h > 0 for w, h in verdict["charts"]), verdict["charts"]
    assert verdict["faults_shaded"] == shaded
    assert verdict["external"] == [] and verdict["embedders"] == 0 and verdict["fetched"] == []
    assert verdict["page_width"] <= verdict["window_width"], "the page scrolls sideways"
    before, after = verdict["before"], verdict["after"]
    assert [view["task"] for view in before["shown"]] == [before["value"]], before
    assert after["value"] != before["value"] and [view["task"] for view in after["shown"]] == [after["value"]], after
    assert after["value"] in after["shown"][0]["heading"] and after["shown"][0]["heading"] != before["shown"][0]["heading"]
    return verdict


class _Page(HTMLParser):
    """What the text of a page holds: tags, pointer attributes, scripts, and the invariant and metric rows with their values."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.pointers: list[tuple[str, str, str]] = []
        self.scripts: list[str] = []
        self.statuses: dict[str, str] = {}
        self.metrics: list[str] = []
        self.tasks: list[str] = []
        self.options: list[str] = []
        self.policy = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_script = tag == "script"
        found = {name: value or "" for name, value in attrs}
        for name, value in found.items():
            if name in ("src", "href", "xlink:href", "srcset", "action", "data", "poster") or "url(" in value:
                self.pointers.append((tag, name, value))
        if "data-invariant" in found:
            self.statuses[found["data-invariant"]] = found["data-status"]
        if "data-metric" in found:
            self.metrics.append(found["data-metric"])
        if "data-task" in found:
            self.tasks.append(found["data-task"])
        if tag == "option":
            self.options.append(found["value"])
        if found.get("http-equiv") == "Content-Security-Policy":
            self.policy = found["content"]

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)
            self._in_script = False


def parsed(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    """The artifacts folder of a small real run with two faults played (report.json beside report.html)."""
    folder = tmp_path_factory.mktemp("report") / "run"
    assert main(["sim", "run", "--scenario", "mixed", "--seed", "1", "--tasks", "30", "--artifacts", str(folder)]) == 0
    return folder


def test_the_page_is_one_file_with_nothing_outside_it(artifacts):
    """Goal: no link, image, frame or outside script; no attribute points anywhere; the one script fetches nothing; a policy
    forbids loads."""
    text = (artifacts / "report.html").read_text()
    page = parsed(text)
    assert not {"link", "img", "iframe", "object", "embed", "image", "video", "audio", "source"} & set(page.tags)
    assert page.pointers == []
    (script,) = page.scripts
    assert page.tags.count("script") == 1 and not re.search(r"fetch\(|XMLHttpRequest|import|\bsrc\b|eval\(|innerHTML", script)
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import", text, re.IGNORECASE)
    assert page.policy.startswith("default-src 'none';") and "http" not in page.policy
    assert text.count("<head>") == 1 and text.count("</body>") == 1
    assert page.tags.count("svg") == len(SIM_PANELS)


def test_the_page_shows_the_verdicts_and_metrics_of_the_json_report(artifacts):
    """Goal: the invariant verdicts and the metric names on the page are exactly report.json's, in its order."""
    report = json.loads((artifacts / "report.json").read_text())
    page = parsed((artifacts / "report.html").read_text())
    assert page.statuses == {name: verdict["status"] for name, verdict in report["invariants"].items()}
    assert list(page.statuses) == list(report["invariants"])
    assert page.metrics == list(report["metrics"])
    assert len(page.tasks) == report["tasks"] == len(page.options), "every task of a 30-task run has its timeline"


def test_each_timeline_holds_exactly_its_tasks_events_from_the_history(artifacts):
    """Goal: a timeline is built from the history the run wrote, every event of its task and no other (by sequence number)."""
    events: dict[str, list[int]] = {}
    for line in (artifacts / "history.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["type"] == "event":
            events.setdefault(entry["task_id"], []).append(entry["seq"])
    sink = TimelineSink()
    play(scenario_config("mixed", 1, 30), 1, "mixed", history_sink=sink)
    assert len(sink.timelines) == 30
    for timeline in sink.timelines:
        shown = [action.seq for action in timeline.task_actions]
        shown += [action.seq for attempt in timeline.attempts for action in attempt.actions]
        assert sorted(shown) == events[timeline.task_id], timeline.task_id


def test_a_full_page_keeps_the_tasks_worth_opening():
    """Goal: with room for five timelines, the kept ones are tasks not done or with more than one Attempt, and the note says 5 of 30."""
    every, five = TimelineSink(), TimelineSink(tasks_max=5)
    play(scenario_config("mixed", 1, 30), 1, "mixed", history_sink=every)
    play(scenario_config("mixed", 1, 30), 1, "mixed", history_sink=five)
    worth = {timeline.task_id for timeline in every.timelines if timeline.state != "done" or len(timeline.attempts) > 1}
    assert len(worth) >= 5, "the run must have five notable tasks for this test to mean anything"
    first_five = sorted(timeline.task_id for timeline in every.timelines)[:5]
    assert not set(first_five) <= worth, "and its first tasks must not all be notable, or keeping the first would pass too"
    kept = five.timelines
    assert len(kept) == 5 and {timeline.task_id for timeline in kept} <= worth
    assert five.note().startswith("5 of 30 tasks' timelines")


def test_every_string_from_the_run_is_escaped(artifacts):
    """Goal: markup in a verdict's evidence, a scenario name or a task id stays text: one script, one </body>, the id read back whole."""
    report = json.loads((artifacts / "report.json").read_text())
    hostile = '<script>alert("x")</script></body><img src=x>'
    report["scenario"] = hostile
    report["ok"] = False
    report["invariants"]["single_owner"] = {"ok": False, "status": "violated", "violations": 2, "example": [hostile, "second line"]}
    sink = TimelineSink()
    play(scenario_config("mixed", 1, 30), 1, "mixed", history_sink=sink)
    first = dataclasses.replace(sink.timelines[0], task_id=f'"{hostile}')
    page_value = sim_page(report, [], None)
    page_value = dataclasses.replace(page_value, timelines=(first, *sink.timelines[1:3]))
    text = render(page_value)
    page = parsed(text)
    assert page.tags.count("script") == 1 and "img" not in page.tags
    assert text.count("</body>") == 1 and text.count("<head>") == 1
    assert page.statuses["single_owner"] == "violated"
    assert f'"{hostile}' in page.tasks and f'"{hostile}' in page.options
    assert 'class="verdict fail"' in text and "1 violated" in text
    assert "No series was recorded" in text


@pytest.mark.heavy
@pytest.mark.parametrize("width", [1280, 1920])
def test_the_page_renders_every_section_and_the_picker_switches_timelines(artifacts, tmp_path, width):
    """Goal: in Chromium at 1280 and 1920 px every section has a box, each fault is shaded on every panel, nothing is fetched, no
    console error, and choosing another task shows that task's timeline and only it."""
    report = json.loads((artifacts / "report.json").read_text())
    played = len(report["faults"])
    assert played >= 1
    verdict = assert_page_in_browser(artifacts / "report.html", tmp_path, width, played * len(SIM_PANELS))
    assert len(verdict["options"]) == report["tasks"]


def test_a_search_writes_the_same_page_from_its_record(tmp_path, capsys):
    """Goal: `explore --report` writes the page every driver's run has, its verdicts those of `--json`, the counterexample
    and its replay named, and the sections a search has nothing for saying so; a page that cannot be written costs no search."""
    path = tmp_path / "search.html"
    assert main(["explore", "--antipattern", "db-only-dedup", "--report", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    text = path.read_text()
    page = parsed(text)
    assert page.statuses == {name: verdict["status"] for name, verdict in report["invariants"].items()}
    assert page.statuses["one_effect_per_operation"] == "violated" and "FAIL" in text
    assert report["subject"]["counterexample"]["replay"] in text.replace("&#x27;", "'")
    assert "No series was recorded" in text and "a search delivers no fault at a time" in text
    assert page.tags.count("script") == 1 and text.count("</body>") == 1
    assert main(["explore", "--workers", "1", "--report", str(tmp_path / "no-such-folder" / "page.html")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_search_stopped_by_a_bound_is_incomplete_on_its_page_and_a_complete_one_passes(tmp_path, capsys):
    """Goal: the page's one word is the command's: a search its state bound stopped found nothing and proved nothing
    (INCOMPLETE, exit 3), a completed clean one passes, a run that failed fails."""
    stopped, done = tmp_path / "stopped.html", tmp_path / "done.html"
    assert main(["explore", "--crashes", "1", "--pauses", "1", "--states", "20", "--report", str(stopped)]) == 3
    assert main(["explore", "--workers", "1", "--report", str(done)]) == 0
    capsys.readouterr()
    assert 'id="overall">INCOMPLETE: ' in stopped.read_text() and 'id="overall">PASS: ' in done.read_text()
    assert headline({"ok": False, "invariants": {}}) == "FAIL"
