"""A store several processes share through one append-only journal file: the kit's two-handle checks run against it.

Each handle keeps its own `MemoryStore` mirror and the offset of the journal
it has applied. A transaction holds an exclusive flock on the journal, first
applies what other handles committed since, then logs every write it makes as
a frame and ends with a commit or abort frame. A writer killed mid-transaction
leaves frames with neither; whoever next holds the lock knows their writer is
dead (a live one would hold the lock) and drops them. `keeps_unfinished=True`
is the deliberate bug: a port that replays every logged write of a dead writer.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import pickle
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from shiftchange.core import Attempt, Event, Intent, MemoryStore, Store, StoreRetryable, Task, Transaction
from tests.kit.broken_stores import WrappedTransaction

_LENGTH = struct.Struct(">I")
"""A frame is its pickle's length, then the pickle: ("w", txid, method, args, kwargs), ("c", txid) or ("a", txid)."""


class _JournalingTransaction(WrappedTransaction):
    """Reads go to the mirror's transaction; each write is applied there (so the transaction reads its own) and logged."""

    def __init__(self, inner: Transaction, txid: str, append: Callable[[bytes], None]) -> None:
        super().__init__(inner)
        self.txid = txid
        self.append = append

    def _write(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        # Pickled before the write, which bumps the version of the record passed in; logged only after it, so a write
        # the mirror refused (a conflict the caller catches before it commits) is never replayed anywhere.
        frame = _frame(("w", self.txid, method, args, kwargs))
        result = getattr(self.inner, method)(*args, **kwargs)
        self.append(frame)
        return result

    def insert_task(self, task: Task) -> None:
        self._write("insert_task", task)

    def update_task(self, task: Task, **changes: Any) -> None:
        self._write("update_task", task, **changes)

    def insert_attempt(self, attempt: Attempt) -> None:
        self._write("insert_attempt", attempt)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self._write("update_attempt", attempt, **changes)

    def insert_intent(self, intent: Intent) -> None:
        self._write("insert_intent", intent)

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self._write("update_intent", intent, **changes)

    def append_event(self, **fields: Any) -> Event:
        return self._write("append_event", **fields)

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self._write("put_leader", name, holder, generation, expires_at)


def _frame(entry: tuple) -> bytes:
    data = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


class JournalStore(Store):
    """One handle on the journal at `path`: its own file descriptor (so its own flock), mirror and applied offset."""

    races: ClassVar[bool] = False
    lock_timeout_s: float | None = 1.0

    def __init__(self, path: Path | str, *, keeps_unfinished: bool = False) -> None:
        self.path = Path(path)
        self.keeps_unfinished = keeps_unfinished
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._mirror = MemoryStore()
        self._offset = 0
        self._open = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases any flock this handle holds
            self._fd = -1

    def _lock(self, kind: int) -> None:
        """Take the journal's flock, polling so a blocked caller gets StoreRetryable after lock_timeout_s, not a hang."""
        deadline = time.monotonic() + float(self.lock_timeout_s or 0.0)
        while True:
            try:
                fcntl.flock(self._fd, kind | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreRetryable(f"the journal {self.path} stayed locked for {self.lock_timeout_s:g} s") from None
                time.sleep(0.005)

    def _append(self, frame: bytes) -> None:
        """One os.write per frame on an O_APPEND descriptor: no buffer to flush, nothing lost when the process is killed."""
        view = memoryview(frame)
        while view:
            view = view[os.write(self._fd, view) :]

    def _catch_up(self) -> None:
        """Apply every transaction committed past this handle's offset, each in one mirror transaction, in journal order.

        Called under the lock, so a transaction still unfinished at the end of
        the journal belongs to a writer that died: dropped (or, with
        keeps_unfinished, applied as if it had committed).
        """
        data = os.pread(self._fd, os.fstat(self._fd).st_size - self._offset, self._offset)
        pending: dict[str, list[tuple]] = {}
        position = 0
        while position + _LENGTH.size <= len(data):
            (length,) = _LENGTH.unpack_from(data, position)
            if position + _LENGTH.size + length > len(data):
                break  # a frame cut short: never written whole, so never part of a commit
            entry = pickle.loads(data[position + _LENGTH.size : position + _LENGTH.size + length])
            position += _LENGTH.size + length
            if entry[0] == "w":
                pending.setdefault(entry[1], []).append(entry[2:])
            elif entry[0] == "c":
                self._apply(pending.pop(entry[1], []))
            else:
                pending.pop(entry[1], None)
        if self.keeps_unfinished:
            for writes in pending.values():
                self._apply(writes)
        self._offset += position

    def _apply(self, writes: list[tuple]) -> None:
        with self._mirror.transaction() as tx:
            for method, args, kwargs in writes:
                getattr(tx, method)(*args, **kwargs)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        if self._open:
            raise RuntimeError("JournalStore transactions do not nest")
        self._open = True
        try:
            self._lock(fcntl.LOCK_EX)
            try:
                self._catch_up()
                txid = uuid.uuid4().hex
                try:
                    with self._mirror.transaction() as inner:
                        try:
                            yield _JournalingTransaction(inner, txid, self._append)
                            self._append(_frame(("c", txid)))
                        except BaseException:
                            self._append(_frame(("a", txid)))
                            raise
                finally:
                    self._offset = os.fstat(self._fd).st_size  # this transaction's frames are in the mirror already
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._open = False

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        if self._open:  # inside this handle's own transaction, which holds the lock: read as the transaction reads
            return self._mirror.events(task_id, after_seq)
        self._lock(fcntl.LOCK_SH)
        try:
            self._catch_up()
            return self._mirror.events(task_id, after_seq)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def reopen(store: Store) -> Store:
    """Another handle on the same journal, as another process would open it."""
    return JournalStore(store.path, keeps_unfinished=store.keeps_unfinished)  # type: ignore[attr-defined]


def journal_files(directory: Path, keeps_unfinished: bool = False) -> tuple[Callable[[], Store], Callable[[Store], Store]]:
    """A factory of fresh journals in `directory`, and the reopen that opens the same journal again."""
    numbers = itertools.count()
    return (lambda: JournalStore(Path(directory) / f"journal-{next(numbers)}.log", keeps_unfinished=keeps_unfinished)), reopen
