"""The chapter's recovery story, run on the real orchestrator over a SQLite store.

    python examples/recovery.py STORE_PATH        # prints the task id
    shiftchange timeline --store STORE_PATH TASK_ID

Worker 1 opens a pull request, but the provider's response is lost and the
worker goes silent. Its lease expires: the Attempt becomes Suspect, not
Failed. The worker's late completion is refused (its authority is gone) and
kept as evidence; it triggers reconciliation, which asks the provider, finds
the PR and records it as the operation's receipt. Effects that landed without
a result reported under the fence are partial work, not a success, so
Attempt 1 ends failed (executor: lease lost after effects landed). An
executor failure is transient: the loop decides "retry", and Attempt 2, with a
reason and the same hypothesis, waits out its backoff and asks for the same
create-pr. It presents the same key and receives Attempt 1's PR (a replay:
the provider still holds exactly one PR), completes, and CI passes it.

The provider keeps no idempotency keys, as many do not: reconciliation finds
the PR by its provider identity (the head SHA), which is why the key is built
from the Task and the content, `create-pr:{task}:{headSha}`, and not from the
Attempt. Attempt 2 pushed the same commit, so it is the same logical operation
under the same key; a new commit would have been a new operation.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from shiftchange.core import Budget, LedgerProvider, ManualClock, Orchestrator, Plan, ProviderTimeout
from shiftchange.stores.sqlite import SQLiteStore

TASK_ID = "fix-login-redirect"
WORKSPACE = "acme/web"
HEAD_SHA = "3f9c2ab0d41e7c5b8a96f2e1d0c7b4a3e5f60718"
HYPOTHESIS = "the test races the session cache: await the cache write before asserting"


def run(store_path: Path) -> str:
    """Play the story into a new store at `store_path`; returns the task id."""
    clock = ManualClock()
    provider = LedgerProvider(supports_idempotency=False, clock=clock)
    with SQLiteStore(store_path) as store:
        orchestrator = Orchestrator(store, clock, provider)
        budget = Budget(attempts_max=3, elapsed_max_s=3600.0, cost_max_usd=5.0, tokens_max=200_000, interruptions_max=1)
        orchestrator.create_task(TASK_ID, "Make the login redirect test pass reliably", WORKSPACE, budget=budget)
        orchestrator.accept_task(TASK_ID)
        plan = Plan(HYPOTHESIS)
        orchestrator.dispatch(TASK_ID, plan)
        first = f"{TASK_ID}#1"
        orchestrator.admit(first)

        # Worker 1 claims, starts, and is granted create-pr under an orchestrator-minted key.
        lease = orchestrator.claim_attempt(TASK_ID, "worker-1", WORKSPACE).lease
        orchestrator.start_attempt(first, lease.generation, lease.token)
        clock.advance(5.0)
        grant = orchestrator.grant_tool(first, lease.generation, lease.token, "create-pr", HEAD_SHA, cost_usd=1.20, tokens=40_000)
        provider.lose_responses(1)
        with contextlib.suppress(ProviderTimeout):  # The PR lands, its response is lost, and worker 1 goes silent.
            provider.perform(grant.key, "create-pr", HEAD_SHA, "await the cache write")
        (pull_request,) = provider.ledger

        # The lease passes; the reaper makes the Attempt Suspect.
        clock.advance(orchestrator.config.lease_ttl_s)
        orchestrator.reap()

        # Worker 1 wakes up and reports success: refused, kept, and it triggers reconciliation, which finds the PR,
        # records it as the receipt, and ends Attempt 1 failed: landed effects without a reported result are partial work.
        clock.advance(9.0)
        orchestrator.complete_attempt(first, lease.generation, lease.token, "PR opened", head_sha=HEAD_SHA)
        ended = store.get_attempt(first)
        assert (ended.state, ended.reconciliation, ended.failure_domain) == ("failed", "landed", "executor")
        assert store.get_intent(grant.key).receipt == pull_request.provider_id

        # An executor failure is transient: the loop says retry, after a backoff.
        assert orchestrator.decide(TASK_ID).kind == "retry"
        reason = "worker-1 lost its lease after its PR landed; resume from the PR reconciliation recorded"
        orchestrator.retry(TASK_ID, reason, plan)
        second = f"{TASK_ID}#2"
        clock.advance(store.get_attempt(second).backoff_s)
        orchestrator.admit(second)

        # Attempt 2 builds the same commit and asks for the same create-pr: the same key returns attempt 1's PR.
        lease = orchestrator.claim_attempt(TASK_ID, "worker-2", WORKSPACE).lease
        orchestrator.start_attempt(second, lease.generation, lease.token)
        clock.advance(8.0)
        grant = orchestrator.grant_tool(second, lease.generation, lease.token, "create-pr", HEAD_SHA, cost_usd=1.20, tokens=40_000)
        assert grant.replay == pull_request.provider_id and provider.ledger == [pull_request]
        clock.advance(4.0)
        orchestrator.complete_attempt(second, lease.generation, lease.token, f"PR {grant.replay} is open", head_sha=HEAD_SHA)

        # Verification reads CI, not the worker: it passes, and the loop says verify.
        provider.set_verdict(pull_request.provider_id, "passed")
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
