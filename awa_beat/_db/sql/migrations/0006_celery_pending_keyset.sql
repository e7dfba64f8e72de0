-- standalone only
-- The bridge pages through pending jobs by key (fire time, id) instead of excluding the
-- batch in flight by id: each page starts where the last ended rather than walking
-- past every job published earlier in the same drain. NULL (a manual trigger) becomes
-- '' so that a row comparison can seek on the index; '' sorts before any fire time.
DROP INDEX IF EXISTS awa.jobs_celery_pending_fire_idx;
CREATE INDEX IF NOT EXISTS jobs_celery_pending_key_idx
    ON awa.jobs ((coalesce(metadata ->> 'cron_fire_time', '')), id)
    WHERE state = 'available' AND (metadata -> 'celery' ->> 'dispatch') = 'celery';
