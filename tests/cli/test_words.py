"""A refusal is one line in the user's words: the command named once, the flag they typed, the fault text they wrote.

Each test here was a message that said it another way: `shiftchange: shiftchange sim run: ...` (the prefix twice),
`--version --nosuch` accepted, `FaultSpec.for_s must be ...` for `--fault "... for=-1"`, `cell trigger.for_s=15.0:
unknown setting` for a `--candidate` or a `--set`, a Dask scheduler nobody answers at costing 30 s, or a malformed
address a traceback.
"""

from __future__ import annotations

import socket

import pytest

from shiftchange import __version__
from shiftchange.cli.main import main
from shiftchange.lab import executor as sim_executor


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("shiftchange: "), err
    return err.removeprefix("shiftchange: ").rstrip("\n")


# ------------------------------------------------------------------ the command, named once


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sim", "run", "--seed", "x"], "sim run: argument --seed: the seed must be a whole number, not 'x' (see --help)"),
        (["--nosuch"], "unrecognized arguments: --nosuch (see --help)"),
        ([], "the following arguments are required: command (see --help)"),
        (
            ["spec", "diff", "HEAD", "--machine", "task"],
            "spec diff: --machine chooses what --diagram draws; give --diagram FILE too (see --help)",
        ),
    ],
)
def test_a_usage_error_names_the_command_once(capsys, argv, expected):
    """Goal: `shiftchange: sim run: ...`, never `shiftchange: shiftchange sim run: ...`."""
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    assert one_line(err) == expected


def test_version_with_an_unknown_flag_is_bad_input(capsys):
    """Goal: `--version --nosuch` is refused (2, one line), as any unknown flag is; argparse printed the version and exited 0."""
    status, out, err = run(capsys, "--version", "--nosuch")
    assert (status, out) == (2, "")
    assert one_line(err) == "unrecognized arguments: --nosuch (see --help)"


def test_version_alone_prints_it(capsys):
    assert run(capsys, "--version") == (0, f"shiftchange {__version__}\n", "")


# ------------------------------------------------------------------ a fault, in the words of its text


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("outage model_provider at=600 for=-1", "for= must be a positive finite number, not -1.0"),
        ("outage model_provider at=-5 for=10", "at= must be a finite number, not negative, not -5.0"),
        ("duplicate_burst network at=1 for=3 probability=2", "probability= must be a probability from 0 to 1, not 2.0"),
        ("slowdown model_provider at=1 for=3 factor=0", "factor= must be a positive finite number, not 0.0"),
        ("message_loss network at=1 for=3 calls=nosuch", "calls= names 'nosuch'"),
    ],
)
def test_a_faults_bad_parameter_is_named_as_its_text_names_it(capsys, fault, says):
    """Goal: `--fault "... for=-1"` is told about `for=`, not about `FaultSpec.for_s`, and shown the text it came from."""
    status, out, err = run(capsys, "sim", "run", "--tasks", "2", "--fault", fault)
    assert (status, out) == (2, "")
    line = one_line(err)
    assert line.startswith(says) and line.endswith(f"(in {fault!r})"), line
    assert "FaultSpec" not in line


# ------------------------------------------------------------------ settings, by the flag that gave them


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sim", "tune", "calls", "--candidate", "nosuch=1,2"], "--candidate nosuch=1: unknown setting 'nosuch'"),
        (
            ["sim", "tune", "calls", "--candidate", "reliability.breaker.cool_down_s=10,abc"],
            "--candidate reliability.breaker.cool_down_s=abc: reliability.breaker.cool_down_s must be a number, not 'abc'",
        ),
        (["sim", "tune", "calls", "--set", "nosuch=1"], "--set nosuch=1: unknown setting 'nosuch'"),
        (
            ["sim", "phase", "--axis", "trigger.for_s=15", "--trigger", "outage model_provider at=400 for=20", "--set", "nosuch=1"],
            "--set nosuch=1: unknown setting 'nosuch'",
        ),
        (
            ["sim", "phase", "--axis", "workers.workers=2,x", "--trigger", "outage model_provider at=400 for=20"],
            "--axis workers.workers=x: workers.workers must be a whole number",
        ),
    ],
)
def test_a_bad_setting_is_named_by_the_flag_that_gave_it(capsys, argv, expected):
    """Goal: a bad `--candidate` or `--set` is refused as that flag, not as the map cell (`cell trigger.for_s=15.0`) it became."""
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    line = one_line(err)
    assert line.startswith(expected), line
    assert "cell " not in line


# ------------------------------------------------------------------ a Dask scheduler that is not there


def sweep_on(capsys: pytest.CaptureFixture[str], address: str) -> tuple[int, str, str]:
    return run(capsys, "sim", "sweep", "--tasks", "2", "--executor", "dask", "--scheduler", address)


def test_a_scheduler_address_nobody_listens_at_is_refused_at_once(capsys):
    """Goal: a refused connection is one line at once (Dask's client retried it for 30 s), before any plan is printed."""
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, out, err = sweep_on(capsys, f"tcp://127.0.0.1:{port}")
    assert (status, out) == (2, "")
    assert one_line(err).startswith(f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: Connection refused"), err


def test_a_server_that_never_greets_is_given_a_few_seconds(capsys, monkeypatch):
    """Goal: a listener that never speaks (a dashboard's port, say) is refused after the connect timeout, not waited on forever.

    Dask's client waits for the scheduler's greeting without a deadline; the sweep's own check waits
    `DASK_CONNECT_TIMEOUT_S` (here shortened, so the test takes half a second).
    """
    monkeypatch.setattr(sim_executor, "DASK_CONNECT_TIMEOUT_S", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        status, out, err = sweep_on(capsys, address)
    assert (status, out) == (2, "")
    assert one_line(err) == f"no Dask scheduler answers at {address} (waited 0.5 s)"


@pytest.mark.parametrize("address", ["nosuch", "tcp://host:port", "::1"])
def test_a_malformed_scheduler_address_is_one_line(capsys, address):
    """Goal: an address with no port (or not a number, or bare IPv6) is bad input, not Dask's ValueError as a traceback."""
    status, out, err = sweep_on(capsys, address)
    assert (status, out) == (2, "")
    assert one_line(err).startswith(f"a Dask scheduler address is [tcp://]HOST:PORT (e.g. tcp://10.0.0.5:8786), not {address!r}")
