"""The states every process of a parallel search has visited, readable by all: one shared fingerprint table per owner.

A process expanding its states reaches many that another process owns and
visited at an earlier level; without asking, it would store each such world
and send it, only for its owner to drop it. The owners write the
fingerprints they visit into tables in memory every process shares (mapped
before the processes are forked), and a process reads its peers' tables
before it stores a world: a state visited at an earlier level is a merge
here as it is in one process, with whether it may take any step.

Reads and writes never overlap: owners write only while merging a level,
and everyone reads only while expanding one, the coordinator's barrier
between. Each table is open addressing with linear probing over 64-bit
fingerprints (zero marks an empty slot; a fingerprint of zero is stored as
one, which only ever costs a merge a collision would cost); past half full
a table takes no more, and a state it does not hold is sent as before.
"""

from __future__ import annotations

import mmap

SLOTS = 1 << 21
"""Slots per owner's table: eight bytes of fingerprint and one of flags each (19 MiB of address space; pages are
touched only as states land in them), so up to a million states per owner are known to its peers."""
_EMPTY = 0


class SharedSeen:
    """Per owner: a table of the fingerprints it visited, and whether each may take no step."""

    def __init__(self, owners: int, slots: int = SLOTS) -> None:
        assert slots & (slots - 1) == 0, "slots must be a power of two"
        self._maps = [(mmap.mmap(-1, slots * 8), mmap.mmap(-1, slots)) for _ in range(owners)]
        self._keys = [memoryview(keys).cast("Q") for keys, _flags in self._maps]
        self._flags = [memoryview(flags).cast("B") for _keys, flags in self._maps]
        self._mask = slots - 1
        self._limit = slots // 2
        self._sizes = [0] * owners
        """How full each table is, as its owner knows (only the owner writes its table)."""

    def add(self, owner: int, key: int, ended: bool) -> None:
        """The owner visited `key` (`ended`: it may take no step)."""
        if self._sizes[owner] >= self._limit:
            return
        keys, key = self._keys[owner], key or 1
        slot = key & self._mask
        while True:
            found = keys[slot]
            if found == _EMPTY:
                keys[slot] = key
                self._flags[owner][slot] = ended
                self._sizes[owner] += 1
                return
            if found == key:
                return
            slot = (slot + 1) & self._mask

    def get(self, owner: int, key: int) -> bool | None:
        """Whether `owner` visited `key` and it may take no step (True), may take steps (False), or None: not known."""
        keys, key = self._keys[owner], key or 1
        slot = key & self._mask
        while True:
            found = keys[slot]
            if found == _EMPTY:
                return None
            if found == key:
                return bool(self._flags[owner][slot])
            slot = (slot + 1) & self._mask

    def close(self) -> None:
        for view in (*self._keys, *self._flags):
            view.release()
        for keys, flags in self._maps:
            keys.close()
            flags.close()
