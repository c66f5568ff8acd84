-- shiftchange PostgreSQL schema, version 1.
--
-- Applied by shiftchange.core.postgres_store.migrate inside one transaction, with search_path set to the
-- store's schema (so no name here is qualified), and recorded in that schema's schema_migrations table.
-- A file, once released, is never edited: a change to the records is a new numbered file.
--
-- Columns mirror the record dataclasses of core/records.py field for field, in declaration order (a test
-- compares them): str -> text, int -> bigint, float -> double precision, bool -> boolean, and Budget and
-- Plan as JSON text; a field typed `X | None` is nullable, every other one NOT NULL. Every text column
-- collates "C": ids sort by code point, as the Python stores sort them, whatever the database's locale.

CREATE TABLE tasks (
    task_id         text COLLATE "C" PRIMARY KEY,
    objective       text COLLATE "C" NOT NULL,
    scope           text COLLATE "C" NOT NULL,
    workspace       text COLLATE "C" NOT NULL,
    state           text COLLATE "C" NOT NULL,
    budget          text COLLATE "C" NOT NULL,
    created_at      double precision NOT NULL,
    cost_usd        double precision NOT NULL,
    tokens          bigint NOT NULL,
    elapsed_s       double precision NOT NULL,
    interruptions   bigint NOT NULL,
    priority        bigint NOT NULL,
    deadline_at     double precision,
    decision        text COLLATE "C",
    decision_reason text COLLATE "C",
    version         bigint NOT NULL
);

-- The control plane's scan (tasks_in).
CREATE INDEX tasks_by_state ON tasks (state);

CREATE TABLE attempts (
    attempt_id          text COLLATE "C" PRIMARY KEY,
    task_id             text COLLATE "C" NOT NULL REFERENCES tasks (task_id),
    number              bigint NOT NULL,
    state               text COLLATE "C" NOT NULL,
    created_at          double precision NOT NULL,
    hypothesis          text COLLATE "C" NOT NULL,
    previous_attempt_id text COLLATE "C" REFERENCES attempts (attempt_id),
    reason              text COLLATE "C",
    plan                text COLLATE "C",
    worker_id           text COLLATE "C",
    generation          bigint NOT NULL,
    token_digest        text COLLATE "C",
    claimed_at          double precision,
    heartbeat_at        double precision,
    expires_at          double precision,
    manifest_digest     text COLLATE "C",
    worktree            text COLLATE "C",
    base_sha            text COLLATE "C",
    head_sha            text COLLATE "C",
    started_at          double precision,
    ended_at            double precision,
    timeout_budget_s    double precision NOT NULL,
    checkpoint          text COLLATE "C",
    result              text COLLATE "C",
    reconciliation      text COLLATE "C",
    failure_domain      text COLLATE "C",
    failure_signature   text COLLATE "C",
    evidence            text COLLATE "C",
    cancel_requested    boolean NOT NULL,
    cancel_reason       text COLLATE "C",
    cancel_deadline_at  double precision,
    eligible_at         double precision,
    backoff_s           double precision NOT NULL,
    fallback            text COLLATE "C",
    cost_usd            double precision NOT NULL,
    tokens              bigint NOT NULL,
    elapsed_s           double precision NOT NULL,
    version             bigint NOT NULL,
    CONSTRAINT attempts_task_number UNIQUE (task_id, number)
);

-- The reaper's scan and the claim queue (attempts_in, claimable).
CREATE INDEX attempts_by_state ON attempts (state);

CREATE TABLE intents (
    key         text COLLATE "C" PRIMARY KEY,
    task_id     text COLLATE "C" NOT NULL REFERENCES tasks (task_id),
    attempt_id  text COLLATE "C" NOT NULL REFERENCES attempts (attempt_id),
    operation   text COLLATE "C" NOT NULL,
    identity    text COLLATE "C" NOT NULL,
    request     text COLLATE "C" NOT NULL,
    minted_at   double precision NOT NULL,
    granted_at  double precision,
    deadline_at double precision,
    receipt     text COLLATE "C",
    dependency  text COLLATE "C" NOT NULL,
    outcome     text COLLATE "C",
    result      text COLLATE "C",
    version     bigint NOT NULL
);

CREATE INDEX intents_by_attempt ON intents (attempt_id);

-- The history. No foreign key: a refused call about an unknown task is history too. `seq` is not an identity
-- column: a sequence is not transactional, so a rolled-back append would leave a gap and numbers would be taken
-- in a different order than transactions commit (a reader polling `seq > N` could miss a late commit). The
-- store takes the next number from event_counter instead, whose row lock it then holds until commit.
CREATE TABLE events (
    seq           bigint PRIMARY KEY,
    at            double precision NOT NULL,
    actor         text COLLATE "C" NOT NULL,
    kind          text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    attempt_id    text COLLATE "C",
    accepted      boolean NOT NULL,
    reason        text COLLATE "C" NOT NULL,
    from_state    text COLLATE "C",
    to_state      text COLLATE "C",
    generation    bigint,
    worker_id     text COLLATE "C",
    detail        text COLLATE "C" NOT NULL,
    code          text COLLATE "C",
    late          boolean NOT NULL,
    expires_at    double precision,
    operation_key text COLLATE "C",
    retries       bigint NOT NULL
);

CREATE INDEX events_by_task ON events (task_id, seq);

-- One row: the last sequence number handed out. Updating it in the appending transaction numbers the history
-- 1..N in commit order, with no gap left by a rollback.
CREATE TABLE event_counter (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_seq bigint NOT NULL
);

INSERT INTO event_counter (one, last_seq) VALUES (true, 0);

-- Named leader leases (one admission leader among several orchestrator processes); columns mirror records.Leader.
CREATE TABLE leaders (
    name       text COLLATE "C" PRIMARY KEY,
    holder     text COLLATE "C" NOT NULL,
    generation bigint NOT NULL,
    expires_at double precision NOT NULL
);
