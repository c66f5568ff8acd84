"""Prometheus metrics for `shiftchange worker` and `shiftchange orchestrator` (`--metrics-port N`); docs/metrics.md lists them.

The core and the agent count nothing and serve nothing: they stay sans-I/O.
What an operator watches is already seen by the processes that drive them.
A worker sees every contract's answer (the refusal's `code` included), every
provider call, the agent's `held_back` count, and, after each command, its
own gateway's breakers and concurrency limits (this process's memory of its
dependencies, as the core keeps them). An orchestrator sees what its duties
did (each reap, reconciliation, verification, decision) and, on its own
cadence, a scan of the store's live records: Attempts and tasks by state,
leases held and run out, the oldest wait to be claimed. Both hand that to a
`Metrics` here, which turns it into Prometheus's counters, gauges and
histograms in a registry of its own and serves them over HTTP.

`prometheus_client` is an optional extra (`pip install 'shiftchange[metrics]'`),
imported only when a port is given: without one, a process records into a
`Metrics` with no registry, whose every method returns at once. A port given
without the library installed, or one that cannot be bound, is an
InputError (one line, exit status 2 on the command line), said before the
store is opened.

Names follow Prometheus's conventions: a `shiftchange_` prefix, the unit in
the name (`_seconds`), counters ending in `_total`, one metric with a label
where the values are kinds of one thing (`state`, `code`, `dependency`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from shiftchange.core import InputError

__all__ = ["DURATION_BUCKETS_S", "INSTALL", "KINDS", "Metrics", "MetricsServer", "start_metrics"]

log = logging.getLogger("shiftchange.metrics")

INSTALL = "pip install 'shiftchange[metrics]'"
KINDS = ("worker", "orchestrator")
DURATION_BUCKETS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""Time to detect and to recover: from under a second (a test's short lease) to an hour (a lease of many minutes, a long queue)."""
PROVIDER_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
HELD_BACK_REASONS = {"circuit_allows": "circuit_open", "concurrency_allows": "concurrency_limit", "retry_budget_allows": "retry_budget"}
"""The gateway's guard that held a call back -> the `reason` label (as the agent's failure signature words it)."""
BREAKER_STATES = ("closed", "open", "half_open")


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise InputError(f"--metrics-port needs the prometheus_client package, which is not installed: {INSTALL}") from None
    return prometheus_client


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds is not worth a line on stderr."""


class MetricsServer:
    """The HTTP server of one registry, on a daemon thread: `/metrics` (any path answers the same, as Prometheus's own does)."""

    def __init__(self, registry: Any, host: str, port: int) -> None:
        app = _client().make_wsgi_app(registry)
        try:
            self._httpd = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        except OSError as error:
            raise InputError(f"cannot serve metrics on {host}:{port}: {error.strerror or error}") from None
        self.host = host
        self.port = int(self._httpd.server_port)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="metrics", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)


class Metrics:
    """What one worker or orchestrator process counts. With no registry (no `--metrics-port`), every method returns at once.

    The methods take what the process already has in hand (a contract's
    answer, a scan's records) and are safe to call from any thread.
    """

    def __init__(self, kind: str, registry: Any = None) -> None:
        if kind not in KINDS:
            raise InputError(f"a metrics kind is one of {', '.join(KINDS)}, not {kind!r}")
        self.kind = kind
        self.registry = registry
        self.server: MetricsServer | None = None
        if registry is None:
            return
        client = _client()
        counter, gauge, histogram = client.Counter, client.Gauge, client.Histogram
        on = {"registry": registry}
        self._info = client.Info("shiftchange_process", "This process: its kind, its id, the spec its core runs", **on)
        self._accepted = counter(
            "shiftchange_contracts_accepted", "Contract calls this process made that were accepted, by contract", ["contract"], **on
        )
        self._refused = counter(
            "shiftchange_contracts_refused",
            "Contract calls this process made that were refused, by contract and refusal code",
            ["contract", "code"],
            **on,
        )
        self._unanswered = counter(
            "shiftchange_contracts_unanswered",
            "Contract calls that got no answer (the store did not answer, or a provider it asked was away), by contract",
            ["contract"],
            **on,
        )
        if kind == "worker":
            self._lease_held = gauge("shiftchange_worker_lease_held", "1 while this worker believes it holds a lease, else 0", **on)
            self._held_back = counter(
                "shiftchange_calls_held_back",
                "Provider calls the gateway held back for the dependency's sake (they wait and ask again), by dependency and reason",
                ["dependency", "reason"],
                **on,
            )
            self._provider_calls = counter(
                "shiftchange_provider_calls", "Provider calls made, by dependency and outcome", ["dependency", "outcome"], **on
            )
            self._provider_seconds = histogram(
                "shiftchange_provider_call_duration_seconds",
                "How long a provider call took to answer (or to time out), by dependency",
                ["dependency"],
                buckets=PROVIDER_BUCKETS_S,
                **on,
            )
            self._breaker = gauge(
                "shiftchange_breaker_state",
                "This worker's circuit breaker of each dependency: 1 for the state it is in, 0 for the others",
                ["dependency", "state"],
                **on,
            )
            self._limit = gauge(
                "shiftchange_concurrency_limit", "This worker's adaptive concurrency limit of each dependency (calls)", ["dependency"], **on
            )
            self._in_flight = gauge(
                "shiftchange_calls_in_flight",
                "Calls this worker's gateway granted to each dependency and not yet answered",
                ["dependency"],
                **on,
            )
        else:
            self._leader = gauge("shiftchange_admission_leader", "1 while this orchestrator holds the admission leader lease, else 0", **on)
            self._attempts = gauge("shiftchange_attempts", "Attempts in each state that is not terminal (store-wide)", ["state"], **on)
            self._tasks = gauge("shiftchange_tasks", "Tasks in each state that is not terminal (store-wide)", ["state"], **on)
            self._leases_held = gauge("shiftchange_leases_held", "Attempts holding a lease (store-wide)", **on)
            self._leases_run_out = gauge(
                "shiftchange_leases_run_out", "Leases past their expiry that the reaper has not yet expired (store-wide)", **on
            )
            self._expired = counter("shiftchange_leases_expired", "Leases this orchestrator's reaper expired (Attempts made Suspect)", **on)
            self._cancel_timeouts = counter(
                "shiftchange_cancellations_timed_out", "Cancellations the worker never acknowledged (Attempts made Reconciling)", **on
            )
            self._detect = histogram(
                "shiftchange_time_to_detect_seconds",
                "From a lease's last renewal (or its claim) to the reaper expiring it",
                buckets=DURATION_BUCKETS_S,
                **on,
            )
            self._recover = histogram(
                "shiftchange_time_to_recover_seconds",
                "From a lease expired by this orchestrator to the next accepted claim of a later Attempt of its task",
                buckets=DURATION_BUCKETS_S,
                **on,
            )
            self._queue_age = gauge(
                "shiftchange_queue_oldest_age_seconds",
                "How long the oldest Attempt waiting to be claimed (queued or admitted, past its backoff) has waited; 0 when none",
                **on,
            )
            self._decisions = counter(
                "shiftchange_decisions", "The loop's decisions after an Attempt ended, by decision", ["decision"], **on
            )
            self._escalations = counter(
                "shiftchange_escalations",
                "Decisions that left a task resting for a person (blocked, escalated, quarantined), by the task's state",
                ["state"],
                **on,
            )
            self._duty_failures = counter(
                "shiftchange_duty_failures",
                "Rounds of a duty (admission, reap, loop, number, survey) that got no answer from the store or provider",
                ["duty"],
                **on,
            )

    @property
    def on(self) -> bool:
        return self.registry is not None

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    # ------------------------------------------------------------ both kinds

    def identify(self, process_id: str, spec_label: str, spec_digest: str) -> None:
        if self.on:
            self._info.info({"kind": self.kind, "id": process_id, "spec": spec_label, "digest": spec_digest})

    def answered(self, contract: str, answer: Any) -> None:
        """A contract's answer: counted accepted, or refused with its code; None (nothing to claim) is neither."""
        if not self.on or answer is None:
            return
        if getattr(answer, "accepted", True):
            self._accepted.labels(contract).inc()
        else:
            self._refused.labels(contract, str(getattr(answer, "code", None) or "unknown")).inc()

    def unanswered(self, contract: str) -> None:
        if self.on:
            self._unanswered.labels(contract).inc()

    # ------------------------------------------------------------ a worker

    def lease_held(self, holding: bool) -> None:
        if self.on:
            self._lease_held.set(1 if holding else 0)

    def held_back(self, dependency: str, guards: Iterable[str], count: int = 1) -> None:
        """The agent held a call back (its `held_back` grew): the gateway's refusal names the guard that stood in the way."""
        if self.on:
            reason = next((HELD_BACK_REASONS[guard] for guard in guards if guard in HELD_BACK_REASONS), "retry_budget")
            self._held_back.labels(dependency, reason).inc(count)

    def performed(self, dependency: str, outcome: str, seconds: float) -> None:
        """A provider call answered (`landed`), timed out (`timeout`) or was refused (`refused`), after `seconds`."""
        if self.on:
            self._provider_calls.labels(dependency, outcome).inc()
            self._provider_seconds.labels(dependency).observe(max(0.0, seconds))

    def dependencies(self, breakers: Mapping[str, str], limits: Mapping[str, tuple[float, int]]) -> None:
        """Each dependency's breaker state, and its concurrency limit with the calls in flight (an infinite limit is not set)."""
        if not self.on:
            return
        for dependency, state in breakers.items():
            for each in BREAKER_STATES:
                self._breaker.labels(dependency, each).set(1 if each == state else 0)
        for dependency, (limit, in_flight) in limits.items():
            if limit != float("inf"):
                self._limit.labels(dependency).set(limit)
            self._in_flight.labels(dependency).set(in_flight)

    # ------------------------------------------------------------ an orchestrator

    def leading(self, leader: bool) -> None:
        if self.on:
            self._leader.set(1 if leader else 0)

    def survey(
        self,
        attempts: Mapping[str, int],
        tasks: Mapping[str, int],
        leases_held: int,
        leases_run_out: int,
        oldest_wait_s: float,
    ) -> None:
        """A scan of the store's live records: counts by state (every state named, 0 included), leases, the oldest wait."""
        if not self.on:
            return
        for state, count in attempts.items():
            self._attempts.labels(state).set(count)
        for state, count in tasks.items():
            self._tasks.labels(state).set(count)
        self._leases_held.set(leases_held)
        self._leases_run_out.set(leases_run_out)
        self._queue_age.set(max(0.0, oldest_wait_s))

    def expired(self, detect_s: float | None) -> None:
        """The reaper expired a lease; `detect_s` from its last renewal, when the record says."""
        if self.on:
            self._expired.inc()
            if detect_s is not None:
                self._detect.observe(max(0.0, detect_s))

    def cancellation_timed_out(self) -> None:
        if self.on:
            self._cancel_timeouts.inc()

    def recovered(self, recover_s: float) -> None:
        if self.on:
            self._recover.observe(max(0.0, recover_s))

    def decided(self, decision: str, resting: str | None) -> None:
        """A decision of the loop; `resting` is the task's state when it left the task waiting for a person."""
        if self.on:
            self._decisions.labels(decision).inc()
            if resting is not None:
                self._escalations.labels(resting).inc()

    def duty_failed(self, duty: str) -> None:
        if self.on:
            self._duty_failures.labels(duty).inc()


def start_metrics(kind: str, port: int | None, host: str = "127.0.0.1") -> Metrics:
    """The process's `Metrics`, served on `host:port` (0: any free port) when a port is given; with None, one that records nothing.

    InputError when prometheus_client is not installed or the port cannot be bound.
    """
    if port is None:
        return Metrics(kind)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InputError(f"a metrics port is a whole number from 0 to 65535, not {port!r}")
    client = _client()
    metrics = Metrics(kind, client.CollectorRegistry())
    metrics.server = MetricsServer(metrics.registry, host, port)
    log.info("serving metrics on %s", metrics.server.url)
    return metrics
