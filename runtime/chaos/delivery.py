"""How a chaos run delivers its faults: a keeper thread that continues paused workers on time, and each fault to the
process it strikes (a worker chosen by the seed among those that can take it)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .plan import (
    _ORCHESTRATOR,
    _PROVIDER,
    CONN_KILL,
    DROP,
    KILL,
    ORCHESTRATOR_KILL,
    PAUSE,
    SKEW,
    SKEW_VARIABLE,
    TICK_S,
    ChaosError,
    Delivered,
    Fault,
)
from .processes import _Child

if TYPE_CHECKING:
    pass


class _Delivery:
    """The fault half of `_Run`: delivering the schedule and continuing paused processes, over its children."""

    def _start_keeper(self) -> None:
        self.keeper = threading.Thread(target=self._keep, name="chaos-keeper", daemon=True)
        self.keeper.start()

    def _keep(self) -> None:
        """The keeper thread: continue every paused process whose pause is over, whatever the main thread is waiting for."""
        try:
            while not self.keeper_stop.wait(TICK_S):
                with self.lock:
                    self._continue_due(self.wall.now())
        except Exception as error:  # said by the main thread, which stops the run
            self.keeper_error = f"{type(error).__name__}: {error}"

    def _check_keeper(self) -> None:
        if self.keeper_error:
            raise ChaosError(f"the harness could not continue a paused process: {self.keeper_error}")

    def _stop_keeper(self) -> None:
        self.keeper_stop.set()
        if self.keeper is not None:
            self.keeper.join()

    def _continue_due(self, now: float) -> None:
        for child in self.children.values():
            if child.paused_until is not None and child.paused_until <= now:
                self._continue(child)

    def _tend(self, now: float) -> None:
        """Notice processes that exited on their own (restart them), and start those whose restart is due (main thread only)."""
        for child in self.children.values():
            if child.process is not None and child.process.poll() is not None:
                status = child.process.returncode
                child.exits.append(status)
                self.unexpected.append({"process": child.name, "status": status, "at": round(now, 3), "log": child.tail(3)})
                child.process = None
                child.paused_until = None
                child.restart_at = now + 1.0
                self._say(f"chaos: {child.name} exited on its own with status {status}; restarting it (see {child.log_path})")
            if child.process is None and child.restart_at is not None and child.restart_at <= now:
                child.start()

    def _continue(self, child: _Child) -> None:
        child.signal(signal.SIGCONT)
        child.paused_until = None

    def _worker_for(self, target: int, eligible: Callable[[_Child], bool]) -> _Child | None:
        """The drawn worker if it can take the fault, else the next one that can (round robin), else None."""
        count = len(self.workers_by_index)
        for step in range(count):
            child = self.workers_by_index[(target + step) % count]
            if eligible(child):
                return child
        return None

    def _deliver(self, fault: Fault, now: float) -> None:
        """Deliver `fault` at `now` (the harness's clock); what was delivered is stamped on the store's clock, as the history is."""
        kind = fault.kind
        at = self.judged.now()
        delivered: Delivered | None = None
        if kind == KILL:
            child = self._worker_for(fault.target, lambda c: c.running and not c.paused)
            if child is not None and child.kill():
                child.restart_at = now + fault.hold_s
                delivered = Delivered(at, kind, child.name, fault.hold_s, f"restart after {fault.hold_s:g} s")
        elif kind == PAUSE:
            child = self._worker_for(fault.target, lambda c: c.running and not c.paused)
            if child is not None and child.signal(signal.SIGSTOP):
                child.paused_until = now + fault.hold_s
                delivered = Delivered(at, kind, child.name, fault.hold_s, f"SIGSTOP for {fault.hold_s:g} s")
        elif kind == ORCHESTRATOR_KILL:
            child = self.children[_ORCHESTRATOR]
            if child.kill():
                child.restart_at = now + fault.hold_s
                delivered = Delivered(at, kind, child.name, fault.hold_s, f"restart after {fault.hold_s:g} s")
        elif kind == CONN_KILL:
            child = self._worker_for(fault.target, lambda c: c.running)
            if child is not None:
                terminated = self._terminate_backends(child.name)
                if terminated:
                    self.backends_terminated += terminated
                    delivered = Delivered(at, kind, child.name, 0.0, f"{terminated} session(s) terminated")
        elif kind == DROP:
            try:
                self.provider.set_faults(drop_responses=1)
                delivered = Delivered(at, kind, _PROVIDER, 0.0, "the next response dropped")
            except Exception as error:
                self._say(f"chaos: could not ask the provider to drop a response: {type(error).__name__}: {error}")
        elif kind == SKEW:
            child = self._worker_for(fault.target, lambda c: c.running and not c.paused)
            if child is not None and child.kill():
                child.env[SKEW_VARIABLE] = f"{fault.skew_s:+g}"
                child.restart_at = now + fault.hold_s
                detail = f"restart after {fault.hold_s:g} s with its clock {fault.skew_s:+g} s"
                delivered = Delivered(at, kind, child.name, fault.hold_s, detail, fault.skew_s)
        if delivered is None:
            self.skipped[kind] += 1
        else:
            self.delivered.append(delivered)

    def _terminate_backends(self, worker_id: str) -> int:
        if self.admin is None:
            return 0
        try:
            rows = self.admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
                (f"shiftchange-worker:{worker_id}",),
            ).fetchall()
        except Exception as error:
            self.admin_error = f"{type(error).__name__}: {error}"
            return 0
        return sum(1 for (done,) in rows if done)
