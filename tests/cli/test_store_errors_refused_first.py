"""The runtime commands check every argument before they make anything (issue 42, defect 7).

`shiftchange worker --store sqlite:///w.db --provider notaurl` made w.db, then
exited 2. A worker or orchestrator now checks its configuration, its store URL
(without opening it), its spec, its metrics address and its provider (the URL,
and that it answers) before it opens the store; `provider` checks its port,
address and --url-file before it makes its ledger. Each refusal is one line and
exit status 2, and the directory is as empty as before.
"""

from __future__ import annotations

import socket

import pytest

from shiftchange.cli.main import main

UNREACHABLE = "http://127.0.0.1:1"
"""A provider URL nothing answers at (port 1 is never bound here)."""


def refused(capsys, argv: list[str]) -> str:
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 2, (status, captured.err)
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("shiftchange"), captured.err
    return captured.err


@pytest.fixture
def empty(tmp_path, monkeypatch):
    """The current directory, empty; the test asserts it is still empty."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert sorted(path.name for path in tmp_path.iterdir()) == []


@pytest.mark.parametrize("process", ["worker", "orchestrator"])
@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--provider", "notaurl"], "provider url 'notaurl'"),
        (["--provider", UNREACHABLE], "cannot reach the provider"),
        (["--provider", UNREACHABLE, "--config", "nosuch.json"], "cannot read runtime configuration nosuch.json"),
        (["--provider", UNREACHABLE, "--spec", "nosuch-spec"], "'nosuch-spec' is not a folder"),
        (["--provider", "notaurl", "--store", "sqlite:///w.db?synchronous=sometimes"], "synchronous must be one of"),
    ],
    ids=["bad provider URL", "unreachable provider", "missing config", "missing spec", "bad store option"],
)
def test_a_process_refuses_bad_arguments_before_it_makes_its_store(capsys, empty, process, arguments, said):
    argv = [process, "--store", "sqlite:///w.db", *arguments]
    if argv.count("--store") == 2:
        del argv[1:3]
    assert said in refused(capsys, argv)


@pytest.mark.parametrize("process", ["worker", "orchestrator"])
def test_a_metrics_port_in_use_is_refused_before_the_store_is_made(capsys, empty, process):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = refused(capsys, [process, "--store", "sqlite:///w.db", "--provider", UNREACHABLE, "--metrics-port", str(port)])
    assert f"--metrics-port {port}" in said


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--port", "70000"], "must be a whole number from 0 to 65535"),
        (["--port", "-1"], "must be a whole number from 0 to 65535"),
        (["--host", "nosuch.invalid"], "cannot serve on nosuch.invalid"),
        (["--url-file", "no/such/dir/url"], "--url-file no/such/dir/url: no directory no/such/dir"),
    ],
)
def test_the_provider_refuses_bad_arguments_before_it_makes_its_ledger(capsys, empty, arguments, said):
    assert said in refused(capsys, ["provider", "--ledger", "ledger.jsonl", *arguments])
