"""The store suite: where a store says it is durable, the settings it runs with are ones a commit survives a crash under.

What can be checked honestly from inside a process is what the store runs
with, read from the engine itself (`Store.durability()`): an SQLite file's
journal mode and the connection's synchronous level; a PostgreSQL server's
`fsync` and `full_page_writes` and the session's `synchronous_commit`. What
cannot: whether the disk honours a flush (a write cache that lies), whether
a replica has the commit, whether the file system keeps its promises after a
power cut. The README's porting section says so. A store whose
`durability()` is None does not say it is durable (the memory store), and
this check is skipped for it; an engine the kit knows no settings of is
reported as taken on the store's word.
"""

from __future__ import annotations

from shiftchange.core import Durability

from ..checks import Check, collector, expect, skip
from .builders import fresh
from .registry import StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

CRASH_SAFE: dict[str, dict[str, tuple[frozenset[str], str]]] = {
    "sqlite": {
        "journal_mode": (
            frozenset({"wal", "delete", "truncate", "persist"}),
            "without a journal on disk a crash mid-commit corrupts the file",
        ),
        "synchronous": (frozenset({"FULL", "EXTRA"}), "below FULL, the latest commits may be lost on a power cut"),
    },
    "postgresql": {
        "fsync": (frozenset({"on"}), "with fsync off, a crash of the server may corrupt the database"),
        "full_page_writes": (frozenset({"on"}), "without full page writes, a torn page after a crash may be unrecoverable"),
        "synchronous_commit": (
            frozenset({"on", "local", "remote_write", "remote_apply"}),
            "with synchronous_commit off, a commit the caller was told of may be lost on a crash",
        ),
    },
}
"""For each engine the kit knows: each setting, the values a commit survives a crash under, and why the others do not do."""


@_check
def a_durable_store_runs_with_settings_a_commit_survives_a_crash_under(make_store: StoreFactory) -> None:
    """A store that reports its durability settings runs with ones under which a committed transaction survives a crash."""
    with fresh(make_store) as store:
        reported = store.durability()
        if reported is None:
            skip("the store does not say it is durable (durability() is None): what it holds does not outlive its process")
        expect(isinstance(reported, Durability), f"durability() must return a shiftchange.core.Durability or None, not {reported!r}")
        known = CRASH_SAFE.get(reported.engine)
        if known is None:
            skip(f"the kit knows no crash-safe settings of engine {reported.engine!r}: its durability is taken on the store's word")
        for setting, (safe, why) in known.items():
            value = reported.settings.get(setting)
            expect(value is not None, f"durability() of a {reported.engine} store does not report {setting!r}: {reported.settings}")
            expect(value in safe, f"{reported.engine} {setting}={value}: {why} (crash-safe: {', '.join(sorted(safe))})")
