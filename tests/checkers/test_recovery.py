"""Recovery's one meaning: goodput back at a level for a number of windows in a row, from the trigger's end."""

from __future__ import annotations

from shiftchange.checkers.recovery import evidence, recovered_after_s


def _rows(answered: list[int], window_s: float = 10.0) -> list[dict]:
    return [
        {"t_s": i * window_s, "window_s": window_s, "p.answered": a, "p.offered": 10, "p.retried": 5, "p.timed_out": 0,
         "p.working": 4, "p.abandoned": 1, "queue_depth": i}
        for i, a in enumerate(answered)
    ]  # fmt: skip


def test_one_window_at_the_level_is_a_recovery_for_the_verdict_and_not_for_a_map_that_asks_three():
    """Goal: a limit cycle that touches the level once reads as recovered only when one window is asked for."""
    rows = _rows([10, 10, 0, 0, 10, 0, 10, 10, 10, 0])  # the trigger ends at t=20; the level is 1 call/s
    assert recovered_after_s(rows, "p.answered", 20.0, 1.0, 1) == 30.0  # the window [40, 50) ends 30 s after
    assert recovered_after_s(rows, "p.answered", 20.0, 1.0, 3) == 70.0  # [60, 90): three in a row
    assert recovered_after_s(rows, "p.answered", 20.0, 1.0, 4) is None
    assert recovered_after_s(rows, "p.answered", 20.0, 0.5, 2) == 30.0, "two windows whose mean reaches the level: [30, 50)"


def test_the_evidence_reads_whole_windows_from_the_trigger_end_to_the_span_end():
    rows = _rows([10] * 10)
    found = evidence(rows, "p", 20.0, 60.0)
    assert found == {
        "retry_share": 0.5,
        "abandoned_share": 0.25,
        "timeout_share": 0.0,
        "queue_depth_at_trigger_end": 1,
        "queue_depth_late": 5,
    }
