"""What the agent asks its driver to do (commands) and the one answer shape of its own (what a `Look` found).

The agent never performs I/O. Each of its methods returns one command, the
driver carries it out with whatever I/O it has (SimPy events, a search
action, a thread and a socket) and hands the answer back:

| command | the driver does | and answers with |
|---|---|---|
| `Call` | calls the orchestrator contract `contract(*args, **kwargs)` | its result, or None when no answer came back |
| `Perform` | calls the provider with the key, due by `deadline_at` | the `Effect`, or the `ProviderTimeout` / `ProviderRefused` |
| `Wait` | lets `seconds` pass (a backoff, a call held back) | None |
| `Work` | does the local work named (a slow tool, a commit) for as long as its world says | None |
| `Look` | reads the Attempt and its predecessor from the store | `Looked`, or None when the store did not answer |
| `Stop` | ends this Attempt's work: the worker is idle again | (nothing: the next command starts a new claim) |

Commands are frozen values, so a driver may keep one, compare two, or
print one; a test compares the sequences three drivers issued.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    """Call one orchestrator contract by name."""

    contract: str
    args: tuple
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def fenced(self) -> bool:
        """The call presents a fence (attempt, generation, token) as its first three arguments: every contract but a claim."""
        return self.contract not in ("claim_attempt", "claim_next")


@dataclass(frozen=True, slots=True)
class Perform:
    """Call a provider with an orchestrator-minted key (or, under `bypasses_gateway`, a key of the worker's own)."""

    dependency: str
    key: str
    operation: str
    identity: str
    task_id: str
    deadline_at: float
    via_gateway: bool = True


@dataclass(frozen=True, slots=True)
class Wait:
    """Let time pass before asking again: a backoff after a timeout, a call held back, an earlier call's deadline."""

    seconds: float
    why: str = ""


@dataclass(frozen=True, slots=True)
class Work:
    """Local work with no side effect outside the worktree ("tool", "commit"); how long it takes is the world's to say."""

    kind: str


@dataclass(frozen=True, slots=True)
class Look:
    """Read the Attempt and the Attempt before it, to resume from the predecessor's last checkpoint."""

    attempt_id: str


@dataclass(frozen=True, slots=True)
class Stop:
    """This Attempt's work ends here; `reason` is for people (logs, the differential test), never decided on."""

    reason: str


@dataclass(frozen=True, slots=True)
class Looked:
    """The answer to `Look`: the claimed Attempt's hypothesis and its predecessor's, with the predecessor's last checkpoint."""

    hypothesis: str
    previous_hypothesis: str | None = None
    previous_checkpoint: str | None = None

    @classmethod
    def read(cls, store: Any, attempt_id: str) -> Looked | None:
        """Answer a `Look` from any `Store` (its read-only `get_attempt`); None when the Attempt is not there."""
        attempt = store.get_attempt(attempt_id)
        if attempt is None:
            return None
        previous = store.get_attempt(attempt.previous_attempt_id) if attempt.previous_attempt_id is not None else None
        if previous is None:
            return cls(attempt.hypothesis)
        return cls(attempt.hypothesis, previous.hypothesis, previous.checkpoint)


Command = Call | Perform | Wait | Work | Look | Stop
