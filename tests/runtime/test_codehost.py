"""The HTTP code host and model provider: effects land on disk before the answer, keys dedupe, faults strike, ids survive a restart."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from shiftchange.core import InputError, ProviderRefused, ProviderTimeout
from shiftchange.runtime import codehost
from shiftchange.runtime.codehost import CodeHost, read_ledger, serve
from shiftchange.runtime.http_provider import HttpProvider


@pytest.fixture
def start(tmp_path):
    """Start a provider on a ledger in tmp_path (serving on a thread); every one started is stopped at the end."""
    started: list[CodeHost] = []

    def start_(ledger: Path | None = None, supports_idempotency: bool = True) -> tuple[CodeHost, HttpProvider]:
        server, url = serve(ledger or tmp_path / "ledger.jsonl", supports_idempotency=supports_idempotency)
        started.append(server)
        server.serve_in_background()
        return server, HttpProvider(url, timeout_s=5.0)

    yield start_
    for server in started:
        server.stop()


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_an_effect_is_fsynced_to_the_ledger_before_the_call_is_answered(start, tmp_path, monkeypatch):
    """Goal: one perform lands one line, and the server fsyncs it before it sends the answer."""
    _, provider = start()
    events: list[str] = []
    real_fsync, real_send = codehost.os.fsync, codehost._Handler._send_bytes
    monkeypatch.setattr(codehost.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(codehost._Handler, "_send_bytes", lambda self, *a: (events.append("answer"), real_send(self, *a))[1])
    effect = provider.perform("k1", "push", "t1:abc", "diff")
    assert events == ["fsync", "answer"]
    on_disk = read_ledger(tmp_path / "ledger.jsonl")
    assert [record["provider_id"] for record in on_disk] == [effect.provider_id] == ["push-1"]
    assert (on_disk[0]["key"], on_disk[0]["operation"], on_disk[0]["identity"], on_disk[0]["dependency"]) == (
        "k1",
        "push",
        "t1:abc",
        "code_host",
    )
    assert (effect.key, effect.operation, effect.identity, effect.request) == ("k1", "push", "t1:abc", "diff")
    assert provider.faults()["counters"]["landed"] == 1
    assert provider.ledger() == list(on_disk)


def test_a_replayed_key_returns_the_first_effect_and_lands_nothing(start, tmp_path):
    """Goal: with idempotency support, a key seen before answers with its effect; the same key for another identity is refused."""
    _, provider = start()
    assert provider.supports_idempotency
    first = provider.perform("k1", "create-pr", "t1:abc", "")
    again = provider.perform("k1", "create-pr", "t1:abc", "")
    assert again == first
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == 1
    assert provider.find("k1", "create-pr", "t1:abc") == [first]
    assert provider.faults()["counters"] == {"landed": 1, "replayed": 1, "dropped_responses": 0, "refused": 0, "past_deadline": 0}
    with pytest.raises(InputError, match="422"):
        provider.perform("k1", "create-pr", "t1:other", "")


def test_without_idempotency_a_repeat_lands_twice_and_find_by_identity_sees_both(start, tmp_path):
    """Goal: a provider that keeps no keys lands every request, so reconciliation must find effects by identity."""
    _, provider = start(supports_idempotency=False)
    assert not provider.supports_idempotency
    first = provider.perform("k1", "create-pr", "t1:abc", "")
    second = provider.perform("k1", "create-pr", "t1:abc", "")
    provider.perform("k2", "create-pr", "t2:def", "")
    assert (first.provider_id, second.provider_id) == ("create-pr-1", "create-pr-2")
    assert provider.find("k-unrelated", "create-pr", "t1:abc") == [first, second]
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == 3


def test_a_dropped_response_times_out_but_the_effect_landed_and_is_found(start, tmp_path):
    """Goal: the accept-then-drop switch: the caller sees ProviderTimeout, the ledger and `find` show the effect."""
    _, provider = start()
    provider.set_faults(drop_responses=1)
    with pytest.raises(ProviderTimeout, match="connection dropped"):
        provider.perform("k1", "push", "t1:abc", "")
    on_disk = read_ledger(tmp_path / "ledger.jsonl")
    assert [record["key"] for record in on_disk] == ["k1"]
    assert [effect.provider_id for effect in provider.find("k1", "push", "t1:abc")] == [on_disk[0]["provider_id"]]
    assert provider.faults()["counters"]["dropped_responses"] == 1
    assert provider.perform("k1", "push", "t1:abc", "").provider_id == on_disk[0]["provider_id"]  # the retry is answered, from the key


def test_drop_probability_drops_at_random_with_its_seed(start):
    """Goal: drop_probability 1 drops every response, 0 none; the seed is reported."""
    _, provider = start()
    state = provider.set_faults(drop_probability=1.0, seed=7)
    assert (state["switches"]["drop_probability"], state["switches"]["seed"]) == (1.0, 7)
    for n in range(3):
        with pytest.raises(ProviderTimeout):
            provider.perform(f"k{n}", "model-call", f"a:{n}", "")
    provider.set_faults(drop_probability=0.0)
    provider.perform("k9", "model-call", "a:9", "")
    counters = provider.faults()["counters"]
    assert (counters["landed"], counters["dropped_responses"]) == (4, 3)


def test_nothing_lands_once_a_calls_deadline_has_passed(start, tmp_path):
    """Goal: deadline propagation: arriving late is a 504 unheard, finishing late is abandoned, and neither lands."""
    server, provider = start()
    status, body = post(
        server.url, "/v1/code_host/operations", {"key": "k1", "operation": "push", "identity": "i", "deadline_at": time.time() - 1}
    )
    assert status == 504 and "deadline" in body["error"]
    with pytest.raises(ProviderTimeout, match="deadline"):
        provider.call("k2", "push", "i", "t1", "w1", deadline_at=time.time() - 0.01)  # not even sent
    provider.set_faults(latency_s=0.4)
    with pytest.raises(ProviderTimeout):
        provider.call("k3", "push", "i", "t1", "w1", deadline_at=time.time() + 0.1)  # the client gives up at its deadline
    deadline = time.time() + 3
    while provider.faults()["counters"]["past_deadline"] < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert provider.faults()["counters"]["past_deadline"] == 2
    assert read_ledger(tmp_path / "ledger.jsonl") == []
    provider.set_faults(latency_s=0.0)
    effect = provider.call("k4", "push", "i", "t1", "w1", deadline_at=time.time() + 2, via_gateway=False)
    record = read_ledger(tmp_path / "ledger.jsonl")[0]
    assert (record["provider_id"], record["task_id"], record["worker_id"], record["via_gateway"]) == (effect.provider_id, "t1", "w1", False)


def test_a_deadline_is_measured_on_the_clock_it_was_minted_on_and_the_time_left_is_honoured_too(start, tmp_path):
    """Goal: deadlines minted on a store's clock 300 s ahead of this machine's: the client measures the time left on that clock
    (not time.time(), which would give it 300 s), and the server, whose own clock sees the deadline 300 s away, still abandons
    a call that outlives the time left it was sent with; nothing lands."""
    server, _ = start()

    class StoreAhead:
        def now(self) -> float:
            return time.time() + 300.0

    ahead = StoreAhead()
    provider = HttpProvider(server.url, timeout_s=5.0, clock=ahead)
    provider.set_faults(latency_s=0.4)
    began = time.monotonic()
    with pytest.raises(ProviderTimeout):
        provider.call("k1", "push", "i", "t1", "w1", deadline_at=ahead.now() + 0.2)
    assert time.monotonic() - began < 0.39, "the client waited the time left on the store's clock, not 300 s"
    deadline = time.monotonic() + 3
    while provider.faults()["counters"]["past_deadline"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert provider.faults()["counters"]["past_deadline"] == 1 and read_ledger(tmp_path / "ledger.jsonl") == []
    provider.set_faults(latency_s=0.0)
    assert provider.call("k2", "push", "i", "t1", "w1", deadline_at=ahead.now() + 2).provider_id == "push-1"
    status, body = post(server.url, "/v1/code_host/operations", {"key": "k3", "operation": "push", "identity": "i", "deadline_in_s": -1})
    assert status == 400 and "deadline_in_s" in body["error"]


@pytest.mark.parametrize(("status", "domain"), [(503, "provider"), (429, "capacity"), (401, "authorization")])
def test_a_refusal_maps_to_its_failure_domain_and_lands_nothing(start, tmp_path, status, domain):
    """Goal: refuse N calls at one dependency with a status; the client raises ProviderRefused with that status's domain."""
    _, provider = start()
    provider.set_faults(refuse={"dependency": "code_host", "status": status, "count": 1})
    with pytest.raises(ProviderRefused) as refused:
        provider.call("k1", "push", "i", "t1", "w1", deadline_at=time.time() + 2)
    assert refused.value.domain == domain
    assert read_ledger(tmp_path / "ledger.jsonl") == []
    provider.set_faults(refuse={"dependency": "code_host", "status": status, "count": 1})
    provider.perform("m1", "model-call", "a:1", "")  # another dependency is unaffected
    with pytest.raises(ProviderRefused):
        provider.perform("k1", "push", "i", "")
    assert provider.perform("k1", "push", "i", "").provider_id == "push-1"  # the count is spent
    assert provider.faults()["counters"]["refused"] == 2


def test_provider_ids_and_keys_survive_a_restart_on_the_same_ledger(start, tmp_path):
    """Goal: a restarted server reloads its ledger: ids continue per operation and an old key still replays."""
    server, provider = start()
    provider.perform("k1", "push", "t1:a", "")
    provider.perform("k2", "push", "t1:b", "")
    old = provider.perform("m1", "model-call", "a:1", "")
    with pytest.raises(RuntimeError, match="another provider"):
        CodeHost(tmp_path / "ledger.jsonl")  # one server per ledger
    server.stop()
    _, provider = start()
    assert provider.health()["effects"] == 3
    assert provider.perform("k3", "push", "t1:c", "").provider_id == "push-3"
    assert provider.perform("m2", "model-call", "a:2", "").provider_id == "model-call-2"
    assert provider.perform("m1", "model-call", "a:1", "") == old
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == 5


def test_a_torn_final_line_is_skipped_and_cut_off_on_restart(start, tmp_path):
    """Goal: a SIGKILL mid-write leaves a torn last line: read_ledger skips and counts it; a server cuts it before appending."""
    ledger = tmp_path / "ledger.jsonl"
    server, provider = start(ledger)
    provider.perform("k1", "push", "t1:a", "")
    server.stop()
    with open(ledger, "ab") as file:
        file.write(b'{"provider_id": "push-2", "key": "k2", "oper')
    records = read_ledger(ledger)
    assert (len(records), records.torn) == (1, 1)
    _, provider = start(ledger)
    assert provider.perform("k2", "push", "t1:b", "").provider_id == "push-2"
    records = read_ledger(ledger)
    assert ([record["key"] for record in records], records.torn) == (["k1", "k2"], 0)
    (tmp_path / "corrupt.jsonl").write_bytes(b'{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(ValueError, match=":2: not a JSON line"):
        read_ledger(tmp_path / "corrupt.jsonl")


def test_verdicts_default_to_passed_and_can_be_set(start):
    """Goal: the CI verdict of a landed effect is "passed" unless set; an unknown effect has none."""
    _, provider = start()
    effect = provider.perform("k1", "create-pr", "t1:a", "")
    assert provider.verdict(effect.provider_id) == "passed"
    provider.set_verdict(effect.provider_id, "failed:flaky-test")
    assert provider.verdict(effect.provider_id) == "failed:flaky-test"
    provider.set_verdict(effect.provider_id, None)
    assert provider.verdict(effect.provider_id) is None
    assert provider.verdict("create-pr-99") is None


def test_the_client_routes_operations_and_refuses_what_it_cannot(start, tmp_path):
    """Goal: push and create-pr go to the code host, model-call to the model provider; an unknown operation is an InputError."""
    server, provider = start()
    provider.perform("k1", "model-call", "a:1", "")
    provider.perform("k2", "push", "t1:a", "")
    assert [record["dependency"] for record in read_ledger(tmp_path / "ledger.jsonl")] == ["model_provider", "code_host"]
    with pytest.raises(InputError, match="no dependency"):
        provider.perform("k3", "deploy", "x", "")
    with pytest.raises(InputError):
        provider.set_faults(drop_responses=-1)
    port = server.server_address[1]
    server.stop()
    with pytest.raises(ProviderRefused) as refused:
        provider.perform("k4", "push", "t1:b", "")
    assert refused.value.domain == "provider" and str(port) in str(refused.value)


def test_concurrent_calls_get_unique_ids_and_every_one_is_in_the_ledger(start, tmp_path):
    """Goal: the server is thread-safe: 80 concurrent pushes land 80 lines with 80 distinct ids."""
    _, provider = start()
    with ThreadPoolExecutor(8) as pool:
        effects = list(pool.map(lambda n: provider.perform(f"k{n}", "push", f"t:{n}", ""), range(80)))
    ids = {effect.provider_id for effect in effects}
    assert len(ids) == 80
    assert {record["provider_id"] for record in read_ledger(tmp_path / "ledger.jsonl")} == ids


def test_the_main_entry_serves_writes_its_url_file_and_exits_0_on_sigterm(tmp_path):
    """Goal: `python -m shiftchange.runtime.codehost` binds, writes --url-file, prints the URL, serves, and exits 0 on SIGTERM."""
    url_file, ledger = tmp_path / "url", tmp_path / "ledger.jsonl"
    command = [
        sys.executable,
        "-m",
        "shiftchange.runtime.codehost",
        "--ledger",
        str(ledger),
        "--url-file",
        str(url_file),
        "--no-idempotency",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 10
        while not url_file.exists() and time.time() < deadline and process.poll() is None:
            time.sleep(0.02)
        url = url_file.read_text().strip()
        provider = HttpProvider(url)
        assert not provider.supports_idempotency
        effect = provider.perform("k1", "push", "t1:a", "")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (process.returncode, err) == (0, "")
    assert out == url + "\n"
    assert [record["provider_id"] for record in read_ledger(ledger)] == [effect.provider_id]


def test_serve_in_background_then_stop_at_once_does_not_hang(tmp_path):
    """Goal: stopping a server just started returns (no wait on a serve loop that never began)."""
    server, _ = serve(tmp_path / "ledger.jsonl")
    server.serve_in_background()
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    stopper.join(5)
    assert not stopper.is_alive()
    unserved, _ = serve(tmp_path / "other.jsonl")
    unserved.stop()
