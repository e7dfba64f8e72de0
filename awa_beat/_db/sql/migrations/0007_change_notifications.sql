-- standalone only
-- Wake the leading beat when the schedule table changes or a job is inserted, instead
-- of it polling every second: one NOTIFY per statement (PostgreSQL folds identical
-- notifications of a transaction into one and delivers them at commit). Statement-level,
-- so a fire batch of 2,000 rows costs one notification, not 2,000. The payload is the
-- table's name, a space, and the writing session's awa_beat.origin (set by beat's own
-- sessions, empty for anyone else's), so that a leader can pass over its own writes.
-- On a database where Awa owns these tables nothing is added to them, and beat polls.
CREATE OR REPLACE FUNCTION awa_beat.notify_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('awa_beat_changes', TG_TABLE_NAME || ' '
                      || coalesce(current_setting('awa_beat.origin', true), ''));
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS awa_beat_cron_jobs_changed ON awa.cron_jobs;
CREATE TRIGGER awa_beat_cron_jobs_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON awa.cron_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION awa_beat.notify_change();
DROP TRIGGER IF EXISTS awa_beat_jobs_inserted ON awa.jobs;
CREATE TRIGGER awa_beat_jobs_inserted
    AFTER INSERT ON awa.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION awa_beat.notify_change();
