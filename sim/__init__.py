"""The SimPy world that attacks the core: workload, workers, network, providers, nemesis, control plane, checkers.

Public surface: `play` runs one world from (config, seed) and judges it into
an `Outcome`; `SimConfig` and its parts tune it; `SCENARIOS` and
`scenario_config` name the worlds worth running; `ANTIPATTERNS` are the
chapter's failure modes as switches; `all_checkers` and `INVARIANTS` are the
checkers; `shrink` minimises a violating run. Modules are named for the role
they hold (Jepsen's habit): what arrives, who acts, what breaks, what must hold.
"""

from .antipatterns import ANTIPATTERNS, AntiPattern, antipattern
from .checkers import INVARIANTS, all_checkers
from .config import ControlConfig, NemesisConfig, NetworkConfig, ProviderConfig, SimConfig, WorkerConfig, WorkloadConfig
from .history import CheckContext, Fault, History, Landed, Retired, Verdict, describe
from .scenarios import SCENARIOS, Scenario, scenario_config
from .shrink import Shrunk, shrink
from .world import Outcome, World, play

__all__ = [
    "ANTIPATTERNS",
    "INVARIANTS",
    "SCENARIOS",
    "AntiPattern",
    "CheckContext",
    "ControlConfig",
    "Fault",
    "History",
    "Landed",
    "NemesisConfig",
    "NetworkConfig",
    "Outcome",
    "ProviderConfig",
    "Retired",
    "Scenario",
    "Shrunk",
    "SimConfig",
    "Verdict",
    "WorkerConfig",
    "WorkloadConfig",
    "World",
    "all_checkers",
    "antipattern",
    "describe",
    "play",
    "scenario_config",
    "shrink",
]
