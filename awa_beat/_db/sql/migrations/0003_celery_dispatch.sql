-- standalone only
-- The Celery dispatch bridge's outbox is awa.jobs itself: a job for Celery stays
-- 'available' until the broker accepted its message, then becomes 'completed' with
-- its task id in metadata. These indexes keep the bridge's reads small however many
-- jobs are stored. (On a database where Awa owns awa.jobs, Celery dispatch is refused.)
CREATE INDEX IF NOT EXISTS jobs_celery_pending_idx ON awa.jobs (id)
    WHERE state = 'available' AND (metadata -> 'celery' ->> 'dispatch') = 'celery';
CREATE INDEX IF NOT EXISTS jobs_celery_published_idx ON awa.jobs (finalized_at)
    WHERE state = 'completed' AND (metadata -> 'celery' ->> 'dispatch') = 'celery';
