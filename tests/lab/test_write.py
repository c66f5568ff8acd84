"""A spec value written as a spec folder reads back as the same spec; a folder of another spec is never overwritten."""

from __future__ import annotations

import pytest

from shiftchange.lab.write import SpecWriteError, write_spec
from shiftchange.spec.edits import drop_row, unfence
from shiftchange.spec.loader import load_spec, packaged_spec


@pytest.mark.parametrize("edit", [lambda spec: spec, lambda spec: unfence(spec, "complete"), lambda spec: drop_row(spec, "task", 3)])
def test_a_written_spec_reads_back_with_its_digest(tmp_path, edit):
    spec = edit(packaged_spec())
    folder = write_spec(spec, tmp_path / "written")
    assert load_spec(folder).digest == spec.digest
    assert write_spec(spec, folder) == folder  # the same files again: left as they are


def test_a_folder_holding_another_spec_is_refused(tmp_path):
    folder = write_spec(packaged_spec(), tmp_path / "written")
    before = (folder / "attempt.toml").read_text()
    with pytest.raises(SpecWriteError, match="already holds another spec's files"):
        write_spec(unfence(packaged_spec(), "complete"), folder)
    assert (folder / "attempt.toml").read_text() == before
