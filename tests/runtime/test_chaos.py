"""`shiftchange chaos`: real processes under real faults, judged by the simulator's checkers.

The runs here are short (12 to 20 seconds of load) with faults every few
seconds, and each seed is chosen so its schedule plans every kind the test
asserts at least once (two orchestrator kills, a pause that ends in time);
the ten-minute, eight-worker runs of the issue are `-m slow`. Each run is
`heavy`: real processes on the wall clock, left out of the fast tier.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from shiftchange.checkers.rules import INVARIANTS
from shiftchange.checkers.run import from_json
from shiftchange.cli.main import main
from shiftchange.lab.report import render
from shiftchange.runtime.chaos import FAULT_KINDS, ChaosFaults, ledger_entries, plan_faults, run_chaos

CHAOS = [sys.executable, "-m", "shiftchange", "chaos"]
FAST_FAULTS = ["--kill-every", "5", "--pause-every", "7", "--orchestrator-kill-every", "9", "--drop-every", "2"]
BUSY = ["--rate", "0.8"]
"""Two workers at 0.8 tasks/s are always busy (an Attempt holds a worker about 3.3 s): every pause strikes a lease holder."""


def _processes_naming(text: str, but: int | None = None) -> list[int]:
    """Live processes (not this one, not `but`) whose command line mentions `text`: the run dir, which every child's argv names."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), but):
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in command and state != "Z":
            found.append(int(entry.name))
    return found


def _assert_every_invariant_holds(report: dict) -> None:
    bad = {name: verdict for name, verdict in report["invariants"].items() if verdict["status"] != "ok"}
    assert not bad, f"invariants not ok: {json.dumps(bad, indent=1)}; logs in {report['run_dir']}"
    metrics = report["metrics"]
    assert metrics["tasks_lost"] == 0, metrics["lost"]
    assert metrics["duplicate_effects"] == 0
    assert metrics["stale_writes_accepted"] == 0
    assert metrics["unclean_exits"] == [], "every process the harness started, or restarted, exits 0 on SIGTERM"
    assert metrics["tasks_submitted"] > 0 and metrics["tasks_done"] > 0
    assert report["ok"] is True


# ---------------------------------------------------------------- the schedule


def test_the_fault_schedule_is_a_function_of_the_seed_and_keeps_each_cadence():
    """Goal: one seed, one schedule; each kind near its cadence on its own stream; a pause always outlasts the lease and ends in time;
    a skew sets a worker's clock `skew_s` ahead or behind, both directions drawn; connection kills and skews only on PostgreSQL."""
    faults = ChaosFaults(
        kill_every_s=10, pause_every_s=20, orchestrator_kill_every_s=0, conn_kill_every_s=15, drop_every_s=5, skew_every_s=12, skew_s=240
    )
    first = plan_faults(600, faults, 8, seed=3, lease_ttl_s=4.0, postgres=True)
    assert first == plan_faults(600, faults, 8, seed=3, lease_ttl_s=4.0, postgres=True)
    assert first != plan_faults(600, faults, 8, seed=4, lease_ttl_s=4.0, postgres=True)
    counts = {kind: sum(1 for fault in first if fault.kind == kind) for kind in FAULT_KINDS}
    assert counts["orchestrator_kill"] == 0, "a cadence of 0 turns the kind off"
    for kind, every_s in (("kill", 10), ("pause", 20), ("conn_kill", 15), ("drop", 5), ("skew", 12)):
        assert 0.7 * 600 / every_s <= counts[kind] <= 1.3 * 600 / every_s, (kind, counts[kind])
    pauses = [fault for fault in first if fault.kind == "pause"]
    assert all(8.0 <= fault.hold_s <= 12.0 and fault.at_s + fault.hold_s < 600 for fault in pauses)
    skews = [fault for fault in first if fault.kind == "skew"]
    assert {fault.skew_s for fault in skews} == {240.0, -240.0}, "ahead and behind, by skew_s"
    assert all(0.5 <= fault.hold_s <= 2.0 for fault in skews), "restarted after the restart delay, as a kill is"
    assert all(fault.skew_s == 0.0 for fault in first if fault.kind != "skew")
    assert all(0 <= fault.target < 8 for fault in first)
    assert [f.at_s for f in first] == sorted(f.at_s for f in first)
    only_kills = ChaosFaults(
        kill_every_s=10, pause_every_s=0, orchestrator_kill_every_s=0, conn_kill_every_s=0, drop_every_s=0, skew_every_s=0
    )
    kills_alone = plan_faults(600, only_kills, 8, seed=3, lease_ttl_s=4.0, postgres=True)
    assert kills_alone == [fault for fault in first if fault.kind == "kill"], "changing one cadence leaves the other kinds alone"
    on_sqlite = plan_faults(600, faults, 8, seed=3, lease_ttl_s=4.0, postgres=False)
    assert on_sqlite == [fault for fault in first if fault.kind not in ("conn_kill", "skew")]
    with pytest.raises(ValueError, match="skew_s"):
        ChaosFaults(skew_s=0)


@pytest.mark.heavy
def test_a_worker_paused_inside_a_sqlite_write_is_continued_while_the_harness_waits_for_the_lock(tmp_path):
    """Goal: the keeper thread continues a paused process on time even while the main thread waits for the store: a process
    frozen inside a write transaction holds SQLite's lock, and a harness that tended it from the waiting thread never would
    (a ten-minute run once stalled 25 minutes that way, every submission waiting out its busy timeout)."""
    from shiftchange.runtime.chaos import _Child, _Run
    from shiftchange.runtime.config import RuntimeConfig
    from shiftchange.stores.sqlite import SQLiteStore

    path = tmp_path / "store.db"
    SQLiteStore(path).close()
    hold = "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN IMMEDIATE');"
    hold += " print('locked', flush=True); time.sleep(1.0); c.execute('COMMIT')"
    run = _Run(f"sqlite:///{path}", 1, 60.0, 0, 1.0, tmp_path, ChaosFaults(), True, RuntimeConfig(), 60.0, None)
    child = run.children["holder"] = _Child("holder", [sys.executable, "-c", hold, str(path)], tmp_path / "holder.log", None)
    child.start()
    try:
        deadline = time.monotonic() + 30
        while b"locked" not in child.log_path.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.signal(signal.SIGSTOP)
        child.paused_until = time.time() + 1.0
        run._start_keeper()
        began = time.monotonic()
        with SQLiteStore(path) as store:  # waits for the frozen writer's lock: up to its 30 s busy timeout
            assert store.get_task("nothing") is None
        assert time.monotonic() - began < 10.0, "the lock was freed by the keeper's SIGCONT, not by the busy timeout"
        assert child.process.wait(10) == 0
    finally:
        run._stop_keeper()
        child.kill()


# ---------------------------------------------------------------- runs


@pytest.mark.heavy
def test_a_short_sqlite_run_under_every_fault_holds_every_invariant(tmp_path):
    """Goal: the command runs provider, orchestrator and workers on SQLite under kills, pauses and drops; exit 0, every invariant ok.
    With --metrics, each of the orchestrator and the workers served /metrics, scraped with real counts when the drain ended."""
    run_dir = tmp_path / "run"
    store = f"sqlite:///{tmp_path / 'store.db'}"
    command = [*CHAOS, "--store", store, "--workers", "2", "--duration", "15", "--seed", "23", "--run-dir", str(run_dir), "--json"]
    command.append("--metrics")
    done = subprocess.run([*command, *FAST_FAULTS, *BUSY], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{done.stdout[-3000:]}"
    report = json.loads(done.stdout)
    _assert_every_invariant_holds(report)
    metrics = report["metrics"]
    assert metrics["worker_kills"] >= 1 and metrics["pauses"] >= 1 and metrics["orchestrator_kills"] >= 1
    assert metrics["drops_asked"] >= 1 and metrics["dropped_responses"] >= 1
    assert metrics["connection_kills"] is None and metrics["connection_kills_note"] == "n/a on SQLite"
    assert metrics["detect_count"] >= 1 and 0 < metrics["detect_s_p50"] <= metrics["detect_s_max"]
    assert metrics["stale_writes_refused"] >= 1, "a paused worker woke and was refused"
    assert metrics["events"] > 0 and metrics["transactions_retried"] == 0
    assert report["subject"]["store"] == store and report["subject"]["workers"] == 2
    for name in ("provider", "orchestrator", "worker-1", "worker-2"):
        assert (run_dir / "logs" / f"{name}.log").stat().st_size > 0
    assert metrics["process_starts"]["orchestrator"] >= 2 and sum(metrics["process_starts"].values()) >= 6
    assert json.loads((run_dir / "report.json").read_text())["metrics"] == metrics
    assert json.loads((run_dir / "config.json").read_text())["core"]["lease_ttl_s"] == 4.0
    assert _processes_naming(str(run_dir)) == [], "every process the run started is gone"
    scraped = report["subject"]["scraped"]
    assert set(scraped) == {"orchestrator", "worker-1", "worker-2"} and all("samples" in found for found in scraped.values()), scraped
    assert scraped["orchestrator"]["samples"]["shiftchange_contracts_accepted_total"] > 0
    assert scraped["orchestrator"]["samples"]["shiftchange_admission_leader"] == 1
    assert "shiftchange_time_to_detect_seconds_count" in scraped["orchestrator"]["samples"]
    assert sum(found["samples"]["shiftchange_contracts_accepted_total"] for name, found in scraped.items() if name != "orchestrator") > 0
    assert sum(found["samples"].get("shiftchange_provider_calls_total", 0) for found in scraped.values()) > 0
    assert report["replay"].endswith("--metrics")
    _assert_the_judgement_sees_what_it_would_miss(store, run_dir, report)


def _assert_the_judgement_sees_what_it_would_miss(store_url: str, run_dir: Path, report: dict) -> None:
    """Re-judge the run's real history and ledger as chaos did, then with a duplicate PR and with one stale write accepted.

    The runtime offers no switch that breaks it, so the anti-patterns are
    planted in its own records: a judgement that passed them would be vacuous.
    """
    from shiftchange.checkers import context_for, judge
    from shiftchange.core.machine import FENCED
    from shiftchange.runtime.codehost import read_ledger
    from shiftchange.runtime.config import load_config
    from shiftchange.stores import open_store

    context = context_for(load_config(run_dir / "config.json").core)
    prefix = report["subject"]["task_prefix"]
    with open_store(store_url) as store:
        events = [event for event in store.events() if event.task_id.startswith(prefix)]
        ledger = ledger_entries(read_ledger(run_dir / "ledger.jsonl"), store, prefix)
        assert {name: verdict.status for name, verdict in judge(events, ledger, store, context=context).items()} == {
            name: "ok" for name in report["invariants"]
        }
        pr = next(entry for entry in ledger if entry.operation == "create-pr")
        twin = dataclasses.replace(pr, provider_id=f"{pr.provider_id}-twin", key=f"{pr.key}-again", at=pr.at + 0.5)
        verdicts = judge(events, [*ledger, twin], store, context=context)
        assert verdicts["one_effect_per_operation"].status == "violated"
        late = next(event for event in events if event.late and event.kind in FENCED)
        forged = [dataclasses.replace(event, accepted=True) if event is late else event for event in events]
        assert judge(forged, ledger, store, context=context)["fenced_writes"].status == "violated"


def _schema_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@pytest.mark.heavy
def test_a_postgres_run_with_connection_kills_holds_every_invariant(postgres_url, tmp_path):
    """Goal: on PostgreSQL, with workers' sessions terminated and workers restarted with their clocks 300 s ahead or behind too,
    every invariant holds and no task is lost (a fresh schema, dropped); a skewed worker judged its leases on the server's clock."""
    import psycopg

    schema = f"chaos_{uuid.uuid4().hex[:8]}"
    faults = ChaosFaults(kill_every_s=6, pause_every_s=8, orchestrator_kill_every_s=15, conn_kill_every_s=4, drop_every_s=2, skew_every_s=4)
    lines: list[str] = []
    try:
        report = run_chaos(
            _schema_url(postgres_url, schema),
            workers=4,
            duration_s=20,
            seed=27,
            run_dir=tmp_path / "run",
            faults=faults,
            progress=lines.append,
        )
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    document = report.to_json()
    _assert_every_invariant_holds(document)
    metrics = report.metrics
    assert metrics["connection_kills"] >= 1 and metrics["backends_terminated"] >= metrics["connection_kills"]
    assert metrics["worker_kills"] >= 1 and metrics["pauses"] >= 1 and metrics["orchestrator_kills"] >= 1
    assert metrics["dropped_responses"] >= 1 and metrics["recover_count"] >= 1
    assert metrics["clock_skews"] >= 2 and metrics["clock_skews"] == metrics["clock_skews_ahead"] + metrics["clock_skews_behind"]
    skewed = next(item for item in report.delivered if item.kind == "skew")
    log = (tmp_path / "run" / "logs" / f"{skewed.target}.log").read_text()
    assert f"SHIFTCHANGE_CLOCK_SKEW_S={skewed.skew_s:+g}" in log, "restarted with the skew in its environment"
    assert "leases judged on ServerClock(" in log and f"not on this process's clock ({skewed.skew_s:+g} s)" in log
    text = render(report.to_record())
    assert render(from_json(json.loads(json.dumps(document)))) == text, "the text reads the record alone, as report.json keeps it"
    assert f"all {len(INVARIANTS)} invariants hold" in text and "PASS: every invariant holds" in text and "sessions terminated" in text
    assert "clock skews" in text and "behind, by 300 s" in text
    assert any(line.startswith("chaos: drained") for line in lines), lines


# ---------------------------------------------------------------- the command's edges


def test_a_metrics_run_without_prometheus_client_is_one_line_and_exit_status_2(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if the metrics extra were not installed
    assert main(["chaos", "--store", f"sqlite:///{tmp_path / 'store.db'}", "--run-dir", str(tmp_path / "run"), "--metrics"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "prometheus_client" in captured.err, captured.err
    assert not (tmp_path / "store.db").exists() and _processes_naming(str(tmp_path / "run")) == []


def test_a_refused_metrics_run_without_a_run_dir_makes_no_temporary_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp would make the run's folder
    assert main(["chaos", "--store", f"sqlite:///{tmp_path / 'store.db'}", "--metrics"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--metrics needs the prometheus_client package" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--store", "memory:"], "share"),
        (["--store", "mysql://x/y"], "sqlite:///"),
        (["--store", "sqlite:///x.db", "--workers", "0"], "--workers"),
        (["--store", "sqlite:///x.db", "--duration", "-5"], "--duration"),
        (["--store", "sqlite:///x.db", "--rate", "0"], "--rate"),
        (["--store", "sqlite:///x.db", "--kill-every", "-1"], "--kill-every"),
        (["--store", "sqlite:///x.db", "--drop-every", "often"], "--drop-every"),
        (["--store", "sqlite:///x.db", "--skew-every", "30"], "clock skew is a PostgreSQL fault"),
        (["--store", "sqlite:///x.db", "--skew", "300"], "clock skew is a PostgreSQL fault"),
        (["--store", "postgresql://u@127.0.0.1:9/db", "--skew", "0"], "--skew"),
        (["--store", "postgresql://u@127.0.0.1:9/db", "--skew", "1e9"], "--skew"),
        (["--store", "sqlite:///x.db", "--run-dir", "a-file/run"], "cannot write"),
        (["--store", "sqlite:////no/such/folder/store.db"], "cannot open the store"),
        (["--store", "sqlite:///x.db", "--run-dir", "used"], "already holds a run"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(words, says, capsys, tmp_path, monkeypatch):
    """Goal: a bad argument or an unusable store is refused before any process starts: one line on stderr, status 2."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "ledger.jsonl").write_text("")
    if "--run-dir" not in words:
        words = [*words, "--run-dir", str(tmp_path / "run")]
    assert main(["chaos", *words]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in captured.err, captured.err
    assert _processes_naming(str(tmp_path / "run")) == []


@pytest.mark.heavy
def test_ctrl_c_stops_every_process_with_one_line_and_status_130(tmp_path):
    """Goal: an interrupted run SIGTERMs (or SIGKILLs) every child it started, says so in one line, and exits 130."""
    run_dir = tmp_path / "run"
    command = [*CHAOS, "--store", f"sqlite:///{tmp_path / 'store.db'}", "--workers", "2", "--duration", "120", "--run-dir", str(run_dir)]
    # Ctrl-C as a terminal sends it: a runner started in the background (`cmd &` in a script) hands its children SIGINT
    # ignored, and a Python started that way never turns it into KeyboardInterrupt.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    )
    try:
        spec = process.stderr.readline()
        assert spec.startswith("chaos: spec the packaged spec"), spec
        first = process.stderr.readline()
        assert first.startswith("chaos: 2 workers"), first
        deadline = time.monotonic() + 20
        while len(_processes_naming(str(run_dir), but=process.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_processes_naming(str(run_dir), but=process.pid)) == 4, "the provider, the orchestrator and two workers"
        time.sleep(2.0)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("shiftchange chaos: interrupted") and "Traceback" not in err, err
    assert out == ""
    assert _processes_naming(str(run_dir)) == []


# ---------------------------------------------------------------- --spec

QUIET = ["--kill-every", "0", "--pause-every", "0", "--orchestrator-kill-every", "0", "--drop-every", "0", "--conn-kill-every", "0"]
"""No faults: the shortest run that still runs the processes over a table and judges them."""


def _edited_copy(folder: Path) -> Path:
    """A copy of the packaged spec with one invariant's statement reworded: the same behaviour, a digest of its own."""
    from shiftchange.spec import DEFAULT_DIRECTORY

    folder.mkdir()
    for path in DEFAULT_DIRECTORY.glob("*.toml"):
        (folder / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    invariants = folder / "invariants.toml"
    text = invariants.read_text(encoding="utf-8")
    assert 'statement = "At most one attempt per task' in text
    invariants.write_text(text.replace('statement = "At most one attempt per task', 'statement = "At most one Attempt per task', 1))
    return folder


@pytest.mark.heavy
def test_a_run_with_spec_runs_that_table_in_every_process_and_records_its_digest(tmp_path):
    """Goal: `chaos --spec DIR` reads the spec before anything starts (one line naming its files), every process runs it (their
    logs say its digest), and report.json records its label and digest and a rerun command that carries --spec."""
    from shiftchange.core.table import packaged
    from shiftchange.spec import load_spec

    folder = _edited_copy(tmp_path / "proposal")
    digest = load_spec(folder).digest
    assert digest != packaged().digest, "the copy must be told apart from the packaged spec"
    run_dir = tmp_path / "run"
    store = f"sqlite:///{tmp_path / 'store.db'}"
    command = [*CHAOS, "--store", store, "--workers", "1", "--duration", "3", "--rate", "0.5", "--drain", "60", "--json"]
    done = subprocess.run([*command, *QUIET, "--run-dir", str(run_dir), "--spec", str(folder)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{done.stdout[-3000:]}"
    said = done.stderr.splitlines()[0]
    assert said.startswith(f"chaos: spec {folder}, digest {digest}; read ") and str(folder / "attempt.toml") in said, said
    report = json.loads((run_dir / "report.json").read_text())
    assert report["ok"] is True and report["metrics"]["tasks_done"] >= 1
    assert report["spec"]["label"] == str(folder) and report["spec"]["digest"] == digest
    assert report["driver"] == "chaos" and report["replay"].endswith(f"--spec {folder}") and "--workers 1" in report["replay"]
    assert load_spec(run_dir / "spec").digest == digest, "the run dir keeps the spec the processes ran"
    for name in ("orchestrator", "worker-1"):
        log = (run_dir / "logs" / f"{name}.log").read_text()
        assert f"--spec {run_dir / 'spec'}" in log and f"(digest {digest})" in log, log[-2000:]


def test_a_spec_that_names_nothing_or_is_malformed_is_one_line_and_status_2_before_anything_starts(capsys, tmp_path, monkeypatch):
    """Goal: `--spec` is read and compiled before any process starts: a name that is no folder (nor a revision), or a spec
    file that does not parse, is one line on stderr and exit status 2, and no run dir is made."""
    monkeypatch.chdir(tmp_path)
    broken = _edited_copy(tmp_path / "broken")
    (broken / "task.toml").write_text((broken / "task.toml").read_text() + "\nnot toml [\n")
    for spec, says in (("nosuchdir", "'nosuchdir' is not a folder"), ("broken", "task.toml")):
        run_dir = tmp_path / f"run-{spec}"
        assert main(["chaos", "--store", "sqlite:///x.db", "--run-dir", str(run_dir), "--spec", spec]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and "--spec" in lines[0] and says in lines[0] and "Traceback" not in captured.err, captured.err
        assert not run_dir.exists() and not (tmp_path / "x.db").exists()


# ---------------------------------------------------------------- the runs


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_ten_minutes_with_eight_workers_holds_every_invariant(kind, request, tmp_path):
    """Goal (the issue's done-when): ten minutes, eight workers, the default faults; every invariant holds, nothing lost or duplicated."""
    schema = f"chaos_{uuid.uuid4().hex[:8]}"
    store = f"sqlite:///{tmp_path / 'store.db'}" if kind == "sqlite" else _schema_url(request.getfixturevalue("postgres_url"), schema)
    try:
        report = run_chaos(store, workers=8, duration_s=600, seed=7, run_dir=tmp_path / "run")
    finally:
        if kind == "postgresql":
            import psycopg

            with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    _assert_every_invariant_holds(report.to_json())
    metrics = report.metrics
    assert metrics["worker_kills"] >= 10 and metrics["pauses"] >= 5 and metrics["orchestrator_kills"] >= 3
    assert kind == "sqlite" or (metrics["connection_kills"] >= 5 and metrics["clock_skews"] >= 5)
    assert kind == "postgresql" or metrics["clock_skews"] is None, "no skew on SQLite: one machine, one clock"


@pytest.mark.heavy
def test_without_idempotency_keys_dropped_responses_still_land_once(tmp_path):
    """Goal: a provider that ignores operation keys, dropping a response every few seconds: reconciliation by identity keeps
    every effect single, and the ledger (not only the checker) shows no pull request twice."""
    run_dir = tmp_path / "run"
    store = f"sqlite:///{tmp_path / 'store.db'}"
    command = [*CHAOS, "--store", store, "--workers", "2", "--duration", "12", "--seed", "0", "--run-dir", str(run_dir), "--json"]
    faults = ["--drop-every", "2", "--kill-every", "6", "--pause-every", "0", "--orchestrator-kill-every", "0", "--conn-kill-every", "0"]
    done = subprocess.run([*command, "--no-idempotency", *faults, *BUSY], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{done.stdout[-3000:]}"
    report = json.loads(done.stdout)
    _assert_every_invariant_holds(report)
    metrics = report["metrics"]
    assert report["subject"]["idempotency"] is False and metrics["dropped_responses"] >= 3
    assert metrics["duplicate_effects"] == 0 and metrics["tasks_lost"] == 0


# ---------------------------------------------------------------- the report's words


def test_the_report_writes_unix_times_in_its_examples_as_iso_times(tmp_path):
    """Goal (issue 42, defect 5): an invariant's example holds the core's and the checkers' words, with the store's Unix
    times as bare numbers ('expired at 1796499303.7910109', 't=1796499303.79'); the report a person reads writes them
    as ISO times, and report.json keeps them as recorded."""
    import re

    from shiftchange.checkers import Measures
    from shiftchange.checkers.history import Verdict
    from shiftchange.runtime.chaos import ChaosReport, _Run
    from shiftchange.runtime.config import RuntimeConfig

    example = (
        "  #41 worker worker-2: renew chaos-1#1 gen 1 REFUSED (late: the lease is no longer honoured (expired at 1796499303.7910109))",
        "  accepted complete on chaos-1#1 after its lease expired at t=1796499303.79",
    )
    run = _Run("sqlite:///x.db", 2, 15.0, 0, 1.0, tmp_path, ChaosFaults(), True, RuntimeConfig(), 60.0, None)
    verdicts = {"fenced_writes": Verdict("fenced_writes", "violated", 1, example)}
    metrics = run._metrics([], [], verdicts, {}, Measures(), 0)
    report = ChaosReport("sqlite:///x.db", "chaos-", str(tmp_path), 2, 15.0, 0, 1.0, True, ChaosFaults(), {}, verdicts, metrics)
    text = render(report.to_record())
    assert "expired at 2026-12-05T19:35:03.791Z" in text and "expired at 2026-12-05T19:35:03.790Z" in text, text
    assert not re.search(r"\d{10,}\.\d+", text), text
    assert report.to_json()["invariants"]["fenced_writes"]["example"] == list(example)
