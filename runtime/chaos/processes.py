"""The processes a chaos run starts (each a child that dies with its parent, logging to its own file), and the store
URLs it is given (masked for printing, told apart by kind)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    pass


# ------------------------------------------------------------------ processes


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, a preexec hook that has the kernel SIGKILL the child when the harness dies, so no process outlives a killed harness."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return hook


class _Child:
    """One OS process of the run (the provider, the orchestrator, a worker): how to start it, its log, its state."""

    def __init__(
        self, name: str, argv: list[str], log_path: Path, preexec: Callable[[], None] | None, now: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.preexec = preexec
        self.now = now
        """The harness's clock, for the start marks in the log."""
        self.env: dict[str, str] = {}
        """Set in this process's environment at every start (a skew fault's SHIFTCHANGE_CLOCK_SKEW_S), over the harness's own."""
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.paused_until: float | None = None
        self.restart_at: float | None = None
        self.exits: list[int] = []
        """Exit statuses of incarnations that ended while the harness was not stopping or killing them."""

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            told = "".join(f"{name}={value} " for name, value in sorted(self.env.items()))
            mark = f"=== shiftchange chaos: start {self.starts} of {self.name} at {self.now():.3f}: {told}{' '.join(self.argv)}\n"
            log.write(mark.encode())
            log.flush()
            self.process = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.env} if self.env else None,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the harness only; the harness stops its children itself
                preexec_fn=self.preexec,
            )
        self.restart_at = None
        self.paused_until = None

    def signal(self, number: int) -> bool:
        """Send a signal to the running process; False if there is none (it exited meanwhile)."""
        if not self.running:
            return False
        try:
            self.process.send_signal(number)  # type: ignore[union-attr]
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> bool:
        """SIGKILL the process and reap it; False if it was not running."""
        if not self.signal(signal.SIGKILL):
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5.0)  # type: ignore[union-attr]
        self.process = None
        self.paused_until = None
        return True

    def tail(self, lines: int = 5) -> list[str]:
        try:
            text = self.log_path.read_bytes()[-8192:].decode(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-lines:]


def _python(*words: str) -> list[str]:
    return [sys.executable, "-m", *words]


# ------------------------------------------------------------------ store URLs


def _masked(url: str) -> str:
    """The URL with any password replaced by ***, for printing."""
    from shiftchange.stores import describe

    return describe(url)


def _kind_of(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    if url.startswith("sqlite:///"):
        return "sqlite"
    if url.strip() == "memory:":
        raise ValueError("chaos needs a store its processes can share: sqlite:///path or postgresql://... (memory: is one process's)")
    raise ValueError(f"not a store URL: {_masked(url)!r}; chaos takes sqlite:///path or postgresql://USER@HOST/DB")


def _admin_conninfo(url: str) -> str:
    """A libpq URL for the harness's own session: the store URL without the store's own query settings, named shiftchange-chaos."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key not in ("schema", "application_name")]
    query.append(("application_name", "shiftchange-chaos"))
    return urlunsplit(parts._replace(scheme="postgresql", query=urlencode(query)))
