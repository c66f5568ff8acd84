"""Store URLs the store layer refuses, through every command that takes one: one line on stderr, exit status 2, nothing made.

Issue 42, defects 1 and 6: an unparsable PostgreSQL URL was a ModuleNotFoundError traceback (exit 1) in every store
command; a URL of no store scheme was "no store at nosuch:/x". None of these needs a server: each URL is refused before
anything connects.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from shiftchange.cli.main import main

UNPARSABLE = {
    "an unknown parameter": "postgresql://postgres:hunter2@127.0.0.1:5432/test?schema=x&bogus=1",
    "an unterminated [ host": "postgresql://postgres:hunter2@[::1:5432/test",
}
"""PostgreSQL URLs libpq cannot parse; each carries a password that no message may print."""

COMMANDS = {
    "status": ["status", "--store", "URL"],
    "timeline": ["timeline", "--store", "URL", "--list"],
    "db migrate": ["db", "migrate", "--store", "URL"],
    "check-store": ["check-store", "URL"],
    "chaos": ["chaos", "--store", "URL", "--duration", "1", "--workers", "1"],
    "worker": ["worker", "--store", "URL", "--provider", "http://127.0.0.1:1"],
    "orchestrator": ["orchestrator", "--store", "URL", "--provider", "http://127.0.0.1:1"],
}


def refused(capsys, argv: list[str]) -> str:
    """The one line `argv` is refused with (exit status 2, nothing on stdout)."""
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 2, (status, captured.err)
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("shiftchange"), captured.err
    return captured.err


@pytest.mark.parametrize("url", UNPARSABLE.values(), ids=UNPARSABLE.keys())
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_an_unparsable_postgresql_url_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, command, url):
    monkeypatch.chdir(tmp_path)
    if command[0] == "check-store":  # the kit makes its own schemas, and says so first for a URL that names one
        url = url.replace("schema=x&", "")
    said = refused(capsys, [url if word == "URL" else word for word in command])
    assert "not a PostgreSQL connection string" in said
    assert "hunter2" not in said
    assert list(tmp_path.iterdir()) == []


def test_the_console_script_says_it_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "shiftchange", "status", "--store", UNPARSABLE["an unknown parameter"]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert 'invalid URI query parameter: "bogus"' in done.stderr


# ---- defect 6: a URL of no store scheme is "not a store URL" naming the ones that are; a mistyped schema is not told to
# run `db migrate` (which would make an empty store there).


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_url_of_no_store_scheme_is_not_a_store_url(capsys, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    said = refused(capsys, ["nosuch://x" if word == "URL" else word for word in command])
    assert "not a store URL" in said and "'nosuch://x'" in said
    assert "sqlite:///" in said and "postgresql://" in said  # the schemes that are
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["status", "timeline"])
def test_a_mistyped_schema_is_said_not_to_exist(capsys, make_postgres_store, command):
    store = make_postgres_store()
    typo = store.schema + "x"
    argv = [command, "--store", f"{make_postgres_store.url}?schema={typo}"] + (["--list"] if command == "timeline" else [])
    said = refused(capsys, argv)
    assert f"no schema '{typo}' at " in said and store.schema in said
    assert "migrate" not in said
