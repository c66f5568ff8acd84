"""The agent's settings, held by every driver's config as it holds the core's, and the one converter that checks them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from shiftchange.agent import AgentConfig, ChapterWorkflow, agent_config
from shiftchange.core import CoreConfig, InputError
from shiftchange.lab.settings import SettingError, apply
from shiftchange.runtime.config import RuntimeConfig
from shiftchange.sim.config import SimConfig

CORE = CoreConfig(lease_ttl_s=20.0, heartbeat_interval_s=5.0, cancel_ack_timeout_s=10.0, call_deadline_max_s=60.0)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"call_deadline_s": 0.0}, "call_deadline_s must be a positive finite number"),
        ({"gateway_retries_max": 1.5}, "gateway_retries_max must be a whole number"),
        ({"gateway_retry_s": float("inf")}, "gateway_retry_s must be a positive finite number"),
        ({"held_back_wait_max_s": -1.0}, "held_back_wait_max_s must be a positive finite number"),
        ({"held_back_jitter": "yes"}, "held_back_jitter must be true or false"),
    ],
)
def test_bad_agent_settings_are_refused_naming_the_setting(changes, why):
    with pytest.raises(InputError, match=why):
        AgentConfig(**changes)


def test_the_converter_waits_at_most_one_lease_when_unset_and_keeps_a_shorter_wait():
    assert agent_config(CORE, AgentConfig()).held_back_wait_max_s == CORE.lease_ttl_s
    assert agent_config(CORE, AgentConfig(held_back_wait_max_s=4.0)).held_back_wait_max_s == 4.0


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (AgentConfig(held_back_wait_max_s=21.0), r"held_back_wait_max_s \(21.0\) must be at most .*lease_ttl_s \(20.0\)"),
        (AgentConfig(call_deadline_s=61.0), r"call_deadline_s \(61.0\) must be at most .*call_deadline_max_s \(60.0\)"),
    ],
)
def test_settings_the_core_would_defeat_are_refused_by_the_converter_and_by_each_driver_config(config, why):
    """Goal: a held-back wait past a lease, or a deadline the gateway refuses, fails before anything runs, in every driver."""
    with pytest.raises(InputError, match=why):
        agent_config(CORE, config)
    with pytest.raises(InputError, match=why):
        RuntimeConfig(core=CORE, agent=config)
    with pytest.raises(InputError, match=why):
        replace(SimConfig(), core=CORE, agent=config)


def test_the_simulator_sets_the_agent_and_the_workflow_by_their_dotted_names():
    config = apply(SimConfig(), {"agent.call_deadline_s": 30, "agent.held_back_jitter": "false", "workflow.tool_calls": 4})
    assert (config.agent.call_deadline_s, config.agent.held_back_jitter, config.workflow.tool_calls) == (30.0, False, 4)
    with pytest.raises(SettingError, match=r"^agent\.held_back_wait_max_s \(61\.0\) must be at most core\.lease_ttl_s"):
        apply(SimConfig(), {"agent.held_back_wait_max_s": 61})


def test_the_runtime_reads_its_agent_and_workflow_back_from_its_json_and_refuses_a_part_that_is_not_an_object():
    config = RuntimeConfig(agent=AgentConfig(call_deadline_s=2.0, gateway_retries_max=1), workflow=ChapterWorkflow(tool_calls=0))
    data = json.loads(config.to_json())
    assert data["agent"]["call_deadline_s"] == 2.0 and data["workflow"]["tool_calls"] == 0
    assert RuntimeConfig.from_dict(data) == config
    with pytest.raises(InputError, match=r"RuntimeConfig\.agent is a JSON object of its settings"):
        RuntimeConfig.from_dict({"agent": 3.0})
    with pytest.raises(InputError, match="bad runtime configuration"):
        RuntimeConfig.from_dict({"agent": {"heartbeat_interval_s": 1.0}})


def test_a_runtime_json_part_keeps_the_runtimes_own_defaults_for_what_it_leaves_out_and_errors_name_its_path():
    """Goal: `{"agent": {"gateway_retries_max": 2}}` changes that one setting; the rest stay the runtime's (not the class
    defaults, which the core's 30 s deadline bound would refuse); a bad value names RuntimeConfig.agent.<field>."""
    config = RuntimeConfig.from_dict({"agent": {"gateway_retries_max": 2}, "core": {"lease_ttl_s": 5.0}})
    assert config.agent == replace(RuntimeConfig().agent, gateway_retries_max=2)
    assert config.core == replace(RuntimeConfig().core, lease_ttl_s=5.0)
    with pytest.raises(InputError, match=r"^RuntimeConfig\.agent\.call_deadline_s must be a positive"):
        RuntimeConfig.from_dict({"agent": {"call_deadline_s": 0}})
    with pytest.raises(InputError, match=r"call_deadline_s \(now agent\.call_deadline_s\)"):
        RuntimeConfig.from_dict({"call_deadline_s": 3.0})
