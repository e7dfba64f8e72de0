-- What became of each fire (docs/outcomes.md). In awa_beat's own schema in both
-- layouts: nothing is added to Awa's tables.
--
-- One row per Celery task awa-beat fired, written by the workers that ran it
-- (awa_beat_track_outcomes). Keyed by the task id the bridge derives from schedule
-- and fire time, so a message delivered twice lands on the same row, and the
-- at-most-once claim is an INSERT ... ON CONFLICT DO NOTHING on that key. fire_time is
-- the job's cron_fire_time in Awa's text form (NULL for a manual trigger).
CREATE TABLE IF NOT EXISTS awa_beat.outcomes (
    task_id      TEXT PRIMARY KEY,
    schedule     TEXT NOT NULL,
    fire_time    TEXT,
    job_id       BIGINT,
    state        TEXT NOT NULL
        CHECK (state IN ('started', 'succeeded', 'failed', 'retried', 'revoked', 'lost')),
    retries      INTEGER NOT NULL DEFAULT 0,
    started_at   TIMESTAMPTZ,
    finished_at  TIMESTAMPTZ,
    runtime      DOUBLE PRECISION,
    worker       TEXT,
    error        TEXT,
    duplicates   INTEGER NOT NULL DEFAULT 0,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS outcomes_schedule_idx ON awa_beat.outcomes (schedule, fire_time);
CREATE INDEX IF NOT EXISTS outcomes_updated_idx ON awa_beat.outcomes (updated_at);

-- The last fire that made a job, for schedules with an overlap policy only: the fire
-- statement reads it to decide whether that run is still unfinished.
CREATE TABLE IF NOT EXISTS awa_beat.last_runs (
    name       TEXT PRIMARY KEY,
    fire_time  TEXT NOT NULL,
    job_id     BIGINT NOT NULL,
    fired_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Occurrences that made no job, recorded by the fire statement that passed them over:
-- 'skipped' (the overlap policy; one row per fire time) and 'coalesced' (the fires a
-- coalesce left out after downtime or a pause: the first and last of them, and how many).
CREATE TABLE IF NOT EXISTS awa_beat.occurrences (
    id              BIGSERIAL PRIMARY KEY,
    schedule        TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('skipped', 'coalesced')),
    fire_time       TIMESTAMPTZ NOT NULL,
    last_fire_time  TIMESTAMPTZ,
    count           INTEGER NOT NULL DEFAULT 1,
    reason          TEXT NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS occurrences_schedule_idx ON awa_beat.occurrences (schedule, fire_time);
CREATE INDEX IF NOT EXISTS occurrences_recorded_idx ON awa_beat.occurrences (recorded_at);
