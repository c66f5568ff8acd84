"""A state's identity for deduplication: the world's text hashed to a 64-bit fingerprint, workers interchangeable.

TLC's habit: a visited state is kept as its fingerprint only, so a search of
millions of states keeps eight bytes (and a set's overhead) for each, never
its text. Two states whose texts differ may share a fingerprint; the search
would then take the second for the first and never expand it. The chance of
any such collision in a search is at most the number of lookups times the
states looked up among, over 2**64 (`collision_probability`), which the
report prints: about 1e-9 for a million states and twenty million steps.

The text is the world's `digest_parts` (records, ledger, calls and
duplicates in flight, the actors, the agenda, the faults left, the clock;
never the history), its times as the configuration's clock writes them
(`abstract_time.py`). With symmetry reduction the digest is the least text
over the renamings of the workers that list their rows in order once every
worker's name is masked in them, each collection and the workers' rows
sorted after the renaming, so a state and its mirror image count once.
That is as exact as the least text over every renaming (TLC's symmetry
sets): the renamings it tries for a state's mirror image are the mirror
image's of its own, so both reach the same least text. Only workers whose
masked rows tie are tried both ways, so two workers doing different things
cost one text, not two, and three cost one, not six.
Tasks are not reduced: `claim_next` breaks ties between Attempts admitted at
one instant by id and admission serves its queue in arrival order, so two
tasks are not interchangeable to the core.

A renaming is done with `str.replace` through placeholders (a worker's name
is never a prefix of another's: there are at most four), which is several
times faster than a regular expression calling back for every match.
"""

from __future__ import annotations

import hashlib
import itertools

from .config import worker_name
from .world import World

FINGERPRINT_BITS = 64
DIGEST_BYTES = FINGERPRINT_BITS // 8
_PLACEHOLDERS = tuple(chr(0xE000 + index) for index in range(8))
"""Private-use characters no state's text holds: where a name stands while the others are renamed."""
_MASK = chr(0xE00F)
"""Where every worker's name stands in a masked row."""


def fingerprint(world: World, symmetry: bool) -> int:
    """The state's 64-bit fingerprint: its digest as a number."""
    return int.from_bytes(digest(world, symmetry), "big")


def collision_probability(states: int, transitions: int) -> float:
    """A bound on the chance that two distinct states of a search shared a fingerprint: each step's state was looked up
    among at most `states` fingerprints, each match a chance in 2**64 (the union bound; TLC prints the same estimate)."""
    return min(1.0, (transitions + 1) * states / 2.0**FINGERPRINT_BITS)


def digest(world: World, symmetry: bool, abstract: bool | None = None) -> bytes:
    """The state's identity: the least text over the renamings of the workers that order their masked rows (with symmetry), hashed;
    `abstract`: its times as the abstract clock writes them (default: as the configuration's `time` says)."""
    ordered, bags, rows = world.digest_parts(abstract)
    names = tuple(worker_name(i) for i in range(len(rows)))
    orders = _renamings(rows, names) if symmetry and len(rows) > 1 else [names]
    best = None
    for order in orders:
        candidate = _text(ordered, bags, rows, names, order)
        if best is None or candidate < best:
            best = candidate
    return hashlib.blake2b(best.encode(), digest_size=DIGEST_BYTES).digest()


def _renamings(rows: list[str], names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every renaming (worker `names[i]` becomes `order[i]`) that puts the masked rows in ascending order, ties both ways."""
    masked = []
    for row in rows:
        for name in names:
            row = row.replace(name, _MASK)
        masked.append(row)
    ranked = sorted(range(len(rows)), key=masked.__getitem__)
    groups = [list(group) for _row, group in itertools.groupby(ranked, key=masked.__getitem__)]
    orders = []
    for arrangement in itertools.product(*(itertools.permutations(group) for group in groups)):
        # Worker number `position` in the sorted order gets the `position`-th name.
        order = [""] * len(names)
        for position, worker in enumerate(itertools.chain.from_iterable(arrangement)):
            order[worker] = names[position]
        orders.append(tuple(order))
    return orders


def _text(ordered: str, bags: list[list[str]], rows: list[str], names: tuple[str, ...], order: tuple[str, ...]) -> str:
    """The state's text with worker `names[i]` renamed `order[i]`, every collection sorted after the renaming."""
    if order != names:
        pairs = [(name, new) for name, new in zip(names, order, strict=True) if name != new]

        def rename(part: str) -> str:
            for (name, _new), placeholder in zip(pairs, _PLACEHOLDERS, strict=False):
                part = part.replace(name, placeholder)
            for (_name, new), placeholder in zip(pairs, _PLACEHOLDERS, strict=False):
                part = part.replace(placeholder, new)
            return part

        ordered, bags, rows = rename(ordered), [[rename(row) for row in bag] for bag in bags], [rename(row) for row in rows]
    return "|".join([ordered, *("/".join(sorted(bag)) for bag in bags), *sorted(rows)])
