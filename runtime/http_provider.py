"""The client of the loopback provider (`runtime/codehost.py`): the core's `ProviderAdapter` over HTTP, and the worker's call.

`HttpProvider` is what every runtime process holds: the orchestrator finds
effects and verdicts through it (reconciliation, verification), the worker
makes its deadline-bounded `call`, and the chaos harness drives the server's
fault switches and reads its ledger. It speaks the server's wire (the
routes, the statuses and the failure domain each refusal names) and nothing
of the server's internals: a port that talks to a real code host replaces
this module, not the server.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from shiftchange.core import Clock, Effect, InputError, ProviderRefused, ProviderTimeout
from shiftchange.runtime.clock import WallClock
from shiftchange.runtime.codehost import REFUSAL_DOMAINS

__all__ = ["DEPENDENCY_OF", "HttpProvider"]

DEPENDENCY_OF: Mapping[str, str] = {"push": "code_host", "create-pr": "code_host", "model-call": "model_provider"}
"""Which dependency performs each operation (as the simulator routes them)."""


def _as_effect(record: Mapping[str, Any]) -> Effect:
    request = record.get("request", "")
    return Effect(
        provider_id=str(record["provider_id"]),
        key=str(record["key"]),
        operation=str(record["operation"]),
        identity=str(record["identity"]),
        request=request if isinstance(request, str) else json.dumps(request, sort_keys=True),
        at_s=float(record["at"]),
    )


class HttpProvider:
    """Core's `ProviderAdapter` over a `CodeHost`, plus the worker's deadline-bounded `call` and the harness's admin helpers."""

    def __init__(
        self,
        url: str,
        dependency_of: Mapping[str, str] | Callable[[str], str | None] | None = None,
        timeout_s: float = 10.0,
        clock: Clock | None = None,
    ) -> None:
        """`clock` is what a call's deadline is measured on: the clock the core minted it on (a worker's store's); None, WallClock()."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise InputError(f"provider url {url!r}: http://HOST:PORT")
        self.url = url.rstrip("/")
        self._host, self._port = parts.hostname, parts.port or 80
        self._dependency_of = dependency_of if dependency_of is not None else DEPENDENCY_OF
        if timeout_s <= 0:
            raise InputError(f"timeout_s: positive seconds, not {timeout_s!r}")
        self.timeout_s = timeout_s
        self.clock: Clock = WallClock() if clock is None else clock
        self.supports_idempotency: bool = bool(self.health()["supports_idempotency"])

    def dependency(self, operation: str) -> str:
        """The dependency that performs `operation`; InputError for an operation no dependency performs."""
        route = self._dependency_of
        dependency = route(operation) if callable(route) else route.get(operation)
        if dependency is None:
            raise InputError(f"operation {operation!r}: no dependency performs it")
        return dependency

    # ----------------------------------------------------------- the adapter

    def perform(self, key: str, operation: str, identity: str, request: str) -> Effect:
        """Do the operation, with no deadline; returns the effect, or raises ProviderTimeout / ProviderRefused."""
        return self._perform(key, operation, identity, "", "", None, True, request, self.timeout_s)

    def call(
        self,
        key: str,
        operation: str,
        identity: str,
        task_id: str,
        worker_id: str,
        deadline_at: float,
        via_gateway: bool = True,
        request: str = "",
    ) -> Effect:
        """A worker's call due by `deadline_at` (seconds on this provider's `clock`): waits at most until then, and the provider
        honours it too (sent as the deadline and as the time left)."""
        remaining = deadline_at - self.clock.now()
        if remaining <= 0:  # as a gRPC client does: past its deadline, the call is not sent
            raise ProviderTimeout(f"{key}: deadline {deadline_at:.3f} passed before the call was sent")
        return self._perform(
            key, operation, identity, task_id, worker_id, deadline_at, via_gateway, request, min(self.timeout_s, remaining), remaining
        )

    def find(self, key: str, operation: str, identity: str) -> list[Effect]:
        """Every effect matching the key (idempotent providers) or the provider identity (others)."""
        dependency = self.dependency(operation)
        query = {"key": key} if self.supports_idempotency else {"operation": operation, "identity": identity}
        _, body = self._request("GET", f"/v1/{dependency}/effects?{urlencode(query)}")
        return [_as_effect(record) for record in body["effects"]]

    def verdict(self, provider_id: str) -> str | None:
        """ "passed", "failed:<signature>", or None while pending (or for an effect the provider does not know)."""
        status, body = self._request("GET", f"/v1/verdicts/{quote(provider_id, safe='')}", allow=(404,))
        return None if status == 404 else body["verdict"]

    # ---------------------------------------------------------------- admin

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/v1/health")[1]

    def set_faults(self, **switches: Any) -> dict[str, Any]:
        """Set fault switches (drop_responses, drop_probability, seed, latency_s, refuse, clear); returns `faults()`."""
        return self._request("POST", "/v1/admin/faults", switches)[1]

    def faults(self) -> dict[str, Any]:
        """{"switches": {...}, "counters": {"landed", "replayed", "dropped_responses", "refused", "past_deadline"}}."""
        return self._request("GET", "/v1/admin/faults")[1]

    def set_verdict(self, provider_id: str, verdict: str | None) -> None:
        self._request("POST", "/v1/admin/verdicts", {"provider_id": provider_id, "verdict": verdict})

    def ledger(self) -> list[dict[str, Any]]:
        """The whole ledger as the server has it, oldest first."""
        _, data = self._request("GET", "/v1/ledger", raw=True)
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    # ------------------------------------------------------------- transport

    def _perform(
        self,
        key: str,
        operation: str,
        identity: str,
        task_id: str,
        worker_id: str,
        deadline_at: float | None,
        via_gateway: bool,
        request: str,
        timeout_s: float,
        deadline_in_s: float | None = None,
    ) -> Effect:
        dependency = self.dependency(operation)
        body = {
            "key": key,
            "operation": operation,
            "identity": identity,
            "task_id": task_id,
            "worker_id": worker_id,
            "deadline_at": deadline_at,
            "deadline_in_s": deadline_in_s,
            "request": request,
            "via_gateway": via_gateway,
        }
        _, answer = self._request("POST", f"/v1/{dependency}/operations", body, headers={"Idempotency-Key": key}, timeout_s=timeout_s)
        return _as_effect(answer["effect"])

    def _request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        allow: Sequence[int] = (),
        raw: bool = False,
    ) -> tuple[int, Any]:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s or self.timeout_s)
        what = f"{method} {self.url}{path}"
        try:
            data = None if body is None else json.dumps(body).encode()
            sent = {"Content-Type": "application/json", **(headers or {})} if data is not None else dict(headers or {})
            try:
                connection.request(method, path, body=data, headers=sent)
            except ConnectionRefusedError as error:  # nobody listening: nothing was sent, nothing landed
                raise ProviderRefused("provider", f"{what}: connection refused ({error})") from None
            response = connection.getresponse()
            status, payload = response.status, response.read()
        except TimeoutError:
            raise ProviderTimeout(f"{what}: no response within {timeout_s or self.timeout_s:g}s") from None
        except (OSError, http.client.HTTPException) as error:  # dropped connection: the outcome is unknown
            raise ProviderTimeout(f"{what}: connection dropped ({type(error).__name__}: {error})") from None
        finally:
            connection.close()
        if status == 200 or status in allow:
            return status, payload if raw else json.loads(payload or b"{}")
        try:
            detail = json.loads(payload).get("error", "")
        except (ValueError, AttributeError):
            detail = payload[:200].decode(errors="replace")
        message = f"{what}: {status} {detail}"
        if status in REFUSAL_DOMAINS:
            raise ProviderRefused(REFUSAL_DOMAINS[status], message)
        if status >= 500:  # 504 past its deadline, or the provider failed mid-call: the outcome is unknown
            raise ProviderTimeout(message)
        raise InputError(message)
