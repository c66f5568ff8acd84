"""The README and docs/ point only at files in the repository: a clone has everything they name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)#\s]+)")
"""A Markdown link's target (an image's too), up to any #fragment."""
FOLDERS = "docs|examples|spec|benchmarks|notebooks|core|agent|stores|runtime|sim|explore|cli|testing|tests"
NAMED = re.compile(rf"`((?:{FOLDERS})/[\w./-]+\.(?:md|py|toml|ipynb|png|sql))`")
"""A file of the repository named in backticks, as the documents name them."""


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_file_a_document_names_is_in_the_repository(document):
    text = document.read_text(encoding="utf-8")
    assert "../" not in text, f"{document.name} points outside the repository"
    missing = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        if not (document.parent / target).exists():
            missing.append(target)
    missing += [name for name in NAMED.findall(text) if not (ROOT / name).exists()]
    assert not missing, f"{document.name} names files the repository does not hold: {missing}"


def test_the_guides_exist_and_the_readme_links_them():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for guide in ("architecture", "concepts", "porting", "tuning"):
        assert (ROOT / "docs" / f"{guide}.md").is_file()
        assert f"docs/{guide}.md" in readme


REPOSITORY_PATH = re.compile(r"`([\w.*-][\w.*/-]*/[\w.*/-]*)`")
"""A path in backticks (`tests/agent/test_worker.py`, `spec/`, `tests/test_agent_*.py`), a glob's `*` included."""
PATH_DOCUMENTS = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "tests" / "README.md"])


def named_paths(document: Path) -> list[str]:
    """The repository paths a document names: those whose first folder is the repository's, or its own folder's."""
    named = REPOSITORY_PATH.findall(document.read_text(encoding="utf-8"))
    return [name for name in named if any((base / name.split("/")[0]).exists() for base in (ROOT, document.parent))]


def exists(document: Path, name: str) -> bool:
    """Whether `name` is there, from the repository's root or the document's folder; a glob must match a file."""
    return any(next(base.glob(name), None) is not None if "*" in name else (base / name).exists() for base in (ROOT, document.parent))


@pytest.mark.parametrize("document", PATH_DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_path_a_guide_or_the_tests_readme_names_exists(document):
    """Goal: a file, folder or glob a guide names (any suffix, unlike the check above) is in the repository.

    docs/agent.md named `tests/test_agent_*.py`, which matches nothing since the tests moved into tests/agent/.
    """
    names = named_paths(document)
    assert names, f"{document.name} names no path: the pattern no longer reads it"
    missing = [name for name in names if not exists(document, name)]
    assert not missing, f"{document.relative_to(ROOT)} names paths the repository does not hold: {missing}"


def test_the_readme_says_its_sim_phase_example_with_no_discipline_exits_1():
    """Goal: a reader who runs the README's `sim phase ... --discipline none` example is told that its status 1 is expected."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    fences = re.finditer(r"^```[^\n]*\n(.*?)^```[^\n]*$", readme, re.MULTILINE | re.DOTALL)
    blocks = [block for block in fences if "sim phase" in block[1] and "--discipline none" in block[1]]
    assert blocks, "the README has no sim phase example with --discipline none"
    for block in blocks:
        after = " ".join(readme[block.end() : block.end() + 800].split())
        assert "exits 1" in after and "classified_retry" in after, after


def porting_guide() -> str:
    return " ".join((ROOT / "docs" / "porting.md").read_text(encoding="utf-8").split())


def test_the_porting_guide_gives_the_command_that_checks_the_example_port():
    """Goal: the guide shows the command CI runs on examples/store_port.py (tests/kit/test_store_port_example.py), word for word."""
    command = "shiftchange check-store examples.store_port:make_store"
    assert command in porting_guide()
    ci = (ROOT / "tests" / "kit" / "test_store_port_example.py").read_text(encoding="utf-8")
    assert '"check-store", "examples.store_port:make_store"' in ci


def test_the_porting_guide_names_the_error_the_example_raises_for_a_stale_write():
    """Goal: the rule the guide states (a write to a record changed since it was read raises X) is what the example port does.

    The guide named StoreRetryable, which only a store whose transactions race raises; the example, like the kit's check,
    raises StoreConflict.
    """
    from shiftchange.testing.stores import make_task, seed

    named = re.search(r"changed since it was read raises `(\w+)`", porting_guide())
    assert named, "docs/porting.md no longer says what a stale write raises"
    sys.path.insert(0, str(ROOT))
    try:
        from examples import store_port
    finally:
        sys.path.remove(str(ROOT))
    store = store_port.make_store()
    seed(store, make_task())
    stale = store.get_task("task-1")
    with store.transaction() as tx:
        tx.update_task(tx.task("task-1"), objective="first")
    with pytest.raises(Exception) as raised, store.transaction() as tx:
        tx.update_task(stale, objective="second")
    assert type(raised.value).__name__ == named[1]


COUNT_TOLERANCE = 0.1
"""How far the test counts tests/README.md gives may drift from the suite before the page is stale: a tenth."""


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("command", "markers"),
    [("`.venv/bin/python -m pytest`", "not slow"), ("`.venv/bin/python -m pytest -m 'not slow and not heavy'`", "not slow and not heavy")],
    ids=["default", "fast"],
)
def test_the_tests_readme_counts_the_tests_each_tier_runs(command, markers):
    """Goal: the tiers' test counts in tests/README.md are within a tenth of what pytest collects (it said 1,899 at 2,672)."""
    row = next(
        line for line in (ROOT / "tests" / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith(f"| {command} |")
    )
    documented = int(re.search(r"\(([\d,]+) tests\)", row)[1].replace(",", ""))
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", markers, "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    count = int(re.search(r"(\d+)(?:/\d+)? tests? collected", collected.stdout)[1])
    assert abs(documented - count) <= COUNT_TOLERANCE * count, (
        f"tests/README.md says {documented:,} for {command}; pytest collects {count:,}"
    )
