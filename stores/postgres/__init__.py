"""PostgresStore: the storage interface on one PostgreSQL schema that many threads and processes share.

Why these choices:

- One database transaction per `transaction()`, at READ COMMITTED, on a
  connection checked out of a `ConnectionPool` (psycopg_pool) for the block and
  no longer. Different threads run transactions side by side, each on its own
  connection; a thread cannot nest them.
- As few round trips as the answers allow. Nothing is sent until the first
  read, and BEGIN goes with it. A read waits for its answer; a write does not:
  writes are kept and go with the next read or with the COMMIT, several
  statements to a round trip (libpq's pipeline mode: each statement a Parse,
  Bind and Execute, the batch one Sync). Every value is a bound parameter,
  never part of the statement text, so nothing depends on how the server
  would read a quoted literal (`standard_conforming_strings` included). Each
  statement is prepared once per connection, by name, on its first use
  (`prepare=False`: never, for a pooler that does not carry prepared
  statements). A contract's cycle on a lease (claim and start, renew,
  complete) is six round trips, three of them commits.
- Nothing is set on a session: each transaction's first statement sets its
  search_path and its two lock bounds for itself (`SETTINGS`, SET LOCAL's
  scope), so a transaction-mode pooler (PgBouncer) may hand every
  transaction to another server connection. What needs a session is the
  prepared statements (`prepare=False` behind such a pooler, unless it
  carries protocol-level prepared statements, as PgBouncer 1.21 and later do
  with max_prepared_statements set) and the wake-up listener's LISTEN (see
  `stores.wakeup`; without it idle workers poll).
- An insert becomes a statement only when it is sent, so updates of the
  record until then ride in it: a bulk intake's create, accept and dispatch
  of a task are one INSERT. A message of nothing but inserts (a batch) is one
  multi-row INSERT per table, its guard counting every row; a transaction's
  events are one INSERT. An Attempt of a task the same transaction inserted
  needs no check of its parent or number on the server: no other transaction
  can see that task before this one commits. `tasks(ids)` reads a batch's
  tasks in one round trip, locked in id order.
- Reads that precede writes lock their rows (`task`, `attempt`, `intent`,
  `attempts_of`, `intents_of`, `claimable`, `claim_candidate`), so two
  contracts on the same records take turns instead of racing. The lock is
  `FOR NO KEY UPDATE`, the lock an UPDATE of non-key columns takes itself: it
  excludes every other contract exactly as `FOR UPDATE` would, but not the
  `FOR KEY SHARE` a foreign-key check takes. No contract ever changes a key
  (`store.WRITABLE` has none). A record locked once is read once per
  transaction: a second read is the first's object, which the writes keep
  current.
- The guard stays in the write, as in every store: `UPDATE ... WHERE key =
  %s AND version = %s` (and for an Attempt `AND state NOT IN (terminal)`).
  Since a write is sent without waiting, the server checks its row count
  (`shiftchange_guard`, migration 4): a write that matched no row, an insert
  of a key that exists, an Attempt out of its 1..N order or of an unknown
  parent aborts the transaction with SQLSTATE SCG01 naming which write it
  was, and the store says why in the core's terms: changed since read
  (StoreRetryable: the core runs the contract again), missing or terminal
  (StoreConflict), unknown parent (NotFound). The error comes from the round
  trip that carried the write: the next read, or the commit. Deadlocks,
  serialization failures and lock timeouts are `StoreRetryable` too; a lost
  connection is `StoreUnavailable` (saying whether the commit may have
  happened).
- `claimable()` is the claim queue: `FOR NO KEY UPDATE SKIP LOCKED`, so many
  claimers each take a different row instead of queueing behind one;
  `claim_candidate()` reads the pick, its task and the task's Attempts in one
  message, locked in that order (the second statement finds the task by a
  transaction-local setting the first one set).
- The history is numbered after commit. A transaction's events are inserted
  with its COMMIT, after every row lock it takes, with `pos` from a sequence
  and `xid` its transaction, and no `seq`. One sequencer at a time
  (`number_events`, run by every reader before it reads, holding
  `event_counter`'s row for the batch only) numbers every committed event it
  can see, ordered by the smallest `pos` of its transaction, then `pos`,
  from the last number on. So no lock is held across any contract's
  transaction and commits share WAL flushes. What a reader may rely on: the
  history it reads is numbered 1..N with no gap, and no event is ever
  numbered before one a reader already saw (a batch sees a transaction only
  once it committed, and every transaction that committed before it too);
  events of one transaction are consecutive; a transaction that waited for
  another's row lock, or began after it committed, has its events after the
  other's. Two transactions that touched no common row and overlapped may
  be numbered in either order. `append_event` returns the event with seq 0
  (`Store.numbers_on_append` is False); `events()` inside an open
  transaction shows the numbered history it can see, not its own events.
  Versions 1-3 took each number from `event_counter` inside the appending
  transaction, holding that row's lock to commit: every event-writing commit
  waited for the one before, so 16 processes ran slower than 4.
- Leases are judged by the server's clock: `store.clock()` is a
  `ServerClock`, whose time inside a transaction is the server's
  `clock_timestamp()` read right after the transaction's latest locking read
  (in the same message), and outside one the server's time last read plus
  local monotonic time, never the local wall clock.
- A transaction that makes an Attempt admitted sends `pg_notify(channel,
  workspace)` with its COMMIT (`stores.wakeup`): idle workers LISTEN instead
  of polling. NOTIFY serialises committing transactions that send it, which
  is why only admission (one leader) sends it.
- Inserts never block on a duplicate: `ON CONFLICT DO NOTHING`, and the
  guard turns "nothing inserted" into StoreConflict. The foreign keys are in
  the schema as well.
- Text holds every string Python can encode as UTF-8, NUL included, as the
  other stores do, and sorts as they sort it, by code point. PostgreSQL text
  cannot hold U+0000, so a string that contains U+0000 or U+0001 is stored
  with U+0001 written as U+0001 U+0002 and U+0000 as U+0001 U+0001. That
  escape keeps code-point order (both replacements sort below every other
  character, and in the order of what they replace), so `ORDER BY` on a
  stored id is the order of the ids themselves, a tie in the claim queue
  included. Every other string is stored as it is. The connection's adapters
  do it both ways, for every parameter and every text column. Lone
  surrogates cannot be sent: InputError. (Schema version 2 and before used an
  escape that did not keep order; migration 3 rewrites what it stored.)
- Every text column collates "C": ids sort by code point, as Python sorts
  them, whatever the database's locale.
- The schema lives only in numbered SQL files (`migrations/postgresql/`),
  applied in order under a transaction-level advisory lock and recorded in the
  schema's `schema_migrations`; a schema of a newer version, or a schema
  holding tables that is not a shiftchange store, is refused untouched.

psycopg is optional: this package imports without it, and `PostgresStore`
then raises StoreError saying how to install it.

The package's modules, one concern each: `driver` (psycopg, if installed),
`text` (the NUL escape in the adapters), `connect` (connection strings and
options), `schema` (the migrations), `statements` (the tables and every
statement), `pipeline` (binding, round trips, errors), `transaction`, `clock`
(the server's), and `store` (`PostgresStore`, its pool, the numbering).
"""

from __future__ import annotations

from .clock import ServerClock
from .connect import _connection_options
from .driver import INSTALL_HINT
from .schema import CREATE_SCHEMA_MIGRATIONS, MIGRATIONS, RECORD_MIGRATION, SCHEMA_VERSION, check_schema_name, migrate
from .statements import TABLES
from .store import PostgresStore
from .text import escape_text, unescape_text

__all__ = [
    "CREATE_SCHEMA_MIGRATIONS",
    "INSTALL_HINT",
    "MIGRATIONS",
    "RECORD_MIGRATION",
    "SCHEMA_VERSION",
    "TABLES",
    "PostgresStore",
    "ServerClock",
    "_connection_options",
    "check_schema_name",
    "escape_text",
    "migrate",
    "unescape_text",
]
