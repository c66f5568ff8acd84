"""The lab's reports: one renderer per format, over one record of a run.

- `record`: a simulated run as the one record every driver's run is
  (`checkers.run.Run`: `--json` and report.json), and its replay command;
- `text`: what a person reads in a terminal, for a run of any driver (`render`, over the record);
- `html` (with `pages`, the values a page shows): one self-contained page for
  a simulated run, a search or a chaos run;
- `plot`: the series and the sweeps' figures as images;
- `coverage`: the rows of the tables a run fired;
- `artifacts`: a run's folder (report.json, config.toml, the series, the
  whole history, the page).

Wording is held to the checkers' three answers everywhere: a verdict that is
unknown is printed UNKNOWN with the checker's reason, never folded into PASS,
and a run with any unknown is not a pass. Every metric carries its unit.
"""

from __future__ import annotations

from .record import faults_played, replay_command, spec_given, spec_record, spec_words, to_json, to_record
from .text import render, render_minimal, rounded_times

__all__ = [
    "faults_played",
    "render",
    "render_minimal",
    "replay_command",
    "rounded_times",
    "spec_given",
    "spec_record",
    "spec_words",
    "to_json",
    "to_record",
]
