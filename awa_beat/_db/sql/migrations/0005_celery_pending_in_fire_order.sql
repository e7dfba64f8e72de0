-- standalone only
-- The bridge reads pending jobs in fire order; index exactly that order so each batch
-- is an index range scan instead of a sort of the whole backlog. Jobs triggered by
-- hand carry no fire time and come first.
DROP INDEX IF EXISTS awa.jobs_celery_pending_idx;
CREATE INDEX IF NOT EXISTS jobs_celery_pending_fire_idx
    ON awa.jobs ((metadata ->> 'cron_fire_time') NULLS FIRST, id)
    WHERE state = 'available' AND (metadata -> 'celery' ->> 'dispatch') = 'celery';
