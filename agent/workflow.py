"""The work of one Attempt as a list of steps, where it resumes, and the commit it makes.

A workflow is data the driver hands the agent: the chapter's small agent
task (`ChapterWorkflow`: plan, slow tool calls, commit, push, describe the
pull request, create it) or a bare list of side effects
(`OperationsWorkflow`, what the explorer enumerates). Either way it unrolls,
for one claimed Attempt, into `Step`s: an effect asked of the tool gateway, a
piece of local work, or a fenced checkpoint.

Checkpoints sit between effects, never after the last one. Attempt N+1
resumes after the checkpoint its predecessor recorded, when it keeps the
predecessor's plan; a checkpoint after the last effect would hand N+1 a
workflow with nothing left to ask the gateway, so verification would find no
effect of its own and the task would end blocked on contradictory evidence
instead of done (the explorer found this; it now holds for every driver,
because every driver runs this list).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import NamedTuple

from shiftchange.core.config import require_nonnegative, require_whole

EFFECT, WORK, CHECKPOINT = "effect", "work", "checkpoint"
MODEL, CODE_HOST = "model_provider", "code_host"


class Step(NamedTuple):
    """One step: an effect (`name` is the operation), local work (`name` is its kind) or a checkpoint (`name` is recorded)."""

    kind: str
    name: str
    identity: str = ""
    dependency: str = ""
    spans_attempts: bool = True
    """The operation may span Attempts (its key is built from the task and the content, so N+1 finds N's effect)."""
    cost_usd: float = 0.0
    tokens: int = 0


def head_sha(task_id: str, hypothesis: str) -> str:
    """The commit an Attempt makes is a function of its task and hypothesis: the same plan makes the same commit."""
    return hashlib.sha1(f"{task_id}\x1f{hypothesis}".encode()).hexdigest()[:12]


def resume_after(steps: tuple[Step, ...], checkpoint: str | None) -> int:
    """The index of the first step to run when resuming after `checkpoint` (0 when it names no checkpoint of these steps)."""
    if checkpoint is None:
        return 0
    for index, step in enumerate(steps):
        if step.kind == CHECKPOINT and step.name == checkpoint:
            return index + 1
    return 0


@dataclass(frozen=True, slots=True)
class ChapterWorkflow:
    """The chapter's agent task: `model_calls` model calls (planning, then one per tool), `tool_calls` slow tools, then
    commit, push, describe and create the pull request; checkpoints "tools-done" and "pushed"."""

    tool_calls: int = 2
    """Slow tool calls per Attempt (each a model call, then local work while the lease is renewed from inside it)."""
    model_calls: int | None = None
    """Model calls before the commit; None is one to plan plus one per tool call (a runaway task makes many more)."""
    model_call_cost_usd: float = 0.01
    """What each model call asks the gateway to authorize (the budget's spend)."""
    model_call_tokens: int = 1000

    def __post_init__(self) -> None:
        require_whole(self, ("tool_calls", "model_call_tokens"))
        if self.model_calls is not None:
            require_whole(self, ("model_calls",))
        require_nonnegative(self, ("model_call_cost_usd",))

    def steps(self, task_id: str, attempt_id: str, head: str) -> tuple[Step, ...]:
        model_calls = 1 + self.tool_calls if self.model_calls is None else self.model_calls
        cost, tokens = self.model_call_cost_usd, self.model_call_tokens
        steps: list[Step] = []
        for step in range(model_calls):
            steps.append(Step(EFFECT, "model-call", f"{attempt_id}:step-{step}", MODEL, False, cost, tokens))
            if 0 < step <= self.tool_calls:
                steps.append(Step(WORK, "tool"))  # the slow tool; the heartbeat renews meanwhile
        content = f"{task_id}:{head}"
        steps += [
            Step(CHECKPOINT, "tools-done"),
            Step(WORK, "commit"),
            Step(EFFECT, "push", content, CODE_HOST),
            Step(CHECKPOINT, "pushed"),
            Step(EFFECT, "model-call", f"{attempt_id}:describe-pr", MODEL, False, cost, tokens),  # the PR's description
            Step(EFFECT, "create-pr", content, CODE_HOST),
        ]
        return tuple(steps)


@dataclass(frozen=True, slots=True)
class OperationsWorkflow:
    """Side effects alone, in order, each at `dependency` under a key that spans Attempts, a checkpoint between two."""

    operations: tuple[str, ...] = ("create-pr",)
    dependency: str = CODE_HOST

    def steps(self, task_id: str, attempt_id: str, head: str) -> tuple[Step, ...]:
        steps: list[Step] = []
        for index, operation in enumerate(self.operations):
            if index:
                steps.append(Step(CHECKPOINT, self.operations[index - 1]))
            steps.append(Step(EFFECT, operation, f"{task_id}:{head}", self.dependency))
        return tuple(steps)


Workflow = ChapterWorkflow | OperationsWorkflow
