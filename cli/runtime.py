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

        from .main import BadInput

        try:
            return handler(args)
        except (CoreError, SpecSourceError) as error:
            raise BadInput(str(error)) from error
        except (ProviderRefused, ProviderTimeout) as error:
            raise BadInput(f"cannot reach the provider: {error}") from error

    return run


def _worker(args: argparse.Namespace) -> int:
    from shiftchange.runtime.worker import run_worker

    return run_worker(args)


def _orchestrator(args: argparse.Namespace) -> int:
    from shiftchange.runtime.control import run_orchestrator

    return run_orchestrator(args)


def _provider(args: argparse.Namespace) -> int:
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
    worker.set_defaults(handler=_typed(_worker))
    orchestrator = commands.add_parser(
        "orchestrator", help="run the control plane (admission, reaper, reconciliation, the loop) until SIGTERM"
    )
    process_arguments(orchestrator, "orchestrator")
    orchestrator.set_defaults(handler=_typed(_orchestrator))
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
