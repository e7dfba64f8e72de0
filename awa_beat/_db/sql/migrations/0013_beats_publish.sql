-- Whether each beat publishes its deployment's Celery jobs (it has the dispatch bridge),
-- so that `awa-beat add`, status and doctor can tell a backlog no beat publishes.
ALTER TABLE awa_beat.beats ADD COLUMN IF NOT EXISTS publishes BOOLEAN NOT NULL DEFAULT false;
