"""What every `shiftchange` command shares: exit statuses, the two one-line errors, the held notes, the simulator's defaults.

Each command's module imports these from here, never from `cli.main`, and
`cli.main` imports the commands: so the command line's modules import one
another in one direction, with no circle (tests/project/test_layers.py).
"""

from __future__ import annotations

import sys
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 plus SIGINT's number, what a shell reports for a command the signal ended."""
SIM_SCENARIO_DEFAULT, SIM_SEED_DEFAULT = "mixed", 0
"""`shiftchange sim run` with no arguments is the main job: a mixed-fault run of the config's thousand tasks. Seed 0, as for
every command that takes a seed (sweep, chaos, check-store, phase and tune start their ranges there too)."""
SIM_TASKS_MAX = 10_000_000
PROGRESS_INTERVAL_S = 0.2
"""The progress line is redrawn at most this often (wall seconds), however often the world reports."""


class UsageError(Exception):
    """Bad arguments: reported as one line, exit status 2."""


class BadInput(Exception):
    """Input that names nothing usable (a missing store, a file that is not a store, an unknown task): one line, exit status 2."""


PROG = "shiftchange"
_NOTES: list[str] = []
"""Lines for stderr saying what a command read (`read spec: ...`), held by `note` until `say_notes`: see `note`."""


def note(line: str) -> None:
    """Hold a line for stderr that says what the command read, until its input has all been accepted and the work begins.

    A command that refuses its input says so in one line (and nothing else); held here, the line is said by `say_notes`
    when the work begins, or when the command ends well, and dropped when it ends in bad input or an early Ctrl-C.
    """
    _NOTES.append(line)


def drop_notes() -> None:
    """Forget the held lines: the command refused its input (the refusal is its one line) or was interrupted early."""
    _NOTES.clear()


def say_notes() -> None:
    """Print the held lines on stderr now: the command's input is accepted and its work begins."""
    while _NOTES:
        print(_NOTES.pop(0), file=sys.stderr, flush=True)


SIM_SPEC_HELP = (
    "the transition table the core runs: a spec folder, else a git revision (REV reads its spec/, REV:FOLDER another),"
    " read as `spec check` reads one (default: the packaged spec); the report records its digest and the replay names it"
)


def sim_table(source: str | None) -> Any:
    """The transition table a simulator command plays: None without `--spec` (the packaged spec), else the one it names.

    Read up front, as `spec check` reads a spec (`spec.source.read_spec`: a folder, else a git revision), and compiled for
    the core, so a bad name (bad input) or a malformed file (`SpecError`, its file and line) is one line and exit
    status 2, with nothing played. The files read are named in one line on stderr, as `explore --spec` names them (stdout
    stays the report, or the JSON object): a reviewer must know which proposal the verdicts are about. The line is held
    (`note`) until the command's other input is accepted, so a refusal after this read is still one line.
    """
    if source is None:
        return None
    from shiftchange.core import InputError
    from shiftchange.core.table import Table
    from shiftchange.spec.source import SpecSourceError, read_spec

    try:
        read = read_spec(source)
        table = Table(read.spec, read.label)
    except (SpecSourceError, InputError) as error:
        raise BadInput(str(error)) from error
    note(f"read spec: {', '.join(read.files)}")
    return table
