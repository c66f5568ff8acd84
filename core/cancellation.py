"""Cancellation is a protocol, not a flag: prevent new claims and grants, signal, acknowledge or time out, reconcile, terminate.

`cancel_attempt` moves the Attempt to Cancelling, which refuses new claims
and tool grants; the worker learns of it from its next renewal and
acknowledges under its fence, or the reaper times the acknowledgement out
(`cancel_ack_timeout_s`). Either way the Attempt is reconciled before it may
end Cancelled, since effects may be in flight. An Attempt nobody ever claimed
has nobody to signal and goes straight to Reconciling. `cancel_task` cancels
the Task and runs the protocol on its active Attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .context import Context, contract
from .results import Accepted, Refused, Result
from .validate import fence_arguments, text


class Cancellation:
    """cancel_attempt, acknowledge_cancel and cancel_task."""

    __slots__ = ("_context", "_reconcile")

    def __init__(self, context: Context, reconcile: Callable[[str], Any]) -> None:
        self._context = context
        self._reconcile = reconcile

    @contract
    def cancel_attempt(self, attempt_id: Any, reason: Any) -> Result:
        """Request cancellation; with nobody to signal, or already reconciling, reconcile at once."""
        text(attempt_id, "attempt_id", 220)
        text(reason, "reason", 2000)
        context = self._context
        with context as tx:
            attempt = context.attempt(tx, attempt_id)
            result = context.fire(tx, attempt, "cancel", "operator", {"reason": reason}, detail=reason)
            if result.accepted and attempt.state == "cancelling" and attempt.token_digest is None:
                result = context.fire(tx, attempt, "cancel_unclaimed", "orchestrator", detail="nobody to signal")
            reconcile = attempt.state == "reconciling"
        return self._reconcile(attempt.attempt_id) if reconcile else result

    @contract
    def acknowledge(self, attempt_id: Any, generation: Any, token: Any) -> Result:
        """The signalled worker acknowledges under its fence; the Attempt is then reconciled."""
        fence_arguments(attempt_id, generation, token)
        context = self._context
        with context as tx:
            attempt = context.addressed(tx, attempt_id, "cancel_acknowledged")
            given = {"acknowledgement": "acknowledged by the executor"}
            result = context.fire(tx, attempt, "cancel_acknowledged", "worker", given, generation, token)
        return self._reconcile(attempt.attempt_id) if result.accepted else result

    @contract
    def cancel_task(self, task_id: Any, reason: Any) -> Refused | Accepted:
        """Cancel the task, and run the cancellation protocol on its active Attempt (the row's cancel_active_attempt)."""
        text(task_id, "task_id", 200)
        text(reason, "reason", 2000)
        context = self._context
        out: dict[str, Any] = {}
        with context as tx:
            task = context.task(tx, task_id)
            result = context.fire_task(tx, task, "cancel", "operator", {"attempts": tx.attempts_of(task.task_id)}, reason, out)
        active = out.get("cancel_attempt")
        if result.accepted and active is not None:
            self.cancel_attempt(active, reason)
        return result
