"""Contention: N clients race to update one record under optimistic concurrency control, backing off after each conflict.

This is the experiment of Marc Brooker's "Exponential Backoff And Jitter"
(AWS Architecture Blog, 2015), rebuilt on the project's own `Backoff`, so the
five strategies the core offers can be compared on the problem that made
jitter famous. The model, exactly:

- One record holds a version number, starting at 0. It answers every request
  the instant it arrives: no service time, no queue, no capacity limit. All
  the time in the model is network time.
- Every one-way trip between a client and the record (request or reply) takes
  |normal(network_mean_s, network_sd_s)| seconds, drawn fresh for each trip;
  10 ms and 2 ms by default, Brooker's figures.
- At time 0 every client sends a read. A read returns the version as it was
  when the read reached the record. On the reply the client at once sends a
  conditional write carrying that version.
- A write succeeds, and bumps the version, if the version it carries is still
  the record's when it arrives; otherwise it conflicts. So a write conflicts
  exactly when another client's write succeeded inside its read-modify-write
  window: after its read reached the record and before the write did. A
  conflicting write changes nothing.
- A client whose write succeeded is done; it never writes again. A client
  whose write conflicted waits for the reply, then `Backoff.delay_s(k)` where
  k counts its conflicts from 0 (the project's convention: retry 0 is the
  first retry), then sends a fresh read, and so on until it succeeds.
- The backoff's base and cap are Brooker's, 5 ms and 2 s (`BASE_S`, `CAP_S`).
  His simulator numbers the first retry 1, so his first exponential wait is
  2 x base; here it is 1 x base. The shapes the article reports do not hinge
  on that factor of two.

What is measured, per race: `calls`, the conditional writes sent (Brooker's
"work": each write is preceded by exactly one read, so requests are twice
this), and `completion_s`, the simulated time at which the last client hears
that its write succeeded.

Randomness: the network draws from one `random.Random` per race, and each
client's `Backoff` from its own `random.Random`, each seeded from a SHA-256
of (seed, role, client), so a race is a function of its inputs alone and the
same seed replays it exactly, in any process.

Why a plain event heap and not SimPy: the record is instantaneous, so the
only events whose order matters are arrivals at the record (reads and
writes); a heap of those is the whole simulation, and it is several times
faster than processes and timeouts, which lets the notebook average many
seeds at a hundred clients in seconds.
"""

from __future__ import annotations

import hashlib
import heapq
import importlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shiftchange.core import Backoff, BackoffConfig, InputError
from shiftchange.core.config import BACKOFF_STRATEGIES, require_positive, shown

__all__ = ["BASE_S", "CAP_S", "CLIENTS_MAX", "COLUMNS", "RaceConfig", "RaceResult", "contend", "race"]

BASE_S = 0.005
"""Brooker's backoff base: the first exponential wait, 5 ms."""
CAP_S = 2.0
"""Brooker's backoff cap: no wait exceeds 2 s."""
CLIENTS_MAX = 10_000
"""The most clients one race may hold; with no backoff the calls grow with the square of the clients."""
COLUMNS = ("strategy", "clients", "seed", "calls", "conflicts", "completion_s")
"""The columns of `contend`'s table, in order: one row per race."""
_READ = 0
_WRITE = 1


@dataclass(frozen=True, slots=True)
class RaceConfig:
    """The network between the clients and the record, and the limit on one race's work."""

    network_mean_s: float = 0.010
    """Mean one-way trip between a client and the record (Brooker's 10 ms)."""
    network_sd_s: float = 0.002
    """Standard deviation of a one-way trip (Brooker's 2 ms); a trip is the absolute value of the normal draw."""
    calls_max: int = 1_000_000
    """A race that sends this many writes without every client succeeding stops with an InputError."""

    def __post_init__(self) -> None:
        require_positive(self, ("network_mean_s", "network_sd_s", "calls_max"))
        if isinstance(self.calls_max, bool) or not isinstance(self.calls_max, int):
            raise InputError(f"RaceConfig.calls_max must be a whole number, not {self.calls_max!r}")


@dataclass(frozen=True, slots=True)
class RaceResult:
    """One race's outcome: how much work it took and how long, and how often each client succeeded."""

    strategy: str
    clients: int
    seed: int
    calls: int
    """Conditional writes sent, successful or not."""
    completion_s: float
    """When the last client heard its write succeed."""
    successes: tuple[int, ...]
    """Successful writes per client, indexed by client: every entry is 1 in a finished race."""

    @property
    def conflicts(self) -> int:
        """Writes that found the record changed since their read."""
        return self.calls - sum(self.successes)

    def row(self) -> dict[str, Any]:
        """The race as one row of `contend`'s table."""
        return {column: getattr(self, column) for column in COLUMNS}


def race(clients: int, backoff: BackoffConfig, seed: int, config: RaceConfig | None = None) -> RaceResult:
    """Race `clients` clients to write the record once each, backing off by `backoff` after every conflict."""
    config = _check_race(clients, backoff, seed, config)
    network = random.Random(_seed_for(seed, "network", 0))
    mean_s, sd_s = config.network_mean_s, config.network_sd_s

    def trip_s() -> float:
        return abs(network.normalvariate(mean_s, sd_s))

    backoffs = [Backoff(backoff, random.Random(_seed_for(seed, "backoff", client))) for client in range(clients)]
    conflicts = [0] * clients
    successes = [0] * clients
    # An arrival at the record: (time_s, sequence, client, kind, version read). The
    # sequence breaks ties in time deterministically and keeps tuples from comparing further.
    arrivals = [(trip_s(), client, client, _READ, 0) for client in range(clients)]
    heapq.heapify(arrivals)
    sequence = clients
    version = 0
    calls = 0
    completion_s = 0.0
    while arrivals:
        time_s, _, client, kind, version_read = heapq.heappop(arrivals)
        if kind == _READ:
            # The reply carries the version back; the client's write follows at once.
            heapq.heappush(arrivals, (time_s + trip_s() + trip_s(), sequence, client, _WRITE, version))
            sequence += 1
            continue
        calls += 1
        if version_read == version:
            version += 1
            successes[client] += 1
            completion_s = max(completion_s, time_s + trip_s())
            continue
        if calls >= config.calls_max:
            raise InputError(
                f"a race of {clients} clients with {backoff.strategy} sent RaceConfig.calls_max = {config.calls_max} writes"
                " before every client succeeded: raise calls_max or race fewer clients"
            )
        wait_s = backoffs[client].delay_s(conflicts[client])
        conflicts[client] += 1
        heapq.heappush(arrivals, (time_s + trip_s() + wait_s + trip_s(), sequence, client, _READ, 0))
        sequence += 1
    result = RaceResult(backoff.strategy, clients, seed, calls, completion_s, tuple(successes))
    assert all(count == 1 for count in result.successes), f"a client did not succeed exactly once: {result.successes}"
    assert result.calls == clients + sum(conflicts)
    return result


def contend(
    clients: Iterable[int] = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100),
    strategies: Iterable[str] = BACKOFF_STRATEGIES,
    seeds: Iterable[int] = range(10),
    base_s: float = BASE_S,
    cap_s: float = CAP_S,
    config: RaceConfig | None = None,
) -> Any:
    """Race every (strategy, clients, seed) and return a pandas DataFrame of `COLUMNS`, one row per race, in that order.

    Every input is checked, and every BackoffConfig built, before the first race runs,
    so a bad strategy or client count is one InputError and no work.
    """
    counts = _listed("clients", clients, _check_clients)
    listed_seeds = _listed("seeds", seeds, _check_seed)
    names = _listed("strategies", strategies, _check_strategy)
    backoffs = [BackoffConfig(strategy=name, base_s=base_s, cap_s=cap_s) for name in names]
    config = RaceConfig() if config is None else config
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        raise InputError("contend's table needs pandas: pip install 'shiftchange[tables]'") from None
    rows = [race(count, backoff, seed, config).row() for backoff in backoffs for count in counts for seed in listed_seeds]
    return pandas.DataFrame(rows, columns=list(COLUMNS))


def _check_race(clients: object, backoff: object, seed: object, config: object) -> RaceConfig:
    """`race`'s arguments checked, and its config (the default when None)."""
    _check_clients(clients)
    _check_seed(seed)
    if not isinstance(backoff, BackoffConfig):
        raise InputError(f"race needs a BackoffConfig, not a {type(backoff).__name__} ({shown(backoff)})")
    config = RaceConfig() if config is None else config
    if not isinstance(config, RaceConfig):
        raise InputError(f"race needs a RaceConfig, not a {type(config).__name__} ({shown(config)})")
    return config


def _seed_for(seed: int, role: str, client: int) -> int:
    """A 64-bit seed for one stream of one race, the same in every process (no hash randomisation)."""
    digest = hashlib.sha256(f"contention:{seed}:{role}:{client}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _check_clients(clients: object) -> None:
    if isinstance(clients, bool) or not isinstance(clients, int) or not 1 <= clients <= CLIENTS_MAX:
        raise InputError(f"a race needs a whole number of clients from 1 to CLIENTS_MAX = {CLIENTS_MAX}, not {shown(clients)}")


def _check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"a seed must be a whole number, not negative, not {shown(seed)}")


def _check_strategy(strategy: object) -> None:
    if strategy not in BACKOFF_STRATEGIES:
        raise InputError(f"unknown backoff strategy {shown(strategy)}: use any of {', '.join(BACKOFF_STRATEGIES)}")


def _listed(name: str, values: Iterable[Any], check: Callable[[object], None]) -> Sequence[Any]:
    """`values` as a list, each checked, none repeated, at least one."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InputError(f"contend's {name} must be a list, not {shown(values)}")
    listed = list(values)
    if not listed:
        raise InputError(f"contend needs at least one of {name}")
    for value in listed:
        check(value)
    repeated = [value for value in listed if listed.count(value) > 1]
    if repeated:
        raise InputError(f"contend's {name} give {shown(repeated[0])} twice: each must appear once")
    return listed
