-- Runs of the schedules that have a run limit: a cron_expr marker ending in
-- " runs=<n>" (awa_beat/markers.py; `at`, one_off and max_runs schedules). The fire
-- statement counts the runs it inserts here, in the statement that moves the cursor,
-- and fires no more than the limit allows: the count lives in the database, so no
-- replica and no restart can run a schedule more often. Our own table, never a column
-- of Awa's: Awa cannot parse these markers and never fires such rows.
CREATE TABLE IF NOT EXISTS awa_beat.schedule_runs (
    name  TEXT PRIMARY KEY,
    runs  BIGINT NOT NULL DEFAULT 0 CHECK (runs >= 0)
);
