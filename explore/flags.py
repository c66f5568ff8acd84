"""The command line that gives a configuration, and the steps of a replay as the command takes them.

A counterexample prints the command that replays it; that command spells
out every count, and every timing that is not the default, and the spec the
core ran when it was not the packaged one (`--spec`), so it replays the very
configuration searched.
"""

from __future__ import annotations

import shlex

from .config import ExploreConfig, ExploreError

COUNT_FLAGS = (
    ("workers", "--workers"),
    ("tasks", "--tasks"),
    ("crashes", "--crashes"),
    ("pauses", "--pauses"),
    ("stalls", "--stalls"),
    ("lost_requests", "--lost-requests"),
    ("lost_responses", "--lost-responses"),
    ("duplicates", "--duplicates"),
    ("cancels", "--cancels"),
    ("operator_calls", "--operator-calls"),
    ("ci_failures", "--ci-failures"),
    ("refusals", "--refusals"),
    ("deletions", "--deletions"),
    ("retries", "--retries"),
)
TIMING_FLAGS = (
    ("gateway_retries_max", "--gateway-retries"),
    ("lease_ttl_s", "--lease-ttl"),
    ("heartbeat_interval_s", "--heartbeat"),
    ("call_deadline_s", "--call-deadline"),
    ("cancel_ack_timeout_s", "--cancel-ack-timeout"),
    ("backoff_base_s", "--backoff-base"),
    ("backoff_cap_s", "--backoff-cap"),
    ("gateway_retry_s", "--gateway-retry"),
)
"""The timings (seconds) and the worker's gateway retries, spelt out in a command only where they differ from the defaults."""


def steps_flags(config: ExploreConfig, time: bool = True) -> str:
    """The command-line flags that give `config`: every count spelt out, timings where they are not the defaults, and
    the search's clock when it is not the default (`time`; a replay plays on the concrete clock whatever it is)."""
    parts = [f"{flag} {getattr(config, name)}" for name, flag in COUNT_FLAGS]
    parts.append(f"--operations {','.join(config.operations)}")
    defaults = ExploreConfig()
    parts += [f"{flag} {getattr(config, name)!r}" for name, flag in TIMING_FLAGS if getattr(config, name) != getattr(defaults, name)]
    if not config.idempotent_provider:
        parts.append("--no-idempotency")
    if config.antipattern is not None:
        parts.append(f"--antipattern {config.antipattern}")
    if config.spec is not None:
        parts.append(f"--spec {shlex.quote(config.spec)}")
    if time and config.time != defaults.time:
        parts.append(f"--time {config.time}")
    return " ".join(parts)


def replay_command(config: ExploreConfig, steps: tuple[str, ...]) -> str:
    return f"shiftchange explore {steps_flags(config, time=False)} --replay '{','.join(steps)}'"


def parse_steps(text: str) -> tuple[str, ...]:
    """A replay's steps as the command prints them: labels separated by commas (spaces around them ignored)."""
    steps = tuple(part.strip() for part in text.split(",") if part.strip())
    if not steps:
        raise ExploreError("--replay needs the steps of a path, separated by commas")
    return steps
