"""The README and docs/ point only at files in the repository: a clone has everything they name."""

from __future__ import annotations

import re
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
