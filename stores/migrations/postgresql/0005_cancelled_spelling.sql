-- shiftchange PostgreSQL schema, version 5.
--
-- The Task state `canceled` is spelled `cancelled`, as the Attempt state always was (one word, one spelling). Tasks
-- in the old state are rewritten, and so are the history's from_state and to_state, rather than every reader
-- accepting both spellings: the checkers (cancel_is_final), the timeline and spec coverage match those fields against
-- the spec's names, and a reader that forgot the old one would pass a reopened cancelled task in silence. The rewrite
-- changes no meaning, since no Attempt state was ever spelled `canceled`, so only Task states match. An event's
-- reason and detail are what was said at the time and are kept word for word. A task's version is left alone: it
-- is the same record, and since no row leaves a terminal state, no write holding the old version could follow.

UPDATE tasks SET state = 'cancelled' WHERE state = 'canceled';
UPDATE events SET from_state = 'cancelled' WHERE from_state = 'canceled';
UPDATE events SET to_state = 'cancelled' WHERE to_state = 'canceled';
