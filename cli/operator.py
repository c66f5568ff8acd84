"""`shiftchange timeline` and `shiftchange status`: what an operator asks of a real store, read and never written.

Both take `--store URL` (a SQLite file, `sqlite:///...`, or `postgresql://...`)
and only read: a SQLite path that holds no store is refused before it is
opened (SQLite would create it), and a PostgreSQL schema is not migrated.

- `timeline --store URL TASK_ID [--json]`: one task's recovery timeline
  (hypotheses, actions, evidence, cost and budget left per Attempt), times in
  ISO 8601 UTC with their offset after the task's creation.
- `timeline --store URL --list [--state S] [--limit N] [--json]`: the tasks,
  newest first, each with its state, Attempts, when it was created and its
  objective, so the operator can find the id to ask for.
- `status --store URL [--json]`: tasks and Attempts by state, how long the
  oldest admitted Attempt has waited, the leases held (and how many of them
  have run out unreaped), and the latest refusals in the history.

Each is data first (`core.timeline.build_timeline`, `task_list`,
`store_status`), then text, so `--json` prints exactly what the text is
made of: times as the store's clock numbers them (Unix seconds), reasons as
recorded. The text writes every time as a person reads it, the times inside
recorded reasons too (`core.timeline.readable_times`: "expired at
2026-12-05T19:35:03.791Z", not the clock's bare number).

"Now" for ages and leases is the store's clock where it has one (PostgreSQL:
the server's, the one leases are judged by), else this machine's.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

LIST_LIMIT_DEFAULT = 50
REFUSALS_SHOWN = 10
"""The latest refusals `status` prints (every one is counted)."""


def add_parsers(commands: Any) -> None:
    timeline = commands.add_parser(
        "timeline", help="a task's recovery timeline from a store, or --list its tasks (a SQLite file or a store URL)"
    )
    timeline.add_argument("--store", metavar="URL", required=True, help=STORE_HELP)
    timeline.add_argument("task_id", metavar="TASK_ID", nargs="?", help="the task whose timeline to print (omit with --list)")
    timeline.add_argument("--list", action="store_true", help="list the tasks, newest first, instead of one timeline")
    timeline.add_argument("--state", metavar="STATE", action="append", help="with --list: only tasks in this state (repeatable)")
    timeline.add_argument(
        "--limit", metavar="N", type=_count, default=LIST_LIMIT_DEFAULT, help=f"with --list: at most N tasks (default {LIST_LIMIT_DEFAULT})"
    )
    timeline.add_argument("--json", action="store_true", help="one JSON object instead of text (the timeline, or the --list)")
    timeline.set_defaults(handler=_timeline)

    status = commands.add_parser("status", help="a store at a glance: states, the oldest wait, leases held, recent refusals")
    status.add_argument("--store", metavar="URL", required=True, help=STORE_HELP)
    status.add_argument("--json", action="store_true", help="one JSON object instead of text")
    status.set_defaults(handler=_status)


STORE_HELP = "sqlite:///PATH (or a SQLite file's path) or postgresql://user@host/db?schema=NAME; it is only read"


def _count(text: str) -> int:
    from .common import UsageError

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"--limit must be a whole number of at least 1, not {text!r}")
    return value


def open_for_reading(target: str) -> Any:
    """The store at `target`, opened so that reading it changes nothing; BadInput when there is none there."""
    from shiftchange.stores import open_store

    from .common import BadInput

    if target.startswith(("postgresql://", "postgres://")):
        return open_store(target, migrate=False)  # a command that only reads creates no schema
    if target == "memory:":
        raise BadInput("memory: holds no history another process wrote: name a SQLite file or a PostgreSQL URL")
    if "://" in target and not target.startswith("sqlite:///"):
        from shiftchange.stores import check_url

        check_url(target)  # a URL, but of no store: InputError "not a store URL", naming the forms that are
    path = Path(target.removeprefix("sqlite:///"))
    # SQLite creates a database for a path that does not exist, and the store lays its schema into an empty file;
    # a command that only reads must change neither, so both are refused before opening.
    if not path.is_file():
        raise BadInput(f"no store at {path}")
    if path.stat().st_size == 0:
        raise BadInput(f"{path} is empty, not a shiftchange store")
    return open_store(f"sqlite:///{path}")


def _reading(handler: Any) -> Any:
    """Run `handler(store)` on the store named by --store; a core error (an unknown task, a store that is not one) is BadInput."""

    def run(args: argparse.Namespace) -> int:
        # Imported here, not at the top: `shiftchange` builds its whole parser before any command runs, and a command
        # that does not read a store should not pay for the core (which compiles no spec at import, but is not free).
        from shiftchange.core import CoreError

        from .common import BadInput

        try:
            with open_for_reading(args.store) as store:
                return handler(args, store)
        except CoreError as error:
            raise BadInput(str(error)) from error

    return run


def _now(store: Any, latest: float | None = None) -> tuple[float, str]:
    """The time ages are judged at, and what it is: the store's clock; else this machine's; but for a store whose records are
    on a simulated clock (times below EPOCH_PLAUSIBLE_S, as an example or a simulation leaves), the latest time it recorded."""
    from shiftchange.core.timeline import EPOCH_PLAUSIBLE_S

    clock = store.clock() if callable(getattr(store, "clock", None)) else None
    if clock is not None:
        return clock.now(), "the store's clock"
    if latest is not None and latest < EPOCH_PLAUSIBLE_S:
        return latest, "its latest recorded time (a simulated clock)"
    return time.time(), "this machine's clock"


@_reading
def _timeline(args: argparse.Namespace, store: Any) -> int:
    from shiftchange.core.timeline import build_timeline, render_timeline

    from .common import EXIT_OK, UsageError

    if args.list:
        if args.task_id is not None:
            raise UsageError("timeline: give a TASK_ID or --list, not both")
        found = task_list(store, args.state, args.limit)
        print(json.dumps(found, indent=2) if args.json else _task_list_text(found), end="\n" if args.json else "")
        return EXIT_OK
    if args.task_id is None:
        raise UsageError("timeline: name a TASK_ID, or --list the tasks to find one")
    if args.state is not None:
        raise UsageError("timeline: --state filters --list; a timeline is of one task")
    timeline = build_timeline(store, args.task_id)
    print(json.dumps(asdict(timeline), indent=2) if args.json else render_timeline(timeline), end="\n" if args.json else "")
    return EXIT_OK


def _did_you_mean(word: str, known: tuple[str, ...]) -> str:
    """A hint naming the closest known state (", did you mean 'cancelled'"), or "" when none is close.

    A near miss (the retired spelling `canceled`, a typo) is refused with the right name: that costs one retry, where
    accepting an alias would keep a second spelling of one word alive in scripts and logs."""
    import difflib

    close = difflib.get_close_matches(word, known, n=1, cutoff=0.8)
    return f", did you mean {close[0]!r}" if close else ""


def task_list(store: Any, states: list[str] | None, limit: int) -> dict[str, Any]:
    """What `timeline --list` reports, as data: how many tasks (in `states`), and the newest `limit` of them."""
    from shiftchange.core.table import packaged

    from .common import UsageError

    known = tuple(packaged().spec.task.states)  # in the table's order, for the message
    for state in states or ():
        if state not in known:
            raise UsageError(f"timeline: --state {state!r} is no task state{_did_you_mean(state, known)}; one of {', '.join(known)}")
    with store.transaction() as tx:
        tasks = tx.tasks_in(states or known)
        attempts = {task.task_id: tx.attempts_of(task.task_id) for task in tasks}
    tasks.sort(key=lambda task: (-task.created_at, task.task_id))
    now, judged_by = _now(
        store, max((a.created_at for tries in attempts.values() for a in tries), default=tasks[0].created_at if tasks else None)
    )

    def latest(task_id: str) -> dict[str, Any] | None:
        tries = attempts[task_id]
        return {"number": tries[-1].number, "state": tries[-1].state} if tries else None

    return {
        "now": now,
        "now_from": judged_by,
        "states": list(states) if states else None,
        "limit": limit,
        "tasks": len(tasks),
        "shown": [
            {
                "task_id": task.task_id,
                "state": task.state,
                "attempts": len(attempts[task.task_id]),
                "latest_attempt": latest(task.task_id),
                "created_at": task.created_at,
                "objective": task.objective,
            }
            for task in tasks[:limit]
        ],
    }


def _task_list_text(found: dict[str, Any]) -> str:
    from shiftchange.core.timeline import moment, readable_times

    shown, limit = found["shown"], found["limit"]
    wanted = "" if not found["states"] else " in " + ", ".join(found["states"])
    more = f"; the newest {limit:,} shown (--limit)" if found["tasks"] > limit else ""
    lines = [f"{found['tasks']:,} task(s){wanted}, newest first{more}"]
    if shown:
        width = max(len(task["task_id"]) for task in shown)
        for task in shown:
            tried = task["latest_attempt"]
            latest = "no attempt" if tried is None else f"attempt {tried['number']} {tried['state']}"
            created = f"{moment(task['created_at'])} ({ago(task['created_at'], found['now'])})"
            lines.append(f"  {task['task_id']:<{width}}  {task['state']:<12} {latest:<24} {created}  {task['objective'][:60]}")
    return readable_times("\n".join(lines) + "\n")


@_reading
def _status(args: argparse.Namespace, store: Any) -> int:
    from .common import EXIT_OK

    found = store_status(store)
    if args.json:
        print(json.dumps(found, indent=2))
    else:
        print(_status_text(found), end="")
    return EXIT_OK


def store_status(store: Any) -> dict[str, Any]:
    """What `status` reports, as data: counts by state, the oldest admitted wait, leases, refusals (the latest first)."""
    from shiftchange.core.states import ATTEMPT_STATES, TASK_STATES
    from shiftchange.core.table import packaged

    with store.transaction() as tx:
        tasks = tx.tasks_in(TASK_STATES)
        attempts = tx.attempts_in(ATTEMPT_STATES)
    events = store.events()
    now, judged_by = _now(store, events[-1].at if events else None)
    admitted = [attempt for attempt in attempts if attempt.state == "admitted"]
    oldest = min(admitted, key=lambda attempt: (attempt.created_at, attempt.attempt_id), default=None)
    leased = [attempt for attempt in attempts if attempt.state in packaged().leased]
    lapsed = [attempt for attempt in leased if attempt.expires_at is not None and attempt.expires_at <= now]
    refused = [event for event in events if not event.accepted]
    return {
        "now": now,
        "now_from": judged_by,
        "tasks": len(tasks),
        "tasks_by_state": _counts(task.state for task in tasks),
        "attempts": len(attempts),
        "attempts_by_state": _counts(attempt.state for attempt in attempts),
        "oldest_admitted": None if oldest is None else {"attempt_id": oldest.attempt_id, "waited_s": max(0.0, now - oldest.created_at)},
        "leases_held": len(leased),
        "leases_run_out": len(lapsed),
        "events": len(events),
        "refusals": len(refused),
        "latest_refusals": [
            {"seq": e.seq, "at": e.at, "kind": e.kind, "task_id": e.task_id, "attempt_id": e.attempt_id, "reason": e.reason, "late": e.late}
            for e in reversed(refused[-REFUSALS_SHOWN:])
        ],
    }


def ago(at: float, now: float) -> str:
    """How long before `now` the time `at` was, as a person says it (`1m12.8s ago`; `in 3.0s` for one after it)."""
    from shiftchange.core.timeline import offset

    return f"{offset(now - at).lstrip('+')} ago" if now >= at else f"in {offset(at - now).lstrip('+')}"


def _counts(states: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for state in states:
        counted[state] = counted.get(state, 0) + 1
    return dict(sorted(counted.items()))


def _status_text(found: dict[str, Any]) -> str:
    from shiftchange.core.timeline import moment, offset, readable_times

    def by_state(counts: dict[str, int]) -> str:
        return ", ".join(f"{state} {count:,}" for state, count in counts.items()) or "none"

    oldest = found["oldest_admitted"]
    waiting = "none admitted" if oldest is None else f"{oldest['attempt_id']}, waiting {offset(oldest['waited_s']).lstrip('+')}"
    lines = [
        f"store status at {moment(found['now'])} ({found['now_from']})",
        f"  tasks            {found['tasks']:,}: {by_state(found['tasks_by_state'])}",
        f"  attempts         {found['attempts']:,}: {by_state(found['attempts_by_state'])}",
        f"  oldest admitted  {waiting}",
        f"  leases held      {found['leases_held']:,} ({found['leases_run_out']:,} run out, not yet reaped)",
        f"  history          {found['events']:,} events, {found['refusals']:,} refused",
    ]
    if found["latest_refusals"]:
        lines.append(f"  latest refusals  (newest first, at most {REFUSALS_SHOWN})")
        for event in found["latest_refusals"]:
            what = event["attempt_id"] or event["task_id"]
            when = f"{moment(event['at'])} ({ago(event['at'], found['now'])})"
            lines.append(f"    {when}  {event['kind']:<16} {what}: {event['reason']}")
    return readable_times("\n".join(lines) + "\n")
