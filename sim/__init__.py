"""The SimPy world that attacks the core: workload, workers, network, providers, nemesis, control plane.

Public surface: `play` runs one world from (config, seed) and judges it into
an `Outcome` (`World` does the same and keeps its roles for a study to read);
`SimConfig` and its parts tune it; `FaultSpec` places a fault at a chosen
time; `SCENARIOS` and `scenario_config` name the worlds worth running;
`recovery` (`shiftchange.checkers.recovery`, where recovery is judged for
every driver and the lab) judges whether goodput comes back after a placed
provider fault (`goodput_recovers`, set on by `SimConfig.recovery`); `ANTIPATTERNS` are the
chapter's failure modes as switches (`shiftchange.antipatterns`, shared with
every driver); `all_checkers` and `INVARIANTS` are the checkers (from
`shiftchange.checkers`). Nothing here studies runs: the lab above it
(`shiftchange.lab`: dotted `settings`, `sweep`, `phase`, `tune`, `shrink`,
`contention`, the reports, plots and artifacts) plays worlds through this
surface, and nothing here imports it. The exhaustive explorer, which
enumerates every interleaving of a small configuration instead of sampling
one per seed, is a driver of its own (`shiftchange.explore`). Modules are
named for the role they hold (Jepsen's habit): what arrives, who acts, what
breaks, what must hold.
"""

from shiftchange.antipatterns import ANTIPATTERNS, AntiPattern, antipattern
from shiftchange.checkers import recovery
from shiftchange.checkers.history import CheckContext, Fault, History, Landed, Retired, Verdict, describe
from shiftchange.checkers.rules import INVARIANTS, all_checkers

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
    "SimConfig",
    "Verdict",
    "WorkerConfig",
    "WorkloadConfig",
    "World",
    "all_checkers",
    "antipattern",
    "describe",
    "play",
    "recovery",
    "scenario_config",
]
