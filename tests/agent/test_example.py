"""examples/agent.py, the smallest driver of the agent, runs one task to review over the real core, heartbeat included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent.py"


def test_the_smallest_driver_runs_one_task_to_review_with_renewals_on_the_cadence():
    run = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True)
    lines = run.stdout.splitlines()
    assert lines[0].endswith("call     claim_next")
    assert any("renew_lease (heartbeat)" in line for line in lines)
    assert [line.split()[-3] for line in lines if "perform" in line][-2:] == ["model-call", "create-pr"]
    assert "worker-1: completed" in lines
    assert lines[-1] == "task t1 is review; attempt t1#1 is succeeded"
