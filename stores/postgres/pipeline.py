"""The wire of a PostgreSQL store: statements bound and sent several to a round trip (libpq's pipeline mode), each
prepared once per connection, and what a psycopg error means to the core."""

from __future__ import annotations

import hashlib
import logging
import select
import weakref
from collections.abc import Iterable
from typing import Any

from shiftchange.core.errors import CoreError, InputError, NotFound, StoreConflict, StoreError, StoreRetryable, StoreUnavailable

from .driver import _TEXT, TransactionStatus, _first_line, pg_errors, pq, psycopg
from .statements import ROLLBACK

# ---- statements: text with %s placeholders, values bound as parameters, several to one round trip (libpq's pipeline mode)


_BINDABLE = (bool, int, float)
"""Besides str, None, lists and tuples (arrays), the exact types a statement takes as a parameter."""


def _bindable(values: Iterable[Any]) -> tuple:
    """`values` as they are bound, checked first: InputError for what the server would never get, before anything is kept or sent.

    Text must be UTF-8 (a lone surrogate is refused); a tuple is bound as a
    list (an array); any other type but None, bool, int and float is refused.
    """
    found = []
    for value in values:
        kind = type(value)
        if kind is str:
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise InputError(f"text the store cannot encode as UTF-8 ({error.reason} at position {error.start})") from None
        elif kind is list or kind is tuple:
            value = list(_bindable(value))
        elif value is not None and kind not in _BINDABLE:
            raise InputError(f"the PostgreSQL store cannot bind a {kind.__name__} ({value!r:.60})")
        found.append(value)
    return tuple(found)


_WIRE: dict[str, tuple[bytes, bytes]] = {}
"""Statement text (with %s placeholders) -> (the text sent, with $1..$N; the name it is prepared under)."""
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()
"""Per connection, the names of the statements prepared on it (each the first time a round trip on it ran the statement)."""
_PREPARED_LOST = ("26000", "42P05")
"""SQLSTATEs of a prepared statement missing or made twice: this module's record of a connection's statements was wrong."""
_TRANSFORMERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""Per connection, psycopg's Transformer: its adapters turn the values into parameters and the rows into Python values."""


def _wire(query: str) -> tuple[bytes, bytes]:
    found = _WIRE.get(query)
    if found is None:
        assert "%%" not in query and "$" not in query, f"statement text must hold only %s placeholders: {query[:80]}"
        pieces = query.split("%s")
        text = (pieces[0] + "".join(f"${number}{piece}" for number, piece in enumerate(pieces[1:], 1))).encode()
        found = _WIRE[query] = (text, b"shiftchange_" + hashlib.sha256(text).hexdigest()[:20].encode())
    return found


def _round_trip(connection: Any, batch: list[tuple[str, tuple]], wanted: range, prepare: bool) -> list[list[tuple]]:
    """Send `batch` ((text, values) pairs) on `connection` and wait for it: one round trip; the rows of the statements `wanted`.

    libpq's pipeline mode: each statement is a Parse (with a name, once per
    connection, when `prepare`), Bind and Execute, its values parameters in
    the Bind (never in the text), and the batch ends in one Sync, the only
    point where the server answers and the only one it waits at. (psycopg's
    own pipeline also sends a Flush after a Sync, which stops the server's
    idle-in-transaction timer until the next Sync: a process stopped between
    two round trips would then hold its row locks for good.) The first error
    is raised once the Sync is read; what followed it did not run. A
    connection left in the middle of a message (an interrupt) is closed.
    """
    pgconn = connection.pgconn
    transformer = _TRANSFORMERS.get(connection)
    if transformer is None:
        transformer = _TRANSFORMERS[connection] = psycopg.adapt.Transformer(connection)
    prepared = _PREPARED.setdefault(connection, set()) if prepare else None
    commands: list[tuple[int | None, bytes]] = []
    """Per command sent: the index of its statement, or None for a prepare (with the name it makes)."""
    pgconn.enter_pipeline_mode()
    try:
        for index, (query, values) in enumerate(batch):
            text, name = _wire(query)
            parameters = transformer.dump_sequence(values, [_TEXT] * len(values)) if values else None
            if prepared is None:
                pgconn.send_query_params(text, parameters)
            else:
                if name not in prepared and (None, name) not in commands:
                    pgconn.send_prepare(name, text)
                    commands.append((None, name))
                pgconn.send_query_prepared(name, parameters)
            commands.append((index, b""))
        pgconn.pipeline_sync()
        results = _results(pgconn)
        pgconn.exit_pipeline_mode()
    except BaseException:
        if pgconn.status != pq.ConnStatus.BAD:
            connection.close()  # alive, but in the middle of a message: nothing else may use it
        raise
    failed = None
    found = []
    for (index, name), result in zip(commands, results, strict=True):
        status = result.status
        if status == pq.ExecStatus.FATAL_ERROR:
            failed = failed or result
        elif index is None:
            if status == pq.ExecStatus.COMMAND_OK:  # made (whatever came after it): the server keeps it past a rollback
                prepared.add(name)  # type: ignore[union-attr]
        elif index in wanted and failed is None:
            transformer.set_pgresult(result)
            found.append(transformer.load_rows(0, result.ntuples, tuple) if status == pq.ExecStatus.TUPLES_OK else [])
    if failed is not None:
        error = pg_errors.error_from_result(failed, encoding=connection.info.encoding)
        if error.sqlstate in _PREPARED_LOST:
            _PREPARED.pop(connection, None)  # the server forgot them (DISCARD ALL, DEALLOCATE): prepare again from the next trip
        raise error
    return found


def _results(pgconn: Any) -> list[Any]:
    """Flush what was sent, then read one result per command up to the Sync (waiting on the socket, never busy)."""
    socket = pgconn.socket
    while pgconn.flush():  # the server may answer while a long message is still going out: read as well, or both stall
        readable, _, _ = select.select([socket], [socket], [])
        if readable:
            pgconn.consume_input()
    found = []
    while True:
        while pgconn.is_busy():
            select.select([socket], [], [])
            pgconn.consume_input()
        result = pgconn.get_result()
        if pgconn.status == pq.ConnStatus.BAD:
            raise psycopg.OperationalError(pgconn.get_error_message())
        if result is None:  # the end of one command's results
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            return found
        found.append(result)


def _exchange(connection: Any, batch: list[tuple[str, tuple]], wanted: int, prepare: bool) -> list[tuple]:
    """`batch` in one round trip; the rows of statement `wanted` (an index, negative from the end).

    For what runs outside a store transaction (the sequencer, a read of why
    a guard refused): a batch without BEGIN is one implicit transaction, so
    its first statement can set what the rest need (`SETTINGS`).
    """
    index = wanted % len(batch)
    return _round_trip(connection, batch, range(index, index + 1), prepare)[0]


class _SessionEnded(psycopg.OperationalError if psycopg is not None else Exception):  # type: ignore[misc]
    """The server had ended the session before a round trip was sent: nothing of that trip ran (a COMMIT included)."""


def _ended_by_server(connection: Any) -> bool:
    """Whether the server ended the session while it was asked nothing (its goodbye, or the close, waits unread on the socket).

    A look at the socket without waiting, before each round trip: a session
    the server terminated or timed out has sent its last message and closed.
    Whatever waits on a live session (a notice) is read into libpq and kept.
    """
    pgconn = connection.pgconn
    try:
        for _ in range(4):
            if not select.select([pgconn.socket], [], [], 0)[0]:
                return False
            pgconn.consume_input()
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return pgconn.status == pq.ConnStatus.BAD


def _rollback(connection: Any) -> None:
    """Roll back whatever transaction `connection` has open; close it if that fails (the pool then replaces it).

    ROLLBACK is sent as it is rather than through psycopg, which would also
    forget (and deallocate) every statement prepared on the connection.
    """
    if connection.closed or connection.info.transaction_status == TransactionStatus.IDLE:
        return
    try:
        done = connection.pgconn.exec_(ROLLBACK.encode()).status == pq.ExecStatus.COMMAND_OK
    except Exception:
        done = False
    if not done:
        connection.close()


# ---- errors: what a psycopg error means to the core.

if psycopg is not None:
    _RETRYABLE: tuple[type[BaseException], ...] = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure, pg_errors.LockNotAvailable)


def _mapped(error: Exception, where: str, *, broken: bool = False, committing: bool = False) -> CoreError:
    """The core's error for a psycopg error raised inside a transaction (the caller raises it `from error`)."""
    line = _first_line(error)
    if isinstance(error, _RETRYABLE):
        return StoreRetryable(f"PostgreSQL at {where} rolled the transaction back ({type(error).__name__}: {line}); run it again")
    if broken or isinstance(error, psycopg.OperationalError):
        # A server that answered with an error (a terminated session included) stopped before the COMMIT that came after
        # it in the message: only a connection lost with no answer at all leaves the outcome unknown.
        if committing and getattr(error, "sqlstate", None) is None:
            return StoreUnavailable(f"lost PostgreSQL at {where} while committing; the transaction may or may not have committed: {line}")
        return StoreUnavailable(f"PostgreSQL at {where}: {line}; nothing was committed")
    if isinstance(error, pg_errors.ForeignKeyViolation):
        return NotFound(f"a record names a task or attempt that does not exist ({line})")
    if isinstance(error, pg_errors.UniqueViolation):
        return StoreConflict(f"a record already exists ({line})")
    if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
        return InputError(f"PostgreSQL refused a value: {line}")
    return StoreError(f"PostgreSQL at {where}: {line}")


_DISCARDED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Connections a store closed because the server dropped them, and then handed back to their pool to be replaced."""


class _QuietDiscard(logging.Filter):
    """Drop the pool's warning about a connection this module discarded on purpose: the store has raised StoreUnavailable for it.

    Every other record of the `psycopg.pool` logger, about any other pool's connections included, passes untouched.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.args, tuple) and len(record.args) == 1):
            return True
        try:
            return record.args[0] not in _DISCARDED
        except TypeError:  # an unhashable argument: not one of ours
            return True


logging.getLogger("psycopg.pool").addFilter(_QuietDiscard())
