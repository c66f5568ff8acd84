"""The provider's HTTP face: one request per connection, each answered from the `CodeHost` it serves (the routes: the
`codehost` module's docstring), and the two ways a request ends early (an HTTP error, a response dropped on purpose)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no ledger lock
    fcntl = None  # type: ignore[assignment]


if TYPE_CHECKING:
    from .codehost import CodeHost

DEPENDENCIES = ("code_host", "model_provider")
MAX_BODY = 1 << 20


class _HttpError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


class _Dropped(Exception):
    """The request was performed; its response is to be dropped (connection closed unanswered)."""


class _Handler(BaseHTTPRequestHandler):
    server: CodeHost
    protocol_version = "HTTP/1.0"  # one request per connection: a dropped response is a closed connection
    server_version = "shiftchange-codehost/1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log_requests:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [part for part in url.path.split("/") if part]
        query = {name: values[-1] for name, values in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if parts[:1] != ["v1"]:
                raise _HttpError(404, f"no route {url.path}")
            self._route(method, parts[1:], query)
        except _Dropped:
            self.close_connection = True  # performed; the connection closes with nothing sent
        except _HttpError as error:
            self._send(error.status, error.body)
        except Exception as error:  # a bug, or the disk failed: the outcome is unknown to the caller (5xx)
            self._send(500, {"error": f"{type(error).__name__}: {error}"})

    def _route(self, method: str, parts: list[str], query: dict[str, str]) -> None:
        server = self.server
        match parts:
            case [dependency, "operations"] if dependency not in ("admin", "verdicts"):
                self._expect(method, "POST")
                self._send(200, {"effect": server.perform(self._dependency(dependency), self._call())})
            case [dependency, "effects"] if dependency not in ("admin", "verdicts"):
                self._expect(method, "GET")
                dependency = self._dependency(dependency)
                if "key" not in query and not {"operation", "identity"} <= set(query):
                    raise _HttpError(400, "effects: ?key=K, or ?operation=O&identity=I")
                found = server.find(dependency, query.get("key"), query.get("operation"), query.get("identity"))
                self._send(200, {"effects": found})
            case ["verdicts", provider_id]:
                self._expect(method, "GET")
                known, verdict = server.verdict(provider_id)
                self._send(200 if known else 404, {"verdict": verdict} if known else {"error": f"no effect {provider_id}", "verdict": None})
            case ["admin", "verdicts"]:
                self._expect(method, "POST")
                body = self._body()
                provider_id, verdict = body.get("provider_id"), body.get("verdict")
                if not isinstance(provider_id, str) or not (verdict is None or isinstance(verdict, str)):
                    raise _HttpError(400, 'verdicts: {"provider_id": str, "verdict": str | null}')
                server.set_verdict(provider_id, verdict)
                self._send(200, {"provider_id": provider_id, "verdict": verdict})
            case ["admin", "faults"]:
                self._expect(method, "GET", "POST")
                self._send(200, server.set_faults(self._body()) if method == "POST" else server.faults())
            case ["ledger"]:
                self._expect(method, "GET")
                self._send_bytes(200, server.ledger_bytes(), "application/x-ndjson")
            case ["health"]:
                self._expect(method, "GET")
                self._send(200, server.health())
            case _:
                raise _HttpError(404, f"no route /v1/{'/'.join(parts)}")

    @staticmethod
    def _expect(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise _HttpError(405, f"{method} not allowed here; use {' or '.join(allowed)}")

    @staticmethod
    def _dependency(name: str) -> str:
        if name not in DEPENDENCIES:
            raise _HttpError(404, f"no dependency {name!r}; hosted: {list(DEPENDENCIES)}")
        return name

    def _body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise _HttpError(400, "Content-Length: not a number") from None
        if length > MAX_BODY:
            raise _HttpError(413, f"body of {length} bytes; at most {MAX_BODY}")
        raw = self.rfile.read(length) if length > 0 else b"{}"
        try:
            body = json.loads(raw)
        except ValueError as error:
            raise _HttpError(400, f"body: not JSON ({error})") from None
        if not isinstance(body, dict):
            raise _HttpError(400, "body: a JSON object")
        return body

    def _call(self) -> dict[str, Any]:
        arrived = time.monotonic()
        body = self._body()
        header = self.headers.get("Idempotency-Key")
        key = body.get("key", header)
        if header is not None and key != header:
            raise _HttpError(400, f"Idempotency-Key {header!r} differs from the body's key {key!r}")
        call = {
            "key": key,
            "operation": body.get("operation"),
            "identity": body.get("identity", ""),
            "task_id": body.get("task_id", ""),
            "worker_id": body.get("worker_id", ""),
        }
        for name, value in call.items():
            if not isinstance(value, str) or (name in ("key", "operation") and not value):
                raise _HttpError(400, f"{name}: a{' non-empty' if name in ('key', 'operation') else ''} string, not {value!r}")
        deadline_at = body.get("deadline_at")
        if deadline_at is not None and (isinstance(deadline_at, bool) or not isinstance(deadline_at, int | float)):
            raise _HttpError(400, f"deadline_at: seconds on the store's clock, or null; not {deadline_at!r}")
        deadline_in_s = body.get("deadline_in_s")
        if deadline_in_s is not None and (
            isinstance(deadline_in_s, bool) or not isinstance(deadline_in_s, int | float) or not 0 <= deadline_in_s < math.inf
        ):
            raise _HttpError(400, f"deadline_in_s: seconds left (>= 0) when the call was sent, or null; not {deadline_in_s!r}")
        via_gateway = body.get("via_gateway", True)
        if not isinstance(via_gateway, bool):
            raise _HttpError(400, f"via_gateway: true or false, not {via_gateway!r}")
        due_by = None if deadline_in_s is None else arrived + deadline_in_s
        return {**call, "deadline_at": deadline_at, "due_by": due_by, "via_gateway": via_gateway, "request": body.get("request", "")}

    def _send(self, status: int, body: Mapping[str, Any]) -> None:
        self._send_bytes(status, json.dumps(body, separators=(",", ":")).encode(), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except ConnectionError:  # the caller gave up (timed out) before the answer: nothing to tell it
            self.close_connection = True
