"""The runtime's commands: `worker`, `orchestrator`, `provider`, `chaos` and `db migrate`.

They live in `shiftchange.runtime`; this module only adds them to the
`shiftchange` command and turns the core's typed errors (a bad store URL,
an unreachable server, a bad configuration) into one line and exit status
2. Nothing of the runtime is imported until one of them runs, so the other
commands do not pay for psycopg or the HTTP client.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["add_parsers"]


def _typed(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A handler whose CoreError (bad input, a store that cannot be opened), unreachable provider or --spec that names no spec
    is one line, status 2 (a malformed spec file is the loader's SpecError, which `main` says in one line)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        from shiftchange.core import CoreError, ProviderRefused, ProviderTimeout
        from shiftchange.spec.source import SpecSourceError

        from .common import BadInput

        try:
            return handler(args)
        except (CoreError, SpecSourceError) as error:
            raise BadInput(str(error)) from error
        except (ProviderRefused, ProviderTimeout) as error:
            raise BadInput(f"cannot reach the provider: {error}") from error

    return run


def _worker(args: argparse.Namespace) -> int:
    _check_process(args)
    from shiftchange.runtime.worker import run_worker

    return run_worker(args)


def _orchestrator(args: argparse.Namespace) -> int:
    _check_process(args)
    from shiftchange.runtime.control import run_orchestrator

    return run_orchestrator(args)


def _check_process(args: argparse.Namespace) -> None:
    """Every argument of a worker or an orchestrator, checked before it opens its store (which may create a file or a schema).

    The configuration, the store URL (its form and options, not yet opened),
    the spec, the metrics address (free to bind) and the provider (its URL,
    and that it answers): each refused here is refused before anything is
    made, in one line. What only opening the store can tell (the file or the
    server is not there) is said by opening it, which makes nothing then.
    """
    from shiftchange.core import InputError
    from shiftchange.core.table import table_for
    from shiftchange.runtime.config import load_config
    from shiftchange.runtime.http_provider import HttpProvider
    from shiftchange.stores import check_url

    load_config(args.config)
    if check_url(args.store) == "memory":
        raise InputError(f"{args.process_noun} needs a store other processes can share: sqlite:///path or postgresql://...")
    table_for(args.spec)
    if getattr(args, "metrics_port", None) is not None:
        from shiftchange.runtime.metrics import _client

        _client()  # the library first: a missing prometheus_client is said as that, whatever else is wrong after it
        _check_bindable(args.metrics_host, args.metrics_port, f"--metrics-host {args.metrics_host} --metrics-port {args.metrics_port}")
    HttpProvider(args.provider, timeout_s=PROVIDER_PROBE_S)  # its URL, and its health endpoint answers


PROVIDER_PROBE_S = 5.0
"""How long a process waits for the provider's health answer before it refuses to start."""


def _check_bindable(host: str, port: int, what: str) -> None:
    """BadInput unless a server could bind `host`:`port` now (the name resolves, the port is free); the probe is closed at once."""
    import socket

    from .common import BadInput

    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, protocol, _, address = found[0]
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: a port in TIME_WAIT is free
            probe.bind(address)
    except OSError as error:
        raise BadInput(f"{what}: cannot serve on {host}:{port}: {error.strerror or error}") from None


def _provider(args: argparse.Namespace) -> int:
    """The code host's server; its address and --url-file are checked before its ledger is made (opened or created)."""
    from pathlib import Path

    from .common import BadInput

    _check_bindable(args.host, args.port, f"--host {args.host} --port {args.port}")
    if args.url_file is not None and not Path(args.url_file).resolve().parent.is_dir():
        raise BadInput(f"--url-file {args.url_file}: no directory {Path(args.url_file).parent}")
    ledger = Path(args.ledger)
    if not ledger.resolve().parent.is_dir():
        raise BadInput(f"--ledger {args.ledger}: no directory {ledger.parent}")
    if ledger.is_dir():
        raise BadInput(f"--ledger {args.ledger} is a directory, not a file")
    from shiftchange.runtime.codehost import run

    return run(args)


def _migrate(args: argparse.Namespace) -> int:
    from shiftchange.stores import describe, migrate_url

    applied = migrate_url(args.store)
    where = describe(args.store)
    print(f"{where}: applied migration(s) {', '.join(map(str, applied))}" if applied else f"{where}: already current")
    return 0


def add_parsers(commands: Any) -> None:
    """Add the runtime's commands to the `shiftchange` subcommands (the arguments only: nothing is imported yet)."""
    from shiftchange.runtime.arguments import process_arguments, provider_arguments, store_argument

    worker = commands.add_parser("worker", help="run one worker process against a shared store until SIGTERM")
    process_arguments(worker, "worker")
    worker.set_defaults(handler=_typed(_worker), process_noun="a worker")
    orchestrator = commands.add_parser(
        "orchestrator", help="run the control plane (admission, reaper, reconciliation, the loop) until SIGTERM"
    )
    process_arguments(orchestrator, "orchestrator")
    orchestrator.set_defaults(handler=_typed(_orchestrator), process_noun="an orchestrator process")
    provider = commands.add_parser("provider", help="serve the code host and model provider over HTTP, with a ledger on disk")
    provider_arguments(provider)
    provider.set_defaults(handler=_typed(_provider))
    from .chaos import add_parser as add_chaos_parser

    add_chaos_parser(commands)  # its handler says bad input in one line itself
    db = commands.add_parser("db", help="manage a store's schema")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    migrate = db_commands.add_parser("migrate", help="create or bring a store's schema up to date (opening a store does it too)")
    store_argument(migrate)
    migrate.set_defaults(handler=_typed(_migrate))
