-- shiftchange PostgreSQL schema, version 3.
--
-- PostgreSQL text cannot hold U+0000, so the store escapes it. Versions 1 and 2 stored a string holding U+0000, or
-- starting with U+FDD0, as U+FDD0 followed by the string with U+FDD0 doubled and U+0000 written as U+FDD0 '0'. That
-- escape did not keep order: 'a' || U+0000 sorted after 'b', so ids with U+0000 or U+FDD0 came back from ORDER BY
-- (the claim queue's tie on created_at, the reaper's scan, tasks_in, intents_of) in another order than the protocol
-- promises. From this version on, U+0001 is written U+0001 U+0002 and U+0000 is written U+0001 U+0001 (both sort
-- below every other character, in the order of what they stand for), so the stored text sorts exactly as the string
-- does under COLLATE "C". This file rewrites every text value the old escape stored, and every value holding U+0001,
-- into the new one. Foreign keys are set aside while ids change and put back as they were, and only if an id changes.

CREATE FUNCTION pg_temp.shiftchange_escape_v3(stored text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $function$
DECLARE
    mark CONSTANT text := U&'\FDD0';
    written text := '';
    position integer := 2;
    letter text;
BEGIN
    IF left(stored, 1) <> mark THEN
        RETURN replace(stored, chr(1), chr(1) || chr(2));
    END IF;
    WHILE position <= length(stored) LOOP
        letter := substr(stored, position, 1);
        IF letter = mark THEN
            position := position + 1;
            letter := substr(stored, position, 1);
            written := written || CASE WHEN letter = '0' THEN chr(1) || chr(1) ELSE letter END;
        ELSIF letter = chr(1) THEN
            written := written || chr(1) || chr(2);
        ELSE
            written := written || letter;
        END IF;
        position := position + 1;
    END LOOP;
    RETURN written;
END
$function$;

DO $migration$
DECLARE
    needs_escape CONSTANT text := $$(left(%1$I, 1) = U&'\FDD0' OR strpos(%1$I, chr(1)) > 0)$$;
    target record;
    foreign_key record;
    foreign_keys text[][] := '{}';
    ids_change boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM tasks WHERE ' || needs_escape || ') OR EXISTS (SELECT 1 FROM attempts WHERE '
                   || needs_escape || ')', 'task_id')
        INTO ids_change;
    IF NOT ids_change THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM attempts WHERE ' || needs_escape || ')', 'attempt_id') INTO ids_change;
    END IF;
    IF ids_change THEN
        FOR foreign_key IN
            SELECT conrelid::regclass::text AS relation, conname, pg_get_constraintdef(oid) AS definition
            FROM pg_constraint WHERE contype = 'f' AND connamespace = current_schema()::regnamespace
        LOOP
            foreign_keys := foreign_keys || ARRAY[[foreign_key.relation, foreign_key.conname, foreign_key.definition]];
            EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', foreign_key.relation, foreign_key.conname);
        END LOOP;
    END IF;
    FOR target IN
        SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND data_type = 'text'
          AND table_name IN ('tasks', 'attempts', 'intents', 'events', 'leaders')
    LOOP
        EXECUTE format('UPDATE %I SET %2$I = pg_temp.shiftchange_escape_v3(%2$I) WHERE ' || format(needs_escape, target.column_name),
                       target.table_name, target.column_name);
    END LOOP;
    FOR k IN 1 .. coalesce(array_length(foreign_keys, 1), 0) LOOP
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', foreign_keys[k][1], foreign_keys[k][2], foreign_keys[k][3]);
    END LOOP;
END
$migration$;

DROP FUNCTION pg_temp.shiftchange_escape_v3(text);
