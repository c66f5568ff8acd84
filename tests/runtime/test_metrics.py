"""`shiftchange worker|orchestrator --metrics-port N`: Prometheus metrics fed by what the worker and the control plane already see.

The in-process tests drive a worker on a stepping clock and an orchestrator's
duties by hand, and read the registry; the heavy one starts a real worker and
orchestrator, pauses the worker past its lease, and scrapes both over HTTP.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from shiftchange.agent import AgentConfig
from shiftchange.cli.main import main
from shiftchange.core import CoreConfig, LedgerProvider, MemoryStore, Orchestrator, ProviderTimeout, ReliabilityConfig
from shiftchange.core.config import BreakerConfig
from shiftchange.runtime.clock import SteppingClock, WallClock
from shiftchange.runtime.config import RuntimeConfig
from shiftchange.runtime.control import ControlProcess
from shiftchange.runtime.http_provider import HttpProvider
from shiftchange.runtime.metrics import Metrics, start_metrics
from shiftchange.runtime.worker import Worker
from shiftchange.runtime.workload import submit
from shiftchange.stores import open_store

needs_client = pytest.mark.skipif(
    importlib.util.find_spec("prometheus_client") is None, reason="the metrics extra is not installed (pip install -e '.[dev]')"
)

CONFIG = RuntimeConfig()
SHORT = CoreConfig(lease_ttl_s=0.3, heartbeat_interval_s=0.1, cancel_ack_timeout_s=1.0, timeout_budget_s=60.0, call_deadline_max_s=5.0)


def fresh_registry():
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


def value(registry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def scraped(text: str) -> dict[tuple[str, tuple], float]:
    """A /metrics page as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for (sample, have), v in samples.items() if sample == name and set(labels.items()) <= set(have))


# ---------------------------------------------------------------- a worker, in process


class TimingOut:
    """A provider that never answers in time."""

    def call(self, key, operation, identity, task_id, worker_id, deadline_at, via_gateway=True):
        raise ProviderTimeout("no answer by the deadline")


class Ledger:
    def __init__(self, ledger: LedgerProvider) -> None:
        self.ledger = ledger

    def call(self, key, operation, identity, task_id, worker_id, deadline_at, via_gateway=True):
        return self.ledger.perform(key, operation, identity, "")


@needs_client
def test_a_worker_counts_its_contracts_provider_calls_and_dependencies():
    """Goal: every contract's answer is counted (accepted by contract), every provider call by outcome; the gateway's breakers
    and concurrency limits are read after the commands; the lease gauge is 1 only while an Attempt is held."""
    clock = SteppingClock(1000.0)
    ledger = LedgerProvider(clock=clock)
    orchestrator = Orchestrator(MemoryStore(), clock, ledger, CONFIG.core)
    submit(orchestrator, "t1", CONFIG)
    orchestrator.run_admission()
    metrics = Metrics("worker", fresh_registry())
    worker = Worker(orchestrator, Ledger(ledger), CONFIG, "w1", clock=clock, metrics=metrics)
    registry = metrics.registry
    assert worker.attempt() is True
    for contract, count in (("claim_next", 1), ("start_attempt", 1), ("grant_tool", 6), ("record_receipt", 6), ("complete_attempt", 1)):
        assert value(registry, "shiftchange_contracts_accepted_total", contract=contract) == count, contract
    assert value(registry, "shiftchange_provider_calls_total", dependency="model_provider", outcome="landed") == 4
    assert value(registry, "shiftchange_provider_calls_total", dependency="code_host", outcome="landed") == 2
    assert value(registry, "shiftchange_provider_call_duration_seconds_count", dependency="code_host") == 2
    assert value(registry, "shiftchange_breaker_state", dependency="code_host", state="closed") == 1
    assert value(registry, "shiftchange_breaker_state", dependency="code_host", state="open") == 0
    assert value(registry, "shiftchange_concurrency_limit", dependency="code_host") > 0
    assert registry.get_sample_value("shiftchange_calls_in_flight", {"dependency": "code_host"}) == 0
    assert value(registry, "shiftchange_worker_lease_held") == 0, "released when the Attempt stopped"
    assert worker.attempt() is False, "nothing left to claim: an empty claim is neither accepted nor refused"
    assert value(registry, "shiftchange_contracts_accepted_total", contract="claim_next") == 1
    assert registry.get_sample_value("shiftchange_contracts_refused_total", {"contract": "claim_next", "code": "guard"}) is None


@needs_client
def test_a_worker_counts_calls_held_back_by_an_open_circuit_and_refusals_by_code():
    """Goal: a call the gateway holds back for an open circuit (the agent's held_back) is counted with its dependency and reason;
    the refusals are counted by their code; the breaker's state is the gauge's."""
    clock = SteppingClock(1000.0)
    reliability = ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, cool_down_s=2.0))
    orchestrator = Orchestrator(MemoryStore(), clock, LedgerProvider(clock=clock), CONFIG.core, reliability)
    submit(orchestrator, "t1", CONFIG)
    orchestrator.run_admission()
    metrics = Metrics("worker", fresh_registry())
    worker = Worker(orchestrator, TimingOut(), CONFIG, "w1", clock=clock, metrics=metrics)
    registry = metrics.registry
    assert worker.attempt() is True
    assert value(registry, "shiftchange_provider_calls_total", dependency="model_provider", outcome="timeout") >= 1
    assert value(registry, "shiftchange_calls_held_back_total", dependency="model_provider", reason="circuit_open") >= 1
    assert value(registry, "shiftchange_contracts_refused_total", contract="grant_tool", code="open_circuit") >= 1
    states = {
        s: value(registry, "shiftchange_breaker_state", dependency="model_provider", state=s) for s in ("closed", "open", "half_open")
    }
    assert sum(states.values()) == 1 and states["closed"] == 0, states


def test_a_worker_without_a_port_records_nothing_and_never_imports_the_library():
    """Goal: the metrics are an optional extra: without --metrics-port nothing is counted and prometheus_client is not imported."""
    off = start_metrics("worker", None)
    assert off.on is False and off.registry is None
    off.answered("claim_next", None)
    off.held_back("code_host", ("circuit_allows",))
    code = "import sys, shiftchange.runtime.worker, shiftchange.runtime.control; print('prometheus_client' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


# ---------------------------------------------------------------- an orchestrator's duties, in process


@needs_client
def test_an_orchestrator_counts_expiry_detection_recovery_decisions_and_escalations(tmp_path, provider_url):
    """Goal: a lease left to run out is expired by the reaper (counted, with its time to detect from the last renewal), the
    survey sees the Attempt Suspect, the loop's decision and retry are counted, the next claim of the task is its time to
    recover; a failure whose domain escalates is an escalation by the task's resting state."""
    config = RuntimeConfig(core=SHORT)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    metrics = Metrics("orchestrator", fresh_registry())
    registry = metrics.registry
    control = ControlProcess(url, provider_url, config, "o1", metrics=metrics)
    store = open_store(url)
    clock = WallClock()
    workers = Orchestrator(store, clock, HttpProvider(provider_url, clock=clock), SHORT)
    try:
        submit(workers, "t1", config)
        submit(workers, "t2", config)
        control.admission_step()
        assert value(registry, "shiftchange_admission_leader") == 1
        left = workers.claim_attempt("t1", "w1", config.workspace, True)
        failing = workers.claim_attempt("t2", "w2", config.workspace, True).lease
        workers.start_attempt(failing.attempt_id, failing.generation, failing.token)
        workers.report_failure(failing.attempt_id, failing.generation, failing.token, "configuration", "configuration:no such key")
        control.survey_step()
        assert value(registry, "shiftchange_leases_held") == 1 and value(registry, "shiftchange_attempts", state="claimed") == 1
        time.sleep(SHORT.lease_ttl_s + 0.1)
        control.survey_step()
        assert value(registry, "shiftchange_leases_run_out") == 1, "past its expiry, not yet reaped"
        control.reap_step()
        assert value(registry, "shiftchange_leases_expired_total") == 1
        assert value(registry, "shiftchange_time_to_detect_seconds_count") == 1
        assert SHORT.lease_ttl_s <= value(registry, "shiftchange_time_to_detect_seconds_sum") < 5.0
        control.survey_step()
        assert value(registry, "shiftchange_attempts", state="suspect") == 1 and value(registry, "shiftchange_leases_held") == 0
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            control.loop_step()
            control.admission_step()
            claim = workers.claim_next("w3", config.workspace, True)
            if claim is not None and claim.accepted:
                break
            time.sleep(0.05)
        assert claim is not None and claim.accepted and claim.lease.task_id == "t1"
        control.survey_step()
        assert value(registry, "shiftchange_time_to_recover_seconds_count") == 1 and control.watched == {}
        assert value(registry, "shiftchange_contracts_accepted_total", contract="reconcile_attempt") >= 1
        assert value(registry, "shiftchange_contracts_accepted_total", contract="retry") == 1
        assert value(registry, "shiftchange_decisions_total", decision="retry") == 1
        assert value(registry, "shiftchange_decisions_total", decision="escalate") == 1
        assert value(registry, "shiftchange_escalations_total", state="escalated") == 1
        assert value(registry, "shiftchange_tasks", state="escalated") == 1
        assert left.accepted
    finally:
        store.close()
        control.close()


# ---------------------------------------------------------------- the commands


def test_a_metrics_port_without_prometheus_client_is_one_line_and_exit_2_before_the_store_is_made(
    tmp_path, capsys, monkeypatch, provider_url
):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if the extra were not installed
    for command in ("worker", "orchestrator"):
        path = tmp_path / f"{command}.db"
        status = main([command, "--store", f"sqlite:///{path}", "--provider", provider_url, "--metrics-port", "0"])
        out, err = capsys.readouterr()
        assert status == 2 and out == ""
        assert err.count("\n") == 1 and "prometheus_client" in err and "shiftchange[metrics]" in err, err
        assert not path.exists(), "refused before the store was opened"


def test_a_missing_prometheus_client_is_named_before_an_unreachable_provider(tmp_path, capsys, monkeypatch):
    """The library is checked first: what the user must install is said even when the provider does not answer."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    path = tmp_path / "w.db"
    status = main(["worker", "--store", f"sqlite:///{path}", "--provider", "http://127.0.0.1:9", "--metrics-port", "0"])
    _, err = capsys.readouterr()
    assert status == 2 and err.count("\n") == 1 and "prometheus_client" in err, err
    assert not path.exists()


@needs_client
def test_a_metrics_port_taken_or_out_of_range_is_one_line_and_exit_2(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = tmp_path / "w.db"
        status = main(["worker", "--store", f"sqlite:///{path}", "--provider", "http://127.0.0.1:9", "--metrics-port", str(port)])
        _, err = capsys.readouterr()
        assert status == 2 and err.count("\n") == 1 and f"127.0.0.1:{port}" in err and "in use" in err, err
        assert not path.exists()
    for bad in ("70000", "-1", "x"):
        status = main(["orchestrator", "--store", "sqlite:///x.db", "--provider", "http://127.0.0.1:9", "--metrics-port", bad])
        _, err = capsys.readouterr()
        assert status == 2 and err.count("\n") == 1 and "--metrics-port" in err and "0 to 65535" in err, err


# ---------------------------------------------------------------- real processes, scraped over HTTP


def _served(log: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        found = re.search(r"serving metrics on (http://\S+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no metrics URL in {log}: {log.read_text(errors='replace')[-2000:]}")


def _scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return scraped(answer.read().decode())


@needs_client
@pytest.mark.heavy
def test_a_worker_and_an_orchestrator_serve_real_counts_after_a_pause_past_the_lease(tmp_path, provider_url):
    """Goal: the issue's check: a worker and an orchestrator started as commands with --metrics-port serve /metrics; after the
    worker is paused past its lease (SIGSTOP, SIGCONT), the scrapes show contracts accepted and refused, provider calls, the
    lease expired, its time to detect and to recover, and the loop's decisions."""
    core = CoreConfig(lease_ttl_s=1.0, heartbeat_interval_s=0.25, cancel_ack_timeout_s=2.0, timeout_budget_s=60.0, call_deadline_max_s=5.0)
    config = RuntimeConfig(
        core=core, tool_call_s=0.3, commit_s=0.05, idle_poll_s=0.1, reap_interval_s=0.1,
        agent=AgentConfig(call_deadline_s=2.0, gateway_retries_max=4, gateway_retry_s=0.2),
        loop_interval_s=0.1, admission_interval_s=0.1, leader_lease_s=0.5, ci_s=0.1, review_s=0.05,
    )  # fmt: skip
    (tmp_path / "config.json").write_text(config.to_json())
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        clock = WallClock()
        submitter = Orchestrator(store, clock, HttpProvider(provider_url, clock=clock), core)
        for number in range(3):
            submit(submitter, f"t{number}", config)
    common = ["--store", url, "--provider", provider_url, "--config", str(tmp_path / "config.json"), "--metrics-port", "0"]
    children = {}
    try:
        for kind in ("orchestrator", "worker"):
            log = tmp_path / f"{kind}.log"
            with open(log, "wb") as out:
                argv = [sys.executable, "-m", "shiftchange", kind, *common, "--id", f"{kind}-1"]
                children[kind] = (subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT), log)
        deadline = time.monotonic() + 30.0
        urls = {kind: _served(log, deadline) for kind, (_child, log) in children.items()}
        worker = children["worker"][0]
        while _scrape(urls["worker"]).get(("shiftchange_worker_lease_held", ()), 0) != 1:
            assert time.monotonic() < deadline, "the worker never held a lease"
            time.sleep(0.05)
        worker.send_signal(signal.SIGSTOP)
        time.sleep(core.lease_ttl_s * 1.6)
        worker.send_signal(signal.SIGCONT)
        while total(_scrape(urls["orchestrator"]), "shiftchange_time_to_recover_seconds_count") < 1:
            assert time.monotonic() < deadline, "no recovery seen by the orchestrator's survey"
            time.sleep(0.1)
        worker_seen, control_seen = _scrape(urls["worker"]), _scrape(urls["orchestrator"])
    finally:
        for child, _log in children.values():
            child.send_signal(signal.SIGCONT)
            child.send_signal(signal.SIGTERM)
        statuses = {kind: child.wait(15) for kind, (child, _log) in children.items()}
    assert statuses == {"orchestrator": 0, "worker": 0}
    for name, labels in (("claim_next", {}), ("start_attempt", {}), ("grant_tool", {}), ("renew_lease", {})):
        assert total(worker_seen, "shiftchange_contracts_accepted_total", contract=name, **labels) >= 1, name
    assert total(worker_seen, "shiftchange_contracts_refused_total") >= 1, "the paused worker woke to a refusal"
    assert total(worker_seen, "shiftchange_provider_calls_total", outcome="landed") >= 1
    assert total(worker_seen, "shiftchange_breaker_state", dependency="code_host", state="closed") == 1
    assert total(worker_seen, "shiftchange_process_info", kind="worker", id="worker-1") == 1
    assert total(control_seen, "shiftchange_leases_expired_total") >= 1
    assert total(control_seen, "shiftchange_time_to_detect_seconds_count") >= 1
    assert total(control_seen, "shiftchange_time_to_detect_seconds_sum") >= core.lease_ttl_s
    assert total(control_seen, "shiftchange_time_to_recover_seconds_sum") > 0
    assert total(control_seen, "shiftchange_contracts_accepted_total", contract="reconcile_attempt") >= 1
    assert total(control_seen, "shiftchange_decisions_total") >= 1
    assert total(control_seen, "shiftchange_admission_leader") == 1
    assert ("shiftchange_attempts", (("state", "suspect"),)) in control_seen


# ---------------------------------------------------------------- the document


@needs_client
def test_docs_metrics_lists_every_metric_a_process_serves_and_no_other():
    """Goal: docs/metrics.md is the list an operator reads: each metric either process registers has its row (by the name a
    scrape shows: counters with _total, the info with _info), and the document names no metric that is not served."""
    served = set()
    for kind in ("worker", "orchestrator"):
        for family in Metrics(kind, fresh_registry()).registry.collect():
            suffix = {"counter": "_total", "info": "_info"}.get(family.type, "")
            served.add(family.name + suffix)
    document = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(shiftchange_\w+)` \|", document, flags=re.MULTILINE))
    named = set(re.findall(r"\b(shiftchange_[a-z_]+?)(?:_bucket|_sum|_count)?\b", document))
    assert rows == served, f"not documented: {sorted(served - rows)}; not served: {sorted(rows - served)}"
    assert named <= served, f"named in the document but not served: {sorted(named - served)}"
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "(docs/metrics.md)" in readme
