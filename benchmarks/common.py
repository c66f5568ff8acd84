"""What every benchmark script shares: the word for a target's verdict, and the type of a count argument.

The scripts run as `python benchmarks/NAME.py`, so this folder is on their import path.
"""

from __future__ import annotations

import argparse


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def positive(text: str) -> int:
    """A command-line count of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value
