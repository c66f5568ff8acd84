"""PostgresStore binds every value as a parameter, and runs behind a transaction-mode pooler (issue 42, deliver item 4).

The store used to write every value into the statement text with its own
quoting, right only while `standard_conforming_strings` was on for the server
connection that ran the text, which the store set once per connection. Now
no value is ever part of the text, and no transaction depends on anything an
earlier one left on its connection:

- with `standard_conforming_strings` off on the very session that runs the
  store's statements, adversarial text (quotes, backslashes, `E'...'`, `$$`,
  NUL, SQL of its own) round-trips exactly through every way a value reaches
  the server: a single-row INSERT, a many-row INSERT (arrays), an UPDATE, the
  history's INSERT (arrays), a lookup by key, an array of keys, a leader row;
- behind a transaction-mode pooler, simulated (`TransactionPooler`): every
  transaction on the next of three server connections, each reset with
  DISCARD ALL first, so no session state (settings, search_path, prepared
  statements) carries from one transaction to the next. With `prepare=False`
  the core's whole cycle works there; with prepared statements (the default)
  it fails, saying so. tests/stores/test_pgbouncer.py runs the same behind a
  real PgBouncer when one is installed.
"""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shiftchange.core import (
    AdmissionConfig,
    CoreConfig,
    LedgerProvider,
    Orchestrator,
    Plan,
    ReliabilityConfig,
    StoreError,
    Submission,
)
from shiftchange.stores import open_store
from shiftchange.stores.urls import _postgres_arguments
from shiftchange.testing.stores import make_task
from tests.conftest import unsynced

pytestmark = pytest.mark.heavy

ADVERSARIAL = [
    "\\",
    "'",
    "''",
    "\\'",
    "'\\",
    "a\\'b",
    "'; DROP TABLE tasks; --",
    "\\'; SELECT pg_sleep(5); --",
    "E'\\x41'",
    "\\x41",
    "\\\\'",
    "a\\nb",
    "\\0",
    "$$",
    "$1",
    "$tag$ x $tag$",
    "%s",
    "%%",
    "{a,b}",
    '"',
    '\\"',
    "NULL",
    "",
    " ",
    "\t\n\r",
    "\x00",
    "\x01",
    "\x00\x01\x02'\\",
    "ünïcödé ✓ 日本 \U0001f600",
    "\u2028",
    "'||current_user||'",
]
"""Text that a literal quoted for standard_conforming_strings on would turn into other text, an error, or SQL, with it off."""

QUOTING = st.text(alphabet=st.sampled_from(list("\\'\"$%;{}(),E x\x00\x01\n")) | st.characters(codec="utf-8"), max_size=24)
"""Short text heavy with the characters quoting is about."""


def scs_off(url: str) -> str:
    """`url` whose sessions start with standard_conforming_strings off (commits unsynced, as the contract tests' stores)."""
    return unsynced(url) + "%20-c%20standard_conforming_strings%3Doff"


def session_setting(tx, name: str) -> str:
    """A setting as the session running transaction `tx` sees it, read on that very connection inside the transaction."""
    (value,) = tx.connection.execute(f"SHOW {name}").fetchone()
    return value


def write_everywhere(store, tag: str, texts: list[str]) -> None:
    """Each text through every path a value takes to the server, then read back and compared, exactly."""
    ids = [f"{tag}-{number}:{text}" for number, text in enumerate(texts)]
    one_by_one = [make_task(task_id, objective=text, scope=text, workspace=text) for task_id, text in zip(ids, texts, strict=True)]
    for task in one_by_one:  # a transaction of one insert: the single-row INSERT
        with store.transaction() as tx:
            tx.insert_task(task)
    many = [make_task(f"{task_id}/many", objective=text, scope=text) for task_id, text in zip(ids, texts, strict=True)]
    many += [make_task(f"{tag}-filler-{number}") for number in range(9)]  # past BULK_ROWS_MIN: the many-row INSERT (arrays)
    with store.transaction() as tx:
        for task in many:
            tx.insert_task(task)
    with store.transaction() as tx:
        assert session_setting(tx, "standard_conforming_strings") == "off"  # the premise, on the session that runs the store's SQL
        found = tx.tasks([*ids, *(task.task_id for task in many)])  # an array of keys
        assert [task.task_id for task in found] == [*ids, *(task.task_id for task in many)]
        assert [(task.objective, task.scope, task.workspace) for task in found[: len(ids)]] == [(text, text, text) for text in texts]
        for task, text in zip(found, texts, strict=False):
            tx.update_task(task, objective=text + "|" + text)  # the UPDATE
            tx.append_event(
                at=1.5, actor=text, kind="create", task_id=task.task_id, attempt_id=None, accepted=True, reason=text, detail=text
            )
        tx.put_leader(f"{tag}:{texts[0]}", texts[-1], 3, 2.5)
    for task_id, text in zip(ids, texts, strict=True):
        stored = store.get_task(task_id)  # a lookup by key
        assert (stored.task_id, stored.objective, stored.scope, stored.workspace) == (task_id, text + "|" + text, text, text)
        (event,) = store.events(task_id=task_id)
        assert (event.actor, event.reason, event.detail) == (text, text, text)
    with store.transaction() as tx:
        leader = tx.leader(f"{tag}:{texts[0]}")
        assert (leader.name, leader.holder) == (f"{tag}:{texts[0]}", texts[-1])


def test_adversarial_text_round_trips_exactly_with_standard_conforming_strings_off(make_postgres_store):
    store = make_postgres_store(conninfo=scs_off(make_postgres_store.url), pool_max=2)
    write_everywhere(store, "fixed", ADVERSARIAL)
    runs = itertools.count()

    @settings(max_examples=60, deadline=None)
    @given(st.lists(QUOTING, min_size=1, max_size=6))
    def round_trip(texts: list[str]) -> None:
        write_everywhere(store, f"drawn{next(runs)}", texts)

    round_trip()


# ---- a transaction-mode pooler, simulated


class TransactionPooler:
    """What a transaction-mode pooler does to a store behind it, in the place of its connection pool.

    Each transaction (each checkout) gets the next of `backends` server
    connections, round robin, so no two transactions in a row share one; and
    each comes with no session state left from before: `DISCARD ALL` is sent
    on it first, on the server connection itself and unknown to the client
    library, as a transaction that lands on another backend behind PgBouncer
    finds it (its settings at their defaults, its search_path the server's,
    no prepared statement of the client's). `backend_pids` records which
    server session ran each transaction.
    """

    def __init__(self, store, conninfo: str, backends: int = 3) -> None:
        import psycopg

        from shiftchange.stores.postgres import _connection_options

        self.conninfo = conninfo
        self.connections = []
        for _ in range(backends):
            connection = psycopg.connect(conninfo, **_connection_options(5))
            store._configure(connection)
            self.connections.append(connection)
        self.turns = itertools.count()
        self.backend_pids: list[int] = []
        self.resets = 0

    def getconn(self, timeout=None):
        connection = self.connections[next(self.turns) % len(self.connections)]
        assert connection.info.transaction_status == 0, "a transaction pooler hands out a server connection only between transactions"
        assert connection.pgconn.exec_(b"DISCARD ALL").status == 1  # COMMAND_OK
        self.resets += 1
        self.backend_pids.append(connection.info.backend_pid)
        return connection

    def putconn(self, connection) -> None:
        assert connection.info.transaction_status == 0, "the store hands back a connection with no transaction open"

    @contextlib.contextmanager
    def connection(self):
        connection = self.getconn()
        try:
            yield connection
        finally:
            self.putconn(connection)

    def close(self) -> None:
        for connection in self.connections:
            connection.close()


def behind_a_pooler(make_postgres_store, **options):
    """A store whose transactions each run as behind a transaction-mode pooler, its sessions starting with scs off."""
    conninfo = scs_off(make_postgres_store.url)
    store = make_postgres_store(conninfo=conninfo, pool_min=1, pool_max=1, **options)
    real, store._pool = store._pool, None
    real.close()
    store._pool = TransactionPooler(store, conninfo)
    return store


def cycle_every_task(store, count: int) -> list:
    """The core's whole life of `count` tasks on `store`: a bulk intake, admission, claim and start, renew, complete."""
    clock = store.clock()
    unlimited = AdmissionConfig(queue_depth_max=10**6, queue_age_max_s=1e9, partition_concurrency_max=10**6)
    core = Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(admitted_max=10**6), ReliabilityConfig(admission=unlimited))
    texts = (ADVERSARIAL * 2)[:count]
    submitted = core.submit_many([Submission(f"t{number}:{text}", text, "ws", Plan(text)) for number, text in enumerate(texts)])
    assert all(outcome.accepted for outcome in submitted)
    core.run_admission()
    finished = []
    for _ in range(count):
        claim, started = core.claim_next_and_start("worker-1", "ws")
        assert started.accepted
        fence = (claim.lease.attempt_id, claim.lease.generation, claim.lease.token)
        assert core.renew_lease(*fence).accepted
        assert core.complete_attempt(*fence, "done").accepted
        finished.append(claim.lease.attempt_id)
    return finished


def test_behind_a_transaction_mode_pooler_the_store_works_unprepared(make_postgres_store):
    store = behind_a_pooler(make_postgres_store, prepare=False)
    finished = cycle_every_task(store, 12)
    pooler = store._pool
    assert sorted(finished) == sorted(f"t{number}:{text}#1" for number, text in enumerate((ADVERSARIAL * 2)[:12]))
    events = store.events()
    assert [event.seq for event in events] == list(range(1, len(events) + 1))  # numbered 1..N, no gap, across backends
    assert {event.kind for event in events} >= {"claim", "start", "renew", "complete"}
    assert all(event.accepted for event in events if event.kind in ("claim", "start", "renew", "complete"))
    assert pooler.resets >= 3 * 12 and len(set(pooler.backend_pids)) == 3  # claim+start, renew, complete: a transaction each
    assert all(before != after for before, after in itertools.pairwise(pooler.backend_pids))  # never twice on one backend
    store.close()


def test_behind_a_transaction_mode_pooler_prepared_statements_fail_and_say_so(make_postgres_store):
    store = behind_a_pooler(make_postgres_store)  # prepare=True, the default: statements prepared once per connection
    with pytest.raises(StoreError, match=r'prepared statement "shiftchange_\w+" does not exist'):
        cycle_every_task(store, 12)
    store.close()


def test_prepare_false_is_a_url_parameter_too(make_postgres_store):
    conninfo, options = _postgres_arguments("postgresql://u@h/db?prepare=false&schema=s&sslmode=disable", {})
    assert (conninfo, options) == ("postgresql://u@h/db?sslmode=disable", {"prepare": False, "schema": "s"})
    schema = make_postgres_store().schema
    with open_store(f"{make_postgres_store.url}?schema={schema}&prepare=off", migrate=False) as store:
        assert store.prepare is False
        assert store.get_task("none") is None
