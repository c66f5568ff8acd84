"""The exhaustive driver: every interleaving of a small configuration, its workers the agent.

Public surface: `explore` searches a configuration (`ExploreConfig`) and
returns an `Exploration` (with its `Counterexample`, if any); `replay` plays
one path again; `EXPOSURES` and `OUT_OF_SCOPE` say which anti-patterns
exploration exposes and which it cannot, and `exposing_config` gives the
configuration that exposes one. Modules are named for what they hold: the
search and what it is made of (`search`, `levels`, `parallel`, `frontier`,
`digest`, `seen`, `independence`, `judge`, `snapshots`, `replay`, `report`,
`flags`), what is searched (`config`, `exposures`), the world's composition
(`world`), and its actors (`workers`, `control`, `network`, `nemesis`,
`clock`).
"""

from .config import ExploreConfig, ExploreError, StepError
from .exposures import EXPOSURES, OUT_OF_SCOPE, Exposure, exposing_config
from .flags import parse_steps, replay_command, steps_flags
from .judge import Finding
from .replay import Replayed, replay
from .search import BFS, DFS, Counterexample, Exploration, explore
from .world import World

__all__ = [
    "BFS",
    "DFS",
    "EXPOSURES",
    "OUT_OF_SCOPE",
    "Counterexample",
    "Exploration",
    "ExploreConfig",
    "ExploreError",
    "Exposure",
    "Finding",
    "Replayed",
    "StepError",
    "World",
    "explore",
    "exposing_config",
    "parse_steps",
    "replay",
    "replay_command",
    "steps_flags",
]
