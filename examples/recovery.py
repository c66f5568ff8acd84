"""The chapter's recovery story, run on the real orchestrator over a SQLite store.

    python examples/recovery.py STORE_PATH        # prints the task id
    shiftchange timeline --store STORE_PATH TASK_ID

Worker 1 opens a pull request, but the provider's response is lost and the
worker goes silent. Its lease expires: the Attempt becomes Suspect, not
Failed. The worker's late completion is refused (its authority is gone) and
kept as evidence; reconciliation asks the provider and finds the PR. CI fails
it, so the loop decides "correct": Attempt 2, with a reason and a changed
hypothesis, opens a PR for its new commit, which CI passes.

The provider keeps no idempotency keys, as many do not: the PR is found by its
provider identity (the head SHA), which is why the key is built from the Task
and the content, `create-pr:{task}:{headSha}`. Attempt 2's commit is new
content, so it is a new logical operation with its own key; had it pushed the
same commit, its grant would have returned attempt 1's receipt instead.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from shiftchange.core import Budget, LedgerProvider, ManualClock, Orchestrator, Plan, ProviderTimeout
from shiftchange.core.sqlite_store import SQLiteStore

TASK_ID = "fix-login-redirect"
WORKSPACE = "acme/web"
FIRST_HEAD_SHA = "3f9c2ab0d41e7c5b8a96f2e1d0c7b4a3e5f60718"
SECOND_HEAD_SHA = "8b1d4e7a2c9f6b3e0d5a8c1f4b7e2d9a6c3f0b5e"


def run(store_path: Path) -> str:
    """Play the story into a new store at `store_path`; returns the task id."""
    clock = ManualClock()
    provider = LedgerProvider(supports_idempotency=False, clock=clock)
    with SQLiteStore(store_path) as store:
        orchestrator = Orchestrator(store, clock, provider)
        budget = Budget(attempts_max=3, elapsed_max_s=3600.0, cost_max_usd=5.0, tokens_max=200_000, interruptions_max=1)
        orchestrator.create_task(TASK_ID, "Make the login redirect test pass reliably", WORKSPACE, budget=budget)
        orchestrator.accept_task(TASK_ID)
        orchestrator.dispatch(TASK_ID, Plan("the test races the session cache: await the cache write before asserting"))
        first = f"{TASK_ID}#1"
        orchestrator.admit(first)

        # Worker 1 claims, starts, and is granted create-pr under an orchestrator-minted key.
        lease = orchestrator.claim_attempt(TASK_ID, "worker-1", WORKSPACE).lease
        orchestrator.start_attempt(first, lease.generation, lease.token)
        clock.advance(5.0)
        grant = orchestrator.grant_tool(first, lease.generation, lease.token, "create-pr", FIRST_HEAD_SHA, cost_usd=1.20, tokens=40_000)
        provider.lose_responses(1)
        with contextlib.suppress(ProviderTimeout):  # The PR lands, its response is lost, and worker 1 goes silent.
            provider.perform(grant.key, "create-pr", FIRST_HEAD_SHA, "await the cache write")

        # The lease passes; the reaper makes the Attempt Suspect.
        clock.advance(orchestrator.config.lease_ttl_s)
        orchestrator.reap()

        # Worker 1 wakes up and reports success: refused, kept, and it triggers reconciliation, which finds the PR.
        clock.advance(9.0)
        orchestrator.complete_attempt(first, lease.generation, lease.token, "PR opened", head_sha=FIRST_HEAD_SHA)
        assert store.get_attempt(first).state == "verifying"

        # Verification reads CI, not the worker: it fails, a validation failure, and the loop says correct.
        provider.set_verdict(provider.ledger[0].provider_id, "failed:test_login_redirect")
        clock.advance(60.0)
        orchestrator.verify_attempt(first)
        assert orchestrator.decide(TASK_ID).kind == "correct"

        # Attempt 2: a reason of at least ten characters and a changed hypothesis.
        reason = "CI still fails test_login_redirect with the cache awaited: the race is elsewhere"
        orchestrator.retry(TASK_ID, reason, Plan("the redirect fires before the session cookie is set: set the cookie first"))
        second = f"{TASK_ID}#2"
        orchestrator.admit(second)
        lease = orchestrator.claim_attempt(TASK_ID, "worker-2", WORKSPACE).lease
        orchestrator.start_attempt(second, lease.generation, lease.token)
        clock.advance(8.0)
        grant = orchestrator.grant_tool(second, lease.generation, lease.token, "create-pr", SECOND_HEAD_SHA, cost_usd=0.80, tokens=25_000)
        effect = provider.perform(grant.key, "create-pr", SECOND_HEAD_SHA, "set the cookie first")
        orchestrator.record_receipt(second, lease.generation, lease.token, grant.key, effect.provider_id)
        clock.advance(4.0)
        orchestrator.complete_attempt(second, lease.generation, lease.token, "PR opened", head_sha=SECOND_HEAD_SHA)
        clock.advance(60.0)
        orchestrator.verify_attempt(second)
        assert orchestrator.decide(TASK_ID).kind == "verify"
        assert store.get_task(TASK_ID).state == "review"
    return TASK_ID


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python examples/recovery.py STORE_PATH", file=sys.stderr)
        return 2
    store_path = Path(arguments[0])
    if store_path.exists():
        print(f"recovery.py: {store_path} exists; the story needs a new store", file=sys.stderr)
        return 2
    print(run(store_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
