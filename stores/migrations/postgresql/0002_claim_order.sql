-- shiftchange PostgreSQL schema, version 2.
--
-- The claim queue in its own order: claimable() takes admitted Attempts oldest first (created_at, then attempt_id),
-- LIMIT n FOR NO KEY UPDATE SKIP LOCKED. With only an index on state, every claim sorted all admitted Attempts; with
-- this one it reads the first n of them in index order and stops.
CREATE INDEX attempts_claim_order ON attempts (state, created_at, attempt_id);
