WITH paused AS (
    UPDATE awa.cron_jobs SET paused_at = now(), paused_by = %(by)s, updated_at = now()
     WHERE name = %(name)s
    RETURNING name, paused_at
), noted AS (
    INSERT INTO awa_beat.pause_notes (name, paused_at, note)
    SELECT name, paused_at, %(note)s FROM paused
    ON CONFLICT (name) DO UPDATE SET paused_at = EXCLUDED.paused_at, note = EXCLUDED.note
)
SELECT paused_at FROM paused;
