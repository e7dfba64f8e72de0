-- Backfill, the catch-up window and overlap buffer_one (docs/operating-time.md). In
-- awa_beat's own schema in both layouts: nothing is added to Awa's tables.
--
-- The fire times a backfill gave a job, one row each. Its key makes a backfill
-- idempotent: the same range run twice, or on two replicas at once, inserts each fire
-- time's job once (INSERT ... ON CONFLICT DO NOTHING on the key, in the statement that
-- inserts the jobs). Kept with no retention, so that a backfill repeated long after the
-- jobs were pruned still adds nothing twice; a row goes with its schedule.
CREATE TABLE IF NOT EXISTS awa_beat.backfills (
    schedule       TEXT NOT NULL,
    fire_time      TIMESTAMPTZ NOT NULL,
    job_id         BIGINT,
    backfilled_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    backfilled_by  TEXT NOT NULL,
    PRIMARY KEY (schedule, fire_time)
);

-- Occurrences gain 'buffered': a fire that overlap buffer_one held while the run before
-- it had not finished, recorded when it is held. A skip for the catch-up window is a
-- 'skipped' occurrence (first and last fire time and how many) whose reason says so.
ALTER TABLE awa_beat.occurrences DROP CONSTRAINT IF EXISTS occurrences_kind_check;
ALTER TABLE awa_beat.occurrences ADD CONSTRAINT occurrences_kind_check
    CHECK (kind IN ('skipped', 'coalesced', 'buffered'));

-- The one fire overlap buffer_one holds for a schedule, started when the run in
-- last_runs finishes.
ALTER TABLE awa_beat.last_runs ADD COLUMN IF NOT EXISTS buffered_fire_time TIMESTAMPTZ;
CREATE INDEX IF NOT EXISTS last_runs_buffered_idx ON awa_beat.last_runs (name)
    WHERE buffered_fire_time IS NOT NULL;
