"""The abstract clock (`explore/abstract_time.py`): it merges states that differ only in when things happened, loses no
state the concrete search reaches, finds the same violations, and refuses what it cannot search soundly."""

from __future__ import annotations

import pytest

from shiftchange.cli.main import main
from shiftchange.explore import EXPOSURES, ExploreConfig, ExploreError, explore, exposing_config, levels
from shiftchange.explore.abstract_time import REACHED, creation_ranks, dyadic, relative
from shiftchange.explore.config import CLOCK_READERS
from shiftchange.explore.digest import digest
from shiftchange.explore.world import World


def _visited(monkeypatch, config: ExploreConfig) -> tuple[object, set[bytes]]:
    """Search `config` (one process), and the abstract text (hashed, workers interchangeable) of every state it visited."""
    seen: set[bytes] = set()
    keyed = levels.fingerprint

    def fingerprint(world, symmetry):
        seen.add(digest(world, True, abstract=True))
        return keyed(world, symmetry)

    monkeypatch.setattr(levels, "fingerprint", fingerprint)
    result = explore(config)
    monkeypatch.setattr(levels, "fingerprint", keyed)
    return result, seen


SMALL = {
    "a crash": {"crashes": 1},
    "a pause and a lost answer": {"pauses": 1, "lost_responses": 1},
    "two tasks": {"tasks": 2},
    "a cancellation": {"cancels": 1, "pauses": 1},
    "a stall and a backoff": {"stalls": 1, "lost_requests": 1},
    "two tasks on other timings": {
        "tasks": 2,
        "lost_responses": 1,
        "lease_ttl_s": 5.0,
        "heartbeat_interval_s": 1.5,
        "call_deadline_s": 3.25,
        "cancel_ack_timeout_s": 0.75,
        "backoff_base_s": 0.5,
        "backoff_cap_s": 8.0,
        "gateway_retry_s": 2.5,
    },
}


@pytest.mark.parametrize("changes", SMALL.values(), ids=SMALL.keys())
def test_every_concrete_state_maps_to_an_abstract_state_the_abstract_search_visited(monkeypatch, changes):
    """Nothing the concrete search reaches is lost: each of its states' abstract texts is one the abstract search visited,
    and the abstract search visited no text the concrete one did not reach (it takes the same steps)."""
    concrete, reached = _visited(monkeypatch, ExploreConfig(**changes, time="concrete"))
    abstract, visited = _visited(monkeypatch, ExploreConfig(**changes, time="abstract"))
    assert concrete.complete and abstract.complete and concrete.ok and abstract.ok
    assert reached == visited
    assert abstract.states == len(visited) <= concrete.states
    assert abstract.finishes == concrete.finishes


def test_states_that_differ_only_in_when_things_happened_are_one():
    """Two tasks: the concrete search tells apart the same situation at different instants; the abstract one does not."""
    concrete = explore(ExploreConfig(tasks=2, lost_responses=1, time="concrete"))
    abstract = explore(ExploreConfig(tasks=2, lost_responses=1))
    assert concrete.complete and abstract.complete and concrete.ok and abstract.ok
    assert abstract.states * 2 < concrete.states  # 1,064 against 2,778 when this was written
    assert abstract.finishes and concrete.finishes


@pytest.mark.parametrize("name", sorted(set(EXPOSURES) - CLOCK_READERS))
def test_the_abstract_and_the_concrete_search_find_the_same_violation(name):
    """Every in-scope anti-pattern: the same invariant at the same least depth, and the path replays on the concrete clock."""
    config = exposing_config(name)
    assert config.time == "abstract"
    abstract = explore(config)
    concrete = explore(exposing_config(name, time="concrete"))
    assert abstract.counterexample is not None and concrete.counterexample is not None
    assert abstract.counterexample.invariant == concrete.counterexample.invariant == EXPOSURES[name].invariant
    assert len(abstract.counterexample.steps) == len(concrete.counterexample.steps)
    assert abstract.counterexample.replays and concrete.counterexample.replays
    assert abstract.states <= concrete.states


def test_an_anti_pattern_that_reads_the_clocks_value_is_searched_on_the_concrete_clock_only():
    """timestamp-keys mints a key from the clock's value: whether two keys are equal depends on when both were minted,
    which the abstract text does not keep."""
    assert {"timestamp-keys"} == CLOCK_READERS
    config = exposing_config("timestamp-keys")
    assert config.time == "concrete" and explore(config).counterexample.invariant == EXPOSURES["timestamp-keys"].invariant
    with pytest.raises(ExploreError, match=r"reads the clock's value.*--time concrete"):
        exposing_config("timestamp-keys", time="abstract")


def test_a_time_is_written_relative_to_now_and_a_time_reached_as_reached():
    assert relative(None, 5.0) is None
    assert relative(7.5, 5.0) == 2.5
    assert relative(5.0, 5.0) == relative(1.0, 5.0) == REACHED

    class Made:
        def __init__(self, at):
            self.created_at = at

    assert creation_ranks([Made(3.0), Made(1.0), Made(3.0)]) == {1.0: 0, 3.0: 1}
    assert dyadic(3.0) and dyadic(0.5) and dyadic(1 / 1024) and not dyadic(0.1) and not dyadic(2.3)


def test_the_same_world_translated_in_time_has_one_abstract_text_and_two_concrete_ones():
    """A world whose every step happened four seconds later (the clock moved first) is the same abstract state."""
    early, late = World(ExploreConfig(pauses=1)), World(ExploreConfig(pauses=1))
    for world in (early, late):
        world.apply("control:admit")
    late.clock.advance(4.0)
    for world in (early, late):
        world.apply("worker-1:claim:task-1")
        world.apply("worker-1:start")
    assert digest(early, True) == digest(late, True)
    assert digest(early, True, abstract=False) != digest(late, True, abstract=False)
    for world in (early, late):
        world.apply("worker-1:pause")
    assert digest(early, True) == digest(late, True)
    early.apply("clock:advance:3.0")  # time passes for one of them only: its paused holder's lease runs out
    assert digest(early, True) != digest(late, True)


def test_a_timing_the_abstract_clock_cannot_add_exactly_is_refused_and_searched_concretely():
    with pytest.raises(ExploreError, match=r"lease_ttl_s \(2.3\) is not a whole multiple of 1/1024 s.*--time concrete"):
        ExploreConfig(lease_ttl_s=2.3)
    assert ExploreConfig(lease_ttl_s=2.3, time="concrete").lease_ttl_s == 2.3
    with pytest.raises(ExploreError, match="time must be abstract or concrete"):
        ExploreConfig(time="relative")


def test_a_path_that_could_reach_a_time_budget_stops_the_abstract_search_with_an_error(capsys):
    """The time budgets and the admission queue's age limit are measured from how long ago something began, which the
    abstract text does not keep: no abstract path may come near them. A paused holder's long lease runs out, and its
    retry's backoff ends, past the first of them."""
    slow = {"pauses": 1, "lease_ttl_s": 512.0, "heartbeat_interval_s": 256.0, "backoff_base_s": 128.0, "backoff_cap_s": 256.0}
    # The admission queue's 600 s age limit, measured from an Attempt's creation, comes first: then the core's 1,800 s
    # time budget less the longest call deadline.
    assert ExploreConfig(**slow).horizon_s() == 600
    assert ExploreConfig(**slow, tasks=2).reliability().admission.queue_age_max_s == 600
    with pytest.raises(ExploreError, match=r"reached t=6\d\d s, from which .* could bind.* --time concrete"):
        explore(ExploreConfig(**slow))  # the lease runs out at 512 s, the retry waits out its 128 s backoff
    with pytest.raises(ExploreError, match=r"reached t=6\d\d s"):
        explore(ExploreConfig(**slow), processes=2)  # said in one line from a forked process too
    assert explore(ExploreConfig(**slow, time="concrete")).complete
    flags = ["explore", "--pauses", "1", "--lease-ttl", "512", "--heartbeat", "256", "--backoff-base", "128", "--backoff-cap", "256"]
    for processes in ("1", "2"):
        assert main([*flags, "--processes", processes]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--time concrete" in err[0]


def test_the_command_takes_the_clock_and_a_replay_refuses_it(capsys):
    assert main(["explore", "--crashes", "1", "--time", "concrete", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"time": "concrete"' in out
    assert main(["explore", "--pauses", "1", "--replay", "control:admit", "--time", "concrete"]) == 2
    assert "--time is for a search" in capsys.readouterr().err
    assert main(["explore", "--time", "sometimes"]) == 2
    assert main(["explore", "--lease-ttl", "2.3"]) == 2
    assert "--time concrete" in capsys.readouterr().err
    # A search on the concrete clock prints a replay that plays, timings the abstract clock cannot add and all.
    assert main(["explore", "--pauses", "1", "--lease-ttl", "2.3", "--time", "concrete", "--json"]) == 0
    capsys.readouterr()
    steps = "control:admit,worker-1:claim:task-1,worker-1:pause,clock:advance:2.3"
    assert main(["explore", "--pauses", "1", "--lease-ttl", "2.3", "--replay", steps]) == 0
    assert "shiftchange explore" in capsys.readouterr().out
