-- Every fixed statement a PostgreSQL store runs, by name: what a porter reads to see the store's SQL in one place.
--
-- statements.py reads this file once, at import. Each statement starts at a `-- name: NAME` line and runs to the
-- next; the comment lines above it say why it is written so. Every value is a parameter (%s). Column lists are
-- never typed here: they come from the record types' fields (`{tasks}`, `{attempts}`, `{intents}`, `{events}`,
-- `{leaders}`: that table's columns in its record's field order; `{attempts_as_picked}`, `{tasks_as_task}`: the
-- same, each qualified by that alias), so a field added to a record is read by every statement at once.
-- `{lock}` is the row lock every read that precedes a write takes: FOR NO KEY UPDATE, not FOR UPDATE, so that a
-- foreign key's check (an Attempt inserted for a locked task) does not wait for it.
--
-- What is not here is built in statements.py, because its text depends on the call: the INSERT of one record or of
-- many, the UPDATE of whichever columns a transaction changed (with its version and terminal-state guard), and the
-- INSERT of a transaction's events (one text per number of rows).

-- ---- a transaction's frame: begun, set for itself alone, committed or rolled back

-- name: BEGIN
BEGIN ISOLATION LEVEL READ COMMITTED

-- What every transaction sets first, for itself alone: the store's schema and its two lock bounds. Nothing is set on
-- a session, so no transaction depends on what an earlier one left on its connection (a transaction-mode pooler such
-- as PgBouncer hands each transaction to whichever server connection is free).
-- name: SETTINGS
SELECT set_config('search_path', %s, true), set_config('lock_timeout', %s, true),
       set_config('idle_in_transaction_session_timeout', %s, true)

-- name: COMMIT
COMMIT

-- name: ROLLBACK
ROLLBACK

-- The server's time, read after the statement before it finished (its lock waits included).
-- name: NOW
SELECT extract(epoch FROM clock_timestamp())::float8

-- ---- tasks

-- name: SELECT_TASK
SELECT {tasks} FROM tasks WHERE task_id = %s

-- name: LOCK_TASK
SELECT {tasks} FROM tasks WHERE task_id = %s {lock}

-- name: LOCK_TASK_ROW
SELECT 1 FROM tasks WHERE task_id = %s {lock}

-- name: SELECT_TASKS_IN_STATES
SELECT {tasks} FROM tasks WHERE state = ANY(%s) ORDER BY task_id

-- name: LOCK_TASKS
SELECT {tasks} FROM tasks WHERE task_id = ANY(%s) ORDER BY task_id {lock}

-- name: SELECT_WORKSPACE
SELECT workspace FROM tasks WHERE task_id = %s

-- ---- attempts

-- name: SELECT_ATTEMPT
SELECT {attempts} FROM attempts WHERE attempt_id = %s

-- name: LOCK_ATTEMPT
SELECT {attempts} FROM attempts WHERE attempt_id = %s {lock}

-- name: SELECT_ATTEMPTS_OF_TASK
SELECT {attempts} FROM attempts WHERE task_id = %s ORDER BY number

-- name: LOCK_ATTEMPTS_OF_TASK
SELECT {attempts} FROM attempts WHERE task_id = %s ORDER BY number {lock}

-- name: SELECT_ATTEMPTS_IN_STATES
SELECT {attempts} FROM attempts WHERE state = ANY(%s) ORDER BY attempt_id

-- name: COUNT_ATTEMPTS_OF_TASK
SELECT count(*) FROM attempts WHERE task_id = %s

-- ---- the claim queue
--
-- Claims take Attempts oldest first and skip those another claim holds. A worker serves one workspace: the filter
-- is in the query (one primary-key probe of tasks per candidate, in claim order), so Attempts of other workspaces
-- are neither returned nor locked, and never starve this worker's queue. The _ONE forms ask for one state: `state =
-- %s` lets the planner read attempts_claim_order in order and stop after `limit` rows (0.06 ms with 3,000
-- admitted), where `= ANY` sorts every admitted Attempt first (1.5 ms).

-- name: LOCK_CLAIMABLE
SELECT {attempts} FROM attempts WHERE state = ANY(%s)
 ORDER BY created_at, attempt_id LIMIT %s {lock} SKIP LOCKED

-- name: LOCK_CLAIMABLE_IN
SELECT {attempts} FROM attempts WHERE state = ANY(%s)
   AND EXISTS (SELECT 1 FROM tasks WHERE tasks.task_id = attempts.task_id AND tasks.workspace = %s)
 ORDER BY created_at, attempt_id LIMIT %s {lock} SKIP LOCKED

-- name: LOCK_CLAIMABLE_ONE
SELECT {attempts} FROM attempts WHERE state = %s
 ORDER BY created_at, attempt_id LIMIT %s {lock} SKIP LOCKED

-- name: LOCK_CLAIMABLE_ONE_IN
SELECT {attempts} FROM attempts WHERE state = %s
   AND EXISTS (SELECT 1 FROM tasks WHERE tasks.task_id = attempts.task_id AND tasks.workspace = %s)
 ORDER BY created_at, attempt_id LIMIT %s {lock} SKIP LOCKED

-- The claim queue's pick of one Attempt with its task, both locked, in the order a claim takes them (the Attempt
-- first). Each row is the Attempt's columns, then its task's. The task's id is kept as a transaction-local setting,
-- so that the next statement of the same message (PICKED_SIBLINGS, with a snapshot of its own, taken once these
-- locks are held) reads and locks the task's Attempts: what `attempts_of` would read one round trip later.
-- name: PICK_WITH_TASK
WITH picked AS (
    SELECT * FROM attempts WHERE state = %s
     ORDER BY created_at, attempt_id LIMIT 1 {lock} SKIP LOCKED
)
SELECT {attempts_as_picked}, {tasks_as_task}, set_config('shiftchange.picked_task', task.task_id, true)
  FROM picked JOIN tasks AS task ON task.task_id = picked.task_id {lock} OF task

-- name: PICK_WITH_TASK_IN
WITH picked AS (
    SELECT * FROM attempts WHERE state = %s
       AND EXISTS (SELECT 1 FROM tasks WHERE tasks.task_id = attempts.task_id AND tasks.workspace = %s)
     ORDER BY created_at, attempt_id LIMIT 1 {lock} SKIP LOCKED
)
SELECT {attempts_as_picked}, {tasks_as_task}, set_config('shiftchange.picked_task', task.task_id, true)
  FROM picked JOIN tasks AS task ON task.task_id = picked.task_id {lock} OF task

-- name: PICKED_SIBLINGS
SELECT {attempts} FROM attempts WHERE task_id = current_setting('shiftchange.picked_task') ORDER BY number {lock}

-- name: FORGET_PICKED
SELECT set_config('shiftchange.picked_task', '', true)

-- ---- guards sent with a write: each raises SCG01 (shiftchange_guard, migrations/postgresql/0004) when it fails;
-- every guarded statement takes the write's index as its last parameter.

-- insert_attempt's checks, sent with its INSERT: the task exists (and is locked), and the Attempt is its next number.
-- name: LOCK_TASK_GUARD
WITH task AS (SELECT 1 FROM tasks WHERE task_id = %s {lock})
SELECT shiftchange_guard(count(*), %s) FROM task

-- name: COUNT_GUARD
WITH siblings AS (SELECT count(*) AS number FROM attempts WHERE task_id = %s)
SELECT shiftchange_guard((number = %s)::int, %s) FROM siblings

-- An intent's parents exist: its task and its Attempt.
-- name: PARENTS_GUARD
SELECT shiftchange_guard((EXISTS (SELECT 1 FROM tasks WHERE task_id = %s)
                          AND EXISTS (SELECT 1 FROM attempts WHERE attempt_id = %s))::int, %s)

-- ---- intents

-- name: SELECT_INTENT
SELECT {intents} FROM intents WHERE key = %s

-- name: LOCK_INTENT
SELECT {intents} FROM intents WHERE key = %s {lock}

-- name: SELECT_INTENTS_OF_ATTEMPT
SELECT {intents} FROM intents WHERE attempt_id = %s ORDER BY key

-- name: LOCK_INTENTS_OF_ATTEMPT
SELECT {intents} FROM intents WHERE attempt_id = %s ORDER BY key {lock}

-- ---- the history: written unnumbered with each COMMIT, numbered after commit by one sequencer at a time

-- The sequencer holds event_counter's row for the batch only. The lock is its own statement so that the numbering
-- statement's snapshot is taken after it: it then sees every event the previous batch numbered as numbered.
-- name: LOCK_COUNTER
SELECT last_seq FROM event_counter FOR UPDATE

-- name: NUMBER_EVENTS
WITH unnumbered AS (SELECT pos, min(pos) OVER (PARTITION BY xid) AS first FROM events WHERE seq IS NULL),
     ranked AS (SELECT pos, row_number() OVER (ORDER BY first, pos) AS rank FROM unnumbered),
     numbered AS (UPDATE events SET seq = (SELECT last_seq FROM event_counter) + ranked.rank FROM ranked
                   WHERE events.pos = ranked.pos AND events.seq IS NULL RETURNING 1)
UPDATE event_counter SET last_seq = last_seq + (SELECT count(*) FROM numbered) RETURNING last_seq

-- name: ANY_UNNUMBERED
SELECT EXISTS (SELECT 1 FROM events WHERE seq IS NULL)

-- name: SELECT_EVENTS
SELECT {events} FROM events WHERE seq > %s ORDER BY seq

-- name: SELECT_EVENTS_OF_TASK
SELECT {events} FROM events WHERE task_id = %s AND seq > %s ORDER BY seq

-- A transaction that admits an Attempt announces its workspace, delivered at its commit.
-- name: NOTIFY
SELECT pg_notify(%s, %s)

-- ---- leaders

-- name: LOCK_LEADER
SELECT {leaders} FROM leaders WHERE name = %s {lock}

-- As the SQLite store writes it: the caller read the row (locked, if it exists) in this transaction and decided. Two
-- transactions that both found no row both write; the second waits for the first's commit and overwrites it, and the
-- loser's next fenced read of the lease sees it lost.
-- name: PUT_LEADER
INSERT INTO leaders (name, holder, generation, expires_at) VALUES (%s, %s, %s, %s)
    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, generation = excluded.generation,
                                     expires_at = excluded.expires_at

-- ---- the schema and its migrations

-- name: CREATE_SCHEMA_MIGRATIONS
CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
                                applied_at timestamptz NOT NULL DEFAULT now())

-- name: RECORD_MIGRATION
INSERT INTO schema_migrations (version, name) VALUES (%s, %s)

-- name: SCHEMA_RELATIONS
SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')

-- Migrations of one schema run one at a time, under a transaction-level advisory lock named for the schema.
-- name: ADVISORY_LOCK
SELECT pg_advisory_xact_lock(%s)

-- The schemas of a database that hold a shiftchange store (its migrations' table and its three main ones).
-- name: STORE_SCHEMAS
SELECT n.nspname FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid
 WHERE c.relkind IN ('r', 'p') AND c.relname IN ('schema_migrations', 'tasks', 'attempts', 'events')
 GROUP BY n.nspname HAVING count(DISTINCT c.relname) = 4 ORDER BY 1

-- name: SCHEMA_EXISTS
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s)
