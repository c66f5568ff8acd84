"""Argument checks every contract runs first: bad input is a typed `InputError`, raised before anything is read or written.

Why first: "bad input gets a clear, typed error and changes nothing". A check
that runs after the fence, after an admission step or after a health probe is
recorded would raise with part of the call already done. So each contract
checks every argument it was given, then looks records up, then acts.

Why text must be encodable: a string holding a lone surrogate ("\\ud800") is a
valid Python `str` but not Unicode text; the memory store would keep it and
the SQLite store would fail to encode it, so the two would answer the same
input differently. Refusing it here means no store ever sees it.
"""

from __future__ import annotations

from typing import Any

from .errors import InputError
from .records import Budget, Plan

GENERATION_MAX = 2**62
"""The largest lease generation a call may present (a store keeps it in a signed 64-bit column)."""


def text(value: Any, name: str, limit: int = 10_000, empty: bool = False) -> str:
    """A string of at most `limit` characters, not blank unless `empty`, encodable as UTF-8."""
    if type(value) is str and value.isascii() and len(value) <= limit and (empty or (value and not value.isspace())):
        return value  # the common case, decided without another call: every contract checks several texts
    if not isinstance(value, str) or len(value) > limit or (not empty and (not value or value.isspace())):
        raise InputError(f"{name} must be a non-empty string of at most {limit} characters, not {value!r:.60}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as error:
            raise InputError(f"{name} must be Unicode text; it holds a lone surrogate at position {error.start}") from None
    return value


def number(value: Any, name: str, limit: float) -> float:
    """A real number from 0 to `limit` (not a boolean, not NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit:
        raise InputError(f"{name} must be a number from 0 to {limit}, not {value!r}")
    return value


def whole(value: Any, name: str, limit: int) -> int:
    """An integer from 0 to `limit` (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise InputError(f"{name} must be an integer from 0 to {limit}, not {value!r}")
    return value


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name} must be true or false, not {value!r:.60}")
    return value


def instance(value: Any, name: str, kind: type) -> Any:
    """A constructor argument of the expected type, named in the error."""
    if not isinstance(value, kind):
        raise InputError(f"{name} must be a {kind.__name__}, not {type(value).__name__} {value!r:.60}")
    return value


def check_budget(budget: Any) -> Budget:
    """A task's budget is a Budget whose every limit is a number in range: bad input otherwise (the simulator's config uses it too)."""
    if not isinstance(budget, Budget):
        raise InputError("budget must be a Budget")
    whole(budget.attempts_max, "attempts_max", 1000)
    if budget.attempts_max < 1:
        raise InputError("attempts_max must be at least 1: a task that may make no Attempt could never start, nor come to rest")
    number(budget.elapsed_max_s, "elapsed_max_s", 365 * 86400)
    number(budget.cost_max_usd, "cost_max_usd", 1e7)
    whole(budget.tokens_max, "tokens_max", 10**12)
    whole(budget.repeated_signatures_max, "repeated_signatures_max", 1000)
    whole(budget.interruptions_max, "interruptions_max", 1000)
    return budget


def check_plan(plan: Any) -> Plan:
    if not isinstance(plan, Plan):
        raise InputError("plan must be a Plan")
    text(plan.hypothesis, "hypothesis", 2000)
    for name in ("base_sha", "executor", "model", "context_version", "policy_version"):
        text(getattr(plan, name), name, 200)
    return plan


def fence_arguments(attempt_id: Any, generation: Any, token: Any) -> None:
    """The three values a fenced call presents, checked before any record is read."""
    if (
        type(generation) is int
        and 0 <= generation <= GENERATION_MAX
        and type(attempt_id) is str
        and type(token) is str
        and attempt_id.isascii()
        and token.isascii()
        and 0 < len(attempt_id) <= 220
        and 0 < len(token) <= 200
        and not attempt_id.isspace()
        and not token.isspace()
    ):
        return  # the common case, decided inline: every fenced call presents these three
    text(attempt_id, "attempt_id", 220)
    whole(generation, "generation", GENERATION_MAX)
    text(token, "token", 200)
