"""The runtime commands' arguments, apart from the code that runs them.

`shiftchange` builds its whole parser before it runs any command, and
should not import the core to do so (every command would pay for it). So
the arguments are declared here, importing nothing of shiftchange; the
handlers import the runtime when they run (and resolve `--spec` then).
"""

from __future__ import annotations

import argparse

__all__ = ["process_arguments", "provider_arguments", "spec_argument", "store_argument"]


def store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL", required=True, help="sqlite:///path or postgresql://... (memory: cannot be shared)")


def process_arguments(parser: argparse.ArgumentParser, kind: str) -> None:
    """A worker's or an orchestrator's: the shared store, the provider, the configuration, an id."""
    store_argument(parser)
    parser.add_argument("--provider", metavar="URL", required=True, help="the code host's URL (as `shiftchange provider` prints it)")
    parser.add_argument("--config", metavar="FILE", help="a runtime configuration (JSON, as RuntimeConfig.to_json writes it)")
    parser.add_argument("--id", metavar="NAME", default=None, help=f"this {kind}'s id (default {kind}-<pid>)")
    spec_argument(parser, f"the spec this {kind}'s core runs")
    parser.add_argument(
        "--metrics-port",
        metavar="N",
        type=_port,
        default=None,
        help="serve Prometheus metrics on this port (0: any free one, logged); needs the metrics extra; docs/metrics.md",
    )
    parser.add_argument("--metrics-host", metavar="ADDR", default="127.0.0.1", help="the address metrics are served on (default 127.0.0.1)")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 65535, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 65535, not {value}")
    return value


def spec_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """`--spec DIR|REV`: a spec folder, else a git revision (REV reads its spec/, REV:path another folder), as `spec check` reads one."""
    parser.add_argument(
        "--spec",
        metavar="DIR|REV",
        default=None,
        help=f"{what}: a folder holding the spec files, or a git revision (REV:path for another folder); default the packaged spec",
    )


def provider_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger", metavar="FILE", required=True, help="the JSON-lines ledger (created, or reloaded and appended to)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1)")
    parser.add_argument("--port", metavar="N", type=_port, default=0, help="the port (default 0: any free port)")
    parser.add_argument("--no-idempotency", action="store_true", help="ignore operation keys: every request lands a new effect")
    parser.add_argument("--url-file", metavar="F", help="write the bound URL to this file (atomically) once serving")
    parser.add_argument("--log-requests", action="store_true", help="log each request on stderr")
