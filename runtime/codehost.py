"""A code host and a model provider over HTTP on loopback, with their ledger on disk (the requests are `codehost_http`'s to
read and answer; the client that reaches them, `http_provider.HttpProvider`).

`CodeHost` is the real counterpart of the simulator's `SimProvider`: one
server hosts both dependencies, `code_host` (operations `push`, `create-pr`)
and `model_provider` (`model-call`); worker processes perform operations on
it, the orchestrator reads provider truth from it (`find`, `verdict`), a chaos
harness switches its faults on and off, and at the end the harness reads its
ledger and judges it.

Landing. An effect lands when one JSON line is appended to the ledger file
and flushed and fsynced, and only then is the call answered: whatever a
caller was told landed is on disk, and a SIGKILL can at worst leave a torn
final line that no caller was ever told about. `read_ledger` skips such a
line (and counts it); a server started on that ledger cuts it off before it
appends. Provider ids are `<operation>-<n>`, unique across the server and
stable across a restart: the ledger is reloaded on start and each
operation's count goes on from it. A second server on the same ledger is
refused (an exclusive `flock`).

Idempotency. With support on (the default), a key seen before at a
dependency (the body's `key`, or the `Idempotency-Key` header) returns the
effect it landed and lands nothing new, also across a restart; a key reused
for another operation or identity is refused (422). Without support
(`--no-idempotency`), every request lands a new effect: that is what makes
duplicates possible, and what the orchestrator's reconciliation by identity
(`find` by operation and identity, a PR by its head SHA) must guard against.

Deadlines. Every call may carry `deadline_at`, seconds on the clock the
core minted it on (the store's: the PostgreSQL server's, or the shared wall
clock on one machine), and `deadline_in_s`, the seconds left before it as
the caller measured them on that same clock when it sent the call. The
server honours the earlier of the two, each on a clock of its own, as the
simulator's provider honours its deadline (deadline propagation): a request
arriving after its deadline is dropped unheard (504, nothing lands), and one
whose added latency carries it past its deadline is abandoned (504, nothing
lands). So nothing lands once a call's deadline has passed, which is what
lets reconciliation conclude "not landed" for a call whose deadline is
behind it. Why both: `deadline_at` against this server's `time.time()` is
exact when this machine's clock agrees with the store's (one machine, as in
a chaos run, or clocks kept together), and it also catches a request that a
paused caller sent late; `deadline_in_s` from the request's arrival, on this
server's monotonic clock, is what gRPC propagates (`grpc-timeout` is
relative for this reason) and is right whatever this machine's clock says,
late only by the time the request took to arrive (a pause between the
caller's reading and its send included, which the first check catches).
The relative deadline never falls before the true one, so honouring the
earlier refuses nothing that a right clock would allow. A caller whose own clock
is off enters into neither: `HttpProvider` measures the time left on the
clock it is given (a worker's is its store's), never on `time.time()`.

Faults (`POST /v1/admin/faults`, every switch optional): `drop_responses` N,
the next N performing requests are accepted and land (or replay), then the
connection is closed unanswered, so the caller sees a dropped connection and
cannot know whether it landed; `drop_probability` p (with `seed` s) does the
same at random; `latency_s` x sleeps before performing; `refuse`
`{"dependency", "status", "count"}` refuses the next `count` calls at that
dependency (or every dependency when it is omitted; `count` null: until
cleared) with `status` (503 an outage, 429 rate limited, 401 revoked
credentials), landing nothing. Refusals apply to performing calls only:
provider truth stays readable. `{"clear": true}` resets every switch.

Routes (JSON in and out; errors are `{"error": ...}`):

    POST /v1/{dependency}/operations      perform one operation -> 200 {"effect"}; 504 past deadline; 503/429/401 refused
    GET  /v1/{dependency}/effects?key=K   provider truth by key -> {"effects": [...]}
    GET  /v1/{dependency}/effects?operation=O&identity=I     ... by provider identity
    GET  /v1/verdicts/{provider_id}       the CI verdict -> {"verdict": "passed" | "failed:<sig>" | null}; 404 no such effect
    POST /v1/admin/verdicts               {"provider_id", "verdict"} sets a verdict
    GET  /v1/admin/faults                 {"switches": {...}, "counters": {...}}
    POST /v1/admin/faults                 sets switches, answers as GET
    GET  /v1/ledger                       the whole ledger, JSON lines
    GET  /v1/health                       {"ok", "supports_idempotency", "dependencies", "effects", "pid", "ledger"}

`HttpProvider` is core's `ProviderAdapter` over these routes, plus `call`,
the worker's deadline-bounded call. A timeout, a dropped connection, a 504
or another 5xx is `ProviderTimeout` (the outcome is unknown); 503, 429 and
401/403 are `ProviderRefused` with domain provider, capacity and
authorization; a refused connection (no server listening, so nothing can
have landed) is `ProviderRefused("provider", ...)`; a 400, 404 or 422 is
`InputError`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from shiftchange.runtime.arguments import provider_arguments

from .codehost_http import DEPENDENCIES, _Dropped, _Handler, _HttpError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no ledger lock
    fcntl = None  # type: ignore[assignment]

REFUSAL_DOMAINS: Mapping[int, str] = {503: "provider", 429: "capacity", 401: "authorization", 403: "authorization"}
"""The failure domain each refusal status names."""


# ------------------------------------------------------------------ the ledger


class LedgerRecords(list):
    """The ledger's effects, oldest first; `torn` counts a torn final line that was skipped (0 or 1)."""

    torn: int = 0


def _parse_ledger(data: bytes, where: str) -> tuple[LedgerRecords, int]:
    """The records in `data`, and the length of its whole lines (a final line without its newline is torn)."""
    records = LedgerRecords()
    whole = data.rfind(b"\n") + 1
    for number, line in enumerate(data[:whole].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise ValueError(f"{where}:{number}: not a JSON line ({error}); the ledger is corrupt") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where}:{number}: not a JSON object; the ledger is corrupt")
        records.append(record)
    records.torn = 1 if data[whole:].strip() else 0
    return records, whole


def read_ledger(path: str | os.PathLike[str]) -> LedgerRecords:
    """Every effect in the ledger file, oldest first, read from disk.

    A final line without its newline (a write torn by a SIGKILL, which no
    caller was ever answered for) is skipped and counted in the result's
    `torn`; any other line that is not a JSON object raises ValueError.
    """
    path = Path(path)
    return _parse_ledger(path.read_bytes(), str(path))[0]


# ------------------------------------------------------------------ the server


def _default_switches() -> dict[str, Any]:
    return {"drop_responses": 0, "drop_probability": 0.0, "seed": 0, "latency_s": 0.0, "refuse": {}}


class CodeHost(ThreadingHTTPServer):
    """The provider server: its ledger, its indexes, its verdicts and its fault switches, under one lock."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        ledger_path: str | os.PathLike[str],
        address: tuple[str, int] = ("127.0.0.1", 0),
        supports_idempotency: bool = True,
        log_requests: bool = False,
    ) -> None:
        self.ledger_path = Path(ledger_path)
        self.supports_idempotency = supports_idempotency
        self.log_requests = log_requests
        self.lock = threading.Lock()
        self._by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._by_identity: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self._by_id: dict[str, dict[str, Any]] = {}
        self._next: dict[str, int] = {}
        self._count = 0
        self._verdicts: dict[str, str | None] = {}
        self.default_verdict: str | None = "passed"
        self.switches = _default_switches()
        self.counters = {"landed": 0, "replayed": 0, "dropped_responses": 0, "refused": 0, "past_deadline": 0}
        self._rng = random.Random(0)
        self._serving = False
        self._ledger = self._open_ledger()
        try:
            super().__init__(address, _Handler)
        except BaseException:
            self._ledger.close()
            raise
        host, port = self.server_address[:2]
        self.url = f"http://{host}:{port}"

    # ------------------------------------------------------------ the ledger

    def _open_ledger(self):
        path = self.ledger_path
        created = not path.exists()
        ledger = open(path, "a+b")  # noqa: SIM115 - held open for the server's life
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(ledger.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RuntimeError(f"{path}: another provider holds this ledger") from None
            ledger.seek(0)
            records, whole = _parse_ledger(ledger.read(), str(path))
            if records.torn:  # never answered for: cut it off, or the next line would be glued to it
                print(f"codehost: {path}: cut off a torn final line", file=sys.stderr)
                ledger.truncate(whole)
                os.fsync(ledger.fileno())
            ledger.seek(0, os.SEEK_END)
            for number, record in enumerate(records, start=1):
                try:
                    self._index(record)
                except (KeyError, TypeError) as error:
                    raise ValueError(f"{path}: effect {number} lacks {error}; the ledger is corrupt") from None
            if created:
                directory = os.open(path.parent, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        except BaseException:
            ledger.close()
            raise
        return ledger

    def _index(self, record: dict[str, Any]) -> None:
        dependency, operation = record.get("dependency", ""), record["operation"]
        self._by_key.setdefault((dependency, record["key"]), []).append(record)
        self._by_identity.setdefault((dependency, operation, record["identity"]), []).append(record)
        self._by_id[record["provider_id"]] = record
        _, _, number = str(record["provider_id"]).rpartition("-")
        seen = int(number) if number.isdigit() else 0
        self._next[operation] = max(self._next.get(operation, 1), seen + 1)
        self._count += 1

    def _land(self, dependency: str, call: Mapping[str, Any]) -> dict[str, Any]:
        """Append the effect to the ledger and fsync it; the caller holds the lock."""
        if self._ledger.closed:
            raise _HttpError(503, "the provider is shutting down", domain="provider")
        operation = call["operation"]
        number = self._next.get(operation, 1)
        record = {
            "provider_id": f"{operation}-{number}",
            "key": call["key"],
            "operation": operation,
            "identity": call["identity"],
            "task_id": call["task_id"],
            "worker_id": call["worker_id"],
            "dependency": dependency,
            "via_gateway": call["via_gateway"],
            "request": call["request"],
            "at": time.time(),
        }
        self._ledger.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        self._ledger.flush()
        os.fsync(self._ledger.fileno())
        self._index(record)
        self.counters["landed"] += 1
        return record

    # ------------------------------------------------------------ operations

    def perform(self, dependency: str, call: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one call: the effect (new or replayed), or _HttpError, or _Dropped once it was performed."""
        with self.lock:
            if _past_deadline(call):
                self.counters["past_deadline"] += 1
                raise _HttpError(504, f"{call['key']} arrived after its deadline{_deadline_text(call)}; dropped unheard")
            self._refusal(dependency)
            latency_s = self.switches["latency_s"]
        if latency_s > 0:
            time.sleep(latency_s)
        with self.lock:
            if _past_deadline(call):
                self.counters["past_deadline"] += 1
                raise _HttpError(504, f"{call['key']} would finish after its deadline{_deadline_text(call)}; abandoned")
            existing = self._by_key.get((dependency, call["key"])) if self.supports_idempotency else None
            if existing:
                effect = existing[0]
                if (effect["operation"], effect["identity"]) != (call["operation"], call["identity"]):
                    raise _HttpError(
                        422, f"idempotency key {call['key']} was used for {effect['operation']} {effect['identity']}", effect=effect
                    )
                self.counters["replayed"] += 1
            else:
                effect = self._land(dependency, call)
            if self._drop():
                self.counters["dropped_responses"] += 1
                raise _Dropped
            return effect

    def _refusal(self, dependency: str) -> None:
        refuse = self.switches["refuse"]
        for target in (dependency, "*"):
            rule = refuse.get(target)
            if rule is None:
                continue
            if rule["count"] is not None:
                rule["count"] -= 1
                if rule["count"] <= 0:
                    del refuse[target]
            self.counters["refused"] += 1
            status = rule["status"]
            raise _HttpError(status, f"{dependency} {status}: refused", domain=REFUSAL_DOMAINS.get(status, "provider"))

    def _drop(self) -> bool:
        if self.switches["drop_responses"] > 0:
            self.switches["drop_responses"] -= 1
            return True
        probability = self.switches["drop_probability"]
        return probability > 0 and self._rng.random() < probability

    def find(self, dependency: str, key: str | None, operation: str | None, identity: str | None) -> list[dict[str, Any]]:
        with self.lock:
            if key is not None:
                return list(self._by_key.get((dependency, key), ()))
            return list(self._by_identity.get((dependency, operation or "", identity or ""), ()))

    def verdict(self, provider_id: str) -> tuple[bool, str | None]:
        """Whether the effect is known, and its verdict."""
        with self.lock:
            if provider_id in self._verdicts:
                return True, self._verdicts[provider_id]
            return provider_id in self._by_id, self.default_verdict

    def set_verdict(self, provider_id: str, verdict: str | None) -> None:
        with self.lock:
            self._verdicts[provider_id] = verdict

    # ---------------------------------------------------------------- faults

    def set_faults(self, switches: Mapping[str, Any]) -> dict[str, Any]:
        """Set some switches (validated all first, then applied at once); returns the state as `faults` does."""
        known = {"clear", "drop_responses", "drop_probability", "seed", "latency_s", "refuse"}
        unknown = sorted(set(switches) - known)
        if unknown:
            raise _HttpError(400, f"unknown fault switches {unknown}; known: {sorted(known)}")
        update: dict[str, Any] = {}
        if "drop_responses" in switches:
            update["drop_responses"] = _number(switches, "drop_responses", int, 0)
        if "drop_probability" in switches:
            update["drop_probability"] = _number(switches, "drop_probability", float, 0.0, 1.0)
        if "latency_s" in switches:
            update["latency_s"] = _number(switches, "latency_s", float, 0.0)
        seed = _number(switches, "seed", int) if "seed" in switches else None
        refuse = None
        if "refuse" in switches:
            rules = switches["refuse"]
            rules = [] if rules is None else [rules] if isinstance(rules, dict) else rules
            if not isinstance(rules, list):
                raise _HttpError(400, "refuse: an object, a list of objects, or null")
            refuse = [_refusal_rule(rule) for rule in rules]
        with self.lock:
            if switches.get("clear"):
                self.switches = _default_switches()
            self.switches.update(update)
            if seed is not None:
                self.switches["seed"] = seed
                self._rng = random.Random(seed)
            if refuse is not None:
                if not refuse:
                    self.switches["refuse"] = {}
                for target, rule in refuse:
                    self.switches["refuse"][target] = rule
            return self._faults()

    def faults(self) -> dict[str, Any]:
        with self.lock:
            return self._faults()

    def _faults(self) -> dict[str, Any]:
        switches = dict(self.switches)
        switches["refuse"] = [{"dependency": None if target == "*" else target, **rule} for target, rule in self.switches["refuse"].items()]
        return {"switches": switches, "counters": dict(self.counters)}

    def health(self) -> dict[str, Any]:
        with self.lock:
            effects = self._count
        return {
            "ok": True,
            "supports_idempotency": self.supports_idempotency,
            "dependencies": list(DEPENDENCIES),
            "effects": effects,
            "pid": os.getpid(),
            "ledger": str(self.ledger_path),
        }

    def ledger_bytes(self) -> bytes:
        with self.lock:
            size = self._ledger.tell() if not self._ledger.closed else None
        if size is None:
            return self.ledger_path.read_bytes()
        with open(self.ledger_path, "rb") as ledger:
            return ledger.read(size)

    # --------------------------------------------------------------- running

    def serve_in_background(self) -> threading.Thread:
        """Serve on a daemon thread (for tests and in-process harnesses); `stop` ends it."""
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=f"codehost {self.url}", daemon=True)
        self._serving = True  # before the thread runs, so a `stop` at once still waits for it
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop serving (if serving) and close the socket and the ledger."""
        if self._serving:
            self.shutdown()
        self.server_close()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._serving = True
        try:
            super().serve_forever(poll_interval)
        finally:
            self._serving = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a caller that hung up is no error of the server's
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        with self.lock:
            if not self._ledger.closed:
                self._ledger.close()  # also releases the flock


def _past_deadline(call: Mapping[str, Any]) -> bool:
    """Whether the call's deadline has passed here: its `deadline_at` on this machine's clock, or its time left since it arrived."""
    deadline_at, due_by = call["deadline_at"], call["due_by"]
    return (deadline_at is not None and time.time() >= deadline_at) or (due_by is not None and time.monotonic() >= due_by)


def _deadline_text(call: Mapping[str, Any]) -> str:
    return "" if call["deadline_at"] is None else f" {call['deadline_at']:.3f}"


def _number(switches: Mapping[str, Any], name: str, kind: type, low: float | None = None, high: float | None = None) -> Any:
    value = switches[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not float(value).is_integer()):
        raise _HttpError(400, f"{name}: a number{' (whole)' if kind is int else ''}, not {value!r}")
    value = kind(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise _HttpError(400, f"{name}: {value!r} outside [{low}, {high if high is not None else 'inf'}]")
    return value


def _refusal_rule(rule: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(rule, dict) or set(rule) - {"dependency", "status", "count"}:
        raise _HttpError(400, f"refuse: {{'dependency', 'status', 'count'}}, not {rule!r}")
    dependency = rule.get("dependency")
    if dependency is not None and dependency not in DEPENDENCIES:
        raise _HttpError(400, f"refuse: no dependency {dependency!r}; hosted: {list(DEPENDENCIES)}")
    status = rule.get("status", 503)
    if status not in REFUSAL_DOMAINS:
        raise _HttpError(400, f"refuse: status {status!r} is not one of {sorted(REFUSAL_DOMAINS)}")
    count = rule.get("count", 1)
    if count is not None:
        count = _number({"count": count}, "count", int, 1)
    return dependency or "*", {"status": status, "count": count}


def serve(
    ledger_path: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0, supports_idempotency: bool = True
) -> tuple[CodeHost, str]:
    """A bound (not yet serving) provider on its ledger, and its URL; run `serve_forever` or `serve_in_background`."""
    server = CodeHost(ledger_path, (host, port), supports_idempotency=supports_idempotency)
    return server, server.url


# ------------------------------------------------------------- the command


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; exit status 0 then, 2 when the ledger or the address is unusable."""
    try:
        server = CodeHost(args.ledger, (args.host, args.port), supports_idempotency=not args.no_idempotency, log_requests=args.log_requests)
    except (OSError, RuntimeError, ValueError) as error:
        print(f"shiftchange provider: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {number: signal.signal(number, lambda *_: stop.set()) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_in_background()
        if args.url_file:
            target = Path(args.url_file)
            partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            partial.write_text(server.url + "\n", encoding="utf-8")
            os.replace(partial, target)
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m shiftchange.runtime.codehost --ledger FILE [--port N] [--no-idempotency] [--url-file F]`."""
    parser = argparse.ArgumentParser(prog="shiftchange provider", description=__doc__.split("\n\n")[0])
    provider_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
