"""The search's machinery at scale: the same result over one process or several, worlds spilled to disk or kept in
memory, fingerprints with their collision bound printed, and the state, time and progress controls."""

from __future__ import annotations

import json

import pytest

from shiftchange.cli.main import main
from shiftchange.explore import ExploreConfig, explore, exposing_config
from shiftchange.explore.digest import collision_probability
from shiftchange.explore.frontier import Frontier, Spilled


def _outcome(result):
    """Everything a search reports that must not depend on how it was run."""
    example = result.counterexample
    coverage = result.coverage()
    return (
        result.states, result.explored, result.transitions, result.depth, result.quiescent, result.cut, result.stopped_by,
        None if example is None else (example.invariant, example.steps, example.example),
        {machine: coverage.fired[machine] for machine in ("attempt", "task")},
    )  # fmt: skip


SPREAD = {
    "a pause": (ExploreConfig(pauses=1), {}),
    "two tasks": (ExploreConfig(tasks=2), {}),
    "a duplicate, no symmetry reduction": (ExploreConfig(duplicates=1), {"symmetry": False}),
    "a depth bound": (ExploreConfig(crashes=1, pauses=1), {"depth_max": 7}),
    "an anti-pattern": (exposing_config("worker-minted-keys"), {}),
    "a violation judged as ended": (exposing_config("blind-retry"), {}),
}


@pytest.mark.parametrize("config, options", SPREAD.values(), ids=SPREAD.keys())
def test_a_search_over_several_processes_finds_what_one_process_finds(config, options):
    """Counts, the counterexample (the least-ranked of its level) and the coverage are the same over 1, 2 and 3 processes."""
    alone = explore(config, **options)
    assert alone.states > 10
    for processes in (2, 3):
        spread = explore(config, processes=processes, **options)
        assert spread.processes == processes
        assert _outcome(spread) == _outcome(alone)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 3])
def test_a_larger_search_over_several_processes_finds_what_one_process_finds(processes):
    config = ExploreConfig(workers=2, tasks=1, crashes=1, pauses=1, lost_responses=1)  # the benchmark's: 3,361 states
    assert _outcome(explore(config, processes=processes)) == _outcome(explore(config))


def test_worlds_spilled_to_disk_give_the_same_search():
    config = ExploreConfig(pauses=1)
    in_memory = explore(config)
    on_disk = explore(config, memory_max_bytes=0)  # every world of every level waits in a file
    assert in_memory.spilled == 0 and on_disk.spilled > 0.9 * on_disk.states
    assert _outcome(on_disk) == _outcome(in_memory)
    spread = explore(config, processes=2, memory_max_bytes=0)
    assert _outcome(spread) == _outcome(in_memory)


def test_a_frontier_gives_back_its_records_in_order_from_memory_and_from_disk(tmp_path):
    frontier = Frontier(memory_max_bytes=10, directory=str(tmp_path))
    records = [(b"x" * size, size) for size in (4, 4, 4, 1, 9)]
    for record in records:
        frontier.append(record)
    assert len(frontier) == 5 and frontier.spilled == 3  # 4 + 4 fit in ten bytes; the rest went to the file
    assert list(frontier.records()) == records == list(frontier.records())
    assert list(frontier.drain()) == records and len(frontier) == 0
    sent = Frontier(path=str(tmp_path / "sent"))
    sent.append((b"", 1))
    sent.finish()
    sent.close()
    assert list(Spilled(str(tmp_path / "sent")).drain()) == [(b"", 1)]
    assert not (tmp_path / "sent").exists()


def test_the_collision_bound_grows_with_states_and_steps_and_is_printed(capsys):
    assert collision_probability(10**6, 2 * 10**7) == pytest.approx(2e13 / 2**64, rel=1e-6)
    assert collision_probability(10, 10) < collision_probability(1000, 10) < collision_probability(1000, 1000)
    assert main(["explore", "--crashes", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["search"]["fingerprint_bits"] == 64 and 0 < report["search"]["collision_probability"] < 1e-12
    assert main(["explore", "--crashes", "1"]) == 0
    assert "64-bit fingerprints: the chance two of them collided is at most" in capsys.readouterr().out


def test_a_time_limit_stops_the_search_and_says_so(monkeypatch, capsys):
    """The clock is the test's: every reading is ten seconds after the last, so a one-second limit passes at once."""
    from shiftchange.explore import search

    readings = iter(range(0, 10**6, 10))
    monkeypatch.setattr(search.time, "monotonic", lambda: next(readings))
    result = explore(ExploreConfig(crashes=1, pauses=1), time_limit_s=1.0)
    assert result.stopped_by == "time" and not result.complete and result.states < 100
    assert main(["explore", "--crashes", "1", "--pauses", "1", "--time-limit", "1", "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["search"]["stopped_by"] == "time" and report["search"]["time_bound_s"] == 1.0


def test_max_states_is_the_state_bound(capsys):
    assert main(["explore", "--crashes", "1", "--pauses", "1", "--max-states", "20", "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["search"]["stopped_by"] == "states" and report["search"]["states"] == 20
    spread = explore(ExploreConfig(crashes=1, pauses=1), states_max=20, processes=2)
    assert spread.stopped_by == "states" and spread.states >= 20  # several processes check the bound between levels


def test_progress_is_reported_while_the_search_runs():
    seen = []
    explore(ExploreConfig(crashes=1), progress=lambda result: seen.append(result.states), progress_every_s=0)
    assert len(seen) > 10 and seen == sorted(seen)
    spread = []
    explore(ExploreConfig(crashes=1), processes=2, progress=lambda result: spread.append(result.states), progress_every_s=0)
    assert spread and spread == sorted(spread)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--processes", "0"], "a bound must be at least 1"),
        (["--processes", "65"], "processes must be at most 64"),
        (["--time-limit", "soon"], "must be a number of seconds"),
        (["--time-limit", "0"], "a time limit must be a positive number"),
        (["--dfs", "--depth", "4", "--processes", "2"], "depth-first search runs in one process"),
        (["--replay", "control:admit", "--processes", "2"], "--processes is for a search"),
    ],
)
def test_bad_search_controls_exit_2_with_one_line(capsys, argv, message):
    assert main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
