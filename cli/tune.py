"""`shiftchange sim tune`: a question about the core's settings answered from the simulator, with the runs behind it.

Each question is a subcommand of `tune`; `lease` chooses a lease TTL and heartbeat. Nothing from `shiftchange.sim`
is imported until a command runs (see cli/sweep.py for why).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser"]


def add_parser(sim_commands: Any) -> argparse.ArgumentParser:
    """Add `tune` to the `shiftchange sim` subcommands, with one subcommand per question."""
    tune = sim_commands.add_parser("tune", help="answer a tuning question from simulation, with the runs behind the answer")
    tune.add_subparsers(dest="tune_command", required=True, parser_class=type(tune))
    return tune
