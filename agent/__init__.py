"""The worker's reference, sans-I/O: the worker protocol as a state machine and the control plane's decisions.

Beside the core (the orchestrator's side), this is the other half a port
needs: `Agent` turns a claim and then each answer into the next `Command`
(call a contract, call a provider with this key and deadline, wait, do local
work, look up the predecessor, stop); `Cadence` says when the heartbeat
renews; `Agenda`, `retry_for` and `blind_retry` are every decision a
control plane makes. The simulator, the explorer and the real runtime are
drivers of these, and contain no decision of their own. Nothing here sleeps,
reads a clock, draws unseeded randomness, or imports SimPy or a database
driver.
"""

from .commands import Call, Command, Look, Looked, Perform, Stop, Wait, Work
from .control import Agenda, Delays, Retry, blind_retry, next_hypothesis, reconcile_settled, retry_for
from .heartbeat import Cadence, renewals_inside_lease
from .worker import LEASE_GONE, Agent, AgentConfig, WorkerSeams, agent_config
from .workflow import ChapterWorkflow, OperationsWorkflow, Step, Workflow, head_sha, resume_after

__all__ = [
    "LEASE_GONE",
    "Agenda",
    "Agent",
    "AgentConfig",
    "Cadence",
    "Call",
    "ChapterWorkflow",
    "Command",
    "Delays",
    "Look",
    "Looked",
    "OperationsWorkflow",
    "Perform",
    "Retry",
    "Step",
    "Stop",
    "Wait",
    "Work",
    "WorkerSeams",
    "Workflow",
    "agent_config",
    "blind_retry",
    "head_sha",
    "next_hypothesis",
    "reconcile_settled",
    "renewals_inside_lease",
    "resume_after",
    "retry_for",
]
