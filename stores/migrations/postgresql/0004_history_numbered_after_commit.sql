-- shiftchange PostgreSQL schema, version 4.
--
-- The history is numbered after commit instead of under a lock held across the appending transaction. Versions 1-3
-- took each event's number from event_counter inside the appending transaction, so every transaction that appended
-- held that row's lock from its first event to its commit: event-writing commits ran one at a time and could not
-- share a WAL flush. From this version on:
--
-- - an event is inserted, at its transaction's commit, with `pos` (a sequence number: unique, but neither gapless
--   nor in commit order) and `xid` (its transaction), and no `seq`;
-- - `seq` is given later, in batches, by one sequencer at a time (event_counter's row lock, held only for the
--   batch): every committed event it can see that has none, ordered by the smallest `pos` of its transaction and
--   then by `pos`, numbered on from event_counter.last_seq. Readers read only numbered events.
--
-- Why that is the order readers need: a batch sees a transaction only once it committed, and every transaction that
-- committed before it too, so no event is ever numbered ahead of one that committed earlier and was still unseen
-- (no gap is ever filled later); and because a transaction inserts its events at commit, after it took every row
-- lock it holds, a transaction that waited for another's lock takes all its `pos` after the other's.
--
-- Existing events keep their numbers (pos = seq), and the sequence continues above them.

CREATE SEQUENCE events_pos;
SELECT setval('events_pos', greatest(1, (SELECT coalesce(max(seq), 0) FROM events)), (SELECT count(*) > 0 FROM events));

ALTER TABLE events ADD COLUMN pos bigint, ADD COLUMN xid xid8;
UPDATE events SET pos = seq;
ALTER TABLE events
    ALTER COLUMN pos SET NOT NULL,
    ALTER COLUMN pos SET DEFAULT nextval('events_pos'),
    ALTER COLUMN xid SET DEFAULT pg_current_xact_id(),
    DROP CONSTRAINT events_pkey,
    ALTER COLUMN seq DROP NOT NULL,
    ADD PRIMARY KEY (pos);
ALTER SEQUENCE events_pos OWNED BY events.pos;

CREATE UNIQUE INDEX events_by_seq ON events (seq);
CREATE INDEX events_unnumbered ON events (pos) WHERE seq IS NULL;

-- A guarded write is sent without waiting for its answer; its row count is checked by the server, and a write that
-- matched no row (or a duplicate insert that did nothing) aborts the transaction with SQLSTATE SCG01, naming which
-- of the transaction's writes it was. The store then says why, as before: changed since read, missing, or terminal.
CREATE FUNCTION shiftchange_guard(matched bigint, write_index integer) RETURNS integer LANGUAGE plpgsql AS $function$
BEGIN
    IF matched <> 1 THEN
        RAISE EXCEPTION 'shiftchange guard % matched % rows', write_index, matched USING ERRCODE = 'SCG01';
    END IF;
    RETURN write_index;
END
$function$;
