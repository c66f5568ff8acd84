"""What every suite of the kit is made of: a named check, the violation it raises, and the report of a run.

Why explicit `expect` calls and not `assert`: the kit runs in a user's
process, maybe under `python -O`, which strips assert statements, and without
pytest's assertion rewriting, which is what makes a bare assert readable. A
conformance check that can silently pass, or fail with an empty message, is
no check; so every check here states what it expected in words.

A check is a plain function of the factory under test that returns nothing
and raises `Violation` when the implementation breaks the contract. Running a
suite turns each check into a `CheckResult`; any other exception the
implementation raises is a failure too (a port that crashes does not pass),
reported with its type. `KeyboardInterrupt` and `SystemExit` are not caught.

A check that cannot apply to this implementation (it needs a second handle
the caller did not give, or a method the protocol leaves optional and the
port left out) raises `Skipped` through `skip`: the result says so, and a
skipped check is reported as skipped and is no failure (Jepsen's "unknown").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Check", "CheckResult", "Report", "Skipped", "Violation", "expect", "expect_equal", "expect_raises", "run_checks", "skip"]


class Violation(AssertionError):
    """The implementation under test broke the contract a check states; the message says how."""


class Skipped(Exception):
    """The check does not apply to the implementation under test; the message says why (and what would make it apply)."""


def skip(why: str) -> None:
    """End the check as skipped: raise `Skipped(why)`."""
    raise Skipped(why)


def expect(condition: object, why: str) -> None:
    """Raise `Violation(why)` unless `condition` holds; `why` says what the contract requires."""
    if not condition:
        raise Violation(why)


def expect_equal(actual: object, expected: object, what: str) -> None:
    """Raise a `Violation` naming `what`, the expected value and the actual one, unless they are equal."""
    if actual != expected:
        raise Violation(f"{what}: expected {_short(expected)}, got {_short(actual)}")


@contextmanager
def expect_raises(kind: type[BaseException] | tuple[type[BaseException], ...], what: str, match: str | None = None) -> Iterator[None]:
    """The block must raise `kind` (its message matching the regular expression `match`, if given); anything else is a `Violation`."""
    names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    try:
        yield
    except kind as error:
        if match is not None and not re.search(match, str(error)):
            raise Violation(f"{what}: raised {type(error).__name__}({str(error)!r}), whose message does not match {match!r}") from error
        return
    except Exception as error:
        raise Violation(f"{what}: expected {names}, but it raised {type(error).__name__}: {error}") from error
    raise Violation(f"{what}: expected {names}, but nothing was raised")


def _short(value: object, length_max: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= length_max else text[: length_max - 3] + "..."


@dataclass(frozen=True, slots=True)
class Check:
    """One rule of a contract, as a function of the factory under test; it raises `Violation` when the rule is broken."""

    name: str
    goal: str
    """What the rule requires, in one sentence (the check's docstring's first line)."""
    run: Callable[[Any], None]

    def __call__(self, factory: Any) -> None:
        self.run(factory)


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    goal: str
    passed: bool
    """False only when the implementation broke the rule; a skipped check is not a failure."""
    detail: str = ""
    """Why it failed (the violation's message, or the unexpected exception's type and message), or why it was skipped."""
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class Report:
    """The results of one suite against one implementation, in the suite's order."""

    suite: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if not result.passed)

    @property
    def skips(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if result.skipped)

    def raise_for_failures(self) -> None:
        """Raise one `Violation` listing every failed check, or return if all passed."""
        if self.failures:
            lines = [f"{len(self.failures)} of {len(self.results)} {self.suite} checks failed:"]
            lines += [f"  {result.name}: {result.detail}" for result in self.failures]
            raise Violation("\n".join(lines))


def run_checks(suite: str, checks: Iterable[Check], factory: Any) -> Report:
    """Run every check against `factory`, each to its end, and gather a report."""
    results = []
    for check in checks:
        try:
            check.run(factory)
        except Violation as violation:
            results.append(CheckResult(check.name, check.goal, False, str(violation)))
        except Skipped as skipped:
            results.append(CheckResult(check.name, check.goal, True, str(skipped), skipped=True))
        except Exception as error:
            results.append(CheckResult(check.name, check.goal, False, f"raised {type(error).__name__}: {error}"))
        else:
            results.append(CheckResult(check.name, check.goal, True))
    return Report(suite, tuple(results))


def goal_of(function: Callable[..., Any]) -> str:
    """The first line of a check's docstring: the rule it checks."""
    doc = (function.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else function.__name__.replace("_", " ")


def collector(checks: list[Check]) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """A decorator that appends each function it decorates to `checks` as a `Check` named after it."""

    def add(function: Callable[[Any], None]) -> Callable[[Any], None]:
        checks.append(Check(function.__name__, goal_of(function), function))
        return function

    return add
