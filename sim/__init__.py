"""The SimPy world that attacks the core: workload, workers, network, providers, nemesis, control plane.

Public surface: `play` runs one world from (config, seed) and judges it into
an `Outcome` (`World` does the same and keeps its roles for a study to read);
`SimConfig` and its parts tune it, every field by dotted path through
`settings`; `FaultSpec` places a fault at a chosen time; `sweep.sweep` plays a
grid of settings times seeds into a table (the module keeps its name, so it
is not re-exported here); `play_with_artifacts` leaves a run's
folder on disk; `SCENARIOS` and `scenario_config` name the worlds worth
running; `recovery` judges whether goodput comes back after a placed
provider fault (`goodput_recovers`, set on by `SimConfig.recovery`);
`contention` is Brooker's backoff experiment (clients racing for one
record), apart from the world; `ANTIPATTERNS` are the chapter's failure modes as switches;
`all_checkers` and `INVARIANTS` are the checkers (from `shiftchange.checkers`); `shrink` minimises a
violating run; the exhaustive explorer, which enumerates every interleaving of a small
configuration instead of sampling one per seed, is a driver of its own (`shiftchange.explore`). Modules are named for the role
they hold (Jepsen's habit): what arrives, who acts, what breaks, what must hold.
"""

from shiftchange.antipatterns import ANTIPATTERNS, AntiPattern, antipattern
from shiftchange.checkers.history import CheckContext, Fault, History, Landed, Retired, Verdict, describe
from shiftchange.checkers.rules import INVARIANTS, all_checkers

from . import contention, recovery, settings
from .artifacts import play_with_artifacts
from .config import (
    ControlConfig,
    FaultSpec,
    NemesisConfig,
    NetworkConfig,
    ProviderConfig,
    RecoveryConfig,
    SeriesConfig,
    SimConfig,
    WorkerConfig,
    WorkloadConfig,
)
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
    "FaultSpec",
    "History",
    "Landed",
    "NemesisConfig",
    "NetworkConfig",
    "Outcome",
    "ProviderConfig",
    "RecoveryConfig",
    "Retired",
    "Scenario",
    "SeriesConfig",
    "Shrunk",
    "SimConfig",
    "Verdict",
    "WorkerConfig",
    "WorkloadConfig",
    "World",
    "all_checkers",
    "antipattern",
    "contention",
    "describe",
    "play",
    "play_with_artifacts",
    "recovery",
    "scenario_config",
    "settings",
    "shrink",
]
