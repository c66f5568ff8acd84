"""The worker's side of the protocol as a state machine: a claim in, commands out, every decision made here once.

Why a state machine and not a coroutine: the simulator, the explorer and
the real runtime must run the very same worker. A SimPy generator cannot be
copied (the explorer copies every world it branches from), and a thread
cannot run under simulated time. So, as sans-I/O protocol libraries do, the
agent holds its state in plain fields and answers each event with the next
`Command` (`agent/commands.py`); a driver turns commands into SimPy events,
search actions, or calls on threads and sockets, and hands back answers.

The protocol, for one Attempt:

1. Claim (`claim_attempt` for an offered task, `claim_next` from a shared
   queue). Accepted, the worker holds the fence and its heartbeat starts.
2. Look up the predecessor; resume after its last checkpoint when the plan
   is the same (`WorkerSeams.ignores_checkpoint` starts over instead).
3. Start. An unanswered start may have landed: ask once more, and a refusal
   from Running then means it had.
4. Each step of the workflow: local work; a fenced checkpoint; or a side
   effect, asked of the tool gateway with the fence. The provider is called
   only with the key the gateway minted and the deadline it set, and never
   when the grant is a replay of a recorded result; a landed effect is
   receipted.
5. Complete, with the head SHA the plan makes.

Refusals are read by their data (`code`, `guards`, `domain`, `state`), never
by their text:

| refusal | the worker |
|---|---|
| capacity domain (a rate denial) | waits `gateway_retry_s`, asks again |
| `no_call_in_flight` failed | waits a call deadline (an earlier call may still land), asks again |
| provider domain (open circuit, retry budget, concurrency limit) | holds the call back, spending no ask: waits retry_after_s + backoff |
| `spend_within_budget` failed | reports the Attempt failed: capacity, "budget:spend ceiling reached" |
| `timeout_budget_left` failed | reports the Attempt failed: executor, "executor:timeout budget exhausted" |
| refused while Cancelling, fence intact | acknowledges the cancellation |
| anything else (fence refused, lease gone, the Attempt left Running) | stops without another word |

Every ask counts against `gateway_retries_max`, the per-call limit inside an
Attempt: an unanswered grant, a rate denial, a provider call that timed out
(which is reported first, so the breaker counts it, then retried after a
backoff from the core's `Backoff`, retry n drawing from retry n's interval).
When the asks run out, the worker reports the Attempt failed with what stood
in the way. A provider refusal is reported to the gateway, then the Attempt
fails in the refusal's domain.

A call held back for the dependency's sake (an open or ramping circuit, a
spent retry budget, the concurrency limit) spends no ask: nothing failed, the
dependency is being protected, and an Attempt failed for it would turn a
storm into failed, retried and finally escalated tasks. It waits and asks
again for as long as the Attempt's timeout budget and lease allow (the
gateway refuses a call the budget cannot cover, an executor failure).

Renewals come from the heartbeat (`agent/heartbeat.py` says when). A refused
renewal stops all work at once; one that says cancellation was requested
makes the worker acknowledge and stop (`WorkerSeams.ignores_cancel` never
reads it). The driver interrupts whatever the workflow waits on when
`renewed` says so, then asks `interrupted` for the next command. A receipt,
a failure report or an acknowledgement already under way finishes first: a
landed effect's receipt is worth recording, and the fence, not the worker,
decides whether it still counts.

The agent has no clock and no randomness of its own: each answer comes with
`now`, and the `Backoff` (with its seeded `random.Random`) is handed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from shiftchange.core import Backoff, InputError, ProviderRefused, ProviderTimeout
from shiftchange.core.config import require_positive, require_whole
from shiftchange.core.results import FENCE_CODES, LATE_CODES

from .commands import Call, Command, Look, Looked, Perform, Stop, Wait, Work
from .workflow import CHECKPOINT, EFFECT, ChapterWorkflow, Step, Workflow, head_sha, resume_after

LEASE_GONE = FENCE_CODES | LATE_CODES
"""Refusal codes that mean the worker's lease no longer counts, whatever the call was."""

IDLE, CLAIM, LOOK, START, START_AGAIN, GRANT, PERFORM, RECEIPT, REPORT, WAIT, WORK, CHECKPOINTING, COMPLETE, ACK, FAIL = (
    "idle",
    "claim",
    "look",
    "start",
    "start-again",
    "grant",
    "perform",
    "receipt",
    "report",
    "wait",
    "work",
    "checkpoint",
    "complete",
    "ack",
    "fail",
)
"""Where the agent is: each phase but idle names the command whose answer it waits for."""

FINISH_FIRST = frozenset({RECEIPT, ACK, FAIL})
"""Calls an interrupt lets finish: a landed effect's receipt, a failure report, an acknowledgement."""
LEASE_LOST, CANCELLED = "lease lost", "cancelled"
STATE_ROW_DEADLINE = 9
"""Where `Agent.state_row` holds its one time: the deadline of the call it performs (a driver that writes times
relatively, the explorer's abstract clock, rewrites it)."""
CHAPTER = ChapterWorkflow()


@dataclass(frozen=True, slots=True)
class WorkerSeams:
    """How a worker misbehaves under an anti-pattern, as the core's `Seams` are the orchestrator's; the defaults are correct."""

    mints_own_keys: bool = False
    """Presents a key of its own making (worker-minted-keys)."""
    bypasses_gateway: tuple[str, ...] = ()
    """Operations it performs at the provider without asking the gateway (unrecorded-effects)."""
    ignores_cancel: bool = False
    """A cancellation request is a flag it never reads (cancel-as-flag)."""
    ignores_checkpoint: bool = False
    """Recovery reruns the workflow from step one (restart-from-scratch)."""


CORRECT = WorkerSeams()
"""The correct worker."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """How a worker calls: its deadlines, its per-call retry limit and pauses, how a held-back call waits.

    Every driver's config holds one, as it holds the core's `CoreConfig` (`SimConfig.agent`, `RuntimeConfig.agent`;
    the explorer's flags build one in `ExploreConfig.agent`), so one setting has one name in every driver. What the
    worker's timing shares with the core (the heartbeat, the lease) is the core's and is read from there
    (`agent_config`). The `Backoff` is handed to the `Agent` apart: it is the core's reliability setting.
    """

    call_deadline_s: float = 60.0
    """The deadline a worker asks for on each provider call."""
    gateway_retries_max: int = 3
    """How often a worker asks the gateway again for one call (a lost response, a rate denial, a provider call that timed
    out) before it reports a failure: the per-call retry limit inside an Attempt."""
    gateway_retry_s: float = 2.0
    """Pause before asking again after a lost answer or a rate denial. A timed-out provider call is retried after a
    pause drawn from the core's backoff instead, counted from the call's first retry."""
    held_back_wait_max_s: float | None = None
    """The longest a call held back by a dependency's controls waits before asking again; None: one lease (the core's
    `lease_ttl_s`, filled in by `agent_config`), so a held-back Attempt asks the gateway at least once a lease."""
    held_back_jitter: bool = True
    """A call held back waits the circuit's retry_after_s plus a backoff draw, so the calls an open circuit held back
    return spread over the backoff's window; False waits max(backoff, retry_after_s), which sends them all back in the
    instant the circuit closes (the synchronised return behind a breaker's limit cycle)."""

    def __post_init__(self) -> None:
        require_whole(self, ("gateway_retries_max",))
        require_positive(self, ("call_deadline_s", "gateway_retry_s"))
        if self.held_back_wait_max_s is not None:
            require_positive(self, ("held_back_wait_max_s",))
        if not isinstance(self.held_back_jitter, bool):
            raise InputError(f"AgentConfig.held_back_jitter must be true or false, not {self.held_back_jitter!r}")

    def check_against(self, core: Any, owner: str = "") -> None:
        """What an agent's settings must agree with in the core's (`owner` names the config holding both, for the message:
        `SimConfig.agent.call_deadline_s`; none: `agent.call_deadline_s`, the setting's path)."""
        owner = f"{owner}." if owner else ""
        if self.call_deadline_s > core.call_deadline_max_s:
            raise InputError(
                f"{owner}agent.call_deadline_s ({self.call_deadline_s!r}) must be at most {owner}core.call_deadline_max_s"
                f" ({core.call_deadline_max_s!r}), or the gateway refuses every call a worker asks for"
            )
        if self.held_back_wait_max_s is not None and self.held_back_wait_max_s > core.lease_ttl_s:
            raise InputError(
                f"{owner}agent.held_back_wait_max_s ({self.held_back_wait_max_s!r}) must be at most {owner}core.lease_ttl_s"
                f" ({core.lease_ttl_s!r}): a held-back Attempt asks the gateway at least once a lease"
            )


def agent_config(core: Any, config: AgentConfig) -> AgentConfig:
    """The one converter from a driver's config to what its agents run with: every driver (the simulator, the explorer,
    the runtime) calls it with its `CoreConfig` and the `AgentConfig` it holds.

    A call held back by a dependency's controls waits at most `held_back_wait_max_s`, one lease (`core.lease_ttl_s`)
    when the config leaves it None, however long the circuit says, so a held-back Attempt asks the gateway at least
    once a lease, wherever it runs. The heartbeat is the core's (`core.heartbeat_interval_s`): the drivers pace it.
    """
    config.check_against(core)
    if config.held_back_wait_max_s is not None:
        return config
    return replace(config, held_back_wait_max_s=core.lease_ttl_s)


class Agent:
    """One worker's protocol state, for its whole life; at most one Attempt at a time. Plain data: copy it to branch."""

    __slots__ = (
        "_failure",
        "_interrupt",
        "_plan",
        "_retrying",
        "_stopping",
        "asks",
        "backoff",
        "config",
        "deadline_at",
        "fence",
        "head",
        "held_back",
        "hypothesis",
        "index",
        "key",
        "phase",
        "seams",
        "steps",
        "task_id",
        "timeouts",
        "via_gateway",
        "worker_id",
        "workflow",
    )

    def __init__(
        self,
        worker_id: str,
        config: AgentConfig,
        backoff: Backoff,
        workflow: Workflow = CHAPTER,
        seams: WorkerSeams = CORRECT,
    ) -> None:
        self.worker_id = worker_id
        self.config = config
        self.backoff = backoff
        self.workflow = workflow
        self.seams = seams
        self.phase = IDLE
        self._forget()

    def _forget(self) -> None:
        """Drop everything about the Attempt (its calls in flight still land; the fences judge them)."""
        self.fence: tuple[str, int, str] | None = None
        self.task_id: str | None = None
        self.hypothesis = ""
        self.head = ""
        self.steps: tuple[Step, ...] = ()
        self.index = 0
        self.asks = self.timeouts = self.held_back = 0
        self.key = ""
        self.deadline_at = 0.0
        self.via_gateway = True
        self._failure: tuple[str, str] = ("provider", "")
        self._plan: Workflow = self.workflow
        self._retrying = False
        self._interrupt: str | None = None
        self._stopping = False

    # ----------------------------------------------------------- questions

    @property
    def holding(self) -> bool:
        """Whether the worker believes it holds a lease (from the accepted claim until it stops)."""
        return self.fence is not None

    @property
    def attempt_id(self) -> str | None:
        return None if self.fence is None else self.fence[0]

    def state_row(self) -> tuple:
        """The agent's state as plain values, without the lease token (a fence is its Attempt and generation); its one
        time, the deadline of the call it performs, at `STATE_ROW_DEADLINE`."""
        fence = None if self.fence is None else self.fence[:2]
        deadline_at = self.deadline_at if self.phase == PERFORM else None
        return (
            self.phase, fence, self.task_id, self.head, self.index, self.asks, self.timeouts, self.held_back, self.key,
            deadline_at,  # STATE_ROW_DEADLINE
            self.via_gateway, self._failure, self._retrying, self._interrupt, self._stopping,
        )  # fmt: skip

    # ------------------------------------------------------------ commands

    def claim(self, workspace: str, task_id: str | None = None, workflow: Workflow | None = None) -> Call:
        """Claim the offered task's admitted Attempt, or with no task the longest-admitted one of `workspace`.

        `workflow` is this task's own (a runaway task's plan) for this claim only, else the agent's.
        """
        assert self.phase == IDLE, f"{self.worker_id} claims while {self.phase}"
        self._forget()
        self.phase = CLAIM
        self._plan = self.workflow if workflow is None else workflow
        if task_id is None:
            return Call("claim_next", (self.worker_id, workspace, True))
        return Call("claim_attempt", (task_id, self.worker_id, workspace, True))

    def renewal(self) -> Call | None:
        """The renewal the heartbeat sends now, or None when the worker holds nothing."""
        if self.fence is None:
            return None
        return Call("renew_lease", self.fence)

    def renewed(self, fence: tuple, renewal: Any) -> bool:
        """A renewal sent under `fence` was answered. True: interrupt the workflow now and ask `interrupted` what next."""
        if renewal is None or fence != self.fence or self._stopping:
            return False  # unanswered, another Attempt's, or this one's work is already stopping
        if not renewal.accepted:
            self._interrupt = LEASE_LOST  # stop all work the moment a renewal is refused
        elif renewal.cancel_requested and not self.seams.ignores_cancel:
            self._interrupt = CANCELLED
        else:
            return False
        self._stopping = True
        return self.phase not in FINISH_FIRST  # those finish, then the interrupt applies

    def interrupted(self) -> Command:
        """The command after an interrupt: the call in flight is abandoned (its answer, if any, is not handed back)."""
        assert self._interrupt is not None, "interrupted() without an interrupt"
        return self._apply_interrupt()

    def _apply_interrupt(self) -> Command:
        why, self._interrupt = self._interrupt, None
        if why == CANCELLED:
            return self._acknowledge()
        return self._stop("a renewal was refused: the lease is gone")

    def on(self, answer: Any, now: float) -> Command:
        """The answer to the last command, heard at `now`: the next command."""
        if self._interrupt is not None and self.phase in FINISH_FIRST:
            return self._apply_interrupt()  # the call let finish has its answer: the interrupt decides what next
        handler = _HANDLERS.get(self.phase)
        assert handler is not None, f"{self.worker_id} got an answer while {self.phase}"
        return handler(self, answer, now)

    # ------------------------------------------------------- the workflow

    def _claimed(self, claim: Any, now: float) -> Command:
        if claim is None or not claim.accepted:
            return self._stop("not claimed")
        lease = claim.lease
        self.fence = (lease.attempt_id, lease.generation, lease.token)
        self.task_id = lease.task_id
        self.hypothesis = claim.manifest.hypothesis
        self.head = head_sha(lease.task_id, self.hypothesis)
        if self.seams.ignores_checkpoint:
            return self._begin(None)
        self.phase = LOOK
        return Look(lease.attempt_id)

    def _looked(self, looked: Looked | None, now: float) -> Command:
        resume = None
        if looked is not None and looked.previous_hypothesis == looked.hypothesis:
            resume = looked.previous_checkpoint  # resume from the predecessor's last fenced checkpoint
        return self._begin(resume)

    def _begin(self, resume: str | None) -> Command:
        self.steps = self._plan.steps(self.task_id, self.fence[0], self.head)
        self.index = resume_after(self.steps, resume)
        self.phase = START
        return Call("start_attempt", self.fence)

    def _started(self, answer: Any, now: float) -> Command:
        if answer is None:  # the start may have landed: ask again
            self.phase = START_AGAIN
            return Call("start_attempt", self.fence)
        if not answer.accepted:
            return self._refused(answer)
        return self._step(now)

    def _started_again(self, answer: Any, now: float) -> Command:
        if answer is None:
            return self._stop("the start went unanswered twice: the lease decides")
        if answer.accepted or (getattr(answer, "state", None) == "running" and getattr(answer, "code", None) not in FENCE_CODES):
            return self._step(now)  # refused from Running by the table: the first start had landed
        return self._refused(answer)

    def _step(self, now: float) -> Command:
        """The next step of the workflow, or completion after the last."""
        if self.index >= len(self.steps):
            self.phase = COMPLETE
            return Call("complete_attempt", (*self.fence, f"pull request for {self.head}"), {"head_sha": self.head})
        step = self.steps[self.index]
        if step.kind == EFFECT:
            self.asks = self.timeouts = self.held_back = 0
            if step.name in self.seams.bypasses_gateway:
                self.key, self.via_gateway = f"{step.name}:{self.worker_id}:{step.identity}", False
                return self._perform(step, now + self.config.call_deadline_s)  # no grant, so the worker sets its own deadline
            self.via_gateway = True
            return self._grant(step)
        if step.kind == CHECKPOINT:
            self.phase = CHECKPOINTING
            return Call("checkpoint", (*self.fence, step.name))
        self.phase = WORK
        return Work(step.name)

    def _next(self, now: float) -> Command:
        self.index += 1
        return self._step(now)

    def _worked(self, _answer: Any, now: float) -> Command:
        return self._next(now)

    def _checkpointed(self, answer: Any, now: float) -> Command:
        if answer is not None and not answer.accepted:
            return self._refused(answer)
        return self._next(now)

    def _completed(self, answer: Any, _now: float) -> Command:
        if answer is not None and not answer.accepted:
            return self._stop(f"completion refused: {answer.reason}")
        return self._stop("completed")

    # ------------------------------------------------------------ effects

    def _grant(self, step: Step) -> Call:
        self.asks += 1
        self.phase = GRANT
        key = f"{step.name}:{self.worker_id}:{self.fence[0]}:{step.identity}" if self.seams.mints_own_keys else None
        kwargs = {
            "call_deadline_s": self.config.call_deadline_s,
            "cost_usd": step.cost_usd,
            "tokens": step.tokens,
            "spans_attempts": step.spans_attempts,
            "key": key,
            "dependency": step.dependency,
        }
        return Call("grant_tool", (*self.fence, step.name, step.identity), kwargs)

    def _perform(self, step: Step, deadline_at: float) -> Perform:
        self.phase, self.deadline_at = PERFORM, deadline_at
        return Perform(step.dependency, self.key, step.name, step.identity, self.task_id, deadline_at, self.via_gateway)

    def _granted(self, grant: Any, now: float) -> Command:
        step = self.steps[self.index]
        if grant is None:  # maybe granted, maybe not: asking again is safe
            return self._again(self.config.gateway_retry_s, ("provider", f"provider:{step.name} unanswered after {self.asks} asks"))
        if not grant.accepted:
            return self._grant_refused(grant, step)
        if grant.replay is not None:
            return self._next(now)  # the effect exists: never call the provider again
        self.key = grant.key
        return self._perform(step, grant.deadline_at)

    def _grant_refused(self, answer: Any, step: Step) -> Command:
        domain, failed = getattr(answer, "domain", None), getattr(answer, "guards", ())
        config = self.config
        if domain == "capacity":
            return self._again(config.gateway_retry_s, ("capacity", "capacity:rate limit at the gateway"))
        if "no_call_in_flight" in failed:
            return self._again(config.call_deadline_s, ("unknown_result", "unknown_result:an earlier call may still land"))
        if domain == "provider":  # the dependency's controls hold the call back, not the Attempt: no ask is spent
            wait_s = self._held_back_wait_s(answer.retry_after_s or 0.0)
            self.held_back += 1
            self.asks -= 1
            return self._again(wait_s, ("provider", _held_back_signature(failed)))
        if "spend_within_budget" in failed:
            return self._fail("capacity", "budget:spend ceiling reached")
        if "timeout_budget_left" in failed:
            return self._fail("executor", "executor:timeout budget exhausted")
        return self._refused(answer)

    def _held_back_wait_s(self, retry_after_s: float) -> float:
        """How long a held-back call waits: spread over a backoff draw past the circuit's retry_after_s, or (no jitter) the max."""
        config = self.config
        drawn_s = self.backoff.delay_s(self.held_back)
        wait_s = retry_after_s + drawn_s if config.held_back_jitter else max(drawn_s, retry_after_s)
        wait_s = max(config.gateway_retry_s, wait_s)
        return wait_s if config.held_back_wait_max_s is None else min(wait_s, config.held_back_wait_max_s)

    def _again(self, wait_s: float, failure: tuple[str, str]) -> Command:
        """Ask the gateway again after `wait_s`, or, with no asks left, report the Attempt failed with `failure`."""
        self._failure = failure
        if self.asks > self.config.gateway_retries_max:
            return self._fail(*failure)
        self.phase = WAIT
        return Wait(wait_s, failure[1])

    def _waited(self, _answer: Any, _now: float) -> Command:
        return self._grant(self.steps[self.index])

    def _performed(self, answer: Any, now: float) -> Command:
        step = self.steps[self.index]
        if isinstance(answer, ProviderTimeout):
            # The effect may have landed: the breaker hears of the timeout; after a backoff the gateway asks provider truth.
            self.timeouts += 1
            self._failure = ("provider", f"provider:{step.name} timed out {self.timeouts} times")
            self._retrying = True
            return self._report(f"timeout:{step.dependency} gave no answer by the deadline")
        if isinstance(answer, ProviderRefused):
            signature = f"{answer.domain}:{answer.detail}"
            self._failure, self._retrying = (answer.domain, signature), False
            return self._report(signature)
        if not self.via_gateway:
            return self._next(now)
        self.phase = RECEIPT
        return Call("record_receipt", (*self.fence, self.key, answer.provider_id))

    def _report(self, signature: str) -> Command:
        """A granted call failed: tell the gateway first (its breaker counts the signature); a bypassed one just fails."""
        if not self.via_gateway:
            return self._fail(*self._failure)
        self.phase = REPORT
        return Call("report_call_failure", (*self.fence, self.key, signature))

    def _reported(self, answer: Any, _now: float) -> Command:
        if answer is not None and not answer.accepted and getattr(answer, "code", None) in LEASE_GONE:
            return self._refused(answer)
        if not self._retrying or self.asks > self.config.gateway_retries_max:
            return self._fail(*self._failure)  # refused outright, or out of asks
        self.phase = WAIT
        return Wait(self.backoff.delay_s(self.timeouts - 1), self._failure[1])

    def _receipted(self, answer: Any, now: float) -> Command:
        if answer is not None and not answer.accepted and getattr(answer, "code", None) in LEASE_GONE:
            return self._refused(answer)
        return self._next(now)

    # ------------------------------------------------------------- endings

    def _refused(self, answer: Any) -> Command:
        """A refusal read by its state: acknowledge when the Attempt is Cancelling and the fence held, else stop at once."""
        cancelling = getattr(answer, "state", None) == "cancelling" and getattr(answer, "code", None) not in FENCE_CODES
        if cancelling and not self.seams.ignores_cancel:
            return self._acknowledge()
        return self._stop(answer.reason)  # the lease is gone or the Attempt left Running: stop without another word

    def _acknowledge(self) -> Call:
        self.phase, self._stopping = ACK, True
        return Call("acknowledge_cancel", self.fence)

    def _fail(self, domain: str, signature: str) -> Call:
        self._failure = (domain, signature)
        self.phase = FAIL
        return Call("report_failure", (*self.fence, domain, signature))

    def _acknowledged(self, _answer: Any, _now: float) -> Command:
        return self._stop("cancellation acknowledged")

    def _failed(self, _answer: Any, _now: float) -> Command:
        return self._stop(self._failure[1])

    def _stop(self, reason: str) -> Stop:
        self.phase = IDLE
        self._forget()
        return Stop(reason)


def _held_back_signature(failed: tuple[str, ...]) -> str:
    """What held a call back, as the failure signature an Attempt would end with."""
    if "circuit_allows" in failed:
        return "provider:circuit open"
    if "concurrency_allows" in failed:
        return "provider:concurrency limit reached"
    return "provider:retry budget spent"


_HANDLERS = {
    CLAIM: Agent._claimed,
    LOOK: Agent._looked,
    START: Agent._started,
    START_AGAIN: Agent._started_again,
    WORK: Agent._worked,
    CHECKPOINTING: Agent._checkpointed,
    GRANT: Agent._granted,
    WAIT: Agent._waited,
    PERFORM: Agent._performed,
    REPORT: Agent._reported,
    RECEIPT: Agent._receipted,
    COMPLETE: Agent._completed,
    ACK: Agent._acknowledged,
    FAIL: Agent._failed,
}
"""Which method reads the answer to each phase's command."""
