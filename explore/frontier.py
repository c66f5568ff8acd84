"""The states a breadth-first level holds until they are expanded: in memory up to a bound, the rest spilled to a file.

A level of a search of minutes holds hundreds of thousands of worlds of a few
kilobytes each; kept in memory they would outgrow the machine long before
the visited fingerprints do. A `Frontier` keeps its first
`memory_max_bytes` of worlds in memory and appends the rest to a file,
pickled one record after another, read back in the same order. A frontier
given a `path` writes every record there, so that another process (the
partition that owns those states) reads them (`Spilled`).
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Iterator
from typing import Any

MEMORY_MAX_BYTES = 64 * 1024 * 1024
"""The default: 64 MiB of worlds in memory per frontier (about ten thousand states), the rest on disk."""


class Frontier:
    """Records (a world's bytes first) appended, then read back in order; past the memory bound (or with a path), on disk."""

    def __init__(self, memory_max_bytes: int = MEMORY_MAX_BYTES, directory: str | None = None, path: str | None = None) -> None:
        self.memory_max_bytes = -1 if path is not None else memory_max_bytes
        self.directory, self.path = directory, path
        self._memory: list[tuple[Any, ...]] = []
        self._memory_bytes = 0
        self._file: Any = None
        self.spilled = 0
        """Records written to the file."""

    def __len__(self) -> int:
        return len(self._memory) + self.spilled

    def append(self, record: tuple[Any, ...]) -> None:
        size = len(record[0])
        if self._file is None and self._memory_bytes + size <= self.memory_max_bytes:
            self._memory.append(record)
            self._memory_bytes += size
            return
        if self._file is None:
            if self.path is not None:
                self._file = open(self.path, "wb+")  # noqa: SIM115 -- kept open while records are appended
            else:
                self._file = tempfile.TemporaryFile(prefix="shiftchange-explore-", dir=self.directory)  # noqa: SIM115 -- as above
        pickle.dump(record, self._file, pickle.HIGHEST_PROTOCOL)
        self.spilled += 1

    def finish(self) -> None:
        """Make the records on disk readable by another process (a frontier with a path: every record)."""
        if self._file is not None:
            self._file.flush()
        elif self.path is not None:
            open(self.path, "wb").close()

    def records(self) -> Iterator[tuple[Any, ...]]:
        """Every record, in the order appended, keeping them."""
        yield from self._memory
        if self._file is not None:
            self._file.flush()
            self._file.seek(0, os.SEEK_SET)
            for _ in range(self.spilled):
                yield pickle.load(self._file)
            self._file.seek(0, os.SEEK_END)

    def drain(self) -> Iterator[tuple[Any, ...]]:
        """Every record, in the order appended, each given once and then forgotten (the file is closed at the end)."""
        memory, self._memory, self._memory_bytes = self._memory, [], 0
        memory.reverse()
        while memory:
            yield memory.pop()
        if self._file is not None:
            file, self._file = self._file, None
            file.flush()
            file.seek(0, os.SEEK_SET)
            try:
                for _ in range(self.spilled):
                    yield pickle.load(file)
            finally:
                file.close()
                self.spilled = 0

    def close(self) -> None:
        self._memory, self._memory_bytes = [], 0
        if self._file is not None:
            self._file.close()
            self._file = None
        self.spilled = 0


class Spilled:
    """The records another process wrote to `path` (a `Frontier` with that path, finished), read like a frontier's."""

    def __init__(self, path: str) -> None:
        self.path = path

    def records(self) -> Iterator[tuple[Any, ...]]:
        with open(self.path, "rb") as file:
            while True:
                try:
                    yield pickle.load(file)
                except EOFError:
                    return

    def drain(self) -> Iterator[tuple[Any, ...]]:
        yield from self.records()
        os.unlink(self.path)
