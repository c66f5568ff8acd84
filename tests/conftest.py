"""Shared fixtures: a writable copy of the packaged spec to break on purpose."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shiftchange.spec import DEFAULT_DIRECTORY


class SpecCopy:
    """A copy of the packaged spec files in a temporary directory, with edit helpers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for source in DEFAULT_DIRECTORY.glob("*.toml"):
            shutil.copy(source, root / source.name)

    def replace(self, name: str, old: str, new: str) -> None:
        """Replace one exact occurrence; fail loudly if the text is not there, so no test breaks nothing."""
        path = self.root / name
        text = path.read_text()
        assert text.count(old) == 1, f"{old!r} must occur exactly once in {name}"
        path.write_text(text.replace(old, new))

    def append(self, name: str, text: str) -> None:
        path = self.root / name
        path.write_text(path.read_text() + "\n" + text)

    def line_of(self, name: str, needle: str) -> int:
        for number, line in enumerate((self.root / name).read_text().splitlines(), 1):
            if needle in line:
                return number
        raise AssertionError(f"{needle!r} not in {name}")


@pytest.fixture
def spec_copy(tmp_path: Path) -> SpecCopy:
    directory = tmp_path / "spec"
    directory.mkdir()
    return SpecCopy(directory)
