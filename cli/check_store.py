"""`shiftchange check-store MODULE:FACTORY|URL`: the conformance kit against a user's store, as a PASS/FAIL report and an exit status.

The command imports `FACTORY` from `MODULE` (the current directory is on the
import path, as for `python -m`), calls it once to see that it makes a store,
then runs the kit's store contract (`check_store`) and the contract suite
with the reference core over that store (`check_contracts`), and, with
`--stateful`, the Hypothesis stateful machine for a small example budget.
A store URL (`sqlite:///DIR`, `postgresql://...`) names a place for fresh
stores instead, and the command opens a second handle on each store the kit
asks for one (the same file, the same schema), so those stores are checked
through two handles as the processes of a deployment use them. For a
user's own port, `--reopen MODULE:FUNCTION` names the function of a store
that opens that second handle (`reopen(store)`, as `check_store` takes it).

`--json` prints one object instead of the lines: `target`, `ok`, `suites`
(each `suite`, `checks` with `name`, `goal`, `passed`, `skipped`, `detail`,
and its `totals`) and `totals` over all (`checks`, `passed`, `failed`, `skipped`).
Exit status follows `shiftchange`'s contract: 0 when every check passes
(skipped ones are no failure), 1 when any fails, 2 when the argument names
no usable factory (one line on stderr). Nothing from the kit is imported
until the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run_check_store"]

EXAMPLES_DEFAULT = 25
"""The stateful machine's example budget with `--stateful` and no `--examples`: a smoke test, not a search."""
KIT_LOCK_TIMEOUT_S = 2.0
"""The busy timeout of the SQLite files a `sqlite:///DIR` target makes (PostgreSQL's default lock timeout): the kit holds a
lock past it, and SQLite's own default (30 s) would make every run wait that long."""
STORE_METHODS = ("transaction", "events", "close", "get_task", "get_attempt", "get_attempts", "get_intent", "get_intents")
"""What the kit calls on a store; an object without them is not a store, whatever its class."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add `check-store` to the `shiftchange` commands; its handler returns the exit status."""
    check = commands.add_parser("check-store", help="run the conformance kit against your store factory (MODULE:FACTORY)")
    check.add_argument(
        "target",
        metavar="MODULE:FACTORY|URL",
        help="a callable that returns a fresh, empty Store on every call; or a store URL: memory:, sqlite:///DIR (fresh files in"
        " that directory) or postgresql://... (a fresh schema per store, dropped afterwards)",
    )
    check.add_argument(
        "--reopen",
        metavar="MODULE:FUNCTION",
        help="with MODULE:FACTORY: a function of a store that opens a second handle on the data it holds (another connection, as"
        " another process would); the kit then also runs its two-handle checks",
    )
    check.add_argument("--stateful", action="store_true", help="also run the Hypothesis stateful machine over the reference core")
    check.add_argument("--examples", metavar="N", type=_whole, default=EXAMPLES_DEFAULT, help="stateful examples (default %(default)s)")
    check.add_argument("--seed", metavar="N", type=_whole, default=0, help="the stateful run's seed (default %(default)s)")
    check.add_argument("--json", action="store_true", help="print one JSON object (suites, checks, totals) instead of lines")
    check.set_defaults(handler=run_check_store)
    return check


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


def run_check_store(args: argparse.Namespace) -> int:
    """Load the factory the target names, run the suites, print a line per check and a summary; returns the exit status."""
    if _is_url(args.target):
        if args.reopen is not None:
            from shiftchange.cli.common import BadInput

            raise BadInput(
                f"check-store: --reopen goes with a MODULE:FACTORY target; the store URL {args.target} opens its own second handle"
            )
        make_store, reopen, cleanup = url_factory(args.target)
    else:
        make_store, cleanup = load_factory(args.target), None
        reopen = None if args.reopen is None else load_reopen(args.reopen, make_store, args.target)
    try:
        return _run(args, make_store, reopen)
    finally:
        if cleanup is not None:
            cleanup()


def _run(args: argparse.Namespace, make_store: Callable[[], Any], reopen: Callable[[Any], Any] | None) -> int:
    from shiftchange.cli.common import EXIT_FAILED, EXIT_OK
    from shiftchange.testing import CheckResult, check_contracts, check_store, reference_orchestrator

    suites = [
        ("store contract" + (", through two handles" if reopen else ""), check_store(make_store, reopen=reopen).results),
        ("contracts, the reference core over this store", check_contracts(reference_orchestrator(make_store)).results),
    ]
    if args.stateful:
        ok, detail = _stateful(make_store, args.examples, args.seed)
        title = f"stateful machine, the reference core over this store ({args.examples} examples, seed {args.seed})"
        suites.append((title, (CheckResult("stateful_machine", "the stateful machine finds no broken rule", ok, detail),)))
    totals = _counts(result for _title, results in suites for result in results)
    if args.json:
        print(json.dumps(_report(args.target, suites, totals), indent=2))
    else:
        for title, results in suites:
            print(f"{title}: {len(results)} check{'s' if len(results) != 1 else ''}")
            for result in results:
                _line(result)
        passed, failed, skipped = totals["passed"], totals["failed"], totals["skipped"]
        summary = f"{args.target}: {passed} of {totals['checks']} checks pass"
        print(summary + (f"; {failed} fail" if failed else "") + (f"; {skipped} skipped" if skipped else ""))
    return EXIT_FAILED if totals["failed"] else EXIT_OK


def _counts(results: Any) -> dict[str, int]:
    counts = {"checks": 0, "passed": 0, "failed": 0, "skipped": 0}
    for result in results:
        counts["checks"] += 1
        counts["skipped" if result.skipped else "passed" if result.passed else "failed"] += 1
    return counts


def _report(target: str, suites: list[tuple[str, Any]], totals: dict[str, int]) -> dict[str, Any]:
    """The machine-readable report: every suite with each check's result, and the totals."""
    return {
        "target": target,
        "ok": totals["failed"] == 0,
        "suites": [
            {
                "suite": title,
                "checks": [
                    {"name": r.name, "goal": r.goal, "passed": r.passed and not r.skipped, "skipped": r.skipped, "detail": r.detail}
                    for r in results
                ],
                "totals": _counts(results),
            }
            for title, results in suites
        ],
        "totals": totals,
    }


def _is_url(target: str) -> bool:
    return target == "memory:" or "://" in target


def url_factory(url: str) -> tuple[Callable[[], Any], Callable[[Any], Any] | None, Callable[[], None]]:
    """Fresh, empty stores of the kind `url` names, how to open a second handle on one, and what removes them afterwards.

    The kit needs a new store for every check, so a URL names a place for
    them: `sqlite:///DIR` an existing directory (a new file per store),
    `postgresql://...` a server (a new schema `check_<hex>` per store). The
    second handle opens the same file, or the same schema, again; `memory:`
    has none (a memory store lives in one process).
    """
    import shutil
    import tempfile
    import uuid

    from shiftchange.cli.common import BadInput
    from shiftchange.core import CoreError, MemoryStore
    from shiftchange.stores import describe, open_store

    scheme = url.partition(":")[0].lower()
    if url == "memory:":
        return MemoryStore, None, lambda: None
    if scheme == "sqlite":
        directory = Path(url.removeprefix("sqlite:///"))
        if not url.startswith("sqlite:///") or not directory.is_dir():
            raise BadInput(f"check-store {url}: an SQLite URL names a directory to make fresh store files in, and {directory} is not one")
        holder = Path(tempfile.mkdtemp(prefix="check-store-", dir=directory))
        made = iter(range(1, 1_000_000))

        def make_file() -> Any:
            return open_store(f"sqlite:///{holder / f'store-{next(made)}.sqlite'}", busy_timeout_s=KIT_LOCK_TIMEOUT_S)

        def reopen_file(store: Any) -> Any:
            return open_store(f"sqlite:///{store.path}", busy_timeout_s=KIT_LOCK_TIMEOUT_S)

        return make_file, reopen_file, lambda: shutil.rmtree(holder, True)
    if scheme not in ("postgresql", "postgres"):
        raise BadInput(
            f"check-store: not a store URL: {describe(url)!r}; use memory:, sqlite:///DIR (a directory for fresh store files)"
            " or postgresql://... (a fresh schema per store), or MODULE:FACTORY"
        )
    if "schema=" in url:
        raise BadInput(f"check-store {describe(url)}: the kit makes a fresh schema per store; leave schema= out of the URL")
    schemas: list[str] = []

    def make() -> Any:
        schemas.append(f"check_{uuid.uuid4().hex[:12]}")
        return open_store(url, schema=schemas[-1])

    def cleanup() -> None:
        for schema in schemas:  # the kit closes its stores: open each schema again to drop it
            with contextlib.suppress(CoreError):
                open_store(url, schema=schema, migrate=False).drop_schema()

    try:
        make().close()
    except CoreError as error:
        cleanup()
        raise BadInput(f"check-store: {error}") from None
    return make, (lambda store: open_store(url, schema=store.schema, migrate=False)), cleanup


def load_factory(target: str) -> Callable[[], Any]:
    """The store factory `MODULE:FACTORY` names, called once to see that it makes a store; bad input otherwise."""
    from shiftchange.cli.common import BadInput

    factory = load_callable(target, "check-store", "MODULE:FACTORY")
    try:
        store = factory()
    except Exception as error:
        raise BadInput(f"{target}() raised {type(error).__name__}: {error}") from None
    missing = [name for name in STORE_METHODS if not callable(getattr(store, name, None))]
    if missing:
        raise BadInput(f"{target}() returned a {type(store).__name__}, not a Store (it has no {', '.join(missing)})")
    store.close()
    return factory


def load_reopen(name: str, make_store: Callable[[], Any], target: str) -> Callable[[Any], Any]:
    """The `--reopen` function, tried once on a fresh store from the factory to see that it opens a store; bad input otherwise."""
    from shiftchange.cli.common import BadInput

    reopen = load_callable(name, "--reopen", "MODULE:FUNCTION")
    try:
        store = make_store()
    except Exception as error:
        raise BadInput(f"{target}() raised {type(error).__name__}: {error}") from None
    try:
        try:
            other = reopen(store)
        except Exception as error:
            raise BadInput(f"--reopen {name}(a store from {target}) raised {type(error).__name__}: {error}") from None
        missing = [method for method in STORE_METHODS if not callable(getattr(other, method, None))]
        if other is not store:
            with contextlib.suppress(Exception):  # whatever it is, it was opened: closed before the one-line error
                other.close()
        if missing:
            raise BadInput(f"--reopen {name}(store) returned a {type(other).__name__}, not a Store (it has no {', '.join(missing)})")
        if other is store:
            raise BadInput(f"--reopen {name}(store) returned the store it was given: it must open a second handle on its data")
    finally:
        with contextlib.suppress(Exception):
            store.close()
    return reopen


def load_callable(target: str, option: str, form: str) -> Callable[..., Any]:
    """The callable `MODULE:NAME` names (the current directory on the import path); bad input otherwise."""
    from shiftchange.cli.common import BadInput

    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise BadInput(f"{option} takes {form} (e.g. mypackage.stores:{'make_store' if 'FACTORY' in form else 'reopen'}), not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise BadInput(f"{option}: cannot import {module_name}: {type(error).__name__}: {error}") from None
    factory = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            raise BadInput(f"{option}: {module_name} has no attribute {attribute!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        what = "makes a store" if "FACTORY" in form else "opens a second handle on a store"
        raise BadInput(f"{option}: {target} is a {type(factory).__name__}, not a callable that {what}")
    return factory


def _stateful(make_store: Callable[[], Any], examples: int, seed: int) -> tuple[bool, str]:
    """Run the machine; a failure's detail is its message and the steps Hypothesis gives to reproduce it."""
    from shiftchange.cli.common import BadInput

    try:
        from shiftchange.testing import orchestrator_machine, reference_orchestrator, run_machine
    except ImportError as error:
        raise BadInput(f"--stateful: {error}") from None
    try:
        run_machine(orchestrator_machine(reference_orchestrator(make_store)), examples=examples, seed=seed)
    except Exception as error:
        return False, "\n".join([f"{type(error).__name__}: {error}", *getattr(error, "__notes__", ())])
    return True, ""


def _line(result: Any) -> None:
    print(f"{'SKIP' if result.skipped else 'PASS' if result.passed else 'FAIL'}  {result.name}")
    if result.skipped or not result.passed:
        for line in result.detail.splitlines():
            print(f"      {line}")
