"""`shiftchange sim tune lease`: the answer line first, the runs and replay commands behind it, each target's verdict,
`--json`, and the exit status (0 confirmed, 1 not confirmed, 2 bad input in one line)."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from shiftchange.cli.main import main
from shiftchange.lab.tune import tune_lease

TINY = ("--tool-call-s", "30", "--renewal-loss", "0.1", "--heartbeat-s", "15", "--tasks", "60", "--seeds", "0-1", "--jobs", "1")
"""Two runs of sixty tasks per TTL (`tests/lab/test_tune.py` has the same scale): 30 per 1,000 is confirmed there, 20 is not."""
ANSWER = re.compile(r"lease TTL (\d+) s, heartbeat (\d+) s \(rule: .+\)")


def tune(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["sim", "tune", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_confirmed_answer_prints_first_then_its_runs_replays_and_verdicts_and_exits_0(capsys):
    """The first line is the answer; the table has a row per TTL checked; every run's replay command is printed; exit 0."""
    status, out, err = tune(capsys, "lease", *TINY, "--target-per-1000", "30")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    answer = ANSWER.fullmatch(lines[0])
    assert answer is not None and answer.groups() == ("50", "15"), lines[0]
    rows = [line.split() for line in lines[2:5]]
    assert rows[0][:2] == ["TTL", "k"] and rows[1][:2] == ["50", "s"] and rows[2][:2] == ["35", "s"]
    replays = [line.strip() for line in lines if line.strip().startswith("shiftchange sim run")]
    assert len(replays) == 2 + 2 + 2, "two hold runs, then two runs at each TTL"
    assert shlex.split(replays[2])[:8] == ["shiftchange", "sim", "run", "--scenario", "baseline", "--seed", "0", "--tasks"]
    assert "false expiries at TTL 50 s: at most 24.1 per 1,000 leases (95% interval), target 30: met" in out
    assert out.rstrip().endswith("the rule may not be tight here") and "\nconfirmed\n" in out


def test_a_bound_the_runs_cannot_reach_exits_1_and_says_how_many_leases_it_would_take(capsys):
    """The same runs cannot bound the rate below 20 per 1,000: the answer still comes first, the verdict says NOT, exit 1."""
    status, out, err = tune(capsys, "lease", *TINY, "--target-per-1000", "20")
    assert (status, err) == (1, "")
    assert ANSWER.fullmatch(out.splitlines()[0])
    assert "target 20: NOT met" in out and "NOT confirmed by the runs" in out
    assert re.search(r"confirming 20 per 1,000 takes about [\d,]+ leases", out)


def test_json_is_one_object_with_the_answer_and_every_run(capsys):
    """`--json` prints only the result's fields, the answer line among them, and keeps the exit status."""
    status, out, err = tune(capsys, "lease", *TINY, "--target-per-1000", "30", "--detect-max-s", "60", "--json")
    assert (status, err) == (0, "")
    result = json.loads(out)
    expected = tune_lease(30.0, 0.1, 30.0, detect_max_s=60.0, heartbeat_s=15.0, tasks=60, seeds=[0, 1], jobs=1).to_dict()
    assert result == json.loads(json.dumps(expected))
    assert result["answer"].startswith("lease TTL 50 s, heartbeat 15 s") and result["confirmed"] and result["detect_target_met"]
    assert [check["lease_ttl_s"] for check in result["checks"]] == [50.0, 35.0]
    assert all(len(check["replays"]) == 2 for check in result["checks"])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--renewal-loss", "0.1", "--target-per-1000", "1"), "--tool-call-s"),
        (("--tool-call-s", "abc", "--renewal-loss", "0.1", "--target-per-1000", "1"), "must be a number"),
        (("--tool-call-s", "30", "--renewal-loss", "1.5", "--target-per-1000", "1"), "renewal loss probability"),
        (("--tool-call-s", "30", "--renewal-loss", "0.1", "--target-per-1000", "0"), "target"),
        (("--tool-call-s", "30", "--renewal-loss", "0.1", "--target-per-1000", "1", "--executor", "threads"), "processes, dask"),
        (("--tool-call-s", "30", "--renewal-loss", "0.1", "--target-per-1000", "1", "--detect-max-s", "5"), "no lease is detected"),
        (("--tool-call-s", "30", "--renewal-loss", "0.1", "--target-per-1000", "1", "--seeds", "3-1"), "runs backwards"),
    ],
)
def test_bad_input_exits_2_in_one_line(capsys, argv, says):
    """A missing or bad argument is one line on stderr naming it, nothing on stdout, exit 2."""
    status, out, err = tune(capsys, "lease", *argv)
    assert (status, out) == (2, "")
    assert err.startswith("shiftchange: ") and err.count("\n") == 1 and says in err, err


def test_tune_needs_a_question(capsys):
    """`sim tune` alone names the questions it takes, in one line, exit 2."""
    status, out, err = tune(capsys)
    assert (status, out) == (2, "") and "tune_command" in err and err.count("\n") == 1
