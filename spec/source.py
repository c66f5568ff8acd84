"""Where a spec comes from: the packaged one, a folder, or a git revision, read the same way by every command.

`spec check`, `spec diff` and every driver's `--spec` name a spec the same
way: a folder holding the four files, else a git revision of the repository
that holds the current directory (`REV` reads its `spec/` folder, `REV:path`
another folder; a folder wins over a revision of the same name). A revision's
files are read with `git show` into a temporary folder and loaded from there;
the spec that comes back names them as git does (`HEAD:spec/attempt.toml`).

`read_spec` returns the `Spec` with a label a person reads and the files it
read. A name that is neither is a `SpecSourceError` (bad input, never a
traceback); a malformed file is the loader's `SpecError`, naming its line.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .loader import DEFAULT_DIRECTORY, FILES, SpecError, load_spec, shown_directory
from .model import Spec, Where

__all__ = ["GIT_SPEC_FOLDER", "ReadSpec", "SpecSourceError", "read_spec", "work_tree_spec"]

GIT_SPEC_FOLDER = "spec"
"""A bare revision means this folder of the repository at that revision."""


class SpecSourceError(ValueError):
    """A spec was named that is neither a spec folder nor a git revision that holds one."""


@dataclass(frozen=True)
class ReadSpec:
    """A spec as a command read it: the value, how to name it to a person, and the files it came from."""

    spec: Spec
    label: str
    """"the packaged spec (shiftchange.spec)", a folder as given, or "REV:folder"."""
    files: tuple[str, ...]
    """The files read, as a person would find them again (a folder's paths, or REV:folder/name)."""

    @property
    def digest(self) -> str:
        return self.spec.digest


def read_spec(source: str | Path | None = None) -> ReadSpec:
    """The spec `source` names: None for the packaged one, else a folder, else a git revision."""
    if source is None:
        spec = load_spec()
        return ReadSpec(spec, shown_directory(DEFAULT_DIRECTORY), tuple(str(DEFAULT_DIRECTORY / name) for name in FILES.values()))
    text = str(source)
    if not text.strip():
        raise SpecSourceError("the spec to run is empty: name a spec folder or a git revision")
    if Path(text).is_dir():
        spec = load_spec(text)
        return ReadSpec(spec, str(Path(text)), tuple(str(Path(text) / name) for name in FILES.values()))
    return _at_revision(text)


def work_tree_spec() -> ReadSpec:
    """The work tree's spec/ folder, or the packaged spec outside a git work tree."""
    top = _toplevel()
    if top is not None and (top / GIT_SPEC_FOLDER).is_dir():
        folder = top / GIT_SPEC_FOLDER
        return ReadSpec(load_spec(folder), str(folder), tuple(str(folder / name) for name in FILES.values()))
    spec = load_spec(DEFAULT_DIRECTORY)
    return ReadSpec(spec, str(DEFAULT_DIRECTORY), tuple(str(DEFAULT_DIRECTORY / name) for name in FILES.values()))


def _toplevel() -> Path | None:
    """The git work tree holding the current directory; None without git or outside one."""
    if shutil.which("git") is None:
        return None
    result = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    return Path(result.stdout.strip()) if result.returncode == 0 and result.stdout.strip() else None


def _at_revision(text: str) -> ReadSpec:
    """`REV` or `REV:path`: the spec files of that folder (default spec/) at that revision, loaded from a temporary folder."""
    revision, _, folder = text.partition(":")
    folder = folder.strip("/") or GIT_SPEC_FOLDER
    if shutil.which("git") is None:
        raise SpecSourceError(f"{text!r} is not a folder, and git is not installed to read it as a revision")
    if _toplevel() is None:
        raise SpecSourceError(f"{text!r} is not a folder, and {Path.cwd()} is not in a git work tree to read it as a revision")
    if not revision or revision.startswith("-") or _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").returncode:
        raise SpecSourceError(f"{text!r} is neither a folder nor a revision git knows")
    label = f"{revision}:{folder}"
    with tempfile.TemporaryDirectory(prefix="shiftchange-spec-") as scratch:
        for name in FILES.values():
            shown = _git("show", f"{revision}:{folder}/{name}")
            if shown.returncode:
                raise SpecSourceError(f"{label} has no {name} at that revision: is {folder}/ a spec folder there?")
            (Path(scratch) / name).write_bytes(shown.stdout)
        try:
            spec = load_spec(scratch)
        except SpecError as error:
            # The temporary folder is gone by the time anyone reads the message: name the file as git does.
            where = Where(f"{label}/{Path(error.where.file).name}", error.where.line)
            raise SpecError(where, error.problem, error.fix) from None
    return ReadSpec(spec, label, tuple(f"{label}/{name}" for name in FILES.values()))


def _git(*arguments: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *arguments], capture_output=True, check=False)
