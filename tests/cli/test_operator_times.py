"""Times in the text a person reads: never the clock's bare number (issue 42, defect 5).

The core words its refusals with the clock's number as it is ("expired at
1796499303.7910109", "circuit open until 238.7556096241188"): it cannot tell
a Unix clock from a simulated one. The texts write them as the rest of the
text writes times: ISO 8601 UTC for a store's Unix times (`status`,
`timeline`, the chaos report: tests/cli/test_operator.py and
tests/runtime/test_chaos.py), `t=238.76 s` for a simulated one (`sim run`,
here); each `--json` keeps the words as recorded.
"""

from __future__ import annotations

import json
import re

from shiftchange.cli.main import main
from shiftchange.lab.report import rounded_times

UNROUNDED = re.compile(r"\b(?:until|by|at) \d+\.\d{3,}")
DB_ONLY_DEDUP = ["sim", "run", "--antipattern", "db-only-dedup", "--seed", "0", "--tasks", "20"]
"""A run whose counterexample's timeline holds refusals of an open circuit ('circuit open until 127.47746894285734')."""


def test_the_sim_report_rounds_the_simulated_times_in_recorded_reasons(capsys):
    status = main(DB_ONLY_DEDUP)
    text = capsys.readouterr().out
    assert status == 1, "the anti-pattern's invariant fails"
    assert re.search(r"circuit open until t=\d+\.\d\d s\]", text), text
    assert not UNROUNDED.search(text), UNROUNDED.search(text).group()
    status = main([*DB_ONLY_DEDUP, "--json"])
    recorded = json.dumps(json.loads(capsys.readouterr().out))
    assert re.search(r"circuit open until \d+\.\d{3,}", recorded), "the JSON keeps the words as recorded"


def test_rounded_times_touches_only_unrounded_times():
    assert rounded_times("circuit open until 238.7556096241188]") == "circuit open until t=238.76 s]"
    kept = "expired at 30.0; goodput 0.0646/s; until t=65.08; at=400; sha abc1.2345x; 4.125 s"
    assert rounded_times(kept) == kept
