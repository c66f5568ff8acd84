"""`shiftchange.lab.settings`: every simulator setting by its dotted path, its text form, and its TOML and JSON round trips."""

from __future__ import annotations

import json

import pytest

from shiftchange.core import BackoffConfig, Budget, InputError, ReliabilityConfig
from shiftchange.lab.settings import (
    SettingError,
    apply,
    diff,
    format_value,
    from_dict,
    from_toml,
    get,
    load,
    meanings,
    parse_assignment,
    paths,
    read_overrides,
    to_toml,
)
from shiftchange.sim.config import FaultSpec, SimConfig, WorkloadConfig
from shiftchange.sim.scenarios import SCENARIOS, scenario_config

DEFAULTS = SimConfig()
FALLBACK = {
    "dependency": "model_provider",
    "substitute": "small_model",
    "semantic_equivalence": "same API, smaller model; plans, no refactors",
    "cost_factor": 0.25,
    "latency_factor": 0.5,
    "quality": "lower",
    "autonomy_ceiling": "draft PR only",
}
RICH_SETTINGS = {
    "core.lease_ttl_s": "90",
    "core.heartbeat_interval_s": 0.1 + 0.2,
    "workload.budget.attempts_max": 7,
    "workload.arrival": "bursts",
    "network.loss_probability": "0.01",
    "network.lossy_calls": "renew_lease,checkpoint",
    "nemesis.faults": ["crash", "partition"],
    "nemesis.placed": "crash busy at=12.5 for=30; message_loss network at=1234567.891 for=60 probability=0.3 calls=renew_lease",
    "code_host.supports_idempotency": "false",
    "reliability.backoff.strategy": "decorrelated_jitter",
    "reliability.rate_limits.small_model.rate_per_s": 2.5,
    "reliability.admission_rate.rate_per_s": "3",
    "reliability.fallbacks": [FALLBACK],
    "series.window_s": 15,
}
RICH = apply(DEFAULTS, RICH_SETTINGS)
"""A config far from the defaults: a placed plan of two faults, an admission bucket, name lists, a new bucket and a fallback."""


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("path", list(paths(DEFAULTS)))
def test_every_leaf_of_the_defaults_reads_back_from_its_text(path):
    """Setting a leaf to the text `format_value` gives for its value reads back the same value, and changes nothing else."""
    value = get(DEFAULTS, path)
    changed = apply(DEFAULTS, {path: format_value(value)})
    assert get(changed, path) == value
    assert type(get(changed, path)) is type(value)
    assert changed == DEFAULTS


def test_paths_name_nested_parts_dict_entries_and_an_unset_optional_part():
    """Paths go through dataclasses and dict keys, in field order; a None optional part and a tuple are one leaf each."""
    leaves = paths(DEFAULTS)
    assert list(leaves)[:2] == ["workload.tasks", "workload.arrival"]
    assert leaves["workload.budget.attempts_max"] == 5
    assert leaves["reliability.rate_limits.code_host.rate_per_s"] == 10.0
    assert leaves["reliability.admission_rate"] is None
    assert leaves["nemesis.placed"] == () and leaves["reliability.fallbacks"] == ()
    assert leaves["series.window_s"] == 60.0


def test_the_rich_config_holds_every_value_it_was_given():
    """Text, typed numbers, lists and records all land typed at their paths; the two placed faults keep every digit."""
    assert get(RICH, "core.lease_ttl_s") == 90.0 and get(RICH, "core.heartbeat_interval_s") == 0.1 + 0.2
    assert RICH.nemesis.faults == ("crash", "partition") and RICH.network.lossy_calls == ("renew_lease", "checkpoint")
    assert RICH.nemesis.placed[1] == FaultSpec("message_loss", "network", 1234567.891, 60.0, probability=0.3, calls=("renew_lease",))
    assert RICH.reliability.admission_rate is not None and RICH.reliability.admission_rate.rate_per_s == 3.0
    assert RICH.reliability.admission_rate.burst == 20
    assert RICH.reliability.fallbacks[0].substitute == "small_model"
    assert RICH.code_host.supports_idempotency is False
    assert set(diff(DEFAULTS, RICH)) >= {
        "nemesis.placed",
        "reliability.admission_rate.rate_per_s",
        "reliability.rate_limits.small_model.burst",
    }


@pytest.mark.parametrize("path", list(paths(RICH)))
def test_every_leaf_of_the_rich_config_reads_back_from_its_text(path):
    """The text form holds for values far from the defaults too: plans, fallbacks, a set optional part, an added bucket."""
    value = get(RICH, path)
    assert get(apply(RICH, {path: format_value(value)}), path) == value


def test_the_rich_config_round_trips_through_toml():
    """to_toml, then from_toml, gives back an equal config; the plan is [[fault]] tables, and an unset part is written "none"."""
    text = to_toml(RICH)
    assert from_toml(text) == RICH
    assert text.count("[[fault]]") == 2
    assert 'admission_rate = "none"' in to_toml(DEFAULTS)
    assert from_toml(to_toml(DEFAULTS)) == DEFAULTS


def test_the_rich_config_round_trips_through_the_reports_json():
    """as_dict, through JSON text, then from_dict, gives back an equal config (the report's `config` rebuilds its run)."""
    assert from_dict(json.loads(json.dumps(RICH.as_dict()))) == RICH


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_scenarios_config_round_trips_through_toml_and_json(name):
    """Each scenario's config (seed 3) survives a TOML dump and a JSON report unchanged."""
    config = scenario_config(name, 3)
    assert from_toml(to_toml(config)) == config
    assert from_dict(json.loads(json.dumps(config.as_dict()))) == config


def test_a_dump_loaded_over_another_base_gives_the_dumped_config():
    """A dump names every leaf, None included, so loading it over a base with an admission bucket gives back None."""
    base = apply(DEFAULTS, {"reliability.admission_rate.burst": 4, "core.lease_ttl_s": 120})
    assert from_toml(to_toml(DEFAULTS), base=base) == DEFAULTS
    assert from_toml(to_toml(RICH), base=base) == RICH


def test_a_relation_error_names_both_paths_and_both_values():
    """The core's heartbeat-below-lease rule and the backoff's cap-over-base rule read as paths with their values."""
    with pytest.raises(SettingError) as error:
        apply(DEFAULTS, [parse_assignment("core.lease_ttl_s=10")])
    assert one_line(error) == (
        "core.heartbeat_interval_s (15.0) must be shorter than core.lease_ttl_s (10.0), or every lease expires between heartbeats"
    )
    with pytest.raises(SettingError) as error:
        apply(DEFAULTS, {"reliability.backoff.cap_s": 0.5})
    assert one_line(error) == "reliability.backoff.cap_s (0.5) must be at least reliability.backoff.base_s (1.0)"


def test_overrides_are_judged_together_not_one_by_one():
    """A shorter lease with a shorter heartbeat is valid whichever comes first; a later override of one path wins."""
    config = apply(DEFAULTS, [("core.lease_ttl_s", 10), ("core.heartbeat_interval_s", 5), ("core.heartbeat_interval_s", 3)])
    assert (config.core.lease_ttl_s, config.core.heartbeat_interval_s) == (10.0, 3.0)


def test_an_unknown_path_suggests_the_close_one():
    """A misspelt path is refused with the paths it is closest to."""
    with pytest.raises(SettingError) as error:
        apply(DEFAULTS, {"core.lease_tl_s": "90"})
    assert one_line(error) == "unknown setting 'core.lease_tl_s' (given '90'); did you mean core.lease_ttl_s?"
    with pytest.raises(SettingError, match=r"did you mean reliability\.admission_rate\.rate_per_s"):
        apply(DEFAULTS, {"reliability.admission_rate.rate_per_sec": 3})
    with pytest.raises(SettingError, match=r"unknown setting 'core\.lease_ttl_s\.minutes'"):
        get(DEFAULTS, "core.lease_ttl_s.minutes")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("core.lease_ttl_s", "ninety", "core.lease_ttl_s must be a number, not 'ninety'"),
        ("core.admitted_max", 2.5, "core.admitted_max must be a whole number, not 2.5"),
        ("code_host.supports_idempotency", "yes", "code_host.supports_idempotency must be true or false, not 'yes'"),
        ("network.lossy_calls", "renew_lease,shout", "network.lossy_calls names 'shout'"),
        ("workload.budget.attempts_max", -1, "workload.budget.attempts_max must be an integer from 0 to 1000, not -1"),
        ("core.lease_ttl_s", -5, "core.lease_ttl_s must be a positive finite number, not -5.0"),
        ("reliability.backoff", "fast", "reliability.backoff is a group of settings"),
        ("nemesis.placed", "crash busy at=soon for=30", "nemesis.placed[0]: fault parameter at_s must be a number, not 'soon'"),
    ],
    ids=["not-a-number", "not-whole", "not-a-flag", "unknown-name", "budget-below-zero", "negative", "a-group", "bad-fault"],
)
def test_a_bad_value_is_one_line_naming_the_path_and_the_value(path, value, message):
    """Each kind of bad value is refused when the config is built, in one line that names where and what."""
    with pytest.raises(SettingError) as error:
        apply(DEFAULTS, {path: value})
    assert message in one_line(error)


def test_plain_data_where_a_part_belongs_fails_at_construction_and_names_from_dict():
    """`SimConfig(**as_dict())` passes dicts for its parts: refused at once, pointing to from_dict; so are nested parts."""
    with pytest.raises(InputError, match=r"SimConfig\.workload must be a WorkloadConfig, not a dict .*settings\.from_dict"):
        SimConfig(**DEFAULTS.as_dict())
    with pytest.raises(InputError, match=r"WorkloadConfig\.budget must be a Budget, not a dict"):
        WorkloadConfig(budget={"attempts_max": 3})  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"ReliabilityConfig\.backoff must be a BackoffConfig, not a dict"):
        ReliabilityConfig(backoff={"strategy": "none"})  # type: ignore[arg-type]
    assert WorkloadConfig(budget=Budget(attempts_max=3)).budget.attempts_max == 3
    assert ReliabilityConfig(backoff=BackoffConfig(strategy="none")).backoff.strategy == "none"


def test_an_optional_part_is_created_from_its_defaults_and_unset_by_none():
    """Setting one field of an unset admission bucket creates it with the other defaults; `none` removes it again."""
    config = apply(DEFAULTS, [parse_assignment("reliability.admission_rate.rate_per_s=3")])
    assert config.reliability.admission_rate is not None
    assert (config.reliability.admission_rate.rate_per_s, config.reliability.admission_rate.burst) == (3.0, 20)
    assert apply(config, [parse_assignment("reliability.admission_rate=none")]) == DEFAULTS
    with pytest.raises(SettingError, match=r"rate_per_s has no value: reliability\.admission_rate is none"):
        get(DEFAULTS, "reliability.admission_rate.rate_per_s")


def test_diff_lists_exactly_the_changed_leaves():
    """diff names what changed and nothing else, with typed values."""
    config = apply(DEFAULTS, {"network.loss_probability": "0.05", "nemesis.faults": "crash"})
    assert diff(DEFAULTS, config) == {"network.loss_probability": 0.05, "nemesis.faults": ("crash",)}
    assert diff(config, config) == {}


@pytest.mark.parametrize(
    ("text", "pair"),
    [("core.lease_ttl_s=90", ("core.lease_ttl_s", "90")), (" nemesis.faults = ", ("nemesis.faults", "")), ("a.b=c=d", ("a.b", "c=d"))],
)
def test_parse_assignment_splits_at_the_first_equals_sign(text, pair):
    """PATH=VALUE splits at the first `=`, trimmed; an empty value is allowed (an empty list)."""
    assert parse_assignment(text) == pair


@pytest.mark.parametrize("text", ["core.lease_ttl_s", "=90", "core lease=90"])
def test_parse_assignment_refuses_what_is_not_path_equals_value(text):
    """No `=`, no path, or a path with a space: one line showing the expected form."""
    with pytest.raises(SettingError, match="a setting is PATH=VALUE"):
        parse_assignment(text)


def test_a_partial_file_changes_only_what_it_names(tmp_path):
    """A file naming two settings and one fault leaves every other leaf at the base config's value."""
    path = tmp_path / "run.toml"
    path.write_text(
        '[core]\nlease_ttl_s = 90\n\n[network]\nlossy_calls = ["renew_lease"]\n\n'
        '[[fault]]\nkind = "pause"\ntarget = "busy"\nat_s = 60\nfor_s = 90\n'
    )
    overrides = read_overrides(path)
    assert overrides == {
        "core.lease_ttl_s": 90.0,
        "network.lossy_calls": ("renew_lease",),
        "nemesis.placed": (FaultSpec("pause", "busy", 60.0, 90.0),),
    }
    base = scenario_config("partition", 1)
    config = load(path, base=base)
    assert set(diff(base, config)) == {"core.lease_ttl_s", "network.lossy_calls", "nemesis.placed"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[core]\nlease_tl_s = 90\n", "run.toml: unknown setting 'core.lease_tl_s' (given 90); did you mean core.lease_ttl_s?"),
        ("[core\nlease_ttl_s = 90\n", "run.toml is not valid TOML: "),
        ("[core]\nlease_ttl_s = 5\n", "run.toml: core.heartbeat_interval_s (15.0) must be shorter than core.lease_ttl_s (5.0)"),
    ],
    ids=["unknown-key", "malformed", "relation"],
)
def test_a_bad_file_is_one_line_naming_the_file(tmp_path, text, message):
    """Unknown keys, malformed TOML (with its line) and bad values all name the file."""
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(SettingError) as error:
        load(path)
    assert message in one_line(error).replace(str(tmp_path) + "/", "")
    if "valid TOML" in message:
        assert "line 1" in str(error.value)


def test_a_missing_file_is_one_line_naming_it(tmp_path):
    """A file that cannot be read is named, with the reason."""
    with pytest.raises(SettingError, match=r"cannot read config file .*absent\.toml: No such file"):
        read_overrides(tmp_path / "absent.toml")


def test_the_dumped_config_says_what_each_documented_setting_means_and_reads_back_the_same():
    """--dump-config's TOML carries each field's first docstring sentence as a comment above it; from_toml ignores them."""
    text = to_toml(RICH, comments=True)
    assert from_toml(text) == RICH
    lines = text.splitlines()
    ttl = lines.index(f"lease_ttl_s = {RICH.core.lease_ttl_s!r}")
    assert lines[ttl - 1] == "# How long a lease lasts without renewal."
    found = meanings(DEFAULTS)
    assert found["core.heartbeat_interval_s"] == "How often a worker should renew."
    assert found["reliability.backoff.cap_s"] == "No wait exceeds this."
    commented = [index for index, line in enumerate(lines) if line.startswith("# ")]
    assert len(commented) >= 50  # most settings say what they mean
    assert all(" = " in lines[index + 1] and not lines[index + 1].startswith("#") for index in commented)


def test_an_aimed_pause_reads_and_writes_its_text_form():
    text = "pause busy at=30 for=90 before=complete_attempt wake=replaced"
    spec = FaultSpec.parse(text)
    assert (spec.before, spec.wake) == ("complete_attempt", "replaced")
    assert str(spec) == text and FaultSpec.parse(str(spec)) == spec
    assert str(FaultSpec.parse("pause busy at=30 for=90")) == "pause busy at=30 for=90"  # a plain pause lists neither


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pause busy at=1 for=2 before=renew_lease", r"before= names a worker's contract call, one of claim_attempt, "),
        ("pause busy at=1 for=2 before=finish", r"not 'finish'"),
        ("pause busy at=1 for=2 wake=replaced", r"only with before="),
        ("pause busy at=1 for=2 before=checkpoint wake=soon", r"wake= is 'replaced'"),
        ("crash busy at=1 for=2 before=checkpoint", r"crash faults take no parameters, not before"),
    ],
)
def test_a_bad_aimed_pause_is_refused(text, message):
    with pytest.raises(InputError, match=message):
        FaultSpec.parse(text)


def test_aimed_pauses_are_drawn_beside_the_random_faults_and_move_none_of_them():
    """Switching aimed pauses (almost) off leaves every other fault of the seed's schedule where it was."""
    import random
    from dataclasses import replace

    from shiftchange.sim.nemesis import draw_schedule

    config = scenario_config("mixed", 0, 1000)
    workers = [f"worker-{index:03d}" for index in range(config.workers.workers)]

    def schedule(nemesis):
        return draw_schedule(nemesis, config.workload, 30.0, workers, lambda name: random.Random(f"0:{name}"))

    aimed = (("before", "complete_attempt"), ("wake", "replaced"))
    full = schedule(config.nemesis)
    rare = schedule(replace(config.nemesis, pause_before_complete_interval_s=1e12))
    assert [f for f in full if f.parameters != aimed] == rare
    drawn = [f for f in full if f.parameters == aimed]
    assert drawn and all(f.kind == "pause" and f.target == "busy" and f.until - f.at == config.nemesis.pause_s for f in drawn)
    no_pauses = replace(config.nemesis, faults=tuple(kind for kind in config.nemesis.faults if kind != "pause"))
    assert not [f for f in schedule(no_pauses) if f.kind == "pause"]


def test_the_same_paths_set_every_drivers_config():
    """Goal: one settings module over every driver's config alike: the runtime's nested tree and the explorer's flat flags,
    each validated by its own class, an unknown path answered with that config's own paths."""
    from shiftchange.explore.config import ExploreConfig
    from shiftchange.lab import settings
    from shiftchange.runtime.config import RuntimeConfig

    runtime = settings.apply(RuntimeConfig(), {"agent.call_deadline_s": "2.5", "core.lease_ttl_s": 9})
    assert (runtime.agent.call_deadline_s, runtime.core.lease_ttl_s) == (2.5, 9.0)
    assert settings.diff(RuntimeConfig(), runtime) == {"core.lease_ttl_s": 9.0, "agent.call_deadline_s": 2.5}
    assert settings.from_toml(settings.to_toml(runtime), RuntimeConfig()) == runtime
    explored = settings.apply(ExploreConfig(), {"crashes": 1, "operations": "push,create-pr"})
    assert (explored.crashes, explored.operations) == (1, ("push", "create-pr"))
    with pytest.raises(settings.SettingError, match=r"unknown setting 'agent\.deadline_s'.*did you mean agent\.call_deadline_s"):
        settings.apply(RuntimeConfig(), {"agent.deadline_s": 1})
    with pytest.raises(settings.SettingError, match=r"^heartbeat_interval_s .* must be shorter than lease_ttl_s"):
        settings.apply(ExploreConfig(), {"heartbeat_interval_s": 5})
