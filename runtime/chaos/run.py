"""One chaos run: prepare its folder and store, start its processes, submit the workload while the schedule strikes,
drain, stop every process, and judge (the fault delivery and the judging are mixins of their own)."""

from __future__ import annotations

import contextlib
import math
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .delivery import _Delivery
from .judging import _copy_spec, _Judging, _metrics_url
from .plan import (
    _FAULT_NOUNS,
    _ORCHESTRATOR,
    _PROVIDER,
    FAULT_KINDS,
    POSTGRES_ONLY,
    PROGRESS_EVERY_S,
    PROVIDER_START_S,
    SCRAPE_TIMEOUT_S,
    STOP_GRACE_S,
    SUBMIT_TRIES,
    TICK_S,
    ChaosError,
    ChaosFaults,
    Delivered,
    RunSpec,
    plan_faults,
    resolve_spec,
)
from .processes import _admin_conninfo, _Child, _die_with_parent, _kind_of, _masked, _python

if TYPE_CHECKING:
    from shiftchange.core.table import Table
    from shiftchange.runtime.config import RuntimeConfig


# ------------------------------------------------------------------ the run


class _Run(_Delivery, _Judging):
    """One chaos run's state: its processes, its store session, its schedule and what was delivered."""

    def __init__(
        self,
        store_url: str,
        workers: int,
        duration_s: float,
        seed: int,
        rate_per_s: float,
        run_dir: Path,
        faults: ChaosFaults,
        idempotency: bool,
        config: RuntimeConfig,
        drain_s: float,
        progress: Callable[[str], None] | None,
        spec: RunSpec | None = None,
        metrics: bool = False,
    ) -> None:
        """`spec` is what every core of the run runs (`resolve_spec`); None: the packaged spec, resolved when the run is prepared.
        `metrics`: the orchestrator and workers serve Prometheus metrics, scraped when the drain ends (`scrape`)."""
        from shiftchange.runtime.clock import WallClock

        self.wall = WallClock()
        """The harness's own clock: its schedule, its restarts and pauses (this process is never skewed by its faults)."""
        self.judged: Any = self.wall
        """The store's clock once the store is open (`lease_clock`): what a delivered fault is stamped on, as the history is."""
        self.store_url = store_url
        self.kind = _kind_of(store_url)
        self.workers = workers
        self.duration_s = duration_s
        self.seed = seed
        self.rate_per_s = rate_per_s
        self.run_dir = run_dir
        self.faults = faults
        self.idempotency = idempotency
        self.config = config
        self.drain_s = drain_s
        self.progress = progress
        self.logs = run_dir / "logs"
        self.ledger_path = run_dir / "ledger.jsonl"
        self.config_path = run_dir / "config.json"
        self.spec = spec
        self.metrics = metrics
        self.scraped: dict[str, Any] | None = None
        self.spec_dir: Path | None = None
        """The copy of a named spec the children run (`--spec`); None: they run the packaged one."""
        self.url_file = run_dir / "provider.url"
        self.prefix = f"chaos-{secrets.token_hex(3)}-"
        """This run's task ids start with it: the history of a store holding earlier runs is judged for this run's tasks only."""
        self.preexec = _die_with_parent()
        self.children: dict[str, _Child] = {}
        self.workers_by_index: list[_Child] = []
        self.store: Any = None
        self.orchestrator: Any = None
        self.provider: Any = None
        self.provider_url = ""
        self.admin: Any = None
        self.admin_error = ""
        self.task_ids: list[str] = []
        self.pending: set[str] = set()
        """Submitted tasks not yet seen at rest."""
        self.submit_failures: list[str] = []
        self.delivered: list[Delivered] = []
        self.skipped: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self.backends_terminated = 0
        self.unexpected: list[dict[str, Any]] = []
        self.stragglers: list[str] = []
        self.unclean: list[dict[str, Any]] = []
        self.provider_counters: dict[str, Any] = {}
        self.stopping = False
        self.lock = threading.Lock()
        """Held while the processes' state changes: by the keeper as it continues one, by the main thread otherwise."""
        self.keeper: threading.Thread | None = None
        self.keeper_stop = threading.Event()
        self.keeper_error = ""
        self.began = 0.0
        self.load_ended = 0.0
        self.drain_ended = 0.0
        self.drained = False
        self.at_rest: frozenset[str] = frozenset()

    # -------------------------------------------------------------- set-up

    def prepare(self) -> None:
        from shiftchange.core import CoreError
        from shiftchange.core.states import TASK_AT_REST
        from shiftchange.runtime.clock import lease_clock
        from shiftchange.stores import open_store

        self.at_rest = TASK_AT_REST
        if self.spec is None:
            self.spec = resolve_spec(None)
        if self.ledger_path.exists():
            raise ChaosError(f"{self.run_dir} already holds a run (its ledger.jsonl exists): give chaos a fresh --run-dir")
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            self.config_path.write_text(self.config.to_json() + "\n", encoding="utf-8")
            self.url_file.unlink(missing_ok=True)  # a URL left by an earlier, aborted run would be read as this provider's
        except OSError as error:
            raise ChaosError(f"cannot write the run into {self.run_dir}: {error.strerror or error}") from None
        if self.spec.source is not None:
            self.spec_dir = _copy_spec(self.spec, self.run_dir.absolute() / "spec")
        try:
            self.store = open_store(self.store_url)
            self.judged = lease_clock(self.store)
        except CoreError as error:
            raise ChaosError(f"cannot open the store {_masked(self.store_url)}: {error}") from None
        if self.kind == "postgresql":
            try:
                import psycopg

                self.admin = psycopg.connect(_admin_conninfo(self.store_url), autocommit=True, connect_timeout=10)
            except Exception as error:  # the connection kills are skipped, and the report says why
                self.admin_error = f"{type(error).__name__}: {error}"
        self._say(f"chaos: spec {self.spec.label}, digest {self.spec.digest}; read {', '.join(self.spec.files)}")

    def start_processes(self) -> None:
        from shiftchange.core import Orchestrator
        from shiftchange.runtime.http_provider import HttpProvider

        provider_argv = _python(
            "shiftchange", "provider", "--ledger", str(self.ledger_path), "--port", "0", "--url-file", str(self.url_file)
        )
        if not self.idempotency:
            provider_argv.append("--no-idempotency")
        provider = self._child(_PROVIDER, provider_argv)
        provider.start()
        self.provider_url = self._await_provider(provider)
        port = str(urlsplit(self.provider_url).port)
        provider.argv[provider.argv.index("--port") + 1] = port  # a restarted provider keeps its URL (and reloads its ledger)
        self.provider = HttpProvider(self.provider_url, clock=self.judged)
        self.orchestrator = Orchestrator(self.store, self.judged, self.provider, self.config.core, table=self._table)
        common = ["--store", self.store_url, "--provider", self.provider_url, "--config", str(self.config_path)]
        if self.spec_dir is not None:
            common += ["--spec", str(self.spec_dir)]
        if self.metrics:
            common += ["--metrics-port", "0"]  # any free port, logged; a restarted process binds another
        self._child(_ORCHESTRATOR, _python("shiftchange", "orchestrator", *common, "--id", _ORCHESTRATOR)).start()
        for index in range(self.workers):
            name = f"worker-{index + 1}"
            child = self._child(name, _python("shiftchange", "worker", *common, "--id", name))
            self.workers_by_index.append(child)
            child.start()

    @property
    def _table(self) -> Table:
        if self.spec is None:
            self.spec = resolve_spec(None)
        return self.spec.table

    def _child(self, name: str, argv: list[str]) -> _Child:
        child = self.children[name] = _Child(name, argv, self.logs / f"{name}.log", self.preexec, self.wall.now)
        return child

    def _await_provider(self, provider: _Child) -> str:
        deadline = time.monotonic() + PROVIDER_START_S
        while time.monotonic() < deadline:
            if self.url_file.exists():
                url = self.url_file.read_text(encoding="utf-8").strip()
                if url:
                    return url
            if not provider.running:
                break
            time.sleep(0.05)
        tail = " | ".join(provider.tail(3)) or "no output"
        raise ChaosError(f"the provider did not start (see {provider.log_path}): {tail}")

    # -------------------------------------------------------------- the load

    def play(self) -> None:
        schedule = plan_faults(
            self.duration_s, self.faults, self.workers, self.seed, self.config.core.lease_ttl_s, self.kind == "postgresql"
        )
        self.began = self.wall.now()
        self._start_keeper()
        next_fault = 0
        next_progress = self.began + PROGRESS_EVERY_S
        self._say(
            f"chaos: {self.workers} workers on {_masked(self.store_url)}, {self.duration_s:g} s at {self.rate_per_s:g} tasks/s,"
            f" {len(schedule)} faults planned; run dir {self.run_dir}"
        )
        while True:
            now = self.wall.now()
            elapsed_s = now - self.began
            if elapsed_s >= self.duration_s:
                break
            self._check_keeper()
            with self.lock:
                self._tend(now)
                while next_fault < len(schedule) and schedule[next_fault].at_s <= elapsed_s:
                    self._deliver(schedule[next_fault], self.wall.now())
                    next_fault += 1
            due = min(math.floor(elapsed_s * self.rate_per_s) + 1, math.ceil(self.duration_s * self.rate_per_s))
            submitted_now = 0
            while len(self.task_ids) < due and submitted_now < 10:
                self._submit(f"{self.prefix}{len(self.task_ids) + 1:06d}")
                submitted_now += 1
            if now >= next_progress:
                self._check_pending()
                self._say(self._progress_line(elapsed_s))
                next_progress = now + PROGRESS_EVERY_S
            time.sleep(TICK_S)
        self.load_ended = self.wall.now()

    def drain(self) -> None:
        """Faults off; everything running again; wait until every submitted task is at rest or the drain limit passes."""
        now = self.wall.now()
        with self.lock:
            for child in self.children.values():
                if child.paused:
                    self._continue(child)
                if child.restart_at is not None:
                    child.restart_at = now
        with contextlib.suppress(Exception):
            self.provider.set_faults(clear=True)
        self._say(f"chaos: load ended with {len(self.task_ids)} tasks submitted; draining (at most {self.drain_s:g} s)")
        deadline = now + self.drain_s
        next_check = 0.0
        while True:
            now = self.wall.now()
            self._check_keeper()
            with self.lock:
                self._tend(now)
            if now >= next_check:
                self._check_pending()
                if not self.pending:
                    self.drained = True
                    break
                next_check = now + 1.0
            if now >= deadline:
                break
            time.sleep(TICK_S * 4)
        self.drain_ended = self.wall.now()
        self._say(
            f"chaos: drained in {self.drain_ended - self.load_ended:.1f} s"
            if self.drained
            else f"chaos: drain limit reached with {len(self.pending)} tasks not at rest"
        )

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _progress_line(self, elapsed_s: float) -> str:
        counts = {kind: 0 for kind in FAULT_KINDS}
        for item in self.delivered:
            counts[item.kind] += 1
        kinds = [kind for kind in FAULT_KINDS if kind not in POSTGRES_ONLY or self.kind == "postgresql"]
        faults = ", ".join(f"{counts[kind]} {_FAULT_NOUNS[kind]}" for kind in kinds)
        at_rest = len(self.task_ids) - len(self.pending)
        return f"chaos: t={elapsed_s:.0f}/{self.duration_s:g} s, {len(self.task_ids)} submitted, {at_rest} at rest; {faults}"

    def _submit(self, task_id: str) -> None:
        """Create, accept and dispatch one task; after a store error, finish whatever of it did not land."""
        from shiftchange.core import Plan, StoreError, StoreRetryable
        from shiftchange.runtime.workload import first_hypothesis, submit

        last = ""
        for attempt in range(SUBMIT_TRIES):
            try:
                task = None if attempt == 0 else self.store.get_task(task_id)
                if task is None:
                    submit(self.orchestrator, task_id, self.config)
                elif task.state == "inbox":
                    self.orchestrator.accept_task(task_id)
                    self.orchestrator.dispatch(task_id, Plan(first_hypothesis(task_id)))
                elif task.state == "ready" and not self.store.get_attempts(task_id):
                    self.orchestrator.dispatch(task_id, Plan(first_hypothesis(task_id)))
                self.task_ids.append(task_id)
                self.pending.add(task_id)
                return
            except (StoreError, StoreRetryable) as error:  # unreachable, or busy past its lock timeout: try again
                last = f"{type(error).__name__}: {error}"
                time.sleep(0.2)
        self.submit_failures.append(f"{task_id}: {last}")
        with contextlib.suppress(StoreError, StoreRetryable):
            if self.store.get_task(task_id) is not None:  # created, but not seen through: it is judged like the rest
                self.task_ids.append(task_id)
                self.pending.add(task_id)

    def _check_pending(self) -> None:
        from shiftchange.core import StoreError, StoreRetryable

        for task_id in sorted(self.pending):
            try:
                task = self.store.get_task(task_id)
            except (StoreError, StoreRetryable):
                return  # asked again at the next check
            if task is not None and task.state in self.at_rest:
                self.pending.discard(task_id)

    # -------------------------------------------------------------- processes

    def scrape(self) -> None:
        """Each running orchestrator's and worker's /metrics, at the URL its log gave since its latest start: per process, each
        sample summed over its labels (none of the `_created` or `_bucket` ones), or the error that kept it from being read."""
        if not self.metrics:
            return
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        scraped: dict[str, Any] = {}
        for child in self.children.values():
            if child.name == _PROVIDER or not child.running:
                continue
            try:
                url = _metrics_url(child.log_path)
                with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as answer:
                    text = answer.read().decode("utf-8")
                samples: dict[str, float] = {}
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if not sample.name.endswith(("_created", "_bucket")) and family.type != "info":
                            samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
                scraped[child.name] = {"url": url, "samples": dict(sorted(samples.items()))}
            except (OSError, ValueError) as error:
                scraped[child.name] = {"error": f"{type(error).__name__}: {error}"}
        self.scraped = scraped
        read = sum(1 for found in scraped.values() if "samples" in found)
        self._say(f"chaos: scraped the metrics of {read} of {len(scraped)} processes")

    def stop_all(self) -> None:
        """SIGCONT what is paused, SIGTERM the workers and the orchestrator, then the provider; SIGKILL whatever outlives the grace."""
        self.stopping = True
        self._stop_keeper()
        for child in self.children.values():
            child.restart_at = None
            if child.paused:
                self._continue(child)
        if self.provider is not None:
            with contextlib.suppress(Exception):
                self.provider_counters = self.provider.faults()["counters"]
        for group in (
            [c for c in self.children.values() if c.name != _PROVIDER],
            [c for c in self.children.values() if c.name == _PROVIDER],
        ):
            for child in group:
                child.signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            for child in group:
                if child.process is None:
                    continue
                try:
                    status = child.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.stragglers.append(child.name)
                    child.kill()
                    continue
                if status != 0:
                    self.unclean.append({"process": child.name, "status": status, "log": child.tail(3)})
                child.process = None

    def close(self) -> None:
        for closing in (self.admin, self.store):
            if closing is not None:
                with contextlib.suppress(Exception):
                    closing.close()

    # -------------------------------------------------------------- judgement
